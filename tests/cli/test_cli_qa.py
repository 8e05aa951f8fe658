"""A demanding user of the one-file commands: typed values, layouts, round trips through TIFF,
and the messages each gets (CliRunner, as tests/test_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from conftest import run
from PIL import Image

from geomcli import io
from geomcli.cli import cli


@pytest.fixture
def tensor(tmp_path: Path, rng: np.random.Generator) -> Path:
    path = tmp_path / "tensor.npy"
    np.save(path, rng.standard_normal((1, 3, 8, 12)).astype(np.float32))
    return path


def usage_error(result: Result, option: str, message: str) -> None:
    assert result.exit_code == 2 and result.stdout == ""
    assert f"Error: Invalid value for '{option}'" in result.stderr and message in result.stderr


# --- typed numbers: other scripts' digits, underscores and empty lists are usage errors -------


@pytest.mark.parametrize("command, option, value", [
    (["crop-pad", "--shape", "1,3,4,4"], "--axes", "２,3"),
    (["crop-pad"], "--shape", "1,3,4,٤"),
    (["crop-pad"], "--shape", "1,3,4_0,4"),
    (["space-to-depth"], "--blocksize", "２"),
    (["space-to-depth"], "--blocksize", "1_0"),
    (["crop-pad", "--shape", "1,3,4,4"], "--threads", "٣"),
    (["crop-pad", "--shape", "1,3,4,4"], "--max-pixels", "１０００"),
    (["crop-pad", "--shape", "1,3,4,4"], "--compress-level", "５"),
])
def test_a_number_in_other_digits_is_a_usage_error(tensor: Path, tmp_path: Path, command: list[str], option: str,
                                                   value: str) -> None:
    name, *rest = command
    result = run(name, tensor, "-o", tmp_path / "out.npy", *rest, option, value)
    usage_error(result, option, repr(value))
    assert not (tmp_path / "out.npy").exists()


@pytest.mark.parametrize("option, value", [("--size", "１,3,4,6"), ("--rotate", "９０"), ("--rotate", "1_0"),
                                           ("--scale", "２"), ("--theta", "１,0,0,0,1,0")])
def test_affine_grid_numbers_in_other_digits_are_usage_errors(tmp_path: Path, option: str, value: str) -> None:
    size = [] if option == "--size" else ["--size", "1,3,4,6"]
    result = run("affine-grid", *size, option, value, "-o", tmp_path / "g.npy")
    usage_error(result, option, repr(value))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", ["--shape", "--axes"])
def test_an_empty_list_is_a_usage_error(tensor: Path, tmp_path: Path, option: str) -> None:
    shape = [] if option == "--shape" else ["--shape", "1,3,4,4"]
    result = run("crop-pad", tensor, "-o", tmp_path / "out.npy", *shape, option, "")
    usage_error(result, option, "'': give one or more comma-separated integers")


def test_the_max_pixels_variable_in_other_digits_is_a_usage_error(tensor: Path, tmp_path: Path) -> None:
    result = run("crop-pad", tensor, "-o", tmp_path / "out.npy", "--shape", "1,3,4,4",
                 env={"GEOMCLI_MAX_PIXELS": "１０００"})
    usage_error(result, "--max-pixels", "'１０００' is not a valid integer")


@pytest.mark.parametrize("fill", ["２", "2_5"])
def test_a_fill_in_other_digits_is_refused_not_read_as_a_number(tmp_path: Path, fill: str) -> None:
    source = tmp_path / "in.png"
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(source)
    result = run("crop-pad", source, "-o", tmp_path / "out.png", "--shape", "6,6", "--fill", fill)
    assert result.exit_code == 2
    refusal = f"center_crop_pad: fill value {fill!r} does not fit dtype uint8"
    assert result.stderr == f"Error: {source}: {refusal} (text for a numeric type; input shape (4, 4))\n"
    assert not (tmp_path / "out.png").exists()


def test_a_fill_in_other_digits_is_text_for_a_string_tensor(tmp_path: Path) -> None:
    source, out = tmp_path / "words.npy", tmp_path / "out.npy"
    np.save(source, np.array(["a"]))
    assert run("crop-pad", source, "-o", out, "--shape", "2", "--fill", "２").exit_code == 0
    assert np.load(out).tolist() == ["a", "２"]


# --- affine-grid --theta ---------------------------------------------------------------------


@pytest.mark.parametrize("theta", ["", "1,0,0,0,1,0,"])  # - reads stdin: see below
def test_inline_theta_that_is_no_list_names_the_option(tmp_path: Path, theta: str) -> None:
    result = run("affine-grid", "--size", "1,3,4,6", "--theta", theta, "-o", tmp_path / "g.npy")
    usage_error(result, "--theta", f"{theta!r} is not a comma-separated list of numbers")


@pytest.mark.parametrize("like, theta, message", [
    ((8, 12), "1,0,0", "a 2-D grid takes 6 numbers per matrix: 6 for one matrix; found 3"),
    ((1, 2, 2, 4, 4), "1,0,0,0,1,0", "a 3-D grid takes 12 numbers per matrix: 12 for one matrix; found 6"),
])
def test_inline_theta_of_the_wrong_count_with_like_is_a_usage_error(tmp_path: Path, like: tuple[int, ...],
                                                                   theta: str, message: str) -> None:
    """As it is with --size (tests/test_cli.py), not a failed file (exit 1)."""
    source = tmp_path / "like.npy"
    np.save(source, np.zeros(like, np.float32))
    result = run("affine-grid", "--like", source, "--theta", theta, "-o", tmp_path / "g.npy")
    usage_error(result, "--theta", message)
    assert not (tmp_path / "g.npy").exists()


def test_a_layout_for_a_rank5_like_file_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "volume.npy"
    np.save(source, np.zeros((1, 2, 2, 4, 4), np.float32))
    result = run("affine-grid", "--like", source, "--layout", "NCHW", "-o", tmp_path / "g.npy")
    assert result.exit_code == 2 and not (tmp_path / "g.npy").exists()
    assert result.stderr == (f"Error: {source}: a rank-5 tensor (1, 2, 2, 4, 4) is read as N, C, D, H, W; "
                             "--layout NCHW names rank 4 or less\n")


# --- crop-pad --layout -----------------------------------------------------------------------


@pytest.mark.parametrize("shape, layout", [((8, 12), "NCHW"), ((8, 12), "HWC"), ((8,), "HW")])
def test_crop_pad_layout_of_another_rank_is_refused_at_any_rank(tmp_path: Path, shape: tuple[int, ...],
                                                               layout: str) -> None:
    source = tmp_path / "in.npy"
    np.save(source, np.zeros(shape, np.uint8))
    result = run("crop-pad", source, "-o", tmp_path / "out.npy", "--shape", ",".join("4" * len(shape)),
                 "--layout", layout)
    assert result.exit_code == 2 and not (tmp_path / "out.npy").exists()
    assert result.stderr == f"Error: {source}: layout {layout} needs rank {len(layout)}, found shape {shape}\n"


# --- 1-bit images round trip -----------------------------------------------------------------


@pytest.mark.parametrize("output", ["back.png", "back.bmp"])
def test_one_bit_image_round_trip_through_npy(tmp_path: Path, rng: np.random.Generator, output: str) -> None:
    """depth-to-space gives H×W×1 bool, which a 1-bit PNG or BMP holds as it holds H×W×1 uint8."""
    source = tmp_path / "bits.png"
    Image.fromarray(rng.integers(0, 2, (8, 12)).astype(bool)).save(source)
    blocks, back = tmp_path / "blocks.npy", tmp_path / output
    assert run("space-to-depth", source, "-o", blocks, "--blocksize", "2").exit_code == 0
    result = run("depth-to-space", blocks, "--layout", "HWC", "-o", back, "--blocksize", "2")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(io.read_array(str(back)).data, io.read_array(str(source)).data)


# --- the summary and the output name ---------------------------------------------------------


def test_a_0d_tensor_shows_its_shape_in_the_summary() -> None:
    from geomcli.engine import summary

    report = summary.Report("crop-pad", "in.npy", "out.npy", [], "float64", [], "float64")
    assert summary._plain_line(report).startswith("crop-pad in.npy → out.npy: () float64 → () float64")


@pytest.mark.parametrize("command", [["crop-pad", "IN", "--shape", "4,4"], ["affine-grid", "--size", "1,1,4,4"]])
def test_an_empty_output_name_is_a_usage_error(tensor: Path, command: list[str]) -> None:
    result = run(*[str(tensor) if part == "IN" else part for part in command], "-o", "")
    usage_error(result, "-o' / '--output", "an empty name; give a file name, or - for stdout")


@pytest.mark.parametrize("command, option", [
    (["crop-pad", "", "-o", "OUT", "--shape", "4,4"], "INPUT..."),
    (["crop-pad", "IN", "", "--out-dir", "DIR", "--shape", "4,4"], "INPUT..."),
    (["info", ""], "INPUT..."),
    (["chain", "-i", "", "-o", "OUT", "crop-pad", "--shape", "4,4"], "-i' / '--input"),
    (["grid-sample", "IN", "--grid", "", "-o", "OUT"], "--grid"),
    (["crop-pad", "--files-from", "", "--out-dir", "DIR", "--shape", "4,4"], "--files-from"),
    (["affine-grid", "--like", "", "-o", "OUT"], "--like"),
])
def test_an_empty_input_name_is_a_usage_error(tensor: Path, tmp_path: Path, command: list[str], option: str) -> None:
    # "$SRC" of an unset variable: 'Error: : no such file', exit 1; in a batch "--name gives an empty
    # name for " and nothing after it
    names = {"IN": str(tensor), "OUT": str(tmp_path / "out.npy"), "DIR": str(tmp_path / "out")}
    result = run(*[names.get(part, part) for part in command])
    usage_error(result, option, "an empty name (an unset variable?); give a file")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tensor.npy"]


@pytest.mark.parametrize("command", [["crop-pad", "PATTERN", "-o", "OUT", "--shape", "4,4"],
                                     ["chain", "-i", "PATTERN", "-o", "OUT", "crop-pad", "--shape", "4,4"]],
                         ids=["crop-pad", "chain"])
def test_a_quoted_glob_with_o_is_a_usage_error(tensor: Path, tmp_path: Path, command: list[str]) -> None:
    """-o took it as a name: 'Error: dir/*.npy: no such file' (exit 1), where a folder is a usage error
    that points to --out-dir; a file whose name holds a glob's characters is still read as named."""
    pattern, out = str(tmp_path / "*.npy"), tmp_path / "out.npy"
    result = run(*[{"PATTERN": pattern, "OUT": str(out)}.get(part, part) for part in command])
    assert result.exit_code == 2 and result.stdout == "" and not out.exists()
    assert (f"Error: {pattern!r} is a pattern, and -o takes one file; give --out-dir DIR for the files it matches"
            in result.stderr)
    odd = tmp_path / "t[1].npy"
    odd.write_bytes(tensor.read_bytes())
    result = run(*[{"PATTERN": str(odd), "OUT": str(out)}.get(part, part) for part in command][:-2],
                 "--shape", "1,3,4,4")
    assert result.exit_code == 0, result.stderr


