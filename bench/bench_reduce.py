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


def interleaved(work, ctwork):
    """torch and ctorch (through ctypes, in this process) timed alternately,
    run by run, so that both see the same machine load."""
    res = {}
    for name in work:
        if name.startswith("_"):
            continue
        tt, ct_ = [], []
        for r in range(-WARM, RUNS):
            t0 = time.perf_counter()
            work[name]()
            t1 = time.perf_counter()
            ctwork[name]()
            t2 = time.perf_counter()
            if r >= 0:
                tt.append(t1 - t0)
                ct_.append(t2 - t1)
        tt.sort()
        ct_.sort()
        res[name] = ((tt[RUNS // 2 - 1] + tt[RUNS // 2]) / 2, (ct_[RUNS // 2 - 1] + ct_[RUNS // 2]) / 2)
    return res


def ctypes_work(v, m, s):
    import ctypes
    from ctypes import c_bool, c_int, c_int64, c_void_p, POINTER
    path = os.environ.get("CTORCH_LIB") or os.path.join(ROOT, "build-reduce", "libctorch.so")
    lib = ctypes.CDLL(path)
    lib.ct_from_data.restype = c_void_p
    lib.ct_from_data.argtypes = [c_void_p, POINTER(c_int64), c_int, c_int]
    for n in ["ct_sum"]:
        getattr(lib, n).restype = c_void_p
        getattr(lib, n).argtypes = [c_void_p]
    lib.ct_sum_dims.restype = c_void_p
    lib.ct_sum_dims.argtypes = [c_void_p, POINTER(c_int), c_int, c_bool]
    for n in ["ct_softmax", "ct_log_softmax"]:
        getattr(lib, n).restype = c_void_p
        getattr(lib, n).argtypes = [c_void_p, c_int]
    lib.ct_free.argtypes = [c_void_p]
    lib.ct_set_num_threads.argtypes = [c_int]
    lib.ct_set_num_threads(2)

    def mk(t):
        shape = (c_int64 * t.dim())(*t.shape)
        return lib.ct_from_data(c_void_p(t.data_ptr()), shape, t.dim(), 8)  # CT_FLOAT32
    hv, hm, hs = mk(v), mk(m), mk(s)
    d0, d1 = (c_int * 1)(0), (c_int * 1)(1)

    def run(f):
        def g():
            lib.ct_free(f())
        return g
    return {
        "_threads": lib.ct_set_num_threads,
        "sum": run(lambda: lib.ct_sum(hv)),
        "sum_dim1": run(lambda: lib.ct_sum_dims(hm, d1, 1, False)),
        "sum_dim0": run(lambda: lib.ct_sum_dims(hm, d0, 1, False)),
        "softmax": run(lambda: lib.ct_softmax(hs, -1)),
        "log_softmax": run(lambda: lib.ct_log_softmax(hs, -1)),
    }


def cpu_time_one_thread(work, ctwork, nbytes_of, lib_threads):
    """1 thread each, per-thread CPU time (time.thread_time): what the kernels
    cost when the machine is shared (wall clock then measures the scheduler)."""
    torch.set_num_threads(1)
    lib_threads(1)
    print("1 thread, CPU time of the calling thread (robust to a loaded machine):")
    print(f"{'workload':<12} {'torch GB/s':>10} {'ctorch GB/s':>11} {'ratio':>6}")
    for name in work:
        a, b = [], []
        for r in range(-WARM, RUNS):
            t0 = time.thread_time()
            work[name]()
            t1 = time.thread_time()
            ctwork[name]()
            t2 = time.thread_time()
            if r >= 0:
                a.append(t1 - t0)
                b.append(t2 - t1)
        a.sort()
        b.sort()
        ta, tb = (a[RUNS // 2 - 1] + a[RUNS // 2]) / 2, (b[RUNS // 2 - 1] + b[RUNS // 2]) / 2
        nb = nbytes_of[name]
        print(f"{name:<12} {nb / ta / 1e9:10.2f} {nb / tb / 1e9:11.2f} {tb / ta:6.2f}")
    torch.set_num_threads(2)
    lib_threads(2)


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
    print("separate runs: torch in-process, then the C binary", binary)
    print(f"{'workload':<12} {'torch GB/s':>10} {'ctorch GB/s':>11} {'ratio':>6}")
    nbytes_of = {}
    for line in out.splitlines():
        name, nbytes, med, _ = line.split()
        nbytes, med = float(nbytes), float(med)
        nbytes_of[name] = nbytes
        tt = ttimes[name]
        print(f"{name:<12} {nbytes / tt / 1e9:10.2f} {nbytes / med / 1e9:11.2f} {med / tt:6.2f}")
    work = dict(work)
    print("interleaved runs (torch, ctorch via ctypes, alternately; same load):")
    print(f"{'workload':<12} {'torch GB/s':>10} {'ctorch GB/s':>11} {'ratio':>6}")
    ctw = ctypes_work(v, m, s)
    for name, (tt, ctt) in interleaved(work, ctw).items():
        nb = nbytes_of[name]
        print(f"{name:<12} {nb / tt / 1e9:10.2f} {nb / ctt / 1e9:11.2f} {ctt / tt:6.2f}")
    cpu_time_one_thread(work, ctw, nbytes_of, ctw["_threads"])


if __name__ == "__main__":
    main()
