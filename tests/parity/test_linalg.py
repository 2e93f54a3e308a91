"""Parity of the linear-algebra ops (mm bmm matmul mv dot outer addmm baddbmm
linear) with PyTorch: values for every dtype and layout (contiguous, transposed,
sliced, expanded), 0-dim/empty/NaN cases, errors, meta shapes, and gradients in
float64 against torch's (first and second order) plus finite differences."""
import ctypes
import math

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import grads_of, leaf  # noqa: E402
from ctorch_ffi import CT, T, TP, c_bool, c_double, c_int, lib  # noqa: E402

for _name, _n in [("ct_mm", 2), ("ct_bmm", 2), ("ct_matmul", 2), ("ct_mv", 2), ("ct_dot", 2), ("ct_outer", 2),
                  ("ct_linear", 3)]:
    ct.declare(_name, T, [CT] * _n)
ct.declare("ct_addmm", T, [CT, CT, CT, c_double, c_double])
ct.declare("ct_baddbmm", T, [CT, CT, CT, c_double, c_double])
ct.declare("ct_set_requires_grad", c_int, [T, c_bool])
ct.declare("ct_backward", c_int, [T, CT])
ct.declare("ct_grad", T, [CT])
ct.declare("ct_grad_fn_name", ctypes.c_char_p, [CT])
ct.declare("ct_requires_grad", c_bool, [CT])
ct.declare("ct_autograd_grad", c_int, [TP, TP, c_int, TP, c_int, TP, c_bool, c_bool, c_bool])

pytestmark = ct.requires("ct_mm", "ct_matmul", "ct_from_data", "ct_as_strided")

FLOATS = [torch.float32, torch.float64]
ALL = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
       torch.int8, torch.uint8]
LAYOUTS = ["contig", "transposed", "sliced", "expanded"]
GEN = torch.Generator().manual_seed(0)


def rand(shape, dtype):
    if dtype.is_floating_point:
        return torch.randn(shape, generator=GEN, dtype=torch.float64).to(dtype)
    lo = 0 if dtype == torch.uint8 else -4
    return torch.randint(lo, 5, shape, generator=GEN, dtype=torch.int64).to(dtype)


def make(shape, dtype, layout="contig"):
    """A torch tensor of `shape` laid out as `layout`."""
    shape = tuple(shape)
    if layout == "transposed" and len(shape) >= 2:
        s = shape[:-2] + (shape[-1], shape[-2])
        return rand(s, dtype).transpose(-1, -2)
    if layout == "sliced" and len(shape) >= 1:
        return rand(shape[:-1] + (shape[-1] * 2,), dtype)[..., ::2]
    if layout == "expanded" and len(shape) >= 1:
        return rand((1,) + shape[1:], dtype).expand(shape)
    return rand(shape, dtype)


def ref(fn, *ts):
    """torch's result; float16 (not supported by torch 1.13 on CPU) via float32."""
    if any(t.dtype == torch.float16 for t in ts if isinstance(t, torch.Tensor)):
        r = fn(*[t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.float16 else t for t in ts])
        return r.half()
    return fn(*ts)


def tol(dtype, k=1):
    if dtype == torch.float64:
        return dict(rtol=1e-10, atol=1e-10 * max(k, 1))
    if dtype == torch.float32:
        return dict(rtol=1e-5, atol=1e-5 * max(k, 1))
    if dtype in (torch.float16, torch.bfloat16):
        return dict(rtol=2e-2, atol=2e-2 * max(k, 1))
    return dict(rtol=0, atol=0)


def call(name, *args):
    return ct.check(getattr(lib, name)(*args))


def compare(name, tfn, tensors, extra=(), k=1):
    hs = [ct.from_torch(t) if isinstance(t, torch.Tensor) else t for t in tensors]
    h = call(name, *hs, *extra)
    if name in ("ct_addmm", "ct_baddbmm") and extra[0] == 0:
        # beta == 0: self is ignored. (torch 1.13's baddbmm then sometimes reads
        # uninitialised memory for strided batches: its result is not a reference.)
        tensors = [torch.zeros_like(tensors[0])] + list(tensors[1:])
        extra = (1.0,) + tuple(extra[1:])
    want = ref(lambda *ts: tfn(*ts, *extra) if extra else tfn(*ts), *tensors)
    dt = want.dtype
    ct.assert_close(h, want, what=f"{name}{[tuple(t.shape) for t in tensors]} {dt}: ", **tol(dt, k))
    return h


# ---------------------------------------------------------------- values
MM_SHAPES = [((2, 3), (3, 4)), ((1, 1), (1, 1)), ((5, 0), (0, 3)), ((0, 3), (3, 2)), ((3, 2), (2, 0)),
             ((64, 33), (33, 17)), ((130, 70), (70, 90))]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("la,lb", [("contig", "contig"), ("transposed", "contig"), ("contig", "transposed"),
                                   ("transposed", "transposed"), ("sliced", "sliced"), ("expanded", "contig")])
def test_mm(dtype, la, lb):
    for sa, sb in MM_SHAPES:
        a, b = make(sa, dtype, la), make(sb, dtype, lb)
        compare("ct_mm", torch.mm, [a, b], k=sa[1])
        compare("ct_matmul", torch.matmul, [a, b], k=sa[1])


