"""16-bit PNG (grey, grey+alpha, RGB, RGBA) through imagecodecs' libpng codec: Pillow reads such
files as 8-bit and cannot write them. Pillow still opens them (chunks, metadata, frames); the few
lines that place the ICC profile, DPI and EXIF, which imagecodecs does not write, are here."""

from __future__ import annotations

import logging
import struct
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# IHDR colour type -> samples per pixel (3, palette, is never 16-bit)
_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


def sixteen_bit(head: bytes) -> bool:
    """Whether the PNG that ``head`` (its first 26 bytes at least) starts has 16-bit samples."""
    return len(head) >= 26 and head[24] == 16


def channels(head: bytes) -> int:
    """The samples per pixel its IHDR declares."""
    return _CHANNELS.get(head[25], 1)


def decode(data: bytes) -> np.ndarray:
    """The native-order uint16 HW or HWC array of a 16-bit PNG (every filter, Adam7 too). A tRNS
    colour key, which libpng makes an alpha channel, is dropped: the samples stay as stored."""
    import imagecodecs

    _quiet_interlace_notice()
    array: np.ndarray = imagecodecs.png_decode(data)
    stored = channels(data)
    if array.ndim == 3 and array.shape[2] > stored:
        array = array[:, :, 0] if stored == 1 else array[:, :, :stored]
    return array


def encode(
    data: np.ndarray,
    level: int,
    *,
    icc: bytes | None = None,
    ppm: tuple[int, int] | None = None,
    exif: bytes | None = None,
) -> bytes:
    """A PNG of a uint16 HW or HWC (1-4 channels) array at zlib ``level`` (libpng's filtered
    strategy, as ImageMagick writes); ``icc``, ``ppm`` (pixels per metre) and ``exif`` become
    iCCP, pHYs and eXIf chunks after the IHDR."""
    import imagecodecs

    png = imagecodecs.png_encode(data, level=level, strategy=imagecodecs.PNG.STRATEGY.FILTERED)
    extra = b""
    if icc is not None:
        extra += _chunk(b"iCCP", b"ICC profile\0\0" + zlib.compress(icc, 9))
    if ppm is not None:
        extra += _chunk(b"pHYs", struct.pack(">IIB", ppm[0], ppm[1], 1))
    if exif is not None:
        extra += _chunk(b"eXIf", exif.removeprefix(b"Exif\0\0"))
    return bytes(png[:33]) + extra + bytes(png[33:])  # the signature and IHDR take 33 bytes


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(body, zlib.crc32(kind)))


class _InterlaceNotice(logging.Filter):
    """imagecodecs' reader does not turn on libpng's interlace handling, which libpng then does
    itself and logs a warning about: that one line, of no use to a user, is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Interlace handling should be turned on" not in record.getMessage()


def _quiet_interlace_notice() -> None:
    log = logging.getLogger("imagecodecs")
    if not any(isinstance(f, _InterlaceNotice) for f in log.filters):
        log.addFilter(_InterlaceNotice())
