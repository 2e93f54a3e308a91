"""Parity of the elementwise operators (the UNARY and BINARY rows of ops.def)
with PyTorch: values, result dtypes, broadcasting, layouts, in-place forms,
scalars, errors, meta shapes and first-order gradients.

Expected values always come from torch at test time. Each test loops over
dtypes (or dtype pairs) internally and reports every mismatch at once, so that
the module stays fast and a failure says everything that differs."""
import math
from ctypes import c_bool, c_char_p, c_double, c_int, c_void_p

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402

import ctorch_ffi as ct  # noqa: E402

T = c_void_p

UNARY = ["neg", "abs", "sign", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
         "rsqrt", "reciprocal", "square", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
         "cosh", "tanh", "sigmoid", "relu", "silu", "erf", "floor", "ceil", "round", "trunc",
         "frac"]
TESTS = ["isnan", "isinf", "isfinite", "logical_not"]
BINARY = ["add", "sub", "mul", "div", "remainder", "fmod", "pow", "atan2", "maximum", "minimum",
          "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
          "bitwise_and", "bitwise_or", "bitwise_xor"]

ct.declare_elementwise(UNARY, BINARY)
for _n in TESTS:
    ct.declare("ct_" + _n, T, [T])
for _row in [("ct_add_alpha", T, [T, T, c_double]), ("ct_add_alpha_", c_int, [T, T, c_double]),
             ("ct_sub_alpha", T, [T, T, c_double]), ("ct_rsub_scalar", T, [T, c_double]),
             ("ct_div_mode", T, [T, T, c_char_p]), ("ct_div_scalar_mode", T, [T, c_double, c_char_p]),
             ("ct_floor_divide", T, [T, T]), ("ct_gelu", T, [T, c_char_p]),
             ("ct_softplus", T, [T, c_double, c_double]),
             ("ct_nan_to_num", T, [T, c_double, c_double, c_double]),
             ("ct_set_requires_grad", c_int, [T, c_bool]), ("ct_backward", c_int, [T, T]),
             ("ct_grad", T, [T]), ("ct_grad_fn_name", c_char_p, [T]), ("ct_sum", T, [T]),
             ("ct_autograd_grad", c_int, [c_void_p, c_void_p, c_int, c_void_p, c_int, c_void_p, c_bool, c_bool,
                                          c_bool])]:
    ct.declare(*_row)

L = ct.lib
ALL = ct.ALL_DTYPES
TDT = [ct.torch_dtype(d) for d in ALL]
NAME = ct.DTYPE_NAMES
FLOATS = {torch.float16, torch.bfloat16, torch.float32, torch.float64}

TORCH_UNARY = {n: getattr(torch, n) for n in UNARY + TESTS if hasattr(torch, n)}
TORCH_UNARY["relu"] = torch.relu
TORCH_UNARY["silu"] = TF.silu
TORCH_BINARY = {n: getattr(torch, n) for n in BINARY}


# ------------------------------------------------------------------ helpers
@pytest.fixture
def two_threads():
    """At least 2 OpenMP threads, so that the > 32K-element cases really split
    their range over threads (the default here may be 1)."""
    before = L.ct_get_num_threads()
    L.ct_set_num_threads(max(2, before))
    yield
    L.ct_set_num_threads(before)


def tol(dt):
    """torch.testing's default tolerances per dtype (exact for integers and bool)."""
    return {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5),
            torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}.get(dt, (0.0, 0.0))


def rand(shape, dt, gen, lo=-4.0, hi=4.0, special=True):
    """Random values of dtype dt; floats include NaN, +-inf, +-0 and values outside
    (lo, hi); integers span their range's small end."""
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dt == torch.uint8:
        return torch.randint(0, 12, shape, generator=gen, dtype=torch.uint8)
    if dt not in FLOATS:
        return torch.randint(-12, 12, shape, generator=gen).to(dt)
    x = torch.rand(shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo
    if special and x.numel() >= 8:
        flat = x.view(-1)
        flat[:6] = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0], dtype=torch.float64)
        flat[6] = 0.5
        flat[7] = -1.0
    return x.to(dt)


NO_SCALAR_OVERLOAD = {"atan2", "maximum", "minimum", "logical_and", "logical_or", "logical_xor"}


def torch_scalar_op(name, x, v, inplace=False):
    """torch's op(x, v) for a Python number v. atan2, maximum, minimum and the
    logical ops take no Python number in torch's Python API; ATen treats a
    number as a wrapped 0-dim tensor of the result type, emulated here."""
    tf = TORCH_BINARY[name]
    if name not in NO_SCALAR_OVERLOAD:
        if inplace:
            return getattr(x, name + "_")(v)
        return tf(x, v)
    # a 0-dim tensor promotes like a wrapped number (int64, or float: float32 unless
    # the tensor is float64 already, where float64 keeps the double's value)
    if isinstance(v, int):
        w = torch.tensor(v, dtype=torch.int64)
    else:
        w = torch.tensor(v, dtype=torch.float64 if x.dtype == torch.float64 else torch.float32)
    if inplace:
        return tf(x, w, out=x)
    return tf(x, w)


def torch_inplace(name, a, b):
    """a.name_(b), or torch.name(a, b, out=a) for ops without a method."""
    if hasattr(a, name + "_"):
        return getattr(a, name + "_")(b)
    return TORCH_BINARY[name](a, b, out=a)


def fails(f):
    try:
        return None, f()
    except (RuntimeError, ValueError, ZeroDivisionError, TypeError) as e:
        return ct.torch_message(e) or str(e), None


def torch_unsupported(msg):
    """torch 1.13 lacks some CPU kernels for Half/BFloat16: ctorch may have them."""
    return msg is not None and ("not implemented for 'Half'" in msg or "not implemented for 'BFloat16'" in msg
                                or "not implemented for 'ComplexHalf'" in msg)


def compare(h, want, what, problems, layout=False):
    """Appends to problems what differs between ctorch h and torch want."""
    if h is None or h == 0:
        problems.append(f"{what}: ctorch failed: {ct.last_error()} (torch gives {want.dtype})")
        ct.clear_error()
        return
    rt, at = tol(want.dtype)
    try:
        ct.assert_close(h, want, rtol=rt, atol=at, what=what + ": ")
    except AssertionError as e:
        problems.append(str(e).splitlines()[0] + " " + " ".join(str(e).splitlines()[1:4]))
        return
    if layout and want.numel() > 1 and ct.strides(h) != tuple(want.stride()):
        problems.append(f"{what}: strides ctorch {ct.strides(h)} torch {tuple(want.stride())}")


def expect_error(h, msg, what, problems, exact=False):
    if h is not None and h != 0 and h != -1:
        problems.append(f"{what}: ctorch succeeded where torch fails: {msg}")
        return
    got = ct.last_error()
    ct.clear_error()
    if exact and (got is None or msg not in got):
        problems.append(f"{what}: message ctorch {got!r} torch {msg!r}")


def report(problems, limit=40):
    assert not problems, f"{len(problems)} mismatches:\n" + "\n".join(problems[:limit])


def gen(seed=0):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def c(t):
    return ct.from_torch(t)


# ---------------------------------------------------------------- unary ops
@pytest.mark.parametrize("name", UNARY + TESTS)
def test_unary_values_all_dtypes(name):
    """Every dtype: result dtype, values (NaN/inf/-0 included), errors."""
    problems = []
    g = gen(1)
    fn, tf = getattr(L, "ct_" + name), TORCH_UNARY[name]
    for dt, shape in [(dt, shape) for dt in TDT for shape in ((5, 7), (), (1, 1))]:
        x = rand(shape, dt, g)
        err, want = fails(lambda: tf(x))
        h = fn(c(x))
        what = f"{name}({dt}{list(shape)})"
        if err is not None:
            if torch_unsupported(err):
                continue
            expect_error(h, err, what, problems)
            continue
        compare(h, want, what, problems)
    report(problems)


@pytest.mark.parametrize("name", UNARY + TESTS)
def test_unary_layouts(name):
    """Transposed, step-sliced, expanded, 0-dim, empty and large (threaded) inputs,
    output strides equal to torch's; the in-place form on a non-contiguous view."""
    problems = []
    g = gen(2)
    fn, tf = getattr(L, "ct_" + name), TORCH_UNARY[name]
    for dt in (torch.float32, torch.float64, torch.int32, torch.bfloat16):
        base = rand((6, 8), dt, g)
        cases = {"t": base.t(), "step": base[::2, 1::3], "expand": base[:1].expand(4, 8),
                 "0dim": base[2, 3], "empty": base[:0], "empty2": base[:, :0].t(),
                 "3d-permuted": rand((3, 4, 5), dt, g).permute(2, 0, 1),
                 "large": rand((300, 130), dt, g), "large-t": rand((130, 300), dt, g).t()}
        for k, x in cases.items():
            err, want = fails(lambda: tf(x))
            what = f"{name}({dt}, {k})"
            h = fn(c(x))
            if err is not None:
                if not torch_unsupported(err):
                    expect_error(h, err, what, problems)
                continue
            compare(h, want, what, problems, layout=k != "expand")  # see test_expanded_input_layout
            # in place on a copy with the same layout
            if name in TESTS or k == "expand":
                continue
            xc = x.clone()
            err2, _ = fails(lambda: TF.silu(xc, inplace=True) if name == "silu" else getattr(xc, name + "_")())
            hx = c(x)
            rc = getattr(L, "ct_" + name + "_")(hx)
            if err2 is not None:
                if not torch_unsupported(err2):
                    expect_error(rc, err2, what + " in-place", problems)
                continue
            if rc != 0:
                problems.append(f"{what} in-place: failed: {ct.last_error()}")
                ct.clear_error()
                continue
            compare(hx, xc, what + " in-place", problems)
    report(problems)


