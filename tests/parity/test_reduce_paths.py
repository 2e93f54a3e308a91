"""Parity of the reduction engine's layout paths with PyTorch: reduced dims
walked in memory order (full and partial reductions of transposed / permuted /
expanded inputs; index-returning reductions keep logical order), sums across a
strided kept dim (sum(0) of a ::2 slice), and softmax of 16-bit floats, for
every dtype."""
import itertools
import math
from ctypes import POINTER, c_bool, c_double, c_int, c_void_p

import pytest

torch = pytest.importorskip("torch")
import ctorch_ffi as ct  # noqa: E402

lib = ct.lib
T = CT = c_void_p
INTP = POINTER(c_int)
for _n in ["ct_sum_dims", "ct_amax", "ct_amin", "ct_logsumexp"]:
    ct.declare(_n, T, [CT, INTP, c_int, c_bool])
ct.declare("ct_sum", T, [CT])
ct.declare("ct_argmax", T, [CT, c_bool, c_int, c_bool])
ct.declare("ct_prod_dim", T, [CT, c_int, c_bool])
for _n in ["ct_var", "ct_std"]:
    ct.declare(_n, T, [CT, INTP, c_int, c_double, c_bool])
for _n in ["ct_softmax", "ct_log_softmax", "ct_cumsum", "ct_cumprod"]:
    ct.declare(_n, T, [CT, c_int])

GEN = torch.Generator().manual_seed(7)
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8, torch.bool]


def rand(shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape, generator=GEN) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(0 if dtype == torch.uint8 else -50, 50, shape, generator=GEN, dtype=dtype)
    return torch.randn(shape, generator=GEN, dtype=torch.float64).to(dtype)


def tol(dtype):
    return {torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2), torch.float32: (1e-5, 1e-4)}.get(
        dtype, (1e-10, 1e-10))


def dims(*d):
    return (c_int * len(d))(*d), len(d)


def layouts(dtype):
    """Inputs whose memory order differs from the logical order."""
    return {
        "t": rand((300, 70), dtype).t(),
        "permute": rand((9, 40, 33), dtype).permute(2, 0, 1),
        "expand": rand((1, 50, 33), dtype).expand(20, 50, 33),
        "slice": rand((64, 200), dtype)[:, ::2],
        "slice-t": rand((200, 64), dtype)[::2].t(),
    }


def torch_sum(x, *d):
    """torch's sum, of 16-bit floats accumulated in float32 as torch's contiguous
    kernels do (torch 1.13's strided bfloat16 sums stray 10+ ulps: -264 for a
    [130, 200] view whose sum is -251.6)"""
    if x.dtype in (torch.float16, torch.bfloat16):
        return x.float().sum(*d).to(x.dtype)
    return x.sum(*d)


def check_sums(name, x, dtype):
    """sum() and sum(d) for every d of x (a view) against torch; the handle and tolerances"""
    h = ct.from_torch(x)
    rtol, atol = tol(dtype)
    atol *= x.numel() ** 0.5
    ct.assert_close(ct.check(lib.ct_sum(h)), torch_sum(x), rtol=rtol, atol=atol, what=f"{name} sum(): ")
    for d in range(x.dim()):
        da, nd = dims(d)
        ct.assert_close(ct.check(lib.ct_sum_dims(h, da, nd, False)), torch_sum(x, d), rtol=rtol, atol=atol,
                        what=f"{name} sum({d}): ")
    return h, rtol, atol


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_sum_layouts(dtype):
    for name, x in layouts(dtype).items():
        h, rtol, atol = check_sums(name, x, dtype)
        da, nd = dims(0, x.dim() - 1)
        ct.assert_close(ct.check(lib.ct_sum_dims(h, da, nd, True)), x.sum((0, x.dim() - 1), keepdim=True),
                        rtol=rtol, atol=atol, what=f"{name} sum((0, -1)): ")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.float16],
                         ids=lambda d: str(d)[6:])
