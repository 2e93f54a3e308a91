"""Parity with PyTorch: reductions, scans, softmax (values, dtypes, shapes,
layouts, gradients, errors, meta shapes). Expected values come from torch."""
import ctypes
from ctypes import POINTER, c_bool, c_double, c_int, c_void_p

import pytest

torch = pytest.importorskip("torch")
import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import grads_of, leaf  # noqa: E402

lib = ct.lib
T = CT = c_void_p
INTP = POINTER(c_int)
TP = POINTER(c_void_p)

for _n in ["ct_sum", "ct_mean", "ct_prod", "ct_max", "ct_min", "ct_all", "ct_any"]:
    ct.declare(_n, T, [CT])
for _n in ["ct_sum_dims", "ct_mean_dims", "ct_amax", "ct_amin", "ct_logsumexp", "ct_all_dims", "ct_any_dims"]:
    ct.declare(_n, T, [CT, INTP, c_int, c_bool])
ct.declare("ct_prod_dim", T, [CT, c_int, c_bool])
ct.declare("ct_max_dim", c_int, [CT, c_int, c_bool, TP, TP])
ct.declare("ct_min_dim", c_int, [CT, c_int, c_bool, TP, TP])
ct.declare("ct_argmax", T, [CT, c_bool, c_int, c_bool])
ct.declare("ct_argmin", T, [CT, c_bool, c_int, c_bool])
ct.declare("ct_var", T, [CT, INTP, c_int, c_double, c_bool])
ct.declare("ct_std", T, [CT, INTP, c_int, c_double, c_bool])
ct.declare("ct_norm", T, [CT, c_double, INTP, c_int, c_bool])
for _n in ["ct_cumsum", "ct_cumprod", "ct_softmax", "ct_log_softmax"]:
    ct.declare(_n, T, [CT, c_int])
ct.declare("ct_set_requires_grad", c_int, [T, c_bool])
ct.declare("ct_grad_fn_name", ctypes.c_char_p, [CT])
ct.declare("ct_autograd_grad", c_int, [TP, TP, c_int, TP, c_int, TP, c_bool, c_bool, c_bool])

GEN = torch.Generator().manual_seed(1234)
F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
INTS = [torch.int32, torch.int64, torch.uint8, torch.bool]
FLOATS = [F32, F64, F16, BF16]


def rand(shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape, generator=GEN) > 0.3
    if dtype in (torch.uint8,):
        return torch.randint(0, 5, shape, generator=GEN, dtype=dtype)
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=GEN, dtype=dtype)
    return torch.randn(shape, generator=GEN, dtype=F64).to(dtype)


def layouts(shape, dtype):
    """(name, tensor) pairs with shape `shape`: contiguous, transposed, sliced, expanded."""
    out = [("contig", rand(shape, dtype))]
    if len(shape) >= 2:
        out.append(("transposed", rand(shape[::-1], dtype).transpose(0, -1) if len(shape) == 2
                    else rand((shape[-1],) + shape[1:-1] + (shape[0],), dtype).transpose(0, -1)))
    if len(shape) >= 1:
        big = list(shape)
        big[-1] *= 2
        out.append(("sliced", rand(tuple(big), dtype)[..., ::2]))
        one = list(shape)
        one[0] = 1
        out.append(("expanded", rand(tuple(one), dtype).expand(shape)))
    return out


def tol(dtype):
    return {F32: 2e-5, F64: 1e-10, F16: 2e-3, BF16: 2e-2}.get(dtype, 0)


def dims_arr(dims):
    dims = list(dims or [])
    return ct.i32(dims), len(dims)


def torch_or_none(fn):
    try:
        return fn()
    except (RuntimeError, IndexError, ValueError):
        return None


SHAPES = [(), (5,), (3, 4), (2, 3, 4), (0, 3), (1, 1, 5), (4, 1, 3)]


def dim_choices(shape):
    n = len(shape)
    out = [None]
    if n >= 1:
        out += [(0,), (-1,)]
    if n >= 3:
        out += [(0, 2), (1, -1)]
    return out


def tdims(dims, x):
    return tuple(range(x.dim())) if dims is None else dims


# ---------------------------------------------------------------- dim-list ops
LIST_OPS = {
    "ct_sum_dims": lambda x, d, k: torch.sum(x, tdims(d, x), keepdim=k),
    "ct_mean_dims": lambda x, d, k: torch.mean(x, tdims(d, x), keepdim=k),
    "ct_amax": lambda x, d, k: torch.amax(x, () if d is None else d, keepdim=k),  # (): all, as ndims 0
    "ct_amin": lambda x, d, k: torch.amin(x, () if d is None else d, keepdim=k),
    "ct_logsumexp": lambda x, d, k: torch.logsumexp(x, tdims(d, x), keepdim=k),
    "ct_all_dims": lambda x, d, k: torch.all(x, d[0], keepdim=k) if d and len(d) == 1 else
    (torch.all(x) if not k else torch.all(x).reshape([1] * x.dim()).to(torch.all(x).dtype)),
    "ct_any_dims": lambda x, d, k: torch.any(x, d[0], keepdim=k) if d and len(d) == 1 else
    (torch.any(x) if not k else torch.any(x).reshape([1] * x.dim()).to(torch.any(x).dtype)),
}


