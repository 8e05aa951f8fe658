"""resize and chain on files: what the kernels give on the same arrays, the ImageNet recipe as a
chain equal to its steps run one after another, and usage errors before anything is read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run
from PIL import Image

from geomcli.errors import GeomError
from geomcli.ops.center_crop_pad import center_crop_pad
from geomcli.ops.resize import resize


@pytest.fixture
def photo(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, np.ndarray]:
    pixels = rng.integers(0, 256, (30, 45, 3), dtype=np.uint8)
    path = tmp_path / "photo.png"
    Image.fromarray(pixels).save(path, dpi=(72, 72))
    return path, pixels


RECIPE = ["resize", "--sizes", "24,24", "--keep-aspect-ratio-policy", "not_smaller", "--mode", "linear",
          "--antialias", "crop-pad", "--shape", "20,20"]


def test_resize_of_an_image_names_h_and_w(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, pixels = photo
    result = run("resize", path, "-o", tmp_path / "o.npy", "--sizes", "17,61", "--mode", "cubic", "-q")
    assert result.exit_code == 0, result.stderr
    expected = resize(pixels, sizes=[17, 61], mode="cubic", axes=[0, 1])
    found = np.load(tmp_path / "o.npy")
    assert found.shape == (17, 61, 3) and found.dtype == np.uint8 and np.array_equal(found, expected)


def test_resize_of_a_tensor_names_every_axis_or_its_axes(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.normal(size=(1, 3, 8, 12)).astype(np.float32)
    np.save(tmp_path / "t.npy", data)
    assert run("resize", tmp_path / "t.npy", "-o", tmp_path / "a.npy", "--scales", "1,1,0.5,1.5", "--mode", "linear",
               "-q").exit_code == 0
    assert np.array_equal(np.load(tmp_path / "a.npy"), resize(data, scales=[1, 1, 0.5, 1.5], mode="linear"))
    assert run("resize", tmp_path / "t.npy", "-o", tmp_path / "b.npy", "--sizes", "5,7", "--axes", "-2,-1",
               "-q").exit_code == 0
    assert np.array_equal(np.load(tmp_path / "b.npy"), resize(data, sizes=[5, 7], axes=[-2, -1]))
    assert run("resize", tmp_path / "t.npy", "-o", tmp_path / "c.npy", "--sizes", "5,7", "--layout", "NCHW",
               "-q").exit_code == 0
    assert np.load(tmp_path / "c.npy").shape == (1, 3, 5, 7)


def test_not_smaller_rounds_half_up_as_onnx(tmp_path: Path) -> None:
    Image.fromarray(np.zeros((300, 451, 3), np.uint8)).save(tmp_path / "wide.png")
    result = run("resize", tmp_path / "wide.png", "-o", tmp_path / "o.png", "--sizes", "256,256",
                 "--keep-aspect-ratio-policy", "not_smaller", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["output_shape"] == [256, 385, 3]


def test_not_smaller_keeps_square_pixels_square(tmp_path: Path) -> None:
    """Both axes are sampled at the one scale 256/300, so the DPI stays the same on both (it was
    length in over length out: 451/385 on x, 300/256 on y)."""
    Image.fromarray(np.zeros((300, 451, 3), np.uint8)).save(tmp_path / "wide.png", dpi=(72, 72))
    assert run("resize", tmp_path / "wide.png", "-o", tmp_path / "o.png", "--sizes", "256,256",
               "--keep-aspect-ratio-policy", "not_smaller", "-q").exit_code == 0
    with Image.open(tmp_path / "o.png") as image:
        assert image.size == (385, 256)
        assert image.info["dpi"][0] == image.info["dpi"][1] == pytest.approx(72 * 256 / 300, abs=0.02)


def test_a_roi_that_flips_an_axis_keeps_a_positive_dpi(tmp_path: Path) -> None:
    """A roi whose start is past its end samples the axis backwards (x_in = a·x_out + b, a < 0):
    its pixels are |a| input pixels apart. The negative DPI was Pillow's OverflowError, a traceback."""
    Image.fromarray(np.zeros((40, 60, 3), np.uint8)).save(tmp_path / "in.png", dpi=(72, 72))
    result = run("resize", tmp_path / "in.png", "-o", tmp_path / "o.png", "--sizes", "20,60,3",
                 "--coordinate-transformation-mode", "tf_crop_and_resize", "--roi", "1,0,0,0,1,1", "-q")
    assert result.exit_code == 0, result.stderr
    with Image.open(tmp_path / "o.png") as image:
        assert image.info["dpi"] == pytest.approx((72, 72 * 19 / 39), abs=0.02)  # y: 39/19 input pixels a step


