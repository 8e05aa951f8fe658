""".npy through numpy: the header is checked before a byte of data is allocated; never pickle."""

from __future__ import annotations

import io
import math
import os
import re
import sys
import tokenize
from collections.abc import Callable
from typing import IO

import numpy as np

from geomcli.errors import GeomError
from geomcli.io._base import Header, Loaded, check_size, one_line

# numpy's own default; a longer header is refused rather than parsed
_MAX_HEADER = 10000
# the most axes a numpy array has (NPY_MAXDIMS)
_MAX_AXES = 64


def _parse_header(f: IO[bytes], name: str) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """shape, fortran_order, dtype and data offset of the .npy open in ``f``."""
    start = f.tell()
    for attempt in range(2):
        try:
            shape, fortran, dtype = _read_header(f, name)
            break
        except GeomError:
            raise  # one line already (GeomError is a ValueError: not to be wrapped again below)
        except ValueError as e:
            # a dtype numpy knows by name only once ml_dtypes is imported (it registers bfloat16
            # and co.): imported here, when a header names one, not at start-up (it takes 0.5 s)
            if one_byte_float := _ONE_BYTE_FLOAT.search(str(e)):
                raise _saved_without_its_type(f"{name}: dtype {one_byte_float[1]} names no type (np.save writes "
                                              "ml_dtypes' float8_e5m2 so, which no reader takes back)", 1) from e
            if attempt or "ml_dtypes" in sys.modules or _ML_DTYPE_NAME.search(str(e)) is None:
                raise GeomError(f"{name}: not a readable NPY (malformed header: {one_line(e)})") from e
            import ml_dtypes  # noqa: F401

            f.seek(start)
    return _checked_header(shape, fortran, dtype, f.tell(), name)


# numpy's message for a descr it does not know, naming one of ml_dtypes' types
_ML_DTYPE_NAME = re.compile(r"descriptor: '(bfloat16|float[864]_\w+|u?int[24])'")
# the descr np.save gives ml_dtypes' float8_e5m2 (its kind is f, its size 1), which numpy cannot parse back
_ONE_BYTE_FLOAT = re.compile(r"descriptor: '([<>|=]f1)'")


def _read_header(f: IO[bytes], name: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """numpy's reading of the header, as (shape, fortran_order, dtype); a ValueError for a descr
    numpy does not know, a GeomError for anything else wrong."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise GeomError(f"{name}: not a readable NPY (unknown version {version[0]}.{version[1]})")
        _check_header_length(f, version, name)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f, max_header_size=_MAX_HEADER)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(f, max_header_size=_MAX_HEADER)
        else:
            # 3.0 differs from 2.0 only by a utf-8 header; numpy has no public reader for it
            from numpy.lib import _format_impl

            shape, fortran, dtype = _format_impl._read_array_header(  # type: ignore[attr-defined]
                f, version, max_header_size=_MAX_HEADER
            )
    except ValueError as e:
        # GeomError is a ValueError: ours pass through unchanged
        if isinstance(e, GeomError) or isinstance(e.__cause__, TypeError):
            raise  # (numpy's "descr is not a valid dtype descriptor": see _parse_header)
        raise GeomError(f"{name}: not a readable NPY (malformed header: {one_line(e)})") from e
    except (TypeError, SyntaxError, EOFError, OSError, UnicodeDecodeError, tokenize.TokenError) as e:
        raise GeomError(f"{name}: not a readable NPY (malformed header: {one_line(e)})") from e
    return tuple(shape), bool(fortran), dtype


def _check_header_length(f: IO[bytes], version: tuple[int, int], name: str) -> None:
    """Refuse a header longer than _MAX_HEADER before numpy reads it: numpy reads all the bytes a
    header declares (4 GB in 2.0 and 3.0) before it checks their number against max_header_size."""
    at = f.tell()
    length = int.from_bytes(f.read(2 if version == (1, 0) else 4), "little")
    f.seek(at)
    if length > _MAX_HEADER:
        raise GeomError(f"{name}: not a readable NPY (malformed header: {length} bytes long, more than {_MAX_HEADER})")


def _checked_header(shape: tuple[int, ...], fortran: bool, dtype: np.dtype, offset: int,
                    name: str) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """The header, refused if it holds what geomcli never reads (objects, raw bytes, no ONNX type)."""
    if dtype.hasobject:
        raise GeomError(
            f"{name}: holds Python objects (dtype {dtype}), which only pickle can read; "
            "geomcli never unpickles"
        )
    if _is_raw_bytes(dtype) and dtype.itemsize in _SAVED_AS_RAW_BYTES:
        raise _saved_without_its_type(
            f"{name}: dtype {dtype} is raw bytes of no type geomcli can tell (np.save writes ml_dtypes' "
            f"{_SAVED_AS_RAW_BYTES[dtype.itemsize]} so, dropping the type's name)", dtype.itemsize)
    if not _is_tensor_type(dtype):
        raise GeomError(f"{name}: dtype {dtype} is not an ONNX tensor type geomcli reads; it takes {_TAKES}")
    _check_shape(shape, dtype, name)
    return shape, fortran, dtype, offset


def _saved_without_its_type(found: str, itemsize: int) -> GeomError:
    """``found`` (an ml_dtypes type np.save wrote so that it cannot be read back), and what to save instead."""
    return GeomError(f"{found}; save a.astype(np.float32), which holds each value exactly, or "
                     f"a.view(np.uint{8 * itemsize}), the same bits")


def _check_shape(shape: tuple[int, ...], dtype: np.dtype, name: str) -> None:
    """Refuse a shape numpy's header check lets through but no array can have: a bool (True is an
    int to that check) or a dimension past int64 broke np.load with a traceback."""
    if len(shape) + dtype.ndim > _MAX_AXES:  # (np.frombuffer's reshape, for a pipe, raised ValueError)
        raise GeomError(f"{name}: not a readable NPY (malformed header: {len(shape) + dtype.ndim} axes, more than "
                        f"numpy's {_MAX_AXES})")
    for n in shape:
        if type(n) is not int or not 0 <= n < 2**63:
            raise GeomError(f"{name}: not a readable NPY (malformed header: dimension {n!r} in shape {shape})")
    # numpy's own bound, which holds even when another dimension is 0
    if math.prod(n for n in shape if n) * dtype.itemsize >= 2**63:
        raise GeomError(f"{name}: not a readable NPY (malformed header: no array can have shape {shape} of {dtype})")


_TAKES = ("bool, int8-int64, uint8-uint64, float16/32/64, bfloat16 (and ml_dtypes' float8 and int4 types), "
          "complex64/128 and strings")


def refuse_type(dtype: np.dtype, name: str) -> None:
    """A GeomError for an array of ``dtype`` geomcli never reads (no ONNX tensor type: dates,
    durations, long double, structured records), as a .npy's header is refused; for another
    array's (a zarr's) header, whose data reads as numpy's."""
    if dtype.kind != "T" and not _is_tensor_type(dtype):
        raise GeomError(f"{name}: dtype {dtype} is not an ONNX tensor type geomcli reads; it takes {_TAKES}")


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