@pytest.mark.parametrize("name", list(LIST_OPS))
@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16, torch.int32, torch.int64, torch.uint8, torch.bool])
def test_list_ops(name, dtype):
    tfn = LIST_OPS[name]
    n_checked = 0
    for shape in SHAPES:
        for lay, x in layouts(shape, dtype):
            for dims in dim_choices(shape):
                if name in ("ct_all_dims", "ct_any_dims") and dims and len(dims) > 1:
                    continue
                for keep in (False, True):
                    want = torch_or_none(lambda: tfn(x, dims, keep))
                    if want is None and name in ("ct_amax", "ct_amin", "ct_mean_dims", "ct_sum_dims"):
                        # errors: ours must fail with torch's message
                        msg = ct.torch_error(lambda: tfn(x, dims, keep))
                        da, nd = dims_arr(dims)
                        ct.clear_error()
                        h = getattr(lib, name)(ct.from_torch(x), da, nd, keep)
                        if "not implemented" not in msg:
                            ct.assert_error(h, msg, what=f"{name} {shape} {dims}: ")
                        continue
                    if want is None:
                        continue
                    da, nd = dims_arr(dims)
                    h = ct.check(getattr(lib, name)(ct.from_torch(x), da, nd, keep))
                    t = tol(want.dtype)
                    ct.assert_close(h, want, rtol=t, atol=t, what=f"{name} {dtype} {shape} {lay} {dims} {keep}: ")
                    n_checked += 1
    if n_checked == 0 and not dtype.is_floating_point:  # torch refuses this dtype: so do we
        # (float16 computes in float32 here where torch's CPU kernels lack Half)
        x = rand((3, 4), dtype)
        da, nd = dims_arr((0,))
        ct.clear_error()
        assert getattr(lib, name)(ct.from_torch(x), da, nd, False) is None


def test_sum_dtypes():
    for dt in INTS:
        x = rand((3, 4), dt)
        ct.assert_close(ct.check(lib.ct_sum(ct.from_torch(x))), torch.sum(x))
        ct.assert_close(ct.check(lib.ct_prod(ct.from_torch(x))), torch.prod(x))
    x = rand((3, 4), torch.int64)
    ct.assert_error(lib.ct_mean(ct.from_torch(x)), ct.torch_error(lambda: torch.mean(x)))


def test_sum_large_accuracy():
    x = torch.rand(1 << 24, generator=GEN)
    h = ct.from_torch(x)
    want = torch.sum(x.double()).float()
    ct.assert_close(ct.check(lib.ct_sum(h)), torch.sum(x), rtol=1e-5, atol=0)
    ct.assert_close(ct.check(lib.ct_sum(h)), want, rtol=1e-6, atol=0)
    m = x.view(4096, 4096)
    hm = ct.from_torch(m)
    for d in (0, 1):
        da, nd = dims_arr((d,))
        ct.assert_close(ct.check(lib.ct_sum_dims(hm, da, nd, False)), m.sum(d), rtol=1e-5, atol=1e-5)
        ct.assert_close(ct.check(lib.ct_mean_dims(hm, da, nd, False)), m.mean(d), rtol=1e-5, atol=1e-5)
    y = torch.randn(1 << 22, generator=GEN)
    ct.assert_close(ct.check(lib.ct_mean(ct.from_torch(y))), y.double().mean().float(), rtol=1e-5, atol=1e-7)


def test_all_reduce_ops():
    for dt in FLOATS + INTS:
        for shape in [(), (7,), (3, 5), (2, 3, 4)]:
            for lay, x in layouts(shape, dt):
                h = ct.from_torch(x)
                for name, tfn in [("ct_sum", torch.sum), ("ct_max", torch.max), ("ct_min", torch.min),
                                  ("ct_all", torch.all), ("ct_any", torch.any), ("ct_prod", torch.prod),
                                  ("ct_mean", torch.mean)]:
                    want = torch_or_none(lambda: tfn(x))
                    if want is None:
                        continue
                    t = tol(want.dtype)
                    ct.assert_close(ct.check(getattr(lib, name)(h)), want, rtol=t, atol=t,
                                    what=f"{name} {dt} {shape} {lay}: ")


def test_prod_dim():
    for dt in [F32, F64, torch.int32, torch.bool]:
        for shape in [(3, 4), (2, 3, 4), (5,), ()]:
            for lay, x in layouts(shape, dt):
                for d in range(-max(len(shape), 1), max(len(shape), 1)):
                    for k in (False, True):
                        want = torch.prod(x, d, keepdim=k)
                        ct.assert_close(ct.check(lib.ct_prod_dim(ct.from_torch(x), d, k)), want,
                                        rtol=tol(want.dtype), atol=tol(want.dtype))


