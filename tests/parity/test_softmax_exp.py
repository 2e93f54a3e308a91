"""softmax / log_softmax rows on vmath.h's softmax exps (src/ops/kernels/softmax.c:
vm_expf16_tab, a 16-entry table and a cubic, and vm_exp8_le; both without the
upper clamp, as x - max <= 0): the exp itself, read off rows [0, d] whose sum
rounds to 1 (so y[1] is exp(d) as computed), to 1 ulp of the double exp (float64:
1.5, the reference's own rounding) over d's whole range (each table entry, the
subnormal results, 0); and rows whose x - max spans [-110, 0] in every dtype,
odd lengths (masked tails), with -inf, +inf, NaN and all -inf rows, against
torch within test_softmax_rows.py's bounds, and as ::2 and ::3 slices (gathered
rows, the next one prefetched as it is read) bit for bit the contiguous rows'
results."""
import math
from ctypes import c_int

import pytest

torch = pytest.importorskip("torch")

import ctorch_ffi as ct  # noqa: E402
from test_softmax_rows import check16, check_ulps, fn_pair  # noqa: E402
from test_softmax_transposed import BITS  # noqa: E402

ct.declare("ct_softmax", ct.T, [ct.T, c_int])
ct.declare("ct_log_softmax", ct.T, [ct.T, c_int])
# d where 1 + e^d rounds to 1, down past exp's underflow to 0
LOW = {torch.float32: (-110.0, -17.5), torch.float64: (-750.0, -37.5)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_exp_through_rows(dtype):
    lo, hi = LOW[dtype]
    g = torch.Generator().manual_seed(81)
    d = torch.cat([torch.linspace(lo, hi, 200_003, dtype=torch.float64),
                   torch.rand(100_000, generator=g, dtype=torch.float64) * (hi - lo) + lo]).to(dtype)
    x = torch.stack([torch.zeros_like(d), d], 1)  # rows of 2: the masked tail
    got = ct.to_torch(ct.check(ct.lib.ct_softmax(ct.from_torch(x), -1)))
    assert torch.equal(got[:, 0], torch.ones_like(d)), "the sums are not 1"
    ref = d.double().exp()
    fi = torch.finfo(dtype)
    # the ulp of ref in dtype (ref in [2^(e-1), 2^e)), the subnormals' below
    ulp = torch.pow(2.0, (torch.frexp(ref)[1] - 1 + int(math.log2(fi.eps))).double())
    ulp = ulp.clamp(min=fi.tiny * fi.eps)
    err = ((got[:, 1].double() - ref).abs() / ulp)
    bound = 1.0 if dtype == torch.float32 else 1.5  # + the double reference's own 0.5
    assert err.max().item() <= bound, f"{dtype}: {err.max().item():.3f} ulp at d = {d[err.argmax()].item()!r}"


def spans(n, rows, g, dtype):
    """rows of n whose x - max covers [-110, 0], shuffled, with specials; the
    top three within 1 of each other, so that the sum is not near 1 (there a
    float ulp of the sum, in torch's order or another, is much of log(sum), and
    16-bit log_softmax's near-ties are common: the builds without AVX-512)"""
    x = -torch.rand(rows, n, generator=g, dtype=torch.float64) * 110 + 5
    x[:, :3] = torch.tensor([5.0, 4.5, 4.0], dtype=torch.float64)[:n]  # the max first
    x = x[:, torch.randperm(n, generator=g)] if n > 1 else x
    if rows >= 4:
        x[0, n // 2] = -math.inf
        x[1, n // 3] = math.inf
        x[2, n - 1] = math.nan
        x[3] = -math.inf
    return x.to(dtype)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16],
                         ids=["f32", "f64", "f16", "bf16"])
def test_wide_rows(dtype, log):
    g = torch.Generator().manual_seed(91 + log)
    fn, ct_fn = fn_pair(log)
    for n in [1, 2, 15, 16, 17, 33, 255, 1001]:
        x = spans(n, 64, g, dtype)
        what = f"{dtype} n={n}"
        got = ct.to_torch(ct.check(ct_fn(ct.from_torch(x), -1)))
        for es in (2, 3):  # ::2 and ::3 slices: rows gathered, the next one prefetched
            w = torch.zeros(x.shape[0], n * es, dtype=dtype)
            w[:, ::es] = x
            gs = ct.to_torch(ct.check(ct_fn(ct.from_torch(w[:, ::es]), -1)))
            assert torch.equal(gs.view(BITS[dtype]), got.view(BITS[dtype])), f"{what} ::{es}: not the contiguous bits"
        if dtype in (torch.float16, torch.bfloat16):
            check16(got, x, log, what)
            continue
        check_ulps(got, fn(x, -1), 8 if n <= 70 else 32, log, what)
