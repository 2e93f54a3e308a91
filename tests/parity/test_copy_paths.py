"""Parity of the fast copy paths with PyTorch: the tiled transposed copy of
shape.c (contiguous() / copy_ from a tensor whose unit-stride dim is not the
last: 2-d transposes, 3-d and 4-d permutes), for every element size, sizes that
are not multiples of the tiles or of the SIMD blocks, storage offsets on either
side, and outputs large enough for streaming stores."""
import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import ctorch_ffi as ct  # noqa: E402
from ctorch_ffi import i64, lib, requires  # noqa: E402

pytestmark = requires("ct_as_strided", "ct_contiguous", "ct_copy_", "ct_empty", "ct_narrow")
ct.declare_elementwise([], ["add"])  # ct_add, ct_add_ (test_short_rows_binary)

DTYPES = [torch.bool, torch.uint8, torch.int16, torch.float16, torch.bfloat16, torch.int32,
          torch.float32, torch.int64, torch.float64]


def values(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    x = torch.arange(n, dtype=torch.int64).reshape(shape)
    if dtype == torch.bool:
        return x % 3 == 1
    if dtype in (torch.float16, torch.bfloat16):
        return (x % 251 - 125).to(dtype)  # exact in 16 bits, distinct nearby
    if dtype in (torch.uint8,):
        return (x % 256).to(dtype)
    return (x % 30011).to(dtype)


def check_contiguous(t, what):
    h = ct.from_torch(t)
    out = ct.check(lib.ct_contiguous(h))
    ct.assert_close(out, t.contiguous(), what=what)
    ct.assert_same_layout(out, t.contiguous(), what=what)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("rows,cols", [(64, 64), (67, 93), (129, 47), (16, 300), (300, 17), (8, 1000)])
def test_transpose_contiguous(dtype, rows, cols):
    """a.t().contiguous(): tile edges and SIMD block edges."""
    check_contiguous(values((rows, cols), dtype).t(), f"{rows}x{cols}.t(): ")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64], ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("rows,cols", [(2048, 2048), (1024, 2048), (1030, 2056), (1027, 2051)])
def test_transpose_large(dtype, rows, cols):
    """Outputs of 4 MiB and more: streaming stores from 8 MiB when the rows are
    whole lines (2048 columns), plain stores when not (2056 of float32 are, of
    float16 not)."""
    check_contiguous(values((rows, cols), dtype).t(), f"{rows}x{cols}.t(): ")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("perm", [(0, 2, 1), (2, 1, 0), (1, 2, 0), (2, 0, 1)])
def test_permute_3d(dtype, perm):
    check_contiguous(values((5, 37, 70), dtype).permute(*perm), f"permute{perm}: ")


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32, torch.float64], ids=lambda d: str(d)[6:])
def test_nchw_to_nhwc(dtype):
    check_contiguous(values((2, 3, 40, 41), dtype).permute(0, 2, 3, 1), "NCHW->NHWC: ")
    check_contiguous(values((2, 40, 41, 3), dtype).permute(0, 3, 1, 2), "NHWC->NCHW: ")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_offsets_and_strides(dtype):
    """A source with a storage offset and padded rows (a slice of a wider base)."""
    base = values((90, 130), dtype)
    check_contiguous(base[3:, 5:120].t(), "offset slice .t(): ")
    check_contiguous(base.t()[2:, 7:], "offset of .t(): ")
    check_contiguous(base[:, ::2].t(), "::2 slice .t(): ")  # unit stride nowhere: the engine


@pytest.mark.parametrize("dtype", [torch.int16, torch.float32, torch.float64], ids=lambda d: str(d)[6:])
def test_copy_into_offset_destination(dtype):
    """copy_ into rows 1.. of a contiguous buffer: dst is contiguous but not aligned."""
    src = values((80, 200), dtype).t()
    want = torch.zeros((201, 80), dtype=dtype)
    want[1:].copy_(src)
    hbuf = ct.from_torch(torch.zeros((201, 80), dtype=dtype))
    dst = ct.check(lib.ct_narrow(hbuf, 0, 1, 200))
    assert lib.ct_copy_(dst, ct.from_torch(src)) == 0, ct.last_error()
    ct.assert_close(hbuf, want, what="copy_ into rows 1..: ")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("size,step", [(1, 1), (3, 2), (4, 3), (5, 4), (8, 4), (9, 9), (16, 5), (33, 7)])
def test_short_rows(dtype, size, step):
    """Copies whose rows are short (x.unfold(1, size, step).contiguous()): the
    engine steps its pointers row by row along dim 1, and copies rows of 1 to
    264 bytes as two overlapping moves or one call. [67, 1031] and its 3-d
    view: over 32768 elements, so two threads split it, mid-row."""
    x = values((67, 1031), dtype)
    v = x.unfold(1, size, step)
    check_contiguous(v, f"unfold(1, {size}, {step}): ")
    w = values((3, 29, 1031), dtype).unfold(2, size, step)[:, 1:]
    check_contiguous(w, f"3-d unfold(2, {size}, {step})[:, 1:]: ")


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.float64], ids=lambda d: str(d)[6:])
def test_short_rows_binary(dtype):
    """a + b and a.add_(b) on views whose rows are short and whose outer dims
    do not merge: the stepped rows of a binary op, split across threads."""
    a, b = values((64, 203, 9), dtype), values((64, 203, 9), dtype) * 3
    va, vb = a[:, 1:, :5], b[:, :-1, 2:7]
    got = ct.check(lib.ct_add(ct.from_torch(va), ct.from_torch(vb)))
    ct.assert_close(got, va + vb, what="short-row add: ")
    ha = ct.from_torch(a)
    view = ct.check(lib.ct_narrow(ct.check(lib.ct_narrow(ha, 1, 1, 202)), 2, 0, 5))
    assert lib.ct_add_(view, ct.from_torch(vb)) == 0, ct.last_error()
    want = a.clone()
    want[:, 1:, :5] += vb
    ct.assert_close(ha, want, what="short-row add_: ")


def test_copy_between_views_and_devices_as_torch():
    """torch 1.13's copy_: a tensor onto itself is a no-op, another expanded view of
    the same memory is refused; into meta from the CPU is ignored, out of meta refused"""
    t = torch.arange(4.0)
    base = ct.from_torch(t)
    e1 = ct.check(lib.ct_expand(base, i64([3, 4]), 2))
    e2 = ct.check(lib.ct_expand(base, i64([3, 4]), 2))
    assert lib.ct_copy_(e1, e1) == 0
    ct.assert_error(lib.ct_copy_(e1, e2), ct.torch_error(lambda: t.expand(3, 4).copy_(t.expand(3, 4))))
    m = ct.check(lib.ct_empty_on(i64([4]), 1, ct.CT_FLOAT32, ct.CT_META))
    assert lib.ct_copy_(m, base) == 0
    tm = torch.empty(4, device="meta")
    ct.assert_error(lib.ct_copy_(base, m), ct.torch_error(lambda: torch.zeros(4).copy_(tm)))
    ct.assert_close(base, t)
