"""Parity of the float64 ops that run on vmath.h's vectorised exp, log, log1p and
tanh (exp, log, log1p, tanh, sigmoid, silu, softplus, gelu(tanh), softmax, log_softmax) with
PyTorch: random values across the whole range, the IEEE edges (inf, NaN, +-0,
subnormals, overflow and underflow thresholds), odd sizes and non-contiguous
layouts. torch's float64 exp, log and tanh are Sleef's (measured: up to 0.83 ulp
for exp, 0.99 for tanh), vmath.h's are below 0.8 ulp, so the two agree to 1 ulp;
sigmoid and silu (1 / (1 + exp(-x)): both sides err up to 1.37 ulp) and softplus
(log1p(exp)) to 2; softmax and log_softmax to a few ulps of the row, as their sums
are added in another order. inf, NaN and the sign of zero must match exactly.
tests/test_vmath.c checks the accuracy itself against long double libm."""
import math
from ctypes import c_char_p, c_double, c_int, c_void_p

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402
np = pytest.importorskip("numpy")

import ctorch_ffi as ct  # noqa: E402

T = c_void_p
for _n in ["exp", "log", "log1p", "tanh", "sigmoid", "silu", "expm1", "erf"]:
    ct.declare("ct_" + _n, T, [T])
    ct.declare("ct_" + _n + "_", c_int, [T])
for _row in [("ct_softplus", T, [T, c_double, c_double]), ("ct_gelu", T, [T, c_char_p]),
             ("ct_softmax", T, [T, c_int]), ("ct_log_softmax", T, [T, c_int]), ("ct_elu", T, [T, c_double])]:
    ct.declare(*_row)
L = ct.lib

# the edges: specials, subnormals, exp's overflow (709.78) and underflow (-708.40 to
# normal, -744.44 to the last subnormal, -745.13 to 0), tanh's 0.625 and its 1 (19.06)
EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
         -2.2250738585072014e-308, 1e-300, 1e-17, -1e-17, 1.0, -1.0, 0.5, 0.625, -0.625,
         0.6931471805599453, 0.7071067811865476, 1.4142135623730951, 19.0625, -19.0625, 22.0,
         709.782712893384, 709.7827128933841, -708.3964185322641, -708.4, -744.4400719213812,
         -745.1332191019411, -745.1332191019412, -745.2, -746.0, -1000.0, 1e300, -1e300,
         1.7976931348623157e308, -1.7976931348623157e308]


def edges():
    x = torch.tensor(EDGES, dtype=torch.float64)
    near = torch.cat([torch.nextafter(x, torch.full_like(x, math.inf)),
                      torch.nextafter(x, torch.full_like(x, -math.inf))])
    return torch.cat([x, near[near.isfinite()]])


def randoms(n, g):
    """n doubles: uniform over exp's domain, over [-2, 2], and any bit pattern"""
    k = n // 3
    parts = [torch.rand(k, generator=g, dtype=torch.float64) * 1456 - 746,
             torch.rand(k, generator=g, dtype=torch.float64) * 4 - 2,
             torch.randint(-2**63, 2**63 - 1, (n - 2 * k,), generator=g, dtype=torch.int64)
             .view(torch.float64)]
    return torch.cat(parts)


def ordered(t):
    """the bits as integers in the order of the floats (so ulp distance = difference)"""
    it, mask = {torch.float64: (torch.int64, 0x7fffffffffffffff), torch.float32: (torch.int32, 0x7fffffff)}.get(
        t.dtype, (torch.int16, 0x7fff))
    b = t.contiguous().view(it).to(torch.int64)
    return torch.where(b < 0, -(b & mask), b)


def mismatches(got, want, ulps, atol):
    """indices where got and want differ by more than ulps units in the last place
    and more than atol, NaN matching NaN, infinities and signs exactly (but within
    a nonzero atol: log_softmax's 0 where a sum rounds to 1 in one order, not another)"""
    nan = want.isnan()
    dist = (ordered(got) - ordered(want)).abs()
    near = (got - want).abs() <= atol
    far = (dist > ulps) & ~near
    sign = (got.signbit() != want.signbit()) & ~(near & (atol > 0))
    bad = (got.isnan() != nan) | (~nan & (sign | (want.isinf() & (got != want)) | far))
    return bad.nonzero().flatten()


