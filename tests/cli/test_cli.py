"""The command line, through CliRunner: exit codes, stdout and stderr apart, and results equal
to the kernels' on the same arrays."""

from __future__ import annotations

import io as bytes_io
import json
import os
import pty
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import FileFactory, fifo_feeding, hooked, run, wait_until_reading_stdin
from PIL import Image

import geomcli.ops.affine_grid as grid_ops
import geomcli.ops.center_crop_pad as crop_ops
import geomcli.ops.space_depth as space_depth_ops
from geomcli import io
from geomcli.cli import cli
from geomcli.errors import GeomError


@pytest.fixture
def tensor(tmp_path: Path, rng: np.random.Generator) -> Path:
    path = tmp_path / "tensor.npy"
    np.save(path, rng.standard_normal((2, 3, 6, 8)).astype(np.float32))
    return path


@pytest.fixture
def photo(tmp_path: Path, rng: np.random.Generator) -> Path:
    path = tmp_path / "photo.png"
    Image.fromarray(rng.integers(0, 256, (9, 12, 3), dtype=np.uint8)).save(path)
    return path


def read_png(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image)


# --- the group ----------------------------------------------------------------------


def test_version_and_help() -> None:
    from importlib.metadata import version as metadata_version

    version = run("--version")
    assert version.exit_code == 0 and version.stdout == f"geomcli {metadata_version('geomcli')}\n"
    help_text = run("-h").stdout
    for command in ("crop-pad", "affine-grid", "space-to-depth", "depth-to-space", "info"):
        assert command in help_text
    assert all(len(line) <= 80 for line in help_text.splitlines())


