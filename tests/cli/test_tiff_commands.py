"""The commands on TIFFs as their writers meant them (issue 19, item 4): ``info`` names the layout
the transforms use (pages of RGB as stored, a hyperstack by its axes); --dry-run and the plan see a
hyperstack's output from its header; planar and RGB pages stay so. The files' values are checked
in tests/io/test_tiff_stacks.py."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run


def _write(path: Path, shape: tuple[int, ...], dtype: Any, **options: Any) -> None:
    import tifffile

    with warnings.catch_warnings():  # tifffile's default for (3, H, W), planar RGB, is deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        tifffile.imwrite(path, np.zeros(shape, dtype), **options)


@pytest.mark.parametrize(
    ("shape", "options", "said"),
    [
        ((3, 10, 12), {}, "10×12×3 uint8, layout HWC, 1 page(s)"),
        ((2, 3, 10, 12), {"photometric": "rgb", "planarconfig": "separate"}, "2×3×10×12 uint8, layout NCHW, 2 page(s)"),
        ((2, 10, 12, 3), {"photometric": "rgb"}, "2×10×12×3 uint8, layout NHWC, 2 page(s)"),
        ((2, 3, 4, 8, 8), {"imagej": True, "metadata": {"axes": "TZCYX"}}, "2×3×4×8×8 uint8, layout TZCYX, 24 page(s)"),
        ((3, 8, 8), {"imagej": True, "metadata": {"axes": "ZYX"}}, "3×8×8 uint8, layout ZYX, 3 page(s)"),
        ((2, 3, 8, 8), {"ome": True, "metadata": {"axes": "TCYX"}}, "2×3×8×8 uint8, layout NCHW, 6 page(s)"),
        ((2, 3, 2, 8, 8), {"ome": True, "metadata": {"axes": "TCZYX"}}, "2×3×2×8×8 uint8, layout TCZYX, 12 page(s)"),
    ],
)
def test_info_names_the_layout_the_transforms_use(shape: tuple[int, ...], options: dict[str, Any], said: str,
                                                  tmp_path: Path) -> None:
    path = tmp_path / "in.tif"
    _write(path, shape, np.uint8, **options)
    result = run("info", path)
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.startswith(f"{path}: tiff {said}, range [0, 0], ")


def test_a_hyperstacks_blocks_are_planned_from_its_header(tmp_path: Path) -> None:
    source = tmp_path / "hyper.tif"
    _write(source, (2, 3, 4, 8, 8), np.uint16, imagej=True, metadata={"axes": "TZCYX"})
    dry = run("space-to-depth", source, "--blocksize", 2, "--out-dir", tmp_path / "out", "--dry-run")
    assert (dry.exit_code, dry.stdout) == (0, f"{source} → {tmp_path / 'out' / 'hyper.tif'}: 2×3×16×4×4 uint16\n")
    refused = run("space-to-depth", source, "--blocksize", 3, "--out-dir", tmp_path / "out")
    assert refused.exit_code == 2 and not (tmp_path / "out").exists()
    assert refused.stderr.startswith(f"Error: {source}: space_to_depth: height 8 is not divisible by blocksize 3 ")


def test_rgb_pages_and_a_planar_image_say_nothing_of_their_layout(tmp_path: Path) -> None:
    # no note that samples moved, no warning: the outputs are stored as the inputs were
    planar, pages = tmp_path / "planar.tif", tmp_path / "pages.tif"
    _write(planar, (3, 10, 12), np.uint8)
    _write(pages, (2, 3, 10, 12), np.uint8, photometric="rgb", planarconfig="separate")
    for source in (planar, pages):
        for command in (["crop-pad", "--shape", "6,6"], ["space-to-depth", "--blocksize", "2"]):
            result = run(command[0], source, *command[1:], "-o", tmp_path / "o.tif")
            assert result.exit_code == 0
            assert "note" not in result.stderr and "Warning" not in result.stderr, result.stderr


@pytest.mark.parametrize("chain", [False, True])
def test_a_grey_tiffs_blocks_are_grey_samples_and_come_back_as_they_were(chain: bool, tmp_path: Path) -> None:
    import tifffile

    grey = (np.arange(64) * 3).astype(np.uint8).reshape(8, 8)
    tifffile.imwrite(tmp_path / "in.tif", grey, photometric="minisblack")
    files = ["-i", tmp_path / "in.tif", "-o", tmp_path / "blocks.tif"]
    args = ["chain", "-q", *files, "space-to-depth"] if chain else ["space-to-depth", "-q", *files[1:]]
    assert run(*args, "--blocksize", "2").exit_code == 0
    with tifffile.TiffFile(tmp_path / "blocks.tif") as tiff:
        page = tiff.pages[0]
        # 4 channels of one grey channel: not RGB and an alpha
        assert page.shape == (4, 4, 4) and page.photometric == tifffile.PHOTOMETRIC.MINISBLACK
        assert page.extrasamples == (tifffile.EXTRASAMPLE.UNSPECIFIED,) * 3
    assert run("depth-to-space", tmp_path / "blocks.tif", "-o", tmp_path / "back.tif", "--blocksize", "2",
               "-q").exit_code == 0
    assert tifffile.imread(tmp_path / "back.tif").tobytes() == grey.tobytes()


def test_an_rgb_tiffs_blocks_and_back_in_a_chain_are_rgb_again(tmp_path: Path) -> None:
    import tifffile

    _write(tmp_path / "in.tif", (8, 8, 3), np.uint8, photometric="rgb")
    assert run("chain", "-q", "-i", tmp_path / "in.tif", "-o", tmp_path / "back.tif", "space-to-depth", "--blocksize",
               "2", "depth-to-space", "--blocksize", "2").exit_code == 0
    with tifffile.TiffFile(tmp_path / "back.tif") as tiff:
        assert tiff.pages[0].photometric == tifffile.PHOTOMETRIC.RGB


def test_a_compression_the_output_cannot_take_is_refused_when_planned(tmp_path: Path) -> None:
    from PIL import Image

    Image.fromarray(np.zeros((20, 20), np.uint16)).save(tmp_path / "gray16.png")
    Image.new("RGB", (20, 20)).save(tmp_path / "base.png")
    _write(tmp_path / "u16.tif", (20, 20), np.uint16)
    np.save(tmp_path / "float.npy", np.zeros((20, 20), np.float32))
    out = tmp_path / "out"
    inputs = [tmp_path / name for name in ("gray16.png", "base.png", "u16.tif", "float.npy")]
    common = [*inputs, "--out-dir", out, "--name", "{stem}.tif", "--shape", "10,10", "--compression", "jpeg"]
    dry, real = run("crop-pad", *common, "--dry-run"), run("crop-pad", *common)
    assert dry.exit_code == real.exit_code == 2 and not out.exists()  # nothing written, base.tif neither
    refused = [f"Error: {out / 'gray16.tif'}: TIFF compression jpeg holds uint8 grey or RGB, not uint16 shape (10, 10)",
               f"Error: {out / 'u16.tif'}: TIFF compression jpeg holds uint8 grey or RGB, not uint16 shape (10, 10)",
               f"Error: {out / 'float.tif'}: TIFF compression jpeg holds uint8 grey or RGB, not float32 shape (10, 10)"]
    assert [line for line in real.stderr.splitlines() if line.startswith("Error: /")] == refused
    assert [line for line in dry.stderr.splitlines() if line.startswith("Error: /")] == refused
    assert "3 of 4 inputs cannot take these options" in real.stderr and "1 to write, 3 failed" in dry.stderr
    one = run("crop-pad", inputs[0], "-o", tmp_path / "q16.tif", "--shape", "10,10", "--compression", "jpeg")
    assert (one.exit_code, one.stderr) == (2, refused[0].replace(str(out / "gray16.tif"), str(tmp_path / "q16.tif"))
                                           + "\n")
    assert not (tmp_path / "q16.tif").exists()
    wide = run("crop-pad", inputs[1], "-o", tmp_path / "wide.tif", "--shape", "10,70000", "--compression", "jpeg")
    assert wide.exit_code == 2 and not (tmp_path / "wide.tif").exists()
    assert wide.stderr == (f"Error: {tmp_path / 'wide.tif'}: TIFF compression jpeg holds rows of up to 65535 pixels, "
                           "not shape (10, 70000, 3)\n")
    fine = run("crop-pad", *inputs[:3], "--out-dir", out, "--name", "{stem}.tif", "--shape", "10,10",
               "--compression", "zlib")
    assert fine.exit_code == 0, fine.stderr


def test_info_of_a_stack_past_max_pixels_that_a_transform_takes_reads_its_header(tmp_path: Path) -> None:
    """A tiled TIFF or a .npy of more elements than --max-pixels, which the transforms read chunk
    by chunk: info refused it as a bomb ('2304 elements exceed the limit of 1000', exit 1) where
    a crop of it runs; it is described from its header now, its value range not read (that would
    read it all). A PNG past the limit is still refused: it is decoded whole."""
    import json

    from PIL import Image

    _write(tmp_path / "stack.tif", (4, 24, 24), np.uint16, tile=(16, 16), metadata={"axes": "CYX"})
    np.save(tmp_path / "stack.npy", np.zeros((4, 24, 24), np.uint16))
    Image.fromarray(np.zeros((48, 48), np.uint8)).save(tmp_path / "big.png")
    for name, line in [("stack.tif", "tiff 4×24×24 uint16, layout CHW, 1 page(s), "),
                       ("stack.npy", "npy 4×24×24 uint16, layout -, 1 page(s), ")]:
        result = run("info", tmp_path / name, "--max-pixels", 1000)
        assert (result.exit_code, result.stderr) == (0, ""), result.stderr
        assert result.stdout.startswith(f"{tmp_path / name}: {line}") and "range [" not in result.stdout
        assert "; value range not read: " in result.stdout  # as --json notes it
        record = json.loads(run("info", "--json", tmp_path / name, "--max-pixels", 1000).stdout)
        assert record["value_range"] is None and record["notes"][-1] == (
            "value range not read: 2304 elements, more than --max-pixels (a transform reads it chunk by chunk)")
    pytest.importorskip("zarr")
    pytest.importorskip("dask.array")
    assert run("crop-pad", tmp_path / "stack.tif", "-o", tmp_path / "out.zarr", "--shape", "8,8",
               "--max-pixels", 1000).exit_code == 0  # (what info now agrees with)
    refused = run("info", tmp_path / "big.png", "--max-pixels", 1000)
    assert refused.exit_code == 1 and "2304 elements exceed the limit of 1000" in refused.stderr


@pytest.mark.parametrize("dtype", [np.uint16, np.float32])
def test_info_of_a_big_tiled_tiff_takes_its_range_region_by_region(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   dtype: Any) -> None:
    """A TIFF the transforms read tile by tile: info decoded it whole for its value range (a 512
    MiB one peaked at 1.3 GB); past TILED_RANGE_BYTES it reads a region at a time now (125 MB),
    its line and record the same as the whole read's."""
    import json

    import tifffile

    from geomcli.engine import info, summary

    pytest.importorskip("zarr")
    data = np.random.default_rng(3).integers(0, 60000, (3, 40, 56)).astype(dtype)
    if data.dtype.kind == "f":
        data[1, 7, 9] = np.nan
    tifffile.imwrite(tmp_path / "stack.ome.tif", data, tile=(16, 16), ome=True, metadata={"axes": "CYX"})
    whole = [run("info", tmp_path / "stack.ome.tif", *more).stdout for more in ([], ["--json"])]
    ranged = summary.range_and_nan
    sizes: list[int] = []
    monkeypatch.setattr(summary, "range_and_nan", lambda block: sizes.append(block.size) or ranged(block))
    monkeypatch.setattr(info, "TILED_RANGE_BYTES", 1000)
    monkeypatch.setattr(info, "REGION_BYTES", 700 * data.itemsize)
    assert [run("info", tmp_path / "stack.ome.tif", *more).stdout for more in ([], ["--json"])] == whole
    # each of 3 channels in bands of 12 rows (672 elements) or fewer, twice
    assert sizes == [672, 672, 672, 224] * 6
    assert json.loads(whole[1])["value_range"] is not None