def check(h, want, what, ulps=1, atol=0.0):
    got = ct.to_torch(ct.check(h))
    assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype}{got.shape}"
    g, w = got.flatten(), want.flatten()
    bad = mismatches(g, w, ulps, atol)
    assert bad.numel() == 0, (f"{what}: {bad.numel()} of {w.numel()} differ by more than {ulps} ulp, e.g. "
                              + ", ".join(f"{i}: {g[i].item()!r} vs torch {w[i].item()!r}"
                                          for i in bad[:5].tolist()))


UNARY = {"exp": (torch.exp, 1), "log": (torch.log, 1), "log1p": (torch.log1p, 1), "tanh": (torch.tanh, 1),
         "sigmoid": (torch.sigmoid, 2), "silu": (TF.silu, 2)}
SLEEF_EXP_MAX = 709.78271114955742909  # Sleef's exp is inf above this, 2e-6 early
# where torch's float64 functions (Sleef's) miss the IEEE result, libm's is wanted:
# exp overflows early, log1p overflows above 1.04e307 and gives 0 for +-5e-324
TORCH_MISSES = {"exp": (lambda x: (x > SLEEF_EXP_MAX) & (x <= 709.782712893384), math.exp),
                "log1p": (lambda x: (x > 1e307) | ((x != 0) & (x.abs() < 2.2250738585072014e-308)), math.log1p)}


def unary(name, x):
    want = UNARY[name][0](x)
    if name in TORCH_MISSES:
        where, libm = TORCH_MISSES[name]
        miss = where(x)
        want[miss] = torch.tensor([libm(v) for v in x[miss].tolist()], dtype=torch.float64)
    return want


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_random_and_edges(name):
    g = torch.Generator().manual_seed(3)
    x = torch.cat([edges(), randoms(300_001, g)])
    if name in ("log", "log1p"):  # the positive half, every binade (and the negatives: NaN)
        x = torch.cat([x, x.abs()])
    check(getattr(L, "ct_" + name)(ct.from_torch(x)), unary(name, x), name, UNARY[name][1])


def test_exp_overflow_edge():
    x = torch.tensor([709.782712893384, 709.7827128933841, SLEEF_EXP_MAX], dtype=torch.float64)
    x = torch.cat([x, torch.nextafter(x, torch.full_like(x, -math.inf))])
    got = ct.to_torch(ct.check(L.ct_exp(ct.from_torch(x)))).tolist()
    want = [math.exp(v) if v <= 709.782712893384 else math.inf for v in x.tolist()]
    assert got == want


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_sizes_and_layouts(name):
    g = torch.Generator().manual_seed(4)
    for n in [0, 1, 2, 7, 8, 9, 15, 17, 63, 1001]:
        x = randoms(n, g) if n > 2 else torch.tensor([-0.625, 30.0][:n], dtype=torch.float64)
        check(getattr(L, "ct_" + name)(ct.from_torch(x)), unary(name, x), f"{name}[{n}]", UNARY[name][1])
    base = torch.rand(37, 26, generator=g, dtype=torch.float64) * 60 - 30
    for what, x in [("t()", base.t()), ("[:, ::3]", base[:, ::3]), ("[::2, 1:]", base[::2, 1:]),
                    ("expand", base[:1, :13].expand(9, 13))]:
        check(getattr(L, "ct_" + name)(ct.from_torch(x)), unary(name, x), f"{name}{what}", UNARY[name][1])
    x = base.t().clone()  # in place, on a transposed view
    h = ct.from_torch(x.t())
    ct.check_int(getattr(L, "ct_" + name + "_")(h))
    check(h, unary(name, x.t()), f"{name}_ in place", UNARY[name][1])


def test_softplus():
    g = torch.Generator().manual_seed(5)
    x = torch.cat([edges(), randoms(30_001, g), torch.rand(30_001, generator=g, dtype=torch.float64) * 80 - 40])
    for beta, th in [(1, 20), (2, 5), (0.5, 30)]:
        check(L.ct_softplus(ct.from_torch(x), beta, th), TF.softplus(x, beta, th), f"softplus({beta}, {th})",
              ulps=2)


