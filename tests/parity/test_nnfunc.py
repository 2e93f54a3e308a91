"""Parity with PyTorch: neural-network functions (losses, normalisations, dropout,
activations): forward values, gradients wrt every differentiable input (the fused
first-order path and the create_graph path), double backward, reductions,
ignore_index, weights, label smoothing, non-contiguous inputs, dtypes, errors,
meta shapes. Expected values come from torch."""
import ctypes
from ctypes import POINTER, c_bool, c_double, c_int, c_int64, c_void_p

import math
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as Fn  # noqa: E402
import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import leaf  # noqa: E402

lib = ct.lib
T = CT = c_void_p
TP = POINTER(c_void_p)
I64P = POINTER(c_int64)

ct.declare("ct_cross_entropy", T, [CT, CT, CT, c_int, c_int64, c_double])
ct.declare("ct_nll_loss", T, [CT, CT, CT, c_int, c_int64])
ct.declare("ct_mse_loss", T, [CT, CT, c_int])
ct.declare("ct_l1_loss", T, [CT, CT, c_int])
ct.declare("ct_smooth_l1_loss", T, [CT, CT, c_int, c_double])
ct.declare("ct_binary_cross_entropy", T, [CT, CT, CT, c_int])
ct.declare("ct_binary_cross_entropy_with_logits", T, [CT, CT, CT, CT, c_int])
ct.declare("ct_dropout", T, [CT, c_double, c_bool])
ct.declare("ct_layer_norm", T, [CT, I64P, c_int, CT, CT, c_double])
ct.declare("ct_batch_norm", T, [CT, T, T, CT, CT, c_bool, c_double, c_double])
ct.declare("ct_hardtanh", T, [CT, c_double, c_double])
ct.declare("ct_relu6", T, [CT])
ct.declare("ct_leaky_relu", T, [CT, c_double])
ct.declare("ct_elu", T, [CT, c_double])
ct.declare("ct_set_requires_grad", c_int, [T, c_bool])
ct.declare("ct_grad_fn_name", ctypes.c_char_p, [CT])
ct.declare("ct_autograd_grad", c_int, [TP, TP, c_int, TP, c_int, TP, c_bool, c_bool, c_bool])
ct.declare("ct_requires_grad", c_bool, [CT])

GEN = torch.Generator().manual_seed(4321)
F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
RED = {"none": 0, "mean": 1, "sum": 2}
TOL = {F64: 1e-10, F32: 1e-5, F16: 3e-3, BF16: 3e-2}


def randn(*shape, dtype=F64):
    return torch.randn(shape, generator=GEN, dtype=F64).to(dtype)


def ctt(t):
    return None if t is None else ct.from_torch(t.detach())


def grads(h_out, h_ins, g, create_graph):
    outs = (c_void_p * 1)(h_out)
    gos = (c_void_p * 1)(ct.from_torch(g))
    n = len(h_ins)
    ins = (c_void_p * n)(*h_ins)
    res = (c_void_p * n)()
    ct.check_int(lib.ct_autograd_grad(outs, gos, 1, ins, n, res, True, create_graph, True))
    return [res[k] for k in range(n)]


def layouts(t):
    """contiguous, transposed (dims 0 and -1 swapped twice), sliced copies of t's values"""
    yield "contig", t
    if t.dim() >= 2:
        yield "transposed", t.transpose(0, -1).contiguous().transpose(0, -1)
    big = torch.zeros(t.shape[:-1] + (2 * t.shape[-1],), dtype=t.dtype) if t.dim() else None
    if big is not None:
        big[..., ::2] = t
        yield "sliced", big[..., ::2]


def check_fn(cfn, tfn, inputs, diff, what, rtol=1e-10, second=True):
    """inputs: list of torch tensors (float64); diff: which indices are differentiable.
    Compares forward, first-order gradients (fused and create_graph) and double backward."""
    tins = [x.detach().clone().requires_grad_(k in diff) if x is not None and x.is_floating_point() else x
            for k, x in enumerate(inputs)]
    hins = [None if x is None else (leaf(x) if k in diff else ct.from_torch(x)) for k, x in enumerate(inputs)]
    out = tfn(*tins)
    ho = ct.check(cfn(*hins))
    ct.assert_close(ho, out.detach(), rtol=rtol, atol=rtol, what=f"{what} forward: ")
    if not diff:
        return
    g = torch.randn(out.shape, generator=GEN, dtype=out.dtype)
    try:
        tg = torch.autograd.grad(out, [tins[k] for k in diff], g, create_graph=True, allow_unused=True)
    except RuntimeError:  # torch's nll_loss2d backward refuses strided input under create_graph
        tg = torch.autograd.grad(out, [tins[k] for k in diff], g, allow_unused=True)
        second = False
    for cg_flag in (False, True):
        cg = grads(ho, [hins[k] for k in diff], g, cg_flag)
        for j, k in enumerate(diff):
            if tg[j] is None:
                continue
            assert cg[j], f"{what}: no gradient for input {k} (create_graph={cg_flag})"
            ct.assert_close(cg[j], tg[j].detach(), rtol=rtol, atol=rtol,
                            what=f"{what} grad[{k}] create_graph={cg_flag}: ")
    if not second:
        return
    # double backward: d/d inputs of sum(grad_x * v)
    k0 = diff[0]
    if tg[0] is None or not tg[0].requires_grad:
        return
    v = torch.randn(tg[0].shape, generator=GEN, dtype=tg[0].dtype)
    try:
        tgg = torch.autograd.grad(tg[0], [tins[k] for k in diff], v, allow_unused=True)
    except RuntimeError:  # torch's own double backward refuses (nll_loss2d on strided input)
        return
    cg = grads(ho, [hins[k0]], g, True)[0]
    if not lib.ct_requires_grad(cg):  # the gradient does not depend on the inputs
        for t2 in tgg:
            assert t2 is None or float(t2.abs().max()) < 1e-12, f"{what}: second-order gradient missing"
        return
    outs = (c_void_p * 1)(cg)
    gos = (c_void_p * 1)(ct.from_torch(v))
    n = len(diff)
    ins = (c_void_p * n)(*[hins[k] for k in diff])
    res = (c_void_p * n)()
    ct.check_int(lib.ct_autograd_grad(outs, gos, 1, ins, n, res, True, False, True))
    for j, k in enumerate(diff):
        if tgg[j] is None:
            assert not res[j] or float(ct.to_torch(res[j]).abs().max()) < 1e-12
            continue
        if not res[j]:
            assert float(tgg[j].abs().max()) < 1e-12, f"{what}: no second-order gradient for input {k}"
            continue
        ct.assert_close(res[j], tgg[j], rtol=1e-8, atol=1e-8, what=f"{what} grad2[{k}]: ")


def error_of(fn):
    ct.clear_error()
    h = fn()
    assert not h, "expected a failure"
    return ct.last_error()


# ------------------------------------------------------------------ cross_entropy / nll_loss

CLS_SHAPES = [(5, 7), (7,), (3, 4, 5), (2, 3, 4, 2)]


def class_targets(shape, ignore=None):
    C = shape[1] if len(shape) > 1 else shape[0]
    tshape = (shape[0],) + shape[2:] if len(shape) > 1 else ()
    t = torch.randint(0, C, tshape, generator=GEN)
    if ignore is not None and t.dim() > 0:
        t.view(-1)[::3] = ignore
    return t, C


