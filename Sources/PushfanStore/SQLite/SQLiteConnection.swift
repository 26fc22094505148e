internal import CSQLite
import Foundation
import PushfanMessages
import PushfanSupport

/// One SQLite connection in WAL mode, so several worker processes on one machine can read
/// while one writes. Not thread-safe by itself: the store calls it from one serial queue.
final class SQLiteConnection: SQLConnection {
    private var database: OpaquePointer?
    /// Prepared statements by SQL text; finalized in `deinit` before the database closes.
    private var statements: [String: OpaquePointer] = [:]
    /// Statements run once per row by the device writer; never evicted, so a handle from
    /// `pinned(_:)` stays valid as long as the connection.
    private var pinnedStatements: [String: OpaquePointer] = [:]
    let path: String
    /// How long a statement waits for another process's write lock before a retry.
    private let busyTimeout: Duration
    private let busyRetries: Int
    /// The busy handler's deadline; owned here, so it outlives the handler's use of it.
    private let busyWait: BusyWait
    /// Checkpoints the WAL off the committing thread; owned here, like `busyWait`.
    private let checkpointer: SQLiteCheckpointer

    init(path: String, busyTimeout: Duration = .seconds(5), busyRetries: Int = 2) throws(StoreError) {
        self.path = path
        self.busyTimeout = busyTimeout
        self.busyRetries = busyRetries
        busyWait = BusyWait(timeout: busyTimeout)
        checkpointer = SQLiteCheckpointer(path: path)
        _ = Self.configured
        Self.createPrivately(path)
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &database, flags, nil)
        guard rc == SQLITE_OK, database != nil else {
            let message = database.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(database)
            database = nil
            throw StoreError.unavailable("cannot open SQLite database \(path): \(message)")
        }
        // Waits for another writer in steps of 250 µs up to the busy timeout. SQLite's own
        // busy_timeout sleeps 1, 2, 5, 10 ... 100 ms between tries: with several worker
        // processes writing small transactions that idled the machine (measured: 40% idle
        // CPU during a campaign on two workers). The timeout is kept by the clock, not by
        // counting steps: on a loaded machine a 250 µs sleep lasts far longer.
        sqlite3_busy_handler(database, { context, count in
            guard let context else { return 0 }
            let wait = Unmanaged<BusyWait>.fromOpaque(context).takeUnretainedValue()
            return wait.keepWaiting(first: count == 0) ? 1 : 0
        }, Unmanaged.passUnretained(busyWait).toOpaque())
        try executeScript("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY;")
        sqlite3_wal_hook(database, { context, _, _, pages in
            if let context { Unmanaged<SQLiteCheckpointer>.fromOpaque(context).takeUnretainedValue().committed(pages: pages) }
            return SQLITE_OK
        }, Unmanaged.passUnretained(checkpointer).toOpaque())
    }

    /// A new database file is made readable by its owner only (0600): it holds every device
    /// token and live provider tokens. SQLite gives its -wal and -shm files the database
    /// file's mode. An existing file keeps the mode its operator chose.
    private static func createPrivately(_ path: String) {
        guard path != ":memory:", !path.hasPrefix("file:") else { return }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor >= 0 { close(descriptor) }
    }

    /// Process-wide settings, applied once before the first connection opens.
    private static let configured: Void = { _ = pushfan_sqlite_disable_memstatus() }()

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        for statement in pinnedStatements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(database)
        checkpointer.close()
    }

    /// The one place where SQLite result codes become `StoreError`s.
    private func check(_ rc: Int32, _ what: @autoclosure () -> String) throws(StoreError) {
        guard rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE else { return }
        let message = "\(what()): \(String(cString: sqlite3_errmsg(database)))"
        switch rc & 0xFF {
        case SQLITE_BUSY, SQLITE_LOCKED:
            throw StoreError.unavailable("SQLite database is locked by another process (\(message))")
        case SQLITE_CANTOPEN, SQLITE_IOERR, SQLITE_FULL, SQLITE_READONLY:
            throw StoreError.unavailable(message)
        case SQLITE_CONSTRAINT:
            throw StoreError.conflict(message)
        default:
            throw StoreError.database(message)
        }
    }

    /// Statements kept prepared; beyond this the cache starts over (long `IN (...)` lists
    /// make many one-off statements).
    private let statementCacheLimit = 64

    private func prepare(_ sql: String) throws(StoreError) -> OpaquePointer {
        if let cached = statements[sql] { return cached }
        if statements.count >= statementCacheLimit {
            for statement in statements.values { sqlite3_finalize(statement) }
            statements.removeAll()
        }
        var statement: OpaquePointer?
        try check(sqlite3_prepare_v3(database, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil), "prepare")
        guard let statement else { throw StoreError.database("empty statement") }
        statements[sql] = statement
        return statement
    }

    /// A statement prepared once and kept, for loops that bind values straight from Swift
    /// strings: no SQL text is built or looked up per row.
    func pinned(_ sql: String) throws(StoreError) -> SQLiteStatement {
        if let handle = pinnedStatements[sql] { return SQLiteStatement(connection: self, handle: handle) }
        var statement: OpaquePointer?
        try check(sqlite3_prepare_v3(database, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil), "prepare")
        guard let statement else { throw StoreError.database("empty statement") }
        pinnedStatements[sql] = statement
        return SQLiteStatement(connection: self, handle: statement)
    }

    /// Steps a pinned statement to completion inside the caller's transaction.
    fileprivate func step(_ handle: OpaquePointer, _ row: (any SQLRow) throws(StoreError) -> Void) throws(StoreError) {
        defer { sqlite3_reset(handle) }
        var rc = sqlite3_step(handle)
        while rc == SQLITE_ROW {
            try row(SQLiteRow(statement: handle))
            rc = sqlite3_step(handle)
        }
        try check(rc, "step")
    }

    /// Rows the last finished INSERT, UPDATE or DELETE changed (0 for an insert that met
    /// `ON CONFLICT DO NOTHING`).
    var changes: Int { Int(sqlite3_changes(database)) }

    /// The row key of the last row an INSERT created on this connection.
    var lastInsertRowKey: Int64 { sqlite3_last_insert_rowid(database) }

    fileprivate func checkBind(_ rc: Int32, _ index: Int32) throws(StoreError) { try check(rc, "bind parameter \(index)") }

    private func bind(_ statement: OpaquePointer, _ parameters: [SQLValue]) throws(StoreError) {
        for (offset, value) in parameters.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(statement, index)
            case .integer(let number): rc = sqlite3_bind_int64(statement, index, number)
            case .real(let number): rc = sqlite3_bind_double(statement, index, number)
            // The text's whole length: a NUL inside must not cut `shop\0…` down to `shop`.
            case .text(let text): rc = sqlite3_bind_text(statement, index, text, Int32(text.utf8.count), pushfan_sqlite_transient())
            }
            try check(rc, "bind parameter \(index)")
        }
    }

    /// Steps a statement to completion, retrying a bounded number of times when another
    /// process held the lock past the busy timeout.
    private func run(_ statement: SQLStatement, _ row: (any SQLRow) throws(StoreError) -> Void) throws(StoreError) {
        let (sql, parameters) = statement.render(SQLiteSyntax())
        let prepared = try prepare(sql)
        defer {
            sqlite3_reset(prepared)
            sqlite3_clear_bindings(prepared)
        }
        var attempt = 0
        while true {
            try bind(prepared, parameters)
            var rc = sqlite3_step(prepared)
            while rc == SQLITE_ROW {
                try row(SQLiteRow(statement: prepared))
                rc = sqlite3_step(prepared)
            }
            if rc == SQLITE_DONE { return }
            let busy = (rc & 0xFF) == SQLITE_BUSY
            sqlite3_reset(prepared)
            // Inside a transaction the whole transaction must be retried by the caller.
            if busy && attempt < busyRetries && sqlite3_get_autocommit(database) != 0 {
                attempt += 1
                continue
            }
            try check(rc, "step")
            return
        }
    }

    @discardableResult
    func execute(_ statement: SQLStatement) throws(StoreError) -> Int {
        try run(statement) { _ throws(StoreError) in }
        return Int(sqlite3_changes(database))
    }

    func query(_ statement: SQLStatement, _ row: (any SQLRow) throws(StoreError) -> Void) throws(StoreError) {
        try run(statement, row)
    }

    func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        // IMMEDIATE takes the write lock now, so a busy database fails here, before any work.
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            _ = try? execute("ROLLBACK")
            throw error
        }
    }

    func executeScript(_ sql: String) throws(StoreError) {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(database, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? ""
            sqlite3_free(message)
            try check(rc, "script (\(text))")
        }
    }
}