def test_gelu_tanh():
    g = torch.Generator().manual_seed(6)
    x = torch.cat([edges(), torch.rand(30_001, generator=g, dtype=torch.float64) * 20 - 10])
    # 0.5 x (1 + tanh(...)): where tanh is near -1 the sum cancels, so ulps of tanh
    # become many ulps of the result; compare relative to the larger of |x| and 1e-300
    got = ct.to_torch(ct.check(L.ct_gelu(ct.from_torch(x), b"tanh")))
    want = TF.gelu(x, approximate="tanh")
    err = ((got - want).abs() / x.abs().clamp(min=1e-300))[want.isfinite()]
    assert err.max().item() <= 4 * 2**-53, f"gelu tanh: relative error {err.max().item()}"
    assert torch.equal(got.isnan(), want.isnan())


@pytest.mark.parametrize("log", [False, True])
def test_softmax(log):
    g = torch.Generator().manual_seed(7 + log)
    fn, ct_fn = (torch.log_softmax, L.ct_log_softmax) if log else (torch.softmax, L.ct_softmax)
    for shape in [(1, 1), (3, 7), (5, 33), (64, 1000), (2, 3, 17)]:
        x = torch.randn(*shape, generator=g, dtype=torch.float64) * 30
        for dim in range(-1, -len(shape) - 1, -1):
            # the row sums are added in another order than torch's: a few ulps, and
            # log(sum)'s ulps where x - max - log(sum) cancels
            for what, v in [("", x), (".transpose", x.transpose(0, -1))]:
                check(ct_fn(ct.from_torch(v), dim), fn(v, dim), f"{fn.__name__}{shape}{what} dim {dim}", ulps=8,
                      atol=2**-50 if log else 0.0)
    # the edges in a row: inf and NaN rows give torch's NaNs, -inf entries 0 / -inf
    x = torch.tensor([[0.0, -math.inf, 1.0, -745.2], [math.inf, 0.0, 1.0, 2.0], [math.nan, 0.0, 1.0, 2.0],
                      [-math.inf] * 4, [709.0, 710.0, -1000.0, 0.0]], dtype=torch.float64)
    check(ct_fn(ct.from_torch(x), -1), fn(x, -1), f"{fn.__name__} edges", ulps=8, atol=2**-50 if log else 0.0)


# ---- expm1, erf (float64 and float32) and float32 log1p, and the ops on them ----
# float32 runs on the float64 functions, rounded: the oracle there is torch's float64
# result rounded to float32 (torch's own float32 erf is up to 2 ulp off it), 1 ulp.
F32_EDGES = [88.7228391, 88.72284, 89.0, -87.3, -103.9, -17.3, 0.3465736, 3.9192059, 3.92, 1e-40, -1e-40,
             1.1754944e-38, 3.4028235e38, -3.4028235e38, 0.99999994, -0.99999994]


def edges_of(dtype):
    x = edges()
    if dtype == torch.float32:
        x = torch.cat([x.float(), torch.tensor(F32_EDGES, dtype=torch.float32)])
        x = torch.cat([x, torch.nextafter(x, torch.full_like(x, math.inf))])
    return x


def randoms_of(n, g, dtype):
    if dtype == torch.float64:
        return randoms(n, g)
    k = n // 3
    return torch.cat([torch.rand(k, generator=g) * 200 - 100, torch.rand(k, generator=g) * 8 - 4,
                      torch.randint(-2**31, 2**31 - 1, (n - 2 * k,), generator=g, dtype=torch.int32)
                      .view(torch.float32)])


def oracle(fn, x):
    return fn(x.double()).to(x.dtype) if x.dtype == torch.float32 else fn(x)


