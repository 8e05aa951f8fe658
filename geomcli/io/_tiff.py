"""TIFF through tifffile (imported here, so only a TIFF pays for it): every dtype, page stacks."""

from __future__ import annotations

import dataclasses
import functools
import io
import logging
import math
import re
import struct
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, BinaryIO, Literal

import numpy as np

from geomcli.errors import GeomError
from geomcli.io._base import (
    ORIENTATIONS,
    Header,
    Loaded,
    Metadata,
    SeriesError,
    WriteOptions,
    check_size,
    one_line,
    orient,
    raised_in,
)

# tifffile raises its own TiffFileError (a ValueError), and on odd files also these; imagecodecs'
# decoders raise RuntimeErrors; a crafted tag of the wrong type trips tifffile's own code (TypeError,
# AttributeError, ...). Caught only when raised in tifffile's code (raised_in): from ours they are bugs.
_DECODE_ERRORS: tuple[type[Exception], ...] = (
    ValueError,
    KeyError,
    IndexError,
    OSError,
    EOFError,
    struct.error,
    zlib.error,
    ZeroDivisionError,
    OverflowError,
    TypeError,
    AttributeError,
    RuntimeError,
    AssertionError,
    NotImplementedError,
)


# A stripped page of at most this many bytes is read whole, chunk by chunk: zarr's store costs about
# 0.15 ms a strip, 29 s for 200,000 one-row strips that tifffile decodes whole in 0.05 s
PAGE_BYTES = 64 << 20
# Past this many bytes of pixels a file is written as BigTIFF (classic TIFF offsets are 32-bit;
# the margin leaves room for the tags). A module constant so tests can lower it.
BIGTIFF_BYTES = 2**32 - 2**25

# tifffile's compression names, by its enum; geomcli writes these names back
_COMPRESSION_NAMES = {
    "ADOBE_DEFLATE": "zlib",
    "DEFLATE": "zlib",
    "LZMA": "lzma",
    "ZSTD": "zstd",
    "LZW": "lzw",
    "JPEG": "jpeg",
    "PACKBITS": "packbits",
}
COMPRESSIONS = ("none", "zlib", "lzma", "zstd", "lzw", "jpeg", "packbits")
_ENUM_OF = {"zlib": "ADOBE_DEFLATE", "lzma": "LZMA", "zstd": "ZSTD", "lzw": "LZW", "jpeg": "JPEG",
            "packbits": "PACKBITS"}
# What a compression holds where it is short of what a TIFF holds (the others, every array a TIFF
# holds): its dtypes, the samples of a pixel (an array's last axis; a 2-d array's pixels have one)
# and their name, and the most pixels a row holds (libjpeg's 65535 a side; write keeps a strip's
# height below it). The one rule a plan judges a header by and write its data by: compression_refusal.
_HOLDS: dict[str, tuple[tuple[str, ...], tuple[int, ...], str, int]] = {
    "jpeg": (("uint8",), (1, 3), "grey or RGB", 65535),
}
# TIFF's predictors geomcli writes back, by the dtype kind each takes (tifffile refuses the others:
# horizontal differencing of floats), and the codecs it keeps one with (lossless, of bytes)
_PREDICTED = {2: "iu", 3: "f"}
_PREDICTABLE = ("zlib", "lzma", "zstd", "lzw")
_JPEG_ROWS = 65520  # a JPEG strip's most rows: below libjpeg's 65535, a multiple of its 16-row blocks
# ImageJ's units, as tifffile reads them from the description, in geomcli's names
_UNITS = {"micron": "micron", "um": "micron", "\u00b5m": "micron", "\\u00B5m": "micron",
          "cm": "centimeter", "mm": "millimeter", "inch": "inch"}
# geomcli's names of units as ImageJ writes them (a script of its own tests for 'mm')
_IMAGEJ_UNITS = {"micron": "micron", "centimeter": "cm", "millimeter": "mm", "inch": "inch"}
_IMAGEJ_KEPT = ("spacing", "finterval", "fps")
# the axes a written TIFF names each layout by; N is tifffile's Q (other), as for stacked series
_AXES = {"HW": "YX", "HWC": "YXS", "CHW": "CYX", "NCHW": "QCYX", "NHWC": "QYXS", "NHW": "QYX"}
# our layouts for TIFF axes of rank 2-3 (after a planar image's samples moved last); see _layout_of for N
_LAYOUTS = {axes: layout for layout, axes in _AXES.items() if "N" not in layout}
# A TIFF's own axes as a layout (geomcli.engine.layout.roles): stack axes, channels (C, or the
# samples S), then Y and X, with the samples last or planar before Y (ImageJ's TZCYX, OME's TCZYX)
_OWN_AXES = re.compile(r"[^SYX]*(?:YXS|S?YX)")


@dataclass(frozen=True)
class _Choice:
    """What is read: its shape (as read_array returns it), dtype, axes and how to get it."""

    shape: tuple[int, ...]
    dtype: np.dtype
    axes: str
    kind: str | None
    planar: bool
    keyframe: Any
    pages: tuple[Any, ...]
    load: Callable[[], np.ndarray]
    series: Any | None  # the one series read whole, which may be memory-mapped
    note: str | None
    image: int | None = None  # the series (an OME-XML Image) read, or the page is a plane of
    channel: int | None = None  # an OME page's channel in its image (None: its image has one, or all are read)
    colormaps: tuple[Any, ...] = ()  # each page's own ColorMap, where a palette stack's pages differ in them


def read_header(
    source: str | bytes | BinaryIO, name: str, series: int | None = None, page: int | None = None,
    auto_orient: bool = True, palette: bool = False,
) -> Header:
    """The shape, dtype and layout :func:`read` returns (a palette expanded, but its indices
    with ``palette``: :func:`kept_palette`), from the tags."""
    with _tiff(source, name) as (tif, _):
        choice = _choose(tif, name, series, page)
        layout, _ = _layout(choice)
        indexed = palette and kept_palette(choice, name) is not None
        shape, dtype = (choice.shape, choice.dtype) if indexed else _expanded(choice)
        if indexed and _extra_samples(choice):
            shape, layout = shape[:-1], _without_samples(layout)
        elif shape != choice.shape:
            layout = _expanded_layout(layout, len(shape), choice.axes)
        if _turned(choice, layout, auto_orient) in (5, 6, 7, 8):
            shape = (shape[1], shape[0], *shape[2:])
        size = None if isinstance(source, bytes) else int(tif.filehandle.size)
        axes = choice.axes if choice.kind is not None and len(choice.axes) == len(shape) else None
        return Header("tiff", shape, dtype, len(tif.pages), size, layout, axes, indexed)


def read_metadata(
    source: str | bytes | BinaryIO, name: str, series: int | None = None, page: int | None = None,
    auto_orient: bool = True, palette: bool = False,
) -> Metadata:
    """The metadata :func:`read` gives with the same options (axes, OME sizes and channels, ImageJ
    calibration, resolution, ICC, compression...), from the tags and descriptions, no pixel read:
    for a ``--dry-run`` to say what the run will warn of it."""
    with _tiff(source, name) as (tif, _):
        choice = _choose(tif, name, series, page)
        layout, _ = _layout(choice)
        kept = kept_palette(choice, name) if palette else None
        if kept is None and _expanded(choice)[0] != choice.shape:  # (a palette, as read_header: its turn is the RGB's)
            layout = _expanded_layout(layout, len(_expanded(choice)[0]), choice.axes)
        elif kept is not None and _extra_samples(choice):
            layout = _without_samples(layout)
        turned = _turned(choice, layout, auto_orient)
        return _kept(_metadata(tif, choice, kept_orientation=not turned).upright(turned), kept)


def read(
    source: str | bytes,
    name: str,
    max_pixels: int,
    mmap: bool,
    series: int | None = None,
    page: int | None = None,
    auto_orient: bool = True,
    palette: bool = False,
) -> Loaded:
    """``palette``: a palette page's indices as they are, its colours in Metadata.palette (and
    palette_16bit: :func:`kept_palette`); else they are expanded to RGB."""
    with _tiff(source, name) as (tif, notes):
        choice = _choose(tif, name, series, page)
        layout, layout_note = _layout(choice)
        check_size(_expanded(choice)[0], max_pixels, name)
        _check_codecs(choice.pages or (choice.keyframe,), name)
        _check_extent(tif, choice.pages, name)
        data: np.ndarray | None = None
        if mmap and isinstance(source, str) and choice.series is not None:
            data = _memmap(tif, choice.series, source)
        if data is None:
            data = _load(choice, name, source)
        if choice.note:
            notes.append(choice.note)
        notes.extend(pyramid_notes(choice))
        if choice.planar:
            # a planar image (S, Y, X) is the same HWC as a contiguous one (as image formats hold
            # it); its metadata's axes (SYX) have a TIFF output store it planar again
            data = np.moveaxis(data, -3, -1)
        noted = len(notes)  # (the layout's note comes first, naming the layout read: a palette's expanded)
        kept = kept_palette(choice, name) if palette else None
        if kept is None:
            data, layout = _photometric(data, layout, choice, notes)
        elif _extra_samples(choice):
            data, layout = data[..., 0], _without_samples(layout)  # the indices; their alpha named dropped
        if layout_note:
            notes.insert(noted, _layout_note(choice, layout) or layout_note)
        turned = _turned(choice, layout, auto_orient)
        if turned:
            data = orient(data, turned)
            notes.append(f"{ORIENTATIONS[turned]} by its TIFF orientation {turned}")
        metadata = _kept(_metadata(tif, choice, kept_orientation=not turned).upright(turned), kept)
        pages = len(tif.pages)
        stored = _orientation(choice) if 274 in choice.keyframe.tags else None
    src = "-" if isinstance(source, bytes) else source
    return Loaded(data, "tiff", layout, src, tuple(notes), metadata, pages, orientation=stored, upright=bool(turned))


def pyramid_notes(choice: _Choice) -> list[str]:
    """A note where the series read is a pyramid: its other levels are not read, nor made again."""
    levels = 1 if choice.series is None else len(choice.series.levels)
    return [f"a pyramid of {levels} levels: the first (full resolution) alone is read"] if levels > 1 else []


def as_zarr(path: str, series: int | None, auto_orient: bool = True,
            max_pixels: int | None = None, page: int | None = None) -> tuple[Tiles, str | None, Metadata] | None:
    """The array :func:`read` returns, as :class:`Tiles` read region by region through the file's
    tiles or strips, its layout and its metadata: for reading chunk by chunk, never whole. None where read's
    array is more than the stored pixels in their stored order (a palette expanded, min-is-white
    inverted, an orientation turned, several series stacked, a planar image's samples moved
    last). A stripped page is read whole where it has at most PAGE_BYTES and ``max_pixels``
    elements (a task's limit), else strip by strip. ``page``: that page alone (--page), as read
    gives it."""
    with _tiff(path, path) as (tif, _):
        choice = _choose(tif, path, series, page)
        layout, layout_note = _layout(choice)
        if (choice.series is None and page is None or choice.planar or _palette(choice) is not None
                or _enum_name(choice.keyframe.photometric) == "MINISWHITE" or _turned(choice, layout, auto_orient)):
            return None
        _check_codecs(choice.pages or (choice.keyframe,), path)
        _check_extent(tif, choice.pages, path)
        index = list(tif.series).index(choice.series) if page is None else page
        keyframe = choice.keyframe
        sides = (keyframe.imagelength, keyframe.imagewidth)
        tile = (keyframe.tilelength, keyframe.tilewidth) if keyframe.is_tiled else (keyframe.rowsperstrip, None)
        if keyframe.is_tiled and _sides_past(tile, sides) or not keyframe.is_tiled and not tile[0]:
            # tifffile's store reads a whole tile a region touches: a crafted one of 2**30 a side
            # allocated an exabyte, one of 0 (or 0 rows a strip) divided by zero; decoded whole instead
            return None
        metadata = _metadata(tif, choice)
        # as read notes them (a palette, min-is-white or an orientation are not read so)
        notes = (*([choice.note] if choice.note else []), *pyramid_notes(choice),
                 *([layout_note] if layout_note else []))
    samples = choice.shape[len(choice.shape) - 1:] if keyframe.samplesperpixel > 1 else ()  # (planar: None above)
    stack = choice.shape[:len(choice.shape) - 2 - len(samples)]
    elements = math.prod(sides) * math.prod(samples)
    whole_pages = (not keyframe.is_tiled and elements * choice.dtype.itemsize <= PAGE_BYTES
                   and (max_pixels is None or elements <= max_pixels))
    step = sides if whole_pages else tuple(min(length, side or length) for length, side in zip(sides, tile))
    chunks = (*(1 for _ in stack), *step, *samples)
    strile = math.prod(step) * (1 if keyframe.planarconfig == 2 else keyframe.samplesperpixel)  # (2: separate)
    tiles = Tiles(path, index, choice.shape, choice.dtype, chunks, "page" if whole_pages else "strile", notes, strile,
                  page=page is not None)
    return tiles, layout, metadata


