"""Parity of the shape-and-indexing family (cat stack index_select index_add gather
scatter scatter_add index index_put masked_select masked_fill nonzero take flip roll
repeat tile tril triu pad sort argsort topk one_hot embedding where clamp lerp addcmul
addcdiv) with PyTorch: values for several dtypes and layouts (contiguous, transposed,
sliced, expanded), 0-dim and empty tensors, NaN, PyTorch's error messages,
out-of-range indices, meta-device shapes, and gradients (float64) against torch's."""
import ctypes
import math
import warnings

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import CT, I64P, INTP, T, TP, c_bool, c_double, c_int, c_int64, lib  # noqa: E402

F = torch.nn.functional
SIGS = [
    ("ct_cat", T, [TP, c_int, c_int]),
    ("ct_stack", T, [TP, c_int, c_int]),
    ("ct_index_select", T, [CT, c_int, CT]),
    ("ct_index_add", T, [CT, c_int, CT, CT, c_double]),
    ("ct_gather", T, [CT, c_int, CT]),
    ("ct_scatter", T, [CT, c_int, CT, CT]),
    ("ct_scatter_value", T, [CT, c_int, CT, c_double]),
    ("ct_scatter_add", T, [CT, c_int, CT, CT]),
    ("ct_scatter_", c_int, [T, c_int, CT, CT]),
    ("ct_scatter_value_", c_int, [T, c_int, CT, c_double]),
    ("ct_scatter_add_", c_int, [T, c_int, CT, CT]),
    ("ct_index", T, [CT, TP, c_int]),
    ("ct_index_put", T, [CT, TP, c_int, CT, c_bool]),
    ("ct_index_put_", c_int, [T, TP, c_int, CT, c_bool]),
    ("ct_masked_select", T, [CT, CT]),
    ("ct_masked_fill", T, [CT, CT, c_double]),
    ("ct_masked_fill_", c_int, [T, CT, c_double]),
    ("ct_masked_scatter", T, [CT, CT, CT]),
    ("ct_masked_scatter_", c_int, [T, CT, CT]),
    ("ct_nonzero", T, [CT]),
    ("ct_take", T, [CT, CT]),
    ("ct_flip", T, [CT, INTP, c_int]),
    ("ct_roll", T, [CT, I64P, c_int, INTP, c_int]),
    ("ct_repeat", T, [CT, I64P, c_int]),
    ("ct_tile", T, [CT, I64P, c_int]),
    ("ct_tril", T, [CT, c_int64]),
    ("ct_triu", T, [CT, c_int64]),
    ("ct_pad", T, [CT, I64P, c_int, c_double]),
    ("ct_sort", c_int, [CT, c_int, c_bool, c_bool, TP, TP]),
    ("ct_argsort", T, [CT, c_int, c_bool, c_bool]),
    ("ct_topk", c_int, [CT, c_int64, c_int, c_bool, c_bool, TP, TP]),
    ("ct_one_hot", T, [CT, c_int64]),
    ("ct_embedding", T, [CT, CT, c_int64]),
    ("ct_where", T, [CT, CT, CT]),
    ("ct_clamp", T, [CT, c_double, c_double]),
    ("ct_clamp_", c_int, [T, c_double, c_double]),
    ("ct_clamp_tensor", T, [CT, CT, CT]),
    ("ct_lerp", T, [CT, CT, CT]),
    ("ct_lerp_scalar", T, [CT, CT, c_double]),
    ("ct_addcmul", T, [CT, CT, CT, c_double]),
    ("ct_addcdiv", T, [CT, CT, CT, c_double]),
    ("ct_set_requires_grad", c_int, [T, c_bool]),
    ("ct_requires_grad", c_bool, [CT]),
    ("ct_backward", c_int, [T, CT]),
    ("ct_grad", T, [CT]),
    ("ct_grad_fn_name", ctypes.c_char_p, [CT]),
    ("ct_empty_on", T, [I64P, c_int, c_int, c_int]),
]
for _row in SIGS:
    ct.declare(*_row)

pytestmark = ct.requires("ct_cat", "ct_index", "ct_where", "ct_from_data", "ct_as_strided")

GEN = torch.Generator().manual_seed(1234)
NUMERIC = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
           torch.int8, torch.uint8, torch.bool]
FLOATS = [torch.float32, torch.float64, torch.bfloat16]
LAYOUTS = ["contig", "transposed", "sliced", "expanded"]
HAS_GRAD = ct.has("ct_set_requires_grad", "ct_backward", "ct_grad")


# ------------------------------------------------------------------ inputs
def rand(shape, dtype=torch.float64):
    if dtype.is_floating_point:
        return torch.randn(shape, generator=GEN, dtype=torch.float64).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=GEN).bool()
    lo = 0 if dtype == torch.uint8 else -4
    return torch.randint(lo, 5, shape, generator=GEN, dtype=torch.int64).to(dtype)


def make(shape, dtype=torch.float64, layout="contig"):
    shape = tuple(shape)
    if layout == "transposed" and len(shape) >= 2:
        return rand(shape[:-2] + (shape[-1], shape[-2]), dtype).transpose(-1, -2)
    if layout == "sliced" and len(shape) >= 1:
        return rand(shape[:-1] + (shape[-1] * 2,), dtype)[..., ::2]
    if layout == "expanded" and len(shape) >= 1:
        return rand((1,) + shape[1:], dtype).expand(shape)
    return rand(shape, dtype)


def h(t):
    """ctorch copy of t with t's layout (None stays None)."""
    return None if t is None else ct.from_torch(t)


def arr(hs):
    return (ctypes.c_void_p * max(len(hs), 1))(*hs)


def close(hout, want, what="", tol=None):
    if tol is None:
        tol = 1e-2 if want.dtype in (torch.float16, torch.bfloat16) else (1e-5 if want.dtype == torch.float32 else 1e-12)
    ct.assert_close(ct.check(hout), want, rtol=tol, atol=tol, what=what)


def ref16(fn, *ts):
    """torch's result, float16 computed in float32 (torch 1.13 CPU lacks some half kernels)."""
    if any(isinstance(t, torch.Tensor) and t.dtype == torch.float16 for t in ts):
        r = fn(*[t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.float16 else t for t in ts])
        return r.half() if r.dtype == torch.float32 else r
    return fn(*ts)


def expect_error(result, fn, what=""):
    msg = ct.torch_error(fn)
    assert msg is not None, f"{what}: torch does not fail"
    ct.assert_error(result, msg, what)
    ct.clear_error()


def grad_check(ct_fn, torch_fn, inputs, diff, what="", tol=1e-10, name=None):
    """Values and gradients of inputs[k] for k in diff (float64) against torch."""
    if not HAS_GRAD:
        pytest.skip("autograd not exported yet")
    tin = [t.detach().clone().requires_grad_(True) if k in diff else t for k, t in enumerate(inputs)]
    out = torch_fn(*tin)
    g = torch.randn(out.shape, generator=GEN, dtype=out.dtype)
    tg = torch.autograd.grad(out, [tin[k] for k in diff], g, allow_unused=True)
    hin = [h(t) if isinstance(t, torch.Tensor) else t for t in inputs]
    for k in diff:
        ct.check_int(lib.ct_set_requires_grad(hin[k], True))
    hout = ct.check(ct_fn(*hin))
    close(hout, out.detach(), what, tol)
    if name:
        got = lib.ct_grad_fn_name(hout)
        assert got is not None and got.decode() == name, f"{what}grad_fn {got} != {name}"
    ct.check_int(lib.ct_backward(hout, h(g)))
    for k, want in zip(diff, tg):
        got = lib.ct_grad(hin[k])
        if want is None:
            want = torch.zeros_like(inputs[k])
        assert got, f"{what}no gradient for input {k}"
        close(got, want, f"{what}grad {k}: ", tol)


def meta(shape, dtype):
    return ct.check(lib.ct_empty_on(ct.i64(shape), len(shape), ct.ct_dtype_of_torch(dtype), ct.CT_META))


def assert_meta_shape(hmeta, want_shape, what=""):
    ct.check(hmeta)
    assert ct.shape(hmeta) == tuple(want_shape), f"{what}meta shape {ct.shape(hmeta)} != {tuple(want_shape)}"
    assert lib.ct_device_of(hmeta) == ct.CT_META


# ------------------------------------------------------------------ cat / stack
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cat_values(dtype, layout):
    a, b, c = make((3, 4), dtype, layout), make((3, 2), dtype), make((3, 5), dtype, layout)
    close(lib.ct_cat(arr([h(a), h(b), h(c)]), 3, 1), torch.cat([a, b, c], 1))
    close(lib.ct_cat(arr([h(a), h(a)]), 2, -2), torch.cat([a, a], 0))
    close(lib.ct_stack(arr([h(a), h(a), h(a)]), 3, 1), torch.stack([a, a, a], 1))
    close(lib.ct_stack(arr([h(a), h(a)]), 2, -1), torch.stack([a, a], -1))


def test_cat_promotion_and_empty():
    a = rand((2, 3), torch.int32)
    b = rand((2, 3), torch.float16)
    close(lib.ct_cat(arr([h(a), h(b)]), 2, 0), torch.cat([a, b]))
    e = torch.zeros(0)
    a = rand((2, 3))
    close(lib.ct_cat(arr([h(a), h(e.double())]), 2, 0), torch.cat([a, e.double()]))
    close(lib.ct_cat(arr([h(e.double()), h(a)]), 2, 1), torch.cat([e.double(), a], 1))
    close(lib.ct_cat(arr([h(torch.zeros(0, 3)), h(torch.ones(2, 3))]), 2, 0), torch.ones(2, 3))


def test_cat_many():
    ts = [rand((2, k + 1)) for k in range(15)]
    close(lib.ct_cat(arr([h(t) for t in ts]), 15, 1), torch.cat(ts, 1))
    st = [rand((2, 3)) for _ in range(9)]
    close(lib.ct_stack(arr([h(t) for t in st]), 9, 0), torch.stack(st, 0))
    grad_check(lambda *hs: lib.ct_cat(arr(list(hs)), len(hs), 1), lambda *t: torch.cat(t, 1), ts,
               list(range(15)), "cat15: ")
    grad_check(lambda *hs: lib.ct_stack(arr(list(hs)), len(hs), 1), lambda *t: torch.stack(t, 1), st,
               list(range(9)), "stack9: ")


def test_cat_errors():
    x = rand((3, 4))
    expect_error(lib.ct_cat(arr([h(x), h(rand((3, 5)))]), 2, 0), lambda: torch.cat([x, rand((3, 5))]))
    expect_error(lib.ct_cat(arr([h(x), h(rand((3,)))]), 2, 0), lambda: torch.cat([x, rand((3,))]))
    expect_error(lib.ct_cat(arr([h(x), h(x)]), 2, 2), lambda: torch.cat([x, x], 2))
    s = torch.tensor(1.0)
    expect_error(lib.ct_cat(arr([h(s), h(s)]), 2, 0), lambda: torch.cat([s, s]))
    expect_error(lib.ct_cat(arr([]), 0, 0), lambda: torch.cat([]))
    expect_error(lib.ct_stack(arr([h(x), h(rand((3, 5)))]), 2, 0), lambda: torch.stack([x, rand((3, 5))]))
    expect_error(lib.ct_stack(arr([]), 0, 0), lambda: torch.stack([]))


def test_cat_stack_grad():
    a, b = make((3, 4), layout="transposed"), rand((3, 2))
    grad_check(lambda x, y: lib.ct_cat(arr([x, y]), 2, 1), lambda x, y: torch.cat([x, y], 1), [a, b], [0, 1],
               "cat: ", name="CatBackward0")
    grad_check(lambda x, y: lib.ct_stack(arr([x, y]), 2, 2), lambda x, y: torch.stack([x, y], 2), [a, a * 2],
               [0, 1], "stack: ", name="StackBackward0")


def test_cat_meta():
    m = lib.ct_cat(arr([meta((2, 3), torch.float32), meta((2, 5), torch.float64)]), 2, 1)
    assert_meta_shape(m, (2, 8))
    assert ct.dtype(m) == ct.CT_FLOAT64


# ------------------------------------------------------------------ index_select / index_add
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_index_select(dtype, layout):
    x = make((4, 5), dtype, layout)
    for dim in (0, 1, -1):
        for idx in (torch.tensor([3, 0, 0, 1]), torch.tensor([2], dtype=torch.int32), torch.tensor([], dtype=torch.long)):
            close(lib.ct_index_select(h(x), dim, h(idx)), torch.index_select(x, dim, idx))
    s = torch.tensor(3.0).to(dtype)
    close(lib.ct_index_select(h(s), 0, h(torch.tensor([0]))), torch.index_select(s, 0, torch.tensor([0])))


