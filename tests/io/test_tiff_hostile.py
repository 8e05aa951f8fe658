"""Hostile and unusual TIFFs: strips that inflate past their page, codec errors, sample formats
tifffile cannot decode, palettes past --max-pixels, 8-bit palettes stored as v*256, min-is-white
data, and image-like results whose channels must survive a round trip through geomcli's writer."""

from __future__ import annotations

import lzma
import re
import resource
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result
from conftest import hooked, run

from geomcli import io
from geomcli.errors import GeomError

DEFLATE, ADOBE_DEFLATE, PACKBITS, LZMA = 8, 32946, 32773, 34925
SIDE = 16  # a 16 x 16 uint8 page needs 256 bytes


def one_error(result: Result, name: str | Path) -> str:
    """The one ``Error: <name>: ...`` line of a failed run, checked; the line."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {name}: "), result.stderr
    return lines[0]


def grey_tiff(path: Path, segment: bytes, compression: int, *, tiled: bool = False, tile: int = SIDE) -> Path:
    """A little-endian 16 x 16 uint8 TIFF whose one strip (or ``tile`` x ``tile`` tile) holds ``segment`` as is."""
    if tiled:
        layout = [(322, 4, tile), (323, 4, tile), (324, 4, 0), (325, 4, len(segment))]
    else:
        layout = [(273, 4, 0), (278, 3, SIDE), (279, 4, len(segment))]
    tags = sorted([(256, 3, SIDE), (257, 3, SIDE), (258, 3, 8), (259, 3, compression), (262, 3, 1),
                   (277, 3, 1), *layout])
    data_at = 8 + 2 + 12 * len(tags) + 4
    entries = b"".join(
        struct.pack("<HHII", tag, kind, 1, data_at if tag in (273, 324) else value) if kind == 4
        else struct.pack("<HHIHH", tag, kind, 1, value, 0)
        for tag, kind, value in tags
    )
    path.write_bytes(b"II*\0" + struct.pack("<I", 8) + struct.pack("<H", len(tags)) + entries
                     + struct.pack("<I", 0) + segment)
    return path


def deflated_zeros(mebibytes: int) -> bytes:
    """A zlib stream of that many MiB of zeros, made in milliseconds: after a full flush the
    compressor starts afresh, so each further MiB compresses to the same bytes."""
    block = bytes(1 << 20)
    compressor = zlib.compressobj(9)
    first = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    again = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    # the final empty block, then the Adler-32 of the whole: for n zeros it is (n mod 65521) << 16 | 1
    end = compressor.flush()[:-4]
    checksum = ((mebibytes << 20) % 65521) << 16 | 1
    return first + again * (mebibytes - 1) + end + struct.pack(">I", checksum)


def lzma_zeros(mebibytes: int) -> bytes:
    compressor = lzma.LZMACompressor(preset=0)
    block = bytes(1 << 20)
    return b"".join(compressor.compress(block) for _ in range(mebibytes)) + compressor.flush()


def packbits_zeros(mebibytes: int) -> bytes:
    return b"\x81\x00" * (mebibytes << 13)  # each pair repeats a zero 128 times


def test_deflated_zeros_is_the_stream_it_claims() -> None:
    assert zlib.decompress(deflated_zeros(3)) == bytes(3 << 20)


# ---- 1. a strip or tile that inflates past what its page needs -------------------------------------


BOMBS = {
    "deflate": (DEFLATE, lambda: deflated_zeros(64)),
    "adobe-deflate": (ADOBE_DEFLATE, lambda: deflated_zeros(64)),
    "lzma": (LZMA, lambda: lzma_zeros(16)),
    "packbits": (PACKBITS, lambda: packbits_zeros(2)),
}


@pytest.mark.parametrize("tiled", [False, True], ids=["strip", "tile"])
@pytest.mark.parametrize("codec", BOMBS)
def test_a_segment_inflating_past_its_page_is_read_no_further(tmp_path: Path, codec: str, tiled: bool) -> None:
    """As libtiff and tifffile read it: the page's bytes, the rest dropped (here never made)."""
    compression, make = BOMBS[codec]
    path = grey_tiff(tmp_path / "bomb.tif", make(), compression, tiled=tiled)
    assert np.array_equal(io.read_array(str(path)).data, np.zeros((SIDE, SIDE), np.uint8))
    assert run("crop-pad", path, "-o", tmp_path / "o.tif", "--shape", "8,8", "-q").exit_code == 0


@pytest.mark.parametrize("codec", BOMBS)
def test_a_segment_of_exactly_its_page_is_read(tmp_path: Path, codec: str) -> None:
    compression, _ = BOMBS[codec]
    values = np.arange(256, dtype=np.uint8)
    encoded = {DEFLATE: zlib.compress, ADOBE_DEFLATE: zlib.compress, LZMA: lzma.compress,
               PACKBITS: lambda raw: b"".join(b"\x7f" + raw[i:i + 128] for i in range(0, 256, 128)) + b"\x80"}
    path = grey_tiff(tmp_path / "ok.tif", encoded[compression](values.tobytes()), compression)
    assert np.array_equal(io.read_array(str(path)).data, values.reshape(SIDE, SIDE))


@pytest.mark.parametrize("codec", BOMBS)
def test_a_segment_padded_past_its_page_gives_the_pages_bytes(tmp_path: Path, codec: str) -> None:
    """A last strip written for a full RowsPerStrip holds rows past the image: they are dropped."""
    compression, _ = BOMBS[codec]
    values = np.arange(256 + 32, dtype=np.uint16).astype(np.uint8)  # two rows more than the page
    encoded = {DEFLATE: zlib.compress, ADOBE_DEFLATE: zlib.compress, LZMA: lzma.compress,
               PACKBITS: lambda raw: b"".join(b"\x7f" + raw[i:i + 128] for i in range(0, len(raw), 128))}
    path = grey_tiff(tmp_path / "padded.tif", encoded[compression](values.tobytes()), compression)
    assert np.array_equal(io.read_array(str(path)).data, values[:256].reshape(SIDE, SIDE))


