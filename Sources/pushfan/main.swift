import Foundation
import PushfanCLI

// The executable only dispatches; every command lives in PushfanCLI.
let status = await PushfanMain.run(Array(CommandLine.arguments.dropFirst()))
// Leave without the C libraries' exit-time cleanup (OpenSSL's atexit handler, C++ static
// destructors): threads a command started (Kafka's, libcurl's, the HTTP loops) may still be
// inside those libraries, and a cleanup under their feet can crash the process on its way
// out. Commands flush and close what they own before they return; buffered output is
// flushed here.
fflush(nil)
_exit(status)
