"""PNG, JPEG, BMP, GIF and WebP through Pillow (imported here only); the samples of a 16-bit PNG,
which Pillow reads as 8-bit, through imagecodecs (_png)."""

from __future__ import annotations

import io
import os
import struct
import threading
import warnings
import zlib
from collections.abc import Callable, Iterator
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
    import mmap

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
}
# the modes read_picture keeps as Pillow images: their arrays are uint8 HW or HWC
_PICTURE_MODES = {"L", "LA", "RGB", "RGBA"}


def read_header(
    source: str | bytes, name: str, fmt: str, auto_orient: bool, frames: str | None = None
) -> Header:
    """The shape, dtype and layout :func:`read` returns with the same options, from the header:
    for an animation, ``frames="all"`` is the frames stacked on a new first axis, ``"first"`` one
    frame, and None refuses it as :func:`read` does. (Stacked frames take the first frame's mode;
    :func:`read` makes them RGBA when a later frame adds transparency, which only decoding them
    can tell.)"""
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
        if head is not None and _png.sixteen_bit(head):
            if stacked:
                raise GeomError(_NO_16BIT_FRAMES.format(name=name))
            channels = _png.channels(head)
            shape = (height, width) if channels == 1 else (height, width, channels)
            dtype = np.dtype(np.uint16)
        else:
            mode, _ = _target_mode(im)
            name_of_dtype, channels = _KEPT[mode]
            dtype = np.dtype(name_of_dtype)
            shape = (height, width) if channels == 1 else (height, width, channels)
        if stacked:
            shape = (count, *shape)
            return Header(fmt, shape, dtype, count, file_size, "NHWC" if len(shape) == 4 else None)
        if auto_orient and _orientation(im, name) in (5, 6, 7, 8):
            shape = (shape[1], shape[0], *shape[2:])
    return Header(fmt, shape, dtype, count, file_size, image_layout(shape))


_NO_16BIT_FRAMES = "{name}: --frames all: 16-bit animated PNGs are not supported"


def read(
    source: str | bytes, name: str, fmt: str, max_pixels: int, auto_orient: bool, frames: str | None = None,
    *, picture: bool = False,
) -> Loaded | Picture:
    """``frames``: None refuses an animation, ``first`` takes its first frame, ``all`` stacks
    every frame on a leading axis. ``picture``: an 8-bit image (see _PICTURE_MODES) comes back
    as a Picture, without numpy; any other as a Loaded array."""
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
        if isinstance(source, bytes):
            scan_end = _check_jpeg_data(source, name)
        else:
            with _mapped(source) as mapped:  # pages past the first EOI are never read
                scan_end = _check_jpeg_data(mapped, name)
    decoded: AbstractContextManager[str | bytes | IO[bytes]]
    decoded = nullcontext(source) if scan_end is None else _ended_jpeg(source, scan_end)
    with decoded as opened:
        return _decoded(opened, name, fmt, src, max_pixels, auto_orient, frames, picture)


def _decoded(
    source: str | bytes | IO[bytes], name: str, fmt: str, src: str, max_pixels: int, auto_orient: bool,
    frames: str | None, picture: bool,
) -> Loaded | Picture:
    """:func:`read`'s decoding, once the PNG's chunks or the JPEG's scans are checked."""
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
                return _read_frames(im, name, fmt, src, count, max_pixels, notes)
            notes.append(f"frame 1 of {count} (--frames first)")
        if sixteen_bit:
            assert isinstance(source, bytes)
            return _read_png16(im, source, name, src, max_pixels, auto_orient, notes, pages)
        mode, note = _target_mode(im)
        if mode == im.mode and "transparency" in im.info:
            # a colour key (PNG tRNS on grey or RGB): the values are kept, the key is not
            notes.append(_colour_key_note(im.info["transparency"]))
        _, channels = _KEPT[mode]
        width, height = im.size
        check_size((height, width, channels), max_pixels, name)
        orientation = _orientation(im, name) if auto_orient else 1
        metadata = _metadata(im.info, orientation)
        try:
            im.load()
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
                kept: Picture | None = Picture(im, fmt, src, (), metadata, pages)
            else:
                import numpy as np

                kept, data = None, np.asarray(im)
        except _DECODE_ERRORS as e:
            if not raised_in(e, "PIL"):
                raise
            raise GeomError(f"{name}: not a readable {fmt.upper()} ({_reason(e)})") from e
    if kept is not None:
        return kept._replace(notes=tuple(notes))  # with the notes Pillow's warnings added on closing
    if data.dtype.byteorder not in ("=", "|"):
        data = data.astype(data.dtype.newbyteorder("="))  # I;16B: same values, native order
    return Loaded(data, fmt, image_layout(data.shape), src, tuple(notes), metadata, pages)


