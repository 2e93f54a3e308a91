"""Parity of the autograd engine's finer semantics with PyTorch 1.13: hooks that
change a gradient's type or size, in-place ops on views of bases that need no
gradient, retain_grad across in-place ops and under create_graph, what in-place
pow saves, and the node names of overloads and paths. Expected values, names
and messages come from torch at test time."""
import ctypes
import warnings
from ctypes import c_bool, c_char_p, c_double, c_int, c_void_p

import pytest

torch = pytest.importorskip("torch")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import CT, T, leaf  # noqa: E402

TP = ctypes.POINTER(c_void_p)
HOOK = ctypes.CFUNCTYPE(c_void_p, c_void_p, c_void_p)
ct.declare_elementwise(["sin", "exp"], ["add", "sub", "mul", "div", "pow", "remainder", "fmod", "atan2",
                                        "maximum", "minimum"])
for row in [
    ("ct_register_hook", c_int, [T, HOOK, c_void_p]),
    ("ct_retain_grad", c_int, [T]),
    ("ct_backward", c_int, [T, CT]),
    ("ct_backward_ex", c_int, [T, CT, c_bool, c_bool]),
    ("ct_autograd_grad", c_int, [TP, TP, c_int, TP, c_int, TP, c_bool, c_bool, c_bool]),
    ("ct_grad", T, [CT]),
    ("ct_set_grad", c_int, [T, CT]),
    ("ct_grad_fn_name", c_char_p, [CT]),
    ("ct_requires_grad", c_bool, [CT]),
    ("ct_sum", T, [CT]),
    ("ct_narrow", T, [CT, c_int, ct.c_int64, ct.c_int64]),
    ("ct_select", T, [CT, c_int, ct.c_int64]),
    ("ct_unsqueeze", T, [CT, c_int]),
    ("ct_transpose", T, [CT, c_int, c_int]),
    ("ct_to_dtype", T, [CT, c_int]),
    ("ct_clone", T, [CT]),
    ("ct_rsub_scalar", T, [CT, c_double]),
    ("ct_fill_", c_int, [T, c_double]),
    ("ct_zero_", c_int, [T]),
    ("ct_floor_divide", T, [CT, CT]),
    ("ct_div_mode", T, [CT, CT, c_char_p]),
    ("ct_div_scalar_mode", T, [CT, c_double, c_char_p]),
    ("ct_outer", T, [CT, CT]),
    ("ct_matmul", T, [CT, CT]),
    ("ct_linear", T, [CT, CT, CT]),
    ("ct_l1_loss", T, [CT, CT, c_int]),
    ("ct_cross_entropy", T, [CT, CT, CT, c_int, ct.c_int64, c_double]),
    ("ct_add_scalar_", c_int, [T, c_double]),
]:
    ct.declare(*row)
lib = ct.lib
pytestmark = ct.requires("ct_register_hook", "ct_retain_grad", "ct_autograd_grad")


def rand(shape, seed, dtype=torch.float64):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def name(h):
    n = lib.ct_grad_fn_name(ct.check(h))
    return n.decode() if n else None


def tname(t):
    return type(t.grad_fn).__name__ if t.grad_fn is not None else None


def grad(h):
    return ct.check(lib.ct_grad(h))


# ---------------------------------------------------------------- hooks
HOOK_CASES = {  # a replacement of another size or type: (ctorch hook body, torch hook, torch's words)
    "narrowed": (lambda g: lib.ct_narrow(g, 0, 0, 2), lambda g: g[:2], "has changed the size of value"),
    "summed": (lambda g: lib.ct_sum(g), lambda g: g.sum(), "has changed the size of value"),
    "double": (lambda g: lib.ct_to_dtype(g, ct.CT_FLOAT64), lambda g: g.double(),
               "has changed the type of value (was torch.FloatTensor got torch.DoubleTensor)"),
}


@pytest.mark.parametrize("case", sorted(HOOK_CASES))
@pytest.mark.parametrize("on", ["leaf", "nonleaf"])
def test_hook_may_not_change_the_gradients_type_or_size(case, on):
    """torch's check_variable_result: a hook's replacement keeps the value's type and
    size, on a leaf (before .grad is written) and on a non-leaf (before its node runs)"""
    chook, thook, words = HOOK_CASES[case]
    x = rand(3, 1, torch.float32)
    tx = x.clone().requires_grad_()
    ty = tx if on == "leaf" else tx.sin()
    ty.register_hook(thook)
    with pytest.raises(RuntimeError) as e:
        (ty.exp().sum()).backward()
    assert words in str(e.value)
    hx = leaf(x)
    hy = hx if on == "leaf" else ct.check(lib.ct_sin(hx))
    cb = HOOK(lambda g, ctx: chook(g))
    assert lib.ct_register_hook(hy, cb, None) == 0
    assert lib.ct_backward(ct.check(lib.ct_sum(ct.check(lib.ct_exp(hy)))), None) == -1
    assert words in ct.last_error()
    assert not lib.ct_grad(hx)  # no .grad was written
    ct.clear_error()


def test_hook_replacement_of_the_same_type_and_size_is_taken():
    x = rand((2, 3), 2)
    tx = x.clone().requires_grad_()
    ty = tx.sin()
    ty.register_hook(lambda g: g * 3)
    ty.exp().sum().backward()
    hx = leaf(x)
    hy = ct.check(lib.ct_sin(hx))
    cb = HOOK(lambda g, ctx: lib.ct_mul_scalar(g, 3.0))
    assert lib.ct_register_hook(hy, cb, None) == 0
    assert lib.ct_backward(ct.check(lib.ct_sum(ct.check(lib.ct_exp(hy)))), None) == 0, ct.last_error()
    ct.assert_close(grad(hx), tx.grad, rtol=1e-12, atol=1e-12)


# ------------------------------------------------- in-place ops on views
BINARY_INPLACE = ["mul", "div", "add", "sub", "pow", "atan2"]
VIEWS = {  # (ctorch view of a [4, 3] base, torch's)
    "narrow": (lambda b: lib.ct_narrow(b, 0, 1, 2), lambda b: b.narrow(0, 1, 2)),
    "select": (lambda b: lib.ct_select(b, 1, 2), lambda b: b.select(1, 2)),
    "transpose": (lambda b: lib.ct_transpose(b, 0, 1), lambda b: b.t()),
    "unsqueeze": (lambda b: lib.ct_unsqueeze(b, 0), lambda b: b.unsqueeze(0)),
}


