"""What the user sees of a run, and the one exit code: each file's report becomes an error line,
warnings, a summary line or a JSON record; a batch's reports are shown in input order with a
progress bar and a closing count. Every error line and exit code of a transform is made here.

Data goes to files or stdout; this text goes to stderr, JSON records to stdout (to stderr when
stdout carries the data). A closed or failing stdout is an error, never a silent loss.
"""

from __future__ import annotations

import sys
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from geomcli.constants import EXIT_FAILED, EXIT_USAGE
from geomcli.engine import summary
from geomcli.errors import GeomError, OptionFault, PlanError, StdoutError

if TYPE_CHECKING:
    from rich.progress import Progress
    from rich.progress import Task as ProgressTask

    from geomcli.engine.options import Common
    from geomcli.engine.summary import Report


def describe(error: GeomError | OSError) -> str:
    """``<path>: <reason>``: our messages name their file; an OSError names it apart."""
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.filename}: {error.strerror or error}"
    return str(error)


# why a batch skips an input whose output exists, found when planned or when the output was placed
OUTPUT_EXISTS = "the output exists (--no-clobber)"


@contextmanager
def reporting(report: Report, common: Common) -> Iterator[Report]:
    """Time the work on one file and record a failure in its report instead of raising; an output
    that no_replace (-n) found made meanwhile marks it skipped (see :func:`skipped`)."""
    started = time.perf_counter()
    try:
        yield report
    except (BrokenPipeError, PlanError):
        raise  # the reader of stdout has gone, or the run was asked wrong: not this file's failure
    except (GeomError, OSError) as error:
        if _output_existed(error):
            skipped(report, OUTPUT_EXISTS)
        elif common.debug:
            raise
        else:
            report.status, report.error = "error", describe(error)
            _keep_cause(report, error)
    finally:
        report.seconds = time.perf_counter() - started


# The error each failed report was made from, while the report lives: a Dask run retries a file
# whose failure was a passing I/O error (geomcli.engine.cluster), and tells it apart here.
_causes: weakref.WeakKeyDictionary[Report, GeomError | OSError] = weakref.WeakKeyDictionary()


def _keep_cause(report: Report, error: GeomError | OSError) -> None:
    """Keep ``error`` and the errors it was raised from, without their tracebacks: those hold
    the frames of the failed read, and the arrays in them, for as long as the report lives."""
    _causes[report] = error
    seen: BaseException | None = error
    for _ in range(100):  # a chain is short; never a cycle followed forever
        if seen is None:
            break
        seen.__traceback__ = None
        seen = seen.__cause__ or seen.__context__


def cause(report: Report) -> GeomError | OSError | None:
    """The error that made ``report`` a failure, where :func:`reporting` caught one."""
    return _causes.get(report)


def _output_existed(error: BaseException) -> bool:
    from geomcli.io._atomic import OutputExistsError

    return isinstance(error, OutputExistsError)


def skipped(report: Report, reason: str) -> None:
    """Mark a file skipped when its output was found made, after it was read and transformed:
    nothing was written, so no warning or note about what was written stays (as a skip when
    planned; a zarr's 'chunk by chunk', say, found as a batch's placing step renames it in)."""
    report.status, report.error, report.value_range = "skipped", None, None
    report.warnings.clear()
    report.notes[:] = [reason]


def finish(report: Report, common: Common, data_on_stdout: bool) -> int:
    """Show one file's outcome; the exit code it asks for."""
    if report.status != "ok":
        echo_stderr(f"Error: {report.error}")
    elif not common.quiet and not common.json:
        for warning in report.warnings:
            echo_stderr(f"Warning: {summary.about(report, warning)}: {warning}")
        summary.show(report)
    if common.json:
        if data_on_stdout:
            echo_stderr(report.to_json())
        else:
            echo_stdout(report.to_json())
    if report.status == "ok":
        return 0
    return EXIT_USAGE if isinstance(cause(report), OptionFault) else EXIT_FAILED


