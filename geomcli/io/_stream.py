"""Standard input and pipes, which have no size and no seeking: read into one buffer, no further
than the header declares (.npy, PNG, BMP, GIF, WebP; its pixels checked against ``max_pixels``
first) or else than ``max_pixels`` elements of the widest dtype could need.

Why this is ours: the libraries want a seekable file. Pillow's Image.open reads a pipe to its end
into memory before it looks at it, and np.load knows no limit, so junk after an image (300 MB of
zeros after a 334-byte BMP took 330 MB), an endless pipe, or a header declaring more than
--max-pixels would be read whole before any library could refuse it.
"""

from __future__ import annotations

import io
import os
import struct
import time
from collections.abc import Callable
from typing import IO

from geomcli.errors import GeomError
from geomcli.io._base import SNIFF_BYTES, check_size

# the widest element (complex128), so a limit in elements bounds a stream's bytes; plus room for
# headers and metadata
_STREAM_BYTES_PER_ELEMENT = 16
_STREAM_SLACK = 1 << 20


def byte_limit(max_pixels: int) -> int:
    """The most bytes an input of ``max_pixels`` elements of the widest dtype could need."""
    return max_pixels * _STREAM_BYTES_PER_ELEMENT + _STREAM_SLACK
# how long a named FIFO may stay without a writer before it counts as empty
_WRITER_GRACE = 2.0
_STREAM_CHUNK = 1 << 22
# how long the bytes after an input are waited for (cat a.png b.png | writes b at once): a writer
# may keep its pipe open after its one input (a parent that writes it, then waits for us to exit)
_FOLLOWING_WAIT = 0.2


class Stream:
    """A stream read into one buffer that grows as needed, never past ``limit`` bytes (what
    ``max_pixels`` elements could need) and, once the format is known, never past the size its
    header declares: junk after a .npy or a PNG's IEND is not read.

    The buffer is a BytesIO, whose getvalue() hands over the bytes it holds without a copy: a
    list of pieces joined at the end held everything twice (2 GB of zeros took 4.2 GB).

    ``fifo``: a read of a FIFO that no writer has open ends at once, empty; one whose writer is
    about to open it gets ``_WRITER_GRACE`` seconds to do so (one already waiting in open() is
    there already). A FIFO nobody ever writes to is an empty input, not a hung run.
    """

    def __init__(self, f: IO[bytes], name: str, max_pixels: int, fifo: bool = False, *,
                 limit: int | None = None) -> None:
        self._f = f
        self._name = name
        self._max_pixels = max_pixels
        # ``limit``: a bound of the caller's in bytes, for what is not an array (a --files-from list)
        self._limit = byte_limit(max_pixels) if limit is None else limit
        self._past_limit = (f", more than {max_pixels} elements could need; raise the limit with --max-pixels or "
                            "GEOMCLI_MAX_PIXELS" if limit is None else "; read no further")
        self._fifo = fifo
        self._deadline = time.monotonic() + _WRITER_GRACE
        self._buffer = io.BytesIO()
        self._ended = False
        # (whole) where the input ends as its header declares, and the first bytes after it
        self.end: int | None = None
        self.following = b""

    def peek(self, start: int, size: int) -> bytes:
        """Bytes ``start`` to ``start + size`` of the stream; fewer where it ends before."""
        self._fill(start + size)
        self._buffer.seek(start)
        part = self._buffer.read(size)
        self._buffer.seek(0, io.SEEK_END)
        return part

    def whole(self, fmt: str) -> bytes:
        """The stream to its end, or to the end its ``fmt`` header declares (checked against
        ``max_pixels`` before the data is read). The stream is not to be used after this."""
        if fmt == "npy":
            from geomcli.io import _npy

            end = _npy.stream_size(self.peek, self._name, self._max_pixels)
            # exact, its elements checked against max_pixels: wide strings may take more bytes
            self._limit = max(self._limit, end)
        elif fmt in ("png", "bmp", "gif", "webp"):
            end = image_size(fmt, self.peek, self._name, self._max_pixels) or self._limit + 1
        else:
            end = self._limit + 1
        self._fill(end)
        if end <= self._limit:
            # a few bytes past it, to see whether a second input follows (cat a.png b.png |)
            self._limit = max(self._limit, end + SNIFF_BYTES)
            self.end, self.following = end, self._following(end, SNIFF_BYTES)
        self._buffer.truncate(end)
        return self._buffer.getvalue()

    def _following(self, start: int, size: int) -> bytes:
        """peek(start, size) of what the stream holds or gets within _FOLLOWING_WAIT: a wait for
        more, as peek's, hung a run whose writer kept the pipe open after its one PNG or .npy."""
        try:
            descriptor = self._f.fileno()
        except (AttributeError, OSError, ValueError):  # io.BytesIO and the like, which never wait
            return self.peek(start, size)
        import select

        deadline = time.monotonic() + _FOLLOWING_WAIT
        blocking = os.get_blocking(descriptor)
        os.set_blocking(descriptor, False)
        try:
            held = self._buffer.tell()
            while held < start + size and not self._ended:
                # what the reader has buffered comes first; None: nothing yet (a non-blocking read)
                piece = self._f.read(start + size - held)
                if piece is None:
                    left = deadline - time.monotonic()
                    if left <= 0 or not select.select([descriptor], [], [], left)[0]:
                        break
                    continue
                self._ended = not piece
                self._buffer.write(piece)
                held += len(piece)
        finally:
            os.set_blocking(descriptor, blocking)
        self._buffer.seek(start)
        part = self._buffer.read(size)
        self._buffer.seek(0, io.SEEK_END)
        return part

    def _fill(self, size: int) -> None:
        """Read until the buffer holds ``size`` bytes or the stream ends; a GeomError once it
        holds more than the limit."""
        held = self._buffer.tell()
        target = min(size, self._limit + 1)
        while held < target and not self._ended:
            piece = self._f.read(min(_STREAM_CHUNK, target - held))
            if not piece and self._fifo and not held and time.monotonic() < self._deadline:
                time.sleep(0.05)
                continue
            self._ended = not piece
            self._buffer.write(piece)
            held += len(piece)
        if held > self._limit:
            raise GeomError(f"{self._name}: more than {self._limit} bytes{self._past_limit}")


