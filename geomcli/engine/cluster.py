"""A batch on a Dask distributed cluster (``--scheduler``): the plan made here as for ``-j``,
the files done by the cluster's workers, each file's report shown here as it comes.

``local`` or ``local:N`` starts a LocalCluster of N worker processes (one thread each) for the
run; an address (``tcp://HOST:PORT``) joins a running cluster, whose workers must have the same
geomcli installed (checked as it is joined: geomcli.engine.scheduler).

- **Headers first.** As for ``-j``, every input's header is checked before any file is done (a
  run whose options some input cannot take writes nothing): by this process for a small batch,
  by the workers for one of more than ``HEADERS_HERE`` inputs, which is where the time goes for a
  million inputs on object storage. An object read whole for its header (under 64 KiB, a TIFF
  read past its ranges) goes to its task with its bytes, ``CARRIED_BYTES`` a task at most: read
  once, not twice; one read whole whose header could not be read fails so, not sent. A worker's
  check sends them back with its faults (``CARRIED_BYTES`` a check, io._remote.KEPT_BYTES in all,
  as this process keeps); past that, an object is read again by the task that does its file. A
  file whose read stalled in the check fails so, and is not sent (the deadline waited out twice).
  No file starts while later headers are checked, though a million inputs wait for a million
  headers: a fault in the last is a usage error that writes nothing (exit 2), which outputs placed
  before it would break, and holding them back until the check ends would hold a million outputs
  (on object storage, in memory). The check is side by side instead, on every worker.
- **Tasks of several files.** Consecutive jobs go to the cluster in tasks of about
  ``TASK_SECONDS`` of work each (longer on a cluster of more than ``TASK_RATE`` worker threads,
  see task_seconds), sized by their inputs' bytes at the rate the finished tasks showed (a
  start-up guess before); never more than ``IN_FLIGHT`` tasks per worker thread are
  submitted at once, so a million files are never a million futures (distributed#2181). Near
  the end tasks shrink, so the workers finish together.
- **The same reports.** A task returns each file's report as a ``-j`` worker does; they are
  shown in input order (report.Outcomes) as tasks complete, so the bytes written, the ``--json``
  records, the progress bar and the exit code are those of ``-j``.
- **Outputs placed beside the work.** A task places each output (sync and rename, or for an
  object one put) on a second thread while it makes the next, as a -j worker does; what is
  placed is whole. A task stopped or killed on the way leaves the outputs it placed, and a retry
  after a worker died makes them again (under ``-n`` it then reports them skipped: the output
  exists).
- **Retries.** A file whose read or write failed on a passing I/O error (a connection reset, a
  timeout, EIO) is sent again in a later task, up to ``IO_RETRIES`` times; a bad file fails at
  once. A task whose worker died (Dask's KilledWorker) is tried again file by file, each file
  alone on the cluster: nothing else in flight, so a second death is that file's own (a task
  Dask sends a busy worker waits there, and dies with the one running; and a LocalCluster of
  ours never closes the worker a nanny restarts, scheduler.LOCAL_CONFIG); a file whose worker
  dies again fails. A task's result is let go as soon as its reports are here: one a worker still
  held when it died was run again by Dask, its files done again behind the run.
  A LocalCluster of ours allows no retry of its own (scheduler.LOCAL_CONFIG); a cluster joined
  keeps its own setting, which it spends first: a task it ran again after its worker died (the
  scheduler's "remove-worker" event names it) has that worker's leftovers swept here as it ends.
- **Workers that do not come back.** A nanny of a LocalCluster of ours restarts the worker a file
  killed; one whose restart failed (distributed logs "Failed to restart worker after its process
  exited") or never ends stays, with no worker. The run checks once a second which of its nannies
  has a worker registered: one whose worker has been missing ``WORKER_MISSING_SECONDS`` on end (a
  restart takes well under a second: one under way is not closed) is closed and dropped, and
  ``scale`` starts another in its place. Should the cluster have no worker at all for
  ``NO_WORKER_SECONDS`` (each nanny replaced twice meanwhile), the run ends: each file not done
  fails with "the cluster's workers could not be started again", exit 1, where its tasks would
  have waited for ever. A joined cluster's workers are its own to keep: the run waits for them.
- **A dead store, given up once.** A task counts its own stalls (io._remote.watching_stores: a
  store that answered none of STALLS_IN_A_ROW requests in a row is taken for dead), so a store
  dead after the header check cost each task up to 3 deadlines: 10,000 files in tasks of 20,
  hours. Each task (a check of headers too) sends back the stores it took for dead, and the
  tasks sent after it are given them (Task.dead_stores): their files of those stores fail at
  once, in the same line. The tasks in flight finish as they do. A store taken for dead is not
  asked again in the run, even if it answers again.
- **Stopping.** After a failure under ``--fail-fast`` nothing more is sent, and the tasks in
  flight stop before their next file (a Dask Event the client sets) and report those they did,
  as -j's workers finish the one they hold. On Ctrl-C or SIGTERM the tasks in flight are
  cancelled: each notices between files and stops, and places nothing once cancelled (the file
  it was doing is not renamed into place, its multipart upload aborted: a joined cluster's
  workers get no signal); a LocalCluster of ours is closed (its workers end) and the temp files
  of the jobs in flight are swept here, as ``-j`` does: only whole outputs remain. Before the
  cancel, the reports of the outputs the tasks in flight placed (kept on their workers until a
  task returns them) are taken, and their tasks place no more: each output in place has its
  record, as with ``-j``; also where the signal came to the whole process group: a LocalCluster's
  workers, and the forkserver they come from, leave it to the command (engine.worker_setup).
- **Paths as here.** Local names go to the workers made absolute (scheduler.for_workers): a
  joined cluster's working folder is not this shell's. Reports come back naming them as planned.
- **An unreachable scheduler** is one error line (exit 1), within scheduler.CONNECT_SECONDS.

Only the standard library loads at import time: Dask loads when a run asks for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from geomcli.engine import jobs as job_steps
from geomcli.engine import plan as plans
from geomcli.engine.report import cause, echo_stderr
from geomcli.engine.scheduler import (
    Scheduler,
    cancel_and_wait,
    check_code,
    code_fingerprint,
    connect,
    first_line,
    for_workers,
    over_memory,
    parse_scheduler,
    require_dask,
    signals_held,
    start_local_workers_early,
)
from geomcli.errors import GeomError, PlanError

if TYPE_CHECKING:
    from distributed import Client, Future, LocalCluster

    from geomcli.engine.options import BatchOptions
    from geomcli.engine.plan import Job, Task
    from geomcli.engine.report import Outcomes
    from geomcli.engine.summary import Report
    from geomcli.io import Header

# seconds of work a task is made of, and the input bytes per second a worker thread is assumed to
# do until the first tasks have shown their rate
TASK_SECONDS = 1.0
FIRST_RATE = 8 << 20
# the tasks a second the client is taken to submit and collect at most: measured here at about 240
# empty tasks a second (benchmarks/cluster.py), so a cluster's tasks never ask for more than half
TASK_RATE = 100
# the most files in one task (its reports travel back in one message), and tasks in flight per
# worker thread: one running, one waiting its turn, so no thread idles between two
MAX_FILES = 1000
IN_FLIGHT = 2
# A batch of more inputs than this has its headers checked by the workers, in tasks of
# HEADER_TASK_FILES: here they take about 0.1 ms a local file, and on object storage a round trip
# each, 32 at a time (plan.option_faults): minutes of ImageNet's 1.28 M inputs, done before any
# file is, where 64 workers take seconds.
HEADERS_HERE = 2000
HEADER_TASK_FILES = 1000
# the most bytes of small objects a task carries (those the check here read whole, Job.data, so
# that a worker need not read them again): Dask warns of a graph past 10 MB (its
# large-graph-warning-threshold), and what a task carries goes through the scheduler
CARRIED_BYTES = 4 << 20
# with --fail-fast, how often (seconds) a task asks whether the run has stopped, besides before its first file
STOP_ASKED = 0.5
# how often a file is sent again after a passing I/O error
IO_RETRIES = 2
# seconds a stopped run's taking of a worker's placed reports waits for an output being placed
TAKE_WAIT = 5.0
# a LocalCluster of ours: how long (seconds) a nanny's worker may be missing on end before the nanny
# is replaced, and the cluster have no worker at all before the files not done fail
WORKER_MISSING_SECONDS = 20.0
NO_WORKER_SECONDS = 3 * WORKER_MISSING_SECONDS


def check(options: BatchOptions) -> Scheduler:
    """What ``options.scheduler`` names, checked before the plan: its syntax, -j not given with it,
    and Dask installed (usage errors, exit 2, that say what to install)."""
    assert options.scheduler is not None
    scheduler = parse_scheduler(options.scheduler)
    if options.jobs is not None:
        raise PlanError("give -j N or --scheduler, not both: --scheduler local:N starts N workers",
                        options=["-j", "--scheduler"])
    start_local_workers_early(scheduler)
    require_dask()
    return scheduler


@contextmanager
def session(scheduler: Scheduler, debug: bool = False) -> Iterator[Session]:
    """A run on the cluster ``scheduler`` names (:func:`check`), connected when first needed and
    closed at the end (a LocalCluster of ours with it)."""
    run = Session(scheduler, debug)
    try:
        with run.connections:
            yield run
    finally:
        run.sweep()  # after the cluster: a LocalCluster of ours has ended its workers


class Session:
    """One run on the cluster: its inputs' headers checked (by the workers, for a big batch), then
    its files done, through one client, connected when first needed: a small batch's headers are
    checked here first, so that a usage fault needs no cluster."""

    def __init__(self, scheduler: Scheduler, debug: bool) -> None:
        self.scheduler, self.debug = scheduler, debug
        self.connections = ExitStack()
        self.connection: tuple[Client, LocalCluster | None] | None = None
        self.dispatch: _Dispatch | None = None
        # by job index, the small objects the workers read whole as they checked headers
        # (option_faults), and the lines of the reads that stalled there
        self.carried: dict[int, bytes] = {}
        self.stalled: dict[int, str] = {}
        # the stores the workers' checks took for dead (io._remote.dead_stores): its later tasks
        # and the run's are not to ask them
        self.dead_stores: set[str] = set()

    def connected(self) -> tuple[Client, LocalCluster | None]:
        """The client, and the LocalCluster started for the run (None for a cluster joined)."""
        if self.connection is None:
            self.connection = self.connections.enter_context(connect(self.scheduler, self.debug))
        return self.connection

    @staticmethod
    def carried_bytes() -> int:
        """The most bytes of objects a task carries to its runs (one object read whole by the check here)."""
        return CARRIED_BYTES

    @staticmethod
    def headers_here(todo: Sequence[Job]) -> bool:
        """Whether :meth:`option_faults` checks ``todo``'s headers in this process (a small batch)."""
        return len(todo) <= HEADERS_HERE

    def option_faults(self, task: Task, todo: Sequence[Job], unread: set[int] | None = None,
                      faulted: dict[int, Header] | None = None) -> list[tuple[Job, str]]:
        """What plan.option_faults finds in ``todo``'s headers (and adds to ``unread`` and ``faulted``): here for
        a batch of up to HEADERS_HERE inputs, else by the workers in tasks of HEADER_TASK_FILES,
        IN_FLIGHT per worker thread at most. A task the cluster could not run is checked here instead."""
        unread = set() if unread is None else unread
        faulted = {} if faulted is None else faulted
        if self.headers_here(todo):
            return plans.option_faults(task, todo, unread, faulted)
        from distributed import as_completed

        from geomcli.io import _remote

        client, local = self.connected()
        task = _carrying_code(task, local)
        starts = deque(range(0, len(todo), HEADER_TASK_FILES))
        in_flight: dict[Future[Any], tuple[Sequence[Job], int]] = {}
        # the bytes of small objects the tasks may still send back with their check (each at most
        # CARRIED_BYTES), for their runs: io._remote.KEPT_BYTES in all, as a check here keeps
        room = _remote.KEPT_BYTES
        completed = as_completed(loop=client.loop, with_results=True, raise_errors=False)
        found: list[tuple[Job, str]] = []
        run_id = uuid.uuid4().hex[:12]
        try:
            while starts or in_flight:
                threads = max(1, sum(client.nthreads().values()))
                while starts and len(in_flight) < IN_FLIGHT * threads:
                    start = starts.popleft()
                    part = todo[start:start + HEADER_TASK_FILES]
                    carried = min(CARRIED_BYTES, room)
                    room -= carried
                    future = client.submit(header_faults, _not_asking(task, self.dead_stores),
                                           [_moved(job) for job in part], carried, pure=False,
                                           key=f"geomcli-headers-{run_id}-{start}")
                    in_flight[future] = (part, carried)
                    completed.add(future)
                future, result = next(completed)
                part, carried = in_flight.pop(future)
                if future.status == "finished":
                    faults, kept, stalled, dead, not_read, headers = result
                    self.dead_stores.update(dead)
                    unread.update(not_read)
                    faulted.update(headers)
                    by_index = {job.index: job for job in part}
                    found.extend((by_index[index], _as_planned(line, by_index[index])) for index, line in faults)
                    self.carried.update(kept)
                    self.stalled.update((index, _as_planned(line, by_index[index])) for index, line in stalled.items())
                    room += carried - sum(map(len, kept.values()))  # (what it did not carry, for later tasks)
                else:  # a worker lost, or a bug there: this process checks them (and raises the bug)
                    room += carried
                    found.extend(plans.option_faults(task, part, unread, faulted))
        except BaseException:
            with signals_held():
                client.cancel(list(in_flight))
            raise
        return sorted(found, key=lambda fault: fault[0].index)

    def run_jobs(self, task: Task, todo: Sequence[Job], outcomes: Outcomes, fail_fast: bool) -> None:
        """Do ``todo`` on the cluster, each report into ``outcomes``. (This
        process does no files itself while a LocalCluster starts, as -j does while its workers
        start: the scheduler and the nannies run in this process, and a file done here holds the
        interpreter they need; measured, it made the run slower, not faster.) Ctrl-C and SIGTERM
        stop it as the module docstring says: the tasks in flight cancelled, a LocalCluster of ours
        closed (its workers ended), then the temp files of the jobs in flight swept, a second signal
        held off meanwhile."""
        from geomcli.io import _remote

        client, local = self.connected()
        task = _carrying_code(task, local)
        # the stores taken for dead so far, by the check here (this process's own count) or the workers'
        dead = self.dead_stores.union(_remote.dead_stores())
        self.dispatch = _Dispatch(client, task, todo, outcomes, fail_fast, local, dead)
        try:
            self.dispatch.run()
        except BaseException:
            with signals_held():
                self.dispatch.cancel_all()
            raise

    def sweep(self) -> None:
        """Remove the temp files of the jobs still in flight (a run stopped), a signal held off."""
        if self.dispatch is not None and self.dispatch.in_flight:
            with signals_held():
                job_steps.remove_leftovers([job for sent in self.dispatch.in_flight.values() for job in sent.jobs])


