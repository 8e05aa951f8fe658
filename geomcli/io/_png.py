"""16-bit PNG (grey, grey+alpha, RGB, RGBA) through imagecodecs' libpng codec: Pillow reads such
files as 8-bit and cannot write them. Pillow still opens them (chunks, metadata, frames); the few
lines that place the ICC profile, DPI, EXIF and text chunks, which imagecodecs does not write, are
here, with the reading of text chunks as stored (for every PNG: Pillow keeps their values, not
their bytes, and reads those after the pixels only when it decodes them)."""

from __future__ import annotations

import logging
import os
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeVar

if TYPE_CHECKING:
    import numpy as np

# IHDR colour type -> samples per pixel (3, palette, is never 16-bit)
_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}
# the chunks of text a PNG's metadata carries as stored; the XMP packet is the iTXt of this keyword
TEXT_CHUNKS = (b"tEXt", b"zTXt", b"iTXt")
XMP_KEYWORD = b"XML:com.adobe.xmp"
# the chunks that say how a PNG's values are shown where it has no ICC profile (gamma, primaries,
# sRGB), carried to a PNG as stored; sRGB's own gamma (1/2.2 stored as 45455) and primaries
_COLOUR_CHUNKS = (b"gAMA", b"cHRM", b"sRGB")
_SRGB_GAMMA = 45455
_SRGB_PRIMARIES = (31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000)


def sixteen_bit(head: bytes) -> bool:
    """Whether the PNG that ``head`` (its first 26 bytes at least) starts has 16-bit samples."""
    return len(head) >= 26 and head[24] == 16


def opened_within(head: bytes) -> bool:
    """Whether ``head``, a PNG's first bytes, holds every chunk before its first IDAT and that
    IDAT's length and type: all Pillow's Image.open reads of it (it stops there), so that what it
    finds wrong there the whole file shows too. A length that runs past them: False."""
    at = 8
    while at + 8 <= len(head):
        length, kind = struct.unpack_from(">I4s", head, at)
        if kind == b"IDAT":
            return True
        at += 12 + length
    return False


def channels(head: bytes) -> int:
    """The samples per pixel its IHDR declares."""
    return _CHANNELS.get(head[25], 1)


# deflate's most: a 258-byte match coded in as little as 2 bits (zlib's figure, 1032 to 1)
_DEFLATE_MOST = 1032
# Adam7's passes: (first column, first row, column step, row step)
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
# what short_stream inflates at a time, so that checking a big image takes little memory
_INFLATED_AT_ONCE = 1 << 16
# a PNG's bytes, or a view of them (whose chunks are views, not copies)
_Bytes = TypeVar("_Bytes", bytes, memoryview)


class _Frame(NamedTuple):
    """A frame's declared size and the pieces of its zlib stream, as its chunks hold them."""

    width: int
    height: int
    pieces: list[memoryview]


class _ImageData(NamedTuple):
    """What an IHDR declares of every frame's rows, and each frame's data: the default image's from
    its IDAT chunks, then (``every_frame``) an APNG's later frames' from their fdAT chunks."""

    depth: int
    colour: int
    interlaced: bool
    frames: list[_Frame]


def _image_data(data: bytes, every_frame: bool) -> _ImageData | None:
    """A PNG's frames and their data (None without an IHDR first: Pillow says what is wrong)."""
    found: _ImageData | None = None
    for kind, body in _chunks(memoryview(data)):  # views, not copies: the IDATs are most of the file
        if found is None:
            if kind != b"IHDR" or len(body) < 13:
                return None
            width, height, depth, colour, _, _, interlace = struct.unpack_from(">IIBBBBB", body)
            found = _ImageData(depth, colour, interlace == 1, [_Frame(width, height, [])])
        frames = found.frames
        if kind == b"IDAT" and len(frames) == 1:
            frames[0].pieces.append(body)
        elif kind == b"fcTL" and every_frame and any(frames[0].pieces) and len(body) >= 12:
            # (the default image's comes before IDAT)
            width, height = struct.unpack_from(">II", body, 4)
            frames.append(_Frame(width, height, []))
        elif kind == b"fdAT" and len(frames) > 1:
            frames[-1].pieces.append(body[4:])  # after its sequence number
    return found