def test_unary_domains():
    """Values in and out of each function's domain, float32 and float64 (1 ulp-ish)."""
    problems = []
    g = gen(3)
    ranges = {"log": (-1, 1e4), "log2": (-1, 1e4), "log10": (-1, 1e4), "log1p": (-2, 10),
              "sqrt": (-2, 100), "rsqrt": (-2, 100), "asin": (-1.5, 1.5), "acos": (-1.5, 1.5),
              "exp": (-110, 100), "exp2": (-160, 140), "expm1": (-100, 100), "tanh": (-20, 20),
              "sinh": (-100, 100), "cosh": (-100, 100), "sigmoid": (-120, 120), "silu": (-120, 120),
              "erf": (-6, 6), "tan": (-1.5, 1.5), "reciprocal": (-3, 3), "atan": (-1e3, 1e3),
              "round": (-10, 10), "frac": (-1e3, 1e3)}
    for name, (lo, hi) in ranges.items():
        for dt in (torch.float32, torch.float64):
            x = rand((4096,), dt, g, lo, hi, special=True)
            # subnormals and huge values
            x[8:12] = torch.tensor([1e-40, -1e-40, 3e38, -3e38]).to(dt) if dt == torch.float32 else \
                torch.tensor([1e-310, -1e-310, 1e308, -1e308], dtype=dt)
            if name in ("log1p", "cosh", "sinh") and dt == torch.float32:
                # torch 1.13's vectorised float kernels overflow early: log1p(3e38)
                # and cosh(89.5) are inf there; ctorch (libm) gets them right
                x = torch.where(x.abs() > 88, torch.zeros_like(x), x)
                x[10:12] = 0
            if name == "log1p" and dt == torch.float64:
                x[10] = 0
            if name == "round":
                x[12:20] = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 1e8 + 0.5])[:8].to(dt)
            want = TORCH_UNARY[name](x)
            compare(getattr(L, "ct_" + name)(c(x)), want, f"{name}({dt})", problems)
    report(problems)


def test_unary_half_precision_domains():
    problems = []
    g = gen(4)
    for name in ["exp", "log", "tanh", "sigmoid", "sqrt", "sin", "erf", "silu", "expm1", "log1p"]:
        for dt in (torch.float16, torch.bfloat16):
            x = rand((3000,), dt, g, -8, 8)
            err, want = fails(lambda: TORCH_UNARY[name](x))
            if err is not None:
                continue
            compare(getattr(L, "ct_" + name)(c(x)), want, f"{name}({dt})", problems)
    report(problems)


def test_unary_errors_messages():
    problems = []
    b = torch.tensor([True, False])
    for name in ["neg"]:
        err, _ = fails(lambda: TORCH_UNARY[name](b))
        expect_error(getattr(L, "ct_" + name)(c(b)), err, name + "(bool)", problems, exact=True)
    # in place: a float result into an integer tensor
    i = torch.arange(4, dtype=torch.int64)
    for name in ["sin", "exp", "sqrt", "sigmoid"]:
        err, _ = fails(lambda: getattr(i.clone(), name + "_")())
        expect_error(getattr(L, "ct_" + name + "_")(c(i)), err, name + "_(int64)", problems, exact=True)
    report(problems)


# ------------------------------------------------------ hand-written unaries
def test_sub_by_alpha_zero_keeps_torchs_zero_signs():
    """sub(a, b, alpha) is add(a, b, -alpha) with alpha an integer when it is
    integral: -0 stays 0, so -0 - 0 * b keeps a's -0 where b is negative."""
    b = torch.tensor([-3, 3, 1, 0] * 5, dtype=torch.int8)
    for dt in (torch.float32, torch.float64, torch.float16):
        a = torch.tensor([-0.0, -0.0, 1.0, -0.0] * 5, dtype=dt)
        for alpha in (0.0, -0.0, 1.0, -1.0, 2.0):
            want = torch.sub(a, b, alpha=int(alpha))
            got = ct.to_torch(ct.check(L.ct_sub_alpha(c(a), c(b), alpha)))
            assert torch.equal(got, want) and torch.equal(got.signbit(), want.signbit()), (dt, alpha, got, want)


def test_square_of_bool_in_place_names_pows_dtype_check():
    x = torch.ones(3, dtype=torch.bool)
    ct.declare("ct_square_", c_int, [T])
    assert L.ct_square_(c(x)) == -1
    assert "Found dtype Bool but expected Long" in ct.last_error()
    with pytest.raises(RuntimeError, match="Found dtype Bool but expected Long"):
        x.clone().square_()


def test_multiply_adds_round_once_as_torch():
    """torch 1.13's kernels are built with contraction on: lerp's a + w (b - a)
    and b - (b - a)(1 - w), addcmul's self + value t1 t2 and the tanh gelu's x +
    0.044715 x^3 round once (fused multiply-adds). Bit for bit, both lerp
    branches, tensor and number weights, contiguous and strided, vector bodies
    and tails; the gelu against its formula with ctorch's own tanh (the fused
    step computed exactly in double)."""
    for _row in [("ct_lerp", T, [T, T, T]), ("ct_lerp_scalar", T, [T, T, c_double]),
                 ("ct_addcmul", T, [T, T, T, c_double])]:
        ct.declare(*_row)
    g = torch.Generator().manual_seed(3)
    for dt in (torch.float32, torch.float64):
        a = torch.randn(2006, generator=g, dtype=dt)
        b = a + torch.randn(2006, generator=g, dtype=dt) * 1e-2  # close: the unfused forms cancel
        w = torch.rand(2006, generator=g, dtype=dt) * 1.4 - 0.2  # both branches (w < 0.5 and not)
        for sl in (slice(None, 1003), slice(None, None, 2), slice(0, 13)):
            x, y, z = a[sl], b[sl], w[sl]
            what = f"{dt} {sl}: "
            ct.assert_close(L.ct_lerp(c(x), c(y), c(z)), torch.lerp(x, y, z), rtol=0, atol=0, what="lerp " + what)
            for ws in (0.3, 0.7):
                ct.assert_close(L.ct_lerp_scalar(c(x), c(y), ws), torch.lerp(x, y, ws), rtol=0, atol=0,
                                what=f"lerp {ws} " + what)
            ct.assert_close(L.ct_addcmul(c(x), c(y), c(z), 1.5), torch.addcmul(x, y, z, value=1.5), rtol=0,
                            atol=0, what="addcmul " + what)
    x = torch.randn(20000, generator=g) * 2
    x3 = x * x * x  # float32, as the kernel: (x x) x
    fused = (torch.tensor(0.044715, dtype=torch.float32).double() * x3.double() + x.double()).float()
    inner = torch.tensor(math.sqrt(2) * (2 / math.sqrt(math.pi)) * 0.5, dtype=torch.float32) * fused
    t = ct.to_torch(ct.check(L.ct_tanh(c(inner))))
    want = 0.5 * x * (1 + t)
    ct.assert_close(L.ct_gelu(c(x), b"tanh"), want, rtol=0, atol=0, what="gelu tanh: ")


def test_gelu():
    problems = []
    g = gen(5)
    for dt in TDT:
        x = rand((9, 5), dt, g, -6, 6)
        for approx in ["none", "tanh"]:
            err, want = fails(lambda: TF.gelu(x, approximate=approx))
            h = L.ct_gelu(c(x), approx.encode())
            what = f"gelu({dt}, {approx})"
            if err is not None:
                if not torch_unsupported(err):
                    expect_error(h, err, what, problems)
                continue
            if dt == torch.bfloat16:
                # torch 1.13 rounds every intermediate of the tanh form to bfloat16
                # (gelu(-3) = -5.9e-3 there, -3.6e-3 exactly), and of the erf form too
                # where its CPU capability is AVX2 (-5.9e-3 against -4.05e-3; with
                # AVX-512 it computes in float); ctorch computes in float
                ct.assert_close(h, want, rtol=2e-2, atol=3e-3, what=what)
                continue
            compare(h, want, what, problems)
    x = rand((4, 4), torch.float32, g)
    compare(L.ct_gelu(c(x), None), TF.gelu(x), "gelu(NULL)", problems)
    compare(L.ct_gelu(c(x.t()), b"tanh"), TF.gelu(x.t(), approximate="tanh"), "gelu(t)", problems,
            layout=True)
    err, _ = fails(lambda: TF.gelu(x, approximate="bad"))
    expect_error(L.ct_gelu(c(x), b"bad"), err, "gelu(bad)", problems, exact=True)
    report(problems)


def test_softplus():
    problems = []
    g = gen(6)
    for dt in TDT:
        x = rand((9, 5), dt, g, -30, 30)
        for beta, th in [(1, 20), (2, 5), (0.5, 1), (-1, 20), (3, -2)]:
            err, want = fails(lambda: TF.softplus(x, beta, th))
            h = L.ct_softplus(c(x), beta, th)
            what = f"softplus({dt}, beta={beta}, threshold={th})"
            if err is not None:
                if not torch_unsupported(err):
                    expect_error(h, err, what, problems)
                continue
            compare(h, want, what, problems)
    report(problems)


def test_nan_to_num():
    problems = []
    g = gen(7)
    for dt in TDT:
        x = rand((6, 7), dt, g, -1e4, 1e4)
        for args in [(None, None, None), (1.5, None, None), (0.0, 7.0, -9.0), (None, 100.0, None),
                     (None, None, -3.0)]:
            err, want = fails(lambda: torch.nan_to_num(x, *args))
            h = L.ct_nan_to_num(c(x), *[math.nan if a is None else a for a in args])
            what = f"nan_to_num({dt}, {args})"
            if err is not None:
                expect_error(h, err, what, problems)
                continue
            compare(h, want, what, problems)
    x = rand((6, 7), torch.float32, g).t()
    compare(L.ct_nan_to_num(c(x), math.nan, math.nan, math.nan), torch.nan_to_num(x), "nan_to_num(t)",
            problems, layout=True)
    report(problems)


