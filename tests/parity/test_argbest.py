"""max / min with indices, argmax / argmin over rows long and short: the
first-occurrence search of reduce_kernels.c's ARGBEST (the value-only kernel
over a chunk of 64 or more, then a vector scan for its first equal element;
the scalar loop below 64), against torch's values and indices exactly. Rows
of small integers (many ties, the best repeated across chunks), -0.0 beside
0.0, NaN first / middle / last / in later chunks, all equal, every dtype;
contiguous, transposed and ::2 rows."""
import ctypes
from ctypes import c_bool, c_int, c_void_p

import pytest

torch = pytest.importorskip("torch")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import lib  # noqa: E402

T, CT = c_void_p, c_void_p
ct.declare("ct_max_dim", c_int, [CT, c_int, c_bool, ct.TP, ct.TP])
ct.declare("ct_min_dim", c_int, [CT, c_int, c_bool, ct.TP, ct.TP])
ct.declare("ct_argmax", T, [CT, c_bool, c_int, c_bool])
ct.declare("ct_argmin", T, [CT, c_bool, c_int, c_bool])
ct.declare("ct_amax", T, [CT, ct.INTP, c_int, c_bool])
ct.declare("ct_amin", T, [CT, ct.INTP, c_int, c_bool])
pytestmark = ct.requires("ct_max_dim", "ct_min_dim", "ct_argmax", "ct_argmin", "ct_amax", "ct_amin")

GEN = torch.Generator().manual_seed(11)
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8]
LENGTHS = [1, 2, 15, 16, 17, 63, 64, 65, 100, 129, 1000, 4099]


def rows(n, dtype, span):
    """8 rows of n small integers in [0, span): ties everywhere"""
    k = torch.randint(0, span, (8, n), generator=GEN)
    return k.to(dtype)


def views(x):
    """(name, torch view, ctorch handle) with the rows along the last dim"""
    yield "contig", x, ct.from_torch(x)
    t = x.t().contiguous()  # stored transposed: rows strided
    yield "trans", t.t(), ct.check(lib.ct_t(ct.from_torch(t)))
    w = torch.zeros(x.shape[0], 2 * x.shape[1], dtype=x.dtype)
    w[:, ::2] = x
    hw = ct.from_torch(w)
    yield "::2", w[:, ::2], ct.check(lib.ct_slice(hw, 1, 0, 2 * x.shape[1], 2))


def check_all(x, what):
    for name, v, h in views(x):
        for fn, tfn in (("ct_max_dim", torch.max), ("ct_min_dim", torch.min)):
            cv, ci = c_void_p(), c_void_p()
            ct.check_int(getattr(lib, fn)(h, -1, False, ctypes.byref(cv), ctypes.byref(ci)))
            want = tfn(v, -1)
            got_v, got_i = ct.to_torch(cv.value), ct.to_torch(ci.value)
            assert torch.equal(got_i, want.indices), f"{what} {name} {fn} indices {got_i} vs {want.indices}"
            same_bits(got_v, want.values, f"{what} {name} {fn} values")
        for fn, tfn in (("ct_argmax", torch.argmax), ("ct_argmin", torch.argmin)):
            got = ct.to_torch(ct.check(getattr(lib, fn)(h, True, -1, False)))
            assert torch.equal(got, tfn(v, -1)), f"{what} {name} {fn}(-1)"
            got = ct.to_torch(ct.check(getattr(lib, fn)(h, False, 0, False)))
            assert torch.equal(got, tfn(v)), f"{what} {name} {fn}()"


def same_bits(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if want.dtype.is_floating_point:  # -0.0 and 0.0 told apart, NaN equal to NaN
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[want.element_size()]
        g, w = got.view(bits), want.view(bits)
        nan = want.isnan()
        assert torch.equal(got.isnan(), nan) and torch.equal(g[~nan], w[~nan]), f"{what}: {got} vs {want}"
    else:
        assert torch.equal(got, want), what


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_ties(dtype):
    for n in LENGTHS:
        for span in (2, 5, 200):
            check_all(rows(n, dtype, span), f"[8, {n}] span {span}")
        check_all(torch.full((8, n), 3, dtype=dtype), f"[8, {n}] all equal")


@pytest.mark.parametrize("dtype", DTYPES[:4], ids=lambda d: str(d)[6:])
def test_signed_zeros_and_nan(dtype):
    for n in LENGTHS:
        x = rows(n, dtype, 3) - 2  # -2, -1, 0: zeros are the max
        x[x == 0] = 0.0
        x[0, ::2] = -0.0  # row 0: -0.0 first (an even index), then 0.0
        x[1, 1::2] = -0.0
        check_all(x, f"[8, {n}] signed zeros")
        x = rows(n, dtype, 50)
        x[2, 0] = float("nan")
        x[3, n // 2] = float("nan")
        x[4, n - 1] = float("nan")
        x[5, n // 3] = x[5, n - 1] = float("nan")
        x[6, n - 1] = float("inf")
        x[7, 0] = float("-inf")
        check_all(x, f"[8, {n}] NaN / inf")


def test_int64_extremes():
    for n in (63, 64, 100, 1000):
        x = torch.randint(-2**62, 2**62, (8, n), generator=GEN, dtype=torch.int64)
        x[0, n // 2] = x[0, n - 1] = 2**63 - 1
        x[1, 3] = x[1, n - 2] = -2**63
        check_all(x, f"int64 [8, {n}]")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_amax_rows(dtype):
    """amax / amin (values only) of rows long enough for the per-row kernel
    (over 1 KB: four registers, then one overlapping load for the tail, then
    the fold) and of whole tensors: NaN in the first register, in the tail
    that the last load reads twice, last; +-inf; the extreme alone in the
    tail or in the first element."""
    for n in (16, 17, 31, 63, 64, 65, 127, 129, 255, 257, 300, 520, 1000, 1031, 4099):
        x = rows(n, dtype, 100) - (50 if dtype != torch.uint8 else 0)
        if dtype.is_floating_point:
            x[0, 0] = float("nan")
            x[1, n - 1] = float("nan")
            x[2, max(n - 5, 0)] = float("nan")
            x[3, n // 2] = float("inf")
            x[4, n // 3] = float("-inf")
        big = 120 if dtype != torch.int64 else 2**62
        x[5, n - 2] = big  # the extreme in the overlapping tail
        x[6, 0] = -big if dtype != torch.uint8 else 0
        x[7, n - 1] = -big if dtype != torch.uint8 else 0
        for name, v, h in views(x):
            for fn, tfn in (("ct_amax", torch.amax), ("ct_amin", torch.amin)):
                got = ct.to_torch(ct.check(getattr(lib, fn)(h, ct.i32([-1]), 1, False)))
                want = tfn(v, -1)
                assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got[~want.isnan()], want[~want.isnan()]), \
                    f"[8, {n}] {name} {fn}(-1): {got} vs {want}"
                got = ct.to_torch(ct.check(getattr(lib, fn)(h, None, 0, False)))
                want = tfn(v, tuple(range(v.dim())))
                assert torch.equal(got.isnan(), want.isnan()) and (want.isnan() or torch.equal(got, want)), \
                    f"[8, {n}] {name} {fn}(): {got} vs {want}"
