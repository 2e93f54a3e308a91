"""Parity of the generator, the 16-bit float conversions and repr with PyTorch.

  - after ct_manual_seed(s), ct_rand / ct_randn / ct_randint / ct_randperm and the
    in-place uniform_ / normal_ / bernoulli_ give bit-identical numbers to
    torch.manual_seed(s) followed by the same torch call, for every float dtype,
    sizes around the 16-element blocks of normal_ and several seeds, also when
    calls follow each other (the cached Box-Muller value carries over);
  - ct_float_to_half / ct_float_to_bfloat16 round every tested float as torch's
    .half() / .bfloat16() do, and the reverse conversions are exact;
  - ct_repr prints exactly repr(tensor) for a spread of values, shapes, dtypes and
    layouts (modes, widths, wrapping, summarizing, nan/inf, meta, empty).
"""
import math
import random

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import ctorch_ffi as ct  # noqa: E402  (after the skips)
from ctorch_ffi import i64, lib, requires  # noqa: E402

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SIZES = [(1,), (7,), (15,), (16,), (17,), (33,), (100,), (1000,), (3, 5), (4, 4, 4)]
SEEDS = [0, 1, 42, 2**32 + 3, 123456789]


def ctd(tdt):
    return ct.ct_dtype_of_torch(tdt)


def dtype_id(d):
    return str(d).replace("torch.", "")


# ------------------------------------------------------------------ generator
@requires("ct_manual_seed", "ct_rand", "ct_copy_to_buffer")
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("size", SIZES, ids=str)
def test_rand(dtype, size):
    for seed in SEEDS:
        torch.manual_seed(seed)
        want = torch.rand(size, dtype=dtype)
        lib.ct_manual_seed(seed)
        got = ct.check(lib.ct_rand(i64(size), len(size), ctd(dtype)))
        ct.assert_close(got, want, what=f"seed {seed}: ")


@requires("ct_manual_seed", "ct_randn", "ct_copy_to_buffer")
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("size", SIZES + [(5000,), (100003,)], ids=str)
def test_randn(dtype, size):
    for seed in SEEDS:
        torch.manual_seed(seed)
        want = torch.randn(size, dtype=dtype)
        lib.ct_manual_seed(seed)
        got = ct.check(lib.ct_randn(i64(size), len(size), ctd(dtype)))
        ct.assert_close(got, want, what=f"seed {seed}: ")


@requires("ct_manual_seed", "ct_rand", "ct_randn", "ct_randint", "ct_randperm")
def test_calls_in_sequence_share_one_stream():
    """Odd-sized randn leaves a cached normal for the next small randn; every call
    continues the same mt19937 stream."""
    seq = [("randn", (3,), torch.float32), ("randn", (5,), torch.float64),
           ("rand", (2,), torch.float32), ("randn", (1,), torch.float32),
           ("randn", (20,), torch.float32), ("randint", (4,), torch.int64),
           ("randn", (1,), torch.float16), ("randperm", 9, torch.int64),
           ("randn", (2,), torch.float32)]
    for seed in SEEDS:
        torch.manual_seed(seed)
        wants = []
        for op, size, dt in seq:
            if op == "randn":
                wants.append(torch.randn(size, dtype=dt))
            elif op == "rand":
                wants.append(torch.rand(size, dtype=dt))
            elif op == "randint":
                wants.append(torch.randint(-3, 1000, size, dtype=dt))
            else:
                wants.append(torch.randperm(size, dtype=dt))
        lib.ct_manual_seed(seed)
        for (op, size, dt), want in zip(seq, wants):
            if op == "randn":
                got = lib.ct_randn(i64(size), len(size), ctd(dt))
            elif op == "rand":
                got = lib.ct_rand(i64(size), len(size), ctd(dt))
            elif op == "randint":
                got = lib.ct_randint(-3, 1000, i64(size), len(size), ctd(dt))
            else:
                got = lib.ct_randperm(size, ctd(dt))
            ct.assert_close(ct.check(got), want, what=f"seed {seed}, {op}{size}: ")