NEW = {"expm1": torch.expm1, "erf": torch.erf, "log1p": torch.log1p}
DTYPES = [torch.float64, torch.float32]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("name", list(NEW))
def test_new_unary(name, dtype):
    g = torch.Generator().manual_seed(11)
    x = torch.cat([edges_of(dtype), randoms_of(300_001, g, dtype)])
    if name == "log1p":
        x = torch.cat([x, x.abs()])
    fn = (lambda v: unary("log1p", v)) if name == "log1p" else NEW[name]
    check(getattr(L, "ct_" + name)(ct.from_torch(x)), oracle(fn, x), f"{name} {dtype}")
    if dtype == torch.float32:  # and torch's float32 itself, 2 ulp (inf, NaN, signs exact), but
        # where Sleef's log1pf overflows early (above 1e38) or flushes subnormals
        w32, want = NEW[name](x), oracle(fn, x)
        miss = (w32.isinf() & x.isfinite()) | ((w32 == 0) & (x != 0))
        check(getattr(L, "ct_" + name)(ct.from_torch(x)), torch.where(miss, want, w32), f"{name} {dtype} vs torch f32", 2)
    for n in [0, 1, 2, 7, 15, 17, 33, 1001]:
        v = randoms_of(n, g, dtype) if n > 2 else torch.tensor([-0.3, 4.0][:n], dtype=dtype)
        check(getattr(L, "ct_" + name)(ct.from_torch(v)), oracle(fn, v), f"{name}[{n}] {dtype}")
    base = torch.rand(37, 26, generator=g, dtype=dtype) * 12 - 6
    for what, v in [("t()", base.t()), ("[:, ::3]", base[:, ::3]), ("expand", base[:1, :13].expand(9, 13))]:
        check(getattr(L, "ct_" + name)(ct.from_torch(v)), oracle(fn, v), f"{name}{what} {dtype}")
    h = ct.from_torch(base.t().clone().t())  # in place, on a transposed view
    ct.check_int(getattr(L, "ct_" + name + "_")(h))
    check(h, oracle(fn, base), f"{name}_ in place {dtype}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
def test_gelu_exact_elu_softplus(dtype):
    g = torch.Generator().manual_seed(12)
    x = torch.cat([edges_of(dtype), randoms_of(30_001, g, dtype), torch.rand(30_001, generator=g, dtype=dtype) * 16 - 8])
    # gelu: 0.5 x (1 + erf(x / sqrt 2)) cancels where erf is near -1: relative to max(|x|, tiny)
    got = ct.to_torch(ct.check(L.ct_gelu(ct.from_torch(x), b"none")))
    want = oracle(TF.gelu, x)
    tiny = 1e-300 if dtype == torch.float64 else 1e-30
    err = ((got.double() - want.double()).abs() / x.double().abs().clamp(min=tiny))[want.isfinite()]
    eps = 2.0**-53 if dtype == torch.float64 else 2.0**-24
    assert err.max().item() <= 4 * eps, f"gelu {dtype}: relative error {err.max().item()}"
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
    # torch's elu is alpha (exp(x) - 1), not expm1: 0 (+0 for -0) for tiny negative x,
    # an absolute error of ulp(1) near 0; ctorch's is expm1's -x. Compared away from 0.
    xe = x[(x > 0) | (x.abs() >= 1e-3) | x.isnan()]
    for alpha in [1.0, 0.5]:
        check(L.ct_elu(ct.from_torch(xe), alpha), oracle(lambda v: TF.elu(v, alpha), xe), f"elu({alpha}) {dtype}", 2,
              atol=eps)
    for beta, th in [(1, 20), (2, 5)]:
        check(L.ct_softplus(ct.from_torch(x), beta, th), oracle(lambda v: TF.softplus(v, beta, th), x),
              f"softplus({beta}, {th}) {dtype}", 2)
    v = x[:1001].reshape(7, 143).t()  # a transposed layout
    check(L.ct_softplus(ct.from_torch(v), 1, 20), oracle(lambda w: TF.softplus(w, 1, 20), v), "softplus t()", 2)
    v = xe[:1001].reshape(7, 143).t()
    check(L.ct_elu(ct.from_torch(v), 1.0), oracle(lambda w: TF.elu(w, 1.0), v), "elu t()", 2, atol=eps)


# ---- float32 exp and the float32 / 16-bit softmax rows (vmath.h's vm_expf, and its
# AVX-512 array form where the build has it: vectors, masked tails, in place) ----
LOW = [torch.float32, torch.float16, torch.bfloat16]


def test_exp_sigmoid_f32():
    g = torch.Generator().manual_seed(13)
    x = torch.cat([edges_of(torch.float32), randoms_of(300_001, g, torch.float32),
                   torch.tensor([88.72283, 88.722836, -87.33655, -103.27893, -103.972084, -104.0], dtype=torch.float32)])
    check(L.ct_exp(ct.from_torch(x)), oracle(torch.exp, x), "exp f32")
    # sigmoid = 1 / (1 + e^-x) in float (as torch's float32): e^-x, 1 + e and the
    # quotient each round (3 ulp); where e^-x overflows (x < -88.7) it is 0, as torch's
    xs = x[x.isnan() | (x > -88.7)]
    check(L.ct_sigmoid(ct.from_torch(xs)), oracle(torch.sigmoid, xs), "sigmoid f32", 3)
    check(L.ct_sigmoid(ct.from_torch(x)), torch.sigmoid(x), "sigmoid f32 vs torch f32", 4)
    for n in [0, 1, 2, 15, 16, 17, 31, 33, 1001]:
        v = randoms_of(n, g, torch.float32) if n > 2 else torch.tensor([-0.3, 88.0][:n])
        check(L.ct_exp(ct.from_torch(v)), oracle(torch.exp, v), f"exp[{n}] f32")
        check(L.ct_sigmoid(ct.from_torch(v)), torch.sigmoid(v), f"sigmoid[{n}] f32", 4)
    base = torch.rand(37, 26, generator=g) * 200 - 110
    h = ct.from_torch(base.t().clone().t())  # in place, on a transposed view
    ct.check_int(L.ct_exp_(h))
    check(h, oracle(torch.exp, base), "exp_ in place f32")


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", LOW, ids=["f32", "f16", "bf16"])
def test_softmax_low_precision(dtype, log):
    """against torch's float32 result (rounded to dtype): float32 to a few ulps (the
    sums' order), float16 / bfloat16 (computed in float32, as torch) to 1 ulp"""
    g = torch.Generator().manual_seed(14 + log)
    fn, ct_fn = (torch.log_softmax, L.ct_log_softmax) if log else (torch.softmax, L.ct_softmax)
    ulps = 8 if dtype == torch.float32 else 1
    atol = {torch.float32: 2**-21, torch.float16: 2**-10, torch.bfloat16: 2**-7}[dtype] if log else 0.0
    for shape in [(1, 1), (3, 7), (5, 15), (4, 16), (5, 33), (64, 1000), (2, 3, 17)]:
        x = (torch.randn(*shape, generator=g, dtype=torch.float64) * 30).to(dtype)
        for dim in range(-1, -len(shape) - 1, -1):
            for what, v in [("", x), (".transpose", x.transpose(0, -1))]:
                check(ct_fn(ct.from_torch(v), dim), fn(v.float(), dim).to(dtype), f"{fn.__name__}{shape}{what} dim {dim}",
                      ulps=ulps, atol=atol)
    x = torch.tensor([[0.0, -math.inf, 1.0, -104.0], [math.inf, 0.0, 1.0, 2.0], [math.nan, 0.0, 1.0, 2.0],
                      [-math.inf] * 4, [88.0, 89.0, -1000.0, 0.0]], dtype=dtype)
    check(ct_fn(ct.from_torch(x), -1), fn(x.float(), -1).to(dtype), f"{fn.__name__} edges", ulps=ulps, atol=atol)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
def test_elu_specials(dtype):
    """elu's branch-free kernel: NaN stays NaN, -0 gives -0 (expm1), inf, -inf, odd sizes"""
    x = torch.tensor([math.nan, -0.0, 0.0, math.inf, -math.inf, -1e-30, 1e-30, -100.0, 3.0] * 3, dtype=dtype)
    got = ct.to_torch(ct.check(L.ct_elu(ct.from_torch(x), 1.5)))
    want = torch.where(x > 0, x, 1.5 * torch.expm1(x.double()).to(dtype))
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.signbit(), want.signbit())
    assert torch.equal(got[~got.isnan()], want[~want.isnan()])


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16],
                         ids=["f64", "f32", "f16", "bf16"])
