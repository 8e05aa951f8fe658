"""grid-sample and warp on files: what the kernel gives on the same arrays, warp equal to
grid-sample of affine-grid's grid bit for bit, pipes, batches, and one clear line for mistakes."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import PRINT_PEAK_MIB, run
from PIL import Image

from geomcli import affine_grid
from geomcli.engine.theta import from_transforms
from geomcli.ops.grid_sample import grid_sample


@pytest.fixture
def photo(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, np.ndarray]:
    pixels = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
    path = tmp_path / "photo.png"
    Image.fromarray(pixels).save(path)
    return path, pixels


def rotation_grid(height: int, width: int, degrees: float = 30.0) -> np.ndarray:
    theta = from_transforms(rotate=degrees)[None].astype(np.float32)
    return affine_grid(theta, (1, 1, height, width))


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_of_an_image_is_the_kernel_on_1_c_h_w(photo: tuple[Path, np.ndarray], tmp_path: Path,
                                                           mode: str, padding_mode: str) -> None:
    path, pixels = photo
    grid = rotation_grid(20, 28)
    np.save(tmp_path / "grid.npy", grid)
    out = tmp_path / "out.npy"
    result = run("grid-sample", path, "--grid", tmp_path / "grid.npy", "-o", out, "--mode", mode,
                 "--padding-mode", padding_mode, "-q")
    assert result.exit_code == 0, result.stderr
    expected = grid_sample(pixels.transpose(2, 0, 1)[None], grid, mode, padding_mode)[0].transpose(1, 2, 0)
    found = np.load(out)
    assert found.dtype == np.uint8 and found.shape == (20, 28, 3)
    assert np.array_equal(found, expected)


@pytest.mark.parametrize(("flags", "dtype"), [
    (["--rotate", "30"], "float32"),
    (["--scale", "2"], "float32"),
    (["--shear", "0.3,-0.2", "--translate", "0.25,0.1"], "float32"),
    (["--rotate", "-45", "--scale", "0.7,1.3"], "float64"),
    (["--theta", "0.9,0.1,0.05,-0.2,1.1,0"], "float16"),
])
@pytest.mark.parametrize(("mode", "padding_mode", "align"),
                         list(itertools.product(["linear", "nearest", "cubic"], ["zeros", "border", "reflection"],
                                                [[], ["--align-corners"]]))[::4])
def test_warp_is_grid_sample_of_affine_grids_grid_bit_for_bit(
        photo: tuple[Path, np.ndarray], tmp_path: Path, flags: list[str], dtype: str, mode: str,
        padding_mode: str, align: list[str]) -> None:
    path, _ = photo
    sampling = ["--mode", mode, "--padding-mode", padding_mode, *align]
    grid = tmp_path / "grid.npy"
    assert run("affine-grid", "--like", path, *flags, "--dtype", dtype, *align, "-o", grid, "-q").exit_code == 0
    assert run("grid-sample", path, "--grid", grid, *sampling, "-o", tmp_path / "a.npy", "-q").exit_code == 0
    result = run("warp", path, *flags, "--dtype", dtype, *sampling, "-o", tmp_path / "b.npy", "-q")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()


def test_warp_in_slabs_is_the_whole_grid_bit_for_bit(photo: tuple[Path, np.ndarray], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from geomcli.engine.operations import Warp

    path, _ = photo
    whole = run("warp", path, "--rotate", "17", "--mode", "cubic", "--size", "40,50", "-o", tmp_path / "a.npy", "-q")
    monkeypatch.setattr(Warp, "SLAB_GRID_BYTES", 1)  # one output row a slab
    slabs = run("warp", path, "--rotate", "17", "--mode", "cubic", "--size", "40,50", "-o", tmp_path / "b.npy", "-q")
    assert whole.exit_code == slabs.exit_code == 0
    assert np.load(tmp_path / "b.npy").shape == (40, 50, 3)
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()


@pytest.mark.parametrize(("theta", "size"), [
    ("1,0.1,0,0,-0.1,1,0,0.2,0,0,1.2,-0.1", None),  # one matrix for both volumes
    ("0.9,0,0,0,0,1,0.1,0,0,0,1,0,1,0,0,0.3,0,1,0,0,0,0,0.8,0", ["--size", "3,4,5"]),  # one each
    ("theta.npy", ["--size", "5,2,7"]),
])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_warp_of_a_rank5_tensor_is_grid_sample_of_a_3d_affine_grid_bit_for_bit(
        tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch, theta: str,
        size: list[str] | None, mode: str) -> None:
    """(N, C, D, H, W) is warped in 3-D, by 12 numbers a matrix, slab by slab of rows."""
    from geomcli.engine.operations import Warp

    np.save(tmp_path / "v.npy", rng.normal(size=(2, 2, 4, 5, 6)))
    np.save(tmp_path / "theta.npy", np.float32([[[0.9, 0.1, 0, 0], [0, 1.1, 0, 0.1], [0.2, 0, 1, 0]]]))
    theta = str(tmp_path / theta) if theta.endswith(".npy") else theta
    lengths = "4,5,6" if size is None else size[1]
    grid = run("affine-grid", "--size", f"2,2,{lengths}", "--theta", theta, "-o", tmp_path / "g.npy", "-q")
    assert grid.exit_code == 0, grid.stderr
    sampling = ["--mode", mode, "--padding-mode", "border"]
    sampled = run("grid-sample", tmp_path / "v.npy", "--grid", tmp_path / "g.npy", *sampling, "-o", tmp_path / "a.npy")
    assert sampled.exit_code == 0, sampled.stderr
    monkeypatch.setattr(Warp, "SLAB_GRID_BYTES", 1)  # one output row a slab
    warped = run("warp", tmp_path / "v.npy", "--theta", theta, *(size or []), *sampling, "-o", tmp_path / "b.npy")
    assert warped.exit_code == 0, warped.stderr
    assert np.load(tmp_path / "b.npy").shape == (2, 2, *map(int, lengths.split(",")))
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()


@pytest.mark.parametrize(("shape", "args", "message"), [
    # 12 numbers are two 2-D matrices for an image, never a 3-D one read in halves
    ((20, 30, 3), ["--layout", "HWC", "--theta", "1,0,0,0,0,1,0,0,0,0,1,0.1"],
     "theta holds 2 matrices (2-D: 6 numbers each) for 1 image; give one, or one per image"),
    ((1, 2, 3, 4, 5), ["--theta", "1,0,0,0,1,0"],
     "--theta: a 3-D warp (of a rank-5 tensor) takes 12 numbers per matrix, found 6"),
    ((2, 2, 3, 4, 5), ["--theta", ",".join(["1,0,0,0,0,1,0,0,0,0,1,0"] * 3)],
     "theta holds 3 matrices (3-D: 12 numbers each) for 2 volumes; give one, or one per volume"),
    ((1, 2, 3, 4, 5), ["--rotate", "10"], "--rotate, --scale, --shear and --translate make 2-D matrices, and a "
                                          "rank-5 tensor is warped in 3-D; give --theta (12 numbers per matrix)"),
    ((1, 2, 3, 4, 5), ["--theta", "theta23.npy"],
     "theta from {tmp}/theta23.npy holds 2-D matrices (1, 2, 3); a 3-D warp (of a rank-5 tensor) takes "
     "(N, 3, 4) or (3, 4)"),
    ((1, 3, 4, 5), ["--theta", "theta34.npy"],
     "theta from {tmp}/theta34.npy holds 3-D matrices (1, 3, 4); a 2-D warp takes (N, 2, 3) or (2, 3)"),
    ((1, 2, 3, 4, 5), ["--theta", "1,0,0,0,0,1,0,0,0,0,1,0", "--size", "4,5"],
     "--size gives 2 lengths; a 3-D warp takes D,H,W"),
    ((1, 3, 4, 5), ["--rotate", "10", "--size", "2,4,5"], "--size gives 3 lengths; a 2-D warp takes H,W"),
])
def test_theta_and_size_that_do_not_fit_the_inputs_rank_are_usage_errors(
        tmp_path: Path, shape: tuple[int, ...], args: list[str], message: str) -> None:
    np.save(tmp_path / "in.npy", np.zeros(shape, np.float32))
    np.save(tmp_path / "theta23.npy", np.float32([[1, 0, 0], [0, 1, 0]]))
    np.save(tmp_path / "theta34.npy", np.float32([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]))
    args = [str(tmp_path / arg) if arg.endswith(".npy") else arg for arg in args]
    result = run("warp", tmp_path / "in.npy", *args, "-o", tmp_path / "o.npy")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"Error: {tmp_path / 'in.npy'}: {message.format(tmp=tmp_path)}\n"
    assert not (tmp_path / "o.npy").exists()


# a layout's (N, C, H, W) view, and back
LAYOUT_VIEWS: dict[str, tuple[Any, Any]] = {
    "HWC": (lambda a: a.transpose(2, 0, 1)[None], lambda a: a[0].transpose(1, 2, 0)),
    "NCHW": (lambda a: a, lambda a: a),
    "NHWC": (lambda a: a.transpose(0, 3, 1, 2), lambda a: a.transpose(0, 2, 3, 1)),
    "CHW": (lambda a: a[None], lambda a: a[0]),
}


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize(("layout", "dtype"), [("HWC", "uint8"), ("NCHW", "int16"), ("NHWC", "float32"),
                                               ("CHW", "float64")])
def test_warp_slab_by_slab_on_threads_is_grid_sample_of_affine_grids_grid(
        tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch, layout: str, dtype: str,
        threads: str) -> None:
    """The grid's coordinates made in the kernel, of float32 and float64 theta, slab by slab of
    rows, on one thread or two, channels last and first, into an output of another size."""
    from geomcli.engine.operations import Warp
    from geomcli.ops import grid_sample as grid_sample_module

    shape = {"HWC": (13, 17, 3), "NCHW": (2, 3, 13, 17), "NHWC": (2, 13, 17, 4), "CHW": (2, 13, 17)}[layout]
    data = (rng.random(shape) * 250).astype(dtype)
    np.save(tmp_path / "in.npy", data)
    monkeypatch.setattr(Warp, "SLAB_GRID_BYTES", 2000)  # some rows a slab
    monkeypatch.setattr(grid_sample_module, "_PARALLEL_VALUES", 1)  # tiny outputs shared by the threads too
    for theta_dtype, flags in [("float32", ["--rotate", "23", "--scale", "0.8,1.3"]),
                               ("float64", ["--shear", "0.3,-0.2", "--translate", "0.25,-0.1"])]:
        sampling = ["--mode", "linear", "--padding-mode", "border", "--layout", layout, "--threads", threads]
        result = run("warp", tmp_path / "in.npy", *flags, "--dtype", theta_dtype, "--size", "19,11", *sampling,
                     "-o", tmp_path / "warped.npy", "-q")
        assert result.exit_code == 0, result.stderr
        to_nchw, from_nchw = LAYOUT_VIEWS[layout]
        nchw = to_nchw(data)
        theta = from_transforms(**({"rotate": 23.0, "scale": (0.8, 1.3)} if theta_dtype == "float32"
                                   else {"shear": (0.3, -0.2), "translate": (0.25, -0.1)}))
        theta = np.broadcast_to(theta.astype(theta_dtype), (nchw.shape[0], 2, 3))
        grid = affine_grid(theta, (nchw.shape[0], nchw.shape[1], 19, 11))
        expected = grid_sample(nchw, grid, "linear", "border")
        expected = from_nchw(expected)
        found = np.load(tmp_path / "warped.npy")
        assert found.dtype == expected.dtype and found.shape == expected.shape
        assert found.tobytes() == np.ascontiguousarray(expected).tobytes()


def test_rotate_turns_the_picture_counter_clockwise_as_a_viewer_sees_it(tmp_path: Path) -> None:
    dot = np.zeros((101, 101), np.uint8)
    dot[50, 80] = 255  # right of the centre
    Image.fromarray(dot).save(tmp_path / "dot.png")
    assert run("warp", tmp_path / "dot.png", "--rotate", "90", "--mode", "nearest", "-o", tmp_path / "r.npy",
               "-q").exit_code == 0
    # a quarter turn counter-clockwise takes 3 o'clock to 12 o'clock
    assert np.argwhere(np.load(tmp_path / "r.npy")).tolist() == [[20, 50]]


def test_scale_2_shows_twice_the_width_and_height(tmp_path: Path) -> None:
    ramp = np.tile(np.arange(0, 200, 2, dtype=np.uint8), (10, 1))  # 10 x 100, value 2x
    Image.fromarray(ramp).save(tmp_path / "ramp.png")
    assert run("warp", tmp_path / "ramp.png", "--scale", "2", "-o", tmp_path / "s.npy", "-q").exit_code == 0
    shrunk = np.load(tmp_path / "s.npy")
    # a quarter of the area (the help said "twice the area"): the middle half of the rows too
    assert shrunk[[0, 1, 8, 9]].max() == 0 and shrunk[3:7, 30:70].min() > 0
    assert "--scale 2 shows twice the width and height" in " ".join(run("warp", "--help").stdout.split())
    row = shrunk[5].astype(int)
    # the middle half of the output shows the whole input, half as wide; the rest lies outside it
    assert row[:24].max() == 0 and row[76:].max() == 0
    assert (np.diff(row[26:74]) == 4).all()  # two input pixels (2 apart in value) per output pixel


def _turns(lines: np.ndarray) -> tuple[float, float]:
    """The angles, in degrees counter-clockwise as a viewer sees them, of a picture's row of 255s
    and its column of 128s."""
    rows, columns = np.nonzero(lines == 255)
    row_slope = np.polyfit(columns, rows, 1)[0]
    rows, columns = np.nonzero(lines == 128)
    column_slope = np.polyfit(rows, columns, 1)[0]
    return float(np.degrees(np.arctan(-row_slope))), float(np.degrees(np.arctan(column_slope)))


def test_rotate_shears_a_picture_that_is_not_square_as_the_help_says(tmp_path: Path) -> None:
    """--rotate turns the -1..1 square: on the 160-wide, 120-high photo the help's figures, not 30° (the
    help said "turns the picture 30°"); the help's theta of a true turn turns both by 30°."""
    height, width = 120, 160
    lines = np.zeros((height, width), np.uint8)
    lines[height // 2, :] = 255
    lines[:, width // 2] = 128
    Image.fromarray(lines).save(tmp_path / "lines.png")
    flags = run("warp", tmp_path / "lines.png", "--rotate", "30", "--mode", "nearest", "-o", tmp_path / "f.npy", "-q")
    assert flags.exit_code == 0, flags.stderr
    assert [round(angle) for angle in _turns(np.load(tmp_path / "f.npy"))] == [23, 38]
    cos, sin = np.cos(np.radians(30)), np.sin(np.radians(30))
    theta = f"{cos},{-sin * height / width},0,{sin * width / height},{cos},0"
    true = run("warp", tmp_path / "lines.png", "--theta", theta, "--mode", "nearest", "-o", tmp_path / "t.npy", "-q")
    assert true.exit_code == 0, true.stderr
    assert [round(angle) for angle in _turns(np.load(tmp_path / "t.npy"))] == [30, 30]
    said = " ".join(run("warp", "--help").stdout.split())
    assert "(W 160, H 120: its rows turn 23°, its columns 38°)" in said
    assert "--theta cos(a),-sin(a)·H/W,0,sin(a)·W/H,cos(a),0" in said


def test_a_grid_from_a_pipe(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = photo
    exe = Path(sys.executable).parent / "geomcli"
    command = (f"{exe} affine-grid --like {path} --rotate 30 -o - | "
               f"{exe} grid-sample {path} --grid - -o {tmp_path / 'turned.png'} -q")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert run("warp", path, "--rotate", "30", "-o", tmp_path / "warped.png", "-q").exit_code == 0
    assert (tmp_path / "turned.png").read_bytes() == (tmp_path / "warped.png").read_bytes()


@pytest.mark.parametrize("theta", [["--rotate", "30"], ["--theta", "0.9,0.1,0,-0.1,1.1,0.2"],
                                   ["--theta", "1,0,0,0,1,0,0.5,0,0,0,2,0.25"], ["--theta", "one.npy"]])
def test_a_grid_like_a_batch_has_its_n_and_samples_it_as_warp_does(tmp_path: Path, rng: np.random.Generator,
                                                                   theta: list[str]) -> None:
    """--like a batch of 2: one matrix (flags, typed or a file's) for both images, or one each."""
    np.save(tmp_path / "n2.npy", rng.normal(size=(2, 3, 6, 8)).astype(np.float32))
    np.save(tmp_path / "one.npy", np.float32([[[0.8, 0.2, 0.1], [-0.2, 0.8, 0]]]))
    theta = [str(tmp_path / word) if word.endswith(".npy") else word for word in theta]
    grid = tmp_path / "grid.npy"
    made = run("affine-grid", "--like", tmp_path / "n2.npy", *theta, "-o", grid, "-q")
    assert made.exit_code == 0, made.stderr
    assert np.load(grid).shape == (2, 6, 8, 2)
    sampled = run("grid-sample", tmp_path / "n2.npy", "--grid", grid, "-o", tmp_path / "a.npy", "-q")
    assert sampled.exit_code == 0, sampled.stderr
    assert run("warp", tmp_path / "n2.npy", *theta, "-o", tmp_path / "b.npy", "-q").exit_code == 0
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()


def test_a_grid_like_a_tiffs_page_or_series_fits_that_page_or_series(tmp_path: Path,
                                                                      rng: np.random.Generator) -> None:
    """--like with --page or --series reads that page or series's shape, as grid-sample and warp
    read the file (a page of 3 gave N = 3 grid's, which grid-sample --page refused)."""
    import tifffile

    path = tmp_path / "two.tif"
    with tifffile.TiffWriter(path) as tif:
        tif.write(rng.integers(0, 60000, (3, 6, 8), dtype=np.uint16), photometric="minisblack")  # series 0: 3 pages
        tif.write(rng.integers(0, 60000, (5, 7), dtype=np.uint16), photometric="minisblack")  # series 1: 1 page
    grid = tmp_path / "g.npy"
    for option, shape in [(["--page", "1"], (1, 6, 8, 2)), (["--series", "1"], (1, 5, 7, 2)),
                          (["--series", "0"], (3, 6, 8, 2))]:
        made = run("affine-grid", "--like", path, *option, "--rotate", "10", "-o", grid, "-q")
        assert made.exit_code == 0, made.stderr
        assert np.load(grid).shape == shape
        sampled = run("grid-sample", path, *option, "--grid", grid, "-o", tmp_path / "a.tif", "-q")
        assert sampled.exit_code == 0, sampled.stderr
        assert run("warp", path, *option, "--rotate", "10", "-o", tmp_path / "b.tif", "-q").exit_code == 0
        assert np.array_equal(tifffile.imread(tmp_path / "a.tif"), tifffile.imread(tmp_path / "b.tif"))
    png = tmp_path / "one.png"
    Image.fromarray(rng.integers(0, 255, (6, 8), dtype=np.uint8)).save(png)
    for option in ["--page", "--series"]:  # ignored with a warning, as grid-sample and warp ignore it
        made = run("affine-grid", "--like", png, option, "1", "--rotate", "10", "-o", grid)
        assert made.exit_code == 0 and np.load(grid).shape == (1, 6, 8, 2)
        assert f"Warning: {grid}: {png}: {option} is for TIFF input, not PNG; ignored\n" in made.stderr
        assert f"{option} is for TIFF input, not PNG; ignored" in run("warp", png, option, "1", "--rotate", "10",
                                                                      "-o", tmp_path / "b.png").stderr
    beyond = run("affine-grid", "--like", path, "--page", "9", "-o", grid)
    assert beyond.exit_code == 1 and beyond.stderr == f"Error: {path}: --page 9 is out of range (pages 0 to 3)\n"
    for args, message in [(["--size", "1,1,4,4", "--page", "1"], "--page is for --like's file"),
                          (["--size", "1,1,4,4", "--series", "0"], "--series is for --like's file"),
                          (["--like", path, "--page", "1", "--series", "0"], "give --series or --page, not both")]:
        refused = run("affine-grid", *args, "-o", tmp_path / "r.npy")
        assert refused.exit_code == 2 and f"Error: {message}\n" in refused.stderr
        assert not (tmp_path / "r.npy").exists()


def test_a_grid_like_an_ome_stack_is_its_planes_as_grid_sample_reads_them(tmp_path: Path,
                                                                          rng: np.random.Generator) -> None:
    """An OME-TIFF's or OME-Zarr's TCZYX stack is sampled plane by plane (N = T·Z): --like made a
    3-D grid of it (N = T, as of a rank-5 .npy), which grid-sample refused, and refused --rotate."""
    import tifffile

    path = tmp_path / "v.ome.tif"
    tifffile.imwrite(path, rng.random((2, 3, 4, 5, 6)).astype(np.float32), ome=True, metadata={"axes": "TCZYX"})
    assert run("crop-pad", path, "--shape", "5,6", "-o", tmp_path / "v.zarr", "-q").exit_code == 0  # OME-Zarr
    grid = tmp_path / "g.npy"
    for stack in (path, tmp_path / "v.zarr"):
        made = run("affine-grid", "--like", stack, "--rotate", "10", "-o", grid, "-q")
        assert made.exit_code == 0, made.stderr
        assert np.load(grid).shape == (8, 5, 6, 2)
        sampled = run("grid-sample", stack, "--grid", grid, "-o", tmp_path / "a.npy", "-q")
        assert sampled.exit_code == 0, sampled.stderr
        assert run("warp", stack, "--rotate", "10", "-o", tmp_path / "b.npy", "-q").exit_code == 0
        assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()


def test_twelve_numbers_on_a_z_stack_warn_that_they_make_2d_matrices(tmp_path: Path,
                                                                     rng: np.random.Generator) -> None:
    """A 3-D matrix typed for a 2-plane OME z-stack was taken, without a word, as a 2-D matrix for
    each plane (the second singular here): the stack is warped plane by plane. It now says so;
    12 numbers for two images of no Z axis, or for a rank-5 tensor (3-D), say nothing."""
    import tifffile

    volume = rng.random((2, 5, 6)).astype(np.float32)
    tifffile.imwrite(tmp_path / "z.ome.tif", volume, ome=True, metadata={"axes": "ZYX"})
    np.save(tmp_path / "n2.npy", volume[:, None])
    np.save(tmp_path / "v.npy", volume[None, None])
    theta = "1,0,0,0,0,1,0,0,0,0,1,0"
    stack = run("warp", tmp_path / "z.ome.tif", "--theta", theta, "-o", tmp_path / "w.ome.tif")
    assert stack.exit_code == 0, stack.stderr
    assert (f"Warning: {tmp_path / 'w.ome.tif'}: --theta's 12 numbers are read as 2 2-D matrices (6 numbers each): "
            "a ZYX stack is warped plane by plane, not in 3-D (give --volume to warp it as one volume)\n"
            ) in stack.stderr
    for name in ("n2.npy", "v.npy"):
        quiet = run("warp", tmp_path / name, "--theta", theta, "-o", tmp_path / f"w_{name}")
        assert quiet.exit_code == 0 and "Warning" not in quiet.stderr, quiet.stderr
    # a grid like the stack is one 2-D grid per plane too: affine-grid says so as warp does
    grid = run("affine-grid", "--like", tmp_path / "z.ome.tif", "--theta", theta, "-o", tmp_path / "g.npy")
    assert grid.exit_code == 0 and np.load(tmp_path / "g.npy").shape == (2, 5, 6, 2), grid.stderr
    assert (f"Warning: {tmp_path / 'g.npy'}: --theta's 12 numbers are read as 2 2-D matrices (6 numbers each): "
            "a ZYX stack is warped plane by plane") in grid.stderr
    for name in ("n2.npy", "v.npy"):
        quiet = run("affine-grid", "--like", tmp_path / name, "--theta", theta, "-o", tmp_path / f"g_{name}")
        assert quiet.exit_code == 0 and "Warning" not in quiet.stderr, quiet.stderr


def test_a_theta_file_of_another_count_than_n_names_both(tmp_path: Path) -> None:
    np.save(tmp_path / "n2.npy", np.zeros((2, 3, 6, 8), np.float32))
    np.save(tmp_path / "theta3.npy", np.zeros((3, 2, 3), np.float32))
    like = run("affine-grid", "--like", tmp_path / "n2.npy", "--theta", tmp_path / "theta3.npy",
               "-o", tmp_path / "g.npy")
    assert like.exit_code == 2  # the options do not fit each other: a usage fault
    assert like.stderr == (f"Error: {tmp_path / 'theta3.npy'}: theta holds 3 matrices for {tmp_path / 'n2.npy'}'s "
                           "N = 2; give one matrix, or one per N\n")
    size = run("affine-grid", "--size", "1,3,6,8", "--theta", tmp_path / "theta3.npy", "-o", tmp_path / "g.npy")
    assert size.exit_code == 2
    assert size.stderr == (f"Error: {tmp_path / 'theta3.npy'}: theta holds 3 matrices for --size's N = 1; give one "
                           "matrix, or one per N\n")
    assert not (tmp_path / "g.npy").exists()
    np.save(tmp_path / "theta1.npy", np.float32([[[1, 0, 0], [0, 1, 0]]]))  # one matrix: for every N
    one = run("affine-grid", "--size", "3,1,2,2", "--theta", tmp_path / "theta1.npy", "-o", tmp_path / "g.npy", "-q")
    assert one.exit_code == 0 and np.load(tmp_path / "g.npy").shape == (3, 2, 2, 2)


def test_a_batch_applies_the_one_grid_to_every_input(tmp_path: Path, rng: np.random.Generator) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a", "b", "c"):
        Image.fromarray(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)).save(folder / f"{name}.png")
    np.save(tmp_path / "grid.npy", rotation_grid(12, 16))
    dry = run("grid-sample", folder, "--grid", tmp_path / "grid.npy", "--out-dir", tmp_path / "out", "--dry-run")
    assert dry.exit_code == 0 and dry.stdout.count("12×16×3 uint8") == 3
    result = run("grid-sample", folder, "--grid", tmp_path / "grid.npy", "--out-dir", tmp_path / "out", "-j", "2")
    assert result.exit_code == 0, result.stderr
    assert "grid-sample: 3 ok, 0 failed, 0 skipped" in result.stderr
    for name in ("a", "b", "c"):
        with Image.open(tmp_path / "out" / f"{name}.png") as image:
            assert image.size == (16, 12)


def test_tensors_in_their_layout_and_3d_tensors(tmp_path: Path, rng: np.random.Generator) -> None:
    nhwc = rng.normal(size=(2, 6, 7, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", nhwc)
    grid = rng.uniform(-1.2, 1.2, size=(2, 4, 5, 2)).astype(np.float32)
    np.save(tmp_path / "g.npy", grid)
    assert run("grid-sample", tmp_path / "x.npy", "--grid", tmp_path / "g.npy", "--layout", "NHWC",
               "-o", tmp_path / "y.npy", "-q").exit_code == 0
    expected = grid_sample(nhwc.transpose(0, 3, 1, 2), grid).transpose(0, 2, 3, 1)
    assert np.array_equal(np.load(tmp_path / "y.npy"), expected)
    volume = rng.normal(size=(1, 2, 4, 5, 6))
    grid3 = rng.uniform(-1, 1, size=(1, 3, 3, 3, 3))
    np.save(tmp_path / "v.npy", volume)
    np.save(tmp_path / "g3.npy", grid3)
    result = run("grid-sample", tmp_path / "v.npy", "--grid", tmp_path / "g3.npy", "--mode", "cubic",
                 "-o", tmp_path / "w.npy", "-q")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(np.load(tmp_path / "w.npy"), grid_sample(volume, grid3, "cubic"))


def test_mistakes_are_one_line(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = photo
    np.save(tmp_path / "grid.npy", rotation_grid(4, 4))
    np.save(tmp_path / "ints.npy", np.zeros((1, 4, 4, 2), np.int32))
    np.save(tmp_path / "two.npy", np.zeros((2, 4, 4, 2), np.float32))
    old = run("grid-sample", path, "--grid", tmp_path / "grid.npy", "--mode", "bilinear", "-o", tmp_path / "o.png")
    assert old.exit_code == 2
    assert "'bilinear' is GridSample-16's name; opset 20 and later call it 'linear'" in old.stderr
    both = run("grid-sample", "-", "--grid", "-", "-o", tmp_path / "o.png")
    assert both.exit_code == 2 and "cannot both read stdin" in both.stderr
    ints = run("grid-sample", path, "--grid", tmp_path / "ints.npy", "-o", tmp_path / "o.png")
    assert ints.exit_code == 1
    assert ints.stderr == f"Error: {tmp_path / 'ints.npy'}: a grid must hold floats, found int32\n"
    batch = run("grid-sample", path, "--grid", tmp_path / "two.npy", "-o", tmp_path / "o.png")
    assert batch.exit_code == 2  # what the data's header shows: a usage fault, as in a batch
    assert batch.stderr.startswith(f"Error: {path}: grid_sample: grid's batch N = 2 does not match data's N = 1")
    fill = run("warp", path, "--rotate", "10", "--fill", "300", "-o", tmp_path / "o.png")
    assert fill.exit_code == 2 and "300" in fill.stderr and fill.stderr.count("\n") == 1
    size = run("warp", path, "--size", "3,0", "-o", tmp_path / "o.png")
    assert size.exit_code == 2 and "give H,W (D,H,W for a rank-5 tensor): lengths of at least 1" in size.stderr
    theta = run("warp", path, "--theta", "1,0,0,0,1", "-o", tmp_path / "o.png")
    assert theta.exit_code == 2 and ("a 2-D warp takes 6 numbers per matrix, a 3-D warp (of a rank-5 tensor) 12; "
                                     "found 5") in theta.stderr
    assert not (tmp_path / "o.png").exists()


def test_a_grid_that_does_not_fit_an_image_names_its_shape_and_the_kernels_view(
        photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = photo
    np.save(tmp_path / "two.npy", np.zeros((2, 4, 4, 2), np.float32))
    result = run("grid-sample", path, "--grid", tmp_path / "two.npy", "-o", tmp_path / "o.png")
    assert result.exit_code == 2
    assert result.stderr == (f"Error: {path}: grid_sample: grid's batch N = 2 does not match data's N = 1 (data shape "
                             "(24, 32, 3), layout HWC, as NCHW (1, 3, 24, 32), grid shape (2, 4, 4, 2))\n")


def test_a_warp_over_the_limit_names_the_output_in_the_files_layout(photo: tuple[Path, np.ndarray],
                                                                    tmp_path: Path) -> None:
    path, _ = photo
    result = run("warp", path, "--rotate", "10", "--size", "100,100", "--max-pixels", "10000", "-o", tmp_path / "o.png")
    assert result.exit_code == 2
    assert result.stderr == (f"Error: {path}: the output (100, 100, 3): 30000 elements exceed the limit of 10000; "
                             "raise it with --max-pixels or GEOMCLI_MAX_PIXELS\n")


def test_a_warps_record_holds_the_matrix_its_flags_made_which_typed_back_warps_the_same(
        photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = photo
    flagged = run("warp", path, "-o", tmp_path / "a.npy", "--rotate", "10", "--scale", "1.5", "--json")
    assert flagged.exit_code == 0, flagged.stderr
    parameters = json.loads(flagged.stdout)["parameters"]
    used = from_transforms(rotate=10.0, scale=(1.5,)).astype(np.float32)  # the grid dtype by default
    assert parameters["theta"] == used.astype(np.float64).tolist() and parameters["flags"] == {"rotate": 10.0,
                                                                                              "scale": [1.5]}
    numbers = ",".join(repr(number) for row in parameters["theta"] for number in row)
    typed = run("warp", path, "-o", tmp_path / "b.npy", "--theta", numbers, "--json")
    assert typed.exit_code == 0, typed.stderr
    assert json.loads(typed.stdout)["parameters"]["theta"] == numbers
    assert "flags" not in json.loads(typed.stdout)["parameters"]
    assert np.array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))
    np.save(tmp_path / "theta.npy", used[None])
    read = run("warp", path, "-o", tmp_path / "c.npy", "--theta", tmp_path / "theta.npy", "--json")
    assert json.loads(read.stdout)["parameters"]["theta"] == str(tmp_path / "theta.npy")


def test_fill_is_what_an_outside_tap_reads(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = photo
    assert run("warp", path, "--scale", "3", "--fill", "255", "--mode", "nearest", "-o", tmp_path / "f.npy",
               "-q").exit_code == 0
    out = np.load(tmp_path / "f.npy")
    assert (out[0, 0] == 255).all() and (out[-1, -1] == 255).all()
    # the record holds the value the dtype reads, in a chain's steps too
    np.save(tmp_path / "h.npy", np.zeros((4, 4), np.float16))
    warped = run("warp", tmp_path / "h.npy", "--scale", "3", "--fill", "0.1", "-o", tmp_path / "w.npy", "--json")
    assert json.loads(warped.stdout)["parameters"]["fill"] == 0.0999755859375
    np.save(tmp_path / "grid.npy", np.full((1, 2, 2, 2), 5.0, np.float32))
    chained = json.loads(run("chain", "-i", tmp_path / "h.npy", "-o", tmp_path / "c.npy", "--json", "grid-sample",
                             "--grid", tmp_path / "grid.npy", "--fill", "0.1").stdout)
    assert chained["parameters"]["steps"][0]["fill"] == chained["steps"][0]["fill"] == 0.0999755859375


@pytest.mark.slow
def test_a_big_warp_never_holds_its_grid(tmp_path: Path) -> None:
    """8000 x 8000 grey (64 MB in, 64 MB out): the whole grid would be 512 MB of float32."""
    source = np.lib.format.open_memmap(tmp_path / "big.npy", mode="w+", dtype=np.uint8, shape=(8000, 8000))
    source[::7] = 200
    source.flush()
    del source
    script = textwrap.dedent(f"""
        from geomcli.cli import main
        try:
            main(["warp", {str(tmp_path / 'big.npy')!r}, "--rotate", "30", "-o", {str(tmp_path / 'out.npy')!r}, "-q"])
        except SystemExit as stop:
            if stop.code:
                raise
        {PRINT_PEAK_MIB}
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    peak_mib = float(done.stdout)
    assert peak_mib < 64 + 64 + 200, peak_mib  # input and output pages, and the bounded work


@pytest.mark.parametrize("command", ["warp", "affine-grid"])
def test_flags_that_make_a_singular_matrix_are_a_usage_error_before_any_file_is_read(
        command: str, tmp_path: Path) -> None:
    missing = tmp_path / "missing.png"  # read first, it would be this file's failure (exit 1)
    reads = [missing, "-o", tmp_path / "o.png"] if command == "warp" else ["--like", missing, "-o", tmp_path / "g.npy"]
    result = run(command, *reads, "--scale", "0")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        "Error: --scale 0 makes a singular matrix: every output pixel would sample one point")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("given, option", [
    (["--scale", "1e-8", "--dtype", "float16"], "--scale"),
    (["--shear", "1,0.9999", "--dtype", "float16"], "--shear"),
    (["--rotate", "30", "--scale", "1e-50"], "--rotate' / '--scale"),  # float32's, the default grid dtype
    (["--theta", "1e-8,0,0,0,1e-8,0", "--dtype", "float16"], "--theta"),
    (["--theta", "FILE", "--dtype", "float16"], "--dtype"),
])
@pytest.mark.parametrize("command", ["warp", "affine-grid"])
def test_a_matrix_made_singular_by_the_grid_dtype_is_a_usage_error(
        command: str, given: list[str], option: str, photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    """'warp photo.png -o o.png --scale 1e-8 --dtype float16' wrote a flat picture, exit 0: theta
    was all zeros in float16. The grid is made from the matrix in its dtype, which is judged."""
    np.save(tmp_path / "theta.npy", np.array([[1e-8, 0, 0], [0, 1e-8, 0]]))
    given = [str(tmp_path / "theta.npy") if value == "FILE" else value for value in given]
    reads = ([photo[0], "-o", tmp_path / "o.png"] if command == "warp"
             else ["--size", "1,1,4,4", "-o", tmp_path / "g.npy"])
    result = run(command, *reads, *given)
    assert result.exit_code == 2 and result.stdout == ""
    dtype = given[given.index("--dtype") + 1] if "--dtype" in given else "float32"
    assert re.fullmatch(rf"Error: Invalid value for '{option}': .*theta is singular once rounded to {dtype} \(its "
                        r"numbers are not\): every output pixel would sample one (point|line of the input); "
                        r"--dtype float64 holds it", result.stderr.splitlines()[-1]), result.stderr
    assert not (tmp_path / "o.png").exists() and not (tmp_path / "g.npy").exists()
    if "FILE" not in given and option != "--theta":
        as_float64 = [value if value not in ("float16", "float32") else "float64" for value in given]
        assert run(command, *reads, *(as_float64 + ([] if "--dtype" in given else ["--dtype", "float64"])),
                   "-q").exit_code == 0


def test_a_singular_theta_typed_as_numbers_is_legitimate_onnx(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, pixels = photo
    grid = run("affine-grid", "--size", "1,1,2,3", "--theta", "0,0,0.5,0,0,0", "-o", tmp_path / "g.npy", "-q")
    assert grid.exit_code == 0, grid.stderr
    assert np.array_equal(np.load(tmp_path / "g.npy"), np.broadcast_to(np.float32([0.5, 0]), (1, 2, 3, 2)))
    warped = run("warp", path, "--theta", "0,0,0,0,0,0", "-o", tmp_path / "w.npy", "-q")
    assert warped.exit_code == 0, warped.stderr


def test_warp_with_size_carries_the_dpi_as_resize_does(tmp_path: Path) -> None:
    Image.fromarray(np.zeros((40, 60, 3), np.uint8)).save(tmp_path / "in.png", dpi=(72, 72))
    for name, args in [("sized.png", ["--size", "80,30"]), ("kept.png", []), ("scaled.png", ["--scale", "2,0.5"])]:
        assert run("warp", tmp_path / "in.png", "-o", tmp_path / name, "--translate", "0.1,0", *args,
                   "-q").exit_code == 0
    resized = run("resize", tmp_path / "in.png", "-o", tmp_path / "resized.png", "--sizes", "80,30", "-q")
    assert resized.exit_code == 0
    dpi = {}
    for name in ("sized.png", "kept.png", "scaled.png", "resized.png"):
        with Image.open(tmp_path / name) as image:
            dpi[name] = [round(value) for value in image.info["dpi"]]
    # W 60 -> 30: half the pixels per inch along x; H 40 -> 80: twice along y; --scale 2,0.5 (x, y): an output
    # pixel steps over 2 input pixels along x, half of one along y
    assert dpi == {"sized.png": [36, 144], "kept.png": [72, 72], "scaled.png": [36, 144], "resized.png": [36, 144]}


def test_a_rotation_or_a_grid_drops_the_dpi_with_a_warning(tmp_path: Path) -> None:
    """A rotated or sheared warp's, or a grid's, output pixels have no size along x and y: the DPI
    is dropped and named (a try-out's warp --scale 2 kept it, and a grid-sample does)."""
    Image.fromarray(np.zeros((40, 60, 3), np.uint8)).save(tmp_path / "in.png", dpi=(72, 72))
    np.save(tmp_path / "grid.npy", np.zeros((1, 20, 30, 2), np.float32))
    for command, args in [("warp", ["--rotate", "10"]), ("grid-sample", ["--grid", tmp_path / "grid.npy"])]:
        result = run(command, tmp_path / "in.png", "-o", tmp_path / "out.png", *args, "--json")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["warnings"] == [
            f"DPI (72 x 72) of {command}'s output (its pixels have no size per axis: a grid, a rotation or shear) "
            "cannot be carried; dropped"]
        with Image.open(tmp_path / "out.png") as image:
            assert "dpi" not in image.info


def test_a_flip_keeps_the_dpi(tmp_path: Path) -> None:
    """A flip turns the picture over and keeps each pixel's size (a review found its DPI dropped)."""
    Image.fromarray(np.zeros((40, 60, 3), np.uint8)).save(tmp_path / "in.png", dpi=(72, 72))
    result = run("warp", tmp_path / "in.png", "-o", tmp_path / "out.png", "--scale=-1,1", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == []
    with Image.open(tmp_path / "out.png") as image:
        assert [round(value) for value in image.info["dpi"]] == [72, 72]


@pytest.mark.parametrize(("args", "line"), [
    (["chain", "-i", "-", "-o", "{out}", "grid-sample", "--grid", "-"],
     "the grid-sample step: --grid - and the input - cannot both read stdin: it can be read once"),
    (["chain", "-i", "-", "-o", "{out}", "warp", "--theta", "-"],
     "the warp step: --theta - and the input - cannot both read stdin: it can be read once"),
    (["chain", "-i", "{grid}", "-o", "{out}", "grid-sample", "--grid", "-", "warp", "--theta", "-"],
     "the warp step: --theta - and an earlier grid-sample step's --grid - cannot both read stdin: it can be read "
     "once"),
    (["chain", "--files-from", "-", "--out-dir", "{folder}", "grid-sample", "--grid", "-"],
     "the grid-sample step: --grid - and --files-from - cannot both read stdin: it can be read once"),
    (["grid-sample", "--files-from", "-", "--grid", "-", "--out-dir", "{folder}"],
     "--grid - and --files-from - cannot both read stdin: it can be read once"),
    (["warp", "--files-from", "-", "--theta", "-", "--out-dir", "{folder}"],
     "--theta - and --files-from - cannot both read stdin: it can be read once"),
    (["warp", "-", "--theta", "-", "-o", "{out}"],
     "--theta - and the input - cannot both read stdin: it can be read once"),
    (["affine-grid", "--like", "-", "--theta", "-", "-o", "{out}"],
     "--theta - and --like - cannot both read stdin: it can be read once"),
    (["warp", "/dev/stdin", "--theta", "-", "-o", "{out}"],
     "--theta - and the input /dev/stdin cannot both read stdin: it can be read once"),
    (["grid-sample", "-", "--grid", "/dev/fd/0", "-o", "{out}"],
     "--grid /dev/fd/0 and the input - cannot both read stdin: it can be read once"),
])
def test_stdin_is_read_once_a_second_reader_is_a_usage_error(args: list[str], line: str, tmp_path: Path) -> None:
    """Two readers of - would find it empty the second time: refused before anything is read."""
    np.save(tmp_path / "grid.npy", rotation_grid(4, 4))
    given = [arg.format(out=tmp_path / "o.npy", folder=tmp_path / "out", grid=tmp_path / "grid.npy") for arg in args]
    result = run(*given, stdin=(tmp_path / "grid.npy").read_bytes())
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == f"Error: {line}"
    assert not (tmp_path / "o.npy").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("steps", "line"), [
    (["grid-sample", "--grid", "-", "resize", "--scales", "0,0"],
     "the resize step: resize: scales must be > 0 and finite in float32, found 0.0 at index 0"),
    (["grid-sample", "--grid", "{missing}", "resize", "--scales", "0,0"],
     "the resize step: resize: scales must be > 0 and finite in float32, found 0.0 at index 0"),
    (["grid-sample", "--grid", "{missing}", "warp", "--rotate", "3", "--size", "0,0"],
     "Invalid value for '--size': the warp step: give H,W (D,H,W for a rank-5 tensor): lengths of at least 1, "
     "found 0,0"),
    (["grid-sample", "--grid", "-", "warp", "--theta", "-"],
     "the warp step: --theta - and an earlier grid-sample step's --grid - cannot both read stdin: it can be read "
     "once"),
])
def test_a_later_steps_mistake_is_a_usage_error_before_a_grid_is_read(steps: list[str], line: str,
                                                                       tmp_path: Path) -> None:
    """The steps that read no file are made first: a grid read from stdin or a missing file
    came first, and the later step's mistake was a file's error (exit 1), stdin used up."""
    np.save(tmp_path / "in.npy", np.zeros((1, 3, 4, 4), np.float32))
    given = [step.format(missing=tmp_path / "missing.npy") for step in steps]
    result = run("chain", "-i", tmp_path / "in.npy", "-o", tmp_path / "o.npy", *given, stdin=b"")
    assert (result.exit_code, result.stderr.splitlines()[-1]) == (2, f"Error: {line}")
    assert not (tmp_path / "o.npy").exists()


def test_a_grid_and_theta_may_be_zarr_arrays_read_and_written_whole(tmp_path: Path) -> None:
    """affine-grid writes a .zarr (over one already there too), grid-sample's --grid and --theta
    read one; an extension of no format is the option's mistake, exit 2, naming it."""
    zarr = pytest.importorskip("zarr")
    data = np.random.default_rng(42).random((1, 3, 12, 10), dtype=np.float32)
    np.save(tmp_path / "data.npy", data)
    for _ in range(2):
        made = run("affine-grid", "--size", "1,3,6,5", "--rotate", "30", "-o", tmp_path / "g.zarr", "-q")
        assert made.exit_code == 0, made.stderr
    grid = affine_grid(from_transforms(30.0, (1.0,), (0.0, 0.0), (0.0, 0.0))[None].astype(np.float32), (1, 3, 6, 5))
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "g.zarr"), mode="r")[...], grid)
    result = run("grid-sample", tmp_path / "data.npy", "--grid", tmp_path / "g.zarr", "-o", tmp_path / "o.npy", "-q")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), grid_sample(data, grid))
    theta = zarr.create_array(str(tmp_path / "t.zarr"), shape=(1, 2, 3), dtype=np.float32, chunks=(1, 2, 3))
    theta[...] = [[[1, 0, 0], [0, 1, 0]]]
    result = run("warp", tmp_path / "data.npy", "--theta", tmp_path / "t.zarr", "-o", tmp_path / "w.npy", "-q")
    assert result.exit_code == 0, result.stderr
    (tmp_path / "g.xyz").write_bytes(b"")
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(tmp_path / "g.png")
    # the formats that hold floats alone, not every one geomcli reads (a PNG was read, then refused)
    for option, name in itertools.product(["--grid", "--theta"], ["g.xyz", "g.png"]):
        command, what = ("grid-sample", "a grid") if option == "--grid" else ("warp", "theta")
        result = run(command, tmp_path / "data.npy", option, tmp_path / name, "-o", tmp_path / "x.npy")
        assert result.exit_code == 2
        assert result.stderr.splitlines()[-1] == (
            f"Error: Invalid value for '{option}': {tmp_path / name}: {what} is read from a .npy, .tif, .tiff or "
            f".zarr file, the formats that hold floats; not {name[1:]}")
    assert not (tmp_path / "x.npy").exists()


def test_a_grid_like_an_image_as_stored_fits_grid_sample_without_auto_orient(tmp_path: Path) -> None:
    """--like takes an EXIF-turned photo upright, as grid-sample reads it; --no-auto-orient takes
    it as stored, as grid-sample --no-auto-orient does (there was no way to say so)."""
    image = Image.new("RGB", (50, 40))
    exif = image.getexif()
    exif[0x0112] = 6  # turned 90 degrees: 40 wide and 50 high upright
    image.save(tmp_path / "o6.jpg", exif=exif)
    for flags, shape in (([], (1, 50, 40, 2)), (["--no-auto-orient"], (1, 40, 50, 2))):
        result = run("affine-grid", "--like", tmp_path / "o6.jpg", *flags, "--rotate", "5", "-o", tmp_path / "g.npy")
        assert result.exit_code == 0, result.stderr
        assert np.load(tmp_path / "g.npy").shape == shape
        result = run("grid-sample", tmp_path / "o6.jpg", *flags, "--grid", tmp_path / "g.npy", "-o",
                     tmp_path / "out.png", "-q")
        assert result.exit_code == 0, result.stderr
    result = run("affine-grid", "--size", "1,1,4,4", "--no-auto-orient", "-o", tmp_path / "g.npy")
    assert (result.exit_code, result.stderr.splitlines()[-1]) == (2, "Error: --no-auto-orient is for --like's file")


def test_warp_help_tells_the_flags_order_and_which_volumes_are_warped_in_3d(tmp_path: Path,
                                                                           rng: np.random.Generator) -> None:
    """warp --help named four transform flags but not the order they compose in (affine-grid's
    and the README's said it), and said 'a rank-5 tensor is warped in 3-D' where a TIFF's or
    OME-Zarr's TCZYX z-stack is warped plane by plane. It now says both, and both are true."""
    import math

    import tifffile
    from click.testing import CliRunner

    from geomcli.cli import cli

    shown = " ".join(CliRunner().invoke(cli, ["warp", "--help"]).stdout.split())
    assert "the flags compose as translate · rotate · shear · scale (scale applies first)" in shown
    assert "of no named axes (.npy, a plain zarr) is warped in 3-D" in shown
    assert "a TIFF's or OME-Zarr's z-stack, plane by plane" in shown
    np.save(tmp_path / "t.npy", rng.random((1, 2, 9, 11)))
    flags = ["--rotate", "30", "--scale", "1.5,0.8", "--shear", "0.2,-0.1", "--translate", "0.3,-0.2"]
    assert run("warp", tmp_path / "t.npy", *flags, "--dtype", "float64", "-o", tmp_path / "flags.npy").exit_code == 0
    cos, sin = math.cos(math.radians(30)), math.sin(math.radians(30))
    translate = np.array([[1, 0, 0.3], [0, 1, -0.2], [0, 0, 1]])
    rotate = np.array([[cos, -sin, 0], [sin, cos, 0], [0, 0, 1]])
    shear = np.array([[1, 0.2, 0], [-0.1, 1, 0], [0, 0, 1]])
    scale = np.diag([1.5, 0.8, 1])
    results = []
    for matrix in (translate @ rotate @ shear @ scale, scale @ shear @ rotate @ translate):
        numbers = ",".join(repr(float(value)) for value in matrix[:2].ravel())
        result = run("warp", tmp_path / "t.npy", "--theta", numbers, "--dtype", "float64", "-o", tmp_path / "m.npy")
        assert result.exit_code == 0, result.stderr
        results.append(np.load(tmp_path / "m.npy"))
    np.testing.assert_allclose(np.load(tmp_path / "flags.npy"), results[0], atol=1e-12)
    assert np.abs(results[1] - results[0]).max() > 0.1
    stack = rng.integers(0, 65536, (2, 2, 3, 8, 10), dtype=np.uint16)
    tifffile.imwrite(tmp_path / "z.ome.tif", stack, ome=True, photometric="minisblack", metadata={"axes": "TCZYX"})
    assert run("warp", tmp_path / "z.ome.tif", "--rotate", "10", "-o", tmp_path / "z.npy", "-q").exit_code == 0
    assert np.load(tmp_path / "z.npy").shape == stack.shape
    np.save(tmp_path / "plane.npy", stack[1, 1, 2])
    assert run("warp", tmp_path / "plane.npy", "--rotate", "10", "-o", tmp_path / "p.npy", "-q").exit_code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "z.npy")[1, 1, 2], np.load(tmp_path / "p.npy"))


def test_a_grid_like_an_animation_takes_its_frames_as_grid_sample_does(tmp_path: Path) -> None:
    """'warp anim.gif --frames all --rotate 10' had no affine-grid + grid-sample to match it: --like
    read an animation as one frame (N = 1), which grid-sample --frames all refused ('grid's batch
    N = 1 does not match data's N = 3'). affine-grid --frames all now gives N = 3, and the two steps
    give warp's bits; without it, or with first, N = 1 as before."""
    frames = [Image.fromarray(np.full((20, 30, 3), 60 * index, np.uint8)) for index in range(3)]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:], duration=100)
    for flags, batch in (([], 1), (["--frames", "first"], 1), (["--frames", "all"], 3)):
        result = run("affine-grid", "--like", tmp_path / "anim.gif", *flags, "--rotate", "10", "-o", tmp_path / "g.npy")
        assert result.exit_code == 0, result.stderr
        assert np.load(tmp_path / "g.npy").shape == (batch, 20, 30, 2)
    result = run("grid-sample", tmp_path / "anim.gif", "--frames", "all", "--grid", tmp_path / "g.npy", "-o",
                 tmp_path / "sampled.npy", "-q")
    assert result.exit_code == 0, result.stderr
    result = run("warp", tmp_path / "anim.gif", "--frames", "all", "--rotate", "10", "-o", tmp_path / "warped.npy",
                 "-q")
    assert result.exit_code == 0, result.stderr
    warped = np.load(tmp_path / "warped.npy")
    assert warped.shape == (3, 20, 30, 3) and len(np.unique(warped[:, 10, 15, 0])) == 3
    np.testing.assert_array_equal(np.load(tmp_path / "sampled.npy"), warped)
    result = run("affine-grid", "--size", "1,1,4,4", "--frames", "all", "-o", tmp_path / "x.npy")
    assert (result.exit_code, result.stderr.splitlines()[-1]) == (2, "Error: --frames is for --like's file")