RANDINT = [(torch.int64, 0, 10), (torch.int64, -5, 5), (torch.int64, 0, 2**32),
           (torch.int64, -2**40, 2**40), (torch.int64, -2**62, 2**62),
           (torch.int32, -2**31, 2**31 - 1), (torch.int16, -100, 100), (torch.int8, -128, 127),
           (torch.uint8, 0, 256), (torch.float32, 0, 2**32), (torch.float32, -2**40, 2**40),
           (torch.float32, 3, 1000), (torch.float64, -2**60, 2**60), (torch.float16, 0, 5000),
           (torch.bfloat16, -300, 257), (torch.bool, 0, 2)]


@requires("ct_manual_seed", "ct_randint")
@pytest.mark.parametrize("dtype,low,high", RANDINT, ids=lambda v: str(v).replace("torch.", ""))
def test_randint(dtype, low, high):
    import warnings
    for seed in SEEDS:
        torch.manual_seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = torch.randint(low, high, (64,), dtype=dtype)
        lib.ct_manual_seed(seed)
        got = ct.check(lib.ct_randint(low, high, i64([64]), 1, ctd(dtype)))
        ct.assert_close(got, want, what=f"seed {seed}: ")


@requires("ct_manual_seed", "ct_randperm")
@pytest.mark.parametrize("n", [0, 1, 2, 10, 17, 1000, 100000])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.float64],
                         ids=dtype_id)
def test_randperm(n, dtype):
    for seed in SEEDS[:3]:
        torch.manual_seed(seed)
        want = torch.randperm(n, dtype=dtype)
        lib.ct_manual_seed(seed)
        got = ct.check(lib.ct_randperm(n, ctd(dtype)))
        ct.assert_close(got, want, what=f"seed {seed}: ")


@requires("ct_manual_seed", "ct_empty", "ct_uniform_", "ct_normal_")
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
@pytest.mark.parametrize("n", [5, 16, 37, 1000])
def test_uniform_normal_inplace(dtype, n):
    for seed in SEEDS[:3]:
        for lo, hi in [(-3.7, 5.1), (0, 1), (10, 10.5)]:
            torch.manual_seed(seed)
            want = torch.empty(n, dtype=dtype).uniform_(lo, hi)
            lib.ct_manual_seed(seed)
            h = ct.check(lib.ct_empty(i64([n]), 1, ctd(dtype)))
            ct.check_int(lib.ct_uniform_(h, lo, hi))
            ct.assert_close(h, want, what=f"uniform_({lo}, {hi}) seed {seed}: ")
        for mean, std in [(0, 1), (1.5, 3.25), (-2.5, 0.01)]:
            torch.manual_seed(seed)
            want = torch.empty(n, dtype=dtype).normal_(mean, std)
            lib.ct_manual_seed(seed)
            h = ct.check(lib.ct_empty(i64([n]), 1, ctd(dtype)))
            ct.check_int(lib.ct_normal_(h, mean, std))
            ct.assert_close(h, want, what=f"normal_({mean}, {std}) seed {seed}: ")


@requires("ct_manual_seed", "ct_empty", "ct_bernoulli_")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool],
                         ids=dtype_id)
def test_bernoulli(dtype):
    for seed in SEEDS[:3]:
        for p in [0.0, 0.3, 0.5, 1.0]:
            torch.manual_seed(seed)
            want = torch.empty(300, dtype=dtype).bernoulli_(p)
            lib.ct_manual_seed(seed)
            h = ct.check(lib.ct_empty(i64([300]), 1, ctd(dtype)))
            ct.check_int(lib.ct_bernoulli_(h, p))
            ct.assert_close(h, want, what=f"bernoulli_({p}) seed {seed}: ")


