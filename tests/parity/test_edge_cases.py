"""Edge cases found by differential fuzzing against torch 1.13: each test pins
one general rule (torch's answer on the case is the expected value)."""
import math
import random
from ctypes import c_bool, c_double, c_int, c_int64, c_void_p

import pytest

torch = pytest.importorskip("torch")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import CT, I64P, INTP, T, TP, i32, i64, lib  # noqa: E402

for _row in [("ct_roll", T, [CT, I64P, c_int, INTP, c_int]), ("ct_unbind", c_int, [CT, c_int, TP, c_int]), ("ct_unflatten", T, [CT, c_int, I64P, c_int]),
             ("ct_topk", c_int, [CT, c_int64, c_int, c_bool, c_bool, TP, TP]),
             ("ct_lerp", T, [CT, CT, CT]), ("ct_lerp_scalar", T, [CT, CT, c_double]),
             ("ct_max_dim", c_int, [CT, c_int, c_bool, TP, TP]), ("ct_max", T, [CT]), ("ct_min", T, [CT]),
             ("ct_backward", c_int, [T, T]), ("ct_grad", T, [T]), ("ct_masked_select", T, [CT, CT]),
             ("ct_pad", T, [CT, I64P, c_int, c_double]), ("ct_index_add", T, [CT, c_int, CT, CT, c_double]),
             ("ct_arange", T, [c_double, c_double, c_double, c_int]), ("ct_one_hot", T, [CT, c_int64]),
             ("ct_embedding", T, [CT, CT, c_int64]), ("ct_randint", T, [c_int64, c_int64, I64P, c_int, c_int]),
             ("ct_randperm", T, [c_int64, c_int]), ("ct_norm", T, [CT, c_double, INTP, c_int, c_bool]),
             ("ct_sum_dims", T, [CT, INTP, c_int, c_bool]), ("ct_amax", T, [CT, INTP, c_int, c_bool]),
             ("ct_softmax", T, [CT, c_int]), ("ct_log_softmax", T, [CT, c_int])]:  # run alone, undeclared handles were truncated
    ct.declare(*_row)

F64 = torch.float64
F = torch.nn.functional


def h(t):
    return ct.from_torch(t)


def test_zero_dim_roll_and_unflatten_are_errors():
    x = torch.tensor(3.5)
    for fn, want in [(lambda: lib.ct_roll(h(x), i64([1]), 1, i32([0]), 1), lambda: torch.roll(x, 1, 0)),
                     (lambda: lib.ct_unflatten(h(x), 0, i64([1]), 1), lambda: x.unflatten(0, (1,)))]:
        with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no dimensions"):
            want()
        ct.clear_error()
        assert not fn()
        assert "Dimension specified as 0 but tensor has no dimensions" in ct.last_error()
    ct.assert_close(ct.check(lib.ct_roll(h(x), i64([1]), 1, None, 0)), torch.roll(x, 1))


def test_roll_of_an_empty_tensor_keeps_its_layout():
    """torch's roll along dims returns an empty input's clone(preserve_format);
    without dims it rolls a contiguous flattening"""
    x = torch.zeros(2, 3, 0, 4).permute(2, 0, 3, 1)
    for shifts, dims in (([1], [0]), ([1, 2], [1, 3]), ([3], [])):
        ct.assert_same_outcome(lambda: lib.ct_roll(h(x), i64(shifts), len(shifts), i32(dims), len(dims)),
                               lambda: torch.roll(x, shifts, dims), f"roll {shifts} {dims}: ",
                               compare=lambda got, want: ct.assert_same_layout(got, want))


def test_zero_dim_unbind_and_unflatten_wrap_the_dim_first():
    """a 0-dim tensor's dim is wrapped into [-1, 0] before "no dimensions" is said"""
    x = torch.tensor(3.5)
    out = (c_void_p * 4)()
    for d in (-2, -1, 0, 1, 2):
        ct.assert_same_outcome(lambda: lib.ct_unflatten(h(x), d, i64([1]), 1), lambda: x.unflatten(d, (1,)),
                               f"unflatten(0-dim, {d}): ")
        ct.assert_same_outcome(lambda: lib.ct_unbind(h(x), d, out, 4), lambda: x.unbind(d), f"unbind(0-dim, {d}): ")


@pytest.mark.parametrize("k", [0, 1])
def test_topk_of_zero_dim(k):
    x = torch.tensor(5.0)
    want = torch.topk(x, k)
    v, i = (c_void_p * 1)(), (c_void_p * 1)()
    ct.check_int(lib.ct_topk(h(x), k, 0, True, True, v, i))
    ct.assert_close(v[0], want.values)
    ct.assert_close(i[0], want.indices)


def test_linspace_one_step_and_integer_ends():
    for a, b, n, dt in [(0, 1, 1, torch.float32), (-1, 1, 7, torch.uint8), (-1, 1, 7, torch.int8),
                        (2.7, 9.2, 5, torch.int64), (-5, 5, 11, torch.int32), (3, -2, 1, F64)]:
        got = ct.check(lib.ct_linspace(a, b, n, ct.ct_dtype_of_torch(dt)))
        ct.assert_close(got, torch.linspace(a, b, n, dtype=dt), what=f"linspace({a}, {b}, {n}, {dt}): ")


def test_linspace_and_arange_bit_for_bit_as_torch():
    """torch 1.13's kernels (AVX2, one chunk below 32768 elements): pairs of vectors,
    each lane base + k * step from a base at the vector's first index (linspace's
    first half from start, the rest from end), the last n % (2 W) elements one by
    one; a * b + c fused in float and double; 16-bit values in c10::Half's steps"""
    g = random.Random(7)
    dts = [torch.float32, F64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.int8, torch.int16]
    for _ in range(600):
        dt, n = g.choice(dts), g.choice([2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 100, 257, 1000])
        a, b = (g.uniform(-100, 100), g.uniform(-100, 100)) if dt.is_floating_point else (g.randint(-50, 50),
                                                                                        g.randint(-50, 50))
        got = ct.to_torch(ct.check(lib.ct_linspace(float(a), float(b), n, ct.ct_dtype_of_torch(dt))))
        want = torch.linspace(a, b, n, dtype=dt)
        assert torch.equal(got, want), f"linspace({a}, {b}, {n}, {dt}) at {(got != want).nonzero().flatten()[:5]}"
        if dt.is_floating_point:
            st = g.choice([0.1, 0.3, 1.7, -0.1, -2.5, 0.01])
            got = ct.to_torch(ct.check(lib.ct_arange(a, a + st * n, st, ct.ct_dtype_of_torch(dt))))
            want = torch.arange(a, a + st * n, st, dtype=dt)
            assert got.shape == want.shape and torch.equal(got, want), f"arange({a}, {a + st * n}, {st}, {dt})"
    for n in (0, 1):  # bool: torch's kernel runs from 2 steps on
        ct.assert_same_outcome(lambda: lib.ct_linspace(1.0, 0.0, n, ct.CT_BOOL),
                               lambda: torch.linspace(1, 0, n, dtype=torch.bool), f"bool linspace {n}: ",
                               compare=lambda got, want: ct.assert_close(got, want))
    ct.assert_same_outcome(lambda: lib.ct_linspace(1.0, 0.0, 2, ct.CT_BOOL),
                           lambda: torch.linspace(1, 0, 2, dtype=torch.bool))


def test_arange_integer_and_16bit_dtypes():
    """torch takes an integer arange's start, end and step as int64 (a step of 2.5
    steps by 2, one of 0.7 is zero: an error), its size from the doubles but for
    int64; bool has no arange"""
    dts = [torch.int64, torch.int32, torch.int16, torch.uint8, torch.float16, torch.bfloat16, torch.float32, F64]
    cases = [(-5, 5, 2.5), (0, 5, 0.7), (0, 5, 1.7), (0.5, 5, 1), (5.9, -3.2, -1.5), (0, 1, 0.1), (-3.5, 3.5, 0.5),
             (0, 0, 1), (1, 0, 1), (0, 200, 3.3), (0.2, 0.9, 1), (-0.9, 2, 1)]
    for a, b, st in cases:
        for dt in dts + [torch.bool]:
            what = f"arange({a}, {b}, {st}, {dt})"
            err = ct.torch_error(lambda: torch.arange(a, b, st, dtype=dt))
            got = lib.ct_arange(a, b, st, ct.ct_dtype_of_torch(dt))
            if err is not None:
                ct.assert_error(got, err, what=what + ": ")
            else:
                # torch rounds float values twice (per vector: a base, then steps from it)
                tol = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 2.4e-7, F64: 4.5e-16}.get(dt, 0)
                ct.assert_close(ct.check(got), torch.arange(a, b, st, dtype=dt), rtol=tol, atol=tol, what=what + ": ")


@pytest.mark.parametrize("w", [-1.0, -0.7, -0.3, 0.3, 0.5, 0.7, 1.5])
def test_lerp_weight_branches(w):
    a = torch.tensor([0.0, 1.0, -2.0])
    b = torch.tensor([float("inf"), 1e38, 5.0])
    ct.assert_close(ct.check(lib.ct_lerp_scalar(h(a), h(b), w)), torch.lerp(a, b, w), rtol=1e-6, atol=0,
                    what=f"lerp {w}: ")  # torch's vector lerp fuses a multiply-add: an ulp
    wt = torch.full((3,), w)
    ct.assert_close(ct.check(lib.ct_lerp(h(a), h(b), h(wt))), torch.lerp(a, b, wt), rtol=1e-6, atol=0,
                    what=f"lerp tensor {w}: ")


def test_float_to_int_conversions_out_of_range():
    vals = [float("nan"), float("inf"), -float("inf"), 1e10, -1e10, 3e9, -3e9, 2147483647.0, -2147483648.0,
            2147483648.0, 300.7, -1.5, 65537.9, -129.0, 1e19, -1e19, 9.3e18]
    for src in (torch.float32, F64, torch.float16, torch.bfloat16):
        x = torch.tensor(vals, dtype=F64).to(src)
        for dst in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool):
            got = ct.check(lib.ct_to_dtype(h(x), ct.ct_dtype_of_torch(dst)))
            ct.assert_close(got, x.to(dst), what=f"{src} -> {dst}: ")


