"""Read and write arrays: images (Pillow), .npy (numpy), .tiff (tifffile), stdin and stdout.

A small facade over one module per backend; Pillow and tifffile are imported only when their
format is read or written. Every failure the user can cause is a one-line ``GeomError`` that
starts with the path (``<stdin>``/``<stdout>`` for ``-``).

>>> import numpy as np, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "a.npy")
>>> write_array(np.arange(6, dtype=np.int16).reshape(2, 3), path)
()
>>> loaded = read_array(path)
>>> loaded.format, loaded.data.shape, loaded.data.dtype, loaded.layout
('npy', (2, 3), dtype('int16'), None)
>>> write_array(np.zeros((2, 2), np.float32), path[:-3] + "png")
Traceback (most recent call last):
...
geomcli.errors.GeomError: ...a.png: PNG cannot hold float32 data; write .npy or .tiff
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Literal

from geomcli import constants
from geomcli.errors import GeomError
from geomcli.io import _remote
from geomcli.io._atomic import (
    STOP_SIGNALS,
    clear_signals,
    deferring,
    note_signal,
    refuse_after_signal,
    signal_taken,
    signals_deferred,
)
from geomcli.io._base import (
    DEFAULT_MAX_PIXELS,
    SNIFF_BYTES,
    Header,
    Loaded,
    Metadata,
    Picture,
    SeriesError,
    WriteOptions,
    check_size,
    display_name,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import DTypeLike

    from geomcli.io._stream import Stream

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "FORMATS",
    "IMAGE_FORMATS",
    "STOP_SIGNALS",
    "Header",
    "Loaded",
    "Metadata",
    "Picture",
    "SeriesError",
    "WriteOptions",
    "check_size",
    "check_writable",
    "clear_signals",
    "crop_picture",
    "display_name",
    "dropped",
    "format_for_path",
    "icc_description",
    "text_keywords",
    "is_stdout",
    "is_stream",
    "maps_output",
    "mislabelled",
    "not_there",
    "note_signal",
    "deferring",
    "signals_deferred",
    "open_output",
    "read_array",
    "read_header",
    "read_metadata",
    "read_picture",
    "refuse_after_signal",
    "refused_option",
    "release",
    "signal_taken",
    "sniff_format",
    "tiff_as_zarr",
    "write_array",
    "writes_into",
    "written_shape",
]

FORMATS: tuple[str, ...] = constants.FORMATS
IMAGE_FORMATS: frozenset[str] = frozenset({"png", "jpeg", "bmp", "gif", "webp"})

_EXTENSIONS = {
    ".png": "png",
    ".apng": "png",  # an animated PNG is a PNG (its frames read with --frames all)
    ".jpg": "jpeg",
    ".jpeg": "jpeg",
    ".jfif": "jpeg",
    ".jpe": "jpeg",
    ".bmp": "bmp",
    ".gif": "gif",
    ".webp": "webp",
    ".npy": "npy",
    ".tif": "tiff",
    ".tiff": "tiff",
}
# the extension an error message suggests for each format
_SUFFIX = {
    "png": ".png",
    "jpeg": ".jpg",
    "bmp": ".bmp",
    "gif": ".gif",
    "webp": ".webp",
    "npy": ".npy",
    "tiff": ".tiff",
}


def format_for_path(path: str, override: str | None = None, *, hint: str = " (or give --format)") -> str:
    """The format named by ``override`` (validated) or else by the path's extension.

    ``-`` (stdout) defaults to ``npy``. An unknown or missing extension is an error, never a guess;
    its message ends with ``hint`` (inputs have no --format to give).

    >>> format_for_path("scan.TIF"), format_for_path("x.bin", "jpg")
    ('tiff', 'jpeg')
    """
    if override is not None:
        fmt = constants.FORMAT_ALIASES.get(override.lower(), override.lower())
        if fmt not in FORMATS:
            raise GeomError(f"unknown format {override!r}; expected one of {', '.join(FORMATS)}")
        return fmt
    if path == "-":
        return "npy"
    ext = os.path.splitext(path)[1].lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    known = ", ".join([*_EXTENSIONS, ".zarr"])  # (a zarr array, a folder, is found before: _zarr.is_zarr)
    found = f"unknown extension {ext!r}" if ext else "no file extension"
    raise GeomError(f"{path}: {found}; expected one of {known}{hint}")


def sniff_format(head: bytes) -> str | None:
    """The format whose magic bytes start ``head`` (16 bytes are plenty), or None.

    >>> sniff_format(b"\\x89PNG\\r\\n\\x1a\\n"), sniff_format(b"\\x93NUMPY\\x01\\x00"), sniff_format(b"hello")
    ('png', 'npy', None)
    """
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    # classic and BigTIFF, little- and big-endian
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return "tiff"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"BM"):
        return "bmp"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    return None


def read_header(
    path: str,
    *,
    format: str | None = None,
    auto_orient: bool = True,
    series: int | None = None,
    page: int | None = None,
    frames: str | None = None,
    palette: bool = False,
) -> Header:
    """What ``path`` declares (shape, dtype, layout, pages, size), without decoding its pixels.

    The shape, dtype and layout are those :func:`read_array` returns with the same options
    (``frames="all"``: an animation's frames stacked on a new first axis; without ``frames`` an
    animation is refused, as read_array refuses it). A palette TIFF whose
    indices run past its colormap (a damaged file) is the one case read_array differs from:
    it keeps the indices. No size limit applies: a decompression bomb is reported as declared.
    ``palette``: a palette image's indices, as read_array's ``palette`` (``Header.palette``).
    """
    from geomcli.io import _zarr

    if _zarr.is_zarr(path):
        return _zarr.read_header(path)
    source, name, fmt, file_size = _input(path, format, DEFAULT_MAX_PIXELS, header_only=True)
    if _in_part(source, file_size):
        try:  # a URL's first bytes or ranges: where its header runs past them or reads ill, the whole object
            header = _header(source, name, fmt, auto_orient, series, page, frames, palette, file_size)
        except (GeomError, OSError) as error:
            if fmt == "png" and isinstance(error, GeomError) and isinstance(source, bytes):
                from geomcli.io import _png

                if _png.opened_within(source):  # its fault is in them: the whole object would say the same
                    _remote.keep_failure(path, str(error))
                    raise
            source, name, fmt, file_size = _whole_after(error, source, path, fmt, format)
        else:
            if not (fmt == "png" and header.palette and frames == "all" and header.pages > 1):
                return header._replace(file_size=file_size)
            # an APNG's indices stacked: every frame's blend op is walked to the end (_pillow._frames_blended)
            source, name, fmt, file_size = _input(path, format, DEFAULT_MAX_PIXELS)
    try:
        return _header(source, name, fmt, auto_orient, series, page, frames, palette)._replace(file_size=file_size)
    except GeomError as error:
        if isinstance(source, bytes):  # a URL's whole object: its run would read it again to fail so
            _remote.keep_failure(path, str(error))
        raise


def _in_part(source: str | bytes | BinaryIO, file_size: int | None) -> bool:
    """Whether ``source`` is a URL's object read in part: its first bytes, or by ranges."""
    if isinstance(source, bytes):
        return file_size is not None and len(source) < file_size
    return not isinstance(source, str)