@pytest.mark.parametrize("shape", CLS_SHAPES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_indices(shape, reduction):
    for use_w in (False, True):
        for ignore in (-100, 1):
            for eps in (0.0, 0.2):
                t, C = class_targets(shape, ignore if ignore >= 0 else None)
                w = torch.rand(C, generator=GEN, dtype=F64) + 0.5 if use_w else None
                for lay, x in layouts(randn(*shape)):
                    what = f"ce {shape} {reduction} w={use_w} ignore={ignore} eps={eps} {lay}"
                    check_fn(lambda hx, ht, hw: lib.ct_cross_entropy(hx, ht, hw, RED[reduction], ignore, eps),
                             lambda tx, tt, tw: Fn.cross_entropy(tx, tt, weight=tw, reduction=reduction,
                                                                 ignore_index=ignore, label_smoothing=eps),
                             [x, t, w], [0], what)


@pytest.mark.parametrize("shape", [(5, 7), (7,), (3, 4, 5)])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_probabilities(shape, reduction):
    for use_w in (False, True):
        for eps in (0.0, 0.3):
            C = shape[1] if len(shape) > 1 else shape[0]
            cls = 1 if len(shape) > 1 else 0
            p = torch.softmax(randn(*shape), cls)
            w = torch.rand(C, generator=GEN, dtype=F64) + 0.5 if use_w else None
            x = randn(*shape)
            what = f"ce prob {shape} {reduction} w={use_w} eps={eps}"
            check_fn(lambda hx, ht, hw: lib.ct_cross_entropy(hx, ht, hw, RED[reduction], -100, eps),
                     lambda tx, tt, tw: Fn.cross_entropy(tx, tt, weight=tw, reduction=reduction, label_smoothing=eps),
                     [x, p, w], [0, 1], what, second=False)
            check_fn(lambda hx, ht, hw: lib.ct_cross_entropy(hx, ht, hw, RED[reduction], -100, eps),
                     lambda tx, tt, tw: Fn.cross_entropy(tx, tt, weight=tw, reduction=reduction, label_smoothing=eps),
                     [x, p, w], [0], what)


@pytest.mark.parametrize("threads", [1, 2])
def test_cross_entropy_blocks(threads):
    """The blocked kernels: short rows (C < 16, several rows per block), long rows,
    rows longer than a block (C > 2048), and enough rows to run blocks in parallel."""
    before = lib.ct_get_num_threads()
    lib.ct_set_num_threads(threads)
    try:
        for shape in [(128, 10), (300, 20), (4, 3000), (5000, 10), (3, 17, 2)]:
            C = shape[1]
            for use_w, ignore, eps in [(False, -100, 0.0), (True, 1, 0.1)]:
                t, _ = class_targets(shape, ignore if ignore >= 0 else None)
                w = torch.rand(C, generator=GEN, dtype=F64) + 0.5 if use_w else None
                what = f"ce blocks {shape} w={use_w} ignore={ignore} eps={eps} threads={threads}"
                check_fn(lambda hx, ht, hw: lib.ct_cross_entropy(hx, ht, hw, 1, ignore, eps),
                         lambda tx, tt, tw: Fn.cross_entropy(tx, tt, weight=tw, ignore_index=ignore,
                                                             label_smoothing=eps),
                         [randn(*shape) * 4, t, w], [0], what, second=False)
            p = torch.softmax(randn(*shape), 1)
            check_fn(lambda hx, ht, hw: lib.ct_cross_entropy(hx, ht, hw, 2, -100, 0.2),
                     lambda tx, tt, tw: Fn.cross_entropy(tx, tt, weight=tw, reduction="sum", label_smoothing=0.2),
                     [randn(*shape), p, None], [0, 1], f"ce blocks prob {shape}", second=False)
            x, t = randn(*shape, dtype=F32), class_targets(shape)[0]
            hx = leaf(x)
            tx = x.detach().requires_grad_(True)
            ho = ct.check(lib.ct_cross_entropy(hx, ct.from_torch(t), None, 1, -100, 0.0))
            out = Fn.cross_entropy(tx, t)
            ct.assert_close(ho, out.detach(), rtol=1e-5, atol=1e-5, what=f"ce blocks f32 {shape}: ")
            (tg,) = torch.autograd.grad(out, [tx])
            (cg,) = grads(ho, [hx], torch.ones(()), False)
            ct.assert_close(cg, tg, rtol=1e-5, atol=1e-6, what=f"ce blocks f32 {shape} grad: ")
    finally:
        lib.ct_set_num_threads(before)


@pytest.mark.parametrize("shape", CLS_SHAPES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss(shape, reduction):
    for use_w in (False, True):
        for ignore in (-100, 2):
            t, C = class_targets(shape, ignore if ignore >= 0 else None)
            w = torch.rand(C, generator=GEN, dtype=F64) + 0.5 if use_w else None
            for lay, x in layouts(randn(*shape)):
                what = f"nll {shape} {reduction} w={use_w} ignore={ignore} {lay}"
                check_fn(lambda hx, ht, hw: lib.ct_nll_loss(hx, ht, hw, RED[reduction], ignore),
                         # (torch's nll_loss2d refuses strided inputs in backward: compare with a contiguous copy)
                         lambda tx, tt, tw: Fn.nll_loss(tx.contiguous(), tt, weight=tw, reduction=reduction,
                                                        ignore_index=ignore),
                         [x, t, w], [0], what)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_class_losses_dtypes(dtype):
    x = randn(6, 5, dtype=dtype)
    t, _ = class_targets((6, 5))
    for reduction in RED:
        for name in ("ce", "nll"):
            hx = leaf(x)
            tx = x.float().detach().requires_grad_(True)
            if name == "ce":
                ho = ct.check(lib.ct_cross_entropy(hx, ct.from_torch(t), None, RED[reduction], -100, 0.1))
                out = Fn.cross_entropy(tx, t, reduction=reduction, label_smoothing=0.1)
            else:
                ho = ct.check(lib.ct_nll_loss(hx, ct.from_torch(t), None, RED[reduction], -100))
                out = Fn.nll_loss(tx, t, reduction=reduction)
            tol = TOL[dtype]
            ct.assert_close(ho, out.detach().to(dtype), rtol=tol, atol=tol, what=f"{name} {dtype} {reduction}: ")
            g = torch.randn(out.shape, generator=GEN).to(dtype)
            (tg,) = torch.autograd.grad(out, [tx], g.float())
            (cg,) = grads(ho, [hx], g, False)
            ct.assert_close(cg, tg.to(dtype), rtol=tol, atol=tol, what=f"{name} {dtype} {reduction} grad: ")


def test_class_losses_all_ignored_and_empty():
    x = randn(3, 4)
    t = torch.tensor([1, 1, 1])
    for eps in (0.0, 0.1):
        ho = ct.check(lib.ct_cross_entropy(ct.from_torch(x), ct.from_torch(t), None, 1, 1, eps))
        ct.assert_close(ho, Fn.cross_entropy(x, t, ignore_index=1, label_smoothing=eps))  # NaN, as torch
    ho = ct.check(lib.ct_nll_loss(ct.from_torch(x), ct.from_torch(t), None, 1, 1))
    ct.assert_close(ho, Fn.nll_loss(x, t, ignore_index=1))
    # the gradient of an all-ignored mean is 0 whatever flows in (NaN from the loss itself)
    for cg in (False, True):
        for name, cfn, tfn in [("nll", lambda hx: lib.ct_nll_loss(hx, ct.from_torch(t), None, 1, 1),
                                lambda tx: Fn.nll_loss(tx, t, ignore_index=1)),
                               ("ce", lambda hx: lib.ct_cross_entropy(hx, ct.from_torch(t), None, 1, 1, 0.2),
                                lambda tx: Fn.cross_entropy(tx, t, ignore_index=1, label_smoothing=0.2))]:
            tx = x.clone().requires_grad_()
            want, = torch.autograd.grad(tfn(tx), tx, torch.tensor(float("nan"), dtype=F64), create_graph=cg)
            hx = leaf(x)
            got = grads(ct.check(cfn(hx)), [hx], torch.tensor(float("nan"), dtype=F64), cg)[0]
            ct.assert_close(got, want.detach(), what=f"{name} create_graph={cg}: ")
    e = torch.zeros(0, 4, dtype=F64)
    te = torch.zeros(0, dtype=torch.long)
    for reduction in RED:
        ho = ct.check(lib.ct_cross_entropy(ct.from_torch(e), ct.from_torch(te), None, RED[reduction], -100, 0.0))
        ct.assert_close(ho, Fn.cross_entropy(e, te, reduction=reduction))
    # no classes: torch's smoothing term and the probabilities' mean divide 0 by 0
    for shape in [(2, 0), (0, 3), (0, 0), (1, 0)]:
        xz = torch.zeros(shape, dtype=F64)
        for eps in (0.0, 0.3):
            for reduction in RED:
                for tz in (torch.zeros(shape, dtype=F64), torch.full(shape[:1], -100)):
                    ho = ct.check(lib.ct_cross_entropy(ct.from_torch(xz), ct.from_torch(tz), None, RED[reduction], -100,
                                                       eps))
                    ct.assert_close(ho, Fn.cross_entropy(xz, tz, reduction=reduction, label_smoothing=eps),
                                    what=f"cross_entropy {shape} {tz.dtype} {reduction} eps {eps}: ")


def test_class_losses_extreme_logits():
    x = torch.tensor([[1000.0, -1000.0, 0.0], [-float("inf"), 0.0, 1.0]], dtype=F64)
    t = torch.tensor([0, 1])
    ho = ct.check(lib.ct_cross_entropy(ct.from_torch(x), ct.from_torch(t), None, 0, -100, 0.0))
    ct.assert_close(ho, Fn.cross_entropy(x, t, reduction="none"), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, F64], ids=str)
def test_cross_entropy_grad_non_finite_weights_and_ignored_rows(dtype):
    """torch's gradient reads only w[target] without smoothing (a NaN or inf weight
    of another class leaves it finite); an ignored row's is 0 - softmax * 0 (NaN
    where its logits are NaN or +inf) and, with smoothing, 0 * w summed (NaN for
    non-finite weights); fused and create_graph alike"""
    g = torch.Generator().manual_seed(11)
    for trial in range(90):
        n, c = 2 + trial % 3, 3 + trial % 2
        x = torch.randn(n, c, generator=g, dtype=F64)
        t = torch.randint(0, c, (n,), generator=g)
        ig = [-100, 0, 1][trial % 3]
        if trial % 4 == 0:
            t[0] = ig if ig >= 0 else -100
        w = torch.rand(c, generator=g, dtype=F64) + 0.5 if trial % 2 else None
        if w is not None and trial % 5 < 3:
            w[trial % c] = [math.nan, math.inf, -math.inf][trial % 3]
        if trial % 7 < 3:
            x[0, trial % c] = [math.nan, math.inf, -math.inf][trial % 3]
        x, w = x.to(dtype), None if w is None else w.to(dtype)
        ls = [0.0, 0.0, 0.2][trial % 3]
        for red, rname in enumerate(["none", "mean", "sum"]):
            xt = x.clone().requires_grad_()
            out = Fn.cross_entropy(xt, t, weight=w, reduction=rname, ignore_index=ig, label_smoothing=ls)
            go = torch.randn(out.shape, generator=g, dtype=F64).to(dtype)
            want, = torch.autograd.grad(out, xt, go)
            for cg in (False, True):
                hx = leaf(x)
                ho = ct.check(lib.ct_cross_entropy(hx, ct.from_torch(t), None if w is None else ct.from_torch(w), red,
                                                   ig, ls))
                got = ct.to_torch(grads(ho, [hx], go, cg)[0])
                tol = 1e-5 if dtype == torch.float32 else 1e-10
                assert torch.allclose(got, want, rtol=tol, atol=tol, equal_nan=True), \
                    f"trial {trial} {rname} create_graph={cg}: {got} != {want}"


@pytest.mark.parametrize("dtype", [torch.float32, F64], ids=str)
def test_log_softmax_and_cross_entropy_keep_digits(dtype):
    """log_softmax is (x - max) - log(sum(exp(x - max))) in that order, as torch:
    large logits keep their digits, and an inf logit anywhere in a row gives NaN."""
    ct.declare("ct_log_softmax", T, [CT, c_int])
    rows = [[1e8, 1e8, 0.0, -3.0], [1000.5, 1000.25, 999.0, 1000.0], [30.1, 30.2, 29.9, 30.0],
            [1.0, float("inf"), 0.0, 2.0], [-float("inf")] * 4, [0.5, -float("inf"), 0.25, 1.0]]
    x = torch.tensor(rows, dtype=dtype)
    ct.assert_close(ct.check(lib.ct_log_softmax(ct.from_torch(x), 1)), torch.log_softmax(x, 1), rtol=0, atol=0,
                    what="log_softmax: ")
    for t in (torch.tensor([0, 1, 2, 3, 0, 2]), torch.tensor([3, 0, 1, 1, 2, 0])):
        for eps in (0.0, 0.1):
            ho = ct.check(lib.ct_cross_entropy(ct.from_torch(x), ct.from_torch(t), None, 0, -100, eps))
            ct.assert_close(ho, Fn.cross_entropy(x, t, reduction="none", label_smoothing=eps),
                            rtol=1e-6 if dtype == torch.float32 else 1e-12, atol=0, what=f"cross_entropy {eps}: ")
    fin = x[:3]
    t = torch.tensor([0, 1, 2])
    check_fn(lambda hx, ht: lib.ct_cross_entropy(hx, ht, None, 1, -100, 0.0),
             lambda a, b: Fn.cross_entropy(a, b), [fin.double(), t], [0], "cross_entropy large logits", second=False)


def test_class_loss_errors():
    x = ct.from_torch(randn(3, 4))
    cases = [
        (lambda: lib.ct_nll_loss(x, ct.from_torch(torch.tensor([0, 1])), None, 1, -100),
         "Expected input batch_size (3) to match target batch_size (2)."),
        (lambda: lib.ct_nll_loss(x, ct.from_torch(torch.tensor([0, 1, 5])), None, 1, -100), "Target 5 is out of bounds."),
        (lambda: lib.ct_cross_entropy(x, ct.from_torch(torch.tensor([0, 1, -3])), None, 1, -100, 0.0),
         "Target -3 is out of bounds."),
        (lambda: lib.ct_nll_loss(x, ct.from_torch(torch.tensor([0, 1, 2], dtype=torch.int32)), None, 1, -100),
         "expected scalar type Long but found Int"),
        (lambda: lib.ct_nll_loss(x, ct.from_torch(torch.tensor([0, 1, 2])), ct.from_torch(torch.ones(3)), 1, -100),
         "weight tensor should be defined either for all 4 classes or no classes but got weight tensor of shape: [3]"),
        (lambda: lib.ct_nll_loss(ct.from_torch(torch.randn(())), ct.from_torch(torch.tensor(0)), None, 1, -100),
         "Expected 1 or more dimensions (got 0)"),
        (lambda: lib.ct_nll_loss(ct.from_torch(torch.randn(2, 3, 4)), ct.from_torch(torch.zeros(2, 3, dtype=torch.long)),
                                 None, 1, -100), "Expected target size [2, 4], got [2, 3]"),
        (lambda: lib.ct_nll_loss(ct.from_torch(torch.randn(2, 3, 4, 5)), ct.from_torch(torch.zeros(2, 4, dtype=torch.long)),
                                 None, 1, -100),
         "only batches of spatial targets supported (3D tensors) but got targets of dimension: 2"),
        (lambda: lib.ct_cross_entropy(x, ct.from_torch(torch.randn(3, 5)), None, 1, -100, 0.0),
         "0D or 1D target tensor expected, multi-target not supported"),
        (lambda: lib.ct_cross_entropy(x, ct.from_torch(torch.randn(3, 4)), None, 1, -100, 1.5),
         "label_smoothing must be between 0.0 and 1.0. Got: 1.5"),
        (lambda: lib.ct_cross_entropy(x, ct.from_torch(torch.randn(3, 4)), None, 1, 1, 0.0),
         "ignore_index is not supported for floating point target"),
        (lambda: lib.ct_nll_loss(x, ct.from_torch(torch.tensor([0, 1, 2])), None, 7, -100), "is not a valid value for reduction"),
    ]
    for fn, msg in cases:
        err = error_of(fn)
        assert err and msg in err, f"want {msg!r}, got {err!r}"
    for shape in [(4, 2), (0, 2), (1, 2), (4, 2, 3), (2, 3, 4, 5)]:  # a 0-dim target for a batch
        xs, t = randn(*shape), torch.tensor(1)
        for cfn, tfn in [(lambda: lib.ct_nll_loss(ct.from_torch(xs), ct.from_torch(t), None, 1, -100), Fn.nll_loss),
                         (lambda: lib.ct_cross_entropy(ct.from_torch(xs), ct.from_torch(t), None, 1, -100, 0.0),
                          Fn.cross_entropy)]:
            want = ct.torch_error(lambda: tfn(xs, t))
            ct.clear_error()
            ct.assert_error(cfn(), want, what=f"{tfn.__name__}({shape}, 0-dim target): ")


def test_class_loss_check_order():
    """torch's order: cross_entropy looks at class probabilities' target dtype,
    ignore_index and weight, then runs log_softmax (naming its kernel for a
    non-empty integer input); nll_loss checks shapes and the weight's size, then
    its kernel names the input's dtype before the target's is read"""
    for xs in [(3,), (2, 3), (2, 3, 4), (2, 3, 4, 5), (0, 3), ()]:
        for xd in (torch.int64, torch.int32, torch.bool, torch.float32):
            for ts, td in [((2,), torch.int64), ((2,), torch.int32), (xs[:1] + xs[2:], torch.int64),
                           (xs[:1] + xs[2:], torch.int32), ((), torch.int64), (xs, torch.float32), (xs, torch.int64)]:
                for w in (None, torch.ones(7), torch.ones(xs[1] if len(xs) > 1 else 3)):
                    x, t = torch.ones(xs, dtype=xd), torch.zeros(ts, dtype=td)
                    if xs and not x.numel() or (w is not None and xd != torch.float32):
                        continue  # torch returns early for empty inputs (not copied); weights of another dtype
                    hw = None if w is None else ct.from_torch(w)
                    for name, tfn, cfn in [
                            ("cross_entropy", lambda: Fn.cross_entropy(x, t, weight=w),
                             lambda: lib.ct_cross_entropy(ct.from_torch(x), ct.from_torch(t), hw, 1, -100, 0.0)),
                            ("nll_loss", lambda: Fn.nll_loss(x, t, weight=w),
                             lambda: lib.ct_nll_loss(ct.from_torch(x), ct.from_torch(t), hw, 1, -100))]:
                        ct.assert_same_outcome(cfn, tfn, f"{name}({xs} {xd}, {ts} {td}, w={None if w is None else w.numel()}): ")


def test_weight_not_differentiable():
    """A class weight that requires grad is refused at the call, as torch's
    check_no_requires_grad does (it has no derivative formula)."""
    x = leaf(randn(3, 4))
    w = leaf(torch.rand(4, dtype=F64))
    ct.clear_error()
    assert not lib.ct_cross_entropy(x, ct.from_torch(torch.tensor([0, 1, 2])), w, 1, -100, 0.0)
    assert "The function 'nll_loss_forward' is not differentiable with respect to argument 'weight'." in ct.last_error()


# ------------------------------------------------------------------ pointwise losses

PW = {
    "mse": (lambda hx, hy, hw, hp, r, b: lib.ct_mse_loss(hx, hy, r), lambda x, y, w, p, r, b: Fn.mse_loss(x, y, reduction=r)),
    "l1": (lambda hx, hy, hw, hp, r, b: lib.ct_l1_loss(hx, hy, r), lambda x, y, w, p, r, b: Fn.l1_loss(x, y, reduction=r)),
    "smooth_l1": (lambda hx, hy, hw, hp, r, b: lib.ct_smooth_l1_loss(hx, hy, r, b),
                  lambda x, y, w, p, r, b: Fn.smooth_l1_loss(x, y, reduction=r, beta=b)),
    "bce": (lambda hx, hy, hw, hp, r, b: lib.ct_binary_cross_entropy(hx, hy, hw, r),
            lambda x, y, w, p, r, b: Fn.binary_cross_entropy(x, y, weight=w, reduction=r)),
    "bce_logits": (lambda hx, hy, hw, hp, r, b: lib.ct_binary_cross_entropy_with_logits(hx, hy, hw, hp, r),
                   lambda x, y, w, p, r, b: Fn.binary_cross_entropy_with_logits(x, y, weight=w, pos_weight=p, reduction=r)),
}


@pytest.mark.parametrize("name", list(PW))
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_pointwise_losses(name, reduction):
    cfn, tfn = PW[name]
    for shape in [(4, 5), (7,), (2, 3, 4), ()]:
        x = randn(*shape)
        y = randn(*shape)
        if name == "bce":
            x = torch.rand(shape, generator=GEN, dtype=F64) * 0.9 + 0.05
            y = torch.rand(shape, generator=GEN, dtype=F64)
        if name == "bce_logits":
            y = torch.rand(shape, generator=GEN, dtype=F64)
        ws = [None]
        if name in ("bce", "bce_logits") and shape:
            ws.append(torch.rand(shape[-1:], generator=GEN, dtype=F64) + 0.5)
        pws = [None]
        if name == "bce_logits" and shape:
            pws.append(torch.rand(shape[-1:], generator=GEN, dtype=F64) + 0.5)
        betas = [1.0] if name != "smooth_l1" else [1.0, 0.5, 0.0]
        for w in ws:
            for pw in pws:
                for beta in betas:
                    for lay, xx in layouts(x):
                        what = f"{name} {shape} {reduction} w={w is not None} pw={pw is not None} beta={beta} {lay}"
                        second = name not in ("l1",)
                        check_fn(lambda hx, hy, hw, hp: cfn(hx, hy, hw, hp, RED[reduction], beta),
                                 lambda tx, ty, tw, tp: tfn(tx, ty, tw, tp, reduction, beta),
                                 [xx, y, w, pw], [0, 1], what, second=second)


@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0])
def test_smooth_l1_grad_at_ties(beta):
    """torch's smooth_l1 gradient: -1 at or below -beta, 1 at or above beta (so with
    beta 0, -1 where x == y), (x - y) / beta between, NaN where x - y is NaN"""
    x = torch.tensor([0.5, -1.0, 2.0, 0.0, math.nan, beta, -beta, 0.25, 3.0], dtype=F64)
    y = torch.tensor([0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.25, 3.0], dtype=F64)
    for reduction in RED:
        check_fn(lambda hx, hy: lib.ct_smooth_l1_loss(hx, hy, RED[reduction], beta),
                 lambda tx, ty: Fn.smooth_l1_loss(tx, ty, reduction=reduction, beta=beta), [x, y], [0, 1],
                 f"smooth_l1 ties beta={beta} {reduction}", second=False)