@pytest.mark.parametrize("command, option", [
    (["grid-sample", "IN", "--grid", "READ", "-o", "OUT"], "--grid"),
    (["warp", "IN", "--theta", "READ", "-o", "OUT"], "--theta"),
    (["chain", "-i", "IN", "-o", "OUT", "crop-pad", "--shape", "1,3,8,12", "warp", "--theta", "READ"], "warp --theta"),
    (["affine-grid", "--like", "READ", "-o", "OUT"], "--like"),
], ids=["grid", "theta", "chain", "like"])
@pytest.mark.parametrize("through_a_link", [False, True], ids=["same-name", "link"])
def test_o_never_replaces_a_file_an_option_reads(tmp_path: Path, rng: np.random.Generator, command: list[str],
                                                 option: str, through_a_link: bool) -> None:
    """-o names its own INPUT only: 'grid-sample t.npy --grid g.npy -o g.npy' wrote the result over the
    grid (exit 0), as warp over its --theta file and affine-grid over --like's tensor, where a batch
    refuses any output landing on them."""
    data = rng.standard_normal((1, 3, 8, 12)).astype(np.float32)
    np.save(tmp_path / "t.npy", data)
    read = tmp_path / "read.npy"
    if option == "--grid":
        np.save(read, rotation_grid(8, 12).astype(np.float32))
    elif option == "--like":
        np.save(read, data)
    else:
        np.save(read, from_transforms(rotate=20.0)[None].astype(np.float32))
    before = read.read_bytes()
    output = read
    if through_a_link:
        output = tmp_path / "link.npy"
        output.symlink_to(read)
    parts = {"IN": str(tmp_path / "t.npy"), "READ": str(read), "OUT": str(output)}
    result = run(*[parts.get(part, part) for part in command])
    assert result.exit_code == 2 and result.stdout == ""
    assert f"Error: -o {output} would replace {read}, which {option} reads; write the result elsewhere" in result.stderr
    assert read.read_bytes() == before
    # elsewhere, the same run writes
    parts["OUT"] = str(tmp_path / "out.npy")
    assert run(*[parts.get(part, part) for part in command]).exit_code == 0