@pytest.mark.parametrize("dtype", ALL)
def test_bmm(dtype):
    for sa, sb, la, lb in [((4, 2, 3), (4, 3, 5), "contig", "contig"), ((4, 2, 3), (4, 3, 5), "transposed", "sliced"),
                           ((3, 2, 3), (3, 3, 5), "expanded", "transposed"), ((0, 2, 3), (0, 3, 5), "contig", "contig"),
                           ((2, 0, 3), (2, 3, 5), "contig", "contig"), ((2, 4, 0), (2, 0, 5), "contig", "contig"),
                           ((40, 8, 9), (40, 9, 7), "contig", "transposed")]:
        a, b = make(sa, dtype, la), make(sb, dtype, lb)
        compare("ct_bmm", torch.bmm, [a, b], k=sa[2])


MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                 ((5, 2, 3), (3,)), ((3,), (5, 3, 4)), ((2, 3), (5, 3, 4)), ((2, 1, 2, 3), (7, 3, 4)),
                 ((1, 2, 3), (2, 1, 3, 4)), ((6, 5, 2, 3), (5, 3, 4)), ((0, 2, 3), (3, 5)), ((2, 0), (0, 3)),
                 ((0,), (0,)), ((3, 4, 5), (3, 5, 2)), ((2, 3, 4, 5), (5,)), ((1,), (2, 1, 3))]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_matmul(dtype, layout):
    for sa, sb in MATMUL_SHAPES:
        a, b = make(sa, dtype, layout), make(sb, dtype, "transposed" if layout == "sliced" else layout)
        compare("ct_matmul", torch.matmul, [a, b], k=sa[-1])


def test_matmul_permuted_batch():
    # batch dims that cannot fold into one stride
    a = rand((3, 4, 2, 5), torch.float32).permute(1, 0, 2, 3)
    b = rand((5, 2), torch.float32)
    compare("ct_matmul", torch.matmul, [a, b], k=5)
    compare("ct_matmul", torch.matmul, [a, rand((4, 3, 5, 2), torch.float32)], k=5)


@pytest.mark.parametrize("dtype", ALL)
def test_mv_dot_outer(dtype):
    for layout in LAYOUTS:
        m, v = make((4, 3), dtype, layout), make((3,), dtype, "sliced" if layout == "transposed" else layout)
        compare("ct_mv", torch.mv, [m, v], k=3)
        compare("ct_dot", ref_dot, [v, make((3,), dtype, layout)], k=3)
        compare("ct_outer", torch.outer, [v, make((5,), dtype, layout)])
    compare("ct_mv", torch.mv, [make((0, 3), dtype), make((3,), dtype)])
    compare("ct_mv", torch.mv, [make((2, 0), dtype), make((0,), dtype)])
    compare("ct_dot", ref_dot, [make((0,), dtype), make((0,), dtype)])
    compare("ct_outer", torch.outer, [make((0,), dtype), make((3,), dtype)])


def ref_dot(a, b):
    if a.dtype in (torch.float16,):
        return torch.dot(a.float(), b.float()).half()
    return torch.dot(a, b)


def test_outer_promotes():
    for da, db in [(torch.int32, torch.float32), (torch.float32, torch.float64), (torch.uint8, torch.int8),
                   (torch.bool, torch.bool), (torch.bool, torch.int64)]:
        a, b = make((3,), torch.int64).to(da), make((4,), torch.int64).to(db)
        compare("ct_outer", torch.outer, [a, b])


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bfloat16])
def test_addmm_baddbmm(dtype):
    for sshape in [(2, 5), (5,), (1, 5), (2, 1), ()]:
        s = make(sshape, dtype)
        m1, m2 = make((2, 3), dtype, "transposed"), make((3, 5), dtype)
        for beta, alpha in [(1.0, 1.0), (0.5, 2.0), (0.0, 1.0), (2.0, 0.0)]:
            if not dtype.is_floating_point:
                beta, alpha = float(int(beta)), float(int(alpha))
            compare("ct_addmm", lambda x, y, z, b, al: torch.addmm(x, y, z, beta=b, alpha=al), [s, m1, m2],
                    (beta, alpha), k=3)
    for sshape in [(4, 2, 5), (5,), (2, 1), (4, 1, 5)]:
        s = make(sshape, dtype)
        b1, b2 = make((4, 2, 3), dtype, "sliced"), make((4, 3, 5), dtype, "transposed")
        for beta, alpha in [(1.0, 1.0), (0.5, 2.0), (0.0, 1.0)]:
            if not dtype.is_floating_point:
                beta, alpha = float(int(beta)), float(int(alpha))
            compare("ct_baddbmm", lambda x, y, z, b, al: torch.baddbmm(x, y, z, beta=b, alpha=al), [s, b1, b2],
                    (beta, alpha), k=3)


def test_addmm_beta0_ignores_nan():
    s = torch.full((2, 5), float("nan"))
    m1, m2 = make((2, 3), torch.float32), make((3, 5), torch.float32)
    compare("ct_addmm", lambda x, y, z, b, al: torch.addmm(x, y, z, beta=b, alpha=al), [s, m1, m2], (0.0, 1.0))


@pytest.mark.parametrize("dtype", FLOATS + [torch.bfloat16, torch.int64])
def test_linear(dtype):
    lin = torch.nn.functional.linear
    for xs, ws, bs in [((2, 3), (4, 3), (4,)), ((2, 3), (4, 3), None), ((3,), (4, 3), (4,)), ((5, 2, 3), (4, 3), (4,)),
                       ((5, 2, 3), (4, 3), ()), ((2, 3), (3,), None), ((3,), (3,), ()), ((3,), (3,), None), ((0, 3), (4, 3), (4,)),
                       ((2, 3), (0, 3), (0,)), ((4, 2, 3), (4, 3), (1,))]:
        for layout in ["contig", "transposed"]:
            x, w = make(xs, dtype, layout), make(ws, dtype, layout)
            b = make(bs, dtype) if bs is not None else None
            hb = ct.from_torch(b) if b is not None else None
            h = call("ct_linear", ct.from_torch(x), ct.from_torch(w), hb)
            ct.assert_close(h, lin(x, w, b), what=f"linear {xs} {ws} {bs}: ", **tol(dtype, xs[-1]))


