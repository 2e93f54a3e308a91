#!/usr/bin/env bash
# bench/run.sh [BUILD]: every workload of the issues, ctorch beside PyTorch in the
# same run (W1-W3, W7 elementwise; W4, W6 reductions; W5, W10-fwd linalg/conv; W8
# autograd; W9-W11 training), then a sweep of other ops (bench_ops.py). Benchmarks,
# not tests: quote medians and ratios, and rerun on a quiet machine. OpenBLAS
# 0.3.21 does not recognise some recent x86 CPUs and falls back to generic
# kernels; OPENBLAS_CORETYPE is set from /proc/cpuinfo for ctorch and torch alike
# (both use OpenBLAS for matmul).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD="${1:-build}"
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
    elif grep -q avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
fi
export CTORCH_LIB="$BUILD/libctorch.so"
PY=/usr/bin/python3
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-default}"
$PY bench/bench_elementwise.py
$PY bench/bench_bandwidth.py
$PY bench/bench_reduce.py
$PY bench/bench_linalg.py
$PY bench/bench_autograd.py --build "$BUILD"
$PY bench/bench_train.py --build "$BUILD"
$PY bench/bench_ops.py
