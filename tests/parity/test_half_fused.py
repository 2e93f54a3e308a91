"""The fused float16 / bfloat16 elementwise kernels (elementwise.c: add, sub,
mul, div, neg, abs, relu, exp, sigmoid take 16-bit arrays, compute in float in
registers and round once) against PyTorch, bit for bit: random values of every
magnitude with NaN, +-inf, +-0, subnormals, sums and products that fall exactly
between two 16-bit values (ties go to even) and results that overflow to inf
or land in the subnormals, over lengths around the kernels' blocks (1..70) and
the engine's steps (1023..1025), out of place and in place, and through the
layouts that reach them gathered (broadcast, ::2 slices, other dtypes).

exp and sigmoid are not correctly rounded in float (vmath.h, about 1 ulp), so
their 16-bit results are checked against torch within one 16-bit ulp, and bit
for bit against the float32 results of ctorch rounded by torch: one rounding
of the same float, as the unfused path did. torch 1.13 has no float16 relu,
exp or sigmoid on CPU: there its float32 result rounded once stands in.
Breaking the kernels' rounding (float16 toward zero, bfloat16 truncated, the
subnormal path of vcvtneps2bf16 skipped) or their tails fails these tests."""
from ctypes import c_double, c_int, c_void_p

import pytest

torch = pytest.importorskip("torch")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import lib  # noqa: E402

T = c_void_p
BINARY = ("add", "sub", "mul", "div")
UNARY_EXACT = ("neg", "abs", "relu")
UNARY_ROUNDED = ("exp", "sigmoid")
for _n in BINARY:
    ct.declare("ct_" + _n, T, [T, T])
    ct.declare("ct_" + _n + "_", c_int, [T, T])
    ct.declare("ct_" + _n + "_scalar", T, [T, c_double])
for _n in UNARY_EXACT + UNARY_ROUNDED:
    ct.declare("ct_" + _n, T, [T])
    ct.declare("ct_" + _n + "_", c_int, [T])
for _n in ("add", "sub"):
    ct.declare("ct_" + _n + "_alpha", T, [T, T, c_double])
ct.declare("ct_add_alpha_", c_int, [T, T, c_double])

pytestmark = ct.requires("ct_add", "ct_add_", "ct_add_alpha", "ct_add_alpha_", "ct_sub_alpha", "ct_exp_",
                         "ct_sigmoid_", "ct_relu_", "ct_div_scalar")

HALVES = [torch.float16, torch.bfloat16]
IDS = lambda d: str(d)[6:]  # noqa: E731
LENGTHS = list(range(1, 71)) + [1023, 1024, 1025]


def specials(dtype):
    """NaN, +-inf, +-0, the largest finite value, subnormals of the dtype (and,
    for bfloat16, float subnormals), 1 and the numbers just above it."""
    fi = torch.finfo(dtype)
    tiny = fi.tiny  # smallest normal
    sub = [tiny / 2, tiny / 8, -tiny / 4, tiny * fi.eps]  # subnormals, the last the smallest
    ulp = fi.eps  # of [1, 2)
    v = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, fi.max, -fi.max, fi.max / 2, tiny, -tiny,
         1.0, 1.0 + ulp, 1.0 + 2 * ulp, 1.0 + 3 * ulp, 1.5, ulp / 2, 3 * ulp / 2, -ulp / 2] + sub
    return torch.tensor(v, dtype=torch.float32).to(dtype)


