"""What a run reports, as plain data, and how it is shown: rich on a terminal, plain text
elsewhere, JSON on request. rich is imported only when it will draw.

JSON is strict (RFC 8259): every record goes through :func:`strict_json`, which writes an
infinite or NaN number, which JSON has no literal for, as the string "Infinity", "-Infinity"
or "NaN". Python's ``float()`` and JavaScript's ``Number()`` read those strings back as the
number, and strict parsers (``JSON.parse``, jq) accept the line.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Iterable, Mapping
from typing import IO, Any

# What would end a line or drive the terminal if printed as it is: C0 and C1 controls (ESC, CSI,
# NEL), DEL, the line and paragraph separators, bidirectional overrides and marks that reorder
# what follows; characters that show as nothing, so that a name holding one looks like another
# ('Error: photo.png: no such file' for a byte order mark or zero-width space before it; not the
# joiners, which emoji and scripts such as Persian need); and lone surrogates, the bytes of a
# name that is not UTF-8, which a strict stream could not encode at all.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028\u2029\u202a-\u202e"
                          "\u2060\u2066-\u2069\ufeff\ud800-\udfff]")


def printable(text: str) -> str:
    r"""``text`` as one line a terminal shows as it is: each character of ``_UNPRINTABLE``
    written as a Python escape. Applied to every line geomcli prints (transform.echo_stdout,
    echo_stderr, the summary line, click's usage errors), so a file name cannot break a line.

    >>> print(printable("x\ny\x1b[31m.png"), printable("a\udcff.png"))
    x\ny\x1b[31m.png a\udcff.png
    """
    return _UNPRINTABLE.sub(lambda found: repr(found.group())[1:-1], text)


class Report:
    """One file's outcome; the JSON keys are these attributes, in this order.

    A plain class: a dataclass would take a millisecond to define at every start-up, and
    importing dataclasses another (nothing else on a one-file run needs it).
    """

    def __init__(self, command: str, input: str | None, output: str | None, input_shape: list[int] | None = None,
                 input_dtype: str | None = None, output_shape: list[int] | None = None,
                 output_dtype: str | None = None, status: str = "ok", error: str | None = None,
                 parameters: dict[str, Any] | None = None, value_range: list[Any] | None = None,
                 seconds: float | None = None, notes: list[str] | None = None,
                 warnings: list[str] | None = None) -> None:
        self.command = command
        self.input = input
        self.output = output
        self.input_shape = input_shape
        self.input_dtype = input_dtype
        self.output_shape = output_shape
        self.output_dtype = output_dtype
        self.status = status
        self.error = error
        self.parameters: dict[str, Any] = {} if parameters is None else parameters
        self.value_range = value_range
        self.seconds = seconds
        self.notes: list[str] = [] if notes is None else notes
        self.warnings: list[str] = [] if warnings is None else warnings

    def __repr__(self) -> str:
        return f"Report({', '.join(f'{key}={value!r}' for key, value in vars(self).items())})"

    def to_json(self) -> str:
        record = vars(self)
        if self.command == "chain" and "steps" not in record:
            record = {**record, "steps": None}  # a file never read: every chain record has the key
        return strict_json(record)


def summary_json(command: str, *, ok: int, failed: int, skipped: int, not_run: int, total: int, seconds: float,
                 dry_run: bool = False, interrupted: bool = False, listing_finished: bool = True) -> str:
    """A batch's last --json record, with the same keys whether it ran, was refused or was a dry run;
    ``interrupted`` (a run Ctrl-C or SIGTERM ended, its counts so far) adds ``"interrupted": true``,
    and one ended while its inputs were listed ``"listing_finished": false`` (``total`` counts
    those found so far).

    >>> summary_json("crop-pad", ok=2, failed=0, skipped=1, not_run=0, total=3, seconds=0.1234, dry_run=True)
    '{"command": "crop-pad", "status": "summary", "dry_run": true, "ok": 2, "failed": 0, "skipped": 1, \
"not_run": 0, "total": 3, "seconds": 0.123}'
    """
    return strict_json({"command": command, "status": "summary", "dry_run": dry_run, "ok": ok, "failed": failed,
                        "skipped": skipped, "not_run": not_run, "total": total, "seconds": round(seconds, 3),
                        **({"interrupted": True} if interrupted else {}),
                        **({} if listing_finished else {"listing_finished": False})})


def strict_json(record: Mapping[str, Any]) -> str:
    """``record`` as one line of strict JSON: Inf and NaN (Python or numpy floats, at any depth)
    become "Infinity", "-Infinity" and "NaN"; numpy scalars become numbers; anything else JSON
    cannot hold becomes its ``str``.

    >>> strict_json({"value_range": [float("-inf"), 2.5], "n": None})
    '{"value_range": ["-Infinity", 2.5], "n": null}'
    """
    import json  # only for --json: 1 ms of every other one-shot run

    return json.dumps(_json_ready(record), allow_nan=False, default=_json_default)


def _json_ready(value: Any) -> Any:
    if isinstance(value, float):  # np.float64 too
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, Mapping):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(item) for item in value]
    return value


def _json_default(value: Any) -> Any:
    """What json cannot encode itself: a numpy scalar as its number, else its text."""
    if getattr(value, "shape", None) == () and callable(getattr(value, "item", None)):
        item = value.item()
        if isinstance(item, (bool, int, float)):
            return _json_ready(item)
    return str(value)


class InputWarning(str):
    """A warning about a file's input, not what is written (a --layout its image does not take,
    an extension naming another format, a TIFF option for another format): shown after the
    input's name, where any other names the output. Its text is any warning's, in the JSON
    record's ``warnings`` too."""

    __slots__ = ()


def of_input(*warnings: str | None) -> list[str]:
    """The warnings given (None: none), each an :class:`InputWarning`."""
    return [InputWarning(warning) for warning in warnings if warning is not None]


def about(report: Report, warning: str) -> str | None:
    """The file a warning of ``report`` is about: its input's or its output's name, as errors show
    it (``-`` is ``<stdin>`` or ``<stdout>``)."""
    from geomcli.io._base import display_name

    if isinstance(warning, InputWarning):
        return None if report.input is None else display_name(report.input)
    return None if report.output is None else display_name(report.output, output=True)


# said of data that holds NaN (a result, a file info reads): its value range leaves them out
NAN_NOTE = "holds NaN; the value range is of the other values"


def value_range(data: Any) -> list[Any] | None:
    """[min, max] of real numbers, NaN ignored: bool, integers, float16/32/64, bfloat16 and the
    other ml_dtypes types, as Python bools, ints and floats. None for anything else (strings,
    complex, dates and durations, structured or raw bytes, long double) and for empty or
    all-NaN data; never raises."""
    return range_and_nan(data)[0]


def range_and_nan(data: Any) -> tuple[list[Any] | None, bool]:
    """:func:`value_range`, and whether the data holds NaN (which the range leaves out): found
    by the same two passes, min and max, where the data holds none."""
    import numpy as np

    kind = data.dtype.kind
    if (data.size == 0 or kind not in "biufV" or issubclass(data.dtype.type, np.void)
            or kind == "f" and data.dtype.itemsize > 8):
        return None, False
    if kind == "b":
        return [bool(data.min()), bool(data.max())], False
    if kind in "iu":
        return [int(data.min()), int(data.max())], False
    try:
        low, nan = data.min().item(), False
        if isinstance(low, float) and math.isnan(low):  # min passes NaN on: some value is NaN
            low, nan = np.fmin.reduce(data, axis=None).item(), True
            high = np.fmax.reduce(data, axis=None).item()
        else:
            high = data.max().item()
    except TypeError:  # an extension type without a min or fmin loop
        return None, False
    if not isinstance(low, (int, float)) or not isinstance(high, (int, float)) or math.isnan(low):
        return None, nan
    return [low, high], nan


def joined_range(parts: Iterable[tuple[list[Any] | None, bool]]) -> tuple[list[Any] | None, bool]:
    """:func:`range_and_nan` of data from those of its parts (slabs, chunks), with no pass over
    the data: the lowest low and the highest high, and NaN if any part holds some.

    >>> joined_range([([1, 5], False), (None, True), ([-2.5, 3], False)])
    ([-2.5, 5], True)
    """
    low: Any = None
    high: Any = None
    nan = False
    for found, part_nan in parts:
        nan = nan or part_nan
        if found is not None:
            low = found[0] if low is None else min(low, found[0])
            high = found[1] if high is None else max(high, found[1])
    return (None if low is None else [low, high]), nan


def range_text(value_range: list[Any]) -> str:
    """A value range as a summary or info line shows it: a bool image's as False and True (as
    --json gives false and true), not 0 and 1; numbers short (:g).

    >>> range_text([False, True]), range_text([0, 255]), range_text([-0.5, 1e20])
    ('[False, True]', '[0, 255]', '[-0.5, 1e+20]')
    """
    low, high = value_range
    if isinstance(low, bool) and isinstance(high, bool):
        return f"[{low}, {high}]"
    return f"[{low:g}, {high:g}]"


def shape_text(shape: list[int] | tuple[int, ...] | None) -> str:
    """A shape as 2×3×4, "()" for a 0-d array's, "?" for an unknown one."""
    if shape is None:
        return "?"
    return "×".join(map(str, shape)) or "()"  # a 0-d array's empty shape, which would show as nothing


def _plain_line(report: Report) -> str:
    from geomcli.io._base import display_name

    # stdin and stdout as errors and warnings name them (--json keeps "-", the argument given)
    source = "-" if report.input is None else display_name(report.input)
    target = "-" if report.output is None else display_name(report.output, output=True)
    arrow = f"{source} → {target}"
    if report.status != "ok":
        return printable(f"{report.command}: {arrow}: {report.status}: {report.error}")
    if report.input_shape is None:
        shapes = f"{shape_text(report.output_shape)} {report.output_dtype}"
    else:
        shapes = (f"{shape_text(report.input_shape)} {report.input_dtype} → "
                  f"{shape_text(report.output_shape)} {report.output_dtype}")
    parts = [f"{report.command} {arrow}: {shapes}"]
    if report.value_range is not None:
        parts.append(f"range {range_text(report.value_range)}")
    for key, value in report.parameters.items():
        parts.append(f"{key}={_shown(key, value)}")
    if report.seconds is not None:
        parts.append(f"in {report.seconds * 1000:.0f} ms")
    return printable(" ".join(parts)) + "".join(f"\n  note: {printable(note)}" for note in report.notes)


def _shown(key: str, value: Any) -> str:
    """A parameter as the summary line shows it: a chain's steps by name (every step's parameters
    are in its JSON record); a matrix, or the flags that made it, with short numbers (exact in the
    JSON record); anything else as it is."""
    if key == "steps":
        return " → ".join(step["command"] for step in value)
    if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(item, list) for item in value)):
        return _short(value)
    return str(value)