# --------------------------------------------------------------- binary ops
def bin_inputs(name, da, db, g, shape=(4, 5)):
    a, b = rand(shape, da, g), rand(shape[-1:], db, g)
    if name == "pow" and db not in FLOATS:  # integer exponents: keep them small and >= 0
        b = b.abs() if db != torch.bool else b
        b = torch.remainder(b, 4) if db != torch.bool else b
    if name in ("div", "remainder", "fmod") and db not in FLOATS:
        b = torch.where(b == 0, torch.ones_like(b), b)
    if name == "pow" and da not in FLOATS and da != torch.bool:
        a = torch.remainder(a, 5).to(da) if da != torch.uint8 else a % 5
    return a, b


@pytest.mark.parametrize("name", BINARY)
def test_binary_dtype_pairs(name):
    """Every pair of dtypes: result dtype (promotion, comparisons -> bool, int -> float
    division), values and errors; broadcasting a [5] against a [4, 5]."""
    problems = []
    g = gen(8)
    fn, tf = getattr(L, "ct_" + name), TORCH_BINARY[name]
    for da in TDT:
        for db in TDT:
            a, b = bin_inputs(name, da, db, g)
            err, want = fails(lambda: tf(a, b))
            h = fn(c(a), c(b))
            what = f"{name}({da}, {db})"
            if err is not None:
                if not torch_unsupported(err):
                    expect_error(h, err, what, problems)
                continue
            compare(h, want, what, problems)
    report(problems)


ONE_SHAPES = [((), ()), ((1,), ()), ((), (1, 1)), ((1, 1), (1,))]


@pytest.mark.parametrize("name", BINARY)
def test_binary_one_element(name):
    """Single-element operands of every dtype pair and mix of 0-dim and size-1 shapes
    (the engine's one-element path): values, result dtypes, shapes, in-place casts."""
    problems = []
    g = gen(21)
    fn, fn_, tf = getattr(L, "ct_" + name), getattr(L, "ct_" + name + "_"), TORCH_BINARY[name]
    for ia, da in enumerate(TDT):
        for ib, db in enumerate(TDT):
            for sa, sb in ONE_SHAPES[(ia + 3 * ib) % 4:][:1]:  # each mix of shapes, over the pairs
                a, b = bin_inputs(name, da, db, g, shape=(1,))
                a, b = a.reshape(sa), b.reshape(sb)
                what = f"{name}({da}{list(sa)}, {db}{list(sb)})"
                err, want = fails(lambda: tf(a, b))
                h = fn(c(a), c(b))
                if err is None:
                    compare(h, want, what, problems)
                elif not torch_unsupported(err):
                    expect_error(h, err, what, problems)
                ac = a.clone()
                err, _ = fails(lambda: torch_inplace(name, ac, b))
                ha = c(a)
                rc = fn_(ha, c(b))
                if err is None:
                    if rc != 0:
                        problems.append(f"in place {what}: failed: {ct.last_error()}")
                        ct.clear_error()
                    else:
                        compare(ha, ac, "in place " + what, problems)
                elif not torch_unsupported(err):
                    expect_error(rc, err, "in place " + what, problems, exact="can't be cast" in err)
    report(problems)


@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcast_layouts(name):
    """Broadcasting with 0-dim and size-1 dims, transposed, sliced, expanded,
    empty and large inputs; output strides equal torch's."""
    problems = []
    g = gen(9)
    fn, tf = getattr(L, "ct_" + name), TORCH_BINARY[name]
    dts = (torch.float32, torch.int64, torch.bool) if "bitwise" in name or "logical" in name \
        else (torch.float32, torch.float64, torch.int32, torch.float16)
    for dt in dts:
        r = lambda *s: bin_inputs(name, dt, dt, g, s)  # noqa: E731
        big = rand((6, 8), dt, g)
        cases = {
            "0dim-rhs": (r(3, 4)[0], r(3, 4)[1][2].clone()),
            "0dim-lhs": (r(3, 4)[0][1, 2].clone(), r(3, 4)[1]),
            "0dim-both": (r(2)[0][0].clone(), r(2)[1][1].clone()),
            "size1": (r(3, 1, 4)[0][:, :1, :1], rand((2, 4), dt, g)[None]),
            "outer": (r(5)[0].view(5, 1), r(4)[1].view(1, 4)),
            "t": (big.t(), rand((8, 6), dt, g)),
            "t-both": (big.t(), rand((6, 8), dt, g).t()),
            "t-vs-row": (big.t(), r(6)[1]),
            "step": (big[::2, 1::3], r(3)[1]),
            "expand": (r(1, 8)[0].expand(6, 8), big),
            "empty": (big[:0], r(8)[1]),
            "empty-bcast": (rand((0, 1), dt, g), r(3)[1]),
            "3d-permuted": (rand((3, 4, 5), dt, g).permute(2, 0, 1), rand((5, 3, 4), dt, g)),
            "large": r(257, 131),
            "large-t": (rand((131, 257), dt, g).t(), r(131)[1]),
            "large-bcast": (r(256, 1)[0], r(1, 200)[1]),
        }
        for k, (a, b) in cases.items():
            if name in ("div", "remainder", "fmod") and b.dtype not in FLOATS:
                b = torch.where(b == 0, torch.ones_like(b), b)
            if name == "pow" and dt not in FLOATS:
                a, b = torch.remainder(a, 5), torch.remainder(b, 4)
            err, want = fails(lambda: tf(a, b))
            h = fn(c(a), c(b))
            what = f"{name}({dt}, {k})"
            if err is not None:
                if not torch_unsupported(err):
                    expect_error(h, err, what, problems)
                continue
            compare(h, want, what, problems, layout=k != "expand")  # see test_expanded_input_layout
    report(problems)


def test_expanded_input_layout():
    x = torch.rand(1, 8).expand(4, 8)
    h = L.ct_sin(c(x))
    assert ct.strides(h) == torch.sin(x).stride()
    y = torch.rand(4, 8)
    h = L.ct_add(c(x), c(y))
    assert ct.strides(h) == torch.add(x, y).stride()


def test_first_input_decides_layout():
    a, b = torch.rand(6, 8), torch.rand(8, 6).t()
    assert ct.strides(L.ct_add(c(a), c(b))) == (a + b).stride()


def test_size1_dim_layout():
    x = torch.rand(6, 1, 8).transpose(0, 2)
    assert ct.strides(L.ct_sin(c(x))) == torch.sin(x).stride()


def test_binary_zero_dim_promotion():
    """0-dim tensors don't raise the category of dim tensors' dtype unless higher."""
    problems = []
    g = gen(10)
    for name in ["add", "mul", "sub", "maximum", "div", "eq", "remainder", "bitwise_and", "logical_or"]:
        for da in TDT:
            for db in TDT:
                a = rand((3,), da, g)
                b = rand((), db, g) if db in FLOATS else torch.tensor(3, dtype=db) if db != torch.bool \
                    else torch.tensor(True)
                for x, y, k in [(a, b, "dim,0dim"), (b, a, "0dim,dim")]:
                    err, want = fails(lambda: TORCH_BINARY[name](x, y))
                    h = getattr(L, "ct_" + name)(c(x), c(y))
                    what = f"{name}({k}: {x.dtype}, {y.dtype})"
                    if err is not None:
                        if not torch_unsupported(err):
                            expect_error(h, err, what, problems)
                        continue
                    compare(h, want, what, problems)
    report(problems)


SCALARS = [2, -3, 0, 1, 2.5, -0.5, 1e10, math.inf, math.nan]


@pytest.mark.parametrize("name", BINARY)
def test_binary_scalar_forms(name):
    """ct_X_scalar(t, v): v integral counts as a Python int, else a float. torch with a
    Python float 2.0 promotes integer tensors to float; ctorch's 2.0 is an int, so
    integral values are compared with torch given int(v)."""
    problems = []
    g = gen(11)
    fn, fn_ = getattr(L, "ct_" + name + "_scalar"), getattr(L, "ct_" + name + "_scalar_")
    for dt in TDT:
        x = rand((3, 4), dt, g)
        if name == "pow" and dt not in FLOATS and dt != torch.bool:
            x = torch.remainder(x, 5).to(dt)
        for v in SCALARS:
            pv = int(v) if isinstance(v, float) and math.isfinite(v) and v == int(v) else v
            if name in ("div", "remainder", "fmod") and pv == 0 and dt not in FLOATS:
                continue  # integer division by zero: test_integer_division_by_zero
            if name == "pow" and isinstance(pv, int) and pv < 0 and dt not in FLOATS:
                continue  # negative integer powers: test_integer_pow_negative
            err, want = fails(lambda: torch_scalar_op(name, x, pv))
            h = fn(c(x), float(v))
            what = f"{name}_scalar({dt}, {v!r})"
            if err is not None:
                if not torch_unsupported(err):
                    expect_error(h, err, what, problems)
                continue
            compare(h, want, what, problems)
            # in place
            xc = x.clone()
            err2, _ = fails(lambda: torch_scalar_op(name, xc, pv, inplace=True))
            hx = c(x)
            rc = fn_(hx, float(v))
            if err2 is not None:
                if not torch_unsupported(err2):
                    expect_error(rc, err2, what + " in-place", problems)
                continue
            if rc != 0:
                problems.append(f"{what} in-place: failed: {ct.last_error()}")
                ct.clear_error()
                continue
            compare(hx, xc, what + " in-place", problems)
    report(problems)


def test_scalar_integral_double_is_int():
    """The documented difference: ctorch's 2.0 is a Python int, torch's 2.0 is a float."""
    x = torch.arange(4, dtype=torch.int32)
    h = L.ct_add_scalar(c(x), 2.0)
    ct.assert_close(h, x + 2)
    assert (x + 2.0).dtype == torch.float32  # torch: float; ctorch cannot tell 2 from 2.0
    h = L.ct_mul_scalar(c(x), 0.5)
    ct.assert_close(h, x * 0.5)
    # but -0.0 is a float (no int has a sign of zero): uint8 / -0.0 is -inf, int + -0.0 float32
    u = torch.tensor([0, 1, 7], dtype=torch.uint8)
    ct.assert_close(L.ct_div_scalar(c(u), -0.0), u / -0.0)
    h = L.ct_add_scalar(c(x), -0.0)
    assert ct.dtype(h) == ct.CT_FLOAT32 and (x + -0.0).dtype == torch.float32


