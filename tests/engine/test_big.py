"""Tensors bigger than memory: kernels writing into a given output, memory-mapped outputs written
slab by slab, equal bit for bit to the in-RAM path; no temp file after a failure; bounded memory.

The thresholds are monkeypatched down so tiny arrays take the big-tensor path and stay fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from conftest import ALL_DTYPES, PRINT_PEAK_MIB, make_array, run

import geomcli.ops.affine_grid as grid_ops
import geomcli.ops.center_crop_pad as crop_ops
import geomcli.ops.space_depth as space_depth_ops
from geomcli import io
from geomcli.engine import slabs
from geomcli.errors import GeomError
from geomcli.io import _mapped


@pytest.fixture
def mapped_outputs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every output of a byte or more is memory-mapped, in slabs of 64 bytes; the temp files
    made are listed."""
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    monkeypatch.setattr(slabs, "SLAB_BYTES", 64)
    made: list[str] = []
    for name in ("_map_npy", "_map_tiff"):
        original = getattr(_mapped, name)

        def spy(tmp: str, *args: Any, original: Any = original) -> np.ndarray:
            made.append(tmp)
            return original(tmp, *args)  # type: ignore[no-any-return]

        monkeypatch.setattr(_mapped, name, spy)
    return made


def read(path: Path) -> tuple[np.ndarray, str | None]:
    loaded = io.read_array(str(path), mmap=False)
    return loaded.data, loaded.layout


def leftovers(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.endswith(".tmp"))


# --- the kernels' out= ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_crop_pad_into_a_dirty_strided_out_equals_a_new_array(dtype: np.dtype, rng: np.random.Generator) -> None:
    data = make_array(rng, (5, 6, 3), dtype)
    expected = crop_ops.center_crop_pad(data, [3, 9], [0, 1])
    # a strided view of an array full of other values: the padding must be written too
    backing = make_array(rng, (3, 9, 6), dtype)
    out = backing[:, :, ::2]
    found = crop_ops.center_crop_pad(data, [3, 9], [0, 1], out=out)
    assert found is out and np.array_equal(found, expected)


def test_crop_pad_into_out_with_a_fill(rng: np.random.Generator) -> None:
    data = rng.integers(0, 9, (4, 4), dtype=np.uint8)
    out = np.full((7, 2), 99, np.uint8)
    crop_ops.center_crop_pad(data, [7, 2], fill=5, out=out)
    assert np.array_equal(out, crop_ops.center_crop_pad(data, [7, 2], fill=5))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_depth_into_out_equal_new_arrays(dtype: np.dtype, mode: str, rng: np.random.Generator) -> None:
    data = make_array(rng, (2, 3, 6, 9), dtype)
    # an NHWC-backed, non-contiguous out, as the CLI hands over for an image layout
    out = np.zeros((2, 2, 3, 27), dtype).transpose(0, 3, 1, 2)
    assert space_depth_ops.space_to_depth(data, 3, mode, out=out) is out  # type: ignore[arg-type]
    assert np.array_equal(out, space_depth_ops.space_to_depth(data, 3, mode))  # type: ignore[arg-type]
    back = np.zeros((2, 6, 9, 3), dtype).transpose(0, 3, 1, 2)
    space_depth_ops.depth_to_space(out, 3, mode, out=back)  # type: ignore[arg-type]
    assert np.array_equal(back, data)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.dtype(ml_dtypes.bfloat16)], ids=str)