def _short(value: Any) -> str:
    """``value`` with its floats to 6 significant digits: [[0.866025, -0.5, 0], [0.5, 0.866025, 0]].

    >>> _short({"rotate": 30.0, "scale": [2.0, 0.125]})
    '{rotate: 30, scale: [2, 0.125]}'
    """
    if isinstance(value, dict):
        return "{" + ", ".join(f"{name}: {_short(item)}" for name, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_short(item) for item in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def wants_colour(stream: IO[str]) -> bool:
    # no-color.org: NO_COLOR counts when not empty (NO_COLOR= is unset, as rich's progress bar reads it)
    return stream.isatty() and not os.environ.get("NO_COLOR")


def write_line(stream: IO[str], line: str) -> None:
    """The line and its newline in one write: print() makes two where the stream writes through
    (PYTHONUNBUFFERED=1, as many container images set), and under `xargs -P` another process's
    line then lands between them: two JSON records on one line."""
    stream.write(line + "\n")
    stream.flush()


def message_line(stream: IO[str], line: str) -> None:
    """A line for a person on ``stream`` (stderr), as :func:`write_line` writes it. A stream that
    cannot take it (2>/dev/full, a full disk) loses the line, not the run: the files' outcome and
    exit code stand; it was an exit 1 (a traceback nobody saw) after every file was written. A
    reader gone away still ends the run, as on stdout."""
    try:
        write_line(stream, line)
    except BrokenPipeError:
        raise
    except OSError:
        pass


def show(report: Report, stream: IO[str] | None = None) -> None:
    """Write a one-line summary; rich-coloured only on a terminal without NO_COLOR."""
    stream = stream or sys.stderr
    line = _plain_line(report)
    if not wants_colour(stream):
        message_line(stream, line)
        return
    from rich.console import Console
    from rich.markup import escape

    style = "green" if report.status == "ok" else "red"
    head, _, rest = escape(line).partition(" ")
    Console(file=stream, highlight=True, soft_wrap=True).print(f"[bold {style}]{head}[/] {rest}")


def resized_pixels(before: dict[str, dict[str, Any]] | None, after: dict[str, dict[str, Any]] | None) -> list[str]:
    """A note of the pixel sizes (Metadata.pixel_size) an operation changed: space-to-depth's b
    times, a resize's step; none where none changed, nor where the size was dropped (a rotated
    OME-Zarr's scale 1 of no unit, which a warning names: 'y 0.5 → 1 µm' said it was kept).

    >>> resized_pixels({"x": {"size": 0.5, "unit": "µm"}, "y": {"size": 0.25, "unit": "µm"}},
    ...                {"x": {"size": 1.0, "unit": "µm"}, "y": {"size": 0.5, "unit": "µm"}})
    ['pixel size x 0.5 → 1 µm, y 0.25 → 0.5 µm']
    >>> resized_pixels({"x": {"size": 0.5, "unit": "µm"}}, {"x": {"size": 1.0, "unit": None}})
    []
    """
    if not before or not after:
        return []
    changed = [f"{axis} {size['size']:g} → {after[axis]['size']:g}{' ' + size['unit'] if size['unit'] else ''}"
               for axis, size in before.items()
               if axis in after and after[axis]["unit"] == size["unit"]
               and not math.isclose(after[axis]["size"], size["size"])]
    return [f"pixel size {', '.join(changed)}"] if changed else []
