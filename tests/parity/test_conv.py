"""Parity of conv1d, conv2d, max_pool2d, avg_pool2d and adaptive_avg_pool2d with
PyTorch: values (several shapes, strides, paddings, dilations, groups, layouts,
dtypes, unbatched and empty inputs, NaN), errors, meta shapes, and gradients in
float64 against torch's (first and second order) plus finite differences."""
import ctypes
import math

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import grads_of, leaf  # noqa: E402
from ctorch_ffi import CT, I64P, T, TP, c_bool, c_int, c_int64, lib  # noqa: E402

Fn = torch.nn.functional
ct.declare("ct_conv1d", T, [CT, CT, CT, c_int64, c_int64, c_int64, c_int64])
ct.declare("ct_conv2d", T, [CT, CT, CT, I64P, I64P, I64P, c_int64])
ct.declare("ct_max_pool2d", T, [CT, I64P, I64P, I64P, I64P, c_bool])
ct.declare("ct_max_pool2d_with_indices", T, [CT, I64P, I64P, I64P, I64P, c_bool, TP])
ct.declare("ct_avg_pool2d", T, [CT, I64P, I64P, I64P, c_bool, c_bool, c_int64])
ct.declare("ct_adaptive_avg_pool2d", T, [CT, I64P])
ct.declare("ct_set_requires_grad", c_int, [T, c_bool])
ct.declare("ct_requires_grad", c_bool, [CT])
ct.declare("ct_autograd_grad", c_int, [TP, TP, c_int, TP, c_int, TP, c_bool, c_bool, c_bool])

pytestmark = ct.requires("ct_conv2d", "ct_conv1d", "ct_max_pool2d", "ct_avg_pool2d", "ct_adaptive_avg_pool2d")

GEN = torch.Generator().manual_seed(0)
D = torch.float64
F32 = torch.float32


def rand(shape, dtype=F32):
    if dtype.is_floating_point:
        return torch.randn(shape, generator=GEN, dtype=D).to(dtype)
    return torch.randint(-4, 5, shape, generator=GEN, dtype=torch.int64).to(dtype)


def layout(t, kind):
    if kind == "channels_last" and t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if kind == "sliced":
        return torch.cat([t, t], -1)[..., ::2]
    if kind == "transposed" and t.dim() >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    return t


def pair(v):
    return ct.i64(v if isinstance(v, (tuple, list)) else (v, v))


def h(t):
    return ct.from_torch(t) if t is not None else None


def tol(dtype, k=1):
    return {F32: dict(rtol=1e-4, atol=1e-4 * k), D: dict(rtol=1e-10, atol=1e-10 * k),
            torch.bfloat16: dict(rtol=3e-2, atol=3e-2 * k), torch.float16: dict(rtol=1e-2, atol=1e-2 * k)}.get(
        dtype, dict(rtol=0, atol=0))


def ct_conv2d(x, w, b, stride=1, padding=0, dilation=1, groups=1):
    return lib.ct_conv2d(x, w, b, pair(stride), pair(padding), pair(dilation), groups)


def ct_conv1d(x, w, b, stride=1, padding=0, dilation=1, groups=1):
    return lib.ct_conv1d(x, w, b, stride, padding, dilation, groups)


def ct_max(x, k, s=None, p=0, d=1, ceil=False):
    return lib.ct_max_pool2d(x, pair(k), pair(s) if s is not None else None, pair(p), pair(d), ceil)


def ct_avg(x, k, s=None, p=0, ceil=False, cip=True, div=None):
    return lib.ct_avg_pool2d(x, pair(k), pair(s) if s is not None else None, pair(p), ceil, cip, div or 0)


def ct_aap(x, size):
    return lib.ct_adaptive_avg_pool2d(x, pair(size))


def torch_ref(fn, *ts):
    """torch's value; float16 (no CPU conv/pool in torch 1.13) through float32."""
    if any(isinstance(t, torch.Tensor) and t.dtype == torch.float16 for t in ts):
        return fn(*[t.float() if isinstance(t, torch.Tensor) else t for t in ts]).half()
    return fn(*ts)


# ------------------------------------------------------------------ conv values
CONV2D = [  # x shape, w shape, bias, stride, padding, dilation, groups
    ((2, 3, 7, 6), (4, 3, 3, 3), True, 1, 0, 1, 1),
    ((2, 3, 7, 6), (4, 3, 3, 3), True, 1, 1, 1, 1),
    ((2, 3, 7, 6), (4, 3, 3, 2), False, (2, 1), (1, 0), 1, 1),
    ((2, 3, 9, 8), (4, 3, 3, 3), True, 2, 2, 2, 1),
    ((1, 4, 5, 5), (6, 2, 3, 3), True, 1, 1, 1, 2),
    ((3, 6, 5, 4), (6, 1, 2, 2), True, 1, 0, 1, 6),
    ((2, 8, 5, 5), (4, 8, 1, 1), True, 1, 0, 1, 1),
    ((2, 8, 5, 5), (4, 8, 1, 1), False, 2, 0, 1, 1),
    ((3, 7, 6), (4, 3, 3, 3), True, 1, 1, 1, 1),
    ((0, 3, 5, 5), (4, 3, 3, 3), True, 1, 0, 1, 1),
    ((1, 0, 5, 5), (4, 0, 3, 3), True, 1, 0, 1, 1),
    ((2, 3, 4, 4), (4, 3, 4, 4), True, 1, 0, 1, 1),
    ((4, 32, 12, 12), (16, 32, 3, 3), True, 1, 1, 1, 1),
    ((1, 2, 3, 3), (2, 2, 3, 3), False, 3, 1, 1, 1),
    # rows of more than one vector (im2col's float32 rows, 16 at a time by
    # masked loads for strides 1 and 2), padding past the taps' reach
    ((2, 3, 5, 45), (4, 3, 2, 3), True, (1, 2), (1, 5), (1, 2), 1),
    ((1, 2, 4, 70), (3, 2, 3, 4), False, (2, 1), (2, 7), 1, 1),
    ((1, 2, 4, 37), (3, 2, 1, 5), True, 2, (0, 9), (1, 3), 1),
]


@pytest.mark.parametrize("dtype", [F32, D, torch.bfloat16, torch.float16, torch.int64])
@pytest.mark.parametrize("lay", ["contig", "channels_last", "sliced"])
def test_conv2d(dtype, lay):
    for xs, ws, hb, s, p, d, g in CONV2D:
        x, w = layout(rand(xs, dtype), lay), layout(rand(ws, dtype), lay)
        b = rand((ws[0],), dtype) if hb else None
        got = ct.check(ct_conv2d(h(x), h(w), h(b), s, p, d, g))
        want = torch_ref(lambda x, w, b: Fn.conv2d(x, w, b, s, p, d, g), x.contiguous(), w.contiguous(), b)
        if xs[1] == 0:  # torch 1.13 returns 0 output channels here: the sum over no input is 0 (+ bias)
            want = torch.zeros(want.shape[:1] + (ws[0],) + want.shape[2:], dtype=dtype)
            if b is not None:
                want += b.view(-1, 1, 1)
        k = ws[1] * ws[2] * ws[3]
        ct.assert_close(got, want, what=f"conv2d {xs} {ws} s{s} p{p} d{d} g{g} {dtype}: ", **tol(dtype, k))


