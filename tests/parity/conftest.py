"""Fixtures for the PyTorch parity tests (pytest over libctorch.so through ctypes).

Run: ctest --test-dir build -R parity, or directly
    CTORCH_LIB=build/libctorch.so /usr/bin/python3 -m pytest -q tests/parity

Every test module starts with
    torch = pytest.importorskip("torch")
so that a machine without PyTorch skips it cleanly; CI installs python3-torch, so
there the tests really run.
"""
import os
import sys

import pytest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import numpy  # noqa: F401
    import ctorch_ffi
except ImportError as e:  # numpy missing: the modules skip; library missing: say so
    if "numpy" in str(e):
        ctorch_ffi = None
    else:
        raise


@pytest.fixture(scope="session")
def ct():
    """The ctorch_ffi module (bindings and helpers)."""
    if ctorch_ffi is None:
        pytest.skip("numpy is not installed")
    return ctorch_ffi


@pytest.fixture(autouse=True)
def ct_scope():
    """Each test runs inside ct_scope_begin/ct_scope_end, so every handle it makes is
    released at its end; the test fails if ctorch still holds storage bytes then
    (a leaked view or storage), or if the test left the scope stack unbalanced."""
    if ctorch_ffi is None or not ctorch_ffi.has("ct_scope_begin", "ct_scope_end"):
        yield
        return
    ct = ctorch_ffi
    ct.clear_error()
    before = ct.memory_in_use()
    ct.lib.ct_scope_begin()
    yield
    ct.clear_error()
    ct.lib.ct_scope_end()
    err = ct.last_error()
    ct.clear_error()
    assert err is None, f"ct_scope_end reported: {err}"
    after = ct.memory_in_use()
    if before is not None and after is not None:
        assert after == before, f"ctorch holds {after - before} more bytes after the test's scope ended"
