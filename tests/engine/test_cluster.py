"""Batches on Dask (geomcli.engine.cluster): a LocalCluster of 2 process workers for the session;
outputs, JSON records and exit codes as -j's; a worker killed mid-run; a file that kills its
worker; passing I/O errors retried and bad files not; Ctrl-C and SIGTERM; the unreachable
scheduler; the usage errors."""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from click.testing import CliRunner, Result
from conftest import hooked, slow_inputs
from PIL import Image

from geomcli.cli import cli
from geomcli.engine import cluster, operations, workers
from geomcli.engine import scheduler as scheduler_module
from geomcli.engine.options import BatchOptions, Common
from geomcli.engine.plan import Job, Task
from geomcli.errors import GeomError

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.cluster

GEOMCLI = [sys.executable, "-m", "geomcli"]


def run(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner(env=env).invoke(cli, [str(arg) for arg in args], catch_exceptions=False)


def files(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())


def contents(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in files(folder)}


def records(result: Result, out: Path) -> list[dict[str, Any]]:
    """The JSON records, timings left out, outputs relative to ``out``."""
    found = [json.loads(line) for line in result.stdout.splitlines()]
    for record in found:
        record.pop("seconds")
        if record.get("output"):
            record["output"] = os.path.relpath(record["output"], out)
    return found


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """PNG (8- and 16-bit), NPY and TIFF inputs that space-to-depth takes, and more PNGs."""
    import tifffile

    rng = np.random.default_rng(42)
    root = tmp_path / "mixed"
    (root / "sub").mkdir(parents=True)
    for index in range(12):
        Image.fromarray(rng.integers(0, 256, (16, 20, 3), dtype=np.uint8)).save(root / f"rgb{index:02d}.png")
    Image.fromarray(rng.integers(0, 65536, (12, 12), dtype=np.uint16)).save(root / "sub" / "grey16.png")
    np.save(root / "t.npy", rng.standard_normal((2, 3, 4, 6)).astype(np.float32))
    tifffile.imwrite(root / "s.tiff", rng.integers(0, 60000, (6, 12, 3), dtype=np.uint16))
    return root


def test_outputs_records_and_exit_code_are_those_of_j2(mixed: Path, tmp_path: Path, scheduler: str) -> None:
    (mixed / "broken.png").write_bytes((mixed / "rgb00.png").read_bytes()[:60])  # a corrupt file among good ones
    runs = {}
    for how in (["-j", "2"], ["--scheduler", scheduler]):
        out = tmp_path / how[0].strip("-")
        result = run("space-to-depth", mixed, "-r", "--out-dir", out, "--name", "{stem}.{index}.tiff",
                     "--blocksize", "2", "--json", *how)
        runs[how[0]] = result, contents(out), records(result, out)
    (j2, j2_files, j2_records), (dask, dask_files, dask_records) = runs["-j"], runs["--scheduler"]
    assert dask.exit_code == j2.exit_code == 1
    assert len(dask_files) == 15 and dask_files == j2_files  # byte for byte, no temp file
    assert dask_records == j2_records  # in input order, the failure and the summary included
    assert dask.stderr == j2.stderr == f"Error: {mixed / 'broken.png'}: not a readable PNG (truncated)\n"


def test_a_big_batch_has_its_headers_checked_by_the_workers(mixed: Path, tmp_path: Path, scheduler: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Past HEADERS_HERE inputs the workers read the headers, in tasks: the same faults, lines and
    exit code as -j's, nothing written; and a batch they all fit runs."""
    monkeypatch.setattr(cluster, "HEADERS_HERE", 0)
    monkeypatch.setattr(cluster, "HEADER_TASK_FILES", 2)  # 15 inputs: 8 tasks
    tiffs = ("--name", "{stem}.{index}.tiff")
    j2 = run("space-to-depth", mixed, "-r", "--out-dir", tmp_path / "out", *tiffs, "--blocksize", "4", "-j", "2")

    def not_here(*args: Any) -> None:
        raise AssertionError("a header checked by the client")

    monkeypatch.setattr(workers, "option_faults", not_here)
    monkeypatch.setattr(cluster.plans, "option_faults", not_here)  # the workers' processes keep theirs
    dask = run("space-to-depth", mixed, "-r", "--out-dir", tmp_path / "out", *tiffs, "--blocksize", "4",
               "--scheduler", scheduler)
    assert dask.exit_code == j2.exit_code == 2
    assert dask.stderr == j2.stderr
    assert "Error: " + str(mixed / "t.npy") in dask.stderr and "Error: " + str(mixed / "s.tiff") in dask.stderr
    assert "2 of 15 inputs cannot take these options" in dask.stderr
    assert not (tmp_path / "out").exists()
    ok = run("space-to-depth", mixed, "-r", "--out-dir", tmp_path / "ok", *tiffs, "--blocksize", "2",
             "--scheduler", scheduler)
    assert ok.exit_code == 0, ok.stderr
    assert len(files(tmp_path / "ok")) == 15


def test_a_small_batch_refused_by_its_headers_reaches_no_cluster(mixed: Path, tmp_path: Path) -> None:
    """Its headers are checked here first: the usage fault (exit 2), not the unreachable scheduler."""
    started = time.monotonic()
    result = run("space-to-depth", mixed, "-r", "--out-dir", tmp_path / "out", "--name", "{stem}.{index}.tiff",
                 "--blocksize", "4", "--scheduler", "tcp://127.0.0.1:1")
    assert result.exit_code == 2
    assert "2 of 15 inputs cannot take these options" in result.stderr and "scheduler" not in result.stderr
    assert time.monotonic() - started < 5


def test_relative_names_are_this_shell_s_not_the_workers(mixed: Path, tmp_path: Path, scheduler: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's working folder is its own: the files named from here are read and written, and
    the lines and records name them as -j's do."""
    (mixed / "broken.png").write_bytes((mixed / "rgb00.png").read_bytes()[:60])
    monkeypatch.setattr(cluster, "HEADERS_HERE", 0)  # the workers read the headers too
    monkeypatch.chdir(mixed.parent)
    runs = {}
    for how in (["-j", "2"], ["--scheduler", scheduler]):
        out = how[0].strip("-")
        result = run("crop-pad", "mixed/*.png", "--out-dir", out, "--shape", "8,8", "--json", *how)
        runs[how[0]] = result, contents(tmp_path / out), [json.loads(line) for line in result.stdout.splitlines()]
    (j2, j2_files, j2_records), (dask, dask_files, dask_records) = runs["-j"], runs["--scheduler"]
    assert dask.exit_code == j2.exit_code == 1
    assert len(dask_files) == 12 and dask_files == j2_files
    for record in (*j2_records, *dask_records):
        record.pop("seconds")
    assert [record.pop("output") for record in j2_records[:-1]] == [
        record.pop("output").replace("scheduler/", "j/", 1) for record in dask_records[:-1]]
    assert dask_records == j2_records
    assert dask.stderr == j2.stderr == "Error: mixed/broken.png: not a readable PNG (truncated)\n"


def test_an_unreachable_scheduler_makes_no_output_folder(mixed: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_module, "CONNECT_SECONDS", 1)
    result = run("crop-pad", f"{mixed}/*.png", "--out-dir", tmp_path / "out", "--shape", "8,8",
                 "--scheduler", "tcp://127.0.0.1:1")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: tcp://127.0.0.1:1: cannot reach the Dask scheduler (")
    assert not (tmp_path / "out").exists()


def test_the_environment_variable_names_the_scheduler(mixed: Path, tmp_path: Path, scheduler: str) -> None:
    result = run("crop-pad", f"{mixed}/*.png", "--out-dir", tmp_path / "out", "--shape", "8,8",
                 env={"GEOMCLI_SCHEDULER": scheduler})
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("crop-pad: 12 ok, 0 failed, 0 skipped in ")
    assert len(files(tmp_path / "out")) == 12
    # and a one-file run, which it is not for, is run as ever
    result = run("crop-pad", mixed / "rgb00.png", "-o", tmp_path / "one.png", "--shape", "8,8",
                 env={"GEOMCLI_SCHEDULER": scheduler})
    assert result.exit_code == 0, result.stderr


def test_no_clobber_and_skip_existing_are_planned_here(mixed: Path, tmp_path: Path, scheduler: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "rgb00.png").write_bytes(b"mine")
    result = run("crop-pad", f"{mixed}/*.png", "--out-dir", out, "--shape", "8,8", "-n", "--scheduler", scheduler)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("crop-pad: 11 ok, 0 failed, 1 skipped in ")
    assert (out / "rgb00.png").read_bytes() == b"mine"
    result = run("crop-pad", f"{mixed}/*.png", "--out-dir", out, "--shape", "8,8", "--skip-existing",
                 "--scheduler", scheduler)
    assert result.stderr.startswith("crop-pad: 0 ok, 0 failed, 12 skipped in ")


def worker_pids(scheduler: str) -> list[int]:
    with distributed.Client(scheduler, set_as_default=False) as client:
        return list(client.run(os.getpid).values())


def first_output(out: Path, deadline: float = 30) -> None:
    """Wait until a complete output is in ``out``."""
    ends = time.monotonic() + deadline
    while not (out.exists() and any(not name.startswith(".") for name in os.listdir(out))):
        assert time.monotonic() < ends
        time.sleep(0.02)


def test_fail_fast_reports_every_output_it_placed(tmp_path: Path, scheduler: str) -> None:
    """The tasks in flight stop before their next file and report what they did, as -j's workers
    finish the file they hold: every output there has its record, and the rest are not run."""
    slow_inputs(tmp_path / "in", 40, (300, 400))
    (tmp_path / "in" / "005.png").write_bytes(b"not a PNG")
    out = tmp_path / "out"
    result = run("crop-pad", tmp_path / "in", "--out-dir", out, "--shape", "64,64", "--fail-fast", "--json",
                 "--scheduler", scheduler)
    assert result.exit_code == 1
    found = [json.loads(line) for line in result.stdout.splitlines()]
    summary = found.pop()
    written = {os.path.basename(record["output"]) for record in found if record["status"] == "ok"}
    assert written == set(files(out))  # no output without its record, nor a record without its output
    assert summary["ok"] == len(written) and summary["failed"] == 1
    assert summary["not_run"] == 40 - 1 - len(written) > 0


def test_a_worker_killed_mid_run_costs_its_files_a_retry_not_the_run(tmp_path: Path, scheduler: str) -> None:
    slow_inputs(tmp_path / "in", 40, (300, 400))
    out = tmp_path / "out"
    reference = tmp_path / "reference"
    assert run("crop-pad", tmp_path / "in", "--out-dir", reference, "--shape", "290,390", "-j", "2").exit_code == 0
    victim = worker_pids(scheduler)[0]

    def kill_one() -> None:
        first_output(out)
        os.kill(victim, signal.SIGKILL)

    killer = threading.Thread(target=kill_one)
    killer.start()
    result = run("crop-pad", tmp_path / "in", "--out-dir", out, "--shape", "290,390", "--scheduler", scheduler)
    killer.join()
    assert victim not in worker_pids(scheduler)  # it did die mid-run (the nanny started another)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("crop-pad: 40 ok, 0 failed, 0 skipped in ")
    assert contents(out) == contents(reference)  # every file, none half-written, no temp file left


@pytest.fixture
def dask_retries(dask_cluster: Any) -> Iterator[None]:
    """The session cluster set as a scheduler started from the shell is: Dask's default of 3
    retries of its own after a worker dies, before the client hears of it (KilledWorker)."""
    scheduler = dask_cluster.scheduler
    before = scheduler.allowed_failures
    scheduler.allowed_failures = 3
    try:
        yield
    finally:
        scheduler.allowed_failures = before


def test_a_worker_killed_on_a_cluster_that_retries_itself_leaves_no_temp_file(tmp_path: Path, scheduler: str,
                                                                              dask_retries: None) -> None:
    """Dask ran the dead worker's task again elsewhere and the client saw it finish: the temp file
    the dead worker was writing was left in the output folder (.f157.png.u94hedwk.tmp in a
    try-out on a cluster started with `dask scheduler`)."""
    test_a_worker_killed_mid_run_costs_its_files_a_retry_not_the_run(tmp_path, scheduler)


@dataclass(frozen=True)
class _Deadly(operations.CropPad):
    """A crop-pad that ends its worker process on a file named deadly: a crash, not an error."""

    command: ClassVar[str] = "crop-pad"

    def apply(self, loaded: Any, common: Common, allocate: Any = None) -> np.ndarray:
        if "deadly" in loaded.source:
            os._exit(3)
        return super().apply(loaded, common, allocate)


@dataclass(frozen=True)
class _DiesUploading(operations.CropPad):
    """A crop-pad whose worker, on a file named deadly, is killed as its output's first part goes
    up, its multipart upload made (the OOM killer's SIGKILL mid-upload)."""

    command: ClassVar[str] = "crop-pad"

    def apply(self, loaded: Any, common: Common, allocate: Any = None) -> np.ndarray:
        if "deadly" in loaded.source:
            import s3fs

            from geomcli.io import _remote

            _remote.MULTIPART_BYTES = 10 << 20  # parts of 5 MiB, S3's least
            real = s3fs.S3FileSystem._call_s3

            async def killed(fs: Any, method: str, *args: Any, **kwargs: Any) -> Any:
                if method == "upload_part":
                    os.kill(os.getpid(), signal.SIGKILL)
                return await real(fs, method, *args, **kwargs)

            s3fs.S3FileSystem._call_s3 = killed  # type: ignore[method-assign]
        return super().apply(loaded, common, allocate)


def test_a_file_whose_worker_dies_uploading_leaves_no_pending_upload(tmp_path: Path, scheduler: str, s3: Any,
                                                                     by_value: None,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Killed twice mid-upload: the retry sweeps the first death's upload, the client the second's."""
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a", "deadly"):
        np.save(folder / f"{name}.npy", np.arange(3 << 20, dtype=np.float32))  # 12 MiB
    common = Common(json=True, storage_options=(("endpoint_url", s3.endpoint), ("key", "testing"),
                                                ("secret", "testing")))
    options = BatchOptions(f"{s3.url}/out", scheduler=scheduler)
    code = workers.run(_DiesUploading((3145000,)), common, [str(folder / "a.npy"), str(folder / "deadly.npy")],
                       options)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert [line["status"] for line in lines[:2]] == ["ok", "error"], lines
    assert lines[1]["error"].endswith("deadly.npy: the worker process ended while doing it (twice)")
    assert s3.keys() == ["out/a.npy"]
    assert s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []


@dataclass(frozen=True)
class _DiesUploadingOrFailsLate(_DiesUploading):
    """As _DiesUploading, and a file named late fails once the deadly file's worker has died (the
    scheduler's remove-worker event names its task of this run: the client hears of the death
    before of this task's end), and before its retry is sent: a retry waits until no other task
    is in flight."""

    def apply(self, loaded: Any, common: Common, allocate: Any = None) -> np.ndarray:
        if "late" in loaded.source:
            from distributed import get_client, get_worker

            run_id = get_worker().get_current_task().rsplit("-", 1)[0]  # geomcli-{run id}-{count}
            deadline = time.monotonic() + 30
            while not _died_running(get_client().get_events("all"), f"{run_id}-"):
                assert time.monotonic() < deadline, "the deadly file's worker did not die"
                time.sleep(0.05)
            raise GeomError(f"{loaded.source}: late")
        return super().apply(loaded, common, allocate)


def _died_running(events: Any, prefix: str) -> bool:
    """Whether the scheduler's ``events`` say a worker was removed running a task keyed ``prefix...``."""
    return any(isinstance(message, dict) and message.get("action") == "remove-worker"
               and any(str(key).startswith(prefix) for key in message.get("processing-tasks", ()))
               for _, message in events)


def test_fail_fast_before_a_retry_leaves_no_pending_upload(tmp_path: Path, scheduler: str, s3: Any,
                                                           by_value: None, capsys: pytest.CaptureFixture[str]) -> None:
    """--fail-fast stops the run between a worker's death and its file's retry, which is never
    sent: the retry swept what the death left (here a pending upload) on a worker, so nothing did."""
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("deadly", "late"):
        np.save(folder / f"{name}.npy", np.arange(3 << 20, dtype=np.float32))  # 12 MiB: a task each
    common = Common(json=True, storage_options=(("endpoint_url", s3.endpoint), ("key", "testing"),
                                                ("secret", "testing")))
    options = BatchOptions(f"{s3.url}/out", scheduler=scheduler, fail_fast=True)
    code = workers.run(_DiesUploadingOrFailsLate((3145000,)), common,
                       [str(folder / "deadly.npy"), str(folder / "late.npy")], options)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert [line.get("status") for line in lines[:1]] == ["error"] and lines[0]["error"].endswith(": late"), lines
    assert s3.keys() == []
    assert s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []


@dataclass(frozen=True)
class _Flaky(operations.CropPad):
    """A crop-pad whose reads fail with EIO the first ``failures`` times for each file (counted in
    files beside the inputs), and always with a bad file's GeomError on a file named bad."""

    failures: int = 1
    command: ClassVar[str] = "crop-pad"

    def apply(self, loaded: Any, common: Common, allocate: Any = None) -> np.ndarray:
        from geomcli.errors import GeomError

        tries = Path(loaded.source + ".tries")
        count = int(tries.read_text()) if tries.exists() else 0
        tries.write_text(str(count + 1))
        if "bad" in loaded.source:
            raise GeomError("not a crop-pad it likes")
        if count < self.failures:
            raise OSError(errno.EIO, "Input/output error", loaded.source)
        return super().apply(loaded, common, allocate)


def npy_inputs(folder: Path, names: list[str]) -> list[str]:
    folder.mkdir()
    for name in names:
        np.save(folder / f"{name}.npy", np.arange(24, dtype=np.int16).reshape(4, 6))
    return [str(folder / f"{name}.npy") for name in names]


def test_a_file_that_kills_its_worker_fails_alone_after_one_retry(tmp_path: Path, scheduler: str, by_value: None,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    inputs = npy_inputs(tmp_path / "in", ["a", "b", "deadly", "c", "d"])
    options = BatchOptions(str(tmp_path / "out"), scheduler=scheduler)
    code = workers.run(_Deadly((2, 2)), Common(json=True), inputs, options)
    assert code == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["status"] for line in lines[:5]] == ["ok", "ok", "error", "ok", "ok"], lines
    assert lines[2]["error"] == f"{inputs[2]}: the worker process ended while doing it (twice)"
    assert files(tmp_path / "out") == ["a.npy", "b.npy", "c.npy", "d.npy"]


def _seen_by_the_scheduler(prefix: str) -> tuple[set[str], list[int]]:
    """From a task: the keys of the scheduler's tasks that start with ``prefix``, and its workers' pids."""
    from distributed import get_client

    def seen(dask_scheduler: Any) -> tuple[set[str], list[int]]:
        return ({key for key in dask_scheduler.tasks if isinstance(key, str) and key.startswith(prefix)},
                [worker.pid for worker in dask_scheduler.workers.values()])

    return get_client().run_on_scheduler(seen)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _KillsTheFirstWorker(operations.CropPad):
    """A crop-pad that counts the times each file is done (in a file beside it) and notes the worker
    that did it; on a file named killer it SIGKILLs the worker that did "done" (an OOM kill, a lost
    machine) once that task's reports have come back (its key gone from the scheduler; 10 s at most),
    and returns once the scheduler has removed it."""

    command: ClassVar[str] = "crop-pad"

    def apply(self, loaded: Any, common: Common, allocate: Any = None) -> np.ndarray:
        from distributed import get_worker

        tries = Path(loaded.source + ".tries")
        tries.write_text(str(int(tries.read_text()) + 1 if tries.exists() else 1))
        Path(loaded.source + ".pid").write_text(str(os.getpid()))
        if "killer" in loaded.source:
            run = get_worker().get_current_task().rsplit("-", 1)[0]
            done = Path(loaded.source.replace("killer", "done"))
            ends = time.monotonic() + 10
            while time.monotonic() < ends and not (Path(f"{done}.pid").exists()
                                                   and f"{run}-1" not in _seen_by_the_scheduler(run)[0]):
                time.sleep(0.05)
            victim = int(Path(f"{done}.pid").read_text())
            assert victim != os.getpid(), "the two tasks ran on one worker"
            os.kill(victim, signal.SIGKILL)
            ends = time.monotonic() + 30
            while time.monotonic() < ends and victim in _seen_by_the_scheduler(run)[1]:  # (what it held, lost)
                time.sleep(0.05)
        return super().apply(loaded, common, allocate)


def test_a_worker_lost_after_its_task_reported_does_not_have_the_task_run_again(
        tmp_path: Path, scheduler: str, by_value: None, capsys: pytest.CaptureFixture[str]) -> None:
    """A task's result stayed on its worker until the next task ended: that worker's death then had
    Dask run the task again, behind the run, its files done again after their reports (a
    '.c.npy.*.tmp' listed as test_a_file_that_kills_its_worker... returned, 1 run of the file in 4;
    on a joined cluster, outputs rewritten after the run ended)."""
    inputs = npy_inputs(tmp_path / "in", ["done", "killer"])
    options = BatchOptions(str(tmp_path / "out"), scheduler=scheduler)
    code = workers.run(_KillsTheFirstWorker((2, 2)), Common(json=True), inputs, options)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0, [line.get("error") for line in lines]
    assert [line["status"] for line in lines[:2]] == ["ok", "ok"], lines
    tries = tmp_path / "in" / "done.npy.tries"
    ends = time.monotonic() + 3  # (without the fix, Dask ran it again on the killer's worker as that ended)
    while time.monotonic() < ends and tries.read_text() == "1":
        time.sleep(0.05)
    assert tries.read_text() == "1"  # done once, not again behind the run
    assert files(tmp_path / "out") == ["done.npy", "killer.npy"]


def test_a_local_cluster_of_ours_never_closes_the_nanny_restarting_a_dead_worker() -> None:
    """distributed's LocalCluster closes the nanny of a worker removed lost-worker-timeout ago (15 s)
    if no worker of its name is registered at that instant: one restarting the worker a file had
    just killed, 15 s after an earlier death of its name, was closed so, and the new worker with
    it, under the good file it had just been given, which failed as "ended ... (twice)"
    (test_a_file_that_kills_its_worker..., 1 run in 20 of a session of such deaths). Here the
    timeout is 50 ms, so that the check comes while the nanny restarts the worker."""
    import dask

    with dask.config.set({"distributed.deploy.lost-worker-timeout": "50ms"}), \
            scheduler_module.connect("local:2") as (client, local):
        assert local is not None
        nannies = dict(local.workers)
        address, pid = next(iter(client.run(os.getpid).items()))
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while local.workers == nannies and (len(up := client.nthreads()) < 2 or address in up):
            assert time.monotonic() < deadline, "the worker killed was not restarted"
            time.sleep(0.05)
        time.sleep(0.2)  # (a nanny closed as its worker registered closes it a moment later)
        assert local.workers == nannies  # the same nannies, none closed
        assert len(client.nthreads()) == 2


# A preload for the workers of a LocalCluster: its 3rd to (2 + BAD)th worker start fails as the
# worker is made, so that a nanny's restart of the worker a file killed raises (distributed logs
# "Failed to restart worker after its process exited") and the nanny stays, with no worker.
_RESTARTS_FAIL = """
import os
number = int(os.environ.get("STARTS_NUMBER", "0"))  # (distributed imports a preload, then reloads it)
while not number:
    try:
        os.close(os.open(os.path.join(STARTS, str(len(os.listdir(STARTS)) + 1)), os.O_CREAT | os.O_EXCL))
        number = len(os.listdir(STARTS))
    except FileExistsError:
        pass
os.environ["STARTS_NUMBER"] = str(number)
if 2 < number <= 2 + BAD:
    raise RuntimeError(f"worker start {number} refused")
"""


@pytest.fixture
def restarts_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``fail(bad)``: the workers of a LocalCluster started after it (--scheduler local:2) fail the
    ``bad`` starts after the first two; the folder whose files count them. A nanny is replaced
    after 2 s without its worker, the run given up after 6 s without any; and a run that hangs
    fails after 60 s (SIGALRM)."""
    starts = tmp_path / "starts"
    starts.mkdir()
    monkeypatch.setattr(cluster, "WORKER_MISSING_SECONDS", 2.0)
    monkeypatch.setattr(cluster, "NO_WORKER_SECONDS", 6.0)

    def fail(bad: int) -> Path:
        preload = tmp_path / "restarts_fail.py"
        preload.write_text(f"STARTS = {str(starts)!r}\nBAD = {bad}\n{_RESTARTS_FAIL}")
        monkeypatch.setitem(scheduler_module.LOCAL_CONFIG, "distributed.worker.preload",
                            [*scheduler_module.LOCAL_CONFIG["distributed.worker.preload"], str(preload)])
        return starts

    def hung(signum: int, frame: Any) -> None:
        raise TimeoutError("the run hung")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        yield fail
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_nanny_whose_worker_does_not_come_back_is_replaced(tmp_path: Path, restarts_fail: Any, by_value: None,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Both workers of a local:2 run killed by a file, neither restarted by its nanny: the files
    left waited for ever (and a run that lost one went on with one worker fewer). Each nanny is
    replaced, and the run ends as with workers that came back."""
    starts = restarts_fail(2)
    inputs = npy_inputs(tmp_path / "in", ["deadly", "a", "b", "c", "d", "e", "f", "g"])  # a task: deadly, a
    code = workers.run(_Deadly((2, 2)), Common(json=True), inputs, BatchOptions(str(tmp_path / "out"),
                                                                                 scheduler="local:2"))
    assert code == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["status"] for line in lines[:8]] == ["error"] + ["ok"] * 7, lines
    assert lines[0]["error"] == f"{inputs[0]}: the worker process ended while doing it (twice)"
    assert files(tmp_path / "out") == [f"{name}.npy" for name in "abcdefg"]
    assert len(os.listdir(starts)) >= 5  # the two restarts that failed, and a new nanny's worker


def test_a_local_cluster_whose_workers_cannot_be_started_again_ends_the_run(
        tmp_path: Path, restarts_fail: Any, by_value: None, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No worker starts again after a file killed both: the files not done fail, each with a line
    that says so, where they waited for ever."""
    restarts_fail(1000)
    monkeypatch.setattr(cluster, "NO_WORKER_SECONDS", 3.0)  # (a nanny replaced after 2 s: once meanwhile)
    inputs = npy_inputs(tmp_path / "in", ["deadly", "a", "b", "c", "d", "e", "f", "g"])
    started = time.monotonic()
    code = workers.run(_Deadly((2, 2)), Common(json=True), inputs, BatchOptions(str(tmp_path / "out"),
                                                                                 scheduler="local:2"))
    assert code == 1
    assert time.monotonic() - started < 40
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["error"] == f"{inputs[0]}: the worker process ended while doing it (twice)"
    lost = {line["input"] for line in lines[1:8] if line["status"] == "error"}
    assert inputs[1] in lost  # (in the deadly file's task, retried after it)
    assert [line["error"] for line in lines[1:8] if line["status"] == "error"] == [
        f"{name}: not done: the cluster's workers could not be started again (none for 3 s)" for name in sorted(lost)]
    assert files(tmp_path / "out") == sorted(f"{Path(line['input']).name}" for line in lines[1:8]
                                             if line["status"] == "ok")


class _Greedy(operations.CropPad):
    """A crop-pad that, on a file named greedy, takes 600 MiB and holds it (until its nanny stops it)."""

    command: ClassVar[str] = "crop-pad"

    def apply(self, loaded: Any, common: Common, allocate: Any = None) -> np.ndarray:
        if "greedy" in loaded.source:
            held = np.ones(600 * 2**20, dtype=np.uint8)
            time.sleep(30)
            raise AssertionError(f"not stopped, holding {held.nbytes} bytes")
        return super().apply(loaded, common, allocate)


@pytest.fixture
def tight_cluster() -> Iterator[str]:
    """The address of a LocalCluster of 2 workers of its own, whose nannies stop a worker over 400
    MiB: not the session's, whose workers every test before has grown (one at 380 MiB was stopped
    on a small file too, and did not come back within a minute, 1 run in 4)."""
    import logging

    import dask

    with dask.config.set({**scheduler_module.LOCAL_CONFIG, "distributed.worker.multiprocessing-method": "spawn"}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                     memory_limit=400 * 2**20, dashboard_address=None,
                                     silence_logs=logging.CRITICAL,
                                     scheduler_kwargs={"dashboard": False, "dashboard_address": ":0"}) as local:
        yield str(local.scheduler_address)


def test_a_file_whose_worker_went_over_its_memory_limit_says_so(tmp_path: Path, tight_cluster: str, by_value: None,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A worker its nanny restarts over its memory limit (a file too big for ``dask worker
    --memory-limit``): the file failed as "the worker process ended while doing it (twice)", with
    nothing to say why; the nanny's word to the scheduler now names it."""
    inputs = npy_inputs(tmp_path / "in", ["a", "greedy", "b"])
    code = workers.run(_Greedy((2, 2)), Common(json=True), inputs, BatchOptions(str(tmp_path / "out"),
                                                                                scheduler=tight_cluster))
    assert code == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["status"] for line in lines[:3]] == ["ok", "error", "ok"], lines
    assert re.fullmatch(rf"{re.escape(inputs[1])}: the worker process ended while doing it \(twice; its nanny "
                        r"stopped it at \d+ MiB, over its memory limit\)", lines[1]["error"]), lines[1]["error"]


class _GreedyChunks(operations.CropPad):
    """A crop-pad whose chunks' task takes 600 MiB and holds it (until its nanny stops it)."""

    command: ClassVar[str] = "crop-pad"

    def apply_chunked(self, data: Any, layout: str | None, common: Common) -> Any:
        def greedy(block: np.ndarray) -> np.ndarray:
            held = np.ones(600 * 2**20, dtype=np.uint8)
            time.sleep(30)
            raise AssertionError(f"not stopped, holding {held.nbytes} bytes")

        # meta given: dask would call greedy here to find it (30 s asleep in this process)
        return data.map_blocks(greedy, meta=np.empty((0,) * data.ndim, data.dtype))


@pytest.mark.parametrize("output", ["out.zarr", "out.npy"])
def test_a_zarr_job_whose_worker_went_over_its_memory_limit_is_one_error_line(
        tmp_path: Path, tight_cluster: str, by_value: None, output: str) -> None:
    """A zarr job on a cluster whose chunk's task a nanny stopped over its memory limit (each time
    the cluster ran it): distributed's KilledWorker ended it in a traceback; now the file's one
    error line, which says why, and no output."""
    from geomcli.engine import zarr_file

    zarr = pytest.importorskip("zarr")
    zarr.create_array(str(tmp_path / "in.zarr"), shape=(4, 6), dtype="int16", chunks=(4, 6))[...] = 1
    report = zarr_file.transform(_GreedyChunks((2, 2)), str(tmp_path / "in.zarr"), str(tmp_path / output),
                                 output.split(".")[1], Common(), tight_cluster)
    assert report.status == "error"
    assert re.fullmatch(rf"{re.escape(str(tmp_path / 'in.zarr'))}: the worker process ended while doing a chunk of it, "
                        r"each time the cluster tried; its nanny stopped it at \d+ MiB, over its memory limit; the "
                        r"output was not written", str(report.error)), report.error
    assert sorted(os.listdir(tmp_path)) == ["in.zarr"]


def test_passing_io_errors_are_retried_and_bad_files_are_not(tmp_path: Path, scheduler: str, by_value: None,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    inputs = npy_inputs(tmp_path / "in", ["a", "bad", "b"])
    options = BatchOptions(str(tmp_path / "out"), scheduler=scheduler)
    assert workers.run(_Flaky((2, 2), failures=2), Common(json=True), inputs, options) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["status"] for line in lines[:3]] == ["ok", "error", "ok"]
    assert lines[1]["error"] == f"{inputs[1]}: not a crop-pad it likes"
    assert [Path(name + ".tries").read_text() for name in inputs] == ["3", "1", "3"]
    # past IO_RETRIES tries, the I/O error is the file's failure
    for name in inputs:
        Path(name + ".tries").unlink()
    assert workers.run(_Flaky((2, 2), failures=5), Common(json=True), inputs[:1],
                       BatchOptions(str(tmp_path / "out2"), scheduler=scheduler)) == 1
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert line["error"] == f"{inputs[0]}: cannot read (Input/output error)" or "Input/output error" in line["error"]
    assert Path(inputs[0] + ".tries").read_text() == str(1 + cluster.IO_RETRIES)


@dataclass(frozen=True)
class _HeldUntilCancelled(operations.CropPad):
    """A crop-pad that says it has begun a file (``.begun`` beside it), then finishes the file only
    once its task has been cancelled: the file in progress when the client cancels."""

    command: ClassVar[str] = "crop-pad"

    def apply(self, loaded: Any, common: Common, allocate: Any = None) -> np.ndarray:
        Path(loaded.source + ".begun").touch()
        cancelled, deadline = cluster._cancellation(), time.monotonic() + 30
        while not cancelled() and time.monotonic() < deadline:
            time.sleep(0.01)
        return super().apply(loaded, common, allocate)


def _holds(key: str, dask_worker: Any) -> bool:
    return key in dask_worker.state.tasks


def test_a_task_cancelled_mid_file_places_nothing(tmp_path: Path, scheduler: str, by_value: None) -> None:
    """A joined cluster's workers get no signal when the client stops: the file a task is doing
    when it is cancelled is made, but never placed; no temp file is left either."""
    (source,) = npy_inputs(tmp_path / "in", ["a"])
    out = tmp_path / "out"
    task = Task(_HeldUntilCancelled((2, 2)), Common())
    with distributed.Client(scheduler, set_as_default=False) as client:
        future = client.submit(cluster.do_files, task, [Job(0, source, str(out / "a.npy"), "npy")], None,
                               pure=False)
        deadline = time.monotonic() + 30
        while not Path(source + ".begun").exists():
            assert time.monotonic() < deadline and future.status == "pending", future
            time.sleep(0.01)
        key = future.key
        future.cancel()
        while any(client.run(_holds, key).values()):  # until the task has ended on its worker
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert not out.exists() or os.listdir(out) == []


def test_a_task_that_returns_no_reports_leaves_none_kept_on_its_worker(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A joined cluster's worker outlives its runs: a task cancelled after placing an output, its
    client gone (killed, or its connection lost) so that no one took the reports kept for its run,
    left them in cluster._placed for the worker's life, one run after another."""
    (source,) = npy_inputs(tmp_path / "in", ["a"])
    output = tmp_path / "out" / "a.npy"
    monkeypatch.setattr(cluster, "_cancellation", lambda: output.exists)  # cancelled once it is placed
    task = Task(operations.CropPad((2, 2)), Common())
    assert cluster._do_files(task, [Job(0, source, str(output), "npy")], None, False, "client-gone") == []
    assert output.exists()
    assert "client-gone" not in cluster._placed


def test_tasks_hold_about_a_second_of_work_and_shrink_at_the_end() -> None:
    class Client:
        def nthreads(self) -> dict[str, int]:
            return {"a": 1, "b": 1}

    jobs = [Job(index, f"/nowhere/{index}.png", f"/out/{index}.png", "png", size=1_000_000) for index in range(10_000)]
    dispatch = cluster._Dispatch(Client(), None, jobs, None, False)  # type: ignore[arg-type]
    assert dispatch.left == 10_000 * 1_000_000
    dispatch.threads = 2
    first = dispatch._next_batch()
    assert len(first) == cluster.FIRST_RATE * cluster.TASK_SECONDS // 1_000_000 + 1
    dispatch.rate = 50e6  # as the first tasks showed
    assert len(dispatch._next_batch()) == 50
    dispatch.left = 20e6  # near the end: a quarter of what is left for each of 2 threads x 2 in flight
    assert len(dispatch._next_batch()) == 5
    dispatch.rate = 1e12
    dispatch.left = 1e15
    assert len(dispatch._next_batch()) == cluster.MAX_FILES


def test_a_task_carries_no_more_than_carried_bytes_of_its_objects() -> None:
    """Small objects read whole for their headers go with their jobs: 1000 of 64 KiB in one task
    made Dask warn of a big graph (past 10 MB). A task stops at CARRIED_BYTES, but takes one job
    at least; jobs that carry nothing are sized as before."""
    class Client:
        def nthreads(self) -> dict[str, int]:
            return {"a": 1, "b": 1}

    piece = b"x" * (64 << 10)
    count = 20 * cluster.CARRIED_BYTES // len(piece)
    jobs = [Job(index, f"s3://b/{index}.png", f"/out/{index}.png", "png", size=len(piece), data=piece)
            for index in range(count)]
    jobs += [Job(count + index, f"s3://b/big{index}.png", f"/out/big{index}.png", "png", size=10 << 20)
             for index in range(4)]
    dispatch = cluster._Dispatch(Client(), None, jobs, None, False)  # type: ignore[arg-type]
    dispatch.threads, dispatch.rate, dispatch.left = 2, 1e12, 1e15  # (the rate alone would take 1000)
    batches = [dispatch._next_batch() for _ in range(20)]
    each = cluster.CARRIED_BYTES // len(piece)
    assert [len(batch) for batch in batches] == [each] * 19 + [each + 4]  # (the last 4 carry nothing)
    assert [job.index for batch in batches for job in batch] == list(range(count + 4))
    dispatch.todo.extend([Job(9, "s3://b/9.png", "/out/9.png", "png", data=b"x" * (cluster.CARRIED_BYTES + 1))])
    assert len(dispatch._next_batch()) == 1


def test_a_file_retried_after_a_death_runs_alone_on_the_cluster() -> None:
    """Dask sends each submitted task to a worker at once, two at a worker (measured: 4 tasks on 2
    one-thread workers), and one waiting there dies with the one running: a good file queued behind
    a deadly one twice failed as "ended ... (twice)" (once in a loaded run). So a retry after a death
    waits until nothing is in flight, and nothing is sent beside it."""
    class Client:
        def __init__(self) -> None:
            self.sent: list[list[str]] = []

        def nthreads(self) -> dict[str, int]:
            return {"a": 1, "b": 1}

        def submit(self, function: Any, task: Any, jobs: list[Job], *args: Any, **kwargs: Any) -> object:
            self.sent.append([Path(job.input).stem for job in jobs])
            return object()

    class Completed:
        def add(self, future: object) -> None:
            pass

    jobs = [Job(index, f"/nowhere/{index}.png", f"/out/{index}.png", "png", size=1_000_000) for index in range(9)]
    client = Client()
    dispatch = cluster._Dispatch(client, Task(operations.CropPad((2, 2)), Common()), jobs[3:], None, False)  # type: ignore[arg-type]
    dispatch.completed = Completed()  # type: ignore[assignment]
    dispatch.in_flight = {object(): cluster._Sent(jobs[:1])}  # type: ignore[dict-item]
    dispatch.again.extend(([job], True) for job in jobs[1:3])
    dispatch._top_up()
    assert client.sent == []  # a task is in flight: the retry waits for it
    dispatch.in_flight.clear()
    dispatch._top_up()
    assert client.sent == [["1"]]  # alone
    dispatch._top_up()
    assert client.sent == [["1"]]  # nothing beside it
    dispatch.in_flight.clear()
    dispatch._top_up()
    while dispatch.todo:
        dispatch.in_flight.clear()
        dispatch._top_up()
    assert client.sent[1] == ["2"]
    assert [name for batch in client.sent[2:] for name in batch] == ["3", "4", "5", "6", "7", "8"]  # then as before


def test_passing_errors_are_told_from_bad_files() -> None:
    from geomcli.engine import report as reports
    from geomcli.engine.summary import Report
    from geomcli.errors import GeomError

    def failed(error: BaseException) -> Report:
        made = Report("crop-pad", "a.png", "b.png")
        with reports.reporting(made, Common()):
            raise error
        return made

    def read_error(error: OSError) -> GeomError:
        try:
            raise error
        except OSError as e:
            try:
                raise GeomError("a.png: cannot read") from e
            except GeomError as wrapped:
                return wrapped

    assert cluster.passing(failed(OSError(errno.EIO, "Input/output error")))
    assert cluster.passing(failed(read_error(ConnectionResetError(errno.ECONNRESET, "reset"))))
    assert cluster.passing(failed(read_error(TimeoutError("timed out"))))
    assert not cluster.passing(failed(read_error(FileNotFoundError(errno.ENOENT, "missing"))))
    assert not cluster.passing(failed(GeomError("a.png: not a readable PNG (truncated)")))
    assert not cluster.passing(failed(OSError("image file is truncated")))  # Pillow's: a bad file
    assert not cluster.passing(Report("crop-pad", "a.png", "b.png"))


def _object_store_failures() -> dict[str, tuple[BaseException, bool]]:
    """What reading or writing S3 raises once s3fs's own retries are spent, as s3fs raises it, and
    whether it may pass."""
    pytest.importorskip("s3fs")
    from botocore import exceptions as boto
    from s3fs.errors import translate_boto_error

    def refused(code: str, message: str) -> BaseException:
        return translate_boto_error(boto.ClientError({"Error": {"Code": code, "Message": message}}, "GetObject"))

    endpoint = "http://127.0.0.1:9/bucket/a.png"
    return {
        "reset": (boto.ConnectionClosedError(endpoint_url=endpoint), True),
        "read timeout": (boto.ReadTimeoutError(endpoint_url=endpoint), True),
        "no answer": (boto.EndpointConnectionError(endpoint_url=endpoint), True),
        "body cut short": (boto.ResponseStreamingError(error="Response payload is not completed"), True),
        "checksum": (boto.FlexibleChecksumError(error_msg="Expected checksum a did not match calculated b"), True),
        "500": (refused("InternalError", "We encountered an internal error. Please try again."), True),
        "503": (refused("SlowDown", "Please reduce your request rate."), True),
        "403": (refused("AccessDenied", "Access Denied"), False),
        "no credentials": (boto.NoCredentialsError(), False),
        "certificate": (boto.SSLError(endpoint_url=endpoint, error="certificate verify failed"), False),
    }


@pytest.mark.parametrize("kind", ["reset", "read timeout", "no answer", "body cut short", "checksum", "500", "503",
                                  "403", "no credentials", "certificate"])
def test_an_object_stores_passing_failures_are_told_from_refusals(kind: str) -> None:
    """botocore's connection errors are no ConnectionError (nor its timeouts an OSError with an
    errno), and s3fs gives S3's 500 EREMOTEIO: a file whose read met a reset connection, a
    timeout, a body cut short or S3's 'try again' failed at once on a cluster, not retried."""
    from geomcli.engine import report as reports
    from geomcli.engine.summary import Report
    from geomcli.errors import GeomError

    error, expected = _object_store_failures()[kind]
    made = Report("crop-pad", "s3://bucket/a.png", "b.png")
    with reports.reporting(made, Common()):
        try:
            raise error
        except Exception as failure:
            raise GeomError("s3://bucket/a.png: cannot read") from failure
    assert made.status == "error" and cluster.passing(made) is expected


def wait_for_output_then(process: subprocess.Popen[str], out: Path, sent: int, group: bool) -> str:
    first_output(out)
    if group:  # as a terminal's Ctrl-C: to every process of the group, the cluster's workers too
        os.killpg(process.pid, sent)
    else:
        process.send_signal(sent)
    return process.communicate(timeout=60)[1]


def only_complete_pngs(out: Path, shape: tuple[int, ...]) -> list[str]:
    written = files(out)
    assert all(not name.startswith(".") for name in written), written  # no temp file
    for name in written:
        with Image.open(out / name) as image:
            assert np.asarray(image).shape == shape
    return written


@pytest.mark.parametrize(("sent", "code", "own"), [(signal.SIGINT, -signal.SIGINT, True), (signal.SIGTERM, 143, False),
                                                   (signal.SIGHUP, 129, True)],
                         ids=["ctrl-c-to-the-group-own-cluster", "sigterm-joined-cluster",
                              "sighup-to-the-group-own-cluster"])
def test_a_signal_cancels_what_is_in_flight_and_leaves_only_complete_outputs(
        sent: int, code: int, own: bool, tmp_path: Path, scheduler: str) -> None:
    slow_inputs(tmp_path / "in", 60, (300, 400))
    out = tmp_path / "out"
    process = subprocess.Popen([*GEOMCLI, "crop-pad", str(tmp_path / "in"), "--out-dir", str(out), "--shape",
                                "290,390", "--scheduler", "local:2" if own else scheduler],
                               stderr=subprocess.PIPE, text=True, start_new_session=own)
    stderr = wait_for_output_then(process, out, sent, group=own)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr and "distributed" not in stderr, stderr
    written = only_complete_pngs(out, (290, 390, 3))
    assert 0 < len(written) < 60
    time.sleep(1.5)  # the cancelled tasks place nothing later either
    assert files(out) == written


def test_an_unreachable_scheduler_is_one_error_line(tmp_path: Path, mixed: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    monkeypatch.setattr(scheduler_module, "CONNECT_SECONDS", 2)
    started = time.monotonic()
    # the PNGs only: the plan refuses --shape 8,8 for t.npy (rank 4) before any scheduler is asked
    result = run("crop-pad", f"{mixed}/*.png", "--out-dir", tmp_path / "out", "--shape", "8,8",
                 "--scheduler", f"tcp://127.0.0.1:{port}")
    assert time.monotonic() - started < 15
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: tcp://127.0.0.1:{port}: cannot reach the Dask scheduler (")
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_a_server_that_takes_the_connection_and_says_nothing_is_one_error_line(
        tmp_path: Path, mixed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An HTTP server or a database waits for the client to speak: distributed waited for its
    handshake for ever (over 100 s with moto's server, the run still held)."""
    import socket

    monkeypatch.setattr(scheduler_module, "CONNECT_SECONDS", 1)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()  # never accepted: the kernel takes the connection, nothing is ever sent
        port = server.getsockname()[1]
        started = time.monotonic()
        result = run("crop-pad", f"{mixed}/*.png", "--out-dir", tmp_path / "out", "--shape", "8,8",
                     "--scheduler", f"tcp://127.0.0.1:{port}")
        assert time.monotonic() - started < 10
    assert result.exit_code == 1
    assert result.stderr == (f"Error: tcp://127.0.0.1:{port}: what answers there is not a Dask scheduler (it took "
                             "the connection and sent nothing in 3 s)\n")
    assert not (tmp_path / "out").exists()


def test_tls_without_tls_settings_is_one_error_line(tmp_path: Path, mixed: Path) -> None:
    """distributed raised a TypeError (a traceback), then its half-made client took 20 s to close."""
    started = time.monotonic()
    done = subprocess.run([*GEOMCLI, "crop-pad", str(mixed / "rgb00.png"), str(mixed / "rgb01.png"), "--out-dir",
                           str(tmp_path / "out"), "--shape", "8,8", "--scheduler", "tls://127.0.0.1:8786"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert time.monotonic() - started < 10
    assert done.returncode == 1
    assert done.stderr.startswith("Error: tls://127.0.0.1:8786: tls:// needs TLS settings"), done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_what_answers_but_is_no_scheduler_is_one_error_line(tmp_path: Path, mixed: Path) -> None:
    """A port where another server answers (a proxy, here bytes read as a frame of 3 EiB): a
    MemoryError's traceback, then 20 s for the half-made client to close."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    taken: list[socket.socket] = []

    def answer() -> None:
        with contextlib.suppress(OSError):
            connection, _ = server.accept()
            taken.append(connection)
            connection.sendall(b"HTTP/1.1 400 Bad Request\r\n" * 8)

    threading.Thread(target=answer, daemon=True).start()
    started = time.monotonic()
    try:
        done = subprocess.run([*GEOMCLI, "crop-pad", str(mixed / "rgb00.png"), "--out-dir", str(tmp_path / "out"),
                               "--shape", "8,8", "--scheduler", f"tcp://127.0.0.1:{port}"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    finally:
        server.close()
        for connection in taken:
            connection.close()
    assert time.monotonic() - started < 15
    assert done.returncode == 1
    assert done.stderr.startswith(f"Error: tcp://127.0.0.1:{port}: "), done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--scheduler", "somewhere"], "'somewhere' is not local, local:N or a scheduler's address such as"),
    (["--scheduler", "local:0"], "'local:0': local:N needs a number of workers N from 1 to 1024"),
    # LocalCluster's MemoryError, with a traceback
    (["--scheduler", "local:99999999999"], "'local:99999999999': local:N needs a number of workers N from 1 to 1024"),
    (["--scheduler", "local:2", "-j", "2"], "give -j N or --scheduler, not both"),
    # what distributed would take 20 s to refuse, with a traceback
    (["--scheduler", "tcp://127.0.0.1:8786/"], "'tcp://127.0.0.1:8786/' is not local, local:N or a scheduler's"),
    (["--scheduler", "tcp://127.0.0.1"], "'tcp://127.0.0.1' is not local, local:N or a scheduler's"),
    (["--scheduler", "inproc://x"], "'inproc://x' is not local, local:N or a scheduler's"),
    (["--scheduler", "tcp://127.0.0.1:99999"], "'tcp://127.0.0.1:99999' is not local, local:N or a scheduler's"),
])
def test_scheduler_mistakes_are_usage_errors(args: list[str], message: str, mixed: Path, tmp_path: Path) -> None:
    result = run("crop-pad", mixed, "--out-dir", tmp_path / "out", "--shape", "8,8", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_cluster_whose_workers_run_another_geomcli_is_refused(mixed: Path, tmp_path: Path, scheduler: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Their tasks would fail there, or do what another version does: one line, nothing written."""
    def workers_answer(client: Any, function: Any) -> dict[str, str]:
        return {"tcp://a:1": "0.0.9+edited", "tcp://b:1": "0.0.9+edited"}

    monkeypatch.setattr(distributed.Client, "run", workers_answer)
    result = run("crop-pad", f"{mixed}/*.png", "--out-dir", tmp_path / "out", "--shape", "8,8",
                 "--scheduler", scheduler)
    assert result.exit_code == 1
    assert result.stderr == (f"Error: {scheduler}: 2 of 2 of the cluster's workers run another geomcli (0.0.9+edited, "
                             f"not {scheduler_module.code_fingerprint()}): install this one there\n")
    assert not (tmp_path / "out").exists()


def test_a_worker_that_joined_after_the_check_refuses_another_geomcli_s_tasks(mixed: Path, tmp_path: Path,
                                                                             scheduler: str,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Each task carries the client's geomcli (Task.code): a worker of another, one that joined the
    cluster after it was checked, fails each file of its tasks in one line."""
    monkeypatch.setattr(scheduler_module, "_check_workers_code", lambda client, address: None)  # joined later
    monkeypatch.setattr(cluster, "code_fingerprint", lambda: "0.0.9+edited")
    result = run("crop-pad", f"{mixed}/*.png", "--out-dir", tmp_path / "out", "--shape", "8,8",
                 "--scheduler", scheduler)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 13 and lines[-1].startswith("crop-pad: 0 ok, 12 failed, 0 skipped in ")
    assert lines[0] == (f"Error: {mixed / 'rgb00.png'}: the task failed on the cluster (GeomError: this worker runs "
                        f"another geomcli ({scheduler_module.code_fingerprint()}, not 0.0.9+edited): install the "
                        "client's there)")
    assert not (tmp_path / "out").exists()  # made for nothing: taken away


def test_a_local_cluster_of_ours_runs_our_geomcli_unchecked(mixed: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Its workers fork from this run's forkserver: no hash of geomcli's sources (20 ms here and
    in each worker) for a check that cannot fail."""
    def hashed() -> str:
        raise AssertionError("geomcli's sources hashed")

    monkeypatch.setattr(cluster, "code_fingerprint", hashed)
    result = run("crop-pad", f"{mixed}/*.png", "--out-dir", tmp_path / "out", "--shape", "8,8",
                 "--scheduler", "local:1")
    assert result.exit_code == 0, result.stderr
    assert len(files(tmp_path / "out")) == 12


def test_j_on_the_command_line_wins_over_the_environment_s_scheduler(mixed: Path, tmp_path: Path) -> None:
    """GEOMCLI_SCHEDULER is a default: a script's own -j 2 runs as ever, on no cluster."""
    code = ("import sys; from geomcli.cli.group import main\n"
            "try: main(sys.argv[1:])\n"
            "except SystemExit as exit: assert not exit.code, exit.code\n"
            "assert 'distributed' not in sys.modules, 'dask imported'\n")
    done = subprocess.run([sys.executable, "-c", code, "crop-pad", f"{mixed}/*.png", "--out-dir", str(tmp_path / "out"),
                           "--shape", "8,8", "-j", "2"], capture_output=True, text=True,
                          env={**os.environ, "GEOMCLI_SCHEDULER": "local:2"})
    assert done.returncode == 0, done.stderr
    assert len(files(tmp_path / "out")) == 12


def test_without_dask_the_flag_says_what_to_install(mixed: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed raises ImportError
    result = run("crop-pad", mixed, "--out-dir", tmp_path / "out", "--shape", "8,8", "--scheduler", "local:2")
    assert result.exit_code == 2
    assert "--scheduler runs on Dask, which is not installed: pip install 'geomcli[dask]'" in result.stderr
    assert not (tmp_path / "out").exists()
    # without the flag, the run is the run of before
    result = run("crop-pad", f"{mixed}/*.png", "--out-dir", tmp_path / "out", "--shape", "8,8", "-j", "1")
    assert result.exit_code == 0, result.stderr


def test_one_file_runs_and_batches_without_the_flag_never_import_dask(mixed: Path, tmp_path: Path) -> None:
    code = ("import sys; from geomcli.cli.group import main\n"
            "try: main(sys.argv[1:])\n"
            "except SystemExit: pass\n"
            "assert 'distributed' not in sys.modules and 'dask' not in sys.modules, 'dask imported'\n")
    for args in (["-o", str(tmp_path / "one.png")], ["--out-dir", str(tmp_path / "out")]):
        done = subprocess.run([sys.executable, "-c", code, "crop-pad", str(mixed / "rgb00.png"), "--shape", "8,8",
                               *args], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr



def test_a_local_cluster_s_forkserver_starts_before_the_plan_with_dask_imported_in_it() -> None:
    """What --scheduler local:N does first (before this process imports Dask and plans): the
    server its workers fork from, importing Dask on the other core meanwhile. A child forked
    from it has Dask's modules already."""
    import multiprocessing
    from multiprocessing import forkserver

    scheduler_module.start_local_workers_early(scheduler_module.parse_scheduler("local:2"))
    pid = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    assert pid is not None
    os.kill(pid, 0)  # running
    queue = multiprocessing.get_context("forkserver").SimpleQueue()
    child = multiprocessing.get_context("forkserver").Process(target=_put_whether_distributed_is_loaded,
                                                              args=(queue,))
    child.start()
    child.join(60)
    assert queue.get() is True


def _put_whether_distributed_is_loaded(queue: Any) -> None:
    queue.put("distributed" in sys.modules and "geomcli.engine.cluster" in sys.modules)


def test_a_local_cluster_that_cannot_start_is_one_error_line(mixed: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a low ulimit -u distributed raises RuntimeError ("Nanny failed to start.", "can't
    start new thread"): that was a traceback."""
    def no_processes(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Nanny failed to start.")

    monkeypatch.setattr(distributed, "LocalCluster", no_processes)
    result = run("crop-pad", mixed / "rgb00.png", mixed / "rgb01.png", "--out-dir", tmp_path / "out", "--shape", "4,4",
                 "--scheduler", "local:2")
    assert result.exit_code == 1
    assert result.stderr == "Error: cannot start a local Dask cluster (Nanny failed to start.)\n"
    assert not (tmp_path / "out").exists()


def test_ctrl_c_of_a_zarr_job_on_its_own_cluster_prints_no_traceback(tmp_path: Path) -> None:
    """A chunked job computes through the client's gather: a Ctrl-C ended each of its waits, and
    asyncio printed "Task exception was never retrieved" with a distributed.client.AllExit
    traceback for each (25 in a try-out). The array already there stays as it was."""
    zarr = pytest.importorskip("zarr")
    data = np.random.default_rng(3).random((48, 256, 256), dtype=np.float32)
    zarr.create_array(str(tmp_path / "in.zarr"), shape=data.shape, dtype=data.dtype, chunks=(1, 128, 128),
                      dimension_names=["z", "y", "x"])[...] = data
    zarr.create_array(str(tmp_path / "out.zarr"), shape=(2,), dtype="uint8", chunks=(2,))[...] = 7
    process = subprocess.Popen([*GEOMCLI, "resize", str(tmp_path / "in.zarr"), "-o", str(tmp_path / "out.zarr"),
                                "--scales", "1,2,2", "--mode", "cubic", "--scheduler", "local:2"],
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    ends = time.monotonic() + 60
    while not list(tmp_path.glob(".out.zarr.geomcli-*/c/*")):  # a chunk written: the cluster computes
        assert time.monotonic() < ends and process.poll() is None
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGINT)  # a terminal's Ctrl-C: to the group, the workers too
    stderr = process.communicate(timeout=60)[1]
    assert process.returncode == -signal.SIGINT, stderr  # ended by SIGINT, as a shell expects
    assert "Traceback" not in stderr and "never retrieved" not in stderr, stderr
    assert zarr.open(str(tmp_path / "out.zarr"), mode="r")[...].tolist() == [7, 7]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.zarr", "out.zarr"]


def test_ctrl_c_of_a_zarr_job_on_a_joined_cluster_leaves_no_chunk_on_s3(tmp_path: Path, scheduler: str,
                                                                      s3: Any) -> None:
    """A joined cluster's workers get no signal: the chunks they were making when the client,
    stopped, removed the output were written after it, and stayed (zj-2.zarr/c/1/0/0 and c/2/0/0
    in a try-out, on a cluster started with `dask scheduler`)."""
    zarr = pytest.importorskip("zarr")
    source = zarr.create_array(str(tmp_path / "in.zarr"), shape=(3, 1000, 1200), chunks=(1, 256, 256),
                               dtype="float32")
    source[:] = np.random.default_rng(0).random((3, 1000, 1200), dtype=np.float32)
    process = subprocess.Popen([*GEOMCLI, "resize", str(tmp_path / "in.zarr"), "-o", f"{s3.url}/out.zarr",
                                "--scales", "1,4,4", "--mode", "linear", "--scheduler", scheduler, *s3.options],
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    with distributed.Client(scheduler, set_as_default=False) as client:
        while not any(str(key).startswith("_put") for keys in client.run(_executing).values() for key in keys):
            assert time.monotonic() < deadline and process.poll() is None  # a worker making a chunk
            time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    stderr = process.communicate(timeout=60)[1]
    assert process.returncode == -signal.SIGINT, stderr  # ended by SIGINT, as a shell expects
    with distributed.Client(scheduler, set_as_default=False) as client:
        while any(client.run(_executing).values()):  # a chunk still being made is written once its task ends
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert s3.keys() == []


def _executing(dask_worker: Any) -> list[Any]:
    """On a worker: the keys of the tasks it runs."""
    return [task.key for task in dask_worker.state.tasks.values() if task.state == "executing"]


def test_a_stopped_run_on_a_joined_cluster_waits_for_the_tasks_it_cancels(scheduler: str) -> None:
    """A joined cluster's workers get no signal: a task cancelled mid-file runs on to the end of
    that file, then removes its temp file. The run swept and ended at once, so the temp file was
    made after its sweep (test_a_signal_cancels_...[sigterm-joined-cluster]: '.015.png.*.tmp' left,
    2 loaded runs in 3). It now waits until no worker runs one of its tasks."""
    with distributed.Client(scheduler, set_as_default=False) as client:
        future = client.submit(time.sleep, 2, pure=False)
        deadline = time.monotonic() + 30
        while future.key not in [key for keys in client.run(_executing).values() for key in keys]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        dispatch = cluster._Dispatch(client, Task(operations.CropPad((1, 1)), Common()), [], None, False)  # type: ignore[arg-type]
        dispatch.in_flight[future] = cluster._Sent([])
        dispatch.cancel_all()
        assert not [key for keys in client.run(_executing).values() for key in keys]


def _with_this_geomcli() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}


@contextlib.contextmanager
def own_cluster(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A scheduler and a worker of one thread started with Dask's own CLI, as a user's cluster is:
    its address, and the scheduler's process (for a test to kill); both killed at the end."""
    env = _with_this_geomcli()
    address_file = tmp_path / "scheduler.json"
    scheduler_process = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                          "--port", "0", "--no-dashboard", "--scheduler-file", str(address_file)],
                                         env=env, stderr=subprocess.DEVNULL, start_new_session=True)
    worker_process = None
    try:
        deadline = time.monotonic() + 60
        while not address_file.exists():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(0.2)
        address = json.loads(address_file.read_text())["address"]
        worker_process = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                                           "--nthreads", "1", "--no-dashboard"], env=env,
                                          stderr=subprocess.DEVNULL, start_new_session=True)
        with distributed.Client(address, set_as_default=False) as client:
            client.wait_for_workers(1, timeout=60)
        yield address, scheduler_process
    finally:
        for started in (scheduler_process, worker_process):
            if started is not None:
                started.kill()
                started.wait()


def test_a_scheduler_killed_mid_run_is_one_error_line(tmp_path: Path) -> None:
    """A joined cluster's scheduler killed (kill -9 of `dask scheduler`): each file in flight was
    an error "cancelled by the cluster" (placed or not), then a traceback (the client's
    nthreads, refused); now one line, exit 1."""
    slow_inputs(tmp_path / "in", 60, (300, 400))
    with own_cluster(tmp_path) as (address, scheduler_process):
        out = tmp_path / "out"
        process = subprocess.Popen([*GEOMCLI, "crop-pad", str(tmp_path / "in"), "--out-dir", str(out), "--shape",
                                    "290,390", "--scheduler", address, "--json"], env=_with_this_geomcli(),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first_output(out)
        scheduler_process.kill()
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 1
    assert stderr == (f"Error: {address}: the Dask scheduler went away mid-run; the files in flight and those not "
                      "sent yet were not done or not reported (outputs placed are whole)\n")
    for record in map(json.loads, stdout.splitlines()):  # those that came, each placed and whole
        assert record["status"] == "ok" and Image.open(record["output"]).size == (390, 290)


@pytest.mark.parametrize("output", ["out.zarr", "out.npy"])
def test_a_scheduler_killed_mid_zarr_job_is_one_error_line(tmp_path: Path, output: str) -> None:
    """A zarr job on a joined cluster whose scheduler is killed: distributed's
    FutureCancelledError ('... cancelled for reason: scheduler-connection-lost.') ended it in a
    traceback; now one line, exit 1, and no output (a zarr's chunks are written by the workers,
    a .npy's here)."""
    zarr = pytest.importorskip("zarr")
    data = np.random.default_rng(42).standard_normal((24, 3, 256, 256)).astype(np.float32)
    zarr.create_array(str(tmp_path / "in.zarr"), shape=data.shape, dtype=data.dtype,
                      chunks=(1, 3, 128, 128))[...] = data
    with own_cluster(tmp_path) as (address, scheduler_process):
        client = distributed.Client(address, set_as_default=False)
        process = subprocess.Popen([*GEOMCLI, "warp", str(tmp_path / "in.zarr"), "-o", str(tmp_path / output),
                                    "--rotate", "7", "--mode", "cubic", "--scheduler", address],
                                   env=_with_this_geomcli(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not client.processing() or not any(client.processing().values()):  # its tasks are running
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        time.sleep(0.5)
        scheduler_process.kill()
        stdout, stderr = process.communicate(timeout=60)
        client.close(timeout=1)
    assert (process.returncode, stdout) == (1, "")
    assert stderr == f"Error: {address}: the Dask scheduler went away mid-run; the output was not written\n"
    assert not (tmp_path / output).exists()


@dataclass(frozen=True)
class _Meets(operations.CropPad):
    """A crop-pad whose file named first waits, once read, until the file named second is read
    (another run's task, on another thread of the same worker process)."""

    command: ClassVar[str] = "crop-pad"
    second_read: ClassVar[threading.Event] = threading.Event()

    def apply(self, loaded: Any, common: Common, allocate: Any = None) -> np.ndarray:
        if "second" in loaded.source:
            type(self).second_read.set()
        else:
            assert type(self).second_read.wait(30)
        return super().apply(loaded, common, allocate)


@pytest.fixture
def other_s3(tmp_path: Path) -> Iterator[str]:
    """A second S3 server, of its own store (moto's are shared within a process): its endpoint."""
    script = ("import sys, time\nfrom moto.server import ThreadedMotoServer\n"
              "server = ThreadedMotoServer(ip_address='127.0.0.1', port=0, verbose=False)\nserver.start()\n"
              "print(server._server.server_port, flush=True)\ntime.sleep(600)\n")
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            yield f"http://127.0.0.1:{int(process.stdout.readline())}"
        finally:
            process.kill()


def test_two_runs_on_one_worker_each_keep_their_own_storage_options(tmp_path: Path, s3: Any,
                                                                    other_s3: str) -> None:
    """Two runs at once on a joined cluster whose workers have several threads, each with its own
    --storage-option (another endpoint, other keys): a run's output was placed with the options
    of whichever run's task had begun last on that worker, so it went to the other run's store
    (into a bucket of the same name there, or 'The specified bucket does not exist')."""
    import boto3

    boto3.client("s3", endpoint_url=other_s3, aws_access_key_id="testing", aws_secret_access_key="testing",
                 region_name="us-east-1").create_bucket(Bucket=s3.bucket)
    _Meets.second_read.clear()
    inputs = npy_inputs(tmp_path / "in", ["first", "second"])
    reports: dict[str, Any] = {}

    def run(path: str, endpoint: str) -> None:  # a task of its own run, as a worker thread runs it
        name = Path(path).stem
        common = Common(storage_options=(("endpoint_url", endpoint), ("key", "testing"), ("secret", "testing")))
        job = Job(0, path, f"{s3.url}/out/{name}.npy", "npy")
        [(reports[name], _)], _ = cluster.do_files(Task(_Meets((2, 3)), common), [job], None)

    threads = [threading.Thread(target=run, args=(inputs[0], s3.endpoint)),
               threading.Thread(target=run, args=(inputs[1], other_s3))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert {name: (report.status, report.error) for name, report in reports.items()} == \
        {"first": ("ok", None), "second": ("ok", None)}
    assert s3.keys() == ["out/first.npy"]
    other = boto3.client("s3", endpoint_url=other_s3, aws_access_key_id="testing", aws_secret_access_key="testing",
                         region_name="us-east-1")
    assert [item["Key"] for item in other.list_objects_v2(Bucket=s3.bucket).get("Contents", [])] == ["out/second.npy"]


# Loaded by the run's interpreters, its cluster's workers too (sitecustomize on PYTHONPATH): the
# first read of a chunk object, in whichever process makes it, has its connection reset
_RESET_ONCE = """
import errno, os
import s3fs
real = s3fs.S3FileSystem._call_s3
async def reset(self, method, *args, **kwargs):
    if method == "get_object" and "/c/" in kwargs["Key"]:
        with open(os.environ["GEOMCLI_TEST_READS"], "a") as reads:
            reads.write(kwargs["Key"] + "\\n")
        try:
            os.close(os.open(os.environ["GEOMCLI_TEST_READS"] + ".reset", os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            pass
        else:
            raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
    return await real(self, method, *args, **kwargs)
s3fs.S3FileSystem._call_s3 = reset
"""


def test_a_zarr_chunk_read_whose_connection_was_reset_costs_a_retry_not_the_run(tmp_path: Path, s3: Any) -> None:
    """A zarr job on its own cluster (--scheduler local:2) failed whole when one chunk's read had
    its connection reset, where a batch sends a file that failed so again: 'Error: [Errno 104]
    Connection reset by peer', exit 1. The chunk is read again on the worker."""
    pytest.importorskip("zarr")
    data = np.arange(2 * 16 * 16, dtype=np.float32).reshape(2, 16, 16)
    np.save(tmp_path / "in.npy", data)
    assert run("crop-pad", tmp_path / "in.npy", "-o", f"{s3.url}/in.zarr", "--shape", "2,16,16").exit_code == 0
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_RESET_ONCE)
    reads = tmp_path / "reads.txt"
    done = subprocess.run([*GEOMCLI, "crop-pad", f"{s3.url}/in.zarr", "-o", str(tmp_path / "out.npy"),
                           "--shape", "2,8,8", "--scheduler", "local:2", "-q"], capture_output=True, text=True,
                          timeout=120, env=hooked(hooks, GEOMCLI_TEST_READS=str(reads)))
    assert (done.returncode, done.stderr) == (0, "")
    assert reads.read_text().splitlines() == ["in.zarr/c/0/0/0"] * 2
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), data[:, 4:12, 4:12])


def _busy_placing(run: str, busy: bool) -> None:
    """On a worker: a placing of ``run`` under way (or done), as cluster._place counts it."""
    with cluster._placing:
        if busy:
            cluster._busy[run] = 1
        else:
            del cluster._busy[run]
            cluster._placing.notify_all()


def test_a_stopped_run_s_taking_of_placed_reports_leaves_the_worker_s_event_loop_free(scheduler: str,
                                                                                     by_value: None) -> None:
    """The taking waits (up to TAKE_WAIT) for a placing under way: run on the worker's event loop,
    as Client.run runs a plain function, it stalled every other call there (heartbeats, a joined
    cluster's other clients) for as long."""
    with distributed.Client(scheduler, set_as_default=False) as client:
        worker = next(iter(client.nthreads()))
        run = f"test-{uuid.uuid4().hex}"
        client.run(_busy_placing, run, True, workers=[worker])
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            taking = pool.submit(client.run, cluster._placed_reports, run, workers=[worker])
            time.sleep(0.3)
            started = time.monotonic()
            client.run(os.getpid, workers=[worker])
            assert time.monotonic() - started < 1.0
            assert not taking.done()
            client.run(_busy_placing, run, False, workers=[worker])
            assert taking.result(timeout=10) == {worker: ({}, [])}
