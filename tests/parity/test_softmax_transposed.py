"""softmax / log_softmax along the last dim of transposed and permuted views,
whose rows lie far apart with another dim unit-stride (src/ops/kernels/softmax.c's
tblocks: blocks of adjacent rows, one lane per row, no copy, fewer blocks a task
when that keeps both threads busy, as [2100,40].t()'s; 16-bit views are copied
first, then run as rows): bit for bit the
contiguous path's results (the same sums in the same order), and torch's within
test_softmax_rows.py's bounds. Row lengths and block counts not multiples of the
block (16 rows, 8 for float64), rows holding -inf, +inf, NaN, all -inf."""
import math
from ctypes import c_int

import pytest

torch = pytest.importorskip("torch")

import ctorch_ffi as ct  # noqa: E402
from test_softmax_rows import check16, check_ulps, fn_pair  # noqa: E402

ct.declare("ct_softmax", ct.T, [ct.T, c_int])
ct.declare("ct_log_softmax", ct.T, [ct.T, c_int])
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
BITS = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def specials(v, g):
    """rows of the view v (last dim the softmax dim) with -inf, +inf, NaN, all -inf"""
    n = v.shape[-1]
    r = v.reshape(-1, n)  # a view: the rows are written in place
    rows = r.shape[0]
    pick = torch.randperm(rows, generator=g)[:4].tolist()
    cols = torch.randint(0, n, (3,), generator=g).tolist()
    if rows >= 4:
        r[pick[0], cols[0]] = -math.inf
        r[pick[1], cols[1]] = math.inf
        r[pick[2], cols[2]] = math.nan
        r[pick[3]] = -math.inf


def views(g, dtype):
    """(name, view): transposes and permutes of contiguous tensors"""
    out = []
    for a, b in [(37, 1025), (100, 3), (64, 300), (33, 200), (17, 16), (2100, 40), (5, 129)]:
        x = (torch.randn(a, b, generator=g, dtype=torch.float64) * 6).to(dtype)
        out.append((f"[{a},{b}].t()", x.t()))
    w = (torch.randn(5, 40, 70, generator=g, dtype=torch.float64) * 3).to(dtype)
    out.append(("permute(2,0,1)", w.permute(2, 0, 1)))
    out.append(("permute(0,2,1)", w.permute(0, 2, 1)))
    out.append(("permute(1,2,0)[::2]", w.permute(2, 1, 0)[:, ::2].transpose(1, 2)))
    for _, v in out:
        specials(v, g)
    return out


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64", "f16", "bf16"])
def test_transposed(dtype, log):
    g = torch.Generator().manual_seed(71 + log)
    fn, ct_fn = fn_pair(log)
    for name, v in views(g, dtype):
        what = f"{dtype} {name}"
        got = ct.to_torch(ct.check(ct_fn(ct.from_torch(v), -1)))
        assert got.shape == v.shape and got.is_contiguous(), what
        flat = ct.to_torch(ct.check(ct_fn(ct.from_torch(v.contiguous()), -1)))
        assert torch.equal(got.view(BITS[dtype]), flat.view(BITS[dtype])), f"{what}: not the contiguous path's bits"
        if dtype in (torch.float16, torch.bfloat16):
            check16(got, v.contiguous(), log, what)
            continue
        check_ulps(got, fn(v, -1), 32, log, what)
