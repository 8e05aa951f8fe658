"""PNG, JPEG, BMP, GIF and WebP through Pillow (imported here only); the samples of a 16-bit PNG,
which Pillow reads as 8-bit, through imagecodecs (_png)."""

from __future__ import annotations

import io
import os
import struct
import threading
import warnings
import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import IO, TYPE_CHECKING, Any

from geomcli.errors import GeomError
from geomcli.io import _png
from geomcli.io._base import (
    ORIENTATIONS,
    Header,
    Loaded,
    Metadata,
    Picture,
    WriteOptions,
    check_size,
    image_layout,
    one_line,
    orient,
    raised_in,
)

if TYPE_CHECKING:
    import numpy as np

# Pillow's format names for each format: Image.open tries only these, so content and name agree;
# the first is the one saved
_PILLOW_FORMATS = {
    "png": ("PNG",),
    "jpeg": ("JPEG",),  # its factory hands back an MPO image itself when there is one
    "bmp": ("BMP", "DIB"),
    "gif": ("GIF",),
    "webp": ("WEBP",),
}
# Formats whose extra frames are an animation (a JPEG's MPO frames are previews: ignored)
_ANIMATED = {"png", "gif", "webp"}
# What Pillow raises on broken files, besides UnidentifiedImageError (an OSError); caught only
# when raised in Pillow's code (raised_in): from ours they are bugs
_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, struct.error, zlib.error, IndexError)

# modes numpy receives unchanged: mode -> (dtype, channels)
_KEPT = {
    "1": ("bool", 1),
    "L": ("uint8", 1),
    "LA": ("uint8", 2),
    "RGB": ("uint8", 3),
    "RGBA": ("uint8", 4),
    "I;16": ("uint16", 1),
    "I;16L": ("uint16", 1),
    "I;16B": ("uint16", 1),
    "I": ("int32", 1),
    "F": ("float32", 1),
    "P": ("uint8", 1),  # a palette's indices, where asked for as they are (_target_mode)
}
# the modes read_picture keeps as Pillow images: their arrays are uint8 HW or HWC
_PICTURE_MODES = {"L", "LA", "RGB", "RGBA"}


def read_header(
    source: str | bytes, name: str, fmt: str, auto_orient: bool, frames: str | None = None, palette: bool = False
) -> Header:
    """The shape, dtype and layout :func:`read` returns with the same options, from the header:
    for an animation, ``frames="all"`` is the frames stacked on a new first axis, ``"first"`` one
    frame, and None refuses it as :func:`read` does. (Stacked frames take the first frame's mode;
    :func:`read` makes them RGBA when a later frame adds transparency, which only decoding them
    can tell.) ``palette``: a palette image's indices, as :func:`read` reads them."""
    import numpy as np

    file_size = None if isinstance(source, bytes) else _size(source)
    head = _head_bytes(source, fmt)
    with _opened(source, name, fmt) as im:
        count = _frames(im, name)
        if fmt in _ANIMATED and count > 1 and frames is None:
            raise GeomError(_animated(name, count))
        stacked = fmt in _ANIMATED and count > 1 and frames == "all"
        dtype: np.dtype
        width, height = im.size
        mode = None
        if head is not None and _png.sixteen_bit(head):
            if stacked:
                raise GeomError(_NO_16BIT_FRAMES.format(name=name))
            channels = _png.channels(head)
            shape = (height, width) if channels == 1 else (height, width, channels)
            dtype = np.dtype(np.uint16)
        else:
            mode, _ = _stacked_mode(im, name, fmt, palette) if stacked else _target_mode(im, palette)
            name_of_dtype, channels = _KEPT[mode]
            dtype = np.dtype(name_of_dtype)
            shape = (height, width) if channels == 1 else (height, width, channels)
        if stacked:
            if fmt == "gif":
                _gif_frames_fit(source, name, width, height)
            if fmt == "png" and mode == "P":
                _frames_blended(source, name)
            shape = (count, *shape)
            # (the layout and axes _read_frames gives: grey frames, and indices, are TYX)
            return Header(fmt, shape, dtype, count, file_size, "NHWC" if len(shape) == 4 else "TYX",
                          "TYXS" if len(shape) == 4 else "TYX", palette=mode == "P")
        if auto_orient and _orientation(im, name) in (5, 6, 7, 8):
            shape = (shape[1], shape[0], *shape[2:])
    return Header(fmt, shape, dtype, count, file_size, image_layout(shape), palette=mode == "P")


_NO_16BIT_FRAMES = "{name}: --frames all: 16-bit animated PNGs are not supported"


def _stacked_mode(im: Any, name: str, fmt: str, palette: bool) -> tuple[str, str | None]:
    """The mode an animation's frames are stacked in (see :func:`_target_mode`): a palette
    animation's indices with ``palette``, which Pillow gives of an APNG's frames (one PLTE for all)
    but not of a GIF's: it composes those after the first in colour (their local colour tables may
    differ too), so a GIF's are refused rather than read back from colours."""
    mode, note = _target_mode(im, palette)
    if mode == "P" and fmt == "gif":
        raise GeomError(f"{name}: --frames all with --keep-palette: Pillow composes a GIF's frames after the first "
                        "in colour, not as indices; use --frames first, or read the colours without --keep-palette")
    return mode, note


def read(
    source: str | bytes, name: str, fmt: str, max_pixels: int, auto_orient: bool, frames: str | None = None,
    *, picture: bool = False, palette: bool = False,
) -> Loaded | Picture:
    """``frames``: None refuses an animation, ``first`` takes its first frame, ``all`` stacks
    every frame on a leading axis. ``picture``: an 8-bit image (see _PICTURE_MODES) comes back
    as a Picture, without numpy; any other as a Loaded array. ``palette``: a palette image (mode
    P) comes back as its indices, H x W uint8 (an APNG's frames stacked, T x H x W: a GIF's are
    refused, :func:`_stacked_mode`), its colours in Metadata.palette."""
    src = "-" if isinstance(source, bytes) else source
    if fmt == "png":
        # Pillow's decoder stops at the last IDAT and would accept a file cut after it: its
        # verify() reads every chunk to IEND and checks each CRC first. The bytes read once go to
        # the decoder (imagecodecs', for 16 bits, takes bytes)
        source = source if isinstance(source, bytes) else _read_all(source)
        with _opened(source, name, fmt) as im:
            im.verify()
        # verify() stops at IEND's type: a file cut within the 4 bytes of its CRC gets past it
        if any(source.endswith(b"IEND" + b"\xaeB`\x82"[:kept]) for kept in range(4)):
            raise GeomError(f"{name}: not a readable PNG (truncated)")
    scan_end = None
    if fmt == "jpeg":
        from geomcli.io import _jpeg_check

        scan_end = _jpeg_check.check(source, name)
    decoded: AbstractContextManager[str | bytes | IO[bytes]]
    decoded = nullcontext(source) if scan_end is None else _jpeg_check.ended(source, scan_end)
    with decoded as opened:
        return _decoded(opened, name, fmt, src, max_pixels, auto_orient, frames, picture, scan_end is not None,
                        palette)