def test_cross_entropy_label_smoothing_checked_in_torchs_order():
    """torch checks label_smoothing > 1 before anything else of class-index
    targets (the weight's requires_grad, log_softmax), after the target dtype,
    ignore_index, the weight's size and log_softmax with probabilities; NaN
    or a negative value smooths nothing"""
    x, xi = randn(3, 4), torch.randint(-3, 3, (3, 4))
    ti, tp = torch.tensor([0, 1, 2]), torch.softmax(randn(3, 4), 1)
    w, wbad = torch.rand(4, generator=GEN, dtype=F64).requires_grad_(), torch.rand(5, generator=GEN, dtype=F64)
    cases = [(x, tp, None, 1, 1.1), (x, tp, None, -100, 1.1), (x, tp, wbad, -100, 1.5), (xi, tp.long(), None, -100, 2.0),
             (x, ti, w, -100, 1.1), (x, ti, w, -100, 0.1), (x, tp, w, -100, 1.1), (xi, ti, None, -100, 1.1),
             (x, ti, None, -100, math.nan), (x, tp, None, -100, math.nan), (x, ti, None, -100, -0.5),
             (xi.double(), ti, None, -100, 1.1)]
    for k, (tx, tt, tw, ign, ls) in enumerate(cases):
        what = f"case {k}: "
        want = ct.torch_error(lambda: Fn.cross_entropy(tx, tt, weight=tw, ignore_index=ign, label_smoothing=ls))
        hw = None if tw is None else ct.leaf(tw, tw.requires_grad)
        got = lib.ct_cross_entropy(ct.from_torch(tx), ct.from_torch(tt), hw, RED["mean"], ign, ls)
        if want is None:
            ct.assert_close(ct.check(got), Fn.cross_entropy(tx, tt, weight=tw, ignore_index=ign, label_smoothing=ls),
                            rtol=1e-12, atol=1e-12, what=what)
        else:
            ct.assert_error(got, want, what=what)
        ct.clear_error()


@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0])
def test_smooth_l1_second_derivative_where_the_difference_is_nan(beta):
    """torch's double backward is (|x - y| < beta) / beta: 0 where x - y is
    NaN (inf - inf, a NaN operand) and at the ties, not 1 / beta"""
    inf = math.inf
    x = torch.tensor([inf, math.nan, 1.0, -inf, beta, -beta, 0.25, 0.1], dtype=F64)
    y = torch.tensor([inf, 0.0, math.nan, -inf, 0.0, 0.0, 0.0, 0.3], dtype=F64)
    for reduction in RED:
        check_fn(lambda hx, hy: lib.ct_smooth_l1_loss(hx, hy, RED[reduction], beta),
                 lambda tx, ty: Fn.smooth_l1_loss(tx, ty, reduction=reduction, beta=beta), [x, y], [0, 1],
                 f"smooth_l1 NaN differences beta={beta} {reduction}", second=True)


@pytest.mark.parametrize("tdtype", [torch.bool, torch.int64, torch.uint8])
def test_pointwise_losses_integer_targets(tdtype):
    """a bool or integer target promotes with the input in the kernels (torch's
    TensorIterator), in the double backward too: sub refuses bool, and the
    smooth_l1 composite crashed on the failed difference"""
    x = randn(3, 4) * 3
    y = (torch.rand(3, 4, generator=GEN) * 3).to(tdtype)
    for name in ("mse", "l1", "smooth_l1", "bce", "bce_logits"):
        cfn, tfn = PW[name]
        xx = torch.rand(3, 4, generator=GEN, dtype=F64) * 0.9 + 0.05 if name == "bce" else x
        def torch_grads():  # torch's own mse / bce backward refuses some (Found dtype Bool ...)
            t = xx.clone().requires_grad_()
            return torch.autograd.grad(tfn(t, y, None, None, "mean", 1.0), t, create_graph=True)
        if ct.torch_error(torch_grads) is not None:
            continue
        for reduction in RED:
            check_fn(lambda hx, hy: cfn(hx, hy, None, None, RED[reduction], 1.0),
                     lambda tx, ty: tfn(tx, ty, None, None, reduction, 1.0), [xx, y], [0],
                     f"{name} target {tdtype} {reduction}", second=name != "l1")


