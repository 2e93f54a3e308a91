#!/usr/bin/python3
"""bench_ops.py: a sweep over the operators outside the issues' workloads, ctorch
beside PyTorch (2 threads each, same run): indexing, scans, sorting, pooling,
convolutions, losses, normalisations, powers; then forward + backward of common
layers. Prints medians (blocks of 3 calls, the libraries alternating) and the
ratio ctorch / torch, flagging ratios above 1.25: it is how this session's
cliffs were found (gelu 12x, pow(x, 3) 70x, depthwise convolutions 7.5x, ...).
A benchmark, not a test: rerun what it flags on a quiet machine.

    CTORCH_LIB=build/libctorch.so /usr/bin/python3 bench/bench_ops.py [name filters...]
"""
import os
import statistics
import sys
import time
from ctypes import c_double, c_int, c_int64, c_void_p, byref

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))
import torch  # noqa: E402
import ctorch_ffi as ct  # noqa: E402  (the parity tests' bindings)

L, F = ct.lib, torch.nn.functional
ct.declare("ct_conv2d", ct.T, [ct.CT, ct.CT, ct.CT, ct.I64P, ct.I64P, ct.I64P, c_int64])
torch.set_num_threads(2)
L.ct_set_num_threads(2)
torch.manual_seed(0)
ONLY = sys.argv[1:]


def i64(*v):
    return (c_int64 * len(v))(*v)


def ints(*v):
    return (c_int * len(v))(*v)


def median_ms(fn, blocks=7):
    fn()
    ts = []
    for _ in range(blocks):
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def report(name, cfn, tfn):
    if ONLY and not any(o in name for o in ONLY):
        return
    a, b = [], []
    for _ in range(3):  # alternating
        a.append(median_ms(cfn))
        b.append(median_ms(tfn))
    c, t = min(a), min(b)
    print(f"{name:34s} {c:9.3f} {t:9.3f} {c / t:7.2f}{'  <==' if c > 1.25 * t else ''}", flush=True)


def fwd(name, cfn, tfn):
    def run():
        r = cfn()
        if not r:
            raise RuntimeError(ct.last_error())
        L.ct_free(r)
    report(name, run, tfn)


def pair(name, cfn, tfn):  # an op with two results (sort, topk)
    def run():
        v, i = c_void_p(), c_void_p()
        if cfn(byref(v), byref(i)) != 0:
            raise RuntimeError(ct.last_error())
        L.ct_free(v.value)
        L.ct_free(i.value)
    report(name, run, tfn)


def fwd_bwd(name, cfn, tfn, shapes):
    """forward, sum, backward, both libraries' autograd"""
    ts = [torch.randn(*s) for s in shapes]
    tt = [t.clone().requires_grad_(True) for t in ts]
    hs = [ct.from_torch(t) for t in ts]
    for h in hs:
        L.ct_set_requires_grad(h, True)

    def c():
        y = cfn(*hs)
        if not y:
            raise RuntimeError(ct.last_error())
        s = L.ct_sum(y)
        L.ct_backward(s, None)
        for h in hs:
            L.ct_zero_grad(h, True)
        L.ct_free(s)
        L.ct_free(y)

    def t():
        tfn(*tt).sum().backward()
        for x in tt:
            x.grad = None
    report(name + " (fwd+bwd)", c, t)


def H(t):
    return ct.from_torch(t.contiguous())


def through(view, f):
    """f of a view, the view's handle freed"""
    r = f(view)
    L.ct_free(view)
    return r


