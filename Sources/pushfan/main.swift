// `stdout` and `stderr` are C globals; flushing them at the very end is safe.
@preconcurrency import Glibc
import PushfanCLI
import PushfanSupport

// The executable only dispatches; every command lives in PushfanCLI.
let status = await PushfanMain.run(Array(CommandLine.arguments.dropFirst()), clock: SystemClock())
// Leave without the C libraries' exit-time cleanup (OpenSSL's atexit handler, C++ static
// destructors): threads a command started (Kafka's, libcurl's, the HTTP loops) may still be
// inside those libraries, and a cleanup under their feet can crash the process on its way
// out. Commands flush and close what they own before they return; standard output and
// error are flushed here (not `fflush(nil)`, which waits for every stream's lock, and a
// thread blocked reading standard input holds that one).
fflush(stdout)
fflush(stderr)
_exit(status)
