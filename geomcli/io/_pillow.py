"""PNG, JPEG, BMP, GIF and WebP through Pillow (imported here only), 16-bit PNG through _png."""

from __future__ import annotations

import io
import struct
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import numpy as np

from geomcli.errors import GeomError
from geomcli.io import _png
from geomcli.io._base import Header, Loaded, check_size, one_line

# Pillow's plugin name(s) for each format: Image.open tries only these, so content and name agree
_PLUGINS = {
    "png": ("PNG",),
    "jpeg": ("JPEG",),  # its factory hands back an MPO image itself when there is one
    "bmp": ("BMP", "DIB"),
    "gif": ("GIF",),
    "webp": ("WEBP",),
}
_SAVE_AS = {"png": "PNG", "jpeg": "JPEG", "bmp": "BMP", "gif": "GIF", "webp": "WEBP"}
# Formats whose extra frames are an animation (a JPEG's MPO frames are previews: ignored)
_ANIMATED = {"png", "gif", "webp"}
# What Pillow raises on broken files, besides UnidentifiedImageError (an OSError)
_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, struct.error, zlib.error, IndexError)

# modes numpy receives unchanged: mode -> (dtype, channels)
_KEPT = {
    "1": (np.dtype(bool), 1),
    "L": (np.dtype(np.uint8), 1),
    "LA": (np.dtype(np.uint8), 2),
    "RGB": (np.dtype(np.uint8), 3),
    "RGBA": (np.dtype(np.uint8), 4),
    "I;16": (np.dtype(np.uint16), 1),
    "I;16L": (np.dtype(np.uint16), 1),
    "I;16B": (np.dtype(np.uint16), 1),
    "I": (np.dtype(np.int32), 1),
    "F": (np.dtype(np.float32), 1),
}

_ORIENTATIONS = {
    2: "mirrored left-right",
    3: "rotated 180 degrees",
    4: "flipped top-bottom",
    5: "transposed",
    6: "rotated 90 degrees clockwise",
    7: "transversed",
    8: "rotated 90 degrees counter-clockwise",
}


def read_header(source: str | bytes, name: str, fmt: str, auto_orient: bool) -> Header:
    file_size = None if isinstance(source, bytes) else _size(source)
    data = _head_bytes(source, fmt)
    if fmt == "png" and data is not None and _png.parse_ihdr(data, name).depth == 16:
        ihdr = _png.parse_ihdr(data, name)
        shape = ihdr.shape
        with _opened(source, name, fmt) as im:
            if auto_orient and _orientation(im, name) in (5, 6, 7, 8):
                shape = (shape[1], shape[0], *shape[2:])
        return Header(fmt, shape, np.dtype(np.uint16), 1, file_size, _layout(shape))
    with _opened(source, name, fmt) as im:
        frames = _frames(im, name)
        mode, _ = _target_mode(im)
        dtype, channels = _KEPT[mode]
        width, height = im.size
        if auto_orient and _orientation(im, name) in (5, 6, 7, 8):
            width, height = height, width
    shape = (height, width) if channels == 1 else (height, width, channels)
    return Header(fmt, shape, dtype, frames, file_size, _layout(shape))


def read(source: str | bytes, name: str, fmt: str, max_pixels: int, auto_orient: bool) -> Loaded:
    src = "-" if isinstance(source, bytes) else source
    if fmt == "png":
        # every chunk is checked first (Pillow stops at the last IDAT and would accept a file cut
        # after it); the bytes read then go to the decoder
        source = source if isinstance(source, bytes) else _read_all(source)
        chunks = _png.read_chunks(source, name)
        if chunks.frames > 1:
            raise GeomError(_animated(name, chunks.frames))
        check_size(chunks.ihdr.shape, max_pixels, name)
        if chunks.ihdr.depth == 16:
            return _read_png16(chunks, name, src, auto_orient)
    notes: list[str] = []
    with _opened(source, name, fmt, notes) as im:
        if fmt in _ANIMATED:
            frames = _frames(im, name)
            if frames > 1:
                raise GeomError(_animated(name, frames))
        mode, note = _target_mode(im)
        _, channels = _KEPT[mode]
        width, height = im.size
        check_size((height, width, channels), max_pixels, name)
        orientation = _orientation(im, name) if auto_orient else 1
        try:
            im.load()
            if orientation in _ORIENTATIONS:
                from PIL import ImageOps

                im = ImageOps.exif_transpose(im)
                notes.append(f"{_ORIENTATIONS[orientation]} by its EXIF orientation {orientation}")
            if note:
                im = im.convert(mode)
                notes.append(note)
            data = np.asarray(im)
        except _DECODE_ERRORS as e:
            raise GeomError(f"{name}: not a readable {fmt.upper()} ({_reason(e)})") from e
    if data.dtype.byteorder not in ("=", "|"):
        data = data.astype(data.dtype.newbyteorder("="))  # I;16B: same values, native order
    return Loaded(data, fmt, _layout(data.shape), src, tuple(notes))