def test_max_backward_is_zero_off_the_selection():
    """max/max_dim scatter or fill the gradient: an inf or NaN gradient stays at
    the selected elements (a product with a 0/1 mask would spread NaN)."""
    x = torch.tensor([[1.0, 3.0], [2.0, -1.0]], dtype=F64)
    g = torch.tensor([float("nan"), float("inf")], dtype=F64)
    xt = x.clone().requires_grad_(True)
    torch.max(xt, 0).values.backward(g)
    hx = h(x)
    lib.ct_set_requires_grad(hx, True)
    v, i = (c_void_p * 1)(), (c_void_p * 1)()
    ct.check_int(lib.ct_max_dim(hx, 0, False, v, i))
    ct.check_int(lib.ct_backward(v[0], h(g)))
    ct.assert_close(lib.ct_grad(hx), xt.grad, what="max_dim: ")
    for name, tf in (("ct_max", torch.max), ("ct_min", torch.min)):
        xt = x.clone().requires_grad_(True)
        tf(xt).backward(torch.tensor(float("inf"), dtype=F64))
        hx = h(x)
        lib.ct_set_requires_grad(hx, True)
        ct.check_int(lib.ct_backward(ct.check(getattr(lib, name)(hx)), h(torch.tensor(float("inf"), dtype=F64))))
        ct.assert_close(lib.ct_grad(hx), xt.grad, what=f"{name}: ")


ct.declare("ct_hardtanh", T, [CT, c_double, c_double])
ct.declare("ct_relu6", T, [CT])
ct.declare("ct_leaky_relu", T, [CT, c_double])
ct.declare("ct_elu", T, [CT, c_double])
ACTS = [("hardtanh(2, 1)", lambda x: lib.ct_hardtanh(x, 2.0, 1.0), lambda t: torch.nn.functional.hardtanh(t, 2.0, 1.0)),
        ("hardtanh(-1, 1)", lambda x: lib.ct_hardtanh(x, -1.0, 1.0), torch.nn.functional.hardtanh),
        ("relu6", lambda x: lib.ct_relu6(x), torch.nn.functional.relu6),
        ("leaky_relu", lambda x: lib.ct_leaky_relu(x, 0.01), torch.nn.functional.leaky_relu),
        ("elu", lambda x: lib.ct_elu(x, 1.0), torch.nn.functional.elu)]
ACTS += [(f"hardtanh({lo}, {hi})", lambda x, lo=lo, hi=hi: lib.ct_hardtanh(x, lo, hi),
          lambda t, lo=lo, hi=hi: torch.nn.functional.hardtanh(t, lo, hi))  # bounds as int64 first
         for lo, hi in [(-math.inf, 1.0), (-1.0, math.inf), (-1e30, 2.0), (-1.5, 2.5), (-300.0, 2.0)]]


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, torch.float32, torch.bool], ids=str)
def test_activation_dtypes(dtype):
    """hardtanh/relu6 keep integer dtypes and clamp in torch's order (min > max
    gives max); leaky_relu and elu refuse integers; bool is refused by all."""
    x = torch.tensor([-3, 2, 9, 0]).to(dtype) if dtype != torch.float32 else torch.tensor([0.5, 3.0, float("nan"), -2.0])
    for name, cf, tf in ACTS:
        try:
            want, err = tf(x), None
        except RuntimeError as e:
            want, err = None, str(e)
        ct.clear_error()
        got = cf(h(x))
        if err is not None:
            assert not got, f"{name}({dtype}): torch raises {err!r}"
            assert err.split(" ")[0].strip('"') in ct.last_error(), f"{name}: {ct.last_error()} vs {err}"
        else:
            ct.assert_close(ct.check(got), want, what=f"{name}({dtype}): ")


ct.declare("ct_cross_entropy", T, [CT, CT, CT, c_int, c_int64, c_double])


@pytest.mark.parametrize("shape,tshape", [((2, 4, 1), (2, 1)), ((2, 4, 1, 1), (2, 1, 1)), ((0, 4, 1), (0, 1)),
                                          ((3, 4, 1, 2), (3, 1, 2))], ids=str)
def test_cross_entropy_grad_with_size1_spatial_dims(shape, tshape):
    g = torch.Generator().manual_seed(5)
    x, t = torch.randn(*shape, generator=g, dtype=F64), torch.randint(0, 4, tshape, generator=g)
    xt = x.clone().requires_grad_(True)
    torch.nn.functional.cross_entropy(xt, t).backward()
    hx = h(x)
    lib.ct_set_requires_grad(hx, True)
    ct.check_int(lib.ct_backward(ct.check(lib.ct_cross_entropy(hx, h(t), None, 1, -100, 0.0)), None))
    ct.assert_close(lib.ct_grad(hx), xt.grad, rtol=1e-12, atol=1e-12)


ct.declare("ct_clamp", T, [CT, c_double, c_double])
ct.declare("ct_clamp_", c_int, [T, c_double, c_double])
ct.declare("ct_masked_fill", T, [CT, CT, c_double])
ct.declare("ct_full", T, [I64P, c_int, c_double, c_int])
NAN = float("nan")


def test_clamp_promotes_bool_and_checks_bounds():
    """C doubles that are integral count as Python ints (the header's rule)."""
    b = torch.tensor([True, False])
    ct.assert_close(ct.check(lib.ct_clamp(h(b), 0, 1)), torch.clamp(b, 0, 1))
    ct.assert_close(ct.check(lib.ct_clamp(h(b), 0.5, NAN)), torch.clamp(b, 0.5))
    assert lib.ct_clamp_(h(b), 0, 1) == -1 and "can't be cast" in ct.last_error()
    u = torch.tensor([3, 200], dtype=torch.uint8)
    ct.assert_close(ct.check(lib.ct_clamp(h(u), 5, 100)), torch.clamp(u, 5, 100))
    ct.clear_error()
    assert not lib.ct_clamp(h(u), -300, NAN)
    assert "value cannot be converted to type uint8_t without overflow" in ct.last_error()


def test_scalar_arguments_that_do_not_fit_are_errors():
    m = h(torch.tensor([True, False, True]))
    for make, dt, v in [(lambda v: lib.ct_masked_fill(h(torch.zeros(3, dtype=torch.uint8)), m, v), "uint8_t", 300.0),
                        (lambda v: lib.ct_masked_fill(h(torch.zeros(3, dtype=torch.int32)), m, v), "int", NAN),
                        (lambda v: lib.ct_full(i64([2]), 1, v, ct.CT_UINT8), "uint8_t", 300.0),
                        (lambda v: lib.ct_full(i64([2]), 1, v, ct.CT_INT8), "int8_t", -129.0)]:
        ct.clear_error()
        assert not make(v)
        assert f"value cannot be converted to type {dt} without overflow" in ct.last_error()
    ct.assert_close(ct.check(lib.ct_masked_fill(h(torch.zeros(3, dtype=torch.uint8)), m, 255.0)),
                    torch.zeros(3, dtype=torch.uint8).masked_fill(torch.tensor([True, False, True]), 255))



def test_bfloat16_values_past_its_max_are_errors():
    """bfloat16's own max (3.3895e38), not float32's, bounds a value, as torch's
    checked_convert: full, fill_, masked_fill, clamp and pad refuse 3.396e38"""
    bf, m = torch.ones(2, dtype=torch.bfloat16), torch.tensor([True, False])
    for v in (3.3895313892515355e38, 3.3961775292304956e38, 3.4028234663852886e38, -3.3961775292304956e38):
        calls = [("full", lambda: torch.full((2,), v, dtype=torch.bfloat16),
                  lambda: lib.ct_full(i64([2]), 1, v, ct.CT_BFLOAT16)),
                 ("masked_fill", lambda: bf.masked_fill(m, v), lambda: lib.ct_masked_fill(h(bf), h(m), v)),
                 ("clamp", lambda: bf.clamp(max=v), lambda: lib.ct_clamp(h(bf), NAN, v)),
                 ("pad", lambda: F.pad(bf, (1, 0), value=v), lambda: lib.ct_pad(h(bf), i64([1, 0]), 2, v))]
        for name, tf, cf in calls:
            err = ct.torch_error(tf)
            if err is None:
                ct.assert_close(ct.check(cf()), tf(), what=f"{name} {v}: ")
            else:
                ct.clear_error()
                ct.assert_error(cf(), err, what=f"{name} {v}: ")
        t, ht = bf.clone(), h(bf.clone())
        err = ct.torch_error(lambda: t.fill_(v))
        rc = lib.ct_fill_(ht, v)
        assert (rc == 0) == (err is None), f"fill_ {v}: {rc} {err}"


def test_pad_checks_its_value_only_when_it_pads():
    """torch checks the value where it fills: not for a copy or a crop (all pads
    <= 0), and after the output's shape (its message first)"""
    x = torch.ones(3, 4)
    for p, v in [((0, 0), 1e39), ((-1, 0), 1e39), ((-1, -1, 0, -2), -1e39), ((0, 0), NAN), ((1, 0), 1e39),
                 ((-3, -2), 1e39), ((2, -7), 1e39), ((0, 0, 0, 0), 1e39)]:
        for dt in (torch.float32, torch.float16, torch.bfloat16, torch.uint8):
            xt = x.to(dt)
            what = f"pad {dt} {p} value {v}"
            err = ct.torch_error(lambda: F.pad(xt, p, value=v))
            got = lib.ct_pad(h(xt), i64(p), len(p), v)
            if err is None:
                ct.assert_close(ct.check(got), F.pad(xt, p, value=v), what=what + ": ")
            else:
                ct.assert_error(got, err, what=what + ": ")


