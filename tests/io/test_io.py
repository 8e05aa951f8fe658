"""geomcli.io: round trips per format and dtype, sniffing, hostile files, atomic writes, laziness."""

from __future__ import annotations

import errno
import importlib.util
import io as bytes_io
import os
import pickle
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import time
import types
import zlib
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from conftest import ALL_DTYPES, FileFactory, fifo_feeding, make_array, needs_imagemagick
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geomcli import io
from geomcli.errors import GeomError

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
BF16 = np.dtype(ml_dtypes.bfloat16)


def _bytes(path: str | Path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _put(path: str | Path, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same dtype, shape and values (NaN-free data; strings and bfloat16 compare too)."""
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.all(a == b))


# ---- formats and sniffing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("a.png", "png"),
        ("a.PNG", "png"),
        ("a.jpg", "jpeg"),
        ("a.jpeg", "jpeg"),
        ("a.JFIF", "jpeg"),
        ("a.jpe", "jpeg"),
        ("a.apng", "png"),
        ("a.bmp", "bmp"),
        ("a.gif", "gif"),
        ("a.webp", "webp"),
        ("dir.v2/a.npy", "npy"),
        ("a.tif", "tiff"),
        ("a.TIFF", "tiff"),
        ("-", "npy"),
    ],
)
def test_format_for_path_by_extension(path: str, expected: str) -> None:
    assert io.format_for_path(path) == expected


def test_format_for_path_override_wins_and_is_validated() -> None:
    assert io.format_for_path("a.png", "npy") == "npy"
    assert io.format_for_path("a.bin", "JPG") == "jpeg"
    assert io.format_for_path("-", "tif") == "tiff"
    with pytest.raises(GeomError, match=r"unknown format 'exr'; expected one of png, jpeg, .*tiff"):
        io.format_for_path("a.png", "exr")


@pytest.mark.parametrize(
    ("path", "found"), [("a.exr", "unknown extension '.exr'"), ("noext", "no file extension")]
)
def test_format_for_path_unknown_extension_names_the_supported_ones(path: str, found: str) -> None:
    with pytest.raises(
        GeomError,
        match=rf"^{path}: {found}; expected one of \.png, \.apng, \.jpg, \.jpeg, \.jfif, \.jpe, .*\.npy, \.tif, "
              r"\.tiff, \.zarr \(or give --format\)$",
    ):
        io.format_for_path(path)


def test_formats_constants() -> None:
    assert io.FORMATS == ("png", "jpeg", "bmp", "gif", "webp", "npy", "tiff")
    assert io.IMAGE_FORMATS == {"png", "jpeg", "bmp", "gif", "webp"}
    assert io.DEFAULT_MAX_PIXELS == 2**31


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "png"),
        (b"\xff\xd8\xff\xe0\0\x10JFIF", "jpeg"),
        (b"II*\x00\x08\0\0\0", "tiff"),
        (b"MM\x00*\0\0\0\x08", "tiff"),
        (b"II+\x00\x08\x00\x00\x00", "tiff"),  # BigTIFF
        (b"MM\x00+\x00\x08\x00\x00", "tiff"),
        (b"\x93NUMPY\x01\x00v\x00", "npy"),
        (b"BM6\x0c\0\0\0\0", "bmp"),
        (b"GIF87a\x10\x00", "gif"),
        (b"GIF89a\x10\x00", "gif"),
        (b"RIFF\x24\0\0\0WEBPVP8L", "webp"),
        (b"RIFF\x24\0\0\0WAVEfmt ", None),
        (b"\x89PNG", None),  # too short to be sure
        (b"", None),
        (b"hello world, no magic here", None),
    ],
)
def test_sniff_format_every_magic(head: bytes, expected: str | None) -> None:
    assert io.sniff_format(head) == expected


@pytest.mark.parametrize("fmt", io.FORMATS)
def test_sniff_format_agrees_with_our_writers(tmp_path: Path, fmt: str) -> None:
    data = np.zeros((4, 6, 3), np.uint8) if fmt not in ("gif",) else np.zeros((4, 6), np.uint8)
    path = tmp_path / f"a.{fmt}"
    io.write_array(data, str(path))
    assert io.sniff_format(_bytes(path)[:16]) == fmt


# ---- round trips -------------------------------------------------------------------------------


FILE_DTYPES = [dtype for dtype in ALL_DTYPES if dtype.kind != "T"]  # StringDType: see below


@pytest.mark.parametrize("dtype", [*FILE_DTYPES, np.dtype(ml_dtypes.float8_e4m3fn)], ids=str)
@pytest.mark.parametrize("shape", [(2, 3, 4), (), (0, 5)], ids=["3d", "0d", "empty"])
@pytest.mark.parametrize("mmap", [True, False])
def test_npy_round_trip_every_dtype(
    tmp_path: Path, rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...], mmap: bool
) -> None:
    data = make_array(rng, shape, dtype)
    path = str(tmp_path / "a.npy")
    io.write_array(data, path)
    loaded = io.read_array(path, mmap=mmap)
    assert _equal(loaded.data, data)
    assert (loaded.format, loaded.layout, loaded.source, loaded.notes) == ("npy", None, path, ())


@pytest.mark.parametrize("suffix", [".npy", ".tiff", ".png"])
def test_stringdtype_arrays_have_no_file_form_and_say_how_to_get_one(tmp_path: Path, suffix: str) -> None:
    """numpy 2's variable-width strings are a kernel type, but .npy holds them only pickled."""
    path = tmp_path / f"s{suffix}"
    with pytest.raises(GeomError, match=r": StringDType\(\) strings have no file form without pickling; give them as"):
        io.write_array(np.array(["a", "bc"], np.dtypes.StringDType()), str(path))
    assert not path.exists()


def test_npy_bfloat16_header_names_the_type(tmp_path: Path) -> None:
    # np.save would write '<V2' and the type would be lost on the way back
    path = str(tmp_path / "b.npy")
    io.write_array(np.arange(4).astype(BF16), path)
    assert b"'descr': 'bfloat16'" in _bytes(path)
    assert io.read_header(path).dtype == BF16


def test_npy_fortran_order_and_big_endian_survive(tmp_path: Path) -> None:
    data = np.asfortranarray(np.arange(12, dtype=">i4").reshape(3, 4))
    path = str(tmp_path / "f.npy")
    np.save(path, data)
    for mmap in (True, False):
        loaded = io.read_array(path, mmap=mmap).data
        assert loaded.dtype == np.dtype(">i4") and np.array_equal(loaded, data)


def test_npy_memmap_is_read_only_and_only_when_asked(npy_file: FileFactory) -> None:
    path, data = npy_file((4, 5), np.float32)
    mapped = io.read_array(path).data
    assert isinstance(mapped, np.memmap) and not mapped.flags.writeable
    plain = io.read_array(path, mmap=False).data
    assert not isinstance(plain, np.memmap) and np.array_equal(plain, data)


TIFF_DTYPES = [
    np.dtype(d)
    for d in [
        "bool",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    ]
]


@pytest.mark.parametrize("dtype", TIFF_DTYPES, ids=str)
@pytest.mark.parametrize(
    ("shape", "layout"), [((6, 7), "HW"), ((4, 6, 7), "NHW"), ((2, 3, 6, 7), None)]
)
def test_tiff_round_trip(
    tmp_path: Path,
    rng: np.random.Generator,
    dtype: np.dtype,
    shape: tuple[int, ...],
    layout: str | None,
) -> None:
    data = make_array(rng, shape, dtype)
    path = str(tmp_path / "a.tiff")
    io.write_array(data, path)
    loaded = io.read_array(path)
    assert _equal(loaded.data, data)
    assert (loaded.format, loaded.layout) == ("tiff", layout)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("channels", [3, 4])
def test_tiff_rgb_is_hwc(
    tmp_path: Path, rng: np.random.Generator, dtype: Any, channels: int
) -> None:
    import tifffile

    data = make_array(rng, (5, 6, channels), np.dtype(dtype))
    path = str(tmp_path / "rgb.tif")
    io.write_array(data, path)
    with tifffile.TiffFile(path) as tif:
        assert tif.pages.first.photometric == tifffile.PHOTOMETRIC.RGB
    loaded = io.read_array(path)
    assert _equal(loaded.data, data) and loaded.layout == "HWC"


def test_tiff_multipage_stack_header_and_memmap(tiff_file: FileFactory) -> None:
    path, data = tiff_file((4, 32, 48), np.uint16)
    header = io.read_header(path)
    assert (header.format, header.shape, header.dtype, header.pages, header.layout) == (
        "tiff",
        (4, 32, 48),
        np.dtype(np.uint16),
        4,
        "NHW",  # pages of grey: a stack of images
    )
    assert header.file_size == os.path.getsize(path)
    mapped = io.read_array(path).data
    assert isinstance(mapped, np.memmap) and not mapped.flags.writeable
    assert np.array_equal(mapped, data)
    assert not isinstance(io.read_array(path, mmap=False).data, np.memmap)


def test_tiff_compressed_is_read_not_mapped(tiff_file: FileFactory) -> None:
    path, data = tiff_file((3, 16, 16), np.int32, compression="zlib")
    loaded = io.read_array(path).data
    assert not isinstance(loaded, np.memmap) and _equal(loaded, data)


@pytest.mark.parametrize("compression", [None, "zlib"])
def test_a_tiled_tiff_is_read_a_few_tiles_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    compression: str | None) -> None:
    """tifffile reads 256 MiB of tiles at a time: a 20000x20000 uint16 page of tiles (800 MB)
    took 1.57 GB. The batch is lowered to 512 KiB here, to show it on an 8 MB page."""
    import tracemalloc

    import tifffile

    from geomcli.io import _tiff

    path = str(tmp_path / "tiles.tif")
    data = np.random.default_rng(42).integers(0, 1 << 16, (2048, 2048), dtype=np.uint16)  # (zlib keeps its size)
    tifffile.imwrite(path, data, tile=(256, 256), compression=compression)
    monkeypatch.setattr(_tiff, "_READ_BYTES", 1 << 19)
    io.read_array(path, mmap=False)  # the imports
    tracemalloc.start()
    try:
        loaded = io.read_array(path, mmap=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert _equal(loaded.data, data)
    assert peak < data.nbytes * 3 // 2, (peak, data.nbytes)  # 3 times the page, before


# TIFF compressions a plain install reads and writes (imagecodecs is a dependency), by tifffile's names
LOSSLESS_TIFF = ["lzw", "packbits", "zlib", "deflate", "zstd", "lzma"]


@pytest.mark.parametrize(("compression", "predictor"), [*((c, False) for c in LOSSLESS_TIFF),
                                                       *((c, True) for c in LOSSLESS_TIFF if c != "packbits")])
def test_tiffs_compressed_by_tifffile_read_back_exactly(tmp_path: Path, rng: np.random.Generator, compression: str,
                                                       predictor: bool) -> None:
    import tifffile

    data = rng.integers(0, 60000, (37, 45, 3), dtype=np.uint16)
    path = tmp_path / f"{compression}.tif"
    tifffile.imwrite(path, data, photometric="rgb", compression=compression, predictor=predictor, rowsperstrip=10)
    loaded = io.read_array(str(path))
    assert _equal(loaded.data, data)
    assert loaded.metadata.compression == {"deflate": "zlib"}.get(compression, compression)


def test_a_jpeg_compressed_tiff_by_tifffile_reads_as_tifffile_reads_it(tmp_path: Path) -> None:
    import tifffile

    y, x = np.mgrid[0:32, 0:48]
    data = np.dstack([x * 5, y * 7, x + y]).astype(np.uint8)  # smooth: JPEG keeps it close
    path = tmp_path / "jpeg.tif"
    tifffile.imwrite(path, data, photometric="rgb", compression="jpeg")
    loaded = io.read_array(str(path))
    assert loaded.metadata.compression == "jpeg"
    assert _equal(loaded.data, tifffile.imread(path))
    assert np.abs(loaded.data.astype(int) - data).max() < 16


@pytest.mark.parametrize("compression", [*(c for c in LOSSLESS_TIFF if c != "deflate"), "jpeg"])
def test_every_compression_the_cli_offers_writes_and_reads_back(tmp_path: Path, rng: np.random.Generator,
                                                               compression: str) -> None:
    from click.testing import CliRunner

    from geomcli.cli import cli

    source = tmp_path / "in.npy"
    data = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    np.save(source, data)
    out = tmp_path / "out.tif"
    result = CliRunner().invoke(cli, ["crop-pad", str(source), "-o", str(out), "--shape", "10,16,3", "--layout", "HWC",
                                      "--compression", compression], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    loaded = io.read_array(str(out))
    assert loaded.metadata.compression == compression and loaded.data.shape == (10, 16, 3)
    if compression == "jpeg":
        assert "lossy" in result.stderr
    else:
        assert "Warning" not in result.stderr and _equal(loaded.data, data[5:15, 7:23])


_COMPRESSED_CASES = [
    *((dtype, shape) for dtype in ("bool", "uint8", "int8", "uint16", "float32", "complex64")
      for shape in [(6, 8), (6, 8, 1), (6, 8, 2), (6, 8, 3), (6, 8, 4), (3, 6, 8), (2, 6, 8, 3)]),
    ("uint8", (2, 70000)), ("uint8", (2, 70000, 3)), ("uint8", (70000, 2)), ("uint8", (70000, 2, 3)),
]


@pytest.mark.parametrize("compression", ["zlib", "lzma", "zstd", "lzw", "jpeg", "packbits"])
def test_the_compression_rule_a_plan_asks_is_what_writing_does(compression: str, tmp_path: Path) -> None:
    from geomcli.io import _tiff

    for dtype, shape in _COMPRESSED_CASES:
        path = str(tmp_path / f"{dtype}_{'x'.join(map(str, shape))}.tif")
        data = np.ones(shape, dtype)
        refusal = _tiff.compression_refusal(compression, np.dtype(dtype), shape)
        if refusal is None:
            io.write_array(data, path, options=io.WriteOptions(compression=compression))
            assert io.read_array(path).data.shape == shape, (dtype, shape)
        else:  # the run's error names the output, as the plan's (io.check_writable) does
            assert compression == "jpeg" and (dtype != "uint8" or shape[-1] in (2, 4, 8) or 70000 in shape[-2:])
            with pytest.raises(GeomError, match=f"^{re.escape(path)}: {re.escape(refusal)}$"):
                io.write_array(data, path, options=io.WriteOptions(compression=compression))
            with pytest.raises(GeomError, match=f"^{re.escape(path)}: {re.escape(refusal)}$"):
                io.check_writable(np.dtype(dtype), shape, "tiff", path, compression=compression)
            assert not os.path.exists(path)


def test_tiff_big_endian_values_in_native_order(tiff_file: FileFactory) -> None:
    path, data = tiff_file((2, 5, 6), np.uint16, byteorder=">")
    for mmap in (True, False):
        loaded = io.read_array(path, mmap=mmap).data
        assert loaded.dtype.isnative and np.array_equal(loaded, data)


def test_tiff_planar_rgb_becomes_hwc(tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    hwc = rng.integers(0, 256, (8, 10, 3), dtype=np.uint8)
    path = str(tmp_path / "planar.tiff")
    tifffile.imwrite(path, np.moveaxis(hwc, -1, 0), photometric="rgb", planarconfig="separate")
    loaded = io.read_array(path)
    assert _equal(np.asarray(loaded.data), hwc) and loaded.layout == "HWC"
    # no note: a TIFF output stores it planar again (tests/io/test_tiff_stacks.py)
    assert not loaded.notes and loaded.metadata.axes == "SYX"
    assert io.read_header(path).shape == (8, 10, 3)


@pytest.mark.parametrize(
    ("dtype", "shape", "match"),
    [
        ("<U4", (2, 2), r"TIFF cannot hold <U4 data; write \.npy$"),
        (BF16, (2, 2), r"TIFF cannot hold bfloat16 data; write \.npy$"),
        # tifffile took it, and failed with an IndexError
        ("float64", (4,), r"TIFF holds images of rows and columns, not a 1-D array \(shape \(4,\)\); write \.npy$"),
    ],
)
def test_tiff_refuses_what_it_cannot_hold(tmp_path: Path, dtype: Any, shape: tuple[int, ...], match: str) -> None:
    with pytest.raises(GeomError, match=match):
        io.write_array(np.zeros(shape, dtype), str(tmp_path / "a.tiff"))
    assert os.listdir(tmp_path) == []


PNG_CASES = [
    (np.uint8, (6, 7)),
    *[(np.uint8, (6, 7, c)) for c in (1, 2, 3, 4)],
    (np.uint16, (6, 7)),
    *[(np.uint16, (6, 7, c)) for c in (1, 2, 3, 4)],
    (bool, (6, 7)),
]


@pytest.mark.parametrize(("dtype", "shape"), PNG_CASES, ids=str)
def test_png_round_trip(
    tmp_path: Path, rng: np.random.Generator, dtype: Any, shape: tuple[int, ...]
) -> None:
    dtype = np.dtype(dtype)
    data = (
        rng.integers(0, np.iinfo(dtype).max + 1, shape).astype(dtype)
        if dtype.kind == "u"
        else (rng.integers(0, 2, shape).astype(bool))
    )
    path = str(tmp_path / "a.png")
    io.write_array(data, path)
    loaded = io.read_array(path)
    # a single channel comes back as HW: PNG has no way to say "HWC with C=1"
    expected = data[:, :, 0] if data.ndim == 3 and data.shape[2] == 1 else data
    assert _equal(loaded.data, expected)
    assert loaded.layout == ("HW" if expected.ndim == 2 else "HWC")
    header = io.read_header(path)
    assert (header.shape, header.dtype, header.pages) == (expected.shape, expected.dtype, 1)


@pytest.mark.parametrize(
    ("fmt", "shape", "dtype"),
    [
        ("bmp", (5, 6), np.uint8),
        ("bmp", (5, 6, 3), np.uint8),
        ("bmp", (5, 6), bool),
        ("gif", (5, 6), np.uint8),
        ("webp", (5, 6, 3), np.uint8),
        ("webp", (5, 6, 4), np.uint8),
    ],
)
def test_lossless_image_formats_round_trip(
    tmp_path: Path, rng: np.random.Generator, fmt: str, shape: tuple[int, ...], dtype: Any
) -> None:
    data = (
        rng.integers(0, 256, shape).astype(np.uint8)
        if dtype is np.uint8
        else rng.integers(0, 2, shape) > 0
    )
    path = str(tmp_path / f"a.{fmt}")
    io.write_array(data, path)
    loaded = io.read_array(path)
    assert _equal(loaded.data, data) and loaded.format == fmt


@pytest.mark.parametrize("shape", [(16, 24), (16, 24, 3)])
def test_jpeg_decodes_to_uint8_of_the_same_shape(
    tmp_path: Path, rng: np.random.Generator, shape: tuple[int, ...]
) -> None:
    data = rng.integers(0, 256, shape).astype(np.uint8)
    path = str(tmp_path / "a.jpg")
    io.write_array(data, path)
    loaded = io.read_array(path)
    assert loaded.data.shape == shape and loaded.data.dtype == np.uint8 and loaded.format == "jpeg"


@pytest.mark.parametrize("shape", [(600, 800), (600, 800, 3)], ids=["grey", "rgb"])
def test_a_big_grey_or_rgb_image_is_copied_once_into_its_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              shape: tuple[int, ...]) -> None:
    """np.asarray of a Pillow image holds its rows twice beside Pillow's own (im.tobytes(): its
    encoded blocks, then their join): an 80 MP RGB JPEG peaked at 794 MB, where Pillow holds
    322 MB and the array 240 MB. The threshold of a big image is lowered to this one's size."""
    import tracemalloc

    from geomcli.io import _pillow

    rows, columns = np.indices(shape[:2])
    grey = ((rows * 3 + columns) % 251).astype(np.uint8)
    data = grey if len(shape) == 2 else np.stack([grey, grey ^ 0x55, 255 - grey], axis=-1)
    path = _put(tmp_path / "a.png", png_of(data))
    monkeypatch.setattr(_pillow, "_COPIED_ONCE", data.nbytes)
    io.read_array(path)  # the modules a first read imports are not what is measured
    tracemalloc.start()
    try:
        loaded = io.read_array(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert _equal(loaded.data, data)
    assert peak < os.path.getsize(path) + data.nbytes * 3 // 2, (peak, data.nbytes)  # was twice the array


@pytest.mark.parametrize("save", [{"lossless": True}, {"quality": 80}], ids=["lossless", "lossy"])
@pytest.mark.parametrize("mode", ["RGB", "RGBA"])
@pytest.mark.parametrize("picture", [False, True])
def test_a_big_still_webp_decoded_by_libwebp_is_pillows_pixels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              rng: np.random.Generator, save: dict[str, Any],
                                                              mode: str, picture: bool) -> None:
    """A still WebP of _WEBP_BY_LIBWEBP pixels or more is decoded by libwebp's own decoder (Pillow's
    way holds four RGBA canvases), lowered here to this one's size: the same values as Pillow's,
    turned upright by its EXIF orientation, its metadata kept."""
    from PIL import Image

    from geomcli.io import _pillow

    data = rng.integers(0, 256, (21, 34, len(mode)), dtype=np.uint8)
    if mode == "RGBA":
        data[..., 3] = rng.choice(np.array([0, 1, 128, 255], np.uint8), (21, 34))
    exif = Image.Exif()
    exif[0x0112] = 6  # turned 90 degrees clockwise to be upright
    path = str(tmp_path / "a.webp")
    Image.fromarray(data, mode).save(path, exif=exif.tobytes(), **save)
    with Image.open(path) as im:
        expected = np.rot90(np.asarray(im), -1)
    monkeypatch.setattr(_pillow, "_WEBP_BY_LIBWEBP", 21 * 34)
    loaded = io.read_picture(path) if picture else io.read_array(path)
    assert isinstance(loaded, io.Picture) == picture
    pixels = loaded.to_array() if isinstance(loaded, io.Picture) else loaded.data
    assert _equal(pixels, expected)
    assert loaded.metadata.exif is not None and loaded.orientation == 6


def test_a_big_still_webp_libwebp_cannot_decode_is_one_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             rng: np.random.Generator) -> None:
    from PIL import Image

    from geomcli.io import _pillow

    path = str(tmp_path / "a.webp")
    Image.fromarray(rng.integers(0, 256, (21, 34, 3), dtype=np.uint8)).save(path, lossless=True)
    whole = _bytes(path)
    _put(path, whole[:40] + bytes(len(whole) - 40))  # its image data zeros past its header
    monkeypatch.setattr(_pillow, "_WEBP_BY_LIBWEBP", 21 * 34)
    with pytest.raises(GeomError, match=r"a\.webp: not a readable WEBP \(libwebp could not decode its image data\)$"):
        io.read_array(path)


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("mode", ["RGB", "L", "CMYK", "P"])
def test_an_image_copied_into_its_array_is_np_asarrays_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            rng: np.random.Generator, mode: str,
                                                            orientation: int) -> None:
    """The copy through Pillow's PPM writer, for every image it takes (one turned upright by its
    EXIF orientation, a CMYK JPEG or a palette PNG made RGB): the array np.asarray gives."""
    from PIL import Image, ImageOps

    from geomcli.io import _pillow

    exif = Image.Exif()
    exif[0x0112] = orientation
    picture = Image.fromarray(rng.integers(0, 256, (7, 10, 3), dtype=np.uint8)).convert(mode)
    path = tmp_path / ("a.png" if mode == "P" else "a.jpg")
    picture.save(path, exif=exif.tobytes())
    upright = ImageOps.exif_transpose(Image.open(path))
    expected = np.asarray(upright if upright.mode in ("RGB", "L") else upright.convert("RGB"))
    monkeypatch.setattr(_pillow, "_COPIED_ONCE", 1)
    copies: list[Any] = []
    into = _pillow._Into
    monkeypatch.setattr(_pillow, "_Into", lambda *args: copies.append(into(*args)) or copies[-1])
    assert _equal(io.read_array(str(path)).data, expected)
    assert len(copies) == 1 and copies[0].written == expected.nbytes


@pytest.mark.parametrize("ppm", [b"P6\n# a comment\n8 6\n255\n", b"P6\n8 6\n255\n" + bytes(200)])
def test_a_pillow_writing_ppms_otherwise_still_gives_the_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               ppm: bytes) -> None:
    """The copy into the array relies on Pillow's PPM being a short header and the rows; a Pillow
    that wrote it otherwise (a comment, more bytes) gets np.asarray's array, not a traceback."""
    from PIL import Image

    from geomcli.io import _pillow

    data = np.arange(8 * 6 * 3, dtype=np.uint8).reshape(6, 8, 3)
    path = _put(tmp_path / "a.png", png_of(data))
    monkeypatch.setattr(_pillow, "_COPIED_ONCE", 1)
    Image.init()
    monkeypatch.setitem(Image.SAVE, "PPM", lambda im, fp, filename: fp.write(ppm + im.tobytes()))
    assert _equal(io.read_array(path).data, data)


