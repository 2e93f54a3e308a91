#!/usr/bin/env python3
"""W4 / W6 side by side with torch (2 threads, median of 20 runs after 3 warm-ups).

    /usr/bin/python3 bench/bench_reduce.py [path/to/bench_reduce]

Runs torch in this process and the C binary bench_reduce (built with
-DCT_BUILD_BENCH=ON; default build-reduce/bench_reduce, then build/) in a
subprocess, and prints GB/s for both and the ratio ctorch time / torch time
(target <= 0.8)."""
import os
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS, WARM = 20, 3


def median_time(fn):
    ts = []
    for r in range(-WARM, RUNS):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        if r >= 0:
            ts.append(t1 - t0)
    ts.sort()
    return (ts[RUNS // 2 - 1] + ts[RUNS // 2]) / 2


def main():
    torch.set_num_threads(2)
    binary = sys.argv[1] if len(sys.argv) > 1 else None
    for cand in [binary, os.path.join(ROOT, "build-reduce", "bench_reduce"), os.path.join(ROOT, "build", "bench_reduce")]:
        if cand and os.path.exists(cand):
            binary = cand
            break
    torch.manual_seed(0)
    v = torch.rand(1 << 24)
    m = v.view(4096, 4096)
    s = torch.randn(4096, 1024)
    work = {
        "sum": lambda: v.sum(),
        "sum_dim1": lambda: m.sum(1),
        "sum_dim0": lambda: m.sum(0),
        "softmax": lambda: torch.softmax(s, -1),
        "log_softmax": lambda: torch.log_softmax(s, -1),
    }
    ttimes = {k: median_time(f) for k, f in work.items()}
    out = subprocess.run([binary], capture_output=True, text=True, check=True,
                         env=dict(os.environ, CT_THREADS="2", OMP_NUM_THREADS="2")).stdout
    print(f"{'workload':<12} {'torch GB/s':>10} {'ctorch GB/s':>11} {'ratio':>6}")
    for line in out.splitlines():
        name, nbytes, med, _ = line.split()
        nbytes, med = float(nbytes), float(med)
        tt = ttimes[name]
        print(f"{name:<12} {nbytes / tt / 1e9:10.2f} {nbytes / med / 1e9:11.2f} {med / tt:6.2f}")


if __name__ == "__main__":
    main()
