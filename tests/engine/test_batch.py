"""Batch runs (geomcli.batch): inputs from folders and globs, names, collisions, skipping, workers,
failures, interruptions, the JSON stream and samples/Makefile."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from conftest import hooked, run, slow_inputs
from PIL import Image

import geomcli.ops.center_crop_pad as crop_ops
from geomcli.cli import cli
from geomcli.engine import operations, plan, workers

ROOT = Path(__file__).resolve().parents[2]
GEOMCLI = [sys.executable, "-m", "geomcli"]


def png(path: Path, rng: np.random.Generator, shape: tuple[int, ...] = (9, 12, 3)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)).save(path)
    return path


def files(folder: Path) -> list[str]:
    """Every file under ``folder``, hidden ones included, as sorted relative paths."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())


def contents(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in files(folder)}


@pytest.fixture
def shots(tmp_path: Path, rng: np.random.Generator) -> Path:
    """shots/{a,b}.png, shots/c.npy, shots/day/d.png, shots/day/night/e.png, plus files to ignore."""
    root = tmp_path / "shots"
    png(root / "a.png", rng, (10, 12, 3))
    png(root / "b.png", rng, (8, 10))
    np.save(root / "c.npy", rng.standard_normal((1, 3, 6, 8)).astype(np.float32))
    png(root / "day" / "d.png", rng, (10, 12, 3))
    png(root / "day" / "night" / "e.png", rng, (10, 10, 4))
    (root / "notes.txt").write_text("not an image")
    png(root / ".hidden.png", rng)
    return root


# --- inputs: folders, recursion, globs ------------------------------------------------


def test_a_folder_means_its_readable_files(shots: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("crop-pad", shots, "--out-dir", out, "--shape", "4,4")
    # c.npy is a rank-4 tensor: its header shows --shape 4,4 does not fit it, before anything is written
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0].startswith(f"Warning: left out {shots / 'notes.txt'}: ")
    assert result.stderr.splitlines()[1] == f"Warning: left out the folder {shots / 'day'}: give -r to take " \
        "subfolders too"
    assert result.stderr.splitlines()[2].startswith(f"Error: {shots / 'c.npy'}: --shape has 2 values for a tensor")
    assert "1 of 3 inputs cannot take these options (each named above); nothing was written" in result.stderr
    assert not out.exists()
    # --layout names the tensor's axes; the images keep their own (HWC, HW), with a warning
    result = run("crop-pad", shots, "--out-dir", out, "--shape", "4,4", "--name", "{stem}.npy", "--layout", "NCHW")
    assert result.exit_code == 0, result.stderr
    assert "--layout NCHW is for tensors: this PNG image is read as HWC" in result.stderr
    assert [np.load(out / name).shape for name in ("a.npy", "b.npy", "c.npy")] == [(4, 4, 3), (4, 4), (1, 3, 4, 4)]
    shutil.rmtree(out)
    (shots / "c.npy").unlink()
    result = run("crop-pad", shots, "--out-dir", out, "--shape", "4,4")
    assert result.exit_code == 0
    assert result.stderr.splitlines()[-1].startswith("crop-pad: 2 ok, 0 failed, 0 skipped in ")
    assert files(out) == ["a.png", "b.png"]
    with Image.open(shots / "a.png") as image:
        expected = crop_ops.center_crop_pad(np.asarray(image), [4, 4], [0, 1])
    with Image.open(out / "a.png") as image:
        assert np.array_equal(np.asarray(image), expected)


def test_jfif_jpe_and_apng_names_are_read_and_written_as_the_formats_they_are(tmp_path: Path,
                                                                              rng: np.random.Generator) -> None:
    """'resize x.jfif -o y.png' exited 1 "unknown extension '.jfif'", and a folder walk left .jfif,
    .jpe and .apng files out with a warning: JPEG's and PNG's own names for their files. They are
    read as JPEG and PNG (an APNG's frames with --frames all), and an output so named is written so."""
    folder = tmp_path / "in"
    folder.mkdir()
    pixels = rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(folder / "x.jfif", format="JPEG")
    Image.fromarray(pixels).save(folder / "y.jpe", format="JPEG")
    frames = [Image.fromarray(np.full((6, 8, 3), 40 * index, np.uint8)) for index in range(3)]
    frames[0].save(folder / "z.apng", format="PNG", save_all=True, append_images=frames[1:])
    one = run("resize", folder / "x.jfif", "-o", tmp_path / "o.jfif", "--sizes", "5,6", "--json")
    assert one.exit_code == 0, one.stderr
    assert json.loads(one.stdout)["output_shape"] == [5, 6, 3]
    with Image.open(tmp_path / "o.jfif") as image:
        assert image.format == "JPEG" and image.size == (6, 5)
    walked = run("crop-pad", folder, "--out-dir", tmp_path / "out", "--shape", "4,4", "--frames", "all",
                 "--name", "{stem}.npy")
    assert walked.exit_code == 0 and "left out" not in walked.stderr, walked.stderr
    assert files(tmp_path / "out") == ["x.npy", "y.npy", "z.npy"]
    assert np.array_equal(np.load(tmp_path / "out" / "z.npy")[:, 0, 0, 0], [0, 40, 80])
    with Image.open(folder / "y.jpe") as image:
        assert np.array_equal(np.load(tmp_path / "out" / "y.npy"),
                              crop_ops.center_crop_pad(np.asarray(image), [4, 4], [0, 1]))
    info = run("info", folder / "z.apng", folder / "y.jpe", "--json")
    assert info.exit_code == 0, info.stderr
    assert [json.loads(line)["format"] for line in info.stdout.splitlines()] == ["png", "jpeg"]


def test_files_of_a_folder_or_glob_that_geomcli_does_not_read_are_named_in_a_warning(shots: Path,
                                                                                      tmp_path: Path) -> None:
    """A photo folder's .heic files were left out with no word: the counts said 2 ok, as if that
    were all. They are still left out (no reader takes them), now said once, before the run."""
    (shots / "c.npy").unlink()
    (shots / "x.heic").write_bytes(b"not read")
    said = f"Warning: left out 2 files, {shots / 'notes.txt'}, {shots / 'x.heic'}: geomcli reads no such file ("
    # (the glob matches the folder day too, taken as named: its own d.png)
    for argument, written in ((shots, ["a.png", "b.png"]), (f"{shots}/*", ["a.png", "b.png", "d.png"])):
        result = run("crop-pad", argument, "--out-dir", tmp_path / "out", "--shape", "4,4", "-n")
        assert result.exit_code == 0, result.stderr
        assert result.stderr.splitlines()[0].startswith(said)
        assert files(tmp_path / "out") == written
        shutil.rmtree(tmp_path / "out")
    recursive = run("crop-pad", shots, "-r", "--out-dir", tmp_path / "out", "--shape", "4,4", "--dry-run")
    assert recursive.exit_code == 0 and recursive.stderr.startswith(said)
    for quiet in (run("crop-pad", shots, "--out-dir", tmp_path / "q", "--shape", "4,4", "-q"),
                  run("crop-pad", f"{shots}/*.png", "--out-dir", tmp_path / "png", "--shape", "4,4")):
        assert quiet.exit_code == 0 and "Warning" not in quiet.stderr
    info = run("info", shots)
    assert info.exit_code == 0 and info.stderr.startswith(said) and len(info.stdout.splitlines()) == 2


def test_a_file_two_arguments_pass_over_is_named_once(shots: Path, tmp_path: Path) -> None:
    """A folder and its glob (or the folder spelt twice) each passed over notes.txt, and the warning
    named it twice: 'left out 2 files, .../notes.txt, .../notes.txt', where the file is one."""
    (shots / "c.npy").unlink()
    said = f"Warning: left out {shots / 'notes.txt'}: geomcli reads no such file ("
    for command in (("crop-pad", "--out-dir", tmp_path / "out", "--shape", "4,4", "--dry-run"), ("info",)):
        result = run(command[0], shots, f"{shots}/*", f"{shots}/./", *command[1:])
        assert result.exit_code == 0, result.stderr
        assert result.stderr.splitlines()[0].startswith(said), result.stderr


def test_a_folder_s_subfolders_left_out_without_r_are_named(shots: Path, tmp_path: Path) -> None:
    """A forgotten -r did the folder's own files and said nothing of its subfolders: 'crop-pad shots
    --out-dir out' of shots/a.png and shots/day/d.png said '1 ok' and left day's files undone, and
    of a folder whose files are all in subfolders only that it 'has no file geomcli reads'. A
    warning names the subfolders left out (not hidden ones, zarr arrays, which are inputs, or
    --out-dir), info's too, and the error says -r would take them."""
    (shots / ".cache").mkdir()
    (shots / "out").mkdir()
    (shots / "c.npy").unlink()
    line = f"Warning: left out the folder {shots / 'day'}: give -r to take subfolders too\n"
    done = run("crop-pad", shots, "--out-dir", shots / "out", "--shape", "4,4")
    assert done.exit_code == 0 and line in done.stderr and ".cache" not in done.stderr and "out:" not in done.stderr
    assert files(shots / "out") == ["a.png", "b.png"]
    # (info has no --out-dir: out is one more folder to it)
    told = f"Warning: left out 2 folders, {shots / 'day'}, {shots / 'out'}: give -r to take subfolders too\n"
    assert told in run("info", shots).stderr
    assert run("crop-pad", shots, "-r", "--out-dir", tmp_path / "all", "--shape", "4,4").stderr.count("left out") == 1
    quiet = run("crop-pad", shots, "--out-dir", tmp_path / "q", "--shape", "4,4", "-q")
    assert quiet.exit_code == 0 and quiet.stderr == ""
    nested = tmp_path / "nested"
    (nested / "sub").mkdir(parents=True)
    shutil.copy(shots / "a.png", nested / "sub" / "a.png")
    refused = run("crop-pad", nested, "--out-dir", tmp_path / "n", "--shape", "4,4")
    assert refused.exit_code == 2
    assert refused.stderr.endswith(f"{nested} has no file geomcli reads {plan.READ_SUFFIXES}; give -r to take its "
                                   "subfolders too\n")


def test_a_folder_a_glob_matches_is_taken_as_that_folder_named(shots: Path, tmp_path: Path) -> None:
    """'shots/*' left shots/day out in silence, even with -r, where the shell's own expansion
    passes it as a folder (and -r walks it). It is now that folder named: walked with -r, its
    files under their path below it; without -r its own files, its subfolders named in a warning."""
    common = ["--name", "{stem}.npy", "--blocksize", "2"]
    walked = run("space-to-depth", f"{shots}/*", "-r", "--out-dir", tmp_path / "r", *common)
    as_shell = run("space-to-depth", shots / "a.png", shots / "b.png", shots / "c.npy", shots / "day", "-r",
                   "--out-dir", tmp_path / "shell", *common)
    assert walked.exit_code == as_shell.exit_code == 0, walked.stderr
    assert files(tmp_path / "r") == files(tmp_path / "shell") == ["a.npy", "b.npy", "c.npy", "d.npy", "night/e.npy"]
    flat = run("space-to-depth", f"{shots}/*", "--out-dir", tmp_path / "flat", *common)
    assert flat.exit_code == 0
    assert f"Warning: left out the folder {shots / 'day' / 'night'}: give -r to take subfolders too\n" in flat.stderr
    assert files(tmp_path / "flat") == ["a.npy", "b.npy", "c.npy", "d.npy"]
    # a glob's --out-dir is still left out: a second run takes no output of the first
    totals = [json.loads(run("space-to-depth", f"{shots}/*", "-r", "--out-dir", shots / "out", *common,
                             "--json").stdout.splitlines()[-1])["total"] for _ in range(2)]
    assert totals == [5, 5]