def test_scheduler_with_o_names_what_it_goes_with(tensor: Path, tmp_path: Path) -> None:
    # 'goes with --out-dir, not -o', where -o a .zarr (or a .zarr input) takes it too
    result = run("crop-pad", tensor, "-o", tmp_path / "out.npy", "--shape", "1,3,4,4", "--scheduler", "local:1")
    assert result.exit_code == 2 and not (tmp_path / "out.npy").exists()
    assert "Error: --scheduler goes with --out-dir or a .zarr input or output, not -o\n" in result.stderr


# --- inputs of an unknown extension ------------------------------------------------------------


@pytest.mark.parametrize("command", [["info"], ["crop-pad", "--shape", "4,4", "-o", "OUT"]], ids=["info", "crop-pad"])
@pytest.mark.parametrize("name", ["photo.weird", "photo"])
def test_an_input_geomcli_cannot_name_does_not_point_to_an_option_it_lacks(
    tmp_path: Path, command: list[str], name: str
) -> None:
    """The QA report: 'unknown extension ... (or give --format)', but --format is the output's
    (and info has none): no option makes an input's format."""
    source = tmp_path / name
    source.write_bytes(b"no image at all, " * 8)
    args = [str(tmp_path / "out.png") if arg == "OUT" else arg for arg in command]
    result = run(*args[:1], source, *args[1:])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {source}: ") and "--format" not in result.stderr
    assert result.stderr.count("\n") == 1