def test_index_select_errors_grad_meta():
    x = rand((3, 4))
    for bad in (torch.tensor([5]), torch.tensor([-1]), torch.tensor([[0]]), torch.tensor([0.0])):
        expect_error(lib.ct_index_select(h(x), 0, h(bad)), lambda: torch.index_select(x, 0, bad), str(bad))
    expect_error(lib.ct_index_select(h(x), 2, h(torch.tensor([0]))), lambda: torch.index_select(x, 2, torch.tensor([0])))
    idx = torch.tensor([2, 0, 2, 1])
    grad_check(lambda t, i: lib.ct_index_select(t, 1, i), lambda t, i: torch.index_select(t, 1, i),
               [make((3, 4), layout="transposed"), idx], [0], "index_select: ", name="IndexSelectBackward0")
    src = rand((4, 4))
    grad_check(lambda t, i, s: lib.ct_index_add(t, 0, i, s, 2.0), lambda t, i, s: t.index_add(0, i, s, alpha=2.0),
               [rand((3, 4)), idx, src], [0, 2], "index_add: ")
    assert_meta_shape(lib.ct_index_select(meta((3, 4), torch.float32), 1, meta((7,), torch.int64)), (3, 7))




def test_shape_only_errors_on_meta():
    """errors that depend on shapes alone are raised on the meta device too: take
    from an empty tensor, index_select along an empty dim of a 2+-dim input"""
    cases = [("take", (0, 4), torch.uint8, None, (2,)), ("take", (0,), torch.float32, None, (2, 3)),
             ("take", (0, 4), torch.float32, None, (0,)),
             ("index_select", (0, 3), torch.float16, 0, (3,)), ("index_select", (2, 0, 3), torch.float32, 1, (1,)),
             ("index_select", (0, 3), torch.float32, 0, (0,)), ("index_select", (0,), torch.float32, 0, (2,))]
    for op, ss, dt, dim, ish in cases:
        x, i = torch.zeros(ss, dtype=dt), torch.zeros(ish, dtype=torch.int64)
        args = (x, i) if op == "take" else (x, dim, i)
        err = ct.torch_error(lambda: getattr(torch, op)(*args))
        hm, im = meta(ss, dt), meta(ish, torch.int64)
        ct.clear_error()
        got = lib.ct_take(hm, im) if op == "take" else lib.ct_index_select(hm, dim, im)
        what = f"{op}{ss} {ish} on meta: "
        if err is not None and "out of" not in err:
            ct.assert_error(got, err, what=what)
        elif err is None:
            assert_meta_shape(got, getattr(torch, op)(*args).shape, what)


def test_index_select_range_errors_by_path():
    """torch 1.13's index_select words an out-of-range index by its path: along dim 1
    of 2+ dims, and for any dim of an empty input, "INDICES element is out of DATA
    bounds" naming the first bad index and the size; an empty input refuses a dim of
    size 0 before looking at the indices; elsewhere "index out of range in self". An
    empty index is never checked; the meta device checks no values (but the
    shapes, as the CPU: torch 1.13's meta kernel skips the empty dim's check)."""
    for ss in [(0,), (4,), (3, 4), (3, 0), (0, 4), (3, 4, 2), (3, 0, 2), (2, 3, 0), (0, 3, 2)]:
        for dim in range(-len(ss), len(ss)):
            for idx in ([], [0], [1, 0], [5], [-1], [1, 7, -3], [-5, 1], [2]):
                for it in (torch.int64, torch.int32):
                    x, i = torch.arange(float(math.prod(ss))).reshape(ss), torch.tensor(idx, dtype=it)
                    if len(ss) > 1:
                        x = x.transpose(0, 1).contiguous().transpose(0, 1)
                    what = f"index_select({ss}, {dim}, {idx}): "
                    err = ct.torch_error(lambda: torch.index_select(x, dim, i))
                    ct.clear_error()
                    got = lib.ct_index_select(h(x), dim, h(i))
                    if err is not None:
                        ct.assert_error(got, err, what=what)
                    else:
                        close(got, torch.index_select(x, dim, i))
                    hm = lib.ct_index_select(meta(ss, torch.float32), dim, meta(i.shape, it))
                    if err is not None and "axis dim should be positive" in err:  # shapes alone: as the CPU
                        ct.assert_error(hm, err, what=what + "meta: ")
                        continue
                    m = torch.index_select(x.to("meta"), dim, i.to("meta"))  # takes any values
                    assert_meta_shape(hm, m.shape, what)


def test_index_add_shape_rules():
    """torch's index_add: index a vector of int32/int64, one dtype, dim inside the
    source (or 0), as many indices as source.size(dim) (a 0-dim source counts 1);
    self of 0 or 1 dims takes sources of 0 or 1 dims, even with no indices. With 2
    or more dims an empty index returns self before anything else is looked at
    (any slice shape passes); otherwise the source slice broadcasts to self's (an
    in-place add), then the indices are range-checked."""
    srcs = [(0, 4), (0, 5), (2, 5), (5,), (), (0,), (1, 0), (0, 4, 2), (2, 3, 4), (2, 1), (2, 4, 1), (2, 1, 4),
            (1,), (1, 4), (2,), (7, 0, 9), (0, 1), (2, 3, 1), (1, 3, 4)]
    for ss in [(3, 4), (3,), (), (2, 3, 4), (0, 3)]:
        x = torch.arange(float(math.prod(ss))).reshape(ss)
        for idx in [[], [0, 2], [5], [[0]]]:
            i = torch.tensor(idx, dtype=torch.long)
            for sh in srcs:
                for dim in (0, 1, -1):
                    src = torch.ones(sh)
                    what = f"{ss}.index_add({dim}, {idx}, {sh}): "
                    err = ct.torch_error(lambda: x.index_add(dim, i, src, alpha=2))
                    ct.clear_error()
                    got = lib.ct_index_add(h(x), dim, h(i), h(src), 2.0)
                    if err is not None:
                        ct.assert_error(got, err, what=what)
                    else:
                        close(got, x.index_add(dim, i, src, alpha=2))