def _decoded(
    source: str | bytes | IO[bytes], name: str, fmt: str, src: str, max_pixels: int, auto_orient: bool,
    frames: str | None, picture: bool, ended: bool = False, palette: bool = False,
) -> Loaded | Picture:
    """:func:`read`'s decoding, once the PNG's chunks or the JPEG's scans are checked. ``ended``: a
    JPEG that has its EOI, whose data running out is damage inside the file, not a cut end."""
    notes: list[str] = []
    sixteen_bit = fmt == "png" and isinstance(source, bytes) and _png.sixteen_bit(source)
    with _opened(source, name, fmt, notes) as im:
        pages = _frames(im, name)
        count = pages if fmt in _ANIMATED else 1
        if count > 1:
            if frames is None:
                raise GeomError(_animated(name, count))
            if frames == "all":
                if sixteen_bit:
                    raise GeomError(_NO_16BIT_FRAMES.format(name=name))
                return _read_frames(im, source, name, fmt, src, count, max_pixels, notes, palette)
            notes.append(f"frame 1 of {count} (--frames first)")
        if sixteen_bit:
            assert isinstance(source, bytes)
            return _read_png16(im, source, name, src, max_pixels, auto_orient, notes, pages)
        mode, note = _target_mode(im, palette)
        if mode == im.mode and mode != "P" and "transparency" in im.info:
            # a colour key (PNG tRNS on grey or RGB): the values are kept, the key is not
            notes.append(_colour_key_note(im.info["transparency"]))
        _, channels = _KEPT[mode]
        width, height = im.size
        check_size((height, width, channels), max_pixels, name)
        if fmt == "png":
            _check_png_data(source, name)
        stored = _stored_orientation(im)
        orientation = (stored or 1) if auto_orient else 1
        metadata, icc_note = _still_metadata(im, source, orientation, mode, note)
        notes.extend([icc_note] if icc_note else [])
        try:
            marked = _marked_last_row(im) if fmt == "png" else None
            if fmt == "webp" and count == 1 and width * height >= _WEBP_BY_LIBWEBP:
                im = _still_webp(im, source, name, channels)
            else:
                im.load()
            if fmt == "png" and _maybe_unwritten(im, marked):
                _check_png_data(source, name, stream=True)
            if mode == "P":  # (Pillow's getpalette loads the pixels: after the checks above)
                metadata = _with_palette(metadata, im)
            if orientation in ORIENTATIONS:
                from PIL import ImageOps

                im = ImageOps.exif_transpose(im)
                notes.append(f"{ORIENTATIONS[orientation]} by its EXIF orientation {orientation}")
            if note:
                im = im.convert(mode)
                notes.append(note)
            if picture and mode in _PICTURE_MODES:
                im.info = {}  # what Pillow would write back unasked (ICC, tRNS): Metadata decides
                # leaving Image.open's context below closes the file, not the loaded pixels
                kept: Picture | None = Picture(im, fmt, src, (), metadata, pages, orientation=stored,
                                                   upright=orientation in ORIENTATIONS)
            else:
                kept, data = None, _array(im)
        except _DECODE_ERRORS as e:
            if not raised_in(e, "PIL"):
                raise
            reason = _reason(e)
            if ended and reason == "truncated":
                reason = f"damaged: its image data runs out before the whole {width}x{height} frame is decoded"
            raise GeomError(f"{name}: not a readable {fmt.upper()} ({reason})") from e
    if kept is not None:
        return kept._replace(notes=tuple(notes))  # with the notes Pillow's warnings added on closing
    if data.dtype.byteorder not in ("=", "|"):
        data = data.astype(data.dtype.newbyteorder("="))  # I;16B: same values, native order
    return Loaded(data, fmt, image_layout(data.shape), src, tuple(notes), metadata, pages, orientation=stored,
                  upright=orientation in ORIENTATIONS)


def _still_metadata(im: Any, source: str | bytes | IO[bytes], orientation: int, mode: str,
                    note: str | None) -> tuple[Metadata, str | None]:
    """The metadata :func:`read` gives a still image (or an animation's first frame) that Pillow
    has opened, upright by ``orientation``, and the note where its ICC profile is dropped: one
    converted (``note``) to ``mode`` that the profile does not describe."""
    metadata = _metadata(im, orientation)._replace(jpeg=_jpeg_coding(im), **_carried(im, source))
    metadata = metadata.upright(orientation)
    if note and metadata.icc is not None and not _icc_fits(metadata.icc, mode):
        # a CMYK JPEG's CMYK profile does not describe the RGB Pillow converts it to (without it)
        said = (f"its {metadata.icc[16:20].decode('latin-1').strip()} ICC profile dropped: "
                f"it does not describe the {mode} values")
        return metadata._replace(icc=None), said
    return metadata, None


def read_metadata(source: str | bytes, name: str, fmt: str, auto_orient: bool, frames: str | None = None,
                  palette: bool = False, chunks: bytes | None = None) -> Metadata:
    """The metadata :func:`read` gives with the same options (ICC, DPI, EXIF, XMP, text), from
    what Image.open reads, no pixel decoded: for a ``--dry-run`` to say what the run will warn of
    it. A PNG file's text chunks after the pixels are found by walking its chunks, the image data
    skipped (_png.stored_chunks). ``chunks``: a PNG's as stored_chunks gives them, where ``source``
    is its first bytes alone (a URL's), whose palette is then read as stored, not decoded."""
    stored = _png.stored_chunks(source) if fmt == "png" and isinstance(source, str) else chunks or source
    decoded = chunks is None
    with _opened(source, name, fmt) as im:
        count = _frames(im, name) if fmt in _ANIMATED else 1
        if count > 1 and frames == "all":
            # (as _read_frames: TYXS of colour frames; a later frame's transparency makes grey ones RGBA)
            mode = _stacked_mode(im, name, fmt, palette)[0]
            metadata = _metadata(im, 1)._replace(axes="TYXS" if _KEPT[mode][1] > 1 else "TYX", axes_kind="shaped",
                                                 **_carried(im, stored))
            if mode != "P":
                return metadata
            try:  # (getpalette decodes the pixels: a broken file fails here)
                return _with_palette(metadata, im, decoded)
            except _DECODE_ERRORS as e:
                if not raised_in(e, "PIL"):
                    raise
                raise GeomError(f"{name}: not a readable {fmt.upper()} ({_reason(e)})") from e
        orientation = (_stored_orientation(im) or 1) if auto_orient else 1
        if fmt == "png" and isinstance(stored, bytes) and _png.sixteen_bit(stored):
            return _metadata(im, orientation)._replace(**_carried(im, stored)).upright(orientation)  # as _read_png16
        mode, note = _target_mode(im, palette)
        metadata = _still_metadata(im, stored, orientation, mode, note)[0]
        if mode != "P":
            return metadata
        try:  # (getpalette decodes the pixels, to a palette of Pillow's own: a broken file fails here)
            return _with_palette(metadata, im, decoded)
        except _DECODE_ERRORS as e:
            if not raised_in(e, "PIL"):
                raise
            raise GeomError(f"{name}: not a readable {fmt.upper()} ({_reason(e)})") from e


# An 8-bit grey or RGB image of at least this many bytes is copied into its array by _array; below
# it np.asarray is as quick (its copies stay in the cache) and Image.save's set-up is not
_COPIED_ONCE = 1 << 25


def _array(im: Any) -> np.ndarray:
    """A loaded Pillow image's pixels as a numpy array. np.asarray(im) goes through im.tobytes(),
    which holds every row twice beside Pillow's own copy (a list of encoded blocks, then their join):
    an 80 MP RGB photo peaked at 794 MB where Pillow holds 322 MB. A big grey or RGB image is
    saved as a binary PGM/PPM (a short header, then the rows as the array holds them) into an
    array made for it: one copy, 565 MB, and a quarter of the time."""
    import numpy as np

    width, height = im.size
    channels = {"L": 1, "RGB": 3}.get(im.mode)
    if channels is None or width * height * channels < _COPIED_ONCE:
        return np.asarray(im)
    data = np.empty((height, width, channels) if channels > 1 else (height, width), np.uint8)
    into = _Into(data, len(header := b"P%d\n%d %d\n255\n" % (5 if channels == 1 else 6, width, height)))
    try:
        im.save(into, format="PPM")
    except _NotTheRows:
        pass
    if into.header != header or into.written != data.nbytes:  # a Pillow that writes PPMs otherwise
        return np.asarray(im)
    return data


