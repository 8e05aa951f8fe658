"""Big outputs' memory, taken back when the caller lets go of an output and given to the next
output of the same size: what onnxruntime's arena does for its outputs, for kernels called in a loop.

A new array past glibc's mmap threshold (32 MiB at most) is new pages, which the kernel faults in
and zeroes before any work. On the 2-core VM of issue 2, filling a new 64 MiB array took 7.2 ms
and refilling one 2.1 ms, so a 64 MiB affine grid cost 8-14 ms in a new array and 6-10 ms in a
reused one. Below the threshold glibc's heap already gives freed memory back to the next call.

What is kept is bounded: at most ``KEPT`` buffers and ``KEPT_BYTES`` in all, and an output of
another size lets them all go, so memory stays kept only while the same size is asked for again.
Two buffers serve ``grid = affine_grid(...)`` in a loop, where the last grid is let go only after
the next one is made.
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
# Re-entrant: a garbage collection inside `empty` may let go of an output, whose finalizer keeps it.
_lock = threading.RLock()


def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """``np.empty(shape, dtype)``, in the memory of a let-go output of the same size if one is kept.

    The array does not own its memory: its base is a ``ctypes`` array over a kept buffer, whose
    finalizer keeps the buffer again once neither the array nor any view of it is left. Its
    values are those of the earlier output, as any ``np.empty`` may be.
    """
    size = math.prod(shape) * dtype.itemsize
    if size < SMALLEST or dtype.hasobject:
        return np.empty(shape, dtype)
    with _lock:
        found = next((i for i, buffer in enumerate(_kept) if buffer.nbytes == size), None)
        if found is None:
            _kept.clear()  # another size: what was kept goes back to the system
        else:
            buffer = _kept.pop(found)
    if found is None:
        if size > KEPT_BYTES:  # never kept
            return np.empty(shape, dtype)
        buffer = np.empty(size, np.uint8)
    import ctypes  # 2 ms, paid only with the first big output

    lease = (ctypes.c_char * size).from_buffer(buffer.data)
    weakref.finalize(lease, _keep, buffer).atexit = False
    output: np.ndarray = np.frombuffer(memoryview(lease), dtype).reshape(shape)
    return output


def _keep(buffer: np.ndarray) -> None:
    with _lock:
        if len(_kept) < KEPT and sum(kept.nbytes for kept in _kept) + buffer.nbytes <= KEPT_BYTES:
            _kept.append(buffer)


def _forget_in_child() -> None:
    # A fork copies the lock as it is, perhaps held by a thread the child does not have.
    global _lock
    _lock = threading.RLock()
    _kept.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