def minmax_dim(name, h, d, k):
    v, i = c_void_p(), c_void_p()
    rc = getattr(lib, name)(h, d, k, ctypes.byref(v), ctypes.byref(i))
    ct.check_int(rc)
    return v.value, i.value


def test_max_min_dim_argmax():
    for dt in [F32, F64, F16, torch.int32, torch.int64, torch.uint8]:
        for shape in [(3, 4), (2, 3, 4), (6,), (), (4, 0)]:
            for lay, x in layouts(shape, dt):
                if dt.is_floating_point and x.numel():
                    x = x.clone()
                    x[(0,) * x.dim()] = x[(-1,) * x.dim()]  # ties
                h = ct.from_torch(x)
                for d in range(-max(len(shape), 1), max(len(shape), 1)):
                    for k in (False, True):
                        for name, tfn in [("ct_max_dim", torch.max), ("ct_min_dim", torch.min)]:
                            msg = ct.torch_error(lambda: tfn(x, d, keepdim=k))
                            if msg is not None:
                                ct.clear_error()
                                ct.assert_error(getattr(lib, name)(h, d, k, ctypes.byref(c_void_p()),
                                                                   ctypes.byref(c_void_p())), msg)
                                continue
                            wv, wi = tfn(x, d, keepdim=k)
                            v, i = minmax_dim(name, h, d, k)
                            ct.assert_close(v, wv, what=f"{name} {dt} {shape} {lay} {d} {k}: ")
                            ct.assert_close(i, wi, what=f"{name} idx {dt} {shape} {lay} {d} {k}: ")
                        for name, tfn in [("ct_argmax", torch.argmax), ("ct_argmin", torch.argmin)]:
                            msg = ct.torch_error(lambda: tfn(x, d, keepdim=k))
                            if msg is not None:
                                ct.clear_error()
                                ct.assert_error(getattr(lib, name)(h, True, d, k), msg)
                                continue
                            ct.assert_close(ct.check(getattr(lib, name)(h, True, d, k)), tfn(x, d, keepdim=k))
                for name, tfn in [("ct_argmax", torch.argmax), ("ct_argmin", torch.argmin)]:
                    for k in (False, True):
                        msg = ct.torch_error(lambda: tfn(x, keepdim=k))
                        if msg is not None:
                            ct.clear_error()
                            ct.assert_error(getattr(lib, name)(h, False, 0, k), msg)
                            continue
                        ct.assert_close(ct.check(getattr(lib, name)(h, False, 0, k)), tfn(x, keepdim=k))


def test_nan_inf():
    x = torch.tensor([[1.0, float("nan"), 3.0, float("inf")], [-float("inf"), 2.0, 0.0, 5.0],
                      [float("inf"), float("inf"), 1.0, 1.0]])
    h = ct.from_torch(x)
    for name, tfn in [("ct_sum_dims", torch.sum), ("ct_amax", torch.amax), ("ct_amin", torch.amin),
                      ("ct_logsumexp", torch.logsumexp), ("ct_mean_dims", torch.mean)]:
        for d in (0, 1):
            da, nd = dims_arr((d,))
            ct.assert_close(ct.check(getattr(lib, name)(h, da, nd, False)), tfn(x, d), rtol=1e-6, atol=1e-6,
                            what=f"{name} {d}: ")
    for d in (0, 1):
        v, i = minmax_dim("ct_max_dim", h, d, False)
        wv, wi = torch.max(x, d)
        ct.assert_close(v, wv)
        ct.assert_close(i, wi)
        ct.assert_close(ct.check(lib.ct_argmin(h, True, d, False)), torch.argmin(x, d))
        ct.assert_close(ct.check(lib.ct_softmax(h, d)), torch.softmax(x, d), rtol=1e-6, atol=1e-6)
        ct.assert_close(ct.check(lib.ct_log_softmax(h, d)), torch.log_softmax(x, d), rtol=1e-6, atol=1e-6)
        ct.assert_close(ct.check(lib.ct_cumsum(h, d)), torch.cumsum(x, d))
        for p in (2.0, 1.0, float("inf"), -float("inf"), 0.0, 3.0):
            da, nd = dims_arr((d,))
            ct.assert_close(ct.check(lib.ct_norm(h, p, da, nd, False)), torch.linalg.vector_norm(x, p, d),
                            rtol=1e-6, atol=1e-6, what=f"norm {p}: ")
    ct.assert_close(ct.check(lib.ct_max(h)), torch.max(x))
    ct.assert_close(ct.check(lib.ct_argmax(h, False, 0, False)), torch.argmax(x))


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16])
def test_var_std_norm(dtype):
    for shape in [(5,), (3, 4), (2, 3, 4), (1,), ()]:
        for lay, x in layouts(shape, dtype):
            h = ct.from_torch(x)
            for dims in dim_choices(shape):
                da, nd = dims_arr(dims)
                for k in (False, True):
                    for corr in (0.0, 1.0, 2.0):
                        for name, tfn in [("ct_var", torch.var), ("ct_std", torch.std)]:
                            want = torch_or_none(lambda: tfn(x, dim=tdims(dims, x), correction=int(corr),
                                                             keepdim=k))
                            if want is None:
                                continue
                            t = tol(dtype) * 10
                            ct.assert_close(ct.check(getattr(lib, name)(h, da, nd, corr, k)), want, rtol=t,
                                            atol=t, what=f"{name} {dtype} {shape} {lay} {dims} {corr}: ")
                    for p in (2.0, 1.0, float("inf"), 0.0, 3.0, 0.5):
                        want = torch_or_none(lambda: torch.linalg.vector_norm(x, p, tdims(dims, x), keepdim=k))
                        if want is None:
                            continue
                        t = tol(dtype) * 10
                        ct.assert_close(ct.check(lib.ct_norm(h, p, da, nd, k)), want, rtol=t, atol=t,
                                        what=f"norm {p} {dtype} {shape} {lay} {dims}: ")


