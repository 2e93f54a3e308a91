#!/usr/bin/env python3
"""W9, W10, W11 of issue 5: ctorch (bench_train, built with -DCT_BUILD_BENCH=ON)
against PyTorch in the same run, each at 1 and 2 threads, every measurement in
its own process (so that peak RSS is the workload's own):

  W9   MLP 784-512-512-10, ReLU, batch 128, cross-entropy, SGD step: ms per step
  W10  CNN conv(1->32) ReLU pool conv(32->64) ReLU pool linear(3136->10), batch 64
       of 1x28x28, full training step: ms per step
  W11  peak resident memory of the W9 process (MiB)
  flat the W9 loop for 10,000 steps: RSS at step 1,000 and at step 10,000

    /usr/bin/python3 bench/bench_train.py [--build build] [--steps 100] [--flat-steps 10000]

Medians of per-step times after warm-up; ratio = ctorch's best thread setting over
PyTorch's best. OpenBLAS 0.3.21 does not recognise some recent x86 CPUs and falls
back to its generic "Prescott" kernels; --coretype auto (the default) keeps an
OPENBLAS_CORETYPE the environment sets, else sets it for the ctorch and the torch
processes from /proc/cpuinfo (SkylakeX with AVX-512, Haswell with AVX2); --coretype
none leaves OpenBLAS alone.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def torch_worker(workload, threads, steps):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    nn = torch.nn
    if workload == "w10":
        model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(64 * 7 * 7, 10))
        x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    else:
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        x, y = torch.randn(128, 784), torch.randint(0, 10, (128,))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    for _ in range(steps + 5):
        t0 = time.perf_counter()
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    times = sorted(times[5:])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{workload} {threads} {1e3 * times[len(times) // 2]:.3f} {1e3 * times[0]:.3f} {peak}")


def run(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout.split()
    return out


def coretype_env(mode):
    env = dict(os.environ)
    if mode == "none":
        return env, "OpenBLAS default"
    if mode == "auto" and env.get("OPENBLAS_CORETYPE"):  # as bench/run.sh: the environment's choice stands
        return env, f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} (environment)"
    if mode == "auto":
        flags = open("/proc/cpuinfo").read()
        mode = "SkylakeX" if "avx512f" in flags else "Haswell" if "avx2" in flags else None
    if mode:
        env["OPENBLAS_CORETYPE"] = mode
        return env, f"OPENBLAS_CORETYPE={mode}"
    return env, "OpenBLAS default"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--flat-steps", type=int, default=10000)
    ap.add_argument("--coretype", default="auto")
    ap.add_argument("--torch-worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        w, t, s = args.torch_worker
        torch_worker(w, int(t), int(s))
        return
    exe = os.path.join(args.build, "bench_train")
    env, blas = coretype_env(args.coretype)
    res = {}
    for w, steps in [("w9", args.steps), ("w10", max(10, args.steps // 3))]:
        for t in (1, 2):
            res[("ctorch", w, t)] = run([exe, w, str(t), str(steps)], env)
            # the same OpenBLAS kernels for both: torch's matmuls go through OpenBLAS too
            res[("torch", w, t)] = run([sys.executable, __file__, "--torch-worker", w, str(t), str(steps)], env)
    import torch
    print(f"ctorch ({blas}) vs torch {torch.__version__}; median ms per step, "
          f"{args.steps} steps (W10: {max(10, args.steps // 3)}); {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'workload':<26}{'ctorch 1t':>11}{'ctorch 2t':>11}{'torch 1t':>11}{'torch 2t':>11}{'ratio':>9}")
    for w, name in [("w9", "W9 MLP step (ms)"), ("w10", "W10 CNN step (ms)")]:
        c = [float(res[("ctorch", w, t)][2]) for t in (1, 2)]
        p = [float(res[("torch", w, t)][2]) for t in (1, 2)]
        print(f"{name:<26}{c[0]:>11.2f}{c[1]:>11.2f}{p[0]:>11.2f}{p[1]:>11.2f}{min(c) / min(p):>8.2f}x")
    c = [int(res[("ctorch", "w9", t)][4]) / 1024 for t in (1, 2)]
    p = [int(res[("torch", "w9", t)][4]) / 1024 for t in (1, 2)]
    print(f"{'W11 W9 peak RSS (MiB)':<26}{c[0]:>11.1f}{c[1]:>11.1f}{p[0]:>11.1f}{p[1]:>11.1f}"
          f"{min(c) / min(p):>8.2f}x")
    if args.flat_steps > 1000:
        out = run([exe, "flat", "1", str(args.flat_steps)], env)
        r1000, rend = int(out[5]) / 1024, int(out[6]) / 1024
        verdict = "flat" if abs(rend - r1000) < 1.0 else "NOT flat"
        print(f"W9 loop RSS: {r1000:.1f} MiB at step 1,000, {rend:.1f} MiB at step {args.flat_steps:,} ({verdict})")


if __name__ == "__main__":
    main()
