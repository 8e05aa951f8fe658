"""TIFFs as their writers meant them (issue 19, item 4): a planar image is written planar again;
pages of RGB are a stack of images, cropped and blocked on their own Y and X, written back as
pages of the same photometric; an ImageJ or OME hyperstack's stack axes are flattened into N for
the kernels and restored, its axes metadata fitted to the result. The files are made the way
tifffile makes them; the oracle is the kernel on the array rearranged to NCHW by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run

import geomcli
from geomcli import io


def _series(path: Path) -> tuple[str, tuple[int, ...], str | None, str, int]:
    """What tifffile says of a file: its series' axes, shape and kind, the photometric, the pages."""
    import tifffile

    with tifffile.TiffFile(path) as tif:
        series = tif.series[0]
        return (series.axes, tuple(series.shape), series.kind, tif.pages.first.photometric.name, len(tif.pages))


def _blocks(data: np.ndarray, axes: str, blocksize: int, mode: str) -> np.ndarray:
    """space_to_depth on a TIFF's array of these axes: the stack axes (all but C, Y, X) flattened
    into N, a C of 1 where there is none, the result's axes in the file's order (C before Y)."""
    if "C" not in axes:
        data, axes = data[..., None, :, :], axes[:-2] + "CYX"
    stacks = [i for i, axis in enumerate(axes) if axis not in "CYX"]
    order = stacks + [axes.index(axis) for axis in "CYX"]
    moved = data.transpose(order)
    result = geomcli.space_to_depth(moved.reshape(-1, *moved.shape[-3:]), blocksize, mode)
    return result.reshape(*moved.shape[:-3], *result.shape[1:]).transpose(np.argsort(order))


def _default_imwrite(path: Path, data: np.ndarray) -> None:
    """tifffile's default for a (3, H, W) array: planar RGB (deprecated, so it warns; the files
    are out there all the same)."""
    import warnings

    import tifffile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        tifffile.imwrite(path, data)


