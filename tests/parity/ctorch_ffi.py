"""ctorch_ffi: ctypes bindings to libctorch.so for the PyTorch parity tests.

Nothing is parsed from the header: every public function is declared once in
SIGNATURES below as (name, restype, argtypes). To bind a new function, add a
row (or call declare() from a test module). A row whose symbol the library does
not export yet is skipped; has(name) tells, and requires(*names) turns that into
a pytest skip mark, so the tests run green while the library grows.

Handles are Python ints (NULL is None), exactly the ct_tensor * the C API uses.
Every handle made while a scope is open belongs to that scope: the autouse
fixture in conftest.py opens one around each test, so tests never free by hand.

    import ctorch_ffi as ct
    h = ct.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    v = ct.check(ct.lib.ct_transpose(h, 0, 1))      # CtError on NULL
    ct.assert_close(v, torch.arange(6.).view(2, 3).t())
    ct.assert_same_layout(v, torch.arange(6.).view(2, 3).t())

The library is $CTORCH_LIB (ctest sets it), else build/libctorch.so.
"""
import ctypes
import os
import re
from ctypes import (POINTER, c_bool, c_char_p, c_double, c_float, c_int, c_int64, c_size_t,
                    c_uint16, c_uint64, c_void_p)

import numpy as np

try:  # torch is optional for this module; the test modules skip without it
    import torch
except ImportError:  # pragma: no cover
    torch = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB_PATH = os.environ.get("CTORCH_LIB") or os.path.join(ROOT, "build", "libctorch.so")


class CtError(RuntimeError):
    """A ctorch call failed; the message is ct_last_error()."""


# ----------------------------------------------------------------- C types
T = c_void_p            # ct_tensor * (opaque handle)
CT = c_void_p           # const ct_tensor *
DTYPE = c_int           # ct_dtype
DEVICE = c_int          # ct_device
I64P = POINTER(c_int64)  # const int64_t *
INTP = POINTER(c_int)    # const int *
TP = POINTER(c_void_p)   # ct_tensor **
DELETER = ctypes.CFUNCTYPE(None, c_void_p, c_void_p)


class MemoryStats(ctypes.Structure):
    _fields_ = [("in_use", c_size_t), ("peak_in_use", c_size_t), ("cached", c_size_t),
                ("hook_allocs", c_uint64), ("cache_hits", c_uint64)]


# ct_dtype and ct_device, in the header's order
(CT_BOOL, CT_UINT8, CT_INT8, CT_INT16, CT_INT32, CT_INT64,
 CT_FLOAT16, CT_BFLOAT16, CT_FLOAT32, CT_FLOAT64) = range(10)
DTYPE_NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64",
               "float16", "bfloat16", "float32", "float64"]
ALL_DTYPES = list(range(10))
FLOAT_DTYPES = [CT_FLOAT16, CT_BFLOAT16, CT_FLOAT32, CT_FLOAT64]
CT_CPU, CT_META = 0, 1

