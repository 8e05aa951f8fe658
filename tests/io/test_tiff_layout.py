"""A TIFF output records an image's layout: space-to-depth blocks of an H×W×C image, and an
H×W×1 grey image, read back as HWC, whether written from RAM or through a memory map; a tensor
given --layout NHWC, NCHW or CHW reads back in that layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FileFactory, run

from geomcli import io
from geomcli.engine import slabs
from geomcli.io import _mapped

# (shape, dtype) of PNG inputs: RGB, RGBA, grey, 16-bit grey, 1-bit
IMAGES = [((12, 18, 3), np.uint8), ((12, 18, 4), np.uint8), ((12, 18), np.uint8), ((12, 18), np.uint16),
          ((12, 18), np.bool_)]


@pytest.fixture(params=["ram", "mapped"])
def maps(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Outputs written from RAM, or every output that can be memory-mapped so; the maps made."""
    made: list[str] = []
    if request.param == "mapped":
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
        monkeypatch.setattr(slabs, "SLAB_BYTES", 64)
        original = _mapped._map_tiff

        def spy(tmp: str, *args: Any) -> np.memmap:
            made.append(tmp)
            return original(tmp, *args)

        monkeypatch.setattr(_mapped, "_map_tiff", spy)
    made.append(request.param)
    return made


def _tags(path: Path) -> dict[str, Any]:
    """A TIFF's pages' tags, but where the data lies (a map aligns it to a page of memory)."""
    import tifffile

    with tifffile.TiffFile(path) as tif:
        return {f"{i}:{tag.name}": tag.value for i in range(len(tif.pages)) for tag in tif.pages[i].aspage().tags
                if tag.name != "StripOffsets"}


@pytest.mark.parametrize(("shape", "dtype"), IMAGES)
@pytest.mark.parametrize("blocksize", [2, 3])
def test_space_to_depth_through_a_tiff_and_back_needs_no_layout(
        shape: tuple[int, ...], dtype: Any, blocksize: int, maps: list[str], png_file: FileFactory,
        tmp_path: Path) -> None:
    source, _ = png_file(shape, dtype)
    original = io.read_array(source).data
    blocks, back = tmp_path / "b.tiff", tmp_path / "back.png"
    result = run("space-to-depth", source, "--blocksize", blocksize, "-o", blocks, "-q")
    assert result.exit_code == 0, result.output
    channels = (shape[2] if len(shape) == 3 else 1) * blocksize**2
    loaded = io.read_array(str(blocks))
    assert loaded.layout == "HWC" and loaded.data.shape == (12 // blocksize, 18 // blocksize, channels)
    if maps[-1] == "mapped" and dtype != np.bool_:  # (a bool TIFF is never mapped: its samples are bits)
        assert len(maps) == 2
    result = run("depth-to-space", blocks, "--blocksize", blocksize, "-o", back, "-q")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    restored = io.read_array(str(back)).data
    assert restored.dtype == original.dtype and np.array_equal(restored, original)


@pytest.mark.parametrize(("shape", "dtype"), IMAGES[2:])
def test_a_grey_hwc_image_in_a_tiff_reads_back_as_hwc(shape: tuple[int, ...], dtype: Any, maps: list[str],
                                                     png_file: FileFactory, tmp_path: Path) -> None:
    source, _ = png_file(shape, dtype)
    blocks, grey = tmp_path / "b.tiff", tmp_path / "grey.tiff"
    assert run("space-to-depth", source, "--blocksize", "2", "-o", blocks, "-q").exit_code == 0
    # depth-to-space of an HWC image: H×W×1, as PNG stores it, but in a TIFF
    assert run("depth-to-space", blocks, "--blocksize", "2", "-o", grey, "-q").exit_code == 0
    loaded = io.read_array(str(grey))
    assert loaded.layout == "HWC" and loaded.data.shape == (*shape, 1)
    assert np.array_equal(loaded.data[..., 0], io.read_array(source).data)
    again = tmp_path / "again.tiff"
    assert run("space-to-depth", grey, "--blocksize", "2", "-o", again, "-q").exit_code == 0
    assert np.array_equal(io.read_array(str(again)).data, io.read_array(str(blocks)).data)


def test_info_names_the_layout_of_blocks_in_a_tiff(png_file: FileFactory, tmp_path: Path) -> None:
    source, _ = png_file((12, 18, 3))
    blocks = tmp_path / "b.tiff"
    assert run("space-to-depth", source, "--blocksize", "2", "-o", blocks, "-q").exit_code == 0
    result = run("info", blocks)
    assert result.exit_code == 0 and "6×9×12 uint8, layout HWC, 1 page(s)" in result.stdout


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((6, 4, 12), np.uint8), ((6, 4, 1), np.uint16), ((6, 4, 4), np.float32), ((6, 4, 3), np.uint8),
     ((6, 4, 2), np.uint8), ((6, 4, 5), np.int16)],
)
def test_a_mapped_hwc_tiff_is_laid_out_as_one_from_ram(shape: tuple[int, ...], dtype: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       rng: np.random.Generator) -> None:
    data = rng.integers(0, 100, shape).astype(dtype)
    ram, mapped = tmp_path / "ram.tiff", tmp_path / "mapped.tiff"
    io.write_array(data, str(ram), layout="HWC")
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    with io.open_output(str(mapped), shape, dtype, layout="HWC") as out:
        assert isinstance(out, np.memmap)
        out[...] = data
    assert _tags(mapped) == _tags(ram)
    for path in (ram, mapped):
        loaded = io.read_array(str(path))
        assert loaded.layout == "HWC" and np.array_equal(loaded.data, data)


