"""Which Dask cluster ``--scheduler`` names, and a client of it: ``local`` or ``local:N`` starts a
LocalCluster of N worker processes (one thread each) for the run, an address (``tcp://HOST:PORT``)
joins a running cluster. For a batch of files (geomcli.engine.cluster) and a zarr job's graph
(geomcli.engine.zarr_file).

An unreachable scheduler is one error line (exit 1: the command was right, the cluster was not
there) within ``CONNECT_SECONDS``; what is no scheduler's name is a usage error (exit 2), as is
``--scheduler`` without Dask installed.

Only the standard library loads at import time: Dask loads when a run asks for it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from geomcli.engine.report import echo_stderr
from geomcli.errors import GeomError, PlanError

if TYPE_CHECKING:
    from distributed import Client, LocalCluster

INSTALL = "pip install 'geomcli[dask]'"
# seconds to wait for a scheduler that does not answer
CONNECT_SECONDS = 10
# local:N's most worker processes: more than one machine runs (LocalCluster built a dict of
# local:99999999999 workers and died of MemoryError, with a traceback)
MAX_LOCAL_WORKERS = 1024
# A LocalCluster's settings: no retry of its own after a worker dies (the dispatch retries each
# file alone); one root task of a zarr's graph at a worker thread (about 4 chunks a worker); workers
# forked from a forkserver that imported Dask once, where spawn imports it in each (a second apiece)
LOCAL_CONFIG = {"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": 1.0,
                "distributed.worker.multiprocessing-method": "forkserver",
                # the workers' sampling profiler walks the task thread's stack every 10 ms: time taken
                # from the files, for a dashboard no one opens
                "distributed.worker.profile.enabled": False,
                # Ctrl-C, SIGTERM and SIGHUP are the command's to handle (see geomcli.engine.worker_setup)
                "distributed.worker.preload": ["geomcli.engine.worker_setup"],
                # the cluster closes the nanny of a worker removed this long ago (15 s) if no worker
                # of its name is registered at that instant: one restarting the worker a file had
                # killed, 15 s after an earlier death of its name, and the new worker with it, under
                # the good file it had just been given (failed as "ended ... (twice)"). Our nannies
                # restart their own workers (one that cannot is replaced: cluster._Dispatch): never
                "distributed.deploy.lost-worker-timeout": "100 days"}
# a scheduler's address as distributed takes it (tcp:// where none is named): a host and a port,
# nothing after; a path or a missing port made distributed hang 20 s on its way to an error
_ADDRESS = re.compile(r"(?:(?P<protocol>tcp|tls|ws|wss|ucx)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)"
                      r":(?P<port>[0-9]{1,5})")


@dataclass(frozen=True)
class Scheduler:
    """What --scheduler names: a LocalCluster of ``workers`` processes, or a running one's ``address``."""

    address: str | None = None
    workers: int | None = None

    @property
    def local(self) -> bool:
        return self.address is None


def parse_scheduler(text: str) -> Scheduler:
    """``local``, ``local:N`` or an address such as ``tcp://HOST:PORT``; a PlanError (usage, exit 2)
    for anything else.

    >>> parse_scheduler("local:3"), parse_scheduler("tcp://10.0.0.5:8786").address
    (Scheduler(address=None, workers=3), 'tcp://10.0.0.5:8786')
    >>> parse_scheduler("10.0.0.5:8786").address, parse_scheduler("tls://[::1]:8786").address
    ('tcp://10.0.0.5:8786', 'tls://[::1]:8786')
    """
    from geomcli import cpus

    if text == "local":
        return Scheduler(workers=cpus.available_cpus())
    if text.startswith("local:"):
        count = text.removeprefix("local:")
        if not (count.isascii() and count.isdigit()) or not 1 <= int(count) <= MAX_LOCAL_WORKERS:
            raise PlanError(f"{text!r}: local:N needs a number of workers N from 1 to {MAX_LOCAL_WORKERS}",
                            options="--scheduler")
        return Scheduler(workers=int(count))
    match = _ADDRESS.fullmatch(text)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise PlanError(f"{text!r} is not local, local:N or a scheduler's address such as tcp://HOST:8786",
                        options="--scheduler")
    return Scheduler(address=f"{match['protocol'] or 'tcp'}://{match['host']}:{int(match['port'])}")