def test_order_sensitive_reductions(dtype):
    """argmax over everything reports logical (flattened) positions: ties and all."""
    for name, x in layouts(dtype).items():
        x = (x.to(torch.float64) // 2).to(dtype) if dtype.is_floating_point else x // 7  # many ties
        h = ct.from_torch(x)
        ct.assert_close(ct.check(lib.ct_argmax(h, False, 0, False)), x.argmax(), what=f"{name} argmax(): ")
        da, nd = dims(*range(x.dim()))
        ct.assert_close(ct.check(lib.ct_amax(h, da, nd, False)), x.amax(tuple(range(x.dim()))),
                        what=f"{name} amax(): ")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("step", [2, 3, 5])
def test_minmax_across_rows_of_a_strided_slice(dtype, step):
    """amax / amin / argmax / logsumexp over dim 0 of x[:, ::step], as wide as
    several blocks of the row gathers (16-bit rows widened through a staging
    area that once overran its stack buffer from 342 columns on)"""
    for cols in (341, 342, 343, 700, 1030):
        x = rand((9, cols * step), dtype)[:, ::step]
        x[4, cols // 2] = float("nan")
        h = ct.from_torch(x)
        da, nd = dims(0)
        what = f"[9, {cols}] ::{step}: "
        ct.assert_close(ct.check(lib.ct_amax(h, da, nd, False)), x.amax(0), what="amax " + what)
        ct.assert_close(ct.check(lib.ct_amin(h, da, nd, False)), x.amin(0), what="amin " + what)
        ct.assert_close(ct.check(lib.ct_argmax(h, True, 0, False)), x.argmax(0), what="argmax " + what)
        rtol, atol = tol(dtype)
        ct.assert_close(ct.check(lib.ct_logsumexp(h, da, nd, False)), x.float().logsumexp(0).to(dtype),
                        rtol=rtol, atol=atol, what="logsumexp " + what)


def test_var_past_dbl_max():
    """float64 squared deviations past DBL_MAX: inf, as torch's Welford (the
    two-pass correction made inf - inf: NaN); infinities and NaN still NaN"""
    for v in ([1.7e308, 0.0, 0.0, 0.0], [1e200, -1e200, 3.0, 1e160], [1.7e308, -1.7e308], [1.0, 2.0, math.inf],
              [1.0, math.nan], [-math.inf, 1.0]):
        x = torch.tensor(v, dtype=torch.float64)
        h = ct.from_torch(x)
        da, nd = dims(0)
        for name, want in (("var", x.var()), ("std", x.std())):
            got = ct.to_torch(ct.check(getattr(lib, "ct_" + name)(h, da, nd, 1.0, False)))
            assert torch.equal(got, want) or (got.isnan() and want.isnan()), f"{name}({v}): {got} != {want}"
    # equal values whose sum passes DBL_MAX: torch's Welford along a dim gives 0
    # (its all-dims path, a sum, gives inf: ctorch gives its dims' 0 there too)
    for v in (1.7e308, -1.7e308, 9e307, 1e308):
        x = torch.tensor([[v] * 5, [v, 1.0, 2.0, 3.0, 4.0], [v, 0.9 * v, v, v, v], [v / 3, v / 3, v / 3, 0, 0]],
                         dtype=torch.float64)
        for xl in (x, x.t().contiguous().t()):
            da, nd = dims(1)
            for name in ("var", "std"):
                got = ct.to_torch(ct.check(getattr(lib, "ct_" + name)(ct.from_torch(xl), da, nd, 1.0, False)))
                want = getattr(torch, name)(xl, 1)
                assert torch.equal(got, want), f"{name}({xl.tolist()}, 1): {got} != {want}"
        for name in ("var", "std"):
            got = ct.to_torch(ct.check(getattr(lib, "ct_" + name)(ct.from_torch(x[0]), None, 0, 1.0, False)))
            assert float(got) == 0.0, f"{name}({x[0].tolist()}): {got}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=lambda d: str(d)[6:])
def test_var_logsumexp_layouts(dtype):
    for name, x in layouts(dtype).items():
        h = ct.from_torch(x)
        da, nd = dims(*range(x.dim()))
        ct.assert_close(ct.check(lib.ct_var(h, da, nd, 1.0, False)), x.var(),
                        rtol=1e-6, atol=1e-6, what=f"{name} var(): ")
        ct.assert_close(ct.check(lib.ct_logsumexp(h, da, nd, False)), x.logsumexp(tuple(range(x.dim()))),
                        rtol=1e-6, atol=1e-6, what=f"{name} logsumexp(): ")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16],
                         ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("n", [3, 7, 1000, 100003])
def test_var_of_equal_values_is_zero(dtype, n):
    """Columns of equal values have variance exactly 0 along the column, as torch's
    Welford gives (a mean that rounds left a tiny variance, and std's gradient,
    masked only where std is exactly 0, was then (x - mean) / std: noise of size 1)."""
    vals = torch.tensor([0.1, 1.7, 123.456, -3e4, 1e-3])
    for x in [vals.expand(n, 5).to(dtype).contiguous(), vals.to(dtype).expand(n, 5),
              vals.expand(n, 5).to(dtype).t().contiguous().t()]:
        h = ct.from_torch(x)
        for name, want in [("var", x.var(0)), ("std", x.std(0))]:
            got = ct.to_torch(ct.check(getattr(lib, "ct_" + name)(h, *dims(0), 1.0, False)))
            assert torch.equal(got, want) and not want.any(), f"{name} of {x.stride()}: {got} vs {want}"


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_bfloat16_scans_accumulate_in_float(op):
    """bfloat16 scans accumulate in float, as torch's acc_type: bit for bit the same
    (a double accumulator rounds differently and keeps products past float's range
    finite where torch's are inf)."""
    for scale in [3.0, 1.5]:
        x = (rand((64, 3000), torch.float64) * scale).to(torch.bfloat16)
        for d in [0, 1]:
            got = ct.to_torch(ct.check(getattr(lib, "ct_" + op)(ct.from_torch(x), d)))
            assert torch.equal(got, getattr(x, op)(d)), f"{op} along {d}, scale {scale}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64],
                         ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("shape,dim", [((64, 1000), -1), ((3, 4097), -1), ((70, 5, 9), 1), ((300, 33), 0)])
def test_softmax_dtypes(dtype, shape, dim):
    """16-bit floats compute in float32 and round once, as torch."""
    x = (rand(shape, torch.float64) * 4).to(dtype)
    h = ct.from_torch(x)
    rtol, atol = tol(dtype)
    for fn, tf in (("ct_softmax", torch.softmax), ("ct_log_softmax", torch.log_softmax)):
        want = tf(x.float(), dim).to(dtype) if dtype in (torch.float16, torch.bfloat16) else tf(x, dim)
        ct.assert_close(ct.check(getattr(lib, fn)(h, dim)), want, rtol=rtol, atol=atol, what=f"{fn}: ")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64],
                         ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("shape,dim", [((2, 4, 8), 1), ((3, 1, 16), 1), ((5, 23), 0), ((7, 3, 2050), 1),
                                       ((4101, 9), 0), ((2, 6, 4103), 1), ((3, 5, 2, 12), 1)])
