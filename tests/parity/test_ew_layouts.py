"""Parity of the elementwise engine's loops with PyTorch, bit for bit, on the
layouts that do not reach the kernels as contiguous rows: the tiled loop (an
input whose unit stride is along another dim than the output's: a.t() + b,
3-d permutes, broadcasts beside them, in-place forms with a transposed self),
and strided or broadcast operands whose dtype the kernel converts (16-bit
floats and integers through float32/float64 or int64 compute dtypes). Sizes
are not multiples of the tiles (64 x 32) or of the SIMD transposes, include
0 and 1, and some are large enough for two threads."""
from ctypes import c_double, c_int, c_void_p

import warnings
import pytest

torch = pytest.importorskip("torch")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import lib  # noqa: E402

T = c_void_p
for _n in ("add", "mul", "sub"):
    ct.declare("ct_" + _n, T, [T, T])
    ct.declare("ct_" + _n + "_", c_int, [T, T])
for _n in ("neg", "sqrt", "exp"):
    ct.declare("ct_" + _n, T, [T])
    ct.declare("ct_" + _n + "_", c_int, [T])
ct.declare("ct_where", T, [T, T, T])

pytestmark = ct.requires("ct_add", "ct_add_", "ct_mul", "ct_sqrt", "ct_neg", "ct_where", "ct_copy_")

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
IDS = lambda d: str(d)[6:]  # noqa: E731