# ------------------------------------------------------------------ gather / scatter
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_gather_scatter_values(dtype, layout):
    x = make((3, 5), dtype, layout)
    for dim in (0, 1, -1):
        n = x.shape[dim]
        idx = torch.randint(-n, n, (2, 3), generator=GEN) if False else torch.randint(0, n, (2, 3), generator=GEN)
        close(lib.ct_gather(h(x), dim, h(idx)), torch.gather(x, dim, idx))
        src = make((2, 4), dtype, layout)
        close(lib.ct_scatter(h(x), dim, h(idx), h(src)), x.scatter(dim, idx, src))
        close(lib.ct_scatter_value(h(x), dim, h(idx), 1.0), x.scatter(dim, idx, 1.0))
        if dtype != torch.bool:
            want = ref16(lambda a, s: a.scatter_add(dim, idx, s), x, src)
            close(lib.ct_scatter_add(h(x), dim, h(idx), h(src)), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_scatter_threads(dtype):
    """Scatters of 60,000 indices, many repeated, over the threads: whole rows
    a thread (dim last) or blocks of columns (dim 0, [300, 200] and a
    [300, 3] index: fewer columns than threads); torch's serial order (the
    last write wins, sums in index order)."""
    for xs, ixs, dim in [((300, 200), (300, 200), 0), ((300, 200), (300, 200), 1), ((300, 200), (20000, 3), 0),
                         ((4, 300, 50), (4, 300, 50), 1)]:
        x = make(xs, dtype, "contig")
        idx = torch.randint(0, xs[dim], ixs, generator=GEN)
        src = make(ixs, dtype, "contig")
        for t in (1, 2, 3):
            lib.ct_set_num_threads(t)
            close(lib.ct_scatter(h(x), dim, h(idx), h(src)), x.scatter(dim, idx, src))
            close(lib.ct_scatter_add(h(x), dim, h(idx), h(src)), x.scatter_add(dim, idx, src))
        lib.ct_set_num_threads(2)


def test_gather_scatter_edges():
    s = torch.tensor(3.0, dtype=torch.float64)
    i0 = torch.tensor(0)
    close(lib.ct_gather(h(s), 0, h(i0)), torch.gather(s, 0, i0))
    close(lib.ct_scatter(h(s), 0, h(i0), h(torch.tensor(5.0).double())), s.scatter(0, i0, torch.tensor(5.0).double()))
    close(lib.ct_scatter_add(h(s), 0, h(i0), h(torch.tensor(5.0).double())),
          s.scatter_add(0, i0, torch.tensor(5.0).double()))
    x = rand((3, 4))
    e = torch.zeros(0, 4, dtype=torch.long)
    close(lib.ct_gather(h(x), 0, h(e)), torch.gather(x, 0, e))
    it = torch.tensor([[0, 2], [1, 1], [2, 0]]).t()  # a transposed index
    close(lib.ct_gather(h(x), 0, h(it)), torch.gather(x, 0, it))
    close(lib.ct_index_select(h(x), 1, h(torch.tensor([0, 3, 1, 2])[::2])), torch.index_select(x, 1, torch.tensor([0, 1])))
    close(lib.ct_index(h(x), arr([h(it)]), 1), x[it])
    close(lib.ct_scatter_add(h(x), 0, h(e), h(torch.zeros(0, 4).double())), x.scatter_add(0, e, torch.zeros(0, 4).double()))
    # in place on a transposed (non-contiguous) tensor
    base = rand((5, 3))
    xt = base.t()
    idx = torch.tensor([[0, 4], [2, 1]])
    src = rand((2, 2))
    hb = h(base.clone())
    hx = ct.check(lib.ct_t(hb))
    ct.check_int(lib.ct_scatter_add_(hx, 1, h(idx), h(src)))
    close(hx, xt.clone().scatter_add_(1, idx, src))
    ct.check_int(lib.ct_index_put_(hx, arr([h(torch.tensor([1, 0]))]), 1, h(torch.tensor(9.0).double()), False))
    want = xt.clone().scatter_add_(1, idx, src)
    want[torch.tensor([1, 0])] = 9.0
    close(hx, want)


def test_scatter_inplace():
    x = rand((3, 5))
    idx = torch.tensor([[0, 1, 2], [4, 3, 2]])
    src = rand((2, 3))
    hx = h(x.clone())
    ct.check_int(lib.ct_scatter_(hx, 1, h(idx), h(src)))
    close(hx, x.clone().scatter_(1, idx, src))
    hx = h(x.clone())
    ct.check_int(lib.ct_scatter_add_(hx, 1, h(idx), h(src)))
    close(hx, x.clone().scatter_add_(1, idx, src))
    hx = h(x.clone())
    ct.check_int(lib.ct_scatter_value_(hx, 1, h(idx), -2.5))
    close(hx, x.clone().scatter_(1, idx, -2.5))


def test_gather_scatter_errors():
    x = rand((3, 4))
    cases = [
        (lambda: lib.ct_gather(h(x), 1, h(torch.tensor([[5]]))), lambda: torch.gather(x, 1, torch.tensor([[5]]))),
        (lambda: lib.ct_gather(h(x), 1, h(torch.tensor([[-1]]))), lambda: torch.gather(x, 1, torch.tensor([[-1]]))),
        (lambda: lib.ct_gather(h(x), 1, h(torch.tensor([[0.0]]))), lambda: torch.gather(x, 1, torch.tensor([[0.0]]))),
        (lambda: lib.ct_gather(h(x), 1, h(torch.tensor([0]))), lambda: torch.gather(x, 1, torch.tensor([0]))),
        (lambda: lib.ct_gather(h(x), 1, h(torch.zeros(4, 4, dtype=torch.long))),
         lambda: torch.gather(x, 1, torch.zeros(4, 4, dtype=torch.long))),
        (lambda: lib.ct_scatter_value(h(x), 1, h(torch.tensor([[5]])), 1.0),
         lambda: x.scatter(1, torch.tensor([[5]]), 1.0)),
        (lambda: lib.ct_scatter(h(x), 1, h(torch.tensor([[1]])), h(torch.zeros(1, 1, dtype=torch.float32))),
         lambda: x.scatter(1, torch.tensor([[1]]), torch.zeros(1, 1, dtype=torch.float32))),
        (lambda: lib.ct_scatter_add(h(x), 1, h(torch.tensor([[5]])), h(torch.ones(1, 1, dtype=torch.float64))),
         lambda: x.scatter_add(1, torch.tensor([[5]]), torch.ones(1, 1, dtype=torch.float64))),
        (lambda: lib.ct_scatter_add(h(x), 1, h(torch.zeros(5, 1, dtype=torch.long)), h(torch.ones(1, 1).double())),
         lambda: x.scatter_add(1, torch.zeros(5, 1, dtype=torch.long), torch.ones(1, 1).double())),
    ]
    for k, (c, t) in enumerate(cases):
        expect_error(c(), t, f"case {k}")
    e = rand((3, 0))  # an empty dim: no position to read while checking
    expect_error(lib.ct_gather(h(e), 1, h(torch.zeros(3, 2, dtype=torch.long))),
                 lambda: torch.gather(e, 1, torch.zeros(3, 2, dtype=torch.long)), "gather from an empty dim")
    # gather checks its indices on the way, over the threads: one bad index among 19,200
    big = rand((64, 300))
    for dim, bad in [(1, 300), (1, -1), (0, 64), (0, -65)]:
        idx = torch.randint(0, big.shape[dim], (64, 300))
        idx[40, 123] = bad
        expect_error(lib.ct_gather(h(big), dim, h(idx)), lambda: torch.gather(big, dim, idx), f"gather {dim} {bad}")
    # scatters check theirs first, over the threads past 262,144 indices: one bad among 300,000
    big = rand((600, 500))
    for bad in (500, -1):
        idx = torch.randint(0, 500, (600, 500))
        idx[400, 123] = bad
        expect_error(lib.ct_scatter_add(h(big), 1, h(idx), h(big)), lambda: big.scatter_add(1, idx, big),
                     f"scatter_add {bad}")
        expect_error(lib.ct_scatter(h(big), 1, h(idx), h(big)), lambda: big.scatter(1, idx, big), f"scatter {bad}")


def test_gather_scatter_grad():
    x = make((4, 5), layout="transposed")
    idx = torch.randint(0, 5, (3, 5), generator=GEN)
    grad_check(lambda t, i: lib.ct_gather(t, 1, i), lambda t, i: torch.gather(t, 1, i), [x, idx], [0], "gather: ",
               name="GatherBackward0")
    idx = torch.tensor([[0, 1, 2], [4, 3, 2]])  # no duplicates along dim 1 in each row
    src = rand((2, 3))
    grad_check(lambda t, i, s: lib.ct_scatter(t, 1, i, s), lambda t, i, s: t.scatter(1, i, s), [x, idx, src],
               [0, 2], "scatter: ", name="ScatterBackward0")
    grad_check(lambda t, i: lib.ct_scatter_value(t, 1, i, 3.0), lambda t, i: t.scatter(1, i, 3.0), [x, idx], [0],
               "scatter_value: ")
    idx = torch.randint(0, 5, (4, 7), generator=GEN)
    grad_check(lambda t, i, s: lib.ct_scatter_add(t, 1, i, s), lambda t, i, s: t.scatter_add(1, i, s),
               [x, idx, rand((4, 7))], [0, 2], "scatter_add: ", name="ScatterAddBackward0")


# ------------------------------------------------------------------ advanced indexing
def ct_index(x, idxs):
    return lib.ct_index(h(x), arr([h(i) for i in idxs]), len(idxs))


INDEX_CASES = [
    ("long", lambda: (torch.tensor([2, 0, -1, 2]),)),
    ("long2d", lambda: (torch.tensor([[0, 1], [2, -3]]),)),
    ("two", lambda: (torch.tensor([0, 2]), torch.tensor([1, -1]))),
    ("bcast", lambda: (torch.tensor([[0], [2]]), torch.tensor([1, 3, 0]))),
    ("colon", lambda: (None, torch.tensor([3, 1]))),
    ("nonadj", lambda: (torch.tensor([0, 1]), None, torch.tensor([1, 0]))),
    ("mask", lambda: (torch.tensor([True, False, True]),)),
    ("mask2d", lambda: (torch.rand(3, 4, generator=GEN) > 0.5,)),
    ("colonmask", lambda: (None, torch.tensor([True, False, True, True]))),
    ("scalaridx", lambda: (torch.tensor(1),)),
    ("empty", lambda: (torch.tensor([], dtype=torch.long),)),
]


def torch_index(x, idxs):
    return x[tuple(slice(None) if i is None else i for i in idxs)]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_index_values(dtype, layout):
    x = make((3, 4, 2), dtype, layout)
    for name, mk in INDEX_CASES:
        idxs = mk()
        close(ct_index(x, idxs), torch_index(x, idxs), name + ": ")


def random_layout(shape, g):
    """A tensor of shape whose dims lie in a random order, now and then a ::2 slice of one."""
    perm = torch.randperm(len(shape), generator=g).tolist()
    x = torch.randn([shape[p] for p in perm], generator=g, dtype=torch.float64).permute(
        [perm.index(i) for i in range(len(shape))])
    if len(shape) and torch.rand(1, generator=g).item() < 0.3:
        d = int(torch.randint(0, len(shape), (1,), generator=g))
        big = list(shape)
        big[d] *= 2
        x = torch.randn(big, generator=g, dtype=torch.float64)[(slice(None),) * d + (slice(None, None, 2),)]
    return x


def test_index_result_follows_the_operands_layout():
    """aten's index lays its result out as TensorIterator's output over self
    restrided (the indexed dims replaced by the index shape at stride 0) and the
    indices reshaped around it: a permuted self gives a permuted result, empty
    results stride 0 outside a size-0 dim, and where every operand has the
    result's shape the fast setup decides. Checked against torch.ops.aten.index
    on random layouts, index shapes and masks (torch's Python indexing would
    turn 0-dim indices into select())."""
    g = torch.Generator().manual_seed(7)
    cases = 0
    for _ in range(1500):
        nd = int(torch.randint(1, 5, (1,), generator=g))
        shape = [int(v) for v in torch.tensor([1, 2, 3, 4, 5, 7])[torch.randint(0, 6, (nd,), generator=g)]]
        x = random_layout(shape, g)
        ents = []
        for d in range(int(torch.randint(1, nd + 1, (1,), generator=g))):
            r = torch.rand(1, generator=g).item()
            if r < 0.4:
                ents.append(None)
            elif r < 0.8:
                ishape = [[], [1], [int(torch.randint(0, 4, (1,), generator=g))], [2, 3]][int(torch.randint(0, 4, (1,), generator=g))]
                i = torch.randint(-shape[d], shape[d], ishape, generator=g)
                ents.append(i.t() if len(ishape) == 2 and torch.rand(1, generator=g).item() < 0.5 else i)
            else:
                ents.append(torch.rand(shape[d], generator=g) < 0.5)
        if all(e is None for e in ents):
            continue
        try:
            want = torch.ops.aten.index(x, ents)
        except (IndexError, RuntimeError):  # the indices do not broadcast (errors are tested elsewhere)
            continue
        got = ct.check(ct_index(x, ents))
        what = f"x {tuple(x.shape)} {x.stride()}, indices {[None if e is None else (tuple(e.shape), e.dtype) for e in ents]}: "
        ct.assert_close(got, want, rtol=0, atol=0, what=what)
        ct.assert_same_layout(got, want, what=what)
        cases += 1
    assert cases > 1000


def test_index_errors():
    x = rand((3, 4))
    cases = [
        (torch.tensor([5]),),
        (torch.tensor([-4]),),
        (None, torch.tensor([4])),
        (torch.tensor([0]), torch.tensor([0]), torch.tensor([0])),
        (torch.tensor([True, False]),),
        (torch.tensor([0.0]),),
        (torch.tensor([0], dtype=torch.int32),),
        (torch.tensor([0, 1]), torch.tensor([0, 1, 2])),
    ]
    for idxs in cases:
        expect_error(ct_index(x, idxs), lambda: torch_index(x, idxs), str(idxs))


def test_index_grad():
    x = make((3, 4, 2), layout="transposed")
    for name, mk in INDEX_CASES:
        idxs = mk()
        ins = [x] + [i for i in idxs if i is not None]
        where = [k for k, i in enumerate(idxs) if i is not None]

        def cfn(t, *ii, where=where, n=len(idxs)):
            full = [None] * n
            for k, v in zip(where, ii):
                full[k] = v
            return lib.ct_index(t, arr(full), n)

        def tfn(t, *ii, where=where, n=len(idxs)):
            full = [None] * n
            for k, v in zip(where, ii):
                full[k] = v
            return torch_index(t, full)

        grad_check(cfn, tfn, ins, [0], name + ": ", name="IndexBackward0")


def test_index_every_dim_of_a_7d_tensor():
    """an index tensor per dim (7 > the 4 a node once had room for), with and without ':'"""
    x = rand((2, 3, 2, 2, 3, 2, 2))
    full = tuple(torch.randint(-s, s, (4,), generator=GEN) for s in x.shape)
    for idxs in (full, full[:3] + (None,) + full[4:], (None,) + full[1:6]):
        ins = [x] + [i for i in idxs if i is not None]
        where = [k for k, i in enumerate(idxs) if i is not None]

        def put(ii, where=where, n=len(idxs)):
            out = [None] * n
            for k, v in zip(where, ii):
                out[k] = v
            return out

        close(ct_index(x, idxs), torch_index(x, idxs), f"{len(where)} indices: ")
        grad_check(lambda t, *ii: lib.ct_index(t, arr(put(ii)), len(idxs)),
                   lambda t, *ii: torch_index(t, put(ii)), ins, [0], f"{len(where)} indices: ",
                   name="IndexBackward0")
    v = rand((4,))
    grad_check(lambda t, vv, *ii: lib.ct_index_put(t, arr(list(ii)), len(ii), vv, True),
               lambda t, vv, *ii: t.index_put(ii, vv, accumulate=True), [x, v] + list(full), [0, 1],
               "index_put 7 indices: ", name="IndexPutBackward0")


def ct_index_put(x, idxs, v, acc):
    return lib.ct_index_put(h(x), arr([h(i) for i in idxs]), len(idxs), h(v), acc)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_index_put(dtype):
    x = make((3, 4), dtype, "transposed")
    cases = [
        ((torch.tensor([0, 2, 0]),), make((3, 4), dtype)),
        ((torch.tensor([0, 2]), torch.tensor([1, 3])), make((2,), dtype)),
        ((None, torch.tensor([1, 1, 0])), make((3, 1), dtype)),
        ((torch.rand(3, 4, generator=GEN) > 0.5,), torch.tensor(1).to(dtype)),
    ]
    for idxs, v in cases:
        for acc in ((False, True) if dtype != torch.bool else (False,)):
            if not acc and any(i is not None and i.dtype == torch.long and len(set(i.tolist())) < i.numel()
                               for i in idxs):
                continue  # duplicate writes without accumulate: unspecified in torch
            want = ref16(lambda a, b: _index_put_ref(a, idxs, b, acc), x, v)
            close(ct_index_put(x, idxs, v, acc), want, f"{idxs} acc={acc}: ")
            hx = h(x.clone())
            ct.check_int(lib.ct_index_put_(hx, arr([h(i) for i in idxs]), len(idxs), h(v), acc))
            close(hx, want, f"in place {idxs} acc={acc}: ")


def _index_put_ref(a, idxs, b, acc):
    """torch's index_put; a None entry (':') becomes an arange broadcast over its dim."""
    full = []
    for d, i in enumerate(idxs):
        if i is None:
            shape = [1] * len(idxs)
            shape[d] = a.shape[d]
            full.append(torch.arange(a.shape[d]).view(shape))
        else:
            full.append(i)
    if any(i is None for i in idxs):
        b = b.expand(torch_index(a, idxs).shape)
        # the arange dims come first in x[key] but broadcast in place here: reorder b accordingly
        return a.index_put(tuple(full), b.transpose(0, -1) if False else b, accumulate=acc)
    return a.index_put(tuple(full), b, accumulate=acc)


def test_index_put_errors_grad():
    x = rand((3, 4))
    i = torch.tensor([0])
    expect_error(ct_index_put(x, (i,), rand((1,), torch.float32), False),
                 lambda: x.index_put((i,), rand((1,), torch.float32)))
    expect_error(ct_index_put(x, (i,), rand((2,)), False), lambda: x.index_put((i,), rand((2,))))
    expect_error(ct_index_put(x, (torch.tensor([3]),), rand((4,)), False),
                 lambda: x.index_put((torch.tensor([3]),), rand((4,))))
    idx = torch.tensor([0, 2])
    grad_check(lambda t, ii, v: lib.ct_index_put(t, arr([ii]), 1, v, False),
               lambda t, ii, v: t.index_put((ii,), v), [x, idx, rand((2, 4))], [0, 2], "index_put: ",
               name="IndexPutBackward0")
    idx = torch.tensor([0, 2, 0])
    grad_check(lambda t, ii, v: lib.ct_index_put(t, arr([ii]), 1, v, True),
               lambda t, ii, v: t.index_put((ii,), v, accumulate=True), [x, idx, rand((4,))], [0, 2],
               "index_put acc: ")


# ------------------------------------------------------------------ masks
def test_masked_scatter_into_an_expanded_tensor_is_refused():
    x = torch.zeros(1, 3).expand(2, 3)
    src = torch.arange(6.0)
    for m in (torch.ones(2, 3, dtype=torch.bool), torch.ones(2, 3, dtype=torch.int64)):  # the overlap first
        hx, storage = ct.from_torch(x, with_storage=True)
        ct.assert_error(lib.ct_masked_scatter_(hx, h(m), h(src)),
                        ct.torch_error(lambda: torch.zeros(1, 3).expand(2, 3).masked_scatter_(m, src)))
        close(hx, torch.zeros(2, 3))


def test_a_colon_past_the_dims_after_a_mask_is_refused():
    """Python's x[m, :] with a mask over every dim: too many indices (aten reads past them)"""
    x, m = torch.arange(6.0).view(2, 3), torch.ones(2, 3, dtype=torch.bool)
    for ix in ([m, None], [m[0], None, None], [None, m[0], None]):
        def py():
            return x[tuple(slice(None) if i is None else i for i in ix)]
        err = ct.torch_error(py)
        assert err is not None
        ct.clear_error()
        ct.assert_error(lib.ct_index(h(x), arr([None if i is None else h(i) for i in ix]), len(ix)), err)
        ct.clear_error()
        ct.assert_error(lib.ct_index_put(h(x), arr([None if i is None else h(i) for i in ix]), len(ix),
                                         h(torch.tensor(1.0)), False), err)


def test_index_put_with_masks_on_meta():
    """the result is self's shape, as torch's meta kernel gives; the masks' shapes and
    the dtypes are checked as on the CPU"""
    x, m = torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool)
    for ix in ([m], [m[:, 0]], [None, m[0]], [m[:, 0], torch.tensor([1])]):
        for v in (torch.ones(7), torch.tensor(2.0), torch.ones(3)):
            for acc in (False, True):
                hix = arr([None if i is None else meta(tuple(i.shape), i.dtype) for i in ix])
                got = lib.ct_index_put(meta((2, 3), torch.float32), hix, len(ix), meta(tuple(v.shape), v.dtype), acc)
                assert_meta_shape(got, (2, 3), f"{ix} {tuple(v.shape)} {acc}: ")
    bad = torch.ones(3, 3, dtype=torch.bool)
    err = ct.torch_error(lambda: torch.ops.aten.index_put(x, [bad], torch.ones(1), False))
    ct.assert_error(lib.ct_index_put(meta((2, 3), torch.float32), arr([meta((3, 3), torch.bool)]), 1,
                                     meta((1,), torch.float32), False), err)
    err = ct.torch_error(lambda: torch.ops.aten.index_put(x, [m], torch.ones(6, dtype=torch.float64), True))
    ct.assert_error(lib.ct_index_put(meta((2, 3), torch.float32), arr([meta((2, 3), torch.bool)]), 1,
                                     meta((6,), torch.float64), True), err)


