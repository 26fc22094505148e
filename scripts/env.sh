# Sourced by the scripts: puts the Swift toolchain on PATH when it is installed but not there.
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH=/opt/swift/usr/bin:$PATH
fi