def test_norm_of_empty_dims():
    """torch.norm of an empty dim is 0 for every p, +-inf included (min |x| and
    max |x| of nothing); ct_norm mirrors torch.norm, on CPU and meta alike."""
    for shape, dims in [((2, 0), (1,)), ((0, 3), (0,)), ((0,), ()), ((2, 0, 3), (1, 2))]:
        x = torch.zeros(shape, dtype=F32)
        da, nd = dims_arr(dims)
        for p in (float("inf"), float("-inf"), 2.0, 1.0, 0.0):
            for k in (False, True):
                want = torch.norm(x, p=p, dim=list(dims), keepdim=k) if dims else torch.norm(x, p=p)
                if not dims and k:
                    continue
                got = ct.check(lib.ct_norm(ct.from_torch(x), p, da, nd, k))
                ct.assert_close(got, want, what=f"norm {p} of {shape} over {dims}: ")
                meta = ct.check(lib.ct_empty_on(ct.i64(shape), len(shape), ct.CT_FLOAT32, ct.CT_META))
                assert tuple(ct.shape(ct.check(lib.ct_norm(meta, p, da, nd, k)))) == tuple(want.shape)


def test_var_errors():
    x = rand((3,), torch.int64)
    ct.assert_error(lib.ct_var(ct.from_torch(x), None, 0, 1.0, False), ct.torch_error(lambda: torch.var(x)))
    ct.assert_error(lib.ct_std(ct.from_torch(x), None, 0, 1.0, False), ct.torch_error(lambda: torch.std(x)))
    x = rand((3,), torch.int32)
    ct.assert_error(lib.ct_norm(ct.from_torch(x), 2.0, None, 0, False), ct.torch_error(lambda: torch.norm(x)))


@pytest.mark.parametrize("dtype", [F32, F64, torch.int32, torch.int64, torch.bool, BF16])
def test_scans(dtype):
    for shape in [(5,), (3, 4), (2, 3, 4), (), (0, 3), (19, 33), (2, 9, 70)]:  # rows 8 at a time, and the rest
        for lay, x in layouts(shape, dtype):
            if dtype.is_floating_point:
                x = (x * 0.5 + 1).to(dtype)
            h = ct.from_torch(x)
            for d in range(-max(len(shape), 1), max(len(shape), 1)):
                for name, tfn in [("ct_cumsum", torch.cumsum), ("ct_cumprod", torch.cumprod)]:
                    want = torch_or_none(lambda: tfn(x, d))
                    if want is None:
                        continue
                    t = tol(dtype) * 10
                    ct.assert_close(ct.check(getattr(lib, name)(h, d)), want, rtol=t, atol=t,
                                    what=f"{name} {dtype} {shape} {lay} {d}: ")


@pytest.mark.parametrize("dtype", [F32, F64, BF16])
def test_softmax(dtype):
    for shape in [(5,), (3, 4), (2, 3, 4), (), (0, 3), (2, 1030), (3, 40, 5)]:
        for lay, x in layouts(shape, dtype):
            x = (x.double() * 4).to(dtype)
            h = ct.from_torch(x)
            for d in range(-max(len(shape), 1), max(len(shape), 1)):
                for name, tfn in [("ct_softmax", torch.softmax), ("ct_log_softmax", torch.log_softmax)]:
                    want = tfn(x, d)
                    t = tol(dtype) * 5
                    got = ct.check(getattr(lib, name)(h, d))
                    ct.assert_close(got, want, rtol=t, atol=t, what=f"{name} {dtype} {shape} {lay} {d}: ")
    x = rand((3,), torch.int64)
    ct.assert_error(lib.ct_softmax(ct.from_torch(x), 0), ct.torch_error(lambda: torch.softmax(x, 0)))