class Tiles:
    """A TIFF series' stored pixels, read region by region through tifffile's zarr store (which
    decodes only the tiles or strips a region touches, or with ``chunkmode`` "page" each page a
    region touches). It pickles as its path, so a task on any worker reads its own region; each
    read opens the file and closes it. ``page``: ``series`` is the index of the one page read."""

    def __init__(self, path: str, series: int, shape: tuple[int, ...], dtype: np.dtype,
                 chunks: tuple[int, ...], chunkmode: str = "strile", notes: tuple[str, ...] = (),
                 strile: int = 0, *, page: bool = False) -> None:
        self.path, self.series, self.shape, self.dtype, self.chunks = path, series, shape, dtype, chunks
        self.page = page
        self.chunkmode = chunkmode
        self.notes = notes  # what a run reading it notes (a pyramid's first level alone read)
        self.strile = strile  # the most elements one read decodes: a strip, a tile or a page
        self.ndim = len(shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        import tifffile
        import zarr

        log = logging.getLogger("tifffile")
        if _IN_TILE_READS not in log.filters:
            log.addFilter(_IN_TILE_READS)
        _tile_reads.on = True
        # tifffile's and its codecs' failures as read gives them: a damaged strip is one error line
        try:
            with _as_geom_errors(self.path, self.path):
                if self.page:
                    store = tifffile.imread(self.path, aszarr=True, key=self.series, chunkmode=self.chunkmode)
                else:
                    store = tifffile.imread(self.path, aszarr=True, series=self.series, level=0,
                                            chunkmode=self.chunkmode)
                try:
                    return np.asarray(zarr.open_array(store, mode="r")[key])
                finally:
                    store.close()
        finally:
            _tile_reads.on = False


# tifffile logs what it repairs each time a file is opened: as_zarr judged the file, so its chunks'
# reads (each opens it, on dask's threads) say nothing; "<tifffile.TiffTag 262 @58> raised
# ValueError('65535 is not a valid PHOTOMETRIC')" went to stderr once a chunk, -q or not
_tile_reads = threading.local()


class _InTileReads(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_tile_reads, "on", False)


_IN_TILE_READS = _InTileReads()


def _load(choice: _Choice, name: str, source: str | bytes) -> np.ndarray:
    """``choice.load()``; a strip or tile its codec refuses is a GeomError naming the compression,
    one tifffile's own code trips on (a tile side of 0: "division by zero") the tag to blame."""
    from geomcli.io import _tiff_tags

    try:
        return choice.load()
    except _DECODE_ERRORS as e:
        if not raised_in(e, "tifffile"):
            raise
        tag = _tiff_tags.damaged_tag(source) if type(e).__module__ == "builtins" else None
        if tag is not None:
            raise GeomError(f"{name}: not a readable TIFF ({tag})") from e
        codec = _enum_name(choice.keyframe.compression)
        codec = "uncompressed" if codec == "NONE" else codec
        raise GeomError(f"{name}: not a readable TIFF ({codec} data: {one_line(e)})") from e


def _photometric(
    data: np.ndarray, layout: str | None, choice: _Choice, notes: list[str]
) -> tuple[np.ndarray, str | None]:
    """Values as the viewer sees them: min-is-white inverted, palette indices expanded to RGB.

    Min-is-white is inverted only where that is exact and 0 is black after it: bilevel (bool) and
    unsigned data, as max - v (max of the stored bits), so every output, min-is-black, shows what
    the input showed. Float and signed data have no fixed white to invert about: their values are
    kept as stored, and _not_carried names the photometric in a warning (the output shows them
    inverted). A bool mask written by tifffile, min-is-white by default, so reads inverted.
    """
    page = choice.keyframe
    photometric = _enum_name(page.photometric)
    if photometric == "MINISWHITE" and data.dtype.kind in "bu":
        if data.dtype.kind == "b":
            data = ~data
        else:
            bits = _int(page.bitspersample)
            top = (1 << bits) - 1 if 0 < bits < 8 * data.itemsize else None
            data = (top if top is not None else np.iinfo(data.dtype).max) - data
        notes.append("min-is-white values inverted (0 is black)")
    elif (colormaps := _colormaps(choice)) is not None and data.dtype.kind == "u":
        extra = _extra_samples(choice)
        indices = data[..., 0] if extra else data
        if indices.size and int(indices.max()) >= colormaps.shape[-1]:
            return data, layout  # an index past the map: a damaged file, left as indices
        if len(colormaps) == 1:
            colours = np.moveaxis(colormaps[0][:, indices], 0, -1)
        else:  # each page through its own map: (pages, Y, X) -> (pages, Y, X, 3) -> the stack's shape
            pages = indices.reshape(len(colormaps), *indices.shape[-2:])
            colours = np.stack([np.moveaxis(colormap[:, one], 0, -1) for colormap, one in zip(colormaps, pages)])
            colours = colours.reshape(*indices.shape, 3)
        if not extra:
            notes.append("palette expanded to RGB")
            return colours, _expanded_layout(layout, colours.ndim, choice.axes)
        # an alpha sample beside the index (Pillow's PA): RGBA, of the wider of the two types (v * 257)
        dtype = _expanded(choice)[1]
        data = np.concatenate([_widened(colours, dtype), _widened(data[..., 1:], dtype)], axis=-1)
        notes.append("palette expanded to RGBA")
    return data, layout


def _widened(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """8-bit values as ``dtype`` holds them: v * 257 for 16 bits, so 255 stays the top."""
    return values.astype(dtype) * 257 if values.dtype.itemsize < dtype.itemsize else values.astype(dtype)


def _expanded(choice: _Choice) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of what is read once a palette is expanded to RGB."""
    colormap = _palette(choice)
    if colormap is None:
        return choice.shape, choice.dtype
    extra = _extra_samples(choice)
    if extra:  # RGB and the alpha beside the index, of the wider type
        return (*choice.shape[:-1], 3 + extra), max(colormap.dtype, choice.dtype, key=lambda dtype: dtype.itemsize)
    return (*choice.shape, 3), colormap.dtype


def _palette(choice: _Choice) -> np.ndarray | None:
    """The (3, 2**bits) colormap a palette image's indices expand through (its first page's, where
    its pages have their own: :func:`_colormaps`); None when there is none to apply."""
    colormaps = _colormaps(choice)
    return None if colormaps is None else colormaps[0]


def _colormaps(choice: _Choice) -> np.ndarray | None:
    """The (maps, 3, 2**bits) colormaps a palette image's indices expand through: one, or each
    page's own (_Choice.colormaps), as uint8 when they hold 8-bit values stored 16-bit (v * 257,
    or v * 256 as libtiff and Pillow write them, whose readers take the high byte); None when
    there is none to apply (not palette, or a crafted map)."""
    page = choice.keyframe
    if _enum_name(page.photometric) != "PALETTE" or page.colormap is None or choice.dtype.kind != "u":
        return None
    colormaps = np.asarray(choice.colormaps or (page.colormap,))
    if colormaps.ndim != 3 or colormaps.shape[1] != 3 or colormaps.dtype.kind != "u":
        return None  # a crafted colormap: left as indices
    for scale in (257, 256):
        if not (colormaps % scale).any():
            return (colormaps // scale).astype(np.uint8)
    return colormaps


def kept_palette(choice: _Choice, name: str) -> Metadata | None:
    """A palette page's colours as Metadata holds them: ``palette``, R, G, B bytes an entry (8-bit
    values, stored v * 257 or v * 256; of 16-bit ones their high bytes, as libtiff and Pillow show
    them), and ``palette_16bit``, the 16-bit ones as they are; None where there is none.
    A ColorMap holds 2**bits entries by the format, which writers pad with black (tifffile's
    users, geomcli's _colormap): the black entries past its last colour are left out, as a PNG's
    PLTE holds only its own (an index past them is written black, as it reads). Pages stacked
    (series of their own, or pages of one series) whose maps differ are refused: one palette would
    mislabel some."""
    colormap = _palette(choice)
    if colormap is None:
        return None
    if choice.colormaps:
        raise GeomError(f"{name}: its pages have palettes of their own, which one stack of indices cannot keep "
                        "(--keep-palette): pick a page with --page N, or read the colours without --keep-palette")
    coloured = np.flatnonzero(colormap.any(axis=0))
    colormap = colormap[:, :int(coloured[-1]) + 1 if coloured.size else 1]
    # an index's alpha sample (Pillow's PA) is no palette's: a palette holds one alpha an entry
    dropped = ("per-pixel alpha beside the palette indices (a palette holds one alpha an entry)",) \
        if _extra_samples(choice) else ()
    if colormap.dtype == np.uint8:
        return Metadata(palette=colormap.T.tobytes(), dropped=dropped)
    return Metadata(palette=(colormap >> 8).astype(np.uint8).T.tobytes(),
                    palette_16bit=colormap.T.astype("<u2").tobytes(), dropped=dropped)


def _kept(metadata: Metadata, kept: Metadata | None) -> Metadata:
    """``metadata`` with the palette :func:`kept_palette` keeps, or none."""
    if kept is None:
        return metadata._replace(palette=None, palette_16bit=None)
    return metadata._replace(palette=kept.palette, palette_16bit=kept.palette_16bit,
                             dropped=metadata.dropped + kept.dropped)


def _extra_samples(choice: _Choice) -> int:
    """The samples beside a palette page's index (an alpha: Pillow's PA), read as its last axis."""
    if _palette(choice) is None:
        return 0
    return max(0, _int(choice.keyframe.samplesperpixel) - 1)


def _without_samples(layout: str | None) -> str | None:
    """The layout of a palette's indices read without the samples beside them."""
    return {"HWC": "HW", "NHWC": "NHW"}.get(layout or "", None)


def _expanded_layout(layout: str | None, ndim: int, axes: str) -> str | None:
    """The layout of indices of these TIFF ``axes`` expanded to RGB on a new last axis (or, with
    their alpha sample, on its axis: HWC stays HWC)."""
    if layout in ("HWC", "NHWC"):
        return layout
    if layout in ("CHW", "NCHW") and axes.endswith("CYX"):
        # channels of indices (CYX: tifffile's ImageJ default for a stack of a LUT; ZCYX), each
        # through the one map: C is a stack axis of RGB images, as an RGB hyperstack's (CYXS)
        return axes + "S"
    if layout == "IYX":  # tifffile's axes of plain pages (libtiff's and Pillow's stacks), whose RGB pages read NHWC
        return "NHWC"
    if layout is not None and layout.endswith("YX") and "S" not in layout:
        return layout + "S"  # a stack's own axes (ImageJ's ZYX of a LUT, tifffile's IYX of pages): RGB samples
    return {"HW": "HWC", "NHW": "NHWC", None: "NHWC" if ndim == 4 else None}.get(layout, None)


# tifffile reads a page's strips or tiles 256 MiB of them at a time, and a batch's bytes stay while
# the next is read: a 20000x20000 uint16 page (800 MB) of tiles took 1.57 GB (tifffile.imread too),
# of zlib strips 1.29 GB; 990 and 920 MB this many bytes at a time, as quick
_READ_BYTES = 1 << 26


def _reader(item: Any) -> Callable[[], np.ndarray]:
    """The page's or series' asarray, reading its strips or tiles _READ_BYTES at a time."""
    return functools.partial(item.asarray, buffersize=_READ_BYTES)


def _choose(tif: Any, name: str, series: int | None, page: int | None) -> _Choice:
    """The page (--page), the series (--series), the only series, or every series stacked, with
    each page's own ColorMap where a palette stack's pages differ in them (:func:`_page_colormaps`)."""
    choice = _chosen(tif, name, series, page)
    colormaps = _page_colormaps(choice, name)
    return dataclasses.replace(choice, colormaps=colormaps) if colormaps else choice


def _page_colormaps(choice: _Choice, name: str) -> tuple[Any, ...]:
    """Each page's ColorMap, one a page in the stack's order, where a palette stack's pages differ
    in them; () where they share the first's. tifffile reads a series' later pages as TiffFrames,
    of its first page's tags: expanded through its map, every page took the first's colours
    silently. Those are read here as pages (about 0.1 ms a page, palette stacks alone)."""
    import tifffile

    keyframe = choice.keyframe
    if len(choice.pages) < 2 or _enum_name(keyframe.photometric) != "PALETTE" or keyframe.colormap is None:
        return ()
    maps = []
    for page in choice.pages:
        if isinstance(page, tifffile.TiffFrame) and not page.is_virtual:  # (a virtual frame has no tags of its own)
            page = page.aspage()
        colormap = getattr(page, "colormap", None)
        maps.append(np.asarray(keyframe.colormap if colormap is None else colormap))
    if all(np.array_equal(one, maps[0]) for one in maps[1:]):
        return ()
    stacked = math.prod(choice.shape) // max(1, _int(keyframe.imagelength) * _int(keyframe.imagewidth)
                                             * _int(keyframe.samplesperpixel))
    if stacked != len(maps) or any(one.shape != maps[0].shape for one in maps):
        raise GeomError(f"{name}: its pages have palettes of their own, which geomcli cannot match to its "
                        "pages; pick a page with --page N")
    return tuple(maps)