def test_an_output_of_an_unknown_extension_still_points_to_format(tmp_path: Path) -> None:
    source = tmp_path / "in.png"
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(source)
    result = run("crop-pad", source, "--shape", "2,2", "-o", tmp_path / "out.weird")
    assert result.exit_code == 2
    assert "unknown extension '.weird'" in result.stderr and "(or give --format)" in result.stderr


# --- affine-grid --theta - ---------------------------------------------------------------------


def test_theta_from_stdin_is_the_theta_of_its_file(tmp_path: Path) -> None:
    """The QA report: --like - read stdin, --theta - was a list of numbers that was no list."""
    theta = np.array([[[1.0, 0.25, 0.1], [-0.5, 1.0, 0.0]], [[0.5, 0, 0], [0, 2, -1]]], np.float64)
    np.save(tmp_path / "theta.npy", theta)
    from_file = run("affine-grid", "--theta", tmp_path / "theta.npy", "--size", "2,1,3,5", "-o", tmp_path / "a.npy")
    piped = CliRunner().invoke(cli, ["affine-grid", "--theta", "-", "--size", "2,1,3,5", "-o", str(tmp_path / "b.npy")],
                               input=(tmp_path / "theta.npy").read_bytes())
    assert from_file.exit_code == piped.exit_code == 0, piped.stderr
    found = np.load(tmp_path / "b.npy")
    assert found.dtype == np.float64 and np.array_equal(found, np.load(tmp_path / "a.npy"))