@pytest.mark.parametrize("fmt", io.FORMATS)
def test_writes_are_byte_identical_run_to_run(
    tmp_path: Path, rng: np.random.Generator, fmt: str
) -> None:
    shape = (9, 11) if fmt == "gif" else (9, 11, 3)
    data = rng.integers(0, 256, shape).astype(np.uint8)
    first, second = tmp_path / f"1.{fmt}", tmp_path / f"2.{fmt}"
    io.write_array(data, str(first))
    io.write_array(data, str(second))
    assert _bytes(first) == _bytes(second)
    if fmt == "png":
        assert b"tIME" not in _bytes(first)


# ---- 16-bit PNG: imagecodecs where Pillow reads 8 bits --------------------------------------------

# Adam7 passes: first row, first column, row step, column step
ADAM7 = ((0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2), (1, 0, 2, 1))
# libpng's row filters, as imagecodecs names them (ALL: libpng's choice, row by row)
PNG_FILTERS = ("NONE", "SUB", "UP", "AVG", "PAETH", "ALL")


def png_of(data: np.ndarray, *, interlace: bool = False, filter: str = "ALL", level: int = 6) -> bytes:
    """A PNG of a uint8/uint16 HW or HWC array: by imagecodecs (libpng) with one row filter, or
    interlaced (Adam7, which neither imagecodecs nor Pillow writes) by hand, each pass's rows
    unfiltered."""
    import imagecodecs

    if not interlace:
        return bytes(imagecodecs.png_encode(data, level=level, filter=imagecodecs.PNG.FILTER[filter]))
    pixels = data.reshape(*data.shape[:2], -1)
    height, width, channels = pixels.shape
    rows = b""
    for y0, x0, dy, dx in ADAM7:
        sub = pixels[y0::dy, x0::dx]
        if sub.size:
            raw = np.ascontiguousarray(sub, sub.dtype.newbyteorder(">")).view(np.uint8).reshape(len(sub), -1)
            rows += np.hstack([np.zeros((len(raw), 1), np.uint8), raw]).tobytes()  # filter type 0
    ihdr = struct.pack(">IIBBBBB", width, height, 8 * data.itemsize, {1: 0, 2: 4, 3: 2, 4: 6}[channels], 0, 0, 1)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(rows)) + _chunk(b"IEND", b"")


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("filter", [*PNG_FILTERS, "adam7"])
def test_png16_every_filter_and_interlace(tmp_path: Path, rng: np.random.Generator, channels: int,
                                          filter: str, capsys: pytest.CaptureFixture[str]) -> None:
    data = rng.integers(0, 65536, (13, 17, channels), dtype=np.uint16).squeeze(axis=2 if channels == 1 else ())
    written = png_of(data, interlace=True) if filter == "adam7" else png_of(data, filter=filter)
    loaded = io.read_array(_put(tmp_path / "a.png", written))
    assert _equal(loaded.data, data) and loaded.notes == ()
    assert capsys.readouterr().err == ""  # libpng's notice about interlace handling is not passed on


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("interlace", [False, True])
@pytest.mark.parametrize("size", [(13, 17), (1, 1), (3, 2), (2, 9)])  # Adam7 passes left empty too
def test_an_8bit_png_reads_as_pillow_decodes_it(tmp_path: Path, rng: np.random.Generator, channels: int,
                                                interlace: bool, size: tuple[int, int]) -> None:
    from PIL import Image

    data = rng.integers(0, 256, (*size, channels), dtype=np.uint8).squeeze(axis=2 if channels == 1 else ())
    path = _put(tmp_path / "a.png", png_of(data, interlace=interlace))
    with Image.open(path) as im:
        assert np.array_equal(np.asarray(im), data)
    assert _equal(io.read_array(path).data, data)


