"""URLs (geomcli.io._remote) against moto's S3 server on 127.0.0.1: one-file runs, batches with
URL globs and --out-dir on S3, whole-object writes (a multipart put that fails or a signal stops leaves nothing),
-n as a conditional create, --skip-existing from the listing, --storage-option, https:// to
read, file:// URLs; and on a Dask cluster."""

from __future__ import annotations

import contextlib
import functools
import http.server
import io as bytes_io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from conftest import S3, hooked
from PIL import Image

from geomcli.cli import cli
from geomcli.io import _remote

pytest.importorskip("s3fs")


def run(*args: str | Path, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args], input=stdin, catch_exceptions=False)


def png_bytes(rng: np.random.Generator, shape: tuple[int, ...] = (10, 12, 3)) -> bytes:
    buffer = bytes_io.BytesIO()
    Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
def shots(s3: S3, tmp_path: Path) -> dict[str, bytes]:
    """raw/{a,b}.png, raw/day/c.png, raw/day/night/d.png, raw/.hidden.png, raw/.cache/e.png and
    raw/notes.txt on S3, and the same tree in tmp_path/raw."""
    rng = np.random.default_rng(42)
    names = ["a.png", "b.png", "day/c.png", "day/night/d.png", ".hidden.png", ".cache/e.png"]
    found = {name: png_bytes(rng) for name in names} | {"notes.txt": b"not an image"}
    for name, data in found.items():
        s3.put(f"raw/{name}", data)
        (tmp_path / "raw" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "raw" / name).write_bytes(data)
    return found


