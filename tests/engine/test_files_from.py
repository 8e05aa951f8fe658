"""--files-from FILE (geomcli.engine.plan.read_list): inputs listed by another tool, one a line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from PIL import Image

from geomcli.cli import cli
from geomcli.engine import plan

GEOMCLI = [sys.executable, "-m", "geomcli"]


def run(*args: str | Path, stdin: str | bytes | None = None) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args], input=stdin, catch_exceptions=False)


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    rng = np.random.default_rng(42)
    root = tmp_path / "shots"
    (root / "day").mkdir(parents=True)
    for name in ("a.png", "b.png", "day/c.png", "[odd] *name?.png", ".hidden.png"):
        Image.fromarray(rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)).save(root / name)
    return root


def outputs(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())


def test_the_listed_files_are_the_inputs_each_name_as_written(shots: Path, tmp_path: Path) -> None:
    listing = tmp_path / "list.txt"
    # a name with glob characters is that file, not a pattern; a hidden file named is taken;
    # blank lines and CRLF line ends are fine
    listing.write_text(f"{shots / 'b.png'}\r\n\n{shots / '[odd] *name?.png'}\n{shots / '.hidden.png'}\n")
    result = run("crop-pad", "--files-from", listing, "--out-dir", tmp_path / "out", "--shape", "4,4", "--json")
    assert result.exit_code == 0, result.stderr
    assert outputs(tmp_path / "out") == [".hidden.png", "[odd] *name?.png", "b.png"]
    assert [json.loads(line)["input"] for line in result.stdout.splitlines()[:-1]] == [
        str(shots / "b.png"), str(shots / "[odd] *name?.png"), str(shots / ".hidden.png")]


def test_a_nul_separated_list_is_find_print0s_names_newlines_included(shots: Path, tmp_path: Path) -> None:
    # find -print0's list was a traceback (embedded null byte), in a batch and in info
    Image.open(shots / "a.png").save(shots / "new\nline.png")
    listing = b"\0".join(
        os.fsencode(shots / name) for name in ("new\nline.png", "b.png")) + b"\0"
    result = run("crop-pad", "--files-from", "-", "--out-dir", tmp_path / "out", "--shape", "4,4", stdin=listing)
    assert result.exit_code == 0, result.stderr
    assert outputs(tmp_path / "out") == ["b.png", "new\nline.png"]
    result = run("info", "--files-from", "-", "--json", stdin=listing)
    assert result.exit_code == 0, result.stderr
    assert [json.loads(line)["input"] for line in result.stdout.splitlines()] == [
        str(shots / "new\nline.png"), str(shots / "b.png")]


def test_listed_files_follow_the_arguments_and_a_file_named_twice_runs_once(shots: Path, tmp_path: Path) -> None:
    result = run("crop-pad", shots / "a.png", "--files-from", "-", "--out-dir", tmp_path / "out", "--shape", "4,4",
                 stdin=f"{shots / 'day' / 'c.png'}\n{shots / 'a.png'}\n")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("crop-pad: 2 ok, 0 failed, 0 skipped in ")
    assert outputs(tmp_path / "out") == ["a.png", "c.png"]


def test_a_listed_folder_is_its_files_and_a_missing_name_one_failure(shots: Path, tmp_path: Path) -> None:
    listing = tmp_path / "list.txt"
    listing.write_text(f"{shots / 'day'}\n{shots / 'gone.png'}\n")
    result = run("crop-pad", "--files-from", listing, "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == f"Error: {shots / 'gone.png'}: no such file"
    assert outputs(tmp_path / "out") == ["c.png"]


def test_names_that_are_not_utf8_are_kept_as_bytes(shots: Path, tmp_path: Path) -> None:
    odd = os.fsdecode(b"caf\xe9.png")
    os.link(shots / "a.png", shots / odd)
    listing = tmp_path / "list.txt"
    listing.write_bytes(os.fsencode(str(shots / odd)) + b"\n")
    assert plan.read_list(str(listing)) == [str(shots / odd)]
    result = run("crop-pad", "--files-from", listing, "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 0, result.stderr
    assert outputs(tmp_path / "out") == [odd]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_a_utf16_list_is_refused_not_split_into_one_letter_names(
        encoding: str, shots: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PowerShell 5's ``>`` writes UTF-16: split at its NULs, each letter was a name, and the "."
    of "a.png" the current folder, whose every file was then done (here a.png and b.png)."""
    monkeypatch.chdir(shots)
    listing = tmp_path / "list.txt"
    bom = {"utf-16-be": "\ufeff"}.get(encoding, "")
    listing.write_bytes((bom + "a.png\r\n").encode(encoding))
    result = run("crop-pad", "--files-from", listing, "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 2
    wide = encoding[:6].upper()
    assert result.stderr.splitlines()[-1] == (
        f"Error: Invalid value for '--files-from': {listing} is {wide} text: save the list as UTF-8, one name a line")
    assert not (tmp_path / "out").exists()


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_name(shots: Path, tmp_path: Path) -> None:
    # Notepad's list read 'Error: \ufeff.../a.png: no such file', the mark unseen in the message
    listing = tmp_path / "list.txt"
    listing.write_text(f"{shots / 'a.png'}\r\n{shots / 'b.png'}\r\n", encoding="utf-8-sig")
    result = run("crop-pad", "--files-from", listing, "--out-dir", tmp_path / "out", "--shape", "4,4")
    assert result.exit_code == 0, result.stderr
    assert outputs(tmp_path / "out") == ["a.png", "b.png"]


@pytest.mark.parametrize(("args", "message"), [
    (["--files-from", "{missing}", "--out-dir", "{out}"], "cannot read the list: {missing}: no such file"),
    (["--files-from", "{empty}", "--out-dir", "{out}"], "lists no input"),
    (["--files-from", "{empty}", "-o", "{out}/x.png"], "give an INPUT, or --files-from FILE with --out-dir"),
    (["{shots}/a.png", "--files-from", "{empty}", "-o", "{out}/x.png"], "--files-from goes with --out-dir, not -o"),
    (["--out-dir", "{out}"], "give an INPUT, or --files-from FILE with --out-dir"),
    # (it was split at its NULs and read as names: a 3 KB --name error of escapes)
    (["--files-from", "{shots}/a.png", "--out-dir", "{out}"],
     "{shots}/a.png is a PNG file, not a list of names, one a line"),
])
def test_list_mistakes_are_usage_errors(args: list[str], message: str, shots: Path, tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("\n\n")
    names = {"missing": tmp_path / "missing.txt", "empty": tmp_path / "empty.txt", "out": tmp_path / "out",
             "shots": shots}
    result = run("crop-pad", *[arg.format(**names) for arg in args], "--shape", "4,4")
    assert result.exit_code == 2
    assert message.format(**names) in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("source", ["/dev/zero", "fifo", "long", "long-stdin"])
def test_a_list_that_is_no_list_is_refused_without_hanging_or_filling_memory(
        source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--files-from /dev/zero read until the OOM killer came (24 GB in 10 s), and a FIFO that
    no writer opens waited forever: a device is refused, such a FIFO is an empty list (after
    io._stream's grace, here shortened), and a list past LIST_BYTES is refused unread."""
    from geomcli.io import _stream

    monkeypatch.setattr(_stream, "_WRITER_GRACE", 0.05)
    monkeypatch.setattr(plan, "LIST_BYTES", 100)
    listing, stdin = tmp_path / "list.txt", None
    if source == "/dev/zero":
        listing = Path(source)
    elif source == "fifo":
        os.mkfifo(listing)
    elif source == "long":
        listing.write_text("a.png\n" * 20)
    else:
        listing, stdin = Path("-"), b"a.png\n" * 20
    result = run("crop-pad", "--files-from", listing, "--out-dir", tmp_path / "out", "--shape", "4,4", stdin=stdin)
    assert result.exit_code == 2
    message = {"/dev/zero": "cannot read the list: /dev/zero: is a device, not a file or a pipe",
               "fifo": f"{listing} lists no input",
               "long": f"cannot read the list: {listing}: more than 100 bytes; read no further",
               "long-stdin": "cannot read the list: <stdin>: more than 100 bytes; read no further"}[source]
    assert result.stderr.splitlines()[-1] == f"Error: Invalid value for '--files-from': {message}"


def test_a_pipe_from_find_feeds_a_batch(shots: Path, tmp_path: Path) -> None:
    listing = subprocess.run(["find", str(shots), "-name", "*.png", "-not", "-name", ".*"], capture_output=True,
                             check=True).stdout
    done = subprocess.run([*GEOMCLI, "chain", "--files-from", "-", "--out-dir", str(tmp_path / "out"),
                           "crop-pad", "--shape", "4,4"], input=listing, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert outputs(tmp_path / "out") == ["[odd] *name?.png", "a.png", "b.png", "c.png"]


def test_info_reads_a_list_and_refuses_a_dash_in_it_before_any_record(tmp_path: Path) -> None:
    Image.fromarray(np.zeros((4, 6, 3), np.uint8)).save(tmp_path / "a.png")
    (tmp_path / "list.txt").write_text(f"{tmp_path / 'a.png'}\n")
    result = run("info", "--files-from", tmp_path / "list.txt")
    assert result.exit_code == 0 and result.stdout.startswith(f"{tmp_path / 'a.png'}: png 4×6×3 uint8")
    (tmp_path / "list.txt").write_text(f"{tmp_path / 'a.png'}\n-\n")
    result = run("info", "--files-from", tmp_path / "list.txt")
    assert result.exit_code == 2 and result.stdout == ""  # it read "- (stdin) is one input: give -o OUTPUT"
    assert result.stderr.splitlines()[-1] == ("Error: Invalid value for '--files-from': - in a --files-from list names "
                                              "no file; give - as an INPUT to read stdin")


@pytest.mark.parametrize("command", [["crop-pad", "--shape", "4,4"], ["chain", "crop-pad", "--shape", "4,4"]])
def test_a_dash_in_a_transforms_list_is_refused_as_info_refuses_it(tmp_path: Path, command: list[str]) -> None:
    """'printf "%s\\n" * > list' of a folder holding a file named -: a transform's --files-from
    said '- (stdin) is one input: give -o OUTPUT, not --out-dir', of an INPUT never given."""
    Image.fromarray(np.zeros((4, 6, 3), np.uint8)).save(tmp_path / "a.png")
    (tmp_path / "list.txt").write_text(f"{tmp_path / 'a.png'}\n-\n")
    options = ["--files-from", tmp_path / "list.txt", "--out-dir", tmp_path / "out"]
    at = 1 if command[0] == "chain" else len(command)
    result = run(*command[:at], *options, *command[at:])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == ("Error: Invalid value for '--files-from': - in a --files-from list names "
                                              "no file; give - as an INPUT to read stdin")
    assert not (tmp_path / "out").exists()


def test_index_counts_inputs_in_the_order_given_then_the_list(tmp_path: Path) -> None:
    """docs/files.md said {index} was the place in "the run's sorted list": it is the INPUTs in the
    order given, a folder's files in name order, then --files-from's names in its order, a file
    that fails counted too."""
    for name in ("z.png", "folder/b.png", "folder/a.png", "listed.png"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        Image.new("RGB", (4, 4)).save(tmp_path / name)
    (tmp_path / "folder" / "broken.png").write_bytes(b"")
    result = run("crop-pad", tmp_path / "z.png", tmp_path / "folder", "--files-from", "-", "--out-dir",
                 tmp_path / "out", "--name", "{index}_{stem}.png", "--shape", "2,2", "--dry-run", "--json",
                 stdin=f"{tmp_path / 'listed.png'}\n")
    records = [json.loads(line) for line in result.stdout.splitlines()][:-1]
    assert [Path(record["output"]).name for record in records] == [
        "0_z.png", "1_a.png", "2_b.png", "3_broken.png", "4_listed.png"]
