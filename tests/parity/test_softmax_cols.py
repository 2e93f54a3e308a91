"""softmax / log_softmax over a dim that is not the last (src/ops/kernels/softmax.c's
column blocks: a running max and sum per column, R rows at a time for narrow
columns, their states merged), against PyTorch: inner sizes 2-5000 (narrow
columns, multiples of the vector width and not, blocks of 1024 and their tails),
D from 1 to 4100 (groups of rows and the rows left), columns holding -inf, +inf,
NaN, all -inf, large magnitudes, non-contiguous inputs, empty tensors.

float32 / float64: NaN, inf and signs exactly, finite values within a few ulps
of torch's (more for long columns: torch adds the exps in order, we in a few
chains, rescaled as the max grows) and, for float32, within twice torch's own
distance from the float64 result, plus 8 ulps (columns whose max grows at every
row, rescaled each time: 75 ulps where torch's is 50; random ones: closer). float16 /
bfloat16: torch's float32 result rounded once (torch 1.13 computes bfloat16
columns so, and has no float16 kernel), 1 ulp of the 16-bit type allowed in a
few places (float results a few float ulps apart round apart near a midpoint),
and log_softmax near 0 within 2^-20 (|y| + 8): log(sum)'s float error."""
import math
from ctypes import c_int

import pytest

torch = pytest.importorskip("torch")

import ctorch_ffi as ct  # noqa: E402
from test_softmax_rows import check_ulps, fn_pair, ordered  # noqa: E402

ct.declare("ct_softmax", ct.T, [ct.T, c_int])
ct.declare("ct_log_softmax", ct.T, [ct.T, c_int])
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
IDS = ["f32", "f64", "f16", "bf16"]
# (shape, dim): inner = the product of the sizes after dim
SHAPES = [((300, 2), 0), ((65, 3), 0), ((3, 70, 7), 1), ((2, 129, 16), 1), ((2, 200, 17), 1),
          ((2, 64, 31), 1), ((3, 100, 33), 1), ((2, 40, 63), 1), ((2, 37, 64), 1), ((2, 50, 100), 1),
          ((1, 9, 1025), 1), ((2, 5, 5000), 1), ((4100, 24), 0), ((1, 3), 0), ((2, 4), 0), ((5, 1, 9), 1),
          ((31, 2, 5), 0), ((2, 8, 8), 1), ((2, 3, 4, 5), 1), ((3, 20, 6, 6), 1), ((1000, 40), 0)]


def specials(x, d, g):
    """columns (along d) with -inf, +inf, NaN, all -inf, and large magnitudes"""
    v = x.movedim(d, -1).reshape(-1, x.shape[d])  # a view when x is contiguous
    rows, n = v.shape
    if rows < 6 or n < 2:
        return x
    pick = torch.randperm(rows, generator=g)[:6].tolist()
    cols = torch.randint(0, n, (4,), generator=g).tolist()
    v[pick[0], cols[0]] = -math.inf
    v[pick[1], cols[1]] = math.inf
    v[pick[2], cols[2]] = math.nan
    v[pick[3]] = -math.inf
    v[pick[4]] *= 1e30 if x.dtype != torch.float16 else 1e3
    v[pick[5], cols[3]] = 80  # one dominant element, the others' exps underflow
    return x


def make(shape, d, g, dtype, scale=4.0):
    x = (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).movedim(d, -1).contiguous()
    x = specials(x.movedim(-1, d), d, g)
    return x.to(dtype)