def test_softmax_big_rows():
    x = torch.randn(64, 1024, generator=GEN) * 10
    h = ct.from_torch(x)
    ct.assert_close(ct.check(lib.ct_softmax(h, 1)), torch.softmax(x, 1), rtol=1e-5, atol=1e-6)
    ct.assert_close(ct.check(lib.ct_log_softmax(h, 1)), torch.log_softmax(x, 1), rtol=1e-5, atol=1e-5)
    ct.assert_close(ct.check(lib.ct_softmax(h, 0)), torch.softmax(x, 0), rtol=1e-5, atol=1e-6)


def test_errors():
    x = torch.zeros(2, 3)
    h = ct.from_torch(x)
    da, nd = dims_arr((5,))
    ct.assert_error(lib.ct_sum_dims(h, da, nd, False), ct.torch_error(lambda: x.sum(5)))
    da, nd = dims_arr((0, -2))
    ct.assert_error(lib.ct_sum_dims(h, da, nd, False), ct.torch_error(lambda: x.sum((0, -2))))
    ct.assert_error(lib.ct_softmax(h, 2), ct.torch_error(lambda: x.softmax(2)))
    ct.assert_error(lib.ct_cumsum(h, -3), ct.torch_error(lambda: x.cumsum(-3)))
    e = torch.zeros(0, 3)
    he = ct.from_torch(e)
    ct.assert_error(lib.ct_max(he), ct.torch_error(lambda: e.max()))
    ct.assert_error(lib.ct_min(he), ct.torch_error(lambda: e.min()))
    ct.assert_error(lib.ct_argmax(he, False, 0, False), ct.torch_error(lambda: e.argmax()))
    da, nd = dims_arr((0,))
    ct.assert_error(lib.ct_amin(he, da, nd, False), ct.torch_error(lambda: e.amin(0)))
    ct.clear_error()
    assert lib.ct_sum(None) is None
    assert lib.ct_softmax(None, 0) is None


# ---------------------------------------------------------------- meta
def meta(t):
    return ct.check(lib.ct_empty_on(ct.i64(t.shape), t.dim(), ct.ct_dtype_of_torch(t.dtype), ct.CT_META))


def test_meta_shapes():
    for shape in [(2, 3, 4), (5,), (), (0, 3)]:
        x = torch.zeros(shape)
        hm = meta(x)
        for dims in dim_choices(shape):
            da, nd = dims_arr(dims)
            for k in (False, True):
                h = ct.check(lib.ct_sum_dims(hm, da, nd, k))
                assert lib.ct_device_of(h) == ct.CT_META
                assert ct.shape(h) == tuple(torch.sum(x, tdims(dims, x), keepdim=k).shape)
                h = ct.check(lib.ct_var(hm, da, nd, 1.0, k))
                assert ct.shape(h) == tuple(torch.var(x, tdims(dims, x), keepdim=k).shape)
                h = ct.check(lib.ct_logsumexp(hm, da, nd, k))
                assert ct.shape(h) == tuple(torch.logsumexp(x, tdims(dims, x), keepdim=k).shape)
        for d in range(-max(len(shape), 1), max(len(shape), 1)):
            assert ct.shape(ct.check(lib.ct_softmax(hm, d))) == tuple(shape)
            assert ct.shape(ct.check(lib.ct_cumsum(hm, d))) == tuple(shape)
            if x.numel():
                v, i = minmax_dim("ct_max_dim", hm, d, False)
                assert ct.shape(v) == tuple(torch.max(x, d).values.shape)
                assert ct.dtype(i) == ct.CT_INT64
    da, nd = dims_arr((4,))
    ct.assert_error(lib.ct_sum_dims(meta(torch.zeros(2, 3)), da, nd, False),
                    ct.torch_error(lambda: torch.zeros(2, 3).sum(4)))


# ---------------------------------------------------------------- gradients


def check_grad(cfn, tfn, x, second=True, what="", rtol=1e-9):
    """forward, gradient and (optionally) second-order gradient vs torch, float64"""
    h = leaf(x)
    tx = x.detach().clone().requires_grad_(True)
    out = tfn(tx)
    ho = cfn(h)
    ct.assert_close(ho, out.detach(), rtol=rtol, atol=rtol, what=f"{what} forward: ")
    g = torch.randn(out.shape, generator=GEN, dtype=out.dtype)
    (tg,) = torch.autograd.grad(out, [tx], g, create_graph=True)
    cg = grads_of(ho, h, g)
    assert cg, f"{what}: no gradient"
    ct.assert_close(cg, tg.detach(), rtol=rtol, atol=rtol, what=f"{what} grad: ")
    if second and tg.requires_grad:
        v = torch.randn(tg.shape, generator=GEN, dtype=tg.dtype)
        (tgg,) = torch.autograd.grad(tg, [tx], v, allow_unused=True)
        cgg = grads_of(cg, h, v)
        if tgg is None or not cgg:
            assert tgg is None or float(tgg.abs().max()) == 0
            return
        ct.assert_close(cgg, tgg, rtol=rtol, atol=rtol, what=f"{what} grad2: ")