def test_theta_from_stdin_that_is_no_array_is_one_error_line(tmp_path: Path) -> None:
    args = ["affine-grid", "--theta", "-", "--size", "1,1,2,2", "-o", str(tmp_path / "g.npy")]
    result = CliRunner().invoke(cli, args, input=b"1,0,0,0,1,0\n")
    assert result.exit_code == 1
    expected = "expected one of png, jpeg, bmp, gif, webp, npy, tiff"
    assert result.stderr == f"Error: <stdin>: unrecognised content ({expected})\n"
    assert not (tmp_path / "g.npy").exists()


def test_theta_and_like_cannot_both_read_stdin(tmp_path: Path) -> None:
    result = run("affine-grid", "--theta", "-", "--like", "-", "-o", tmp_path / "g.npy")
    assert result.exit_code == 2 and "--theta - and --like - cannot both read stdin" in result.stderr
    assert not (tmp_path / "g.npy").exists()


# --- --compression for an output that takes none: a usage error before any input is read -----


@pytest.fixture
def unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any read of an input fails the test."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("an input was read")

    for name in ("read_array", "read_picture", "read_header"):
        monkeypatch.setattr(io, name, refuse)


@pytest.mark.parametrize("command", [["crop-pad", "--shape", "4,4"], ["space-to-depth", "--blocksize", "2"]])
@pytest.mark.parametrize("output, options, found", [
    ("out.png", [], "PNG"), ("out.npy", [], "NPY"), ("-", ["--format", "png"], "PNG"), ("-", [], "NPY"),
])
def test_compression_for_an_output_of_another_format_is_a_usage_error(
        tmp_path: Path, unread: None, command: list[str], output: str, options: list[str], found: str) -> None:
    source = tmp_path / "in.png"
    io.write_array(np.zeros((8, 8, 3), np.uint8), str(source))
    out = output if output == "-" else str(tmp_path / output)
    name, *rest = command
    result = run(name, source, "-o", out, *options, *rest, "--compression", "zlib")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.endswith(f"\nError: --compression is for TIFF output, not {found} (-o {out})\n")
    assert list(tmp_path.iterdir()) == [source]