# SOF markers -> the fewest bits of entropy-coded data that code one unit (an 8x8 block of one
# component; a sample for lossless): no Huffman code is shorter than 1 bit, and a sequential
# block has two (its DC difference, then an end-of-block or AC code); a progressive block has at
# least its DC code in the first DC scan; a lossless sample its difference code
_LEAST_BITS = {0xC0: 2, 0xC1: 2, 0xC2: 1, 0xC3: 1, 0xC9: 2, 0xCA: 1, 0xCB: 1}
# Arithmetic coding (SOF9-11) can code a block in far less than a bit (196 bytes of zeros decode
# as a 20000x20000 frame: 1.2 GB, 1.1 s), so no size of file bounds its frame. A frame of more
# than this many pixels is held to the Huffman figures above, which real pictures exceed many
# times (1-2 bits a pixel); a smaller one is read whatever its data (a flat page codes to a few
# bytes), costing at most what a real picture of its size does
_ARITHMETIC_UNBOUNDED_PIXELS = 1 << 24
_ARITHMETIC = {0xC9, 0xCA, 0xCB}
_LOSSLESS = {0xC3, 0xCB}
_PROGRESSIVE = {0xC2, 0xCA}
# libjpeg's MAX_COMPONENTS: it refuses a frame of more
_MOST_COMPONENTS = 10
# one-scan Huffman frames, whose data Pillow is given without its EOI (see _ended_jpeg)
_SEQUENTIAL_HUFFMAN = {0xC0, 0xC1}
_START_OF_SCAN, _END_OF_IMAGE = 0xDA, 0xD9
# markers that stand alone, without a length: TEM, RST0-7, SOI, EOI
_NO_LENGTH = {0x01, *range(0xD0, 0xDA)}