def test_info_shows_the_pixel_size_a_microscope_calibrated(tmp_path: Path) -> None:
    """A microscopist's first question of a file, its pixel size, was not shown at all: an
    OME-TIFF's physical sizes nowhere, an ImageJ TIFF's 0.25 µm pixels as '101600×101600 dpi',
    an OME-Zarr's as a bare scale without its units. A printer's DPI stays DPI."""
    import json

    import tifffile

    ome, imagej, printed = tmp_path / "in.ome.tif", tmp_path / "ij.tif", tmp_path / "printed.tif"
    tifffile.imwrite(ome, np.zeros((2, 8, 8), np.uint16), ome=True, metadata={
        "axes": "CYX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.25, "PhysicalSizeYUnit": "nm"})
    tifffile.imwrite(imagej, np.zeros((3, 8, 8), np.uint16), imagej=True, resolution=(4.0, 2.0),
                     metadata={"axes": "ZYX", "spacing": 1.5, "unit": "um"})
    tifffile.imwrite(printed, np.zeros((8, 8), np.uint8), resolution=(300.0, 300.0), resolutionunit="inch")
    assert run("crop-pad", ome, "-o", tmp_path / "out.zarr", "--shape", "4,4").exit_code == 0
    expected = {
        ome: ({"x": {"size": 0.5, "unit": "µm"}, "y": {"size": 0.25, "unit": "nm"}}, None, "x 0.5 µm, y 0.25 nm"),
        imagej: ({"x": {"size": 0.25, "unit": "µm"}, "y": {"size": 0.5, "unit": "µm"},
                  "z": {"size": 1.5, "unit": "µm"}}, None, "x 0.25 µm, y 0.5 µm, z 1.5 µm"),
        tmp_path / "out.zarr": ({"y": {"size": 0.25, "unit": "nm"}, "x": {"size": 0.5, "unit": "µm"}}, None,
                                "y 0.25 nm, x 0.5 µm"),
        printed: (None, [300.0, 300.0], None),
    }
    for path, (sizes, dpi, said) in expected.items():
        record = json.loads(run("info", "--json", path).stdout)
        assert (record["pixel_size"], record["dpi"]) == (sizes, dpi), path
        line = run("info", path).stdout
        assert (f", pixel size {said}" in line) if said else "pixel size" not in line, line


@pytest.mark.parametrize("spacing", [math.inf, math.nan, 0.0, -2.0])
def test_info_shows_no_z_size_for_an_imagej_spacing_that_is_no_length(tmp_path: Path, spacing: float) -> None:
    """An ImageJ description's spacing=inf was shown as a z size, '"z": {"size": "Infinity", ...}'
    in --json (a string where a number is promised) and 'z inf µm', where NaN, 0 and a negative
    spacing are left out, and OME-XML and the TIFF writer leave such a size out too."""
    import json

    import tifffile

    path = tmp_path / "ij.tif"
    tifffile.imwrite(path, np.zeros((3, 4, 5), np.uint8), imagej=True, resolution=(2.0, 2.0),
                     metadata={"axes": "ZYX", "spacing": spacing, "unit": "um"})
    record = json.loads(run("info", "--json", path).stdout)
    assert record["pixel_size"] == {"x": {"size": 0.5, "unit": "µm"}, "y": {"size": 0.5, "unit": "µm"}}
    assert ", pixel size x 0.5 µm, y 0.5 µm;" in run("info", path).stdout
    # (it went unsaid: a script saw no z and no reason)
    assert record["notes"][-1] == f"the ImageJ spacing {spacing:g} (no positive size) left out of the pixel size"


@pytest.mark.parametrize("size", [float("nan"), 0.0, -0.5])
def test_info_says_why_an_ome_physical_size_that_is_no_length_is_left_out(tmp_path: Path, size: float) -> None:
    """'info neg.ome.tif' of PhysicalSizeX -0.5 beside PhysicalSizeY 0.5 showed a pixel size along
    y alone and said nothing of x, where a transform's output names it dropped."""
    import json

    import tifffile

    path = tmp_path / "neg.ome.tif"
    tifffile.imwrite(path, np.zeros((3, 8, 8), np.uint16), ome=True,
                     metadata={"axes": "ZYX", "PhysicalSizeX": size, "PhysicalSizeY": 0.5, "PhysicalSizeZ": 2.0})
    said = f"the OME-XML PhysicalSizeX {size:g} (no positive size) left out of the pixel size"
    record = json.loads(run("info", "--json", path).stdout)
    assert record["pixel_size"] == {"y": {"size": 0.5, "unit": "µm"}, "z": {"size": 2.0, "unit": "µm"}}
    assert record["notes"] == ["axes ZYX from OME metadata: layout ZYX", said]
    assert run("info", path).stdout.rstrip("\n").endswith(f"; {said}")


@pytest.mark.parametrize("resolution", [((0, 1), (300, 1)), ((300, 1), (0, 1))])
def test_a_tiff_resolution_that_is_no_length_is_said_dropped(tmp_path: Path, resolution: tuple[Any, ...]) -> None:
    """A TIFF whose XResolution (or YResolution) is 0 lost its resolution in silence: 'crop-pad
    r0.tif -o o.tif --json' gave "warnings": [] and 'info r0.tif' no dpi and no word why, where an
    ImageJ spacing or an OME size of 0 is named. It is named in both."""
    import json

    import tifffile

    path, out = tmp_path / "r0.tif", tmp_path / "o.tif"
    tifffile.imwrite(path, np.zeros((8, 8, 3), np.uint8), photometric="rgb", resolution=resolution)
    x, y = (numerator / denominator for numerator, denominator in resolution)
    what = f"the TIFF resolution {x:g} x {y:g} (no positive size)"
    result = run("crop-pad", path, "-o", out, "--shape", "4,4", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == [f"{what} cannot be carried; dropped"]
    with tifffile.TiffFile(out) as tif:
        tags = tif.pages[0].tags  # (tifffile's "no resolution": 1 x 1, no unit)
        assert (tags[282].value, tags[283].value, tags[296].value) == ((1, 1), (1, 1), 1)
    record = json.loads(run("info", "--json", path).stdout)
    assert record["dpi"] is None and record["notes"] == [f"{what} left out of the pixel size"]


@pytest.mark.parametrize("spacing", [0.0, -2.0])
def test_an_imagej_spacing_that_is_no_length_is_not_written_back(tmp_path: Path, spacing: float) -> None:
    """'crop-pad ij.tif -o out.tif' of a ZYX stack whose description says spacing=-2 (or 0) wrote
    spacing=-2 back in silence, where info and an OME-TIFF output leave it out. It is left out,
    named: 'the ImageJ spacing -2 (no positive size) cannot be carried; dropped'."""
    import json

    import tifffile

    path, out = tmp_path / "ij.tif", tmp_path / "out.tif"
    tifffile.imwrite(path, np.zeros((3, 4, 5), np.uint8), imagej=True, resolution=(2.0, 2.0),
                     metadata={"axes": "ZYX", "spacing": spacing, "unit": "um"})
    result = run("crop-pad", path, "-o", out, "--shape", "4,4", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == [
        f"the ImageJ spacing {spacing:g} (no positive size) cannot be carried; dropped"]
    with tifffile.TiffFile(out) as tif:
        assert tif.is_imagej and "spacing" not in (tif.imagej_metadata or {})
        assert tif.imagej_metadata["unit"] == "micron"  # (the resolution's unit kept)


@pytest.mark.parametrize(("unit", "shown"), [("cm", "cm"), ("mm", "mm"), ("nm", "nm"), ("micron", "µm"),
                                             ("inch", "in")])
def test_info_shows_an_imagej_calibration_in_its_own_unit(tmp_path: Path, unit: str, shown: str) -> None:
    """ImageJ writes its calibration's unit in its description, and ResolutionUnit 3 beside 'cm', 2
    beside 'inch' (TiffEncoder): a stack calibrated in cm was shown as '50.8×50.8 dpi', its slice
    spacing not at all. Each unit's pixel size is shown in that unit, the spacing with it."""
    import json

    import tifffile

    path = tmp_path / "ij.tif"
    tifffile.imwrite(path, np.zeros((3, 8, 8), np.uint8), imagej=True, resolution=(20.0, 40.0),
                     resolutionunit={"cm": 3, "inch": 2}.get(unit, 1), metadata={"axes": "ZYX", "unit": unit,
                                                                                  "spacing": 0.5})
    record = json.loads(run("info", "--json", path).stdout)
    assert record["dpi"] is None
    assert record["pixel_size"] == {"x": {"size": 0.05, "unit": shown}, "y": {"size": 0.025, "unit": shown},
                                    "z": {"size": 0.5, "unit": shown}}
    assert f", pixel size x 0.05 {shown}, y 0.025 {shown}, z 0.5 {shown};" in run("info", path).stdout


@pytest.mark.parametrize(("resolution", "unit", "sizes"), [
    ((300.0, 300.0), 2, {"x": {"size": 1 / 300, "unit": "in"}, "y": {"size": 1 / 300, "unit": "in"}}),
    ((20.0, 40.0), 3, {"x": {"size": 0.05, "unit": "cm"}, "y": {"size": 0.025, "unit": "cm"}}),
    ((72.0, 72.0), 2, None)], ids=["inch", "cm", "72dpi"])
def test_info_of_an_imagej_tiff_whose_description_names_no_unit_is_imagej_s_and_keeps_its_dpi(
        tmp_path: Path, resolution: tuple[float, float], unit: int, sizes: dict[str, Any] | None) -> None:
    """An ImageJ TIFF whose description names no unit: ImageJ's TIFF reader takes its
    ResolutionUnit for the calibration (inch, cm), but 72 pixels per inch, which it leaves
    uncalibrated. info shows that pixel size, and --json keeps the TIFF's plain resolution as dpi,
    which 53e0f42 made null ('300x300 dpi' became a pixel size alone)."""
    import json

    import tifffile

    path = tmp_path / "ij.tif"
    tifffile.imwrite(path, np.zeros((3, 8, 8), np.uint8), imagej=True, resolution=resolution, resolutionunit=unit,
                     metadata={"axes": "ZYX"})
    with tifffile.TiffFile(path) as tif:
        assert "unit=" not in tif.pages[0].description
    record = json.loads(run("info", "--json", path).stdout)
    dpi = [value * (2.54 if unit == 3 else 1) for value in resolution]
    assert record["dpi"] == pytest.approx(dpi)
    assert record["pixel_size"] == sizes
    line = run("info", path).stdout
    assert f"{dpi[0]:g}×{dpi[1]:g} dpi" in line and ("pixel size" in line) == (sizes is not None), line


def _without_resolution_unit(path: Path) -> None:
    """Take every page's ResolutionUnit tag (296) out, as some writers leave it: its entry becomes
    an unassigned tag (298), so the IFD keeps its size and order."""
    import struct

    import tifffile

    data = bytearray(path.read_bytes())
    with tifffile.TiffFile(path) as tif:
        offsets = [page.tags[296].offset for page in tif.pages if 296 in page.tags]
    for offset in offsets:
        assert struct.unpack_from("<H", data, offset) == (296,)
        struct.pack_into("<H", data, offset, 298)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("unit", ["um", None])
def test_an_imagej_tiff_of_no_resolution_unit_tag_takes_its_description_s_unit_or_none(
        tmp_path: Path, unit: str | None) -> None:
    """An ImageJ stack of 0.25-unit pixels and a 0.5 slice spacing whose writer left ResolutionUnit
    out, its description naming no unit either: it read as TIFF's default, inch ('pixel size x 0.25
    in', 4 dpi), an OME-TIFF of it said PhysicalSizeXUnit="in", a zarr unit "inch", an ImageJ TIFF
    'unit=inch', where ImageJ reads no unit. It is now in no unit, as a ResolutionUnit of none is:
    no pixel size or dpi, the ImageJ TIFF's unit 'pixel', and the zarr names it dropped. The unit
    the description names is the unit, tag or none."""
    import json

    import tifffile

    path = tmp_path / "ij.tif"
    tifffile.imwrite(path, np.zeros((3, 8, 8), np.uint16), imagej=True, resolution=(4.0, 4.0),
                     metadata={"axes": "ZYX", "spacing": 0.5, **({"unit": unit} if unit else {})})
    _without_resolution_unit(path)
    with tifffile.TiffFile(path) as tif:
        assert 296 not in tif.pages[0].tags
    record = json.loads(run("info", "--json", path).stdout)
    sizes = {axis: {"size": size, "unit": "µm"} for axis, size in (("x", 0.25), ("y", 0.25), ("z", 0.5))}
    assert (record["pixel_size"], record["dpi"]) == ((sizes, None) if unit else (None, None))
    assert run("crop-pad", path, "-o", tmp_path / "o.ome.tif", "--shape", "4,4").exit_code == 0
    with tifffile.TiffFile(tmp_path / "o.ome.tif") as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
    physical = {key: value for key, value in pixels.items() if key.startswith("PhysicalSize")}
    assert physical == ({f"PhysicalSize{axis}{part}": value for axis, size in (("X", 0.25), ("Y", 0.25), ("Z", 0.5))
                         for part, value in (("", size), ("Unit", "µm"))} if unit else {})
    assert run("crop-pad", path, "-o", tmp_path / "o.tif", "--shape", "4,4").exit_code == 0
    with tifffile.TiffFile(tmp_path / "o.tif") as tif:
        assert tif.imagej_metadata["unit"] == ("micron" if unit else "pixel")
    result = run("crop-pad", path, "-o", tmp_path / "o.zarr", "--shape", "4,4", "--json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout.splitlines()[0])
    assert record.get("dropped") == (None if unit else ["resolution (4 x 4 pixels (no unit))", "ImageJ spacing 0.5"])