def _carrying_code(task: Task, local: LocalCluster | None) -> Task:
    """``task`` naming the geomcli a joined cluster's workers must run (Task.code). A LocalCluster
    of ours forked its workers from this run's forkserver: the same geomcli, and no hash of its
    sources (20 ms here and in each worker, before its first file)."""
    return task if local is not None else dataclasses.replace(task, code=code_fingerprint())


def header_faults(task: Task, jobs: Sequence[Job], carried: int = 0) -> tuple[
        list[tuple[int, str]], dict[int, bytes], dict[int, str], tuple[str, ...], list[int], dict[int, Header]]:
    """A task, on a worker: plan.option_faults of ``jobs``, by their index; the bytes of the small
    objects it read whole for their headers, by index, ``carried`` bytes at most: their runs take
    them (Job.data), where they read them a second time; the lines of the reads that stalled, or
    of objects read whole whose header could not be read, by index: their files fail so, where
    their runs waited out the deadline, or read the object, a second time; and
    the stores taken for dead (Task.dead_stores, and those this check gave up); and the indices
    of the jobs whose header could not be read (a refused run names their failures, and reads no
    other header again); and the headers of the jobs at fault, by index (their --json records are
    made from them)."""
    from geomcli.io import _remote

    check_code(task.code)
    with _remote.task_options(task.common.storage_options), _remote.watching_stores(task.dead_stores), \
            _remote.keeping_small_reads(carried):  # not another run's, on this worker
        unread: set[int] = set()
        faulted: dict[int, Header] = {}
        faults = [(job.index, line) for job, line in plans.option_faults(task, jobs, unread, faulted)]
        return (faults, {job.index: data for job in jobs if (data := _remote.take_kept(job.input)) is not None},
                {job.index: line for job in jobs if (line := _remote.take_failed(job.input)) is not None},
                _remote.dead_stores(), sorted(unread), faulted)


