"""What a transform keeps besides the values: bit depth, alpha, pages, ICC profiles, resolution,
EXIF orientation, TIFF axes and compression; and the one warning line for each thing it cannot keep."""

from __future__ import annotations

import json
import os
import re
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from conftest import run
from numpy.testing import assert_array_equal

from geomcli import io
from geomcli.cli import cli
from geomcli.errors import GeomError
from geomcli.io import Metadata
from geomcli.io import _base as io_base

PHOTO = Path(__file__).resolve().parents[2] / "samples" / "photo.png"


def warnings_of(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]


@pytest.fixture(scope="module")
def icc() -> bytes:
    from PIL import ImageCms

    return bytes(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())


def exif_block(orientation: int) -> bytes:
    """EXIF with an orientation, a camera make and the pixel dimensions a camera records."""
    from PIL import Image

    tags = Image.Exif()
    tags[0x0112] = orientation
    tags[0x010F] = "GeomCam"
    tags.get_ifd(0x8769)[0xA002] = 999
    tags.get_ifd(0x8769)[0xA003] = 888
    return bytes(tags.tobytes())


def saved(path: Path, data: np.ndarray, **save: Any) -> str:
    from PIL import Image

    Image.fromarray(data).save(path, **save)
    return str(path)


def pillow_exif(path: str) -> Any:
    from PIL import Image

    with Image.open(path) as im:
        return im.getexif()


# ---- modes and bit depths ----------------------------------------------------------------------

ROUND_TRIPS = [
    ("png", (7, 9), np.uint8),  # L
    ("png", (7, 9, 2), np.uint8),  # LA
    ("png", (7, 9, 3), np.uint8),  # RGB
    ("png", (7, 9, 4), np.uint8),  # RGBA
    ("png", (7, 9), np.uint16),  # I;16
    ("png", (7, 9, 2), np.uint16),  # 16-bit grey + alpha
    ("png", (7, 9, 3), np.uint16),  # 16-bit RGB: our encoder, Pillow cannot
    ("png", (7, 9, 4), np.uint16),
    ("png", (7, 9), bool),  # 1-bit
    ("bmp", (7, 9, 3), np.uint8),
    ("bmp", (7, 9), bool),
    ("gif", (7, 9), np.uint8),
    ("webp", (7, 9, 3), np.uint8),
    ("webp", (7, 9, 4), np.uint8),  # lossless, exact: transparent pixels keep their colour
    ("tiff", (7, 9, 3), np.uint8),
    ("tiff", (7, 9, 4), np.uint16),
    ("tiff", (2, 7, 9), np.int32),
    ("tiff", (7, 9), np.float32),
    ("tiff", (7, 9), np.complex64),
    ("tiff", (7, 9), bool),
]


