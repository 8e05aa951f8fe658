"""The package, its benchmarks and scripts are fully annotated, mypy --strict and ruff clean (STYLE.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_strict_is_clean(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path), "geomcli", "benchmarks",
                             "scripts", "samples/make_samples.py"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


RUFF_CLEAN = ["geomcli", "tests", "scripts", "benchmarks", "samples"]


def test_ruff_is_clean() -> None:
    pytest.importorskip("ruff")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *RUFF_CLEAN],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