def _not_asking(task: Task, dead_stores: Iterable[str]) -> Task:
    """``task`` naming ``dead_stores`` (with those it named): the stores its files are not to ask,
    taken for dead by the tasks done before it (io._remote.watching_stores). Each task counts
    its own stalls; without this, a dead store cost each task of the run up to
    io._remote.STALLS_IN_A_ROW deadlines. A store taken for dead is not asked again in the run,
    though it may answer again."""
    given = set(dead_stores)
    if not given or given.issubset(task.dead_stores):
        return task
    return dataclasses.replace(task, dead_stores=tuple(sorted(given.union(task.dead_stores))))


@dataclass
class _Sent:
    """A task in flight: its jobs, and whether it is a retry after a worker died."""

    jobs: list[Job]
    after_death: bool = False


class _Dispatch:
    """The jobs, the tasks in flight and the retries of one run."""

    def __init__(self, client: Client, task: Task, todo: Sequence[Job], outcomes: Outcomes,
                 fail_fast: bool, local: LocalCluster | None = None, dead_stores: Iterable[str] = ()) -> None:
        self.client, self.outcomes, self.fail_fast = client, outcomes, fail_fast
        self.task = _not_asking(task, dead_stores)  # (given the stores taken for dead so far, and later ones)
        self.local = local
        self.workers = 0 if local is None else len(local.worker_spec)
        self.todo = deque(todo)
        self.again: deque[tuple[list[Job], bool]] = deque()  # retries (their jobs, after a death), sent first
        sample = [_size(job) for job in todo[:10_000]]
        self.left = sum(sample) * len(todo) / max(1, len(sample))  # bytes still to submit, roughly
        self.rate = float(FIRST_RATE)
        self.io_tries: dict[int, int] = {}
        self.in_flight: dict[Future[Any], _Sent] = {}
        self.rate_seen = False  # FIRST_RATE stands until a task tells the rate
        self.run_id = uuid.uuid4().hex[:12]
        self.count = 0
        self.threads = 1
        self.threads_seen = -1.0
        self.stopping = False
        self.stop = f"geomcli-stop-{self.run_id}" if fail_fast else None  # the Event tasks look at, with --fail-fast
        self.died_running: set[str] = set()  # keys of our tasks a worker was running as it was removed
        # a LocalCluster of ours: since when each nanny's worker has been missing (by the nanny's
        # name), when a worker was last up, and when they were last looked at (_keep_workers)
        self.missing: dict[Any, float] = {}
        self.worker_seen = self.workers_looked = time.monotonic()

    def run(self) -> None:
        from distributed import as_completed

        self.completed = as_completed(loop=self.client.loop, with_results=True, raise_errors=False)
        if self.local is None:
            # a joined cluster runs a dead worker's task again itself (its allowed-failures): the
            # scheduler's word of each worker removed names the tasks it was running
            self.client.subscribe_topic("all", self._worker_removed)
        from geomcli import io

        self._top_up()
        try:
            while self.in_flight:
                self._keep_workers()  # (which may fail the files not done: nothing left in flight)
                if not self.in_flight or not self._completed_within(1.0):
                    continue
                future, result = next(self.completed)
                # a task's reports all counted and shown before a signal's exception: one taken
                # out of in_flight is not among those a stopped run takes (_take_placed)
                with io.signals_deferred():
                    sent = self.in_flight.pop(future)
                    self._finished(future, result, sent)
                # its result taken, the cluster is to forget it before the next task is sent: a
                # result held there (until the next task ended) had Dask run the task again,
                # behind the run, if the worker holding it died
                future.release()
                del future, result
                if not self.stopping:
                    self._top_up()
        finally:
            if self.local is None:
                with contextlib.suppress(OSError, RuntimeError, ValueError):  # the scheduler gone
                    self.client.unsubscribe_topic("all")
            if self.stop is not None and self.stopping:
                from distributed import Event

                with contextlib.suppress(OSError, RuntimeError):  # the scheduler gone: nothing kept
                    Event(self.stop, client=self.client).clear()  # a joined scheduler keeps a set one

    def _worker_removed(self, event: tuple[float, Any]) -> None:
        """On the client's event loop: note which of our tasks a removed worker was running (the
        scheduler's "remove-worker" event, which comes before those tasks' results)."""
        message = event[1]
        if isinstance(message, dict) and message.get("action") == "remove-worker":
            prefix = f"geomcli-{self.run_id}-"
            self.died_running.update(key for key in message.get("processing-tasks", ())
                                     if isinstance(key, str) and key.startswith(prefix))

    def _top_up(self) -> None:
        """Submit tasks until ``IN_FLIGHT`` per worker thread are in flight, or none is left."""
        now = time.monotonic()
        if now - self.threads_seen > 1.0:  # workers come and go: ask again at most once a second
            try:
                threads = self.client.nthreads()
            except OSError as error:
                raise self._scheduler_lost() from error
            self.threads = max(1, sum(threads.values()))
            self.threads_seen = now
        while len(self.in_flight) < IN_FLIGHT * self.threads and (self.again or self.todo):
            if any(sent.after_death for sent in self.in_flight.values()):
                return  # a file retried after a death runs alone
            if self.again and self.again[0][1]:
                if not self.in_flight:
                    self._submit(*self.again.popleft())
                return
            batch, after_death = self.again.popleft() if self.again else (self._next_batch(), False)
            self._submit(batch, after_death)

    def _completed_within(self, seconds: float) -> bool:
        """Whether a task in flight has completed, waiting up to ``seconds`` for one (a LocalCluster
        of ours: _keep_workers looks at its workers meanwhile); a joined cluster's run waits."""
        if self.local is None:
            return True
        condition = self.completed.thread_condition  # notified as each result is queued
        with condition:
            return self.completed.has_ready() or condition.wait(seconds) or self.completed.has_ready()

    def _keep_workers(self) -> None:
        """A LocalCluster of ours, once a second: a nanny whose worker has been missing
        WORKER_MISSING_SECONDS on end is closed and dropped, and scale starts another; with no
        worker up for NO_WORKER_SECONDS, the files not done fail (see the module docstring)."""
        now = time.monotonic()
        if self.local is None or now - self.workers_looked < 1.0:
            return
        self.workers_looked = now
        try:
            up = {worker.get("name") for worker in self.client.scheduler_info()["workers"].values()}
        except OSError as error:
            raise self._scheduler_lost() from error
        for name in self.local.worker_spec:
            if name in up:
                self.missing.pop(name, None)
            else:
                self.missing.setdefault(name, now)
        gone = [name for name, since in self.missing.items() if now - since >= WORKER_MISSING_SECONDS]
        if gone:
            self.local.sync(self._close_nannies, gone)
            self.missing.update(dict.fromkeys(gone, now))  # the nannies in their place: their own time to start
            self.local.scale(self.workers)  # (their names are still planned: the same names, new nannies)
        if up:
            self.worker_seen = now
        elif now - self.worker_seen >= NO_WORKER_SECONDS:
            self._fail_the_rest(f"not done: the cluster's workers could not be started again (none for "
                                f"{NO_WORKER_SECONDS:.0f} s)")

    async def _close_nannies(self, names: list[Any]) -> None:
        """On the cluster's loop: close and drop the nannies ``names`` (those not dropped yet)."""
        import asyncio

        assert self.local is not None
        nannies = [self.local.workers.pop(name) for name in names if name in self.local.workers]
        # (dropped whatever their close meets: the run goes on with the nannies in their place)
        await asyncio.gather(*(nanny.close() for nanny in nannies), return_exceptions=True)

    def _fail_the_rest(self, why: str) -> None:
        """Fail every file not done, ``why`` in its line: the tasks in flight (cancelled), the retries and the rest."""
        jobs = [job for sent in self.in_flight.values() for job in sent.jobs]
        jobs += [job for batch, _ in self.again for job in batch] + list(self.todo)
        self.client.cancel(list(self.in_flight))
        self.in_flight.clear()
        self.again.clear()
        self.todo.clear()
        for job in sorted(jobs, key=lambda job: job.index):
            self._add(job, job_steps.job_report(self.task, job, status="error", error=f"{job.input}: {why}"))

    def _next_batch(self) -> list[Job]:
        """The next consecutive jobs, about TASK_SECONDS of work at the rate seen so far, and at most
        a share of what is left that lets every worker thread finish together, carrying no more
        than CARRIED_BYTES of their objects' bytes."""
        target = min(self.rate * task_seconds(self.threads), self.left / (IN_FLIGHT * self.threads))
        batch: list[Job] = []
        taken = carried = 0
        while self.todo and len(batch) < MAX_FILES and (not batch or (
                taken < target and carried + len(self.todo[0].data or b"") <= CARRIED_BYTES)):
            job = self.todo.popleft()
            batch.append(job)
            taken += _size(job)
            carried += len(job.data or b"")
        self.left = max(0.0, self.left - taken)
        return batch

    def _submit(self, batch: list[Job], after_death: bool) -> None:
        self.count += 1
        future = self.client.submit(do_files, self.task, [_moved(job) for job in batch], self.stop,
                                    after_death, self.run_id, pure=False, key=f"geomcli-{self.run_id}-{self.count}")
        self.in_flight[future] = _Sent(batch, after_death)
        self.completed.add(future)

    def _finished(self, future: Future[Any], result: Any, sent: _Sent) -> None:
        from distributed import KilledWorker

        if future.status == "finished":
            if future.key in self.died_running:
                # run again by the cluster after its worker died there: the temp files (a pending
                # upload) of the file that worker was on are left, as for a KilledWorker below
                job_steps.remove_leftovers(sent.jobs)
            done, dead = result
            self.task = _not_asking(self.task, dead)  # (the tasks in flight ask them still, as they do)
            self._measure(sent, done)
            for job, (report, passing) in zip(sent.jobs, done):
                tries = self.io_tries.get(job.index, 0)
                if passing and tries < IO_RETRIES and not self.stopping:
                    self.io_tries[job.index] = tries + 1
                    self.again.append(([job], sent.after_death))
                else:
                    self._add(job, _report_as_planned(report, job))
            return
        if future.status == "cancelled" and self.client.status != "running":
            self.in_flight[future] = sent  # its temp files swept as the run ends
            raise self._scheduler_lost()  # its tasks, lost with it, are "cancelled"
        error = result[1] if future.status == "error" else GeomError("cancelled by the cluster")
        if isinstance(error, KilledWorker):
            # what the death left, as seen from here: a retry sweeps again on a worker, but is not
            # sent once the run stops (--fail-fast, Ctrl-C), and after a second death there is none
            job_steps.remove_leftovers(sent.jobs)
            if not sent.after_death:
                self.again.extend(([job], True) for job in sent.jobs)  # each alone: a bad file fails alone
                return
            why = over_memory(self.client, error)
            for job in sent.jobs:
                self._add(job, job_steps.job_report(self.task, job, status="error",
                                                    error=f"{job.input}: the worker process ended while "
                                                          f"doing it (twice{why})"))
            return
        if self.task.common.debug or not isinstance(error, GeomError):
            # a bug on the worker, or a worker that cannot run this geomcli: its traceback once,
            # then a failure for each of the task's files, as for a -j worker that crashed
            import traceback

            echo_stderr("".join(traceback.format_exception(type(error), error, result[2])).rstrip())
        for job in sent.jobs:
            self._add(job, job_steps.job_report(self.task, job, status="error",
                                                error=f"{job.input}: the task failed on the cluster "
                                                      f"({type(error).__name__}: {first_line(error)})"))

    def _scheduler_lost(self) -> GeomError:
        """The run's end when its scheduler went away (killed, or its machine): one line, not a
        failure for each file in flight (their outputs may be placed) and a traceback."""
        address = getattr(self.client.scheduler, "address", None) or "the cluster"
        return GeomError(f"{address}: the Dask scheduler went away mid-run; the files in flight and those not "
                         "sent yet were not done or not reported (outputs placed are whole)")

    def _add(self, job: Job, report: Report) -> None:
        self.outcomes.add(job.index, report)
        if self.fail_fast and report.status == "error" and not self.stopping:
            self.stopping = True
            self._stop_after_their_file()

    def _stop_after_their_file(self) -> None:
        """--fail-fast: send nothing more, and have each task in flight stop before its next file
        and return the reports of those it did, as a -j worker finishes the file it holds (a task
        cancelled instead returns nothing, and the outputs it placed went unreported)."""
        from distributed import Event

        self.todo.clear()
        self.again.clear()
        assert self.stop is not None
        Event(self.stop, client=self.client).set()

    def _measure(self, sent: _Sent, done: list[tuple[Report, bool]]) -> None:
        work = sum(report.seconds or 0.0 for report, _ in done)
        done_bytes = sum(_size(job) for job in sent.jobs[:len(done)])
        if work > 0.05 and done_bytes:  # a shorter task says little of the rate
            seen = done_bytes / work
            self.rate = 0.7 * self.rate + 0.3 * seen if self.rate_seen else seen
            self.rate_seen = True

    def cancel_all(self) -> None:
        """Send nothing more, take the reports of the outputs the tasks in flight placed (see
        :meth:`_take_placed`), and cancel them (they stay in ``in_flight``, whose temp files the
        caller sweeps after an interruption). A joined cluster's are waited for: its workers get no
        signal, and one still on a file made its temp file after the sweep (a '.015.png.*.tmp'
        left, 2 runs in 3 on a loaded machine); a LocalCluster of ours is closed."""
        self.todo.clear()
        self.again.clear()
        self.stopping = True  # (no retry is queued for a report taken now)
        if not self.in_flight:
            return
        try:
            self._take_placed()
        finally:  # (cancelled even where showing their records failed: a stdout gone)
            self._cancel_in_flight()

    def _cancel_in_flight(self) -> None:
        if self.local is None:
            cancel_and_wait(self.client, list(self.in_flight))
            return
        try:
            self.client.cancel(list(self.in_flight))
        except (OSError, RuntimeError):  # the scheduler has gone: nothing runs there to cancel
            pass

    def _take_placed(self) -> None:
        """A stopped run: the reports of the outputs its tasks in flight placed, which a cancelled
        task never returns (it stopped placing as they were taken: _placed_reports), and the
        results of those that ended before, each into ``outcomes``: every output in place has its
        record, as with -j. A worker or scheduler gone takes its reports with it."""
        from concurrent.futures import CancelledError

        by_index = {job.index: job for sent in self.in_flight.values() for job in sent.jobs}
        added: set[int] = set()

        def add(index: int, report: Report) -> None:
            if index in by_index and index not in added:
                added.add(index)
                self._add(by_index[index], _report_as_planned(report, by_index[index]))

        try:
            taken = self.client.run(_placed_reports, self.run_id, on_error="ignore")
        except (OSError, RuntimeError, TimeoutError):  # the scheduler gone: nothing to be had
            return
        ended: set[str] = set()
        for placed, keys in taken.values():
            ended.update(keys)
            for index, report in sorted(placed.items()):
                add(index, report)
        for future, sent in list(self.in_flight.items()):
            if future.key not in ended:
                continue
            try:
                done, _ = future.result(timeout=10)
            except (CancelledError, TimeoutError, OSError):  # lost meanwhile: its reports with it
                continue
            for job, (report, _passing) in zip(sent.jobs, done):
                add(job.index, report)


