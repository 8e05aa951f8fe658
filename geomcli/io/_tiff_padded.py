"""Deflate and PackBits strips and tiles longer than their page, read as libtiff reads them: the
page's bytes, the rest dropped.

Why this is ours: imagecodecs, which tifffile decodes with, refuses such a segment (libdeflate
inflates whole streams only; its PackBits wants the stream to end within the page), so a file whose
last strip is padded to a whole RowsPerStrip, which libtiff and Pillow read, would be an error. Its
other decoders (LZW, LZMA, ...) stop at the page already. imagecodecs decodes first; only a segment
it refuses is decoded again here, no further than the page, the bound imagecodecs keeps (a strip of
gigabytes of zeros still costs what its page does). tifffile has no public way to choose a
decoder, so these two replace its entries for Deflate and PackBits in its decoder table.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from typing import Any

from geomcli.io._base import one_line

_DEFLATE, _PACKBITS = (8, 32946, 50013), 32773
PATCHED = (*_DEFLATE, _PACKBITS)  # the compressions whose decoders install() replaces


class SegmentError(Exception):
    """A strip or tile that neither imagecodecs nor the fallback here decodes: the reason."""


@functools.cache
def install() -> None:
    """Put the page-bounded Deflate and PackBits decoders in tifffile's table (for every user in
    this process: each reads what tifffile's own reads, and more)."""
    import tifffile

    decoders = tifffile.TIFF.DECOMPRESSORS
    table = getattr(decoders, "_codecs", None)  # tifffile's cache of resolved decoders
    if not isinstance(table, dict):
        return
    for code in PATCHED:
        if code in decoders:
            table[code] = _with_fallback(decoders[code], _inflate if code in _DEFLATE else _unpack_bits)


def _with_fallback(decode: Callable[..., Any], fallback: Callable[[bytes, int], bytes]) -> Callable[..., Any]:
    def decoded(data: bytes, /, *, out: Any = None) -> Any:
        try:
            return decode(data, out=out)
        except RuntimeError:  # imagecodecs' errors
            if not isinstance(out, int) or out <= 0:
                raise
        return fallback(data, out)

    return decoded


def _inflate(data: bytes, limit: int) -> bytes:
    """Deflate data, inflated no further than ``limit`` bytes."""
    inflater = zlib.decompressobj()
    try:
        result = inflater.decompress(data, limit)
    except zlib.error as e:
        raise SegmentError(f"damaged Deflate data: {one_line(e)}") from e
    if not inflater.eof and len(result) < limit:
        raise SegmentError("Deflate data cut short")
    return result


def _unpack_bits(data: bytes, limit: int) -> bytes:
    """PackBits data, no further than ``limit`` bytes: a header byte 0-127 copies the next 1-128
    bytes, 129-255 repeats the next byte 128-2 times, 128 does nothing."""
    result = bytearray()
    at = 0
    while at < len(data) and len(result) < limit:
        header = data[at]
        if header > 128:
            result += data[at + 1 : at + 2] * (257 - header)
            at += 2
        elif header < 128:
            result += data[at + 1 : at + 2 + header]
            at += 2 + header
        else:
            at += 1
    return bytes(result[:limit])