def test_compression_for_a_batch_output_of_another_format_is_a_usage_error(tmp_path: Path, unread: None) -> None:
    sources = [tmp_path / "a.png", tmp_path / "b.tiff"]
    for source in sources:
        io.write_array(np.zeros((8, 8, 3), np.uint8), str(source))
    out_dir = tmp_path / "out"
    for extra in ([], ["--dry-run"]):
        result = run("crop-pad", *sources, "--out-dir", out_dir, "--shape", "4,4", "--compression", "zlib", *extra)
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr.endswith(f"\nError: --compression is for TIFF output, not PNG ({out_dir / 'a.png'}, "
                                      "named by --name '{stem}{suffix}')\n")
        assert not out_dir.exists()


def test_compression_for_batch_outputs_all_tiff_is_taken(tmp_path: Path) -> None:
    import tifffile

    sources = [tmp_path / "a.png", tmp_path / "b.tiff"]
    for source in sources:
        io.write_array(np.zeros((8, 8, 3), np.uint8), str(source))
    out_dir = tmp_path / "out"
    result = run("crop-pad", *sources, "--out-dir", out_dir, "--name", "{stem}.tiff", "--shape", "4,4",
                 "--compression", "zlib", "-q")
    assert (result.exit_code, result.stderr) == (0, "")
    for stem in ("a", "b"):
        with tifffile.TiffFile(out_dir / f"{stem}.tiff") as tif:
            assert tif.pages.first.compression.name == "ADOBE_DEFLATE"


def test_a_jpeg_named_png_is_read_by_its_content_with_one_warning(tmp_path: Path) -> None:
    from PIL import Image

    pixels = np.zeros((20, 30, 3), np.uint8)
    pixels[5:15, 10:20] = (200, 40, 40)
    Image.fromarray(pixels).save(tmp_path / "download.png", format="JPEG", quality=95)
    result = run("crop-pad", tmp_path / "download.png", "-o", tmp_path / "o.npy", "--shape", "10,10")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == (f"Warning: {tmp_path / 'download.png'}: JPEG content named .png; "
                                             "read as JPEG")
    assert np.load(tmp_path / "o.npy").shape == (10, 10, 3)
    record = json.loads(run("crop-pad", tmp_path / "download.png", "-o", tmp_path / "o.npy", "--shape", "10,10",
                            "--json").stdout)
    assert record["warnings"] == ["JPEG content named .png; read as JPEG"]
    (tmp_path / "junk.png").write_bytes(b"not an image at all")
    refused = run("crop-pad", tmp_path / "junk.png", "-o", tmp_path / "o.npy", "--shape", "10,10")
    assert refused.exit_code == 1 and "not a readable PNG (unrecognised content)" in refused.stderr