@pytest.mark.parametrize("compression", ["zlib", "lzma"])
@pytest.mark.parametrize("tiled", [False, True], ids=["strips", "tiles"])
def test_compressed_files_of_several_segments_read_whole(tmp_path: Path, rng: np.random.Generator,
                                                         compression: str, tiled: bool) -> None:
    """The last strip (3 of 10 rows) and the edge tiles (padded to 16 x 16) are no bombs."""
    import tifffile

    data = rng.integers(0, 60000, (37, 45), dtype=np.uint16)
    layout: dict[str, Any] = {"tile": (16, 16)} if tiled else {"rowsperstrip": 10}
    path = tmp_path / "several.tif"
    tifffile.imwrite(path, data, compression=compression, predictor=compression == "zlib", **layout)
    assert np.array_equal(io.read_array(str(path)).data, data)


def test_pillow_compressed_tiffs_read_whole(tmp_path: Path, rng: np.random.Generator) -> None:
    from PIL import Image

    data = rng.integers(0, 256, (37, 45, 3), dtype=np.uint8)
    for compression in ("tiff_adobe_deflate", "packbits"):
        path = tmp_path / f"{compression}.tif"
        Image.fromarray(data).save(path, compression=compression, strip_size=45 * 3 * 10)
        assert np.array_equal(io.read_array(str(path)).data, data)


def peak_rss(command: list[str]) -> tuple[int, int]:
    """Exit code and peak resident memory (bytes) of ``command``, run by a fresh process whose only
    child it is (RUSAGE_CHILDREN of this test process would count every earlier child)."""
    measure = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:], capture_output=True).returncode;"
               " print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", measure, *command], capture_output=True, text=True, check=True)
    code, kib = out.stdout.split()
    return int(code), int(kib) * 1024


def test_a_bomb_costs_no_more_memory_than_a_plain_file(tmp_path: Path) -> None:
    """512 MiB of zeros in one Deflate strip (514 KB) of a 16 x 16 page: read to its 256 bytes, and
    the run's peak memory stays within 64 MiB of a plain 16 x 16 TIFF's (zlib.decompress took 1 GiB)."""
    assert resource.RUSAGE_CHILDREN  # Unix
    bomb = grey_tiff(tmp_path / "bomb.tif", deflated_zeros(512), DEFLATE)
    plain = grey_tiff(tmp_path / "plain.tif", zlib.compress(bytes(256)), DEFLATE)
    geomcli = [sys.executable, "-m", "geomcli", "crop-pad", "-q", "--shape", "8,8", "--max-pixels", "1000"]
    plain_code, plain_peak = peak_rss([*geomcli, str(plain), "-o", str(tmp_path / "plain-out.tif")])
    bomb_code, bomb_peak = peak_rss([*geomcli, str(bomb), "-o", str(tmp_path / "bomb-out.tif")])
    assert (plain_code, bomb_code) == (0, 0)
    assert bomb_peak < plain_peak + (64 << 20), (plain_peak, bomb_peak)


# ---- 2. a damaged compressed segment is one error line -------------------------------------------


def test_a_tile_far_past_its_page_is_not_kept_for_the_output(tmp_path: Path) -> None:
    """A crafted 2**30 x 2**30 tile over 16 x 16 pixels: kept, it failed tifffile's write with a
    traceback (a tile's byte count past 32 bits); a smaller one would pad a tiny output to gigabytes."""
    import tifffile

    source = grey_tiff(tmp_path / "tiled.tif", bytes(range(256)), 1, tiled=True, tile=2**30)
    out = tmp_path / "out.tif"
    result = run("crop-pad", source, "-o", out, "--shape", "4,4", "-q")
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(out) as tif:
        assert not tif.pages[0].is_tiled
        assert tif.asarray().shape == (4, 4)


