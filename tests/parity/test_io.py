"""Parity of the io layer: safetensors with PyTorch tensors, .npy with NumPy.

The `safetensors` Python package is not installable here, so this module carries a
small reference reader and writer that follow the format's specification and the
reference implementation's choices (huggingface/safetensors, safetensors/src/tensor.rs):
  - 8-byte little-endian header length N, then N bytes of compact JSON, padded with
    spaces to a multiple of 8, then the data section;
  - tensors sorted by dtype (the reference's Dtype enum, largest first) then name;
    "__metadata__" first when there is any; data_offsets relative to the data section;
  - reading: the offsets must tile the data section exactly, sizes must match shapes.
Both directions are checked against torch tensors: files ctorch writes are read by the
reference reader into torch tensors equal to the originals (and are byte-identical
to what the reference writer makes of those tensors), and files the reference writer
makes from torch tensors load in ctorch with the same values.
.npy files are checked the same way against numpy.save / numpy.load.
"""
import ctypes
import json
import math
import struct
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_void_p

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import ctorch_ffi as ct  # noqa: E402  (after the skips)
from ctorch_ffi import i64, lib, requires  # noqa: E402

SD = c_void_p  # ct_state_dict *
T = c_void_p
for row in [
    ("ct_state_dict_new", SD, []),
    ("ct_state_dict_free", None, [SD]),
    ("ct_state_dict_set", c_int, [SD, c_char_p, T]),
    ("ct_state_dict_size", c_int, [SD]),
    ("ct_state_dict_name", c_char_p, [SD, c_int]),
    ("ct_state_dict_tensor", T, [SD, c_int]),
    ("ct_state_dict_find", c_int, [SD, c_char_p]),
    ("ct_state_dict_get", T, [SD, c_char_p]),
    ("ct_state_dict_remove", c_int, [SD, c_char_p]),
    ("ct_state_dict_set_metadata", c_int, [SD, c_char_p, c_char_p]),
    ("ct_state_dict_metadata", c_char_p, [SD, c_char_p]),
    ("ct_state_dict_metadata_size", c_int, [SD]),
    ("ct_state_dict_metadata_key", c_char_p, [SD, c_int]),
    ("ct_safetensors_save", c_int, [SD, c_char_p]),
    ("ct_safetensors_save_buffer", c_void_p, [SD, POINTER(c_size_t)]),
    ("ct_safetensors_load", SD, [c_char_p]),
    ("ct_safetensors_load_buffer", SD, [c_char_p, c_size_t]),
    ("ct_save_npy", c_int, [T, c_char_p]),
    ("ct_load_npy", T, [c_char_p]),
    ("ct_load_npy_buffer", T, [c_char_p, c_size_t]),
]:
    ct.declare(*row)

pytestmark = requires("ct_state_dict_new", "ct_safetensors_save", "ct_safetensors_load",
                      "ct_save_npy", "ct_load_npy", "ct_from_data", "ct_as_strided",
                      "ct_copy_to_buffer")

_libc = ctypes.CDLL(None)
_libc.free.argtypes = [c_void_p]
_libc.free.restype = None