def _chosen(tif: Any, name: str, series: int | None, page: int | None) -> _Choice:
    if page is not None:
        if not 0 <= page < len(tif.pages):
            raise GeomError(f"{name}: --page {page} is out of range (pages 0 to {len(tif.pages) - 1})")
        one = tif.pages[page]
        if one.dtype is None:
            raise GeomError(_unsupported(name, one))
        _check_sides(one, name)
        which = f"page {page} of {len(tif.pages)}"
        plane = _ome_plane(tif, one, name)
        if plane is not None:  # a plane of an OME image: its X and Y sizes and its channel's name stay true
            return _choice(one, one.axes, "ome", (one,), _reader(one), None, which, image=plane[0], channel=plane[1])
        return _choice(one, one.axes, None, (one,), _reader(one), None, which)
    _check_subifds(tif.pages.first, name)
    found = tif.series
    if found and found[0].kind == "generic" and _in_series(found) < len(tif.pages):
        # tifffile's page iterator takes a page that fails to parse (an IndexError) for the end:
        # its generic series left the page out, silently; by index, it raises. Only where pages
        # are missing from the series: parsing each in full took 55 ms of 130 for 1000 pages
        for index in range(len(tif.pages)):
            tif.pages[index]
    # a series' pages after its first as tifffile's light TiffFrames (offsets and byte counts, the
    # first page's tags): full pages parse every tag of every page, 1 ms of a 16-page float stack
    tif.pages.useframes = True
    if not found:
        raise GeomError(f"{name}: not a readable TIFF (no images)")
    if series is not None:
        if not 0 <= series < len(found):
            raise GeomError(f"{name}: --series {series} is out of range (series 0 to {len(found) - 1})")
        chosen = _checked(found[series], name)
        note = f"series {series} of {len(found)}" if len(found) > 1 else None
        return _choice(chosen, chosen.axes, _kind(tif, series, chosen), tuple(chosen.pages), _reader(chosen),
                       chosen, note, image=series)
    if len(found) == 1:
        one = _checked(found[0], name)
        return _choice(one, one.axes, _kind(tif, 0, one), tuple(one.pages), _reader(one), one, None, image=0)
    everything = [_checked(s, name) for s in found]
    first = everything[0]
    if any(s.shape != first.shape or s.dtype != first.dtype or s.axes != first.axes for s in everything):
        shapes = ", ".join(str(tuple(s.shape)) for s in everything[:4])
        raise SeriesError(
            f"{name}: holds {len(found)} image series of different shapes ({shapes}); "
            "pick one with --series N (or a page with --page N)",
            tuple((tuple(s.shape), str(s.dtype), s.axes) for s in everything),
        )

    def stacked() -> np.ndarray:
        return np.stack([_reader(s)() for s in everything])

    pages = tuple(p for s in everything for p in s.pages)
    note = f"{len(found)} series stacked on axis 0"
    return _choice(first, "Q" + first.axes, None, pages, stacked, None, note,
                   (len(found), *first.shape))


# The most SubIFDs (a page's sub-images: pyramid levels, previews) geomcli reads in the first page:
# tifffile parses each in full, and a crafted page pointing at itself 100,000 times took minutes
MAX_SUBIFDS = 32


def _check_subifds(page: Any, name: str) -> None:
    """The first page's SubIFDs, before tifffile's series reader parses each: at most MAX_SUBIFDS,
    none pointing back at the page itself."""
    offsets = page.subifds
    if not offsets:
        return
    if len(offsets) > MAX_SUBIFDS:
        raise GeomError(f"{name}: not a readable TIFF ({len(offsets)} SubIFDs in its first page; "
                        f"geomcli reads at most {MAX_SUBIFDS})")
    if page.offset in offsets:
        raise GeomError(f"{name}: not a readable TIFF (a SubIFD of its first page points back at it)")


def _in_series(found: list[Any]) -> int:
    """How many pages the series and their pyramid levels hold."""
    return sum(len(level.pages) for one in found for level in one.levels)


def _checked(series: Any, name: str) -> Any:
    # tifffile can name a dtype for the series (float64) when its pages have none
    if series.dtype is None or series.keyframe is None or series.keyframe.dtype is None:
        raise GeomError(_unsupported(name, series.keyframe))
    _check_sides(series.keyframe, name)
    return series


def _check_sides(page: Any, name: str) -> None:
    """A side of 0 (a zeroed tag, which TIFF forbids): tifffile reads an empty image from it."""
    for side, tag in ((page.imagewidth, "ImageWidth"), (page.imagelength, "ImageLength")):
        if side == 0:
            raise GeomError(f"{name}: not a readable TIFF (its {tag} tag is 0)")


def _unsupported(name: str, page: Any) -> str:
    """The error for a page whose samples tifffile cannot decode (3-bit signed integers, say)."""
    import tifffile

    if page is not None and page.bitspersample == 0:
        return f"{name}: not a readable TIFF (its BitsPerSample tag is 0)"
    # a tag of a known value is an int, not tifffile's enum, after a crafted one of another
    kind = page.sampleformat if page is not None else None
    if isinstance(kind, int) and kind in set(tifffile.SAMPLEFORMAT):
        kind = tifffile.SAMPLEFORMAT(kind)
    found = f": {page.bitspersample}-bit {_enum_name(kind)}" if page is not None else ""
    return f"{name}: not a readable TIFF (unsupported sample format{found})"


def _choice(
    item: Any, axes: str, kind: str | None, pages: tuple[Any, ...], load: Callable[[], np.ndarray],
    series: Any | None, note: str | None, shape: tuple[int, ...] | None = None, *,
    image: int | None = None, channel: int | None = None,
) -> _Choice:
    shape = tuple(int(n) for n in (shape or item.shape))
    planar = axes == "SYX"  # a stack of planar images stays as stored: NCHW (QSYX), TZSYX...
    if planar:
        shape = (*shape[:-3], shape[-2], shape[-1], shape[-3])
        axes = axes[:-3] + "YXS"
    keyframe = getattr(item, "keyframe", item)
    return _Choice(shape, np.dtype(item.dtype), axes, kind, planar, keyframe, pages, load, series, note, image,
                   channel)


def _ome_plane(tif: Any, page: Any, name: str) -> tuple[int, int | None] | None:
    """Where a page of one grey plane (YX) lies in an OME-TIFF: its image's index (its series')
    and its channel's there (None where the image has one channel); None for a page of another
    file, or of samples, or in no OME series."""
    if not tif.is_ome or page.axes != "YX":
        return None
    _check_subifds(tif.pages.first, name)  # (as a series is read: tifffile parses them in full)
    for index, series in enumerate(tif.series):
        if series.kind != "ome":
            continue
        where = [getattr(one, "index", None) for one in series.pages]
        axes, shape = series.get_axes(False), series.get_shape(False)
        if page.index not in where or not axes.endswith("YXS") or shape[-1] != 1:
            continue
        stack = shape[:len(axes) - 3]  # (T, Z, C) in the order the planes are stored
        if math.prod(stack) != len(where):
            return None
        position = np.unravel_index(where.index(page.index), stack)
        channels = shape[axes.index("C")] if "C" in axes else 1
        return index, int(position[axes.index("C")]) if channels > 1 else None
    return None


def _layout(choice: _Choice) -> tuple[str | None, str | None]:
    """The layout for these axes, and a note saying where it came from (None for a plain image)."""
    axes = choice.axes
    layout = _layout_of(axes)
    if choice.kind is None:
        # pages of samples (RGB, planar or not) are a stack of images, whatever their photometric,
        # and so are pages of grey (tifffile's IYX, QYX), whose stack axis is N
        return (layout if axes == "YX" or "S" in axes or len(axes) == 3 else None), None
    return layout, _layout_note(choice, layout)


def _layout_note(choice: _Choice, layout: str | None) -> str | None:
    """The note of :func:`_layout` for the layout read: a palette stack's expanded to RGB samples
    (ZYXS of ImageJ's ZYX) where the note said ZYX."""
    if choice.kind is None:
        return None
    where = f"axes {choice.axes} from {_DESCRIBED[choice.kind]} metadata"
    if layout is None:
        return f"{where}: no geomcli layout fits (NCHW, NHWC, CHW, HWC, HW); give --layout"
    if len(choice.axes) == 4 and layout in ("NCHW", "NHWC"):
        # (not a hyperstack's own TZYX, nor a palette's ZCYX read as ZCYXS, whose C is a stack axis too)
        return f"{where}: layout {layout}, {choice.axes[0]} as N"
    return f"{where}: layout {layout}"


# whose metadata a series' axes come from, by tifffile's kind of series
_DESCRIBED = {"imagej": "ImageJ", "ome": "OME", "shaped": "tifffile"}


def _layout_of(axes: str | None) -> str | None:
    """geomcli's layout for these TIFF axes, any one leading axis but C, Y, X or S as N; else the
    axes themselves where they end in Y and X (and samples), a hyperstack's layout; else None.

    >>> _layout_of("YXS"), _layout_of("ZCYX"), _layout_of("QYXS"), _layout_of("QSYX")
    ('HWC', 'NCHW', 'NHWC', 'NCHW')
    >>> _layout_of("TZCYX"), _layout_of("ZYX"), _layout_of("YXZ")
    ('TZCYX', 'ZYX', None)
    >>> _layout_of("SYX"), _layout_of("TZSYX")
    ('HWC', 'TZSYX')
    """
    if axes is None:
        return None
    layout = _LAYOUTS.get(axes)
    if layout is None and len(axes) == 4 and axes[1:] in ("CYX", "SYX", "YXS") and axes[0] not in "CYXS":
        layout = "NHWC" if axes[1:] == "YXS" else "NCHW"
    if axes == "QYX":  # a grey stack geomcli wrote as NHW
        layout = "NHW"
    if axes == "SYX":  # a planar image, read as HWC
        layout = "HWC"
    if layout is None and _OWN_AXES.fullmatch(axes) and axes.count("C") <= 1:
        layout = axes
    return layout


def _kind(tif: Any, index: int, series: Any) -> str | None:
    """``imagej`` or ``ome``, ``shaped`` when tifffile's JSON names the axes; else None."""
    if series.kind in ("imagej", "ome"):
        return str(series.kind)
    if series.kind == "shaped":
        shaped = tif.shaped_metadata or ()
        if index < len(shaped) and isinstance(shaped[index], dict) and "axes" in shaped[index]:
            return "shaped"
    return None


def _orientation(choice: _Choice) -> int:
    """The Orientation tag (274) of what is read: 1 (as stored) when absent or unknown."""
    return _page_orientation(choice.keyframe)


def _turned(choice: _Choice, layout: str | None, auto_orient: bool) -> int:
    """The orientation read turns a single image (HW or HWC) upright by; 0 for none."""
    orientation = _orientation(choice)
    return orientation if auto_orient and orientation != 1 and layout in ("HW", "HWC") else 0


def _pages_apart(choice: _Choice, kept_orientation: bool) -> tuple[frozenset[str], tuple[str, ...]]:
    """What of its first page's tags a stack's other pages do not share, each page's as its own IFD
    holds them (series stacked, a generic series' pages, and a series' later pages, which tifffile
    reads as TiffFrames of its first page's tags: :func:`_own_tags`): ``icc``, ``resolution`` or
    ``xmp`` where a page's differs (one output holds one for all: the first's was written for every
    page), and each such difference, and an orientation of a later page the first has not
    (``kept_orientation``), named for a warning. An orientation is warned of, not refused, within a
    series as across series: the pages are read as stored, none turned."""
    first = choice.keyframe
    read: dict[tuple[Any, bytes], dict[int, Any]] = {}
    others = [own for page in choice.pages if page is not first and (own := _own_tags(page, read)) is not None]
    # frames of the same entries share their tags: each set compared once
    distinct = list({id(page.tags): page for page in others}.values())
    apart: set[str] = set()
    said: list[str] = []
    if _overlapping([first, *distinct], 34675) or any(_icc(page) != _icc(first) for page in distinct):
        apart.add("icc")
        said.append("the ICC profiles of the TIFF's pages (they differ; an output holds one for all)")
    if any(_resolution_tags(page) != _resolution_tags(first) for page in distinct):
        apart.add("resolution")
        said.append("the resolutions of the TIFF's pages (they differ; an output holds one for all)")
    if _overlapping([first, *distinct], 700) or any(_xmp(page) != _xmp(first) for page in distinct):
        apart.add("xmp")
        said.append("the XMP packets of the TIFF's pages (they differ; an output holds one for all)")
    if kept_orientation:
        for page in others:
            orientation = _page_orientation(page)
            if orientation not in (1, _page_orientation(first)):
                said.append(f"the TIFF orientation {orientation} of page {page.index} "
                            f"({ORIENTATIONS[orientation]} to be upright)")
    return frozenset(apart), tuple(said)


def _overlapping(pages: list[Any], code: int) -> bool:
    """Whether the values of tag ``code`` (an ICC profile, an XMP packet) of these pages, each
    stored range counted once, hold more bytes than their file: ranges that overlap, as no writer
    stores them. They are taken as differing, not read: a crafted file's 100 MB profile at one byte
    apart in each of 10,000 frames, equal to the first's, was read 10,000 times over to say so."""
    held: dict[Any, int] = {}
    for parent, _, count in {(tag.parent, tag.valueoffset, tag.valuebytecount)
                             for page in pages if (tag := page.tags.get(code)) is not None}:
        held[parent] = held.get(parent, 0) + count
    return any(count > parent.filehandle.size for parent, count in held.items())


