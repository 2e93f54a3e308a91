"""Random autograd graphs against PyTorch, first and second order (float64): 2,400 seeded graphs.

Each case draws 1-3 leaves (contiguous, permuted or sliced), then 2-10 ops from
OPS over the values made so far (broadcasting, views, reductions, matmul,
in-place ops on clones and on views of them), runs both libraries and compares
the forward values, torch.autograd.grad's results (create_graph) and the
gradient of the first leaf's gradient (double backward). The graphs are seeded,
so a failure names the seed that reproduces it.

One documented difference: at a point where std or a 2-norm is exactly 0,
torch's double backward gives NaN (its std_backward divides by the result before
masked_fill_ zeroes it, and 0 * inf is NaN); ctorch masks before dividing. So
second-order values are compared where torch's are finite.
"""
import random
from ctypes import POINTER, byref, c_bool, c_char_p, c_double, c_int, c_int64, c_void_p

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import check, i32, i64, leaf, grads_of, lib  # noqa: E402

T, IP, LP = c_void_p, POINTER(c_int), POINTER(c_int64)
for name, args in [
    ("add", [T, T]), ("sub", [T, T]), ("mul", [T, T]), ("div", [T, T]), ("maximum", [T, T]),
    ("minimum", [T, T]), ("matmul", [T, T]), ("mul_scalar", [T, c_double]), ("add_scalar", [T, c_double]),
    ("pow_scalar", [T, c_double]), ("sum_dims", [T, IP, c_int, c_bool]), ("logsumexp", [T, IP, c_int, c_bool]),
    ("amax", [T, IP, c_int, c_bool]), ("var", [T, IP, c_int, c_double, c_bool]),
    ("std", [T, IP, c_int, c_double, c_bool]), ("norm", [T, c_double, IP, c_int, c_bool]),
    ("prod_dim", [T, c_int, c_bool]), ("softmax", [T, c_int]), ("log_softmax", [T, c_int]),
    ("cumsum", [T, c_int]), ("transpose", [T, c_int, c_int]), ("narrow", [T, c_int, c_int64, c_int64]),
    ("unsqueeze", [T, c_int]), ("select", [T, c_int, c_int64]), ("permute", [T, IP, c_int]),
    ("expand", [T, LP, c_int]), ("diagonal", [T, c_int64, c_int, c_int]), ("unfold", [T, c_int, c_int64, c_int64]),
    ("gelu", [T, c_char_p]), ("softplus", [T, c_double, c_double]), ("elu", [T, c_double]),
    ("clamp", [T, c_double, c_double]), ("index_select", [T, c_int, T]), ("gather", [T, c_int, T]),
    ("masked_fill", [T, T, c_double]), ("roll", [T, LP, c_int, IP, c_int]), ("repeat", [T, LP, c_int]),
    ("tril", [T, c_int64]), ("pad", [T, LP, c_int, c_double]), ("lerp", [T, T, T]),
    ("addcmul", [T, T, T, c_double]), ("layer_norm", [T, LP, c_int, T, T, c_double]),
    ("mse_loss", [T, T, c_int]), ("clone", [T]), ("cat", [POINTER(c_void_p), c_int, c_int]),
    ("topk", [T, c_int64, c_int, c_bool, c_bool, POINTER(c_void_p), POINTER(c_void_p)]),
]:
    ct.declare("ct_" + name, c_int if name == "topk" else T, args)
UNARY = ["sin", "cos", "tanh", "sigmoid", "neg", "abs", "square", "erf", "atan", "relu", "silu"]
for name in UNARY + ["exp", "sinh"]:
    ct.declare("ct_" + name, T, [T])
for name in ["sin_", "mul_"]:
    ct.declare("ct_" + name, c_int, [T] if name == "sin_" else [T, T])


class V:
    """One value of the graph: the ctorch handle and the torch tensor."""

    def __init__(self, h, t):
        self.h, self.t = check(h), t


def broadcastable(*vs):
    try:
        torch.broadcast_shapes(*(v.t.shape for v in vs))
        return True
    except RuntimeError:
        return False


