import Foundation
import Testing

@testable import PushfanFuzzing

/// Every input kept in Fuzz/corpus (the seeds, and each crash the fuzzers found, minimised)
/// runs through its target: a fixed crash stays fixed.
@Suite struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/corpus")

    @Test("each target's corpus runs clean", arguments: FuzzTarget.allCases)
    func corpusRunsClean(_ target: FuzzTarget) throws {
        let directory = Self.corpus.appendingPathComponent(target.rawValue)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(!files.isEmpty, "no seed inputs for \(target.rawValue)")
        for file in files {
            target.run(Array(try Data(contentsOf: directory.appendingPathComponent(file))))
        }
    }
}