# the tags _pages_apart compares pages by: Orientation, X and YResolution, ResolutionUnit, XMP, ICC profile
_APART_TAGS = frozenset({274, 282, 283, 296, 700, 34675})


@dataclass(frozen=True)
class _OwnTags:
    """A series' later page as _pages_apart compares it: its index and those of its own tags that
    are among _APART_TAGS (tifffile's TiffTags, their large values read when asked for)."""

    index: int
    tags: dict[int, Any]


def _own_tags(page: Any, read: dict[tuple[Any, bytes], dict[int, Any]]) -> Any:
    """A page with the tags its own IFD holds: a TiffPage as it is; a TiffFrame, which tifffile
    gives its first page's tags, as :class:`_OwnTags` read from its IFD, the entries of
    _APART_TAGS alone (its aspage() parses every tag, strip offsets and all); None for a virtual
    frame, which has no IFD, or one of a file closed (an OME set's other file). A tag tifffile
    cannot read is left out, so that its page differs from a first that has it. ``read``: the tags
    read so far, by their file and entries' bytes, which hold each value or its offset: frames of
    the same entries (tifffile writes a series' shared values once) share one dict, read once."""
    import tifffile

    if not isinstance(page, tifffile.TiffFrame):
        return page
    tif = page.parent
    handle, layout = tif.filehandle, tif.tiff
    if page.is_virtual or handle.closed:
        return None
    handle.seek(page.offset)
    # (a count past 4096 was refused as tifffile read the frame)
    count = struct.unpack(layout.tagnoformat, handle.read(layout.tagnosize))[0]
    ifd = handle.read(count * layout.tagsize)
    code = layout.byteorder + "H"
    starts = [start for start in range(0, len(ifd) - layout.tagsize + 1, layout.tagsize)
              if struct.unpack_from(code, ifd, start)[0] in _APART_TAGS]
    key = (tif, b"".join(ifd[start:start + layout.tagsize] for start in starts))
    if key not in read:
        tags: dict[int, Any] = {}
        for start in starts:
            try:
                tag = tifffile.TiffTag.fromfile(tif, offset=page.offset + layout.tagnosize + start,
                                                header=ifd[start:start + layout.tagsize])
            except tifffile.TiffFileError:
                continue
            tags.setdefault(tag.code, tag)
        read[key] = tags
    return _OwnTags(page.index, read[key])


def _icc(page: Any) -> bytes | None:
    """A page's ICC profile (tag 34675), byte for byte."""
    icc = page.tags.get(34675)
    return bytes(icc.value) if icc is not None and isinstance(icc.value, (bytes, bytearray)) else None


def _xmp(page: Any) -> bytes | None:
    """A page's XMP packet (tag 700), byte for byte."""
    xmp = page.tags.get(700)
    return bytes(xmp.value) if xmp is not None and isinstance(xmp.value, (bytes, bytearray)) else None


def _resolution_tags(page: Any) -> tuple[float, float, int]:
    """A page's XResolution, YResolution (0 where absent) and ResolutionUnit (0 where absent)."""
    x, y, unit = (page.tags.get(code) for code in (282, 283, 296))
    return (_rational(x.value) if x is not None else 0.0, _rational(y.value) if y is not None else 0.0,
            _int(unit.value) if unit is not None else 0)


def _page_orientation(page: Any) -> int:
    """A page's Orientation tag (274): 1 (as stored) when absent or unknown."""
    tag = page.tags.get(274)
    value = _int(tag.value) if tag is not None else 1
    return value if value in ORIENTATIONS else 1


def _metadata(tif: Any, choice: _Choice, kept_orientation: bool = True) -> Metadata:
    """ICC profile, resolution, axes and compression of what was read; ``kept_orientation``:
    the pixels are as stored, so an Orientation tag other than 1 is named among the dropped. Of a
    stack whose pages differ in them (:func:`_pages_apart`), the ICC profile, resolution and XMP
    packet are dropped, with a warning, and its other pages' orientations named."""
    page = choice.keyframe
    tags = page.tags
    apart, said_apart = _pages_apart(choice, kept_orientation)
    icc_bytes = None if "icc" in apart else _icc(page)
    xmp_bytes = None if "xmp" in apart else _xmp(page)
    resolution: tuple[float, float] | None = None
    unit: str | None = None
    info = (tif.imagej_metadata or {}) if tif.is_imagej else {}
    info = info if isinstance(info, dict) else {}
    x, y, u = tags.get(282), tags.get(283), tags.get(296)
    no_resolution: tuple[str, ...] = ()
    if x is not None and y is not None and "resolution" not in apart:
        values = (_rational(x.value), _rational(y.value))
        if not all(0 < v < 1e12 for v in values):
            # (0, below 0, a 0 denominator, past 1e12: no pixel size; left out, said as a spacing's is)
            no_resolution = (f"the TIFF resolution {values[0]:g} x {values[1]:g} (no positive size)",)
        else:
            resolution = values
            # no ResolutionUnit is TIFF's inch, but ImageJ's reader takes it for no unit (the unit its
            # description names, where it names one, is the unit)
            unit = {2: "inch", 3: "centimeter"}.get(_int(u.value) if u is not None else 1 if tif.is_imagej else 2)
    imagej: tuple[tuple[str, float | str], ...] = ()
    named = resolution is not None and isinstance(info.get("unit"), str)
    if named:
        unit = _UNITS.get(info["unit"], info["unit"])
    if resolution == (1.0, 1.0) and unit is None:
        resolution = None  # what libtiff and tifffile write when nobody set a resolution
    zunit = None
    if choice.kind == "imagej" and isinstance(info.get("zunit"), str) and "spacing" in info:
        spaced = _UNITS.get(info["zunit"], info["zunit"])
        if resolution is None:
            unit = spaced  # the spacing's alone, X and Y uncalibrated (_spacing_unit)
        elif spaced != unit:
            zunit = spaced  # (Fiji's: the spacing in its own unit, beside the resolution's)
        if resolution is None or zunit is not None:
            info = {key: value for key, value in info.items() if key != "zunit"}  # (carried: not named as dropped)
    no_spacing: tuple[str, ...] = ()
    if choice.kind == "imagej":
        imagej = tuple((key, info[key]) for key in _IMAGEJ_KEPT if isinstance(info.get(key), (int, float)))
        spacing = dict(imagej).get("spacing")
        if isinstance(spacing, (int, float)) and not 0 < spacing < math.inf:
            # no slice's size (0, below 0, NaN, Inf): left out, as info and OME-XML leave it out, not written back
            imagej = tuple((key, value) for key, value in imagej if key != "spacing")
            no_spacing = (f"the ImageJ spacing {spacing:g} (no positive size)",)
    # a plain image's channels (YXS, without axes metadata) are named too, so that 2 or 12 of them
    # are written back as one image's channels (kind None: no metadata is written for them), and
    # so are pages of samples; a planar image's axes as stored (SYX), so it is written back planar
    axes = choice.axes if choice.kind is not None or "S" in choice.axes else None
    if axes is not None and choice.planar:
        axes = axes[:-3] + "SYX"
    # a codec geomcli does not write (WebP, JPEG 2000...) is named too: its output says so (see _compression)
    coded = _enum_name(page.compression)
    compression = _COMPRESSION_NAMES.get(coded, None if coded == "NONE" else coded.lower())
    predictor = _int(page.predictor) if compression is not None and _int(page.predictor) in _PREDICTED else None
    tile = (_int(page.tilelength), _int(page.tilewidth)) if page.is_tiled else None
    if tile is not None and _sides_past(tile, (page.imagelength, page.imagewidth)):
        # a tile past its page's sides rounded up to 16 holds only padding: kept for the output, a
        # crafted tag's (2**30 a side over 8 x 8 pixels) failed tifffile's write, or padded it to gigabytes
        tile = None
    pixels = _ome_pixels(tif, choice) if choice.kind == "ome" and axes else {}  # the XML parsed once
    physical, unusable, channels = _physical_sizes(pixels, choice), _unusable_sizes(pixels, choice), \
        _channel_names(pixels, choice)
    # samples of a grey (or CMYK, Lab) page are no RGB: a crop of 3 grey channels stays grey samples
    colour = False if _enum_name(page.photometric) not in _COLOUR_PHOTOMETRICS else None
    bits = _int(page.bitspersample)
    # samples narrower than their dtype (a palette's indices become RGB)
    narrow = bits if choice.dtype.kind == "u" and 1 < bits < choice.dtype.itemsize * 8 and _palette(choice) is None \
        else None
    return Metadata(icc=icc_bytes, xmp=xmp_bytes, resolution=resolution, unit=unit, axes=axes, bits=narrow,
                    axes_kind=choice.kind if axes else None, imagej=imagej, compression=compression,
                    dropped=(*unusable, *no_spacing, *no_resolution, *_not_carried(tif, info, choice, kept_orientation,
                                                      _carried(physical, unusable, channels)), *said_apart),
                    sizes_left_out=(*unusable, *no_spacing, *no_resolution),
                    tile=tile, physical=physical, colour=colour, predictor=predictor, inks=_cmyk(choice),
                    plain_resolution=choice.kind == "imagej" and not named and unit in ("inch", "centimeter"),
                    channels=channels, zunit=zunit)


def _cmyk(choice: _Choice) -> bool:
    """Whether what is read is CMYK, which a TIFF output writes as CMYK again: photometric
    SEPARATED of 4 unsigned samples and no extra ones, with InkSet 1 (CMYK, the default when absent)."""
    page = choice.keyframe
    inkset = page.tags.get(332)
    return (_enum_name(page.photometric) == "SEPARATED" and _int(page.samplesperpixel) == 4
            and not page.extrasamples and choice.dtype in (np.uint8, np.uint16)
            and (inkset is None or _int(inkset.value) == 1))


def _ome_pixels(tif: Any, choice: _Choice) -> dict[str, Any]:
    """The OME-XML Pixels element of the image read, as tifffile's xml2dict gives it; empty where
    there is none to read."""
    import tifffile

    try:
        images = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]
        image = images[choice.image or 0] if isinstance(images, list) else images
        pixels = image["Pixels"]
    except Exception:  # noqa: BLE001 - XML of any shape: what cannot be read is not carried
        return {}
    return pixels if isinstance(pixels, dict) else {}


def _channel_names(pixels: dict[str, Any], choice: _Choice) -> tuple[str, ...]:
    """The OME-XML channel names of what is read (its ``pixels``: _ome_pixels), a name for each
    channel (the one of a page's plane); none where a channel has none, or the XML lists other
    than the image's channels."""
    listed = pixels.get("Channel")
    listed = [listed] if isinstance(listed, dict) else listed if isinstance(listed, list) else []
    names = tuple(entry.get("Name") if isinstance(entry, dict) else None for entry in listed)
    if not names or not all(isinstance(one, str) for one in names):
        return ()
    if choice.channel is not None:
        return (str(names[choice.channel]),) if choice.channel < len(names) else ()
    count = choice.shape[choice.axes.index("C")] if "C" in choice.axes else 1
    return tuple(str(one) for one in names) if "S" not in choice.axes and count == len(names) else ()


def _physical_sizes(pixels: dict[str, Any], choice: _Choice) -> tuple[tuple[str, float, str | None], ...]:
    """The OME-XML PhysicalSizeX, Y and Z (and their units) of the image read (its ``pixels``:
    _ome_pixels), for the axes it has, and its TimeIncrement, which the Pixels hold whatever SizeT
    is (a ZYX stack's frame interval), but of one page of a stack; none where the XML does not give
    them as positive numbers."""
    sizes = []
    whole = choice.series is not None or choice.image is None  # (not --page's one plane: _unusable_sizes)
    for axis, key in _OME_SIZES.items():
        size, unit = pixels.get(key), pixels.get(f"{key}Unit")
        held = axis in choice.axes or axis == "T" and whole
        if held and isinstance(size, (int, float)) and 0 < size < float("inf"):
            sizes.append((axis, float(size), unit if isinstance(unit, str) else None))
    return tuple(sizes)


# OME-XML's attributes of the size of a step along each axis (a time series' frame interval)
_OME_SIZES = {"X": "PhysicalSizeX", "Y": "PhysicalSizeY", "Z": "PhysicalSizeZ", "T": "TimeIncrement"}


def _unusable_sizes(pixels: dict[str, Any], choice: _Choice) -> tuple[str, ...]:
    """The OME-XML physical sizes of the image's axes that are no positive finite number
    (PhysicalSizeX="nan", "0", "-1"), which _physical_sizes does not read, and those of a page's
    stack along axes a plane has not (its PhysicalSizeZ), named for a warning (``pixels``: _ome_pixels)."""
    unusable = []
    for axis, key in _OME_SIZES.items():
        size = pixels.get(key)
        if axis in choice.axes and size is not None and not (isinstance(size, (int, float)) and 0 < size < math.inf):
            shown = f"{size:g}" if isinstance(size, (int, float)) else repr(str(size)[:40])
            unusable.append(f"the OME-XML {key} {shown} (no positive size)")
        elif choice.series is None and choice.image is not None and axis not in choice.axes \
                and isinstance(size, (int, float)):  # (--page: one plane of a stack, its Z or T size no pixel's)
            unusable.append(f"the OME-XML {key} {size:g} (of the stack the page is one plane of)")
    return tuple(unusable)