def _check_jpeg_data(data: bytes | mmap.mmap, name: str) -> int | None:
    """Refuse a JPEG whose entropy-coded data is too short for the frame its SOF declares, or
    whose scans stop before every component (and, progressive, every coefficient) is coded,
    before it is decoded: libjpeg fills what is missing with grey and only warns, which Pillow
    does not pass on (a 335-byte file declaring 40000x40000 took 4.7 GB and gave 1.6 GB of grey;
    a file cut in its scans with an EOI appended was read as a picture grey from the cut on).

    What this cannot see: a progressive file cut inside one of its last scans (their headers
    are all there; libjpeg leaves the rest of that scan's refinement out), and a one-scan file
    cut within its last blocks (see _SCAN_RUNOUT). Both are read with those blocks wrong.

    The data of every scan up to the first EOI is counted (an MPO's later images, and anything
    after, are not), with its restart markers and stuffed bytes: more than it holds, never less.
    Returns where the data of a one-scan Huffman frame that has its EOI ends (for _ended_jpeg),
    else None.
    """
    import re

    # the end of a scan's data: the next marker other than RSTn (FF 00 is a stuffed FF)
    next_marker = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")
    least_bits, size, sof = 0, (0, 0), 0
    # component id -> the coefficients its scans code to the last bit, one bit each (bit k for
    # coefficient k; bit 0 alone for a sequential or lossless frame, whose scans code them all)
    coded_bits: dict[int, int] = {}
    coded, scans = 0, 0
    scan_end, ended = 0, False
    at = 2  # after SOI
    while at + 2 <= len(data):
        if data[at] != 0xFF:  # junk between segments, which libjpeg skips too
            at = data.find(b"\xff", at)
            if at < 0:
                break
            continue
        marker = data[at + 1]
        if marker == _END_OF_IMAGE:
            ended = True
            break
        if marker == 0xFF:  # a fill byte before a marker
            at += 1
            continue
        if marker in _NO_LENGTH:
            at += 2
            continue
        if at + 4 > len(data):
            break
        end = at + 2 + int.from_bytes(data[at + 2 : at + 4], "big")
        if marker in _LEAST_BITS and not least_bits:
            least_bits, size, components = _frame_bits(marker, data[at + 4 : end])
            if len(components) > _MOST_COMPONENTS:
                raise GeomError(f"{name}: not a readable JPEG (its frame has {len(components)} components; "
                                f"libjpeg reads at most {_MOST_COMPONENTS})")
            sof = marker
            coded_bits = dict.fromkeys(components, 0)
        if marker == _START_OF_SCAN:
            scans += 1
            _note_scan(data[at + 4 : end], coded_bits, sof in _PROGRESSIVE)
        at = end
        if marker == _START_OF_SCAN:
            found = next_marker.search(data, at)
            end = len(data) if found is None else found.start()
            coded += end - at
            at = scan_end = end
    height, width = size
    if 8 * coded < least_bits:
        if sof in _ARITHMETIC:
            if height * width > _ARITHMETIC_UNBOUNDED_PIXELS:
                raise GeomError(
                    f"{name}: arithmetic-coded JPEG with {coded} bytes of image data for {width}x{height}, fewer "
                    f"than geomcli reads for a frame over {_ARITHMETIC_UNBOUNDED_PIXELS} pixels "
                    f"({-(-least_bits // 8)}): arithmetic coding bounds no frame by its data"
                )
        else:
            raise GeomError(f"{name}: not a readable JPEG (truncated: too little image data for {width}x{height})")
    whole = (1 << 64) - 1 if sof in _PROGRESSIVE else 1
    if least_bits and any(bits != whole for bits in coded_bits.values()):
        raise GeomError(f"{name}: not a readable JPEG (truncated: its scans stop before the whole "
                        f"{width}x{height} frame is coded)")
    # (a file without its EOI is left to Pillow, which says it is truncated)
    return scan_end if ended and sof in _SEQUENTIAL_HUFFMAN and scans == 1 else None


def _note_scan(header: bytes, coded_bits: dict[int, int], progressive: bool) -> None:
    """Mark in ``coded_bits`` what a scan (a SOS segment's body) codes to the last bit: in a
    progressive frame, coefficients Ss to Se of its components when Al is 0 (each encoder's
    script ends every coefficient so); in another, that it names them (its Ss, Se and Al are
    fixed by the standard, but baseline files with all three 0 exist, and libjpeg reads them).
    A malformed header marks nothing."""
    count = header[0] if header else 0
    if len(header) < 4 + 2 * count:
        return
    ss, se, approximation = header[1 + 2 * count : 4 + 2 * count]
    if progressive and (approximation & 15 or ss > se):
        return
    bits = (1 << (min(se, 63) + 1)) - (1 << ss) if progressive else 1
    for component in header[1 : 1 + 2 * count : 2]:
        if component in coded_bits:
            coded_bits[component] |= bits