@pytest.fixture
def without_gcsfs() -> None:
    """gs:// with its filesystem not installed: fsspec is, gcsfs is not."""
    import importlib.util

    pytest.importorskip("fsspec")
    if importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed")


def test_o_to_a_store_not_installed_is_one_line_beside_a_grid(tmp_path: Path, rng: np.random.Generator,
                                                              without_gcsfs: None) -> None:
    # d72216b's check of -o against the --grid file ended in a traceback where -o's filesystem is missing
    np.save(tmp_path / "t.npy", rng.standard_normal((1, 3, 8, 12)).astype(np.float32))
    np.save(tmp_path / "g.npy", rotation_grid(8, 12).astype(np.float32))
    for command in (["crop-pad", tmp_path / "t.npy", "--shape", "1,3,4,4"],
                    ["grid-sample", tmp_path / "t.npy", "--grid", tmp_path / "g.npy"]):
        result = run(*command, "-o", "gs://bucket/a.npy")
        assert result.exit_code == 1
        assert result.stderr == ("Error: gs://bucket/a.npy: gs:// needs gcsfs, which is not installed "
                                 "(pip install gcsfs)\n")


@pytest.mark.parametrize("command", ["crop-pad", "grid-sample", "warp"])
def test_fill_tells_one_default_in_every_command(command: str) -> None:
    # grid-sample's and warp's said 0 where a bool input pads with False and text with "", as crop-pad's says
    from click.testing import CliRunner

    from geomcli.cli import cli

    shown = " ".join(CliRunner().invoke(cli, [command, "--help"]).stdout.split())
    fill = shown[shown.index("--fill TEXT"):]
    assert fill[fill.index("[default:"):].startswith("[default: the dtype's zero]")