def test_info_takes_folders_globs_and_shows_what_a_photo_carries(tmp_path: Path) -> None:
    from PIL import Image, ImageCms

    exif = Image.Exif()
    exif[0x0112] = 6  # stored on its side: shown turned upright
    profile = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    folder = tmp_path / "shots"
    (folder / "day").mkdir(parents=True)
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(folder / "a.jpg", exif=exif.tobytes(), dpi=(300, 300),
                                                          icc_profile=profile)
    np.save(folder / "day" / "b.npy", np.zeros((2, 3), np.uint16))
    flat = run("info", folder)
    assert flat.exit_code == 0 and len(flat.stdout.splitlines()) == 1
    line = flat.stdout.splitlines()[0]
    assert line.startswith(f"{folder / 'a.jpg'}: jpeg 30×20×3 uint8")
    assert "ICC profile 'sRGB built-in'" in line and "300×300 dpi" in line
    assert "EXIF orientation 6 (the shape shown is upright)" in line
    records = [json.loads(text) for text in run("info", folder, "-r", "--json").stdout.splitlines()]
    assert [Path(record["input"]).name for record in records] == ["a.jpg", "b.npy"]
    assert records[0]["orientation"] == 6 and records[0]["upright"] and records[0]["bit_depth"] == 8
    assert records[1]["bit_depth"] == 16 and records[1]["icc"] is None and records[1]["orientation"] is None
    globbed = run("info", f"{folder}/**/*.npy", "--json")
    assert [json.loads(text)["input"] for text in globbed.stdout.splitlines()] == [str(folder / "day" / "b.npy")]
    assert run("info", tmp_path / "empty-pattern-*.png").exit_code == 2


@pytest.mark.parametrize("name", ["photo.jpg", "photo.png", "photo16.png", "photo.webp", "photo.tiff", "a.npy"])
def test_info_says_the_same_of_stdin_as_of_the_path(tmp_path: Path, name: str) -> None:
    """Stdin's record said orientation null and not upright beside a note that the EXIF orientation
    turned it (the orientation was read by opening the path again); only the size, which a pipe
    has not, may differ."""
    import tifffile
    from PIL import ImageCms

    exif = Image.Exif()
    exif[0x0112] = 6  # stored on its side
    profile = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    pixels = np.arange(20 * 30 * 3, dtype=np.uint8).reshape(20, 30, 3)
    path = tmp_path / name
    if name == "photo16.png":
        io.write_array(pixels.astype(np.uint16) * 257, str(path), metadata=io.Metadata(
            icc=profile, exif=exif.tobytes(), resolution=(300.0, 150.0), unit="inch"))
    elif name == "photo.tiff":
        tifffile.imwrite(path, pixels, resolution=(300, 150), resolutionunit="INCH",
                         extratags=[(274, 3, 1, 6, True)])  # TIFF's own Orientation tag
    elif name == "a.npy":
        np.save(path, pixels.astype(np.float32))
    else:
        Image.fromarray(pixels).save(path, exif=exif.tobytes(), icc_profile=profile, dpi=(300, 150))
    by_path = run("info", "--json", path)
    by_stdin = run("info", "--json", "-", stdin=path.read_bytes())
    assert by_path.exit_code == by_stdin.exit_code == 0
    record, piped = json.loads(by_path.stdout), json.loads(by_stdin.stdout)
    assert piped == {**record, "input": "-", "file_size": None}
    if name != "a.npy":
        assert (piped["orientation"], piped["upright"]) == (6, True)
        kind = "TIFF" if name == "photo.tiff" else "EXIF"
        assert f"{kind} orientation 6 (the shape shown is upright)" in run("info", "-", stdin=path.read_bytes()).stdout


