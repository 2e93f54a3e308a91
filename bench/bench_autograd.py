#!/usr/bin/python3
"""bench_autograd.py: W8, the autograd overhead. A chain of 1,000 ops (mul, add,
sin alternating) on one-element float32 tensors: ns per op without grad, forward
with requires_grad, and forward + backward, each including the release of the
chain's tensors and graph. ctorch (the C program bench_autograd) beside PyTorch,
both single-threaded, both timed in thread CPU time (robust on a shared
machine); medians.

    /usr/bin/python3 bench/bench_autograd.py [--build build] [reps]
"""
import os
import statistics
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def torch_run(mode, nops=1000):
    x = torch.tensor(0.5, requires_grad=mode > 0)
    c = torch.tensor(1.0001)
    ctx = torch.no_grad() if mode == 0 else torch.enable_grad()
    with ctx:
        t0 = time.thread_time()
        y = x
        for i in range(nops):
            y = y * c if i % 3 == 0 else (y + c if i % 3 == 1 else torch.sin(y))
        if mode == 2:
            y.backward()
        y = None  # the graph's release is timed too, as ctorch's scope end is
        return (time.thread_time() - t0) / nops * 1e9


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    build = sys.argv[sys.argv.index("--build") + 1] if "--build" in sys.argv else os.path.join(ROOT, "build")
    if args and args[0] == build:
        args = args[1:]
    reps = int(args[0]) if args else 30
    torch.set_num_threads(1)
    out = subprocess.run([os.path.join(build, "bench_autograd"), str(reps)], check=True,
                         capture_output=True, text=True).stdout.split("\n")
    ours = {line.split()[1]: float(line.split()[3]) for line in out if line.startswith("W8")}
    print("W8: 1,000 chained ops (mul, add, sin) on one-element tensors, ns per op (median, thread CPU time)")
    for mode, name in enumerate(["no_grad_fwd", "fwd", "fwd_bwd"]):
        t = statistics.median(torch_run(mode) for _ in range(reps))
        print(f"  {name:12s} ctorch {ours[name]:8.1f}   torch {t:8.1f}   ratio {ours[name] / t:5.3f}")


if __name__ == "__main__":
    main()
