"""The truncated-JPEG check: a JPEG whose entropy-coded data cannot cover the frame its SOF
declares, or whose scans stop before the whole frame is coded, is refused before it is decoded.

Why this is ours: libjpeg fills what is missing with grey and only warns, and Pillow does not pass
the warning on (a 335-byte file declaring 40000x40000 took 4.7 GB and gave 1.6 GB of grey; a file
cut in its scans with an EOI appended read as a picture grey from the cut on). Pillow's only
switch, ImageFile.LOAD_TRUNCATED_IMAGES, is about files that end early, not these. No library
checks a JPEG's data against its frame, so geomcli's promise (a bad input is one error line, in
little memory) needs these lines.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

from geomcli.errors import GeomError

if TYPE_CHECKING:
    import mmap


def check(source: str | bytes, name: str) -> int | None:
    """:func:`check_data` of a JPEG given by path (memory-mapped: pages past the first EOI are
    never read) or as bytes."""
    if isinstance(source, bytes):
        return check_data(source, name)
    with _mapped(source) as mapped:
        return check_data(mapped, name)


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
# one-scan Huffman frames, whose data Pillow is given without its EOI (see ended)
_SEQUENTIAL_HUFFMAN = {0xC0, 0xC1}
_START_OF_SCAN, _END_OF_IMAGE, _RESTART_INTERVAL = 0xDA, 0xD9, 0xDD
_MULTI_PICTURE = 0xE2  # APP2, which holds an MPO's index ("MPF") among other things
_RESTART = re.compile(rb"\xff[\xd0-\xd7]")  # RST0-7 (in a scan's data an FF byte is stuffed: FF 00)
# the end of a scan's data: the next marker other than RSTn (FF 00 is a stuffed FF)
_NEXT_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")
# markers that stand alone, without a length: TEM, RST0-7, SOI, EOI
_NO_LENGTH = {0x01, *range(0xD0, 0xDA)}


def check_data(data: bytes | mmap.mmap, name: str) -> int | None:
    """Refuse a JPEG whose entropy-coded data is too short for the frame its SOF declares, or
    whose scans stop before every component (and, progressive, every coefficient) is coded,
    before it is decoded ("truncated" where the file has no EOI, "damaged" where it has):
    libjpeg fills what is missing with grey and only warns, which Pillow does not pass on (a
    335-byte file declaring 40000x40000 took 4.7 GB and gave 1.6 GB of grey; a file cut in its scans
    with an EOI appended was read as a picture grey from the cut on).

    What this cannot see: a progressive file cut inside one of its last scans (their headers
    are all there; libjpeg leaves the rest of that scan's refinement out), and a one-scan file
    cut within its last blocks (see _SCAN_RUNOUT). Both are read with those blocks wrong.

    The data of every scan up to the first EOI is counted (an MPO's later images, and anything
    after, are not), with its restart markers and stuffed bytes: more than it holds, never less.
    Returns where the data of a one-scan Huffman frame that has its EOI ends (for ended),
    else None.
    """
    least_bits, size, sof = 0, (0, 0), 0
    # component id -> the coefficients its scans code to the last bit, one bit each (bit k for
    # coefficient k; bit 0 alone for a sequential or lossless frame, whose scans code them all)
    coded_bits: dict[int, int] = {}
    coded, scans = 0, 0
    scan_end, ended = 0, False
    restarts = 0  # the DRI's interval: scans have RSTn markers
    for marker, at, body_end, end in _segments(data):
        if marker == _END_OF_IMAGE:
            ended = True
        elif marker in _LEAST_BITS and not least_bits:
            least_bits, size, components = _frame_bits(marker, data[at + 4 : body_end])
            if len(components) > _MOST_COMPONENTS:
                raise GeomError(f"{name}: not a readable JPEG (its frame has {len(components)} components; "
                                f"libjpeg reads at most {_MOST_COMPONENTS})")
            sof = marker
            coded_bits = dict.fromkeys(components, 0)
        elif marker == _RESTART_INTERVAL and body_end - at >= 6:
            restarts = int.from_bytes(data[at + 4 : at + 6], "big")
        elif marker == _START_OF_SCAN:
            scans += 1
            _note_scan(data[at + 4 : body_end], coded_bits, sof in _PROGRESSIVE)
            if restarts:
                _check_restarts(data, body_end, end, name)
            coded += end - body_end
            scan_end = end
    height, width = size
    # a file that ends with its EOI is not cut short: bytes are missing (or wrong) inside it
    fault = "damaged" if ended else "truncated"
    if 8 * coded < least_bits:
        if sof in _ARITHMETIC:
            if height * width > _ARITHMETIC_UNBOUNDED_PIXELS:
                raise GeomError(
                    f"{name}: arithmetic-coded JPEG with {coded} bytes of image data for {width}x{height}, fewer "
                    f"than geomcli reads for a frame over {_ARITHMETIC_UNBOUNDED_PIXELS} pixels "
                    f"({-(-least_bits // 8)}): arithmetic coding bounds no frame by its data"
                )
        else:
            raise GeomError(f"{name}: not a readable JPEG ({fault}: too little image data for {width}x{height})")
    whole = (1 << 64) - 1 if sof in _PROGRESSIVE else 1
    if least_bits and any(bits != whole for bits in coded_bits.values()):
        raise GeomError(f"{name}: not a readable JPEG ({fault}: its scans stop before the whole "
                        f"{width}x{height} frame is coded)")
    # (a file without its EOI is left to Pillow, which says it is truncated)
    return scan_end if ended and sof in _SEQUENTIAL_HUFFMAN and scans == 1 else None


def end_of_image(data: bytes, pictures: bool = True) -> int | None:
    """Where a JPEG's first image ends, after its EOI; None where it has no EOI. An MPO's (its
    APP2 "MPF" segment says the images after the first are its own: a preview, gain or depth map)
    ends where its last image does, as its index says (:func:`_pictures_end`); with ``pictures``
    False, that of its own image alone."""
    for marker, at, _, end in _segments(data):
        if marker == _END_OF_IMAGE:
            return end
        if pictures and marker == _MULTI_PICTURE and data[at + 4 : at + 8] == b"MPF\0":
            return _pictures_end(data, at + 8)
    return None


def _segments(data: bytes | mmap.mmap) -> Iterator[tuple[int, int, int, int]]:
    """A JPEG's segments after its SOI, up to its first EOI (the last one given) or where the walk
    cannot go on (the data ends, inside a length too; junk with no FF after it): (marker, where
    its marker starts, where its body ends, where it ends: a SOS segment's after its scan's data,
    at the next marker other than RSTn or the end of the data). Junk between segments and fill
    bytes before a marker are skipped, as libjpeg skips them; markers without a length but the EOI
    (RSTn, TEM) are not given."""
    at = 2  # after SOI
    while at + 2 <= len(data):
        if data[at] != 0xFF:  # junk between segments
            at = data.find(b"\xff", at)
            if at < 0:
                return
            continue
        marker = data[at + 1]
        if marker == _END_OF_IMAGE:
            yield marker, at, at + 2, at + 2
            return
        if marker == 0xFF or marker in _NO_LENGTH:  # a fill byte before a marker; a marker alone
            at += 1 if marker == 0xFF else 2
            continue
        if at + 4 > len(data):
            return
        body_end = end = at + 2 + int.from_bytes(data[at + 2 : at + 4], "big")
        if marker == _START_OF_SCAN:
            found = _NEXT_MARKER.search(data, body_end)
            end = len(data) if found is None else found.start()
        yield marker, at, body_end, end
        at = end


def _pictures_end(data: bytes, header: int) -> int | None:
    """Where the last of an MPO's pictures ends: its MP index (CIPA DC-007: a TIFF header at
    ``header`` and an IFD whose MPEntry tag lists each picture's offset from that header) says
    where the last starts, and its segments where it ends (the sizes listed are not trusted: Pillow
    writes a third picture's as the second's and its own); None where neither can be read."""
    order: Any = {b"II*\0": "little", b"MM\0*": "big"}.get(data[header : header + 4])
    if order is None:
        return None
    at = header + int.from_bytes(data[header + 4 : header + 8], order)
    count = int.from_bytes(data[at : at + 2], order)
    for entry in range(at + 2, min(at + 2 + 12 * count, len(data) - 11), 12):
        if int.from_bytes(data[entry : entry + 2], order) != 0xB002:  # MPEntry: 16 bytes a picture
            continue
        size = int.from_bytes(data[entry + 4 : entry + 8], order)
        listed = header + int.from_bytes(data[entry + 8 : entry + 12], order)
        if not size or size % 16 or listed + size > len(data):
            return None
        # (an entry: attribute, size, offset, two dependent entries; the first picture's offset is 0)
        last = max(int.from_bytes(data[picture + 8 : picture + 12], order)
                   for picture in range(listed, listed + size, 16))
        start = header + last
        if not last or data[start : start + 3] != b"\xff\xd8\xff":
            return None
        end = end_of_image(data[start:], pictures=False)
        return None if end is None else start + end
    return None


def _check_restarts(data: bytes | mmap.mmap, start: int, end: int, name: str) -> None:
    """A scan's restart markers come in the order RST0 to RST7, then again from RST0: one out of
    order shows bytes missing (or wrong) before it, where libjpeg decodes on, wrong blocks and a
    warning Pillow does not pass on (200 bytes taken from the middle of a file read, exit 0)."""
    expected = 0
    for found in _RESTART.finditer(data, start, end):
        got = data[found.start() + 1] - 0xD0
        if got != expected:
            raise GeomError(f"{name}: not a readable JPEG (damaged before byte {found.start()}: its restart "
                            f"marker RST{got} stands where RST{expected} belongs)")
        expected = (expected + 1) % 8


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


def ended(source: str | bytes, scan_end: int) -> IO[bytes]:
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