ct.declare("ct_scatter_", c_int, [T, c_int, CT, CT])
ct.declare("ct_scatter_add_", c_int, [T, c_int, CT, CT])
ct.declare("ct_floor_", c_int, [T])
ct.declare("ct_round_", c_int, [T])


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32], ids=str)
def test_inplace_into_expanded_tensors_is_an_error(dtype):
    idx, src = torch.tensor([[0], [1], [2]]), torch.ones(3, 1, dtype=dtype)
    calls = [("floor_", lambda t: t.floor_(), lambda e: lib.ct_floor_(e)),
             ("round_", lambda t: t.round_(), lambda e: lib.ct_round_(e)),
             ("scatter_", lambda t: t.scatter_(1, idx, src), lambda e: lib.ct_scatter_(e, 1, h(idx), h(src))),
             ("scatter_add_", lambda t: t.scatter_add_(1, idx, src), lambda e: lib.ct_scatter_add_(e, 1, h(idx), h(src)))]
    for name, tf, cf in calls:
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            tf(torch.zeros(3, 1, dtype=dtype).expand(3, 4))
        e = ct.check(lib.ct_expand(h(torch.zeros(3, 1, dtype=dtype)), i64([3, 4]), 2))
        ct.clear_error()
        assert cf(e) == -1, name
        assert "more than one element of the written-to tensor" in ct.last_error(), name


def test_masked_select_byte_mask_values_and_scalar_overflow():
    """a uint8 mask of masked_select holds 0 and 1 only; pad's value and
    index_add's alpha must fit the dtype (pad's, a float, never wraps into uint8)"""
    x = torch.arange(6.0).view(2, 3)
    for m in ([[1, 0, 1], [0, 1, 1]], [[2, 0, 1], [0, 1, 1]], [[0, 0, 0], [0, 0, 255]]):
        mt = torch.tensor(m, dtype=torch.uint8)
        err = ct.torch_error(lambda: x.masked_select(mt))
        got = lib.ct_masked_select(ct.from_torch(x), ct.from_torch(mt))
        if err is None:
            ct.assert_close(ct.check(got), x.masked_select(mt))
        else:
            ct.assert_error(got, err, what=f"masked_select {m}: ")
    for dt in (torch.uint8, torch.int8, torch.int32, torch.float16):
        z = torch.zeros(2, 2, dtype=dt)
        for v in (-3.0, -1.0, 2.5, 127.0, 128.0, 255.0, 256.0, 1000.0, 1e10, -1e10):
            err = ct.torch_error(lambda: F.pad(z, [1, 1], value=v))
            got = lib.ct_pad(ct.from_torch(z), i64([1, 1]), 2, v)
            if err is None:
                ct.assert_close(ct.check(got), F.pad(z, [1, 1], value=v), what=f"pad {dt} {v}: ")
            else:
                ct.assert_error(got, err, what=f"pad {dt} {v}: ")
        src = torch.ones(1, 2, dtype=dt)
        for alpha in (-0.5, 2.0, 300.0, -300.0):
            err = ct.torch_error(lambda: z.index_add(0, torch.tensor([1]), src, alpha=alpha))
            got = lib.ct_index_add(ct.from_torch(z), 0, ct.from_torch(torch.tensor([1])), ct.from_torch(src), alpha)
            if err is None:
                ct.assert_close(ct.check(got), z.index_add(0, torch.tensor([1]), src, alpha=alpha),
                                what=f"index_add {dt} {alpha}: ")
            else:
                ct.assert_error(got, err, what=f"index_add {dt} {alpha}: ")


def _outcome(tfn, cfn, what, exact=True):
    """ctorch fails with torch's message where torch fails; else the same result
    (exact), or just success (random results)"""
    err = ct.torch_error(tfn)
    got = cfn()
    if err is not None:
        ct.assert_error(got, err, what=what + ": ")
    elif exact:
        ct.assert_close(ct.check(got), tfn(), what=what + ": ")
    else:
        ct.check(got)


def test_dims_classes_and_ranges():
    """a dim listed twice is an error on a 0-dim tensor too; one_hot infers only
    with -1; at::embedding's negative padding_idx matches no row; randint's from
    and to - 1 and randperm's n - 1 must fit the dtype; a p < 0 norm of nothing is 0"""
    s0 = torch.tensor(2.5)
    for dims in ([0], [0, 0], [-1, 0], [-1, -1], []):
        _outcome(lambda: s0.sum(dims), lambda: lib.ct_sum_dims(h(s0), i32(dims), len(dims), False), f"sum {dims}")
        if dims:
            _outcome(lambda: s0.amax(dims), lambda: lib.ct_amax(h(s0), i32(dims), len(dims), False), f"amax {dims}")
    cls = torch.tensor([0, 2, 1])
    for nc in (-1, -2, -5, 0, 2, 3, 4):
        _outcome(lambda: F.one_hot(cls, nc), lambda: lib.ct_one_hot(h(cls), nc), f"one_hot {nc}")
    w = torch.randn(3, 2)
    idx = torch.tensor([0, 1, 2, 1])
    for pad in (-1, -2, -3, 0, 2):
        _outcome(lambda: torch.embedding(w, idx, pad), lambda: lib.ct_embedding(h(w), h(idx), pad), f"embedding {pad}")
    ct.assert_error(lib.ct_embedding(h(w), h(idx), 3), "Padding_idx must be within num_embeddings")  # F.embedding's
    for lo, hi, dt in [(-5, 5, torch.uint8), (0, 256, torch.uint8), (0, 257, torch.uint8), (-129, 0, torch.int8),
                       (-128, 128, torch.int8), (0, 129, torch.int8), (0, 2, torch.bool), (0, 3, torch.bool),
                       (-1, 1, torch.bool), (0, 32768, torch.int16), (0, 32769, torch.int16), (0, 70000, torch.float16),
                       (-70000, 0, torch.float16), (0, 2**31, torch.int32), (0, 2**31 + 1, torch.int32),
                       (-(2**31) - 1, 0, torch.int32), (-(2**40), 2**40, torch.int64)]:
        _outcome(lambda: torch.randint(lo, hi, (3,), dtype=dt),
                 lambda: lib.ct_randint(lo, hi, i64([3]), 1, ct.ct_dtype_of_torch(dt)), f"randint {lo} {hi} {dt}", exact=False)
    for n, dt in [(128, torch.int8), (129, torch.int8), (256, torch.uint8), (257, torch.uint8), (3, torch.bool),
                  (2049, torch.float16), (2050, torch.float16), (300, torch.bfloat16), (40000, torch.int16)]:
        _outcome(lambda: torch.randperm(n, dtype=dt), lambda: lib.ct_randperm(n, ct.ct_dtype_of_torch(dt)),
                 f"randperm {n} {dt}", exact=False)
    for p in (float("inf"), float("-inf"), -1.0, -0.5, 0.0, 1.0, 2.0, 3.0):
        e = torch.zeros(2, 0)
        _outcome(lambda: torch.norm(e, p, dim=1), lambda: lib.ct_norm(h(e), p, i32([1]), 1, False), f"norm {p} dim 1")
        _outcome(lambda: torch.norm(e, p), lambda: lib.ct_norm(h(e), p, None, 0, False), f"norm {p}")


def test_softmax_of_integers_names_torchs_kernel():
    for shape in [(3, 2), (4,), (2, 3, 2)]:
        x = torch.zeros(shape, dtype=torch.int64)
        for d in range(-len(shape), len(shape)):
            _outcome(lambda: x.softmax(d), lambda: lib.ct_softmax(h(x), d), f"softmax {shape} {d}")
            _outcome(lambda: x.log_softmax(d), lambda: lib.ct_log_softmax(h(x), d), f"log_softmax {shape} {d}")


def test_index_put_one_mask_one_value_casts():
    """torch sends index_put_ with one bool / byte mask, one value and no
    accumulation to masked_fill_: the value is cast (and must fit)"""
    ct.declare("ct_index_put", T, [CT, TP, c_int, CT, c_bool])
    m = torch.tensor([True, False, True])
    cases = [(torch.zeros(3), (m,), torch.tensor(5), False), (torch.zeros(3, dtype=torch.int64), (m,), torch.tensor(2.7), False),
             (torch.zeros(3, dtype=torch.uint8), (m,), torch.tensor(-1.0), False),
             (torch.zeros(3, dtype=torch.uint8), (m,), torch.tensor(300), False),
             (torch.zeros(3), (m,), torch.tensor([5]), False), (torch.zeros(3), (m,), torch.tensor([5, 6]), False),
             (torch.zeros(3), (m,), torch.tensor(5), True), (torch.zeros(3), (torch.tensor([0, 2]),), torch.tensor(5), False),
             (torch.zeros(2, 3), (torch.tensor([True, False]),), torch.tensor(5), False),
             (torch.zeros(3, dtype=torch.bool), (m,), torch.tensor(5.5), False),
             (torch.zeros(3, dtype=torch.float16), (m.to(torch.uint8),), torch.tensor(1e5), False)]
    import warnings
    for x, idx, v, acc in cases:
        what = f"index_put {x.dtype} {[i.dtype for i in idx]} {v.dtype}{tuple(v.shape)} acc={acc}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            err = ct.torch_error(lambda: x.clone().index_put_(idx, v, accumulate=acc))
        hidx = (c_void_p * len(idx))(*[h(i) for i in idx])
        got = lib.ct_index_put(h(x), hidx, len(idx), h(v), acc)
        if err is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = x.clone().index_put_(idx, v, accumulate=acc)
            ct.assert_close(ct.check(got), want, what=what + ": ")
        else:
            ct.assert_error(got, err, what=what + ": ")