/// A pinned statement: bind every parameter, then `run`.
struct SQLiteStatement {
    /// Strong: a statement is a short-lived local, and an `unowned` reference would be
    /// checked on every bind (eleven per imported device).
    fileprivate let connection: SQLiteConnection
    fileprivate let handle: OpaquePointer

    func bind(_ index: Int32, _ text: String?) throws(StoreError) {
        guard let text else { return try checked(sqlite3_bind_null(handle, index), index) }
        // A native string's UTF-8 is passed in place; passing the String as `const char *`
        // would copy it into a temporary C string (an allocation per value).
        let rc = text.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.withMemoryRebound(to: CChar.self) { sqlite3_bind_text(handle, index, $0.baseAddress, Int32($0.count), pushfan_sqlite_transient()) }
        } ?? sqlite3_bind_text(handle, index, text, Int32(text.utf8.count), pushfan_sqlite_transient())
        try checked(rc, index)
    }

    func bind(_ index: Int32, _ number: Int64?) throws(StoreError) {
        try checked(number.map { sqlite3_bind_int64(handle, index, $0) } ?? sqlite3_bind_null(handle, index), index)
    }

    /// Runs the statement with the values bound so far; hands each result row to `row`.
    func run(_ row: (any SQLRow) throws(StoreError) -> Void = { _ throws(StoreError) in }) throws(StoreError) {
        try connection.step(handle, row)
    }

    /// The connection turns a failed bind into a `StoreError`; a successful one costs a compare.
    private func checked(_ rc: Int32, _ index: Int32) throws(StoreError) {
        if rc != SQLITE_OK { try connection.checkBind(rc, index) }
    }
}