@pytest.mark.parametrize(("fmt", "shape", "dtype"), ROUND_TRIPS)
def test_round_trip_keeps_every_value(tmp_path: Path, rng: np.random.Generator, fmt: str,
                                      shape: tuple[int, ...], dtype: Any) -> None:
    if np.dtype(dtype) == bool:
        data = rng.integers(0, 2, shape).astype(bool)
    elif np.dtype(dtype).kind == "c":
        data = (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    elif np.dtype(dtype).kind == "f":
        data = rng.normal(size=shape).astype(dtype)
    else:
        data = rng.integers(0, np.iinfo(dtype).max, shape, endpoint=True).astype(dtype)
    path = str(tmp_path / f"a.{fmt}")
    assert io.write_array(data, path) == ()
    back = io.read_array(path).data
    assert back.dtype == data.dtype and np.array_equal(back, data)


def test_16bit_rgb_png_is_cropped_without_loss(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.integers(0, 65536, (10, 12, 3), dtype=np.uint16)
    source, out = str(tmp_path / "deep.png"), str(tmp_path / "crop.png")
    io.write_array(data, source)
    result = run("crop-pad", source, "-o", out, "--shape", "6,8")
    assert result.exit_code == 0, result.stderr
    back = io.read_array(out).data
    assert back.dtype == np.uint16 and np.array_equal(back, data[2:8, 2:10])


@pytest.mark.parametrize(("fill", "alpha"), [(None, 0), ("255", 255)])
def test_rgba_and_la_pad_alpha_with_fill(tmp_path: Path, rng: np.random.Generator, fill: str | None,
                                         alpha: int) -> None:
    for channels in (2, 4):
        data = rng.integers(1, 255, (4, 4, channels), dtype=np.uint8)
        source, out = str(tmp_path / f"a{channels}.png"), str(tmp_path / f"b{channels}.png")
        io.write_array(data, source)
        extra = ["--fill", fill] if fill else []
        assert run("crop-pad", source, "-o", out, "--shape", "6,6", *extra).exit_code == 0
        back = io.read_array(out).data
        assert back.shape == (6, 6, channels)
        assert np.array_equal(back[1:5, 1:5], data)
        assert (back[0, :, -1] == alpha).all() and (back[:, 5, -1] == alpha).all()


def test_palette_with_transparency_becomes_rgba_with_a_note(tmp_path: Path) -> None:
    from PIL import Image

    im = Image.new("P", (3, 2))
    im.putpalette([10, 20, 30, 200, 100, 0] + [0] * 762)
    im.putdata([0, 1, 0, 1, 0, 1])
    path = str(tmp_path / "p.png")
    im.save(path, transparency=0)
    result = run("crop-pad", path, "-o", str(tmp_path / "o.png"), "--shape", "2,3")
    assert result.exit_code == 0 and "note: palette expanded to RGBA" in result.stderr
    back = io.read_array(str(tmp_path / "o.png")).data
    assert back.shape == (2, 3, 4) and back[0, 0].tolist() == [10, 20, 30, 0]
    assert back[0, 1].tolist() == [200, 100, 0, 255]


# ---- ICC profiles and resolution ----------------------------------------------------------------


@pytest.mark.parametrize(("source_fmt", "out_fmt"), [
    ("png", "png"), ("jpeg", "jpeg"), ("png", "tiff"), ("tiff", "png"), ("png", "webp"), ("png16", "png"),
    ("tiff", "tiff"),
])
def test_icc_profile_survives_a_crop_byte_for_byte(tmp_path: Path, rng: np.random.Generator, icc: bytes,
                                                   source_fmt: str, out_fmt: str) -> None:
    data = rng.integers(0, 256, (8, 10, 3), dtype=np.uint8)
    suffix = {"png16": "png", "jpeg": "jpg"}.get(source_fmt, source_fmt)
    source = str(tmp_path / f"in.{suffix}")
    if source_fmt == "png16":
        io.write_array(data.astype(np.uint16) * 257, source, metadata=Metadata(icc=icc))
    elif source_fmt == "tiff":
        import tifffile

        tifffile.imwrite(source, data, photometric="rgb", iccprofile=icc)
    else:
        saved(Path(source), data, icc_profile=icc)
    out = str(tmp_path / f"out.{out_fmt}")
    result = run("crop-pad", source, "-o", out, "--shape", "4,4")
    assert result.exit_code == 0, result.stderr
    assert io.read_array(out).metadata.icc == icc
    if out_fmt == "tiff":
        import tifffile

        with tifffile.TiffFile(out) as tif:
            assert bytes(tif.pages[0].tags[34675].value) == icc


def test_dpi_carried_png_to_jpeg_and_into_16bit_png(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.integers(0, 256, (8, 10, 3), dtype=np.uint8)
    source = saved(tmp_path / "in.png", data, dpi=(300, 150))
    assert run("crop-pad", source, "-o", str(tmp_path / "o.jpg"), "--shape", "4,4").exit_code == 0
    dpi = io.read_array(str(tmp_path / "o.jpg")).metadata.dpi
    assert dpi is not None and np.allclose(dpi, (300, 150), atol=0.05)
    io.write_array(data.astype(np.uint16), str(tmp_path / "d.png"), metadata=Metadata(resolution=(300.0, 150.0),
                                                                                      unit="inch"))
    dpi = io.read_array(str(tmp_path / "d.png")).metadata.dpi
    assert dpi is not None and np.allclose(dpi, (300, 150), atol=0.05)


def camera_exif(**resolution: float) -> bytes:
    """EXIF as Pillow saves a camera's: orientation, make, date and pixel sizes; a resolution only
    where given (x, y, unit: XResolution, YResolution, ResolutionUnit)."""
    from PIL import Image

    tags = Image.Exif()
    tags[0x0112], tags[0x010F], tags[0x0132] = 1, "GeomCam", "2024:05:01 12:00:00"
    tags.get_ifd(0x8769)[0xA002], tags.get_ifd(0x8769)[0xA003] = 60, 40
    for key, tag in (("x", 0x011A), ("y", 0x011B), ("unit", 0x0128)):
        if key in resolution:
            tags[tag] = int(resolution[key]) if key == "unit" else resolution[key]
    return bytes(tags.tobytes())


def test_a_jpeg_that_states_no_dpi_is_given_none(tmp_path: Path, rng: np.random.Generator) -> None:
    """Its JFIF header says units 0 (a 1:1 aspect ratio), its EXIF no resolution: Pillow's 72 x 72
    for such a file was shown, written into outputs and warned about as dropped."""
    from PIL import Image

    source = saved(tmp_path / "in.jpg", rng.integers(0, 256, (40, 60, 3), dtype=np.uint8), exif=camera_exif())
    with Image.open(source) as im:
        assert (im.info["jfif_unit"], im.info["dpi"]) == (0, (72, 72))  # Pillow's invention, the cause
    assert json.loads(run("info", "--json", source).stdout)["dpi"] is None
    for out in ("o.jpg", "o.png"):
        result = run("crop-pad", source, "-o", tmp_path / out, "--shape", "20,30", "--json")
        assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == (
            [io.unkept(None, "jpeg")[0]] if out == "o.jpg" else [])
        with Image.open(tmp_path / out) as im:  # no JFIF density in dpi, no pHYs
            assert im.info["jfif_unit"] == 0 if out == "o.jpg" else "dpi" not in im.info
    for out, args in (("w.png", ["warp", "--rotate", "10"]), ("w.webp", ["crop-pad", "--shape", "20,30"])):
        result = run(args[0], source, "-o", tmp_path / out, *args[1:], "--json")
        assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == []


@pytest.mark.parametrize(("save", "dpi"), [
    ({"dpi": (300, 150)}, [300, 150]),  # JFIF units 1
    ({"exif": camera_exif(x=200, y=100, unit=2)}, [200, 100]),  # EXIF only: JFIF units 0
    ({"exif": camera_exif(x=100, y=100, unit=3)}, [254, 254]),  # per centimetre
    ({"exif": camera_exif(x=240, y=240)}, [240, 240]),  # no ResolutionUnit: EXIF's default, inches
    ({"exif": camera_exif(x=240, y=240, unit=1)}, None),  # "no absolute unit": no DPI
])
def test_a_jpeg_keeps_the_dpi_it_states(tmp_path: Path, rng: np.random.Generator, save: dict[str, Any],
                                        dpi: list[float] | None) -> None:
    from PIL import Image

    source = saved(tmp_path / "in.jpg", rng.integers(0, 256, (40, 60, 3), dtype=np.uint8), **save)
    assert json.loads(run("info", "--json", source).stdout)["dpi"] == dpi
    assert run("crop-pad", source, "-o", tmp_path / "o.png", "--shape", "20,30").exit_code == 0
    with Image.open(tmp_path / "o.png") as im:
        assert dpi is None and "dpi" not in im.info or np.allclose(im.info["dpi"], dpi or (), atol=0.05)


@pytest.mark.parametrize(("units", "density", "dpi"), [
    (2, (118, 59), (299.72, 149.86)), (1, (0, 0), (200, 100)), (0, (1, 1), (200, 100))])
def test_a_jfif_density_is_read_in_its_units(tmp_path: Path, units: int, density: tuple[int, int],
                                             dpi: tuple[float, float]) -> None:
    """Dots per centimetre are converted; a density of 0 states nothing, so EXIF's resolution is
    read (Pillow took (0, 0) and did not look)."""
    path = tmp_path / "in.jpg"
    saved(path, np.zeros((8, 8, 3), np.uint8), dpi=(1, 1), exif=camera_exif(x=200, y=100, unit=2))
    data = bytearray(path.read_bytes())
    assert data[6:11] == b"JFIF\0"  # APP0 at 2: marker, length, identifier, version, then units and density
    data[13:18] = struct.pack(">BHH", units, *density)
    path.write_bytes(bytes(data))
    assert io.read_array(str(path)).metadata.dpi == pytest.approx(dpi)


@pytest.mark.parametrize(("orientation", "out", "dpi"), [
    (1, "o.jpg", (150, 50)), (1, "o.png", (150, 50)), (6, "o.jpg", (50, 150)), (3, "o.png", (150, 50)),
    (1, "o.webp", None)])
def test_the_exif_resolution_is_the_dpi_written_beside_it(tmp_path: Path, rng: np.random.Generator,
                                                        orientation: int, out: str,
                                                        dpi: tuple[int, int] | None) -> None:
    """A camera's EXIF-only 300 x 100 DPI resized by 1/2: the JFIF density (or pHYs) said 150 x 50
    while the EXIF carried beside it still said 300 x 100, which readers that prefer EXIF
    (exiftool, Photoshop) showed. Turned by orientation 6, x is the stored y. WebP holds no DPI but
    EXIF's: it is dropped with the warning, not left stale."""
    from PIL import Image

    tags = Image.Exif()
    tags.load(camera_exif(x=300, y=100, unit=2))
    tags[0x0112] = orientation
    source = saved(tmp_path / "in.jpg", rng.integers(0, 256, (40, 60, 3), dtype=np.uint8), exif=tags.tobytes())
    sizes = "30,20" if orientation == 6 else "20,30"
    assert run("resize", source, "-o", tmp_path / out, "--sizes", sizes, "-q").exit_code == 0
    written = pillow_exif(str(tmp_path / out))
    assert written[0x0112] == 1
    if dpi is None:
        assert 0x011A not in written and 0x011B not in written
    else:
        assert (float(written[0x011A]), float(written[0x011B])) == pytest.approx(dpi)
        with Image.open(tmp_path / out) as im:
            assert im.info["dpi"] == pytest.approx(dpi, abs=0.05)


@pytest.mark.parametrize(("name", "save", "said"), [
    ("in.png", {"dpi": (0, 300)}, "the PNG resolution 0 x 299.999 dpi"),  # pHYs of 0 pixels per metre
    ("in.bmp", {"dpi": (0, 300)}, "the BMP resolution 0 x 299.999 dpi"),
    ("in.jpg", {"exif": camera_exif(x=0, y=300, unit=2), "comment": b"first"}, "the JPEG resolution 0 x 300 dpi"),
])
def test_a_dpi_that_is_no_length_is_said_dropped(tmp_path: Path, rng: np.random.Generator, name: str,
                                                 save: dict[str, Any], said: str) -> None:
    """'crop-pad p0.png -o o.png --json' of a pHYs of 0 x 300 dpi gave "warnings": [] and 'info
    p0.png' no dpi with no word why, where a TIFF resolution of 0 is named (c344c23). It is named
    in both, as the TIFF's; a JPEG's beside its other dropped things (a second comment)."""
    source = saved(tmp_path / name, rng.integers(0, 256, (8, 8, 3), dtype=np.uint8), **save)
    others = []
    if name == "in.jpg":
        data = Path(source).read_bytes()
        Path(source).write_bytes(data[:2] + b"\xff\xfe" + struct.pack(">H", 2 + 6) + b"second" + data[2:])
        others = ["the JPEG's 1 comment(s) after the first cannot be carried; dropped",
                  io.unkept(None, "jpeg")[0]]
    out = tmp_path / f"o{Path(name).suffix}"
    result = run("crop-pad", source, "-o", out, "--shape", "4,4", "--json")
    assert result.exit_code == 0, result.stderr
    assert sorted(json.loads(result.stdout)["warnings"]) == sorted(
        [f"{said} (no positive size) cannot be carried; dropped", *others])
    record = json.loads(run("info", "--json", source).stdout)
    assert record["dpi"] is None and record["notes"] == [f"{said} (no positive size) left out of the pixel size"]


def test_a_dpi_past_a_jfif_density_is_dropped_not_wrapped(tmp_path: Path, rng: np.random.Generator) -> None:
    """A microscope's 0.2 um pixels (127000 dpi) in a PNG became a JPEG of 61464 dpi, 127000 less
    65536: libjpeg's 16-bit density wrapped without a word. Such a DPI is dropped with a warning, its
    EXIF XResolution with it; half of it (63500) fits and is written."""
    from PIL import Image

    tags = Image.Exif()
    tags.load(camera_exif(x=300, y=300, unit=2))
    source = saved(tmp_path / "in.png", rng.integers(0, 256, (40, 60, 3), dtype=np.uint8), dpi=(127000, 127000),
                   exif=tags.tobytes())
    result = run("crop-pad", source, "-o", tmp_path / "o.jpg", "--shape", "20,30")
    assert result.exit_code == 0
    assert (f"Warning: {tmp_path / 'o.jpg'}: JPEG cannot hold the DPI (127000 x 127000: a JFIF density holds up to "
            "65535); dropped") in result.stderr
    assert io.read_array(str(tmp_path / "o.jpg")).metadata.dpi is None
    assert 0x011A not in pillow_exif(str(tmp_path / "o.jpg"))
    result = run("resize", source, "-o", tmp_path / "half.jpg", "--scales", "0.5,0.5")
    assert result.exit_code == 0 and "DPI" not in result.stderr
    assert io.read_array(str(tmp_path / "half.jpg")).metadata.dpi == pytest.approx((63500, 63500))


def test_a_calibration_past_a_jfif_density_is_named_by_its_pixel_size(tmp_path: Path,
                                                                     rng: np.random.Generator) -> None:
    """A 0.25 micron ImageJ image to a JPEG: its 101600 dpi is past a JFIF density, and the warning
    named it 'DPI (101600 x 101600: ...)', a figure no microscopist gave, where every other line
    names such a calibration by its pixel size."""
    import tifffile

    source = tmp_path / "ij.tif"
    tifffile.imwrite(source, rng.integers(0, 256, (8, 10), dtype=np.uint8), imagej=True, resolution=(4.0, 4.0),
                     metadata={"unit": "micron"})
    result = run("crop-pad", source, "-o", tmp_path / "o.jpg", "--shape", "4,4")
    assert result.exit_code == 0, result.stderr
    assert (f"Warning: {tmp_path / 'o.jpg'}: JPEG cannot hold the pixel size (0.25 micron, 101600 x 101600 dpi: a "
            "JFIF density holds up to 65535); dropped") in result.stderr, result.stderr
    assert io.read_array(str(tmp_path / "o.jpg")).metadata.dpi is None


@pytest.mark.parametrize(("name", "dtype", "shape"), [("o.png", np.uint8, (30, 40, 3)), ("o.png", np.uint16, (30, 40)),
                                                   ("o.bmp", np.uint8, (30, 40, 3))])
def test_a_dpi_past_pixels_per_metre_is_dropped_not_a_traceback(tmp_path: Path, rng: np.random.Generator, name: str,
                                                                dtype: type, shape: tuple[int, ...]) -> None:
    """A warp by --scale 1e-6 of a 300 dpi picture has pixels of 3e8 dpi, past the 2**31 - 1 pixels
    per metre a PNG's pHYs and a BMP's header hold: Pillow's (and, 16-bit, our encoder's) packing
    raised OverflowError / struct.error, a traceback. It is dropped with a warning; 3e7 dpi fits."""
    source = saved(tmp_path / "in.png", rng.integers(0, 256 if dtype == np.uint8 else 65536, shape, dtype=dtype),
                   dpi=(300, 300))
    result = run("warp", source, "-o", tmp_path / name, "--scale", "1e-6")
    assert result.exit_code == 0
    assert (f"Warning: {tmp_path / name}: {name[2:].upper()} cannot hold the DPI (2.99999e+08 x 2.99999e+08: "
            f"{'a pHYs chunk' if name == 'o.png' else 'a BMP header'} holds up to 2147483647 pixels per metre, "
            "54546085 dpi); dropped") in result.stderr
    written = io.read_array(str(tmp_path / name))
    assert written.metadata.dpi is None
    assert run("warp", source, "-o", tmp_path / "o.npy", "--scale", "1e-6").exit_code == 0
    assert_array_equal(written.data, np.load(tmp_path / "o.npy"))
    result = run("warp", source, "-o", tmp_path / name, "--scale", "1e-5")
    assert result.exit_code == 0 and "DPI" not in result.stderr
    assert io.read_array(str(tmp_path / name)).metadata.dpi == pytest.approx((3e7, 3e7), rel=1e-5)


def test_a_resolution_past_a_tiff_rational_is_dropped_not_a_traceback(tmp_path: Path,
                                                                      rng: np.random.Generator) -> None:
    """A warp by --scale 1e-10 of a 300 dpi TIFF has pixels of 3e12 dpi, past a RATIONAL's 32-bit
    numerator: tifffile raised ValueError ('max_denominator should be at least 1'), a traceback. It
    is dropped with a warning; 3e8 dpi fits and is written."""
    import tifffile

    source = tmp_path / "in.tif"
    tifffile.imwrite(source, rng.integers(0, 256, (30, 40, 3), dtype=np.uint8), resolution=(300, 300),
                     resolutionunit="INCH", photometric="rgb")
    result = run("warp", source, "-o", tmp_path / "o.tif", "--scale", "1e-10")
    assert result.exit_code == 0
    assert (f"Warning: {tmp_path / 'o.tif'}: TIFF cannot hold the resolution (3e+12 x 3e+12 pixels per inch: a "
            "rational tag holds up to 4294967295); dropped") in result.stderr
    written = io.read_array(str(tmp_path / "o.tif"))
    assert written.metadata.dpi is None
    assert run("warp", source, "-o", tmp_path / "o.npy", "--scale", "1e-10").exit_code == 0
    assert_array_equal(written.data, np.load(tmp_path / "o.npy"))
    result = run("warp", source, "-o", tmp_path / "o.tif", "--scale", "1e-6")
    assert result.exit_code == 0 and "Warning" not in result.stderr
    assert io.read_array(str(tmp_path / "o.tif")).metadata.dpi == pytest.approx((3e8, 3e8), rel=1e-6)


@pytest.mark.parametrize("dpi", [None, (300, 150)])
def test_a_bmp_output_states_the_dpi_it_was_given_or_none(tmp_path: Path, rng: np.random.Generator,
                                                         dpi: tuple[int, int] | None) -> None:
    """Pillow's BMP writer, given no DPI, wrote 96 x 96 (3780 pixels per metre)."""
    source = saved(tmp_path / "in.png", rng.integers(0, 256, (40, 60, 3), dtype=np.uint8),
                   **({} if dpi is None else {"dpi": dpi}))
    for strip in ([], ["--strip"]):
        assert run("crop-pad", source, "-o", tmp_path / "o.bmp", "--shape", "20,30", *strip).exit_code == 0
        per_metre = struct.unpack_from("<ii", (tmp_path / "o.bmp").read_bytes(), 38)  # BITMAPINFOHEADER
        expected = None if dpi is None or strip else [round(value, 3) for value in dpi]
        assert per_metre == ((0, 0) if expected is None else tuple(round(d / 0.0254) for d in dpi or ()))
        assert json.loads(run("info", "--json", tmp_path / "o.bmp").stdout)["dpi"] == pytest.approx(expected, abs=0.02)


def test_space_to_depth_scales_the_resolution(tmp_path: Path) -> None:
    import tifffile

    source = str(tmp_path / "in.tiff")
    tifffile.imwrite(source, np.zeros((8, 8), np.uint8), photometric="minisblack", resolution=(300, 300),
                     resolutionunit="INCH")
    assert run("space-to-depth", source, "-o", str(tmp_path / "o.tiff"), "--blocksize", "2").exit_code == 0
    loaded = io.read_array(str(tmp_path / "o.tiff"))
    assert loaded.metadata.dpi == (150.0, 150.0) and loaded.data.shape == (4, 4, 4)


def test_strip_writes_no_metadata_and_warns_of_nothing(tmp_path: Path, rng: np.random.Generator,
                                                      icc: bytes) -> None:
    data = rng.integers(0, 256, (8, 10, 3), dtype=np.uint8)
    source = saved(tmp_path / "in.jpg", data, icc_profile=icc, dpi=(300, 300), exif=exif_block(1))
    result = run("crop-pad", source, "-o", str(tmp_path / "o.png"), "--shape", "4,4", "--strip")
    assert result.exit_code == 0 and warnings_of(result) == []
    metadata = io.read_array(str(tmp_path / "o.png")).metadata
    assert (metadata.icc, metadata.dpi, metadata.exif) == (None, None, None)
    result = run("crop-pad", source, "-o", str(tmp_path / "o.npy"), "--shape", "4,4", "--strip")
    assert result.exit_code == 0 and warnings_of(result) == []


# ---- EXIF orientation ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["png", "jpg", "png16"])
@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_exif_rotated_image_is_cropped_around_what_the_viewer_sees(
        tmp_path: Path, fmt: str, orientation: int) -> None:
    from PIL import Image, ImageOps

    # blocks of flat colour: JPEG keeps them near enough to tell which corner went where
    stored = np.zeros((16, 24, 3), np.uint8)
    stored[:8, :8] = (250, 0, 0)
    stored[8:, 16:] = (0, 0, 250)
    path = str(tmp_path / f"in.{fmt[:3]}")
    if fmt == "png16":
        io.write_array(stored.astype(np.uint16) * 257, path, metadata=Metadata(exif=exif_block(orientation)))
        im_with_exif = Image.fromarray(stored)
        im_with_exif.info["exif"] = exif_block(orientation)
        seen = np.asarray(ImageOps.exif_transpose(im_with_exif)).astype(np.uint16) * 257
    else:
        saved(Path(path), stored, exif=exif_block(orientation), **({"quality": 100} if fmt == "jpg" else {}))
        with Image.open(path) as im:
            seen = np.asarray(ImageOps.exif_transpose(im))
    out = str(tmp_path / f"out.{fmt[:3]}")
    result = run("crop-pad", path, "-o", out, "--shape", "12,12")
    assert result.exit_code == 0, result.stderr
    assert f"by its EXIF orientation {orientation}" in result.stderr  # the summary says it was turned
    h, w = seen.shape[:2]
    top, left = (h - 12) // 2, (w - 12) // 2
    back = io.read_array(out).data
    assert back.shape[:2] == (12, 12)
    error = np.abs(back.astype(int) - seen[top:top + 12, left:left + 12].astype(int))
    if fmt == "jpg":
        assert error.mean() < 6  # lossy, but the blocks are where the viewer saw them
    else:
        assert error.max() == 0
    exif = pillow_exif(out)
    assert exif[0x0112] == 1 and exif[0x010F] == "GeomCam"  # upright, the rest kept
    assert (exif.get_ifd(0x8769)[0xA002], exif.get_ifd(0x8769)[0xA003]) == (12, 12)  # never stale


def test_no_auto_orient_keeps_the_stored_pixels_and_the_orientation(tmp_path: Path,
                                                                   rng: np.random.Generator) -> None:
    stored = rng.integers(0, 256, (8, 12, 3), dtype=np.uint8)
    path = saved(tmp_path / "in.png", stored, exif=exif_block(6))
    out = str(tmp_path / "out.png")
    result = run("crop-pad", path, "-o", out, "--shape", "8,12", "--no-auto-orient")
    assert result.exit_code == 0 and "EXIF orientation" not in result.stderr
    assert np.array_equal(io.read_array(out, auto_orient=False).data, stored)
    assert pillow_exif(out)[0x0112] == 6


# ---- animations ---------------------------------------------------------------------------------


@pytest.fixture
def animated_gif(tmp_path: Path) -> tuple[str, np.ndarray]:
    from PIL import Image

    frames = np.zeros((3, 6, 8, 3), np.uint8)
    for i in range(3):
        frames[i, :, :, i] = 200
        frames[i, i, i] = 255
    pictures = [Image.fromarray(f) for f in frames]
    path = str(tmp_path / "anim.gif")
    pictures[0].save(path, save_all=True, append_images=pictures[1:], duration=40, optimize=False,
                     disposal=2)
    return path, frames


def test_animated_gif_is_refused_without_frames_all(tmp_path: Path, animated_gif: tuple[str, np.ndarray]) -> None:
    path, _ = animated_gif
    result = run("crop-pad", path, "-o", str(tmp_path / "o.tiff"), "--shape", "4,4")
    assert result.exit_code == 1
    assert result.stderr == (f"Error: {path}: has 3 frames; geomcli reads one image unless told "
                             "(--frames all stacks them on a leading axis, --frames first takes the first)\n")
    assert not (tmp_path / "o.tiff").exists()


@pytest.mark.parametrize("fmt", ["tiff", "npy"])
def test_frames_all_stacks_frames_on_a_leading_axis(tmp_path: Path, animated_gif: tuple[str, np.ndarray],
                                                    fmt: str) -> None:
    path, frames = animated_gif
    out = str(tmp_path / f"o.{fmt}")
    result = run("crop-pad", path, "-o", out, "--shape", "4,4", "--frames", "all")
    assert result.exit_code == 0, result.stderr
    assert "3 frames stacked on axis 0" in result.stderr and warnings_of(result) == []
    back = io.read_array(out)
    assert np.array_equal(back.data, frames[:, 1:5, 2:6])
    if fmt == "tiff":
        assert back.layout == "NHWC"  # the written axes (TYXS) say so


def test_frames_all_cannot_go_to_one_image_and_first_takes_frame_one(
        tmp_path: Path, animated_gif: tuple[str, np.ndarray]) -> None:
    path, frames = animated_gif
    result = run("crop-pad", path, "-o", str(tmp_path / "o.png"), "--shape", "4,4", "--frames", "all")
    assert result.exit_code == 2 and "PNG holds HW or HWC images, not shape (3, 4, 4, 3)" in result.stderr
    result = run("crop-pad", path, "-o", str(tmp_path / "o.png"), "--shape", "6,8", "--frames", "first")
    assert result.exit_code == 0 and "frame 1 of 3" in result.stderr
    assert np.array_equal(io.read_array(str(tmp_path / "o.png")).data, frames[0])


@pytest.mark.parametrize("name", ["o.png", "o.gif", "o.jpg"])
@pytest.mark.parametrize("source", ["pages.tif", "nhw.npy"])
def test_a_stack_of_grey_images_cannot_go_to_one_image(tmp_path: Path, name: str, source: str) -> None:
    """'crop-pad pages.tif -o o.png --shape 8,3' of 5 grey pages of 16x18 wrote a 5x8 RGB PNG,
    exit 0: the N×H×W result as an H×W×C image, its pages as rows, its columns as channels. An
    image format holds no stack axis (N, a TIFF's Z or T), as it holds no N×H×W×C: exit 2, nothing
    written; a TIFF takes the stack."""
    import tifffile

    pages = np.random.default_rng(42).integers(0, 256, (5, 16, 18), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "pages.tif", pages)
    np.save(tmp_path / "nhw.npy", pages)
    given = ["--layout", "NHW"] if source.endswith(".npy") else []
    for shape in ("8,3", "8,1"):
        result = run("crop-pad", tmp_path / source, "-o", tmp_path / name, "--shape", shape, *given)
        assert result.exit_code == 2, result.stderr
        assert (f"{name}: {io.format_for_path(name).upper()} holds one HW or HWC image, not a stack "
                f"(NHW shape (5, 8, {shape[-1]})); write .npy or .tiff") in result.stderr
        assert not (tmp_path / name).exists()
    planned = run("crop-pad", tmp_path / source, "--out-dir", tmp_path / "out", "--name", "{stem}" + name[1:],
                  "--shape", "8,3", "--dry-run", *given)
    assert planned.exit_code == 2 and "not a stack (NHW shape (5, 8, 3))" in planned.stderr
    piped = run("crop-pad", tmp_path / source, "-o", "-", "--format", io.format_for_path(name), "--shape", "8,3",
                *given)
    assert piped.exit_code == 2 and piped.stdout_bytes == b""
    assert "<stdout>: " in piped.stderr
    assert "not a stack (NHW shape (5, 8, 3)); give --format npy or tiff" in piped.stderr
    result = run("crop-pad", tmp_path / source, "-o", tmp_path / "o.tif", "--shape", "8,3", *given)
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(io.read_array(str(tmp_path / "o.tif")).data, pages[:, 4:12, 7:10])


# ---- TIFF: axes from ImageJ and OME metadata, written back for the new shape --------------------


@pytest.fixture
def hyperstack(tmp_path: Path, rng: np.random.Generator) -> tuple[str, np.ndarray]:
    import tifffile

    data = rng.integers(0, 4000, (3, 2, 8, 10), dtype=np.uint16)  # Z, C, Y, X
    path = str(tmp_path / "stack.tif")
    tifffile.imwrite(path, data, imagej=True, metadata={"axes": "ZCYX", "unit": "um", "spacing": 0.5},
                     resolution=(4.0, 4.0), compression="zlib")
    return path, data


def test_imagej_hyperstack_layout_from_metadata_and_fresh_metadata(tmp_path: Path,
                                                                   hyperstack: tuple[str, np.ndarray]) -> None:
    import tifffile

    path, data = hyperstack
    out = str(tmp_path / "crop.tif")
    result = run("crop-pad", path, "-o", out, "--shape", "6,6")
    assert result.exit_code == 0, result.stderr
    assert "note: axes ZCYX from ImageJ metadata: layout NCHW, Z as N" in result.stderr
    with tifffile.TiffFile(out) as tif:
        assert tif.is_imagej and tif.series[0].axes == "ZCYX"
        assert np.array_equal(tif.asarray(), data[:, :, 1:7, 2:8])
        meta = tif.imagej_metadata
        assert (meta["images"], meta["channels"], meta["slices"]) == (6, 2, 3)
        assert (meta["spacing"], meta["unit"]) == (0.5, "micron")
        assert tif.pages[0].resolution == (4.0, 4.0)
        assert tif.pages[0].compression.name == "ADOBE_DEFLATE"  # kept
        assert (tif.pages[0].imagelength, tif.pages[0].imagewidth) == (6, 6)


@pytest.mark.parametrize("unit", ["mm", "cm", "micron", "inch", "nm"])
def test_an_imagej_unit_is_written_as_imagej_spells_it(tmp_path: Path, unit: str) -> None:
    """An ImageJ stack's unit came back as geomcli's own name for it: 'unit=mm' as 'unit=millimeter'
    and 'cm' as 'centimeter', which ImageJ shows as it is and a script testing for 'mm' misses."""
    import tifffile

    source, out = tmp_path / "in.tif", tmp_path / "out.tif"
    tifffile.imwrite(source, np.zeros((3, 8, 8), np.uint8), imagej=True, resolution=(4.0, 4.0),
                     metadata={"axes": "ZYX", "spacing": 0.5, "unit": unit})
    result = run("resize", source, "-o", out, "--scales", "0.5,0.5")
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(out) as tif:
        assert tif.imagej_metadata["unit"] == unit and tif.pages[0].resolution == (2.0, 2.0)


def test_space_to_depth_finds_c_h_w_of_a_hyperstack_without_layout(tmp_path: Path,
                                                                  hyperstack: tuple[str, np.ndarray]) -> None:
    import tifffile

    import geomcli.ops.space_depth as space_depth_ops

    path, data = hyperstack
    out = str(tmp_path / "blocks.tif")
    result = run("space-to-depth", path, "-o", out, "--blocksize", "2")
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(out) as tif:
        assert np.array_equal(tif.asarray(), space_depth_ops.space_to_depth(data, 2))
        meta = tif.imagej_metadata
        assert (meta["channels"], meta["slices"]) == (8, 3)
        assert tif.pages[0].resolution == (2.0, 2.0)  # pixels twice as big


@pytest.mark.parametrize(("axes", "note"), [("TZYX", "layout TZYX"), ("ZCYX", "layout NCHW, Z as N")])
def test_a_hyperstack_read_as_its_own_axes_names_no_axis_as_n(tmp_path: Path, axes: str, note: str) -> None:
    """'info tz.tif' of an ImageJ TZYX stack said 'layout TZYX, T as N': its layout is its own
    axes, T and Z both stack axes, none read as N; a ZCYX stack's Z is (NCHW)."""
    import tifffile

    path = tmp_path / "tz.tif"
    tifffile.imwrite(path, np.zeros((2, 3, 8, 8), np.uint8), imagej=True, metadata={"axes": axes})
    result = run("info", path)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.rstrip("\n").endswith(f"; axes {axes} from ImageJ metadata: {note}")


def test_ome_tiff_layout_from_metadata_and_fresh_ome_xml(tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    data = rng.integers(0, 200, (2, 3, 8, 10), dtype=np.uint8)
    path = str(tmp_path / "in.ome.tif")
    tifffile.imwrite(path, data, ome=True, metadata={"axes": "TCYX"}, compression="lzma")
    out = str(tmp_path / "out.ome.tif")
    result = run("crop-pad", path, "-o", out, "--shape", "4,6")
    assert result.exit_code == 0, result.stderr
    assert "axes TCYX from OME metadata: layout NCHW, T as N" in result.stderr
    with tifffile.TiffFile(out) as tif:
        assert tif.is_ome and tif.series[0].axes == "TCYX"
        xml = tif.ome_metadata
        assert 'SizeX="6"' in xml and 'SizeY="4"' in xml and 'SizeC="3"' in xml and 'SizeT="2"' in xml
        assert 'SizeX="10"' not in xml and 'SizeY="8"' not in xml
        assert tif.pages[0].compression.name == "LZMA"
        assert np.array_equal(tif.asarray(), data[:, :, 2:6, 2:8])


def test_an_ome_tiff_output_is_the_same_bytes_from_run_to_run(tmp_path: Path, rng: np.random.Generator) -> None:
    # tifffile wrote a new time-based UUID into the OME-XML each time: no two runs (nor -j 1 and -j 2) agreed
    import tifffile

    source = tmp_path / "in.ome.tif"
    data = rng.integers(0, 200, (2, 3, 8, 10), dtype=np.uint8)
    tifffile.imwrite(source, data, ome=True, metadata={"axes": "TCYX"})
    first, second, other = tmp_path / "1.ome.tif", tmp_path / "2.ome.tif", tmp_path / "3.ome.tif"
    for out, shape in ((first, "4,6"), (second, "4,6"), (other, "4,4")):
        assert run("crop-pad", source, "-o", out, "--shape", shape, "-q").exit_code == 0
    assert first.read_bytes() == second.read_bytes()
    uuids = []
    for out in (first, other):
        with tifffile.TiffFile(out) as tif:
            uuids.append(tif.ome_metadata.split(' UUID="')[1].split('"')[0])
    assert uuids[0].startswith("urn:uuid:") and uuids[0] != uuids[1]  # other pixels, another file


def test_axes_not_ending_in_yx_have_no_layout_and_say_so(tmp_path: Path, rng: np.random.Generator) -> None:
    # (a hyperstack's axes, TZCYX, are its layout: tests/io/test_tiff_stacks.py)
    import tifffile

    path = str(tmp_path / "yxz.tif")
    tifffile.imwrite(path, rng.integers(0, 9, (4, 4, 2), dtype=np.uint8), photometric="minisblack",
                     metadata={"axes": "YXZ"})
    result = run("space-to-depth", path, "-o", str(tmp_path / "o.tif"), "--blocksize", "2")
    assert result.exit_code == 2 and "a rank-3 tensor (4, 4, 2) has no default layout" in result.stderr
    loaded = io.read_array(path)
    assert loaded.layout is None
    assert "axes YXZ from tifffile metadata: no geomcli layout fits" in loaded.notes[-1]


def test_planar_rgb_tiff_reads_as_hwc(tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    data = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    planar, contiguous = str(tmp_path / "planar.tif"), str(tmp_path / "contig.tif")
    tifffile.imwrite(planar, np.moveaxis(data, -1, 0), photometric="rgb", planarconfig="separate")
    tifffile.imwrite(contiguous, data, photometric="rgb")
    loaded = io.read_array(planar)
    assert loaded.layout == "HWC" and np.array_equal(loaded.data, io.read_array(contiguous).data)
    result = run("crop-pad", planar, "-o", str(tmp_path / "o.png"), "--shape", "4,4")
    assert result.exit_code == 0 and np.array_equal(io.read_array(str(tmp_path / "o.png")).data, data[1:5, 2:6])


def test_min_is_white_and_palette_tiffs_read_as_seen(tmp_path: Path) -> None:
    import tifffile

    indices = np.array([[0, 1], [2, 3]], np.uint8)
    tifffile.imwrite(tmp_path / "white.tif", indices, photometric="miniswhite")
    loaded = io.read_array(str(tmp_path / "white.tif"))
    assert loaded.data.tolist() == [[255, 254], [253, 252]] and "min-is-white" in loaded.notes[0]
    colormap = np.zeros((3, 256), np.uint16)
    colormap[:, :4] = np.array([[0, 10, 20, 30], [1, 11, 21, 31], [2, 12, 22, 32]]) * 257
    tifffile.imwrite(tmp_path / "pal.tif", indices, photometric="palette", colormap=colormap)
    loaded = io.read_array(str(tmp_path / "pal.tif"))
    assert loaded.layout == "HWC" and loaded.data.dtype == np.uint8
    assert loaded.data[1, 1].tolist() == [30, 31, 32] and loaded.notes == ("palette expanded to RGB",)


@pytest.mark.parametrize(("photometric", "channels"), [("rgb", 4), ("minisblack", 2)])
def test_associated_alpha_that_is_written_straight_is_named_in_a_warning(tmp_path: Path, photometric: str,
                                                                         channels: int) -> None:
    # it was written as unassociated alpha without a word: premultiplied colours shown as straight ones
    import tifffile

    source, out = tmp_path / "premultiplied.tif", tmp_path / "out.tif"
    tifffile.imwrite(source, np.full((6, 8, channels), 100, np.uint8), photometric=photometric,
                     extrasamples=["assocalpha"])
    result = run("crop-pad", source, "-o", out, "--shape", "4,4")
    assert result.exit_code == 0
    assert warnings_of(result) == [f"Warning: {out}: the TIFF associated (premultiplied) alpha (written as straight "
                                   "alpha) cannot be carried; dropped"]


def agree(path: str, **options: Any) -> io.Loaded:
    """read_header says the shape, dtype, layout, pages and size read_array gives (with the same options)."""
    header = io.read_header(path, **options)
    loaded = io.read_array(path, **options)
    assert (header.shape, header.dtype, header.layout) == (loaded.data.shape, loaded.data.dtype, loaded.layout)
    assert (header.pages, header.file_size) == (loaded.pages, loaded.file_size)
    return loaded


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("shape", [(2, 2), (3, 2, 2)], ids=["one-page", "three-pages"])
def test_palette_tiff_header_is_the_expanded_image(tmp_path: Path, bits: int, shape: tuple[int, ...]) -> None:
    import tifffile

    colormap = np.zeros((3, 256), np.uint16)
    colormap[:, :4] = np.array([[0, 10, 20, 30], [1, 11, 21, 31], [2, 12, 22, 32]]) * (257 if bits == 8 else 7)
    tifffile.imwrite(tmp_path / "pal.tif", np.arange(4, dtype=np.uint8).reshape(2, 2) * np.ones(shape, np.uint8),
                     photometric="palette", colormap=colormap)
    loaded = agree(str(tmp_path / "pal.tif"))
    assert loaded.data.shape == (*shape, 3) and loaded.data.dtype == (np.uint8 if bits == 8 else np.uint16)
    assert loaded.pages == (1 if len(shape) == 2 else 3)
    assert loaded.layout == ("HWC" if len(shape) == 2 else "NHWC")  # pages of colours: --shape H,W is each's


def test_plain_palette_pages_expanded_are_nhwc_too(tmp_path: Path) -> None:
    """Palette pages with no tifffile metadata (Pillow's or libtiff's stack: tifffile's axes IYX)
    expanded to RGB had no layout, where tifffile's own (QYX) are NHWC: 'crop-pad pages.tif -o
    o.npy --shape 6,6' refused them ('names no layout', exit 2). They are NHWC, each page cropped."""
    from PIL import Image

    pages = [Image.fromarray((np.arange(12 * 16).reshape(12, 16) % 4).astype(np.uint8)) for _ in range(2)]
    for page in pages:
        page.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255])
    pages[0].save(tmp_path / "pages.tif", save_all=True, append_images=pages[1:])
    loaded = agree(str(tmp_path / "pages.tif"))
    assert loaded.data.shape == (2, 12, 16, 3) and loaded.layout == "NHWC"
    result = run("crop-pad", tmp_path / "pages.tif", "-o", tmp_path / "o.npy", "--shape", "6,6", "-q")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), loaded.data[:, 3:9, 5:11])


def test_headers_and_loaded_agree_on_every_kind_of_file(tmp_path: Path, animated_gif: tuple[str, np.ndarray],
                                                        hyperstack: tuple[str, np.ndarray]) -> None:
    path, frames = animated_gif
    stacked = agree(path, frames="all")
    assert stacked.data.shape == (3, 6, 8, 3) and stacked.pages == 3 and stacked.layout == "NHWC"
    first = agree(path, frames="first")
    assert first.data.shape == (6, 8, 3) and first.pages == 3
    assert agree(hyperstack[0]).pages == hyperstack[1].shape[0] * hyperstack[1].shape[1]
    for fmt, data in [("png", np.zeros((5, 7, 4), np.uint16)), ("npy", np.zeros((2, 3), np.float32)),
                      ("webp", np.zeros((5, 7, 3), np.uint8)), ("tiff", np.zeros((2, 5, 7), np.int16))]:
        out = str(tmp_path / f"a.{fmt}")
        io.write_array(data, out)
        assert agree(out).file_size == os.path.getsize(out)


def test_a_16bit_apng_header_stacks_no_frames(tmp_path: Path) -> None:
    import imagecodecs

    one = bytes(imagecodecs.png_encode(np.zeros((4, 5), np.uint16)))
    # an acTL chunk of 2 frames before the IDAT: what makes an APNG (one frame is enough for the check)
    body = struct.pack(">II", 2, 0)
    actl = struct.pack(">I", 8) + b"acTL" + body + struct.pack(">I", zlib.crc32(b"acTL" + body))
    at = one.index(b"IDAT") - 4
    path = tmp_path / "anim16.png"
    path.write_bytes(one[:at] + actl + one[at:])
    for read in (io.read_header, io.read_array):
        with pytest.raises(GeomError, match=r"anim16\.png: --frames all: 16-bit animated PNGs are not supported"):
            read(str(path), frames="all")


def test_series_and_pages(tmp_path: Path) -> None:
    import tifffile

    same, mixed = str(tmp_path / "same.tif"), str(tmp_path / "mixed.tif")
    with tifffile.TiffWriter(same) as tif:
        for value in (1, 2):
            tif.write(np.full((2, 4, 5), value, np.uint8), photometric="minisblack")
    with tifffile.TiffWriter(mixed) as tif:
        tif.write(np.full((4, 5), 1, np.uint8), photometric="minisblack")
        tif.write(np.full((6, 7), 2, np.uint8), photometric="minisblack")
    loaded = io.read_array(same)
    assert loaded.data.shape == (2, 2, 4, 5) and loaded.data[1].min() == 2 and "2 series stacked" in loaded.notes[0]
    with pytest.raises(GeomError, match=r"mixed\.tif: holds 2 image series .*; pick one with --series N"):
        io.read_array(mixed)
    out = str(tmp_path / "o.npy")
    result = run("crop-pad", mixed, "-o", out, "--shape", "6,7", "--series", "1")
    assert result.exit_code == 0 and "series 1 of 2" in result.stderr and np.load(out).min() == 2
    result = run("crop-pad", same, "-o", out, "--shape", "4,5", "--page", "3")
    assert result.exit_code == 0 and "page 3 of 4" in result.stderr and np.load(out).shape == (4, 5)
    result = run("crop-pad", same, "-o", out, "--shape", "4,5", "--page", "4")
    assert result.exit_code == 1 and "--page 4 is out of range (pages 0 to 3)" in result.stderr
    result = run("crop-pad", same, "-o", out, "--shape", "4,5", "--page", "1", "--series", "0")
    assert result.exit_code == 2 and "give --series or --page, not both" in result.stderr


def test_compression_kept_or_set(tmp_path: Path, hyperstack: tuple[str, np.ndarray]) -> None:
    import tifffile

    path, _ = hyperstack

    def compression(args: list[str]) -> str:
        out = str(tmp_path / "o.tif")
        assert run("crop-pad", path, "-o", out, "--shape", "4,4", *args).exit_code == 0
        with tifffile.TiffFile(out) as tif:
            return str(tif.pages[0].compression.name)

    assert compression([]) == "ADOBE_DEFLATE"
    assert compression(["--compression", "lzma"]) == "LZMA"
    assert compression(["--compression", "none"]) == "NONE"
    assert compression(["--strip"]) == "ADOBE_DEFLATE"  # an encoding, not metadata


@pytest.mark.parametrize(("dtype", "compression", "predictor"), [
    (np.uint16, "lzw", 2), (np.int8, "zlib", 2), (np.float32, "zlib", 3), (np.float16, "lzma", 3)])
@pytest.mark.parametrize("byteorder", ["<", ">"])
def test_a_predictor_is_kept_with_the_compression(tmp_path: Path, dtype: Any, compression: str, predictor: int,
                                                  byteorder: str) -> None:
    """It was dropped (an LZW crop of a 16-bit gradient: 2965 bytes, 465 with it). The output is in
    native byte order whatever the input's: values are the same, every TIFF reader reads both orders,
    and native data is what geomcli (and tifffile) can memory-map."""
    import tifffile

    data = (np.add.outer(np.arange(64), np.arange(48)) % 100).astype(dtype)
    source, out = tmp_path / "in.tif", tmp_path / "o.tif"
    tifffile.imwrite(source, data, byteorder=byteorder, compression=compression, predictor=predictor)

    def written(*args: str) -> tuple[int, str, np.ndarray]:
        assert run("crop-pad", source, "-o", out, "--shape", "32,32", *args).exit_code == 0
        with tifffile.TiffFile(out) as tif:
            return int(tif.pages[0].predictor), tif.byteorder, tif.asarray()

    got, order, values = written()
    assert (got, order) == (predictor, "<" if sys.byteorder == "little" else ">")
    assert_array_equal(values, data[16:48, 8:40], strict=True)
    assert written("--strip")[0] == predictor  # an encoding, as the compression
    assert written("--compression", "zstd")[0] == predictor  # of the data, whatever the codec
    assert written("--compression", "none")[0] == 1
    assert written("--compression", "packbits")[0] == 1


def test_a_predictor_the_results_dtype_cannot_take_is_dropped(tmp_path: Path) -> None:
    """Horizontal differencing is for integers (tifffile refuses it for floats): float data from a
    predicted uint8 input (a grid-sample's --dtype, say) is written without it."""
    import tifffile

    source, out = tmp_path / "in.tif", tmp_path / "o.tif"
    tifffile.imwrite(source, np.zeros((8, 8), np.uint8), compression="zlib", predictor=2)
    loaded = io.read_array(str(source))
    assert loaded.metadata.predictor == 2
    assert io.write_array(np.zeros((8, 8), np.float32), str(out), metadata=loaded.metadata) == ()
    with tifffile.TiffFile(out) as tif:
        assert (tif.pages[0].predictor, tif.pages[0].compression.name) == (1, "ADOBE_DEFLATE")


@pytest.mark.parametrize(("shape", "extra"), [((2, 64, 80), {"metadata": {"axes": "CYX"}, "ome": True}),
                                               ((64, 80, 3), {"photometric": "rgb", "compression": "zlib"}),
                                               ((64, 80), {})])
def test_tiles_kept(tmp_path: Path, rng: np.random.Generator, shape: tuple[int, ...], extra: dict[str, Any]) -> None:
    """A tiled TIFF's output is tiled alike (an encoding, as the compression: --strip keeps it too),
    its values the operation's; an untiled one stays untiled; other formats have no tiles."""
    import tifffile

    data = rng.integers(0, 2**16, shape).astype(np.uint16 if len(shape) != 3 or shape[-1] != 3 else np.uint8)
    tiled, plain = tmp_path / "tiled.tif", tmp_path / "plain.tif"
    tifffile.imwrite(tiled, data, tile=(32, 48), **extra)
    tifffile.imwrite(plain, data, **{key: value for key, value in extra.items() if key != "ome"})

    def written(source: Path, *args: str) -> tuple[np.ndarray, tuple[int, int] | None]:
        out = tmp_path / "o.tif"
        result = run("crop-pad", source, "-o", out, "--shape", "40,70", *args)
        assert result.exit_code == 0 and "Warning" not in result.stderr, result.stderr
        with tifffile.TiffFile(out) as tif:
            page = tif.pages[0]
            return tif.asarray(), (page.tilelength, page.tilewidth) if page.is_tiled else None

    expected, untiled = written(plain)
    assert untiled is None
    for args in ([], ["--strip"]):
        values, tile = written(tiled, *args)
        assert tile == (32, 48) and np.array_equal(values, expected)
    assert run("crop-pad", tiled, "-o", tmp_path / "o.npy", "--shape", "40,70", "-q").exit_code == 0


def test_bigtiff_past_the_threshold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from geomcli.io import _tiff

    source = str(tmp_path / "in.npy")
    np.save(source, np.zeros((4, 4), np.uint8))
    assert run("crop-pad", source, "-o", str(tmp_path / "small.tif"), "--shape", "2,2").exit_code == 0
    assert (tmp_path / "small.tif").read_bytes()[:4] == b"II*\x00"
    monkeypatch.setattr(_tiff, "BIGTIFF_BYTES", 4)
    assert run("crop-pad", source, "-o", str(tmp_path / "big.tif"), "--shape", "2,2").exit_code == 0
    assert (tmp_path / "big.tif").read_bytes()[:4] == b"II+\x00"
    assert io.read_array(str(tmp_path / "big.tif")).data.shape == (2, 2)


def test_compress_level_and_quality(tmp_path: Path, rng: np.random.Generator) -> None:
    data = np.repeat(rng.integers(0, 256, (32, 1, 3), dtype=np.uint8), 64, axis=1)
    source = str(tmp_path / "in.png")
    io.write_array(data, source)
    sizes = {}
    for option, value, name in [("--compress-level", "0", "l0.png"), ("--compress-level", "9", "l9.png"),
                                ("--quality", "20", "q20.jpg"), ("--quality", "95", "q95.jpg")]:
        assert run("crop-pad", source, "-o", str(tmp_path / name), "--shape", "32,64", option, value).exit_code == 0
        sizes[name] = (tmp_path / name).stat().st_size
    assert sizes["l0.png"] > sizes["l9.png"] and sizes["q20.jpg"] < sizes["q95.jpg"]
    assert np.array_equal(io.read_array(str(tmp_path / "l0.png")).data, data)
    result = run("crop-pad", source, "-o", str(tmp_path / "q.webp"), "--shape", "32,64", "--quality", "50")
    assert warnings_of(result) == [f"Warning: {tmp_path / 'q.webp'}: WebP with --quality is lossy: "
                                   "the written values differ from the result"]
    result = run("crop-pad", source, "-o", str(tmp_path / "x.png"), "--shape", "4,4", "--compression", "zlib")
    assert result.exit_code == 2 and "--compression is for TIFF output, not PNG" in result.stderr


# ---- every warning path --------------------------------------------------------------------------


def test_jpeg_output_warns_once_that_it_is_lossy(tmp_path: Path, rng: np.random.Generator) -> None:
    source = str(tmp_path / "in.png")
    io.write_array(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8), source)
    out = str(tmp_path / "o.jpg")
    result = run("crop-pad", source, "-o", out, "--shape", "4,4")
    assert result.exit_code == 0
    assert warnings_of(result) == [f"Warning: {out}: JPEG is lossy: the written values differ from the result "
                                   "(write .png or .tiff to keep them)"]
    # a batch says it once, for the first file
    io.write_array(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8), str(tmp_path / "in2.png"))
    result = run("crop-pad", source, str(tmp_path / "in2.png"), "--out-dir", str(tmp_path / "jpegs"),
                 "--name", "{stem}.jpg", "--shape", "4,4", "-j", "1")
    assert result.exit_code == 0 and len(warnings_of(result)) == 1
    assert run("crop-pad", source, "-o", out, "--shape", "4,4", "-q").stderr == ""