# ----------------------------------------------------------------- the table
# (name, restype, argtypes), in the header's order. Add rows as the API grows.
SIGNATURES = [
    # ownership
    ("ct_scope_begin", None, []),
    ("ct_scope_end", None, []),
    ("ct_retain", T, [T]),
    ("ct_free", None, [T]),
    # errors
    ("ct_last_error", c_char_p, []),
    ("ct_clear_error", None, []),
    # dtypes
    ("ct_dtype_name", c_char_p, [DTYPE]),
    ("ct_dtype_size", c_size_t, [DTYPE]),
    ("ct_dtype_is_floating", c_bool, [DTYPE]),
    ("ct_promote_types", DTYPE, [DTYPE, DTYPE]),
    ("ct_result_type", DTYPE, [CT, CT]),
    ("ct_half_to_float", c_float, [c_uint16]),
    ("ct_float_to_half", c_uint16, [c_float]),
    ("ct_bfloat16_to_float", c_float, [c_uint16]),
    ("ct_float_to_bfloat16", c_uint16, [c_float]),
    # allocator
    ("ct_set_allocator", None, [c_void_p]),
    ("ct_empty_cache", None, []),
    ("ct_memory_stats_get", MemoryStats, []),
    # factories
    ("ct_from_data", T, [c_void_p, I64P, c_int, DTYPE]),
    ("ct_from_blob", T, [c_void_p, I64P, c_int, DTYPE, DELETER, c_void_p]),
    ("ct_scalar", T, [c_double]),
    ("ct_scalar_dtype", T, [c_double, DTYPE]),
    ("ct_empty", T, [I64P, c_int, DTYPE]),
    ("ct_empty_on", T, [I64P, c_int, DTYPE, DEVICE]),
    ("ct_zeros", T, [I64P, c_int, DTYPE]),
    ("ct_ones", T, [I64P, c_int, DTYPE]),
    ("ct_full", T, [I64P, c_int, c_double, DTYPE]),
    ("ct_zeros_like", T, [CT]),
    ("ct_ones_like", T, [CT]),
    ("ct_full_like", T, [CT, c_double]),
    ("ct_arange", T, [c_double, c_double, c_double, DTYPE]),
    ("ct_linspace", T, [c_double, c_double, c_int64, DTYPE]),
    ("ct_eye", T, [c_int64, c_int64, DTYPE]),
    ("ct_manual_seed", None, [c_uint64]),
    ("ct_rand", T, [I64P, c_int, DTYPE]),
    ("ct_randn", T, [I64P, c_int, DTYPE]),
    ("ct_randint", T, [c_int64, c_int64, I64P, c_int, DTYPE]),
    ("ct_randperm", T, [c_int64, DTYPE]),
    ("ct_uniform_", c_int, [T, c_double, c_double]),
    ("ct_normal_", c_int, [T, c_double, c_double]),
    ("ct_bernoulli_", c_int, [T, c_double]),
    # inspection
    ("ct_ndim", c_int, [CT]),
    ("ct_size", c_int64, [CT, c_int]),
    ("ct_stride", c_int64, [CT, c_int]),
    ("ct_sizes", I64P, [CT]),
    ("ct_strides", I64P, [CT]),
    ("ct_numel", c_int64, [CT]),
    ("ct_storage_offset", c_int64, [CT]),
    ("ct_dtype_of", DTYPE, [CT]),
    ("ct_device_of", DEVICE, [CT]),
    ("ct_is_contiguous", c_bool, [CT]),
    ("ct_shares_storage", c_bool, [CT, CT]),
    ("ct_data_ptr", c_void_p, [CT]),
    ("ct_item", c_double, [CT]),
    ("ct_print", c_int, [CT]),
    ("ct_repr", c_int, [CT, c_void_p, c_size_t]),
    ("ct_copy_to_buffer", c_int, [CT, c_void_p, DTYPE]),
    # autograd (the helpers leaf() and grads_of() below)
    ("ct_set_requires_grad", c_int, [T, c_bool]),
    ("ct_autograd_grad", c_int, [TP, TP, c_int, TP, c_int, TP, c_bool, c_bool, c_bool]),
    # views
    ("ct_as_strided", T, [CT, I64P, I64P, c_int, c_int64]),
    ("ct_view", T, [CT, I64P, c_int]),
    ("ct_reshape", T, [CT, I64P, c_int]),
    ("ct_narrow", T, [CT, c_int, c_int64, c_int64]),
    ("ct_slice", T, [CT, c_int, c_int64, c_int64, c_int64]),
    ("ct_select", T, [CT, c_int, c_int64]),
    ("ct_transpose", T, [CT, c_int, c_int]),
    ("ct_swapaxes", T, [CT, c_int, c_int]),
    ("ct_t", T, [CT]),
    ("ct_permute", T, [CT, INTP, c_int]),
    ("ct_movedim", T, [CT, INTP, INTP, c_int]),
    ("ct_expand", T, [CT, I64P, c_int]),
    ("ct_expand_as", T, [CT, CT]),
    ("ct_view_as", T, [CT, CT]),
    ("ct_squeeze", T, [CT, c_int]),
    ("ct_squeeze_all", T, [CT]),
    ("ct_unsqueeze", T, [CT, c_int]),
    ("ct_diagonal", T, [CT, c_int64, c_int, c_int]),
    ("ct_unfold", T, [CT, c_int, c_int64, c_int64]),
    ("ct_flatten", T, [CT, c_int, c_int]),
    ("ct_unflatten", T, [CT, c_int, I64P, c_int]),
    ("ct_detach", T, [CT]),
    ("ct_split", c_int, [CT, c_int64, c_int, TP, c_int]),
    ("ct_split_with_sizes", c_int, [CT, I64P, c_int, c_int, TP]),
    ("ct_chunk", c_int, [CT, c_int, c_int, TP, c_int]),
    ("ct_unbind", c_int, [CT, c_int, TP, c_int]),
    # copies
    ("ct_contiguous", T, [CT]),
    ("ct_clone", T, [CT]),
    ("ct_to_dtype", T, [CT, DTYPE]),
    ("ct_to_device", T, [CT, DEVICE]),
    ("ct_copy_", c_int, [T, CT]),
    ("ct_fill_", c_int, [T, c_double]),
    ("ct_zero_", c_int, [T]),
    # threads
    ("ct_set_num_threads", None, [c_int]),
    ("ct_get_num_threads", c_int, []),
]


