"""PNG details Pillow gets wrong for us: 16-bit colour read and write, and the IHDR without decoding.

Pillow reads 16-bit RGB(A) and grey+alpha PNGs as 8-bit and cannot write them. Here the chunks are
parsed and checked (CRC, order, sizes) in Python; inflating and unfiltering, the slow part, runs in
Pillow's C "zip" decoder, asked for the raw bytes (for 48- and 64-bit pixels, once for the high and
once for the low byte of each sample); the writer is numpy + zlib.
"""

from __future__ import annotations

import functools
import itertools
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from geomcli.cpus import available_cpus, share
from geomcli.errors import GeomError
from geomcli.io._base import check_size

if TYPE_CHECKING:
    import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"

# colour type -> samples per pixel; 3 (palette) is Pillow's business
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
_COLOUR_TYPE = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> colour type, for the writer
_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_MAX_CHUNK = 2**31 - 1
# zlib level of the writer: ImageMagick's default for PNG (quality 75: level 7, adaptive filters);
# with libpng's filter heuristic and zlib settings, our files are the size of ImageMagick's
LEVEL = 7


class Ihdr(NamedTuple):  # a NamedTuple: 0.4 ms less at start-up than a frozen dataclass
    width: int
    height: int
    depth: int
    colour_type: int
    interlace: int

    @property
    def channels(self) -> int:
        return _CHANNELS[self.colour_type]

    @property
    def filtered_bytes(self) -> int:
        """The size of the inflated image data: each row (of each Adam7 pass) with its filter byte."""
        passes = _ADAM7 if self.interlace else ((0, 0, 1, 1),)
        bits = self.depth * self.channels
        total = 0
        for y0, x0, dy, dx in passes:
            width, height = -(-(self.width - x0) // dx), -(-(self.height - y0) // dy)
            if width > 0 and height > 0:
                total += height * (1 + -(-width * bits // 8))
        return total

    @property
    def shape(self) -> tuple[int, ...]:
        """The array this PNG decodes to, before palette expansion."""
        if self.channels == 1:
            return (self.height, self.width)
        return (self.height, self.width, self.channels)


def parse_ihdr(data: bytes, name: str) -> Ihdr:
    """The IHDR of a PNG from its first 33 bytes, validated."""
    if len(data) < 33:
        raise GeomError(f"{name}: not a readable PNG (truncated)")
    if data[:8] != SIGNATURE:
        raise GeomError(f"{name}: not a readable PNG (bad signature)")
    length, kind = struct.unpack(">I4s", data[8:16])
    if kind != b"IHDR" or length != 13:
        raise GeomError(f"{name}: not a readable PNG (IHDR is not the first chunk)")
    if zlib.crc32(data[12:29]) != struct.unpack(">I", data[29:33])[0]:
        raise GeomError(f"{name}: not a readable PNG (bad CRC in IHDR)")
    width, height, depth, colour, compression, filtering, interlace = struct.unpack(
        ">IIBBBBB", data[16:29]
    )
    if not (0 < width <= _MAX_CHUNK and 0 < height <= _MAX_CHUNK):
        raise GeomError(f"{name}: not a readable PNG (size {width}x{height})")
    if depth not in _DEPTHS.get(colour, ()):
        raise GeomError(f"{name}: not a readable PNG (bit depth {depth} with colour type {colour})")
    if compression or filtering or interlace > 1:
        raise GeomError(
            f"{name}: not a readable PNG (unknown compression, filter or interlace method)"
        )
    return Ihdr(width, height, depth, colour, interlace)


class Chunks(NamedTuple):
    ihdr: Ihdr
    idat_parts: tuple[memoryview, ...]  # the IDAT bodies, uncopied: only 16-bit decoding joins them
    exif: bytes | None
    frames: int  # from an APNG's acTL; 1 for a plain PNG
    icc: bytes | None = None  # the iCCP profile, inflated
    ppm: tuple[int, int] | None = None  # pHYs in pixels per metre (unit 1 only)
    colour_key: int | tuple[int, ...] | None = None  # tRNS of a grey or RGB image: its transparent value


def read_chunks(data: bytes, name: str) -> Chunks:
    """Walk and check every chunk (CRC, length, IEND present): truncation anywhere is an error."""
    ihdr = parse_ihdr(data, name)
    at = 33
    view = memoryview(data)  # chunks are checked and collected without copying them
    idat: list[memoryview] = []
    exif: bytes | None = None
    icc: bytes | None = None
    ppm: tuple[int, int] | None = None
    colour_key: int | tuple[int, ...] | None = None
    frames = 1
    while True:
        if at + 8 > len(data):
            raise GeomError(f"{name}: not a readable PNG (truncated)")
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        if length > _MAX_CHUNK or not kind.isalpha():
            raise GeomError(f"{name}: not a readable PNG (corrupt chunk at byte {at})")
        end = at + 12 + length
        if end > len(data):
            raise GeomError(f"{name}: not a readable PNG (truncated)")
        body = view[at + 8 : end - 4]
        if zlib.crc32(view[at + 4 : end - 4]) != struct.unpack_from(">I", data, end - 4)[0]:
            raise GeomError(f"{name}: not a readable PNG (bad CRC in {kind.decode('ascii')} chunk)")
        if kind == b"IDAT":
            idat.append(body)
        elif kind == b"eXIf":
            exif = bytes(body)
        elif kind == b"acTL" and len(body) == 8:
            frames = struct.unpack(">I", body[:4])[0]
        elif kind == b"iCCP":
            icc = _inflate_profile(bytes(body))
        elif kind == b"pHYs" and len(body) == 9 and body[8] == 1:
            ppm = struct.unpack(">II", body[:8])
        elif kind == b"tRNS" and ihdr.colour_type in (0, 2) and len(body) == 2 * ihdr.channels:
            key = struct.unpack(f">{ihdr.channels}H", body)
            colour_key = key[0] if ihdr.channels == 1 else key
        elif kind == b"IEND":
            break
        at = end
    if not idat:
        raise GeomError(f"{name}: not a readable PNG (no image data)")
    return Chunks(ihdr, tuple(idat), exif, frames, icc, ppm, colour_key)


# what a stream's PNG may hold besides its image data (text, ICC profile, EXIF, chunk headers)
_STREAM_METADATA = 64 << 20


def stream_size(peek: Callable[[int, int], bytes], name: str, max_pixels: int) -> int:
    """The bytes a PNG at the start of a stream takes, to the end of its IEND chunk: a pipe is read
    that far and no further. ``peek(start, size)`` gives bytes of the stream, reading it as far as
    they go. The IHDR's size is checked against ``max_pixels`` first, and a chunk that would end
    past what such an image can need (twice its rows a frame, stored deflate being barely more,
    and _STREAM_METADATA) is refused before it is read. Where a chunk is damaged or the stream
    ends, the walk stops: read_chunks says what is wrong."""
    ihdr = parse_ihdr(peek(0, 33), name)
    check_size(ihdr.shape, max_pixels, name)
    at, frames = 33, 1
    while True:
        head = peek(at, 8)
        if len(head) < 8:
            return at + len(head)
        length, kind = int.from_bytes(head[:4], "big"), head[4:]
        if length > _MAX_CHUNK or not kind.isalpha():
            return at + 8
        end = at + 12 + length
        if kind == b"IEND":
            return end
        if kind == b"acTL" and length == 8:
            frames = max(frames, int.from_bytes(peek(at + 8, 4), "big"))
        most = 33 + frames * 2 * ihdr.filtered_bytes + _STREAM_METADATA
        if end > most:
            raise GeomError(f"{name}: not a readable PNG (chunks run past {most} bytes, more than a "
                            f"{ihdr.width}x{ihdr.height} image can need)")
        at = end


# Deflate makes at most 258 bytes of 2 bits (a longest match, one bit each for its length and
# distance codes): no stream inflates to more than 1032 times its size
_DEFLATE_MAX_RATIO = 1032


def check_image_data(chunks: Chunks, name: str) -> None:
    """Refuse image data too short for the size the header claims, before any memory is taken
    for the image (a 100-byte file claiming 40000x40000 once took 6 GB, then failed)."""
    ihdr = chunks.ihdr
    if ihdr.filtered_bytes > _DEFLATE_MAX_RATIO * sum(len(part) for part in chunks.idat_parts):
        raise GeomError(f"{name}: not a readable PNG (truncated: too little image data for "
                        f"{ihdr.width}x{ihdr.height})")


# An ICC profile is a few kB; a larger inflated size is a bomb, not a profile
_MAX_PROFILE = 2**26


def _inflate_profile(body: bytes) -> bytes | None:
    """The profile of an iCCP chunk (name, NUL, method 0, zlib data); None if it is damaged."""
    name_end = body.find(b"\0")
    if not 0 < name_end < 80 or len(body) < name_end + 2 or body[name_end + 1] != 0:
        return None
    inflater = zlib.decompressobj()
    try:
        profile = inflater.decompress(body[name_end + 2 :], _MAX_PROFILE)
    except zlib.error:
        return None
    if inflater.unconsumed_tail or not inflater.eof:
        return None
    return profile


def decode_16bit(chunks: Chunks, name: str) -> np.ndarray:
    """Decode a checked 16-bit PNG of colour type 0, 2, 4 or 6 to native uint16, HW or HWC."""
    import numpy as np
    from PIL import Image

    ihdr, idat = chunks.ihdr, b"".join(chunks.idat_parts)
    if ihdr.depth != 16:
        raise GeomError(f"{name}: internal: not a 16-bit PNG")
    size = (ihdr.width, ihdr.height)
    # Each pass asks Pillow's decoder for a mode whose rawmode has the PNG's bits per pixel, so
    # the unfilter step uses the right byte distance; the samples then are plain bytes.
    try:
        if ihdr.colour_type in (0, 4):
            # 2 or 4 bytes per pixel: "LA"/"RGBA" rawmodes copy every byte unchanged
            mode = "LA" if ihdr.colour_type == 0 else "RGBA"
            raw = np.asarray(Image.frombytes(mode, size, idat, "zip", mode, ihdr.interlace))
            samples = raw.reshape(ihdr.height, ihdr.width, -1, 2)
            hi, lo = samples[..., 0], samples[..., 1]
        else:
            mode = "RGB" if ihdr.colour_type == 2 else "RGBA"
            # big-endian data read as "16L" hands out the second (low) byte of each sample
            hi = np.asarray(Image.frombytes(mode, size, idat, "zip", f"{mode};16B", ihdr.interlace))
            lo = np.asarray(Image.frombytes(mode, size, idat, "zip", f"{mode};16L", ihdr.interlace))
    except (ValueError, OSError, zlib.error) as e:
        raise GeomError(f"{name}: not a readable PNG ({_reason(e)})") from e
    out: np.ndarray = (hi.astype(np.uint16) << 8) | lo
    if ihdr.channels == 1:
        out = out.reshape(ihdr.height, ihdr.width)
    return out


def _reason(e: BaseException) -> str:
    text = " ".join(str(e).split())
    if "not enough image data" in text or "truncated" in text:
        return "truncated"
    return text or type(e).__name__


def encode(
    data: np.ndarray,
    *,
    filters: int | list[int] | None = None,
    interlace: bool = False,
    level: int = LEVEL,
    icc: bytes | None = None,
    ppm: tuple[int, int] | None = None,
    exif: bytes | None = None,
    threads: int | None = None,
) -> bytes:
    """A PNG of a uint8/uint16 HW or HWC (1-4 channels) array, byte-identical run to run and
    whatever ``threads``, the threads that share the compression (:func:`deflate_parts`).

    ``filters`` picks the row filter: None chooses per row (smallest sum of absolute differences,
    libpng's heuristic); an int uses one filter; a list cycles through it (the tests use this to
    exercise every filter). ``interlace`` writes Adam7. ``icc`` (a profile), ``ppm`` (pixels
    per metre) and ``exif`` become iCCP, pHYs and eXIf chunks before the image data.
    """
    import numpy as np

    if data.dtype not in (np.uint8, np.uint16) or data.ndim not in (2, 3):
        raise GeomError(f"PNG encoder: cannot hold {data.dtype} shape {data.shape}")
    channels = 1 if data.ndim == 2 else data.shape[2]
    if channels not in _COLOUR_TYPE:
        raise GeomError(f"PNG encoder: cannot hold {channels} channels")
    height, width = data.shape[:2]
    depth = 8 * data.dtype.itemsize
    bpp = channels * data.dtype.itemsize
    pixels = data.reshape(height, width, channels)
    if interlace:
        passes = [pixels[y0::dy, x0::dx] for y0, x0, dy, dx in _ADAM7]
    else:
        passes = [pixels]
    body = bytearray()
    for sub in passes:
        if sub.shape[0] and sub.shape[1]:
            rows = np.ascontiguousarray(sub, dtype=sub.dtype.newbyteorder(">")).view(np.uint8)
            body += _filter_rows(rows.reshape(sub.shape[0], -1), bpp, filters)
    if interlace:
        pieces = [_deflate(bytes(body), level)]
    else:
        row_bytes = width * bpp + 1
        pieces = deflate_parts(rows_of(body, row_bytes), height, row_bytes, level, threads)
    header = struct.pack(
        ">IIBBBBB", width, height, depth, _COLOUR_TYPE[channels], 0, 0, int(interlace)
    )
    extra = b""
    if icc is not None:
        extra += _chunk(b"iCCP", b"ICC profile\0\0" + zlib.compress(icc, 9))
    if ppm is not None:
        extra += _chunk(b"pHYs", struct.pack(">IIB", ppm[0], ppm[1], 1))
    if exif is not None:
        extra += _chunk(b"eXIf", exif.removeprefix(b"Exif\0\0"))
    return b"".join([SIGNATURE, _chunk(b"IHDR", header), extra, *idat_chunks(pieces), _chunk(b"IEND", b"")])


# Adam7 passes: first row, first column, row step, column step
_ADAM7 = (
    (0, 0, 8, 8),
    (0, 4, 8, 8),
    (4, 0, 8, 4),
    (0, 2, 4, 4),
    (2, 0, 4, 2),
    (0, 1, 2, 2),
    (1, 0, 2, 1),
)


def _deflate(
    body: bytes | memoryview, level: int, *, primer: bytes | memoryview = b"", ending: int = zlib.Z_FINISH,
    wbits: int = 15
) -> bytes:
    """Filtered rows compressed as libpng (so ImageMagick) sets zlib for them, Z_FILTERED and
    memLevel 9, or run-length coded (Z_RLE). Level 9, and rows no bigger than a sample, are
    coded both ways and the smaller kept; at levels 1-8 run-length coding is taken where a
    sample shows it as small (:func:`_runs_suffice`): five times faster, and on the whole rows
    at most 1.6% bigger in our measures."""

    def coded(strategy: int) -> bytes:
        compressor = zlib.compressobj(level, zlib.DEFLATED, wbits, 9, strategy, primer)
        return compressor.compress(body) + compressor.flush(ending)

    if not level:
        return coded(zlib.Z_FILTERED)  # stored
    if level == 9 or len(body) <= _SAMPLE_BYTES:
        return min(coded(zlib.Z_FILTERED), coded(zlib.Z_RLE), key=len)
    return coded(zlib.Z_RLE if _runs_suffice(body, level) else zlib.Z_FILTERED)


def _runs_suffice(body: bytes | memoryview, level: int) -> bool:
    """Whether run-length coding compresses these filtered rows as well as string matching,
    judged on slices spread over them (:func:`_slices`): no bigger there, and keeping over a
    quarter of their bytes. A photograph's rows, where string matching finds next to nothing,
    pass; screenshots, plots and text keep under a seventh, and their distant repeats, which
    the slices miss, make string matching 3-50% smaller."""
    sample = _slices(body)

    def size(strategy: int) -> int:
        compressor = zlib.compressobj(level, zlib.DEFLATED, -15, 9, strategy)
        return len(compressor.compress(sample) + compressor.flush())

    runs = size(zlib.Z_RLE)
    return 4 * runs > len(sample) and runs <= size(zlib.Z_FILTERED)


# The sample of :func:`_runs_suffice`: four slices of 8 KiB
_SLICES, _SLICE_BYTES = 4, 1 << 13
_SAMPLE_BYTES = _SLICES * _SLICE_BYTES


def _slices(body: bytes | memoryview) -> bytes:
    """Slices of ``body`` spread evenly over it, joined: a sample of its rows (``body`` is
    longer than the sample: shorter rows are coded both ways whole, see :func:`_deflate`)."""
    step = (len(body) - _SLICE_BYTES) // (_SLICES - 1)
    return b"".join(body[k * step : k * step + _SLICE_BYTES] for k in range(_SLICES))


# --- the image data compressed in parts, side by side -----------------------------------
# Each part's compressor is primed with the 32 KiB of filtered rows before the part (as pigz
# does), so the file is within a few bytes of one stream's size, made in half the time on two
# cores. The parts depend on the image's size alone, never on the thread count: the same image
# gives the same bytes on every machine.
_WINDOW = 1 << 15
# Parts are a power of two in number, up to 64, and each at least this big: the priming rows
# are filtered twice, a cost of a few % at this size.
_PART_BYTES = 1 << 18
_MAX_PARTS = 64


def part_rows(height: int, row_bytes: int) -> list[tuple[int, int]]:
    """The (start, stop) rows of each part of an image of ``height`` filtered rows."""
    count = 1
    while 2 * count <= min(_MAX_PARTS, height) and height * row_bytes >= 2 * count * _PART_BYTES:
        count *= 2
    return list(itertools.pairwise(height * i // count for i in range(count + 1)))


def deflate_parts(
    rows: Callable[[int, int], bytes | memoryview], height: int, row_bytes: int, level: int, threads: int | None
) -> list[bytes]:
    """The zlib stream of an image's ``height`` filtered rows of ``row_bytes`` (filter type
    byte included), compressed part by part (:func:`part_rows`) on up to ``threads`` threads
    (None: every CPU this process may run on), in pieces to write one after the other (one a
    part, the zlib header in the first, the checksum in the last); ``rows(first, stop)`` gives
    the filtered rows ``first`` to ``stop``, as filtered in the whole image."""
    parts = part_rows(height, row_bytes)
    primer = -(-_WINDOW // row_bytes)  # rows that fill the window
    compressed = [b""] * len(parts)
    checksums = [(1, 0)] * len(parts)  # (Adler-32, length) of each part's rows

    def compress(k: int) -> None:
        start, stop = parts[k]
        first = max(0, start - primer)
        data = memoryview(rows(first, stop))
        split = (start - first) * row_bytes
        body = data[split:]
        # a sync flush ends a part on a byte boundary, with no final block: the parts concatenate
        ending = zlib.Z_FINISH if k == len(parts) - 1 else zlib.Z_SYNC_FLUSH
        compressed[k] = _deflate(body, level, primer=data[:split][-_WINDOW:], ending=ending, wbits=-15)
        checksums[k] = (zlib.adler32(body), len(body))

    share(range(len(parts)), compress, threads or available_cpus())
    compressed[0] = zlib.compressobj(level).flush()[:2] + compressed[0]  # the zlib header: it names the level
    compressed[-1] += struct.pack(">I", functools.reduce(adler32_combine, checksums)[0])
    return compressed


# IDAT chunks are cut at this size: a chunk's length must stay below 2**31, and a reader's
# buffers small (libpng writes 8 KiB, Pillow 64 KiB)
_IDAT_BYTES = 1 << 20


def idat_chunks(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The IDAT chunks holding a zlib stream given in pieces, none over _IDAT_BYTES."""
    for piece in pieces:
        view = memoryview(piece)
        for start in range(0, len(view), _IDAT_BYTES):
            yield _chunk(b"IDAT", view[start : start + _IDAT_BYTES])


def rows_of(filtered: bytes | bytearray | memoryview, row_bytes: int) -> Callable[[int, int], memoryview]:
    """:func:`deflate_parts`' ``rows`` for an image's filtered rows held whole."""
    view = memoryview(filtered)
    return lambda first, stop: view[first * row_bytes : stop * row_bytes]


def adler32_combine(first: tuple[int, int], second: tuple[int, int]) -> tuple[int, int]:
    """The (Adler-32, length) of two byte strings one after the other, from theirs (RFC 1950:
    A is 1 + the sum of the bytes, B the sum of the As after each byte, both modulo 65521)."""
    (adler1, length1), (adler2, length2) = first, second
    a1, b1, a2, b2 = adler1 & 0xFFFF, adler1 >> 16, adler2 & 0xFFFF, adler2 >> 16
    a = (a1 + a2 - 1) % _ADLER_BASE
    b = (b1 + b2 + length2 * (a1 - 1)) % _ADLER_BASE
    return (b << 16) | a, length1 + length2


_ADLER_BASE = 65521


def split_idat(png: bytes) -> tuple[bytes, bytes, bytes]:
    """A well-formed PNG (our encoder's) as the bytes before its first IDAT, its IDAT bodies
    joined (the zlib stream), and the bytes after its last IDAT."""
    at, first, last, stream = len(SIGNATURE), 0, 0, []
    while at < len(png):
        length, kind = struct.unpack_from(">I4s", png, at)
        if kind == b"IDAT":
            first = first or at
            stream.append(png[at + 8 : at + 8 + length])
            last = at + 12 + length
        at += 12 + length
    return png[:first], b"".join(stream), png[last:]


def stored(stream: bytes) -> bytes:
    """The data of a zlib stream made at level 0: stored blocks, each byte-aligned."""
    view, at, data = memoryview(stream), 2, []
    while True:
        final, length, check = view[at] & 1, *struct.unpack_from("<HH", view, at + 1)
        if view[at] & 6 or length ^ check != 0xFFFF:
            raise GeomError("PNG encoder: internal: the filtered rows are not stored uncompressed")
        data.append(view[at + 5 : at + 5 + length])
        at += 5 + length
        if final:
            return b"".join(data)


def with_image_data(png: bytes, height: int, pieces: list[bytes]) -> Iterator[bytes]:
    """A PNG (our encoder's), in pieces to write, with the zlib stream in ``pieces`` as its
    image data, for an image ``height`` rows high: its other chunks are kept."""
    before, _, after = split_idat(png)
    ihdr = bytearray(before[16:29])  # IHDR is the first chunk, 13 bytes
    ihdr[4:8] = struct.pack(">I", height)
    yield before[:8] + _chunk(b"IHDR", bytes(ihdr)) + before[33:]
    yield from idat_chunks(pieces)
    yield after


def _chunk(kind: bytes, body: bytes | memoryview) -> bytes:
    crc = zlib.crc32(body, zlib.crc32(kind))
    return b"".join((struct.pack(">I", len(body)), kind, body, struct.pack(">I", crc)))


def _filter_rows(rows: np.ndarray, bpp: int, filters: int | list[int] | None) -> bytes:
    """Filter (h, stride) uint8 rows; each output row is prefixed by its filter type byte."""
    import numpy as np

    height, stride = rows.shape
    out = np.empty((height, stride + 1), np.uint8)
    chunk = 256  # rows at a time: bounds the five candidates' memory on large images
    for start in range(0, height, chunk):
        # uint8 arithmetic wraps modulo 256, as the filters are defined
        x = rows[start : start + chunk]
        b = np.empty_like(x)  # the row above each row
        b[0] = rows[start - 1] if start else 0
        b[1:] = x[:-1]
        a = np.zeros_like(x)
        a[:, bpp:] = x[:, :-bpp]  # the byte one pixel to the left
        c = np.zeros_like(x)
        c[:, bpp:] = b[:, :-bpp]
        candidates = np.empty((5, *x.shape), np.uint8)
        candidates[0] = x
        np.subtract(x, a, out=candidates[1])
        np.subtract(x, b, out=candidates[2])
        np.subtract(x, (a & b) + ((a ^ b) >> 1), out=candidates[3])  # floor((a + b) / 2) without overflow
        np.subtract(x, _paeth(a, b, c), out=candidates[4])
        rows_here = np.arange(len(x))
        if filters is None:
            # libpng's heuristic: the bytes as signed values, smallest sum of magnitudes wins
            # (abs of int8 -128 stays -128, whose unsigned view is the right 128)
            magnitude = np.abs(candidates.view(np.int8)).view(np.uint8)
            chosen = magnitude.sum(axis=2, dtype=np.int64).argmin(axis=0)
        elif isinstance(filters, int):
            chosen = np.full(len(x), filters)
        else:
            chosen = np.array([filters[(start + i) % len(filters)] for i in range(len(x))])
        out[start : start + chunk, 0] = chosen
        out[start : start + chunk, 1:] = candidates[chosen, rows_here]
    return out.tobytes()


def _paeth(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The Paeth predictor of uint8 neighbours: whichever of a, b, c is nearest a + b - c."""
    import numpy as np

    wide_a, wide_b, wide_c = a.astype(np.int16), b.astype(np.int16), c.astype(np.int16)
    pa = np.abs(wide_b - wide_c)  # |p - a| with p = a + b - c
    pb = np.abs(wide_a - wide_c)
    pc = np.abs(wide_a + wide_b - 2 * wide_c)
    return np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