@pytest.mark.parametrize("option", ["--align-corners", "--dtype"])
def test_affine_grid_and_warp_tell_one_option_alike(option: str) -> None:
    # affine-grid's said 'not their edges' and 'Grid dtype.' (its theta is cast too, as its record's
    # input_dtype shows), warp's 'not their outer edges' and "theta's and the grid's dtype."
    from geomcli.cli.group import commands

    helps = {name: next(param.help for param in commands()[name].params if option in param.opts)
             for name in ("affine-grid", "warp")}
    assert helps["affine-grid"] == helps["warp"]


def test_an_option_s_file_on_a_store_not_installed_is_one_line_beside_o(tmp_path: Path, rng: np.random.Generator,
                                                                         without_gcsfs: None) -> None:
    """check_spared named the file --like (--grid, --theta) reads to compare it with -o, and a
    filesystem not installed ended in a traceback: 'affine-grid --like gs://b/t.npy -o out.npy'
    raised 'GeomError: gs:// needs gcsfs' through click. The read now says so, one line, exit 1."""
    np.save(tmp_path / "t.npy", rng.standard_normal((1, 3, 8, 12)).astype(np.float32))
    for command, named in ((["affine-grid", "--like", "gs://bucket/t.npy"], "gs://bucket/t.npy"),
                           (["grid-sample", tmp_path / "t.npy", "--grid", "gs://bucket/g.npy"], "gs://bucket/g.npy"),
                           (["warp", tmp_path / "t.npy", "--theta", "gs://bucket/th.npy"], "gs://bucket/th.npy")):
        result = run(*command, "-o", tmp_path / "out.npy")
        assert result.exit_code == 1, result.stderr
        assert result.stderr == f"Error: {named}: gs:// needs gcsfs, which is not installed (pip install gcsfs)\n"
        assert not (tmp_path / "out.npy").exists()


