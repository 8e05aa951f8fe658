"""Many files in one run: inputs from folders and globs, output names from a template, worker
processes, a progress bar, and one exit code from every file's outcome.

Imported only when ``--out-dir`` is given; a one-file ``-o`` run never loads it. The plan (every
input and its output) is made and checked before anything is written: a name that two inputs
share, or that leaves ``--out-dir``, is a usage error (exit 2) with no file touched.

Workers are processes forked from one forkserver that imported the codecs (and numpy, when a
job needs arrays) once; each holds one or two files at a time, and syncs and renames one output
on a second thread while it makes the next. They ignore SIGINT: on Ctrl-C or SIGTERM the parent
stops them with SIGTERM, on which a worker removes the temp files of its jobs under way and exits
at once; the parent then sweeps the same names again, so only complete outputs remain.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import signal
import string
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from geomcli import cpus, summary
from geomcli import transform as transforms
from geomcli.constants import EXIT_FAILED, EXIT_TERMINATED
from geomcli.errors import GeomError

if TYPE_CHECKING:
    import multiprocessing.context
    import threading
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    from rich.progress import Progress
    from rich.progress import Task as ProgressTask

    from geomcli.cli import BatchOptions, Common
    from geomcli.io import Header
    from geomcli.summary import Report
    from geomcli.transform import Operation

FIELDS = ("stem", "suffix", "name", "parent", "index")
# Without -j, inputs smaller than this in total are done in this process: no worker start-up.
SMALL_BATCH = 8 * 2**20
_GLOB_MAGIC = re.compile(r"[*?[]")
NAME_MAX = 255  # bytes in one file name, on Linux's file systems
# What the forkserver imports once for every worker: what a worker's first plain image would
# import (Pillow's Image.open loads its five common plugins); a name that is gone is skipped.
_PRELOAD = ("geomcli.batch", "geomcli.io", "geomcli.io._atomic", "geomcli.io._pillow", "geomcli.io._png",
            "geomcli.summary", "geomcli.window", "PIL.PngImagePlugin", "PIL.BmpImagePlugin", "PIL.GifImagePlugin",
            "PIL.JpegImagePlugin", "PIL.PpmImagePlugin")
# ... and numpy's share, only when some job needs arrays: a crop of plain 8-bit images never does
_PRELOAD_ARRAYS = ("numpy", "geomcli.kernels", "geomcli.layout", "geomcli.slabs")


@dataclass(frozen=True)
class Task:
    """What is done to every file of a run; picklable, so each worker receives it once."""

    command: str
    parameters: dict[str, Any]
    operate: Operation
    shape_of: Callable[[Header], tuple[int, ...]]
    common: Common
    no_clobber: bool = False  # -n: no output replaces a file, even one made during the run


@dataclass(frozen=True)
class Source:
    """An input file and its folder relative to the folder or glob that found it ("" at the top);
    or, with ``error``, a folder that could not be listed: one failure of the run."""

    path: str
    parent: str
    error: str | None = None


@dataclass(frozen=True)
class Job:
    index: int
    input: str
    output: str
    format: str
    error: str | None = None  # the input was never found: a folder that could not be listed


def run(task: Task, arguments: Sequence[str], options: BatchOptions) -> int:
    """Plan, check, then transform every input; the exit code (0, or 1 if any file failed)."""
    started = time.perf_counter()
    assert options.out_dir is not None
    jobs = plan(arguments, options, task.common)
    task = dataclasses.replace(task, no_clobber=options.no_clobber)
    if options.dry_run:
        return _dry_run(task, jobs, options)
    try:
        os.makedirs(options.out_dir, exist_ok=True)
    except OSError as error:
        raise click.ClickException(f"{options.out_dir}: cannot make the folder ({error.strerror or error})") from error
    todo = []
    with _Outcomes(task, len(jobs)) as outcomes:
        for job in jobs:
            reason = _skip_reason(job, options)
            if job.error is not None:
                outcomes.add(job.index, _report(task, job, status="error", error=job.error))
            elif reason is None:
                todo.append(job)
            else:
                outcomes.add(job.index, _report(task, job, status="skipped", notes=[reason]))
        workers = min(options.jobs or cpus.available_cpus(), len(todo))
        if options.jobs is None and _smaller_than(todo, SMALL_BATCH):
            workers = 1  # starting workers costs about what 8 MB of images take to do
        if task.common.debug:
            workers = 1  # an error raises, with its traceback, from this process
        elif workers > 1:
            workers = _workers_allowed(workers)
        if workers > 1:
            if task.common.threads is None:  # the workers share the cores: one kernel thread each
                task = dataclasses.replace(task, common=task.common._replace(threads=1))
            _in_workers(task, todo, workers, outcomes, options.fail_fast)
        else:
            _in_process(task, todo, outcomes, options.fail_fast)
    return outcomes.finish(time.perf_counter() - started)


# ---- the plan: inputs, names, collisions ------------------------------------------------------


def plan(arguments: Sequence[str], options: BatchOptions, common: Common) -> list[Job]:
    """Every input with its output path and format; usage errors for names that cannot work."""
    from geomcli import io

    assert options.out_dir is not None
    if not options.out_dir or (os.path.exists(options.out_dir) and not os.path.isdir(options.out_dir)):
        raise click.BadParameter(f"{options.out_dir!r} is not a folder", param_hint="'--out-dir'")
    fields = check_template(options.name)
    sources = expand(arguments, options.recursive)
    # An input is its name, the file read through its links, and that file's device and inode (a
    # hard link): an output landing on any of them would destroy an input, its own included.
    inputs: dict[str | tuple[int, int], str] = {}
    for source in sources:
        if source.error is None:
            inputs.setdefault(_landing(source.path), source.path)
            inputs.setdefault(_real(source.path), source.path)
            identity = _identity(source.path)
            if identity is not None:
                inputs.setdefault(identity, source.path)
    writers: dict[str, str] = {}
    jobs = []
    for index, source in enumerate(sources):
        if source.error is not None:
            jobs.append(Job(index, source.path, "", "", source.error))
            continue
        parts = render(options.name, source, index)
        if "parent" not in fields and source.parent:
            parts = source.parent.split(os.sep) + parts
        output = os.path.join(options.out_dir, *parts)
        key = _landing(output)
        if key in writers:
            raise click.UsageError(f"{writers[key]} and {source.path} would both be written to {output}; "
                                   "put {parent} or {index} in --name")
        replaced = inputs.get(key) or inputs.get(_identity(output) or key)
        if replaced is not None:
            raise click.UsageError(f"{output} would replace the input {replaced}; a batch never writes over "
                                   "its inputs: choose another --out-dir or --name")
        if io.is_stream(output):  # in a folder of files, a planted FIFO would hang the run
            raise click.UsageError(f"{output} is a device, FIFO or socket, or a link to one; "
                                   "--out-dir writes files only: remove it or choose another --name")
        writers[key] = source.path
        jobs.append(Job(index, source.path, output, _format(output, common, options.name)))
    _check_inside(jobs, options.out_dir)
    return jobs


def expand(arguments: Sequence[str], recursive: bool) -> list[Source]:
    """Files, folders (their readable files; -r: and their subfolders') and globs, in order.

    A glob is expanded here, ``**`` included, so a huge folder never meets the shell's argument
    limit. Hidden files are left out of folders and globs; a file named twice is taken once.
    """
    sources: list[Source] = []
    seen: set[str] = set()
    for argument in arguments:
        if argument == "-":
            raise click.UsageError("- (stdin) is one input: give -o OUTPUT, not --out-dir")
        if os.path.isdir(argument):
            found, what = _folder(argument, recursive), f"the folder {argument}"
        elif os.path.lexists(argument) or not _GLOB_MAGIC.search(argument):
            found, what = [Source(argument, "")], argument
        else:
            found, what = _glob(argument), f"the pattern {argument!r}"
        if not found:
            raise click.UsageError(f"{what} has no file geomcli reads (.png, .jpg, .bmp, .gif, .webp, .npy, .tiff)")
        for source in found:
            key = os.path.normcase(os.path.abspath(source.path))  # links to one file are each an input
            if key not in seen:
                seen.add(key)
                sources.append(source)
    return sources


def _folder(root: str, recursive: bool) -> list[Source]:
    """The readable files of ``root`` (-r: and of its subfolders, links to folders not followed),
    and a failing Source for each folder that could not be listed."""
    found = []

    def unlisted(error: OSError) -> None:
        found.append(_unlisted(error.filename, root, error))

    for folder, subfolders, names in os.walk(root, onerror=unlisted):
        subfolders[:] = [name for name in subfolders if not name.startswith(".")] if recursive else []
        for name in names:
            path = os.path.join(folder, name)
            if not name.startswith(".") and _readable(name) and os.path.isfile(path):
                found.append(Source(path, _parent(path, root)))
    return _in_order(found, root)


def _glob(pattern: str) -> list[Source]:
    """The readable files a pattern matches, as glob.glob(recursive=True) finds them, but for
    ``**``, which never follows a link to a folder (a link to ``.`` would repeat the tree without
    end), and a failing Source for each folder that could not be listed."""
    if pattern.endswith("/"):  # folders only: no file
        return []
    parts = pattern.split("/")
    fixed = []
    for part in parts[:-1]:
        if _GLOB_MAGIC.search(part):
            break
        fixed.append(part)
    root = "/".join(fixed) or ("/" if pattern.startswith("/") else ".")
    found: list[Source] = []

    def entries(folder: str) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(folder or ".") as listing:
                return list(listing)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as error:
            found.append(_unlisted(folder, root, error))
            return []

    def matches(folder: str, rest: list[str]) -> Iterator[str]:
        head, tail = rest[0], rest[1:]
        if head == "**":  # any depth, this folder's included
            yield from matches(folder, tail) if tail else ()
            for entry in entries(folder):
                if not entry.name.startswith("."):
                    path = os.path.join(folder, entry.name)
                    if entry.is_dir(follow_symlinks=False):
                        yield from matches(path, rest)
                    elif not tail:
                        yield path
            return
        if _GLOB_MAGIC.search(head):
            names = [entry.name for entry in entries(folder)
                     if fnmatch.fnmatch(entry.name, head) and (head.startswith(".") or not entry.name.startswith("."))]
        else:
            names = [head]
        for name in names:
            path = os.path.join(folder, name)
            if tail:
                yield from matches(path, tail) if os.path.isdir(path) else ()
            elif os.path.lexists(path):
                yield path

    for path in matches("/" if pattern.startswith("/") else "", [part for part in parts if part]):
        if _readable(path) and os.path.isfile(path):
            found.append(Source(path, _parent(path, root)))
    return _in_order(found, root)


def _parent(path: str, root: str) -> str:
    parent = os.path.relpath(os.path.dirname(path) or ".", root)
    return "" if parent == "." else parent


def _unlisted(folder: str, root: str, error: OSError) -> Source:
    return Source(folder, _parent(folder, root), f"{folder}: cannot list the folder ({error.strerror or error})")


def _in_order(found: list[Source], root: str) -> list[Source]:
    return sorted(found, key=lambda source: os.path.relpath(source.path, root).split(os.sep))


def _readable(name: str) -> bool:
    from geomcli import io

    try:
        io.format_for_path(name)
    except GeomError:
        return False
    return True


def check_template(template: str) -> set[str]:
    """The fields --name uses; usage errors for unknown fields and absolute templates."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:
        raise click.BadParameter(f"{template!r}: {error}", param_hint="'--name'") from error
    fields = set()
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in FIELDS or conversion or "{" in (spec or ""):
            raise click.BadParameter(f"{template!r}: unknown field {{{name}}}; use "
                                     + " ".join(f"{{{known}}}" for known in FIELDS), param_hint="'--name'")
        if any(int(number) > NAME_MAX for number in re.findall(r"\d+", spec or "")):
            # caught before a name of that width is made: {index:0500000000d} would take gigabytes
            raise click.BadParameter(f"{template!r}: {{{name}:{spec}}} is wider than a file name can be "
                                     f"({NAME_MAX} bytes)", param_hint="'--name'")
        fields.add(name)
    if os.path.isabs(template):
        raise click.BadParameter(f"{template!r} is an absolute path; names are relative to --out-dir",
                                 param_hint="'--name'")
    return fields


def render(template: str, source: Source, index: int) -> list[str]:
    """The output path under --out-dir as a list of names; ``..`` and empty names are refused.

    >>> render("{parent}/{index:03d}_{stem}.npy", Source("shots/a/b.png", "a"), 7)
    ['a', '007_b.npy']
    >>> render("{stem}{suffix}", Source("b.png", ""), 0)
    ['b.png']
    """
    name = os.path.basename(source.path)
    stem, suffix = os.path.splitext(name)
    try:
        text = template.format(stem=stem, suffix=suffix, name=name, parent=source.parent, index=index)
    except (ValueError, TypeError) as error:
        raise click.BadParameter(f"{template!r}: {error}", param_hint="'--name'") from error
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise click.BadParameter(f"{template!r} names {text!r} for {source.path}, outside --out-dir",
                                 param_hint="'--name'")
    if not parts:
        raise click.BadParameter(f"{template!r} gives an empty name for {source.path}", param_hint="'--name'")
    for part in parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise click.BadParameter(f"{template!r} names {part[:40]!r}... for {source.path}, longer than a file "
                                     f"name can be ({NAME_MAX} bytes)", param_hint="'--name'")
    return parts


def _format(output: str, common: Common, template: str) -> str:
    """The output's format, or a usage error as for -o (cli._output_format)."""
    from geomcli import io

    try:
        output_format = transforms.output_format(output, common.format)
    except transforms.FormatConflictError as error:
        base = template.removesuffix("{suffix}")
        root, extension = os.path.splitext(base)
        base = root if extension and "}" not in extension else base
        raise click.BadParameter(f"{error}, named by {template!r}; give --name '{base}.{common.format}' or drop "
                                 "--format", param_hint="'--name'") from error
    except GeomError as error:
        raise click.BadParameter(str(error), param_hint="'--name'") from error
    refusal = io.refused_option(transforms.write_options(common), output_format)
    if refusal is not None:
        raise click.UsageError(f"{refusal} ({output}, named by --name {template!r})")
    return output_format


def _check_inside(jobs: Sequence[Job], out_dir: str) -> None:
    """A symlinked folder under --out-dir must not lead outside it."""
    root = os.path.realpath(out_dir)
    checked: set[str] = set()
    for job in jobs:
        folder = os.path.dirname(job.output)
        if job.error is not None or folder in checked:
            continue
        checked.add(folder)
        real = os.path.realpath(folder)
        if os.path.commonpath([root, real]) != root:
            raise click.UsageError(f"{job.output} would be written to {real}, outside --out-dir {out_dir} "
                                   "(through a symbolic link)")


def _real(path: str) -> str:
    """The file a path reads, through every link."""
    return os.path.normcase(os.path.realpath(path))


def _identity(path: str) -> tuple[int, int] | None:
    """The device and inode of the file at ``path`` (through links), None where there is none."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _landing(path: str) -> str:
    """Where a file written to ``path`` lands: it replaces a link there, so only the folder's
    links are followed."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.normcase(os.path.join(os.path.realpath(folder), name))


def _skip_reason(job: Job, options: BatchOptions) -> str | None:
    if not (options.skip_existing or options.no_clobber):
        return None
    try:
        made = os.stat(job.output).st_mtime_ns
    except OSError:
        return None
    if options.no_clobber:
        return transforms.OUTPUT_EXISTS
    try:
        changed = os.stat(job.input).st_mtime_ns
    except OSError:
        return None  # the read reports it
    # as make judges: an output not older than its input is up to date
    return "the output is up to date (--skip-existing)" if made >= changed else None


# ---- doing the work ---------------------------------------------------------------------------


def _report(task: Task, job: Job, **fields: Any) -> Report:
    return summary.Report(task.command, job.input, job.output or None, parameters=task.parameters, **fields)


def transform(task: Task, job: Job) -> Report:
    """One file: its output folder, then read, transform, write (in a worker or in-process).
    With -n the output is placed only where no file is: checked once more as it is placed, since
    the plan's look, another process may have made one (the file is then skipped). A pipe or
    device made at its name since the plan is never written into (it could hang): replaced, or
    for an output written through a memory map, that file fails."""
    from geomcli.io import _atomic

    report = _report(task, job)
    with transforms.reporting(report, task.common):
        os.makedirs(os.path.dirname(job.output), exist_ok=True)
    if report.status != "ok":
        return report
    with _atomic.no_replace() if task.no_clobber else _atomic.files_only():
        return transforms.transform_file(task.command, job.input, job.output, job.format, task.common,
                                         task.parameters, task.operate)


def _in_process(task: Task, todo: Sequence[Job], outcomes: _Outcomes, fail_fast: bool) -> None:
    for job in todo:
        report = _in_this_process(task, job)
        outcomes.add(job.index, report)
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


def _in_workers(task: Task, todo: Sequence[Job], count: int, outcomes: _Outcomes, fail_fast: bool) -> None:
    """Hand the jobs to ``count`` worker processes until done or stopped.

    The workers are started from a thread: the forkserver's imports take about 0.2 s, and this
    process does jobs itself meanwhile, on the core that would otherwise wait. Each worker is
    given its first job as it starts, so it does not wait for this process to finish its own.
    While many jobs remain, a worker holds a second one, so it starts it without waiting for
    this process to read its report (not with --fail-fast: nothing starts after a failure is seen).
    """
    import threading
    from multiprocessing.connection import wait

    context = _forkserver(arrays=_needs_arrays(task, todo))
    pending = deque(todo)
    workers: list[_Worker] = []
    lock = threading.Lock()  # pending, workers and their jobs: the starter thread adds workers
    wake, woken = context.Pipe(duplex=False)  # the starter's "a new worker", so the wait below ends
    failed: list[BaseException] = []
    unstarted: list[OSError] = []  # why a worker could not start: its jobs go to the others
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
        except BaseException as error:  # handed to the main thread, which raises it
            failed.append(error)
            woken.send_bytes(b"")

    def done(job: Job, report: Report) -> None:
        nonlocal stopping
        outcomes.add(job.index, report)
        with lock:
            stopping = stopping or (fail_fast and report.status == "error")

    starter = threading.Thread(target=start_all, name="geomcli-starter", daemon=True)
    starter.start()
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
                done(job, _in_this_process(task, job))
            for connection in wait([wake, *by_connection], timeout=0 if job is not None else _TICK):
                if connection is wake:
                    while wake.poll():
                        wake.recv_bytes()
                    continue
                worker = by_connection[connection]  # type: ignore[index]
                try:
                    message = worker.connection.recv()
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
                else:
                    with lock:
                        finished_job = worker.jobs.popleft()
                    done(finished_job, message)
        finished = True
    finally:
        with lock:
            stopping = True  # the starter starts no more workers
        _stop(starter, workers, finished)
        wake.close()
        woken.close()
    if failed:  # even if this process did every job meanwhile
        raise failed[0]
    if unstarted:
        transforms.echo_stderr(f"Warning: only {len(workers_started)} of {count} worker processes could start "
                               f"({unstarted[0].strerror or unstarted[0]}); the others took their files")


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
        transforms.echo_stderr(f"Warning: the open-file limit (ulimit -n {limit}) leaves no room for worker "
                               "processes; this process does every file")
        return 1
    transforms.echo_stderr(f"Warning: the open-file limit (ulimit -n {limit}) leaves room for {room} of {count} "
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

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(_PRELOAD + (_PRELOAD_ARRAYS if arrays else ())))
    return context


def _needs_arrays(task: Task, jobs: Sequence[Job]) -> bool:
    """Whether some job will need numpy: all but a crop-pad of images to images (io.read_picture),
    as far as the names tell (a 16-bit PNG, read as an array, imports numpy when it comes)."""
    from geomcli import io

    if not isinstance(task.operate, transforms.CropPad):
        return True
    for job in jobs:
        try:
            image = io.format_for_path(job.input) in io.IMAGE_FORMATS
        except GeomError:
            return True  # no extension geomcli knows: sniffed at read time
        if not image or not task.operate.takes_pictures(task.common, job.format):
            return True
    return False


def _in_this_process(task: Task, job: Job) -> Report:
    try:
        return transform(task, job)
    except BaseException:
        _remove_leftovers([job])
        raise


def _died(task: Task, worker: _Worker, job: Job) -> Report:
    """The report of a job whose worker ended without answering (a crash shows its traceback)."""
    worker.process.join()
    _remove_leftovers([job])
    return _report(task, job, status="error",
                   error=f"{job.input}: the worker process ended (exit code {worker.process.exitcode})")


def _stop(starter: threading.Thread, workers: Sequence[_Worker], finished: bool) -> None:
    """Let idle workers go; after an interruption, stop busy ones and clear their temp files.

    The starter thread is waited for first: it may be starting one more worker.
    """
    if finished:
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
    previous = {number: signal.signal(number, signal.SIG_IGN) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        starter.join()
        for worker in workers:
            if worker.process.is_alive():
                worker.process.terminate()  # SIGTERM: see _terminated
        for worker in workers:
            worker.process.join(timeout=10)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
        _remove_leftovers([job for worker in workers for job in worker.jobs])
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _serve(connection: Connection, task: Task, under_way: Any) -> None:
    """A worker: take jobs until told to stop; SIGTERM ends it without a temp file (_terminated).
    ``under_way`` tells the parent which job it began last, should it die on it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, _terminated)
    # the imports every file needs, at once (a no-op where the forkserver preloaded them)
    from geomcli import io  # noqa: F401
    from geomcli.io import _atomic

    committer = _Committer(connection, under_way)
    connection.send("ready")
    try:
        while True:
            while not connection.poll(_TICK):
                pass  # see _TICK
            try:
                job = connection.recv()
            except EOFError:
                return
            if job is None:
                return
            _jobs_under_way.append(job)
            under_way.value = job.index
            with _atomic.deferred_commits() as commits:
                report = transform(task, job)
            committer.put(job, report, commits)
    finally:
        committer.close()  # every report sent (or, the parent gone, every temp file removed)


class _Committer:
    """A worker's thread that syncs and renames each output (io._atomic.deferred_commits) while
    the worker reads its next file, then sends the job's report: in job order, and only once the
    output is in place. fsync waits on the disk, about 1.4 ms a file here: no core idles for it."""

    def __init__(self, connection: Connection, under_way: Any) -> None:
        import queue
        import threading

        self.connection, self.under_way = connection, under_way
        self.orphaned = False  # the parent has gone: outputs are no longer placed, their temps removed
        self.queue: queue.SimpleQueue[tuple[Job, Report, list[Callable[[], None]]] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="geomcli-committer", daemon=True)
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
            _remove_leftovers(list(_jobs_under_way))
            os._exit(1)

    @staticmethod
    def _commit(report: Report, commits: list[Callable[[], None]]) -> None:
        from geomcli.io import _atomic

        for commit in commits:
            try:
                commit()
            except _atomic.OutputExistsError:  # -n, and a file was made there meanwhile: left as it is
                if report.status == "ok":
                    transforms.skipped(report, transforms.OUTPUT_EXISTS)
            except GeomError as error:  # the sync or rename failed: that temp file is gone
                if report.status == "ok":
                    report.status, report.error = "error", transforms.describe(error)


# in a worker: the jobs whose temp files may exist (one being made, one being synced)
_jobs_under_way: list[Job] = []


def _terminated(signum: int, frame: Any) -> None:
    """A worker's SIGTERM: remove the temp files of the jobs under way and end at once.

    Not SystemExit: raised at an arbitrary point of a job (inside an import, say), it has been seen
    to vanish, leaving the worker running.
    """
    _remove_leftovers(list(_jobs_under_way))
    os._exit(EXIT_TERMINATED)


def _remove_leftovers(jobs: Sequence[Job]) -> None:
    from geomcli.io import _atomic

    for job in jobs:
        _atomic.remove_leftovers(job.output)


def _smaller_than(jobs: Sequence[Job], limit: int) -> bool:
    total = 0
    for job in jobs:
        try:
            total += os.stat(job.input).st_size
        except OSError:
            pass
        if total >= limit:
            return False
    return True


# ---- what the user sees -----------------------------------------------------------------------


@dataclass
class _Outcomes:
    """Reports in, shown in input order (so -j N prints what -j 1 prints); counts; the summary."""

    task: Task
    total: int
    waiting: dict[int, Report] = field(default_factory=dict)
    shown: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {"ok": 0, "error": 0, "skipped": 0})
    progress: Progress | None = None
    # each warning is shown once per run (the first file that gets it is named)
    warned: set[str] = field(default_factory=set)

    def __enter__(self) -> _Outcomes:
        import sys

        if not self.task.common.quiet and sys.stderr.isatty():
            self.progress = _progress_bar()
            self.progress.start()
            self.progress.add_task(self.task.command, total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def add(self, index: int, report: Report) -> None:
        self.counts[report.status] += 1
        self.waiting[index] = report
        if self.progress is not None:
            self.progress.advance(self.progress.task_ids[0])
        while self.waiting and min(self.waiting) <= self.shown:
            index = min(self.waiting)
            self._show(self.waiting.pop(index))
            self.shown = index + 1

    def _show(self, report: Report) -> None:
        if report.status == "error":
            self._say(f"Error: {report.error}")
        if not self.task.common.quiet and not self.task.common.json:
            for warning in report.warnings:
                if warning not in self.warned:
                    self.warned.add(warning)
                    self._say(f"Warning: {report.output}: {warning}")
        if self.task.common.json:
            transforms.echo_stdout(report.to_json())

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress.console.print(summary.printable(line), markup=False, highlight=False, soft_wrap=True)
        else:
            transforms.echo_stderr(line)

    def finish(self, seconds: float) -> int:
        """Show what is left (after --fail-fast) and the summary; the exit code."""
        for index in sorted(self.waiting):
            self._show(self.waiting.pop(index))
        ok, failed, skipped = self.counts["ok"], self.counts["error"], self.counts["skipped"]
        not_run = self.total - ok - failed - skipped
        if self.task.common.json:
            transforms.echo_stdout(summary.strict_json({"command": self.task.command, "status": "summary", "ok": ok,
                                               "failed": failed, "skipped": skipped, "not_run": not_run,
                                               "total": self.total, "seconds": round(seconds, 3)}))
        elif not self.task.common.quiet:
            line = f"{self.task.command}: {ok} ok, {failed} failed, {skipped} skipped"
            line += f", {not_run} not run (--fail-fast)" if not_run else ""
            transforms.echo_stderr(f"{line} in {seconds:.1f} s")
        return EXIT_FAILED if failed else 0


def _progress_bar() -> Progress:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: ProgressTask) -> Text:
            return Text(f"{task.speed:.1f} files/s" if task.speed else "", style="progress.data.speed")

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), Rate(),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=True)


def _dry_run(task: Task, jobs: Sequence[Job], options: BatchOptions) -> int:
    """Each input -> output with the output's shape, from headers only; nothing is written."""
    from geomcli import io

    counts = {"ok": 0, "error": 0, "skipped": 0}
    for job in jobs:
        report = _report(task, job)
        reason = _skip_reason(job, options)
        with transforms.reporting(report, task.common):
            if job.error is not None:
                raise GeomError(job.error)
            fidelity = task.common.fidelity
            header = io.read_header(job.input, auto_orient=fidelity.auto_orient, series=fidelity.series,
                                    page=fidelity.page, frames=fidelity.frames)
            report.input_shape, report.input_dtype = list(header.shape), str(header.dtype)
            # the limits the run would apply: the input's here, the output's in shape_of
            io.check_size(header.shape, task.common.max_pixels, io.display_name(job.input))
            try:
                shape = task.shape_of(header)
            except GeomError as error:
                raise GeomError(f"{job.input}: {error}") from error
            report.output_shape, report.output_dtype = list(shape), str(header.dtype)
            io.check_writable(header.dtype, shape, job.format, io.display_name(job.output, output=True))
        if reason is not None:
            # the run would not read this file: whatever the header says, it is not a failure
            report.status, report.error = "skipped", None
            report.notes.append(reason)
        counts[report.status] += 1
        if report.status == "error":
            transforms.echo_stderr(f"Error: {report.error}")
        if task.common.json:
            transforms.echo_stdout(report.to_json())
        elif report.status != "error":
            shape_text = "×".join(map(str, report.output_shape)) if report.output_shape else "?"
            skipped = f" (skip: {report.notes[-1]})" if report.status == "skipped" else ""
            transforms.echo_stdout(f"{job.input} → {job.output}: {shape_text} {report.output_dtype}{skipped}")
    if task.common.json:
        transforms.echo_stdout(summary.strict_json({"command": task.command, "status": "summary", "dry_run": True,
                                           "ok": counts["ok"], "failed": counts["error"],
                                           "skipped": counts["skipped"], "not_run": 0, "total": len(jobs)}))
    elif not task.common.quiet:
        transforms.echo_stderr(f"{task.command}: dry run, {counts['ok']} to write, {counts['error']} failed, "
                               f"{counts['skipped']} skipped")
    return EXIT_FAILED if counts["error"] else 0
