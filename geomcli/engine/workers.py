"""A run over many files: the plan, then every file in this process or in worker processes, and
the one exit code from every file's outcome (geomcli.engine.report shows them).

Imported only when ``--out-dir`` is given; a one-file ``-o`` run never loads it.

Workers are processes forked from one forkserver that imported the codecs (and numpy, when a
job needs arrays) once; each holds one or two files at a time, and syncs and renames one output
on a second thread while it makes the next. concurrent.futures' process pool cannot give what a
batch promises: a worker that dies fails its own file only (the pool breaks as a whole), and on
Ctrl-C or SIGTERM only complete outputs remain (its workers cannot be told to remove the temp
files of the jobs under way). So workers ignore SIGINT; on Ctrl-C or SIGTERM the parent stops
them with SIGTERM, on which a worker removes the temp files of its jobs under way and exits at
once (an output it is placing placed and reported first); the parent then reads the reports they
sent, so that every output in place has its record, and sweeps the same names again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from geomcli import cpus
from geomcli.constants import EXIT_FAILED
from geomcli.engine import forkserver, summary
from geomcli.engine.jobs import commit, make_folders
from geomcli.engine.jobs import job_report as _report
from geomcli.engine.jobs import remove_leftovers as _remove_leftovers
from geomcli.engine.jobs import transform as _transform
from geomcli.engine.one_file import header_as_read, header_fault
from geomcli.engine.operations import CropPad
from geomcli.engine.plan import (
    Job,
    Listing,
    Task,
    by_headers,
    local_paths,
    option_faults,
    plan,
    planned,
    skip_reason,
    to_do,
)
from geomcli.engine.report import Outcomes, echo_stderr, echo_stdout, summary_if_interrupted
from geomcli.errors import GeomError, PlanError
from geomcli.io import STOP_SIGNALS, _remote, _zarr

if TYPE_CHECKING:
    import multiprocessing.context
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    from geomcli.engine.cluster import Session
    from geomcli.engine.operations import Operation
    from geomcli.engine.options import BatchOptions, Common
    from geomcli.engine.summary import Report
    from geomcli.io import Header

# Without -j, inputs smaller than this in total are done in this process: no worker start-up.
SMALL_BATCH = 8 * 2**20
# What the forkserver imports once for every worker: what a worker's first plain image would
# import (Pillow's Image.open loads its five common plugins); a name that is gone is skipped.
_PRELOAD = ("geomcli.engine.workers", "geomcli.io", "geomcli.io._atomic", "geomcli.io._pillow", "geomcli.io._png",
            "geomcli.engine.summary", "geomcli.ops.window", "PIL.PngImagePlugin", "PIL.BmpImagePlugin",
            "PIL.GifImagePlugin", "PIL.JpegImagePlugin", "PIL.PpmImagePlugin")
# ... and numpy's share, only when some job needs arrays: a crop of plain 8-bit images never does
_PRELOAD_ARRAYS = ("numpy", "geomcli.ops.center_crop_pad", "geomcli.ops.space_depth", "geomcli.engine.layout",
                   "geomcli.engine.slabs")


def run(operation: Operation, common: Common, arguments: Sequence[str], options: BatchOptions) -> int:
    """Plan, check, then transform every input; the exit code (0, or 1 if any file failed). A
    store taken for dead on the way is asked nothing more (io._remote.watching_stores)."""
    with _remote.watching_stores():
        return _planned_run(operation, common, arguments, options)


def _planned_run(operation: Operation, common: Common, arguments: Sequence[str], options: BatchOptions) -> int:
    started = time.perf_counter()
    jobs: Sequence[Job] = ()
    listing = Listing()
    # a signal while the inputs are listed or a cluster starts: the summary _run gives one later,
    # of the inputs found so far (a dry run's summary has no interrupted form)
    interrupted = contextlib.nullcontext() if options.dry_run else \
        summary_if_interrupted(operation.command, common, lambda: len(jobs) or listing.found, started,
                               lambda: listing.finished)
    with contextlib.ExitStack() as session:
        with interrupted:
            scheduler = None
            if options.scheduler is not None:
                from geomcli.engine import cluster

                scheduler = cluster.check(options)  # a usage error before the plan's work: bad syntax, -j too, no Dask
            jobs = plan(arguments, options, common, operation.files_read(), operation.stdin_option() is not None,
                        listing)
            task = Task(operation, common, no_clobber=options.no_clobber)
            if options.dry_run:
                return _dry_run(task, jobs, options)
            todo = to_do(jobs, options)
            on_cluster = None
            if scheduler is not None and todo:
                from geomcli.engine import cluster

                on_cluster = session.enter_context(cluster.session(scheduler, common.debug))
        return _run(task, jobs, todo, options, started, on_cluster)


def all_failed(command: str, common: Common, arguments: Sequence[str], options: BatchOptions, error: str) -> None:
    """--json of a run whose operation could not be made (a --grid or --theta file that cannot be
    read): each input's error record, naming its planned output (an input that failed as it was
    found, its own line), then the summary; nothing is read or written."""
    started = time.perf_counter()
    jobs = plan(arguments, options, common)
    for job in jobs:
        echo_stdout(summary.Report(command, job.input, job.output or None, status="error",
                                   error=job.error or error).to_json())
    echo_stdout(summary.summary_json(command, ok=0, failed=len(jobs), skipped=0, not_run=0, total=len(jobs),
                                     seconds=time.perf_counter() - started, dry_run=options.dry_run))


def _run(task: Task, jobs: Sequence[Job], todo: Sequence[Job], options: BatchOptions, started: float,
         on_cluster: Session | None = None) -> int:
    """:func:`run` once the jobs to do are known: in this process, in workers, or ``on_cluster``."""
    # a signal while the headers are checked or the workers start: Outcomes' summary, nothing done
    with summary_if_interrupted(task.operation.command, task.common, lambda: len(jobs), started):
        workers = 1
        if on_cluster is None:
            workers = _worker_count(task, todo, options)
            if workers > 1:
                # started now, its imports (about 0.2 s) are done on another core while the headers are checked
                _forkserver(arrays=_needs_arrays(task, todo))
                try:
                    forkserver.start()
                except OSError as error:  # no process to be had (ulimit -u: EAGAIN)
                    echo_stderr(f"Warning: no worker process could start ({error.strerror or error}); this process "
                                "does every file")
                    workers = 1
        unread: set[int] = set()  # the jobs whose header the check could not read
        faulted: dict[int, Header] = {}  # the headers of those it found at fault, for their records
        if on_cluster is None or on_cluster.headers_here(todo):
            # an object the check here reads whole goes to its run with its job: read once, not
            # twice (a cluster's tasks carry a few MiB of them each: cluster.CARRIED_BYTES); one whose
            # read stalled, or that it read whole and could not read a header of, has failed, and is
            # not read again (the deadline waited out twice, the damaged object moved twice)
            with _remote.keeping_small_reads(largest=None if on_cluster is None else on_cluster.carried_bytes()):
                faults = option_faults(task, todo, unread, faulted) if on_cluster is None else \
                    on_cluster.option_faults(task, todo, unread, faulted)
                todo = [job if (data := _remote.take_kept(job.input)) is None else dataclasses.replace(job, data=data)
                        for job in todo]  # (a local batch's jobs stay as they are: a million copies cost seconds)
                stalled = {job.index: line for job in todo if (line := _remote.take_failed(job.input)) is not None}
        else:
            faults = on_cluster.option_faults(task, todo, unread, faulted)
            # the small objects the workers read whole for their headers, and the lines of those whose
            # read stalled or whose whole bytes held no readable header, sent back with their check (a
            # dict's look-up a job: take_kept asks each URL's filesystem, 50 us, a million times)
            todo = [job if (data := on_cluster.carried.pop(job.index, None)) is None else
                    dataclasses.replace(job, data=data) for job in todo]
            stalled = on_cluster.stalled
        if stalled and not options.fail_fast:  # (--fail-fast: its run fails it, and the run stops there, in order)
            jobs = [dataclasses.replace(job, error=stalled[job.index]) if job.index in stalled else job for job in jobs]
            todo = [job for job in todo if job.index not in stalled]
        if faults:
            _refused(task, jobs, todo, faults, unread, options, time.perf_counter() - started, faulted)
        if on_cluster is not None:
            on_cluster.connected()  # an unreachable scheduler fails the run before its folder is made
        options = local_paths(options)
        made = None  # the outermost folder this run makes, if any
        subfolders: list[str] = []  # the folders under it the jobs will make, where missing
        try:
            if not _remote.is_url(options.out_dir):  # an object store has no folders to make
                made = _first_missing(options.out_dir)
                subfolders = _missing_folders(todo)
                make_folders(options.out_dir)
        except OSError as error:
            why = error.strerror or str(error)
            if os.path.islink(options.out_dir) and not os.path.exists(options.out_dir):
                why = f"a broken symbolic link to {os.readlink(options.out_dir)}"
            line = f"{options.out_dir}: cannot make the folder ({why})"
            if task.common.json:
                _unmade_out_dir(task, jobs, todo, options, line, time.perf_counter() - started)
            raise GeomError(line) from error
        doing = {job.index for job in todo}
        operation = task.operation
        general = frozenset(operation.unused_options())
    with Outcomes(operation.command, task.common, len(jobs), of_the_options=general, started=started) as outcomes, \
            _unmade_unless_written(made, outcomes), _unmade_if_empty(subfolders):
        for job in jobs:
            if job.error is not None:
                outcomes.add(job.index, _report(task, job, status="error", error=job.error))
            elif job.index not in doing:
                reason = skip_reason(job, options)
                outcomes.add(job.index, _report(task, job, status="skipped", notes=[reason] if reason else []))
        if on_cluster is not None:
            on_cluster.run_jobs(_one_thread(task), todo, outcomes, options.fail_fast)
        elif workers > 1:
            _in_workers(_one_thread(task), todo, workers, outcomes, options.fail_fast)
        else:
            _in_process(task, todo, outcomes, options.fail_fast)
    return outcomes.finish(time.perf_counter() - started)


def _unmade_out_dir(task: Task, jobs: Sequence[Job], todo: Sequence[Job], options: BatchOptions, line: str,
                    seconds: float) -> None:
    """--json of a run whose --out-dir cannot be made: each input's record, failed with ``line``
    (or its own failure, or its skip), then the summary."""
    doing = {job.index for job in todo}
    counts = {"ok": 0, "error": 0, "skipped": 0}
    for job in jobs:
        if job.error is None and job.index not in doing:
            reason = skip_reason(job, options)
            report = _report(task, job, status="skipped", notes=[reason] if reason else [])
        else:
            report = _report(task, job, status="error", error=job.error or line)
        counts[report.status] += 1
        echo_stdout(report.to_json())
    echo_stdout(summary.summary_json(task.operation.command, ok=0, failed=counts["error"], skipped=counts["skipped"],
                                     not_run=0, total=len(jobs), seconds=seconds))


def _first_missing(folder: str) -> str | None:
    """The outermost folder of ``folder``'s path that is not there yet; None where it is."""
    missing, path = None, os.path.abspath(folder)
    while not os.path.lexists(path):
        missing, path = path, os.path.dirname(path)
    return missing


