"""Outputs too big to build in memory: a memory map of a temp file beside the destination, renamed
into place when complete; and handing a map's pages back to the OS once a slab is done."""

from __future__ import annotations

import math
import mmap
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from geomcli.io import _atomic

if TYPE_CHECKING:
    from geomcli.io import Metadata, WriteOptions

# Outputs of at least this many bytes are written through a memory map when their format allows.
MAP_OUTPUT_BYTES = 64 << 20

# The formats whose files hold an array as one contiguous run of bytes after a header.
_MAPPABLE = ("npy", "tiff")


def maps_output(path: str, shape: Sequence[int], dtype: np.dtype, fmt: str) -> bool:
    """Whether :func:`open_output` gives a memory map for this output (else an array in RAM; on
    object storage always, made in memory and put whole)."""
    from geomcli.io import _refusal, _remote

    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if path == "-" or fmt not in _MAPPABLE or nbytes == 0 or nbytes < MAP_OUTPUT_BYTES or _remote.is_url(path):
        return False
    if _atomic.is_special(path):
        return False
    if _refusal(fmt, dtype, tuple(shape)) is not None:
        return False  # write_array will say why, from the array in RAM
    # tifffile maps native-order numbers only; its booleans are bytes of another type
    return fmt == "npy" or (dtype.isnative and dtype.kind != "b")


@contextmanager
def open_output(
    path: str, shape: Sequence[int], dtype: np.dtype, fmt: str, layout: str | None = None,
    options: WriteOptions | None = None, colour: bool | None = None, inks: bool = False,
    axes_metadata: Metadata | None = None,
) -> Iterator[np.ndarray]:
    """Yield a zero-filled writable array; at normal exit its contents are at ``path``, atomically.
    ``layout``: the layout of what is written, for the formats that record it (TIFF); ``options``:
    how an array written from RAM is encoded; ``colour``: whether 3 or 4 channels are colours;
    ``inks``: whether 4 are CMYK; ``axes_metadata``: a TIFF's OME or ImageJ axes and calibration."""
    from geomcli.io import Metadata, write_array

    shape, dtype = tuple(int(n) for n in shape), np.dtype(dtype)
    if not maps_output(path, shape, dtype, fmt):
        data = np.zeros(shape, dtype)
        yield data
        metadata = (axes_metadata or Metadata())._replace(colour=colour, inks=inks)
        write_array(data, path, format=fmt, layout=layout, options=options, metadata=metadata)
        return
    with _atomic.atomic_path(path) as tmp:
        mapped = _map_npy(tmp, shape, dtype) if fmt == "npy" else \
            _map_tiff(tmp, shape, dtype, layout, colour, inks, axes_metadata, path)
        _reserve(tmp)
        yield mapped
        mapped.flush()  # msync: the pages reach the file before it is synced and renamed (atomic_path)


def _reserve(tmp: str) -> None:
    """Allocate the disk blocks of the whole (sparse) file now: a full disk is an OSError here,
    while a write to a mapped page that has no block to go to is a SIGBUS that kills the process
    and leaves its temp file behind."""
    import errno
    import os

    if not hasattr(os, "posix_fallocate"):
        return  # macOS: residual risk, documented in the README's Safety section
    with open(tmp, "r+b") as f:
        try:
            os.posix_fallocate(f.fileno(), 0, os.fstat(f.fileno()).st_size)
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.EOPNOTSUPP):  # a filesystem that cannot say
                raise


def _map_npy(tmp: str, shape: tuple[int, ...], dtype: np.dtype) -> np.memmap:
    """The header np.save would write, then a sparse data section, mapped."""
    from geomcli.io._npy import _is_extension

    descr = dtype.name if _is_extension(dtype) else np.lib.format.dtype_to_descr(dtype)
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    with open(tmp, "r+b") as f:
        _write_header(f, header)
        offset = f.tell()
        f.truncate(offset + math.prod(shape) * dtype.itemsize)  # a hole: reads as zeros
        mapped = np.memmap(f, dtype=dtype, mode="r+", offset=offset, shape=shape)
    return mapped


def _write_header(f: IO[bytes], header: dict[str, Any]) -> None:
    try:
        np.lib.format.write_array_header_1_0(f, header)
    except ValueError:  # more than 64 KiB of header (a very long shape): format 2.0, as np.save
        f.seek(0)
        np.lib.format.write_array_header_2_0(f, header)


def _map_tiff(tmp: str, shape: tuple[int, ...], dtype: np.dtype, layout: str | None,
              colour: bool | None = None, inks: bool = False, axes_metadata: Metadata | None = None,
              path: str = "") -> np.memmap:
    import tifffile

    from geomcli.io import _tiff

    # the pages _tiff.write lays the same array out in, so both paths read back alike
    laid_out = _tiff.pages(shape, dtype, layout, colour, inks)
    if axes_metadata is not None:  # (its OME or ImageJ metadata, where it still names the layout)
        described = axes_metadata._replace(colour=colour, inks=inks)
        laid_out = _tiff.ome_pages(laid_out, shape, dtype, layout, described, path)
        laid_out = _tiff.imagej_pages(laid_out, shape, dtype, layout, described)
    mapped: np.memmap = tifffile.memmap(tmp, shape=shape, dtype=dtype, **laid_out)
    return mapped


def release(array: np.ndarray) -> None:
    """Let the OS take back the resident pages of a file-backed memory map that ``array`` spans.

    Pages of a map count towards the process's memory (RSS) once touched, even though the file
    backs them. After a slab is read or written they are dropped from this process (Linux
    ``madvise(MADV_DONTNEED)``): a shared map's data stays in the page cache and the file, and a
    later access reads it back. Anything else (arrays in RAM, private maps) is left alone.
    """
    madvise = _madvise()
    if madvise is None or array.size == 0 or not _shared_map(array):
        return
    low, high = np.lib.array_utils.byte_bounds(array)
    # only whole pages inside the span: never past the ends of the map
    start = -(-low // mmap.PAGESIZE) * mmap.PAGESIZE
    stop = high // mmap.PAGESIZE * mmap.PAGESIZE
    if stop > start:
        madvise(start, stop - start, mmap.MADV_DONTNEED)


def _shared_map(array: np.ndarray) -> bool:
    """Whether ``array`` is a view of a numpy memory map shared with its file (mode r or r+)."""
    obj: Any = array
    while obj is not None:
        if isinstance(obj, np.memmap):
            return obj.mode in ("r", "r+", "w+")
        obj = getattr(obj, "base", None)
    return False


@cache
def _madvise() -> Callable[[int, int, int], int] | None:
    if not sys.platform.startswith("linux") or not hasattr(mmap, "MADV_DONTNEED"):
        return None
    import ctypes

    function = ctypes.CDLL(None, use_errno=True).madvise
    function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    function.restype = ctypes.c_int
    return function
