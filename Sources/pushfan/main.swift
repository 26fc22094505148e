import Foundation
import PushfanCLI

// The executable only dispatches; every command lives in PushfanCLI.
exit(await PushfanMain.run(Array(CommandLine.arguments.dropFirst())))