@pytest.mark.parametrize("channels", [3, 4])
def test_png16_high_bytes_match_pillow_own_8bit_reading(
    tmp_path: Path, rng: np.random.Generator, channels: int
) -> None:
    # an independent oracle: Pillow reads these files as 8-bit, which must be the high bytes
    from PIL import Image

    data = rng.integers(0, 65536, (20, 30, channels), dtype=np.uint16)
    for interlace in (False, True):
        path = _put(tmp_path / "a.png", png_of(data, interlace=interlace))
        with Image.open(path) as im:
            eight = np.asarray(im)
        assert np.array_equal(io.read_array(path).data >> 8, eight)


@pytest.mark.parametrize("mode", ["L", "LA", "RGB", "RGBA"])
def test_an_8bit_png_is_pillows_own_with_the_metadata_fitted(rng: np.random.Generator, mode: str) -> None:
    """Written by Pillow at ImageMagick's level, 7: with the ICC profile, DPI and the EXIF (its
    dimensions set to the image's), and nothing else of what Pillow found when reading."""
    from PIL import Image

    from geomcli.io import _pillow

    channels = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}[mode]
    im = Image.fromarray(rng.integers(0, 256, (90, 70, channels), dtype=np.uint8).squeeze(), mode)
    icc = b"\0\0\2\x0cfake profile" * 20
    exif = Image.Exif()
    exif[0x010F] = "geomcli"
    metadata = io.Metadata(icc=icc, resolution=(300.0, 150.0), unit="inch", exif=exif.tobytes())
    ours, pillows = bytes_io.BytesIO(), bytes_io.BytesIO()
    _pillow.save(im, ours, "png", metadata)
    im.save(pillows, format="PNG", compress_level=7, icc_profile=icc, dpi=(300.0, 150.0),
            exif=_pillow.fitted_exif(exif.tobytes(), 70, 90))
    assert ours.getvalue() == pillows.getvalue()
    with Image.open(ours) as back:
        assert back.info["icc_profile"] == icc and back.info["dpi"] == pytest.approx((300.0, 150.0), abs=0.02)
        assert np.array_equal(np.asarray(back), np.asarray(im))


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_png16_keeps_icc_dpi_and_exif(tmp_path: Path, rng: np.random.Generator, channels: int) -> None:
    from PIL import Image

    data = rng.integers(0, 65536, (9, 11, channels), dtype=np.uint16).squeeze(axis=2 if channels == 1 else ())
    exif = Image.Exif()
    exif[0x010F] = "geomcli"
    metadata = io.Metadata(icc=b"\0\0\2\x0cfake profile", resolution=(300.0, 72.0), unit="inch",
                           exif=b"Exif\0\0" + exif.tobytes())
    path = str(tmp_path / "a.png")
    assert io.write_array(data, path, metadata=metadata) == ()
    loaded = io.read_array(path)
    assert _equal(loaded.data, data)
    assert loaded.metadata.icc == metadata.icc and loaded.metadata.dpi == pytest.approx((300.0, 72.0), abs=0.02)
    assert loaded.metadata.exif is not None and b"geomcli" in loaded.metadata.exif
    with Image.open(path) as im:  # a PNG other readers take: the chunks before the image data
        assert im.info["icc_profile"] == metadata.icc


def test_png16_of_a_strided_view(tmp_path: Path, rng: np.random.Generator) -> None:
    """A space-to-depth result is a view; imagecodecs refused it (ValueError, a traceback)."""
    data = rng.integers(0, 65536, (9, 11, 8), dtype=np.uint16)[:, :, ::2]
    path = str(tmp_path / "a.png")
    assert io.write_array(data, path) == ()
    assert _equal(io.read_array(path).data, data)


def test_png16_grey_written_by_pillow(tmp_path: Path, rng: np.random.Generator) -> None:
    from PIL import Image

    data = rng.integers(0, 65536, (15, 9), dtype=np.uint16)
    path = str(tmp_path / "g.png")
    Image.fromarray(data).save(path)
    assert _equal(io.read_array(path).data, data)


def _ppm(data: bytes) -> np.ndarray:
    fields = data.split(maxsplit=4)
    assert fields[0] == b"P6"
    width, height, maxval = int(fields[1]), int(fields[2]), int(fields[3])
    dtype = ">u2" if maxval > 255 else np.uint8
    return np.frombuffer(fields[4], dtype=dtype).reshape(height, width, 3)


@needs_imagemagick
def test_png16_rgb_agrees_with_imagemagick(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.integers(0, 65536, (10, 12, 3), dtype=np.uint16)
    path = _put(tmp_path / "a.png", png_of(data, filter="PAETH"))
    result = subprocess.run(["convert", path, "ppm:-"], capture_output=True, check=True, timeout=60)
    theirs = _ppm(result.stdout)
    assert np.array_equal(io.read_array(path).data, theirs)


def test_png16_samples_stay_16bit() -> None:
    loaded = io.read_array(str(SAMPLES / "gray16.png"))
    assert loaded.data.dtype == np.uint16 and loaded.data.max() > 255


# ---- image modes, orientation, animation ---------------------------------------------------------


def test_palette_png_is_expanded_with_a_note(tmp_path: Path) -> None:
    from PIL import Image

    im = Image.new("P", (4, 3))
    im.putpalette([10, 20, 30, 200, 100, 0] + [0] * 762)
    im.putpixel((1, 1), 1)
    path = str(tmp_path / "p.png")
    im.save(path)
    loaded = io.read_array(path)
    assert loaded.data.shape == (3, 4, 3) and loaded.data.dtype == np.uint8
    assert tuple(loaded.data[1, 1]) == (200, 100, 0) and tuple(loaded.data[0, 0]) == (10, 20, 30)
    assert loaded.notes == ("palette expanded to RGB",)
    assert io.read_header(path).shape == (3, 4, 3)
    im.save(path, transparency=0)
    loaded = io.read_array(path)
    assert loaded.data.shape == (3, 4, 4) and loaded.notes == ("palette expanded to RGBA",)
    assert loaded.data[0, 0, 3] == 0 and loaded.data[1, 1, 3] == 255



@pytest.mark.parametrize("second", [[0, 0, 0, 9, 9, 9, 99, 99, 99, 200, 200, 200], [0, 0, 0, 9, 9, 9, 99, 99, 99]],
                         ids=["map-of-its-own", "map-of-its-own-shorter"])
def test_a_palette_tiff_s_pages_are_expanded_each_through_its_own_map(tmp_path: Path, second: list[int]) -> None:
    """A multi-page palette TIFF whose pages have maps of their own (Pillow's save_all of palette
    images, one series of two pages) was expanded through the first page's map alone: page 2's
    label 1, (9, 9, 9), read as page 1's (255, 0, 0), without a word. Each page is expanded
    through its own map now, as Pillow shows each page."""
    from PIL import Image

    labels = (np.arange(12 * 16).reshape(12, 16) % 4).astype(np.uint8)
    first = Image.fromarray(labels)
    first.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255])
    other = Image.fromarray(labels)
    other.putpalette(second)
    path = str(tmp_path / "pages.tif")
    first.save(path, save_all=True, append_images=[other])
    expected = []
    with Image.open(path) as im:
        for index in range(2):
            im.seek(index)
            expected.append(np.asarray(im.convert("RGB")))
    loaded = io.read_array(path)
    assert loaded.data.shape == io.read_header(path).shape == (2, 12, 16, 3)
    assert tuple(loaded.data[1, 0, 1]) == (9, 9, 9)
    np.testing.assert_array_equal(loaded.data, np.stack(expected))