@pytest.mark.parametrize("colours", [1, 2, 17, 255, 256])
def test_a_colour_gif_of_256_colours_or_fewer_is_written_exactly(tmp_path: Path, rng: np.random.Generator,
                                                                 colours: int) -> None:
    # its own colours as the palette: what Pillow's median cut keeps of 256 or fewer
    palette = rng.integers(0, 256, (colours, 3), dtype=np.uint8)
    data = palette[rng.integers(0, colours, (23, 31))]
    assert io.write_array(data, str(tmp_path / "o.gif")) == ()
    assert np.array_equal(io.read_array(str(tmp_path / "o.gif")).data, data)


def test_a_gif_cropped_and_resized_is_written_back_as_a_gif(tmp_path: Path, rng: np.random.Generator) -> None:
    """A palette GIF reads as RGB; a crop keeps its colours, so the GIF written holds them
    exactly; a linear resize makes more than 256, reduced and dithered with a warning (it was
    'GIF holds 1 channel, not 3' either way)."""
    from PIL import Image

    source = str(tmp_path / "in.gif")
    Image.fromarray(rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)).quantize(200).save(source)
    cropped = str(tmp_path / "crop.gif")
    result = run("crop-pad", source, "-o", cropped, "--shape", "20,30")
    assert result.exit_code == 0 and warnings_of(result) == []
    assert np.array_equal(io.read_array(cropped).data, io.read_array(source).data[10:30, 15:45])
    resized = str(tmp_path / "small.gif")
    result = run("resize", source, "-o", resized, "--sizes", "20,30", "--mode", "linear")
    assert result.exit_code == 0
    assert warnings_of(result) == [f"Warning: {resized}: GIF holds 256 colours: the result's colours were reduced "
                                   "to 256 and dithered, the written values differ from the result (write .png to "
                                   "keep them)"]
    written = io.read_array(resized).data
    assert written.shape == (20, 30, 3) and len(np.unique(written.reshape(-1, 3), axis=0)) <= 256