private struct SQLiteRow: SQLRow {
    let statement: OpaquePointer

    func int(_ column: Int) -> Int64? {
        sqlite3_column_type(statement, Int32(column)) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, Int32(column))
    }

    func double(_ column: Int) -> Double? {
        sqlite3_column_type(statement, Int32(column)) == SQLITE_NULL ? nil : sqlite3_column_double(statement, Int32(column))
    }

    func text(_ column: Int, equals literal: StaticString) -> Bool {
        guard let bytes = sqlite3_column_text(statement, Int32(column)) else { return false }
        return Int(sqlite3_column_bytes(statement, Int32(column))) == literal.utf8CodeUnitCount && memcmp(bytes, literal.utf8Start, literal.utf8CodeUnitCount) == 0
    }

    func text(_ column: Int) -> String? {
        guard let bytes = sqlite3_column_text(statement, Int32(column)) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, Int32(column)))
        return String(decoding: UnsafeRawBufferPointer(start: bytes, count: count), as: UTF8.self)
    }
}

/// One wait for another process's write lock, from SQLite's first call of the busy handler
/// (`count` 0) to the timeout. Used only on the connection's queue. It waits on the machine's
/// time, not a service clock: it sleeps for real, so a manual clock would never end it.
private final class BusyWait {
    private let timeout: Duration
    private let clock = SystemClock()
    private var deadline = SystemClock().now

    init(timeout: Duration) { self.timeout = timeout }

    func keepWaiting(first: Bool) -> Bool {
        let now = clock.now
        if first { deadline = now + timeout }
        guard now < deadline else { return false }
        usleep(250)
        return true
    }
}
