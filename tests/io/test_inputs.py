"""What users type and feed: number options, --fill, the dtypes a .npy may hold and JSON output,
through the command line. Bad input ends in one `Error:` line and exit 2 (usage) or 1 (a file),
never a traceback or a numpy RuntimeWarning."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from click.testing import Result
from conftest import run

import geomcli.ops.center_crop_pad as crop_ops
from geomcli import io
from geomcli.engine.operations import parse_fill
from geomcli.errors import GeomError

GEOMCLI = [sys.executable, "-m", "geomcli"]


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


# --- affine-grid: every number that builds theta is finite and fits the grid dtype -------------


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400", "-1e400"])
@pytest.mark.parametrize("option, spelled", [
    ("--rotate", "{}"), ("--scale", "{}"), ("--scale", "1,{}"), ("--translate", "{},0"),
    ("--shear", "0,{}"), ("--theta", "1,0,0,0,1,{}"),
])
def test_affine_grid_refuses_numbers_that_are_not_finite(tmp_path: Path, option: str, spelled: str,
                                                         value: str) -> None:
    out = tmp_path / "g.npy"
    result = run("affine-grid", "--size", "1,1,2,2", option, spelled.format(value), "-o", out)
    assert_usage_error(result, option, "finite")
    assert not out.exists()


def test_affine_grid_refuses_a_non_finite_theta_with_like_too(tmp_path: Path) -> None:
    like = tmp_path / "like.npy"
    np.save(like, np.zeros((2, 3, 4), np.float32))
    result = run("affine-grid", "--like", like, "--layout", "CHW", "--theta", "1,0,0,0,1,nan", "-o", tmp_path / "g.npy")
    assert_usage_error(result, "--theta", "finite")


def test_affine_grid_refuses_flags_whose_matrix_overflows(tmp_path: Path) -> None:
    # each finite, but scale · shear is 1e400
    result = run("affine-grid", "--size", "1,1,2,2", "--scale", "1e200", "--shear", "1e200,0", "-o", tmp_path / "g.npy")
    assert_usage_error(result, "--scale", "overflow")
    assert "'--shear'" in result.stderr


@pytest.mark.parametrize("dtype, value", [("float32", "1e39"), ("float32", "-3.5e38"), ("float16", "65520"),
                                          ("bfloat16", "3.4e38"), ("float16", "1e300")])
def test_affine_grid_refuses_a_theta_number_beyond_the_grid_dtype(tmp_path: Path, dtype: str, value: str) -> None:
    out = tmp_path / "g.npy"
    result = run("affine-grid", "--size", "1,1,2,2", "--dtype", dtype, "--theta", f"{value},0,0,0,1,0", "-o", out)
    assert_usage_error(result, "--theta", dtype)
    assert not out.exists()


def test_affine_grid_refuses_a_flag_beyond_the_grid_dtype(tmp_path: Path) -> None:
    result = run("affine-grid", "--size", "1,1,2,2", "--translate", "1e39,0", "-o", tmp_path / "g.npy")
    assert_usage_error(result, "--translate", "float32")


def test_affine_grid_takes_the_largest_numbers_that_fit(tmp_path: Path) -> None:
    out = tmp_path / "g.npy"
    result = run("affine-grid", "--size", "1,1,1,1", "--dtype", "float16", "--theta", "65504,0,0,0,1,0", "-o", out)
    assert result.exit_code == 0 and "Warning" not in result.stderr
    big = run("affine-grid", "--size", "1,1,2,2", "--dtype", "float64", "--scale", "1e300", "-o", out)
    assert big.exit_code == 0 and "Warning" not in big.stderr
    assert np.load(out)[0, 1, 1].tolist() == [0.5e300, 0.5e300]


def test_affine_grid_theta_file_beyond_the_grid_dtype_is_that_files_error(tmp_path: Path) -> None:
    theta = tmp_path / "theta.npy"
    np.save(theta, np.array([[1e39, 0, 0], [0, 1, 0]]))
    result = run("affine-grid", "--size", "1,1,2,2", "--theta", theta, "--dtype", "float32", "-o", tmp_path / "g.npy")
    assert result.exit_code == 1
    assert error_lines(result.stderr) == [f"Error: {theta}: theta value 1e+39 does not fit the float32 grid "
                                          "(largest ±3.40282e+38)"]


@pytest.mark.parametrize("value", [np.inf, np.nan])
def test_affine_grid_theta_file_may_hold_inf_and_nan(tmp_path: Path, value: float) -> None:
    # the kernel takes NaN and Inf in theta (the ONNX reference does): only a finite value turned Inf is refused
    theta, out = tmp_path / "theta.npy", tmp_path / "g.npy"
    np.save(theta, np.array([[value, 0, 0], [0, 1, 0]]))
    result = run("affine-grid", "--size", "1,1,2,2", "--theta", theta, "--dtype", "float32", "-o", out)
    assert result.exit_code == 0 and "NaN or Inf" in result.stderr
    assert not np.isfinite(np.load(out)[..., 0]).any()


@pytest.mark.parametrize("args", [
    ["--rotate", "inf"], ["--scale", "1e400"], ["--scale", "1e300"], ["--theta", "1e39,0,0,0,1,0"],
    ["--dtype", "float16", "--translate", "70000,0"],
])
def test_affine_grid_no_traceback_or_numpy_warning_in_a_real_run(tmp_path: Path, args: list[str]) -> None:
    result = subprocess.run([*GEOMCLI, "affine-grid", "--size", "1,1,2,2", *args, "-o", str(tmp_path / "g.npy")],
                            capture_output=True, text=True)
    assert "Traceback" not in result.stderr and "RuntimeWarning" not in result.stderr, result.stderr
    assert result.returncode in (0, 2) and len(error_lines(result.stderr)) == (result.returncode == 2)


# --- crop-pad --fill, read in the light of the input's dtype -----------------------------------


@pytest.mark.parametrize("dtype, text, expected", [
    ("float32", "1.5", 1.5), ("float32", "inf", math.inf), ("float16", "-Infinity", -math.inf),
    ("uint8", "255", 255), ("int64", "-9223372036854775808", -(2**63)),
    ("bool", "true", True), ("bool", "FALSE", False), ("bool", "True", True), ("bool", "1", 1), ("bool", "0", 0),
    ("<U2", "7", "7"), ("<U2", "ab", "ab"), ("|S2", "7", "7"), ("<U3", "inf", "inf"), ("<U5", "1e400", "1e400"),
    ("complex64", "1+2j", 1 + 2j), ("complex128", "3", 3),
])
def test_parse_fill(dtype: str, text: str, expected: object) -> None:
    value = parse_fill(text, np.dtype(dtype))
    assert value == expected and type(value) is type(expected)


def test_parse_fill_nan_stays_nan() -> None:
    value = parse_fill("nan", np.dtype(np.float32))
    assert isinstance(value, float) and math.isnan(value)


@pytest.mark.parametrize("text, dtype", [
    *((text, dtype) for text in ("1e400", "-1e400", "1" + "0" * 5000)
      for dtype in ("float16", "float32", "float64", "int8", "bool", "complex64")),
    ("1e400+1j", "complex64"), ("1-1e400j", "complex128"),
], ids=lambda value: value[:8])
def test_parse_fill_refuses_a_finite_spelling_that_overflows(text: str, dtype: str) -> None:
    with pytest.raises(GeomError, match=r"^fill value '.*' overflows to infinity; write inf or -inf for an infinite "
                                        r"pad value$"):
        parse_fill(text, np.dtype(dtype))


@pytest.mark.parametrize("dtype, text", [
    ("float32", "1.5"), ("float32", "-inf"), ("float32", "nan"), ("float16", "65504"), ("uint8", "255"),
    ("bool", "true"), ("bool", "0"), ("<U2", "7"), ("<U2", "ab"), ("|S2", "xy"), ("complex64", "1-1j"),
])
def test_what_parse_fill_reads_the_kernel_takes(dtype: str, text: str) -> None:
    padded = crop_ops.center_crop_pad(np.zeros(1, dtype), [2], fill=parse_fill(text, np.dtype(dtype)))
    assert padded.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype, text", [
    ("float16", "65520"), ("float32", "1e39"), ("uint8", "256"), ("uint8", "0.5"), ("bool", "2"), ("bool", "yes"),
    ("<U2", "abc"), ("int8", "x"),
])
def test_what_does_not_fit_the_kernel_refuses(dtype: str, text: str) -> None:
    with pytest.raises(GeomError, match=r"^center_crop_pad: fill value .* does not fit dtype"):
        crop_ops.center_crop_pad(np.zeros(1, dtype), [2], fill=parse_fill(text, np.dtype(dtype)))


def _fill_run(tmp_path: Path, data: np.ndarray, fill: str, dry_run: bool) -> tuple[Result, Path]:
    source = tmp_path / "in.npy"
    np.save(source, data)
    if dry_run:
        return run("crop-pad", source, "--out-dir", tmp_path / "out", "--dry-run", "--shape", "3",
                   "--fill", fill), source
    out = tmp_path / "out.npy"
    return run("crop-pad", source, "-o", out, "--shape", "3", "--fill", fill), out


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
@pytest.mark.parametrize("dtype, fill, padded", [
    ("<U2", "7", "7"), ("|S2", "7", b"7"), ("bool", "true", True), ("bool", "False", False), ("bool", "1", True),
    ("float16", "inf", math.inf), ("float32", "-inf", -math.inf), ("complex64", "2-1j", 2 - 1j),
])
def test_crop_pad_fill_in_the_inputs_dtype(tmp_path: Path, dry_run: bool, dtype: str, fill: str,
                                           padded: object) -> None:
    data = np.zeros(2, dtype)
    result, out = _fill_run(tmp_path, data, fill, dry_run)
    assert result.exit_code == 0 and error_lines(result.stderr) == [], result.output
    if not dry_run:
        assert np.load(out).tolist()[-1] == padded


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
@pytest.mark.parametrize("dtype, fill, reason", [
    ("float16", "1e400", "fill value '1e400' overflows to infinity; write inf or -inf for an infinite pad value"),
    ("float32", "1e400", "fill value '1e400' overflows to infinity; write inf or -inf for an infinite pad value"),
    ("float16", "65520", "center_crop_pad: fill value 65520 does not fit dtype float16 (input shape (2,))"),
    ("float32", "1e39", "center_crop_pad: fill value 1e+39 does not fit dtype float32 (input shape (2,))"),
    ("<U2", "abc", "center_crop_pad: fill value 'abc' does not fit dtype <U2 (input shape (2,))"),
    ("bool", "yes",
     "center_crop_pad: fill value 'yes' does not fit dtype bool (text for a bool type; input shape (2,))"),
    ("uint8", "255,0,0", "fill value '255,0,0' is several numbers: one value serves every channel"),
])
def test_crop_pad_refuses_a_fill_the_same_way_with_and_without_dry_run(tmp_path: Path, dry_run: bool, dtype: str,
                                                                      fill: str, reason: str) -> None:
    result, out = _fill_run(tmp_path, np.zeros(2, dtype), fill, dry_run)
    # a usage fault either way (exit 2): -o's from what it read, a batch's --dry-run from the header
    assert result.exit_code == 2
    assert error_lines(result.stderr)[0] == f"Error: {tmp_path / 'in.npy'}: {reason}"
    assert dry_run or not out.exists()


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


@pytest.mark.parametrize(("on_disk", "asked", "form"), [("cafe\u0301.png", "caf\u00e9.png", "NFD"),
                                                        ("caf\u00e9.png", "cafe\u0301.png", "NFC")])
def test_a_name_there_in_the_other_unicode_normalisation_is_named_so(
        tmp_path: Path, on_disk: str, asked: str, form: str) -> None:
    """A list made on macOS (NFD names) read 'Error: café.png: no such file' beside a café.png
    that ls shows, the two spelling é differently and looking alike."""
    np.save(tmp_path / "a.npy", np.zeros((2, 2), np.uint8))
    (tmp_path / "a.npy").rename(tmp_path / on_disk)
    with pytest.raises(GeomError) as error:
        io.read_array(str(tmp_path / asked))
    assert str(error.value) == (f"{tmp_path / asked}: no such file, but the same name with its accents in Unicode "
                                f"{form} is there (the two look alike)")
    with pytest.raises(GeomError, match=r"gon\u00e9\.png: no such file$"):
        io.read_array(str(tmp_path / "gon\u00e9.png"))
