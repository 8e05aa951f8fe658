"""The preload of a LocalCluster's workers (geomcli.engine.worker_setup), on the session's cluster
(started with it): a worker leaves Ctrl-C, SIGTERM and SIGHUP to the command, and one closed by
its nanny aborts its uploads first."""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from conftest import S3

distributed = pytest.importorskip("distributed")
pytest.importorskip("s3fs")
pytestmark = pytest.mark.cluster


def _upload_slowly(url: str, options: dict[str, Any]) -> None:
    """On a worker: an upload of three parts whose parts never end (they take a minute each)."""
    import asyncio

    import s3fs

    from geomcli.io import _remote

    _remote.MULTIPART_BYTES = 10 << 20
    real = s3fs.S3FileSystem._call_s3

    async def slow(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "upload_part":
            await asyncio.sleep(60)
        return await real(self, method, *args, **kwargs)

    s3fs.S3FileSystem._call_s3 = slow  # type: ignore[method-assign]
    _remote.configure(options)
    _remote.write_bytes(url, bytes(12 << 20), "a.npy")


def _pending(s3: S3) -> list[Any]:
    return list(s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []))


def test_a_worker_closed_by_its_nanny_aborts_its_uploads_first(s3: S3, scheduler: str, by_value: None) -> None:
    options = {"endpoint_url": s3.endpoint, "key": "testing", "secret": "testing"}
    with distributed.Client(scheduler, set_as_default=False) as client:
        address = next(iter(client.nthreads()))
        future = client.submit(_upload_slowly, f"{s3.url}/a.npy", options, workers=[address], pure=False)
        deadline = time.monotonic() + 30
        while not _pending(s3):
            assert time.monotonic() < deadline and future.status == "pending", future
            time.sleep(0.02)
        client.restart_workers([address])  # the nanny closes the worker, then starts another
        deadline = time.monotonic() + 30  # a nanny's close waits on the worker's event loop: slow on a busy machine
        while _pending(s3):
            assert time.monotonic() < deadline, "the upload was left pending"
            time.sleep(0.05)
    assert s3.keys() == []


def _stop_signals_ignored() -> bool:
    """On a worker: whether it ignores Ctrl-C, SIGTERM and SIGHUP (worker_setup)."""
    return all(signal.getsignal(number) == signal.SIG_IGN for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))


def test_a_worker_a_local_cluster_adds_later_has_the_preload_too(by_value: None) -> None:
    """A worker that --scheduler local:N's cluster adds during the run (scale, where a nanny gave
    one up) was made without the run's settings, held only while the cluster started: no preload,
    so a SIGTERM to the process group ended it, and the reports of the outputs it placed with it.
    (By value: a worker that imported this module would import conftest, which undoes SIG_IGN.)"""
    from geomcli.engine import scheduler as scheduler_module

    with scheduler_module.connect("local:2") as (client, cluster):
        assert cluster is not None
        for count in (1, 2):
            cluster.scale(count)
            client.wait_for_workers(count, timeout=60)
            deadline = time.monotonic() + 60
            while len(client.nthreads()) != count:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        ignored = client.run(_stop_signals_ignored)
    assert list(ignored.values()) == [True, True], ignored