def _whole_after(error: GeomError | OSError, source: str | bytes | BinaryIO, path: str, fmt: str,
                 format: str | None) -> tuple[str | bytes | BinaryIO, str, str, int | None]:
    """What a URL read in part gives where its header could not be read from that part (``error``):
    the store's failure of a range, raised; an .npy's fault (cut short, as its header and the
    object's size tell; a damaged header; a type geomcli never reads) refused with that line, kept
    for its run: its header lies in the first bytes (a longer one than _npy._MAX_HEADER, 10,000
    bytes, is refused), so the whole object would show the same; else the whole object, as
    _input reads it."""
    _raise_failed_range(source)
    if fmt == "npy" and isinstance(error, GeomError):
        _remote.keep_failure(path, str(error))
        raise error
    return _input(path, format, DEFAULT_MAX_PIXELS)


def _raise_failed_range(source: str | bytes | BinaryIO) -> None:
    """The store's failure of a ranged read of ``source``, raised: no damaged file to read again whole."""
    failure = _remote.ranged_failure(source)
    if failure is not None:
        raise failure


def read_metadata(
    path: str,
    *,
    format: str | None = None,
    auto_orient: bool = True,
    series: int | None = None,
    page: int | None = None,
    frames: str | None = None,
    palette: bool = False,
) -> Metadata:
    """The ``Loaded.metadata`` :func:`read_array` gives of the file or URL at ``path`` with the
    same options, without decoding its pixels: what a TIFF's tags and OME or ImageJ description
    say, what Pillow's Image.open finds (ICC, DPI, EXIF, XMP, a PNG's text, read from its bytes).
    A ``--dry-run`` gives the run's metadata warnings from it. A .npy holds none. Of a URL, the
    bytes :func:`read_header` read (within _remote.shared_reads, not read again): a JPEG's or PNG's
    first bytes, a TIFF's and the ranges its IFDs are in, and a PNG's last HEAD_BYTES (one more
    read) for its chunks after the pixels.
    (Not for a stream, read once: the caller reads its header alone.)"""
    source, name, fmt, file_size = _input(path, format, DEFAULT_MAX_PIXELS, header_only=True)
    if _in_part(source, file_size):
        try:  # a URL's first bytes or ranges: where its header runs past them, the whole object (as read_header)
            chunks = None
            if fmt == "png" and isinstance(source, bytes) and file_size is not None:
                from geomcli.io import _png

                tail = _remote.read_tail(path, max(len(source), file_size - HEAD_BYTES), file_size)
                chunks = _png.stored_chunks_apart(source, tail, file_size)
            return _metadata(source, name, fmt, auto_orient, series, page, frames, palette, chunks)
        except (GeomError, OSError) as error:
            source, name, fmt, file_size = _whole_after(error, source, path, fmt, format)
    return _metadata(source, name, fmt, auto_orient, series, page, frames, palette)


def _metadata(source: str | bytes | BinaryIO, name: str, fmt: str, auto_orient: bool, series: int | None,
              page: int | None, frames: str | None, palette: bool, chunks: bytes | None = None) -> Metadata:
    try:
        if fmt == "npy":
            return Metadata()
        if fmt == "tiff":
            from geomcli.io import _tiff

            return _tiff.read_metadata(source, name, series, page, auto_orient, palette)
        from geomcli.io import _pillow

        assert isinstance(source, (str, bytes))  # (a TIFF alone is read by ranges)
        return _pillow.read_metadata(source, name, fmt, auto_orient, frames, palette, chunks)
    except OSError as e:
        raise _read_error(name, e) from e


# Of a URL, a JPEG's, a PNG's, a BMP's or an NPY's header is read from its first bytes, which hold
# it before the pixels (64 KiB: all but a camera's biggest EXIF; a BMP's headers and palette take
# 1.2 KB at most): a batch from object storage checks every header before anything is written, and
# that read every input whole, each then read again by its run (past 64 MiB of them in all, every
# byte twice). A TIFF's directories may be anywhere: it is read from its first bytes and the ranges
# tifffile seeks to (_remote.RangedObject). A GIF and a WebP are read whole: the plan needs a GIF's
# frame count (an animation is refused without --frames, stacked with --frames all), which Pillow
# counts by walking every frame's data to the end (from the first bytes alone it counts those
# there: 1 of 4); Pillow's WebP reader gives the whole file to libwebp, which refuses a part.
HEAD_BYTES = 64 << 10
_HEADER_FIRST = ("jpeg", "png", "npy", "tiff", "bmp")


def _header(source: str | bytes | BinaryIO, name: str, fmt: str, auto_orient: bool, series: int | None,
            page: int | None, frames: str | None, palette: bool = False, file_size: int | None = None) -> Header:
    """What the backend of ``fmt`` reads of the header of ``source``, where ``file_size`` is the
    file's (``source`` a URL's first bytes alone: an NPY's data is checked against it)."""
    try:
        if fmt == "tiff":
            from geomcli.io import _tiff

            return _tiff.read_header(source, name, series, page, auto_orient, palette)
        assert isinstance(source, (str, bytes))  # (a TIFF alone is read by ranges)
        if fmt == "npy":
            from geomcli.io import _npy

            return _npy.read_header(source, name, file_size)
        from geomcli.io import _pillow

        return _pillow.read_header(source, name, fmt, auto_orient, frames, palette)
    except OSError as e:
        raise _read_error(name, e) from e


