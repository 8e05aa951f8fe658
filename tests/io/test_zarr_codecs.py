"""zarr chunks that decode past what their chunk can need: one error line, in little memory."""

from __future__ import annotations

import functools
import shlex
import struct
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import run
from test_hostile_inputs import one_error, peak_run

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")

GEOMCLI = shlex.join([sys.executable, "-m", "geomcli"])


def zarr_of_chunk(folder: Path, codec: str, chunk: bytes) -> Path:
    """An 8x8x3 uint8 array of one chunk, compressed by ``codec``, that chunk's bytes replaced."""
    path = folder / "bomb.zarr"
    compressor = {"zstd": zarr.codecs.ZstdCodec(), "gzip": zarr.codecs.GzipCodec()}[codec]
    array = zarr.create_array(str(path), shape=(8, 8, 3), chunks=(8, 8, 3), dtype="uint8", compressors=[compressor])
    array[...] = 7
    (path / "c" / "0" / "0" / "0").write_bytes(chunk)
    return path


def undeclared_zstd(blocks: int) -> bytes:
    """A zstd frame that declares no content size, of ``blocks`` RLE blocks of 128 KiB zeros (4 bytes each)."""
    block = 1 << 17
    frame = b"\x28\xb5\x2f\xfd" + b"\x00" + b"\x38"  # no size, a 128 KiB window
    for index in range(blocks):
        header = (index == blocks - 1) | 1 << 1 | block << 3  # last, RLE, its size
        frame += struct.pack("<I", header)[:3] + b"\x00"
    return frame


BOMBS = {
    "zstd-declared": ("zstd", lambda: numcodecs.Zstd(level=1).encode(np.zeros(512 << 20, np.uint8))),
    "zstd-undeclared": ("zstd", lambda: undeclared_zstd(4096)),
    # level 1: 0.7 s, not 1.8, for 2.3 MB, not 0.5 (the decoder takes any level alike)
    "gzip": ("gzip", lambda: numcodecs.GZip(level=1).encode(np.zeros(512 << 20, np.uint8))),
}


@pytest.mark.parametrize("bomb", BOMBS)
def test_a_chunk_inflating_past_its_size_is_refused_in_little_memory(tmp_path: Path, bomb: str) -> None:
    """zarr decoded a chunk whole before looking at its size: a 32 KB zstd chunk of this 8x8x3
    array took 1 GiB twice over (2.1 GB resident), then 'cannot reshape array of size 1073741824'."""
    codec, make = BOMBS[bomb]
    source = zarr_of_chunk(tmp_path, codec, make())
    code, stderr, peak = peak_run(f"{GEOMCLI} resize {source} -o {tmp_path / 'out.npy'} --sizes 4,4 --layout HWC")
    assert code == 1
    assert one_error(stderr, source) == (f"a chunk could not be read, transformed or written (ValueError: a {codec} "
                                         "chunk of 8x8x3 uint8 decodes past the 7552 bytes it can need)")
    assert peak < 250, peak  # 512 MiB of zeros and more before
    assert not (tmp_path / "out.npy").exists()


@pytest.mark.parametrize("codec", ["zstd", "gzip"])
def test_chunks_within_their_size_read_as_zarr_writes_them(tmp_path: Path, codec: str) -> None:
    source = zarr_of_chunk(tmp_path, codec, b"")
    compressor = {"zstd": numcodecs.Zstd(level=3), "gzip": numcodecs.GZip(level=5)}[codec]
    data = np.arange(192, dtype=np.uint8).reshape(8, 8, 3)
    (source / "c" / "0" / "0" / "0").write_bytes(compressor.encode(data))
    result = run("crop-pad", source, "-o", tmp_path / "out.npy", "--shape", "8,8", "--layout", "HWC")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), data)


def test_an_undeclared_zstd_frame_of_a_chunk_shape_past_memory_is_one_error_line(tmp_path: Path) -> None:
    """A frame that declares no size gets a buffer of its chunk's bound up to 4 GiB only: this
    chunk shape's would be 18 * 10**15 bytes, imagecodecs' OverflowError."""
    source = zarr_of_chunk(tmp_path, "zstd", undeclared_zstd(1))
    meta = (source / "zarr.json").read_text().replace('"chunk_shape": [\n        8,\n        8,\n        3\n      ]',
                                                       '"chunk_shape": [100000, 100000, 100000]')
    assert "100000" in meta
    (source / "zarr.json").write_text(meta)
    result = run("resize", source, "-o", tmp_path / "out.npy", "--sizes", "4,4", "--layout", "HWC")
    assert result.exit_code == 1
    assert one_error(result.stderr, source).startswith("a chunk could not be read, transformed or written (ValueError")


V2_COMPRESSORS = {"zlib": "Error -3 while decompressing data: incorrect header check",
                  "bz2": "Invalid data stream",
                  "lzma": "Input format not supported by decoder",
                  "gzip": "Not a gzipped file (b'\\x07\\x07')"}