@pytest.mark.parametrize(
    ("mode", "dtype", "shape"),
    [
        ("1", bool, (3, 4)),
        ("L", np.uint8, (3, 4)),
        ("LA", np.uint8, (3, 4, 2)),
        ("I;16", np.uint16, (3, 4)),
    ],
)
def test_modes_map_to_dtypes(tmp_path: Path, mode: str, dtype: Any, shape: tuple[int, ...]) -> None:
    from PIL import Image

    path = str(tmp_path / "m.png")
    Image.new(mode, (4, 3)).save(path)
    loaded = io.read_array(path)
    assert (
        loaded.data.dtype == np.dtype(dtype) and loaded.data.shape == shape and loaded.notes == ()
    )


def test_corrupt_exif_is_a_note_not_a_warning(tmp_path: Path) -> None:
    # pytest turns warnings into errors: Pillow's "Corrupt EXIF data" must not escape
    from PIL import Image

    path = str(tmp_path / "bad-exif.jpg")
    Image.new("RGB", (9, 7)).save(path, exif=b"Exif\x00\x00MM\x00*\x00\x00\x00\x08\x00\x05")
    loaded = io.read_array(path)
    assert loaded.data.shape == (7, 9, 3)
    assert loaded.notes and loaded.notes[0].startswith("Pillow: Corrupt EXIF data")
    assert io.read_header(path).shape == (7, 9, 3)


def test_cmyk_jpeg_is_converted_to_rgb_with_a_note(tmp_path: Path) -> None:
    from PIL import Image

    path = str(tmp_path / "cmyk.jpg")
    Image.new("CMYK", (5, 4), (0, 255, 255, 0)).save(path)
    loaded = io.read_array(path)
    assert loaded.data.shape == (4, 5, 3) and loaded.notes == ("CMYK converted to RGB",)
    assert io.read_header(path).shape == (4, 5, 3)


def test_a_fifo_is_read_whole_and_not_mapped(tmp_path: Path) -> None:
    data = np.arange(12, dtype=np.int16).reshape(3, 4)
    buffer = bytes_io.BytesIO()
    np.save(buffer, data)
    with fifo_feeding(tmp_path / "pipe.npy", buffer.getvalue()) as fifo:
        loaded = io.read_array(str(fifo))
    assert _equal(loaded.data, data) and not isinstance(loaded.data, np.memmap)


@pytest.mark.parametrize("fmt", ["png", "npy", "tiff", "jpeg"])
def test_an_input_without_extension_is_sniffed(tmp_path: Path, fmt: str) -> None:
    data = np.arange(12, dtype=np.uint8).reshape(3, 4)
    io.write_array(data, str(tmp_path / "named"), format=fmt)
    loaded = io.read_array(str(tmp_path / "named"))
    assert loaded.format == fmt and loaded.data.shape == (3, 4)
    header = io.read_header(str(tmp_path / "named"))
    assert (header.format, header.shape) == (fmt, (3, 4))


def test_an_input_without_extension_or_magic_is_refused(tmp_path: Path) -> None:
    path = _put(tmp_path / "notes", b"hello world, no magic here")
    with pytest.raises(GeomError, match=r"notes: no file extension and unrecognised content \(expected one of png"):
        io.read_array(path)
    with pytest.raises(GeomError, match=r"photo: content is PNG, not NPY"):
        io.read_array(_put(tmp_path / "photo", _valid_bytes(tmp_path, "png")), format="npy")
    # an unknown extension is no invitation to guess, and outputs need a format
    with pytest.raises(GeomError, match=r"photo\.bin: unknown extension '\.bin'"):
        io.read_array(_put(tmp_path / "photo.bin", _valid_bytes(tmp_path, "png")))
    with pytest.raises(GeomError, match=r"out: no file extension"):
        io.write_array(np.zeros((2, 2), np.uint8), str(tmp_path / "out"))


def test_a_fifo_without_extension_is_sniffed(tmp_path: Path) -> None:
    import threading

    fifo = tmp_path / "63"
    os.mkfifo(fifo)
    payload = _valid_bytes(tmp_path, "png")

    def feed() -> None:
        with open(fifo, "wb") as f:
            f.write(payload)

    writer = threading.Thread(target=feed, daemon=True)  # no hang when the read fails
    writer.start()
    loaded = io.read_array(str(fifo))
    writer.join(timeout=10)
    assert loaded.format == "png" and loaded.data.ndim in (2, 3)


def test_a_fifo_nobody_writes_to_is_named_as_a_fifo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("geomcli.io._stream._WRITER_GRACE", 0.05)
    os.mkfifo(tmp_path / "x.png")
    with pytest.raises(GeomError, match=r"x\.png: not a regular file \(a FIFO\) and nothing came through it; "
                                        r"read it through '-' instead$"):
        io.read_array(str(tmp_path / "x.png"))


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for <(...)")
def test_process_substitution_and_dev_stdin_are_read(tmp_path: Path) -> None:
    """What a user types: <(cat x.png) is /dev/fd/63, a pipe without a name or extension."""
    photo = SAMPLES / "photo.png"
    shape = io.read_array(str(photo)).data.shape
    for command in (f"geomcli info <(cat {photo})", f"geomcli info /dev/stdin < {photo}"):
        result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60,
                                cwd=REPO, check=False, env={**os.environ, "PATH": os.path.dirname(sys.executable)
                                                            + os.pathsep + os.environ.get("PATH", "")})
        assert result.returncode == 0, result.stderr
        assert f"png {'×'.join(map(str, shape))} uint8" in result.stdout


def _with_exif_png(encoded: bytes, orientation: int) -> bytes:
    """Insert an eXIf chunk (written by Pillow's Exif) before the first IDAT of our encoder's PNG."""
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = orientation
    body = exif.tobytes()
    chunk = (
        struct.pack(">I", len(body))
        + b"eXIf"
        + body
        + struct.pack(">I", zlib.crc32(b"eXIf" + body))
    )
    at = encoded.index(b"IDAT") - 4
    return encoded[:at] + chunk + encoded[at:]


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_is_applied_the_same_on_both_png_paths(
    tmp_path: Path, orientation: int
) -> None:
    """Pillow's exif_transpose (8-bit) and our numpy table (16-bit) turn images the same way."""
    from PIL import Image

    eight = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    exif = Image.Exif()
    exif[0x0112] = orientation
    p8 = str(tmp_path / "a8.png")
    Image.fromarray(eight).save(p8, exif=exif.tobytes())
    p16 = _put(
        tmp_path / "a16.png",
        _with_exif_png(png_of(eight.astype(np.uint16) * 257), orientation),
    )
    upright8, upright16 = io.read_array(p8), io.read_array(p16)
    assert np.array_equal(upright8.data, upright16.data // 257)
    turned = orientation in (5, 6, 7, 8)
    assert upright8.data.shape == ((6, 4, 3) if turned else (4, 6, 3))
    assert io.read_header(p8).shape == io.read_header(p16).shape == upright8.data.shape
    assert upright8.notes == upright16.notes
    if orientation > 1:
        assert f"EXIF orientation {orientation}" in upright8.notes[0]
    assert np.array_equal(io.read_array(p8, auto_orient=False).data, eight)


def test_exif_rotated_jpeg(tmp_path: Path) -> None:
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = 6
    path = str(tmp_path / "r.jpg")
    Image.new("RGB", (12, 8), (200, 10, 10)).save(path, exif=exif.tobytes())
    loaded = io.read_array(path)
    assert loaded.data.shape == (12, 8, 3)
    assert loaded.notes == ("rotated 90 degrees clockwise by its EXIF orientation 6",)
    assert io.read_header(path).shape == (12, 8, 3)
    assert io.read_array(path, auto_orient=False).data.shape == (8, 12, 3)


@pytest.mark.parametrize("fmt", ["gif", "webp", "png"])
def test_animations_are_refused(tmp_path: Path, fmt: str) -> None:
    from PIL import Image

    frames = [Image.new("RGB", (8, 8), (40 * i, 0, 0)) for i in range(3)]
    path = str(tmp_path / f"anim.{fmt}")
    frames[0].save(path, save_all=True, append_images=frames[1:])
    with pytest.raises(GeomError, match=rf"^{path}: has 3 frames; "):
        io.read_array(path)


# ---- size limits and bombs ---------------------------------------------------------------------


def test_check_size_message() -> None:
    io.check_size((10, 10), 100, "x")
    with pytest.raises(
        GeomError,
        match=r"^big\.png: 10000000000 elements exceed the limit of 2147483648; "
        r"raise it with --max-pixels or GEOMCLI_MAX_PIXELS$",
    ):
        io.check_size((100000, 100000), io.DEFAULT_MAX_PIXELS, "big.png")


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png_header_only(width: int, height: int, depth: int = 8, colour: int = 2) -> bytes:
    """A PNG declaring a size, with a few bytes of (far too little) image data."""
    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", ihdr)
        + _chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + _chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("depth", [8, 16])
def test_png_bomb_is_refused_before_decoding(tmp_path: Path, depth: int) -> None:
    path = _put(tmp_path / "bomb.png", _png_header_only(100_000, 100_000, depth))
    with pytest.raises(GeomError, match=r"bomb\.png: 30000000000 elements exceed the limit"):
        io.read_array(path)
    # the header is still described, as declared
    assert io.read_header(path).shape == (100_000, 100_000, 3)


@pytest.mark.parametrize(("depth", "colour"), [(8, 2), (16, 0), (16, 2), (1, 0)])
def test_png_claiming_more_pixels_than_its_data_can_hold_is_refused_before_decoding(
    tmp_path: Path, depth: int, colour: int
) -> None:
    """Within the pixel limit, but 64 bytes cannot inflate to 40000x40000: refused at once, in little
    memory (the decoders take memory as the rows come; it once took 6 GB and 14 s, then failed)."""
    path = _put(tmp_path / "liar.png", _png_header_only(40_000, 40_000, depth, colour))
    start = time.perf_counter()
    with pytest.raises(GeomError, match=r"liar\.png: not a readable PNG \(truncated: its \d+ bytes of image data hold "
                                        r"at most \d+ of the \d+ its 40000x40000 frame needs\)$"):
        io.read_array(path, max_pixels=2**33)
    assert time.perf_counter() - start < 5
    assert io.read_header(path).shape[:2] == (40_000, 40_000)  # the header is still described


def test_animated_png_claiming_more_pixels_than_its_data_can_hold_is_refused_with_every_frame(
    tmp_path: Path,
) -> None:
    """--frames all read such an APNG's frames as whole, zeros past the data's end (2.7 GB for two
    20000x20000 grey frames), where --frames first refused it. Here 10 whole rows of 6000."""
    ihdr = struct.pack(">IIBBBBB", 6000, 6000, 8, 0, 0, 0, 0)
    data = zlib.compress(b"\0" * 6001 * 10)

    def frame_control(sequence: int) -> bytes:
        return _chunk(b"fcTL", struct.pack(">IIIIIHHBB", sequence, 6000, 6000, 0, 0, 1, 10, 0, 0))

    path = _put(tmp_path / "liar.png", b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr)
                + _chunk(b"acTL", struct.pack(">II", 2, 0)) + frame_control(0) + _chunk(b"IDAT", data)
                + frame_control(1) + _chunk(b"fdAT", struct.pack(">I", 2) + data) + _chunk(b"IEND", b""))
    for frames in ("first", "all"):
        with pytest.raises(GeomError, match=r"liar\.png: not a readable PNG \(truncated: its \d+ bytes of image "
                                            r"data hold at most \d+ of the 36000000 its 6000x6000 frame needs\)$"):
            io.read_array(path, frames=frames)
    # a whole first frame, and a later one of a row of 200: that one was read as whole, zeros past its rows
    whole = zlib.compress(b"\0" * 6001 * 6000, 9)
    later = _put(tmp_path / "later.png", b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr)
                 + _chunk(b"acTL", struct.pack(">II", 2, 0)) + frame_control(0) + _chunk(b"IDAT", whole)
                 + frame_control(1) + _chunk(b"fdAT", struct.pack(">I", 2) + zlib.compress(b"\0" + b"\xc8" * 6000))
                 + _chunk(b"IEND", b""))
    with pytest.raises(GeomError, match=r"later\.png: not a readable PNG \(truncated: a later frame's \d+ bytes of "
                                        r"image data hold at most \d+ of the 36000000 its 6000x6000 frame needs\)$"):
        io.read_array(later, frames="all")
    assert io.read_array(later, frames="first").data.shape == (6000, 6000)  # the first frame alone is whole