@pytest.mark.parametrize("name", BINARY)
def test_binary_inplace(name):
    """ct_X_(a, b): broadcast b into a, casts, torch's errors."""
    problems = []
    g = gen(12)
    fn_ = getattr(L, "ct_" + name + "_")
    for da in TDT:
        for db in TDT:
            a, b = bin_inputs(name, da, db, g)
            ac = a.clone()
            err, _ = fails(lambda: torch_inplace(name, ac, b))
            ha = c(a)
            rc = fn_(ha, c(b))
            what = f"{name}_({da}, {db})"
            if err is not None:
                if not torch_unsupported(err):
                    expect_error(rc, err, what, problems, exact="can't be cast" in err)
                continue
            if rc != 0:
                problems.append(f"{what}: failed: {ct.last_error()}")
                ct.clear_error()
                continue
            compare(ha, ac, what, problems)
    # transposed destination, broadcast source
    for dt in (torch.float32, torch.int64):
        a = rand((6, 5), dt, g).t()
        b = bin_inputs(name, dt, dt, g, (6,))[1]
        ac = a.clone()
        err, _ = fails(lambda: torch_inplace(name, ac, b))
        ha = c(a)
        rc = fn_(ha, c(b))
        if err is None:
            if rc != 0:
                problems.append(f"{name}_(t): {ct.last_error()}")
                ct.clear_error()
            else:
                compare(ha, ac, f"{name}_(t, {dt})", problems, layout=True)
        elif not torch_unsupported(err):
            expect_error(rc, err, f"{name}_(t, {dt})", problems)
    report(problems)


def test_inplace_errors():
    problems = []
    a64, f = torch.arange(3), torch.ones(3)
    err, _ = fails(lambda: a64.clone().add_(f))
    assert "result type Float can't be cast to the desired output type Long" in err
    expect_error(L.ct_add_(c(a64), c(f)), err, "add_(long, float)", problems, exact=True)
    err, _ = fails(lambda: a64.clone().div_(a64))
    expect_error(L.ct_div_(c(a64), c(a64 + 1)), err, "div_(long, long)", problems, exact=True)
    err, _ = fails(lambda: a64.clone().add_(2.5))
    expect_error(L.ct_add_scalar_(c(a64), 2.5), err, "add_scalar_(long, 2.5)", problems, exact=True)
    b = torch.tensor([True, False, True])
    err, _ = fails(lambda: b.clone().add_(a64))
    expect_error(L.ct_add_(c(b), c(a64)), err, "add_(bool, long)", problems, exact=True)
    x, y = torch.ones(3), torch.ones(2, 3)
    err, _ = fails(lambda: x.clone().add_(y))
    assert "output with shape [3] doesn't match the broadcast shape [2, 3]" in err
    expect_error(L.ct_add_(c(x), c(y)), err, "add_([3], [2,3])", problems, exact=True)
    # the shape is checked before the dtype
    err, _ = fails(lambda: a64.clone().add_(y))
    expect_error(L.ct_add_(c(a64), c(y)), err, "add_(long [3], float [2,3])", problems, exact=True)
    err, _ = fails(lambda: a64.clone().bitwise_and_(y))
    expect_error(L.ct_bitwise_and_(c(a64), c(y)), err, "bitwise_and_(long [3], float [2,3])", problems, exact=True)
    err, _ = fails(lambda: x.clone().mul_(torch.ones(4)))
    expect_error(L.ct_mul_(c(x), c(torch.ones(4))), err, "mul_([3], [4])", problems, exact=True)
    err, _ = fails(lambda: torch.ones(3) + torch.ones(4))
    expect_error(L.ct_add(c(x), c(torch.ones(4))), err, "add([3], [4])", problems, exact=True)
    # a self-overlapping destination (expanded)
    e = torch.ones(1, 3).expand(2, 3)
    err, _ = fails(lambda: e.add_(1))
    expect_error(L.ct_add_scalar_(c(e), 1.0), err, "add_(expanded)", problems, exact=True)
    # the overlap comes first (TensorIterator's compute_mem_overlaps), before
    # shapes, casts, dtype kernels and division by zero
    ei = torch.zeros(1, 4, dtype=torch.int32).expand(3, 4)
    for what, tf, cf in [
            ("pow_(int expanded, 0.5)", lambda: ei.pow_(0.5), lambda: L.ct_pow_scalar_(c(ei), 0.5)),
            ("add_(expanded, [4])", lambda: e.add_(torch.ones(4)), lambda: L.ct_add_(c(e), c(torch.ones(4)))),
            ("sqrt_(int expanded)", lambda: ei.sqrt_(), lambda: L.ct_sqrt_(c(ei))),
            ("remainder_(int expanded, 0)", lambda: ei.remainder_(0), lambda: L.ct_remainder_scalar_(c(ei), 0.0)),
            ("bitwise_and_(float expanded)", lambda: e.bitwise_and_(e), lambda: L.ct_bitwise_and_(c(e), c(e)))]:
        err, _ = fails(tf)
        expect_error(cf(), err, what, problems, exact=True)
    report(problems)


def test_add_sub_alpha():
    problems = []
    g = gen(13)
    for da, db in [(torch.float32, torch.float32), (torch.int64, torch.int32), (torch.float64, torch.int8),
                   (torch.float16, torch.float16), (torch.int32, torch.int32), (torch.bfloat16, torch.float32)]:
        a, b = rand((4, 5), da, g), rand((5,), db, g)
        for alpha in [2, -3, 0.5]:
            err, want = fails(lambda: torch.add(a, b, alpha=alpha))
            h = L.ct_add_alpha(c(a), c(b), float(alpha))
            if err is not None:
                expect_error(h, err, f"add_alpha({da},{db},{alpha})", problems, exact=True)
            else:
                compare(h, want, f"add_alpha({da},{db},{alpha})", problems)
            err, want = fails(lambda: torch.sub(a, b, alpha=alpha))
            h = L.ct_sub_alpha(c(a), c(b), float(alpha))
            if err is not None:
                expect_error(h, err, f"sub_alpha({da},{db},{alpha})", problems, exact=True)
            else:
                compare(h, want, f"sub_alpha({da},{db},{alpha})", problems)
            ac = a.clone()
            err, _ = fails(lambda: ac.add_(b, alpha=alpha))
            ha = c(a)
            rc = L.ct_add_alpha_(ha, c(b), float(alpha))
            if err is not None:
                expect_error(rc, err, f"add_alpha_({da},{db},{alpha})", problems)
            elif rc != 0:
                problems.append(f"add_alpha_: {ct.last_error()}")
                ct.clear_error()
            else:
                compare(ha, ac, f"add_alpha_({da},{db},{alpha})", problems)
        for v in [2, 2.5, -1]:
            compare(L.ct_rsub_scalar(c(a), float(v)), torch.rsub(a, v), f"rsub_scalar({da},{v})", problems)
    b = torch.tensor([True, False])
    err, _ = fails(lambda: b - b)
    expect_error(L.ct_sub(c(b), c(b)), err, "sub(bool, bool)", problems, exact=True)
    report(problems)


def test_alpha_is_fused_and_in_the_dtype():
    """torch's add / sub compute a + alpha * b with one rounding (fmadd) and take
    alpha in the tensor's dtype (alpha.to<scalar_t>()): float32 / float64 bit for
    bit in any layout, inf + an overflowing alpha * b stays inf; a 16-bit alpha
    rounded (bfloat16 0.3 is 0.30078125)"""
    g = gen(31)

    def same(x, y):  # bit for bit, NaN where NaN
        return bool(((x == y) | (x.isnan() & y.isnan())).all())
    for dt in (torch.float32, torch.float64):
        a, b = rand((40, 50), dt, g) * 100, rand((50, 40), dt, g).t() * 100
        for alpha in (-2.5, 0.3, 1.7):
            for x, y in ((a, b), (a.t(), b.t()), (a[:, ::2], b[:, ::2])):
                got = ct.to_torch(ct.check(L.ct_add_alpha(c(x), c(y), alpha)))
                assert same(got, torch.add(x, y, alpha=alpha)), f"add {dt} alpha {alpha}"
                got = ct.to_torch(ct.check(L.ct_sub_alpha(c(x), c(y), alpha)))
                assert same(got, torch.sub(x, y, alpha=alpha)), f"sub {dt} alpha {alpha}"
    big = torch.tensor([math.inf, -math.inf, 1.0]), torch.tensor([3e38, -3e38, 3e38])
    assert torch.equal(ct.to_torch(ct.check(L.ct_add_alpha(c(big[0]), c(big[1]), -2.5))),
                       torch.add(*big, alpha=-2.5))
    for dt in (torch.float16, torch.bfloat16):
        got = ct.to_torch(ct.check(L.ct_add_alpha(c(torch.zeros(3, dtype=dt)), c(torch.ones(3, dtype=dt)), 0.3)))
        assert torch.equal(got, torch.add(torch.zeros(3, dtype=dt), torch.ones(3, dtype=dt), alpha=0.3)), dt


