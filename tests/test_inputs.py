"""What users type and feed: number options, --fill, the dtypes a .npy may hold and JSON output,
through the command line. Bad input ends in one `Error:` line and exit 2 (usage) or 1 (a file),
never a traceback or a numpy RuntimeWarning."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner, Result

from geomcli import io
from geomcli.cli import cli

GEOMCLI = [sys.executable, "-m", "geomcli"]


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args], catch_exceptions=False)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error: ")]


def assert_usage_error(result: Result, option: str, *words: str) -> None:
    assert result.exit_code == 2, result.output
    (line,) = error_lines(result.stderr)
    assert f"'{option}'" in line and all(word in line for word in words), line
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr


def json_strictly(text: str) -> Any:
    """Parse as JSON.parse would: no NaN, Infinity or -Infinity literals."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


# --- the dtypes a .npy may hold ------------------------------------------------------------------


REFUSED = [
    np.dtype("datetime64[D]"), np.dtype("timedelta64[s]"), np.dtype(np.longdouble), np.dtype(np.clongdouble),
    np.dtype("V4"), np.dtype([("a", "<f4"), ("b", "<i4")]),
]
if np.dtype(np.longdouble).itemsize == 8:  # where long double is double, it is float64 and read
    REFUSED = REFUSED[:2] + REFUSED[4:]


@pytest.mark.parametrize("dtype", REFUSED, ids=str)
@pytest.mark.parametrize("command", [["info"], ["info", "--json"], ["crop-pad", "--shape", "1", "-o", "OUT"],
                                     ["crop-pad", "--shape", "1", "--out-dir", "OUT", "--dry-run"]],
                         ids=["info", "info-json", "crop-pad", "dry-run"])
def test_npy_of_a_type_geomcli_does_not_take_is_one_error_line(tmp_path: Path, dtype: np.dtype,
                                                                command: list[str]) -> None:
    source = tmp_path / "odd.npy"
    np.save(source, np.zeros(2, dtype))
    args = [str(tmp_path / "out.npy") if arg == "OUT" else arg for arg in command]
    result = run(*args, source)
    assert result.exit_code == 1
    (line,) = error_lines(result.stderr)
    assert line == (f"Error: {source}: dtype {dtype} is not an ONNX tensor type geomcli reads; it takes bool, "
                    "int8-int64, uint8-uint64, float16/32/64, bfloat16 (and ml_dtypes' float8 and int4 types), "
                    "complex64/128 and strings")
    if "--json" in command:
        assert json_strictly(result.stdout)["status"] == "error"


@pytest.mark.parametrize("data", [
    np.array([1, 2], ">f8"), np.array(["ab"], "<U2"), np.array([b"ab"], "S2"), np.array([1 + 1j], np.complex128),
    np.arange(4).astype(ml_dtypes.bfloat16), np.array([True]),
], ids=lambda data: str(data.dtype))
def test_info_shows_the_types_it_takes(tmp_path: Path, data: np.ndarray) -> None:
    source = tmp_path / "ok.npy"
    io.write_array(data, str(source))  # np.save would write bfloat16 as raw bytes, '<V2'
    result = run("info", "--json", source)
    assert result.exit_code == 0 and result.stderr == ""
    assert json_strictly(result.stdout)["dtype"] == str(data.dtype)


# --- JSON ---------------------------------------------------------------------------------------


def test_crop_pad_json_is_strict_with_inf_and_nan(tmp_path: Path) -> None:
    source, out = tmp_path / "inf.npy", tmp_path / "out.npy"
    np.save(source, np.array([-np.inf, np.nan, np.inf], np.float32))
    result = run("crop-pad", source, "-o", out, "--shape", "4", "--fill", "nan", "--json")
    assert result.exit_code == 0
    record = json_strictly(result.stdout)
    assert record["value_range"] == ["-Infinity", "Infinity"]
    assert [float(value) for value in record["value_range"]] == [-math.inf, math.inf]