def test_mse_broadcast_and_promotion():
    x = randn(3, 4)
    y = randn(4)
    for reduction in RED:
        check_fn(lambda hx, hy: lib.ct_mse_loss(hx, hy, RED[reduction]),
                 lambda tx, ty: Fn.mse_loss(tx, ty, reduction=reduction), [x, y], [0, 1], f"mse bcast {reduction}")
    x32 = randn(3, 4, dtype=F32)
    ho = ct.check(lib.ct_mse_loss(ct.from_torch(x32), ct.from_torch(y), 1))
    ct.assert_close(ho, Fn.mse_loss(x32, y), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_pointwise_dtypes(dtype):
    x = (torch.rand(5, 6, generator=GEN) * 0.9 + 0.05).to(dtype)
    y = torch.rand(5, 6, generator=GEN).to(dtype)
    tol = TOL[dtype]
    for name, (cfn, tfn) in PW.items():
        for reduction in RED:
            ho = ct.check(cfn(ct.from_torch(x), ct.from_torch(y), None, None, RED[reduction], 1.0))
            want = tfn(x.float(), y.float(), None, None, reduction, 1.0).to(dtype)
            ct.assert_close(ho, want, rtol=tol * 2, atol=tol * 2, what=f"{name} {dtype} {reduction}: ")


def test_pointwise_errors():
    x = ct.from_torch(torch.tensor([0.5, 1.5]))
    y = ct.from_torch(torch.tensor([0.0, 1.0]))
    cases = [
        (lambda: lib.ct_binary_cross_entropy(x, y, None, 1), "all elements of input should be between 0 and 1"),
        (lambda: lib.ct_binary_cross_entropy(ct.from_torch(torch.tensor([0.5, 0.5])), ct.from_torch(torch.ones(3)), None, 1),
         "Using a target size (torch.Size([3])) that is different to the input size (torch.Size([2])) is deprecated"),
        (lambda: lib.ct_binary_cross_entropy_with_logits(ct.from_torch(torch.randn(3)), ct.from_torch(torch.rand(4)),
                                                         None, None, 1),
         "Target size (torch.Size([4])) must be the same as input size (torch.Size([3]))"),
        (lambda: lib.ct_smooth_l1_loss(y, y, 1, -1.0), "smooth_l1_loss does not support negative values for beta."),
        (lambda: lib.ct_mse_loss(ct.from_torch(torch.randn(3)), ct.from_torch(torch.randn(4)), 1),
         "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0"),
    ]
    for fn, msg in cases:
        err = error_of(fn)
        assert err and msg in err, f"want {msg!r}, got {err!r}"


# ------------------------------------------------------------------ normalisation

@pytest.mark.parametrize("shape,ns", [((4, 6), (6,)), ((2, 3, 5), (5,)), ((2, 3, 4), (3, 4)), ((6,), (6,))])
def test_layer_norm(shape, ns):
    for use_w in (False, True):
        for use_b in (False, True):
            w = randn(*ns) if use_w else None
            b = randn(*ns) if use_b else None
            for lay, x in layouts(randn(*shape)):
                what = f"layer_norm {shape} {ns} w={use_w} b={use_b} {lay}"
                diff = [0] + ([1] if use_w else []) + ([2] if use_b else [])
                check_fn(lambda hx, hw, hb: lib.ct_layer_norm(hx, ct.i64(ns), len(ns), hw, hb, 1e-5),
                         lambda tx, tw, tb: Fn.layer_norm(tx, ns, tw, tb, 1e-5), [x, w, b], diff, what, rtol=1e-9)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_layer_norm_dtypes(dtype):
    x = randn(8, 16, dtype=dtype)
    w = randn(16, dtype=dtype)
    b = randn(16, dtype=dtype)
    ho = ct.check(lib.ct_layer_norm(ct.from_torch(x), ct.i64([16]), 1, ct.from_torch(w), ct.from_torch(b), 1e-5))
    want = Fn.layer_norm(x.float(), (16,), w.float(), b.float()).to(dtype)
    ct.assert_close(ho, want, rtol=TOL[dtype] * 3, atol=TOL[dtype] * 3)


@pytest.mark.parametrize("shape", [(4, 3), (3, 2, 5), (2, 3, 4, 2)])
def test_batch_norm_train(shape):
    C = shape[1]
    for use_w in (False, True):
        for lay, x in layouts(randn(*shape)):
            rm, rv = randn(C), torch.rand(C, generator=GEN, dtype=F64) + 0.5
            w = randn(C) if use_w else None
            b = randn(C) if use_w else None
            hrm, hrv = ct.from_torch(rm), ct.from_torch(rv)
            trm, trv = rm.clone(), rv.clone()
            ho = ct.check(lib.ct_batch_norm(ct.from_torch(x), hrm, hrv, ctt(w), ctt(b), True, 0.1, 1e-5))
            out = Fn.batch_norm(x, trm, trv, w, b, True, 0.1, 1e-5)
            ct.assert_close(ho, out, rtol=1e-10, atol=1e-10, what=f"bn {shape} {lay}: ")
            ct.assert_close(hrm, trm, rtol=1e-12, atol=1e-12, what="running_mean: ")
            ct.assert_close(hrv, trv, rtol=1e-12, atol=1e-12, what="running_var: ")
            diff = [0] + ([1, 2] if use_w else [])
            check_fn(lambda hx, hw, hb: lib.ct_batch_norm(hx, None, None, hw, hb, True, 0.1, 1e-5),
                     lambda tx, tw, tb: Fn.batch_norm(tx, None, None, tw, tb, True, 0.1, 1e-5),
                     [x, w, b], diff, f"bn grads {shape} w={use_w} {lay}", rtol=1e-9)


@pytest.mark.parametrize("shape", [(4, 3), (3, 2, 5), (16, 8, 30, 30)])  # the last over the threads
def test_batch_norm_eval(shape):
    C = shape[1]
    rm, rv = randn(C), torch.rand(C, generator=GEN, dtype=F64) + 0.5
    w, b = randn(C), randn(C)
    check_fn(lambda hx, hw, hb: lib.ct_batch_norm(hx, ct.from_torch(rm), ct.from_torch(rv), hw, hb, False, 0.1, 1e-5),
             lambda tx, tw, tb: Fn.batch_norm(tx, rm, rv, tw, tb, False, 0.1, 1e-5),
             [randn(*shape), w, b], [0, 1, 2], f"bn eval {shape}", rtol=1e-9)


def test_bce_with_logits_unreduced_takes_the_targets_layout():
    """torch's binary_cross_entropy_with_logits is a composite that works in
    place on 1 - target: reduction='none' gives the target's layout whatever
    the input's (with weight and pos_weight too); mse_loss follows both"""
    base = randn(3, 2)
    layouts = {"contiguous": lambda t: t.t().contiguous(), "transposed": lambda t: t.t(),
               "sliced": lambda t: torch.cat([t, t]).t()[:, ::2]}
    pw = torch.rand(3, generator=GEN, dtype=F64) + 0.5
    for (xn, xf), (yn, yf) in [(a, b) for a in layouts.items() for b in layouts.items()]:
        x, y = xf(base), yf(torch.sigmoid(base))
        for w, p in [(None, None), (pw, None), (None, pw)]:
            want = Fn.binary_cross_entropy_with_logits(x, y, w, reduction="none", pos_weight=p)
            got = ct.check(lib.ct_binary_cross_entropy_with_logits(ct.from_torch(x), ct.from_torch(y), ctt(w), ctt(p),
                                                                   0))
            what = f"input {xn}, target {yn}, weight {w is not None}, pos_weight {p is not None}: "
            ct.assert_close(got, want, rtol=1e-12, atol=1e-14, what=what)
            ct.assert_same_layout(got, want, what=what)


def test_batch_norm_eval_paths_with_infinite_parameters():
    """torch's eval batch_norm is x alpha + beta (alpha = w rstd, beta = b -
    mean alpha) for a contiguous or channels-last input and a contiguous
    weight and bias, else its generic ((x - mean) rstd) w + b: the two differ where
    a weight is infinite (NaN against +-inf), so each layout must take torch's"""
    inf = math.inf
    w = torch.tensor([1.0, inf, -inf, inf], dtype=F64)
    rm = torch.tensor([0.3, -0.4, 0.2, 0.0], dtype=F64)
    rv = torch.tensor([1.0, 2.0, 0.7, 1.0], dtype=F64)
    b = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=F64)
    strided = lambda t: torch.stack([t, t], 1).flatten()[::2]  # noqa: E731
    x2 = randn(3, 4)
    x4 = randn(2, 4, 3, 3)
    xs = [("contiguous", x2, w, rm), ("transposed", x2.t().contiguous().t(), w, rm),
          ("channels_last", x4.contiguous(memory_format=torch.channels_last), w, rm),
          ("permuted 4-d", x4.permute(0, 1, 3, 2), w, rm),
          ("channels_last_3d", randn(2, 4, 2, 3, 3).contiguous(memory_format=torch.channels_last_3d), w, rm),
          ("strided weight", x2, strided(w), rm, rv, b), ("strided bias", x2, w, rm, rv, strided(b)),
          ("strided mean", x2, w, strided(rm), rv, b), ("strided var", x2, w, rm, strided(rv), b)]
    for what, x, tw, trm, trv, tb in [c if len(c) == 6 else c + (rv, b) for c in xs]:
        want = Fn.batch_norm(x, trm.clone(), trv.clone(), tw, tb, False, 0.1, 1e-5)
        got = ct.check(lib.ct_batch_norm(ct.from_torch(x), ct.from_torch(trm), ct.from_torch(trv), ct.from_torch(tw),
                                         ct.from_torch(tb), False, 0.1, 1e-5))
        ct.assert_close(got, want, rtol=1e-12, atol=1e-12, what=what + ": ")
    for what, x in [("training contiguous", x2), ("training transposed", x2.t().contiguous().t())]:
        want = Fn.batch_norm(x, None, None, w, b, True, 0.1, 1e-5)
        got = ct.check(lib.ct_batch_norm(ct.from_torch(x), None, None, ct.from_torch(w), ct.from_torch(b), True,
                                         0.1, 1e-5))
        ct.assert_close(got, want, rtol=1e-12, atol=1e-12, what=what + ": ")


def test_batch_norm_half_input_is_refused_first():
    """a float16 input: torch's "not implemented for 'Half'", whatever the
    parameters' dtypes (float64 ones included)"""
    x = randn(4, 3).half()
    for pd in (F32, F64, torch.bfloat16, torch.float16):
        p = torch.ones(3, dtype=pd)
        want = ct.torch_error(lambda: Fn.batch_norm(x, None, None, p, None, True))
        ct.assert_error(lib.ct_batch_norm(ct.from_torch(x), None, None, ct.from_torch(p), None, True, 0.1, 1e-5),
                        want, what=f"{pd}: ")
        ct.clear_error()


def test_batch_norm_float32_running_stats():
    x = randn(8, 4, 3, dtype=F32)
    rm, rv = torch.zeros(4), torch.ones(4)
    hrm, hrv = ct.from_torch(rm), ct.from_torch(rv)
    for _ in range(3):
        ct.check(lib.ct_batch_norm(ct.from_torch(x), hrm, hrv, None, None, True, 0.1, 1e-5))
        Fn.batch_norm(x, rm, rv, None, None, True, 0.1, 1e-5)
    ct.assert_close(hrm, rm, rtol=1e-6, atol=1e-6)
    ct.assert_close(hrv, rv, rtol=1e-6, atol=1e-6)


