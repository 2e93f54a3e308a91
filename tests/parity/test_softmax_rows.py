"""softmax / log_softmax along the last dim (src/ops/kernels/softmax.c's rows),
against PyTorch: row lengths 1-70 and 1023-1025 (full vectors, masked tails,
the 4-vector max loop's edges), rows holding -inf, +inf, NaN, all -inf, exps
that underflow into the subnormals, and strided views (slices, expanded rows,
permuted dims).

16-bit rows are computed in float and rounded once, so they must be torch's
bit for bit, except where torch's own float result lies within a few float
ulps of a rounding midpoint of the 16-bit type (there the two float results,
whose sums are added in different orders, may round apart: 1 ulp allowed).
The oracles: bfloat16, torch's own bfloat16 kernels (softmax: float, rounded
once; log_softmax: (x - max) - log(sum) in float, with the sum and its log
each rounded to bfloat16 first, as torch 1.13's Vectorized<BFloat16> does);
float16, which torch 1.13 lacks on CPU, torch's float32 result rounded.
float32 / float64: a few ulps (the sums' order), inf / NaN / signs exactly."""
import math
from ctypes import c_int

import pytest

torch = pytest.importorskip("torch")

import ctorch_ffi as ct  # noqa: E402

T = ct.T
ct.declare("ct_softmax", T, [T, c_int])
ct.declare("ct_log_softmax", T, [T, c_int])
L = ct.lib
LENGTHS = list(range(1, 71)) + [1023, 1024, 1025]
HALF = [torch.float16, torch.bfloat16]


def fn_pair(log):
    return (torch.log_softmax, L.ct_log_softmax) if log else (torch.softmax, L.ct_softmax)


def rows(n, g, dtype):
    """8 rows of n: random (two scales), and rows with specials in random places"""
    x = torch.randn(8, n, generator=g, dtype=torch.float64)
    x[0] *= 3
    x[1] *= 40  # exps down to the subnormals and to 0
    x[2, torch.randint(0, n, (1,), generator=g)] = -math.inf
    x[3, torch.randint(0, n, (1,), generator=g)] = math.inf
    x[4, torch.randint(0, n, (1,), generator=g)] = math.nan
    x[5] = -math.inf
    x[6, :] = x[6] * 1e-3 + 300  # large values, close together
    x[7, torch.randint(0, n, (1,), generator=g)] = 120  # one dominant element
    return x.to(dtype)


def oracle16(x, log):
    """torch's result, and float64 bounds (lo, hi) of the float results that
    may be rounded in its place: torch's float result, give or take a few
    float ulps of its terms (another order of the sum, another exp / log)"""
    xf = x.float()
    fn = fn_pair(log)[0]
    want = fn(x, -1) if x.dtype == torch.bfloat16 else fn(xf, -1).to(x.dtype)
    ref = fn(xf, -1).double()
    d = xf.double() - xf.double().amax(-1, keepdim=True)  # x - max, exact
    # 32 float ulps of the result, and for log_softmax of x - max and of
    # log(sum), whose error is the sum's relative one (the sum is >= 1)
    slack = (ref.abs() + (d.abs() + 1 if log else 0)) * 2.0**-19
    lo, hi = ref - slack, ref + slack
    if log and x.dtype == torch.bfloat16:
        # torch rounds the sum, then its log, to bfloat16: both roundings are
        # taken from either end of a few float ulps
        s = d.exp().sum(-1, keepdim=True)
        r = 2.0**-19
        ls = [(s * (1 + e)).to(torch.bfloat16).double().log().mul(1 + e).to(torch.bfloat16).double()
              for e in (-r, r)]
        lo, hi = d - ls[1] - slack, d - ls[0] + slack
    return want, lo.nan_to_num(nan=0.0), hi.nan_to_num(nan=0.0)