def unary(rng, a):
    n = rng.choice(UNARY + ["exp", "sinh"])
    if n in ("exp", "sinh"):  # scaled, to stay finite through long chains
        return V(getattr(lib, "ct_" + n)(check(lib.ct_mul_scalar(a.h, 0.3))), getattr(torch, n)(a.t * 0.3))
    tf = F.silu if n == "silu" else getattr(torch, n)
    return V(getattr(lib, "ct_" + n)(a.h), tf(a.t))


def binary(rng, a, b):
    if not broadcastable(a, b):
        return None
    n = rng.choice(["add", "sub", "mul", "maximum", "minimum", "div"])
    if n == "div":  # a / (b^2 + 1)
        den = check(lib.ct_add_scalar(check(lib.ct_mul(b.h, b.h)), 1.0))
        return V(lib.ct_div(a.h, den), a.t / (b.t * b.t + 1))
    return V(getattr(lib, "ct_" + n)(a.h, b.h), getattr(torch, n)(a.t, b.t))


def reduction(rng, a):
    nd = a.t.dim()
    if nd == 0:
        return None
    d, kd = rng.randrange(nd), rng.random() < 0.5
    n = rng.choice(["sum", "logsumexp", "var", "std", "norm", "amax", "prod", "softmax", "log_softmax", "cumsum"])
    if n in ("var", "std") and a.t.shape[d] < 2:
        return None
    if n == "sum":
        return V(lib.ct_sum_dims(a.h, i32([d]), 1, kd), a.t.sum(d, keepdim=kd))
    if n == "logsumexp":
        return V(lib.ct_logsumexp(a.h, i32([d]), 1, kd), torch.logsumexp(a.t, d, keepdim=kd))
    if n in ("var", "std", "amax"):
        extra = (1.0,) if n != "amax" else ()
        return V(getattr(lib, "ct_" + n)(a.h, i32([d]), 1, *extra, kd), getattr(a.t, n)(d, keepdim=kd))
    if n == "norm":
        return V(lib.ct_norm(a.h, 2.0, i32([d]), 1, kd), a.t.norm(2, d, keepdim=kd))
    if n == "prod":
        return V(lib.ct_prod_dim(a.h, d, kd), a.t.prod(d, keepdim=kd))
    return V(getattr(lib, "ct_" + n)(a.h, d), getattr(torch, n)(a.t, d))


def view(rng, a):
    nd, sh = a.t.dim(), tuple(a.t.shape)
    k = rng.randrange(9)
    if k == 0 and nd >= 2:
        return V(lib.ct_transpose(a.h, 0, nd - 1), a.t.transpose(0, nd - 1))
    if k == 1 and nd >= 1 and sh[0] >= 2:
        s = rng.randrange(sh[0] - 1)
        return V(lib.ct_narrow(a.h, 0, s, sh[0] - s - 1), a.t.narrow(0, s, sh[0] - s - 1))
    if k == 2:
        d = rng.randrange(nd + 1)
        return V(lib.ct_unsqueeze(a.h, d), a.t.unsqueeze(d))
    if k == 3 and nd >= 1:
        d = rng.randrange(nd)
        return V(lib.ct_select(a.h, d, sh[d] - 1), a.t.select(d, sh[d] - 1))
    if k == 4 and nd >= 2:
        p = list(range(nd))
        rng.shuffle(p)
        return V(lib.ct_permute(a.h, i32(p), nd), a.t.permute(*p))
    if k == 5:
        return V(lib.ct_expand(a.h, i64((2,) + sh), nd + 1), a.t.expand(2, *sh))
    if k == 6 and nd >= 2:
        return V(lib.ct_diagonal(a.h, 0, 0, 1), torch.diagonal(a.t, 0, 0, 1))
    if k == 7 and nd >= 1 and sh[-1] >= 2:
        return V(lib.ct_unfold(a.h, nd - 1, 2, 1), a.t.unfold(nd - 1, 2, 1))
    if k == 8 and nd >= 1:
        return V(lib.ct_roll(a.h, i64([1]), 1, i32([nd - 1]), 1), torch.roll(a.t, 1, nd - 1))
    return None