def test_a_transparent_gif_cropped_is_written_back_as_it_was_read(tmp_path: Path, rng: np.random.Generator) -> None:
    """A GIF with a transparent colour reads as RGBA; a crop of it is written with the same
    transparent entry and colours, and reads back equal (it was refused: 'GIF holds 1 channel')."""
    from PIL import Image

    indices = rng.integers(0, 40, (30, 44), dtype=np.uint8)
    indices[5:12, 8:30] = 7  # a transparent region
    picture = Image.fromarray(indices, mode="P")
    picture.putpalette(rng.integers(0, 256, 768, dtype=np.uint8).tolist())
    source, out = str(tmp_path / "in.gif"), str(tmp_path / "out.gif")
    picture.save(source, transparency=7)
    data = io.read_array(source).data
    assert data.shape == (30, 44, 4) and (data[..., 3] == 0).sum() == (indices == 7).sum()
    result = run("crop-pad", source, "-o", out, "--shape", "20,30")
    assert result.exit_code == 0 and warnings_of(result) == []
    assert np.array_equal(io.read_array(out).data, data[5:25, 7:37])


def test_what_a_gif_cannot_hold_of_alpha_is_said(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.integers(0, 256, (6, 8, 4), dtype=np.uint8)
    data[..., 3] = 255
    data[0, :, 3] = 0  # transparent, under several colours
    data[1, 0, 3] = 80  # partly
    said = io.write_array(data, str(tmp_path / "o.gif"))
    assert said == (
        "GIF holds no partial transparency: alpha below 128 was written as transparent, the rest as opaque "
        "(write .png to keep it)",
        "GIF holds one colour under its transparent pixels, not 9: they were given the first (write .png to keep "
        "theirs)")
    back = io.read_array(str(tmp_path / "o.gif")).data
    clear = data[..., 3] < 128
    assert np.array_equal(back[..., 3], np.where(clear, 0, 255))
    assert np.array_equal(back[~clear][:, :3], data[~clear][:, :3])  # 255 colours or fewer: exact


def test_json_carries_the_warnings(tmp_path: Path, rng: np.random.Generator) -> None:
    source = str(tmp_path / "in.png")
    io.write_array(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8), source)
    result = run("crop-pad", source, "-o", str(tmp_path / "o.jpg"), "--shape", "4,4", "--json")
    assert result.stderr == ""
    assert json.loads(result.stdout)["warnings"][0].startswith("JPEG is lossy")


WARNINGS: list[tuple[Metadata, str, str]] = [
    (Metadata(icc=b"profile"), "bmp", "BMP cannot hold the ICC profile; dropped"),
    (Metadata(icc=b"profile"), "gif", "GIF cannot hold the ICC profile; dropped"),
    (Metadata(resolution=(300.0, 300.0), unit="inch"), "webp", "WebP cannot hold the DPI (300 x 300); dropped"),
    (Metadata(resolution=(2.0, 3.0)), "png", "PNG cannot hold the resolution (2 x 3 pixels (no unit)); dropped"),
    (Metadata(resolution=(2.0, 3.0), unit="pixel"), "jpeg",
     "JPEG cannot hold the resolution (2 x 3 pixels per pixel); dropped"),
    (Metadata(exif=b"Exif\0\0MM\0*\0\0\0\x08\0\0"), "tiff", "TIFF cannot hold the EXIF data; dropped"),
    (Metadata(exif=b"Exif\0\0MM\0*\0\0\0\x08\0\0"), "bmp", "BMP cannot hold the EXIF data; dropped"),
    (Metadata(axes="ZCYX", axes_kind="imagej"), "tiff",
     "the TIFF axes ZCYX do not fit the result's shape (4, 6, 3); written without axes"),
    (Metadata(axes="YXS", axes_kind="imagej"), "tiff",
     "ImageJ metadata cannot describe int32 data with axes YXS; written as tifffile metadata with the same axes"),
    (Metadata(compression="jpeg"), "tiff",
     "the input's TIFF compression jpeg holds uint8 grey or RGB, not int32 shape (4, 6, 3); wrote zlib"),
]


@pytest.mark.parametrize(("metadata", "named"), [
    (Metadata(icc=b"profile"), ["ICC profile"]),
    (Metadata(resolution=(2.0, 2.0), unit="centimeter"), ["DPI (5.08 x 5.08)"]),
    (Metadata(axes="ZYX", axes_kind="imagej"), ["ImageJ axes metadata (ZYX)"]),
    (Metadata(axes="ZYX", axes_kind="ome"), ["OME axes metadata (ZYX)"]),
])
def test_npy_holds_no_metadata_by_its_nature_no_warning_and_json_names_it(
        tmp_path: Path, metadata: Metadata, named: list[str]) -> None:
    assert list(io.write_array(np.zeros((4, 6, 3), np.uint8), str(tmp_path / "o.npy"), metadata=metadata)) == []
    assert io.dropped(metadata, "npy") == named


def test_a_photo_to_npy_says_nothing_and_its_record_lists_what_was_dropped(tmp_path: Path) -> None:
    from PIL import Image

    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.jpg", dpi=(300, 300))
    result = run("crop-pad", tmp_path / "a.jpg", "-o", tmp_path / "o.npy", "--shape", "4,4")
    assert result.exit_code == 0 and "Warning" not in result.stderr
    record = json.loads(run("crop-pad", tmp_path / "a.jpg", "-o", tmp_path / "o.npy", "--shape", "4,4",
                            "--json").stdout)
    assert record["warnings"] == [] and record["dropped"] == ["DPI (300 x 300)"]


@pytest.mark.parametrize(("metadata", "fmt", "warning"), WARNINGS)
def test_each_field_that_cannot_be_kept_is_one_warning(tmp_path: Path, metadata: Metadata, fmt: str,
                                                       warning: str) -> None:
    dtype = np.int32 if "int32" in warning else np.uint8
    if fmt == "gif":
        data = np.zeros((4, 6), np.uint8)
    else:
        data = np.zeros((4, 6, 3), dtype)
    said = io.write_array(data, str(tmp_path / f"o.{fmt}"), metadata=metadata)
    lossy = ["JPEG is lossy"] if fmt == "jpeg" else []
    assert [w[:13] for w in said if w.startswith("JPEG is lossy")] == lossy
    rest = [w for w in said if not w.startswith("JPEG is lossy")]
    assert len(rest) == 1 and rest[0].startswith(warning)
    assert io.read_array(str(tmp_path / f"o.{fmt}")).data.shape == data.shape


def test_cli_names_the_field_on_one_line_each(tmp_path: Path, rng: np.random.Generator, icc: bytes) -> None:
    data = rng.integers(0, 256, (8, 10, 3), dtype=np.uint8)
    source = saved(tmp_path / "in.jpg", data, icc_profile=icc, dpi=(300, 300), exif=exif_block(1))
    out = str(tmp_path / "o.npy")
    result = run("crop-pad", source, "-o", out, "--shape", "4,4")
    assert result.exit_code == 0
    assert warnings_of(result) == []  # .npy holds no metadata by its nature: --json says what was dropped
    record = json.loads(run("crop-pad", source, "-o", out, "--shape", "4,4", "--json").stdout)
    assert record["dropped"] == ["ICC profile", "DPI (300 x 300)", "EXIF data"]


@pytest.fixture
def zstd_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """tifffile's encoders and decoders without ZSTD, as with an imagecodecs built without it."""
    import tifffile

    for table in ("COMPRESSORS", "DECOMPRESSORS"):
        codecs = {code: codec for code in (1, 8, 32946) if (codec := getattr(tifffile.TIFF, table)[code])}
        monkeypatch.setattr(tifffile.TIFF, table, codecs)


def zstd_tagged(path: Path) -> str:
    """A zlib TIFF whose compression tag says ZSTD (50000): what a zstd TIFF looks like before decoding."""
    import tifffile

    tifffile.imwrite(path, np.ones((4, 5), np.uint8), photometric="minisblack", metadata=None, compression="zlib")
    raw = bytearray(path.read_bytes())
    ifd = struct.unpack_from("<I", raw, 4)[0]
    for i in range(struct.unpack_from("<H", raw, ifd)[0]):
        entry = ifd + 2 + 12 * i
        if struct.unpack_from("<H", raw, entry)[0] == 259:
            struct.pack_into("<HHII", raw, entry, 259, 3, 1, 50000)  # SHORT, count 1
    path.write_bytes(bytes(raw))
    return str(path)


@pytest.mark.usefixtures("zstd_missing")
def test_a_codec_imagecodecs_lacks_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    out = tmp_path / "z.tiff"
    result = run("crop-pad", str(PHOTO), "-o", str(out), "--compression", "zstd", "--shape", "10,10")
    assert result.exit_code == 2  # found before reading, as every compression the output cannot take
    assert result.stderr == f"Error: {out}: TIFF compression zstd cannot be written (imagecodecs has no codec for it)\n"
    assert not out.exists()
    unavailable = "compression ZSTD is not available (imagecodecs has no codec for it)"
    tagged = zstd_tagged(tmp_path / "tagged.tiff")
    with pytest.raises(GeomError, match=r"tagged\.tiff: compression ZSTD is not available \(imagecodecs has no"):
        io.read_array(tagged)
    for command in (["info", tagged], ["crop-pad", tagged, "-o", str(out), "--shape", "2,2"]):
        result = run(*command)
        assert result.exit_code == 1
        assert result.stderr == f"Error: {tagged}: {unavailable}\n"
    # the input's compression, kept by default: zlib instead, with a warning
    said = io.write_array(np.ones((4, 5), np.uint8), str(out), metadata=Metadata(compression="zstd"))
    assert said == ("the input's TIFF compression zstd cannot be written (imagecodecs has no codec for it); "
                    "wrote zlib",)
    assert io.read_array(str(out)).metadata.compression == "zlib"


def test_write_options_reach_batch_workers(tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    for name in ("a", "b"):
        io.write_array(rng.integers(0, 256, (8, 8), dtype=np.uint8), str(tmp_path / f"{name}.png"))
    result = run("crop-pad", str(tmp_path / "a.png"), str(tmp_path / "b.png"), "--out-dir", str(tmp_path / "out"),
                 "--name", "{stem}.tif", "--shape", "4,4", "--compression", "lzma", "-j", "2")
    assert result.exit_code == 0, result.stderr
    for name in ("a", "b"):
        with tifffile.TiffFile(tmp_path / "out" / f"{name}.tif") as tif:
            assert tif.pages[0].compression.name == "LZMA"



def test_a_mapped_output_says_it_has_no_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 rng: np.random.Generator) -> None:
    import tifffile

    from geomcli.io import _mapped

    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    data = rng.integers(0, 4000, (8, 10), dtype=np.uint16)
    path = str(tmp_path / "printed.tif")
    tifffile.imwrite(path, data, resolution=(300.0, 300.0), resolutionunit="inch", compression="zlib")
    out = str(tmp_path / "big.tif")
    # (uncompressed: a compressed output, as this zlib TIFF's would be by default, is never mapped)
    result = run("crop-pad", path, "-o", out, "--shape", "4,4", "--compression", "none")
    assert result.exit_code == 0, result.stderr
    assert warnings_of(result) == [f"Warning: {out}: a big output is written through a memory map, which cannot hold "
                                   "the DPI (300 x 300); dropped"]
    assert np.array_equal(io.read_array(out).data, data[2:6, 3:7])
    assert run("crop-pad", path, "-o", out, "--shape", "4,4", "--strip", "--compression", "none"
               ).stderr.count("Warning") == 0
    kept = run("crop-pad", path, "-o", out, "--shape", "4,4")
    assert kept.exit_code == 0 and warnings_of(kept) == []  # compressed, from RAM, with its metadata


def _calibrated_hyperstack(tmp_path: Path, rng: np.random.Generator,
                           monkeypatch: pytest.MonkeyPatch) -> tuple[Path, np.ndarray, list[Any]]:
    """An ImageJ TZCYX uint16 TIFF (0.25 x 0.5 um pixels, 0.5 um slices, 3 s frames), its data, and
    a list that gets an item each time an output is written through a memory map."""
    import tifffile

    from geomcli.io import _mapped

    data = rng.integers(0, 4000, (2, 3, 2, 8, 10), dtype=np.uint16)  # T, Z, C, Y, X
    source = tmp_path / "in.tif"
    tifffile.imwrite(source, data, imagej=True, resolution=(4.0, 2.0), metadata={
        "axes": "TZCYX", "unit": "um", "spacing": 0.5, "finterval": 3.0})
    maps: list[Any] = []
    map_tiff = _mapped._map_tiff
    monkeypatch.setattr(_mapped, "_map_tiff", lambda tmp, *more: maps.append(tmp) or map_tiff(tmp, *more))
    return source, data, maps