CONV1D = [((2, 3, 9), (4, 3, 3), True, 1, 0, 1, 1), ((2, 3, 9), (4, 3, 3), False, 2, 1, 2, 1),
          ((1, 4, 7), (6, 2, 2), True, 1, 1, 1, 2), ((3, 7), (4, 3, 3), True, 1, 1, 1, 1),
          ((2, 4, 5), (4, 4, 1), True, 1, 0, 1, 1), ((0, 3, 5), (2, 3, 3), True, 1, 0, 1, 1)]


@pytest.mark.parametrize("dtype", [F32, D, torch.int64])
def test_conv1d(dtype):
    for xs, ws, hb, s, p, d, g in CONV1D:
        x, w = layout(rand(xs, dtype), "sliced"), rand(ws, dtype)
        b = rand((ws[0],), dtype) if hb else None
        got = ct.check(ct_conv1d(h(x), h(w), h(b), s, p, d, g))
        want = Fn.conv1d(x, w, b, s, p, d, g)
        ct.assert_close(got, want, what=f"conv1d {xs} {ws}: ", **tol(dtype, ws[1] * ws[2]))


def test_conv_nan_inf():
    x = rand((1, 2, 4, 4))
    x[0, 0, 1, 1] = float("nan")
    x[0, 1, 2, 3] = float("inf")
    w = rand((3, 2, 2, 2))
    got = ct.check(ct_conv2d(h(x), h(w), None, 1, 0, 1, 1))
    ct.assert_close(got, Fn.conv2d(x, w), rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------ pooling values
POOLS = [  # shape, kernel, stride, padding, dilation, ceil
    ((2, 3, 7, 6), 2, None, 0, 1, False), ((2, 3, 7, 6), 3, 2, 1, 1, False), ((2, 3, 7, 6), 3, 2, 1, 1, True),
    ((1, 2, 9, 9), (3, 2), (2, 3), (1, 1), 1, True), ((3, 7, 6), 2, 1, 0, 1, False), ((2, 2, 5, 5), 2, 2, 0, 1, True),
    ((0, 2, 5, 5), 2, None, 0, 1, False), ((1, 1, 8, 8), 3, 1, 1, 2, False), ((1, 1, 8, 8), 2, 3, 1, (2, 3), True),
    ((2, 4, 1, 1), 1, None, 0, 1, False),
]


@pytest.mark.parametrize("dtype", [F32, D, torch.bfloat16])
@pytest.mark.parametrize("lay", ["contig", "channels_last", "sliced"])
def test_max_pool2d(dtype, lay):
    for xs, k, s, p, d, c in POOLS:
        x = layout(rand(xs, dtype), lay)
        want, widx = Fn.max_pool2d(x, k, s, p, d, c, return_indices=True)
        idx = (ctypes.c_void_p * 1)()
        got = ct.check(lib.ct_max_pool2d_with_indices(h(x), pair(k), pair(s) if s is not None else None, pair(p),
                                                      pair(d), c, idx))
        ct.assert_close(got, want, what=f"max_pool2d {xs} k{k} s{s} p{p} d{d} c{c}: ")
        ct.assert_close(idx[0], widx, what=f"max_pool2d indices {xs} k{k}: ")
        ct.assert_close(ct.check(ct_max(h(x), k, s, p, d, c)), want)


def test_max_pool2d_nan_ties():
    x = torch.tensor([[[[1.0, 1.0, float("nan"), 2.0], [3.0, float("nan"), 0.0, 0.0], [1.0, 1.0, 1.0, 1.0],
                        [-float("inf"), -float("inf"), 5.0, 5.0]]]])
    for k, s in [(2, 2), (3, 1), (2, 1)]:
        want, widx = Fn.max_pool2d(x, k, s, return_indices=True)
        idx = (ctypes.c_void_p * 1)()
        got = ct.check(lib.ct_max_pool2d_with_indices(h(x), pair(k), pair(s), pair(0), pair(1), False, idx))
        ct.assert_close(got, want)
        ct.assert_close(idx[0], widx)


@pytest.mark.parametrize("dtype", [F32, D])
def test_max_pool2d_wide_rows(dtype):
    """rows wide enough that the windows inside them run as blocks of up to 64
    outputs, tap by tap (conv.c's MP_B): ties (small integers), NaN and -inf
    among them, values and indices against torch's (the first max, the last NaN)"""
    x = torch.randint(-3, 4, (2, 3, 37, 150), generator=GEN).to(dtype)
    x.view(-1)[torch.randint(0, x.numel(), (40,), generator=GEN)] = float("nan")
    x.view(-1)[torch.randint(0, x.numel(), (40,), generator=GEN)] = -float("inf")
    for k, s, p, d, c in [(3, 2, 1, 1, False), (3, 1, 1, 2, False), ((2, 3), (1, 2), (1, 1), 1, True), (5, 3, 2, 1, True)]:
        want, widx = Fn.max_pool2d(x, k, s, p, d, c, return_indices=True)
        idx = (ctypes.c_void_p * 1)()
        got = ct.check(lib.ct_max_pool2d_with_indices(h(x), pair(k), pair(s), pair(p), pair(d), c, idx))
        ct.assert_close(got, want, what=f"max_pool2d k{k} s{s} p{p} d{d}: ")
        ct.assert_close(idx[0], widx, what=f"max_pool2d indices k{k} s{s} p{p} d{d}: ")


@pytest.mark.parametrize("dtype", [F32, D, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("lay", ["contig", "sliced"])
def test_avg_pool2d(dtype, lay):
    for xs, k, s, p, _, c in POOLS:
        x = layout(rand(xs, dtype), lay)
        for cip in (True, False):
            for div in (None, 3):
                if dtype == torch.int64 and div is None and not cip:
                    pass
                want = Fn.avg_pool2d(x, k, s, p, c, cip, div)
                got = ct.check(ct_avg(h(x), k, s, p, c, cip, div))
                ct.assert_close(got, want, what=f"avg_pool2d {xs} k{k} s{s} p{p} c{c} cip{cip} div{div}: ",
                                **tol(dtype))


@pytest.mark.parametrize("dtype", [F32, D, torch.bfloat16])
def test_adaptive_avg_pool2d(dtype):
    for xs, o in [((2, 3, 7, 6), (3, 2)), ((2, 3, 7, 6), (7, 6)), ((2, 3, 5, 5), (1, 1)), ((3, 5, 7), (4, 3)),
                  ((3, 5, 7), (10, 9)), ((0, 2, 4, 4), (2, 2)), ((1, 5, 7), (0, 0)), ((2, 2, 4, 4), (1, 3)),
                  ((2, 3, 9, 21), (1, 1)), ((3, 17, 19), (1, 1)), ((2, 3, 9, 37), (2, 3))]:
        x = layout(rand(xs, dtype), "sliced")
        got = ct.check(ct_aap(h(x), o))
        ct.assert_close(got, Fn.adaptive_avg_pool2d(x, o), what=f"adaptive {xs} {o}: ", **tol(dtype))


def test_adaptive_avg_pool2d_one_by_one_is_the_mean():
    """torch's adaptive_avg_pool2d to 1 x 1 is x.mean((-1, -2), keepdim=True): any rank
    from 2 up, an empty plane gives NaN, float16 is taken, integers fail in mean's words,
    and the node is MeanBackward1; other sizes keep the pool's checks"""
    ct.declare("ct_grad_fn_name", ctypes.c_char_p, [T])
    for xs in [(3, 4), (2, 3, 0, 4), (2, 3, 4, 0), (0, 3, 2, 2), (2, 0, 5), (2, 3, 4, 5, 6), (4,), ()]:
        for dt in (F32, torch.float16, torch.int64):
            x = rand(xs, dt)
            want = ct.torch_error(lambda: Fn.adaptive_avg_pool2d(x, 1))
            ct.clear_error()
            got = ct_aap(h(x), (1, 1))
            if want is not None:
                ct.assert_error(got, want, what=f"adaptive {xs} {dt}: ")
            else:
                ct.assert_close(ct.check(got), Fn.adaptive_avg_pool2d(x, 1), what=f"adaptive {xs} {dt}: ",
                                **tol(dt))
    x = rand((2, 3, 5, 4), D)
    check_grads(lambda x: ct_aap(x, (1, 1)), lambda x: Fn.adaptive_avg_pool2d(x, 1), [x], "adaptive 1x1")
    assert lib.ct_grad_fn_name(ct_aap(leaf(x), (1, 1))).decode() == "MeanBackward1"
    err(lambda: ct_aap(h(z(2, 3, 0, 4)), (1, 2)), lambda: Fn.adaptive_avg_pool2d(z(2, 3, 0, 4), (1, 2)), "adaptive 1x2")


# ------------------------------------------------------------------ errors
def err(cfn, tfn, what):
    want = ct.torch_error(tfn)
    assert want is not None, f"{what}: torch does not fail"
    ct.clear_error()
    ct.assert_error(cfn(), want, what=f"{what}: ")


def z(*shape, dtype=F32):
    return torch.zeros(shape, dtype=dtype)


def test_conv_errors():
    cases = [
        ((1, 3, 5, 5), (4, 3, 3), None, 1, 0, 1, 1, F32),
        ((3, 5), (4, 3, 3, 3), None, 1, 0, 1, 1, F32),
        ((1, 1, 3, 5, 5), (4, 3, 3, 3), None, 1, 0, 1, 1, F32),
        ((1, 2, 5, 5), (4, 3, 3, 3), None, 1, 0, 1, 1, F32),
        ((2, 5, 5), (4, 3, 3, 3), None, 1, 0, 1, 1, F32),
        ((1, 6, 5, 5), (3, 3, 3, 3), None, 1, 0, 1, 2, F32),
        ((1, 6, 5, 5), (3, 3, 3, 3), None, 1, 0, 1, 0, F32),
        ((1, 3, 2, 2), (4, 3, 3, 3), None, 1, 0, 1, 1, F32),
        ((1, 3, 5, 5), (4, 3, 3, 3), None, 1, 0, 3, 1, F32),
        ((1, 3, 5, 5), (4, 3, 3, 3), None, 0, 0, 1, 1, F32),
        ((1, 3, 5, 5), (4, 3, 3, 3), None, 1, -1, 1, 1, F32),
        ((1, 3, 5, 5), (4, 3, 3, 3), None, 1, 0, 0, 1, F32),
        ((1, 3, 5, 5), (4, 3, 3, 3), (3,), 1, 0, 1, 1, F32),
        ((1, 3, 5, 5), (0, 3, 3, 3), None, 1, 0, 1, 1, F32),
        ((1, 3, 5, 5), (4, 3, 0, 3), None, 1, 0, 1, 1, F32),
        ((1, 3, 5, 5), (4, 3, 3, 3), None, 1, 0, 1, 1, torch.bool),
        # an empty plane (not batch nor channels): torch's backend selection refuses it
        ((1, 2, 0, 3), (4, 2, 1, 1), (4,), 1, 1, 1, 1, F32),
        ((2, 0, 3), (4, 2, 1, 1), None, 2, 1, 1, 1, F32),
        ((1, 2, 0, 3), (2, 1, 1, 1), None, 1, 1, 1, 2, F32),
    ]
    for xs, ws, bs, s, p, d, g, dt in cases:
        x, w = z(*xs, dtype=dt), z(*ws, dtype=dt)
        b = z(*bs, dtype=dt) if bs else None
        err(lambda: ct_conv2d(h(x), h(w), h(b), s, p, d, g), lambda: Fn.conv2d(x, w, b, s, p, d, g), f"conv2d {xs} {ws}")
    x, w = z(1, 3, 5, 5), z(4, 3, 3, 3, dtype=D)
    err(lambda: ct_conv2d(h(x), h(w), None), lambda: Fn.conv2d(x, w), "conv2d dtype")
    w, b = z(4, 3, 3, 3), z(4, dtype=D)
    err(lambda: ct_conv2d(h(x), h(w), h(b)), lambda: Fn.conv2d(x, w, b), "conv2d bias dtype")
    x, w = z(1, 2, 0, 3), z(4, 2, 1, 1, dtype=D)  # the empty plane before the weight's dtype
    err(lambda: ct_conv2d(h(x), h(w), None, 1, 1), lambda: Fn.conv2d(x, w, None, 1, 1), "conv2d empty plane dtype")
    for xs, ws in [((1, 3, 5), (4, 3, 3, 3)), ((1, 1, 3, 5), (4, 3, 3)), ((1, 2, 5), (4, 3, 3)), ((1, 3, 2), (4, 3, 3)),
                   ((3, 2), (4, 3, 3))]:
        x, w = z(*xs), z(*ws)
        err(lambda: ct_conv1d(h(x), h(w), None), lambda: Fn.conv1d(x, w), f"conv1d {xs} {ws}")
    x, w = z(2, 0), z(4, 2, 1)
    err(lambda: ct_conv1d(h(x), h(w), None, 1, 1), lambda: Fn.conv1d(x, w, None, 1, 1), "conv1d empty plane")


def test_pool_errors():
    for xs, k, s, p, d, dt in [((1, 3, 5, 5), 0, None, 0, 1, F32), ((1, 3, 5, 5), 2, 0, 0, 1, F32),
                               ((1, 3, 5, 5), 2, 2, 2, 1, F32), ((1, 3, 5, 5), 2, 2, 0, 0, F32),
                               ((1, 3, 1, 1), 2, None, 0, 1, F32), ((5, 5), 2, None, 0, 1, F32),
                               ((1, 1, 1, 5, 5), 2, None, 0, 1, F32), ((1, 1, 5, 5), 2, None, 0, 1, torch.int64),
                               ((1, 0, 5, 5), 2, None, 0, 1, F32), ((1, 2, 0, 5), 2, None, 0, 1, F32),
                               ((1, 3, 5, 5), 2, -1, 0, 1, F32), ((1, 3, 5, 5), 2, 1, -1, 1, F32)]:
        x = z(*xs, dtype=dt)
        err(lambda: ct_max(h(x), k, s, p, d), lambda: Fn.max_pool2d(x, k, s, p, d), f"max_pool2d {xs} k{k}")
    for xs, k, s, p, dt in [((1, 3, 5, 5), 0, None, 0, F32), ((1, 3, 5, 5), 2, 0, 0, F32),
                            ((1, 3, 5, 5), 2, 2, 2, F32), ((1, 3, 1, 1), 2, None, 0, F32), ((5, 5), 2, None, 0, F32),
                            ((5,), 2, None, 0, F32), ((1, 1, 1, 5, 5), 2, None, 0, F32), ((1, 0, 5, 5), 2, None, 0, F32),
                            ((1, 2, 0, 5), 2, None, 0, F32)]:
        x = z(*xs, dtype=dt)
        err(lambda: ct_avg(h(x), k, s, p), lambda: Fn.avg_pool2d(x, k, s, p), f"avg_pool2d {xs} k{k}")
    for xs, o, dt in [((5, 5), 2, F32), ((1, 5, 5), -1, F32), ((1, 0, 5), 2, F32), ((1, 4, 5), 2, torch.int64),
                      ((1, 1, 1, 4, 5), 2, F32)]:
        x = z(*xs, dtype=dt)
        err(lambda: ct_aap(h(x), o), lambda: Fn.adaptive_avg_pool2d(x, o), f"adaptive {xs} {o}")


# ------------------------------------------------------------------ meta
def meta(t):
    return ct.check(lib.ct_empty_on(ct.i64(t.shape), t.dim(), ct.ct_dtype_of_torch(t.dtype), ct.CT_META))


def test_meta_shapes():
    for xs, ws, hb, s, p, d, g in CONV2D:
        x, w = z(*xs), z(*ws)
        b = z(ws[0]) if hb else None
        got = ct.check(ct_conv2d(meta(x), meta(w), meta(b) if b is not None else None, s, p, d, g))
        assert lib.ct_device_of(got) == ct.CT_META
        want = tuple(Fn.conv2d(x, w, b, s, p, d, g).shape)
        if xs[1] == 0:
            want = want[:1] + (ws[0],) + want[2:]
        assert ct.shape(got) == want
    for xs, k, s, p, d, c in POOLS:
        x = z(*xs)
        assert ct.shape(ct.check(ct_max(meta(x), k, s, p, d, c))) == tuple(Fn.max_pool2d(x, k, s, p, d, c).shape)
        assert ct.shape(ct.check(ct_avg(meta(x), k, s, p, c))) == tuple(Fn.avg_pool2d(x, k, s, p, c).shape)
    assert ct.shape(ct.check(ct_aap(meta(z(2, 3, 7, 6)), (3, 2)))) == (2, 3, 3, 2)
    ct.clear_error()
    ct.assert_error(ct_conv2d(meta(z(1, 2, 5, 5)), meta(z(4, 3, 3, 3)), None),
                    "expected input[1, 2, 5, 5] to have 3 channels, but got 2 channels instead")


# ------------------------------------------------------------------ gradients


def check_grads(cfn, tfn, tensors, what, second=True):
    hs = [leaf(t) if t is not None else None for t in tensors]
    tt = [t.detach().requires_grad_(True) if t is not None else None for t in tensors]
    out = tfn(*tt)
    hout = ct.check(cfn(*hs))
    ct.assert_close(hout, out.detach(), rtol=1e-10, atol=1e-10, what=f"{what} forward: ")
    g = torch.randn(out.shape, generator=GEN, dtype=D)
    used = [k for k, t in enumerate(tt) if t is not None]
    tg = torch.autograd.grad(out, [tt[k] for k in used], g, create_graph=True)
    cg = grads_of(hout, [hs[k] for k in used], g)
    for k, want, got in zip(used, tg, cg):
        assert got, f"{what}: no gradient for input {k}"
        ct.assert_close(got, want.detach(), rtol=1e-9, atol=1e-9, what=f"{what} grad {k}: ")
    if not second:
        return
    for k, want, got in zip(used, tg, cg):
        if not want.requires_grad:
            continue
        v = torch.randn(want.shape, generator=GEN, dtype=D)
        tgg = torch.autograd.grad(want, [tt[j] for j in used], v, retain_graph=True, allow_unused=True)
        if not lib.ct_requires_grad(got):  # constant in the inputs (torch may still give it a node)
            assert all(w2 is None or float(w2.abs().max()) == 0 for w2 in tgg), f"grad {k} should depend on inputs"
            continue
        cgg = grads_of(got, [hs[j] for j in used], v)
        for j, w2, g2 in zip(used, tgg, cgg):
            if w2 is None:
                assert not g2 or float(ct.to_torch(g2).abs().max()) == 0, f"{what}: grad2 {k}->{j} should be 0"
                continue
            if not g2:
                assert float(w2.abs().max()) == 0, f"{what}: missing second-order grad {k}->{j}"
                continue
            ct.assert_close(g2, w2.detach(), rtol=1e-9, atol=1e-9, what=f"{what} grad2 {k}->{j}: ")


GRAD = pytest.mark.skipif(not ct.has("ct_autograd_grad", "ct_set_requires_grad"), reason="no autograd")


@GRAD
@pytest.mark.parametrize("case", range(len(CONV2D) - 3))
def test_conv2d_grads(case):
    xs, ws, hb, s, p, d, g = CONV2D[case]
    if 0 in xs or 0 in ws:
        return
    x, w = layout(rand(xs, D), "sliced"), rand(ws, D)
    b = rand((ws[0],), D) if hb else None
    check_grads(lambda x, w, b: ct_conv2d(x, w, b, s, p, d, g), lambda x, w, b: Fn.conv2d(x, w, b, s, p, d, g),
                [x, w, b], f"conv2d {xs} {ws}")


@GRAD
def test_conv1d_grads():
    for xs, ws, hb, s, p, d, g in CONV1D:
        if 0 in xs:
            continue
        x, w = rand(xs, D), rand(ws, D)
        b = rand((ws[0],), D) if hb else None
        check_grads(lambda x, w, b: ct_conv1d(x, w, b, s, p, d, g), lambda x, w, b: Fn.conv1d(x, w, b, s, p, d, g),
                    [x, w, b], f"conv1d {xs} {ws}")


@GRAD
def test_pool_grads():
    for xs, k, s, p, d, c in POOLS:
        if 0 in xs:
            continue
        x = layout(rand(xs, D), "sliced")
        check_grads(lambda x: ct_max(x, k, s, p, d, c), lambda x: Fn.max_pool2d(x, k, s, p, d, c), [x],
                    f"max_pool2d {xs} k{k}")
        for cip in (True, False):
            check_grads(lambda x: ct_avg(x, k, s, p, c, cip), lambda x: Fn.avg_pool2d(x, k, s, p, c, cip), [x],
                        f"avg_pool2d {xs} k{k} cip{cip}")
        check_grads(lambda x: ct_avg(x, k, s, p, c, True, 5), lambda x: Fn.avg_pool2d(x, k, s, p, c, True, 5), [x],
                    f"avg_pool2d {xs} k{k} div5")
    for xs, o in [((2, 3, 7, 6), (3, 2)), ((3, 5, 7), (4, 3)), ((1, 2, 3, 3), (5, 4)), ((2, 3, 5, 6), (1, 1))]:
        x = rand(xs, D)
        check_grads(lambda x: ct_aap(x, o), lambda x: Fn.adaptive_avg_pool2d(x, o), [x], f"adaptive {xs} {o}")


@GRAD
def test_max_pool2d_windows_in_the_padding():
    """dilated / ceil_mode windows lying wholly in the padding: -inf, an index
    outside the plane (torch's), and no gradient from them (torch 1.13 writes
    it out of bounds, into the next plane); double backward too"""
    for xs, k, s, p, d in [((1, 2, 1, 6), 2, 2, (1, 0), (2, 3)), ((2, 1, 3, 3), 2, 3, 1, 2)]:
        x = rand(xs, D)
        hx = leaf(x)
        y, i = Fn.max_pool2d(x, k, s, p, d, True, return_indices=True)
        hy = ct.check(ct_max(hx, k, s, p, d, True))
        ct.assert_close(hy, y, what=f"max_pool2d {xs}: ")
        g = torch.ones_like(y)
        want = torch.zeros_like(x)  # each window's gradient at its max, if it took an element
        flat, n = want.view(-1, xs[-2] * xs[-1]), xs[-2] * xs[-1]
        for pl, row in enumerate(i.view(flat.shape[0], -1)):
            for j in row:
                if 0 <= j < n:
                    flat[pl, j] += 1
        ct.assert_close(grads_of(hy, hx, g), want, what=f"max_pool2d {xs} grad: ")


@GRAD
def test_finite_differences():
    """<op(x), g> by central differences against ctorch's gradient, float64."""
    cases = [
        (lambda x, w, b: ct_conv2d(x, w, b, 2, 1, 1, 1), [rand((1, 2, 4, 4), D), rand((2, 2, 3, 3), D), rand((2,), D)]),
        (lambda x, w, b: ct_conv1d(x, w, b, 1, 1, 2, 2), [rand((1, 2, 6), D), rand((2, 1, 2), D), rand((2,), D)]),
        (lambda x: ct_max(x, 2, 1, 1, 1, True), [rand((1, 1, 4, 4), D)]),
        (lambda x: ct_avg(x, 3, 2, 1, True, False), [rand((1, 1, 5, 4), D)]),
        (lambda x: ct_aap(x, (3, 2)), [rand((1, 4, 5), D)]),
    ]
    eps = 1e-6
    for fn, ts in cases:
        hs = [leaf(t) for t in ts]
        out = ct.check(fn(*hs))
        g = torch.randn(ct.shape(out), generator=GEN, dtype=D)
        cg = grads_of(out, hs, g)
        for k, t in enumerate(ts):
            got = ct.to_torch(cg[k]).reshape(-1)
            for i in range(t.numel()):
                vals = []
                for sgn in (1, -1):
                    p = t.clone()
                    p.view(-1)[i] += sgn * eps
                    args = [ct.from_torch(p) if j == k else ct.from_torch(ts[j]) for j in range(len(ts))]
                    vals.append(float((ct.to_torch(ct.check(fn(*args))) * g).sum()))
                num = (vals[0] - vals[1]) / (2 * eps)
                assert math.isclose(num, float(got[i]), rel_tol=1e-5, abs_tol=1e-6), f"fd input {k}[{i}]"


# ------------------------------------------------------------------ fast paths
# Stride-1 3x3 convolutions with 8 or more channels each way (one group, float32/float64) run as
# Winograd F(4x4, 3x3): the forward, and the input gradient when the padding is at most 2. Odd and
# even plane sizes (tiles cut by the edge), paddings 0-3 and mixed, batch 1, unbatched, with and
# without bias, and batches whose tiles the kernel cuts into blocks across samples and tile rows.
WINO = [  # x shape, w shape, bias, padding
    ((2, 8, 7, 9), (8, 8, 3, 3), True, 1),
    ((1, 16, 6, 6), (12, 16, 3, 3), False, 0),
    ((3, 9, 5, 8), (10, 9, 3, 3), True, 2),
    ((2, 8, 4, 3), (8, 8, 3, 3), True, 3),
    ((1, 8, 3, 4), (9, 8, 3, 3), True, (0, 1)),
    ((8, 5, 5), (8, 8, 3, 3), False, (2, 1)),
    ((5, 32, 14, 14), (64, 32, 3, 3), True, 1),
]


@pytest.fixture(params=[1, 2, 3])
def threads(request):
    """1, 2 or 3 OpenMP threads: the samples are cut into chunks per thread."""
    before = lib.ct_get_num_threads()
    lib.ct_set_num_threads(request.param)
    yield request.param
    lib.ct_set_num_threads(before)


@pytest.mark.parametrize("dtype", [F32, D])
def test_conv2d_winograd(dtype, threads):
    for xs, ws, hb, p in WINO:
        x, w = rand(xs, dtype), rand(ws, dtype)
        b = rand((ws[0],), dtype) if hb else None
        got = ct.check(ct_conv2d(h(x), h(w), h(b), 1, p))
        ct.assert_close(got, Fn.conv2d(x, w, b, 1, p), what=f"winograd {xs} {ws} p{p} {dtype}: ",
                        **tol(dtype, ws[1] * 9))


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")], ids=str)
def test_conv2d_winograd_shape_with_non_finite_inputs(bad):
    """Winograd's transforms would turn one inf into NaNs across its tile: such
    inputs give torch's infs and NaNs, forward and input gradient. (Not weights:
    there torch's own answer depends on its algorithm, im2col multiplying the
    padding or oneDNN skipping it.)"""
    x, w, b = rand((2, 8, 7, 6)), rand((8, 8, 3, 3)), rand((8,))
    xx = x.clone()
    xx.view(-1)[5] = bad
    got = ct.check(ct_conv2d(h(xx), h(w), h(b), 1, 1))
    ct.assert_close(got, Fn.conv2d(xx, w, b, 1, 1), rtol=1e-4, atol=1e-4, what=f"{bad} in x: ")
    g = rand((2, 8, 7, 6))
    g.view(-1)[11] = bad
    hx, hw = leaf(x), h(w)
    tx = x.clone().requires_grad_(True)
    want = torch.autograd.grad(Fn.conv2d(tx, w, b, 1, 1), tx, g)[0]
    got = grads_of(ct.check(ct_conv2d(hx, hw, h(b), 1, 1)), [hx], g)[0]
    ct.assert_close(got, want, rtol=1e-4, atol=1e-4, what=f"{bad} in grad_output: ")


@GRAD
def test_conv2d_winograd_grads(threads):
    for xs, ws, hb, p in WINO[:-1]:
        x, w = rand(xs, D), rand(ws, D)
        b = rand((ws[0],), D) if hb else None
        check_grads(lambda x, w, b: ct_conv2d(x, w, b, 1, p), lambda x, w, b: Fn.conv2d(x, w, b, 1, p), [x, w, b],
                    f"winograd {xs} {ws} p{p}", second=threads == 1)


@GRAD
def test_conv2d_winograd_grads_f32():
    """The float32 gradients of a W10-sized layer (Winograd input gradient) against torch's."""
    x, w, b = rand((4, 32, 14, 14)), rand((64, 32, 3, 3)), rand((64,))
    hs = [leaf(t) for t in (x, w, b)]
    tt = [t.clone().requires_grad_(True) for t in (x, w, b)]
    out = Fn.conv2d(*tt, 1, 1)
    g = torch.randn(out.shape, generator=GEN)
    want = torch.autograd.grad(out, tt, g)
    got = grads_of(ct.check(ct_conv2d(*hs, 1, 1)), hs, g)
    for k, (wa, go) in enumerate(zip(want, got)):
        ct.assert_close(go, wa, rtol=1e-4, atol=1e-3 * (1 + float(wa.abs().max())) / 10, what=f"grad {k}: ")


def wino_rel_err(got, want):
    """The largest difference from torch's float64 result, relative to its largest |value|."""
    got, want = ct.to_torch(got).double(), want.double()
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-300))


# plane sizes (1x1 and 2x2: one tile, mostly cut off; 5x7: tiles cut both ways; 28x28: whole tiles;
# 29x31: a last tile row and column of one output), (batch, input, output channels) with channel
# counts off the register blocks of 6 output rows and the blocks of 64 channels of the sums
WINO_SIZES = [(1, 1), (2, 2), (5, 7), (28, 28), (29, 31)]
WINO_CHANNELS = [(1, 17, 9), (64, 9, 8), (2, 64, 17), (2, 3, 8), (3, 1, 8), (1, 8, 64), (4, 64, 3)]


@pytest.mark.parametrize("hw", WINO_SIZES, ids=str)
@pytest.mark.parametrize("p", [0, 1, 2])
def test_conv2d_winograd_sizes(hw, p):
    """float32 forward and input gradient of every size against torch in float64: within torch's
    tolerance and within 1e-5 of the largest |value| (F(4x4, 3x3) rounds more than a direct sum)."""
    if min(hw) + 2 * p < 3:
        return
    for n, c, o in WINO_CHANNELS:
        x, w, b = rand((n, c) + hw), rand((o, c, 3, 3)), rand((o,))
        want = Fn.conv2d(x.double(), w.double(), b.double(), 1, p)
        got = ct.check(ct_conv2d(h(x), h(w), h(b), 1, p))
        what = f"winograd {tuple(x.shape)} -> {o} p{p}: "
        ct.assert_close(got, want.float(), what=what, **tol(F32, c * 9))
        assert wino_rel_err(got, want) < 1e-5, what
        if not ct.has("ct_autograd_grad") or p > 2:
            continue
        g = rand(want.shape)
        tx = x.double().requires_grad_(True)
        gx = torch.autograd.grad(Fn.conv2d(tx, w.double(), None, 1, p), tx, g.double())[0]
        hx = leaf(x)
        got = grads_of(ct.check(ct_conv2d(hx, h(w), None, 1, p)), [hx], g)[0]
        ct.assert_close(got, gx.float(), what="grad " + what, **tol(F32, o * 9))
        assert wino_rel_err(got, gx) < 1e-5, "grad " + what


@pytest.mark.parametrize("scale", [1e-30, 1e-3, 1e3, 1e30], ids=str)
@pytest.mark.parametrize("c", [64, 512, 2048])
def test_conv2d_winograd_rounding(scale, c):
    """Large and small magnitudes and long channel sums: the error stays below 1e-5 of the largest
    |output| (float32; the sums run in blocks of 64 channels), and within 1e-12 in float64."""
    x, w = rand((2, c, 9, 10)) * scale, rand((8, c, 3, 3))
    want = Fn.conv2d(x.double(), w.double(), None, 1, 1)
    assert wino_rel_err(ct.check(ct_conv2d(h(x), h(w), None, 1, 1)), want) < 1e-5
    assert wino_rel_err(ct.check(ct_conv2d(h(x.double()), h(w.double()), None, 1, 1)), want) < 1e-12
    w2 = rand((8, c, 3, 3)) * scale  # the weight's transform rounds too
    want = Fn.conv2d(x.double() / scale, w2.double(), None, 1, 1)
    assert wino_rel_err(ct.check(ct_conv2d(h(x / scale), h(w2), None, 1, 1)), want) < 1e-5


def test_conv2d_winograd_overflow():
    """Finite inputs whose transforms overflow float32 (1e38 * 9) take im2col: torch's finite sums."""
    x, w = torch.full((2, 8, 6, 6), 1e38), rand((8, 8, 3, 3)) * 1e-3
    want = Fn.conv2d(x, w, None, 1, 1)
    assert bool(torch.isfinite(want).all())
    ct.assert_close(ct.check(ct_conv2d(h(x), h(w), None, 1, 1)), want, rtol=1e-4, atol=0)


def test_max_pool2d_2x2_path():
    """The 2x2 stride-2 kernel (float32 with AVX-512: rows of 16 outputs, the last ones masked; else
    flat spans of 8 over each plane, the last moved back): planes of fewer and more than 8 outputs,
    rows of 1 to 35 outputs, odd sizes (the last row or column left out), ties and NaNs."""
    for xs in [(1, 1, 2, 2), (2, 3, 8, 8), (1, 2, 28, 28), (1, 2, 9, 7), (3, 14, 14), (2, 5, 6, 5), (1, 2, 6, 40),
               (2, 1, 5, 71), (1, 1, 4, 33)]:
        for dtype in (F32, D):
            x = torch.randint(-2, 3, xs, generator=GEN).to(dtype)
            x.view(-1)[::7] = float("nan")
            want, widx = Fn.max_pool2d(x, 2, return_indices=True)
            idx = (ctypes.c_void_p * 1)()
            got = ct.check(lib.ct_max_pool2d_with_indices(h(x), pair(2), pair(2), pair(0), pair(1), False, idx))
            ct.assert_close(got, want, what=f"max_pool2d 2x2 {xs}: ")
            ct.assert_close(idx[0], widx, what=f"max_pool2d 2x2 indices {xs}: ")


# ------------------------------------------------------------------ depthwise
# One input channel a group: conv.c's depthwise kernels (stride 1, on padded
# flat rows; other strides take im2col), forward and both gradients.
DEPTHWISE = [  # x shape, w shape, bias, stride, padding, dilation, groups
    ((2, 6, 9, 8), (6, 1, 3, 3), True, 1, 1, 1, 6),
    ((2, 6, 9, 8), (12, 1, 3, 3), False, 1, 0, 1, 6),  # two outputs a channel
    ((2, 6, 9, 8), (6, 1, 3, 3), True, 2, 1, 1, 6),
    ((2, 6, 9, 8), (6, 1, 3, 3), True, (1, 2), 1, 1, 6),
    ((2, 4, 10, 11), (4, 1, 3, 2), True, 1, (2, 1), 2, 4),
    ((3, 8, 12, 12), (8, 1, 5, 5), True, 1, 2, 1, 8),
    ((1, 3, 4, 5), (3, 1, 5, 5), False, 1, 3, (1, 2), 3),  # padding beyond the taps
    ((40, 16, 14, 14), (16, 1, 3, 3), True, 1, 1, 1, 16),  # over the threads
]


@pytest.mark.parametrize("dtype", [F32, D, torch.bfloat16])
def test_conv2d_depthwise(dtype, threads):
    for xs, ws, hb, s, p, d, g in DEPTHWISE:
        x, w = layout(rand(xs, dtype), "sliced"), rand(ws, dtype)
        b = rand((ws[0],), dtype) if hb else None
        got = ct.check(ct_conv2d(h(x), h(w), h(b), s, p, d, g))
        want = torch_ref(lambda x, w, b: Fn.conv2d(x, w, b, s, p, d, g), x.contiguous(), w, b)
        ct.assert_close(got, want, what=f"depthwise {xs} {ws} s{s} p{p} d{d} {dtype}: ", **tol(dtype, 25))
    x, w = rand((2, 4, 9), dtype), rand((8, 1, 3), dtype)
    got = ct.check(ct_conv1d(h(x), h(w), None, 1, 1, 1, 4))
    ct.assert_close(got, torch_ref(lambda x, w: Fn.conv1d(x, w, None, 1, 1, 1, 4), x, w), what="conv1d depthwise: ",
                    **tol(dtype, 3))


@GRAD
def test_conv2d_depthwise_grads(threads):
    for xs, ws, hb, s, p, d, g in DEPTHWISE:
        x, w = layout(rand(xs, D), "sliced"), rand(ws, D)
        b = rand((ws[0],), D) if hb else None
        check_grads(lambda x, w, b: ct_conv2d(x, w, b, s, p, d, g), lambda x, w, b: Fn.conv2d(x, w, b, s, p, d, g),
                    [x, w, b], f"depthwise {xs} {ws} s{s} p{p} d{d}", second=xs[0] < 40)


# float32 depthwise, stride 1: with AVX-512, the taps of a kernel row spanning
# 17 values at most come out of aligned vectors by permutes (forward, both
# gradients); wider spans take the plain loop. Widths 1..37 put the planes'
# rows at every offset in a vector; (kw - 1) dw of 16 is the widest permuted
# span, 17 and 20 the plain loop's.
DW_F32 = [  # x shape, w shape, padding, dilation, groups
    *[((2, 3, 7, wd), (3, 1, 3, 3), 1, 1, 3) for wd in range(1, 38, 3)],
    ((2, 4, 9, 30), (8, 1, 3, 3), (0, 2), (2, 1), 4),  # two outputs a channel
    ((1, 2, 6, 40), (2, 1, 2, 5), 1, (1, 4), 2),  # span 16
    ((1, 2, 6, 40), (2, 1, 3, 17), (1, 8), 1, 2),  # span 16, 17 taps a row
    ((1, 2, 6, 40), (2, 1, 2, 18), (1, 8), 1, 2),  # span 17
    ((1, 2, 6, 40), (2, 1, 2, 6), 3, (1, 4), 2),  # span 20
    ((3, 5, 13, 21), (5, 1, 5, 1), 2, (3, 1), 5),
    ((32, 32, 28, 28), (32, 1, 3, 3), 1, 1, 32),  # MobileNet's, over the threads
]


def test_conv2d_depthwise_float32_grads(threads):
    """The float32 forward and both gradients against torch's, computed in
    float64 from the same float32 values (a tolerance for float32 sums)."""
    for xs, ws, p, d, g in DW_F32:
        x, w, b = rand(xs, F32), rand(ws, F32), rand((ws[0],), F32)
        tx, tw, tb = (t.double().requires_grad_(True) for t in (x, w, b))
        out = Fn.conv2d(tx, tw, tb, 1, p, d, g)
        gy = torch.randn(out.shape, generator=GEN, dtype=D).float()
        want = torch.autograd.grad(out, [tx, tw, tb], gy.double())
        hx, hw, hb = leaf(x), leaf(w), leaf(b)
        hout = ct.check(ct_conv2d(hx, hw, hb, 1, p, d, g))
        what = f"depthwise float32 {xs} {ws} p{p} d{d}"
        ct.assert_close(hout, out.detach().float(), rtol=1e-5, atol=1e-5, what=f"{what} forward: ")
        got = grads_of(hout, [hx, hw, hb], gy, create_graph=False)
        n = xs[0] * xs[2] * xs[3]  # the terms of a weight gradient's sum
        for k, name in enumerate(["input", "weight", "bias"]):
            ct.assert_close(got[k], want[k].float(), rtol=1e-5, atol=1e-6 * (n if k else 1) ** 0.5 * 10,
                            what=f"{what} {name} gradient: ")


@pytest.mark.parametrize("bad", [float("inf"), float("nan")], ids=str)
def test_conv2d_depthwise_non_finite(bad):
    """The padded rows' unused columns are zeros: an inf or NaN of x (weight
    gradient) or of the weights (input gradient) must not meet them (such
    inputs take im2col)."""
    for s in (1, 2):
        x, w, gy = rand((2, 3, 6, 7), D), rand((3, 1, 3, 3), D), None
        x.view(-1)[13] = bad
        w.view(-1)[4] = bad
        tx, tw = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
        out = Fn.conv2d(tx, tw, None, s, 0, 1, 3)
        gy = torch.randn(out.shape, generator=GEN, dtype=D)
        want = torch.autograd.grad(out, [tx, tw], gy)
        hx, hw = leaf(x), leaf(w)
        hout = ct.check(ct_conv2d(hx, hw, None, s, 0, 1, 3))
        ct.assert_close(hout, out.detach(), rtol=1e-10, atol=1e-10, what=f"{bad} s{s} forward: ")
        got = grads_of(hout, [hx, hw], gy)
        for k in range(2):
            ct.assert_close(got[k], want[k], rtol=1e-10, atol=1e-10, what=f"{bad} s{s} grad {k}: ")


def test_conv_check_order():
    """torch 1.13's order, pairs of faults: conv2d looks at the bias's type before
    anything; then groups, the weight's rank, padding, stride, the weight's and
    input's channels, the bias's shape, the kernel against the input; dilation is
    the backend's check after those (mkldnn's words for float32), the input's and
    weight's types after it. conv1d's mkldnn path words the bias's type its own way.
    Not copied: torch's conv1d outside mkldnn takes a bias of another dtype."""
    import itertools
    for nd in (1, 2):
        sp, ks = (6, 6)[:nd], (3, 3)[:nd]
        base = dict(x=torch.zeros(2, 4, *sp), w=torch.zeros(6, 4, *ks), b=torch.zeros(6), s=1, p=0, d=1, g=1)
        bads = {"pad": dict(p=-1), "stride": dict(s=0), "dil": dict(d=0), "wgroups": dict(w=torch.zeros(1, 2, *ks), g=2),
                "wdiv": dict(w=torch.zeros(3, 2, *ks), g=2, b=torch.zeros(3)),
                "bdtype": dict(b=torch.zeros(6, dtype=D)), "xdtype": dict(x=torch.zeros(2, 4, *sp, dtype=D)),
                "chan": dict(x=torch.zeros(2, 5, *sp)), "bshape": dict(b=torch.zeros(5)),
                "wdim": dict(w=torch.zeros(6, 4, 3, 3, 3)), "big": dict(w=torch.zeros(6, 4, *(9, 9)[:nd])),
                "groups0": dict(g=0), "xw": dict(x=torch.zeros(2, 4, *sp, dtype=D), b=torch.zeros(6, dtype=D)),
                "xdim": dict(x=torch.zeros(1, 2, 4, *sp)), "nob": dict(b=None), "one": dict(x=torch.zeros(1, 4, *sp))}
        for (k1, v1), (k2, v2) in itertools.combinations(list(bads.items()) + [("none", {})], 2):
            if set(v1) & set(v2) or (nd == 1 and {k1, k2} == {"bdtype", "one"}):
                continue
            a = dict(base, **v1, **v2)
            tf = Fn.conv1d if nd == 1 else Fn.conv2d
            want = ct.torch_error(lambda: tf(a["x"], a["w"], a["b"], a["s"], a["p"], a["d"], a["g"]))
            ct.clear_error()
            hb = h(a["b"])
            if nd == 1:
                got = lib.ct_conv1d(h(a["x"]), h(a["w"]), hb, a["s"], a["p"], a["d"], a["g"])
            else:
                got = ct_conv2d(h(a["x"]), h(a["w"]), hb, a["s"], a["p"], a["d"], a["g"])
            if want is None:
                ct.check(got)
            else:
                ct.assert_error(got, want, what=f"conv{nd}d {k1} + {k2}: ")



ct.declare("ct_batch_norm", T, [CT, T, T, CT, CT, c_bool, ctypes.c_double, ctypes.c_double])
ct.declare("ct_pad", T, [CT, I64P, c_int, ctypes.c_double])


@pytest.mark.parametrize("device", [ct.CT_CPU, ct.CT_META])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_channels_last_outputs(dtype, device):
    """A channels-last input (or conv weight) gives channels-last conv, pooling,
    pad and batch_norm outputs, as torch's CNN kernels do (suggest_memory_format,
    with its ambiguous cases: a size-1 C, size-1 H and W); the values are the
    contiguous computation's; batch_norm keeps an input that is contiguous too
    (a size-1 C) contiguous. The meta device gives the same strides."""
    cl, i64, one, zero = torch.channels_last, ct.i64, ct.i64([1, 1]), ct.i64([0, 0])

    def h(t):
        return ct.check(lib.ct_to_device(ct.from_torch(t), device))

    for shape in [(2, 3, 6, 6), (1, 3, 1, 1), (2, 1, 5, 5), (2, 4, 1, 7), (3, 2, 4, 3), (2, 3, 1, 1), (2, 1, 1, 5)]:
        x = torch.randn(*shape, dtype=dtype)
        w = torch.randn(4, shape[1], 3, 3, dtype=dtype)
        xs = x.to(memory_format=cl)
        hx = h(xs)
        cases = [(lambda hx=h(a), hw=h(b): lib.ct_conv2d(hx, hw, None, one, one, one, 1),
                  Fn.conv2d(a, b, padding=1), "conv2d")
                 for a, b in [(xs, w), (x, w.to(memory_format=cl)), (x, w)]]
        cases += [
            (lambda: lib.ct_max_pool2d(hx, one, one, zero, one, False), Fn.max_pool2d(xs, 1), "max_pool2d"),
            (lambda: lib.ct_avg_pool2d(hx, one, one, zero, False, True, 0), Fn.avg_pool2d(xs, 1), "avg_pool2d"),
            (lambda: lib.ct_adaptive_avg_pool2d(hx, i64([2, 3])), Fn.adaptive_avg_pool2d(xs, (2, 3)), "adaptive"),
            (lambda: lib.ct_batch_norm(hx, None, None, None, None, True, 0.1, 1e-5),
             Fn.batch_norm(xs, None, None, training=True) if shape[0] * shape[2] * shape[3] > 1 else None, "batch_norm"),
        ]
        for pad in ([1, 1, 1, 1], [0, 0, -1, 0], [0, 0], [1, 0], [0, 1, 0, 0, 0, 1]):
            cases.append((lambda pad=pad: lib.ct_pad(hx, i64(pad), len(pad), 0.0), Fn.pad(xs, pad), f"pad {pad}"))
        for fn, want, what in cases:
            if want is None:  # one value per channel: an error in both
                continue
            r = ct.check(fn())
            ct.assert_same_layout(r, want, f"{what} {shape} ")
            if device == ct.CT_CPU:
                ct.assert_close(r, want, rtol=1e-4 if dtype == torch.float32 else 1e-10, atol=1e-5,
                                what=f"{what} {shape} ")


def test_pad_crop_keeps_the_layout():
    """pad by no positive amount is torch's clone of the crop (preserve_format):
    a permuted input stays permuted; a positive pad gives a contiguous result."""
    p = torch.randn(3, 4, 5, dtype=torch.float64).permute(2, 0, 1)
    hp = ct.from_torch(p)
    for pad in ([0, 0], [-1, 0], [0, -2, -1, 0], [1, 0], [0, 0, 0, 0, 0, -1]):
        want = Fn.pad(p, pad)
        r = ct.check(lib.ct_pad(hp, ct.i64(pad), len(pad), 0.0))
        ct.assert_same_layout(r, want, f"pad {pad} ")
        ct.assert_close(r, want, what=f"pad {pad} ")


# float32 strides of 2 and more: with AVX-512, im2col gathers each channel's
# columns through one table of plane offsets (-1 in the padding) for the
# forward and the weight gradient. Tails of the flat kh kw Ho Wo gather
# (not multiples of 16), groups, dilations, padding past the taps' reach, an
# inf in the input, and the bench layer's size over the threads.
STRIDED_F32 = [  # x shape, w shape, stride, padding, dilation, groups
    ((2, 3, 9, 8), (4, 3, 3, 3), 2, 1, 1, 1),
    ((2, 4, 9, 11), (6, 2, 3, 3), (1, 3), (2, 1), (2, 1), 2),
    ((1, 2, 5, 37), (3, 2, 2, 5), (3, 2), (0, 9), (1, 3), 1),
    ((3, 5, 4, 4), (2, 5, 1, 1), 2, 0, 1, 1),
    ((2, 3, 6, 6), (2, 3, 3, 3), 4, 3, 1, 1),
    ((32, 32, 28, 28), (64, 32, 3, 3), 2, 1, 1, 1),
]


@pytest.mark.parametrize("case", range(len(STRIDED_F32)))
def test_conv2d_strided_float32(case, threads):
    """The float32 forward and gradients against torch's in float64 from the same float32 values."""
    xs, ws, s, p, d, g = STRIDED_F32[case]
    x, w, b = rand(xs, F32), rand(ws, F32), rand((ws[0],), F32)
    if case == 0:
        x[1, 2, 3, 5] = float("inf")
    tx, tw, tb = (t.double().requires_grad_(True) for t in (x, w, b))
    out = Fn.conv2d(tx, tw, tb, s, p, d, g)
    hx, hw, hb = leaf(x), leaf(w), leaf(b)
    hout = ct.check(ct_conv2d(hx, hw, hb, s, p, d, g))
    what = f"float32 {xs} {ws} s{s} p{p} d{d} g{g}"
    k = ws[1] * ws[2] * ws[3]  # the terms of an output's sum
    ct.assert_close(hout, out.detach().float(), rtol=1e-5, atol=1e-5 * k ** 0.5, what=f"{what} forward: ")
    if case == 0:
        return  # the gradients of an inf input are NaN where they meet it
    gy = torch.randn(out.shape, generator=GEN, dtype=D).float()
    want = torch.autograd.grad(out, [tx, tw, tb], gy.double())
    got = grads_of(hout, [hx, hw, hb], gy, create_graph=False)
    n = xs[0] * out.shape[2] * out.shape[3]  # the terms of a weight gradient's sum
    terms = [ws[0] // g * ws[2] * ws[3], n, n]  # and of an input gradient's (at most)
    for k, name in enumerate(["input", "weight", "bias"]):
        ct.assert_close(got[k], want[k].float(), rtol=1e-5, atol=1e-5 * terms[k] ** 0.5,
                        what=f"{what} {name} gradient: ")
