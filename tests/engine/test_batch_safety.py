"""Safety under races and hostile names: -n against files made during the run; control
characters in file names, which must not break a message line or drive the terminal."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import hooked, run
from PIL import Image, PngImagePlugin

from geomcli.cli import cli
from geomcli.engine import jobs, plan, summary, workers
from geomcli.engine.summary import Report
from geomcli.errors import GeomError
from geomcli.io import _atomic, _mapped

GEOMCLI = [sys.executable, "-m", "geomcli"]


def temp_files(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if name.endswith(".tmp")]


# --- -n/--no-clobber: a file made at the output's name after the plan is never replaced ------------

# Loaded by every interpreter of a subprocess run (on PYTHONPATH): the process that opens an image
# whose text says "plant" writes "precious" at GEOMCLI_TEST_PLANT first, after the run was planned.
_PLANTING = """
import os
import PIL.Image
_open = PIL.Image.open
def plant_then_open(fp, *args, **kwargs):
    if b"plant" in getattr(fp, "getvalue", bytes)():
        with open(os.environ["GEOMCLI_TEST_PLANT"], "w") as f:
            f.write("precious")
    return _open(fp, *args, **kwargs)
PIL.Image.open = plant_then_open
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_no_clobber_skips_an_output_made_during_the_run(tmp_path: Path, jobs: str) -> None:
    folder, out, hooks = tmp_path / "in", tmp_path / "out", tmp_path / "hooks"
    folder.mkdir()
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_PLANTING)
    rng = np.random.default_rng(3)
    for index in range(12):
        info = PngImagePlugin.PngInfo()
        info.add_text("Comment", "plant" if index == 9 else "fine")
        Image.fromarray(rng.integers(0, 256, (40, 50, 3), np.uint8)).save(folder / f"n{index:02d}.png", pnginfo=info)
    result = subprocess.run([*GEOMCLI, "crop-pad", str(folder), "--out-dir", str(out), "--shape", "8,8", "-n",
                             "-j", jobs, "--json"], capture_output=True, text=True, timeout=60,
                            env=hooked(hooks, GEOMCLI_TEST_PLANT=str(out / "n09.png")))
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    planted = [record for record in records if record.get("input", "").endswith("n09.png")]
    assert [(r["status"], r["error"], r["notes"]) for r in planted] == [
        ("skipped", None, ["the output exists (--no-clobber)"])]
    assert (records[-1]["ok"], records[-1]["skipped"], records[-1]["failed"]) == (11, 1, 0)
    assert (out / "n09.png").read_text() == "precious"
    assert sorted(os.listdir(out)) == [f"n{index:02d}.png" for index in range(12)]  # no temp file


def test_no_replace_leaves_a_file_made_while_the_output_was_written(tmp_path: Path) -> None:
    target = tmp_path / "o.png"
    with pytest.raises(_atomic.OutputExistsError, match=r"o\.png: a file appeared at the output's name while"):
        with _atomic.no_replace(), _atomic.atomic_file(str(target)) as f:
            f.write(b"new")
            target.write_text("precious")
    assert target.read_text() == "precious" and temp_files(tmp_path) == []
    with _atomic.no_replace(), _atomic.atomic_file(str(target.with_name("fresh.png"))) as f:
        f.write(b"new")
    assert (tmp_path / "fresh.png").read_bytes() == b"new" and temp_files(tmp_path) == []


def test_no_replace_holds_for_a_commit_deferred_to_another_thread(tmp_path: Path) -> None:
    target = tmp_path / "o.png"
    with _atomic.no_replace(), _atomic.deferred_commits() as commits, _atomic.atomic_file(str(target)) as f:
        f.write(b"new")
    target.write_text("precious")  # after the worker made it, before its committer places it
    committer = workers._Committer(_Sent(), None)  # type: ignore[arg-type]
    job = plan.Job(0, "in.png", str(target), "png")
    workers._jobs_under_way.append(job)
    try:
        committer.put(job, Report("crop-pad", job.input, job.output, warnings=["JPEG is lossy"]), commits)
        committer.close()
    finally:
        workers._jobs_under_way.clear()
    (report,) = committer.connection.sent  # type: ignore[attr-defined]
    assert (report.status, report.error, report.notes, report.warnings) == (
        "skipped", None, ["the output exists (--no-clobber)"], [])
    assert target.read_text() == "precious" and temp_files(tmp_path) == []