def test_scatter_bad_indices_out_of_place_and_in_place():
    """out of place, the scatters check their indices on the way and drop the
    output; in place, before writing: self is left as it was; an empty dim"""
    for name in ("scatter", "scatter_add"):
        ct.declare("ct_" + name, T, [CT, c_int, CT, CT])
        ct.declare("ct_" + name + "_", c_int, [T, c_int, CT, CT])
    cases = [(torch.zeros(3, 0), 1, torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1)),
             (torch.zeros(3, 2), 1, torch.tensor([[0], [5], [1]]), torch.ones(3, 1)),
             (torch.zeros(3, 2), 1, torch.tensor([[0], [-1], [1]]), torch.ones(3, 1)),
             (torch.zeros(4, 3), 0, torch.tensor([[0, 1, 2], [3, 4, 0]]), torch.ones(2, 3)),
             (torch.zeros(3, 0), 1, torch.zeros(3, 0, dtype=torch.long), torch.ones(3, 1)),
             (torch.zeros(600, 700), 1, torch.randint(0, 700, (600, 700)), torch.ones(600, 700))]
    cases[-1][2][599, 699] = 700  # the last index of a threaded scatter
    for x, dim, idx, src in cases:
        for name in ("scatter", "scatter_add"):
            what = f"{name} {tuple(x.shape)} dim {dim}"
            err = ct.torch_error(lambda: getattr(x, name)(dim, idx, src))
            got = getattr(lib, "ct_" + name)(h(x), dim, h(idx), h(src))
            if err is None:
                ct.assert_close(ct.check(got), getattr(x, name)(dim, idx, src), what=what + ": ")
            else:
                ct.assert_error(got, err, what=what + ": ")
                hx = h(x)
                ct.assert_error(getattr(lib, "ct_" + name + "_")(hx, dim, h(idx), h(src)), err, what=what + "_: ")
                ct.assert_close(hx, x, what=what + "_ left self: ")


def test_pad_border_slabs():
    """pad writes its value into the border slabs only: every geometry of
    positive, negative and mixed pads, empty insides, strided inputs, dtypes"""
    g = torch.Generator().manual_seed(7)
    base = torch.randn(3, 4, 5, 6, generator=g)
    xs = [base, base.transpose(1, 3), base[:, ::2, 1:, ::3], torch.zeros(2, 0, 3), torch.randn(5, generator=g)]
    pads = [(1, 2), (0, 0), (2, 0, 0, 3), (-1, 2), (1, -2, 2, -1), (-3, 1), (1, 1, 1, 1, 1, 1), (-6, 2), (-3, 0),
            (-2, -1), (2, -7), (-7, 2), (-2, -2), (0, 0, -2, -1),
            (0, 0, 0, 0, 2, 2), (3, 3, -1, -1, 0, 1), (2, 2, 2, 2, 2, 2, 2, 2)]
    for x in xs:
        for dt in (torch.float32, torch.int64, torch.bool, torch.float64):
            xt = x.to(dt)
            for p in pads:
                if len(p) // 2 > xt.dim():
                    continue
                err = ct.torch_error(lambda: F.pad(xt, p, value=1.0))
                got = lib.ct_pad(h(xt), i64(p), len(p), 1.0)
                what = f"pad {tuple(xt.shape)} {xt.stride()} {dt} {p}"
                if err is None:
                    ct.assert_close(ct.check(got), F.pad(xt, p, value=1.0), what=what + ": ")
                else:
                    ct.assert_error(got, err, what=what + ": ")
    # contiguous inputs padded by pads >= 0 of the last two dims (one pass of
    # whole rows), over the threads too, the value in each dtype (2.5 -> 2)
    big = torch.randn(3, 2, 70, 90, generator=g)
    for x in (big, big[0, 0], big[0, 0, 0], torch.randn(1, 1, generator=g)):
        for dt in (torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32, torch.bool):
            xt = x.to(dt)
            for p in ((3, 1), (0, 5), (2, 1, 4, 3), (0, 0, 1, 0), (0, 0, 0, 2), (7, 0, 0, 0)):
                if len(p) // 2 > xt.dim():
                    continue
                v = 1.0 if dt == torch.bool else 2.5
                what = f"pad {tuple(xt.shape)} {dt} {p} value {v}"
                ct.assert_close(ct.check(lib.ct_pad(h(xt), i64(p), len(p), v)), F.pad(xt, p, value=v), what=what + ": ")


def test_failing_integer_division_in_place_leaves_self():
    """an integer remainder_ / fmod_ by zero fails with ZeroDivisionError, as torch's,
    and writes nothing into self (torch leaves it for a scalar 0; ctorch for any divisor)"""
    for n in ("remainder", "fmod"):
        ct.declare(f"ct_{n}_", c_int, [T, CT])
        ct.declare(f"ct_{n}_scalar_", c_int, [T, c_double])
    for dt in (torch.int64, torch.int32, torch.uint8):
        x = torch.tensor([7, 5, 3], dtype=dt)
        for n in ("remainder", "fmod"):
            with pytest.raises((ZeroDivisionError, RuntimeError), match="ZeroDivisionError"):
                getattr(x.clone(), n + "_")(0)
            for call in (lambda hx: getattr(lib, f"ct_{n}_")(hx, h(torch.tensor([2, 0, 1], dtype=dt))),
                         lambda hx: getattr(lib, f"ct_{n}_scalar_")(hx, 0.0)):
                hx = h(x.clone())
                ct.clear_error()
                assert call(hx) == -1 and "ZeroDivisionError" in ct.last_error()
                assert ct.to_torch(hx).tolist() == x.tolist(), f"{n}_ {dt} wrote into self"
            hx = h(x.clone())  # and a good divisor still works in place
            assert getattr(lib, f"ct_{n}_")(hx, h(torch.tensor([2, 3, 2], dtype=dt))) == 0
            assert ct.to_torch(hx).tolist() == getattr(x.clone(), n + "_")(torch.tensor([2, 3, 2], dtype=dt)).tolist()


def test_scatter_and_gather_with_a_zero_dim_index():
    """a 0-dim index into a 1-d tensor is one element at its value (it wrote at 0)"""
    for n, args in [("ct_scatter", [CT, c_int, CT, CT]), ("ct_scatter_add", [CT, c_int, CT, CT]),
                    ("ct_scatter_value", [CT, c_int, CT, c_double]), ("ct_gather", [CT, c_int, CT])]:
        ct.declare(n, T, args)
    ct.declare("ct_scatter_add_", c_int, [T, c_int, CT, CT])
    z, idx, src = torch.zeros(5), torch.tensor(3), torch.tensor(2.5)
    ct.assert_close(ct.check(lib.ct_scatter(h(z), 0, h(idx), h(src))), z.scatter(0, idx, src))
    ct.assert_close(ct.check(lib.ct_scatter_add(h(z), 0, h(idx), h(src))), z.scatter_add(0, idx, src))
    ct.assert_close(ct.check(lib.ct_scatter_value(h(z), 0, h(idx), 7.0)), z.scatter(0, idx, 7.0))
    hz = h(z.clone())
    assert lib.ct_scatter_add_(hz, 0, h(idx), h(src)) == 0
    ct.assert_close(hz, z.clone().scatter_add_(0, idx, src))
    x = torch.arange(5.0)
    ct.assert_close(ct.check(lib.ct_gather(h(x), 0, h(idx))), torch.gather(x, 0, idx))


def test_null_arrays_and_huge_counts_fail_cleanly():
    """NULL tensor arrays with a count and absurd dim counts are errors, not crashes"""
    ct.declare("ct_nn_linear", c_void_p, [c_int64, c_int64, c_bool])
    ct.declare("ct_module_forward_n", T, [c_void_p, c_void_p, c_int])
    ct.declare("ct_module_free", None, [c_void_p])
    ct.declare("ct_set_requires_grad", c_int, [T, c_bool])
    ct.declare("ct_sum", T, [CT])
    x = h(torch.ones(3))
    lib.ct_set_requires_grad(x, True)
    res = (c_void_p * 1)()
    ins = (c_void_p * 1)(x)
    outs = (c_void_p * 1)(lib.ct_sum(x))
    assert lib.ct_autograd_grad(None, None, 1, ins, 1, res, False, False, True) == -1
    assert lib.ct_autograd_grad(outs, None, 1, None, 1, res, True, False, True) == -1
    assert lib.ct_autograd_grad(outs, None, 1, ins, 1, None, True, False, True) == -1
    m = lib.ct_nn_linear(3, 2, True)
    try:
        assert not lib.ct_module_forward_n(m, None, 1)
    finally:
        lib.ct_module_free(m)
    for n in (17, 2**31 - 1, 2**31 - 15):
        assert not lib.ct_unflatten(h(torch.zeros(2, 4)), -2, i64([-1] * 20), n)
    ct.clear_error()


def test_like_factories_preserve_the_layout():
    """zeros_like / ones_like / full_like keep a dense input's strides (a transpose,
    a permute) and lay others out densely in their dim order, as torch's preserve_format"""
    for n, a in [("ct_zeros_like", [CT]), ("ct_ones_like", [CT]), ("ct_full_like", [CT, c_double])]:
        ct.declare(n, T, a)
    base = torch.randn(4, 6, 2)
    for x in [base, base.transpose(0, 1), base.permute(2, 0, 1), base[:, ::2], base[:1].expand(3, 6, 2),
              base[:, :, 0].t(), torch.tensor(2.0), torch.empty(0, 3).t()]:
        for cfn, tfn in [(lambda hx: lib.ct_zeros_like(hx), torch.zeros_like),
                         (lambda hx: lib.ct_ones_like(hx), torch.ones_like),
                         (lambda hx: lib.ct_full_like(hx, 2.5), lambda t: torch.full_like(t, 2.5))]:
            want = tfn(x)
            got = ct.check(cfn(h(x)))
            ct.assert_close(got, want)
            assert tuple(ct.strides(got)) == want.stride(), (x.shape, x.stride(), ct.strides(got), want.stride())


def _torch_result(fn):
    try:
        return fn(), None
    except (RuntimeError, IndexError, ValueError) as e:
        return None, ct.torch_message(e)