@pytest.mark.parametrize("op", BINARY_INPLACE)
@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("loss_of", ["base", "view"])
def test_inplace_into_a_view_of_a_base_that_needs_no_grad(op, view, loss_of):
    """b needs no gradient, w does: v = view(b); v.op_(w) gives b a CopySlices whose
    backward computes only w's part (mul_'s gradient for b needs w, which mul_ does
    not save when b needs none: backward failed with no message)"""
    cview, tview = VIEWS[view]
    b0 = rand((4, 3), 3).abs() + 0.5
    tb = b0.clone()
    tv = tview(tb)
    w0 = rand(tuple(tv.shape), 4).abs() + 0.5
    tw = w0.clone().requires_grad_()
    getattr(tv, op + "_")(tw)
    (tb if loss_of == "base" else tv).pow(2).sum().backward()
    hb = ct.check(lib.ct_mul_scalar(ct.from_torch(b0), 1.0))
    hv = ct.check(cview(hb))
    hw = leaf(w0)
    assert getattr(lib, "ct_" + op + "_")(hv, hw) == 0, ct.last_error()
    assert name(hb) == tname(tb) == "CopySlices"
    loss = ct.check(lib.ct_sum(ct.check(lib.ct_pow_scalar(hb if loss_of == "base" else hv, 2.0))))
    assert lib.ct_backward(loss, None) == 0, ct.last_error()
    ct.assert_close(hb, tb.detach(), rtol=1e-12, atol=1e-12)
    ct.assert_close(grad(hw), tw.grad, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------- retain_grad
def test_retain_grad_follows_an_inplace_op():
    """torch moves a retained gradient to the tensor's new history: y.grad is the
    gradient of y after y.mul_(3), not of its value before"""
    x = rand(3, 5)
    tx = x.clone().requires_grad_()
    ty = tx * 2
    ty.retain_grad()
    ty.mul_(3)
    ty.exp_()
    (ty * ty).sum().backward()
    hx = leaf(x)
    hy = ct.check(lib.ct_mul_scalar(hx, 2.0))
    assert lib.ct_retain_grad(hy) == 0
    assert lib.ct_mul_scalar_(hy, 3.0) == 0 and lib.ct_exp_(hy) == 0
    assert lib.ct_backward(ct.check(lib.ct_sum(ct.check(lib.ct_mul(hy, hy)))), None) == 0, ct.last_error()
    ct.assert_close(grad(hy), ty.grad, rtol=1e-12, atol=1e-12)
    ct.assert_close(grad(hx), tx.grad, rtol=1e-12, atol=1e-12)


def test_retained_grad_under_create_graph_has_history():
    """torch's retain_grad hook clones the gradient: under create_graph the clone is
    recorded (CloneBackward0) and can be differentiated again"""
    x = rand(3, 6)
    tx = x.clone().requires_grad_()
    ty = tx.sin()
    ty.retain_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's reference-cycle warning for backward(create_graph)
        (ty ** 3).sum().backward(create_graph=True)
    hx = leaf(x)
    hy = ct.check(lib.ct_sin(hx))
    assert lib.ct_retain_grad(hy) == 0
    loss = ct.check(lib.ct_sum(ct.check(lib.ct_pow_scalar(hy, 3.0))))
    assert lib.ct_backward_ex(loss, None, False, True) == 0, ct.last_error()
    gy = ct.check(lib.ct_grad(hy))
    assert lib.ct_requires_grad(gy) == ty.grad.requires_grad
    assert name(gy) == tname(ty.grad)
    ct.assert_close(gy, ty.grad.detach(), rtol=1e-12, atol=1e-12)
    # d(sum(y.grad))/dx = d(sum(3 sin(x)^2))/dx
    (gx,) = torch.autograd.grad(ty.grad.sum(), tx)
    out = (c_void_p * 1)()
    assert lib.ct_autograd_grad((c_void_p * 1)(ct.check(lib.ct_sum(gy))), None, 1, (c_void_p * 1)(hx), 1, out,
                                False, False, False) == 0, ct.last_error()
    ct.assert_close(out[0], gx, rtol=1e-12, atol=1e-12)
    # y.grad's history holds y (saved by pow's backward): the cycle torch warns of, broken as it advises
    assert lib.ct_set_grad(hy, None) == 0 and lib.ct_set_grad(hx, None) == 0


@pytest.mark.parametrize("case", ["explicit", "expanded", "transposed_leaf"])
def test_first_grad_under_create_graph_is_the_leafs_own_copy(case):
    """torch's AccumulateGrad under create_graph stores clone_obey_contract(grad):
    a recorded copy in the leaf's layout, never the caller's gradient or an expand;
    a later backward accumulates into it without touching the caller's tensor"""
    x = rand((4, 3), 7).t() if case == "transposed_leaf" else rand((3, 4), 7)
    tx, tb = x.clone().detach().requires_grad_(), rand(x.shape, 8).requires_grad_()
    if case == "transposed_leaf":
        tx = x.detach().clone(memory_format=torch.preserve_format).requires_grad_()
        assert tx.stride() == (1, 3)
    g = torch.ones(x.shape, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case == "expanded":
            tx.sum().backward(create_graph=True)
        else:
            (tx + tb).backward(g, create_graph=True)
    first_name = tname(tx.grad)
    (tx * 3).sum().backward()
    hx = ct.from_torch(tx.detach())
    assert lib.ct_set_requires_grad(hx, True) == 0
    hb, hg = leaf(tb.detach()), ct.from_torch(g)
    if case == "expanded":
        assert lib.ct_backward_ex(ct.check(lib.ct_sum(hx)), None, False, True) == 0, ct.last_error()
    else:
        assert lib.ct_backward_ex(ct.check(lib.ct_add(hx, hb)), hg, False, True) == 0, ct.last_error()
    gx = grad(hx)
    assert name(gx) == first_name
    ct.assert_same_layout(gx, tx.grad)
    assert lib.ct_backward(ct.check(lib.ct_sum(ct.check(lib.ct_mul_scalar(hx, 3.0)))), None) == 0, ct.last_error()
    ct.assert_close(grad(hx), tx.grad.detach(), rtol=0, atol=0)
    ct.assert_close(hg, g, rtol=0, atol=0)
    if case != "expanded":
        ct.assert_close(grad(hb), tb.grad.detach(), rtol=0, atol=0)


# ------------------------------------------------------- what pow_ saves
@pytest.mark.parametrize("exponent", [2.0, 1.7, 3.0, 0.5, -1.0, 1.0, 0.0])
def test_inplace_pow_scalar_then_another_inplace_op(exponent):
    """x.pow_(e) saves x's old value, not its result (its result serves a tensor
    exponent's gradient only): a later in-place op on it still backpropagates"""
    x = rand(4, 7).abs() + 0.2
    tx = x.clone().requires_grad_()
    ty = tx * 1.0
    ty.pow_(exponent)
    ty.mul_(2)
    ty.sum().backward()
    hx = leaf(x)
    hy = ct.check(lib.ct_mul_scalar(hx, 1.0))
    assert lib.ct_pow_scalar_(hy, exponent) == 0 and lib.ct_mul_scalar_(hy, 2.0) == 0
    assert name(hy) == tname(ty)
    assert lib.ct_backward(ct.check(lib.ct_sum(hy)), None) == 0, ct.last_error()
    ct.assert_close(grad(hx), tx.grad, rtol=1e-12, atol=1e-12)


def test_pow_with_a_tensor_exponent_still_checks_its_result():
    """pow_(tensor exponent) saves its result for the exponent's gradient, as torch:
    modifying it afterwards fails in backward with torch's words"""
    x, e = rand(3, 8).abs() + 0.5, rand(3, 9)
    tx, te = x.clone().requires_grad_(), e.clone().requires_grad_()
    ty = tx * 1.0
    ty.pow_(te)
    ty.mul_(2)
    with pytest.raises(RuntimeError) as err:
        ty.sum().backward()
    hx, he = leaf(x), leaf(e)
    hy = ct.check(lib.ct_mul_scalar(hx, 1.0))
    assert lib.ct_pow_(hy, he) == 0 and lib.ct_mul_scalar_(hy, 2.0) == 0
    assert lib.ct_backward(ct.check(lib.ct_sum(hy)), None) == -1
    assert "modified by an inplace operation" in str(err.value) and "modified by an inplace operation" in ct.last_error()
    ct.clear_error()


# -------------------------------------------------------------- names
def test_node_names_of_overloads_and_paths():
    """the node of the overload torch's binding takes (x.pow(2) pow.Tensor_Scalar's
    PowBackward0, x % 2 RemainderBackward0, 2 - x RsubBackward1, rounding modes
    DivBackward2, fill_ FillBackward2, zero_ ZeroBackward0) and of the composite's last
    step (outer MulBackward0, l1_loss Abs / Mean / Sum, linear by its path, matmul by ranks)"""
    x, y = rand(3, 10), rand(3, 11)
    tx, ty = x.clone().requires_grad_(), y.clone().requires_grad_()
    hx, hy = leaf(x), leaf(y)
    cases = [(lib.ct_pow_scalar(hx, 2.0), tx.pow(2)), (lib.ct_pow(hx, hy), tx.pow(ty)),
             (lib.ct_remainder_scalar(hx, 2.0), tx.remainder(2)), (lib.ct_remainder(hx, hy), tx.remainder(ty)),
             (lib.ct_fmod_scalar(hx, 2.0), tx.fmod(2)), (lib.ct_fmod(hx, hy), tx.fmod(ty)),
             (lib.ct_rsub_scalar(hx, 2.0), torch.rsub(tx, 2)), (lib.ct_floor_divide(hx, hy), torch.floor_divide(tx, ty)),
             (lib.ct_outer(hx, hy), torch.outer(tx, ty)), (lib.ct_div_scalar(hx, 2.0), tx / 2)]
    for mode in [None, "trunc", "floor"]:
        m = mode.encode() if mode else None
        cases += [(lib.ct_div_mode(hx, hy, m), torch.div(tx, ty, rounding_mode=mode)),
                  (lib.ct_div_scalar_mode(hx, 2.0, m), torch.div(tx, 2.0, rounding_mode=mode))]
    for r, red in enumerate(["none", "mean", "sum"]):
        cases.append((lib.ct_l1_loss(hx, ct.from_torch(y), r), torch.nn.functional.l1_loss(tx, y, reduction=red)))
    for fill in ["fill", "zero"]:
        t = tx * 1.0
        h = ct.check(lib.ct_mul_scalar(hx, 1.0))
        if fill == "fill":
            t.fill_(2.5)
            assert lib.ct_fill_(h, 2.5) == 0
        else:
            t.zero_()
            assert lib.ct_zero_(h) == 0
        cases.append((h, t))
    for k, (h, t) in enumerate(cases):
        assert name(h) == tname(t), (k, name(h), tname(t))
        ct.assert_close(h, t.detach(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs,ws,bias", [((2, 3), (4, 3), False), ((2, 3), (4, 3), True), ((3,), (4, 3), False),
                                        ((3,), (4, 3), True), ((2, 5, 3), (4, 3), False), ((2, 5, 3), (4, 3), True),
                                        ((2, 3), (3,), False), ((3,), (3,), False), ((2, 2, 5, 3), (4, 3), True)])
def test_linear_node_names_follow_torchs_path(xs, ws, bias):
    x, w, b = rand(xs, 12), rand(ws, 13), rand(ws[:1], 14)
    tx, tw, tb = (t.clone().requires_grad_() for t in (x, w, b))
    t = torch.nn.functional.linear(tx, tw, tb if bias else None)
    h = lib.ct_linear(leaf(x), leaf(w), leaf(b) if bias else None)
    assert name(h) == tname(t)
    ct.assert_close(h, t.detach(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sa,sb", [((3,), (3, 4)), ((2, 3), (3,)), ((2, 5, 3), (3, 4)), ((3,), (2, 3, 4)),
                                   ((5, 3), (2, 3, 4)), ((2, 3), (4, 2, 3, 4)), ((2, 5, 3), (1, 3, 4))])
def test_matmul_node_names_by_ranks(sa, sb):
    a, b = rand(sa, 15), rand(sb, 16)
    ta, tb = a.clone().requires_grad_(), b.clone().requires_grad_()
    t = torch.matmul(ta, tb)
    h = lib.ct_matmul(leaf(a), leaf(b))
    assert name(h) == tname(t)
    ct.assert_close(h, t.detach(), rtol=1e-12, atol=1e-12)


def test_floor_divide_has_no_derivative():
    x, y = rand(3, 17), rand(3, 18)
    tx = x.clone().requires_grad_()
    with pytest.raises(RuntimeError) as e:
        torch.floor_divide(tx, y).sum().backward()
    hx = leaf(x)
    h = ct.check(lib.ct_floor_divide(hx, ct.from_torch(y)))
    ct.assert_close(h, torch.floor_divide(x, y))
    assert lib.ct_backward(ct.check(lib.ct_sum(h)), None) == -1
    assert str(e.value) in ct.last_error()
    ct.clear_error()


def test_grad_of_no_inputs_in_torchs_words():
    x = rand(2, 19)
    tx = x.clone().requires_grad_()
    with pytest.raises((RuntimeError, ValueError)) as e:
        torch.autograd.grad([(tx * 2).sum()], [])
    hx = leaf(x)
    out = (c_void_p * 1)()
    assert lib.ct_autograd_grad((c_void_p * 1)(ct.check(lib.ct_sum(hx))), None, 1, (c_void_p * 1)(), 0, out,
                                False, False, False) == -1
    assert str(e.value) in ct.last_error()
    ct.clear_error()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_version_error_names_the_type_as_torch(dtype):
    """[torch.DoubleTensor [3]], and torch's CPUBFloat16Type for bfloat16"""
    def torch_side():
        x = torch.ones(3, dtype=torch.float32).to(dtype).requires_grad_()
        y = x.exp()
        y.add_(1)
        y.sum().backward()
    want = ct.torch_error(torch_side)
    if dtype == torch.float16 and "not implemented" in (want or ""):
        pytest.skip("torch 1.13 has no CPU half exp")
    hx = leaf(torch.ones(3, dtype=dtype))
    hy = ct.check(lib.ct_exp(hx))
    assert lib.ct_add_scalar_(hy, 1.0) == 0
    ct.clear_error()
    ct.assert_error(lib.ct_backward(ct.check(lib.ct_sum(hy)), None), want)


# ------------------------------------------- views as backward's roots and inputs

for row in [
    ("ct_set_grad_enabled", c_bool, [c_bool]),
    ("ct_set_requires_grad", c_int, [T, c_bool]),
    ("ct_mean_dims", T, [CT, ctypes.POINTER(c_int), c_int, c_bool]),
    ("ct_index_put_", c_int, [T, TP, c_int, CT, c_bool]),
    ("ct_scatter_", c_int, [T, c_int, CT, CT]),
    ("ct_scatter_add_", c_int, [T, c_int, CT, CT]),
    ("ct_pow_scalar_", c_int, [T, c_double]),
    ("ct_sum_dims", T, [CT, ctypes.POINTER(c_int), c_int, c_bool]),
    ("ct_mean", T, [CT]),
]:
    ct.declare(*row)


def own_leaf(x, requires_grad=True):
    """A leaf that is no view (ct.leaf's are views of a storage tensor, and a
    view of a view has the first one's base, which needs no grad)"""
    h = ct.check(lib.ct_clone(ct.from_torch(x)))
    assert lib.ct_set_requires_grad(h, requires_grad) == 0
    return h


def no_grad(f):
    prev = lib.ct_set_grad_enabled(False)
    try:
        return f()
    finally:
        lib.ct_set_grad_enabled(prev)


def backward_and_grad(hroot, g, hinput):
    """(ct_backward's result, ct_autograd_grad's result) from root"""
    rb = lib.ct_backward(hroot, ct.from_torch(g))
    eb = ct.last_error()
    ct.clear_error()
    res = (c_void_p * 1)()
    rg = lib.ct_autograd_grad((c_void_p * 1)(hroot), (c_void_p * 1)(ct.from_torch(g)), 1, (c_void_p * 1)(hinput),
                              1, res, True, False, True)
    eg = ct.last_error()
    ct.clear_error()
    return (rb, eb), (rg, eg)


@pytest.mark.parametrize("base", ["non_leaf", "leaf"])
def test_backward_from_a_view_made_under_no_grad(base):
    """A view made under no_grad of a tensor that requires grad requires grad
    too (torch's view rule) but has no history: backward and autograd.grad from
    it fail in torch's words (they crashed)"""
    x = rand(3, 60)
    g = torch.ones(2, dtype=torch.float64)
    tx = x.clone().requires_grad_()
    ty = tx * 2 if base == "non_leaf" else tx
    with torch.no_grad():
        tv = ty.narrow(0, 0, 2)
    want_b = ct.torch_error(lambda: tv.backward(g))
    want_g = ct.torch_error(lambda: torch.autograd.grad(tv, tx, g))
    hx = own_leaf(x)
    hy = ct.check(lib.ct_mul_scalar(hx, 2.0)) if base == "non_leaf" else hx
    hv = no_grad(lambda: ct.check(lib.ct_narrow(hy, 0, 0, 2)))
    assert lib.ct_requires_grad(hv) == tv.requires_grad
    (rb, eb), (rg, eg) = backward_and_grad(hv, g, hx)
    assert rb == -1 and want_b in eb, (eb, want_b)
    assert rg == -1 and want_g in eg, (eg, want_g)
    # as autograd.grad's input instead: no edge, so never reached ("not used")
    want_in = ct.torch_error(lambda: torch.autograd.grad((ty * 3).sum(), tv))
    res = (c_void_p * 1)()
    rc = lib.ct_autograd_grad((c_void_p * 1)(ct.check(lib.ct_sum(ct.check(lib.ct_mul_scalar(hy, 3.0))))), None, 1,
                              (c_void_p * 1)(hv), 1, res, True, False, False)
    ct.assert_error(rc, want_in)
    ct.clear_error()


def test_backward_from_a_no_grad_view_whose_base_was_then_written():
    """The base of a view made under no_grad is written in place (grad mode on)
    by a tensor that requires grad: using the view is torch's no_grad-view
    error, for backward from it too (it crashed)"""
    x, y = rand(3, 61), rand(3, 62)
    g = torch.ones(2, dtype=torch.float64)
    tx, ty = x.clone(), y.clone().requires_grad_()
    with torch.no_grad():
        tv = tx.narrow(0, 0, 2)
    tx.add_(ty)
    want = ct.torch_error(lambda: tv.backward(g))
    assert want and "no_grad mode" in want
    hx, hy = ct.check(lib.ct_clone(ct.from_torch(x))), own_leaf(y)
    hv = no_grad(lambda: ct.check(lib.ct_narrow(hx, 0, 0, 2)))
    assert lib.ct_add_(hx, hy) == 0
    (rb, eb), (rg, eg) = backward_and_grad(hv, g, hy)
    assert rb == -1 and want in eb, (eb, want)
    assert rg == -1 and want in eg, (eg, want)


@pytest.mark.parametrize("case", ["base_needs_no_grad", "base_rewritten"])
def test_backward_straight_from_a_view_whose_base_was_written(case):
    """backward and autograd.grad take a root view's history anew when its base
    was written in place since (the grad mode they run in did not stop it: a
    stale history gave a wrong gradient or crashed)"""
    a, b = rand(3, 63), rand(3, 64)
    g = rand(2, 65)
    if case == "base_needs_no_grad":  # x needs no grad; x += y makes the view v require it
        tx, ty = a.clone(), b.clone().requires_grad_()
        tv = tx.narrow(0, 0, 2)
        tx.add_(ty)
        tleaf = ty

        def build():
            hx, hy = ct.check(lib.ct_clone(ct.from_torch(a))), own_leaf(b)
            hv = ct.check(lib.ct_narrow(hx, 0, 0, 2))
            assert lib.ct_add_(hx, hy) == 0
            return hy, hv
    else:  # y = a * 1; v = y[:2]; y.pow_(2): v's gradient is 2 a g
        ta = a.clone().requires_grad_()
        ty = ta * 1.0
        tv = ty.narrow(0, 0, 2)
        ty.pow_(2)
        tleaf = ta

        def build():
            hleaf = own_leaf(a)
            hy = ct.check(lib.ct_mul_scalar(hleaf, 1.0))
            hv = ct.check(lib.ct_narrow(hy, 0, 0, 2))
            assert lib.ct_pow_scalar_(hy, 2.0) == 0
            return hleaf, hv
    tv.backward(g)
    want = tleaf.grad
    hleaf, hv = build()
    assert lib.ct_backward(hv, ct.from_torch(g)) == 0, ct.last_error()
    ct.assert_close(grad(hleaf), want, what="backward: ")
    hleaf, hv = build()
    res = (c_void_p * 1)()
    assert lib.ct_autograd_grad((c_void_p * 1)(hv), (c_void_p * 1)(ct.from_torch(g)), 1, (c_void_p * 1)(hleaf), 1,
                                res, False, False, False) == 0, ct.last_error()
    ct.assert_close(res[0], want, what="autograd.grad: ")


def test_mean_over_dims_saves_self_as_torch():
    """torch 1.13's MeanBackward1 saves self: a second backward without
    retain_graph fails, and so does one after self was written in place (sum
    over dims and the full mean save no tensor: both go through)"""
    x = rand((2, 3), 66)
    cases = {"mean_dims": (lambda t: t.mean([0]), lambda h: lib.ct_mean_dims(h, (c_int * 1)(0), 1, False)),
             "sum_dims": (lambda t: t.sum([0]), lambda h: lib.ct_sum_dims(h, (c_int * 1)(0), 1, False)),
             "mean": (lambda t: t.mean(), lambda h: lib.ct_mean(h))}
    for what, (tf, cf) in cases.items():
        tx = x.clone().requires_grad_()
        ty = tf(tx)
        g = torch.ones_like(ty)
        ty.backward(g)
        want_twice = ct.torch_error(lambda: ty.backward(g))
        hx = own_leaf(x)
        hy = ct.check(cf(hx))
        assert lib.ct_backward(hy, ct.from_torch(g)) == 0
        rc = lib.ct_backward(hy, ct.from_torch(g))
        if want_twice is None:
            assert rc == 0, f"{what}: {ct.last_error()}"
        else:
            ct.assert_error(rc, want_twice, what=what + ": ")
        ct.clear_error()
        tz = x.clone().requires_grad_() * 1.0  # then self written in place before backward
        tw = tf(tz)
        tz.add_(1)
        want_ver = ct.torch_error(lambda: tw.backward(torch.ones_like(tw)))
        hz = ct.check(lib.ct_mul_scalar(own_leaf(x), 1.0))
        hw = ct.check(cf(hz))
        assert lib.ct_add_scalar_(hz, 1.0) == 0
        rc = lib.ct_backward(hw, ct.from_torch(torch.ones_like(tw)))
        if want_ver is None:
            assert rc == 0, f"{what}: {ct.last_error()}"
        else:
            ct.assert_error(rc, want_ver.split(" is at version")[0].split("], ")[0], what=what + ": ")
        ct.clear_error()


@pytest.mark.parametrize("writer", ["copy_", "CopySlices"])
def test_version_error_names_handwritten_nodes_as_torch(writer):
    """the saved tensor's owner is named by torch's name(): its hand-written
    nodes by their C++ names (torch::autograd::CopyBackwards, ::CopySlices)"""
    a = rand(4, 67)

    def torch_side():
        ta = a.clone().requires_grad_()
        if writer == "copy_":
            b = torch.zeros(4, dtype=torch.float64)
            b.copy_(ta)
        else:
            b = ta * 1
            b[:2].mul_(2)
        z = b * b
        with torch.no_grad():
            b.add_(1)
        z.sum().backward()
    want = ct.torch_error(torch_side)
    assert want and "torch::autograd::" in want
    ha = own_leaf(a)
    if writer == "copy_":
        hb = ct.check(lib.ct_clone(ct.from_torch(torch.zeros(4, dtype=torch.float64))))
        assert lib.ct_copy_(hb, ha) == 0
    else:
        hb = ct.check(lib.ct_mul_scalar(ha, 1.0))
        assert lib.ct_mul_scalar_(ct.check(lib.ct_narrow(hb, 0, 0, 2)), 2.0) == 0
    hz = ct.check(lib.ct_mul(hb, hb))
    no_grad(lambda: lib.ct_add_scalar_(hb, 1.0))
    ct.assert_error(lib.ct_backward(ct.check(lib.ct_sum(hz)), None), want.split(" is at version")[0])
    ct.clear_error()


def test_create_graph_gradient_through_sort_and_topk():
    """sort and topk save their indices (an output) for backward; unpacked under
    create_graph an integer output gets no history, so x's gradient requires grad
    only when the incoming gradient does, and its own gradient is torch's"""
    x = torch.randn(3, 4, dtype=torch.float64)
    w = torch.randn(3, 4, dtype=torch.float64)
    ops = {
        "sort": (lambda t: torch.sort(t, 1).values,
                 lambda hh: pair_first(lambda v, i: lib.ct_sort(hh, 1, False, False, v, i))),
        "topk": (lambda t: torch.topk(t, 2, 0).values,
                 lambda hh: pair_first(lambda v, i: lib.ct_topk(hh, 2, 0, True, True, v, i))),
    }
    for name, (tf, cf) in ops.items():
        for g_rg in (False, True):
            tx = x.clone().requires_grad_()
            ty = tf(tx)
            tg = torch.randn(ty.shape, dtype=torch.float64).requires_grad_(g_rg)
            (tgx,) = torch.autograd.grad(ty, tx, tg, create_graph=True)
            hx = own_leaf(x)
            hg = own_leaf(tg.detach(), g_rg)
            hy = ct.check(cf(hx))
            outs, gos, res = (c_void_p * 1)(hy), (c_void_p * 1)(hg), (c_void_p * 1)()
            assert lib.ct_autograd_grad(outs, gos, 1, (c_void_p * 1)(hx), 1, res, True, True, False) == 0, ct.last_error()
            what = f"{name}, incoming gradient requires grad {g_rg}: "
            assert lib.ct_requires_grad(res[0]) == tgx.requires_grad, what + "requires_grad"
            ct.assert_close(res[0], tgx, what=what)
            if g_rg:  # the gradient of <x.grad, w> with respect to the incoming gradient
                (tgg,) = torch.autograd.grad(tgx, tg, w)
                hgg = ct.grads_of(res[0], hg, w, create_graph=False)
                ct.assert_close(hgg, tgg, what=what + "second order: ")


ct.declare("ct_sort", c_int, [CT, c_int, c_bool, c_bool, TP, TP])
ct.declare("ct_topk", c_int, [CT, ct.c_int64, c_int, c_bool, c_bool, TP, TP])


def pair_first(f):
    """The first of a two-result call's results (ct_sort, ct_topk)"""
    v, i = (c_void_p * 1)(), (c_void_p * 1)()
    assert f(v, i) == 0, ct.last_error()
    return v[0]


def test_autograd_grad_does_not_run_the_inputs_own_nodes():
    """autograd.grad with respect to a non-leaf takes the gradient flowing into
    its grad_fn and runs that node only when it leads to another input (torch's
    exec_info): a saved tensor of it written in place since is then no error"""
    x0 = torch.randn(3, dtype=torch.float64)
    for wrt in ("y", "y and x"):
        tx = x0.clone().requires_grad_()
        ty = tx.exp()            # ExpBackward0 saves its result
        tz = (ty * 2).sin()
        with torch.no_grad():
            ty.mul_(3)           # y's version moves on
        tins = [ty] if wrt == "y" else [ty, tx]
        g = torch.randn(3, dtype=torch.float64)
        want = []
        want_err = ct.torch_error(lambda: want.extend(torch.autograd.grad(tz, tins, g)))
        hx = own_leaf(x0)
        hy = ct.check(lib.ct_exp(hx))
        hz = ct.check(lib.ct_sin(ct.check(lib.ct_mul_scalar(hy, c_double(2.0)))))
        no_grad(lambda: ct.check_int(lib.ct_mul_scalar_(hy, c_double(3.0))))
        hins = [hy] if wrt == "y" else [hy, hx]
        res = (c_void_p * len(hins))()
        rc = lib.ct_autograd_grad((c_void_p * 1)(hz), (c_void_p * 1)(ct.from_torch(g)), 1,
                                  (c_void_p * len(hins))(*hins), len(hins), res, False, False, False)
        if want_err:
            ct.assert_error(rc, want_err, what=f"grad wrt {wrt}: ")
            ct.clear_error()
        else:
            assert rc == 0, f"grad wrt {wrt}: {ct.last_error()}"
            ct.assert_close(res[0], want[0], rtol=1e-12, atol=0, what=f"grad wrt {wrt}: ")


for _row in [("ct_gather", T, [CT, c_int, CT]), ("ct_take", T, [CT, CT]), ("ct_masked_select", T, [CT, CT]),
             ("ct_embedding", T, [CT, CT, ct.c_int64]), ("ct_index_add", T, [CT, c_int, CT, CT, c_double]),
             ("ct_layer_norm", T, [CT, ct.I64P, c_int, CT, CT, c_double]),
             ("ct_scatter", T, [CT, c_int, CT, CT]), ("ct_scatter_add", T, [CT, c_int, CT, CT]),
             ("ct_avg_pool2d", T, [CT, ct.I64P, ct.I64P, ct.I64P, c_bool, c_bool, ct.c_int64]),
             ("ct_adaptive_avg_pool2d", T, [CT, ct.I64P])]:
    ct.declare(*_row)


def error_or_grads_as_torch(rc, want, tleaves, hleaves, what):
    """ctorch's backward failed with torch's message want, or, where torch's passed,
    passed with the leaves' gradients torch's"""
    if want is None:
        assert rc == 0, what + ct.last_error()
        for t, h in zip(tleaves, hleaves):
            if t.requires_grad:
                ct.assert_close(lib.ct_grad(h), t.grad, rtol=1e-12, atol=1e-15, what=what)
    else:
        ct.assert_error(rc, want, what=what)
        ct.clear_error()


def test_in_place_writes_of_what_torch_saves():
    """gather, take, masked_select and the average poolings save self, embedding its
    weight, index_add its source (when that requires grad) and layer_norm its bias, though the gradients
    use only their shapes: torch 1.13's nodes do, so an in-place write of that input
    between forward and backward fails (or not) as torch's, in its words; l1_loss
    saves neither input nor target, so writing one is no error; outer saves a's
    column view, and
    cross_entropy neither (its log_softmax saves its result)"""
    ix = torch.tensor([[0, 2], [1, 0]])
    mask = torch.tensor([True, False, True])
    F = torch.nn.functional
    cases = [  # name, input shapes, torch fn, ctorch fn, written input, does it require grad
        ("gather", [(2, 3)], lambda x: x.gather(1, ix), lambda x: lib.ct_gather(x, 1, ct.from_torch(ix)), 0),
        ("take", [(2, 3)], lambda x: x.take(ix), lambda x: lib.ct_take(x, ct.from_torch(ix)), 0),
        ("masked_select", [(2, 3)], lambda x: x.masked_select(mask),
         lambda x: lib.ct_masked_select(x, ct.from_torch(mask)), 0),
        ("embedding", [(3, 4)], lambda w: F.embedding(ix, w), lambda w: lib.ct_embedding(w, ct.from_torch(ix), -1), 0),
        ("index_add source", [(3, 2), (2, 2)], lambda s, src: s.index_add(0, ix[0], src, alpha=.5),
         lambda s, src: lib.ct_index_add(s, 0, ct.from_torch(ix[0]), src, .5), 1),
        ("layer_norm bias", [(2, 3), (3,), (3,)], lambda x, w, b: F.layer_norm(x, (3,), w, b),
         lambda x, w, b: lib.ct_layer_norm(x, ct.i64([3]), 1, w, b, 1e-5), 2),
        ("avg_pool2d", [(1, 2, 4, 4)], lambda x: F.avg_pool2d(x, 2),
         lambda x: lib.ct_avg_pool2d(x, ct.i64([2, 2]), None, None, False, True, 0), 0),
        ("adaptive_avg_pool2d", [(1, 2, 4, 4)], lambda x: F.adaptive_avg_pool2d(x, 2),
         lambda x: lib.ct_adaptive_avg_pool2d(x, ct.i64([2, 2])), 0),
    ]
    # l1_loss is torch's composite (broadcast, sub, abs, reduction): Abs saves the
    # difference, not input or target, so writing either afterwards is no error
    for red, rname in enumerate(("none", "mean", "sum")):
        for k, (sx, st) in enumerate([((2, 3), (3,)), ((2, 3), (2, 1))]):
            cases.append((f"l1_loss {rname}", [sx, st], lambda x, t, r=rname: F.l1_loss(x, t, reduction=r),
                          lambda x, t, r=red: lib.ct_l1_loss(x, t, r), k))
    # cross_entropy is log_softmax then nll_loss (or the probabilities' or smoothing's
    # formulas): LogSoftmax saves its result, so writing the input is no error
    ci, cp = torch.tensor([0, 3, 1]), torch.rand(3, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    for tgt, ls, red in [(ci, 0.0, 1), (ci, 0.2, 1), (ci, 0.2, 0), (cp, 0.0, 1), (cp, 0.1, 2)]:
        rname = ("none", "mean", "sum")[red]
        cases.append((f"cross_entropy {tgt.dtype} ls {ls} {rname}", [(3, 4)],
                      lambda x, t=tgt, s=ls, r=rname: F.cross_entropy(x, t, reduction=r, label_smoothing=s),
                      lambda x, t=tgt, s=ls, r=red: lib.ct_cross_entropy(x, ct.from_torch(t), None, r, -100, s), 0))
    # outer is a.reshape(-1, 1) * b: Mul saves the column view of a (its shape in the message)
    for k in range(2):
        cases.append(("outer", [(3,), (4,)], torch.outer, lib.ct_outer, k))
    for name, shapes, tf, cf, k in cases:
        for rg in (True, False):  # whether the written input requires grad (it is a non-leaf when it does)
            what = f"{name}, written input requires grad {rg}: "
            vals = [torch.randn(s, dtype=torch.float64) for s in shapes]
            tl = [v.clone().requires_grad_(j != k or rg) for j, v in enumerate(vals)]
            tx = [t * 1 for t in tl]
            ty = tf(*tx)
            with torch.no_grad():
                tx[k].mul_(2)
            want = ct.torch_error(lambda: ty.sum().backward())
            hl = [own_leaf(v, j != k or rg) for j, v in enumerate(vals)]
            hx = [ct.check(lib.ct_mul_scalar(h, c_double(1.0))) for h in hl]
            hy = ct.check(cf(*hx))
            no_grad(lambda: ct.check_int(lib.ct_mul_scalar_(hx[k], c_double(2.0))))
            rc = lib.ct_backward(ct.check(lib.ct_sum(hy)), None)
            error_or_grads_as_torch(rc, want, tl, hl, what)


def test_a_gradient_the_input_cannot_take():
    """torch's validate_outputs: a node's gradient that its input's shape does not
    expand to (scatter's src larger than its index) is an error naming the node and
    the input's place among the differentiable ones"""
    idx = torch.tensor([[1], [0]])
    for name, tf, cf in [
            ("scatter", lambda s, src: s.scatter(1, idx, src), lambda s, src: lib.ct_scatter(s, 1, ct.from_torch(idx), src)),
            ("scatter_add", lambda s, src: s.scatter_add(1, idx, src),
             lambda s, src: lib.ct_scatter_add(s, 1, ct.from_torch(idx), src))]:
        for self_rg in (False, True):
            s, src = torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)
            ts, tsrc = s.clone().requires_grad_(self_rg), src.clone().requires_grad_()
            want = ct.torch_error(lambda: tf(ts, tsrc).sum().backward())
            assert want is not None and "invalid gradient at index 1" in want, want
            hs, hsrc = own_leaf(s, self_rg), own_leaf(src)
            ct.assert_error(lib.ct_backward(ct.check(lib.ct_sum(ct.check(cf(hs, hsrc)))), None), want,
                            what=f"{name}, self requires grad {self_rg}: ")
            ct.clear_error()


def test_root_gradients_are_checked_before_the_roots_history():
    """torch's _make_grads runs before the engine reads a root's grad_fn: a
    non-scalar root with no gradient, or a gradient of the wrong shape, is
    reported before the error of a root whose history cannot be rebuilt (an
    unbind output whose base was written in place)"""
    x0 = torch.randn(3, 2, dtype=torch.float64)
    for grad in (None, torch.ones(5, dtype=torch.float64), torch.ones(3, dtype=torch.float64)):
        tx = x0.clone().requires_grad_()
        ty = tx * 1
        tv = ty.unbind(1)[0]
        ty.add_(1)
        want = ct.torch_error(lambda: tv.backward(grad))
        hy = ct.check(lib.ct_mul_scalar(own_leaf(x0), c_double(1.0)))
        out = (c_void_p * 2)()
        assert lib.ct_unbind(hy, 1, out, 2) == 2, ct.last_error()
        assert lib.ct_add_scalar_(hy, c_double(1.0)) == 0, ct.last_error()
        rc = lib.ct_backward(out[0], None if grad is None else ct.from_torch(grad))
        ct.assert_error(rc, want, what=f"grad {None if grad is None else tuple(grad.shape)}: ")
        ct.clear_error()


for _row in [("ct_lerp", T, [CT, CT, CT]), ("ct_addcmul", T, [CT, CT, CT, c_double]),
             ("ct_addcdiv", T, [CT, CT, CT, c_double]), ("ct_addmm", T, [CT, CT, CT, c_double, c_double]),
             ("ct_linear", T, [CT, CT, CT])]:
    ct.declare(*_row)


def test_what_is_saved_follows_which_inputs_require_grad():
    """torch saves an input only for a gradient that is wanted: with some inputs
    not requiring grad, a second backward without retain_graph (nothing saved, so
    no error) and an in-place write of an input before backward (no saved copy to
    go stale) behave as torch's"""
    ix = torch.tensor([0, 2])
    ix2 = torch.tensor([[1], [0]])
    cases = [
        ("remainder", [(2, 3), (2, 3)], torch.remainder, lambda a, b: lib.ct_remainder(a, b)),
        ("fmod", [(2, 3), (3,)], torch.fmod, lambda a, b: lib.ct_fmod(a, b)),
        ("lerp", [(2, 3), (2, 3), (2, 3)], torch.lerp, lambda a, b, w: lib.ct_lerp(a, b, w)),
        ("addcmul", [(2, 3), (2, 3), (2, 3)], lambda s, a, b: torch.addcmul(s, a, b, value=.5),
         lambda s, a, b: lib.ct_addcmul(s, a, b, .5)),
        ("addcdiv", [(2, 3), (2, 3), (2, 3)], lambda s, a, b: torch.addcdiv(s, a, b, value=.5),
         lambda s, a, b: lib.ct_addcdiv(s, a, b, .5)),
        ("addmm", [(2, 2), (2, 3), (3, 2)], lambda s, a, b: torch.addmm(s, a, b, beta=.5, alpha=2),
         lambda s, a, b: lib.ct_addmm(s, a, b, .5, 2.0)),
        ("linear", [(2, 3), (4, 3), (4,)], torch.nn.functional.linear, lambda x, w, b: lib.ct_linear(x, w, b)),
        ("index_add", [(3, 2), (2, 2)], lambda s, src: s.index_add(0, ix, src),
         lambda s, src: lib.ct_index_add(s, 0, ct.from_torch(ix), src, 1.0)),
        ("scatter_add", [(2, 3), (2, 1)], lambda s, src: s.scatter_add(1, ix2, src),
         lambda s, src: lib.ct_scatter_add(s, 1, ct.from_torch(ix2), src)),
    ]
    for name, shapes, tf, cf in cases:
        vals = [torch.rand(s, dtype=torch.float64) + .5 for s in shapes]
        for mask in range(1, 1 << len(shapes)):
            rgs = [bool(mask >> j & 1) for j in range(len(shapes))]
            # a second backward straight from the leaves
            what = f"{name}, inputs requiring grad {rgs}, twice: "
            tl = [v.clone().requires_grad_(g) for v, g in zip(vals, rgs)]
            ty = tf(*tl).sum()
            want = ct.torch_error(lambda: (ty.backward(), ty.backward()))
            hl = [own_leaf(v, g) for v, g in zip(vals, rgs)]
            hy = ct.check(lib.ct_sum(ct.check(cf(*hl))))
            rc = lib.ct_backward(hy, None)
            rc = rc if rc < 0 else lib.ct_backward(hy, None)
            error_or_grads_as_torch(rc, want, tl, hl, what)
            # an in-place write of each (non-leaf) input between forward and backward
            for k in range(len(shapes)):
                what = f"{name}, inputs requiring grad {rgs}, input {k} written: "
                tx = [v.clone().requires_grad_(g) * 1 for v, g in zip(vals, rgs)]
                ty = tf(*tx)
                tx[k].mul_(2)
                want = ct.torch_error(lambda: ty.sum().backward())
                hx = [ct.check(lib.ct_mul_scalar(own_leaf(v, g), c_double(1.0))) for v, g in zip(vals, rgs)]
                hy = ct.check(cf(*hx))
                ct.check_int(lib.ct_mul_scalar_(hx[k], c_double(2.0)))
                rc = lib.ct_backward(ct.check(lib.ct_sum(hy)), None)
                if want is None:
                    assert rc == 0, what + ct.last_error()
                else:  # torch's linear saves weight.t(), so its message shows that view's shape
                    ct.assert_error(rc, want.split(" [")[0] if name == "linear" else want, what=what)
                    ct.clear_error()


ct.declare("ct_elu", T, [CT, c_double])
ct.declare("ct_pow_scalar_", c_int, [T, c_double])


def test_retain_grad_of_a_base_written_through_a_view():
    """torch's rebase_history moves a tensor's retain_grad to its new node when it
    is written in place itself, but not when it is a base written through one of
    its views: its .grad is then the gradient of its value before the write. Each
    order of freeing the tensor and the graph is sound (the test runs under ASan too)"""
    for via in ("itself", "a view"):
        for shape in ((), (2, 3)):
            x0 = torch.rand(shape, dtype=torch.float64) + .2
            tx = x0.clone().requires_grad_()
            ty = torch.nn.functional.elu(tx, .8)
            tv = ty.reshape(-1)
            ty.retain_grad()
            ty.retain_grad()  # a second call changes nothing
            (tv if via == "a view" else ty).pow_(2)
            (ty * .3).exp().sum().backward()
            hx = own_leaf(x0)
            hy = ct.check(lib.ct_elu(hx, .8))
            hv = ct.check(lib.ct_reshape(hy, ct.i64([-1]), 1))
            assert lib.ct_retain_grad(hy) == 0 and lib.ct_retain_grad(hy) == 0
            assert lib.ct_pow_scalar_(hv if via == "a view" else hy, 2.0) == 0, ct.last_error()
            hl = ct.check(lib.ct_sum(ct.check(lib.ct_exp(ct.check(lib.ct_mul_scalar(hy, c_double(.3)))))))
            assert lib.ct_backward(hl, None) == 0, ct.last_error()
            what = f"written through {via}, shape {shape}: "
            ct.assert_close(lib.ct_grad(hy), ty.grad, rtol=1e-12, atol=0, what=what)
            ct.assert_close(lib.ct_grad(hx), tx.grad, rtol=1e-12, atol=0, what=what)
            lib.ct_free(hy)  # the tensor before the graph (its old node still points back)
            lib.ct_free(hv)
            lib.ct_free(hl)


def test_pow_by_a_tensor_saves_its_result():
    """torch 1.13's PowBackward1 (pow by a tensor, a 0-dim one too) saves its result
    even when the exponent needs no gradient; pow by a number saves none"""
    a0 = torch.rand(3, dtype=torch.float64) + .5
    e0 = torch.rand(3, dtype=torch.float64)
    cases = {
        "a tensor": (lambda x: x.pow(e0), lambda h: lib.ct_pow(h, ct.from_torch(e0))),
        "a 0-dim tensor": (lambda x: x.pow(torch.tensor(2.5, dtype=torch.float64)),
                           lambda h: lib.ct_pow(h, ct.from_torch(torch.tensor(2.5, dtype=torch.float64)))),
        "a number": (lambda x: x.pow(2.5), lambda h: lib.ct_pow_scalar(h, c_double(2.5))),
    }
    for what, (tf, cf) in cases.items():
        tx = a0.clone().requires_grad_()
        ty = tf(tx * 1)
        ty.mul_(2)
        want = ct.torch_error(lambda: ty.sum().backward())
        hy = ct.check(cf(ct.check(lib.ct_mul_scalar(own_leaf(a0), c_double(1.0)))))
        ct.check_int(lib.ct_mul_scalar_(hy, c_double(2.0)))
        rc = lib.ct_backward(ct.check(lib.ct_sum(hy)), None)
        if want is None:
            assert rc == 0, f"pow by {what}: {ct.last_error()}"
        else:
            ct.assert_error(rc, want, what=f"pow by {what}: ")
            ct.clear_error()


ct.declare("ct_clamp_", c_int, [T, c_double, c_double])


def test_view_written_in_place_of_a_base_with_gaps():
    """CopySlices lays its copy of the base's gradient out with the base's strides
    exactly (torch's new_empty_strided), gaps too: a strided base (every other
    element of a storage) that got its history by an in-place op, then written
    through a view, backpropagates"""
    s0 = torch.randn(16, dtype=torch.float64)
    w0 = torch.randn(4, 2, dtype=torch.float64)
    for vname, tv, cv in [("a slice", lambda b: b[1:3], lambda hb: lib.ct_narrow(hb, 0, 1, 2)),
                          ("a column", lambda b: b[:, 1], lambda hb: lib.ct_select(hb, 1, 1))]:
        tb = s0.clone().as_strided((4, 2), (4, 2)).detach()  # not a view: its own history
        tw = w0.clone().requires_grad_()
        tb.add_(tw)
        tv(tb).clamp_(-.3, .3)
        (tb * tb).sum().backward()
        hs = ct.check(lib.ct_clone(ct.from_torch(s0)))
        hb = ct.check(lib.ct_detach(ct.check(lib.ct_as_strided(hs, ct.i64([4, 2]), ct.i64([4, 2]), 2, 0))))  # no view
        hw = own_leaf(w0)
        assert lib.ct_add_(hb, hw) == 0, ct.last_error()
        assert lib.ct_clamp_(ct.check(cv(hb)), -.3, .3) == 0, ct.last_error()
        assert lib.ct_backward(ct.check(lib.ct_sum(ct.check(lib.ct_mul(hb, hb)))), None) == 0, ct.last_error()
        ct.assert_close(lib.ct_grad(hw), tw.grad, rtol=1e-12, atol=1e-15, what=f"through {vname}: ")


ct.declare("ct_atan", T, [CT])
ct.declare("ct_add_alpha_", c_int, [T, CT, c_double])
hook_x2 = HOOK(lambda g, ctx: lib.ct_mul_scalar(g, c_double(2.0)))


def test_an_in_place_op_takes_its_inputs_histories_before_it_writes():
    """torch collects an in-place op's edges before the write: a view written in
    place with itself as the other operand (v.add_(v, alpha=-.5)) sends the other
    operand's gradient through the view's old node, with the hook registered there"""
    x0 = torch.tensor(0.3, dtype=torch.float64)
    for hook in (False, True):
        for shape in ((), (3,)):
            tx = x0.clone().requires_grad_()
            tv2 = torch.atan(tx).expand(shape) * 1
            tv4 = tv2[...] if shape else tv2.expand([])
            if hook:
                tv4.register_hook(lambda g: g * 2)
            tv4.add_(tv4, alpha=-.5)
            g = torch.linspace(.5, 1.5, tv2.numel(), dtype=torch.float64).view(shape)
            tv2.backward(g)
            hx = own_leaf(x0)
            hat = ct.check(lib.ct_atan(hx))
            hv2 = ct.check(lib.ct_mul_scalar(ct.check(lib.ct_expand(hat, ct.i64(list(shape)), len(shape))), c_double(1.0)))
            hv4 = ct.check(lib.ct_expand(hv2, ct.i64(list(shape)), len(shape)))
            if hook:
                assert lib.ct_register_hook(hv4, hook_x2, None) == 0
            assert lib.ct_add_alpha_(hv4, hv4, -.5) == 0, ct.last_error()
            assert lib.ct_backward(hv2, ct.from_torch(g)) == 0, ct.last_error()
            ct.assert_close(lib.ct_grad(hx), tx.grad, rtol=1e-12, atol=1e-15, what=f"hook {hook}, shape {shape}: ")


def test_maximum_minimum_gradients_with_nan_and_ties():
    """torch's where(a == b, g / 2, g).masked_fill_(a loses, 0): where either input
    is NaN both get the whole gradient, ties half each (an inf gradient too), the
    loser none; broadcast inputs sum theirs"""
    nan, inf = float("nan"), float("inf")
    a0 = torch.tensor([[1., nan, 2., 3., nan, -inf], [0., 5., nan, 2., 2., 1.]], dtype=torch.float64)
    b0 = torch.tensor([nan, 1., 2., 1., nan, -inf], dtype=torch.float64)
    g = torch.tensor([[1., 2., 4., 8., inf, 16.], [1., -2., 3., inf, 5., 6.]], dtype=torch.float64)
    for name, tf in [("maximum", torch.maximum), ("minimum", torch.minimum)]:
        ta, tb = a0.clone().requires_grad_(), b0.clone().requires_grad_()
        tf(ta, tb).backward(g)
        ha, hb = own_leaf(a0), own_leaf(b0)
        assert lib.ct_backward(ct.check(getattr(lib, "ct_" + name)(ha, hb)), ct.from_torch(g)) == 0, ct.last_error()
        ct.assert_close(lib.ct_grad(ha), ta.grad, what=f"{name} self: ")
        ct.assert_close(lib.ct_grad(hb), tb.grad, what=f"{name} other: ")


def test_a_saved_view_that_may_not_be_used_any_more():
    """backward finds a saved input changed; torch asks it for its grad_fn first,
    so a chunk piece whose base was written since reports that view's error, not
    the version counter's; a node whose inputs all lack edges (a view made under
    no_grad) checks nothing"""
    x0 = torch.randn(2, 3, dtype=torch.float64)
    for kind in ("chunk", "no_grad view"):
        tx = x0.clone().requires_grad_()
        tb = tx * 1
        if kind == "chunk":
            tp = tb.chunk(3, 1)[1]
        else:
            with torch.no_grad():
                tp = tb[:, 1:2]
        ty = tp * tp                 # saves the piece
        tb.mul_(2)                   # the base is written: the piece is stale
        want = ct.torch_error(lambda: ty.sum().backward())
        assert (want is not None and "view" in want) == (kind == "chunk"), want
        hb = ct.check(lib.ct_mul_scalar(own_leaf(x0), c_double(1.0)))
        if kind == "chunk":
            out = (c_void_p * 3)()
            assert lib.ct_chunk(hb, 3, 1, out, 3) == 3, ct.last_error()
            hp = out[1]
        else:
            hp = no_grad(lambda: ct.check(lib.ct_narrow(hb, 1, 1, 1)))
        hy = ct.check(lib.ct_mul(hp, hp))
        assert lib.ct_mul_scalar_(hb, c_double(2.0)) == 0, ct.last_error()
        rc = lib.ct_backward(ct.check(lib.ct_sum(hy)), None)
        if want is None:  # the no_grad view has no edge: its node wants no gradient and checks nothing
            assert rc == 0, kind + ": " + ct.last_error()
        else:
            ct.assert_error(rc, want, what=kind + ": ")
            ct.clear_error()


def test_in_place_checks_self_before_the_other_inputs_histories():
    """torch's check_inplace runs before the op reads its other inputs' histories:
    a leaf that requires grad written in place with a stale multi-output view (or
    a stale no_grad view) as the other operand reports the leaf"""
    x0 = torch.randn(2, 3, dtype=torch.float64)
    for kind in ("unbind piece", "no_grad view"):
        tl = torch.randn(3, dtype=torch.float64).requires_grad_()
        tb = x0.clone().requires_grad_() * 1
        if kind == "unbind piece":
            tv = tb.unbind(0)[1]
        else:
            with torch.no_grad():
                tv = tb[1]
        tb.mul_(2)
        want = ct.torch_error(lambda: tl.add_(tv))
        assert want is not None and "leaf Variable" in want, want
        hl = own_leaf(tl.detach())
        hb = ct.check(lib.ct_mul_scalar(own_leaf(x0), c_double(1.0)))
        if kind == "unbind piece":
            out = (c_void_p * 2)()
            assert lib.ct_unbind(hb, 0, out, 2) == 2, ct.last_error()
            hv = out[1]
        else:
            hv = no_grad(lambda: ct.check(lib.ct_select(hb, 0, 1)))
        assert lib.ct_mul_scalar_(hb, c_double(2.0)) == 0, ct.last_error()
        ct.assert_error(lib.ct_add_(hl, hv), want, what=kind + ": ")
        ct.clear_error()
