"""Hostile inputs, faults and fuzzing through the command line: every bad file costs one line
``Error: <path>: <reason>`` and exit 1, nothing is unpickled, and no partial or temp file is left.

The io-level cases (tests/test_io.py) show the readers refuse these files; here the same files go
through every command, one file at a time and in batches, in process (CliRunner) and as real
processes where only a process shows it (signals, pipes, a full disk, another user).
"""

from __future__ import annotations

import errno
import functools
import io as bytes_io
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geomcli import io

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data"
GEOMCLI = [sys.executable, "-m", "geomcli"]
# the temp names of geomcli/io/_atomic.py: .NAME.<8 characters>.tmp
TEMP = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
FUZZ_EXAMPLES = int(os.environ.get("GEOMCLI_FUZZ_EXAMPLES", "60"))


def one_error(stderr: str, name: str | Path | None = None) -> str:
    """The single ``Error: <path>: <reason>`` line of ``stderr``, checked; its reason."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: "), stderr
    if name is not None:
        assert lines[0].startswith(f"Error: {name}: "), stderr
    return lines[0]


def temps(folder: Path) -> list[str]:
    """Temp files left anywhere under ``folder``."""
    return sorted(str(path) for path in folder.rglob("*") if TEMP.match(path.name))


def assert_clean(folder: Path, *absent: Path) -> None:
    assert temps(folder) == []
    for path in absent:
        assert not os.path.lexists(path), path


# ---- the hostile inputs -----------------------------------------------------------------------


@functools.cache
def valid_bytes(fmt: str) -> bytes:
    """A small valid file of ``fmt``, written by geomcli itself."""
    rng = np.random.default_rng(11)
    shape = {"gif": (16, 20), "npy": (1, 3, 16, 20), "tiff": (16, 20, 3)}.get(fmt, (16, 20, 3))
    data = rng.integers(0, 255, shape).astype(np.float32 if fmt == "npy" else np.uint8)
    return _written(data, fmt)


def _written(data: np.ndarray, fmt: str) -> bytes:
    """The bytes geomcli.io writes for ``data`` in ``fmt`` (through the public writer)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"x.{fmt}")
        io.write_array(data, path)
        return Path(path).read_bytes()


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_bomb() -> bytes:
    """A PNG declaring 100000 x 100000 RGB with 64 bytes of data (Pillow's bomb limit is far less)."""
    ihdr = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(b"\0" * 64))
            + _chunk(b"IEND", b""))


def gif_bomb() -> bytes:
    return (b"GIF89a" + struct.pack("<HH", 60000, 60000) + b"\0\0\0" + b"," + struct.pack("<HHHH", 0, 0, 1, 1)
            + b"\0" + b"\x02\x02\x44\x01\0" + b";")


def bmp_bomb() -> bytes:
    """A BMP header declaring 50000 x 50000 24-bit pixels, with none of them."""
    header = struct.pack("<IiiHHIIiiII", 40, 50_000, 50_000, 1, 24, 0, 0, 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + len(header), 0, 0, 14 + len(header)) + header


def jpeg_bomb() -> bytes:
    """A valid JPEG whose frame header says 65500 x 65500."""
    whole = bytearray(valid_bytes("jpeg"))
    at = whole.index(b"\xff\xc0")
    struct.pack_into(">HH", whole, at + 5, 65500, 65500)
    return bytes(whole)


def npy_with_header(text: str, version: tuple[int, int] = (1, 0), data: bytes = b"") -> bytes:
    body = text.encode("latin1")
    size = "<H" if version == (1, 0) else "<I"
    pad = -(6 + 2 + struct.calcsize(size) + len(body) + 1) % 64
    body += b" " * pad + b"\n"
    return b"\x93NUMPY" + bytes(version) + struct.pack(size, len(body)) + body + data


def tiff_patched(data: np.ndarray, patches: dict[int, int], **imwrite: Any) -> bytes:
    """A little-endian classic TIFF by tifffile with LONG values patched into its first IFD."""
    import tifffile

    buffer = bytes_io.BytesIO()
    tifffile.imwrite(buffer, data, photometric="minisblack", metadata=None, **imwrite)
    raw = bytearray(buffer.getvalue())
    ifd = struct.unpack_from("<I", raw, 4)[0]
    for i in range(struct.unpack_from("<H", raw, ifd)[0]):
        entry = ifd + 2 + 12 * i
        tag = struct.unpack_from("<H", raw, entry)[0]
        if tag in patches:
            struct.pack_into("<HHII", raw, entry, tag, 4, 1, patches[tag])
    return bytes(raw)


def animation(fmt: str, frames: int) -> bytes:
    from PIL import Image

    images = [Image.new("RGB", (8, 8), (i % 256, 0, 0)) for i in range(frames)]
    buffer = bytes_io.BytesIO()
    images[0].save(buffer, fmt.upper(), save_all=True, append_images=images[1:])
    return buffer.getvalue()