# ----------------------------------------------------------- division family
def test_div_rounding_modes():
    problems = []
    g = gen(14)
    for da in TDT:
        for db in TDT:
            a = rand((4, 6), da, g, -20, 20)
            b = rand((6,), db, g, -5, 5)
            if db not in FLOATS:
                b = torch.where(b == 0, torch.ones_like(b), b)
            for mode in [None, "trunc", "floor"]:
                err, want = fails(lambda: torch.div(a, b, rounding_mode=mode))
                h = L.ct_div_mode(c(a), c(b), None if mode is None else mode.encode())
                what = f"div({da}, {db}, {mode})"
                if err is not None:
                    if not torch_unsupported(err):
                        expect_error(h, err, what, problems)
                    continue
                if mode and want.dtype in (torch.float16, torch.bfloat16):
                    # torch rounds the quotient to half/bfloat16 before truncating or
                    # flooring it (trunc(bf16(36.98)) = 37); ctorch rounds in float: the
                    # results may differ by one
                    ct.assert_close(h, want, rtol=0, atol=1.0, what=what)
                    continue
                compare(h, want, what, problems)
            err, want = fails(lambda: torch.floor_divide(a, b))
            h = L.ct_floor_divide(c(a), c(b))
            if err is not None:
                if not torch_unsupported(err):
                    expect_error(h, err, f"floor_divide({da}, {db})", problems)
            else:
                compare(h, want, f"floor_divide({da}, {db})", problems)
    # negative numbers, exact halves, zeros and infinities
    a = torch.tensor([-7.0, 7.0, -7.0, 7.0, -6.0, 6.0, 0.0, -0.0, 5.0, -5.0, math.inf, 1.0, -1.0, 1e30])
    b = torch.tensor([2.0, -2.0, -2.0, 2.0, 4.0, -4.0, 3.0, 3.0, 0.0, 0.0, 2.0, math.inf, math.inf, 3e-10])
    for dt in (torch.float32, torch.float64, torch.float16):
        for mode in ["trunc", "floor"]:
            compare(L.ct_div_mode(c(a.to(dt)), c(b.to(dt)), mode.encode()),
                    torch.div(a.to(dt), b.to(dt), rounding_mode=mode), f"div({dt}, {mode}) specials", problems)
    ai = torch.tensor([-7, 7, -7, 7, -6, 6, 0, -128, 127, -1])
    bi = torch.tensor([2, -2, -2, 2, 4, -4, 3, -1, -1, 3])
    for dt in (torch.int8, torch.int32, torch.int64):
        for mode in ["trunc", "floor"]:
            compare(L.ct_div_mode(c(ai.to(dt)), c(bi.to(dt)), mode.encode()),
                    torch.div(ai.to(dt), bi.to(dt), rounding_mode=mode), f"div({dt}, {mode}) negatives", problems)
    # INT64_MIN / -1: torch 1.13 itself dies of SIGFPE here; ctorch must not (it wraps)
    big = torch.tensor([torch.iinfo(torch.int64).min, -9, 9])
    for mode in [b"floor", b"trunc"]:
        h = ct.check(L.ct_div_mode(c(big), c(torch.tensor([-1, 4, -4])), mode))
        assert ct.to_torch(h)[0] == torch.iinfo(torch.int64).min
    # scalar forms
    for v in [2, -3, 2.5, -0.5]:
        for dt in (torch.int64, torch.float32, torch.int16):
            x = rand((3, 5), dt, g, -10, 10)
            for mode in [None, "trunc", "floor"]:
                compare(L.ct_div_scalar_mode(c(x), float(v), None if mode is None else mode.encode()),
                        torch.div(x, v, rounding_mode=mode), f"div_scalar({dt}, {v}, {mode})", problems)
    err, _ = fails(lambda: torch.div(a, b, rounding_mode="bad"))
    expect_error(L.ct_div_mode(c(a), c(b), b"bad"), err, "div(mode=bad)", problems, exact=True)
    report(problems)


def test_remainder_fmod_signs():
    problems = []
    a = torch.tensor([-7.0, 7.0, -7.0, 7.0, 5.5, -5.5, 0.0, -0.0, 3.0, -3.0, math.inf, 1.0, -1.0])
    b = torch.tensor([3.0, -3.0, -3.0, 3.0, 2.0, 2.0, 3.0, -3.0, 0.0, math.inf, 2.0, -math.inf, math.inf])
    for name in ["remainder", "fmod"]:
        for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            compare(getattr(L, "ct_" + name)(c(a.to(dt)), c(b.to(dt))), TORCH_BINARY[name](a.to(dt), b.to(dt)),
                    f"{name}({dt})", problems)
        ai, bi = torch.tensor([-7, 7, -7, 7, 0, -128, 127]), torch.tensor([3, -3, -3, 3, 5, -1, -1])
        for dt in (torch.int8, torch.int16, torch.int32, torch.int64):
            compare(getattr(L, "ct_" + name)(c(ai.to(dt)), c(bi.to(dt))),
                    TORCH_BINARY[name](ai.to(dt), bi.to(dt)), f"{name}({dt})", problems)
        u = torch.tensor([7, 200, 0], dtype=torch.uint8)
        compare(getattr(L, "ct_" + name)(c(u), c(torch.tensor([3, 7, 9], dtype=torch.uint8))),
                TORCH_BINARY[name](u, torch.tensor([3, 7, 9], dtype=torch.uint8)), f"{name}(uint8)", problems)
        for v in [3, -3, 2.5, -2.5]:
            x = torch.tensor([-7, 7, 0, -1, 1])
            compare(getattr(L, "ct_" + name + "_scalar")(c(x), float(v)), TORCH_BINARY[name](x, v),
                    f"{name}_scalar(long, {v})", problems)
    report(problems)


def test_integer_division_by_zero():
    problems = []
    a, z = torch.tensor([1, -2, 3]), torch.tensor([1, 0, 2])
    for dt in (torch.int64, torch.int32, torch.uint8, torch.int8):
        a_, z_ = a.to(dt) if dt != torch.uint8 else a.abs().to(dt), z.to(dt)
        for label, tf, cf in [
            ("div floor", lambda: torch.div(a_, z_, rounding_mode="floor"), lambda: L.ct_div_mode(c(a_), c(z_), b"floor")),
            ("div trunc", lambda: torch.div(a_, z_, rounding_mode="trunc"), lambda: L.ct_div_mode(c(a_), c(z_), b"trunc")),
            ("floor_divide", lambda: torch.floor_divide(a_, z_), lambda: L.ct_floor_divide(c(a_), c(z_))),
            ("remainder", lambda: torch.remainder(a_, z_), lambda: L.ct_remainder(c(a_), c(z_))),
            ("fmod", lambda: torch.fmod(a_, z_), lambda: L.ct_fmod(c(a_), c(z_))),
            ("remainder scalar", lambda: torch.remainder(a_, 0), lambda: L.ct_remainder_scalar(c(a_), 0.0)),
            ("fmod scalar", lambda: torch.fmod(a_, 0), lambda: L.ct_fmod_scalar(c(a_), 0.0)),
            ("div floor scalar", lambda: torch.div(a_, 0, rounding_mode="floor"),
             lambda: L.ct_div_scalar_mode(c(a_), 0.0, b"floor")),
        ]:
            err, want = fails(tf)
            h = cf()
            if err is None:
                compare(h, want, f"{label}({dt}) by zero", problems)
            else:
                expect_error(h, err, f"{label}({dt}) by zero", problems, exact=True)
    # true division by zero is float: inf/nan
    compare(L.ct_div(c(a), c(z - 1)), torch.div(a, z - 1), "div(long, 0) true", problems)
    report(problems)


def test_integer_pow():
    problems = []
    x = torch.tensor([0, 1, -1, 2, -2, 3, 7])
    for dt in (torch.int64, torch.int32, torch.int8, torch.int16):
        e = torch.tensor([0, 3, 5, 10, 3, 2, 1], dtype=dt)
        compare(L.ct_pow(c(x.to(dt)), c(e)), torch.pow(x.to(dt), e), f"pow({dt})", problems)
        neg = torch.tensor([1, -1, 2, 0, 1, 1, 1], dtype=dt)
        err, want = fails(lambda: torch.pow(x.to(dt), neg))
        h = L.ct_pow(c(x.to(dt)), c(neg))
        if err is None:
            compare(h, want, f"pow({dt}, negative)", problems)
        else:
            expect_error(h, err, f"pow({dt}, negative)", problems, exact=True)
        err, want = fails(lambda: torch.pow(x.to(dt), -2))
        h = L.ct_pow_scalar(c(x.to(dt)), -2.0)
        if err is None:
            compare(h, want, f"pow_scalar({dt}, -2)", problems)
        else:
            expect_error(h, err, f"pow_scalar({dt}, -2)", problems, exact=True)
    # overflow wraps like torch
    compare(L.ct_pow_scalar(c(torch.tensor([3, -3, 2])), 41.0), torch.pow(torch.tensor([3, -3, 2]), 41),
            "pow overflow", problems)
    # float pow specials
    b = torch.tensor([0.0, -0.0, -2.0, -8.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5])
    for ev in [0.5, 2, 3, -1, -0.5, -2, 0, math.inf, math.nan, 1.0 / 3]:
        compare(L.ct_pow_scalar(c(b), float(ev)), torch.pow(b, ev), f"pow(float specials, {ev})", problems)
    # powers torch multiplies out (x x x, 1 / (x x)): its bits exactly, which pow's single rounding is not
    g = torch.Generator().manual_seed(7)
    for dt in (torch.float32, torch.float64):
        r = torch.randn(4000, generator=g, dtype=dt) * 3
        for ev in [2, 3, -2, -1, 0.5, -0.5]:
            got, want = ct.to_torch(ct.check(L.ct_pow_scalar(c(r), float(ev)))), torch.pow(r, ev)
            bad = int(((got != want) & ~(got.isnan() & want.isnan())).sum())
            if bad:
                problems.append(f"pow({dt}, {ev}): {bad} elements differ from torch's")
    report(problems)