# ------------------------------------------------------------ 16-bit floats
def _probe_floats():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32)
    special = np.array([0.0, -0.0, 1.0, 65504.0, 65519.99, 65520.0, 2.0**-24, 2.0**-25,
                        3 * 2.0**-26, 2.0**-14, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 3.39e38,
                        1e-40, np.inf, -np.inf], dtype=np.float32)
    vals = np.concatenate([bits.view(np.float32), special])
    return vals[~np.isnan(vals)]


@requires("ct_float_to_half", "ct_half_to_float")
def test_half_conversions():
    vals = _probe_floats()
    want = torch.from_numpy(vals).half().view(torch.int16).numpy().view(np.uint16)
    got = np.array([lib.ct_float_to_half(float(v)) for v in vals], dtype=np.uint16)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"{bad.size} differ, e.g. {vals[bad[0]]!r}: {got[bad[0]]:#x} vs {want[bad[0]]:#x}"
    allbits = np.arange(65536, dtype=np.uint16)
    want_f = torch.from_numpy(allbits.view(np.int16)).view(torch.float16).float().numpy()
    got_f = np.array([lib.ct_half_to_float(int(b)) for b in allbits], dtype=np.float32)
    same = (got_f.view(np.uint32) == want_f.view(np.uint32)) | (np.isnan(got_f) & np.isnan(want_f))
    assert same.all()
    assert math.isnan(lib.ct_half_to_float(lib.ct_float_to_half(float("nan"))))


@requires("ct_float_to_bfloat16", "ct_bfloat16_to_float")
def test_bfloat16_conversions():
    vals = _probe_floats()
    want = torch.from_numpy(vals).bfloat16().view(torch.int16).numpy().view(np.uint16)
    got = np.array([lib.ct_float_to_bfloat16(float(v)) for v in vals], dtype=np.uint16)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"{bad.size} differ, e.g. {vals[bad[0]]!r}: {got[bad[0]]:#x} vs {want[bad[0]]:#x}"
    allbits = np.arange(65536, dtype=np.uint16)
    want_f = torch.from_numpy(allbits.view(np.int16)).view(torch.bfloat16).float().numpy()
    got_f = np.array([lib.ct_bfloat16_to_float(int(b)) for b in allbits], dtype=np.float32)
    same = (got_f.view(np.uint32) == want_f.view(np.uint32)) | (np.isnan(got_f) & np.isnan(want_f))
    assert same.all()
    assert math.isnan(lib.ct_bfloat16_to_float(lib.ct_float_to_bfloat16(float("nan"))))


@requires("ct_to_dtype")
@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16], ids=dtype_id)
def test_bulk_16bit_conversions(half):
    """Tensor conversions float32 <-> float16/bfloat16 (the vectorised paths of
    c10_convert, F16C or branch-free loops): every 16-bit pattern widened, and
    the probe floats (ties, subnormals, overflow, NaN, inf) narrowed, bit for bit
    as torch, at lengths that leave vector tails."""
    allbits = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(half)
    for n in (65536, 65533, 7):
        got = ct.to_torch(ct.check(lib.ct_to_dtype(ct.from_torch(allbits[:n]), ct.CT_FLOAT32)))
        want = allbits[:n].float()
        same = (got.view(torch.int32) == want.view(torch.int32)) | (got.isnan() & want.isnan())
        assert bool(same.all()), f"widening {n}: {int((~same).sum())} differ"
    vals = torch.from_numpy(_probe_floats())
    for n in (len(vals), len(vals) - 3, 5):
        got = ct.to_torch(ct.check(lib.ct_to_dtype(ct.from_torch(vals[:n]), ct.ct_dtype_of_torch(half))))
        want = vals[:n].to(half)
        nan = want.isnan()
        assert bool((got.isnan() == nan).all())
        assert torch.equal(got[~nan].view(torch.int16), want[~nan].view(torch.int16)), f"narrowing {n}"