# ImageJ entries written anew from the result (sizes, axes) or carried (spacing, unit, ...)
_IMAGEJ_REWRITTEN = {"ImageJ", "images", "channels", "slices", "frames", "hyperstack", "unit", "axes", "shape",
                     "loop", "mode", *_IMAGEJ_KEPT}
# OME-XML content beyond sizes and axes, which geomcli writes anew and so cannot keep
_OME_EXTRAS = (("physical sizes", re.compile(r"PhysicalSize[XYZ]=")),
               ("channel names", re.compile(r"<(?:\w+:)?Channel\b[^>]*\bName=")),
               ("time increment", re.compile(r"<(?:\w+:)?Pixels\b[^>]*\bTimeIncrement=")),
               ("plane positions and times", re.compile(r"<(?:\w+:)?Plane\b[^>]*\b(?:Position[XYZ]|DeltaT)=")),
               ("annotations", re.compile(r"<(?:\w+:)?StructuredAnnotations\b")))


# ExtraSamples' code for associated (premultiplied) alpha
_ASSOCIATED_ALPHA = 1

# Photometrics whose samples read as RGB (tifffile decodes JPEG's YCbCr, read expands a palette)
_COLOUR_PHOTOMETRICS = {"RGB", "YCBCR", "PALETTE"}

# Tags that describe an image rather than encode it, which geomcli's outputs do not keep
_DESCRIPTIVE_TAGS = {269: "DocumentName", 271: "Make", 272: "Model", 285: "PageName", 306: "DateTime",
                     315: "Artist", 316: "HostComputer", 33432: "Copyright", 33723: "IPTC",
                     34665: "EXIF", 34853: "GPS", 42112: "GDAL_METADATA", 42113: "GDAL_NODATA"}
# A GeoTIFF's georeferencing: where its pixels lie on the earth, which no output keeps (a crop
# would move it, a resize scale it, a warp make it false)
_GEOTIFF_TAGS = {33550: "ModelPixelScale", 33922: "ModelTiepoint", 34264: "ModelTransformation",
                 34735: "GeoKeyDirectory", 34736: "GeoDoubleParams", 34737: "GeoAsciiParams"}


def _carried(physical: tuple[tuple[str, float, str | None], ...], unusable: tuple[str, ...],
             channels: tuple[str, ...]) -> frozenset[str]:
    """The OME-XML contents (_OME_EXTRAS' labels) that Metadata carries, or names where it cannot
    (``unusable``, see _unusable_sizes): so _not_carried does not name them again."""
    axes = {entry[0] for entry in physical}
    axes |= {axis for axis, key in _OME_SIZES.items() if any(f"OME-XML {key} " in text for text in unusable)}
    return frozenset({*(["physical sizes"] if axes & set("XYZ") else []), *(["time increment"] if "T" in axes else []),
                      *(["channel names"] if channels else [])})


