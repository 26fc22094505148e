# Sourced by the scripts: puts the Swift toolchain on PATH when it is installed but not there.
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH=/opt/swift/usr/bin:$PATH
fi

# PUSHFAN (a binary to use instead of building one) made absolute, since the scripts start
# processes from other directories: a path is taken relative to the directory the script was
# started from (each script's first cd, to the repository, leaves that in OLDPWD), a bare name
# is looked up on PATH.
if [ -n "${PUSHFAN:-}" ]; then
  pushfan_given=$PUSHFAN
  case $PUSHFAN in
    /*) ;;
    */*) PUSHFAN=$(cd "${OLDPWD:-.}" && realpath -e "$PUSHFAN" 2>/dev/null) || { echo "PUSHFAN=$pushfan_given: no such file" >&2; exit 2; } ;;
    *) PUSHFAN=$(command -v "$PUSHFAN") || { echo "PUSHFAN=$pushfan_given: not found on PATH" >&2; exit 2; } ;;
  esac
  export PUSHFAN
fi