@pytest.mark.parametrize("shape", [(2000, 2000), (1000, 700, 3)])
def test_png_at_deflates_highest_ratio_is_read(tmp_path: Path, shape: tuple[int, ...]) -> None:
    """Zeros at zlib level 9, close to deflate's 1032:1: still within the bound."""
    data = np.zeros(shape, np.uint8)
    path = _put(tmp_path / "zeros.png", png_of(data, level=9))
    assert np.array_equal(io.read_array(path).data, data)


def test_pillows_bomb_limit_comes_back_when_threads_lift_it_at_once() -> None:
    """Pillow's limit is one process-wide number; geomcli lifts it while it decodes (its own
    --max-pixels is checked first) and the last thread out puts it back."""
    import threading

    from PIL import Image

    from geomcli.io import _pillow

    limit = Image.MAX_IMAGE_PIXELS
    both_inside, first_out = threading.Barrier(2), threading.Event()
    seen = []

    def lift(last_out: bool) -> None:
        with _pillow._unbounded():
            both_inside.wait()
            seen.append(Image.MAX_IMAGE_PIXELS)
            if last_out:
                first_out.wait()
        if not last_out:
            first_out.set()

    # the first in leaves first: with a save and restore per thread, the second in would
    # restore the limit it found, None
    threads = [threading.Thread(target=lift, args=(False,))]
    threads[0].start()
    while Image.MAX_IMAGE_PIXELS is not None:
        time.sleep(0.001)
    threads.append(threading.Thread(target=lift, args=(True,)))
    threads[1].start()
    for thread in threads:
        thread.join()
    assert seen == [None, None]
    assert Image.MAX_IMAGE_PIXELS == limit is not None


def test_image_over_a_low_limit_and_over_pillows_own(tmp_path: Path, png_file: FileFactory) -> None:
    path, _ = png_file((10, 10, 3))
    with pytest.raises(GeomError, match="300 elements exceed the limit of 299"):
        io.read_array(path, max_pixels=299)
    assert io.read_array(path, max_pixels=300).data.shape == (10, 10, 3)
    # a GIF whose screen is beyond Pillow's bomb limits: our message, no Pillow warning or error
    gif = (
        b"GIF89a"
        + struct.pack("<HH", 60000, 60000)
        + b"\0\0\0"
        + b","
        + struct.pack("<HHHH", 0, 0, 1, 1)
        + b"\0"
        + b"\x02\x02\x44\x01\0"
        + b";"
    )
    bomb = _put(tmp_path / "bomb.gif", gif)
    with pytest.raises(GeomError, match="3600000000 elements exceed the limit"):
        io.read_array(bomb)


def _npy_with_header(text: str, version: tuple[int, int] = (1, 0), data: bytes = b"") -> bytes:
    body = text.encode("latin1")
    size = "<H" if version == (1, 0) else "<I"
    prefix = 6 + 2 + struct.calcsize(size)
    pad = -(prefix + len(body) + 1) % 64
    body = body + b" " * pad + b"\n"
    return b"\x93NUMPY" + bytes(version) + struct.pack(size, len(body)) + body + data


def test_npy_huge_declared_shape_is_refused_without_allocating(tmp_path: Path) -> None:
    path = _put(
        tmp_path / "huge.npy",
        _npy_with_header(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000, 100000000), }"
        ),
    )
    with pytest.raises(GeomError, match=r"huge\.npy: 10000000000000000 elements exceed the limit"):
        io.read_array(path)
    # past the limit too: the file's real size says it is truncated
    with pytest.raises(
        GeomError,
        match=r"huge\.npy: not a readable NPY \(truncated: .* needs 80000000000000000 bytes",
    ):
        io.read_array(path, max_pixels=10**20)
    with pytest.raises(GeomError, match="truncated"):
        io.read_header(path)


@pytest.mark.parametrize(
    ("header", "version", "match"),
    [
        ("{'descr': '<f4', 'fortran_order': False}", (1, 0), "malformed header"),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }",
            (1, 0),
            "malformed header",
        ),
        ("{'descr': 'zz9', 'fortran_order': False, 'shape': (2,), }", (1, 0), "malformed header"),
        ("[1, 2, 3]", (1, 0), "malformed header"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,", (1, 0), "malformed header"),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
            (9, 9),
            r"unknown version 9\.9",
        ),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", (2, 0), r"truncated"),
    ],
)
def test_npy_malformed_headers(
    tmp_path: Path, header: str, version: tuple[int, int], match: str
) -> None:
    path = _put(tmp_path / "m.npy", _npy_with_header(header, version))
    with pytest.raises(GeomError, match=rf"^{path}: .*{match}"):
        io.read_array(path)
    with pytest.raises(GeomError):
        io.read_header(path)


def test_npy_header_longer_than_the_file(tmp_path: Path) -> None:
    path = _put(tmp_path / "h.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", 2**31) + b"{'descr'")
    with pytest.raises(GeomError, match="malformed header"):
        io.read_array(path)