@pytest.fixture(params=[2, 3])
def threads(request):
    """2 or 3 OpenMP threads, so that big single gemms are cut into blocks of rows
    or columns (one single-threaded BLAS call per thread)."""
    before = lib.ct_get_num_threads()
    lib.ct_set_num_threads(request.param)
    yield request.param
    lib.ct_set_num_threads(before)


# the W9 MLP step's gemms (column blocks when K > M, row blocks when K <= M or N < 32)
# and odd sizes whose blocks do not fall on the 8/16 alignment
SPLIT_SHAPES = [((128, 784), (784, 512)), ((128, 512), (512, 10)), ((512, 128), (128, 784)), ((10, 128), (128, 512)),
                ((128, 10), (10, 512)), ((100, 300), (300, 333)), ((333, 40), (40, 77)), ((24, 700), (700, 40))]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("la,lb", [("contig", "contig"), ("transposed", "contig"), ("contig", "transposed"),
                                   ("sliced", "transposed")])
def test_mm_split_over_threads(threads, dtype, la, lb):
    for sa, sb in SPLIT_SHAPES:
        a, b = make(sa, dtype, la), make(sb, dtype, lb)
        compare("ct_mm", torch.mm, [a, b], k=sa[1])
        s = make((sb[1],), dtype)
        compare("ct_addmm", lambda x, y, z, be, al: torch.addmm(x, y, z, beta=be, alpha=al), [s, a, b], (0.5, 2.0),
                k=sa[1])
        h = call("ct_linear", ct.from_torch(a), ct.from_torch(b.t()), ct.from_torch(s))
        ct.assert_close(h, torch.nn.functional.linear(a, b.t(), s), what=f"linear {sa} {sb}: ", **tol(dtype, sa[1]))


def test_nan_inf():
    a = torch.tensor([[1.0, float("nan"), 2.0], [float("inf"), 0.0, 1.0]])
    b = torch.tensor([[1.0, 0.0], [0.0, 1.0], [float("-inf"), 2.0]])
    compare("ct_mm", torch.mm, [a, b])
    compare("ct_matmul", torch.matmul, [a, b[:, 0].contiguous()])
    compare("ct_dot", torch.dot, [a[1], b[:, 0].contiguous()])


# ---------------------------------------------------------------- errors
def err(name, tfn, tensors, extra=()):
    want = ct.torch_error(lambda: tfn(*tensors, *extra))
    assert want is not None, "torch does not fail"
    hs = [ct.from_torch(t) if isinstance(t, torch.Tensor) else t for t in tensors]
    ct.clear_error()
    ct.assert_error(getattr(lib, name)(*hs, *extra), want, what=f"{name}: ")


F = torch.float32
D = torch.float64


def z(*shape, dtype=F):
    return torch.zeros(shape, dtype=dtype)