# ------------------------------------------------------- reference safetensors
ST_DTYPES = {"BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16,
             "I32": torch.int32, "I64": torch.int64, "F16": torch.float16,
             "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64}
ST_NAME = {v: k for k, v in ST_DTYPES.items()}
# position in the reference's `enum Dtype` (BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16,
# F16, BF16, I32, U32, F32, F64, I64, U64): the writer sorts by it, descending
ST_RANK = {"BOOL": 0, "U8": 1, "I8": 2, "I16": 5, "F16": 7, "BF16": 8, "I32": 9,
           "F32": 11, "F64": 12, "I64": 13}


def _raw(t):
    t = t.detach().contiguous().reshape(-1)
    if t.numel() == 0:
        return b""
    return t.view(torch.uint8).numpy().tobytes()  # this machine is little-endian


def ref_save(tensors, metadata=None):
    """The bytes the reference writer makes of {name: torch tensor}."""
    items = sorted(tensors.items(), key=lambda kv: (-ST_RANK[ST_NAME[kv[1].dtype]], kv[0].encode()))
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name, t in items:
        raw = _raw(t)
        header[name] = {"dtype": ST_NAME[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def ref_load(buf):
    """({name: torch tensor}, metadata) from safetensors bytes, validated as the
    reference reader validates them."""
    (n,) = struct.unpack("<Q", buf[:8])
    assert 8 + n <= len(buf)
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", None)
    data = buf[8 + n:]
    at = 0
    for name, info in sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
        b, e = info["data_offsets"]
        assert b == at and e >= b, f"{name}: offsets {b}, {e} do not follow {at}"
        at = e
    assert at == len(data), "the tensors do not cover the data section"
    out = {}
    for name, info in header.items():
        dt = ST_DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        size = torch.empty((), dtype=dt).element_size()
        assert e - b == math.prod(info["shape"]) * size
        if e == b:
            out[name] = torch.empty(info["shape"], dtype=dt)
            continue
        u8 = torch.from_numpy(np.frombuffer(data[b:e], dtype=np.uint8).copy())
        out[name] = u8.view(dt).reshape(info["shape"])
    return out, metadata


# ------------------------------------------------------------------- helpers
def to_ct(t):
    return ct.from_torch(t)


class StateDict:
    """A ct_state_dict owned by the test."""

    def __init__(self, ptr=None):
        self.ptr = ptr if ptr is not None else lib.ct_state_dict_new()
        assert self.ptr, ct.last_error()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        lib.ct_state_dict_free(self.ptr)

    def set(self, name, t):
        ct.check_int(lib.ct_state_dict_set(self.ptr, name.encode(), to_ct(t)))

    def names(self):
        return [lib.ct_state_dict_name(self.ptr, i).decode()
                for i in range(lib.ct_state_dict_size(self.ptr))]

    def get(self, name):
        return ct.to_torch(ct.check(lib.ct_state_dict_get(self.ptr, name.encode())))

    def metadata(self):
        out = {}
        for i in range(lib.ct_state_dict_metadata_size(self.ptr)):
            k = lib.ct_state_dict_metadata_key(self.ptr, i)
            out[k.decode()] = lib.ct_state_dict_metadata(self.ptr, k).decode()
        return out


def ct_dict(tensors, metadata=None):
    sd = StateDict()
    for name, t in tensors.items():
        sd.set(name, t)
    for k, v in (metadata or {}).items():
        ct.check_int(lib.ct_state_dict_set_metadata(sd.ptr, k.encode(), v.encode()))
    return sd


def save_buffer(sd):
    n = c_size_t()
    p = lib.ct_safetensors_save_buffer(sd.ptr, ctypes.byref(n))
    if not p:
        raise ct.CtError(ct.last_error())
    data = ctypes.string_at(p, n.value)
    _libc.free(p)
    return data


def assert_same(got, want, name=""):
    assert got.dtype == want.dtype, name
    assert tuple(got.shape) == tuple(want.shape), name
    if want.dtype.is_floating_point:
        torch.testing.assert_close(got, want.contiguous(), rtol=0, atol=0, equal_nan=True, msg=name)
    else:
        assert torch.equal(got, want), name


def random_tensor(dtype, shape, gen):
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if dtype.is_floating_point:
        t = (torch.randn(shape, generator=gen, dtype=torch.float64) * 100).to(dtype)
        flat = t.reshape(-1)
        if flat.numel() >= 4:  # specials survive bit for bit
            flat[0], flat[1], flat[2], flat[3] = math.nan, math.inf, -math.inf, -0.0
        return t
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, generator=gen, dtype=torch.int64).to(dtype)


ALL = list(ST_DTYPES.values())
SHAPES = [(), (0,), (5,), (2, 3), (3, 0, 2), (2, 3, 4, 5)]


def layouts(t):
    """t itself, and the same values through a transposed and a sliced view."""
    yield "contig", t
    if t.dim() >= 2:
        yield "transposed", t.transpose(0, 1).contiguous().transpose(0, 1)
    if t.dim() >= 1:
        wide = torch.cat([t, t], dim=-1) if t.shape[-1] else t
        yield "strided", wide[..., ::2] if t.shape[-1] else t


# ------------------------------------------------------- safetensors: ctorch -> torch
@pytest.mark.parametrize("dtype", ALL, ids=[ST_NAME[d] for d in ALL])
def test_ctorch_writes_what_torch_reads(dtype, tmp_path):
    gen = torch.Generator().manual_seed(1)
    tensors = {}
    for shape in SHAPES:
        base = random_tensor(dtype, shape, gen)
        for lay, t in layouts(base):
            tensors[f"s{'x'.join(map(str, shape))}.{lay}"] = t
    path = tmp_path / "m.safetensors"
    with ct_dict(tensors) as sd:
        ct.check_int(lib.ct_safetensors_save(sd.ptr, str(path).encode()))
    data = path.read_bytes()
    back, meta = ref_load(data)
    assert meta is None
    assert set(back) == set(tensors)
    for name, t in tensors.items():
        assert_same(back[name], t, name)
    assert data == ref_save(tensors), "not the bytes the reference writer makes"


def test_ctorch_writes_a_mixed_state_dict(tmp_path):
    gen = torch.Generator().manual_seed(2)
    tensors = {"encoder.layers.0.weight": random_tensor(torch.float32, (8, 4), gen),
               "encoder.layers.0.bias": random_tensor(torch.float32, (8,), gen),
               "bn.num_batches_tracked": torch.tensor(7),
               "bn.running_mean": random_tensor(torch.float64, (8,), gen),
               "emb.weight": random_tensor(torch.bfloat16, (10, 3), gen),
               "half": random_tensor(torch.float16, (3, 3), gen),
               "mask": random_tensor(torch.bool, (4, 4), gen),
               "ids": random_tensor(torch.int32, (6,), gen),
               "bytes": random_tensor(torch.uint8, (5,), gen),
               "caf\u00e9 \u2603 \"q\"\\": random_tensor(torch.int16, (2,), gen)}
    metadata = {"format": "pt", "note": "line\nbreak \u00e9 \"quoted\" \x01"}
    path = tmp_path / "m.safetensors"
    with ct_dict(tensors, metadata) as sd:
        ct.check_int(lib.ct_safetensors_save(sd.ptr, str(path).encode()))
        assert save_buffer(sd) == path.read_bytes()
    data = path.read_bytes()
    assert data == ref_save(tensors, metadata)
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0
    back, meta = ref_load(data)
    assert meta == metadata
    for name, t in tensors.items():
        assert_same(back[name], t, name)


def test_large_tensor_round_trip(tmp_path):
    t = torch.randn(1024, 1024)
    path = tmp_path / "big.safetensors"
    with ct_dict({"w": t}) as sd:
        ct.check_int(lib.ct_safetensors_save(sd.ptr, str(path).encode()))
    back, _ = ref_load(path.read_bytes())
    assert torch.equal(back["w"], t)
    with StateDict(ct.check(lib.ct_safetensors_load(str(path).encode()))) as sd:
        assert torch.equal(sd.get("w"), t)


# ------------------------------------------------------- safetensors: torch -> ctorch
@pytest.mark.parametrize("dtype", ALL, ids=[ST_NAME[d] for d in ALL])
def test_torch_writes_what_ctorch_reads(dtype, tmp_path):
    gen = torch.Generator().manual_seed(3)
    tensors = {f"t{i}": random_tensor(dtype, shape, gen) for i, shape in enumerate(SHAPES)}
    path = tmp_path / "m.safetensors"
    path.write_bytes(ref_save(tensors, {"framework": "pt"}))
    with StateDict(ct.check(lib.ct_safetensors_load(str(path).encode()))) as sd:
        assert sd.names() == sorted(tensors)
        assert sd.metadata() == {"framework": "pt"}
        for name, t in tensors.items():
            assert_same(sd.get(name), t, name)


def test_ctorch_reads_other_writers(tmp_path):
    """Header orders other writers use (by name, any key order, whitespace, unknown
    keys, null metadata): what counts is the offsets."""
    a, b = torch.arange(6, dtype=torch.float32).reshape(2, 3), torch.tensor([1, -2], dtype=torch.int64)
    header = {"b": {"shape": [2], "data_offsets": [24, 40], "dtype": "I64", "extra": [1, {"k": None}]},
              "__metadata__": None,
              "a": {"dtype": "F32", "data_offsets": [0, 24], "shape": [2, 3]}}
    h = json.dumps(header, indent=2).encode()
    buf = struct.pack("<Q", len(h)) + h + _raw(a) + _raw(b)
    with StateDict(ct.check(lib.ct_safetensors_load_buffer(buf, len(buf)))) as sd:
        assert sd.names() == ["a", "b"]
        assert_same(sd.get("a"), a)
        assert_same(sd.get("b"), b)


def test_state_dict_keeps_tensors_alive():
    sd = StateDict()
    try:
        lib.ct_scope_begin()
        sd.set("w", torch.arange(4.0))
        lib.ct_scope_end()
        assert torch.equal(sd.get("w"), torch.arange(4.0))
        assert lib.ct_state_dict_find(sd.ptr, b"w") == 0
        assert lib.ct_state_dict_find(sd.ptr, b"v") == -1
        assert lib.ct_state_dict_get(sd.ptr, b"v") is None
        assert "no tensor named 'v'" in ct.last_error()
    finally:
        lib.ct_state_dict_free(sd.ptr)


# ------------------------------------------------------- safetensors: errors
def _bad(header, data=b""):
    h = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(h)) + h + data


ENTRY = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
MALFORMED = [
    (ENTRY.encode()[:3], "too small"),
    (_bad(ENTRY, b"\0" * 4), "run past the end of the data section (4 bytes)"),
    (_bad(ENTRY, b"\0" * 12), "the tensors cover 8 bytes but the data section holds 12"),
    (struct.pack("<Q", 1 << 40) + b"{}", "exceeds the limit"),
    (struct.pack("<Q", 100) + b"{}", "header length 100 is past the end of the file"),
    (_bad('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}', b"\0" * 8), "invalid JSON header"),
    (_bad('{"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}', b"\0" * 8), "dtype C64 is not supported"),
    (_bad('{"a":{"dtype":"F31","shape":[1],"data_offsets":[0,8]}}', b"\0" * 8), "unknown dtype 'F31'"),
    (_bad('{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', b"\0" * 8), "needs 12 bytes"),
    (_bad('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
          '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', b"\0" * 12), "overlap"),
    (_bad('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
          '"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"\0" * 2), "duplicate tensor name 'a'"),
    (_bad(b'{"\xff":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0"), "not valid UTF-8"),
]


@pytest.mark.parametrize("data,message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_safetensors(data, message, tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(data)
    ct.clear_error()
    assert lib.ct_safetensors_load(str(path).encode()) is None
    err = ct.last_error()
    assert err.startswith(f"safetensors_load: '{path}': "), err
    assert message in err
    ct.clear_error()
    assert lib.ct_safetensors_load_buffer(data, len(data)) is None
    assert message in ct.last_error()


def test_truncations_never_load():
    """Every proper prefix of a valid file fails cleanly."""
    data = ref_save({"w": torch.randn(3, 2), "b": torch.arange(3)}, {"k": "v"})
    for k in range(len(data)):
        ct.clear_error()
        assert lib.ct_safetensors_load_buffer(data[:k], k) is None, k
        assert ct.last_error(), k
    with StateDict(ct.check(lib.ct_safetensors_load_buffer(data, len(data)))) as sd:
        assert sd.names() == ["b", "w"]


def test_save_errors(tmp_path):
    with ct_dict({"__metadata__": torch.zeros(1)}) as sd:
        assert lib.ct_safetensors_save(sd.ptr, str(tmp_path / "x").encode()) == -1
        assert "cannot be named \"__metadata__\"" in ct.last_error()
    with ct_dict({}) as sd:
        assert lib.ct_safetensors_save(sd.ptr, str(tmp_path / "no" / "x").encode()) == -1
        assert "cannot open" in ct.last_error()


# ------------------------------------------------------------------------ npy
NP_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64,
             np.float16, np.float32, np.float64]


def np_random(dtype, shape, rng):
    return np.asarray(_np_random(dtype, shape, rng), dtype=dtype)


def _np_random(dtype, shape, rng):
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(dtype, np.floating):
        a = (rng.standard_normal(shape) * 100).astype(dtype)
        if a.size >= 3:
            a.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
        return a
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def np_equal(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", NP_DTYPES, ids=[np.dtype(d).name for d in NP_DTYPES])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 4), (2, 0, 3), (2, 3, 4)])
def test_npy_numpy_to_ctorch(dtype, shape, tmp_path):
    rng = np.random.default_rng(4)
    a = np_random(dtype, shape, rng)
    for order in ("C", "F"):
        for version in (None, (1, 0), (2, 0), (3, 0)):
            path = tmp_path / "a.npy"
            with open(path, "wb") as f:
                arr = np.asfortranarray(a) if order == "F" and a.ndim else a  # (it makes 0-d 1-d)
                if version is None:
                    np.save(f, arr)
                else:
                    np.lib.format.write_array(f, arr, version=version)
            h = ct.check(lib.ct_load_npy(str(path).encode()))
            assert ct.is_contiguous(h)
            np_equal(ct.to_numpy(h), a)


@pytest.mark.parametrize("descr", [">f4", ">f8", ">i2", ">i4", ">i8", ">f2", "<i8", "=f4", "|u1", "|i1"])
def test_npy_byte_orders(descr, tmp_path):
    a = np.arange(-5, 7).reshape(3, 4).astype(descr)
    path = tmp_path / "a.npy"
    np.save(path, a)
    got = ct.to_numpy(ct.check(lib.ct_load_npy(str(path).encode())))
    np_equal(got, a.astype(a.dtype.newbyteorder("=")))


@pytest.mark.parametrize("dtype", NP_DTYPES, ids=[np.dtype(d).name for d in NP_DTYPES])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 4), (2, 0, 3), (2, 3, 4)])
def test_npy_ctorch_to_numpy(dtype, shape, tmp_path):
    rng = np.random.default_rng(5)
    a = np_random(dtype, shape, rng)
    path = tmp_path / "a.npy"
    # (ct.from_numpy goes through np.ascontiguousarray, which makes 0-d arrays 1-d)
    ct.check_int(lib.ct_save_npy(ct.from_torch(torch.from_numpy(a)), str(path).encode()))
    np_equal(np.load(path), a)
    ref = tmp_path / "ref.npy"
    np.save(ref, a)
    assert path.read_bytes() == ref.read_bytes(), "not the bytes numpy.save writes"


def test_npy_saves_views(tmp_path):
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for name, v in [("t", t.t()), ("slice", t[1:, ::2]), ("expanded", torch.arange(3.0).expand(4, 3))]:
        path = tmp_path / f"{name}.npy"
        ct.check_int(lib.ct_save_npy(ct.from_torch(v), str(path).encode()))
        np_equal(np.load(path), v.numpy())


def test_npy_errors(tmp_path):
    path = tmp_path / "c.npy"
    np.save(path, np.zeros(3, np.complex64))
    assert lib.ct_load_npy(str(path).encode()) is None
    assert f"load_npy: '{path}': dtype descr '<c8' is not supported" in ct.last_error()
    np.save(path, np.array([1, "a"], dtype=object), allow_pickle=True)
    assert lib.ct_load_npy(str(path).encode()) is None
    assert "'|O'" in ct.last_error()
    np.save(path, np.zeros(3, dtype=[("a", "<f4")]))
    assert lib.ct_load_npy(str(path).encode()) is None
    assert "structured dtypes are not supported" in ct.last_error()
    np.save(path, np.zeros(3, np.uint32))
    assert lib.ct_load_npy(str(path).encode()) is None
    assert "'<u4' is not supported" in ct.last_error()
    np.save(path, np.arange(10.0))
    data = path.read_bytes()
    for k in range(len(data)):
        ct.clear_error()
        assert lib.ct_load_npy_buffer(data[:k], k) is None, k
        assert ct.last_error(), k
    bf = ct._contiguous_copy_to_ct(torch.zeros(2, dtype=torch.bfloat16))
    assert lib.ct_save_npy(bf, str(path).encode()) == -1
    assert "numpy has no bfloat16 dtype" in ct.last_error()


NPY_HEADER_EDITS = [  # (name, how the dict text d becomes the header); numpy.load evaluates it as a Python literal
    ("comment in the padding", lambda d: d + " # a comment\n"), ("bare #", lambda d: d + "#\n"),
    ("comment, no newline", lambda d: d + " # c"), ("comment with a quote", lambda d: d + " # it's\n"),
    ("two comment lines", lambda d: d + " # a\n # b\n"), ("comment, CR", lambda d: d + " # c\r"),
    ("comment, CRLF", lambda d: d + " # c\r\n"), ("comment line first", lambda d: "# hi\n" + d + "\n"),
    ("comment inside", lambda d: d.replace("'descr': '<f4',", "'descr': '<f4', # the dtype\n")),
    ("comment in shape", lambda d: d.replace("(2, ", "(2, # rows\n")),
    ("comment after a key", lambda d: d.replace("'descr'", "'descr' # k\n")),
    ("comment swallows the rest", lambda d: d.replace("'descr': '<f4',", "'descr': '<f4', # the dtype")),
    ("comment then text", lambda d: d + " # c\nx\n"), ("hash in a string", lambda d: d.replace("<f4", "<f4#")),
    ("form feed", lambda d: d + "\f\n"), ("vertical tab", lambda d: d + "\v\n"), ("NUL", lambda d: d + "\0\n"),
    ("line continuation", lambda d: d.replace("'fortran_order'", "\\\n'fortran_order'")),
    ("leading blanks", lambda d: "  " + d + "\n"), ("newline first", lambda d: "\n" + d + "\n"),
    ("indented after a comment", lambda d: "# c\n  " + d + "\n"), ("in parentheses", lambda d: "( (" + d + ") )\n"),
    ("unclosed parenthesis", lambda d: "(" + d + "\n"), ("stray parenthesis", lambda d: d + ")\n"),
]


@pytest.mark.parametrize("name,edit", NPY_HEADER_EDITS, ids=[e[0] for e in NPY_HEADER_EDITS])
def test_npy_header_python_syntax(name, edit):
    """numpy.load reads the header with ast.literal_eval: '#' comments, blank
    lines, form feeds, line continuations and enclosing parentheses are Python
    between tokens; ctorch loads a header iff numpy does."""
    import io
    a = np.arange(6, dtype="<f4").reshape(2, 3)
    head = edit("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }").encode("latin1")
    data = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head + a.tobytes()
    try:
        want = np.load(io.BytesIO(data))
    except Exception:  # ValueError, SyntaxError, tokenize.TokenError
        want = None
    ct.clear_error()
    h = lib.ct_load_npy_buffer(data, len(data))
    if want is None:
        assert h is None and ct.last_error(), f"numpy refuses {head!r}, ctorch loads it"
    else:
        np_equal(ct.to_numpy(ct.check(h)), want)