def test_a_mapped_grey_and_alpha_crop_is_the_tiff_written_from_ram(png_file: FileFactory, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # 2 channels were a page a row through a map, one grey-and-alpha page from RAM
    source, _ = png_file((12, 18, 2))
    ram, mapped = tmp_path / "ram.tiff", tmp_path / "mapped.tiff"
    assert run("crop-pad", source, "--shape", "8,8", "-o", ram, "-q").exit_code == 0
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    assert run("crop-pad", source, "--shape", "8,8", "-o", mapped, "-q").exit_code == 0
    assert _tags(mapped) == _tags(ram)
    assert io.read_array(str(mapped)).layout == io.read_array(str(ram)).layout == "HWC"


def test_mapped_blocks_of_grey_are_the_tiff_written_from_ram(png_file: FileFactory, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # 4 channels of one grey channel were grey samples from RAM, but RGBA through a map
    source, _ = png_file((12, 18))
    ram, mapped = tmp_path / "ram.tiff", tmp_path / "mapped.tiff"
    assert run("space-to-depth", source, "--blocksize", "2", "-o", ram, "-q").exit_code == 0
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    assert run("space-to-depth", source, "--blocksize", "2", "-o", mapped, "-q").exit_code == 0
    assert _tags(mapped) == _tags(ram)


def test_blocks_in_a_tiff_stay_readable_by_other_tools(png_file: FileFactory, tmp_path: Path) -> None:
    import tifffile
    from PIL import Image

    source, _ = png_file((12, 18))
    blocks, grey = tmp_path / "b.tiff", tmp_path / "grey.tiff"
    assert run("space-to-depth", source, "--blocksize", "2", "-o", blocks, "-q").exit_code == 0
    assert run("depth-to-space", blocks, "--blocksize", "2", "-o", grey, "-q").exit_code == 0
    assert np.array_equal(tifffile.imread(blocks), io.read_array(str(blocks)).data)
    assert tifffile.imread(grey).shape == (12, 18, 1)
    with tifffile.TiffFile(blocks) as tiff:
        # 4 channels of one grey channel are grey samples, not RGBA (Pillow opens no such page)
        assert tiff.pages[0].photometric == tifffile.PHOTOMETRIC.MINISBLACK
    with Image.open(grey) as one:
        assert one.mode == "L"
        assert np.array_equal(np.asarray(one), io.read_array(source).data)


def test_a_bool_hwc_tiff_keeps_a_page_a_row(tmp_path: Path, rng: np.random.Generator) -> None:
    # tifffile writes 1-bit samples that read back otherwise: bool channels are not samples
    import tifffile

    data = rng.integers(0, 2, (6, 4, 4)).astype(bool)
    path = tmp_path / "b.tiff"
    io.write_array(data, str(path), layout="HWC")
    with tifffile.TiffFile(path) as tif:
        assert len(tif.pages) == 6 and tif.pages.first.samplesperpixel == 1
    loaded = io.read_array(str(path))
    assert loaded.layout == "HWC" and np.array_equal(loaded.data, data)


# (layout, shape) of .npy tensors given --layout
TENSORS = [("NHWC", (2, 12, 18, 3)), ("NHWC", (1, 12, 18, 1)), ("NCHW", (2, 3, 12, 18)), ("CHW", (2, 12, 18))]


@pytest.mark.parametrize(("layout", "shape"), TENSORS)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.bool_])
def test_a_tensor_through_a_tiff_and_back_needs_no_layout(
        layout: str, shape: tuple[int, ...], dtype: Any, maps: list[str], npy_file: FileFactory,
        tmp_path: Path) -> None:
    source, original = npy_file(shape, dtype)
    blocks, back = tmp_path / "b.tiff", tmp_path / "back.npy"
    result = run("space-to-depth", source, "--layout", layout, "--blocksize", 2, "-o", blocks, "-q")
    assert (result.exit_code, result.stderr) == (0, "")
    loaded = io.read_array(str(blocks))
    assert loaded.layout == layout
    result = run("depth-to-space", blocks, "--blocksize", 2, "-o", back, "-q")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    restored = np.load(back)
    assert restored.dtype == original.dtype and np.array_equal(restored, original)