def test_errors():
    lin = torch.nn.functional.linear
    cases = [
        ("ct_mm", torch.mm, [z(2, 3), z(4, 5)]),
        ("ct_mm", torch.mm, [z(3), z(3, 5)]),
        ("ct_mm", torch.mm, [z(2, 3), z(3)]),
        ("ct_mm", torch.mm, [z(2, 3), z(3, 5, dtype=D)]),
        ("ct_mm", torch.mm, [z(2, 3, dtype=torch.bool), z(3, 5, dtype=torch.bool)]),
        ("ct_mm", torch.mm, [z(2, 3, dtype=torch.int64), z(3, 5, dtype=torch.int32)]),
        ("ct_bmm", torch.bmm, [z(2, 3), z(3, 5)]),
        ("ct_bmm", torch.bmm, [z(2, 2, 3), z(3, 5)]),
        ("ct_bmm", torch.bmm, [z(2, 2, 3), z(3, 3, 5)]),
        ("ct_bmm", torch.bmm, [z(2, 2, 3), z(2, 4, 5)]),
        ("ct_bmm", torch.bmm, [z(2, 2, 3), z(2, 3, 5, dtype=D)]),
        ("ct_bmm", torch.bmm, [z(2, 2, 3, dtype=torch.bool), z(2, 3, 4, dtype=torch.bool)]),
        ("ct_matmul", torch.matmul, [z(), z(3)]),
        ("ct_matmul", torch.matmul, [z(3), z()]),
        ("ct_matmul", torch.matmul, [z(3), z(4)]),
        ("ct_matmul", torch.matmul, [z(2, 3), z(4)]),
        ("ct_matmul", torch.matmul, [z(3), z(4, 5)]),
        ("ct_matmul", torch.matmul, [z(2, 3), z(4, 5)]),
        ("ct_matmul", torch.matmul, [z(7, 2, 3), z(4, 5)]),
        ("ct_matmul", torch.matmul, [z(7, 2, 3), z(4)]),
        ("ct_matmul", torch.matmul, [z(3), z(7, 4, 5)]),
        ("ct_matmul", torch.matmul, [z(2, 3), z(7, 4, 5)]),
        ("ct_matmul", torch.matmul, [z(3), z(2, 7, 4, 5)]),
        ("ct_matmul", torch.matmul, [z(7, 2, 3), z(7, 4, 5)]),
        ("ct_matmul", torch.matmul, [z(2, 7, 2, 3), z(7, 4, 5)]),
        ("ct_matmul", torch.matmul, [z(7, 2, 3), z(6, 3, 5)]),
        ("ct_matmul", torch.matmul, [z(7, 2, 3), z(7, 3, 5, dtype=D)]),
        ("ct_matmul", torch.matmul, [z(3), z(3, dtype=D)]),
        ("ct_matmul", torch.matmul, [z(2, 3), z(3, dtype=D)]),
        ("ct_matmul", torch.matmul, [z(2, 3, dtype=D), z(7, 3, 5)]),
        ("ct_matmul", torch.matmul, [z(7, 2, 3, dtype=D), z(3, 5)]),
        ("ct_mv", torch.mv, [z(2, 3), z(4)]),
        ("ct_mv", torch.mv, [z(2, 3), z(3, 1)]),
        ("ct_mv", torch.mv, [z(3), z(3)]),
        ("ct_mv", torch.mv, [z(2, 3), z(3, dtype=D)]),
        ("ct_mv", torch.mv, [z(2, 3, dtype=torch.bool), z(3, dtype=torch.bool)]),
        ("ct_dot", torch.dot, [z(3), z(4)]),
        ("ct_dot", torch.dot, [z(3, 1), z(3)]),
        ("ct_dot", torch.dot, [z(3), z(3, dtype=D)]),
        ("ct_dot", torch.dot, [z(3, dtype=torch.bool), z(3, dtype=torch.bool)]),
        ("ct_outer", torch.outer, [z(3, 1), z(3)]),
        ("ct_outer", torch.outer, [z(3), z(3, 1)]),
        ("ct_linear", lin, [z(2, 3), z(4, 5), None]),
        ("ct_linear", lin, [z(2, 3), z(4, 3), z(3)]),
        ("ct_linear", lin, [z(), z(4, 3), None]),
        ("ct_linear", lin, [z(2, 3), z(2, 4, 3), None]),
        ("ct_linear", lin, [z(2, 3), z(4, 3, dtype=D), None]),
        ("ct_linear", lin, [z(2, 3), z(4, 3), z(4, dtype=D)]),
        ("ct_linear", lin, [z(2, 3), z(3), torch.zeros(())]),
    ]
    for name, fn, ts in cases:
        err(name, fn, ts)
    addmm = lambda s, a, b, be, al: torch.addmm(s, a, b, beta=be, alpha=al)  # noqa: E731
    baddbmm = lambda s, a, b, be, al: torch.baddbmm(s, a, b, beta=be, alpha=al)  # noqa: E731
    for ts in [[z(3, 3), z(2, 3), z(3, 5)], [z(5, dtype=D), z(2, 3), z(3, 5)], [z(5), z(2, 3), z(4, 5)],
               [z(5), z(3), z(3, 5)], [z(5), z(2, 3), z(3, 5, dtype=D)]]:
        err("ct_addmm", addmm, ts, (1.0, 1.0))
    for ts in [[z(2, 2, 5), z(2, 2, 3), z(2, 4, 5)], [z(3, 2, 5), z(2, 2, 3), z(2, 3, 5)],
               [z(2, 5), z(2, 3), z(2, 3, 5)], [z(2, 2, 5), z(2, 2, 3), z(2, 3, 5, dtype=D)]]:
        err("ct_baddbmm", baddbmm, ts, (1.0, 1.0))


EMPTY_PRODUCTS = [("ct_mm", torch.mm, (2, 0), (0, 3)), ("ct_mm", torch.mm, (0, 2), (2, 3)),
                  ("ct_mm", torch.mm, (2, 2), (2, 0)), ("ct_bmm", torch.bmm, (2, 2, 0), (2, 0, 3)),
                  ("ct_bmm", torch.bmm, (0, 2, 2), (0, 2, 3)), ("ct_mv", torch.mv, (2, 0), (0,)),
                  ("ct_mv", torch.mv, (0, 2), (2,)), ("ct_dot", torch.dot, (0,), (0,))] + [
    ("ct_matmul", torch.matmul, sa, sb) for sa, sb in
    [((0,), (0,)), ((2, 0), (0,)), ((0,), (0, 3)), ((2, 0), (0, 3)), ((2, 2, 0), (0, 3)), ((2, 0), (2, 0, 3)),
     ((2, 2, 0), (2, 0, 3)), ((0,), (2, 0, 3)), ((2, 2, 0), (0,)), ((2, 2, 2, 0), (2, 0, 3)), ((2, 0, 2), (2, 3)),
     ((0, 2), (2, 2, 3)), ((2,), (2, 2, 0)), ((0, 2, 2), (2,))]]
PRODUCT_DTYPES = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, F, D]


