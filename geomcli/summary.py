"""What a run reports, as plain data, and how it is shown: rich on a terminal, plain text
elsewhere, JSON on request. rich is imported only when it will draw."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, field
from typing import IO, Any


@dataclass
class Report:
    """One file's outcome; the JSON keys are these field names."""

    command: str
    input: str | None
    output: str | None
    input_shape: list[int] | None = None
    input_dtype: str | None = None
    output_shape: list[int] | None = None
    output_dtype: str | None = None
    status: str = "ok"
    error: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    value_range: list[Any] | None = None
    seconds: float | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        import json  # only for --json: 1 ms of every other one-shot run

        return json.dumps(asdict(self), default=str)


def value_range(data: Any) -> list[Any] | None:
    """[min, max] of real data, NaN ignored; None for strings, complex, empty or all-NaN data."""
    import numpy as np

    if data.size == 0 or data.dtype.kind in "USVOc" and data.dtype.name != "bfloat16":
        return None
    if data.dtype.kind == "b":
        return [bool(data.min()), bool(data.max())]
    if data.dtype.kind in "iu":
        return [int(data.min()), int(data.max())]
    low, high = np.fmin.reduce(data, axis=None), np.fmax.reduce(data, axis=None)
    if np.isnan(float(low)):
        return None
    return [float(low), float(high)]


def _shape(shape: list[int] | None) -> str:
    return "×".join(map(str, shape)) if shape is not None else "?"


def _plain_line(report: Report) -> str:
    arrow = f"{report.input or '-'} → {report.output or '-'}"
    if report.status != "ok":
        return f"{report.command}: {arrow}: {report.status}: {report.error}"
    if report.input_shape is None:
        shapes = f"{_shape(report.output_shape)} {report.output_dtype}"
    else:
        shapes = (f"{_shape(report.input_shape)} {report.input_dtype} → "
                  f"{_shape(report.output_shape)} {report.output_dtype}")
    parts = [f"{report.command} {arrow}: {shapes}"]
    if report.value_range is not None:
        parts.append(f"range [{report.value_range[0]:g}, {report.value_range[1]:g}]")
    parts.extend(f"{key}={value}" for key, value in report.parameters.items())
    if report.seconds is not None:
        parts.append(f"in {report.seconds * 1000:.0f} ms")
    return " ".join(parts) + "".join(f"\n  note: {note}" for note in report.notes)


def wants_colour(stream: IO[str]) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ


def show(report: Report, stream: IO[str] | None = None) -> None:
    """Write a one-line summary; rich-coloured only on a terminal without NO_COLOR."""
    stream = stream or sys.stderr
    line = _plain_line(report)
    if not wants_colour(stream):
        print(line, file=stream)
        return
    from rich.console import Console
    from rich.markup import escape

    style = "green" if report.status == "ok" else "red"
    head, _, rest = escape(line).partition(" ")
    Console(file=stream, highlight=True, soft_wrap=True).print(f"[bold {style}]{head}[/] {rest}")