def test_softmax_strided_rows(dtype, log):
    """softmax along the last dim of views, read in place (rows of stride 1) or
    gathered row by row: expanded rows, ::2 and ::3 slices, a stride-0 last dim,
    narrowed and permuted 3-D views whose outer dims do or do not merge, size-1
    dims; against torch on the same view (16-bit: torch's float32, rounded)"""
    g = torch.Generator().manual_seed(21 + log)
    fn, ct_fn = (torch.log_softmax, L.ct_log_softmax) if log else (torch.softmax, L.ct_softmax)
    ulps = 8 if dtype in (torch.float32, torch.float64) else 1
    atol = {torch.float64: 2**-50, torch.float32: 2**-21, torch.float16: 2**-10, torch.bfloat16: 2**-7}[dtype]
    r = (torch.randn(37, generator=g, dtype=torch.float64) * 10).to(dtype)
    w = (torch.randn(6, 5, 41, generator=g, dtype=torch.float64) * 10).to(dtype)
    views = {
        "expanded row": r.expand(9, 37), "::2": w[:, :, ::2], "::3 of a narrow": w[1:5, :, 2::3],
        "stride-0 last dim": w[:, :, :1].expand(6, 5, 7), "transposed 3-d": w.transpose(0, 2),
        "permuted (outer dims merge)": w.permute(1, 0, 2)[:, :, 3:], "size-1 dims": w[:1, 2:3, :].unsqueeze(1),
        "one column": w[:, :, 4:5], "rows of a column-major matrix": w[0].t().contiguous().t(),
    }
    for what, v in views.items():
        want = fn(v.double(), -1) if dtype == torch.float64 else fn(v.float(), -1).to(dtype)
        check(ct_fn(ct.from_torch(v), -1), want, f"{fn.__name__} {what}", ulps=ulps, atol=atol if log else 0.0)


