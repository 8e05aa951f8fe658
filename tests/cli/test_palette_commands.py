"""--keep-palette: a palette image (a label mask) read as its indices and written back with its
palette and transparency; operations that mix values refused from the header, nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run
from PIL import Image

from geomcli.ops.center_crop_pad import center_crop_pad
from geomcli.ops.resize import resize

COLOURS = [0, 0, 0, 128, 0, 0, 0, 128, 0, 128, 128, 0, 0, 0, 128, 224, 224, 192]
ALPHA = bytes([0, 255, 128, 255, 255, 255])


@pytest.fixture
def mask(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, np.ndarray]:
    """A Pascal VOC style label mask: mode P, index = class, a tRNS with a clear and a half entry."""
    labels = rng.integers(0, 6, (12, 16), dtype=np.uint8)
    im = Image.fromarray(labels)
    im.putpalette(COLOURS)
    path = tmp_path / "voc.png"
    im.save(path, transparency=ALPHA)
    with Image.open(path) as saved:
        assert saved.mode == "P"
    return path, labels


def read_back(path: Path) -> tuple[np.ndarray, list[int], object]:
    with Image.open(path) as im:
        assert im.mode == "P"
        return np.asarray(im), (im.getpalette() or [])[:len(COLOURS)], im.info.get("transparency")


def run_warns_as_planned(common: list[Any], warnings: list[str]) -> None:
    """crop-pad with ``common`` (--json) runs, giving ``warnings``, and its dry run gives the same."""
    planned, result = run("crop-pad", *common, "--dry-run"), run("crop-pad", *common)
    assert result.exit_code == 0, result.stderr
    assert json.loads(planned.stdout.splitlines()[0])["warnings"] == json.loads(result.stdout.splitlines()[0])[
        "warnings"] == warnings


def test_nearest_resize_keeps_the_labels_palette_and_transparency(mask: tuple[Path, np.ndarray],
                                                                  tmp_path: Path) -> None:
    path, labels = mask
    result = run("resize", path, "-o", tmp_path / "v2.png", "--sizes", "24,40", "--keep-palette", "-q")
    assert result.exit_code == 0, result.stderr
    indices, palette, alpha = read_back(tmp_path / "v2.png")
    assert np.array_equal(indices, resize(labels, sizes=(24, 40), mode="nearest"))
    assert palette == COLOURS and alpha == ALPHA


def test_without_the_option_a_palette_image_is_read_as_rgba(mask: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = mask
    result = run("resize", path, "-o", tmp_path / "v2.png", "--sizes", "24,40", "-q")
    assert result.exit_code == 0, result.stderr
    with Image.open(tmp_path / "v2.png") as im:
        assert im.mode == "RGBA"


def test_crop_pad_pads_with_the_fill_index(mask: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, labels = mask
    result = run("crop-pad", path, "-o", tmp_path / "c.png", "--shape", "8,20", "--fill", "5", "--keep-palette", "-q")
    assert result.exit_code == 0, result.stderr
    indices, palette, alpha = read_back(tmp_path / "c.png")
    expected = np.full((8, 20), 5, np.uint8)
    expected[:, 2:18] = center_crop_pad(labels, (8, 16))
    assert np.array_equal(indices, expected)
    assert palette == COLOURS and alpha == ALPHA


def test_nearest_warp_takes_only_labels_there_were(mask: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, labels = mask
    result = run("warp", path, "-o", tmp_path / "w.png", "--rotate", "30", "--mode", "nearest", "--fill", "0",
                 "--keep-palette", "-q")
    assert result.exit_code == 0, result.stderr
    indices, palette, _ = read_back(tmp_path / "w.png")
    assert indices.shape == labels.shape and set(np.unique(indices)) <= set(np.unique(labels)) | {0}
    assert np.array_equal(indices[5:7, 7:9], labels[5:7, 7:9])  # the centre stays where it was
    assert palette == COLOURS


def test_space_to_depth_round_trip_in_a_chain(mask: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, labels = mask
    result = run("chain", "-i", path, "-o", tmp_path / "r.png", "--keep-palette", "-q", "space-to-depth",
                 "--blocksize", "2", "depth-to-space", "--blocksize", "2")
    assert result.exit_code == 0, result.stderr
    indices, palette, alpha = read_back(tmp_path / "r.png")
    assert np.array_equal(indices, labels) and palette == COLOURS and alpha == ALPHA


def test_a_chain_of_crop_and_nearest_resize(mask: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, labels = mask
    result = run("chain", "-i", path, "-o", tmp_path / "c.png", "--keep-palette", "-q", "crop-pad", "--shape",
                 "8,8", "resize", "--scales", "2,2")
    assert result.exit_code == 0, result.stderr
    indices, palette, _ = read_back(tmp_path / "c.png")
    assert np.array_equal(indices, np.repeat(np.repeat(center_crop_pad(labels, (8, 8)), 2, 0), 2, 1))
    assert palette == COLOURS


@pytest.mark.parametrize(("fmt", "alpha"), [("gif", 0), ("bmp", None)])
def test_gif_and_bmp_outputs_hold_the_palette(mask: tuple[Path, np.ndarray], tmp_path: Path, fmt: str,
                                              alpha: object) -> None:
    path, labels = mask
    out = tmp_path / f"c.{fmt}"
    result = run("crop-pad", path, "-o", out, "--shape", "12,16", "--keep-palette")
    assert result.exit_code == 0, result.stderr
    indices, palette, transparency = read_back(out)
    assert np.array_equal(indices, labels) and palette == COLOURS and transparency == alpha
    # GIF: one transparent entry, the first clear one; BMP: none
    said = ("GIF cannot hold the alpha of palette entries 2; dropped" if fmt == "gif"
            else "BMP cannot hold the palette's transparency; dropped")
    assert said in result.stderr
    planned = run("crop-pad", path, "--out-dir", tmp_path / "o", "--name", f"{{stem}}.{fmt}", "--shape", "12,16",
                  "--keep-palette", "--dry-run", "--json")
    assert json.loads(planned.stdout.splitlines()[0])["warnings"] == [said]  # as the run says it
    back = run("crop-pad", out, "-o", tmp_path / "again.npy", "--shape", "12,16", "--keep-palette", "-q")
    assert back.exit_code == 0, back.stderr
    assert np.array_equal(np.load(tmp_path / "again.npy"), labels)


def test_npy_gets_the_indices_and_names_the_palette_dropped(mask: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, labels = mask
    result = run("crop-pad", path, "-o", tmp_path / "m.npy", "--shape", "12,16", "--keep-palette", "--json")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(np.load(tmp_path / "m.npy"), labels)
    assert json.loads(result.stdout)["dropped"] == ["palette (6 colours)"]


@pytest.mark.parametrize("command", [
    ["resize", "--sizes", "24,32", "--mode", "linear"],
    ["warp", "--rotate", "30"],
])
def test_mixing_values_is_refused_with_nothing_written(mask: tuple[Path, np.ndarray], tmp_path: Path,
                                                       command: list[str]) -> None:
    path, _ = mask
    for where in (["-o", tmp_path / "out.png"], ["--out-dir", tmp_path / "out"]):
        result = run(*command[:1], path, *where, *command[1:], "--keep-palette")
        assert result.exit_code == 2
        assert f"{command[0]}: --mode linear mixes values, which palette indices (--keep-palette)" in result.stderr
        assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["voc.png"]


def test_a_chain_step_that_mixes_values_is_refused(mask: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = mask
    result = run("chain", "-i", path, "-o", tmp_path / "c.png", "--keep-palette", "crop-pad", "--shape", "8,8",
                 "resize", "--scales", "2,2", "--mode", "cubic")
    assert result.exit_code == 2
    assert "chain: resize's --mode cubic mixes values" in result.stderr
    assert not (tmp_path / "c.png").exists()


def test_the_dry_run_says_the_refusal_and_the_shape(mask: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = mask
    refused = run("resize", path, "--out-dir", tmp_path / "o", "--sizes", "24,32", "--mode", "linear",
                  "--keep-palette", "--dry-run")
    assert refused.exit_code == 2 and "--mode linear mixes values" in refused.stderr
    planned = run("resize", path, "--out-dir", tmp_path / "o", "--sizes", "24,32", "--keep-palette", "--dry-run",
                  "--json")
    assert planned.exit_code == 0, planned.stderr
    record = json.loads(planned.stdout.splitlines()[0])
    assert (record["output_shape"], record["output_dtype"]) == ([24, 32], "uint8")
    assert not (tmp_path / "o").exists()


def test_jobs_give_the_same_bytes(mask: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, labels = mask
    folder = tmp_path / "in"
    folder.mkdir()
    for index in range(4):
        im = Image.fromarray(np.roll(labels, index, axis=1))
        im.putpalette(COLOURS)
        im.save(folder / f"m{index}.png", transparency=ALPHA)
    for jobs in ("1", "2"):
        result = run("resize", folder, "--out-dir", tmp_path / f"j{jobs}", "-j", jobs, "--sizes", "24,32",
                     "--keep-palette", "-q")
        assert result.exit_code == 0, result.stderr
    for index in range(4):
        assert (tmp_path / "j1" / f"m{index}.png").read_bytes() == (tmp_path / "j2" / f"m{index}.png").read_bytes()
        assert read_back(tmp_path / "j2" / f"m{index}.png")[1] == COLOURS


def test_a_picture_without_a_palette_is_read_as_it_is(tmp_path: Path, rng: np.random.Generator) -> None:
    pixels = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "rgb.png")
    result = run("resize", tmp_path / "rgb.png", "-o", tmp_path / "o.npy", "--sizes", "6,8", "--mode", "linear",
                 "--keep-palette", "-q")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(np.load(tmp_path / "o.npy"), pixels)


def test_a_palette_tiff_is_read_as_indices_and_written_with_its_map(mask: tuple[Path, np.ndarray],
                                                                      tmp_path: Path) -> None:
    import tifffile

    path, labels = mask
    result = run("crop-pad", path, "-o", tmp_path / "m.tif", "--shape", "12,16", "--keep-palette")
    assert result.exit_code == 0, result.stderr
    assert "TIFF cannot hold the palette's transparency; dropped" in result.stderr
    with tifffile.TiffFile(tmp_path / "m.tif") as tif:
        page = tif.pages[0]
        assert page.photometric == tifffile.PHOTOMETRIC.PALETTE
        assert np.array_equal(page.asarray(), labels)
        assert (page.colormap[:, :6] // 257).T.reshape(-1).tolist() == COLOURS
    back = run("resize", tmp_path / "m.tif", "-o", tmp_path / "r.png", "--scales", "2,2", "--keep-palette", "-q")
    assert back.exit_code == 0, back.stderr
    indices, palette, _ = read_back(tmp_path / "r.png")
    assert np.array_equal(indices, np.repeat(np.repeat(labels, 2, 0), 2, 1)) and palette == COLOURS
    refused = run("resize", tmp_path / "m.tif", "-o", tmp_path / "l.png", "--scales", "2,2", "--mode", "linear",
                  "--keep-palette")
    assert refused.exit_code == 2 and "--mode linear mixes values" in refused.stderr
    assert not (tmp_path / "l.png").exists()
    expanded = run("crop-pad", tmp_path / "m.tif", "-o", tmp_path / "e.npy", "--shape", "12,16", "-q")
    assert expanded.exit_code == 0 and np.load(tmp_path / "e.npy").shape == (12, 16, 3)


def test_grid_sample_nearest_keeps_and_linear_is_refused(mask: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    from geomcli import affine_grid

    path, labels = mask
    np.save(tmp_path / "grid.npy", affine_grid(np.array([[[1, 0, 0], [0, 1, 0]]], np.float32), (1, 1, 12, 16)))
    kept = run("grid-sample", path, "--grid", tmp_path / "grid.npy", "-o", tmp_path / "g.png", "--mode", "nearest",
               "--keep-palette", "-q")
    assert kept.exit_code == 0, kept.stderr
    indices, palette, alpha = read_back(tmp_path / "g.png")
    assert np.array_equal(indices, labels) and palette == COLOURS and alpha == ALPHA
    refused = run("grid-sample", path, "--grid", tmp_path / "grid.npy", "-o", tmp_path / "l.png", "--keep-palette")
    assert refused.exit_code == 2 and "grid-sample: --mode linear mixes values" in refused.stderr
    assert not (tmp_path / "l.png").exists()


def test_strip_keeps_the_palette(mask: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, labels = mask
    result = run("crop-pad", path, "-o", tmp_path / "s.png", "--shape", "12,16", "--keep-palette", "--strip", "-q")
    assert result.exit_code == 0, result.stderr
    indices, palette, alpha = read_back(tmp_path / "s.png")
    assert np.array_equal(indices, labels) and palette == COLOURS and alpha == ALPHA


def test_a_result_of_several_channels_drops_the_palette_and_its_dry_run_says_so(mask: tuple[Path, np.ndarray],
                                                                                 tmp_path: Path) -> None:
    path, labels = mask
    said = "the palette (6 colours) is for one channel of indices, not a 6x8x4 result; dropped"
    result = run("space-to-depth", path, "-o", tmp_path / "s.png", "--blocksize", "2", "--keep-palette", "--json")
    assert result.exit_code == 0, result.stderr
    assert said in json.loads(result.stdout)["warnings"]
    with Image.open(tmp_path / "s.png") as im:
        assert im.mode == "RGBA" and np.array_equal(np.asarray(im)[..., 0], labels[::2, ::2])
    planned = run("space-to-depth", path, "--out-dir", tmp_path / "o", "--blocksize", "2", "--keep-palette",
                  "--dry-run", "--json")
    assert said in json.loads(planned.stdout.splitlines()[0])["warnings"]


@pytest.mark.parametrize("command", [
    ["resize", "--sizes", "24,32", "--mode", "linear"],
    ["warp", "--rotate", "30"],
    ["chain", "resize", "--scales", "2,2", "--mode", "cubic"],
])
def test_mixing_values_is_refused_from_the_header_before_the_pixels(mask: tuple[Path, np.ndarray], tmp_path: Path,
                                                                    command: list[str]) -> None:
    # pixel data cut short: read first, the file would fail (exit 1) before the refusal is seen
    path, _ = mask
    data = path.read_bytes()
    cut = tmp_path / "cut.png"
    cut.write_bytes(data[:data.index(b"IDAT") + 20])
    for where in (["-o", tmp_path / "out.png"], ["--out-dir", tmp_path / "out"]):
        if command[0] == "chain":
            result = run("chain", "-i", cut, *where, "--keep-palette", *command[1:])
        else:
            result = run(command[0], cut, *where, *command[1:], "--keep-palette")
        assert result.exit_code == 2, result.stderr
        assert "mixes values, which palette indices (--keep-palette)" in result.stderr
        assert "not a readable PNG" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.png", "voc.png"]


def test_16_bit_indices_to_png_drop_the_palette_saying_so_run_and_dry_run_alike(tmp_path: Path,
                                                                                  rng: np.random.Generator) -> None:
    import tifffile

    labels = rng.integers(0, 6, (12, 16)).astype(np.uint16)
    colormap = np.zeros((3, 1 << 16), np.uint16)
    colormap[:, :6] = np.array(COLOURS, np.uint16).reshape(-1, 3).T * 257
    tifffile.imwrite(tmp_path / "m16.tif", labels, photometric="palette", colormap=colormap)
    result = run("crop-pad", tmp_path / "m16.tif", "-o", tmp_path / "m.png", "--shape", "12,16", "--keep-palette",
                 "--json")
    assert result.exit_code == 0, result.stderr
    warnings = json.loads(result.stdout)["warnings"]
    assert len(warnings) == 1 and warnings[0].startswith("PNG cannot hold the palette (")
    assert warnings[0].endswith("colours) of uint16 indices (a palette image's are 8-bit); dropped")
    with Image.open(tmp_path / "m.png") as im:
        assert im.mode != "P" and np.array_equal(np.asarray(im), labels)  # the indices, 16-bit grey
    planned = run("crop-pad", tmp_path / "m16.tif", "--out-dir", tmp_path / "o", "--name", "{stem}.png", "--shape",
                  "12,16", "--keep-palette", "--dry-run", "--json")
    assert json.loads(planned.stdout.splitlines()[0])["warnings"] == warnings  # as the run says it


def test_a_tiff_map_is_its_colours_not_the_black_that_pads_it(tmp_path: Path) -> None:
    import tifffile

    # a ColorMap holds 256 entries: 2 colours, the rest black, of which labels 2 and 3 are used
    labels = np.tile(np.arange(4, dtype=np.uint8), (3, 2))
    colormap = np.zeros((3, 256), np.uint16)
    colormap[:, :2] = np.array([[255, 0, 0], [0, 255, 0]], np.uint16).T * 257
    tifffile.imwrite(tmp_path / "m.tif", labels, photometric="palette", colormap=colormap)
    result = run("crop-pad", tmp_path / "m.tif", "-o", tmp_path / "m.npy", "--shape", "3,8", "--keep-palette",
                 "--json")
    assert json.loads(result.stdout)["dropped"] == ["palette (2 colours)"]
    for fmt in ("png", "gif", "bmp"):  # the labels past the colours kept (a PNG of 2 entries is 1-bit)
        result = run("crop-pad", tmp_path / "m.tif", "-o", tmp_path / f"m.{fmt}", "--shape", "3,8", "--keep-palette",
                     "-q")
        assert result.exit_code == 0, result.stderr
        with Image.open(tmp_path / f"m.{fmt}") as im:
            assert im.mode == "P" and np.array_equal(np.asarray(im), labels)
            assert (im.getpalette() or [])[:12] == [255, 0, 0, 0, 255, 0] + [0] * 6
    result = run("crop-pad", tmp_path / "m.tif", "-o", tmp_path / "again.tif", "--shape", "3,8", "--keep-palette",
                 "-q")
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(tmp_path / "again.tif") as tif:
        assert np.array_equal(tif.pages[0].colormap, colormap) and np.array_equal(tif.pages[0].asarray(), labels)


def test_a_tiff_map_of_16_bit_colours_keeps_its_indices_and_a_tiff_its_colours(tmp_path: Path,
                                                                               rng: np.random.Generator) -> None:
    import tifffile

    labels = rng.integers(0, 4, (12, 16), dtype=np.uint8)
    colormap = np.zeros((3, 256), np.uint16)
    colormap[:, :4] = [[1000, 65535, 0, 300], [2, 40000, 65535, 7], [5, 0, 12345, 65535]]  # low bytes used
    tifffile.imwrite(tmp_path / "m.tif", labels, photometric="palette", colormap=colormap)
    kept = run("crop-pad", tmp_path / "m.tif", "-o", tmp_path / "k.tif", "--shape", "12,16", "--keep-palette",
               "--json")
    assert kept.exit_code == 0 and json.loads(kept.stdout)["warnings"] == []
    with tifffile.TiffFile(tmp_path / "k.tif") as tif:
        page = tif.pages[0]
        assert page.photometric == tifffile.PHOTOMETRIC.PALETTE
        assert np.array_equal(page.asarray(), labels) and np.array_equal(page.colormap, colormap)
    said = "PNG cannot hold the low bytes of the palette's 16-bit colours; dropped"
    image = run("crop-pad", tmp_path / "m.tif", "-o", tmp_path / "k.png", "--shape", "12,16", "--keep-palette",
                "--json")
    assert json.loads(image.stdout)["warnings"] == [said]
    with Image.open(tmp_path / "k.png") as im:  # the high bytes, as libtiff and Pillow show the map
        assert im.mode == "P" and np.array_equal(np.asarray(im), labels)
        assert (im.getpalette() or [])[:12] == (colormap[:, :4] >> 8).T.reshape(-1).tolist()
    planned = run("crop-pad", tmp_path / "m.tif", "--out-dir", tmp_path / "o", "--name", "{stem}.png", "--shape",
                  "12,16", "--keep-palette", "--dry-run", "--json")
    assert json.loads(planned.stdout.splitlines()[0])["warnings"] == [said]
    colours = run("crop-pad", tmp_path / "m.tif", "-o", tmp_path / "c.npy", "--shape", "12,16", "-q")
    assert colours.exit_code == 0  # without the option: 16-bit RGB, as before
    assert np.array_equal(np.load(tmp_path / "c.npy"), colormap[:, labels].transpose(1, 2, 0))


def _frames(labels: np.ndarray) -> list[Image.Image]:
    frames = []
    for index in range(3):
        frame = Image.fromarray(np.roll(labels, index, axis=1))
        frame.putpalette(COLOURS)
        frames.append(frame)
    return frames


def test_an_apng_s_frames_keep_their_indices_and_palette_in_tiff_pages(mask: tuple[Path, np.ndarray],
                                                                        tmp_path: Path) -> None:
    import tifffile

    _, labels = mask
    frames = _frames(labels)
    frames[0].save(tmp_path / "a.png", save_all=True, append_images=frames[1:])
    expected = np.stack([np.asarray(frame) for frame in frames])
    result = run("crop-pad", tmp_path / "a.png", "-o", tmp_path / "a.tif", "--shape", "12,16", "--frames", "all",
                 "--keep-palette", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == []
    with tifffile.TiffFile(tmp_path / "a.tif") as tif:
        assert all(page.photometric == tifffile.PHOTOMETRIC.PALETTE for page in tif.pages) and len(tif.pages) == 3
        assert np.array_equal(tif.asarray(), expected)
        assert (tif.pages[0].colormap[:, :6] // 257).T.reshape(-1).tolist() == COLOURS
    # a batch judges it from its header as the run reads it: frames of H x W, blending refused
    planned = run("crop-pad", tmp_path / "a.png", "--out-dir", tmp_path / "o", "--name", "{stem}.tif", "--shape",
                  "8,8", "--frames", "all", "--keep-palette", "--dry-run", "--json")
    record = json.loads(planned.stdout.splitlines()[0])
    assert planned.exit_code == 0 and record["output_shape"] == [3, 8, 8] and record["warnings"] == []
    refused = run("resize", tmp_path / "a.png", "--out-dir", tmp_path / "o", "--sizes", "6,6", "--mode", "linear",
                  "--frames", "all", "--keep-palette")
    assert refused.exit_code == 2 and "--mode linear mixes values" in refused.stderr


def test_an_apng_s_frame_drawn_over_through_partial_alpha_is_refused_as_indices(tmp_path: Path) -> None:
    """An APNG frame blended over the one before (blend op OVER) through a palette entry's partial
    alpha: Pillow composes the indices as numbers, so class 1 at alpha 128 over class 5 read as
    class 3, in neither frame, written without a word. It is refused, one line, exit 1, nothing
    written; entries of alpha 0 or 255 (a pixel kept, or replaced) still stack as indices."""
    from PIL import PngImagePlugin

    frames = []
    for label in (5, 1):
        frame = Image.fromarray(np.full((8, 8), label, np.uint8))
        frame.putpalette(COLOURS)
        frames.append(frame)
    for alpha, expected in ((128, None), (0, 5)):  # (frame 2 wholly clear: the viewer sees frame 1's class)
        path = tmp_path / f"over{alpha}.png"
        frames[0].save(path, save_all=True, append_images=frames[1:], blend=PngImagePlugin.Blend.OP_OVER,
                       transparency=bytes([255, alpha, 255, 255, 255, 255]))
        out = tmp_path / f"over{alpha}.npy"
        result = run("crop-pad", path, "-o", out, "--shape", "8,8", "--frames", "all", "--keep-palette", "-q")
        if expected is None:
            assert result.exit_code == 1 and "Traceback" not in result.stderr
            assert result.stderr.strip().endswith(
                "over128.png: frame 2 is drawn over the frame before through the palette's partial alpha, which "
                "blends indices into others (--keep-palette); read the colours without --keep-palette")
            assert not out.exists()
        else:
            assert result.exit_code == 0, result.stderr
            assert np.array_equal(np.load(out), np.full((2, 8, 8), expected, np.uint8))


@pytest.mark.parametrize(("blend", "default_image", "number"), [
    (1, False, 2),  # every frame over the one before
    ([0, 0, 1], False, 3),  # the third alone: the refusal names it
    (1, True, 2),  # a default image that is no frame of the animation is Pillow's frame 1
])
def test_the_dry_run_refuses_an_apng_frame_drawn_over_through_partial_alpha_as_the_run_does(
        tmp_path: Path, blend: int | list[int], default_image: bool, number: int) -> None:
    """'crop-pad over.png --out-dir o --frames all --keep-palette --dry-run' said ok, and the run
    then refused the file (exit 1): the fcTL chunks' blend ops and the tRNS are in the chunks'
    headers, which the dry run now reads with the run's code."""
    frames = []
    for label in (5, 1, 2):
        frame = Image.fromarray(np.full((8, 8), label, np.uint8))
        frame.putpalette(COLOURS)
        frames.append(frame)
    path = tmp_path / "over.png"
    frames[0].save(path, save_all=True, append_images=frames[1:], blend=blend, default_image=default_image,
                   transparency=bytes([255, 128, 255, 255, 255, 255]))
    common = [path, "--out-dir", tmp_path / "o", "--name", "{stem}.npy", "--shape", "8,8", "--frames", "all",
              "--keep-palette"]
    planned, result = run("crop-pad", *common, "--dry-run"), run("crop-pad", *common)
    refusal = (f"Error: {path}: frame {number} is drawn over the frame before through the palette's partial alpha, "
               "which blends indices into others (--keep-palette); read the colours without --keep-palette")
    for done in (planned, result):
        assert done.exit_code == 1 and done.stderr.splitlines()[0] == refusal, done.stderr
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
    # a clear or opaque palette: nothing to refuse, in the dry run or the run
    frames[0].save(path, save_all=True, append_images=frames[1:], blend=blend, default_image=default_image,
                   transparency=bytes([255, 0, 255, 255, 255, 255]))
    planned, result = run("crop-pad", *common, "--dry-run"), run("crop-pad", *common)
    assert planned.exit_code == result.exit_code == 0, planned.stderr + result.stderr