def _moved(job: Job) -> Job:
    """``job`` as a worker does it: its local paths absolute (scheduler.for_workers)."""
    return dataclasses.replace(job, input=for_workers(job.input), output=for_workers(job.output))


def _as_planned(text: str, job: Job) -> str:
    """A worker's words of ``job`` with its paths as planned here, relative ones too, so that the
    lines and records are those of -j."""
    for path in sorted((job.input, job.output), key=len, reverse=True):
        if for_workers(path) != path:
            text = text.replace(for_workers(path), path)
    return text


def _report_as_planned(report: Report, job: Job) -> Report:
    report.input, report.output = job.input, job.output or None
    if report.error is not None:
        report.error = _as_planned(report.error, job)
    report.notes = [_as_planned(note, job) for note in report.notes]
    report.warnings = [type(warning)(_as_planned(warning, job)) for warning in report.warnings]
    return report


def task_seconds(threads: int) -> float:
    """The seconds of work a task is made of for a cluster of ``threads`` worker threads: about
    TASK_SECONDS, longer where that many threads would each ask for a new task more often than the
    client submits them (TASK_RATE a second).

    >>> task_seconds(2), task_seconds(256)
    (1.0, 2.56)
    """
    return max(TASK_SECONDS, threads / TASK_RATE)