def pool(n, dtype, seed):
    """n values: specials and random ones of magnitudes 2^-30 .. 2^20 (both
    signs), shuffled with a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    mag = torch.pow(2.0, torch.randint(-30, 21, (n,), generator=g).float())
    x = (torch.randn(n, generator=g) * mag).to(dtype)
    sp = specials(dtype)
    k = torch.randint(0, n, (min(n, 3 * len(sp)),), generator=g)
    x[k] = sp[torch.randint(0, len(sp), (len(k),), generator=g)]
    return x


def tie_pairs(n, dtype, seed):
    """(a, b) of n elements where many a + b and a * b fall exactly halfway
    between two values of dtype, and some a + b overflow to inf or a * b
    underflow into the subnormals."""
    fi = torch.finfo(dtype)
    ulp = fi.eps
    g = torch.Generator().manual_seed(seed)
    k = torch.randint(0, 64, (n,), generator=g).float()
    e = torch.pow(2.0, torch.randint(-6, 7, (n,), generator=g).float())
    kind = torch.randint(0, 5, (n,), generator=g)
    a = (1 + k * ulp) * e            # k odd or even: the tie goes down or up
    b = torch.where(kind == 0, ulp / 2 * e, 1.5 * torch.ones(n))  # sum ties / product ties (k odd)
    a = torch.where(kind == 2, torch.full((n,), fi.max), a)  # max + max, max + ulp/2 (at max): inf
    b = torch.where(kind == 2, torch.where(k < 32, torch.full((n,), fi.max), fi.max * ulp / 2), b)
    a = torch.where(kind == 3, torch.full((n,), fi.tiny) * (1 + k * ulp), a)  # products in the subnormals
    b = torch.where(kind == 3, torch.pow(2.0, -torch.randint(1, 12, (n,), generator=g).float()) * 1.5, b)
    sign = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)
    return (a * sign).to(dtype), b.to(dtype)


BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def same_bits(h, want, what, skip=None):
    """h's values are want's bit for bit (-0 is not 0); NaN only where want is
    NaN (payloads aside); elements where skip is True are not compared."""
    got = ct.to_torch(h)
    assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype} {got.shape}"
    gb, wb = got.reshape(-1).view(BITS[got.element_size()]), want.reshape(-1).view(BITS[got.element_size()])
    gn, wn = torch.isnan(got.reshape(-1)), torch.isnan(want.reshape(-1))
    bad = (gn != wn) | (~wn & (gb != wb))
    if skip is not None:
        bad &= ~skip.reshape(-1)
    if bad.any():
        i = int(bad.nonzero()[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {got.numel()} differ, first at {i}: "
                             f"ctorch {got.reshape(-1)[i].item()!r} ({int(gb[i]):#x}), "
                             f"torch {want.reshape(-1)[i].item()!r} ({int(wb[i]):#x})")


def torch_op(name, x, y=None, alpha=None):
    """torch's result; for unary ops torch 1.13 lacks in float16 (relu, exp,
    sigmoid), its float32 result rounded once to float16: the opmath way."""
    if y is None:
        try:
            return getattr(torch, name)(x)
        except RuntimeError as e:
            if "not implemented for 'Half'" not in str(e):
                raise
            return getattr(torch, name)(x.float()).to(x.dtype)
    return getattr(torch, name)(x, y) if alpha is None else getattr(torch, name)(x, y, alpha=alpha)


def inputs(n, dtype, seed):
    """Random pool values and tie pairs, interleaved by halves."""
    a, b = pool(n, dtype, seed), pool(n, dtype, seed + 1)
    ta, tb = tie_pairs(n, dtype, seed + 2)
    h = n // 2
    return torch.cat([a[:h], ta[h:]]), torch.cat([b[:h], tb[h:]])


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
def test_binary_bits(dtype):
    """add / sub / mul / div, out of place and in place, over every length."""
    for n in LENGTHS:
        a, b = inputs(n, dtype, 7 * n)
        for name in BINARY:
            want = torch_op(name, a, b)
            same_bits(getattr(lib, "ct_" + name)(ct.from_torch(a), ct.from_torch(b)), want, f"{name} n={n}")
            h = ct.from_torch(a)
            ct.check_int(getattr(lib, "ct_" + name + "_")(h, ct.from_torch(b)))
            same_bits(h, want, f"{name}_ n={n}")
            h = ct.from_torch(b)  # the output is the second input
            ct.check_int(getattr(lib, "ct_" + name + "_")(h, h))
            same_bits(h, torch_op(name, b, b), f"{name}_(b, b) n={n}")


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
def test_alpha_bits(dtype):
    """a + alpha b, a - alpha b. torch 1.13 rounds float16's alpha * b to
    float16 before the sum, and computes bfloat16's as one fma; ctorch (the
    fused kernels as the float32 path before them) rounds once after
    a + alpha * b in float. They agree where alpha * b is exact in the dtype:
    powers of two, b clear of overflow and of the subnormals."""
    fi = torch.finfo(dtype)
    for n in (1, 17, 31, 32, 33, 64, 65, 1025):
        a, b = inputs(n, dtype, 11 * n)
        mag = b.float().abs()
        b = torch.where((mag > fi.max / 8) | ((mag < fi.tiny * 8) & (mag > 0)), torch.ones_like(b), b)
        for alpha in (2.0, -4.0, 0.5, -0.25):
            for name in ("add", "sub"):
                want = torch_op(name, a, b, alpha)
                same_bits(getattr(lib, f"ct_{name}_alpha")(ct.from_torch(a), ct.from_torch(b), alpha), want,
                          f"{name} alpha={alpha} n={n}")
            h = ct.from_torch(a)
            ct.check_int(lib.ct_add_alpha_(h, ct.from_torch(b), alpha))
            same_bits(h, torch_op("add", a, b, alpha), f"add_ alpha={alpha} n={n}")


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
def test_unary_exact_bits(dtype):
    for n in LENGTHS:
        a = pool(n, dtype, 13 * n)
        for name in UNARY_EXACT:
            want = torch_op(name, a)
            same_bits(getattr(lib, "ct_" + name)(ct.from_torch(a)), want, f"{name} n={n}")  # relu(-0) is -0
            h = ct.from_torch(a)
            ct.check_int(getattr(lib, "ct_" + name + "_")(h))
            same_bits(h, want, f"{name}_ n={n}")


def ulps_apart(got, want):
    """Distance in 16-bit steps (both finite or equal infinities), per element."""
    def key(t):
        i = t.view(torch.int16).to(torch.int32) & 0xFFFF
        return torch.where(i >= 0x8000, 0x8000 - i, i)  # ordered: negatives below zero
    return (key(got) - key(want)).abs()


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
def test_unary_rounded(dtype):
    """exp and sigmoid: bit for bit ctorch's float32 result rounded once (by
    torch), within one ulp of torch's 16-bit result, in place too."""
    for n in LENGTHS:
        a = pool(n, dtype, 17 * n)
        a = torch.where(a.abs() > 30, a / 1024, a)  # finite results mostly, some overflow left
        for name in UNARY_ROUNDED:
            h32 = ct.check(getattr(lib, "ct_" + name)(ct.from_torch(a.float())))
            once = ct.to_torch(h32).to(dtype)
            h = ct.check(getattr(lib, "ct_" + name)(ct.from_torch(a)))
            same_bits(h, once, f"{name} n={n} against float32 rounded")
            hi = ct.from_torch(a)
            ct.check_int(getattr(lib, "ct_" + name + "_")(hi))
            same_bits(hi, once, f"{name}_ n={n} against float32 rounded")
            got, want = ct.to_torch(h), torch_op(name, a)
            both = ~torch.isnan(want)
            assert torch.equal(torch.isnan(got), torch.isnan(want)), f"{name} n={n}: NaN"
            d = ulps_apart(got[both], want[both])
            assert d.numel() == 0 or int(d.max()) <= 1, f"{name} n={n}: {int(d.max())} ulps from torch"


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
def test_gathered_operands(dtype):
    """The fused kernels behind the engine's gathers: a broadcast row (stride
    0), ::2 slices, a 0-dim tensor, a Python scalar, another dtype's tensor
    that promotes to the 16-bit one (uint8) and one that does not (float32)."""
    n = 1025
    a, b = inputs(3 * n, dtype, 5)
    rows, row = a.view(3, n), b[:n]
    w = pool(2 * n, dtype, 6)
    u8 = torch.arange(n, dtype=torch.uint8)
    f32 = pool(n, torch.float32, 8)
    zero_dim = b[7].clone()
    for name in BINARY:
        f = getattr(lib, "ct_" + name)
        for what, x, y in (("rows op row", rows, row), ("row op rows", row, rows), ("::2", w[::2], row),
                           ("1::2", row, w[1::2]), ("0-dim", rows, zero_dim), ("uint8", row, u8),
                           ("float32", row, f32)):
            same_bits(f(ct.from_torch(x), ct.from_torch(y)), torch_op(name, x, y), f"{name} {what}")
        for s in (3.0, 0.1, 1e10, -2.5e-8):
            same_bits(getattr(lib, f"ct_{name}_scalar")(ct.from_torch(row), s), torch_op(name, row, s),
                      f"{name} scalar {s}")
        # in place into a ::2 slice: gathered, computed, scattered back
        want = w.clone()
        getattr(want[::2], name + "_")(row)
        h, storage = ct.from_torch(w, with_storage=True)
        view = ct.check(lib.ct_slice(h, 0, 0, 2 * n, 2))
        ct.check_int(getattr(lib, "ct_" + name + "_")(view, ct.from_torch(row)))
        same_bits(storage, want, f"{name}_ into ::2")
    for name in UNARY_EXACT:
        x = w[1::2]
        same_bits(getattr(lib, "ct_" + name)(ct.from_torch(x)), torch_op(name, x), f"{name} 1::2")