def test_batch_norm_empty_input():
    """torch's batch_norm of an empty input (N = 0 or a spatial size 0): after
    F.batch_norm's batch check (training: N x spatial = 1 fails), input.clone() *
    weight[0] + bias[0], with that history (CloneBackward0, MulBackward0,
    AddBackward0) and promotion, before any check of the running statistics or
    the parameters' sizes (weight of 5 for 3 channels passes; one of 0 fails as
    weight[0]); the running statistics are left as they are, in eval mode too."""
    for shape in [(0, 3), (0, 3, 4), (2, 3, 0), (1, 0), (1, 0, 1), (0, 0)]:
        for rs in [3, 5, 0, None]:
            for w in [3, 5, 0, None]:
                for training in (True, False):
                    x = torch.arange(float(math.prod(shape)), dtype=F64).reshape(shape)
                    trm = None if rs is None else torch.arange(float(rs), dtype=F64)
                    trv = None if rs is None else torch.ones(rs, dtype=F64)
                    tw = None if w is None else torch.full((w,), 2.0, dtype=F64)
                    tb = None if w is None else torch.full((w,), 3.0, dtype=F32)
                    what = f"bn {shape} stats {rs} weight {w} training {training}: "
                    hrm, hrv = ctt(trm), ctt(trv)
                    err = ct.torch_error(lambda: Fn.batch_norm(x, trm, trv, tw, tb, training, 0.1, 1e-5))
                    ct.clear_error()
                    got = lib.ct_batch_norm(ct.from_torch(x), hrm, hrv, ctt(tw), ctt(tb), training, 0.1, 1e-5)
                    if err is not None:
                        ct.assert_error(got, err, what=what)
                        continue
                    ct.assert_close(ct.check(got), Fn.batch_norm(x, trm, trv, tw, tb, training, 0.1, 1e-5), what=what)
                    if rs is not None:
                        ct.assert_close(hrm, trm, what=what + "running_mean: ")
                        ct.assert_close(hrv, trv, what=what + "running_var: ")
    x, w, b = randn(0, 3), randn(3), randn(3)
    check_fn(lambda hx, hw, hb: lib.ct_batch_norm(hx, None, None, hw, hb, True, 0.1, 1e-5),
             lambda tx, tw, tb: Fn.batch_norm(tx, None, None, tw, tb, True, 0.1, 1e-5), [x, w, b], [0, 1, 2],
             "bn empty grads")
    for hw, hb, name in [(None, None, b"CloneBackward0"), (w, None, b"MulBackward0"), (w, b, b"AddBackward0")]:
        hx = ct.from_torch(x)
        lib.ct_set_requires_grad(hx, True)
        ho = ct.check(lib.ct_batch_norm(hx, None, None, ctt(hw), ctt(hb), True, 0.1, 1e-5))
        assert lib.ct_grad_fn_name(ho) == name


def test_norm_errors():
    x = ct.from_torch(torch.randn(3, 4))
    cases = [
        (lambda: lib.ct_layer_norm(x, ct.i64([5]), 1, None, None, 1e-5),
         "Given normalized_shape=[5], expected input with shape [*, 5], but got input of size[3, 4]"),
        (lambda: lib.ct_layer_norm(x, ct.i64([4]), 1, ct.from_torch(torch.ones(3)), None, 1e-5),
         "Expected weight to be of same shape as normalized_shape, but got weight of shape [3] and normalized_shape = [4]"),
        (lambda: lib.ct_batch_norm(ct.from_torch(torch.randn(1, 3)), None, None, None, None, True, 0.1, 1e-5),
         "Expected more than 1 value per channel when training, got input size torch.Size([1, 3])"),
        (lambda: lib.ct_batch_norm(x, ct.from_torch(torch.zeros(5)), ct.from_torch(torch.ones(5)), None, None, True, 0.1, 1e-5),
         "running_mean should contain 4 elements not 5"),
        (lambda: lib.ct_batch_norm(x, None, None, None, None, False, 0.1, 1e-5),
         "running_mean must be defined in evaluation mode"),
    ]
    for fn, msg in cases:
        err = error_of(fn)
        assert err and msg in err, f"want {msg!r}, got {err!r}"


# ------------------------------------------------------------------ dropout

@pytest.mark.parametrize("shape", [(1000,), (20, 30)])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_matches_torch_mask(shape, p):
    x = torch.randn(shape, generator=GEN)
    for seed in (0, 7):
        torch.manual_seed(seed)
        want = Fn.dropout(x, p)
        lib.ct_manual_seed(seed)
        got = ct.check(lib.ct_dropout(ct.from_torch(x), p, True))
        ct.assert_close(got, want, rtol=0, atol=0, what=f"dropout p={p} seed={seed}: ")


def test_dropout_transposed_and_dtypes():
    x = torch.randn(6, 9, generator=GEN).t()
    torch.manual_seed(3)
    want = Fn.dropout(x, 0.3)
    lib.ct_manual_seed(3)
    ct.assert_close(ct.check(lib.ct_dropout(ct.from_torch(x), 0.3, True)), want)
    xh = torch.randn(50, generator=GEN).to(F16)  # torch's CPU bernoulli_ has no Half: same mask as float32
    torch.manual_seed(5)
    want = Fn.dropout(xh.float(), 0.25).to(F16)
    lib.ct_manual_seed(5)
    ct.assert_close(ct.check(lib.ct_dropout(ct.from_torch(xh), 0.25, True)), want, rtol=1e-3, atol=1e-3)
    for dt in (F64, BF16, F32):
        for p in (0.25, 0.259, 0.333):  # 1 - p rounds in bfloat16 before torch divides by it
            xd = torch.randn(50, generator=GEN).to(dt)
            torch.manual_seed(5)
            want = Fn.dropout(xd, p)
            lib.ct_manual_seed(5)
            got = ct.to_torch(ct.check(lib.ct_dropout(ct.from_torch(xd), p, True)))
            assert torch.equal(got, want), f"dropout {dt} p={p}: {(got.double() - want.double()).abs().max()}"


def test_dropout_edges_and_grad():
    x = torch.randn(4, 5, generator=GEN, dtype=F64)
    hx = leaf(x)
    same = ct.check(lib.ct_dropout(hx, 0.5, False))
    ct.assert_close(same, x)
    ct.assert_close(ct.check(lib.ct_dropout(hx, 0.0, True)), x)
    ct.assert_close(ct.check(lib.ct_dropout(hx, 1.0, True)), x * 0)
    lib.ct_manual_seed(11)
    ho = ct.check(lib.ct_dropout(hx, 0.4, True))
    torch.manual_seed(11)
    tx = x.clone().requires_grad_(True)
    out = Fn.dropout(tx, 0.4)
    ct.assert_close(ho, out.detach())
    g = torch.randn(4, 5, generator=GEN, dtype=F64)
    (tg,) = torch.autograd.grad(out, [tx], g)
    (cg,) = grads(ho, [hx], g, False)
    ct.assert_close(cg, tg)
    assert lib.ct_grad_fn_name(ho) == b"MulBackward0"
    err = error_of(lambda: lib.ct_dropout(hx, 1.5, True))
    assert "dropout probability has to be between 0 and 1, but got 1.5" in err
    # integer and bool inputs: torch's input * 0 for p = 1, its noise.div_ refuses between
    for dt in (torch.int64, torch.bool, torch.uint8, torch.int32):
        xi = torch.ones(3, dtype=dt)
        for p in (1.0, 0.5, 0.0):
            for training in (True, False):
                what = f"dropout {dt} {p} {training}: "
                ct.assert_same_outcome(lambda: lib.ct_dropout(ct.from_torch(xi), p, training),
                                       lambda: Fn.dropout(xi, p, training), what,
                                       lambda got, want: ct.assert_close(ct.check(got), want, what=what))


# ------------------------------------------------------------------ activations

ACTS = [
    ("hardtanh", lambda h: lib.ct_hardtanh(h, -0.5, 0.7), lambda x: Fn.hardtanh(x, -0.5, 0.7)),
    ("relu6", lambda h: lib.ct_relu6(h), lambda x: Fn.relu6(x)),
    ("leaky_relu", lambda h: lib.ct_leaky_relu(h, 0.03), lambda x: Fn.leaky_relu(x, 0.03)),
    ("elu", lambda h: lib.ct_elu(h, 1.3), lambda x: Fn.elu(x, 1.3)),
]


@pytest.mark.parametrize("name,cfn,tfn", ACTS)
def test_activations(name, cfn, tfn):
    x = randn(5, 6) * 4
    for lay, xx in layouts(x):
        check_fn(cfn, tfn, [xx], [0], f"{name} {lay}")
    for dt in (F32, F16, BF16):
        xd = (randn(40) * 4).to(dt)
        ct.assert_close(ct.check(cfn(ct.from_torch(xd))), tfn(xd.float()).to(dt), rtol=TOL[dt], atol=TOL[dt])


@pytest.mark.parametrize("name,cfn,tfn", ACTS)
def test_activations_at_edges(name, cfn, tfn):
    """first and second derivatives at the kinks (0, the bounds), where e^x
    overflows (elu's was NaN from 710 up) and at infinities, as torch's"""
    x = torch.tensor([0.0, -0.0, 0.7, -0.5, 6.0, 710.0, 800.0, 1e30, -800.0, -1.0, math.inf, -math.inf], dtype=F64)
    check_fn(cfn, tfn, [x], [0], f"{name} edges")


# ------------------------------------------------------------------ meta and names

def meta(t):
    return ct.check(lib.ct_empty_on(ct.i64(t.shape), t.dim(), ct.ct_dtype_of_torch(t.dtype), ct.CT_META))


def test_meta_shapes():
    x, t = randn(3, 4, 5), torch.zeros(3, 5, dtype=torch.long)
    for r in (0, 1, 2):
        h = ct.check(lib.ct_cross_entropy(meta(x), meta(t), None, r, -100, 0.0))
        assert ct.shape(h) == tuple(Fn.cross_entropy(x, t, reduction=list(RED)[r]).shape)
        # with label smoothing torch 1.13's mean takes masked_select, which no meta
        # kernel has (nor has nll_loss2d in torch: [N, C] here)
        x2, t2 = x[:, :, 0], t[:, 0]
        tm = lambda: Fn.cross_entropy(x2.to("meta"), t2.to("meta"), reduction=list(RED)[r], label_smoothing=0.1)
        h = lib.ct_cross_entropy(meta(x2), meta(t2), None, r, -100, 0.1)
        if ct.torch_error(tm) is None:
            assert h and ct.shape(h) == tuple(tm().shape), r
        else:
            assert not h and "masked_select" in ct.last_error(), r
            ct.clear_error()
        h = ct.check(lib.ct_nll_loss(meta(x), meta(t), None, r, -100))
        assert ct.shape(h) == tuple(Fn.nll_loss(x, t, reduction=list(RED)[r]).shape)
        h = ct.check(lib.ct_mse_loss(meta(x), meta(x), r))
        assert ct.shape(h) == tuple(Fn.mse_loss(x, x, reduction=list(RED)[r]).shape)
    h = ct.check(lib.ct_layer_norm(meta(x), ct.i64([5]), 1, None, None, 1e-5))
    assert ct.shape(h) == (3, 4, 5)
    h = ct.check(lib.ct_batch_norm(meta(x), None, None, None, None, True, 0.1, 1e-5))
    assert ct.shape(h) == (3, 4, 5)
    err = error_of(lambda: lib.ct_nll_loss(meta(x), meta(torch.zeros(3, 4, dtype=torch.long)), None, 1, -100))
    assert "Expected target size [3, 5], got [3, 4]" in err


def test_grad_fn_names():
    x = leaf(randn(3, 4))
    t = ct.from_torch(torch.tensor([0, 1, 2]))
    tx, tt, tp = ct.to_torch(x).requires_grad_(), torch.tensor([0, 1, 2]), torch.rand(3, 4, generator=GEN, dtype=F64)
    w = torch.rand(4, generator=GEN, dtype=F64)
    for target, htarget in [(tt, t), (tp, ct.from_torch(tp))]:  # class indices, class probabilities
        for weight in [None, w]:
            for eps in [0.0, 0.1]:
                for r, red in enumerate(["none", "mean", "sum"]):
                    h = ct.check(lib.ct_cross_entropy(x, htarget, ct.from_torch(weight) if weight is not None
                                                      else None, r, -100, eps))
                    want = Fn.cross_entropy(tx, target, weight, reduction=red, label_smoothing=eps).grad_fn.name()
                    assert lib.ct_grad_fn_name(h) == want.encode(), (target.dtype, weight is None, eps, red)
    assert lib.ct_grad_fn_name(ct.check(lib.ct_mse_loss(x, x, 1))) == b"MseLossBackward0"
    assert lib.ct_grad_fn_name(ct.check(lib.ct_layer_norm(x, ct.i64([4]), 1, None, None, 1e-5))) == \
        b"NativeLayerNormBackward0"


