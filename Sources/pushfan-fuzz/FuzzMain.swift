import Foundation
import PushfanFuzzing

// Built with libFuzzer's coverage, AddressSanitizer and -DFUZZING (scripts/fuzz): libFuzzer's
// driver, running the target named by PUSHFAN_FUZZ_TARGET. Built plainly: `pushfan-fuzz TARGET FILE|DIR...`
// runs inputs through a target once each (to replay a crash).

#if FUZZING
/// The target for this process, chosen once before the driver starts.
nonisolated(unsafe) private var selected = FuzzTarget.segment

/// libFuzzer's driver (in the toolchain's libclang_rt.fuzzer), started from our own main:
/// SwiftPM names an executable's entry point itself, so libFuzzer's main is not the one run.
@_silgen_name("LLVMFuzzerRunDriver")
private func runDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

@main
struct FuzzDriver {
    static func main() {
        let name = ProcessInfo.processInfo.environment["PUSHFAN_FUZZ_TARGET"] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            FileHandle.standardError.write(Data("PUSHFAN_FUZZ_TARGET must be one of \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")), got \(name.debugDescription)\n".utf8))
            exit(2)
        }
        selected = target
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(runDriver(&argc, &argv) { data, size in
            selected.run(UnsafeRawBufferPointer(start: data, count: size))
            return 0
        })
    }
}
#else
@main
struct FuzzReplay {
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name), arguments.count > 1 else {
            FileHandle.standardError.write(Data("usage: pushfan-fuzz TARGET FILE|DIR...  (targets: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")))\n".utf8))
            exit(2)
        }
        var count = 0
        for path in arguments.dropFirst() {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("pushfan-fuzz: no such file \(path)\n".utf8))
                exit(2)
            }
            let files = isDirectory.boolValue
                ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { path + "/" + $0 } : [path]
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                target.run(Array(data))
                count += 1
            }
        }
        print("\(target.rawValue): \(count) inputs, no failure")
    }
}
#endif