def other(rng, pool, a):
    nd, sh = a.t.dim(), tuple(a.t.shape)
    k = rng.randrange(13)
    if k == 0:
        ap = rng.choice(["none", "tanh"])
        return V(lib.ct_gelu(a.h, ap.encode()), F.gelu(a.t, approximate=ap))
    if k == 1:
        return V(lib.ct_softplus(a.h, 2.0, 3.0), F.softplus(a.t, 2.0, 3.0))
    if k == 2:
        return V(lib.ct_elu(a.h, 0.8), F.elu(a.t, 0.8))
    if k == 3:
        return V(lib.ct_clamp(a.h, -0.5, 0.7), a.t.clamp(-0.5, 0.7))
    if k == 4 and nd >= 1:
        d = rng.randrange(nd)
        ix = torch.tensor([rng.randrange(sh[d]) for _ in range(3)])
        return V(lib.ct_index_select(a.h, d, ct.from_torch(ix)), a.t.index_select(d, ix))
    if k == 5 and nd >= 1:
        d = rng.randrange(nd)
        ix = torch.randint(0, sh[d], sh)
        return V(lib.ct_gather(a.h, d, ct.from_torch(ix)), torch.gather(a.t, d, ix))
    if k == 6:
        m = torch.rand(sh) > 0.5
        return V(lib.ct_masked_fill(a.h, ct.from_torch(m), 0.5), a.t.masked_fill(m, 0.5))
    if k == 7:
        r = (2,) * max(nd, 1)
        return V(lib.ct_repeat(a.h, i64(r), len(r)), a.t.repeat(*r))
    if k == 8 and nd >= 2:
        return V(lib.ct_tril(a.h, 0), torch.tril(a.t))
    if k == 9 and nd >= 1:
        return V(lib.ct_pad(a.h, i64([1, 2]), 2, 0.25), F.pad(a.t, (1, 2), value=0.25))
    if k == 10:
        b, c = rng.choice(pool), rng.choice(pool)
        if not broadcastable(a, b, c):
            return None
        if rng.random() < 0.5:
            return V(lib.ct_lerp(a.h, b.h, c.h), torch.lerp(a.t, b.t, c.t))
        return V(lib.ct_addcmul(a.h, b.h, c.h, 0.7), torch.addcmul(a.t, b.t, c.t, value=0.7))
    if k == 11 and nd >= 1:
        w, b = torch.randn(sh[-1], dtype=torch.float64), torch.randn(sh[-1], dtype=torch.float64)
        return V(lib.ct_layer_norm(a.h, i64([sh[-1]]), 1, ct.from_torch(w), ct.from_torch(b), 1e-5),
                 F.layer_norm(a.t, (sh[-1],), w, b, 1e-5))
    if k == 12 and nd >= 1 and sh[-1] >= 2:
        v, i = c_void_p(), c_void_p()
        assert lib.ct_topk(a.h, 2, nd - 1, True, True, byref(v), byref(i)) == 0, ct.last_error()
        return V(v.value, torch.topk(a.t, 2, nd - 1).values)
    return None


def combine(rng, pool, a):
    b = rng.choice(pool)
    k = rng.randrange(4)
    if k == 0 and a.t.dim() >= 1 and b.t.dim() >= 1 and a.t.shape[-1] == b.t.shape[-2 if b.t.dim() >= 2 else 0]:
        try:
            tt = torch.matmul(a.t, b.t)
        except RuntimeError:
            return None
        return V(lib.ct_matmul(a.h, b.h), tt)
    if k == 1 and a.t.shape == b.t.shape and a.t.dim() >= 1:
        d = rng.randrange(a.t.dim())
        return V(lib.ct_cat((c_void_p * 2)(a.h, b.h), 2, d), torch.cat([a.t, b.t], d))
    if k == 2 and a.t.shape == b.t.shape:
        return V(lib.ct_mse_loss(a.h, b.h, 1), F.mse_loss(a.t, b.t))
    if k == 3:  # (a^2 + 0.5)^1.5
        base = check(lib.ct_add_scalar(check(lib.ct_mul(a.h, a.h)), 0.5))
        return V(lib.ct_pow_scalar(base, 1.5), (a.t * a.t + 0.5) ** 1.5)
    return None


