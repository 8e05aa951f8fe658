"""One job of a batch, wherever it runs (this process, a local worker process, a Dask worker):
its output folder, the -n rule, the transform, the deferred commit of its output, and the temp
files a stopped writer leaves. geomcli.engine.workers and geomcli.engine.cluster share these.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from geomcli.engine import summary
from geomcli.engine.one_file import transform_file
from geomcli.engine.report import OUTPUT_EXISTS, describe, reporting, skipped
from geomcli.errors import GeomError

if TYPE_CHECKING:
    from geomcli.engine.plan import Job, Task
    from geomcli.engine.summary import Report


def job_report(task: Task, job: Job, **fields: Any) -> Report:
    """A report for ``job`` that no transform made (a skip, a failure found without reading it)."""
    return summary.Report(task.operation.command, job.input, job.output or None,
                          parameters=task.operation.parameters(), **fields)


def transform(task: Task, job: Job) -> Report:
    """One file: its output folder, then read, transform, write (in a worker or in-process).
    With -n the output is placed only where no file is: checked once more as it is placed, since
    the plan's look, another process may have made one (the file is then skipped). A pipe or
    device made at its name since the plan is never written into (it could hang): replaced, or
    for an output written through a memory map, that file fails."""
    from geomcli.io import _atomic, _remote

    report = job_report(task, job)
    if not _remote.is_url(job.output):  # an object store has no folders to make
        with reporting(report, task.common):
            _make_folder(job.output)
    if report.status != "ok":
        return report
    with _atomic.no_replace() if task.no_clobber else _atomic.files_only(), _atomic.remaking_folder(), \
            _remote.listed_size(job.input, job.size), _remote.given_bytes(job.input, job.data):
        return transform_file(task.operation, job.input, job.output, job.format, task.common)


def _make_folder(output: str) -> None:
    """The folder of ``output``; its failure names the output, and a file in the way as such (a
    batch's line was `o/photo: File exists` for --name '{stem}/x.png' where a file o/photo is)."""
    try:
        make_folders(os.path.dirname(output))
    except (FileExistsError, NotADirectoryError) as error:
        in_the_way = os.path.dirname(output)
        while in_the_way and not os.path.lexists(in_the_way):
            in_the_way = os.path.dirname(in_the_way)
        raise GeomError(f"{output}: {in_the_way or error.filename} is not a folder") from error
    except OSError as error:
        raise GeomError(f"{output}: cannot make its folder ({error.strerror or error})") from error


# how often make_folders makes a folder again whose parent vanished (each run that removes it
# does so once)
_REMAKES = 8


def make_folders(folder: str) -> None:
    """``folder`` and its missing parents (os.makedirs, exist_ok), made again where a parent it
    made was removed before its child was made: xargs -P or make -j run one geomcli per file into
    one new --out-dir, and a run that writes no file removes the empty folders it made."""
    for remakes in range(_REMAKES, -1, -1):
        try:
            os.makedirs(folder, exist_ok=True)
            return
        except FileExistsError:  # there when made, gone when makedirs looked again: made again
            if os.path.isdir(folder):
                return
            if not remakes or os.path.lexists(folder):  # a file or a broken link in the way
                raise
        except FileNotFoundError:
            if not remakes:
                raise


def commit(report: Report, commits: Sequence[Callable[[], None]]) -> None:
    """Run the deferred commits (sync and rename, or the put of an object) of the job ``report``
    tells of; a failure to place its output becomes its failure, an output made there meanwhile
    under -n its skip."""
    from geomcli.io import _atomic

    for step in commits:
        try:
            step()
        except _atomic.OutputExistsError:  # -n, and a file was made there meanwhile: left as it is
            if report.status == "ok":
                skipped(report, OUTPUT_EXISTS)
        except GeomError as error:  # the sync, rename or put failed: that temp file is gone
            if report.status == "ok":
                report.status, report.error = "error", describe(error)


def remove_leftovers(jobs: Sequence[Job]) -> None:
    """Remove the temp files (and a zarr output's hidden folders) that stopped writers of these
    jobs' outputs left (io._atomic.remove_leftovers), a zarr output at a URL they left marked
    incomplete (io._zarr.remove_incomplete: written in place, chunk by chunk, it has no temp name),
    and another object's multipart upload a killed writer left pending (io._remote.abort_pending_uploads)."""
    from geomcli.io import _atomic, _remote, _zarr

    for job in jobs:
        if not job.output:
            continue
        if not _remote.is_url(job.output):
            _atomic.remove_leftovers(job.output)
        elif _zarr.is_zarr(job.output):
            _zarr.remove_incomplete(job.output)
        else:  # placed whole or not at all, but a writer killed mid-upload leaves its parts
            _remote.abort_pending_uploads(job.output)