def read_array(
    path: str,
    *,
    format: str | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    mmap: bool = True,
    auto_orient: bool = True,
    frames: str | None = None,
    series: int | None = None,
    page: int | None = None,
    palette: bool = False,
) -> Loaded:
    """Read an image, .npy or .tiff (``-``: stdin, format sniffed) into an array.

    The extension (or ``format``) decides the format; content that says otherwise is an error.
    A path without an extension (``/dev/stdin``, ``<(cat x.png)``) is sniffed like ``-``.
    Declared sizes are checked against ``max_pixels`` (elements) before anything is allocated.
    ``mmap``: an uncompressed .npy/.tiff file may come back as a read-only ``np.memmap``.
    ``auto_orient``: images are turned upright by their EXIF orientation (a note says so).
    ``frames``: an animated GIF/WebP/APNG is refused unless ``"all"`` (frames stacked on a
    leading axis) or ``"first"``. ``series``/``page``: one TIFF series or page, instead of every
    page (and every series of one shape) stacked on the leading axis.
    ``palette``: a palette PNG, GIF or BMP (Pillow's mode P) or TIFF is read as its indices
    (H x W uint8; a TIFF's of its dtype and pages, an APNG's frames stacked), its colours and their
    alpha in ``Loaded.metadata`` (``palette``, ``palette_alpha``; a TIFF's 16-bit colours in
    ``palette_16bit``), which write_array writes back where the output holds a palette; else it is
    expanded to RGB or RGBA.
    ``Loaded.metadata`` holds the ICC profile, resolution, EXIF and TIFF axes for write_array;
    ``Loaded.pages`` and ``Loaded.file_size`` what :func:`read_header` says, so a pipe read once
    is described whole.

    Raises GeomError for every bad file, missing path or limit; the message starts with the path.
    """
    loaded = _read(path, format, max_pixels, mmap, auto_orient, frames, series, page, picture=False, palette=palette)
    assert isinstance(loaded, Loaded)
    return loaded


def tiff_as_zarr(path: str, *, series: int | None = None, auto_orient: bool = True,
                 max_pixels: int | None = None, page: int | None = None) -> tuple[Any, str | None, Metadata] | None:
    """The array :func:`read_array` returns of the TIFF at ``path``, as a read-only zarr array read
    tile by tile (tifffile's zarr store), with its layout and metadata; None where read_array's array is more
    than the stored pixels (a palette, an orientation, stacked series, planar samples moved).
    A page of more than ``max_pixels`` elements is read by its strips, not whole. ``page``: that
    page alone, as read_array's ``page``."""
    from geomcli.io import _tiff

    try:
        return _tiff.as_zarr(path, series, auto_orient, max_pixels, page)
    except OSError as error:
        raise _read_error(path, error) from error


def read_picture(
    path: str,
    *,
    format: str | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    mmap: bool = True,
    auto_orient: bool = True,
    frames: str | None = None,
    series: int | None = None,
    page: int | None = None,
    palette: bool = False,
) -> Picture | Loaded:
    """As :func:`read_array`, but a plain 8-bit image (one that read_array gives as uint8 HW or
    HWC: L, LA, RGB or RGBA, after palette expansion and EXIF orientation) comes back as a
    :class:`Picture`, the Pillow image itself, and numpy is not imported. Any other file comes
    back as read_array's ``Loaded``. :func:`write_array` takes either.
    """
    return _read(path, format, max_pixels, mmap, auto_orient, frames, series, page, picture=True, palette=palette)


def crop_picture(picture: Picture, box: tuple[int, int, int, int]) -> Picture:
    """``picture`` cropped to ``box`` (left, top, right, bottom), padded with zeros where the box
    reaches past its edges. Pillow's own size check is off, as when reading: ``--max-pixels``,
    checked by the caller, is the limit."""
    from geomcli.io import _pillow

    return picture._replace(image=_pillow.crop(picture.image, box))


def _read(path: str, format: str | None, max_pixels: int, mmap: bool, auto_orient: bool, frames: str | None,
          series: int | None, page: int | None, *, picture: bool, palette: bool = False) -> Loaded | Picture:
    source, name, fmt, file_size = _input(path, format, max_pixels)
    assert isinstance(source, (str, bytes))  # (read whole: not header_only)
    try:
        loaded: Loaded | Picture
        if fmt == "npy":
            from geomcli.io import _npy

            loaded = _npy.read(source, name, max_pixels, mmap)
        elif fmt == "tiff":
            from geomcli.io import _tiff

            loaded = _tiff.read(source, name, max_pixels, mmap, series, page, auto_orient, palette)
        else:
            from geomcli.io import _pillow

            loaded = _pillow.read(source, name, fmt, max_pixels, auto_orient, frames, picture=picture, palette=palette)
        return loaded._replace(file_size=file_size)
    except OSError as e:
        raise _read_error(name, e) from e
    except MemoryError as e:
        raise GeomError(
            f"{name}: not enough memory to read it (under the --max-pixels limit)"
        ) from e


def write_array(
    data: np.ndarray | Picture,
    path: str,
    /,
    *,
    format: str | None = None,
    metadata: Metadata | None = None,
    options: WriteOptions | None = None,
    layout: str | None = None,
) -> tuple[str, ...]:
    """Write ``data`` to ``path`` atomically (``-``: stdout, npy unless ``format`` says else).

    Dtypes are kept exactly: an array a format cannot hold is refused with the formats that can.
    A file is written to a temp file in its folder and renamed into place; on any failure,
    including KeyboardInterrupt, the temp file is removed and an existing file is untouched.
    Writing binary data to a terminal is refused. BrokenPipeError from stdout is not caught.

    ``metadata`` (from ``read_array``) is written where the format holds it, fitted to ``data``
    (ImageJ/OME sizes, EXIF dimensions); ``options`` sets the encoder (PNG level, JPEG/WebP
    quality, TIFF compression). Returns warnings, one line each: a metadata field the format
    cannot hold (naming it), a lossy encoding, a compression that had to change.
    ``data`` may be a :class:`Picture` (from :func:`read_picture`): an image format that holds
    it is written straight from Pillow, byte for byte as from its array.
    ``layout``: the layout ``data`` is in, where known (``HWC``...); a TIFF records an HWC image's
    channels as such, so it reads back in that layout.
    """
    from geomcli.io import _atomic

    fmt = format_for_path(path, format)
    name = display_name(path, output=True)
    if isinstance(data, Picture) and (fmt not in IMAGE_FORMATS or _image_refusal(fmt, "uint8", data.shape)):
        data = data.to_array()  # the array's way: the same output, or the same refusal
    said = []
    if not isinstance(data, Picture):
        import numpy as np

        if isinstance(data, np.generic):
            data = np.asarray(data)  # a numpy scalar (e.g. from a 0-d reduction) is a 0-d array
        _check_writable(data, fmt, name, layout)
        if _channels_first_image(fmt, layout) and data.ndim == 3:
            data = np.moveaxis(data, 0, -1)
            said.append(f"the C×H×W result is written as the H×W×C image a {fmt.upper()} holds")
    refusal = refused_option(options, fmt)
    if refusal is not None:
        raise GeomError(f"{name}: {refusal}")
    said += unkept(metadata, fmt, options)
    if _atomic.is_stdout(path):  # "-", /dev/stdout, /dev/fd/1: one way for all
        _atomic.refuse_terminal(fmt.upper(), name)
        buffer = io.BytesIO()
        said += _encode(data, buffer, fmt, metadata, options, name, layout)
        _atomic.to_stdout(buffer.getvalue(), name)
        return tuple(said)
    if _remote.is_url(path):  # made in memory (tifffile too), then placed whole
        buffer = io.BytesIO()
        said += _encode(data, buffer, fmt, metadata, options, name, layout)
        _remote.write_bytes(path, buffer.getvalue(), name)
        return tuple(said)
    with _atomic.atomic_file(_remote.local_path(path)) as f:
        said += _encode(data, f, fmt, metadata, options, name, layout)
    return tuple(said)