def test_index_add_of_uint8_by_minus_one():
    """a whole-number alpha is an integer: -1 wraps in uint8 as torch's int alpha"""
    x, src = torch.tensor([1, 2, 3], dtype=torch.uint8), torch.tensor([1, 1, 2], dtype=torch.uint8)
    idx = torch.tensor([0, 1, 2])
    close(lib.ct_index_add(h(x), 0, h(idx), h(src), -1.0), x.index_add(0, idx, src, alpha=-1))


def test_embedding_names_index_types_as_torch():
    """torch's legacy type names: torch.FloatTensor, and CPUBoolType / CPUBFloat16Type"""
    w = torch.ones(4, 2)
    for dt in (torch.bool, torch.bfloat16, torch.float32, torch.uint8, torch.float16):
        i = torch.tensor([1]).to(dt)
        ct.assert_error(lib.ct_embedding(h(w), h(i), -1), ct.torch_error(lambda: torch.embedding(w, i)), str(dt))


@pytest.mark.parametrize("idt", [torch.int32, torch.int64], ids=str)
def test_embedding_of_permuted_indices(idt):
    """indices are read in their logical order whatever their layout or dtype"""
    w = torch.arange(8.0, dtype=torch.float64).reshape(4, 2)
    idx = torch.tensor([[0, 1, 2], [3, 0, 1]], dtype=idt).t().contiguous().t()
    assert idx.stride() == (1, 2)
    grad_check(lambda ww, i: lib.ct_embedding(ww, i, -1), lambda ww, i: torch.embedding(ww, i, -1), [w, idx], [0],
               "embedding of permuted indices: ")


def test_clamp_of_bool_by_one_bool_bound():
    """one bound alone is torch's clamp_min / clamp_max, which take bool; both refuse it"""
    b, lo, hi = torch.tensor([True, False, True]), torch.tensor([True, True, False]), torch.tensor([False, True, True])
    for what, cfn, tfn in [("min", lambda: lib.ct_clamp_tensor(h(b), h(lo), None), lambda: torch.clamp(b, lo)),
                           ("max", lambda: lib.ct_clamp_tensor(h(b), None, h(hi)), lambda: torch.clamp(b, None, hi)),
                           ("both", lambda: lib.ct_clamp_tensor(h(b), h(lo), h(hi)), lambda: torch.clamp(b, lo, hi))]:
        ct.assert_same_outcome(cfn, tfn, f"clamp {what}: ", compare=lambda got, want: close(got, want))


def test_byte_mask_values_checked_where_read():
    """torch checks a uint8 mask's values as it reads them: an empty broadcast reads none"""
    m = torch.tensor([2, 0], dtype=torch.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's uint8 mask deprecation
        for x in (torch.zeros(0, 2), torch.zeros(3, 2), torch.zeros(2, 0, 2)):
            ct.assert_same_outcome(lambda: lib.ct_masked_select(h(x), h(m)), lambda: torch.masked_select(x, m),
                                   f"masked_select({tuple(x.shape)}): ", compare=close)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_masked(dtype, layout):
    x = make((3, 4), dtype, layout)
    m = make((3, 4), torch.bool, layout)
    m1 = torch.tensor([True, False, False, True])
    m3 = make((2, 3, 4), torch.bool)
    for mask in (m, m1, m3):
        close(lib.ct_masked_select(h(x), h(mask)), torch.masked_select(x, mask))
        for v in ((2.0, 0.0) if dtype == torch.uint8 else (2.0, -1.5, 0.0)):
            close(lib.ct_masked_fill(h(x), h(mask), v), ref16(lambda a: a.masked_fill(mask, v), x))
    hx = h(x.clone())
    ct.check_int(lib.ct_masked_fill_(hx, h(m1), 7.0))
    close(hx, ref16(lambda a: a.masked_fill(m1, 7.0), x))
    nz = make((3, 4, 2), dtype, layout)
    close(lib.ct_nonzero(h(nz)), torch.nonzero(nz))
    close(lib.ct_nonzero(h(torch.tensor(3).to(dtype))), torch.nonzero(torch.tensor(3).to(dtype)))


def test_masked_parts():
    """nonzero and masked_select of masks big enough to be cut into parts over
    the threads (random, all set, none set, one set in the last row)."""
    g = torch.Generator().manual_seed(3)
    for shape in [(300, 500), (7, 100, 90), (140000,), (2, 40000, 1)]:
        x = torch.randn(shape, generator=g)
        for kind in ("random", "all", "none", "last"):
            m = torch.rand(shape, generator=g) < 0.4 if kind == "random" else torch.full(shape, kind == "all")
            if kind == "last":
                m.view(-1)[-1] = True
            for t in (1, 2, 3):
                lib.ct_set_num_threads(t)
                close(lib.ct_nonzero(h(m)), torch.nonzero(m))
                close(lib.ct_masked_select(h(x), h(m)), torch.masked_select(x, m))
                close(lib.ct_masked_select(h(x), h(m.to(torch.uint8))), torch.masked_select(x, m))
            lib.ct_set_num_threads(2)
    x = torch.randn(300, 500, generator=g, dtype=torch.float64)
    m = torch.rand(500, generator=g) < 0.5  # broadcast over the rows
    close(lib.ct_masked_select(h(x), h(m)), torch.masked_select(x, m))


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_masked_scatter(dtype, layout):
    x = make((3, 4), dtype, layout)
    src = make((3, 5), dtype, layout)
    for mask in (make((3, 4), torch.bool, layout), torch.tensor([True, False, False, True]),
                 torch.zeros(3, 4, dtype=torch.bool)):
        close(lib.ct_masked_scatter(h(x), h(mask), h(src)), x.masked_scatter(mask, src))
        hx = h(x.clone())
        ct.check_int(lib.ct_masked_scatter_(hx, h(mask), h(src)))
        # torch 1.13's in-place form fills a non-contiguous self in memory order
        # (unlike its out-of-place form): compare with the out-of-place result
        close(hx, x.masked_scatter(mask, src))
    m = torch.ones(3, 4, dtype=torch.bool)
    small = make((5,), dtype)
    expect_error(lib.ct_masked_scatter(h(x), h(m), h(small)), lambda: x.masked_scatter(m, small))
    ct.assert_error(lib.ct_masked_scatter(h(x), h(torch.ones(3, 4)), h(src)),
                    "masked_scatter only supports boolean masks, but got mask with dtype float")
    ct.clear_error()


def test_masked_scatter_grad():
    x = make((3, 4), layout="transposed")
    m = rand((2, 3, 4), torch.bool)
    src = rand((5, 6))
    grad_check(lambda t, mm, s: lib.ct_masked_scatter(t, mm, s), lambda t, mm, s: t.masked_scatter(mm, s),
               [x.contiguous(), m, src], [0, 2], "masked_scatter: ", name="MaskedScatterBackward0")


def test_masked_special():
    x = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    m = torch.tensor([False, True, False, True])
    close(lib.ct_masked_fill(h(x), h(m), float("nan")), x.masked_fill(m, float("nan")))
    close(lib.ct_masked_select(h(x), h(m)), torch.masked_select(x, m))
    e = torch.zeros(0, 3)
    close(lib.ct_masked_select(h(e), h(torch.zeros(0, 3, dtype=torch.bool))), torch.zeros(0))
    close(lib.ct_nonzero(h(e)), torch.nonzero(e))
    xi = torch.tensor([1, 2, 3])
    close(lib.ct_masked_fill(h(xi), h(torch.tensor([True, False, True])), 2.7), xi.masked_fill(
        torch.tensor([True, False, True]), 2.7))


def test_masked_errors():
    x = rand((3, 4))
    for dt, name in ((torch.float32, "float"), (torch.float64, "double"), (torch.int64, "long")):
        r = lib.ct_masked_fill(h(x), h(torch.ones(3, 4, dtype=dt)), 1.0)
        ct.assert_error(r, f"masked_fill only supports boolean masks, but got mask with dtype {name}")
        ct.clear_error()
    expect_error(lib.ct_masked_select(h(x), h(torch.ones(3, 4))), lambda: torch.masked_select(x, torch.ones(3, 4)))
    bad = torch.ones(3, 5, dtype=torch.bool)
    expect_error(lib.ct_masked_select(h(x), h(bad)), lambda: torch.masked_select(x, bad))


def test_masked_grad():
    x = make((3, 4), layout="transposed")
    m = rand((3, 4), torch.bool)
    grad_check(lambda t, mm: lib.ct_masked_fill(t, mm, 2.0), lambda t, mm: t.masked_fill(mm, 2.0), [x, m], [0],
               "masked_fill: ", name="MaskedFillBackward0")
    mb = rand((2, 3, 4), torch.bool)
    grad_check(lambda t, mm: lib.ct_masked_fill(t, mm, 2.0), lambda t, mm: t.masked_fill(mm, 2.0), [x, mb], [0],
               "masked_fill bcast: ")
    # contiguous input: torch 1.13's masked_select backward mis-orders non-contiguous inputs
    # (zeros_like keeps the layout, masked_scatter_ then fills in memory order)
    grad_check(lambda t, mm: lib.ct_masked_select(t, mm), lambda t, mm: torch.masked_select(t, mm),
               [x.contiguous(), mb], [0], "masked_select: ", name="MaskedSelectBackward0")
    hx = h(x)
    ct.check_int(lib.ct_set_requires_grad(hx, True))
    assert not lib.ct_requires_grad(ct.check(lib.ct_nonzero(hx)))


# ------------------------------------------------------------------ take
@pytest.mark.parametrize("dtype", NUMERIC)
def test_take(dtype):
    x = make((3, 4), dtype, "transposed")
    idx = torch.tensor([[0, -1, 5], [11, 3, -12]])
    close(lib.ct_take(h(x), h(idx)), torch.take(x, idx))
    for bad in (torch.tensor([12]), torch.tensor([-13])):
        expect_error(lib.ct_take(h(x), h(bad)), lambda: torch.take(x, bad))
    grad_check(lambda t, i: lib.ct_take(t, i), lambda t, i: torch.take(t, i), [rand((3, 4)), idx], [0], "take: ",
               name="TakeBackward0")


# ------------------------------------------------------------------ flip roll repeat tile tril triu pad
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_reshuffles(dtype, layout):
    x = make((3, 4, 5), dtype, layout)
    for dims in ((0,), (1, 2), (-1,), (0, 1, 2), ()):
        close(lib.ct_flip(h(x), ct.i32(dims), len(dims)), torch.flip(x, dims))
    for shifts, dims in (((1,), (0,)), ((-2, 7), (2, 1)), ((5,), ()), ((0,), (1,))):
        close(lib.ct_roll(h(x), ct.i64(shifts), len(shifts), ct.i32(dims), len(dims)),
              torch.roll(x, shifts, dims) if dims else torch.roll(x, shifts[0]))
    for reps in ((1, 1, 1), (2, 1, 3), (2, 1, 1, 2), (0, 1, 1)):
        close(lib.ct_repeat(h(x), ct.i64(reps), len(reps)), x.repeat(*reps))
    for reps in ((2,), (2, 1), (1, 2, 1, 2)):
        close(lib.ct_tile(h(x), ct.i64(reps), len(reps)), torch.tile(x, reps))
    for k in (-2, -1, 0, 1, 3, 10):
        close(lib.ct_tril(h(x), k), torch.tril(x, k))
        close(lib.ct_triu(h(x), k), torch.triu(x, k))
    for pad in ((1, 2), (0, 0, 2, 1), (1, 1, 1, 1, 1, 1), (-1, 2), (-2, -1, 1, 0)):
        if dtype in (torch.float16,):
            continue
        close(lib.ct_pad(h(x), ct.i64(pad), len(pad), 3.0), F.pad(x, pad, value=3.0))


def test_reshuffle_errors():
    x = rand((3, 4))
    expect_error(lib.ct_flip(h(x), ct.i32((0, 0)), 2), lambda: torch.flip(x, (0, 0)))
    expect_error(lib.ct_flip(h(x), ct.i32((2,)), 1), lambda: torch.flip(x, (2,)))
    expect_error(lib.ct_roll(h(x), ct.i64((1, 2)), 2, ct.i32((0,)), 1), lambda: torch.roll(x, (1, 2), (0,)))
    expect_error(lib.ct_repeat(h(x), ct.i64((2,)), 1), lambda: x.repeat(2))
    expect_error(lib.ct_repeat(h(x), ct.i64((-1, 2)), 2), lambda: x.repeat(-1, 2))
    v = rand((3,))
    expect_error(lib.ct_tril(h(v), 0), lambda: torch.tril(v))
    expect_error(lib.ct_pad(h(x), ct.i64((1,)), 1, 0.0), lambda: F.pad(x, (1,)))
    expect_error(lib.ct_pad(h(x), ct.i64((1,) * 6), 6, 0.0), lambda: F.pad(x, (1,) * 6))


def test_repeat_negative_on_empty_dims():
    """torch checks repeat's (and tile's) result sizes, not the repeats: a
    negative repeat of a dim of size 0 gives 0 ("Trying to create tensor with
    negative dimension -3: [0, -3]" names the first negative size otherwise).
    The gradient of an empty result is zeros (torch's fails to reshape, but
    for a repeat of 0)."""
    for shape in [(0,), (2, 0), (0, 3), (3,), (), (2, 3)]:
        for reps in [(-1,), (1, -1), (-1, 1), (0, -1), (-2, 0), (2, -1, 1), (1, 1, -1), (0,), (2, 2, 2)]:
            x = torch.ones(shape)
            for name, tfn in [("ct_repeat", lambda: x.repeat(*reps)), ("ct_tile", lambda: x.tile(reps))]:
                err = ct.torch_error(tfn)
                ct.clear_error()
                got = getattr(lib, name)(h(x), ct.i64(reps), len(reps))
                if err is not None:
                    ct.assert_error(got, err, what=f"{shape}.{name}{reps}: ")
                else:
                    close(got, tfn())
    for shape, reps in [((0,), (1, -1)), ((0, 3), (2, -1, 1)), ((0, 3), (-2, 0)), ((2, 3), (0, 1))]:
        hx = h(torch.ones(shape, dtype=torch.float64))
        lib.ct_set_requires_grad(hx, True)
        ct.check_int(lib.ct_backward(ct.check(lib.ct_sum(ct.check(lib.ct_repeat(hx, ct.i64(reps), len(reps))))), None))
        close(lib.ct_grad(hx), torch.zeros(shape, dtype=torch.float64))


def test_reshuffle_grad():
    x = make((3, 4, 5), layout="transposed")
    grad_check(lambda t: lib.ct_flip(t, ct.i32((0, 2)), 2), lambda t: torch.flip(t, (0, 2)), [x], [0], "flip: ",
               name="FlipBackward0")
    grad_check(lambda t: lib.ct_roll(t, ct.i64((1, -3)), 2, ct.i32((0, 2)), 2), lambda t: torch.roll(t, (1, -3), (0, 2)),
               [x], [0], "roll: ", name="RollBackward0")
    grad_check(lambda t: lib.ct_roll(t, ct.i64((7,)), 1, ct.i32(()), 0), lambda t: torch.roll(t, 7), [x], [0],
               "roll flat: ")
    grad_check(lambda t: lib.ct_repeat(t, ct.i64((2, 1, 3, 2)), 4), lambda t: t.repeat(2, 1, 3, 2), [x], [0],
               "repeat: ", name="RepeatBackward0")
    grad_check(lambda t: lib.ct_tile(t, ct.i64((2,)), 1), lambda t: torch.tile(t, (2,)), [x], [0], "tile: ")
    grad_check(lambda t: lib.ct_tril(t, -1), lambda t: torch.tril(t, -1), [x], [0], "tril: ", name="TrilBackward0")
    grad_check(lambda t: lib.ct_triu(t, 1), lambda t: torch.triu(t, 1), [x], [0], "triu: ", name="TriuBackward0")
    grad_check(lambda t: lib.ct_pad(t, ct.i64((1, -2, 2, 0)), 4, 1.5), lambda t: F.pad(t, (1, -2, 2, 0), value=1.5),
               [x], [0], "pad: ", name="ConstantPadNdBackward0")


# ------------------------------------------------------------------ sort / topk
def ct_sort(x, dim, desc, stable):
    v, i = ctypes.c_void_p(), ctypes.c_void_p()
    ct.check_int(lib.ct_sort(h(x), dim, desc, stable, ctypes.byref(v), ctypes.byref(i)))
    return v.value, i.value


def ct_topk(x, k, dim, largest, srt):
    v, i = ctypes.c_void_p(), ctypes.c_void_p()
    rc = lib.ct_topk(x if isinstance(x, int) else h(x), k, dim, largest, srt, ctypes.byref(v), ctypes.byref(i))
    return (None, None) if rc == -1 else (v.value, i.value)


@pytest.mark.parametrize("dtype", [d for d in NUMERIC if d != torch.float16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sort_topk(dtype, layout):
    x = make((4, 6), dtype, layout)  # ties: compare values always, indices with stable sort
    for dim in (0, 1, -1):
        for desc in (False, True):
            v, i = ct_sort(x, dim, desc, True)
            tv, ti = torch.sort(x, dim=dim, descending=desc, stable=True)
            close(v, tv)
            close(i, ti)
            close(lib.ct_argsort(h(x), dim, desc, True), ti)
            if dtype == torch.bool:
                continue
            for k in (0, 1, 3):
                v, i = ct_topk(x, k, dim, desc, True)
                tv, ti = torch.topk(x, k, dim, largest=desc, sorted=True)
                close(v, tv)
                # indices: where ties, torch may pick another: check they select the values
                close(lib.ct_gather(h(x), dim, i), tv)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32, torch.float64], ids=lambda d: str(d)[6:])
def test_sort_topk_middle_dim(dtype):
    """sort and topk along a middle dim of a 3-d tensor (outer 3, inner 7; and
    along dim 0 of [300, 500], over the threads): the slices moved to the last
    dim by a transposed copy first, the results written back with the inner
    stride; stable sorts against torch's exactly, ties included"""
    for x, dim in ((torch.randint(-20, 20, (3, 50, 7), generator=GEN).to(dtype), 1),
                   (torch.randint(-1000, 1000, (300, 500), generator=GEN).to(dtype), 0)):
        for desc in (False, True):
            v, i = ct_sort(x, dim, desc, True)
            tv, ti = torch.sort(x, dim=dim, descending=desc, stable=True)
            close(v, tv)
            close(i, ti)
            v, i = ct_topk(x, 5, dim, desc, True)
            tv, ti = torch.topk(x, 5, dim, largest=desc, sorted=True)
            close(v, tv)
            close(lib.ct_gather(h(x), dim, i), tv)


def test_sort_nan_and_special():
    x = torch.tensor([3.0, float("nan"), -1.0, float("inf"), -float("inf"), 0.0, float("nan")])
    for desc in (False, True):
        v, i = ct_sort(x, 0, desc, True)
        tv, ti = torch.sort(x, descending=desc, stable=True)
        close(v, tv)
        close(i, ti)
        v, i = ct_topk(x, 3, 0, desc, True)
        close(v, torch.topk(x, 3, largest=desc)[0])
    # the three topk paths: k <= 64 (one pass), k <= n / 8 (quickselect), larger (full sort)
    big = rand((3, 1200))
    big[0, 5] = float("nan")
    big[1, :40] = 0.5  # ties
    for k in (10, 64, 100, 150, 700, 1200):
        for largest in (True, False):
            v, i = ct_topk(big, k, 1, largest, True)
            tv, ti = torch.topk(big, k, 1, largest=largest)
            close(v, tv, f"topk k={k}: ")
            close(lib.ct_gather(h(big), 1, i), tv, f"topk k={k} indices: ")
    v, i = ct_sort(big, 1, True, True)
    tv, ti = torch.sort(big, dim=1, descending=True, stable=True)
    close(v, tv)
    close(i, ti)
    s = torch.tensor(2.0)
    v, i = ct_sort(s, 0, False, False)
    close(v, torch.sort(s)[0])
    close(i, torch.sort(s)[1])
    e = torch.zeros(0, 3)
    v, i = ct_sort(e, 1, False, False)
    close(v, e)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64, torch.int8,
                                   torch.uint8], ids=lambda d: str(d)[6:])