@pytest.mark.parametrize("k", [0, 2])
def test_products_of_nothing_and_mixed_dtypes(k):
    """torch 1.13's mm / mv / bmm (and matmul through them) return zeros before any
    dtype check when there is nothing to compute (an inner size of 0 or an empty
    result), in the dtype of the operand their result is made like (mm: mat1, mv:
    vec, bmm: batch2; matmul by the product it runs); dot checks its dtypes first.
    Otherwise a bool (or float16) mat1 is "not implemented" before a dtype mismatch.
    (ctorch computes float16 products, which torch 1.13 refuses on CPU.)"""
    for name, fn, sa, sb in EMPTY_PRODUCTS:
        if k:
            sa, sb = tuple(k if n == 0 else n for n in sa), tuple(k if n == 0 else n for n in sb)
        dts = PRODUCT_DTYPES if k == 0 else [torch.bool, torch.int32, torch.float16, F]  # errors are slow in torch
        for da in dts:
            for db in dts:
                a, b = torch.ones(sa, dtype=da), torch.ones(sb, dtype=db)
                what = f"{name} {sa} {da} @ {sb} {db}: "
                want = ct.torch_error(lambda: fn(a, b))
                if want is not None and "for 'Half'" in want and da == db:
                    continue
                ct.clear_error()
                got = getattr(lib, name)(ct.from_torch(a), ct.from_torch(b))
                if want is not None:
                    ct.assert_error(got, want, what=what)
                else:
                    ct.assert_close(ct.check(got), fn(a, b), what=what)


def test_addmm_linear_mat1_mat2_dtypes():
    """addmm (and linear's addmm paths: 2-d input, or 3-d contiguous) check
    self and mat2, then mat1 and mat2, for one dtype before anything else, K = 0 too."""
    lin = torch.nn.functional.linear
    for k in (0, 3):
        addmm = lambda s, a, b, be, al: torch.addmm(s, a, b, beta=be, alpha=al)  # noqa: E731
        err("ct_addmm", addmm, [z(2, 5), z(2, k, dtype=D), z(k, 5)], (1.0, 1.0))
        err("ct_addmm", addmm, [z(2, 5), z(2, k), z(k, 5, dtype=D)], (1.0, 1.0))
        for x in (z(2, k, dtype=torch.int32), z(4, 2, k, dtype=torch.int32)):
            err("ct_linear", lin, [x, z(5, k), z(5)])
        for x in (z(2, k, dtype=torch.int32), z(4, 2, k, dtype=torch.int32)):  # matmul: zeros at k = 0
            if k == 0:
                ct.assert_close(ct.check(lib.ct_linear(ct.from_torch(x), ct.from_torch(z(5, k)), None)),
                                lin(x, z(5, k)))


def test_null_keeps_error():
    ct.clear_error()
    assert lib.ct_mm(None, ct.from_torch(z(2, 2))) is None
    assert lib.ct_matmul(ct.from_torch(z(2, 2)), None) is None


# ---------------------------------------------------------------- meta
def meta(t):
    return ct.check(lib.ct_empty_on(ct.i64(t.shape), t.dim(), ct.ct_dtype_of_torch(t.dtype), ct.CT_META))


def test_meta_shapes():
    for sa, sb in MATMUL_SHAPES + MM_SHAPES:
        a, b = z(*sa), z(*sb)
        h = call("ct_matmul", meta(a), meta(b))
        assert lib.ct_device_of(h) == ct.CT_META
        assert ct.shape(h) == tuple(torch.matmul(a, b).shape)
    h = call("ct_bmm", meta(z(4, 2, 3)), meta(z(4, 3, 5)))
    assert ct.shape(h) == (4, 2, 5)
    h = call("ct_linear", meta(z(5, 2, 3)), meta(z(4, 3)), meta(z(4)))
    assert ct.shape(h) == (5, 2, 4)
    h = call("ct_addmm", meta(z(5)), meta(z(2, 3)), meta(z(3, 5)), 1.0, 1.0)
    assert ct.shape(h) == (2, 5)
    h = call("ct_outer", meta(z(3)), meta(z(4)))
    assert ct.shape(h) == (3, 4)
    # errors on meta too
    ct.clear_error()
    ct.assert_error(lib.ct_matmul(meta(z(7, 2, 3)), meta(z(4, 5))),
                    "mat1 and mat2 shapes cannot be multiplied (14x3 and 4x5)")
    ct.assert_error(lib.ct_addmm(meta(z(3, 3)), meta(z(2, 3)), meta(z(3, 5)), 1.0, 1.0),
                    "The expanded size of the tensor (5) must match the existing size (3)")


# ---------------------------------------------------------------- gradients


def check_grads(name, tfn, tensors, extra=(), second=True):
    hs = [leaf(t) if isinstance(t, torch.Tensor) else None for t in tensors]
    tt = [t.detach().requires_grad_(True) if isinstance(t, torch.Tensor) else None for t in tensors]
    out = tfn(*tt, *extra)
    h = call(name, *hs, *extra)
    ct.assert_close(h, out.detach(), rtol=1e-10, atol=1e-10, what=f"{name} forward: ")
    g = torch.randn(out.shape, generator=GEN, dtype=torch.float64)
    used = [k for k, t in enumerate(tt) if t is not None]
    tg = torch.autograd.grad(out, [tt[k] for k in used], g, create_graph=True, allow_unused=True)
    cg = grads_of(h, [hs[k] for k in used], g)
    for k, want, got in zip(used, tg, cg):
        if want is None:
            continue
        assert got, f"{name}: no gradient for input {k}"
        ct.assert_close(got, want.detach(), rtol=1e-9, atol=1e-9, what=f"{name} grad {k}: ")
    if not second:
        return
    # second order: d<grad_k, v>/d inputs
    for k, want, got in zip(used, tg, cg):
        if want is None or not want.requires_grad:
            continue
        v = torch.randn(want.shape, generator=GEN, dtype=torch.float64)
        tgg = torch.autograd.grad(want, [tt[j] for j in used], v, retain_graph=True, allow_unused=True)
        if not lib.ct_requires_grad(got):  # constant in the inputs (torch may still give it a node)
            assert all(w2 is None or float(w2.abs().max()) == 0 for w2 in tgg), f"grad {k} should depend on inputs"
            continue
        cgg = grads_of(got, [hs[j] for j in used], v)
        for j, w2, g2 in zip(used, tgg, cgg):
            if w2 is None:
                continue
            if not g2:
                assert float(w2.abs().max()) == 0, f"{name}: missing second-order grad {k}->{j}"
                continue
            ct.assert_close(g2, w2.detach(), rtol=1e-9, atol=1e-9, what=f"{name} grad2 {k}->{j}: ")