def _not_carried(tif: Any, imagej: dict[str, Any], choice: _Choice, kept_orientation: bool,
                 carried: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The metadata of this file that no output keeps, named for a warning (``carried``: the
    OME-XML contents carried, or named already, see _carried)."""
    dropped = []
    photometric = _enum_name(choice.keyframe.photometric)
    if photometric == "MINISWHITE" and choice.dtype.kind not in "bu":
        dropped.append(f"the TIFF min-is-white photometric ({choice.dtype} values kept as stored, "
                       "so a viewer shows the output inverted)")
    if photometric not in _COLOUR_PHOTOMETRICS | {"MINISBLACK", "MINISWHITE"} and not _cmyk(choice):
        dropped.append(f"the TIFF photometric {photometric} (written as grey samples to a TIFF)")
    extra = choice.keyframe.extrasamples if isinstance(choice.keyframe.extrasamples, tuple) else ()
    if any(_int(value) == _ASSOCIATED_ALPHA for value in extra):
        # every output's alpha is straight (PNG's, and a TIFF's unassociated): the colours stay premultiplied
        dropped.append("the TIFF associated (premultiplied) alpha (written as straight alpha)")
    orientation = _orientation(choice)
    if kept_orientation and orientation != 1:
        dropped.append(f"the TIFF orientation {orientation} ({ORIENTATIONS[orientation]} to be upright)")
    tags = choice.keyframe.tags
    described = [label for code, label in _DESCRIPTIVE_TAGS.items() if code in tags]
    if described:
        dropped.append(f"the TIFF tags {', '.join(described)}")
    georeferenced = [label for code, label in _GEOTIFF_TAGS.items() if code in tags]
    if georeferenced:
        dropped.append(f"the GeoTIFF georeferencing ({', '.join(georeferenced)})")
    others = sorted(str(key) for key in imagej if key not in _IMAGEJ_REWRITTEN)
    if others:
        dropped.append(f"the ImageJ metadata {', '.join(others)}")
    ome = tif.ome_metadata if tif.is_ome else None
    if isinstance(ome, str):
        found = [label for label, pattern in _OME_EXTRAS if pattern.search(ome) and label not in carried]
        if found:
            dropped.append(f"the OME-XML {', '.join(found)}")
    return tuple(dropped)


# A crafted file's tags can hold anything: these read a number or give 0 (no resolution).


def _rational(value: Any) -> float:
    """A RATIONAL tag's value (numerator, denominator) as a float; 0 if it is not one."""
    if isinstance(value, tuple) and len(value) == 2:
        numerator, denominator = value
        if isinstance(numerator, (int, np.integer)) and isinstance(denominator, (int, np.integer)) and denominator:
            return float(numerator) / float(denominator)
        return 0.0
    return float(value) if isinstance(value, (int, float, np.number)) else 0.0


def _sides_past(tile: tuple[Any, ...], page: tuple[Any, ...]) -> bool:
    """Whether a tile has a side of 0, or past its page's side rounded up to a multiple of 16 (the
    smallest tile a TIFF could cover it with): a crafted tag's, of padding only."""
    return any(not 0 < _int(side) <= -(-_int(length) // 16) * 16 for side, length in zip(tile, page))


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, np.integer)) else 0


@contextmanager
def _tiff(source: str | bytes | BinaryIO, name: str) -> Iterator[tuple[Any, list[str]]]:
    """Open with tifffile (a file object as it is: an object read by ranges); its log lines become
    notes, its exceptions GeomErrors."""
    import tifffile

    notes: list[str] = []
    handler = _Collect(notes)
    log = logging.getLogger("tifffile")
    with _collecting.lock:
        if not _collecting.count:
            _collecting.propagate = log.propagate
        _collecting.count += 1
        log.addHandler(handler)
        # tifffile logs what it repairs or skips; the summary shows it instead of a stray stderr line
        log.propagate = False
    try:
        with _as_geom_errors(name, source), \
                tifffile.TiffFile(io.BytesIO(source) if isinstance(source, bytes) else source) as tif:
            if handler.damage:
                # refused before its pages are walked: a circular IFD chain can keep tifffile's
                # series reader in a loop
                raise GeomError(f"{name}: not a readable TIFF ({handler.damage[0]})")
            yield tif, notes
        if handler.damage:
            # tifffile logs an error and reads on (a cut IFD chain, a bad tag): pages could be
            # missing or zero-filled, so the file is refused
            raise GeomError(f"{name}: not a readable TIFF ({handler.damage[0]})")
    finally:
        with _collecting.lock:
            log.removeHandler(handler)
            _collecting.count -= 1
            if not _collecting.count:  # the last of the threads opening files at once
                log.propagate = _collecting.propagate


class _Collecting:
    """The _Collect handlers on tifffile's logger at once (a batch's header threads each open a
    file), and whether it propagated before the first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.propagate = True


_collecting = _Collecting()


def referenced_end(data: bytes, name: str) -> int | None:
    """Where the last thing a TIFF's IFDs point to ends (its pages' and their SubIFDs' IFDs, tag
    values, strips and tiles); None where it cannot be read, which its read says. A writer may
    leave a few bytes after it (tifffile the tag values of a page it did not write)."""
    try:
        with _tiff(data, name) as (tif, _):
            tif.pages.useframes = False  # frames hold no tags
            # an IFD: its count of tags, 12 bytes a tag, the next IFD's offset (BigTIFF: 8, 20, 8)
            count_and_next, per_tag = (16, 20) if tif.is_bigtiff else (6, 12)
            end, pages = 0, list(tif.pages)
            while pages:
                page = pages.pop()
                end = max(end, page.offset + count_and_next + per_tag * len(page.tags),
                          *(tag.valueoffset + tag.valuebytecount for tag in page.tags.values()),
                          *(int(o) + int(c) for o, c in zip(page.dataoffsets, page.databytecounts)),
                          # tifffile gives such a tag the IFD's offset as its value's
                          *(_pointed_ifd_end(data, tag.valueoffset, tif.byteorder, tif.is_bigtiff)
                            for code, tag in page.tags.items() if code in _POINTED_IFDS))
                pages.extend(page.pages or ())  # its SubIFDs
            return end
    except GeomError:
        return None


# the IFDs a tag points to that tifffile reads into a dict, not a page: Exif, GPS, Interoperability
_POINTED_IFDS = frozenset({34665, 34853, 40965})
# the bytes an item of each TIFF type takes (BYTE, ASCII, SHORT, LONG, RATIONAL, ..., IFD8)
_TYPE_BYTES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4, 16: 8, 17: 8, 18: 8}


def _pointed_ifd_end(data: bytes, at: int, byteorder: str, bigtiff: bool, depth: int = 0) -> int:
    """Where an Exif, GPS or Interoperability IFD at ``at`` ends, with the values its entries point
    to (a camera's maker note, which may hold a TIFF header of its own) and the IFD it points to
    (Exif's Interoperability); 0 where it lies outside ``data``."""
    order: Literal["little", "big"] = "little" if byteorder == "<" else "big"
    counted, inline = (8, 8) if bigtiff else (2, 4)
    entry = struct.Struct(byteorder + ("HHQ8s" if bigtiff else "HHI4s"))
    count = int.from_bytes(data[at : at + counted], order)
    end = at + counted + count * entry.size + inline  # and the next IFD's offset
    if depth > 2 or at <= 0 or end > len(data):
        return 0
    for k in range(count):
        code, kind, items, value = entry.unpack_from(data, at + counted + k * entry.size)
        size = _TYPE_BYTES.get(kind, 1) * items
        if size > inline:
            end = max(end, int.from_bytes(value, order) + size)
        elif code in _POINTED_IFDS:
            pointer = int.from_bytes(value[: _TYPE_BYTES.get(kind, 4)], order)
            end = max(end, _pointed_ifd_end(data, pointer, byteorder, bigtiff, depth + 1))
    return end


@contextmanager
def _as_geom_errors(name: str, source: str | bytes | BinaryIO) -> Iterator[None]:
    """tifffile's and its codecs' exceptions as GeomErrors naming ``name``; geomcli's own keep their traceback."""
    import tifffile

    from geomcli.io import _tiff_padded, _tiff_tags

    try:
        yield
    except GeomError:
        raise
    except _tiff_padded.SegmentError as e:
        raise GeomError(f"{name}: not a readable TIFF ({e})") from e
    except MemoryError as e:
        raise GeomError(f"{name}: not a readable TIFF (declares more data than fits in memory)") from e
    except _DECODE_ERRORS as e:
        if not raised_in(e, "tifffile"):
            # geomcli's own code: a bug keeps its traceback (an OSError goes to the facade)
            raise
        said = one_line(e)
        if not isinstance(e, tifffile.TiffFileError):
            # tifffile's own code tripped on a tag (Python's words: "tuple index out of range")
            said = _tiff_tags.damaged_tag(source) or f"malformed tags: {said}"
        raise GeomError(f"{name}: not a readable TIFF ({said})") from e


# tifffile's objects in its log lines: "<tifffile.TiffPage 0 @8> ", "<tifffile.TiffTag 262 @58> ",
# "<TiffTag.fromfile> " (a page's number kept, the rest dropped)
_TIFFFILE_REPR = re.compile(r"<(?:tifffile\.)?Tiff(?:Page (\d+) @\d+|\w+(?:[ .][^>]*)?)> ")


class _Collect(logging.Handler):
    """tifffile's warnings become notes, its errors signs of damage: of the file this thread
    opens, not another's that a thread beside it opens meanwhile (the logger is one)."""

    def __init__(self, notes: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.notes = notes
        self.damage: list[str] = []
        self.thread = threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        # (the thread emitting it, which logging calls this in: a record's own is None where
        # logging.logThreads is off)
        if threading.get_ident() != self.thread:
            return
        text = " ".join(record.getMessage().split())
        # its objects' reprs say where: "<tifffile.TiffPage 0 @8> incorrect ..." -> "page 0: incorrect ..."
        text = _TIFFFILE_REPR.sub(lambda m: f"page {m[1]}: " if m[1] else "", text)
        text = "tifffile: " + text[:200]
        (self.damage if record.levelno >= logging.ERROR else self.notes).append(text)


def _check_codecs(pages: tuple[Any, ...], name: str) -> None:
    """Every compression and predictor of these pages is one tifffile (with imagecodecs) decodes, or
    a GeomError naming it, before any strip is read."""
    import tifffile

    from geomcli.io import _tiff_padded

    seen: set[tuple[Any, Any]] = set()
    for page in pages:
        if page is None:
            continue
        page = getattr(page, "keyframe", None) or page  # a TiffFrame decodes with its keyframe's codec
        compression, predictor = getattr(page, "compression", 1), getattr(page, "predictor", 1)
        if not (isinstance(compression, (int, np.integer)) and isinstance(predictor, (int, np.integer))):
            # a crafted tag of another type (bytes, several values)
            raise GeomError(f"{name}: not a readable TIFF (malformed compression or predictor tag)")
        if (compression, predictor) in seen:
            continue
        seen.add((compression, predictor))
        if compression in _tiff_padded.PATCHED:
            _tiff_padded.install()  # here, not for every file: resolving the table imports imagecodecs' codecs
        if compression not in tifffile.TIFF.DECOMPRESSORS:
            raise GeomError(_unavailable(name, compression))
        if predictor not in tifffile.TIFF.PREDICTORS:
            raise GeomError(f"{name}: predictor {_enum_name(predictor)} is not available")


def _unavailable(name: str, compression: Any) -> str:
    return f"{name}: compression {_enum_name(compression)} is not available (imagecodecs has no codec for it)"


def _enum_name(value: Any) -> str:
    return getattr(value, "name", str(value))


def _check_extent(tif: Any, pages: tuple[Any, ...], name: str) -> None:
    """A strip or tile past the end of the file: tifffile would fill it with zeros, we refuse."""
    size = tif.filehandle.size
    header = 16 if tif.is_bigtiff else 8  # a BigTIFF's header is 16 bytes
    for page in pages:
        if page is None:
            continue
        offsets, counts = page.dataoffsets, page.databytecounts
        if len(offsets) != len(counts) or not offsets:
            raise GeomError(f"{name}: not a readable TIFF (missing strip offsets or byte counts)")
        key = getattr(page, "keyframe", None) or page
        if key.samplesperpixel > 1 and key.planarconfig not in (1, 2):
            # tifffile shapes such a page planar but counts its strips chunky: the strips fill part
            # of the array, the rest kept what memory held (values that changed from run to run)
            raise GeomError(f"{name}: not a readable TIFF (its PlanarConfiguration is {key.planarconfig}; "
                            "TIFF has 1, chunky, and 2, planar)")
        sides = (key.tilelength, key.tilewidth) if key.is_tiled else (key.rowsperstrip,)
        # (a side of 0 or none, tifffile's chunked refuses: the read names the tag)
        needed = math.prod(key.chunked) if all(isinstance(side, int) and side > 0 for side in sides) else 0
        if len(offsets) < needed:
            # tifffile refuses too few strips, not too few tiles: an ImageLength of 4294967295 over
            # 12 tiles of 16 x 16 asked dask for a grid of 805 million (a minute, gigabytes)
            kind = "Tile" if key.is_tiled else "Strip"
            raise GeomError(f"{name}: not a readable TIFF (its {kind}Offsets hold {len(offsets)}; its "
                            f"{key.imagewidth}x{key.imagelength} page takes {needed})")
        try:
            past_end = any(int(o) + int(c) > size for o, c in zip(offsets, counts))
            # the first bytes are the header: tifffile read them as pixels
            in_header = any(int(o) < header and int(c) > 0 for o, c in zip(offsets, counts))
        except (TypeError, ValueError) as e:
            raise GeomError(f"{name}: not a readable TIFF (malformed strip offsets)") from e
        if past_end:
            raise GeomError(f"{name}: not a readable TIFF (truncated)")
        if in_header:
            raise GeomError(f"{name}: not a readable TIFF (a strip or tile offset points into the file header)")


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


def write(
    data: np.ndarray,
    f: IO[bytes],
    metadata: Metadata | None = None,
    options: WriteOptions | None = None,
    name: str = "<output>",
    layout: str | None = None,
) -> list[str]:
    """Write ``data`` with axes (ImageJ, OME or tifffile's shaped JSON), resolution, ICC profile
    and compression from ``metadata`` fitted to its shape; what could not be kept, as warnings.
    ``layout``: the layout the data is in, where known; the file names it (see :func:`pages`),
    keeping ``metadata``'s axes only where they read back as that layout."""
    import tifffile

    write_args, moves, warnings = write_plan(data.shape, data.dtype, metadata, options, name, layout, data)
    stored = data
    for source, destination in moves:
        stored = np.moveaxis(stored, source, destination)
    if "UUID" in write_args["metadata"]:
        write_args["metadata"]["UUID"] = _ome_uuid(stored)  # (tifffile's own is new each run)
    tifffile.imwrite(f, stored, **write_args)
    return warnings


def write_plan(
    shape: tuple[int, ...],
    dtype: np.dtype,
    metadata: Metadata | None = None,
    options: WriteOptions | None = None,
    name: str = "<output>",
    layout: str | None = None,
    data: np.ndarray | None = None,
) -> tuple[dict[str, Any], list[tuple[int, int]], list[str]]:
    """How :func:`write` writes an array of ``shape`` and ``dtype``: tifffile's arguments (an OME
    file's UUID left to name by its pixels), the axis moves that make the stored array, and the
    warnings, from the metadata, shape, dtype and options alone; so a dry run gives them without
    the pixels. What the values decide (whether they fit a TIFF's 12-bit samples) is judged only
    where ``data`` is given: without it, no warning of it."""
    metadata = metadata or Metadata()
    warnings: list[str] = []
    ndim = len(shape)
    axes = _own_axes(metadata.axes, layout, ndim)
    if axes is not None and len(axes) != ndim:
        if metadata.axes_kind is not None:  # (a plain image's YXS is no metadata of the file's)
            warnings.append(f"the TIFF axes {axes} do not fit the result's shape {shape}; written without axes")
        axes = None
    kind = metadata.axes_kind if axes else None
    if layout is not None and len(layout) == ndim and axes != layout and not names_layout(axes, layout):
        if kind is not None:
            warnings.append(f"the TIFF axes {axes} do not fit the result's layout {layout}; written as {_AXES[layout]}")
        axes, kind = _AXES[layout], None
    if kind == "imagej" and not _imagej_fits(shape, dtype, axes or ""):
        warnings.append(f"ImageJ metadata cannot describe {dtype} data with axes {axes}; "
                        "written as tifffile metadata with the same axes")
        kind = "shaped"
    compression, said = _compression(shape, dtype, metadata, options or WriteOptions(), name)
    warnings.extend(said)
    moves: list[tuple[int, int]] = []
    stored = tuple(shape)
    if axes == "SYX":
        if dtype.kind == "b" or compression == "jpeg":
            axes = "YXS"  # (tifffile's bits, and JPEG's colours, take samples contiguous)
        else:
            moves.append((-1, 0))  # planar, as the input was stored: (H, W, S) -> (S, H, W)
            stored = (stored[-1], *stored[:-1])
    write_args = _pages(stored, dtype, axes, kind, metadata.colour, metadata.inks)
    if kind == "ome" and axes and axes.endswith("YXS") and write_args["photometric"] == "minisblack" \
            and "planarconfig" not in write_args:
        # samples the pages cannot hold as samples (one, or bools) are OME's channels, a plane each:
        # tifffile's OME-XML takes an S axis only as a page's samples (it raised for YXS of one sample)
        moves.append((-1, -3))
        stored, axes = (*stored[:-3], stored[-1], *stored[-3:-1]), f"{axes[:-3]}CYX"
        write_args = _pages(stored, dtype, axes, kind, metadata.colour, metadata.inks)
    if metadata.inks and write_args["photometric"] != "separated":
        warnings.append(f"the TIFF's CMYK photometric cannot describe the result's shape {shape} "
                        f"{dtype}; written as grey samples")
    write_args["bigtiff"] = math.prod(shape) * dtype.itemsize >= BIGTIFF_BYTES
    if kind == "imagej":
        write_args["imagej"] = True
        write_args["metadata"].update(metadata.imagej)
    elif kind == "ome":
        write_args["ome"] = True
        write_args["metadata"]["UUID"] = None  # named by the pixels (write)
        write_args["metadata"].update(_ome_sizes(metadata.physical))
    if metadata.physical and kind != "ome":
        warnings.append("the OME physical sizes cannot be written without OME axes; dropped")
    if metadata.channels:
        refusal = channels_refusal(metadata.channels, stored, axes if kind == "ome" else None)
        if refusal is None:
            write_args["metadata"]["Channel"] = {"Name": list(metadata.channels)}
        else:
            warnings.append(refusal)
    if metadata.bits is not None:
        refusal = _bits_refusal(dtype, metadata.bits, compression, data)
        if refusal is None and data is not None:
            write_args["bitspersample"] = metadata.bits
        elif refusal is not None:
            warnings.append(refusal)
    if metadata.imagej and kind != "imagej":  # (a space-to-depth of RGB planes: no ImageJ hyperstack)
        warnings.append(f"the ImageJ {imagej_entries(metadata.imagej)} cannot be written without ImageJ metadata; "
                        "dropped")
    if compression is not None:
        write_args["compression"] = compression
        if compression in _PREDICTABLE and dtype.kind in _PREDICTED.get(metadata.predictor or 0, "-"):
            write_args["predictor"] = metadata.predictor  # (one the result's dtype cannot take is dropped)
    if metadata.tile is not None and all(side > 0 and side % 16 == 0 for side in metadata.tile):
        write_args["tile"] = metadata.tile  # (TIFF tiles are multiples of 16; a crafted tag's are not kept)
    elif compression == "jpeg":  # (H, W) or (..., H, W, S), as compression_refusal allows
        height, width, samples = (*shape, 1) if ndim == 2 else shape[-3:]
        if height > _JPEG_ROWS:  # tifffile's strips of about 256 KB would be taller than libjpeg takes
            write_args["rowsperstrip"] = min(_JPEG_ROWS, max(16, 2**18 // (width * samples)))
    if metadata.icc is not None:
        write_args["iccprofile"] = metadata.icc
    if metadata.xmp is not None:
        write_args["extratags"] = [(700, 1, len(metadata.xmp), metadata.xmp, True)]  # XMP: BYTE, first page
    unit_written = False
    if metadata.resolution is not None:
        resolution = _resolution(metadata, kind)
        if max(resolution["resolution"]) < _RATIONAL:
            write_args["metadata"].update(resolution.pop("metadata", {}))
            write_args.update(resolution)
            unit_written = True
        else:  # tifffile raised ValueError for it (a warp by --scale 1e-8 of 300 dpi): a traceback
            (x, y), unit = resolution["resolution"], resolution.get("metadata", {}).get("unit", "unit")
            unit = {"INCH": "inch", "CENTIMETER": "cm"}.get(resolution["resolutionunit"], unit)
            warnings.append(f"TIFF cannot hold the resolution ({x:g} x {y:g} pixels per {unit}: a rational tag "
                            f"holds up to {_RATIONAL - 1}); dropped")
    if kind == "imagej":
        write_args["metadata"].update(_spacing_unit(metadata, unit_written))
    if metadata.palette is not None:
        refusal = _palette_refusal(stored, dtype, metadata.palette, kind, compression, write_args)
        if refusal is None:
            write_args["photometric"] = "palette"
            write_args["colormap"] = _colormap(metadata, np.dtype(dtype))
        else:
            warnings.append(refusal)
    return write_args, moves, warnings


def _palette_refusal(stored: tuple[int, ...], dtype: np.dtype, palette: bytes, kind: str | None,
                     compression: str | None, write_args: dict[str, Any]) -> str | None:
    """Why a TIFF of ``stored`` (its shape as stored) and ``dtype``, written with tifffile's
    ``write_args``, cannot be written with ``palette`` (Metadata.palette): a palette page is one
    plane of uint8 or uint16 indices, its map of 2**bits entries, not JPEG-compressed; a stack of
    them (an animation's frames, a TIFF's pages) is pages of the same map, its axes in tifffile's JSON
    or an ImageJ stack's description (ImageJ reads a stack's LUT from its pages' ColorMap)."""
    colours = len(palette) // 3
    dtype = np.dtype(dtype)
    planes = write_args["photometric"] == "minisblack" and "planarconfig" not in write_args  # (no samples)
    if len(stored) < 2 or dtype not in (np.uint8, np.uint16) or kind not in (None, "shaped", "imagej") or not planes:
        shape = "x".join(map(str, stored))
        return f"the palette ({colours} colours) is for one plane of indices, not a {shape} {dtype} result; dropped"
    if compression == "jpeg":
        return f"a JPEG-compressed TIFF cannot hold the palette ({colours} colours); dropped"
    if kind == "imagej" and dtype != np.uint8:  # (tifffile refuses it: an ImageJ LUT has 256 entries)
        return (f"the palette ({colours} colours) cannot be an ImageJ stack's LUT, which is for uint8 indices, "
                f"not {dtype}; dropped")
    if colours > 1 << (8 * dtype.itemsize):
        return f"the palette ({colours} colours) has more entries than {dtype} indices reach; dropped"
    return None


def _colormap(metadata: Metadata, dtype: np.dtype) -> np.ndarray:
    """A TIFF's ColorMap of Metadata's palette: (3, 2**bits) uint16, its 16-bit colours as they
    are, else v * 257 (as libtiff and Pillow read the high byte), the entries past the palette's black."""
    colormap = np.zeros((3, 1 << (8 * dtype.itemsize)), np.uint16)
    if metadata.palette_16bit is not None:
        colours = np.frombuffer(metadata.palette_16bit, "<u2").reshape(-1, 3).T
    else:
        colours = np.frombuffer(metadata.palette or b"", np.uint8).reshape(-1, 3).T.astype(np.uint16) * 257
    colormap[:, :colours.shape[1]] = colours
    return colormap


def pages(shape: tuple[int, ...], dtype: np.dtype, layout: str | None = None,
          colour: bool | None = None, inks: bool = False) -> dict[str, Any]:
    """tifffile's arguments that lay out an array of this shape and dtype, in ``layout``, in pages
    as :func:`write` does without metadata: so a memory-mapped output (tifffile.memmap) reads back
    as the same array, in the same layout, as one written from RAM.

    An HWC image is one page of C samples a pixel (an RGB or RGBA image for 3 or 4 channels of
    numbers), an NHWC tensor N such pages; where the pages cannot say so (1 channel: tifffile
    stores a plain grey page; bool: a page a row, as tifffile's 1-bit samples do not read back; a
    leading N; channels as pages, CHW and NCHW), tifffile's JSON names the axes (YXS, QYXS, CYX,
    QCYX: Q is N). An HW image, or an array of no known layout, is plain pages.

    >>> pages((6, 4, 12), np.dtype(np.uint8), "HWC")
    {'photometric': 'minisblack', 'metadata': {}, 'planarconfig': 'contig'}
    >>> pages((6, 4, 1), np.dtype(np.uint16), "HWC")
    {'photometric': 'minisblack', 'metadata': {'axes': 'YXS'}}
    >>> pages((2, 12, 6, 4), np.dtype(np.float32), "NCHW")
    {'photometric': 'minisblack', 'metadata': {'axes': 'QCYX'}}
    """
    axes = _AXES.get(layout, layout) if layout is not None and len(layout) == len(shape) else None
    return _pages(shape, dtype, axes, None, colour, inks)


def ome_pages(laid_out: dict[str, Any], shape: tuple[int, ...], dtype: np.dtype, layout: str | None,
              metadata: Metadata, name: str) -> dict[str, Any]:
    """:func:`pages`' arguments ``laid_out`` with ``metadata``'s OME axes and physical sizes, where
    they still name ``layout``, as :func:`write` writes them; for a memory map, whose pixels are not
    there yet to name its UUID: it is named by the file's name, shape and dtype, the same each run."""
    import uuid

    axes = _own_axes(metadata.axes, layout, len(shape))
    if not carries_ome(shape, layout, metadata):
        return laid_out
    assert axes is not None
    laid_out = {**_pages(shape, dtype, axes, "ome", metadata.colour, metadata.inks), "ome": True}
    described = laid_out["metadata"]
    described["UUID"] = f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_OID, f'{name} {dtype.str} {shape}')}"
    described.update(_ome_sizes(metadata.physical))
    if metadata.channels and channels_refusal(metadata.channels, shape, axes) is None:
        described["Channel"] = {"Name": list(metadata.channels)}
    return laid_out


def names_ome(path: str) -> bool:
    """Whether an output's name promises an OME-TIFF (``.ome.tif``, ``.ome.tiff``), as tifffile,
    Bio-Formats and Fiji read such a name.

    >>> names_ome("cells.OME.tiff"), names_ome("s3://bucket/a.ome.tif"), names_ome("a.tif")
    (True, True, False)
    """
    return path.lower().endswith((".ome.tif", ".ome.tiff"))


def as_ome(metadata: Metadata, layout: str | None, ndim: int) -> tuple[Metadata, str | None]:
    """``metadata`` as an OME-TIFF's, for an output whose name promises OME-XML (:func:`names_ome`)
    holding an array of ``ndim`` axes in ``layout``; and a warning where it cannot be one. An
    ImageJ hyperstack's axes stay (ImageJ's order is one of OME's) and its calibration becomes
    OME's physical sizes: the resolution's pixel size along X and Y and the slice spacing along Z
    in its unit, the frame interval (s) as the time increment (of a stack with a T axis or not,
    calibrated or not); a resolution of no length unit, and its fps, stay as they were (the writer
    names them where it drops them). A file of no OME or ImageJ axes takes its layout's (YX, YXS,
    CYX; an N is tifffile's Q, OME's modulo axis).

    >>> from geomcli.io import Metadata
    >>> ome, _ = as_ome(Metadata(axes="TZYX", axes_kind="imagej", resolution=(4.0, 4.0), unit="micron",
    ...                          imagej=(("spacing", 2.0), ("finterval", 3.0))), "TZYX", 4)
    >>> ome.axes, ome.axes_kind, ome.physical, ome.resolution, ome.imagej
    ('TZYX', 'ome', (('X', 0.25, 'µm'), ('Y', 0.25, 'µm'), ('Z', 2.0, 'µm'), ('T', 3.0, 's')), None, ())
    >>> as_ome(Metadata(), "CHW", 3)[0].axes, as_ome(Metadata(), None, 3)[1]
    ('CYX', "a .ome.tif name promises OME-XML, but the result's axes are of no known layout; written without OME-XML")
    """
    fitting = metadata.axes if metadata.axes_kind in ("ome", "imagej") and metadata.axes is not None \
        and len(metadata.axes) == ndim and (layout is None or names_layout(metadata.axes, layout)) else None
    if metadata.axes_kind == "ome" and fitting is not None:
        return metadata, None
    # the file's own axes grown by channels (ZYX to ZCYX by space-to-depth), as write takes them; else the layout's
    axes = layout if layout is not None and len(layout) == ndim and layout not in _AXES else \
        fitting or (_AXES.get(layout, layout) if layout is not None else None)
    if axes is None or len(axes) != ndim or not _OME_AXES.fullmatch(axes) or len(set(axes)) != len(axes):
        said = "are of no known layout" if axes is None or len(axes) != ndim else \
            f"{axes} are not OME's (T, Z, C, Y, X)"
        return metadata, f"a .ome.tif name promises OME-XML, but the result's axes {said}; written without OME-XML"
    if metadata.axes_kind != "imagej":  # (an OME file's sizes of the axes it still has stay, as write keeps them)
        return metadata._replace(axes=axes, axes_kind="ome"), None
    # OME's TimeIncrement is the Pixels' own, held whatever SizeT is, and needs no length unit: a
    # ZYX stack's frame interval (or one of no unit) was dropped, with a warning
    lengths = tuple(entry for entry in imagej_physical(metadata) if entry[0] in axes and entry[0] != "T")
    physical = (*lengths, *_frame_interval(metadata))
    carried = {axis for axis, _, _ in physical}
    converted = {"X", "Y"} & carried
    kept = tuple((key, value) for key, value in metadata.imagej
                 if not (key == "spacing" and "Z" in carried or key == "finterval" and "T" in carried))
    return metadata._replace(axes=axes, axes_kind="ome", physical=physical, imagej=kept,
                             resolution=None if converted else metadata.resolution,
                             unit=None if converted else metadata.unit,
                             zunit=None if "Z" in carried else metadata.zunit), None


def imagej_physical(metadata: Metadata) -> tuple[tuple[str, float, str], ...]:
    """An ImageJ hyperstack's calibration as OME's physical sizes (Metadata.physical, in OME's unit
    symbols): its resolution's pixel size along X and Y and its slice spacing along Z in its unit,
    its frame interval along T in seconds; no length where it gives no length unit OME names (its
    interval, in seconds whatever the length unit, still). The spacing is in its own unit where it
    has one (Metadata.zunit).

    >>> from geomcli.io import Metadata
    >>> imagej_physical(Metadata(resolution=(4.0, 2.0), unit="micron", imagej=(("spacing", 3.0), ("finterval", 0.5))))
    (('X', 0.25, 'µm'), ('Y', 0.5, 'µm'), ('Z', 3.0, 'µm'), ('T', 0.5, 's'))
    >>> imagej_physical(Metadata(resolution=(4.0, 2.0), imagej=(("spacing", 3.0), ("finterval", 0.5))))
    (('T', 0.5, 's'),)
    >>> imagej_physical(Metadata(unit="micron", imagej=(("spacing", 3.0),)))  # (X and Y uncalibrated: a zunit's)
    (('Z', 3.0, 'µm'),)
    >>> imagej_physical(Metadata(resolution=(4.0, 4.0), unit="micron", zunit="millimeter", imagej=(("spacing", 0.5),)))
    (('X', 0.25, 'µm'), ('Y', 0.25, 'µm'), ('Z', 0.5, 'mm'))
    """
    sizes = []
    if metadata.resolution is not None and metadata.unit in _OME_SYMBOLS:
        x, y = metadata.resolution
        unit = _OME_SYMBOLS[metadata.unit or ""]
        sizes += [("X", 1 / x, unit), ("Y", 1 / y, unit)]
    spacing, spaced = dict(metadata.imagej).get("spacing"), metadata.zunit or metadata.unit
    if isinstance(spacing, (int, float)) and 0 < spacing < math.inf and spaced in _OME_SYMBOLS:
        sizes.append(("Z", float(spacing), _OME_SYMBOLS[spaced or ""]))
    return (*sizes, *_frame_interval(metadata))


def _frame_interval(metadata: Metadata) -> tuple[tuple[str, float, str], ...]:
    """An ImageJ frame interval as OME's time increment (``T`` in seconds), where it is a positive number.

    >>> from geomcli.io import Metadata
    >>> _frame_interval(Metadata(imagej=(("finterval", 0.5),))), _frame_interval(Metadata(imagej=(("finterval", 0),)))
    ((('T', 0.5, 's'),), ())
    """
    interval = dict(metadata.imagej).get("finterval")
    return (("T", float(interval), "s"),) if isinstance(interval, (int, float)) and 0 < interval < math.inf else ()


# ImageJ's length units, as tifffile reads them and geomcli names them (Metadata.unit), by OME's symbols
_OME_SYMBOLS = {"micron": "\u00b5m", "millimeter": "mm", "centimeter": "cm", "inch": "in", "nm": "nm", "m": "m"}
# axes OME-XML (through tifffile) names: stack axes (T, Z, C, and Q, a modulo axis), then Y, X and samples
_OME_AXES = re.compile(r"[TZCQ]*YXS?")


def carries_ome(shape: tuple[int, ...], layout: str | None, metadata: Metadata) -> bool:
    """Whether a memory-mapped TIFF of this shape and layout is written with ``metadata``'s OME axes,
    physical sizes and channel names (:func:`ome_pages`): OME axes that still name the layout, of
    no planar samples (whose pages a map does not lay out as :func:`write` does; contiguous ones,
    an RGB image's YXS, it does)."""
    axes = _own_axes(metadata.axes, layout, len(shape))
    return (metadata.axes_kind == "ome" and axes is not None and len(axes) == len(shape) and "SYX" not in axes
            and names_layout(axes, layout))


def names_layout(axes: str | None, layout: str | None) -> bool:
    """Whether TIFF ``axes`` still name ``layout``: their own (:func:`_layout_of`), or the stack of
    images an OME-Zarr's t, y, x reads as (NHW), which a TIFF's TYX is, read as its own layout.

    A hyperstack's axes grown by channels (ZYX to ZCYX by space-to-depth) are their layout too, as
    :func:`write` takes them: a memory map refused them, where :func:`_layout_of` reads ZCYX as NCHW.

    >>> names_layout("CYX", "CHW"), names_layout("TYX", "NHW"), names_layout("TYX", "TYX"), names_layout("ZYX", "NHW")
    (True, True, True, False)
    >>> names_layout("ZCYX", "ZCYX"), names_layout("ZCYX", "NCHW")
    (True, True)
    """
    return axes is not None and (axes == layout or _layout_of(axes) == layout or (axes == "TYX" and layout == "NHW"))


def imagej_pages(laid_out: dict[str, Any], shape: tuple[int, ...], dtype: np.dtype, layout: str | None,
                 metadata: Metadata) -> dict[str, Any]:
    """:func:`pages`' arguments ``laid_out`` with ``metadata``'s ImageJ axes and calibration (its
    resolution in its unit, slice spacing, frame interval), where :func:`carries_imagej` says they
    fit, as :func:`write` writes them."""
    if not carries_imagej(shape, dtype, layout, metadata):
        return laid_out
    axes = _own_axes(metadata.axes, layout, len(shape))
    assert axes is not None
    laid_out = {**_pages(shape, dtype, axes, "imagej", metadata.colour, metadata.inks), "imagej": True}
    laid_out["metadata"].update(metadata.imagej)
    laid_out["metadata"].update(_spacing_unit(metadata, resolution_written=metadata.resolution is not None))
    if metadata.resolution is not None:
        resolution = _resolution(metadata, "imagej")
        laid_out["metadata"].update(resolution.pop("metadata", {}))
        laid_out.update(resolution)
    return laid_out


def _spacing_unit(metadata: Metadata, resolution_written: bool) -> dict[str, str]:
    """ImageJ's ``zunit`` for a slice spacing whose unit no resolution written states (a rotation
    dropped the X and Y pixel sizes, or a TIFF rational cannot hold them): ImageJ reads the spacing
    in the resolution's unit, so without it, in pixels (0.5 um of 1 um pixels would read as half a
    pixel); with ``zunit`` and no ``unit`` it reads X and Y uncalibrated, Z in that unit, as
    geomcli reads it back. A spacing of its own unit (Metadata.zunit) is written in it, beside a
    resolution or not.

    >>> from geomcli.io import Metadata
    >>> _spacing_unit(Metadata(unit="micron", imagej=(("spacing", 0.5),)), False)
    {'zunit': 'micron'}
    >>> _spacing_unit(Metadata(unit="micron"), False), _spacing_unit(Metadata(imagej=(("spacing", 0.5),)), False)
    ({}, {})
    >>> _spacing_unit(Metadata(unit="micron", zunit="millimeter", imagej=(("spacing", 0.5),)), True)
    {'zunit': 'mm'}
    """
    unit = metadata.zunit or (None if resolution_written else metadata.unit)
    if unit is None or "spacing" not in dict(metadata.imagej):
        return {}
    return {"zunit": _IMAGEJ_UNITS.get(unit, unit)}


def _own_axes(axes: str | None, layout: str | None, ndim: int) -> str | None:
    """The axes a TIFF of ``ndim`` axes in ``layout`` is written with: a TIFF's own axes (TZCYX),
    or them grown by channels (ZYX to ZCYX by space-to-depth), as the input's kind of metadata
    writes them (ImageJ's sizes from the shape); else ``axes``."""
    return layout if layout is not None and len(layout) == ndim and layout not in _AXES else axes


def carries_imagej(shape: tuple[int, ...], dtype: np.dtype, layout: str | None, metadata: Metadata) -> bool:
    """Whether a memory-mapped TIFF of this shape, dtype and layout is written with ``metadata``'s
    ImageJ axes and calibration (:func:`imagej_pages`): ImageJ axes that still name the layout, of
    no samples (as :func:`carries_ome`), of a hyperstack ImageJ holds, and a calibration
    :func:`write` would write whole (no resolution past a TIFF rational), so that the map warns of
    nothing it would."""
    axes = _own_axes(metadata.axes, layout, len(shape))
    if not (metadata.axes_kind == "imagej" and axes is not None and len(axes) == len(shape) and "S" not in axes
            and names_layout(axes, layout) and _imagej_fits(shape, np.dtype(dtype), axes)):
        return False
    if metadata.resolution is None:
        return True
    x, y = _resolution(metadata, "imagej")["resolution"]
    return bool(max(x, y) < _RATIONAL)


def _ome_sizes(physical: tuple[tuple[str, float, str | None], ...]) -> dict[str, Any]:
    """tifffile's OME metadata of Metadata.physical: PhysicalSizeX, Y, Z and TimeIncrement, with
    their units.

    >>> _ome_sizes((("X", 0.5, None), ("T", 2.5, "ms")))
    {'PhysicalSizeX': 0.5, 'TimeIncrement': 2.5, 'TimeIncrementUnit': 'ms'}
    """
    sizes: dict[str, Any] = {}
    for axis, size, unit in physical:
        key = "TimeIncrement" if axis == "T" else f"PhysicalSize{axis}"
        sizes[key] = size
        if unit is not None:
            sizes[f"{key}Unit"] = unit
    return sizes


def _pages(shape: tuple[int, ...], dtype: np.dtype, axes: str | None, kind: str | None,
           colour: bool | None = None, inks: bool = False) -> dict[str, Any]:
    """tifffile's photometric, planar config, extra samples and axes metadata for an array of
    this shape and dtype with these axes (``kind`` None: none written unless needed); ``colour``
    False: 3 or 4 samples that are no colours, written as grey samples (Metadata.colour), or as
    CMYK where ``inks`` says 4 are (Metadata.inks)."""
    # planar samples (SYX, QSYX, TZSYX: a plane a sample, before Y and X), else contiguous (last)
    planar = bool(axes and axes.endswith("SYX")) and dtype.kind != "b"
    channels = shape[-3] if planar else shape[-1] if len(shape) >= 3 else 1
    # an 8- or 16-bit H x W x 2, 3 or 4 array without axes is taken for an image (grey and alpha,
    # RGB, RGBA), as Pillow's modes are; else only samples (YXS) give samples, however many there
    # are now. tifffile writes bool samples as bits it reads back wrong: those stay a page a row.
    image = axes is None and len(shape) == 3 and channels in (2, 3, 4) and dtype in (np.uint8, np.uint16)
    samples = (image or ((planar or bool(axes and axes.endswith("S"))) and channels > 1)) and dtype.kind != "b"
    # (4 samples of MINISBLACK are 1 grey and 3 unspecified extra samples, as a reader shows them)
    # (CMYK first: depth-to-space gives back 4 inks, whose colour it cannot tell, as CMYK)
    cmyk = samples and channels == 4 and inks and dtype in (np.uint8, np.uint16)
    rgb = samples and channels in (3, 4) and dtype.kind in "iuf" and colour is not False and not cmyk
    if kind is None and axes not in (None, "YX") and not (axes in ("YXS", "SYX") and samples):
        kind = "shaped"  # the pages do not show these axes (one channel, bool, N or C): the JSON names them
    write_args: dict[str, Any] = {
        # photometric is always explicit: tifffile's guess for (N, H, 3) data is deprecated
        "photometric": "rgb" if rgb else "separated" if cmyk else "minisblack",
        "metadata": {"axes": axes} if kind else {},
    }
    if samples and planar:
        write_args["planarconfig"] = "separate"  # as the input was stored
    elif samples and not rgb:
        write_args["planarconfig"] = "contig"  # one page of channels, not a page per row
        if channels == 2 and dtype in (np.uint8, np.uint16):
            write_args["extrasamples"] = ("unassalpha",)  # grey and alpha, as PNG's and Pillow's LA
    return write_args


def channels_refusal(names: tuple[str, ...], shape: tuple[int, ...], axes: str | None) -> str | None:
    """Why OME channel names cannot be written for an array of this shape with these OME axes
    (None: no OME axes), or None where they can: as many channels (one without a C axis), no samples.

    >>> channels_refusal(("dapi", "gfp"), (2, 4, 4), "CYX") is None, channels_refusal(("gfp",), (4, 4), "YX") is None
    (True, True)
    >>> channels_refusal(("dapi", "gfp"), (8, 2, 2), "CYX")
    "the OME-XML channel names (dapi, gfp) do not fit the result's 8 channels; dropped"
    """
    shown = ", ".join(names)
    if axes is None or "S" in axes:
        return f"the OME-XML channel names ({shown}) cannot be written without OME axes; dropped"
    count = shape[axes.index("C")] if "C" in axes else 1
    if count != len(names):
        return f"the OME-XML channel names ({shown}) do not fit the result's {count} channels; dropped"
    return None


def _bits_refusal(dtype: np.dtype, bits: int, compression: str | None, data: np.ndarray | None) -> str | None:
    """Why a result of ``dtype`` cannot be written in samples of ``bits`` (tifffile packs them only
    uncompressed, and only values below 2**bits fit), as a warning; None where it can, or where
    only the values of ``data``, not given, would tell.

    >>> _bits_refusal(np.dtype(np.uint16), 12, None, np.array([[4095]], np.uint16)) is None
    True
    >>> _bits_refusal(np.dtype(np.uint16), 12, None, np.array([[4096]], np.uint16))[:80]
    "the TIFF's 12-bit samples cannot be kept: the result holds values past 4095 (wri"
    """
    width = dtype.itemsize * 8
    white = (1 << bits) - 1
    if dtype.kind != "u" or bits >= width:
        why = f"the result is {dtype}"
    elif compression is not None:
        why = f"tifffile packs them only uncompressed, not {compression}"
    elif data is not None and data.size and int(data.max()) > white:
        why = f"the result holds values past {white}"  # (a cubic's overshoot, a --fill)
    else:
        return None
    return (f"the TIFF's {bits}-bit samples cannot be kept: {why} (written as {width}-bit: {white}, their white, "
            "is no longer the output's); dropped")


def _ome_uuid(data: np.ndarray) -> str:
    """The OME-XML UUID of a file of these pixels: named by them, so that a run gives the same bytes
    as the one before it and -j 1 the same as -j N."""
    import hashlib
    import uuid

    digest = hashlib.blake2b(f"{data.dtype.str} {data.shape}".encode(), digest_size=16)
    if data.flags.c_contiguous:
        digest.update(data.data)
    else:  # a planar image's samples moved first: a plane at a time, not a copy of the whole
        for index in np.ndindex(data.shape[:-2]):
            digest.update(np.ascontiguousarray(data[index]).data)
    return f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_OID, digest.hexdigest())}"


def imagej_entries(imagej: tuple[tuple[str, float | str], ...]) -> str:
    """The ImageJ entries carried (slice spacing, frame interval, fps) as a warning names them.

    >>> imagej_entries((("spacing", 0.5), ("finterval", 3.0)))
    'spacing 0.5, finterval 3'
    """
    return ", ".join(f"{key} {value:g}" if isinstance(value, float) else f"{key} {value}" for key, value in imagej)


def _imagej_fits(shape: tuple[int, ...], dtype: np.dtype, axes: str) -> bool:
    """Whether ImageJ's hyperstack format holds an array of this shape and dtype: its dtypes, its
    axis order, RGB as uint8."""
    order = "TZCYXS"
    positions = [order.find(a) for a in axes]
    if -1 in positions or positions != sorted(positions):
        return False
    if "S" in axes and (dtype != np.uint8 or shape[-1] not in (3, 4)):
        return False
    return dtype in (np.uint8, np.uint16, np.float32)


# a TIFF RATIONAL's 32-bit numerator holds less than this
_RATIONAL = 2**32


def _resolution(metadata: Metadata, kind: str | None) -> dict[str, Any]:
    assert metadata.resolution is not None
    x, y = metadata.resolution
    unit = metadata.unit
    if kind == "imagej":
        # ImageJ keeps the unit in its description and the pixels per unit in the tags
        return {"resolution": (x, y), "resolutionunit": "NONE",
                "metadata": {"unit": _IMAGEJ_UNITS.get(unit or "", unit or "pixel")}}
    if unit in ("micron", "millimeter"):
        per_cm = 10000.0 if unit == "micron" else 10.0
        return {"resolution": (x * per_cm, y * per_cm), "resolutionunit": "CENTIMETER"}
    names = {"inch": "INCH", "centimeter": "CENTIMETER"}
    return {"resolution": (x, y), "resolutionunit": names.get(unit or "", "NONE")}


def compression_refusal(compression: str, dtype: np.dtype | str, shape: tuple[int, ...]) -> str | None:
    """Why a TIFF cannot be written with ``compression`` (a name of COMPRESSIONS but none) and hold
    an array of this dtype and shape, or None: no codec for it, or what _HOLDS says it holds. From
    a header alone, so a plan refuses what :func:`write` would.

    >>> compression_refusal("jpeg", "uint16", (10, 10))
    'TIFF compression jpeg holds uint8 grey or RGB, not uint16 shape (10, 10)'
    >>> compression_refusal("jpeg", "uint8", (2, 70000, 3))
    'TIFF compression jpeg holds rows of up to 65535 pixels, not shape (2, 70000, 3)'
    >>> compression_refusal("zlib", "float64", (2, 3, 4)) is None
    True
    """
    import tifffile

    if tifffile.COMPRESSION[_ENUM_OF[compression]] not in tifffile.TIFF.COMPRESSORS:  # imagecodecs built without it
        return f"TIFF compression {compression} cannot be written (imagecodecs has no codec for it)"
    if compression not in _HOLDS:
        return None
    dtypes, samples, kinds, row = _HOLDS[compression]
    name = np.dtype(dtype).name
    if name not in dtypes or len(shape) < 2 or (len(shape) > 2 and shape[-1] not in samples):
        return f"TIFF compression {compression} holds {' or '.join(dtypes)} {kinds}, not {name} shape {shape}"
    if (shape[-1] if len(shape) == 2 else shape[-2]) > row:
        return f"TIFF compression {compression} holds rows of up to {row} pixels, not shape {shape}"
    return None


def _compression(
    shape: tuple[int, ...], dtype: np.dtype, metadata: Metadata, options: WriteOptions, name: str
) -> tuple[str | None, list[str]]:
    """The compression to write with (--compression, else the input's), and any warnings: one the
    data cannot take is an error naming the file where it was asked (a plan refuses it before),
    else zlib, as for an input's codec geomcli does not write."""
    asked = options.compression
    wanted = asked or metadata.compression
    if wanted in (None, "none"):
        return None, []
    assert wanted is not None
    if wanted not in COMPRESSIONS:  # the input's, of a codec geomcli writes no TIFF with
        return "zlib", [f"the input's TIFF compression {wanted} is not one geomcli writes; wrote zlib "
                        "(--compression chooses)"]
    refusal = compression_refusal(wanted, dtype, shape)
    if refusal is not None:
        if asked:
            raise GeomError(f"{name}: {refusal}")
        return "zlib", [f"the input's {refusal}; wrote zlib"]
    return wanted, ["JPEG compression is lossy: the written values differ from the result"] if wanted == "jpeg" else []