def test_dpi_follows_the_pixels(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = photo
    assert run("resize", path, "-o", tmp_path / "o.png", "--scales", "2,3", "-q").exit_code == 0
    with Image.open(tmp_path / "o.png") as image:
        assert image.size == (135, 60)
        assert [round(value) for value in image.info["dpi"]] == [216, 144]


def test_resize_usage_errors(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = photo
    neither = run("resize", path, "-o", tmp_path / "o.png")
    both = run("resize", path, "-o", tmp_path / "o.png", "--sizes", "4,4", "--scales", "2,2")
    assert neither.exit_code == both.exit_code == 2 and "give exactly one of --sizes and --scales" in both.stderr
    assert not (tmp_path / "o.png").exists()


@pytest.mark.parametrize(("options", "message"), [
    (["--scales", "0,2"], "resize: scales must be > 0 and finite in float32, found 0.0 at index 0"),
    (["--scales", "nan,1"], "resize: scales must be > 0 and finite in float32, found nan at index 0"),
    (["--sizes", "0,5"], "resize: sizes must be >= 1, found 0 at index 0"),
    (["--sizes", "5,5", "--antialias"], "resize: antialias is undefined for mode nearest; use linear or cubic"),
    (["--sizes", "5,5", "--exclude-outside"], "resize: exclude_outside is undefined for mode nearest"),
    (["--sizes", "5,5", "--mode", "linear", "--coordinate-transformation-mode", "tf_crop_and_resize"],
     "resize: coordinate_transformation_mode tf_crop_and_resize needs roi, found none"),
])
def test_options_wrong_whatever_the_files_are_one_usage_error(photo: tuple[Path, np.ndarray], tmp_path: Path,
                                                              options: list[str], message: str) -> None:
    """Exit 2 before any file is read, with -o as with --out-dir, in resize as in a chain's step
    (they were each file's failure, exit 1, under -o and in a batch's workers)."""
    path, _ = photo
    for result in (run("resize", path, "-o", tmp_path / "o.png", *options),
                   run("resize", path, path, "--out-dir", tmp_path / "out", *options),
                   run("chain", "-i", path, "-o", tmp_path / "o.png", "resize", *options)):
        assert result.exit_code == 2, result.stderr
        assert result.stderr.count(message) == 1 and "Traceback" not in result.stderr, result.stderr
    assert not (tmp_path / "o.png").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("command", "options", "message"), [
    ("crop-pad", ["--shape", "4,4", "--axes", "0"], "2 values for 1 axis: give one value per axis"),
    ("resize", ["--sizes", "4", "--axes", "0,1"], "1 value for 2 axes: give one value per axis"),
    ("resize", ["--scales", "2,2,1", "--axes", "0,1"], "3 values for 2 axes: give one value per axis"),
    ("resize", ["--sizes", "4,4", "--axes", "0,0"], "axis 0 is given twice"),
    ("crop-pad", ["--shape", "4,4", "--axes", "1,1"], "axis 1 is given twice"),
])
def test_values_that_do_not_match_axes_are_one_usage_error(tmp_path: Path, command: str, options: list[str],
                                                            message: str) -> None:
    """Exit 2 before any input is read (this one does not exist), alone, in a batch and in a chain."""
    missing = tmp_path / "missing.png"
    for result in (run(command, missing, "-o", tmp_path / "o.png", *options),
                   run(command, missing, missing, "--out-dir", tmp_path / "out", *options),
                   run("chain", "-i", missing, "-o", tmp_path / "o.png", command, *options)):
        assert result.exit_code == 2, result.stderr
        assert result.stderr.count(message) == 1 and "missing.png" not in result.stderr, result.stderr
    assert not (tmp_path / "o.png").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("command", "option"), [("crop-pad", "--shape"), ("resize", "--sizes")])
def test_one_value_for_an_image_says_what_an_image_takes(photo: tuple[Path, np.ndarray], tmp_path: Path,
                                                         command: str, option: str) -> None:
    path, pixels = photo
    result = run(command, path, "-o", tmp_path / "o.png", option, "4")
    assert result.exit_code == 2 and not (tmp_path / "o.png").exists()
    assert result.stderr == (f"Error: {path}: {option} has 1 value for an input of shape {pixels.shape} (HWC): "
                             f"give 2 (H,W), 3 (one per axis), or name the axes with --axes\n"), result.stderr


@pytest.mark.parametrize("option", [["-j", "2"], ["--out-dir", "out"], ["--json"]])
def test_a_chain_option_after_a_step_says_where_it_goes(tmp_path: Path, option: list[str]) -> None:
    result = run("chain", "-i", tmp_path / "missing.png", "-o", tmp_path / "o.png", "resize", "--sizes", "4,4",
                 *option)
    assert result.exit_code == 2, result.stderr
    assert (f"Error: No such option '{option[0]}'. {option[0]} is the chain's own option: give it before the "
            "first step.") in result.stderr, result.stderr


ITS_OWN_I = "A chain reads each input given with its own -i, before the first step: -i INPUT [-i INPUT ...]."


@pytest.mark.parametrize("given", ["photo", "-"])
def test_a_chain_input_given_as_the_other_commands_take_it_says_it_is_given_with_i(
        photo: tuple[Path, np.ndarray], tmp_path: Path, given: str) -> None:
    path, _ = photo
    name = str(path) if given == "photo" else given
    result = run("chain", name, "-o", tmp_path / "o.png", "crop-pad", "--shape", "3,3", stdin=path.read_bytes())
    assert result.exit_code == 2 and not (tmp_path / "o.png").exists()
    assert (f"Error: No such command '{name}'. {ITS_OWN_I}\n"
            in result.stderr), result.stderr
    result = run("chain", "-o", tmp_path / "o.png", "crop-pad", "--shape", "3,3")
    assert result.exit_code == 2
    assert "Error: give -i INPUT, or --files-from FILE with --out-dir\n" in result.stderr  # (it said "an INPUT")


@pytest.mark.parametrize(("option", "steps"), [("--sizes", "the resize step"),
                                               ("--fill", "the crop-pad, grid-sample, warp steps")])
def test_a_steps_option_before_the_steps_says_where_it_goes(tmp_path: Path, option: str, steps: str) -> None:
    """The mirror of a chain option after a step: click guessed a chain option ("Did you mean '--series'?")."""
    result = run("chain", "-i", tmp_path / "missing.png", "-o", tmp_path / "o.png", option, "4", "resize", "--sizes",
                 "4,4")
    assert result.exit_code == 2 and not (tmp_path / "o.png").exists()
    assert result.stderr.splitlines()[-1] == (f"Error: No such option '{option}'. {option} is an option of {steps}: "
                                              "give it after the step's name."), result.stderr


@pytest.mark.parametrize(("step", "option", "steps"), [
    ("resize", "--grid", "the grid-sample step"), ("crop-pad", "--sizes", "the resize step"),
    ("resize", "--blocksize", "the space-to-depth, depth-to-space steps")])
def test_another_steps_option_says_which_step_takes_it(tmp_path: Path, step: str, option: str, steps: str) -> None:
    """resize --sizes 4,4 --grid g.npy (the grid-sample step left out): click guessed "Did you mean '--roi'?"."""
    result = run("chain", "-i", tmp_path / "missing.png", "-o", tmp_path / "o.png", step, option, "4")
    assert result.exit_code == 2 and not (tmp_path / "o.png").exists()
    assert result.stderr.splitlines()[-1] == (f"Error: No such option '{option}'. {option} is an option of {steps}, "
                                              f"not of {step}: give it after that step's name."), result.stderr


