"""Outer sums (reduce.c's outer-sum path, reduce_kernels.c's row kernels): x.sum(0)
of a contiguous matrix, x.t().sum(-1) (the same memory pattern), mean, keepdim,
::2 slices, over row counts 1..70 and widths 1..300 around the kernels' groups
(4, 8 rows) and vectors (16 lanes), and 4096 wide; float16, bfloat16, float32,
float64, int32, int64, uint8, bool against torch. Values are multiples of 1/4
small enough that every partial sum is exact: the results must equal torch's
bit for bit whatever the order of the additions. Random values are compared
within tolerance, NaN / inf placed in single rows, int32 / int64 sums wrap, and
1 and 2 threads give identical bits."""
import pytest

torch = pytest.importorskip("torch")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import lib  # noqa: E402
from ctypes import c_bool, c_int, c_void_p  # noqa: E402

T = c_void_p
ct.declare("ct_sum_dims", T, [T, ct.INTP, c_int, c_bool])
ct.declare("ct_mean_dims", T, [T, ct.INTP, c_int, c_bool])
pytestmark = ct.requires("ct_sum_dims", "ct_mean_dims", "ct_set_num_threads", "ct_get_num_threads")

GEN = torch.Generator().manual_seed(7)
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.int32, torch.int64, torch.uint8, torch.bool]
IDS = lambda d: str(d)[6:]  # noqa: E731
ROWS = list(range(1, 71))
WIDTHS = [1, 2, 7, 8, 15, 16, 17, 31, 33, 64, 65, 127, 130, 255, 257, 300]


def dims(d):
    return ct.i32([d]), 1


def exact(rows, cols, dtype):
    """multiples of 1/4 in [-2, 2] (floats), small integers (ints), 0 / 1 (bool)"""
    k = torch.randint(-8, 9, (rows, cols), generator=GEN)
    if dtype == torch.bool:
        return k > 0
    if dtype == torch.uint8:
        return (k + 8).to(dtype)
    return (k.double() / 4).to(dtype) if dtype.is_floating_point else k.to(dtype)


def layouts(x):
    """(name, torch view, ctorch view, reduced dim) of the outer-sum pattern:
    x.sum(0), x.t().sum(-1)"""
    h = ct.from_torch(x)
    yield "sum(0)", x, h, 0
    yield "t().sum(-1)", x.t(), ct.check(lib.ct_t(h)), -1


def same(got, want, what):
    g = ct.to_torch(got)
    assert g.dtype == want.dtype and g.shape == want.shape, f"{what}: {g.dtype}{tuple(g.shape)} vs {want.dtype}{tuple(want.shape)}"
    torch.testing.assert_close(g, want, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{what}: {m}")


def same_sums(x, what):
    """x.sum(0) and x.t().sum(-1) equal torch's bit for bit"""
    for name, v, hv, d in layouts(x):
        da, nd = dims(d)
        same(ct.check(lib.ct_sum_dims(hv, da, nd, False)), v.sum(d), f"{what} {name}")


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=IDS)
def test_exact_rows_widths(dtype):
    for rows in ROWS:
        for cols in ([1, 17, 64, 130] if rows % 7 else WIDTHS):
            x = exact(rows, cols, dtype)
            for name, v, hv, d in layouts(x):
                da, nd = dims(d)
                for keep in (False, True):
                    same(ct.check(lib.ct_sum_dims(hv, da, nd, keep)), v.sum(d, keepdim=keep),
                         f"{name} [{rows}, {cols}] keepdim={keep}")
                if dtype.is_floating_point:
                    same(ct.check(lib.ct_mean_dims(hv, da, nd, False)), v.double().mean(d).to(dtype)
                         if rows & (rows - 1) == 0 else v.mean(d), f"mean {name} [{rows}, {cols}]") \
                        if rows & (rows - 1) == 0 else ct.assert_close(
                            ct.check(lib.ct_mean_dims(hv, da, nd, False)), v.mean(d),
                            rtol=tol(dtype), atol=tol(dtype), what=f"mean {name} [{rows}, {cols}]: ")


