"""Shared fixtures: a seeded generator and the dtypes every kernel must take."""

from __future__ import annotations

import functools
import io
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

# A run started in the background by a non-interactive shell (`cmd &`) inherits SIGINT ignored, and
# so would every geomcli the tests start: the signal tests need Ctrl-C as a terminal delivers it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# ... and under nohup, SIGHUP ignored: geomcli rightly keeps it so, and the SIGHUP tests saw exit 0
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)

# Every ONNX tensor type, as numpy spells it (bfloat16 through ml_dtypes).
ALL_DTYPES = [
    np.dtype(bool),
    *map(np.dtype, ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]),
    *map(np.dtype, ["float16", "float32", "float64"]),
    np.dtype(ml_dtypes.bfloat16),
    *map(np.dtype, ["complex64", "complex128"]),
    np.dtype("<U4"),
    np.dtype(np.dtypes.StringDType()),
]
FLOAT_DTYPES = [np.dtype("float16"), np.dtype("float32"), np.dtype("float64"), np.dtype(ml_dtypes.bfloat16)]


# Python that prints the running process's peak resident memory in MiB: VmHWM, its own address
# space's, which exec starts anew (getrusage's ru_maxrss keeps the peak of the process that forked
# it: a child of a big test process would report that one's size)
PRINT_PEAK_MIB = 'print(int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024)'


@functools.cache
def has_imagemagick() -> bool:
    """Whether ImageMagick's own convert runs here (some machines carry a stand-in by that name
    that converts a PNG to PPM and nothing else)."""
    if shutil.which("convert") is None:
        return False
    version = subprocess.run(["convert", "-version"], capture_output=True, text=True, timeout=60)
    return version.returncode == 0 and version.stdout.startswith("Version: ImageMagick")


def needs_imagemagick(test: Callable[..., None]) -> Callable[..., None]:
    """Skips ``test`` where ImageMagick is not installed (asked when the test runs, not at collection)."""

    @functools.wraps(test)
    def checked(*args: Any, **kwargs: Any) -> None:
        if not has_imagemagick():
            pytest.skip("ImageMagick is not installed")
        test(*args, **kwargs)

    return checked


def run(*args: Any, stdin: bytes | None = None, env: dict[str, str] | None = None) -> Any:
    """geomcli's command line in this process (click's CliRunner), as the tests' one way to run it:
    exceptions are not caught, so a bug shows its traceback; stdout and stderr come apart."""
    from click.testing import CliRunner

    from geomcli.cli import cli

    return CliRunner().invoke(cli, [str(arg) for arg in args], input=stdin, env=env, catch_exceptions=False)


def hooked(hooks: Path, **more: str) -> dict[str, str]:
    """This process's environment for a run that loads ``hooks/sitecustomize.py`` first, then the
    geomcli under test (the hooks alone on PYTHONPATH ran an installed geomcli, from a worktree
    the checkout's instead of its own), with ``more`` variables."""
    import geomcli

    under_test = str(Path(geomcli.__file__).parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(hooks), under_test]), **more}


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(42)


