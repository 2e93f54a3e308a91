#!/usr/bin/env bash
# tests/test_install.sh [BUILD_DIR]: installs a built ctorch into a temporary prefix
# and builds tests/install/consumer.c against it, as a user would:
#   1. a CMake project: find_package(ctorch), targets ctorch::ctorch and ctorch::ctorch_static;
#   2. pkg-config --cflags --libs ctorch (shared), and --static (the static archive);
# then runs each consumer; a Release build's stripped libctorch.so must stay under 1.5 MiB. Run by .ci/test after the Release build (default: build/).
# Ends with "install: N passed, N failed"; exit status non-zero on any failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
BUILD="${1:-build}"
[ -d "$BUILD" ] || { echo "install: no build directory $BUILD (build first)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
# The compiler the library was built with (its OpenMP flag is in ctorch.pc).
CC="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")"
CC="${CC:-cc}"
passed=0
failed=0
ok() { echo "  ok: $*"; passed=$((passed + 1)); }
bad() { echo "  FAIL: $*"; failed=$((failed + 1)); }
expect() { local name="$1"; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

# run NAME CMD...: runs a consumer; it prints its results and checks them itself.
run() {
    local name="$1"; shift
    if out="$("$@" 2>&1)" && grep -q '^consumer: ok$' <<<"$out"; then
        ok "$name runs"
    else
        printf '%s\n' "$out" | sed 's/^/    /'
        bad "$name runs"
    fi
}

# needs_libctorch BINARY yes|no: whether the binary loads libctorch.so.
needs_libctorch() {
    if readelf -d "$1" | grep -q 'NEEDED.*libctorch\.so'; then [ "$2" = yes ]; else [ "$2" = no ]; fi
}

echo "install: cmake --install $BUILD --prefix $prefix"
if cmake --install "$BUILD" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
    ok "cmake --install"
else
    cat "$tmp/install.log"
    bad "cmake --install"
    echo "install: $passed passed, $failed failed"
    exit 1
fi
libdir="$(dirname "$(find "$prefix" -name 'libctorch.so' -print -quit)")"
for f in include/ctorch.h "${libdir#"$prefix"/}/libctorch.a" "${libdir#"$prefix"/}/pkgconfig/ctorch.pc" \
         "${libdir#"$prefix"/}/cmake/ctorch/ctorchConfig.cmake"; do
    if [ -f "$prefix/$f" ]; then ok "installed $f"; else bad "installed $f (missing)"; fi
done

# ---- the size: the stripped shared library stays under 1.5 MiB (the brief's rule) --
if grep -q '^CMAKE_BUILD_TYPE:STRING=Release' "$BUILD/CMakeCache.txt"; then
    strip -o "$tmp/stripped.so" "$libdir/libctorch.so"
    size="$(stat -c %s "$tmp/stripped.so")"
    limit=$((3 * 1024 * 1024 / 2))
    if [ "$size" -lt "$limit" ]; then ok "stripped libctorch.so is $size bytes (< $limit)"
    else bad "stripped libctorch.so is $size bytes, over the limit of $limit"; fi
fi

# ---- 1. CMake: find_package(ctorch) --------------------------------------------
echo "install: CMake consumer (find_package)"
if cmake -S "$ROOT/tests/install" -B "$tmp/cmake-consumer" -DCMAKE_PREFIX_PATH="$prefix" \
         -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake.log" 2>&1 &&
   cmake --build "$tmp/cmake-consumer" >>"$tmp/cmake.log" 2>&1; then
    ok "find_package(ctorch) and build"
    run "ctorch::ctorch consumer" "$tmp/cmake-consumer/consumer_shared"
    run "ctorch::ctorch_static consumer" "$tmp/cmake-consumer/consumer_static"
    expect "ctorch::ctorch links libctorch.so" needs_libctorch "$tmp/cmake-consumer/consumer_shared" yes
    expect "ctorch::ctorch_static needs no libctorch.so" needs_libctorch "$tmp/cmake-consumer/consumer_static" no
else
    sed 's/^/    /' "$tmp/cmake.log"
    bad "find_package(ctorch) and build"
fi

# ---- 2. pkg-config ------------------------------------------------------------------
echo "install: pkg-config consumers"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
pc_prefix="$(pkg-config --variable=prefix ctorch || true)"
if [ "$(realpath -m "$pc_prefix")" = "$(realpath -m "$prefix")" ]; then
    ok "ctorch.pc points into the install prefix"
else
    bad "ctorch.pc says prefix=$pc_prefix, not the prefix it was installed to ($prefix):" \
        "a relocatable .pc (prefix=\${pcfiledir}/../..) fixes 'cmake --install --prefix'"
fi
cflags="$(pkg-config --cflags ctorch)"
libs="$(pkg-config --libs ctorch)"
slibs="$(pkg-config --static --libs ctorch)"
echo "    cflags: $cflags"
echo "    libs:   $libs"
echo "    static: $slibs"
# shellcheck disable=SC2086
if "$CC" -std=c11 -Wall -Wextra -Wpedantic -Werror "$ROOT/tests/install/consumer.c" $cflags $libs \
        -o "$tmp/pc_shared" 2>"$tmp/pc.log"; then
    ok "pkg-config --cflags --libs: build"
    run "pkg-config shared consumer" env LD_LIBRARY_PATH="$libdir" "$tmp/pc_shared"
else
    sed 's/^/    /' "$tmp/pc.log"
    bad "pkg-config --cflags --libs: build"
fi
# Static: the archive itself (-l:libctorch.a) plus what --static adds (Libs.private).
# shellcheck disable=SC2086
if "$CC" -std=c11 -Wall -Wextra -Wpedantic -Werror "$ROOT/tests/install/consumer.c" $cflags \
        ${slibs//-lctorch/-l:libctorch.a} -o "$tmp/pc_static" 2>"$tmp/pcs.log"; then
    ok "pkg-config --static --libs: build"
    run "pkg-config static consumer" "$tmp/pc_static"
    expect "static consumer needs no libctorch.so" needs_libctorch "$tmp/pc_static" no
else
    sed 's/^/    /' "$tmp/pcs.log"
    bad "pkg-config --static --libs: build"
fi

echo "install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
