import Dispatch
import Synchronization
internal import CSQLite

/// Moves the WAL's pages into the database file on a queue of its own, so that no commit
/// waits for a checkpoint. SQLite's automatic checkpoint runs inside the commit that crosses
/// its threshold, with the page writes and fsyncs that takes, and holds the store's lane
/// meanwhile: the events role spent most of a burst of first-time counts there. Each
/// connection's WAL hook (which replaces the automatic checkpoint) calls `committed` with
/// the pages in the WAL; past `threshold` one PASSIVE checkpoint at a time runs on a
/// connection of its own, copying what no reader still needs and never waiting for a lock.
final class SQLiteCheckpointer: @unchecked Sendable {
    /// SQLite's own default for the automatic checkpoint (pages of the WAL).
    static let threshold: Int32 = 1_000

    private let path: String
    private let queue = DispatchQueue(label: "pushfan.store.checkpoint")
    /// A commit asked for a checkpoint that has not started yet.
    private let requested = Atomic<Bool>(false)
    /// Checkpoints are running (or queued) on `queue`.
    private let running = Atomic<Bool>(false)
    /// Opened on the first checkpoint; touched only on `queue`.
    private var database: OpaquePointer?

    init(path: String) {
        self.path = path
    }

    /// A commit left `pages` pages in the WAL. A commit made while a checkpoint runs gets one
    /// after it, so the last commits of a burst are not left in the WAL until the next one.
    func committed(pages: Int32) {
        guard pages >= Self.threshold else { return }
        requested.store(true, ordering: .releasing)
        startIfIdle()
    }

    private func startIfIdle() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { [self] in
            while requested.exchange(false, ordering: .acquiringAndReleasing) { checkpoint() }
            running.store(false, ordering: .releasing)
            // A request that came after the loop's last look and saw it still running.
            if requested.load(ordering: .acquiring) { startIfIdle() }
        }
    }

    /// Closes its connection once a running checkpoint is done; nothing runs after.
    func close() {
        queue.sync {
            sqlite3_close_v2(database)
            database = nil
        }
    }

    private func checkpoint() {
        if database == nil {
            guard sqlite3_open_v2(path, &database, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK,
                  // A connection learns that the file is in WAL mode on its first read; before
                  // it a checkpoint does nothing.
                  sqlite3_exec(database, "PRAGMA schema_version", nil, nil, nil) == SQLITE_OK
            else {
                sqlite3_close_v2(database)
                database = nil
                return
            }
        }
        sqlite3_wal_checkpoint_v2(database, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
    }
}