# -------------------------------------------------- bitwise, logical, minmax
def test_bitwise_logical():
    problems = []
    g = gen(15)
    for name in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
        for dt in (torch.float32, torch.float64, torch.float16):
            x = rand((3,), dt, g)
            err, _ = fails(lambda: TORCH_BINARY[name](x, x))
            expect_error(getattr(L, "ct_" + name)(c(x), c(x)), err, f"{name}({dt})", problems, exact=True)
            err, _ = fails(lambda: TORCH_BINARY[name](torch.arange(3), x))
            expect_error(getattr(L, "ct_" + name)(c(torch.arange(3)), c(x)), err, f"{name}(long, {dt})", problems)
        x = torch.tensor([-1, 0, 5, -128, 127], dtype=torch.int8)
        y = torch.tensor([3, -1, 6, 1, -128], dtype=torch.int8)
        compare(getattr(L, "ct_" + name)(c(x), c(y)), TORCH_BINARY[name](x, y), f"{name}(int8)", problems)
        for v in [1, -1, 6]:
            compare(getattr(L, "ct_" + name + "_scalar")(c(x), float(v)), TORCH_BINARY[name](x, v),
                    f"{name}_scalar(int8, {v})", problems)
    for name in ["logical_and", "logical_or", "logical_xor"]:
        a = torch.tensor([0.0, -0.0, math.nan, 1.0, 0.0, 2.0])
        b = torch.tensor([0, 1, 0, 0, 3, -1], dtype=torch.int8)
        compare(getattr(L, "ct_" + name)(c(a), c(b)), TORCH_BINARY[name](a, b), f"{name}(nan/-0)", problems)
    ln = torch.tensor([0.0, -0.0, math.nan, math.inf, 1e-40])
    compare(L.ct_logical_not(c(ln)), torch.logical_not(ln), "logical_not specials", problems)
    report(problems)


def test_maximum_minimum_nan():
    problems = []
    a = torch.tensor([math.nan, 1.0, math.nan, -0.0, 0.0, math.inf, -math.inf, 2.0])
    b = torch.tensor([1.0, math.nan, math.nan, 0.0, -0.0, math.nan, 5.0, 2.0])
    for name in ["maximum", "minimum"]:
        for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            compare(getattr(L, "ct_" + name)(c(a.to(dt)), c(b.to(dt))), TORCH_BINARY[name](a.to(dt), b.to(dt)),
                    f"{name}({dt})", problems)
        compare(getattr(L, "ct_" + name)(c(a), c(torch.tensor(3))), TORCH_BINARY[name](a, torch.tensor(3)),
                f"{name}(float, long 0-dim)", problems)
        # large: the threaded path
        x = rand((40000,), torch.float32, gen(16))
        y = rand((40000,), torch.float32, gen(17))
        compare(getattr(L, "ct_" + name)(c(x), c(y)), TORCH_BINARY[name](x, y), f"{name}(large)", problems)
    # the sign of maximum(-0., 0.) differs between torch's own scalar and vector
    # paths, so it is not compared
    report(problems)


# ---------------------------------------------------------------- meta device
def meta(h):
    return ct.check(L.ct_to_device(h, ct.CT_META))


def test_meta_shapes_and_errors():
    problems = []
    g = gen(18)
    for name in UNARY + TESTS:
        for dt in (torch.float32, torch.int64, torch.bool, torch.float16):
            x = rand((3, 4), dt, g).t()
            hc = getattr(L, "ct_" + name)(c(x))
            hm = getattr(L, "ct_" + name)(meta(c(x)))
            if (hc is None) != (hm is None):
                problems.append(f"meta {name}({dt}): cpu {'fails' if hc is None else 'ok'}, "
                                f"meta {'fails' if hm is None else 'ok'}: {ct.last_error()}")
            elif hc is not None:
                for f in (ct.shape, ct.strides, ct.dtype):
                    if f(hc) != f(hm):
                        problems.append(f"meta {name}({dt}): {f.__name__} cpu {f(hc)} meta {f(hm)}")
                if L.ct_device_of(hm) != ct.CT_META:
                    problems.append(f"meta {name}({dt}): result not on meta")
            ct.clear_error()
    for name in BINARY:
        for da, db in [(torch.float32, torch.int64), (torch.int32, torch.bool), (torch.float16, torch.float64),
                       (torch.int8, torch.uint8)]:
            a, b = rand((4, 1, 3), da, g), rand((5, 1), db, g)
            b = torch.ones_like(b) if db == torch.bool else torch.where(b == 0, torch.ones_like(b), b)
            hc = getattr(L, "ct_" + name)(c(a), c(b))
            hm = getattr(L, "ct_" + name)(meta(c(a)), meta(c(b)))
            if (hc is None) != (hm is None):
                problems.append(f"meta {name}({da},{db}): cpu/meta disagree: {ct.last_error()}")
            elif hc is not None:
                for f in (ct.shape, ct.strides, ct.dtype):
                    if f(hc) != f(hm):
                        problems.append(f"meta {name}: {f.__name__} cpu {f(hc)} meta {f(hm)}")
            ct.clear_error()
    # errors on meta equal CPU's
    ha, hb = meta(c(torch.ones(3))), meta(c(torch.ones(4)))
    err, _ = fails(lambda: torch.ones(3, device="meta") + torch.ones(4, device="meta"))
    expect_error(L.ct_add(ha, hb), err, "meta add([3],[4])", problems, exact=True)
    hi = meta(c(torch.arange(3)))
    err, _ = fails(lambda: torch.arange(3, device="meta").add_(torch.ones(3, device="meta")))
    expect_error(L.ct_add_(hi, meta(c(torch.ones(3)))), err, "meta add_(long, float)", problems, exact=True)
    # meta with a CPU 0-dim wrapped scalar
    hm = L.ct_mul_scalar(meta(c(torch.ones(2, 3))), 2.5)
    if hm is None or ct.shape(hm) != (2, 3) or L.ct_device_of(hm) != ct.CT_META:
        problems.append(f"meta mul_scalar: {ct.last_error()}")
    report(problems)


# ------------------------------------------------------------------ gradients
GRAD_DOMAIN = {"log": (0.1, 5), "log2": (0.1, 5), "log10": (0.1, 5), "log1p": (-0.9, 5), "sqrt": (0.1, 5),
               "rsqrt": (0.1, 5), "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "reciprocal": (0.2, 3),
               "tan": (-1.2, 1.2)}


def ct_grad_of(make, inputs, gout):
    """Runs make(handles) with requires_grad leaves, backward with gout; returns grads."""
    hs = [c(x.detach()) for x in inputs]
    hs = [ct.check(L.ct_clone(h)) for h in hs]
    for h in hs:
        ct.check_int(L.ct_set_requires_grad(h, True))
    y = ct.check(make(hs))
    ct.check_int(L.ct_backward(y, c(gout)))
    return y, [L.ct_grad(h) for h in hs]


@pytest.mark.parametrize("name", UNARY + ["gelu", "gelu_tanh", "softplus", "softplus2", "nan_to_num"])
def test_unary_gradients(name):
    g = gen(19)
    lo, hi = GRAD_DOMAIN.get(name, (-3, 3))
    x = rand((4, 5), torch.float64, g, lo, hi, special=False)
    if name in ("abs", "sign", "relu", "floor", "ceil", "round", "trunc", "frac"):
        x = torch.where(x.abs() < 0.05, torch.full_like(x, 0.3), x)
    if name == "nan_to_num":
        x[0, :3] = torch.tensor([math.nan, math.inf, -math.inf], dtype=torch.float64)
    tfs = {"gelu": lambda t: TF.gelu(t), "gelu_tanh": lambda t: TF.gelu(t, approximate="tanh"),
           "softplus": lambda t: TF.softplus(t), "softplus2": lambda t: TF.softplus(t, 2.0, 1.5),
           "nan_to_num": lambda t: torch.nan_to_num(t, 0.5, 3.0, -4.0)}
    cfs = {"gelu": lambda h: L.ct_gelu(h, b"none"), "gelu_tanh": lambda h: L.ct_gelu(h, b"tanh"),
           "softplus": lambda h: L.ct_softplus(h, 1.0, 20.0), "softplus2": lambda h: L.ct_softplus(h, 2.0, 1.5),
           "nan_to_num": lambda h: L.ct_nan_to_num(h, 0.5, 3.0, -4.0)}
    tf = tfs.get(name, TORCH_UNARY.get(name))
    cf = cfs.get(name, getattr(L, "ct_" + name, None))
    xt = x.clone().requires_grad_(True)
    yt = tf(xt.t())  # a transposed input: the gradient flows back through the view
    gout = rand(tuple(yt.shape), torch.float64, g, -1, 1, special=False)
    yt.backward(gout)
    hx = ct.check(L.ct_clone(c(x)))
    ct.check_int(L.ct_set_requires_grad(hx, True))
    y = ct.check(cf(ct.check(L.ct_transpose(hx, 0, 1))))
    ct.check_int(L.ct_backward(y, c(gout)))
    gr = L.ct_grad(hx)
    ct.assert_close(y, yt, rtol=1e-12, atol=1e-12, what=f"{name} forward: ")
    assert gr, f"{name}: no gradient ({ct.last_error()})"
    ct.assert_close(gr, xt.grad, rtol=1e-10, atol=1e-12, what=f"{name} grad: ")


GRAD_BINARY = ["add", "sub", "mul", "div", "remainder", "fmod", "pow", "atan2", "maximum", "minimum"]


@pytest.mark.parametrize("name", GRAD_BINARY + ["add_alpha", "sub_alpha", "div_trunc", "div_floor",
                                                "pow_scalar", "add_scalar", "mul_scalar", "rsub_scalar"])