@pytest.mark.parametrize(("options", "warning"), [
    (["--sizes", "6,6", "--mode", "linear", "--cubic-coeff-a", "-0.5"],
     "--cubic-coeff-a is for --mode cubic, not linear; ignored"),
    (["--sizes", "6,6", "--mode", "cubic", "--nearest-mode", "floor"],
     "--nearest-mode is for --mode nearest, not cubic; ignored"),
    (["--sizes", "6,6", "--roi", "0,0,1,1"], "--roi is for tf_crop_and_resize, not half_pixel; ignored"),
    (["--sizes", "6,6", "--coordinate-transformation-mode", "asymmetric", "--extrapolation-value", "9"],
     "--extrapolation-value is for tf_crop_and_resize, not asymmetric; ignored"),
    (["--scales", "0.5,0.5", "--keep-aspect-ratio-policy", "not_larger"],
     "--keep-aspect-ratio-policy is for --sizes, not --scales; ignored"),
])
def test_an_option_the_spec_ignores_here_is_a_warning(photo: tuple[Path, np.ndarray], tmp_path: Path,
                                                      options: list[str], warning: str) -> None:
    """Written as without it (the spec ignores it), with one warning, in the summary and the record;
    in a chain the warning names the step. The summary line and the record's parameters are the
    run's, as without it (a try-out read roi=[0.0, 0.0, 1.0, 1.0] just after the warning)."""
    path, _ = photo
    alone = run("resize", path, "-o", tmp_path / "a.png", *options)
    assert alone.exit_code == 0 and alone.stderr.count(f"Warning: {tmp_path / 'a.png'}: {warning}\n") == 1
    chained = run("chain", "-i", path, "-o", tmp_path / "c.png", "--json", "resize", *options)
    assert chained.exit_code == 0 and json.loads(chained.stdout)["warnings"] == [f"resize: {warning}"]
    plain = [option for option in options if option not in options[-2:]]
    plain_record = json.loads(run("resize", path, "-o", tmp_path / "p.png", "--json", *plain).stdout)
    assert (np.asarray(Image.open(tmp_path / "a.png")) == np.asarray(Image.open(tmp_path / "p.png"))).all()
    name = options[-2].removeprefix("--").replace("-", "_")
    assert f" {name}=" not in alone.stderr
    assert json.loads(run("resize", path, "-o", tmp_path / "a.png", "--json", *options).stdout)["parameters"] == (
        plain_record["parameters"])
    assert json.loads(chained.stdout)["parameters"]["steps"] == [{"command": "resize", **plain_record["parameters"]}]
    # a batch says it once, of the options, not of whichever file came first (found by a try-out)
    batch = run("resize", path, tmp_path / "a.png", "--out-dir", tmp_path / "out", *options)
    assert batch.exit_code == 0 and f"Warning: resize: {warning}\n" in batch.stderr
    assert batch.stderr.count(warning) == 1, batch.stderr