ct.declare("ct_pow", T, [T, T])
ct.declare("ct_pow_scalar", T, [T, c_double])
POW_EXPONENTS = [0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 2.5, -2.5, 0.5, -0.5, 1.5, 7.0, 1e-3, 100.0, -100.0,
                 16777216.0, 16777217.0, 16777215.0, -16777215.0, 1e10, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("form", ["tensor", "scalar"])
def test_pow_f32(form):
    """float32 pow (vmath.h's vm_powf_n: exp(y log |x|) in double) against pow in
    float64 rounded once: within 1 ulp, IEEE's cases exact (x^0 = 1 and 1^y = 1
    even for NaN, (-1)^+-inf = 1, an odd integer y keeps x's sign, a non-integer y
    of a negative x is NaN but for -0 and -inf, overflow to inf, underflow into
    the subnormals); sizes that leave a partial block of 16, a strided base"""
    g = torch.Generator().manual_seed(23)
    x = torch.cat([edges_of(torch.float32), torch.tensor([-1.0, -2.0, -0.5, 3.0, -3.0, 1e-20, 1e20]),
                   torch.rand(2001, generator=g) * 8 - 4, torch.rand(1000, generator=g) * 100])
    if form == "scalar":
        for y in POW_EXPONENTS:  # the exponent in x's dtype, as torch takes it (2^24 + 1 is even)
            want = torch.pow(x.double(), torch.tensor(y, dtype=torch.float32).item()).float()
            check(L.ct_pow_scalar(ct.from_torch(x), y), want, f"pow(x, {y})")
        return
    ys = torch.tensor(POW_EXPONENTS, dtype=torch.float32)
    xx, yy = x.repeat_interleave(len(POW_EXPONENTS)), ys.repeat(x.numel())
    k = 200_003
    xx = torch.cat([xx, torch.rand(k, generator=g) * 40 - 20])
    yy = torch.cat([yy, torch.rand(k, generator=g) * 30 - 15])
    want = torch.pow(xx.double(), yy.double()).float()
    check(L.ct_pow(ct.from_torch(xx), ct.from_torch(yy)), want, "pow(x, y)")
    base = torch.stack([xx, yy], 1)  # x and y as ::2 views
    check(L.ct_pow(ct.from_torch(base[:, 0]), ct.from_torch(base[:, 1])), want, "pow of strided x, y")


# ---------------------------------------------------------------- float32 in double
# sin cos tan asin acos atan sinh cosh log2 log10 atan2 fmod remainder of float32
# run through vmath.h's vm_map16: evaluated in double and rounded once, so within
# 1 ulp of the float64 result rounded (0.56 measured; torch's Sleef: 0.93); trig
# arguments beyond 2^20, inf and NaN go to libm's float functions (glibc's tanf:
# 0.95 ulp). fmod and remainder are exact: torch's results bit for bit.
F32_UNARY = ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "log2", "log10", "log1p", "expm1"]
for _n in F32_UNARY + ["atan2", "fmod", "remainder"]:
    ct.declare("ct_" + _n, T, [T] if _n in F32_UNARY else [T, T])
    ct.declare("ct_" + _n + "_", c_int, [T] if _n in F32_UNARY else [T, T])


