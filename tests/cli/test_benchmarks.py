"""The benchmark scripts still run (on tiny inputs): a refactor must not leave them broken."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_batch_benchmark_runs_on_a_few_images(tmp_path: Path) -> None:
    result = run("benchmarks/batch.py", "--count", "4", "--work", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "geomcli -j 2" in result.stdout and "per-file overhead" in result.stdout


def test_kernel_benchmark_runs_one_quick_case() -> None:
    result = run("benchmarks/kernels.py", "--quick", "--case", "crop u8")
    assert result.returncode == 0, result.stderr
    assert "crop u8" in result.stdout and "ort ok, ref ok" in result.stdout


def test_the_start_up_and_one_shot_rows_are_measured(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import run as suite  # benchmarks/run.py
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    rows = suite.start_up(1) + suite.one_shot(str(tmp_path), 1)
    assert [row.case for row in rows[:2]] == ["python -c pass", "geomcli --version"]
    one_shot = [row for row in rows if row.section == "one-shot"]
    assert any(row.against.startswith("script: python+click+Pillow") and row.ratio for row in one_shot)
    assert all(row.geomcli.endswith(" ms") for row in rows)


def test_the_one_shots_against_plain_scripts_run_once_each() -> None:
    # python -m geomcli: the tree under test, installed or not; one round, no warm-up (a few seconds)
    result = run("benchmarks/oneshot.py", "--repeats", "1", "--warm-up", "0", "--module")
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if "<= 1.5x" in line]
    assert len(rows) == 4, result.stdout
    assert all("DIFFERENT" not in row for row in rows), result.stdout


def test_the_resize_comparison_prints_its_table() -> None:
    # torch and OpenCV are optional here: without them their rows say so
    result = run("benchmarks/resize_compare.py")
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| resize | geomcli against |") and len(rows) == 19, result.stdout


@pytest.mark.cluster
def test_cluster_benchmark_runs_on_a_few_images(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    result = run("benchmarks/cluster.py", "--count", "4", "--rounds", "1", "--tasks", "40", "--work", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "--scheduler local:2" in result.stdout and "empty tasks/s" in result.stdout
    assert "256 workers:" in result.stdout


def test_the_chain_batch_benchmark_runs_on_a_few_images(tmp_path: Path) -> None:
    result = run("benchmarks/chain_batch.py", "--count", "4", "--rounds", "1", "--work", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "| geomcli chain -j 2 |" in result.stdout and "against the Pillow script" in result.stdout


@pytest.mark.cluster
def test_the_zarr_benchmark_runs_on_a_small_array(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    result = run("benchmarks/zarr_chunked.py", "--gib", "0.001", "--side", "256", "--rounds", "1",
                 "--work", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "| 2 workers |" in result.stdout and "scaling 1 -> 2 workers" in result.stdout


@pytest.mark.cluster
def test_the_zarr_planes_benchmark_runs_on_a_small_stack(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    result = run("benchmarks/zarr_planes.py", "--side", "64", "--chunk", "32", "--images", "2", "--work", str(tmp_path))
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ") and "operation" not in line]
    assert [row.split(" | ")[0] for row in rows] == ["| resize --scales 0.5,0.5", "| resize --scales 2,2",
                                                      "| warp --rotate 10", "| grid-sample (a 10° turn)"]
    assert all(" and " in row.split(" | ")[2] for row in rows)  # a figure for each of the two workers