def test_info_names_the_layout_of_a_tensor_in_a_tiff(npy_file: FileFactory, tmp_path: Path) -> None:
    source, _ = npy_file((2, 12, 18, 3), np.uint8)
    for layout in ("NHWC", "NCHW"):
        cropped = tmp_path / f"{layout}.tiff"
        assert run("crop-pad", source, "--layout", layout, "--shape", "2,2", "-o", cropped, "-q").exit_code == 0
        assert f"layout {layout}, " in run("info", cropped).stdout


def test_a_rank_4_tensor_of_no_given_layout_is_written_without_one(npy_file: FileFactory,
                                                                   tmp_path: Path) -> None:
    # rank 4 defaults to NCHW for space-to-depth, but crop-pad takes it as axes of no meaning:
    # the file records only a layout that was named
    source, _ = npy_file((2, 3, 12, 18), np.uint8)
    blocks = tmp_path / "b.tiff"
    assert run("space-to-depth", source, "--blocksize", 2, "-o", blocks, "-q").exit_code == 0
    assert io.read_array(str(blocks)).layout is None


@pytest.mark.parametrize(
    ("layout", "shape", "dtype"),
    [("NHWC", (2, 6, 4, 12), np.uint8), ("NHWC", (2, 6, 4, 3), np.uint16), ("NHWC", (2, 6, 4, 1), np.float32),
     ("NCHW", (2, 5, 6, 4), np.int16), ("CHW", (5, 6, 4), np.float64)],
)
def test_a_mapped_tensor_tiff_is_laid_out_as_one_from_ram(layout: str, shape: tuple[int, ...], dtype: Any,
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          rng: np.random.Generator) -> None:
    data = rng.integers(0, 100, shape).astype(dtype)
    ram, mapped = tmp_path / "ram.tiff", tmp_path / "mapped.tiff"
    io.write_array(data, str(ram), layout=layout)
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    with io.open_output(str(mapped), shape, dtype, layout=layout) as out:
        assert isinstance(out, np.memmap)
        out[...] = data
    assert _tags(mapped) == _tags(ram)
    for path in (ram, mapped):
        loaded = io.read_array(str(path))
        assert loaded.layout == layout and np.array_equal(loaded.data, data)