def _missing_folders(todo: Sequence[Job]) -> list[str]:
    """The folders the outputs of ``todo`` go in that are not there yet, with their missing
    parents, deepest first."""
    missing: set[str] = set()
    for folder in {os.path.dirname(os.path.abspath(job.output)) for job in todo}:
        while folder not in missing and not os.path.lexists(folder):
            missing.add(folder)
            folder = os.path.dirname(folder)
    return sorted(missing, key=len, reverse=True)  # a folder's path is longer than its parent's


@contextlib.contextmanager
def _unmade_if_empty(folders: Sequence[str]) -> Iterator[None]:
    """Remove those of ``folders`` (made by this run's jobs, deepest first) that are empty at its
    end: a -r batch in which every file of a subfolder failed left that subfolder empty in
    --out-dir, for nothing."""
    try:
        yield
    finally:
        for folder in folders:
            with contextlib.suppress(OSError):  # not empty (a file written there), or never made
                os.rmdir(folder)


@contextlib.contextmanager
def _unmade_unless_written(made: str | None, outcomes: Outcomes) -> Iterator[None]:
    """Remove the folders the run made (``made`` and the empty folders in it) where it wrote no
    file: a run whose every input failed left an empty --out-dir, which make then took for an
    up-to-date target."""
    try:
        yield
    finally:
        if made is not None and not outcomes.counts["ok"]:
            for folder, _, _ in os.walk(made, topdown=False):
                with contextlib.suppress(OSError):  # not empty: another writer's files are kept
                    os.rmdir(folder)