def refused_option(options: WriteOptions | None, fmt: str, /) -> str | None:
    """Why ``fmt`` cannot be written with ``options``, or None: a TIFF compression asked of
    another format. (A PNG level or a JPEG quality elsewhere changes nothing written: the command
    line warns that it is ignored.) The command line asks this before it reads any input.

    >>> refused_option(WriteOptions(compression="zlib"), "png")
    '--compression is for TIFF output, not PNG'
    """
    if options is not None and options.compression not in (None, "none") and fmt != "tiff":
        return f"--compression is for TIFF output, not {fmt.upper()}"
    return None


# the formats that write a palette (Metadata.palette) with an output of its indices
PALETTE_FORMATS = frozenset({"png", "gif", "bmp", "tiff"})


def unkept(metadata: Metadata | None, fmt: str, options: WriteOptions | None = None) -> list[str]:
    """Warnings for the fields of ``metadata`` that ``fmt`` could hold but cannot take, and for
    lossy output. A format that holds no metadata at all (``.npy``) drops it by its nature: no
    warning there (:func:`dropped` names what was not kept).

    >>> unkept(Metadata(icc=b"...", resolution=(300.0, 300.0), unit="inch"), "webp")
    ['WebP cannot hold the DPI (300 x 300); dropped']
    >>> unkept(Metadata(icc=b"...", resolution=(300.0, 300.0), unit="inch"), "npy")
    []
    """
    said: list[str] = []
    if fmt == "jpeg":
        said.append("JPEG is lossy: the written values differ from the result (write .png or .tiff to keep them)")
    elif fmt == "webp" and options is not None and options.quality is not None:
        said.append("WebP with --quality is lossy: the written values differ from the result")
    if metadata is None or fmt == "npy":
        return said
    label = {"jpeg": "JPEG", "webp": "WebP", "tiff": "TIFF"}.get(fmt, fmt.upper())
    return said + [f"{label} cannot hold the {what}; dropped" if held else f"{what} cannot be carried; dropped"
                   for what, held in _unheld(metadata, fmt)]


def dropped(metadata: Metadata | None, fmt: str, /) -> list[str]:
    """What of ``metadata`` an output of ``fmt`` does not keep, by name: for ``--json``'s
    ``dropped`` where no warning says it (``.npy``).

    >>> dropped(Metadata(icc=b"...", resolution=(300.0, 300.0), unit="inch"), "npy")
    ['ICC profile', 'DPI (300 x 300)']
    """
    return [] if metadata is None else [what for what, _ in _unheld(metadata, fmt)]


def _unheld(metadata: Metadata, fmt: str) -> list[tuple[str, bool]]:
    """Each field of ``metadata`` ``fmt`` does not keep, and whether the format could hold such a
    field (False: nothing carries it, as OME channel names)."""
    unfit: dict[str, str] = {}
    if fmt in IMAGE_FORMATS:
        from geomcli.io import _pillow

        holds = _pillow.HOLDS[fmt]
        metadata = _pillow.as_written(metadata, fmt)
        unfit = _pillow.unfit(metadata, fmt)
    else:
        holds = {"icc", "dpi", "resolution", "xmp"} if fmt == "tiff" else set()
    fields: list[tuple[str, bool]] = []
    if metadata.icc is not None and "icc" not in holds:
        fields.append(("ICC profile", True))
    if metadata.resolution is not None and "resolution" not in holds:
        dpi = metadata.dpi
        if dpi is not None and "dpi" not in holds:
            fields.append((metadata.pixel_size_named() or f"DPI ({dpi[0]:g} x {dpi[1]:g})", True))
        elif dpi is None:
            x, y = metadata.resolution
            per = f" per {metadata.unit}" if metadata.unit else " (no unit)"
            fields.append((f"resolution ({x:g} x {y:g} pixels{per})", True))
    if metadata.exif is not None and "exif" not in holds:
        fields.append(("EXIF data", True))
    if metadata.xmp is not None and "xmp" not in holds:
        fields.append(("XMP packet", True))
    if metadata.text and "text" not in holds:
        fields.append((_text_name(metadata.text), True))
    if metadata.comment is not None and "comment" not in holds:
        fields.append(("comment", True))
    if metadata.palette is not None and fmt not in PALETTE_FORMATS:
        fields.append((f"palette ({len(metadata.palette) // 3} colours)", True))
    elif metadata.palette_alpha is not None and fmt in ("bmp", "tiff"):
        fields.append(("palette's transparency", True))
    elif metadata.palette_alpha is not None and fmt == "gif":
        from geomcli.io._pillow import gif_unheld_alpha

        unheld_alpha = gif_unheld_alpha(metadata.palette_alpha)  # (a GIF holds one transparent entry)
        fields.extend([] if unheld_alpha is None else [(unheld_alpha, True)])
    if metadata.palette is not None and metadata.palette_16bit is not None and fmt in PALETTE_FORMATS - {"tiff"}:
        fields.append(("low bytes of the palette's 16-bit colours", True))  # (its 8-bit colours are their high bytes)
    if metadata.inks and fmt not in ("tiff", *IMAGE_FORMATS):
        # (an image format's RGBA says so in its own warning, see engine.one_file._no_colours)
        fields.append(("TIFF's CMYK photometric (the 4 channels are C, M, Y and K inks)", True))
    if metadata.png_colour and "png_colour" not in holds and metadata.icc is None:
        # (an ICC profile, which travels or is named above, outranks them)
        from geomcli.io._png import colour_name

        colour = colour_name(metadata.png_colour)
        fields.extend([] if colour is None else [(colour, True)])
    fields.extend((name, True) for name in unfit.values())
    fields.extend((name, False) for name in metadata.dropped)
    if metadata.physical and fmt != "tiff":
        fields.append(("OME physical sizes", True))
    if metadata.bits is not None and fmt != "tiff":
        fields.append((f"TIFF's {metadata.bits}-bit samples", True))
    if metadata.channels and fmt != "tiff":
        fields.append((f"OME channel names ({', '.join(metadata.channels)})", True))
    if metadata.imagej and fmt != "tiff":
        from geomcli.io._tiff import imagej_entries

        fields.append((f"ImageJ {imagej_entries(metadata.imagej)}", True))
    if metadata.axes_kind in ("imagej", "ome") and fmt != "tiff" and metadata.axes not in ("YX", "YXS"):
        kind = {"imagej": "ImageJ", "ome": "OME"}[metadata.axes_kind or ""]
        fields.append((f"{kind} axes metadata ({metadata.axes})", True))
    return fields