# what a BMP's header may declare beyond its pixels (an ICC profile after them), read from a pipe
_BMP_SLACK = 1 << 20


def image_size(fmt: str, peek: Callable[[int, int], bytes], name: str, max_pixels: int) -> int | None:
    """The bytes a PNG, BMP, GIF or WebP at the start of a stream takes, as its header declares: a
    pipe is read that far and no further (junk after it was read up to what ``max_pixels``
    elements could need: a 334-byte BMP and 300 MB of zeros took 330 MB). The declared size in
    pixels (PNG's IHDR, BMP's, GIF's screen, WebP's canvas or first frame) is checked against
    ``max_pixels`` first. None where the header cannot tell (it is damaged, or
    another compression): the stream is then read to its end, as before, for Pillow to judge."""
    if fmt == "png":
        return _png_size(peek, name, max_pixels)
    if fmt == "webp":
        head = peek(0, 30)
        if len(head) < 12 or head[8:12] != b"WEBP":
            return None
        canvas = _webp_canvas(head)
        if canvas is not None:
            check_size(canvas, max_pixels, name)
        size = int.from_bytes(head[4:8], "little")
        return 8 + size + (size & 1)
    if fmt == "bmp":
        return _bmp_size(peek(0, 54), name, max_pixels)
    if fmt == "gif":
        return _gif_size(peek, name, max_pixels)
    return None


# what a piped PNG may hold besides its image data (text, ICC profile, EXIF, chunk headers)
_PNG_METADATA = 64 << 20