# --volume: a z-stack of named axes warped (or sampled) in 3-D as one volume, Z its D
VOLUME_THETA = "0.9,-0.2,0.1,0.05,0.2,0.9,0,0.1,0,0.1,1.1,-0.1"


def volume_kernel(volume: np.ndarray, theta: str, size: tuple[int, ...] | None = None, mode: str = "linear",
                  padding_mode: str = "zeros") -> np.ndarray:
    """The kernels on an (N, C, D, H, W) array: GridSample of AffineGrid's 3-D grid, one matrix for every N."""
    matrix = np.float32(theta.split(",")).reshape(1, 3, 4)
    lengths = size or volume.shape[2:]
    grid = affine_grid(np.repeat(matrix, volume.shape[0], 0), (*volume.shape[:2], *lengths))
    return grid_sample(volume, grid, mode, padding_mode)


def ome_tiff(path: Path, data: np.ndarray, axes: str, **sizes: float) -> None:
    import tifffile

    tifffile.imwrite(path, data, ome=True, metadata={"axes": axes, **sizes})


@pytest.mark.parametrize(("axes", "shape", "to_ncdhw"), [
    ("ZYX", (6, 9, 7), lambda data: data[None, None]),
    ("TCZYX", (2, 3, 5, 9, 7), lambda data: data),
])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_warp_volume_of_an_ome_tiff_z_stack_is_the_kernel_on_n_c_d_h_w(
        tmp_path: Path, rng: np.random.Generator, axes: str, shape: tuple[int, ...], to_ncdhw: Any,
        mode: str) -> None:
    """A 12-number --theta on a ZYX OME-TIFF of 6 planes was refused ('2 matrices for 6 images'):
    with --volume the stack is warped as one volume, T a stack of volumes, C channels, the result
    in the file's own axes, equal to the kernel on the (N, C, D, H, W) array bit for bit."""
    import tifffile

    data = rng.random(shape).astype(np.float32)
    ome_tiff(tmp_path / "in.ome.tif", data, axes)
    result = run("warp", tmp_path / "in.ome.tif", "--volume", "--theta", VOLUME_THETA, "--mode", mode,
                 "-o", tmp_path / "out.ome.tif", "-q")
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(tmp_path / "out.ome.tif") as tiff:
        found, found_axes = tiff.asarray(), tiff.series[0].axes
    expected = volume_kernel(to_ncdhw(data), VOLUME_THETA, mode=mode).reshape(shape)
    assert found_axes == axes and found.dtype == np.float32
    assert np.array_equal(found, expected)
    assert not np.array_equal(found, data)  # (theta moves it)