def check_stdout() -> None:
    """Text is asked for on stdout: a closed one ends the run (callers check before any work)."""
    if sys.stdout is None:
        raise StdoutError("<stdout>: standard output is closed")


def echo_stdout(text: str) -> None:
    """A line of text on standard output (info lines, JSON records), control characters escaped
    (summary.printable): a closed or failing stdout ends the run with an error, never loses the
    text in silence."""
    check_stdout()
    try:
        summary.write_line(sys.stdout, summary.printable(text))
    except BrokenPipeError:
        raise
    except OSError as error:
        raise StdoutError(f"<stdout>: cannot write ({error.strerror or error})") from error


def echo_stderr(line: str) -> None:
    """A message line on standard error (Error:, Warning:, a batch's counts), control characters
    escaped (summary.printable): a file name in it cannot break the line or drive the terminal."""
    if sys.stderr is not None:
        summary.message_line(sys.stderr, summary.printable(line))


def show_info(record: dict[str, Any], as_json: bool) -> int:
    """What ``geomcli info`` says of one file: a line, or its JSON record; the exit code it asks for."""
    if record["status"] != "ok":
        echo_stderr(f"Error: {record['error']}")
    if as_json:
        echo_stdout(summary.strict_json(record))
    elif record.get("series"):
        # a file of series of different shapes: a line for it, then one for each series
        echo_stdout(f"{_named(record['input'])}: {record['format']}, {record['notes'][0]}")
        for one in record["series"]:
            echo_stdout(f"  series {one['index']}: {summary.shape_text(one['shape'])} {one['dtype']}, "
                        f"axes {one['axes']}")
    elif record["status"] == "ok":
        echo_stdout(_info_line(record))
    return 0 if record["status"] == "ok" else EXIT_FAILED


def _info_line(record: dict[str, Any]) -> str:
    parts = [f"{record['format']} {summary.shape_text(record['shape'])} {record['dtype']}",
             f"layout {record['layout'] or '-'}"]
    if record["pages"] is not None:
        parts.append(f"{record['pages']} page(s)")
    if record.get("chunks") is not None:
        parts.append(f"chunks {'×'.join(map(str, record['chunks']))}"
                     + (f" in shards of {'×'.join(map(str, record['shards']))}" if record.get("shards") else ""))
    if record.get("ome"):  # where its pixels lie: what a crop or resize of it moves
        levels = record.get("levels") or 1  # only the first is read: said, as a run's note says it
        parts.append("OME-Zarr" + (f" (the first of {levels} levels)" if levels > 1 else "")
                     + "".join(f" {key} [{', '.join(f'{value:g}' for value in record[key])}]"
                               for key in ("scale", "translation") if record.get(key) is not None))
    if record["value_range"]:
        parts.append(f"range {summary.range_text(record['value_range'])}"
                     + (" and NaN" if summary.NAN_NOTE in record["notes"] else ""))
    if record["file_size"] is not None:
        parts.append(f"{record['file_size']} bytes")
    if record.get("icc") is not None:
        parts.append(f"ICC profile {record['icc']!r}")
    if record.get("dpi") is not None:
        parts.append(f"{record['dpi'][0]:g}×{record['dpi'][1]:g} dpi")
    if record.get("pixel_size"):
        parts.append("pixel size " + ", ".join(f"{axis} {size['size']:g}{' ' + size['unit'] if size['unit'] else ''}"
                                               for axis, size in record["pixel_size"].items()))
    if record.get("orientation") not in (None, 1):
        kind = "TIFF" if record["format"] == "tiff" else "EXIF"
        turned = "the shape shown is upright" if record.get("upright") else "not applied"
        parts.append(f"{kind} orientation {record['orientation']} ({turned})")
    if record.get("xmp") is not None:
        parts.append(f"XMP packet of {record['xmp']} bytes")
    if record.get("text"):
        parts.append(f"PNG text {', '.join(record['text'])}")
    if record.get("comment") is not None:
        parts.append(f"comment {_shown(record['comment'])}")
    if record.get("compression") not in (None, "none"):
        parts.append(f"compression {record['compression']}")
    # what --json notes (a TIFF pyramid's levels, tifffile's warnings, a range not read) is said here too
    notes = [note for note in record["notes"] if note != summary.NAN_NOTE]
    return f"{_named(record['input'])}: " + ", ".join(parts) + "".join(f"; {note}" for note in notes)


