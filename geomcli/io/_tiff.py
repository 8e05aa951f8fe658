"""TIFF through tifffile (imported here, so only a TIFF pays for it): every dtype, page stacks."""

from __future__ import annotations

import io
import logging
import struct
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import numpy as np

from geomcli.errors import GeomError
from geomcli.io._base import Header, Loaded, check_size, one_line, raised_in

# tifffile raises its own TiffFileError (a ValueError), and on odd files also these
_DECODE_ERRORS = (
    ValueError,
    KeyError,
    IndexError,
    OSError,
    EOFError,
    struct.error,
    zlib.error,
    ZeroDivisionError,
    OverflowError,
)
# a crafted tag of the wrong type trips tifffile's own code; from ours these would be bugs
_INSIDE_ERRORS = (TypeError, AttributeError, RuntimeError, AssertionError, NotImplementedError)


def read_header(source: str | bytes, name: str) -> Header:
    with _tiff(source, name) as (tif, _):
        series = _series(tif, name)
        shape, layout, _ = _layout(series)
        size = None if isinstance(source, bytes) else int(tif.filehandle.size)
        return Header("tiff", shape, np.dtype(series.dtype), len(tif.pages), size, layout)


def read(source: str | bytes, name: str, max_pixels: int, mmap: bool) -> Loaded:
    with _tiff(source, name) as (tif, notes):
        series = _series(tif, name)
        shape, layout, planar = _layout(series)
        check_size(shape, max_pixels, name)
        _check_codecs(series, name)
        _check_extent(tif, series, name)
        data: np.ndarray | None = None
        if mmap and isinstance(source, str):
            data = _memmap(tif, series, source)
        if data is None:
            data = series.asarray()
        if planar:
            # planar RGB (S, Y, X) becomes the same HWC as contiguous RGB
            data = np.moveaxis(data, 0, -1)
            notes.append("planar samples moved to the last axis (HWC)")
    return Loaded(data, "tiff", layout, "-" if isinstance(source, bytes) else source, tuple(notes))


@contextmanager
def _tiff(source: str | bytes, name: str) -> Iterator[tuple[Any, list[str]]]:
    """Open with tifffile; its log lines become notes, its exceptions GeomErrors."""
    import tifffile

    notes: list[str] = []
    handler = _Collect(notes)
    log = logging.getLogger("tifffile")
    propagate = log.propagate
    log.addHandler(handler)
    # tifffile logs what it repairs or skips; the summary shows it instead of a stray stderr line
    log.propagate = False
    try:
        with tifffile.TiffFile(io.BytesIO(source) if isinstance(source, bytes) else source) as tif:
            yield tif, notes
        if handler.damage:
            # tifffile logs an error and reads on (a cut IFD chain, a bad tag): pages could be
            # missing or zero-filled, so the file is refused
            raise GeomError(f"{name}: not a readable TIFF ({handler.damage[0]})")
    except GeomError:
        raise
    except MemoryError as e:
        raise GeomError(
            f"{name}: not a readable TIFF (declares more data than fits in memory)"
        ) from e
    except _DECODE_ERRORS as e:
        raise GeomError(f"{name}: not a readable TIFF ({one_line(e)})") from e
    except _INSIDE_ERRORS as e:
        if not raised_in(e, "tifffile"):
            raise
        raise GeomError(f"{name}: not a readable TIFF ({one_line(e)})") from e
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


class _Collect(logging.Handler):
    """tifffile's warnings become notes, its errors signs of damage."""

    def __init__(self, notes: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.notes = notes
        self.damage: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = "tifffile: " + " ".join(record.getMessage().split())[:200]
        (self.damage if record.levelno >= logging.ERROR else self.notes).append(text)


def _series(tif: Any, name: str) -> Any:
    series = tif.series
    if not series:
        raise GeomError(f"{name}: not a readable TIFF (no images)")
    if len(series) > 1:
        shapes = ", ".join(str(tuple(s.shape)) for s in series[:4])
        raise GeomError(
            f"{name}: holds {len(series)} image series of different shapes ({shapes}); "
            "geomcli reads single-series TIFFs"
        )
    one = series[0]
    if one.dtype is None:
        raise GeomError(f"{name}: not a readable TIFF (unsupported sample format)")
    return one


def _layout(series: Any) -> tuple[tuple[int, ...], str | None, bool]:
    """The shape as read_array returns it, its image layout, and whether samples are planar."""
    shape, axes = tuple(int(n) for n in series.shape), series.axes
    if axes == "YX":
        return shape, "HW", False
    if axes == "YXS":
        return shape, "HWC", False
    if axes == "SYX":
        return (*shape[1:], shape[0]), "HWC", True
    return shape, None, False


def _check_codecs(series: Any, name: str) -> None:
    import tifffile

    page = series.keyframe
    if page.compression not in tifffile.TIFF.DECOMPRESSORS:
        raise GeomError(
            f"{name}: compression {_enum_name(page.compression)} is not available "
            "(pip install imagecodecs)"
        )
    if page.predictor not in tifffile.TIFF.PREDICTORS:
        raise GeomError(
            f"{name}: predictor {_enum_name(page.predictor)} is not available "
            "(pip install imagecodecs)"
        )


def _enum_name(value: Any) -> str:
    return getattr(value, "name", str(value))


def _check_extent(tif: Any, series: Any, name: str) -> None:
    """A strip or tile past the end of the file: tifffile would fill it with zeros, we refuse."""
    size = tif.filehandle.size
    for page in series.pages:
        if page is None:
            continue
        offsets, counts = page.dataoffsets, page.databytecounts
        if len(offsets) != len(counts) or not offsets:
            raise GeomError(f"{name}: not a readable TIFF (missing strip offsets or byte counts)")
        try:
            past_end = any(int(o) + int(c) > size for o, c in zip(offsets, counts))
        except (TypeError, ValueError) as e:
            raise GeomError(f"{name}: not a readable TIFF (malformed strip offsets)") from e
        if past_end:
            raise GeomError(f"{name}: not a readable TIFF (truncated)")


def _memmap(tif: Any, series: Any, path: str) -> np.ndarray | None:
    """A read-only map of uncompressed contiguous data in native byte order; else None."""
    offset = series.dataoffset
    if not isinstance(offset, (int, np.integer)):
        return None  # a crafted offset tag of another type: let tifffile's reader judge it
    dtype = np.dtype(series.dtype)
    native = "<" if sys.byteorder == "little" else ">"
    if offset is None or dtype.kind == "b" or (tif.byteorder != native and dtype.itemsize > 1):
        return None
    if series.size == 0 or offset + series.size * dtype.itemsize > tif.filehandle.size:
        return None
    mapped: np.ndarray = np.memmap(
        path, dtype=dtype, mode="r", offset=int(offset), shape=tuple(series.shape)
    )
    return mapped


def write(data: np.ndarray, f: IO[bytes]) -> None:
    import tifffile

    rgb = data.ndim == 3 and data.shape[-1] in (3, 4) and data.dtype in (np.uint8, np.uint16)
    # photometric is always explicit: tifffile's guess for (N, H, 3) data is deprecated
    tifffile.imwrite(f, data, photometric="rgb" if rgb else "minisblack")