def fd_check(name, tfn, tensors, extra=()):
    """Finite differences of <op(x), g> in float64 against ctorch's gradients."""
    hs = [leaf(t) for t in tensors]
    h = call(name, *hs, *extra)
    out = ct.to_torch(h)
    g = torch.randn(out.shape, generator=GEN, dtype=torch.float64)
    cg = grads_of(h, hs, g)
    eps = 1e-6
    for k, t in enumerate(tensors):
        got = ct.to_torch(cg[k]).reshape(-1)
        base = t.detach().clone().contiguous()
        for i in range(base.numel()):
            p, m = base.clone(), base.clone()
            p.view(-1)[i] += eps
            m.view(-1)[i] -= eps
            args_p = [p if j == k else tensors[j] for j in range(len(tensors))]
            args_m = [m if j == k else tensors[j] for j in range(len(tensors))]
            fp = (ct.to_torch(call(name, *[ct.from_torch(a) for a in args_p], *extra)) * g).sum()
            fm = (ct.to_torch(call(name, *[ct.from_torch(a) for a in args_m], *extra)) * g).sum()
            num = float(fp - fm) / (2 * eps)
            assert math.isclose(num, float(got[i]), rel_tol=1e-5, abs_tol=1e-6), f"{name} fd input {k}[{i}]"


GRAD = pytest.mark.skipif(not ct.has("ct_autograd_grad", "ct_set_requires_grad"), reason="no autograd")


@GRAD
@pytest.mark.parametrize("layout", ["contig", "transposed", "sliced"])
def test_grads(layout):
    mk = lambda *s: make(s, D, layout)  # noqa: E731
    check_grads("ct_mm", torch.mm, [mk(3, 4), mk(4, 2)])
    check_grads("ct_bmm", torch.bmm, [mk(2, 3, 4), mk(2, 4, 5)])
    for sa, sb in MATMUL_SHAPES:
        if 0 in sa or 0 in sb:
            continue
        check_grads("ct_matmul", torch.matmul, [mk(*sa), mk(*sb)])
    check_grads("ct_mv", torch.mv, [mk(3, 4), mk(4)])
    check_grads("ct_dot", torch.dot, [mk(4), mk(4)])
    check_grads("ct_outer", torch.outer, [mk(3), mk(4)])
    addmm = lambda s, a, b, be, al: torch.addmm(s, a, b, beta=be, alpha=al)  # noqa: E731
    baddbmm = lambda s, a, b, be, al: torch.baddbmm(s, a, b, beta=be, alpha=al)  # noqa: E731
    check_grads("ct_addmm", addmm, [mk(5), mk(2, 3), mk(3, 5)], (0.5, 2.0))
    check_grads("ct_addmm", addmm, [mk(2, 5), mk(2, 3), mk(3, 5)], (1.0, 1.0))
    check_grads("ct_baddbmm", baddbmm, [mk(2, 1, 5), mk(2, 2, 3), mk(2, 3, 5)], (0.5, -1.5))
    lin = torch.nn.functional.linear
    check_grads("ct_linear", lin, [mk(2, 3), mk(4, 3), mk(4)])
    check_grads("ct_linear", lin, [mk(5, 2, 3), mk(4, 3), mk(4)])
    check_grads("ct_linear", lin, [mk(3), mk(4, 3), mk(4)])
    check_grads("ct_linear", lin, [mk(3), mk(3), make((), D)])
    check_grads("ct_linear", lin, [mk(2, 3), mk(3), None])
    check_grads("ct_linear", lin, [mk(3), mk(3), None])


@GRAD
def test_grads_broadcast_expanded():
    a = make((1, 2, 3), D, "expanded").expand(4, 2, 3)
    check_grads("ct_matmul", torch.matmul, [a, make((3, 5), D)])
    check_grads("ct_matmul", torch.matmul, [make((4, 1, 2, 3), D), make((5, 3, 2), D, "transposed")])


@GRAD
def test_grad_fn_names():
    a, b = leaf(make((2, 3), D)), leaf(make((3, 4), D))
    assert lib.ct_grad_fn_name(call("ct_matmul", a, b)) == b"MmBackward0"
    assert lib.ct_grad_fn_name(call("ct_mm", a, b)) == b"MmBackward0"


@GRAD
def test_finite_differences():
    fd_check("ct_mm", torch.mm, [make((2, 3), D), make((3, 2), D, "transposed")])
    fd_check("ct_matmul", torch.matmul, [make((2, 2, 3), D), make((3,), D)])
    fd_check("ct_matmul", torch.matmul, [make((3,), D), make((2, 3, 2), D)])
    fd_check("ct_addmm", None, [make((2,), D), make((2, 3), D), make((3, 2), D)], (0.5, 1.5))
    fd_check("ct_linear", None, [make((2, 3), D), make((2, 3), D), make((2,), D)])