def test_softmax_columns(dtype, shape, dim):
    """softmax / log_softmax off the last dim (columns: one running max and sum
    per column, blocks of columns, a last vector of fewer lanes), with columns
    of -inf (NaN, as torch), one +inf, one NaN, one far below 0, and large values."""
    x = (rand(shape, torch.float64) * 6).to(dtype)
    xc = x.movedim(dim, -1)  # a view: xc[p] is the column at p
    others = xc.shape[:-1]
    n = xc.numel() // shape[dim]
    for c, v in [(0, float("-inf")), (n // 2, float("nan")), (n - 1, 60.0), (n // 3, -300.0)]:
        p = []
        for sz in reversed(others):
            p.append(c % sz)
            c //= sz
        col = xc[tuple(reversed(p))]
        if v == 60.0:
            col[:1] = v
        elif v == -300.0:  # shifted far down: exps of x - max, not of x
            col -= 300
        else:
            col.fill_(v)
    if x.numel() > 40:
        x.view(-1)[37] = float("inf")
    h = ct.from_torch(x)
    rtol, atol = tol(dtype)
    for fn, tf in (("ct_softmax", torch.softmax), ("ct_log_softmax", torch.log_softmax)):
        want = tf(x.float(), dim).to(dtype) if dtype in (torch.float16, torch.bfloat16) else tf(x, dim)
        got = ct.to_torch(ct.check(getattr(lib, fn)(h, dim)))
        assert torch.equal(got.isnan(), want.isnan()), f"{fn}: NaN positions differ"
        torch.testing.assert_close(got.nan_to_num(0.0), want.nan_to_num(0.0), rtol=rtol, atol=atol, msg=fn)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64],
                         ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("base,perm", [((13, 4101), (1, 0)), ((100, 8), (1, 0)), ((9, 2050), (1, 0)),
                                       ((3, 21, 37), (0, 2, 1)), ((21, 2, 37), (1, 2, 0))])
def test_softmax_of_transposes(dtype, base, perm):
    """softmax / log_softmax along the last dim of a permuted tensor whose last
    dim steps far and another dim by 1 (a transpose's rows, adjacent in memory),
    with rows of -inf, NaN, +inf, one far below 0; rows and row counts not
    multiples of the vectors."""
    b = (rand(base, torch.float64) * 6).to(dtype)
    x = b.permute(*perm)
    rows = x.reshape(-1, x.shape[-1]) if x.is_contiguous() else None
    assert rows is None and x.stride(-1) != 1
    idx = [tuple(int(i) for i in torch.nonzero(torch.ones(x.shape[:-1]))[j]) for j in (0, -1)]
    x[idx[0]] = float("-inf")
    x[idx[1]][1] = float("inf")
    x[(0,) * (x.dim() - 2) + (x.shape[-2] // 2,)] -= 300
    if x.shape[-2] > 3:
        x[(0,) * (x.dim() - 2) + (3,)][2] = float("nan")
    h = ct.from_torch(x)
    rtol, atol = tol(dtype)
    for fn, tf in (("ct_softmax", torch.softmax), ("ct_log_softmax", torch.log_softmax)):
        want = tf(x.float(), -1).to(dtype) if dtype in (torch.float16, torch.bfloat16) else tf(x, -1)
        got = ct.to_torch(ct.check(getattr(lib, fn)(h, -1)))
        assert torch.equal(got.isnan(), want.isnan()), f"{fn}: NaN positions differ"
        torch.testing.assert_close(got.nan_to_num(0.0), want.nan_to_num(0.0), rtol=rtol, atol=atol, msg=fn)


ct.declare("ct_mean_dims", T, [CT, INTP, c_int, c_bool])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.float16, torch.int32],
                         ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("shape", [(5, 0), (7, 1), (3, 63), (4, 64), (5, 65), (2, 4097), (3, 3, 129), (1, 70000)])
def test_last_dim_rows(dtype, shape):
    """Reductions over the contiguous last dim: one kernel call per output row."""
    x = rand(shape, dtype)
    if dtype.is_floating_point and x.numel() > 8:
        x.view(-1)[5] = float("nan")  # one row with a NaN: amax / argmax / sum see it
    h = ct.from_torch(x)
    rtol, atol = tol(dtype)
    atol *= max(shape[-1], 1) ** 0.5
    da, nd = dims(-1)
    ct.assert_close(ct.check(lib.ct_sum_dims(h, da, nd, False)), x.sum(-1), rtol=rtol, atol=atol, what="sum(-1): ")
    if dtype.is_floating_point:
        ct.assert_close(ct.check(lib.ct_mean_dims(h, da, nd, True)), x.mean(-1, keepdim=True), rtol=rtol,
                        atol=atol, what="mean(-1): ")
    if shape[-1] == 0:
        return
    ct.assert_close(ct.check(lib.ct_amax(h, da, nd, False)), x.amax(-1), what="amax(-1): ")
    if dtype != torch.float16:
        ct.assert_close(ct.check(lib.ct_argmax(h, True, -1, False)), x.argmax(-1), what="argmax(-1): ")
    if dtype in (torch.float32, torch.float64):
        ct.assert_close(ct.check(lib.ct_var(h, da, nd, 1.0, False)), x.var(-1), rtol=1e-5, atol=1e-5,
                        what="var(-1): ")
        ct.assert_close(ct.check(lib.ct_logsumexp(h, da, nd, False)), x.logsumexp(-1), rtol=1e-5, atol=1e-5,
                        what="logsumexp(-1): ")


def outer_inputs(dtype):
    """Sums across the innermost kept dim: rows read in place, gathered with a
    stride of two or three elements, reduced over one or two (uncoalescable)
    dims, broadcast rows; counts of rows around the 4-row groups and 64-row
    flushes, widths around the vector width and the gathered block (1024)."""
    for nred, m in [(2, 8), (5, 33), (67, 17), (300, 1025), (129, 2049)]:
        yield f"{nred}x{m}", rand((nred, m), dtype), (0,)
        yield f"{nred}x{m}[:, ::2]", rand((nred, 2 * m), dtype)[:, ::2], (0,)
        yield f"{nred}x{m}[:, ::3]", rand((nred, 3 * m), dtype)[:, ::3], (0,)
    yield "3x9x40[:, :7, ::2]", rand((3, 9, 80), dtype)[:, :7, ::2], (0, 1)
    yield "5x4x70 (0, 1)", rand((5, 4, 70), dtype), (0, 1)
    yield "expand", rand((1, 70), dtype).expand(50, 70), (0,)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_outer_sums(dtype):
    for name, x, ds in outer_inputs(dtype):
        h = ct.from_torch(x)
        rtol, atol = tol(dtype)
        atol *= (x.numel() / x.shape[-1]) ** 0.5
        da, nd = dims(*ds)
        ct.assert_close(ct.check(lib.ct_sum_dims(h, da, nd, False)), x.sum(ds), rtol=rtol, atol=atol,
                        what=f"{name} sum{ds}: ")
        if dtype.is_floating_point:
            ct.assert_close(ct.check(lib.ct_mean_dims(h, da, nd, False)), x.mean(ds), rtol=rtol, atol=atol,
                            what=f"{name} mean{ds}: ")


@pytest.mark.parametrize("dtype", DTYPES + [torch.int8, torch.int16], ids=lambda d: str(d)[6:])
def test_sum_src_dtypes(dtype):
    """Sums that read 16-bit floats and integers in place: lengths around the 64
    lanes and the 4096-element blocks, rows, a large run split over threads,
    inf and NaN in 16-bit floats."""
    xs = [rand((n,), dtype) for n in (0, 1, 63, 64, 65, 4095, 4097, 9000, 100003)]
    xs += [rand((3, 4097), dtype), rand((5, 130), dtype)[:, 1:]]
    if dtype.is_floating_point:
        xs += [torch.tensor([1.0, float("inf"), 2.0] * 30, dtype=dtype),
               torch.tensor([1.0, float("nan"), float("inf")] * 30, dtype=dtype)]
    for x in xs:
        h = ct.from_torch(x)
        rtol, atol = tol(dtype)
        atol *= max(x.shape[-1], 1) ** 0.5
        ct.assert_close(ct.check(lib.ct_sum(h)), x.sum(), rtol=rtol, atol=atol * x.numel() ** 0.5,
                        what=f"{tuple(x.shape)} sum(): ")
        da, nd = dims(-1)
        ct.assert_close(ct.check(lib.ct_sum_dims(h, da, nd, False)), x.sum(-1), rtol=rtol, atol=atol,
                        what=f"{tuple(x.shape)} sum(-1): ")


def strided_inputs(dtype):
    """::2 slices and row-strided views read in place (inner runs and outer
    rows): lengths around the 64 lanes, the 16-wide vectors and the
    4096-element blocks, rows not a multiple of the four or eight added at a
    time, more than the 64 flushed rows."""
    for rows, cols in [(1, 1), (3, 63), (4, 64), (5, 65), (7, 4097), (8, 17), (9, 33), (70, 31), (130, 200),
                       (9, 9001), (200, 1030)]:
        w = rand((rows, 2 * cols + 1), dtype)
        yield f"[{rows},{cols}]", w[:, 1::2]
        yield f"[{rows},{cols}] rows", w[:, 1:cols + 1]
    yield "3-dim", rand((6, 5, 2 * 37), dtype)[:, :, ::2]
    yield "t", rand((2 * 40, 33), dtype)[::2].t()


@pytest.mark.parametrize("dtype", DTYPES + [torch.int8, torch.int16], ids=lambda d: str(d)[6:])
def test_strided_sums_in_place(dtype):
    """and a ::2 slice read in place sums to the same bits as its contiguous
    copy (the same lanes in the same order), sum() and sum(-1)"""
    for name, x in strided_inputs(dtype):
        h, _, _ = check_sums(name, x, dtype)
        c = ct.from_torch(x.contiguous())
        for f in (lambda t: lib.ct_sum(t), lambda t: lib.ct_sum_dims(t, *dims(x.dim() - 1), False)):
            got, want = ct.to_torch(ct.check(f(h))), ct.to_torch(ct.check(f(c)))
            assert torch.equal(got, want) or (got.isnan() == want.isnan()).all(), f"{name}: {got} vs {want}"


@pytest.mark.parametrize("layout", ["contig", "slice"])
def test_int64_sums_wrap(layout):
    """int64 sums wrap around as torch's (inner runs, outer rows, both strides)."""
    big = torch.full((9, 2 * 70), 2**62 + 12345, dtype=torch.int64)
    big[::2] = -(2**63) + 7
    x = big[:, ::2] if layout == "slice" else big[:, :70]
    h = ct.from_torch(x)
    for d in [None, 0, 1]:
        want = x.sum() if d is None else x.sum(d)
        if d is None:
            got = ct.check(lib.ct_sum(h))
        else:
            da, nd = dims(d)
            got = ct.check(lib.ct_sum_dims(h, da, nd, False))
        assert torch.equal(ct.to_torch(got), want), f"sum({d})"
    x32 = torch.full((300, 130), 2**31 - 1, dtype=torch.int32)[:, ::2]  # int32 rows widened to int64
    da, nd = dims(0)
    assert torch.equal(ct.to_torch(ct.check(lib.ct_sum_dims(ct.from_torch(x32), da, nd, False))), x32.sum(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16],
                         ids=lambda d: str(d)[6:])
def test_strided_sums_nan_inf(dtype):
    """inf and NaN through the in-place outer rows and ::2 runs."""
    w = rand((37, 2 * 50), dtype)
    w[3, 10], w[5, 20], w[6, 20], w[9, 30], w[9, 32] = float("inf"), float("inf"), float("-inf"), float("nan"), 1e4
    for x in (w, w[:, ::2], w.t()):
        h = ct.from_torch(x)
        rtol, atol = tol(dtype)
        for d in range(2):
            da, nd = dims(d)
            ct.assert_close(ct.check(lib.ct_sum_dims(h, da, nd, False)), x.sum(d), rtol=rtol, atol=atol * 40,
                            what=f"{tuple(x.stride())} sum({d}): ")


@pytest.mark.parametrize("n", [1, 17, 4099])
def test_softmax_exp_range(n):
    """float32 softmax over the whole range of the exp (x - max from 0 down
    past the underflow at -104, subnormal results included) within a few ulp
    of the exact result, log_softmax too."""
    x = torch.linspace(-112, 0, n, dtype=torch.float64)[torch.randperm(n, generator=GEN)].float()
    x = torch.stack([x, x + 30, x * 0.5, torch.full_like(x, -3.0)])
    h = ct.from_torch(x)
    want = torch.softmax(x.double(), -1)
    ct.assert_close(ct.check(lib.ct_softmax(h, -1)), want.float(), rtol=3e-6, atol=1e-44, what="softmax: ")
    ct.assert_close(ct.check(lib.ct_log_softmax(h, -1)), torch.log_softmax(x.double(), -1).float(), rtol=3e-6,
                    atol=3e-6, what="log_softmax: ")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=lambda d: str(d)[6:])
def test_short_rows(dtype):
    """sum / mean / amax / amin over rows of 1-257 elements (each row one kernel call:
    the lane folds, the per-output store), NaN and inf scattered in, against torch"""
    ops = [("sum", lib.ct_sum_dims, torch.sum), ("amax", lib.ct_amax, torch.amax), ("amin", lib.ct_amin, torch.amin)]
    if dtype.is_floating_point:
        ops.append(("mean", lib.ct_mean_dims, torch.mean))
    for cols in [1, 2, 15, 16, 31, 32, 33, 63, 64, 65, 100, 257]:
        x = rand((40, cols), dtype) * 100
        if dtype.is_floating_point:
            x[torch.rand(x.shape, generator=GEN) < 0.03] = math.inf
            x[torch.rand(x.shape, generator=GEN) < 0.03] = -math.inf
            x[torch.rand(x.shape, generator=GEN) < 0.03] = math.nan
        h = ct.from_torch(x)
        rtol, atol = tol(dtype)
        for name, cfn, tfn in ops:
            da, nd = dims(1)
            got, want = ct.to_torch(ct.check(cfn(h, da, nd, False))), tfn(x, 1)
            if name in ("amax", "amin"):  # exact, NaN wins
                assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got[~got.isnan()], want[~want.isnan()]), \
                    f"{name} rows of {cols}"
            else:
                ct.assert_close(ct.check(cfn(h, da, nd, False)), want, rtol=rtol, atol=atol * cols,
                                what=f"{name} rows of {cols}: ")