def test_a_planar_image_is_written_planar(tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    data = rng.integers(0, 256, (3, 10, 12), dtype=np.uint8)
    source = tmp_path / "planar.tif"
    _default_imwrite(source, data)
    assert _series(source) == ("SYX", (3, 10, 12), "shaped", "RGB", 1)
    cropped = tmp_path / "p7.tif"
    result = run("crop-pad", source, "-o", cropped, "--shape", "7,7")
    assert result.exit_code == 0 and "note" not in result.stderr and "Warning" not in result.stderr
    assert _series(cropped)[:2] == ("SYX", (3, 7, 7)) and _series(cropped)[3:] == ("RGB", 1)
    assert np.array_equal(tifffile.imread(cropped), geomcli.center_crop_pad(data, [3, 7, 7]))
    blocks, back = tmp_path / "b.tif", tmp_path / "back.tif"
    assert run("space-to-depth", source, "--blocksize", 2, "-o", blocks, "-q").exit_code == 0
    assert _series(blocks)[:2] == ("SYX", (12, 5, 6))
    assert np.array_equal(tifffile.imread(blocks), geomcli.space_to_depth(data[None], 2)[0])
    assert run("depth-to-space", blocks, "--blocksize", 2, "-o", back, "-q").exit_code == 0
    assert _series(back) == _series(source) and np.array_equal(tifffile.imread(back), data)


def test_a_planar_image_to_png_is_hwc(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.integers(0, 256, (3, 10, 12), dtype=np.uint8)
    _default_imwrite(tmp_path / "planar.tif", data)
    assert run("crop-pad", tmp_path / "planar.tif", "-o", tmp_path / "o.png", "--shape", "6,6", "-q").exit_code == 0
    assert np.array_equal(io.read_array(str(tmp_path / "o.png")).data, np.moveaxis(data, 0, -1)[2:8, 3:9])


# pages of RGB as tifffile writes them: (stored shape, planarconfig, the layout geomcli reads them in)
PAGES = [((2, 3, 10, 12), "separate", "NCHW"), ((2, 10, 12, 3), "contig", "NHWC")]


@pytest.mark.parametrize(("shape", "planarconfig", "layout"), PAGES)
def test_pages_of_rgb_are_a_stack_of_images(shape: tuple[int, ...], planarconfig: str, layout: str,
                                            tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    data = rng.integers(0, 256, shape, dtype=np.uint8)
    source = tmp_path / "pages.tif"
    tifffile.imwrite(source, data, photometric="rgb", planarconfig=planarconfig)
    loaded = io.read_array(str(source))
    assert loaded.layout == layout and loaded.shape == shape
    axes = _series(source)[0]
    spatial = [axes.index("Y"), axes.index("X")]
    for extra in ([], ["--axes", ",".join(map(str, spatial))]):
        cropped = tmp_path / "c.tif"
        assert run("crop-pad", source, "--shape", "6,6", "-o", cropped, "-q", *extra).exit_code == 0
        assert _series(cropped)[0] == axes and _series(cropped)[3:] == ("RGB", 2)
        assert np.array_equal(tifffile.imread(cropped), geomcli.center_crop_pad(data, [6, 6], spatial))


@pytest.mark.parametrize(("shape", "planarconfig", "layout"), PAGES)
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_pages_of_rgb_through_space_to_depth_and_back(shape: tuple[int, ...], planarconfig: str, layout: str,
                                                      mode: str, tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    data = rng.integers(0, 256, shape, dtype=np.uint8)
    source, blocks, back = tmp_path / "pages.tif", tmp_path / "b.tif", tmp_path / "back.tif"
    tifffile.imwrite(source, data, photometric="rgb", planarconfig=planarconfig)
    assert run("space-to-depth", source, "--blocksize", 2, "--mode", mode, "-o", blocks, "-q").exit_code == 0
    # the oracle: the kernel on the pages as NCHW (planar pages are NCHW as stored)
    nchw = data if layout == "NCHW" else data.transpose(0, 3, 1, 2)
    expected = geomcli.space_to_depth(nchw, 2, mode)
    expected = expected if layout == "NCHW" else expected.transpose(0, 2, 3, 1)
    axes = _series(source)[0]
    assert _series(blocks) == (axes, expected.shape, "shaped", "MINISBLACK", 2)
    assert np.array_equal(tifffile.imread(blocks), expected)
    assert run("depth-to-space", blocks, "--blocksize", 2, "--mode", mode, "-o", back, "-q").exit_code == 0
    assert _series(back) == (axes, shape, "shaped", "RGB", 2) and np.array_equal(tifffile.imread(back), data)


# hyperstacks as ImageJ and OME-TIFF writers make them: (kind, axes, shape)
HYPERSTACKS = [
    ("imagej", "TZCYX", (2, 3, 4, 8, 8)),
    ("imagej", "ZCYX", (3, 2, 8, 8)),
    ("imagej", "TCYX", (2, 3, 8, 8)),
    ("imagej", "ZYX", (3, 8, 8)),
    ("ome", "TCYX", (2, 3, 8, 8)),
    ("ome", "TCZYX", (2, 3, 2, 8, 8)),
]


def _write_hyperstack(path: Path, kind: str, axes: str, shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    import tifffile

    data = rng.integers(0, 60000, shape, dtype=np.uint16)
    tifffile.imwrite(path, data, metadata={"axes": axes}, **{kind: True})
    assert _series(path)[:3] == (axes, shape, kind)
    return data


@pytest.mark.parametrize(("kind", "axes", "shape"), HYPERSTACKS)
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_a_hyperstack_through_space_to_depth_and_back(kind: str, axes: str, shape: tuple[int, ...], mode: str,
                                                      tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    source, blocks, back = tmp_path / "in.tif", tmp_path / "b.tif", tmp_path / "back.tif"
    data = _write_hyperstack(source, kind, axes, shape, rng)
    result = run("space-to-depth", source, "--blocksize", 2, "--mode", mode, "-o", blocks)
    assert result.exit_code == 0 and "Warning" not in result.stderr, result.stderr
    expected = _blocks(data, axes, 2, mode)
    grown = axes if "C" in axes else axes[:-2] + "CYX"  # a ZYX stack gains channels: ZCYX
    assert _series(blocks)[:3] == (grown, expected.shape, kind)
    assert np.array_equal(tifffile.imread(blocks), expected)
    with tifffile.TiffFile(blocks) as tif:
        if kind == "imagej":
            sizes = dict(zip(grown, expected.shape))
            described = tif.imagej_metadata
            assert described is not None
            assert (described.get("channels", 1), described.get("slices", 1), described.get("frames", 1)) == (
                sizes["C"], sizes.get("Z", 1), sizes.get("T", 1))
        else:
            assert f'SizeC="{expected.shape[grown.index("C")]}"' in str(tif.ome_metadata)
    result = run("depth-to-space", blocks, "--blocksize", 2, "--mode", mode, "-o", back)
    assert result.exit_code == 0 and "Warning" not in result.stderr, result.stderr
    assert _series(back)[2] == kind and np.array_equal(tifffile.imread(back), data)


@pytest.mark.parametrize(("kind", "axes", "shape"), HYPERSTACKS)
def test_a_hyperstack_is_cropped_on_its_y_and_x(kind: str, axes: str, shape: tuple[int, ...], tmp_path: Path,
                                                rng: np.random.Generator) -> None:
    import tifffile

    source, cropped = tmp_path / "in.tif", tmp_path / "c.tif"
    data = _write_hyperstack(source, kind, axes, shape, rng)
    result = run("crop-pad", source, "--shape", "5,10", "-o", cropped)
    assert result.exit_code == 0 and "Warning" not in result.stderr, result.stderr
    expected = geomcli.center_crop_pad(data, [5, 10], [len(axes) - 2, len(axes) - 1])
    assert _series(cropped)[:3] == (axes, expected.shape, kind)
    assert np.array_equal(tifffile.imread(cropped), expected)


@pytest.mark.parametrize(("scales", "expected"), [
    ("0.5,3,1,1", {"spacing": 1.0, "finterval": 1.0, "fps": 1.0}),  # 3 times the slices, half the frames
    ("1,1,0.5,0.5", {"spacing": 3.0, "finterval": 0.5, "fps": 2.0}),  # Y and X alone
])
def test_an_imagej_hyperstacks_slice_spacing_and_frame_interval_follow_a_resize(
        tmp_path: Path, scales: str, expected: dict[str, float]) -> None:
    # they were kept as they were, where an OME-TIFF's PhysicalSizeZ follows the slices
    import tifffile

    source, resized = tmp_path / "in.tif", tmp_path / "r.tif"
    tifffile.imwrite(source, np.zeros((4, 3, 8, 8), np.uint16), imagej=True,
                     metadata={"axes": "TZYX", "spacing": 3.0, "finterval": 0.5, "fps": 2.0})
    assert run("resize", source, "--scales", scales, "-o", resized, "-q").exit_code == 0
    with tifffile.TiffFile(resized) as tif:
        assert {key: tif.imagej_metadata[key] for key in expected} == expected


def test_the_slice_spacing_of_a_zcyx_hyperstack_read_as_nchw_follows_a_resize_of_n(tmp_path: Path) -> None:
    # its Z reads as N ("Z as N"), which no size was looked up for
    import tifffile

    source, resized = tmp_path / "in.tif", tmp_path / "r.tif"
    tifffile.imwrite(source, np.zeros((4, 2, 8, 8), np.uint16), imagej=True, metadata={"axes": "ZCYX", "spacing": 2.0})
    assert run("resize", source, "--scales", "2,1,1,1", "-o", resized, "-q").exit_code == 0
    with tifffile.TiffFile(resized) as tif:
        assert tif.imagej_metadata["spacing"] == 1.0


def test_the_layout_a_hyperstack_reads_in_is_its_axes(tmp_path: Path, rng: np.random.Generator) -> None:
    _write_hyperstack(tmp_path / "hyper.tif", "imagej", "TZCYX", (2, 3, 4, 8, 8), rng)
    loaded = io.read_array(str(tmp_path / "hyper.tif"))
    assert loaded.layout == io.read_header(str(tmp_path / "hyper.tif")).layout == "TZCYX"
    assert loaded.notes == ("axes TZCYX from ImageJ metadata: layout TZCYX",)


@pytest.mark.parametrize(("kind", "axes", "shape"), [HYPERSTACKS[0], HYPERSTACKS[-1]])
def test_a_big_hyperstack_through_a_memory_map(kind: str, axes: str, shape: tuple[int, ...], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator) -> None:
    # TZCYX's blocks go into a mapped output (its NCHW view is a view); TCZYX's are made in RAM
    import tifffile

    from geomcli.engine import slabs
    from geomcli.io import _mapped

    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    monkeypatch.setattr(slabs, "SLAB_BYTES", 64)
    maps: list[str] = []
    map_tiff = _mapped._map_tiff
    monkeypatch.setattr(_mapped, "_map_tiff", lambda tmp, *args: maps.append(tmp) or map_tiff(tmp, *args))
    source, blocks = tmp_path / "in.tif", tmp_path / "b.tif"
    data = _write_hyperstack(source, kind, axes, shape, rng)
    result = run("space-to-depth", source, "--blocksize", 2, "-o", blocks)
    assert result.exit_code == 0, result.stderr
    assert bool(maps) == (axes == "TZCYX")
    # (an ImageJ hyperstack's axes are the map's: no warning; an OME one's, from RAM, are kept too)
    assert "Warning" not in result.stderr
    assert _series(blocks)[:2] == (axes, _blocks(data, axes, 2, "DCR").shape)
    assert np.array_equal(tifffile.imread(blocks), _blocks(data, axes, 2, "DCR"))


def test_a_pyramid_s_first_level_alone_is_read_and_a_note_says_so(tmp_path: Path, rng: np.random.Generator) -> None:
    """An OME-TIFF pyramid (SubIFDs of half and a quarter the size): the full-resolution level is
    read, and its other levels are not made again: said in a note (info and a run, read whole or
    tile by tile into a zarr, said nothing)."""
    import tifffile

    data = rng.integers(0, 4000, (2, 32, 24), dtype=np.uint16)
    with tifffile.TiffWriter(tmp_path / "pyramid.ome.tif", ome=True) as tif:
        tif.write(data, subifds=2, tile=(16, 16), metadata={"axes": "CYX"})
        for step in (2, 4):
            tif.write(data[:, ::step, ::step], tile=(16, 16), subfiletype=1)
    loaded = io.read_array(str(tmp_path / "pyramid.ome.tif"))
    assert np.array_equal(loaded.data, data)
    assert loaded.notes[0] == "a pyramid of 3 levels: the first (full resolution) alone is read"
    result = run("crop-pad", tmp_path / "pyramid.ome.tif", "-o", tmp_path / "out.tif", "--shape", "8,8")
    assert result.exit_code == 0, result.stderr
    assert "note: a pyramid of 3 levels: the first (full resolution) alone is read" in result.stderr
    # info's line says it as its --json notes it (it said nothing of the levels)
    assert (f"{(tmp_path / 'pyramid.ome.tif').stat().st_size} bytes; a pyramid of 3 levels: the first (full "
            "resolution) alone is read; ") in run("info", tmp_path / "pyramid.ome.tif").stdout
    pytest.importorskip("zarr")
    pytest.importorskip("dask.array")
    # tile by tile into a zarr
    chunked = run("crop-pad", tmp_path / "pyramid.ome.tif", "-o", tmp_path / "out.zarr", "--shape", "8,8")
    assert chunked.exit_code == 0, chunked.stderr
    assert "note: a pyramid of 3 levels: the first (full resolution) alone is read" in chunked.stderr
    tifffile.imwrite(tmp_path / "flat.ome.tif", data, ome=True, metadata={"axes": "CYX"})
    assert not any("pyramid" in note for note in io.read_array(str(tmp_path / "flat.ome.tif")).notes)


def _palette_pages(path: Path, how: str, indices: np.ndarray, colormaps: list[np.ndarray]) -> None:
    """A palette TIFF of two pages, each of its own ColorMap: two series, two pages of one generic
    series, or one shaped series whose second page's map is patched in (tifffile reads it as a
    TiffFrame, of the first page's tags)."""
    import tifffile

    if how == "frames":
        tifffile.imwrite(path, indices, photometric="palette", colormap=colormaps[0])
        with tifffile.TiffFile(path) as tif:
            tif.pages.useframes = False
            at = tif.pages[1].tags[320].valueoffset
        with open(path, "r+b") as file:
            file.seek(at)
            file.write(colormaps[1].astype("<u2").tobytes())
        return
    with tifffile.TiffWriter(path) as tif:
        for page, colormap in zip(indices, colormaps):
            tif.write(page, photometric="palette", colormap=colormap, metadata=None if how == "pages" else {},
                      contiguous=how != "pages")


@pytest.mark.parametrize("how", ["series", "pages", "frames"])
def test_each_palette_page_is_coloured_with_its_own_map(how: str, tmp_path: Path, rng: np.random.Generator) -> None:
    # every page was coloured with the first page's map, silently, and --keep-palette kept it for
    # all where the second page was a TiffFrame
    import tifffile

    indices = rng.integers(0, 4, (2, 6, 8), dtype=np.uint8)
    colours = rng.integers(0, 256, (2, 3, 4), dtype=np.uint16)
    colormaps = [np.zeros((3, 256), np.uint16) for _ in range(2)]
    for colormap, own in zip(colormaps, colours):
        colormap[:, :4] = own * 257
    source = tmp_path / "two.tif"
    _palette_pages(source, how, indices, colormaps)
    with tifffile.TiffFile(source) as tif:
        assert len(tif.series) == (2 if how == "series" else 1)
    expected = np.stack([np.moveaxis(own[:, page], 0, -1) for own, page in zip(colours, indices)]).astype(np.uint8)
    loaded = io.read_array(str(source))
    assert np.array_equal(loaded.data, expected) and io.read_header(str(source)).shape == expected.shape
    result = run("crop-pad", source, "-o", tmp_path / "c.npy", "--shape", "4,6", "--axes", "1,2", "-q")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(np.load(tmp_path / "c.npy"), expected[:, 1:5, 1:7])
    refused = run("crop-pad", source, "-o", tmp_path / "k.tif", "--shape", "4,6", "--axes", "1,2", "--keep-palette")
    assert refused.exit_code == 1 and not (tmp_path / "k.tif").exists()
    assert refused.stderr == (f"Error: {source}: its pages have palettes of their own, which one stack of indices "
                              "cannot keep (--keep-palette): pick a page with --page N, or read the colours "
                              "without --keep-palette\n")


@pytest.mark.parametrize("how", ["series", "pages", "frames"])
@pytest.mark.parametrize(("tag", "said"), [
    ("icc", "the ICC profiles of the TIFF's pages (they differ; an output holds one for all)"),
    ("resolution", "the resolutions of the TIFF's pages (they differ; an output holds one for all)"),
    ("orientation", "the TIFF orientation 6 of page 1 (rotated 90 degrees clockwise to be upright)"),
    ("xmp", "the XMP packets of the TIFF's pages (they differ; an output holds one for all)"),
])
def test_pages_of_their_own_icc_resolution_orientation_or_xmp_are_not_given_the_first_s(
        how: str, tag: str, said: str, tmp_path: Path, rng: np.random.Generator) -> None:
    # the first page's ICC profile and DPI were written for every page, and a later page's
    # orientation went unsaid: silently, as if the pages shared them. Pages of one series
    # ("frames": its second page's tag patched) were not even compared: tifffile gives them the first's
    import tifffile
    from PIL import ImageCms

    profiles = [ImageCms.ImageCmsProfile(ImageCms.createProfile(space)).tobytes() for space in ("sRGB", "LAB")]
    own = {"icc": [{"iccprofile": one} for one in profiles],
           "resolution": [{"resolution": (dpi, dpi), "resolutionunit": "inch"} for dpi in (300, 72)],
           "orientation": [{"extratags": [(274, 3, 1, value, False)]} for value in (1, 6)],
           "xmp": [{"extratags": [(700, 1, len(packet), packet, False)]} for packet in (b"<a/>", b"<b/>")]}[tag]
    data = rng.integers(0, 256, (2, 6, 8, 3), dtype=np.uint8)
    source, out = tmp_path / "two.tif", tmp_path / "out.tif"
    if how == "frames":
        tifffile.imwrite(source, data, photometric="rgb", **own[0])
        patched = {"icc": {34675: profiles[1]}, "resolution": {282: (72, 1), 283: (72, 1)}, "orientation": {274: 6},
                   "xmp": {700: b"<b/>"}}[tag]
        with tifffile.TiffFile(source, mode="r+b") as tif:
            tif.pages.useframes = False
            for code, value in patched.items():
                tif.pages[1].tags[code].overwrite(value)
    else:
        with tifffile.TiffWriter(source) as tif:
            for page, options in zip(data, own):
                tif.write(page, photometric="rgb", metadata=None if how == "pages" else {}, contiguous=False,
                          **options)
    with tifffile.TiffFile(source) as tif:
        assert len(tif.series) == (2 if how == "series" else 1)
    result = run("crop-pad", source, "-o", out, "--shape", "4,4", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == [f"{said} cannot be carried; dropped"]
    assert np.array_equal(tifffile.imread(out), data[:, 1:5, 2:6])
    shown = json.loads(run("info", out, "--json").stdout)
    assert (shown["icc"], shown["dpi"], shown["xmp"]) == (None, None, None)


@pytest.mark.parametrize(("how", "layout"), [("imagej", "ZYXS"), ("pages", "NHWC"), ("imagej-default", "CYXS"),
                                             ("imagej-zc", "ZCYXS")])
def test_a_palette_stack_of_its_own_axes_is_cropped_on_its_y_and_x(how: str, layout: str, tmp_path: Path,
                                                                     rng: np.random.Generator) -> None:
    # read as colours, an ImageJ stack of a LUT (ZYX) or a generic series of palette pages (IYX: NHWC,
    # as the same pages in RGB) had no layout: '--shape H,W' was refused ('names no layout'), exit 2.
    # So was tifffile's default ImageJ stack of a LUT, whose axes are CYX (channels=3 in its
    # description), and a ZCYX one: read as CHW (NCHW), RGB samples had no place in the layout
    import tifffile

    indices = rng.integers(0, 4, (2, 3, 6, 8) if how == "imagej-zc" else (3, 6, 8), dtype=np.uint8)
    colours = rng.integers(0, 256, (3, 4), dtype=np.uint16)
    colormap = np.zeros((3, 256), np.uint16)
    colormap[:, :4] = colours * 257
    source, out = tmp_path / "lut.tif", tmp_path / "out.tif"
    if how.startswith("imagej"):
        axes = {"imagej": {"axes": "ZYX"}, "imagej-default": None, "imagej-zc": {"axes": "ZCYX"}}[how]
        tifffile.imwrite(source, indices, imagej=True, colormap=colormap, metadata=axes)
        with tifffile.TiffFile(source) as tif:
            assert tif.series[0].axes == layout[:-1]
    else:
        with tifffile.TiffWriter(source) as tif:
            for page in indices:
                tif.write(page, photometric="palette", colormap=colormap, metadata=None, contiguous=False)
    expected = np.moveaxis(colours[:, indices], 0, -1).astype(np.uint8)
    assert io.read_header(str(source)).layout == io.read_array(str(source)).layout == layout
    result = run("crop-pad", source, "-o", out, "--shape", "4,6", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == []
    if how.startswith("imagej"):  # (no "C as N" of ZCYX: its C is a stack axis too)
        assert json.loads(result.stdout)["notes"][0] == f"axes {layout[:-1]} from ImageJ metadata: layout {layout}"
    assert np.array_equal(tifffile.imread(out), expected[..., 1:5, 1:7, :])


@pytest.mark.parametrize(("keep", "notes"), [
    ([], ["axes ZYX from ImageJ metadata: layout ZYXS", "palette expanded to RGB"]),
    (["--keep-palette"], ["axes ZYX from ImageJ metadata: layout ZYX"])])
def test_the_note_of_a_palette_stacks_axes_names_the_layout_read(keep: list[str], notes: list[str], tmp_path: Path,
                                                                  rng: np.random.Generator) -> None:
    # an ImageJ stack of a LUT, read as colours, said 'axes ZYX from ImageJ metadata: layout ZYX',
    # then 'palette expanded to RGB', where the layout read (and info's) is ZYXS
    import tifffile

    colormap = np.zeros((3, 256), np.uint16)
    colormap[:, :4] = rng.integers(0, 65536, (3, 4), dtype=np.uint16)
    source = tmp_path / "lut.tif"
    tifffile.imwrite(source, rng.integers(0, 4, (3, 6, 8), dtype=np.uint8), imagej=True, colormap=colormap,
                     metadata={"axes": "ZYX"})
    result = run("crop-pad", source, "-o", tmp_path / "out.tif", "--shape", "4,6", "--json", *keep)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["notes"] == notes
    assert io.read_array(str(source), palette=bool(keep)).notes == tuple(notes)