def values(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:  # many digits, so that a rounding difference shows
        return (torch.randn(shape, generator=g) * 7).to(dtype)
    lo, hi = (0, 256) if dtype == torch.uint8 else (-100, 100)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def transposed(shape, dtype, seed, perm=None):
    """A tensor of the given shape whose memory is in another dim order."""
    n = len(shape)
    perm = perm or tuple(range(n))[::-1]
    inv = [perm.index(i) for i in range(n)]
    base = values(tuple(shape[p] for p in inv), dtype, seed)
    return base.permute(*perm)


def binary(name, x, y):
    return ct.check(getattr(lib, "ct_" + name)(ct.from_torch(x), ct.from_torch(y)))


def torch_binary(name, x, y):
    if name == "add" and x.dtype == y.dtype == torch.bool:
        return x | y
    return getattr(torch, name)(x, y)


SHAPES_2D = [(37, 1029), (1029, 37), (300, 301), (64, 32), (65, 33), (1, 200), (200, 1), (0, 7), (7, 0),
             (3, 2), (2, 300)]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_transposed_operand(dtype):
    """a.t() + b and b + a.t(): the output follows the first operand's layout,
    so in one of them the tiled input is the second, in the other the first."""
    for shape in SHAPES_2D:
        a, b = transposed(shape, dtype, 1), values(shape, dtype, 2)
        for name in ("add", "mul"):
            for x, y in ((a, b), (b, a)):
                want = torch_binary(name, x, y)
                got = binary(name, x, y)
                ct.assert_close(got, want, what=f"{name} {shape} {dtype}: ")
                if 0 not in shape and 1 not in shape:
                    ct.assert_same_layout(got, want, what=f"{name} {shape}: ")


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("perm", [(0, 2, 1), (2, 1, 0), (1, 2, 0), (2, 0, 1), (1, 0, 2)])
def test_permuted_3d(dtype, perm):
    shape = (5, 37, 70)
    a, b = transposed(shape, dtype, 3, perm), values(shape, dtype, 4)
    ct.assert_close(binary("add", a, b), torch_binary("add", a, b), what=f"permute{perm}: ")
    ct.assert_close(binary("add", b, a), torch_binary("add", b, a), what=f"permute{perm} second: ")
    c = transposed(shape, dtype, 5, (2, 0, 1) if perm != (2, 0, 1) else (0, 2, 1))
    ct.assert_close(binary("add", a, c), torch_binary("add", a, c), what=f"permute{perm} + other permute: ")


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_broadcast_beside_transposed(dtype):
    a = transposed((37, 1029), dtype, 6)
    for other in (values((1029,), dtype, 7), values((37, 1), dtype, 8), values((1, 1029), dtype, 9),
                  values((), dtype, 10), values((1029,), dtype, 11).expand(37, 1029)):
        ct.assert_close(binary("add", a, other), torch_binary("add", a, other), what=f"bcast {other.shape}: ")
        ct.assert_close(binary("add", other, a), torch_binary("add", other, a), what=f"bcast {other.shape} first: ")
    big = transposed((5, 300, 301), dtype, 12)
    row = values((300, 1), dtype, 13)
    ct.assert_close(binary("add", big, row), torch_binary("add", big, row), what="3-d transposed + column: ")


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_in_place_transposed_self(dtype):
    if dtype == torch.bool:
        pytest.skip("add_ of bool is logical or; mul_ covers it")
    for shape in [(37, 1029), (300, 301), (1, 50), (0, 5)]:
        for name in ("add", "mul"):
            a, b = transposed(shape, dtype, 14), values(shape, dtype, 15)
            want = getattr(a.clone(), name + "_")(b)  # clone keeps a's strides
            h, storage = ct.from_torch(a, with_storage=True)
            ct.check_int(getattr(lib, "ct_" + name + "_")(h, ct.from_torch(b)))
            ct.assert_close(h, want, what=f"{name}_ {shape} transposed self: ")
            # contiguous self, transposed other
            a2, b2 = values(shape, dtype, 16), transposed(shape, dtype, 17)
            want2 = getattr(a2.clone(), name + "_")(b2)
            h2 = ct.from_torch(a2)
            ct.check_int(getattr(lib, "ct_" + name + "_")(h2, ct.from_torch(b2)))
            ct.assert_close(h2, want2, what=f"{name}_ {shape} transposed other: ")


PROMOTIONS = [(torch.float16, torch.float32), (torch.bfloat16, torch.float32), (torch.float16, torch.bfloat16),
              (torch.int32, torch.float32), (torch.uint8, torch.float16), (torch.int8, torch.int64),
              (torch.float32, torch.float64), (torch.bool, torch.int16), (torch.int16, torch.bfloat16)]


@pytest.mark.parametrize("da,db", PROMOTIONS, ids=lambda d: IDS(d))
def test_promotion_with_transposed(da, db):
    for shape in [(37, 1029), (300, 301)]:
        for x, y in ((values(shape, da, 18), transposed(shape, db, 19)),
                     (transposed(shape, da, 20), values(shape, db, 21))):
            for name in ("add", "mul"):
                want = torch_binary(name, x, y)
                ct.assert_close(binary(name, x, y), want, what=f"{name} {x.dtype} {y.dtype} {shape}: ")
                ct.assert_close(binary(name, y, x), torch_binary(name, y, x), what=f"{name} swapped: ")


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_strided_slices(dtype):
    """w[:, ::2] and w[::3, 1::2]: strided rows, converted to the compute dtype."""
    w = values((300, 602), dtype, 22)
    b = values((300, 301), dtype, 23)
    for x in (w[:, ::2], w[:, 1::2]):
        ct.assert_close(binary("add", x, b), torch_binary("add", x, b), what="::2 slice + b: ")
        ct.assert_close(binary("add", b, x), torch_binary("add", b, x), what="b + ::2 slice: ")
    x = w[::3, 1::2]
    y = values(x.shape, dtype, 24)
    ct.assert_close(binary("mul", x, y), torch_binary("mul", x, y), what="[::3, 1::2] slice: ")
    if dtype != torch.bool:  # into a strided output: the scatter converts back
        want = w.clone()
        want[:, ::2].add_(b)
        h, storage = ct.from_torch(w, with_storage=True)
        view = ct.check(lib.ct_slice(h, 1, 0, 602, 2))
        ct.check_int(lib.ct_add_(view, ct.from_torch(b)))
        ct.assert_close(h, want, what="add_ into a ::2 slice: ")


def torch_unary(name, x):
    if x.dtype in (torch.float16, torch.bfloat16) and name == "sqrt":
        return x.float().sqrt().to(x.dtype)  # torch 1.13 has no CPU half sqrt: float, then rounded
    return getattr(torch, name)(x)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_unary_layouts(dtype):
    names = ["sqrt"] + ([] if dtype == torch.bool else ["neg"])
    w = values((300, 602), dtype, 25)
    if dtype.is_floating_point:
        w = w.abs()
    for x in (w[:, ::2], w[:, :301].t(), w.view(300, 301, 2).permute(2, 1, 0), w[:, ::2].t()):
        for name in names:
            got = ct.check(getattr(lib, "ct_" + name)(ct.from_torch(x)))
            ct.assert_close(got, torch_unary(name, x), what=f"{name} {tuple(x.stride())}: ")
    if dtype.is_floating_point:  # in place on a transposed and on a strided self
        for x in (w[:, :301].t(), w[:, ::2]):
            h = ct.from_torch(x)
            ct.check_int(lib.ct_sqrt_(h))
            ct.assert_close(h, torch_unary("sqrt", x), what="sqrt_: ")


@pytest.mark.parametrize("dtype", [torch.float16, torch.int32, torch.float32, torch.float64], ids=IDS)
def test_where_three_layouts(dtype):
    """Three inputs: a transposed condition, a strided and a contiguous operand."""
    cond = transposed((37, 1029), torch.bool, 26)
    a = values((37, 2058), dtype, 27)[:, ::2]
    b = transposed((37, 1029), dtype, 28)
    c = values((37, 1029), dtype, 29)
    for x, y in ((a, b), (b, c), (c, b)):
        got = ct.check(lib.ct_where(ct.from_torch(cond), ct.from_torch(x), ct.from_torch(y)))
        ct.assert_close(got, torch.where(cond, x, y), what="where: ")


@pytest.mark.parametrize("adt,bdt", [(torch.float32, torch.float32), (torch.float32, torch.int64),
                                     (torch.int32, torch.float64), (torch.bool, torch.bool)], ids=str)
def test_where_output_layout_as_torch(adt, bdt):
    """torch's where runs its condition in its own dtype (self and other are
    converted by .to() first): the output's layout follows the inputs as they
    are then, an expanded condition counting as its own strides"""
    g = torch.Generator().manual_seed(40)
    conds = [torch.rand(4, generator=g) > 0.5, torch.rand(3, 4, generator=g) > 0.5,
             (torch.rand(4, 3, generator=g) > 0.5).t(), (torch.rand(3, 1, generator=g) > 0.5)]
    conds.append(conds[0].expand(3, 4))

    def operands(dt):
        base = (torch.randn(4, 3, generator=g) * 4).to(dt)
        return [base.t(), base.t().contiguous(), torch.tensor(2).to(dt), base.t()[:, :1]]
    for c in conds:
        for a in operands(adt):
            for b in operands(bdt):
                want = torch.where(c, a, b)
                got = ct.check(lib.ct_where(ct.from_torch(c), ct.from_torch(a), ct.from_torch(b)))
                what = f"where {tuple(c.stride())} {tuple(a.stride())} {tuple(b.stride())}: "
                ct.assert_close(got, want, what=what)
                ct.assert_same_layout(got, want, what=what)


def test_where_uint8_condition_layout_as_torch():
    """torch 1.13 takes a uint8 condition through cond.to(kBool) first: the
    converted copy is dense (preserve_format), so an expanded or strided uint8
    condition counts in the output's layout as a dense one, not as its own
    strides (a bool condition does count as its own strides)"""
    g = torch.Generator().manual_seed(41)
    x = torch.randn(2, 3, 2, generator=g).permute(2, 0, 1)
    u8 = lambda *shape: (torch.rand(*shape, generator=g) > 0.5).to(torch.uint8)  # noqa: E731
    conds = [torch.tensor([[1], [0]], dtype=torch.uint8).expand(2, 2).unsqueeze(-1),
             u8(3, 2).t(), u8(3, 2, 2).permute(1, 2, 0), u8(2, 3)[:, None, :].expand(2, 2, 3),
             u8(2, 6)[:, ::2].unsqueeze(1)]
    for c in conds:
        for a, b in ((x, torch.tensor(True)), (x, x.contiguous()), (torch.tensor(1.5), x)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = torch.where(c, a, b)
            got = ct.check(lib.ct_where(ct.from_torch(c), ct.from_torch(a), ct.from_torch(b)))
            what = f"where uint8 {tuple(c.stride())} {tuple(a.stride())} {tuple(b.stride())}: "
            ct.assert_close(got, want, what=what)
            ct.assert_same_layout(got, want, what=what)


def test_self_overlap_with_transposed_view():
    """The same memory under other strides (x and x.t()) is a partial overlap
    for torch: in-place forms and copy_ refuse it, as they refuse shifted rows;
    the same elements (x and x) and disjoint parts are fine."""
    x = values((40, 40), torch.float32, 30)
    h = ct.from_torch(x)
    ht = ct.check(lib.ct_t(h))
    hu = ct.check(lib.ct_unsqueeze(h, 0))
    rows = ct.check(lib.ct_narrow(h, 0, 0, 20))
    shifted = ct.check(lib.ct_narrow(h, 0, 10, 20))
    on_copy = lambda f: lambda: f(x.clone())  # noqa: E731
    cases = [("x.add_(x.t())", on_copy(lambda z: z.add_(z.t())), lambda: lib.ct_add_(h, ht)),
             ("x.t().add_(x)", on_copy(lambda z: z.t().add_(z)), lambda: lib.ct_add_(ht, h)),
             ("x.copy_(x.t())", on_copy(lambda z: z.copy_(z.t())), lambda: lib.ct_copy_(h, ht)),
             ("x.unsqueeze(0).add_(x)", on_copy(lambda z: z.unsqueeze(0).add_(z)), lambda: lib.ct_add_(hu, h)),
             ("x[:20].add_(x[10:30])", on_copy(lambda z: z[:20].add_(z[10:30])), lambda: lib.ct_add_(rows, shifted))]
    for what, tfn, cfn in cases:
        msg = ct.torch_error(tfn)
        assert msg, f"{what}: torch accepts it"
        ct.assert_error(cfn(), msg, what=what + ": ")
    want = x.clone()
    want.add_(want)
    ct.check_int(lib.ct_add_(h, h))
    ct.assert_close(h, want, what="x.add_(x): ")
    y = values((40, 40), torch.float32, 31)
    hy = ct.from_torch(y)
    left, right = ct.check(lib.ct_narrow(hy, 1, 0, 20)), ct.check(lib.ct_narrow(hy, 1, 20, 20))
    ct.check_int(lib.ct_add_(left, right))
    y[:, :20].add_(y[:, 20:])
    ct.assert_close(hy, y, what="disjoint halves: ")


CONVERSIONS = [(torch.float64, torch.float32), (torch.float64, torch.float16), (torch.int64, torch.int8),
               (torch.float32, torch.bfloat16), (torch.int16, torch.float64), (torch.uint8, torch.int64),
               (torch.bool, torch.float32), (torch.float16, torch.float64)]


@pytest.mark.parametrize("src_dt,dst_dt", CONVERSIONS, ids=lambda d: IDS(d))
def test_copy_converting_transposed(src_dt, dst_dt):
    """copy_ of a transposed source into a contiguous tensor of another dtype:
    the tiled loop with the source tiles wider or narrower than the kernel's."""
    for shape in [(300, 301), (37, 1029), (5, 70, 37)]:
        src = transposed(shape, src_dt, 32)
        want = torch.zeros(shape, dtype=dst_dt)
        want.copy_(src)
        h = ct.from_torch(torch.zeros(shape, dtype=dst_dt))
        ct.check_int(lib.ct_copy_(h, ct.from_torch(src)))
        ct.assert_close(h, want, what=f"copy_ {src_dt} -> {dst_dt} {shape}: ")


def laid(shape, strides, dtype, seed):
    """values() in a dense tensor of exactly these strides (size-1 dims' too)."""
    return torch.empty_strided(shape, strides, dtype=dtype).copy_(values(shape, dtype, seed))


def strided(shape, dtype, seed, step, order=None):
    """A non-dense tensor: every step-th element of a buffer, dims in `order`'s
    memory order (innermost last)."""
    order = order or tuple(range(len(shape)))
    inner = tuple(shape[d] for d in order)
    base = values(inner[:-1] + (inner[-1] * step,), dtype, seed)[..., ::step]
    return base.permute(*[order.index(i) for i in range(len(shape))])


OUTPUT_LAYOUT_CASES = {
    # all inputs contiguous (size-1 dims' strides do not count): a contiguous output
    "[1,N] from a [N,1] transposed": lambda: (values((200, 1), torch.float32, 1).t(),
                                              values((1, 200), torch.float32, 2)),
    # a converted non-dense input is seen as .to() leaves it: dense, in its own order
    "float16 column-major slice + float32": lambda: (strided((6, 4), torch.float16, 3, 2, (1, 0)),
                                                     values((6, 4), torch.float32, 4)),
    "float16 [1,N] slice + float32 [1,N]": lambda: (strided((1, 200), torch.float16, 5, 3, (1, 0)),
                                                   values((1, 200), torch.float32, 6)),
    "int16 [N,1] slice + int32": lambda: (strided((200, 1), torch.int16, 7, 3, (1, 0)),
                                         values((200, 1), torch.int32, 8)),
    # 16-bit floats are computed without a conversion copy (the kernel widens them)
    "bfloat16 [1,N] slice + bfloat16": lambda: (strided((1, 200), torch.bfloat16, 15, 3, (1, 0)),
                                               values((1, 200), torch.bfloat16, 16)),
    # inputs dense with the same strides: those strides
    "two permuted alike": lambda: (transposed((5, 1, 7), torch.float32, 9, (2, 0, 1)),
                                   transposed((5, 1, 7), torch.float32, 10, (2, 0, 1))),
    "two permuted alike, one converted": lambda: (transposed((5, 3, 7), torch.float16, 11, (1, 2, 0)),
                                                  transposed((5, 3, 7), torch.float32, 12, (1, 2, 0))),
    # no fast setup: broadcasting, the inputs' stride order decides
    "slice beside a broadcast row": lambda: (strided((6, 4), torch.float64, 13, 2, (1, 0)),
                                             values((4,), torch.float32, 14)),
    # channels-last (size-1 dims not counted) gives channels-last: its size-1 dims stride as such
    "two channels-last with a size-1 W": lambda: (laid((3, 3, 2, 1), (6, 1, 3, 6), torch.float32, 17),
                                                  laid((3, 3, 2, 1), (6, 1, 3, 6), torch.float32, 18)),
    "channels-last with a size-1 H, one converted": lambda: (laid((2, 3, 1, 3), (9, 1, 1, 3), torch.int32, 19),
                                                            laid((2, 3, 1, 3), (9, 1, 27, 3), torch.float32, 20)),
    # no elements: contiguous as far as the fast setup goes, else strides 0 outside the size-0 dim
    "empty, transposed, same shape": lambda: (transposed((3, 0, 2), torch.float32, 21, (2, 1, 0)),
                                              transposed((3, 0, 2), torch.float32, 22, (2, 1, 0))),
    "empty, permuted, beside a broadcast row": lambda: (transposed((3, 0, 2), torch.float32, 23, (2, 1, 0)),
                                                        values((2,), torch.float32, 24)),
}


@pytest.mark.parametrize("case", list(OUTPUT_LAYOUT_CASES))
def test_output_layout(case):
    """The output's strides are TensorIterator's, also where they only differ on
    size-1 dims or come from an input the op converts."""
    x, y = OUTPUT_LAYOUT_CASES[case]()
    for name in ("add", "mul"):
        h = binary(name, x, y)
        ct.assert_close(h, torch_binary(name, x, y))
        ct.assert_same_layout(h, torch_binary(name, x, y), what=f"{case}, {name}: ")
    if x.dtype != torch.float16:  # torch 1.13 has no float16 sqrt on the CPU
        h = ct.check(lib.ct_sqrt(ct.from_torch(x)))
        ct.assert_same_layout(h, torch.sqrt(x), what=f"{case}, sqrt: ")


def test_unary_outputs_allocated_as_torch():
    """Where torch's op allocates its result itself the layout is that
    allocation's, which differs from TensorIterator's on size-1 dims:
    empty_like for hardtanh and nan_to_num, ones_like / zeros_like for isfinite
    / isinf of integers; a TensorIterator output (fast setup: contiguous when
    the input is, size-1 dims aside) for integer floor / ceil / round / trunc,
    sign of bool, and pow(Tensor, Scalar) of every exponent, through the
    unary iterator over self.to(common)."""
    ct.declare("ct_hardtanh", T, [T, c_double, c_double])
    ct.declare("ct_nan_to_num", T, [T, c_double, c_double, c_double])
    ct.declare("ct_pow_scalar", T, [T, c_double])
    for _n in ("isfinite", "isinf", "isnan", "floor", "ceil", "round", "trunc", "sign"):
        ct.declare("ct_" + _n, T, [T])
    nan = float("nan")
    ops = [("hardtanh", lambda h: lib.ct_hardtanh(h, -1.0, 1.0), lambda x: torch.nn.functional.hardtanh(x)),
           ("nan_to_num", lambda h: lib.ct_nan_to_num(h, nan, nan, nan), torch.nan_to_num)]
    ops += [(n, (lambda n: lambda h: getattr(lib, "ct_" + n)(h))(n), getattr(torch, n))
            for n in ("isfinite", "isinf", "isnan", "floor", "ceil", "round", "trunc", "sign")]
    ops += [(f"pow {e}", (lambda e: lambda h: lib.ct_pow_scalar(h, e))(e), (lambda e: lambda x: x.pow(int(e) if e.is_integer() else e))(e))
            for e in (0.0, 1.0, 2.0, 2.5, 3.0, 0.5)]
    layouts = [lambda dt, k: values((5, 1), dt, k).t(),                     # (1, 5), strides (1, 1)
               lambda dt, k: transposed((2, 3, 5, 1), dt, k, (0, 3, 1, 2)),  # a size-1 dim strided 15
               lambda dt, k: transposed((3, 1, 4), dt, k, (1, 2, 0)),
               lambda dt, k: strided((4, 1, 3), dt, k, 2, (1, 2, 0))]     # not dense
    checked = 0
    for dt in (torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.bool):
        for k, mk in enumerate(layouts):
            x = mk(dt, k)
            for name, cf, tf in ops:
                try:
                    want = tf(x)
                except RuntimeError:  # no such kernel in torch 1.13 (float16 pow, bool hardtanh ...)
                    continue
                got = ct.check(cf(ct.from_torch(x)))
                what = f"{name}({str(dt)[6:]} {tuple(x.shape)} {x.stride()}): "
                ct.assert_same_layout(got, want, what=what)
                # the values too (an ulp of pow's apart at most: its accuracy is tested elsewhere)
                tol = {torch.float64: 1e-12, torch.float32: 1e-6}.get(want.dtype)
                ct.assert_close(got, want, rtol=tol, atol=0 if tol else None, what=what)
                checked += 1
    assert checked > 250


# Buffered steps of the row loop (1,024 elements) and their edges: rows and
# flat lengths just around one and two steps, and a length over the threads'
# grain, for operands the engine converts (16-bit floats, mixed dtypes) or
# gathers (::2 slices, whose rows are de-interleaved rather than gathered).
STEP_LENGTHS = [1023, 1024, 1025, 2047, 2048, 2049, 70001]


def special_values(n, dtype, seed):
    """values() with NaN, +-inf, -0, 16-bit overflow and, for 16-bit floats,
    sums that fall exactly between two of them (ties round to even)."""
    x = values((n,), dtype, seed)
    if not dtype.is_floating_point:
        return x
    x = x.clone()
    sp = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 65504.0, 3e38], dtype=torch.float32)
    x[: min(n, 6)] = sp[: min(n, 6)].to(dtype)
    if dtype in (torch.float16, torch.bfloat16) and n > 40:
        ulp = 2.0 ** -10 if dtype == torch.float16 else 2.0 ** -7  # of values in [1, 2)
        x[8:40:2] = 1.0  # 1 + ulp/2 ties to 1, 1 + 3 ulp/2 ties to 1 + 2 ulp: added below
        x[9:40:2] = torch.tensor([ulp / 2, 3 * ulp / 2] * 8, dtype=torch.float32).to(dtype)
    return x