@pytest.mark.parametrize("output", ["out.npy", "out.zarr"])
@pytest.mark.parametrize("compressor", V2_COMPRESSORS)
def test_a_damaged_chunk_of_a_v2_compressor_is_one_error_line_naming_the_input(tmp_path: Path, compressor: str,
                                                                               output: str) -> None:
    """numcodecs passes on its decompressor's own error: zlib's and lzma's (no ValueError) were a
    traceback, bz2's and gzip's OSError 'Error: Invalid data stream' (no file) or the output's
    'cannot write'."""
    source = tmp_path / "v2.zarr"
    array = zarr.create_array(str(source), shape=(8, 8, 3), chunks=(8, 8, 3), dtype="uint8", zarr_format=2,
                              compressors=numcodecs.get_codec({"id": compressor}))
    array[...] = 7
    (source / "0.0.0").write_bytes(b"\x07" * 192)  # the chunk stored raw
    result = run("crop-pad", source, "-o", tmp_path / output, "--shape", "4,4", "--layout", "HWC")
    assert result.exit_code == 1
    assert one_error(result.stderr, source) == ("a chunk could not be read, transformed or written (ValueError: "
                                                f"a {compressor} chunk of 8x8x3 uint8 is damaged "
                                                f"({V2_COMPRESSORS[compressor]}))")
    assert not (tmp_path / output).exists()


def numcodecs_zarr(folder: Path, compressor: str, zarr_format: int) -> Path:
    """An 8x8x3 uint8 array of one chunk, compressed by numcodecs' ``compressor``: a v2 array's
    compressor, or a v3 array's ``numcodecs.*`` codec."""
    path = folder / f"v{zarr_format}.zarr"
    names = {"zlib": "Zlib", "gzip": "GZip", "bz2": "BZ2", "lzma": "LZMA"}
    with warnings.catch_warnings():  # zarr's: numcodecs.* codecs are in no v3 specification
        warnings.simplefilter("ignore")
        codec = {"id": compressor} if zarr_format == 2 else getattr(zarr.codecs.numcodecs, names[compressor])()
        array = zarr.create_array(str(path), shape=(8, 8, 3), chunks=(8, 8, 3), dtype="uint8",
                                  zarr_format=zarr_format, compressors=codec)
    array[...] = np.arange(192, dtype=np.uint8).reshape(8, 8, 3)
    return path


def chunk_file(path: Path) -> Path:
    return path / "0.0.0" if (path / "0.0.0").exists() else path / "c" / "0" / "0" / "0"


@functools.cache
def zeros_encoded(compressor: str) -> bytes:
    """256 MiB of zeros encoded by ``compressor``, once for both zarr formats; lzma at preset 0
    (its default took 3.7 s; the decoder reads the preset from the stream, the size is the same)."""
    config = {"id": compressor, "preset": 0} if compressor == "lzma" else {"id": compressor}
    return bytes(numcodecs.get_codec(config).encode(np.zeros(256 << 20, np.uint8)))


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("compressor", V2_COMPRESSORS)
def test_a_numcodecs_chunk_inflating_past_its_size_is_refused_in_little_memory(tmp_path: Path, compressor: str,
                                                                              zarr_format: int) -> None:
    """numcodecs decoded a chunk whole before zarr looked at its size: a 242-byte bz2 chunk of
    this 8x8x3 array took 300 MB, and some kilobytes of one, gigabytes."""
    source = numcodecs_zarr(tmp_path, compressor, zarr_format)
    chunk_file(source).write_bytes(zeros_encoded(compressor))
    code, stderr, peak = peak_run(f"{GEOMCLI} crop-pad {source} -o {tmp_path / 'out.npy'} --shape 4,4 --layout HWC")
    assert code == 1
    assert one_error(stderr, source) == ("a chunk could not be read, transformed or written (ValueError: a "
                                         f"{compressor} chunk of 8x8x3 uint8 decodes past the 7552 bytes it can need)")
    assert peak < 200, peak  # 256 MiB of zeros and more before
    assert not (tmp_path / "out.npy").exists()


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("compressor", V2_COMPRESSORS)
def test_numcodecs_chunks_within_their_size_read_as_zarr_writes_them(tmp_path: Path, compressor: str,
                                                                     zarr_format: int) -> None:
    source = numcodecs_zarr(tmp_path, compressor, zarr_format)
    result = run("crop-pad", source, "-o", tmp_path / "out.npy", "--shape", "8,8", "--layout", "HWC")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), np.arange(192, dtype=np.uint8).reshape(8, 8, 3))