def _refused(task: Task, jobs: Sequence[Job], todo: Sequence[Job], faults: Sequence[tuple[Job, str]],
             unread: set[int], options: BatchOptions, seconds: float, headers: dict[int, Header]) -> None:
    """A run its inputs' headers refuse: each fault's error line (and, with --json, its record,
    with what the header told as --dry-run's has it), and those of the inputs whose failure is
    known already (a broken link, a header that cannot be read, ``unread`` by the check: their
    own, as --dry-run gives them), in input order; then the summary's, every other file not run,
    and the usage error (exit 2). The headers that read well are not read again (a batch on a
    cluster read every one in this process after its workers had checked them), nor those of the
    faults: a record is made from ``headers``, the check's, by job index."""
    faulted = {job.index: line for job, line in faults}
    doing = {job.index for job in todo}

    def failure(job: Job) -> Report | None:
        if job.index in faulted:
            record = planned(task, job, options, headers.get(job.index)) if task.common.json else _report(task, job)
            record.status, record.error, record.seconds = "error", faulted[job.index], None
            return record
        if job.error is not None:
            return _report(task, job, status="error", error=job.error)
        if job.index in doing and job.index in unread:
            record = planned(task, job, options)  # the read's failure, as --dry-run says it
            record.seconds = None
            return record if record.status == "error" else None
        return None

    failed = 0
    for record in by_headers(failure, jobs):
        if record is None:
            continue
        failed += 1
        echo_stderr(f"Error: {record.error}")
        if task.common.json:
            echo_stdout(record.to_json())
    if task.common.json:
        echo_stdout(summary.summary_json(task.operation.command, ok=0, failed=failed, skipped=0,
                                         not_run=len(jobs) - failed, total=len(jobs), seconds=seconds))
    raise PlanError(f"{len(faults)} of {len(jobs)} inputs cannot take these options (each named above); "
                    "nothing was written")