class _NotTheRows(Exception):
    """More bytes than the rows hold: a PPM not as _array expects it."""


class _Into:
    """What Image.save writes a PGM/PPM into: its first ``header_size`` bytes kept in ``header``,
    the rest copied into ``data``."""

    def __init__(self, data: np.ndarray, header_size: int) -> None:
        self._rows = data.data.cast("B")
        self._header_size = header_size
        self.header = b""
        self.written = 0

    def write(self, chunk: bytes) -> int:
        room = self._header_size - len(self.header)
        self.header += chunk[:room]
        rows = memoryview(chunk)[max(room, 0):]
        if self.written + len(rows) > len(self._rows):
            raise _NotTheRows
        self._rows[self.written:self.written + len(rows)] = rows
        self.written += len(rows)
        return len(chunk)


# A still WebP of this many pixels or more is decoded by libwebp's own decoder (_still_webp); below
# it Pillow's way takes little memory, and imagecodecs' import (numpy's) more time than it saves
_WEBP_BY_LIBWEBP = 1 << 24


def _still_webp(im: Any, source: str | bytes | IO[bytes], name: str, channels: int) -> Any:
    """A still WebP's pixels decoded by libwebp's own decoder (imagecodecs) into an array of the
    size checked, as a Pillow image with ``im``'s info (its EXIF: the orientation). Pillow decodes
    every WebP through libwebp's animation decoder, which holds two RGBA canvases beside the RGBA
    bytes it hands on and Pillow's image: a 38-byte lossless WebP declaring 16383x16383 RGB (805 M
    elements, within the default --max-pixels) took 4.2 GB to read."""
    import imagecodecs
    import numpy as np
    from PIL import Image

    width, height = im.size
    data = np.empty((height, width, channels), np.uint8)
    encoded = source if isinstance(source, bytes) else _read_all(source) if isinstance(source, str) else source.read()
    try:
        imagecodecs.webp_decode(encoded, hasalpha=channels == 4, out=data)
    except imagecodecs.WebpError as e:  # its words name libwebp's function only
        raise GeomError(f"{name}: not a readable WEBP (libwebp could not decode its image data)") from e
    image = Image.fromarray(data)
    image.info = dict(im.info)
    return image


def _check_png_data(source: object, name: str, every_frame: bool = False, *, stream: bool = False) -> None:
    """Refuse a PNG whose image data cannot hold its frame (an APNG's frames, ``every_frame``: see
    _png.short_data), before decoding; ``stream``: one whose data ends before its last row too
    (_png.short_stream, which inflates it)."""
    if not isinstance(source, bytes):
        return
    short = _png.short_data(source, every_frame)
    if short is None and stream:
        short = _png.short_stream(source, every_frame)
    if short is not None:
        raise GeomError(f"{name}: not a readable PNG ({short})")