def make_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Distinct-ish values of any supported dtype, so misplaced elements show."""
    values = rng.integers(1, 100, size=shape)
    if dtype.kind in "UT":
        return values.astype(str).astype(dtype)
    if dtype.kind == "b":
        return values % 2 == 1
    if dtype.kind == "c":
        return (values + 1j * rng.integers(1, 100, size=shape)).astype(dtype)
    return values.astype(dtype)


# ---- files on disk, written by the backends themselves (not by geomcli.io), for reader tests ----
# Pillow and tifffile are imported inside the factories: collecting the tests stays light.


FileFactory = Callable[..., tuple[str, np.ndarray]]


@pytest.fixture
def npy_file(tmp_path: Path, rng: np.random.Generator) -> FileFactory:
    """Factory: npy_file(shape, dtype, name="a.npy") -> (path, array), written by np.save."""

    def make(shape: tuple[int, ...] = (2, 3, 4), dtype: Any = np.float32, name: str = "a.npy",
             **save: Any) -> tuple[str, np.ndarray]:
        data = make_array(rng, tuple(shape), np.dtype(dtype))
        path = tmp_path / name
        np.save(path, data, **save)
        return str(path), data

    return make


@pytest.fixture
def png_file(tmp_path: Path, rng: np.random.Generator) -> FileFactory:
    """Factory: png_file(shape, dtype=uint8, name="a.png") -> (path, array), written by Pillow."""

    def make(shape: tuple[int, ...] = (12, 16, 3), dtype: Any = np.uint8, name: str = "a.png",
             **save: Any) -> tuple[str, np.ndarray]:
        from PIL import Image

        data = make_array(rng, tuple(shape), np.dtype(dtype))
        if data.dtype == np.uint8:
            data = rng.integers(0, 256, size=shape, dtype=np.uint8)
        path = tmp_path / name
        Image.fromarray(data).save(path, format="PNG", **save)
        return str(path), data

    return make


@pytest.fixture
def tiff_file(tmp_path: Path, rng: np.random.Generator) -> FileFactory:
    """Factory: tiff_file(shape, dtype, name="a.tiff", **imwrite) -> (path, array), by tifffile."""

    def make(shape: tuple[int, ...] = (3, 8, 10), dtype: Any = np.uint16, name: str = "a.tiff",
             **imwrite: Any) -> tuple[str, np.ndarray]:
        import tifffile

        data = make_array(rng, tuple(shape), np.dtype(dtype))
        path = tmp_path / name
        imwrite.setdefault("photometric", "minisblack")
        tifffile.imwrite(path, data, **imwrite)
        return str(path), data

    return make


def slow_inputs(folder: Path, count: int, shape: tuple[int, int] = (400, 600)) -> None:
    """``count`` PNGs of ``shape`` that take a while each: noise compresses badly, so the encoder works."""
    folder.mkdir()
    for index in range(count):
        (folder / f"{index:03d}.png").write_bytes(_slow_png(index, shape))


@functools.cache
def _slow_png(index: int, shape: tuple[int, int]) -> bytes:
    """The index-th slow input's file, encoded once per session (60 of them took 1.2 s of CPU)."""
    from PIL import Image

    frame = np.random.default_rng(7).integers(0, 256, (*shape, 3), dtype=np.uint8)
    encoded = io.BytesIO()
    Image.fromarray(np.roll(frame, index, axis=1)).save(encoded, format="PNG", compress_level=0)
    return encoded.getvalue()


# read(2)'s number, as /proc/PID/syscall shows it, where we know it
_READ_SYSCALL = {"x86_64": 0, "aarch64": 63}


def wait_until_reading_stdin(process: subprocess.Popen[Any], timeout: float = 30) -> None:
    """Returns once a thread of ``process``, or of a process it started (a shell's geomcli), waits
    in a read of its standard input (Linux's /proc/PID/task/*/syscall), so a signal sent next lands
    mid-read: a fixed second of sleep took that long on an idle machine and could be too short on
    a busy one. Elsewhere, that second."""
    import platform
    import time

    number = _READ_SYSCALL.get(platform.machine())
    if number is None or not Path(f"/proc/{process.pid}/task").is_dir():
        time.sleep(1.0)
        return
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, "the process ended before it read its standard input"
        for task in (task for pid in _family(process.pid) for task in Path(f"/proc/{pid}/task").glob("*")):
            try:
                call = (task / "syscall").read_text().split()
            except OSError:  # the thread ended meanwhile
                continue
            if call[:2] == [str(number), "0x0"]:  # read(0, ...)
                return
        assert time.monotonic() < deadline, "the process never read its standard input"
        time.sleep(0.01)


def _family(pid: int) -> list[int]:
    """``pid`` and the processes it started, at any depth (each /proc/PID/stat's parent: the
    kernel's task children lists are not always built in)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
    family = [pid]
    for member in family:  # (grows as it goes: children, then theirs)
        family += [child for child, parent in parents.items() if parent == member]
    return family


@contextmanager
def fifo_feeding(fifo: Path, payload: bytes) -> Iterator[Path]:
    """A named pipe at ``fifo`` that a thread fills with ``payload`` once a reader opens it."""
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as f:
            f.write(payload)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        yield fifo
    finally:
        writer.join(timeout=10)


# ---- the official ONNX backend cases, generated from the installed onnx --------------------------


@dataclass(frozen=True)
class OnnxCase:
    """One backend node case: its op, attributes (strings decoded) and (inputs, outputs) pairs."""

    name: str
    op_type: str
    attributes: dict[str, Any]
    data_sets: list[tuple[list[np.ndarray], list[np.ndarray]]]


@functools.cache
def onnx_cases(op_type: str) -> dict[str, OnnxCase]:
    """Every backend node case of ``op_type`` (expanded function bodies left out), by name, made
    by running its module of generators, once per session."""
    import onnx

    def as_array(value: Any) -> np.ndarray:
        return onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)

    found: dict[str, OnnxCase] = {}
    for case in _onnx_generated_cases(ONNX_CASE_MODULES[op_type]):
        assert case.model is not None and case.data_sets is not None
        node = case.model.graph.node[0]
        if node.op_type != op_type or "_expanded" in case.name:
            continue
        attributes = {}
        for attribute in node.attribute:
            value = onnx.helper.get_attribute_value(attribute)
            attributes[attribute.name] = value.decode() if isinstance(value, bytes) else value
        data_sets = [([as_array(v) for v in inputs], [as_array(v) for v in outputs])
                     for inputs, outputs in case.data_sets]
        found[case.name] = OnnxCase(case.name, op_type, attributes, data_sets)
    return found


# The module of onnx.backend.test.case.node whose generators make each operator's cases: importing
# a module runs its generators. collect_testcases(None) imports and runs all ~190 of them (7 s of
# CPU for 1884 cases, 73 of them ours); test_kernels.py checks that no other module makes ours.
ONNX_CASE_MODULES = {
    "AffineGrid": "affinegrid",
    "CenterCropPad": "center_crop_pad",
    "DepthToSpace": "depthtospace",
    "GridSample": "gridsample",
    "Resize": "resize",
    "SpaceToDepth": "spacetodepth",
}


@functools.cache
def _onnx_generated_cases(module: str) -> list[Any]:
    """The cases ``module``'s generators make (with any made by modules imported before it)."""
    import importlib

    importlib.import_module(f"onnx.backend.test.case.node.{module}")
    from onnx.backend.test.case import node

    return list(node._NodeTestCases)  # what collect_testcases returns, without importing the rest