def tol(dtype):
    return {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 1e-6, torch.float64: 1e-12}[dtype]


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=IDS)
def test_wide_and_sliced(dtype):
    """4096 wide (the path's column blocks), 4100 wide, ::2 slices of a wider base"""
    for rows, cols in [(70, 4096), (37, 4100), (9, 4096 + 33)]:
        x = exact(rows, cols, dtype)
        w = exact(rows, 2 * cols + 1, dtype)
        for xv in (x, w[:, ::2], w[:, 1::2]):
            for name, v, hv, d in layouts(xv):
                da, nd = dims(d)
                same(ct.check(lib.ct_sum_dims(hv, da, nd, False)), v.sum(d), f"{name} {tuple(xv.stride())} [{rows}, {cols}]")


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_random_values(dtype):
    """random values of mixed magnitude: within tolerance of torch"""
    for rows, cols in [(70, 300), (1000, 257), (4096, 64)]:
        x = (torch.randn(rows, cols, generator=GEN, dtype=torch.float64) * 10).to(dtype)
        for name, v, hv, d in layouts(x):
            da, nd = dims(d)
            want = v.double().sum(d)
            got = ct.to_torch(ct.check(lib.ct_sum_dims(hv, da, nd, False)))
            assert got.dtype == dtype
            err = (got.double() - want).abs()
            bound = tol(dtype) * (v.double().abs().sum(d) + 1) + want.abs() * torch.finfo(dtype).eps
            assert (err <= bound).all(), f"{name} [{rows}, {cols}]: max err {err.max()}"
            ct.assert_close(ct.check(lib.ct_mean_dims(hv, da, nd, True)), v.mean(d, keepdim=True),
                            rtol=tol(dtype) * 10, atol=tol(dtype) * 10, what=f"mean {name}: ")


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_nan_inf(dtype):
    x = exact(45, 100, dtype)
    x[3, 5] = float("nan")
    x[10, 6], x[40, 6] = float("inf"), float("-inf")
    x[0, 7] = float("inf")
    x[44, 8] = float("-inf")
    x[12, 99] = float("nan")
    same_sums(x, "")


def test_int_wrap():
    for dtype, big in [(torch.int64, 2**62 + 12345), (torch.int32, 2**31 - 1)]:
        x = torch.full((67, 130), big, dtype=dtype)
        x[::3] = torch.iinfo(dtype).min + 7
        same_sums(x, str(dtype))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64], ids=IDS)
def test_threads_identical(dtype):
    before = lib.ct_get_num_threads()
    try:
        for rows, cols in [(4096, 1024), (333, 4096), (1000, 300)]:
            x = (torch.randn(rows, cols, generator=GEN, dtype=torch.float64) * 100).to(dtype)
            for name, v, hv, d in layouts(x):
                da, nd = dims(d)
                res = []
                for nt in (1, 2):
                    lib.ct_set_num_threads(nt)
                    res.append(ct.to_torch(ct.check(lib.ct_sum_dims(hv, da, nd, False))))
                a, b = res
                if dtype.is_floating_point:
                    a, b = a.view(-1).view(torch.uint8), b.view(-1).view(torch.uint8)
                assert torch.equal(a, b), f"{name} [{rows}, {cols}]: 1 and 2 threads differ"
    finally:
        lib.ct_set_num_threads(before)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=IDS)
def test_row_splits(dtype):
    """Fewer column blocks than 8: the rows are summed in up to 8 splits of 64
    rows or more (reduce.c's run_outer), each started mid-tensor (row_seek),
    added in order. Row counts around the split sizes, widths 1..4100, two
    reduced dims whose splits start inside the outer one, permuted views; NaN /
    inf in the first and last rows, int64 wrap across splits: torch's bits."""
    cases = [(128, 33), (129, 1), (200, 256), (511, 17), (640, 4100), (1000, 64), (4099, 40)]
    for rows, cols in cases:
        same_sums(exact(rows, cols, dtype), f"[{rows}, {cols}]")
    x = exact(9 * 70, 130, dtype).view(9, 70, 130)
    hx = ct.from_torch(x)
    for perm, rd in (([0, 1, 2], [0, 1]), ([1, 0, 2], [0, 1]), ([2, 1, 0], [1, 2])):
        h = ct.check(lib.ct_permute(hx, ct.i32(perm), 3))
        v = x.permute(perm)
        same(ct.check(lib.ct_sum_dims(h, ct.i32(rd), 2, False)), v.sum(rd), f"sum{rd} of {tuple(v.stride())}")


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_row_splits_nan_inf(dtype):
    x = exact(1000, 70, dtype)
    x[0, 1] = x[999, 2] = float("nan")
    x[0, 3], x[999, 3] = float("inf"), float("-inf")
    x[500, 4] = x[998, 4] = float("inf")
    same_sums(x, "")


