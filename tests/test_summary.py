"""Reports: plain lines off a terminal, rich on one, JSON keys, value ranges."""

from __future__ import annotations

import io
import json

import ml_dtypes
import numpy as np
import pytest

from geomcli.summary import Report, show, value_range


def report() -> Report:
    return Report("crop-pad", "in.png", "out.png", [4, 6, 3], "uint8", [2, 2, 3], "uint8",
                  parameters={"shape": [2, 2]}, value_range=[0, 255], seconds=0.0123)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_line_when_not_a_terminal() -> None:
    stream = io.StringIO()
    show(report(), stream)
    assert stream.getvalue() == (
        "crop-pad in.png → out.png: 4×6×3 uint8 → 2×2×3 uint8 range [0, 255] shape=[2, 2] in 12 ms\n"
    )


def test_a_line_keeps_double_spaces_in_paths_and_the_note_indent() -> None:
    stream = io.StringIO()
    line = Report("crop-pad", "my  shots/a.png", "out  dir/a.png", [4, 6, 3], "uint8", [2, 2, 3], "uint8",
                  notes=["turned upright by its EXIF orientation"])
    show(line, stream)
    assert stream.getvalue() == ("crop-pad my  shots/a.png → out  dir/a.png: 4×6×3 uint8 → 2×2×3 uint8\n"
                                 "  note: turned upright by its EXIF orientation\n")


def test_colour_on_a_terminal_unless_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    stream = Terminal()
    show(report(), stream)
    assert "\x1b[" in stream.getvalue() and "in.png → out.png" in stream.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    plain = Terminal()
    show(report(), plain)
    assert "\x1b[" not in plain.getvalue()


def test_json_keys() -> None:
    record = json.loads(report().to_json())
    for key in ("command", "input", "output", "input_shape", "input_dtype", "output_shape",
                "output_dtype", "status", "error"):
        assert key in record
    assert record["status"] == "ok" and record["error"] is None


@pytest.mark.parametrize("data, expected", [
    (np.array([3, -2, 7], np.int8), [-2, 7]),
    (np.array([0.5, np.nan, -1.5], np.float32), [-1.5, 0.5]),
    (np.array([np.nan], np.float64), None),
    (np.array([True, False]), [False, True]),
    (np.array([1.5, 2.5], ml_dtypes.bfloat16), [1.5, 2.5]),
    (np.array([1 + 2j]), None),
    (np.array(["a"]), None),
    (np.zeros((0, 3)), None),
])
def test_value_range(data: np.ndarray, expected: list[object] | None) -> None:
    assert value_range(data) == expected