def test_binary_gradients(name):
    g = gen(20)
    a = rand((3, 4), torch.float64, g, -3, 3, special=False)
    b = rand((4,), torch.float64, g, 0.5, 3, special=False)  # broadcast: summed to [4]
    if name == "pow":
        a = a.abs() + 0.2
    if name in ("maximum", "minimum"):
        a[0, :2] = b[:2]  # ties: torch splits the gradient in half
    tfs = {"add_alpha": lambda x, y: torch.add(x, y, alpha=2.5), "sub_alpha": lambda x, y: torch.sub(x, y, alpha=-1.5),
           "div_trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
           "div_floor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
           "pow_scalar": lambda x, y: torch.pow(x, 3) * y, "add_scalar": lambda x, y: (x + 2.5) * y,
           "mul_scalar": lambda x, y: (x * -1.5) * y, "rsub_scalar": lambda x, y: torch.rsub(x, 2) * y}
    cfs = {"add_alpha": lambda h: L.ct_add_alpha(h[0], h[1], 2.5), "sub_alpha": lambda h: L.ct_sub_alpha(h[0], h[1], -1.5),
           "div_trunc": lambda h: L.ct_div_mode(h[0], h[1], b"trunc"),
           "div_floor": lambda h: L.ct_div_mode(h[0], h[1], b"floor"),
           "pow_scalar": lambda h: L.ct_mul(L.ct_pow_scalar(h[0], 3.0), h[1]),
           "add_scalar": lambda h: L.ct_mul(L.ct_add_scalar(h[0], 2.5), h[1]),
           "mul_scalar": lambda h: L.ct_mul(L.ct_mul_scalar(h[0], -1.5), h[1]),
           "rsub_scalar": lambda h: L.ct_mul(L.ct_rsub_scalar(h[0], 2.0), h[1])}
    tf = tfs.get(name, TORCH_BINARY.get(name))
    cf = cfs.get(name, lambda h: getattr(L, "ct_" + name)(h[0], h[1]))
    at, bt = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
    yt = tf(at, bt)
    gout = rand(tuple(yt.shape), torch.float64, g, -1, 1, special=False)
    yt.backward(gout)
    y, grads = ct_grad_of(cf, [a, b], gout)
    ct.assert_close(y, yt, rtol=1e-12, atol=1e-12, what=f"{name} forward: ")
    for k, (gr, want) in enumerate(zip(grads, [at.grad, bt.grad])):
        if want is None:
            assert not gr or bool(torch.all(ct.to_torch(gr) == 0)), f"{name}: input {k} has a gradient"
            continue
        assert gr, f"{name}: input {k} has no gradient ({ct.last_error()})"
        ct.assert_close(gr, want, rtol=1e-10, atol=1e-12, what=f"{name} grad {k}: ")


def test_gradient_mixed_dtypes():
    """A float32 leaf times a float64 leaf: each gradient comes back in its own dtype."""
    g = gen(21)
    a = rand((3, 4), torch.float32, g, special=False)
    b = rand((4,), torch.float64, g, special=False)
    at, bt = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
    yt = at * bt
    gout = torch.ones_like(yt)
    yt.backward(gout)
    y, (ga, gb) = ct_grad_of(lambda h: L.ct_mul(h[0], h[1]), [a, b], gout)
    ct.assert_close(ga, at.grad, rtol=1.3e-6, atol=1e-5, what="mul grad a: ")
    ct.assert_close(gb, bt.grad, rtol=1e-7, atol=1e-7, what="mul grad b: ")


def test_grad_fn_names():
    x = ct.check(L.ct_clone(c(torch.rand(3, dtype=torch.float64) + 0.5)))
    ct.check_int(L.ct_set_requires_grad(x, True))
    xt = (torch.rand(3, dtype=torch.float64) + 0.5).requires_grad_(True)
    problems = []
    for name in UNARY:
        want = TORCH_UNARY[name](xt).grad_fn
        got = L.ct_grad_fn_name(ct.check(getattr(L, "ct_" + name)(x)))
        want = type(want).__name__ if want is not None else None
        if (got.decode() if got else None) != want:
            problems.append(f"{name}: {got} vs {want}")
    for name in GRAD_BINARY:
        want = type(TORCH_BINARY[name](xt, xt).grad_fn).__name__
        got = L.ct_grad_fn_name(ct.check(getattr(L, "ct_" + name)(x, x)))
        if (got.decode() if got else None) != want:
            problems.append(f"{name}: {got} vs {want}")
    report(problems)


def test_relu_gradient_nan_and_create_graph():
    """relu's backward is torch's threshold_backward: a NaN input lets the gradient
    through, a NaN gradient at x <= 0 gives 0; with create_graph its result has
    ThresholdBackwardBackward0 as history and differentiates again."""
    x = torch.tensor([math.nan, -1.0, 2.0, 0.0, math.nan, -0.0], dtype=torch.float64)
    g = torch.tensor([1.0, math.nan, 3.0, 4.0, math.nan, 5.0], dtype=torch.float64)
    xt, gt = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    (gx,) = torch.autograd.grad(torch.relu(xt), xt, gt, create_graph=True)
    v = torch.linspace(-1, 1, 6, dtype=torch.float64)
    (gg,) = torch.autograd.grad(gx, gt, v)
    hx, hg = c(x), c(g)
    L.ct_set_requires_grad(hx, True)
    L.ct_set_requires_grad(hg, True)
    out = (c_void_p * 1)()
    y = ct.check(L.ct_relu(hx))
    ct.check_int(L.ct_autograd_grad((c_void_p * 1)(y), (c_void_p * 1)(hg), 1, (c_void_p * 1)(hx), 1, out,
                                    False, True, False))
    ct.assert_close(out[0], gx.detach(), rtol=0, atol=0, what="relu grad: ")
    assert L.ct_grad_fn_name(out[0]).decode() == type(gx.grad_fn).__name__
    out2 = (c_void_p * 1)()
    ct.check_int(L.ct_autograd_grad((c_void_p * 1)(out[0]), (c_void_p * 1)(c(v)), 1, (c_void_p * 1)(hg), 1, out2,
                                    False, False, False))
    ct.assert_close(out2[0], gg, rtol=0, atol=0, what="relu grad of grad: ")


@pytest.mark.parametrize("name", ["abs", "relu", "sign", "sqrt", "pow0", "pow_base0", "maximum", "minimum",
                                  "remainder", "fmod", "atan2", "nan_to_num", "round", "frac"])
def test_gradients_at_special_points(name):
    """Gradients where the function has a kink or a singularity: torch's conventions."""
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.5, -0.5], dtype=torch.float64)
    y = torch.tensor([0.0, 1.0, 1.0, -1.0, 2.5, 2.0, -0.5, 3.0], dtype=torch.float64)
    tfs = {"pow0": lambda a, b: torch.pow(a, 0.0), "pow_base0": lambda a, b: torch.pow(a.abs(), b)}
    cfs = {"pow0": lambda h: L.ct_pow_scalar(h[0], 0.0),
           "pow_base0": lambda h: L.ct_pow(L.ct_abs(h[0]), h[1])}
    binary = name in GRAD_BINARY or name == "pow_base0"
    if name in TORCH_UNARY:
        tf, cf = (lambda a, b: TORCH_UNARY[name](a)), (lambda h: getattr(L, "ct_" + name)(h[0]))
    elif name == "nan_to_num":
        x[2:5] = torch.tensor([math.nan, math.inf, -math.inf], dtype=torch.float64)
        tf, cf = (lambda a, b: torch.nan_to_num(a)), (lambda h: L.ct_nan_to_num(h[0], math.nan, math.nan, math.nan))
    elif name in tfs:
        tf, cf = tfs[name], cfs[name]
    else:
        tf, cf = TORCH_BINARY[name], (lambda h: getattr(L, "ct_" + name)(h[0], h[1]))
    at, bt = x.clone().requires_grad_(True), y.clone().requires_grad_(True)
    yt = tf(at, bt)
    gout = torch.linspace(-1, 1, yt.numel(), dtype=torch.float64).view(yt.shape)
    yt.backward(gout)
    res, grads = ct_grad_of(cf, [x, y], gout)
    ct.assert_close(res, yt, rtol=1e-12, atol=1e-12, what=f"{name} forward: ")
    wants = [at.grad, bt.grad]
    for k in range(2 if binary else 1):
        if wants[k] is None:
            assert not grads[k] or bool(torch.all(ct.to_torch(grads[k]) == 0)), f"{name}: input {k} has a gradient"
            continue
        assert grads[k], f"{name}: input {k} has no gradient ({ct.last_error()})"
        ct.assert_close(grads[k], wants[k], rtol=1e-10, atol=1e-12, what=f"{name} grad {k}: ")


@pytest.mark.parametrize("name", ["tanh", "floor", "add", "div", "pow", "maximum", "lt", "bitwise_xor"])
def test_threaded_large(name, two_threads):
    """> 32K elements with at least 2 threads: each thread's range starts mid-row
    (contiguous, transposed, broadcast, mixed-dtype and in-place operands)."""
    problems = []
    g = gen(30)
    dts = (torch.int32,) if name == "bitwise_xor" else (torch.bfloat16, torch.int16)
    for dt in dts:
        a = rand((301, 137), dt, g)
        b = rand((137,), torch.float64 if dt in FLOATS else torch.int8, g)
        if name in ("div", "remainder") and b.dtype not in FLOATS:
            b = torch.where(b == 0, torch.ones_like(b), b)
        if name == "pow" and dt not in FLOATS:
            a, b = torch.remainder(a, 4), torch.remainder(b, 3)
        if name in UNARY + TESTS:
            for k, x in {"contig": a, "t": a.t(), "step": rand((603, 275), dt, g)[::2, ::2]}.items():
                err, want = fails(lambda: TORCH_UNARY[name](x))
                if err is None:
                    compare(getattr(L, "ct_" + name)(c(x)), want, f"{name}({dt}, {k})", problems, layout=True)
            continue
        tf, fn = TORCH_BINARY[name], getattr(L, "ct_" + name)
        for k, (x, y) in {"contig": (a, b), "t": (a.t(), b[:, None]),
                          "bcast": (a[:, :1], b[None])}.items():
            err, want = fails(lambda: tf(x, y))
            if err is None:
                compare(fn(c(x), c(y)), want, f"{name}({dt}, {k})", problems, layout=True)
        ac = a.clone()
        err, _ = fails(lambda: torch_inplace(name, ac, b))
        if err is None:
            ha = c(a)
            if getattr(L, "ct_" + name + "_")(ha, c(b)) != 0:
                problems.append(f"{name}_({dt}): {ct.last_error()}")
                ct.clear_error()
            else:
                compare(ha, ac, f"{name}_({dt})", problems)
    report(problems)