ct.declare("ct_norm", T, [CT, c_double, INTP, c_int, c_bool])
BLOCK_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]
BLOCK_COLS = [2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 300]


def block_input(rows, cols, dtype):
    """Rows of values for the short-row block kernels: floats * 100 with inf, -inf and NaN
    in the first third of the rows only; int64 near 2**62 (sums wrap), int32 near 2**31."""
    if dtype == torch.int64:
        return torch.randint(2**61, 2**62, (rows, cols), generator=GEN, dtype=torch.int64) * \
            (1 - 2 * torch.randint(0, 2, (rows, cols), generator=GEN))
    if dtype == torch.int32:
        return torch.randint(-2**31, 2**31 - 1, (rows, cols), generator=GEN, dtype=torch.int32)
    x = rand((rows, cols), dtype) * 100
    top = x[: rows // 3]
    for v, p in ((math.inf, 0.02), (-math.inf, 0.02), (math.nan, 0.02)):
        top[torch.rand(top.shape, generator=GEN) < p] = v
    return x


def block_ops(dtype):
    ops = [("sum", lambda h, d, k: lib.ct_sum_dims(h, *dims(d), k), lambda x, d, k: x.sum(d, keepdim=k)),
           ("amax", lambda h, d, k: lib.ct_amax(h, *dims(d), k), lambda x, d, k: x.amax(d, keepdim=k)),
           ("amin", lambda h, d, k: lib.ct_amin(h, *dims(d), k), lambda x, d, k: x.amin(d, keepdim=k))]
    if dtype.is_floating_point:
        ops += [("mean", lambda h, d, k: lib.ct_mean_dims(h, *dims(d), k), lambda x, d, k: x.mean(d, keepdim=k))]
        for p in (1.0, 2.0):
            ops.append((f"norm{p:g}", lambda h, d, k, p=p: lib.ct_norm(h, p, *dims(d), k),
                        lambda x, d, k, p=p: torch.linalg.vector_norm(x.double(), p, d, keepdim=k).to(x.dtype)))
    return ops


def check_block(name, got_h, want, dtype, cols, what):
    got = ct.to_torch(ct.check(got_h))
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if name in ("amax", "amin") or not dtype.is_floating_point:  # exact; NaN wins; int64 sums wrap
        assert torch.equal(got.isnan(), want.isnan()) if dtype.is_floating_point else True, what
        ok = ~want.isnan() if dtype.is_floating_point else torch.ones_like(want, dtype=torch.bool)
        assert torch.equal(got[ok], want[ok]), f"{what}: {got[ok][got[ok] != want[ok]][:4]} vs {want[ok][got[ok] != want[ok]][:4]}"
    else:
        rtol, atol = tol(dtype)
        if dtype in (torch.float16, torch.bfloat16):  # torch rounds partial sums of 16-bit floats differently
            atol *= 100
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol * cols * 100, equal_nan=True,
                                   msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("dtype", BLOCK_DTYPES, ids=lambda d: str(d)[6:])
def test_block_rows(dtype):
    """sum / mean / amax / amin / norm over rows of 2-300 elements, several rows per kernel
    call (16 or 8): row counts that leave a partial block, keepdim, rows spaced apart
    (x[::2]) and rows behind two kept dims that do not merge, NaN / inf, against torch"""
    for cols in BLOCK_COLS:
        x = block_input(37, cols, dtype)
        layouts = {"contiguous": x, "rows ::2": x[::2], "two kept dims": x[:36].view(6, 6, cols)[:, ::2]}
        for lname, v in layouts.items():
            h = ct.from_torch(v)
            d = v.dim() - 1
            for name, cfn, tfn in block_ops(dtype):
                for keep in (False, True):
                    check_block(name, cfn(h, d, keep), tfn(v, d, keep), dtype, cols,
                                f"{name} {lname} rows of {cols} keepdim={keep}")


@pytest.mark.parametrize("dtype", BLOCK_DTYPES, ids=lambda d: str(d)[6:])
def test_block_rows_threads(dtype):
    """the block kernels give the same bits on 1 and 2 threads (each row is reduced
    in an order fixed by its length), and match torch"""
    before = lib.ct_get_num_threads()
    try:
        for cols in (16, 50, 64):
            x = block_input(40000 // cols + 5, cols, dtype)
            h = ct.from_torch(x)
            for name, cfn, tfn in block_ops(dtype):
                res = []
                for nt in (1, 2):
                    lib.ct_set_num_threads(nt)
                    res.append(ct.to_torch(ct.check(cfn(h, 1, False))))
                assert torch.equal(res[0].view(-1).view(torch.uint8) if res[0].dtype.is_floating_point else res[0],
                                   res[1].view(-1).view(torch.uint8) if res[1].dtype.is_floating_point else res[1]), \
                    f"{name} rows of {cols}: 1 and 2 threads differ"
                check_block(name, cfn(h, 1, False), tfn(x, 1, False), dtype, cols, f"{name} rows of {cols}")
    finally:
        lib.ct_set_num_threads(before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64], ids=lambda d: str(d)[6:])
def test_block_prod(dtype):
    """prod over rows of 2-300 elements (float32 and int32 rows of up to 64: the
    block kernel, 8 rows a call, float32 multiplied in double, int32 in wrapping
    int64) and a partial block, keepdim, rows ::2, NaN / inf: against torch
    (integers exactly: products wrap the same whatever the order)"""
    for cols in BLOCK_COLS:
        x = block_input(37, cols, dtype)
        if dtype.is_floating_point:
            x = 1 + x / 1000  # products of 300 stay in range: torch overflows float32 earlier than double
        for lname, v in {"contiguous": x, "rows ::2": x[::2]}.items():
            h = ct.from_torch(v)
            for keep in (False, True):
                got, want = ct.check(lib.ct_prod_dim(h, 1, keep)), v.prod(1, keepdim=keep)
                what = f"prod {lname} rows of {cols} keepdim={keep}"
                if dtype.is_floating_point:
                    ct.assert_close(got, want, rtol=1e-6 * cols if dtype == torch.float32 else 1e-13 * cols,
                                    atol=0, what=what + ": ")
                else:
                    check_block("prod", got, want, dtype, cols, what)


def test_norm_inf_gradient_with_nan():
    """torch's inf / -inf norm gradient: the maxima (minima) and the NaNs share the
    gradient, sign(NaN) = 0 giving the NaNs none, so a NaN input leaves zeros (with
    the signs of the others) rather than NaNs"""
    lib.ct_norm.restype, lib.ct_norm.argtypes = T, [CT, c_double, INTP, c_int, c_bool]
    inf, nan = math.inf, math.nan
    for v in ([nan, 1.0, 3.0], [nan, 1.0, -3.0], [3.0, 3.0, 1.0], [inf, 1.0, nan], [-inf, 1.0],
              [[nan, 2.0], [1.0, -4.0]], [[1.0, -5.0], [5.0, 2.0]]):
        for p in (inf, -inf):
            for dims in ((), (0,), (-1,)):
                x = torch.tensor(v, dtype=torch.float64)
                if dims and x.dim() == 1 and dims == (-1,):
                    continue
                tx = x.clone().requires_grad_()
                n = torch.linalg.vector_norm(tx, p, dim=dims if dims else None)
                g = torch.randn(n.shape, dtype=torch.float64)
                want, = torch.autograd.grad(n, tx, g)
                hx = ct.leaf(x)
                da = (c_int * len(dims))(*dims) if dims else None
                got = ct.to_torch(ct.grads_of(ct.check(lib.ct_norm(hx, p, da, len(dims), False)), [hx], g)[0])
                assert torch.equal(got, want) and torch.equal(got.sign(), want.sign()), f"norm({v}, {p}, {dims}): {got} != {want}"


@pytest.mark.parametrize("create_graph", [False, True])
def test_cumprod_gradient_with_zeros_and_infinities(create_graph):
    """torch's cumprod_backward with zeros: before the first zero only the terms
    before it count (an inf after a zero does not make them NaN), at the first zero
    the terms up to the second zero (g masked there, then multiplied: an inf in
    between still gives NaN), nothing after it; every line of 2 and 3 values from
    0, 2, -1.5, inf, -inf, NaN, 0.5, first order and create_graph"""
    lib.ct_cumprod.restype, lib.ct_cumprod.argtypes = T, [CT, c_int]
    vals = [0.0, 2.0, -1.5, math.inf, -math.inf, math.nan, 0.5]
    for n in (2, 3):
        for v in itertools.product(vals, repeat=n):
            x = torch.tensor(v, dtype=torch.float64)
            tx = x.clone().requires_grad_()
            g = torch.tensor([1.0, -2.0, 0.5][:n], dtype=torch.float64)
            want, = torch.autograd.grad(tx.cumprod(0), tx, g, create_graph=create_graph)
            hx = ct.leaf(x)
            got = ct.to_torch(ct.grads_of(ct.check(lib.ct_cumprod(hx, 0)), [hx], g, create_graph=create_graph)[0])
            same = torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.detach().nan_to_num())
            assert same, f"cumprod {v}: {got} != {want}"
