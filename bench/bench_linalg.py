#!/usr/bin/python3
"""bench_linalg.py: W5 (matmul 1024^2 and 2048^2, float32) and W10-fwd (conv2d
32->64 channels, 3x3, pad 1, on [64,32,28,28] float32): ctorch, PyTorch (2
threads) and, for W5, cblas_sgemm called directly on the same OpenBLAS that
ctorch links, all in the same process, interleaved; medians of several runs.

    CTORCH_LIB=build/libctorch.so /usr/bin/python3 bench/bench_linalg.py [reps] [--keep-coretype]

OpenBLAS 0.3.21 (DYNAMIC_ARCH) does not recognise this machine's CPU (AVX-512
with FP16) and falls back to its Prescott (SSE3) kernels: sgemm then runs at a
few GFLOP/s. Unless OPENBLAS_CORETYPE is already set or --keep-coretype is
given, the bench sets OPENBLAS_CORETYPE=SkylakeX (Haswell without AVX-512)
before any library loads; torch, ctorch and the direct cblas_sgemm then all
use the same kernels. The line "OpenBLAS: ..." shows the core in use.
"""
import ctypes
import os
import statistics
import sys
import time

if "OPENBLAS_CORETYPE" not in os.environ and "--keep-coretype" not in sys.argv:
    try:
        flags = open("/proc/cpuinfo").read()
        if " avx512f" in flags:
            os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
        elif " avx2" in flags:
            os.environ["OPENBLAS_CORETYPE"] = "Haswell"
    except OSError:
        pass

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.environ.get("CTORCH_LIB") or os.path.join(ROOT, "build", "libctorch.so")
THREADS = 2
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
REPS = int(ARGS[0]) if ARGS else 9

lib = ctypes.CDLL(LIB)
P = ctypes.c_void_p
I64P = ctypes.POINTER(ctypes.c_int64)
lib.ct_from_data.restype = P
lib.ct_from_data.argtypes = [P, I64P, ctypes.c_int, ctypes.c_int]
lib.ct_matmul.restype = P
lib.ct_matmul.argtypes = [P, P]
lib.ct_free.argtypes = [P]
lib.ct_set_num_threads.argtypes = [ctypes.c_int]
lib.ct_last_error.restype = ctypes.c_char_p
HAVE_CONV = hasattr(lib, "ct_conv2d")
if HAVE_CONV:
    lib.ct_conv2d.restype = P
    lib.ct_conv2d.argtypes = [P, P, P, I64P, I64P, I64P, ctypes.c_int64]

# cblas_sgemm from the OpenBLAS that libctorch loaded
blas = None
for path in ["/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0",
             "/usr/lib/aarch64-linux-gnu/openblas-openmp/libopenblas.so.0", "libopenblas.so.0"]:
    try:
        blas = ctypes.CDLL(path)
        break
    except OSError:
        pass
if blas is not None:
    blas.cblas_sgemm.restype = None
    blas.cblas_sgemm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_float, P, ctypes.c_int, P, ctypes.c_int, ctypes.c_float, P, ctypes.c_int]
    if hasattr(blas, "openblas_get_config"):
        blas.openblas_get_config.restype = ctypes.c_char_p

torch.set_num_threads(THREADS)
lib.ct_set_num_threads(THREADS)


def ct_tensor(arr):
    arr = np.ascontiguousarray(arr)
    shape = (ctypes.c_int64 * arr.ndim)(*arr.shape)
    h = lib.ct_from_data(arr.ctypes.data_as(P), shape, arr.ndim, 8)  # CT_FLOAT32
    if not h:
        raise RuntimeError(lib.ct_last_error())
    return h


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(cases, reps):
    """cases: name -> fn; interleaved, one warm-up round; returns name -> median seconds."""
    times = {k: [] for k in cases}
    for r in range(reps + 1):
        for k, fn in cases.items():
            t = timed(fn)
            if r:
                times[k].append(t)
    return {k: statistics.median(v) for k, v in times.items()}