def test_recursive_mirrors_subfolders(shots: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("space-to-depth", shots, "-r", "--out-dir", out, "--name", "{stem}.npy", "--blocksize", "2")
    assert result.exit_code == 0, result.stderr
    assert files(out) == ["a.npy", "b.npy", "c.npy", "day/d.npy", "day/night/e.npy"]
    assert np.load(out / "day" / "night" / "e.npy").shape == (5, 5, 16)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_subfolder_whose_every_file_failed_is_not_left_empty(shots: Path, tmp_path: Path, jobs: str) -> None:
    (shots / "day" / "night" / "e.png").write_bytes(b"not a png")
    (shots / "day" / "bad" / "worse").mkdir(parents=True)
    (shots / "day" / "bad" / "worse" / "f.png").write_bytes(b"not a png either")
    out = tmp_path / "out"
    (out / "night").mkdir(parents=True)  # there before the run: kept, empty as it was
    result = run("crop-pad", shots / "day", "-r", "--out-dir", out, "--shape", "4,4", "-j", jobs)
    assert result.exit_code == 1
    assert result.stderr.count("Error: ") == 2
    assert files(out) == ["d.png"]
    # bad/ and bad/worse/ were made by the run for f.png alone, which failed: taken away
    assert sorted(path.name for path in out.iterdir()) == ["d.png", "night"]


def test_globs_are_expanded_by_geomcli(shots: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("crop-pad", f"{shots}/**/*.png", "--out-dir", out, "--shape", "4,4", "--json")
    assert result.exit_code == 0, result.stderr
    assert files(out) == ["a.png", "b.png", "day/d.png", "day/night/e.png"]
    flat = tmp_path / "flat"
    assert run("crop-pad", f"{shots}/*.png", "--out-dir", flat, "--shape", "4,4").exit_code == 0
    assert files(flat) == ["a.png", "b.png"]


def test_files_and_globs_mix_and_a_file_named_twice_runs_once(shots: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("crop-pad", shots / "a.png", f"{shots}/[ab].png", "--out-dir", out, "--shape", "4,4", "--json")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["input"] for line in lines[:-1]] == [str(shots / "a.png"), str(shots / "b.png")]


@pytest.mark.parametrize(("arguments", "made"), [
    (["b2", "-r"], ["base.png", "sub/other.png"]),
    (["b2"], ["base.png"]),
    (["b2/**/*.png"], ["base.png", "sub/other.png"]),
    (["b2/*/*.png", "--name", "{parent}.png"], ["sub.png"]),  # which b2/*/*.png would match
    (["chain", "-i", "b2", "-r"], ["base.png", "sub/other.png"]),
    (["--files-from", "list.txt", "-r"], ["base.png", "sub/other.png"]),  # a listed folder is walked too
])
@pytest.mark.parametrize("out_dir", ["b2/out", "./b2//out/", "alias", "{tmp}/alias/"])
@pytest.mark.parametrize("again", [[], ["--skip-existing"], ["-n"]])
def test_an_out_dir_inside_a_walked_folder_is_not_walked_so_a_rerun_works(
        arguments: list[str], made: list[str], out_dir: str, again: list[str], tmp_path: Path,
        rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    png(tmp_path / "b2" / "base.png", rng)
    png(tmp_path / "b2" / "sub" / "other.png", rng)
    (tmp_path / "b2" / "out").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "b2" / "out")  # the same folder by another name
    (tmp_path / "list.txt").write_text("b2\n")
    command = ["chain"] if arguments[0] == "chain" else ["crop-pad"]
    args = [*command, *arguments[1 if command == ["chain"] else 0:], "--out-dir", out_dir.format(tmp=tmp_path)]
    step = ["crop-pad", "--shape", "4,4"] if command == ["chain"] else ["--shape", "4,4"]
    first = run(*args, *step)
    assert first.exit_code == 0, first.stderr
    assert files(tmp_path / "b2" / "out") == made
    result = run(*args, *again, *step)  # the first run's outputs are not inputs of the second
    assert result.exit_code == 0, result.stderr
    counts = f"0 ok, 0 failed, {len(made)} skipped" if again else f"{len(made)} ok, 0 failed, 0 skipped"
    assert f": {counts} in " in result.stderr
    assert files(tmp_path / "b2" / "out") == made


def test_a_file_or_folder_named_inside_the_out_dir_is_still_an_input(tmp_path: Path,
                                                                     rng: np.random.Generator) -> None:
    inside = png(tmp_path / "b2" / "out" / "a.png", rng)
    kept = _unchanged(inside)
    for named in [inside, f"{tmp_path}/b2/out/*.png", tmp_path / "b2" / "out"]:
        result = run("crop-pad", named, "--out-dir", tmp_path / "b2" / "out", "--shape", "4,4")
        assert result.exit_code == 2 and f"Error: {inside} " in result.stderr, (named, result.stderr)
    assert kept()
    result = run("crop-pad", tmp_path / "b2", "-r", "--out-dir", tmp_path / "b2" / "out", "--shape", "4,4")
    assert result.exit_code == 2
    assert (f"Error: the folder {tmp_path / 'b2'} has no file geomcli reads (.png, .jpg, .bmp, .gif, .webp, .npy, "
            f".tiff, .zarr) outside --out-dir {tmp_path / 'b2' / 'out'}, which it leaves out") in result.stderr
    png(tmp_path / "b2" / "b.png", rng)
    result = run("crop-pad", tmp_path / "b2", inside, "-r", "--out-dir", tmp_path / "b2" / "out", "--shape", "4,4")
    assert result.exit_code == 2 and f"Error: {inside} " in result.stderr
    assert kept() and files(tmp_path / "b2" / "out") == ["a.png"]


@pytest.mark.parametrize("argument", ["nothing/*.png", "{shots}/*.txt", "{empty}"])
def test_a_glob_or_folder_without_inputs_is_a_usage_error(argument: str, shots: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    pattern = argument.format(shots=shots, empty=tmp_path / "empty")
    result = run("crop-pad", pattern, "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 2 and "has no file geomcli reads" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_broken_link_named_says_so(shots: Path, tmp_path: Path) -> None:
    """Named, or listed by --files-from, it was 'no such file', for a name that ls lists."""
    (shots / "gone.png").symlink_to("nowhere.png")
    line = f"Error: {shots / 'gone.png'}: a broken symbolic link to nowhere.png\n"
    named = run("crop-pad", shots / "a.png", shots / "gone.png", "--out-dir", tmp_path / "out", "--shape", "4,4")
    listed = run("crop-pad", "--files-from", "-", "--out-dir", tmp_path / "listed", "--shape", "4,4",
                 stdin=f"{shots / 'gone.png'}\n".encode())
    one = run("info", shots / "gone.png")
    assert (named.exit_code, listed.exit_code, one.exit_code) == (1, 1, 1)
    assert line in named.stderr and line in listed.stderr and one.stderr == line


def test_a_loop_of_links_is_named_so_in_a_batch_as_alone(shots: Path, tmp_path: Path) -> None:
    """A folder's link that loops (to itself, or to a link back to it) was 'a broken symbolic link
    to b.png' in a batch, for a b.png that ls lists; alone, 'cannot read (Too many levels of
    symbolic links)'. Both now say the loop."""
    for name, target in (("a.png", "b.png"), ("b.png", "a.png")):
        (shots / name).unlink()
        (shots / name).symlink_to(target)
    batch = run("crop-pad", shots, "--out-dir", tmp_path / "out", "--shape", "4,4", "--layout", "NCHW")
    alone = run("crop-pad", shots / "a.png", "-o", tmp_path / "a.png", "--shape", "4,4")
    assert (batch.exit_code, alone.exit_code) == (1, 1)
    for name in ("a.png", "b.png"):
        assert f"Error: {shots / name}: symbolic links in a loop, which reach no file\n" in batch.stderr
    assert alone.stderr == f"Error: {shots / 'a.png'}: symbolic links in a loop, which reach no file\n"
    assert "a.png" not in files(tmp_path / "out") and not (tmp_path / "a.png").exists()


def test_a_missing_file_is_one_failure(shots: Path, tmp_path: Path) -> None:
    result = run("crop-pad", shots / "a.png", shots / "gone.png", "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 1
    assert f"Error: {shots / 'gone.png'}: no such file" in result.stderr
    assert files(tmp_path / "out") == ["a.png"]


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
@pytest.mark.parametrize(("name", "target"), [("gone.png", "nowhere.png"), ("loop.png", "loop.png")])
def test_a_broken_link_a_folder_finds_names_its_planned_output(name: str, target: str, dry_run: list[str],
                                                              shots: Path, tmp_path: Path) -> None:
    """Its --json record said "output": null, where a missing file named names the output it was
    planned to: a script pairing inputs with outputs lost it."""
    (shots / name).symlink_to(target)
    result = run("crop-pad", shots, "--out-dir", tmp_path / "out", "--shape", "4,4", "--layout", "NCHW", "--json",
                 *dry_run)
    assert result.exit_code == 1
    record = next(record for record in map(json.loads, result.stdout.splitlines()) if record.get("input") == str(
        shots / name))
    assert (record["status"], record["output"]) == ("error", str(tmp_path / "out" / name))
    assert not (tmp_path / "out" / name).exists()


@pytest.mark.parametrize("argument", ["{shots}", "{shots}/*.png", "{shots}/**/*.png"])
@pytest.mark.parametrize(("name", "target", "error"), [
    ("gone.png", "nowhere.png", "a broken symbolic link to nowhere.png"),
    ("loop.png", "loop.png", "symbolic links in a loop, which reach no file"),
    ("zero.png", "/dev/zero", "is a device, not a file or a pipe"),
])
def test_a_broken_link_or_a_device_a_folder_or_glob_finds_is_one_failure(
        argument: str, name: str, target: str, error: str, shots: Path, tmp_path: Path) -> None:
    """The shell's glob gives a broken link or a link to a device (a FIFO alike), and the run fails
    on it as when it is named: each was left out unsaid, exit 0."""
    (shots / name).symlink_to(target)
    result = run("crop-pad", argument.format(shots=shots), "--out-dir", tmp_path / "out", "--shape", "4,4",
                 "--layout", "NCHW")
    assert result.exit_code == 1
    assert f"Error: {shots / name}: {error}\n" in result.stderr
    assert "a.png" in files(tmp_path / "out") and name not in files(tmp_path / "out")
    info = run("info", argument.format(shots=shots), "--json")
    assert info.exit_code == 1
    assert {"input": str(shots / name), "status": "error", "error": f"{shots / name}: {error}"}.items() <= \
        next(record for record in map(json.loads, info.stdout.splitlines()) if name in record["input"]).items()


# --- usage ----------------------------------------------------------------------------


@pytest.mark.parametrize(("extra", "message"), [
    ([], "give -o OUTPUT for one INPUT, or --out-dir DIR"),
    (["-o", "x.png"], "-o takes one INPUT, found 2; give --out-dir DIR for several"),
    (["-o", "x.png", "--out-dir", "out"], "-o and --out-dir cannot be combined"),
])
def test_several_inputs_need_out_dir(extra: list[str], message: str, shots: Path) -> None:
    result = run("crop-pad", shots / "a.png", shots / "b.png", "--shape", "4,4", *extra)
    assert result.exit_code == 2 and message in result.stderr


def test_batch_options_and_folders_go_with_out_dir(shots: Path, tmp_path: Path) -> None:
    result = run("crop-pad", shots / "a.png", "-o", tmp_path / "x.png", "--shape", "4,4", "-j", "2")
    assert result.exit_code == 2 and "-j/--jobs goes with --out-dir, not -o" in result.stderr
    result = run("crop-pad", shots, "-o", tmp_path / "x.png", "--shape", "4,4")
    assert result.exit_code == 2 and "is a folder; give --out-dir DIR" in result.stderr
    result = run("crop-pad", "-", "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 2 and "- (stdin) is one input" in result.stderr


def test_one_file_runs_never_import_the_batch_module(shots: Path, tmp_path: Path) -> None:
    probe = ("import sys\nfrom geomcli.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
             "    pass\nprint('geomcli.engine.workers' in sys.modules)")
    one = [sys.executable, "-c", probe, "crop-pad", str(shots / "a.png"), "-o", str(tmp_path / "x.png"),
           "--shape", "4,4", "-q"]
    assert subprocess.run(one, capture_output=True, text=True).stdout == "False\n"
    many = [*one[:4], str(shots / "a.png"), "--out-dir", str(tmp_path / "out"), "--shape", "4,4", "-q"]
    assert subprocess.run(many, capture_output=True, text=True).stdout == "True\n"


# --- names: templates, collisions, escapes ---------------------------------------------


def test_template_fields_and_format_from_the_extension(shots: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("crop-pad", f"{shots}/**/*.png", "--out-dir", out, "--name", "{parent}/{index:03d}_{name}.npy",
                 "--shape", "4,4")
    assert result.exit_code == 0, result.stderr
    assert files(out) == ["000_a.png.npy", "001_b.png.npy", "day/002_d.png.npy", "day/night/003_e.png.npy"]
    assert np.load(out / "001_b.png.npy").shape == (4, 4)


def test_the_stem_of_an_ome_name_leaves_out_its_double_extension(tmp_path: Path) -> None:
    """'--name {stem}.ome.tif' of x.ome.tif wrote x.ome.ome.tif (os.path.splitext's stem x.ome). An
    OME name's extension is .ome.tif, .ome.tiff or .ome.zarr whole: {stem} is x, {suffix} the rest,
    so that the default {stem}{suffix} is the input's name as before."""
    import tifffile

    pytest.importorskip("zarr")
    import zarr

    source = tmp_path / "in"
    source.mkdir()
    data = np.arange(64, dtype=np.uint8).reshape(8, 8)
    tifffile.imwrite(source / "x.ome.tif", data, ome=True)
    tifffile.imwrite(source / "y.OME.tiff", data, ome=True)
    zarr.create_array(str(source / "z.ome.zarr"), shape=data.shape, dtype=data.dtype)[...] = data
    for template, expected in (("{stem}.ome.tif", ["x.ome.tif", "y.ome.tif", "z.ome.tif"]),
                               ("{stem}{suffix}", ["x.ome.tif", "y.OME.tiff", "z.ome.zarr"]),
                               ("{stem}_{suffix}.npy", ["x_.ome.tif.npy", "y_.OME.tiff.npy", "z_.ome.zarr.npy"])):
        out = tmp_path / template.replace("{", "").replace("}", "")
        result = run("crop-pad", source / "x.ome.tif", source / "y.OME.tiff", source / "z.ome.zarr", "--out-dir", out,
                     "--name", template, "--shape", "4,4", "-q")
        assert result.exit_code == 0, result.stderr
        assert sorted(path.name for path in out.iterdir()) == expected


@pytest.mark.parametrize("name, suggested", [(None, "{stem}.npy"), ("{index}_{stem}.png", "{index}_{stem}.npy")])
def test_format_contradicting_the_template_extension_is_a_usage_error(shots: Path, tmp_path: Path,
                                                                      name: str | None, suggested: str) -> None:
    out = tmp_path / "out"
    result = run("crop-pad", shots / "a.png", "--out-dir", out, *(["--name", name] if name else []),
                 "--shape", "4,4", "--format", "npy")
    assert result.exit_code == 2 and result.stdout == ""
    first = out / ("a.png" if name is None else "0_a.png")
    assert result.stderr.endswith(
        f"Error: Invalid value for '--name': --format npy contradicts the extension of {first} (png), named by "
        f"'{name or '{stem}{suffix}'}'; give --name '{suggested}' or drop --format\n")
    assert not out.exists()
    agreeing = run("crop-pad", shots / "a.png", "--out-dir", out, "--name", suggested, "--shape", "4,4",
                   "--format", "npy", "-q")
    assert (agreeing.exit_code, agreeing.stdout, agreeing.stderr) == (0, "", "")
    assert np.load(out / ("a.npy" if name is None else "0_a.npy")).shape == (4, 4, 3)


def test_a_template_without_parent_still_mirrors(shots: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run("crop-pad", shots / "day", "-r", "--out-dir", out, "--name", "s_{stem}.png",
               "--shape", "4,4").exit_code == 0
    assert files(out) == ["night/s_e.png", "s_d.png"]


def test_two_inputs_for_one_output_is_caught_before_writing(shots: Path, tmp_path: Path,
                                                             rng: np.random.Generator) -> None:
    png(shots / "c.png", rng)  # c.png and c.npy both become c.npy
    out = tmp_path / "out"
    result = run("crop-pad", shots, "--out-dir", out, "--name", "{stem}.npy", "--shape", "1,1")
    assert result.exit_code == 2
    assert f"{shots / 'c.npy'} and {shots / 'c.png'} would both be written to {out / 'c.npy'}" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize(("names", "how"), [
    (("Photo.png", "photo.png"), "letter case"),
    (("cafe\u0301.png", "caf\u00e9.png"), "Unicode normalisation (NFC and NFD: they look alike)"),  # one to macOS
    (("CAFE\u0301.png", "caf\u00e9.png"), "letter case and Unicode normalisation"),
], ids=["case", "normalisation", "both"])
def test_outputs_that_differ_only_by_case_or_normalisation_are_told_or_refused(
        tmp_path: Path, rng: np.random.Generator, names: tuple[str, str], how: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both were written without a word; on a file system that folds them (macOS, Windows, their
    shares) the second replaced the first. Where --out-dir's file system is seen to fold them, the
    plan refuses them as it refuses one output for two inputs; elsewhere it warns."""
    shots = tmp_path / "shots"
    for name in names:
        png(shots / name, rng)
    out = tmp_path / "out"
    result = run("crop-pad", shots, "--out-dir", out, "--shape", "4,4")
    assert result.exit_code == 0, result.stderr
    assert sorted(os.listdir(out)) == sorted(names)
    first, second = sorted(names)
    told = (f"{out / first} and {out / second}, the outputs of {shots / first} and {shots / second}, differ only "
            f"by {how}")
    assert result.stderr.splitlines()[0] == (
        f"Warning: {told}: both are written, but on a file system that does not tell them apart (macOS, Windows, "
        "their shares) one replaces the other")
    assert run("crop-pad", shots, "--out-dir", tmp_path / "quiet", "--shape", "4,4", "-q").stderr == ""
    # a link named in the other case (DATA -> data) is a file of its own here: no refusal
    folding = tmp_path / "folds"
    folding.mkdir()
    (tmp_path / "FOLDS").symlink_to(folding)
    linked = run("crop-pad", shots, "--out-dir", folding / "out", "--shape", "4,4")
    assert linked.exit_code == 0 and linked.stderr.startswith("Warning: "), linked.stderr
    assert sorted(os.listdir(folding / "out")) == sorted(names)
    shutil.rmtree(folding / "out")
    (tmp_path / "FOLDS").unlink()
    # a file system that folds letter case, as seen from --out-dir's own name: FOLDS is folds there
    real_lstat = os.lstat
    monkeypatch.setattr(os, "lstat", lambda path, *args, **kwargs: real_lstat(
        str(path).replace(f"{os.sep}FOLDS", f"{os.sep}folds"), *args, **kwargs))
    refused = run("crop-pad", shots, "--out-dir", folding / "out", "--shape", "4,4")
    assert refused.exit_code == 2, refused.stderr
    assert refused.stderr.endswith(f"Error: {told.replace(str(out), str(folding / 'out'))}, and "
                                   f"{folding / 'out'} is on a file system that takes them for one file; put "
                                   "{index} in --name\n")
    assert os.listdir(folding) == []
    kept = run("crop-pad", shots, "--out-dir", folding / "out", "--name", "{index}_{stem}.png", "--shape", "4,4")
    assert kept.exit_code == 0 and "Warning" not in kept.stderr, kept.stderr
    assert sorted(os.listdir(folding / "out")) == [f"0_{first}", f"1_{second}"]


@pytest.mark.parametrize(("inputs", "name", "hint", "taken"), [
    (["a/x.png", "a/x.npy"], "{stem}.npy", "{suffix} or {index}", "{stem}{suffix}.npy"),
    (["a/x.png", "b/x.png"], "{parent}{stem}.png", "{index}", "{index}_{stem}.png"),
])
def test_the_hint_for_two_inputs_for_one_output_names_what_tells_them_apart(
        tmp_path: Path, rng: np.random.Generator, inputs: list[str], name: str, hint: str, taken: str) -> None:
    """The hint was always '{parent} or {index}', and {parent} changed nothing: it is in every
    output's path already, and two files named alone from two folders have the same one."""
    for path in inputs:
        (tmp_path / path).parent.mkdir(exist_ok=True)
        if path.endswith(".png"):
            png(tmp_path / path, rng)
        else:
            np.save(tmp_path / path, np.zeros((3, 3), np.uint8))
    out = tmp_path / "out"
    result = run("crop-pad", *(tmp_path / path for path in inputs), "--out-dir", out, "--name", name, "--shape", "2,2")
    assert result.exit_code == 2 and f"would both be written to {out / 'x'}" in result.stderr
    assert f"; put {hint} in --name\n" in result.stderr and not out.exists()
    followed = run("crop-pad", *(tmp_path / path for path in inputs), "--out-dir", out, "--name", taken,
                   "--shape", "2,2")
    assert followed.exit_code == 0, followed.stderr
    assert len(files(out)) == 2


def test_an_output_that_is_another_input_is_refused(tmp_path: Path, rng: np.random.Generator) -> None:
    one, other = png(tmp_path / "1.png", rng), png(tmp_path / "a.png", rng)
    result = run("crop-pad", tmp_path, "--out-dir", tmp_path, "--name", "{index}.png", "--shape", "4,4")
    assert result.exit_code == 2
    assert (f"Error: {one}, the output of {other}, would replace the input of that name; a batch never writes "
            "over its inputs: choose another --out-dir or --name") in result.stderr
    assert one.read_bytes() != b"" and other.exists() and not (tmp_path / "0.png").exists()


def test_an_output_over_the_grid_or_theta_file_is_refused(tmp_path: Path, rng: np.random.Generator) -> None:
    # --grid and --theta files are inputs of the run too: photo.png's output grid.npy was written
    # over the grid it was sampled at (exit 0), as theta.npy over the matrix
    photos = tmp_path / "photos"
    png(photos / "grid.png", rng)
    png(photos / "theta.png", rng)
    grid, theta = tmp_path / "out" / "grid.npy", tmp_path / "out" / "theta.npy"
    grid.parent.mkdir()
    np.save(grid, np.zeros((1, 4, 4, 2), np.float32))
    np.save(theta, np.array([[[1, 0, 0], [0, 1, 0]]], np.float32))
    (tmp_path / "alias").symlink_to(grid.parent)
    kept = _unchanged(grid, theta)
    result = run("grid-sample", photos, "--grid", grid, "--out-dir", tmp_path / "alias", "--name", "{stem}.npy")
    assert result.exit_code == 2
    assert (f"Error: {tmp_path / 'alias' / 'grid.npy'}, the output of {photos / 'grid.png'}, would replace {grid}, "
            "which --grid reads; a batch never writes over its inputs: choose another --out-dir or --name"
            ) in result.stderr
    result = run("warp", photos, "--theta", theta, "--out-dir", grid.parent, "--name", "{stem}.npy")
    assert result.exit_code == 2 and f"would replace {theta}, which --theta reads;" in result.stderr
    result = run("chain", "-i", photos, "--out-dir", grid.parent, "--name", "{stem}.npy", "crop-pad", "--shape",
                 "4,4", "warp", "--theta", theta)
    assert result.exit_code == 2 and f"would replace {theta}, which warp --theta reads;" in result.stderr
    assert kept() and sorted(os.listdir(grid.parent)) == ["grid.npy", "theta.npy"]
    numbers = run("warp", photos, "--theta", "1,0,0,0,1,0", "--out-dir", grid.parent, "--name", "{stem}.npy")
    assert numbers.exit_code == 0, numbers.stderr  # numbers read no file: outputs replace files, as make expects


def _unchanged(*paths: Path) -> Callable[[], bool]:
    before = {path: path.read_bytes() for path in paths}
    return lambda: all(path.read_bytes() == data for path, data in before.items())


def test_an_output_in_place_of_its_own_input_is_refused(shots: Path) -> None:
    kept = _unchanged(shots / "a.png", shots / "b.png")
    result = run("crop-pad", shots / "a.png", shots / "b.png", "--out-dir", shots, "--shape", "4,4")
    assert result.exit_code == 2
    assert (f"Error: {shots / 'a.png'} would replace the input it is made from; a batch never writes over its "
            "inputs") in result.stderr
    assert kept()


def test_a_folder_written_into_itself_is_refused(shots: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = _unchanged(shots / "a.png", shots / "b.png")
    assert run("crop-pad", shots, "--out-dir", shots, "--shape", "8,8").exit_code == 2
    monkeypatch.chdir(shots)
    result = run("crop-pad", ".", "--out-dir", ".", "--shape", "32,32")
    assert result.exit_code == 2 and "would replace the input" in result.stderr
    assert kept()


def test_an_output_on_a_hard_link_of_an_input_is_refused(shots: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    os.link(shots / "a.png", out / "a.png")  # another name, the same device and inode
    kept = _unchanged(shots / "a.png")
    result = run("crop-pad", shots / "a.png", "--out-dir", out, "--shape", "4,4")
    assert result.exit_code == 2
    assert f"Error: {out / 'a.png'} would replace the input it is made from, {shots / 'a.png'}; " in result.stderr
    assert kept()


def test_a_name_that_lands_on_an_input_is_refused(shots: Path) -> None:
    kept = _unchanged(shots / "a.png")
    result = run("crop-pad", shots / "a.png", "--out-dir", shots / "day", "--name", "../a.png", "--shape", "4,4")
    assert result.exit_code == 2
    result = run("crop-pad", shots / "a.png", "--out-dir", shots, "--name", "{stem}.png", "--shape", "4,4")
    assert result.exit_code == 2 and "would replace the input" in result.stderr
    assert kept()


def test_minus_o_may_still_name_its_own_input(shots: Path) -> None:
    result = run("crop-pad", shots / "a.png", "-o", shots / "a.png", "--shape", "4,4")
    assert result.exit_code == 0, result.stderr
    with Image.open(shots / "a.png") as image:
        assert image.size == (4, 4)


@pytest.mark.parametrize("template", ["../{name}", "{parent}/../../{name}", "x/../../{name}", "/tmp/{name}"])
def test_templates_cannot_escape_out_dir(template: str, shots: Path, tmp_path: Path) -> None:
    result = run("crop-pad", shots / "a.png", "--out-dir", tmp_path / "out", "--name", template, "--shape", "4,4")
    assert result.exit_code == 2 and "Invalid value for '--name'" in result.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "a.png").exists()


def test_a_symlinked_folder_cannot_lead_out_of_out_dir(shots: Path, tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "day").symlink_to(elsewhere)
    result = run("crop-pad", shots / "day", "--out-dir", out, "--name", "day/{name}", "--shape", "4,4")
    assert result.exit_code == 2 and "outside --out-dir" in result.stderr
    assert list(elsewhere.iterdir()) == []


def test_an_out_dir_reached_through_a_link_still_protects_the_inputs(tmp_path: Path, rng: np.random.Generator) -> None:
    folder = tmp_path / "shots"
    first, other = png(folder / "q.png", rng), png(folder / "0.png", rng, (9, 12, 4))
    before = other.read_bytes()
    (tmp_path / "alias").symlink_to(folder)
    result = run("crop-pad", first, other, "--out-dir", tmp_path / "alias", "--name", "{index}.png", "--shape", "4,4")
    assert result.exit_code == 2 and "would replace the input" in result.stderr
    assert other.read_bytes() == before and not (folder / "1.png").exists()
    (tmp_path / "link.png").symlink_to(other)  # the same input, read through a link elsewhere
    result = run("crop-pad", first, tmp_path / "link.png", "--out-dir", folder, "--name", "{index}.png",
                 "--shape", "4,4")
    assert result.exit_code == 2 and "would replace the input" in result.stderr
    assert other.read_bytes() == before


def test_two_outputs_landing_on_one_file_through_a_linked_folder_are_refused(
        tmp_path: Path, rng: np.random.Generator) -> None:
    png(tmp_path / "in" / "a" / "x.png", rng)
    png(tmp_path / "in" / "b" / "x.png", rng)
    (tmp_path / "out" / "b").mkdir(parents=True)
    (tmp_path / "out" / "a").symlink_to("b")
    result = run("crop-pad", tmp_path / "in", "-r", "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 2 and "would both be written to" in result.stderr
    assert files(tmp_path / "out") == []


def test_a_glob_never_follows_a_linked_folder_so_a_loop_ends(tmp_path: Path, rng: np.random.Generator) -> None:
    png(tmp_path / "in" / "a.png", rng)
    png(tmp_path / "in" / "sub" / "b.png", rng)
    for name in ("loop", "again"):  # two links to . would make 2**40 paths
        (tmp_path / "in" / name).symlink_to(".")
    (tmp_path / "in" / "sub" / "up").symlink_to("..")
    result = run("crop-pad", f"{tmp_path}/in/**/*.png", "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 0, result.stderr
    assert files(tmp_path / "out") == ["a.png", "sub/b.png"]


@pytest.mark.parametrize("pattern", ["*.png", "**/*.png", "**", "a/**", "*/**/*.png", "**/b/*.png", "[ad]/**/*.*",
                                     "a/?/*.png", ".hid/*.png", "a/.*.png", "**/**/*.png", "./a//b/*.png"])
def test_glob_finds_what_python_glob_finds_without_links(
        pattern: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import glob

    for name in ("x.png", "a/y.png", "a/b/z.png", "a/b/c/w.npy", "d/e/v.tiff", ".hid/h.png", "a/.hb/q.png",
                 "a/.dot.png", "d/e/u.png", "a/notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    monkeypatch.chdir(tmp_path)
    expected = {os.path.normpath(path) for path in glob.glob(pattern, recursive=True)
                if plan._readable(path) and os.path.isfile(path)}
    assert {os.path.normpath(source.path) for source in plan._glob(pattern)} == expected


@pytest.mark.parametrize("kind", ["fifo", "link to a device"])
def test_a_stream_at_an_output_name_is_refused_before_writing(kind: str, shots: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    if kind == "fifo":
        os.mkfifo(out / "b.png")  # opening it would wait for a reader forever
    else:
        (out / "b.png").symlink_to("/dev/null")
    result = run("crop-pad", shots / "a.png", shots / "b.png", "--out-dir", out, "--shape", "4,4")
    assert result.exit_code == 2 and "is a device, FIFO or socket" in result.stderr
    assert sorted(os.listdir(out)) == ["b.png"]


@pytest.mark.parametrize(("template", "message"), [
    ("{index:0500000000d}.png", "is wider than a file name can be"),
    ("{stem:x<300}.png", "is wider than a file name can be"),
    ("{stem:x<200}{stem:x<200}.png", "longer than a file name can be"),
])
def test_names_longer_than_a_file_name_are_usage_errors(template: str, message: str, shots: Path,
                                                        tmp_path: Path) -> None:
    result = run("crop-pad", shots / "a.png", "--out-dir", tmp_path / "out", "--name", template, "--shape", "4,4")
    assert result.exit_code == 2 and message in result.stderr
    assert len(result.stderr) < 1000 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("out_dir", ["", "/dev/null"])
def test_an_out_dir_that_cannot_be_a_folder_is_a_usage_error(out_dir: str, shots: Path) -> None:
    result = run("crop-pad", shots / "a.png", "--out-dir", out_dir, "--shape", "4,4")
    assert result.exit_code == 2 and "is not a folder" in result.stderr


@pytest.mark.parametrize("how", [["-r"], ["glob"], ["-r", "--dry-run"], ["glob", "--json"]])
def test_a_folder_that_cannot_be_listed_fails_alone(how: list[str], shots: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    locked = str(shots / "day")
    scandir = os.scandir

    def refusing(path: Any = ".") -> Any:
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    (shots / "c.npy").unlink()  # a rank-4 tensor --shape 4,4 does not fit: the plan would refuse the run
    inputs = [f"{shots}/**/*.png"] if how[0] == "glob" else [str(shots), "-r"]
    out = tmp_path / "out"
    result = run("crop-pad", *inputs, *how[1:], "--out-dir", out, "--shape", "4,4")
    assert result.exit_code == 1
    assert f"Error: {locked}: cannot list the folder (Permission denied)" in result.stderr.splitlines()
    if "--dry-run" not in how:
        assert {"a.png", "b.png"} <= set(files(out)) and not any(name.startswith("day") for name in files(out))
    if "--json" in how:
        records = [json.loads(line) for line in result.stdout.splitlines()]
        assert [(r["input"], r["output"], r["status"]) for r in records if r.get("input") == locked] == [
            (locked, None, "error")]
        assert records[-1]["failed"] == 1


def test_a_named_input_is_found_unreadable_by_reading_it(shots: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Not by os.access first (click's check, a usage error): an unreadable input is one failed
    file, exit 1, and the batch goes on."""
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)
    result = run("crop-pad", shots / "a.png", shots / "b.png", "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 0, result.stderr
    assert files(tmp_path / "out") == ["a.png", "b.png"]


@pytest.mark.parametrize(("template", "message"), [
    ("{stem}{ext}", "unknown field {ext}"),
    ("{0}.png", "unknown field {0}"),
    ("{stem.upper}.png", "unknown field {stem.upper}"),
    ("{stem!r}.png", "unknown field {stem!r};"),  # it said {stem}, a field it takes
    ("{index:{x}}.png", "unknown field {index:{x}};"),
    ("{stem:05d}.png", "Unknown format code 'd'"),
    ("{stem", "expected '}' before end of string"),
    ("{index}.txt", "unknown extension '.txt'"),
    # the first input's index, 0, as a character: a ValueError's traceback
    ("{index:c}.png", "'{index:c}.png' names '\\x00.png' for {shots}/a.png; a file name cannot hold a NUL"),
])
def test_bad_templates_are_usage_errors(template: str, message: str, shots: Path, tmp_path: Path) -> None:
    result = run("crop-pad", shots / "a.png", "--out-dir", tmp_path / "out", "--name", template, "--shape", "4,4")
    assert result.exit_code == 2 and message.replace("{shots}", str(shots)) in result.stderr
    assert not (tmp_path / "out").exists()


def test_an_input_of_no_extension_says_the_default_name_has_none(shots: Path, tmp_path: Path) -> None:
    """'crop-pad noext --out-dir out' said "Invalid value for '--name': out/noext: no file extension"
    where no --name was given: the line now names the template that made the name."""
    shutil.copy(shots / "a.png", tmp_path / "noext")
    result = run("crop-pad", tmp_path / "noext", "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        f"Error: Invalid value for '--name': {tmp_path / 'out' / 'noext'}: no file extension; expected one of "
        ".png, .apng, .jpg, .jpeg, .jfif, .jpe, .bmp, .gif, .webp, .npy, .tif, .tiff, .zarr (or give --format), named "
        "by --name "
        "'{stem}{suffix}'")
    assert not (tmp_path / "out").exists()
    assert run("crop-pad", tmp_path / "noext", "--out-dir", tmp_path / "out", "--shape", "4,4",
               "--format", "png").exit_code == 0


def test_render_examples() -> None:
    assert plan.render("{stem}_{index:02d}{suffix}", plan.Source("x/a.b.png", ""), 3) == ["a.b_03.png"]
    assert plan.render("{parent}/{name}", plan.Source("x/y/a.png", ""), 0) == ["a.png"]


# --- existing outputs -----------------------------------------------------------------


def statuses(result: Result) -> dict[str, str]:
    return {Path(record["input"]).name: record["status"] for record in map(json.loads, result.stdout.splitlines())
            if "input" in record}


def test_skip_existing_redoes_only_outputs_older_than_their_input(shots: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    pattern = f"{shots}/*.png"
    assert run("crop-pad", pattern, "--out-dir", out, "--shape", "4,4").exit_code == 0
    later = time.time() + 10
    os.utime(shots / "b.png", (later, later))
    result = run("crop-pad", pattern, "--out-dir", out, "--shape", "4,4", "--skip-existing", "--json")
    assert result.exit_code == 0
    assert statuses(result) == {"a.png": "skipped", "b.png": "ok"}
    assert json.loads(result.stdout.splitlines()[-1])["skipped"] == 1


@pytest.mark.parametrize("option", ["--grid", "--theta"])
def test_skip_existing_redoes_outputs_older_than_the_grid_or_theta_file(
        option: str, shots: Path, tmp_path: Path) -> None:
    """A --theta or --grid file is a prerequisite of every output, as make takes it: after
    'warp in --theta t.npy --out-dir out', a changed t.npy left every output as it was under
    --skip-existing ('0 ok, 0 failed, 2 skipped'), each made with the old matrix."""
    out, read = tmp_path / "out", tmp_path / "read.npy"
    command = "grid-sample" if option == "--grid" else "warp"
    grid = np.zeros((1, 3, 4, 2), np.float32)
    np.save(read, grid if option == "--grid" else np.eye(2, 3, dtype=np.float32)[None])
    argv = [command, f"{shots}/*.png", option, read, "--out-dir", out, "--json"]
    assert run(*argv).exit_code == 0
    first = {path.name: path.read_bytes() for path in out.iterdir()}
    np.save(read, grid + 0.5 if option == "--grid" else np.array([[[0.5, 0, 0], [0, 0.5, 0]]], np.float32))
    past = time.time() - 100
    for made in [*shots.glob("*.png"), *out.iterdir()]:  # outputs as new as their inputs, older than it
        os.utime(made, (past, past))
    result = run(*argv, "--skip-existing")
    assert result.exit_code == 0
    assert statuses(result) == {"a.png": "ok", "b.png": "ok"}
    assert all((out / name).read_bytes() != before for name, before in first.items())
    result = run(*argv, "--skip-existing")  # now each output is newer than all it is made from
    assert statuses(result) == {"a.png": "skipped", "b.png": "skipped"}


def test_skip_existing_skips_nothing_made_from_a_theta_read_from_stdin(shots: Path, tmp_path: Path) -> None:
    """'--theta -' has no time to judge by: after a run, 'warp d/ --theta - --skip-existing < new.npy'
    skipped every output, each made with the old matrix. Every output is done again."""
    out, theta = tmp_path / "out", tmp_path / "theta.npy"
    np.save(theta, np.eye(2, 3, dtype=np.float32)[None])
    argv = ["warp", f"{shots}/*.png", "--theta", "-", "--out-dir", out, "--json"]
    assert run(*argv, stdin=theta.read_bytes()).exit_code == 0
    np.save(theta, np.array([[[0.5, 0, 0], [0, 0.5, 0]]], np.float32))
    result = run(*argv, "--skip-existing", stdin=theta.read_bytes())
    assert result.exit_code == 0 and statuses(result) == {"a.png": "ok", "b.png": "ok"}


def test_skip_existing_takes_no_folder_for_an_output_up_to_date(shots: Path, tmp_path: Path) -> None:
    """A folder at an output's name, newer than its input, was skipped as up to date: exit 0, '1
    skipped', where the run without --skip-existing failed that file, and a make pipeline went on."""
    out = tmp_path / "out"
    (out / "a.png").mkdir(parents=True)
    argv = ["crop-pad", f"{shots}/*.png", "--out-dir", out, "--shape", "4,4", "--json"]
    plain = run(*argv)
    result = run(*argv, "--skip-existing")
    assert plain.exit_code == result.exit_code == 1
    assert statuses(plain) == {"a.png": "error", "b.png": "ok"}
    assert statuses(result) == {"a.png": "error", "b.png": "skipped"}
    assert f"Error: {out / 'a.png'}: is a directory" in result.stderr
    assert (out / "a.png").is_dir() and os.listdir(out / "a.png") == []


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_skip_existing_takes_no_zarr_group_for_an_output_up_to_date(shots: Path, tmp_path: Path,
                                                                    zarr_format: int) -> None:
    """A zarr group at a .zarr output's name, newer than its input, was skipped as up to date
    ('1 skipped', exit 0), where the run without --skip-existing wrote its array there: no array
    was made. It is done again, as without the option."""
    import zarr

    out = tmp_path / "out"
    zarr.create_group(str(out / "a.zarr"), zarr_format=zarr_format)
    result = run("crop-pad", shots / "a.png", "--out-dir", out, "--name", "{stem}.zarr", "--shape", "4,4",
                 "--skip-existing", "--json")
    assert result.exit_code == 0, result.stderr
    assert statuses(result) == {"a.png": "ok"}
    assert zarr.open_array(str(out / "a.zarr"), mode="r").shape[:2] == (4, 4)
    # an array made by the run is taken as up to date
    again = run("crop-pad", shots / "a.png", "--out-dir", out, "--name", "{stem}.zarr", "--shape", "4,4",
                "--skip-existing", "--json")
    assert again.exit_code == 0 and statuses(again) == {"a.png": "skipped"}


def test_no_clobber_never_replaces_a_file(shots: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.png").write_bytes(b"keep me")
    result = run("crop-pad", f"{shots}/*.png", "--out-dir", out, "--shape", "4,4", "-n", "--json")
    assert result.exit_code == 0
    assert statuses(result) == {"a.png": "skipped", "b.png": "ok"}
    assert (out / "a.png").read_bytes() == b"keep me"


def test_existing_outputs_are_overwritten_by_default(shots: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.png").write_bytes(b"old")
    assert run("crop-pad", shots / "a.png", "--out-dir", out, "--shape", "4,4").exit_code == 0
    assert (out / "a.png").read_bytes().startswith(b"\x89PNG")


# --- workers, determinism, failures -----------------------------------------------------


@pytest.fixture
def mixed(tmp_path: Path, rng: np.random.Generator) -> Path:
    """PNG, 16-bit PNG, NPY and TIFF inputs that space-to-depth takes."""
    import tifffile

    root = tmp_path / "mixed"
    png(root / "rgb.png", rng, (16, 20, 3))
    png(root / "rgba.png", rng, (8, 8, 4))
    Image.fromarray(rng.integers(0, 65536, (12, 12), dtype=np.uint16)).save(root / "grey16.png")
    np.save(root / "t.npy", rng.standard_normal((2, 3, 4, 6)).astype(np.float32))
    tifffile.imwrite(root / "s.tiff", rng.integers(0, 60000, (6, 12, 3), dtype=np.uint16))
    return root


def test_two_jobs_give_what_one_gives_and_runs_repeat_byte_for_byte(mixed: Path, tmp_path: Path) -> None:
    outputs = []
    for jobs in ("1", "2", "2"):
        out = tmp_path / f"out{len(outputs)}"
        result = run("space-to-depth", mixed, "--out-dir", out, "--name", "{stem}.{index}.tiff", "--blocksize", "2",
                     "-j", jobs, "--json")
        assert result.exit_code == 0, result.stderr
        outputs.append((contents(out), [json.loads(line)["output"].split("/")[-1] for line in result.stdout.splitlines()
                                        if "output" in json.loads(line)]))
    assert len(outputs[0][0]) == 5
    assert outputs[0][0] == outputs[1][0] == outputs[2][0]
    assert outputs[0][1] == outputs[1][1]  # the JSON stream keeps the input order


def test_one_corrupt_file_fails_alone(mixed: Path, tmp_path: Path) -> None:
    (mixed / "broken.png").write_bytes((mixed / "rgb.png").read_bytes()[:60])
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}"
        result = run("space-to-depth", mixed, "--out-dir", out, "--name", "{stem}.npy", "--blocksize", "2",
                     "-j", jobs)
        assert result.exit_code == 1
        assert result.stderr.splitlines() == [
            f"Error: {mixed / 'broken.png'}: not a readable PNG (truncated)",
            result.stderr.splitlines()[-1],
        ]
        assert result.stderr.splitlines()[-1].startswith("space-to-depth: 5 ok, 1 failed, 0 skipped in ")
        assert files(out) == ["grey16.npy", "rgb.npy", "rgba.npy", "s.npy", "t.npy"]  # no temporary file


def test_fail_fast_stops_at_the_first_failure(mixed: Path, tmp_path: Path) -> None:
    (mixed / "a-broken.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    out = tmp_path / "out"
    result = run("space-to-depth", mixed, "--out-dir", out, "--name", "{stem}.npy", "--blocksize", "2",
                 "--fail-fast", "--json")
    assert result.exit_code == 1
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary | {"seconds": 0} == {"command": "space-to-depth", "status": "summary", "dry_run": False, "ok": 0,
                                       "failed": 1, "skipped": 0, "not_run": 5, "total": 6, "seconds": 0}
    assert files(out) == []


def test_an_interrupted_in_process_run_clears_a_writer_killed_in_mkstemp(
        shots: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from geomcli.engine import jobs as transform_module  # where a batch job calls transform_file

    out = tmp_path / "out"

    def killed(*args: object) -> None:
        # what a signal between mkstemp and the writer's try leaves behind
        (out / ".b.png.abcd_123.tmp").write_bytes(b"half")
        raise KeyboardInterrupt

    real = transform_module.transform_file
    monkeypatch.setattr(transform_module, "transform_file",
                        lambda *args: killed() if args[1].endswith("b.png") else real(*args))
    result = run("crop-pad", f"{shots}/*.png", "--out-dir", out, "--shape", "4,4", "-j", "1")
    assert result.exit_code == 130
    assert files(out) == ["a.png"]


def signal_at_first_output(process: subprocess.Popen[str], out: Path, sent: int) -> None:
    """Send ``sent`` to the batch ``process`` once its first output is in ``out``, held (SIGSTOP)
    meanwhile, so that it cannot finish between the two."""
    deadline = time.monotonic() + 60
    while not (out.exists() and any(name.endswith(".png") and not name.startswith(".") for name in os.listdir(out))):
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.01)
    process.send_signal(signal.SIGSTOP)
    process.send_signal(sent)
    process.send_signal(signal.SIGCONT)


def read_to_the_end(process: subprocess.Popen[str], seconds: float) -> tuple[str, str]:
    """The rest of ``process``'s stdout and its stderr once it has ended (killed after ``seconds``),
    read through the streams a readline() began on: communicate() reads the pipes beneath, and
    lost the lines readline had buffered (two records a read: one record short of the folder)."""
    assert process.stdout is not None and process.stderr is not None
    watchdog = threading.Timer(seconds, process.kill)
    watchdog.start()
    try:
        stdout, stderr = process.stdout.read(), process.stderr.read()
        process.wait()
    finally:
        watchdog.cancel()
        process.stdout.close()
        process.stderr.close()
    return stdout, stderr


@pytest.mark.process
@pytest.mark.parametrize(("sent", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, -signal.SIGINT)])
def test_a_signal_mid_batch_leaves_only_complete_files(sent: int, code: int, tmp_path: Path) -> None:
    """The signal lands mid-batch on a busy machine too: the run is held (SIGSTOP) the moment its
    first output appears, signalled, then let go, so it cannot have finished meanwhile."""
    slow_inputs(tmp_path / "in", 60)
    out = tmp_path / "out"
    process = subprocess.Popen([*GEOMCLI, "crop-pad", str(tmp_path / "in"), "--out-dir", str(out),
                                "--shape", "390,590", "-j", "2"], stderr=subprocess.PIPE, text=True)
    signal_at_first_output(process, out, sent)
    stderr = process.communicate(timeout=20)[1]
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    written = files(out)
    assert 0 < len(written) < 60
    assert all(name.endswith(".png") and not name.startswith(".") for name in written), written
    for name in written:
        with Image.open(out / name) as image:
            assert np.asarray(image).shape == (390, 590, 3)


@pytest.mark.process
@pytest.mark.parametrize(("sent", "code", "jobs"), [(signal.SIGTERM, 143, "1"), (signal.SIGTERM, 143, "2"),
                                                    (signal.SIGINT, -signal.SIGINT, "2")])
def test_a_signal_mid_batch_still_ends_the_json_stream_with_a_summary(sent: int, code: int, jobs: str,
                                                                     tmp_path: Path) -> None:
    """SIGTERM or Ctrl-C during a batch with --json ended the stream after the last file's record,
    with no summary: a pipeline reading it could not tell a run cut short from one whose summary was
    lost. The summary now comes, of the files done so far, marked "interrupted": true; the exit code
    is the signal's as before. Held (SIGSTOP) at its first record, so it cannot finish meanwhile."""
    slow_inputs(tmp_path / "in", 60)
    process = subprocess.Popen([*GEOMCLI, "crop-pad", str(tmp_path / "in"), "--out-dir", str(tmp_path / "out"),
                                "--shape", "390,590", "-j", jobs, "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    first = process.stdout.readline()
    process.send_signal(signal.SIGSTOP)
    process.send_signal(sent)
    process.send_signal(signal.SIGCONT)
    rest, stderr = read_to_the_end(process, 30)  # (not communicate(): see read_to_the_end)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    records = [json.loads(line) for line in [first, *rest.splitlines()]]
    *done, last = records
    assert all(record["status"] == "ok" for record in done) and 0 < len(done) < 60
    assert last | {"seconds": 0} == {"command": "crop-pad", "status": "summary", "dry_run": False, "ok": len(done),
                                     "failed": 0, "skipped": 0, "not_run": 60 - len(done), "total": 60,
                                     "seconds": 0, "interrupted": True}
    assert {Path(record["output"]).name for record in done} == set(files(tmp_path / "out"))


def test_a_finished_batch_s_summary_is_not_marked_interrupted(shots: Path, tmp_path: Path) -> None:
    result = run("crop-pad", shots / "a.png", shots / "b.png", "--out-dir", tmp_path / "out", "--shape", "4,4",
                 "--json")
    assert result.exit_code == 0
    last = json.loads(result.stdout.splitlines()[-1])
    assert last["status"] == "summary" and last["ok"] == 2 and "interrupted" not in last


@pytest.mark.process
@pytest.mark.parametrize(("sent", "code", "jobs", "quiet"), [(signal.SIGTERM, 143, "1", False),
                                                             (signal.SIGTERM, 143, "2", False),
                                                             (signal.SIGINT, -signal.SIGINT, "2", False),
                                                             (signal.SIGTERM, 143, "2", True)])
def test_a_signal_mid_batch_still_ends_stderr_with_the_count_line(sent: int, code: int, jobs: str, quiet: bool,
                                                                  tmp_path: Path) -> None:
    """Without --json, SIGTERM mid-batch printed nothing and Ctrl-C "Interrupted" alone: a user
    scrolling back could not see what was done. The usual count line now comes, the files not run
    marked (interrupted), before Ctrl-C's "Interrupted"; -q still prints nothing. Held (SIGSTOP)
    at its first output, so it cannot finish meanwhile."""
    slow_inputs(tmp_path / "in", 60)
    out = tmp_path / "out"
    process = subprocess.Popen([*GEOMCLI, "crop-pad", str(tmp_path / "in"), "--out-dir", str(out),
                                "--shape", "390,590", "-j", jobs, *(["-q"] if quiet else [])],
                               stderr=subprocess.PIPE, text=True)
    signal_at_first_output(process, out, sent)
    stderr = process.communicate(timeout=30)[1]
    assert process.returncode == code, stderr
    if quiet:
        assert stderr == ""
        return
    lines = stderr.splitlines()
    if sent == signal.SIGINT:
        assert lines.pop() == "Interrupted"
    counted = re.fullmatch(r"crop-pad: (\d+) ok, 0 failed, 0 skipped, (\d+) not run \(interrupted\) in \d+\.\d s",
                           lines[-1])
    assert counted is not None, stderr
    ok, not_run = int(counted[1]), int(counted[2])
    assert not_run > 0 and ok + not_run == 60
    assert ok == len(files(out))


def ok_records_and_outputs(stdout: str, out: Path) -> tuple[dict[str, Any], set[str], set[str]]:
    """An interrupted --json run's summary, the names of the outputs its "ok" records name, and
    the names in its output folder."""
    *records, last = [json.loads(line) for line in stdout.splitlines()]
    ok = {Path(record["output"]).name for record in records if record["status"] == "ok"}
    return last, ok, set(files(out)) if out.exists() else set()


@pytest.mark.process
@pytest.mark.parametrize("where", [["-j", "1"], ["-j", "2"], pytest.param(["--scheduler", "local:2"], marks=[
    pytest.mark.cluster, pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                            reason="needs the dask extra")])])
def test_an_interrupted_batch_s_ok_records_name_exactly_the_outputs_on_disk(where: list[str], tmp_path: Path) -> None:
    """SIGTERM mid-run with -j 2 left outputs that workers had placed, whole, with no record: their
    reports were still in the pipe (or not yet sent) when the workers were stopped, and the
    summary counted them not run (7 runs in 15 here, 1 to 3 files each); on a cluster, those of
    every task in flight (a cancelled task returns no reports: 44 to 55 files, each run). Many
    small files, the signal at a few moments once the workers are up, several rounds."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    rng = np.random.default_rng(3)
    for index in range(400):
        Image.fromarray(rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)).save(inputs / f"{index:03d}.png")
    for round_ in range(5):
        out = tmp_path / f"out{round_}"
        process = subprocess.Popen([*GEOMCLI, "crop-pad", str(inputs), "--out-dir", str(out), "--shape", "30,30",
                                    *where, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert process.stdout is not None
        first = process.stdout.readline()
        time.sleep(0.3 + 0.1 * round_)  # (the workers take a few tenths of a second to start)
        process.send_signal(signal.SIGTERM)
        rest, stderr = read_to_the_end(process, 60)
        assert process.returncode in (0, 143) and "Traceback" not in stderr, stderr
        last, ok, on_disk = ok_records_and_outputs(first + rest, out)
        assert ok == on_disk and last["ok"] == len(ok), (round_, sorted(on_disk ^ ok), last)


def _pngs_and_a_hook(tmp_path: Path, names: list[str], hook: str, sent: str) -> tuple[Path, dict[str, str]]:
    """A folder of small PNGs ``names``, and the environment of a run that loads ``hook`` as its
    sitecustomize, with the signal ``sent`` in GEOMCLI_TEST_STOP."""
    hooks, inputs = tmp_path / "hooks", tmp_path / "in"
    hooks.mkdir()
    inputs.mkdir()
    (hooks / "sitecustomize.py").write_text(hook)
    for name in names:
        Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(inputs / name)
    return inputs, hooked(hooks, GEOMCLI_TEST_STOP=sent)


# Loaded by the run's interpreter and its workers' (sitecustomize on PYTHONPATH): the process that
# places stop.png then sends the run (its process group's leader) GEOMCLI_TEST_STOP, and a worker
# waits a second before it reports it, so that the run stops it there: its output placed, unreported
_STOP_AS_STOP_PNG_IS_PLACED = """
import os
import signal
import time
from geomcli.io import _atomic
_place = _atomic._place
def signalled_once_placed(tmp, path, *args, **kwargs):
    _place(tmp, path, *args, **kwargs)
    if os.path.basename(path) == "stop.png":
        os.kill(os.getpgid(0), getattr(signal, os.environ["GEOMCLI_TEST_STOP"]))
        time.sleep(1)
_atomic._place = signalled_once_placed
"""


@pytest.mark.process
@pytest.mark.parametrize(("sent", "code", "where"), [
    ("SIGTERM", 143, ["-j", "1"]), ("SIGTERM", 143, ["-j", "2"]), ("SIGINT", -signal.SIGINT, ["-j", "1"]),
    ("SIGINT", -signal.SIGINT, ["-j", "2"]),
    pytest.param("SIGTERM", 143, ["--scheduler", "local:2"], marks=[
        pytest.mark.cluster, pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                                reason="needs the dask extra")])])
def test_a_signal_just_after_an_output_is_placed_still_gives_it_its_record(sent: str, code: int, where: list[str],
                                                                            tmp_path: Path) -> None:
    """A signal between an output's rename and its report: in this process (-j 1, or a file done
    here while the workers start) the report was lost with the signal's exception; in a worker,
    the parent's SIGTERM ended it before it sent the report, or the parent never read one sent.
    Either way stop.png was in place and its summary said not run; on a cluster, the cancelled
    task returned no report at all. Now the rename and the report are one step, the parent reads
    what its stopped workers sent, and a stopped cluster run takes what its tasks placed."""
    inputs, env = _pngs_and_a_hook(tmp_path, [f"{index:03d}.png" for index in range(30)] + ["stop.png", "zz.png"],
                                   _STOP_AS_STOP_PNG_IS_PLACED, sent)
    out = tmp_path / "out"
    result = subprocess.run([*GEOMCLI, "crop-pad", str(inputs), "--out-dir", str(out), "--shape", "8,8", *where,
                             "--json"], capture_output=True, text=True, env=env, timeout=60, start_new_session=True)
    assert result.returncode == code and "Traceback" not in result.stderr, result.stderr
    last, ok, on_disk = ok_records_and_outputs(result.stdout, out)
    assert "stop.png" in on_disk
    assert ok == on_disk and last["ok"] == len(ok) and last["interrupted"] is True, (sorted(on_disk ^ ok), last)


# Loaded by the run's interpreter (sitecustomize on PYTHONPATH): the header check of stop.png sends
# this process GEOMCLI_TEST_STOP, so the signal lands while the headers are checked, before any file starts
_STOP_AT_THE_HEADER_CHECK = """
import os
import signal
from geomcli.engine import plan
_header_as_read = plan.header_as_read
def signalled_at_stop_png(path, *args, **kwargs):
    if os.path.basename(path) == "stop.png":
        os.kill(os.getpid(), getattr(signal, os.environ["GEOMCLI_TEST_STOP"]))
    return _header_as_read(path, *args, **kwargs)
plan.header_as_read = signalled_at_stop_png
"""

_ON_A_CLUSTER = pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs the dask extra")


def _stopped_with_and_without_json(command: list[str], env: dict[str, str], sent: str,
                                   code: int) -> tuple[dict[str, Any], list[str]]:
    """``command`` run twice, stopped by ``sent`` each time (its hook's doing): with --json, its
    one summary record (seconds as 0), and without, its stderr's lines (Ctrl-C's "Interrupted"
    checked and dropped); each ended by the signal's ``code``, with no traceback and no stdout."""
    result = subprocess.run([*command, "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == code and "Traceback" not in result.stderr, result.stderr
    summary = json.loads(result.stdout) | {"seconds": 0}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == code and result.stdout == "", result.stderr
    lines = result.stderr.splitlines()
    if sent == "SIGINT":
        assert lines.pop() == "Interrupted"
    return summary, lines


@pytest.mark.process
@pytest.mark.parametrize(("sent", "code", "where"), [
    ("SIGTERM", 143, ["-j", "1"]), ("SIGTERM", 143, ["-j", "2"]), ("SIGINT", -signal.SIGINT, ["-j", "2"]),
    pytest.param("SIGTERM", 143, ["--scheduler", "local:2"], marks=[pytest.mark.cluster, _ON_A_CLUSTER])])
def test_a_signal_before_any_file_starts_still_gives_the_summary(sent: str, code: int, where: list[str],
                                                                 tmp_path: Path) -> None:
    """A signal while the headers were checked (a folder of thousands of files takes a while) came
    before the run's Outcomes, which gives the interrupted summary: --json's stream ended with no
    record at all, and without --json no count line. Both now come, every input not run, nothing
    written, the signal's exit code as before."""
    inputs, env = _pngs_and_a_hook(tmp_path, ["a.png", "b.png", "stop.png", "z.png"], _STOP_AT_THE_HEADER_CHECK, sent)
    out = tmp_path / "out"
    summary, lines = _stopped_with_and_without_json(
        [*GEOMCLI, "crop-pad", str(inputs), "--out-dir", str(out), "--shape", "8,8", *where], env, sent, code)
    assert summary == {"command": "crop-pad", "status": "summary", "dry_run": False, "ok": 0, "failed": 0,
                       "skipped": 0, "not_run": 4, "total": 4, "seconds": 0, "interrupted": True}
    assert re.fullmatch(r"crop-pad: 0 ok, 0 failed, 0 skipped, 4 not run \(interrupted\) in \d+\.\d s", lines[-1])
    assert not out.exists()


# Loaded by the run's interpreter (sitecustomize on PYTHONPATH): the walk of the input folder, as
# it meets stop.png, sends this process GEOMCLI_TEST_STOP, so the signal lands while the inputs are listed
_STOP_WHILE_LISTING = """
import os
import signal
from geomcli.engine import plan
_readable = plan._readable
def signalled_at_stop_png(name):
    if os.path.basename(name) == "stop.png":
        os.kill(os.getpid(), getattr(signal, os.environ["GEOMCLI_TEST_STOP"]))
    return _readable(name)
plan._readable = signalled_at_stop_png
"""


@pytest.mark.process
@pytest.mark.parametrize(("sent", "code", "where"), [
    ("SIGTERM", 143, ["-j", "1"]), ("SIGTERM", 143, ["-j", "2"]), ("SIGINT", -signal.SIGINT, ["-j", "2"]),
    pytest.param("SIGTERM", 143, ["--scheduler", "local:2"], marks=[pytest.mark.cluster, _ON_A_CLUSTER])])
def test_a_signal_while_the_inputs_are_listed_counts_those_found_and_says_there_are_more(
        sent: str, code: int, where: list[str], tmp_path: Path) -> None:
    """A signal while a big folder was walked gave a summary of "total": 0, as if the run had no
    input. Its summary now counts the inputs found so far, all not run, and says the listing did
    not finish ("listing_finished": false; the line "more not counted"); nothing written."""
    inputs, env = _pngs_and_a_hook(tmp_path, [f"{index:02d}.png" for index in range(20)] + ["stop.png"],
                                   _STOP_WHILE_LISTING, sent)
    found = os.listdir(inputs).index("stop.png")  # the files the walk takes before it (in the folder's order)
    out = tmp_path / "out"
    summary, lines = _stopped_with_and_without_json(
        [*GEOMCLI, "crop-pad", str(inputs), "--out-dir", str(out), "--shape", "8,8", *where], env, sent, code)
    assert summary == {"command": "crop-pad", "status": "summary", "dry_run": False, "ok": 0, "failed": 0,
                       "skipped": 0, "not_run": found, "total": found, "seconds": 0, "interrupted": True,
                       "listing_finished": False}
    assert re.fullmatch(rf"crop-pad: 0 ok, 0 failed, 0 skipped, {found} not run \(interrupted as the inputs were "
                        r"listed; more not counted\) in \d+\.\d s", lines[-1]), lines
    assert not out.exists()


def _forkserver_catching_sigint(pid: int) -> bool:
    """Whether process ``pid``'s forkserver (a child running multiprocessing's) is up to where
    Python catches SIGINT, and not yet where the server ignores it: as it imports its preload."""
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(pid):
                if b"forkserver" in Path(f"/proc/{entry}/cmdline").read_bytes():
                    lines = Path(f"/proc/{entry}/status").read_text().splitlines()
                    status = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
                    return bool(int(status["SigCgt"], 16) & (1 << (signal.SIGINT - 1)))
        except OSError:  # gone meanwhile
            continue
    return False


@pytest.mark.process
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the forkserver in /proc")
def test_ctrl_c_as_the_workers_start_prints_no_traceback(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole process group, the forkserver too, signalled here as it imports its
    preload: it took the signal there (it ignores SIGINT only after) and printed a
    KeyboardInterrupt's traceback beside "Interrupted"."""
    slow_inputs(tmp_path / "in", 8)
    process = subprocess.Popen([*GEOMCLI, "crop-pad", str(tmp_path / "in"), "--out-dir", str(tmp_path / "out"),
                                "--shape", "390,590", "-j", "2"], stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.monotonic() + 30
    while not _forkserver_catching_sigint(process.pid):
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.002)
    os.killpg(process.pid, signal.SIGINT)
    stderr = process.communicate(timeout=20)[1]
    assert process.returncode == -signal.SIGINT and "Traceback" not in stderr, stderr
    assert stderr.endswith("Interrupted\n"), stderr


# --- dry run, JSON ----------------------------------------------------------------------


def test_dry_run_lists_shapes_from_headers_and_writes_nothing(mixed: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("space-to-depth", mixed, "--out-dir", out, "--name", "{stem}.npy", "--blocksize", "2", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{mixed / 'grey16.png'} → {out / 'grey16.npy'}: 6×6×4 uint16",
        f"{mixed / 'rgb.png'} → {out / 'rgb.npy'}: 8×10×12 uint8",
        f"{mixed / 'rgba.png'} → {out / 'rgba.npy'}: 4×4×16 uint8",
        f"{mixed / 's.tiff'} → {out / 's.npy'}: 3×6×12 uint16",
        f"{mixed / 't.npy'} → {out / 't.npy'}: 2×12×2×3 float32",
    ]
    assert result.stderr == "space-to-depth: dry run, 5 to write, 0 failed, 0 skipped\n"
    assert not out.exists()


def test_a_dry_run_warns_of_the_options_a_file_would_not_use_as_the_run_does(mixed: Path, tmp_path: Path) -> None:
    """'--quality 50' to PNG outputs: the run warned it was ignored, the dry run's records had no
    warning and its lines said nothing."""
    args = ("crop-pad", mixed / "rgb.png", mixed / "rgba.png", mixed / "s.tiff", "--out-dir", tmp_path / "out",
            "--shape", "2,2", "--quality", "50", "--page", "0")
    dry, real = run(*args, "--dry-run", "--json"), run(*args, "--json")
    assert dry.exit_code == real.exit_code == 0, (dry.stderr, real.stderr)
    dry_records, records = ([json.loads(line) for line in result.stdout.splitlines()[:-1]] for result in (dry, real))
    assert [record["warnings"] for record in dry_records] == [record["warnings"] for record in records]
    assert dry_records[0]["warnings"] == ["--quality is for JPEG and WebP output, not PNG; ignored",
                                          "--page is for TIFF input, not PNG; ignored"]
    shutil.rmtree(tmp_path / "out")
    dry, real = run(*args, "--dry-run"), run(*args)
    warnings = [line for line in real.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 3 and [line for line in dry.stderr.splitlines() if line.startswith("Warning:")] == warnings


def test_dry_run_predicts_failures_and_skips(mixed: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "t.npy").write_bytes(b"x")
    result = run("space-to-depth", mixed, "--out-dir", out, "--name", "{stem}.npy", "--blocksize", "3",
                 "--dry-run", "-n", "--json")
    assert result.exit_code == 2  # blocksize 3 does not divide two of them: a usage fault, found from headers
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [record["status"] for record in records[:-1]] == ["ok", "error", "error", "ok", "skipped"]
    assert "not divisible by blocksize 3" in records[1]["error"]
    assert records[-1]["dry_run"] is True and records[-1]["failed"] == 2
    assert files(out) == ["t.npy"]


def test_the_summary_record_has_the_same_keys_run_dry_run_or_refused(mixed: Path, tmp_path: Path) -> None:
    """A dry run's summary had dry_run and no seconds, a run's seconds and no dry_run: a script reading
    summary["seconds"] (or ["dry_run"]) failed on the other."""
    def last(*more: object, code: int) -> dict[str, Any]:
        result = run("space-to-depth", mixed, "--out-dir", tmp_path / "out", "--name", "{stem}.npy", *more, "--json")
        assert result.exit_code == code, result.stderr
        return dict(json.loads(result.stdout.splitlines()[-1]))

    dry, done, refused = (last("--blocksize", "2", "--dry-run", code=0), last("--blocksize", "2", code=0),
                          last("--blocksize", "3", code=2))
    assert list(dry) == list(done) == list(refused)
    assert (dry["dry_run"], done["dry_run"], refused["dry_run"]) == (True, False, False)
    assert (dry["ok"], done["ok"], refused["ok"], refused["failed"]) == (5, 5, 0, 3)
    assert all(isinstance(record["seconds"], float) and record["seconds"] >= 0 for record in (dry, done, refused))


def test_a_dry_run_reads_each_header_once(mixed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The options' check and the listing share one read: two were 35% of a dry run of 20,000 PNGs."""
    import geomcli.io

    read: list[str] = []
    read_header = geomcli.io.read_header
    monkeypatch.setattr(geomcli.io, "read_header",
                        lambda path, **kwargs: (read.append(path), read_header(path, **kwargs))[1])
    result = run("space-to-depth", mixed, "--out-dir", tmp_path / "out", "--name", "{stem}.npy", "--blocksize", "2",
                 "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert sorted(read) == sorted(str(path) for path in mixed.iterdir())


def test_the_plan_follows_each_folders_links_once(tmp_path: Path, rng: np.random.Generator,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Not once a file: 40,000 looks were a fifth of a --skip-existing re-run of 20,000 files."""
    looked: list[str] = []
    realpath = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda path, **kwargs: (looked.append(path), realpath(path, **kwargs))[1])

    def looks_at_the_folders(files: int) -> list[int]:
        folder = tmp_path / f"in{files}"
        for index in range(files):
            png(folder / f"{index}.png", rng, (4, 4, 3))
        looked.clear()
        result = run("crop-pad", folder, "--out-dir", tmp_path / f"out{files}", "--shape", "2,2", "--dry-run")
        assert result.exit_code == 0, result.stderr
        return [looked.count(str(folder)), looked.count(str(tmp_path / f"out{files}"))]

    assert looks_at_the_folders(3) == looks_at_the_folders(6)


def test_json_streams_one_object_per_file_and_a_summary(shots: Path, tmp_path: Path) -> None:
    result = run("crop-pad", f"{shots}/**/*.png", "--out-dir", tmp_path / "out", "--shape", "4,4", "--json")
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.stderr == ""
    assert [Path(record["input"]).name for record in records[:-1]] == ["a.png", "b.png", "d.png", "e.png"]
    assert all(record["status"] == "ok" and record["error"] is None for record in records[:-1])
    assert records[0]["output_shape"] == [4, 4, 3] and records[0]["command"] == "crop-pad"
    assert records[-1] | {"seconds": 0} == {"command": "crop-pad", "status": "summary", "dry_run": False, "ok": 4,
                                           "failed": 0, "skipped": 0, "not_run": 0, "total": 4, "seconds": 0}


def test_quiet_batch_says_nothing_unless_a_file_fails(shots: Path, tmp_path: Path) -> None:
    result = run("crop-pad", f"{shots}/*.png", "--out-dir", tmp_path / "out", "--shape", "4,4", "-q")
    assert result.exit_code == 0 and result.stdout == "" and result.stderr == ""


# --- samples/Makefile ------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_samples_makefile_rebuilds_only_what_changed(tmp_path: Path) -> None:
    samples = tmp_path / "samples"
    shutil.copytree(ROOT / "samples", samples, ignore=shutil.ignore_patterns("build"))
    earlier = time.time() - 100  # so that "now" is later than every input
    for path in samples.iterdir():
        os.utime(path, (earlier, earlier))
    make = ["make", "-C", str(samples), f"GEOMCLI={sys.executable} -m geomcli"]
    env = {**os.environ, "NO_COLOR": "1"}

    first = subprocess.run([*make, "-j2"], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    build = samples / "build"
    products = [name for name in files(build) if not name.endswith(".stamp")]
    assert products == ["blocks/gray16.npy", "blocks/photo.npy", "blocks/rgba.npy", "cropped/gray16.png",
                        "cropped/photo.png", "cropped/rgba.png", "grid.npy"]
    assert np.load(build / "blocks" / "photo.npy").shape == (24, 24, 12)

    assert subprocess.run([*make, "-q"], env=env).returncode == 0  # nothing to rebuild
    again = subprocess.run([*make, "-j2"], capture_output=True, text=True, env=env)
    assert "Nothing to be done" in again.stdout and "geomcli" not in again.stdout

    before = {name: (build / name).stat().st_mtime_ns for name in products}
    os.utime(samples / "photo.png")
    third = subprocess.run([*make, "-j2"], capture_output=True, text=True, env=env)
    assert third.returncode == 0, third.stderr
    changed = sorted(name for name in products if (build / name).stat().st_mtime_ns != before[name])
    assert changed == ["blocks/photo.npy", "cropped/photo.png"]
    assert "crop-pad: 1 ok, 0 failed, 2 skipped" in third.stderr
    assert subprocess.run([*make, "-q"], env=env).returncode == 0


def test_workers_get_one_kernel_thread_each_unless_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-j N workers share the cores: N processes of all-core kernels would oversubscribe them."""
    seen: list[int | None] = []
    monkeypatch.setattr(workers, "_in_workers", lambda task, *rest: seen.append(task.common.threads))
    for index in range(3):
        np.save(tmp_path / f"in{index}.npy", np.zeros((1, 1, 2, 2), np.uint8))
    inputs = [str(tmp_path / f"in{index}.npy") for index in range(3)]
    for extra, expected in (([], 1), (["--threads", "2"], 2)):
        CliRunner().invoke(cli, ["space-to-depth", *inputs, "--out-dir", str(tmp_path / "out"), "--blocksize", "2",
                                 "-j", "2", *extra], catch_exceptions=False)
        assert seen.pop() == expected


def test_a_dry_run_layout_error_names_the_file_once(tmp_path: Path) -> None:
    np.save(tmp_path / "r3.npy", np.zeros((3, 4, 4), np.uint8))
    result = run("space-to-depth", tmp_path / "r3.npy", "--out-dir", tmp_path / "out", "--blocksize", "2", "--dry-run")
    assert result.exit_code == 2 and result.stdout == ""  # --layout is missing: the options' fault
    assert result.stderr.startswith(f"Error: {tmp_path / 'r3.npy'}: a rank-3 tensor (3, 4, 4) has no default "
                                    "layout; give --layout (CHW, HWC, NHW)\nspace-to-depth: dry run, 0 to write, 1 "
                                    "failed, 0 skipped\n")
    assert result.stderr.count(str(tmp_path / "r3.npy")) == 1


@pytest.mark.parametrize("args, limit, message, code", [
    # an output over the limit is the options' fault (exit 2); an input over it, the file's (exit 1)
    (["crop-pad", "--shape", "20,20"], "1000", "the output (20, 20, 3): 1200 elements exceed the limit of 1000", 2),
    (["crop-pad", "--shape", "2,2"], "300", "360 elements exceed the limit of 300", 1),
    (["space-to-depth", "--blocksize", "2"], "300", "360 elements exceed the limit of 300", 1),
])
def test_a_dry_run_refuses_what_the_run_refuses(shots: Path, tmp_path: Path, args: list[str], limit: str,
                                               message: str, code: int) -> None:
    command, *rest = args
    common = [shots / "a.png", "--out-dir", tmp_path / "out", *rest, "--max-pixels", limit]
    dry = run(command, *common, "--dry-run")
    real = run(command, *common)
    assert dry.exit_code == real.exit_code == code and dry.stdout == real.stdout == ""
    expected = f"Error: {shots / 'a.png'}: {message}; raise it with --max-pixels or GEOMCLI_MAX_PIXELS"
    assert dry.stderr.splitlines()[0] == real.stderr.splitlines()[0] == expected


@pytest.mark.parametrize("frames", [[], ["--frames", "first"], ["--frames", "all"]])
def test_a_dry_run_reads_an_animation_as_the_run_does(tmp_path: Path, frames: list[str]) -> None:
    from PIL import Image

    pictures = [Image.new("RGB", (8, 6), (60 * i, 0, 0)) for i in range(3)]
    pictures[0].save(tmp_path / "anim.gif", save_all=True, append_images=pictures[1:], duration=40)
    common = [tmp_path / "anim.gif", "--out-dir", tmp_path / "out", "--name", "{stem}.npy", "--shape", "4,4",
              *frames, "--json"]
    dry, real = run("crop-pad", *common, "--dry-run"), run("crop-pad", *common)
    assert dry.exit_code == real.exit_code == (1 if not frames else 0)
    first_dry, first_real = json.loads(dry.stdout.splitlines()[0]), json.loads(real.stdout.splitlines()[0])
    for key in ("status", "error", "input_shape", "output_shape"):
        assert first_dry[key] == first_real[key], key
    if not frames:
        assert "has 3 frames" in first_dry["error"]


def test_a_batch_crops_grey_frames_frame_by_frame_as_one_file_does(tmp_path: Path) -> None:
    # grey frames are TYX, read or from the header: --shape H,W is each frame's
    from PIL import Image

    pictures = [Image.new("L", (8, 6), 60 * i) for i in range(3)]
    pictures[0].save(tmp_path / "grey.png", save_all=True, append_images=pictures[1:])
    one = run("crop-pad", tmp_path / "grey.png", "-o", tmp_path / "one.npy", "--shape", "4,4", "--frames", "all", "-q")
    batch = run("crop-pad", tmp_path / "grey.png", "--out-dir", tmp_path / "out", "--name", "{stem}.npy", "--shape",
                "4,4", "--frames", "all", "-q")
    assert one.exit_code == batch.exit_code == 0, batch.stderr
    assert np.load(tmp_path / "out" / "grey.npy").shape == np.load(tmp_path / "one.npy").shape == (3, 4, 4)


class _Context:
    """The workers' context, with each worker ending at once (``exit_code``) or unable to start (``error``)."""

    def __init__(self, real: Any, *, exit_code: int | None = None, error: Exception | None = None) -> None:
        self.real, self.exit_code, self.error = real, exit_code, error

    def Pipe(self, duplex: bool = True) -> Any:  # noqa: N802 (multiprocessing's names)
        return self.real.Pipe(duplex)

    def Value(self, *args: Any, **options: Any) -> Any:  # noqa: N802
        return self.real.Value(*args, **options)

    def Process(self, *, target: Any, args: tuple[Any, ...], **options: Any) -> Any:  # noqa: N802
        if self.exit_code is not None:
            target, args = os._exit, (self.exit_code,)
        process = self.real.Process(target=target, args=args, **options)
        if self.error is not None:
            error = self.error

            def start() -> None:
                raise error

            process.start = start
        return process


def test_workers_fork_from_a_forkserver_that_froze_its_imports() -> None:
    """geomcli.engine.preloaded: the collector never walks what the forkserver imported, in its
    workers nor as it ends (in a fresh process: a forkserver started before keeps its preload)."""
    script = ("import gc\nfrom geomcli.engine import workers\n"
              "with workers._forkserver(arrays=False).Pool(1) as pool: print(pool.apply(gc.get_freeze_count))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(done.stdout) > 1000


def test_jobs_of_workers_that_end_before_starting_them_are_done_here(
        mixed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that ends before its "ready" never began its jobs: this process does them."""
    args = ("space-to-depth", mixed, "--name", "{stem}.npy", "--blocksize", "2")
    expected = run(*args, "--out-dir", tmp_path / "one", "-j", "1")
    real = workers._forkserver()
    monkeypatch.setattr(workers, "_forkserver", lambda arrays=True: _Context(real, exit_code=3))
    result = run(*args, "--out-dir", tmp_path / "two", "-j", "2")
    assert result.exit_code == expected.exit_code == 0, result.stderr
    assert result.stderr.startswith("space-to-depth: 5 ok, 0 failed, 0 skipped in ")
    assert contents(tmp_path / "two") == contents(tmp_path / "one")


def test_workers_that_cannot_start_leave_their_files_to_this_process(
        mixed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of processes (EAGAIN from fork): every file is still done, and one warning says why."""
    args = ("space-to-depth", mixed, "--name", "{stem}.npy", "--blocksize", "2")
    expected = run(*args, "--out-dir", tmp_path / "one", "-j", "1")
    real = workers._forkserver()
    monkeypatch.setattr(workers, "_forkserver",
                        lambda arrays=True: _Context(real, error=BlockingIOError(11, "no fork")))
    result = run(*args, "--out-dir", tmp_path / "two", "-j", "2")
    assert result.exit_code == expected.exit_code == 0, result.stderr
    assert "Warning: no worker process could start (no fork); this process did every file" in result.stderr
    assert contents(tmp_path / "two") == contents(tmp_path / "one")
    assert not any(name.startswith(".") for name in files(tmp_path / "two"))


class _NoStarterThread(threading.Thread):
    """A thread, but none is to be had for the workers' starter (as under ulimit -u)."""

    def start(self) -> None:
        if self.name == "geomcli-starter":
            raise RuntimeError("can't start new thread")
        super().start()


def _no_forkserver() -> None:
    raise BlockingIOError(11, "Resource temporarily unavailable")


@pytest.mark.parametrize("short", ["forkserver", "forkserver-ended", "thread"])
def test_a_process_limit_leaves_every_file_to_this_process_with_one_warning(
        short: str, mixed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of processes or threads (ulimit -u) as workers start: every file is still done here.
    It was `Error: <stdout>: cannot write (Resource temporarily unavailable)` and nothing done
    (the forkserver's start), `Aborted!` and half the files (the forkserver ended, unable to
    fork), or a traceback (the starter thread)."""
    args = ("space-to-depth", mixed, "--name", "{stem}.npy", "--blocksize", "2")
    expected = run(*args, "--out-dir", tmp_path / "one", "-j", "1")
    warning = {"forkserver": "Warning: no worker process could start (Resource temporarily unavailable); "
                             "this process does every file",
               "forkserver-ended": "Warning: no worker process could start (the forkserver ended); "
                                   "this process did every file",
               "thread": "Warning: no worker process could start (can't start new thread); "
                         "this process did every file"}[short]
    if short == "forkserver":
        monkeypatch.setattr(workers.forkserver, "start", _no_forkserver)
    elif short == "forkserver-ended":
        real = workers._forkserver()
        monkeypatch.setattr(workers, "_forkserver",
                            lambda arrays=True: _Context(real, error=EOFError("unexpected EOF")))
    else:
        monkeypatch.setattr(threading, "Thread", _NoStarterThread)
    result = run(*args, "--out-dir", tmp_path / "two", "-j", "2")
    assert result.exit_code == expected.exit_code == 0, result.stderr
    assert warning in result.stderr.splitlines()
    assert contents(tmp_path / "two") == contents(tmp_path / "one")


def test_a_worker_with_no_thread_for_its_committer_ends_before_its_ready(monkeypatch: pytest.MonkeyPatch,
                                                                       capfd: pytest.CaptureFixture[str]) -> None:
    """Its jobs then go to the others, as a worker's that ends before "ready" (it printed a traceback)."""
    import multiprocessing

    from geomcli.engine.options import Common

    def no_thread(*args: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(workers.signal, "signal", lambda number, handler: None)  # not this process's handlers
    monkeypatch.setattr(workers, "_Committer", no_thread)
    parent, child = multiprocessing.Pipe()
    workers._serve(child, plan.Task(operations.CropPad((4, 4)), Common(quiet=True)),
                   multiprocessing.Value("q", -1, lock=False))
    assert not parent.poll(0) and capfd.readouterr().err == ""


def test_numpy_is_preloaded_for_the_workers_only_when_a_job_needs_arrays(tmp_path: Path) -> None:
    from geomcli.engine.options import Common

    common = Common(quiet=True)
    crop = plan.Task(operations.CropPad((4, 4)), common)
    blocks = plan.Task(operations.SpaceToDepth(2), common)
    images = [plan.Job(0, "a.png", "o/a.png", "png"), plan.Job(1, "b.jpg", "o/b.webp", "webp")]
    assert not workers._needs_arrays(crop, images)
    assert workers._needs_arrays(crop, [*images, plan.Job(2, "c.npy", "o/c.npy", "npy")])
    assert workers._needs_arrays(crop, [plan.Job(0, "a.png", "o/a.tiff", "tiff")])
    assert workers._needs_arrays(blocks, images)


def test_a_small_batch_is_done_here_judged_by_its_bytes_local_or_listed(tmp_path: Path) -> None:
    """Without -j, inputs of less than SMALL_BATCH in all are done in this process. A URL's size
    comes from its listing: stat found none, and 100 objects of 100 MB counted as nothing."""
    (tmp_path / "a.npy").write_bytes(b"x" * 1000)
    local = [plan.Job(0, str(tmp_path / "a.npy"), "o.npy", "npy")]
    listed = [plan.Job(index, f"s3://bucket/{index}.npy", f"o{index}.npy", "npy", size=100 * 2**20)
              for index in range(100)]
    assert workers._smaller_than(local, workers.SMALL_BATCH)
    assert not workers._smaller_than(listed, workers.SMALL_BATCH)
    assert not workers._smaller_than(local, 1000)


def test_a_worker_holds_a_second_job_only_while_every_worker_can_have_one() -> None:
    assert [workers._takes_another(held, 4, 2, False) for held in (0, 1, 2)] == [True, True, False]
    assert [workers._takes_another(1, pending, 2, False) for pending in (0, 1, 2)] == [False, False, True]
    assert [workers._takes_another(held, 4, 2, True) for held in (0, 1)] == [True, False]  # --fail-fast


def test_a_worker_sends_each_report_once_its_output_is_in_place_in_job_order() -> None:
    """The committer thread runs each job's sync-and-rename, then sends its report: in order,
    never before the output is placed, a failed commit turning the report into an error."""
    from geomcli.engine.summary import Report
    from geomcli.errors import GeomError

    sent: list[Report] = []
    placed: list[str] = []

    class Connection:
        def send(self, report: Report) -> None:
            assert report.output in placed or report.status == "error" or report.output == "d"
            sent.append(report)

    def commit(name: str) -> Callable[[], None]:
        def run() -> None:
            time.sleep(0.01)
            if name == "bad":
                raise GeomError(f"{name}: cannot write (No space left on device)")
            placed.append(name)
        return run

    committer = workers._Committer(Connection(), None)  # type: ignore[arg-type]
    jobs = [plan.Job(i, f"in{i}.png", name, "png") for i, name in enumerate(["a", "bad", "c", "d"])]
    try:
        for job in jobs:
            workers._jobs_under_way.append(job)
            committer.put(job, Report("crop-pad", job.input, job.output),
                          [commit(job.output)] if job.output != "d" else [])
        committer.close()
    finally:
        workers._jobs_under_way.clear()
    assert [r.output for r in sent] == ["a", "bad", "c", "d"] and placed == ["a", "c"]
    assert [r.status for r in sent] == ["ok", "error", "ok", "ok"]
    assert sent[1].error == "bad: cannot write (No space left on device)"


# Loaded by the workers' interpreters only (a subprocess run with it on PYTHONPATH): a worker that
# opens a file named crash*.png is killed, as a codec's segfault or the OOM killer would kill it.
_CRASHING_WORKERS = """
import multiprocessing, os, signal
import PIL.Image
_open = PIL.Image.open
def open_or_die(fp, *args, **kwargs):
    if multiprocessing.current_process().name != "MainProcess" and b"crash" in getattr(fp, "getvalue", bytes)():
        os.kill(os.getpid(), signal.SIGKILL)
    return _open(fp, *args, **kwargs)
PIL.Image.open = open_or_die
"""


# Loaded by the run's interpreters: a worker placing stop.png sends SIGTERM to the whole process
# group (the forkserver too, as `timeout` or a job scheduler sends it), then takes a second to place it
_GROUP_SIGTERM_AS_STOP_PNG_IS_PLACED = """
import multiprocessing, os, signal, time
_replace = os.replace
def replace_after_a_group_sigterm(source, destination, *args, **kwargs):
    if multiprocessing.current_process().name != "MainProcess" and os.path.basename(str(destination)) == "stop.png":
        os.killpg(0, signal.SIGTERM)
        time.sleep(1)
    return _replace(source, destination, *args, **kwargs)
os.replace = replace_after_a_group_sigterm
"""


@pytest.mark.process
@pytest.mark.parametrize("where", [["-j", "2"], pytest.param(["--scheduler", "local:2"],
                                                              marks=[pytest.mark.cluster, _ON_A_CLUSTER])])
def test_a_sigterm_to_the_process_group_waits_for_the_output_a_worker_is_placing(where: list[str],
                                                                                 tmp_path: Path) -> None:
    """The forkserver dies of a SIGTERM sent to the process group, and a worker's join then
    returned at once, the worker still placing: the parent swept that output's temp file from
    under it, and its record was lost ('-j 2 --json' signalled so: 1 run in 16 ended with a file
    "failed: cannot write (No such file or directory)", the others with the output neither placed
    nor recorded). The parent now reads each worker's pipe to its end (10 s at most) before it
    sweeps: the output is placed and recorded. On a LocalCluster, the server's end made Dask close
    every worker (multiprocessing took them for dead), stop.png and the reports of the outputs
    their tasks had placed with them; its forkserver now holds SIGTERM."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name in [f"{index:03d}.png" for index in range(300)] + ["stop.png"]:  # (a worker's, not this process's)
        Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(inputs / name)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_GROUP_SIGTERM_AS_STOP_PNG_IS_PLACED)
    out = tmp_path / "out"
    result = subprocess.run([*GEOMCLI, "crop-pad", str(inputs), "--out-dir", str(out), "--shape", "8,8", *where,
                             "--json"], capture_output=True, text=True, timeout=120, env=hooked(hooks),
                            start_new_session=True)
    assert result.returncode == 143 and "Error" not in result.stderr, result.stderr
    *lines, last = [json.loads(line) for line in result.stdout.splitlines()]
    assert last["interrupted"] is True and last["failed"] == 0, last
    placed = sorted(Path(record["output"]).name for record in lines if record["status"] == "ok")
    assert "stop.png" in placed and placed == sorted(os.listdir(out))


def forty_with_a_crash_at_30(folder: Path) -> Path:
    """40 PNGs, n30.png's text saying "crash" (_CRASHING_WORKERS): late in the run, a worker's
    file, not this process's while the workers start."""
    from PIL import PngImagePlugin

    folder.mkdir()
    rng = np.random.default_rng(5)
    for index in range(40):
        info = PngImagePlugin.PngInfo()
        info.add_text("Comment", "crash" if index == 30 else "fine")
        Image.fromarray(rng.integers(0, 256, (300, 400, 3), np.uint8)).save(folder / f"n{index:02d}.png",
                                                                           pnginfo=info)
    return folder


def test_a_worker_killed_on_a_file_fails_that_file_only(tmp_path: Path) -> None:
    """The parent blames the job the worker was on, not the one it was syncing, and never tries a
    crashing file again; every other file is written, no temp file is left."""
    folder = forty_with_a_crash_at_30(tmp_path / "in")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_CRASHING_WORKERS)
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "geomcli", "crop-pad", str(folder), "--out-dir", str(out),
                             "--shape", "200,200", "-j", "2"], capture_output=True, text=True, timeout=120,
                            env=hooked(hooks))
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    assert errors[0].endswith("n30.png: the worker process ended (killed by SIGKILL, as the kernel's out-of-memory "
                              "killer does)"), errors
    assert sorted(os.listdir(out)) == [f"n{index:02d}.png" for index in range(40) if index != 30]


# With _CRASHING_WORKERS: this process sends itself SIGTERM as it reads the end of the worker the
# crash killed, the signal landing while that read's EOFError (or ConnectionResetError) is raised
_SIGNALLED_AS_A_WORKER_ENDS = """
import multiprocessing.connection
_recv = multiprocessing.connection.Connection.recv
def recv_or_signal(self):
    try:
        return _recv(self)
    except (EOFError, ConnectionResetError):  # (either, as the kill comes)
        if multiprocessing.current_process().name == "MainProcess" and not getattr(recv_or_signal, "sent", False):
            recv_or_signal.sent = True
            os.kill(os.getpid(), signal.SIGTERM)
        raise
multiprocessing.connection.Connection.recv = recv_or_signal
"""


def test_a_signal_as_a_worker_s_end_is_read_stops_the_run(tmp_path: Path) -> None:
    """A SIGTERM that came as the parent read a dead worker's end was noted by the block that
    holds a report's count and record together (b7ee9f4), then lost with the EOFError its read
    raised: the run went on to its last file and exited 1, as if never signalled. It now stops
    as any SIGTERM does: exit 143, the interrupted summary, a record for each output in place."""
    folder = forty_with_a_crash_at_30(tmp_path / "in")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_CRASHING_WORKERS + _SIGNALLED_AS_A_WORKER_ENDS)
    out = tmp_path / "out"
    result = subprocess.run([*GEOMCLI, "crop-pad", str(folder), "--out-dir", str(out), "--shape", "200,200",
                             "-j", "2", "--json"], capture_output=True, text=True, timeout=120, env=hooked(hooks))
    assert result.returncode == 143, result.stderr
    *lines, last = [json.loads(line) for line in result.stdout.splitlines()]
    assert last["interrupted"] is True and last["not_run"] > 0, last
    placed = sorted(Path(record["output"]).name for record in lines if record["status"] == "ok")
    assert placed == sorted(os.listdir(out)) and "n30.png" not in placed


def test_a_worker_whose_parent_has_gone_places_no_more_outputs_and_leaves_no_temp(tmp_path: Path) -> None:
    from geomcli.engine.summary import Report
    from geomcli.io import _atomic

    class Gone:
        def send(self, report: Report) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    committer = workers._Committer(Gone(), None)  # type: ignore[arg-type]
    try:
        for index in range(3):
            job = plan.Job(index, f"in{index}.png", str(tmp_path / f"out{index}.png"), "png")
            workers._jobs_under_way.append(job)
            with _atomic.deferred_commits() as commits:
                with _atomic.atomic_file(job.output) as f:
                    f.write(b"data")
            committer.put(job, Report("crop-pad", job.input, job.output), commits)
        committer.close()
    finally:
        workers._jobs_under_way.clear()
    assert os.listdir(tmp_path) == ["out0.png"]  # placed before its report found the parent gone


def test_a_dry_run_refuses_an_output_its_format_cannot_hold(tmp_path: Path) -> None:
    from PIL import Image

    Image.new("LA", (30, 20), (9, 200)).save(tmp_path / "still.png")  # grey and alpha: a GIF cannot hold it
    Image.new("RGB", (30, 20), (9, 9, 9)).save(tmp_path / "fine.png")
    common = [tmp_path / "still.png", tmp_path / "fine.png", "--out-dir", tmp_path / "out", "--name", "{stem}.gif",
              "--shape", "16,16"]
    dry, real = run("crop-pad", *common, "--dry-run"), run("crop-pad", *common)
    assert dry.exit_code == real.exit_code == 2 and not (tmp_path / "out").exists()
    errors = [[line for line in result.stderr.splitlines() if line.startswith("Error:")] for result in (dry, real)]
    assert errors[0] == errors[1] and len(errors[0]) == 2 and "GIF holds 1, 3 or 4 channels, not 2" in errors[0][0]
    assert "1 to write, 1 failed" in dry.stderr


def test_a_batch_refused_when_planned_gives_its_json_records(tmp_path: Path) -> None:
    """--json gets a record for each file the options do not fit and the summary (the others not
    run), as one -o file gets its record; it got nothing (found by a try-out)."""
    from PIL import Image

    Image.new("RGB", (30, 20), (9, 9, 9)).save(tmp_path / "a.png")
    Image.new("RGB", (28, 28), (9, 9, 9)).save(tmp_path / "b.png")
    result = run("space-to-depth", tmp_path / "a.png", tmp_path / "b.png", "--out-dir", tmp_path / "out",
                 "--name", "{stem}.npy", "--blocksize", "7", "--json")
    assert result.exit_code == 2 and not (tmp_path / "out").exists()
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(record["input"], record["status"]) for record in records[:-1]] == [(str(tmp_path / "a.png"), "error")]
    assert "height 20 is not divisible by blocksize 7" in records[0]["error"]
    # what the header told, as --dry-run's record has it (it was null beside an error naming it)
    assert (records[0]["input_shape"], records[0]["input_dtype"], records[0]["seconds"]) == ([20, 30, 3], "uint8", None)
    assert {key: records[-1][key] for key in ("status", "ok", "failed", "not_run", "total")} == {
        "status": "summary", "ok": 0, "failed": 1, "not_run": 1, "total": 2}


def test_a_refused_batch_gives_the_records_of_inputs_that_failed_on_their_own(tmp_path: Path) -> None:
    """A zero-byte PNG and a broken link beside a file the options do not fit: the refusal gave
    their inputs no record and counted them not run, where --dry-run lists their failures. Each
    is now an error record (and an Error: line), as --dry-run has it; only the good file is not run."""
    from PIL import Image

    shots = tmp_path / "shots"
    shots.mkdir()
    Image.new("RGB", (40, 30), (9, 9, 9)).save(shots / "a.png")
    Image.new("RGB", (41, 30), (9, 9, 9)).save(shots / "odd.png")
    (shots / "zero.png").write_bytes(b"")
    (shots / "gone.png").symlink_to("nowhere.png")
    common = [shots, "--out-dir", tmp_path / "out", "--name", "{stem}.npy", "--blocksize", "2", "--json"]
    refused, dry = run("space-to-depth", *common), run("space-to-depth", *common, "--dry-run")
    assert refused.exit_code == dry.exit_code == 2 and not (tmp_path / "out").exists()
    records = [json.loads(line) for line in refused.stdout.splitlines()]
    dry_records = {record["input"]: record for record in map(json.loads, dry.stdout.splitlines()) if "input" in record}
    failed = {record["input"]: record for record in records[:-1]}
    assert sorted(failed) == [str(shots / name) for name in ("gone.png", "odd.png", "zero.png")]
    for name in ("gone.png", "zero.png"):
        record = failed[str(shots / name)]
        assert (record["status"], record["output"]) == ("error", str(tmp_path / "out" / name.replace(".png", ".npy")))
        assert record["error"] == dry_records[str(shots / name)]["error"]
        assert f"Error: {record['error']}\n" in refused.stderr
    assert "empty file" in failed[str(shots / "zero.png")]["error"]
    assert {key: records[-1][key] for key in ("status", "ok", "failed", "not_run", "total")} == {
        "status": "summary", "ok": 0, "failed": 3, "not_run": 1, "total": 4}


def test_an_out_dir_that_cannot_be_made_gives_every_input_its_json_record(shots: Path, tmp_path: Path) -> None:
    """--out-dir under a regular file (or a read-only folder) gave --json nothing, exit 1: each
    input now has its error record, naming its planned output, then the summary."""
    (tmp_path / "somefile.txt").write_text("a file")
    out = tmp_path / "somefile.txt" / "sub"
    result = run("crop-pad", f"{shots}/*.png", "--out-dir", out, "--shape", "4,4", "--json")
    line = f"{out}: cannot make the folder (Not a directory)"
    assert result.exit_code == 1 and result.stderr == f"Error: {line}\n"
    records = [json.loads(record) for record in result.stdout.splitlines()]
    assert [(record["input"], record["output"], record["status"], record["error"]) for record in records[:-1]] == [
        (str(shots / name), str(out / name), "error", line) for name in ("a.png", "b.png")]
    assert {key: records[-1][key] for key in ("status", "ok", "failed", "total")} == {
        "status": "summary", "ok": 0, "failed": 2, "total": 2}


def test_a_dry_run_refuses_a_fill_the_dtype_cannot_hold(tmp_path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (30, 20), (9, 9, 9)).save(tmp_path / "a.png")
    np.save(tmp_path / "b.npy", np.zeros((30, 20), np.float32))  # 300 fits float32
    common = [tmp_path / "a.png", tmp_path / "b.npy", "--out-dir", tmp_path / "out", "--shape", "16,16",
              "--name", "{stem}.npy", "--fill", "300"]
    dry, real = run("crop-pad", *common, "--dry-run"), run("crop-pad", *common)
    assert dry.exit_code == real.exit_code == 2 and not (tmp_path / "out").exists()
    errors = [[line for line in result.stderr.splitlines() if line.startswith("Error:")] for result in (dry, real)]
    assert errors[0] == errors[1] and len(errors[0]) == 2 and "fill value 300 does not fit dtype uint8" in errors[0][0]
    assert errors[0][1] == "Error: 1 of 2 inputs cannot take these options (each named above); nothing was written"
    assert "1 to write, 1 failed" in dry.stderr


def test_links_to_one_file_are_each_an_input(tmp_path: Path, rng: np.random.Generator) -> None:
    real = png(tmp_path / "in" / "c.png", rng)
    for name in ("a.png", "b.png"):
        (tmp_path / "in" / name).symlink_to(real.name)
    result = run("crop-pad", tmp_path / "in", "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 0, result.stderr
    assert files(tmp_path / "out") == ["a.png", "b.png", "c.png"]


def test_a_glob_ending_in_a_slash_names_folders_so_no_input(shots: Path, tmp_path: Path) -> None:
    result = run("crop-pad", f"{shots}/*/", "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 2 and "has no file geomcli reads" in result.stderr


def test_a_missing_input_without_an_extension_is_its_own_failure(tmp_path: Path) -> None:
    """Not a usage error about --name (found by a try-out: 'no file extension'); another input
    given beside it is still done."""
    from PIL import Image

    Image.new("RGB", (4, 4)).save(tmp_path / "there.png")
    result = run("crop-pad", tmp_path / "missing", tmp_path / "there.png", "--out-dir", tmp_path / "out",
                 "--shape", "2,2")
    assert result.exit_code == 1 and f"Error: {tmp_path / 'missing'}: no such file" in result.stderr, result.stderr
    assert (tmp_path / "out" / "there.png").exists()


def test_a_missing_folder_named_with_a_slash_is_its_own_failure(tmp_path: Path) -> None:
    """'crop-pad there.png gone/ --out-dir out' was a usage error about --name ('{stem}{suffix}'
    gives an empty name for gone/), exit 2, and there.png was not written either."""
    from PIL import Image

    Image.new("RGB", (4, 4)).save(tmp_path / "there.png")
    result = run("crop-pad", tmp_path / "there.png", f"{tmp_path / 'gone'}/", "--out-dir", tmp_path / "out",
                 "--shape", "2,2")
    assert result.exit_code == 1, result.stderr
    assert result.stderr.splitlines()[0] == f"Error: {tmp_path / 'gone'}/: no such file"
    assert files(tmp_path / "out") == ["there.png"]


def test_a_file_named_with_a_slash_in_a_batch_fails_for_its_real_reason(tmp_path: Path) -> None:
    """'crop-pad a.png/ b.png --out-dir o' said 'a.png/: no such file' where a.png is there, and
    '-o' of the same name the real reason: a file is no folder. The batch says it as a read does."""
    from PIL import Image

    for name in ("a.png", "b.png"):
        Image.new("RGB", (4, 4)).save(tmp_path / name)
    single = run("crop-pad", f"{tmp_path / 'a.png'}/", "-o", tmp_path / "x.png", "--shape", "2,2")
    result = run("crop-pad", f"{tmp_path / 'a.png'}/", tmp_path / "b.png", "--out-dir", tmp_path / "out",
                 "--shape", "2,2")
    assert single.exit_code == result.exit_code == 1, result.stderr
    line = f"Error: {tmp_path / 'a.png'}/: not a directory (a parent in the path is a file)"
    assert single.stderr.splitlines()[0] == result.stderr.splitlines()[0] == line
    assert files(tmp_path / "out") == ["b.png"]
    dry = run("crop-pad", f"{tmp_path / 'a.png'}/", "--out-dir", tmp_path / "dry", "--shape", "2,2", "--dry-run")
    assert dry.exit_code == 1 and dry.stderr.splitlines()[0] == line, dry.stderr


def test_headers_on_object_storage_are_read_side_by_side_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch's header check reads URLs' headers REMOTE_HEADER_THREADS at a time (each is a
    request's round trip; one by one, a million inputs on S3 would take hours before the first
    file), and finds each fault for its own file; local files are read one after another."""
    import threading

    from geomcli.engine import plan as plans
    from geomcli.engine.operations import CropPad
    from geomcli.engine.options import Common
    from geomcli.io import Header

    under_way, most = [0], [0]
    lock = threading.Lock()

    def header(path: str, common: Common) -> Header:
        with lock:
            under_way[0] += 1
            most[0] = max(most[0], under_way[0])
        time.sleep(0.01)
        with lock:
            under_way[0] -= 1
        channels = 9 if int(path.rsplit("/", 1)[1].split(".")[0]) % 5 == 0 else 3  # a PNG holds 4 at most
        return Header("png", (8, 8, channels), np.dtype(np.uint8), 1, 100, "HWC")

    monkeypatch.setattr(plans, "header_as_read", header)
    monkeypatch.setattr(plans, "RUN_OF_HEADERS", 16)
    task = plans.Task(CropPad((4, 4)), Common())
    for scheme in ("s3://bucket/", "/local/"):
        todo = [plans.Job(index, f"{scheme}{index}.png", f"/out/{index}.png", "png") for index in range(40)]
        most[0] = 0
        faults = plans.option_faults(task, todo)
        assert [job.index for job, _ in faults] == list(range(0, 40, 5))
        assert all(line.startswith(f"/out/{job.index}.png") or f"{job.index}.png" in line for job, line in faults)
        assert most[0] == 1 if scheme == "/local/" else 1 < most[0] <= 16


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_worker_whose_parent_was_killed_ends_without_a_traceback(
        when: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """The parent killed (SIGKILL, the OOM killer) before or after it read the worker's "ready":
    the worker's send met EPIPE, or its recv ECONNRESET, and every worker printed a traceback."""
    import multiprocessing
    import threading

    monkeypatch.setattr(workers.signal, "signal", lambda number, handler: None)  # not this process's handlers
    parent, child = multiprocessing.Pipe()
    if when == "before":
        parent.close()
        killer = None
    else:  # closed with the worker's "ready" unread
        killer = threading.Thread(target=lambda: parent.poll(10) and parent.close())
        killer.start()
    from geomcli.engine.options import Common

    task = plan.Task(operations.CropPad((4, 4)), Common(quiet=True))
    workers._serve(child, task, multiprocessing.Value("q", -1, lock=False))
    if killer is not None:
        killer.join()
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("name", ["{stem}/x.png", "a/b/{stem}.png"])
def test_a_file_in_the_way_of_an_output_s_folder_is_named(name: str, tmp_path: Path, rng: np.random.Generator) -> None:
    """It was `Error: out/photo: File exists`: the folder alone, not the output, nor why."""
    source = png(tmp_path / "photo.png", rng)
    out = tmp_path / "out"
    out.mkdir()
    in_the_way = out / name.split("/")[0].format(stem="photo")
    in_the_way.write_text("a file")
    result = run("crop-pad", source, "--out-dir", out, "--name", name, "--shape", "4,4")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == (f"Error: {out / name.format(stem='photo')}: {in_the_way} is not a "
                                             "folder")
    assert in_the_way.read_text() == "a file"


@pytest.mark.parametrize("template", [".{stem}.png.k3x_9q2z.tmp", "d/.{stem}.zarr.geomcli-0a1b2c3d-old"])
def test_an_output_named_as_a_temp_file_is_a_usage_error(template: str, shots: Path, tmp_path: Path) -> None:
    # the sweep of another output's leftovers (after a worker died) would have removed it
    result = run("crop-pad", shots / "a.png", "--out-dir", tmp_path / "out", "--name", template, "--shape", "4,4")
    assert result.exit_code == 2 and "a name geomcli gives its temp files" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["crop-pad", "--shape", "4,4"], ["affine-grid", "--size", "1,1,4,4"]])
def test_an_output_given_with_o_named_as_a_temp_file_is_a_usage_error(command: list[str], shots: Path,
                                                                      tmp_path: Path) -> None:
    """-o out/.a.png.k3x_9q2z.tmp --format png was written, exit 0, where --name refuses it: a
    batch into out/ whose output a.png was stopped would have swept it as that output's temp file."""
    output = tmp_path / ".a.png.k3x_9q2z.tmp"
    inputs = [shots / "a.png"] if command[0] == "crop-pad" else []
    fmt = ["--format", "png"] if command[0] == "crop-pad" else ["--format", "npy"]
    result = run(command[0], *inputs, *command[1:], "-o", output, *fmt)
    assert result.exit_code == 2, result.stderr
    assert f"{output}: a name geomcli gives its temp files; choose another" in result.stderr
    assert not output.exists()


def test_a_dry_run_warns_of_an_ome_tif_name_it_cannot_keep_as_the_run_does(tmp_path: Path) -> None:
    """'crop-pad n3.npy --out-dir out --name {stem}.ome.tif --shape 2,4,4': the run warned that a
    rank-3 tensor of no layout is written without OME-XML, the dry run's record had no warning.
    It warns alike now; and a 4-D tensor's space-to-depth, an OME-TIFF of NCHW, warns in neither."""
    rng = np.random.default_rng(42)
    np.save(tmp_path / "n3.npy", rng.integers(0, 9, (3, 8, 8), dtype=np.uint8))
    np.save(tmp_path / "n4.npy", rng.integers(0, 9, (2, 3, 8, 8), dtype=np.uint8))
    for args in (("crop-pad", tmp_path / "n3.npy", "--shape", "2,4,4"),
                 ("space-to-depth", tmp_path / "n4.npy", "--blocksize", "2")):
        batch = (*args, "--out-dir", tmp_path / "out", "--name", "{stem}.ome.tif", "--json")
        dry, real = run(*batch, "--dry-run"), run(*batch)
        assert dry.exit_code == real.exit_code == 0, (dry.stderr, real.stderr)
        dry_record, record = (json.loads(result.stdout.splitlines()[0]) for result in (dry, real))
        assert dry_record["warnings"] == record["warnings"] == ([
            "a .ome.tif name promises OME-XML, but the result's axes are of no known layout; written without OME-XML"]
            if args[0] == "crop-pad" else [])
        shutil.rmtree(tmp_path / "out")


@pytest.mark.parametrize("name", ["{stem}.png", "{stem}.zarr"])
def test_a_dry_run_warns_of_what_the_header_shows_as_the_run_does(tmp_path: Path, name: str) -> None:
    """A dry run's records lacked the warnings a header alone shows, which the run gave: a resize
    of an RGB image's channel axis ('the channel axis is resized (3 -> 1)'), a --layout an image
    does not take, a PNG named .jpg. They are the run's, in its order, in records and on stderr.
    A run into a zarr array (chunk by chunk) left the misnamed file unsaid, which its dry run said."""
    rng = np.random.default_rng(42)
    png(tmp_path / "rgb.png", rng, (16, 16, 3))
    shutil.copy(png(tmp_path / "named" / "lab.png", rng, (16, 16, 3)), tmp_path / "lab.jpg")
    for args, expected in (
            (("resize", tmp_path / "rgb.png", "--sizes", "8,8,1"),
             ["the channel axis is resized (3 -> 1): channels are resampled as pixels are"]),
            (("crop-pad", tmp_path / "lab.jpg", "--shape", "8,8", "--layout", "NCHW"),
             ["--layout NCHW is for tensors: this PNG image is read as HWC", "PNG content named .jpg; read as PNG"])):
        batch = (*args, "--out-dir", tmp_path / "out", "--name", name)
        dry, real = run(*batch, "--dry-run", "--json"), run(*batch, "--json")
        assert dry.exit_code == real.exit_code == 0, (dry.stderr, real.stderr)
        dry_record, record = (json.loads(result.stdout.splitlines()[0]) for result in (dry, real))
        assert dry_record["warnings"] == record["warnings"] == expected
        shutil.rmtree(tmp_path / "out")
        dry, real = run(*batch, "--dry-run"), run(*batch)
        said = [[line for line in result.stderr.splitlines() if line.startswith("Warning:")] for result in (dry, real)]
        assert said[0] == said[1] and len(said[0]) == len(expected)
        shutil.rmtree(tmp_path / "out")


def _metadata_inputs(folder: Path) -> None:
    """Inputs of metadata a run warns of: an OME and an ImageJ z-stack (sizes, spacing), a PNG of 300
    DPI, an sRGB profile, EXIF and a text chunk, and a JPEG of EXIF orientation 6."""
    import tifffile
    from PIL import ImageCms, PngImagePlugin

    stack = np.zeros((4, 8, 8), np.uint16)
    tifffile.imwrite(folder / "z.ome.tif", stack, ome=True, metadata={
        "axes": "ZYX", "PhysicalSizeX": 0.25, "PhysicalSizeY": 0.25, "PhysicalSizeZ": 0.5})
    tifffile.imwrite(folder / "ij.tif", stack, imagej=True, resolution=(4.0, 4.0),
                     metadata={"axes": "ZYX", "spacing": 0.5, "unit": "um"})
    tifffile.imwrite(folder / "ij_nounit.tif", stack, imagej=True, metadata={"axes": "ZYX", "spacing": 0.5})
    exif = Image.Exif()
    exif[0x0112] = 6
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    text = PngImagePlugin.PngInfo()
    text.add_text("Comment", "shot 12")
    Image.fromarray(np.full((8, 10, 3), 90, np.uint8)).save(folder / "p.png", dpi=(300, 300), icc_profile=icc,
                                                            exif=exif.tobytes(), pnginfo=text)
    Image.fromarray(np.full((8, 10, 3), 90, np.uint8)).save(folder / "turned.jpg", exif=exif.tobytes(), dpi=(72, 72))


def test_a_rotated_calibration_is_named_as_a_pixel_size_not_a_dpi(tmp_path: Path) -> None:
    """A 0.25 micron ImageJ stack after 'warp --rotate 30' to a .tif (a format that holds DPI): the
    run and its dry run named what went 'DPI (101600 x 101600)', a figure no microscopist gave. It is
    the pixel size, in the stack's unit, now; a resolution in inches is still DPI."""
    _metadata_inputs(tmp_path)
    for source, said in (("ij.tif", "pixel size (0.25 micron)"), ("p.png", "DPI (300 x 300)")):
        line = ("warp", tmp_path / source, "--out-dir", tmp_path / "out", "--name", "{stem}.tif", "--rotate", "30",
                "--json")
        for result in (run(*line, "--dry-run"), run(*line)):
            assert result.exit_code == 0, result.stderr
            assert (f"{said} of warp's output (its pixels have no size per axis: a grid, a rotation or shear) cannot "
                    "be carried; dropped") in json.loads(result.stdout.splitlines()[0])["warnings"]
    # and where a .npy, which holds none, leaves it
    result = run("crop-pad", tmp_path / "ij.tif", "-o", tmp_path / "ij.npy", "--shape", "4,4", "--json")
    assert json.loads(result.stdout)["dropped"][0] == "pixel size (0.25 micron)", result.output


@pytest.mark.parametrize(("source", "name", "args"), [
    ("z.ome.tif", "{stem}.ome.tif", ["warp", "--rotate", "30"]),
    ("z.ome.tif", "{stem}.npy", ["crop-pad", "--shape", "4,4"]),
    ("z.ome.tif", "{stem}.tif", ["warp", "--volume", "--theta", "0.9,-0.2,0.1,0.05,0.2,0.9,0,0.1,0,0.1,1.1,-0.1"]),
    ("ij.tif", "{stem}.ome.tif", ["warp", "--rotate", "30"]),
    ("ij.tif", "{stem}.npy", ["warp", "--rotate", "30"]),
    ("ij.tif", "{stem}.ome.tif", ["warp", "--volume", "--theta", "0.9,-0.2,0.1,0.05,0.2,0.9,0,0.1,0,0.1,1.1,-0.1"]),
    ("p.png", "{stem}.jpg", ["warp", "--rotate", "30"]),
    ("p.png", "{stem}.webp", ["warp", "--scale", "2"]),
    ("p.png", "{stem}.bmp", ["crop-pad", "--shape", "4,4"]),
    ("p.png", "{stem}.npy", ["resize", "--sizes", "4,5"]),
    ("p.png", "{stem}.ome.tif", ["crop-pad", "--shape", "4,4"]),
    ("p.png", "{stem}.tif", ["space-to-depth", "--blocksize", "2"]),
    ("p.png", "{stem}.jpg", ["chain", "warp", "--rotate", "30", "crop-pad", "--shape", "4,4"]),
    ("turned.jpg", "{stem}.webp", ["crop-pad", "--shape", "4,4"]),
    ("turned.jpg", "{stem}.gif", ["warp", "--rotate", "30"]),
    ("p.png", "{stem}.zarr", ["crop-pad", "--shape", "4,4"]),
    ("turned.jpg", "{stem}.zarr", ["warp", "--rotate", "30"]),
    # 75 MB outputs: a memory map where the operation writes into one, from RAM where it does not (resize)
    ("p.png", "{stem}.tif", ["crop-pad", "--shape", "5000,5000"]),
    ("p.png", "{stem}.tif", ["warp", "--scale", "0.1", "--size", "5000,5000"]),
    ("p.png", "{stem}.tif", ["resize", "--sizes", "5000,5000"]),
    # what the TIFF writer alone judged: an ImageJ spacing of no ImageJ file, one whose unit went
    ("ij_nounit.tif", "{stem}.ome.tif", ["crop-pad", "--shape", "8,8"]),
    ("ij.tif", "{stem}.tif", ["warp", "--rotate", "30"]),
], ids=["ome-turned", "ome-npy", "ome-volume", "imagej-ome", "imagej-npy", "imagej-volume", "png-jpeg", "png-scaled",
        "png-bmp", "png-npy", "png-ome-tiff", "png-blocks", "png-chain", "jpeg-webp", "jpeg-gif", "png-zarr",
        "jpeg-zarr", "png-mapped", "png-warp-mapped", "png-resize-big", "imagej-spacing-ome", "imagej-tif-turned"])
def test_a_dry_run_warns_of_the_metadata_as_the_run_does_without_decoding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, name: str, args: list[str]) -> None:
    """'warp z.ome.tif --out-dir o --name {stem}.ome.tif --rotate 30 --dry-run --json' gave warnings []
    where the run warned that the OME physical sizes along X, Y were dropped, and a 300-DPI PNG to a
    .jpg said nothing of its DPI nor of JPEG's loss: a dry run of a file written whole read no
    metadata. It reads it from the headers now, no pixel decoded, and says it by the run's code."""
    import tifffile
    from PIL import ImageFile

    _metadata_inputs(tmp_path)
    command, *rest = args
    given = ["-i", tmp_path / source] if command == "chain" else [tmp_path / source]
    line = (command, *given, "--out-dir", tmp_path / "out", "--name", name, "--json")

    def decoded(*_: Any, **__: Any) -> None:
        raise AssertionError("a dry run decoded pixels")

    with monkeypatch.context() as patched:
        for owner, method in ((Image.Image, "load"), (ImageFile.ImageFile, "load"), (tifffile.TiffFile, "asarray"),
                              (tifffile.TiffPage, "asarray"), (tifffile.TiffPageSeries, "asarray")):
            patched.setattr(owner, method, decoded)
        patched.setattr("geomcli.io._png.decode", decoded)
        dry = run(*line, "--dry-run", *rest)
    real = run(*line, *rest)
    assert dry.exit_code == real.exit_code == 0, (dry.stderr, real.stderr)
    planned, done = (json.loads(result.stdout.splitlines()[0]) for result in (dry, real))
    assert planned["warnings"] == done["warnings"]
    assert planned.get("dropped") == done.get("dropped")
    assert done["warnings"] or done.get("dropped"), "a case of no metadata warning tests nothing"


# Loaded by the run's interpreters: every .npy output is written through a memory map (as one of
# 64 MiB or more is); the process that renames stop.npy or stop.zarr into place then sends the run
# (its process group's leader) SIGTERM, and takes a second before it reports it
_STOP_AS_STOP_IS_RENAMED_IN = """
import os, signal, time
from geomcli.io import _mapped
_mapped.MAP_OUTPUT_BYTES = 1
def signalled_once_renamed(rename):
    def renamed(source, destination, *args, **kwargs):
        rename(source, destination, *args, **kwargs)
        if os.path.basename(str(destination)) in ("stop.npy", "stop.zarr"):
            os.kill(os.getpgid(0), signal.SIGTERM)
            time.sleep(1)
    return renamed
os.replace, os.rename = signalled_once_renamed(os.replace), signalled_once_renamed(os.rename)
"""


@pytest.mark.process
@pytest.mark.parametrize(("output", "where"), [
    ("{stem}.npy", ["-j", "2"]), ("{stem}.zarr", ["-j", "2"]),
    pytest.param("{stem}.npy", ["--scheduler", "local:2"], marks=[pytest.mark.cluster, _ON_A_CLUSTER])])
def test_a_signal_just_after_a_mapped_output_or_a_zarr_is_renamed_still_gives_it_its_record(
        output: str, where: list[str], tmp_path: Path) -> None:
    """A memory-mapped output (.npy or .tiff of 64 MiB or more), or a local .zarr, was renamed
    into place by its transform, before the placing step that sends a report with its output: a
    SIGTERM between the two left it on disk with no record (stop.npy, and at times the output
    before it: with -j 2 4 runs in 4, as with Ctrl-C, on local:2 3 in 3; stop.zarr, 2 in 2). It
    is now placed by that step too."""
    inputs, env = _pngs_and_a_hook(tmp_path, [f"{index:03d}.png" for index in range(30)] + ["stop.png", "zz.png"],
                                   _STOP_AS_STOP_IS_RENAMED_IN, "SIGTERM")
    out = tmp_path / "out"
    result = subprocess.run([*GEOMCLI, "crop-pad", str(inputs), "--out-dir", str(out), "--shape", "8,8", "--name",
                             output, *where, "--json"], capture_output=True, text=True, env=env, timeout=60,
                            start_new_session=True)
    assert result.returncode == 143 and "Traceback" not in result.stderr, result.stderr
    last, ok, _ = ok_records_and_outputs(result.stdout, out)
    on_disk = set(os.listdir(out))  # (a zarr output is a folder)
    assert output.format(stem="stop") in on_disk
    assert ok == on_disk and last["ok"] == len(ok) and last["interrupted"] is True, (sorted(on_disk ^ ok), last)


# Loaded by the run's interpreters: a file's record notes where its worker has SIGTERM blocked
_NOTE_SIGTERM_BLOCKED = """
import signal
from geomcli.engine import jobs
_transform = jobs.transform
def transform_noting_the_mask(task, job):
    report = _transform(task, job)
    if signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, []):
        report.notes.append("SIGTERM blocked")
    return report
jobs.transform = transform_noting_the_mask
"""


@pytest.mark.process
def test_j_workers_take_sigterm_from_a_forkserver_a_local_cluster_started(tmp_path: Path) -> None:
    """A LocalCluster's forkserver holds SIGTERM (forkserver.start); a -j run later in the same
    process (a library's caller, a test session) forks its workers from it, and they inherited
    SIGTERM blocked: the parent's terminate, at a stop or of a worker still starting as the run
    ends, did nothing (its join waited 10 s, or for ever)."""
    inputs, env = _pngs_and_a_hook(tmp_path, [f"{index:03d}.png" for index in range(40)], _NOTE_SIGTERM_BLOCKED,
                                   "SIGTERM")
    code = ("import signal, sys\n"
            "from geomcli.engine import scheduler\n"
            "scheduler.start_local_workers_early(scheduler.parse_scheduler('local:2'))\n"
            f"sys.argv = ['geomcli', 'crop-pad', {str(inputs)!r}, '--out-dir', {str(tmp_path / 'out')!r}, "
            "'--shape', '8,8', '-j', '2', '--json']\n"
            "from geomcli.cli import run\n"
            "run()\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    *records, last = [json.loads(line) for line in result.stdout.splitlines()]
    assert last["ok"] == 40 and not [record for record in records if "SIGTERM blocked" in record["notes"]]
