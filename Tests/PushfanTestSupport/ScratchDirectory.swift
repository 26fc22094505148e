import Foundation

/// A fresh directory below the temporary directory for one fixture's files (stores,
/// simulator logs, keys), removed with everything in it when the last reference goes: a full
/// run's pipelines and simulators wrote about 1.5 GB, and runs that left them filled the
/// disk. `PUSHFAN_KEEP_TEST_FILES=1` keeps them, to read after a run.
package final class ScratchDirectory: Sendable {
    package let path: String

    /// `PUSHFAN_KEEP_TEST_FILES=1`: fixtures leave their files (this and processes' output).
    package static let keepsFiles = ProcessInfo.processInfo.environment["PUSHFAN_KEEP_TEST_FILES"] == "1"

    /// `prefix` names the directory (`pushfan-pipeline-1A2B3C4D`), so a kept one is found.
    package init(_ prefix: String) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit {
        if !Self.keepsFiles { try? FileManager.default.removeItem(atPath: path) }
    }
}