def test_space_depth_fast_paths_into_out(dtype: Any, rng: np.random.Generator) -> None:
    data = make_array(rng, (1, 4, 512, 512), np.dtype(dtype))  # past the fast paths' 1 MiB
    out = np.empty((1, 16, 256, 256), dtype)
    space_depth_ops.space_to_depth(data, 2, out=out, threads=2)
    assert np.array_equal(out.view(np.uint8), space_depth_ops.space_to_depth(data, 2, threads=1).view(np.uint8))
    back = np.empty_like(data)
    space_depth_ops.depth_to_space(out, 2, out=back, threads=2)
    assert np.array_equal(back.view(np.uint8), data.view(np.uint8))


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_into_out(align_corners: bool, rng: np.random.Generator) -> None:
    theta = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    out = np.full((2, 3, 4, 5, 3), np.nan, np.float32)
    grid_ops.affine_grid(theta, [2, 1, 3, 4, 5], align_corners, out=out)
    assert np.array_equal(out, grid_ops.affine_grid(theta, [2, 1, 3, 4, 5], align_corners))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda x: crop_ops.center_crop_pad(x, [2, 2], out=np.zeros((2, 3), np.float32)),
         r"center_crop_pad: out must have shape \(2, 2\) and dtype float32, found shape \(2, 3\)"),
        (lambda x: crop_ops.center_crop_pad(x, [2, 2], out=np.zeros((2, 2), np.float64)),
         r"out must have shape \(2, 2\) and dtype float32, found shape \(2, 2\) and dtype float64"),
        (lambda x: crop_ops.center_crop_pad(x, [2, 2], out=np.zeros((2, 2), ">f4")),
         r"dtype float32, found shape \(2, 2\) and dtype >f4"),
        (lambda x: crop_ops.center_crop_pad(x, [2, 2], out=[[0.0, 0.0], [0.0, 0.0]]),  # type: ignore[arg-type]
         r"center_crop_pad: out must be a numpy array, found list"),
        (lambda x: crop_ops.center_crop_pad(x, [2, 2], out=np.broadcast_to(np.float32(0), (2, 2))),
         r"center_crop_pad: out is read-only"),
        (lambda x: crop_ops.center_crop_pad(x, [4, 2], out=x[:, :2]),
         r"center_crop_pad: out overlaps the input"),
        (lambda x: space_depth_ops.space_to_depth(x[None, None], 2, out=np.zeros((1, 4, 2, 2), np.float32)),
         r"space_to_depth: out must have shape \(1, 4, 2, 1\)"),
        (lambda x: space_depth_ops.depth_to_space(x[None, None], 1, out=np.zeros((1, 1, 4, 2), np.int32)),
         r"depth_to_space: out must have shape \(1, 1, 4, 2\) and dtype float32, found .* dtype int32"),
        (lambda x: grid_ops.affine_grid(np.zeros((1, 2, 3), np.float32), [1, 1, 2, 2], out=np.zeros((1, 2, 2, 3))),
         r"affine_grid: out must have shape \(1, 2, 2, 2\) and dtype float32"),
    ],
)
def test_out_is_checked(call: Any, message: str) -> None:
    with pytest.raises(GeomError, match=message):
        call(np.zeros((4, 2), np.float32))


# --- open_output ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a.npy", "a.tiff"])
def test_open_output_maps_big_outputs_and_keeps_small_ones_in_ram(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 25)
    path = tmp_path / name
    for shape, maps in (((2, 3), False), ((2, 3, 2), True)):
        assert io.maps_output(str(path), shape, np.float32) is maps
        with io.open_output(str(path), shape, np.float32) as out:
            assert isinstance(out, np.memmap) is maps and not out.any()
            out[1] = 2.5
        expected = np.zeros(shape, np.float32)
        expected[1] = 2.5
        assert np.array_equal(read(path)[0], expected)
        assert leftovers(tmp_path) == []


def test_open_output_maps_only_what_the_format_holds_in_one_piece(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    big = (64, 64)
    assert io.maps_output(str(tmp_path / "a.npy"), big, ml_dtypes.bfloat16)
    assert not io.maps_output("-", big, np.uint8)
    assert not io.maps_output(str(tmp_path / "a.png"), big, np.uint8)
    assert not io.maps_output(str(tmp_path / "a.tiff"), big, ml_dtypes.bfloat16)  # TIFF cannot hold it
    assert not io.maps_output(str(tmp_path / "a.tiff"), big, ">u2")
    assert not io.maps_output(str(tmp_path / "a.npy"), (0, 5), np.uint8)
    with pytest.raises(GeomError, match=r"a\.tiff: TIFF cannot hold bfloat16 data; write \.npy"), \
            io.open_output(str(tmp_path / "a.tiff"), big, ml_dtypes.bfloat16):
        pass
    assert leftovers(tmp_path) == []


def test_a_bfloat16_npy_written_through_a_map_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    data = np.arange(12, dtype=np.float32).reshape(3, 4).astype(ml_dtypes.bfloat16)
    with io.open_output(str(tmp_path / "b.npy"), data.shape, data.dtype) as out:
        out[...] = data
    io.write_array(data, str(tmp_path / "ram.npy"))
    assert (tmp_path / "b.npy").read_bytes() == (tmp_path / "ram.npy").read_bytes()


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit, GeomError])
def test_open_output_leaves_no_temp_file_and_the_old_file_on_any_exception(
    stop: type[BaseException], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    path = tmp_path / "a.npy"
    path.write_bytes(b"old")
    with pytest.raises(stop), io.open_output(str(path), (4, 4), np.uint8) as out:
        out[0] = 1
        raise stop()
    assert path.read_bytes() == b"old" and leftovers(tmp_path) == []


def test_release_drops_only_file_backed_shared_pages(tmp_path: Path) -> None:
    in_ram = np.ones(100_000)
    io.release(in_ram)  # a no-op: the values stay
    assert in_ram.sum() == 100_000
    path = tmp_path / "m.npy"
    mapped = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(100_000,))
    mapped[:] = 3.0
    io.release(mapped[10:90_000])  # written pages leave this process, not the file
    assert mapped.sum() == 300_000
    private = np.load(path, mmap_mode="c")
    private[:] = 1.0
    io.release(private)  # a private (copy-on-write) map keeps its changes
    assert private.sum() == 100_000
    del mapped, private