# --------------------------------------------------------------------- repr
def _repr_cases():
    g = torch.Generator().manual_seed(0)
    rn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    F = torch.float32
    grid = torch.arange(12, dtype=F).view(3, 4)
    grid[1, 2] = 7.5
    cases = [
        grid, torch.tensor([1e-5, 1.0, 1e5]), torch.tensor([0.1, 100.25]),
        torch.tensor([1, 2, 3]), torch.tensor([-1, 200, 3], dtype=torch.int32),
        torch.arange(2000, dtype=F), torch.arange(2000), rn(2000), rn(3, 4, 5),
        rn(3, 4, 5) * 1000, -torch.rand(10, 10, generator=g), rn(40), rn(100) * 1e-3,
        rn(30, 40), rn(10, 10, 10, 2), rn(2, 3, 4, 5, 6), torch.tensor(2.0),
        torch.tensor(2.5), torch.tensor(-0.0), torch.tensor(float("nan")), torch.tensor(3),
        torch.tensor(True), torch.tensor(1e10), torch.tensor(1.23456e-7), torch.tensor([]),
        torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.int64),
        torch.zeros(0, dtype=torch.int32), torch.zeros(2, 0, 4, dtype=torch.float64),
        torch.tensor([True, False]), torch.tensor([[True, False, True], [False, False, True]]),
        torch.tensor([float("nan"), float("inf"), -float("inf"), 1.5]),
        torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0]),
        torch.tensor([-0.0, 0.0, 1.0]), torch.tensor([-0.0, 0.5]),
        torch.tensor([1.5, 2.5], dtype=torch.float16), rn(5, 3).half(), rn(5, 3).bfloat16(),
        rn(5, 3).double(), rn(5, 3).double() * 1e-6, torch.tensor([1e8, 2.0]),
        torch.tensor([123456789.0, 2.0]), torch.tensor([1000.0, 1.0]),
        torch.tensor([1001.0, 1.0]), torch.tensor([1e-4, 1.0]), torch.tensor([0.99e-4, 0.5]),
        torch.tensor([1, 2, 3], dtype=torch.uint8), torch.tensor([-128, 127], dtype=torch.int8),
        torch.tensor([2**62 + 1, -2**63]), torch.arange(100).view(10, 10) * 123456,
        torch.arange(1001), torch.arange(7 * 11 * 13).view(7, 11, 13), rn(7, 11, 13),
        torch.arange(3000).view(3, 1000), torch.arange(3000).view(1000, 3),
        rn(4, 6).t(), torch.arange(24).view(2, 3, 4).permute(2, 0, 1), rn(6, 8)[::2, 1::3],
        torch.tensor([1e300, 1e-300], dtype=torch.float64), torch.full((3,), -5.0),
        torch.zeros(3), torch.ones(2, 2, dtype=torch.bfloat16),
        torch.arange(-50, 50, dtype=F) / 7, torch.arange(100000, dtype=F).view(100, 1000),
        torch.tensor([3.4e38, -3.4e38]), torch.tensor([1e-45]),
    ]
    for scale in [1e-8, 1e-3, 1, 10, 1e3, 1e6, 1e9, 1e20]:
        cases.append(rn(4, 5) * scale)
    return cases


@requires("ct_repr", "ct_from_data", "ct_as_strided")
def test_repr_matches_torch():
    for t in _repr_cases():
        h = ct.from_torch(t)
        assert ct.repr_of(h) == repr(t), f"\nctorch:\n{ct.repr_of(h)}\ntorch:\n{t!r}"


@requires("ct_repr", "ct_from_data", "ct_as_strided")
def test_repr_random_tensors():
    rng = random.Random(1)
    g = torch.Generator().manual_seed(1)
    dts = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
           torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]
    for _ in range(300):
        shape = [rng.choice([1, 2, 3, 5, 6, 7, 8, 13, 40]) for _ in range(rng.choice([0, 1, 2, 3, 4]))]
        if math.prod(shape) > 100000:
            continue
        d = rng.choice(dts)
        if d.is_floating_point:
            t = torch.randn(shape, generator=g) * 10 ** rng.uniform(-9, 12)
            if rng.random() < 0.4:
                t = t.round()
            if rng.random() < 0.2 and t.numel():
                t.view(-1)[rng.randrange(t.numel())] = rng.choice(
                    [float("nan"), float("inf"), -float("inf"), -0.0])
            t = t.to(d)
        elif d == torch.bool:
            t = torch.randint(0, 2, shape, generator=g).bool()
        else:
            t = torch.randint(-100, 100 if d != torch.uint8 else 256, shape, generator=g).to(d)
        h = ct.from_torch(t)
        assert ct.repr_of(h) == repr(t), f"\nctorch:\n{ct.repr_of(h)}\ntorch:\n{t!r}"


