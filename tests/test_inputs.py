"""What users type and feed: number options, --fill, the dtypes a .npy may hold and JSON output,
through the command line. Bad input ends in one `Error:` line and exit 2 (usage) or 1 (a file),
never a traceback or a numpy RuntimeWarning."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
from click.testing import CliRunner, Result

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


# --- JSON ---------------------------------------------------------------------------------------


def test_crop_pad_json_is_strict_with_inf_and_nan(tmp_path: Path) -> None:
    source, out = tmp_path / "inf.npy", tmp_path / "out.npy"
    np.save(source, np.array([-np.inf, np.nan, np.inf], np.float32))
    result = run("crop-pad", source, "-o", out, "--shape", "4", "--fill", "nan", "--json")
    assert result.exit_code == 0
    record = json_strictly(result.stdout)
    assert record["value_range"] == ["-Infinity", "Infinity"]
    assert [float(value) for value in record["value_range"]] == [-math.inf, math.inf]