def _named(path: str) -> str:
    """An input as an info line names it: stdin as ``<stdin>``, as its errors and warnings do (its
    --json record keeps ``-``, the argument given)."""
    from geomcli.io._base import display_name

    return display_name(path)


def _shown(text: str, most: int = 60) -> str:
    """A file's text on the one line: quoted, its newlines and other controls escaped, cut at ``most``."""
    cut = text if len(text) <= most else text[: most - 1] + "…"
    return repr(cut)


@dataclass
class Outcomes:
    """Reports in, shown in input order (so -j N prints what -j 1 prints); counts; the summary."""

    command: str
    common: Common
    total: int
    waiting: dict[int, Report] = field(default_factory=dict)
    shown: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {"ok": 0, "error": 0, "skipped": 0})
    progress: Progress | None = None
    # each warning is shown once per run (the first file that gets it is named, unless it is one
    # of these, about the options: the same for every file, shown with the command's name)
    warned: set[str] = field(default_factory=set)
    of_the_options: frozenset[str] = frozenset()
    # when the run began (time.perf_counter), for the seconds of a summary an interruption gives
    started: float = field(default_factory=time.perf_counter)
    # False for a run a signal stopped while its inputs were listed: ``total`` counts those found so far
    listing_finished: bool = True

    def __enter__(self) -> Outcomes:
        if not self.common.quiet and sys.stderr.isatty():
            progress = _progress_bar()
            if progress.console.is_dumb_terminal:  # TERM=dumb: rich draws no bar, but a blank line
                return self
            self.progress = progress
            self.progress.start()
            self.progress.add_task(self.command, total=self.total)
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
        if kind is not None and issubclass(kind, GeomError):
            # a run ended by one error (a joined cluster's scheduler gone): the files whose reports
            # came still get their lines and records, though one before them never reported
            for index in sorted(self.waiting):
                self._show(self.waiting.pop(index))
        elif kind is not None and _by_signal(kind):
            # Ctrl-C or SIGTERM: a pipeline reading the records, or a user scrolling back, learns
            # the run ended early, and what it did so far, from the summary it would otherwise never get
            self.summarise_interrupted()

    def add(self, index: int, report: Report) -> None:
        from geomcli import io

        # the count and the records as one: a signal's handler raises anywhere, and one between
        # the two left an interrupted run's summary counting a file with no record (seen in CI)
        with io.signals_deferred():
            self.counts[report.status] += 1
            self.waiting[index] = report
            if self.progress is not None:
                self.progress.advance(self.progress.task_ids[0])
            # in job order: each as soon as those before it are shown (a min() a report made a
            # cluster's out-of-order bursts quadratic); finish shows any left after a gap
            while self.shown in self.waiting:
                self._show(self.waiting.pop(self.shown))
                self.shown += 1

    def _show(self, report: Report) -> None:
        if report.status == "error":
            self._say(f"Error: {report.error}")
        if not self.common.quiet and not self.common.json:
            for warning in report.warnings:
                if warning not in self.warned:
                    self.warned.add(warning)
                    whose = self.command if warning in self.of_the_options else summary.about(report, warning)
                    self._say(f"Warning: {whose}: {warning}")
        if self.common.json:
            echo_stdout(report.to_json())

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress.console.print(summary.printable(line), markup=False, highlight=False, soft_wrap=True)
        else:
            echo_stderr(line)

    def finish(self, seconds: float) -> int:
        """Show what is left (after --fail-fast) and the summary; the exit code."""
        self._summarise(seconds)
        return EXIT_FAILED if self.counts["error"] else 0

    def summarise_interrupted(self) -> None:
        """The summary of a run a signal ended: its counts so far, the rest not run, marked so."""
        self._summarise(time.perf_counter() - self.started, interrupted=True)

    def _summarise(self, seconds: float, interrupted: bool = False) -> None:
        """The reports still waiting (those after a gap), then the summary line or record."""
        for index in sorted(self.waiting):
            self._show(self.waiting.pop(index))
        ok, failed, skipped = self.counts["ok"], self.counts["error"], self.counts["skipped"]
        not_run = self.total - ok - failed - skipped
        if self.common.json:
            echo_stdout(summary.summary_json(self.command, ok=ok, failed=failed, skipped=skipped, not_run=not_run,
                                             total=self.total, seconds=seconds, interrupted=interrupted,
                                             listing_finished=self.listing_finished))
        elif not self.common.quiet:
            line = f"{self.command}: {ok} ok, {failed} failed, {skipped} skipped"
            if interrupted and not self.listing_finished:
                line += f", {not_run} not run (interrupted as the inputs were listed; more not counted)"
            elif interrupted:
                line += f", {not_run} not run (interrupted)"
            elif not_run:
                line += f", {not_run} not run (--fail-fast)"
            echo_stderr(f"{line} in {seconds:.1f} s")