def _load():
    if not os.path.exists(LIB_PATH):
        raise ImportError(f"ctorch shared library not found at {LIB_PATH}: build it first "
                          f"(cmake -S . -B build && cmake --build build) or set CTORCH_LIB")
    return ctypes.CDLL(LIB_PATH)


lib = _load()
MISSING = set()


def declare(name, restype, argtypes):
    """Bind one function; returns False (and records it) when it is not exported."""
    try:
        fn = getattr(lib, name)
    except AttributeError:
        MISSING.add(name)
        return False
    fn.restype = restype
    fn.argtypes = argtypes
    MISSING.discard(name)
    return True


for _row in SIGNATURES:
    declare(*_row)


def declare_elementwise(unary, binary):
    """Bind ct_<op> and ct_<op>_ of unary ops, and ct_<op>, ct_<op>_,
    ct_<op>_scalar, ct_<op>_scalar_ of binary ops (ops.def's forms)."""
    for n in unary:
        declare("ct_" + n, T, [CT])
        declare("ct_" + n + "_", c_int, [T])
    for n in binary:
        declare("ct_" + n, T, [CT, CT])
        declare("ct_" + n + "_", c_int, [T, CT])
        declare("ct_" + n + "_scalar", T, [CT, c_double])
        declare("ct_" + n + "_scalar_", c_int, [T, c_double])


def has(*names):
    """True when the library exports every one of names."""
    return all(hasattr(lib, n) for n in names)


def requires(*names):
    """A pytest mark that skips a test until the library exports names."""
    import pytest
    missing = [n for n in names if not hasattr(lib, n)]
    return pytest.mark.skipif(bool(missing), reason="not exported yet: " + ", ".join(missing))


# ----------------------------------------------------------------- helpers
def i64(values):
    """A C int64_t array from a sequence (a valid pointer even when empty)."""
    values = list(values)
    return (c_int64 * max(len(values), 1))(*values)


def i32(values):
    values = list(values)
    return (c_int * max(len(values), 1))(*values)


def last_error():
    if not has("ct_last_error"):
        return None
    msg = lib.ct_last_error()
    return None if msg is None else msg.decode("utf-8", "replace")


def clear_error():
    if has("ct_clear_error"):
        lib.ct_clear_error()


def check(h):
    """h, or CtError(last_error()) when h is NULL."""
    if h is None or h == 0:
        raise CtError(last_error() or "NULL with no error message")
    return h


def check_int(rc):
    if rc == -1:
        raise CtError(last_error() or "-1 with no error message")
    return rc


def ndim(h):
    return check_int(lib.ct_ndim(h))


def shape(h):
    n = ndim(h)
    if n == 0:
        return ()
    p = lib.ct_sizes(h)
    return tuple(p[i] for i in range(n))


def strides(h):
    n = ndim(h)
    if n == 0:
        return ()
    p = lib.ct_strides(h)
    return tuple(p[i] for i in range(n))


def storage_offset(h):
    return lib.ct_storage_offset(h)


def dtype(h):
    return lib.ct_dtype_of(h)


def numel(h):
    return lib.ct_numel(h)


def is_contiguous(h):
    return bool(lib.ct_is_contiguous(h))


def shares_storage(a, b):
    return bool(lib.ct_shares_storage(a, b))


def memory_in_use():
    """Bytes held by live storages, or None when the library cannot tell yet."""
    if not has("ct_memory_stats_get"):
        return None
    return lib.ct_memory_stats_get().in_use