def _frame_bits(marker: int, frame: bytes) -> tuple[int, tuple[int, int], tuple[int, ...]]:
    """The fewest bits of entropy-coded data that can code this frame (a SOF segment's body: see
    _LEAST_BITS), its (height, width) and component ids; 0 bits when the frame is malformed, for
    Pillow to say so."""
    if len(frame) < 6 or len(frame) < 6 + 3 * frame[5]:
        return 0, (0, 0), ()
    height, width = int.from_bytes(frame[1:3], "big"), int.from_bytes(frame[3:5], "big")
    sampling = [(frame[7 + 3 * i] >> 4, frame[7 + 3 * i] & 15) for i in range(frame[5])]
    components = tuple(frame[6 + 3 * i] for i in range(frame[5]))
    if not sampling or min(min(pair) for pair in sampling) == 0:
        return 0, (height, width), components
    most_h, most_v = max(h for h, _ in sampling), max(v for _, v in sampling)
    units = 0
    for h, v in sampling:
        # a component's size, from the frame's and its sampling factors (T.81 A.1.1)
        columns, rows = -(-width * h // most_h), -(-height * v // most_v)
        units += columns * rows if marker in _LOSSLESS else -(-columns // 8) * -(-rows // 8)
    return _LEAST_BITS[marker] * units, (height, width), components


# after a one-scan frame's data: 7 bytes of 1 bits (FF 00 is a stuffed FF), no marker. libjpeg
# (64-bit) fills its bit buffer to 57 bits or suspends for more data, so a whole scan's last code
# can need 7 bytes past the data (with 6, 148 of 1500 small good files were refused); it never
# decodes them. A cut scan decodes them as bad codes (a warning), each 17 bits read as a zero DC
# difference or an end of block, then runs out (Pillow: "truncated"). So 56 bits complete at most
# the block cut in and one more (three codes): a file cut within its last two blocks' data (a
# 4:2:0 MCU's Cb and Cr; a few bytes of a picture, more of a flat one) is read, those blocks
# flat. libjpeg takes any bits as some code, so no runout can prevent that
_SCAN_RUNOUT = b"\xff\x00" * 7


def _ended_jpeg(source: str | bytes, scan_end: int) -> IO[bytes]:
    """The JPEG Pillow decodes: its bytes to the end of its one scan's data, then _SCAN_RUNOUT.

    libjpeg meeting a marker (the EOI appended to a cut file) while blocks remain fills them
    with grey and only warns, which Pillow ignores. Without a marker it waits for more data
    instead, and Pillow then says "image file is truncated". A whole scan never reaches the
    end: libjpeg looks for its EOI, finds no more data, and Pillow, which has every row,
    accepts the image. (A cut within the last two blocks is not seen: see _SCAN_RUNOUT.)
    """
    if isinstance(source, bytes):
        return io.BytesIO(source[:scan_end] + _SCAN_RUNOUT)
    return io.BufferedReader(_EndedFile(source, scan_end, _SCAN_RUNOUT))


class _EndedFile(io.RawIOBase):
    """A file's first ``end`` bytes, then ``tail``: read, never copied."""

    def __init__(self, path: str, end: int, tail: bytes) -> None:
        self._f = open(path, "rb")  # noqa: SIM115 (closed with this object)
        self._end, self._tail, self._at = end, tail, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        out = memoryview(buffer).cast("B")
        if self._at < self._end:
            self._f.seek(self._at)
            count = self._f.readinto(out[: self._end - self._at]) or 0
        else:
            part = self._tail[self._at - self._end : self._at - self._end + len(out)]
            out[: len(part)] = part
            count = len(part)
        self._at += count
        return count

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._end + len(self._tail)}[whence]
        self._at = max(0, base + offset)
        return self._at

    def tell(self) -> int:
        return self._at

    def close(self) -> None:
        self._f.close()
        super().close()


# what a BMP's header may declare beyond its pixels (an ICC profile after them), read from a pipe
_BMP_SLACK = 1 << 20


def stream_size(fmt: str, peek: Callable[[int, int], bytes], name: str, max_pixels: int) -> int | None:
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
    """To its trailer, walking its blocks: a colour table's size is in its flags, sub-blocks carry
    their lengths. Where it is damaged or ends first, the bytes seen so far (and one more)."""
    head = peek(0, 13)
    if len(head) < 13:
        return len(head)
    width, height = int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    check_size((height, width), max_pixels, name)
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
            flags = descriptor[9]
            at += 10 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0) + 1  # and the LZW code size
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


def _colour_key_note(key: object) -> str:
    return f"its transparent colour {key} is not kept (no alpha channel is made)"