# ------------------------------------------------------------------ large (threaded paths), NaN, empty

def test_large_threaded():
    x = randn(300, 200)
    t, _ = class_targets((300, 200), 3)
    w = torch.rand(200, generator=GEN, dtype=F64) + 0.5
    for reduction in RED:
        check_fn(lambda hx, ht, hw: lib.ct_cross_entropy(hx, ht, hw, RED[reduction], 3, 0.1),
                 lambda tx, tt, tw: Fn.cross_entropy(tx, tt, weight=tw, reduction=reduction, ignore_index=3,
                                                     label_smoothing=0.1),
                 [x, t, w], [0], f"ce large {reduction}", rtol=1e-9, second=False)
        check_fn(lambda hx, hy: lib.ct_mse_loss(hx, hy, RED[reduction]),
                 lambda tx, ty: Fn.mse_loss(tx, ty, reduction=reduction), [x, randn(300, 200)], [0, 1],
                 f"mse large {reduction}", rtol=1e-9, second=False)
    lw, lb = randn(200), randn(200)
    check_fn(lambda hx, hw, hb: lib.ct_layer_norm(hx, ct.i64([200]), 1, hw, hb, 1e-5),
             lambda tx, tw, tb: Fn.layer_norm(tx, (200,), tw, tb, 1e-5), [x, lw, lb], [0, 1, 2], "ln large",
             rtol=1e-9, second=False)
    xb = randn(64, 16, 40)
    bw, bb = randn(16), randn(16)
    check_fn(lambda hx, hw, hb: lib.ct_batch_norm(hx, None, None, hw, hb, True, 0.1, 1e-5),
             lambda tx, tw, tb: Fn.batch_norm(tx, None, None, tw, tb, True, 0.1, 1e-5), [xb, bw, bb], [0, 1, 2],
             "bn large", rtol=1e-9, second=False)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_norm_grads_low_precision(dtype):
    tol = TOL[dtype] * 10
    x, w, b = randn(6, 8, dtype=dtype), randn(8, dtype=dtype), randn(8, dtype=dtype)
    hx, hw, hb = leaf(x), leaf(w), leaf(b)
    tx, tw, tb = (t.float().requires_grad_(True) for t in (x, w, b))
    ho = ct.check(lib.ct_layer_norm(hx, ct.i64([8]), 1, hw, hb, 1e-5))
    out = Fn.layer_norm(tx, (8,), tw, tb)
    g = torch.randn(6, 8, generator=GEN).to(dtype)
    tg = torch.autograd.grad(out, [tx, tw, tb], g.float())
    for flag in (False, True):
        cg = grads(ho, [hx, hw, hb], g, flag)
        for k in range(3):
            ct.assert_close(cg[k], tg[k].to(dtype), rtol=tol, atol=tol, what=f"ln {dtype} grad{k} cg={flag}: ")
    ho = ct.check(lib.ct_batch_norm(hx, None, None, hw, hb, True, 0.1, 1e-5))
    out = Fn.batch_norm(tx, None, None, tw, tb, True)
    tg = torch.autograd.grad(out, [tx, tw, tb], g.float())
    for flag in (False, True):
        cg = grads(ho, [hx, hw, hb], g, flag)
        for k in range(3):
            ct.assert_close(cg[k], tg[k].to(dtype), rtol=tol, atol=tol, what=f"bn {dtype} grad{k} cg={flag}: ")


def test_nan_inf_and_empty():
    x = randn(3, 4)
    x[0, 1] = float("nan")
    x[1, 2] = float("inf")
    t = torch.tensor([0, 2, 3])
    for reduction in RED:
        ho = ct.check(lib.ct_cross_entropy(ct.from_torch(x), ct.from_torch(t), None, RED[reduction], -100, 0.0))
        ct.assert_close(ho, Fn.cross_entropy(x, t, reduction=reduction), rtol=1e-12, atol=1e-12)
        ho = ct.check(lib.ct_mse_loss(ct.from_torch(x), ct.from_torch(randn(3, 4)), RED[reduction]))
        assert ct.shape(ho) == tuple(Fn.mse_loss(x, x, reduction=reduction).shape)
    e = torch.zeros(0, 5, dtype=F64)
    for reduction in RED:
        for name, (cfn, tfn) in PW.items():
            ho = ct.check(cfn(ct.from_torch(e), ct.from_torch(e), None, None, RED[reduction], 1.0))
            ct.assert_close(ho, tfn(e, e, None, None, reduction, 1.0), what=f"{name} empty {reduction}: ")
    ho = ct.check(lib.ct_layer_norm(ct.from_torch(e), ct.i64([5]), 1, None, None, 1e-5))
    ct.assert_close(ho, Fn.layer_norm(e, (5,)))


# ------------------------------------------- dtypes and shapes of mixed arguments

def _same_outcome(cfn, tfn, what, tol=1e-3):
    """ctorch fails with torch's message where torch fails, else gives its dtype,
    shape and values (to tol: 16-bit operands)"""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want, err = tfn(), None
        except (RuntimeError, ValueError) as e:
            want, err = None, ct.torch_message(e)
    ct.clear_error()
    h = cfn()
    if err is not None and "not implemented for" in err:
        return  # a dtype torch's CPU kernels lack (ctorch's have it)
    if err is not None:
        ct.assert_error(h, err, what=what + ": ")
        return
    assert h, f"{what}: ctorch failed ({ct.last_error()}) where torch gives {want.dtype}"
    if want.dtype == BF16:
        tol = max(tol, 1.6e-2)  # an ulp of bfloat16
    ct.assert_close(h, want.detach(), rtol=tol, atol=tol, what=what + ": ")


DTS = [F32, F64, BF16]


def test_loss_mixed_dtypes():
    """torch's rules, loss by loss: mse / l1 / smooth_l1 broadcast first, so a 0-dim
    operand promotes as any tensor; binary_cross_entropy wants the target's dtype to
    be the input's (the weight is cast); binary_cross_entropy_with_logits gives the
    target's dtype; nll_loss / cross_entropy with class indices and layer_norm want
    the weight's dtype to be the input's; cross_entropy with class probabilities
    promotes"""
    ft = ct.from_torch
    for xd in DTS:
        for yd in DTS:
            lt = 2e-2 if BF16 in (xd, yd) else 1e-6  # torch rounds bfloat16 intermediates
            for xs, ys in [((3,), (3,)), ((), (3,)), ((3,), ()), ((), ())]:
                x = torch.rand(xs, generator=GEN).to(xd) * 0.8 + 0.1
                y = torch.rand(ys, generator=GEN).to(yd)
                for name, (cfn, tfn) in PW.items():
                    for red in RED:
                        if name.startswith("bce") and xs != ys:
                            continue
                        _same_outcome(lambda: cfn(ft(x), ft(y), None, None, RED[red], 0.5),
                                      lambda: tfn(x, y, None, None, red, 0.5), f"{name} {xd}{xs} {yd}{ys} {red}",
                                      tol=lt)
            x, y, w = torch.rand(2, 3, generator=GEN).to(xd), torch.rand(2, 3, generator=GEN).to(xd), torch.rand(3).to(yd)
            for name in ("bce", "bce_logits"):
                cfn, tfn = PW[name]
                _same_outcome(lambda: cfn(ft(x), ft(y), ft(w), None, 0, 1.0), lambda: tfn(x, y, w, None, "none", 1.0),
                              f"{name} weight {xd} {yd}", tol=lt)
            logits, cls = torch.randn(4, 3, generator=GEN).to(xd), torch.tensor([0, 2, 1, 2])
            probs = torch.softmax(torch.randn(4, 3, generator=GEN), 1).to(yd)
            _same_outcome(lambda: lib.ct_nll_loss(ft(logits), ft(cls), ft(w), 1, -100),
                          lambda: Fn.nll_loss(logits, cls, w), f"nll_loss weight {xd} {yd}", tol=lt)
            _same_outcome(lambda: lib.ct_cross_entropy(ft(logits), ft(cls), ft(w), 1, -100, 0.0),
                          lambda: Fn.cross_entropy(logits, cls, w), f"cross_entropy weight {xd} {yd}", tol=lt)
            _same_outcome(lambda: lib.ct_cross_entropy(ft(logits), ft(probs), None, 1, -100, 0.1),
                          lambda: Fn.cross_entropy(logits, probs, label_smoothing=0.1), f"cross_entropy probs {xd} {yd}", tol=lt)
            _same_outcome(lambda: lib.ct_cross_entropy(ft(logits), ft(probs.to(xd)), ft(w), 2, -100, 0.0),
                          lambda: Fn.cross_entropy(logits, probs.to(xd), w, reduction="sum"),
                          f"cross_entropy probs weight {xd} {yd}", tol=lt)
            _same_outcome(lambda: lib.ct_layer_norm(ft(logits), ct.i64([3]), 1, ft(w), None, 1e-5),
                          lambda: Fn.layer_norm(logits, (3,), w), f"layer_norm weight {xd} {yd}", tol=lt)
            _same_outcome(lambda: lib.ct_layer_norm(ft(logits), ct.i64([3]), 1, None, ft(w), 1e-5),
                          lambda: Fn.layer_norm(logits, (3,), None, w), f"layer_norm bias {xd} {yd}", tol=lt)


def test_loss_integer_and_bool_operands():
    """torch's outcomes with integer or bool operands: l1_loss of integers is
    |x - y| (no mean of integers), bools do not subtract, a binary_cross_entropy_with_logits
    target must be floating (1 - target keeps its dtype), the others are not implemented"""
    ft = ct.from_torch
    dts = [torch.int64, torch.int32, torch.uint8, torch.bool, F32]
    for xd in dts:
        for yd in dts:
            if xd == F32 and yd == F32:
                continue
            x = (torch.rand(2, 3, generator=GEN) * 3).to(xd)
            y = (torch.rand(2, 3, generator=GEN) * 3).to(yd)
            for name, (cfn, tfn) in PW.items():
                for red in RED:
                    _same_outcome(lambda: cfn(ft(x), ft(y), None, None, RED[red], 0.5),
                                  lambda: tfn(x, y, None, None, red, 0.5), f"{name} {xd} {yd} {red}")


@pytest.mark.parametrize("shape", [(3, 4), (4,), (2, 3, 2, 2)])
def test_cross_entropy_probs_weight_grad(shape):
    """with class probabilities torch differentiates cross_entropy in the weight too,
    and the input's gradient again in the input, the target and the weight"""
    C = shape[1] if len(shape) > 1 else shape[0]
    x = randn(*shape)
    p = torch.softmax(randn(*shape), 1 if len(shape) > 1 else 0)
    w = torch.rand(C, generator=GEN, dtype=F64) + 0.5
    for red in RED:
        for eps in (0.0, 0.2):
            check_fn(lambda hx, hp, hw: lib.ct_cross_entropy(hx, hp, hw, RED[red], -100, eps),
                     lambda tx, tp, tw: Fn.cross_entropy(tx, tp, tw, reduction=red, label_smoothing=eps),
                     [x, p, w], [0, 1, 2], f"ce probs weight grad {shape} {red} eps={eps}")