# ----------------------------------------------------------------- dtypes
_NP_OF_CT = {CT_BOOL: np.bool_, CT_UINT8: np.uint8, CT_INT8: np.int8, CT_INT16: np.int16,
             CT_INT32: np.int32, CT_INT64: np.int64, CT_FLOAT16: np.float16,
             CT_BFLOAT16: np.uint16,  # raw bits: numpy has no bfloat16
             CT_FLOAT32: np.float32, CT_FLOAT64: np.float64}
_CT_OF_NP = {np.dtype(v): k for k, v in _NP_OF_CT.items() if k != CT_BFLOAT16}


def ct_dtype_of_numpy(dt):
    dt = np.dtype(dt)
    if dt not in _CT_OF_NP:
        raise TypeError(f"no ctorch dtype for numpy {dt}")
    return _CT_OF_NP[dt]


def torch_dtype(ct_dt):
    return [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
            torch.float16, torch.bfloat16, torch.float32, torch.float64][ct_dt]


def ct_dtype_of_torch(tdt):
    for k in ALL_DTYPES:
        if torch_dtype(k) == tdt:
            return k
    raise TypeError(f"no ctorch dtype for {tdt}")


# ----------------------------------------------------------------- conversions
def _from_buffer(arr, ct_dt):
    arr = np.require(arr, requirements="C")
    return check(lib.ct_from_data(arr.ctypes.data_as(c_void_p), i64(arr.shape), arr.ndim, ct_dt))


def from_numpy(arr, ct_dtype=None):
    """A new ctorch tensor holding a copy of arr (contiguous, arr's dtype). numpy has
    no bfloat16: ct_dtype=CT_BFLOAT16 rounds arr to it through torch."""
    arr = np.asarray(arr)
    if ct_dtype == CT_BFLOAT16:
        return from_torch(torch.from_numpy(np.require(arr, requirements="C")).to(torch.bfloat16))
    if ct_dtype is not None and ct_dtype != ct_dtype_of_numpy(arr.dtype):
        arr = arr.astype(_NP_OF_CT[ct_dtype])
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return _from_buffer(arr, ct_dtype_of_numpy(arr.dtype))


def to_numpy(h):
    """The values of h as a new numpy array (row-major; bfloat16 comes back as float32)."""
    dt = dtype(h)
    if dt == CT_BFLOAT16:
        raw = np.empty(shape(h), dtype=np.uint16)
        check_int(lib.ct_copy_to_buffer(h, raw.ctypes.data_as(c_void_p), CT_BFLOAT16))
        return (raw.astype(np.uint32) << 16).view(np.float32)
    out = np.empty(shape(h), dtype=_NP_OF_CT[dt])
    check_int(lib.ct_copy_to_buffer(h, out.ctypes.data_as(c_void_p), dt))
    return out


def to_torch(h):
    """The values of h as a new contiguous torch tensor of the same dtype."""
    dt = dtype(h)
    if dt == CT_BFLOAT16:
        raw = np.empty(shape(h), dtype=np.int16)
        check_int(lib.ct_copy_to_buffer(h, raw.ctypes.data_as(c_void_p), CT_BFLOAT16))
        return torch.from_numpy(raw).view(torch.bfloat16)
    return torch.from_numpy(to_numpy(h))


