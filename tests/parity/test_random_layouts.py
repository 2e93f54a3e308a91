"""Random cases against PyTorch: elementwise ops and reductions on random
strided views (dims permuted, ::2 steps, expanded size-1 broadcasts and stride-0
dims, storage offsets), random shapes (0-4 dims, sizes around the vector widths
and the engine's step of 1,024 elements, empty dims) and random dtypes, mixed
between operands. Each test runs a fixed seed's cases and reports every case
that differs, with what it takes to repeat it.

The reference is torch 1.13, with two rules where it is not one:
- float16 / bfloat16: the op on the float32 values, rounded once to the dtype.
  That is what torch does where it has the kernel (float opmath); where torch
  1.13 has none ("exp_vml_cpu" not implemented for 'Half'), or accumulates in
  16 bits (norm, some sums: NaN from inf - inf after an overflow), it is the
  answer torch gives today.
- values stay within +-500 (and the specials inf, nan, -0, 65504), below the
  float64 band 709.8-710.5 where torch's vectorised cosh / sinh overflow early.
"""
import math
import random
from ctypes import POINTER, byref, c_bool, c_double, c_int, c_void_p

import pytest

torch = pytest.importorskip("torch")
import ctorch_ffi as ct  # noqa: E402

lib = ct.lib
T = CT = c_void_p
INTP = POINTER(c_int)
for _n in ["ct_sum_dims", "ct_mean_dims", "ct_amax", "ct_amin", "ct_logsumexp"]:
    ct.declare(_n, T, [CT, INTP, c_int, c_bool])
for _n in ["ct_var", "ct_std"]:
    ct.declare(_n, T, [CT, INTP, c_int, c_double, c_bool])
ct.declare("ct_norm", T, [CT, c_double, INTP, c_int, c_bool])
ct.declare("ct_prod_dim", T, [CT, c_int, c_bool])
ct.declare("ct_argmax", T, [CT, c_bool, c_int, c_bool])
ct.declare("ct_max_dim", c_int, [CT, c_int, c_bool, POINTER(T), POINTER(T)])
for _n in ["ct_softmax", "ct_log_softmax", "ct_cumsum"]:
    ct.declare(_n, T, [CT, c_int])

HALF = (torch.float16, torch.bfloat16)
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]
BINARY = ["add", "sub", "mul", "div", "remainder", "fmod", "pow", "atan2", "maximum", "minimum", "eq", "ne",
          "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
          "bitwise_xor"]
UNARY = ["neg", "abs", "sign", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
         "reciprocal", "square", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
         "sigmoid", "relu", "silu", "erf", "floor", "ceil", "round", "trunc", "frac", "isnan", "isinf",
         "isfinite", "logical_not"]
# one rounding of an exact result: bit-equal to torch
EXACT = {"add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "neg", "abs",
         "sign", "sqrt", "square", "relu", "floor", "ceil", "round", "trunc", "isnan", "isinf", "isfinite",
         "logical_not", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
         "reciprocal", "fmod"}
ct.declare_elementwise(UNARY, BINARY)  # bound here too: run alone, the module must not rely on another's
REDUCTIONS = ["sum", "mean", "amax", "amin", "var", "std", "logsumexp", "norm", "prod", "max", "argmax",
              "softmax", "log_softmax", "cumsum"]


