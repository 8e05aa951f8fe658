"""What is wrong with a TIFF's image tags, said in the tags' own names, for a file tifffile failed on.

tifffile trusts the tags that size an image: a SamplesPerPixel of 0 or a BitsPerSample with no value
fails deep in its code with Python's own words ("tuple index out of range"). This walks the IFDs
with struct (no tifffile: it is what failed) and names the first such tag; it runs only after a
failure, so a good file never pays for it.
"""

from __future__ import annotations

import io
import struct
from typing import IO, BinaryIO

# the tags that size an image and its strips or tiles, by code; the first two every image must have
_NAMES = {
    256: "ImageWidth", 257: "ImageLength", 258: "BitsPerSample", 277: "SamplesPerPixel",
    278: "RowsPerStrip", 322: "TileWidth", 323: "TileLength",
    273: "StripOffsets", 279: "StripByteCounts", 324: "TileOffsets", 325: "TileByteCounts",
}
_REQUIRED = (256, 257)
_POSITIVE = (256, 257, 258, 277, 278, 322, 323)  # sides, sizes and counts: 0 describes no image
# TIFF's integer types: BYTE, SHORT, LONG, LONG8 (BigTIFF) and their byte sizes
_INTEGERS = {1: "B", 3: "H", 4: "I", 16: "Q"}
_MOST_IFDS = 4096  # a chain longer (or circular) is judged by tifffile, not here
_MOST_VALUES = 64  # BitsPerSample holds one per sample; more are not looked at
_MOST_TAGS = 4096  # an IFD of more is tifffile's 'suspicious number of tags': not read here


def damaged_tag(source: str | bytes | BinaryIO) -> str | None:
    """The first image tag that is missing, empty or 0 (prefixed by its page past the first), or
    None where none is (or the file is too damaged to tell)."""
    try:
        if not isinstance(source, (str, bytes)):  # a file object (an object read by ranges): left open
            source.seek(0)
            return _first_damage(source)
        with (io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")) as f:
            return _first_damage(f)
    except (OSError, struct.error, ValueError, OverflowError):  # (an offset past what a seek takes)
        return None


def _first_damage(f: IO[bytes]) -> str | None:
    order = {b"II": "<", b"MM": ">"}.get(f.read(2))
    if order is None:
        return None
    (version,) = struct.unpack(order + "H", f.read(2))
    if version == 42:
        count_fmt, offset_fmt, entry, field = "H", "I", "HHI4s", 4
    elif version == 43:
        f.read(4)  # BigTIFF's offset size and padding
        count_fmt, offset_fmt, entry, field = "Q", "Q", "HHQ8s", 8
    else:
        return None
    (offset,) = struct.unpack(order + offset_fmt, f.read(field))
    seen: set[int] = set()
    page = 0
    while offset and offset not in seen and page < _MOST_IFDS:
        seen.add(offset)
        f.seek(offset)
        (n,) = struct.unpack(order + count_fmt, f.read(struct.calcsize(order + count_fmt)))
        if n > _MOST_TAGS:
            return None
        entries = f.read(n * struct.calcsize(order + entry))
        next_offset = f.read(field)
        tags = {code: (kind, count, value)
                for code, kind, count, value in struct.iter_unpack(order + entry, entries) if code in _NAMES}
        found = _judged(f, order, offset_fmt, field, tags)
        if found:
            return (f"page {page}: " if page else "") + found
        (offset,) = struct.unpack(order + offset_fmt, next_offset)
        page += 1
    return None


def _judged(f: IO[bytes], order: str, offset_fmt: str, field: int,
            tags: dict[int, tuple[int, int, bytes]]) -> str | None:
    """What is wrong with one IFD's image tags, or None."""
    for code in _REQUIRED:
        if code not in tags:
            return f"no {_NAMES[code]} tag"
    for code, (kind, count, value) in tags.items():
        name = _NAMES[code]
        if count == 0:
            return f"its {name} tag holds no value"
        if kind not in _INTEGERS:
            return f"its {name} tag is not an integer (TIFF type {kind})"
        if code not in _POSITIVE:
            continue
        fmt = order + _INTEGERS[kind] * min(count, _MOST_VALUES)
        size = struct.calcsize(fmt)
        if size > field:  # the values are elsewhere: the field holds their offset
            (at,) = struct.unpack(order + offset_fmt, value)
            f.seek(at)
            values = struct.unpack(fmt, f.read(size))
        else:
            values = struct.unpack(fmt, value[:size])
        if 0 in values:
            return f"its {name} tag is 0"
    return None
