"""The tiled loop's direct rows and the integer kernels of exp and sigmoid
(iter.c, elementwise.c), against PyTorch.

a.t() + b: when every operand is either direct (of the kernel's dtype, unit
stride along the output's inner dim) or gathered by tiles, the tiled loop runs
the kernel straight on each row of a tile (tile_rows); 16-bit tiled inputs go
by 128 x 128 tiles. Checked bit for bit against torch for the six dtypes the
benchmark measures (and 8-bit and bool ones), with shapes around the tiles
(127..129, 257, one row or column, empty), storage offsets, permuted and
sliced 3-d views, alpha, in-place forms with a transposed self or other, and
sizes that split over two threads.

exp and sigmoid of int32 / int64 take the integers themselves (with AVX-512
16 at a time in registers, the tail under a mask; else blocks of 128
converted in L1) and give float32 (sqrt, rsqrt and reciprocal, through the
engine's conversion, alongside): checked bit for bit against the float32
path they replace (ctorch's exp of the input converted to float32), within
float32's rounding of torch, with torch's output layout (a non-dense input
gives a dense output in its dim order), over lengths around the blocks,
transposed and sliced inputs, large integers (where the conversion rounds)
and the errors of the in-place forms."""
from ctypes import c_double, c_int, c_void_p

import pytest

torch = pytest.importorskip("torch")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import lib  # noqa: E402

T = c_void_p
ct.declare("ct_add", T, [T, T])
ct.declare("ct_add_", c_int, [T, T])
ct.declare("ct_add_alpha", T, [T, T, c_double])
ct.declare("ct_add_alpha_", c_int, [T, T, c_double])
INT_FNS = ["exp", "sigmoid", "sqrt", "rsqrt", "reciprocal"]
for _n in INT_FNS:
    ct.declare("ct_" + _n, T, [T])
    ct.declare("ct_" + _n + "_", c_int, [T])
ct.declare("ct_to_dtype", T, [T, c_int])

pytestmark = ct.requires("ct_add", "ct_add_", "ct_add_alpha", "ct_add_alpha_", "ct_to_dtype",
                         *["ct_" + n + s for n in INT_FNS for s in ("", "_")])

SIX = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]
OTHERS = [torch.int8, torch.uint8, torch.int16, torch.bool]
IDS = lambda d: str(d)[6:]  # noqa: E731
SHAPES = [(127, 129), (128, 128), (129, 257), (257, 65), (1, 300), (300, 1), (2, 130), (130, 3), (0, 7), (7, 0),
          (63, 64), (65, 31)]


def values(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:  # many digits, so that a rounding difference shows
        x = (torch.randn(shape, generator=g) * 7).to(dtype)
        if x.numel() > 8:
            flat = x.view(-1)
            flat[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0]).to(dtype)
        return x
    lo, hi = (0, 256) if dtype == torch.uint8 else (-100, 100)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def check_add(x, y, alpha=None):
    hx, hy = ct.from_torch(x), ct.from_torch(y)
    if alpha is None:
        h = ct.check(lib.ct_add(hx, hy))
        want = x | y if x.dtype == torch.bool else x + y
    else:
        h = ct.check(lib.ct_add_alpha(hx, hy, alpha))
        want = torch.add(x, y, alpha=alpha if x.dtype.is_floating_point else int(alpha))
    ct.assert_close(h, want)
    ct.assert_same_layout(h, want)