class Case:
    """One seed's random source: shapes, views and values."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.gen = torch.Generator().manual_seed(seed)

    def shape(self, sizes, limit):
        r = self.rng
        shape = [r.choice(sizes) for _ in range(r.choice([0, 1, 2, 2, 3, 3, 4]))]
        while math.prod(shape) > limit:
            shape[r.randrange(len(shape))] //= 2
        if shape and r.random() < 0.05:
            shape[r.randrange(len(shape))] = 0  # an empty tensor (its view's span stays within the limit)
        return shape

    def values(self, n, dtype):
        g = self.gen
        if dtype == torch.bool:
            return torch.rand(n, generator=g) < 0.5
        if not dtype.is_floating_point:
            lo = 0 if dtype == torch.uint8 else -100
            return torch.randint(lo, 100 if lo else 256, (n,), generator=g, dtype=dtype)
        x = torch.randn(n, generator=g, dtype=torch.float64) * self.rng.choice([1, 3, 100])
        if self.rng.random() < 0.4:
            x = x.round()
        if n and self.rng.random() < 0.3:
            for _ in range(self.rng.randrange(1, 5)):
                x[self.rng.randrange(n)] = self.rng.choice([math.nan, math.inf, -math.inf, 0.0, -0.0, 65504.0])
        return x.to(dtype)

    def view(self, shape, dtype):
        """A random strided view of shape over a fresh base: (torch view, ctorch view, its strides)."""
        r = self.rng
        order = list(range(len(shape)))
        if r.random() < 0.4:
            r.shuffle(order)
        strides, step = [0] * len(shape), 1
        for d in reversed(order):
            strides[d] = step * (2 if r.random() < 0.15 else 1)
            step = strides[d] * max(shape[d], 1)
        for d, n in enumerate(shape):
            if n > 1 and r.random() < 0.08:
                strides[d] = 0
        off = r.choice([0, 0, 1, 5])
        span = off + (sum((n - 1) * s for n, s in zip(shape, strides)) + 1 if 0 not in shape else 0)
        base = self.values(span, dtype)
        tv = base.as_strided(shape, strides, off)
        hv = ct.check(lib.ct_as_strided(ct.from_torch(base), ct.i64(shape), ct.i64(strides), len(shape), off))
        return tv, hv


def torch_fn(op):
    if op in ("cosh", "sinh"):  # torch's vectorised float kernels overflow early (cosh(89.0f) is inf)
        return lambda x: (lambda r: r.to(torch.float32 if not x.dtype.is_floating_point else x.dtype))(
            getattr(torch, op)(x.double()))
    return getattr(torch, op, None) or getattr(torch.nn.functional, op)


def reference(fn, *xs, direct=False):
    """fn on torch tensors, 16-bit floats through float32 (see the module's note);
    direct: torch's own 16-bit kernel where it has one."""
    if direct:
        try:
            return fn(*xs)
        except RuntimeError as e:
            if "not implemented for" not in str(e):
                raise
    if any(x.dtype in HALF for x in xs if isinstance(x, torch.Tensor)):
        half = next(x.dtype for x in xs if isinstance(x, torch.Tensor) and x.dtype in HALF)
        try:
            probe = [torch.ones([1] * x.dim(), dtype=x.dtype) if isinstance(x, torch.Tensor) else x for x in xs]
            want = fn(*probe).dtype  # the result dtype, from a one-element probe
        except RuntimeError as e:
            want = half if "not implemented" in str(e) else None
            if want is None:
                raise
        r = fn(*[x.float() if isinstance(x, torch.Tensor) and x.dtype in HALF else x for x in xs])
        return r.to(want) if r.dtype.is_floating_point and want.is_floating_point else r
    return fn(*xs)


def differs(got, want, exact, scale=None, truth=None):
    """None when ctorch's result got matches torch's want, else what differs.
    scale (sums): the sums of the terms' magnitudes, which bound the rounding
    error of either side where terms cancel. truth (float accumulations): the
    result in float64; an element closer to it than torch's passes (torch 1.13
    accumulates float32 norms in float: 2e-5 off over 30,000 terms)."""
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} vs {want.dtype}"
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {tuple(got.shape)} vs {tuple(want.shape)}"
    if not want.dtype.is_floating_point:
        return None if torch.equal(got, want) else "values differ"
    g, e = got.double().flatten(), want.double().flatten()
    if not torch.equal(torch.isnan(g), torch.isnan(e)):
        return "NaN positions differ"
    keep = ~torch.isnan(e)
    g, e = g[keep], e[keep]
    m = e.abs() if scale is None else e.abs() + scale.double().flatten()[keep]
    if exact:
        bad = g != e
    else:
        rt = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 2e-5, torch.float64: 1e-12}[want.dtype]
        inf = torch.isinf(e) | torch.isinf(g)
        bad = inf & (g != e)
        bad[~inf] = (g[~inf] - e[~inf]).abs() > rt * m[~inf] + rt
        if truth is not None:
            t = truth.double().flatten()[keep]
            bad &= (g - t).abs() > (e - t).abs()
    if bad.any():
        return f"{int(bad.sum())} elements differ, e.g. {g[bad][:3].tolist()} vs {e[bad][:3].tolist()}"
    return None


TENSOR_ONLY = {"maximum", "minimum", "atan2", "logical_and", "logical_or", "logical_xor"}  # no Number overload


def number(v, like, op):
    """A Python number beside tensor `like`, as a 0-dim tensor typed so that it
    promotes as torch's wrapped numbers do: it decides the dtype only when its
    category (bool < integer < float) is above like's. Ops that compute integers
    in float (div, atan2) take it as a float."""
    integral = v == int(v) and not (v == 0 and math.copysign(1, v) < 0)  # ctorch's rule for a double
    if integral and op in ("div", "atan2") and not like.dtype.is_floating_point:
        return torch.tensor(v, dtype=torch.float32)
    if integral:
        return torch.tensor(int(v)).to(torch.int64 if like.dtype == torch.bool else like.dtype)  # wraps, as torch
    return torch.tensor(v, dtype=like.dtype if like.dtype.is_floating_point else torch.float32)