def _size(job: Job) -> int:
    """The input's size in bytes, the measure of a task's work (0 where it cannot be told)."""
    if job.size is not None:
        return job.size
    try:
        return os.stat(job.input).st_size
    except OSError:
        return 0


def passing(report: Report) -> bool:
    """Whether ``report`` failed on an I/O error that may pass (a reset connection, a timeout,
    EIO, S3's 500; botocore's and aiohttp's own: io._remote.passing_failure), which a retry could
    overcome; not a bad file, nor a missing one."""
    from geomcli.io import _remote

    error = cause(report)
    return error is not None and _remote.may_pass(error)


def do_files(task: Task, jobs: Sequence[Job], stop: str | None, sweep: bool = False, run: str | None = None) -> tuple[
        list[tuple[Report, bool]], tuple[str, ...]]:
    """A task, on a worker: each job's report (in order), and whether it failed on an I/O error
    that may pass; and the stores taken for dead (Task.dead_stores, and those its files gave up),
    which the tasks sent after it do not ask. Each output is placed (synced and renamed, or put)
    on a second thread while the next file is made, as a -j worker's committer does, and the
    task returns once the last is placed; a task cancelled meanwhile places nothing more
    (io._atomic.stopped_when), stops at its next file and returns no reports. ``stop``
    (--fail-fast) names the run's Event: the task stops after its first failure, or before its
    next file once the Event is set, and returns the reports of those it did. ``sweep``: a retry
    after a worker died, whose temp files it removes first. ``run`` (the client's run id) keeps
    each placed output's report on the worker until the task returns, for a stopped run to take
    (_placed_reports)."""
    from geomcli.io import _remote

    check_code(task.code)
    # this run's --storage-option, in this thread and its committer's: a worker of several threads
    # runs other runs' tasks beside it, each with its own
    with _remote.task_options(task.common.storage_options), _remote.watching_stores(task.dead_stores):
        return _do_files(task, jobs, stop, sweep, run), _remote.dead_stores()