@pytest.mark.parametrize("dtype", SIX + OTHERS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_add_transposed_first(dtype, shape):
    """a.t() + b: the output follows a.t(), b goes by tiles."""
    a = values(shape[::-1], dtype, 1).t()
    b = values(shape, dtype, 2)
    check_add(a, b)
    check_add(b, a)  # the output follows b: a.t() goes by tiles


@pytest.mark.parametrize("dtype", SIX, ids=IDS)
def test_add_alpha_and_offsets(dtype):
    """alpha (exact in every dtype: 2 or -3), and views with storage offsets."""
    base_a = values((300, 260), dtype, 3)
    base_b = values((270, 310), dtype, 4)
    a = base_a[5:, 3:].t()[:250, :270]  # [250, 270], offset, transposed
    b = base_b[1:251, 7:277]  # [250, 270], offset, rows of 310
    check_add(a, b, 2.0 if dtype.is_floating_point else -3.0)
    check_add(a, b)


@pytest.mark.parametrize("dtype", SIX, ids=IDS)
def test_add_permuted_3d(dtype):
    """3-d views whose unit-stride dims differ: tiles over dims 0 and 1 of the
    plan, the third dim outside; slices along the third dim too."""
    for perm, shape in [((2, 0, 1), (3, 130, 67)), ((1, 2, 0), (129, 5, 66)), ((0, 2, 1), (4, 131, 129))]:
        inv = [perm.index(i) for i in range(3)]
        a = values(tuple(shape[p] for p in inv), dtype, 5).permute(*perm)
        b = values(shape, dtype, 6)
        check_add(a, b)
        check_add(a[:, ::2], b[:, ::2])
        check_add(b[1:], a[1:])


@pytest.mark.parametrize("dtype", SIX, ids=IDS)
def test_add_inplace_transposed(dtype):
    """self transposed (the output, direct) and other transposed (tiled)."""
    shape = (129, 200)
    a = values(shape[::-1], dtype, 7).t()
    b = values(shape, dtype, 8)
    for self_, other in [(a, b), (b, a)]:
        h, hs = ct.from_torch(self_, with_storage=True)
        ho = ct.from_torch(other)
        ct.check_int(lib.ct_add_alpha_(h, ho, 2.0 if dtype.is_floating_point else 3.0))
        want = self_.clone().add_(other, alpha=2.0 if dtype.is_floating_point else 3)
        ct.assert_close(h, want)
        ct.assert_same_layout(h, self_)


@pytest.mark.parametrize("dtype", SIX, ids=IDS)
def test_add_transposed_large(dtype):
    """Sizes that split over two threads (and many tiles)."""
    shape = (700, 1030)
    a = values(shape[::-1], dtype, 9).t()
    b = values(shape, dtype, 10)
    check_add(a, b)


@pytest.mark.parametrize("pair", [(torch.float16, torch.float32), (torch.bfloat16, torch.float16),
                                  (torch.int32, torch.float64), (torch.float16, torch.int64)], ids=str)
def test_add_transposed_mixed(pair):
    """A tiled input or a row converted: the tiled loop's general rows."""
    shape = (131, 140)
    for x, y in [(values(shape[::-1], pair[0], 11).t(), values(shape, pair[1], 12)),
                 (values(shape[::-1], pair[1], 13).t(), values(shape, pair[0], 14))]:
        check_add(x, y)
        check_add(y, x)


def int_values(shape, dtype, seed):
    """integers of every size: small ones (finite exp), and ones past 2^24
    where the float32 conversion rounds (sigmoid 0 or 1, exp 0 or inf)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-90, 90, shape, generator=g).to(dtype)  # with zeros: 1 / 0, rsqrt(0)
    flat = x.view(-1) if x.is_contiguous() else None
    if flat is not None and flat.numel() > 6:
        big = [2 ** 24 + 1, -(2 ** 24) - 3, 2 ** 31 - 1, -(2 ** 31)]
        if dtype == torch.int64:
            big += [2 ** 53 + 1, -(2 ** 63)]
        k = min(len(big), flat.numel())
        flat[-k:] = torch.tensor(big[:k], dtype=dtype)
    return x


def float_path(fn, x):
    """ctorch's fn of x converted to float32: the float32 path the integer
    kernels replace, bit for bit."""
    hf = ct.check(lib.ct_to_dtype(ct.from_torch(x), ct.CT_FLOAT32))
    return ct.to_torch(ct.check(getattr(lib, "ct_" + fn)(hf)))


@pytest.mark.parametrize("fn", INT_FNS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=IDS)
def test_float_unary_of_ints(fn, dtype):
    lengths = [0, 1, 2, 15, 16, 17, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025, 5000, 40000]
    views = [int_values((n,), dtype, n) for n in lengths]
    views += [int_values((130, 67), dtype, 1).t(), int_values((40, 300), dtype, 2)[:, ::3],
              int_values((6, 70, 9), dtype, 3).permute(2, 0, 1), int_values((300, 270), dtype, 4)[3:, 5:],
              int_values((1, 1), dtype, 5), torch.tensor(7, dtype=dtype),
              int_values((37,), dtype, 7).expand(50, 37)]
    for x in views:
        h = ct.check(getattr(lib, "ct_" + fn)(ct.from_torch(x)))
        want = getattr(torch, fn)(x)
        ct.assert_same_layout(h, want)
        ct.assert_close(h, want, rtol=2e-6, atol=1e-37)
        got, ref = ct.to_torch(h), float_path(fn, x)
        assert torch.equal(got.view(torch.int32), ref.view(torch.int32)), f"{fn} {tuple(x.shape)}: not the float32 path"


@pytest.mark.parametrize("fn", INT_FNS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=IDS)
def test_float_unary_of_ints_inplace_errors(fn, dtype):
    x = int_values((5, 7), dtype, 6)
    h = ct.from_torch(x)
    ct.assert_error(getattr(lib, "ct_" + fn + "_")(h), ct.torch_error(lambda: getattr(x.clone(), fn + "_")()))
