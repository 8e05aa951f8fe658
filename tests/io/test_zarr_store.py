"""A zarr array's folder is read no further than itself: links out of it and FIFOs are refused."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import S3, run
from test_hostile_inputs import one_error

zarr = pytest.importorskip("zarr")


def raw_array(folder: Path, zarr_format: int) -> tuple[Path, Path]:
    """A 4x8 uint8 array of one uncompressed chunk, and that chunk's file."""
    path = folder / "in.zarr"
    array = zarr.create_array(str(path), shape=(4, 8), chunks=(4, 8), dtype="uint8", zarr_format=zarr_format,
                              compressors=None)
    array[...] = 1
    return path, path / "0.0" if zarr_format == 2 else path / "c" / "0" / "0"


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_chunk_linked_to_a_file_outside_the_array_is_refused(tmp_path: Path, zarr_format: int) -> None:
    """zarr's LocalStore read the file a chunk links to: its bytes came out as the output's pixels."""
    source, chunk = raw_array(tmp_path, zarr_format)
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"not for the output, 32 bytes ..!")
    chunk.unlink()
    chunk.symlink_to(secret)
    result = run("crop-pad", source, "-o", tmp_path / "out.npy", "--shape", "4,8")
    assert result.exit_code == 1
    key = chunk.relative_to(source).as_posix()
    assert one_error(result.stderr, source) == ("a chunk could not be read, transformed or written (ValueError: "
                                                f"{key} is a link to {secret}, outside the array's folder)")
    assert not (tmp_path / "out.npy").exists()


def test_metadata_linked_outside_the_array_is_refused(tmp_path: Path) -> None:
    source, _ = raw_array(tmp_path, 3)
    (source / "zarr.json").rename(tmp_path / "elsewhere.json")
    (source / "zarr.json").symlink_to(tmp_path / "elsewhere.json")
    result = run("info", source)
    assert result.exit_code == 1
    assert one_error(result.stderr, source) == (f"not a readable zarr array (zarr.json is a link to "
                                                f"{tmp_path / 'elsewhere.json'}, outside the array's folder)")


def test_a_chunk_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    source, chunk = raw_array(tmp_path, 3)
    chunk.unlink()
    os.mkfifo(chunk)
    result = run("crop-pad", source, "-o", tmp_path / "out.npy", "--shape", "4,8")
    assert result.exit_code == 1
    assert one_error(result.stderr, source) == ("a chunk could not be read, transformed or written (ValueError: "
                                                "c/0/0 is not a regular file)")


def test_links_inside_the_array_and_to_the_array_are_read(tmp_path: Path) -> None:
    source, chunk = raw_array(tmp_path, 3)
    data = np.arange(32, dtype=np.uint8).reshape(4, 8)
    (source / "kept").write_bytes(data.tobytes())
    chunk.unlink()
    chunk.symlink_to(source / "kept")
    (tmp_path / "link.zarr").symlink_to(source)
    result = run("crop-pad", tmp_path / "link.zarr", "-o", tmp_path / "out.npy", "--shape", "4,8")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), data)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("compressed", [False, True], ids=["raw", "zstd"])
def test_a_chunk_file_bigger_than_its_chunk_can_be_is_refused_before_it_is_read(
        tmp_path: Path, zarr_format: int, compressed: bool) -> None:
    """zarr read such a file whole before its size told: 390 MB in place of an 8x8x3 chunk took
    473 MB resident (855 MB zstd-compressed), then 'cannot reshape array of size 408944832'."""
    path = tmp_path / "in.zarr"
    array = zarr.create_array(str(path), shape=(4, 8), chunks=(4, 8), dtype="uint8", zarr_format=zarr_format,
                              **({} if compressed else {"compressors": None}))
    array[...] = 1
    chunk = path / "0.0" if zarr_format == 2 else path / "c" / "0" / "0"
    with chunk.open("ab") as f:
        f.write(bytes(5 << 20))  # (one of up to 4 MiB is read: its codec says what is wrong with it)
    size = chunk.stat().st_size
    result = run("crop-pad", path, "-o", tmp_path / "out.npy", "--shape", "4,8")
    assert result.exit_code == 1
    key = chunk.relative_to(path).as_posix()
    assert one_error(result.stderr, path) == ("a chunk could not be read, transformed or written (ValueError: "
                                              f"{key} holds {size} bytes, far past the 4672 a chunk of 4x8 uint8 can "
                                              "take)")
    assert not (tmp_path / "out.npy").exists()