def test_linear_follows_torchs_paths():
    """torch 1.13's linear: a 2-d input with a bias is addmm(bias, input, weight.t()),
    a contiguous 3-d one too, folded to 2-d (the bias expands to the folded rows);
    anything else is matmul(input, weight.t()) then an in-place add of the bias
    (which broadcasts to the output, and may be of another dtype the output takes):
    values, dtypes, shapes and errors as torch's"""
    import itertools
    F = torch.nn.functional
    xs = [torch.rand(()), torch.rand(4), torch.rand(3, 4), torch.rand(2, 3, 4), torch.rand(2, 3, 4).transpose(0, 1),
          torch.rand(3, 5), torch.rand(3, 4, dtype=torch.float64), torch.rand(4, dtype=torch.bfloat16),
          torch.ones(3, 4, dtype=torch.int64)]
    ws = [torch.rand(5, 4), torch.rand(5, 3), torch.rand(4), torch.rand(5, 4, dtype=torch.float64),
          torch.rand(5, 4, dtype=torch.bfloat16)]
    bs = [None, torch.rand(5), torch.rand(3, 5), torch.rand(6), torch.rand(5, dtype=torch.float64), torch.rand(()),
          torch.rand(2, 3, 5)]
    for x, w, b in itertools.product(xs, ws, bs):
        what = f"linear({tuple(x.shape)} {x.dtype}, {tuple(w.shape)} {w.dtype}, {None if b is None else b.shape}): "
        err = ct.torch_error(lambda: F.linear(x, w, b))
        ct.clear_error()
        got = lib.ct_linear(ct.from_torch(x), ct.from_torch(w), None if b is None else ct.from_torch(b))
        if err is not None:
            ct.assert_error(got, err, what=what)
            continue
        want = F.linear(x, w, b)
        tol = 2e-2 if want.dtype == torch.bfloat16 else 1e-5
        ct.assert_close(ct.check(got), want, rtol=tol, atol=tol, what=what)


def test_integer_addmm_scalars_as_torch():
    """addmm / baddbmm of integers: with an inner size of 0 torch computes
    self.mul(beta), so a fractional beta fails (its float result cannot go back
    into the integers); otherwise beta and alpha are converted to the dtype with
    torch's overflow check (uint8 takes -1, not -1.5 or 300). An integral double
    stands for a Python int."""
    for dt in (torch.int64, torch.int32, torch.float32, torch.uint8, torch.int8):
        for k in (0, 2):
            s, a, b = torch.ones(2, 3, dtype=dt), torch.ones(2, k, dtype=dt), torch.ones(k, 3, dtype=dt)
            for beta, alpha in ((0.5, 1), (1, 0.5), (2, 3), (0, 1), (-1.5, 2), (3, 0), (-1, 1), (1, -1), (300, 1),
                                (1, 300), (2, -1.5), (0, -1)):
                for name, tfn, cfn in [
                        ("addmm", lambda: torch.addmm(s, a, b, beta=beta, alpha=alpha),
                         lambda: lib.ct_addmm(ct.from_torch(s), ct.from_torch(a), ct.from_torch(b), beta, alpha)),
                        ("baddbmm", lambda: torch.baddbmm(s[None], a[None], b[None], beta=beta, alpha=alpha),
                         lambda: lib.ct_baddbmm(ct.from_torch(s[None]), ct.from_torch(a[None]), ct.from_torch(b[None]),
                                                beta, alpha))]:
                    ct.assert_same_outcome(cfn, tfn, f"{name} {dt} inner {k} beta {beta} alpha {alpha}: ",
                                           lambda got, want: ct.assert_close(ct.check(got), want))


def test_check_order_and_words_of_products_as_torch():
    """torch asks for sizes before ranks (baddbmm's self shape, mv's result), expands
    addmm's / linear's self before the kernel's dtype check, and names baddbmm's kernel"""
    o = torch.ones
    B = torch.bool
    cases = [
        ("baddbmm 2-d", lambda s, a, b: lib.ct_baddbmm(s, a, b, 1.0, 1.0), torch.baddbmm,
         (o(2, 2), o(2, 2), o(2, 2))),
        ("baddbmm 2-d batch2", lambda s, a, b: lib.ct_baddbmm(s, a, b, 1.0, 1.0), torch.baddbmm,
         (o(2, 2, 2), o(2, 2, 2), o(2, 2))),
        ("baddbmm 0-d batch1", lambda s, a, b: lib.ct_baddbmm(s, a, b, 1.0, 1.0), torch.baddbmm,
         (o(2, 2, 2), torch.tensor(1.0), o(2, 2, 2))),
        ("baddbmm 1-d batch1", lambda s, a, b: lib.ct_baddbmm(s, a, b, 1.0, 1.0), torch.baddbmm,
         (o(2, 2, 2), o(2), o(2, 2, 2))),
        ("baddbmm 4-d batch1", lambda s, a, b: lib.ct_baddbmm(s, a, b, 1.0, 1.0), torch.baddbmm,
         (o(2, 2, 2), o(2, 2, 2, 2), o(2, 2, 2))),
        ("baddbmm bool", lambda s, a, b: lib.ct_baddbmm(s, a, b, 1.0, 1.0), torch.baddbmm,
         (o(2, 2, 2, dtype=B), o(2, 2, 2, dtype=B), o(2, 2, 2, dtype=B))),
        ("bmm bool", lambda a, b: lib.ct_bmm(a, b), torch.bmm, (o(2, 2, 2, dtype=B), o(2, 2, 2, dtype=B))),
        ("mv 0-d", lambda a, b: lib.ct_mv(a, b), torch.mv, (torch.tensor(1.0), o(4, 0))),
        ("mv 0-d 0-d", lambda a, b: lib.ct_mv(a, b), torch.mv, (torch.tensor(1.0), torch.tensor(1.0))),
        ("mv 3-d", lambda a, b: lib.ct_mv(a, b), torch.mv, (o(2, 2, 2), torch.tensor(1.0))),
        ("addmm bool self shape", lambda s, a, b: lib.ct_addmm(s, a, b, 1.0, 1.0), torch.addmm,
         (o(2, dtype=B), o(1, 3, dtype=B), o(3, 1, dtype=B))),
        ("addmm bool", lambda s, a, b: lib.ct_addmm(s, a, b, 1.0, 1.0), torch.addmm,
         (o(1, dtype=B), o(1, 3, dtype=B), o(3, 1, dtype=B))),
        ("addmm bool shapes", lambda s, a, b: lib.ct_addmm(s, a, b, 1.0, 1.0), torch.addmm,
         (o(2, dtype=B), o(1, 3, dtype=B), o(4, 1, dtype=B))),
        ("linear bool bias", lambda x, w, b: lib.ct_linear(x, w, b), torch.nn.functional.linear,
         (o(2, 4, dtype=B), o(2, 4, dtype=B), o(3, dtype=B))),
    ]
    for what, cfn, tfn, args in cases:
        ct.assert_same_outcome(lambda: cfn(*[ct.from_torch(t) for t in args]), lambda: tfn(*args), what + ": ",
                               compare=lambda got, want: ct.assert_close(got, want))