def test_axes_that_do_not_read_back_as_the_given_layout_are_replaced(tiff_file: FileFactory,
                                                                     tmp_path: Path) -> None:
    # a ZYX stack (its own layout, ZYX) named CHW by --layout: its blocks read back as CHW, and a
    # warning says so
    source, data = tiff_file((2, 12, 18), np.uint8, metadata={"axes": "ZYX"})
    assert io.read_array(source).layout == "ZYX"
    blocks = tmp_path / "b.tiff"
    result = run("space-to-depth", source, "--layout", "CHW", "--blocksize", 2, "-o", blocks)
    assert result.exit_code == 0
    assert f"Warning: {blocks}: the TIFF axes ZYX do not fit the result's layout CHW; written as CYX\n" in result.stderr
    assert io.read_array(str(blocks)).layout == "CHW"


def test_imagej_axes_that_read_back_as_the_layout_are_kept(tiff_file: FileFactory, tmp_path: Path) -> None:
    import tifffile

    source, _ = tiff_file((2, 3, 12, 18), np.uint8, imagej=True, metadata={"axes": "ZCYX"})
    blocks = tmp_path / "b.tiff"
    result = run("space-to-depth", source, "--blocksize", 2, "-o", blocks)
    assert result.exit_code == 0 and "Warning" not in result.stderr
    with tifffile.TiffFile(blocks) as tif:
        assert tif.is_imagej and tif.series[0].axes == "ZCYX"
    assert io.read_array(str(blocks)).layout == "NCHW"


@pytest.mark.parametrize(("photometric", "shape"), [("minisblack", (12, 18, 3)), ("minisblack", (12, 18, 4))])
def test_samples_that_are_no_rgb_are_not_written_as_rgb(photometric: str, shape: tuple[int, ...],
                                                        tmp_path: Path, rng: np.random.Generator) -> None:
    # 3 or 4 grey channels were written back as an RGB (or RGBA) picture of other colours
    import tifffile

    data = rng.integers(0, 256, shape, dtype=np.uint8)
    source, cropped = tmp_path / "in.tiff", tmp_path / "out.tiff"
    tifffile.imwrite(source, data, photometric=photometric, planarconfig="contig")
    result = run("crop-pad", source, "--shape", "6,8", "-o", cropped)
    assert result.exit_code == 0 and "Warning" not in result.stderr
    with tifffile.TiffFile(cropped) as tif:
        assert tif.pages.first.photometric == tifffile.PHOTOMETRIC.MINISBLACK
        assert np.array_equal(tif.asarray(), data[3:9, 5:13])


@pytest.mark.parametrize(("dtype", "planar"), [(np.uint8, "contig"), (np.uint16, "contig"), (np.uint8, "separate")])
def test_a_cmyk_tiff_is_written_back_as_cmyk(dtype: type, planar: str, tmp_path: Path,
                                            rng: np.random.Generator) -> None:
    """A CMYK TIFF's crop or resize was written as 1 grey sample and 3 extra ones (photometric
    MINISBLACK), under a warning that the photometric SEPARATED was dropped: a viewer showed the
    cyan ink as a grey picture (Pillow opened it as nothing it knows). It is CMYK again."""
    import tifffile
    from PIL import Image

    data = rng.integers(0, np.iinfo(dtype).max, (12, 18, 4), dtype=dtype)
    source = tmp_path / "in.tiff"
    stored = np.moveaxis(data, -1, 0) if planar == "separate" else data
    tifffile.imwrite(source, stored, photometric="separated", planarconfig=planar)
    for args in (["crop-pad", "--shape", "6,8"], ["resize", "--sizes", "6,9", "--mode", "linear", "--antialias"]):
        out = tmp_path / f"{args[0]}.tiff"
        result = run(args[0], source, "-o", out, *args[1:])
        assert result.exit_code == 0 and "Warning" not in result.stderr
        with tifffile.TiffFile(out) as tif:
            page = tif.pages.first
            assert page.photometric == tifffile.PHOTOMETRIC.SEPARATED and not page.extrasamples
            assert np.array_equal(tif.asarray(), np.moveaxis(io.read_array(str(out)).data, -1, 0)
                                  if planar == "separate" else io.read_array(str(out)).data)
    assert np.array_equal(io.read_array(str(tmp_path / "crop-pad.tiff")).data, data[3:9, 5:13])
    if dtype is np.uint8 and planar == "contig":
        with Image.open(tmp_path / "crop-pad.tiff") as im:
            assert im.mode == "CMYK" and np.array_equal(np.asarray(im), data[3:9, 5:13])