def test_row_splits_int_wrap():
    """int64 partial sums wrap within one split and the splits' sum wraps again"""
    x = torch.full((1000, 70), 2**62 + 12345, dtype=torch.int64)
    x[::5] = torch.iinfo(torch.int64).min + 7
    same_sums(x, "")


# ---- the other reductions across rows (reduce.c's run_outer_any) ----
from ctypes import c_double  # noqa: E402

ct.declare("ct_amax", T, [T, ct.INTP, c_int, c_bool])
ct.declare("ct_amin", T, [T, ct.INTP, c_int, c_bool])
ct.declare("ct_prod_dim", T, [T, c_int, c_bool])
ct.declare("ct_var", T, [T, ct.INTP, c_int, c_double, c_bool])
ct.declare("ct_std", T, [T, ct.INTP, c_int, c_double, c_bool])
ct.declare("ct_norm", T, [T, c_double, ct.INTP, c_int, c_bool])
ct.declare("ct_logsumexp", T, [T, ct.INTP, c_int, c_bool])
ct.declare("ct_all_dims", T, [T, ct.INTP, c_int, c_bool])
ct.declare("ct_any_dims", T, [T, ct.INTP, c_int, c_bool])
ct.declare("ct_max_dim", c_int, [T, c_int, c_bool, ct.TP, ct.TP])
ct.declare("ct_min_dim", c_int, [T, c_int, c_bool, ct.TP, ct.TP])
ct.declare("ct_argmax", T, [T, c_bool, c_int, c_bool])
ct.declare("ct_argmin", T, [T, c_bool, c_int, c_bool])
# rows: a single block and split; widths around the 512-column blocks
SHAPES = [(5, 9), (70, 33), (130, 513), (1000, 64), (333, 1100), (4099, 12)]


def outer_ops(dtype):
    """(name, ctorch fn of (handle, dim), torch fn of (view, dim), exact)"""
    import ctypes
    fl = dtype.is_floating_point
    a = lambda f: (lambda h, d: ct.check(getattr(lib, f)(h, ct.i32([d]), 1, False)))  # noqa: E731

    def pair(f, which):
        def run(h, d):
            v, i = c_void_p(), c_void_p()
            ct.check_int(getattr(lib, f)(h, d, False, ctypes.byref(v), ctypes.byref(i)))
            return (v, i)[which].value
        return run
    yield "amax", a("ct_amax"), lambda x, d: x.amax(d), True
    yield "amin", a("ct_amin"), lambda x, d: x.amin(d), True
    yield "max values", pair("ct_max_dim", 0), lambda x, d: x.max(d).values, True
    yield "max indices", pair("ct_max_dim", 1), lambda x, d: x.max(d).indices, True
    yield "min indices", pair("ct_min_dim", 1), lambda x, d: x.min(d).indices, True
    yield "argmax", lambda h, d: ct.check(lib.ct_argmax(h, True, d, False)), lambda x, d: x.argmax(d), True
    yield "argmin", lambda h, d: ct.check(lib.ct_argmin(h, True, d, False)), lambda x, d: x.argmin(d), True
    yield "all", a("ct_all_dims"), lambda x, d: x.all(d), True
    yield "any", a("ct_any_dims"), lambda x, d: x.any(d), True
    if dtype not in (torch.float16, torch.bfloat16, torch.bool):
        yield "prod", lambda h, d: ct.check(lib.ct_prod_dim(h, d, False)), lambda x, d: x.prod(d), not fl
    if fl:
        for corr in (0, 1):
            yield f"var{corr}", lambda h, d, c=corr: ct.check(lib.ct_var(h, ct.i32([d]), 1, c_double(c), False)), \
                lambda x, d, c=corr: x.double().var(d, correction=c).to(x.dtype), False
        yield "std", lambda h, d: ct.check(lib.ct_std(h, ct.i32([d]), 1, c_double(1), False)), \
            lambda x, d: x.double().std(d).to(x.dtype), False
        yield "logsumexp", a("ct_logsumexp"), lambda x, d: x.double().logsumexp(d).to(x.dtype), False
        for p in (0.0, 1.0, 2.0, 3.0, float("inf"), float("-inf")):
            yield f"norm{p}", lambda h, d, p=p: ct.check(lib.ct_norm(h, c_double(p), ct.i32([d]), 1, False)), \
                lambda x, d, p=p: torch.linalg.vector_norm(x.double(), ord=p, dim=d).to(x.dtype), False