def test_a_page_past_memory_read_for_a_zarr_output_is_one_error_line(tmp_path: Path) -> None:
    """A 40000 x 40000 page in one deflated strip (1.6 GB of zeros in 1.6 MB), read strip by strip
    for a zarr output under ulimit -v: a MemoryError traceback, where a file output said it in a line."""
    pytest.importorskip("zarr")
    pytest.importorskip("dask.array")
    source = grey_tiff(tmp_path / "big.tif", deflated_zeros(1526), DEFLATE)
    side = struct.pack("<HH", SIDE, 0)
    data = source.read_bytes()
    for tag in (256, 257, 278):  # the width, length and rows a strip, SHORTs: 16 -> 40000
        entry = struct.pack("<HHI", tag, 3, 1) + side
        data = data.replace(entry, struct.pack("<HHIHH", tag, 3, 1, 40000, 0), 1)
    source.write_bytes(data)
    # 1 GiB: the strip's 1.6 GB buffer is refused at once (under 2 GiB it was filled for seconds first)
    done = subprocess.run(["bash", "-c", f'ulimit -v {1 << 20}; exec "$@"', "-", sys.executable, "-m", "geomcli",
                           "crop-pad", str(source), "-o", str(tmp_path / "out.zarr"), "--shape", "4,4"],
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (
        1, f"Error: {source}: not a readable TIFF (declares more data than fits in memory)\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["big.tif"]


def test_a_damaged_strip_read_for_a_zarr_output_is_one_error_line(tmp_path: Path) -> None:
    """Read strip by strip, a damaged one was a SegmentError traceback: only a MemoryError was
    translated there, where a file output's read translates all as _tiff does."""
    pytest.importorskip("zarr")
    pytest.importorskip("dask.array")
    path = damaged_tiff(tmp_path / "damaged.tif", "zlib")
    result = run("crop-pad", path, "-o", tmp_path / "out.zarr", "--shape", "4,4")
    assert one_error(result, path) == (f"Error: {path}: not a readable TIFF (damaged Deflate data: Error -3 while "
                                       "decompressing data: incorrect header check)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.tif"]


@pytest.mark.parametrize(("tile", "exit_code"), [(2**30, 0), (0, 1)])
def test_a_tile_far_past_its_page_is_decoded_whole_for_a_zarr_output(tmp_path: Path, tile: int,
                                                                     exit_code: int) -> None:
    """Read tile by tile, tifffile's store allocated a whole 2**30 x 2**30 tile (an exabyte: a
    MemoryError traceback), or divided by a tile of 0."""
    zarr = pytest.importorskip("zarr")
    pytest.importorskip("dask.array")
    source = grey_tiff(tmp_path / "tiled.tif", bytes(range(256)), 1, tiled=True, tile=tile)
    result = run("crop-pad", source, "-o", tmp_path / "out.zarr", "--shape", "4,4", "-q")
    assert result.exit_code == exit_code, result.stderr
    if exit_code == 1:  # (tifffile reads no tile of 0, decoded whole too)
        assert one_error(result, source) == f"Error: {source}: not a readable TIFF (its TileWidth tag is 0)"
    else:
        expected = io.read_array(str(source)).data[6:10, 6:10]
        assert np.array_equal(zarr.open(str(tmp_path / "out.zarr"), mode="r")[...], expected)


def damaged_tiff(path: Path, compression: str) -> Path:
    """A 30 x 40 uint16 TIFF in one strip of ``compression`` whose first byte is flipped."""
    import tifffile

    tifffile.imwrite(path, np.arange(1200, dtype=np.uint16).reshape(30, 40), compression=compression)
    with tifffile.TiffFile(path) as tif:
        at = tif.pages[0].dataoffsets[0]
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0xFF
    path.write_bytes(bytes(raw))
    return path


@pytest.mark.parametrize("compression", ["lzma", "zlib"])
def test_a_damaged_compressed_strip_is_one_error(tmp_path: Path, compression: str) -> None:
    path = damaged_tiff(tmp_path / "damaged.tif", compression)
    line = one_error(run("info", path), path)
    assert "not a readable TIFF" in line
    with pytest.raises(GeomError, match=r"damaged\.tif: not a readable TIFF"):
        io.read_array(str(path))


def test_a_cut_lzma_strip_is_one_error(tmp_path: Path, rng: np.random.Generator) -> None:
    stream = lzma.compress(rng.integers(0, 256, 256, dtype=np.uint8).tobytes())  # no runs: cut, bytes go
    path = grey_tiff(tmp_path / "cut.tif", stream[: len(stream) // 2], LZMA)
    with pytest.raises(GeomError, match=r"cut\.tif: not a readable TIFF \(.*LZMA.*\)"):
        io.read_array(str(path))


# ---- 3. a sample format tifffile cannot decode ---------------------------------------------------


def test_a_sample_format_tifffile_cannot_decode_is_refused(tmp_path: Path) -> None:
    """8 x 1 signed 3-bit integers: tifffile names the series float64 but has no page dtype."""
    tags = [(256, 4, 8), (257, 4, 1), (258, 3, 3), (259, 3, 1), (262, 3, 1), (273, 4, 8 + 2 + 12 * 10 + 4),
            (277, 3, 1), (278, 4, 1), (279, 4, 3), (339, 3, 2)]
    entries = b"".join(struct.pack("<HHIHH", tag, kind, 1, value, 0) if kind == 3
                       else struct.pack("<HHII", tag, kind, 1, value) for tag, kind, value in tags)
    path = tmp_path / "int3.tif"
    path.write_bytes(b"II*\0" + struct.pack("<IH", 8, len(tags)) + entries + struct.pack("<I", 0) + b"\xff" * 3)
    reason = r"int3\.tif: not a readable TIFF \(unsupported sample format: 3-bit INT\)"
    with pytest.raises(GeomError, match=reason):
        io.read_array(str(path))
    with pytest.raises(GeomError, match=reason):
        io.read_header(str(path))
    assert one_error(run("info", path), path)
    assert one_error(run("crop-pad", path, "-o", tmp_path / "o.tif", "--shape", "1,4"), path)


def zeroed_tag(path: Path, tag: str, part: str, *, byteorder: str = "<", bigtiff: bool = False,
               pages: int = 1, fill: int = 0, **write: Any) -> Path:
    """A 6 x 5 RGB uint8 TIFF (``pages`` pages; ``write``: more of tifffile's options) whose last
    page's ``tag`` has its count (``part`` "count") or every value ("value") zeroed (every byte
    ``fill``) in the IFD bytes."""
    import tifffile

    data = np.arange(pages * 90, dtype=np.uint8).reshape(pages, 6, 5, 3)
    tifffile.imwrite(path, data if pages > 1 else data[0], byteorder=byteorder, bigtiff=bigtiff,
                     photometric="rgb", metadata=None, **write)
    raw = bytearray(path.read_bytes())
    with tifffile.TiffFile(path) as tif:
        entry = tif.pages[pages - 1].tags[tag]
        width = 8 if bigtiff else 4
        at, size = entry.offset + 4, width  # the count
        if part == "value":
            item = {3: 2, 4: 4, 16: 8}[entry.dtype]
            # inline values sit in the entry's last field; more than fit, where it points
            at = entry.valueoffset
            size = item * entry.count
    raw[at:at + size] = bytes([fill]) * size
    path.write_bytes(bytes(raw))
    return path


@pytest.mark.parametrize(("tag", "part", "said"), [
    ("BitsPerSample", "count", "its BitsPerSample tag holds no value"),
    ("BitsPerSample", "value", "its BitsPerSample tag is 0"),
    ("SamplesPerPixel", "count", "its SamplesPerPixel tag holds no value"),
    ("SamplesPerPixel", "value", "its SamplesPerPixel tag is 0"),
    ("ImageWidth", "count", "its ImageWidth tag holds no value"),
    ("ImageWidth", "value", "its ImageWidth tag is 0"),
    ("ImageLength", "count", "its ImageLength tag holds no value"),
    ("ImageLength", "value", "its ImageLength tag is 0"),
    ("RowsPerStrip", "count", "its RowsPerStrip tag holds no value"),
    # tifffile's own message, its page's repr ("<tifffile.TiffPage 0 @8>") put in words
    ("StripOffsets", "count", "tifffile: page 0: incorrect StripOffsets count (0 != 1)"),
])
@pytest.mark.parametrize(("byteorder", "bigtiff"), [("<", False), (">", True)], ids=["le", "big-be"])
def test_a_zeroed_tag_is_named_not_pythons_error(tmp_path: Path, tag: str, part: str, said: str,
                                                 byteorder: str, bigtiff: bool) -> None:
    """Was: "not a readable TIFF (tuple index out of range)" and other Python error texts (a side of
    0 without tifffile's shape description: an empty image)."""
    path = zeroed_tag(tmp_path / "bad.tif", tag, part, byteorder=byteorder, bigtiff=bigtiff)
    reason = rf"bad\.tif: not a readable TIFF \({re.escape(said)}\)"
    with pytest.raises(GeomError, match=reason):
        io.read_header(str(path))
    with pytest.raises(GeomError, match=reason):
        io.read_array(str(path))
    assert said in one_error(run("info", path), path)
    piped = run("info", "-", stdin=path.read_bytes())  # read from bytes, not a file
    assert piped.exit_code == 1 and f"({said})" in piped.stderr and "Traceback" not in piped.stderr


@pytest.mark.parametrize(("tag", "part", "write"), [
    ("TileWidth", "count", {"tile": (16, 16)}), ("TileWidth", "value", {"tile": (16, 16)}),
    ("TileLength", "count", {"tile": (16, 16)}), ("TileLength", "value", {"tile": (16, 16)}),
    ("RowsPerStrip", "value", {"compression": "lzw"}),
])
def test_a_zeroed_tag_found_as_the_pixels_are_read_is_named(tmp_path: Path, tag: str, part: str,
                                                            write: dict[str, Any]) -> None:
    """Was: "not a readable TIFF (NONE data: division by zero)", "(NONE data: '>' not supported
    between instances of 'tuple' and 'int')", "(LZW data: division by zero)"."""
    path = zeroed_tag(tmp_path / "bad.tif", tag, part, **write)
    said = f"its {tag} tag holds no value" if part == "count" else f"its {tag} tag is 0"
    assert one_error(run("info", path), path) == f"Error: {path}: not a readable TIFF ({said})"
    assert one_error(run("crop-pad", path, "-o", tmp_path / "o.tif", "--shape", "4,4"), path)
    assert not (tmp_path / "o.tif").exists()


@pytest.mark.parametrize("chain", ["offset-past-2**63", "2**60-tags"])
@pytest.mark.parametrize("given", ["path", "bytes"])
def test_the_tag_walker_tells_nothing_of_a_chain_too_damaged_to_walk(tmp_path: Path, chain: str, given: str) -> None:
    """_tiff_tags.damaged_tag runs where tifffile failed, to name a tag: a BigTIFF whose next IFD
    sits at 2**64 - 1, or holds 2**60 tags, raised OverflowError out of it (a traceback in place
    of the file's error line), where its contract is None."""
    import tifffile

    from geomcli.io import _tiff_tags

    path = tmp_path / "chain.tif"
    tifffile.imwrite(path, np.zeros((6, 5, 3), np.uint8), bigtiff=True, photometric="rgb", metadata=None)
    raw = bytearray(path.read_bytes())
    (ifd,) = struct.unpack("<Q", raw[8:16])
    (count,) = struct.unpack("<Q", raw[ifd:ifd + 8])
    next_ifd = ifd + 8 + 20 * count
    if chain == "offset-past-2**63":
        raw[next_ifd:next_ifd + 8] = struct.pack("<Q", 2**64 - 1)
    else:
        raw[next_ifd:next_ifd + 8] = struct.pack("<Q", len(raw))
        raw += struct.pack("<Q", 2**60) + bytes(40)
    path.write_bytes(bytes(raw))
    assert _tiff_tags.damaged_tag(str(path) if given == "path" else bytes(raw)) is None


def pages_parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets an entry for each TiffPage tifffile parses in full from now on."""
    import tifffile

    parsed: list[int] = []
    init = tifffile.TiffPage.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        parsed.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(tifffile.TiffPage, "__init__", counted)
    return parsed


def test_a_sound_generic_stack_is_not_parsed_page_by_page_again(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The check for a page tifffile's generic series left out (test_a_zeroed_tag_past_the_first_page
    _names_its_page) parsed every page in full again where none was: 1998 TiffPages for a 1000-page
    file of two shapes, where tifffile's series take 1000 (read_header 75 -> 130 ms); now as many as
    tifffile's series take."""
    import tifffile

    path = tmp_path / "two-shapes.tif"
    with tifffile.TiffWriter(path) as tif:
        for index in range(20):
            tif.write(np.full((8, 8 + index % 2), index, np.uint16), metadata=None, photometric="minisblack")
    parsed = pages_parsed(monkeypatch)
    with tifffile.TiffFile(path) as tif:
        assert [(one.kind, len(one.pages)) for one in tif.series] == [("generic", 10), ("generic", 10)]
    by_tifffile = len(parsed)
    parsed.clear()
    header = io.read_header(str(path), series=1)
    assert header.shape == (10, 8, 9)
    assert len(parsed) == by_tifffile


def test_a_series_later_pages_are_compared_without_being_parsed_in_full(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A series' later pages are compared by their own tags (ICC, resolution, XMP, orientation)
    read from their IFDs: none is parsed in full as a TiffPage (every tag, 4 times as long)."""
    import tifffile

    path = tmp_path / "stack.tif"
    tifffile.imwrite(path, np.zeros((40, 4, 4, 3), np.uint8), photometric="rgb", resolution=(300, 300),
                     resolutionunit="inch")
    parsed = pages_parsed(monkeypatch)
    metadata = io.read_metadata(str(path))
    assert metadata.resolution == (300.0, 300.0) and not metadata.dropped
    assert len(parsed) == 1


def test_icc_profiles_overlapping_in_a_series_are_not_read_page_by_page(tmp_path: Path) -> None:
    """Frames whose ICC profiles are one range of the file at a byte apart (as no writer stores
    them), each equal to the first's: comparing them read the range once a page, a 100 MB profile
    in 10,000 pages a terabyte. Values held in more bytes than the file are taken as differing."""
    import tifffile

    path, pages, region = tmp_path / "overlapping.tif", 3, 1 << 16
    tifffile.imwrite(path, np.zeros((pages, 4, 4, 3), np.uint8), photometric="rgb", iccprofile=b"\0" * 128)
    with open(path, "ab") as file:
        base = file.tell()
        file.write(bytes(region + pages))
    with tifffile.TiffFile(path) as tif:
        tif.pages.useframes = False
        entries = [tif.pages[index].tags[34675].offset for index in range(pages)]
    with open(path, "r+b") as file:
        for index, entry in enumerate(entries):  # each ICC entry: its count, then its value's offset
            file.seek(entry + 4)
            file.write(struct.pack("<II", region, base + index))
    metadata = io.read_metadata(str(path))
    assert metadata.icc is None
    assert metadata.dropped == ("the ICC profiles of the TIFF's pages (they differ; an output holds one for all)",)


def test_a_page_of_more_tiles_than_its_offsets_is_refused_at_once(tmp_path: Path) -> None:
    """A tiled 6 x 5 page whose ImageLength became 4294967295 (one tile of 16 x 16 stored, 268
    million declared): read for a zarr output, dask's chunking of that grid took over a minute
    and gigabytes (a PNG output refuses it by --max-pixels)."""
    pytest.importorskip("zarr")
    pytest.importorskip("dask.array")
    path = zeroed_tag(tmp_path / "bad.tif", "ImageLength", "value", fill=0xFF, tile=(16, 16))
    said = f"Error: {path}: not a readable TIFF (its TileOffsets hold 1; its 5x4294967295 page takes 268435456)"
    started = time.monotonic()
    assert one_error(run("crop-pad", path, "-o", tmp_path / "o.zarr", "--shape", "4,4"), path) == said
    assert time.monotonic() - started < 10
    assert not (tmp_path / "o.zarr").exists()
    with pytest.raises(GeomError, match=r"its TileOffsets hold 1; its 5x4294967295 page takes 268435456"):
        io.read_array(str(path), max_pixels=2**62)


def test_tifffiles_log_lines_stay_off_stderr_when_read_chunk_by_chunk(tmp_path: Path) -> None:
    """A photometric of 65535 read for a zarr output printed "<tifffile.TiffTag 262 @58> raised
    ValueError('65535 is not a valid PHOTOMETRIC')" once a chunk read, with -q too."""
    zarr = pytest.importorskip("zarr")
    pytest.importorskip("dask.array")
    path = zeroed_tag(tmp_path / "odd.tif", "PhotometricInterpretation", "value", fill=0xFF)
    # a real run: pytest's own log handler would take the lines in this process
    done = subprocess.run([sys.executable, "-m", "geomcli", "crop-pad", str(path), "-o", str(tmp_path / "o.zarr"),
                           "--shape", "4,4", "-q"], capture_output=True, text=True, timeout=120,
                          env=hooked(tmp_path))
    assert (done.returncode, done.stderr) == (0, "")
    expected = np.arange(90, dtype=np.uint8).reshape(6, 5, 3)[1:5, 0:4]
    assert np.array_equal(zarr.open(str(tmp_path / "o.zarr"), mode="r")[...], expected)


def test_uncompressed_data_is_called_so_not_by_tifffiles_enum_name(tmp_path: Path) -> None:
    """Was: "not a readable TIFF (NONE data: failed to read 1966050 bytes, got 90)"."""
    path = zeroed_tag(tmp_path / "bad.tif", "SamplesPerPixel", "value", fill=0xFF)
    assert "not a readable TIFF (uncompressed data: failed to read" in one_error(run("info", path), path)


@pytest.mark.parametrize(("bigtiff", "offset"), [(False, 0), (True, 0), (True, 8)], ids=["classic", "big", "big-8"])
def test_a_strip_offset_into_the_header_is_refused_not_read_from_it(tmp_path: Path, bigtiff: bool,
                                                                     offset: int) -> None:
    """Was: the file's first bytes (its header) read as the strip's pixels, exit 0; a BigTIFF's
    header is 16 bytes, and an offset of 8 was read (range [0, 16]: the first IFD's offset)."""
    import tifffile

    path = zeroed_tag(tmp_path / "bad.tif", "StripOffsets", "value", bigtiff=bigtiff)
    if offset:
        with tifffile.TiffFile(path) as tif:
            at = tif.pages[0].tags["StripOffsets"].valueoffset
        raw = bytearray(path.read_bytes())
        raw[at:at + 8] = struct.pack("<Q", offset)
        path.write_bytes(bytes(raw))
    reason = r"bad\.tif: not a readable TIFF \(a strip or tile offset points into the file header\)"
    with pytest.raises(GeomError, match=reason):
        io.read_array(str(path))
    assert one_error(run("crop-pad", path, "-o", tmp_path / "o.tif", "--shape", "4,4"), path)
    assert not (tmp_path / "o.tif").exists()


def test_a_zeroed_tag_past_the_first_page_names_its_page(tmp_path: Path) -> None:
    path = zeroed_tag(tmp_path / "pages.tif", "SamplesPerPixel", "value", pages=3)
    assert "(page 2: its SamplesPerPixel tag is 0)" in one_error(run("info", path), path)


def test_zeroed_tags_in_a_batch_are_one_line_each_and_the_rest_done(tmp_path: Path) -> None:
    import tifffile

    folder = tmp_path / "in"
    folder.mkdir()
    zeroed_tag(folder / "a.tif", "BitsPerSample", "count")
    zeroed_tag(folder / "b.tif", "ImageLength", "value")
    tifffile.imwrite(folder / "c.tif", np.zeros((6, 5, 3), np.uint8), photometric="rgb")
    for command in (["crop-pad", "--shape", "4,4"], ["resize", "--sizes", "4,4"],
                    ["resize", "--sizes", "4,4", "--dry-run"]):
        out = tmp_path / f"out{len(command)}{command[0]}"
        result = run(*command, folder, "--out-dir", out, "-j", "1")
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.stderr
        errors = sorted(line for line in result.stderr.splitlines() if line.startswith("Error: "))
        assert errors == [f"Error: {folder / 'a.tif'}: not a readable TIFF (its BitsPerSample tag holds no value)",
                          f"Error: {folder / 'b.tif'}: not a readable TIFF (its ImageLength tag is 0)"]
        written = sorted(p.name for p in out.iterdir()) if out.exists() else []
        assert written == ([] if "--dry-run" in command else ["c.tif"])


# ---- 4. a palette is checked against --max-pixels as it is expanded -----------------------------


def test_a_palette_is_expanded_within_max_pixels(tmp_path: Path) -> None:
    """2000 x 2000 indices (4e6) expand to 1.2e7 values: a limit of 5e6 refuses the file."""
    import tifffile

    colormap = (np.arange(3 * 256, dtype=np.uint16).reshape(3, 256) * 85)
    path = tmp_path / "pal.tif"
    tifffile.imwrite(path, np.zeros((2000, 2000), np.uint8), photometric="palette", colormap=colormap,
                     compression="zlib")
    with pytest.raises(GeomError, match=r"pal\.tif: 12000000 elements exceed the limit of 5000000"):
        io.read_array(str(path), max_pixels=5_000_000)
    assert io.read_array(str(path), max_pixels=12_000_000).data.shape == (2000, 2000, 3)


# ---- 5. an 8-bit palette stored as v * 256 (libtiff, Pillow) ------------------------------------


def test_a_palette_saved_by_pillow_reads_as_8_bit(tmp_path: Path) -> None:
    from PIL import Image

    image = Image.fromarray(np.array([[0, 1], [1, 0]], np.uint8), mode="P")
    image.putpalette([0, 0, 0, 255, 255, 255])
    image.save(tmp_path / "pal.tif")
    loaded = io.read_array(str(tmp_path / "pal.tif"))
    assert loaded.data.dtype == np.uint8
    assert np.array_equal(loaded.data, np.asarray(Image.open(tmp_path / "pal.tif").convert("RGB")))
    assert loaded.data[0, 1].tolist() == [255, 255, 255]


def test_a_colormap_of_multiples_of_256_is_8_bit_and_others_stay_16_bit(tmp_path: Path) -> None:
    import tifffile

    indices = np.array([[0, 1], [2, 3]], np.uint8)
    colormap = np.zeros((3, 256), np.uint16)
    colormap[:, :4] = np.array([[0, 10, 20, 255], [1, 11, 21, 31], [2, 12, 22, 32]]) * 256
    tifffile.imwrite(tmp_path / "x256.tif", indices, photometric="palette", colormap=colormap)
    loaded = io.read_array(str(tmp_path / "x256.tif"))
    assert loaded.data.dtype == np.uint8 and loaded.data[1, 1].tolist() == [255, 31, 32]
    colormap[0, 5] = 1  # one entry with a low byte: a real 16-bit palette
    tifffile.imwrite(tmp_path / "wide.tif", indices, photometric="palette", colormap=colormap)
    loaded = io.read_array(str(tmp_path / "wide.tif"))
    assert loaded.data.dtype == np.uint16 and loaded.data[1, 1].tolist() == [255 * 256, 31 * 256, 32 * 256]


# ---- 6. min-is-white: inverted where exact, else kept and said ----------------------------------


@pytest.mark.parametrize(("dtype", "inverted"), [(np.uint8, [[255, 254], [253, 0]]), (np.uint16, [[65535, 65534],
                                                  [65533, 0]]), (bool, [[True, False], [False, True]])])
def test_min_is_white_unsigned_and_bilevel_are_inverted(tmp_path: Path, dtype: Any, inverted: Any) -> None:
    import tifffile

    stored = np.array([[0, 1], [2, -1]]).astype(dtype) if dtype is not bool else np.array([[0, 1], [1, 0]], bool)
    tifffile.imwrite(tmp_path / "white.tif", stored, photometric="miniswhite")
    loaded = io.read_array(str(tmp_path / "white.tif"))
    assert loaded.data.tolist() == inverted
    assert "min-is-white values inverted (0 is black)" in loaded.notes
    assert loaded.metadata.dropped == ()


def test_a_bool_mask_tifffile_writes_by_default_reads_as_its_complement(tmp_path: Path) -> None:
    """What docs/files.md warns of: tifffile writes a bool array min-is-white unless told, so the
    mask reads inverted, and a pad's zeros are the complement's False."""
    import tifffile

    mask = np.zeros((3, 4), bool)
    mask[1, 1:3] = True
    tifffile.imwrite(tmp_path / "m.tif", mask)
    with tifffile.TiffFile(tmp_path / "m.tif") as written:
        assert written.pages[0].photometric == tifffile.PHOTOMETRIC.MINISWHITE
    result = run("crop-pad", tmp_path / "m.tif", "-o", tmp_path / "o.npy", "--shape", "5,6")
    assert result.exit_code == 0 and "  note: min-is-white values inverted (0 is black)" in result.stderr.splitlines()
    out = np.load(tmp_path / "o.npy")
    np.testing.assert_array_equal(out[1:4, 1:5], ~mask)
    assert not out[0].any() and not out[:, 0].any()
    # written min-is-black, it reads back as the mask
    tifffile.imwrite(tmp_path / "b.tif", mask, photometric="minisblack")
    assert run("crop-pad", tmp_path / "b.tif", "-o", tmp_path / "b.npy", "--shape", "5,6", "-q").exit_code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy")[1:4, 1:5], mask)


@pytest.mark.parametrize("dtype", [np.float32, np.int16])
def test_min_is_white_float_and_signed_are_kept_and_a_warning_says_so(tmp_path: Path, dtype: Any) -> None:
    import tifffile

    stored = np.array([[0.0, 0.25], [-3, 7]]).astype(dtype)
    tifffile.imwrite(tmp_path / "white.tif", stored, photometric="miniswhite")
    loaded = io.read_array(str(tmp_path / "white.tif"))
    assert np.array_equal(loaded.data, stored)
    result = run("crop-pad", tmp_path / "white.tif", "-o", tmp_path / "out.tif", "--shape", "2,2")
    assert result.exit_code == 0, result.output
    name = np.dtype(dtype).name
    said = (f"the TIFF min-is-white photometric ({name} values kept as stored, so a viewer shows the output "
            "inverted) cannot be carried; dropped")
    assert f"Warning: {tmp_path / 'out.tif'}: {said}" in result.stderr.splitlines()
    assert np.array_equal(io.read_array(str(tmp_path / "out.tif")).data, stored)


# ---- 7. image-like results of any channel count read back as one image ---------------------------


def test_space_to_depth_of_an_rgb_tiff_is_undone_exactly(tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    data = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "rgb.tiff", data, photometric="rgb")
    assert run("space-to-depth", tmp_path / "rgb.tiff", "-o", tmp_path / "s.tiff", "--blocksize", "2").exit_code == 0
    header = io.read_header(str(tmp_path / "s.tiff"))
    assert (header.shape, header.layout, header.pages) == ((4, 4, 12), "HWC", 1)
    result = run("depth-to-space", tmp_path / "s.tiff", "-o", tmp_path / "back.tiff", "--blocksize", "2")
    assert result.exit_code == 0, result.output
    assert np.array_equal(io.read_array(str(tmp_path / "back.tiff")).data, data)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int16])
@pytest.mark.parametrize("channels", [2, 3, 5])
def test_an_image_tiff_of_any_channels_crops_to_an_image_twice(tmp_path: Path, rng: np.random.Generator,
                                                               dtype: Any, channels: int) -> None:
    import tifffile

    data = rng.integers(0, 100, (8, 8, channels)).astype(dtype)
    tifffile.imwrite(tmp_path / "in.tiff", data, photometric="minisblack", planarconfig="contig")
    assert run("crop-pad", tmp_path / "in.tiff", "-o", tmp_path / "c.tiff", "--shape", "6,6").exit_code == 0
    once = io.read_array(str(tmp_path / "c.tiff"))
    assert (once.layout, once.pages) == ("HWC", 1)
    assert np.array_equal(once.data, data[1:7, 1:7])
    assert run("crop-pad", tmp_path / "c.tiff", "-o", tmp_path / "cc.tiff", "--shape", "4,4").exit_code == 0
    assert np.array_equal(io.read_array(str(tmp_path / "cc.tiff")).data, data[2:6, 2:6])


def test_a_channel_cropped_to_one_is_still_read_whole(tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    data = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "rgb.tiff", data, photometric="rgb")
    result = run("crop-pad", tmp_path / "rgb.tiff", "-o", tmp_path / "one.tiff", "--shape", "8,8,1")
    assert result.exit_code == 0, result.output
    assert np.array_equal(io.read_array(str(tmp_path / "one.tiff")).data.reshape(8, 8, 1), data[:, :, 1:2])


def test_grey_and_alpha_from_a_png_or_stripped_is_one_tiff_image(tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile
    from PIL import Image

    data = rng.integers(0, 256, (8, 8, 2), dtype=np.uint8)
    Image.fromarray(data, mode="LA").save(tmp_path / "la.png")
    tifffile.imwrite(tmp_path / "la.tiff", data, photometric="minisblack", planarconfig="contig")
    for source, flags in ((tmp_path / "la.png", ()), (tmp_path / "la.tiff", ("--strip",))):
        out = tmp_path / f"la{len(flags)}.tiff"
        assert run("crop-pad", source, "-o", out, "--shape", "6,6", *flags).exit_code == 0
        loaded = io.read_array(str(out))
        assert (loaded.layout, loaded.pages) == ("HWC", 1) and np.array_equal(loaded.data, data[1:7, 1:7])
        with Image.open(out) as image:
            assert image.mode == "LA" and np.array_equal(np.asarray(image), data[1:7, 1:7])


def test_a_tensor_of_three_axes_stays_pages(tmp_path: Path, rng: np.random.Generator) -> None:
    """Without an image's axes, (3, 8, 10) float32 is three pages, not 3 x 8 pixels of 10 channels:
    a stack of grey images (NHW)."""
    data = rng.random((3, 8, 10), dtype=np.float32)
    io.write_array(data, str(tmp_path / "t.tiff"))
    loaded = io.read_array(str(tmp_path / "t.tiff"))
    assert loaded.pages == 3 and loaded.layout == "NHW" and np.array_equal(loaded.data, data)


# ---- 8. work a small file can cause in tifffile's series reader is bounded --------------------------


def self_subifds_tiff(path: Path, count: int) -> Path:
    """A 16 x 16 uint8 page whose SubIFDs tag (330) holds ``count`` pointers to the page itself."""
    tags = [(256, 3, 1, SIDE), (257, 3, 1, SIDE), (258, 3, 1, 8), (259, 3, 1, 1), (262, 3, 1, 1), (273, 4, 1, 0),
            (277, 3, 1, 1), (278, 3, 1, SIDE), (279, 4, 1, SIDE * SIDE), (330, 4, count, 0)]
    pointers_at = 8 + 2 + 12 * len(tags) + 4
    data_at = pointers_at + 4 * count
    entries = b""
    for tag, kind, n, value in tags:
        value = {273: data_at, 330: pointers_at if count > 1 else 8}.get(tag, value)
        short = kind == 3
        entries += struct.pack("<HHIHH", tag, kind, n, value, 0) if short else struct.pack("<HHII", tag, kind, n, value)
    path.write_bytes(b"II*\0" + struct.pack("<IH", 8, len(tags)) + entries + struct.pack("<I", 0)
                     + struct.pack(f"<{count}I", *[8] * count) + bytes(range(256)))
    return path


@pytest.mark.parametrize("count", [1, 30000])
def test_subifds_pointing_back_at_their_page_are_refused_at_once(tmp_path: Path, count: int) -> None:
    """tifffile's series reader parsed each of 30,000 SubIFDs in full, each with its 30,000 pointers: 13 s."""
    path = self_subifds_tiff(tmp_path / "subifds.tif", count)
    started = time.monotonic()
    for command in (["info", path], ["crop-pad", path, "-o", tmp_path / "o.tif", "--shape", "4,4"]):
        line = one_error(run(*command), path)
        assert "SubIFD" in line, line
    assert time.monotonic() - started < 5


def test_a_pyramid_of_subifds_still_reads(tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    data = rng.integers(0, 255, (64, 64), dtype=np.uint8)
    with tifffile.TiffWriter(tmp_path / "pyramid.tif") as tif:
        tif.write(data, subifds=2, tile=(16, 16))
        tif.write(data[::2, ::2], subfiletype=1, tile=(16, 16))
        tif.write(data[::4, ::4], subfiletype=1, tile=(16, 16))
    assert np.array_equal(io.read_array(str(tmp_path / "pyramid.tif")).data, data)


@pytest.mark.parametrize(("logged", "said"), [
    ("<tifffile.TiffPage 2 @8> incorrect StripByteCounts", "tifffile: page 2: incorrect StripByteCounts"),
    ("<tifffile.TiffTag 262 @58> raised ValueError('65535')", "tifffile: raised ValueError('65535')"),
    ("<TiffTag.fromfile> raised TiffFileError('invalid value offset 9')",
     "tifffile: raised TiffFileError('invalid value offset 9')"),
])
def test_tifffiles_object_names_are_left_out_of_its_lines(logged: str, said: str) -> None:
    """The review found "<TiffTag.fromfile> raised TiffFileError(...)" in a message: the pattern
    knew tifffile's objects only as "<tifffile.Tiff...>"."""
    import logging

    from geomcli.io import _tiff

    collect = _tiff._Collect([])
    collect.emit(logging.LogRecord("tifffile", logging.ERROR, __file__, 1, logged, None, None))
    assert collect.damage == [said]


@pytest.mark.parametrize("planar", [0, 3, 65535, (1, 0)], ids=["0", "3", "65535", "two-values"])
@pytest.mark.parametrize("compression", ["zlib", "jpeg"])
def test_a_planar_configuration_tiff_has_not_is_refused(tmp_path: Path, planar: Any, compression: str) -> None:
    """An RGB page of 2 strips whose PlanarConfiguration became 3: tifffile shaped it (3, 24, 32)
    and decoded 2 strips into it, the rest of the output whatever memory held (993 of 2304 values
    differed between two runs of crop-pad)."""
    import tifffile

    path = tmp_path / "planar.tif"
    data = np.arange(24 * 32 * 3, dtype=np.uint8).reshape(24, 32, 3)
    tifffile.imwrite(path, data, photometric="rgb", rowsperstrip=16, compression=compression, metadata=None)
    raw = bytearray(path.read_bytes())
    with tifffile.TiffFile(path) as tif:
        entry = tif.pages[0].tags["PlanarConfiguration"]
        values = planar if isinstance(planar, tuple) else (planar,)
        struct.pack_into(f"<I{len(values)}H", raw, entry.offset + 4, len(values), *values)  # count, inline values
    path.write_bytes(bytes(raw))
    said = (f"Error: {path}: not a readable TIFF (its PlanarConfiguration is {planar}; TIFF has 1, chunky, and 2, "
            "planar)")
    assert one_error(run("crop-pad", path, "-o", tmp_path / "out.npy", "--shape", "24,32"), path) == said
    assert not (tmp_path / "out.npy").exists()


def good_and_bad_tiffs(folder: Path) -> None:
    """good.tif, two 8x8 pages, and bad.tif, the same with its second IFD's tag count past any IFD's."""
    import tifffile

    tifffile.imwrite(folder / "good.tif", np.zeros((2, 8, 8), np.uint8))
    data = bytearray((folder / "good.tif").read_bytes())
    with tifffile.TiffFile(folder / "good.tif") as tif:
        second = tif.pages[1].offset
    data[second: second + 2] = b"\xff\xff"
    (folder / "bad.tif").write_bytes(data)


def test_a_tiffs_damage_is_its_own_not_that_of_one_read_beside_it(tmp_path: Path) -> None:
    """tifffile's log is one logger: each open's handler took every thread's lines, so a batch's
    header threads gave one TIFF's damage to another read at the same time ('s3://b/small.tif:
    not a readable TIFF (tifffile: corrupted tag list of page 2 @90256 ...)', the offset of
    another file's IFD), and a dry run refused a good file for a damaged one beside it. Each
    takes its own thread's lines now, and the logger propagates again once all are done."""
    import logging
    import threading

    from geomcli.io import _tiff

    good_and_bad_tiffs(tmp_path)
    failed: list[str] = []

    def beside() -> None:
        with pytest.raises(GeomError, match=r"bad.tif: not a readable TIFF \(tifffile: corrupted tag list") as error:
            io.read_header(str(tmp_path / "bad.tif"))
        failed.append(str(error.value))

    with _tiff._tiff(str(tmp_path / "good.tif"), "good.tif") as (tif, notes):
        thread = threading.Thread(target=beside)
        thread.start()
        thread.join()
        assert len(tif.pages) == 2
    assert notes == [] and len(failed) == 1
    assert logging.getLogger("tifffile").propagate


def test_a_tiffs_damage_is_found_where_log_records_name_no_thread(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A program that uses geomcli as a library and sets logging.logThreads = False (logging's
    documented saving) has records whose thread is None: each open's handler, taking only the
    records of its own thread (2e7801e), took none, and a damaged TIFF was read as a good one of
    fewer pages. The handler asks which thread emits, not the record."""
    import logging


    good_and_bad_tiffs(tmp_path)
    monkeypatch.setattr(logging, "logThreads", False)
    with pytest.raises(GeomError, match=r"bad.tif: not a readable TIFF \(tifffile: corrupted tag list"):
        io.read_header(str(tmp_path / "bad.tif"))