def check(got, x, d, log, what):
    fn = fn_pair(log)[0]
    dt = x.dtype
    assert got.dtype == dt and got.shape == x.shape and got.is_contiguous(), what
    if dt in (torch.float16, torch.bfloat16):
        want = fn(x.float(), d).to(dt)
        gn, wn = got.isnan(), want.isnan()
        assert torch.equal(gn, wn), f"{what}: NaN at {(gn != wn).nonzero()[:5].tolist()}"
        gi, wi = got[~wn].view(torch.int16).long(), want[~wn].view(torch.int16).long()
        gi, wi = torch.where(gi < 0, -(gi & 0x7fff), gi), torch.where(wi < 0, -(wi & 0x7fff), wi)
        far = (gi - wi).abs()
        if log:  # near 0, (x - max) - log(sum) keeps log's float error (2^-24 of the sum, about 1)
            gv, wv = got[~wn].double(), want[~wn].double()
            far = torch.where((gv - wv).abs() <= 2.0**-20 * (wv.abs() + 8), 0, far)
        assert far.max().item() <= 1 if far.numel() else True, f"{what}: {far.max().item()} ulps of {dt}"
        nd = int((far > 0).sum())
        assert nd <= max(2, far.numel() // 500), f"{what}: {nd} of {far.numel()} differ from torch"
        return
    n = x.shape[d] if x.dim() else 1
    want = fn(x, d)
    g2, w2 = got.movedim(d, -1), want.movedim(d, -1)
    check_ulps(g2, w2, 16 if n <= 70 else 128, log, what)
    assert torch.equal(got.signbit()[~want.isnan()], want.signbit()[~want.isnan()]), f"{what}: sign"
    if dt == torch.float32 and not log:
        ref = fn(x.double(), d).float()
        ok = ref.isfinite() & (ref.abs() > 1e-30)
        if ok.any():
            ours = (ordered(got[ok]) - ordered(ref[ok])).abs().max().item()
            theirs = (ordered(want[ok]) - ordered(ref[ok])).abs().max().item()
            assert ours <= 2 * theirs + 8, f"{what}: {ours} ulps from the float64 result, torch {theirs}"


def run(x, d, log, what):
    ct_fn = fn_pair(log)[1]
    got = ct.to_torch(ct.check(ct_fn(ct.from_torch(x), d)))
    check(got, x, d, log, what)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shapes, seed", [("SHAPES", 81), ("SMALL", 111)], ids=["blocks", "small"])
def test_cols(dtype, log, shapes, seed):
    """SHAPES: the column blocks; SMALL (below): the small slices"""
    g = torch.Generator().manual_seed(seed + log)
    for shape, d in globals()[shapes]:
        run(make(shape, d, g, dtype), d, log, f"{dtype} {shape} dim {d}")


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_cols_layouts(dtype, log):
    """non-contiguous inputs (copied first) and negative dims"""
    g = torch.Generator().manual_seed(91 + log)
    w = (torch.randn(6, 50, 40, generator=g, dtype=torch.float64) * 5).to(dtype)
    views = {"t": (w[0].t(), 0), "::2": (w[:, ::2, 1:], 1), "permute": (w.permute(2, 1, 0), 0),
             "narrow": (w[:, 3:47, :33], -2), "expand": (w[:, :1, :17].expand(6, 90, 17), 1)}
    for name, (v, d) in views.items():
        run(v, d, log, f"{dtype} {name}")


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_cols_long(log):
    """long columns (many rescales of the running sum) and wide rows (blocks of
    1024 columns and a tail), float32 and bfloat16"""
    g = torch.Generator().manual_seed(101 + log)
    for dtype in (torch.float32, torch.bfloat16):
        for shape, d, sc in [((4099, 70), 0, 1.0), ((3000, 2100), 0, 3.0), ((2, 2000, 3), 1, 10.0)]:
            x = (torch.randn(*shape, generator=g) * sc).to(dtype)
            if shape[0] > 1000:  # ascending columns: a new max at every row
                x[:, 0] = torch.linspace(-30, 30, shape[0]).to(dtype)
            run(x, d, log, f"{dtype} {shape} dim {d}")


# small slices (D * inner <= 16384, 4096 when inner exceeds the vector width) of
# columns tiling a vector: inner dividing the vector width (the slice read flat, a
# column's lanes combined) or a multiple of it; slices whose element count leaves a
# partial vector, D of 1, one slice only (dim 0), the largest slices and the first
# past them (the blocks again)
SMALL = [((300, 8, 8), 1), ((33, 5, 4), 1), ((7, 3, 2), 1), ((50, 16, 16), 1), ((9, 4, 64), 1),
         ((3, 7, 48), 1), ((5, 33, 2), 1), ((6, 1, 8), 1), ((2, 2048, 8), 1), ((2, 2049, 8), 1),
         ((2, 64, 64), 1), ((2, 65, 64), 1), ((2, 1024, 16), 1), ((2, 1025, 16), 1),
         ((40, 3, 4, 2), 1), ((257, 4), 0), ((64, 2), 0), ((3, 255, 16), 1), ((4, 9, 32), 1), ((100, 17, 4), -2)]



@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_cols_empty(dtype):
    for shape, d in [((0, 5, 3), 1), ((4, 0, 3), 1), ((4, 5, 0), 1), ((0, 3), 0)]:
        for log in (False, True):
            x = torch.zeros(shape, dtype=dtype)
            got = ct.to_torch(ct.check(fn_pair(log)[1](ct.from_torch(x), d)))
            assert got.shape == x.shape and got.dtype == dtype, f"{shape}"