def check_outer(x, what):
    for name, v, hv, d in layouts(x):
        for op, cfn, tfn, exact_ in outer_ops(x.dtype):
            try:
                want = tfn(v, d)
            except RuntimeError:  # argmax of bool: torch has no kernel (errors are tested elsewhere)
                continue
            got = cfn(hv, d)
            if exact_ or want.dtype in (torch.int64, torch.bool):
                same(got, want, f"{what} {name} {op}")
            else:
                ct.assert_close(got, want, rtol=tol(want.dtype) * 10, atol=tol(want.dtype) * 10,
                                what=f"{what} {name} {op}: ")


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=IDS)
def test_outer_other_reductions(dtype):
    """amax amin max / min (values, first indices) argmax argmin all any prod
    var std logsumexp norm (p 0 1 2 3 inf -inf) across rows: x(0) and
    x.t()(-1) against torch; small integer values (ties across splits)"""
    for rows, cols in SHAPES:
        x = exact(rows, cols, dtype)
        if dtype.is_floating_point:
            x = x / 2  # products of up to 4099 terms stay finite: |x| <= 1
        check_outer(x, f"[{rows}, {cols}]")


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_outer_other_reductions_nan_inf(dtype):
    x = exact(1000, 70, dtype) / 2
    x[0, 1] = x[999, 2] = float("nan")
    x[500, 2] = x[3, 3] = float("nan")
    x[0, 4], x[999, 4] = float("inf"), float("-inf")
    x[600, 5] = x[998, 5] = float("inf")
    x[:, 6] = float("-inf")
    x[:, 7] = 0.0
    x[::2, 7] = -0.0
    check_outer(x, "NaN / inf")


def test_outer_other_reductions_multi_dim():
    """two reduced dims whose splits start inside the outer one, permuted"""
    x = (torch.randint(-8, 9, (9, 70, 130), generator=GEN).double() / 8)
    hx = ct.from_torch(x)
    for perm, rd in (([0, 1, 2], [0, 1]), ([1, 0, 2], [0, 1]), ([2, 1, 0], [1, 2])):
        h = ct.check(lib.ct_permute(hx, ct.i32(perm), 3))
        v = x.permute(perm)
        for f, tf in (("ct_amax", torch.amax), ("ct_amin", torch.amin), ("ct_logsumexp", torch.logsumexp)):
            ct.assert_close(ct.check(getattr(lib, f)(h, ct.i32(rd), 2, False)), tf(v, rd), rtol=1e-12, atol=1e-12,
                            what=f"{f}{rd} of {tuple(v.stride())}: ")
        ct.assert_close(ct.check(lib.ct_var(h, ct.i32(rd), 2, c_double(1), False)), v.var(rd), rtol=1e-12,
                        atol=1e-12, what=f"var{rd}: ")


def test_outer_var_far_from_zero():
    """var across rows of values 1e4 + noise 1e-2 (cancellation: the squares
    are taken about the mean, which is summed in double): float32 within a few
    ulps of the exact variance of its inputs, float64 within 1e-9"""
    for dtype in (torch.float32, torch.float64):
        x = (1e4 + torch.randn(3000, 70, generator=GEN, dtype=torch.float64) * 1e-2).to(dtype)
        for name, v, hv, d in layouts(x):
            want = v.double().var(d)
            got = ct.to_torch(ct.check(lib.ct_var(hv, ct.i32([d]), 1, c_double(1), False))).double()
            bound = 1e-6 if dtype == torch.float32 else 1e-9
            assert ((got - want).abs() <= bound * want).all(), f"{dtype} {name}: {(got - want).abs().max()}"


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_norm_general_p(dtype):
    """norm for p other than 0 1 2 +-inf (float32 / 16-bit: |x|^p as e^(p log|x|)
    in double, vectorised; float64: libm's pow) along long rows (d = 1: eight
    lanes and a tail) and across rows (d = 0), against torch in float64: zeros
    (with p < 0: |0|^p = inf, the norm 0), +-inf, NaN, tiny and large values"""
    for rows, cols in [(5, 1003), (1000, 37), (3, 8)]:
        x = torch.randn(rows, cols, generator=GEN, dtype=torch.float64) * 3
        x[0, ::7] = 0.0
        x[1, 5] = float("inf")
        x[2, cols - 1] = float("-inf")
        x[rows - 1, 2] = float("nan")
        x[rows - 2, :] = 0.0
        x[rows - 3, 3:] = 1e-3
        x = x.to(dtype)
        h = ct.from_torch(x)
        for p in (3.0, 0.5, 1.5, 7.0, -1.0, -2.5):
            for d in (0, 1):
                want = torch.linalg.vector_norm(x.double(), ord=p, dim=d).to(dtype)
                got = ct.check(lib.ct_norm(h, c_double(p), ct.i32([d]), 1, False))
                ct.assert_close(got, want, rtol=tol(dtype) * 4, atol=0, what=f"[{rows}, {cols}] norm{p}({d}): ")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64],
                         ids=IDS)