def w5(n):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    ha, hb = ct_tensor(a), ct_tensor(b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)

    def ct_mm():
        h = lib.ct_matmul(ha, hb)
        if not h:
            raise RuntimeError(lib.ct_last_error())
        lib.ct_free(h)

    def torch_mm():
        torch.matmul(ta, tb)

    def blas_mm():
        blas.cblas_sgemm(101, 111, 111, n, n, n, 1.0, a.ctypes.data, n, b.ctypes.data, n, 0.0, c.ctypes.data, n)

    cases = {"ctorch": ct_mm, "torch": torch_mm}
    if blas is not None:
        cases["openblas"] = blas_mm
    med = run(cases, REPS)
    # correctness of what was timed
    h = lib.ct_matmul(ha, hb)
    got = np.empty((n, n), dtype=np.float32)
    lib.ct_copy_to_buffer.argtypes = [P, P, ctypes.c_int]
    lib.ct_copy_to_buffer(h, got.ctypes.data_as(P), 8)
    lib.ct_free(h)
    err = float(np.abs(got - (ta @ tb).numpy()).max())
    lib.ct_free(ha)
    lib.ct_free(hb)
    flops = 2.0 * n ** 3
    gf = {k: flops / v / 1e9 for k, v in med.items()}
    line = (f"W5 matmul {n}x{n} f32: ctorch {gf['ctorch']:6.1f} GFLOP/s ({med['ctorch'] * 1e3:7.2f} ms)  "
            f"torch {gf['torch']:6.1f} ({med['torch'] * 1e3:7.2f} ms)")
    if "openblas" in gf:
        line += f"  openblas {gf['openblas']:6.1f} ({med['openblas'] * 1e3:7.2f} ms)"
    line += f"  ratio time ctorch/torch {med['ctorch'] / med['torch']:.3f}"
    if "openblas" in med:
        line += f"  ctorch/openblas {med['ctorch'] / med['openblas']:.3f}"
    line += f"  [max err {err:.1e}]"
    print(line, flush=True)


def w10():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32, 28, 28), dtype=np.float32)
    w = rng.standard_normal((64, 32, 3, 3), dtype=np.float32)
    b = rng.standard_normal((64,), dtype=np.float32)
    hx, hw, hb = ct_tensor(x), ct_tensor(w), ct_tensor(b)
    tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
    one, pad = (ctypes.c_int64 * 2)(1, 1), (ctypes.c_int64 * 2)(1, 1)

    def ct_conv():
        h = lib.ct_conv2d(hx, hw, hb, one, pad, one, 1)
        if not h:
            raise RuntimeError(lib.ct_last_error())
        lib.ct_free(h)

    def torch_conv():
        torch.nn.functional.conv2d(tx, tw, tb, 1, 1)

    med = run({"ctorch": ct_conv, "torch": torch_conv}, REPS)
    # correctness of what was timed: the largest difference from torch, relative to the largest |output|
    h = lib.ct_conv2d(hx, hw, hb, one, pad, one, 1)
    want = torch.nn.functional.conv2d(tx, tw, tb, 1, 1).numpy()
    got = np.empty(want.shape, dtype=np.float32)
    lib.ct_copy_to_buffer.argtypes = [P, P, ctypes.c_int]
    lib.ct_copy_to_buffer(h, got.ctypes.data_as(P), 8)
    lib.ct_free(h)
    err = float(np.abs(got - want).max() / np.abs(want).max())
    print(f"W10-fwd conv2d [64,32,28,28] 32->64 3x3 pad 1 f32: ctorch {med['ctorch'] * 1e3:7.2f} ms  "
          f"torch {med['torch'] * 1e3:7.2f} ms  ratio ctorch/torch {med['ctorch'] / med['torch']:.3f}  "
          f"[max err {err:.1e} of max |y|]", flush=True)


if __name__ == "__main__":
    cfg = blas.openblas_get_config().decode() if blas is not None and hasattr(blas, "openblas_get_config") else "?"
    print(f"threads {THREADS}, reps {REPS} (median); OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')}; "
          f"OpenBLAS: {cfg}")
    w5(1024)
    w5(2048)
    if HAVE_CONV:
        w10()
