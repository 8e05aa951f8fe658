""".npy through numpy: the header is checked before a byte of data is allocated; never pickle."""

from __future__ import annotations

import io
import math
import os
import tokenize
from typing import IO

import ml_dtypes  # noqa: F401  (registers "bfloat16" and co. by name, so their headers parse)
import numpy as np

from geomcli.errors import GeomError
from geomcli.io._base import Header, Loaded, check_size, one_line

# numpy's own default; a longer header is refused rather than parsed
_MAX_HEADER = 10000


def _parse_header(f: IO[bytes], name: str) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """shape, fortran_order, dtype and data offset of the .npy open in ``f``."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f, max_header_size=_MAX_HEADER)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(f, max_header_size=_MAX_HEADER)
        elif version == (3, 0):
            # 3.0 differs from 2.0 only by a utf-8 header; numpy has no public reader for it
            from numpy.lib import _format_impl

            shape, fortran, dtype = _format_impl._read_array_header(  # type: ignore[attr-defined]
                f, version, max_header_size=_MAX_HEADER
            )
        else:
            raise GeomError(
                f"{name}: not a readable NPY (unknown version {version[0]}.{version[1]})"
            )
    except (
        ValueError,
        TypeError,
        SyntaxError,
        EOFError,
        OSError,
        UnicodeDecodeError,
        tokenize.TokenError,
    ) as e:
        # GeomError is a ValueError: ours pass through unchanged
        if isinstance(e, GeomError):
            raise
        raise GeomError(f"{name}: not a readable NPY (malformed header: {one_line(e)})") from e
    if dtype.hasobject:
        raise GeomError(
            f"{name}: holds Python objects (dtype {dtype}), which only pickle can read; "
            "geomcli never unpickles"
        )
    if not _is_tensor_type(dtype):
        raise GeomError(f"{name}: dtype {dtype} is not an ONNX tensor type geomcli reads; it takes {_TAKES}")
    if any(n < 0 for n in shape):
        raise GeomError(
            f"{name}: not a readable NPY (malformed header: negative dimension in {shape})"
        )
    return tuple(int(n) for n in shape), bool(fortran), dtype, f.tell()


_TAKES = ("bool, int8-int64, uint8-uint64, float16/32/64, bfloat16 (and ml_dtypes' float8 and int4 types), "
          "complex64/128 and strings")


def _is_tensor_type(dtype: np.dtype) -> bool:
    """Whether geomcli reads a .npy of this dtype: the ONNX tensor types. Refused: dates and
    durations, long double and its complex (float128, complex256: no ONNX type), raw bytes
    and structured records (void); objects are refused before, as pickle."""
    element = dtype.base  # a sub-array dtype's element type; its shape becomes axes
    if element.kind in "biuUS":
        return True
    if element.kind in "fc":  # ml_dtypes' float8_e5m2 too, which calls itself "f"
        return element.itemsize <= (8 if element.kind == "f" else 16)
    return _is_extension(element)


def _elements(shape: tuple[int, ...], dtype: np.dtype) -> tuple[int, ...]:
    # a sub-array dtype such as ('<f4', (3,)) adds its own axes to the loaded array
    return shape + tuple(dtype.shape)


def _check(
    shape: tuple[int, ...],
    dtype: np.dtype,
    offset: int,
    size: int,
    name: str,
    max_pixels: int | None,
) -> None:
    if max_pixels is not None:
        check_size(_elements(shape, dtype), max_pixels, name)
    needed = math.prod(shape) * dtype.itemsize
    if needed > size - offset:
        raise GeomError(
            f"{name}: not a readable NPY (truncated: shape {shape} of {dtype} needs {needed} "
            f"bytes of data, the file has {max(size - offset, 0)})"
        )


def read_header(source: str | bytes, name: str) -> Header:
    f, size = _open(source, name)
    with f:
        shape, _, dtype, offset = _parse_header(f, name)
    _check(shape, dtype, offset, size, name, None)
    file_size = None if isinstance(source, bytes) else size
    return Header("npy", _elements(shape, dtype), dtype, 1, file_size, None)


def read(source: str | bytes, name: str, max_pixels: int, mmap: bool) -> Loaded:
    f, size = _open(source, name)
    with f:
        shape, _, dtype, offset = _parse_header(f, name)
    _check(shape, dtype, offset, size, name, max_pixels)
    # np.memmap cannot map zero bytes; such arrays are read the plain way
    use_mmap = mmap and isinstance(source, str) and math.prod(shape) * dtype.itemsize > 0
    try:
        if isinstance(source, bytes):
            data = np.load(io.BytesIO(source), allow_pickle=False)
        else:
            data = np.load(source, mmap_mode="r" if use_mmap else None, allow_pickle=False)
    except (ValueError, EOFError, OSError) as e:
        # the file may have changed since the header was checked
        raise GeomError(f"{name}: not a readable NPY ({one_line(e)})") from e
    return Loaded(data, "npy", None, "-" if isinstance(source, bytes) else source)


def _open(source: str | bytes, name: str) -> tuple[IO[bytes], int]:
    if isinstance(source, bytes):
        return io.BytesIO(source), len(source)
    try:
        f = open(source, "rb")  # noqa: SIM115 - the callers close it with `with`
        return f, os.fstat(f.fileno()).st_size
    except OSError as e:
        raise GeomError(f"{name}: cannot read ({one_line(e)})") from e


def write(data: np.ndarray, f: IO[bytes]) -> None:
    if _is_extension(data.dtype):
        # np.save would write the descr '<V2' and bfloat16 would come back as raw bytes;
        # the dtype's name ("bfloat16") round-trips wherever ml_dtypes is imported
        np.lib.format.write_array_header_1_0(
            f, {"descr": data.dtype.name, "fortran_order": False, "shape": data.shape}
        )
        f.write(np.ascontiguousarray(data).reshape(-1).view(np.uint8).data)
        return
    # numpy hands a real file to ndarray.tofile, whose short write loses errno ("N requested and
    # M written"); through a plain .write() the disk-full or file-size error keeps its name
    np.save(_WriteOnly(f), data, allow_pickle=False)


class _WriteOnly:
    def __init__(self, f: IO[bytes]) -> None:
        self.write = f.write


def _is_extension(dtype: np.dtype) -> bool:
    """A scalar type registered from outside numpy (ml_dtypes' bfloat16, float8_*, int4, ...)."""
    return (
        dtype.kind == "V"
        and dtype.names is None
        and dtype.subdtype is None
        and dtype.type is not np.void
    )