def test_info_says_upright_only_where_the_read_turned_the_pixels(tmp_path: Path) -> None:
    """Stacked frames and TIFF pages are not turned by their orientation, which info said they
    were; a single TIFF image, which is turned, said it had none."""
    import tifffile

    exif = Image.Exif()
    exif[0x0112] = 6
    frames = [Image.fromarray(np.full((10, 20, 3), value, np.uint8)) for value in (0, 50, 100)]
    frames[0].save(tmp_path / "a.png", save_all=True, append_images=frames[1:], exif=exif.tobytes())
    tifffile.imwrite(tmp_path / "one.tiff", np.zeros((10, 20), np.uint8), extratags=[(274, 3, 1, 6, True)])
    with tifffile.TiffWriter(tmp_path / "pages.tiff") as tif:
        for _ in range(3):
            tif.write(np.zeros((10, 20), np.uint8), contiguous=False, extratags=[(274, 3, 1, 6, True)])
    for path, frames_option, shape, upright in [
        ("a.png", "all", [3, 10, 20, 3], False), ("a.png", "first", [20, 10, 3], True),
        ("one.tiff", "all", [20, 10], True), ("pages.tiff", "all", [3, 10, 20], False),
    ]:
        args = ("info", tmp_path / path, "--frames", frames_option)
        record = json.loads(run(*args, "--json").stdout)
        assert (record["shape"], record["orientation"], record["upright"]) == (shape, 6, upright)
        kind = "TIFF" if path.endswith(".tiff") else "EXIF"
        said = "the shape shown is upright" if upright else "not applied"
        assert f", {kind} orientation 6 ({said})" in run(*args).stdout


def test_info_and_a_summary_show_a_bool_range_as_false_and_true_and_stdin_as_such(tmp_path: Path) -> None:
    """'info b.npy' of a bool mask said 'range [0, 1]' (its --json [false, true]), a crop's summary
    'range [1, 1]'; and 'info - < b.npy' named the file '-', where its errors say '<stdin>'."""
    np.save(tmp_path / "b.npy", np.array([[True, False], [False, False]]))
    shown = run("info", tmp_path / "b.npy")
    assert shown.exit_code == 0 and ", range [False, True], " in shown.stdout, shown.stdout
    piped = run("info", "-", stdin=(tmp_path / "b.npy").read_bytes())
    assert piped.stdout == "<stdin>: npy 2×2 bool, layout -, 1 page(s), range [False, True]\n"
    record = json.loads(run("info", "--json", "-", stdin=(tmp_path / "b.npy").read_bytes()).stdout)
    assert (record["input"], record["value_range"]) == ("-", [False, True])  # (the argument given)
    cropped = run("crop-pad", tmp_path / "b.npy", "-o", tmp_path / "c.npy", "--shape", "1,1")
    assert cropped.exit_code == 0 and " range [True, True] " in cropped.stderr, cropped.stderr


def test_a_summary_names_stdin_and_stdout_as_errors_do(tmp_path: Path) -> None:
    """'cat b.npy | geomcli crop-pad - -o x.npy --shape 1,1' said 'crop-pad - → x.npy: ...' where
    stdin's errors say '<stdin>' (and '-o -' showed '→ -', its errors '<stdout>'); --json keeps '-'."""
    np.save(tmp_path / "b.npy", np.arange(9, dtype=np.uint8).reshape(3, 3))
    piped = run("crop-pad", "-", "-o", tmp_path / "x.npy", "--shape", "1,1", stdin=(tmp_path / "b.npy").read_bytes())
    assert piped.exit_code == 0 and piped.stderr.startswith(f"crop-pad <stdin> → {tmp_path / 'x.npy'}: 3×3 uint8 "), \
        piped.stderr
    both = run("crop-pad", "-", "-o", "-", "--shape", "1,1", stdin=(tmp_path / "b.npy").read_bytes())
    assert both.exit_code == 0 and both.stderr.startswith("crop-pad <stdin> → <stdout>: 3×3 uint8 "), both.stderr
    record = json.loads(run("crop-pad", "-", "-o", tmp_path / "y.npy", "--shape", "1,1", "--json",
                            stdin=(tmp_path / "b.npy").read_bytes()).stdout)
    assert (record["input"], record["output"]) == ("-", str(tmp_path / "y.npy"))