def test_device_mismatch_meta_first():
    hm = meta(c(torch.ones(3)))
    err, _ = fails(lambda: torch.ones(3, device="meta") + torch.ones(3))
    ct.assert_error(L.ct_add(hm, c(torch.ones(3))), err)


def test_device_mismatch_cpu_first():
    hm = meta(c(torch.ones(3)))
    err, _ = fails(lambda: torch.ones(3) + torch.ones(3, device="meta"))
    ct.assert_error(L.ct_add(c(torch.ones(3)), hm), err)


def test_cpu_zero_dim_with_meta():
    hm = meta(c(torch.ones(3)))
    h = L.ct_add(hm, c(torch.tensor(2.0)))
    assert h, ct.last_error()
    assert L.ct_device_of(h) == ct.CT_META and ct.shape(h) == (3,)


def test_inplace_autograd():
    """In-place forms under autograd: a leaf that requires grad refuses them; on a
    non-leaf they are recorded (and their saved result used by the backward)."""
    x = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    hx = ct.check(L.ct_clone(c(x)))
    ct.check_int(L.ct_set_requires_grad(hx, True))
    xt = x.clone().requires_grad_(True)
    err, _ = fails(lambda: xt.sin_())
    ct.assert_error(L.ct_sin_(hx), err)
    for name in ["sin", "exp", "tanh", "sigmoid", "sqrt"]:
        xt = x.clone().requires_grad_(True)
        yt = xt * 2
        getattr(yt, name + "_")()
        (yt * yt).sum().backward()
        hx = ct.check(L.ct_clone(c(x)))
        ct.check_int(L.ct_set_requires_grad(hx, True))
        hy = ct.check(L.ct_mul_scalar(hx, 2.0))
        ct.check_int(getattr(L, "ct_" + name + "_")(hy))
        assert L.ct_grad_fn_name(hy).decode() == type(yt.grad_fn).__name__
        ct.check_int(L.ct_backward(ct.check(L.ct_sum(ct.check(L.ct_mul(hy, hy)))), None))
        ct.assert_close(L.ct_grad(hx), xt.grad, rtol=1e-12, atol=1e-12, what=f"{name}_ grad: ")


def test_rsub_bool_message():
    b = torch.tensor([True, False])
    err, _ = fails(lambda: torch.rsub(b, 2))
    ct.assert_error(L.ct_rsub_scalar(c(b), 2.0), err)


def test_div_empty_rounding_mode():
    x = torch.ones(3)
    err, _ = fails(lambda: torch.div(x, x, rounding_mode=""))
    ct.assert_error(L.ct_div_mode(c(x), c(x), b""), err)


def test_pow_scalar_grads():
    """pow(x, e)'s gradient is torch's pow_backward of a Scalar, g (e x^(e-1)),
    x^(e-1) again a pow(Tensor, Scalar) (x x for e = 3): first and second
    order, x with zeros and negatives, float64 and float32."""
    g = torch.Generator().manual_seed(11)
    for dt in (torch.float64, torch.float32):
        x = torch.randn(200, generator=g, dtype=dt) * 2
        x[:5] = torch.tensor([0.0, -0.0, 1.0, -1.0, 0.5], dtype=dt)
        for e in (0.0, 1.0, 2.0, 3.0, -1.0, -2.0, 0.5, 2.5, 4.0):
            v = torch.randn(200, generator=g, dtype=dt)
            tx = x.clone().requires_grad_(True)
            (tg,) = torch.autograd.grad(torch.pow(tx, e), tx, v, create_graph=True)
            hx = ct.leaf(x)
            (cg,) = ct.grads_of(ct.check(L.ct_pow_scalar(hx, e)), [hx], v)
            tol = dict(rtol=1e-12, atol=1e-12) if dt == torch.float64 else dict(rtol=1e-5, atol=1e-5)
            ct.assert_close(cg, tg.detach(), what=f"d pow(x, {e}) {dt}: ", **tol)
            if e in (0.0, 2.5, 0.5) or dt != torch.float64:
                continue  # second order where x^(e-2) stays finite at the zeros (of 0: none in torch)
            w = torch.randn(200, generator=g, dtype=dt)
            (tgg,) = torch.autograd.grad(tg, tx, w)
            (cgg,) = ct.grads_of(cg, [hx], w)
            ct.assert_close(cgg, tgg, what=f"d2 pow(x, {e}): ", **tol)


ACTS = {  # name: (ctorch of a handle, torch of a tensor)
    "gelu": (lambda h: L.ct_gelu(h, None), TF.gelu), "silu": (lambda h: L.ct_silu(h), TF.silu),
    "softplus": (lambda h: L.ct_softplus(h, 1.0, 20.0), TF.softplus),
    "softplus(2, 5)": (lambda h: L.ct_softplus(h, 2.0, 5.0), lambda t: TF.softplus(t, 2.0, 5.0)),
}


@pytest.mark.parametrize("act", list(ACTS))
def test_activation_grads(act):
    """gelu's, silu's and softplus's gradients: the fused first-order kernels
    (computed in float32 for 16-bit, rounded once, as torch's backward kernels)
    and the composite ones under create_graph; values across softplus's
    threshold, zeros and infinities."""
    cf, tf = ACTS[act]
    g = torch.Generator().manual_seed(12)
    for dt in (torch.float64, torch.float32, torch.bfloat16):  # (torch 1.13 has no float16 gelu on the CPU)
        x = (torch.randn(40, 70, generator=g) * 6).to(dt).t()  # non-contiguous
        x[0, :5] = torch.tensor([0.0, float("inf"), -float("inf"), 30.0, -90.0]).to(dt)
        v = torch.randn(70, 40, generator=g).to(dt)
        tx = x.clone().requires_grad_(True)
        (want,) = torch.autograd.grad(tf(tx), tx, v)
        tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2}[dt]
        for cg in (False, True):
            hx = ct.leaf(x)
            (got,) = ct.grads_of(ct.check(cf(hx)), [hx], v, create_graph=cg)
            ct.assert_close(got, want, rtol=tol, atol=tol, what=f"{act} grad {dt} create_graph={cg}: ")


def test_gelu_grads():
    """gelu's second order (through the composite gradient)"""
    g = torch.Generator().manual_seed(12)
    x = torch.randn(50, generator=g, dtype=torch.float64)
    tx = x.clone().requires_grad_(True)
    v, w = torch.randn(50, generator=g, dtype=torch.float64), torch.randn(50, generator=g, dtype=torch.float64)
    (tg,) = torch.autograd.grad(TF.gelu(tx), tx, v, create_graph=True)
    (tgg,) = torch.autograd.grad(tg, tx, w)
    hx = ct.leaf(x)
    (cg,) = ct.grads_of(ct.check(L.ct_gelu(hx, None)), [hx], v)
    (cgg,) = ct.grads_of(cg, [hx], w)
    ct.assert_close(cgg, tgg, rtol=1e-12, atol=1e-12, what="gelu second order: ")


ct.declare("ct_pow_scalar", T, [T, c_double])
ct.declare("ct_bitwise_and_scalar", T, [T, c_double])
ct.declare("ct_add_scalar", T, [T, c_double])


def test_pow_by_a_number_keeps_the_exponent_in_double():
    """torch's pow(Tensor, Scalar) of float32 (and of integers, whose result is
    float32) runs fewer than 16 elements through std::pow(float, double): the
    exponent is not rounded to float there (its vector loop rounds it)"""
    cases = [(torch.tensor([0.0, 2.0]), 1e-320), (torch.tensor([12], dtype=torch.int8), 13.226909360216716),
             (torch.tensor([4.2529]), 4.4709), (torch.tensor([31], dtype=torch.int16), 17.616812345),
             (torch.tensor([-2.0, 2.0, -0.0, 3.0, -8.0]), 3.0000001), (torch.tensor([1.5, -1.5]), 2.0 ** 54)]
    for x, e in cases:
        want = torch.pow(x, e)
        got = ct.check(ct.lib.ct_pow_scalar(ct.from_torch(x), e))
        ct.assert_close(got, want, rtol=1.2e-7, atol=0, what=f"{x.tolist()} ** {e}: ")  # 1 ulp


def test_signs_of_zero_as_torch():
    """tanh(-0) is -0 in every float dtype; maximum / minimum of -0 and 0 give the first
    (torch's std::max / std::min)"""
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        z = torch.tensor([-0.0, 0.0]).to(dt)
        assert ct.to_torch(ct.check(ct.lib.ct_tanh(ct.from_torch(z)))).signbit().tolist() == [True, False], dt
        a, b = torch.tensor([-0.0, 0.0, 1.0]).to(dt), torch.tensor([0.0, -0.0, 1.0]).to(dt)
        for name in ("maximum", "minimum"):
            want = getattr(torch, name)(a, b) if dt != torch.float16 else getattr(torch, name)(a.float(), b.float())
            got = ct.to_torch(ct.check(getattr(ct.lib, "ct_" + name)(ct.from_torch(a), ct.from_torch(b))))
            assert got.signbit().tolist() == want.signbit().tolist(), (name, dt)


def test_integral_numbers_up_to_int64s_range_are_ints():
    x = torch.tensor([1, 2], dtype=torch.int64)
    for v in (9.2e18, 9.22e18, -2.0 ** 63):
        ct.assert_close(ct.check(ct.lib.ct_bitwise_and_scalar(ct.from_torch(x), v)), torch.bitwise_and(x, int(v)))
        x8 = x.to(torch.int8)
        ct.assert_close(ct.check(ct.lib.ct_add_scalar(ct.from_torch(x8), v)), torch.add(x8, int(v)))