class CreatesFile:
    """Unpickling this creates a file: the payload a hostile .npy would carry."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (self.path, "w"))


def pickle_npy(target: Path) -> bytes:
    data = np.empty(2, dtype=object)
    data[0], data[1] = CreatesFile(str(target)), CreatesFile(str(target))
    buffer = bytes_io.BytesIO()
    np.save(buffer, data, allow_pickle=True)
    return buffer.getvalue()


# (case id, bytes), by format; the cuts are taken at several offsets of a valid file
Case = tuple[str, Callable[[Path], bytes]]


def hostile_cases(fmt: str) -> list[Case]:
    noise = np.random.default_rng(3).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    whole = valid_bytes(fmt)
    cuts = {1, 7, 16, 40, len(whole) // 3, len(whole) // 2}
    if fmt != "gif":  # a GIF cut in its last bytes (terminator, trailer) still holds every pixel
        cuts.add(len(whole) - 1)
    cases: list[Case] = [
        ("empty", lambda _: b""),
        *[(f"cut{cut}", lambda _, cut=cut: whole[:cut]) for cut in sorted(cuts)],
        ("noise", lambda _: b"\0" + noise),
        ("magic+noise", lambda _: whole[:16] + noise),
    ]  # a valid file of another format is no longer hostile: it is read by its content, with a warning
    specific: dict[str, list[Case]] = {
        "npy": [
            ("pickle", lambda folder: pickle_npy(folder / "PWNED")),
            ("petabytes", lambda _: npy_with_header(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000, 100000000), }")),
            ("no-shape", lambda _: npy_with_header("{'descr': '<f4', 'fortran_order': False}")),
            ("negative", lambda _: npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }")),
            ("bad-descr", lambda _: npy_with_header("{'descr': 'zz9', 'fortran_order': False, 'shape': (2,), }")),
            ("code", lambda _: npy_with_header("__import__('os').system('touch PWNED')")),
            ("version", lambda _: npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", (9, 9))),
            ("long-header", lambda _: b"\x93NUMPY\x02\x00" + struct.pack("<I", 2**31) + b"{'descr'"),
            ("short-data", lambda _: npy_with_header(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 16, 20), }", data=b"\0" * 100)),
        ],
        "tiff": [
            ("million-squared", lambda _: tiff_patched(np.zeros((4, 5), np.uint8),
                                                       {256: 1_000_000, 257: 1_000_000, 278: 1_000_000})),
            ("lerc", lambda _: tiff_patched(np.ones((4, 5), np.uint8), {259: 34887}, compression="zlib")),
            ("offsets-past-end", lambda _: tiff_patched(np.ones((4, 5), np.uint8), {273: 10**9})),
        ],
        "png": [("bomb", lambda _: png_bomb()), ("apng", lambda _: animation("png", 40))],
        "gif": [("bomb", lambda _: gif_bomb()), ("frames", lambda _: animation("gif", 300))],
        "webp": [("frames", lambda _: animation("webp", 300))],
        "bmp": [("bomb", lambda _: bmp_bomb())],
        "jpeg": [("bomb", lambda _: jpeg_bomb())],
    }
    return cases + specific[fmt]


# paths that are not files: (case id, maker of the path in a folder)
def _folder(folder: Path, name: str) -> Path:
    (folder / name).mkdir()
    return folder / name


def _through_a_file(folder: Path, name: str) -> Path:
    (folder / "plain").write_bytes(b"x")
    return folder / "plain" / name


def _fifo(folder: Path, name: str) -> Path:
    os.mkfifo(folder / name)
    return folder / name


def _link(target: str) -> Callable[[Path, str], Path]:
    def make(folder: Path, name: str) -> Path:
        os.symlink(target, folder / name)
        return folder / name

    return make


PATH_CASES: dict[str, Callable[[Path, str], Path]] = {
    "folder": _folder,
    "missing": lambda folder, name: folder / name,
    "through-a-file": _through_a_file,
    "fifo-no-writer": _fifo,
    "dev-zero": _link("/dev/zero"),
    "proc-mem": _link("/proc/self/mem"),
    "dangling-link": _link("/nonexistent/x"),
}


def commands(fmt: str, path: Path, out: Path) -> list[list[str]]:
    """Every command that reads ``path``; outputs to ``out``."""
    tensor = ["--layout", "NCHW"] if fmt in ("npy",) else []
    runs = [
        ["crop-pad", str(path), "-o", str(out), "--shape", "4,4", "--axes", "-2,-1"],
        ["space-to-depth", str(path), "-o", str(out), "--blocksize", "2", *tensor],
        ["depth-to-space", str(path), "-o", str(out), "--blocksize", "1", *tensor],
        ["affine-grid", "--like", str(path), "--rotate", "10", "-o", str(out)],
        ["info", str(path)],
    ]
    if fmt in ("npy", "tiff"):
        runs.append(["affine-grid", "--size", "1,1,4,4", "--theta", str(path), "-o", str(out)])
    return runs


@pytest.fixture
def quick_fifo(monkeypatch: pytest.MonkeyPatch) -> None:
    """A FIFO that never gets a writer is empty after 0.05 s instead of 2."""
    monkeypatch.setattr("geomcli.io._stream._WRITER_GRACE", 0.05)


TALLY: dict[str, int] = {}


def _count(fmt: str, n: int = 1) -> None:
    TALLY[fmt] = TALLY.get(fmt, 0) + n


@pytest.mark.parametrize("fmt", io.FORMATS)
def test_every_hostile_file_is_one_error_line_for_every_command(
    fmt: str, tmp_path: Path, quick_fifo: None
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    cases = [(case, inputs / f"{case}.{fmt}") for case, _ in hostile_cases(fmt)]
    for (_, make), (_, path) in zip(hostile_cases(fmt), cases, strict=True):
        path.write_bytes(make(inputs))
    for case, make_path in PATH_CASES.items():
        cases.append((case, make_path(inputs, f"{case}.{fmt}")))
    for case, path in cases:
        out = out_dir / f"{case}.npy"
        for args in commands(fmt, path, out):
            result = run(*args)
            _count(fmt)
            if case == "folder":
                # a folder where one file is named is a usage mistake (exit 2): batch runs take folders
                assert result.exit_code in (1, 2), result.stderr
                # a transform's -o takes one file; info takes folders, and this one holds no file it reads
                assert any(reason in result.stderr for reason in
                           ("is a folder; give --out-dir", "is a directory", "has no file geomcli reads"))
                if result.exit_code == 1:  # --theta takes a file or numbers: read, then refused
                    one_error(result.stderr, path)
                continue
            if args[0] == "info" and case in ("frames", "apng") and result.exit_code == 0:
                continue  # info shows an animation's frames stacked, where the transforms want --frames
            if "--like" in args and result.exit_code == 0:
                # --like reads the header only: a file cut after it, or one with pixels that cannot
                # be decoded, still has one
                assert case.startswith("cut") or case in ("frames", "apng", "lerc", "offsets-past-end", "short-data")
                out.unlink()
                continue
            assert result.exit_code == 1, (case, args, result.stderr)
            one_error(result.stderr, path if "--like" not in args else None)
        assert_clean(tmp_path, out, inputs / "PWNED", Path("PWNED"))


@pytest.mark.parametrize("fmt", io.FORMATS)
def test_a_batch_of_hostile_files_names_each_once_and_writes_the_rest(
    fmt: str, tmp_path: Path, quick_fifo: None
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    good = inputs / f"good.{fmt}"
    good.write_bytes(valid_bytes(fmt))
    bad = []
    for case, make in hostile_cases(fmt):
        (inputs / f"{case}.{fmt}").write_bytes(make(inputs))
        bad.append(inputs / f"{case}.{fmt}")
    named = [make_path(inputs, f"{case}.{fmt}") for case, make_path in PATH_CASES.items()
             if case not in ("folder",)]
    out_dir = tmp_path / "out"
    args = ["crop-pad", *map(str, bad), str(good), *map(str, named), "--out-dir", str(out_dir),
            "--shape", "4,4", "--axes", "-2,-1", "-q", "-j", "1", "--name", "{stem}.npy"]
    result = run(*args)
    assert result.exit_code == 1, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert sorted(errors) == sorted(set(errors))
    for path in [*bad, *named]:
        assert sum(line.startswith(f"Error: {path}: ") for line in errors) == 1, (path, result.stderr)
    assert os.listdir(out_dir) == ["good.npy"]
    assert np.load(out_dir / "good.npy").shape[-2:] == (4, 4)
    assert_clean(tmp_path, inputs / "PWNED")
    _count(fmt, len(bad) + len(named))


def test_hostile_files_through_real_processes_single_and_in_workers(tmp_path: Path) -> None:
    """The same refusals from `python -m geomcli`, one file, and a batch in worker processes."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    picked = [("npy", "pickle"), ("npy", "petabytes"), ("tiff", "million-squared"), ("tiff", "lerc"),
              ("png", "bomb"), ("gif", "frames"), ("webp", "frames"), ("jpeg", "cut40"), ("bmp", "noise")]
    paths = []
    for fmt, wanted in picked:
        make = dict(hostile_cases(fmt))[wanted]
        path = inputs / f"{wanted}.{fmt}"
        path.write_bytes(make(inputs))
        paths.append(path)
    for path in paths[:3]:
        result = subprocess.run([*GEOMCLI, "crop-pad", str(path), "-o", str(tmp_path / "o.npy"), "--shape", "4,4",
                                 "--axes", "-2,-1"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert result.returncode == 1
        one_error(result.stderr, path)
    (inputs / "good.png").write_bytes(valid_bytes("png"))
    result = subprocess.run([*GEOMCLI, "crop-pad", *map(str, paths), str(inputs / "good.png"), "--out-dir",
                             str(tmp_path / "out"), "--shape", "4,4", "--axes", "-2,-1", "-j", "2", "-q",
                             "--name", "{name}.npy"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == len(paths) and os.listdir(tmp_path / "out") == ["good.png.npy"]
    assert_clean(tmp_path, tmp_path / "PWNED", inputs / "PWNED")


def test_a_fifo_with_no_writer_ends_in_a_real_process(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "x.npy")
    started = time.monotonic()
    result = subprocess.run([*GEOMCLI, "info", str(tmp_path / "x.npy")], capture_output=True, text=True, timeout=30)
    assert result.returncode == 1 and time.monotonic() - started < 20
    reason = one_error(result.stderr, tmp_path / "x.npy")
    assert reason.endswith("not a regular file (a FIFO) and nothing came through it; read it through '-' instead")


def test_a_fifo_whose_writer_comes_late_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "x.npy"
    os.mkfifo(fifo)
    process = subprocess.Popen([*GEOMCLI, "crop-pad", str(fifo), "-o", str(tmp_path / "o.npy"), "--shape", "1,1,2,2",
                                "-q"], stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)  # geomcli has opened the FIFO and waits for a writer
    with open(fifo, "wb") as f:
        f.write(valid_bytes("npy"))
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert np.load(tmp_path / "o.npy").shape == (1, 1, 2, 2)


def test_a_device_is_refused_without_reading_it(tmp_path: Path) -> None:
    os.symlink("/dev/zero", tmp_path / "zero.png")
    result = run("crop-pad", tmp_path / "zero.png", "-o", tmp_path / "o.png", "--shape", "2,2")
    assert result.exit_code == 1
    assert one_error(result.stderr).endswith("zero.png: is a device, not a file or a pipe")


def test_stdin_beyond_what_max_pixels_allows_is_refused(tmp_path: Path) -> None:
    # a JPEG declares no size a pipe could be read to: the byte limit stops it
    result = run("crop-pad", "-", "-o", tmp_path / "o.npy", "--shape", "1", "--max-pixels", "1000",
                 stdin=b"\xff\xd8\xff" + b"\0" * (2 << 20))
    assert result.exit_code == 1
    assert "raise the limit with --max-pixels" in one_error(result.stderr, "<stdin>")
    assert_clean(tmp_path, tmp_path / "o.npy")


def _as_nobody() -> None:
    os.setgid(65534)
    os.setuid(65534)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to nobody")
def test_an_unreadable_file_as_another_user(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    secret = tmp_path / "secret.npy"
    secret.write_bytes(valid_bytes("npy"))
    secret.chmod(0)
    out = tmp_path / "o.npy"
    try:
        result = subprocess.run([*GEOMCLI, "crop-pad", str(secret), "-o", str(out), "--shape", "1,1,2,2"],
                                capture_output=True, text=True, preexec_fn=_as_nobody, timeout=60, cwd="/")
    except PermissionError:
        pytest.skip("nobody may not run this Python")
    if "No module named" in result.stderr:
        pytest.skip("nobody cannot import geomcli here")
    assert result.returncode == 1
    assert one_error(result.stderr, secret).endswith("permission denied")
    assert_clean(tmp_path, out)


# ---- data that makes no sense for the operation -------------------------------------------------


@pytest.fixture
def arrays(tmp_path: Path) -> dict[str, Path]:
    made = {
        "tensor": np.ones((1, 3, 6, 6), np.float32),
        "strings": np.array([["ab", "cd"], ["e", "f"]]),
        "complex": np.ones((4, 4, 3), np.complex64),
        "bools": np.eye(4, dtype=bool),
    }
    paths = {}
    for name, data in made.items():
        np.save(tmp_path / f"{name}.npy", data)
        paths[name] = tmp_path / f"{name}.npy"
    # a type .npy names (geomcli's writer does; np.save writes raw bytes) that no operator takes
    import ml_dtypes

    paths["float8"] = tmp_path / "float8.npy"
    io.write_array(np.ones((1, 2, 4, 4), ml_dtypes.float8_e4m3fn), str(paths["float8"]))
    return paths


GOOD_TENSOR = np.ones((1, 4, 8, 8), np.float32)
GOOD_IMAGE = np.ones((8, 8), np.uint8)


@pytest.mark.parametrize(("args", "message", "good", "name"), [
    (["space-to-depth", "{tensor}", "--blocksize", "4"], "tensor.npy: space_to_depth: height 6 is not divisible",
     GOOD_TENSOR, "{stem}.npy"),
    (["depth-to-space", "{tensor}", "--blocksize", "2"], "tensor.npy: depth_to_space: channels 3 are not divisible",
     GOOD_TENSOR, "{stem}.npy"),
    (["crop-pad", "{tensor}", "--shape", "100000000,100000000", "--axes", "-2,-1"], "elements exceed the limit",
     None, "{stem}.npy"),
    (["space-to-depth", "{strings}", "--blocksize", "1", "--layout", "HW"],
     "PNG cannot hold <U2 data; write .npy", GOOD_IMAGE, "{stem}.png"),
    (["crop-pad", "{strings}", "--shape", "2,2", "--fill", "100"], "fill value '100' does not fit dtype <U2",
     GOOD_IMAGE, "{stem}.png"),
    (["crop-pad", "{complex}", "--shape", "2,2", "--axes", "0,1"],
     "PNG cannot hold complex64 data; write .npy or .tiff",
     GOOD_IMAGE, "{stem}.png"),
    (["space-to-depth", "{complex}", "--blocksize", "2", "--layout", "HWC"],
     "PNG cannot hold complex64 data; write .npy or .tiff", np.ones((8, 8, 1), np.uint8), "{stem}.png"),
    # bool and string data take mode nearest only: the header says so (a try-out found exit 1)
    (["resize", "{strings}", "--sizes", "3,3", "--mode", "linear"],
     "strings.npy: resize: string data takes mode nearest only, found mode linear", None, "{stem}.npy"),
    (["resize", "{bools}", "--sizes", "3,3", "--mode", "cubic"],
     "bools.npy: resize: bool data takes mode nearest only, found mode cubic", None, "{stem}.npy"),
    # a .npy of a type no operator takes: the header shows it (a try-out found exit 1, and a dry run
    # that listed it as to be written)
    (["crop-pad", "{float8}", "--shape", "2,2", "--axes", "-2,-1"],
     "float8.npy: crop-pad: input must be bool, int8-int64, uint8-uint64, float16/32/64, bfloat16, "
     "complex64/128, str, bytes or StringDType, found dtype float8_e4m3fn (input shape (1, 2, 4, 4))",
     GOOD_TENSOR, "{stem}.npy"),
    (["space-to-depth", "{float8}", "--blocksize", "2"], "float8.npy: space-to-depth: input must be bool",
     GOOD_TENSOR, "{stem}.npy"),
], ids=["blocksize", "channels", "shape", "strings-png", "strings-fill", "complex-png", "complex-blocks-png",
        "strings-resize", "bool-resize", "float8-crop", "float8-blocks"])
def test_data_that_makes_no_sense_single_and_in_a_batch(
    args: list[str], message: str, good: np.ndarray | None, name: str, arrays: dict[str, Path], tmp_path: Path
) -> None:
    filled = [arg.format(**arrays) for arg in args]
    out = tmp_path / name.format(stem="out")
    result = run(*filled, "-o", out)
    # what the header shows the file cannot take, or the output cannot hold, is a usage fault for
    # one file as for a batch: exit 2, one error line
    assert result.exit_code == 2
    assert message in one_error(result.stderr)
    assert_clean(tmp_path, out)
    if good is None:
        return
    # in a batch beside a good file: that one is still written
    np.save(tmp_path / "good.npy", good)
    batch = run(*filled, tmp_path / "good.npy", "--out-dir", tmp_path / "out", "--name", name, "-q")
    # what the header shows the file cannot take is found when the batch is planned: nothing is written
    errors = [line for line in batch.stderr.splitlines() if line.startswith("Error: ")]
    assert batch.exit_code == 2 and message in errors[0] and len(errors) == 2
    assert errors[1] == "Error: 1 of 2 inputs cannot take these options (each named above); nothing was written"
    assert not (tmp_path / "out").exists()
    assert_clean(tmp_path, out)


def test_a_dry_run_names_a_type_no_operator_takes(arrays: dict[str, Path], tmp_path: Path) -> None:
    """A dry run listed a float8 .npy as to be written (its output shape from the header), where
    the run then failed it: it says what the run says, and exits 2 as the run does."""
    np.save(tmp_path / "good.npy", GOOD_TENSOR)
    dry = run("crop-pad", arrays["float8"], tmp_path / "good.npy", "--out-dir", tmp_path / "out", "--shape", "2,2",
              "--axes", "-2,-1", "--dry-run")
    assert dry.exit_code == 2
    assert dry.stdout == f"{tmp_path / 'good.npy'} → {tmp_path / 'out' / 'good.npy'}: 1×4×2×2 float32\n"
    errors = [line for line in dry.stderr.splitlines() if line.startswith("Error: ")]
    assert errors[0] == (f"Error: {arrays['float8']}: crop-pad: input must be bool, int8-int64, uint8-uint64, "
                         "float16/32/64, bfloat16, complex64/128, str, bytes or StringDType, found dtype "
                         "float8_e4m3fn (input shape (1, 2, 4, 4))")
    assert "dry run, 1 to write, 1 failed, 0 skipped" in dry.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("args", "output", "message"), [
    (["resize", "--sizes", "3,3,3,3"], "o.png", "--sizes has 4 values for an input of shape (20, 30, 3)"),
    (["space-to-depth", "--blocksize", "7"], "o.png", "height 20 is not divisible by blocksize 7"),
    (["warp", "--rotate", "10", "--fill", "300"], "o.png", "grid_sample: fill 300 does not fit data's dtype uint8"),
    (["crop-pad", "--shape", "4,4"], "o.jpg", "JPEG holds 1 or 3 channels, not 4"),  # a picture's crop
], ids=["sizes", "blocksize", "fill", "picture-channels"])
def test_options_a_file_cannot_take_are_exit_2_alone_as_in_a_batch(tmp_path: Path, args: list[str], output: str,
                                                                   message: str) -> None:
    """The same mistake, the same exit code, with -o as with --out-dir (found by a try-out: 1
    alone, 2 in a batch); alone, the file's one error line and its JSON record; nothing written."""
    from PIL import Image

    source = tmp_path / "in.png"
    Image.new("RGBA" if output.endswith(".jpg") else "RGB", (30, 20), (9, 8, 7, 255)).save(source)
    command, *options = args
    alone = run(command, source, "-o", tmp_path / output, *options, "--json")
    assert alone.exit_code == 2 and message in one_error(alone.stderr)
    record = json.loads(alone.stdout)
    assert record["status"] == "error" and message in record["error"]
    batch = run(command, source, "--out-dir", tmp_path / "out", "--name", "{stem}" + output[1:], *options)
    assert batch.exit_code == 2 and message in batch.stderr
    assert sorted(os.listdir(tmp_path)) == ["in.png"]


def test_an_rgba_picture_refused_as_a_jpeg_is_told_the_step_that_makes_one(tmp_path: Path) -> None:
    """RGBA to JPEG is refused (a flatten's background colour is a choice geomcli does not make);
    the one error line names the step that drops the alpha, and that step gives the JPEG."""
    from PIL import Image

    rows, columns = np.mgrid[0:20, 0:30]
    # smooth colours (a JPEG keeps them closely) under an alpha that varies
    rgba = np.stack([columns * 8, rows * 12, np.full_like(rows, 200), (rows * 30 + columns) % 256], -1).astype(np.uint8)
    Image.fromarray(rgba).save(tmp_path / "in.png")
    refused = run("resize", tmp_path / "in.png", "-o", tmp_path / "o.jpg", "--sizes", "10,15")
    assert refused.exit_code == 2 and not (tmp_path / "o.jpg").exists()
    step = re.search(r"drop the alpha channel for a JPEG: (crop-pad --axes -1 --shape 3) \(in chain, its last step\)",
                     one_error(refused.stderr, tmp_path / "o.jpg"))
    assert step is not None
    command, *options = step.group(1).split()
    alone = run(command, tmp_path / "in.png", "-o", tmp_path / "o.jpg", *options)
    chained = run("chain", "-i", tmp_path / "in.png", "-o", tmp_path / "c.jpg", "resize", "--sizes", "10,15",
                  command, *options)
    assert alone.exit_code == chained.exit_code == 0, alone.stderr + chained.stderr
    with Image.open(tmp_path / "o.jpg") as alone_jpeg, Image.open(tmp_path / "c.jpg") as chained_jpeg:
        assert (alone_jpeg.mode, alone_jpeg.size, chained_jpeg.mode, chained_jpeg.size) == ("RGB", (30, 20), "RGB",
                                                                                           (15, 10))
        # the colours as stored, within JPEG's loss; no background under them
        assert np.abs(np.asarray(alone_jpeg, np.int16) - rgba[..., :3]).max() < 12


def test_the_shape_limit_says_how_to_raise_it_and_the_environment_raises_it(tmp_path: Path) -> None:
    source = tmp_path / "a.npy"
    np.save(source, np.ones((1, 1, 4, 4), np.uint8))
    out = tmp_path / "o.npy"
    refused = run("crop-pad", source, "-o", out, "--shape", "1,1,100,100", env={"GEOMCLI_MAX_PIXELS": "9999"})
    assert refused.exit_code == 2
    assert one_error(refused.stderr, source).endswith(
        "the output (1, 1, 100, 100): 10000 elements exceed the limit of 9999; "
        "raise it with --max-pixels or GEOMCLI_MAX_PIXELS")
    assert run("crop-pad", source, "-o", out, "--shape", "1,1,100,100", "-q",
               env={"GEOMCLI_MAX_PIXELS": "10000"}).exit_code == 0
    # the option wins over the environment
    assert run("crop-pad", source, "-o", out, "--shape", "1,1,100,100", "--max-pixels", "10",
               env={"GEOMCLI_MAX_PIXELS": "10000"}).exit_code == 1


@pytest.mark.parametrize("typed", ["nan,0,0,0,1,0", "1,0,inf,0,1,0"])
def test_typed_nan_and_inf_theta_are_a_usage_error(typed: str, tmp_path: Path) -> None:
    result = run("affine-grid", "--size", "1,1,3,4", "--theta", typed, "-o", tmp_path / "grid.npy")
    assert result.exit_code == 2 and "every number must be finite" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "grid.npy").exists()


def test_nan_and_inf_theta_from_a_file_are_allowed_and_reported_in_text_and_json(tmp_path: Path) -> None:
    theta = tmp_path / "theta.npy"
    np.save(theta, np.array([[[1, 0, np.nan], [0, -np.inf, 0]]], np.float32))
    out = tmp_path / "grid.npy"
    text = run("affine-grid", "--size", "1,1,3,4", "--theta", theta, "-o", out)
    assert text.exit_code == 0 and "Traceback" not in text.stderr
    assert "note: theta holds NaN or Inf" in text.stderr
    assert not np.isfinite(np.load(out)).all()
    as_json = run("affine-grid", "--size", "1,1,3,4", "--theta", theta, "-o", out, "--json")
    record = json.loads(as_json.stdout)
    assert record["status"] == "ok" and any("NaN or Inf" in note for note in record["notes"])


def test_a_warp_by_a_theta_file_holding_nan_says_so_in_text_and_json(tmp_path: Path) -> None:
    # warp's output is all fill then (every position is NaN): it said nothing, in text or --json
    theta, data = tmp_path / "theta.npy", tmp_path / "data.npy"
    np.save(theta, np.array([[[1, 0, np.nan], [0, 1, 0]]], np.float32))
    np.save(data, np.arange(1, 13, dtype=np.float32).reshape(1, 1, 3, 4))
    note = "theta holds NaN or Inf: the positions it reaches read the fill value"
    text = run("warp", data, "--theta", theta, "-o", tmp_path / "out.npy")
    assert text.exit_code == 0 and f"\n  note: {note}\n" in text.stderr
    assert (np.load(tmp_path / "out.npy") == 0).all()
    record = json.loads(run("warp", data, "--theta", theta, "-o", tmp_path / "out.npy", "--json").stdout)
    assert record["status"] == "ok" and record["notes"] == [note]
    chained = run("chain", "-i", data, "-o", tmp_path / "out.npy", "--json", "crop-pad", "--shape", "1,1,2,2",
                  "warp", "--theta", theta)
    assert json.loads(chained.stdout)["notes"] == [f"warp: {note}"]
    finite = run("warp", data, "--theta", "1,0,0,0,1,0", "-o", tmp_path / "out.npy", "--json")
    assert json.loads(finite.stdout)["notes"] == []


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_grid_holding_nan_or_inf_says_so_in_text_and_json(tmp_path: Path, bad: float) -> None:
    """A grid file's NaN or Inf positions read the fill value, as a theta file's do through warp,
    which says so in a note: grid-sample said nothing, in text or --json, of a grid whose positions
    were all NaN and an output all fill."""
    grid, data = tmp_path / "grid.npy", tmp_path / "data.npy"
    positions = np.zeros((1, 2, 3, 2), np.float32)
    positions[0, 1, 2, 0] = bad
    np.save(grid, positions)
    np.save(data, np.arange(1, 13, dtype=np.float32).reshape(1, 1, 3, 4))
    note = "the grid holds NaN or Inf: those positions read the fill value"
    text = run("grid-sample", data, "--grid", grid, "-o", tmp_path / "out.npy", "--fill", "-1")
    assert text.exit_code == 0 and f"\n  note: {note}\n" in text.stderr
    assert np.load(tmp_path / "out.npy")[0, 0, 1, 2] == -1
    record = json.loads(run("grid-sample", data, "--grid", grid, "-o", tmp_path / "out.npy", "--json").stdout)
    assert record["status"] == "ok" and record["notes"] == [note]
    chained = run("chain", "-i", data, "-o", tmp_path / "out.npy", "--json", "grid-sample", "--grid", grid)
    assert json.loads(chained.stdout)["notes"] == [f"grid-sample: {note}"]
    np.save(grid, np.zeros((1, 2, 3, 2), np.float32))
    finite = run("grid-sample", data, "--grid", grid, "-o", tmp_path / "out.npy", "--json")
    assert json.loads(finite.stdout)["notes"] == []


# ---- faults that must lose nothing --------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (as root), else skip: a disk that fills up."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    folder = tmp_path / "disk"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _small_input(tmp_path: Path) -> Path:
    path = tmp_path / "small.npy"
    np.save(path, np.ones((1, 1, 8, 8), np.float32))
    return path


# 700 x 700 float32 is 1.9 MB, more than the disk; 4200 x 4200 (70 MB) goes through a memory map
@pytest.mark.parametrize("side", [700, 4200])
def test_a_full_disk_single_file_keeps_the_old_output_and_no_temp(small_disk: Path, tmp_path: Path, side: int) -> None:
    source = _small_input(tmp_path)
    out = small_disk / "out.npy"
    out.write_bytes(b"the old output")
    result = subprocess.run([*GEOMCLI, "crop-pad", str(source), "-o", str(out), "--shape", f"1,1,{side},{side}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert one_error(result.stderr, out).endswith("cannot write (No space left on device)")
    assert out.read_bytes() == b"the old output"
    assert sorted(os.listdir(small_disk)) == ["out.npy"]


def test_a_full_disk_in_a_batch_writes_what_fits(small_disk: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name, side in [("a", 8), ("big", 4), ("c", 8)]:
        np.save(inputs / f"{name}.npy", np.ones((1, 1, side, side), np.float32))
    # 600 x 600 float32 is 1.4 MB each: at most one fits the 1 MiB disk... none does
    args = [*GEOMCLI, "crop-pad", str(inputs / "a.npy"), str(inputs / "c.npy"), str(inputs / "big.npy"),
            "--out-dir", str(small_disk), "--shape", "1,1,600,600", "-q"]
    (small_disk / "big.npy").write_bytes(b"the old output")
    for jobs in ("1", "2"):
        result = subprocess.run([*args, "-j", jobs], capture_output=True, text=True, timeout=120)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        failures = result.stderr.splitlines()
        assert failures and all(line.endswith("cannot write (No space left on device)") for line in failures)
        assert temps(small_disk) == []
        old = small_disk / "big.npy"
        assert old.read_bytes() == b"the old output" or old.stat().st_size > 1e6
        for name in os.listdir(small_disk):
            path = small_disk / name
            if path.read_bytes() != b"the old output":
                assert np.load(path).shape == (1, 1, 600, 600)  # complete, or not there
        for name in ("a.npy", "c.npy"):
            if (small_disk / name).exists():
                (small_disk / name).unlink()


def _limit_file_size(limit: int) -> Callable[[], None]:
    def preexec() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return preexec


@pytest.mark.parametrize("side", [700, 4200])
def test_a_file_size_limit_single_file_and_batch(tmp_path: Path, side: int) -> None:
    """`ulimit -f`: the fault of a full disk that needs no root."""
    source = _small_input(tmp_path)
    out = tmp_path / "out.npy"
    out.write_bytes(b"the old output")
    result = subprocess.run([*GEOMCLI, "crop-pad", str(source), "-o", str(out), "--shape", f"1,1,{side},{side}"],
                            capture_output=True, text=True, timeout=120, preexec_fn=_limit_file_size(1 << 20))
    assert result.returncode == 1
    assert one_error(result.stderr, out).endswith("cannot write (File too large)")
    assert out.read_bytes() == b"the old output" and temps(tmp_path) == []
    result = subprocess.run([*GEOMCLI, "crop-pad", str(source), str(source.with_name("o.npy")), "--out-dir",
                             str(tmp_path / "batch"), "--shape", f"1,1,{side},{side}", "-j", "2", "-q"],
                            capture_output=True, text=True, timeout=120, preexec_fn=_limit_file_size(1 << 20))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert temps(tmp_path) == [] and not (tmp_path / "batch").exists()  # made for nothing: taken away


@pytest.mark.parametrize(("where", "message"), [
    ("{tmp}/missing/out.npy", "folder {tmp}/missing does not exist"),
    ("{tmp}/plain/out.npy", "{tmp}/plain is not a folder"),
    ("/proc/self/out.npy", "cannot create a file in /proc/self"),
])
def test_a_destination_that_cannot_be_written(where: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "plain").write_bytes(b"x")
    source = _small_input(tmp_path)
    out = where.format(tmp=tmp_path)
    result = run("crop-pad", source, "-o", out, "--shape", "1,1,2,2", "--format", "npy")
    assert result.exit_code == 1
    assert one_error(result.stderr, out).endswith(message.format(tmp=tmp_path))
    assert temps(tmp_path) == [] and (tmp_path / "plain").read_bytes() == b"x"
    # a folder as -o is a usage mistake (exit 2), checked before anything is read
    assert run("crop-pad", source, "-o", tmp_path, "--shape", "1,1,2,2", "--format", "npy").exit_code == 2


def test_a_batch_whose_out_dir_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "plain").write_bytes(b"x")
    source = _small_input(tmp_path)
    result = run("crop-pad", source, "--out-dir", tmp_path / "plain" / "out", "--shape", "1,1,2,2")
    assert result.exit_code == 1
    assert one_error(result.stderr).startswith(f"Error: {tmp_path / 'plain' / 'out'}: cannot make the folder")
    (tmp_path / "dangling").symlink_to("nowhere")
    result = run("crop-pad", source, "--out-dir", tmp_path / "dangling", "--shape", "1,1,2,2")
    assert result.exit_code == 1
    assert one_error(result.stderr) == (f"Error: {tmp_path / 'dangling'}: cannot make the folder (a broken symbolic "
                                        "link to nowhere)")


@pytest.mark.parametrize("relative", [["-o", "out.npy"], ["--out-dir", "out"]])
def test_a_deleted_current_folder_fails_relative_names_in_one_line(relative: list[str], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A cron job whose folder was removed (make clean meanwhile): os.getcwd fails wherever a
    relative name is made absolute, and that was a traceback; absolute names still work."""
    source, gone = _small_input(tmp_path), tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    result = run("crop-pad", source, *relative, "--shape", "1,1,2,2")
    assert result.exit_code == 1
    assert result.stderr == ("Error: the current folder has been deleted, so a relative name reaches nothing; "
                             "cd to a folder, or give absolute names\n")
    assert run("crop-pad", source, "-o", tmp_path / "abs.npy", "--shape", "1,1,2,2", "-q").exit_code == 0


def test_debug_shows_a_file_s_full_disk_as_its_traceback_not_as_stdout_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """An OSError --debug lets out of the engine reached main's handler for --help on a full
    stdout, which printed `Error: <stdout>: cannot write (No space left on device)`: a file's
    failure blamed on stdout, and no traceback."""
    from geomcli.cli.group import main
    from geomcli.engine import operations

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(operations.CropPad, "apply", full)
    with pytest.raises(OSError, match="No space left on device"):
        main(["crop-pad", str(_small_input(tmp_path)), "-o", str(tmp_path / "out.npy"), "--shape", "1,1,2,2",
              "--debug"])
    assert "<stdout>" not in capsys.readouterr().err


def _wait_for_temp(folder: Path, process: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not temps(folder):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no temp file appeared"
        time.sleep(0.01)


# SIGHUP: a closed terminal or dropped ssh session; SIGXCPU: a soft CPU time limit (ulimit -St;
# bash's ulimit -t sets the hard one too, which kills). Each killed the run where it stood, its temp file left
# (a Ctrl-C ends geomcli by SIGINT, the shell's 130: Python's subprocess sees -2)
_STOPS = [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGXCPU, 152)]


@functools.cache
def _noise_png() -> bytes:
    """A 3000x3000 RGB noise PNG (26 MB), made once per session: the 8 cases below made it each (0.7 s of CPU)."""
    from PIL import Image

    encoded = bytes_io.BytesIO()
    noise = np.random.default_rng(5).integers(0, 256, (3000, 3000, 3), dtype=np.uint8)
    Image.fromarray(noise).save(encoded, format="PNG", compress_level=0)
    return encoded.getvalue()


@pytest.mark.parametrize(("signum", "code"), _STOPS)
@pytest.mark.parametrize("kind", ["mapped-npy", "png-in-ram"])
def test_a_signal_mid_write_leaves_the_old_output_and_no_temp(
    signum: int, code: int, kind: str, tmp_path: Path
) -> None:
    source = tmp_path / "source.png"
    source.write_bytes(_noise_png())
    # 300 MB through a memory map; or a 6000 x 6000 noise PNG (the encoder takes seconds)
    out = tmp_path / ("out.npy" if kind == "mapped-npy" else "out.png")
    shape = "10000,10000,3" if kind == "mapped-npy" else "6000,6000"
    for _attempt in range(5):
        out.write_bytes(b"the old output")
        process = subprocess.Popen([*GEOMCLI, "crop-pad", str(source), "-o", str(out), "--shape", shape],
                                   stderr=subprocess.PIPE, text=True)
        _wait_for_temp(tmp_path, process)
        # Held where the temp file was seen, so the signal lands mid-write: on a busy machine the
        # write could otherwise end between that look and the signal (1 run in 4 under load).
        process.send_signal(signal.SIGSTOP)
        if temps(tmp_path):
            break
        process.send_signal(signal.SIGCONT)  # done before it was held: another run
        process.communicate(timeout=60)
    process.send_signal(signum)
    process.send_signal(signal.SIGCONT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    assert out.read_bytes() == b"the old output"
    assert temps(tmp_path) == []


@pytest.mark.parametrize(("signum", "raised"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, SystemExit)])
def test_no_output_is_placed_once_a_signal_has_come(
    signum: int, raised: type[BaseException], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler's exception can vanish (Python ran it inside an import's compile()): SIGTERM
    mid-write then ended in exit 0 with the new output, 1 run in 4 under load. What the handler
    noted stops the output where it would be placed."""
    from geomcli.io import _atomic

    out = tmp_path / "out.npy"
    out.write_bytes(b"the old output")
    monkeypatch.setattr(_atomic, "signals_taken", [signum])
    with pytest.raises(raised) as stopped, _atomic.atomic_file(str(out)) as f:
        f.write(b"the new output")
    assert signum == signal.SIGINT or stopped.value.code == 128 + signum  # type: ignore[attr-defined]
    assert out.read_bytes() == b"the old output" and temps(tmp_path) == []


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_whose_exception_vanished_still_ends_the_run(
    signum: int, code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geomcli.engine import operations

    source, out = _small_input(tmp_path), tmp_path / "out.npy"
    out.write_bytes(b"the old output")
    crop = operations.CropPad.apply

    def crop_then_lose_a_signal(*args: Any, **kwargs: Any) -> Any:
        io.note_signal(signum)  # as a handler whose exception vanished leaves it
        return crop(*args, **kwargs)

    monkeypatch.setattr(operations.CropPad, "apply", crop_then_lose_a_signal)
    result = run("crop-pad", source, "-o", out, "--shape", "1,1,2,2")
    assert result.exit_code == code
    assert out.read_bytes() == b"the old output" and temps(tmp_path) == []
    # the run's signal stops no write after it in this process (a library user's, a later test's)
    io.write_array(np.ones(2), str(tmp_path / "later.npy"))
    assert np.load(tmp_path / "later.npy").tolist() == [1.0, 1.0]


@pytest.mark.parametrize(("signum", "code"), _STOPS)
def test_a_signal_mid_batch_of_big_outputs_leaves_only_complete_files(signum: int, code: int, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(6):
        np.save(inputs / f"{i}.npy", np.full((1, 1, 4, 4), i, np.float32))
    out_dir = tmp_path / "out"
    # 100 MB each, through memory maps, in two workers
    process = subprocess.Popen([*GEOMCLI, "crop-pad", str(inputs), "--out-dir", str(out_dir), "--shape",
                                "1,1,5000,5000", "-j", "2", "-q"], stderr=subprocess.PIPE, text=True)
    out_dir.mkdir(exist_ok=True)
    _wait_for_temp(out_dir, process)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    assert temps(tmp_path) == []
    for name in os.listdir(out_dir):
        done = np.load(out_dir / name, mmap_mode="r")
        assert done.shape == (1, 1, 5000, 5000) and done[0, 0, 2500, 2500] == int(name[0])


def test_a_batch_whose_stderr_reader_has_gone_ends_with_141_leaving_whole_outputs(tmp_path: Path) -> None:
    # docs/files.md: as for stdout, a stderr whose reader has gone ends the run (`2>&1 | head -1`)
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(30):
        (folder / f"b{i:02d}.png").write_bytes(b"not a png")
    reader, writer = os.pipe()
    os.close(reader)  # gone before the first error line
    try:
        gone = subprocess.run([*GEOMCLI, "crop-pad", str(folder), "--out-dir", str(tmp_path / "out"), "--shape",
                               "4,4", "-j", "1"], stdout=subprocess.DEVNULL, stderr=writer, timeout=60)
    finally:
        os.close(writer)
    assert gone.returncode == 141
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_closed_pipe_on_stdout_ends_quietly(tmp_path: Path) -> None:
    paths = []
    for i in range(200):
        paths.append(tmp_path / f"{i}.npy")
        np.save(paths[-1], np.ones((2, 2), np.float32))
    # info lines to a reader that leaves after the first
    command = f"{' '.join(GEOMCLI)} info {' '.join(map(str, paths))} | head -n 1 > /dev/null"
    result = subprocess.run(["bash", "-c", command + "; echo ${PIPESTATUS[0]}"], capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.strip() in ("141", "0") and result.stderr == ""
    # data to a reader that leaves at once
    command = f"{' '.join(GEOMCLI)} crop-pad {paths[0]} -o - --shape 3000,3000 -q | true"
    result = subprocess.run(["bash", "-c", command + "; echo ${PIPESTATUS[0]}"], capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.strip() in ("141", "0") and result.stderr == ""


@pytest.mark.parametrize("fmt", ["npy", "png", "tiff", "jpeg"])
def test_a_stdin_that_ends_early(fmt: str, tmp_path: Path) -> None:
    whole = valid_bytes(fmt)
    out = tmp_path / "o.npy"
    for cut in (len(whole) // 2, len(whole) - 3):
        result = subprocess.run([*GEOMCLI, "crop-pad", "-", "-o", str(out), "--shape", "2,2", "--axes", "-2,-1"],
                                input=whole[:cut], capture_output=True, timeout=60)
        assert result.returncode == 1, result.stderr
        one_error(result.stderr.decode(), "<stdin>")
        assert_clean(tmp_path, out)


def test_an_input_truncated_after_its_header_was_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process cuts the file between the header check and the data read: a clean error,
    mapped or not (inputs under one_file.MAP_INPUT_BYTES are read into memory, so later cuts are harmless)."""
    from geomcli.io import _npy

    check = _npy._check
    path = tmp_path / "a.npy"

    def check_then_cut(*args: Any) -> None:
        check(*args)
        os.truncate(path, 200)

    monkeypatch.setattr(_npy, "_check", check_then_cut)
    for map_all in (False, True):
        if map_all:
            monkeypatch.setattr("geomcli.engine.one_file.MAP_INPUT_BYTES", 0)
        np.save(path, np.ones((1, 3, 16, 20), np.float32))
        result = run("crop-pad", path, "-o", tmp_path / "o.npy", "--shape", "1,1,2,2")
        assert result.exit_code == 1
        assert "not a readable NPY" in one_error(result.stderr, path)
        assert_clean(tmp_path, tmp_path / "o.npy")


def test_a_small_input_cut_while_it_is_transformed_costs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import geomcli.ops.center_crop_pad as crop_ops

    path = tmp_path / "a.npy"
    np.save(path, np.arange(4 * 6, dtype=np.float32).reshape(1, 1, 4, 6))
    crop = crop_ops.center_crop_pad

    def cut_then_crop(data: Any, *args: Any, **kwargs: Any) -> Any:
        os.truncate(path, 0)  # a mapped input would now raise SIGBUS on its next page
        return crop(data, *args, **kwargs)

    monkeypatch.setattr(crop_ops, "center_crop_pad", cut_then_crop)
    assert run("crop-pad", path, "-o", tmp_path / "o.npy", "--shape", "1,1,2,2", "-q").exit_code == 0
    assert np.load(tmp_path / "o.npy").ravel().tolist() == [8, 9, 14, 15]


def test_inputs_replaced_by_rename_during_a_batch(tmp_path: Path) -> None:
    """A writer renames new versions (good and broken) over the inputs while a batch reads them:
    each file is either done from a whole version or fails in one line; no temp files."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    grey = bytes_io.BytesIO()
    np.save(grey, np.full((8, 8), 7, np.uint8))
    versions = [valid_bytes("png"), valid_bytes("png")[:100], grey.getvalue()]  # the last: npy content named .png
    for i in range(40):
        (inputs / f"{i}.png").write_bytes(versions[0])
    process = subprocess.Popen([*GEOMCLI, "crop-pad", str(inputs), "--out-dir", str(tmp_path / "out"), "--shape",
                                "4,4", "-j", "2", "-q"], stderr=subprocess.PIPE, text=True)
    turn = 0
    while process.poll() is None:
        turn += 1
        target = inputs / f"{turn % 40}.png"
        staging = inputs / f".next{turn}"
        staging.write_bytes(versions[turn % 3])
        os.replace(staging, target)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode in (0, 1) and "Traceback" not in stderr
    assert all(line.startswith("Error: ") for line in stderr.splitlines())
    assert temps(tmp_path) == []
    for name in os.listdir(tmp_path / "out"):
        from PIL import Image

        with Image.open(tmp_path / "out" / name) as image:
            assert image.size == (4, 4)


# ---- security notes -------------------------------------------------------------------------------


def test_no_pickle_is_ever_loaded_by_any_command(tmp_path: Path) -> None:
    target = tmp_path / "PWNED"
    evil = tmp_path / "evil.npy"
    evil.write_bytes(pickle_npy(target))
    probe = (
        "import pickle, sys\n"
        "def refuse(*a, **k): raise SystemExit('unpickler reached')\n"
        "pickle.load = pickle.loads = refuse\n"
        "pickle.Unpickler = refuse\n"
        "from geomcli.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    for args in (["info", evil], ["crop-pad", evil, "-o", tmp_path / "o.npy", "--shape", "1"],
                 ["affine-grid", "--size", "1,1,2,2", "--theta", evil, "-o", tmp_path / "g.npy"],
                 ["crop-pad", evil, evil, "--out-dir", tmp_path / "out", "--shape", "1", "-j", "1"]):
        result = subprocess.run([sys.executable, "-c", probe, *map(str, args)], capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 1 and "unpickler reached" not in result.stderr
        assert "never unpickles" in result.stderr and "Traceback" not in result.stderr
    assert not target.exists()


def test_no_path_from_a_files_content_is_used_to_write(tmp_path: Path) -> None:
    """Names inside files (a TIFF's document name, a PNG text chunk) never become output paths."""
    import tifffile
    from PIL import Image, PngImagePlugin

    escape = str(tmp_path / "escaped.npy")
    tifffile.imwrite(tmp_path / "a.tiff", np.ones((4, 4), np.uint8), description=escape,
                     extratags=[(269, "s", 0, escape, True)])
    info = PngImagePlugin.PngInfo()
    info.add_text("filename", escape)
    Image.fromarray(np.ones((4, 4), np.uint8)).save(tmp_path / "b.png", pnginfo=info)
    result = run("crop-pad", tmp_path / "a.tiff", tmp_path / "b.png", "--out-dir", tmp_path / "out", "--shape", "2,2",
                 "-q")
    assert result.exit_code == 0
    assert sorted(os.listdir(tmp_path / "out")) == ["a.tiff", "b.png"]
    assert not os.path.exists(escape)


def test_a_symlink_planted_at_a_temp_name_is_not_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """O_EXCL: a temp name that exists, a symlink to a victim included, is skipped, never opened."""
    import tempfile

    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    # the random names mkstemp tries, the first one twice
    names = iter(["planted0", "planted0", "fresh001"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    os.symlink(victim, tmp_path / ".out.npy.planted0.tmp")
    source = _small_input(tmp_path)
    assert run("crop-pad", source, "-o", tmp_path / "out.npy", "--shape", "1,1,2,2", "-q").exit_code == 0
    assert victim.read_bytes() == b"precious"
    assert np.load(tmp_path / "out.npy").shape == (1, 1, 2, 2)
    assert os.path.islink(tmp_path / ".out.npy.planted0.tmp")  # left alone: not ours
    assert next(names, None) is None  # both planted names were tried, and passed over


def test_a_destination_that_is_a_symlink_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim.npy"
    victim.write_bytes(b"precious")
    os.symlink(victim, tmp_path / "out.npy")
    source = _small_input(tmp_path)
    assert run("crop-pad", source, "-o", tmp_path / "out.npy", "--shape", "1,1,2,2", "-q").exit_code == 0
    assert victim.read_bytes() == b"precious"
    assert not os.path.islink(tmp_path / "out.npy") and np.load(tmp_path / "out.npy").shape == (1, 1, 2, 2)


def test_a_big_mapped_output_is_also_atomic_and_beside_its_destination(tmp_path: Path) -> None:
    source = _small_input(tmp_path)
    victim = tmp_path / "victim.npy"
    victim.write_bytes(b"precious")
    os.symlink(victim, tmp_path / "out.npy")
    result = run("crop-pad", source, "-o", tmp_path / "out.npy", "--shape", "1,1,4200,4200", "-q")
    assert result.exit_code == 0
    assert victim.read_bytes() == b"precious" and not os.path.islink(tmp_path / "out.npy")
    assert temps(tmp_path) == []


# ---- fuzzing through the command line ---------------------------------------------------------


@functools.cache
def fuzz_seed(kind: str) -> tuple[str, bytes]:
    import tifffile

    if kind == "png16":
        return "png", _written(np.arange(12 * 10 * 3, dtype=np.uint16).reshape(12, 10, 3) * 50, "png")
    if kind == "zlib-tiff":
        buffer = bytes_io.BytesIO()
        tifffile.imwrite(buffer, np.arange(2 * 8 * 9, dtype=np.int32).reshape(2, 8, 9), compression="zlib",
                         predictor=True, photometric="minisblack")
        return "tiff", buffer.getvalue()
    if kind == "npy-header":
        return "npy", npy_with_header("{'descr': '<i2', 'fortran_order': True, 'shape': (1, 2, 4, 6), }",
                                      data=bytes(range(96)))
    return kind, valid_bytes(kind)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    """A valid PNG, TIFF or NPY with bit flips, byte changes, a cut or a header field changed."""
    fmt, whole = fuzz_seed(draw(st.sampled_from(["png", "png16", "tiff", "zlib-tiff", "npy", "npy-header"])))
    data = bytearray(whole)
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(data) - 1))
        if draw(st.booleans()):
            data[at] ^= 1 << draw(st.integers(0, 7))
        else:
            data[at] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        # a header field: a 16- or 32-bit number near the start set to an edge value
        at = draw(st.integers(0, min(len(data), 200) - 4))
        value = draw(st.sampled_from([0, 1, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 2**31]))
        struct.pack_into("<I" if draw(st.booleans()) else ">I", data, at, value & 0xFFFFFFFF)
    if draw(st.booleans()):
        data = data[: draw(st.integers(1, len(data)))]
    return fmt, bytes(data)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=mutated(), command=st.sampled_from(["crop-pad", "space-to-depth", "info", "theta"]))
def test_fuzz_the_cli_gives_a_result_or_one_error_line(tmp_path: Path, case: tuple[str, bytes], command: str) -> None:
    """Mutated PNG, TIFF and NPY files through the command line: exit 0, or exit 1 (a bad file) or
    2 (options it cannot take) with one error line; anything else (another exception) fails here
    with its traceback.

    GEOMCLI_FUZZ_EXAMPLES=5000 makes this a long run; scripts/fuzz.py runs it for minutes.
    """
    fmt, data = case
    check_cli_on(tmp_path, fmt, data, command)


def check_cli_on(folder: Path, fmt: str, data: bytes, command: str) -> None:
    """One fuzz case: the file through one command; only exit 0, or 1 or 2 with one error line, is acceptable."""
    path = folder / f"fuzz.{fmt}"
    path.write_bytes(data)
    out = folder / "fuzz-out.npy"
    if out.exists():
        out.unlink()
    args = {
        "crop-pad": ["crop-pad", path, "-o", out, "--shape", "3,5", "--axes", "-2,-1"],
        "space-to-depth": ["space-to-depth", path, "-o", out, "--blocksize", "2", "--layout", "NCHW"]
        if fmt == "npy" else ["space-to-depth", path, "-o", out, "--blocksize", "2"],
        "info": ["info", path],
        "theta": ["affine-grid", "--like", path, "-o", out],
    }[command]
    result = run(*args, "--max-pixels", "1000000")
    assert result.exit_code in (0, 1, 2), result.stderr
    if result.exit_code:
        one_error(result.stderr)
        assert not out.exists()
    assert temps(folder) == []


def test_fuzz_regressions(tmp_path: Path) -> None:
    """Inputs the fuzzer once broke the command line with, kept as files in tests/data/fuzz/."""
    for path in sorted((DATA / "fuzz").glob("*")):
        fmt = path.name.rsplit(".", 1)[-1]
        for command in ("crop-pad", "space-to-depth", "info", "theta"):
            check_cli_on(tmp_path, fmt, path.read_bytes(), command)


def test_a_deferred_commit_leaves_the_temp_file_until_it_runs(tmp_path: Path) -> None:
    from geomcli.io import _atomic

    target = tmp_path / "out.png"
    target.write_bytes(b"old")
    with _atomic.deferred_commits() as commits:
        with _atomic.atomic_file(str(target)) as f:
            f.write(b"new")
        assert len(commits) == 1
        assert target.read_bytes() == b"old" and len([p for p in os.listdir(tmp_path) if TEMP.match(p)]) == 1
    commits[0]()
    assert target.read_bytes() == b"new" and os.listdir(tmp_path) == ["out.png"]
    with _atomic.atomic_file(str(target)) as f:  # outside the context: committed at once
        f.write(b"newer")
    assert target.read_bytes() == b"newer"


def test_a_deferred_commit_that_fails_removes_its_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from geomcli.errors import GeomError
    from geomcli.io import _atomic

    target = tmp_path / "out.png"
    with _atomic.deferred_commits() as commits:
        with _atomic.atomic_file(str(target)) as f:
            f.write(b"new")

    def no_room(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_room)
    with pytest.raises(GeomError, match=r"out\.png: cannot write \(No space left on device\)"):
        commits[0]()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(("free_blocks", "reason"), [(0, "No space left on device"),
                                                     (10**6, "100 requested and 7 written")])
def test_a_short_write_on_a_full_disk_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free_blocks: int,
                                              reason: str) -> None:
    """numpy's short write has no errno; on a full disk the message names the cause."""
    from geomcli.errors import GeomError
    from geomcli.io import _atomic

    class Stats:
        f_bfree, f_frsize = free_blocks, 4096

    monkeypatch.setattr(os, "statvfs", lambda path: Stats())
    with pytest.raises(GeomError, match=rf"out\.tiff: cannot write \({reason}\)"):
        with _atomic.atomic_file(str(tmp_path / "out.tiff")):
            raise OSError("100 requested and 7 written")
    assert os.listdir(tmp_path) == []


# --- outputs that are not plain files -------------------------------------------------------


def test_an_output_linked_to_a_device_is_written_into_and_stays(tmp_path: Path) -> None:
    """-o /dev/null (here a link to it, so a regression cannot replace the real one, as it once
    did when run as root): written into, never replaced by a file."""
    null = tmp_path / "null"
    null.symlink_to("/dev/null")
    done = subprocess.run([*GEOMCLI, "crop-pad", ROOT / "samples" / "photo.png", "-o", null, "--format", "png",
                           "--shape", "8,8", "-q"], capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")
    assert null.is_symlink() and os.readlink(null) == "/dev/null"
    assert not temps(tmp_path)
    assert not io.maps_output(str(null), (1 << 30,), np.uint8, format="npy")  # nor mapped, when big


def test_an_output_linked_to_dev_full_fails_with_the_reason(tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.symlink_to("/dev/full")
    done = subprocess.run([*GEOMCLI, "crop-pad", ROOT / "samples" / "photo.png", "-o", full, "--format", "png",
                           "--shape", "8,8", "-q"], capture_output=True, text=True)
    assert done.returncode == 1
    assert one_error(done.stderr, full).endswith("cannot write (No space left on device)")
    assert os.readlink(full) == "/dev/full"


def test_an_output_fifo_gets_the_file_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "out.png"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    done = subprocess.run([*GEOMCLI, "crop-pad", ROOT / "samples" / "photo.png", "-o", fifo, "--shape", "8,8", "-q"],
                          capture_output=True, text=True, timeout=60)
    received, _ = reader.communicate(timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert received.startswith(b"\x89PNG") and len(received) > 50
    assert fifo.is_fifo()


def test_a_closed_or_full_standard_output_is_one_error() -> None:
    command = [*GEOMCLI, "crop-pad", ROOT / "samples" / "photo.png", "-o", "-", "--format", "png", "--shape", "8,8",
               "-q"]
    closed = subprocess.run(command, stderr=subprocess.PIPE, text=True, preexec_fn=_closing(1))
    assert closed.returncode == 1
    assert one_error(closed.stderr, "<stdout>").endswith("standard output is closed; give -o FILE")
    with open("/dev/full", "wb") as full:
        done = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 1
    assert one_error(done.stderr, "<stdout>").endswith("cannot write (No space left on device)")


@pytest.mark.parametrize("output", ["out.npy", "-"])
def test_the_file_size_limit_is_named_when_a_write_stops_short(tmp_path: Path, npy_file: Any, output: str) -> None:
    import resource

    source, _ = npy_file((1, 3, 300, 300), np.float32)
    limit = 100 * 1024

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    with open(tmp_path / "stdout", "wb") as sink:
        done = subprocess.run([*GEOMCLI, "crop-pad", source, "-o", output, "--shape", "1,3,200,200", "-q"],
                              cwd=tmp_path, stdout=sink, stderr=subprocess.PIPE, text=True, preexec_fn=small_files)
    assert done.returncode == 1
    name = "<stdout>" if output == "-" else output
    assert one_error(done.stderr, name).endswith("cannot write (File too large)")
    assert not (tmp_path / "out.npy").exists() and not temps(tmp_path)


def _closing(descriptor: int) -> Callable[[], None]:
    """A preexec_fn: the child starts with ``descriptor`` closed (as after ``>&-``)."""
    return functools.partial(os.close, descriptor)


def test_a_closed_stderr_loses_the_summary_only(tmp_path: Path) -> None:
    out = tmp_path / "out.png"
    done = subprocess.run([*GEOMCLI, "crop-pad", ROOT / "samples" / "photo.png", "-o", out, "--shape", "8,8"],
                          stdout=subprocess.PIPE, preexec_fn=_closing(2))
    assert (done.returncode, done.stdout) == (0, b"")
    assert out.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("command", [["info"], ["crop-pad", "--shape", "8,8", "--json", "-o", "out.png"],
                                     ["crop-pad", "--shape", "8,8", "--json", "--out-dir", "squares"]])
def test_text_for_a_closed_or_full_stdout_is_one_error(tmp_path: Path, command: list[str]) -> None:
    argv = [*GEOMCLI, *command, ROOT / "samples" / "photo.png"]
    closed = subprocess.run(argv, cwd=tmp_path, stderr=subprocess.PIPE, text=True, preexec_fn=_closing(1))
    assert closed.returncode == 1
    assert one_error(closed.stderr, "<stdout>").endswith("standard output is closed")
    assert os.listdir(tmp_path) == []  # found before any file was written
    with open("/dev/full", "wb") as full:
        done = subprocess.run(argv, cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 1
    assert one_error(done.stderr, "<stdout>").endswith("cannot write (No space left on device)")


def test_dev_stdout_is_this_process_stdout_even_when_it_is_a_file(tmp_path: Path) -> None:
    """-o /dev/stdout > file (a link to /proc/self/fd/1, which resolves to that plain file) writes
    through descriptor 1, appending where it was opened to append; the link is never replaced."""
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    command = [*GEOMCLI, "crop-pad", ROOT / "samples" / "tensor.npy", "--shape", "1,3,2,2", "--format", "npy", "-q"]
    with open(tmp_path / "out.npy", "ab") as sink:
        for output in (link, "/dev/stdout"):
            done = subprocess.run([*command, "-o", output], stdout=sink, stderr=subprocess.PIPE, text=True)
            assert (done.returncode, done.stderr) == (0, "")
    assert os.readlink(link) == "/proc/self/fd/1"
    with open(tmp_path / "out.npy", "rb") as written:
        assert np.load(written).shape == np.load(written).shape == (1, 3, 2, 2)


def _read_files(folder: Path) -> dict[str, Path]:
    """An input tensor, a grid and a theta in ``folder``, by the names the commands below use."""
    files = {"IN": folder / "in.npy", "GRID": folder / "grid.npy", "THETA": folder / "theta.npy"}
    shutil.copy(ROOT / "samples" / "tensor.npy", files["IN"])
    np.save(files["GRID"], np.zeros((1, 2, 2, 2), np.float32))
    np.save(files["THETA"], np.eye(2, 3, dtype=np.float32)[None])
    return files


@pytest.mark.parametrize("mode", ["ab", "r+b"], ids=[">>", "1<>"])
@pytest.mark.parametrize("command, read", [
    (["crop-pad", "IN", "--shape", "1,3,2,2", "-o", "-"], "IN"),
    (["crop-pad", "IN", "--shape", "1,3,2,2", "--format", "npy", "-o", "/dev/stdout"], "IN"),
    (["crop-pad", "-", "--shape", "1,3,2,2", "-o", "-"], "IN"),
    (["chain", "-i", "IN", "-o", "-", "crop-pad", "--shape", "1,3,2,2"], "IN"),
    (["grid-sample", "IN", "--grid", "GRID", "-o", "-"], "GRID"),
    (["affine-grid", "--theta", "THETA", "--size", "1,3,4,4", "-o", "-"], "THETA"),
], ids=["-o -", "/dev/stdout", "stdin", "chain", "--grid", "--theta"])
def test_stdout_opened_on_a_file_the_run_reads_is_refused_and_the_file_kept(
        tmp_path: Path, command: list[str], read: str, mode: str) -> None:
    """'crop-pad in.npy -o - >> in.npy' appended the result to its own input (and '1<> in.npy'
    wrote it over its start), as 'cat x >> x' would, which GNU cat refuses: so does geomcli now,
    before anything is read or written."""
    files = _read_files(tmp_path)
    before = {path: path.read_bytes() for path in files.values()}
    argv = [*GEOMCLI, *[str(files.get(part, part)) for part in command]]
    with open(files[read], mode) as sink, open(files["IN"], "rb") as source:
        done = subprocess.run(argv, stdin=source, stdout=sink, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 2
    shown = "<stdin>" if "-" in command[:2] else files[read]
    assert done.stderr.splitlines()[-1] == (
        f"Error: {'/dev/stdout' if '/dev/stdout' in command else '<stdout>'} is {shown} itself, which "
        f"{ {'IN': '-i' if 'chain' in command else 'INPUT', 'GRID': '--grid', 'THETA': '--theta'}[read] } reads: "
        "write the output to another file")
    assert {path: path.read_bytes() for path in files.values()} == before


@pytest.mark.parametrize("command, read, option", [
    (["grid-sample", "IN", "--grid", "-", "-o", "-"], "GRID", "--grid"),
    (["warp", "IN", "--theta", "-", "-o", "-"], "THETA", "--theta"),
    (["chain", "-i", "IN", "-o", "-", "grid-sample", "--grid", "-"], "GRID", "grid-sample --grid"),
], ids=["--grid -", "--theta -", "chain"])
def test_stdout_opened_on_the_file_an_option_reads_from_stdin_is_refused(
        tmp_path: Path, command: list[str], read: str, option: str) -> None:
    """'grid-sample in.npy --grid - -o - < grid.npy >> grid.npy' appended the result to the grid
    (exit 0), as warp's --theta - and a chain step's: only a named --grid or --theta file was
    compared with stdout (files_read leaves stdin out)."""
    files = _read_files(tmp_path)
    before = {path: path.read_bytes() for path in files.values()}
    argv = [*GEOMCLI, *[str(files.get(part, part)) for part in command]]
    with open(files[read], "ab") as sink, open(files[read], "rb") as source:
        done = subprocess.run(argv, stdin=source, stdout=sink, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"Error: <stdout> is <stdin> itself, which {option} reads: write the output to another file")
    assert {path: path.read_bytes() for path in files.values()} == before


def test_a_link_swapped_to_a_plain_file_meanwhile_is_not_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the output is a stream is decided on the opened descriptor, not on an earlier look."""
    from geomcli.io import _atomic

    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    link = tmp_path / "out.png"
    link.symlink_to("/dev/null")
    looked = _atomic._is_stream

    def swapped_after_looking(where: str | int) -> bool:
        answer = looked(where)
        if isinstance(where, str):  # the look at the path: then the race is won
            link.unlink()
            link.symlink_to(victim)
        return answer

    monkeypatch.setattr(_atomic, "_is_stream", swapped_after_looking)
    io.write_array(np.zeros((4, 4), np.uint8), str(link))
    assert victim.read_bytes() == b"precious"
    assert not link.is_symlink() and link.read_bytes().startswith(b"\x89PNG")


def test_a_terminal_named_as_the_output_is_refused(tmp_path: Path) -> None:
    import pty

    controller, terminal = pty.openpty()
    try:
        done = subprocess.run([*GEOMCLI, "crop-pad", ROOT / "samples" / "photo.png", "-o", os.ttyname(terminal),
                               "--format", "png", "--shape", "8,8"], capture_output=True, text=True)
    finally:
        os.close(terminal)
        os.close(controller)
    assert done.returncode == 1
    assert one_error(done.stderr).endswith("refusing to write binary data to a terminal")


@pytest.mark.parametrize("output", ["-", "/dev/stdout"])
def test_a_non_blocking_stdout_pipe_gets_every_byte(tmp_path: Path, output: str) -> None:
    """A parent may hand over a pipe in O_NONBLOCK mode (Node, some CI runners): a full pipe is
    waited on, not an error after its first 64 KiB."""
    import fcntl
    import threading

    source = tmp_path / "a.npy"
    np.save(source, np.ones((1, 3, 300, 300), np.float32))
    reader, writer = os.pipe()
    fcntl.fcntl(writer, fcntl.F_SETFL, fcntl.fcntl(writer, fcntl.F_GETFL) | os.O_NONBLOCK)
    received = bytearray()

    def read_slowly() -> None:
        time.sleep(0.5)
        with os.fdopen(reader, "rb") as pipe:
            received.extend(pipe.read())

    thread = threading.Thread(target=read_slowly)
    thread.start()
    done = subprocess.run([*GEOMCLI, "crop-pad", source, "-o", output, "--format", "npy", "--shape", "1,3,300,300",
                           "-q"], stdout=writer, stderr=subprocess.PIPE, text=True, timeout=60)
    os.close(writer)
    thread.join(timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert np.array_equal(np.load(bytes_io.BytesIO(bytes(received))), np.ones((1, 3, 300, 300), np.float32))


def test_dev_stdout_as_the_output_is_stdout_for_json_closing_and_broken_pipes(tmp_path: Path) -> None:
    command = [*GEOMCLI, "crop-pad", ROOT / "samples" / "photo.png", "-o", "/dev/stdout", "--format", "png",
               "--shape", "8,8"]
    both = subprocess.run([*command, "--json"], capture_output=True)
    assert both.returncode == 0 and both.stdout.endswith(b"IEND\xaeB`\x82")  # the data alone
    assert json.loads(both.stderr)["status"] == "ok"  # the record went to stderr, as with -o -
    closed = subprocess.run([*command, "-q"], stderr=subprocess.PIPE, text=True, preexec_fn=_closing(1))
    assert closed.returncode == 1
    assert one_error(closed.stderr, "/dev/stdout").endswith("standard output is closed")
    big = f"{' '.join(GEOMCLI)} crop-pad {ROOT / 'samples' / 'photo.png'} -o /dev/stdout --format npy --shape 3000,3000"
    gone = subprocess.run(["bash", "-c", big + " -q | head -c 1 > /dev/null; echo ${PIPESTATUS[0]}"],
                          capture_output=True, text=True)
    assert (gone.stdout.strip(), gone.stderr) == ("141", "")  # as with -o -: its reader left, quietly