def test_topk_long_slices(dtype):
    """topk's one pass over slices long enough (n >= 128 k) to skip blocks of 16
    keys that cannot make it: few distinct values (ties at the k-th best, won
    by the lower index), a NaN late in a slice and one in the tail past the
    last block, +-inf; values and indices equal torch's stable sort's first k"""
    g = torch.Generator().manual_seed(11)
    n = 5000 + 7
    if dtype.is_floating_point:
        x = torch.randint(-50, 50, (5, n), generator=g).to(dtype) / 4
        x[1, 4000] = x[2, n - 3] = float("nan")
        x[3, 2500], x[3, 4999] = float("inf"), float("-inf")
        x[4, ::3] = 7.0  # the largest value, tied many times
    else:
        lo, hi = (0, 30) if dtype == torch.uint8 else (-30, 30)
        x = torch.randint(lo, hi, (5, n), generator=g).to(dtype)
        x[4, 3000] = 100
    for k in (1, 5, 30, 39):
        for largest in (True, False):
            v, i = ct_topk(x, k, 1, largest, True)
            sv, si = torch.sort(x, dim=1, descending=largest, stable=True)
            what = f"topk k={k} largest={largest}: "
            close(v, sv[:, :k], what)
            close(i, si[:, :k], what + "indices ")


_PROBE = """
import ctypes, sys
sys.path.insert(0, %r)
import numpy as np
import ctorch_ffi as ct
from ctorch_ffi import lib, T, CT, TP, c_int, c_bool
ct.declare("ct_sort", c_int, [CT, c_int, c_bool, c_bool, TP, TP])
ct.declare("ct_set_requires_grad", c_int, [T, c_bool])
ct.declare("ct_backward", c_int, [T, CT])
for _ in range(3):
    lib.ct_scope_begin()
    x = ct.from_numpy(np.arange(6.0).reshape(2, 3))
    lib.ct_set_requires_grad(x, True)
    v, i = ctypes.c_void_p(), ctypes.c_void_p()
    lib.ct_sort(x, 1, False, False, ctypes.byref(v), ctypes.byref(i))
    lib.ct_backward(v.value, ct.from_numpy(np.ones((2, 3))))
    lib.ct_scope_end()
"""


def _multi_output_backward_ok():
    """The engine must survive a backward through a node with an output that got
    no gradient (sort's indices). Probed in a subprocess under glibc's malloc
    checker, as a memory error would take the whole test run down."""
    import os
    import subprocess
    import sys
    code = _PROBE % os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, CTORCH_LIB=ct.LIB_PATH)
    dbg = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"
    if os.path.exists(dbg):
        env.update(LD_PRELOAD=dbg, MALLOC_CHECK_="3")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, env=env)
    return r.returncode == 0


def test_sort_topk_errors_grad():
    x = rand((3, 4))
    v, i = ct_topk(x, 5, 1, True, True)
    ct.assert_error(v, ct.torch_error(lambda: torch.topk(x, 5)))
    ct.clear_error()
    v, i = ct_topk(x, -1, 1, True, True)
    ct.assert_error(v, ct.torch_error(lambda: torch.topk(x, -1)))
    ct.clear_error()
    r = lib.ct_sort(h(x), 2, False, False, None, None)
    ct.assert_error(r, ct.torch_error(lambda: torch.sort(x, 2)))
    ct.clear_error()

    def sort_v(t, dim=1, desc=True):
        v = ctypes.c_void_p()
        lib.ct_sort(t, dim, desc, False, ctypes.byref(v), None)
        return v.value

    def topk_v(t):
        v = ctypes.c_void_p()
        lib.ct_topk(t, 2, 0, True, True, ctypes.byref(v), None)
        return v.value

    if not _multi_output_backward_ok():
        pytest.skip("engine.c double-frees the zero gradient of an unused output (sort/topk indices)")
    y = make((5, 4), layout="transposed")
    grad_check(sort_v, lambda t: torch.sort(t, 1, True)[0], [y], [0], "sort: ", name="SortBackward0")
    grad_check(topk_v, lambda t: torch.topk(t, 2, 0)[0], [y], [0], "topk: ", name="TopkBackward0")
    hy = h(y)
    ct.check_int(lib.ct_set_requires_grad(hy, True))
    vv, ii = ctypes.c_void_p(), ctypes.c_void_p()
    ct.check_int(lib.ct_sort(hy, 0, False, False, ctypes.byref(vv), ctypes.byref(ii)))
    assert lib.ct_requires_grad(vv.value) and not lib.ct_requires_grad(ii.value)