def test_outer_minmax_layouts(dtype):
    """amax / amin across rows read in place in four-row trees, eight rows a
    call whether or not they lie one after another (wider than a block,
    column slices), ::2 slices read whole (their odd columns, here one NaN,
    left out at the end; 64-bit lanes from 2048 columns: [40, 4200]): rows
    not a multiple of the groups (1003: a split ends 43 rows in), NaN in a
    tree's first, second, fourth row and in a lone last row, in the vector
    lanes and the tail lanes, +-inf; exact against torch. max / min with
    their rows and argmax / argmin, which run in the same lanes, likewise:
    the values are multiples of 1/4 in [-2, 2], so every column has ties,
    within a split and across splits (the first row wins)"""
    fl = dtype.is_floating_point
    for rows, cols, view in ((1003, 70, "all"), (70, 4100, "all"), (1003, 100, "cols"), (333, 301, "step"),
                             (64, 4096 + 33, "all"), (9, 17, "all"), (37, 2100, "all"), (40, 4200, "step")):
        x = exact(rows, cols, dtype)
        if fl:
            for r, c in ((0, 1), (961, 20), (1000, 69), (1002, 3), (5, 40), (66, 4099), (3, 4100 + 20), (7, 16), (36, 2098), (39, 4001), (38, 4198)):
                if r < rows and c < cols:
                    x[r, c] = float("nan")
            x[rows // 2, 5] = float("inf")
            x[rows - 1, 6] = float("-inf")
        v = x[:, :70] if view == "cols" else x[:, ::2] if view == "step" else x
        h = ct.from_torch(x)
        hv = ct.check(lib.ct_slice(h, 1, 0, 70, 1)) if view == "cols" else \
            ct.check(lib.ct_slice(h, 1, 0, cols, 2)) if view == "step" else h
        for f, tf in (("ct_amax", torch.amax), ("ct_amin", torch.amin)):
            same(ct.check(getattr(lib, f)(hv, ct.i32([0]), 1, False)), tf(v, 0), f"[{rows}, {cols}] {view} {f}")
        for op, cfn, tfn, _ in outer_ops(dtype):  # values and first rows: ties in every column
            if op in ("max values", "max indices", "min indices", "argmax", "argmin"):
                same(cfn(hv, 0), tfn(v, 0), f"[{rows}, {cols}] {view} {op}")


@pytest.mark.parametrize("step", [1, 2, 3])
def test_var_rows_strided(step):
    """var / std across rows of float32 column slices: the means' rows read in
    place into double partials (steps 1, 2) or gathered into double (3), then
    the squared deviations; against torch in double, and a constant column's
    variance exactly 0 (the corrected two-pass sum)"""
    g = torch.Generator().manual_seed(7 + step)
    for rows, cols in ((1003, 77), (64, 4100), (5, 300)):
        base = (torch.randn(rows, cols * step, generator=g) * 3 + 100).float()
        base[:, 0] = 0.1  # constant: a column whose mean does not round to it
        x = base[:, ::step]
        hv = ct.check(lib.ct_slice(ct.from_torch(base), 1, 0, cols * step, step))
        for corr in (0, 1):
            got = ct.to_torch(ct.check(lib.ct_var(hv, ct.i32([0]), 1, c_double(corr), False)))
            want = x.double().var(0, correction=corr).float()
            torch.testing.assert_close(got, want, rtol=2e-6, atol=0, msg=lambda m: f"[{rows}, {cols}] ::{step}: {m}")
            assert got[0].item() == 0, f"[{rows}, {cols}] ::{step}: constant column var {got[0].item()}"