# ---- real parts for the dask extra: a LocalCluster and an S3 server on 127.0.0.1 ----------------


@pytest.fixture(scope="session")
def dask_cluster() -> Iterator[Any]:
    """A LocalCluster of 2 worker processes, one thread each, with the settings ``--scheduler
    local:2`` starts one with (geomcli.engine.scheduler_module.LOCAL_CONFIG), for the tests that join one.
    Spawned, not forked from the forkserver this process's -j tests share."""
    distributed = pytest.importorskip("distributed")
    import logging

    import dask

    from geomcli.engine import scheduler as scheduler_module

    # for the cluster's life, as geomcli's own: a worker the scheduler fixture's scale adds after
    # a test's deaths had no preload (it did not ignore SIGTERM)
    with dask.config.set({**scheduler_module.LOCAL_CONFIG, "distributed.worker.multiprocessing-method": "spawn"}):
        local = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                         dashboard_address=None, silence_logs=logging.CRITICAL,
                                         scheduler_kwargs={"dashboard": False, "dashboard_address": ":0"})
        try:
            yield local
        finally:
            local.close()


@pytest.fixture
def scheduler(dask_cluster: Any) -> str:
    """The session cluster's address, once both its workers are up (a test may have killed one)."""
    import time

    import distributed

    with distributed.Client(dask_cluster.scheduler_address, set_as_default=False) as client:
        deadline = time.monotonic() + 60
        while len(client.nthreads()) < 2:
            assert time.monotonic() < deadline, "the session's cluster lost a worker for good"
            dask_cluster.scale(2)  # should a test's deaths have made it drop one (see cluster._Dispatch)
            time.sleep(0.2)
    return str(dask_cluster.scheduler_address)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 and a free port, for the session."""
    pytest.importorskip("s3fs")
    server_module = pytest.importorskip("moto.server")
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@dataclass
class S3:
    """A fresh bucket on the session's S3 server: its URL, a boto3 client, and the endpoint."""

    url: str
    bucket: str
    client: Any
    endpoint: str

    def keys(self) -> list[str]:
        listed = self.client.list_objects_v2(Bucket=self.bucket).get("Contents", [])
        return sorted(item["Key"] for item in listed)

    def put(self, key: str, data: bytes) -> str:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)
        return f"{self.url}/{key}"

    def get(self, key: str) -> bytes:
        return bytes(self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read())

    @property
    def options(self) -> list[str]:
        """The server as --storage-option flags, for runs that do not see this process's environment."""
        return ["--storage-option", f"endpoint_url={self.endpoint}", "--storage-option", "key=testing",
                "--storage-option", "secret=testing"]


_buckets = iter(range(10**6))


@pytest.fixture
def s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> S3:
    """A new bucket, and this process's environment (as the CLI's subprocesses') pointed at the
    server the way a user's is at theirs: AWS_ENDPOINT_URL and keys, no region."""
    import boto3

    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    bucket = f"geomcli-{next(_buckets):04d}"
    client = boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    client.create_bucket(Bucket=bucket)
    return S3(f"s3://{bucket}", bucket, client, s3_endpoint)


@pytest.fixture
def by_value(request: pytest.FixtureRequest) -> Iterator[None]:
    """The test module's functions travel to Dask workers by value (the workers cannot import it)."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(request.module)
    try:
        yield
    finally:
        cloudpickle.unregister_pickle_by_value(request.module)