@requires("ct_repr", "ct_empty_on")
@pytest.mark.parametrize("shape", [(2, 3), (5,), (), (0,), (4, 0, 2)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float64], ids=dtype_id)
def test_repr_meta(shape, dtype):
    h = ct.check(lib.ct_empty_on(i64(shape), len(shape), ctd(dtype), ct.CT_META))
    assert ct.repr_of(h) == repr(torch.empty(shape, dtype=dtype, device="meta"))


LAYOUTS = {
    "t": lambda base: base((4, 5)).t(),
    "permute3": lambda base: base((2, 3, 4)).permute(2, 0, 1),
    "size1": lambda base: base((3, 1, 4)).permute(2, 1, 0),
    "big_t": lambda base: base((9, 7)).t(),                     # > 16 elements: normal_'s block path if contiguous
    "cols": lambda base: base((6, 8))[:, ::2],                  # not dense
    "rows_t": lambda base: base((10, 6))[1::3].t(),             # not dense, transposed
    "offset": lambda base: base((40,))[3:37:2],
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("kind", ["uniform", "normal", "bernoulli"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
def test_inplace_fill_of_strided_tensors(layout, kind, dtype):
    """uniform_/normal_/bernoulli_ on a non-contiguous tensor (permuted or not
    dense) draw one number per element in TensorIterator's order, as torch does,
    and leave the other elements of the storage alone."""
    def fill(t):
        return {"uniform": lambda: t.uniform_(-1, 2), "normal": lambda: t.normal_(0.5, 2.0),
                "bernoulli": lambda: t.bernoulli_(0.3)}[kind]()

    torch.manual_seed(3)
    t = LAYOUTS[layout](lambda shape: torch.full(shape, 7.0, dtype=dtype))
    fill(t)
    ours, storage = ct.from_torch(LAYOUTS[layout](lambda shape: torch.full(shape, 7.0, dtype=dtype)),
                                  with_storage=True)
    ct.lib.ct_manual_seed(3)
    rc = {"uniform": lambda: ct.lib.ct_uniform_(ours, -1.0, 2.0), "normal": lambda: ct.lib.ct_normal_(ours, 0.5, 2.0),
          "bernoulli": lambda: ct.lib.ct_bernoulli_(ours, 0.3)}[kind]()
    assert rc == 0, ct.last_error()
    assert torch.equal(ct.to_torch(ours), t)
    assert torch.equal(ct.to_torch(storage), ct.torch_storage(t))


def test_inplace_fill_of_overlapping_tensor_is_an_error():
    for name, args in [("ct_uniform_", (0.0, 1.0)), ("ct_normal_", (0.0, 1.0)), ("ct_bernoulli_", (0.5,))]:
        h = ct.check(lib.ct_expand(ct.from_torch(torch.zeros(3, 1)), i64((3, 4)), 2))
        assert getattr(ct.lib, name)(h, *args) == -1
        assert "more than one element of the written-to tensor refers to a single memory location" in ct.last_error()


@requires("ct_randperm")
def test_randperm_errors():
    """randperm's checks in torch 1.13's order and words: the size first, then
    float16's overflow above 65504 before its 2049 limit."""
    for n, dt in [(-1, torch.int64), (-5, torch.float16), (70000, torch.float16), (3000, torch.float16)]:
        msg = ct.torch_message(ct.torch_error(lambda: torch.randperm(n, dtype=dt)))
        ct.assert_error(lib.ct_randperm(n, ctd(dt)), msg)