def short_data(data: bytes, every_frame: bool = False) -> str | None:
    """What is wrong with a PNG whose image data (its IDAT chunks) is too short to hold the frame
    its IHDR declares at deflate's most, or None. Decoded, its frame was allocated whole and the
    rows past the data's end came out as zeros (Pillow stops without a word): a 4 KB PNG declaring
    40000x40000 grey was read as such, exit 0, and 'info' of it took 1.6 GB. ``every_frame``: an
    APNG's later frames too, each the region its fcTL declares from its fdAT chunks."""
    found = _image_data(data, every_frame)
    if found is None:
        return None
    for number, frame in enumerate(found.frames, 1):
        stored = sum(len(piece) for piece in frame.pieces)
        # every pixel's bits, without the rows' filter bytes: a floor for Adam7's passes too
        needed = (frame.width * frame.height * found.depth * _CHANNELS.get(found.colour, 1) + 7) // 8
        if needed > stored * _DEFLATE_MOST:
            whose = "its" if number == 1 else "a later frame's"
            return (f"truncated: {whose} {stored} bytes of image data hold at most {stored * _DEFLATE_MOST} of "
                    f"the {needed} its {frame.width}x{frame.height} frame needs")
    return None


def short_stream(data: bytes, every_frame: bool = False) -> str | None:
    """What is wrong with a PNG whose image data inflates to less than its frame's rows take (each
    row with its filter byte; Adam7's passes), or None. Pillow's decoder stops where the zlib
    stream ends without a word when a row ends there too (its check is commented out in
    ZipDecode.c): the rows after it were read as zeros, exit 0. libpng refuses such a file ("Not
    enough image data"); for Pillow the data is inflated once more here, 64 KiB at a time, up to
    what the rows take. A stream zlib refuses is left to the decoder to name."""
    found = _image_data(data, every_frame)
    if found is None:
        return None
    bits = found.depth * _CHANNELS.get(found.colour, 1)
    for number, frame in enumerate(found.frames, 1):
        passes = _ADAM7 if found.interlaced else ((0, 0, 1, 1),)
        needed = 0
        for left, top, across, down in passes:
            columns, rows = -(-(frame.width - left) // across), -(-(frame.height - top) // down)
            if columns > 0 and rows > 0:  # (an empty pass has no rows, not even their filter bytes)
                needed += rows * (1 + (columns * bits + 7) // 8)
        inflated = _inflated_size(frame.pieces, needed)
        if inflated is not None and inflated < needed:
            whose = "its" if number == 1 else "a later frame's"
            return (f"truncated: {whose} image data inflates to {inflated} bytes of the {needed} the rows of its "
                    f"{frame.width}x{frame.height} frame take")
    return None


def _inflated_size(pieces: list[memoryview], most: int) -> int | None:
    """The bytes the zlib stream in ``pieces`` inflates to, counted up to ``most`` (then a few
    more); None where zlib refuses it."""
    inflate = zlib.decompressobj()
    size = 0
    try:
        for piece in pieces:
            rest: bytes | memoryview = piece
            while rest and size < most and not inflate.eof:
                size += len(inflate.decompress(rest, _INFLATED_AT_ONCE))
                rest = inflate.unconsumed_tail
    except zlib.error:
        return None
    return size


def decode(data: bytes) -> np.ndarray:
    """The native-order uint16 HW or HWC array of a 16-bit PNG (every filter, Adam7 too). A tRNS
    colour key, which libpng makes an alpha channel, is dropped: the samples stay as stored."""
    import imagecodecs

    if sum(kind == b"IHDR" for kind, _ in _chunks(data)) > 1:
        # libpng refuses it with a message it never filled in: junk bytes, "p" one run, no UTF-8 the next
        raise RuntimeError("its IHDR chunk appears twice")
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
    chunks: Sequence[tuple[bytes, bytes]] = (),
) -> bytes:
    """A PNG of a uint16 HW or HWC (1-4 channels) array at zlib ``level`` (libpng's filtered
    strategy, as ImageMagick writes); ``icc``, ``ppm`` (pixels per metre) and ``exif`` become
    iCCP, pHYs and eXIf chunks after the IHDR, followed by ``chunks`` (type, body) as given."""
    import imagecodecs
    import numpy as np

    # libpng's encoder takes C-contiguous rows only; a space-to-depth result is a strided view
    png = imagecodecs.png_encode(np.ascontiguousarray(data), level=level, strategy=imagecodecs.PNG.STRATEGY.FILTERED)
    extra = b""
    if icc is not None:
        extra += _chunk(b"iCCP", b"ICC profile\0\0" + zlib.compress(icc, 9))
    if ppm is not None:
        extra += _chunk(b"pHYs", struct.pack(">IIB", ppm[0], ppm[1], 1))
    if exif is not None:
        extra += _chunk(b"eXIf", exif.removeprefix(b"Exif\0\0"))
    for kind, body in chunks:
        extra += _chunk(kind, body)
    return bytes(png[:33]) + extra + bytes(png[33:])  # the signature and IHDR take 33 bytes


def text_chunks(data: bytes, limit: int) -> tuple[tuple[tuple[bytes, bytes], ...], bytes | None]:
    """A PNG's tEXt, zTXt and iTXt chunks as stored, (type, body) in file order, and apart from
    them its XMP packet (the first iTXt keyed ``XML:com.adobe.xmp``, a later one is dropped).
    Only the XMP packet is ever decompressed, to at most ``limit`` bytes (Pillow's MAX_TEXT_CHUNK,
    the bound its own reading of that chunk has): past it, or corrupt, it is dropped. The CRCs were
    checked by Pillow's verify()."""
    chunks: list[tuple[bytes, bytes]] = []
    xmp = None
    seen_xmp = False
    for kind, body in _chunks(data):
        if kind not in TEXT_CHUNKS:
            continue
        if kind == b"iTXt" and body.startswith(XMP_KEYWORD + b"\0"):
            if not seen_xmp:
                seen_xmp, xmp = True, _itxt_value(body[len(XMP_KEYWORD) + 1 :], limit)
        else:
            chunks.append((kind, body))
    return tuple(chunks), xmp


# the chunks a PNG's metadata is read from as stored (text_chunks, colour_chunks, sixteen_bit)
_STORED = (b"IHDR", *TEXT_CHUNKS, *_COLOUR_CHUNKS)


def stored_chunks(path: str) -> bytes:
    """The PNG file's signature and the chunks its metadata is read from as stored (IHDR, text and
    colour chunks), in file order: what text_chunks, colour_chunks and sixteen_bit find in the
    whole file. Walked by their lengths, unbuffered, the rest (its image data) skipped unread: a
    dry run read a 50 MB PNG whole for the text chunks after its pixels."""
    with open(path, "rb", buffering=0) as f:
        def peek(pos: int, count: int) -> bytes:
            f.seek(pos)
            return f.read(count)

        return b"".join(_walk_stored(peek, os.fstat(f.fileno()).st_size)[0])


def stored_chunks_apart(head: bytes, tail: bytes, size: int) -> bytes:
    """As :func:`stored_chunks`, of a PNG of ``size`` bytes whose first (``head``) and last
    (``tail``) bytes alone are at hand (a URL's: two ranged reads): its chunks walked by their
    lengths as far as these bytes hold them, then, where the walk meets bytes not at hand (the
    image data), those after the image data found back from its IEND in ``tail``. Not found: a
    chunk that begins before ``tail`` past the first bytes, or among the image data chunks, or
    in a file that goes on past its IEND."""
    start = size - len(tail)

    def peek(pos: int, count: int) -> bytes | None:
        if pos + count <= len(head):
            return head[pos : pos + count]
        return tail[pos - start : pos - start + count] if pos >= start else None

    kept, whole = _walk_stored(peek, size)
    return b"".join(kept) + (b"" if whole else _late_chunks(tail))


def _walk_stored(peek: Callable[[int, int], bytes | None], size: int) -> tuple[list[bytes], bool]:
    """The signature and the chunks of :func:`stored_chunks` of a PNG of ``size`` bytes, read by
    ``peek(at, count)``, walked by their lengths up to IEND or a chunk cut short; and whether the
    walk got there (False: it met bytes ``peek`` does not have, None)."""
    kept = [peek(0, 8) or b""]
    pos = 8
    while pos + 12 <= size:
        chunk_head = peek(pos, 8)
        if chunk_head is None:
            return kept, False
        length, kind = struct.unpack(">I4s", chunk_head)
        if kind == b"IEND" or pos + 8 + length > size:
            break
        if kind in _STORED:
            body = peek(pos + 8, length + 4)
            if body is None or len(body) < length:
                return kept, False
            kept.append(chunk_head + body.ljust(length + 4, b"\0"))  # (a CRC cut at the end)
        pos += 12 + length
    return kept, True


_IEND = b"\0\0\0\0IEND\xaeB`\x82"


def _late_chunks(tail: bytes) -> bytes:
    """The chunks of :func:`stored_chunks` that ``tail``, a PNG's last bytes, holds after its
    image data, in file order: found back from the IEND it ends with, each chunk by a length and
    a CRC that end where the next begins, up to the last IDAT or fdAT."""
    end = len(tail) - len(_IEND)
    if end < 0 or tail[end:] != _IEND:
        return b""
    found = []
    while (pos := _chunk_before(tail, end)) is not None and tail[pos + 4 : pos + 8] not in (b"IDAT", b"fdAT"):
        found.append(tail[pos:end])
        end = pos
    return b"".join(chunk for chunk in reversed(found) if chunk[4:8] in _STORED)


def _chunk_before(data: bytes, end: int) -> int | None:
    """Where in ``data`` the chunk that ends at ``end`` begins: the nearest position whose length
    field reaches ``end`` and whose CRC is the chunk's; None where none is. (numpy's: a loop
    over the positions of 64 KiB took 22 ms a file.)"""
    import numpy as np

    if end < 12:
        return None
    view = np.frombuffer(data, np.uint8, end).astype(np.int64)
    lengths = view[:-3] << 24 | view[1:-2] << 16 | view[2:-1] << 8 | view[3:]  # each position's, big-endian
    starts = np.flatnonzero(lengths[: end - 11] == end - 12 - np.arange(end - 11))
    crc = int.from_bytes(data[end - 4 : end], "big")
    return next((int(pos) for pos in starts[::-1] if zlib.crc32(data[pos + 4 : end - 4]) == crc), None)


def colour_chunks(data: bytes) -> tuple[tuple[bytes, bytes], ...]:
    """A PNG's gAMA, cHRM and sRGB chunks as stored, (type, body), the first of each (the
    specification allows one)."""
    found: dict[bytes, bytes] = {}
    for kind, body in _chunks(data):
        if kind in _COLOUR_CHUNKS and kind not in found:
            found[kind] = body
    return tuple(found.items())


def colour_name(chunks: Sequence[tuple[bytes, bytes]]) -> str | None:
    """The colour chunks as a warning names them when they are dropped, or None where dropping
    them changes nothing a viewer shows: an sRGB chunk, or sRGB's gamma and primaries (what a
    file without them is taken for)."""
    stated = dict(chunks)
    if b"sRGB" in stated:
        return None
    named = []
    gamma = stated.get(b"gAMA", b"")
    if len(gamma) == 4 and abs(struct.unpack(">I", gamma)[0] - _SRGB_GAMMA) > 10:
        named.append(f"gamma {struct.unpack('>I', gamma)[0] / 100000:g} (gAMA)")
    primaries = stated.get(b"cHRM", b"")
    if len(primaries) == 32 and struct.unpack(">8I", primaries) != _SRGB_PRIMARIES:
        named.append("primaries (cHRM)")
    return f"PNG {' and '.join(named)}" if named else None


def frame_blends(peek: Callable[[int, int], bytes]) -> tuple[bytes | None, list[int | None]]:
    """An APNG's tRNS body (None where it has none) and, for each frame as Pillow numbers them,
    its fcTL's blend op (0 source, 1 over; None for a default image that is no frame of the
    animation, Pillow's frame 0 then), walking the chunks' headers alone (``peek(at, size)``:
    the file's bytes). Where a chunk is damaged or the file ends, the walk stops there."""
    transparency: bytes | None = None
    blends: list[int | None] = []
    at, seen_data = 8, False
    while True:
        header = peek(at, 8)
        if len(header) < 8:
            break
        length, kind = struct.unpack(">I4s", header)
        if kind == b"IEND" or length > 2**31 - 1:
            break
        if kind == b"tRNS" and not seen_data:
            transparency = peek(at + 8, min(length, 256))
        elif kind == b"fcTL" and length >= 26:
            blend = peek(at + 8 + 25, 1)  # (after sequence, size, place, delay and dispose op)
            blends.append(blend[0] if blend else None)
        elif kind == b"IDAT" and not seen_data:
            seen_data = True
            if not blends:  # no fcTL before it: the default image, Pillow's frame 0
                blends.append(None)
        at += 12 + length
    return transparency, blends


def _chunks(data: _Bytes) -> Iterator[tuple[bytes, _Bytes]]:
    """A PNG's chunks, (type, body), up to IEND or the first one cut short."""
    pos = 8
    while pos + 12 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IEND" or len(body) != length:
            return
        yield kind, body


def _itxt_value(rest: bytes, limit: int) -> bytes | None:
    """The text of an iTXt chunk after its keyword: compression flag and method, language and
    translated keyword (each NUL-ended), then the text, deflated or not; None when unreadable."""
    if len(rest) < 2:
        return None
    flag, method, tail = rest[0], rest[1], rest[2:].split(b"\0", 2)
    if len(tail) != 3:
        return None
    if flag == 0:
        return tail[2]
    if method != 0:
        return None
    inflate = zlib.decompressobj()
    try:
        value = inflate.decompress(tail[2], limit)
    except zlib.error:
        return None
    return None if inflate.unconsumed_tail or not inflate.eof else value


def metadata_chunks(
    xmp: bytes | None, text: Sequence[tuple[bytes, bytes]], comment: bytes | None,
    colour: Sequence[tuple[bytes, bytes]] = (),
) -> list[tuple[bytes, bytes]]:
    """The chunks a PNG output carries them in: the colour chunks (gAMA, cHRM, sRGB) and text
    chunks as they were, the XMP packet as an uncompressed iTXt (as the XMP specification asks), a
    comment as a tEXt ``Comment`` (the PNG specification's keyword; ImageMagick's way with a JPEG's
    comment)."""
    chunks = [*colour, *text]
    if xmp is not None:
        chunks.append((b"iTXt", XMP_KEYWORD + b"\0\0\0\0\0" + xmp))
    if comment is not None:
        chunks.append((b"tEXt", b"Comment\0" + comment))
    return chunks


def text_keywords(text: Sequence[tuple[bytes, bytes]]) -> list[str]:
    """The keywords of text chunks, as a warning names them (Latin-1; a crafted one's unprintable
    characters as ``?``)."""
    keywords = []
    for _, body in text:
        keyword = body.split(b"\0", 1)[0][:79].decode("latin-1")
        keywords.append("".join(c if c.isprintable() else "?" for c in keyword))
    return keywords


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