@pytest.mark.parametrize("kind", ["rgb", "imagej"])
def test_a_memory_mapped_input_carries_the_metadata_a_read_one_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    rng: np.random.Generator, icc: bytes,
                                                                    kind: str) -> None:
    """An uncompressed TIFF past one_file.MAP_INPUT_BYTES is mapped, not read: its output has the
    same ICC profile, DPI or calibration as one read into memory gives (the same info --json)."""
    import tifffile

    from geomcli.engine import one_file
    from geomcli.io import _tiff

    source = tmp_path / "in.tif"
    if kind == "rgb":
        tifffile.imwrite(source, rng.integers(0, 255, (16, 16, 3), dtype=np.uint8), photometric="rgb",
                         iccprofile=icc, resolution=(300, 300), resolutionunit="INCH")
    else:
        tifffile.imwrite(source, rng.integers(0, 4000, (3, 16, 16), dtype=np.uint16), imagej=True,
                         resolution=(4.0, 4.0), metadata={"axes": "ZYX", "spacing": 0.5, "unit": "um"})
    maps: list[Any] = []
    memmap = _tiff._memmap
    monkeypatch.setattr(_tiff, "_memmap", lambda *args: maps.append(memmap(*args)) or maps[-1])
    records = []
    for threshold in (1 << 40, 0):  # read, then mapped
        monkeypatch.setattr(one_file, "MAP_INPUT_BYTES", threshold)
        out = tmp_path / f"out{threshold}.tif"
        result = run("crop-pad", source, "-o", out, "--shape", "8,8")
        assert result.exit_code == 0 and "Warning" not in result.stderr, result.stderr
        monkeypatch.setattr(one_file, "MAP_INPUT_BYTES", 1 << 40)  # (info reads the output into memory)
        record = json.loads(run("info", out, "--json").stdout)
        records.append({key: value for key, value in record.items() if key not in ("input", "file_size")})
    assert len(maps) == 1 and isinstance(maps[0], np.memmap)  # the second run's input alone was mapped
    assert records[0] == records[1]
    assert (records[0]["icc"] is not None and records[0]["dpi"] == [300.0, 300.0] if kind == "rgb" else
            records[0]["pixel_size"]["z"] == {"size": 0.5, "unit": "µm"})


@pytest.mark.parametrize("args", [["crop-pad", "--shape", "4,4"], ["space-to-depth", "--blocksize", "2"]])
def test_a_big_imagej_tiff_written_through_a_memory_map_keeps_its_calibration(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch,
                                                                              rng: np.random.Generator,
                                                                              args: list[str]) -> None:
    """An ImageJ TIFF output of 64 MiB or more is written through a memory map, and lost its
    calibration (pixel size and unit, slice spacing, frame interval) and hyperstack axes with one
    warning, 'a big output is written through a memory map, without metadata': a crop of an 8 x 2048
    x 2048 uint16 stack padded by a column, say. The map is written with them now, as one from RAM."""
    import tifffile

    from geomcli.io import _mapped

    source, data, maps = _calibrated_hyperstack(tmp_path, rng, monkeypatch)
    written: list[Any] = []
    for limit in (1, _mapped.MAP_OUTPUT_BYTES):  # through a map, then from RAM (both uncompressed)
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", limit)
        out = tmp_path / f"out{limit}.tif"
        result = run(args[0], source, "-o", out, *args[1:], "--json")
        assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
        with tifffile.TiffFile(out) as tif:
            page = tif.pages[0]
            info = {key: tif.imagej_metadata[key] for key in ("unit", "spacing", "finterval", "slices", "frames")}
            per_unit = [page.tags[tag].value[0] / page.tags[tag].value[1] for tag in ("XResolution", "YResolution")]
            written.append((tif.series[0].axes, tif.series[0].shape, info, per_unit, tif.asarray()))
    mapped, in_ram = written
    assert len(maps) == 1  # the first alone
    blocks = args[0] == "space-to-depth"  # (twice the pixel size, 4 times the channels)
    assert mapped[:4] == in_ram[:4] == ("TZCYX", (2, 3, 8, 4, 5) if blocks else (2, 3, 2, 4, 4), {
        "unit": "micron", "spacing": 0.5, "finterval": 3.0, "slices": 3, "frames": 2}, [2.0, 1.0] if blocks
        else [4.0, 2.0])
    assert np.array_equal(mapped[4], in_ram[4])


def test_an_imagej_tiff_to_an_ome_tif_name_is_an_ome_tiff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         rng: np.random.Generator) -> None:
    """A .ome.tif name promises OME-XML (tifffile, Bio-Formats and Fiji read it so): an ImageJ
    hyperstack written to one came out an ImageJ TIFF, is_ome False. It is an OME-TIFF of the same
    axes now, its pixel size, slice spacing and frame interval as PhysicalSizeX/Y/Z and
    TimeIncrement, from RAM and through a memory map alike."""
    import tifffile

    from geomcli.io import _mapped

    source, data, maps = _calibrated_hyperstack(tmp_path, rng, monkeypatch)
    written: list[Any] = []
    for limit in (1, _mapped.MAP_OUTPUT_BYTES):  # through a map, then from RAM
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", limit)
        out = tmp_path / f"out{limit}.ome.tif"
        result = run("crop-pad", source, "-o", out, "--shape", "4,4", "--json")
        assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
        with tifffile.TiffFile(out) as tif:
            assert tif.is_ome and not tif.is_imagej
            pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
            sizes = {key: pixels.get(key) for key in ("PhysicalSizeX", "PhysicalSizeXUnit", "PhysicalSizeY",
                                                      "PhysicalSizeZ", "PhysicalSizeZUnit", "TimeIncrement",
                                                      "TimeIncrementUnit")}
            written.append((tif.series[0].axes, tif.series[0].shape, sizes, tif.asarray()))
    assert len(maps) == 1
    mapped, in_ram = written
    assert mapped[:3] == in_ram[:3] == ("TZCYX", (2, 3, 2, 4, 4), {
        "PhysicalSizeX": 0.25, "PhysicalSizeXUnit": "\u00b5m", "PhysicalSizeY": 0.5, "PhysicalSizeZ": 0.5,
        "PhysicalSizeZUnit": "\u00b5m", "TimeIncrement": 3.0, "TimeIncrementUnit": "s"})
    assert np.array_equal(mapped[3], data[..., 2:6, 3:7]) and np.array_equal(in_ram[3], mapped[3])
    assert io.read_array(str(out)).metadata.physical == (("X", 0.25, "\u00b5m"), ("Y", 0.5, "\u00b5m"),
                                                         ("Z", 0.5, "\u00b5m"), ("T", 3.0, "s"))


def test_a_big_rgb_ome_tiff_is_written_through_a_memory_map_with_its_ome_xml(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            rng: np.random.Generator) -> None:
    # an image's samples (YXS) kept a map from writing OME-XML, whose contiguous pages it lays out as
    # a TIFF from RAM does: a big RGB .ome.tif warned that it could not hold them
    import tifffile

    from geomcli.io import _mapped

    source = saved(tmp_path / "in.png", rng.integers(0, 256, (12, 18, 3), dtype=np.uint8))
    ram, mapped = tmp_path / "ram.ome.tif", tmp_path / "mapped.ome.tif"
    assert run("crop-pad", source, "-o", ram, "--shape", "8,8").exit_code == 0
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    result = run("crop-pad", source, "-o", mapped, "--shape", "8,8")
    assert result.exit_code == 0 and warnings_of(result) == [], result.stderr
    with tifffile.TiffFile(mapped) as tif, tifffile.TiffFile(ram) as from_ram:
        assert tif.is_ome and tif.series[0].axes == "YXS" and tif.pages[0].photometric == tifffile.PHOTOMETRIC.RGB
        assert tif.ome_metadata == from_ram.ome_metadata.replace(*re.findall(r'UUID="[^"]*"', from_ram.ome_metadata
                                                                              + tif.ome_metadata)[:2])
        assert np.array_equal(tif.asarray(), from_ram.asarray())