def _marked_last_row(im: Any) -> tuple[Any, int, bytes] | None:
    """Before a PNG is decoded: the image memory Pillow's decoder writes into, made as Pillow
    makes it (zeros) but for the row it writes last, which holds a mark (bytes 1, 2, 3, ...);
    that memory, the row and the mark, or None where no row is written so: an interlaced image of
    one row, a frame decoded into a part of the image (an APNG's), an image already decoded.

    Pillow's decoder stops without a word where the zlib stream ends before the last row (see
    _png.short_stream), leaving the rows after it as they were. It writes that row whole, from the
    stream's last scanline (Adam7's last odd row, in its seventh pass): a row that no longer holds
    the mark was decoded, and the stream checked in the same pass. It was the row being all zeros
    that sent a file to the check, which inflated its data again: a third of the read of a picture
    of a black bottom edge (a 4000x3000 RGB photo: 351 ms where one of a grey edge took 232)."""
    from PIL import Image

    width, height = im.size
    interlaced = bool(im.info.get("interlace"))
    if (interlaced and height == 1) or [tuple(tile[1]) for tile in im.tile] != [(0, 0, width, height)]:
        return None
    size = len(Image.new(im.mode, (width, 1)).tobytes())
    mark = Image.frombytes(im.mode, (width, 1), (bytes(range(1, 256)) * (size // 255 + 1))[:size])
    row = height - 1 - (height % 2 if interlaced else 0)
    memory = Image.new(im.mode, im.size, None)  # (zeros, as Pillow's own)
    memory.paste(mark, (0, row))
    im.im = memory.im  # ImageFile.load decodes into the image memory it finds of its mode and size
    return memory.im, row, mark.tobytes()


def _maybe_unwritten(im: Any, marked: tuple[Any, int, bytes] | None) -> bool:
    """Whether a decoded PNG's decoder may have stopped before the row it writes last: that row
    still holds its mark (see _marked_last_row), or none could be set."""
    if marked is None or im.im is not marked[0]:
        return True
    _, row, mark = marked
    return bool(im.crop((0, row, im.size[0], row + 1)).tobytes() == mark)


def _colour_key_note(key: object) -> str:
    return f"its transparent colour {key} is not kept (no alpha channel is made)"


def _animated(name: str, frames: int) -> str:
    return (
        f"{name}: has {frames} frames; geomcli reads one image unless told "
        "(--frames all stacks them on a leading axis, --frames first takes the first)"
    )


def _partial_alpha(transparency: object) -> bool:
    """Whether a palette's alpha (a PNG's tRNS, as Pillow's info gives it) has an entry neither
    clear nor opaque."""
    return isinstance(transparency, bytes) and any(0 < alpha < 255 for alpha in transparency)


def _blended_indices(name: str, number: int) -> GeomError:
    # Pillow pastes such a frame's indices over the last by their alpha, as numbers: a third class
    return GeomError(f"{name}: frame {number} is drawn over the frame before through the palette's partial alpha, "
                     "which blends indices into others (--keep-palette); read the colours without --keep-palette")


def _frames_blended(source: str | bytes | IO[bytes], name: str) -> None:
    """Refuse, from its chunks' headers before any frame is decoded (a dry run's header read too),
    an APNG of indices a frame of which after the first is drawn over the one before (fcTL blend
    op OVER) through a partial alpha of its tRNS: the refusal :func:`_read_frames` makes as it
    comes to that frame."""
    if isinstance(source, bytes):
        transparency, blends = _png.frame_blends(lambda at, size: source[at:at + size])
    elif isinstance(source, str):
        with open(source, "rb") as f:

            def peek(at: int, size: int) -> bytes:
                f.seek(at)
                return f.read(size)

            transparency, blends = _png.frame_blends(peek)
    else:
        return
    if not _partial_alpha(transparency):
        return
    over = [number for number, blend in enumerate(blends, 1) if number > 1 and blend == 1]
    if over:
        raise _blended_indices(name, over[0])


def _read_frames(
    im: Any, source: str | bytes | IO[bytes], name: str, fmt: str, src: str, count: int, max_pixels: int,
    notes: list[str], palette: bool = False,
) -> Loaded:
    """Every frame of an animation, as the viewer sees each one, on a leading axis (N, H, W[, C]).

    Pillow composes each GIF/APNG/WebP frame onto the ones before it; all frames are converted
    to the first frame's mode (RGBA when any frame has transparency), so they stack. ``palette``:
    an APNG's frames as their indices (:func:`_stacked_mode`), its palette in the metadata.
    """
    import numpy as np
    from PIL import ImageSequence, PngImagePlugin

    width, height = im.size
    mode, _ = _stacked_mode(im, name, fmt, palette)
    _, channels = _KEPT[mode]
    if fmt == "gif":
        _gif_frames_fit(source, name, width, height)
    check_size((count, height, width, channels), max_pixels, name)
    if fmt == "png":
        _check_png_data(source, name, every_frame=True, stream=True)
        if mode == "P":
            _frames_blended(source, name)
    try:
        # frame by frame into one array: a list of the frames then stacked held them twice (a
        # 6000x6000 two-frame WebP peaked at 5.5 times its array, with the decoder's canvases)
        data = np.empty((count, height, width, channels) if channels > 1 else (count, height, width), _KEPT[mode][0])
        for index, frame in enumerate(ImageSequence.Iterator(im)):
            if mode == "P" and frame.mode != "P":  # (converted to P, its colours would be quantised)
                raise GeomError(f"{name}: frame {index + 1} is not of the first frame's palette, which one stack of "
                                "indices cannot keep (--keep-palette); read the colours without --keep-palette")
            if mode == "P" and index and frame.info.get("blend") == PngImagePlugin.Blend.OP_OVER \
                    and _partial_alpha(frame.info.get("transparency")):
                raise _blended_indices(name, index + 1)  # (_frames_blended foresees it from the chunks)
            if mode != "P" and _KEPT.get(_target_mode(frame)[0], (None, 0))[1] == 4 and mode != "RGBA":
                mode = "RGBA"  # a later frame's transparency must not be lost: the frames before grow an alpha
                data = _as_rgba(data, index)
            _copy_into(data[index], frame if frame.mode == mode else frame.convert(mode))
        metadata = _metadata(im, 1)._replace(axes="TYXS" if data.ndim == 4 else "TYX", axes_kind="shaped",
                                             **_carried(im, source))
        metadata = _with_palette(metadata, im) if mode == "P" else metadata  # (an APNG's one PLTE and tRNS)
    except _DECODE_ERRORS as e:
        if not raised_in(e, "PIL"):
            raise  # geomcli's own code: a bug keeps its traceback (an OSError goes to the facade)
        raise GeomError(f"{name}: not a readable {fmt.upper()} ({_reason(e)})") from e
    notes.append(f"{count} frames stacked on axis 0 as {'palette indices' if mode == 'P' else mode} (--frames all)")
    # the axes a TIFF of these frames records: T for time, S for colour samples; grey frames (and
    # indices) are that layout too, so --shape H,W and --sizes H,W work frame by frame
    layout = "NHWC" if data.ndim == 4 else metadata.axes
    # the frames are not turned upright by an EXIF orientation: upright stays False
    return Loaded(data, fmt, layout, src, tuple(notes), metadata, count, orientation=_stored_orientation(im))


# the most bytes of a frame's rows _copy_into takes from Pillow at a time
_BAND_BYTES = 1 << 22


def _copy_into(out: np.ndarray, im: Any) -> None:
    """A loaded Pillow image's pixels copied into ``out``, its array's place, a band of rows at a
    time: np.asarray(im) goes through im.tobytes(), which holds the whole frame twice (its encoded
    blocks, then their join) beside Pillow's image and the array (a 6000x6000 two-frame APNG, a
    206 MiB array, peaked at 689 MiB, 593 MiB so)."""
    import numpy as np

    width, height = im.size
    rows = max(1, _BAND_BYTES // (4 * width))  # (Pillow holds RGB in 4 bytes a pixel)
    for top in range(0, height, rows):
        out[top:top + rows] = np.asarray(im.crop((0, top, width, min(top + rows, height))))


def _as_rgba(data: np.ndarray, filled: int) -> np.ndarray:
    """Frames read in a mode of no alpha, the first ``filled`` of them converted to RGBA as Pillow converts them."""
    import numpy as np
    from PIL import Image

    grown = np.empty((*data.shape[:3], 4), np.uint8)
    for index in range(filled):
        grown[index] = np.asarray(Image.fromarray(data[index]).convert("RGBA"))
    return grown


def _gif_frames_fit(source: str | bytes | IO[bytes], name: str, width: int, height: int) -> None:
    """Refuse a GIF a later frame of which reaches past the first frame's canvas, before any frame
    is decoded: Pillow grows its canvas to such a frame's declared extent, unchecked (a 5 KB GIF
    declaring a 65535x34423 frame took 21 GB and 10 s), and the frames would not stack."""
    from geomcli.io import _stream

    if isinstance(source, bytes):
        ends = _stream.gif_frame_ends(lambda at, size: source[at:at + size])
    elif isinstance(source, str):
        with open(source, "rb") as f:

            def peek(at: int, size: int) -> bytes:
                f.seek(at)
                return f.read(size)

            ends = _stream.gif_frame_ends(peek)
    else:
        return
    for index, (right, bottom) in enumerate(ends):
        if right > width or bottom > height:
            raise GeomError(
                f"{name}: --frames all: frame {index + 1} reaches to {right}x{bottom}, past the "
                f"{width}x{height} canvas of the first frame (--frames first reads that one)"
            )


def _jpeg_coding(im: Any) -> tuple[int, tuple[tuple[int, ...], ...], bool] | None:
    """A JPEG's chroma subsampling (-1 where Pillow names none), quantisation tables and whether it
    is progressive, as Pillow reads them; None for others."""
    if im.format != "JPEG":
        return None
    from PIL import JpegImagePlugin

    sampling = JpegImagePlugin.get_sampling(im)
    tables = getattr(im, "quantization", None)
    if not tables:
        return None
    # -1: one component (grey), or a subsampling Pillow does not write (4:1:1, 4:4:0): the tables
    # are kept all the same, the subsampling left to Pillow (grey has none; else 4:2:0)
    progressive = bool(im.info.get("progressive") or im.info.get("progression"))
    return sampling, tuple(tuple(tables[index]) for index in sorted(tables)), progressive


# Photoshop's image resource holding the IPTC-IIM record
_IPTC_RESOURCE = 0x0404

_SUBSAMPLING = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}


def _metadata(im: Any, orientation: int) -> Metadata:
    """The ICC profile, DPI and EXIF Pillow found; EXIF says orientation 1 once applied."""
    info = im.info
    icc = info.get("icc_profile") or None
    resolution, no_resolution = _dpi(im)
    exif = info.get("exif") or None
    if isinstance(exif, bytes) and orientation in ORIENTATIONS:
        exif = _upright_exif(exif)
    return Metadata(
        icc=icc if isinstance(icc, bytes) else None,
        resolution=resolution,
        unit="inch" if resolution else None,
        exif=exif if isinstance(exif, bytes) else None,
        dropped=no_resolution,
        sizes_left_out=no_resolution,
    )


def _dpi(im: Any) -> tuple[tuple[float, float] | None, tuple[str, ...]]:
    """The DPI the image states, or None; and where it states one that is no length (a PNG's
    pHYs or a BMP's header of 0 pixels per metre, an EXIF XResolution of 0) its name, left out
    as a TIFF resolution of 0 is: dropped on an output, noted by info."""
    dpi = _jpeg_dpi(im.info) if im.format in ("JPEG", "MPO") else im.info.get("dpi")
    if not (isinstance(dpi, tuple) and len(dpi) == 2 and all(_number(d) for d in dpi)):
        return None, ()
    x, y = float(dpi[0]), float(dpi[1])
    if all(0 < d < 1e9 for d in (x, y)):
        return (x, y), ()
    return None, (f"the {im.format} resolution {x:g} x {y:g} dpi (no positive size)",)


def _jpeg_dpi(info: dict[str, Any]) -> tuple[float, float] | None:
    """The DPI a JPEG states: its JFIF density in dots per inch or centimetre, else its EXIF
    XResolution and YResolution in ResolutionUnit's inches (EXIF's default) or centimetres; None
    where it states none. Not Pillow's ``dpi``: for a JPEG with EXIF that states none, Pillow
    invents 72 x 72 (JpegImagePlugin's _read_dpi_from_exif), and it takes XResolution for y too."""
    unit, density = info.get("jfif_unit"), info.get("jfif_density")
    if unit in (1, 2) and isinstance(density, tuple) and len(density) == 2 and all(d > 0 for d in density):
        return (density[0] * 2.54, density[1] * 2.54) if unit == 2 else density
    exif = info.get("exif")
    tags = _exif_tags(exif) if isinstance(exif, bytes) and exif else None
    if tags is None or 0x011A not in tags:
        return None
    x = tags[0x011A]
    y = tags.get(0x011B, x)
    per_inch = {2: 1.0, 3: 2.54}.get(tags.get(0x0128, 2))  # 1 is "no absolute unit": no DPI
    if per_inch is None or not (_number(x) and _number(y)):
        return None
    return (float(x) * per_inch, float(y) * per_inch)


def _carried(im: Any, source: str | bytes | IO[bytes]) -> dict[str, Any]:
    """The Metadata fields carried as they are: XMP, a PNG's text chunks, a JPEG's or GIF's
    comment. A PNG's come from its bytes (``source``), as stored, those after the pixels too;
    a JPEG's other comments than the first are named among the dropped."""
    carried: dict[str, Any] = {}
    if im.format == "PNG" and isinstance(source, bytes):
        from PIL import PngImagePlugin

        carried["text"], carried["xmp"] = _png.text_chunks(source, PngImagePlugin.MAX_TEXT_CHUNK)
        carried["png_colour"] = _png.colour_chunks(source)
    elif im.format in ("JPEG", "MPO", "WEBP"):
        xmp = im.info.get("xmp")
        carried["xmp"] = bytes(xmp) if isinstance(xmp, (bytes, bytearray)) and xmp else None
        comments = [body for marker, body in getattr(im, "applist", ()) if marker == "COM"]
        if comments:
            carried["comment"] = comments[0]
        dropped = [f"the JPEG's {len(comments) - 1} comment(s) after the first"] if len(comments) > 1 else []
        # a photo agency's caption, keywords and copyright (IPTC-IIM, in Photoshop's APP13), which
        # Pillow cannot write; the block's other resources (thumbnail, resolution) go stale anyway
        resources = im.info.get("photoshop")
        if isinstance(resources, dict) and resources.get(_IPTC_RESOURCE):
            dropped.append("the JPEG's IPTC record (caption, keywords, copyright: Photoshop's APP13)")
        others = getattr(im, "n_frames", 1) - 1 if im.format == "MPO" else 0
        if others > 0:
            # a phone's gain map or depth map, a stereo camera's other eye: geomcli reads the first
            dropped.append(f"the JPEG's {others} other image(s) after the first (MPO: a preview, gain or depth "
                           "map, or the other eye)")
        if dropped:  # (after _metadata's: a DPI of 0 it names)
            carried["dropped"] = (*_dpi(im)[1], *dropped)
    elif im.format == "GIF" and isinstance(im.info.get("comment"), bytes) and im.info["comment"]:
        carried["comment"] = im.info["comment"]
    return carried


def _number(value: Any) -> bool:
    import numbers

    return isinstance(value, numbers.Real)


def _upright_exif(exif: bytes) -> bytes | None:
    """The EXIF block with orientation 1; None if Pillow cannot parse it (then it is dropped)."""
    tags = _exif_tags(exif)
    if tags is None:
        return None
    tags[0x0112] = 1
    try:
        return bytes(tags.tobytes())
    except (*_DECODE_ERRORS, TypeError):  # a crafted tag Pillow read but cannot write back
        return None


def _exif_tags(exif: bytes) -> Any:
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tags = Image.Exif()
            tags.load(exif)
    except (*_DECODE_ERRORS, TypeError):
        return None
    return tags


def fitted_exif(exif: bytes, width: int, height: int, dpi: tuple[float, float] | None = None) -> bytes | None:
    """The EXIF block with its pixel dimensions (if it has them) set to the written image's, and
    its XResolution and YResolution (if it states them in inches or centimetres) to ``dpi``, the
    DPI written beside it (removed where none is): a resize or space-to-depth left the input's
    there, a second DPI that contradicted the JFIF density or pHYs chunk."""
    tags = _exif_tags(exif)
    if tags is None:
        return None
    try:
        sub = tags.get_ifd(0x8769)  # the Exif IFD: PixelXDimension, PixelYDimension
        if 0xA002 in sub or 0xA003 in sub:
            sub[0xA002], sub[0xA003] = width, height
        per_inch = {2: 1.0, 3: 2.54}.get(tags.get(0x0128, 2))  # 1 is "no absolute unit": left as it is
        if (0x011A in tags or 0x011B in tags) and per_inch is not None:
            if dpi is None:
                for tag in (0x011A, 0x011B, 0x0128):
                    tags.pop(tag, None)
            else:
                tags[0x011A], tags[0x011B] = dpi[0] / per_inch, dpi[1] / per_inch
        return bytes(tags.tobytes())
    except (*_DECODE_ERRORS, TypeError):  # a crafted tag Pillow read but cannot write back
        return None


def _read_png16(im: Any, data: bytes, name: str, src: str, max_pixels: int, auto_orient: bool, notes: list[str],
                pages: int) -> Loaded:
    """A 16-bit PNG that Pillow has opened (and would decode as 8 bits), its samples decoded by
    imagecodecs."""
    width, height = im.size
    channels = _png.channels(data)
    check_size((height, width, channels), max_pixels, name)
    _check_png_data(data, name)  # (libpng refuses a stream that ends before the last row itself)
    if "transparency" in im.info:
        notes.append(_colour_key_note(im.info["transparency"]))
    try:
        array = _png.decode(data)
    except RuntimeError as e:  # imagecodecs' PngError
        raise GeomError(f"{name}: not a readable PNG ({_reason(e)})") from e
    except UnicodeDecodeError as e:  # libpng's message, unset on some refusals, reached imagecodecs as junk bytes
        raise GeomError(f"{name}: not a readable PNG (libpng refused it; its message was not text)") from e
    stored = _stored_orientation(im)
    orientation = (stored or 1) if auto_orient else 1
    if orientation in ORIENTATIONS:
        array = orient(array, orientation)
        notes.append(f"{ORIENTATIONS[orientation]} by its EXIF orientation {orientation}")
    metadata = _metadata(im, orientation)._replace(**_carried(im, data)).upright(orientation)
    return Loaded(array, "png", image_layout(array.shape), src, tuple(notes), metadata, pages, orientation=stored,
                  upright=orientation in ORIENTATIONS)


@contextmanager
def _opened(
    source: str | bytes | IO[bytes], name: str, fmt: str, notes: list[str] | None = None
) -> Iterator[Any]:
    """Image.open with Pillow's own bomb check off (geomcli's check_size is the limit), every
    decoder failure turned into a GeomError naming the file, and Pillow's warnings about damaged
    metadata ("Corrupt EXIF data", "Invalid APNG") kept as notes rather than printed."""
    from PIL import Image

    try:
        with _unbounded(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            fp = io.BytesIO(source) if isinstance(source, bytes) else source
            with Image.open(fp, formats=_PILLOW_FORMATS[fmt]) as im:
                yield im
        for warning in caught:
            if "/PIL/" not in warning.filename.replace("\\", "/"):
                # not Pillow's: numpy's or ours, let it go on as it came
                warnings.warn_explicit(
                    warning.message, warning.category, warning.filename, warning.lineno
                )
            elif notes is not None:
                text = f"Pillow: {one_line(warning.message)}"  # type: ignore[arg-type]
                if text not in notes:
                    notes.append(text)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise GeomError(
            f"{name}: {one_line(e)}; raise the limit with --max-pixels or GEOMCLI_MAX_PIXELS"
        ) from e
    except GeomError:
        raise
    except _DECODE_ERRORS as e:
        if not raised_in(e, "PIL"):
            raise  # geomcli's own code: a bug keeps its traceback (an OSError goes to the facade)
        reason = _reason(e)
        cut = _riff_cut(source) if fmt == "webp" and reason != "truncated" else None
        if cut is not None:
            reason = f"truncated: its RIFF header declares {cut[0]} bytes, the file holds {cut[1]}"
        raise GeomError(f"{name}: not a readable {fmt.upper()} ({reason})") from e


def _riff_cut(source: str | bytes | IO[bytes]) -> tuple[int, int] | None:
    """A WebP's size as its RIFF header declares it and the bytes the file holds, where it holds
    fewer: a file cut short, of which libwebp says only that it 'could not create decoder object'."""
    if not isinstance(source, (str, bytes)):
        return None
    head = _first_bytes(source, 8)
    size = len(source) if isinstance(source, bytes) else _size(source)
    if len(head) < 8 or not head.startswith(b"RIFF"):
        return None
    declared = struct.unpack_from("<I", head, 4)[0] + 8
    return (declared, size) if declared > size else None


@contextmanager
def _unbounded() -> Iterator[None]:
    """Pillow's own decompression-bomb check off while geomcli opens, decodes or crops: geomcli's
    check_size (--max-pixels, on the declared size, before decoding) is the limit. Pillow's limit
    is Image.MAX_IMAGE_PIXELS, one number for the process, as Pillow documents it; geomcli's is
    per call. So it is lifted here and put back, leaving the value a host program set (Pillow's
    default, 89 Mpx, would refuse what --max-pixels allows). Threads inside at once share one
    change, undone by the last out."""
    from PIL import Image

    with _bomb_check.lock:
        if not _bomb_check.users:
            _bomb_check.limit = Image.MAX_IMAGE_PIXELS
            Image.MAX_IMAGE_PIXELS = None
        _bomb_check.users += 1
    try:
        yield
    finally:
        with _bomb_check.lock:
            _bomb_check.users -= 1
            if not _bomb_check.users:
                Image.MAX_IMAGE_PIXELS = _bomb_check.limit


class _BombCheck:
    """Pillow's limit while _unbounded has it off, and how many threads are inside."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.limit: int | None = None


_bomb_check = _BombCheck()


def crop(im: Any, box: tuple[int, int, int, int]) -> Any:
    """``im.crop(box)``, the box reaching past the edges where it pads (Pillow fills zeros), of
    any size check_size allowed: Pillow's bomb check, which crop applies too, is off."""
    with _unbounded():
        return im.crop(box)


def _reason(e: BaseException) -> str:
    text = one_line(e)
    # Pillow: "image file is truncated", "truncated PNG file", "Truncated File Read"; libpng: "Not
    # enough image data"
    if any(cut in text.lower() for cut in ("truncated", "not enough image data")) or isinstance(e, EOFError):
        return "truncated"
    if text.startswith("cannot identify image file"):
        # Image.open is given the one format the content's signature named: its own reader gave up
        # on what follows the signature (a file cut inside its header read "unrecognised content")
        return "its header is broken or cut short"
    return text


def _frames(im: Any, name: str) -> int:
    return int(getattr(im, "n_frames", 1))


def _orientation(im: Any, name: str) -> int:
    """The EXIF orientation read at open (not im.getexif(): for a PNG that decodes the pixels)."""
    return exif_orientation(im.info.get("exif"))


def _stored_orientation(im: Any) -> int | None:
    """The EXIF orientation the file stores (1 when its EXIF has none or cannot be read), None
    where it has no EXIF."""
    exif = im.info.get("exif")
    return exif_orientation(exif) if exif else None


def exif_orientation(exif: bytes | None) -> int:
    if not exif:
        return 1
    from PIL import Image

    try:
        with warnings.catch_warnings():
            # "Corrupt EXIF data": then there is no orientation to apply, which is all we need
            warnings.simplefilter("ignore")
            tags = Image.Exif()
            tags.load(exif)
            value = int(tags.get(0x0112, 1))
    except (*_DECODE_ERRORS, TypeError):  # a crafted tag of another type: the pixels still count
        return 1
    return value if value in ORIENTATIONS else 1


def _icc_fits(icc: bytes, mode: str) -> bool:
    """Whether an ICC profile's data colour space (header bytes 16-19) is that of ``mode``'s
    values: RGB for RGB(A), GRAY for grey; a profile too short to say is let be."""
    space = icc[16:20]
    if len(space) < 4:
        return True
    return space == (b"RGB " if mode in ("RGB", "RGBA") else b"GRAY")


def _target_mode(im: Any, palette: bool = False) -> tuple[str, str | None]:
    """The mode the array is read in, and a note when that is a conversion; a palette image's
    indices as they are with ``palette`` (--keep-palette)."""
    mode = im.mode
    if mode in _KEPT and (mode != "P" or palette):
        return mode, None
    if mode in ("P", "PA"):
        target = "RGBA" if mode == "PA" or "transparency" in im.info else "RGB"
        return target, f"palette expanded to {target}"
    target = "RGBA" if "A" in mode or "a" in mode else "RGB"
    return target, f"{mode} converted to {target}"


def _with_palette(metadata: Metadata, im: Any, decoded: bool = True) -> Metadata:
    """``metadata`` with a palette image's colours and the alpha of its entries (Metadata.palette,
    palette_alpha). Pillow gives a PNG's tRNS as bytes, or as the index of its one transparent
    entry (a GIF's too). Not ``decoded``: a PNG's PLTE as stored, which getpalette gives it once
    decoded."""
    colours = bytes(im.getpalette("RGB") or b"") if decoded else bytes(im.palette.palette)
    key = im.info.get("transparency")
    alpha = bytes(key) if isinstance(key, (bytes, bytearray)) else (
        b"\xff" * key + b"\0" if isinstance(key, int) and 0 <= key < 256 else None)
    return metadata._replace(palette=colours, palette_alpha=alpha)


def _head_bytes(source: str | bytes, fmt: str) -> bytes | None:
    return _first_bytes(source, 33) if fmt == "png" else None


def _first_bytes(source: str | bytes, count: int) -> bytes:
    if isinstance(source, bytes):
        return source[:count]
    with open(source, "rb") as f:
        return f.read(count)


def _read_all(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _size(path: str) -> int:
    return os.stat(path).st_size


# What each image format holds of Metadata (the facade warns about the rest); a PNG holds a
# comment as a tEXt chunk (see _png.metadata_chunks)
HOLDS = {
    "png": {"icc", "dpi", "exif", "xmp", "text", "comment", "png_colour"},
    "jpeg": {"icc", "dpi", "exif", "xmp", "comment"},
    "webp": {"icc", "exif", "xmp"},
    "bmp": {"dpi"},
    "gif": {"comment"},
}
# The most a JPEG segment holds (65535 less its length field): a COM segment's comment, and an
# APP1 XMP packet after its 29-byte namespace (Pillow refuses more rather than split it)
JPEG_SEGMENT = 65533
JPEG_XMP = JPEG_SEGMENT - len(b"http://ns.adobe.com/xap/1.0/\0")
# the most dots per inch (or cm) a JFIF density's 16 bits hold
_JFIF_DENSITY = 65535
# the most pixels per metre a PNG's pHYs (a PNG four-byte integer) and a BMP's signed header field hold
_PIXELS_PER_METRE = 2**31 - 1


def as_written(metadata: Metadata, fmt: str) -> Metadata:
    """``metadata`` as this format takes it: for a JPEG or GIF, a PNG's tEXt ``Comment`` (any
    case) is its comment, as ImageMagick carries one both ways (see _png.metadata_chunks)."""
    if "text" in HOLDS[fmt] or "comment" not in HOLDS[fmt] or metadata.comment is not None:
        return metadata
    for index, (kind, body) in enumerate(metadata.text):
        keyword, _, value = body.partition(b"\0")
        if kind == b"tEXt" and keyword.lower() == b"comment":
            return metadata._replace(comment=value, text=metadata.text[:index] + metadata.text[index + 1 :])
    return metadata


def unfit(metadata: Metadata, fmt: str) -> dict[str, str]:
    """The fields of ``metadata`` this format holds that are too big or of the wrong kind of bytes
    for it to take, each with its name in a warning: they are not written (see _kept)."""
    said = {}
    if fmt == "jpeg" and metadata.xmp is not None and len(metadata.xmp) > JPEG_XMP:
        said["xmp"] = f"XMP packet of {len(metadata.xmp)} bytes (one segment takes {JPEG_XMP})"
    if fmt == "jpeg" and metadata.comment is not None and len(metadata.comment) > JPEG_SEGMENT:
        said["comment"] = f"comment of {len(metadata.comment)} bytes (one segment takes {JPEG_SEGMENT})"
    dpi = metadata.dpi
    # a microscope's calibration by the pixel size it gave (0.25 micron), its DPI beside it
    named = metadata.pixel_size_named()
    as_dpi = "" if dpi is None else f"DPI ({dpi[0]:g} x {dpi[1]:g}" if named is None else \
        f"{named[:-1]}, {dpi[0]:g} x {dpi[1]:g} dpi"
    if fmt == "jpeg" and dpi is not None and max(round(dpi[0]), round(dpi[1])) > _JFIF_DENSITY:
        # libjpeg's 16-bit JFIF density wrapped past it (127000 dpi was written as 61464)
        said["dpi"] = f"{as_dpi}: a JFIF density holds up to {_JFIF_DENSITY})"
    if fmt in ("png", "bmp") and dpi is not None and max(dpi) / 0.0254 > _PIXELS_PER_METRE - 0.5:
        # Pillow's (and our 16-bit PNG encoder's) packing raised past it: a traceback, no output
        field = "a pHYs chunk" if fmt == "png" else "a BMP header"
        said["dpi"] = (f"{as_dpi}: {field} holds up to {_PIXELS_PER_METRE} pixels per metre, "
                       f"{_PIXELS_PER_METRE * 0.0254:.0f} dpi)")
    if fmt == "jpeg" and metadata.exif is not None:
        # a PNG's eXIf or a WebP's EXIF has no such bound (Pillow refused it: 'EXIF data is too
        # long'); measured as written, whose pixel sizes take the same bytes whatever they are
        fitted = fitted_exif(metadata.exif, 1, 1, None if "dpi" in said else dpi)
        if fitted is not None and len(fitted) > JPEG_SEGMENT:
            said["exif"] = f"EXIF data of {len(fitted)} bytes (one segment takes {JPEG_SEGMENT})"
    if fmt == "png" and metadata.comment is not None and b"\0" in metadata.comment:
        said["comment"] = "comment (it holds a NUL byte, which a PNG text chunk cannot)"
    return said
JPEG_QUALITY = 95
# ImageMagick's zlib level for PNG (its quality 75)
PNG_LEVEL = 7
_Z_RLE = 3  # zlib's Z_RLE, Pillow's PNG encoder's compress_type


def write(
    data: np.ndarray,
    f: IO[bytes],
    fmt: str,
    metadata: Metadata | None = None,
    options: WriteOptions | None = None,
) -> list[str]:
    """Write an array the facade has already checked this format can hold, with the metadata
    fields this format holds (see HOLDS); the warnings :func:`save` gives."""
    import numpy as np

    options = options or WriteOptions()
    if fmt == "png" and data.dtype == np.uint16:
        level, kept = _kept(fmt, metadata or Metadata(), options, data.shape[1], data.shape[0])
        dpi = kept.get("dpi")
        ppm = None if dpi is None else (round(dpi[0] / 0.0254), round(dpi[1] / 0.0254))
        f.write(_png.encode(data, level, icc=kept.get("icc_profile"), ppm=ppm, exif=kept.get("exif"),
                            chunks=kept.get("chunks", ())))
        colours = None if metadata is None else metadata.palette  # (a palette indexes 8-bit values)
        return [] if colours is None else [
            f"the palette ({len(colours) // 3} colours) is for one channel of uint8 indices, not a "
            f"{'x'.join(map(str, data.shape))} {data.dtype} result; dropped"]
    from PIL import Image

    if data.ndim == 3 and data.shape[2] == 1:
        data = data[:, :, 0]
    im = Image.fromarray(np.ascontiguousarray(data))
    colours = None if metadata is None or fmt not in ("png", "gif", "bmp") else metadata.palette
    if colours is not None and im.mode == "L":
        # entries up to the highest index, black past the palette's (a TIFF map's padding, left
        # out as read): Pillow packs a PNG of 16 entries or fewer in fewer bits, which would wrap them
        reach = 3 * (int(data.max()) + 1) if data.size else 0
        im.putpalette(colours + bytes(max(0, reach - len(colours))), "RGB")  # (mode P now: its indices)
    said = [] if colours is None or im.mode == "P" else [
        f"the palette ({len(colours) // 3} colours) is for one channel of uint8 indices, not a "
        f"{'x'.join(map(str, data.shape))} {data.dtype} result; dropped"]
    return said + save(im, f, fmt, metadata, options)


def save(
    im: Any,
    f: IO[bytes],
    fmt: str,
    metadata: Metadata | None = None,
    options: WriteOptions | None = None,
) -> list[str]:
    """Write a Pillow image of a mode this format holds, as :func:`write` writes its array; a
    warning for colours a GIF could not hold."""
    options = options or WriteOptions()
    level, kept = _kept(fmt, metadata or Metadata(), options, *im.size)
    said: list[str] = []
    if fmt == "gif" and im.mode in ("RGB", "RGBA"):
        im, said = _paletted(im) if im.mode == "RGB" else _paletted_with_transparency(im)
        kept.update({"transparency": im.info["transparency"]} if "transparency" in im.info else {})
    elif im.mode == "P" and metadata is not None and metadata.palette_alpha is not None and fmt in ("png", "gif"):
        transparency = _palette_transparency(metadata.palette_alpha, fmt)
        kept.update({} if transparency is None else {"transparency": transparency})
    saving: dict[str, Any] = {}
    if fmt == "png":
        saving = {"compress_level": level, **_png_strategy(im, level)}
    elif fmt == "jpeg":
        saving = _jpeg_saving(metadata or Metadata(), options)
    elif fmt == "bmp":
        # given no DPI, Pillow writes 96: 0 pixels per metre is a BMP's "not stated"
        saving = {"dpi": kept.pop("dpi", (0, 0))}
    elif fmt == "gif":
        # unoptimised, the palette stays the identity grey ramp, which Pillow reads back as "L"
        saving = {"optimize": False}
    elif fmt == "webp":
        if options.quality is None:
            # lossless, and keeping the colour of fully transparent pixels: values survive exactly
            saving = {"lossless": True, "exact": True}
        else:
            saving = {"quality": options.quality}
    chunks = kept.pop("chunks", ())
    if chunks:
        from PIL import PngImagePlugin

        saving["pnginfo"] = PngImagePlugin.PngInfo()
        for kind, body in chunks:
            saving["pnginfo"].add(kind, body)
    im.save(f, format=_PILLOW_FORMATS[fmt][0], **saving, **kept)
    return said


def _palette_transparency(alpha: bytes, fmt: str) -> bytes | int | None:
    """A palette's alpha (Metadata.palette_alpha) as Pillow's save takes it: a PNG's tRNS as it
    is; a GIF holds one transparent entry, the first of alpha 0 (:func:`gif_unheld_alpha` names the rest)."""
    if fmt == "png":
        return alpha
    clear = alpha.find(b"\0")
    return clear if clear >= 0 else None


def gif_unheld_alpha(alpha: bytes) -> str | None:
    """The palette entries whose alpha a GIF cannot hold (all but its one transparent entry, the
    first of alpha 0, and the opaque), as a dropped field names them; None where there are none."""
    clear = alpha.find(b"\0")
    rest = [index for index, value in enumerate(alpha) if value != 255 and index != clear]
    if not rest:
        return None
    return f"alpha of palette entries {', '.join(map(str, rest[:5]))}{', ...' if len(rest) > 5 else ''}"


def _paletted(im: Any, colours: int = 256) -> tuple[Any, list[str]]:
    """An RGB image as a GIF holds it: a palette of its own colours where it has at most
    ``colours`` (a crop, a pad or a nearest resize of a GIF: the values written are the
    result's), else that many made by Pillow's median cut, dithered, and a warning that says so."""
    from PIL import Image

    if im.getcolors(colours) is not None:  # Pillow's median cut keeps that many colours or fewer exactly
        return im.quantize(colours, dither=Image.Dither.NONE), []
    return im.quantize(colours, dither=Image.Dither.FLOYDSTEINBERG), [
        f"GIF holds {colours} colours: the result's colours were reduced to {colours} and dithered, the written "
        "values differ from the result (write .png to keep them)"]


def _paletted_with_transparency(im: Any) -> tuple[Any, list[str]]:
    """An RGBA image as a GIF holds it: palette entry 255 for its transparent pixels (alpha below
    128), in their colour, and the opaque pixels' colours in the other 255 (see :func:`_paletted`).
    A transparent GIF cropped or resized by nearest is written as it was read; alpha between 0
    and 255, or transparent pixels of several colours (a GIF's padded with zeros), are said."""
    import numpy as np
    from PIL import Image

    data = np.asarray(im)
    clear = data[..., 3] < 128
    rgb = data[..., :3].copy()
    under = np.unique(rgb[clear], axis=0)
    said = []
    if not np.isin(data[..., 3], (0, 255)).all():
        said.append("GIF holds no partial transparency: alpha below 128 was written as transparent, the rest as "
                    "opaque (write .png to keep it)")
    if len(under) > 1:
        said.append(f"GIF holds one colour under its transparent pixels, not {len(under)}: they were given the "
                    "first (write .png to keep theirs)")
    opaque = rgb[~clear]
    rgb[clear] = opaque[0] if len(opaque) else 0  # a colour that adds no palette entry
    paletted, reduced = _paletted(Image.fromarray(rgb), 255)
    indices = np.array(paletted)
    indices[clear] = 255
    palette = (paletted.getpalette() or [])[:3 * 255]
    palette += [0] * (3 * 255 - len(palette)) + [int(value) for value in (under[0] if len(under) else (0, 0, 0))]
    out = Image.fromarray(indices, mode="P")
    out.putpalette(palette)
    out.info["transparency"] = 255
    return out, said + reduced


def _jpeg_saving(metadata: Metadata, options: WriteOptions) -> dict[str, Any]:
    """A JPEG output from a JPEG input keeps the input's coding: its chroma subsampling, progressive
    scans and, unless --quality is given, its quantisation tables, so a crop is coded as the photo
    was (a 4:4:4 quality-96 photo stays one); --subsampling chooses. Otherwise quality 95 (or
    --quality), 4:2:0, baseline.
    A 224² crop of a 4:4:4 quality-96 photo: 58.44 dB in 45648 bytes, as ImageMagick's
    `convert -gravity center -extent` (58.44 dB, 45648 bytes); it was 4:2:0 at 95 before."""
    coding = metadata.jpeg
    # optimised Huffman tables, as ImageMagick writes them: lossless, and 8% smaller on a photo crop
    saving: dict[str, Any] = {"optimize": True}
    if options.quality is not None or coding is None:
        saving["quality"] = options.quality or JPEG_QUALITY
    else:
        saving["qtables"] = [list(table) for table in coding[1]]
    if options.subsampling is not None:
        saving["subsampling"] = _SUBSAMPLING[options.subsampling]
    elif coding is not None and coding[0] >= 0:
        saving["subsampling"] = coding[0]
    if coding is not None and coding[2]:
        saving["progressive"] = True  # a web photo's coding: shown coarse first, while it loads
    return saving


def _png_strategy(im: Any, level: int) -> dict[str, int]:
    """zlib's run-length strategy for a photograph at levels 1-8, as OpenCV's fast PNG settings:
    its filtered rows hold next to no repeats, so the file is as small as string matching makes it
    and five times faster to make (a noisy 512² RGB crop: 40 against 197 ms, 437954 against 438611
    bytes), which is most of a PNG batch's time. A drawing's rows repeat (a 48×64 disc: 9% bigger),
    so a band of 32 rows from the middle is encoded both ways first, and the run-length strategy
    is taken only where it is no more than 1% bigger there. Small images and level 9 keep zlib's
    default."""
    width, height = im.size
    if not 0 < level < 9 or width * height < 1 << 16:
        return {}
    middle = height // 2
    band = im.crop((0, max(0, middle - 16), width, min(height, middle + 16)))
    sizes = []
    for strategy in ({}, {"compress_type": _Z_RLE}):
        encoded = io.BytesIO()
        band.save(encoded, format="PNG", compress_level=level, **strategy)
        sizes.append(encoded.tell())
    return {"compress_type": _Z_RLE} if sizes[1] <= sizes[0] * 1.01 else {}


def _kept(
    fmt: str, metadata: Metadata, options: WriteOptions, width: int, height: int
) -> tuple[int, dict[str, Any]]:
    """The PNG level, and what this format holds of ``metadata`` as Pillow's save() takes it:
    ``icc_profile``, ``dpi``, ``exif`` (fitted to width x height), ``xmp``, ``comment``; for a PNG
    its chunks of text, XMP and comment as ``chunks`` (type, body). What :func:`unfit` names is left out."""
    holds = HOLDS[fmt]
    level = PNG_LEVEL if options.compress_level is None else options.compress_level
    metadata = as_written(metadata, fmt)
    too_big = unfit(metadata, fmt)
    xmp = metadata.xmp if "xmp" in holds and "xmp" not in too_big else None
    comment = metadata.comment if "comment" in holds and "comment" not in too_big else None
    kept: dict[str, Any] = {
        "icc_profile": metadata.icc if "icc" in holds else None,
        "dpi": metadata.dpi if "dpi" in holds and "dpi" not in too_big else None,
        "exif": None if metadata.exif is None or "exif" not in holds or "exif" in too_big else fitted_exif(
            metadata.exif, width, height, metadata.dpi if "dpi" in holds and "dpi" not in too_big else None),
    }
    if fmt == "png":
        kept["chunks"] = _png.metadata_chunks(xmp, metadata.text, comment, metadata.png_colour)
    else:
        kept.update(xmp=xmp, comment=comment)
    return level, {key: value for key, value in kept.items() if value is not None}


def icc_description(icc: bytes) -> str:
    """An ICC profile's description (its ``desc`` tag, as Pillow's littlecms reads it), or
    ``present`` when it has none Pillow can read."""
    try:
        from PIL import ImageCms

        description = ImageCms.ImageCmsProfile(io.BytesIO(icc)).profile.profile_description
    except (ImportError, OSError, ValueError, TypeError, AttributeError):
        return "present"
    return description.strip() if isinstance(description, str) and description.strip() else "present"