class _CreatesFile:
    """Unpickling this opens (so creates) a file: the payload a hostile .npy would carry."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (self.path, "w"))


def _pickle_npy(path: Path, target: Path) -> str:
    data = np.empty(1, dtype=object)
    data[0] = _CreatesFile(str(target))
    np.save(path, data, allow_pickle=True)
    return str(path)


def test_object_npy_is_refused_and_never_unpickled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # first prove the payload is live: a trusting loader creates the file
    canary = tmp_path / "canary"
    loaded = np.load(_pickle_npy(tmp_path / "live.npy", canary), allow_pickle=True)
    loaded[0].close()
    assert canary.exists()
    target = tmp_path / "pwned"
    path = _pickle_npy(tmp_path / "evil.npy", target)

    def unpickler_reached(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the unpickler was called")

    monkeypatch.setattr(pickle, "load", unpickler_reached)
    monkeypatch.setattr(pickle, "loads", unpickler_reached)
    with pytest.raises(GeomError, match=r"evil\.npy: holds Python objects .* never unpickles"):
        io.read_array(path)
    with pytest.raises(GeomError, match="never unpickles"):
        io.read_array(path, mmap=False)
    with pytest.raises(GeomError, match="never unpickles"):
        io.read_header(path)
    assert not target.exists()


def test_object_arrays_are_never_pickled(tmp_path: Path) -> None:
    with pytest.raises(GeomError, match="never pickles"):
        io.write_array(np.array([{}, []], dtype=object), str(tmp_path / "o.npy"))
    assert os.listdir(tmp_path) == []


def _tiff_with_tags(path: Path, data: np.ndarray, patches: dict[int, int], **imwrite: Any) -> str:
    """A classic little-endian TIFF by tifffile, with LONG tag values patched in its first IFD."""
    import tifffile

    tifffile.imwrite(path, data, photometric="minisblack", metadata=None, **imwrite)
    raw = bytearray(_bytes(path))
    assert raw[:4] == b"II*\x00"
    ifd = struct.unpack_from("<I", raw, 4)[0]
    count = struct.unpack_from("<H", raw, ifd)[0]
    for i in range(count):
        entry = ifd + 2 + 12 * i
        tag = struct.unpack_from("<H", raw, entry)[0]
        if tag in patches:
            struct.pack_into("<HHII", raw, entry, tag, 4, 1, patches[tag])  # type LONG, count 1
    return _put(path, bytes(raw))


def test_tiff_declaring_a_million_squared_pixels(tmp_path: Path) -> None:
    path = _tiff_with_tags(
        tmp_path / "huge.tiff",
        np.zeros((4, 5), np.uint8),
        {256: 1_000_000, 257: 1_000_000, 278: 1_000_000},
    )
    with pytest.raises(GeomError, match=r"huge\.tiff: 1000000000000 elements exceed the limit"):
        io.read_array(path)
    assert io.read_header(path).shape == (1_000_000, 1_000_000)


def test_tiff_codec_that_imagecodecs_lacks(tmp_path: Path) -> None:
    import tifffile

    thunderscan = 32809
    assert thunderscan not in tifffile.TIFF.DECOMPRESSORS
    path = _tiff_with_tags(
        tmp_path / "thunder.tiff", np.ones((4, 5), np.uint8), {259: thunderscan}, compression="zlib"
    )
    with pytest.raises(GeomError, match=r"thunder\.tiff: compression THUNDERSCAN is not available \(imagecodecs has"):
        io.read_array(path)


@pytest.mark.parametrize(
    ("kind", "count", "value"),
    [(3, 2, struct.pack("<HH", 8, 8)), (1, 1, b"\x08\0\0\0"), (2, 2, b"\x08\0\0\0")],
    ids=["two-shorts", "byte", "ascii"],
)
def test_tiff_compression_tag_of_another_type_is_refused(tmp_path: Path, kind: int, count: int,
                                                           value: bytes) -> None:
    """tifffile hands back a tuple, bytes or str as the compression: not a number to look up."""
    path = _tiff_with_tags(tmp_path / "odd.tiff", np.ones((4, 5), np.uint8), {}, compression="zlib")
    raw = bytearray(_bytes(path))
    ifd = struct.unpack_from("<I", raw, 4)[0]
    for i in range(struct.unpack_from("<H", raw, ifd)[0]):
        entry = ifd + 2 + 12 * i
        if struct.unpack_from("<H", raw, entry)[0] == 259:
            struct.pack_into("<HHI4s", raw, entry, 259, kind, count, value)
    _put(path, bytes(raw))
    with pytest.raises(GeomError, match=r"odd\.tiff: not a readable TIFF \(malformed compression or predictor tag\)"):
        io.read_array(path)


def test_tiff_with_a_cut_page_chain_is_refused_not_shortened(tmp_path: Path) -> None:
    import tifffile

    path = str(tmp_path / "pages.tiff")
    tifffile.imwrite(path, np.ones((3, 8, 9), np.uint16), photometric="minisblack", metadata=None)
    with tifffile.TiffFile(path) as tif:
        last = tif.pages[2].offset
    # the first two pages are whole; the third page's IFD is gone
    _put(path, _bytes(path)[:last])
    with pytest.raises(
        GeomError, match=r"pages\.tiff: not a readable TIFF \(tifffile: .*invalid page"
    ):
        io.read_array(path)


def test_tiff_with_series_of_different_shapes(tmp_path: Path) -> None:
    import tifffile

    path = str(tmp_path / "two.tiff")
    with tifffile.TiffWriter(path) as tif:
        tif.write(np.zeros((4, 5), np.uint8), photometric="minisblack")
        tif.write(np.zeros((6, 7), np.uint8), photometric="minisblack")
    with pytest.raises(GeomError, match=r"two\.tiff: holds 2 image series .*\(4, 5\), \(6, 7\)"):
        io.read_array(path)


# ---- broken, lying, empty and missing inputs ------------------------------------------------------


def _valid_bytes(tmp_path: Path, fmt: str) -> bytes:
    rng = np.random.default_rng(7)
    shape = {"gif": (16, 20), "npy": (3, 16, 20), "tiff": (3, 16, 20)}.get(fmt, (16, 20, 3))
    dtype = np.float32 if fmt == "npy" else np.uint8
    data = rng.integers(0, 255, shape).astype(dtype)
    path = tmp_path / f"valid.{fmt}"
    io.write_array(data, str(path))
    return _bytes(path)


@pytest.mark.parametrize("fmt", io.FORMATS)
def test_truncated_files_at_several_offsets(tmp_path: Path, fmt: str) -> None:
    whole = _valid_bytes(tmp_path, fmt)
    cuts = sorted(
        {1, 2, 4, 8, 12, 16, 24, 33, 50, 64} | {len(whole) * k // 10 for k in range(1, 10)}
    )
    for cut in cuts:
        path = _put(tmp_path / f"cut.{fmt}", whole[:cut])
        with pytest.raises(GeomError, match=rf"^{path}: "):
            io.read_array(path)
        with pytest.raises(GeomError, match=rf"^{path}: "):
            io.read_array(path, mmap=False)


def test_png_cut_after_its_last_idat_is_an_error(tmp_path: Path, png_file: FileFactory) -> None:
    # Pillow alone would accept this; the chunk walk wants IEND
    path, _ = png_file((8, 8, 3))
    whole = _bytes(path)
    _put(path, whole[: whole.rindex(b"IEND") - 4])
    with pytest.raises(GeomError, match=r"a\.png: not a readable PNG \(truncated\)"):
        io.read_array(path)


def test_png_cut_in_its_iend_crc_is_an_error_and_junk_after_iend_is_not(tmp_path: Path,
                                                                        png_file: FileFactory) -> None:
    path, data = png_file((8, 8, 3))
    whole = _bytes(path)
    for kept in range(4):
        _put(path, whole[: len(whole) - 4 + kept])
        with pytest.raises(GeomError, match=r"a\.png: not a readable PNG \(truncated\)"):
            io.read_array(path)
    _put(path, whole + b"IEND and some junk")
    assert _equal(io.read_array(path).data, data)


@pytest.mark.parametrize("fmt", io.FORMATS)
def test_random_bytes_under_each_extension(tmp_path: Path, fmt: str) -> None:
    rng = np.random.default_rng(3)
    noise = rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    path = _put(tmp_path / f"noise.{fmt}", b"\x00" + noise)
    with pytest.raises(
        GeomError, match=rf"^{path}: not a readable {fmt.upper()} \(unrecognised content\)$"
    ):
        io.read_array(path)
    # with the right magic in front, the backend itself has to fail cleanly
    magic = _valid_bytes(tmp_path, fmt)[:16]
    path = _put(tmp_path / f"magic.{fmt}", magic + noise)
    with pytest.raises(GeomError, match=rf"^{path}: "):
        io.read_array(path)


@pytest.mark.parametrize("fmt", io.FORMATS)
def test_empty_files(tmp_path: Path, fmt: str) -> None:
    path = _put(tmp_path / f"empty.{fmt}", b"")
    with pytest.raises(GeomError, match=rf"^{path}: empty file$"):
        io.read_array(path)
    with pytest.raises(GeomError, match="empty file"):
        io.read_header(path)


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        ("png", "x.npy", "content is PNG, not NPY"),
        ("npy", "x.png", "content is NPY, not PNG"),
        ("tiff", "x.jpg", "content is TIFF, not JPEG"),
        ("jpeg", "x.tiff", "content is JPEG, not TIFF"),
        ("gif", "x.webp", "content is GIF, not WEBP"),
        ("webp", "x.bmp", "content is WEBP, not BMP"),
    ],
)
def test_a_file_is_read_by_its_content_when_its_extension_lies(
    tmp_path: Path, content: str, name: str, message: str
) -> None:
    """Mislabelled downloads are common: read as their content, as Pillow and ImageMagick read
    them, with one warning naming both; an explicit format must still agree with the content."""
    path = _put(tmp_path / name, _valid_bytes(tmp_path, content))
    assert io.read_array(path).format == content == io.read_header(path).format
    suffix = os.path.splitext(name)[1]
    assert io.mislabelled(path, content) == f"{content.upper()} content named {suffix}; read as {content.upper()}"
    assert io.mislabelled(path, io.format_for_path(path)) is None
    named = io.format_for_path(path)
    with pytest.raises(GeomError, match=rf"^{path}: {message}$"):
        io.read_array(path, format=named)


def test_missing_directory_and_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(GeomError, match=r"nope\.png: no such file$"):
        io.read_array(str(tmp_path / "nope.png"))
    folder = tmp_path / "folder.npy"
    folder.mkdir()
    with pytest.raises(GeomError, match=r"folder\.npy: is a directory$"):
        io.read_array(str(folder))
    plain = _put(tmp_path / "plain", b"x")
    with pytest.raises(GeomError, match=r"plain/a\.npy: not a directory"):
        io.read_header(plain + "/a.npy")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads anything")
def test_unreadable_file(tmp_path: Path, npy_file: FileFactory) -> None:  # pragma: no cover - root
    path, _ = npy_file()
    os.chmod(path, 0)
    with pytest.raises(GeomError, match=r"a\.npy: permission denied$"):
        io.read_array(path)


def test_unreadable_file_message(monkeypatch: pytest.MonkeyPatch, npy_file: FileFactory) -> None:
    # the same as above where the tests run as root: the read fails the way open() would
    path, _ = npy_file()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr("geomcli.io.open", refuse, raising=False)
    with pytest.raises(GeomError, match=r"a\.npy: permission denied$"):
        io.read_array(path)


@st.composite
def _mutations(draw: st.DrawFn) -> tuple[str, int, list[tuple[int, int]]]:
    fmt = draw(st.sampled_from((*io.FORMATS, "png16", "exif-jpeg", "apng", "zlib-tiff")))
    cut = draw(st.integers(0, 4000))
    flips = draw(st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), max_size=6))
    return fmt, cut, flips


def _fuzz_seed(tmp_path: Path, kind: str) -> tuple[str, bytes]:
    """A valid file to mutate: our writers' output, or a variant with more structure to break."""
    from PIL import Image

    if kind in io.FORMATS:
        return kind, _valid_bytes(tmp_path, kind)
    buffer = bytes_io.BytesIO()
    if kind == "png16":
        data = np.arange(16 * 20 * 3, dtype=np.uint16).reshape(16, 20, 3) * 60
        return "png", png_of(data, interlace=True)
    if kind == "exif-jpeg":
        exif = Image.Exif()
        exif[0x0112] = 6
        Image.new("RGB", (9, 7), (9, 99, 199)).save(buffer, "JPEG", exif=exif.tobytes())
        return "jpeg", buffer.getvalue()
    if kind == "apng":
        frames = [Image.new("RGB", (8, 8), (60 * i, 0, 0)) for i in range(3)]
        frames[0].save(buffer, "PNG", save_all=True, append_images=frames[1:])
        return "png", buffer.getvalue()
    import tifffile

    stack = np.arange(2 * 8 * 9, dtype=np.int32).reshape(2, 8, 9)
    tifffile.imwrite(buffer, stack, compression="zlib", predictor=True, photometric="minisblack")
    return "tiff", buffer.getvalue()


@settings(
    max_examples=int(os.environ.get("GEOMCLI_FUZZ_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=_mutations())
def test_fuzz_mutated_files_give_data_or_geomerror(
    tmp_path: Path, case: tuple[str, int, list[tuple[int, int]]]
) -> None:
    """Bit flips and cuts of valid files: success or GeomError, never another exception.

    GEOMCLI_FUZZ_EXAMPLES=20000 makes this a long fuzz run.
    """
    kind, cut, flips = case
    fmt, whole = _fuzz_seed(tmp_path, kind)
    mutated = bytearray(whole[: max(1, len(whole) - cut % len(whole))] if cut % 3 == 0 else whole)
    for at, value in flips:
        mutated[at % len(mutated)] = value
    path = _put(tmp_path / f"fuzz.{fmt}", bytes(mutated))
    for read in (lambda: io.read_array(path, max_pixels=10**6), lambda: io.read_header(path)):
        try:
            read()
        except GeomError:
            pass


@pytest.mark.parametrize("error", [ValueError, KeyError, IndexError, TypeError, OverflowError])
@pytest.mark.parametrize("helper", ["_layout", "_photometric", "_metadata"])
def test_a_bug_in_our_tiff_code_keeps_its_traceback(tiff_file: FileFactory, monkeypatch: pytest.MonkeyPatch,
                                                     helper: str, error: type[Exception]) -> None:
    """Only tifffile's exceptions mean a bad file; the same types from geomcli's code are bugs."""
    from geomcli.io import _tiff

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise error("a bug in geomcli")

    path, _ = tiff_file((8, 10), np.uint8)
    monkeypatch.setattr(_tiff, helper, broken)
    with pytest.raises(error, match="a bug in geomcli") as caught:
        io.read_array(path)
    assert not isinstance(caught.value, GeomError)


@pytest.mark.parametrize("error", [ValueError, IndexError, EOFError])
@pytest.mark.parametrize("helper", ["_target_mode", "_metadata", "_frames"])
def test_a_bug_in_our_pillow_code_keeps_its_traceback(png_file: FileFactory, monkeypatch: pytest.MonkeyPatch,
                                                       helper: str, error: type[Exception]) -> None:
    from geomcli.io import _pillow

    def broken(*args: Any) -> Any:
        raise error("a bug in geomcli")

    path, _ = png_file((8, 10, 3))
    monkeypatch.setattr(_pillow, helper, broken)
    with pytest.raises(error, match="a bug in geomcli") as caught:
        io.read_array(path)
    assert not isinstance(caught.value, GeomError)


def test_raised_in_is_the_innermost_of_ours_and_the_package() -> None:
    """An exception from geomcli code that the package called back is ours, not the package's."""
    import json

    from geomcli.io._base import check_size, raised_in

    with pytest.raises(ValueError, match="Expecting property name") as caught:
        json.loads("{")
    assert raised_in(caught.value, "json")
    with pytest.raises(GeomError, match="exceed the limit") as caught:
        json.loads("[7]", parse_int=lambda text: check_size((int(text), 2), 1, "x"))
    assert not raised_in(caught.value, "json")


# ---- stdin and stdout --------------------------------------------------------------------------


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=bytes_io.BytesIO(data)))


def _stdout(monkeypatch: pytest.MonkeyPatch, tty: bool = False) -> bytes_io.BytesIO:
    buffer = bytes_io.BytesIO()
    # no fileno(): io writes through .buffer, as it does for any stream in memory
    fake = types.SimpleNamespace(buffer=buffer, isatty=lambda: tty, flush=lambda: None)
    monkeypatch.setattr(sys, "stdout", fake)
    return buffer


@pytest.mark.parametrize("fmt", io.FORMATS)
def test_stdin_is_sniffed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fmt: str) -> None:
    whole = _valid_bytes(tmp_path, fmt)
    _stdin(monkeypatch, whole)
    loaded = io.read_array("-")
    assert loaded.format == fmt and loaded.source == "-"
    assert not isinstance(loaded.data, np.memmap)
    _stdin(monkeypatch, whole)
    header = io.read_header("-")
    assert header.format == fmt and header.file_size is None