def _worker_count(task: Task, todo: Sequence[Job], options: BatchOptions) -> int:
    """How many worker processes do ``todo``: 1 is this process alone."""
    if task.common.debug:
        return 1  # an error raises, with its traceback, from this process
    if options.jobs is None and _smaller_than(todo, SMALL_BATCH):
        return 1  # starting workers costs about what 8 MB of images take to do
    count = min(options.jobs or cpus.available_cpus(), len(todo))
    return _workers_allowed(count) if count > 1 else count


def _one_thread(task: Task) -> Task:
    """The task for workers that share the cores: one kernel thread each, unless --threads says."""
    if task.common.threads is not None:
        return task
    return dataclasses.replace(task, common=dataclasses.replace(task.common, threads=1))


def _dry_run(task: Task, jobs: Sequence[Job], options: BatchOptions) -> int:
    """Each input -> output with the output's shape, from headers only; nothing is written. An
    input that cannot take the options makes it a usage fault (exit 2), as it makes the run."""
    started = time.perf_counter()
    doing = {job.index for job in to_do(jobs, options)}

    def judged(job: Job) -> tuple[bool, Report]:
        """Whether ``job`` cannot take the options (as option_faults finds it), and its report:
        from one read of its header (two cost 35% of a dry run of 20,000 PNGs)."""
        with _zarr.shared_opens(), _remote.shared_reads():
            header = header_as_read(job.input, task.common) if job.index in doing else None
            fault = None if header is None else header_fault(task.operation, task.common, header, job.input,
                                                             job.output, job.format)
            return fault is not None, planned(task, job, options, header)

    faults = 0
    counts = {"ok": 0, "error": 0, "skipped": 0}
    general = frozenset(task.operation.unused_options())
    warned: set[str] = set()
    for job, (refused, report) in zip(jobs, by_headers(judged, jobs)):
        faults += refused
        counts[report.status] += 1
        if report.status == "error":
            echo_stderr(f"Error: {report.error}")
        for warning in [] if task.common.quiet or task.common.json else report.warnings:
            if warning not in warned:  # once a run, as the run says it
                warned.add(warning)
                whose = task.operation.command if warning in general else summary.about(report, warning)
                echo_stderr(f"Warning: {whose}: {warning}")
        if task.common.json:
            echo_stdout(report.to_json())
        elif report.status != "error":
            skip = f" (skip: {report.notes[-1]})" if report.status == "skipped" else ""
            echo_stdout(f"{job.input} → {job.output}: {summary.shape_text(report.output_shape)} "
                        f"{report.output_dtype}{skip}")
    command = task.operation.command
    if task.common.json:
        echo_stdout(summary.summary_json(command, ok=counts["ok"], failed=counts["error"], skipped=counts["skipped"],
                                         not_run=0, total=len(jobs), seconds=time.perf_counter() - started,
                                         dry_run=True))
    elif not task.common.quiet:
        echo_stderr(f"{command}: dry run, {counts['ok']} to write, {counts['error']} failed, "
                    f"{counts['skipped']} skipped")
    if faults:
        raise PlanError(f"{faults} of {len(jobs)} inputs cannot take these options (each named above); "
                        "nothing was written")
    return EXIT_FAILED if counts["error"] else 0


def _in_process(task: Task, todo: Sequence[Job], outcomes: Outcomes, fail_fast: bool) -> None:
    for job in todo:
        report = _in_this_process(task, job, outcomes)
        if fail_fast and report.status == "error":
            return


# Seconds between checks for a signal while waiting on a pipe. Python runs signal handlers in the
# main thread only, and a signal the kernel hands to another thread (numpy's, the kernels' pool)
# does not interrupt the main thread's wait: without a timeout it would sleep through SIGTERM.
_TICK = 0.2


@dataclass
class _Worker:
    process: BaseProcess
    connection: Connection
    under_way: Any  # a shared int: the index of the job the worker began last (-1: none yet)
    ready: bool = False
    jobs: deque[Job] = field(default_factory=deque)  # sent and not answered yet, in order