def test_a_worker_stopped_while_it_imports_s3fs_ends_as_stopped_without_a_traceback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM in a -j worker's first job, while it imported s3fs: the handler's sweep of the
    job's pending uploads imported it again, half made (AttributeError: partially initialized
    module 's3fs'), printed a traceback and ended the worker with 1, not 143."""
    import signal

    from geomcli.io import _remote

    def half_imported(url: str) -> None:
        raise AttributeError("partially initialized module 's3fs' has no attribute '__version__'")

    def ended(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(_remote, "filesystem", half_imported)
    monkeypatch.setattr(workers.os, "_exit", ended)
    workers._jobs_under_way.append(plan.Job(0, "s3://bkt/in.png", "s3://bkt/out/in.png", "png"))
    try:
        with pytest.raises(SystemExit) as stopped:
            workers._terminated(signal.SIGTERM, None)
    finally:
        workers._jobs_under_way.clear()
    assert stopped.value.code == 143


def test_a_commit_whose_work_was_cancelled_places_nothing(tmp_path: Path) -> None:
    """A Dask task cancelled while its committer holds its output (io._atomic.stopped_when): the
    temp file goes, nothing is renamed, and a file of the same thread made before is untouched."""
    target = tmp_path / "o.png"
    with _atomic.deferred_commits() as commits, _atomic.atomic_file(str(target)) as f:
        f.write(b"new")
    assert len(temp_files(tmp_path)) == 1
    with _atomic.stopped_when(lambda: True), pytest.raises(_atomic.Cancelled, match="task was cancelled"):
        commits[0]()
    assert os.listdir(tmp_path) == []
    # and a condition still false places it as before
    with _atomic.deferred_commits() as commits, _atomic.atomic_file(str(target)) as f:
        f.write(b"new")
    with _atomic.stopped_when(lambda: False):
        commits[0]()
    assert os.listdir(tmp_path) == ["o.png"] and target.read_bytes() == b"new"


class _Sent:
    def __init__(self) -> None:
        self.sent: list[Report] = []

    def send(self, report: Report) -> None:
        self.sent.append(report)


def test_no_replace_holds_for_a_memory_mapped_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    target = tmp_path / "o.npy"
    with pytest.raises(_atomic.OutputExistsError):
        with _atomic.no_replace(), _mapped.open_output(str(target), (4, 4), np.dtype(np.float32), "npy") as out:
            assert isinstance(out, np.memmap)
            target.write_text("precious")
    assert target.read_text() == "precious" and temp_files(tmp_path) == []


@pytest.mark.parametrize("code", [errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV])
def test_no_replace_without_hard_links_looks_once_more_before_the_rename(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    def no_links(source: str, destination: str, **options: bool) -> None:
        raise OSError(code, os.strerror(code), source)

    monkeypatch.setattr(os, "link", no_links)
    with _atomic.no_replace(), _atomic.atomic_file(str(tmp_path / "new.png")) as f:
        f.write(b"new")
    assert (tmp_path / "new.png").read_bytes() == b"new"
    with pytest.raises(_atomic.OutputExistsError):
        with _atomic.no_replace(), _atomic.atomic_file(str(tmp_path / "new.png")) as f:
            f.write(b"newer")
    assert (tmp_path / "new.png").read_bytes() == b"new" and temp_files(tmp_path) == []


@pytest.mark.parametrize("made", ["folder", "file"])
def test_no_replace_holds_for_a_folder_output_against_one_made_at_the_last_moment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: str) -> None:
    """A zarr array's folder: after the last look, a full folder or a file made at its name fails
    the rename; that is the output having appeared, not a failure to write."""
    target, rename = tmp_path / "o.zarr", os.rename

    def made_first(source: str, destination: str) -> None:
        if destination == str(target):
            if made == "folder":
                target.mkdir()
                (target / "zarr.json").write_text("precious")
            else:
                target.write_text("precious")
        rename(source, destination)

    monkeypatch.setattr(os, "rename", made_first)
    with pytest.raises(_atomic.OutputExistsError, match=r"o\.zarr: a file appeared at the output's name while"):
        with _atomic.no_replace(), _atomic.atomic_folder(str(target)) as temporary:
            os.mkdir(temporary)
            Path(temporary, "zarr.json").write_text("new")
    assert (target / "zarr.json" if made == "folder" else target).read_text() == "precious"
    assert os.listdir(tmp_path) == ["o.zarr"]


def test_no_replace_is_off_by_default_and_ends_with_its_block(tmp_path: Path) -> None:
    target = tmp_path / "o.png"
    target.write_text("old")
    with _atomic.no_replace():
        pass
    with _atomic.atomic_file(str(target)) as f:
        f.write(b"new")
    assert target.read_bytes() == b"new"
    assert issubclass(_atomic.OutputExistsError, GeomError)


# --- control characters in file names: every line geomcli prints stays one line ------------------

# What a terminal acts on: C0 controls but the line's own end, DEL, C1 controls (CSI is \x9b)
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def lines(text: str) -> list[str]:
    assert not RAW_CONTROL.search(text), repr(text)
    return text.splitlines()


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """names/: a junk file named with a newline, a picture named with an ANSI colour sequence."""
    folder = tmp_path / "names"
    folder.mkdir()
    (folder / "x\ny.png").write_bytes(b"junk")
    Image.new("RGB", (12, 10), (9, 9, 9)).save(folder / "c\x1b[31mred\x9b2J.png", format="PNG")
    return folder


def test_a_newline_in_a_name_keeps_a_one_file_error_on_one_line(hostile: Path, tmp_path: Path) -> None:
    result = run("crop-pad", hostile / "x\ny.png", "-o", tmp_path / "o.png", "--shape", "8,8")
    assert result.exit_code == 1
    assert lines(result.stderr) == [f"Error: {hostile}/x\\ny.png: not a readable PNG (unrecognised content)"]


def test_control_characters_in_names_are_escaped_in_the_summary_and_warnings(hostile: Path, tmp_path: Path) -> None:
    result = run("crop-pad", hostile / "c\x1b[31mred\x9b2J.png", "-o", tmp_path / "o\tut\x1b[0m.jpg", "--shape", "8,8")
    assert result.exit_code == 0, result.stderr
    warning, summary = lines(result.stderr)
    assert warning.startswith(f"Warning: {tmp_path}/o\\tut\\x1b[0m.jpg: JPEG is lossy")
    assert summary.startswith(f"crop-pad {hostile}/c\\x1b[31mred\\x9b2J.png → {tmp_path}/o\\tut\\x1b[0m.jpg: ")


def test_control_characters_in_names_are_escaped_in_a_batch_and_its_dry_run(hostile: Path, tmp_path: Path) -> None:
    common = ("crop-pad", hostile, "--out-dir", tmp_path / "out", "--shape", "8,8")
    dry = run(*common, "--dry-run")
    assert dry.exit_code == 1
    assert lines(dry.stdout) == [f"{hostile}/c\\x1b[31mred\\x9b2J.png → {tmp_path}/out/c\\x1b[31mred\\x9b2J.png: "
                                 "8×8×3 uint8"]
    assert lines(dry.stderr)[0] == f"Error: {hostile}/x\\ny.png: not a readable PNG (unrecognised content)"
    result = run(*common)
    assert result.exit_code == 1
    assert lines(result.stderr)[0] == f"Error: {hostile}/x\\ny.png: not a readable PNG (unrecognised content)"
    assert len(lines(result.stderr)) == 2  # and the count
    assert (tmp_path / "out" / "c\x1b[31mred\x9b2J.png").is_file()  # the file itself keeps its name
    records = run(*common, "--json").stdout.splitlines()  # JSON escapes by itself: the name read back whole
    assert json.loads(records[1])["input"] == str(hostile / "x\ny.png")


def test_control_characters_in_names_are_escaped_in_info_and_usage_errors(hostile: Path, tmp_path: Path) -> None:
    result = run("info", hostile / "c\x1b[31mred\x9b2J.png", hostile / "x\ny.png")
    assert result.exit_code == 1
    assert lines(result.stdout)[0].startswith(f"{hostile}/c\\x1b[31mred\\x9b2J.png: png 10×12×3 uint8")
    assert lines(result.stderr) == [f"Error: {hostile}/x\\ny.png: not a readable PNG (unrecognised content)"]
    (tmp_path / "fold\ner").mkdir()
    usage = run("crop-pad", tmp_path / "fold\ner", "-o", tmp_path / "o.png", "--shape", "8,8")
    assert usage.exit_code == 2
    assert lines(usage.stderr)[-1] == f"Error: {tmp_path}/fold\\ner is a folder; give --out-dir DIR for the files in it"
    bare = run()  # click's help for no arguments is its own text, its lines kept
    assert "\n  crop-pad " in bare.stdout + bare.stderr


def test_a_name_that_is_not_utf8_is_escaped_on_a_strict_stdout(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    Image.new("L", (6, 6)).save(os.fsdecode(bytes(folder) + b"/a\xff.png"), format="PNG")
    result = subprocess.run([*GEOMCLI, "crop-pad", str(folder), "--out-dir", str(tmp_path / "out"), "--shape", "4,4",
                             "--dry-run"], capture_output=True, text=True,
                            env={**os.environ, "PYTHONIOENCODING": "utf-8"})  # stdout errors="strict"
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{folder}/a\\udcff.png → {tmp_path}/out/a\\udcff.png: 4×4 uint8\n"


def test_a_name_that_is_not_utf8_comes_back_exact_from_json(tmp_path: Path) -> None:
    """--json writes such a name's bytes as the surrogate escapes Python gives them (strict JSON:
    \\udcff), so a script gets the exact name back with json.loads and os.fsencode."""
    folder = tmp_path / "in"
    folder.mkdir()
    good, bad = bytes(folder) + b"/a\xff.png", bytes(folder) + b"/b\xfe\xc3.png"
    Image.new("L", (6, 6)).save(os.fsdecode(good), format="PNG")
    with open(bad, "wb") as f:
        f.write(b"not a png")
    done = subprocess.run([*GEOMCLI, "crop-pad", str(folder), "--out-dir", str(tmp_path / "out"), "--shape", "4,4",
                           "--json"], capture_output=True, env={**os.environ, "LC_ALL": "C"})
    assert done.returncode == 1, done.stderr
    records = [json.loads(line) for line in done.stdout.decode("ascii").splitlines()]
    assert [(os.fsencode(r["input"]), r["status"]) for r in records[:2]] == [(good, "ok"), (bad, "error")]
    assert os.path.exists(os.fsencode(records[0]["output"]))
    assert os.fsencode(records[0]["output"]) == bytes(tmp_path) + b"/out/a\xff.png"
    assert os.fsencode(records[1]["error"]).startswith(bad + b": not a readable PNG")
    info = subprocess.run([*GEOMCLI, "info", os.fsdecode(good), "--json"], capture_output=True)
    assert info.returncode == 0 and os.fsencode(json.loads(info.stdout)["input"]) == good


def test_a_stdout_whose_encoding_lacks_a_character_gets_it_escaped(tmp_path: Path) -> None:
    """A latin-1 or ASCII locale's stdout: --dry-run's arrow and info's non-ASCII names were a
    UnicodeEncodeError traceback; they are escaped, as on stderr."""
    Image.new("L", (6, 6)).save(tmp_path / "phöto.png")
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    dry = subprocess.run([*GEOMCLI, "crop-pad", str(tmp_path / "phöto.png"), "--out-dir", str(tmp_path / "out"),
                          "--shape", "4,4", "--dry-run", "-q"], capture_output=True, env=env)
    info = subprocess.run([*GEOMCLI, "info", str(tmp_path / "phöto.png")], capture_output=True, env=env)
    assert dry.returncode == info.returncode == 0, dry.stderr + info.stderr
    assert dry.stdout == f"{tmp_path}/ph\\xf6to.png \\u2192 {tmp_path}/out/ph\\xf6to.png: 4\\xd74 uint8\n".encode()
    assert info.stdout.startswith(f"{tmp_path}/ph\\xf6to.png: png 6\\xd76 uint8".encode())


@pytest.mark.parametrize(("text", "shown"), [
    ("plain ünïcode ✓ 画像.png", "plain ünïcode ✓ 画像.png"),
    ("a\nb\r\tc\x00", "a\\nb\\r\\tc\\x00"),
    ("\x1b[2J\x9b31m\x7f", "\\x1b[2J\\x9b31m\\x7f"),
    ("line\u2028sep\u202eevil", "line\\u2028sep\\u202eevil"),
    ("a\udcffb", "a\\udcffb"),
    # invisible: a listed name behind a byte order mark or a zero-width space read 'Error: photo.png:
    # no such file' for a photo.png that was there; the joiners of emoji and scripts are kept
    ("\ufeffphoto.png", "\\ufeffphoto.png"),
    ("ph\u200boto\u2060.png", "ph\\u200boto\\u2060.png"),
    ("\u200eright\u200f\u061c", "\\u200eright\\u200f\\u061c"),
    ("👨\u200d👩 می\u200cخواهم.png", "👨\u200d👩 می\u200cخواهم.png"),
])
def test_printable_escapes_what_would_break_or_drive_a_line(text: str, shown: str) -> None:
    assert summary.printable(text) == shown
    assert summary.printable(shown) == shown


# --- a low open-file limit (ulimit -n): fewer workers, or none, and never a traceback --------------


def test_a_low_open_file_limit_takes_fewer_workers_without_a_traceback_or_a_failed_file(tmp_path: Path) -> None:
    import resource

    folder = tmp_path / "in"
    folder.mkdir()
    for index in range(300):
        Image.new("RGB", (8, 8), (index % 256, 0, 0)).save(folder / f"t{index:03d}.png")
    for limit in (14, 16, 18, 20):
        out = tmp_path / f"out{limit}"
        result = subprocess.run([*GEOMCLI, "crop-pad", str(folder), "--out-dir", str(out), "--shape", "4,4", "-j", "2"],
                                capture_output=True, text=True, timeout=60,
                                preexec_fn=lambda limit=limit: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                                                   (limit, limit)))
        assert result.returncode == 0, result.stderr
        assert result.stderr.splitlines()[:-1] == [
            f"Warning: the open-file limit (ulimit -n {limit}) leaves no room for worker processes; "
            "this process does every file"], result.stderr
        assert len(os.listdir(out)) == 300


def test_the_open_file_limit_bounds_the_worker_count(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import resource

    monkeypatch.setattr(workers, "_descriptors_open", lambda: 10)
    limit = 10 + workers._DESCRIPTORS_FIXED + 5 * workers._DESCRIPTORS_PER_WORKER + 1
    monkeypatch.setattr(resource, "getrlimit", lambda which: (limit, resource.RLIM_INFINITY))
    assert workers._workers_allowed(4) == 4 and capsys.readouterr().err == ""
    assert workers._workers_allowed(8) == 5
    assert capsys.readouterr().err == (f"Warning: the open-file limit (ulimit -n {limit}) leaves room for 5 of 8 "
                                       "worker processes\n")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert workers._workers_allowed(64) == 64


# --- Ctrl-C while the command starts ------------------------------------------------------------


def test_ctrl_c_while_the_command_line_is_parsed_is_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    import click

    def interrupted(self: click.Group, ctx: click.Context, args: list[str]) -> list[str]:
        raise KeyboardInterrupt

    monkeypatch.setattr(click.Group, "parse_args", interrupted)
    result = CliRunner().invoke(cli, ["--version"])
    assert (result.exit_code, result.stdout, result.stderr) == (130, "", "Interrupted\n")


def test_a_pipe_made_at_an_output_name_after_the_plan_is_replaced_not_written_into(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from geomcli import io

    source = tmp_path / "a.png"
    Image.new("RGB", (8, 8), "red").save(source)
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "a.png")  # no reader: writing into it would wait forever
    monkeypatch.setattr(io, "is_stream", lambda path: False)  # as if made after the plan looked
    result = CliRunner().invoke(cli, ["crop-pad", str(source), "--out-dir", str(out),
                                      "--shape", "4,4", "-j", "1"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert (out / "a.png").is_file() and (out / "a.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_run_that_writes_nothing_takes_away_the_folders_it_made(tmp_path: Path, jobs: str) -> None:
    """Every input failed, and --out-dir new/sub stayed, empty: make then took the folder target
    for up to date. The folders the run made go where it wrote no file; those that were there, or
    that got a file, stay."""
    (tmp_path / "in" / "day").mkdir(parents=True)
    for name in ("bad.png", "day/bad.png"):
        (tmp_path / "in" / name).write_bytes(b"not a png")
    failed = run("crop-pad", tmp_path / "in", "-r", "--out-dir", tmp_path / "new" / "sub", "--shape", "4,4", "-j", jobs)
    assert failed.exit_code == 1 and "0 ok, 2 failed" in failed.stderr
    assert sorted(os.listdir(tmp_path)) == ["in"]
    (tmp_path / "there").mkdir()
    failed = run("crop-pad", tmp_path / "in", "-r", "--out-dir", tmp_path / "there" / "sub", "--shape", "4,4")
    assert failed.exit_code == 1 and os.listdir(tmp_path / "there") == []
    Image.fromarray(np.zeros((6, 6), np.uint8)).save(tmp_path / "in" / "day" / "good.png")
    some = run("crop-pad", tmp_path / "in", "-r", "--out-dir", tmp_path / "new", "--shape", "4,4", "-j", jobs)
    assert some.exit_code == 1 and "1 ok, 2 failed" in some.stderr
    assert [path.relative_to(tmp_path / "new").as_posix() for path in sorted((tmp_path / "new").rglob("*"))] == \
        ["day", "day/good.png"]


@pytest.mark.parametrize("recursive", [False, True])
def test_a_folder_another_run_took_away_while_this_one_read_is_made_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recursive: bool) -> None:
    """make -j4 over a pattern rule, one geomcli per file into one --out-dir: the run of a bad
    file made out/, failed, and removed it as empty while the run of a good file, which had found
    it there, read its input; that one then failed too ('folder out does not exist', exit 1).
    Its folder is made again."""
    (tmp_path / "in" / "day").mkdir(parents=True)
    Image.fromarray(np.full((6, 6), 7, np.uint8)).save(tmp_path / "in" / "day" / "a.png")
    out = tmp_path / "out"
    real = jobs.transform_file

    def after_the_other_run(*args: object, **kwargs: object) -> object:
        for folder in sorted((path for path in out.rglob("*") if path.is_dir()), reverse=True) + [out]:
            folder.rmdir()  # what the other run's clean-up does: empty folders only
        return real(*args, **kwargs)

    monkeypatch.setattr(jobs, "transform_file", after_the_other_run)
    inputs = [tmp_path / "in", "-r"] if recursive else [tmp_path / "in" / "day" / "a.png"]
    result = run("crop-pad", *inputs, "--out-dir", out, "--shape", "4,4", "-j", "1")
    assert result.exit_code == 0, result.stderr
    written = out / "day" / "a.png" if recursive else out / "a.png"
    assert np.array_equal(np.asarray(Image.open(written)), np.full((4, 4), 7, np.uint8))
    assert temp_files(written.parent) == []


@pytest.mark.parametrize("recursive", [False, True])
@pytest.mark.parametrize("made_by_another", [False, True])
def test_a_folder_another_run_took_away_while_this_one_made_it_is_made_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recursive: bool, made_by_another: bool) -> None:
    """xargs -P, one geomcli per file into one new --out-dir out/sub: this run had made out/ when
    a run of a bad file removed it as empty, so its mkdir of out/sub found no parent and the good
    file failed ('out/sub: cannot make the folder (No such file or directory)', exit 1); or
    another run had made out/sub, which a third removed before makedirs looked ('(File exists)').
    The folders are made again."""
    (tmp_path / "in" / "day").mkdir(parents=True)
    Image.fromarray(np.full((6, 6), 7, np.uint8)).save(tmp_path / "in" / "day" / "a.png")
    out = tmp_path / "out"
    deepest = out / "sub" / "day" if recursive else out / "sub"
    real_mkdir, raced = os.mkdir, []

    def the_other_run_s_clean_up() -> None:
        for folder in sorted((p for p in out.rglob("*") if p.is_dir()), reverse=True) + [out]:
            folder.rmdir()  # empty folders only

    def after_the_other_run(path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> None:
        if Path(path) != deepest or raced:
            return real_mkdir(path, *args, **kwargs)
        raced.append(path)
        if not made_by_another:
            the_other_run_s_clean_up()
            return real_mkdir(path, *args, **kwargs)
        real_mkdir(path)
        try:
            return real_mkdir(path, *args, **kwargs)
        finally:
            the_other_run_s_clean_up()

    monkeypatch.setattr(os, "mkdir", after_the_other_run)
    inputs = [tmp_path / "in", "-r"] if recursive else [tmp_path / "in" / "day" / "a.png"]
    result = run("crop-pad", *inputs, "--out-dir", out / "sub", "--shape", "4,4", "-j", "1")
    assert raced and result.exit_code == 0, result.stderr
    written = deepest / "a.png"
    assert np.array_equal(np.asarray(Image.open(written)), np.full((4, 4), 7, np.uint8))