def test_stdin_that_is_a_terminal_or_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = types.SimpleNamespace(buffer=bytes_io.BytesIO(b"x"), isatty=lambda: True)
    monkeypatch.setattr(sys, "stdin", terminal)
    with pytest.raises(GeomError, match=r"^<stdin>: is a terminal; pipe data in"):
        io.read_array("-")
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(GeomError, match=r"^<stdin>: no standard input$"):
        io.read_header("-")


def test_stdin_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _stdin(monkeypatch, b"")
    with pytest.raises(GeomError, match=r"^<stdin>: empty input$"):
        io.read_array("-")
    _stdin(monkeypatch, b"just some text")
    with pytest.raises(GeomError, match=r"^<stdin>: unrecognised content \(expected one of png, "):
        io.read_array("-")
    _stdin(monkeypatch, _valid_bytes(tmp_path, "png"))
    with pytest.raises(GeomError, match=r"^<stdin>: content is PNG, not NPY$"):
        io.read_array("-", format="npy")
    _stdin(monkeypatch, _valid_bytes(tmp_path, "npy")[:200])
    with pytest.raises(GeomError, match=r"^<stdin>: not a readable NPY \(truncated"):
        io.read_array("-")


@pytest.mark.parametrize("fmt", [None, "npy", "tiff", "png"])
def test_stdout_gets_the_same_bytes_as_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fmt: str | None
) -> None:
    data = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    path = tmp_path / f"a.{fmt or 'npy'}"
    io.write_array(data, str(path))
    out = _stdout(monkeypatch)
    io.write_array(data, "-", format=fmt)
    assert out.getvalue() == _bytes(path)


def test_binary_to_a_terminal_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _stdout(monkeypatch, tty=True)
    with pytest.raises(
        GeomError, match=r"^<stdout>: refusing to write binary NPY data to a terminal"
    ):
        io.write_array(np.zeros(3), "-")
    assert out.getvalue() == b""


# ---- writing: policy and atomicity -------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "shape", "name", "match"),
    [
        (
            np.float32,
            (4, 4),
            "a.png",
            r"a\.png: PNG cannot hold float32 data; write \.npy or \.tiff$",
        ),
        (np.float64, (4, 4, 3), "a.jpg", r"JPEG cannot hold float64 data; write \.npy or \.tiff$"),
        (np.complex64, (4, 4), "a.png", r"PNG cannot hold complex64 data; write \.npy or \.tiff$"),
        (np.int16, (4, 4), "a.webp", r"WEBP cannot hold int16 data; write \.npy or \.tiff$"),
        ("<U4", (4, 4), "a.png", r"PNG cannot hold <U4 data; write \.npy$"),
        (BF16, (4, 4), "a.png", r"PNG cannot hold bfloat16 data; write \.npy$"),
        (
            np.uint8,
            (4, 4, 12),
            "a.png",
            r"PNG holds 1 to 4 channels, not 12 \(shape \(4, 4, 12\)\); write \.npy or \.tiff$",
        ),
        (
            np.uint8,
            (1, 3, 4, 4),
            "a.png",
            r"PNG holds HW or HWC images, not shape \(1, 3, 4, 4\); write \.npy or \.tiff$",
        ),
        (
            np.uint16,
            (4, 4, 3),
            "a.jpg",
            r"JPEG cannot hold uint16 data; write \.png, \.npy or \.tiff$",
        ),
        (
            np.uint8,
            (4, 4, 4),
            "a.jpg",
            r"JPEG holds 1 or 3 channels, not 4 .*; write \.png, \.webp, \.gif, \.npy or \.tiff, or drop the "
            r"alpha channel for a JPEG: crop-pad --axes -1 --shape 3 \(in chain, its last step\) keeps the other "
            r"channels as stored, not flattened$",
        ),
        (
            np.uint8,
            (4, 4, 2),
            "a.bmp",
            r"BMP holds 1 or 3 channels, not 2 .*; write \.png, \.npy or \.tiff, or drop the alpha channel for a "
            r"BMP: crop-pad --axes -1 --shape 1 ",
        ),
        (np.uint8, (4, 4, 2), "a.webp", r"WEBP holds 3 or 4 channels, not 2 .*; write \.png, \.npy or \.tiff$"),
        (bool, (4, 4, 3), "a.png", r"PNG holds 1-bit images as HW only"),
        (np.uint8, (0, 4), "a.png", r"PNG cannot hold an empty image \(shape \(0, 4\)\)"),
    ],
)
def test_write_policy_names_the_formats_that_can_hold_it(
    tmp_path: Path, dtype: Any, shape: tuple[int, ...], name: str, match: str
) -> None:
    with pytest.raises(GeomError, match=match):
        io.write_array(np.zeros(shape, dtype), str(tmp_path / name))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["a" * 251 + ".npy", "é" * 125 + "a.npy"], ids=["ascii", "two-byte"])
def test_an_output_name_of_255_bytes_is_written_and_its_leftovers_are_its_own(tmp_path: Path, name: str) -> None:
    """Its temp file's name is cut to fit (it was ``.NAME.XXXXXXXX.tmp``, 269 bytes: `cannot write
    (File name too long)` for any name over 241 bytes), and a killed writer's leftovers are found
    for it alone, not for another name that starts with the same 240 bytes."""
    from geomcli.io import _atomic

    assert len(os.fsencode(name)) == 255
    for shift in ("", "a"):  # the cut falls on either byte of a two-byte character: never inside one
        fd, temp = _atomic._temp_beside(str(tmp_path / (shift + name)))
        os.close(fd)
        os.remove(temp)
        assert len(os.fsencode(os.path.basename(temp))) <= 255
        assert temp.encode("utf-8")  # a name that prints: no half character
    io.write_array(np.arange(3), str(tmp_path / name))
    assert os.listdir(tmp_path) == [name]
    with _atomic.atomic_folder(str(tmp_path / (name[:-5] + ".zarr"))) as folder:  # a zarr array's staging folder
        os.mkdir(folder)
    other = name[:-5] + "b.npy"
    for output in (name, other):
        os.close(_atomic._temp_beside(str(tmp_path / output))[0])
    assert len(_atomic.remove_leftovers(str(tmp_path / name))) == 1
    assert len(_atomic.remove_leftovers(str(tmp_path / other))) == 1
    assert sorted(os.listdir(tmp_path)) == sorted([name, name[:-5] + ".zarr"])


def test_a_long_name_not_in_utf_8_keeps_its_bytes_in_its_temp_name(tmp_path: Path) -> None:
    """A Latin-1 name (bytes 0xA9, which UTF-8 reads as continuations) is no UTF-8 character to
    keep whole: the cut stays where the length puts it (it went back to the first byte, the temp
    name ``.~HASH``, nothing of the output's name left in it)."""
    from geomcli.io import _atomic

    name = os.fsdecode(b"\xa9" * 251 + b".npy")
    fd, temp = _atomic._temp_beside(str(tmp_path / name))
    os.close(fd)
    kept = os.fsencode(os.path.basename(temp))
    assert len(kept) <= 255 and kept.startswith(b"." + b"\xa9" * 232 + b"~"), kept
    assert _atomic.remove_leftovers(str(tmp_path / name)) == [temp]


def test_holding_signals_leaves_an_ignored_one_ignored_for_processes_started_meanwhile() -> None:
    """nohup's SIGHUP: a LocalCluster starts its forkserver and workers while the signals are
    held, and they got SIG_DFL (exec resets a handler, not SIG_IGN): a closed terminal killed them."""
    import signal

    from geomcli.io import _atomic

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        release = _atomic.hold_signals()
        try:
            child = subprocess.run([sys.executable, "-c", "import signal; "
                                    "print(signal.getsignal(signal.SIGHUP) == signal.SIG_IGN)"],
                                   capture_output=True, text=True, check=True)
        finally:
            release()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert child.stdout == "True\n"


def test_a_temp_file_that_cannot_be_removed_is_named_and_the_first_error_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An append-only folder (chattr +a) takes new files but neither renames nor removes them:
    the error was the unlink's, `<the temp file>: Operation not permitted`, naming neither the
    output nor that the hidden file stays."""
    def refused(name: str, *args: Any) -> None:
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), name)

    monkeypatch.setattr(os, "replace", refused)
    monkeypatch.setattr(os, "unlink", refused)
    out = tmp_path / "a.npy"
    with pytest.raises(GeomError) as refusal:
        io.write_array(np.arange(3), str(out))
    monkeypatch.undo()
    [left] = os.listdir(tmp_path)
    assert str(refusal.value) == (f"{out}: cannot write (Operation not permitted); its temporary file "
                                  f"{tmp_path / left} is left (Operation not permitted)")


@pytest.mark.parametrize("mmap", [True, False])
def test_a_npy_the_system_cannot_read_is_not_called_unreadable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               mmap: bool) -> None:
    """Under prlimit --as (no memory to map it) or ulimit -n, a good file read `not a readable NPY
    ([Errno 12] Cannot allocate memory)`, as if it were damaged; TIFFs already said `cannot read`."""
    path = str(tmp_path / "a.npy")
    np.save(path, np.zeros((2, 3), np.float32))

    def no_memory(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))

    monkeypatch.setattr(np, "load", no_memory)
    with pytest.raises(GeomError, match=r"a\.npy: cannot read \(Cannot allocate memory\)$"):
        io.read_array(path, mmap=mmap)


def test_write_replaces_with_normal_permissions(tmp_path: Path) -> None:
    path = str(tmp_path / "a.npy")
    old = os.umask(0o027)
    try:
        io.write_array(np.zeros(3), path)
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == 0o640
    io.write_array(np.ones(3), path)
    assert np.array_equal(io.read_array(path).data, np.ones(3))


@pytest.mark.parametrize("entries", [
    [(0x01, 6), (0x04, 0), (0x20, 0)],  # u::rw, g::-, o::-
    [(0x01, 6), (0x02, 6, 1000), (0x04, 4), (0x10, 6), (0x20, 0)],  # u::rw, u:1000:rw, g::r, m::rw, o::-
], ids=["private", "named-user"])
@pytest.mark.parametrize("mapped", [False, True], ids=["in-memory", "mapped"])
def test_a_new_file_gets_the_mode_and_acl_a_plain_open_gets_under_a_default_acl(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entries: list[tuple[int, ...]], mapped: bool) -> None:
    """A folder whose default ACL keeps group and others out (setfacl -d -m g::-,o::-) got outputs
    of 0644, readable by all, where cp and open() make 0600: the mode was 0666 less the umask,
    which the kernel does not use where a default ACL is. The kernel's own answer is the oracle."""
    from geomcli.io import _mapped

    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1 if mapped else _mapped.MAP_OUTPUT_BYTES)
    folder = tmp_path / "shared"
    folder.mkdir()
    acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry, *(() if len(entry) == 3 else (2**32 - 1,)))
                                          for entry in entries)
    try:
        os.setxattr(folder, "system.posix_acl_default", acl)
    except OSError as error:
        pytest.skip(f"no POSIX ACLs here ({error.strerror})")
    (folder / "plain.npy").touch()
    old = os.umask(0o022)
    try:
        if mapped:
            with io.open_output(str(folder / "ours.npy"), (3,), np.float64) as out:
                out[:] = 1
        else:
            io.write_array(np.ones(3), str(folder / "ours.npy"))
    finally:
        os.umask(old)
    plain, ours = (folder / "plain.npy").stat(), (folder / "ours.npy").stat()
    assert oct(ours.st_mode) == oct(plain.st_mode) and ours.st_mode & 0o077 != 0o044

    def access_acl(path: Path) -> bytes | None:  # none where the mode says it all
        try:
            return os.getxattr(path, "system.posix_acl_access")
        except OSError as error:
            assert error.errno == errno.ENODATA
            return None

    assert access_acl(folder / "ours.npy") == access_acl(folder / "plain.npy")
    assert np.array_equal(np.load(folder / "ours.npy"), np.ones(3))


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o444, 0o755])
@pytest.mark.parametrize("mapped", [False, True], ids=["in-memory", "mapped"])
def test_replacing_a_file_keeps_its_permissions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                mode: int, mapped: bool) -> None:
    from geomcli.io import _mapped

    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    path = str(tmp_path / "a.npy")
    io.write_array(np.zeros(3), path)
    os.chmod(path, mode)
    if mapped:
        with io.open_output(path, (3,), np.float64) as out:
            out[:] = 1
    else:
        io.write_array(np.ones(3), path)
    assert np.array_equal(np.load(path), np.ones(3))
    assert os.stat(path).st_mode & 0o7777 == mode