def test_warp_volume_of_an_imagej_hyperstack_keeps_its_axes_and_scales_its_z_spacing(
        tmp_path: Path, rng: np.random.Generator) -> None:
    """An ImageJ TZCYX hyperstack: Z its D, T its N, C its channels; its whole depth on half the
    slices doubles the slice spacing, and x's resolution follows its pixels as a plane's does."""
    import tifffile

    data = rng.integers(0, 60000, (2, 6, 3, 9, 8), dtype=np.uint16)
    tifffile.imwrite(tmp_path / "ij.tif", data, imagej=True, resolution=(2.0, 2.0),
                     metadata={"axes": "TZCYX", "spacing": 2.5, "unit": "um"})
    theta = "2,0,0,0,0,1,0,0,0,0,1,0.1"
    result = run("warp", tmp_path / "ij.tif", "--volume", "--theta", theta, "--size", "3,9,4",
                 "-o", tmp_path / "out.tif", "-q")
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(tmp_path / "out.tif") as tiff:
        found, imagej = tiff.asarray(), tiff.imagej_metadata
        x_resolution = tiff.pages.first.tags["XResolution"].value
    expected = volume_kernel(data.transpose(0, 2, 1, 3, 4), theta, (3, 9, 4)).transpose(0, 2, 1, 3, 4)
    assert found.shape == (2, 3, 3, 9, 4) and np.array_equal(found, expected)
    assert imagej is not None and (imagej["frames"], imagej["slices"], imagej["channels"]) == (2, 3, 3)
    # z: the whole extent on 3 slices of 6, 2.5 um each; x: twice the extent on half the pixels
    assert imagej["spacing"] == pytest.approx(5.0) and x_resolution[0] / x_resolution[1] == pytest.approx(0.5)


