#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS]: builds the io fuzz targets (clang, libFuzzer, ASan +
# UBSan; CMake option CT_FUZZ) in build-fuzz/ and runs each one for SECONDS (default 60; or $FUZZ_SECONDS)
# from a copy of the seed corpus tests/fuzz/corpus/. Exits non-zero when a target
# crashes, leaks, times out or trips a sanitizer; the input that did it is left in
# build-fuzz/artifacts/ (copy it into tests/fuzz/corpus/ as regress_* once fixed, so
# that tests/test_io.c keeps checking it).
#   FUZZ_BUILD   the build directory (default build-fuzz)
#   JOBS         build parallelism (default 2)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

BUDGET="${1:-${FUZZ_SECONDS:-60}}"
BUILD="${FUZZ_BUILD:-build-fuzz}"
JOBS="${JOBS:-2}"
TARGETS=(fuzz_safetensors fuzz_npy)

cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCT_FUZZ=ON -DCT_BUILD_TESTS=OFF -DCT_BUILD_BENCH=OFF >/dev/null || exit 1
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" || exit 1

mkdir -p "$BUILD/artifacts"
export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
passed=0
failed=0
for t in "${TARGETS[@]}"; do
    corpus="$BUILD/corpus/$t"
    mkdir -p "$corpus"
    cp -n tests/fuzz/corpus/* "$corpus/" 2>/dev/null || true
    dict="tests/fuzz/${t#fuzz_}.dict"
    echo "==== $t: ${BUDGET}s from $(ls "$corpus" | wc -l) inputs"
    if "$BUILD/$t" -max_total_time="$BUDGET" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
           -dict="$dict" -artifact_prefix="$BUILD/artifacts/$t-" -print_final_stats=1 \
           "$corpus" >"$BUILD/$t.log" 2>&1; then
        grep -E "DONE|stat::number_of_executed_units" "$BUILD/$t.log" | tail -2
        passed=$((passed + 1))
    else
        grep -E -A30 "ERROR|runtime error|deadly signal|timeout|Test unit written" "$BUILD/$t.log" | head -60
        echo "$t FAILED (log: $BUILD/$t.log)"
        failed=$((failed + 1))
    fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" = 0 ]