def require_dask() -> None:
    """A usage error (exit 2) that says what to install, where Dask is not installed."""
    try:
        import distributed  # noqa: F401
    except ImportError as error:
        raise PlanError(f"--scheduler runs on Dask, which is not installed: {INSTALL}") from error


# What a LocalCluster's forkserver imports once for every worker: what Dask's own forkserver
# would (distributed.utils.get_mp_context: its required packages, and numpy), and the task's module
_WORKER_PRELOAD = ["distributed", "dask", "msgpack", "cloudpickle", "tornado", "toolz", "numpy",
                   "geomcli.engine.cluster", "geomcli.engine.worker_setup"]


def start_local_workers_early(scheduler: Scheduler) -> None:
    """For a LocalCluster: start the forkserver its workers are forked from now, before this
    process imports Dask and makes the plan, so that its imports (a fresh interpreter importing
    Dask: about 0.4 s) run beside those on the other core instead of after them. (When the
    cluster starts, Dask's own call to set the preload finds the server running and changes
    nothing.) Measured on the 200-PNG batch (benchmarks/cluster.py): see there."""
    import importlib.util

    if not scheduler.local or importlib.util.find_spec("distributed") is None:
        return
    from geomcli.engine import forkserver

    forkserver.set_preload(_WORKER_PRELOAD)
    forkserver.start(held=(signal.SIGINT, signal.SIGTERM, signal.SIGHUP))