def _text_name(text: tuple[tuple[bytes, bytes], ...]) -> str:
    """PNG text chunks as a warning names them: by their keywords, the first six."""
    from geomcli.io._png import text_keywords

    keywords = text_keywords(text)
    shown = ", ".join(keywords[:6]) + (f" and {len(keywords) - 6} more" if len(keywords) > 6 else "")
    return f"PNG text chunk{'s' if len(keywords) > 1 else ''} ({shown})"


def is_stdout(path: str, /) -> bool:
    """Whether an output path is standard output: ``-``, or /dev/stdout, /dev/fd/1 and the like."""
    from geomcli.io import _atomic

    return _atomic.is_stdout(path)


def writes_into(output: str, path: str, /) -> bool:
    """Whether an output that is one of this process's descriptors (``-o -`` with ``>> input``)
    is the file ``path`` itself."""
    from geomcli.io import _atomic

    return _atomic.writes_into(output, path)


def is_stdin(path: str, /) -> bool:
    """Whether an input path is standard input: ``-``, or /dev/stdin, /dev/fd/0 and the like."""
    from geomcli.io import _atomic

    return _atomic.is_stdin(path)


def is_stream(path: str, /) -> bool:
    """Whether an output path is, or links to, a device, FIFO, socket or one of this process's
    descriptors: a stream written into, not a file replaced."""
    from geomcli.io import _atomic

    return _atomic.is_special(path)


def maps_output(path: str, shape: Sequence[int], dtype: DTypeLike, /, *, format: str | None = None) -> bool:
    """Whether :func:`open_output` writes this output through a memory map: a file (not ``-``)
    of a format that stores it in one piece (.npy, .tiff), of ``_mapped.MAP_OUTPUT_BYTES`` or more."""
    import numpy as np

    from geomcli.io import _mapped

    if _remote.is_url(path):
        return False  # an object is placed whole, from memory
    return _mapped.maps_output(_remote.local_path(path), shape, np.dtype(dtype), format_for_path(path, format))


def open_output(
    path: str, shape: Sequence[int], dtype: DTypeLike, /, *, format: str | None = None, layout: str | None = None,
    options: WriteOptions | None = None, colour: bool | None = None, inks: bool = False,
    axes_metadata: Metadata | None = None,
) -> AbstractContextManager[np.ndarray]:
    """A context manager yielding a zero-filled, writable array for the output at ``path``.

    Big outputs (see :func:`maps_output`) are a memory map of a temp file in the destination
    folder, renamed into place at normal exit: data larger than memory is never built in RAM.
    Others are an array in RAM, given to :func:`write_array` at exit. Either way the write is
    atomic: on any exception, KeyboardInterrupt and SystemExit included, no temp file remains
    and an existing file is untouched. ``layout`` is as for :func:`write_array`: a mapped TIFF
    is laid out as one written from RAM. ``options`` encode one written from RAM; a memory map is
    uncompressed (see :func:`maps_output`). ``colour``: whether 3 or 4 channels are colours, as
    :attr:`Metadata.colour`; ``inks``: whether 4 are CMYK, as :attr:`Metadata.inks`.
    ``axes_metadata``: a TIFF's OME axes, physical sizes and channel names (an OME-Zarr's scale,
    see ``_zarr.ome_tiff_of``), or ImageJ axes and calibration, written by either way.

    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "big.npy")
    >>> with open_output(path, (2, 3), np.int16) as out:
    ...     out[1] = 7
    >>> np.load(path).tolist()
    [[0, 0, 0], [7, 7, 7]]
    """
    import numpy as np

    from geomcli.io import _mapped

    return _mapped.open_output(_remote.local_path(path), shape, np.dtype(dtype), format_for_path(path, format), layout,
                               options, colour, inks, axes_metadata)


def release(array: np.ndarray, /) -> None:
    """Drop the resident pages of a memory-mapped file that ``array`` spans from this process
    (after a slab is done with), so reading or writing a big file slab by slab keeps memory
    bounded. A no-op for arrays in RAM."""
    from geomcli.io import _mapped

    _mapped.release(array)


def _encode(
    data: np.ndarray | Picture, f: IO[bytes], fmt: str, metadata: Metadata | None, options: WriteOptions | None,
    name: str, layout: str | None,
) -> list[str]:
    if isinstance(data, Picture):  # an image format that holds it: see write_array
        from geomcli.io import _pillow

        return _pillow.save(data.image, f, fmt, metadata, options)
    elif fmt == "npy":
        from geomcli.io import _npy

        _npy.write(data, f)
    elif fmt == "tiff":
        from geomcli.io import _tiff

        return _tiff.write(data, f, metadata, options, name, layout)
    else:
        from geomcli.io import _pillow

        return _pillow.write(data, f, fmt, metadata, options)
    return []


# ---- the dtype and shape policy: which format can hold which array ----------------------------


def _refusal(fmt: str, dtype: np.dtype, shape: tuple[int, ...]) -> str | None:
    """Why ``fmt`` cannot hold an array of this dtype and shape, or None if it can."""
    if fmt == "zarr" and dtype.kind == "T":  # zarr's own variable-length strings (its str arrays)
        from geomcli.io import _zarr

        return _zarr.refusal(dtype)
    if dtype.hasobject:
        return "cannot hold Python objects"
    if fmt == "npy":
        return None
    if fmt == "zarr":
        from geomcli.io import _zarr

        return _zarr.refusal(dtype)
    if fmt == "tiff":
        # tifffile's sample formats: no strings, no bfloat16 (a 'V' type), no long double
        if (
            dtype.kind not in "biufc"
            or dtype.itemsize > 16
            or (dtype.kind == "f" and dtype.itemsize > 8)
        ):
            return f"cannot hold {dtype} data"
        if not shape or 0 in shape:
            return f"cannot hold an empty or 0-d array (shape {shape})"
        if len(shape) == 1:
            return f"holds images of rows and columns, not a 1-D array (shape {shape})"
        return None
    plain = dtype.name if dtype.kind in "biu" and dtype.isnative else str(dtype)
    if dtype.kind in "biu" and dtype.byteorder == ">":
        import numpy as np

        plain = np.dtype(dtype.newbyteorder("=")).name
    return _image_refusal(fmt, plain, shape)