@pytest.mark.parametrize("n", STEP_LENGTHS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8, torch.float32, torch.int64], ids=IDS)
def test_step_edges_contiguous(dtype, n):
    """a + b, a + b[::2] (both converted for 16-bit), a + (float32) b and
    a + row across the steps' edges, with special values."""
    a, b = special_values(n, dtype, 60), special_values(2 * n, dtype, 61)
    if dtype.is_floating_point:  # pairs that tie: a[8::2] = 1 and b[9::2] the half ulps
        b[8:40:2] = a[9:40:2] if n > 40 else b[8:40:2]
    for y in (b[:n], b[::2], b[1::2]):
        ct.assert_close(binary("add", a, y), torch_binary("add", a, y), what=f"n={n}: ")
    f = values((n,), torch.float32, 62)
    ct.assert_close(binary("add", a, f), torch_binary("add", a, f), what=f"n={n} + float32: ")
    rows = values((3, n), dtype, 63)
    ct.assert_close(binary("mul", rows, a), torch_binary("mul", rows, a), what=f"[3, {n}] * row: ")
    ct.assert_close(binary("add", rows[:, ::2], a[: (n + 1) // 2]),
                    torch_binary("add", rows[:, ::2], a[: (n + 1) // 2]), what=f"[3, {n}][:, ::2] + row: ")


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_step_edges_slices(dtype):
    """::2 slices of every dtype over rows around the steps, in place and out."""
    for cols in (2 * 1023 + 1, 2 * 1024, 2 * 1025, 2 * 2049):
        w = values((5, cols), dtype, 64)
        for start, x in ((0, w[:, ::2]), (1, w[:, 1::2])):
            y = values(x.shape, dtype, 65 + start)
            ct.assert_close(binary("add", x, y), torch_binary("add", x, y), what=f"{cols} from {start}: ")
            ct.assert_close(binary("mul", y, x), torch_binary("mul", y, x), what=f"{cols} from {start}, b * x: ")
            if dtype != torch.bool:  # in place: gathered and scattered back
                want = w.clone()
                want[:, start::2].sub_(y)
                h, storage = ct.from_torch(w, with_storage=True)
                view = ct.check(lib.ct_slice(h, 1, start, cols, 2))
                ct.check_int(lib.ct_sub_(view, ct.from_torch(y)))
                ct.assert_close(h, want, what=f"sub_ into a {start}::2 slice, {cols}: ")


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.float32, torch.int32, torch.float16], ids=IDS)
@pytest.mark.parametrize("step", [2, 3, 4, 8])
def test_step_edges_dense_strides(dtype, step):
    """Inputs gathered from dense lines (strides of 2..8 elements, up to 64
    bytes) go by steps of at most 4 KiB of input (iter.c's step_length: 256
    elements of a float64 ::2 slice, 64 of a ::8 one): lengths around those
    steps, rows of them, and sizes that split over two threads; add bit for
    bit, and exp of float64 bit for bit ctorch's exp of the slice made
    contiguous (the same kernel, by other steps)."""
    for cols in (63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1025, 2049):
        for rows in (1, 3) if cols < 2049 else (1, 3, 40):
            w = values((rows, cols * step + 1), dtype, 70 + cols)
            x = w[:, 1::step][:, :cols]
            y = values((rows, cols), dtype, 71 + cols)
            ct.assert_close(binary("add", x, y), torch_binary("add", x, y), what=f"{rows}x{cols} ::{step}: ")
            ct.assert_close(binary("mul", y, x), torch_binary("mul", y, x), what=f"{rows}x{cols} ::{step}, b * x: ")
            if dtype == torch.float64:
                got = ct.to_torch(ct.check(lib.ct_exp(ct.from_torch(x))))
                ref = ct.to_torch(ct.check(lib.ct_exp(ct.from_torch(x.contiguous()))))
                assert torch.equal(got.view(torch.int64), ref.view(torch.int64)), f"exp {rows}x{cols} ::{step}"