# ------------------------------------------------------------------ one_hot / embedding
def test_one_hot():
    x = torch.tensor([[0, 2], [1, 4]])
    close(lib.ct_one_hot(h(x), -1), F.one_hot(x))
    close(lib.ct_one_hot(h(x), 7), F.one_hot(x, 7))
    close(lib.ct_one_hot(h(torch.tensor(3)), 5), F.one_hot(torch.tensor(3), 5))
    close(lib.ct_one_hot(h(torch.zeros(0, dtype=torch.long)), 3), F.one_hot(torch.zeros(0, dtype=torch.long), 3))
    for bad, n in ((torch.tensor([1.0]), -1), (torch.tensor([-1]), -1), (torch.tensor([3]), 3),
                   (torch.tensor([], dtype=torch.long), -1)):
        expect_error(lib.ct_one_hot(h(bad), n), lambda: F.one_hot(bad, n), str(bad))
    assert_meta_shape(lib.ct_one_hot(meta((2, 3), torch.int64), 4), (2, 3, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_embedding(dtype):
    w = make((6, 3), dtype, "transposed")
    idx = torch.tensor([[0, 5, 2], [2, 2, 1]])
    close(lib.ct_embedding(h(w), h(idx), -1), F.embedding(idx, w))
    close(lib.ct_embedding(h(w), h(idx.int()), 2), F.embedding(idx.int(), w, padding_idx=2))
    expect_error(lib.ct_embedding(h(w), h(torch.tensor([6])), -1), lambda: F.embedding(torch.tensor([6]), w))
    expect_error(lib.ct_embedding(h(w), h(torch.tensor([0.0])), -1), lambda: F.embedding(torch.tensor([0.0]), w))
    v = rand((3,))
    expect_error(lib.ct_embedding(h(v), h(torch.tensor([0])), -1), lambda: F.embedding(torch.tensor([0]), v))


def test_embedding_checks_as_torch():
    """torch's order: 'weight' must be 2-D before the indices' dtype; the range is
    weight.index_select(0, ...)'s (a weight of 0 columns names the index, of 0 rows
    refuses any index); F.embedding asserts only a positive padding_idx"""
    for ws in [(5, 3), (5, 0), (0, 3), (5,), (), (9,)]:
        for idx in ([1], [5], [-1], [], [[0, 2], [4, 1]]):
            for it in (torch.int64, torch.int32, torch.int16, torch.float32):
                for pad in (None, 0, 2, 7):
                    w, i = torch.zeros(ws), torch.tensor(idx, dtype=it)
                    what = f"embedding({ws}, {idx} {it}, padding_idx={pad}): "
                    try:  # F.embedding asserts padding_idx in Python
                        err = ct.torch_error(lambda: F.embedding(i, w, padding_idx=pad))
                    except AssertionError as e:
                        err = str(e)
                    ct.clear_error()
                    got = lib.ct_embedding(h(w), h(i), -1 if pad is None else pad)
                    if err is not None:
                        ct.assert_error(got, err, what=what)
                    else:
                        close(got, F.embedding(i, w, padding_idx=pad), what=what)


def test_embedding_grad():
    w = rand((6, 3))
    idx = torch.tensor([[0, 5, 2], [2, 2, 1]])
    grad_check(lambda ww, i: lib.ct_embedding(ww, i, -1), lambda ww, i: F.embedding(i, ww), [w, idx], [0],
               "embedding: ", name="EmbeddingBackward0")
    grad_check(lambda ww, i: lib.ct_embedding(ww, i, 2), lambda ww, i: F.embedding(i, ww, padding_idx=2), [w, idx],
               [0], "embedding pad: ")
    assert_meta_shape(lib.ct_embedding(meta((6, 3), torch.float32), meta((2, 5), torch.int64), -1), (2, 5, 3))


# ------------------------------------------------------------------ where / clamp / lerp / addc*
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_where(dtype, layout):
    a = make((3, 4), dtype, layout)
    b = make((4,), dtype)
    c = make((3, 4), torch.bool, layout)
    close(lib.ct_where(h(c), h(a), h(b)), ref16(lambda x, y: torch.where(c, x, y), a, b))
    b2 = make((2, 1, 4), torch.float64)
    close(lib.ct_where(h(c), h(a), h(b2)), ref16(lambda x, y: torch.where(c, x, y), a, b2))
    s = torch.tensor(2, dtype=torch.int64)
    close(lib.ct_where(h(c), h(a), h(s)), ref16(lambda x, y: torch.where(c, x, y), a, s))


def test_where_errors_grad():
    x = rand((3, 4))
    expect_error(lib.ct_where(h(torch.ones(3)), h(x), h(x)), lambda: torch.where(torch.ones(3), x, x))
    # a uint8 condition: torch 1.13 takes it (any nonzero byte is true) with a deprecation warning
    cu = torch.tensor([[0, 1, 2, 255]] * 3, dtype=torch.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        close(lib.ct_where(h(cu), h(x), h(-x)), torch.where(cu, x, -x))
        expect_error(lib.ct_where(h(torch.ones(3, dtype=torch.int8)), h(x), h(x)),
                     lambda: torch.where(torch.ones(3, dtype=torch.int8), x, x))
    expect_error(lib.ct_where(h(torch.ones(3, dtype=torch.bool)), h(x), h(x)),
                 lambda: torch.where(torch.ones(3, dtype=torch.bool), x, x))
    c = rand((3, 4), torch.bool)
    grad_check(lambda cc, a, b: lib.ct_where(cc, a, b), torch.where, [c, make((3, 4), layout="transposed"), rand((4,))],
               [1, 2], "where: ", name="WhereBackward0")
    assert_meta_shape(lib.ct_where(meta((3, 1), torch.bool), meta((4,), torch.float32), meta((2, 1, 1), torch.float64)),
                      (2, 3, 4))


@pytest.mark.parametrize("dtype", [d for d in NUMERIC if d != torch.bool])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_clamp(dtype, layout):
    x = make((3, 4), dtype, layout) * (3 if dtype != torch.uint8 else 1)
    nan = float("nan")
    for lo, hi in ((-1, 2), (nan, 1), (0, nan), (0.5, 1.5), (3, -3)):
        kw = {}
        if lo == lo:
            kw["min"] = lo
        if hi == hi:
            kw["max"] = hi
        close(lib.ct_clamp(h(x), lo, hi), ref16(lambda t: torch.clamp(t, **kw), x), f"{lo},{hi}: ")
    lo_t, hi_t = make((4,), dtype), make((3, 1), dtype) + (3 if dtype != torch.uint8 else 2)
    close(lib.ct_clamp_tensor(h(x), h(lo_t), h(hi_t)), ref16(lambda t, a, b: torch.clamp(t, a, b), x, lo_t, hi_t))
    close(lib.ct_clamp_tensor(h(x), h(lo_t), None), ref16(lambda t, a: torch.clamp(t, min=a), x, lo_t))
    close(lib.ct_clamp_tensor(h(x), None, h(hi_t)), ref16(lambda t, b: torch.clamp(t, max=b), x, hi_t))


def test_clamp_special():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([1.0, nan, 3.0, -inf, inf])
    close(lib.ct_clamp(h(x), 0, 2), torch.clamp(x, 0, 2))
    lo = torch.tensor([nan, 0.0, 0.0, 0.0, 0.0])
    close(lib.ct_clamp_tensor(h(x), h(lo), h(torch.tensor(2.0))), torch.clamp(x, lo, torch.tensor(2.0)))
    close(lib.ct_clamp_tensor(h(x), h(lo), None), torch.clamp(x, min=lo))
    expect_error(lib.ct_clamp(h(x), nan, nan), lambda: torch.clamp(x))
    xi = torch.tensor([1, 2, 3])
    close(lib.ct_clamp(h(xi), 1.5, nan), torch.clamp(xi, 1.5))
    hx = h(x.clone())
    ct.check_int(lib.ct_clamp_(hx, -1, 1))
    close(hx, torch.clamp(x, -1, 1))
    assert_meta_shape(lib.ct_clamp(meta((2, 3), torch.float32), 0, 1), (2, 3))


def test_clamp_grad():
    x = make((3, 4), layout="transposed")
    grad_check(lambda t: lib.ct_clamp(t, -0.5, 0.5), lambda t: torch.clamp(t, -0.5, 0.5), [x], [0], "clamp: ",
               name="ClampBackward1")
    grad_check(lambda t: lib.ct_clamp(t, float("nan"), 0.1), lambda t: torch.clamp(t, max=0.1), [x], [0],
               "clamp max: ")
    lo, hi = rand((4,)) - 0.5, rand((3, 1)) + 0.5
    grad_check(lambda t, a, b: lib.ct_clamp_tensor(t, a, b), lambda t, a, b: torch.clamp(t, a, b), [x, lo, hi],
               [0, 1, 2], "clamp tensor: ", name="ClampBackward0")
    grad_check(lambda t, a: lib.ct_clamp_tensor(t, a, None), lambda t, a: torch.clamp(t, min=a), [x, lo], [0, 1],
               "clamp min tensor: ")
    grad_check(lambda t, b: lib.ct_clamp_tensor(t, None, b), lambda t, b: torch.clamp(t, max=b), [x, hi], [0, 1],
               "clamp max tensor: ")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_lerp_addc(dtype, layout):
    a, b, w = make((3, 4), dtype, layout), make((4,), dtype), make((3, 1), dtype)
    close(lib.ct_lerp(h(a), h(b), h(w)), torch.lerp(a, b, w))
    for ws in (0.25, 0.75, -1.0, 2.0):
        close(lib.ct_lerp_scalar(h(a), h(b), ws), torch.lerp(a, b, ws))
    t2 = make((3, 4), dtype, layout) + 3
    close(lib.ct_addcmul(h(a), h(b), h(t2), 0.5), torch.addcmul(a, b, t2, value=0.5))
    close(lib.ct_addcdiv(h(a), h(b), h(t2), -2.0), torch.addcdiv(a, b, t2, value=-2.0))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_addcmul_int(dtype):
    a, b, c = make((3, 4), dtype), make((4,), dtype), make((3, 4), dtype)
    close(lib.ct_addcmul(h(a), h(b), h(c), 2), torch.addcmul(a, b, c, value=2))


def test_lerp_addc_errors_grad():
    x = rand((3, 4), torch.float32)
    expect_error(lib.ct_lerp_scalar(h(x), h(x.double()), 0.5), lambda: torch.lerp(x, x.double(), 0.5))
    expect_error(lib.ct_lerp(h(x), h(x), h(x.double())), lambda: torch.lerp(x, x, x.double()))
    xl = x.long()
    expect_error(lib.ct_lerp_scalar(h(xl), h(xl), 0.5), lambda: torch.lerp(xl, xl, 0.5))
    expect_error(lib.ct_addcdiv(h(xl), h(xl), h(xl), 1.0), lambda: torch.addcdiv(xl, xl, xl))
    expect_error(lib.ct_addcmul(h(x), h(x), h(rand((5,), torch.float32)), 1.0),
                 lambda: torch.addcmul(x, x, rand((5,), torch.float32)))
    a, b, w = make((3, 4), layout="transposed"), rand((4,)), rand((3, 1))
    grad_check(lambda x, y, z: lib.ct_lerp(x, y, z), torch.lerp, [a, b, w], [0, 1, 2], "lerp: ", name="LerpBackward1")
    grad_check(lambda x, y: lib.ct_lerp_scalar(x, y, 0.3), lambda x, y: torch.lerp(x, y, 0.3), [a, b], [0, 1],
               "lerp scalar: ", name="LerpBackward0")
    c = rand((3, 4)) + 3
    grad_check(lambda x, y, z: lib.ct_addcmul(x, y, z, 0.7), lambda x, y, z: torch.addcmul(x, y, z, value=0.7),
               [a, b, c], [0, 1, 2], "addcmul: ", name="AddcmulBackward0")
    grad_check(lambda x, y, z: lib.ct_addcdiv(x, y, z, 0.7), lambda x, y, z: torch.addcdiv(x, y, z, value=0.7),
               [a, b, c], [0, 1, 2], "addcdiv: ", name="AddcdivBackward0")


# ------------------------------------------------------------------ meta shapes = cpu shapes
def test_meta_shapes():
    f32, i64 = torch.float32, torch.int64
    cases = [
        (lambda m: lib.ct_gather(m((3, 4), f32), 1, m((2, 2), i64)), (2, 2)),
        (lambda m: lib.ct_scatter_add(m((3, 4), f32), 1, m((2, 2), i64), m((2, 2), f32)), (3, 4)),
        (lambda m: lib.ct_index(m((3, 4, 5), f32), arr([None, m((2, 6), i64)]), 2), (3, 2, 6, 5)),
        (lambda m: lib.ct_index(m((3, 4, 5), f32), arr([m((2,), i64), None, m((2,), i64)]), 3), (2, 4)),
        (lambda m: lib.ct_take(m((3, 4), f32), m((2, 7), i64)), (2, 7)),
        (lambda m: lib.ct_flip(m((3, 4), f32), ct.i32((0,)), 1), (3, 4)),
        (lambda m: lib.ct_roll(m((3, 4), f32), ct.i64((1,)), 1, ct.i32((0,)), 1), (3, 4)),
        (lambda m: lib.ct_repeat(m((3, 4), f32), ct.i64((2, 2, 3)), 3), (2, 6, 12)),
        (lambda m: lib.ct_tril(m((3, 4), f32), 0), (3, 4)),
        (lambda m: lib.ct_pad(m((3, 4), f32), ct.i64((1, 2, 3, 4)), 4, 0.0), (10, 7)),
        (lambda m: lib.ct_masked_fill(m((3, 4), f32), m((2, 1, 4), torch.bool), 0.0), (2, 3, 4)),
        (lambda m: lib.ct_addcmul(m((3, 4), f32), m((4,), f32), m((2, 1, 1), f32), 1.0), (2, 3, 4)),
        (lambda m: lib.ct_stack(arr([m((3, 4), f32), m((3, 4), f32)]), 2, 1), (3, 2, 4)),
    ]

    def cpu(shape, dtype):
        return h(torch.zeros(shape, dtype=dtype))

    for k, (fn, want) in enumerate(cases):
        assert_meta_shape(fn(meta), want, f"case {k}: ")
        assert ct.shape(ct.check(fn(cpu))) == want, f"case {k}: cpu shape"
    v, i = ctypes.c_void_p(), ctypes.c_void_p()
    ct.check_int(lib.ct_topk(meta((3, 5), f32), 2, 1, True, True, ctypes.byref(v), ctypes.byref(i)))
    assert_meta_shape(v.value, (3, 2))
    assert_meta_shape(i.value, (3, 2))
    assert ct.dtype(i.value) == ct.CT_INT64
    # errors are the same on meta
    ct.assert_error(lib.ct_gather(meta((3, 4), f32), 1, meta((3,), i64)),
                    ct.torch_error(lambda: torch.gather(torch.zeros(3, 4), 1, torch.zeros(3, dtype=torch.long))))
    ct.clear_error()


# ------------------------------------------------------------------ in place, higher order
ct.declare("ct_mul", T, [CT, CT])
ct.declare("ct_sum", T, [CT])
ct.declare("ct_autograd_grad", c_int, [TP, TP, c_int, TP, c_int, TP, c_bool, c_bool, c_bool])


def test_inplace_on_nonleaf_grad():
    """In-place index ops on a non-leaf: gradients flow as in torch."""
    if not ct.has("ct_mul", "ct_autograd_grad"):
        pytest.skip("needs ct_mul and ct_autograd_grad")
    x = rand((3, 4))
    idx = torch.tensor([[0, 1, 2, 0]])
    m = rand((3, 4), torch.bool)
    src = rand((1, 4))
    vals = rand((2, 4))
    ii = torch.tensor([2, 0])

    def torch_f(t, s, v):
        y = t * 2
        y.scatter_(0, idx, s)
        y.masked_fill_(m, 0.5)
        y.index_put_((ii,), v, accumulate=True)
        return y

    def ct_f(t, s, v):
        y = ct.check(lib.ct_mul(t, h(torch.tensor(2.0, dtype=torch.float64))))
        ct.check_int(lib.ct_scatter_(y, 0, h(idx), s))
        ct.check_int(lib.ct_masked_fill_(y, h(m), 0.5))
        ct.check_int(lib.ct_index_put_(y, arr([h(ii)]), 1, v, True))
        return y

    grad_check(ct_f, torch_f, [x, src, vals], [0, 1, 2], "in place: ")
    hx = h(x)
    ct.check_int(lib.ct_set_requires_grad(hx, True))
    r = lib.ct_masked_fill_(hx, h(m), 1.0)
    ct.assert_error(r, "a leaf Variable that requires grad is being used in an in-place operation.")
    ct.clear_error()
    xi = torch.tensor([1, 2, 3])
    r = lib.ct_clamp_(h(xi), 0.5, 2.5)
    # torch names the C++ type here ("long int"): compare the sentence up to it
    ct.assert_error(r, ct.torch_error(lambda: xi.clone().clamp_(0.5, 2.5)).rsplit(" type ", 1)[0])
    ct.clear_error()


SECOND_ORDER = [
    ("gather", lambda t: lib.ct_gather(t, 1, h(torch.tensor([[0, 0, 3], [1, 2, 2], [3, 3, 3]]))),
     lambda t: torch.gather(t, 1, torch.tensor([[0, 0, 3], [1, 2, 2], [3, 3, 3]]))),
    ("index", lambda t: lib.ct_index(t, arr([None, h(torch.tensor([3, 0, 3]))]), 2),
     lambda t: t[:, torch.tensor([3, 0, 3])]),
    ("index_select", lambda t: lib.ct_index_select(t, 0, h(torch.tensor([2, 2, 0]))),
     lambda t: torch.index_select(t, 0, torch.tensor([2, 2, 0]))),
    ("where", lambda t: lib.ct_where(h(torch.tensor([True, False, True, False])), t, h(torch.tensor(1.0).double())),
     lambda t: torch.where(torch.tensor([True, False, True, False]), t, torch.tensor(1.0).double())),
    ("clamp", lambda t: lib.ct_clamp(t, -0.5, 0.5), lambda t: torch.clamp(t, -0.5, 0.5)),
    ("repeat", lambda t: lib.ct_repeat(t, ct.i64((2, 1)), 2), lambda t: t.repeat(2, 1)),
    ("pad", lambda t: lib.ct_pad(t, ct.i64((1, -1)), 2, 2.0), lambda t: F.pad(t, (1, -1), value=2.0)),
    ("embedding", lambda t: lib.ct_embedding(t, h(torch.tensor([0, 2, 2])), 0),
     lambda t: F.embedding(torch.tensor([0, 2, 2]), t, padding_idx=0)),
    ("cat", lambda t: lib.ct_cat(arr([t, t]), 2, 1), lambda t: torch.cat([t, t], 1)),
    ("flip_roll", lambda t: lib.ct_roll(ct.check(lib.ct_flip(t, ct.i32((1,)), 1)), ct.i64((1,)), 1, ct.i32((0,)), 1),
     lambda t: torch.roll(torch.flip(t, (1,)), 1, 0)),
    ("lerp", lambda t: lib.ct_lerp(t, h(torch.ones(3, 4).double()), t), lambda t: torch.lerp(t, torch.ones(3, 4).double(), t)),
    ("addcdiv", lambda t: lib.ct_addcdiv(t, t, h(torch.full((3, 4), 2.0).double()), 0.5),
     lambda t: torch.addcdiv(t, t, torch.full((3, 4), 2.0).double(), value=0.5)),
]


@pytest.mark.parametrize("name,cfn,tfn", SECOND_ORDER, ids=[c[0] for c in SECOND_ORDER])
def test_second_order(name, cfn, tfn):
    """d/dx sum(v * (d/dx sum(op(x)^2 * w))): create_graph through the formulas."""
    if not ct.has("ct_mul", "ct_sum", "ct_autograd_grad"):
        pytest.skip("needs ct_mul, ct_sum and ct_autograd_grad")
    x = rand((3, 4))
    xt = x.clone().requires_grad_(True)
    y = tfn(xt)
    w = torch.randn(y.shape, generator=GEN, dtype=torch.float64)
    v = torch.randn(x.shape, generator=GEN, dtype=torch.float64)
    (g1,) = torch.autograd.grad((y * y * w).sum(), xt, create_graph=True)
    (g2,) = torch.autograd.grad((g1 * v).sum(), xt)
    hx = h(x)
    ct.check_int(lib.ct_set_requires_grad(hx, True))
    hy = ct.check(cfn(hx))
    f = ct.check(lib.ct_sum(ct.check(lib.ct_mul(ct.check(lib.ct_mul(hy, hy)), h(w)))))
    res = (ctypes.c_void_p * 1)()
    ct.check_int(lib.ct_autograd_grad(arr([f]), None, 1, arr([hx]), 1, res, True, True, False))
    close(res[0], g1.detach(), "first: ")
    f2 = ct.check(lib.ct_sum(ct.check(lib.ct_mul(res[0], h(v)))))
    res2 = (ctypes.c_void_p * 1)()
    ct.check_int(lib.ct_autograd_grad(arr([f2]), None, 1, arr([hx]), 1, res2, False, False, True))
    if g2 is None or res2[0] is None:
        assert res2[0] is None or torch.count_nonzero(ct.to_torch(res2[0])) == 0
    else:
        close(res2[0], g2, "second: ")


def test_empty_and_scalar_inputs():
    e = torch.zeros(0, 3, dtype=torch.float64)
    s = torch.tensor(1.5, dtype=torch.float64)
    close(lib.ct_cat(arr([h(e), h(e)]), 2, 0), torch.cat([e, e]))
    close(lib.ct_stack(arr([h(s), h(s)]), 2, 0), torch.stack([s, s]))
    close(lib.ct_index_select(h(e), 1, h(torch.tensor([2, 0]))), torch.index_select(e, 1, torch.tensor([2, 0])))
    close(lib.ct_masked_fill(h(e), h(torch.zeros(0, 3, dtype=torch.bool)), 1.0), e.masked_fill(torch.zeros(0, 3, dtype=torch.bool), 1.0))
    close(lib.ct_masked_fill(h(s), h(torch.tensor(True)), 7.0), s.masked_fill(torch.tensor(True), 7.0))
    close(lib.ct_flip(h(e), ct.i32((0, 1)), 2), torch.flip(e, (0, 1)))
    close(lib.ct_roll(h(e), ct.i64((1,)), 1, ct.i32((1,)), 1), torch.roll(e, 1, 1))
    close(lib.ct_repeat(h(e), ct.i64((2, 3)), 2), e.repeat(2, 3))
    close(lib.ct_repeat(h(s), ct.i64((2,)), 1), s.repeat(2))
    close(lib.ct_pad(h(e), ct.i64((1, 1, 1, 0)), 4, 2.0), F.pad(e, (1, 1, 1, 0), value=2.0))
    close(lib.ct_tril(h(torch.zeros(2, 0, 3).double()), 0), torch.tril(torch.zeros(2, 0, 3).double()))
    close(lib.ct_where(h(torch.tensor(False)), h(s), h(e)), torch.where(torch.tensor(False), s, e))
    close(lib.ct_clamp(h(s), 0, 1), torch.clamp(s, 0, 1))
    close(lib.ct_take(h(s), h(torch.tensor([0, -1]))), torch.take(s, torch.tensor([0, -1])))
    close(lib.ct_index(h(e), arr([h(torch.tensor([], dtype=torch.long))]), 1), e[torch.tensor([], dtype=torch.long)])
    close(lib.ct_lerp(h(s), h(torch.tensor(float("nan")).double()), h(s)), torch.lerp(s, torch.tensor(float("nan")).double(), s))
    close(lib.ct_where(h(torch.tensor([True, False])), h(torch.tensor([float("nan"), 1.0])), h(torch.tensor([2.0, float("inf")]))),
          torch.where(torch.tensor([True, False]), torch.tensor([float("nan"), 1.0]), torch.tensor([2.0, float("inf")])))
    expect_error(lib.ct_index(h(e), arr([h(torch.tensor([0]))]), 1), lambda: e[torch.tensor([0])])
    expect_error(lib.ct_take(h(e), h(torch.tensor([0]))), lambda: torch.take(e, torch.tensor([0])))


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                                   torch.float16, torch.bfloat16, torch.float32, torch.float64],
                         ids=lambda d: str(d)[6:])
def test_sort_keys_every_dtype(dtype):
    """sort / argsort / topk of every dtype along a long dim (the three topk
    paths) and along dim 0 (strided slices): the keys are loaded as int32 (bool,
    8-, 16-, 32-bit integers), int64, float (16-bit floats) or double, so the
    extremes of each dtype, uint8 above 127, ties and NaN must keep torch's
    stable order. float16 against torch's order of the same values in float32."""
    n = 1200
    if dtype == torch.bool:
        x = torch.randint(0, 2, (3, n), generator=GEN).bool()
    elif dtype.is_floating_point:
        x = torch.randint(-50, 50, (3, n), generator=GEN).to(dtype) / 4
        x[0, 7] = x[1, 100] = float("nan")
        x[2, 3], x[2, 4] = float("inf"), float("-inf")
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max, (3, n), generator=GEN, dtype=torch.int64).to(dtype)
        x[0, :50] = 7  # ties
        x[1, 10], x[1, 11] = info.min, info.max
    ref = x.float() if dtype == torch.float16 else x
    for v, dim in ((x, 1), (x.t().contiguous().t(), 1), (x, 0)):
        r = ref.t().contiguous().t() if v is not x else ref
        for desc in (False, True):
            _, ti = torch.sort(r, dim=dim, descending=desc, stable=True)
            got_v, got_i = ct_sort(v, dim, desc, True)
            close(got_i, ti, f"sort {dim} desc={desc} indices: ")
            close(got_v, torch.gather(v, dim, ti), f"sort {dim} desc={desc} values: ")
            if dtype == torch.bool or dim == 0:
                continue
            for k in (5, 64, 100, 700):
                tv = torch.topk(r, k, dim, largest=desc)[0]
                got_v, got_i = ct_topk(v, k, dim, desc, True)
                close(lib.ct_gather(h(v), dim, got_i), tv.to(dtype), f"topk k={k} largest={desc}: ")