def test_cross_entropy_probs_promoted_grad():
    """the gradient flows back through the promotion to the float32 logits"""
    x = torch.randn(4, 3, generator=GEN, dtype=F32)
    p = torch.softmax(torch.randn(4, 3, generator=GEN, dtype=F64), 1)
    check_fn(lambda hx, hp: lib.ct_cross_entropy(hx, hp, None, 1, -100, 0.0),
             lambda tx, tp: Fn.cross_entropy(tx, tp), [x, p], [0, 1], "ce probs f32 x f64", rtol=1e-6, second=False)


def test_pointwise_weight_broadcast():
    """a weight / pos_weight may broadcast to the input's shape, not beyond it"""
    ft = ct.from_torch
    x, y = torch.rand(2, 3, generator=GEN), torch.rand(2, 3, generator=GEN)
    for ws in [(3,), (2, 1), (1, 3), (4, 2, 3), (3, 2, 3), (2,), (1, 1, 3)]:
        w = torch.rand(ws, generator=GEN)
        for red in RED:
            for name in ("bce", "bce_logits"):
                cfn, tfn = PW[name]
                _same_outcome(lambda: cfn(ft(x), ft(y), ft(w), None, RED[red], 1.0),
                              lambda: tfn(x, y, w, None, red, 1.0), f"{name} weight {ws} {red}", tol=1e-6)
            cfn, tfn = PW["bce_logits"]
            _same_outcome(lambda: cfn(ft(x), ft(y), None, ft(w), RED[red], 1.0),
                          lambda: tfn(x, y, None, w, red, 1.0), f"bce_logits pos_weight {ws} {red}", tol=1e-6)


def test_batch_norm_empty_batch_and_mixed_dtypes():
    ft = ct.from_torch
    rm, rv = torch.tensor([0.5]), torch.tensor([2.0])
    hrm, hrv = ft(rm), ft(rv)
    ho = ct.check(lib.ct_batch_norm(ft(torch.zeros(0, 1, 3, 4)), hrm, hrv, None, None, True, 0.1, 1e-5))
    assert ct.shape(ho) == (0, 1, 3, 4)
    ct.assert_close(hrm, rm, what="running_mean of an empty batch: ")
    ct.assert_close(hrv, rv, what="running_var of an empty batch: ")
    for xd in DTS:
        for pd in DTS + [torch.int64]:
            for training in (True, False):
                x = torch.randn(4, 3, generator=GEN).to(xd)
                m, v, w = torch.zeros(3, dtype=pd), torch.ones(3, dtype=pd), torch.ones(3, dtype=pd)
                _same_outcome(lambda: lib.ct_batch_norm(ft(x), ft(m.clone()), ft(v.clone()), None, None, training, 0.1, 1e-5),
                              lambda: Fn.batch_norm(x, m.clone(), v.clone(), None, None, training, 0.1, 1e-5),
                              f"batch_norm stats {xd} {pd} training={training}", tol=2e-2)
                if pd != torch.int64:
                    _same_outcome(lambda: lib.ct_batch_norm(ft(x), None, None, ft(w), None, True, 0.1, 1e-5),
                                  lambda: Fn.batch_norm(x, None, None, w, None, True, 0.1, 1e-5),
                                  f"batch_norm weight {xd} {pd}", tol=2e-2)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_first_order_grad(dtype, log):
    """softmax / log_softmax gradients against torch's, first order (one fused pass
    a row along the last dim, a contiguous copy of an expanded or strided upstream
    gradient first) and create_graph (composed), rows of 1 to 1000 elements, other dims"""
    cfn, tfn = (lib.ct_log_softmax, torch.log_softmax) if log else (lib.ct_softmax, torch.softmax)
    tol = 1e-12 if dtype == F64 else 2e-6
    for shape in [(5, 1), (3, 7), (4, 16), (2, 3, 33), (600, 1000), (2, 5, 4)]:
        for dim in sorted({len(shape) - 1, 0, -1}):
            x = torch.randn(shape, generator=GEN, dtype=dtype)
            tx = x.clone().requires_grad_(True)
            y = tfn(tx, dim)
            hx = leaf(x)
            hy = ct.check(cfn(hx, dim))
            ups = {"contig": torch.randn(shape, generator=GEN, dtype=dtype),
                   "expanded": torch.randn(shape[-1:], generator=GEN, dtype=dtype).expand(shape),
                   "transposed": torch.randn(shape[::-1], generator=GEN, dtype=dtype).transpose(0, -1)}
            for kind, g in ups.items():
                want = torch.autograd.grad(y, tx, g, retain_graph=True)[0]
                for cg in (False, True):
                    outs = (c_void_p * 1)(hy)
                    gos = (c_void_p * 1)(ct.from_torch(g))  # with g's strides (0 where expanded)
                    ins = (c_void_p * 1)(hx)
                    res = (c_void_p * 1)()
                    ct.check_int(lib.ct_autograd_grad(outs, gos, 1, ins, 1, res, True, cg, True))
                    # g - e * sum(g) cancels: float32 results are as close as 8 ulps of the
                    # largest term, e * sum(g) with e <= 1 (D |g| at most)
                    at = tol if dtype == F64 else tol + 9.6e-7 * shape[dim] * float(g.abs().max())
                    ct.assert_close(res[0], want, rtol=tol, atol=at,
                                    what=f"{'log_' if log else ''}softmax {shape} dim {dim} {kind} cg={cg}: ")


def test_gradients_at_nonfinite_inputs():
    """torch's backward formulas where inputs are inf or NaN (or clamped):
    eval batch_norm's g w rstd (no x in it), elu's g at +inf and NaN (x <= 0
    false), hardtanh's g at NaN (out of range only where x <= min or >= max),
    cumprod along a dim of size 1 (the identity), the target's gradient of
    binary_cross_entropy_with_logits at -inf / inf (with pos_weight too), and
    binary_cross_entropy's float EPSILON in its clamped region; first order
    (fused kernels) and create_graph, against torch"""
    D, inf, nan = torch.float64, math.inf, math.nan
    ct.declare("ct_cumprod", T, [CT, c_int])

    def check(name, ct_fn, torch_fn, xs, needs=None):
        needs = needs or [True] * len(xs)
        ts = [x.clone().requires_grad_(n) for x, n in zip(xs, needs)]
        y = torch_fn(*ts)
        g = torch.ones_like(y)
        want = torch.autograd.grad(y, [t for t in ts if t.requires_grad], g)
        hs = [leaf(x, n) for x, n in zip(xs, needs)]
        for cg in (False, True):
            got = ct.grads_of(ct.check(ct_fn(*hs)), [hh for hh, n in zip(hs, needs) if n], g, create_graph=cg)
            for k, (a, b) in enumerate(zip(got, want)):
                a = ct.to_torch(a)  # the same NaNs and infinities, finite values within 1e-12
                ok = torch.isclose(a, b, rtol=1e-12, atol=0, equal_nan=True) | (a == b)
                assert ok.all(), f"{name} input {k} create_graph={cg}: {a} != {b}"

    rm, rv = torch.tensor([0.5, -1.0], dtype=D), torch.tensor([2.0, 0.25], dtype=D)
    x = torch.tensor([[nan, 1.0], [2.0, -inf], [inf, 3.0]], dtype=D)
    check("batch_norm eval", lambda a, w: lib.ct_batch_norm(a, ct.check(lib.ct_clone(ct.from_torch(rm))),
                                                            ct.check(lib.ct_clone(ct.from_torch(rv))), w, None, False,
                                                            0.1, 1e-5),
          lambda a, w: Fn.batch_norm(a, rm, rv, w, training=False), [x, torch.tensor([1.5, -2.0], dtype=D)])
    v = torch.tensor([inf, nan, 1.0, -1.0, -inf, 0.0], dtype=D)
    check("elu", lambda a: lib.ct_elu(a, 0.7), lambda a: Fn.elu(a, 0.7), [v])
    check("hardtanh", lambda a: lib.ct_hardtanh(a, -1.0, 1.0), Fn.hardtanh,
          [torch.tensor([nan, 0.5, -1.0, 1.0, 3.0, -inf], dtype=D)])
    for shape, dim in (((1, 3), 0), ((2, 1), 1), ((1,), 0)):
        c = torch.tensor([inf, nan, 2.0], dtype=D)[:math.prod(shape)].reshape(shape)
        check(f"cumprod{shape}", lambda a, d=dim: lib.ct_cumprod(a, d), lambda a, d=dim: a.cumprod(d), [c])
    xl, t = torch.tensor([-inf, inf, 0.5, -30.0], dtype=D), torch.tensor([0.3, 0.3, 0.9, 0.2], dtype=D)
    pw = torch.tensor([2.0, 0.5, 1.0, 3.0], dtype=D)
    check("bce_with_logits", lambda a, b: lib.ct_binary_cross_entropy_with_logits(a, b, None, None, 2),
          lambda a, b: Fn.binary_cross_entropy_with_logits(a, b, reduction="sum"), [xl, t])
    check("bce_with_logits pos_weight",
          lambda a, b: lib.ct_binary_cross_entropy_with_logits(a, b, None, ct.from_torch(pw), 2),
          lambda a, b: Fn.binary_cross_entropy_with_logits(a, b, pos_weight=pw, reduction="sum"), [xl, t])
    xb, tb = torch.tensor([0.0, 1.0, 1e-13, 0.5], dtype=D), torch.tensor([0.5, 0.25, 0.0, 0.5], dtype=D)
    check("binary_cross_entropy clamp", lambda a, b: lib.ct_binary_cross_entropy(a, b, None, 2),
          lambda a, b: Fn.binary_cross_entropy(a, b, reduction="sum"), [xb, tb], [True, False])


def test_pointwise_loss_check_order():
    """torch's order: mse / l1 / smooth_l1 broadcast input and target before the
    dtypes and smooth_l1's beta; binary_cross_entropy takes its weight's shape
    before the dtypes; binary_cross_entropy_with_logits negates the input, then
    broadcasts pos_weight, then writes into the target's dtype, the weight last.
    Not compared: 16-bit inputs torch 1.13 has no kernel for (ctorch computes)."""
    import itertools
    xs = [torch.rand(3, 4), torch.rand(3, 4, dtype=F64), torch.ones(3, 4, dtype=torch.int64),
          torch.ones(3, 4, dtype=torch.bool), torch.rand(4), torch.rand(2, 4), torch.rand(()),
          torch.rand(3, 4, dtype=F16)]
    ws = [None, torch.rand(4), torch.rand(7), torch.rand(4, dtype=F64)]
    for x, y in itertools.product(xs, xs):
        for red, rname in enumerate(["none", "mean", "sum"]):
            cases = [("mse", lambda: Fn.mse_loss(x, y, reduction=rname), lambda: lib.ct_mse_loss(ctt(x), ctt(y), red)),
                     ("l1", lambda: Fn.l1_loss(x, y, reduction=rname), lambda: lib.ct_l1_loss(ctt(x), ctt(y), red))]
            cases += [(f"smooth_l1 beta {b}", lambda b=b: Fn.smooth_l1_loss(x, y, reduction=rname, beta=b),
                       lambda b=b: lib.ct_smooth_l1_loss(ctt(x), ctt(y), red, b)) for b in (-1.0, 0.5)]
            if x.dtype != F16:
                cases += [(f"bce w {w}", lambda w=w: Fn.binary_cross_entropy(x, y, weight=w, reduction=rname),
                           lambda w=w: lib.ct_binary_cross_entropy(ctt(x), ctt(y), ctt(w), red)) for w in ws]
                cases += [(f"bce_logits w {w} pw {p}",
                           lambda w=w, p=p: Fn.binary_cross_entropy_with_logits(x, y, weight=w, pos_weight=p,
                                                                                reduction=rname),
                           lambda w=w, p=p: lib.ct_binary_cross_entropy_with_logits(ctt(x), ctt(y), ctt(w), ctt(p), red))
                          for w in ws for p in ws[:3]]
            for name, tfn, cfn in cases:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ct.assert_same_outcome(cfn, tfn, f"{name} {rname} ({tuple(x.shape)} {x.dtype}, "
                                                     f"{tuple(y.shape)} {y.dtype}): ")


