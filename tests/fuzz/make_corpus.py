#!/usr/bin/env python3
"""Writes the seed corpus of the io fuzzers into tests/fuzz/corpus/ (numpy only).

Valid files come from numpy.save and from a safetensors writer that follows the
format's specification (8-byte little-endian header length, compact JSON header
padded with spaces to a multiple of 8, data in offset order); malformed ones are
those files broken in the ways the loaders must report. tests/test_io.c loads every
file here under the sanitizers on each CI run; the fuzzers start from them.
Files named regress_* are inputs the fuzzers once crashed on, kept by hand (this
script leaves them alone).

    python3 tests/fuzz/make_corpus.py
"""
import io
import json
import os
import struct

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

ST_NAME = {np.dtype(np.bool_): "BOOL", np.dtype(np.uint8): "U8", np.dtype(np.int8): "I8",
           np.dtype(np.int16): "I16", np.dtype(np.int32): "I32", np.dtype(np.int64): "I64",
           np.dtype(np.float16): "F16", np.dtype(np.float32): "F32", np.dtype(np.float64): "F64"}


def st_header_bytes(header):
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    return h + b" " * (-len(h) % 8)


def safetensors(tensors, metadata=None):
    """tensors: {name: numpy array} (or (dtype name, shape, raw bytes) for BF16)."""
    header, blobs, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, a in tensors.items():
        if isinstance(a, tuple):
            dt, shape, raw = a
        else:
            a = np.ascontiguousarray(a)
            dt, shape, raw = ST_NAME[a.dtype], list(a.shape), a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = st_header_bytes(header)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def raw_st(header_text, data=b""):
    h = header_text.encode() if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(h)) + h + data


def npy(a, version=None, fortran=False):
    f = io.BytesIO()
    if fortran:
        a = np.asfortranarray(a)
    if version is None:
        np.save(f, a)
    else:
        np.lib.format.write_array(f, a, version=version)
    return f.getvalue()


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(0)
    files = {}
    # ---- valid safetensors
    files["st_small_f32.safetensors"] = safetensors({"attn.0": np.arange(6, dtype=np.float32).reshape(1, 2, 3)})
    files["st_all_dtypes.safetensors"] = safetensors(
        {f"t_{k}": rng.integers(0, 5, (2, 3)).astype(dt) for dt, k in ST_NAME.items()}
        | {"t_bf16": ("BF16", [2], struct.pack("<2H", 0x3F80, 0xC000))})
    files["st_metadata.safetensors"] = safetensors(
        {"w": rng.standard_normal((3, 4)).astype(np.float32), "b": np.zeros(4, np.float32)},
        {"format": "pt", "note": "\u00e9\n\"quoted\""})
    files["st_empty.safetensors"] = safetensors({})
    files["st_zero_size.safetensors"] = safetensors(
        {"e": np.zeros((0, 3), np.float32), "s": np.array(5, np.int64), "f": np.zeros((2, 0), np.int8)})
    files["st_escaped_names.safetensors"] = raw_st(
        '{"\\u00e9\\ud83d\\ude00":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
        '"x":{"dtype":"BOOL","shape":[2],"data_offsets":[2,4],"extra":[1,{"a":null}]}}   ', b"\x01\x02\x00\x07")
    # ---- malformed safetensors
    good = files["st_small_f32.safetensors"]
    files["bad_st_truncated.safetensors"] = good[:-5]
    files["bad_st_short.safetensors"] = good[:5]
    files["bad_st_header_past_end.safetensors"] = struct.pack("<Q", 1 << 20) + good[8:]
    files["bad_st_huge_header.safetensors"] = struct.pack("<Q", (1 << 64) - 1) + good[8:]
    files["bad_st_json.safetensors"] = raw_st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},', b"\0" * 4)
    files["bad_st_unknown_dtype.safetensors"] = raw_st('{"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4)
    files["bad_st_shape_mismatch.safetensors"] = raw_st('{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,4]}}', b"\0" * 4)
    files["bad_st_overlap.safetensors"] = raw_st(
        '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
        b"\0" * 12)
    files["bad_st_out_of_range.safetensors"] = raw_st('{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', b"\0" * 4)
    files["bad_st_dup_names.safetensors"] = raw_st(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}',
        b"\0" * 2)
    files["bad_st_overflow.safetensors"] = raw_st(
        '{"a":{"dtype":"F64","shape":[4294967296,4294967296,2],"data_offsets":[0,8]}}', b"\0" * 8)
    files["bad_st_deep.safetensors"] = raw_st('{"a":{"x":' + "[" * 200 + "]" * 200 + "}}")
    files["bad_st_utf8.safetensors"] = raw_st(b'{"\xc3\x28":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0")
    # ---- valid npy
    files["npy_f4.npy"] = npy(rng.standard_normal((3, 4)).astype(np.float32))
    files["npy_fortran.npy"] = npy(np.arange(24, dtype=np.int32).reshape(2, 3, 4), fortran=True)
    files["npy_big_endian.npy"] = npy(np.arange(5, dtype=">f8"))
    files["npy_bool.npy"] = npy(np.array([True, False, True]))
    files["npy_scalar.npy"] = npy(np.float16(2.5))
    files["npy_v2.npy"] = npy(np.arange(4, dtype=np.int64), version=(2, 0))
    files["npy_v3.npy"] = npy(np.arange(4, dtype=np.uint8), version=(3, 0))
    files["npy_empty.npy"] = npy(np.zeros((0, 5), np.int16))
    # ---- malformed npy
    f4 = files["npy_f4.npy"]
    files["bad_npy_truncated.npy"] = f4[:-3]
    files["bad_npy_magic.npy"] = b"\x93NUMPX" + f4[6:]
    files["bad_npy_header_len.npy"] = f4[:8] + b"\xff\xff" + f4[10:]
    files["bad_npy_descr.npy"] = f4.replace(b"'<f4'", b"'<c8'")
    files["bad_npy_object.npy"] = f4.replace(b"'<f4'", b"'|O' ")
    files["bad_npy_shape.npy"] = f4.replace(b"(3, 4)", b"(3, -4)")
    files["bad_npy_version.npy"] = f4[:6] + b"\x09\x00" + f4[8:]
    for name, data in sorted(files.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(files)} files to {OUT}")


if __name__ == "__main__":
    main()