def floats32(n, g):
    """n floats: every binade (random bits), [-4, 4], [-1, 1], trig's 2^20 edge, the specials"""
    k = n // 3
    bits = torch.randint(-2**31, 2**31 - 1, (n - 2 * k,), generator=g, dtype=torch.int64).to(torch.int32)
    edge = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, 2.0**20, -2.0**20,
                         1e-45, -1e-45, 1.1754944e-38, 3.4028235e38, -3.4028235e38, 88.72, 89.4, 89.5, -89.5,
                         1.5707964, 3.1415927, 1e-30, -1e-30, 1.0000001, -0.99999994])
    edge = torch.cat([edge, torch.nextafter(edge, torch.full_like(edge, math.inf))])
    return torch.cat([torch.rand(k, generator=g) * 8 - 4, torch.rand(k, generator=g) * 2 - 1,
                      bits.view(torch.float32), edge.float()])


def f32_want(name, *xs):
    """float64's result rounded to float32: the correctly rounded one, as near as
    matters; fmod and remainder: C's fmodf (exact) and torch's rule for remainder
    (torch 1.13's vectorised fmod gives NaN for subnormal divisors: not copied)"""
    if name in ("fmod", "remainder"):
        x, y = xs
        with np.errstate(invalid="ignore", divide="ignore"):
            m = torch.from_numpy(np.fmod(x.numpy(), y.numpy()))
        if name == "remainder":
            m = torch.where((m != 0) & ((y < 0) != (m < 0)), m + y, m)
        return m
    return getattr(torch, name)(*[x.double() for x in xs]).float()


@pytest.mark.parametrize("name", F32_UNARY)
def test_float32_math_in_double(name):
    g = torch.Generator().manual_seed(6)
    x = floats32(90_001, g)
    check(getattr(L, "ct_" + name)(ct.from_torch(x)), f32_want(name, x), name, 1)
    # odd sizes (a block of 16 and its tail), a strided view, in place, 16-bit and int inputs
    for n in (1, 15, 16, 17, 33):
        check(getattr(L, "ct_" + name)(ct.from_torch(x[:n])), f32_want(name, x[:n]), f"{name}[{n}]", 1)
    v = x[:3000].view(60, 50).t()[:, ::3]
    check(getattr(L, "ct_" + name)(ct.from_torch(v)), f32_want(name, v), f"{name} of a view", 1)
    h = ct.from_torch(x[:1000].clone())
    ct.check_int(getattr(L, "ct_" + name + "_")(h))
    check(h, f32_want(name, x[:1000]), f"{name}_", 1)
    for dt in (torch.bfloat16, torch.float16):
        xs = x[:5000].to(dt)
        check(getattr(L, "ct_" + name)(ct.from_torch(xs)), getattr(torch, name)(xs.float()).to(dt), f"{name} {dt}", 1)
    xi = torch.randint(-9, 10, (1000,), generator=g, dtype=torch.int32)
    check(getattr(L, "ct_" + name)(ct.from_torch(xi)), f32_want(name, xi), f"{name} of int32", 1)


@pytest.mark.parametrize("name", ["atan2", "fmod", "remainder"])
def test_float32_binary_math_in_double(name):
    g = torch.Generator().manual_seed(7)
    x = floats32(60_001, g)
    y = x[torch.randperm(x.numel(), generator=g)]
    y[::7] = (torch.rand(y[::7].shape, generator=g) * 10 - 5).round()  # small (and zero) divisors
    specials = torch.tensor([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 1e-40, -1e-40, 3.0, -3.0])
    a, b = specials.repeat_interleave(specials.numel()), specials.repeat(specials.numel())
    for xs, ys, what in [(x, y, "random"), (a, b, "specials"), (x[:17], y[:17], "17")]:
        # atan2: the correctly rounded result; fmod, remainder: torch's, which are exact
        check(getattr(L, "ct_" + name)(ct.from_torch(xs), ct.from_torch(ys)), f32_want(name, xs, ys),
              f"{name} {what}", 1 if name == "atan2" else 0)
    xi, yi = torch.randint(-50, 50, (999,), generator=g), torch.randint(1, 9, (999,), generator=g)
    xf, yf = xi.float(), yi.float()  # torch's own results too
    want = f32_want(name, xf, yf) if name == "atan2" else getattr(torch, name)(xf, yf)
    got = getattr(L, "ct_" + name)(ct.from_torch(xf), ct.from_torch(yf))
    check(got, want, f"{name} of whole floats", 1 if name == "atan2" else 0)