def test_batch_norm_check_order():
    """torch's batch_norm: the running statistics' sizes before the weight's and
    bias's; mixed types are told by the first parameter given (weight, bias,
    running_mean, running_var): float32 ones with a bfloat16 input, else every
    parameter in the input's dtype, the first odd one named (the statistics
    first when training)"""
    import itertools
    dts = [F32, F64, BF16]
    mk = lambda d, n=3: None if d is None else torch.ones(n, dtype=d)  # noqa: E731
    for xd in dts:
        for rmd, rvd, wd, bd in itertools.product(dts + [None], repeat=4):
            for training in (True, False):
                if (rmd is None) != (rvd is None) or (not training and rmd is None):
                    continue
                x = torch.rand(4, 3, dtype=xd)
                args = [mk(rmd), mk(rvd), mk(wd), mk(bd)]
                if xd == F32 and rmd == F32 and wd == F32:  # the sizes' order too
                    args = [mk(rmd, 4), mk(rvd, 4), mk(wd, 4), mk(bd, 4)]
                ct.assert_same_outcome(lambda: lib.ct_batch_norm(ctt(x), *[ctt(t) for t in args], training, 0.1, 1e-5),
                                       lambda: Fn.batch_norm(x, *args, training),
                                       f"batch_norm({xd}, {[None if t is None else (t.dtype, t.numel()) for t in args]}, "
                                       f"{training}): ")


def test_class_weight_of_any_shape_on_the_2d_path():
    """torch's nll_loss2d path (inputs of 3 or more dims) counts the weight's elements
    only: [1, C] or [C, 1] weights are taken there, refused for 1-d and 2-d inputs"""
    for xs, ts in [((2, 3, 4), (2, 4)), ((2, 3, 2, 2), (2, 2, 2)), ((2, 3), (2,))]:
        x, t = randn(*xs), torch.randint(0, 3, ts, generator=GEN)
        for w in (torch.rand(1, 3, dtype=F64), torch.rand(3, 1, dtype=F64), torch.rand(1, 1, 3, dtype=F64),
                  torch.rand(4, dtype=F64)):
            for name, cfn, tfn in [("nll_loss", lambda hx, hw: lib.ct_nll_loss(hx, ctt(t), hw, 1, -100), Fn.nll_loss),
                                   ("cross_entropy", lambda hx, hw: lib.ct_cross_entropy(hx, ctt(t), hw, 1, -100, 0.0),
                                    Fn.cross_entropy)]:
                what = f"{name}({xs}, weight {tuple(w.shape)}): "
                if ct.torch_error(lambda: tfn(x, t, weight=w)) is not None:
                    ct.assert_same_outcome(lambda: cfn(ctt(x), ctt(w)), lambda: tfn(x, t, weight=w), what)
                    continue
                check_fn(lambda hx, hw: cfn(hx, hw), lambda tx, tw: tfn(tx, t, weight=tw), [x, w], [0], what,
                         second=False)


def test_loss_weights_that_require_grad_are_refused():
    """Class weights have no derivative formula in torch: while grad mode is on,
    a weight (or pos_weight) that requires grad is refused in torch's words,
    naming nll_loss2d_forward for K-d inputs; class probabilities take it."""
    x = torch.randn(3, 4, dtype=torch.float64)
    w = torch.rand(4, dtype=torch.float64)
    hw = ct.leaf(w)
    t = torch.tensor([0, 1, 2])
    x4, t4 = torch.randn(2, 4, 3, 3, dtype=torch.float64), torch.zeros(2, 3, 3, dtype=torch.long)
    wr = w.clone().requires_grad_()
    cases = [
        (lambda: lib.ct_nll_loss(ct.from_torch(x), ct.from_torch(t), hw, 1, -100), lambda: Fn.nll_loss(x, t, wr)),
        (lambda: lib.ct_cross_entropy(ct.from_torch(x), ct.from_torch(t), hw, 1, -100, 0.1),
         lambda: Fn.cross_entropy(x, t, wr, label_smoothing=0.1)),
        (lambda: lib.ct_cross_entropy(ct.from_torch(x4), ct.from_torch(t4), hw, 1, -100, 0.0),
         lambda: Fn.cross_entropy(x4, t4, wr)),
        (lambda: lib.ct_binary_cross_entropy_with_logits(ct.from_torch(x), ct.from_torch(x.sigmoid()), None, hw, 1),
         lambda: Fn.binary_cross_entropy_with_logits(x, x.sigmoid(), pos_weight=wr)),
        (lambda: lib.ct_binary_cross_entropy(ct.from_torch(x.sigmoid()), ct.from_torch(x.sigmoid()), hw, 1),
         lambda: Fn.binary_cross_entropy(x.sigmoid(), x.sigmoid(), wr)),
    ]
    for cfn, tfn in cases:
        ct.assert_error(cfn(), ct.torch_message(ct.torch_error(tfn)))
    p = torch.rand(3, 4, dtype=torch.float64)  # probabilities: differentiable in the weight
    got = ct.check(lib.ct_cross_entropy(ct.from_torch(x), ct.from_torch(p), hw, 1, -100, 0.0))
    ct.assert_close(got, Fn.cross_entropy(x, p, w))


def test_batch_norm_zero_variance_without_eps_and_statistics_ranks():
    """Training with eps 0 on a constant channel: torch's invstd is 0 there (not
    1/0), so the output is 0 (the bias); running statistics must be 1-d; a
    float16 input with float32 parameters has no kernel in torch."""
    for shape in [(4, 3), (2, 3, 2, 2)]:
        x = torch.ones(*shape, dtype=torch.float64)
        x[:, 1] = torch.arange(x[:, 1].numel(), dtype=torch.float64).reshape(x[:, 1].shape)
        b = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
        want = Fn.batch_norm(x, None, None, None, b, True, 0.1, 0.0)
        got = ct.check(lib.ct_batch_norm(ct.from_torch(x), None, None, None, ct.from_torch(b), True, 0.1, 0.0))
        ct.assert_close(got, want, rtol=1e-12, atol=1e-12)
    x = torch.randn(4, 3)
    for rm, rv in [(torch.zeros(1, 3), torch.ones(3)), (torch.zeros(3), torch.ones(1, 3))]:
        msg = ct.torch_message(ct.torch_error(lambda: Fn.batch_norm(x, rm, rv, training=False)))
        ct.assert_error(lib.ct_batch_norm(ct.from_torch(x), ct.from_torch(rm), ct.from_torch(rv), None, None, False,
                                          0.1, 1e-5), msg)
    xh = x.half()
    msg = ct.torch_message(ct.torch_error(lambda: Fn.batch_norm(xh, torch.zeros(3), torch.ones(3), training=False)))
    ct.assert_error(lib.ct_batch_norm(ct.from_torch(xh), ct.from_torch(torch.zeros(3)), ct.from_torch(torch.ones(3)),
                                      None, None, False, 0.1, 1e-5), msg)


ct.declare("ct_softplus", T, [CT, c_double, c_double])


@pytest.mark.parametrize("beta,th,vals", [(1.0, 1.0, [1.0, 0.5, 1.5, -2.0]), (20.0, 0.0, [0.0, -0.0, 0.1, -0.1]),
                                          (2.0, 3.0, [1.5, 1.4, float("nan"), 1.6])], ids=str)
def test_softplus_second_derivative_at_the_threshold(beta, th, vals):
    """torch's softplus_double_backward masks with beta x < threshold: at it, the first
    derivative is sigmoid(beta x) and the second 0"""
    x = torch.tensor(vals, dtype=torch.float64)
    tx = x.clone().requires_grad_()
    (g1,) = torch.autograd.grad(Fn.softplus(tx, beta, th).sum(), [tx], create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), [tx])
    hx = leaf(x)
    c1 = ct.grads_of(ct.check(lib.ct_softplus(hx, beta, th)), hx, torch.ones(len(vals), dtype=torch.float64))
    ct.assert_close(c1, g1.detach(), rtol=1e-14, atol=0, what="first: ")
    c2 = ct.grads_of(c1, hx, torch.ones(len(vals), dtype=torch.float64))
    ct.assert_close(c2, g2, rtol=1e-14, atol=0, what="second: ")


def test_hardtanh_of_uint8_takes_its_bounds_truncated():
    x = torch.tensor([0, 3, 200], dtype=torch.uint8)
    for lo, hi in ((-0.5, 2.0), (-1.0, 2.0), (0.7, 2.9), (0.0, -0.5)):
        ct.assert_same_outcome(lambda: lib.ct_hardtanh(ct.from_torch(x), lo, hi), lambda: Fn.hardtanh(x, lo, hi),
                               f"hardtanh({lo}, {hi}): ", compare=lambda got, want: ct.assert_close(got, want))


ct.declare("ct_log_softmax", T, [CT, c_int])
ct.declare("ct_softmax", T, [CT, c_int])


def test_cross_entropy_mean_over_zero_weight_is_nan():
    """torch's (1 - ls) * nll + ls / C * smooth: the nll mean is 0 / 0"""
    x = torch.tensor([[0.5, -0.3], [0.1, 0.2]], dtype=torch.float64)
    for t, w in ((torch.tensor([0, 0]), torch.tensor([0.0, 0.7], dtype=torch.float64)),
                 (torch.tensor([1, -100]), torch.tensor([0.7, 0.0], dtype=torch.float64))):
        for ls in (0.0, 0.3):
            want = Fn.cross_entropy(x, t, w, label_smoothing=ls)
            got = ct.check(lib.ct_cross_entropy(ct.from_torch(x), ct.from_torch(t), ct.from_torch(w), 1, -100, ls))
            ct.assert_close(got, want, what=f"ls {ls}: ")


def test_bfloat16_log_softmax_off_the_last_dim_in_float():
    """size-1 dims after the dim: torch's generic kernel (float throughout), not its
    last-dim kernel's bfloat16 rounding of the row's log-sum"""
    for shape, dim in (((5, 1), 0), ((5, 1, 1), 0), ((7, 5, 1), 1), ((3, 5), 1)):
        x = (torch.randn(shape, generator=torch.Generator().manual_seed(3)) * 8).to(torch.bfloat16)
        got = ct.check(lib.ct_log_softmax(ct.from_torch(x), dim))
        ct.assert_close(got, torch.log_softmax(x, dim), rtol=0, atol=0, what=f"{shape} {dim}: ")


def test_meta_takes_integer_inputs_as_torch():
    """torch's meta kernels of softmax and the class losses take integer inputs"""
    def meta(shape, dt):
        return ct.check(lib.ct_empty_on(ct.i64(list(shape)), len(shape), dt, ct.CT_META))
    x, t = meta((2, 3), ct.CT_INT64), meta((2,), ct.CT_INT64)
    tx, tt = torch.ones(2, 3, dtype=torch.int64, device="meta"), torch.zeros(2, dtype=torch.int64, device="meta")
    for got, want in ((lib.ct_softmax(x, 1), torch.softmax(tx, 1)), (lib.ct_log_softmax(x, 0), torch.log_softmax(tx, 0)),
                      (lib.ct_cross_entropy(x, t, None, 1, -100, 0.0), Fn.cross_entropy(tx, tt)),
                      (lib.ct_nll_loss(x, t, None, 1, -100), Fn.nll_loss(tx, tt))):
        ct.check(got)
        assert ct.shape(got) == tuple(want.shape) and ct.torch_dtype(lib.ct_dtype_of(got)) == want.dtype