def test_inputs_torch_takes_or_refuses():
    """fail where torch fails (with its words), succeed where it succeeds: negative
    label smoothing smooths nothing, uint8 class indices (nll_loss, not 2d), an
    empty index of any dtype in gather / scatter, a 0-dim src counts as one element,
    topk of bool, embedding rows of width 0 still check indices, one_hot of nothing
    needs a class count, ':' entries count towards too many indices; where nothing is
    computed torch returns before its checks"""
    for n, r, a in [("ct_cross_entropy", T, [CT, CT, CT, c_int, c_int64, c_double]),
                    ("ct_nll_loss", T, [CT, CT, CT, c_int, c_int64]), ("ct_gather", T, [CT, c_int, CT]),
                    ("ct_scatter", T, [CT, c_int, CT, CT]), ("ct_scatter_add", T, [CT, c_int, CT, CT]),
                    ("ct_index", T, [CT, TP, c_int]), ("ct_index_put_", c_int, [T, TP, c_int, CT, c_bool]),
                    ("ct_argmax", T, [CT, c_bool, c_int, c_bool]), ("ct_tril", T, [CT, c_int64])]:
        ct.declare(n, r, a)
    x = torch.randn(3, 4)
    t = torch.tensor([0, 1, 3])
    u8 = t.to(torch.uint8)
    e32 = torch.empty(3, 0, dtype=torch.int32)
    vals, idxs = (ct.T * 1)(), (ct.T * 1)()
    F = torch.nn.functional

    def index(v, n):
        return lib.ct_index(h(v), (ct.T * n)(*([None] * n)), n)
    cases = [
        (lambda: lib.ct_cross_entropy(h(x), h(t), None, 1, -100, -0.3), lambda: F.cross_entropy(x, t, label_smoothing=-0.3)),
        (lambda: lib.ct_cross_entropy(h(x), h(t), None, 1, -100, 1.5), lambda: F.cross_entropy(x, t, label_smoothing=1.5)),
        (lambda: lib.ct_cross_entropy(h(x), h(u8), None, 1, -100, 0.1), lambda: F.cross_entropy(x, u8, label_smoothing=0.1)),
        (lambda: lib.ct_nll_loss(h(x), h(u8), None, 2, 1), lambda: F.nll_loss(x, u8, ignore_index=1, reduction="sum")),
        (lambda: lib.ct_nll_loss(h(torch.randn(2, 3, 2, 2)), h(torch.zeros(2, 2, 2, dtype=torch.uint8)), None, 1, -100),
         lambda: F.nll_loss(torch.randn(2, 3, 2, 2), torch.zeros(2, 2, 2, dtype=torch.uint8))),
        (lambda: lib.ct_nll_loss(h(x), h(t.int()), None, 1, -100), lambda: F.nll_loss(x, t.int())),
        (lambda: lib.ct_gather(h(x), 1, h(e32)), lambda: torch.gather(x, 1, e32)),
        (lambda: lib.ct_scatter(h(x), 1, h(e32), h(x)), lambda: x.scatter(1, e32, x)),
        (lambda: lib.ct_gather(h(x), 1, h(t.int().view(3, 1))), lambda: torch.gather(x, 1, t.int().view(3, 1))),
        (lambda: lib.ct_scatter_add(h(torch.zeros(2)), 0, h(torch.tensor([0, 1])), h(torch.tensor(5.0))),
         lambda: torch.zeros(2).scatter_add(0, torch.tensor([0, 1]), torch.tensor(5.0))),
        (lambda: lib.ct_scatter(h(torch.zeros(2)), 0, h(torch.tensor([1])), h(torch.tensor(5.0))),
         lambda: torch.zeros(2).scatter(0, torch.tensor([1]), torch.tensor(5.0))),
        (lambda: vals[0] if lib.ct_topk(h(torch.tensor([True, False])), 1, 0, True, True, vals, idxs) == 0 else None,
         lambda: torch.tensor([True, False]).topk(1)[0]),
        (lambda: lib.ct_embedding(h(torch.empty(3, 0)), h(torch.tensor([5])), -1),
         lambda: F.embedding(torch.tensor([5]), torch.empty(3, 0))),
        (lambda: lib.ct_embedding(h(torch.empty(3, 0)), h(torch.tensor([2])), -1),
         lambda: F.embedding(torch.tensor([2]), torch.empty(3, 0))),
        (lambda: lib.ct_one_hot(h(torch.empty(0, dtype=torch.long)), 0),
         lambda: F.one_hot(torch.empty(0, dtype=torch.long), 0)),
        (lambda: index(torch.tensor(3.0), 1), lambda: torch.ops.aten.index(torch.tensor(3.0), [None])),
        (lambda: index(torch.zeros(3), 2), lambda: torch.ops.aten.index(torch.zeros(3), [None, None])),
        (lambda: None if lib.ct_index_put_(h(torch.zeros(3, 4, 2)), (ct.T * 1)(h(torch.tensor(3))), 1,
                                           h(torch.ones(3)), True) < 0 else 1,
         lambda: torch.zeros(3, 4, 2).index_put_((torch.tensor(3),), torch.ones(3), True)),  # shapes before range
        # nothing to compute: torch returns before its dtype / dim / range checks
        (lambda: lib.ct_softmax(h(torch.zeros(0, 3, dtype=torch.long)), 1),
         lambda: torch.zeros(0, 3, dtype=torch.long).softmax(1)),
        (lambda: lib.ct_argmax(h(torch.zeros(2, 0, 3, dtype=torch.bool)), True, 2, False),
         lambda: torch.zeros(2, 0, 3, dtype=torch.bool).argmax(2)),
        (lambda: lib.ct_argmax(h(torch.zeros(2, 3, dtype=torch.bool)), True, 1, False),
         lambda: torch.zeros(2, 3, dtype=torch.bool).argmax(1)),
        # a dim of size 1: zeros whatever the dtype (bool too); not over everything, nor 0-dim
        (lambda: lib.ct_argmax(h(torch.tensor([[True], [False]])), True, 1, False),
         lambda: torch.tensor([[True], [False]]).argmax(1)),
        (lambda: lib.ct_argmax(h(torch.ones(2, 1, 3, dtype=torch.bool)), True, 1, True),
         lambda: torch.ones(2, 1, 3, dtype=torch.bool).argmax(1, keepdim=True)),
        (lambda: lib.ct_argmax(h(torch.tensor([[True], [False]])), True, 0, False),
         lambda: torch.tensor([[True], [False]]).argmax(0)),
        (lambda: lib.ct_argmax(h(torch.tensor([True])), False, 0, False), lambda: torch.tensor([True]).argmax()),
        (lambda: lib.ct_argmax(h(torch.tensor(True)), True, 0, False), lambda: torch.tensor(True).argmax(0)),
        (lambda: lib.ct_tril(h(torch.zeros(0)), 0), lambda: torch.zeros(0).tril()),
        (lambda: lib.ct_tril(h(torch.zeros(3)), 0), lambda: torch.zeros(3).tril()),
        (lambda: lib.ct_roll(h(torch.zeros(0, 3)), i64([1]), 1, i32([5]), 1), lambda: torch.zeros(0, 3).roll(1, 5)),
        (lambda: lib.ct_index(h(torch.zeros(4, 0, 1)), (ct.T * 1)(h(torch.tensor([[4], [1]]))), 1),
         lambda: torch.zeros(4, 0, 1)[torch.tensor([[4], [1]])]),
    ]
    for k, (cfn, tfn) in enumerate(cases):
        want, err = _torch_result(tfn)
        ct.clear_error()
        got = cfn()
        if err is None:
            assert got, f"case {k}: ctorch failed ({ct.last_error()}) where torch gives {want}"
            ct.assert_close(got, want, rtol=1e-5, atol=1e-5, what=f"case {k}: ")
        elif "INTERNAL ASSERT" not in err and "out of DATA bounds" not in err:
            ct.assert_error(got, err, what=f"case {k}: ")
        else:
            assert not got, f"case {k}: ctorch succeeded where torch fails: {err}"


def test_messages_in_torchs_words():
    """split / tril of 0-dim tensors, index_add's index dtype, scatter_add's src
    dtype, batch_norm of integers, amax's empty dim as given, one_hot on meta"""
    for n, r, a in [("ct_tril", T, [CT, c_int64]), ("ct_scatter_add", T, [CT, c_int, CT, CT]),
                    ("ct_batch_norm", T, [CT, T, T, CT, CT, c_bool, c_double, c_double]),
                    ("ct_to_device", T, [CT, c_int]), ("ct_split", c_int, [CT, c_int64, c_int, TP, c_int])]:
        ct.declare(n, r, a)
    out = (ct.T * 4)()
    s = torch.tensor(2.0)
    x = torch.randn(3, 4)
    i16 = torch.tensor([0, 1], dtype=torch.int16)
    F = torch.nn.functional
    cases = [
        (lambda: None if lib.ct_split(h(s), 1, 0, out, 4) < 0 else out[0], lambda: s.split(1)),
        (lambda: lib.ct_tril(h(s), 0), lambda: s.tril()),
        (lambda: lib.ct_index_add(h(x), 0, h(i16), h(x[:2]), 1.0), lambda: x.index_add(0, i16, x[:2])),
        (lambda: lib.ct_scatter_add(h(x), 0, h(torch.zeros(1, 4, dtype=torch.long)), h(x.double())),
         lambda: x.scatter_add(0, torch.zeros(1, 4, dtype=torch.long), x.double())),
        (lambda: lib.ct_batch_norm(h(x.long()), None, None, h(torch.ones(4, dtype=torch.bfloat16)), None, True, 0.1, 1e-5),
         lambda: F.batch_norm(x.long(), None, None, torch.ones(4, dtype=torch.bfloat16), None, True)),
        (lambda: lib.ct_amax(h(torch.empty(0, 2)), i32([-2]), 1, False), lambda: torch.empty(0, 2).amax(-2)),
        (lambda: lib.ct_amax(h(torch.empty(0, 2)), None, 0, False), lambda: torch.empty(0, 2).amax()),
        (lambda: lib.ct_one_hot(lib.ct_to_device(h(torch.tensor([1])), ct.CT_META), -1),
         lambda: F.one_hot(torch.tensor([1], device="meta"))),
    ]
    for k, (cfn, tfn) in enumerate(cases):
        want, err = _torch_result(tfn)
        assert err is not None, f"case {k}: torch succeeds"
        ct.clear_error()
        ct.assert_error(cfn(), err, what=f"case {k}: ")