def test_cmyk_blocks_put_back_are_cmyk_and_an_npy_names_what_it_drops(tmp_path: Path,
                                                                       rng: np.random.Generator) -> None:
    """Space-to-depth then depth-to-space gives back the 4 inks, which were written as RGBA (its
    colour unknown after depth-to-space, the shape's RGBA won); an .npy's --json did not name the
    CMYK photometric among what it dropped once a TIFF output carried it."""
    import json

    import tifffile

    data = rng.integers(0, 256, (12, 18, 4), dtype=np.uint8)
    source, out = tmp_path / "in.tiff", tmp_path / "back.tiff"
    tifffile.imwrite(source, data, photometric="separated")
    result = run("chain", "-i", source, "-o", out, "--layout", "HWC", "space-to-depth", "--blocksize", 2,
                 "depth-to-space", "--blocksize", 2)
    assert result.exit_code == 0 and "Warning" not in result.stderr
    with tifffile.TiffFile(out) as tif:
        assert tif.pages.first.photometric == tifffile.PHOTOMETRIC.SEPARATED
        assert np.array_equal(tif.asarray(), data)
    result = run("crop-pad", source, "-o", tmp_path / "o.npy", "--shape", "6,8", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["dropped"] == ["TIFF's CMYK photometric (the 4 channels are C, M, Y and K inks)"]


def test_a_mapped_cmyk_crop_is_the_tiff_written_from_ram(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         rng: np.random.Generator) -> None:
    # a big output, written through a memory map, was grey samples under a warning that it was
    # written without metadata, where one from RAM is CMYK
    import tifffile

    source = tmp_path / "in.tiff"
    tifffile.imwrite(source, rng.integers(0, 256, (12, 18, 4), dtype=np.uint8), photometric="separated")
    ram, mapped = tmp_path / "ram.tiff", tmp_path / "mapped.tiff"
    assert run("crop-pad", source, "--shape", "8,8", "-o", ram, "-q").exit_code == 0
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    result = run("crop-pad", source, "--shape", "8,8", "-o", mapped)
    assert result.exit_code == 0 and "Warning" not in result.stderr
    assert _tags(mapped) == _tags(ram)
    with tifffile.TiffFile(mapped) as tif:
        assert tif.pages.first.photometric == tifffile.PHOTOMETRIC.SEPARATED
    assert np.array_equal(io.read_array(str(mapped)).data, io.read_array(str(ram)).data)


def test_cmyk_that_no_longer_fits_4_inks_says_so(tmp_path: Path, rng: np.random.Generator) -> None:
    """Space-to-depth makes 16 channels of CMYK's 4: no CMYK page holds them, and a warning says
    they are written as grey samples; CMYK with an alpha sample is not carried, as before."""
    import tifffile

    source = tmp_path / "in.tiff"
    tifffile.imwrite(source, rng.integers(0, 256, (12, 18, 4), dtype=np.uint8), photometric="separated")
    out = tmp_path / "blocks.tiff"
    result = run("space-to-depth", source, "-o", out, "--blocksize", 2, "--layout", "HWC")
    assert result.exit_code == 0
    assert (f"Warning: {out}: the TIFF's CMYK photometric cannot describe the result's shape (6, 9, 16) uint8; "
            "written as grey samples") in result.stderr
    with tifffile.TiffFile(out) as tif:
        assert tif.pages.first.photometric == tifffile.PHOTOMETRIC.MINISBLACK
    tifffile.imwrite(source, rng.integers(0, 256, (12, 18, 5), dtype=np.uint8), photometric="separated",
                     extrasamples=("unassalpha",))
    result = run("crop-pad", source, "-o", out, "--shape", "6,8")
    assert result.exit_code == 0
    assert (f"Warning: {out}: the TIFF photometric SEPARATED (written as grey samples to a TIFF) "
            "cannot be carried") in result.stderr


@pytest.mark.parametrize(("photometric", "shape", "warned"), [
    ("minisblack", (12, 18, 3), "RGB"), ("separated", (12, 18, 4), "RGBA"), ("rgb", (12, 18, 3), None)])
def test_samples_that_are_no_rgb_say_so_in_an_image_format(photometric: str, shape: tuple[int, ...],
                                                            warned: str | None, tmp_path: Path,
                                                            rng: np.random.Generator) -> None:
    """A TIFF output keeps them grey samples (above); a PNG can only hold them as RGB or RGBA, which
    was written without a word for grey samples, and for CMYK under a warning that said they were
    written as grey samples."""
    import tifffile

    source, out = tmp_path / "in.tiff", tmp_path / "out.png"
    tifffile.imwrite(source, rng.integers(0, 256, shape, dtype=np.uint8), photometric=photometric,
                     planarconfig="contig")
    for args in (["resize", source, "-o", out, "--sizes", "6,9"],
                 ["chain", "-i", source, "-o", out, "resize", "--sizes", "6,9", "crop-pad", "--shape", "4,4"]):
        result = run(*args)
        assert result.exit_code == 0
        said = f"Warning: {out}: its {shape[2]} channels are no colours (a TIFF's grey or CMYK samples), written as "
        assert (said in result.stderr) == (warned is not None)
        assert "written as grey samples) cannot" not in result.stderr
        if warned:
            assert f"written as {warned}: a viewer shows them as {warned}" in result.stderr


@pytest.mark.parametrize(("photometric", "shape", "space"), [("minisblack", (12, 18, 3), b"GRAY"),
                                                            ("separated", (12, 18, 4), b"CMYK")])
def test_a_grey_or_cmyk_profile_does_not_label_an_rgb_png(photometric: str, shape: tuple[int, ...], space: bytes,
                                                          tmp_path: Path, rng: np.random.Generator) -> None:
    """The TIFF's GRAY or CMYK ICC profile was written onto the RGB(A) PNG its samples became: libpng
    reads it as an invalid ICC colour space. It is dropped with a warning; a TIFF output keeps it."""
    import tifffile
    from PIL import Image, ImageCms

    icc = bytearray(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
    icc[16:20] = space
    source = tmp_path / "in.tiff"
    tifffile.imwrite(source, rng.integers(0, 256, shape, dtype=np.uint8), photometric=photometric,
                     planarconfig="contig", iccprofile=bytes(icc))
    result = run("resize", source, "-o", tmp_path / "o.png", "--sizes", "6,9")
    assert result.exit_code == 0
    assert f"its {space.decode().strip()} ICC profile does not describe RGB; dropped" in result.stderr
    with Image.open(tmp_path / "o.png") as im:
        assert "icc_profile" not in im.info
    assert run("resize", source, "-o", tmp_path / "o.tiff", "--sizes", "6,9", "-q").exit_code == 0
    with tifffile.TiffFile(tmp_path / "o.tiff") as tif:
        assert tif.pages.first.tags[34675].value == bytes(icc)