# --- the CLI: a memory-mapped output equals the in-RAM one ----------------------------------


def _both(tmp_path: Path, mapped_outputs: list[str], monkeypatch: pytest.MonkeyPatch, args: list[str],
          suffix: str) -> tuple[Path, Path]:
    """Run a command twice: with every output mapped (the fixture), then with none."""
    mapped, plain = tmp_path / f"mapped{suffix}", tmp_path / f"plain{suffix}"
    result = run(*args, "-o", mapped, "-q")
    assert result.exit_code == 0, result.output
    assert mapped_outputs == [mapped_outputs[0]] and mapped_outputs[0].startswith(str(tmp_path / ".mapped"))
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1 << 62)
    result = run(*args, "-o", plain, "-q")
    assert result.exit_code == 0, result.output
    assert len(mapped_outputs) == 1 and leftovers(tmp_path) == []
    found, expected = read(mapped), read(plain)
    assert found[0].dtype == expected[0].dtype and found[1] == expected[1]
    assert np.array_equal(found[0], expected[0])
    if suffix == ".npy":
        assert mapped.read_bytes() == plain.read_bytes()
    return mapped, plain


def _save(path: Path, data: np.ndarray) -> Path:
    if path.suffix == ".npy":
        np.save(path, data)
    else:
        import tifffile

        tifffile.imwrite(path, data, photometric="minisblack")
    return path


@pytest.mark.parametrize("suffix", [".npy", ".tiff"])
@pytest.mark.parametrize(
    ("shape", "target", "more"),
    [
        ((3, 5, 6, 7), "2,8,3,9", []),  # crop and pad, every axis
        ((1, 2, 41, 13), "7,20", ["--axes", "2,3", "--fill", "3"]),  # rows of more than a slab
        ((2, 300), "1,257", []),  # rows longer than a slab: slabs of the last axis
    ],
)
def test_crop_pad_mapped_equals_in_ram(suffix: str, shape: tuple[int, ...], target: str, more: list[str],
                                       tmp_path: Path, mapped_outputs: list[str], monkeypatch: pytest.MonkeyPatch,
                                       rng: np.random.Generator) -> None:
    source = _save(tmp_path / f"in{suffix}", rng.integers(0, 1000, shape).astype(np.uint16))
    _both(tmp_path, mapped_outputs, monkeypatch, ["crop-pad", str(source), "--shape", target, *more], suffix)


@pytest.mark.parametrize("suffix", [".npy", ".tiff"])
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize(
    ("shape", "layout", "blocksize"),
    [
        ((3, 2, 6, 9), "NCHW", 3),  # batch items in slabs
        ((1, 3, 24, 10), "NCHW", 2),  # one item, bands of rows
        ((12, 8, 3), "HWC", 2),  # an image: channels last
        ((12, 8), "HW", 2),  # HW grows channels
    ],
)
def test_space_depth_mapped_equal_in_ram(suffix: str, mode: str, shape: tuple[int, ...], layout: str,
                                         blocksize: int, tmp_path: Path, mapped_outputs: list[str],
                                         monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator) -> None:
    source = _save(tmp_path / f"in{suffix}", rng.standard_normal(shape).astype(np.float32))
    common = ["--blocksize", str(blocksize), "--mode", mode, "--layout", layout]
    blocks, _ = _both(tmp_path, mapped_outputs, monkeypatch, ["space-to-depth", str(source), *common], suffix)
    mapped_outputs.clear()
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    back_layout = "HWC" if layout == "HW" else layout
    common[-1] = back_layout
    (tmp_path / "plain" / "x").parent.mkdir()
    restored, _ = _both(tmp_path / "plain", mapped_outputs, monkeypatch,
                        ["depth-to-space", str(blocks), *common], suffix)
    original = read(source)[0]
    assert np.array_equal(read(restored)[0].reshape(original.shape), original)