def check16(got, x, log, what):
    want, lo, hi = oracle16(x, log)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    gn, wn = got.isnan(), want.isnan()
    assert torch.equal(gn, wn), f"{what}: NaN at {(gn != wn).nonzero()[:5].tolist()}"
    g, w = got[~wn].double(), want[~wn].double()
    # rounding is monotone: the roundings of the bounds bracket every allowed result
    lo, hi = lo[~wn].to(x.dtype).double(), hi[~wn].to(x.dtype).double()
    bad = (g != w) & ((g < lo) | (g > hi))
    idx = bad.nonzero().flatten()[:5].tolist()
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {w.numel()} differ from torch, e.g. "
                           + ", ".join(f"{g[i].item()!r} vs {w[i].item()!r}" for i in idx))
    nd = int((g != w).sum())
    assert nd <= max(2, w.numel() // 1000), f"{what}: {nd} of {w.numel()} differ from torch"


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", HALF, ids=["f16", "bf16"])
def test_half_rows_bit_exact(dtype, log):
    g = torch.Generator().manual_seed(31 + log)
    ct_fn = fn_pair(log)[1]
    for n in LENGTHS:
        x = rows(n, g, dtype)
        got = ct.to_torch(ct.check(ct_fn(ct.from_torch(x), -1)))
        check16(got, x, log, f"{dtype} n={n}")


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", HALF, ids=["f16", "bf16"])
def test_half_rows_big(dtype, log):
    """many rows of a few lengths: the rare near-tie differences stay rare"""
    g = torch.Generator().manual_seed(41 + log)
    ct_fn = fn_pair(log)[1]
    for shape, sc in [((512, 1000), 4.0), ((64, 4096), 1.0), ((2048, 64), 10.0)]:
        x = (torch.randn(*shape, generator=g) * sc).to(dtype)
        got = ct.to_torch(ct.check(ct_fn(ct.from_torch(x), -1)))
        check16(got, x, log, f"{dtype}{shape}")


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", HALF, ids=["f16", "bf16"])
def test_half_strided_bit_exact(dtype, log):
    """views: a ::2 and a ::3 slice of the last dim (gathered rows), expanded
    rows, a narrowed row start, a permuted 3-d view whose outer dims do not merge"""
    g = torch.Generator().manual_seed(51 + log)
    ct_fn = fn_pair(log)[1]
    w = (torch.randn(6, 5, 134, generator=g, dtype=torch.float64) * 8).to(dtype)
    views = {"::2": lambda t: t[:, :, ::2], "::3": lambda t: t[:, :, 1::3], "narrow": lambda t: t[:, 1:4, 3:70],
             "expand": lambda t: t[:, :1, :67].expand(6, 7, 67), "permute": lambda t: t.permute(1, 0, 2)[:, ::2, 5:]}
    for name, v in views.items():
        x = v(w)  # from_torch hands the view over with its strides
        got = ct.to_torch(ct.check(ct_fn(ct.from_torch(x), -1)))
        check16(got, x.contiguous(), log, f"{dtype} {name}")


def ordered(t):
    it, mask = {torch.float64: (torch.int64, 0x7fffffffffffffff), torch.float32: (torch.int32, 0x7fffffff)}[t.dtype]
    b = t.contiguous().view(it).to(torch.int64)
    return torch.where(b < 0, -(b & mask), b)


def check_ulps(got, want, ulps, log, what):
    """NaN and inf where torch has them; finite values within ulps of torch's
    (log_softmax: or ulps * eps * (|want| + 8), where x - max - log(sum)
    cancels; softmax: subnormal results absolutely). Returns the non-NaN pairs."""
    wn = want.isnan()
    assert torch.equal(got.isnan(), wn), f"{what}: NaN"
    gv, wv = got[~wn], want[~wn]
    assert torch.equal(gv.isinf(), wv.isinf()) and torch.equal(gv[wv.isinf()], wv[wv.isinf()]), f"{what}: inf"
    fin = wv.isfinite()
    far = (ordered(gv[fin]) - ordered(wv[fin])).abs() > ulps
    far &= (gv[fin] - wv[fin]).abs() > (ulps * torch.finfo(want.dtype).eps * (wv[fin].abs() + 8) if log else 1e-30)
    assert not far.any(), f"{what}: {gv[fin][far][:4].tolist()} vs {wv[fin][far][:4].tolist()}"
    return gv, wv


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_float_rows(dtype, log):
    """float32 / float64 rows: 8 ulps, 32 for long rows (log_softmax: or a few
    ulps of log(sum), where x - max - log(sum) cancels); NaN, inf and signs exactly"""
    g = torch.Generator().manual_seed(61 + log)
    fn, ct_fn = fn_pair(log)
    for n in LENGTHS:
        ulps = 8 if n <= 70 else 32  # 1000 near-equal terms: the order of the sum shows
        x = rows(n, g, dtype)
        want = fn(x, -1)
        got = ct.to_torch(ct.check(ct_fn(ct.from_torch(x), -1)))
        gv, wv = check_ulps(got, want, ulps, log, f"{dtype} n={n}")
        assert torch.equal(gv.signbit(), wv.signbit()), f"{dtype} n={n}: sign"