def test_a_gif_s_frames_are_refused_as_indices(mask: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    _, labels = mask
    frames = _frames(labels)
    frames[0].save(tmp_path / "a.gif", save_all=True, append_images=frames[1:])
    for where in (["-o", tmp_path / "a.tif"], ["--out-dir", tmp_path / "o", "--name", "{stem}.tif"]):
        result = run("crop-pad", tmp_path / "a.gif", *where, "--shape", "12,16", "--frames", "all", "--keep-palette")
        assert result.exit_code == 1
        assert ("a.gif: --frames all with --keep-palette: Pillow composes a GIF's frames after the first in colour, "
                "not as indices; use --frames first") in result.stderr
        assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gif", "voc.png"]


def test_a_palette_tiff_s_pages_keep_their_map_and_pages_of_other_maps_are_refused(tmp_path: Path,
                                                                                    rng: np.random.Generator) -> None:
    import tifffile

    pages = rng.integers(0, 6, (2, 12, 16), dtype=np.uint8)
    colormap = np.zeros((3, 256), np.uint16)
    colormap[:, :6] = np.array(COLOURS, np.uint16).reshape(-1, 3).T * 257
    tifffile.imwrite(tmp_path / "p.tif", pages, photometric="palette", colormap=colormap)
    result = run("crop-pad", tmp_path / "p.tif", "-o", tmp_path / "o.tif", "--shape", "12,16", "--keep-palette",
                 "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == []
    with tifffile.TiffFile(tmp_path / "o.tif") as tif:
        assert [page.photometric for page in tif.pages] == [tifffile.PHOTOMETRIC.PALETTE] * 2
        assert np.array_equal(tif.asarray(), pages) and np.array_equal(tif.pages[1].colormap, colormap)
    other = colormap.copy()
    other[:, 0] = 65535
    with tifffile.TiffWriter(tmp_path / "two.tif") as tif:  # two series, each of its own map
        tif.write(pages[0], photometric="palette", colormap=colormap)
        tif.write(pages[1], photometric="palette", colormap=other)
    refused = run("crop-pad", tmp_path / "two.tif", "-o", tmp_path / "t.tif", "--shape", "12,16", "--keep-palette")
    assert refused.exit_code == 1
    assert "two.tif: its pages have palettes of their own, which one stack of indices cannot keep" in refused.stderr
    one = run("crop-pad", tmp_path / "two.tif", "-o", tmp_path / "t.tif", "--shape", "12,16", "--keep-palette",
              "--page", "1", "-q")
    assert one.exit_code == 0, one.stderr
    with tifffile.TiffFile(tmp_path / "t.tif") as tif:
        assert np.array_equal(tif.pages[0].colormap, other) and np.array_equal(tif.asarray(), pages[1])


def test_an_imagej_lut_stack_of_indices_is_written_back_as_an_imagej_stack_with_its_lut(
        tmp_path: Path, rng: np.random.Generator) -> None:
    """'crop-pad ijlut.tif -o o.tif --keep-palette' of an ImageJ stack of a LUT (ZYX) dropped the LUT:
    'the palette (256 colours) is for one plane of indices, not a 4x6x6 uint8 result'."""
    import tifffile

    indices = rng.integers(0, 6, (4, 8, 8), dtype=np.uint8)
    colormap = np.zeros((3, 256), np.uint16)
    colormap[:, :6] = np.array(COLOURS, np.uint16).reshape(-1, 3).T * 257
    tifffile.imwrite(tmp_path / "ijlut.tif", indices, imagej=True, colormap=colormap, metadata={"axes": "ZYX"})
    common = [tmp_path / "ijlut.tif", "--out-dir", tmp_path / "o", "--name", "{stem}.tif", "--shape", "6,6",
              "--keep-palette", "--json"]
    run_warns_as_planned(common, [])
    with tifffile.TiffFile(tmp_path / "o" / "ijlut.tif") as tif:
        assert tif.is_imagej and tif.series[0].axes == "ZYX"
        assert [page.photometric for page in tif.pages] == [tifffile.PHOTOMETRIC.PALETTE] * 4
        assert np.array_equal(tif.pages[0].colormap, colormap)
        assert np.array_equal(tif.asarray(), indices[:, 1:7, 1:7])
    # 16-bit indices: tifffile writes no ImageJ LUT but of 256 entries (it raised ValueError)
    lut = np.zeros((3, 65536), np.uint16)
    lut[:, :6] = colormap[:, :6]
    with tifffile.TiffWriter(tmp_path / "ij16.tif") as tif:
        tif.write(indices.astype(np.uint16), photometric="palette", colormap=lut, metadata=None,
                  description="ImageJ=1.11a\nimages=4\nslices=4\n")
    wide = run("crop-pad", tmp_path / "ij16.tif", "-o", tmp_path / "o16.tif", "--shape", "6,6", "--keep-palette",
               "--json")
    assert wide.exit_code == 0, wide.stderr
    assert json.loads(wide.stdout)["warnings"] == [
        "the palette (6 colours) cannot be an ImageJ stack's LUT, which is for uint8 indices, not uint16; dropped"]
    assert np.array_equal(tifffile.imread(tmp_path / "o16.tif"), indices[:, 1:7, 1:7])


def test_a_big_output_of_indices_is_planned_as_the_run_writes_it(tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    # a palette's output is encoded from RAM, never memory-mapped: its dry run says the same
    labels = rng.integers(0, 4, (12, 16), dtype=np.uint8)
    colormap = np.zeros((3, 256), np.uint16)
    colormap[:, :4] = np.array(COLOURS[:12], np.uint16).reshape(-1, 3).T * 257
    tifffile.imwrite(tmp_path / "m.tif", labels, photometric="palette", colormap=colormap)
    common = [tmp_path / "m.tif", "--out-dir", tmp_path / "o", "--name", "{stem}.tif", "--shape", "8192,8192",
              "--keep-palette", "--json"]
    run_warns_as_planned(common, [])
    with tifffile.TiffFile(tmp_path / "o" / "m.tif") as tif:
        assert tif.pages[0].photometric == tifffile.PHOTOMETRIC.PALETTE


def test_a_palette_tiff_with_an_alpha_sample_reads_as_rgba_or_its_indices(tmp_path: Path,
                                                                          rng: np.random.Generator) -> None:
    # Pillow's PA: an index and an alpha a pixel, which Pillow saves as a palette TIFF of 2 samples
    labels = rng.integers(0, 6, (12, 16), dtype=np.uint8)
    im = Image.fromarray(labels)
    im.putpalette(COLOURS)
    pa = im.convert("PA")
    pa.putalpha(Image.fromarray(rng.integers(0, 256, (12, 16), dtype=np.uint8)))
    pa.save(tmp_path / "pa.tif")
    with Image.open(tmp_path / "pa.tif") as saved:
        assert saved.mode == "PA"
        rgba = np.asarray(saved.convert("RGBA"))
    colours = run("crop-pad", tmp_path / "pa.tif", "-o", tmp_path / "c.npy", "--shape", "12,16", "-q")
    assert colours.exit_code == 0, colours.stderr
    assert np.array_equal(np.load(tmp_path / "c.npy"), rgba)  # not the alpha too through the map
    said = "per-pixel alpha beside the palette indices (a palette holds one alpha an entry) cannot be carried; dropped"
    kept = run("crop-pad", tmp_path / "pa.tif", "-o", tmp_path / "k.png", "--shape", "12,16", "--keep-palette",
               "--json")
    assert kept.exit_code == 0 and json.loads(kept.stdout)["warnings"] == [said]
    indices, palette, _ = read_back(tmp_path / "k.png")
    assert np.array_equal(indices, labels) and palette == COLOURS
    planned = run("crop-pad", tmp_path / "pa.tif", "--out-dir", tmp_path / "o", "--name", "{stem}.png", "--shape",
                  "12,16", "--keep-palette", "--dry-run", "--json")
    assert json.loads(planned.stdout.splitlines()[0])["warnings"] == [said]


def test_the_help_says_what_16_bit_indices_and_pages_read_as(tmp_path: Path, rng: np.random.Generator) -> None:
    """--keep-palette's --help said the indices are read 'H x W uint8', where a palette TIFF's
    16-bit indices read as uint16 and its pages stack on a leading axis: what it says now is what a
    run gives."""
    import tifffile

    said = " ".join(run("crop-pad", "--help").stdout.split())
    said = said[said.index("--keep-palette"):said.index("--frames [")]
    assert "H x W uint8" in said and "uint16" in said and "pages" in said and "stacked" in said
    labels = rng.integers(0, 6, (2, 12, 16)).astype(np.uint16) * 300
    colormap = np.zeros((3, 1 << 16), np.uint16)
    colormap[:, 1500] = 65535
    tifffile.imwrite(tmp_path / "p16.tif", labels, photometric="palette", colormap=colormap)
    result = run("crop-pad", tmp_path / "p16.tif", "-o", tmp_path / "p.npy", "--shape", "12,16", "--keep-palette",
                 "-q")
    assert result.exit_code == 0, result.stderr
    read = np.load(tmp_path / "p.npy")
    assert read.dtype == np.uint16 and np.array_equal(read, labels)  # T x H x W, as they are


def test_a_chains_last_step_shape_and_the_written_shape_differ_as_the_docs_say(tmp_path: Path) -> None:
    """A chain's last depth-to-space step said [40, 40, 1] and its record's output_shape [40, 40]
    under --keep-palette to a PNG, unexplained: a step's shape is its result's, the record's the
    file's (one channel is H×W in an image format). docs/files.md quotes the two; the run gives them,
    its --dry-run too, and a .npy holds the channel axis in both."""
    docs = (Path(__file__).parents[2] / "docs" / "files.md").read_text(encoding="utf-8")
    quoted = re.search(r"gives its last step `(\[[^`]*\])`,\s+the record `(\[[^`]*\])`", docs)
    assert quoted is not None
    last_step, written = json.loads(quoted[1]), json.loads(quoted[2])
    pixels = (np.arange(40 * 40).reshape(40, 40) % 7).astype(np.uint8)
    image = Image.fromarray(pixels, mode="P")
    image.putpalette([value % 256 for value in range(768)])
    image.save(tmp_path / "pal.png")
    steps = ["space-to-depth", "--blocksize", "2", "depth-to-space", "--blocksize", "2"]
    for name, holds in (("o.png", written), ("o.npy", last_step)):
        record = json.loads(run("chain", "-i", tmp_path / "pal.png", "-o", tmp_path / name, "--keep-palette",
                                "--json", *steps).stdout)
        assert [step["output_shape"] for step in record["steps"]] == [[20, 20, 4], last_step]
        assert record["output_shape"] == holds
    with Image.open(tmp_path / "o.png") as image:
        assert image.mode == "P" and list(np.asarray(image).shape) == written
    assert list(np.load(tmp_path / "o.npy").shape) == last_step
    planned = run("chain", "-i", tmp_path / "pal.png", "--out-dir", tmp_path / "out", "--keep-palette", "--json",
                  "--dry-run", *steps)
    record = json.loads(planned.stdout.splitlines()[0])
    assert record["steps"][-1]["output_shape"] == last_step and record["output_shape"] == written