def both(torch_fn, ct_fn):
    """Runs both sides: (torch result or None, ctorch result or None, mismatch message or None)."""
    try:
        want, terr = torch_fn(), None
    except RuntimeError as e:
        want, terr = None, e
    got = ct_fn() or None  # NULL handles come back as 0 or None
    if terr is not None:
        return None, None, None if got is None else f"torch fails ({terr}) but ctorch does not"
    if got is None:
        return None, None, f"ctorch fails ({ct.last_error()}) but torch does not"
    return want, got, None


def elementwise_case(c):
    r = c.rng
    shape = c.shape([1, 2, 3, 7, 16, 17, 64, 65, 100, 1023, 1025], 20000)
    kind = r.choice(["binary", "binary", "scalar", "unary", "inplace", "inplace_scalar", "unary_"])
    da = r.choice(FLOATS + FLOATS + INTS)
    db = da if r.random() < 0.6 else r.choice(FLOATS + INTS)
    ta, ha = c.view(shape, da)
    cut = r.randrange(len(shape) + 1)
    shape_b = [n if r.random() < 0.7 else 1 for n in shape][cut:]
    what = f"{kind} {shape} {da} strides {ta.stride()}"
    writes_a = kind in ("inplace", "inplace_scalar", "unary_")
    if writes_a and ta.numel() > 1 and 0 in ta.stride():
        return what, None  # torch refuses to write into expanded memory too; tested elsewhere
    if kind in ("unary", "unary_"):
        op = r.choice(UNARY)
        if kind == "unary_" and (op.startswith("is") or op == "logical_not"):
            return what, None
        what += f" {op}"
        if kind == "unary":
            want, got, err = both(lambda: reference(torch_fn(op), ta, direct=True),
                                  lambda: getattr(lib, "ct_" + op)(ha))
        else:
            def torch_inplace():
                out = reference(torch_fn(op), ta, direct=True)
                if out.dtype != ta.dtype:
                    raise RuntimeError(f"result type {out.dtype} can't be cast to {ta.dtype}")
                return out
            want, got, err = both(torch_inplace, lambda: ha if getattr(lib, "ct_" + op + "_")(ha) == 0 else None)
    else:
        op = r.choice(BINARY)
        if kind in ("scalar", "inplace_scalar"):
            v = r.choice([2.0, -1.0, 0.5, 3.0, 1.5, 7.0, 0.0, -0.0, 1e10])
            what += f" {op} scalar {v}"
            other, hother = number(v, ta, op), None
            if op not in TENSOR_ONLY:  # torch takes the Python number itself
                other = int(v) if other.dtype in INTS else v
        else:
            tb, hother = c.view(shape_b, db)
            other = tb
            what += f" {op} with {shape_b} {db} strides {tb.stride()}"
        fn = getattr(torch, op)
        ct_name = "ct_" + op + ("_scalar" if hother is None else "") + ("_" if writes_a else "")
        arg = hother if hother is not None else c_double(v)
        if writes_a:
            def torch_inplace():
                out = reference(fn, ta, other, direct=True)
                if not torch.can_cast(out.dtype, ta.dtype) or (out.dtype.is_floating_point and not ta.dtype.is_floating_point):
                    raise RuntimeError(f"result type {out.dtype} can't be cast to the desired output type {ta.dtype}")
                return out.to(ta.dtype)
            want, got, err = both(torch_inplace, lambda: ha if getattr(lib, ct_name)(ha, arg) == 0 else None)
        else:
            want, got, err = both(lambda: reference(fn, ta, other, direct=True), lambda: getattr(lib, ct_name)(ha, arg))
    if err or want is None:
        return what, err
    return what, differs(ct.to_torch(got), want, op in EXACT)


