#!/usr/bin/python3
"""bench_elementwise.py: W1 (add of two 16M float32 tensors), W2 ([4096,4096] +
[4096] broadcast), W3 (exp and tanh over 16M), W7 (t().contiguous() of
[4096,4096]), ctorch beside PyTorch (2 threads) in one process, interleaved in blocks;
medians of several runs, GB/s counted as bytes read + written.

    CTORCH_LIB=build/libctorch.so /usr/bin/python3 bench/bench_elementwise.py [reps]

bench/bench_bandwidth.py gives the wider table: every dtype and layout, as a
percentage of the STREAM triad measured in the same run.
"""
import ctypes
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.environ.get("CTORCH_LIB") or os.path.join(ROOT, "build", "libctorch.so")
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 11
THREADS = 2

lib = ctypes.CDLL(LIB)
P = ctypes.c_void_p
I64P = ctypes.POINTER(ctypes.c_int64)
for name, res, args in [
    ("ct_rand", P, [I64P, ctypes.c_int, ctypes.c_int]),
    ("ct_add", P, [P, P]), ("ct_add_", ctypes.c_int, [P, P]), ("ct_exp", P, [P]),
    ("ct_tanh", P, [P]), ("ct_t", P, [P]), ("ct_contiguous", P, [P]), ("ct_free", None, [P]),
    ("ct_set_num_threads", None, [ctypes.c_int]), ("ct_manual_seed", None, [ctypes.c_uint64]),
    ("ct_last_error", ctypes.c_char_p, []),
]:
    f = getattr(lib, name)
    f.restype, f.argtypes = res, args
FLOAT32 = 8

torch.set_num_threads(THREADS)
lib.ct_set_num_threads(THREADS)


def ct_rand(*shape):
    arr = (ctypes.c_int64 * len(shape))(*shape)
    h = lib.ct_rand(arr, len(shape), FLOAT32)
    assert h, lib.ct_last_error()
    return h


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


BLOCK = 3  # calls of one library in a row


def median_pair(ct_fn, torch_fn):
    """Interleaved blocks of BLOCK calls, the first block of each a warm-up,
    medians over every call. Blocks, not single calls: the first call after
    the other library's (torch's often 100 ms, partly one thread) ran 25-45%
    slower here than the next ones (cores waking)."""
    a, b = [], []
    for i in range(REPS + 1):
        for fn, ts in ((ct_fn, a), (torch_fn, b)):
            for _ in range(BLOCK):
                t = timed(fn)
                if i:
                    ts.append(t)
    return statistics.median(a), statistics.median(b)


def ct_call_free(f, *args):
    def run():
        h = f(*args)
        assert h, lib.ct_last_error()
        lib.ct_free(h)
    return run


def report(name, nbytes, ct_t, th_t):
    print(f"{name:34s} ctorch {nbytes / ct_t / 1e9:7.2f} GB/s  torch {nbytes / th_t / 1e9:7.2f} GB/s"
          f"  ratio(time ctorch/torch) {ct_t / th_t:5.2f}")


def main():
    n = 16 * 1024 * 1024
    a, b = ct_rand(n), ct_rand(n)
    ta, tb = torch.rand(n), torch.rand(n)
    out = torch.empty(n)
    report("W1 add 16M (fresh output)", 12 * n, *median_pair(ct_call_free(lib.ct_add, a, b), lambda: ta + tb))
    report("W1 add 16M (into reused output)", 12 * n,
           *median_pair(lambda: lib.ct_add_(a, b), lambda: torch.add(ta, tb, out=out)))
    m, v = ct_rand(4096, 4096), ct_rand(4096)
    tm, tv = torch.rand(4096, 4096), torch.rand(4096)
    report("W2 [4096,4096] + [4096]", 8 * 4096 * 4096 + 4 * 4096,
           *median_pair(ct_call_free(lib.ct_add, m, v), lambda: tm + tv))
    report("W3 exp 16M", 8 * n, *median_pair(ct_call_free(lib.ct_exp, a), lambda: ta.exp()))
    report("W3 tanh 16M", 8 * n, *median_pair(ct_call_free(lib.ct_tanh, a), lambda: ta.tanh()))
    mt = lib.ct_t(m)
    report("W7 t().contiguous() [4096,4096]", 8 * 4096 * 4096,
           *median_pair(ct_call_free(lib.ct_contiguous, mt), lambda: tm.t().contiguous()))
    for h in (a, b, m, v, mt):
        lib.ct_free(h)


if __name__ == "__main__":
    main()