def _animated(name: str, frames: int) -> str:
    return (
        f"{name}: has {frames} frames; geomcli reads one image unless told "
        "(--frames all stacks them on a leading axis, --frames first takes the first)"
    )


def _read_frames(
    im: Any, name: str, fmt: str, src: str, count: int, max_pixels: int, notes: list[str]
) -> Loaded:
    """Every frame of an animation, as the viewer sees each one, on a leading axis (N, H, W[, C]).

    Pillow composes each GIF/APNG/WebP frame onto the ones before it; all frames are converted
    to the first frame's mode (RGBA when any frame has transparency), so they stack.
    """
    import numpy as np
    from PIL import ImageSequence

    width, height = im.size
    mode, _ = _target_mode(im)
    _, channels = _KEPT[mode]
    check_size((count, height, width, channels), max_pixels, name)
    try:
        pictures = [frame.copy() for frame in ImageSequence.Iterator(im)]
        if any(_KEPT.get(_target_mode(p)[0], (None, 0))[1] == 4 for p in pictures) and mode != "RGBA":
            mode = "RGBA"  # a later frame's transparency must not be lost
        data = np.stack([np.asarray(p if p.mode == mode else p.convert(mode)) for p in pictures])
    except _DECODE_ERRORS as e:
        if not raised_in(e, "PIL"):
            raise  # geomcli's own code: a bug keeps its traceback (an OSError goes to the facade)
        raise GeomError(f"{name}: not a readable {fmt.upper()} ({_reason(e)})") from e
    notes.append(f"{count} frames stacked on axis 0 as {mode} (--frames all)")
    layout = "NHWC" if data.ndim == 4 else None
    # the axes a TIFF of these frames records: T for time, S for colour samples
    axes = "TYXS" if data.ndim == 4 else "TYX"
    metadata = _metadata(im.info, 1)._replace(axes=axes, axes_kind="shaped")
    return Loaded(data, fmt, layout, src, tuple(notes), metadata, count)


def _metadata(info: dict[str, Any], orientation: int) -> Metadata:
    """The ICC profile, DPI and EXIF Pillow found; EXIF says orientation 1 once applied."""
    icc = info.get("icc_profile") or None
    dpi = info.get("dpi")
    resolution = None
    if isinstance(dpi, tuple) and len(dpi) == 2 and all(_number(d) and 0 < float(d) < 1e9 for d in dpi):
        resolution = (float(dpi[0]), float(dpi[1]))
    exif = info.get("exif") or None
    if isinstance(exif, bytes) and orientation in ORIENTATIONS:
        exif = _upright_exif(exif)
    return Metadata(
        icc=icc if isinstance(icc, bytes) else None,
        resolution=resolution,
        unit="inch" if resolution else None,
        exif=exif if isinstance(exif, bytes) else None,
    ).upright(orientation)


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


def fitted_exif(exif: bytes, width: int, height: int) -> bytes | None:
    """The EXIF block with its pixel dimensions (if it has them) set to the written image's."""
    tags = _exif_tags(exif)
    if tags is None:
        return None
    try:
        sub = tags.get_ifd(0x8769)  # the Exif IFD: PixelXDimension, PixelYDimension
        if 0xA002 in sub or 0xA003 in sub:
            sub[0xA002], sub[0xA003] = width, height
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
    if "transparency" in im.info:
        notes.append(_colour_key_note(im.info["transparency"]))
    try:
        array = _png.decode(data)
    except RuntimeError as e:  # imagecodecs' PngError
        raise GeomError(f"{name}: not a readable PNG ({_reason(e)})") from e
    orientation = _orientation(im, name) if auto_orient else 1
    if orientation in ORIENTATIONS:
        array = orient(array, orientation)
        notes.append(f"{ORIENTATIONS[orientation]} by its EXIF orientation {orientation}")
    return Loaded(array, "png", image_layout(array.shape), src, tuple(notes), _metadata(im.info, orientation), pages)


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
        raise GeomError(f"{name}: not a readable {fmt.upper()} ({_reason(e)})") from e