def _png_size(peek: Callable[[int, int], bytes], name: str, max_pixels: int) -> int:
    """To the end of its IEND chunk, walking its chunks. A chunk that would end past what an image
    of its IHDR's size can need (twice its rows a frame, Adam7's or not, stored deflate being
    barely more, and _PNG_METADATA) is refused before it is read. Where a chunk is damaged or the
    stream ends, the walk stops: Pillow says what is wrong."""
    head = peek(0, 33)
    if len(head) < 33 or head[12:16] != b"IHDR":
        return len(head)
    width, height, depth, colour = struct.unpack(">IIBB", head[16:26])
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(colour, 4)
    check_size((height, width) if channels == 1 else (height, width, channels), max_pixels, name)
    # each row and its filter byte; Adam7's passes have fewer than 2 rows an image row, none wider
    rows = (2 * height + 7) * (-(-width * depth * channels // 8) + 1)
    at, frames = 33, 1
    while True:
        chunk = peek(at, 8)
        if len(chunk) < 8:
            return at + len(chunk)
        length, kind = int.from_bytes(chunk[:4], "big"), chunk[4:]
        if length > 2**31 - 1 or not kind.isalpha():
            return at + 8
        end = at + 12 + length
        if kind == b"IEND":
            return end
        if kind == b"acTL" and length == 8:
            frames = max(frames, int.from_bytes(peek(at + 8, 4), "big"))
        most = 33 + frames * 2 * rows + _PNG_METADATA
        if end > most:
            raise GeomError(f"{name}: not a readable PNG (chunks run past {most} bytes, more than a "
                            f"{width}x{height} image can need)")
        at = end


def _webp_canvas(head: bytes) -> tuple[int, int] | None:
    """The (height, width) a WebP's first chunk declares: VP8X's canvas, a VP8L or VP8 frame's
    size (RFC 9649); None where it is none of them."""
    kind, data = head[12:16], head[20:30]
    if len(data) < 10:
        return None
    if kind == b"VP8X":
        return 1 + int.from_bytes(data[7:10], "little"), 1 + int.from_bytes(data[4:7], "little")
    if kind == b"VP8L" and data[0] == 0x2F:
        bits = int.from_bytes(data[1:5], "little")
        return 1 + (bits >> 14 & 0x3FFF), 1 + (bits & 0x3FFF)
    if kind == b"VP8 " and data[3:6] == b"\x9d\x01\x2a":
        return int.from_bytes(data[8:10], "little") & 0x3FFF, int.from_bytes(data[6:8], "little") & 0x3FFF
    return None


def _bmp_size(head: bytes, name: str, max_pixels: int) -> int | None:
    """Its header, palette and pixels: rows of 4-byte multiples, or RLE's 2 bytes a pixel at most
    and 2 a row for its ends; with a declared file size up to _BMP_SLACK more."""
    if len(head) < 30:
        return None
    declared, offset, info = (int.from_bytes(head[at : at + 4], "little") for at in (2, 10, 14))
    if info == 12:
        width, height = int.from_bytes(head[18:20], "little"), int.from_bytes(head[20:22], "little")
        bits, compression = int.from_bytes(head[24:26], "little"), 0
    elif info >= 40 and len(head) >= 34:
        width = int.from_bytes(head[18:22], "little", signed=True)
        height = abs(int.from_bytes(head[22:26], "little", signed=True))
        bits, compression = int.from_bytes(head[28:30], "little"), int.from_bytes(head[30:34], "little")
    else:
        return None
    if width <= 0 or not 0 < bits <= 64:
        return None
    check_size((height, width), max_pixels, name)
    if compression in (0, 3, 6):
        pixels = -(-width * bits // 32) * 4 * height
    elif compression in (1, 2):
        pixels = 2 * width * height + 2 * height + 2
    else:
        return None
    end = offset + pixels
    return max(end, min(declared, end + _BMP_SLACK))


_GIF_WINDOW = 1 << 16


def _gif_size(peek: Callable[[int, int], bytes], name: str, max_pixels: int) -> int | None:
    """To its trailer, walking its blocks (:func:`gif_walk`), its screen checked first."""
    head = peek(0, 13)
    if len(head) < 13:
        return len(head)
    width, height = int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    check_size((height, width), max_pixels, name)
    return gif_walk(peek)


def gif_frame_ends(peek: Callable[[int, int], bytes]) -> list[tuple[int, int]]:
    """Each frame's right and bottom edge (x + width, y + height) as its image descriptor declares
    them, to where the blocks can be walked."""
    descriptors: list[bytes] = []
    gif_walk(peek, descriptors)
    return [(int.from_bytes(d[1:3], "little") + int.from_bytes(d[5:7], "little"),
             int.from_bytes(d[3:5], "little") + int.from_bytes(d[7:9], "little")) for d in descriptors]


def gif_walk(peek: Callable[[int, int], bytes], descriptors: list[bytes] | None = None) -> int:
    """The bytes to a GIF's trailer, walking its blocks: a colour table's size is in its flags,
    sub-blocks carry their lengths. Where it is damaged or ends first, the bytes seen so far (and
    one more). ``descriptors`` gets each image descriptor's 10 bytes, walking past junk to the
    next block as Pillow does."""
    head = peek(0, 13)
    if len(head) < 13:
        return len(head)
    at = 13 + (3 << ((head[10] & 7) + 1) if head[10] & 0x80 else 0)
    while True:
        kind = peek(at, 1)
        if kind == b";":
            return at + 1
        if kind == b"!":
            at += 2
        elif kind == b",":
            descriptor = peek(at, 10)
            if len(descriptor) < 10:
                return at + len(descriptor)
            if descriptors is not None:
                descriptors.append(descriptor)
            flags = descriptor[9]
            at += 10 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0) + 1  # and the LZW code size
        elif kind and descriptors is not None:
            # Pillow passes over bytes that start no block, a frame after them still a frame
            window = peek(at, _GIF_WINDOW)
            starts = [found for found in map(window.find, (b"!", b",", b";")) if found >= 0]
            at += min(starts, default=len(window))
            if not starts and len(window) < _GIF_WINDOW:
                return at
            continue
        else:
            return at + len(kind)  # junk or the end: Pillow says what is wrong
        while True:  # sub-blocks, to an empty one, walked a window at a time (one peek per
            # sub-block took 0.85 s for 2 MB of 1-byte sub-blocks; it reads up to 64 KiB ahead)
            window = peek(at, _GIF_WINDOW)
            step = 0
            while step < len(window) and window[step]:
                step += 1 + window[step]
            if step < len(window):  # the empty one
                at += step + 1
                break
            at += step
            if len(window) < _GIF_WINDOW:  # the stream ends first
                return at