def L(name, dims, keep, *extra):
    da, nd = dims_arr(dims)
    if name in ("ct_var", "ct_std"):
        return lambda h: ct.check(getattr(lib, name)(h, da, nd, extra[0], keep))
    if name == "ct_norm":
        return lambda h: ct.check(lib.ct_norm(h, extra[0], da, nd, keep))
    return lambda h: ct.check(getattr(lib, name)(h, da, nd, keep))


GRAD_SHAPES = [(3, 4), (2, 3, 4), (5,)]


def grad_inputs(shape):
    x = torch.randn(shape, generator=GEN, dtype=F64)
    yield "contig", x
    if len(shape) >= 2:
        yield "transposed", torch.randn(shape[::-1], generator=GEN, dtype=F64).transpose(0, -1) \
            if len(shape) == 2 else x.transpose(0, 1).contiguous().transpose(0, 1)
    big = list(shape)
    big[-1] *= 2
    yield "sliced", torch.randn(big, generator=GEN, dtype=F64)[..., ::2]


def test_grads_list_ops():
    for shape in GRAD_SHAPES:
        for lay, x in grad_inputs(shape):
            for dims in dim_choices(shape):
                for k in (False, True):
                    td = tdims(dims, x)
                    w = f"{shape} {lay} {dims} {k}"
                    check_grad(L("ct_sum_dims", dims, k), lambda t: t.sum(td, keepdim=k), x, what="sum " + w)
                    check_grad(L("ct_mean_dims", dims, k), lambda t: t.mean(td, keepdim=k), x, what="mean " + w)
                    check_grad(L("ct_logsumexp", dims, k), lambda t: t.logsumexp(td, keepdim=k), x,
                               what="lse " + w)
                    check_grad(L("ct_amax", dims, k), lambda t: t.amax(td, keepdim=k), x, what="amax " + w)
                    check_grad(L("ct_amin", dims, k), lambda t: t.amin(td, keepdim=k), x, what="amin " + w)
                    for corr in (0.0, 1.0):
                        check_grad(L("ct_var", dims, k, corr), lambda t: t.var(td, correction=int(corr),
                                                                              keepdim=k), x, what="var " + w)
                        check_grad(L("ct_std", dims, k, corr), lambda t: t.std(td, correction=int(corr),
                                                                              keepdim=k), x, what="std " + w)
                    for p in (2.0, 1.0, float("inf"), 3.0, 1.5, 0.5):
                        check_grad(L("ct_norm", dims, k, p),
                                   lambda t: torch.linalg.vector_norm(t, p, td, keepdim=k), x,
                                   second=p != float("inf"), what=f"norm {p} " + w)


def test_dim_list_errors_in_torchs_order():
    """torch wraps every dim of a list before looking for repeats (sum, mean,
    logsumexp, Tensor.norm, amax); var and std take the dims one after another"""
    x = torch.randn(2, 3, generator=GEN)
    for dims in ([0, 0, 5], [1, -1, 2], [5, 0, 0], [0, -2], [-3, 1, 1]):
        da, nd = dims_arr(dims)
        cases = [("sum", lambda h: lib.ct_sum_dims(h, da, nd, False), lambda: x.sum(dims)),
                 ("mean", lambda h: lib.ct_mean_dims(h, da, nd, False), lambda: x.mean(dims)),
                 ("logsumexp", lambda h: lib.ct_logsumexp(h, da, nd, False), lambda: x.logsumexp(dims)),
                 ("norm", lambda h: lib.ct_norm(h, 2.0, da, nd, False), lambda: x.norm(2, dims)),  # not
                 # linalg.vector_norm's order: one dim after another
                 ("amax", lambda h: lib.ct_amax(h, da, nd, False), lambda: x.amax(dims)),
                 ("var", lambda h: lib.ct_var(h, da, nd, 1.0, False), lambda: x.var(dims)),
                 ("std", lambda h: lib.ct_std(h, da, nd, 1.0, False), lambda: x.std(dims))]
        for name, cfn, tfn in cases:
            ct.assert_same_outcome(lambda: cfn(ct.from_torch(x)), tfn, f"{name}({dims}): ",
                                   compare=lambda got, want: ct.assert_close(got, want))


@pytest.mark.parametrize("vals", [[0.0, 0.0, float("inf")], [0.0, 0.0, float("nan")], [0.0, 0.0, 3.0],
                                  [[0.0, 1.0], [-2.0, float("nan")]], [[0.0, float("inf")], [0.0, 2.0]],
                                  [0.0, float("nan")], [2.0, 0.0, -1.5]], ids=str)