def _animated(name: str, frames: int) -> str:
    return (
        f"{name}: has {frames} frames; geomcli reads single-frame images "
        "(convert the frames to a TIFF stack)"
    )


def _read_png16(chunks: _png.Chunks, name: str, src: str, auto_orient: bool) -> Loaded:
    """Pillow would hand back 8 bits of these; our decoder keeps all 16."""
    data = _png.decode_16bit(chunks, name)
    notes: list[str] = []
    if auto_orient:
        value = exif_orientation(chunks.exif)
        if value in _ORIENTATIONS:
            data = orient(data, value)
            notes.append(f"{_ORIENTATIONS[value]} by its EXIF orientation {value}")
    return Loaded(data, "png", _layout(data.shape), src, tuple(notes))


def orient(data: np.ndarray, orientation: int) -> np.ndarray:
    """Turn an HW(C) array upright the way ImageOps.exif_transpose turns an image."""
    if orientation == 2:
        return data[:, ::-1]
    if orientation == 3:
        return data[::-1, ::-1]
    if orientation == 4:
        return data[::-1]
    if orientation == 5:
        return data.swapaxes(0, 1)
    if orientation == 6:
        return np.rot90(data, -1)
    if orientation == 7:
        return data[::-1, ::-1].swapaxes(0, 1)
    if orientation == 8:
        return np.rot90(data, 1)
    return data


@contextmanager
def _opened(
    source: str | bytes, name: str, fmt: str, notes: list[str] | None = None
) -> Iterator[Any]:
    """Image.open with Pillow's own bomb check off (geomcli's check_size is the limit), every
    decoder failure turned into a GeomError naming the file, and Pillow's warnings about damaged
    metadata ("Corrupt EXIF data", "Invalid APNG") kept as notes rather than printed."""
    from PIL import Image

    limit = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            fp = io.BytesIO(source) if isinstance(source, bytes) else source
            with Image.open(fp, formats=_PLUGINS[fmt]) as im:
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
        raise GeomError(f"{name}: not a readable {fmt.upper()} ({_reason(e)})") from e
    finally:
        Image.MAX_IMAGE_PIXELS = limit


def _reason(e: BaseException) -> str:
    text = one_line(e)
    if "truncated" in text or isinstance(e, EOFError):
        return "truncated"
    if text.startswith("cannot identify image file"):
        return "unrecognised content"
    return text


def _frames(im: Any, name: str) -> int:
    return int(getattr(im, "n_frames", 1))


def _orientation(im: Any, name: str) -> int:
    """The EXIF orientation read at open (not im.getexif(): for a PNG that decodes the pixels)."""
    return exif_orientation(im.info.get("exif"))


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
    return value if value in _ORIENTATIONS else 1


def _target_mode(im: Any) -> tuple[str, str | None]:
    """The mode the array is read in, and a note when that is a conversion."""
    mode = im.mode
    if mode in _KEPT:
        return mode, None
    if mode in ("P", "PA"):
        target = "RGBA" if mode == "PA" or "transparency" in im.info else "RGB"
        return target, f"palette expanded to {target}"
    target = "RGBA" if "A" in mode or "a" in mode else "RGB"
    return target, f"{mode} converted to {target}"


def _layout(shape: tuple[int, ...]) -> str:
    return "HW" if len(shape) == 2 else "HWC"


def _head_bytes(source: str | bytes, fmt: str) -> bytes | None:
    if fmt != "png":
        return None
    if isinstance(source, bytes):
        return source[:33]
    with open(source, "rb") as f:
        return f.read(33)


def _read_all(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _size(path: str) -> int:
    import os

    return os.stat(path).st_size


def write(data: np.ndarray, f: IO[bytes], fmt: str) -> None:
    """Write an array the facade has already checked this format can hold."""
    if fmt == "png" and data.dtype == np.uint16:
        f.write(_png.encode(data))
        return
    from PIL import Image

    if data.ndim == 3 and data.shape[2] == 1:
        data = data[:, :, 0]
    im = Image.fromarray(np.ascontiguousarray(data))
    options: dict[str, Any] = {}
    if fmt == "png":
        # ImageMagick's zlib level. Pillow's C filtering is 15% faster than our numpy encoder,
        # for files 4% larger than libpng's (measured by benchmarks/batch.py)
        options = {"compress_level": _png.LEVEL}
    elif fmt == "jpeg":
        options = {"quality": 95}
    elif fmt == "gif":
        # unoptimised, the palette stays the identity grey ramp, which Pillow reads back as "L"
        options = {"optimize": False}
    elif fmt == "webp":
        # lossless, and keeping the colour of fully transparent pixels: values survive exactly
        options = {"lossless": True, "exact": True}
    im.save(f, format=_SAVE_AS[fmt], **options)