@contextmanager
def signals_held() -> Iterator[None]:
    """Ignore STOP_SIGNALS (a second Ctrl-C) while a stopped run cleans up."""
    from geomcli.io import STOP_SIGNALS

    previous = {number: signal.signal(number, signal.SIG_IGN) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


# how long a stopped run waits for the tasks it cancelled to end on a cluster's workers (seconds)
STOP_WAIT = 60.0


def cancel_and_wait(client: Any, futures: list[Any]) -> None:
    """Cancel ``futures``' tasks, and wait (up to STOP_WAIT) until no worker still runs one: a
    cancelled task runs on to the end of what it does (a zarr chunk's write; a file's, which then
    removes its temp file), and a joined cluster's workers get no signal. Only then may the run
    remove what they were writing, and end."""
    import time

    keys = [future.key for future in futures]
    deadline = time.monotonic() + STOP_WAIT
    try:
        client.cancel(futures)
        # a client whose scheduler went away can ask no worker (each ask spent 10 s reconnecting)
        while time.monotonic() < deadline and client.status == "running" and \
                any(client.run(_running, keys).values()):
            time.sleep(0.05)
    except (OSError, RuntimeError):  # the scheduler or the workers gone: nothing left running
        pass


@contextmanager
def scheduler_kept(client: Any, name: str, lost: str) -> Iterator[None]:
    """Within it, while ``client`` computes a job of the file ``name``, what ends it on the
    cluster is one GeomError, not a traceback:

    - a joined cluster's scheduler that goes away (killed, or its machine): ``{address}: the Dask
      scheduler went away mid-run; {lost}``. distributed cancels every future of the client then
      (FutureCancelledError), or a result on its way meets the closed connection ('in <TCP
      (closed) ConnectionPool.gather ...>: ConnectionResetError');
    - a task whose worker process died each time the cluster ran it (distributed's KilledWorker:
      a nanny that stopped it over its memory limit, or a crash), which says so where it was the
      nanny."""
    from concurrent.futures import CancelledError

    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError

    try:
        yield
    except (CancelledError, CommClosedError) as error:
        if isinstance(error, CancelledError) and client.status == "running":
            raise  # cancelled otherwise: not the scheduler's going
        address = getattr(client.scheduler, "address", None) or "the cluster"
        raise GeomError(f"{address}: the Dask scheduler went away mid-run; {lost}") from error
    except KilledWorker as error:
        raise GeomError(f"{name}: the worker process ended while doing a chunk of it, each time the cluster tried"
                        f"{over_memory(client, error)}; {lost}") from error


def over_memory(client: Any, killed: Any) -> str:
    """Why the last worker on a task (distributed's KilledWorker ``killed``) ended, where its nanny
    told the scheduler: over its memory limit (``dask worker --memory-limit``, or a LocalCluster's
    share of this machine's memory)."""
    address = getattr(killed.last_worker, "address", None)
    try:
        events = client.get_events("worker-restart-memory")
    except (OSError, RuntimeError):  # the scheduler gone: no reason to give
        return ""
    for _, event in reversed(events):
        if isinstance(event, dict) and event.get("worker") == address and isinstance(event.get("rss"), int):
            return f"; its nanny stopped it at {event['rss'] / 2**20:.0f} MiB, over its memory limit"
    return ""


def _running(keys: list[Any], dask_worker: Any = None) -> bool:
    """On a worker: whether it still runs one of ``keys`` (a cancelled task runs to its end)."""
    tasks = dask_worker.state.tasks
    return any(key in tasks and tasks[key].state in ("executing", "long-running", "cancelled", "resumed")
               for key in keys)


@contextmanager
def connect(scheduler: Scheduler | str, debug: bool = False) -> Iterator[tuple[Client, LocalCluster | None]]:
    """A client of the cluster ``scheduler`` names, and the cluster when it is a LocalCluster
    started for the run (closed at the end); None for a running one, joined."""
    if isinstance(scheduler, str):
        scheduler = parse_scheduler(scheduler)
    require_dask()
    import logging

    import dask
    import distributed

    # distributed logs workers that die, tasks that fail and clusters that close to stderr: each of
    # those is this run's to report, once, as a file's error line. Not restored after: its threads
    # still log as they close, after the run (a closed comm's traceback on SIGTERM, once in 70 runs)
    if not debug:
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
        # which Dask's configuration gives a level of its own: its reconnection's traceback, ended
        # as a run whose scheduler went away ends
        logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
        # and asyncio's "Task exception was never retrieved" of each wait a Ctrl-C ended in the client's
        # gather (distributed.client.AllExit): a chunked job's compute on a cluster printed dozens
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    if scheduler.local:
        from geomcli.io import _atomic

        # for the cluster's life, not its start alone: a worker it adds later (scale, after a
        # nanny gave one up) is made with these settings then; one made without had no preload
        # (worker_setup: a SIGTERM to the group ended it) and sampled its stack for a profile
        with dask.config.set(LOCAL_CONFIG):
            # a Ctrl-C waits until the cluster is up and can be closed: one stopped as it started
            # was left to distributed's exit hook, which failed on its workers with a traceback
            release = _atomic.hold_signals()
            try:
                cluster = distributed.LocalCluster(
                    n_workers=scheduler.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                    # no dashboard; its HTTP server (always started) on a free port, never 8787's
                    dashboard_address=None, scheduler_kwargs={"dashboard": False, "dashboard_address": ":0"},
                    silence_logs=logging.WARNING if debug else logging.CRITICAL)
            except BaseException as error:
                release()
                # no port, no process; no thread or worker process under ulimit -u (distributed's
                # RuntimeError: "can't start new thread", "Nanny failed to start."), a traceback
                if isinstance(error, (OSError, RuntimeError)):
                    raise GeomError(f"cannot start a local Dask cluster ({first_line(error)})") from error
                raise
            try:
                release()  # a Ctrl-C held meanwhile lands here, where the cluster is closed
                with distributed.Client(cluster, set_as_default=False) as client:
                    yield client, cluster
            finally:
                with signals_held():
                    cluster.close()
        return
    address = str(scheduler.address)
    if address.startswith(("tls://", "wss://")) and \
            distributed.Security().get_connection_args("client").get("ssl_context") is None:
        # distributed's TypeError, with a traceback
        raise GeomError(f"{address}: tls:// needs TLS settings: a CA file, and this client's certificate and "
                        "key (distributed.comm.tls in Dask's configuration, or DASK_DISTRIBUTED__COMM__TLS__CA_FILE, "
                        "..._CLIENT__CERT and ..._CLIENT__KEY)")
    try:
        client = _joined_client(address)
    except (OSError, ValueError) as error:  # the connection's TimeoutError is an OSError
        _drop_half_made(error)
        raise GeomError(f"{address}: cannot reach the Dask scheduler ({first_line(error)})") from error
    except _SaidNothing as error:
        raise GeomError(f"{address}: what answers there is not a Dask scheduler ({error})") from error
    except Exception as error:  # noqa: BLE001 (a server that is not Dask's: its bytes read as a frame of 3 EiB)
        _drop_half_made(error)
        raise GeomError(f"{address}: what answers there is not a Dask scheduler "
                        f"({type(error).__name__}: {first_line(error)})") from error
    with client:
        if not client.nthreads():
            echo_stderr(f"Warning: the cluster at {scheduler.address} has no workers yet; waiting for some")
        else:
            _check_workers_code(client, str(scheduler.address))
        yield client, None


class _SaidNothing(Exception):
    """A server that took the connection and never sent Dask's handshake."""


def _joined_client(address: str) -> Client:
    """``distributed.Client(address)``, within CONNECT_SECONDS a step. Its connect waits for the
    server's handshake with no timeout at all (distributed.comm.core.connect): a server that takes
    the connection and says nothing (an HTTP server, a database: they wait for the client to
    speak) held the run for ever. A Dask scheduler sends its handshake at once, and each later step
    has a timeout of CONNECT_SECONDS: past three of them, the Client is left to its thread (a
    daemon: the process ends without it)."""
    import threading

    import distributed

    made: dict[str, Any] = {}

    def make() -> None:
        try:
            made["client"] = distributed.Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
        except BaseException as error:  # noqa: BLE001 (raised again in the caller's thread)
            made["error"] = error

    thread = threading.Thread(target=make, name="geomcli-connect", daemon=True)
    thread.start()
    thread.join(3 * CONNECT_SECONDS)
    if thread.is_alive():
        raise _SaidNothing(f"it took the connection and sent nothing in {3 * CONNECT_SECONDS} s")
    if "error" in made:
        raise made["error"]
    return made["client"]  # type: ignore[no-any-return]


def _drop_half_made(error: BaseException) -> None:
    """Close the Client whose constructor raised ``error`` at once: left to its __del__, its close
    waited 20 s for a scheduler that never answered (after the error line)."""
    import distributed

    traceback = error.__traceback__
    while traceback is not None:
        client = traceback.tb_frame.f_locals.get("self")
        if isinstance(client, distributed.Client):
            try:
                client.close(timeout=1)
            except Exception:  # noqa: BLE001, S110 (it is being dropped: whatever its close met)
                pass
            client.status = "closed"  # its __del__ closes no more
            with contextlib.suppress(Exception):
                client._loop_runner.stop()
            return
        traceback = traceback.tb_next


@functools.cache
def code_fingerprint() -> str:
    """geomcli's version and a hash of its modules' source: what a joined cluster's workers must
    run too (an editable install changes with no new version). Once a process: the code it loaded
    then, not the files edited since."""
    import hashlib
    from pathlib import Path

    import geomcli

    root = Path(geomcli.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return f"{geomcli.__version__}+{digest.hexdigest()[:12]}"


def check_code(expected: str | None) -> None:
    """In a task on a worker: refuse to run where this process's geomcli is not the client's
    (a worker that joined after the cluster's were checked)."""
    if expected is not None and expected != code_fingerprint():
        raise GeomError(f"this worker runs another geomcli ({code_fingerprint()}, not {expected}): install the "
                        "client's there")


def _check_workers_code(client: Client, address: str) -> None:
    """A GeomError where a joined cluster's workers run another geomcli than this one, or none: a
    task of this one's would fail there, or do what another version does."""
    ours = code_fingerprint()
    try:
        theirs = client.run(code_fingerprint)
    except (ImportError, AttributeError, OSError) as error:  # no geomcli there, one without this check, no reply
        raise GeomError(f"{address}: the cluster's workers cannot run geomcli ({first_line(error)}): install "
                        "this one there") from error
    others = sorted({code for code in theirs.values() if code != ours})
    if others:
        count = sum(code != ours for code in theirs.values())
        raise GeomError(f"{address}: {count} of {len(theirs)} of the cluster's workers run another geomcli "
                        f"({others[0]}, not {ours}): install this one there")


def for_workers(path: str) -> str:
    """``path`` as a cluster's workers find it: a local path made absolute, since a worker's working
    folder is its own (a joined cluster's is not this shell's); a URL as it is."""
    from geomcli.io import _remote

    return path if _remote.is_url(path) or os.path.isabs(path) else os.path.join(os.getcwd(), path)


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