def inplace(rng, a):
    """sin_ on a clone, or on a view of a clone (CopySlices rebases its history)."""
    c = V(lib.ct_clone(a.h), a.t.clone())
    if a.t.dim() >= 1 and a.t.shape[0] >= 2 and rng.random() < 0.5:
        assert lib.ct_sin_(check(lib.ct_narrow(c.h, 0, 0, 1))) == 0, ct.last_error()
        c.t.narrow(0, 0, 1).sin_()
    else:
        assert lib.ct_sin_(c.h) == 0, ct.last_error()
        c.t.sin_()
    return c


def step(rng, pool):
    a = rng.choice(pool)
    k = rng.random()
    if k < 0.25:
        return unary(rng, a)
    if k < 0.45:
        return binary(rng, a, rng.choice(pool))
    if k < 0.6:
        return reduction(rng, a)
    if k < 0.72:
        return view(rng, a)
    if k < 0.9:
        return other(rng, pool, a)
    if k < 0.96:
        return combine(rng, pool, a)
    return inplace(rng, a)


def make_leaf(rng):
    shape = rng.choice([(3, 4), (4,), (2, 3, 4), (1, 4), (3, 1), ()])
    t = torch.randn(shape, dtype=torch.float64)
    if len(shape) >= 2 and rng.random() < 0.3:  # permuted storage
        t = torch.randn(shape[::-1], dtype=torch.float64).permute(*reversed(range(len(shape))))
    elif len(shape) >= 1 and rng.random() < 0.2:  # a strided slice
        t = torch.randn(shape[:-1] + (2 * shape[-1],), dtype=torch.float64)[..., ::2]
    t = t.detach().requires_grad_(True)
    return V(leaf(t), t)


def assert_close(h, t, what, finite_only=False):
    got = ct.to_torch(h)
    want = t.detach()
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} vs torch {tuple(want.shape)}"
    if finite_only:
        keep = torch.isfinite(want)
        got, want = got[keep], want[keep]
    assert torch.allclose(got, want, rtol=1e-7, atol=1e-9, equal_nan=True), \
        f"{what}: ctorch {got.flatten()[:6].tolist()} vs torch {want.flatten()[:6].tolist()}"


def run_graph(seed):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    leaves = [make_leaf(rng) for _ in range(rng.randint(1, 3))]
    pool = list(leaves)
    for _ in range(rng.randint(2, 10)):
        v = step(rng, pool)
        if v is not None:
            assert_close(v.h, v.t, f"seed {seed}: forward of {v.t.grad_fn}")
            pool.append(v)
    out = pool[-1]
    if not out.t.requires_grad:
        return
    xs = [x.t for x in leaves]
    g = torch.randn(out.t.shape, dtype=torch.float64)
    tg = torch.autograd.grad(out.t, xs, g, create_graph=True, allow_unused=True)
    cg = grads_of(out.h, [x.h for x in leaves], g)
    for k, (c, t) in enumerate(zip(cg, tg)):
        assert (c is None) == (t is None), f"seed {seed}: leaf {k} unused in one library only"
        if t is not None:
            assert_close(c, t, f"seed {seed}: gradient of leaf {k}")
    k = next((k for k, t in enumerate(tg) if t is not None and t.requires_grad), None)
    if k is None:
        return
    w = torch.randn(tg[k].shape, dtype=torch.float64)
    tg2 = torch.autograd.grad(tg[k], xs, w, allow_unused=True)
    cg2 = grads_of(cg[k], [x.h for x in leaves], w, create_graph=False)
    for j, (c, t) in enumerate(zip(cg2, tg2)):
        what = f"seed {seed}: second derivative, leaf {k} then leaf {j}"
        if t is None:  # torch found no path; ctorch may give zeros
            assert c is None or not ct.to_torch(c).any(), what
        else:
            assert c is not None, what
            assert_close(c, t, what, finite_only=True)


@pytest.mark.parametrize("block", range(24))
def test_random_graphs(block):
    for seed in range(block * 100, block * 100 + 100):
        run_graph(seed)
