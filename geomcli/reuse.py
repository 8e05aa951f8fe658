"""Big outputs' memory, taken back when the caller lets go of an output and given to the next
output of the same size: what onnxruntime's arena does for its outputs, for kernels called in a loop.

A new array past glibc's mmap threshold (32 MiB at most) is new pages, which the kernel faults in
and zeroes before any work: on the 2-core VM of issue 2, filling a new 64 MiB array took 7.2 ms
and refilling one 2.1 ms. Below the threshold glibc's heap already gives freed memory back.

What is kept is bounded: only buffers of the size last asked for, at most ``KEPT`` of them and
``KEPT_BYTES`` in all. Asking for an output of another size (a padded one included) lets them
go, and so does :func:`release`, or running short of memory. Two buffers serve
``grid = affine_grid(...)`` in a loop, where the last grid is let go after the next one is made.
"""

from __future__ import annotations

import math
import os
import threading
import weakref

import numpy as np

SMALLEST = 32 << 20  # below this, glibc's heap reuses freed memory already
KEPT = 2
KEPT_BYTES = 1 << 30

_kept: list[np.ndarray] = []
_wanted = 0  # the size of the last big output asked for: the only size kept
# Re-entrant: a garbage collection inside `empty` may let go of an output, whose finalizer keeps it.
_lock = threading.RLock()


def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """``np.empty(shape, dtype)``, in the memory of a let-go output of the same size if one is kept.

    A big array does not own its memory: its base is a ``ctypes`` array over a kept buffer, whose
    finalizer keeps the buffer again once neither the array nor any view of it is left. Its
    values are those of the earlier output, as any ``np.empty`` may be.
    """
    size = math.prod(shape) * dtype.itemsize
    if size < SMALLEST or dtype.hasobject or dtype.subdtype is not None:
        return np.empty(shape, dtype)
    buffer = _take(size)
    if buffer is None:
        if size > KEPT_BYTES:  # never kept
            return np.empty(shape, dtype)
        buffer = np.empty(size, np.uint8)
    try:
        import ctypes  # 2 ms, paid with the first big output
    except ImportError:  # a Python built without libffi
        return buffer.view(dtype).reshape(shape)
    lease = (ctypes.c_char * size).from_buffer(buffer.data)
    weakref.finalize(lease, _keep, buffer).atexit = False
    output: np.ndarray = np.frombuffer(lease, dtype).reshape(shape)  # type: ignore[call-overload]
    return output


def release() -> None:
    """Let go of every kept buffer now (the memory of outputs still in use is not touched)."""
    _take(0)


def _take(size: int) -> np.ndarray | None:
    """A kept buffer of ``size`` bytes, or None; from now on only that size is kept."""
    global _wanted
    with _lock:
        _wanted = size
        found = next((i for i, buffer in enumerate(_kept) if buffer.nbytes == size), None)
        if found is None:
            _kept.clear()
            return None
        return _kept.pop(found)


def _keep(buffer: np.ndarray) -> None:
    with _lock:
        if buffer.nbytes != _wanted:
            return
        _kept.append(buffer)
        # Trimmed after the append: a collection inside this call that keeps another buffer
        # cannot push the count past the bound.
        del _kept[: -min(KEPT, KEPT_BYTES // buffer.nbytes)]


def _forget_in_child() -> None:
    # A fork copies the lock as it is, perhaps held by a thread the child does not have.
    global _lock
    _lock = threading.RLock()
    _kept.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