def _do_files(task: Task, jobs: Sequence[Job], stop: str | None, sweep: bool,
              run: str | None = None) -> list[tuple[Report, bool]]:
    from concurrent.futures import ThreadPoolExecutor

    from geomcli.io import _atomic, _remote

    if sweep:
        job_steps.remove_leftovers(jobs)  # listing each output's folder: only when some may be there
    task_cancelled = _cancellation()

    def cancelled() -> bool:  # (or its run stopped, its reports taken: _placed_reports)
        return task_cancelled() or run in _taken

    done: list[Report] = []
    placing: list[Any] = []  # concurrent.futures.Future of each placing
    with ThreadPoolExecutor(1, thread_name_prefix="geomcli-commit",
                            initializer=_remote.pool_initializer()) as committer, _atomic.stopped_when(cancelled):
        try:
            asked = -STOP_ASKED  # before the first file, then (a round trip to the scheduler) twice a second
            for job in jobs:
                if cancelled():
                    break
                if stop is not None and time.monotonic() - asked >= STOP_ASKED:
                    asked = time.monotonic()
                    if _stopped(stop):
                        break
                with _atomic.deferred_commits() as commits:
                    report = job_steps.transform(task, job)
                done.append(report)
                placing.append(committer.submit(_place, cancelled, report, list(commits), run, job.index))
                if stop is not None and report.status == "error":
                    break
            for placed in placing:
                placed.result()  # a bug in a commit raises here, with its traceback
        except BaseException:
            for placed in placing:
                placed.cancel()
            committer.shutdown(wait=True)
            job_steps.remove_leftovers(jobs[:len(done) + 1])
            with _placing:
                _forget(run, jobs)
            raise
    # returned or not as one step with the client's taking (_placed_reports): a task that returns
    # its reports is named to it, one that does not had them taken
    states = _task_states()
    key = None if states is None else states[1]
    with _placing:
        _forget(run, jobs)  # (kept no longer either way, unless being taken)
        if cancelled():
            return []  # what was placed is whole; the client took the reports (_placed_reports)
        if states is not None:
            _returning.difference_update([known for known in _returning
                                          if getattr(states[0].get(known), "state", None) != "executing"])
            if isinstance(key, str):
                _returning.add(key)
    return [(report, report.status == "error" and passing(report)) for report in done]