@contextmanager
def _unbounded() -> Iterator[None]:
    """Pillow's own decompression-bomb check off: geomcli's check_size is the limit. Pillow's
    limit is one global: threads inside at once share one change, undone by the last out."""
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
    return value if value in ORIENTATIONS else 1


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


def _head_bytes(source: str | bytes, fmt: str) -> bytes | None:
    if fmt != "png":
        return None
    if isinstance(source, bytes):
        return source[:33]
    with open(source, "rb") as f:
        return f.read(33)


@contextmanager
def _mapped(path: str) -> Iterator[bytes | mmap.mmap]:
    """The file's bytes as a read-only memory map (b"" for an empty file, which cannot be mapped)."""
    import mmap

    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            yield b""
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield data


def _read_all(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _size(path: str) -> int:
    return os.stat(path).st_size


# What each image format holds of Metadata (the facade warns about the rest)
HOLDS = {
    "png": {"icc", "dpi", "exif"},
    "jpeg": {"icc", "dpi", "exif"},
    "webp": {"icc", "exif"},
    "bmp": {"dpi"},
    "gif": set(),
}
JPEG_QUALITY = 95
# ImageMagick's zlib level for PNG (its quality 75)
PNG_LEVEL = 7


def write(
    data: np.ndarray,
    f: IO[bytes],
    fmt: str,
    metadata: Metadata | None = None,
    options: WriteOptions | None = None,
) -> None:
    """Write an array the facade has already checked this format can hold, with the metadata
    fields this format holds (see HOLDS)."""
    import numpy as np

    options = options or WriteOptions()
    if fmt == "png" and data.dtype == np.uint16:
        level, icc, dpi, exif = _kept(fmt, metadata or Metadata(), options, data.shape[1], data.shape[0])
        ppm = None if dpi is None else (round(dpi[0] / 0.0254), round(dpi[1] / 0.0254))
        f.write(_png.encode(data, level, icc=icc, ppm=ppm, exif=exif))
        return
    from PIL import Image

    if data.ndim == 3 and data.shape[2] == 1:
        data = data[:, :, 0]
    save(Image.fromarray(np.ascontiguousarray(data)), f, fmt, metadata, options)


def save(
    im: Any,
    f: IO[bytes],
    fmt: str,
    metadata: Metadata | None = None,
    options: WriteOptions | None = None,
) -> None:
    """Write a Pillow image of a mode this format holds, as :func:`write` writes its array."""
    options = options or WriteOptions()
    level, icc, dpi, exif = _kept(fmt, metadata or Metadata(), options, *im.size)
    saving: dict[str, Any] = {}
    if fmt == "png":
        saving = {"compress_level": level}
    elif fmt == "jpeg":
        saving = {"quality": options.quality or JPEG_QUALITY}
    elif fmt == "gif":
        # unoptimised, the palette stays the identity grey ramp, which Pillow reads back as "L"
        saving = {"optimize": False}
    elif fmt == "webp":
        if options.quality is None:
            # lossless, and keeping the colour of fully transparent pixels: values survive exactly
            saving = {"lossless": True, "exact": True}
        else:
            saving = {"quality": options.quality}
    if icc is not None:
        saving["icc_profile"] = icc
    if dpi is not None:
        saving["dpi"] = dpi
    if exif is not None:
        saving["exif"] = exif
    im.save(f, format=_PILLOW_FORMATS[fmt][0], **saving)


def _kept(
    fmt: str, metadata: Metadata, options: WriteOptions, width: int, height: int
) -> tuple[int, bytes | None, tuple[float, float] | None, bytes | None]:
    """The PNG level, and the ICC profile, DPI and EXIF (fitted to width x height) this format holds."""
    holds = HOLDS[fmt]
    level = PNG_LEVEL if options.compress_level is None else options.compress_level
    icc = metadata.icc if "icc" in holds else None
    dpi = metadata.dpi if "dpi" in holds else None
    exif = None
    if metadata.exif is not None and "exif" in holds:
        exif = fitted_exif(metadata.exif, width, height)
    return level, icc, dpi, exif