@pytest.mark.parametrize("compressor", V2_COMPRESSORS)
def test_a_numcodecs_chunk_cut_short_is_damaged(tmp_path: Path, compressor: str) -> None:
    source = numcodecs_zarr(tmp_path, compressor, 2)
    chunk = chunk_file(source)
    chunk.write_bytes(chunk.read_bytes()[:-8])
    result = run("crop-pad", source, "-o", tmp_path / "out.npy", "--shape", "8,8", "--layout", "HWC")
    assert result.exit_code == 1
    assert one_error(result.stderr, source).startswith("a chunk could not be read, transformed or written "
                                                       f"(ValueError: a {compressor} chunk of 8x8x3 uint8 is damaged (")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_string_chunk_declaring_more_items_than_it_holds_is_refused_in_little_memory(tmp_path: Path,
                                                                                       zarr_format: int) -> None:
    """numcodecs made an array of the count a vlen-utf8 chunk's first 4 bytes declare before it
    read on: 2**31 - 1 of them was 16 GiB of object pointers, a MemoryError's traceback (and a
    float32 chunk read as strings, 8 GiB)."""
    source = tmp_path / "strings.zarr"
    array = zarr.create_array(str(source), shape=(4, 4), chunks=(4, 4), dtype=str, zarr_format=zarr_format,
                              compressors=None)
    array[...] = np.full((4, 4), "ab")
    chunk = source / "0.0" if zarr_format == 2 else source / "c" / "0" / "0"
    chunk.write_bytes(struct.pack("<I", 2**31 - 1) + chunk.read_bytes()[4:])
    code, stderr, peak = peak_run(f"{GEOMCLI} crop-pad {source} -o {tmp_path / 'out.zarr'} --shape 2,2")
    assert code == 1
    assert one_error(stderr, source) == ("a chunk could not be read, transformed or written (ValueError: a "
                                         "vlen-utf8 chunk of 4x4 StringDType() declares 2147483647 items)")
    assert peak < 200, peak
    assert not (tmp_path / "out.zarr").exists()


DECLARING = {"zstd-2": ("zstd", 2), "blosc-2": ("blosc", 2), "lz4-2": ("lz4", 2), "blosc-3": ("blosc", 3),
             "numcodecs.zstd-3": ("zstd", 3), "numcodecs.blosc-3": ("blosc", 3), "numcodecs.lz4-3": ("lz4", 3)}


def declaring_zarr(folder: Path, case: str) -> Path:
    """An 8x8x3 uint8 array of one chunk compressed by a codec whose buffer declares its size."""
    codec, zarr_format = DECLARING[case]
    path = folder / f"{case}.zarr"
    names = {"zstd": "Zstd", "blosc": "Blosc", "lz4": "LZ4"}
    with warnings.catch_warnings():  # zarr's: numcodecs.* codecs are in no v3 specification
        warnings.simplefilter("ignore")
        compressor = (numcodecs.get_codec({"id": codec}) if zarr_format == 2
                      else getattr(zarr.codecs.numcodecs, names[codec])() if case.startswith("numcodecs.")
                      else zarr.codecs.BloscCodec())
        array = zarr.create_array(str(path), shape=(8, 8, 3), chunks=(8, 8, 3), dtype="uint8",
                                  zarr_format=zarr_format, compressors=compressor)
    array[...] = np.arange(192, dtype=np.uint8).reshape(8, 8, 3)
    return path


@pytest.mark.parametrize("case", DECLARING)
def test_a_chunk_declaring_more_than_its_size_is_refused_in_little_memory(tmp_path: Path, case: str) -> None:
    """numcodecs makes a buffer of the size a zstd, blosc or lz4 buffer declares, then decodes into
    it: an 8 KB zstd chunk of a v2 array's 8x8x3 took 350 MB resident (zarr's v3 zstd was bounded)."""
    source = declaring_zarr(tmp_path, case)
    codec = DECLARING[case][0]
    chunk_file(source).write_bytes(numcodecs.get_codec({"id": codec}).encode(np.zeros(256 << 20, np.uint8)))
    code, stderr, peak = peak_run(f"{GEOMCLI} crop-pad {source} -o {tmp_path / 'out.npy'} --shape 4,4 --layout HWC")
    assert code == 1
    assert one_error(stderr, source) == ("a chunk could not be read, transformed or written (ValueError: a "
                                         f"{codec} chunk of 8x8x3 uint8 declares 268435456 bytes, past the 7552 "
                                         "it can need)")
    assert peak < 200, peak
    assert not (tmp_path / "out.npy").exists()


@pytest.mark.parametrize("case", DECLARING)
def test_chunks_declaring_their_size_read_as_zarr_writes_them(tmp_path: Path, case: str) -> None:
    source = declaring_zarr(tmp_path, case)
    result = run("crop-pad", source, "-o", tmp_path / "out.npy", "--shape", "8,8", "--layout", "HWC")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), np.arange(192, dtype=np.uint8).reshape(8, 8, 3))


def test_an_undeclared_zstd_frame_of_a_v2_chunk_is_bounded_as_a_v3_ones(tmp_path: Path) -> None:
    source = declaring_zarr(tmp_path, "zstd-2")
    chunk_file(source).write_bytes(undeclared_zstd(4096))
    code, stderr, peak = peak_run(f"{GEOMCLI} crop-pad {source} -o {tmp_path / 'out.npy'} --shape 4,4 --layout HWC")
    assert code == 1
    assert one_error(stderr, source) == ("a chunk could not be read, transformed or written (ValueError: a "
                                         "zstd chunk of 8x8x3 uint8 decodes past the 7552 bytes it can need)")
    assert peak < 200, peak