def _image_refusal(fmt: str, dtype: str, shape: tuple[int, ...]) -> str | None:
    """Why the image format ``fmt`` cannot hold an array of this dtype (by its native name) and
    shape, or None if it can."""
    # images: (dtypes this format holds, channel counts it holds)
    kinds = {
        "png": ({"uint8", "uint16", "bool"}, (1, 2, 3, 4)),
        "jpeg": ({"uint8"}, (1, 3)),
        "bmp": ({"uint8", "bool"}, (1, 3)),
        "gif": ({"uint8"}, (1, 3, 4)),  # colour through a palette, alpha as its transparent entry (_pillow.save)
        "webp": ({"uint8"}, (3, 4)),
    }[fmt]
    dtypes, channels = kinds
    if dtype not in dtypes:
        return f"cannot hold {dtype} data"
    if len(shape) not in (2, 3):
        return f"holds HW or HWC images, not shape {shape}"
    if 0 in shape:
        return f"cannot hold an empty image (shape {shape})"
    c = 1 if len(shape) == 2 else shape[2]
    if dtype == "bool" and len(shape) == 3 and shape[2] != 1:  # (H, W, 1) is written as (H, W), as for uint8
        return f"holds 1-bit images as HW only, not shape {shape}"
    if c not in channels:
        counts = {(1, 2, 3, 4): "1 to 4 channels", (1,): "1 channel"}.get(
            channels, ", ".join(map(str, channels[:-1])) + f" or {channels[-1]} channels"
        )
        return f"holds {counts}, not {c} (shape {shape})"
    limit = {"jpeg": 65535, "webp": 16383, "gif": 65535, "bmp": 2**31 - 1, "png": 2**31 - 1}[fmt]
    if max(shape[:2]) > limit:
        return f"holds images up to {limit} pixels a side, not shape {shape}"
    return None


def _check_writable(data: np.ndarray, fmt: str, name: str, layout: str | None) -> None:
    import numpy as np

    if not isinstance(data, np.ndarray):
        raise TypeError(f"write_array expects a numpy array, not {type(data).__name__}")
    check_writable(data.dtype, data.shape, fmt, name, layout)


def _is_stack(fmt: str, layout: str | None, shape: tuple[int, ...]) -> bool:
    """Whether an image format is asked to hold an array of two or three axes whose ``layout``
    has one it has no place for (N of NHW, a TIFF stack's Z or T): only H, W, C (a TIFF's Y, X,
    S) fit. (Four or more axes are refused by their count.)"""
    return (fmt in IMAGE_FORMATS and layout is not None and len(layout) == len(shape) <= 3
            and any(axis not in "HWCYXS" for axis in layout))


def _channels_first_image(fmt: str, layout: str | None) -> bool:
    """Whether an image format writes an array of ``layout`` with its axes moved: a C×H×W
    result as the H×W×C image the format holds (it was read as H×W×C: a silently wrong image,
    or a refusal naming W as the channels)."""
    return fmt in IMAGE_FORMATS and layout == "CHW"


def written_shape(shape: Sequence[int], fmt: str, /, layout: str | None = None) -> tuple[int, ...]:
    """The shape a file of format ``fmt`` holds (as :func:`read_array` gives it back) for an array
    of ``shape`` in ``layout``, where known: an image format writes a C×H×W result as H×W×C, and
    one channel as H×W; every other format the shape as it is.

    >>> written_shape((3, 8, 12), "png", "CHW"), written_shape((8, 12, 1), "jpeg"), written_shape((8, 12, 1), "tiff")
    ((8, 12, 3), (8, 12), (8, 12, 1))
    """
    shape = tuple(shape)
    if fmt not in IMAGE_FORMATS or len(shape) != 3:
        return shape
    if _channels_first_image(fmt, layout):
        shape = (*shape[1:], shape[0])
    return shape[:2] if shape[2] == 1 else shape


def check_writable(dtype: np.dtype | str, shape: tuple[int, ...], fmt: str, name: str,
                   layout: str | None = None, *, compression: str | None = None) -> None:
    """Refuse, as :func:`write_array` would, an array of this dtype and shape (in ``layout``, where
    known) in format ``fmt`` (a GeomError naming ``name`` and the formats that can hold it), or
    with the TIFF ``compression`` asked (WriteOptions.compression); from a header alone, so
    ``--dry-run`` says what the run would say. ``dtype`` may be a :class:`Picture`'s name, which an
    image format judges without numpy."""
    if _channels_first_image(fmt, layout) and len(shape) == 3:
        shape = (*shape[1:], shape[0])
    if _is_stack(fmt, layout, shape):  # its N×H×W would be written as an H×W×C image: N as the rows
        where = "give --format npy or tiff" if name == display_name("-", output=True) else "write .npy or .tiff"
        raise GeomError(f"{name}: {fmt.upper()} holds one HW or HWC image, not a stack ({layout} shape {shape}); "
                        f"{where}")
    if isinstance(dtype, str) and fmt in IMAGE_FORMATS and _image_refusal(fmt, dtype, shape) is None:
        return
    import numpy as np

    dtype = np.dtype(dtype)
    reason = _refusal(fmt, dtype, shape)
    if reason is None and fmt == "tiff" and compression not in (None, "none"):
        from geomcli.io import _tiff

        assert compression is not None
        compressed = _tiff.compression_refusal(compression, dtype, shape)  # as _tiff.write judges it
        if compressed is not None:
            raise GeomError(f"{name}: {compressed}")
    if reason is None:
        return
    if dtype.kind == "T":
        raise GeomError(f"{name}: {dtype} strings have no file form without pickling; give them as .astype(str), "
                       "or write .zarr")
    if dtype.hasobject:
        raise GeomError(f"{name}: {dtype} arrays hold Python objects; geomcli never pickles")
    # stdout has no extension to change: its format is --format's
    to_stdout = name == display_name("-", output=True)
    others = [f if to_stdout else _SUFFIX[f] for f in _PREFERRED if f != fmt and _refusal(f, dtype, shape) is None]
    if len(others) > 1:
        where = ", ".join(others[:-1]) + " or " + others[-1]
    else:
        where = others[0]
    raise GeomError(f"{name}: {fmt.upper()} {reason}; {'give --format' if to_stdout else 'write'} {where}"
                    f"{_without_alpha(fmt, dtype, shape, layout)}")


def _without_alpha(fmt: str, dtype: np.dtype, shape: tuple[int, ...], layout: str | None) -> str:
    """How to get this image format where the last channel of an RGBA or grey-and-alpha image is
    all it cannot hold ('' where that is not so): drop it with a crop of the channel axis. A
    flatten onto a background is another tool's job (its colour is a choice geomcli would make)."""
    if fmt not in IMAGE_FORMATS or len(shape) != 3 or shape[2] not in (2, 4) or _channels_first_image(fmt, layout):
        return ""
    kept = shape[2] - 1
    if _image_refusal(fmt, dtype.name, (*shape[:2], kept)) is not None:
        return ""
    return (f", or drop the alpha channel for a {fmt.upper()}: crop-pad --axes -1 --shape {kept} (in chain, its "
            "last step) keeps the other channels as stored, not flattened")