def reduction_case(c):
    r = c.rng
    shape = c.shape([1, 2, 3, 5, 7, 8, 16, 17, 31, 32, 33, 64, 65, 100, 128, 257], 30000)
    dtype = r.choice(FLOATS + FLOATS + INTS[:-1])
    tv, hv = c.view(shape, dtype)
    nd = len(shape)
    dims = sorted(r.sample(range(nd), r.randint(1, nd))) if nd and r.random() < 0.85 else []
    dim = r.randrange(nd) if nd else 0
    keep = r.random() < 0.3
    op = r.choice(REDUCTIONS)
    what = f"{op} {shape} {dtype} strides {tv.stride()} dims {dims} dim {dim} keepdim {keep}"
    floating = dtype.is_floating_point
    cdims = (c_int * max(len(dims), 1))(*dims)
    red = {"dim": dims, "keepdim": keep} if dims else {}
    empty_dim = tv.numel() == 0 or any(shape[d] == 0 for d in (dims or range(nd)))
    if op in ("mean", "var", "std", "logsumexp", "norm", "softmax", "log_softmax") and not floating:
        return what, None
    if op in ("amax", "amin", "max", "argmax") and (empty_dim or not dims):
        return what, None
    if op == "sum":
        want, got, err = both(lambda: reference(lambda x: x.sum(**red), tv),
                              lambda: lib.ct_sum_dims(hv, cdims, len(dims), keep and bool(dims)))
    elif op == "mean" and dims:
        want, got, err = both(lambda: reference(lambda x: x.mean(**red), tv),
                              lambda: lib.ct_mean_dims(hv, cdims, len(dims), keep))
    elif op in ("amax", "amin", "logsumexp") and dims:
        want, got, err = both(lambda: reference(lambda x: getattr(torch, op)(x, **red), tv),
                              lambda: getattr(lib, "ct_" + op)(hv, cdims, len(dims), keep))
    elif op in ("var", "std") and dims:
        corr = r.choice([0, 1])
        what += f" correction {corr}"
        want, got, err = both(lambda: reference(lambda x: getattr(torch, op)(x, correction=corr, **red), tv),
                              lambda: getattr(lib, "ct_" + op)(hv, cdims, len(dims), c_double(corr), keep))
        if err is None and want is not None:  # the variance of equal values: exact zero vs rounding error
            g = ct.to_torch(got)
            return what, differs(g, torch.where((g == 0) & (want.abs() < 1e-3), g, want), False)
    elif op == "norm" and dims:
        p = r.choice([1.0, 2.0, 3.0, math.inf, 0.5, -1.5])
        if (p == math.inf or p < 0) and empty_dim:
            return what, None  # torch.norm gives 0, linalg.vector_norm an error
        what += f" p {p}"
        want, got, err = both(lambda: reference(lambda x: torch.linalg.vector_norm(x, ord=p, **red), tv),
                              lambda: lib.ct_norm(hv, c_double(p), cdims, len(dims), keep))
    elif op == "prod" and nd and dtype not in HALF:
        if floating and not (tv.double().abs().nan_to_num(1).clamp(min=1).prod(dim) < 1e30).all():
            return what, None  # partial products overflow: inf * 0 or not, by the order of the products
        want, got, err = both(lambda: tv.prod(dim, keepdim=keep), lambda: lib.ct_prod_dim(hv, dim, keep))
    elif op == "max":
        values, indices = T(), T()
        rc = lib.ct_max_dim(hv, dims[0], keep, byref(values), byref(indices))
        if rc != 0:
            return what, f"ctorch fails ({ct.last_error()})"
        want = reference(lambda x: x.max(dims[0], keepdim=keep).values, tv)
        idx = ct.to_torch(indices.value)
        at = torch.gather(tv, dims[0], idx if keep else idx.unsqueeze(dims[0]))  # the index points at the max
        at = at if keep else at.squeeze(dims[0])
        return what, differs(ct.to_torch(values.value), want, True) or differs(at, want, True)
    elif op == "argmax":
        idx = lib.ct_argmax(hv, True, dims[0], keep)
        want = tv.argmax(dims[0], keepdim=keep) if dtype not in HALF else tv.float().argmax(dims[0], keepdim=keep)
        if not idx:
            return what, f"ctorch fails ({ct.last_error()})"
        pick = (lambda i: torch.gather(tv, dims[0], i if keep else i.unsqueeze(dims[0])))
        return what, differs(pick(ct.to_torch(idx)), pick(want), True)
    elif op in ("softmax", "log_softmax") and nd:
        want, got, err = both(lambda: reference(lambda x: getattr(torch, op)(x, dim), tv),
                              lambda: getattr(lib, "ct_" + op)(hv, dim))
    elif op == "cumsum" and nd and dtype not in HALF:
        want, got, err = both(lambda: torch.cumsum(tv, dim), lambda: lib.ct_cumsum(hv, dim))
    else:
        return what, None
    if err or want is None:
        return what, err
    scale = truth = None
    if op in ("sum", "mean") and floating:  # cancelling terms: torch's own error is in the last bits of their sum
        scale = getattr(tv.double().abs(), op)(**red)
    if op in ("sum", "mean", "norm") and dtype == torch.float32:
        truth = getattr(tv.double(), op)(**red) if op != "norm" else \
            torch.linalg.vector_norm(tv.double(), ord=p, **red)
    return what, differs(ct.to_torch(got), want, False, scale, truth)


def run_cases(make, seed, n):
    c = Case(seed)
    bad = []
    for i in range(n):
        what, err = make(c)
        if err:
            bad.append(f"case {i}: {what}: {err}")
    assert not bad, f"seed {seed}: {len(bad)} of {n} cases differ from torch:\n" + "\n".join(bad[:10])


@pytest.mark.parametrize("seed", range(8))
def test_elementwise_random_layouts(seed):
    run_cases(elementwise_case, 1000 + seed, 250)


@pytest.mark.parametrize("seed", range(8))
def test_reductions_random_layouts(seed):
    run_cases(reduction_case, 2000 + seed, 250)