def _torch_storage_numel(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage().nbytes() // t.element_size()
    return t.storage().size()


def torch_storage(t):
    """The whole storage under t as a 1-d torch tensor (a view: writes show in t)."""
    return t.as_strided((_torch_storage_numel(t),), (1,), 0)


def torch_shares_storage(a, b):
    if hasattr(a, "untyped_storage"):
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    return a.storage().data_ptr() == b.storage().data_ptr()


def _contiguous_copy_to_ct(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return _from_buffer(t.view(torch.int16).numpy(), CT_BFLOAT16)
    return _from_buffer(t.numpy(), ct_dtype_of_torch(t.dtype))


def from_torch(t, with_storage=False):
    """A ctorch tensor with t's values AND t's layout: a copy of t's whole storage,
    viewed through ct_as_strided with t's sizes, strides and storage offset, so that
    views of it can be compared stride for stride with views of t. With
    with_storage=True returns (handle, storage_handle), the second a 1-d contiguous
    ctorch tensor over the whole storage (for checking writes made through views)."""
    storage = _contiguous_copy_to_ct(torch_storage(t))
    h = check(lib.ct_as_strided(storage, i64(t.shape), i64(t.stride()), t.dim(),
                                t.storage_offset()))
    return (h, storage) if with_storage else h


# ----------------------------------------------------------------- autograd
def leaf(t, requires_grad=True):
    """A ctorch leaf with t's values and layout (requires_grad by default)."""
    h = from_torch(t.detach())
    if requires_grad:
        check_int(lib.ct_set_requires_grad(h, True))
    return h


def grads_of(h_out, hs, g, create_graph=True):
    """d<out, g>/d inputs through ct_autograd_grad (retain_graph, create_graph,
    allow_unused); hs is one handle (one result) or a list (a list of results)."""
    single = not isinstance(hs, (list, tuple))
    hs = [hs] if single else list(hs)
    n = len(hs)
    outs = (c_void_p * 1)(h_out)
    gos = (c_void_p * 1)(from_torch(g))
    ins = (c_void_p * n)(*hs)
    res = (c_void_p * n)()
    check_int(lib.ct_autograd_grad(outs, gos, 1, ins, n, res, True, create_graph, True))
    return res[0] if single else [res[k] for k in range(n)]


# ----------------------------------------------------------------- checks
def assert_same_layout(h, t, what=""):
    """sizes, strides, storage offset and is_contiguous equal torch's."""
    got = dict(shape=shape(h), strides=strides(h), storage_offset=storage_offset(h),
               is_contiguous=is_contiguous(h))
    want = dict(shape=tuple(t.shape), strides=tuple(t.stride()),
                storage_offset=t.storage_offset(), is_contiguous=t.is_contiguous())
    assert got == want, f"{what}layout differs from torch:\n  ctorch: {got}\n  torch:  {want}"


def assert_close(h, t, rtol=None, atol=None, what=""):
    """dtype, shape and values of h equal torch's t (NaN equals NaN)."""
    got_dt, want_dt = DTYPE_NAMES[dtype(h)], str(t.dtype).replace("torch.", "")
    assert got_dt == want_dt, f"{what}dtype: ctorch {got_dt}, torch {want_dt}"
    assert shape(h) == tuple(t.shape), f"{what}shape: ctorch {shape(h)}, torch {tuple(t.shape)}"
    got = to_torch(h)
    want = t.detach().cpu()
    if rtol is None and atol is None:
        rtol = atol = 0.0
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True,
                               check_stride=False, msg=lambda m: f"{what}values differ: {m}")


_TORCH_TYPE_PREFIX = re.compile(r"^\w+\(torch\.\w+\{\[[^\]]*\]\}(, [^)]*)?\): ")


def torch_message(e):
    """torch's error text, minus what only a Python binding of torch can say: the
    wrapper lines of a re-raised error ("unflatten got an unexpected error:\n...")
    keep their last line, and a leading "expand(torch.FloatTensor{[3, 4]}, size=[4]): "
    (torch's own type repr) is dropped, leaving the sentence ctorch must contain."""
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    msg = lines[-1].strip() if lines else ""
    return _TORCH_TYPE_PREFIX.sub("", msg)


def torch_error(fn):
    """Runs fn(); returns torch's (normalised) error message, or None when it does not raise."""
    try:
        fn()
    except (RuntimeError, IndexError, ValueError) as e:
        return torch_message(e)
    return None


def assert_same_outcome(cfn, tfn, what="", compare=None):
    """Runs torch's tfn() and ctorch's cfn(): both fail, ctorch's message holding
    torch's, or both succeed (compare(ctorch_result, torch_result) when given)."""
    want = torch_error(tfn)
    clear_error()
    got = cfn()
    if want is not None:
        assert_error(got, want, what=what)
    elif compare is None:
        check(got)
    else:
        compare(got, tfn())


def assert_error(result, torch_msg, what=""):
    """result is the failure value (NULL for handles, -1 for ints) and
    ct_last_error() contains torch's message (ours start with "op: ")."""
    failed = result is None or result == -1
    msg = last_error()
    assert failed, f"{what}ctorch succeeded where torch fails with: {torch_msg}"
    assert msg is not None, f"{what}ctorch failed without a message (torch: {torch_msg})"
    assert torch_msg in msg, (f"{what}error text differs\n  ctorch: {msg}\n"
                              f"  torch:  {torch_msg}")


def repr_of(h, cap=1 << 16):
    buf = ctypes.create_string_buffer(cap)
    n = check_int(lib.ct_repr(h, buf, cap))
    if n >= cap:
        return repr_of(h, n + 1)
    return buf.value.decode()