class CutShort(GeomError):
    """An NPY whose data is shorter than its header declares: its header and its size tell it (a
    URL's from the object's first bytes and size, not read whole to say so)."""


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
        raise CutShort(
            f"{name}: not a readable NPY (truncated: shape {shape} of {dtype} needs {needed} "
            f"bytes of data, the file has {max(size - offset, 0)})"
        )


def stream_size(peek: Callable[[int, int], bytes], name: str, max_pixels: int) -> int:
    """The bytes a .npy at the start of a stream takes, header and data, as its header declares,
    once its elements are checked against ``max_pixels``: a pipe is read that far and no further.
    ``peek(start, size)`` gives bytes of the stream, reading it as far as they go."""
    start = peek(0, 12)
    # the header's length: 2 bytes after the version in 1.0, 4 in 2.0 and 3.0
    prefix = 10 if start[6:7] == b"\x01" else 12
    length = int.from_bytes(start[8:prefix], "little")
    # a longer header is refused by _parse_header; more than that is not read to tell
    shape, _, dtype, offset = _parse_header(io.BytesIO(peek(0, prefix + min(length, _MAX_HEADER + 1))), name)
    check_size(_elements(shape, dtype), max_pixels, name)
    return offset + math.prod(shape) * dtype.itemsize


def read_header(source: str | bytes, name: str, size: int | None = None) -> Header:
    """``size``: the file's, where ``source`` is its first bytes alone (a URL's: io.HEAD_BYTES)."""
    f, read = _open(source, name)
    with f:
        shape, _, dtype, offset = _parse_header(f, name)
    _check(shape, dtype, offset, read if size is None else size, name, None)
    file_size = None if isinstance(source, bytes) else size
    return Header("npy", _elements(shape, dtype), dtype, 1, file_size, None)


def read(source: str | bytes, name: str, max_pixels: int, mmap: bool) -> Loaded:
    f, size = _open(source, name)
    with f:
        shape, fortran, dtype, offset = _parse_header(f, name)
    _check(shape, dtype, offset, size, name, max_pixels)
    if isinstance(source, bytes) and dtype.itemsize and dtype.subdtype is None:
        # the array is a view of the bytes read from the pipe: np.load would copy them
        flat = np.frombuffer(source, dtype, math.prod(shape), offset)
        data = flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)
        return Loaded(data, "npy", None, "-")
    # np.memmap cannot map zero bytes; such arrays are read the plain way
    use_mmap = mmap and isinstance(source, str) and math.prod(shape) * dtype.itemsize > 0
    try:
        if isinstance(source, bytes):
            data = np.load(io.BytesIO(source), allow_pickle=False)
        else:
            data = np.load(source, mmap_mode="r" if use_mmap else None, allow_pickle=False)
    except OSError as e:
        if e.errno is not None:  # the system's refusal (no memory to map it, no descriptor), not the file's fault
            raise GeomError(f"{name}: cannot read ({e.strerror or e})") from e
        raise GeomError(f"{name}: not a readable NPY ({one_line(e)})") from e
    except (ValueError, EOFError) as e:
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


# the widths of ml_dtypes' types, which np.save writes as raw bytes ('<V2'): their names, for the
# message that refuses such a file
_SAVED_AS_RAW_BYTES = {1: "float8 and int4 types", 2: "bfloat16"}


def _is_raw_bytes(dtype: np.dtype) -> bool:
    return dtype.type is np.void and dtype.names is None and dtype.subdtype is None


def _is_extension(dtype: np.dtype) -> bool:
    """A scalar type registered from outside numpy (ml_dtypes' bfloat16, float8_*, int4, ...)."""
    return (
        dtype.kind == "V"
        and dtype.names is None
        and dtype.subdtype is None
        and dtype.type is not np.void
    )