def test_warp_volume_of_an_ome_tiff_scales_its_physical_z_size(tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    ome_tiff(tmp_path / "in.ome.tif", rng.random((8, 6, 6)).astype(np.float32), "ZYX",
             PhysicalSizeX=0.5, PhysicalSizeY=0.5, PhysicalSizeZ=2.0)
    # z: the whole extent on half the planes (4 um each), y and x kept
    result = run("warp", tmp_path / "in.ome.tif", "--volume", "--theta", "1,0,0,0,0,1,0,0,0,0,1,0",
                 "--size", "4,6,6", "-o", tmp_path / "out.ome.tif", "-q")
    assert result.exit_code == 0, result.stderr
    with tifffile.TiffFile(tmp_path / "out.ome.tif") as tiff:
        ome = tiff.ome_metadata or ""
    assert 'PhysicalSizeX="0.5"' in ome and 'PhysicalSizeY="0.5"' in ome and 'PhysicalSizeZ="4.0"' in ome
    # a rotation leaves no size per axis along any of z, y, x: dropped with one warning, as a plane's
    turned = run("warp", tmp_path / "in.ome.tif", "--volume", "--theta", VOLUME_THETA, "-o", tmp_path / "r.ome.tif")
    assert turned.exit_code == 0, turned.stderr
    assert ("OME physical sizes of warp's output (its pixels have no size per axis: a grid, a rotation or shear) "
            "cannot be carried; dropped") in turned.stderr
    with tifffile.TiffFile(tmp_path / "r.ome.tif") as tiff:
        assert "PhysicalSize" not in (tiff.ome_metadata or "")


def test_warp_volume_of_an_ome_zarr_is_the_kernel_chunk_by_chunk(tmp_path: Path, rng: np.random.Generator) -> None:
    """An OME-Zarr zyx of chunks smaller than its volume: each volume whole in one task, the result
    equal to the kernel bit for bit; its z scale follows theta's z factor."""
    zarr = pytest.importorskip("zarr")
    data = rng.random((7, 10, 9)).astype(np.float32)
    axes = [{"name": name, "type": "space", "unit": "micrometer"} for name in "zyx"]
    scale = [{"type": "scale", "scale": [2.0, 0.5, 0.5]}]
    group = zarr.open_group(str(tmp_path / "in.zarr"), mode="w", attributes={"ome": {"version": "0.5", "multiscales": [
        {"axes": axes, "datasets": [{"path": "0", "coordinateTransformations": scale}]}]}})
    group.create_array("0", shape=data.shape, dtype=data.dtype, chunks=(3, 4, 4))[...] = data
    result = run("warp", tmp_path / "in.zarr", "--volume", "--theta", VOLUME_THETA, "-o", tmp_path / "out.zarr", "-q")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(zarr.open_group(str(tmp_path / "out.zarr"))["0"][...],
                          volume_kernel(data[None, None], VOLUME_THETA)[0, 0])
    theta = "1,0,0,0,0,1,0,0,0,0,0.5,0"
    halved = run("warp", tmp_path / "in.zarr", "--volume", "--theta", theta, "-o", tmp_path / "half.zarr", "-q")
    assert halved.exit_code == 0, halved.stderr
    out = zarr.open_group(str(tmp_path / "half.zarr"))
    assert np.array_equal(out["0"][...], volume_kernel(data[None, None], theta)[0, 0])
    transforms = out.attrs["ome"]["multiscales"][0]["datasets"][0]["coordinateTransformations"]
    assert transforms[0] == {"type": "scale", "scale": [1.0, 0.5, 0.5]}
    # a volume is one task's: one past --max-pixels is refused, nothing written
    over = run("warp", tmp_path / "in.zarr", "--volume", "--theta", VOLUME_THETA, "-o", tmp_path / "big.zarr",
               "--max-pixels", "600")
    assert over.exit_code == 2 and over.stderr == (
        f"Error: {tmp_path / 'in.zarr'}: a task's whole planes (1, 1, 7, 10, 9): 630 elements exceed the limit of "
        "600; raise it with --max-pixels or GEOMCLI_MAX_PIXELS\n")
    assert not (tmp_path / "big.zarr").exists()


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_warp_volume_by_the_identity_gives_back_the_input(tmp_path: Path, rng: np.random.Generator,
                                                          mode: str) -> None:
    import tifffile

    data = rng.integers(0, 256, (2, 5, 3, 6, 7), dtype=np.uint8)
    ome_tiff(tmp_path / "in.ome.tif", data, "TZCYX")
    np.save(tmp_path / "identity.npy", np.eye(3, 4, dtype=np.float32))
    result = run("warp", tmp_path / "in.ome.tif", "--volume", "--theta", tmp_path / "identity.npy", "--mode", mode,
                 "-o", tmp_path / "out.ome.tif", "-q")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(tifffile.imread(tmp_path / "out.ome.tif"), data)


@pytest.mark.parametrize(("args", "message"), [
    (["--rotate", "10"], "--volume warps in 3-D, by 3x4 matrices (12 numbers each): --rotate, --scale, --shear and "
                         "--translate make 2-D matrices; give --theta"),
    (["--theta", "1,0,0,0,1,0"], "--volume warps in 3-D, by 3x4 matrices (12 numbers each): --theta gives 6 numbers"),
    (["--theta", "theta23.npy"], "--volume warps in 3-D, by 3x4 matrices (12 numbers each): {tmp}/theta23.npy holds "
                                 "2-D matrices (1, 2, 3)"),
])
def test_warp_volume_without_3d_matrices_is_a_usage_error(tmp_path: Path, args: list[str], message: str) -> None:
    ome_tiff(tmp_path / "in.ome.tif", np.zeros((4, 5, 6), np.float32), "ZYX")
    np.save(tmp_path / "theta23.npy", np.float32([[1, 0, 0], [0, 1, 0]]))
    args = [str(tmp_path / arg) if arg.endswith(".npy") else arg for arg in args]
    result = run("warp", tmp_path / "in.ome.tif", "--volume", *args, "-o", tmp_path / "o.ome.tif")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == f"Error: {message.format(tmp=tmp_path)}"
    assert not (tmp_path / "o.ome.tif").exists()


@pytest.mark.parametrize("command", ["warp", "grid-sample"])
def test_volume_of_a_file_without_a_z_axis_is_one_line(tmp_path: Path, photo: tuple[Path, np.ndarray],
                                                       command: str) -> None:
    path, _ = photo
    np.save(tmp_path / "theta.npy", np.eye(3, 4, dtype=np.float32))
    np.save(tmp_path / "grid.npy", np.zeros((1, 2, 3, 4, 3), np.float32))
    option = ["--theta", tmp_path / "theta.npy"] if command == "warp" else ["--grid", tmp_path / "grid.npy"]
    result = run(command, path, "--volume", *option, "-o", tmp_path / "o.png")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (f"Error: {path}: --volume takes a z-stack (a TIFF's or OME-Zarr's Z axis) or a rank-5 "
                             "tensor of no named axes; found axes HWC (24, 32, 3), no Z\n")
    assert not (tmp_path / "o.png").exists()


def test_a_3d_theta_file_on_a_z_stack_without_volume_names_it(tmp_path: Path) -> None:
    """Not taken for --volume (typed, the same 12 numbers are two 2-D matrices): the refusal says
    what would take them."""
    ome_tiff(tmp_path / "in.ome.tif", np.zeros((4, 5, 6), np.float32), "ZYX")
    np.save(tmp_path / "theta.npy", np.eye(3, 4, dtype=np.float32))
    result = run("warp", tmp_path / "in.ome.tif", "--theta", tmp_path / "theta.npy", "-o", tmp_path / "o.ome.tif")
    assert result.exit_code == 2 and result.stderr == (
        f"Error: {tmp_path / 'in.ome.tif'}: theta from {tmp_path / 'theta.npy'} holds 3-D matrices (1, 3, 4); a 2-D "
        "warp takes (N, 2, 3) or (2, 3); with --volume they are 3-D matrices, for the ZYX stack as one volume\n")
    assert not (tmp_path / "o.ome.tif").exists()


@pytest.mark.parametrize(("axes", "shape", "imagej"), [("ZYX", (8, 5, 6), False), ("ZCYX", (6, 2, 5, 6), True)])
def test_twelve_numbers_refused_for_a_z_stack_s_planes_name_volume(tmp_path: Path, axes: str,
                                                                   shape: tuple[int, ...], imagej: bool) -> None:
    """'2 matrices for 8 images' said nothing of the 3-D warp those 12 numbers were meant for; an
    ImageJ ZCYX (read as NCHW, Z as N) had no word of 12 numbers read as 2-D ones either."""
    import tifffile

    if imagej:
        tifffile.imwrite(tmp_path / "in.tif", np.zeros(shape, np.uint8), imagej=True, metadata={"axes": axes})
    else:
        ome_tiff(tmp_path / "in.tif", np.zeros(shape, np.float32), axes)
    result = run("warp", tmp_path / "in.tif", "--theta", VOLUME_THETA, "-o", tmp_path / "o.tif")
    assert result.exit_code == 2 and result.stderr == (
        f"Error: {tmp_path / 'in.tif'}: theta holds 2 matrices (2-D: 6 numbers each) for {shape[0]} images; give "
        f"one, or one per image; with --volume they are 3-D matrices, for the {axes} stack as one volume\n")
    assert not (tmp_path / "o.tif").exists()
    if imagej:  # of two planes: warped plane by plane, with the warning a ZYX stack's gets
        tifffile.imwrite(tmp_path / "two.tif", np.zeros((2, 2, 5, 6), np.uint8), imagej=True, metadata={"axes": axes})
        two = run("warp", tmp_path / "two.tif", "--theta", VOLUME_THETA, "-o", tmp_path / "o.tif")
        assert two.exit_code == 0 and ("--theta's 12 numbers are read as 2 2-D matrices (6 numbers each): a ZCYX "
                                       "stack is warped plane by plane, not in 3-D (give --volume to warp it as one "
                                       "volume)") in two.stderr


def test_warp_volume_dry_run_and_json_show_the_volume_s_shapes(tmp_path: Path, rng: np.random.Generator) -> None:
    ome_tiff(tmp_path / "a.ome.tif", rng.random((2, 3, 8, 6, 5)).astype(np.float32), "TCZYX")
    (tmp_path / "out").mkdir()
    dry = run("warp", tmp_path / "a.ome.tif", "--volume", "--theta", VOLUME_THETA, "--size", "4,3,2",
              "--out-dir", tmp_path / "out", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert f"{tmp_path / 'a.ome.tif'} → {tmp_path / 'out' / 'a.ome.tif'}: 2×3×4×3×2 float32" in dry.stdout + dry.stderr
    assert not (tmp_path / "out" / "a.ome.tif").exists()
    done = run("warp", tmp_path / "a.ome.tif", "--volume", "--theta", VOLUME_THETA, "--size", "4,3,2",
               "-o", tmp_path / "b.ome.tif", "--json")
    assert done.exit_code == 0, done.stderr
    record = json.loads(done.stdout)
    assert (record["input_shape"], record["output_shape"]) == ([2, 3, 8, 6, 5], [2, 3, 4, 3, 2])
    assert record["parameters"]["volume"] is True and record["parameters"]["size"] == [4, 3, 2]
    size = run("warp", tmp_path / "a.ome.tif", "--volume", "--theta", VOLUME_THETA, "--size", "3,2",
               "-o", tmp_path / "c.ome.tif")
    assert size.exit_code == 2 and size.stderr.endswith("--size gives 2 lengths; a 3-D warp takes D,H,W\n")


def test_chain_s_warp_step_takes_volume(tmp_path: Path, rng: np.random.Generator) -> None:
    import tifffile

    ome_tiff(tmp_path / "in.ome.tif", rng.random((6, 10, 9)).astype(np.float32), "ZYX")
    chained = run("chain", "-q", "-i", tmp_path / "in.ome.tif", "-o", tmp_path / "chain.ome.tif",
                  "crop-pad", "--shape", "8,7", "warp", "--volume", "--theta", VOLUME_THETA)
    assert chained.exit_code == 0, chained.stderr
    assert run("crop-pad", tmp_path / "in.ome.tif", "--shape", "8,7", "-o", tmp_path / "c.ome.tif", "-q").exit_code == 0
    cropped = tifffile.imread(tmp_path / "c.ome.tif")
    assert np.array_equal(tifffile.imread(tmp_path / "chain.ome.tif"),
                          volume_kernel(cropped[None, None], VOLUME_THETA)[0, 0])


def test_grid_sample_volume_of_a_z_stack_is_the_kernel_on_n_c_d_h_w(tmp_path: Path,
                                                                     rng: np.random.Generator) -> None:
    import tifffile

    data = rng.random((2, 5, 3, 9, 7)).astype(np.float32)  # T, Z, C, Y, X
    ome_tiff(tmp_path / "in.ome.tif", data, "TZCYX")
    grid = rng.uniform(-1.1, 1.1, (2, 4, 6, 5, 3)).astype(np.float32)
    np.save(tmp_path / "grid.npy", grid)
    result = run("grid-sample", tmp_path / "in.ome.tif", "--volume", "--grid", tmp_path / "grid.npy",
                 "-o", tmp_path / "out.ome.tif", "-q")
    assert result.exit_code == 0, result.stderr
    expected = grid_sample(data.transpose(0, 2, 1, 3, 4), grid, "linear", "zeros").transpose(0, 2, 1, 3, 4)
    assert np.array_equal(tifffile.imread(tmp_path / "out.ome.tif"), expected)


def test_volume_of_a_tiff_of_one_plane_says_its_z_is_not_kept(tmp_path: Path) -> None:
    ome_tiff(tmp_path / "in.ome.tif", np.ones((2, 1, 1, 5, 6), np.float32), "TCZYX")  # read as TYX
    result = run("warp", tmp_path / "in.ome.tif", "--volume", "--theta", VOLUME_THETA, "-o", tmp_path / "o.ome.tif")
    assert result.exit_code == 2 and result.stderr == (
        f"Error: {tmp_path / 'in.ome.tif'}: --volume takes a z-stack (a TIFF's or OME-Zarr's Z axis) or a rank-5 "
        "tensor of no named axes; found axes TYX (2, 5, 6), no Z (a TIFF's Z of one plane is not kept as an axis)\n")
    assert not (tmp_path / "o.ome.tif").exists()


@pytest.mark.parametrize("axes", ["TZCYX", "TCZYX", "ZYX"])
def test_warp_volume_through_a_memory_mapped_output_is_what_ram_gives(
        tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch, axes: str) -> None:
    """A big output is written through a memory map where the kernel's NCDHW view of it is a view
    (T alone before Z, C: TZCYX's, ZYX's; TCZYX's too, its N being T alone): the same pixels as in RAM."""
    import tifffile

    from geomcli.io import _mapped

    shape = {"TZCYX": (2, 5, 3, 7, 6), "TCZYX": (2, 3, 5, 7, 6), "ZYX": (5, 7, 6)}[axes]
    ome_tiff(tmp_path / "in.ome.tif", rng.random(shape).astype(np.float32), axes)
    args = ["--volume", "--theta", VOLUME_THETA, "--size", "4,6,5", "-q"]
    assert run("warp", tmp_path / "in.ome.tif", *args, "-o", tmp_path / "ram.ome.tif").exit_code == 0
    mapped: list[str] = []
    original = _mapped._map_tiff

    def spy(tmp: str, *rest: Any) -> np.ndarray:
        mapped.append(tmp)
        return original(tmp, *rest)  # type: ignore[no-any-return]

    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    monkeypatch.setattr(_mapped, "_map_tiff", spy)
    result = run("warp", tmp_path / "in.ome.tif", *args, "-o", tmp_path / "map.ome.tif")
    assert result.exit_code == 0, result.stderr
    assert len(mapped) == 1
    with tifffile.TiffFile(tmp_path / "map.ome.tif") as tiff:
        found, found_axes = tiff.asarray(), tiff.series[0].axes
    assert found_axes == axes and np.array_equal(found, tifffile.imread(tmp_path / "ram.ome.tif"))


@pytest.mark.parametrize(("axes", "imagej", "to_ncdhw", "back"), [
    ("ZCYX", True, lambda data: data.transpose(1, 0, 2, 3)[None], lambda data: data[0].transpose(1, 0, 2, 3)),
    ("ZYXS", False, lambda data: data.transpose(3, 0, 1, 2)[None], lambda data: data[0].transpose(1, 2, 3, 0)),
])
def test_warp_volume_of_a_z_stack_read_as_nchw_finds_its_z(tmp_path: Path, rng: np.random.Generator, axes: str,
                                                           imagej: bool, to_ncdhw: Any, back: Any) -> None:
    """A z-stack of four axes (ImageJ's ZCYX of two channels, an RGB ZYXS) is read as NCHW or NHWC,
    'Z as N': --volume refused it as having no Z. Its own axes now give the volume's depth."""
    import tifffile

    shape = (6, 2, 9, 8) if axes == "ZCYX" else (6, 9, 8, 3)
    data = rng.integers(0, 256, shape, dtype=np.uint8)
    if imagej:
        tifffile.imwrite(tmp_path / "in.tif", data, imagej=True, metadata={"axes": axes})
    else:
        tifffile.imwrite(tmp_path / "in.tif", data, photometric="rgb", metadata={"axes": axes})
    for args in (["-o", tmp_path / "out.tif", "-q"], ["--out-dir", tmp_path, "--name", "dry.tif", "--dry-run"]):
        result = run("warp", tmp_path / "in.tif", "--volume", "--theta", VOLUME_THETA, "--size", "4,9,8", *args)
        assert result.exit_code == 0, result.stderr
    found = tifffile.imread(tmp_path / "out.tif")
    assert np.array_equal(found, back(volume_kernel(to_ncdhw(data), VOLUME_THETA, (4, 9, 8))))


@pytest.mark.parametrize(("axes", "shape", "grid_shape"), [
    ("ZYX", (8, 9, 10), (1, 8, 9, 10, 3)),
    ("TZCYX", (2, 5, 3, 9, 7), (2, 5, 9, 7, 3)),
])
def test_affine_grid_volume_is_the_grid_warp_volume_samples_at(tmp_path: Path, rng: np.random.Generator, axes: str,
                                                               shape: tuple[int, ...],
                                                               grid_shape: tuple[int, ...]) -> None:
    """'affine-grid --like z.ome.tif --theta <12 numbers>' made one 2-D grid per plane (Z, H, W, 2),
    and a 3-D grid for 'grid-sample --volume' needed --size N,C,D,H,W typed: with --volume it is the
    z-stack's (T, D, H, W, 3), and grid-sample --volume at it is warp --volume bit for bit."""
    import tifffile

    data = rng.random(shape).astype(np.float32)
    ome_tiff(tmp_path / "in.ome.tif", data, axes)
    made = run("affine-grid", "--like", tmp_path / "in.ome.tif", "--volume", "--theta", VOLUME_THETA,
               "-o", tmp_path / "grid.npy", "--json")
    assert made.exit_code == 0 and json.loads(made.stdout)["parameters"]["volume"] is True, made.output
    assert np.load(tmp_path / "grid.npy").shape == grid_shape
    sampled = run("grid-sample", tmp_path / "in.ome.tif", "--volume", "--grid", tmp_path / "grid.npy",
                  "-o", tmp_path / "sampled.ome.tif", "-q")
    warped = run("warp", tmp_path / "in.ome.tif", "--volume", "--theta", VOLUME_THETA,
                 "-o", tmp_path / "warped.ome.tif", "-q")
    assert (sampled.exit_code, warped.exit_code) == (0, 0), sampled.stderr + warped.stderr
    found, expected = tifffile.imread(tmp_path / "sampled.ome.tif"), tifffile.imread(tmp_path / "warped.ome.tif")
    assert found.shape == shape and np.array_equal(found, expected)
    assert not np.array_equal(found, data)  # (theta moves it)


def test_affine_grid_volume_of_an_imagej_zcyx_finds_its_z(tmp_path: Path) -> None:
    """An ImageJ ZCYX reads as NCHW, its Z as N: --volume finds Z from its TIFF axes, as warp does."""
    import tifffile

    tifffile.imwrite(tmp_path / "zc.tif", np.zeros((6, 2, 9, 8), np.uint8), imagej=True, metadata={"axes": "ZCYX"})
    made = run("affine-grid", "--like", tmp_path / "zc.tif", "--volume", "--theta", VOLUME_THETA,
               "-o", tmp_path / "grid.npy", "-q")
    assert made.exit_code == 0, made.stderr
    assert np.load(tmp_path / "grid.npy").shape == (1, 6, 9, 8, 3)


@pytest.mark.parametrize(("args", "message"), [
    (["--like", "{plane}"], "{plane}: --volume takes a z-stack (a TIFF's or OME-Zarr's Z axis) or a rank-5 tensor "
                            "of no named axes; found axes HW (5, 6), no Z"),
    (["--like", "{stack}", "--rotate", "10"], "--volume makes 3-D grids, from 3x4 matrices (12 numbers each): "
                                              "--rotate, --scale, --shear and --translate make 2-D matrices; give "
                                              "--theta"),
    (["--like", "{stack}", "--theta", "1,0,0,0,1,0"], "Invalid value for '--theta': a 3-D grid takes 12 numbers "
                                                      "per matrix: 12 for one matrix; found 6"),
    (["--size", "1,1,4,5,6", "--theta", VOLUME_THETA], "--volume is for --like's file"),
])
def test_affine_grid_volume_refusals_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    ome_tiff(tmp_path / "stack.ome.tif", np.zeros((4, 5, 6), np.float32), "ZYX")
    ome_tiff(tmp_path / "plane.ome.tif", np.zeros((5, 6), np.float32), "YX")
    names = {"stack": tmp_path / "stack.ome.tif", "plane": tmp_path / "plane.ome.tif"}
    result = run("affine-grid", "--volume", *[arg.format(**names) for arg in args], "-o", tmp_path / "g.npy")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == f"Error: {message.format(**names)}"
    assert not (tmp_path / "g.npy").exists()


@pytest.mark.parametrize("command", [
    ["grid-sample", "--grid", "{bad}"],
    ["warp", "--theta", "{bad}"],
    ["chain", "resize", "--sizes", "4,4", "grid-sample", "--grid", "{bad}"],
])
@pytest.mark.parametrize("batch", [False, True])
def test_a_grid_or_theta_file_that_cannot_be_read_gives_every_input_its_json_record(
        command: list[str], batch: bool, tmp_path: Path) -> None:
    """An int32 grid or theta (refused) gave --json nothing at all, exit 1, where affine-grid gives
    an error record: a script reading the JSON could not tell why. Each input now has its error
    record, naming its planned output (a batch's then the summary), and the one Error: line."""
    shots = tmp_path / "shots"
    shots.mkdir()
    for name in ("a.png", "b.png"):
        Image.new("RGB", (8, 6)).save(shots / name)
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((1, 4, 4, 2) if "--grid" in command else (1, 2, 3), np.int32))
    source = str(shots / ("*.png" if batch else "a.png"))
    where = ["--out-dir", str(tmp_path / "out")] if batch else ["-o", str(tmp_path / "a.png")]
    given = [str(bad) if arg == "{bad}" else arg for arg in command[1:]]
    if command[0] == "chain":  # (-i, -o and --json before the steps)
        result = run("chain", "-i", source, *where, "--json", *given)
    else:
        result = run(command[0], source, *where, "--json", *given)
    why = f"{bad}: {'a grid' if '--grid' in command else 'theta'} must hold floats, found int32"
    assert result.exit_code == 1 and result.stderr == f"Error: {why}\n"
    records = [json.loads(line) for line in result.stdout.splitlines()]
    expected = [(str(shots / name), str(tmp_path / ("out" if batch else "") / name)) for name in
                (("a.png", "b.png") if batch else ("a.png",))]
    per_file = records[:-1] if batch else records
    assert [(record["input"], record["output"]) for record in per_file] == expected
    assert all((record["command"], record["status"], record["error"]) == (command[0], "error", why)
               for record in per_file)
    if batch:
        assert {key: records[-1][key] for key in ("status", "ok", "failed", "total")} == {
            "status": "summary", "ok": 0, "failed": 2, "total": 2}
    assert not (tmp_path / "out").exists() and not (tmp_path / "a.png").exists()