def test_index_and_index_put_check_order():
    """torch's order for x[indices] and index_put: the entries' count, their dtypes,
    the masks' shapes in turn (index_put with one value, not accumulating, looks at
    its leading mask first: the masked_fill dispatch), an index past the dims, a
    dim of size 0 no index fits, the value's shape, then its dtype; values where
    torch succeeds"""
    aten = torch.ops.aten
    b = lambda *v: torch.tensor(v, dtype=torch.bool)  # noqa: E731
    selfs = [torch.zeros(()), torch.zeros(3), torch.zeros(2, 3), torch.zeros(0, 3), torch.zeros(2, 0),
             torch.zeros(2, 3, dtype=torch.float64), torch.zeros(3, 2)]
    idxs = [[torch.tensor([0])], [torch.tensor(0)], [torch.tensor([5])], [b(True, False)],
            [b([True, False, True], [False, False, True])], [None, torch.tensor([1, 2])],
            [torch.tensor([0, 1]), torch.tensor([[2], [0]])], [torch.tensor([0.5])],
            [torch.tensor([0]), torch.tensor([0]), torch.tensor([0])], [torch.tensor([1, 0, 1], dtype=torch.uint8)],
            [b(True, False, True), torch.tensor([0.5])], [b(True, True, True), b(False, True)],
            [torch.ones(3, 2, dtype=torch.bool), torch.tensor([0])],
            [None, b(True, False, True)], [torch.ones(3, 3, dtype=torch.bool)]]
    vals = [torch.tensor(1.0), torch.zeros(7), torch.ones(1), torch.ones(2, 1), torch.tensor(2.0, dtype=torch.float64),
            torch.ones(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x in selfs:
            for ix in idxs:
                hix = lambda: arr([None if i is None else h(i) for i in ix])  # noqa: E731
                what = f"{tuple(x.shape)}{[None if i is None else (tuple(i.shape), str(i.dtype)) for i in ix]}"
                err = ct.torch_error(lambda: aten.index(x, ix))
                ct.clear_error()
                got = lib.ct_index(h(x), hix(), len(ix))
                if err is None:
                    close(got, aten.index(x, ix), what=what)
                else:
                    ct.assert_error(got, err, what=what + ": ")
                for v in vals:
                    for acc in (False, True):
                        w = f"index_put {what} {tuple(v.shape)} {v.dtype} acc={acc}: "
                        err = ct.torch_error(lambda: aten.index_put(x, ix, v, acc))
                        ct.clear_error()
                        got = lib.ct_index_put(h(x), hix(), len(ix), h(v), acc)
                        if err is None:
                            close(got, aten.index_put(x, ix, v, acc), what=w)
                        else:
                            ct.assert_error(got, err, what=w)


def test_masked_scatter_check_order():
    """torch's masked_scatter broadcasts mask and self first (out of place), then
    wants source of self's dtype, then a bool mask; masked_scatter_ expands the
    mask to self in expand's words (torch's type names), after the dtypes"""
    import itertools
    selfs = [torch.zeros(2, 3), torch.zeros(3), torch.zeros(2, 3, dtype=torch.float64), torch.zeros(4, 3)]
    masks = [torch.tensor([True, False, True]), torch.tensor([[True], [False]]), torch.ones(2, 3, dtype=torch.bool),
             torch.ones(4, dtype=torch.bool)]
    srcs = [torch.arange(6.0), torch.arange(2.0), torch.arange(6.0, dtype=torch.float64)]
    for x, m, s in itertools.product(selfs, masks, srcs):
        for inplace in (False, True):
            tfn = (lambda: x.clone().masked_scatter_(m, s)) if inplace else (lambda: x.masked_scatter(m, s))
            what = f"masked_scatter{'_' if inplace else ''}({tuple(x.shape)} {x.dtype}, {tuple(m.shape)}, {s.dtype}): "
            err = ct.torch_error(tfn)
            ct.clear_error()
            if inplace:
                hx = h(x.clone())
                got = hx if lib.ct_masked_scatter_(hx, h(m), h(s)) == 0 else None
            else:
                got = lib.ct_masked_scatter(h(x), h(m), h(s))
            if err is None:
                close(got, tfn(), what=what)
            else:
                ct.assert_error(got, err, what=what)


def test_zero_dim_bool_index_as_python():
    """x[torch.tensor(True)] as torch's Python indexing: a new dim of size 1 (0 for
    False) at the mask's place, with other indices too; index_put (x[m] = v) the
    same way (torch's aten index_put asserts internally there: its Python
    semantics are followed); gradients"""
    bt, bf = torch.tensor(True), torch.tensor(False)
    x2 = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    for x, ix in [(x2, [bt]), (x2, [bf]), (x2, [None, bt]), (x2, [torch.tensor([1]), bt]),
                  (x2, [bt, torch.tensor([1, 0])]), (torch.tensor(5.0), [bt]), (torch.tensor(5.0), [bf]), (x2, [bt, bt])]:
        what = f"x{tuple(x.shape)}[{[None if i is None else i.tolist() for i in ix]}]: "
        hix = lambda: arr([None if i is None else h(i) for i in ix])  # noqa: E731
        py = tuple(slice(None) if i is None else i for i in ix)
        close(lib.ct_index(h(x), hix(), len(ix)), x[py], what=what)
        y = x.clone()
        y[py] = 7.0
        close(lib.ct_index_put(h(x), hix(), len(ix), h(torch.tensor(7.0, dtype=x.dtype)), False), y, what=what + "= 7: ")
        hy = h(x.clone())
        assert lib.ct_index_put_(hy, hix(), len(ix), h(torch.tensor(7.0, dtype=x.dtype)), False) == 0
        close(hy, y, what=what + "in place: ")
        tx = x.clone().requires_grad_()
        out = tx[py]
        g = torch.randn(out.shape, dtype=x.dtype)
        want, = torch.autograd.grad(out, tx, g)
        hl = ct.leaf(x)
        got = ct.grads_of(ct.check(lib.ct_index(hl, hix(), len(ix))), [hl], g)[0]
        close(got, want, what=what + "grad: ")


def test_index_put_out_of_place_keeps_the_layout():
    """index_put (out of place) is torch's self.clone(preserve_format).index_put_:
    a transposed or permuted self gives a result with its strides."""
    for base in [torch.randn(4, 5, dtype=torch.float64).t(), torch.randn(2, 3, 4, dtype=torch.float64).permute(2, 0, 1),
                 torch.randn(3, 6, dtype=torch.float64)[:, ::2]]:
        idx = torch.tensor([2, 0])
        v = torch.tensor(7.0, dtype=torch.float64)
        for acc in (False, True):
            want = base.index_put((idx,), v, accumulate=acc)
            got = ct.check(lib.ct_index_put(h(base), arr([h(idx)]), 1, h(v), acc))
            ct.assert_same_layout(got, want, f"index_put {tuple(base.shape)} ")
            ct.assert_close(got, want)


def test_index_by_colons_alone_is_a_view():
    """t[:] and t[:, :] (NULL indices only) are Python's slicing: views sharing
    t's storage with its strides, as torch's; more of them than dims (a 0-dim
    tensor's one) are aten's too many indices."""
    x = torch.randn(3, 4, dtype=torch.float64).t()
    hx = h(x)
    for n in (1, 2):
        got = ct.check(lib.ct_index(hx, arr([None] * n), n))
        ct.assert_same_layout(got, x[(slice(None),) * n])
        assert ct.shares_storage(got, hx)
    msg = ct.torch_message(ct.torch_error(lambda: torch.ops.aten.index(torch.tensor(1.0), [None])))
    ct.assert_error(lib.ct_index(h(torch.tensor(1.0)), arr([None]), 1), msg)
    msg = ct.torch_message(ct.torch_error(lambda: x[:, :, :]))
    ct.assert_error(lib.ct_index(hx, arr([None] * 3), 3), msg)


def test_writes_whose_inputs_share_the_written_memory():
    """torch's assert_no_overlap in index_put_, scatter_ and scatter_add_: values,
    src or an index over memory of the written-to tensor (all of it, or part)
    is an error that leaves it unchanged; the masked_fill dispatch of index_put_
    (one value, one mask) and disjoint parts of one storage go through"""
    perm = torch.tensor([1, 0, 3, 2])
    mask = torch.tensor([True, False, True, False])
    nr = lambda hx, a, n: ct.check(lib.ct_narrow(hx, 0, a, n))  # noqa: E731

    def put(acc, k=None):
        return (lambda x: x.index_put_((perm[:k] % 2 if k else perm,), x[1:1 + k] if k else x, accumulate=acc),
                lambda hx: lib.ct_index_put_(nr(hx, 0, k) if k else hx, arr([h(perm[:k] % 2 if k else perm)]), 1,
                                             nr(hx, 1, k) if k else hx, acc), k)
    cases = {
        "index_put_ values = self": put(False),
        "index_put_ accumulate, values = self": put(True),
        "index_put_ values over part of self": put(False, 2),
        "scatter_ src = self": (lambda x: x.scatter_(0, perm, x), lambda hx: lib.ct_scatter_(hx, 0, h(perm), hx), None),
        "scatter_add_ src = self": (lambda x: x.scatter_add_(0, perm, x),
                                    lambda hx: lib.ct_scatter_add_(hx, 0, h(perm), hx), None),
        "index_put_ values disjoint": (lambda x: x[:2].index_put_((perm[:2] % 2,), x[2:]),
                                       lambda hx: lib.ct_index_put_(nr(hx, 0, 2), arr([h(perm[:2] % 2)]), 1,
                                                                    nr(hx, 2, 2), False), None),
        "index_put_ as masked_fill, value a 0-dim view of self": (
            lambda x: x.index_put_((mask,), x[1]),
            lambda hx: lib.ct_index_put_(hx, arr([h(mask)]), 1, ct.check(lib.ct_select(hx, 0, 1)), False), None),
    }
    for what, (tf, cf, _) in cases.items():
        x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
        tx = x.clone()
        want = ct.torch_error(lambda: tf(tx))
        hx = ct.check(lib.ct_clone(h(x)))
        rc = cf(hx)
        if want is None:
            assert rc == 0, f"{what}: {ct.last_error()}"
        else:
            ct.assert_error(rc, want, what=what + ": ")
            ct.clear_error()
        close(hx, tx, what=what + ": ")
    # an index tensor that is the written-to tensor itself (int64 self)
    for what, tf, cf in [
            ("index_put_", lambda x: x.index_put_((x,), torch.tensor([5, 6, 7, 8])),
             lambda hx: lib.ct_index_put_(hx, arr([hx]), 1, h(torch.tensor([5, 6, 7, 8])), False)),
            ("scatter_", lambda x: x.scatter_(0, x, torch.tensor([5, 6, 7, 8])),
             lambda hx: lib.ct_scatter_(hx, 0, hx, h(torch.tensor([5, 6, 7, 8]))))]:
        tx = perm.clone()
        want = ct.torch_error(lambda: tf(tx))
        hx = ct.check(lib.ct_clone(h(perm)))
        ct.assert_error(cf(hx), want, what=what + " index = self: ")
        ct.clear_error()
        close(hx, tx)


def test_writes_into_a_strided_view_from_itself():
    """torch's get_overlap_status calls a tensor and itself a full overlap before
    it asks whether the memory is dense: x.index_put_((i,), x) and x.scatter_(0, i,
    x) into a strided view x (a column, a slice with a step) fail, x unchanged"""
    perm = torch.tensor([1, 0, 2])
    views = {"column": lambda b: b[:, 1], "step 2": lambda b: b[0, ::2]}
    cviews = {"column": lambda hb: ct.check(lib.ct_select(hb, 1, 1)),
              "step 2": lambda hb: ct.check(lib.ct_slice(ct.check(lib.ct_select(hb, 0, 0)), 0, 0, 6, 2))}
    ops = {
        "index_put_": (lambda x: x.index_put_((perm,), x), lambda hx: lib.ct_index_put_(hx, arr([h(perm)]), 1, hx, False)),
        "index_put_ accumulate": (lambda x: x.index_put_((perm,), x, accumulate=True),
                                  lambda hx: lib.ct_index_put_(hx, arr([h(perm)]), 1, hx, True)),
        "scatter_": (lambda x: x.scatter_(0, perm, x), lambda hx: lib.ct_scatter_(hx, 0, h(perm), hx)),
        "scatter_add_": (lambda x: x.scatter_add_(0, perm, x), lambda hx: lib.ct_scatter_add_(hx, 0, h(perm), hx)),
    }
    for vname, view in views.items():
        for oname, (tf, cf) in ops.items():
            what = f"{oname} of a {vname} view into itself: "
            base = torch.arange(18, dtype=torch.float64).view(3, 6)
            tb = base.clone()
            want = ct.torch_error(lambda: tf(view(tb)))
            assert want is not None, what + "torch accepts it"
            hb = ct.check(lib.ct_clone(h(base)))
            ct.assert_error(cf(cviews[vname](hb)), want, what=what)
            ct.clear_error()
            close(hb, tb, what=what)