def test_empty_integer_products_check_no_scalars():
    """an empty result returns before torch converts alpha and beta; an inner size
    of 0 with a result is self.mul(beta), which a fractional beta refuses"""
    z = lambda *s: torch.zeros(s, dtype=torch.uint8)  # noqa: E731
    cases = [(lib.ct_addmm, torch.addmm, (z(0, 1), z(0, 3), z(3, 1)), (1.0, -0.5)),
             (lib.ct_addmm, torch.addmm, (z(0, 1), z(0, 0), z(0, 1)), (0.5, 1.0)),
             (lib.ct_addmm, torch.addmm, (z(2, 1), z(2, 0), z(0, 1)), (0.5, 1.0)),
             (lib.ct_addmm, torch.addmm, (z(0, 1), z(0, 3), z(3, 1)), (1.0, 300.0)),
             (lib.ct_baddbmm, torch.baddbmm, (z(0, 3, 1), z(0, 3, 4), z(0, 4, 1)), (1.0, -0.5)),
             (lib.ct_baddbmm, torch.baddbmm, (z(0, 3, 1), z(0, 3, 0), z(0, 0, 1)), (0.5, 1.0)),
             (lib.ct_baddbmm, torch.baddbmm, (z(1, 3, 1), z(1, 3, 0), z(1, 0, 1)), (0.5, 1.0))]
    for cfn, tfn, args, (beta, alpha) in cases:
        ct.assert_same_outcome(lambda: cfn(*[ct.from_torch(t) for t in args], beta, alpha),
                               lambda: tfn(*args, beta=beta, alpha=alpha), f"{tfn.__name__} {beta} {alpha}: ",
                               compare=lambda got, want: ct.assert_close(got, want))


@GRAD
def test_matmul_transposed_3d_goes_through_bmm():
    """torch 1.13's should_fold: a 3-d operand against a 2-d one whose last two dims
    are transposed (stride[-1] != 1, stride[0] == size[1] * size[2]) is not folded
    into one mm but taken through expand + bmm: bmm's errors and node."""
    f32 = torch.float32
    a3 = torch.ones(7, 5, 4).transpose(1, 2)              # (7, 4, 5), strides (20, 1, 4)
    err("ct_matmul", torch.matmul, [a3, torch.ones(6, 2)])
    err("ct_matmul", torch.matmul, [torch.ones(4, 6), torch.ones(7, 5, 7).transpose(1, 2)])
    xb = torch.ones(4, 1, 5, dtype=torch.bool).transpose(1, 2)
    err("ct_linear", torch.nn.functional.linear, [xb, torch.ones(2, 1, dtype=torch.bool), None])
    # a contiguous 3-d operand still folds: mm's words
    err("ct_matmul", torch.matmul, [torch.ones(7, 4, 5), torch.ones(6, 2)])
    for sa, sb in [((3, 4, 5), (4, 2)), ((6, 3), (2, 4, 3)), ((1, 2, 3), (2, 3))]:
        a = rand(sa, f32).transpose(1, 2) if len(sa) == 3 else rand(sa, f32)
        b = rand(sb, f32).transpose(1, 2) if len(sb) == 3 else rand(sb, f32)
        compare("ct_matmul", torch.matmul, [a, b], k=a.shape[-1])
    for ta, tb in [(rand((3, 4, 5), D).transpose(1, 2), rand((4, 2), D)),
                   (rand((6, 3), D), rand((2, 4, 3), D).transpose(1, 2)),
                   (rand((6, 3), D), rand((2, 3, 4), D))]:
        want = torch.matmul(ta.requires_grad_(), tb.requires_grad_()).grad_fn.name()
        got = lib.ct_grad_fn_name(call("ct_matmul", leaf(ta), leaf(tb)))
        assert got == want.encode(), (got, want)
        check_grads("ct_matmul", torch.matmul, [ta.detach(), tb.detach()])
