#!/usr/bin/env bash
# tests/parity/asan.sh [BUILD_DIR] [pytest args...]: the parity tests against the
# sanitizer build's libctorch.so, for finding the memory error behind a crash
# ("Fatal Python error: Aborted") that the plain run only shows as an abort.
#   bash tests/parity/asan.sh build-asan tests/parity/test_index.py -k sort -x
# The ASan runtime of the compiler that built BUILD_DIR (default build-asan) is
# preloaded into Debian's python3, with libstdc++ so that torch's C++ exceptions
# work under it; leak checking is off (CPython itself holds memory at exit), and
# pytest runs with -s so that the sanitizer's report is not swallowed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD="${1:-build-asan}"
shift || true
[ -f "$BUILD/CMakeCache.txt" ] || { echo "no $BUILD: configure it with -DCT_SANITIZE=ON first" >&2; exit 2; }
CC="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")"
if "$CC" --version | grep -qi clang; then
    rt="$("$CC" -print-file-name="libclang_rt.asan-$(uname -m).so")"
else
    rt="$("$CC" -print-file-name=libasan.so)"
fi
[ -f "$rt" ] || { echo "no ASan runtime found for $CC ($rt)" >&2; exit 2; }
stdcxx="$(/sbin/ldconfig -p | sed -n 's/.*libstdc++\.so\.6 .*=> //p' | head -n1)"
lib="$(find "$BUILD" -maxdepth 1 -name 'libctorch.so' -print -quit)"
[ -n "$lib" ] || { echo "no libctorch.so in $BUILD: build it first" >&2; exit 2; }
if [ "$#" -eq 0 ]; then set -- tests/parity; fi
export CTORCH_LIB="$PWD/$lib"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
LD_PRELOAD="$rt${stdcxx:+ $stdcxx}" exec /usr/bin/python3 -m pytest -s -q -p no:cacheprovider "$@"