def _in_workers(task: Task, todo: Sequence[Job], count: int, outcomes: Outcomes, fail_fast: bool) -> None:
    """Hand the jobs to ``count`` worker processes until done or stopped.

    The workers are started from a thread: the forkserver's imports take about 0.2 s, and this
    process does jobs itself meanwhile, on the core that would otherwise wait. Each worker is
    given its first job as it starts, so it does not wait for this process to finish its own.
    While many jobs remain, a worker holds a second one, so it starts it without waiting for
    this process to read its report (not with --fail-fast: nothing starts after a failure is seen).
    """
    from multiprocessing.connection import wait

    from geomcli import io

    context = _forkserver(arrays=_needs_arrays(task, todo))
    pending = deque(todo)
    workers: list[_Worker] = []
    lock = threading.Lock()  # pending, workers and their jobs: the starter thread adds workers
    wake, woken = context.Pipe(duplex=False)  # the starter's "a new worker", so the wait below ends
    failed: list[BaseException] = []
    unstarted: list[Exception] = []  # why a worker could not start: its jobs go to the others
    workers_started: list[_Worker] = []
    stopping = False
    finished = False

    def hand_out(worker: _Worker) -> None:
        """Send ``worker`` its next job or two (the lock held)."""
        while not stopping and _takes_another(len(worker.jobs), len(pending), count, fail_fast):
            job = pending.popleft()
            worker.jobs.append(job)  # before it is sent: an interrupted send still has its temp file swept
            try:
                worker.connection.send(job)  # read after the worker's "ready"
            except OSError:  # it has ended: the wait below reads its end
                worker.jobs.pop()
                pending.appendleft(job)
                return

    def start_all() -> None:
        try:
            for _ in range(count):
                with lock:
                    if stopping or not pending:
                        return
                parent_end, child_end = context.Pipe()
                under_way = context.Value("q", -1, lock=False)
                process = context.Process(target=_serve, args=(child_end, task, under_way), daemon=True,
                                          name="geomcli-worker")
                process.start()  # waits for the forkserver's imports, the first time
                child_end.close()
                worker = _Worker(process, parent_end, under_way)
                workers_started.append(worker)
                with lock:
                    hand_out(worker)
                    workers.append(worker)
                woken.send_bytes(b"")
        except OSError as error:  # no more processes (EAGAIN, ENOMEM): the rest do the jobs
            unstarted.append(error)
            woken.send_bytes(b"")
        except EOFError:  # as above, met by the forkserver, which ended (with a traceback of its own)
            unstarted.append(RuntimeError("the forkserver ended"))
            woken.send_bytes(b"")
        except BaseException as error:  # handed to the main thread, which raises it
            failed.append(error)
            woken.send_bytes(b"")

    def done(job: Job, report: Report) -> None:
        nonlocal stopping
        outcomes.add(job.index, report)
        with lock:
            stopping = stopping or (fail_fast and report.status == "error")

    starter = threading.Thread(target=start_all, name="geomcli-starter", daemon=True)
    try:
        starter.start()
    except RuntimeError as error:  # no thread to be had (ulimit -u): no worker starts, the loop does every job
        unstarted.append(error)
    try:
        while True:
            with lock:
                if failed:
                    raise failed[0]
                for worker in workers:
                    hand_out(worker)
                if not any(worker.jobs for worker in workers) and (stopping or not pending):
                    break  # the starter hands out no job now: none is pending, or we are stopping
                job = None
                if pending and not stopping and not workers:
                    # none started yet (or all ended): the next job is done here. Not while a
                    # started one imports: that takes milliseconds, forked from the forkserver.
                    job = pending.popleft()
                by_connection = {worker.connection: worker for worker in workers}  # an idle one may end too
            if job is not None:
                report = _in_this_process(task, job, outcomes)
                with lock:
                    stopping = stopping or (fail_fast and report.status == "error")
            for connection in wait([wake, *by_connection], timeout=0 if job is not None else _TICK):
                if connection is wake:
                    while wake.poll():
                        wake.recv_bytes()
                    continue
                worker = by_connection[connection]  # type: ignore[index]
                # a report taken off its pipe is counted and shown before a signal's exception: its
                # output is in place, and the interrupted summary must count it; a worker's end read
                # meanwhile is handled inside too, or the signal noted would be lost with its EOFError
                with io.signals_deferred():
                    try:
                        message = worker.connection.recv()
                        if not isinstance(message, str):
                            with lock:
                                finished_job = worker.jobs.popleft()
                            done(finished_job, message)
                    except (EOFError, ConnectionResetError):  # it has ended
                        with lock:
                            workers.remove(worker)
                            # the job it was on failed with it (a crash is never tried again); the
                            # others it had not answered (not begun, or finished and not yet synced)
                            # go to another process, their temp files first
                            crashed = [job for job in worker.jobs if job.index == worker.under_way.value]
                            others = [job for job in worker.jobs if job.index != worker.under_way.value]
                            _remove_leftovers(others)
                            pending.extendleft(reversed(others))
                            worker.jobs.clear()
                        for job in crashed:
                            done(job, _died(task, worker, job))
                        continue
                if message == "ready":
                    worker.ready = True
        finished = True
    finally:
        with lock:
            stopping = True  # the starter starts no more workers
        _stop(starter, workers, finished, done)
        wake.close()
        woken.close()
    if failed:  # even if this process did every job meanwhile
        raise failed[0]
    if unstarted:
        why = getattr(unstarted[0], "strerror", None) or unstarted[0]
        echo_stderr(f"Warning: only {len(workers_started)} of {count} worker processes could start ({why}); the "
                    "others took their files" if workers_started else
                    f"Warning: no worker process could start ({why}); this process did every file")