def received(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The bytes each S3 object's reads (get_object) of this process bring from now on, by key."""
    import s3fs

    brought: dict[str, int] = {}
    real = s3fs.S3FileSystem._call_s3

    async def counted(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        response = await real(self, method, *args, **kwargs)
        if method == "get_object":
            body, key = response["Body"], kwargs["Key"]

            async def read() -> bytes:
                data = await body.__class__.read(body)
                brought[key] = brought.get(key, 0) + len(data)
                return bytes(data)

            body.read = read
        return response

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", counted)
    return brought


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("compressed", [False, True], ids=["raw", "zstd"])
def test_a_chunk_object_bigger_than_its_chunk_can_be_is_refused_before_it_is_read(
        s3: S3, zarr_format: int, compressed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only local chunk files were refused by their size: a 20 MiB object in place of a 4x8 chunk
    on S3 was read whole (104 MiB at the run's peak), then 'cannot reshape array of size 20971552'.
    It is read no further than a byte past the most a chunk's object is read to."""
    import s3fs

    from geomcli.io import _zarr_store

    store = zarr.storage.FsspecStore(s3fs.S3FileSystem(endpoint_url=s3.endpoint, asynchronous=True),
                                     path=f"{s3.bucket}/in.zarr")
    zarr.create_array(store, shape=(4, 8), chunks=(4, 8), dtype="uint8", zarr_format=zarr_format,
                      **({} if compressed else {"compressors": None}))[...] = 1
    key = "0.0" if zarr_format == 2 else "c/0/0"
    s3.put(f"in.zarr/{key}", s3.get(f"in.zarr/{key}") + bytes(20 << 20))
    brought = received(monkeypatch)
    result = run("crop-pad", f"{s3.url}/in.zarr", "-o", tmp_path / "out.npy", "--shape", "4,8")
    assert result.exit_code == 1
    most = _zarr_store._READ_ANYWAY
    assert one_error(result.stderr, f"{s3.url}/in.zarr") == (
        f"a chunk could not be read, transformed or written (ValueError: {key} holds more than {most} bytes, far "
        "past the 4672 a chunk of 4x8 uint8 can take)")
    assert brought[f"in.zarr/{key}"] == most + 1
    assert not (tmp_path / "out.npy").exists()


def test_a_chunk_object_within_its_bound_is_read_as_it_was(s3: S3, tmp_path: Path) -> None:
    """The ranged read of a chunk's object takes it whole where it is shorter than the range."""
    data = np.arange(4 * 8, dtype=np.uint8).reshape(4, 8)
    np.save(tmp_path / "in.npy", data)
    assert run("crop-pad", tmp_path / "in.npy", "-o", f"{s3.url}/in.zarr", "--shape", "4,8").exit_code == 0
    result = run("crop-pad", f"{s3.url}/in.zarr", "-o", tmp_path / "out.npy", "--shape", "2,6")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), data[1:3, 1:7])


def reset_reads(monkeypatch: pytest.MonkeyPatch, count: int, error: OSError) -> list[str]:
    """The first ``count`` reads of an S3 chunk object in this process fail with ``error`` (raised
    as the filesystem raises it once its own retries are spent); the keys of the chunk reads made."""
    import s3fs

    made: list[str] = []
    real = s3fs.S3FileSystem._call_s3

    async def failing(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "get_object" and "/c/" in kwargs["Key"]:
            made.append(kwargs["Key"])
            if len(made) <= count:
                raise error
        return await real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", failing)
    return made


def reset_first_put(monkeypatch: pytest.MonkeyPatch, failed: Any = None) -> list[str]:
    """The first put of an S3 chunk object in this process fails, its connection reset (``failed``,
    a threading.Event, set then); the keys of the chunk puts made."""
    import s3fs

    puts: list[str] = []
    real = s3fs.S3FileSystem._call_s3

    async def reset_once(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "put_object" and "/c/" in kwargs["Key"]:
            puts.append(kwargs["Key"])
            if len(puts) == 1:
                if failed is not None:
                    failed.set()
                raise ConnectionResetError(104, "Connection reset by peer")
        return await real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", reset_once)
    return puts

def zarr_on_s3(s3: S3, tmp_path: Path) -> np.ndarray:
    """A 2x16x16 float32 array at in.zarr on S3, of one chunk; its values."""
    data = np.arange(2 * 16 * 16, dtype=np.float32).reshape(2, 16, 16)
    np.save(tmp_path / "in.npy", data)
    assert run("crop-pad", tmp_path / "in.npy", "-o", f"{s3.url}/in.zarr", "--shape", "2,16,16").exit_code == 0
    return data


def test_a_chunk_read_the_store_refuses_names_the_input(s3: S3, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's OSError names no file, and its line named none: 'Error: [Errno 13] Access Denied'."""
    zarr_on_s3(s3, tmp_path)
    made = reset_reads(monkeypatch, 10, PermissionError(13, "Access Denied"))
    result = run("crop-pad", f"{s3.url}/in.zarr", "-o", tmp_path / "out.npy", "--shape", "2,8,8")
    assert result.exit_code == 1
    assert one_error(result.stderr, f"{s3.url}/in.zarr") == (
        "a chunk could not be read, transformed or written (PermissionError: [Errno 13] Access Denied)")
    assert made == ["in.zarr/c/0/0/0"]  # a refusal is not asked again
    assert not (tmp_path / "out.npy").exists()


@pytest.mark.parametrize(("count", "tries"), [(1, 2), (10, 3)], ids=["reset-once", "reset-always"])
def test_a_chunk_read_whose_connection_was_reset_is_made_again(s3: S3, tmp_path: Path, count: int, tries: int,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk's read whose connection was reset (once s3fs's own retries were spent) failed the
    whole array's job, where a batch sends a file that failed so again. It is made again after a
    pause, up to READ_RETRIES times."""
    from geomcli.io import _zarr_store

    data = zarr_on_s3(s3, tmp_path)
    monkeypatch.setattr(_zarr_store, "RETRY_SECONDS", 0.01)
    made = reset_reads(monkeypatch, count, ConnectionResetError(104, "Connection reset by peer"))
    result = run("crop-pad", f"{s3.url}/in.zarr", "-o", tmp_path / "out.npy", "--shape", "2,8,8")
    assert made == ["in.zarr/c/0/0/0"] * tries
    if count < tries:
        assert result.exit_code == 0, result.stderr
        np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), data[:, 4:12, 4:12])
        return
    assert result.exit_code == 1
    assert one_error(result.stderr, f"{s3.url}/in.zarr") == (
        "a chunk could not be read, transformed or written (ConnectionResetError: [Errno 104] Connection reset by "
        "peer)")
    assert not (tmp_path / "out.npy").exists()


def test_a_chunk_write_whose_connection_was_reset_is_made_again(s3: S3, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk's put to an output on S3 whose connection was reset failed the whole job: 'cannot
    write (Connection reset by peer)', exit 1. It is put again, whole, after a pause."""
    from geomcli.io import _zarr_store

    data = np.arange(2 * 16 * 16, dtype=np.float32).reshape(2, 16, 16)
    np.save(tmp_path / "in.npy", data)
    monkeypatch.setattr(_zarr_store, "RETRY_SECONDS", 0.01)
    puts = reset_first_put(monkeypatch)
    result = run("crop-pad", tmp_path / "in.npy", "-o", f"{s3.url}/out.zarr", "--shape", "2,8,8")
    assert result.exit_code == 0, result.stderr
    assert puts == ["out.zarr/c/0/0/0"] * 2
    monkeypatch.undo()
    assert run("crop-pad", f"{s3.url}/out.zarr", "-o", tmp_path / "out.npy", "--shape", "2,8,8").exit_code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), data[:, 4:12, 4:12])


@pytest.mark.parametrize("where", ["local", "s3"])
def test_metadata_bigger_than_metadata_is_read_to_is_refused_before_it_is_read(
        where: str, s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """zarr read and parsed a metadata file whole, whatever its size: a 100 MB zarr.json on S3
    took 3 s and 211 MiB. One past METADATA_BYTES (made small here) is refused, having read no more."""
    import json

    from geomcli.io import _zarr_store

    raw_array(tmp_path, 3)
    metadata = tmp_path / "in.zarr" / "zarr.json"
    metadata.write_text(json.dumps(json.loads(metadata.read_text()), indent=1) + " " * 3000)
    size = metadata.stat().st_size
    monkeypatch.setattr(_zarr_store, "METADATA_BYTES", 2000)
    name: Path | str = tmp_path / "in.zarr"
    if where == "s3":
        for path in (tmp_path / "in.zarr").rglob("*"):
            if path.is_file():
                s3.put(f"in.zarr/{path.relative_to(tmp_path / 'in.zarr').as_posix()}", path.read_bytes())
        name = f"{s3.url}/in.zarr"
    brought = received(monkeypatch)
    result = run("crop-pad", name, "-o", tmp_path / "out.npy", "--shape", "4,8")
    assert result.exit_code == 1
    held = f"holds {size} bytes, more than the 2000 bytes" if where == "local" else "holds more than the 2000 bytes"
    assert one_error(result.stderr, name) == f"not a readable zarr array (zarr.json {held} zarr metadata is read to)"
    if where == "s3":  # (asked for as an array's, then as a group's), each read 2001 bytes
        assert brought["in.zarr/zarr.json"] in (2001, 2 * 2001)
    assert not (tmp_path / "out.npy").exists()


def test_a_process_ending_waits_for_its_chunk_puts_before_its_sweep(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    """A -j worker's SIGTERM stops its uploads (io._remote.stop_uploads), then sweeps the zarr
    output it was writing (io._zarr.remove_incomplete). A chunk's put in flight landed after the
    sweep had listed the array and removed its marker: a chunk left outside any array marked
    incomplete, which no later sweep finds (CI saw it once). The puts in flight are waited for,
    and none is begun after the stop."""
    import asyncio
    import threading

    import s3fs

    from geomcli.io import _remote, _zarr

    url = f"{s3.url}/out.zarr"
    _remote.configure(())
    array = zarr.create_array(_zarr._store(url, read_only=False), shape=(2, 8), chunks=(1, 8), dtype="uint8",
                              attributes={"geomcli": {"complete": False}})
    started = threading.Event()
    real = s3fs.S3FileSystem._call_s3

    async def slow(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "put_object" and "/c/" in kwargs["Key"]:
            started.set()
            await asyncio.sleep(0.5)
        return await real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", slow)
    failures: list[str] = []

    def write() -> None:
        for row in range(2):
            try:
                array[row] = 1
            except InterruptedError as error:
                failures.append(str(error))

    thread = threading.Thread(target=write)
    thread.start()
    assert started.wait(30)
    try:
        _remote.stop_uploads()
        assert _zarr.remove_incomplete(url)
    finally:
        thread.join(30)
        _remote.configure(())  # the next test may upload again
    assert s3.keys() == []
    assert failures == ["the process is ending"]  # the second row's put is not begun


def test_a_chunk_put_waiting_to_be_made_again_is_not_made_once_the_process_ends(
        s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk's put that failed on an error that may pass is made again after a pause; a process
    ending meanwhile (io._remote.stop_uploads, which waits for the puts in flight) saw the pause end
    and the put begun again, after the stop that no put begins after. It is not made again."""
    import threading

    from geomcli.io import _remote, _zarr, _zarr_store

    url = f"{s3.url}/out.zarr"
    _remote.configure(())
    array = zarr.create_array(_zarr._store(url, read_only=False), shape=(1, 8), chunks=(1, 8), dtype="uint8",
                              attributes={"geomcli": {"complete": False}})
    monkeypatch.setattr(_zarr_store, "RETRY_SECONDS", 0.5)
    failed = threading.Event()
    puts = reset_first_put(monkeypatch, failed)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            array[0] = 1
        except (OSError, InterruptedError) as error:
            errors.append(error)

    thread = threading.Thread(target=write)
    thread.start()
    assert failed.wait(30)
    try:
        _remote.stop_uploads()  # while the put pauses before its second try
        assert _zarr.remove_incomplete(url)
    finally:
        thread.join(30)
        _remote.configure(())  # the next test may upload again
    assert puts == ["out.zarr/c/0/0"]
    assert [str(error) for error in errors] == ["the process is ending"]
    assert s3.keys() == []