def test_prod_gradients_with_zeros_and_non_finite_values(vals):
    """torch 1.13's prod_backward: two or more zeros in the whole tensor give zeros
    at once (ctorch: without create_graph; with it, the product of the others, whose
    second derivative is right where torch's has no graph); otherwise the product of
    the others, its exclusive cumprods narrowed before they multiply up, which the
    second derivative sees, along one dim or all elements"""
    x = torch.tensor(vals, dtype=F64)
    dims = [None] + list(range(x.dim()))
    for d in dims:
        tf = (lambda t: t.prod()) if d is None else (lambda t: t.prod(d))
        cf = (lambda h: ct.check(lib.ct_prod(h))) if d is None else (lambda h: ct.check(lib.ct_prod_dim(h, d, False)))
        tx = x.clone().requires_grad_()
        out = tf(tx)
        g = torch.randn(out.shape, generator=GEN, dtype=F64)
        (want,) = torch.autograd.grad(out, [tx], g)
        hx = leaf(x)
        got = grads_of(cf(hx), hx, g, create_graph=False)
        ct.assert_close(got, want, rtol=1e-12, atol=1e-12, what=f"prod {d} grad: ")
        two_zeros = int((x == 0).sum()) >= 2
        if d is not None or not two_zeros:  # torch 1.13 returns those zeros under create_graph too
            # (no graph); a line of two zeros and an inf / NaN: 0 * inf in the Hessian, left
            check_grad(cf, tf, x, what=f"prod {d} {vals}", rtol=1e-12,
                       second=not (two_zeros and not bool(x.isfinite().all())))


def test_grads_var_of_a_scalar():
    """torch 1.13's var_backward of a 0-dim tensor with as many elements as the
    correction is inf * grad (2 / 0, without the 0 of self - mean); std's is NaN."""
    x = torch.tensor(3.0, dtype=F64)
    for dims in ((), (0,)):
        for k in (False, True):
            for corr in (0.0, 1.0, 2.0):
                td = tdims(dims, x)
                check_grad(L("ct_var", dims, k, corr), lambda t: t.var(td, correction=int(corr), keepdim=k), x,
                           second=False, what=f"var0 {dims} {k} {corr}")
                check_grad(L("ct_std", dims, k, corr), lambda t: t.std(td, correction=int(corr), keepdim=k), x,
                           second=False, what=f"std0 {dims} {k} {corr}")


def test_grads_ties_and_zeros():
    x = torch.tensor([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 2.0], [0.0, 5.0, -5.0, 1.0]], dtype=F64)
    check_grad(lambda h: ct.check(lib.ct_max(h)), torch.max, x, what="max ties")
    check_grad(lambda h: ct.check(lib.ct_min(h)), torch.min, x, what="min ties")
    for d in (0, 1):
        check_grad(L("ct_amax", (d,), False), lambda t: t.amax(d), x, what="amax ties")
        check_grad(L("ct_norm", (d,), False, float("inf")), lambda t: torch.linalg.vector_norm(t, float("inf"), d),
                   x, second=False, what="norm inf ties")
        check_grad(L("ct_norm", (d,), False, 2.0), lambda t: torch.linalg.vector_norm(t, 2, d), x, what="norm0")
        for name, tfn in [("ct_max_dim", torch.max), ("ct_min_dim", torch.min)]:
            for k in (False, True):
                check_grad(lambda h: minmax_dim(name, h, d, k)[0], lambda t: tfn(t, d, keepdim=k).values, x,
                           what=f"{name} {d} {k}")
    z = torch.tensor([[1.0, 0.0, 3.0, 2.0], [2.0, 2.0, 0.5, 2.0], [0.0, 5.0, 0.0, 1.0]], dtype=F64)
    check_grad(lambda h: ct.check(lib.ct_prod(h)), torch.prod, z, what="prod zeros")
    check_grad(lambda h: ct.check(lib.ct_prod(h)), torch.prod, z[1:2], what="prod one zero")
    check_grad(lambda h: ct.check(lib.ct_prod(h)), torch.prod, x[1:2] + 0.5, what="prod")
    for d in (0, 1, -1):
        for k in (False, True):
            check_grad(lambda h: ct.check(lib.ct_prod_dim(h, d, k)), lambda t: t.prod(d, keepdim=k), z,
                       what=f"prod_dim zeros {d}")
            check_grad(lambda h: ct.check(lib.ct_prod_dim(h, d, k)), lambda t: t.prod(d, keepdim=k), x + 7,
                       what=f"prod_dim {d}")
        check_grad(lambda h: ct.check(lib.ct_cumprod(h, d)), lambda t: t.cumprod(d), z,
                   what=f"cumprod zeros {d}")
    zz = torch.tensor([0.0, 2.0, 0.0, 3.0, 4.0], dtype=F64)
    check_grad(lambda h: ct.check(lib.ct_cumprod(h, 0)), lambda t: t.cumprod(0), zz, what="cumprod two zeros")
    check_grad(lambda h: ct.check(lib.ct_prod(h)), torch.prod, zz, what="prod two zeros")
    check_grad(lambda h: ct.check(lib.ct_std(h, None, 0, 1.0, False)), torch.std,
               torch.ones(4, dtype=F64), second=False, what="std of constant")


