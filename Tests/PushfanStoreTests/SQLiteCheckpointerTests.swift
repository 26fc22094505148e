import Foundation
import Testing

@testable import PushfanStore

/// The WAL's pages reach the database file through the background checkpointer, which
/// replaces SQLite's checkpoint inside the commit.
@Suite(.timeLimit(.minutes(1)))
struct SQLiteCheckpointerTests {
    @Test("all of 12 MB committed in 41 transactions reaches the database file while the connection stays open, the last one too")
    func walPagesReachTheDatabase() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-checkpoint-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("store.db").path
        let connection = try SQLiteConnection(path: path)
        try connection.executeScript("CREATE TABLE blobs (b BLOB)")
        func commit(rows: Int) throws {
            try connection.executeScript("BEGIN; WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows)) INSERT INTO blobs SELECT randomblob(4000) FROM n; COMMIT;")
        }
        for _ in 0..<40 { try commit(rows: 50) }
        // Past the threshold on its own, while the checkpoints the others asked for may still
        // run: its pages must follow too.
        try commit(rows: 1_100)
        func databaseBytes() -> Int { ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0 }
        let deadline = ContinuousClock.now + .seconds(20)
        while databaseBytes() < 12_000_000 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(databaseBytes() >= 12_000_000, "the database file has \(databaseBytes()) bytes; the WAL was not checkpointed to its end")
        _ = connection
    }
}