def test_random_fills_and_inits_check_like_torch():
    """uniform_'s bounds must be finite in the dtype (then ordered), normal_'s std not
    NaN, randint's ends as the float dtype holds them; kaiming of a zero-element
    tensor is a no-op (torch warns), convolutions of zero channels build"""
    import math
    for n, r, a in [("ct_uniform_", c_int, [T, c_double, c_double]), ("ct_normal_", c_int, [T, c_double, c_double]),
                    ("ct_zeros", T, [I64P, c_int, c_int]),
                    ("ct_init_kaiming_uniform_", c_int, [T, c_double, ct.c_char_p, ct.c_char_p]),
                    ("ct_nn_conv2d", c_void_p, [c_int64] * 7 + [c_bool]), ("ct_module_free", None, [c_void_p])]:
        ct.declare(n, r, a)
    for dt, cdt in [(torch.float32, ct.CT_FLOAT32), (torch.float16, ct.CT_FLOAT16)]:
        for kind, lo, hi in [("u", 0.0, math.inf), ("u", math.nan, 1.0), ("u", 2.5, 100002.5), ("u", 3.0, 1.0),
                             ("n", 0.0, math.nan), ("n", 0.0, -1.0), ("u", -1.0, 1.0)]:
            t = torch.zeros(4, dtype=dt)
            err = ct.torch_error(lambda: t.uniform_(lo, hi) if kind == "u" else t.normal_(lo, hi))
            hx = lib.ct_zeros(i64([4]), 1, cdt)
            ct.clear_error()
            rc = (lib.ct_uniform_ if kind == "u" else lib.ct_normal_)(hx, lo, hi)
            if err is None:
                assert rc == 0, ct.last_error()
            else:
                ct.assert_error(rc, err, what=f"{kind} {lo} {hi} {dt}: ")
                assert ct.to_torch(hx).tolist() == [0.0] * 4
    lo = 2739425672
    err = ct.torch_error(lambda: torch.randint(lo, lo + 1, (3,), dtype=torch.float32))
    ct.clear_error()
    ct.assert_error(lib.ct_randint(lo, lo + 1, i64([3]), 1, ct.CT_FLOAT32), err)
    for shape in [(0, 3), (2, 3, 0)]:
        hz = lib.ct_zeros(i64(list(shape)), len(shape), ct.CT_FLOAT32)
        assert lib.ct_init_kaiming_uniform_(hz, 0.0, b"fan_out", None) == 0, ct.last_error()
    for cin, cout in [(0, 3), (0, 0)]:
        torch.nn.Conv2d(cin, cout, 1)
        m = lib.ct_nn_conv2d(cin, cout, 1, 1, 0, 1, 1, True)
        assert m, ct.last_error()
        lib.ct_module_free(m)


ct.declare("ct_conv1d", T, [CT, CT, CT, c_int64, c_int64, c_int64, c_int64])
ct.declare("ct_conv2d", T, [CT, CT, CT, I64P, I64P, I64P, c_int64])
ct.declare("ct_masked_fill_", c_int, [T, CT, c_double])
DTYPES_ALL = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
              torch.bfloat16, torch.float32, F64]