def main():
    print(f"{'op':34s} {'ctorch ms':>9s} {'torch ms':>9s} {'ratio':>7s}")
    x = torch.randn(1024, 1024)
    hx, idx = H(x), torch.randint(0, 1024, (1024, 1024))
    hidx, mask = H(idx), x > 0
    hmask = H(mask)
    pair("sort(-1) [1024,1024]", lambda v, i: L.ct_sort(hx, -1, False, False, v, i), lambda: torch.sort(x, -1))
    pair("topk(10, 0) [1024,1024]", lambda v, i: L.ct_topk(hx, 10, 0, True, True, v, i), lambda: torch.topk(x, 10, 0))
    fwd("cumsum(1) [1024,1024]", lambda: L.ct_cumsum(hx, 1), lambda: torch.cumsum(x, 1))
    fwd("gather(1) [1024,1024]", lambda: L.ct_gather(hx, 1, hidx), lambda: torch.gather(x, 1, idx))
    fwd("scatter_add(1) [1024,1024]", lambda: L.ct_scatter_add(hx, 1, hidx, hx), lambda: x.scatter_add(1, idx, x))
    fwd("scatter(0) [1024,1024]", lambda: L.ct_scatter(hx, 0, hidx, hx), lambda: x.scatter(0, idx, x))
    fwd("masked_select [1024,1024]", lambda: L.ct_masked_select(hx, hmask), lambda: x.masked_select(mask))
    fwd("nonzero [1024,1024]", lambda: L.ct_nonzero(hmask), lambda: mask.nonzero())
    fwd("pad 2 [1024,1024]", lambda: L.ct_pad(hx, i64(2, 2, 2, 2), 4, c_double(0)), lambda: F.pad(x, (2, 2, 2, 2)))
    oi = torch.randint(0, 1000, (4096,))
    hoi = H(oi)
    fwd("one_hot 4096 x 1000", lambda: L.ct_one_hot(hoi, 1000), lambda: F.one_hot(oi, 1000))
    for e in (2.0, 3.0, 2.5):
        fwd(f"pow(x, {e}) [1024,1024]", lambda e=e: L.ct_pow_scalar(hx, c_double(e)), lambda e=e: x.pow(e))
    fwd("gelu [1024,1024]", lambda: L.ct_gelu(hx, None), lambda: F.gelu(x))
    fwd("x.unfold(1, 8, 4).contiguous()", lambda: through(L.ct_unfold(hx, 1, 8, 4), L.ct_contiguous),
        lambda: x.unfold(1, 8, 4).contiguous())
    p = torch.randn(64, 64, 56, 56)
    hp = H(p)
    fwd("max_pool2d 2x2 [64,64,56,56]", lambda: L.ct_max_pool2d(hp, i64(2, 2), i64(2, 2), i64(0, 0), i64(1, 1), False),
        lambda: F.max_pool2d(p, 2))
    fwd("avg_pool2d 2x2 [64,64,56,56]", lambda: L.ct_avg_pool2d(hp, i64(2, 2), i64(2, 2), i64(0, 0), False, True),
        lambda: F.avg_pool2d(p, 2))
    fwd("adaptive_avg_pool2d 1x1", lambda: L.ct_adaptive_avg_pool2d(hp, i64(1, 1)),
        lambda: F.adaptive_avg_pool2d(p, 1))
    c, w, dw = torch.randn(32, 32, 28, 28), torch.randn(64, 32, 3, 3), torch.randn(32, 1, 3, 3)
    hc, hw, hdw = H(c), H(w), H(dw)
    fwd("conv2d 3x3 32->64 [32,32,28,28]", lambda: L.ct_conv2d(hc, hw, None, i64(1, 1), i64(1, 1), i64(1, 1), 1),
        lambda: F.conv2d(c, w, padding=1))
    fwd("conv2d 3x3 stride 2", lambda: L.ct_conv2d(hc, hw, None, i64(2, 2), i64(1, 1), i64(1, 1), 1),
        lambda: F.conv2d(c, w, stride=2, padding=1))
    fwd("conv2d depthwise 3x3", lambda: L.ct_conv2d(hc, hdw, None, i64(1, 1), i64(1, 1), i64(1, 1), 32),
        lambda: F.conv2d(c, dw, padding=1, groups=32))
    a = torch.randn(64, 128, 128)
    ha = H(a)
    fwd("bmm [64,128,128]", lambda: L.ct_bmm(ha, ha), lambda: torch.bmm(a, a))
    bx = torch.randn(64, 64, 28, 28)
    hbx, rm, rv = H(bx), H(torch.zeros(64)), H(torch.ones(64))
    fwd("batch_norm eval [64,64,28,28]", lambda: L.ct_batch_norm(hbx, rm, rv, None, None, False, c_double(0.1),
                                                                 c_double(1e-5)),
        lambda: F.batch_norm(bx, torch.zeros(64), torch.ones(64), training=False))
    lg, tg = torch.randn(512, 1000), torch.randint(0, 1000, (512,))
    hlg, htg = H(lg), H(tg)
    fwd("cross_entropy [512,1000]", lambda: L.ct_cross_entropy(hlg, htg, None, 1, -100, c_double(0)),
        lambda: F.cross_entropy(lg, tg))
    fwd_bwd("linear 512x1024 . 1024x1024", lambda x, w: L.ct_linear(x, w, None), lambda x, w: F.linear(x, w),
            [(512, 1024), (1024, 1024)])
    fwd_bwd("conv2d 3x3 32->64", lambda x, w: L.ct_conv2d(x, w, None, i64(1, 1), i64(1, 1), i64(1, 1), 1),
            lambda x, w: F.conv2d(x, w, padding=1), [(32, 32, 28, 28), (64, 32, 3, 3)])
    fwd_bwd("conv2d depthwise 3x3", lambda x, w: L.ct_conv2d(x, w, None, i64(1, 1), i64(1, 1), i64(1, 1), 32),
            lambda x, w: F.conv2d(x, w, padding=1, groups=32), [(32, 32, 28, 28), (32, 1, 3, 3)])
    fwd_bwd("layer_norm [4096,1024]", lambda x: L.ct_layer_norm(x, i64(1024), 1, None, None, c_double(1e-5)),
            lambda x: F.layer_norm(x, (1024,)), [(4096, 1024)])
    fwd_bwd("gelu [4096,1024]", lambda x: L.ct_gelu(x, None), lambda x: F.gelu(x), [(4096, 1024)])
    fwd_bwd("softmax [4096,1024]", lambda x: L.ct_softmax(x, -1), lambda x: F.softmax(x, -1), [(4096, 1024)])
    fwd_bwd("pow(x, 3) [4096,1024]", lambda x: L.ct_pow_scalar(x, c_double(3.0)), lambda x: x.pow(3), [(4096, 1024)])
    fwd_bwd("matmul q @ k^T [8,8,128,64]", lambda q, k: through(L.ct_transpose(k, -1, -2), lambda kt: L.ct_matmul(q, kt)),
            lambda q, k: q @ k.transpose(-1, -2), [(8, 8, 128, 64), (8, 8, 128, 64)])


if __name__ == "__main__":
    main()