# the order alternatives are suggested in: lossless images first, then the array formats
_PREFERRED = ("png", "webp", "bmp", "gif", "jpeg", "npy", "tiff")


# ---- inputs ------------------------------------------------------------------------------------


def _input(path: str, format: str | None, max_pixels: int,
           header_only: bool = False) -> tuple[str | bytes | BinaryIO, str, str, int | None]:
    """(what the backend reads: a path or the bytes, the name for messages, the format, the
    file's size: None for stdin and pipes). ``header_only``: of a URL named as a format whose header
    comes first (_HEADER_FIRST), only its first HEAD_BYTES where it is longer; a TIFF's, those
    and the ranges its reader seeks to (a _remote.RangedObject).

    Streams (stdin, a FIFO) are sniffed from their first bytes, then read as far as their header
    declares (.npy, PNG) or else at most as many bytes as ``max_pixels`` elements of the widest
    dtype could take; devices are refused: /dev/zero named x.npy is not read forever.
    """
    name = display_name(path)
    if _remote.is_url(path):  # read whole, then as a stream's bytes
        named = format_for_path(path, format, hint="") if format is not None or os.path.splitext(path)[1] else None
        from geomcli.io._stream import byte_limit

        limit, past_limit = byte_limit(max_pixels), (", more than the --max-pixels limit could need; "
                                                      "raise it with --max-pixels or GEOMCLI_MAX_PIXELS")
        size: int | None
        if header_only and named in _HEADER_FIRST:
            data, size = _remote.read_head(path, HEAD_BYTES, limit, past_limit)
        else:
            data = _remote.read_bytes(path, limit, past_limit)
            size = len(data)
        fmt = _content_format(name, data[:SNIFF_BYTES], named, empty=not data, stdin=False)
        if fmt == "tiff" and size is not None and len(data) < size:
            return _remote.open_ranged(path, data, size, limit, past_limit), name, fmt, size
        return data, name, fmt, size
    path = _remote.local_path(path)
    if path == "-":
        stdin = sys.stdin
        if stdin is None:  # started with stdin closed (as CI runs us)
            raise GeomError(f"{name}: no standard input")
        isatty = getattr(stdin, "isatty", None)
        if isatty is not None and isatty():
            # reading would wait for binary data typed at the keyboard
            raise GeomError(f"{name}: is a terminal; pipe data in (cat photo.png | geomcli ... -)")
        from geomcli.io._stream import Stream

        stream = Stream(stdin.buffer, name, max_pixels)
        head = stream.peek(0, SNIFF_BYTES)
        fmt = _content_format(name, head, None if format is None else format_for_path(path, format),
                              empty=not head, stdin=True)
        return _one_input(stream, name, fmt), name, fmt, None
    # a name without an extension (/dev/stdin, process substitution's /dev/fd/63): the content
    # decides, as for "-"; an extension geomcli does not know stays an error
    named = format_for_path(path, format, hint="") if format is not None or os.path.splitext(path)[1] else None
    try:
        with _opened_input(path, name) as (f, info):
            if stat.S_ISREG(info.st_mode):
                fmt = _content_format(name, f.read(SNIFF_BYTES), named, empty=info.st_size == 0, stdin=False,
                                      by_content=format is None)
                return path, name, fmt, info.st_size
            # a FIFO (process substitution, /dev/stdin): no size, no seeking, no mmap; read
            # to its end, waiting for data once a writer has it open
            os.set_blocking(f.fileno(), True)
            from geomcli.io._stream import Stream

            fifo = stat.S_ISFIFO(info.st_mode)
            stream = Stream(f, name, max_pixels, fifo)
            head = stream.peek(0, SNIFF_BYTES)
            if not head and fifo:
                # "empty file" read as if a regular file were empty; a FIFO's writer may never have come
                raise GeomError(f"{name}: not a regular file (a FIFO) and nothing came through it; "
                                "read it through '-' instead")
            fmt = _content_format(name, head, named, empty=not head, stdin=False)
            return _one_input(stream, name, fmt), name, fmt, None
    except OSError as e:
        raise _read_error(name, e) from e


# how far past what a TIFF's IFDs point to a second input is looked for (see _tiff.referenced_end)
_TIFF_SLACK = 1024
# the sizes of a BMP's info header (BITMAPCOREHEADER to BITMAPV5HEADER, OS/2's 16 and 64)
_BMP_INFO_SIZES = frozenset({12, 16, 40, 52, 56, 64, 108, 124})


def _one_input(stream: Stream, name: str, fmt: str) -> bytes:
    """A stream's input, as far as it goes (Stream.whole); a GeomError where a second input of
    a format geomcli reads starts where the first ends: 'cat a.png b.png | geomcli ... -' read
    a alone and dropped b without a word. Other bytes after an input (a phone's video after its
    JPEG) are left unread, as the libraries leave them in a file."""
    data = stream.whole(fmt)
    starts: Sequence[int] = () if stream.end is None else (stream.end,)
    if fmt == "jpeg":
        from geomcli.io import _jpeg_check

        end = _jpeg_check.end_of_image(data)
        starts = () if end is None else (end,)
    elif fmt == "tiff":
        from geomcli.io import _tiff

        end = _tiff.referenced_end(data, name)
        # a writer's slack after it: a second input starts somewhere in it (not a BMP's 2 bytes)
        starts = () if end is None else range(end, min(len(data), end + _TIFF_SLACK))
    for at in starts:
        head = stream.following if at == stream.end else data[at : at + SNIFF_BYTES]
        found = sniff_format(head)
        # 'BM' alone starts text too ('BMW ...'): a BMP's info header has one of its few sizes
        if found == "bmp" and (fmt == "tiff" or int.from_bytes(head[14:16], "little") not in _BMP_INFO_SIZES):
            continue
        # within a TIFF's slack, past its end, a few stray bytes may hold a signature (a file read
        # by name leaves them unread): an input starts there only where its header follows
        if found is not None and fmt == "tiff" and at > starts[0] and not _header_follows(data, at, found):
            continue
        if found is not None:
            raise GeomError(f"{name}: another input ({found.upper()}) starts at byte {at}, after the {fmt.upper()}; a "
                            "pipe holds one input: give each its own file or pipe")
    return data