# The descriptors a run with workers needs besides those open when it begins: the forkserver's,
# the resource tracker's and the wake pipes, the shared memory, a file done here while workers
# start (16); and for each worker its pipe, its sentinel and the forkserver's end of it, with a
# share of those a start holds for a moment (4). The forkserver, under the same limit, needs fewer.
_DESCRIPTORS_FIXED, _DESCRIPTORS_PER_WORKER = 16, 4


def _workers_allowed(count: int) -> int:
    """How many of ``count`` worker processes the open-file limit (ulimit -n) has room for; 1,
    this process doing every file, for fewer than two. Past the limit a start fails, with a
    traceback from multiprocessing's forkserver that no handler of ours can catch, and a file
    opened here meanwhile fails too. A warning says when there are fewer."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit == resource.RLIM_INFINITY:
        return count
    room = (limit - _descriptors_open() - _DESCRIPTORS_FIXED) // _DESCRIPTORS_PER_WORKER
    if room >= count:
        return count
    if room < 2:
        echo_stderr(f"Warning: the open-file limit (ulimit -n {limit}) leaves no room for worker "
                               "processes; this process does every file")
        return 1
    echo_stderr(f"Warning: the open-file limit (ulimit -n {limit}) leaves room for {room} of {count} "
                           "worker processes")
    return room


def _descriptors_open() -> int:
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(listing)) - 1  # less the one that lists them
        except OSError:
            pass
    return 3  # the standard streams


def _takes_another(held: int, pending: int, count: int, fail_fast: bool) -> bool:
    """Whether a worker holding ``held`` jobs is sent one more of the ``pending``: a first one, and
    a second while every worker can have one (so the last jobs go to whichever worker is free
    first); never a second with --fail-fast.

    >>> [_takes_another(held, 5, 2, False) for held in (0, 1, 2)], _takes_another(1, 1, 2, False)
    ([True, True, False], False)
    """
    return pending > 0 and (held == 0 or (held == 1 and not fail_fast and pending >= count))


def _forkserver(arrays: bool = True) -> multiprocessing.context.ForkServerContext:
    """The context that starts workers: forkserver, whose workers fork from one clean process that
    imported the codecs (and numpy, for ``arrays``) once. Not fork: this process may hold threads
    (numpy's, the kernels' pool) a forked child would lack."""
    import multiprocessing

    # What the starter thread's first Process.start imports, imported here in the main thread:
    # a signal that lands while the main thread imports (it does files meanwhile, and imports
    # lazily) can leave Python's import lock held (CPython raises the signal's exception between
    # taking the lock and the try that releases it), and the starter then waited on it forever,
    # and the stop waited on the starter (a SIGTERM'd batch that never ended, seen in CI)
    import multiprocessing.connection
    import multiprocessing.forkserver
    import multiprocessing.popen_fork
    import multiprocessing.popen_forkserver
    import multiprocessing.reduction
    import multiprocessing.resource_tracker
    import multiprocessing.spawn  # noqa: F401

    forkserver.set_preload(_PRELOAD + (_PRELOAD_ARRAYS if arrays else ()))
    return multiprocessing.get_context("forkserver")


def _needs_arrays(task: Task, jobs: Sequence[Job]) -> bool:
    """Whether some job will need numpy: all but a crop-pad of images to images (io.read_picture),
    as far as the names tell (a 16-bit PNG, read as an array, imports numpy when it comes)."""
    from geomcli import io

    if not isinstance(task.operation, CropPad):
        return True
    for job in jobs:
        try:
            image = io.format_for_path(job.input) in io.IMAGE_FORMATS
        except GeomError:
            return True  # no extension geomcli knows: sniffed at read time
        if not image or not task.operation.takes_pictures(task.common, job.format):
            return True
    return False


def _in_this_process(task: Task, job: Job, outcomes: Outcomes) -> Report:
    """Do ``job`` here and add its report to ``outcomes``. A local output's rename and its report
    are one step, a stop signal held until both are done: one that came between the two left an
    interrupted run's output in place with no record, counted not run. (An object's put is not
    held so: a signal must still stop a long upload at once; nor is --debug's, whose failure to
    place an output raises, with its traceback.)"""
    from geomcli import io
    from geomcli.io import _atomic

    try:
        if _remote.is_url(job.output) or task.common.debug:
            report = _transform(task, job)
            outcomes.add(job.index, report)
            return report
        with _atomic.deferred_commits() as commits:
            report = _transform(task, job)
        with io.signals_deferred():
            commit(report, commits)
            outcomes.add(job.index, report)
        return report
    except BaseException:
        _remove_leftovers([job])
        raise


def _died(task: Task, worker: _Worker, job: Job) -> Report:
    """The report of a job whose worker ended without answering (a crash shows its traceback)."""
    worker.process.join()
    _remove_leftovers([job])
    return _report(task, job, status="error",
                   error=f"{job.input}: the worker process ended ({_how_it_ended(worker.process)})")


def _how_it_ended(process: BaseProcess) -> str:
    """How a worker process ended, as a user can act on it: the signal (the OOM killer's SIGKILL
    named as such) or the exit code.

    >>> from types import SimpleNamespace
    >>> [_how_it_ended(SimpleNamespace(exitcode=code)) for code in (3, -11, -99)]  # type: ignore[arg-type]
    ['exit code 3', 'killed by SIGSEGV', 'killed by signal 99']
    """
    code = process.exitcode
    if code is None or code >= 0:
        return f"exit code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"killed by signal {-code}"
    if name == "SIGKILL":
        return "killed by SIGKILL, as the kernel's out-of-memory killer does"
    return f"killed by {name}"


def _stop(starter: threading.Thread, workers: Sequence[_Worker], finished: bool,
          done: Callable[[Job, Report], None]) -> None:
    """Let idle workers go; after an interruption, stop busy ones, take the reports they sent
    before they ended (``done`` with each: their outputs are in place) and clear their temp files.

    The starter thread is waited for first: it may be starting one more worker.
    """
    if finished:
        if starter.ident is not None:  # (never started: no thread was to be had)
            starter.join()
        for worker in workers:
            if not worker.ready:
                worker.process.terminate()  # still importing, holding no job: no need to wait
                continue
            try:
                worker.connection.send(None)
            except OSError:
                pass
        for worker in workers:
            worker.process.join()
        return
    # A second Ctrl-C or SIGTERM must not cut this cleanup short.
    previous = {number: signal.signal(number, signal.SIG_IGN) for number in STOP_SIGNALS}
    try:
        # bounded: a starter that cannot go on (see _forkserver) holds no worker yet, and is a daemon
        if starter.ident is not None:
            starter.join(timeout=10)
        for worker in workers:
            if worker.process.is_alive():
                worker.process.terminate()  # SIGTERM: see _terminated
        for worker in workers:
            worker.process.join(timeout=10)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
        # the reports they sent, read to each pipe's end: a worker's closes only as it ends, where
        # join returns at once once the forkserver has died (a SIGTERM to the process group), the
        # worker still placing an output; then the temp files of the jobs not reported, then the
        # reports shown (a stdout gone cannot skip the sweep)
        until = time.monotonic() + 10
        reported = [left for worker in workers for left in _reports_left(worker, until)]
        _remove_leftovers([job for worker in workers for job in worker.jobs])
        for job, report in reported:
            done(job, report)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _reports_left(worker: _Worker, until: float) -> Iterator[tuple[Job, Report]]:
    """The reports a stopped ``worker`` sent that were not read, with their jobs, up to its pipe's
    end (or the time ``until``): a worker places an output and sends its report as one step
    (_Committer), so each tells of an output in place."""
    while worker.jobs:
        try:
            if not worker.connection.poll(max(0.0, until - time.monotonic())):
                return
            message = worker.connection.recv()
        except (EOFError, OSError):  # its end (a message cut short by a SIGKILL reads as its end)
            return
        if not isinstance(message, str):  # (not its "ready")
            yield worker.jobs.popleft(), message


def _serve(connection: Connection, task: Task, under_way: Any) -> None:
    """A worker: take jobs until told to stop; SIGTERM ends it without a temp file (_terminated).
    ``under_way`` tells the parent which job it began last, should it die on it."""
    for number in (signal.SIGINT, signal.SIGHUP):  # Ctrl-C and a hang-up are the parent's to handle
        signal.signal(number, signal.SIG_IGN)
    for number in (signal.SIGTERM, signal.SIGXCPU):  # SIGXCPU: its own soft CPU time limit (ulimit -St) reached
        signal.signal(number, _terminated)
    # held by a forkserver a LocalCluster started in this process before (forkserver.start), whose
    # mask its workers inherit: the parent's terminate did nothing (a join of 10 s, or for ever)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGXCPU})
    # the imports every file needs, at once (a no-op where the forkserver preloaded them)
    from geomcli import io  # noqa: F401

    with _remote.watching_stores():  # (its committer's puts too: the thread starts in this context)
        _serve_jobs(connection, task, under_way)


def _serve_jobs(connection: Connection, task: Task, under_way: Any) -> None:
    from geomcli.io import _atomic

    try:
        committer = _Committer(connection, under_way)
    except RuntimeError:  # no thread to be had (ulimit -u): ended before "ready", its jobs are done elsewhere
        return
    try:
        try:
            connection.send("ready")
        except OSError:  # the parent has gone already
            return
        while (job := _next_job(connection)) is not None:
            _jobs_under_way.append(job)
            under_way.value = job.index
            with _atomic.deferred_commits() as commits:
                report = _transform(task, job)
            committer.put(job, report, commits)
    finally:
        committer.close()  # every report sent (or, the parent gone, every temp file removed)


def _next_job(connection: Connection) -> Job | None:
    """The parent's next job; None when it says stop, or has gone: ended (EOF), or killed with a
    message of ours unread (ECONNRESET), which printed a traceback from every worker."""
    try:
        while not connection.poll(_TICK):
            pass  # see _TICK
        job: Job | None = connection.recv()
    except (EOFError, ConnectionResetError):
        return None
    return job


class _Committer:
    """A worker's thread that syncs and renames each output (io._atomic.deferred_commits) while
    the worker reads its next file, then sends the job's report: in job order, and only once the
    output is in place. fsync waits on the disk, about 1.4 ms a file here: no core idles for it."""

    def __init__(self, connection: Connection, under_way: Any) -> None:
        import contextvars
        import queue
        import threading

        self.connection, self.under_way = connection, under_way
        self.orphaned = False  # the parent has gone: outputs are no longer placed, their temps removed
        self.queue: queue.SimpleQueue[tuple[Job, Report, list[Callable[[], None]]] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=contextvars.copy_context().run, args=(self._run,),
                                       name="geomcli-committer", daemon=True)
        self.thread.start()

    def put(self, job: Job, report: Report, commits: list[Callable[[], None]]) -> None:
        self.queue.put((job, report, commits))

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()

    def _run(self) -> None:
        job = None
        try:
            while (item := self.queue.get()) is not None:
                job, report, commits = item
                with _placing:  # (see _terminated)
                    if self.orphaned:
                        _remove_leftovers([job])
                    else:
                        self._commit(report, commits)
                    _jobs_under_way.remove(job)
                    if not self.orphaned:
                        try:
                            self.connection.send(report)
                        except OSError:  # the parent has gone: no later output is placed
                            self.orphaned = True
        except BaseException:  # a bug: end the worker as a crash on this job, not silently
            import traceback

            traceback.print_exc()
            if job is not None:
                self.under_way.value = job.index
            _ending()
            os._exit(1)

    _commit = staticmethod(commit)


# in a worker: the jobs whose temp files may exist (one being made, one being synced)
_jobs_under_way: list[Job] = []
# in a worker: held by its committer while it places an output and sends its report, so that a
# SIGTERM ends the worker before or after both, never between (an output in place that its
# parent never heard of); waited for no longer than this many seconds (the parent kills at 10)
_placing = threading.Lock()
_PLACING_SECONDS = 5.0


def _terminated(signum: int, frame: Any) -> None:
    """A worker's SIGTERM (or SIGXCPU): remove the temp files of the jobs under way and end at once.

    Not SystemExit: raised at an arbitrary point of a job (inside an import, say), it has been seen
    to vanish, leaving the worker running.
    """
    try:
        _remote.stop_uploads()  # first: an upload being placed ends now, reported as failed
        _placing.acquire(timeout=_PLACING_SECONDS)
        _ending()
    finally:
        # even where the clean-up fails: a SIGTERM that came while the first job imported s3fs
        # found it half made (AttributeError), a traceback on the user's terminal and an exit 1
        os._exit(128 + signum)  # as the shell tells a signal's end: 143, or 152 for SIGXCPU


def _ending() -> None:
    """A worker about to end at once: its uploads under way aborted (io._remote.stop_uploads, for
    this process alone: a Dask worker's other tasks go on), then its jobs' temp files removed."""
    _remote.stop_uploads()
    _remove_leftovers(list(_jobs_under_way))


def _smaller_than(jobs: Sequence[Job], limit: int) -> bool:
    total = 0
    for job in jobs:
        try:
            total += job.size if job.size is not None else os.stat(job.input).st_size  # a URL's from its listing
        except OSError:
            pass
        if total >= limit:
            return False
    return True