def test_a_warning_of_a_repeated_step_names_which(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    """Two resize steps that each ignore --roi warned twice alike ('resize: --roi is for ...'):
    which step the line was about could not be told. A command given once still names it alone."""
    path, _ = photo
    ignored = "--roi is for tf_crop_and_resize, not half_pixel; ignored"
    result = run("chain", "-i", path, "-o", tmp_path / "c.npy", "--json", "resize", "--scales", "2,2", "--roi",
                 "0,0,1,1", "crop-pad", "--shape", "8,8", "resize", "--sizes", "4,4", "--roi", "0,0,1,1")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == [f"step 1 (resize): {ignored}", f"step 3 (resize): {ignored}"]
    text = run("chain", "-i", path, "-o", tmp_path / "c.npy", "crop-pad", "--shape", "8,8", "resize", "--sizes",
               "4,4", "--roi", "0,0,1,1", "--cubic-coeff-a", "-0.5", "resize", "--sizes", "2,2")
    assert text.exit_code == 0 and text.stderr.splitlines()[:2] == [
        f"Warning: {tmp_path / 'c.npy'}: step 2 (resize): --cubic-coeff-a is for --mode cubic, not nearest; ignored",
        f"Warning: {tmp_path / 'c.npy'}: step 2 (resize): {ignored}"]
    once = run("chain", "-i", path, "-o", tmp_path / "c.npy", "--json", "crop-pad", "--shape", "8,8", "resize",
               "--sizes", "4,4", "--roi", "0,0,1,1")
    assert json.loads(once.stdout)["warnings"] == [f"resize: {ignored}"]


def test_an_ignored_roi_is_not_shown_as_used(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(24, dtype=np.float32).reshape(4, 6))
    result = run("resize", tmp_path / "a.npy", "-o", tmp_path / "b.npy", "--sizes", "8,12", "--roi", "0,0,1,1")
    assert result.exit_code == 0
    warning, line = result.stderr.splitlines()
    assert warning == f"Warning: {tmp_path / 'b.npy'}: --roi is for tf_crop_and_resize, not half_pixel; ignored"
    assert line.startswith(f"resize {tmp_path / 'a.npy'} → {tmp_path / 'b.npy'}: 4×6 float32 → 8×12 float32 "
                           "range [0, 23] sizes=[8, 12] mode=nearest in ")


OUTSIDE = ["--sizes", "8,8", "--coordinate-transformation-mode", "tf_crop_and_resize", "--roi", "-1,-1,2,2"]


@pytest.mark.parametrize(("value", "reason"), [
    ("nan", "not a whole number in [0, 255]"), ("1e10", "not a whole number in [0, 255]"),
    ("-1", "not a whole number in [0, 255]"), ("0.5", "not a whole number in [0, 255]")])
def test_an_extrapolation_value_the_dtype_cannot_hold_is_refused_as_a_fill_is(
        photo: tuple[Path, np.ndarray], tmp_path: Path, value: str, reason: str) -> None:
    """On uint8 pixels --extrapolation-value nan wrote 0 and 1e10 wrote 255, exit 0, where warp's
    and crop-pad's --fill refuse what the dtype cannot hold: now one line, exit 2, nothing written;
    as a chain's step and in a batch too."""
    path, _ = photo
    refusal = f"resize: extrapolation_value {float(value)!r} does not fit data's dtype uint8: {reason}"
    alone = run("resize", path, "-o", tmp_path / "o.npy", *OUTSIDE, "--extrapolation-value", value)
    assert alone.exit_code == 2 and not (tmp_path / "o.npy").exists()
    assert alone.stderr == f"Error: {path}: {refusal} (judged from data's dtype alone)\n"
    chained = run("chain", "-i", path, "-o", tmp_path / "c.npy", "resize", *OUTSIDE, "--extrapolation-value", value)
    assert chained.exit_code == 2 and not (tmp_path / "c.npy").exists()
    assert f"Error: {path}: step 1: {refusal}" in chained.stderr
    batch = run("resize", path, "--out-dir", tmp_path / "out", *OUTSIDE, "--extrapolation-value", value)
    assert batch.exit_code == 2 and not list((tmp_path / "out").glob("*")) and refusal in batch.stderr


def test_an_extrapolation_value_the_dtype_holds_is_written(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, pixels = photo
    assert run("resize", path, "-o", tmp_path / "o.npy", *OUTSIDE, "--extrapolation-value", "255").exit_code == 0
    expected = resize(pixels, [-1, -1, 2, 2], sizes=[8, 8], axes=[0, 1],
                      coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=255)
    assert np.array_equal(np.load(tmp_path / "o.npy"), expected) and (expected[0] == 255).all()
    np.save(tmp_path / "f.npy", pixels.astype(np.float32))
    assert run("resize", tmp_path / "f.npy", "-o", tmp_path / "f_out.npy", "--layout", "HWC", *OUTSIDE,
               "--extrapolation-value", "nan").exit_code == 0
    assert np.isnan(np.load(tmp_path / "f_out.npy")[0]).all()


def test_resizing_an_images_channels_is_a_warning(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    """The spec resizes every axis it is given: three --sizes on an RGB image resample its
    channels as pixels (one value: the nearest channel), which a try-out met without a word."""
    path, pixels = photo
    result = run("resize", path, "-o", tmp_path / "g.png", "--sizes", "6,6,1", "--json")
    assert result.exit_code == 0
    record = json.loads(result.stdout)
    assert record["output_shape"] == [6, 6]  # one channel: the PNG is grey, H×W
    assert record["warnings"] == [f"the channel axis is resized ({pixels.shape[2]} -> 1): channels are resampled "
                                  "as pixels are"]
    chained = run("chain", "-i", path, "-o", tmp_path / "c.png", "--json", "resize", "--sizes", "6,6,1")
    assert json.loads(chained.stdout)["warnings"] == [f"resize: {record['warnings'][0]}"]
    kept = run("resize", path, "-o", tmp_path / "k.png", "--sizes", f"6,6,{pixels.shape[2]}", "--json")
    assert json.loads(kept.stdout)["warnings"] == []


def test_the_json_output_shape_is_the_written_images(tmp_path: Path, rng: np.random.Generator) -> None:
    """An image format writes a C×H×W result as H×W×C and one channel as H×W: --json said the
    array's [3, 8, 12] and [8, 12, 1] of PNGs that hold 8×12×3 and 8×12 (the run and --dry-run)."""
    np.save(tmp_path / "chw.npy", rng.integers(0, 256, (3, 4, 6), dtype=np.uint8))
    Image.fromarray(rng.integers(0, 256, (4, 6, 4), dtype=np.uint8)).save(tmp_path / "rgba.png")
    runs = {"chw.png": ["resize", tmp_path / "chw.npy", "--layout", "CHW", "--sizes", "8,12"],
            "grey.png": ["depth-to-space", tmp_path / "rgba.png", "--blocksize", "2"],
            "chained.png": ["chain", "-i", tmp_path / "rgba.png", "depth-to-space", "--blocksize", "2"]}
    for name, command in runs.items():
        head = 3 if command[0] == "chain" else 2
        result = run(*command[:head], "-o", tmp_path / name, "--json", *command[head:])
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["output_shape"] == list(np.asarray(Image.open(tmp_path / name)).shape)
    planned = run(*runs["chw.png"], "--out-dir", tmp_path / "out", "--name", "{stem}.png", "--dry-run", "--json")
    assert json.loads(planned.stdout.splitlines()[0])["output_shape"] == [8, 12, 3]
    kept = run(*runs["grey.png"], "-o", tmp_path / "grey.npy", "--json")  # a .npy holds the channel axis
    assert json.loads(kept.stdout)["output_shape"] == [8, 12, 1] == list(np.load(tmp_path / "grey.npy").shape)


def test_options_used_by_the_mode_give_no_warning(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = photo
    result = run("resize", path, "-o", tmp_path / "a.png", "--sizes", "6,6", "--mode", "cubic", "--cubic-coeff-a",
                 "-0.5", "--exclude-outside", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == []


def test_a_step_usage_error_names_its_step(tmp_path: Path) -> None:
    result = run("chain", "-i", tmp_path / "missing.png", "-o", tmp_path / "o.png", "resize", "--sizes", "4,4",
                 "crop-pad", "--shape", "2,2", "resize")
    assert result.exit_code == 2
    assert "Error: the resize step: give exactly one of --sizes and --scales" in result.stderr, result.stderr


def test_stacks_of_grey_take_h_and_w(tmp_path: Path) -> None:
    """Pages of grey in a TIFF, and an animated GIF's frames (--frames all), are stacks of images:
    two --sizes or --shape values name H and W, frame by frame, and a GIF's frames keep their T
    axis in a TIFF output (found by a try-out: 'sizes has 2 values for rank 3')."""
    import tifffile

    rng = np.random.default_rng(5)
    pages = rng.integers(0, 256, (3, 8, 10), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "pages.tif", pages, photometric="minisblack")
    frames = [Image.fromarray(page) for page in pages]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:])
    result = run("resize", tmp_path / "pages.tif", "-o", tmp_path / "r.npy", "--sizes", "4,5", "--mode", "linear")
    assert result.exit_code == 0, result.stderr
    expected = resize(pages, sizes=[4, 5], axes=[1, 2], mode="linear")
    assert np.array_equal(np.load(tmp_path / "r.npy"), expected)
    result = run("crop-pad", tmp_path / "anim.gif", "-o", tmp_path / "c.tiff", "--shape", "4,4", "--frames", "all")
    assert result.exit_code == 0 and "Warning" not in result.stderr, result.stderr
    with tifffile.TiffFile(tmp_path / "c.tiff") as tif:
        assert tif.series[0].axes == "TYXS" and tif.series[0].shape == (3, 4, 4, 3)  # a GIF reads as RGB


def test_the_imagenet_chain_equals_its_steps_one_after_another(photo: tuple[Path, np.ndarray],
                                                               tmp_path: Path) -> None:
    path, pixels = photo
    result = run("chain", "-i", path, "-o", tmp_path / "chained.npy", *RECIPE)
    assert result.exit_code == 0, result.stderr
    assert run("resize", path, "-o", tmp_path / "step1.npy", *RECIPE[1:8], "-q").exit_code == 0
    assert run("crop-pad", tmp_path / "step1.npy", "--layout", "HWC", "-o", tmp_path / "step2.npy", *RECIPE[9:],
               "-q").exit_code == 0
    chained, stepwise = np.load(tmp_path / "chained.npy"), np.load(tmp_path / "step2.npy")
    assert chained.shape == (20, 20, 3) and np.array_equal(chained, stepwise)
    direct = center_crop_pad(resize(pixels, sizes=[24, 24], mode="linear", antialias=True, axes=[0, 1],
                                    keep_aspect_ratio_policy="not_smaller"), [20, 20], axes=[0, 1])
    assert np.array_equal(chained, direct)


@pytest.mark.parametrize(("steps", "fused"), [
    (RECIPE, True),  # the crop only crops: one pass makes the crop's window of the resize
    (["resize", "--scales", "0.5,0.5", "--mode", "cubic", "crop-pad", "--shape", "12,30"], False),  # it pads W
    (["resize", "--sizes", "20,30", "--mode", "linear", "crop-pad", "--shape", "9,9", "--fill", "0"], False),
    (["resize", "--sizes", "40,50,3", "--mode", "linear", "crop-pad", "--shape", "33,41,2", "resize", "--scales",
      "0.5,0.5"], True),  # a crop of the channels too, a step after
])
def test_a_resize_and_the_crop_after_it_are_made_in_one_pass_where_it_only_crops(
        photo: tuple[Path, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: list[str],
        fused: bool) -> None:
    """Chain._resized_and_cropped: the same bytes as the steps one at a time (the chain's .npy
    against each step's arrays through the kernels), made in one pass where the crop pads nowhere."""
    from geomcli.engine import operations

    path, pixels = photo
    windows: list[tuple[slice, ...]] = []
    apply_window = operations.Resize.apply_window
    monkeypatch.setattr(operations.Resize, "apply_window",
                        lambda self, loaded, common, window: windows.append(window) or apply_window(self, loaded,
                                                                                                 common, window))
    result = run("chain", "-i", path, "-o", tmp_path / "chained.npy", "-q", *steps)
    assert result.exit_code == 0, result.stderr
    assert bool(windows) is fused
    expected = pixels
    for name, *options in _steps(steps):
        flags = {"--antialias": True} if "--antialias" in options else {}
        options = [option for option in options if option != "--antialias"]
        expected = _by_kernel(name, {**dict(zip(options[::2], options[1::2])), **flags}, expected)
    assert np.array_equal(np.load(tmp_path / "chained.npy"), expected)


def _steps(arguments: list[str]) -> list[list[str]]:
    found: list[list[str]] = []
    for argument in arguments:
        if argument in ("resize", "crop-pad"):
            found.append([argument])
        else:
            found[-1].append(argument)
    return found


def _by_kernel(name: str, values: dict[str, object], data: np.ndarray) -> np.ndarray:
    def numbers(text: object, kind: type) -> list[Any]:
        return [kind(part) for part in str(text).split(",")]

    if name == "crop-pad":
        target = numbers(values["--shape"], int)
        axes = [0, 1] if len(target) == 2 else None
        return center_crop_pad(data, target, axes=axes)
    given = numbers(values["--sizes"], int) if "--sizes" in values else numbers(values["--scales"], float)
    axes = [0, 1] if len(given) == 2 else None
    key = "sizes" if "--sizes" in values else "scales"
    return resize(data, axes=axes, mode=str(values.get("--mode", "nearest")), antialias=bool(values.get("--antialias")),
                  keep_aspect_ratio_policy=str(values.get("--keep-aspect-ratio-policy", "stretch")), **{key: given})


def test_a_1_bit_image_takes_nearest_only_and_says_so_before_anything_is_written(tmp_path: Path) -> None:
    """A 1-bit PNG reads as bool: linear and cubic are a usage fault its header shows, exit 2 (a
    try-out found exit 1), in a chain as alone; grid-sample judges its mode so too."""
    Image.fromarray(np.eye(8, dtype=bool)).save(tmp_path / "bw.png")
    chained = run("chain", "-i", tmp_path / "bw.png", "-o", tmp_path / "o.png", "resize", "--sizes", "4,4", "--mode",
                  "linear")
    assert chained.exit_code == 2
    assert "bw.png: step 1: resize: bool data takes mode nearest only, found mode linear" in chained.stderr
    grid = tmp_path / "grid.npy"
    np.save(grid, np.zeros((1, 4, 4, 2), np.float32))
    sampled = run("grid-sample", tmp_path / "bw.png", "--grid", grid, "-o", tmp_path / "g.png")
    assert sampled.exit_code == 2 and "bool data takes mode 'nearest' only" in sampled.stderr
    warped = run("warp", tmp_path / "bw.png", "--rotate", "10", "-o", tmp_path / "w.png")
    assert warped.exit_code == 2 and "bool data takes mode 'nearest' only" in warped.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bw.png", "grid.npy"]
    nearest = run("chain", "-i", tmp_path / "bw.png", "-o", tmp_path / "o.png", "-q", "resize", "--sizes", "4,4")
    assert nearest.exit_code == 0


@pytest.mark.parametrize(("steps", "message"), [
    (["crop-pad", "--shape", "64,64", "crop-pad", "--shape", "10,10,3,3"],
     "step 2 (crop-pad): --shape has 4 values for an input of shape (64, 64, 3)"),
    (["resize", "--sizes", "5000,5000", "crop-pad", "--shape", "10,10"],
     "step 1 (resize): the output (5000, 5000, 3): 75000000 elements exceed the limit of 1000000"),
])
def test_a_steps_error_names_the_step(photo: tuple[Path, np.ndarray], tmp_path: Path, steps: list[str],
                                      message: str) -> None:
    """The shapes in a step's error are of what that step reads, not the file's: the step is named
    (a try-out read a later step's error as the file's own)."""
    path, _ = photo
    result = run("chain", "-i", path, "-o", tmp_path / "o.npy", "--max-pixels", "1000000", *steps)
    assert result.exit_code == 2 and f"photo.png: {message}" in result.stderr
    assert not (tmp_path / "o.npy").exists()


def test_layout_names_the_tensors_of_a_folder_and_images_keep_their_own(tmp_path: Path,
                                                                       rng: np.random.Generator) -> None:
    """--layout HWC over HWC .npy tensors beside a grey PNG (H×W): the PNG is read as the image it
    is, not refused; an RGB image given --layout CHW is still H×W×C, with a warning (a try-out
    found the first refused and the second resized as C×H×W, silently)."""
    folder = tmp_path / "in"
    folder.mkdir()
    tensor = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    grey = rng.integers(0, 256, (20, 30), dtype=np.uint8)
    np.save(folder / "t.npy", tensor)
    Image.fromarray(grey).save(folder / "g.png")
    result = run("chain", "-i", folder, "--layout", "HWC", "--out-dir", tmp_path / "out", "--name", "{stem}.npy",
                 "resize", "--sizes", "10,12", "--mode", "linear")
    assert result.exit_code == 0, result.stderr
    assert "--layout HWC is for tensors: this PNG image is read as HW" in result.stderr
    expected = resize(tensor, sizes=[10, 12], axes=[0, 1], mode="linear")
    assert np.array_equal(np.load(tmp_path / "out" / "t.npy"), expected)
    assert np.array_equal(np.load(tmp_path / "out" / "g.npy"), resize(grey, sizes=[10, 12], mode="linear"))
    alone = run("resize", folder / "g.png", "--layout", "HWC", "-o", tmp_path / "one.npy", "--sizes", "10,12")
    assert alone.exit_code == 0 and np.load(tmp_path / "one.npy").shape == (10, 12)


def test_a_chain_reports_every_steps_shape(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = photo
    result = run("chain", "-i", path, "-o", tmp_path / "o.png", "--json", *RECIPE)
    record = json.loads(result.stdout)
    assert [(step["command"], step["output_shape"]) for step in record["steps"]] == [
        ("resize", [24, 36, 3]), ("crop-pad", [20, 20, 3])]
    planned = run("chain", "-i", tmp_path, "--out-dir", tmp_path / "out", "--dry-run", "--json", *RECIPE)
    first = json.loads(planned.stdout.splitlines()[0])
    assert first["output_shape"] == [20, 20, 3] and len(first["steps"]) == 2
    assert not (tmp_path / "out").exists()
    # a file that cannot be read has the key too, null (it had none: record["steps"] was a KeyError)
    (tmp_path / "cut.png").write_bytes(path.read_bytes()[:40])
    for extra in ((), ("--dry-run",)):
        records = [json.loads(line) for line in run("chain", "-i", tmp_path, "--out-dir", tmp_path / "out", "--json",
                                                    *extra, *RECIPE).stdout.splitlines()[:-1]]
        assert [(record["status"], record["steps"] is None) for record in records] == [
            ("error", True), ("ok", False), ("ok", False)]  # cut.png, o.png, photo.png


def test_a_chain_a_step_refuses_reports_the_steps_before_it(tmp_path: Path) -> None:
    """A 15x15 resize cannot take blocksize 2: the dry run's record (and the refused run's) had
    "steps": null though the header was read. The steps up to the refusing one have their shapes;
    it and those after it have output_shape null."""
    (tmp_path / "b2").mkdir()
    Image.new("RGB", (40, 30)).save(tmp_path / "b2" / "a.png")
    steps = ["resize", "--sizes", "15,15", "space-to-depth", "--blocksize", "2", "crop-pad", "--shape", "2,2"]
    for extra in (("--dry-run",), ()):
        result = run("chain", "-i", tmp_path / "b2" / "*.png", "--out-dir", tmp_path / "out", "--name", "{stem}.npy",
                     "--json", *extra, *steps)
        assert result.exit_code == 2 and not (tmp_path / "out").exists()
        record = json.loads(result.stdout.splitlines()[0])
        assert record["status"] == "error" and "height 15 is not divisible by blocksize 2" in record["error"]
        assert [(step["command"], step["output_shape"]) for step in record["steps"]] == [
            ("resize", [15, 15, 3]), ("space-to-depth", None), ("crop-pad", None)]
        assert [{key: value for key, value in step.items() if key != "output_shape"} for step in record["steps"]] \
            == record["parameters"]["steps"]


def test_one_file_a_chain_step_refuses_reports_the_steps_before_it(tmp_path: Path) -> None:
    """The -o run's record of the same refusal had "steps": null, where the batch's gives them."""
    Image.new("RGB", (40, 30)).save(tmp_path / "a.png")
    steps = ["resize", "--sizes", "15,15", "space-to-depth", "--blocksize", "2", "crop-pad", "--shape", "2,2"]
    result = run("chain", "-i", tmp_path / "a.png", "-o", tmp_path / "o.npy", "--json", *steps)
    assert result.exit_code == 2 and not (tmp_path / "o.npy").exists()
    record = json.loads(result.stdout)
    assert record["status"] == "error" and "height 15 is not divisible by blocksize 2" in record["error"]
    assert [(step["command"], step["output_shape"]) for step in record["steps"]] == [
        ("resize", [15, 15, 3]), ("space-to-depth", None), ("crop-pad", None)]
    # a zarr's, judged from its header alone, too
    assert run("crop-pad", tmp_path / "a.png", "-o", tmp_path / "a.zarr", "--shape", "30,40", "-q").exit_code == 0
    result = run("chain", "-i", tmp_path / "a.zarr", "-o", tmp_path / "o.zarr", "--layout", "HWC", "--json", *steps)
    assert result.exit_code == 2 and not (tmp_path / "o.zarr").exists()
    assert [(step["command"], step["output_shape"]) for step in json.loads(result.stdout)["steps"]] == [
        ("resize", [15, 15, 3]), ("space-to-depth", None), ("crop-pad", None)]


def test_a_chain_carries_metadata_through_every_step(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = photo
    assert run("chain", "-i", path, "-o", tmp_path / "o.png", "-q", "resize", "--scales", "2,2", "crop-pad",
               "--shape", "10,10").exit_code == 0
    with Image.open(tmp_path / "o.png") as image:
        assert [round(value) for value in image.info["dpi"]] == [144, 144]


def test_a_chain_over_a_folder_with_workers(tmp_path: Path, rng: np.random.Generator) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for index in range(5):
        Image.fromarray(rng.integers(0, 256, (30 + index, 40, 3), dtype=np.uint8)).save(folder / f"{index}.jpg")
    one = run("chain", "-i", folder, "--out-dir", tmp_path / "one", "-j", "1", *RECIPE)
    two = run("chain", "-i", f"{folder}/*.jpg", "--out-dir", tmp_path / "two", "-j", "2", *RECIPE)
    assert one.exit_code == two.exit_code == 0, two.stderr
    assert "chain: 5 ok, 0 failed, 0 skipped" in two.stderr
    for index in range(5):
        assert (tmp_path / "one" / f"{index}.jpg").read_bytes() == (tmp_path / "two" / f"{index}.jpg").read_bytes()


def test_a_chain_is_pickled_for_a_worker_without_the_headers_it_walked() -> None:
    """-j starts its workers from a thread, pickling the chain, while this process does files
    itself and adds to the chain's walked headers: pickling them failed at random (CI:
    'dictionary changed size during iteration'). A worker's chain starts with none."""
    import pickle

    from geomcli import io
    from geomcli.engine.operations import Chain, CropPad
    from geomcli.engine.options import Common

    chain = Chain((CropPad((2, 2)),))
    for height in range(3, 8):
        chain.output_shape(io.Header("png", (height, 5, 3), np.dtype(np.uint8), 1, None, "HWC"), Common())
    assert len(chain.walked) == 5
    sent = pickle.loads(pickle.dumps(chain))
    assert sent.walked == {} and sent.steps == chain.steps and len(chain.walked) == 5
    assert sent.output_shape(io.Header("png", (9, 5, 3), np.dtype(np.uint8), 1, None, "HWC"), Common()) == (2, 2, 3)


def test_a_chain_with_sampling_steps(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = photo
    assert run("chain", "-i", path, "-o", tmp_path / "a.npy", "-q", "warp", "--rotate", "30", "space-to-depth",
               "--blocksize", "3").exit_code == 0
    assert run("warp", path, "--rotate", "30", "-o", tmp_path / "w.npy", "-q").exit_code == 0
    assert run("space-to-depth", tmp_path / "w.npy", "--layout", "HWC", "--blocksize", "3", "-o", tmp_path / "b.npy",
               "-q").exit_code == 0
    assert np.array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))


def test_a_steps_error_names_the_shape_and_layout_it_reads(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, _ = photo
    result = run("chain", "-i", path, "-o", tmp_path / "o.npy", "crop-pad", "--shape", "20,20", "space-to-depth",
                 "--blocksize", "3")
    assert result.exit_code == 2
    assert result.stderr == (f"Error: {path}: step 2: space_to_depth: height 20 is not divisible by blocksize 3 "
                             "(input shape (20, 20, 3), layout HWC)\n")


@pytest.mark.parametrize("steps", [[], ["rotate", "--degrees", "3"], ["crop-pad", "--sizes", "4,4"],
                                   ["resize", "--sizes", "4,4", "--json"]])
def test_chain_usage_errors_come_before_anything_is_read(tmp_path: Path, steps: list[str]) -> None:
    result = run("chain", "-i", tmp_path / "missing.png", "-o", tmp_path / "o.png", *steps)
    assert result.exit_code == 2, result.stderr
    assert "missing.png" not in result.stderr and not (tmp_path / "o.png").exists()


def test_an_empty_chain_names_the_steps(tmp_path: Path) -> None:
    """Options and no step: one line naming the steps (click said "Missing command.")."""
    result = run("chain", "-i", tmp_path / "missing.png", "-o", tmp_path / "o.png", "-q")
    assert result.exit_code == 2 and not (tmp_path / "o.png").exists()
    assert result.stderr.splitlines()[-1] == ("Error: give one or more STEPs after the options: crop-pad, resize, "
                                              "space-to-depth, depth-to-space, grid-sample, warp"), result.stderr


@pytest.mark.parametrize(("name", "hint"), [("b.png", True), ("shots/*.png", True), ("bogus", False),
                                            ("crop.pad", False)])
def test_a_second_input_after_one_i_is_named_as_such(tmp_path: Path, name: str, hint: bool) -> None:
    """-i a.png b.png: b.png is read as the first step; the line says how to give it (it said only
    "No such command 'b.png'.")."""
    result = run("chain", "-i", tmp_path / "a.png", name, "-o", tmp_path / "o.png", "resize", "--sizes", "4,4")
    assert result.exit_code == 2 and not (tmp_path / "o.png").exists()
    line = result.stderr.splitlines()[-1]
    assert line.startswith(f"Error: No such command '{name}'."), result.stderr
    assert (ITS_OWN_I in line) == hint, result.stderr
    assert ("Did you mean" in line) == (name == "crop.pad"), result.stderr


def test_a_grey_stack_named_nhw(tmp_path: Path, rng: np.random.Generator) -> None:
    """N×H×W: crop-pad works on H and W; space-to-depth takes it as N×1×H×W and writes N×b²×H/b×W/b
    (NCHW: an NHW stack cannot hold channels); a TIFF written from NHW reads back as NHW."""
    from geomcli.ops.space_depth import space_to_depth

    stack = rng.normal(size=(3, 8, 12)).astype(np.float32)
    np.save(tmp_path / "s.npy", stack)
    assert run("crop-pad", tmp_path / "s.npy", "--layout", "NHW", "--shape", "4,6", "-o", tmp_path / "c.tiff",
               "-q").exit_code == 0
    assert run("crop-pad", tmp_path / "c.tiff", "--shape", "2,2", "-o", tmp_path / "c2.npy", "-q").exit_code == 0
    assert np.array_equal(np.load(tmp_path / "c2.npy"), center_crop_pad(stack, [2, 2], axes=[1, 2]))
    assert run("space-to-depth", tmp_path / "s.npy", "--layout", "NHW", "--blocksize", "2", "-o",
               tmp_path / "b.npy", "-q").exit_code == 0
    assert np.array_equal(np.load(tmp_path / "b.npy"), space_to_depth(stack[:, None], 2))


def test_a_steps_help_lists_its_options_in_the_commands_order() -> None:
    """chain resize --help as resize --help: --sizes first (a try-out found them reversed)."""
    import re

    def listed(*command: str) -> list[str]:
        return re.findall(r"^  (--[a-z-]+)", run(*command, "--help").stdout, flags=re.M)

    assert listed("chain", "resize") == [name for name in listed("resize") if name in listed("chain", "resize")]
    assert listed("chain", "resize")[0] == "--sizes"


def test_a_chains_steps_are_walked_once_for_files_of_one_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """The header check of every input, the run, the report and the metadata each ask a chain for
    its steps' shapes: worked out once for files of one shape, whatever their sizes in bytes."""
    from geomcli.engine import operations
    from geomcli.engine.options import Common
    from geomcli.io import Header

    calls: list[tuple[int, ...]] = []
    output_shape = operations.Resize.output_shape

    def counted(self: operations.Resize, header: Header, common: Common) -> tuple[int, ...]:
        calls.append(header.shape)
        return output_shape(self, header, common)

    monkeypatch.setattr(operations.Resize, "output_shape", counted)
    chain = operations.Chain((operations.Resize(sizes=(8, 8), mode="linear"), operations.CropPad((6, 6))))
    for size in (1000, 2000, 3000):
        header = Header("png", (30, 45, 3), np.dtype(np.uint8), 1, size, "HWC")
        assert chain.output_shape(header, Common()) == (6, 6, 3)
        assert chain.trace(header, Common())[0]["output_shape"] == [8, 8, 3]
    assert calls == [(30, 45, 3)]


def test_a_chains_walk_is_of_its_own_steps_grids_and_all() -> None:
    """Two chains whose grid-sample steps differ only in their grid (not compared: arrays) each
    give their own shapes (a reviewer found one chain's shapes given for the other)."""
    from geomcli.engine import operations
    from geomcli.engine.options import Common
    from geomcli.io import Header

    header = Header("npy", (1, 3, 8, 8), np.dtype(np.float32), 1, 100, None)
    small, big = (operations.Chain((operations.GridSample(np.zeros((1, h, w, 2), np.float32), "grid.npy"),))
                  for h, w in ((4, 4), (6, 5)))
    assert small.output_shape(header, Common()) == (1, 3, 4, 4)
    assert big.output_shape(header, Common()) == (1, 3, 6, 5)


def test_a_crops_error_in_one_pass_names_the_crop() -> None:
    """The crop's fault is step 2's, though the chain makes the two steps in one pass."""
    from geomcli.engine import operations
    from geomcli.engine.options import Common
    from geomcli.io import Loaded

    chain = operations.Chain((operations.Resize(sizes=(20, 20)), operations.CropPad((1, 1, 1, 1))))
    with pytest.raises(GeomError, match=r"^step 2 \(crop-pad\): --shape has 4 values"):
        chain.apply(Loaded(np.zeros((37, 50, 3), np.uint8), "png", "HWC", "x.png"), Common())


def test_a_warning_about_the_input_names_the_input(photo: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    """A try-out read 'Warning: x.png: --layout CHW is for tensors: ...' of photo.png; a warning
    about what is written still names the output. On every path: one file, a zarr, a chain, a
    batch in worker processes (where each is said once). The JSON record's text names neither."""
    path, pixels = photo
    warning = "--layout CHW is for tensors: this PNG image is read as HWC"
    for out, command in [("x.png", ["resize"]), ("x.zarr", ["resize"]), ("c.png", ["chain", "-i", path])]:
        where = [path, "-o", tmp_path / out] if command == ["resize"] else ["-o", tmp_path / out]
        result = run(*command, *where, "--layout", "CHW", *(["resize"] if command[0] == "chain" else []),
                     "--sizes", "10,10")
        assert result.exit_code == 0 and result.stderr.splitlines()[0] == f"Warning: {path}: {warning}"
    record = json.loads(run("resize", path, "-o", tmp_path / "x.png", "--sizes", "10,10", "--layout", "CHW",
                            "--json").stdout)
    assert record["warnings"] == [warning]
    copy = tmp_path / "copy.png"
    copy.write_bytes(path.read_bytes())
    batch = run("resize", path, copy, "--out-dir", tmp_path / "out", "--sizes", "10,10", "--layout", "CHW",
                "--quality", "80", "-j", "2")
    assert batch.exit_code == 0
    assert batch.stderr.splitlines()[:2] == [
        f"Warning: {path}: {warning}",
        f"Warning: {tmp_path / 'out' / 'photo.png'}: --quality is for JPEG and WebP output, not PNG; ignored"]
    np.save(tmp_path / "t.npy", np.zeros((3, 4, 6), np.uint8))
    written = run("resize", tmp_path / "t.npy", "-o", tmp_path / "t.png", "--sizes", "4,6", "--layout", "CHW")
    assert written.stderr.splitlines()[0] == (f"Warning: {tmp_path / 't.png'}: the C×H×W result is written as the "
                                              "H×W×C image a PNG holds")


def test_an_image_keeps_its_axes_into_a_zarr_and_as_affine_grids_like(photo: tuple[Path, np.ndarray],
                                                                      tmp_path: Path) -> None:
    """--layout is for tensors on every path: an image written to a .zarr (chunk by chunk) and an
    image that affine-grid's --like reads are H×W×C as everywhere else (a review found both read
    in --layout)."""
    import zarr

    path, pixels = photo
    result = run("resize", path, "-o", tmp_path / "o.zarr", "--sizes", "6,8", "--layout", "CHW")
    assert result.exit_code == 0, result.stderr
    assert "--layout CHW is for tensors: this PNG image is read as HWC" in result.stderr
    assert np.array_equal(zarr.open_array(str(tmp_path / "o.zarr"), mode="r")[...],
                          resize(pixels, sizes=[6, 8], axes=[0, 1]))
    grid = run("affine-grid", "--like", path, "--layout", "CHW", "--rotate", "10", "-o", tmp_path / "g.npy")
    assert grid.exit_code == 0, grid.stderr
    assert np.load(tmp_path / "g.npy").shape == (1, 30, 45, 2)


def test_what_a_repeated_step_drops_is_said_of_that_step(tmp_path: Path) -> None:
    """'chain ... warp --scale 2 warp --rotate 10' said 'DPI ... of warp's output ... dropped': which
    warp? Named as the step's warnings are, step 2 (warp); a step given once keeps its command's name."""
    Image.new("RGB", (40, 30)).save(tmp_path / "o.png", dpi=(300, 300))
    twice = run("chain", "-i", tmp_path / "o.png", "-o", tmp_path / "w.png", "--json",
                "warp", "--scale", "2", "warp", "--rotate", "10")
    assert twice.exit_code == 0, twice.stderr
    assert json.loads(twice.stdout)["warnings"] == [
        "DPI (150 x 150) of step 2 (warp)'s output (its pixels have no size per axis: a grid, a rotation or "
        "shear) cannot be carried; dropped"]
    once = run("chain", "-i", tmp_path / "o.png", "-o", tmp_path / "c.png", "--json",
               "warp", "--rotate", "10", "crop-pad", "--shape", "8,8")
    assert json.loads(once.stdout)["warnings"][0].startswith("DPI (300 x 300) of warp's output (")
