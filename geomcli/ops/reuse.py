"""The kernels' new outputs, and big outputs' memory taken back when the caller lets go of one, for
the next output of the same size: what onnxruntime's arena does for its outputs, for kernels called
in a loop.

A new array past glibc's mmap threshold (32 MiB at most) is new pages, which the OS faults in
and zeroes before any work: on the 2-core VM of issue 2, filling a new 64 MiB array took 7.2 ms
and refilling one 2.1 ms. Below the threshold glibc's heap already gives freed memory back.

What is kept is bounded: only buffers of the size last asked for, at most ``MAX_KEPT`` of them
and ``MAX_KEPT_BYTES`` in all (``MAX_KEPT = 0`` keeps nothing). A new output of ``MIN_BYTES`` or
more of another size lets them go, and so does a padded one (np.zeros leaves pure padding on the
OS's zero pages, so it cannot use them), :func:`release`, and a MemoryError while an output is
made, before one retry. Two buffers serve ``grid = affine_grid(...)`` in a loop, where the last
grid is let go after the next one is made.
"""

from __future__ import annotations

import math
import os
import threading
import weakref

import numpy as np

MIN_BYTES = 32 << 20  # below this, glibc's heap reuses freed memory already, once it has adapted
MAX_KEPT = 2
MAX_KEPT_BYTES = 1 << 30

_kept: list[np.ndarray] = []
_wanted = 0  # the size of the last big output asked for: the only size kept
# Re-entrant: a garbage collection inside `new` may let go of an output, whose finalizer keeps it.
_lock = threading.RLock()


def new(
    shape: tuple[int, ...], dtype: np.dtype, *, zeroed: bool = False, value: np.ndarray | None = None
) -> np.ndarray:
    """``np.empty(shape, dtype)``, ``np.zeros`` if ``zeroed``, ``np.full`` with a ``value``.

    An empty output of ``MIN_BYTES`` or more takes the memory of a let-go output of its size if
    one is kept, and holds the values that output left. It does not own its memory: its base is
    a ``ctypes`` array over the buffer, whose finalizer keeps the buffer again once neither the
    output nor any view of it is left.
    """
    size = math.prod(shape) * dtype.itemsize

    def make() -> np.ndarray:
        if value is not None:
            return np.full(shape, value, dtype=dtype)
        if zeroed:
            return np.zeros(shape, dtype=dtype)
        return _empty(shape, dtype, size)

    if (zeroed or value is not None) and size >= MIN_BYTES:
        release()
    try:
        return make()
    except MemoryError:
        release()  # what is kept may be what is missing
        return make()


def release() -> None:
    """Let go of every kept buffer now, and keep none until the next big output is asked for;
    outputs in use are not touched, but are not kept when they are let go."""
    global _wanted
    with _lock:
        _wanted = 0
        _kept.clear()


def _empty(shape: tuple[int, ...], dtype: np.dtype, size: int) -> np.ndarray:
    # objects and StringDType (kind T) items refer to memory their array owns: raw bytes are none
    if size < MIN_BYTES or dtype.hasobject or dtype.subdtype is not None or dtype.kind == "T":
        return np.empty(shape, dtype)
    buffer = _take(size)
    if buffer is None:
        if size > MAX_KEPT_BYTES or MAX_KEPT == 0:  # never kept
            return np.empty(shape, dtype)
        buffer = np.empty(size, np.uint8)
    try:
        import ctypes  # 2 ms, paid with the first big output
    except ImportError:  # a Python built without libffi
        return np.empty(shape, dtype)
    lease = (ctypes.c_char * size).from_buffer(buffer.data)
    weakref.finalize(lease, _keep, buffer).atexit = False
    return np.ndarray(shape, dtype, buffer=lease)  # type: ignore[arg-type]


def _take(size: int) -> np.ndarray | None:
    """A kept buffer of ``size`` bytes, or None; from now on only that size is kept (every kept
    buffer is of the size wanted, so another size lets them all go)."""
    global _wanted
    with _lock:
        if size != _wanted:
            _wanted = size
            _kept.clear()
        return _kept.pop() if _kept else None


def _keep(buffer: np.ndarray) -> None:
    with _lock:
        if buffer.nbytes != _wanted:
            return
        _kept.append(buffer)
        # Trimmed after the append: a collection inside this call that keeps another buffer
        # cannot push the count past the bound.
        excess = len(_kept) - min(MAX_KEPT, MAX_KEPT_BYTES // buffer.nbytes)
        if excess > 0:
            del _kept[:excess]


def _forget_in_child() -> None:
    # A fork copies the lock as it is, perhaps held by a thread the child does not have.
    global _lock
    _lock = threading.RLock()
    _kept.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