@pytest.mark.parametrize("mapped", [False, True])
@pytest.mark.parametrize("kind", ["imagej", "ome"])
def test_a_result_whose_axes_outgrew_its_file_s_is_an_ome_tiff_of_its_layout_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, mapped: bool) -> None:
    """Space-to-depth makes channels an ImageJ ZYX stack or an OME YX image has no axis for: to a
    .ome.tif name the first warned that its axes were of no known layout (the TIFF's own ZCYX,
    which a TIFF output takes, was not looked at) and the second was a TIFF of no OME-XML, its
    OME axes YX not fitting the result. Each is an OME-TIFF of the axes its layout names, with the
    sizes of the axes it still has; through a memory map too, where the first was a TIFF of no
    OME-XML, 'a big output is written through a memory map, which cannot hold the OME physical
    sizes, ..., OME axes metadata (ZCYX); dropped' (ZCYX was not taken for its own layout)."""
    import tifffile

    from geomcli.io import _mapped

    if mapped:
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)

    source = tmp_path / "in.tif"
    if kind == "imagej":
        tifffile.imwrite(source, np.zeros((3, 16, 16), np.uint16), imagej=True, resolution=(2.0, 2.0),
                         metadata={"axes": "ZYX", "unit": "um", "spacing": 1.5})
    else:
        tifffile.imwrite(source, np.zeros((16, 16), np.uint16), ome=True, metadata={
            "axes": "YX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.5})
    out = tmp_path / "out.ome.tif"
    result = run("space-to-depth", source, "-o", out, "--blocksize", "2", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
    with tifffile.TiffFile(out) as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
        assert tif.is_ome and tif.series[0].axes == ("ZCYX" if kind == "imagej" else "YXS")
    assert (pixels["PhysicalSizeX"], pixels["PhysicalSizeY"], pixels.get("PhysicalSizeZ")) == (
        1.0, 1.0, 1.5 if kind == "imagej" else None)


@pytest.mark.parametrize("kind", ["imagej", "ome"])
def test_a_big_stack_grown_by_channels_keeps_its_axes_and_sizes_through_a_memory_map(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Space-to-depth of a ZYX stack writes ZCYX with its calibration from RAM; through a memory
    map (64 MiB or more) the ImageJ stack warned 'a big output is written through a memory map,
    which cannot hold the DPI (...), ImageJ spacing 1.5, ImageJ axes metadata (ZYX); dropped' and
    wrote tifffile's JSON axes, the OME one lost its OME-XML. Both now write what RAM writes."""
    import tifffile

    from geomcli.io import _mapped

    source = tmp_path / "in.tif"
    if kind == "imagej":
        tifffile.imwrite(source, np.zeros((3, 16, 16), np.uint16), imagej=True, resolution=(2.0, 2.0),
                         metadata={"axes": "ZYX", "unit": "um", "spacing": 1.5})
    else:
        tifffile.imwrite(source, np.zeros((3, 16, 16), np.uint16), ome=True, metadata={
            "axes": "ZYX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.5, "PhysicalSizeZ": 1.5})
    written = []
    for limit in (_mapped.MAP_OUTPUT_BYTES, 1):  # from RAM, then through a map
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", limit)
        out = tmp_path / f"out{limit}.tif"
        result = run("space-to-depth", source, "-o", out, "--blocksize", "2", "--json")
        assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
        with tifffile.TiffFile(out) as tif:
            assert tif.series[0].axes == "ZCYX" and tif.series[0].shape == (3, 4, 8, 8)
            written.append((tif.is_imagej, tif.is_ome, tif.pages[0].resolution, tif.imagej_metadata,
                            tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"].get("PhysicalSizeZ")
                            if tif.is_ome else None))
    assert written[0] == written[1]
    assert written[0][:2] == ((True, False) if kind == "imagej" else (False, True))


@pytest.mark.parametrize(("shape", "axes"), [((12, 18), "YX"), ((12, 18, 3), "YXS"), ((2, 3, 12, 18), "QCYX")])
def test_a_file_of_no_ome_axes_to_an_ome_tif_name_is_an_ome_tiff(tmp_path: Path, rng: np.random.Generator,
                                                                 shape: tuple[int, ...], axes: str) -> None:
    # a PNG's or a .npy's result named .ome.tif was a TIFF of no OME-XML: it takes its layout's axes
    import tifffile

    data = rng.integers(0, 256, shape, dtype=np.uint8)
    source = tmp_path / ("in.png" if len(shape) < 4 else "in.npy")
    if len(shape) < 4:
        saved(source, data)
    else:
        np.save(source, data)
    out = tmp_path / "out.OME.tiff"
    result = run("crop-pad", source, "-o", out, "--shape", "4,4", *(["--layout", "NCHW"] if len(shape) == 4 else []))
    assert result.exit_code == 0 and warnings_of(result) == [], result.stderr
    with tifffile.TiffFile(out) as tif:
        assert tif.is_ome and tif.series[0].axes == axes
    assert np.array_equal(io.read_array(str(out)).data, io.read_array(str(source)).data[..., 4:8, 7:11, :]
                          if axes == "YXS" else io.read_array(str(source)).data[..., 4:8, 7:11])


@pytest.mark.parametrize(("command", "source_shape", "dtype", "expected"), [
    (["crop-pad", "--shape", "4,4,1"], (12, 18, 3), np.uint8, (4, 4)),  # one sample: OME's one channel
    (["depth-to-space", "--blocksize", "2"], (6, 8, 4), np.uint8, (12, 16)),
    (["space-to-depth", "--blocksize", "2"], (8, 12), np.bool_, (4, 4, 6)),  # bool samples: channels
])
def test_a_result_of_samples_the_pages_cannot_hold_is_an_ome_tiff_of_channels(
        tmp_path: Path, rng: np.random.Generator, command: list[str], source_shape: tuple[int, ...],
        dtype: type, expected: tuple[int, ...]) -> None:
    """One sample per pixel, or bool samples (which tifffile writes as a page a row), named .ome.tif
    raised tifffile's 'shape does not match stored shape': a traceback, exit 1. They are OME's
    channels now, a plane each (tifffile reads one channel back as YX)."""
    import tifffile

    data = rng.integers(0, 256, source_shape).astype(dtype) if dtype is np.bool_ else \
        rng.integers(0, 256, source_shape, dtype=dtype)
    source = tmp_path / ("in.npy" if dtype is np.bool_ else "in.png")
    if dtype is np.bool_:
        np.save(source, data)
    else:
        saved(source, data)
    out, plain = tmp_path / "out.ome.tif", tmp_path / "out.npy"
    for target in (out, plain):
        result = run(command[0], source, "-o", target, *command[1:])
        assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(out) as tif:
        assert tif.is_ome and tif.series[0].shape == expected
        assert tif.series[0].axes == ("YX" if len(expected) == 2 else "CYX")
        stored = tif.asarray()
    assert np.array_equal(stored, np.moveaxis(np.load(plain), -1, 0).reshape(expected))


def test_a_mapped_output_names_what_it_lost_beside_the_calibration_it_kept(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          rng: np.random.Generator, icc: bytes) -> None:
    """A memory-mapped ImageJ output keeps its axes and calibration; its warning said 'a big output is
    written through a memory map, without metadata' where an ICC profile alone was lost (and a
    camera's Make tag, which no output keeps, was not named at all). Each is named now."""
    import tifffile

    from geomcli.io import _mapped

    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    source, out = tmp_path / "in.tif", tmp_path / "out.tif"
    tifffile.imwrite(source, rng.integers(0, 4000, (3, 8, 10), dtype=np.uint16), imagej=True,
                     resolution=(4.0, 4.0), iccprofile=icc, extratags=[(271, "s", 0, "GeomCam", True)],
                     metadata={"axes": "ZYX", "unit": "um", "spacing": 0.5})
    result = run("crop-pad", source, "-o", out, "--shape", "4,4", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [
        "a big output is written through a memory map, which cannot hold the ICC profile; dropped",
        "the TIFF tags Make cannot be carried; dropped"]
    with tifffile.TiffFile(out) as tif:
        assert tif.is_imagej and tif.imagej_metadata["spacing"] == 0.5 and tif.series[0].axes == "ZYX"
        assert 34675 not in tif.pages[0].tags


def test_a_mapped_output_of_a_file_without_metadata_says_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  rng: np.random.Generator) -> None:
    # a plain RGB TIFF's samples (YXS) were taken for metadata the map dropped; a .npy, which holds
    # none by its nature, was warned about where one from RAM only lists the DPI under dropped
    import tifffile
    from PIL import Image

    from geomcli.io import _mapped

    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    data = rng.integers(0, 256, (12, 18, 3), dtype=np.uint8)
    plain, dpi = tmp_path / "plain.tif", tmp_path / "dpi.png"
    tifffile.imwrite(plain, data, photometric="rgb")
    Image.fromarray(data).save(dpi, dpi=(300, 300))
    result = run("crop-pad", plain, "-o", tmp_path / "out.tif", "--shape", "4,4")
    assert result.exit_code == 0 and warnings_of(result) == []
    result = run("crop-pad", dpi, "-o", tmp_path / "out.npy", "--shape", "4,4", "--json")
    record = json.loads(result.stdout.splitlines()[0])
    assert record["warnings"] == [] and record["dropped"] == ["DPI (299.999 x 299.999)"]


@pytest.mark.parametrize("args", [["warp", "--rotate", "30"], ["grid-sample", "--grid", "GRID"]])
def test_a_warp_of_each_plane_keeps_the_stack_s_z_size(tmp_path: Path, args: list[str]) -> None:
    """A rotation or a grid leaves its plane's pixels no size along Y and X, not the spacing of
    the planes it samples one by one: a z-stack's PhysicalSizeZ of 3 was dropped with them."""
    import tifffile

    source, out = tmp_path / "in.ome.tif", tmp_path / "out.ome.tif"
    tifffile.imwrite(source, np.zeros((2, 4, 8, 8), np.uint16), ome=True, metadata={
        "axes": "ZCYX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.25, "PhysicalSizeZ": 3.0})
    np.save(tmp_path / "grid.npy", np.zeros((2, 6, 6, 2), np.float32))  # (one grid for each of the 2 planes)
    result = run(args[0], source, "-o", out, *[str(tmp_path / "grid.npy") if arg == "GRID" else arg
                                               for arg in args[1:]])
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(out) as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
    assert pixels["PhysicalSizeZ"] == 3.0 and "PhysicalSizeX" not in pixels and "PhysicalSizeY" not in pixels
    assert (f"OME physical sizes along X, Y of {args[0]}'s output (its pixels have no size per axis: a grid, a "
            "rotation or shear) cannot be carried; dropped") in result.stderr


# a turn of 30 degrees about Y (x' = cos x - sin z, z' = sin x + cos z): Z mixed with X, Y left alone
_TURNED_ABOUT_Y = "0.8660254,0,-0.5,0,0,1,0,0,0.5,0,0.8660254,0"
# a turn of 30 degrees about Z: X mixed with Y, Z left alone (as a plane's rotation leaves it)
_TURNED_ABOUT_Z = "0.8660254,-0.5,0,0,0.5,0.8660254,0,0,0,0,1,0"
# theta of every axis mixed with the others
_TURNED_ABOUT_ALL = "0.9,-0.2,0.1,0.05,0.2,0.9,0,0.1,0,0.1,1.1,-0.1"


@pytest.mark.parametrize(("args", "expected", "said"), [
    (["--rotate", "30"], {"Z": 0.5}, "OME physical sizes along X, Y of warp's output"),
    (["--volume", "--theta", _TURNED_ABOUT_Y], {"Y": 0.25}, "OME physical sizes along X, Z of warp's output"),
    (["--volume", "--theta", _TURNED_ABOUT_Z], {"Z": 0.5}, "OME physical sizes along X, Y of warp's output"),
    # Z still an axis of its own: scaled as a pure scale scales it, kept where only moved
    (["--volume", "--theta", "0.8660254,-0.5,0,0,0.5,0.8660254,0,0,0,0,2,0"], {"Z": 1.0},
     "OME physical sizes along X, Y of warp's output"),
    (["--volume", "--theta", "0.8660254,-0.5,0,0,0.5,0.8660254,0,0,0,0,1,0.5"], {"Z": 0.5},
     "OME physical sizes along X, Y of warp's output"),
    (["--volume", "--theta", _TURNED_ABOUT_ALL], {}, "OME physical sizes of warp's output"),
    (["--volume", "--theta", "2,0,0,0,0,2,0,0,0,0,2,0"], {"X": 0.5, "Y": 0.5, "Z": 1.0}, None),
], ids=["plane", "volume-turn-about-y", "volume-turn-about-z", "volume-turn-about-z-scale-z",
        "volume-turn-about-z-shift-z", "volume-turn", "volume-scale"])
@pytest.mark.parametrize("kind", ["imagej", "ome"])
def test_an_imagej_z_stack_s_spacing_goes_to_an_ome_tiff_as_an_ome_stack_s_z_size_does(
        tmp_path: Path, kind: str, args: list[str], expected: dict[str, float], said: str | None) -> None:
    """'warp zyx.tif -o r.ome.tif --rotate 30' of an ImageJ stack (0.25 um pixels, spacing 0.5) lost
    its Z size: the rotation dropped the ImageJ resolution, the spacing's unit, before the calibration
    became OME's sizes ('the ImageJ spacing 0.5 cannot be written without ImageJ metadata'), where an
    OME stack kept PhysicalSizeZ. It is OME's sizes first now, made by the warp as an OME stack's are:
    a plane's rotation keeps Z's; a --volume turn drops those of the axes it mixes (a turn about Z
    keeps Z's, as a plane's rotation does, and scales it where it scales Z too); a scale scales them."""
    import tifffile

    source, out = tmp_path / ("in.tif" if kind == "imagej" else "in.ome.tif"), tmp_path / "out.ome.tif"
    data = np.zeros((4, 8, 8), np.uint16)
    if kind == "imagej":
        tifffile.imwrite(source, data, imagej=True, resolution=(4.0, 4.0),
                         metadata={"axes": "ZYX", "spacing": 0.5, "unit": "um"})
    else:
        tifffile.imwrite(source, data, ome=True, metadata={"axes": "ZYX", "PhysicalSizeX": 0.25, "PhysicalSizeY": 0.25,
                                                           "PhysicalSizeZ": 0.5})
    result = run("warp", source, "-o", out, *args)
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(out) as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
    assert {axis: pixels[f"PhysicalSize{axis}"] for axis in "XYZ" if f"PhysicalSize{axis}" in pixels} == expected
    assert all(pixels.get(f"PhysicalSize{axis}Unit", "µm") == "µm" for axis in expected)
    warnings = [line for line in result.stderr.splitlines() if "Warning" in line]
    assert warnings == ([] if said is None else [
        f"Warning: {out}: {said} (its pixels have no size per axis: a grid, a rotation or shear) cannot be carried; "
        "dropped"])


@pytest.mark.parametrize("steps", [["resize", "--sizes", "8,8,8", "warp", "--rotate", "30"],
                                   ["warp", "--rotate", "30", "resize", "--sizes", "8,8,8"]],
                         ids=["resize-then-rotate", "rotate-then-resize"])
def test_a_chain_s_rotation_keeps_the_z_size_its_other_steps_make(tmp_path: Path, steps: list[str]) -> None:
    """'chain -i zyx.ome.tif -o o.ome.tif resize --sizes 8,8,8 warp --rotate 30' of 4 planes of 0.5
    kept PhysicalSizeZ 0.5 on 8 planes (the input's, past the resize), and a resize after the
    rotation dropped it. Z is its steps' as each makes it: 4 planes on 8 is 0.25."""
    import tifffile

    source, out = tmp_path / "in.ome.tif", tmp_path / "out.ome.tif"
    tifffile.imwrite(source, np.zeros((4, 8, 8), np.uint16), ome=True, metadata={
        "axes": "ZYX", "PhysicalSizeX": 0.25, "PhysicalSizeY": 0.25, "PhysicalSizeZ": 0.5})
    result = run("chain", "-i", source, "-o", out, *steps)
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(out) as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
    assert pixels["SizeZ"] == 8 and pixels["PhysicalSizeZ"] == 0.25
    assert "PhysicalSizeX" not in pixels and "PhysicalSizeY" not in pixels


@pytest.mark.parametrize("args", [["warp", "--rotate", "30"], ["grid-sample", "--grid", "GRID"]])
def test_a_warp_of_an_imagej_stack_keeps_the_spacing_in_its_own_unit(tmp_path: Path, args: list[str]) -> None:
    """ImageJ gives the slice spacing in the one unit of its resolution: a warp that drops the
    resolution (and so the unit) dropped the spacing with it ('the ImageJ slice spacing (0.5
    micron) is in the unit of the resolution dropped'), where an OME-TIFF output keeps
    PhysicalSizeZ. It is written with ImageJ's zunit now, and no unit: ImageJ reads Y and X
    uncalibrated and Z in microns, and so does info."""
    import tifffile

    source, out = tmp_path / "in.tif", tmp_path / "out.tif"
    tifffile.imwrite(source, np.zeros((2, 8, 8), np.uint16), imagej=True, resolution=(4.0, 4.0),
                     metadata={"axes": "ZYX", "spacing": 0.5, "unit": "um"})
    np.save(tmp_path / "grid.npy", np.zeros((2, 6, 6, 2), np.float32))
    result = run(args[0], source, "-o", out, *[str(tmp_path / "grid.npy") if arg == "GRID" else arg
                                               for arg in args[1:]])
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(out) as tif:
        meta = tif.imagej_metadata
    assert meta is not None and meta["spacing"] == 0.5 and meta["zunit"] == "micron" and "unit" not in meta
    assert "spacing" not in result.stderr
    assert json.loads(run("info", out, "--json").stdout)["pixel_size"] == {"z": {"size": 0.5, "unit": "µm"}}
    # read back as written: carried on by the next run, nothing named as dropped
    again = run("crop-pad", out, "-o", tmp_path / "again.tif", "--shape", "4,4", "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["warnings"] == [], again.output
    with tifffile.TiffFile(tmp_path / "again.tif") as tif:
        assert {key: (tif.imagej_metadata or {}).get(key) for key in ("unit", "zunit", "spacing")} == {
            "unit": None, "zunit": "micron", "spacing": 0.5}


@pytest.mark.parametrize("out", ["out.tif", "mapped.tif", "out.ome.tif", "out.zarr"])
def test_an_imagej_zunit_beside_a_resolution_is_the_spacing_s_unit(tmp_path: Path, out: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Fiji writes a zunit beside a resolution where Z is in another unit: the spacing was read in
    the resolution's ('info' gave z 0.5 um of 0.5 mm slices, an OME-TIFF's PhysicalSizeZ and an
    OME-Zarr's z scale the same) and the zunit named as dropped. It is the spacing's unit now,
    written back as ImageJ's zunit, and every output says 0.5 mm as info does."""
    import tifffile

    from geomcli.io import _mapped

    source = tmp_path / "in.tif"
    tifffile.imwrite(source, np.zeros((4, 8, 8), np.uint16), imagej=True, resolution=(4.0, 4.0),
                     metadata={"axes": "ZYX", "spacing": 0.5, "unit": "um", "zunit": "mm"})
    sizes = {"x": {"size": 0.25, "unit": "µm"}, "y": {"size": 0.25, "unit": "µm"}, "z": {"size": 0.5, "unit": "mm"}}
    assert json.loads(run("info", source, "--json").stdout)["pixel_size"] == sizes
    maps: list[Any] = []
    map_tiff = _mapped._map_tiff
    monkeypatch.setattr(_mapped, "_map_tiff", lambda tmp, *more: maps.append(tmp) or map_tiff(tmp, *more))
    if out == "mapped.tif":
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    result = run("crop-pad", source, "-o", tmp_path / out, "--shape", "4,4", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == [] and len(maps) == (out == "mapped.tif")
    assert json.loads(run("info", tmp_path / out, "--json").stdout)["pixel_size"] == sizes
    if out.endswith(".tif") and not out.endswith(".ome.tif"):
        with tifffile.TiffFile(tmp_path / out) as tif:
            meta = tif.imagej_metadata or {}
        assert {key: meta.get(key) for key in ("unit", "zunit", "spacing")} == {
            "unit": "micron", "zunit": "mm", "spacing": 0.5}


@pytest.mark.parametrize(("theta", "spacing"), [
    ("0.8660254,-0.5,0,0,0.5,0.8660254,0,0,0,0,2,0", 1.0),  # a turn about Z that scales Z: Z its own axis
    ("0.8660254,0,-0.5,0,0,1,0,0,0.5,0,0.8660254,0", None),  # a turn about Y: Z mixed with X
], ids=["about-z-scale-z", "about-y"])
def test_a_volume_turn_of_an_imagej_stack_keeps_the_spacing_where_z_is_its_own_axis(
        tmp_path: Path, theta: str, spacing: float | None) -> None:
    """The spacing follows Z as PhysicalSizeZ does: scaled where the turn leaves Z an axis of its
    own, dropped with a warning where it mixes Z with Y or X (a spacing kept there would be a
    size no plane of the output has)."""
    import tifffile

    source, out = tmp_path / "in.tif", tmp_path / "out.tif"
    tifffile.imwrite(source, np.zeros((4, 8, 8), np.uint16), imagej=True, resolution=(4.0, 4.0),
                     metadata={"axes": "ZYX", "spacing": 0.5, "unit": "um"})
    result = run("warp", source, "-o", out, "--volume", "--theta", theta)
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(out) as tif:
        meta = tif.imagej_metadata
    assert meta is not None and meta.get("spacing") == spacing and "unit" not in meta
    assert meta.get("zunit") == (None if spacing is None else "micron")
    said = (f"Warning: {out}: ImageJ spacing 0.5 of warp's output (its pixels have no size per axis: a grid, a "
            "rotation or shear) cannot be carried; dropped")
    assert (said in result.stderr.splitlines()) == (spacing is None)


def test_a_big_warped_imagej_stack_keeps_its_spacing_through_a_memory_map(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator) -> None:
    """Through a memory map, as from RAM: the rotation's output holds its spacing in ImageJ's zunit
    (where the map was refused for a spacing of no resolution to state its unit)."""
    import tifffile

    from geomcli.io import _mapped

    source, _, maps = _calibrated_hyperstack(tmp_path, rng, monkeypatch)
    written = []
    for limit in (1, _mapped.MAP_OUTPUT_BYTES):  # through a map, then from RAM (both uncompressed)
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", limit)
        out = tmp_path / f"out{limit}.tif"
        result = run("warp", source, "-o", out, "--rotate", "30", "--json")
        assert result.exit_code == 0, result.stderr
        with tifffile.TiffFile(out) as tif:
            meta = tif.imagej_metadata or {}
            written.append(({key: meta.get(key) for key in ("unit", "zunit", "spacing", "finterval", "slices")},
                            tif.series[0].axes, json.loads(result.stdout)["warnings"]))
    assert len(maps) == 1
    assert written[0] == written[1] == (
        {"unit": None, "zunit": "micron", "spacing": 0.5, "finterval": 3.0, "slices": 3}, "TZCYX",
        ["pixel size (0.25 x 0.5 micron) of warp's output (its pixels have no size per axis: a grid, a rotation or "
         "shear) cannot be carried; dropped"])


@pytest.mark.parametrize(("args", "expected"), [
    (["crop-pad", "--shape", "4,4"], {"X": 0.5, "Y": 0.25, "Z": 3.0}),
    (["space-to-depth", "--blocksize", "2"], {"X": 1.0, "Y": 0.5, "Z": 3.0}),
    (["resize", "--sizes", "16,4"], {"X": 1.0, "Y": 0.125, "Z": 3.0}),
    # ZCYX reads as NCHW, Z as N: a resize of N is one of Z (its size was kept)
    (["resize", "--scales", "4,1,1,1"], {"X": 0.5, "Y": 0.25, "Z": 0.75}),
    (["chain", "space-to-depth", "--blocksize", "2", "depth-to-space", "--blocksize", "2"],
     {"X": 0.5, "Y": 0.25, "Z": 3.0}),
])
def test_ome_physical_sizes_follow_the_pixels(tmp_path: Path, args: list[str], expected: dict[str, float]) -> None:
    """PhysicalSizeX/Y/Z and their units are written for the output's pixels: kept by a crop, b
    times by space-to-depth, length in over length out by resize; not in an output without OME
    axes (a warning), nor by --strip."""
    import tifffile

    source, out = tmp_path / "in.ome.tif", tmp_path / "out.ome.tif"
    data = np.arange(2 * 4 * 8 * 8, dtype=np.uint16).reshape(2, 4, 8, 8)
    tifffile.imwrite(source, data, ome=True, metadata={
        "axes": "ZCYX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.25, "PhysicalSizeYUnit": "nm", "PhysicalSizeZ": 3.0})
    command, rest = args[0], args[1:]
    given = (["-i", source, "-o", out, *rest] if command == "chain" else [source, "-o", out, *rest])
    result = run(command, *given)
    assert result.exit_code == 0 and "Warning" not in result.stderr, result.stderr
    with tifffile.TiffFile(out) as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
    assert {axis: pixels[f"PhysicalSize{axis}"] for axis in "XYZ"} == pytest.approx(expected)
    assert pixels["PhysicalSizeYUnit"] == "nm" and "PhysicalSizeXUnit" not in pixels or \
        pixels["PhysicalSizeXUnit"] == "µm"  # OME's default unit, which tifffile may write out
    npy = run("crop-pad", source, "-o", tmp_path / "o.npy", "--shape", "4,4", "--json")
    assert "OME physical sizes" in json.loads(npy.stdout)["dropped"]
    png = run("crop-pad", source, "-o", tmp_path / "o.png", "--shape", "4,4", "--page", "0")
    # one page
    assert png.exit_code == 0 and "PNG cannot hold the OME physical sizes; dropped" in png.stderr, png.stderr
    stripped = run("crop-pad", source, "-o", tmp_path / "s.ome.tif", "--shape", "4,4", "--strip")
    with tifffile.TiffFile(tmp_path / "s.ome.tif") as tif:
        assert "PhysicalSize" not in (tif.ome_metadata or "") and stripped.exit_code == 0


def test_a_big_ome_tiff_written_through_a_memory_map_keeps_its_calibration(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An OME-TIFF output of 64 MiB or more is written through a memory map, and lost its OME-XML
    (axes, physical sizes, channel names) with one warning, 'a big output is written through a
    memory map, without metadata': a crop of a 4 x 3000 x 3000 uint16 stack, say. The map is
    written with them now; channel names that no longer fit are named where dropped."""
    import tifffile

    from geomcli.io import _mapped

    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    source, out = tmp_path / "in.ome.tif", tmp_path / "out.ome.tif"
    data = np.arange(2 * 8 * 8, dtype=np.uint16).reshape(2, 8, 8)
    tifffile.imwrite(source, data, ome=True, metadata={"axes": "CYX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.25,
                                                       "Channel": {"Name": ["dapi", "gfp"]}})
    for args, warnings, shape, names, sizes in (
            (["crop-pad", "--shape", "4,4"], [], (2, 4, 4), ["dapi", "gfp"], (0.5, 0.25)),
            (["space-to-depth", "--blocksize", "2"],
             ["the OME-XML channel names (dapi, gfp) do not fit the result's 8 channels; dropped"], (8, 4, 4), [],
             (1.0, 0.5))):
        result = run(args[0], source, "-o", out, *args[1:], "--json")
        assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == warnings, result.output
        with tifffile.TiffFile(out) as tif:
            pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
            assert tif.series[0].axes == "CYX" and tif.series[0].shape == shape
        channels = pixels["Channel"] if isinstance(pixels["Channel"], list) else [pixels["Channel"]]
        assert [channel["Name"] for channel in channels if "Name" in channel] == names
        assert (pixels["PhysicalSizeX"], pixels["PhysicalSizeY"]) == sizes
    # the same bytes run after run (its UUID is named by the file's name, shape and dtype)
    written = []
    for _ in range(2):
        assert run("crop-pad", source, "-o", out, "--shape", "4,4").exit_code == 0
        written.append(out.read_bytes())
    assert written[0] == written[1]


@pytest.mark.parametrize(("source", "args", "note"), [
    ("in.ome.tif", ["space-to-depth", "--blocksize", "2"], "pixel size x 0.5 → 1 µm, y 0.25 → 0.5 nm"),
    ("blocks.ome.tif", ["depth-to-space", "--blocksize", "2"], "pixel size x 1 → 0.5 µm, y 0.5 → 0.25 nm"),
    ("in.ome.tif", ["resize", "--scales", "0.5,0.5"], "pixel size x 0.5 → 1 µm, y 0.25 → 0.5 nm"),
    ("ij.tif", ["space-to-depth", "--blocksize", "4"], "pixel size x 0.25 → 1 µm, y 0.5 → 2 µm"),
    ("in.zarr", ["space-to-depth", "--blocksize", "2"], "pixel size y 0.25 → 0.5 nm, x 0.5 → 1 µm"),
    ("in.ome.tif", ["crop-pad", "--shape", "4,4"], None),
])
def test_space_to_depth_says_what_it_does_to_the_pixel_size(tmp_path: Path, source: str, args: list[str],
                                                            note: str | None) -> None:
    """space-to-depth makes each pixel a b x b block, and wrote its pixel size b times larger
    without a word (depth-to-space: b times smaller, a resize by its step): a note now says what
    the calibration became; a crop, which keeps it, says nothing."""
    import tifffile

    tifffile.imwrite(tmp_path / "in.ome.tif", np.zeros((2, 8, 8), np.uint16), ome=True, metadata={
        "axes": "CYX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.25, "PhysicalSizeYUnit": "nm"})
    tifffile.imwrite(tmp_path / "blocks.ome.tif", np.zeros((8, 4, 4), np.uint16), ome=True, photometric="minisblack",
                     metadata={
        "axes": "CYX", "PhysicalSizeX": 1.0, "PhysicalSizeY": 0.5, "PhysicalSizeYUnit": "nm"})
    tifffile.imwrite(tmp_path / "ij.tif", np.zeros((3, 8, 8), np.uint16), imagej=True, resolution=(4.0, 2.0),
                     metadata={"axes": "ZYX", "spacing": 1.5, "unit": "um"})
    assert run("crop-pad", tmp_path / "in.ome.tif", "-o", tmp_path / "in.zarr", "--shape", "8,8").exit_code == 0
    out = tmp_path / ("out.zarr" if source.endswith(".zarr") else "out.tif")
    result = run(args[0], tmp_path / source, "-o", out, *args[1:], "--json")
    assert result.exit_code == 0, result.output
    notes = [text for text in json.loads(result.stdout)["notes"] if text.startswith("pixel size")]
    assert notes == ([] if note is None else [note])


@pytest.mark.parametrize(("shape", "options", "expected"), [
    ((3, 40, 50), ["--sizes", "10,50", "--layout", "NHW"], (2.0, 1.0)),  # pages of grey: H, W are the last two
    ((3, 40, 50), ["--sizes", "6,40,50", "--layout", "NHW"], (2.0, 4.0)),  # only the page count changes
    ((3, 20, 30, 3), ["--sizes", "10,60"], (4.0, 2.0)),  # pages of RGB: H, W before the samples
    # tf_crop_and_resize samples the roi's share corner to corner: 10 pixels step 0.5 * 49 / 9 input
    # pixels on x, 0.5 * 39 / 9 on y
    ((40, 50), ["--sizes", "10,10", "--coordinate-transformation-mode", "tf_crop_and_resize", "--roi",
                "0.2,0.5,0.7,1.0"], (2 / (0.5 * 49 / 9), 4 / (0.5 * 39 / 9))),
])
def test_resize_updates_the_resolution_along_x_and_y(tmp_path: Path, shape: tuple[int, ...], options: list[str],
                                                     expected: tuple[float, float]) -> None:
    """x and y are the layout's W and H, whatever the stack axes before them (found by a try-out:
    a stack's pages and rows were taken for y and x)."""
    import tifffile

    source, out = tmp_path / "in.tif", tmp_path / "out.tif"
    tifffile.imwrite(source, np.zeros(shape, np.uint8), photometric="rgb" if shape[-1] == 3 else "minisblack",
                     resolution=(2.0, 4.0))
    result = run("resize", source, "-o", out, *options)
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(out) as tif:
        tags = tif.pages[0].tags
        x, y = (tags[code].value[0] / tags[code].value[1] for code in ("XResolution", "YResolution"))
    assert (x, y) == pytest.approx(expected)


@pytest.mark.parametrize("size", [float("nan"), 0.0, -2.0])
def test_an_ome_physical_size_that_is_no_size_is_named_where_dropped(tmp_path: Path, size: float) -> None:
    """PhysicalSizeX="nan" (or 0, or -2) was dropped without a word while the Y size beside it was
    carried: the output's pixels then had a size along Y alone, and nothing said why."""
    import tifffile

    source, out = tmp_path / "in.ome.tif", tmp_path / "out.ome.tif"
    tifffile.imwrite(source, np.zeros((8, 8), np.uint16), ome=True,
                     metadata={"axes": "YX", "PhysicalSizeX": size, "PhysicalSizeY": 0.5})
    result = run("crop-pad", source, "-o", out, "--shape", "4,4", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == [
        f"the OME-XML PhysicalSizeX {size:g} (no positive size) cannot be carried; dropped"]
    with tifffile.TiffFile(out) as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
    assert pixels["PhysicalSizeY"] == 0.5 and "PhysicalSizeX" not in pixels


@pytest.mark.parametrize(("args", "increment"), [(["crop-pad", "--shape", "4,4"], 2.5),
                                                (["resize", "--sizes", "6,8,8"], 1.25)])
def test_an_ome_time_increment_is_kept_and_plane_positions_are_named_where_dropped(
        tmp_path: Path, args: list[str], increment: float) -> None:
    """An OME-TIFF's TimeIncrement (the frame interval of a time series) was dropped with a
    warning: it is carried as the physical sizes are (half the interval after a resize to twice
    the frames). Its planes' stage positions and times are named where dropped: geomcli writes its
    OME-XML anew from the sizes, physical sizes and time increment."""
    import tifffile

    source, out = tmp_path / "in.ome.tif", tmp_path / "out.ome.tif"
    tifffile.imwrite(source, np.zeros((3, 8, 8), np.uint16), ome=True, metadata={
        "axes": "TYX", "TimeIncrement": 2.5, "TimeIncrementUnit": "ms",
        "Plane": {"PositionX": [1.0, 1.0, 1.0], "DeltaT": [0.0, 2.5, 5.0]}})
    result = run(args[0], source, "-o", out, *args[1:], "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == [
        "the OME-XML plane positions and times cannot be carried; dropped"]
    with tifffile.TiffFile(out) as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
        assert "DeltaT" not in tif.ome_metadata
    assert (pixels["TimeIncrement"], pixels["TimeIncrementUnit"]) == (pytest.approx(increment), "ms")


@pytest.mark.parametrize("suffix", [".npy"])
def test_an_imagej_stack_s_spacing_and_frame_interval_are_named_where_dropped(tmp_path: Path, suffix: str) -> None:
    """A .npy output holds no ImageJ entries: its --json 'dropped' named the DPI and the axes, not
    the slice spacing and frame interval lost with them (a .zarr holds them as its OME-Zarr scale:
    test_an_imagej_calibration_is_an_ome_zarr_s_scale in tests/engine/test_zarr_file.py)."""
    import tifffile

    source = tmp_path / "in.tif"
    tifffile.imwrite(source, np.zeros((2, 3, 8, 8), np.uint8), imagej=True, resolution=(2.0, 2.0),
                     metadata={"axes": "TZYX", "spacing": 0.5, "finterval": 3.0, "unit": "um"})
    result = run("crop-pad", source, "-o", tmp_path / f"out{suffix}", "--shape", "4,4", "--json", "-q")
    assert result.exit_code == 0, result.stderr
    assert "ImageJ spacing 0.5, finterval 3" in json.loads(result.stdout)["dropped"]


def test_an_imagej_stack_s_spacing_is_named_where_a_tiff_output_is_no_imagej_hyperstack(tmp_path: Path) -> None:
    """ImageJ holds RGB as uint8 of 3 or 4 samples: a space-to-depth of an RGB z-stack (12 samples)
    is written with tifffile's metadata, and its slice spacing was lost there without a word, where
    a .npy's --json names it."""
    import tifffile

    source, out = tmp_path / "in.tif", tmp_path / "out.tif"
    tifffile.imwrite(source, np.zeros((3, 8, 8, 3), np.uint8), imagej=True, resolution=(2.0, 2.0),
                     photometric="rgb", metadata={"axes": "ZYXS", "spacing": 0.5, "unit": "um"})
    result = run("space-to-depth", source, "-o", out, "--blocksize", "2", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == [
        "ImageJ metadata cannot describe uint8 data with axes ZYXS; written as tifffile metadata with the same axes",
        "the ImageJ spacing 0.5 cannot be written without ImageJ metadata; dropped"]
    with tifffile.TiffFile(out) as tif:
        assert tif.imagej_metadata is None and tif.series[0].shape == (3, 4, 4, 12)


@pytest.mark.parametrize(("bits", "dtype"), [(12, np.uint16), (4, np.uint8)])
def test_samples_narrower_than_their_type_are_kept_or_named_where_widened(tmp_path: Path, bits: int,
                                                                          dtype: Any) -> None:
    """A 12-bit TIFF (a microscope camera's) is read as uint16, and was written as 16-bit samples
    of the same values (warned), its white, 4095, a sixteenth of the output's range, which a viewer
    shows near black; 'info' said bit_depth 16. Its samples are now written 12-bit where tifffile
    can (uncompressed, values that fit) and info says 12; else a warning says why they are not."""
    import tifffile

    source, out = tmp_path / "in.tif", tmp_path / "out.tif"
    white = (1 << bits) - 1
    data = np.arange(64, dtype=dtype).reshape(8, 8) % (white + 1)
    tifffile.imwrite(source, data, bitspersample=bits)
    assert json.loads(run("info", "--json", source).stdout)["bit_depth"] == bits
    result = run("crop-pad", source, "-o", out, "--shape", "4,4", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
    with tifffile.TiffFile(out) as tif:
        assert tif.pages[0].bitspersample == bits and np.array_equal(tif.asarray(), data[2:6, 2:6])
    assert json.loads(run("info", "--json", out).stdout)["bit_depth"] == bits
    width = np.dtype(dtype).itemsize * 8
    for options, why in ((["--shape", "4,4", "--compression", "zlib"], "tifffile packs them only uncompressed, "
                                                                        "not zlib"),
                         (["--shape", "10,10", "--fill", str(white + 1)], f"the result holds values past {white}")):
        result = run("crop-pad", source, "-o", out, *options, "--json")
        assert json.loads(result.stdout)["warnings"] == [
            f"the TIFF's {bits}-bit samples cannot be kept: {why} (written as {width}-bit: {white}, their white, is no "
            "longer the output's); dropped"]
        with tifffile.TiffFile(out) as tif:
            assert tif.pages[0].bitspersample == width


def test_metadata_no_output_carries_is_named_in_a_warning(tmp_path: Path) -> None:
    """OME-XML plane positions and ImageJ display ranges are not rewritten for the new shape: the
    user is told, once per field, rather than losing them silently (physical sizes and channel
    names are carried: test_ome_physical_sizes_follow_the_pixels, test_ome_channel_names_...)."""
    import tifffile

    ome, imagej = tmp_path / "ome.ome.tif", tmp_path / "ij.tif"
    data = np.arange(2 * 8 * 8, dtype=np.uint16).reshape(2, 8, 8)
    tifffile.imwrite(ome, data, ome=True, metadata={"axes": "CYX", "PhysicalSizeX": 0.5,
                                                    "Channel": {"Name": ["dapi", "gfp"]},
                                                    "Plane": {"PositionX": [1.0, 1.0]}})
    tifffile.imwrite(imagej, data, imagej=True, metadata={"axes": "CYX", "ranges": (0.0, 100.0, 0.0, 100.0)})
    for source, expected in ((ome, "the OME-XML plane positions and times cannot be carried; dropped"),
                             (imagej, "the ImageJ metadata Ranges cannot be carried; dropped")):
        result = CliRunner().invoke(cli, ["crop-pad", str(source), "-o", str(tmp_path / "out.tif"),
                                          "--shape", "4,4"], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        assert result.stderr.count("Warning:") == 1 and expected in result.stderr, result.stderr
        stripped = CliRunner().invoke(cli, ["crop-pad", str(source), "-o", str(tmp_path / "out.tif"),
                                            "--shape", "4,4", "--strip"], catch_exceptions=False)
        assert "Warning" not in stripped.stderr


def test_ome_channel_names_are_kept_where_the_channels_are(tmp_path: Path) -> None:
    """An OME-TIFF's channel names were dropped by every output, a crop's too, whose channels are
    the input's: they are written where the result has as many channels, else named in a warning
    (space-to-depth's channels are blocks of pixels) or in --json's dropped (a .npy)."""
    import tifffile

    source = tmp_path / "in.ome.tif"
    tifffile.imwrite(source, np.zeros((3, 8, 8), np.uint16), ome=True,
                     metadata={"axes": "CYX", "Channel": {"Name": ["dapi", "gfp", "rfp"]}})
    cropped = run("crop-pad", source, "-o", tmp_path / "crop.ome.tif", "--shape", "4,4")
    assert cropped.exit_code == 0 and "Warning" not in cropped.stderr, cropped.stderr
    with tifffile.TiffFile(tmp_path / "crop.ome.tif") as tif:
        channels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]["Channel"]
    assert [channel["Name"] for channel in channels] == ["dapi", "gfp", "rfp"]
    blocks = run("space-to-depth", source, "-o", tmp_path / "blocks.ome.tif", "--blocksize", "2", "--json")
    assert json.loads(blocks.stdout)["warnings"] == [
        "the OME-XML channel names (dapi, gfp, rfp) do not fit the result's 12 channels; dropped"]
    with tifffile.TiffFile(tmp_path / "blocks.ome.tif") as tif:
        assert "dapi" not in tif.ome_metadata
    npy = run("crop-pad", source, "-o", tmp_path / "o.npy", "--shape", "4,4", "--json")
    assert json.loads(npy.stdout)["dropped"] == ["OME channel names (dapi, gfp, rfp)", "OME axes metadata (CYX)"]


@pytest.mark.parametrize(("page", "name"), [(1, "gfp"), (4, "gfp"), (5, "rfp")])
def test_a_page_of_an_ome_stack_keeps_its_pixel_size_and_channel_name(tmp_path: Path, page: int, name: str) -> None:
    """One plane (--page) of a ZCYX OME-TIFF was written as a plain TIFF with a warning that its
    physical sizes and channel names were dropped: the plane keeps its X and Y sizes, and the name
    of the channel it is of (page 4 of 2 slices of 3 channels is slice 1's second channel); its
    stack's Z size, which no axis of a plane has, is named where dropped."""
    import tifffile

    source, out = tmp_path / "in.ome.tif", tmp_path / "plane.ome.tif"
    data = np.arange(2 * 3 * 8 * 8, dtype=np.uint16).reshape(2, 3, 8, 8)
    tifffile.imwrite(source, data, ome=True, metadata={
        "axes": "ZCYX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.25, "PhysicalSizeYUnit": "nm", "PhysicalSizeZ": 3.0,
        "Channel": {"Name": ["dapi", "gfp", "rfp"]}})
    result = run("crop-pad", source, "-o", out, "--page", str(page), "--shape", "4,4", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [
        "the OME-XML PhysicalSizeZ 3 (of the stack the page is one plane of) cannot be carried; dropped"], result.stdout
    with tifffile.TiffFile(out) as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
        assert tif.series[0].axes == "YX" and np.array_equal(tif.asarray(), data[page // 3, page % 3, 2:6, 2:6])
    assert (pixels["PhysicalSizeX"], pixels["PhysicalSizeY"], pixels["PhysicalSizeYUnit"]) == (0.5, 0.25, "nm")
    assert pixels["Channel"]["Name"] == name and "PhysicalSizeZ" not in pixels


@pytest.mark.parametrize(("mode", "key"), [("L", 7), ("RGB", (1, 2, 3))])
def test_a_colour_key_that_is_not_kept_is_noted(tmp_path: Path, mode: str, key: Any) -> None:
    from PIL import Image

    Image.new(mode, (6, 4), 5 if mode == "L" else (5, 5, 5)).save(tmp_path / "keyed.png", transparency=key)
    loaded = io.read_array(str(tmp_path / "keyed.png"))
    assert loaded.notes == (f"its transparent colour {key} is not kept (no alpha channel is made)",)
    assert loaded.data.shape == ((4, 6) if mode == "L" else (4, 6, 3))


# --- TIFF orientation and descriptive tags ------------------------------------------------


def _oriented_tiff(path: Path, data: np.ndarray, orientation: int) -> None:
    import tifffile

    tifffile.imwrite(path, data, photometric="rgb" if data.ndim == 3 and data.shape[-1] == 3 else "minisblack",
                     extratags=[(274, "H", 1, orientation, True), (271, "s", 0, "geomcli camera", True)])


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("shape", [(4, 6), (4, 6, 3)])
def test_a_tiff_is_turned_upright_by_its_orientation_as_png_and_jpeg_are(
    tmp_path: Path, rng: np.random.Generator, orientation: int, shape: tuple[int, ...]
) -> None:
    from PIL import Image, ImageOps

    data = rng.integers(0, 256, shape).astype(np.uint8)
    path = tmp_path / "a.tiff"
    _oriented_tiff(path, data, orientation)
    loaded = io.read_array(str(path))
    image = Image.fromarray(data)
    image.getexif()[0x0112] = orientation
    expected = np.asarray(ImageOps.exif_transpose(image))  # what Pillow does for an EXIF orientation
    assert np.array_equal(loaded.data, expected)
    assert io.read_header(str(path)).shape == expected.shape
    turned = [note for note in loaded.notes if "TIFF orientation" in note]
    assert turned == ([] if orientation == 1 else [f"{io_base.ORIENTATIONS[orientation]} by its TIFF orientation "
                                                  f"{orientation}"])
    as_stored = io.read_array(str(path), auto_orient=False)
    assert np.array_equal(as_stored.data, data) and io.read_header(str(path), auto_orient=False).shape == shape


@pytest.mark.parametrize("command", [["crop-pad", "--shape", "8,8"], ["warp", "--rotate", "10"]])
def test_a_geotiff_s_georeferencing_is_named_as_dropped(tmp_path: Path, rng: np.random.Generator,
                                                       command: list[str]) -> None:
    """A GeoTIFF's tie point, pixel scale and geo keys were dropped in silence: 'warp dem.tif -o
    turned.tif --rotate 10' wrote a TIFF of no georeferencing and said nothing, where a camera's
    Make tag is named. Each output now names them, as the writer drops them, and a .npy's 'dropped'."""
    import tifffile

    source = tmp_path / "dem.tif"
    tifffile.imwrite(source, rng.integers(0, 4000, (20, 30), dtype=np.uint16), extratags=[
        (33550, "d", 3, (30.0, 30.0, 0.0), True), (33922, "d", 6, (0, 0, 0, 500000.0, 4000000.0, 0), True),
        (34735, "H", 16, (1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32633), True)])
    line = "the GeoTIFF georeferencing (ModelPixelScale, ModelTiepoint, GeoKeyDirectory)"
    result = run(command[0], source, "-o", tmp_path / "out.tif", *command[1:], "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [f"{line} cannot be carried; dropped"]
    with tifffile.TiffFile(tmp_path / "out.tif") as tif:
        assert not {33550, 33922, 34735} & set(tif.pages[0].tags.keys())
    plain = run(command[0], source, "-o", tmp_path / "out.npy", *command[1:], "--json")
    assert json.loads(plain.stdout)["dropped"] == [line]


def test_a_tiff_orientation_not_applied_and_descriptive_tags_are_warned_about(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    stack = rng.integers(0, 256, (3, 4, 6)).astype(np.uint8)  # ZYX: the orientation is not applied
    _oriented_tiff(tmp_path / "stack.tiff", stack, 6)
    result = CliRunner().invoke(cli, ["crop-pad", str(tmp_path / "stack.tiff"), "-o", str(tmp_path / "out.tiff"),
                                      "--shape", "3,2,2"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "the TIFF orientation 6 (rotated 90 degrees clockwise to be upright) cannot be carried" in result.output
    assert "the TIFF tags Make cannot be carried; dropped" in result.output
    _oriented_tiff(tmp_path / "image.tiff", stack[0], 6)
    result = CliRunner().invoke(cli, ["crop-pad", str(tmp_path / "image.tiff"), "-o", str(tmp_path / "out.tiff"),
                                      "--shape", "2,2"], catch_exceptions=False)
    assert "TIFF orientation 6 (" not in result.output  # applied, so nothing is lost
    assert "rotated 90 degrees clockwise by its TIFF orientation 6" in result.output


@pytest.mark.parametrize("orientation", range(1, 9))
def test_a_tiff_turned_upright_has_its_resolution_turned_too(tmp_path: Path, orientation: int) -> None:
    import tifffile

    path = tmp_path / "a.tiff"
    tifffile.imwrite(path, np.zeros((4, 6), np.uint8), resolution=(300, 150), resolutionunit="INCH",
                     extratags=[(274, "H", 1, orientation, True)])
    expected = (150.0, 300.0) if orientation in (5, 6, 7, 8) else (300.0, 150.0)
    assert io.read_array(str(path)).metadata.resolution == pytest.approx(expected)
    assert io.read_array(str(path), auto_orient=False).metadata.resolution == pytest.approx((300.0, 150.0))


def _photo_444(path: Path) -> np.ndarray:
    """A 480×640 photo-like JPEG at quality 96, 4:4:4 (Pillow's subsampling=0); its decoded pixels."""
    from PIL import Image

    rng = np.random.default_rng(1)
    y, x = np.mgrid[0:480, 0:640]
    planes = [128 + 100 * np.sin(x / 37.0) * np.cos(y / 23.0), 128 + 90 * np.sin((x + y) / 29.0),
              128 + 80 * np.cos(x / 17.0 - y / 41.0)]
    pixels = np.clip(np.stack(planes, -1) + rng.normal(0, 6, (480, 640, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(pixels).save(path, quality=96, subsampling=0)
    with Image.open(path) as image:
        return np.asarray(image)


def _psnr(path: Path, reference: np.ndarray) -> float:
    from PIL import Image

    with Image.open(path) as image:
        error = np.asarray(image).astype(np.float64) - reference
    return float(10 * np.log10(255**2 / np.mean(error**2)))


def test_a_jpeg_keeps_its_coding(tmp_path: Path) -> None:
    """A crop of a 4:4:4 quality-96 JPEG is coded as the photo was: 4:4:4 and its own quantisation
    tables. ImageMagick's `convert -gravity center -extent 224x224` on the same file keeps 4:4:4 at
    quality 96 too (47.6 dB in 14.7 KB on the issue's photo); geomcli's default used to be 4:2:0 at
    95 (39.5 dB). --subsampling and --quality choose."""
    from PIL import Image, JpegImagePlugin

    decoded = _photo_444(tmp_path / "photo.jpg")
    reference = decoded[128:352, 208:432].astype(np.float64)
    assert run("crop-pad", tmp_path / "photo.jpg", "-o", tmp_path / "kept.jpg", "--shape", "224,224",
               "-q").exit_code == 0
    with Image.open(tmp_path / "photo.jpg") as source, Image.open(tmp_path / "kept.jpg") as kept:
        assert JpegImagePlugin.get_sampling(kept) == 0
        assert kept.quantization == source.quantization
    kept_db = _psnr(tmp_path / "kept.jpg", reference)
    # measured against ImageMagick 6.9.11's `convert photo.jpg -gravity center -extent 224x224` on this
    # very file: 58.44 dB in 45648 bytes; geomcli: 58.44 dB in 45648 bytes (optimised Huffman tables)
    assert kept_db > 58.4, kept_db
    assert (tmp_path / "kept.jpg").stat().st_size <= 1.2 * 45648
    assert run("crop-pad", tmp_path / "photo.jpg", "-o", tmp_path / "small.jpg", "--shape", "224,224",
               "--subsampling", "4:2:0", "--quality", "80", "-q").exit_code == 0
    with Image.open(tmp_path / "small.jpg") as small:
        assert JpegImagePlugin.get_sampling(small) == 2
    assert _psnr(tmp_path / "small.jpg", reference) < kept_db
    assert (tmp_path / "small.jpg").stat().st_size < (tmp_path / "kept.jpg").stat().st_size
    warned = run("crop-pad", tmp_path / "photo.jpg", "-o", tmp_path / "o.png", "--shape", "8,8",
                 "--subsampling", "4:4:4")
    assert "--subsampling is for JPEG output, not PNG; ignored" in warned.stderr


def test_a_grey_jpeg_keeps_its_quantisation_tables(tmp_path: Path, rng: np.random.Generator) -> None:
    """A grey JPEG has no chroma subsampling (Pillow's get_sampling is -1), and its coding was
    dropped with it: a quality-50 grey photo was resized into a quality-95 one, 2 to 4 times the
    quantisation steps finer than the input's and larger, against the documented default."""
    from PIL import Image

    source = saved(tmp_path / "grey.jpg", rng.integers(0, 256, (40, 60), dtype=np.uint8), quality=50)
    assert run("resize", source, "-o", tmp_path / "o.jpg", "--sizes", "20,30", "-q").exit_code == 0
    with Image.open(source) as before, Image.open(tmp_path / "o.jpg") as after:
        assert after.mode == "L" and after.quantization == before.quantization


def test_subsampling_of_a_grey_jpeg_is_said_to_be_ignored(tmp_path: Path, rng: np.random.Generator) -> None:
    """A grey JPEG has one component, no chroma to subsample: --subsampling 4:4:4 on one was
    ignored without a word, where the option given for a PNG warns. The run and the dry run
    say so, of the grey outputs alone."""
    (tmp_path / "in").mkdir()
    grey = saved(tmp_path / "in" / "grey.jpg", rng.integers(0, 256, (40, 60), dtype=np.uint8))
    saved(tmp_path / "in" / "colour.jpg", rng.integers(0, 256, (40, 60, 3), dtype=np.uint8))
    told = "--subsampling is for colour JPEG output, not grey (one channel, no chroma); ignored"
    one = run("resize", grey, "-o", tmp_path / "o.jpg", "--sizes", "20,30", "--subsampling", "4:4:4", "--json")
    assert one.exit_code == 0 and told in json.loads(one.stdout)["warnings"]
    for extra in (("--dry-run",), ()):
        result = run("resize", tmp_path / "in", "--out-dir", tmp_path / "out", "--sizes", "20,30",
                     "--subsampling", "4:4:4", "--json", *extra)
        assert result.exit_code == 0
        records = {Path(record["input"]).name: record for record in map(json.loads, result.stdout.splitlines())
                   if "input" in record}
        assert told in records["grey.jpg"]["warnings"] and told not in records["colour.jpg"]["warnings"]


def test_a_progressive_jpeg_stays_progressive(tmp_path: Path, rng: np.random.Generator) -> None:
    """A web photo's progressive scans (shown coarse first while it loads) became one baseline
    scan; a baseline photo stays baseline, and a PNG's JPEG is baseline as before."""
    from PIL import Image

    data = rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)
    for progressive in (True, False):
        source = saved(tmp_path / f"in{progressive}.jpg", data, progressive=progressive, quality=80)
        assert run("resize", source, "-o", tmp_path / "o.jpg", "--sizes", "20,30", "-q").exit_code == 0
        with Image.open(source) as before, Image.open(tmp_path / "o.jpg") as after:
            assert bool(after.info.get("progressive")) == progressive
            assert after.quantization == before.quantization
    png = saved(tmp_path / "in.png", data)
    assert run("resize", png, "-o", tmp_path / "p.jpg", "--sizes", "20,30", "-q").exit_code == 0
    with Image.open(tmp_path / "p.jpg") as after:
        assert not after.info.get("progressive")


@pytest.mark.parametrize("codec", ["webp", "jpeg2000", "png"])
def test_an_input_codec_geomcli_does_not_write_is_named_and_zlib_written(tmp_path: Path, codec: str) -> None:
    import tifffile

    data = (np.arange(16 * 16 * 3) % 251).astype(np.uint8).reshape(16, 16, 3)
    source, out = tmp_path / "in.tif", tmp_path / "out.tif"
    tifffile.imwrite(source, data, compression=codec)
    assert io.read_header(str(source)) is not None and io.read_array(str(source)).metadata.compression == codec
    assert json.loads(run("info", source, "--json").stdout)["compression"] == codec
    result = run("crop-pad", source, "-o", out, "--shape", "8,8")
    assert result.exit_code == 0
    assert (f"Warning: {out}: the input's TIFF compression {codec} is not one geomcli writes; wrote zlib "
            "(--compression chooses)") in result.stderr
    with tifffile.TiffFile(out) as written:
        assert written.pages[0].compression == tifffile.COMPRESSION.ADOBE_DEFLATE
    # another format has no TIFF compression to lose: nothing said
    assert "Warning" not in run("crop-pad", source, "-o", tmp_path / "out.png", "--shape", "8,8").stderr


@pytest.mark.parametrize("out", ["o.png", "o.jpg", "o.tiff"])
def test_a_cmyk_jpegs_cmyk_profile_does_not_label_its_rgb_output(tmp_path: Path, rng: np.random.Generator,
                                                               icc: bytes, out: str) -> None:
    """Pillow converts a CMYK JPEG to RGB without its profile; the CMYK profile was written onto
    the RGB output, which libpng calls an invalid ICC profile colour space and a colour-managed
    viewer reads as CMYK. It is dropped, with a note; an RGB profile still travels."""
    from PIL import Image

    cmyk = bytearray(icc)
    assert cmyk[16:20] == b"RGB "
    cmyk[16:20] = b"CMYK"
    source = tmp_path / "in.jpg"
    Image.fromarray(rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)).convert("CMYK").save(
        source, icc_profile=bytes(cmyk))
    result = run("resize", source, "-o", tmp_path / out, "--sizes", "20,30", "--json")
    assert result.exit_code == 0
    assert "its CMYK ICC profile dropped: it does not describe the RGB values" in json.loads(result.stdout)["notes"]
    with Image.open(tmp_path / out) as im:
        assert im.mode == "RGB" and "icc_profile" not in im.info
    rgb = saved(tmp_path / "rgb.jpg", rng.integers(0, 256, (40, 60, 3), dtype=np.uint8), icc_profile=icc)
    assert run("resize", rgb, "-o", tmp_path / out, "--sizes", "20,30", "-q").exit_code == 0
    with Image.open(tmp_path / out) as im:
        assert im.info["icc_profile"] == icc


@pytest.mark.parametrize("mapped", [False, True], ids=["from-ram", "memory-map"])
@pytest.mark.parametrize("source", ["n4.npy", "n4.zarr"])
def test_a_4d_tensor_s_space_to_depth_to_an_ome_tif_name_is_an_ome_tiff_of_nchw(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped: bool, source: str) -> None:
    """'space-to-depth n4.npy -o s.ome.tif --blocksize 2' read the tensor as NCHW (rank 4's
    default) but warned that the result's axes were of no known layout and wrote no OME-XML,
    where '--layout NCHW' wrote an OME-TIFF. It is one of the axes the kernel took, QCYX, as with
    --layout; crop-pad, which takes no layout for every axis it is given, still says why not."""
    import tifffile

    from geomcli.io import _mapped

    pytest.importorskip("zarr")
    if mapped:
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    data = np.arange(2 * 3 * 8 * 8, dtype=np.uint8).reshape(2, 3, 8, 8)
    if source.endswith(".npy"):
        np.save(tmp_path / source, data)
    else:
        import zarr

        zarr.create_array(str(tmp_path / source), shape=data.shape, dtype=data.dtype)[...] = data
    laid_out = tmp_path / "given.ome.tif"
    given = run("space-to-depth", tmp_path / source, "-o", laid_out, "--blocksize", "2", "--layout", "NCHW")
    assert given.exit_code == 0, given.output
    out = tmp_path / "out.ome.tif"
    result = run("space-to-depth", tmp_path / source, "-o", out, "--blocksize", "2", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
    with tifffile.TiffFile(out) as tif, tifffile.TiffFile(laid_out) as given:
        assert tif.is_ome and tif.series[0].axes == given.series[0].axes == "QCYX"
        assert np.array_equal(tif.asarray(), given.asarray())
        assert tif.series[0].shape == (2, 12, 4, 4)
    result = run("crop-pad", tmp_path / source, "-o", tmp_path / "c.ome.tif", "--shape", "2,3,4,4", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [
        "a .ome.tif name promises OME-XML, but the result's axes are of no known layout; written without OME-XML"]


@pytest.mark.parametrize("mapped", [False, True], ids=["from-ram", "memory-map"])
@pytest.mark.parametrize("calibrated", [False, True])
def test_an_imagej_frame_interval_is_an_ome_time_increment_without_a_t_axis(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped: bool, calibrated: bool) -> None:
    """An ImageJ ZYX stack with a frame interval (of a length unit or none) to a .ome.tif name
    warned 'the ImageJ finterval 2 cannot be written without ImageJ metadata; dropped': OME's
    TimeIncrement was written only along a T axis, and not at all without a length unit. The
    Pixels hold it whatever SizeT is: it is written, and read back from such an OME-TIFF, so a
    second .ome.tif keeps it too, where it warned 'the OME-XML time increment cannot be carried'."""
    import tifffile

    from geomcli.io import _mapped

    if mapped:
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    source = tmp_path / "ij.tif"
    lengths = {"unit": "um", "spacing": 1.5} if calibrated else {}
    tifffile.imwrite(source, np.arange(3 * 8 * 8, dtype=np.uint16).reshape(3, 8, 8), imagej=True,
                     **({"resolution": (2.0, 2.0)} if calibrated else {}),
                     metadata={"axes": "ZYX", "finterval": 2.5, **lengths})
    once, twice = tmp_path / "once.ome.tif", tmp_path / "twice.ome.tif"
    for given, out in ((source, once), (once, twice)):
        result = run("crop-pad", given, "-o", out, "--shape", "4,4", "--json")
        assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
        with tifffile.TiffFile(out) as tif:
            assert tif.is_ome and tif.series[0].axes == "ZYX"
            pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
        assert (pixels["TimeIncrement"], pixels["TimeIncrementUnit"], pixels["SizeT"]) == (2.5, "s", 1)
        assert pixels.get("PhysicalSizeZ") == (1.5 if calibrated else None)