@pytest.mark.parametrize("suffix", [".npy", ".tiff"])
@pytest.mark.parametrize("size", ["3,1,7,9", "2,1,3,4,5"])
def test_affine_grid_mapped_equals_in_ram(suffix: str, size: str, tmp_path: Path, mapped_outputs: list[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    theta = "0.9,0.1,0.2,-0.1,1.1,0.3" if size.count(",") == 3 else "1,0.1,0,0.2,0,1,0.1,0,0,0,1,0.3"
    args = ["affine-grid", "--size", size, "--theta", theta, "--align-corners"]
    _both(tmp_path, mapped_outputs, monkeypatch, args, suffix)


def test_mapped_affine_grids_go_as_many_a_call_as_fit_a_slab(monkeypatch: pytest.MonkeyPatch,
                                                             rng: np.random.Generator) -> None:
    theta = rng.standard_normal((10, 2, 3)).astype(np.float32)
    calls: list[int] = []
    kernel = grid_ops.affine_grid

    def counted(matrices: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
        calls.append(len(matrices))
        return kernel(matrices, *args, **kwargs)

    monkeypatch.setattr(grid_ops, "affine_grid", counted)
    monkeypatch.setattr(slabs, "SLAB_BYTES", 4 * 3 * 5 * 2 * 4)  # four grids of 3x5
    out = np.full((10, 3, 5, 2), np.nan, np.float32)
    slabs.affine_grid(theta, (10, 1, 3, 5), False, threads=1, out=out)
    assert calls == [4, 4, 2]
    assert np.array_equal(out, kernel(theta, [10, 1, 3, 5]))


@pytest.mark.parametrize("suffix", [".npy", ".tiff"])
def test_affine_grid_of_a_big_endian_theta_file_is_mapped_in_native_order(
    suffix: str, tmp_path: Path, mapped_outputs: list[str]
) -> None:
    theta = tmp_path / "theta.npy"
    np.save(theta, np.array([[[0.9, 0.1, 0.2], [-0.1, 1.1, 0.3]]], ">f4"))
    result = run("affine-grid", "--size", "1,1,5,6", "--theta", theta, "-o", tmp_path / f"grid{suffix}", "-q")
    assert result.exit_code == 0, result.output
    assert mapped_outputs  # the mapped path, where the output's dtype is chosen before the kernel runs
    grid = read(tmp_path / f"grid{suffix}")[0]
    expected = grid_ops.affine_grid(np.load(theta).astype("<f4"), [1, 1, 5, 6])
    assert grid.dtype == np.float32 and np.array_equal(grid, expected)


def test_the_summary_of_a_mapped_output_is_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    rng: np.random.Generator) -> None:
    import json

    data = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    data[0, 0, 0, 0] = np.nan
    source = _save(tmp_path / "in.npy", data)
    monkeypatch.setattr(slabs, "SLAB_BYTES", 64)
    reports = []
    for threshold in (1, 1 << 62):
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", threshold)
        result = run("space-to-depth", source, "-o", tmp_path / f"{threshold}.npy", "--blocksize", "2", "--json")
        record = json.loads(result.stdout)
        reports.append({key: record[key] for key in ("output_shape", "output_dtype", "value_range", "status")})
    assert reports[0] == reports[1] and reports[0]["value_range"] is not None


# --- failures leave nothing behind -----------------------------------------------------------


@pytest.mark.parametrize("stop", [GeomError("broken midway"), KeyboardInterrupt()])
@pytest.mark.parametrize("command", ["space-to-depth", "crop-pad"])
def test_a_failure_inside_the_slab_loop_leaves_no_temp_file(stop: BaseException, command: str, tmp_path: Path,
                                                            mapped_outputs: list[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    source = _save(tmp_path / "in.npy", np.arange(4 * 2 * 8 * 8, dtype=np.float32).reshape(4, 2, 8, 8))
    output = tmp_path / "out.npy"
    output.write_bytes(b"the old output")
    name = {"space-to-depth": "space_to_depth", "crop-pad": "center_crop_pad"}[command]
    module = space_depth_ops if command == "space-to-depth" else crop_ops
    kernel = getattr(module, name)
    calls = []

    def failing(*args: Any, **kwargs: Any) -> np.ndarray:
        calls.append(1)
        if len(calls) == 3:
            raise stop
        return kernel(*args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(module, name, failing)
    parameters = ["--blocksize", "2"] if command == "space-to-depth" else ["--shape", "4,2,6,6"]
    result = run(command, source, "-o", output, *parameters)
    assert len(calls) == 3 and len(mapped_outputs) == 1
    if isinstance(stop, KeyboardInterrupt):
        assert result.exit_code == 130 and "Interrupted" in result.stderr
    else:
        assert result.exit_code == 1 and result.stderr == f"Error: {source}: broken midway\n"
    assert output.read_bytes() == b"the old output"
    assert leftovers(tmp_path) == []


def test_sigterm_during_a_mapped_write_leaves_no_temp_file(tmp_path: Path) -> None:
    """A real process: SIGTERM while it writes slab by slab ends it with 143 and no temp file."""
    source = tmp_path / "in.npy"
    np.lib.format.open_memmap(source, mode="w+", dtype=np.float32, shape=(64, 4, 64, 64))  # sparse
    script = textwrap.dedent(f"""
        import os, signal, sys
        from geomcli.engine import slabs
        import geomcli.ops.center_crop_pad as crop_ops
        import geomcli.ops.affine_grid as grid_ops
        import geomcli.ops.space_depth as space_depth_ops
        from geomcli.io import _mapped
        from geomcli.cli import main
        _mapped.MAP_OUTPUT_BYTES, slabs.SLAB_BYTES = 1, 4096
        original, calls = space_depth_ops.space_to_depth, []
        def slow(*args, **kwargs):
            calls.append(1)
            if len(calls) == 5:
                os.kill(os.getpid(), signal.SIGTERM)
            return original(*args, **kwargs)
        space_depth_ops.space_to_depth = slow
        main(["space-to-depth", {str(source)!r}, "-o", {str(tmp_path / "out.npy")!r}, "--blocksize", "2"])
    """)
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 143, done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(os.listdir(tmp_path)) == ["in.npy"]


# --- memory: a real process --------------------------------------------------------------------


def _peak_rss_mib(arguments: list[str], setup: str = "") -> float:
    """Run the CLI in a child process; its peak resident memory in MiB (VmHWM)."""
    script = textwrap.dedent(f"""
        import sys
        {setup}
        from geomcli.cli import main
        try:
            main({arguments!r})
        except SystemExit as stop:
            if stop.code:
                raise
        {PRINT_PEAK_MIB}
    """)
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return float(done.stdout.split()[-1])


def _baseline_mib(tmp_path: Path) -> float:
    small = tmp_path / "small.npy"
    np.save(small, np.zeros((4, 4), np.float32))
    return _peak_rss_mib(["crop-pad", str(small), "-o", str(tmp_path / "small_out.npy"), "--shape", "2,2", "-q"])


def test_a_small_crop_of_a_large_mapped_file_reads_only_what_it_keeps(tmp_path: Path) -> None:
    source = tmp_path / "big.npy"
    # 400 MB, sparse on disk: nothing is written but the header
    np.lib.format.open_memmap(source, mode="w+", dtype=np.float32, shape=(100, 1000, 1000))
    peak = _peak_rss_mib(["crop-pad", str(source), "-o", str(tmp_path / "out.npy"), "--shape", "10,100,100", "-q"])
    # the crop touches 1000 rows of 4 KB pages: a few MiB above start-up
    assert peak - _baseline_mib(tmp_path) < 40, peak


def test_a_mapped_output_is_written_in_bounded_memory(tmp_path: Path) -> None:
    source = tmp_path / "big.npy"
    np.lib.format.open_memmap(source, mode="w+", dtype=np.float32, shape=(100, 1000, 1000))
    # a 100 MB output, both files mapped, 8 MiB slabs
    setup = "from geomcli.engine import slabs; slabs.SLAB_BYTES = 8 << 20"
    peak = _peak_rss_mib(["crop-pad", str(source), "-o", str(tmp_path / "out.npy"), "--shape", "100,500,500", "-q"],
                         setup)
    assert (tmp_path / "out.npy").stat().st_size > 100_000_000
    assert peak - _baseline_mib(tmp_path) < 60, peak