def test_error_wording_masked_fill_conv_dilation_lerp():
    """torch's words: out-of-place masked_fill expands (mask, self), so its
    broadcast error names the mask as tensor a (in place: self); conv1d runs as
    conv2d of dilation [1, d] ("dilation should be greater than zero, but got
    [1, 0]"), except float32 convolutions torch runs on mkldnn (batch > 1,
    groups > 1, kernels above 3x3 or inputs above 20480 elements: "non-positive
    dilation is not supported"); lerp names dtypes by their C++ types ("long int", "c10::Half")."""
    x = torch.zeros(3, 4)
    for m in [torch.ones(2, 4), torch.ones(5), torch.ones(4, 1, 1), torch.ones(2, 3, 4), torch.ones(3, 1)]:
        m = m.bool()
        for cf, tf in [(lambda: lib.ct_masked_fill(h(x), h(m), 1.0), lambda: x.masked_fill(m, 1.0)),
                       (lambda: lib.ct_masked_fill_(h(x), h(m), 1.0), lambda: x.clone().masked_fill_(m, 1.0))]:
            err = ct.torch_error(tf)
            ct.clear_error()
            got = cf()
            if err is not None:
                ct.assert_error(got, err, what=f"masked_fill mask {tuple(m.shape)}: ")
            else:
                assert got not in (None, -1), ct.last_error()
    for dt in (torch.float32, F64):
        for batched, g, k in [(2, 1, 3), (1, 1, 3), (None, 1, 3), (1, 3, 3), (1, 1, 5)]:
            for d in (0, -2, 2):
                x1, w1 = torch.ones(batched or 1, 3, 10, dtype=dt), torch.ones(3, 3 // g, k, dtype=dt)
                x1 = x1 if batched else x1[0]
                err = ct.torch_error(lambda: F.conv1d(x1, w1, None, 1, 0, d, g))
                ct.clear_error()
                got = lib.ct_conv1d(h(x1), h(w1), None, 1, 0, d, g)
                if err is None:
                    assert got, ct.last_error()
                else:
                    ct.assert_error(got, err, what=f"conv1d {dt} batched={batched} dilation {d}: ")
                for dil in [(1, d), (d, 1)]:
                    x2, w2 = torch.ones(batched or 1, 3, 10, 10, dtype=dt), torch.ones(3, 3 // g, k, k, dtype=dt)
                    x2 = x2 if batched else x2[0]
                    err = ct.torch_error(lambda: F.conv2d(x2, w2, None, 1, 0, dil, g))
                    ct.clear_error()
                    got = lib.ct_conv2d(h(x2), h(w2), None, i64([1, 1]), i64([0, 0]), i64(dil), g)
                    if err is None:
                        assert got, ct.last_error()
                    else:
                        ct.assert_error(got, err, what=f"conv2d {dt} batched={batched} dilation {dil}: ")
    for d in DTYPES_ALL:
        for dself, dend, dw in [(torch.float32, d, None), (d, torch.float32, None), (d, d, torch.float32),
                                (torch.float32, torch.float32, d)]:
            a, b = torch.ones(2, dtype=dself), torch.ones(2, dtype=dend)
            tf = (lambda: torch.lerp(a, b, 0.5)) if dw is None else (lambda: torch.lerp(a, b, torch.ones(2, dtype=dw)))
            err = ct.torch_error(tf)
            if err is None or "for 'Half'" in err:  # (ctorch has float16 lerp)
                continue
            ct.clear_error()
            got = lib.ct_lerp_scalar(h(a), h(b), 0.5) if dw is None else lib.ct_lerp(h(a), h(b), h(torch.ones(2, dtype=dw)))
            ct.assert_error(got, err, what=f"lerp {dself} {dend} {dw}: ")


def test_to_meta_keeps_dense_layouts_only():
    """.to('meta') as torch's preserve_format: a dense non-overlapping layout keeps
    its strides (transposed, permuted), anything else (sliced, expanded) becomes
    contiguous, so that the meta tensor's storage covers its strides and ops on it
    give torch's meta shapes"""
    ct.declare("ct_to_device", T, [CT, c_int])
    ct.declare("ct_matmul", T, [CT, CT])
    x = torch.randn(4, 6)
    views = [x, x.t(), x[:, ::2], x.expand(2, 4, 6), x[1:3], torch.randn(3, 1).expand(3, 4),
             torch.randn(2, 3, 4).permute(2, 0, 1), torch.randn(5, 1, 3)[:, :, 1:], torch.empty(0, 3).t()]
    for v in views:
        m = lib.ct_to_device(h(v), ct.CT_META)
        want = v.to("meta")
        assert ct.shape(m) == tuple(want.shape) and ct.strides(m) == want.stride(), \
            f"{tuple(v.shape)} {v.stride()}: {ct.strides(m)} != {want.stride()}"
        w = torch.randn(v.shape[-1], 2)
        got = ct.check(lib.ct_matmul(m, lib.ct_to_device(h(w), ct.CT_META)))
        assert ct.shape(got) == tuple((want @ w.to("meta")).shape)


def test_shape_and_reduction_check_order():
    """which check torch makes first: scatter_add's index dtype in scatter's words;
    scatter's value range after the index's dtype and bounds (an empty index takes
    any value); stack's dim before the sizes; split's negative size before the
    dim; amax / amin's empty dims in turn before duplicates; topk of a 0-dim bool"""
    for n, r, a in [("ct_scatter_add", T, [CT, c_int, CT, CT]), ("ct_scatter_value", T, [CT, c_int, CT, c_double]),
                    ("ct_stack", T, [TP, c_int, c_int]), ("ct_split", c_int, [CT, c_int64, c_int, TP, c_int]),
                    ("ct_amax", T, [CT, INTP, c_int, c_bool]), ("ct_amin", T, [CT, INTP, c_int, c_bool]),
                    ("ct_topk", c_int, [CT, c_int64, c_int, c_bool, c_bool, TP, TP])]:
        ct.declare(n, r, a)
    x, xi = torch.zeros(3, 4), torch.zeros(3, 4, dtype=torch.int32)
    out, v, ix = (ct.T * 8)(), (ct.T * 1)(), (ct.T * 1)()
    cases = [("scatter_add int32 index", lambda: x.scatter_add(0, torch.zeros(1, 4, dtype=torch.int32), x),
              lambda: lib.ct_scatter_add(h(x), 0, h(torch.zeros(1, 4, dtype=torch.int32)), h(x)))]
    for idx in (torch.zeros(1, 4, dtype=torch.long), torch.zeros(0, dtype=torch.long), torch.full((1, 4), 7),
                torch.zeros(1, 4, dtype=torch.int32)):
        for val in (math.nan, 1e10, 2.0):
            cases.append((f"scatter({idx.tolist()}, {val})", lambda idx=idx, val=val: xi.scatter(0, idx, val),
                          lambda idx=idx, val=val: lib.ct_scatter_value(h(xi), 0, h(idx), val)))
    a, b = torch.zeros(2, 3), torch.zeros(4, 3)
    for d in (3, -4, 1):
        cases.append((f"stack dim {d}", lambda d=d: torch.stack([a, b], d),
                      lambda d=d: lib.ct_stack((ct.T * 2)(h(a), h(b)), 2, d)))
    for t, size, d in [(torch.zeros(0), -1, 1), (torch.zeros(3), 0, 3), (torch.zeros(3), 0, 0), (torch.tensor(1.), -1, 3)]:
        cases.append((f"split({tuple(t.shape)}, {size}, {d})", lambda t=t, size=size, d=d: t.split(size, d),
                      lambda t=t, size=size, d=d: (lambda r: None if r < 0 else r)(lib.ct_split(h(t), size, d, out, 8))))
    e = torch.zeros(0, 3)
    for dims in ((0, 0), (0, 2), (-2, 0), (1, 1), (2, 0)):
        for name in ("amax", "amin"):
            cases.append((f"{name}{dims}", lambda name=name, dims=dims: getattr(torch, name)(e, dims),
                          lambda name=name, dims=dims: getattr(lib, "ct_" + name)(h(e), i32(list(dims)), len(dims), False)))
    for t in (torch.tensor(True), torch.tensor([True, False])):
        cases.append((f"topk {t.tolist()}", lambda t=t: torch.topk(t, 1),
                      lambda t=t: (lambda r: None if r < 0 else v[0])(lib.ct_topk(h(t), 1, -1, True, True, v, ix))))
    for what, tfn, cfn in cases:
        want = ct.torch_error(tfn)
        ct.clear_error()
        got = cfn()
        if want is None:
            assert got, f"{what}: torch succeeds, ctorch: {ct.last_error()}"
        else:
            ct.assert_error(got, want, what=what + ": ")


def test_cat_of_legacy_empty_tensors_only():
    """torch.cat skips 1-d empty tensors; when all are such, it wraps no dim (any dim
    passes) and returns one more, of the promoted dtype; the gradients are empty"""
    ct.declare("ct_cat", T, [TP, c_int, c_int])
    z = torch.zeros
    for ts, d in [([z(0), z(0)], 1), ([z(0)], -3), ([z(0), z(0, dtype=torch.float64)], 7), ([z(0), z(2, 3)], 5),
                  ([z(0), z(0)], 0), ([z(0), z(2, 3)], 1), ([z(0, dtype=torch.int32), z(0)], 0)]:
        arr = (ct.T * len(ts))(*[h(t) for t in ts])
        ct.assert_same_outcome(lambda: lib.ct_cat(arr, len(ts), d), lambda: torch.cat(ts, d), f"cat dim {d}: ",
                               lambda got, want: ct.assert_close(ct.check(got), want))
    x = torch.zeros(0, dtype=torch.float64)
    hx = ct.leaf(x)
    out = ct.check(lib.ct_cat((ct.T * 2)(hx, hx), 2, 3))
    g = ct.grads_of(out, [hx], torch.zeros(0, dtype=torch.float64))[0]
    assert ct.shape(g) == (0,)


for _row in [("ct_linspace", T, [c_double, c_double, c_int64, c_int]), ("ct_eye", T, [c_int64, c_int64, c_int]),
             ("ct_clone", T, [CT]), ("ct_zeros_like", T, [CT]), ("ct_to_dtype", T, [CT, c_int]),
             ("ct_add_alpha", T, [CT, CT, c_double]), ("ct_sub_alpha", T, [CT, CT, c_double]),
             ("ct_add_alpha_", c_int, [T, CT, c_double]), ("ct_addcmul", T, [CT, CT, CT, c_double])]:
    ct.declare(*_row)
ct.declare_elementwise([], ["add", "sub", "mul", "remainder", "fmod", "pow", "bitwise_and", "bitwise_xor", "atan2"])


def test_arange_in_torchs_accumulate_type_and_order():
    """integer aranges count in int64 and wrap into the dtype (3e9 .. as uint8 is 0, 1, 2);
    int64's size from the integers (2^62 + k 2^10: the arguments are doubles); torch's checks in order: the conversion
    to int64, a zero or NaN step, a non-finite range, the step's sign (an infinite
    float step is one element or none)"""
    inf, nan = float("inf"), float("nan")
    for a, b, st, dt in [(3e9, 3e9 + 3, 1, torch.uint8), (1e15, 1e15 - 40, -4.06, torch.uint8),
                         (2 ** 62, 2 ** 62 + 5 * 1024, 1024, torch.int64), (-2 ** 62, 2 ** 61, 2 ** 60, torch.int64),
                         (2 ** 31 - 2, 2 ** 31 + 3, 1, torch.int32), (-130, -125, 1, torch.int8), (0, 10, inf, F64),
                         (0, 10, inf, torch.int64), (8, 1.5, inf, torch.float32), (0, 10, nan, torch.float32),
                         (nan, 1, 1, torch.int32), (0, 1, 0.5, torch.int32), (inf, 1, 0, torch.float32),
                         (0, inf, 1, torch.float32), (1e19, 1e19 + 5, 1, torch.int64), (0, -5, 1, torch.int16),
                         (-9.5, -2.2, 1.7, torch.int16), (0.5, 0.25, -0.1, torch.float16)]:
        ct.assert_same_outcome(lambda: lib.ct_arange(a, b, st, ct.ct_dtype_of_torch(dt)),
                               lambda: torch.arange(a, b, st, dtype=dt), f"arange({a}, {b}, {st}, {dt}): ",
                               compare=lambda got, want: ct.assert_close(got, want, rtol=0, atol=0))


def test_linspace_checks_its_ends_fit_the_dtype():
    inf, nan = float("inf"), float("nan")
    for a, b, n, dt in [(-4, inf, 5, torch.int32), (-10, 1e15, 3, torch.float16), (0, 1e300, 3, torch.float32),
                        (0, inf, 3, torch.float32), (0, 300, 3, torch.uint8), (0, -1, 3, torch.uint8),
                        (0, nan, 3, torch.int64), (1e39, 0, 2, torch.bfloat16), (-1, 2, 4, torch.bool)]:
        ct.assert_same_outcome(lambda: lib.ct_linspace(a, b, n, ct.ct_dtype_of_torch(dt)),
                               lambda: torch.linspace(a, b, n, dtype=dt), f"linspace({a}, {b}, {n}, {dt}): ",
                               compare=lambda got, want: ct.assert_close(got, want, rtol=0, atol=0))


def test_eye_sizes():
    """m -1 stands for torch's None; other negative sizes fail in torch's words"""
    for n, m in [(3, 4), (4, 3), (0, 0), (0, 3), (3, -1), (1, -2), (-1, 4), (-1, -1), (-3, -2)]:
        ct.assert_same_outcome(lambda: lib.ct_eye(n, m, ct.CT_FLOAT32),
                               lambda: torch.eye(n) if m == -1 else torch.eye(n, m), f"eye({n}, {m}): ",
                               compare=lambda got, want: ct.assert_close(got, want, rtol=0, atol=0))


@pytest.mark.parametrize("size,stride", [((1, 4), (1, 1)), ((3, 1, 1), (1, 3, 1)), ((1,), (5,)), ((2, 1, 3), (3, 100, 1)),
                                         ((2, 3), (1, 2)), ((1, 1), (7, 9)), ((2, 2), (1, 4))])
def test_preserve_format_keeps_a_dense_layout_exactly(size, stride):
    """torch's empty_like(preserve_format) takes a dense non-overlapping input's strides
    as they are, a size-1 dim's too (clone, *_like, to()); others dense in their order"""
    t = torch.arange(50.0).as_strided(size, stride)
    x = h(t)
    for name, cfn, tfn in [("clone", lib.ct_clone, torch.clone), ("zeros_like", lib.ct_zeros_like, torch.zeros_like),
                           ("to", lambda v: lib.ct_to_dtype(v, ct.CT_FLOAT64), lambda v: v.double()),
                           ("exp-like add", lambda v: lib.ct_add(v, v), lambda v: v + v)]:
        got, want = ct.check(cfn(x)), tfn(t)
        assert tuple(ct.strides(got)) == want.stride(), (name, tuple(ct.strides(got)), want.stride())
        ct.assert_close(got, want, rtol=0, atol=0)


def test_integer_alpha_and_addcmul_wrap():
    """integer arithmetic wraps as torch's (two's complement): a negative alpha for
    uint8, addcmul of int32 / int64 past their range"""
    u = torch.tensor([64, 58, 0, 255], dtype=torch.uint8)
    v = torch.tensor([22, 29, 1, 255], dtype=torch.uint8)
    for alpha in (-1.0, -3.0, 2.0):
        ct.assert_close(lib.ct_add_alpha(h(u), h(v), alpha), torch.add(u, v, alpha=int(alpha)), rtol=0, atol=0)
        ct.assert_close(lib.ct_sub_alpha(h(u), h(v), alpha), torch.sub(u, v, alpha=int(alpha)), rtol=0, atol=0)
    for dt, big in [(torch.int32, 2 ** 31 - 1), (torch.int64, 2 ** 63 - 1)]:
        a = torch.tensor([big, -big - 1, 5, big], dtype=dt)
        b = torch.tensor([-3, 7, big, 2], dtype=dt)
        c = torch.tensor([-96, 3, 3, big], dtype=dt)
        for value in (1.0, -1.0, 3.0):
            ct.assert_close(lib.ct_addcmul(h(a), h(b), h(c), value), torch.addcmul(a, b, c, value=int(value)),
                            rtol=0, atol=0)


BINARY_CHECKED = ["add", "sub", "mul", "remainder", "fmod", "pow", "bitwise_and", "bitwise_xor", "atan2"]


def _inplace(fn, x, *args):
    """an in-place call's outcome as a handle: x itself, or None when it failed"""
    return x if fn(x, *args) == 0 else None


@pytest.mark.parametrize("op", BINARY_CHECKED)
def test_binary_ops_check_shapes_before_dtypes(op):
    """TensorIterator's order, out of place and in place: the written-to tensor's
    overlap, the broadcast (and the output's shape), the cast to the output, then
    the kernel's dtype errors (bitwise ops of floats, integral alpha, bool)"""
    dts = [torch.bool, torch.uint8, torch.int32, torch.float32, torch.float64]
    close = lambda got, want: ct.assert_close(got, want, rtol=1e-6, atol=1e-6)  # noqa: E731
    for da in dts:
        for db in dts:
            for sa, sb in [((2,), (3,)), ((1,), (3,)), ((3,), (3,)), ((3,), (1,))]:
                a = torch.full(sa, 2, dtype=da)
                b = torch.ones(sb, dtype=db)
                what = f"{op} {da} {sa} {db} {sb}: "
                ct.assert_same_outcome(lambda: getattr(lib, "ct_" + op)(h(a), h(b)),
                                       lambda: getattr(torch, op)(a, b), what, compare=close)
                ct.assert_same_outcome(lambda: _inplace(getattr(lib, "ct_" + op + "_"), h(a), h(b)),
                                       lambda: getattr(a.clone(), op + "_")(b), "in place " + what, compare=close)
                if op in ("add", "sub"):
                    cfn = lib.ct_add_alpha if op == "add" else lib.ct_sub_alpha
                    ct.assert_same_outcome(lambda: cfn(h(a), h(b), 1.5), lambda: getattr(torch, op)(a, b, alpha=1.5),
                                           "alpha 1.5 " + what, compare=close)
                if op == "add":
                    ct.assert_same_outcome(lambda: _inplace(lib.ct_add_alpha_, h(a), h(b), 1.5),
                                           lambda: a.clone().add_(b, alpha=1.5), "in place alpha 1.5 " + what,
                                           compare=close)


def test_unflatten_words_its_inference_errors_as_torch():
    """torch's handle_unflatten_exception: sizes that cannot fill the dim, with or
    without a -1, name the dim and its size; two -1s are an 'unexpected error'"""
    for shape, d, sizes in [((1, 0, 2), 0, (2, -1)), ((6,), 0, (4, -1)), ((6,), 0, (2, 2)), ((6,), 0, (-1, -1)),
                            ((0,), 0, (-1, 0)), ((6,), 0, (2, -2)), ((2, 6), -1, (-1, 4)), ((2, 6), 1, (3, -1)),
                            ((4, 5), 1, (5, -1, 1))]:
        x = torch.zeros(shape)
        ct.assert_same_outcome(lambda: lib.ct_unflatten(h(x), d, i64(list(sizes)), len(sizes)),
                               lambda: x.unflatten(d, sizes), f"unflatten({shape}, {d}, {sizes}): ",
                               compare=lambda got, want: ct.assert_same_layout(got, want))


def test_movedim_checks_every_source_dim_first():
    """torch wraps every source dim, then every destination dim, then looks for
    repeats in the source, then in the destination"""
    ct.declare("ct_movedim", T, [CT, INTP, INTP, c_int])
    x = torch.zeros(2, 3, 4)
    for src, dst in [([0, -5], [-6, 1]), ([0, 1], [1, 7]), ([0, 1, 1], [0, 0, 2]), ([0, 1, 2], [1, 1, 0]),
                     ([2, 0], [0, 2]), ([-1], [0])]:
        ct.assert_same_outcome(lambda: lib.ct_movedim(h(x), i32(src), i32(dst), len(src)),
                               lambda: x.movedim(src, dst), f"movedim({src}, {dst}): ",
                               compare=lambda got, want: ct.assert_same_layout(got, want))


def test_inplace_pow_of_a_number_words_the_dtype_as_torch():
    """x.pow_(number) is pow.Tensor_Scalar's unary op over x.to(common) written into x:
    a common dtype other than x's fails as 'Found dtype ... but expected ...', after
    the negative-integer check and before the number's overflow"""
    for dt, e in [(torch.int8, 2.5), (torch.bool, 2.0), (torch.int32, 2.0), (torch.uint8, -1.0), (torch.int16, 1e10),
                  (torch.float32, 1e300), (torch.int8, 1000.0), (torch.float16, 2.5), (torch.int64, 0.5)]:
        x = torch.full((3,), 2, dtype=dt)
        te = int(e) if e == int(e) and abs(e) < 2 ** 63 else e  # an integral double stands for a Python int
        ct.assert_same_outcome(lambda: _inplace(lib.ct_pow_scalar_, h(x), e), lambda: x.clone().pow_(te),
                               f"{dt}.pow_({e}): ", compare=lambda got, want: ct.assert_close(got, want))


def test_inplace_clamp_checks_in_torchs_order():
    """clamp_'s meta: no promotion in place (self's dtype named as its C++ type:
    'signed char', 'bool'), then the build's overlap check (an expanded self), then
    the bounds' conversion to the dtype"""
    for dt in [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bfloat16,
               torch.float32]:  # torch 1.13 has no float16 clamp on the CPU
        for lo, hi in [(0.5, 2.5), (0, 1), (0, 300), (-200, NAN), (NAN, 1e39), (1, 2)]:
            for layout in ["contiguous", "expanded"]:
                base = torch.ones(1 if layout == "expanded" else 3, dtype=dt)
                x = base.expand(3)
                kw = {k: v for k, v in (("min", lo), ("max", hi)) if v == v}
                tkw = {k: int(v) if v == int(v) and abs(v) < 2 ** 63 else v for k, v in kw.items()}
                ct.assert_same_outcome(lambda: _inplace(lib.ct_clamp_, h(x), lo, hi), lambda: x.clone().clamp_(**tkw)
                                       if layout == "contiguous" else x.clamp_(**tkw),
                                       f"{dt} {layout}.clamp_({lo}, {hi}): ",
                                       compare=lambda got, want: ct.assert_close(got, want))


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_sort_and_flip_keep_the_inputs_layout(device):
    """torch's sort (values and indices) and flip allocate as empty_like(self):
    a dense input's strides (a transpose stays transposed), others contiguous"""
    ct.declare("ct_sort", c_int, [CT, c_int, c_bool, c_bool, TP, TP])
    ct.declare("ct_flip", T, [CT, INTP, c_int])
    ct.declare("ct_empty_on", T, [I64P, c_int, c_int, c_int])
    ct.declare("ct_as_strided", T, [CT, I64P, I64P, c_int, c_int64])
    g = torch.Generator().manual_seed(7)
    for t in [torch.randn(3, 4, generator=g).t(), torch.randn(4, 2, 3, generator=g).permute(2, 0, 1),
              torch.randn(10, generator=g)[::2], torch.randn(4, 6, generator=g)[:, ::2], torch.randn(1, 4)[:, :]]:
        if device == "cpu":
            x = h(t)
        else:  # a meta tensor of t's exact layout
            base = ct.check(lib.ct_empty_on(i64([t.storage_offset() + 1 + sum((s - 1) * st for s, st in
                                                  zip(t.shape, t.stride()))]), 1, ct.ct_dtype_of_torch(t.dtype), ct.CT_META))
            x = ct.check(lib.ct_as_strided(base, i64(list(t.shape)), i64(list(t.stride())), t.dim(), t.storage_offset()))
        for d in range(t.dim()):
            want = torch.sort(t, dim=d, stable=True)
            v, i = (c_void_p * 1)(), (c_void_p * 1)()
            ct.check_int(lib.ct_sort(x, d, False, True, v, i))
            for got, w in ((v[0], want.values), (i[0], want.indices)):
                assert tuple(ct.strides(got)) == w.stride() and tuple(ct.shape(got)) == tuple(w.shape)
                if device == "cpu":
                    ct.assert_close(got, w, rtol=0, atol=0)
            f = ct.check(lib.ct_flip(x, i32([d]), 1))
            assert tuple(ct.strides(f)) == torch.flip(t, [d]).stride()
            if device == "cpu":
                ct.assert_close(f, torch.flip(t, [d]), rtol=0, atol=0)


def test_masked_fill_out_of_place_is_contiguous():
    """torch's masked_fill is self.expand(...).clone(contiguous).masked_fill_(mask, v):
    the result is contiguous whatever self's layout"""
    g = torch.Generator().manual_seed(8)
    for t, m in [(torch.randn(4, 4, generator=g).t(), torch.ones(4, dtype=torch.bool)),
                 (torch.randn(4, 4, generator=g).t(), torch.rand(4, 4, generator=g).t() > 0.5),
                 (torch.randn(4, 1, generator=g), torch.rand(3, 1, 5, generator=g) > 0.5),
                 (torch.arange(8, dtype=torch.int32).as_strided((4, 2, 1), (1, 4, 8)), torch.rand(4, 2, 1) > 0.5),
                 (torch.tensor(2.0), torch.tensor(True))]:
        got = ct.check(lib.ct_masked_fill(h(t), h(m), 7.5))
        ct.assert_same_layout(got, t.masked_fill(m, 7.5))
        ct.assert_close(got, t.masked_fill(m, 7.5), rtol=0, atol=0)


def test_nonzero_is_column_major_as_torch():
    """torch's nonzero fills [ndim, nnz] and returns its transpose: strides (1, nnz),
    (1, 0) when nothing is set"""
    ct.declare("ct_nonzero", T, [CT])
    g = torch.Generator().manual_seed(9)
    for t in [torch.ones(3, 4), torch.zeros(5), torch.tensor([0.0, 1, 0, 2]), torch.rand(3, 4, 5, generator=g) > 0.5,
              torch.tensor(3.0), torch.tensor(0.0), torch.zeros(0, 3), torch.rand(4, 6, generator=g).t() > 0.3]:
        got = ct.check(lib.ct_nonzero(h(t)))
        ct.assert_same_layout(got, torch.nonzero(t))
        ct.assert_close(got, torch.nonzero(t), rtol=0, atol=0)