def test_replacing_a_setuid_file_drops_the_bit(tmp_path: Path) -> None:
    path = str(tmp_path / "a.npy")
    io.write_array(np.zeros(3), path)
    os.chmod(path, 0o4750)
    io.write_array(np.ones(3), path)
    assert os.stat(path).st_mode & 0o7777 == 0o750


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give files away")
@pytest.mark.parametrize("mapped", [False, True], ids=["in-memory", "mapped"])
def test_root_replacing_a_file_keeps_its_owner_and_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         mapped: bool) -> None:
    from geomcli.io import _mapped

    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    path = str(tmp_path / "a.npy")
    io.write_array(np.zeros(3), path)
    os.chown(path, 12345, 23456)
    os.chmod(path, 0o640)
    if mapped:
        with io.open_output(path, (3,), np.float64) as out:
            out[:] = 1
    else:
        io.write_array(np.ones(3), path)
    info = os.stat(path)
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (12345, 23456, 0o640)
    assert np.array_equal(np.load(path), np.ones(3))


def _fail_midway(exc: BaseException) -> Any:
    def write(data: np.ndarray, f: Any) -> None:
        f.write(b"half of it")
        f.flush()
        raise exc

    return write


@pytest.mark.parametrize(
    "exc",
    [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt(), SystemExit(143)],
    ids=["ENOSPC", "KeyboardInterrupt", "SystemExit"],
)
def test_failed_write_leaves_the_old_file_and_no_temp(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, exc: BaseException
) -> None:
    path = str(tmp_path / "out.npy")
    io.write_array(np.arange(5), path)
    before = _bytes(path)
    monkeypatch.setattr("geomcli.io._npy.write", _fail_midway(exc))
    expected = GeomError if isinstance(exc, OSError) else type(exc)
    with pytest.raises(expected) as info:
        io.write_array(np.zeros(1000), path)
    if expected is GeomError:
        assert str(info.value) == f"{path}: cannot write (No space left on device)"
        assert isinstance(info.value.__cause__, OSError)
    assert _bytes(path) == before
    assert os.listdir(tmp_path) == ["out.npy"]


def test_file_size_limit_mid_write_in_a_subprocess(tmp_path: Path) -> None:
    """A real failing write(2): RLIMIT_FSIZE (Python ignores SIGXFSZ, so write gets EFBIG)."""
    path = tmp_path / "out.npy"
    np.save(path, np.arange(3))
    before = _bytes(path)
    script = textwrap.dedent(f"""
        import resource, numpy as np
        from geomcli import io
        from geomcli.errors import GeomError
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        try:
            io.write_array(np.zeros(100_000), {str(path)!r})
        except GeomError as e:
            print(e)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )
    assert result.stdout.strip() == f"{path}: cannot write (File too large)", result.stderr
    assert _bytes(path) == before and os.listdir(tmp_path) == ["out.npy"]


def test_write_to_missing_folder_or_through_a_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "a.npy"
    with pytest.raises(GeomError, match=rf"^{missing}: folder {missing.parent} does not exist$"):
        io.write_array(np.zeros(2), str(missing))
    plain = _put(tmp_path / "plain", b"")
    with pytest.raises(GeomError, match=r"plain/a\.npy: .*plain is not a folder$"):
        io.write_array(np.zeros(2), plain + "/a.npy")
    folder = tmp_path / "dir.npy"
    folder.mkdir()
    with pytest.raises(GeomError, match=r"dir\.npy: is a directory$"):
        io.write_array(np.zeros(2), str(folder))
    assert sorted(os.listdir(tmp_path)) == ["dir.npy", "plain"]


def test_write_replaces_a_symlink_never_its_target(tmp_path: Path) -> None:
    target = tmp_path / "target.npy"
    np.save(target, np.arange(3))
    before = _bytes(target)
    link = tmp_path / "link.npy"
    link.symlink_to(target)
    io.write_array(np.zeros(2), str(link))
    assert not link.is_symlink() and _bytes(target) == before


def test_write_over_the_memmapped_input_itself(tmp_path: Path) -> None:
    path = str(tmp_path / "same.npy")
    io.write_array(np.arange(10, dtype=np.int32), path)
    mapped = io.read_array(path).data
    io.write_array(mapped[::-1], path)
    assert np.array_equal(io.read_array(path, mmap=False).data, np.arange(10)[::-1])


# ---- lazy imports and samples ------------------------------------------------------------------


def test_backends_are_imported_only_when_needed(
    tmp_path: Path, npy_file: FileFactory, png_file: FileFactory
) -> None:
    npy, _ = npy_file()
    png, _ = png_file()
    script = textwrap.dedent(f"""
        import sys
        from geomcli import io
        io.read_array({npy!r}); io.read_header({npy!r})
        io.write_array(io.read_array({npy!r}).data, {str(tmp_path / "b.npy")!r})
        assert "PIL" not in sys.modules and "tifffile" not in sys.modules, "npy"
        io.read_array({png!r})
        assert "PIL" in sys.modules and "tifffile" not in sys.modules, "png"
    """)
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_ml_dtypes_is_imported_only_for_a_bfloat16(tmp_path: Path, npy_file: FileFactory) -> None:
    """It takes half a second to import: a .npy, PNG or TIFF of numpy's types never asks for it; a
    header naming bfloat16 imports it, and the file reads as written."""
    npy, _ = npy_file()
    bf16 = tmp_path / "bf16.npy"
    io.write_array(np.arange(5, dtype=np.float32).astype(BF16), str(bf16))
    script = textwrap.dedent(f"""
        import sys
        from geomcli import io
        for path in ({npy!r}, {str(SAMPLES / "gray16.png")!r}, {str(SAMPLES / "stack.tiff")!r}):
            io.read_header(path); io.write_array(io.read_array(path).data, {str(tmp_path / "out.npy")!r})
        assert "ml_dtypes" not in sys.modules
        loaded = io.read_array({str(bf16)!r})
        assert "ml_dtypes" in sys.modules and loaded.data.dtype.name == "bfloat16", loaded.data.dtype
        assert loaded.data.astype("float32").tolist() == [0, 1, 2, 3, 4]
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO,
                            check=False)
    assert result.returncode == 0, result.stderr


def _load_generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SAMPLE_FILES = {
    "photo.png": ((120, 160, 3), np.uint8),
    "gray16.png": ((64, 96), np.uint16),
    "rgba.png": ((48, 64, 4), np.uint8),
    "tensor.npy": ((1, 3, 8, 12), np.float32),
    "blocks.npy": ((1, 12, 4, 6), np.float32),
    "stack.tiff": ((4, 32, 48), np.uint16),
    "theta.npy": ((1, 2, 3), np.float32),
    "grid.npy": ((1, 60, 80, 2), np.float32),
}


def test_samples_are_reproduced_byte_for_byte(tmp_path: Path) -> None:
    _load_generator().main(str(tmp_path))
    made = sorted(os.listdir(tmp_path))
    assert made == sorted(SAMPLE_FILES)
    for name in made:
        assert _bytes(tmp_path / name) == _bytes(SAMPLES / name), f"samples/{name} is stale"
    assert sum(os.path.getsize(SAMPLES / name) for name in made) < 200_000


@pytest.mark.parametrize(("name", "expected"), SAMPLE_FILES.items())
def test_samples_shapes_and_dtypes(name: str, expected: tuple[tuple[int, ...], Any]) -> None:
    data = io.read_array(str(SAMPLES / name)).data
    assert (data.shape, data.dtype) == (expected[0], np.dtype(expected[1]))


def test_sample_blocks_is_space_to_depth_of_tensor() -> None:
    tensor = io.read_array(str(SAMPLES / "tensor.npy")).data
    blocks = io.read_array(str(SAMPLES / "blocks.npy")).data
    # DCR: output channel (bh * 2 + bw) * C + c holds tensor[:, c, bh::2, bw::2]
    for bh in range(2):
        for bw in range(2):
            for c in range(3):
                assert np.array_equal(blocks[0, (bh * 2 + bw) * 3 + c], tensor[0, c, bh::2, bw::2])


@pytest.mark.parametrize("shape", [(0, 5, 3), (4, 0), (0, 0, 1)])
def test_an_empty_image_is_refused_as_empty(tmp_path: Path, shape: tuple[int, ...]) -> None:
    """Not as a shape that is no image (found by a try-out: a resize to 0 x 0 said 'holds HW or
    HWC images, not shape (0, 0, 3)'); .npy holds it."""
    data = np.zeros(shape, np.uint8)
    with pytest.raises(GeomError, match=rf"PNG cannot hold an empty image \(shape {re.escape(str(shape))}\)"):
        io.write_array(data, str(tmp_path / "e.png"))
    io.write_array(data, str(tmp_path / "e.npy"))
    assert np.load(tmp_path / "e.npy").shape == shape


def test_a_palette_with_16_bit_indices_to_png_is_dropped_saying_so(tmp_path: Path) -> None:
    # a PNG's palette indexes 8-bit values: 16-bit indices are written grey, the palette named
    indices = np.arange(12, dtype=np.uint16).reshape(3, 4) * 1000
    said = io.write_array(indices, str(tmp_path / "m.png"), metadata=io.Metadata(palette=bytes(range(12))))
    assert said == ("the palette (4 colours) is for one channel of uint8 indices, not a 3x4 uint16 result; dropped",)
    assert np.array_equal(io.read_array(str(tmp_path / "m.png")).data, indices)