def _forget(run: str | None, jobs: Sequence[Job]) -> None:
    """No longer keep the reports of ``jobs`` for ``run`` (_placing held): a worker outlives its
    runs, and a client gone takes none. Those of a run being taken are left for its taking
    (_placed_reports), which waits for the placings with this lock released: a task that ended
    meanwhile dropped them, 1 stop in 12 under load."""
    if run in _taken:
        return
    kept = _placed.get(run or "", {})
    for job in jobs:
        kept.pop(job.index, None)
    if not kept:
        _placed.pop(run or "", None)


def _task_states() -> tuple[Any, Any] | None:
    """This worker's tasks by key, and the key of the task this thread runs; None off a worker."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:
        return None
    return worker.state.tasks, worker.get_current_task()


# On a worker: by run, the reports of the outputs its tasks placed, by job index, kept until the
# task returns them; the runs whose reports the client took as it stopped (their tasks place no
# more); the placings under way, by run, which that taking waits for; the keys of tasks that chose
# to return their reports and may not have yet; and the lock of them all (placings run side by side).
_placed: dict[str, dict[int, Report]] = {}
_taken: set[str] = set()
_busy: dict[str, int] = {}
_returning: set[str] = set()
_placing = threading.Condition()


def _place(cancelled: Callable[[], bool], report: Report, commits: Sequence[Callable[[], None]],
           run: str | None = None, index: int = -1) -> None:
    """On a task's committing thread: job_steps.commit, placing nothing once the task has been
    cancelled (the file in progress when the client cancelled it, whose worker got no signal);
    the report kept for ``run`` (see _placed_reports), unless the commit was refused so. Counted
    busy from before its last look at ``cancelled``, so a taking waits for it to be kept."""
    from geomcli.io import _atomic

    if run is None:
        with _atomic.stopped_when(cancelled):
            job_steps.commit(report, commits)
        return
    with _placing:
        _busy[run] = _busy.get(run, 0) + 1
    try:
        with _atomic.stopped_when(cancelled):
            job_steps.commit(report, commits)
        if not (report.status == "error" and cancelled()):
            with _placing:
                _placed.setdefault(run, {})[index] = report
    finally:
        with _placing:
            _busy[run] -= 1
            if not _busy[run]:
                del _busy[run]
                _placing.notify_all()


async def _placed_reports(run: str, dask_worker: Any = None) -> tuple[dict[int, Report], list[str]]:
    """On each worker (Client.run), as the client stops the run ``run``: the reports its tasks
    in flight kept of the outputs they placed, after which none of them places another (a task
    cancelled returns no reports: its placed outputs went unrecorded, counted not run); and the
    keys of its tasks that had ended, whose results hold the reports of theirs. Async, its wait
    on a thread: Client.run runs a plain function on the worker's event loop, whose heartbeats
    (and a joined cluster's other clients) a wait of TAKE_WAIT there would stall."""
    import asyncio

    prefix = f"geomcli-{run}-"

    def take() -> tuple[dict[int, Report], list[str]]:
        with _placing:
            _taken.add(run)
            # (an upload being placed is waited for no longer than this, and may then land unrecorded)
            _placing.wait_for(lambda: run not in _busy, timeout=TAKE_WAIT)
            return _placed.pop(run, {}), [key for key in _returning if key.startswith(prefix)]

    placed, ended = await asyncio.to_thread(take)
    if dask_worker is not None:
        ended += [key for key, state in list(dask_worker.state.tasks.items())
                  if isinstance(key, str) and key.startswith(prefix) and state.state == "memory"]
    return placed, ended


def _stopped(stop: str) -> bool:
    """Whether the client has set the Event ``stop`` (--fail-fast: a file failed); False off a worker."""
    from distributed import Event, get_worker

    try:
        get_worker()
    except ValueError:  # not on a worker (called in this process)
        return False
    return bool(Event(stop).is_set())


def _cancellation() -> Callable[[], bool]:
    """Whether the task this worker thread runs has been cancelled (Ctrl-C on the client, or the
    client gone), as a check any thread may make (the task's committing thread, or fsspec's for
    an upload): the worker's own record of the task says so, no message needed. Never, off a
    worker (called in this process)."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not on a worker
        return lambda: False
    key = worker.get_current_task()

    def cancelled() -> bool:
        state = worker.state.tasks.get(key) if key is not None else None
        return state is None or state.state in ("cancelled", "released", "forgotten")

    return cancelled