def _by_signal(kind: type[BaseException]) -> bool:
    """Whether an exception of ``kind`` is a run's end by Ctrl-C or a stop signal (SIGTERM's
    SystemExit, raised by the handler that noted it), not a SystemExit of its own."""
    from geomcli import io

    return issubclass(kind, KeyboardInterrupt) or (issubclass(kind, SystemExit) and io.signal_taken() is not None)


@contextmanager
def summary_if_interrupted(command: str, common: Common, total: Callable[[], int], started: float,
                           listing_finished: Callable[[], bool] = lambda: True) -> Iterator[None]:
    """The summary Outcomes gives a run a signal ends, for one it ends before its files start (its
    inputs listed, their headers checked, its workers or cluster started): every file not run
    (``total()``, the inputs found so far, and ``listing_finished()`` False where there are more
    to find), nothing done."""
    try:
        yield
    except (KeyboardInterrupt, SystemExit) as stop:
        if _by_signal(type(stop)):
            Outcomes(command, common, total(), started=started,
                     listing_finished=listing_finished()).summarise_interrupted()
        raise


def _progress_bar() -> Progress:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
    )
    from rich.text import Text

    class RateAndTimeLeft(ProgressColumn):
        """Files a second since the start, and the time left at that rate. Not rich's own speed,
        taken over the last few advances: a cluster's task reports its files at once, a burst it
        read as a quarter of a million files a second."""

        def render(self, task: ProgressTask) -> Text:
            elapsed = task.elapsed or 0.0
            if not task.completed or elapsed <= 0:
                return Text("")
            rate = task.completed / elapsed
            left = max(0.0, (task.total or 0) - task.completed) / rate
            return Text(f"{rate:.1f} files/s {int(left) // 60}:{int(left) % 60:02d} left",
                        style="progress.data.speed")

    # rich sends stdout's lines through the bar's console (stderr) while the bar shows: --json's
    # records with stdout a file or pipe (> run.jsonl from a terminal) went to the terminal, wrapped
    # at its width. Only stdout on a terminal too is sent there, and then not wrapped.
    to_a_terminal = sys.stdout is not None and sys.stdout.isatty()
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateAndTimeLeft(),
                    console=Console(stderr=True, soft_wrap=True), transient=True, redirect_stdout=to_a_terminal)