def tree(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_the_s3_server_runs_where_s3fs_is_installed() -> None:
    """The test extra names moto[s3] and the Flask its server needs, not moto[server]: a missing
    piece would make every S3 test skip (conftest.s3_endpoint), so it fails here instead."""
    import moto.server

    assert moto.server.ThreadedMotoServer


def test_one_file_from_s3_to_s3_is_the_local_run_byte_for_byte(s3: S3, shots: dict[str, bytes],
                                                                tmp_path: Path) -> None:
    local = run("crop-pad", tmp_path / "raw" / "a.png", "-o", tmp_path / "a.png", "--shape", "6,6")
    remote = run("crop-pad", f"{s3.url}/raw/a.png", "-o", f"{s3.url}/out/a.png", "--shape", "6,6")
    assert remote.exit_code == local.exit_code == 0, remote.stderr
    assert s3.get("out/a.png") == (tmp_path / "a.png").read_bytes()
    assert remote.stderr.startswith(f"crop-pad {s3.url}/raw/a.png → {s3.url}/out/a.png: 10×12×3 uint8 → 6×6×3")


def test_a_tiff_goes_to_s3_through_memory(s3: S3, tmp_path: Path) -> None:
    import tifffile

    data = np.random.default_rng(1).integers(0, 60000, (2, 3, 8, 10), dtype=np.uint16)
    np.save(tmp_path / "t.npy", data)
    result = run("space-to-depth", tmp_path / "t.npy", "-o", f"{s3.url}/t.tiff", "--blocksize", "2")
    assert result.exit_code == 0, result.stderr
    local = run("space-to-depth", tmp_path / "t.npy", "-o", tmp_path / "t.tiff", "--blocksize", "2")
    assert local.exit_code == 0
    assert s3.get("t.tiff") == (tmp_path / "t.tiff").read_bytes()
    assert tifffile.imread(bytes_io.BytesIO(s3.get("t.tiff"))).shape == (2, 12, 4, 5)


def test_a_glob_on_s3_is_expanded_as_a_local_one_hidden_names_left_out(s3: S3, shots: dict[str, bytes],
                                                                       tmp_path: Path) -> None:
    local = run("crop-pad", f"{tmp_path}/raw/**/*.png", "--out-dir", tmp_path / "local", "--shape", "6,6", "--json")
    remote = run("crop-pad", f"{s3.url}/raw/**/*.png", "--out-dir", f"{s3.url}/out", "--shape", "6,6", "--json")
    assert remote.exit_code == local.exit_code == 0, remote.stderr
    made = tree(tmp_path / "local")
    assert sorted(made) == ["a.png", "b.png", "day/c.png", "day/night/d.png"]
    assert s3.keys() == sorted([f"raw/{name}" for name in shots] + [f"out/{name}" for name in made])
    assert {name: s3.get(f"out/{name}") for name in made} == made
    assert [json.loads(line).get("input", "").rsplit("/raw/")[-1] for line in remote.stdout.splitlines()] == \
        [json.loads(line).get("input", "").rsplit("/raw/")[-1] for line in local.stdout.splitlines()]


def test_a_listing_s_files_that_geomcli_does_not_read_are_named_in_a_warning(s3: S3, shots: dict[str, bytes],
                                                                              tmp_path: Path) -> None:
    for argument in (f"{s3.url}/raw", f"{s3.url}/raw/*"):
        result = run("crop-pad", argument, "--out-dir", tmp_path / "out", "--shape", "6,6", "--dry-run")
        assert result.exit_code == 0, result.stderr
        assert result.stderr.startswith(f"Warning: left out {s3.url}/raw/notes.txt: geomcli reads no such file (")
    result = run("crop-pad", f"{s3.url}/raw/*.png", "--out-dir", tmp_path / "out", "--shape", "6,6", "--dry-run")
    assert result.exit_code == 0 and "Warning" not in result.stderr


def test_a_glob_of_two_levels_lists_its_folders_once(s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A glob of more than one level lists its fixed folder at every depth; the folders it matches
    were then listed again, each ('s3://bkt/*/*' -r: raw/day's files a second time). They are
    now taken from that listing: one list request, the local run's files."""
    listings: list[str] = []
    listing = _remote.listing
    monkeypatch.setattr(_remote, "listing", lambda url, *args: (listings.append(url), listing(url, *args))[1])
    requests = counted_requests(monkeypatch)
    common = ["--out-dir", tmp_path / "out", "--shape", "6,6", "--dry-run"]
    for recursive in (["-r"], []):
        listings.clear()
        requests.clear()
        remote = run("crop-pad", f"{s3.url}/*/*", *recursive, *common)
        local = run("crop-pad", f"{tmp_path}/*/*", *recursive, *common)
        assert remote.exit_code == local.exit_code == 0, remote.stderr
        assert remote.stdout.replace(f"{s3.url}/", f"{tmp_path}/") == local.stdout
        assert len(remote.stdout.splitlines()) == (4 if recursive else 3)  # (raw/day named: night/ too with -r)
        # (without -r, raw/day's own files and its subfolders alone: its listing of one level)
        assert listings == [s3.url] + ([] if recursive else [f"{s3.url}/raw/day"])
        assert requests.count("list_objects_v2") == (1 if recursive else 2), requests


def test_a_folder_marker_is_a_folder_not_a_file_left_out(s3: S3, shots: dict[str, bytes]) -> None:
    """The S3 console's 'Create folder' puts an empty object named 'day/': a run over the folder
    warned 'left out s3://.../raw/day/: geomcli reads no such file', a folder as a file."""
    s3.put("raw/day/", b"")
    s3.put("raw/empty/", b"")
    for inputs in ([f"{s3.url}/raw", "-r"], [f"{s3.url}/raw/**/*"]):
        result = run("crop-pad", *inputs, "--out-dir", f"{s3.url}/out", "--shape", "6,6", "--dry-run")
        assert result.exit_code == 0, result.stderr
        assert result.stderr.startswith(f"Warning: left out {s3.url}/raw/notes.txt: geomcli reads no such file (")
        assert "raw/day/" not in result.stderr and "raw/empty/" not in result.stderr
        assert len(result.stdout.splitlines()) == 4  # a.png, b.png, day/c.png, day/night/d.png


def test_worker_processes_read_and_write_s3_and_a_dry_run_reads_headers(s3: S3, shots: dict[str, bytes],
                                                                        tmp_path: Path) -> None:
    dry = run("crop-pad", f"{s3.url}/raw", "-r", "--out-dir", f"{s3.url}/out", "--shape", "6,6", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert dry.stdout.splitlines()[0] == f"{s3.url}/raw/a.png → {s3.url}/out/a.png: 6×6×3 uint8"
    assert s3.keys() == sorted(f"raw/{name}" for name in shots)  # nothing written
    # (the workers fork from a forkserver that may have started before this test set the
    # environment: the options go with the task)
    result = run("crop-pad", f"{s3.url}/raw", "-r", "--out-dir", f"{s3.url}/out", "--shape", "6,6", "-j", "2",
                 *s3.options)
    assert result.exit_code == 0, result.stderr
    local = run("crop-pad", tmp_path / "raw", "-r", "--out-dir", tmp_path / "local", "--shape", "6,6", "-j", "2")
    assert local.exit_code == 0
    made = tree(tmp_path / "local")
    assert {key.removeprefix("out/"): s3.get(key) for key in s3.keys() if key.startswith("out/")} == made


@pytest.mark.parametrize("pattern", ["raw/*.png", "raw/*/*.png", "raw/.*.png", "raw/day/**", "raw/**/night/*",
                                     "raw/[ab].png", "raw/**"])
def test_url_globs_match_what_local_globs_match(pattern: str, s3: S3, shots: dict[str, bytes],
                                                tmp_path: Path) -> None:
    local = run("crop-pad", f"{tmp_path}/{pattern}", "--out-dir", tmp_path / "local", "--shape", "6,6")
    remote = run("crop-pad", f"{s3.url}/{pattern}", "--out-dir", f"{s3.url}/out", "--shape", "6,6")
    assert remote.exit_code == local.exit_code == 0, remote.stderr
    made = tree(tmp_path / "local")
    assert made
    assert {key.removeprefix("out/"): s3.get(key) for key in s3.keys() if key.startswith("out/")} == made


@pytest.mark.parametrize("pattern", ["raw/*", "r*/d*", "raw/[d]*", "raw/.*"])
@pytest.mark.parametrize("recursive", [["-r"], []])
def test_a_prefix_a_url_glob_matches_is_taken_as_that_folder_named(pattern: str, recursive: list[str], s3: S3,
                                                                   shots: dict[str, bytes], tmp_path: Path) -> None:
    """'s3://bkt/raw/*' -r left raw/day out, where a local glob takes a folder it matches as that
    folder named (plan._glob): walked with -r, its files under their path below it; without -r its
    own files and its subfolders named in a warning. A hidden one (.cache) is left out alike."""
    local = run("crop-pad", f"{tmp_path}/{pattern}", *recursive, "--out-dir", tmp_path / "local", "--shape", "6,6")
    remote = run("crop-pad", f"{s3.url}/{pattern}", *recursive, "--out-dir", tmp_path / "remote", "--shape", "6,6")
    assert remote.exit_code == local.exit_code == 0, remote.stderr
    made = tree(tmp_path / "local")
    assert "c.png" in made and ("night/d.png" in made) == bool(recursive) or pattern == "raw/.*"
    assert tree(tmp_path / "remote") == made
    warnings = [line for line in local.stderr.splitlines() if line.startswith("Warning:")]
    assert [line for line in remote.stderr.splitlines() if line.startswith("Warning:")] == \
        [line.replace(str(tmp_path), s3.url) for line in warnings]
    assert (f"Warning: left out the folder {tmp_path}/raw/day/night: give -r to take subfolders too" in warnings) \
        == (not recursive and pattern != "raw/.*")


@pytest.mark.parametrize("recursive", [["-r"], []])
def test_a_url_glob_ending_in_a_slash_has_no_file_as_a_local_one(recursive: list[str], s3: S3,
                                                                   shots: dict[str, bytes], tmp_path: Path) -> None:
    """'crop-pad "s3://bkt/raw/*/" --out-dir o' did raw/a.png and raw/b.png, files the pattern
    does not match (its empty last name was dropped), and with -r raw/day's too, where the same
    local pattern names folders only and has no file (_glob): a usage error, nothing written."""
    local = run("crop-pad", f"{tmp_path}/raw/*/", *recursive, "--out-dir", tmp_path / "local", "--shape", "6,6")
    remote = run("crop-pad", f"{s3.url}/raw/*/", *recursive, "--out-dir", tmp_path / "remote", "--shape", "6,6")
    assert local.exit_code == remote.exit_code == 2
    assert remote.stderr.replace(s3.url, str(tmp_path)) == local.stderr
    assert not (tmp_path / "remote").exists()


def test_a_folder_url_is_its_files_and_r_its_subfolders(s3: S3, shots: dict[str, bytes], tmp_path: Path) -> None:
    top = run("crop-pad", f"{s3.url}/raw", "--out-dir", tmp_path / "top", "--shape", "6,6")
    assert top.exit_code == 0
    assert sorted(tree(tmp_path / "top")) == ["a.png", "b.png"]
    # its subfolders named, as a local folder's (not .cache, hidden)
    assert f"Warning: left out the folder {s3.url}/raw/day: give -r to take subfolders too\n" in top.stderr
    assert ".cache" not in top.stderr
    assert run("crop-pad", f"{s3.url}/raw/", "-r", "--out-dir", tmp_path / "all", "--shape", "6,6").exit_code == 0
    assert sorted(tree(tmp_path / "all")) == ["a.png", "b.png", "day/c.png", "day/night/d.png"]


def test_local_inputs_to_an_s3_folder_and_files_from_a_list_on_s3(s3: S3, shots: dict[str, bytes],
                                                                  tmp_path: Path) -> None:
    s3.put("list.txt", f"{tmp_path / 'raw' / 'b.png'}\n{s3.url}/raw/day/c.png\n".encode())
    result = run("crop-pad", tmp_path / "raw" / "a.png", "--files-from", f"{s3.url}/list.txt",
                 "--out-dir", f"{s3.url}/out/", "--shape", "6,6")
    assert result.exit_code == 0, result.stderr
    assert [key for key in s3.keys() if key.startswith("out/")] == ["out/a.png", "out/b.png", "out/c.png"]


def test_a_list_on_s3_past_its_limit_names_the_list_limit(s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """It told a list of names to raise --max-pixels, which bounds no list."""
    from geomcli.engine import plan

    monkeypatch.setattr(plan, "LIST_BYTES", 16)
    s3.put("list.txt", f"{tmp_path / 'raw' / 'b.png'}\n".encode())
    result = run("crop-pad", "--files-from", f"{s3.url}/list.txt", "--out-dir", tmp_path / "out", "--shape", "6,6")
    assert result.exit_code == 2
    assert "more than 16, more than a list of names may hold" in result.stderr and "max-pixels" not in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["{url}/raw/a.png", "{url}/raw/*.png"], "would replace the input"),  # the --out-dir is raw
    (["{url}/raw/*.png", "{url}/raw/day/*.png", "--name", "x.png"], "would both be written to"),
])
def test_the_plan_refuses_on_s3_what_it_refuses_on_disk(args: list[str], message: str, s3: S3,
                                                        shots: dict[str, bytes]) -> None:
    arguments = [arg.format(url=s3.url) for arg in args]
    result = run("crop-pad", *arguments[:1], "--out-dir", f"{s3.url}/raw" if "replace" in message else
                 f"{s3.url}/out", *arguments[1:], "--shape", "6,6")
    assert result.exit_code == 2
    assert message in result.stderr
    assert not any(key.startswith("out/") for key in s3.keys())
    assert s3.get("raw/a.png") == shots["a.png"]


@pytest.mark.parametrize("arguments", [["{url}/raw", "-r"], ["{url}/raw/**/*.png"], ["{url}/raw/*/*.png"]])
def test_an_out_dir_inside_a_walked_folder_on_s3_is_left_out(arguments: list[str], s3: S3,
                                                             shots: dict[str, bytes]) -> None:
    args = [arg.format(url=s3.url) for arg in arguments]
    for again in ([], ["--skip-existing"], []):  # the first run's outputs are not the next one's inputs
        result = run("crop-pad", *args, "--out-dir", f"{s3.url}/raw/out/", "--shape", "6,6", *again)
        assert result.exit_code == 0, result.stderr
    made = sorted(key for key in s3.keys() if key.startswith("raw/out/"))
    assert made == (["raw/out/day/c.png"] if args[0].endswith("/raw/*/*.png") else
                    ["raw/out/a.png", "raw/out/b.png", "raw/out/day/c.png", "raw/out/day/night/d.png"])
    result = run("crop-pad", f"{s3.url}/raw/out/**/*.png", "--out-dir", f"{s3.url}/raw/out", "--shape", "6,6")
    assert result.exit_code == 2 and f"Error: {s3.url}/raw/out/" in result.stderr  # named, it is an input


def test_missing_and_corrupt_objects_fail_alone(s3: S3, shots: dict[str, bytes]) -> None:
    s3.put("raw/broken.png", shots["a.png"][:60])
    result = run("crop-pad", f"{s3.url}/raw/a.png", f"{s3.url}/raw/gone.png", f"{s3.url}/raw/broken.png",
                 "--out-dir", f"{s3.url}/out", "--shape", "6,6")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[:2] == [f"Error: {s3.url}/raw/gone.png: no such file",
                                              f"Error: {s3.url}/raw/broken.png: not a readable PNG (truncated)"]
    assert [key for key in s3.keys() if key.startswith("out/")] == ["out/a.png"]
    # a name of no extension that names nothing, in a bucket or none: its own failure, not --name's usage error
    for gone in (f"{s3.url}/nodir", "s3://nobucket-here/dir"):
        result = run("crop-pad", gone, f"{s3.url}/raw/a.png", "--out-dir", f"{s3.url}/out2", "--shape", "6,6")
        assert result.exit_code == 1, result.stderr
        assert result.stderr.splitlines()[0] == f"Error: {gone}: no such file"
        assert f"{s3.url}/out2/a.png".removeprefix(f"{s3.url}/") in s3.keys()


def test_no_clobber_skips_an_object_there_and_creates_on_condition(s3: S3, shots: dict[str, bytes]) -> None:
    from geomcli.io import _atomic

    s3.put("out/a.png", b"mine")
    result = run("crop-pad", f"{s3.url}/raw/*.png", "--out-dir", f"{s3.url}/out", "--shape", "6,6", "-n")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("crop-pad: 1 ok, 0 failed, 1 skipped in ")
    assert s3.get("out/a.png") == b"mine"
    # an object made after the plan looked: the put is a conditional create, and fails as such
    with _atomic.no_replace(), pytest.raises(_atomic.OutputExistsError, match="out/b.png: a file appeared"):
        _remote.write_bytes(f"{s3.url}/out/b.png", b"late", f"{s3.url}/out/b.png")
    assert s3.get("out/b.png") != b"late"


def test_skip_existing_judges_by_the_listings_modified_times(s3: S3, shots: dict[str, bytes]) -> None:
    import time

    args = ["crop-pad", f"{s3.url}/raw/*.png", "--out-dir", f"{s3.url}/out", "--shape", "6,6", "--skip-existing"]
    assert run(*args).stderr.startswith("crop-pad: 2 ok, 0 failed, 0 skipped in ")
    assert run(*args).stderr.startswith("crop-pad: 0 ok, 0 failed, 2 skipped in ")
    time.sleep(1.1)  # S3 keeps modified times to the second
    s3.put("raw/b.png", shots["a.png"])  # b changed since its output was made
    assert run(*args).stderr.startswith("crop-pad: 1 ok, 0 failed, 1 skipped in ")
    assert s3.get("out/b.png") == s3.get("out/a.png")


def test_a_batch_readies_its_filesystem_once_not_for_every_url(s3: S3, shots: dict[str, bytes],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The options' check and s3fs's connect cost 0.28 ms a call, and a batch asks for the
    filesystem about 7 times a file (1,800 objects: 12,605 times, half its planning)."""
    import s3fs

    readied: list[str] = []
    check_flags, connect = _remote._check_flags, s3fs.S3FileSystem.connect
    monkeypatch.setattr(_remote, "_check_flags", lambda cls: (readied.append("checked"), check_flags(cls))[1])
    monkeypatch.setattr(s3fs.S3FileSystem, "connect",
                        lambda self, *args, **kwargs: (readied.append("connected"), connect(self, *args, **kwargs))[1])
    monkeypatch.setattr(_remote, "_ready", {}, raising=False)  # as in a new process
    result = run("crop-pad", f"{s3.url}/raw/**/*.png", "--out-dir", f"{s3.url}/out", "--shape", "6,6", "-j", "1")
    assert result.stderr.startswith("crop-pad: 4 ok, 0 failed, 0 skipped in "), result.stderr
    assert readied == ["checked", "connected"]


def counted_requests(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The S3 requests this process makes from now on, by method name (and the range of a ranged
    read: "get_object bytes=0-65535"), in order."""
    import s3fs

    requests: list[str] = []
    real = s3fs.S3FileSystem._call_s3

    async def counted(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        requests.append(f"{method} {kwargs['Range']}" if "Range" in kwargs else method)
        return await real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", counted)
    return requests


def test_a_batchs_reads_take_the_size_the_listing_told(s3: S3, shots: dict[str, bytes],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker process has not listed the inputs: asking each one's size (a HEAD) was 1 request
    of every 4 of a -j 2 run from S3 to S3. The cache is dropped after the plan here, as a worker has none.
    (No object is kept from the check here: the run reads each.)"""
    from geomcli.engine import workers

    monkeypatch.setattr(_remote, "KEPT_BYTES", 0)
    option_faults = workers.option_faults
    methods = counted_requests(monkeypatch)

    def then_forget(*args: Any) -> Any:
        found = option_faults(*args)
        _remote.filesystem(s3.url)[0].invalidate_cache()
        methods.clear()  # the run's requests alone
        return found

    monkeypatch.setattr(workers, "option_faults", then_forget)
    result = run("crop-pad", f"{s3.url}/raw/**/*.png", "--out-dir", f"{s3.url}/out", "--shape", "6,6", "-j", "1")
    assert result.stderr.startswith("crop-pad: 4 ok, 0 failed, 0 skipped in "), result.stderr
    assert sorted(methods) == ["get_object"] * 4 + ["put_object"] * 4


def test_a_batchs_header_check_takes_the_size_the_listing_told(s3: S3, shots: dict[str, bytes],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Past 2000 inputs the Dask workers check the headers, and a worker has not listed them:
    each header cost a HEAD before its read (2,505 HEADs for 2,505 JPEGs on S3). The cache is
    dropped before the check here, as a worker has none."""
    from geomcli.engine import workers

    option_faults = workers.option_faults
    methods = counted_requests(monkeypatch)

    def forgotten(*args: Any) -> Any:
        _remote.filesystem(s3.url)[0].invalidate_cache()
        methods.clear()
        found = option_faults(*args)
        checked.extend(methods)
        return found

    checked: list[str] = []
    monkeypatch.setattr(workers, "option_faults", forgotten)
    result = run("crop-pad", f"{s3.url}/raw/**/*.png", "--out-dir", f"{s3.url}/out", "--shape", "6,6", "-j", "1")
    assert result.stderr.startswith("crop-pad: 4 ok, 0 failed, 0 skipped in "), result.stderr
    assert checked == ["get_object"] * 4  # each header read whole (they are small), unasked its size


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_batch_reads_a_small_object_once_for_its_header_and_its_run(jobs: str, s3: S3, shots: dict[str, bytes],
                                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """The check of every header before anything is written read each object under 64 KiB whole,
    and its run then read it again: 2 GETs of each. The check's bytes now go to the run with its
    job (in a worker process too), within KEPT_BYTES in all; past them an object is read again."""
    def served() -> list[str]:
        """The objects the server was asked for (GET), by its log: a worker process's requests too."""
        asked = [record.getMessage().split('"GET /')[1].split()[0] for record in caplog.records
                 if '"GET /' in record.getMessage()]
        return sorted(path.split("/", 1)[1] for path in asked if "?" not in path)

    caplog.set_level("INFO", logger="werkzeug")
    requests = counted_requests(monkeypatch)
    result = run("crop-pad", f"{s3.url}/raw/**/*.png", "--out-dir", tmp_path / "out", "--shape", "6,6", "-j", jobs)
    assert result.stderr.startswith("crop-pad: 4 ok, 0 failed, 0 skipped in "), result.stderr
    assert served() == ["raw/a.png", "raw/b.png", "raw/day/c.png", "raw/day/night/d.png"]
    local = run("crop-pad", tmp_path / "raw", "-r", "--out-dir", tmp_path / "local", "--shape", "6,6", "-j", jobs)
    assert local.exit_code == 0
    assert tree(tmp_path / "out") == {name: data for name, data in tree(tmp_path / "local").items()
                                      if not name.startswith(".")}
    requests.clear()
    caplog.clear()
    monkeypatch.setattr(_remote, "KEPT_BYTES", len(shots["a.png"]) + 1)  # room for one
    result = run("crop-pad", f"{s3.url}/raw/**/*.png", "--out-dir", tmp_path / "again", "--shape", "6,6", "-j", "1")
    assert result.stderr.startswith("crop-pad: 4 ok, 0 failed, 0 skipped in "), result.stderr
    assert sorted(request for request in requests if request.startswith("get_object")) == ["get_object"] * 7
    assert len(served()) == 7
    assert tree(tmp_path / "again") == tree(tmp_path / "out")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_batch_reads_a_big_tiffs_header_by_ranges_and_the_object_once(jobs: str, s3: S3, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    """The check of a TIFF's header read the whole object, then its run read it again: a batch of
    2 MB TIFFs moved 4 MB each (a dry run 2 MB). The header is now read from the object's first
    64 KiB and the ranges tifffile seeks to (a stack's second page's IFD, past the first's pixels),
    so its run alone reads it whole; a dry run reads the ranges alone (its metadata from the same)."""
    import tifffile

    rng = np.random.default_rng(7)
    made = {"one.tif": (1024, 2048), "stack.tif": (2, 1024, 1024)}  # (2 MiB of pixels each)
    (tmp_path / "raw").mkdir()
    for name, shape in made.items():
        tifffile.imwrite(tmp_path / "raw" / name, rng.integers(0, 256, shape, dtype=np.uint8))
        s3.put(f"raw/{name}", (tmp_path / "raw" / name).read_bytes())
    stack_size = (tmp_path / "raw" / "stack.tif").stat().st_size
    with tifffile.TiffFile(tmp_path / "raw" / "stack.tif") as stack:
        stack_ifd = stack.pages[1].offset
    assert stack_ifd > 1 << 20  # (past the first range)

    def whole_reads() -> list[str]:
        """The objects the server sent whole (GET, 200, not a range's 206), by its log: a worker process's too."""
        said = [record.getMessage() for record in caplog.records if '"GET /' in record.getMessage()]
        return sorted(line.split('"GET /')[1].split()[0].split("/", 1)[1] for line in said
                      if '" 200 ' in line.replace("\x1b[0m", "") and "?" not in line)

    caplog.set_level("INFO", logger="werkzeug")
    requests = counted_requests(monkeypatch)  # (this process's: the header check, each range's)
    for dry in ([], ["--dry-run"]):
        requests.clear()
        caplog.clear()
        # (the keys as options: a forkserver an earlier test started has that test's environment)
        result = run("crop-pad", f"{s3.url}/raw/*.tif", "--out-dir", tmp_path / "out", "--name", "{stem}.npy",
                     "--shape", "8,8", "-j", jobs, *dry, "--storage-option", "key=testing", "--storage-option",
                     "secret=testing", "--storage-option", f"endpoint_url={s3.endpoint}")
        assert result.exit_code == 0, result.stderr
        assert "head_object" not in requests  # (the listing told the sizes)
        assert whole_reads() == ([] if dry else ["raw/one.tif", "raw/stack.tif"])
        ranges = sorted(request.split("=")[1] for request in requests if request.startswith("get_object bytes="))
        # the stack's second IFD, near its end: its range ends with the object
        assert ranges == sorted(["0-65535", "0-65535", f"{stack_ifd}-{min(stack_ifd + 65535, stack_size - 1)}"])
        first_last = [tuple(map(int, span.split("-"))) for span in ranges]
        assert sum(last + 1 - first for first, last in first_last) <= 2 * 100_000  # (of 4 MB)
    local = run("crop-pad", tmp_path / "raw", "--out-dir", tmp_path / "local", "--name", "{stem}.npy", "--shape", "8,8")
    assert local.exit_code == 0
    assert tree(tmp_path / "out") == tree(tmp_path / "local") and len(tree(tmp_path / "out")) == 2


def test_a_tiff_whose_ifds_are_far_apart_is_read_by_a_few_ranges_then_whole(s3: S3, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A TIFF's header at a URL is read by ranges where its reader seeks; pages of other shapes, each
    IFD by its pixels, would take a range each: past RANGED_READS the rest is read whole, one request
    more, and the header is the local file's. A damaged one read by ranges is read again whole and
    refused as the local file is."""
    import tifffile

    from geomcli import io
    from geomcli.errors import GeomError

    rng = np.random.default_rng(3)
    with tifffile.TiffWriter(tmp_path / "pages.tif") as writer:
        for page in range(12):  # (90 KB a page: each IFD past the range before)
            writer.write(rng.integers(0, 256, (300, 300 + page), dtype=np.uint8))
    s3.put("pages.tif", (tmp_path / "pages.tif").read_bytes())
    requests = counted_requests(monkeypatch)
    assert io.read_header(f"{s3.url}/pages.tif", page=11) == \
        io.read_header(str(tmp_path / "pages.tif"), page=11)._replace(file_size=(tmp_path / "pages.tif").stat().st_size)
    ranged = [request for request in requests if request.startswith("get_object bytes=")]
    assert len(ranged) == 1 + _remote.RANGED_READS and requests.count("get_object") == 1, requests
    # the rest is read whole within the limit a whole read has: not a 50 GB stack into memory
    from geomcli.io import _stream

    with monkeypatch.context() as patched, \
            pytest.raises(GeomError, match=rf"^{s3.url}/pages.tif: \d+ bytes, more than 500000, more than the "):
        patched.setattr(_stream, "byte_limit", lambda max_pixels: 500_000)
        io.read_header(f"{s3.url}/pages.tif", page=11)

    cut = bytearray((tmp_path / "pages.tif").read_bytes())
    with tifffile.TiffFile(tmp_path / "pages.tif") as tif:
        second = tif.pages[1].offset
    cut[second : second + 2] = b"\xff\xff"  # a count of tags past any IFD's
    (tmp_path / "cut.tif").write_bytes(cut)
    s3.put("cut.tif", bytes(cut))
    with pytest.raises(GeomError) as local:
        io.read_header(str(tmp_path / "cut.tif"))
    with pytest.raises(GeomError, match="not a readable TIFF") as remote:
        io.read_header(f"{s3.url}/cut.tif")
    assert str(remote.value) == str(local.value).replace(str(tmp_path), s3.url)


def gets_by_key(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[str, int]]]:
    """The GETs this process makes from now on, by key: each one's range ("" for the whole
    object) and the bytes it moved."""
    import s3fs

    found: dict[str, list[tuple[str, int]]] = {}
    real = s3fs.S3FileSystem._call_s3

    async def counted(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        answer = await real(self, method, *args, **kwargs)
        if method == "get_object":
            found.setdefault(kwargs["Key"], []).append((kwargs.get("Range", ""), int(answer["ContentLength"])))
        return answer

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", counted)
    return found


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_tiff_the_check_read_whole_is_read_whole_once(jobs: str, s3: S3, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """A TIFF whose header the check read whole was read whole again: one of pages of other shapes
    (its IFDs past RANGED_READS ranges) by its run, 2.2 MB moved for 1.1; a damaged one (its second
    IFD's count of tags 0xFFFF) by the check a second time, where the ranges had read it as
    damaged, then by its run, to fail it so: 3.3 MB. Its whole read is now the check's alone (the
    ranges' whole read shared within the check, the bytes carried to the run); a damaged one fails
    at the check, in the line its run gave."""
    import tifffile

    rng = np.random.default_rng(3)
    (tmp_path / "raw").mkdir()
    with tifffile.TiffWriter(tmp_path / "raw" / "pages.tif") as writer:
        for page in range(12):  # (90 KB a page: each IFD past the range before)
            writer.write(rng.integers(0, 256, (300, 300 + page), dtype=np.uint8))
    data = (tmp_path / "raw" / "pages.tif").read_bytes()
    with tifffile.TiffFile(tmp_path / "raw" / "pages.tif") as tif:
        second = tif.pages[1].offset
    (tmp_path / "raw" / "cut.tif").write_bytes(data[:second] + b"\xff\xff" + data[second + 2:])
    for name in ("pages.tif", "cut.tif"):
        s3.put(f"raw/{name}", (tmp_path / "raw" / name).read_bytes())
    gets = gets_by_key(monkeypatch)  # (this process's: with -j 2 the check's alone)
    caplog.set_level("INFO", logger="werkzeug")
    for name, page in [("pages.tif", ["--page", "11"]), ("cut.tif", [])]:
        common = ["--name", "{stem}.npy", "--shape", "8,8", *page, "-j", jobs]
        result = run("crop-pad", f"{s3.url}/raw/{name}", "--out-dir", tmp_path / "out",
                     *common, *s3.options)
        local = run("crop-pad", tmp_path / "raw" / name, "--out-dir", tmp_path / "local", *common)
        assert result.exit_code == local.exit_code, result.stderr
        assert result.stderr.replace(s3.url, str(tmp_path)).split("crop-pad:")[0] == local.stderr.split("crop-pad:")[0]
    assert result.stderr.startswith(f"Error: {s3.url}/raw/cut.tif: not a readable TIFF (tifffile: corrupted tag list")
    assert tree(tmp_path / "out") == tree(tmp_path / "local") and list(tree(tmp_path / "out")) == ["pages.npy"]
    wholes = sorted(line.split('"GET /')[1].split()[0].split("/", 1)[1] for record in caplog.records
                    if '"GET /' in (line := record.getMessage()) and '" 200 ' in line.replace("\x1b[0m", "")
                    and "?" not in line)
    assert wholes == ["raw/cut.tif", "raw/pages.tif"]  # (by the server's log: a worker process's reads too)
    assert [size for span, size in gets["raw/cut.tif"] if not span] == [len(data)]
    assert [size for span, size in gets["raw/pages.tif"] if not span] == [len(data)]
    assert len(gets["raw/pages.tif"]) == 2 + _remote.RANGED_READS and len(gets["raw/cut.tif"]) == 3
    assert sum(size for span, size in gets["raw/cut.tif"] if span) <= 2 * _remote.RANGE_BYTES


@pytest.mark.cluster
def test_a_batch_on_dask_reads_a_small_object_once_for_its_header_and_its_run(
        s3: S3, shots: dict[str, bytes], scheduler: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """--scheduler read each object under 64 KiB twice: here for its header, then on a worker.
    Its bytes now go with its task, a few MiB a task at most (CARRIED_BYTES; Dask warned of a big
    graph where a task carried all of them): here each task carries one."""
    from geomcli.engine import cluster

    def served() -> list[str]:
        asked = [record.getMessage().split('"GET /')[1].split()[0] for record in caplog.records
                 if '"GET /' in record.getMessage()]
        return sorted(path.split("/", 1)[1] for path in asked if "?" not in path)

    sent: list[int] = []
    real_submit = cluster._Dispatch._submit

    def submit(self: Any, batch: list[Any], after_death: bool) -> None:
        sent.append(sum(len(job.data or b"") for job in batch))
        real_submit(self, batch, after_death)

    monkeypatch.setattr(cluster._Dispatch, "_submit", submit)
    monkeypatch.setattr(cluster, "CARRIED_BYTES", max(map(len, shots.values())))
    caplog.set_level("INFO", logger="werkzeug")
    result = run("crop-pad", f"{s3.url}/raw/**/*.png", "--out-dir", tmp_path / "out", "--shape", "6,6",
                 "--scheduler", scheduler, *s3.options)
    assert result.stderr.startswith("crop-pad: 4 ok, 0 failed, 0 skipped in "), result.stderr
    assert served() == ["raw/a.png", "raw/b.png", "raw/day/c.png", "raw/day/night/d.png"]
    assert sorted(sent) == sorted(len(shots[name]) for name in ["a.png", "b.png", "day/c.png", "day/night/d.png"])
    local = run("crop-pad", tmp_path / "raw", "-r", "--out-dir", tmp_path / "local", "--shape", "6,6")
    assert local.exit_code == 0
    assert tree(tmp_path / "out") == {name: data for name, data in tree(tmp_path / "local").items()
                                      if not name.startswith(".")}


@pytest.mark.cluster
def test_a_batch_on_dask_whose_workers_check_the_headers_reads_a_small_object_once(
        s3: S3, shots: dict[str, bytes], scheduler: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Past HEADERS_HERE inputs the workers check the headers, and kept no bytes: each object under
    64 KiB was read twice, by its check and by its run. A check's task now sends them back with its
    faults (CARRIED_BYTES a task), KEPT_BYTES in all, and their runs take them; past that an object
    is read again."""
    from geomcli.engine import cluster

    def served() -> list[str]:
        asked = [record.getMessage().split('"GET /')[1].split()[0] for record in caplog.records
                 if '"GET /' in record.getMessage()]
        return sorted(path.split("/", 1)[1] for path in asked if "?" not in path)

    monkeypatch.setattr(cluster, "HEADERS_HERE", 0)
    caplog.set_level("INFO", logger="werkzeug")
    result = run("crop-pad", f"{s3.url}/raw/**/*.png", "--out-dir", tmp_path / "out", "--shape", "6,6",
                 "--scheduler", scheduler, *s3.options)
    assert result.stderr.startswith("crop-pad: 4 ok, 0 failed, 0 skipped in "), result.stderr
    assert served() == ["raw/a.png", "raw/b.png", "raw/day/c.png", "raw/day/night/d.png"]
    local = run("crop-pad", tmp_path / "raw", "-r", "--out-dir", tmp_path / "local", "--shape", "6,6")
    assert local.exit_code == 0
    assert tree(tmp_path / "out") == {name: data for name, data in tree(tmp_path / "local").items()
                                      if not name.startswith(".")}
    caplog.clear()
    monkeypatch.setattr(_remote, "KEPT_BYTES", max(map(len, shots.values())) + 1)  # room for one
    result = run("crop-pad", f"{s3.url}/raw/**/*.png", "--out-dir", tmp_path / "again", "--shape", "6,6",
                 "--scheduler", scheduler, *s3.options)
    assert result.stderr.startswith("crop-pad: 4 ok, 0 failed, 0 skipped in "), result.stderr
    assert len(served()) == 7
    assert tree(tmp_path / "again") == tree(tmp_path / "out")


def refused_inputs(s3: S3, tmp_path: Path) -> None:
    """raw/{a,b,c}.png of 10x12, raw/odd.png of 10x11 (no blocksize 2) and raw/cut.png (its header
    cut short) on S3, and the same files in tmp_path/raw."""
    rng = np.random.default_rng(11)
    found = {name: png_bytes(rng) for name in ("a.png", "b.png", "c.png")}
    found |= {"odd.png": png_bytes(rng, (10, 11, 3)), "cut.png": png_bytes(rng)[:30]}
    (tmp_path / "raw").mkdir()
    for name, data in found.items():
        s3.put(f"raw/{name}", data)
        (tmp_path / "raw" / name).write_bytes(data)


def test_a_batch_refused_for_its_options_reads_each_header_once(s3: S3, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A run refused for its options read every header again to find those that could not be
    read, after its check had read them all: each object's GET twice. The check now says which
    it could not read; the error lines are as before, the local run's. With --json, the faulted
    file's record (its dry run's) read its header a second time: it is now made from the check's."""
    refused_inputs(s3, tmp_path)
    gets = gets_by_key(monkeypatch)
    common = ["--out-dir", tmp_path / "out", "--name", "{stem}.npy", "--blocksize", "2"]
    for json_records in ([], ["--json"]):
        gets.clear()
        result = run("space-to-depth", f"{s3.url}/raw", *common, *json_records)
        local = run("space-to-depth", tmp_path / "raw", *common, *json_records)
        assert result.exit_code == local.exit_code == 2
        assert result.stderr.replace(s3.url, str(tmp_path)) == local.stderr
        assert result.stdout.count('"status": "error"') == local.stdout.count('"status": "error"') == \
            (2 if json_records else 0)
        assert "odd.png: space_to_depth: width 11 is not divisible by blocksize 2" in result.stderr
        assert {key: len(made) for key, made in gets.items()} == {
            f"raw/{name}": 1 for name in ("a.png", "b.png", "c.png", "odd.png", "cut.png")}
        if json_records:  # (the faulted file's record, from the header its check read)
            odd = [json.loads(line) for line in result.stdout.splitlines() if "odd.png" in line]
            assert [(record["input_shape"], record["input_dtype"]) for record in odd] == [([10, 11, 3], "uint8")]
            assert result.stdout.replace(s3.url, str(tmp_path)).splitlines()[:2] == local.stdout.splitlines()[:2]
    assert not (tmp_path / "out").exists()


@pytest.mark.cluster
def test_a_batch_on_dask_refused_for_its_options_reads_no_header_here_its_workers_read(
        s3: S3, scheduler: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past HEADERS_HERE inputs the workers check the headers; a run they refused for its options
    then read every other header again here, to find those that could not be read: 2,000 round
    trips and more before its error lines. The workers' check now says which it could not read,
    and sends back the headers at fault (--json made their records here from a second read)."""
    from geomcli.engine import cluster

    refused_inputs(s3, tmp_path)
    monkeypatch.setattr(cluster, "HEADERS_HERE", 2)
    gets = gets_by_key(monkeypatch)  # (this process's alone: the workers' reads are theirs)
    common = ["--out-dir", tmp_path / "out", "--name", "{stem}.npy", "--blocksize", "2"]
    for json_records in ([], ["--json"]):
        result = run("space-to-depth", f"{s3.url}/raw", *common, *json_records, "--scheduler", scheduler,
                     *s3.options)
        local = run("space-to-depth", tmp_path / "raw", *common, *json_records)
        assert result.exit_code == local.exit_code == 2
        assert result.stderr.replace(s3.url, str(tmp_path)) == local.stderr
        assert "odd.png: space_to_depth: width 11 is not divisible by blocksize 2" in result.stderr
        assert result.stdout.replace(s3.url, str(tmp_path)).splitlines()[:2] == local.stdout.splitlines()[:2]
        assert gets == {}
    assert not (tmp_path / "out").exists()


def test_each_check_of_headers_keeps_its_own_small_reads() -> None:
    """A cluster worker of several threads checks several tasks' headers at once: with one store
    of kept bytes for the process, the first check to end dropped the others' bytes and stopped
    them keeping (their objects read twice). Each keeping_small_reads keeps its own, within its limit."""
    fs, _ = _remote.filesystem("s3://bucket/a.png")
    first_kept, second_done = threading.Event(), threading.Event()
    taken: list[bytes | None] = []

    def first() -> None:
        with _remote.keeping_small_reads():
            _remote._keep(fs, "bucket/a.png", b"a")
            first_kept.set()
            second_done.wait(10)
            taken.extend([_remote.take_kept("s3://bucket/a.png"), _remote.take_kept("s3://bucket/b.png")])
            _remote._keep(fs, "bucket/c.png", b"c")
            taken.append(_remote.take_kept("s3://bucket/c.png"))

    def second() -> None:
        first_kept.wait(10)
        with _remote.keeping_small_reads(1):
            _remote._keep(fs, "bucket/b.png", b"bb")  # (past its limit of 1 byte)
            _remote._keep(fs, "bucket/d.png", b"d")
            taken.extend([_remote.take_kept("s3://bucket/a.png"), _remote.take_kept("s3://bucket/b.png"),
                          _remote.take_kept("s3://bucket/d.png")])
        second_done.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert taken == [None, None, b"d", b"a", None, b"c"]
    assert _remote.take_kept("s3://bucket/c.png") is None  # (none kept outside)


def test_names_from_files_from_are_each_asked_once(s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A name given alone (--files-from, or an argument) was listed to tell a folder from a file,
    then its size asked (a HEAD) by the header check and again by the read: 5 requests an input
    where 3 do. One HEAD now tells the file, its size and its modified time (--skip-existing);
    a small object's one GET is its header check's and its run's."""
    (tmp_path / "list.txt").write_text(f"{s3.url}/raw/a.png\n{s3.url}/raw/day/c.png\n")
    methods = counted_requests(monkeypatch)
    args = ["crop-pad", "--files-from", tmp_path / "list.txt", "--out-dir", f"{s3.url}/out", "--shape", "6,6"]
    result = run(*args, "-j", "1")
    assert result.stderr.startswith("crop-pad: 2 ok, 0 failed, 0 skipped in "), result.stderr
    assert sorted(methods) == ["get_object"] * 2 + ["head_object"] * 2 + ["put_object"] * 2
    assert [key for key in s3.keys() if key.startswith("out/")] == ["out/a.png", "out/c.png"]
    methods.clear()
    result = run(*args, "-j", "1", "--skip-existing")
    assert result.stderr.startswith("crop-pad: 0 ok, 0 failed, 2 skipped in "), result.stderr
    assert sorted(methods) == ["head_object"] * 2 + ["list_objects_v2"]  # the output folder's one listing


def test_names_from_files_from_are_asked_side_by_side_and_taken_in_order(s3: S3, shots: dict[str, bytes],
                                                                          tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Names on object storage given alone were asked of the store one after another: a
    --files-from of 2,505 took 43 s of a local S3 server before anything was read. They are now
    asked together, as headers are; files, a folder and a missing name are taken in their order."""
    import time

    real, asking, most = _remote.named, [0], [0]
    lock = threading.Lock()

    def slow(url: str) -> Any:
        with lock:
            asking[0] += 1
            most[0] = max(most[0], asking[0])
        try:
            time.sleep(0.2)
            return real(url)
        finally:
            with lock:
                asking[0] -= 1

    monkeypatch.setattr(_remote, "named", slow)
    names = ["raw/b.png", "raw/gone.png", "raw/day", "raw/a.png"]
    (tmp_path / "list.txt").write_text("".join(f"{s3.url}/{name}\n" for name in names))
    result = run("crop-pad", "--files-from", tmp_path / "list.txt", "--out-dir", tmp_path / "out", "--shape", "6,6",
                 "-j", "1", "--json")
    assert result.exit_code == 1
    records = [json.loads(line) for line in result.stdout.splitlines()][:-1]
    assert [(record["input"], record["status"]) for record in records] == [
        (f"{s3.url}/raw/b.png", "ok"), (f"{s3.url}/raw/gone.png", "error"), (f"{s3.url}/raw/day/c.png", "ok"),
        (f"{s3.url}/raw/a.png", "ok")]
    assert most[0] == len(names)


def test_a_multipart_write_that_fails_halfway_leaves_no_object(s3: S3, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import s3fs

    np.save(tmp_path / "big.npy", np.arange(3 << 20, dtype=np.float32))  # 12 MiB
    monkeypatch.setattr(_remote, "MULTIPART_BYTES", 10 << 20)  # parts of 5 MiB, S3's least
    calls: list[str] = []
    real = s3fs.S3FileSystem._call_s3

    async def failing(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(method)
        if method == "upload_part" and calls.count("upload_part") == 2:
            raise ConnectionResetError(104, "Connection reset by peer")
        return await real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", failing)
    result = run("crop-pad", tmp_path / "big.npy", "-o", f"{s3.url}/big.npy", "--shape", "3145000")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {s3.url}/big.npy: cannot write (")
    assert "create_multipart_upload" in calls and "abort_multipart_upload" in calls
    assert s3.keys() == []
    assert s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []
    # and without the failure the same write is whole
    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", real)
    assert run("crop-pad", tmp_path / "big.npy", "-o", f"{s3.url}/big.npy", "--shape", "3145000").exit_code == 0
    expected = np.arange(3 << 20, dtype=np.float32)[364:364 + 3145000]  # the centre window
    assert np.array_equal(np.load(bytes_io.BytesIO(s3.get("big.npy"))), expected)


# a run whose parts upload until a signal stops it: MULTIPART_BYTES at S3's least, each part slow
_SLOW_UPLOAD = """
import asyncio, s3fs, sys
from geomcli.io import _remote
_remote.MULTIPART_BYTES = 10 << 20
real = s3fs.S3FileSystem._call_s3
async def slow(self, method, *args, **kwargs):
    if method == "upload_part":
        await asyncio.sleep(60)
    return await real(self, method, *args, **kwargs)
s3fs.S3FileSystem._call_s3 = slow
sys.argv[0] = "geomcli"
from geomcli.__main__ import main
main()
"""


@pytest.mark.parametrize(("signal_name", "code", "message"), [("SIGTERM", 143, ""), ("SIGINT", -2, "Interrupted\n")])
def test_a_signal_during_a_multipart_upload_aborts_it(signal_name: str, code: int, message: str, s3: S3,
                                                      tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    np.save(tmp_path / "big.npy", np.arange(3 << 20, dtype=np.float32))  # 12 MiB: three parts
    run = subprocess.Popen([sys.executable, "-c", _SLOW_UPLOAD, "crop-pad", str(tmp_path / "big.npy"), "-o",
                            f"{s3.url}/big.npy", "--shape", "3145000"], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads"):
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.02)
    run.send_signal(getattr(signal, signal_name))
    stderr = run.communicate(timeout=30)[1]
    assert (run.returncode, stderr) == (code, message)
    assert s3.keys() == []
    assert s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []


# Loaded by the runs' interpreters (sitecustomize on PYTHONPATH): parts of 5 MiB, and a worker
# process killed as its first part goes up, its multipart upload made (the OOM killer's SIGKILL)
_KILLED_MID_UPLOAD = """
import multiprocessing, os, signal
import s3fs
from geomcli.io import _remote
_remote.MULTIPART_BYTES = 10 << 20
real = s3fs.S3FileSystem._call_s3
async def killed(self, method, *args, **kwargs):
    if method == "upload_part" and multiprocessing.current_process().name != "MainProcess":
        os.kill(os.getpid(), signal.SIGKILL)
    return await real(self, method, *args, **kwargs)
s3fs.S3FileSystem._call_s3 = killed
"""


def test_a_worker_killed_mid_upload_leaves_no_pending_upload(s3: S3, tmp_path: Path) -> None:
    """No object, and no multipart upload left pending (billed until aborted): the batch sweeps
    the output of the job its worker died on."""
    import subprocess
    import sys

    folder = tmp_path / "in"
    folder.mkdir()
    names = [f"n{index}.npy" for index in range(8)]  # some done here while the workers start
    for name in names:
        np.save(folder / name, np.arange(3 << 20, dtype=np.float32))  # 12 MiB: three parts
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_KILLED_MID_UPLOAD)
    done = subprocess.run([sys.executable, "-m", "geomcli", "crop-pad", str(folder), "--out-dir", f"{s3.url}/out",
                           "--shape", "3145000", "-j", "2"], capture_output=True, text=True, timeout=120,
                          env=hooked(hooks))
    assert done.returncode == 1, done.stderr
    failed = [name for name in names if f"{name}: the worker process ended (killed by SIGKILL, as the kernel's "
              "out-of-memory killer does)" in done.stderr]
    assert failed, done.stderr
    assert s3.keys() == [f"out/{name}" for name in names if name not in failed]
    assert s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []


def test_the_sweep_aborts_the_uploads_pending_at_its_key_only(s3: S3) -> None:
    keys = ["out/a.npy", "out/a.npy", "out/a.npy.more", "out/b.npy"]
    for key in keys:
        s3.client.create_multipart_upload(Bucket=s3.bucket, Key=key)
    assert _remote.abort_pending_uploads(f"{s3.url}/out/a.npy") == 2
    left = s3.client.list_multipart_uploads(Bucket=s3.bucket)["Uploads"]
    assert sorted(upload["Key"] for upload in left) == ["out/a.npy.more", "out/b.npy"]
    assert _remote.abort_pending_uploads("memory://out/a.npy") == 0  # no multipart uploads there


def test_the_sweep_reads_every_page_of_the_listing(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    """S3 lists at most 1000 uploads a request (IsTruncated, then KeyMarker and UploadIdMarker for
    the next page); the sweep read the first page only. Here a page holds one (the test server
    pages none)."""
    for key in ["out/a.npy"] * 3 + ["out/a.npy.more"]:
        s3.client.create_multipart_upload(Bucket=s3.bucket, Key=key)
    fs, _ = _remote.filesystem(f"{s3.url}/out/a.npy")
    real = fs.call_s3

    def one_a_page(method: str, **kwargs: Any) -> Any:
        if method != "list_multipart_uploads":
            return real(method, **kwargs)
        after = (kwargs.pop("KeyMarker", None), kwargs.pop("UploadIdMarker", None))
        uploads = real(method, **kwargs).get("Uploads", [])
        start = 0 if after[0] is None else 1 + [(upload["Key"], upload["UploadId"]) for upload in uploads].index(after)
        page = uploads[start:start + 1]
        if start + 1 >= len(uploads):
            return {"Uploads": page, "IsTruncated": False}
        return {"Uploads": page, "IsTruncated": True, "NextKeyMarker": page[0]["Key"],
                "NextUploadIdMarker": page[0]["UploadId"]}

    monkeypatch.setattr(fs, "call_s3", one_a_page)
    assert _remote.abort_pending_uploads(f"{s3.url}/out/a.npy") == 3
    left = s3.client.list_multipart_uploads(Bucket=s3.bucket)["Uploads"]
    assert [upload["Key"] for upload in left] == ["out/a.npy.more"]


def test_stop_uploads_aborts_another_threads_upload_and_starts_no_more(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch worker's SIGTERM: its committing thread's upload is aborted from the main thread,
    and the thread's next output is not begun."""
    import asyncio
    import time

    import s3fs

    from geomcli.errors import GeomError

    monkeypatch.setattr(_remote, "MULTIPART_BYTES", 10 << 20)
    real = s3fs.S3FileSystem._call_s3

    async def slow(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "upload_part":
            await asyncio.sleep(60)
        return await real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", slow)
    _remote.configure(())
    failures: list[str] = []

    def commit() -> None:
        for name in ("a.npy", "b.npy"):
            try:
                _remote.write_bytes(f"{s3.url}/{name}", bytes(12 << 20), name)
            except GeomError as error:
                failures.append(str(error))

    thread = threading.Thread(target=commit)
    thread.start()
    deadline = time.monotonic() + 30
    while not s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    _remote.stop_uploads()
    thread.join(timeout=30)
    _remote.configure(())  # the next run may upload again
    assert failures == ["a.npy: cannot write (the upload was stopped)", "b.npy: cannot write (the process is ending)"]
    assert s3.keys() == []
    assert s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []


def test_a_multipart_upload_whose_work_was_cancelled_is_aborted_between_parts(
        s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Dask task cancelled while its committer uploads (io._atomic.stopped_when): no more parts
    are sent, the upload is aborted, and nothing is left, nor pending."""
    from geomcli.io import _atomic

    monkeypatch.setattr(_remote, "MULTIPART_BYTES", 10 << 20)  # 12 MiB: three parts of 5 MiB or less
    calls = counted_requests(monkeypatch)
    monkeypatch.setattr(_remote, "_options", {"max_concurrency": 1})  # a part at a time
    with _atomic.stopped_when(lambda: "upload_part" in calls), pytest.raises(_atomic.Cancelled, match="aborted"):
        _remote.write_bytes(f"{s3.url}/a.npy", bytes(12 << 20), "a.npy")
    assert calls == ["create_multipart_upload", "upload_part", "abort_multipart_upload"]
    assert s3.keys() == []
    assert s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []


def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS credentials or endpoint but what --storage-option gives."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))


def test_storage_options_reach_the_filesystem(s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    no_credentials(monkeypatch, tmp_path)
    result = run("crop-pad", f"{s3.url}/raw/a.png", "-o", tmp_path / "a.png", "--shape", "6,6", *s3.options)
    assert result.exit_code == 0, result.stderr
    result = run("crop-pad", f"{s3.url}/raw/a.png", "-o", tmp_path / "a.png", "--shape", "6,6",
                 "--storage-option", "skip_instance_cache=true", "--storage-option", f"endpoint_url={s3.endpoint}")
    assert result.exit_code == 1  # no credentials anywhere (botocore's error): one error line, no traceback
    assert result.stderr.startswith(f"Error: {s3.url}/raw/a.png: cannot read (")
    result = run("crop-pad", f"{s3.url}/raw/a.png", "-o", tmp_path / "b.png", "--shape", "6,6",
                 "--storage-option", "nonsense")
    assert result.exit_code == 2
    assert "'nonsense' is not KEY=VALUE with KEY a name" in result.stderr


@pytest.mark.parametrize(("option", "message"), [
    ("bogus=1", "--storage-option bogus: s3:// takes no such option"),
    ("anon=maybe", "--storage-option anon=maybe: anon is true or false"),
    ("client_kwargs=abc",
     "--storage-option: s3:// cannot take the options given ('str' object has no attribute 'copy')"),
    ('client_kwargs={"region_name":', "Invalid value for '--storage-option': 'client_kwargs={\"region_name\":': the "
                                     "value is not valid JSON (Expecting value: line 1 column 16 (char 15))"),
])
@pytest.mark.parametrize("how", ["-o", "--out-dir", "local to --out-dir", "--scheduler"])
def test_a_storage_option_the_filesystem_refuses_is_a_usage_error(option: str, message: str, how: str, s3: S3,
                                                                  shots: dict[str, bytes], tmp_path: Path) -> None:
    where = {"-o": [f"{s3.url}/raw/a.png", "-o", tmp_path / "a.png"],
             "--out-dir": [f"{s3.url}/raw/*.png", "--out-dir", tmp_path / "out"],
             "local to --out-dir": [tmp_path / "raw", "--out-dir", f"{s3.url}/out", "-j", "2"],
             "--scheduler": [f"{s3.url}/raw/*.png", "--out-dir", tmp_path / "out", "--scheduler", "local:2"]}[how]
    if how == "--scheduler":
        pytest.importorskip("distributed")
    result = run("crop-pad", *where, "--shape", "6,6", "--storage-option", option)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == f"Error: {message}"
    assert "Traceback" not in result.stderr
    assert s3.keys() == sorted(f"raw/{name}" for name in shots) and not (tmp_path / "out").exists()


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[str]:
    """tmp_path/web served over HTTP on 127.0.0.1."""
    (tmp_path / "web").mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    yield from _served(functools.partial(Quiet, directory=str(tmp_path / "web")))


def _served(handler: Any) -> Iterator[str]:
    """A server of ``handler`` on 127.0.0.1 and a free port, its root URL, for a fixture's life."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # shutdown() waits for the loop's next poll: half a second per test at the default interval
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_http_reads_and_never_writes(http_root: str, shots: dict[str, bytes], tmp_path: Path) -> None:
    (tmp_path / "web" / "a.png").write_bytes(shots["a.png"])
    result = run("crop-pad", f"{http_root}/a.png", "-o", tmp_path / "a.png", "--shape", "6,6")
    assert result.exit_code == 0, result.stderr
    assert run("crop-pad", tmp_path / "raw" / "a.png", "-o", tmp_path / "b.png", "--shape", "6,6").exit_code == 0
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    result = run("crop-pad", f"{http_root}/a.png", "--out-dir", f"{http_root}/out", "--shape", "6,6")
    assert result.exit_code == 2
    assert "http:// is for reading; write to s3://, gs://, az:// or a folder" in result.stderr
    result = run("crop-pad", tmp_path / "raw" / "a.png", "-o", f"{http_root}/b.png", "--shape", "6,6")
    assert result.exit_code == 1
    assert "http:// is for reading" in result.stderr


@pytest.fixture
def http_statuses() -> Iterator[str]:
    """A server on 127.0.0.1 that answers /STATUS/NAME with that HTTP status and no body."""

    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(int(self.path.split("/")[1]))
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_GET

        def log_message(self, *args: Any) -> None:
            pass

    yield from _served(Refusing)


@pytest.mark.parametrize(("status", "message"), [
    (403, "permission denied (HTTP 403 Forbidden)"), (401, "permission denied (HTTP 401 Unauthorized)"),
    (404, "no such file"), (500, "cannot read (HTTP 500 Internal Server Error)"),
])
def test_an_http_status_is_reported_as_what_it_says(status: int, message: str, http_statuses: str,
                                                   tmp_path: Path) -> None:
    url = f"{http_statuses}/{status}/a.png"
    result = run("crop-pad", url, "-o", tmp_path / "a.png", "--shape", "6,6")
    assert (result.exit_code, result.stderr) == (1, f"Error: {url}: {message}\n")
    assert not (tmp_path / "a.png").exists()


def test_an_http_host_that_cannot_be_reached_is_not_a_missing_file(tmp_path: Path) -> None:
    """fsspec reports a refused connection as a FileNotFoundError: a server that was down read
    'Error: http://127.0.0.1:PORT/a.png: no such file', as if the name were wrong."""
    import socket

    with socket.socket() as unused:  # a port nothing listens on once it is closed
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    url = f"http://127.0.0.1:{port}/a.png"
    for command in (["crop-pad", url, "-o", tmp_path / "a.png", "--shape", "6,6"], ["info", url]):
        result = run(*command)
        assert result.exit_code == 1 and result.stderr.startswith(f"Error: {url}: cannot read (")
        assert "no such file" not in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "a.png").exists()


def test_file_urls_are_local_paths(shots: dict[str, bytes], tmp_path: Path) -> None:
    result = run("crop-pad", f"file://{tmp_path}/raw/*.png", "--out-dir", f"file://{tmp_path}/out", "--shape", "6,6")
    assert result.exit_code == 0, result.stderr
    assert sorted(tree(tmp_path / "out")) == ["a.png", "b.png"]
    assert run("crop-pad", f"file://{tmp_path}/raw/a.png", "-o", f"file://{tmp_path}/one.png",
               "--shape", "6,6").exit_code == 0
    assert (tmp_path / "one.png").read_bytes() == (tmp_path / "out" / "a.png").read_bytes()


@pytest.mark.parametrize("url", ["file://", "file://localhost", "FILE://"])
def test_a_file_url_of_no_path_is_refused(shots: dict[str, bytes], tmp_path: Path, url: str) -> None:
    """It was the root folder: --out-dir file:// wrote /a.png (a fuzzer's run)."""
    result = run("crop-pad", tmp_path / "raw" / "a.png", "--out-dir", url, "--shape", "6,6")
    assert result.exit_code == 2 and f"{url}: a file:// URL names no path (file:///path)" in result.stderr
    assert not Path("/a.png").exists()


def test_a_filesystem_not_installed_is_named(tmp_path: Path, shots: dict[str, bytes]) -> None:
    try:  # gcsfs is no dependency of the extra
        import gcsfs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gcsfs is installed")
    result = run("crop-pad", tmp_path / "raw" / "a.png", "-o", "gs://bucket/a.png", "--shape", "6,6")
    assert result.exit_code == 1
    assert result.stderr == "Error: gs://bucket/a.png: gs:// needs gcsfs, which is not installed (pip install gcsfs)\n"


@pytest.mark.cluster
def test_a_batch_on_dask_reads_and_writes_s3(s3: S3, shots: dict[str, bytes], scheduler: str,
                                             tmp_path: Path) -> None:
    local = run("crop-pad", f"{tmp_path}/raw/**/*.png", "--out-dir", tmp_path / "local", "--shape", "6,6", "-j", "2")
    # the cluster's workers were started before this test set the environment: the options go with the task
    remote = run("crop-pad", f"{s3.url}/raw/**/*.png", "--out-dir", f"{s3.url}/out", "--shape", "6,6",
                 "--scheduler", scheduler, *s3.options)
    assert remote.exit_code == local.exit_code == 0, remote.stderr
    made = tree(tmp_path / "local")
    assert {name: s3.get(f"out/{name}") for name in made} == made


@pytest.mark.parametrize("kind", ["glob", "folder"])
def test_a_listing_refused_is_its_error_not_an_empty_match(kind: str, s3: S3, shots: dict[str, bytes],
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import settings

    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # the server checks credentials now
    argument = f"{s3.url}/raw/*.png" if kind == "glob" else f"{s3.url}/raw"
    result = run("crop-pad", argument, "--out-dir", tmp_path / "out", "--shape", "6,6")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == (f"Error: {s3.url}/raw: permission denied (The AWS Access Key Id you "
                                             "provided does not exist in our records.)")
    assert result.stderr.splitlines()[1].startswith("crop-pad: 0 ok, 1 failed, 0 skipped in ")


@pytest.mark.parametrize("command", ["crop-pad", "info"])
def test_a_store_that_does_not_answer_is_one_failure_as_a_folder_not_listed(command: str, s3: S3,
                                                                             shots: dict[str, bytes],
                                                                             tmp_path: Path) -> None:
    """One error line, no usage text (nothing typed is wrong), exit 1; the other inputs are done."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once left: nothing answers there
    options = ["--storage-option", f"endpoint_url=http://127.0.0.1:{port}",
               "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}']
    batch = ["--out-dir", tmp_path / "out", "--shape", "6,6"] if command == "crop-pad" else []
    result = run(command, f"{s3.url}/raw/*.png", tmp_path / "raw" / "a.png", *batch, *options)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"Error: {s3.url}/raw: cannot list the folder (Could not connect to the endpoint URL")
    if command == "crop-pad":
        assert len(lines) == 2 and lines[1].startswith("crop-pad: 1 ok, 1 failed, 0 skipped in ")
        assert tree(tmp_path / "out") == {"a.png": (tmp_path / "out" / "a.png").read_bytes()}
    else:
        assert len(lines) == 1 and result.stdout.startswith(f"{tmp_path}/raw/a.png: png 10×12×3 uint8")


@pytest.mark.parametrize("args", [
    ["crop-pad", "{url}/raw/*.png", "--out-dir", "s3://"],
    ["crop-pad", "{url}/raw/*.png", "--out-dir", "s3:///"],
    ["crop-pad", "{url}/raw/a.png", "-o", "s3://"],
    ["crop-pad", "{url}/raw/a.png", "-o", "s3:///a.png"],
    ["crop-pad", "s3://", "--out-dir", "out"],
    ["crop-pad", "s3:///a.png", "-o", "a.png"],
    ["info", "s3://"],
], ids=str)
def test_a_url_of_no_bucket_is_a_usage_error(args: list[str], s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """s3://$BUCKET of an unset variable: never a local folder named s3:."""
    monkeypatch.chdir(tmp_path)
    arguments = [arg.format(url=s3.url) for arg in args]
    result = run(*arguments, *(["--shape", "6,6"] if args[0] == "crop-pad" else []))
    named = next(arg for arg in arguments if arg.startswith("s3:/") and not arg.startswith(s3.url))
    assert result.exit_code == 2, result.stderr
    assert result.stderr.splitlines()[-1].endswith(f"{named}: the URL names no bucket (s3://BUCKET/...)")
    assert not (tmp_path / "s3:").exists()


def test_info_of_a_url_says_what_it_says_of_the_file(s3: S3, tmp_path: Path) -> None:
    """A photo's EXIF orientation was read by opening the path again, which a URL is not: null."""
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(tmp_path / "a.jpg", exif=exif.tobytes(), dpi=(300, 300))
    url = s3.put("a.jpg", (tmp_path / "a.jpg").read_bytes())
    local, remote = (run("info", "--json", path) for path in (tmp_path / "a.jpg", url))
    assert local.exit_code == remote.exit_code == 0, remote.stderr
    assert json.loads(remote.stdout) == {**json.loads(local.stdout), "input": url}
    assert json.loads(remote.stdout)["orientation"] == 6


def test_info_takes_storage_options_and_files_from(s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    no_credentials(monkeypatch, tmp_path)
    result = run("info", f"{s3.url}/raw/a.png", *s3.options)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"{s3.url}/raw/a.png: png 10×12×3 uint8")
    s3.put("list.txt", f"{s3.url}/raw/b.png\n{tmp_path}/raw/a.png\n".encode())
    result = run("info", f"{s3.url}/raw/day/c.png", "--files-from", f"{s3.url}/list.txt", *s3.options)
    assert result.exit_code == 0, result.stderr
    assert [line.split(": ")[0] for line in result.stdout.splitlines()] == [
        f"{s3.url}/raw/day/c.png", f"{s3.url}/raw/b.png", f"{tmp_path}/raw/a.png"]
    (tmp_path / "list.txt").write_text(f"{s3.url}/raw/b.png\n")
    result = run("info", "--files-from", f"file://{tmp_path}/list.txt", *s3.options)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"{s3.url}/raw/b.png: png 10×12×3 uint8")
    result = run("info")
    assert result.exit_code == 2 and result.stderr.splitlines()[-1] == "Error: give an INPUT, or --files-from FILE"


def test_one_file_from_s3_is_read_in_two_requests(s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Its size (a HEAD, against the --max-pixels limit), then its bytes: it took a second HEAD
    before the GET (s3fs's, to read an object past 50 MiB in ranges side by side)."""
    requests = counted_requests(monkeypatch)
    result = run("crop-pad", f"{s3.url}/raw/a.png", "-o", tmp_path / "a.png", "--shape", "6,6")
    assert result.exit_code == 0, result.stderr
    assert requests == ["head_object", "get_object"]
    local = run("crop-pad", tmp_path / "raw" / "a.png", "-o", tmp_path / "local.png", "--shape", "6,6")
    assert local.exit_code == 0 and (tmp_path / "a.png").read_bytes() == (tmp_path / "local.png").read_bytes()


def test_a_dry_run_reads_the_headers_of_urls_side_by_side(s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Each a request's round trip: a dry run read them one by one (06f30e6 made it one read a
    file, not a parallel check and then a serial one), as a run's check reads them side by side.
    Local headers stay in this thread (parsing holds the interpreter)."""
    import threading

    from geomcli.engine import workers

    readers: set[str] = set()
    header_as_read = workers.header_as_read

    def noted(*args: Any) -> Any:
        readers.add(threading.current_thread().name)
        return header_as_read(*args)

    monkeypatch.setattr(workers, "header_as_read", noted)
    result = run("crop-pad", f"{s3.url}/raw/**/*.png", "--out-dir", tmp_path / "out", "--shape", "6,6", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert len(result.stdout.splitlines()) == 4 and readers and all(
        name.startswith("geomcli-header") for name in readers), readers
    readers.clear()
    local = run("crop-pad", tmp_path / "raw", "--out-dir", tmp_path / "out", "--shape", "6,6", "--dry-run")
    assert local.exit_code == 0 and readers == {threading.current_thread().name}, (local.stderr, readers)


def jpeg_bytes(rng: np.random.Generator, shape: tuple[int, int, int], **save: Any) -> bytes:
    buffer = bytes_io.BytesIO()
    Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)).save(buffer, format="JPEG", quality=95, **save)
    return buffer.getvalue()


def test_a_batchs_check_reads_a_jpegs_or_pngs_header_from_its_first_bytes(s3: S3, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The check of every header before anything is written read each input whole, and its run
    then read it again: 2.0x the bytes of the inputs. Now one ranged read of its first 64 KiB; a
    header that runs past them (a JPEG's 100 KB ICC profile) is read whole, as it was. The plan is
    the local one, shapes and dtypes (a 16-bit PNG) alike."""
    from geomcli import io

    rng = np.random.default_rng(7)
    sixteen = bytes_io.BytesIO()
    Image.fromarray(rng.integers(0, 65536, (200, 300), dtype=np.uint16)).save(sixteen, format="PNG")
    inputs = {"a.jpg": jpeg_bytes(rng, (300, 400, 3)), "b.jpg": jpeg_bytes(rng, (310, 260, 3), exif=b"Exif\0\0"),
              "c.jpg": jpeg_bytes(rng, (120, 90, 3), icc_profile=bytes(100_000)), "d.png": sixteen.getvalue(),
              "e.jpg": jpeg_bytes(rng, (300, 400, 3))[:90_000]}  # cut short: its run's failure, as on disk
    assert all(len(data) > io.HEAD_BYTES for data in inputs.values())
    for name, data in inputs.items():
        s3.put(f"raw/{name}", data)
        (tmp_path / "raw").mkdir(exist_ok=True)
        (tmp_path / "raw" / name).write_bytes(data)
    requests = counted_requests(monkeypatch)
    remote = run("crop-pad", f"{s3.url}/raw", "--out-dir", tmp_path / "out", "--shape", "50,50", "--dry-run")
    local = run("crop-pad", tmp_path / "raw", "--out-dir", tmp_path / "out", "--shape", "50,50", "--dry-run")
    assert remote.exit_code == local.exit_code == 0, remote.stderr
    assert remote.stdout.replace(f"{s3.url}/raw", str(tmp_path / "raw")) == local.stdout
    assert "d.png: 50×50 uint16" in local.stdout, local.stdout
    head = f"get_object bytes=0-{io.HEAD_BYTES - 1}"
    tail = f"get_object bytes={io.HEAD_BYTES}-{len(inputs['d.png']) - 1}"  # d.png's last bytes: text after its pixels
    assert sorted(request for request in requests if request.startswith("get_object")) == [
        "get_object", *[head] * 5, tail], requests  # c.jpg's header read whole after its first bytes
    requests.clear()
    result = run("crop-pad", f"{s3.url}/raw", "--out-dir", tmp_path / "out", "--shape", "50,50")
    assert result.exit_code == 1 and f"{s3.url}/raw/e.jpg: not a readable JPEG" in result.stderr, result.stderr
    # the check's, then each input's run; c.jpg's, read whole by the check, taken to its run
    assert sorted(request for request in requests if request.startswith("get_object")) == [
        *["get_object"] * 5, *[head] * 5], requests
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["a.jpg", "b.jpg", "c.jpg", "d.png"]


def test_a_batchs_check_reads_a_bmps_header_from_its_first_bytes(s3: S3, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A BMP's header was read whole by the check, as an animation's: past 64 MiB of them kept in
    all (KEPT_BYTES), its run read it whole again (480 KB moved twice for the 400x400 one here).
    Pillow reads a BMP's size and mode from its file and info headers and its palette, all in its
    first 64 KiB: one ranged read. A GIF (its frames counted to its end) and a WebP (Pillow's
    libwebp reader takes the whole file) are still read whole, once, their bytes kept for the run."""
    from geomcli import io

    rng = np.random.default_rng(12)
    (tmp_path / "raw").mkdir()
    Image.fromarray(rng.integers(0, 256, (400, 400, 3), dtype=np.uint8)).save(tmp_path / "raw" / "rgb.bmp")
    Image.fromarray(rng.integers(0, 256, (300, 500, 3), dtype=np.uint8)).quantize(16).save(tmp_path / "raw" / "pal.bmp")
    frames = [Image.fromarray(rng.integers(0, 256, (300, 300), dtype=np.uint8)) for _ in range(3)]
    frames[0].save(tmp_path / "raw" / "anim.gif", save_all=True, append_images=frames[1:])
    for name in ("rgb.bmp", "pal.bmp", "anim.gif"):
        assert (tmp_path / "raw" / name).stat().st_size > 2 * io.HEAD_BYTES
        s3.put(f"raw/{name}", (tmp_path / "raw" / name).read_bytes())
    gets = gets_by_key(monkeypatch)
    head = f"bytes=0-{io.HEAD_BYTES - 1}"
    common = ["--out-dir", tmp_path / "out", "--name", "{stem}.tiff", "--shape", "50,50", "--frames", "all"]
    for dry in (["--dry-run"], ["--dry-run", "--keep-palette"]):
        gets.clear()
        remote = run("crop-pad", f"{s3.url}/raw", *common, *dry)
        local = run("crop-pad", tmp_path / "raw", *common, *dry)
        assert remote.exit_code == local.exit_code == 0, remote.stderr
        assert remote.stdout.replace(f"{s3.url}/raw", str(tmp_path / "raw")) == local.stdout
        assert "pal.tiff: 50×50" in local.stdout and "anim.tiff: 3×50×50 uint8" in local.stdout, local.stdout
        # (--keep-palette: the dry run's palette is decoded from the pixels, the whole of pal.bmp read then)
        assert {key: [span for span, _ in made] for key, made in gets.items()} == {
            "raw/rgb.bmp": [head], "raw/pal.bmp": [head] + ([""] if "--keep-palette" in dry else []),
            "raw/anim.gif": [""]}
    monkeypatch.setattr(_remote, "KEPT_BYTES", 0)  # as past 64 MiB of them: none kept for the run
    gets.clear()
    result = run("crop-pad", f"{s3.url}/raw", *common)
    local = run("crop-pad", tmp_path / "raw", *common[:1], tmp_path / "local", *common[2:])
    assert result.exit_code == local.exit_code == 0, result.stderr
    assert {key: [span for span, _ in made] for key, made in gets.items()} == {
        "raw/rgb.bmp": [head, ""], "raw/pal.bmp": [head, ""], "raw/anim.gif": ["", ""]}
    assert tree(tmp_path / "out") == tree(tmp_path / "local") and len(tree(tmp_path / "out")) == 3


def test_a_batchs_check_reads_an_npys_header_from_its_first_bytes(s3: S3, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The check of an NPY's header read the whole object, and its run read it again: an 81 MB
    .npy moved 162 MB (past 64 MiB of them in all, KEPT_BYTES, none was kept). Its header is now
    read from its first 64 KiB, one ranged read, its data's length checked against the object's
    size; one cut short is refused as on disk, from that read alone (it was then read whole to say
    so: a truncated upload of GBs moved to give the line its first 64 KiB and size give). So is
    one whose header is damaged, or names a type geomcli never reads: a header longer than those
    bytes is refused (_npy._MAX_HEADER), so the whole object shows nothing more (it was read whole,
    all of it, to give the same line)."""
    from geomcli import io
    from geomcli.io import _npy

    assert _npy._MAX_HEADER + 12 < io.HEAD_BYTES  # (a header's magic, version and length, then the header)
    rng = np.random.default_rng(9)
    (tmp_path / "raw").mkdir()
    np.save(tmp_path / "raw" / "big.npy", rng.integers(0, 60000, (400, 300), dtype=np.uint16))
    data = (tmp_path / "raw" / "big.npy").read_bytes()
    (tmp_path / "raw" / "cut.npy").write_bytes(data[:-10])
    (tmp_path / "raw" / "keys.npy").write_bytes(data.replace(b"'descr'", b"'dxscr'", 1))
    (tmp_path / "raw" / "objects.npy").write_bytes(data.replace(b"'<u2'", b"'|O' ", 1))
    assert len(data) > 2 * io.HEAD_BYTES
    for name in ("big.npy", "cut.npy", "keys.npy", "objects.npy"):
        s3.put(f"raw/{name}", (tmp_path / "raw" / name).read_bytes())
    gets = gets_by_key(monkeypatch)
    for dry in (["--dry-run"], []):
        gets.clear()
        common = ["--shape", "8,8", *dry]
        remote = run("crop-pad", f"{s3.url}/raw", "--out-dir", tmp_path / "out", *common)
        local = run("crop-pad", tmp_path / "raw", "--out-dir", tmp_path / "local", *common)
        assert remote.exit_code == local.exit_code == 1
        assert remote.stdout.replace(f"{s3.url}/raw", str(tmp_path / "raw")) == local.stdout.replace("local", "out")
        assert remote.stderr.replace(s3.url, str(tmp_path)).split("crop-pad:")[0] == local.stderr.split("crop-pad:")[0]
        assert f"{s3.url}/raw/cut.npy: not a readable NPY (truncated: " in remote.stderr
        assert f"{s3.url}/raw/keys.npy: not a readable NPY (malformed header: " in remote.stderr
        assert f"{s3.url}/raw/objects.npy: holds Python objects" in remote.stderr
        head = f"bytes=0-{io.HEAD_BYTES - 1}"
        # the cut and damaged ones refused from their first bytes (and size), not read whole, nor again
        assert {key: [span for span, _ in made] for key, made in gets.items()} == {
            "raw/big.npy": [head] + ([] if dry else [""]), "raw/cut.npy": [head], "raw/keys.npy": [head],
            "raw/objects.npy": [head]}
    assert tree(tmp_path / "out") == tree(tmp_path / "local") and list(tree(tmp_path / "out")) == ["big.npy"]


def test_a_pngs_header_damaged_in_its_first_bytes_is_refused_from_them(s3: S3, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A PNG whose header its first 64 KiB showed damaged (IHDR's checksum) was then read whole, all
    270 KB here, for the same line: Image.open reads no further than the first IDAT's length and
    type, so where those bytes hold them, its fault is the whole file's. One ranged GET, kept for
    the run; a fault past them (a 100 KB text chunk before the pixels, its checksum wrong) is
    still found by the whole read, as on disk."""
    import zlib

    from geomcli import io

    rng = np.random.default_rng(13)
    good = png_bytes(rng, (300, 300, 3))
    body = b"Comment\0" + bytes(100_000)
    text = len(body).to_bytes(4, "big") + b"tEXt" + body + (zlib.crc32(b"tEXt" + body) ^ 1).to_bytes(4, "big")
    inputs = {"ihdr.png": good[:29] + bytes([good[29] ^ 1]) + good[30:], "text.png": good[:33] + text + good[33:]}
    (tmp_path / "raw").mkdir()
    for name, data in inputs.items():
        assert len(data) > 2 * io.HEAD_BYTES
        s3.put(f"raw/{name}", data)
        (tmp_path / "raw" / name).write_bytes(data)
    gets = gets_by_key(monkeypatch)
    head = f"bytes=0-{io.HEAD_BYTES - 1}"
    for dry in (["--dry-run"], []):
        gets.clear()
        remote = run("crop-pad", f"{s3.url}/raw", "--out-dir", tmp_path / "out", "--shape", "8,8", *dry)
        local = run("crop-pad", tmp_path / "raw", "--out-dir", tmp_path / "out", "--shape", "8,8", *dry)
        assert remote.exit_code == local.exit_code == 1
        assert remote.stderr.replace(s3.url, str(tmp_path)).split("crop-pad:")[0] == local.stderr.split("crop-pad:")[0]
        assert "ihdr.png: not a readable PNG (" in remote.stderr and "text.png: not a readable PNG (" in remote.stderr
        assert {key: [span for span, _ in made] for key, made in gets.items()} == {
            "raw/ihdr.png": [head], "raw/text.png": [head, ""]}
    assert not (tmp_path / "out").exists()


def test_an_apng_of_indices_has_every_frames_blend_read(s3: S3, tmp_path: Path) -> None:
    """An APNG of indices whose third frame is drawn over the second through a partial alpha is
    refused with --keep-palette --frames all (_pillow._frames_blended): the check of a URL's read its
    frames' blend ops from its first 64 KiB alone, found none past them, and passed it ('dry run,
    1 to write', exit 0; its run then failed it), where the local file is refused. Its header is now
    read from the whole object, as the walk needs it."""
    from geomcli import io

    rng = np.random.default_rng(14)
    frames = []
    for _ in range(3):
        frame = Image.fromarray(rng.integers(0, 16, (400, 400), dtype=np.uint8)).convert("P")
        frame.putpalette(list(range(48)))
        frames.append(frame)
    buffer = bytes_io.BytesIO()
    frames[0].save(buffer, format="PNG", save_all=True, append_images=frames[1:], blend=[0, 0, 1],
                   transparency=bytes([128] * 16))
    data = buffer.getvalue()
    assert data.find(b"fdAT") > io.HEAD_BYTES  # (the later frames' chunks past the first bytes)
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "over.png").write_bytes(data)
    s3.put("raw/over.png", data)
    common = ["--out-dir", tmp_path / "out", "--name", "{stem}.npy", "--shape", "8,8", "--frames", "all",
              "--keep-palette"]
    for dry in (["--dry-run"], []):
        remote = run("crop-pad", f"{s3.url}/raw", *common, *dry)
        local = run("crop-pad", tmp_path / "raw", *common, *dry)
        assert remote.exit_code == local.exit_code == 1
        assert remote.stderr.replace(s3.url, str(tmp_path)).split("crop-pad:")[0] == local.stderr.split("crop-pad:")[0]
        assert "over.png: frame 3 is drawn over the frame before" in remote.stderr
    assert not (tmp_path / "out").exists()


def late_text(png: bytes, body: bytes) -> bytes:
    """``png`` with one tEXt of ``body`` after its image data, as ImageMagick places its text."""
    import zlib

    chunk = len(body).to_bytes(4, "big") + b"tEXt" + body + zlib.crc32(b"tEXt" + body).to_bytes(4, "big")
    return png[:-12] + chunk + png[-12:]


def metadata_inputs(rng: np.random.Generator) -> dict[str, bytes]:
    """Inputs past io.HEAD_BYTES whose metadata a run drops into a .npy: a JPEG's ICC profile,
    EXIF and DPI; a PNG's DPI and text before and after its pixels (in several IDATs), a palette
    PNG's too; a TIFF's ICC profile and DPI."""
    from PIL import ImageCms, PngImagePlugin

    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    exif = Image.Exif()
    exif[0x010F] = "a camera"
    info = PngImagePlugin.PngInfo()
    info.add_text("Title", "before the pixels")
    photo = rng.integers(0, 256, (400, 600, 3), dtype=np.uint8)
    found = {"photo.jpg": jpeg_bytes(rng, (400, 600, 3), icc_profile=icc, exif=exif.tobytes(), dpi=(300, 300))}
    for name, image in (("photo.png", Image.fromarray(photo)),
                        ("labels.png", Image.fromarray(photo[..., 0] // 2).convert("P"))):
        buffer = bytes_io.BytesIO()
        image.save(buffer, format="PNG", pnginfo=info, dpi=(300, 300))
        found[name] = late_text(buffer.getvalue(), b"Late\0after the pixels")
    buffer = bytes_io.BytesIO()
    Image.fromarray(photo).save(buffer, format="TIFF", icc_profile=icc, dpi=(300, 300))
    return found | {"photo.tif": buffer.getvalue()}


@pytest.mark.parametrize("keep_palette", [[], ["--keep-palette"]])
def test_a_dry_run_of_urls_gives_the_runs_metadata_warnings(s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            keep_palette: list[str]) -> None:
    """A dry run of a URL read its header alone: 'crop-pad s3://bkt/photo.jpg --out-dir o --name
    {stem}.npy --shape 8,8 --dry-run --json' gave no dropped where the run drops the ICC profile,
    EXIF and DPI, nor a PNG's text. It gives the run's now, as a local file's, from the bytes its
    header was read from (a JPEG's first 64 KiB, a TIFF's and the ranges its IFDs are in: no more
    requests) and, of a PNG, one more ranged read, its last 64 KiB, for the text after its pixels."""
    from geomcli import io

    inputs = metadata_inputs(np.random.default_rng(5))
    assert all(len(data) > 2 * io.HEAD_BYTES for data in inputs.values()), {k: len(v) for k, v in inputs.items()}
    for name, data in inputs.items():
        s3.put(f"raw/{name}", data)
        (tmp_path / "raw").mkdir(exist_ok=True)
        (tmp_path / "raw" / name).write_bytes(data)
    args = ["--out-dir", tmp_path / "out", "--name", "{name}.npy", "--shape", "8,8", "--json", *keep_palette]
    requests = counted_requests(monkeypatch)
    dry = run("crop-pad", f"{s3.url}/raw", *args, "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    reads = sorted(request for request in requests if request.startswith("get_object"))
    requests.clear()
    done = run("crop-pad", f"{s3.url}/raw", *args)
    local = run("crop-pad", tmp_path / "raw", *args, "--dry-run")
    assert done.exit_code == local.exit_code == 0, done.stderr

    def said(result: Result) -> dict[str, tuple[list[str], list[str]]]:
        records = [json.loads(line) for line in result.stdout.splitlines()][:-1]
        return {record["input"].rsplit("/", 1)[1]: (record["dropped"], record["warnings"]) for record in records}

    assert said(dry) == said(done) == said(local)
    assert "PNG text chunks (Title, Late)" in said(done)["labels.png"][0]
    assert said(done)["photo.jpg"][0] == ["ICC profile", "DPI (300 x 300)", "EXIF data"]
    # each PNG's last bytes, a read more; a JPEG's and a TIFF's first bytes (its IFD among them), as for its header
    tails = [f"get_object bytes={len(inputs[name]) - io.HEAD_BYTES}-{len(inputs[name]) - 1}"
             for name in ("labels.png", "photo.png")]
    assert reads == sorted([*[f"get_object bytes=0-{io.HEAD_BYTES - 1}"] * 4, *tails]), reads


def test_a_small_object_named_is_read_whole_once_for_its_header(s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Named (not listed), its size is asked once, then its bytes read whole (shorter than the
    first bytes a header is read from): no second HEAD before the read."""
    requests = counted_requests(monkeypatch)
    result = run("crop-pad", f"{s3.url}/raw/a.png", f"{s3.url}/raw/b.png", "--out-dir", tmp_path / "out",
                 "--shape", "6,6", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert sorted(request for request in requests if request != "list_objects_v2") == [
        "get_object"] * 2 + ["head_object"] * 2, requests


class _CutBody:
    """A get_object's body that reads as its first half, or fails its checksum as botocore's
    check of the whole body does: what a response cut short gives."""

    def __init__(self, body: Any, fault: str) -> None:
        self.body, self.fault = body, fault

    async def read(self) -> bytes:
        from botocore.exceptions import FlexibleChecksumError

        data = await self.body.read()
        if self.fault == "checksum":
            raise FlexibleChecksumError(error_msg="Expected checksum 6qaRTQ== did not match calculated checksum")
        return bytes(data[:len(data) // 2])

    def close(self) -> None:
        self.body.close()


def cut_reads(monkeypatch: pytest.MonkeyPatch, fault: str, count: int, keys: str = "") -> list[str]:
    """The first ``count`` reads (get_object) of this process of a key holding ``keys`` come cut
    short (``fault``: "short", a 200 of half the body; "checksum", a body whose checksum fails);
    the S3 requests."""
    import s3fs

    requests: list[str] = []
    cut_so_far = [0]
    real = s3fs.S3FileSystem._call_s3

    async def cut(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        requests.append(method)
        response = await real(self, method, *args, **kwargs)
        if method == "get_object" and keys in kwargs["Key"] and cut_so_far[0] < count:
            cut_so_far[0] += 1
            response["Body"] = _CutBody(response["Body"], fault)
        return response

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", cut)
    return requests


@pytest.mark.parametrize("fault", ["short", "checksum"])
def test_a_read_cut_short_is_made_again_not_decoded(fault: str, s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """s3fs makes a failed request again, never one whose body arrives wrong: a 200 of half the
    body was decoded, 'not a readable PNG', and a body that failed its checksum was the file's
    failure, 'cannot read (Expected checksum ...)' (-j 2 with 10% of GETs cut: 22 of 200 failed)."""
    local = run("crop-pad", tmp_path / "raw" / "a.png", "-o", tmp_path / "local.png", "--shape", "6,6")
    assert local.exit_code == 0
    requests = cut_reads(monkeypatch, fault, 2)
    result = run("crop-pad", f"{s3.url}/raw/a.png", "-o", tmp_path / "a.png", "--shape", "6,6")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "local.png").read_bytes()
    assert requests == ["head_object", "get_object", "get_object", "get_object"]


def test_a_read_cut_short_every_time_fails_its_file_saying_so(s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    size = len(shots["a.png"])
    cut_reads(monkeypatch, "short", 100)
    result = run("crop-pad", f"{s3.url}/raw/a.png", f"{s3.url}/raw/b.png", "--out-dir", tmp_path / "out",
                 "--shape", "6,6")
    assert result.exit_code == 1
    assert f"Error: {s3.url}/raw/a.png: cannot read (the response ended after {size // 2} of {size} bytes)\n" \
        in result.stderr, result.stderr
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_credentials_that_expire_mid_run_say_so_on_each_files_line(s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A read refused said 'permission denied' alone (a bucket's policy, for all the user could
    tell) where the write beside it said 'cannot write (The provided token has expired.)'."""
    import s3fs
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    real = s3fs.S3FileSystem._call_s3

    async def expired(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if method in ("get_object", "put_object"):  # as s3fs raises S3's 403 once its retries are spent
            raise translate_boto_error(ClientError(
                {"Error": {"Code": "ExpiredToken", "Message": "The provided token has expired."}}, method))
        return await real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", expired)
    read = run("crop-pad", f"{s3.url}/raw/a.png", f"{s3.url}/raw/b.png", "--out-dir", tmp_path / "out",
               "--shape", "6,6")
    written = run("crop-pad", tmp_path / "raw" / "a.png", "-o", f"{s3.url}/out/a.png", "--shape", "6,6")
    assert read.exit_code == written.exit_code == 1
    assert read.stderr.splitlines()[:2] == [f"Error: {s3.url}/raw/{name}: permission denied (The provided token "
                                            "has expired.)" for name in ("a.png", "b.png")], read.stderr
    assert written.stderr == f"Error: {s3.url}/out/a.png: permission denied (The provided token has expired.)\n"
    assert s3.keys() == sorted(f"raw/{name}" for name in shots)


@pytest.mark.parametrize("completed", [True, False])
def test_a_multipart_upload_whose_completion_went_unanswered_is_told_by_its_etag(
        completed: bool, s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CompleteMultipartUpload that S3 did but whose answer was lost (the connection reset after
    it; s3fs's retries then find no such upload) failed its file, 'cannot write (Could not connect
    to the endpoint URL ...)', the whole object there all the same. One not done still fails, and
    is aborted."""
    import s3fs
    from botocore.exceptions import ConnectionClosedError

    np.save(tmp_path / "big.npy", np.arange(3 << 20, dtype=np.float32))  # 12 MiB
    monkeypatch.setattr(_remote, "MULTIPART_BYTES", 10 << 20)  # parts of 5 MiB, S3's least
    real = s3fs.S3FileSystem._call_s3

    async def unanswered(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "complete_multipart_upload":
            if completed:
                await real(self, method, *args, **kwargs)
            raise ConnectionClosedError(endpoint_url=f"{s3.endpoint}/{s3.bucket}/big.npy")
        return await real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", unanswered)
    result = run("crop-pad", tmp_path / "big.npy", "-o", f"{s3.url}/big.npy", "--shape", "3145000")
    assert s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []
    if not completed:
        assert result.exit_code == 1
        assert result.stderr.startswith(f"Error: {s3.url}/big.npy: cannot write (Connection was closed before")
        assert s3.keys() == []
        return
    assert result.exit_code == 0, result.stderr
    expected = np.arange(3 << 20, dtype=np.float32)[364:364 + 3145000]  # the centre window
    assert np.array_equal(np.load(bytes_io.BytesIO(s3.get("big.npy"))), expected)


def test_a_zarr_chunk_read_that_fails_its_checksum_is_made_again(s3: S3, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """s3fs makes a read again when its request fails, not when its body fails its checksum: one
    chunk's failed the whole array's job, 'a chunk could not be read, transformed or written
    (FlexibleChecksumError: Expected checksum 5LJziQ== did not match ...)', with 5% of GETs cut."""
    pytest.importorskip("zarr")
    data = np.random.default_rng(3).integers(0, 1000, (1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "in.npy", data)
    made = run("crop-pad", tmp_path / "in.npy", "-o", f"{s3.url}/in.zarr", "--shape", "1,3,8,8")
    assert made.exit_code == 0, made.stderr
    requests = cut_reads(monkeypatch, "checksum", 2, keys="in.zarr/c/")  # a chunk's, not the metadata's
    result = run("crop-pad", f"{s3.url}/in.zarr", "-o", tmp_path / "out.npy", "--shape", "1,3,6,6")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(np.load(tmp_path / "out.npy"), data[:, :, 1:7, 1:7])
    assert requests.count("get_object") >= 3  # the chunk's two cut reads, made again


@pytest.mark.parametrize(("code", "message"), [("InternalError", "We encountered an internal error."),
                                               ("SlowDown", "Please reduce your request rate.")])
def test_a_refusal_past_s3fss_retries_is_its_message_alone(code: str, message: str, s3: S3, shots: dict[str, bytes],
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """s3fs gives S3's refusals an errno: the line read 'cannot read ([Errno 121] We encountered an
    internal error.)'."""
    import s3fs
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    real = s3fs.S3FileSystem._call_s3

    async def refused(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if method in ("get_object", "put_object"):
            raise translate_boto_error(ClientError({"Error": {"Code": code, "Message": message}}, method))
        return await real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", refused)
    read = run("crop-pad", f"{s3.url}/raw/a.png", "-o", tmp_path / "a.png", "--shape", "6,6")
    written = run("crop-pad", tmp_path / "raw" / "a.png", "-o", f"{s3.url}/out/a.png", "--shape", "6,6")
    assert read.stderr == f"Error: {s3.url}/raw/a.png: cannot read ({message})\n"
    assert written.stderr == f"Error: {s3.url}/out/a.png: cannot write ({message})\n"
    assert read.exit_code == written.exit_code == 1


def test_a_glob_on_s3_with_o_is_a_usage_error_as_a_local_one(s3: S3, shots: dict[str, bytes], tmp_path: Path) -> None:
    """-o took an s3:// glob as an object's name, 'Error: s3://.../raw/*.png: no such file' (exit 1),
    where the same glob of a local folder is a usage error that points to --out-dir (and a batch
    expands it); an object whose name holds a glob's characters is still read as named."""
    out = tmp_path / "out.png"
    pattern = f"{s3.url}/raw/*.png"
    result = run("crop-pad", pattern, "-o", out, "--shape", "6,6")
    assert result.exit_code == 2 and not out.exists(), result.stderr
    assert f"Error: {pattern!r} is a pattern, and -o takes one file; give --out-dir DIR" in result.stderr
    s3.client.put_object(Bucket=s3.bucket, Key="raw/a[1].png", Body=shots["a.png"])
    result = run("crop-pad", f"{s3.url}/raw/a[1].png", "-o", out, "--shape", "6,6")
    assert result.exit_code == 0 and out.exists(), result.stderr


def test_o_asks_the_store_with_the_runs_storage_options(s3: S3, shots: dict[str, bytes], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """-o's checks of its input (a glob? a folder?) asked the store before the run's
    --storage-option were set: an endpoint given there alone (a MinIO's, no AWS_ENDPOINT_URL) left
    the glob's check asking elsewhere, and the glob was read as an object's name, 'no such file'
    (exit 1), or with an earlier run's options in the same process."""
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    out, pattern = tmp_path / "out.png", f"{s3.url}/raw/*.png"
    given = ["--storage-option", f"endpoint_url={s3.endpoint}"]
    result = run("crop-pad", pattern, "-o", out, "--shape", "6,6", *given)
    assert result.exit_code == 2 and not out.exists(), result.stderr
    assert f"Error: {pattern!r} is a pattern, and -o takes one file; give --out-dir DIR" in result.stderr
    result = run("crop-pad", f"{s3.url}/raw", "-o", out, "--shape", "6,6", *given)
    assert result.exit_code == 2 and not out.exists(), result.stderr
    assert result.stderr.rstrip("\n").endswith("is a folder; give --out-dir DIR for the files in it")


def test_an_s3_folder_with_o_is_a_usage_error_as_a_local_one(s3: S3, shots: dict[str, bytes], tmp_path: Path) -> None:
    """-o took an s3:// folder as an object's name, 'Error: s3://.../raw: no such file' (exit 1),
    where a local folder there is a usage error that points to --out-dir."""
    out = tmp_path / "out.png"
    for folder in (f"{s3.url}/raw", f"{s3.url}/raw/"):
        result = run("crop-pad", folder, "-o", out, "--shape", "6,6")
        assert result.exit_code == 2 and not out.exists(), result.stderr
        assert f"Error: {folder} is a folder; give --out-dir DIR for the files in it" in result.stderr
    result = run("crop-pad", f"{s3.url}/raw/a.png", "-o", out, "--shape", "6,6")
    assert result.exit_code == 0 and out.exists(), result.stderr


@pytest.fixture
def silent_store() -> Iterator[tuple[str, list[Any]]]:
    """A server on 127.0.0.1 that takes every connection and never answers: its URL, and the
    connections it took."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    taken: list[Any] = []

    def take() -> None:
        while True:
            try:
                taken.append(server.accept()[0])
            except OSError:  # closed: the test is over
                return

    threading.Thread(target=take, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", taken
    finally:
        server.close()
        for connection in taken:
            connection.close()


# Loaded by the run's interpreter (sitecustomize on PYTHONPATH): geomcli's S3 timeouts, made short
_SHORT_TIMEOUTS = """
from geomcli.io import _remote
_remote.S3_TIMEOUTS = {"connect_timeout": 0.2, "read_timeout": 0.2}
"""


def test_a_store_that_never_answers_fails_the_file_within_geomclis_timeouts(silent_store: tuple[str, list[Any]],
                                                                            tmp_path: Path) -> None:
    """botocore waits 60 s for each read of an answer, at each of 25 tries of a HEAD (26 minutes
    before the file failed) and 125 of a GET (2 hours). geomcli's own timeouts are shorter, and
    --storage-option's config_kwargs (here its retries alone) is merged over them."""
    import subprocess
    import sys

    endpoint, taken = silent_store
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_SHORT_TIMEOUTS)
    done = subprocess.run([sys.executable, "-m", "geomcli", "info", "s3://bucket/a.png",
                           "--storage-option", f"endpoint_url={endpoint}",
                           "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}'],
                          capture_output=True, text=True, timeout=60,
                          env=hooked(hooks, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing"))
    assert done.returncode == 1
    assert done.stderr == f'Error: s3://bucket/a.png: cannot look at it (Read timeout on endpoint URL: "{endpoint}/' \
                          'bucket/a.png")\n'
    assert taken  # (it was reached, and held each request)


@pytest.fixture
def stalling_proxy(s3: S3) -> Iterator[tuple[str, list[tuple[str, str]], list[str]]]:
    """A server on 127.0.0.1 that passes each request to the S3 server, but takes a request the
    test names (its method and a part of its path, in the list it gives, empty at first) and never
    answers it: its URL, the list, and the requests it held ("GET /bucket/key"). A store that
    answers HEADs and stalls GETs, or stalls its chunks alone, or its PUTs."""
    import http.client

    stalled: list[tuple[str, str]] = []
    held: list[str] = []  # (this proxy's alone: a client of an earlier test's may still ask its own)
    over = threading.Event()
    upstream = s3.endpoint.removeprefix("http://")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if any(self.command == method and part in self.path for method, part in stalled):
                held.append(f"{self.command} {self.path}")
                over.wait()
                self.close_connection = True
                return
            connection = http.client.HTTPConnection(upstream, timeout=30)
            connection.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
            answer = connection.getresponse()
            data = answer.read()
            self.send_response_only(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data if self.command != "HEAD" else b"")
            connection.close()

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_any

    class Server(http.server.ThreadingHTTPServer):
        # a backlog past the 32 connections a batch opens at once: at socketserver's 5, a connection
        # the busy accept loop had not taken was dropped and tried again 1 s later, past a 0.5 s deadline
        request_queue_size = 128
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            # a client that gave up on a request (its deadline) breaks the pipe of the answer: the
            # traceback socketserver prints went into the stderr the CLI runner captured, among
            # the run's lines (a test counting them failed once in CI, 46 and 35 of 60 recognised)
            pass

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", stalled, held
    finally:
        over.set()
        server.shutdown()
        server.server_close()


def _stalled_line(url: str, seconds: float) -> str:
    return (f"Error: {url}: cannot read (the store stalled: not done within {round(seconds, 1):g} s, its tries "
            "included; --storage-option deadline_seconds=SECONDS waits longer)\n")


def test_a_get_that_stalls_fails_its_file_by_the_deadline_not_after_every_try(
        s3: S3, shots: dict[str, bytes], stalling_proxy: tuple[str, list[tuple[str, str]], list[str]],
        tmp_path: Path) -> None:
    """A store that answers the HEAD and never the GET: s3fs's 5 tries within 5 more, each of
    botocore's 5 held for its read timeout, half an hour at geomcli's 15 s; here 50 requests at
    0.2 s, 29 s. The deadline fails it at once, in one line, and it is not tried again: its
    header's check stalled, and its run then waited out the deadline a second time. (geomcli's
    timeouts here: one request held a deadline.)"""
    import time

    endpoint, stalled, held = stalling_proxy
    stalled.append(("GET", "/raw/a.png"))
    started = time.monotonic()
    result = run("crop-pad", f"{s3.url}/raw/a.png", f"{s3.url}/raw/b.png", "--out-dir", tmp_path / "out",
                 "--shape", "6,6", "--storage-option", f"endpoint_url={endpoint}",
                 "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}',
                 "--storage-option", "deadline_seconds=1.5")
    assert time.monotonic() - started < 12
    assert result.exit_code == 1
    lines = result.stderr.splitlines(keepends=True)
    assert lines[0] == _stalled_line(f"{s3.url}/raw/a.png", 1.5)
    assert lines[1].startswith("crop-pad: 1 ok, 1 failed, 0 skipped in ")
    assert tree(tmp_path / "out") == {"b.png": (tmp_path / "out" / "b.png").read_bytes()}
    assert held == [f"GET /{s3.bucket}/raw/a.png"]
    stopped = run("crop-pad", f"{s3.url}/raw/a.png", f"{s3.url}/raw/b.png", "--out-dir", tmp_path / "stopped",
                  "--shape", "6,6", "--fail-fast", "--storage-option", f"endpoint_url={endpoint}",
                  "--storage-option", "deadline_seconds=1.5")
    assert stopped.exit_code == 1  # (--fail-fast: its run fails it once more, and stops there)
    assert stopped.stderr.splitlines(keepends=True)[0] == _stalled_line(f"{s3.url}/raw/a.png", 1.5)
    assert not (tmp_path / "stopped" / "b.png").exists()


def test_a_zarr_chunk_that_stalls_fails_its_array_by_the_deadline_not_after_every_try(
        s3: S3, stalling_proxy: tuple[str, list[tuple[str, str]], list[str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The store read a chunk again twice after its GET's 25 tries: 150 requests held, 107 s at
    0.2 s (an hour and a half at 15 s, for every chunk). The deadline covers the store's tries too, and
    nothing is written."""
    import time

    pytest.importorskip("zarr")
    from geomcli.io._zarr_codecs import most_bytes

    data = np.arange(192, dtype=np.float32).reshape(1, 3, 8, 8)
    np.save(tmp_path / "in.npy", data)
    made = run("crop-pad", tmp_path / "in.npy", "-o", f"{s3.url}/in.zarr", "--shape", "1,3,8,8")
    assert made.exit_code == 0, made.stderr
    monkeypatch.setattr(_remote, "S3_TIMEOUTS", {"connect_timeout": 0.2, "read_timeout": 0.2})
    endpoint, stalled, held = stalling_proxy
    stalled.append(("GET", "/in.zarr/c/"))
    started = time.monotonic()
    result = run("crop-pad", f"{s3.url}/in.zarr", "-o", tmp_path / "out.npy", "--shape", "1,3,6,6",
                 "--storage-option", f"endpoint_url={endpoint}",
                 "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}',
                 "--storage-option", "deadline_seconds=1.5")
    assert time.monotonic() - started < 12
    assert result.exit_code == 1
    chunk_bytes = most_bytes((1, 3, 8, 8), 4)  # (the most its chunk may hold, read at SLOWEST_RATE)
    assert result.stderr == _stalled_line(f"{s3.url}/in.zarr/c/0/0/0/0", 1.5 + chunk_bytes / _remote.SLOWEST_RATE)
    assert not (tmp_path / "out.npy").exists()


def test_a_put_that_stalls_fails_its_file_by_the_deadline_and_leaves_no_object(
        s3: S3, shots: dict[str, bytes], stalling_proxy: tuple[str, list[tuple[str, str]], list[str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An output's PUT to a store that holds it: s3fs's 5 tries, each of botocore's 5 held for its
    read timeout (about 7 minutes at geomcli's 15 s). The deadline fails it, and nothing is there."""
    import re
    import time

    monkeypatch.setattr(_remote, "S3_TIMEOUTS", {"connect_timeout": 0.2, "read_timeout": 0.2})
    endpoint, stalled, held = stalling_proxy
    stalled.append(("PUT", "/out/a.png"))
    started = time.monotonic()
    result = run("crop-pad", tmp_path / "raw" / "a.png", tmp_path / "raw" / "b.png", "--out-dir", f"{s3.url}/out",
                 "--shape", "6,6", "--storage-option", f"endpoint_url={endpoint}",
                 "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}',
                 "--storage-option", "deadline_seconds=1.5")
    assert time.monotonic() - started < 12
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert re.fullmatch(rf"Error: {s3.url}/out/a\.png: cannot write \(the store stalled: not done within 1\.5 s, "
                        r"its tries included; --storage-option deadline_seconds=SECONDS waits longer\)", lines[0])
    assert lines[1].startswith("crop-pad: 1 ok, 1 failed, 0 skipped in ")
    assert s3.keys() == ["out/b.png", *sorted(f"raw/{name}" for name in shots)]


def test_a_zarr_whose_listing_stalls_fails_by_the_deadline(
        s3: S3, stalling_proxy: tuple[str, list[tuple[str, str]], list[str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether a zarr's URL is a folder, and readable, is asked by a listing request, which had
    no deadline: 14.6 s at 0.2 s timeouts and max_attempts 1 (minutes at geomcli's 15 s)."""
    import time

    pytest.importorskip("zarr")
    np.save(tmp_path / "in.npy", np.arange(192, dtype=np.float32).reshape(1, 3, 8, 8))
    made = run("crop-pad", tmp_path / "in.npy", "-o", f"{s3.url}/in.zarr", "--shape", "1,3,8,8")
    assert made.exit_code == 0, made.stderr
    monkeypatch.setattr(_remote, "S3_TIMEOUTS", {"connect_timeout": 0.2, "read_timeout": 0.2})
    endpoint, stalled, held = stalling_proxy
    stalled.append(("GET", "list-type=2"))
    started = time.monotonic()
    result = run("crop-pad", f"{s3.url}/in.zarr", "-o", tmp_path / "out.npy", "--shape", "1,3,6,6",
                 "--storage-option", f"endpoint_url={endpoint}",
                 "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}',
                 "--storage-option", "deadline_seconds=1")
    assert time.monotonic() - started < 8
    assert result.exit_code == 1
    assert result.stderr == _stalled_line(f"{s3.url}/in.zarr", 1)
    assert not (tmp_path / "out.npy").exists()


@pytest.mark.parametrize(("given", "more"), [("{url}/raw/", []), ("{url}/raw/*.png", []), ("{url}/raw/", ["-r"])])
def test_a_listing_whose_pages_stall_fails_by_the_deadline(
        s3: S3, shots: dict[str, bytes], stalling_proxy: tuple[str, list[tuple[str, str]], list[str]],
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str, more: list[str]) -> None:
    """A folder's or a glob's listing on a store whose list requests stall had no deadline: a
    glob's took 8 s at 0.2 s timeouts with max_attempts 1 and deadline_seconds=1, 10 pages held
    (about 12 minutes at geomcli's timeouts). Each page now has the deadline of one request."""
    import time

    monkeypatch.setattr(_remote, "S3_TIMEOUTS", {"connect_timeout": 0.2, "read_timeout": 0.2})
    endpoint, stalled, held = stalling_proxy
    # the listing's pages (all depths: no delimiter), not the request that asks whether a name is a folder (max-keys=1)
    stalled.append(("GET", "delimiter=%2F&encoding-type=url" if not more else "delimiter=&encoding-type=url"))
    started = time.monotonic()
    result = run("crop-pad", given.format(url=s3.url), *more, "--out-dir", tmp_path / "out", "--shape", "6,6",
                 "--storage-option", f"endpoint_url={endpoint}",
                 "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}',
                 "--storage-option", "deadline_seconds=1")
    # the requests it made, not its wall time, tell the deadline kept (a loaded machine took over 4 s):
    # 1 s of 0.2 s timeouts holds at most 5 requests, where the old run held 10 pages over 8 s
    assert len(held) <= 6, held
    assert time.monotonic() - started < 7, held
    assert result.stderr.splitlines()[0] == (
        f"Error: {s3.url}/raw: cannot list the folder (the store stalled: not done within 1 s, its "
        "tries included; --storage-option deadline_seconds=SECONDS waits longer)")
    assert result.exit_code == 1 and not (tmp_path / "out").exists()


@pytest.mark.cluster
@pytest.mark.parametrize("checked_by", ["here", "workers"])
def test_a_batch_on_dask_does_not_send_a_stalled_file_again(
        s3: S3, shots: dict[str, bytes], stalling_proxy: tuple[str, list[tuple[str, str]], list[str]], scheduler: str,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checked_by: str) -> None:
    """A file whose read timed out is sent again, up to IO_RETRIES times (the failure may pass);
    one past its deadline is not: its GET is held once, by its header's check, and its run is not
    sent (it was held once more on a worker, and with a stall taken for a passing failure, twice
    more). Where the workers check the headers (past HEADERS_HERE inputs), its check sends the
    stall back: its run was sent, and held the GET a second time."""
    from geomcli.engine import cluster

    if checked_by == "workers":
        monkeypatch.setattr(cluster, "HEADERS_HERE", 0)
    endpoint, stalled, held = stalling_proxy
    stalled.append(("GET", "/raw/a.png"))
    result = run("crop-pad", f"{s3.url}/raw/*.png", "--out-dir", tmp_path / "out", "--shape", "6,6",
                 "--scheduler", scheduler, *s3.options, "--storage-option", f"endpoint_url={endpoint}",
                 "--storage-option", "deadline_seconds=1.5")
    assert result.exit_code == 1
    lines = result.stderr.splitlines(keepends=True)
    assert lines[0] == _stalled_line(f"{s3.url}/raw/a.png", 1.5)
    assert lines[1].startswith("crop-pad: 1 ok, 1 failed, 0 skipped in ")
    assert [request.split("?")[0] for request in held] == [f"GET /{s3.bucket}/raw/a.png"]
    assert tree(tmp_path / "out") == {"b.png": (tmp_path / "out" / "b.png").read_bytes()}


def test_a_store_that_answers_nothing_is_given_up_after_a_few_stalls_not_waited_on_for_every_file(
        s3: S3, stalling_proxy: tuple[str, list[tuple[str, str]], list[str]], tmp_path: Path) -> None:
    """Each file of a store that answers no request waited out its deadline, 32 at a time: 10,000
    names from --files-from took about 5 hours to fail (60 s each), here 160 names 5 deadlines.
    Once STALLS_IN_A_ROW requests in a row have stalled with nothing answered meanwhile, the
    store's other files fail at once, each in a line naming the store: STALLS_IN_A_ROW waves of
    deadlines (requests side by side that one outage stalls are one stall). Another
    store's file is done, and nothing of the dead one's is written."""
    import re

    from geomcli.engine.plan import REMOTE_HEADER_THREADS

    rng = np.random.default_rng(3)
    other = f"{s3.bucket}-other"
    s3.client.create_bucket(Bucket=other)
    s3.client.put_object(Bucket=other, Key="good/a.png", Body=png_bytes(rng))
    data = png_bytes(rng)
    names = [s3.put(f"raw/{index:03d}.png", data) for index in range(160)]
    (tmp_path / "list.txt").write_text("\n".join([f"s3://{other}/good/a.png", *names]) + "\n")
    endpoint, stalled, held = stalling_proxy
    stalled += [("HEAD", f"/{s3.bucket}/raw/"), ("GET", f"/{s3.bucket}/raw/")]
    result = run("crop-pad", "--files-from", tmp_path / "list.txt", "--out-dir", tmp_path / "out", "--shape", "6,6",
                 "--storage-option", f"endpoint_url={endpoint}",
                 "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}',
                 "--storage-option", "deadline_seconds=0.5")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("crop-pad: 1 ok, 160 failed, 0 skipped in ")
    waited = [line for line in lines[:-1] if line.endswith(
        ": cannot look at it (the store stalled: not done within 0.5 s, its tries included; "
        "--storage-option deadline_seconds=SECONDS waits longer)")]
    given_up = [line for line in lines[:-1] if re.fullmatch(
        rf"Error: {s3.url}/raw/\d{{3}}\.png: cannot look at it \(not asked: {s3.url} answered none of the last "
        r"\d+ requests, each given its deadline, and is taken for dead in this run; --storage-option "
        r"deadline_seconds=SECONDS waits longer\)", line)]
    assert len(waited) + len(given_up) == 160 == len(lines) - 1
    # STALLS_IN_A_ROW waves of requests side by side, each wave one stall (one outage), then none asked
    assert _remote.STALLS_IN_A_ROW <= len(waited) <= _remote.STALLS_IN_A_ROW * REMOTE_HEADER_THREADS
    assert given_up
    assert tree(tmp_path / "out") == {"a.png": (tmp_path / "out" / "a.png").read_bytes()}


@pytest.mark.parametrize("how", [pytest.param("--scheduler", marks=pytest.mark.cluster), "-j"])
def test_a_store_that_dies_after_the_check_costs_a_few_deadlines_not_some_for_every_task(
        how: str, s3: S3, stalling_proxy: tuple[str, list[tuple[str, str]], list[str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """A store that answers every request of the header check, then none once the files start.
    Each cluster task counted its own stalls, so each paid up to STALLS_IN_A_ROW deadlines: 10,000
    files in tasks of 20, hours. The tasks sent after one took the store for dead name it, and
    its files fail at once in the same line; only the tasks already in flight wait (here 2 a
    worker). A -j worker counts its own: STALLS_IN_A_ROW deadlines each. Nothing is written."""
    import re
    import time

    from geomcli import io
    from geomcli.engine import cluster, workers

    rng = np.random.default_rng(5)
    # (past io.HEAD_BYTES: the check reads a header's first bytes, the run the whole object)
    data = png_bytes(rng, (160, 160, 3))
    assert len(data) > io.HEAD_BYTES
    for index in range(60):
        s3.put(f"raw/{index:02d}.png", data)
    endpoint, stalled, held = stalling_proxy
    starting = workers._one_thread  # (the task as the files start, the check done)

    def dies(task: Any) -> Any:
        stalled.extend((method, f"/{s3.bucket}/") for method in ("HEAD", "GET", "PUT", "POST"))
        return starting(task)

    monkeypatch.setattr(workers, "_one_thread", dies)
    sent: list[tuple[str, ...]] = []
    submit = cluster._Dispatch._submit

    def noted(self: Any, batch: list[Any], after_death: bool) -> None:
        sent.append(self.task.dead_stores)
        submit(self, batch, after_death)

    monkeypatch.setattr(cluster._Dispatch, "_submit", noted)
    where = request.getfixturevalue("scheduler") if how == "--scheduler" else "2"
    deadline = 1.0
    started = time.monotonic()
    result = run("crop-pad", f"{s3.url}/raw/*.png", "--out-dir", tmp_path / "out", "--shape", "6,6", how, where,
                 *s3.options, "--storage-option", f"endpoint_url={endpoint}",
                 "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}',
                 "--storage-option", f"deadline_seconds={deadline:g}")
    took = time.monotonic() - started
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("crop-pad: 0 ok, 60 failed, 0 skipped in ")
    each = deadline + len(data) / _remote.SLOWEST_RATE  # (a GET's deadline grows with the bytes it moves)
    # the request that stalls is the whole object, or (where a worker reads it in two) its head or its tail
    deadlines = {f"{round(deadline + size / _remote.SLOWEST_RATE, 1):g}"
                 for size in (len(data), io.HEAD_BYTES, len(data) - io.HEAD_BYTES)}
    waited = [line for line in lines[:-1] if (match := re.fullmatch(
        rf"Error: {s3.url}/raw/\d\d\.png: cannot read \(the store stalled: not done within ([\d.]+) s, "
        r"its tries included; --storage-option deadline_seconds=SECONDS waits longer\)", line))
              and match[1] in deadlines]
    given_up = [line for line in lines[:-1] if re.fullmatch(
        rf"Error: {s3.url}/raw/\d\d\.png: cannot read \(not asked: {s3.url} answered none of the last "
        rf"{_remote.STALLS_IN_A_ROW} requests, each given its deadline, and is taken for dead in this run; "
        r"--storage-option deadline_seconds=SECONDS waits longer\)", line)]
    unrecognised = [line for line in lines[:-1] if line not in waited + given_up]
    assert len(waited) + len(given_up) == 60 == len(lines) - 1, unrecognised
    assert len(held) <= len(waited)  # (a deadline waited out: one request held, or waiting its turn to be sent)
    if how == "--scheduler":
        # the tasks sent before the first came back (2 workers of one thread) waited
        # STALLS_IN_A_ROW deadlines each at most, and every task sent after names the store
        assert len(waited) <= _remote.STALLS_IN_A_ROW * cluster.IN_FLIGHT * 2  # (each task its own: 28, 20 s)
        first = len([dead for dead in sent if not dead])
        assert first <= cluster.IN_FLIGHT * 2 < len(sent)
        assert sent[first:] == [(s3.url,)] * (len(sent) - first)
        assert took < each * _remote.STALLS_IN_A_ROW * cluster.IN_FLIGHT + 10, took
    else:  # (this process does files too while its workers start)
        assert not sent
        assert len(waited) <= _remote.STALLS_IN_A_ROW * (2 + 1)
        assert took < each * _remote.STALLS_IN_A_ROW * 2 + 10, took
    assert not (tmp_path / "out").exists() or tree(tmp_path / "out") == {}


@pytest.mark.cluster
def test_the_checks_of_headers_on_the_workers_give_a_dead_store_to_the_checks_sent_after(
        s3: S3, stalling_proxy: tuple[str, list[tuple[str, str]], list[str]], scheduler: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past HEADERS_HERE inputs the workers check the headers, in tasks that each counted their own
    stalls: every check of a dead store's files waited out its deadline. The checks sent after
    one gave the store up are given it, and fail its files at once; none is sent to be done. (A
    check reads REMOTE_HEADER_THREADS headers side by side, one stall a wave: a check of 70 gives
    the store up in its third wave.)"""
    import re

    from geomcli.engine import cluster

    monkeypatch.setattr(cluster, "HEADERS_HERE", 0)
    monkeypatch.setattr(cluster, "HEADER_TASK_FILES", 70)  # 5 checks, 4 in flight
    from concurrent.futures import ThreadPoolExecutor

    data = png_bytes(np.random.default_rng(6))
    with ThreadPoolExecutor(8) as putting:  # (one by one, the 350 took 2.7 s)
        list(putting.map(lambda index: s3.put(f"raw/{index:03d}.png", data), range(350)))
    endpoint, stalled, held = stalling_proxy
    stalled += [("HEAD", f"/{s3.bucket}/raw/"), ("GET", f"/{s3.bucket}/raw/")]
    result = run("crop-pad", f"{s3.url}/raw/*.png", "--out-dir", tmp_path / "out", "--shape", "6,6",
                 "--scheduler", scheduler, *s3.options, "--storage-option", f"endpoint_url={endpoint}",
                 "--storage-option", "deadline_seconds=0.5")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("crop-pad: 0 ok, 350 failed, 0 skipped in ")
    assert all(re.fullmatch(rf"Error: {s3.url}/raw/\d\d\d\.png: cannot read \((the store stalled: not done within 0.5 "
                            rf"s|not asked: {s3.url} answered none of the last \d+ requests).*", line)
               for line in lines[:-1]), lines
    # the deadlines waited out: the checks in flight as the first gave up (without: all 350)
    waited = [line for line in lines if "(the store stalled: " in line]
    assert len(held) <= len(waited) <= cluster.HEADER_TASK_FILES * cluster.IN_FLIGHT * 2 < 350
    assert not (tmp_path / "out").exists()


def test_info_gives_up_a_store_that_answers_nothing_after_a_few_stalls(
        s3: S3, stalling_proxy: tuple[str, list[tuple[str, str]], list[str]], tmp_path: Path) -> None:
    """info reads its files one after another: each of a dead store's waited out its deadline."""
    data = png_bytes(np.random.default_rng(4))
    names = [s3.put(f"raw/{index}.png", data) for index in range(8)]
    (tmp_path / "list.txt").write_text("\n".join(names) + "\n")
    endpoint, stalled, held = stalling_proxy
    stalled += [("HEAD", "/raw/"), ("GET", "/raw/")]
    result = run("info", "--files-from", tmp_path / "list.txt", "--storage-option", f"endpoint_url={endpoint}",
                 "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}',
                 "--storage-option", "deadline_seconds=0.5")
    assert result.exit_code == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 8
    assert all("(the store stalled: not done within 0.5 s" in line for line in lines[:_remote.STALLS_IN_A_ROW])
    assert all(f"(not asked: {s3.url} answered none of the last {_remote.STALLS_IN_A_ROW} requests" in line
               for line in lines[_remote.STALLS_IN_A_ROW:])
    assert len(held) == _remote.STALLS_IN_A_ROW


def test_a_store_is_taken_for_dead_only_after_stalls_in_a_row_with_nothing_answered_meanwhile() -> None:
    """A slow store is never given up: a stall while another request was answered is not counted,
    and an answer (an object, or the store's refusal) starts the count again. Outside a batch
    (watching_stores) nothing is counted."""
    url = "s3://bucket/a.png"

    def stall() -> None:
        with pytest.raises(_remote.StalledError, match="the store stalled"), _remote._watched(url, "read"):
            raise _remote.stalled(url, "read", 1)

    def answer(refused: bool = False) -> None:
        with pytest.raises(FileNotFoundError) if refused else contextlib.nullcontext(), _remote._watched(url, "read"):
            if refused:
                raise FileNotFoundError(url)

    for _ in range(_remote.STALLS_IN_A_ROW + 1):
        stall()  # (no batch: counted nowhere)
    with _remote.watching_stores():
        for _ in range(_remote.STALLS_IN_A_ROW - 1):
            stall()
        answer(refused=True)
        for _ in range(_remote.STALLS_IN_A_ROW - 1):
            stall()
        answer()
        slow = _remote._watched(url, "read")  # waits while another is answered
        slow.__enter__()
        for _ in range(_remote.STALLS_IN_A_ROW - 1):
            stall()
        answer()
        assert not slow.__exit__(_remote.StalledError, _remote.stalled(url, "read", 1), None)
        for _ in range(_remote.STALLS_IN_A_ROW - 1):
            stall()
        answer()  # (none counted but these: asked still)
        for _ in range(_remote.STALLS_IN_A_ROW):
            stall()
        with pytest.raises(_remote.StalledError, match=r"^s3://bucket/a\.png: cannot read \(not asked: s3://bucket "
                           rf"answered none of the last {_remote.STALLS_IN_A_ROW} requests"):
            answer()
        with _remote._watched("s3://another/a.png", "read"):
            pass  # (another store: asked)
    answer()  # (the batch over)


def test_the_stores_a_task_took_for_dead_go_with_the_tasks_sent_after_it() -> None:
    """Each cluster task counts its own stalls: the stores it gives up are sent back
    (dead_stores), and a task that names them (Task.dead_stores, through cluster._not_asking)
    asks them nothing, each request refused in the line the first task's own were."""
    from geomcli.engine import cluster
    from geomcli.engine.operations import CropPad
    from geomcli.engine.options import Common
    from geomcli.engine.plan import Task

    url = "s3://bucket/a.png"

    def refused() -> str:
        with pytest.raises(_remote.StalledError, match="not asked") as caught, _remote._watched(url, "read"):
            pass
        return str(caught.value)

    assert _remote.dead_stores() == ()  # (no batch)
    with _remote.watching_stores():
        for _ in range(_remote.STALLS_IN_A_ROW):
            with pytest.raises(_remote.StalledError), _remote._watched(url, "read"):
                raise _remote.stalled(url, "read", 1)
        with _remote._watched("s3://another/a.png", "read"):
            pass
        first = _remote.dead_stores()
        line = refused()
    assert first == ("s3://bucket",)
    task = Task(CropPad((2, 2)), Common())
    later = cluster._not_asking(task, first)
    assert later.dead_stores == ("s3://bucket",) and cluster._not_asking(later, first) is later
    assert cluster._not_asking(later, ["s3://zz", "gs://aa"]).dead_stores == ("gs://aa", "s3://bucket", "s3://zz")
    with _remote.watching_stores(later.dead_stores):
        assert refused() == line
        with _remote._watched("s3://another/a.png", "read"):
            pass  # (another store: asked)
        assert _remote.dead_stores() == ("s3://bucket",)
    with _remote.watching_stores(task.dead_stores), _remote._watched(url, "read"):
        pass  # (a task that names none asks it)


def test_requests_side_by_side_stalled_by_one_outage_are_one_stall_not_a_dead_store() -> None:
    """A batch reads 32 headers at once: one outage of a deadline's length stalled them all with
    nothing answered meanwhile, and the store was taken for dead, every later file of a healthy
    store failed at once. Requests begun before the last stall counted are that same silence: it
    takes STALLS_IN_A_ROW outages one after another, each seen by a request begun after the last."""
    from geomcli.engine.plan import REMOTE_HEADER_THREADS

    url = "s3://bucket/a.png"

    def side_by_side(count: int) -> None:
        held = [_remote._watched(url, "read") for _ in range(count)]
        for request in held:
            request.__enter__()
        for request in held:
            assert not request.__exit__(_remote.StalledError, _remote.stalled(url, "read", 1), None)

    with _remote.watching_stores():
        side_by_side(REMOTE_HEADER_THREADS)
        with _remote._watched(url, "read"):
            pass  # asked still: the outage was one stall
        for _ in range(_remote.STALLS_IN_A_ROW - 1):
            side_by_side(4)
        with _remote._watched(url, "read"):
            pass  # (its answer starts the count again)
        for _ in range(_remote.STALLS_IN_A_ROW):
            side_by_side(4)
        with pytest.raises(_remote.StalledError, match=rf"not asked: s3://bucket answered none of the last "
                           rf"{_remote.STALLS_IN_A_ROW} requests"), _remote._watched(url, "read"):
            pass


def test_the_deadline_is_geomclis_option_and_a_stall_is_no_failure_that_may_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """deadline_seconds goes to no filesystem (s3fs refused it as no option of its own); null is no
    deadline, text a usage error; a stall raised from a timeout is not sent again by a batch on Dask."""
    from geomcli.errors import PlanError

    monkeypatch.setattr(_remote, "_options", {"deadline_seconds": 30, "anon": True})
    assert _remote.filesystem_options("s3://bucket/a.png")["anon"] is True
    assert "deadline_seconds" not in _remote.filesystem_options("s3://bucket/a.png")
    assert _remote.deadline() == 30 and _remote.deadline(_remote.SLOWEST_RATE * 10) == 40
    monkeypatch.setattr(_remote, "_options", {"deadline_seconds": None})
    assert _remote.deadline(10 << 20) is None
    monkeypatch.setattr(_remote, "_options", {})
    assert _remote.deadline() == _remote.DEADLINE_SECONDS
    for refused, typed in (("soon", "soon"), (0, "0"), (True, "true")):
        monkeypatch.setattr(_remote, "_options", {"deadline_seconds": refused})
        with pytest.raises(PlanError, match=f"deadline_seconds={typed}: a number of seconds above 0, or null"):
            _remote.filesystem("s3://bucket/a.png")
    try:
        raise _remote.stalled("s3://bucket/a.png", "read", 60) from TimeoutError()
    except _remote.StalledError as error:
        assert not _remote.may_pass(error)
        assert _remote.may_pass(error.__cause__)  # (a timeout alone may pass)


def test_geomclis_s3_timeouts_are_under_the_storage_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key --storage-option's config_kwargs gives wins; the zarr store's filesystem has them too."""
    from geomcli.io import _zarr

    monkeypatch.setattr(_remote, "_options", {})
    assert _remote.filesystem("s3://bucket/a.png")[0].config_kwargs == {"connect_timeout": 10, "read_timeout": 15}
    given = {"read_timeout": 60, "retries": {"max_attempts": 1}}
    _remote.configure({"config_kwargs": given})
    try:
        for fs in (_remote.filesystem("s3://bucket/a.png")[0], _zarr._store("s3://bucket/a.zarr", read_only=True).fs):
            assert (fs.config_kwargs["connect_timeout"], fs.config_kwargs["read_timeout"]) == (10, 60)
            assert "retries" in fs.config_kwargs
        assert _remote.filesystem_options("https://host/a.png") == {"config_kwargs": given}  # (S3's alone)
    finally:
        _remote.configure(())


@pytest.mark.parametrize("command", [["info"], ["crop-pad", "-o", "OUT", "--shape", "1,1"]])
@pytest.mark.parametrize("refused", ["abc", "0", "-1", "true"])
def test_a_bad_deadline_is_a_usage_error_where_no_url_is_read(tmp_path: Path, command: list[str],
                                                             refused: str) -> None:
    """A run of local files never checked deadline_seconds: 'info a.png --storage-option
    deadline_seconds=abc' exited 0. It is checked as the command line is read: exit 2, nothing
    written."""
    source, out = tmp_path / "a.npy", tmp_path / "o.npy"
    np.save(source, np.zeros((2, 2), np.uint8))
    args = [str(out) if arg == "OUT" else arg for arg in command]
    result = run(*args[:1], source, *args[1:], "--storage-option", f"deadline_seconds={refused}")
    assert result.exit_code == 2
    assert f"deadline_seconds={refused}: a number of seconds above 0, or null for none" in result.stderr
    assert not out.exists()