def test_grads_scans_softmax():
    for shape in GRAD_SHAPES + [(7, 130), (13, 20)]:
        for lay, x in grad_inputs(shape):
            for d in range(-len(shape), len(shape)):
                w = f"{shape} {lay} {d}"
                check_grad(lambda h: ct.check(lib.ct_cumsum(h, d)), lambda t: t.cumsum(d), x, what="cumsum " + w)
                check_grad(lambda h: ct.check(lib.ct_cumprod(h, d)), lambda t: t.cumprod(d), x,
                           what="cumprod " + w, rtol=1e-8)
                check_grad(lambda h: ct.check(lib.ct_softmax(h, d)), lambda t: t.softmax(d), x,
                           what="softmax " + w)
                check_grad(lambda h: ct.check(lib.ct_log_softmax(h, d)), lambda t: t.log_softmax(d), x,
                           what="log_softmax " + w)


def test_grads_all_reduce_and_float32():
    x = torch.randn(3, 4, generator=GEN, dtype=F64)
    check_grad(lambda h: ct.check(lib.ct_sum(h)), torch.sum, x, what="sum")
    check_grad(lambda h: ct.check(lib.ct_mean(h)), torch.mean, x, what="mean")
    x32 = torch.randn(4, 5, generator=GEN)
    for name, tfn in [("ct_softmax", torch.softmax), ("ct_log_softmax", torch.log_softmax)]:
        check_grad(lambda h: ct.check(getattr(lib, name)(h, 1)), lambda t: tfn(t, 1), x32, rtol=1e-5,
                   what=name + " f32")
    s = torch.tensor(2.5, dtype=F64)
    check_grad(lambda h: ct.check(lib.ct_sum(h)), torch.sum, s, what="sum 0-dim")
    check_grad(lambda h: ct.check(lib.ct_softmax(h, 0)), lambda t: t.softmax(0), s, what="softmax 0-dim")


def test_grad_fn_names():
    x = torch.randn(3, 4, generator=GEN, dtype=F64)
    h = leaf(x)
    da, nd = dims_arr((0,))
    cases = [(lib.ct_sum(h), x.requires_grad_(True).sum()), (lib.ct_sum_dims(h, da, nd, False), x.sum(0)),
             (lib.ct_mean(h), x.mean()), (lib.ct_mean_dims(h, da, nd, False), x.mean(0)),
             (lib.ct_prod(h), x.prod()), (lib.ct_prod_dim(h, 0, False), x.prod(0)),
             (lib.ct_max(h), x.max()), (lib.ct_min(h), x.min()),
             (lib.ct_amax(h, da, nd, False), x.amax(0)), (lib.ct_amin(h, da, nd, False), x.amin(0)),
             (lib.ct_logsumexp(h, da, nd, False), x.logsumexp(0)), (lib.ct_cumsum(h, 0), x.cumsum(0)),
             (lib.ct_cumprod(h, 0), x.cumprod(0)), (lib.ct_softmax(h, 0), x.softmax(0)),
             (lib.ct_log_softmax(h, 0), x.log_softmax(0)),
             (lib.ct_var(h, da, nd, 1.0, False), x.var(0)), (lib.ct_std(h, da, nd, 1.0, False), x.std(0)),
             (minmax_dim("ct_max_dim", h, 0, False)[0], x.max(0).values)]
    for hc, t in cases:
        assert lib.ct_grad_fn_name(hc).decode() == type(t.grad_fn).__name__


ct.declare("ct_mul", T, [CT, CT])


def test_sum_to_size_through_broadcast_grads():
    """fwd_sum_to_size (the engine's broadcast undo) runs on the reduction engine"""
    for sa, sb in [((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5,), ()), ((1, 1), (2, 3, 1))]:
        a = torch.randn(sa, generator=GEN, dtype=F64)
        b = torch.randn(sb, generator=GEN, dtype=F64)
        ha, hb = leaf(a), leaf(b)
        ta, tb = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
        out = ta * tb
        g = torch.randn(out.shape, generator=GEN, dtype=F64)
        wa, wb = torch.autograd.grad(out, [ta, tb], g)
        ho = ct.check(lib.ct_mul(ha, hb))
        outs = (c_void_p * 1)(ho)
        gos = (c_void_p * 1)(ct.from_torch(g))
        ins = (c_void_p * 2)(ha, hb)
        res = (c_void_p * 2)()
        ct.check_int(lib.ct_autograd_grad(outs, gos, 1, ins, 2, res, True, False, False))
        ct.assert_close(res[0], wa, rtol=1e-12, atol=1e-12, what=f"{sa} {sb} grad a: ")
        ct.assert_close(res[1], wb, rtol=1e-12, atol=1e-12, what=f"{sa} {sb} grad b: ")
