import Foundation
import Testing

@testable import PushfanStore

/// The WAL's pages reach the database file through the background checkpointer, which
/// replaces SQLite's checkpoint inside the commit.
@Suite(.timeLimit(.minutes(1)))
struct SQLiteCheckpointerTests {
    @Test("8 MB committed in 40 transactions reach the database file while the connection stays open")
    func walPagesReachTheDatabase() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushfan-checkpoint-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("store.db").path
        let connection = try SQLiteConnection(path: path)
        try connection.executeScript("CREATE TABLE blobs (b BLOB)")
        for _ in 0..<40 {
            try connection.executeScript("BEGIN; WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50) INSERT INTO blobs SELECT randomblob(4000) FROM n; COMMIT;")
        }
        func databaseBytes() -> Int { ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0 }
        let deadline = ContinuousClock.now + .seconds(20)
        while databaseBytes() < 6_000_000 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(databaseBytes() >= 6_000_000, "the database file has \(databaseBytes()) bytes; the WAL was never checkpointed")
        _ = connection
    }
}
