#!/usr/bin/python3
"""bench_bandwidth.py: elementwise ops, softmax and reductions against the STREAM
triad bandwidth of this machine, measured in the same run (bench/triad.c, built
beside libctorch.so). For every op x layout x dtype: the bandwidth of ctorch and
of PyTorch (2 threads, interleaved blocks of runs, medians) as a percentage of the triad's.

Operands are [4096, 4096]. Layouts: contig; trans (the first operand is a.t());
bcast (add: a + row[4096]; the others: row.expand(4096, 4096)); slice (the first
operand is w[:, ::2] of a [4096, 8192] w); inplace (a.add_(b), a.exp_(): the
output is reused). GB/s counts the bytes of memory touched once: the inputs'
(a ::2 slice reads its whole base, a broadcast row is read once) plus the output's.

    CTORCH_LIB=build/libctorch.so /usr/bin/python3 bench/bench_bandwidth.py [--gbs]
        [--ops add,exp,...] [--dtypes float32,...] [--layouts contig,...] [--reps N]
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.environ.get("CTORCH_LIB") or os.path.join(ROOT, "build", "libctorch.so")
THREADS = 2
N = 4096

P, I64P, INTP = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int)
lib = ctypes.CDLL(LIB)
for name, res, args in [
    ("ct_from_data", P, [P, I64P, ctypes.c_int, ctypes.c_int]), ("ct_t", P, [P]),
    ("ct_slice", P, [P, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]),
    ("ct_expand", P, [P, I64P, ctypes.c_int]), ("ct_add", P, [P, P]), ("ct_add_", ctypes.c_int, [P, P]),
    ("ct_exp", P, [P]), ("ct_exp_", ctypes.c_int, [P]), ("ct_copy_", ctypes.c_int, [P, P]), ("ct_sum", P, [P]),
    ("ct_sum_dims", P, [P, INTP, ctypes.c_int, ctypes.c_bool]), ("ct_softmax", P, [P, ctypes.c_int]),
    ("ct_amax", P, [P, INTP, ctypes.c_int, ctypes.c_bool]),
    ("ct_free", None, [P]), ("ct_set_num_threads", None, [ctypes.c_int]),
    ("ct_last_error", ctypes.c_char_p, []),
]:
    f = getattr(lib, name)
    f.restype, f.argtypes = res, args

DTYPES = {  # name: (torch dtype, ct_dtype)
    "float32": (torch.float32, 8), "float64": (torch.float64, 9), "float16": (torch.float16, 6),
    "bfloat16": (torch.bfloat16, 7), "int32": (torch.int32, 4), "int64": (torch.int64, 5),
}
OPS = ["add", "exp", "sum", "sum-1", "sum0", "amax0", "softmax"]
LAYOUTS = ["contig", "trans", "bcast", "slice", "inplace"]


def check(h):
    assert h, lib.ct_last_error()
    return h


def ct_of(t):
    t = t.contiguous()
    shape = (ctypes.c_int64 * t.dim())(*t.shape)
    return check(lib.ct_from_data(P(t.data_ptr()), shape, t.dim(), DTYPES[DNAME[t.dtype]][1]))


DNAME = {v[0]: k for k, v in DTYPES.items()}


def rand(shape, dt):
    if dt.is_floating_point:
        return torch.randn(shape).to(dt)
    return torch.randint(-100, 100, shape, dtype=dt)


class Operands:
    """The torch tensors of one dtype and their ctorch twins (copies)."""

    def __init__(self, dt):
        self.dt = dt
        self.a, self.b = rand((N, N), dt), rand((N, N), dt)
        self.v, self.w = rand((N,), dt), rand((N, 2 * N), dt)
        self.ca, self.cb, self.cv, self.cw = (ct_of(x) for x in (self.a, self.b, self.v, self.w))
        shape = (ctypes.c_int64 * 2)(N, N)
        self.views = [check(lib.ct_t(self.ca)), check(lib.ct_expand(self.cv, shape, 2)),
                      check(lib.ct_slice(self.cw, 1, 0, 2 * N, 2))]
        self.cat, self.cve, self.cws = self.views

    def reset(self):
        """a (both sides) back to its first values, untimed: exp_ timed on its
        own output would see huge and infinite inputs from the third call on,
        where libm's scalar exp (float64) takes its slow overflow path; add_
        would leave a + 18 b for the ops after it."""
        if not hasattr(self, "a0"):
            self.a0 = self.a.clone()
            self.ca0 = ct_of(self.a0)
        self.a.copy_(self.a0)
        check(lib.ct_copy_(self.ca, self.ca0) == 0)

    def free(self):
        for h in self.views + [self.ca, self.cb, self.cv, self.cw] + ([self.ca0] if hasattr(self, "ca0") else []):
            lib.ct_free(h)

    def first(self, layout):
        """(torch, ctorch) first operand of a layout, and the bytes it touches."""
        es = self.a.element_size()
        if layout == "trans":
            return self.a.t(), self.cat, N * N * es
        if layout == "bcast":  # counted as if materialized: the work is per element
            return self.v.expand(N, N), self.cve, N * N * es
        if layout == "slice":
            return self.w[:, ::2], self.cws, 2 * N * N * es
        return self.a, self.ca, N * N * es


def out_elsize(op, dt):
    if op == "exp" and not dt.is_floating_point:
        return 4
    if op.startswith("sum") and not dt.is_floating_point:
        return 8
    return torch.empty(0, dtype=dt).element_size()


def workload(op, layout, o):
    """(ctorch fn, torch fn, bytes[, reset]) or None when the op does not apply."""
    dt, es = o.dt, o.a.element_size()
    fl = dt.is_floating_point
    oes = out_elsize(op, dt)
    if layout == "inplace":
        if op == "add":  # a back to its first values before each call: 18 calls of a += b made
            # softmax's rows span past float's normal range, and on Intel subnormal results are slow
            return (lambda: check(lib.ct_add_(o.ca, o.cb) == 0), lambda: o.a.add_(o.b), 3 * N * N * es, o.reset)
        if op == "exp" and fl:  # a fresh copy of a before each timed call, see reset()
            return (lambda: check(lib.ct_exp_(o.ca) == 0), lambda: o.a.exp_(), 2 * N * N * es, o.reset)
        return None
    x, cx, xb = o.first(layout)
    if op == "add":
        if layout == "bcast":
            return (lambda: lib.ct_free(check(lib.ct_add(o.ca, o.cv))), lambda: o.a + o.v,
                    N * N * es + N * es + N * N * oes)
        return (lambda: lib.ct_free(check(lib.ct_add(cx, o.cb))), lambda: x + o.b, xb + N * N * es + N * N * oes)
    if op == "exp":
        return (lambda: lib.ct_free(check(lib.ct_exp(cx))), lambda: x.exp(), xb + N * N * oes)
    if op == "sum":
        return (lambda: lib.ct_free(check(lib.ct_sum(cx))), lambda: x.sum(), xb)
    if op in ("sum-1", "sum0"):
        d = -1 if op == "sum-1" else 0
        dims = (ctypes.c_int * 1)(d)
        return (lambda: lib.ct_free(check(lib.ct_sum_dims(cx, dims, 1, False))), lambda: x.sum(d), xb + N * oes)
    if op == "amax0":  # the reductions across rows other than sums (reduce.c's run_outer_any)
        dims = (ctypes.c_int * 1)(0)
        return (lambda: lib.ct_free(check(lib.ct_amax(cx, dims, 1, False))), lambda: x.amax(0), xb + N * es)
    if op == "softmax" and fl:
        return (lambda: lib.ct_free(check(lib.ct_softmax(cx, -1))), lambda: torch.softmax(x, -1), xb + N * N * oes)
    return None


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


BLOCK = 3  # calls of one library in a row


def median_pair(ct_fn, torch_fn, reps, reset=None):
    """Interleaved blocks of BLOCK calls, the first block of each a warm-up,
    medians over every call; torch's time is None when torch 1.13 lacks the
    kernel (exp of float16 on CPU). reset, when given, runs untimed before each
    timed call. Blocks, not single calls: the first call after the other
    library's (torch's often 100 ms, partly one thread) ran 25-45% slower here
    than the next ones (cores waking), and the triad runs hot."""
    try:
        torch_fn()
    except RuntimeError:
        torch_fn = None
    reset = reset or (lambda: None)
    a, b = [], []
    for i in range(reps + 1):
        for fn, ts in ((ct_fn, a), (torch_fn, b)):
            for _ in range(BLOCK if fn else 0):
                reset()
                t = timed(fn)
                if i:
                    ts.append(t)
    reset()  # the ops after an in-place one read the first values, not exp(a)'s
    return statistics.median(a), statistics.median(b) if torch_fn else None


def triad():
    exe = os.path.join(os.path.dirname(os.path.abspath(LIB)), "triad")
    out = subprocess.run([exe, "64", str(THREADS)], check=True, capture_output=True, text=True).stdout
    return float(out.split()[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gbs", action="store_true", help="print GB/s instead of % of triad")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    ops, dtypes, layouts = args.ops.split(","), args.dtypes.split(","), args.layouts.split(",")
    torch.set_num_threads(THREADS)
    lib.ct_set_num_threads(THREADS)
    tris, res = [], {}
    for dn in dtypes:
        tris.append(triad())
        o = Operands(DTYPES[dn][0])
        for op in ops:
            for lay in layouts:
                w = workload(op, lay, o)
                if w:
                    ct_t, th_t = median_pair(*w[:2], args.reps, *w[3:])
                    res[op, lay, dn] = (w[2] / ct_t / 1e9, w[2] / th_t / 1e9 if th_t else float("nan"))
        o.free()
    tris.append(triad())
    tri = statistics.median(tris)
    unit = "GB/s" if args.gbs else "% of triad"
    print(f"STREAM triad {tri:.1f} GB/s (2 threads, 64 MiB arrays; min {min(tris):.1f} max {max(tris):.1f}); cells: ctorch / torch, {unit}")
    print(f"{'op':8s} {'layout':8s}" + "".join(f"{dn:>14s}" for dn in dtypes))
    worst = []
    for op in ops:
        for lay in layouts:
            if not any((op, lay, dn) in res for dn in dtypes):
                continue
            cells = []
            for dn in dtypes:
                r = res.get((op, lay, dn))
                if not r:
                    cells.append(f"{'-':>14s}")
                    continue
                c, t = (r[0], r[1]) if args.gbs else (100 * r[0] / tri, 100 * r[1] / tri)
                cells.append(f"{c:7.0f} /{t:5.0f}" if not args.gbs else f"{c:7.1f} /{t:5.1f}")
                worst.append((r[0] / tri, op, lay, dn))
            print(f"{op:8s} {lay:8s}" + "".join(cells))
    worst.sort()
    print("worst (ctorch % of triad): " + ", ".join(f"{op} {lay} {dn} {100 * f:.0f}%" for f, op, lay, dn in worst[:8]))


if __name__ == "__main__":
    main()