@pytest.mark.parametrize("command", ["crop-pad", "affine-grid", "space-to-depth", "depth-to-space", "info"])
def test_every_subcommand_help_names_an_example(command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0
    assert "Example: geomcli " in result.stdout and "samples/" in result.stdout


@pytest.mark.parametrize("command", ["crop-pad", "resize"])
def test_layout_help_says_a_tensors_sizes_name_every_axis(command: str) -> None:
    # "rank 4 defaults to NCHW" alone read as if --sizes H,W worked on a rank-4 .npy
    result = run(command, "--help")
    assert result.exit_code == 0
    assert ("On a tensor, --shape, --sizes and --scales name every axis unless --axes or --layout picks some."
            in " ".join(result.stdout.split()))


def test_unknown_command_is_a_usage_error() -> None:
    result = run("rotate")
    assert result.exit_code == 2 and "No such command" in result.stderr


# --- crop-pad -----------------------------------------------------------------------


def test_crop_pad_tensor_equals_kernel(tensor: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.npy"
    result = run("crop-pad", tensor, "-o", out, "--shape", "1,5,4,11")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert "crop-pad" in result.stderr and "1×5×4×11 float32" in result.stderr
    assert np.array_equal(np.load(out), crop_ops.center_crop_pad(np.load(tensor), [1, 5, 4, 11]))


def test_crop_pad_tensor_axes_negative(tensor: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.npy"
    assert run("crop-pad", tensor, "-o", out, "--shape", "3,9", "--axes", "-2,-1").exit_code == 0
    assert np.array_equal(np.load(out), crop_ops.center_crop_pad(np.load(tensor), [3, 9], [-2, -1]))


def test_crop_pad_image_shape_hw_keeps_channels(photo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.png"
    result = run("crop-pad", photo, "-o", out, "--shape", "6,15")
    assert result.exit_code == 0, result.stderr
    expected = crop_ops.center_crop_pad(read_png(photo), [6, 15], [0, 1])
    assert np.array_equal(read_png(out), expected)


def test_crop_pad_image_fill(photo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.png"
    assert run("crop-pad", photo, "-o", out, "--shape", "11,12", "--fill", "255").exit_code == 0
    image = read_png(out)
    assert (image[0] == 255).all() and (image[-1] == 255).all()
    assert np.array_equal(image[1:-1], read_png(photo))


@pytest.mark.parametrize(("dtype", "fill", "recorded", "shown"), [
    ("float32", "nan", "NaN", "nan"), ("float32", "-inf", "-Infinity", "-inf"),
    ("float32", "0.1", 0.10000000149011612, "0.1"), ("float16", "0.1", 0.0999755859375, "0.1"),
    ("int16", "2.0", 2, "2"), ("bool", "1", True, "True"),
])
@pytest.mark.parametrize("suffix", [".npy", ".zarr"])
def test_a_fill_is_recorded_as_the_value_its_dtype_pads_with(tmp_path: Path, dtype: str, fill: str,
                                                             recorded: Any, shown: str, suffix: str) -> None:
    """The record and the summary line hold the value used, not the text given (a try-out's record
    read "fill": "nan"); a NaN or Inf as strict JSON writes any (the string "NaN", "-Infinity")."""
    source, out = tmp_path / "a.npy", tmp_path / f"out{suffix}"
    np.save(source, np.zeros((2, 2), dtype))
    result = run("crop-pad", source, "-o", out, "--shape", "3,3", "--fill", fill, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["parameters"] == {"shape": [3, 3], "axes": None, "fill": recorded}
    line = run("crop-pad", source, "-o", out, "--shape", "3,3", "--fill", fill).stderr.splitlines()[0]
    assert line.split(" range ")[1].split(" in ")[0].endswith(f" shape=[3, 3] axes=None fill={shown}")


def test_a_fill_a_file_refuses_is_recorded_as_given(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.zeros((2, 2), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((2, 2), np.int16))
    result = run("crop-pad", tmp_path / "a.npy", tmp_path / "b.npy", "--out-dir", tmp_path / "out", "--shape", "3,3",
                 "--fill", "nan", "--json", "--dry-run")
    assert result.exit_code == 2
    records = [json.loads(line) for line in result.stdout.splitlines()[:2]]
    assert [record["parameters"]["fill"] for record in records] == ["NaN", "nan"]


@pytest.mark.parametrize("fill, padded", [(None, ""), ("ab", "ab")])
def test_crop_pad_string_tensor_pads_with_the_empty_string_or_fill(tmp_path: Path, fill: str | None,
                                                                   padded: str) -> None:
    source, out = tmp_path / "words.npy", tmp_path / "out.npy"
    np.save(source, np.array([["a", "bc"], ["de", "f"]], dtype="<U2"))
    result = run("crop-pad", source, "-o", out, "--shape", "2,3", *(["--fill", fill] if fill else []), "--json")
    assert result.exit_code == 0 and result.stderr == ""
    record = json.loads(result.stdout)
    assert record["parameters"] == {"shape": [2, 3], "axes": None, **({"fill": fill} if fill else {})}
    assert np.load(out).tolist() == [["a", "bc", padded], ["de", "f", padded]]


def test_crop_pad_without_fill_takes_the_kernels_zero_fill(photo: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    real = crop_ops.center_crop_pad

    def spy(*args: object, fill: object = None, **kwargs: object) -> np.ndarray:
        seen.append(fill)
        return real(*args, fill=fill, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(crop_ops, "center_crop_pad", spy)
    # --axes: the array path (a plain image cropped on its own H and W stays a Pillow image)
    result = run("crop-pad", photo, "-o", tmp_path / "out.png", "--shape", "12,12", "--axes", "0,1")
    assert result.exit_code == 0 and result.stdout == "" and "fill=" not in result.stderr
    assert seen == [None]
    padded = read_png(tmp_path / "out.png")
    assert (padded[:1] == 0).all() and (padded[-2:] == 0).all()


def test_crop_pad_fill_that_does_not_fit(photo: Path, tmp_path: Path) -> None:
    result = run("crop-pad", photo, "-o", tmp_path / "out.png", "--shape", "20,20", "--fill", "300")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {photo}: center_crop_pad: fill value 300 does not fit dtype uint8")
    assert not (tmp_path / "out.png").exists()


def test_crop_pad_wrong_number_of_values_names_the_file(tensor: Path, tmp_path: Path) -> None:
    result = run("crop-pad", tensor, "-o", tmp_path / "out.npy", "--shape", "4,4")
    assert result.exit_code == 2
    # what a tensor of no layout takes, as an image's message says what an image takes (a try-out
    # read the kernel's 'shape has 2 values but the input's rank is 4' as a bug of --layout's default)
    assert result.stderr == (
        f"Error: {tensor}: --shape has 2 values for a tensor of shape (2, 3, 6, 8), which names no layout: "
        "give 4 (one per axis), or pick the axes with --axes (0,1: the first two; -2,-1: the last two) "
        "or --layout (NCHW, NHWC)\n"
    )


@pytest.mark.parametrize("layout, axes", [("HWC", (0, 1)), ("CHW", (1, 2)), ("NHWC", (1, 2)), ("NCHW", (2, 3))])
def test_crop_pad_two_values_are_h_and_w_of_the_layout(tmp_path: Path, rng: np.random.Generator, layout: str,
                                                       axes: tuple[int, int]) -> None:
    data = rng.integers(0, 99, (2, 5, 6, 3)[: len(layout)] if "N" in layout else (5, 6, 3)).astype(np.int16)
    source, out = tmp_path / "in.npy", tmp_path / "out.npy"
    np.save(source, data)
    result = run("crop-pad", source, "-o", out, "--shape", "4,8", "--layout", layout, "--json")
    assert result.exit_code == 0 and result.stderr == ""
    expected = crop_ops.center_crop_pad(data, [4, 8], list(axes))
    assert json.loads(result.stdout)["output_shape"] == list(expected.shape)
    assert np.array_equal(np.load(out), expected)
    dry = run("crop-pad", source, "--out-dir", tmp_path / "dry", "--shape", "4,8", "--layout", layout, "--dry-run")
    assert dry.exit_code == 0
    assert dry.stdout == f"{source} → {tmp_path / 'dry' / 'in.npy'}: {'×'.join(map(str, expected.shape))} int16\n"


def test_crop_pad_layout_of_another_rank(tmp_path: Path) -> None:
    source = tmp_path / "in.npy"
    np.save(source, np.zeros((5, 6, 3), np.uint8))
    result = run("crop-pad", source, "-o", tmp_path / "out.npy", "--shape", "4,4", "--layout", "NCHW")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"Error: {source}: layout NCHW needs rank 4, found shape (5, 6, 3)\n"


def test_bad_shape_text_is_a_usage_error(tensor: Path, tmp_path: Path) -> None:
    result = run("crop-pad", tensor, "-o", tmp_path / "out.npy", "--shape", "4,a")
    assert result.exit_code == 2 and "'4,a' is not a comma-separated list of integers" in result.stderr


def test_unknown_output_extension_is_a_usage_error(tensor: Path, tmp_path: Path) -> None:
    result = run("crop-pad", tensor, "-o", tmp_path / "out.xyz", "--shape", "1,1,1,1")
    assert result.exit_code == 2 and "out.xyz" in result.stderr
    assert not (tmp_path / "out.xyz").exists()


@pytest.mark.parametrize("name, fmt", [("out.png", "npy"), ("out.tif", "png"), ("out.NPY", "tiff")])
def test_format_contradicting_the_extension_is_a_usage_error(tensor: Path, tmp_path: Path, name: str,
                                                             fmt: str) -> None:
    out = tmp_path / name
    result = run("crop-pad", tensor, "-o", out, "--shape", "1,1,2,2", "--format", fmt)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.endswith(f"Error: Invalid value for '-o' / '--output': --format {fmt} contradicts the "
                                  f"extension of {out} ({io.format_for_path(name)}); drop --format or change the "
                                  "extension\n")
    assert list(tmp_path.iterdir()) == [tensor]


@pytest.mark.parametrize("name, fmt", [("out", "npy"), ("out.bin", "npy"), ("out.jpg", "jpeg"), ("o.tif", "tiff")])
def test_format_for_a_name_without_a_known_extension_or_agreeing(photo: Path, tmp_path: Path, name: str,
                                                                 fmt: str) -> None:
    result = run("crop-pad", photo, "-o", tmp_path / name, "--shape", "2,2", "--format", fmt, "-q")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    assert io.read_array(str(tmp_path / name), format=fmt).data.shape == (2, 2, 3)


@pytest.mark.parametrize("alias, fmt", [("jpg", "jpeg"), ("TIF", "tiff")])
def test_format_takes_the_extensions_spelling_too(photo: Path, tmp_path: Path, alias: str, fmt: str) -> None:
    """'--format jpg' was 'invalid choice' (exit 2), where .jpg names a JPEG and the library's format took it."""
    written = run("crop-pad", photo, "-o", tmp_path / "a.bin", "--shape", "2,2", "--format", alias, "-q")
    assert (written.exit_code, written.stderr) == (0, "")
    assert run("crop-pad", photo, "-o", tmp_path / "b.bin", "--shape", "2,2", "--format", fmt, "-q").exit_code == 0
    assert (tmp_path / "a.bin").read_bytes() == (tmp_path / "b.bin").read_bytes()
    record = json.loads(run("crop-pad", photo, "-o", tmp_path / "c.bin", "--shape", "2,2", "--format", alias,
                            "--json").stdout)
    assert record["status"] == "ok" and io.format_for_path(str(tmp_path / "c.bin"), alias) == fmt


def test_huge_shape_is_refused_before_allocating(photo: Path, tmp_path: Path) -> None:
    result = run("crop-pad", photo, "-o", tmp_path / "out.npy", "--shape", "100000000,100000000")
    assert result.exit_code == 2
    assert "exceed the limit of 2147483648; raise it with --max-pixels or GEOMCLI_MAX_PIXELS" in result.stderr


def test_max_pixels_from_the_environment(photo: Path, tmp_path: Path) -> None:
    result = CliRunner(env={"GEOMCLI_MAX_PIXELS": "100"}).invoke(
        cli, ["crop-pad", str(photo), "-o", str(tmp_path / "o.png"), "--shape", "5,5"])
    assert result.exit_code == 1 and "limit of 100" in result.stderr


def test_float_to_png_is_refused_naming_the_formats_that_hold_it(tensor: Path, tmp_path: Path) -> None:
    result = run("crop-pad", tensor, "-o", tmp_path / "out.png", "--shape", "1,3,4,4", "--layout", "NCHW")
    assert result.exit_code == 2  # from the header, as in a batch
    assert ".npy" in result.stderr and ".tif" in result.stderr
    assert not (tmp_path / "out.png").exists()


def test_missing_input(tmp_path: Path) -> None:
    result = run("crop-pad", tmp_path / "nope.png", "-o", tmp_path / "out.png", "--shape", "4,4")
    assert result.exit_code in (1, 2)
    assert "nope.png" in result.stderr and "Traceback" not in result.stderr


@pytest.fixture
def every_output_mapped(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every output of a byte or more is big (memory-mapped when it can be); the maps made are listed."""
    from geomcli.io import _mapped

    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    made: list[str] = []
    for name in ("_map_npy", "_map_tiff"):
        original = getattr(_mapped, name)

        def spy(tmp: str, *args: object, original: Callable[..., np.ndarray] = original) -> np.ndarray:
            made.append(tmp)
            return original(tmp, *args)

        monkeypatch.setattr(_mapped, name, spy)
    return made


def tiff_compression(path: Path) -> str:
    import tifffile

    with tifffile.TiffFile(path) as tif:
        return str(tif.pages[0].compression.name)


@pytest.mark.parametrize("args, expected", [
    (["--compression", "zlib"], "ADOBE_DEFLATE"), (["--compression", "lzma"], "LZMA"), ([], "NONE"),
])
def test_a_big_output_is_compressed_as_asked(tmp_path: Path, every_output_mapped: list[str], args: list[str],
                                             expected: str) -> None:
    import tifffile

    data = np.arange(2 * 8 * 10, dtype=np.uint16).reshape(2, 8, 10)
    tifffile.imwrite(tmp_path / "in.tiff", data, photometric="minisblack")
    out = tmp_path / "out.tiff"
    result = run("crop-pad", tmp_path / "in.tiff", "-o", out, "--shape", "2,6,6", *args)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "" and "Warning" not in result.stderr
    assert tiff_compression(out) == expected
    assert len(every_output_mapped) == (0 if args else 1)  # compressed: encoded from RAM
    assert np.array_equal(tifffile.imread(out), crop_ops.center_crop_pad(data, [2, 6, 6]))


def test_a_big_output_keeps_the_input_tiffs_compression(tmp_path: Path, every_output_mapped: list[str]) -> None:
    import tifffile

    data = np.arange(3 * 8 * 10, dtype=np.uint8).reshape(3, 8, 10)
    tifffile.imwrite(tmp_path / "in.tiff", data, photometric="minisblack", compression="zlib")
    result = run("space-to-depth", tmp_path / "in.tiff", "-o", tmp_path / "out.tiff", "--blocksize", "2",
                 "--layout", "CHW")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "" and "Warning" not in result.stderr
    assert tiff_compression(tmp_path / "out.tiff") == "ADOBE_DEFLATE" and every_output_mapped == []
    none = run("space-to-depth", tmp_path / "in.tiff", "-o", tmp_path / "raw.tiff", "--blocksize", "2",
               "--layout", "CHW", "--compression", "none")
    assert none.exit_code == 0, none.stderr
    assert tiff_compression(tmp_path / "raw.tiff") == "NONE" and len(every_output_mapped) == 1
    assert np.array_equal(tifffile.imread(tmp_path / "raw.tiff"), tifffile.imread(tmp_path / "out.tiff"))


def test_a_big_npy_output_refuses_compression(tensor: Path, tmp_path: Path, every_output_mapped: list[str]) -> None:
    out = tmp_path / "out.npy"
    result = run("crop-pad", tensor, "-o", out, "--shape", "1,1,4,4", "--compression", "zlib")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.endswith(f"Error: --compression is for TIFF output, not NPY (-o {out})\n")
    assert list(tmp_path.iterdir()) == [tensor] and every_output_mapped == []


@pytest.mark.parametrize(("name", "read_as"), [("-dash.png", "-d"), ("--long.png", "--long.png")])
def test_a_file_named_like_an_option_is_named_in_the_error(photo: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, name: str,
                                                          read_as: str) -> None:
    """'crop-pad -dash.png ...' said only "No such option '-d'": the file is named, and how to give it."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(photo, name)
    result = run("crop-pad", name, "-o", "o.png", "--shape", "4,4")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == (f"Error: No such option '{read_as}'. {name} is a file: name it ./{name} "
                                              "(or put it after --, which ends the options).")
    assert not (tmp_path / "o.png").exists()
    # as the error says
    assert run("crop-pad", f"./{name}", "-o", "o.png", "--shape", "4,4", "-q").exit_code == 0
    assert run("crop-pad", "-o", "o2.png", "--shape", "4,4", "-q", "--", name).exit_code == 0
    np.testing.assert_array_equal(read_png(tmp_path / "o.png"), read_png(tmp_path / "o2.png"))
    # an option that is no file, and a chain's step (which takes no file: -i does), are as they were
    assert run("crop-pad", "./photo.png", "-o", "o.png", "--shape", "4,4", "-dx").stderr.splitlines()[-1] == (
        "Error: No such option '-d'.")
    step = run("chain", "-i", "photo.png", "-o", "o.png", "crop-pad", name, "--shape", "4,4")
    assert step.exit_code == 2 and "is a file" not in step.stderr


@pytest.mark.parametrize("args, name, warning, of_input", [
    (["--quality", "80"], "o.png", "--quality is for JPEG and WebP output, not PNG; ignored", False),
    (["--compress-level", "3"], "o.npy", "--compress-level is for PNG output, not NPY; ignored", False),
    (["--page", "0"], "o.png", "--page is for TIFF input, not PNG; ignored", True),
    (["--series", "1"], "o.png", "--series is for TIFF input, not PNG; ignored", True),
])
def test_an_option_that_does_not_apply_is_a_warning(photo: Path, tmp_path: Path, args: list[str], name: str,
                                                    warning: str, of_input: bool) -> None:
    """Named by the file it is about: a writer's option by the output, a reader's by the input."""
    out = tmp_path / name
    result = run("crop-pad", photo, "-o", out, "--shape", "4,4", *args)
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr.splitlines()[0] == f"Warning: {photo if of_input else out}: {warning}"
    assert result.stderr.count("Warning") == 1
    copy = photo.with_name("copy.png")
    copy.write_bytes(photo.read_bytes())
    batch = run("crop-pad", photo, copy, "--out-dir", tmp_path / "many", "--shape", "4,4",
                "--name", "{stem}" + out.suffix, *args)
    assert batch.exit_code == 0 and batch.stdout == ""
    whose = photo if of_input else tmp_path / "many" / ("photo" + out.suffix)
    assert batch.stderr.count(f"Warning: {whose}: {warning}\n") == 1
    assert batch.stderr.count("Warning") == 1  # once per run


def test_fail_fast_goes_with_out_dir(photo: Path, tmp_path: Path) -> None:
    result = run("crop-pad", photo, "-o", tmp_path / "o.png", "--shape", "4,4", "--fail-fast")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.endswith("Error: --fail-fast goes with --out-dir, not -o\n")
    assert list(tmp_path.iterdir()) == [photo]


# --- space-to-depth / depth-to-space ----------------------------------------------------


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_tensor_and_back(tensor: Path, tmp_path: Path, mode: str) -> None:
    blocks, back = tmp_path / "blocks.npy", tmp_path / "back.npy"
    assert run("space-to-depth", tensor, "-o", blocks, "--blocksize", "2", "--mode", mode).exit_code == 0
    assert np.array_equal(np.load(blocks), space_depth_ops.space_to_depth(np.load(tensor), 2, mode))
    assert run("depth-to-space", blocks, "-o", back, "--blocksize", "2", "--mode", mode).exit_code == 0
    assert np.array_equal(np.load(back), np.load(tensor))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_image_channel_order(tmp_path: Path, rng: np.random.Generator, mode: str) -> None:
    image = rng.integers(0, 256, (6, 9, 3), dtype=np.uint8)
    source, out = tmp_path / "in.npy", tmp_path / "out.npy"
    np.save(source, image)
    assert run("space-to-depth", source, "-o", out, "--blocksize", "3", "--mode", mode,
               "--layout", "HWC").exit_code == 0
    result = np.load(out)
    assert result.shape == (2, 3, 27)
    onnx = space_depth_ops.space_to_depth(image.transpose(2, 0, 1)[None], 3, mode)[0]
    for k in range(27):
        assert np.array_equal(result[..., k], onnx[k])
    b, c = 3, 3
    bh, bw, channel = 1, 2, 2
    k = (bh * b + bw) * c + channel if mode == "DCR" else channel * b * b + bh * b + bw
    assert result[1, 2, k] == image[1 * b + bh, 2 * b + bw, channel]


def test_space_to_depth_nhwc_layout(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.integers(0, 9, (2, 4, 6, 3)).astype(np.int16)
    source, out = tmp_path / "in.npy", tmp_path / "out.npy"
    np.save(source, data)
    assert run("space-to-depth", source, "-o", out, "--blocksize", "2", "--layout", "NHWC").exit_code == 0
    expected = space_depth_ops.space_to_depth(data.transpose(0, 3, 1, 2), 2).transpose(0, 2, 3, 1)
    assert np.array_equal(np.load(out), expected)


def test_blocksize_that_does_not_divide(tensor: Path, tmp_path: Path) -> None:
    result = run("space-to-depth", tensor, "-o", tmp_path / "o.npy", "--blocksize", "5")
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: {tensor}: space_to_depth: height 6 is not divisible by blocksize 5 (input shape (2, 3, 6, 8))\n"
    )


@pytest.mark.parametrize("command, blocksize, found", [
    ("space-to-depth", "5", "space_to_depth: height 9 is not divisible by blocksize 5"),
    ("depth-to-space", "2", "depth_to_space: channels 3 are not divisible by blocksize² 4"),
])
def test_a_blocksize_that_does_not_divide_an_image_names_its_shape_not_the_kernels(
        photo: Path, tmp_path: Path, command: str, blocksize: str, found: str) -> None:
    expected = f"Error: {photo}: {found} (input shape (9, 12, 3), layout HWC)\n"
    alone = run(command, photo, "-o", tmp_path / "o.npy", "--blocksize", blocksize)
    assert alone.exit_code == 2 and alone.stdout == "" and alone.stderr == expected
    dry = run(command, photo, "--out-dir", tmp_path / "out", "--blocksize", blocksize, "--dry-run")
    assert dry.exit_code == 2 and dry.stderr.startswith(expected)
    # called from Python, the kernel says what it was given
    kernel = getattr(space_depth_ops, command.replace("-", "_"))
    with pytest.raises(GeomError, match=r"\(input shape \(1, 3, 9, 12\)\)$"):
        kernel(np.zeros((1, 3, 9, 12), np.uint8), int(blocksize))


def test_a_blocksize_that_does_not_divide_a_stack_names_its_axes(tmp_path: Path) -> None:
    import tifffile

    source = tmp_path / "stack.tiff"
    tifffile.imwrite(source, np.zeros((2, 3, 4, 6, 8), np.uint8), imagej=True, metadata={"axes": "TZCYX"})
    result = run("space-to-depth", source, "-o", tmp_path / "o.tiff", "--blocksize", "4")
    assert result.exit_code == 2
    assert result.stderr == (f"Error: {source}: space_to_depth: height 6 is not divisible by blocksize 4 "
                             "(input shape (2, 3, 4, 6, 8), layout TZCYX)\n")


@pytest.mark.parametrize("args", [["--mode", "crd"], ["--blocksize", "0"], ["--blocksize", "x"], []])
def test_block_usage_errors(tensor: Path, tmp_path: Path, args: list[str]) -> None:
    base = ["--blocksize", "2"] if "--blocksize" not in args else []
    result = run("space-to-depth", tensor, "-o", tmp_path / "o.npy", *base, *args) if args else \
        run("space-to-depth", tensor, "-o", tmp_path / "o.npy")
    assert result.exit_code == 2 and "Usage:" in result.stderr


def test_rank3_tensor_needs_a_layout(tmp_path: Path) -> None:
    source = tmp_path / "in.npy"
    np.save(source, np.zeros((3, 4, 4), np.uint8))
    result = run("space-to-depth", source, "-o", tmp_path / "o.npy", "--blocksize", "2")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (f"Error: {source}: a rank-3 tensor (3, 4, 4) has no default layout; give --layout "
                             "(CHW, HWC, NHW)\n")


@pytest.mark.parametrize("command", [["space-to-depth", "--blocksize", "2"], ["affine-grid"]])
def test_a_layout_error_names_the_file_once(tmp_path: Path, command: list[str]) -> None:
    source = tmp_path / "gray16.npy"
    np.save(source, np.zeros((4, 4), np.uint16))
    name, *rest = command
    args = [source] if name != "affine-grid" else ["--like", source]
    result = run(name, *args, "-o", tmp_path / "o.npy", "--layout", "HWC", *rest)
    # options the file cannot take: a usage fault, whether the file is transformed or lends its size
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"Error: {source}: layout HWC needs rank 3, found shape (4, 4)\n"


# --- pipes ----------------------------------------------------------------------------


def test_stdin_to_stdout(tensor: Path) -> None:
    result = run("space-to-depth", "-", "-o", "-", "--blocksize", "2", stdin=tensor.read_bytes())
    assert result.exit_code == 0, result.stderr
    data = np.load(bytes_io.BytesIO(result.stdout_bytes), allow_pickle=False)
    assert np.array_equal(data, space_depth_ops.space_to_depth(np.load(tensor), 2))
    assert "space-to-depth" in result.stderr


def test_dash_is_stdin_and_stdout_beside_a_folder_named_dash(tensor: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # a folder named - (as --out-dir - made) had -o - refused as a directory, and - as input as a folder
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").mkdir()
    result = run("crop-pad", "-", "-o", "-", "--shape", "1,1,2,2", stdin=tensor.read_bytes())
    assert result.exit_code == 0, result.stderr
    assert np.load(bytes_io.BytesIO(result.stdout_bytes)).shape == (1, 1, 2, 2)
    assert list((tmp_path / "-").iterdir()) == []


STDOUT_NPY = ("Warning: <stdout>: written as NPY, the default for -o -: give --format png for PNG, as the input "
              "is (or --format npy)\n")


def png_bytes(pixels: np.ndarray) -> bytes:
    buffer = bytes_io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="png")
    return buffer.getvalue()


@pytest.mark.parametrize(("command", "steps"), [
    (["crop-pad", "-"], ["--shape", "4,4"]),
    (["warp", "-"], ["--size", "4,4"]),
    (["chain", "-i", "-"], ["resize", "--sizes", "6,6", "crop-pad", "--shape", "4,4"]),
])
def test_a_picture_to_stdout_without_format_says_it_is_written_as_npy(command: list[str], steps: list[str],
                                                                       photo: Path) -> None:
    """`geomcli crop-pad photo.png -o - --shape 4,4 > small.png` put NPY bytes in small.png without a
    word (and a pipeline of PNGs failed downstream, on a tensor of no layout)."""
    result = run(*command, "-o", "-", *steps, stdin=photo.read_bytes())
    assert result.exit_code == 0, result.stderr
    assert np.load(bytes_io.BytesIO(result.stdout_bytes)).shape == (4, 4, 3)
    assert result.stderr.startswith(STDOUT_NPY)
    for said in (["--format", "npy"], ["--format", "png"], ["-q"]):
        assert "Warning" not in run(*command, "-o", "-", *said, *steps, stdin=photo.read_bytes()).stderr


def test_no_word_of_npy_on_stdout_where_the_input_is_npy_or_its_format_cannot_hold_the_result(
        tensor: Path, rng: np.random.Generator) -> None:
    from_npy = run("crop-pad", "-", "-o", "-", "--shape", "1,1,2,2", stdin=tensor.read_bytes())
    assert from_npy.exit_code == 0 and "Warning" not in from_npy.stderr
    pixels = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    blocks = run("space-to-depth", "-", "-o", "-", "--blocksize", "2", stdin=png_bytes(pixels))  # 12 channels
    assert blocks.exit_code == 0 and "Warning" not in blocks.stderr


def test_out_dir_dash_is_a_usage_error(photo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run("crop-pad", photo, "--out-dir", "-", "--shape", "4,4")
    assert result.exit_code == 2
    assert "Invalid value for '--out-dir': - is stdout, which takes one output (-o -)" in result.stderr
    assert not (tmp_path / "-").exists()


def test_json_goes_to_stderr_when_stdout_carries_data(tensor: Path) -> None:
    result = run("crop-pad", "-", "-o", "-", "--shape", "1,1,2,2", "--json", stdin=tensor.read_bytes())
    assert result.exit_code == 0
    record = json.loads(result.stderr)
    assert record["input"] == "-" and record["output"] == "-" and record["status"] == "ok"


# --- JSON and quiet ---------------------------------------------------------------------


def test_json_keys(tensor: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.npy"
    result = run("space-to-depth", tensor, "-o", out, "--blocksize", "2", "--json")
    assert result.exit_code == 0 and result.stderr == ""
    record = json.loads(result.stdout)
    assert record["command"] == "space-to-depth"
    assert record["input"] == str(tensor) and record["output"] == str(out)
    assert record["input_shape"] == [2, 3, 6, 8] and record["output_shape"] == [2, 12, 3, 4]
    assert record["input_dtype"] == record["output_dtype"] == "float32"
    assert record["status"] == "ok" and record["error"] is None


def test_json_on_error(tensor: Path, tmp_path: Path) -> None:
    result = run("space-to-depth", tensor, "-o", tmp_path / "o.npy", "--blocksize", "4", "--json")
    assert result.exit_code == 2
    record = json.loads(result.stdout)
    assert record["status"] == "error" and "not divisible" in record["error"]


def test_quiet(tensor: Path, tmp_path: Path) -> None:
    result = run("space-to-depth", tensor, "-o", tmp_path / "o.npy", "--blocksize", "2", "-q")
    assert result.exit_code == 0 and result.stderr == "" and result.stdout == ""


# --- affine-grid ------------------------------------------------------------------------


def test_affine_grid_inline_theta_equals_kernel(tmp_path: Path) -> None:
    out = tmp_path / "g.npy"
    numbers = "1.5,0.2,0.1,-0.3,0.9,0.25"
    result = run("affine-grid", "--size", "2,3,5,6", "--theta", numbers, "-o", out, "--align-corners")
    assert result.exit_code == 0, result.stderr
    theta = np.array([float(v) for v in numbers.split(",")], np.float32).reshape(1, 2, 3).repeat(2, 0)
    assert np.array_equal(np.load(out), grid_ops.affine_grid(theta, [2, 3, 5, 6], True))


def test_affine_grid_theta_file_keeps_its_dtype(tmp_path: Path) -> None:
    theta = np.array([[[1, 0, 0, 0.5], [0, 1, 0, 0], [0, 0, 2, 0]]], np.float64)
    np.save(tmp_path / "t.npy", theta)
    out = tmp_path / "g.npy"
    assert run("affine-grid", "--size", "1,1,2,3,4", "--theta", tmp_path / "t.npy", "-o", out).exit_code == 0
    grid = np.load(out)
    assert grid.dtype == np.float64 and grid.shape == (1, 2, 3, 4, 3)
    assert np.array_equal(grid, grid_ops.affine_grid(theta, [1, 1, 2, 3, 4]))


def test_a_warp_s_record_names_the_grid_dtype_given(photo: Path, tmp_path: Path) -> None:
    """--dtype float16 changes a warp's pixels (its theta and grid are rounded to float16), yet its
    --json parameters and summary line said nothing of it: the same record as float32's but for
    theta's rounding, no way to redo the run from it. The dtype given is now a key of its own."""
    import json

    records = {}
    for dtype in ("float16", "float32"):
        result = run("warp", photo, "-o", tmp_path / f"{dtype}.png", "--rotate", "33", "--dtype", dtype, "--json")
        assert result.exit_code == 0, result.stderr
        records[dtype] = json.loads(result.stdout)["parameters"]
    assert not np.array_equal(read_png(tmp_path / "float16.png"), read_png(tmp_path / "float32.png"))
    assert (records["float16"]["dtype"], records["float32"]["dtype"]) == ("float16", "float32")
    text = run("warp", photo, "-o", tmp_path / "o.png", "--rotate", "33", "--dtype", "bfloat16")
    assert " dtype=bfloat16 " in text.stderr
    chained = run("chain", "-i", photo, "-o", tmp_path / "c.png", "--json", "warp", "--theta", "1,0,0,0,1,0",
                  "--dtype", "float64")
    assert json.loads(chained.stdout)["parameters"]["steps"][0]["dtype"] == "float64"
    default = run("warp", photo, "-o", tmp_path / "o.png", "--rotate", "33", "--json")
    assert "dtype" not in json.loads(default.stdout)["parameters"]  # (not given: a key only when given)


def test_affine_grid_like_an_image_with_flags(photo: Path, tmp_path: Path) -> None:
    out = tmp_path / "g.npy"
    result = run("affine-grid", "--like", photo, "--rotate", "90", "-o", out, "--dtype", "float64")
    assert result.exit_code == 0, result.stderr
    grid = np.load(out)
    base = grid_ops.affine_grid(np.array([[[1.0, 0, 0], [0, 1, 0]]]), [1, 3, 9, 12])
    # A quarter turn maps (x, y) to (-y, x).
    assert np.array_equal(grid[..., 0], -base[..., 1]) and np.array_equal(grid[..., 1], base[..., 0])


@pytest.mark.parametrize("args, message", [
    (["--size", "1,1,4,4", "--like", "x.png"], "exactly one of --size and --like"),
    ([], "exactly one of --size and --like"),
    (["--size", "1,1,4,4", "--theta", "1,0,0,0,1,0", "--rotate", "5"], "--theta cannot be combined with --rotate"),
    (["--size", "1,1,4,4", "--scale", "1,2,3"], "has 3 numbers, expected 1 or 2"),
])
def test_affine_grid_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = run("affine-grid", "-o", tmp_path / "g.npy", *args)
    assert result.exit_code == 2 and message in result.stderr


@pytest.mark.parametrize("theta, shown, parameters", [
    ([], "(flags)", "theta=[[1, 0, 0], [0, 1, 0]] flags={}"),
    (["--theta", "1,0,0,0,1,0"], "1,0,0,0,1,0", "theta=1,0,0,0,1,0"),
])
def test_affine_grid_summary_names_where_theta_came_from(tmp_path: Path, theta: list[str], shown: str,
                                                         parameters: str) -> None:
    out = tmp_path / "g.npy"
    result = run("affine-grid", "--size", "1,1,2,2", *theta, "-o", out)
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr.startswith(f"affine-grid {shown} → {out}: 1×2×3 float32 → 1×2×2×2 float32 range [-0.5, 0.5] "
                                    f"align_corners=False {parameters} in ")


@pytest.mark.parametrize("args, theta, flags", [
    (["--size", "2,1,4,4", "--rotate", "90", "--translate", "0.5,0"], [[0.0, -1.0, 0.5], [1.0, 0.0, 0.0]],
     {"rotate": 90.0, "translate": [0.5, 0.0]}),
    (["--size", "1,1,2,2,2"], [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]], {}),
    (["--size", "1,1,2,2", "--scale", "0.1", "--dtype", "float64"], [[0.1, 0.0, 0.0], [0.0, 0.1, 0.0]],
     {"scale": [0.1]}),
])
def test_affine_grid_record_holds_the_matrix_the_flags_made(tmp_path: Path, args: list[str],
                                                            theta: list[list[float]], flags: dict[str, Any]) -> None:
    result = run("affine-grid", *args, "-o", tmp_path / "g.npy", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["parameters"] == {"align_corners": False, "theta": theta, "flags": flags}


def test_affine_grid_takes_the_size_like_a_zarr_array(tmp_path: Path) -> None:
    pytest.importorskip("zarr")
    np.save(tmp_path / "t.npy", np.zeros((2, 3, 8, 10), np.float32))
    assert run("crop-pad", tmp_path / "t.npy", "-o", tmp_path / "t.zarr", "--shape", "2,3,8,10").exit_code == 0
    result = run("affine-grid", "--like", tmp_path / "t.zarr", "--rotate", "10", "-o", tmp_path / "g.npy")
    assert result.exit_code == 0, result.stderr  # it was "File '...t.zarr' is a directory"
    assert np.load(tmp_path / "g.npy").shape == (2, 8, 10, 2)


def test_affine_grid_record_of_a_failure_has_no_matrix_but_the_flags(tmp_path: Path) -> None:
    result = run("affine-grid", "--like", tmp_path / "missing.png", "--rotate", "10", "-o", tmp_path / "g.npy",
                 "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["parameters"] == {"align_corners": False, "theta": None,
                                                       "flags": {"rotate": 10.0}}


@pytest.mark.parametrize("size, message", [
    ("-1,1,4,4", "N and C must not be negative and the spatial sizes must be at least 1, found -1,1,4,4"),
    ("1,1,0,4", "N and C must not be negative and the spatial sizes must be at least 1, found 1,1,0,4"),
    ("1,1", "give N,C,H,W or N,C,D,H,W: 4 or 5 values, found 2 (1,1)"),
    ("", "give N,C,H,W or N,C,D,H,W: 4 or 5 values, found none"),
])
def test_affine_grid_bad_size_is_a_usage_error(tmp_path: Path, size: str, message: str) -> None:
    result = run("affine-grid", "--size", size, "-o", tmp_path / "g.npy")
    assert result.exit_code == 2 and result.stdout == ""
    assert f"Error: Invalid value for '--size': {message}\n" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["-o", "g.png"], "g.png: PNG cannot hold float32 data; write .npy or .tiff"),
    (["-o", "g.tiff", "--dtype", "bfloat16"], "g.tiff: TIFF cannot hold bfloat16 data; write .npy"),
    # stdout's format is --format's: there is no extension to change ('write .npy or .tiff' was said)
    (["-o", "-", "--format", "jpeg"], "<stdout>: JPEG cannot hold float32 data; give --format npy or tiff"),
])
def test_affine_grid_to_a_format_that_holds_no_grid_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     args: list[str], message: str) -> None:
    """What the options alone ask, as warp's float result to PNG is (it was exit 1)."""
    monkeypatch.chdir(tmp_path)
    result = run("affine-grid", "--size", "1,1,4,4", *args)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"Error: {message}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("size", ["0,1,4,4", "0,1,2,4,4"])
def test_affine_grid_of_no_matrices_from_the_flags(tmp_path: Path, size: str) -> None:
    """N = 0 is allowed: an empty grid, and no matrix to record (an IndexError, with a traceback, took one)."""
    result = run("affine-grid", "--size", size, "-o", tmp_path / "g.npy", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["parameters"]["theta"] is None
    assert np.load(tmp_path / "g.npy").shape == (0, *map(int, size.split(",")[2:]), len(size.split(",")) - 2)


@pytest.mark.parametrize("theta", [[], ["--theta", "1,0,0,0,1,0"]])
def test_affine_grid_size_is_checked_before_theta_is_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          theta: list[str]) -> None:
    from geomcli.engine import theta as thetas

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("theta built before the size check")

    monkeypatch.setattr(thetas, "from_numbers", never)
    result = run("affine-grid", "--size", "10000000000,1,1,1", *theta, "-o", tmp_path / "g.npy")
    assert result.exit_code == 2 and result.stdout == ""  # what the options ask, as warp's --size past the limit
    assert result.stderr == ("Error: the output (10000000000, 1, 1, 2): 20000000000 elements exceed the limit of "
                             "2147483648; raise it with --max-pixels or GEOMCLI_MAX_PIXELS\n")


def test_affine_grid_size_past_what_numpy_addresses_is_a_usage_error(tmp_path: Path) -> None:
    """As --size 10000000000,1,1,1 past --max-pixels (and warp's --size past both): it was exit 1."""
    result = run("affine-grid", "--size", f"{2**63 - 1},1,4,4", "-o", tmp_path / "g.npy")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (f"Error: affine_grid: the output shape ({2**63 - 1}, 4, 4, 2) has {(2**63 - 1) * 32} "
                             f"elements; numpy addresses at most {2**63 - 1} (theta shape ({2**63 - 1}, 2, 3))\n")
    assert list(tmp_path.iterdir()) == []


def test_affine_grid_theta_for_every_n_stays_one_matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import geomcli.ops.affine_grid as grid_ops

    seen: list[np.ndarray] = []
    real = grid_ops.affine_grid

    def spy(theta: np.ndarray, *args: object, **kwargs: object) -> np.ndarray:
        seen.append(theta)
        return real(theta, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(grid_ops, "affine_grid", spy)
    out = tmp_path / "g.npy"
    result = run("affine-grid", "--size", "1000,1,2,2", "--rotate", "90", "--dtype", "float16", "-o", out)
    assert result.exit_code == 0, result.stderr
    (theta,) = seen
    assert theta.shape == (1000, 2, 3) and theta.dtype == np.float16 and theta.strides[0] == 0
    assert np.array_equal(np.load(out), real(np.broadcast_to(np.float16([[0, -1, 0], [1, 0, 0]]), (1000, 2, 3)),
                                             [1000, 1, 2, 2]))


@pytest.mark.parametrize("size, theta, message", [
    ("2,1,4,4", "1,0,0,0,1,0,1,0,0,0,1,0,1,0,0,0,1,0",
     "a 2-D grid takes 6 numbers per matrix: 6 for one matrix shared by every N, or 12 for one matrix per N = 2; "
     "found 18"),
    ("1,1,2,4,4", "1,0,0,0,1,0", "a 3-D grid takes 12 numbers per matrix: 12 for one matrix; found 6"),
])
def test_affine_grid_theta_count_is_a_usage_error(tmp_path: Path, size: str, theta: str, message: str) -> None:
    result = run("affine-grid", "--size", size, "--theta", theta, "-o", tmp_path / "g.npy")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.endswith(f"Error: Invalid value for '--theta': {message}\n")
    assert list(tmp_path.iterdir()) == []


def test_affine_grid_2d_flags_with_a_3d_size_or_like(tmp_path: Path) -> None:
    result = run("affine-grid", "--size", "1,1,2,4,4", "--rotate", "30", "--scale", "2", "-o", tmp_path / "g.npy")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.endswith("Error: --rotate, --scale make 2-D matrices; a 3-D grid (5 --size values) takes "
                                  "--theta\n")
    one = run("affine-grid", "--size", "1,1,2,4,4", "--rotate", "30", "-o", tmp_path / "g.npy")
    assert one.exit_code == 2 and one.stderr.endswith("Error: --rotate makes 2-D matrices; a 3-D grid (5 --size "
                                                      "values) takes --theta\n")
    volume = tmp_path / "v.npy"
    np.save(volume, np.zeros((1, 1, 2, 3, 4), np.float32))
    like = run("affine-grid", "--like", volume, "--shear", "0.5,0", "-o", tmp_path / "g.npy")
    assert like.exit_code == 2 and like.stdout == ""
    assert like.stderr == (f"Error: {volume}: a rank-5 file makes a 3-D grid, and --rotate, --scale, --shear and "
                           "--translate make 2-D matrices; give --theta\n")
    assert sorted(tmp_path.iterdir()) == [volume]


def test_affine_grid_like_a_file_without_a_layout_is_the_usage_fault_warp_makes_of_it(tmp_path: Path) -> None:
    source = tmp_path / "v1.npy"
    np.save(source, np.zeros((3, 4, 5), np.float32))
    grid = run("affine-grid", "--like", source, "--rotate", "3", "-o", tmp_path / "g.npy")
    warp = run("warp", source, "--rotate", "3", "-o", tmp_path / "w.npy")
    assert grid.exit_code == warp.exit_code == 2 and grid.stdout == warp.stdout == ""
    assert grid.stderr == warp.stderr == (f"Error: {source}: a rank-3 tensor (3, 4, 5) has no default layout; give "
                                          "--layout (CHW, HWC, NHW)\n")
    assert sorted(tmp_path.iterdir()) == [source]


@pytest.mark.parametrize(("theta", "code", "message"), [
    (np.zeros((3, 2, 3)), 2, "theta holds 3 matrices for --size's N = 1; give one matrix, or one per N"),
    (np.zeros((3, 4)), 2, "theta holds 3-D matrices (3, 4); a 2-D grid takes (N, 2, 3) or (2, 3)"),
    (np.zeros(5), 1, "theta must have shape (N, 2, 3) or (2, 3) for a 2-D grid, found (5,)"),  # no matrices: a bad file
])
def test_affine_grid_theta_file_that_does_not_fit_the_grid_names_the_file(
        tmp_path: Path, theta: np.ndarray, code: int, message: str) -> None:
    np.save(tmp_path / "theta.npy", theta)
    result = run("affine-grid", "--size", "1,3,10,10", "--theta", tmp_path / "theta.npy", "-o", tmp_path / "g.npy")
    assert result.exit_code == code and result.stdout == ""
    assert result.stderr == f"Error: {tmp_path / 'theta.npy'}: {message}\n"
    assert not (tmp_path / "g.npy").exists()


def test_affine_grid_like_over_max_pixels_is_a_usage_fault_naming_the_file(tmp_path: Path) -> None:
    np.save(tmp_path / "n2.npy", np.zeros((2, 1, 20, 30), np.uint8))  # 1200 elements; the grid 2400
    result = run("affine-grid", "--like", tmp_path / "n2.npy", "--rotate", "3", "--max-pixels", "2000",
                 "-o", tmp_path / "g.npy")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (f"Error: {tmp_path / 'n2.npy'}: the output (2, 20, 30, 2): 2400 elements exceed the "
                             "limit of 2000; raise it with --max-pixels or GEOMCLI_MAX_PIXELS\n")


def test_affine_grid_nan_theta_from_a_file_is_allowed_and_reported_typed_it_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "theta.npy", np.array([[[np.nan, 0, 0], [0, 1, 0]]]))
    result = run("affine-grid", "--size", "1,1,2,2", "--theta", tmp_path / "theta.npy", "-o", tmp_path / "g.npy")
    assert result.exit_code == 0 and "NaN or Inf" in result.stderr
    assert np.isnan(np.load(tmp_path / "g.npy")[..., 0]).all()
    # typed numbers must be finite: NaN and Inf come from data, not from a flag
    typed = run("affine-grid", "--size", "1,1,2,2", "--theta", "nan,0,0,0,1,0", "-o", tmp_path / "typed.npy")
    assert typed.exit_code == 2 and "every number must be finite, found nan" in typed.stderr
    assert not (tmp_path / "typed.npy").exists()


# --- info -------------------------------------------------------------------------------


def test_info(tensor: Path, photo: Path, tmp_path: Path) -> None:
    result = run("info", tensor, photo)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{tensor}: npy 2×3×6×8 float32")
    assert lines[1].startswith(f"{photo}: png 9×12×3 uint8, layout HWC")


def test_info_shows_a_0d_arrays_shape_as_the_summary_does(tmp_path: Path) -> None:
    # its empty shape showed as nothing: "npy  float32"
    scalar = tmp_path / "scalar.npy"
    np.save(scalar, np.float32(3))
    result = run("info", scalar)
    assert result.exit_code == 0
    assert result.stdout.startswith(f"{scalar}: npy () float32, layout -")


def test_info_json_and_a_failure(tensor: Path, tmp_path: Path) -> None:
    result = run("info", "--json", tensor, tmp_path / "missing.npy")
    assert result.exit_code == 1
    first, second = map(json.loads, result.stdout.splitlines())
    assert first["shape"] == [2, 3, 6, 8] and first["status"] == "ok"
    assert second["status"] == "error" and "missing.npy" in second["error"]
    assert result.stderr.startswith("Error: ") and "missing.npy" in result.stderr


def test_every_info_record_has_the_keys_of_a_file_read(tensor: Path, tmp_path: Path) -> None:
    """A failed file's record held input, status and error alone, and a TIFF of series of different
    shapes' lacked bit_depth, icc, dpi...: record["shape"] was a KeyError in a script."""
    import tifffile

    with tifffile.TiffWriter(tmp_path / "mixed.tif") as tif:
        tif.write(np.zeros((4, 5), np.uint8), photometric="minisblack")
        tif.write(np.zeros((2, 6, 7), np.uint16), photometric="minisblack")
    (tmp_path / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "gone.npy").symlink_to(tmp_path / "nowhere.npy")
    result = run("info", "--json", tensor, tmp_path / "missing.npy", tmp_path / "bad.png", tmp_path / "mixed.tif",
                 tmp_path / "folder")
    assert result.exit_code == 1
    read, *others = map(json.loads, result.stdout.splitlines())
    assert [record["status"] for record in others] == ["error", "error", "ok", "error"]
    for record in others:
        assert list(record)[:len(read)] == list(read)
        assert record["shape"] is None and record["dtype"] is None and record["text"] == []
    assert others[2]["format"] == "tiff" and len(others[2]["series"]) == 2


@pytest.mark.parametrize("as_json", [[], ["--json"]], ids=["line", "json"])
def test_info_with_a_pattern_matching_nothing_shows_nothing(tensor: Path, tmp_path: Path, as_json: list[str]) -> None:
    """The usage error (exit 2) came after the records of the inputs before the pattern, and those after
    it were never shown: a script saw half a listing under a usage error."""
    result = run("info", *as_json, tensor, tmp_path / "nothing*.png", tensor)
    assert result.exit_code == 2 and result.stdout == ""
    assert f"Error: the pattern '{tmp_path / 'nothing*.png'}' has no file geomcli reads" in result.stderr


@pytest.mark.parametrize("more, second", [(["-"], "the input -"), (["--files-from", "-"], "--files-from -")],
                         ids=["twice", "files-from"])
def test_info_reads_stdin_once(tensor: Path, more: list[str], second: str) -> None:
    # the second reader found stdin empty: 'Error: <stdin>: empty input', exit 1, after the first's line
    result = run("info", "-", *more, stdin=f"{tensor}\n".encode())
    assert result.exit_code == 2 and result.stdout == ""
    assert f"Error: the input - and {second} cannot both read stdin: it can be read once" in result.stderr


def test_info_shows_a_file_named_twice_once(tensor: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # as a transform does it once: a name, ./name, a pattern and its folder each showed it again
    monkeypatch.chdir(tmp_path)
    result = run("info", tensor.name, f"./{tensor.name}", "*.npy", ".", "--json")
    assert result.exit_code == 0
    assert [json.loads(line)["input"] for line in result.stdout.splitlines()] == [tensor.name]


def test_info_reads_a_fifo_once(tensor: Path, tmp_path: Path) -> None:
    with fifo_feeding(tmp_path / "pipe.npy", tensor.read_bytes()) as fifo:
        result = run("info", fifo)
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.startswith(f"{fifo}: npy 2×3×6×8 float32, layout -, 1 page(s), range [")
    assert "bytes" not in result.stdout


def test_info_on_an_animation_shows_its_frames(tmp_path: Path) -> None:
    frames = [Image.fromarray(np.full((4, 5), 50 * k, np.uint8)) for k in range(3)]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:])
    result = run("info", tmp_path / "anim.gif")
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.startswith(f"{tmp_path / 'anim.gif'}: gif 3×4×5×3 uint8, layout NHWC, 3 page(s), "
                                    "range [0, 100]")
    first = run("info", "--json", "--frames", "first", tmp_path / "anim.gif")
    assert first.exit_code == 0 and first.stderr == ""
    assert json.loads(first.stdout)["shape"] == [4, 5, 3]


def test_info_lists_the_series_of_a_tiff_of_different_shapes(tmp_path: Path) -> None:
    import tifffile

    mixed = tmp_path / "mixed.tif"
    with tifffile.TiffWriter(mixed) as tif:
        tif.write(np.zeros((4, 5), np.uint8), photometric="minisblack")
        tif.write(np.zeros((2, 6, 7), np.uint16), photometric="minisblack")
    result = run("info", mixed)
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.splitlines() == [
        f"{mixed}: tiff, 2 image series of different shapes; a transform takes one with --series N",
        "  series 0: 4×5 uint8, axes YX",
        "  series 1: 2×6×7 uint16, axes QYX",
    ]
    record = json.loads(run("info", "--json", mixed).stdout)
    assert record["status"] == "ok" and record["series"] == [
        {"index": 0, "shape": [4, 5], "dtype": "uint8", "axes": "YX"},
        {"index": 1, "shape": [2, 6, 7], "dtype": "uint16", "axes": "QYX"},
    ]


def test_info_takes_a_mapped_inputs_range_slab_by_slab(tensor: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from geomcli.engine import one_file, slabs, summary

    monkeypatch.setattr(one_file, "MAP_INPUT_BYTES", 0)
    monkeypatch.setattr(slabs, "SLAB_BYTES", 64)
    parts: list[int] = []
    real = summary.range_and_nan

    def spy(data: np.ndarray) -> tuple[list[object] | None, bool]:
        parts.append(data.size)
        return real(data)

    monkeypatch.setattr(summary, "range_and_nan", spy)
    result = run("info", "--json", tensor)
    assert result.exit_code == 0 and result.stderr == ""
    data = np.load(tensor)
    assert json.loads(result.stdout)["value_range"] == [float(data.min()), float(data.max())]
    assert len(parts) > 1 and max(parts) * 4 <= 64 and sum(parts) == data.size


# --- real processes: pipes, signals, terminals, completion --------------------------------


GEOMCLI = [sys.executable, "-m", "geomcli"]


RUN_WITH_AN_EXIT_HANDLER = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("teardown ran"))
sys.argv = ["geomcli", *sys.argv[1:]]
from geomcli.cli import run
run()
"""


def test_a_profiled_run_ends_the_usual_way(tmp_path: Path) -> None:
    """Profilers and coverage write their data at exit: under them, no shortcut."""
    profiled = RUN_WITH_AN_EXIT_HANDLER.replace("from geomcli", "sys.setprofile(lambda *args: None)\nfrom geomcli")
    result = subprocess.run([sys.executable, "-c", profiled, "--version"], capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 0
    assert "teardown ran" in result.stderr


def test_worker_processes_leave_no_temp_folder(tmp_path: Path, photo: Path) -> None:
    """multiprocessing removes its temp folder (the forkserver's socket) at exit."""
    inputs, temp = tmp_path / "in", tmp_path / "tmp"
    inputs.mkdir(), temp.mkdir()
    for k in range(3):
        shutil.copy(photo, inputs / f"p{k}.png")
    result = subprocess.run([*GEOMCLI, "crop-pad", str(inputs), "--out-dir", str(tmp_path / "out"), "--shape", "8,8",
                             "-j", "2", "-q"], capture_output=True, text=True, env={**os.environ, "TMPDIR": str(temp)})
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["p0.png", "p1.png", "p2.png"]
    assert list(temp.iterdir()) == []


def test_a_batch_with_workers_on_a_full_stdout_is_one_error(tmp_path: Path, photo: Path) -> None:
    """The records left in stdout's buffer are dropped, not flushed again at exit (exit 120)."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    for k in range(3):
        shutil.copy(photo, inputs / f"p{k}.png")
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        result = subprocess.run([*GEOMCLI, "crop-pad", str(inputs), "--out-dir", str(tmp_path / "out"), "--shape",
                                 "8,8", "-j", "2", "--json"], stdout=full, stderr=subprocess.PIPE, text=True,
                                env=environment)
    assert result.returncode == 1
    assert result.stderr == "Error: <stdout>: cannot write (No space left on device)\n"


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["crop-pad", "--help"]])
def test_help_and_version_on_a_full_stdout_are_one_error(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run([*GEOMCLI, *args], stdout=full, stderr=subprocess.PIPE, text=True)
    assert result.returncode == 1
    assert result.stderr == "Error: <stdout>: cannot write (No space left on device)\n"


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["crop-pad", "--help"], ["info", "-h"]])
def test_help_and_version_for_a_closed_stdout_or_a_reader_gone(args: list[str]) -> None:
    closed = subprocess.run([*GEOMCLI, *args], stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.close(1))
    assert (closed.returncode, closed.stderr) == (1, "Error: <stdout>: standard output is closed\n")
    reader, writer = os.pipe()
    os.close(reader)  # the reader has gone before a byte was written: as `| head -0`, always
    try:
        gone = subprocess.run([*GEOMCLI, *args], stdout=writer, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(writer)
    assert (gone.returncode, gone.stderr) == (141, "")


@pytest.mark.parametrize("args, code", [(["--version"], 0), (["info", "missing.png"], 1), (["crop-pad"], 2)])
def test_the_console_script_exits_with_mains_code_and_skips_the_teardown(
    tmp_path: Path, args: list[str], code: int
) -> None:
    result = subprocess.run([sys.executable, "-c", RUN_WITH_AN_EXIT_HANDLER, *args], capture_output=True,
                            text=True, cwd=tmp_path)
    assert result.returncode == code
    assert "teardown ran" not in result.stderr
    if code == 0:
        assert result.stdout.startswith("geomcli ")


def test_the_console_script_flushes_what_main_left_in_stdouts_buffer(tmp_path: Path) -> None:
    script = ("import sys\nfrom geomcli.cli import group as cli\n"
              "def main(): sys.stdout.write('unflushed'); raise SystemExit(0)\n"
              "cli.main = main\ncli.run()\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "unflushed")
    with open("/dev/full", "w") as full:  # the flush fails: what was written did not arrive
        result = subprocess.run([sys.executable, "-c", script], stdout=full, stderr=subprocess.PIPE, cwd=tmp_path)
    assert result.returncode == 1


def test_a_run_that_started_workers_ends_the_usual_way_with_the_imports_frozen(tmp_path: Path) -> None:
    """Its exit handlers run (multiprocessing's), and the teardown's collections skip what the
    imports made: gc.freeze, where a --scheduler run's end walked Dask's objects for 0.1 s."""
    script = ("import atexit, gc, multiprocessing, sys\nfrom geomcli.cli import group as cli\n"
              "atexit.register(lambda: print(gc.get_freeze_count() > 1000, file=sys.stderr))\n"
              "def main(): raise SystemExit(3)\ncli.main = main\ncli.run()\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert (result.returncode, result.stderr) == (3, "True\n")


def test_a_full_stderr_loses_its_messages_not_the_run(tmp_path: Path, photo: Path) -> None:
    """`geomcli crop-pad photo.png -o out.png --shape 4,4 2>/dev/full` wrote out.png, then exited 1
    with a traceback nobody could read: the summary's write had failed. The files' outcome decides."""
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    env = hooked(tmp_path)
    with open("/dev/full", "w") as full:
        done = subprocess.run([*GEOMCLI, "crop-pad", str(photo), "-o", str(tmp_path / "out.png"), "--shape", "4,4"],
                              stderr=full, env=env)
        piped = subprocess.run([*GEOMCLI, "warp", str(photo), "-o", "-", "--rotate", "10"], stdout=subprocess.PIPE,
                               stderr=full, env=env)
        failed = subprocess.run([*GEOMCLI, "crop-pad", str(photo), str(broken), "--out-dir", str(tmp_path / "out"),
                                 "--shape", "4,4"], stderr=full, env=env)
    assert done.returncode == 0 and read_png(tmp_path / "out.png").shape == (4, 4, 3)
    assert piped.returncode == 0 and np.load(bytes_io.BytesIO(piped.stdout)).shape == (9, 12, 3)
    assert failed.returncode == 1 and os.listdir(tmp_path / "out") == ["photo.png"]


@pytest.mark.parametrize("wrong", [["--shape", "4x4"], ["--bogus"], []], ids=["x-form", "no-such-option", "no-shape"])
def test_a_full_stderr_keeps_a_usage_errors_exit_code(tmp_path: Path, photo: Path, wrong: list[str]) -> None:
    """A usage error whose message a full stderr could not take exited 1 (it was taken for a
    failed write to stdout), where the same mistake with room on stderr exits 2."""
    command = [*GEOMCLI, "crop-pad", str(photo), "-o", str(tmp_path / "out.png"), *wrong]
    env = hooked(tmp_path)
    with open("/dev/full", "w") as full:
        lost = subprocess.run(command, stderr=full, env=env)
    said = subprocess.run(command, capture_output=True, text=True, env=env)
    assert said.returncode == 2 and "Error: " in said.stderr
    assert lost.returncode == 2
    assert not (tmp_path / "out.png").exists()


def test_the_console_script_is_run() -> None:
    from importlib import metadata

    (script,) = [entry for entry in metadata.entry_points(group="console_scripts") if entry.name == "geomcli"]
    assert script.value == "geomcli.__main__:main"


def test_ctrl_c_while_the_command_line_loads_is_one_line_and_an_end_by_sigint() -> None:
    # The console script imported geomcli.cli itself: a Ctrl-C in its ~30 ms of imports gave
    # Python's traceback.
    script = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'click':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "from geomcli.__main__ import main\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.stderr) == (-signal.SIGINT, "", "Interrupted\n")


def test_pipeline_through_stdin_and_stdout(tensor: Path, tmp_path: Path) -> None:
    back = tmp_path / "back.npy"
    command = (f"cat {tensor} | {' '.join(GEOMCLI)} space-to-depth - -o - --blocksize 2 -q"
               f" | {' '.join(GEOMCLI)} depth-to-space - -o {back} --blocksize 2 -q")
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == ""
    assert np.array_equal(np.load(back), np.load(tensor))


def test_closed_pipe_ends_quietly(photo: Path) -> None:
    command = f"{' '.join(GEOMCLI)} crop-pad {photo} -o - --shape 3000,3000 -q | head -c 10 > /dev/null"
    result = subprocess.run(["bash", "-c", command + "; echo ${PIPESTATUS[0]}"], capture_output=True, text=True)
    assert result.stdout.strip() == "141"
    assert result.stderr == ""


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 143)])
def test_signals_exit_without_a_traceback(tmp_path: Path, signum: int, code: int) -> None:
    out = tmp_path / "out.npy"
    # stdin stays open and empty, so the process is certainly mid-read when the signal lands.
    process = subprocess.Popen([*GEOMCLI, "crop-pad", "-", "-o", str(out), "--shape", "2,2"],
                               stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until_reading_stdin(process)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=20)
    assert process.returncode == code
    assert "Traceback" not in stderr
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_stops_a_shell_loop_over_files(tmp_path: Path) -> None:
    """A terminal's Ctrl-C (SIGINT to the foreground group) in `for f in ...; do geomcli ...; done`:
    geomcli exited 130, which tells bash the program took the Ctrl-C for its own, so the loop ran
    every other file. It now ends by SIGINT (the shell's $? still 130), and the loop stops there."""
    script = tmp_path / "loop.sh"
    script.write_text(f'for f in 1 2 3; do {shlex.join(GEOMCLI)} crop-pad - -o "{tmp_path}/$f.npy" --shape 2,2; '
                      f'echo "ended $?"; done\n')
    # stdin stays open and empty: each geomcli waits in its read
    loop = subprocess.Popen(["bash", str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, env=hooked(tmp_path))
    wait_until_reading_stdin(loop)  # the first geomcli's read
    os.killpg(loop.pid, signal.SIGINT)
    stdout, stderr = loop.communicate(timeout=20)
    assert (loop.returncode, stdout, stderr) == (-signal.SIGINT, "", "Interrupted\n")


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_that_breaks_an_import_still_exits_as_the_signal(
    tensor: Path, monkeypatch: pytest.MonkeyPatch, signum: int, code: int
) -> None:
    """numpy turns a KeyboardInterrupt in its import into an ImportError: a signal's exit code
    and no traceback all the same (a real Ctrl-C hit this about one run in ten)."""
    from geomcli.engine import one_file as transform

    def import_broken_by_the_signal(*args: Any, **kwargs: Any) -> None:
        try:
            signal.raise_signal(signum)
        except (KeyboardInterrupt, SystemExit) as stop:
            raise ImportError("numpy._core.umath failed to import") from stop

    monkeypatch.setattr(transform, "transform_file", import_broken_by_the_signal)
    try:
        result = CliRunner().invoke(cli, ["crop-pad", str(tensor), "-o", "-", "--shape", "1,1,1,1"])
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert result.exit_code == code
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    # and a plain bug after it, in the same process, keeps its traceback
    monkeypatch.setattr(transform, "transform_file", lambda *args, **kwargs: 1 / 0)
    assert isinstance(CliRunner().invoke(cli, ["crop-pad", str(tensor), "-o", "-", "--shape", "1,1,1,1"]).exception,
                      ZeroDivisionError)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_binary_output_to_a_terminal_is_refused(tensor: Path) -> None:
    controller, terminal = pty.openpty()
    result = subprocess.run([*GEOMCLI, "crop-pad", str(tensor), "-o", "-", "--shape", "1,1,1,1"],
                            stdout=terminal, stderr=subprocess.PIPE, text=True)
    os.close(terminal)
    os.close(controller)
    assert result.returncode == 1
    assert "terminal" in result.stderr and "Traceback" not in result.stderr


def test_json_records_go_to_stdout_while_the_progress_bar_shows_on_a_terminal(tmp_path: Path,
                                                                             rng: np.random.Generator) -> None:
    """From a terminal, '--json > run.jsonl' wrote the summary alone there: rich sent each record
    written while its bar showed to the terminal (stderr), wrapped at its width."""
    import threading

    for name in ("a", "b", "c"):
        Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)).save(tmp_path / f"{name}.png")
    controller, terminal = pty.openpty()
    shown = bytearray()

    def drain() -> None:
        try:
            while chunk := os.read(controller, 4096):
                shown.extend(chunk)
        except OSError:  # the terminal's side closed
            pass

    reader = threading.Thread(target=drain)
    reader.start()
    result = subprocess.run([*GEOMCLI, "crop-pad", str(tmp_path / "*.png"), "--out-dir", str(tmp_path / "out"),
                             "--shape", "8,8", "--json"], stdout=subprocess.PIPE, stderr=terminal, text=True)
    os.close(terminal)
    reader.join(timeout=10)
    os.close(controller)
    assert result.returncode == 0
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [record.get("input") for record in records] == [str(tmp_path / f"{name}.png") for name in "abc"] + [None]
    assert records[-1]["status"] == "summary" and b'"command"' not in shown


def test_a_dumb_terminal_gets_the_lines_alone(tmp_path: Path, rng: np.random.Generator) -> None:
    """On a terminal with TERM=dumb (Emacs' shell, a CI log on a pty), where rich draws no bar,
    every batch printed a blank line before its summary."""
    for name in ("a", "b"):
        Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)).save(tmp_path / f"{name}.png")
    controller, terminal = pty.openpty()
    result = subprocess.run([*GEOMCLI, "crop-pad", str(tmp_path / "*.png"), "--out-dir", str(tmp_path / "out"),
                             "--shape", "8,8"], stdout=subprocess.PIPE, stderr=terminal,
                            env={**os.environ, "TERM": "dumb"})
    os.close(terminal)
    shown = os.read(controller, 65536)
    os.close(controller)
    assert result.returncode == 0
    assert re.fullmatch(rb"crop-pad: 2 ok, 0 failed, 0 skipped in [0-9.]+ s\r\n", shown), shown


def test_python_dash_m() -> None:
    result = subprocess.run([*GEOMCLI, "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("geomcli ")


def test_bash_completion_script_and_mode_values() -> None:
    env = {**os.environ, "_GEOMCLI_COMPLETE": "bash_source"}
    script = subprocess.run([*GEOMCLI], capture_output=True, text=True, env=env)
    assert "complete -o nosort -F" in script.stdout
    env = {**os.environ, "_GEOMCLI_COMPLETE": "bash_complete", "COMP_WORDS": "geomcli space-to-depth --mode ",
           "COMP_CWORD": "3"}
    values = subprocess.run([*GEOMCLI], capture_output=True, text=True, env=env).stdout.split()
    assert values == ["plain,DCR", "plain,CRD"]
    env.update(COMP_WORDS="geomcli crop-pad x.npy --layout ", COMP_CWORD="4")
    layouts = subprocess.run([*GEOMCLI], capture_output=True, text=True, env=env).stdout.split()
    assert layouts == [f"plain,{name}" for name in ("NCHW", "NHWC", "CHW", "HWC", "NHW", "HW")]


@pytest.mark.parametrize(("words", "values"), [
    ("geomcli warp --mode ", ["linear", "nearest", "cubic"]),
    ("geomcli grid-sample x.png --mode c", ["cubic"]),
    ("geomcli chain -i x.png warp --mode n", ["nearest"]),
    ("geomcli resize --mode ", ["nearest", "linear", "cubic"]),
])
def test_every_mode_option_completes_its_values(words: str, values: list[str]) -> None:
    # warp's and grid-sample's --mode (checked by a callback, not a Choice) completed to nothing
    env = {"_GEOMCLI_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) -
                                                                                       (not words.endswith(" ")))}
    result = CliRunner().invoke(cli, [], env=env, prog_name="geomcli", catch_exceptions=False)
    assert result.output.split() == [f"plain,{value}" for value in values]


def completed(words: str) -> list[str]:
    env = {"_GEOMCLI_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) -
                                                                                       (not words.endswith(" ")))}
    return CliRunner().invoke(cli, [], env=env, prog_name="geomcli", catch_exceptions=False).output.split()


@pytest.mark.parametrize("words", ["geomcli grid-sample x.png --grid gr", "geomcli warp x.png --theta th",
                                   "geomcli chain -i x.png grid-sample --grid gr", "geomcli affine-grid --theta th",
                                   "geomcli chain -i x.png warp --theta th"])
def test_the_options_naming_a_file_complete_to_paths(words: str) -> None:
    # --grid and --theta (no click.Path: - and inline numbers) completed to nothing, as -o completes to paths
    assert completed(words) == [f"file,{words.split()[-1]}"]


def test_a_chain_completes_a_step_already_given(tmp_path: Path, photo: Path) -> None:
    # click leaves out the steps given, as if none could come again: resize<Tab> after a resize was nothing
    steps = ["crop-pad", "depth-to-space", "grid-sample", "resize", "space-to-depth", "warp"]
    assert completed("geomcli chain -i x.png crop-pad --shape 4,4 resize --sizes 2,2 ") == [f"plain,{step}"
                                                                                           for step in steps]
    assert completed("geomcli chain -i x.png resize --sizes 4,4 res") == ["plain,resize"]
    assert completed("geomcli chain -i x.png resize --sizes 4,4 --mo") == ["plain,--mode"]
    # and a step given twice runs twice
    result = run("chain", "-i", photo, "-o", tmp_path / "o.npy", "resize", "--sizes", "8,8", "resize", "--sizes", "4,4")
    assert result.exit_code == 0 and np.load(tmp_path / "o.npy").shape[:2] == (4, 4)


HEAVY = ("numpy", "PIL", "tifffile", "rich", "ml_dtypes")
PROBE = """
import sys
from geomcli.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write(repr(sorted({name.split('.')[0] for name in sys.modules} & set(%r))))
"""


def imported_heavy(args: list[str], env: dict[str, str] | None = None) -> str:
    result = subprocess.run([sys.executable, "-c", PROBE % (HEAVY,), *args], capture_output=True, text=True,
                            env={**os.environ, **(env or {})})
    return result.stderr.splitlines()[-1]


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["crop-pad", "--help"], ["affine-grid", "-h"],
                                  ["crop-pad", "x.png", "--shape", "1,a", "-o", "y.png"], ["nope"]])
def test_start_up_imports_nothing_heavy(args: list[str]) -> None:
    assert imported_heavy(args) == "[]"


def test_completion_imports_nothing_heavy() -> None:
    env = {"_GEOMCLI_COMPLETE": "bash_complete", "COMP_WORDS": "geomcli space-to-depth --mode ", "COMP_CWORD": "3"}
    assert imported_heavy([], env) == "[]"


def test_a_job_imports_only_its_backends(tensor: Path, photo: Path, tmp_path: Path) -> None:
    png_job = imported_heavy(["crop-pad", str(photo), "-o", str(tmp_path / "o.png"), "--shape", "4,4"])
    assert png_job == "['PIL']"  # no numpy either: a plain image is cropped by Pillow itself
    png_array_job = imported_heavy(["space-to-depth", str(photo), "-o", str(tmp_path / "o.png"), "--blocksize", "2"])
    assert "PIL" in png_array_job and "tifffile" not in png_array_job and "rich" not in png_array_job
    npy_job = imported_heavy(["crop-pad", str(tensor), "-o", str(tmp_path / "o.npy"), "--shape", "1,1,1,1"])
    assert "PIL" not in npy_job and "tifffile" not in npy_job


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_thread_count_does_not_change_the_result(tmp_path: Path, threads: str) -> None:
    data = np.random.default_rng(7).integers(0, 255, (2, 3, 512, 768), dtype=np.uint8)  # over the threading size
    np.save(tmp_path / "in.npy", data)
    for command, args in (("space-to-depth", ["--blocksize", "2"]), ("crop-pad", ["--shape", "2,3,700,700"])):
        out = tmp_path / f"{command}.npy"
        result = CliRunner(env={"GEOMCLI_THREADS": threads}).invoke(
            cli, [command, str(tmp_path / "in.npy"), "-o", str(out), *args], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        expected = (space_depth_ops.space_to_depth(data, 2, threads=1) if command == "space-to-depth"
                    else crop_ops.center_crop_pad(data, [2, 3, 700, 700], threads=1))
        assert np.array_equal(np.load(out), expected)


@pytest.mark.parametrize("threads", ["0", "1025", "99999999999"])
def test_threads_must_be_from_one_to_1024(threads: str, tensor: Path, tmp_path: Path) -> None:
    result = run("space-to-depth", tensor, "-o", tmp_path / "o.npy", "--blocksize", "2", "--threads", threads)
    assert result.exit_code == 2 and "--threads" in result.stderr and "1<=x<=1024" in result.stderr
    assert not (tmp_path / "o.npy").exists()


@pytest.mark.parametrize("how", [["-o", "o.png"], ["--out-dir", "out", "-j", "1"]])
def test_a_malformed_geomcli_scheduler_is_refused_where_it_is_not_used(how: list[str], tmp_path: Path,
                                                                        png_file: FileFactory,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """'GEOMCLI_SCHEDULER=bogus crop-pad a.png -o o.png' exited 0 (as with -j 1 on a batch) where a
    batch refused it, exit 2: a malformed variable is refused as GEOMCLI_THREADS's is, whatever the run."""
    monkeypatch.chdir(tmp_path)
    png_file((6, 6, 3))
    result = run("crop-pad", "a.png", *how, "--shape", "4,4", env={"GEOMCLI_SCHEDULER": "bogus"})
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.endswith("Error: Invalid value for '--scheduler' (env var: 'GEOMCLI_SCHEDULER'): 'bogus' is "
                                  "not local, local:N or a scheduler's address such as tcp://HOST:8786\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.png"]
    # a well-formed one is a default for the jobs it is for: an -o file's is not one of them
    result = run("crop-pad", "a.png", *how, "--shape", "4,4", env={"GEOMCLI_SCHEDULER": "local:2"})
    assert result.exit_code == 0 and (tmp_path / "o.png").exists() != ("-j" in how), result.stderr


def test_the_shared_constants_are_ios() -> None:
    """cli's choices come from geomcli.constants; io keeps its own until it imports them: no drift."""
    from geomcli import constants
    from geomcli.io import _tiff

    assert constants.FORMATS == io.FORMATS
    assert constants.TIFF_COMPRESSIONS == _tiff.COMPRESSIONS
    assert constants.DEFAULT_MAX_PIXELS == io.DEFAULT_MAX_PIXELS


@pytest.mark.parametrize(("shape", "message"), [
    ("-5,10", "'-5,10': a length cannot be negative"),
    # ImageMagick's and ffmpeg's width x height: it was read as H,W, an output 640 high and 480 wide
    ("640x480", "'640x480': give the numbers comma-separated, in the order the option names them (an x is "
                "ambiguous: 640x480 is width x height to ImageMagick and ffmpeg)"),
    ("99999999999999999999,1", "99999999999999999999 does not fit a 64-bit integer"),
])
def test_an_impossible_shape_is_a_usage_error_before_any_file_is_read(photo: Path, tmp_path: Path, shape: str,
                                                                     message: str) -> None:
    for where in (["-o", tmp_path / "one.npy"], ["--out-dir", tmp_path / "many"]):
        result = run("crop-pad", photo, *where, "--shape", shape)
        assert result.exit_code == 2 and f"Error: Invalid value for '--shape': {message}" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["photo.png"]  # nothing written, no --out-dir made


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
def test_a_signal_ignored_by_the_caller_stays_ignored(tmp_path: Path, signum: int) -> None:
    """`geomcli ... &` in a script starts with SIGINT ignored: Ctrl-C at the terminal is not for
    it; nohup starts it with SIGHUP ignored."""
    out = tmp_path / "out.npy"
    process = subprocess.Popen([*GEOMCLI, "crop-pad", "-", "-o", str(out), "--shape", "2,2", "-q"],
                               stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=lambda: signal.signal(signum, signal.SIG_IGN))
    wait_until_reading_stdin(process)
    process.send_signal(signum)
    time.sleep(0.3)
    assert process.poll() is None
    payload = bytes_io.BytesIO()
    np.save(payload, np.ones((3, 3), np.uint8))
    _, stderr = process.communicate(payload.getvalue(), timeout=30)
    assert (process.returncode, stderr) == (0, b"")
    assert np.load(out).shape == (2, 2)


def test_a_closed_standard_descriptor_is_held_for_child_processes_too() -> None:
    code = ("import os; os.close(2); from geomcli.cli.group import _hold_standard_descriptors; "
            "_hold_standard_descriptors(); print(os.get_inheritable(2), os.path.realpath('/proc/self/fd/2'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["True", os.devnull]


@pytest.mark.parametrize(("mode", "args", "warned"), [
    ("RGB", ["crop-pad", "--shape", "6,6,4"], "the result's 4 channels (the input had 3) are written as RGB + alpha"),
    ("L", ["space-to-depth", "--blocksize", "2"],
     "the result's 4 channels (the input had 1) are written as RGB + alpha"),
    ("LA", ["crop-pad", "--shape", "6,6"], None),  # alpha in, alpha out
    ("RGBA", ["crop-pad", "--shape", "6,6"], None),
    ("CHW", ["crop-pad", "--shape", "4,4", "--layout", "CHW"], None),  # a 3×8×8 tensor's width is no channel count
])
def test_channels_grown_to_2_or_4_are_said_to_become_alpha(tmp_path: Path, mode: str, args: list[str],
                                                            warned: str | None) -> None:
    """A PNG takes the last of 2 or 4 channels as transparency: a result whose channels grew to
    that says so (a try-out's RGB padded to 4 channels made an invisible PNG, silently)."""
    from PIL import Image

    source = tmp_path / ("in.npy" if mode == "CHW" else "in.png")
    if mode == "CHW":
        np.save(source, np.zeros((3, 8, 8), np.uint8))
    else:
        Image.new(mode, (8, 8)).save(source)
    command, *options = args
    result = run(command, source, "-o", tmp_path / "out.png", *options)
    assert result.exit_code == 0, result.stderr
    if warned is None:
        assert "alpha" not in result.stderr
    else:
        assert result.exit_code == 0 and f"{warned}: its last channel is the PNG's transparency" in result.stderr


def test_a_channels_first_result_is_written_as_the_image_a_png_holds(tmp_path: Path) -> None:
    """A C×H×W tensor's result to PNG is the H×W×C image of it, said in a warning; its fault is
    judged on that image (a review found a 3×4×6 result refused as '6 channels', and a 3×4×4 one
    written as a 3×4 RGBA image)."""
    from PIL import Image

    from geomcli.ops.center_crop_pad import center_crop_pad

    tensor = np.arange(3 * 8 * 10, dtype=np.uint8).reshape(3, 8, 10)
    np.save(tmp_path / "chw.npy", tensor)
    result = run("crop-pad", tmp_path / "chw.npy", "--layout", "CHW", "--shape", "4,4", "-o", tmp_path / "o.png")
    assert result.exit_code == 0, result.stderr
    assert "the C×H×W result is written as the H×W×C image a PNG holds" in result.stderr
    with Image.open(tmp_path / "o.png") as image:
        assert image.mode == "RGB"
        assert np.array_equal(np.asarray(image), np.moveaxis(center_crop_pad(tensor, [4, 4], axes=[1, 2]), 0, -1))
    refused = run("space-to-depth", tmp_path / "chw.npy", "--layout", "CHW", "--blocksize", "2", "-o",
                  tmp_path / "b.png")
    assert refused.exit_code == 2 and "PNG holds 1 to 4 channels, not 12" in refused.stderr