def _header_follows(data: bytes, at: int, found: str) -> bool:
    """Whether the signature of ``found`` at ``at`` is followed by the rest of its header: a TIFF's
    first IFD (at least one tag) within ``data``, a PNG's IHDR, a JPEG's marker, a .npy's version,
    a GIF's screen descriptor, a WebP's first chunk."""
    head = data[at : at + SNIFF_BYTES]
    if found == "tiff":
        order: Literal["little", "big"] = "little" if head[:2] == b"II" else "big"
        big = head[2:4] in (b"+\x00", b"\x00+")
        first = int.from_bytes(head[8:16] if big else head[4:8], order)
        counted = 8 if big else 2
        if first < (16 if big else 8) or at + first + counted > len(data):
            return False
        tags = int.from_bytes(data[at + first : at + first + counted], order)
        return 0 < tags and at + first + counted + tags * (20 if big else 12) <= len(data)
    if found == "png":
        return head[8:16] == b"\x00\x00\x00\x0dIHDR"
    if found == "jpeg":
        return len(head) > 3 and 0xC0 <= head[3] <= 0xFE
    if found == "npy":
        return len(head) > 7 and head[6] in (1, 2, 3) and head[7] == 0
    if found == "gif":
        return len(head) >= 13
    return found == "webp" and head[12:15] == b"VP8"


@contextlib.contextmanager
def _opened_input(path: str, name: str) -> Iterator[tuple[IO[bytes], os.stat_result]]:
    """A named input opened for reading, and its stat: a folder or a device refused (/dev/zero or
    a terminal: endless or interactive, never an input). Opened without blocking, since a FIFO
    that has no writer would otherwise wait for one forever; the caller makes it block to read."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with open(descriptor, "rb") as f:
        info = os.fstat(descriptor)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
            raise GeomError(f"{name}: is a device, not a file or a pipe")
        yield f, info


def read_list_bytes(path: str, limit: int, /) -> bytes:
    """A list of names (--files-from) whole: a file, a pipe or ``-`` (stdin), opened as an input
    is (a device refused, a FIFO that no writer opens within 2 s empty), and never more than
    ``limit`` bytes: /dev/zero or `yes |` filled the memory until the OOM killer came."""
    from geomcli.io._stream import Stream

    name = display_name(path)
    try:
        with contextlib.ExitStack() as opened:
            if path == "-":
                stream = Stream(sys.stdin.buffer, name, 0, limit=limit)
            else:
                f, info = opened.enter_context(_opened_input(path, name))
                os.set_blocking(f.fileno(), True)
                stream = Stream(f, name, 0, stat.S_ISFIFO(info.st_mode), limit=limit)
            return stream.peek(0, limit + 1)
    except OSError as e:
        raise _read_error(name, e) from e


def _content_format(name: str, head: bytes, named: str | None, *, empty: bool, stdin: bool,
                    by_content: bool = False) -> str:
    """The format of an input from its first bytes: the one ``named`` (by an extension or
    ``format``), which they must show, or else the one they show. With ``by_content``, a file whose
    extension names another format than its content shows (a JPEG saved as .png: mislabelled
    downloads are common) is read as its content, as Pillow and ImageMagick read it;
    :func:`mislabelled` says so. Pipes keep to their names: their bytes are read once, bounded by
    the format the name promised."""
    if empty:
        raise GeomError(f"{name}: empty input" if stdin else f"{name}: empty file")
    found = sniff_format(head)
    if named is not None:
        if by_content and found is not None and found != named:
            return found
        _agree(name, named, found)
        return named
    if found is None:
        expected = f"expected one of {', '.join(FORMATS)}"
        if stdin:
            raise GeomError(f"{name}: unrecognised content ({expected})")
        raise GeomError(f"{name}: no file extension and unrecognised content ({expected})")
    return found


def icc_description(icc: bytes, /) -> str:
    """An ICC profile's description, or ``present`` when it names none."""
    from geomcli.io import _pillow

    return _pillow.icc_description(icc)


def text_keywords(text: Sequence[tuple[bytes, bytes]], /) -> list[str]:
    """The keywords of a PNG's text chunks (``Metadata.text``), printable.

    >>> text_keywords([(b"tEXt", b"Title\\0a card"), (b"zTXt", b"Notes\\0\\0x")])
    ['Title', 'Notes']
    """
    from geomcli.io import _png

    return _png.text_keywords(text)


def not_there(path: str, /) -> str:
    """The one line a local input that is not there fails with, as its read says it: 'no such
    file', but for 'a.png/' of a file a.png 'not a directory (a parent in the path is a file)',
    a broken link's target, a name there in another Unicode form."""
    try:
        os.stat(path)
    except OSError as error:
        return str(_read_error(path, error))
    return f"{path}: no such file"  # (there now: gone between the plan's look and this one)


def mislabelled(path: str, fmt: str, /) -> str | None:
    """The warning for a file read as ``fmt`` whose extension names another format, or None (the
    caller says which file: the warning follows its name)."""
    try:
        named = format_for_path(path)
    except GeomError:
        return None
    if path == "-" or named == fmt:
        return None
    extension = os.path.splitext(path)[1]
    return f"{fmt.upper()} content named {extension}; read as {fmt.upper()}"


def _agree(name: str, fmt: str, found: str | None) -> None:
    if found is None:
        raise GeomError(f"{name}: not a readable {fmt.upper()} (unrecognised content)")
    if found != fmt:
        raise GeomError(f"{name}: content is {found.upper()}, not {fmt.upper()}")


def _read_error(name: str, e: OSError) -> GeomError:
    reasons = {
        errno.ENOENT: "no such file",
        errno.EISDIR: "is a directory",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.ENOTDIR: "not a directory (a parent in the path is a file)",
        errno.ELOOP: "symbolic links in a loop, which reach no file",
    }
    if e.errno == errno.ENOENT and isinstance(e.filename, str) and os.path.islink(e.filename):
        # ls lists it: 'no such file' left the user looking for a file that is there
        return GeomError(f"{name}: a broken symbolic link to {os.readlink(e.filename)}")
    if e.errno == errno.ENOENT and isinstance(e.filename, str):
        form = _other_normalisation(e.filename)
        if form is not None:  # (a list made on macOS, whose names are NFD): the two look the same
            return GeomError(f"{name}: no such file, but the same name with its accents in Unicode {form} is "
                             "there (the two look alike)")
    return GeomError(f"{name}: {reasons.get(e.errno or 0, f'cannot read ({e.strerror or e})')}")


def _other_normalisation(path: str) -> str | None:
    """The Unicode normalisation form, NFC or NFD, in which ``path`` spells a file that is there,
    where it does not itself; else None."""
    import unicodedata

    for form in ("NFC", "NFD"):
        other = unicodedata.normalize(form, path)
        if other != path and os.path.lexists(other):
            return form
    return None
