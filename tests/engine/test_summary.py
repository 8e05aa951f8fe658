"""Reports: plain lines off a terminal, rich on one, JSON keys, value ranges."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from geomcli.engine.report import echo_stderr, echo_stdout
from geomcli.engine.summary import Report, show, strict_json, value_range
from geomcli.errors import GeomError


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


class Writes(io.StringIO):
    """A stream that writes through, as stdout and stderr do under PYTHONUNBUFFERED=1: each write()
    is one write(2), which another process's line can follow at once (xargs -P)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_each_line_is_one_write_so_parallel_runs_cannot_split_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ls *.png | PYTHONUNBUFFERED=1 xargs -P4 geomcli info --json` gave lines holding two records
    (print() wrote a record, then its newline, in two writes)."""
    out, err = Writes(), Writes()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    echo_stdout(strict_json({"input": "a.png", "status": "ok"}))
    echo_stderr("Error: b.png: no such file")
    show(report())
    assert out.calls == ['{"input": "a.png", "status": "ok"}\n']
    assert err.calls == ["Error: b.png: no such file\n",
                         "crop-pad in.png → out.png: 4×6×3 uint8 → 2×2×3 uint8 range [0, 255] shape=[2, 2] in 12 ms\n"]


def test_colour_on_a_terminal_unless_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    stream = Terminal()
    show(report(), stream)
    assert "\x1b[" in stream.getvalue() and "in.png → out.png" in stream.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    plain = Terminal()
    show(report(), plain)
    assert "\x1b[" not in plain.getvalue()


def test_an_empty_no_color_keeps_the_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    # no-color.org: NO_COLOR counts when not empty; NO_COLOR= took the colour away (rich's bar kept it)
    monkeypatch.setenv("NO_COLOR", "")
    stream = Terminal()
    show(report(), stream)
    assert "\x1b[" in stream.getvalue()


def test_json_keys() -> None:
    record = json.loads(report().to_json())
    assert list(record) == ["command", "input", "output", "input_shape", "input_dtype", "output_shape",
                            "output_dtype", "status", "error", "parameters", "value_range", "seconds", "notes",
                            "warnings"]
    assert record["status"] == "ok" and record["error"] is None
    assert record["parameters"] == {"shape": [2, 2]} and record["notes"] == record["warnings"] == []


def test_reports_do_not_share_their_lists() -> None:
    first, second = Report("crop-pad", "a.png", "b.png"), Report("crop-pad", "c.png", "d.png")
    first.notes.append("a note")
    first.parameters["shape"] = [1, 1]
    assert second.notes == [] and second.parameters == {}
    assert repr(second).startswith("Report(command='crop-pad', input='c.png', output='d.png', input_shape=None")


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


@pytest.mark.parametrize("data, expected", [
    (np.array(["2020-01-01", "2021-06-30"], "datetime64[D]"), None),
    (np.array([1, 2], "timedelta64[s]"), None),
    (np.zeros(2, [("a", "<f4"), ("b", "<i4")]), None),
    (np.zeros(2, "V4"), None),
    (np.array([1, 2], np.longdouble), None),
    (np.array([b"a"]), None),
    (np.array([1.0, 3.0], ml_dtypes.float8_e4m3fn), [1.0, 3.0]),
    (np.array([1.0, 3.0], ml_dtypes.float8_e5m2), [1.0, 3.0]),
    (np.array([-3, 5], ml_dtypes.int4), [-3, 5]),
    (np.array([-np.inf, 1.0, np.inf], np.float32), [-np.inf, np.inf]),
])
def test_value_range_of_every_kind_never_raises(data: np.ndarray, expected: list[object] | None) -> None:
    found = value_range(data)
    assert found == expected
    assert found is None or all(type(value) in (int, float) for value in found)


def test_strict_json_names_what_json_cannot_hold() -> None:
    record = {"value_range": [-np.inf, np.inf], "nested": {"x": (np.nan, 1.5)}, "n": 3, "ok": True, "none": None}
    text = strict_json(record)
    assert text == ('{"value_range": ["-Infinity", "Infinity"], "nested": {"x": ["NaN", 1.5]}, "n": 3, '
                    '"ok": true, "none": null}')
    # the strings read back as the numbers with float() (JavaScript's Number() reads them too)
    back = json.loads(text, parse_constant=pytest.fail)
    assert [float(value) for value in back["value_range"]] == [-math.inf, math.inf]
    assert math.isnan(float(back["nested"]["x"][0]))


def test_strict_json_maps_numpy_scalars_too() -> None:
    assert strict_json({"a": np.float32(np.inf), "b": np.float64(-np.inf), "c": np.int64(7), "d": np.float32(0.5)}) == (
        '{"a": "Infinity", "b": "-Infinity", "c": 7, "d": 0.5}')


def test_report_json_is_strict() -> None:
    record = Report("info", "inf.npy", None, value_range=[-math.inf, math.nan], parameters={"fill": math.inf})
    text = record.to_json()
    assert text == strict_json(vars(record))
    back = json.loads(text, parse_constant=pytest.fail)
    assert back["value_range"] == ["-Infinity", "NaN"] and back["parameters"] == {"fill": "Infinity"}


def test_a_matrix_and_its_flags_are_shown_short_in_the_line_and_exact_in_json() -> None:
    theta = [[0.9848077297210693, -0.1736481785774231, 0.0], [0.1736481785774231, 0.9848077297210693, 0.0]]
    parameters = {"theta": theta, "flags": {"rotate": 10.0, "scale": [2.0]}, "size": None}
    stream = io.StringIO()
    show(Report("warp", "in.png", "out.png", [4, 6, 3], "uint8", [4, 6, 3], "uint8", parameters=parameters), stream)
    assert stream.getvalue() == ("warp in.png → out.png: 4×6×3 uint8 → 4×6×3 uint8 theta=[[0.984808, -0.173648, 0], "
                                 "[0.173648, 0.984808, 0]] flags={rotate: 10, scale: [2]} size=None\n")
    assert json.loads(Report("warp", None, None, parameters=parameters).to_json())["parameters"] == parameters


@pytest.mark.parametrize(("values", "expected"), [
    ([1.0, float("nan"), 3.0], ([1.0, 3.0], True)),
    ([float("nan")] * 3, (None, True)),
    ([float("inf"), -2.0], ([-2.0, float("inf")], False)),
    ([1, 5], ([1, 5], False)),
])
def test_a_range_says_whether_it_left_nan_out(values: list[float], expected: tuple[list[float] | None, bool]) -> None:
    from geomcli.engine import slabs
    from geomcli.engine.summary import range_and_nan

    assert range_and_nan(np.array(values)) == expected
    assert slabs.range_and_nan(np.array(values)) == expected


def test_a_result_that_holds_nan_says_so(tmp_path: Path) -> None:
    """The summary's range leaves NaN out: the note says there are some (a try-out padded with
    --fill nan and read a range of [0, 1] with no word of them)."""
    from conftest import run

    np.save(tmp_path / "f.npy", np.ones((4, 6, 3), np.float32))
    result = run("crop-pad", tmp_path / "f.npy", "--layout", "HWC", "--shape", "6,6", "--fill", "nan", "-o",
                 tmp_path / "o.npy", "--json")
    record = json.loads(result.stdout)
    assert record["value_range"] == [1.0, 1.0]
    assert "holds NaN; the value range is of the other values" in record["notes"]
    info = run("info", tmp_path / "o.npy")
    assert info.stdout.startswith(f"{tmp_path / 'o.npy'}: npy 6×6×3 float32") and "range [1, 1] and NaN" in info.stdout
    described = json.loads(run("info", "--json", tmp_path / "o.npy").stdout)
    assert described["value_range"] == [1.0, 1.0]
    assert "holds NaN; the value range is of the other values" in described["notes"]


def test_the_progress_rate_is_files_a_second_since_the_start_even_in_bursts() -> None:
    """A cluster's task reports its files at once: 20 files 2 s into a run are 10 files a second
    (rich's own speed, over its last samples, read such a burst as thousands)."""
    from geomcli.engine import report

    clock = [100.0]
    progress = report._progress_bar()
    progress.get_time = lambda: clock[0]  # type: ignore[method-assign]
    task = progress.add_task("crop-pad", total=120)
    progress.start_task(task)
    clock[0] += 2.0
    for _ in range(20):
        progress.advance(task)  # all at one instant
    rate = next(column for column in progress.columns if type(column).__name__ == "RateAndTimeLeft")
    assert rate.render(progress.tasks[0]).plain == "10.0 files/s 0:10 left"


def test_a_warning_names_a_pipe_as_errors_do() -> None:
    from geomcli.engine.summary import InputWarning, about

    report = Report("crop-pad", "-", "-")
    assert about(report, InputWarning("--layout CHW is for tensors")) == "<stdin>"  # it read "-"
    assert about(report, "a big output is written through a memory map") == "<stdout>"


def test_outcomes_show_reports_in_input_order_as_soon_as_those_before_are_in(
        capsys: pytest.CaptureFixture[str]) -> None:
    """-j N shows what -j 1 shows: reports that come out of order wait for those before them,
    in one pass each (reports in reverse order took a min() of all those waiting each: quadratic)."""
    from geomcli.engine.options import Common
    from geomcli.engine.report import Outcomes

    total = 20_000
    with Outcomes("crop-pad", Common(json=True), total) as outcomes:
        for index in [2, 0, 1]:
            outcomes.add(index, Report("crop-pad", f"{index}.png", f"o{index}.png"))
        assert outcomes.shown == 3 and not outcomes.waiting
        for index in reversed(range(3, total)):
            outcomes.add(index, Report("crop-pad", f"{index}.png", f"o{index}.png"))
        assert outcomes.shown == total
        assert outcomes.finish(1.0) == 0
    shown = [json.loads(line)["input"] for line in capsys.readouterr().out.splitlines()[:-1]]
    assert shown == [f"{index}.png" for index in range(total)]


@pytest.mark.parametrize("ending", [GeomError("the Dask scheduler went away mid-run"), KeyboardInterrupt()])
def test_a_run_ended_by_an_error_still_shows_the_reports_that_came(
        capsys: pytest.CaptureFixture[str], ending: BaseException) -> None:
    """A joined cluster's scheduler killed mid-run: the files whose reports had come, behind one
    that never reported, got no record at all (their outputs placed, unreported). A run ended by
    that one error shows them, in order; a Ctrl-C with --json shows them too, then the summary of
    a run cut short (a pipeline reading the records could not tell it had ended early)."""
    from geomcli.engine.options import Common
    from geomcli.engine.report import Outcomes

    with pytest.raises(type(ending)), Outcomes("crop-pad", Common(json=True), 5) as outcomes:
        for index in [3, 1, 2]:  # 0, in flight, never reports
            outcomes.add(index, Report("crop-pad", f"{index}.png", f"o{index}.png"))
        assert capsys.readouterr().out == ""
        raise ending
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    if isinstance(ending, KeyboardInterrupt):
        *records, last = records
        assert last | {"seconds": 0} == {"command": "crop-pad", "status": "summary", "dry_run": False, "ok": 3,
                                         "failed": 0, "skipped": 0, "not_run": 2, "total": 5, "seconds": 0,
                                         "interrupted": True}
    assert [record["input"] for record in records] == ["1.png", "2.png", "3.png"]


@pytest.mark.parametrize("second", [False, True])
def test_a_signal_while_a_report_is_shown_leaves_the_summary_counting_its_records(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, second: bool) -> None:
    """SIGTERM whose handler ran between a report's count and its record (in CI: the summary said
    ok 2 after one record) left an interrupted run's summary counting a file with no record. The
    handler now notes a first signal there and the count and record finish first; a second
    signal raises at once (a record stuck on a pipe nobody reads must not hold the run)."""
    import os
    import signal

    from geomcli import io as geomcli_io
    from geomcli.cli import group
    from geomcli.engine.options import Common
    from geomcli.engine.report import Outcomes

    monkeypatch.setattr(geomcli_io._atomic, "signals_taken", [])
    previous = signal.signal(signal.SIGTERM, group._terminate)
    made = Report.to_json

    def signalled(report: Report) -> str:  # the record is being made when the signal comes
        if report.input == "1.png":
            os.kill(os.getpid(), signal.SIGTERM)
            if second:
                os.kill(os.getpid(), signal.SIGTERM)
        return made(report)

    monkeypatch.setattr(Report, "to_json", signalled)
    try:
        with pytest.raises(SystemExit) as ended, Outcomes("crop-pad", Common(json=True), 3) as outcomes:
            for index in range(3):
                outcomes.add(index, Report("crop-pad", f"{index}.png", f"o{index}.png"))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert ended.value.code == 143
    *records, last = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert last["status"] == "summary" and last["interrupted"]
    if second:  # raised inside the record's making: not shown (counted, as the run is ending at once)
        assert [record["input"] for record in records] == ["0.png"]
        return
    assert [record["input"] for record in records] == ["0.png", "1.png"]
    assert last["ok"] == 2 and last["not_run"] == 1
