"""zarr arrays chunk by chunk (geomcli.engine.zarr_file, engine.chunked, io._zarr): results equal
the numpy kernels bit for bit whatever the chunks (misaligned to the blocksize, C split), the
layout from dimension_names or OME-Zarr axes, the completion marker, .npy on either side, on
this machine's threads and on a Dask cluster, and on S3."""

from __future__ import annotations

import errno
import json
import math
import os
import signal
import time
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner, Result
from conftest import S3

import geomcli.ops.center_crop_pad as crop_ops
import geomcli.ops.grid_sample as grid_ops
import geomcli.ops.resize as resize_ops
import geomcli.ops.space_depth as space_depth_ops
from geomcli.cli import cli
from geomcli.errors import GeomError

zarr = pytest.importorskip("zarr")
pytest.importorskip("dask.array")


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args], catch_exceptions=False)


def write_zarr(path: Path | str, data: np.ndarray, chunks: tuple[int, ...], names: list[str] | None = None) -> None:
    array = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, chunks=chunks, dimension_names=names)
    array[...] = data


def read_zarr(path: Path | str) -> Any:
    return zarr.open(str(path), mode="r")


DTYPES = [np.dtype("uint8"), np.dtype("int16"), np.dtype("float32"), np.dtype("float64"), np.dtype("bool"),
          np.dtype("complex64")]


def tensor(dtype: np.dtype, shape: tuple[int, ...] = (2, 6, 20, 18)) -> np.ndarray:
    rng = np.random.default_rng(42)
    values = rng.standard_normal(shape) * 50
    if dtype.kind == "b":
        return values > 0
    if dtype.kind == "c":
        return (values + 1j * rng.standard_normal(shape)).astype(dtype)
    data = values.astype(dtype)
    if dtype.kind == "f":
        data.flat[::17] = np.nan  # NaN kept as it is, bit for bit
    return data


# misaligned to blocksize 2 (7 and 5), C split in two and in one
CHUNKINGS = [(1, 5, 7, 5), (2, 1, 20, 18), (1, 6, 3, 4)]


@pytest.mark.parametrize(("dtype", "chunks"), [(dtype, CHUNKINGS[0]) for dtype in DTYPES] +
                         [(np.dtype("float32"), chunks) for chunks in CHUNKINGS[1:]], ids=str)
@pytest.mark.parametrize(("command", "args", "kernel"), [
    ("space-to-depth", ["--blocksize", "2"], lambda data: space_depth_ops.space_to_depth(data, 2)),
    ("space-to-depth", ["--blocksize", "2", "--mode", "CRD"],
     lambda data: space_depth_ops.space_to_depth(data, 2, "CRD")),
    ("depth-to-space", ["--blocksize", "1"], lambda data: space_depth_ops.depth_to_space(data, 1)),
    ("crop-pad", ["--shape", "2,5,15,30"], lambda data: crop_ops.center_crop_pad(data, [2, 5, 15, 30])),
], ids=["s2d-DCR", "s2d-CRD", "d2s-1", "crop-pad"])
def test_results_equal_the_numpy_kernels_bit_for_bit(command: str, args: list[str], kernel: Any,
                                                    chunks: tuple[int, ...], dtype: np.dtype, tmp_path: Path) -> None:
    data = tensor(dtype)
    write_zarr(tmp_path / "in.zarr", data, chunks)
    result = run(command, tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", *args, "-q")
    assert result.exit_code == 0, result.stderr
    out = read_zarr(tmp_path / "out.zarr")
    expected = kernel(data)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    assert out[...].tobytes() == expected.tobytes()
    assert dict(out.attrs) == {"geomcli": {"complete": True}}


@pytest.mark.parametrize("chunks", [(1, 8, 4, 4), (1, 1, 3, 5), (2, 3, 5, 2)], ids=str)
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_with_split_channels_keeps_their_order(chunks: tuple[int, ...], mode: str,
                                                              tmp_path: Path) -> None:
    data = np.arange(2 * 8 * 6 * 5, dtype=np.int32).reshape(2, 8, 6, 5)
    write_zarr(tmp_path / "in.zarr", data, chunks)
    result = run("depth-to-space", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--blocksize", "2",
                 "--mode", mode, "-q")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(read_zarr(tmp_path / "out.zarr")[...], space_depth_ops.depth_to_space(data, 2, mode))


def test_a_pad_of_an_empty_axis_is_all_fill(tmp_path: Path) -> None:
    """An input with an axis of length 0, padded: dask's pad divided by that axis's chunks."""
    np.save(tmp_path / "empty.npy", np.zeros((0, 3), np.float32))
    result = run("crop-pad", tmp_path / "empty.npy", "-o", tmp_path / "out.zarr", "--shape", "2,2", "-q")
    assert result.exit_code == 0, result.stderr
    expected = crop_ops.center_crop_pad(np.zeros((0, 3), np.float32), [2, 2])
    assert np.array_equal(read_zarr(tmp_path / "out.zarr")[...], expected)


def test_a_pad_far_past_the_input_chunks_is_a_few_blocks_not_one_task_per_input_chunk(tmp_path: Path) -> None:
    """dask's pad cut the pad into the input's chunk size: a 4x4 chunk padded to 8200x8200 was 4
    million tasks (10 GB, ten minutes); the pads are blocks of up to 64 MiB."""
    data = np.arange(16, dtype=np.uint8).reshape(4, 4)
    write_zarr(tmp_path / "in.zarr", data, (2, 2))
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "60,61", "--fill", "7")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(read_zarr(tmp_path / "out.zarr")[...], crop_ops.center_crop_pad(data, [60, 61], fill=7))
    (note,) = [line for line in result.stderr.splitlines() if "chunk by chunk:" in line]
    assert int(note.split("chunk by chunk: ")[1].split()[0]) <= 9, note


@pytest.mark.parametrize("out", ["out.zarr", "out.npy"])
@pytest.mark.parametrize("shape", ["62,62", "61,30", "20,20"], ids=["spanning", "odd-and-even", "within-a-chunk"])
def test_a_crop_off_the_chunk_grid_reads_each_chunk_once_and_a_block_needs_at_most_four(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str, out: str) -> None:
    """Issue 22's bound for a crop whose window is not on the input's chunk grid (offsets 17 and
    33 in chunks of 32): each input chunk under the window is read once in the run, shared by
    the output chunks it feeds (a zarr output's are regular, so each takes pieces of up to 2 x 2
    input chunks), and no output block needs more than those 4: a task holds at most 4 chunks."""
    import dask

    from geomcli.engine import chunked, zarr_file

    data = tensor(np.dtype("float32"), (1, 2, 96, 96))
    write_zarr(tmp_path / "in.zarr", data, (1, 2, 32, 32))
    reads: list[str] = []
    stored_get = zarr.storage.LocalStore.get

    async def counted_get(self: Any, key: str, *args: Any, **kwargs: Any) -> Any:
        if Path(str(self.root)).name == "in.zarr" and key.startswith("c/"):
            reads.append(key)
        return await stored_get(self, key, *args, **kwargs)

    inputs: list[str] = []
    read_as_dask = chunked.as_dask

    def named_as_dask(*args: Any, **kwargs: Any) -> Any:
        array = read_as_dask(*args, **kwargs)
        inputs.append(array.name)
        return array

    needed: list[int] = []
    write_blocks = zarr_file._write_blocks

    def blocks_measured(result: Any, *args: Any, **kwargs: Any) -> Any:
        dependencies = result.__dask_graph__().get_all_dependencies()

        def input_chunks(key: Any) -> set[Any]:
            found = {key} if isinstance(key, tuple) and key[0] in inputs else set()
            for dependency in dependencies.get(key, ()):
                found |= input_chunks(dependency)
            return found

        needed.extend(len(input_chunks(key)) for key in dask.core.flatten(result.__dask_keys__()))
        return write_blocks(result, *args, **kwargs)

    monkeypatch.setattr(zarr.storage.LocalStore, "get", counted_get)
    monkeypatch.setattr(chunked, "as_dask", named_as_dask)
    monkeypatch.setattr(zarr_file, "_write_blocks", blocks_measured)
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / out, "--layout", "NCHW", "--shape", shape)
    assert result.exit_code == 0, result.stderr
    target = [int(side) for side in shape.split(",")]
    expected = crop_ops.center_crop_pad(data, target, [2, 3])
    written = read_zarr(tmp_path / out)[...] if out.endswith(".zarr") else np.load(tmp_path / out)
    assert np.array_equal(written, expected, equal_nan=True)
    # the chunks the window lies on, each read once: rows and columns of 32 under [start, start + length)
    under = [range((96 - length) // 2 // 32, -(-((96 - length) // 2 + length) // 32)) for length in target]
    assert sorted(reads) == sorted(f"c/0/0/{row}/{column}" for row in under[0] for column in under[1])
    assert needed and max(needed) <= 4, needed


def test_a_pad_is_in_blocks_within_max_pixels_where_the_chunks_are(tmp_path: Path) -> None:
    """The pads' blocks of up to 64 MiB went past --max-pixels, so a run whose input chunks were
    within it was refused ("an output block (4, 2000): ... exceed the limit of 100")."""
    data = np.arange(64, dtype=np.uint8).reshape(8, 8)
    write_zarr(tmp_path / "in.zarr", data, (4, 4))
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.npy", "--shape", "8,2000", "--fill", "7",
                 "--max-pixels", "100")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(np.load(tmp_path / "out.npy"), crop_ops.center_crop_pad(data, [8, 2000], fill=7))


def test_a_pad_of_more_blocks_than_a_run_takes_is_one_error_line(tmp_path: Path) -> None:
    """A photo padded to 10**8 x 10**8 into a zarr listed 4 * 10**8 pad blocks: a MemoryError with a
    traceback (an option fuzzer's run). --max-pixels does not bound a zarr output; MOST_TASKS does."""
    write_zarr(tmp_path / "in.zarr", np.zeros((12, 16), np.uint8), (4, 4))
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "99999999,99999999")
    assert result.exit_code == 2  # refused as the run is planned, before anything is made
    assert result.stderr.startswith(f"Error: {tmp_path / 'in.zarr'}: padding to shape (99999999, 99999999) takes ")
    assert result.stderr.endswith(" blocks, more than the 16777216 tasks a run takes\n")
    assert not (tmp_path / "out.zarr").exists()


def test_a_stripped_tiff_page_past_max_pixels_is_read_by_its_strips(tmp_path: Path) -> None:
    """A stripped page was one chunk (read whole, or merged to about 64 MiB) whatever --max-pixels
    said: "an input chunk (200, 200): 40000 elements exceed the limit of 5000", its strips 16 rows."""
    import tifffile

    data = np.arange(40000, dtype=np.uint32).astype(np.uint8).reshape(200, 200)
    tifffile.imwrite(tmp_path / "in.tif", data, rowsperstrip=16, photometric="minisblack")
    result = run("crop-pad", tmp_path / "in.tif", "-o", tmp_path / "out.zarr", "--shape", "30,210", "--max-pixels",
                 "5000")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(read_zarr(tmp_path / "out.zarr")[...], crop_ops.center_crop_pad(data, [30, 210]))


def test_a_fill_is_the_kernels_element_and_the_summary_has_the_range(tmp_path: Path) -> None:
    data = tensor(np.dtype("int16"), (3, 10, 12))
    write_zarr(tmp_path / "in.zarr", data, (1, 4, 5))
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "3,13,7", "--fill", "-9")
    assert result.exit_code == 0, result.stderr
    expected = crop_ops.center_crop_pad(data, [3, 13, 7], fill=-9)
    assert np.array_equal(read_zarr(tmp_path / "out.zarr")[...], expected)
    assert f"range [{expected.min()}, {expected.max()}]" in result.stderr
    assert "chunk by chunk:" in result.stderr
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "bad.zarr", "--shape", "3,13,7", "--fill", "0.5")
    assert result.exit_code == 2  # a usage fault, from the header, as in a batch
    assert "0.5" in result.stderr and not (tmp_path / "bad.zarr").exists()


@pytest.mark.parametrize("source, out", [("n.npy", "o.zarr"), ("n.zarr", "o.npy")])
def test_a_result_that_holds_nan_says_so_chunk_by_chunk(tmp_path: Path, source: str, out: str) -> None:
    """As a result in one piece says it (summary.NAN_NOTE), found by the pass that writes each
    chunk (a try-out's zarr output read 'range [0, 2]' with no word of its NaN)."""
    data = np.array([[1, np.nan], [0.5, 2]], np.float32)
    np.save(tmp_path / "n.npy", data)
    write_zarr(tmp_path / "n.zarr", data, (1, 1))
    result = run("crop-pad", tmp_path / source, "-o", tmp_path / out, "--shape", "3,3")
    assert result.exit_code == 0, result.stderr
    line, nan, chunks = result.stderr.splitlines()
    assert line.startswith(f"crop-pad {tmp_path / source} → {tmp_path / out}: 2×2 float32 → 3×3 float32 range [0, 2] "
                           "shape=[3, 3] axes=None in ")
    assert nan == "  note: holds NaN; the value range is of the other values"
    assert chunks.startswith("  note: chunk by chunk: ")
    np.save(tmp_path / "none.npy", np.full((2, 2), np.nan, np.float32))
    record = json.loads(run("crop-pad", tmp_path / "none.npy", "-o", tmp_path / "none.zarr", "--shape", "1,2",
                            "--json").stdout)
    assert record["value_range"] is None and record["notes"][0] == "holds NaN; the value range is of the other values"


def test_dimension_names_give_the_layout_and_the_output_keeps_them(tmp_path: Path) -> None:
    data = tensor(np.dtype("uint8"), (12, 10, 3))  # an image, HWC
    write_zarr(tmp_path / "in.zarr", data, (5, 5, 3), names=["y", "x", "c"])
    result = run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--blocksize", "2", "-q")
    assert result.exit_code == 0, result.stderr
    out = read_zarr(tmp_path / "out.zarr")
    nchw = np.moveaxis(data, 2, 0)[None]
    expected = np.moveaxis(space_depth_ops.space_to_depth(nchw, 2)[0], 0, 2)
    assert np.array_equal(out[...], expected)
    assert out.metadata.dimension_names == ("y", "x", "c")
    # a two-value --shape crops the named H and W
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "crop.zarr", "--shape", "4,4", "-q")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(read_zarr(tmp_path / "crop.zarr")[...], data[4:8, 3:7])


def test_a_zarr_array_of_variable_length_strings_is_written_as_one(tmp_path: Path) -> None:
    """zarr's own str arrays (numpy's StringDType in memory) were refused for a .zarr output too,
    with advice for Python code (.astype(str)); a .npy output's refusal names .zarr."""
    data = np.array([["a", "bb", "ccc"], ["d", "e", "f"]], np.dtypes.StringDType())
    zarr.create_array(str(tmp_path / "in.zarr"), shape=data.shape, dtype=str, chunks=(1, 2))[...] = data
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "4,2", "--fill", "zz", "-q")
    assert result.exit_code == 0, result.stderr
    out = read_zarr(tmp_path / "out.zarr")[...]
    assert out.dtype.kind == "T"
    assert out.tolist() == crop_ops.center_crop_pad(data, (4, 2), fill="zz").tolist()
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.npy", "--shape", "4,2")
    assert result.exit_code == 2
    assert result.stderr.endswith("strings have no file form without pickling; give them as .astype(str), or write "
                                  ".zarr\n")


def test_an_output_of_a_data_type_zarr_v3_does_not_specify_is_one_warning_line(tmp_path: Path) -> None:
    """Fixed-width strings: zarr's UnstableSpecificationWarning came out as a Python warning, a
    paragraph and its source line on stderr (-q or not); now one Warning: line, which -q quiets."""
    data = np.array([["a", "bb", "ccc"], ["d", "e", "f"]])
    np.save(tmp_path / "in.npy", data)
    result = run("crop-pad", tmp_path / "in.npy", "-o", tmp_path / "out.zarr", "--shape", "1,2")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == (f"Warning: {tmp_path / 'out.zarr'}: zarr v3 has no specification of <U3 "
                                             "data yet: other zarr libraries may not read this array")
    assert "UnstableSpecificationWarning" not in result.stderr
    assert read_zarr(tmp_path / "out.zarr")[...].tolist() == [["a", "bb"]]
    result = run("crop-pad", tmp_path / "in.npy", "-o", tmp_path / "out.zarr", "--shape", "1,2", "-q")
    assert result.exit_code == 0 and result.stderr == ""


@pytest.mark.parametrize("args", [["info"], ["crop-pad", "--shape", "3,2"], ["resize", "--scales", "2,2"],
                                  ["space-to-depth", "--blocksize", "1", "--layout", "HW"]])
def test_a_zarr_of_no_onnx_tensor_type_is_refused_as_a_npy_is(tmp_path: Path, args: list[str]) -> None:
    """datetime64: each operation refused it in its own words (resize's and space-to-depth's named
    no file, crop-pad's an input shape of (0,)), info showed it; now the .npy reader's one line."""
    zarr.create_array(str(tmp_path / "in.zarr"), shape=(2, 3), dtype="M8[s]", chunks=(1, 2))
    output = [] if args[0] == "info" else ["-o", tmp_path / "out.zarr"]
    result = run(args[0], tmp_path / "in.zarr", *output, *args[1:])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {tmp_path / 'in.zarr'}: dtype datetime64[s] is not an ONNX tensor type "
                                    "geomcli reads; it takes bool, "), result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.zarr"]


def test_an_array_of_many_tiny_chunks_is_read_and_written_in_blocks_of_them(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """1-pixel chunks: a task per chunk, 80 000 of them for 2x200x200, took 108 s for a crop that
    zarr's own read does in 11 (and wrote as many 1-pixel chunks); whole chunks are now grouped
    (chunked.grouped), within --max-pixels, the result the same."""
    from geomcli.engine import chunked

    # MANY_TASKS (4096) made 64 times smaller, and the array with it: the same grouping, on 576
    # chunk files instead of the 9216 that took 15 s to write and read twice
    monkeypatch.setattr(chunked, "MANY_TASKS", chunked.MANY_TASKS // 64)
    data = tensor(np.dtype("float32"), (1, 2, 12, 24))  # 576 chunks, more than MANY_TASKS
    write_zarr(tmp_path / "in.zarr", data, (1, 1, 1, 1))
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "10,20", "--axes", "2,3",
                 "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["notes"][-1] == "chunk by chunk: 1 output chunk(s)"
    out = read_zarr(tmp_path / "out.zarr")
    assert out.chunks == (1, 2, 10, 20)
    assert out[...].tobytes() == crop_ops.center_crop_pad(data, (10, 20), (2, 3)).tobytes()
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "10,20", "--axes", "2,3",
                 "--max-pixels", "100", "-q")
    assert result.exit_code == 0, result.stderr
    assert np.prod(read_zarr(tmp_path / "out.zarr").chunks) <= 100
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == crop_ops.center_crop_pad(data, (10, 20), (2, 3)).tobytes()


def test_a_big_endian_input_s_zarr_output_is_reported_as_it_reads_back(tmp_path: Path) -> None:
    """zarr v3 has no byte order in its data type: a '>f4' .npy (or v2 array) written to .zarr reads
    back as float32, where the summary and --json said >f4."""
    data = np.arange(24, dtype=">f4").reshape(4, 6)
    np.save(tmp_path / "in.npy", data)
    zarr.create_array(str(tmp_path / "v2.zarr"), shape=data.shape, dtype=data.dtype, chunks=(2, 3),
                      zarr_format=2)[...] = data
    for source in ("in.npy", "v2.zarr"):
        result = run("crop-pad", tmp_path / source, "-o", tmp_path / "out.zarr", "--shape", "2,2", "--json")
        assert result.exit_code == 0, result.stderr
        record = json.loads(result.stdout)
        out = read_zarr(tmp_path / "out.zarr")
        assert (record["input_dtype"], record["output_dtype"], str(out.dtype)) == (">f4", "float32", "float32")
        assert out[...].tolist() == [[8.0, 9.0], [14.0, 15.0]]


def test_a_zarr_v2_array_s_xarray_dimension_names_give_the_layout_and_travel(tmp_path: Path) -> None:
    """zarr v2 has no dimension_names: xarray writes them as the attribute _ARRAY_DIMENSIONS, which
    a try-out's run ignored (a two-value --shape refused, the output's names lost)."""
    data = tensor(np.dtype("uint16"), (3, 20, 24))
    array = zarr.create_array(str(tmp_path / "in.zarr"), shape=data.shape, dtype=data.dtype, chunks=(1, 8, 8),
                              zarr_format=2, attributes={"_ARRAY_DIMENSIONS": ["c", "y", "x"]})
    array[...] = data
    result = run("info", tmp_path / "in.zarr", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["layout"] == "CHW"
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "10,10", "-q")
    assert result.exit_code == 0, result.stderr
    out = read_zarr(tmp_path / "out.zarr")
    assert np.array_equal(out[...], data[:, 5:15, 7:17])
    assert out.metadata.dimension_names == ("c", "y", "x")


def test_an_array_in_a_group_is_named_as_one_a_link_reads(tmp_path: Path) -> None:
    """A path to an array in a group (or to an OME-Zarr level) was a folder of no file, or with
    -o OUT.zarr "no file extension"; a group's error named none of its arrays. Each now says what
    it is and how to read it, and the link it names reads it."""
    group = zarr.open_group(str(tmp_path / "grp.zarr"), mode="w")
    group.create_array("raw", shape=(6, 8), dtype="uint8", chunks=(4, 4))[...] = np.arange(48).reshape(6, 8)
    group.create_array("labels", shape=(6, 8), dtype="uint32", chunks=(4, 4))
    inner = tmp_path / "grp.zarr" / "raw"
    said = f"Error: {inner}: a zarr array or group, read only by a name ending in .zarr: link it under one"
    for args in (["info", inner], ["crop-pad", inner, "-o", tmp_path / "out.zarr", "--shape", "2,2"],
                 ["crop-pad", inner, "--out-dir", tmp_path / "outs", "--shape", "2,2"]):
        result = run(*args)
        assert result.exit_code == 2 and said in result.stderr, result.stderr
    result = run("info", tmp_path / "grp.zarr")
    assert result.exit_code == 1
    assert result.stderr == (f"Error: {tmp_path / 'grp.zarr'}: a zarr group, not an array (nor an OME-Zarr image); "
                             "it holds the arrays 'labels', 'raw': geomcli reads an array by a name of its own ending "
                             "in .zarr (locally, a link: ln -s GROUP.zarr/ARRAY ARRAY.zarr)\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["grp.zarr"]
    (tmp_path / "raw.zarr").symlink_to(inner)
    result = run("crop-pad", tmp_path / "raw.zarr", "-o", tmp_path / "out.zarr", "--shape", "2,2", "-q")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(read_zarr(tmp_path / "out.zarr")[...], np.arange(48).reshape(6, 8)[2:4, 3:5])


def ome_image(path: Path, data: np.ndarray, chunks: tuple[int, ...]) -> None:
    """An OME-Zarr 0.5 image of two levels, axes c, y, x."""
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "micrometer"},
            {"name": "x", "type": "space", "unit": "micrometer"}]
    group = zarr.open_group(str(path), mode="w", attributes={"ome": {"version": "0.5", "multiscales": [{
        "axes": axes, "datasets": [
            {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1.0, 0.5, 0.25]}]},
            {"path": "1", "coordinateTransformations": [{"type": "scale", "scale": [1.0, 1.0, 0.5]}]}]}]}})
    group.create_array("0", shape=data.shape, dtype=data.dtype, chunks=chunks)[...] = data
    group.create_array("1", shape=(data.shape[0], data.shape[1] // 2, data.shape[2] // 2), dtype=data.dtype,
                       chunks=chunks)


def test_an_ome_zarr_image_is_read_at_full_resolution_and_written_as_one(tmp_path: Path) -> None:
    """Its other levels are not made again, and info and the run say so: a try-out's pyramid of 2
    levels became one, said nowhere (info showed no levels; the record's notes, none)."""
    data = tensor(np.dtype("uint16"), (3, 16, 12))
    ome_image(tmp_path / "in.zarr", data, (1, 7, 7))
    shown = run("info", tmp_path / "in.zarr")
    assert "OME-Zarr (the first of 2 levels) scale [1, 0.5, 0.25]," in shown.stdout, shown.output
    assert json.loads(run("info", "--json", tmp_path / "in.zarr").stdout)["levels"] == 2
    result = run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--blocksize", "2", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[0])["notes"][0] == (
        "an OME-Zarr of 2 levels: the first (full resolution) alone is read, and the output has that one level")
    assert json.loads(run("info", "--json", tmp_path / "out.zarr").stdout)["levels"] == 1
    assert "(the first of" not in run("info", tmp_path / "out.zarr").stdout
    group = read_zarr(tmp_path / "out.zarr")
    image = group.attrs["ome"]["multiscales"][0]
    assert [axis["name"] for axis in image["axes"]] == ["c", "y", "x"]
    # its first pixel's centre lies between the first two input rows and columns: half an input pixel in
    assert image["datasets"] == [{"path": "0", "coordinateTransformations": [
        {"type": "scale", "scale": [1.0, 1.0, 0.5]}, {"type": "translation", "translation": [0.0, 0.25, 0.125]}]}]
    assert group.attrs["geomcli"] == {"complete": True}
    expected = space_depth_ops.space_to_depth(data[None], 2)[0]
    assert np.array_equal(group["0"][...], expected)


def ome(datasets: Any, axes: Any = ({"name": "y"}, {"name": "x"})) -> dict[str, Any]:
    return {"ome": {"version": "0.5", "multiscales": [{"axes": list(axes), "datasets": datasets}]}}


@pytest.mark.parametrize(("attributes", "level", "reason"), [
    (ome([{"path": "../../etc"}]), None, "not a readable OME-Zarr image (The path '../../etc' is invalid"),
    (ome([]), None, "not a readable OME-Zarr image (its multiscales name no first level's path)"),
    (ome([{"path": 0}]), None, "not a readable OME-Zarr image (its multiscales name no first level's path)"),
    ({"ome": {"multiscales": ["0"]}}, None, "not a readable OME-Zarr image (its multiscales name no first level"),
    ({"ome": "0", "multiscales": {"path": "0"}}, None, "not a readable OME-Zarr image (its multiscales name no"),
    (ome([{"path": "0"}]), "group", "the OME-Zarr level '0' is not an array"),
    (ome([{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": ["a", "b"]}]}]), "array",
     "not a readable OME-Zarr image (its scale ['a', 'b'] is not a list of finite numbers)"),
    (ome([{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [0.5]}]}]), "array",
     "not a readable OME-Zarr image (its scale has 1 numbers for 2 axes)"),
    # (written back, a NaN made the output's zarr.json no JSON a strict reader takes: JSON.parse fails)
    (ome([{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [float("nan"), 0.5]}]}]), "array",
     "not a readable OME-Zarr image (its scale [nan, 0.5] is not a list of finite numbers)"),
    (ome([{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1]},
                                                      {"type": "translation", "translation": [0, float("inf")]}]}]),
     "array", "not a readable OME-Zarr image (its translation [0, inf] is not a list of finite numbers)"),
    # pixels of no size: a resize's output kept the 0, a TIFF's physical size of 0 was no size at all
    (ome([{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [0, 0.5]}]}]), "array",
     "not a readable OME-Zarr image (its scale [0.0, 0.5] holds 0: pixels of no size)"),
    # a pixel's size below 0: info showed "z": {"size": -2.0}, and an OME-TIFF output wrote PhysicalSizeZ="-2"
    (ome([{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [-2, 0.5]}]}]), "array",
     "not a readable OME-Zarr image (its scale [-2.0, 0.5] holds -2: a pixel's size is above 0)"),
    ({"ome": {"version": "0.5", "multiscales": [{"axes": [{"name": "y"}, {"name": "x"}], "datasets": [{"path": "0"}],
                                                  "coordinateTransformations": [
                                                      {"type": "scale", "scale": [1, -0.5]}]}]}},
     "array", "not a readable OME-Zarr image (its scale [1.0, -0.5] holds -0.5: a pixel's size is above 0)"),
    ({"ome": {"version": "0.5", "multiscales": [{"axes": [{"name": "y"}, {"name": "x"}], "datasets": [{"path": "0"}],
                                                  "coordinateTransformations": [
                                                      {"type": "translation", "translation": [1, 2, 3]}]}]}},
     "array", "not a readable OME-Zarr image (its translation has 3 numbers for 2 axes)"),
], ids=["dot-dot", "no-level", "path-int", "image-str", "ome-str", "level-group", "scale-str", "scale-short",
        "scale-nan", "translation-inf", "scale-zero", "scale-negative", "outer-scale-negative", "outer-long"])
def test_ome_attributes_that_name_no_readable_level_are_one_error_line(tmp_path: Path, attributes: dict[str, Any],
                                                                       level: str | None, reason: str) -> None:
    """Attributes are any JSON: geomcli's own reading of them raised IndexError, TypeError,
    AttributeError or ValueError with a traceback."""
    group = zarr.open_group(str(tmp_path / "in.zarr"), mode="w", attributes=attributes)
    if level == "group":
        group.create_group("0")
    elif level == "array":
        group.create_array("0", shape=(4, 8), dtype="float32", chunks=(2, 4))
    for args in (["info"], ["crop-pad", "-o", tmp_path / "out.zarr", "--shape", "2,2"]):
        result = run(args[0], tmp_path / "in.zarr", *args[1:])
        assert result.exit_code == 1
        assert result.stderr.startswith(f"Error: {tmp_path / 'in.zarr'}: {reason}"), result.stderr
        assert len(result.stderr.splitlines()) == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.zarr"]


def test_an_output_cut_short_leaves_nothing_and_an_old_one_as_it_was(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A local zarr output is written beside its place and moved in only when complete."""
    from geomcli.io import _zarr

    data = tensor(np.dtype("float32"), (1, 4, 8, 8))
    write_zarr(tmp_path / "in.zarr", data, (1, 4, 4, 4))

    def cut_short(path: str, name: str | None = None) -> None:
        raise KeyboardInterrupt  # as Ctrl-C after the last chunk, before the marker

    monkeypatch.setattr(_zarr, "mark_complete", cut_short)
    stopped = run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--blocksize", "2")
    assert stopped.exit_code == 130
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.zarr"]
    monkeypatch.undo()
    assert run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--blocksize", "2",
               "-q").exit_code == 0
    before = read_zarr(tmp_path / "out.zarr")[...]
    monkeypatch.setattr(_zarr, "mark_complete", cut_short)
    assert run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--blocksize", "1").exit_code == 130
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == before.tobytes()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.zarr", "out.zarr"]


def _s2d(tmp_path: Path, blocksize: int, *flags: str) -> Result:
    return run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--blocksize", str(blocksize),
               *flags)


@pytest.fixture
def old_output(tmp_path: Path) -> np.ndarray:
    """in.zarr, and out.zarr made from it (space-to-depth, blocksize 2); what out.zarr holds."""
    write_zarr(tmp_path / "in.zarr", tensor(np.dtype("float32"), (1, 4, 8, 8)), (1, 4, 4, 4))
    assert _s2d(tmp_path, 2, "-q").exit_code == 0
    return np.asarray(read_zarr(tmp_path / "out.zarr")[...])


def test_a_failed_move_into_place_puts_the_old_array_back(tmp_path: Path, old_output: np.ndarray,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The old array is renamed aside, then the new one in: when that fails, the old one is renamed
    back (it was left under its hidden name, nothing at the output's)."""
    out, rename = str(tmp_path / "out.zarr"), os.rename

    def move_in_fails(source: str, destination: str) -> None:
        if destination == out and not source.endswith("-old"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        rename(source, destination)

    monkeypatch.setattr(os, "rename", move_in_fails)
    result = _s2d(tmp_path, 1)
    assert read_zarr(out)[...].tobytes() == old_output.tobytes()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.zarr", "out.zarr"]
    assert result.exit_code == 1
    assert result.stderr.endswith(f"Error: {out}: cannot write ({os.strerror(errno.EIO)})\n"), result.stderr


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_between_the_two_renames_waits_for_the_second(tmp_path: Path, old_output: np.ndarray,
                                                               monkeypatch: pytest.MonkeyPatch, sent: int) -> None:
    """Ctrl-C or SIGTERM the moment the old array is aside: held until the new one is in place
    (its handler raised there, and the new array was removed, the old one left hidden)."""
    out, rename = str(tmp_path / "out.zarr"), os.rename

    def signalled_after_the_first(source: str, destination: str) -> None:
        rename(source, destination)
        if source == out:
            signal.raise_signal(sent)

    monkeypatch.setattr(os, "rename", signalled_after_the_first)
    result = _s2d(tmp_path, 1)
    assert result.exit_code == (130 if sent == signal.SIGINT else 143), result.stderr
    assert read_zarr(out)[...].shape == (1, 4, 8, 8) != old_output.shape
    assert read_zarr(out).attrs["geomcli"] == {"complete": True}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.zarr", "out.zarr"]


def test_a_signal_whose_exception_vanished_places_no_array(tmp_path: Path, old_output: np.ndarray,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler took SIGTERM, and its SystemExit vanished (inside an import, say): as for a file,
    no output is placed after it."""
    from geomcli import io
    from geomcli.io import _zarr

    mark_complete = _zarr.mark_complete

    def taken_then_lost(path: str, name: str | None = None) -> None:
        mark_complete(path, name)
        io.note_signal(signal.SIGTERM)

    monkeypatch.setattr(_zarr, "mark_complete", taken_then_lost)
    assert _s2d(tmp_path, 1).exit_code == 143
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == old_output.tobytes()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.zarr", "out.zarr"]


@pytest.mark.parametrize("found", ["file", "link"])
def test_a_file_or_link_at_a_zarr_output_s_name_is_replaced_and_removed(tmp_path: Path, found: str) -> None:
    """Not a folder: unlinked (a link's folder kept), where rmtree failed quietly and left it under
    a hidden name."""
    write_zarr(tmp_path / "in.zarr", tensor(np.dtype("float32"), (1, 4, 8, 8)), (1, 4, 4, 4))
    (tmp_path / "kept").mkdir()
    if found == "file":
        (tmp_path / "out.zarr").write_text("old")
    else:
        (tmp_path / "out.zarr").symlink_to(tmp_path / "kept")
    assert _s2d(tmp_path, 2, "-q").exit_code == 0
    assert read_zarr(tmp_path / "out.zarr").attrs["geomcli"] == {"complete": True}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.zarr", "kept", "out.zarr"]


@pytest.mark.parametrize("planted", ["array", "file"])
def test_no_clobber_skips_a_zarr_output_made_during_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            planted: str) -> None:
    """-n: an array (or a file) made at an output's name after the plan looked is left as it is and
    the input skipped, as for a file (it was renamed aside and removed)."""
    from geomcli.io import _zarr

    data = tensor(np.dtype("float32"), (1, 4, 8, 8))
    for name in ["a", "b"]:
        write_zarr(tmp_path / "in" / f"{name}.zarr", data, (1, 4, 4, 4))
    out = tmp_path / "out"
    mark_complete = _zarr.mark_complete

    def planted_meanwhile(path: str, name: str | None = None) -> None:
        if os.path.basename(path).startswith(".b.zarr."):
            if planted == "array":
                write_zarr(out / "b.zarr", np.full((2, 2), 7, np.uint8), (2, 2))
            else:
                (out / "b.zarr").write_text("precious")
        mark_complete(path, name)

    monkeypatch.setattr(_zarr, "mark_complete", planted_meanwhile)
    result = run("space-to-depth", f"{tmp_path}/in/*.zarr", "--out-dir", out, "--blocksize", "2", "-n", "-j", "1",
                 "--json")
    assert result.exit_code == 0, result.stderr
    records = {Path(record.get("input", "")).name: record for record in map(json.loads, result.stdout.splitlines())}
    assert (records["a.zarr"]["status"], records["b.zarr"]["status"]) == ("ok", "skipped")
    assert (records["b.zarr"]["error"], records["b.zarr"]["notes"]) == (None, ["the output exists (--no-clobber)"])
    if planted == "array":
        assert read_zarr(out / "b.zarr")[...].tolist() == [[7, 7], [7, 7]]
    else:
        assert (out / "b.zarr").read_text() == "precious"
    assert sorted(os.listdir(out)) == ["a.zarr", "b.zarr"]


def test_the_sweep_after_a_stopped_writer_clears_a_zarr_output_s_hidden_folders(tmp_path: Path) -> None:
    """What atomic_folder leaves when its process dies in the middle (a -j worker ends by os._exit):
    its folder removed, an old one set aside removed where the new one took its place, else renamed
    back; another output's, and names it never makes, kept. A URL has none (its sweep is another:
    test_the_sweep_of_a_stopped_run_removes_its_incomplete_zarr_outputs_on_s3)."""
    from geomcli.io import _atomic

    made = tmp_path / ".out.zarr.geomcli-0123abcd"
    (made / "c").mkdir(parents=True)
    (made / "zarr.json").write_text("{}")
    (tmp_path / ".out.zarr.geomcli-4567cdef-old").write_text("a plain file, set aside")
    (tmp_path / "out.zarr").mkdir()
    kept = [".other.zarr.geomcli-0123abcd", ".out.zarr.geomcli-0123abcz", ".out.zarr.geomcli-0123abcd-older"]
    for name in kept:
        (tmp_path / name).mkdir()
    removed = _atomic.remove_leftovers(f"{tmp_path / 'out.zarr'}/")
    assert sorted(removed) == [str(made), str(tmp_path / ".out.zarr.geomcli-4567cdef-old")]
    assert sorted(os.listdir(tmp_path)) == sorted([*kept, "out.zarr"])
    (tmp_path / "out.zarr").rename(tmp_path / ".out.zarr.geomcli-89abcdef-old")  # died between the renames
    assert _atomic.remove_leftovers(str(tmp_path / "out.zarr")) == []
    assert sorted(os.listdir(tmp_path)) == sorted([*kept, "out.zarr"])
    assert _atomic.remove_leftovers("s3://bucket/out/a.zarr") == []


@pytest.mark.process
def test_a_signal_mid_batch_leaves_only_complete_zarr_outputs(tmp_path: Path) -> None:
    """A -j worker ends at once on SIGTERM (os._exit, no cleanup of its own): the sweep after it
    removes its hidden folder. The run is held (SIGSTOP, the whole process group) the moment an
    output is complete and another is being made, then signalled and let go."""
    import subprocess
    import sys

    rng = np.random.default_rng(42)
    (tmp_path / "in").mkdir()
    for index in range(8):
        np.save(tmp_path / "in" / f"{index}.npy", rng.standard_normal((3, 1024, 1024)).astype(np.float32))
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "geomcli", "warp", str(tmp_path / "in"), "--out-dir", str(out),
                                "--name", "{stem}.zarr", "--rotate", "10", "--layout", "CHW", "-j", "2"],
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60

    def complete_and_made() -> bool:
        names = os.listdir(out) if out.exists() else []
        return any(not name.startswith(".") for name in names) and any(".geomcli-" in name for name in names)

    while not complete_and_made():
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.002)
    os.killpg(process.pid, signal.SIGSTOP)
    process.send_signal(signal.SIGTERM)
    os.killpg(process.pid, signal.SIGCONT)
    stderr = process.communicate(timeout=30)[1]
    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr
    written = sorted(os.listdir(out))
    assert 0 < len(written) < 8 and all(not name.startswith(".") for name in written), written
    for name in written:
        array = read_zarr(out / name)
        assert array.attrs["geomcli"] == {"complete": True} and array.shape == (3, 1024, 1024)


def test_an_output_a_run_left_incomplete_is_refused(tmp_path: Path) -> None:
    """What a killed run on object storage can leave (its marker says so): refused as an input."""
    data = tensor(np.dtype("float32"), (1, 4, 8, 8))
    array = zarr.create_array(str(tmp_path / "out.zarr"), shape=data.shape, dtype=data.dtype, chunks=(1, 4, 4, 4),
                              attributes={"geomcli": {"complete": False}})
    array[...] = data
    result = run("crop-pad", tmp_path / "out.zarr", "-o", tmp_path / "again.zarr", "--shape", "1,1,1,1")
    assert result.exit_code == 1
    assert result.stderr == (f"Error: {tmp_path / 'out.zarr'}: an incomplete output (the run writing it stopped); "
                             "write it again\n")


def test_an_array_declaring_more_chunks_than_a_run_takes_is_one_error_line(tmp_path: Path) -> None:
    """A zarr.json declaring 10**12 x 10**12 in chunks of 2 x 4 (its chunks never written): dask's
    list of chunk sizes per axis was a MemoryError under ulimit -v, or took the machine's memory."""
    import subprocess
    import sys

    zarr.create_array(str(tmp_path / "in.zarr"), shape=(4, 8), dtype="float32", chunks=(2, 4))
    metadata = json.loads((tmp_path / "in.zarr" / "zarr.json").read_text())
    (tmp_path / "in.zarr" / "zarr.json").write_text(json.dumps({**metadata, "shape": [10**12, 10**12]}))
    done = subprocess.run(["bash", "-c", f'ulimit -v {2 << 20}; exec "$@"', "-", sys.executable, "-m", "geomcli",
                           "crop-pad", str(tmp_path / "in.zarr"), "-o", str(tmp_path / "out.zarr"), "--shape", "4,4"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr == (f"Error: {tmp_path / 'in.zarr'}: chunks (2, 4) cut the shape (1000000000000, 1000000000000) "
                           "into 125000000000000000000000 tasks, more than the 16777216 a run takes\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.zarr"]


SHARDED_BY_ZEROS = [{"name": "sharding_indexed", "configuration": {
    "chunk_shape": [0, 0], "codecs": [{"name": "bytes"}], "index_codecs": [{"name": "bytes"}, {"name": "crc32c"}]}}]


@pytest.mark.parametrize(("edit", "reason"), [
    ({"shape": [4.5, 8]}, "Expected an iterable of integers"),
    ({"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [0, 4]}}}, "shape (4, 8) in chunks (0, 4)"),
    ({"shape": [2**64, 8]}, "shape (18446744073709551616, 8) in chunks (2, 4)"),
    ({"codecs": SHARDED_BY_ZEROS}, "integer modulo by zero"),
    ({"fill_value": "not a number"}, "Invalid type: not a number"),
], ids=["float-shape", "zero-chunk", "shape-2**64", "zero-inner-chunk", "fill-value"])
def test_metadata_no_array_can_have_is_one_error_line(tmp_path: Path, edit: dict[str, Any], reason: str) -> None:
    """zarr raised TypeError or ZeroDivisionError opening these, or opened them and dask divided
    by the zero chunk or failed on the shape: tracebacks."""
    zarr.create_array(str(tmp_path / "in.zarr"), shape=(4, 8), dtype="float32", chunks=(2, 4))
    metadata = json.loads((tmp_path / "in.zarr" / "zarr.json").read_text())
    (tmp_path / "in.zarr" / "zarr.json").write_text(json.dumps({**metadata, **edit}))
    for args in (["info"], ["crop-pad", "-o", tmp_path / "out.zarr", "--shape", "4,4"]):
        result = run(args[0], tmp_path / "in.zarr", *args[1:])
        assert result.exit_code == 1
        assert result.stderr.startswith(f"Error: {tmp_path / 'in.zarr'}: not a readable zarr array ("), result.stderr
        assert reason in result.stderr and len(result.stderr.splitlines()) == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.zarr"]


def test_info_of_an_array_of_strings(tmp_path: Path) -> None:
    """Its dtype's str, StringDType(), is no name numpy takes back: info failed with a traceback."""
    zarr.create_array(str(tmp_path / "in.zarr"), shape=(2, 3), dtype=str, chunks=(2, 3))
    result = run("info", tmp_path / "in.zarr")
    assert result.exit_code == 0 and "2×3 StringDType()" in result.stdout


def test_folders_and_quoted_globs_take_zarr_arrays_as_inputs(tmp_path: Path) -> None:
    data = tensor(np.dtype("uint8"), (1, 3, 8, 8))
    (tmp_path / "in" / "deeper").mkdir(parents=True)
    write_zarr(tmp_path / "in" / "a.zarr", data, (1, 3, 4, 4))
    write_zarr(tmp_path / "in" / "deeper" / "b.zarr", data, (1, 3, 4, 4))
    np.save(tmp_path / "in" / "c.npy", data)
    # (in/* matches the folder deeper too, taken as named, as the shell passes it: its b.zarr)
    for inputs, names in [([tmp_path / "in"], ["a.zarr", "c.npy"]),
                          ([f"{tmp_path}/in/*"], ["a.zarr", "b.zarr", "c.npy"]),
                          ([f"{tmp_path}/in/**/*.zarr"], ["a.zarr", "b.zarr"]), (["-r", tmp_path / "in"],
                                                                                ["a.zarr", "b.zarr", "c.npy"])]:
        result = run("crop-pad", *inputs, "--out-dir", tmp_path / "out", "--shape", "1,3,4,4", "--dry-run")
        assert result.exit_code == 0, result.stderr
        assert sorted(Path(line.split(" → ")[0]).name for line in result.stdout.splitlines()) == names, inputs
    result = run("crop-pad", "-r", tmp_path / "in", "--out-dir", tmp_path / "out", "--shape", "1,3,4,4", "-q")
    assert result.exit_code == 0, result.stderr
    assert read_zarr(tmp_path / "out" / "deeper" / "b.zarr")[...].tobytes() == data[:, :, 2:6, 2:6].tobytes()


def test_the_inputs_axis_names_travel_where_they_still_fit(tmp_path: Path) -> None:
    data = tensor(np.dtype("uint8"), (2, 3, 8, 8))
    write_zarr(tmp_path / "in.zarr", data, (1, 3, 4, 4), names=["t", "c", "y", "x"])
    for command, args in [("crop-pad", ["--shape", "4,4"]), ("space-to-depth", ["--blocksize", "2"]),
                          ("resize", ["--sizes", "4,6"])]:
        result = run(command, tmp_path / "in.zarr", "-o", tmp_path / f"{command}.zarr", "-q", *args)
        assert result.exit_code == 0, result.stderr
        assert read_zarr(tmp_path / f"{command}.zarr").metadata.dimension_names == ("t", "c", "y", "x")


def ome_five(path: Path, data: np.ndarray) -> None:
    """An OME-Zarr 0.5 image of axes t, c, z, y, x."""
    names = ["t", "c", "z", "y", "x"]
    types = {"t": "time", "c": "channel", "z": "space", "y": "space", "x": "space"}
    group = zarr.open_group(str(path), mode="w", attributes={"ome": {"version": "0.5", "multiscales": [{
        "axes": [{"name": name, "type": types[name]} for name in names], "datasets": [
            {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1.0, 1.0, 2.0, 0.5, 0.5]}]}]}]}})
    array = group.create_array("0", shape=data.shape, dtype=data.dtype, chunks=(1, 2, 2, 8, 8), dimension_names=names)
    array[...] = data


def test_a_five_axis_ome_zarr_is_its_own_layout_as_a_tiff_hyperstack_is(tmp_path: Path) -> None:
    """TCZYX: t and z stacks, c the channels, y and x the plane; the same result as the OME-TIFF
    of the same axes gives, the axes and the scale written back."""
    import tifffile

    data = np.random.default_rng(8).integers(0, 60000, (2, 3, 4, 16, 12), dtype=np.uint16)
    ome_five(tmp_path / "in.zarr", data)
    tifffile.imwrite(tmp_path / "in.ome.tif", data, ome=True, photometric="minisblack", metadata={"axes": "TCZYX"})
    for command, args in [("crop-pad", ["--shape", "12,10"]), ("space-to-depth", ["--blocksize", "2"])]:
        result = run(command, tmp_path / "in.zarr", "-o", tmp_path / f"{command}.zarr", "-q", *args)
        assert result.exit_code == 0, result.stderr
        assert run(command, tmp_path / "in.ome.tif", "-o", tmp_path / f"{command}.npy", "-q", *args).exit_code == 0
        group = read_zarr(tmp_path / f"{command}.zarr")
        assert group["0"][...].tobytes() == np.load(tmp_path / f"{command}.npy").tobytes()
        image = group.attrs["ome"]["multiscales"][0]
        assert [axis["name"] for axis in image["axes"]] == ["t", "c", "z", "y", "x"]
        assert group["0"].metadata.dimension_names == ("t", "c", "z", "y", "x")
        scale = [1.0, 1.0, 2.0, 1.0, 1.0] if command == "space-to-depth" else [1.0, 1.0, 2.0, 0.5, 0.5]
        # the crop starts 2 rows and 1 column in; a block's centre is half an input pixel in
        moved = [0.0, 0.0, 0.0, 0.25, 0.25] if command == "space-to-depth" else [0.0, 0.0, 0.0, 1.0, 0.5]
        assert image["datasets"][0]["coordinateTransformations"] == [
            {"type": "scale", "scale": scale}, {"type": "translation", "translation": moved}]


def ome_group(path: Path, data: np.ndarray, axes: list[dict[str, str]],
              transforms: list[dict[str, Any]]) -> None:
    """An OME-Zarr 0.5 image of one level with these axes and coordinate transformations."""
    group = zarr.open_group(str(path), mode="w", attributes={"ome": {"version": "0.5", "multiscales": [{
        "axes": axes, "datasets": [{"path": "0", "coordinateTransformations": transforms}]}]}})
    group.create_array("0", shape=data.shape, dtype=data.dtype, chunks=data.shape,
                       dimension_names=[axis["name"] for axis in axes])[...] = data


def written_image(path: Path) -> dict[str, Any]:
    image: dict[str, Any] = read_zarr(path).attrs["ome"]["multiscales"][0]
    return image


NANOMETRE_TCZYX = [{"name": "t", "type": "time", "unit": "second"}, {"name": "c", "type": "channel"},
                   *({"name": name, "type": "space", "unit": "nanometer"} for name in "zyx")]


@pytest.mark.parametrize(("axes", "scale", "args", "expected_scale", "translation"), [
    # 30x40 -> 30x30: 5 columns of 0.25 cut on the left
    (NANOMETRE_TCZYX[1:2] + NANOMETRE_TCZYX[3:], [1.0, 0.5, 0.25],
     ["crop-pad", "IN", "-o", "OUT", "-q", "--shape", "30,30"], [1.0, 0.5, 0.25], [0.0, 0.0, 1.25]),
    # halved (x_in = 2 x_out + 0.5: 50 nm in), then 2 rows and 5 columns of 200 cut
    (NANOMETRE_TCZYX, [2.0, 1.0, 300.0, 100.0, 100.0],
     ["chain", "-i", "IN", "-o", "OUT", "-q", "resize", "--scales", "0.5,0.5", "crop-pad", "--shape", "10,10"],
     [2.0, 1.0, 300.0, 200.0, 200.0], [0.0, 0.0, 0.0, 450.0, 1050.0]),
    ([{"name": name, "type": kind} for name, kind in zip("czyx", ["channel", "space", "space", "space"])],
     [1.0, 2.0, 0.5, 0.5], ["crop-pad", "IN", "-o", "OUT", "-q", "--shape", "10,10"], [1.0, 2.0, 0.5, 0.5],
     [0.0, 0.0, 5.0, 7.5]),
])
def test_each_ome_axis_keeps_its_name_type_and_unit(tmp_path: Path, axes: list[dict[str, str]], scale: list[float],
                                                    args: list[str], expected_scale: list[float],
                                                    translation: list[float]) -> None:
    """A try-out's nanometres were written as micrometres (1000 times the size) and its time
    axis lost its seconds; an axis of no unit gets none (NGFF's unit is optional)."""
    shape = (2, 3, 4, 30, 40)[-len(axes):]
    data = np.arange(int(np.prod(shape)), dtype=np.uint16).reshape(shape)
    ome_group(tmp_path / "in.zarr", data, axes, [{"type": "scale", "scale": scale}])
    result = run(*[{"IN": tmp_path / "in.zarr", "OUT": tmp_path / "out.zarr"}.get(arg, arg) for arg in args])
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    image = written_image(tmp_path / "out.zarr")
    assert image["axes"] == axes
    assert image["datasets"] == [{"path": "0", "coordinateTransformations": [
        {"type": "scale", "scale": expected_scale}, {"type": "translation", "translation": translation}]}]


def test_physical_pixel_sizes_go_from_an_ome_tiff_to_an_ome_zarr_or_are_named_as_dropped(tmp_path: Path) -> None:
    """An OME-TIFF's PhysicalSize* become an OME-Zarr's scale and units (resized as the pixels
    are); where the other side cannot hold them, a warning names them (``dropped`` for .npy).
    A try-out lost them both ways without a word."""
    import tifffile

    data = np.arange(3 * 40 * 50, dtype=np.uint16).reshape((3, 40, 50))
    physical = {"PhysicalSizeX": 0.5, "PhysicalSizeXUnit": "nm", "PhysicalSizeY": 0.25, "PhysicalSizeYUnit": "nm"}
    tifffile.imwrite(tmp_path / "cyx.ome.tif", data, ome=True, photometric="minisblack",
                     metadata={"axes": "CYX", **physical})
    result = run("resize", tmp_path / "cyx.ome.tif", "-o", tmp_path / "cyx.zarr", "--scales", "0.5,0.5", "-q")
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    image = written_image(tmp_path / "cyx.zarr")
    assert image["axes"] == [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "nanometer"},
                             {"name": "x", "type": "space", "unit": "nanometer"}]
    # half an input pixel in (x_in = 2 x_out + 0.5): the OME-TIFF's first pixel's centre is at 0
    assert image["datasets"][0]["coordinateTransformations"] == [
        {"type": "scale", "scale": [1.0, 0.5, 1.0]}, {"type": "translation", "translation": [0.0, 0.125, 0.25]}]
    # ZCYX: no order NGFF allows
    tifffile.imwrite(tmp_path / "zcyx.ome.tif", np.stack([data, data]), ome=True, photometric="minisblack",
                     metadata={"axes": "ZCYX", **physical})
    result = run("crop-pad", tmp_path / "zcyx.ome.tif", "-o", tmp_path / "zcyx.zarr", "--shape", "20,20", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["warnings"] == [
        "zarr cannot hold the physical pixel sizes (y 0.25 nanometer, x 0.5 nanometer) of axes ZCYX (OME-Zarr orders "
        "time, channel, then 2 or 3 of space); dropped"]
    # and back: a .npy written chunk by chunk holds none (a TIFF's are OME's: see the test below)
    result = run("crop-pad", tmp_path / "cyx.zarr", "-o", tmp_path / "back.npy", "--shape", "10,10", "--json")
    assert result.exit_code == 0 and result.stderr == ""
    record = json.loads(result.stdout)
    assert (record["warnings"], record["dropped"]) == ([], ["physical pixel sizes (y 0.5 nanometer, x 1 nanometer)"])


@pytest.mark.parametrize(("axes", "options", "expected"), [
    # an ImageJ z-stack: its 0.25 micron pixels (4 a micron) and 1.5 micron slices
    ("ZYX", {"imagej": True, "resolution": (4.0, 2.0), "metadata": {"axes": "ZYX", "spacing": 1.5, "unit": "um"}},
     [("z", "micrometer", 1.5), ("y", "micrometer", 0.5), ("x", "micrometer", 0.25)]),
    # an ImageJ time series: its frame interval is in seconds
    ("TYX", {"imagej": True, "resolution": (4.0, 4.0), "metadata": {"axes": "TYX", "finterval": 3.0, "unit": "nm"}},
     [("t", "second", 3.0), ("y", "nanometer", 0.25), ("x", "nanometer", 0.25)]),
    # an OME-TIFF's TimeIncrement, in its unit
    ("TCYX", {"ome": True, "metadata": {"axes": "TCYX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.5,
                                        "TimeIncrement": 2.5, "TimeIncrementUnit": "ms"}},
     [("t", "millisecond", 2.5), ("c", None, 1.0), ("y", "micrometer", 0.5), ("x", "micrometer", 0.5)]),
], ids=["imagej-z", "imagej-t", "ome-t"])
def test_an_imagej_calibration_is_an_ome_zarr_s_scale(tmp_path: Path, axes: str, options: dict[str, Any],
                                                      expected: list[tuple[str, str | None, float]]) -> None:
    """An ImageJ TIFF's calibration (its resolution's pixel size, slice spacing and frame interval,
    in its unit) and an OME-TIFF's TimeIncrement were not carried into the scale of a .zarr: the
    zarr was a plain array of pixels of no size, its --json naming 'DPI (101600 x 101600)' and
    'ImageJ spacing 1.5' as dropped, or a time axis of scale 1. They are its OME-Zarr scale now,
    each axis with its unit."""
    import tifffile

    shape = (3, 2, 8, 8) if len(axes) == 4 else (3, 8, 8)
    tifffile.imwrite(tmp_path / "in.tif", np.zeros(shape, np.uint16), **options)
    result = run("crop-pad", tmp_path / "in.tif", "-o", tmp_path / "out.zarr", "--shape", "4,4", "--json")
    record = json.loads(result.stdout)
    assert result.exit_code == 0 and record["warnings"] == [] and "dropped" not in record, result.output
    image = written_image(tmp_path / "out.zarr")
    scale = image["datasets"][0]["coordinateTransformations"][0]["scale"]
    assert [(axis["name"], axis.get("unit"), size) for axis, size in zip(image["axes"], scale)] == expected
    if axes == "TCYX":  # and back, its time increment in its unit
        back = run("crop-pad", tmp_path / "out.zarr", "-o", tmp_path / "back.ome.tif", "--shape", "2,2", "--json")
        assert json.loads(back.stdout)["warnings"] == []
        with tifffile.TiffFile(tmp_path / "back.ome.tif") as tif:
            pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
        assert (pixels["TimeIncrement"], pixels["TimeIncrementUnit"], pixels["PhysicalSizeX"]) == (2.5, "ms", 0.5)


def test_an_imagej_z_stack_s_frame_interval_that_no_scale_holds_is_named_as_dropped(tmp_path: Path) -> None:
    """An ImageJ ZYX stack of 1.5 micron slices and a frame interval of 2 s to a .zarr: its spacing
    and pixel size became the OME-Zarr scale, and its frame interval, which has no t axis to be the
    scale of, went with them without a word ('dropped' absent from --json), where a stack of no
    length unit, whose calibration is no scale, named it. It is named as dropped now; a TZYX
    stack's is its t scale, as before."""
    import tifffile

    for axes, shape in (("ZYX", (3, 8, 8)), ("TZYX", (2, 3, 8, 8))):
        source = tmp_path / f"{axes}.tif"
        tifffile.imwrite(source, np.zeros(shape, np.uint8), imagej=True, resolution=(2.0, 2.0),
                         metadata={"axes": axes, "finterval": 2.0, "unit": "um", "spacing": 1.5})
        result = run("crop-pad", source, "-o", tmp_path / f"{axes}.zarr", "--shape", "4,4", "--json")
        record = json.loads(result.stdout)
        assert result.exit_code == 0 and record["warnings"] == [], result.output
        scale = written_image(tmp_path / f"{axes}.zarr")["datasets"][0]["coordinateTransformations"][0]["scale"]
        if axes == "ZYX":
            assert (record["dropped"], scale) == (["ImageJ finterval 2"], [1.5, 0.5, 0.5])
        else:
            assert ("dropped" not in record, scale) == (True, [2.0, 1.5, 0.5, 0.5])


def test_an_imagej_t_stack_of_no_length_unit_keeps_its_frame_interval_as_its_t_scale(tmp_path: Path) -> None:
    """'crop-pad tyx.tif -o a.zarr --shape 4,4' of an ImageJ TYX stack with a frame interval of 2 s
    but no length unit dropped the interval (named in --json's 'dropped' alone): seconds need no
    length unit, and it is the t scale now; a resolution of no unit is still named as dropped."""
    import tifffile

    for resolution in (None, (4.0, 4.0)):
        source = tmp_path / f"{resolution is None}.tif"
        tifffile.imwrite(source, np.zeros((3, 6, 6), np.uint8), imagej=True, resolution=resolution,
                         metadata={"axes": "TYX", "finterval": 2.0})
        output = tmp_path / f"{resolution is None}.zarr"
        record = json.loads(run("crop-pad", source, "-o", output, "--shape", "4,4", "--json").stdout)
        image = written_image(output)
        assert [axis.get("unit") for axis in image["axes"]] == ["second", None, None]
        assert image["datasets"][0]["coordinateTransformations"][0]["scale"] == [2.0, 1.0, 1.0]
        assert record.get("dropped") == (None if resolution is None else ["resolution (4 x 4 pixels (no unit))"])


def test_an_ome_zarr_s_channel_labels_are_an_ome_tiff_s_channel_names(tmp_path: Path) -> None:
    """An OME-Zarr's omero channel labels were lost without a word in a TIFF output: they are its
    OME channel names where the channels are the input's (a crop's), else dropped as the omero is."""
    import tifffile

    data = tensor(np.dtype("uint16"), (3, 16, 12))
    ome_image(tmp_path / "in.zarr", data, (1, 7, 7))
    group = zarr.open_group(str(tmp_path / "in.zarr"), mode="r+")
    ome = dict(group.attrs["ome"])
    group.attrs["ome"] = {**ome, "omero": {"channels": [{"label": "dapi", "color": "0000FF"}, {"label": "gfp"},
                                                        {"label": "rfp"}]}}
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.ome.tif", "--shape", "4,4", "--json")
    assert result.exit_code == 0, result.output
    # (dapi's colour, which no OME channel name holds, is named: see the test below)
    assert json.loads(result.stdout)["warnings"] == ["a TIFF cannot hold the OME-Zarr omero channels' color; dropped"]
    with tifffile.TiffFile(tmp_path / "out.ome.tif") as tif:
        channels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]["Channel"]
    assert [channel["Name"] for channel in channels] == ["dapi", "gfp", "rfp"]
    blocks = run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "blocks.ome.tif", "--blocksize", "2",
                 "--json")
    assert json.loads(blocks.stdout)["warnings"] == [
        "the OME-Zarr omero metadata of 3 channel(s) does not fit the output of space-to-depth; dropped"]
    with tifffile.TiffFile(tmp_path / "blocks.ome.tif") as tif:
        assert "dapi" not in tif.ome_metadata


def test_an_ome_tiff_s_channel_names_are_an_ome_zarr_s_channel_labels(tmp_path: Path) -> None:
    """An OME-TIFF's channel names were lost in an OME-Zarr (its --json said 'dropped': ['OME channel
    names (dapi, gfp)'], where the other way they become OME channel names): they are its omero's
    channel labels where the channels are the input's; where not, a warning names them dropped."""
    import tifffile

    data = np.arange(2 * 16 * 12, dtype=np.uint16).reshape(2, 16, 12)
    tifffile.imwrite(tmp_path / "in.ome.tif", data, ome=True, metadata={
        "axes": "CYX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.5, "Channel": {"Name": ["dapi", "gfp"]}})
    result = run("crop-pad", tmp_path / "in.ome.tif", "-o", tmp_path / "out.zarr", "--shape", "8,8", "--json")
    record = json.loads(result.stdout)
    assert result.exit_code == 0 and record["warnings"] == [] and "dropped" not in record, result.output
    assert read_zarr(tmp_path / "out.zarr").attrs["ome"]["omero"] == {"channels": [{"label": "dapi"},
                                                                                   {"label": "gfp"}]}
    # and back, the names the TIFF had
    assert run("crop-pad", tmp_path / "out.zarr", "-o", tmp_path / "back.ome.tif", "--shape", "4,4").exit_code == 0
    with tifffile.TiffFile(tmp_path / "back.ome.tif") as tif:
        channels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]["Channel"]
    assert [channel["Name"] for channel in channels] == ["dapi", "gfp"]
    blocks = run("space-to-depth", tmp_path / "in.ome.tif", "-o", tmp_path / "blocks.zarr", "--blocksize", "2",
                 "--json")
    assert json.loads(blocks.stdout)["warnings"] == [
        "the OME-XML channel names (dapi, gfp) do not fit the output of space-to-depth; dropped"]
    assert "omero" not in read_zarr(tmp_path / "blocks.zarr").attrs["ome"]


def test_an_ome_tiff_of_channel_names_and_no_sizes_is_an_ome_zarr_as_one_with_sizes_is(tmp_path: Path) -> None:
    """An OME-TIFF with channel names but no physical sizes wrote a plain zarr array, its names under
    'dropped' in --json, where one with sizes wrote an OME-Zarr with them as omero labels. It is an
    OME-Zarr too now (its axes named, of no unit, scale 1), and back to an OME-TIFF with its names."""
    import tifffile

    data = np.arange(2 * 16 * 12, dtype=np.uint16).reshape(2, 16, 12)
    tifffile.imwrite(tmp_path / "in.ome.tif", data, ome=True, metadata={
        "axes": "CYX", "Channel": {"Name": ["dapi", "gfp"]}})
    result = run("crop-pad", tmp_path / "in.ome.tif", "-o", tmp_path / "out.zarr", "--shape", "8,8", "--json")
    record = json.loads(result.stdout)
    assert result.exit_code == 0 and record["warnings"] == [] and "dropped" not in record, result.output
    attributes = read_zarr(tmp_path / "out.zarr").attrs["ome"]
    assert attributes["omero"] == {"channels": [{"label": "dapi"}, {"label": "gfp"}]}
    image = attributes["multiscales"][0]
    assert image["axes"] == [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
                             {"name": "x", "type": "space"}]
    assert image["datasets"][0]["coordinateTransformations"][0] == {"type": "scale", "scale": [1.0, 1.0, 1.0]}
    assert np.array_equal(np.asarray(read_zarr(tmp_path / "out.zarr")["0"]), data[:, 4:12, 2:10])
    back = run("crop-pad", tmp_path / "out.zarr", "-o", tmp_path / "back.tif", "--shape", "4,4", "--json")
    assert back.exit_code == 0 and json.loads(back.stdout)["warnings"] == [], back.output
    with tifffile.TiffFile(tmp_path / "back.tif") as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
    assert [channel["Name"] for channel in pixels["Channel"]] == ["dapi", "gfp"] and "PhysicalSizeX" not in pixels


def test_an_ome_zarr_with_one_axis_of_no_unit_keeps_the_other_axes_sizes_in_an_ome_tiff(tmp_path: Path) -> None:
    """An OME-TIFF of PhysicalSizeX/Y and TimeIncrement but no PhysicalSizeZ writes an OME-Zarr whose
    z has no unit; back to a TIFF, that one axis cost every size: 'a TIFF written chunk by chunk
    cannot hold the physical pixel sizes (t 3 second, y 0.5 micrometer, x 0.5 micrometer); dropped',
    an OME-TIFF of none. The axes of a unit keep theirs now; z, which says none, has none."""
    import tifffile

    data = np.arange(2 * 3 * 16 * 12, dtype=np.uint16).reshape(2, 3, 16, 12)
    tifffile.imwrite(tmp_path / "in.ome.tif", data, ome=True, metadata={
        "axes": "TZYX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.5, "TimeIncrement": 3.0})
    assert run("crop-pad", tmp_path / "in.ome.tif", "-o", tmp_path / "mid.zarr", "--shape", "8,8").exit_code == 0
    axes = read_zarr(tmp_path / "mid.zarr").attrs["ome"]["multiscales"][0]["axes"]
    assert [axis.get("unit") for axis in axes] == ["second", None, "micrometer", "micrometer"]
    back = run("crop-pad", tmp_path / "mid.zarr", "-o", tmp_path / "back.ome.tif", "--shape", "4,4", "--json")
    assert back.exit_code == 0 and json.loads(back.stdout)["warnings"] == [], back.output
    with tifffile.TiffFile(tmp_path / "back.ome.tif") as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
        assert tif.series[0].axes == "TZYX" and tif.series[0].shape == (2, 3, 4, 4)
    assert (pixels["PhysicalSizeX"], pixels["PhysicalSizeY"], pixels["TimeIncrement"]) == (0.5, 0.5, 3.0)
    assert "PhysicalSizeZ" not in pixels


@pytest.mark.parametrize("mapped", [False, True], ids=["from-ram", "memory-map"])
def test_a_zarr_to_an_ome_tif_name_is_an_ome_tiff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 mapped: bool) -> None:
    """A .ome.tif name promises OME-XML: a zarr of no scale with units and no omero labels (a plain
    array's dimension_names c, y, x; an OME-Zarr's t, y, x of no unit) was written as a TIFF of
    none. It is an OME-TIFF of their axes now; an array of no known layout says why it is not."""
    import tifffile

    from geomcli.io import _mapped

    if mapped:
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    data = np.arange(3 * 16 * 12, dtype=np.uint16).reshape(3, 16, 12)
    write_zarr(tmp_path / "cyx.zarr", data, (1, 16, 12), ["c", "y", "x"])
    ome_group(tmp_path / "tyx.zarr", data, [{"name": "t", "type": "time"}, {"name": "y", "type": "space"},
                                            {"name": "x", "type": "space"}], [{"type": "scale", "scale": [1, 1, 1]}])
    for source, axes in (("cyx.zarr", "CYX"), ("tyx.zarr", "TYX")):
        out = tmp_path / f"{source}.ome.tif"
        result = run("crop-pad", tmp_path / source, "-o", out, "--shape", "8,8", "--json")
        assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
        with tifffile.TiffFile(out) as tif:
            assert tif.is_ome and tif.series[0].axes == axes, source
            assert np.array_equal(tif.asarray(), data[:, 4:12, 2:10])
    write_zarr(tmp_path / "anon.zarr", data, (1, 16, 12))
    result = run("crop-pad", tmp_path / "anon.zarr", "-o", tmp_path / "anon.ome.tif", "--shape", "8,8", "--axes", "1,2",
                 "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [
        "a .ome.tif name promises OME-XML, but the result's axes are of no known layout; written without OME-XML"]


def test_an_ome_zarr_s_channel_colours_are_named_where_an_output_drops_them(tmp_path: Path) -> None:
    """An OME-Zarr's omero colours and display windows were dropped without a word by a TIFF or a
    .npy output (a TIFF keeps the labels, as OME channel names). A TIFF warns once, a .npy's record
    names them under 'dropped'; an OME-Zarr of the same channels keeps them as given."""
    data = tensor(np.dtype("uint16"), (2, 16, 12))
    ome_image(tmp_path / "in.zarr", data, (1, 7, 7))
    omero = {"channels": [{"label": "dapi", "color": "0000FF", "window": {"start": 0, "end": 90, "min": 0,
                                                                          "max": 65535}},
                          {"label": "gfp", "color": "00FF00", "window": {"start": 5, "end": 200, "min": 0,
                                                                         "max": 65535}}]}
    group = zarr.open_group(str(tmp_path / "in.zarr"), mode="r+")
    group.attrs["ome"] = {**dict(group.attrs["ome"]), "omero": omero}
    tiff = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.ome.tif", "--shape", "8,8", "--json")
    assert tiff.exit_code == 0 and json.loads(tiff.stdout)["warnings"] == [
        "a TIFF cannot hold the OME-Zarr omero channels' color, window; dropped"], tiff.output
    npy = json.loads(run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.npy", "--shape", "8,8",
                         "--json").stdout)
    assert npy["warnings"] == [] and npy["dropped"] == [
        "physical pixel sizes (y 0.5 micrometer, x 0.25 micrometer)",
        "OME-Zarr omero channels' color, label, window"]
    kept = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "8,8", "--json")
    assert kept.exit_code == 0 and json.loads(kept.stdout)["warnings"] == []
    assert read_zarr(tmp_path / "out.zarr").attrs["ome"]["omero"] == omero


@pytest.mark.parametrize("mapped", [False, True], ids=["from-ram", "memory-map"])
def test_an_ome_zarr_s_scale_goes_to_an_ome_tiff_written_chunk_by_chunk(tmp_path: Path, mapped: bool,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """OME-Zarr -> OME-TIFF on the chunked path dropped the calibration ('a TIFF written chunk by
    chunk cannot hold the physical pixel sizes'), where OME-TIFF -> OME-Zarr carries it: the
    scale of its axes of space, as the operation makes it, is now the TIFF's PhysicalSize* in OME's
    unit symbols, with its OME axes, written from RAM or through a memory map. A scale of no unit
    is still named as dropped: OME's default unit, micrometres, would be a guess."""
    import tifffile

    from geomcli.io import _mapped

    if mapped:
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    data = tensor(np.dtype("uint16"), (3, 16, 12))
    ome_image(tmp_path / "in.zarr", data, (1, 7, 7))  # scale y 0.5 micrometer, x 0.25 micrometer
    result = run("resize", tmp_path / "in.zarr", "-o", tmp_path / "out.ome.tif", "--scales", "0.5,0.5", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
    with tifffile.TiffFile(tmp_path / "out.ome.tif") as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
        assert tif.series[0].axes == "CYX" and tif.series[0].shape == (3, 8, 6)
    assert {key: pixels[key] for key in ("PhysicalSizeX", "PhysicalSizeXUnit", "PhysicalSizeY", "PhysicalSizeYUnit")} \
        == {"PhysicalSizeX": 0.5, "PhysicalSizeXUnit": "µm", "PhysicalSizeY": 1.0, "PhysicalSizeYUnit": "µm"}
    image = {"axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
             "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [0.5, 0.25]}]}]}
    unitless = zarr.open_group(str(tmp_path / "plain.zarr"), mode="w",
                               attributes={"ome": {"version": "0.5", "multiscales": [image]}})
    unitless.create_array("0", shape=(8, 8), dtype="uint8", chunks=(4, 4))[...] = 1
    result = run("crop-pad", tmp_path / "plain.zarr", "-o", tmp_path / "plain.tif", "--shape", "4,4", "--json")
    assert json.loads(result.stdout)["warnings"] == [
        "a TIFF written chunk by chunk cannot hold the physical pixel sizes (y 0.5, x 0.25); dropped"]
    with tifffile.TiffFile(tmp_path / "plain.tif") as tif:
        assert "PhysicalSize" not in (tif.ome_metadata or "")


@pytest.mark.parametrize("mapped", [False, True], ids=["from-ram", "memory-map"])
@pytest.mark.parametrize("name", ["out.ome.tif", "out.tif"])
def test_an_ome_zarr_time_series_keeps_its_sizes_in_a_tiff(tmp_path: Path, name: str, mapped: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An OME-Zarr of axes t, y, x (read as NHW) lost its scale in a TIFF: 'a TIFF written chunk by
    chunk cannot hold the physical pixel sizes (t 2 second, y 0.5 micrometer, x 0.25 micrometer);
    dropped', where c, y, x and t, c, y, x kept theirs. It is an OME-TIFF of axes TYX now, its
    physical sizes and time increment those of the scale, and back to the same OME-Zarr axes."""
    import tifffile

    from geomcli.io import _mapped

    if mapped:
        monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 1)
    axes = [{"name": "t", "type": "time", "unit": "second"}, {"name": "y", "type": "space", "unit": "micrometer"},
            {"name": "x", "type": "space", "unit": "micrometer"}]
    image = {"axes": axes, "datasets": [{"path": "0", "coordinateTransformations": [
        {"type": "scale", "scale": [2.0, 0.5, 0.25]}]}]}
    group = zarr.open_group(str(tmp_path / "in.zarr"), mode="w",
                            attributes={"ome": {"version": "0.5", "multiscales": [image]}})
    data = tensor(np.dtype("uint16"), (3, 16, 12))
    group.create_array("0", shape=data.shape, dtype=data.dtype, chunks=(1, 8, 8))[...] = data
    out = tmp_path / name
    result = run("crop-pad", tmp_path / "in.zarr", "-o", out, "--shape", "8,8", "--compression", "none", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
    with tifffile.TiffFile(out) as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
        assert tif.series[0].axes == "TYX" and np.array_equal(tif.asarray(), data[:, 4:12, 2:10])
    assert {key: pixels[key] for key in ("PhysicalSizeX", "PhysicalSizeXUnit", "PhysicalSizeY", "PhysicalSizeYUnit",
                                         "TimeIncrement", "TimeIncrementUnit")} == {
        "PhysicalSizeX": 0.25, "PhysicalSizeXUnit": "µm", "PhysicalSizeY": 0.5, "PhysicalSizeYUnit": "µm",
        "TimeIncrement": 2.0, "TimeIncrementUnit": "s"}
    back = run("crop-pad", out, "-o", tmp_path / "back.zarr", "--shape", "8,8", "--json")
    assert back.exit_code == 0 and json.loads(back.stdout)["warnings"] == [], back.output
    written = written_image(tmp_path / "back.zarr")
    assert written["axes"] == axes
    assert written["datasets"][0]["coordinateTransformations"][0] == {"type": "scale", "scale": [2.0, 0.5, 0.25]}


def test_a_chains_record_gives_each_steps_shape_done_chunk_by_chunk(tmp_path: Path) -> None:
    """A chain read or written as a zarr gave a --json record without ``steps`` (its dry run, and
    the same chain to .npy from a .npy, have them): the shape after each step was not told."""
    data = np.arange(2 * 3 * 16 * 20, dtype=np.float32).reshape(2, 3, 16, 20)
    write_zarr(tmp_path / "in.zarr", data, (1, 3, 8, 8))
    np.save(tmp_path / "in.npy", data)
    steps = ["--layout", "NCHW", "resize", "--scales", "0.5,0.5", "crop-pad", "--shape", "6,8", "space-to-depth",
             "--blocksize", "2"]
    expected = [{"command": "resize", "scales": [0.5, 0.5], "mode": "nearest", "output_shape": [2, 3, 8, 10]},
                {"command": "crop-pad", "shape": [6, 8], "axes": None, "output_shape": [2, 3, 6, 8]},
                {"command": "space-to-depth", "blocksize": 2, "mode": "DCR", "output_shape": [2, 12, 3, 4]}]
    whole = run("chain", "-i", tmp_path / "in.npy", "-o", tmp_path / "out.npy", "--json", *steps)
    assert whole.exit_code == 0 and json.loads(whole.stdout)["steps"] == expected
    for source, target in [("in.zarr", "out.npy"), ("in.npy", "out.zarr"), ("in.zarr", "out.zarr")]:
        result = run("chain", "-i", tmp_path / source, "-o", tmp_path / target, "--json", *steps)
        assert result.exit_code == 0, result.stderr
        record = json.loads(result.stdout)
        assert any(note.startswith("chunk by chunk: ") for note in record["notes"])  # not read whole
        assert record["steps"] == expected, (source, target)
    assert np.array_equal(read_zarr(tmp_path / "out.zarr")[...], np.load(tmp_path / "out.npy"))


def test_resizing_a_zarrs_channels_is_the_warning_it_is_read_whole(tmp_path: Path) -> None:
    """--sizes 10,10,1 on an HWC array resamples its channels as pixels: read whole, a warning says
    so; read chunk by chunk (a .zarr input or output), resize and a chain's resize step said nothing."""
    data = (np.arange(20 * 30 * 3) % 251).astype(np.uint8).reshape(20, 30, 3)
    write_zarr(tmp_path / "in.zarr", data, (10, 10, 3))
    np.save(tmp_path / "in.npy", data)
    said = "the channel axis is resized (3 -> 1): channels are resampled as pixels are"
    for command, prefix in [(["resize", "INPUT"], ""), (["chain", "-i", "INPUT"], "resize: ")]:
        for source, target in [("in.npy", "out.npy"), ("in.zarr", "out.npy"), ("in.npy", "out.zarr")]:
            args = [tmp_path / source if arg == "INPUT" else arg for arg in command]
            result = run(*args, "-o", tmp_path / target, "--layout", "HWC", "--json",
                         *(["resize"] if command[0] == "chain" else []), "--sizes", "10,10,1")
            assert result.exit_code == 0, result.stderr
            assert json.loads(result.stdout)["warnings"] == [prefix + said], (command, source, target)


def test_what_a_zarr_output_does_not_hold_is_named_in_the_record_as_for_npy(tmp_path: Path) -> None:
    """A JPEG's ICC profile, DPI and EXIF, or a TIFF's, written to a .zarr were dropped without a
    word, where a .npy's record names them under ``dropped`` (a zarr, like a .npy, holds none by
    its nature: no warning)."""
    import tifffile
    from PIL import Image

    exif = Image.Exif()
    exif[0x010F] = "Canon"
    picture = np.random.default_rng(3).integers(0, 256, (40, 60, 3), dtype=np.uint8)
    Image.fromarray(picture).save(tmp_path / "shot.jpg", exif=exif.tobytes(), icc_profile=b"\0" * 128, dpi=(300, 300))
    tifffile.imwrite(tmp_path / "scan.tif", picture, photometric="rgb", resolution=(300, 300), resolutionunit=2,
                     tile=(16, 16))
    for name, expected in (("shot.jpg", ["ICC profile", "DPI (300 x 300)", "EXIF data"]),
                           ("scan.tif", ["DPI (300 x 300)"])):
        for output in ("out.zarr", "out.npy"):
            result = run("crop-pad", tmp_path / name, "-o", tmp_path / output, "--shape", "20,20", "--json", "-q",
                         "--layout", "HWC")
            assert result.exit_code == 0, result.stderr
            record = json.loads(result.stdout)
            assert (record["warnings"], record.get("dropped")) == ([], expected), (name, output, record)


def test_an_ome_translation_is_moved_by_a_crop_or_pad_and_else_named_as_dropped(tmp_path: Path) -> None:
    """The first pixel kept (a crop's offset, minus a pad's) times the pixel size; a resize's or a
    block move's first output pixel's centre; an operation that does not say where its pixels lie
    (a rotation) drops it with a warning (a try-out's went silently; space-to-depth's was dropped)."""
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "nanometer"},
            {"name": "x", "type": "space", "unit": "nanometer"}]
    ome_group(tmp_path / "in.zarr", np.zeros((3, 60, 80), np.uint16), axes,
              [{"type": "scale", "scale": [1.0, 0.5, 0.25]}, {"type": "translation", "translation": [0, 10, 20]}])
    for shape, moved in [("30,30", [0.0, 17.5, 26.25]), ("61,83", [0.0, 10.0, 19.75]), ("70,70", [0.0, 7.5, 21.25])]:
        result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", shape, "--json")
        assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == []
        assert written_image(tmp_path / "out.zarr")["datasets"][0]["coordinateTransformations"] == [
            {"type": "scale", "scale": [1.0, 0.5, 0.25]}, {"type": "translation", "translation": moved}], shape
    # a resize moves it to where its first output pixel is sampled (half_pixel, 60 -> 30: x_in = 2 x_out + 0.5,
    # so half an input pixel on), then the crop by its offset (5 and 10 of the new, bigger pixels)
    result = run("chain", "-i", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--json", "resize", "--sizes",
                 "30,40", "--mode", "linear", "crop-pad", "--shape", "20,20")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == []
    assert written_image(tmp_path / "out.zarr")["datasets"][0]["coordinateTransformations"] == [
        {"type": "scale", "scale": [1.0, 1.0, 0.5]},
        {"type": "translation", "translation": [0.0, 10 + 0.5 * 0.5 + 5 * 1.0, 20 + 0.5 * 0.25 + 10 * 0.5]}]
    result = run("resize", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--scales", "0.5,0.5",
                 "--coordinate-transformation-mode", "asymmetric", "-q")  # x_in = 2 x_out: the first stays
    assert result.exit_code == 0
    assert written_image(tmp_path / "out.zarr")["datasets"][0]["coordinateTransformations"] == [
        {"type": "scale", "scale": [1.0, 1.0, 0.5]}, {"type": "translation", "translation": [0.0, 10.0, 20.0]}]
    # space-to-depth: a block's centre, half an input pixel on for b = 2; depth-to-space back: a quarter
    # of its input pixel back, where the pixels started
    for command, source, target, moved in [
            ("space-to-depth", "in.zarr", "s2d.zarr", ([1.0, 1.0, 0.5], [0.0, 10.25, 20.125])),
            ("depth-to-space", "s2d.zarr", "back.zarr", ([1.0, 0.5, 0.25], [0.0, 10.0, 20.0]))]:
        result = run(command, tmp_path / source, "-o", tmp_path / target, "--blocksize", "2", "--json")
        assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
        assert written_image(tmp_path / target)["datasets"][0]["coordinateTransformations"] == [
            {"type": "scale", "scale": moved[0]}, {"type": "translation", "translation": moved[1]}], command
    result = run("warp", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--rotate", "30", "--json")
    assert result.exit_code == 0
    assert ("the OME-Zarr translation [10.0, 20.0] along y, x cannot be carried through warp (it does not say where "
            "its pixels lie); dropped") in json.loads(result.stdout)["warnings"]


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_an_ome_zarr_s_name_and_omero_channels_travel_where_the_channels_do(tmp_path: Path, version: str) -> None:
    """A try-out's output lost the image's name and its omero (channel labels, colours, display
    windows) without a word; space-to-depth, whose channels are blocks of pixels, drops the omero
    with a warning."""
    omero = {"channels": [{"label": "DAPI", "color": "0000FF"}, {"label": "GFP", "color": "00FF00"}],
             "rdefs": {"model": "color"}}
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"}, {"name": "x", "type": "space"}]
    image = {"axes": axes, "name": "cells", "datasets": [
        {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1, 1]}]}]}
    attributes = ({"multiscales": [{**image, "version": "0.4"}], "omero": omero} if version == "0.4"
                  else {"ome": {"version": "0.5", "multiscales": [image], "omero": omero}})
    group = zarr.open_group(str(tmp_path / "in.zarr"), mode="w", zarr_format=2 if version == "0.4" else 3,
                            attributes=attributes)
    group.create_array("0", shape=(2, 8, 8), dtype="uint8", chunks=(1, 4, 4))
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "6,6", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
    written = read_zarr(tmp_path / "out.zarr").attrs["ome"]
    assert written["omero"] == omero and written["multiscales"][0]["name"] == "cells"
    result = run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "s2d.zarr", "--blocksize", "2", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [
        "the OME-Zarr omero metadata of 2 channel(s) does not fit the output of space-to-depth; dropped"]
    assert "omero" not in read_zarr(tmp_path / "s2d.zarr").attrs["ome"]


def test_an_omero_of_nan_or_infinity_is_dropped_not_written_as_no_json(tmp_path: Path) -> None:
    """Python's JSON reads a display window's NaN or Infinity: carried as given, it made the output's
    zarr.json no JSON a strict reader (JSON.parse) takes, as a NaN scale did (now refused)."""
    omero = {"channels": [{"label": "DAPI", "window": {"start": float("nan"), "end": 1.0, "max": float("inf")}}]}
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"}, {"name": "x", "type": "space"}]
    scale = [{"type": "scale", "scale": [1, 1, 1]}]
    image = {"axes": axes, "datasets": [{"path": "0", "coordinateTransformations": scale}]}
    group = zarr.open_group(str(tmp_path / "in.zarr"), mode="w",
                            attributes={"ome": {"version": "0.5", "multiscales": [image], "omero": omero}})
    group.create_array("0", shape=(1, 8, 8), dtype="uint8", chunks=(1, 4, 4))
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "6,6", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [
        "the OME-Zarr omero metadata holds NaN or Infinity, which JSON has no number for; dropped"]
    text = (tmp_path / "out.zarr" / "zarr.json").read_text()
    written = json.loads(text, parse_constant=lambda constant: pytest.fail(f"zarr.json holds {constant}"))
    ome = written["attributes"]["ome"]
    assert "omero" not in ome and ome["multiscales"][0]["axes"] == axes


@pytest.mark.parametrize(("args", "transforms"), [
    # the window kept starts at pixel 15, 25: there, in units of 0.5 and 0.25
    (["crop-pad", "--shape", "30,30"], [{"type": "scale", "scale": [1.0, 0.5, 0.25]},
                                        {"type": "translation", "translation": [0.0, 7.5, 6.25]}]),
    # half_pixel, 2x down: the first output pixel is sampled half an input pixel on
    (["resize", "--scales", "0.5,0.5"], [{"type": "scale", "scale": [1.0, 1.0, 0.5]},
                                         {"type": "translation", "translation": [0.0, 0.25, 0.125]}]),
    (["crop-pad", "--shape", "60,80"], [{"type": "scale", "scale": [1.0, 0.5, 0.25]}]),  # still at 0: as it was
])
def test_an_ome_zarr_of_no_translation_has_its_first_pixel_at_zero_and_the_output_one_where_it_moved(
        tmp_path: Path, args: list[str], transforms: list[dict[str, Any]]) -> None:
    """Most OME-Zarr writers give a scale alone: a try-out's crop or resize of one wrote no
    translation, so the output's first pixel lay at 0 again (7.5 units off for this crop)."""
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "micrometer"},
            {"name": "x", "type": "space", "unit": "micrometer"}]
    ome_group(tmp_path / "in.zarr", np.zeros((2, 60, 80), np.uint8), axes,
              [{"type": "scale", "scale": [1.0, 0.5, 0.25]}])
    result = run(args[0], tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--json", *args[1:])
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
    assert written_image(tmp_path / "out.zarr")["datasets"][0]["coordinateTransformations"] == transforms


def test_a_level_linked_under_a_name_of_its_own_keeps_its_image_s_axes_and_scale(tmp_path: Path) -> None:
    """``ln -s scan.zarr/1 half.zarr``: a try-out read level 1 as a plain array and wrote one, its
    pixels of no size; it now has its level's scale (and the multiscales' axes and units), moved
    by the crop as level 0's would be."""
    data = tensor(np.dtype("uint16"), (3, 16, 12))
    ome_image(tmp_path / "scan.zarr", data, (1, 7, 7))
    zarr.open_array(str(tmp_path / "scan.zarr" / "1"), mode="r+")[...] = data[:, ::2, ::2]  # (ome_image's 3x8x6)
    os.symlink(tmp_path / "scan.zarr" / "1", tmp_path / "half.zarr")
    assert run("info", tmp_path / "half.zarr").stdout == (
        f"{tmp_path / 'half.zarr'}: zarr 3×8×6 uint16, layout CHW, chunks 1×7×7, OME-Zarr scale [1, 1, 0.5], "
        "pixel size y 1 µm, x 0.5 µm, compression zstd; value range not read: it would read every chunk\n")
    result = run("crop-pad", tmp_path / "half.zarr", "-o", tmp_path / "out.zarr", "--shape", "4,4", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["notes"] == ["chunk by chunk: 3 output chunk(s)"]  # (no other level dropped)
    image = written_image(tmp_path / "out.zarr")
    assert [axis.get("unit") for axis in image["axes"]] == [None, "micrometer", "micrometer"]
    # 2 rows and 1 column of the level's pixels (1 and 0.5 micrometer) cut
    assert image["datasets"][0]["coordinateTransformations"] == [
        {"type": "scale", "scale": [1.0, 1.0, 0.5]}, {"type": "translation", "translation": [0.0, 2.0, 0.5]}]
    assert np.array_equal(read_zarr(tmp_path / "out.zarr")["0"][...], data[:, ::2, ::2][:, 2:6, 1:5])
    os.symlink(tmp_path / "scan.zarr" / "0", tmp_path / "full.zarr")  # level 0 as the image itself reads it
    assert "OME-Zarr scale [1, 0.5, 0.25]," in run("info", tmp_path / "full.zarr").stdout


def test_the_multiscales_own_transformations_are_folded_into_the_level_s(tmp_path: Path) -> None:
    """NGFF's multiscales may hold coordinateTransformations applied after every level's: a
    try-out's output, of the level's alone, lost them (its pixels 3 times too small, 100 and
    200 units away). Folded: scale 3 * 0.5, translation 3 * (the level's, moved by the crop) + 100."""
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "micrometer"},
            {"name": "x", "type": "space", "unit": "micrometer"}]
    level = [{"type": "scale", "scale": [1, 0.5, 0.5]}]
    group = zarr.open_group(str(tmp_path / "in.zarr"), mode="w", attributes={"ome": {"version": "0.5", "multiscales": [{
        "axes": axes, "datasets": [{"path": "0", "coordinateTransformations": level}],
        "coordinateTransformations": [{"type": "scale", "scale": [1, 3, 3]},
                                      {"type": "translation", "translation": [0, 100, 200]}]}]}})
    group.create_array("0", shape=(2, 10, 12), dtype="uint8", chunks=(1, 5, 5), dimension_names=["c", "y", "x"])
    # info's line shows where its pixels lie (it showed no OME-Zarr at all)
    assert run("info", tmp_path / "in.zarr").stdout == (
        f"{tmp_path / 'in.zarr'}: zarr 2×10×12 uint8, layout CHW, chunks 1×5×5, OME-Zarr scale [1, 1.5, 1.5] "
        "translation [0, 100, 200], pixel size y 1.5 µm, x 1.5 µm, compression zstd; value range not read: it would "
        "read every chunk\n")
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "4,4", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
    assert written_image(tmp_path / "out.zarr")["datasets"][0]["coordinateTransformations"] == [
        {"type": "scale", "scale": [1.0, 1.5, 1.5]},
        {"type": "translation", "translation": [0.0, 100 + 3 * 0.5 * 3, 200 + 3 * 0.5 * 4]}]


@pytest.mark.parametrize(("args", "scale", "translation"), [
    # align_corners: x_in = (60 - 1)/(30 - 1) x_out and (80 - 1)/(40 - 1) x_out, not 60/30 and 80/40
    (["--sizes", "30,40", "--coordinate-transformation-mode", "align_corners"],
     [1.0, 59 / 29 * 0.5, 79 / 39 * 0.25], [0.0, 10.0, 20.0]),
    # 60 * 0.375 = 22.5: 22 outputs, stepping 1/0.375 = 2.67 inputs (not 60/22 = 2.73) from 1/0.75 - 1/2
    (["--scales", "0.375,0.375"], [1.0, 0.5 / 0.375, 0.25 / 0.375],
     [0.0, 10 + 0.5 * (0.5 / 0.375 - 0.5), 20 + 0.25 * (0.5 / 0.375 - 0.5)]),
    (["--scales", "0.625,1", "--coordinate-transformation-mode", "asymmetric"],  # 37 outputs, step 1.6
     [1.0, 0.5 / 0.625, 0.25], [0.0, 10.0, 20.0]),
    # one pixel has no step: the extent it shows, 60 input pixels, at input pixel 0 where align_corners samples it
    (["--sizes", "1,80", "--coordinate-transformation-mode", "align_corners"], [1.0, 30.0, 0.25], [0.0, 10.0, 20.0]),
])
def test_a_resizes_scale_and_translation_place_each_pixel_where_it_was_sampled(
        tmp_path: Path, args: list[str], scale: list[float], translation: list[float]) -> None:
    """Pixel i of the output lies at translation + scale * i, and resize samples it at input
    pixel x_in = a*i + b: so scale = a * the input's, translation = the input's + b * its scale.
    The scale was the length in over the length out, which misplaced the last pixel under
    align_corners and for a scale that does not divide the length."""
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "nanometer"},
            {"name": "x", "type": "space", "unit": "nanometer"}]
    ome_group(tmp_path / "in.zarr", np.zeros((3, 60, 80), np.uint16), axes,
              [{"type": "scale", "scale": [1.0, 0.5, 0.25]}, {"type": "translation", "translation": [0, 10, 20]}])
    result = run("resize", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--mode", "linear", "--json", *args)
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
    written = written_image(tmp_path / "out.zarr")["datasets"][0]["coordinateTransformations"]
    assert [step["type"] for step in written] == ["scale", "translation"]
    assert written[0]["scale"] == pytest.approx(scale, rel=1e-12)
    assert written[1]["translation"] == pytest.approx(translation, rel=1e-12)


def test_a_resize_that_flips_an_axis_keeps_a_positive_scale_and_drops_its_translation(tmp_path: Path) -> None:
    """A roi whose start is past its end: the scale was negative (a * the input's, a < 0), and the
    translation put the first pixel at the input's last one with the others running backwards.
    The flipped axis's translation alone is dropped: x, which the roi leaves as it was, keeps its."""
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "nanometer"},
            {"name": "x", "type": "space", "unit": "nanometer"}]
    ome_group(tmp_path / "in.zarr", np.zeros((3, 60, 80), np.uint16), axes,
              [{"type": "scale", "scale": [1.0, 0.5, 0.25]}, {"type": "translation", "translation": [0, 10, 20]}])
    result = run("resize", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--sizes", "30,80", "--json",
                 "--coordinate-transformation-mode", "tf_crop_and_resize", "--roi", "1,0,0,1")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == ["the OME-Zarr translation [10.0] along y cannot be carried "
                                                     "through resize (a flip runs its pixels the other way); dropped"]
    assert written_image(tmp_path / "out.zarr")["datasets"][0]["coordinateTransformations"] == [
        {"type": "scale", "scale": pytest.approx([1.0, 0.5 * 59 / 29, 0.25])},
        {"type": "translation", "translation": [0.0, 0.0, 20.0]}]


def test_a_chain_s_flip_names_the_translation_its_step_was_given(tmp_path: Path) -> None:
    """'chain -i yx.zarr -o o.zarr crop-pad --shape 8,8 warp --scale -1,1' of a translation
    (10, 20) warned that 'the OME-Zarr translation [20.0] along x' was dropped: the input's, where
    the crop had moved it to 22 before the flip lost it. Each axis's is the value at the step
    that loses it: x's at the first flip, y's after the second crop; a rotation's, both after the crop."""
    axes = [{"name": name, "type": "space", "unit": "micrometer"} for name in "yx"]
    ome_group(tmp_path / "yx.zarr", np.arange(256, dtype=np.uint8).reshape(16, 16), axes,
              [{"type": "scale", "scale": [0.5, 0.5]}, {"type": "translation", "translation": [10, 20]}])
    for index, (steps, warning) in enumerate((
            (["crop-pad", "--shape", "8,8", "warp", "--scale", "-1,1"],
             "the OME-Zarr translation [22.0] along x cannot be carried through chain (a flip runs its pixels the "
             "other way); dropped"),
            (["crop-pad", "--shape", "8,8", "warp", "--scale", "-1,1", "crop-pad", "--shape", "4,4", "warp", "--scale",
              "1,-1"],
             "the OME-Zarr translation [13.0, 22.0] cannot be carried through chain (a flip runs its pixels the other "
             "way); dropped"),
            (["crop-pad", "--shape", "8,8", "warp", "--rotate", "30"],
             "the OME-Zarr translation [12.0, 22.0] cannot be carried through chain (it does not say where its "
             "pixels lie); dropped"))):
        result = run("chain", "-i", tmp_path / "yx.zarr", "-o", tmp_path / f"o{index}.zarr", "--json", *steps)
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["warnings"][0] == warning


@pytest.mark.parametrize(("args", "flipped", "kept_y"), [
    (["warp", "--scale", "-1,1"], "x", (10.0, 0.0)), (["warp", "--scale", "1,-1"], "y", None),
    (["warp", "--rotate", "180"], "y, x", None),
    # y: warp's --scale 2 samples output row 0 at input row -29.5 (-14.75 units), then the crop's 20 rows of 1
    (["chain", "warp", "--scale", "-2,2", "crop-pad", "--shape", "20,30"], "x", (10 - 14.75 + 20, -14.75 + 20))],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None)
@pytest.mark.parametrize("origin", [(10.0, 20.0), None], ids=["translated", "no-translation"])
def test_a_flip_keeps_the_pixel_size_and_says_the_positions_along_it_are_dropped(
        tmp_path: Path, args: list[str], flipped: str, kept_y: tuple[float, float] | None,
        origin: tuple[float, float] | None) -> None:
    """A flip's pixels keep their size and run the other way, which NGFF's scale and translation
    cannot say (a negative scale is no NGFF one). An OME-Zarr of no translation (its first pixel's
    centre at 0) was written flipped with the same coordinate system, and no word: its first
    pixel, the input's last, said to lie at 0. The scale is kept, positive, and a warning says the
    positions along the flipped axes are dropped; an axis not flipped keeps its translation, as
    the operation moves it (a flip along x dropped y's too, NGFF's translation being per axis)."""
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "nanometer"},
            {"name": "x", "type": "space", "unit": "nanometer"}]
    ome_group(tmp_path / "in.zarr", np.zeros((3, 60, 80), np.uint16), axes,
              [{"type": "scale", "scale": [1.0, 0.5, 0.25]},
               *([{"type": "translation", "translation": [0.0, *origin]}] if origin else [])])
    command, *rest = args
    given = ["-i", tmp_path / "in.zarr"] if command == "chain" else [tmp_path / "in.zarr"]
    result = run(command, *given, "-o", tmp_path / "out.zarr", "--json", *rest)
    assert result.exit_code == 0, result.stderr
    scale = [1.0, 1.0, 0.5] if "-2,2" in args else [1.0, 0.5, 0.25]
    y = None if kept_y is None else kept_y[0 if origin else 1]
    x = origin[1] if origin and flipped == "y" else 0.0
    translation = [0.0, y or 0.0, x]
    assert written_image(tmp_path / "out.zarr")["datasets"][0]["coordinateTransformations"] == [
        {"type": "scale", "scale": scale}, *([{"type": "translation", "translation": translation}] if any(translation)
                                             else [])]
    lost = [value for axis, value in zip("yx", origin or ()) if axis in flipped]
    assert json.loads(result.stdout)["warnings"] == [
        f"the OME-Zarr translation {lost} along {flipped} cannot be carried through {command} (a flip runs its "
        "pixels the other way); dropped" if origin else
        f"the OME-Zarr pixel positions along {flipped} (its first pixel's centre at 0: it gives no translation) cannot "
        f"be carried through {command} (a flip runs its pixels the other way, which NGFF's scale and translation "
        "cannot say); dropped"]


@pytest.mark.parametrize("output", ["out.npy", "out.tif"])
@pytest.mark.parametrize("origin", [(10.0, 20.0), None], ids=["translated", "no-translation"])
def test_a_flip_to_an_output_that_holds_no_positions_warns_of_none_dropped(tmp_path: Path, output: str,
                                                                           origin: tuple[float, float] | None) -> None:
    """'warp yx.zarr -o out.npy --scale -1,1' warned that the OME-Zarr pixel positions (or its
    translation) were dropped, where a .npy or TIFF never holds them (a crop's translation to one
    goes unsaid): the warning is an OME-Zarr output's alone, whose translation could have held them."""
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "nanometer"},
            {"name": "x", "type": "space", "unit": "nanometer"}]
    ome_group(tmp_path / "in.zarr", np.zeros((3, 60, 80), np.uint16), axes,
              [{"type": "scale", "scale": [1.0, 0.5, 0.25]},
               *([{"type": "translation", "translation": [0.0, *origin]}] if origin else [])])
    result = run("warp", tmp_path / "in.zarr", "-o", tmp_path / output, "--json", "--scale", "-1,1")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == []


@pytest.mark.parametrize("args", [
    ["resize", "--sizes", "30,40", "--mode", "linear"],
    ["resize", "--scales", "0.375,1.5", "--mode", "linear"],
    ["resize", "--sizes", "23,33", "--mode", "linear", "--coordinate-transformation-mode", "align_corners"],
    ["resize", "--scales", "0.625,0.7", "--mode", "linear", "--coordinate-transformation-mode", "asymmetric"],
    ["resize", "--sizes", "30,41", "--mode", "linear", "--coordinate-transformation-mode", "half_pixel_symmetric"],
    ["warp", "--scale", "0.5"],
    ["warp", "--scale", "0.75,0.4", "--translate", "0.1,-0.2"],
    ["warp", "--scale", "0.5", "--size", "25,35"],
    ["warp", "--scale", "0.5", "--translate", "0.2,0.1", "--size", "25,35", "--align-corners"],
    ["crop-pad", "--shape", "31,50"],
], ids=lambda args: " ".join(args))
@pytest.mark.parametrize("origin", [(10.0, 20.0), None], ids=["translated", "no-translation"])
def test_each_output_pixel_lies_where_its_scale_and_translation_say(tmp_path: Path, args: list[str],
                                                                   origin: tuple[float, float] | None) -> None:
    """Data equal to its own physical position (y on channel 0, x on channel 1), resampled
    linearly, reads back as the output's own positions wherever it was sampled inside the input:
    the written scale and translation, independent of how they were worked out. An input without
    a translation has its first pixel at 0, and its output says where its own lies (a try-out's
    crop of one was written without, its first pixel at 0)."""
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "nanometer"},
            {"name": "x", "type": "space", "unit": "nanometer"}]
    oy, ox = origin or (0.0, 0.0)
    y, x = np.mgrid[0:60, 0:80].astype(np.float64)
    ome_group(tmp_path / "in.zarr", np.stack([oy + 0.5 * y, ox + 0.25 * x]), axes,
              [{"type": "scale", "scale": [1.0, 0.5, 0.25]},
               *([{"type": "translation", "translation": [0, oy, ox]}] if origin else [])])
    result = run(args[0], tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--json", *args[1:])
    assert result.exit_code == 0 and json.loads(result.stdout)["warnings"] == [], result.output
    group = read_zarr(tmp_path / "out.zarr")
    written = {step["type"]: step[step["type"]]
               for step in written_image(tmp_path / "out.zarr")["datasets"][0]["coordinateTransformations"]}
    (_, sy, sx), (_, ty, tx) = written["scale"], written.get("translation", [0.0, 0.0, 0.0])
    out = group["0"][...]
    j, i = np.mgrid[0:out.shape[1], 0:out.shape[2]]
    expected = np.stack([ty + sy * j, tx + sx * i])
    # inside the input's pixel centres (a linear ramp is exact there; outside, padding)
    inside = ((expected[0] >= oy) & (expected[0] <= oy + 0.5 * 59)
              & (expected[1] >= ox) & (expected[1] <= ox + 0.25 * 79))
    assert inside.sum() > out.shape[1] * out.shape[2] // 4
    assert out[:, inside] == pytest.approx(expected[:, inside], abs=1e-4)  # warp: a float32 theta and grid


@pytest.mark.parametrize(("args", "scale", "units", "translation"), [
    # an output pixel steps over 2 input pixels: x_in = 2 x_out + (1 - W) / 2, from -29.5 rows and -39.5 columns
    (["warp", "--scale", "2"], [1.0, 1.0, 0.5], True, [0.0, -14.75, -9.875]),
    (["warp", "--size", "30,40"], [1.0, 1.0, 0.5], True, [0.0, 0.25, 0.125]),  # x_in = 2 x_out + 0.5
    (["warp", "--scale", "2", "--size", "30,40", "--align-corners"], [1.0, 59 / 29 * 1.0, 79 / 39 * 0.5], True,
     [0.0, -14.75, -9.875]),
    # an input axis of one pixel under align_corners has no step (every row samples it): its extent over 30 rows,
    # as resize gives it (it was the input's pixel size, |f| * 1); every row samples row 0: no translation
    (["warp", "--layout", "CHW", "--size", "30,80", "--align-corners", "ONE-ROW"], [1.0, 1 / 30, 0.25], True, None),
    (["warp", "--rotate", "30"], [1.0, 1.0, 1.0], False, None),
    (["grid-sample", "--grid", "GRID"], [1.0, 1.0, 1.0], False, None),
])
def test_a_warp_scales_the_pixel_size_and_a_grid_drops_it(tmp_path: Path, args: list[str], scale: list[float],
                                                          units: bool, translation: list[float] | None) -> None:
    """theta maps output positions to input ones: a per-axis scale of it (and --size) scales the
    pixel size; a rotation's or a grid's pixels have none per axis, so the axes of space lose their
    scale and unit, with a warning (a try-out's grid-sample kept the input's scale, warp --scale 2 too)."""
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "nanometer"},
            {"name": "x", "type": "space", "unit": "nanometer"}]
    ome_group(tmp_path / "in.zarr", np.zeros((3, 60, 80), np.uint16), axes,
              [{"type": "scale", "scale": [1.0, 0.5, 0.25]}])
    if "ONE-ROW" in args:
        ome_group(tmp_path / "in.zarr", np.zeros((3, 1, 80), np.uint16), axes,
                  [{"type": "scale", "scale": [1.0, 1.0, 0.25]}])
        args = [arg for arg in args if arg != "ONE-ROW"]
    np.save(tmp_path / "grid.npy", np.zeros((1, 30, 40, 2), np.float32))
    command, *rest = [str(tmp_path / "grid.npy") if arg == "GRID" else arg for arg in args]
    result = run(command, tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--json", *rest)
    assert result.exit_code == 0, result.stderr
    image = written_image(tmp_path / "out.zarr")
    transforms = image["datasets"][0]["coordinateTransformations"]
    assert transforms[0] == {"type": "scale", "scale": scale}
    assert transforms[1:] == ([] if translation is None else [
        {"type": "translation", "translation": pytest.approx(translation, abs=1e-12)}])
    assert image["axes"] == (axes if units else [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
                                                 {"name": "x", "type": "space"}])
    assert json.loads(result.stdout)["warnings"] == ([] if units else [
        f"the physical pixel sizes (y 0.5 nanometer, x 0.25 nanometer) cannot be carried through {command}, whose "
        "pixels have no size per axis (a grid, a rotation or shear); dropped"])


@pytest.mark.parametrize("args", [["warp", "--rotate", "30"], ["grid-sample", "--grid", "GRID"],
                                  ["chain", "warp", "--rotate", "30", "crop-pad", "--shape", "6,5"],
                                  ["chain", "crop-pad", "--shape", "10,8", "warp", "--rotate", "30", "--size", "6,5"]])
def test_a_warp_of_each_plane_keeps_the_stack_s_z_scale_and_translation(tmp_path: Path, args: list[str]) -> None:
    """A rotation or a grid samples each z plane on its own: y and x lose their sizes and place,
    z keeps its own. A try-out's rotated stack of z 2 micrometer, 10 micrometer in, came out with
    z of scale 1, no unit and no translation, a warning naming z among the sizes lost; in a chain
    too, after warp alone kept it."""
    axes = [{"name": "c", "type": "channel"},
            *({"name": name, "type": "space", "unit": "micrometer"} for name in "zyx")]
    ome_group(tmp_path / "in.zarr", np.zeros((2, 3, 12, 10), np.uint16), axes,
              [{"type": "scale", "scale": [1.0, 2.0, 0.5, 0.25]},
               {"type": "translation", "translation": [0.0, 10.0, 20.0, 30.0]}])
    np.save(tmp_path / "grid.npy", np.zeros((3, 6, 5, 2), np.float32))  # (a grid for each z plane)
    command, *rest = [str(tmp_path / "grid.npy") if arg == "GRID" else arg for arg in args]
    given = ["-i", tmp_path / "in.zarr"] if command == "chain" else [tmp_path / "in.zarr"]
    result = run(command, *given, "-o", tmp_path / "out.zarr", "--json", *rest)
    assert result.exit_code == 0, result.stderr
    image = written_image(tmp_path / "out.zarr")
    assert image["axes"] == [axes[0], axes[1], {"name": "y", "type": "space"}, {"name": "x", "type": "space"}]
    assert image["datasets"][0]["coordinateTransformations"] == [
        {"type": "scale", "scale": [1.0, 2.0, 1.0, 1.0]}, {"type": "translation", "translation": [0.0, 10.0, 0.0, 0.0]}]
    # (the translation the warp was given: after the chain's crop of a row and a column, half a pixel on)
    lost = "[20.5, 30.25]" if args[1] == "crop-pad" else "[20.0, 30.0]"
    assert json.loads(result.stdout)["warnings"] == [
        f"the OME-Zarr translation {lost} along y, x cannot be carried through {command} (it does not say "
        "where its pixels lie); dropped",
        f"the physical pixel sizes (y 0.5 micrometer, x 0.25 micrometer) cannot be carried through {command}, whose "
        "pixels have no size per axis (a grid, a rotation or shear); dropped"]
    # (their note said 'pixel size y 0.5 → 1 µm, x 0.25 → 1 µm': dropped, they have none)
    assert not [note for note in json.loads(result.stdout)["notes"] if note.startswith("pixel size")]


def test_a_corrupt_chunk_is_one_error_line_the_old_output_kept_and_the_batch_goes_on(tmp_path: Path) -> None:
    data = tensor(np.dtype("uint8"), (2, 3, 16, 16))
    write_zarr(tmp_path / "good.zarr", data, (1, 3, 8, 8))
    write_zarr(tmp_path / "bad.zarr", data, (1, 3, 8, 8))
    chunk = next(path for path in sorted((tmp_path / "bad.zarr").rglob("*")) if path.is_file()
                 and path.name != "zarr.json")
    chunk.write_bytes(b"garbage")
    assert run("crop-pad", tmp_path / "good.zarr", "-o", tmp_path / "out.zarr", "--shape", "2,3,8,8",
               "-q").exit_code == 0
    before = read_zarr(tmp_path / "out.zarr")[...]
    result = run("crop-pad", tmp_path / "bad.zarr", "-o", tmp_path / "out.zarr", "--shape", "2,3,8,8")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {tmp_path / 'bad.zarr'}: a chunk could not be read")
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == before.tobytes()
    result = run("crop-pad", tmp_path / "bad.zarr", tmp_path / "good.zarr", "--out-dir", tmp_path / "batch",
                 "--shape", "2,3,8,8")
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert sorted(path.name for path in (tmp_path / "batch").iterdir()) == ["good.zarr"]


def test_a_bug_in_a_chunked_job_keeps_its_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A codec's or store's failure is the file's; a TypeError of ours is a bug, not "a chunk
    could not be read" (it was, with exit 1 and nothing else to go on)."""
    from geomcli.engine import zarr_file

    def broken(*args: object, **kwargs: object) -> None:
        raise TypeError("a bug")

    write_zarr(tmp_path / "in.zarr", tensor(np.dtype("uint8"), (2, 3, 16, 16)), (1, 3, 8, 8))
    monkeypatch.setattr(zarr_file, "_write", broken)
    with pytest.raises(TypeError, match="a bug"):
        run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "2,3,8,8")


def test_npy_on_either_side_and_the_output_never_over_the_input(tmp_path: Path) -> None:
    data = tensor(np.dtype("float32"))
    np.save(tmp_path / "in.npy", data)
    assert run("space-to-depth", tmp_path / "in.npy", "-o", tmp_path / "out.zarr", "--blocksize", "2",
               "-q").exit_code == 0
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == space_depth_ops.space_to_depth(data, 2).tobytes()
    result = run("depth-to-space", tmp_path / "out.zarr", "-o", tmp_path / "back.npy", "--blocksize", "2", "-q")
    assert result.exit_code == 0, result.stderr
    assert np.load(tmp_path / "back.npy").tobytes() == data.tobytes()
    before = read_zarr(tmp_path / "out.zarr")[...].tobytes()
    result = run("crop-pad", tmp_path / "out.zarr", "-o", tmp_path / "out.zarr", "--shape", "1,1,1,1")
    assert result.exit_code == 2  # the command line's mistake, as --out-dir over an input (it was 1)
    assert "the output would replace its own input" in result.stderr
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == before


def test_a_tiff_written_chunk_by_chunk_takes_compression_or_says_it_cannot(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """One written from RAM is compressed as asked (it was written plain, --compression ignored);
    a big one is a memory map, which cannot be: a warning says so."""
    import tifffile

    from geomcli.io import _mapped

    write_zarr(tmp_path / "in.zarr", tensor(np.dtype("uint8"), (30, 40)), (10, 10))
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "small.tif", "--shape", "20,20",
                 "--compression", "zlib")
    assert result.exit_code == 0 and "Warning" not in result.stderr, result.stderr
    with tifffile.TiffFile(tmp_path / "small.tif") as tif:
        assert tif.pages[0].compression == tifffile.COMPRESSION.ADOBE_DEFLATE
    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 100)
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "big.tif", "--shape", "20,20",
                 "--compression", "zlib")
    assert result.exit_code == 0
    assert (f"Warning: {tmp_path / 'big.tif'}: a big output written chunk by chunk is a memory map, uncompressed: "
            "--compression zlib dropped") in result.stderr
    with tifffile.TiffFile(tmp_path / "big.tif") as tif:
        assert tif.pages[0].compression == tifffile.COMPRESSION.NONE
        assert tif.asarray().tolist() == crop_ops.center_crop_pad(tensor(np.dtype("uint8"), (30, 40)),
                                                                  [20, 20]).tolist()


def test_the_graph_holds_chunks_never_the_array(tmp_path: Path) -> None:
    """Each task of the graph holds a chunk or two of the input, whatever its size."""
    import dask.array as da

    from geomcli.engine import operations
    from geomcli.engine.options import Common

    data = da.zeros((4, 8, 512, 512), dtype=np.float32, chunks=(1, 8, 128, 96))
    chunk_bytes = 8 * 128 * 96 * 4
    for operation in (operations.SpaceToDepth(2), operations.DepthToSpace(2),
                      operations.CropPad((4, 8, 300, 700))):
        result = operation.apply_chunked(data, "NCHW", Common())
        biggest = max(np.prod([axis[index] for axis, index in zip(result.chunks, block)]) for block in
                      np.ndindex(*result.numblocks)) * 4
        assert biggest <= 2 * chunk_bytes, (operation, result.chunks)


def test_a_grid_sample_task_carries_its_own_images_grid_not_the_whole_grid() -> None:
    """A task of grid-sample on a stack is given the grid of the images it samples alone: its
    function held the operation, grid and all, so a cluster's every task carried the whole grid
    (a stack of 16 images in 16 MiB chunks, at a grid of 128 MiB: 67-70 chunks a worker on
    local:2, 6 with this)."""
    import cloudpickle
    import dask.array as da

    from geomcli.engine import operations
    from geomcli.engine.options import Common

    rng = np.random.default_rng(42)
    images = rng.random((4, 2, 16, 16), dtype=np.float32)
    grid = rng.uniform(-1.2, 1.2, (4, 64, 64, 2)).astype(np.float32)  # (each image its own)
    result = operations.GridSample(grid).apply_chunked(da.from_array(images, chunks=(1, 2, 16, 16)), "NCHW",
                                                       Common())
    sizes = [len(cloudpickle.dumps(task)) for task in dict(result.__dask_graph__()).values()]
    # (a task of an image's grid is its 32 KiB and a few hundred bytes of its own; the whole grid, 128 KiB)
    assert grid[0].nbytes < max(sizes) < grid[0].nbytes + 4096
    assert np.array_equal(result.compute(scheduler="sync"), grid_ops.grid_sample(images, grid))

    # each task's part is a view of the grid, not a copy (a plane's grid of 512 MiB was held twice more)
    from geomcli.engine import chunked

    parts: list[np.ndarray] = []

    def kernel(block: np.ndarray, part: np.ndarray) -> np.ndarray:
        parts.append(part)
        return np.zeros((*block.shape[:2], 64, 64), block.dtype)

    chunked.by_planes(da.from_array(images, chunks=(1, 2, 16, 16)), kernel, 2, (64, 64), 10**9,
                      per_image=grid).compute(scheduler="sync")
    assert sorted(part.ctypes.data for part in parts) == [grid[index].ctypes.data for index in range(4)]
    assert all(np.shares_memory(part, grid) and part.shape == (1, 64, 64, 2) for part in parts)


SAMPLING_DTYPES = [np.dtype("uint8"), np.dtype("int16"), np.dtype("float32"), np.dtype("float64")]


def grid_of(n: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    return (rng.random((n, 9, 13, 2)) * 2.4 - 1.2).astype(np.float32)


# every dtype on one chunking, every chunking on one dtype (the many tiny chunks of (1, 1, 3, 4)
# cost a second a case: the dtypes do not meet the chunk grid anywhere the other chunkings miss)
SAMPLING_CASES = [(dtype, (1, 5, 7, 5)) for dtype in SAMPLING_DTYPES] + [
    (np.dtype("float32"), chunks) for chunks in [(2, 6, 20, 18), (1, 1, 3, 4)]]


@pytest.mark.parametrize(("dtype", "chunks"), SAMPLING_CASES, ids=str)
@pytest.mark.parametrize(("command", "args", "kernel"), [
    ("resize", ["--sizes", "9,31", "--mode", "linear", "--antialias"],
     lambda data: resize_ops.resize(data, sizes=[9, 31], axes=[2, 3], mode="linear", antialias=True)),
    ("resize", ["--scales", "1.5,0.5", "--mode", "cubic", "--coordinate-transformation-mode", "align_corners"],
     lambda data: resize_ops.resize(data, scales=[1.5, 0.5], axes=[2, 3], mode="cubic",
                                    coordinate_transformation_mode="align_corners")),
    ("resize", ["--sizes", "7,40"], lambda data: resize_ops.resize(data, sizes=[7, 40], axes=[2, 3])),
    ("grid-sample", ["--grid", "GRID", "--mode", "cubic", "--padding-mode", "reflection"],
     lambda data: grid_ops.grid_sample(data, grid_of(2), "cubic", "reflection")),
    ("warp", ["--rotate", "20", "--scale", "1.3", "--size", "15,11", "--mode", "nearest"], None),
    ("chain", ["crop-pad", "--shape", "16,16", "resize", "--scales", "0.5,0.5", "--mode", "linear",
               "space-to-depth", "--blocksize", "2"],
     lambda data: space_depth_ops.space_to_depth(resize_ops.resize(
         crop_ops.center_crop_pad(data, [16, 16], [2, 3]), scales=[0.5, 0.5], axes=[2, 3], mode="linear"), 2)),
], ids=["resize-antialias", "resize-cubic", "resize-nearest", "grid-sample", "warp", "chain"])
def test_the_sampling_operations_chunk_by_chunk_equal_the_kernels(
        tmp_path: Path, command: str, args: list[str], kernel: Any, dtype: np.dtype, chunks: tuple[int, ...]) -> None:
    """Images and channels split as stored, each task a stack of whole planes: the kernel's bits."""
    data = tensor(dtype)
    np.save(tmp_path / "grid.npy", grid_of(2))
    args = [str(tmp_path / "grid.npy") if arg == "GRID" else arg for arg in args]
    write_zarr(tmp_path / "in.zarr", data, chunks, names=["n", "c", "y", "x"])
    if command == "chain":
        result = run("chain", "-i", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "-q", *args)
    else:
        result = run(command, tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "-q", *args)
    assert result.exit_code == 0, result.stderr
    found = read_zarr(tmp_path / "out.zarr")[...]
    if kernel is None:  # the whole array through the same command's in-memory run
        np.save(tmp_path / "in.npy", data)
        assert run(command, tmp_path / "in.npy", "-o", tmp_path / "whole.npy", "--layout", "NCHW", "-q",
                   *args).exit_code == 0
        expected = np.load(tmp_path / "whole.npy")
    else:
        expected = kernel(data)
    assert found.dtype == expected.dtype and found.tobytes() == expected.tobytes()


@pytest.mark.parametrize("args", [["resize", "--scales", "4,4", "--axes", "2,3", "--mode", "linear"],
                                  ["warp", "--size", "80,72", "--rotate", "10"]])
def test_a_plane_s_output_is_chunked_as_its_input_not_one_chunk_a_plane(tmp_path: Path, args: list[str]) -> None:
    """A task holds whole planes, but the output is written in chunks of the input's sides, each
    by its own task: a try-out's resize of 2048 x 2048 chunks to 24576 x 16384 wrote one 1.5 GiB
    chunk a plane (here chunks of 1 x 1 x 80 x 72 for 8 x 8 ones). Bit for bit the numpy run."""
    data = tensor(np.dtype("float32"), (2, 3, 20, 18))
    write_zarr(tmp_path / "in.zarr", data, (1, 1, 8, 8), ["n", "c", "y", "x"])
    np.save(tmp_path / "in.npy", data)
    command, *rest = args
    result = run(command, tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--json", *rest)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["notes"][-1] == "chunk by chunk: 540 output chunk(s)"  # 2 x 3 x 10 x 9
    assert run(command, tmp_path / "in.npy", "-o", tmp_path / "out.npy", "-q", *rest).exit_code == 0
    out = read_zarr(tmp_path / "out.zarr")
    assert out.chunks == (1, 1, 8, 8) and out.shape == (2, 3, 80, 72)
    assert out[...].tobytes() == np.load(tmp_path / "out.npy").tobytes()


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_channels_a_chunk_each_give_blocks_of_a_chunk_s_size_not_c_times_it(tmp_path: Path, mode: str) -> None:
    """C must be one chunk for the kernels; an OME-Zarr's channels are a chunk each, and gathering
    4 of them made tasks and output chunks of 4 input chunks (1 x 16 x 8 x 8 of 1 x 1 x 16 x 16;
    32 channels, 32 times). Their H chunks are now made 4 times shorter: a chunk's elements still,
    bit for bit the kernels', there and back."""
    data = tensor(np.dtype("uint16"), (2, 4, 32, 48))
    write_zarr(tmp_path / "in.zarr", data, (1, 1, 16, 16), ["n", "c", "y", "x"])
    result = run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "s2d.zarr", "--blocksize", "2",
                 "--mode", mode, "-q")
    assert result.exit_code == 0, result.stderr
    blocks = read_zarr(tmp_path / "s2d.zarr")
    assert blocks.chunks == (1, 16, 2, 8) and math.prod(blocks.chunks) == 16 * 16
    assert blocks[...].tobytes() == space_depth_ops.space_to_depth(data, 2, mode).tobytes()
    write_zarr(tmp_path / "split.zarr", blocks[...], (1, 4, 8, 8), ["n", "c", "y", "x"])  # 16 channels, 4 chunks
    result = run("depth-to-space", tmp_path / "split.zarr", "-o", tmp_path / "back.zarr", "--blocksize", "2",
                 "--mode", mode, "-q")
    assert result.exit_code == 0, result.stderr
    back = read_zarr(tmp_path / "back.zarr")
    assert back.chunks == (1, 4, 4, 16) and math.prod(back.chunks) == 4 * 8 * 8
    assert back[...].tobytes() == data.tobytes()


@pytest.mark.parametrize("shape", [(1, 2, 0, 4), (1, 2, 4, 0)])
def test_space_to_depth_of_an_empty_axis_is_the_kernel_s(tmp_path: Path, shape: tuple[int, ...]) -> None:
    """A zarr of no rows (or columns) gave a traceback ('ValueError: Empty tuples are not allowed
    in chunks'): its chunks aligned to the blocksize were none. Now the kernel's empty result, as
    a .npy input gives."""
    data = np.zeros(shape, np.uint8)
    write_zarr(tmp_path / "in.zarr", data, (1, 1, 4, 4), ["n", "c", "y", "x"])
    result = run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--blocksize", "2", "-q")
    assert result.exit_code == 0, result.output
    expected = space_depth_ops.space_to_depth(data, 2)
    assert read_zarr(tmp_path / "out.zarr").shape == expected.shape == (1, 8, shape[2] // 2, shape[3] // 2)


def test_resize_splits_the_axes_it_leaves_alone() -> None:
    """Where sizes or scales name an axis as it is, the data still splits there; under a policy
    (its one scale taken from every listed axis) it does not, and the result is the kernel's."""
    import dask.array as da

    from geomcli.engine import operations
    from geomcli.engine.options import Common

    data = tensor(np.dtype("float32"), (4, 3, 12, 10))
    chunked = da.from_array(data, chunks=(1, 1, 5, 5))
    for operation, split in [
            (operations.Resize(sizes=(4, 3, 6, 5), mode="linear"), (4, 3)),
            (operations.Resize(scales=(1.0, 1.0, 0.5, 2.0), mode="cubic"), (4, 3)),
            (operations.Resize(sizes=(6, 5), axes=(2, 3)), (4, 3)),
            (operations.Resize(scales=(1.0, 0.5), axes=(0, 3)), (4, 3, 3)),
            (operations.Resize(sizes=(4, 3, 6, 6), keep_aspect_ratio_policy="not_larger", mode="linear"), ()),
            (operations.Resize(sizes=(2, 3, 12, 10), mode="linear"), ())]:
        result = operation.apply_chunked(chunked, None, Common())
        # a task of whole planes for each block of the axes split (chunked.by_planes's run), its
        # planes then cut into output chunks of the input's sides
        tasks = [layer for name, layer in result.dask.layers.items() if name.startswith("run-")]
        assert len(tasks) == 1 and len(tasks[0]) == math.prod(split), operation
        axes = None if operation.axes is None else list(operation.axes)
        expected = resize_ops.resize(data, None, operation.scales, operation.sizes, axes=axes,
                                     mode=operation.mode, keep_aspect_ratio_policy=operation.keep_aspect_ratio_policy)
        assert result.compute(scheduler="sync").tobytes() == expected.tobytes(), operation


def test_an_ome_image_resized_keeps_its_pixel_size_in_micrometres(tmp_path: Path) -> None:
    data = tensor(np.dtype("uint16"), (3, 16, 12))
    ome_image(tmp_path / "in.zarr", data, (1, 7, 7))
    result = run("resize", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--sizes", "8,24", "-q")
    assert result.exit_code == 0, result.stderr
    image = read_zarr(tmp_path / "out.zarr").attrs["ome"]["multiscales"][0]
    # 16 -> 8 rows: x_in = 2 x_out + 0.5 (0.25 in); 12 -> 24 columns: x_in = x_out / 2 - 0.25 (0.0625 out)
    assert image["datasets"][0]["coordinateTransformations"] == [
        {"type": "scale", "scale": [1.0, 1.0, 0.125]}, {"type": "translation", "translation": [0.0, 0.25, -0.0625]}]


def test_the_sampling_graphs_hold_a_chunk_of_planes_never_the_array() -> None:
    import dask.array as da

    from geomcli.engine import operations
    from geomcli.engine.options import Common
    from geomcli.engine.theta import WarpTheta

    data = da.zeros((4, 8, 256, 192), dtype=np.float32, chunks=(1, 2, 128, 96))
    # the output's planes, cut into chunks of the input's sides (128 x 96) to be written
    cut = {"Resize": ((128,), (96, 96, 96, 12)), "Warp": ((128, 128), (96, 96)), "GridSample": ((128, 128), (96, 96))}
    theta = WarpTheta({2: np.array([[[1.0, 0.2, 0.0], [-0.2, 1.0, 0.1]]], np.float32)}, {})
    grid = np.zeros((4, 256, 192, 2), np.float32)
    for operation in (operations.Resize(sizes=(128, 300), mode="linear"), operations.Warp(theta),
                      operations.GridSample(grid)):
        result = operation.apply_chunked(data, "NCHW", Common())
        # a task for each chunk of images and channels (4 x 4), each of its whole planes (chunked.by_planes's run)
        tasks = [layer for name, layer in result.dask.layers.items() if name.startswith("run-")]
        assert len(tasks) == 1 and len(tasks[0]) == 4 * 4, operation
        assert result.chunks == ((1,) * 4, (2,) * 4, *cut[type(operation).__name__]), operation


@pytest.mark.parametrize(("args", "expected", "inner", "shards"), [
    (["crop-pad", "--shape", "2,6,30,40"], lambda data: crop_ops.center_crop_pad(data, [2, 6, 30, 40]),
     (1, 3, 8, 8), (1, 6, 16, 16)),
    (["space-to-depth", "--blocksize", "2"], lambda data: space_depth_ops.space_to_depth(data, 2),
     (1, 3, 8, 8), (1, 24, 8, 8)),
])
def test_a_sharded_input_is_read_by_shard_and_its_output_stored_in_shards(
        tmp_path: Path, args: list[str], expected: Any, inner: tuple[int, ...], shards: tuple[int, ...]) -> None:
    """Sharding is there so that a big array is not millions of tiny files: a task per shard reads
    it, and the output keeps shards (of the input's inner chunks where they divide them)."""
    data = tensor(np.dtype("float32"), (2, 6, 40, 48))
    array = zarr.create_array(str(tmp_path / "in.zarr"), shape=data.shape, dtype=data.dtype, chunks=(1, 3, 8, 8),
                              shards=(1, 6, 16, 16))
    array[...] = data
    result = run(args[0], tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", *args[1:], "--json")
    assert result.exit_code == 0, result.stderr
    out = read_zarr(tmp_path / "out.zarr")
    assert out[...].tobytes() == expected(data).tobytes()
    assert (out.chunks, out.shards) == (inner, shards)
    written = [path for path in (tmp_path / "out.zarr").rglob("*") if path.is_file() and path.name != "zarr.json"]
    assert len(written) == np.prod([-(-length // shard) for length, shard in zip(out.shape, shards)])
    assert f"chunk by chunk: {len(written)} output chunk(s)" in json.loads(result.stdout)["notes"]


def test_dry_run_info_and_the_plan_read_a_zarr_header_never_its_chunks(tmp_path: Path) -> None:
    """A 4.3-billion-element array (no chunk written) is planned as any file, past the default
    --max-pixels: the chunked run never holds it whole."""
    zarr.create_array(str(tmp_path / "big.zarr"), shape=(64, 4, 4096, 4096), dtype="float32",
                      chunks=(1, 4, 1024, 1024), dimension_names=["t", "c", "y", "x"])
    result = run("space-to-depth", tmp_path / "big.zarr", "--out-dir", tmp_path / "out", "--blocksize", "2",
                 "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{tmp_path / 'big.zarr'} → {tmp_path / 'out' / 'big.zarr'}: 64×16×2048×2048 float32\n"
    result = run("space-to-depth", tmp_path / "big.zarr", "--out-dir", tmp_path / "out", "--blocksize", "3")
    assert result.exit_code == 2 and "height 4096 is not divisible by blocksize 3" in result.stderr
    assert not (tmp_path / "out").exists()
    result = run("info", tmp_path / "big.zarr")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (f"{tmp_path / 'big.zarr'}: zarr 64×4×4096×4096 float32, layout NCHW, "
                             "chunks 1×4×1024×1024, compression zstd; value range not read: it would read every "
                             "chunk\n")
    zarr.create_array(str(tmp_path / "sharded.zarr"), shape=(64, 64), dtype="uint8", chunks=(8, 8), shards=(32, 32),
                      compressors=None)
    result = run("info", tmp_path / "sharded.zarr")
    assert result.stdout == (f"{tmp_path / 'sharded.zarr'}: zarr 64×64 uint8, layout -, chunks 8×8 in shards of "
                             "32×32; value range not read: it would read every chunk\n")
    record = json.loads(run("info", "--json", tmp_path / "big.zarr").stdout)
    assert (record["shape"], record["chunks"], record["layout"], record["value_range"]) == (
        [64, 4, 4096, 4096], [1, 4, 1024, 1024], "NCHW", None)


def test_max_pixels_bounds_what_a_task_holds(tmp_path: Path) -> None:
    data = tensor(np.dtype("float32"))  # (2, 6, 20, 18), chunks of 1×3×10×9 = 270 elements
    write_zarr(tmp_path / "in.zarr", data, (1, 3, 10, 9), names=["n", "c", "y", "x"])
    assert run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "crop.zarr", "--shape", "16,16",
               "--max-pixels", "300", "-q").exit_code == 0
    # resize holds whole planes: 1×3×20×18 in, 1×3×40×36 out; known from the chunks, a usage fault
    result = run("resize", tmp_path / "in.zarr", "-o", tmp_path / "r.zarr", "--scales", "2,2", "--max-pixels", "300")
    assert result.exit_code == 2
    assert "a task's whole planes (1, 3, 20, 18)" in result.stderr and "--max-pixels" in result.stderr
    result = run("resize", tmp_path / "in.zarr", "-o", tmp_path / "r.zarr", "--scales", "2,2", "--max-pixels", "2000")
    assert result.exit_code == 2 and "an output block (1, 3, 40, 36)" in result.stderr
    # a downscale: its output blocks are small, the planes it reads are not
    result = run("resize", tmp_path / "in.zarr", "-o", tmp_path / "r.zarr", "--scales", "0.5,0.5",
                 "--max-pixels", "300")
    assert result.exit_code == 2 and "a task's whole planes (1, 3, 20, 18)" in result.stderr
    assert not (tmp_path / "r.zarr").exists()


def test_a_resize_of_planes_past_max_pixels_is_refused_before_it_is_planned(tmp_path: Path) -> None:
    """A zarr.json declaring one 10**9 x 10**9 chunk: resize planned its axes (5 * 10**8 coordinates
    each, gigabytes) before it checked the planes a task holds; a MemoryError under ulimit -v."""
    import subprocess
    import sys

    zarr.create_array(str(tmp_path / "in.zarr"), shape=(4, 8), dtype="float32", chunks=(4, 8))
    metadata = json.loads((tmp_path / "in.zarr" / "zarr.json").read_text())
    metadata["shape"] = metadata["chunk_grid"]["configuration"]["chunk_shape"] = [10**9, 10**9]
    (tmp_path / "in.zarr" / "zarr.json").write_text(json.dumps(metadata))
    done = subprocess.run(["bash", "-c", f'ulimit -v {2 << 20}; exec "$@"', "-", sys.executable, "-m", "geomcli",
                           "resize", str(tmp_path / "in.zarr"), "-o", str(tmp_path / "out.zarr"),
                           "--scales", "0.5,0.5"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"Error: {tmp_path / 'in.zarr'}: a task's whole planes (1000000000, 1000000000): "
                                  "1000000000000000000 elements exceed the limit"), done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.zarr"]


def test_a_compressed_tiled_tiff_is_read_tile_by_tile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through tifffile's zarr store, in chunks of whole tiles (here of about 64 KiB), never
    decoded whole; the result is the kernel's, with the layout its axes name."""
    import tifffile

    from geomcli.engine import chunked, zarr_file
    from geomcli.engine.options import Common

    data = np.random.default_rng(3).integers(0, 60000, (3, 4, 256, 192), dtype=np.uint16)
    tifffile.imwrite(tmp_path / "in.tif", data, compression="zlib", tile=(64, 64), photometric="minisblack",
                     metadata={"axes": "TCYX"})
    monkeypatch.setattr(chunked, "CHUNK_BYTES", 64 << 10)
    opened, layout, *_ = zarr_file._open(str(tmp_path / "in.tif"), Common())
    assert layout == "NCHW" and opened.npartitions > 1
    assert all(length % 64 == 0 for axis in opened.chunks[2:] for length in axis[:-1])  # whole tiles
    result = run("space-to-depth", tmp_path / "in.tif", "-o", tmp_path / "out.zarr", "--blocksize", "2", "-q")
    assert result.exit_code == 0, result.stderr
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == space_depth_ops.space_to_depth(data, 2).tobytes()


def test_a_tiled_rgb_tiff_is_read_tile_by_tile_its_samples_whole(tmp_path: Path) -> None:
    """The tile's sides are the page's rows and columns, not the last two axes (columns and samples):
    so judged, every tiled RGB TIFF had a tile "past its page" and was decoded whole."""
    import tifffile

    from geomcli import io

    data = np.random.default_rng(7).integers(0, 255, (300, 200, 3), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "in.tif", data, tile=(64, 64), photometric="rgb")
    tiles = io.tiff_as_zarr(str(tmp_path / "in.tif"))
    assert tiles is not None
    assert tiles[0].chunks == (64, 64, 3) and np.array_equal(tiles[0][100:200, 10:20], data[100:200, 10:20])


def test_a_stripped_page_is_read_page_by_page_not_strip_by_strip(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """zarr's store costs about 0.15 ms a strip: 200,000 one-row strips took 29 s to read through it,
    0.05 s as a page. Stripped pages of up to PAGE_BYTES are chunks of their own, rows per strip
    chunks beyond."""
    import tifffile

    from geomcli import io
    from geomcli.io import _tiff

    data = np.random.default_rng(8).integers(0, 60000, (4, 3000, 10), dtype=np.uint16)
    tifffile.imwrite(tmp_path / "in.tif", data, rowsperstrip=1, photometric="minisblack")
    tiles, layout, _ = io.tiff_as_zarr(str(tmp_path / "in.tif"))
    assert (tiles.chunks, tiles.chunkmode, layout) == ((1, 3000, 10), "page", "NHW")
    assert np.array_equal(tiles[1:3, 5:2000], data[1:3, 5:2000])
    monkeypatch.setattr(_tiff, "PAGE_BYTES", 3000 * 10 * 2 - 1)  # one byte short of a page: strips
    tiles, _, _ = io.tiff_as_zarr(str(tmp_path / "in.tif"))
    assert (tiles.chunks, tiles.chunkmode) == ((1, 1, 10), "strile")
    assert np.array_equal(tiles[3, 7:9], data[3, 7:9])
    result = run("crop-pad", tmp_path / "in.tif", "-o", tmp_path / "out.zarr", "--shape", "100,4", "-q")
    assert result.exit_code == 0, result.stderr
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == crop_ops.center_crop_pad(data, [100, 4], [1, 2]).tobytes()


def test_a_tiff_whose_read_is_more_than_its_stored_pixels_is_decoded_as_read_does(tmp_path: Path) -> None:
    """A planar image (its samples moved last) and a palette (expanded): read_array's array."""
    import tifffile

    from geomcli import io

    planar = np.random.default_rng(4).integers(0, 255, (3, 20, 18), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "planar.tif", planar, compression="zlib", photometric="rgb", planarconfig="separate")
    palette = np.random.default_rng(5).integers(0, 4, (20, 18), dtype=np.uint8)
    colormap = np.random.default_rng(6).integers(0, 65535, (3, 256), dtype=np.uint16)
    tifffile.imwrite(tmp_path / "palette.tif", palette, photometric="palette", colormap=colormap)
    for name in ("planar.tif", "palette.tif"):
        assert io.tiff_as_zarr(str(tmp_path / name)) is None
        result = run("crop-pad", tmp_path / name, "-o", tmp_path / f"{name}.zarr", "--shape", "10,10", "-q")
        assert result.exit_code == 0, result.stderr
        expected = crop_ops.center_crop_pad(io.read_array(str(tmp_path / name)).data, [10, 10], [0, 1])
        assert read_zarr(tmp_path / f"{name}.zarr")[...].tobytes() == expected.tobytes()


@pytest.mark.cluster
def test_on_a_dask_cluster_as_on_threads(tmp_path: Path, scheduler: str) -> None:
    data = tensor(np.dtype("float32"))
    write_zarr(tmp_path / "in.zarr", data, (1, 5, 7, 5))
    result = run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--blocksize", "2",
                 "--scheduler", scheduler, "-q")
    assert result.exit_code == 0, result.stderr
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == space_depth_ops.space_to_depth(data, 2).tobytes()


@pytest.mark.cluster
@pytest.mark.parametrize(("joined", "suffix", "chained"),
                         [(False, ".zarr", False), (True, ".zarr", False), (False, ".npy", True)])
def test_a_grid_on_a_cluster_goes_to_the_workers_not_into_the_graph(tmp_path: Path, scheduler: str, joined: bool,
                                                                    suffix: str, chained: bool) -> None:
    """A grid of a plane's size was in the graph: through the scheduler, and Dask's "Sending large
    graph of size 512.02 MiB" warning on five lines of stderr, even with -q (here its threshold
    lowered to 40 kB, under this grid's 64 KiB and over the rest; pytest makes the warning an error)."""
    import dask

    data = np.random.default_rng(42).random((2, 1, 32, 32), dtype=np.float32)
    write_zarr(tmp_path / "in.zarr", data, (1, 1, 16, 16))
    grid = np.random.default_rng(43).uniform(-1.2, 1.2, (2, 64, 64, 2)).astype(np.float32)
    np.save(tmp_path / "grid.npy", grid)
    out = tmp_path / f"out{suffix}"
    sampled = ["grid-sample", "--grid", tmp_path / "grid.npy"]
    where = ["--scheduler", scheduler if joined else "local:2", "-q"]
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "40kB"}):
        result = run("chain", "-i", tmp_path / "in.zarr", "-o", out, *where, *sampled) if chained else \
            run(*sampled[:1], tmp_path / "in.zarr", "-o", out, *sampled[1:], *where)
    assert (result.exit_code, result.stderr) == (0, "")
    found = np.load(out) if suffix == ".npy" else read_zarr(out)[...]
    assert found.tobytes() == grid_ops.grid_sample(data, grid).tobytes()


@pytest.mark.cluster
@pytest.mark.parametrize(("order", "piped"), [("C", False), ("F", False), ("C", True)],
                         ids=["file", "fortran", "stdin"])
def test_a_npy_input_on_a_cluster_is_not_sent_in_the_graph(
        tmp_path: Path, scheduler: str, order: str, piped: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory-mapped .npy was pickled as its whole data: a (1, 1, 8192, 4096) float32 went
    through the client's memory (1 GB peak) into the graph, with Dask's "Sending large graph of
    size 128.00 MiB" warning on stderr (here its threshold lowered to 40 kB, under this array's
    72 KiB; pytest makes the warning an error). Each worker maps the file by its name (given
    relative: the workers' folder is not this shell's), a Fortran-order one as laid out. A piped
    input, read whole here, is scattered to the workers before the run, as a grid is."""
    import dask

    data = np.asarray(np.random.default_rng(44).random((2, 1, 96, 96), dtype=np.float32), order=order)
    np.save(tmp_path / "in.npy", data)
    monkeypatch.chdir(tmp_path)
    args = ["crop-pad", "-" if piped else "in.npy", "-o", "out.zarr", "--shape", "2,1,90,80", "--scheduler", scheduler,
            "-q"]
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "40kB"}):
        result = CliRunner().invoke(cli, args, input=(tmp_path / "in.npy").read_bytes() if piped else None,
                                    catch_exceptions=False)
    assert (result.exit_code, result.stderr) == (0, "")
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == crop_ops.center_crop_pad(data, (2, 1, 90, 80)).tobytes()


@pytest.mark.parametrize("change", ["rewritten", "truncated"])
def test_a_npy_input_changed_before_a_worker_maps_it_is_refused(tmp_path: Path, change: str) -> None:
    """A cluster's worker maps the .npy by its name when it runs its task (a MappedFile pickled,
    as here): rewritten as another array of its size, it was silently read as that one; cut
    shorter, the run's error line was numpy's "strides is incompatible with shape of requested
    array and size of buffer". An unchanged file reads as mapped here."""
    import pickle

    from geomcli.engine import chunked

    data = np.random.default_rng(45).random((2, 1, 6, 5), dtype=np.float32)
    np.save(tmp_path / "in.npy", data)
    sent = pickle.dumps(chunked.MappedFile(np.load(tmp_path / "in.npy", mmap_mode="r")))
    assert pickle.loads(sent)[1:, :, 2:].tobytes() == data[1:, :, 2:].tobytes()
    if change == "rewritten":
        np.save(tmp_path / "in.npy", data + 1)
    else:
        os.truncate(tmp_path / "in.npy", 200)
    stat = os.stat(tmp_path / "in.npy")  # (a time of its own, on a file system of coarse times too)
    os.utime(tmp_path / "in.npy", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(GeomError, match=r"in\.npy: changed since it was read; run again$"):
        pickle.loads(sent)[...]


def test_a_dry_run_of_an_image_decoded_whole_to_zarr_holds_no_pixels(tmp_path: Path) -> None:
    """The plan of a PNG to .zarr (read whole by the run) made its graph from a broadcast zero of
    the image's shape, which dask hashed and cut whole: a dry run of a 12000x12000 RGB PNG peaked
    at 490 MB, here 36 MB for 4000x3000 (numpy's allocations are traced)."""
    import tracemalloc

    from PIL import Image

    Image.fromarray(np.zeros((3000, 4000, 3), np.uint8)).save(tmp_path / "big.png")
    run("crop-pad", tmp_path / "big.png", "--out-dir", tmp_path / "out", "--name", "{stem}.zarr", "--shape", "8,8",
        "--dry-run", "--max-pixels", "1")  # (dask and the rest imported before memory is traced)
    tracemalloc.start()
    try:
        result = run("crop-pad", tmp_path / "big.png", "--out-dir", tmp_path / "out", "--name", "{stem}.zarr",
                     "--shape", "8,8", "--dry-run")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0 and "dry run, 1 to write" in result.stderr, result.stderr
    assert peak < 4 << 20, peak


def test_more_local_workers_than_a_machine_runs_is_a_usage_error(tmp_path: Path) -> None:
    """LocalCluster died of MemoryError, with a traceback, building its dict of workers."""
    write_zarr(tmp_path / "in.zarr", tensor(np.dtype("float32")), (1, 5, 7, 5))
    result = run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--blocksize", "2",
                 "--scheduler", "local:99999999999")
    assert result.exit_code == 2
    assert result.stderr.endswith("Error: Invalid value for '--scheduler': 'local:99999999999': local:N needs a "
                                  "number of workers N from 1 to 1024\n"), result.stderr
    assert not (tmp_path / "out.zarr").exists()


@pytest.mark.cluster
def test_relative_names_on_a_cluster_are_this_shell_s(tmp_path: Path, scheduler: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers' working folder is not this shell's: they were given in.zarr and out.zarr."""
    data = tensor(np.dtype("float32"))
    write_zarr(tmp_path / "in.zarr", data, (1, 5, 7, 5))
    monkeypatch.chdir(tmp_path)
    result = run("space-to-depth", "in.zarr", "-o", "out.zarr", "--blocksize", "2", "--scheduler", scheduler, "-q")
    assert result.exit_code == 0, result.stderr
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == space_depth_ops.space_to_depth(data, 2).tobytes()
    # and a failure names it as given
    next(path for path in (tmp_path / "in.zarr").rglob("*") if path.is_file() and path.name != "zarr.json"
         ).write_bytes(b"not zstd")
    result = run("space-to-depth", "in.zarr", "-o", "again.zarr", "--blocksize", "2", "--scheduler", scheduler)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: in.zarr: a chunk could not be read, transformed or written ("), \
        result.stderr


@pytest.mark.cluster
def test_a_tiled_tiff_on_a_cluster_is_read_by_the_workers(tmp_path: Path, scheduler: str) -> None:
    import tifffile

    data = np.random.default_rng(3).integers(0, 60000, (2, 4, 128, 96), dtype=np.uint16)
    tifffile.imwrite(tmp_path / "in.tif", data, compression="zlib", tile=(32, 32), photometric="minisblack",
                     metadata={"axes": "TCYX"})
    result = run("space-to-depth", tmp_path / "in.tif", "-o", tmp_path / "out.zarr", "--blocksize", "2",
                 "--scheduler", scheduler, "-q")
    assert result.exit_code == 0, result.stderr
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == space_depth_ops.space_to_depth(data, 2).tobytes()


@pytest.mark.cluster
@pytest.mark.parametrize("suffix", [".npy", ".tif"])
def test_a_cluster_result_in_a_file_here_holds_every_block(tmp_path: Path, scheduler: str, suffix: str) -> None:
    """A .npy or .tiff output is a memory map only this process can write: the workers' blocks come
    back to be put in it (a worker writing into its own copy of the map would leave zeros here)."""
    import tifffile

    data = tensor(np.dtype("float32"))
    data[1, 2, 3, 4] = np.nan
    write_zarr(tmp_path / "in.zarr", data, (1, 5, 7, 5))
    out = tmp_path / f"out{suffix}"
    result = run("space-to-depth", tmp_path / "in.zarr", "-o", out, "--blocksize", "2", "--scheduler", scheduler,
                 "--json")
    assert result.exit_code == 0, result.stderr
    found = np.load(out) if suffix == ".npy" else tifffile.imread(out)
    expected = space_depth_ops.space_to_depth(data, 2)
    assert found.tobytes() == expected.tobytes()
    record = json.loads(result.stdout)
    assert record["value_range"] == [float(np.nanmin(data)), float(np.nanmax(data))]
    assert record["notes"][0] == "holds NaN; the value range is of the other values"


def test_zarr_on_s3(s3: S3, tmp_path: Path) -> None:
    data = tensor(np.dtype("int16"))
    write_zarr(tmp_path / "in.zarr", data, (1, 3, 7, 5))
    assert run("crop-pad", tmp_path / "in.zarr", "-o", f"{s3.url}/a.zarr", "--shape", "2,6,16,16",
               "-q").exit_code == 0
    result = run("space-to-depth", f"{s3.url}/a.zarr", "-o", f"{s3.url}/b.zarr", "--blocksize", "2", "-q")
    assert result.exit_code == 0, result.stderr
    import s3fs

    store = zarr.storage.FsspecStore(s3fs.S3FileSystem(endpoint_url=s3.endpoint, asynchronous=True),
                                     path=f"{s3.bucket}/b.zarr", read_only=True)
    out = zarr.open_array(store, mode="r")
    expected = space_depth_ops.space_to_depth(crop_ops.center_crop_pad(data, [2, 6, 16, 16]), 2)
    assert np.array_equal(out[...], expected)
    assert "b.zarr/zarr.json" in " ".join(s3.keys())


@pytest.mark.parametrize(("zarr_format", "metadata"), [
    (3, ["zarr.json"]),
    (2, ["zarr.json", "zarr.json", ".zarray", ".zattrs"]),  # v3's looked for first: an array, then a group
])
@pytest.mark.parametrize(("output", "opens"), [("-o", 1), ("--out-dir", 2)])
def test_a_zarr_on_s3_is_read_in_a_request_a_chunk_and_its_metadata_once(s3: S3, tmp_path: Path, zarr_format: int,
                                                                         metadata: list[str], output: str, opens: int,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A v3 array of 4 chunks took 27 requests: a HEAD before each object's GET (s3fs's size, for
    its ranged reads of objects past 50 MiB), and its metadata read 3 times (the header, the
    tasks' check, the run), each asking for v3's and v2's at once (zarr.json, .zarray, .zattrs; a
    missing one a HEAD and a listing). Now 6: a listing (the reachability check), zarr.json, 4 chunks;
    a batch reads the metadata once more, for its plan."""
    import s3fs

    data = tensor(np.dtype("uint8"), (2, 3, 32, 32))
    store = zarr.storage.FsspecStore(s3fs.S3FileSystem(endpoint_url=s3.endpoint, asynchronous=True),
                                     path=f"{s3.bucket}/a.zarr")
    zarr.create_array(store, shape=data.shape, chunks=(1, 3, 16, 32), dtype=data.dtype,
                      zarr_format=zarr_format)[...] = data
    requests: list[str] = []
    call = s3fs.S3FileSystem._call_s3

    async def counted(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        requests.append(method if method != "get_object" else kwargs["Key"].removeprefix("a.zarr/"))
        return await call(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", counted)
    written = tmp_path / "a.npy" if output == "-o" else tmp_path / "out" / "a.npy"
    naming = () if output == "-o" else ("--name", "a.npy", "-j", "1")
    result = run("crop-pad", f"{s3.url}/a.zarr", output, written if output == "-o" else written.parent,
                 "--shape", "8,8", "--layout", "NCHW", *naming)
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(np.load(written), data[:, :, 12:20, 12:20])
    chunks = ["c/0/0/0/0", "c/0/0/1/0", "c/1/0/0/0", "c/1/0/1/0"] if zarr_format == 3 else \
        ["0.0.0.0", "0.0.1.0", "1.0.0.0", "1.0.1.0"]
    assert sorted(requests) == sorted(["list_objects_v2", *metadata * opens, *chunks])


@pytest.mark.parametrize("suffix", [".npy", ".tif"])
def test_a_big_result_from_a_zarr_is_put_whole_on_s3(s3: S3, tmp_path: Path, suffix: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An output on object storage is made in memory and put whole, however big: a memory map
    (over MAP_OUTPUT_BYTES) took a temp file beside the URL ("folder s3://bucket does not exist")."""
    from geomcli.io import _mapped

    monkeypatch.setattr(_mapped, "MAP_OUTPUT_BYTES", 100)
    data = tensor(np.dtype("int16"), (1, 3, 20, 18))
    write_zarr(tmp_path / "in.zarr", data, (1, 3, 10, 9))
    result = run("crop-pad", tmp_path / "in.zarr", "-o", f"{s3.url}/big{suffix}", "--shape", "1,3,16,16", "-q")
    assert result.exit_code == 0, result.stderr
    assert f"big{suffix}" in " ".join(s3.keys())


def geomcli(*args: str | Path) -> tuple[int, str]:
    """A real run's exit code and stderr: what is left running at its exit shows there too."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "geomcli", *map(str, args)], capture_output=True, text=True,
                          timeout=120)
    return done.returncode, done.stderr


def test_a_zarr_on_s3_that_cannot_be_reached_is_one_error_line(s3: S3, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import moto.settings

    write_zarr(tmp_path / "in.zarr", tensor(np.dtype("uint8"), (1, 3, 8, 8)), (1, 3, 4, 4))
    assert run("crop-pad", tmp_path / "in.zarr", "-o", f"{s3.url}/in.zarr", "--shape", "1,3,8,8", "-q").exit_code == 0
    url = f"{s3.url}/in.zarr"
    # the options alone reach the store, on the -o path as on --out-dir's
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name)
    for name in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.setenv(name, str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert geomcli("crop-pad", url, "-o", tmp_path / "soo3.zarr", "--shape", "1,3,4,4", "-q", *s3.options) == (0, "")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    no_credentials = f"Error: {url}: cannot read (Unable to locate credentials)\n"
    assert geomcli("crop-pad", url, "-o", tmp_path / "x.npy", "--shape", "1,3,4,4") == (1, no_credentials)
    assert geomcli("info", url) == (1, no_credentials)
    code, stderr = geomcli("crop-pad", url, "--out-dir", tmp_path / "out", "--shape", "1,3,4,4")
    assert (code, stderr.splitlines()[0]) == (1, no_credentials.strip())
    assert geomcli("crop-pad", tmp_path / "in.zarr", "-o", f"{s3.url}/out.zarr", "--shape", "1,3,4,4") == (
        1, f"Error: {s3.url}/out.zarr: cannot write a zarr array (Unable to locate credentials)\n")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    code, stderr = geomcli("crop-pad", url, "-o", tmp_path / "x.npy", "--shape", "1,3,4,4",
                           "--storage-option", "endpoint_url=http://127.0.0.1:1",
                           "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}}')  # not in 17 s
    assert code == 1
    assert stderr.startswith(f"Error: {url}: cannot read (Could not connect to the endpoint URL: ")
    assert stderr.count("\n") == 1
    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # the server checks keys: these are none
    for _ in range(3):  # zarr's other requests, left running, once made tracebacks at exit, 1 run in 10
        assert geomcli("crop-pad", url, "-o", tmp_path / "x.npy", "--shape", "1,3,4,4") == (
            1, f"Error: {url}: permission denied (The AWS Access Key Id you provided does not exist in our records.)\n")
    assert not (tmp_path / "x.npy").exists()


@pytest.mark.parametrize(("dtype", "message"), [
    ("uint8", "a chunked result is written as .zarr, .npy or .tiff, not PNG"),
    ("float32", "PNG cannot hold float32 data; write .npy or .tiff"),
])
def test_a_zarr_to_png_is_a_usage_error_from_the_header_alone_and_in_a_batch(dtype: str, message: str,
                                                                            tmp_path: Path) -> None:
    write_zarr(tmp_path / "a.zarr", np.zeros((8, 8), dtype), (4, 4), ["y", "x"])
    single = run("crop-pad", tmp_path / "a.zarr", "-o", tmp_path / "a.png", "--shape", "4,4")
    assert single.exit_code == 2 and single.stderr.splitlines()[-1] == f"Error: {tmp_path / 'a.png'}: {message}"
    batch = run("crop-pad", tmp_path / "a.zarr", "--out-dir", tmp_path / "out", "--name", "{stem}.png",
                "--shape", "4,4")
    assert batch.exit_code == 2 and f"Error: {tmp_path / 'out' / 'a.png'}: {message}" in batch.stderr.splitlines()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.zarr"]


def backdate(folder: Path, seconds: float) -> None:
    """Every file and folder under ``folder`` (its own included) modified ``seconds`` ago."""
    then = time.time() - seconds
    for path in [folder, *folder.rglob("*")]:
        os.utime(path, (then, then))


def s3_zarr(s3: S3, key: str, mode: str = "r") -> Any:
    import s3fs

    store = zarr.storage.FsspecStore(s3fs.S3FileSystem(endpoint_url=s3.endpoint, asynchronous=True),
                                     path=f"{s3.bucket}/{key}", read_only=mode == "r")
    return zarr.open_array(store, mode=mode)


def test_folders_and_quoted_globs_on_s3_take_zarr_arrays_as_inputs(s3: S3, tmp_path: Path) -> None:
    data = tensor(np.dtype("uint8"), (1, 3, 8, 8))
    write_zarr(tmp_path / "a.zarr", data, (1, 3, 4, 4))
    for key in ["in/a.zarr", "in/deeper/b.zarr"]:
        assert run("crop-pad", tmp_path / "a.zarr", "-o", f"{s3.url}/{key}", "--shape", "1,3,8,8", "-q").exit_code == 0
    s3.put("in/c.npy", _npy_bytes(data))
    # (in/* matches the prefix deeper too, taken as that folder named, as a local glob's: its b.zarr)
    for inputs, names in [([f"{s3.url}/in"], ["a.zarr", "c.npy"]),
                          ([f"{s3.url}/in/*"], ["a.zarr", "b.zarr", "c.npy"]),
                          ([f"{s3.url}/in/*.zarr"], ["a.zarr"]), ([f"{s3.url}/**/*.zarr"], ["a.zarr", "b.zarr"]),
                          (["-r", f"{s3.url}/in"], ["a.zarr", "b.zarr", "c.npy"])]:
        result = run("crop-pad", *inputs, "--out-dir", tmp_path / "out", "--shape", "1,3,4,4", "--dry-run")
        assert result.exit_code == 0, (inputs, result.stderr)
        assert sorted(line.split(" → ")[0].rpartition("/")[2] for line in result.stdout.splitlines()) == names
    result = run("info", f"{s3.url}/in/*.zarr")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"{s3.url}/in/a.zarr: zarr 1×3×8×8 uint8")


def _npy_bytes(data: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, data)
    return buffer.getvalue()


def test_no_clobber_and_skip_existing_keep_a_zarr_output_on_s3(s3: S3, tmp_path: Path) -> None:
    """An array on S3 is a prefix with zarr.json, not an object: it exists, and its modified time is
    its newest file's (an array updated in place is newer than its output)."""
    data = tensor(np.dtype("uint8"), (1, 3, 8, 8))
    for name in ["a", "b"]:
        write_zarr(tmp_path / "in" / f"{name}.zarr", data, (1, 3, 4, 4))
    backdate(tmp_path / "in", 10)  # S3 tells modified times in whole seconds: no input in the output's second
    out = f"{s3.url}/out"
    assert run("crop-pad", f"{tmp_path}/in/*.zarr", "--out-dir", out, "--shape", "1,3,6,6", "-q").exit_code == 0
    for flags in [["-n"], ["--skip-existing"], ["-n", "--dry-run"]]:
        result = run("crop-pad", f"{tmp_path}/in/*.zarr", "--out-dir", out, "--shape", "1,3,4,4", *flags)
        assert result.exit_code == 0, result.stderr
        skipped = "dry run, 0 to write, 0 failed, 2 skipped" if "--dry-run" in flags else "0 ok, 0 failed, 2 skipped"
        assert f"crop-pad: {skipped}" in result.stderr, flags
        assert s3_zarr(s3, "out/a.zarr").shape == (1, 3, 6, 6)
    # from S3 to S3: an input array updated in place (one chunk rewritten) is done again, alone
    assert run("crop-pad", f"{out}/*.zarr", "--out-dir", f"{s3.url}/again", "--shape", "1,3,4,4", "-q").exit_code == 0
    time.sleep(1.1)  # S3 tells modified times in whole seconds
    s3_zarr(s3, "out/b.zarr", "r+")[0, 0, 2:4, 2:4] = 99
    result = run("crop-pad", f"{out}/*.zarr", "--out-dir", f"{s3.url}/again", "--shape", "1,3,4,4",
                 "--skip-existing")
    assert result.exit_code == 0, result.stderr
    assert "crop-pad: 1 ok, 0 failed, 1 skipped" in result.stderr
    assert (s3_zarr(s3, "again/b.zarr")[0, 0, 1:3, 1:3] == 99).all()


def test_the_sweep_of_a_stopped_run_removes_its_incomplete_zarr_outputs_on_s3(s3: S3) -> None:
    """A zarr output on S3 is written in place: a run stopped without unwinding (a -j worker's
    os._exit on SIGTERM) leaves it marked incomplete, and the sweep of its jobs removes it, an OME
    group's levels too; one marked complete, and one without the marker (not ours), are kept."""
    from geomcli.engine.jobs import remove_leftovers
    from geomcli.engine.plan import Job
    from geomcli.io import _zarr

    space = _zarr.Space(({"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
                         {"name": "x", "type": "space"}))
    outputs = {name: f"{s3.url}/out/{name}.zarr" for name in ("cut", "cut_ome", "whole", "foreign")}
    for name in ("cut", "cut_ome", "whole"):
        target = _zarr.create_output(outputs[name], (3, 8, 8), np.dtype("uint8"), (3, 4, 4), "CHW",
                                     space=space if name == "cut_ome" else None)
        target[:, :4, :4] = 7  # one chunk of four written
    _zarr.mark_complete(outputs["whole"])
    import s3fs

    store = zarr.storage.FsspecStore(s3fs.S3FileSystem(endpoint_url=s3.endpoint, asynchronous=True),
                                     path=f"{s3.bucket}/out/foreign.zarr")
    zarr.create_array(store, shape=(3, 8, 8), dtype="uint8", chunks=(3, 4, 4))[:, :4, :4] = 7
    assert {key.split("/")[1] for key in s3.keys()} == {f"{name}.zarr" for name in outputs}
    assert [_zarr.incomplete(outputs[name]) for name in outputs] == [True, True, False, False]
    remove_leftovers([Job(index, f"in{index}.zarr", output, "zarr") for index, output in enumerate(outputs.values())])
    assert {key.split("/")[1] for key in s3.keys()} == {"whole.zarr", "foreign.zarr"}
    assert s3_zarr(s3, "out/whole.zarr")[0, 0, 0] == 7 and s3_zarr(s3, "out/foreign.zarr")[0, 0, 0] == 7


@pytest.mark.process
@pytest.mark.parametrize(("workers", "sent"), [
    (["-j", "2"], signal.SIGTERM), (["-j", "2"], signal.SIGINT),
    pytest.param(["--scheduler", "local:2"], signal.SIGTERM, marks=pytest.mark.cluster)],
    ids=["j-term", "j-int", "local-term"])
def test_a_signal_mid_batch_to_s3_leaves_no_incomplete_zarr_output(workers: list[str], sent: int, s3: S3,
                                                                   tmp_path: Path) -> None:
    """A batch writing zarr arrays to S3 in worker processes, held (SIGSTOP) once its third array
    appears (the first may be done in the parent), signalled, then let go: a -j worker ends by
    os._exit, a cluster's tasks are dropped, and what they were writing is swept; only arrays
    marked complete remain. A cluster of its own is signalled as a process group (a service
    manager's stop), its Dask workers too."""
    import subprocess
    import sys

    for index in range(8):
        write_zarr(tmp_path / "in" / f"m{index}.zarr", tensor(np.dtype("uint8"), (2, 3, 128, 128)), (1, 3, 32, 32))
    process = subprocess.Popen([sys.executable, "-m", "geomcli", "crop-pad", f"{tmp_path}/in/*.zarr", "--out-dir",
                                f"{s3.url}/out", "--shape", "2,3,128,128", *workers, "-q"],
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 90
    while sum(key.endswith("zarr.json") for key in s3.keys()) < 3:
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.01)
    group = "--scheduler" in workers
    for number in (signal.SIGSTOP, sent, signal.SIGCONT):
        if group:
            os.killpg(process.pid, number)
        else:
            process.send_signal(number)
    stderr = process.communicate(timeout=60)[1]
    assert process.returncode == (-sent if sent == signal.SIGINT else 128 + sent), stderr  # Ctrl-C: by SIGINT
    assert "Traceback" not in stderr
    arrays = {key.split("/")[1] for key in s3.keys()}
    assert len(arrays) < 8, "the run ended before the signal"
    for name in arrays:
        assert json.loads(s3.get(f"out/{name}/zarr.json"))["attributes"]["geomcli"] == {"complete": True}, name
        assert np.array_equal(s3_zarr(s3, f"out/{name}")[...], read_zarr(tmp_path / "in" / name)[...])


@pytest.mark.parametrize("flag", ["-n", "--skip-existing"])
@pytest.mark.parametrize("on_s3", [False, True], ids=["local", "s3"])
def test_no_clobber_and_skip_existing_do_again_an_output_left_incomplete(flag: str, on_s3: bool, tmp_path: Path,
                                                                       request: pytest.FixtureRequest) -> None:
    """An output array a stopped run left marked incomplete (geomcli refuses to read it) does not
    count as existing: -n and --skip-existing do it again, and replace it; the whole one is skipped."""
    data = tensor(np.dtype("uint8"), (1, 3, 8, 8))
    for name in ["a", "b"]:
        write_zarr(tmp_path / "in" / f"{name}.zarr", data, (1, 3, 4, 4))
    backdate(tmp_path / "in", 10)  # S3 tells modified times in whole seconds: no input in the output's second
    s3: S3 | None = request.getfixturevalue("s3") if on_s3 else None
    out = f"{s3.url}/out" if s3 is not None else str(tmp_path / "out")
    args = ["crop-pad", f"{tmp_path}/in/*.zarr", "--out-dir", out, "--shape", "1,3,6,6"]
    assert run(*args, "-q").exit_code == 0
    left = s3_zarr(s3, "out/b.zarr", "r+") if s3 is not None else zarr.open_array(f"{out}/b.zarr", mode="r+")
    left.attrs["geomcli"] = {"complete": False}  # as a stopped run leaves it
    assert "an incomplete output" in run("crop-pad", f"{out}/b.zarr", "-o", tmp_path / "x.zarr", "--shape",
                                         "1,3,4,4").stderr
    result = run(*args, flag)
    assert result.exit_code == 0, result.stderr
    assert "crop-pad: 1 ok, 0 failed, 1 skipped" in result.stderr
    again = s3_zarr(s3, "out/b.zarr") if s3 is not None else read_zarr(f"{out}/b.zarr")
    assert again.attrs["geomcli"] == {"complete": True}
    assert np.array_equal(again[...], crop_ops.center_crop_pad(data, [1, 3, 6, 6]))


@pytest.mark.parametrize("on_s3", [False, True], ids=["local", "s3"])
def test_the_incomplete_marker_is_read_no_further_than_zarr_metadata_is(on_s3: bool, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       request: pytest.FixtureRequest) -> None:
    """-n and --skip-existing read an existing output's zarr.json for the marker: one past
    METADATA_BYTES (as a zarr input's is refused) was read whole, a huge object on S3 all of it.
    It is now read a byte past the bound and taken for no marker (not ours to redo); one within it
    is read as before. (The bound is made small here: the same padded file on either side of it.)"""
    from geomcli.io import _zarr, _zarr_store

    monkeypatch.setattr(_zarr_store, "METADATA_BYTES", 4096)
    marked = json.dumps({"zarr_format": 3, "node_type": "array", "attributes": {"geomcli": {"complete": False}}})
    s3: S3 | None = request.getfixturevalue("s3") if on_s3 else None
    for name, size in (("within", 4096), ("past", 4097)):
        text = marked.ljust(size).encode()
        if s3 is not None:
            path = s3.put(f"out/{name}.zarr/zarr.json", text).removesuffix("/zarr.json")
        else:
            (tmp_path / f"{name}.zarr").mkdir()
            (tmp_path / f"{name}.zarr" / "zarr.json").write_bytes(text)
            path = str(tmp_path / f"{name}.zarr")
        assert _zarr.incomplete(path) is (name == "within"), name


def test_skip_existing_does_again_a_local_zarr_input_updated_in_place(tmp_path: Path) -> None:
    """A chunk written in place changes its file, not the array's folder nor its zarr.json: the
    array's modified time is its newest file's or folder's."""
    data = tensor(np.dtype("uint8"), (1, 3, 8, 8))
    for name in ["a", "b"]:
        write_zarr(tmp_path / "in" / f"{name}.zarr", data, (1, 3, 4, 4))
    args = ["crop-pad", f"{tmp_path}/in/*.zarr", "--out-dir", tmp_path / "out", "--shape", "1,3,6,6"]
    assert run(*args, "-q").exit_code == 0
    backdate(tmp_path / "in", 20)
    backdate(tmp_path / "out", 10)
    assert "crop-pad: 0 ok, 0 failed, 2 skipped" in run(*args, "--skip-existing").stderr
    zarr.open_array(str(tmp_path / "in" / "b.zarr"), mode="r+")[0, 0, 2:4, 2:4] = 99
    result = run(*args, "--skip-existing")
    assert result.exit_code == 0, result.stderr
    assert "crop-pad: 1 ok, 0 failed, 1 skipped" in result.stderr
    assert (read_zarr(tmp_path / "out" / "b.zarr")[0, 0, 1:3, 1:3] == 99).all()


def test_skip_existing_takes_a_folder_that_is_no_array_for_no_zarr_output(tmp_path: Path) -> None:
    """A folder of someone's files at a .zarr output's name, newer than the input, was skipped as
    up to date (exit 0) where the run without --skip-existing refused to replace it (exit 1); an
    empty one was kept, where it is replaced."""
    np.save(tmp_path / "a.npy", tensor(np.dtype("uint8"), (1, 3, 8, 8)))
    (tmp_path / "out" / "a.zarr").mkdir(parents=True)
    (tmp_path / "out" / "a.zarr" / "notes.txt").write_text("mine")
    args = ["crop-pad", tmp_path / "a.npy", "--out-dir", tmp_path / "out", "--name", "{stem}.zarr",
            "--shape", "1,3,4,4", "--skip-existing"]
    then = time.time() - 10
    os.utime(tmp_path / "a.npy", (then, then))
    result = run(*args)
    assert result.exit_code == 1 and "a folder that is no zarr array (no zarr.json) is there" in result.stderr
    assert os.listdir(tmp_path / "out" / "a.zarr") == ["notes.txt"]
    (tmp_path / "out" / "a.zarr" / "notes.txt").unlink()
    assert run(*args, "-q").exit_code == 0
    assert read_zarr(tmp_path / "out" / "a.zarr").shape == (1, 3, 4, 4)
    assert "0 ok, 0 failed, 1 skipped" in run(*args).stderr  # the array it wrote is one


def test_a_piped_input_is_read_once_and_written_chunk_by_chunk(tmp_path: Path) -> None:
    """stdin, a FIFO and process substitution have no chunks and can be read once: read whole
    (within --max-pixels), its header judged from what was read, then written chunk by chunk."""
    import io as bytes_io
    import subprocess
    import sys

    from conftest import fifo_feeding

    data = tensor(np.dtype("float32"), (2, 3, 10, 12))
    buffer = bytes_io.BytesIO()
    np.save(buffer, data)
    expected = resize_ops.resize(data, scales=(1, 1, 0.5, 0.5))
    result = CliRunner().invoke(cli, ["resize", "-", "-o", str(tmp_path / "stdin.zarr"), "--scales", "1,1,0.5,0.5"],
                                input=buffer.getvalue(), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert "resize <stdin> → " in result.stderr and "chunk by chunk: 1 output chunk(s)" in result.stderr
    np.testing.assert_array_equal(read_zarr(tmp_path / "stdin.zarr")[...], expected)
    with fifo_feeding(tmp_path / "ff.npy", buffer.getvalue()) as fifo:
        assert run("chain", "-i", fifo, "-o", tmp_path / "fifo.zarr", "-q", "resize", "--scales",
                   "1,1,0.5,0.5").exit_code == 0
    np.testing.assert_array_equal(read_zarr(tmp_path / "fifo.zarr")[...], expected)
    np.save(tmp_path / "r.npy", data)
    command = f"{sys.executable} -m geomcli resize <(cat r.npy) -o sub.zarr --scales 1,1,0.5,0.5 -q"
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(read_zarr(tmp_path / "sub.zarr")[...], expected)
    # as to .npy: more than --max-pixels is the file's failure, a fault of the options exit 2; nothing written
    result = CliRunner().invoke(cli, ["resize", "-", "-o", str(tmp_path / "big.zarr"), "--scales", "1,1,0.5,0.5",
                                      "--max-pixels", "100"], input=buffer.getvalue(), catch_exceptions=False)
    assert (result.exit_code, result.stderr.splitlines()[-1]) == (
        1, "Error: <stdin>: 720 elements exceed the limit of 100; raise it with --max-pixels or GEOMCLI_MAX_PIXELS")
    result = CliRunner().invoke(cli, ["space-to-depth", "-", "-o", str(tmp_path / "s2d.zarr"), "--blocksize", "7"],
                                input=buffer.getvalue(), catch_exceptions=False)
    assert (result.exit_code, result.stderr.splitlines()[-1]) == (
        2, "Error: <stdin>: space_to_depth: height 10 is not divisible by blocksize 7 (input shape (2, 3, 10, 12))")
    assert not (tmp_path / "big.zarr").exists() and not (tmp_path / "s2d.zarr").exists()


@pytest.mark.parametrize("command", [["resize", "--scales", "1,1,0.5,0.5"], ["warp", "--rotate", "10"]])
def test_what_a_task_holds_over_max_pixels_is_found_with_the_headers(command: list[str], tmp_path: Path) -> None:
    """A task of whole planes past --max-pixels is known from the chunks alone: --dry-run reports
    it and the run refuses it before anything is written (exit 2), as an .npy's output over it."""
    write_zarr(tmp_path / "in" / "r.zarr", tensor(np.dtype("float32"), (2, 3, 50, 70)), (1, 2, 16, 16))
    write_zarr(tmp_path / "in" / "small.zarr", tensor(np.dtype("float32"), (1, 1, 10, 10)), (1, 1, 10, 10))
    line = (f"Error: {tmp_path / 'in' / 'r.zarr'}: a task's whole planes (1, 2, 50, 70): 7000 elements exceed the "
            "limit of 3000; raise it with --max-pixels or GEOMCLI_MAX_PIXELS")
    for flags in [["--dry-run"], []]:
        result = run(command[0], f"{tmp_path}/in/*.zarr", "--out-dir", tmp_path / "out", *command[1:],
                     "--max-pixels", "3000", *flags)
        assert result.exit_code == 2, flags
        assert line in result.stderr.splitlines(), flags
        assert result.stderr.splitlines()[-1] == ("Error: 1 of 2 inputs cannot take these options (each named "
                                                  "above); nothing was written")
        assert not (tmp_path / "out").exists()
    result = run(command[0], tmp_path / "in" / "r.zarr", "-o", tmp_path / "one.zarr", *command[1:],
                 "--max-pixels", "3000")
    assert (result.exit_code, result.stderr.splitlines()[-1]) == (2, line)
    assert not (tmp_path / "one.zarr").exists()


@pytest.mark.parametrize("suffix", [".npy", ".tif"])
def test_a_file_to_zarr_whose_tasks_exceed_max_pixels_is_refused_with_the_headers(suffix: str,
                                                                                  tmp_path: Path) -> None:
    """A .npy (a memory map) and a tiled TIFF are read chunk by chunk as stored: their tasks are
    known before anything is read, as a zarr's are (the run found them: exit 1, after the plan
    and --dry-run had said "1 to write")."""
    import tifffile

    data = tensor(np.dtype("float32"), (3, 60, 80))
    source = tmp_path / f"in{suffix}"
    if suffix == ".npy":
        np.save(source, data)
    else:
        tifffile.imwrite(source, data, tile=(16, 16), photometric="minisblack", metadata={"axes": "CYX"})
    for flags in [["--dry-run"], []]:
        result = run("warp", source, "--out-dir", tmp_path / "out", "--name", "{stem}.zarr", "--rotate", "10",
                     "--layout", "CHW", "--max-pixels", "3000", *flags)
        assert result.exit_code == 2, (flags, result.stderr)
        assert f"Error: {source}: a task's whole planes" in result.stderr
        assert not (tmp_path / "out").exists()
    one = ["warp", source, "-o", tmp_path / "one.zarr", "--rotate", "10", "--layout", "CHW"]
    assert run(*one, "--max-pixels", "3000").exit_code == 2
    assert run(*one, "-q").exit_code == 0


def test_a_dtype_zarr_cannot_hold_is_refused_from_the_header(tmp_path: Path) -> None:
    """zarr has no bfloat16: refused as the other formats' dtypes are, naming the output (it read
    'cannot write a zarr array' naming the hidden temporary array, after the work)."""
    from geomcli import io

    io.write_array(np.ones((1, 3, 8, 8), ml_dtypes.bfloat16), str(tmp_path / "b.npy"))
    result = run("crop-pad", tmp_path / "b.npy", "-o", tmp_path / "b.zarr", "--shape", "1,3,4,4")
    assert result.exit_code == 2
    assert f"Error: {tmp_path / 'b.zarr'}: ZARR cannot hold bfloat16 data; write .npy\n" in result.stderr
    result = run("affine-grid", "--size", "1,3,8,8", "--dtype", "bfloat16", "-o", tmp_path / "g.zarr")
    assert result.exit_code == 2  # what the options ask, as crop-pad's
    assert result.stderr == f"Error: {tmp_path / 'g.zarr'}: ZARR cannot hold bfloat16 data; write .npy\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["b.npy"]


def test_a_grid_or_theta_zarr_with_a_bad_chunk_is_one_error_line(tmp_path: Path) -> None:
    assert run("affine-grid", "--size", "1,3,8,8", "-o", tmp_path / "g.zarr", "-q").exit_code == 0
    next(path for path in (tmp_path / "g.zarr").rglob("*") if path.is_file() and path.name != "zarr.json"
         ).write_bytes(b"not zstd")
    np.save(tmp_path / "t.npy", np.zeros((1, 3, 8, 8), np.float32))
    for command, option in (("grid-sample", "--grid"), ("warp", "--theta")):
        result = run(command, tmp_path / "t.npy", option, tmp_path / "g.zarr", "-o", tmp_path / "x.npy")
        assert result.exit_code == 1  # it was a traceback of numcodecs' RuntimeError
        assert result.stderr.startswith(f"Error: {tmp_path / 'g.zarr'}: a chunk could not be read (")
        assert len(result.stderr.splitlines()) == 1


def test_a_shard_past_max_pixels_is_read_by_its_chunks(tmp_path: Path) -> None:
    """A task per shard only where a shard fits --max-pixels: else per chunk, as before shards were
    read whole (a review's 256×256 shards of 32×32 chunks were refused at --max-pixels 20000)."""
    data = np.arange(512 * 512, dtype=np.float32).reshape(512, 512)
    array = zarr.create_array(str(tmp_path / "in.zarr"), shape=data.shape, dtype=data.dtype, chunks=(32, 32),
                              shards=(256, 256))
    array[...] = data
    result = run("crop-pad", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--shape", "300,300",
                 "--max-pixels", "20000", "-q")
    assert result.exit_code == 0, result.stderr
    assert read_zarr(tmp_path / "out.zarr")[...].tobytes() == crop_ops.center_crop_pad(data, [300, 300]).tobytes()


def test_a_full_disk_under_a_batch_s_zarr_outputs_names_each_output(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk's write failing (ENOSPC) is the line of the output it was for, and leaves nothing:
    it was `Error: [Errno 28] No space left on device`, naming no file, once per file of a batch."""
    from zarr.storage import _local

    for name in ("a", "b"):
        np.save(tmp_path / f"{name}.npy", tensor(np.dtype("float32"), (1, 4, 8, 8)))

    def full(path: Path, value: Any, exclusive: bool = False) -> int:
        if "/c/" in str(path):  # the chunks; the metadata fits
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return put(path, value, exclusive)

    put = _local._put
    monkeypatch.setattr(_local, "_put", full)
    out = tmp_path / "out"
    result = run("space-to-depth", tmp_path / "a.npy", tmp_path / "b.npy", "--out-dir", out, "--name", "{stem}.zarr",
                 "--blocksize", "2", "-j", "1")
    assert result.exit_code == 1
    assert [line for line in result.stderr.splitlines() if line.startswith("Error:")] == [
        f"Error: {out / name}.zarr: cannot write (No space left on device)" for name in ("a", "b")]
    assert not out.exists()  # nothing written: the folder made for it taken away


@pytest.mark.parametrize("failing", ["read", "write"])
def test_a_chunk_s_os_error_names_the_file_that_failed(failing: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An input chunk's read names that chunk (it was blamed on the output: `out.zarr: cannot
    write (Input/output error)`); an output chunk's write, which names the hidden staging folder,
    names the output."""
    from zarr.storage import _local

    write_zarr(tmp_path / "in.zarr", tensor(np.dtype("float32"), (2, 4, 8, 8)), (1, 4, 8, 8))
    get, put = _local._get, _local._put

    def broken_get(path: Path, *args: Any, **kwargs: Any) -> Any:
        if "in.zarr/c/1" in str(path):
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))
        return get(path, *args, **kwargs)

    def broken_put(path: Path, *args: Any, **kwargs: Any) -> Any:
        if "/c/" in str(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return put(path, *args, **kwargs)

    if failing == "read":
        monkeypatch.setattr(_local, "_get", broken_get)
    else:
        monkeypatch.setattr(_local, "_put", broken_put)
    result = run("space-to-depth", tmp_path / "in.zarr", "-o", tmp_path / "out.zarr", "--blocksize", "2")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0].startswith(
        f"Error: {tmp_path / 'in.zarr'}/c/1/" if failing == "read" else
        f"Error: {tmp_path / 'out.zarr'}: cannot write (No space left on device)")
    assert sorted(os.listdir(tmp_path)) == ["in.zarr"]


def test_a_folder_that_is_no_zarr_array_is_not_replaced_by_a_zarr_output(tmp_path: Path) -> None:
    """A folder named like the output, holding files but no zarr metadata, was replaced: removed
    with everything in it. It fails that file now; an empty folder is still replaced."""
    np.save(tmp_path / "in.npy", tensor(np.dtype("float32"), (1, 4, 8, 8)))
    (tmp_path / "out.zarr" / "notes").mkdir(parents=True)
    (tmp_path / "out.zarr" / "notes" / "thesis.txt").write_text("years of work")
    (tmp_path / "empty.zarr").mkdir()
    result = run("space-to-depth", tmp_path / "in.npy", "-o", tmp_path / "out.zarr", "--blocksize", "2")
    assert result.exit_code == 1
    assert result.stderr == (f"Error: {tmp_path / 'out.zarr'}: a folder that is no zarr array (no zarr.json) is "
                             "there; it is not replaced: move it, or write elsewhere\n")
    assert (tmp_path / "out.zarr" / "notes" / "thesis.txt").read_text() == "years of work"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["empty.zarr", "in.npy", "out.zarr"]
    assert run("space-to-depth", tmp_path / "in.npy", "-o", tmp_path / "empty.zarr", "--blocksize", "2",
               "-q").exit_code == 0
    assert read_zarr(tmp_path / "empty.zarr").shape == (1, 16, 4, 4)


def test_a_zarr_output_that_cannot_be_made_is_named_not_its_staging_folder(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only file system: it was `Error: /abs/.out.zarr.geomcli-1a2b3c4d: cannot write a zarr
    array ([Errno 30] Read-only file system: '/abs/.out.zarr.geomcli-1a2b3c4d')`."""
    from zarr.storage import _local

    def read_only(path: Path, value: Any, exclusive: bool = False) -> int:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    np.save(tmp_path / "in.npy", tensor(np.dtype("float32"), (1, 4, 8, 8)))
    monkeypatch.setattr(_local, "_put", read_only)
    result = run("space-to-depth", tmp_path / "in.npy", "-o", tmp_path / "out.zarr", "--blocksize", "2")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {tmp_path / 'out.zarr'}: cannot write a zarr array (Read-only file system)\n"
    assert os.listdir(tmp_path) == ["in.npy"]


def test_a_tiff_cut_short_to_a_zarr_output_is_the_files_failure_not_the_options(tmp_path: Path) -> None:
    """Read to judge a chunked job's tasks, a truncated TIFF (its header whole) was a usage fault:
    in a batch "1 of 2 inputs cannot take these options (each named above); nothing was written"
    (exit 2, the good file not done), for -o exit 2, and --dry-run the same. It is the file's
    failure: exit 1, the other files done, the dry run counting it failed."""
    import tifffile

    data = tensor(np.dtype("uint8"), (16, 20))
    good, cut = tmp_path / "good.tif", tmp_path / "cut.tif"
    tifffile.imwrite(good, data, photometric="minisblack")
    cut.write_bytes(good.read_bytes()[:-100])
    said = f"Error: {cut}: not a readable TIFF (truncated)"
    batch = run("crop-pad", cut, good, "--out-dir", tmp_path / "out", "--name", "{stem}.zarr", "--shape", "8,8",
                "-j", "1")
    assert batch.exit_code == 1, batch.stderr
    assert batch.stderr.splitlines()[0] == said
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["good.zarr"]
    assert np.array_equal(read_zarr(tmp_path / "out" / "good.zarr")[...], data[4:12, 6:14])
    one = run("crop-pad", cut, "-o", tmp_path / "one.zarr", "--shape", "8,8")
    assert (one.exit_code, one.stderr.splitlines()) == (1, [said])
    assert not (tmp_path / "one.zarr").exists()
    dry = run("crop-pad", cut, good, "--out-dir", tmp_path / "dry", "--name", "{stem}.zarr", "--shape", "8,8",
              "--dry-run")
    assert dry.exit_code == 1 and said in dry.stderr and "1 to write, 1 failed" in dry.stderr, dry.stderr


@pytest.mark.parametrize("missing", ["dask.array", "zarr"])
def test_without_the_dask_extra_a_zarr_job_says_what_to_install(missing: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # 'geomcli space-to-depth samples/tensor.npy -o blocks.zarr' after a plain 'pip install .'
    # ended in ModuleNotFoundError's traceback (exit 1), in a batch too
    import sys

    np.save(tmp_path / "t.npy", np.zeros((1, 2, 4, 4), np.float32))
    monkeypatch.setitem(sys.modules, missing, None)  # its import raises ImportError
    said = ("zarr arrays are read and written by zarr" if missing == "zarr" else
            "zarr arrays are done chunk by chunk by Dask") + ", which is not installed: pip install 'geomcli[dask]'\n"
    result = run("space-to-depth", tmp_path / "t.npy", "-o", tmp_path / "t.zarr", "--blocksize", "2")
    assert result.exit_code == 2 and result.stderr == f"Error: .{said}"
    result = run("space-to-depth", tmp_path / "t.npy", "--out-dir", tmp_path / "out", "--name", "{stem}.zarr",
                 "--blocksize", "2")
    assert result.exit_code == 2 and f"Error: .{said}" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["t.npy"]


@pytest.mark.parametrize("source, output", [("in.png", "out.zarr"), ("in.zarr", "out.npy")],
                         ids=["to-zarr", "from-zarr"])
def test_options_a_chunked_job_does_not_use_are_said_ignored(tmp_path: Path, source: str, output: str) -> None:
    """--quality, --subsampling, --compress-level and --page went unsaid on a job read or written chunk
    by chunk, where the same options on a file read whole each give a Warning and a record's warning."""
    from PIL import Image

    data = np.arange(6 * 8 * 3, dtype=np.uint8).reshape(6, 8, 3)
    if source.endswith(".png"):
        Image.fromarray(data).save(tmp_path / source)
    else:
        write_zarr(tmp_path / source, data, (3, 4, 3), ["y", "x", "c"])
    result = run("crop-pad", tmp_path / source, "-o", tmp_path / output, "--shape", "4,4", "--quality", "50",
                 "--subsampling", "4:4:4", "--compress-level", "2", "--page", "1", "--json")
    assert result.exit_code == 0, result.stderr
    kind, read = output.removeprefix("out.").upper(), source.removeprefix("in.").upper()
    said = [f"--quality is for JPEG and WebP output, not {kind}; ignored",
            f"--subsampling is for JPEG output, not {kind}; ignored",
            f"--compress-level is for PNG output, not {kind}; ignored",
            f"--page is for TIFF input, not {read}; ignored"]
    assert json.loads(result.stdout)["warnings"] == said
    result = run("crop-pad", tmp_path / source, "-o", tmp_path / output, "--shape", "4,4", "--quality", "50",
                 "--subsampling", "4:4:4", "--compress-level", "2", "--page", "1")
    assert [line for line in result.stderr.splitlines() if line.startswith("Warning:")] == [
        *(f"Warning: {tmp_path / output}: {text}" for text in said[:3]), f"Warning: {tmp_path / source}: {said[3]}"]


def test_a_tiff_page_to_zarr_is_that_page(tmp_path: Path) -> None:
    """--page went unheeded where a TIFF was read tile by tile for a .zarr output: 'crop-pad stack.tiff
    -o out.zarr --page 1' cropped every page (4x4x4, where -o out.npy gives 4x4), the dry run's
    4x4 beside it."""
    import tifffile

    pages = np.arange(4 * 32 * 48, dtype=np.uint16).reshape(4, 32, 48)
    tifffile.imwrite(tmp_path / "stack.tiff", pages, photometric="minisblack")
    result = run("crop-pad", tmp_path / "stack.tiff", "-o", tmp_path / "out.zarr", "--shape", "4,4", "--page", "1")
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(read_zarr(tmp_path / "out.zarr")[...], pages[1, 14:18, 22:26])


@pytest.mark.parametrize("tiles", [None, (16, 16)], ids=["strips", "tiles"])
def test_a_tiff_page_to_zarr_is_read_by_its_strips_or_tiles(tmp_path: Path, tiles: tuple[int, int] | None) -> None:
    """--page read the page whole for a .zarr output, where a TIFF of that one page is read by its
    strips or tiles: a page past --max-pixels was refused ('40000 elements exceed the limit of
    5000', exit 1) that the same page alone in its file is done with."""
    import tifffile

    pages = np.arange(3 * 200 * 200, dtype=np.uint32).astype(np.uint8).reshape(3, 200, 200)
    layout = {"rowsperstrip": 16} if tiles is None else {"tile": tiles}
    tifffile.imwrite(tmp_path / "stack.tif", pages, photometric="minisblack", compression="zlib", **layout)
    tifffile.imwrite(tmp_path / "alone.tif", pages[1], photometric="minisblack", compression="zlib", **layout)
    outputs = []
    for source, page in (("alone.tif", []), ("stack.tif", ["--page", "1"])):
        output = tmp_path / f"{source}.zarr"
        result = run("crop-pad", tmp_path / source, "-o", output, "--shape", "30,210", "--max-pixels", "5000", *page)
        assert result.exit_code == 0, result.stderr
        outputs.append(read_zarr(output))
    assert np.array_equal(outputs[1][...], crop_ops.center_crop_pad(pages[1], [30, 210]))
    assert outputs[1].chunks == outputs[0].chunks  # (the page is read as the file of that page alone)


@pytest.mark.parametrize("suffix", [".zarr", ".npy"])
def test_ome_tiff_sizes_no_ome_zarr_scale_takes_are_named_where_dropped(tmp_path: Path, suffix: str) -> None:
    """An OME-TIFF's PhysicalSizeX in a unit NGFF names none for ('pixel', 'reference frame')
    becomes no OME-Zarr scale: 'crop-pad in.ome.tif -o out.zarr' wrote a plain array and said
    nothing of the sizes, where sizes in micrometres are carried or named."""
    import tifffile

    source = tmp_path / "in.ome.tif"
    tifffile.imwrite(source, np.zeros((2, 8, 8), np.uint8), ome=True, metadata={
        "axes": "ZYX", "PhysicalSizeX": 0.5, "PhysicalSizeXUnit": "pixel"})
    result = run("crop-pad", source, "-o", tmp_path / f"out{suffix}", "--shape", "4,4", "--json", "-q")
    assert result.exit_code == 0, result.stderr
    assert "OME physical sizes" in json.loads(result.stdout)["dropped"]


_ABOUT_Z = "0.8660254,-0.5,0,0,0.5,0.8660254,0,0,0,0,1,0"  # x' = cos x - sin y, y' = sin x + cos y, z' = z


@pytest.mark.parametrize(("source", "theta", "scale", "said", "z_at"), [
    ("in.zarr", _ABOUT_Z, [2.0, 1.0, 1.0], "y 0.5 micrometer, x 0.25 micrometer", None),
    ("in.zarr", "0.8660254,0,-0.5,0,0,1,0,0,0.5,0,0.8660254,0", [1.0, 0.5, 1.0], "z 2 micrometer, x 0.25 micrometer",
     None),
    # z moved by half its extent (shift 0.5 of [-1, 1]: 1 plane of 2 micrometres), its size kept
    ("in.zarr", "0.8660254,-0.5,0,0,0.5,0.8660254,0,0,0,0,1,0.5", [2.0, 1.0, 1.0],
     "y 0.5 micrometer, x 0.25 micrometer", 2.0),
    # z scaled by 2 about its centre: planes of 4 micrometres, the first sampled at input plane -1.5 (-3 micrometres)
    ("in.zarr", "0.8660254,-0.5,0,0,0.5,0.8660254,0,0,0,0,2,0", [4.0, 1.0, 1.0],
     "y 0.5 micrometer, x 0.25 micrometer", -3.0),
    ("in.ome.tif", _ABOUT_Z, [2.0, 1.0, 1.0], "y 0.5 micrometer, x 0.25 micrometer", None),
    ("ij.tif", _ABOUT_Z, [2.0, 1.0, 1.0], "y 0.5 micrometer, x 0.25 micrometer", None),
], ids=["zarr-about-z", "zarr-about-y", "zarr-about-z-moved", "zarr-about-z-scaled", "ome-tiff-about-z",
        "imagej-about-z"])
def test_a_volume_turn_keeps_the_size_of_the_axis_it_leaves_alone(tmp_path: Path, source: str, theta: str,
                                                                  scale: list[float], said: str,
                                                                  z_at: float | None) -> None:
    """'warp zyx.zarr -o o.zarr --volume --theta <a turn about z>' dropped z's size with y's and x's,
    though z's positions are untouched: a turn keeps the size of an axis whose row and column of
    theta it leaves alone, as a plane's rotation keeps z's; one that also scales or shifts z (its
    axis still its own) dropped it too, where its size and position follow theta as a pure scale's do."""
    import tifffile

    data = np.zeros((4, 8, 8), np.uint16)
    axes = [{"name": name, "type": "space", "unit": "micrometer"} for name in "zyx"]
    if source == "in.zarr":
        ome_group(tmp_path / source, data, axes, [{"type": "scale", "scale": [2.0, 0.5, 0.25]}])
    elif source == "in.ome.tif":
        tifffile.imwrite(tmp_path / source, data, ome=True, metadata={
            "axes": "ZYX", "PhysicalSizeZ": 2.0, "PhysicalSizeY": 0.5, "PhysicalSizeX": 0.25})
    else:
        tifffile.imwrite(tmp_path / source, data, imagej=True, resolution=(4.0, 2.0),
                         metadata={"axes": "ZYX", "spacing": 2.0, "unit": "um"})
    result = run("warp", tmp_path / source, "-o", tmp_path / "out.zarr", "--volume", "--theta", theta, "--json")
    assert result.exit_code == 0, result.stderr
    image = written_image(tmp_path / "out.zarr")
    transforms = image["datasets"][0]["coordinateTransformations"]
    assert transforms[0] == {"type": "scale", "scale": scale}
    assert [axis.get("unit") for axis in image["axes"]] == [None if size == 1.0 else "micrometer" for size in scale]
    assert transforms[1:] == ([] if z_at is None else [{"type": "translation", "translation": [z_at, 0.0, 0.0]}])
    warnings = json.loads(result.stdout)["warnings"]
    assert [line for line in warnings if "physical pixel sizes" in line] == [
        f"the physical pixel sizes ({said}) cannot be carried through warp, whose pixels have no size per axis (a "
        "grid, a rotation or shear); dropped"]


def test_a_rotation_that_drops_the_pixel_sizes_notes_no_new_ones(tmp_path: Path) -> None:
    """'warp yx.zarr -o o.zarr --rotate 30' of scale 0.5 micrometer warned that the physical pixel
    sizes were dropped, and noted 'pixel size y 0.5 → 1 µm, x 0.5 → 1 µm': the scale 1 of no unit
    left in their place, read as micrometres. No size is noted where its unit went with it."""
    axes = [{"name": name, "type": "space", "unit": "micrometer"} for name in "yx"]
    ome_group(tmp_path / "yx.zarr", np.zeros((16, 16), np.uint8), axes, [{"type": "scale", "scale": [0.5, 0.5]}])
    result = run("warp", tmp_path / "yx.zarr", "-o", tmp_path / "o.zarr", "--rotate", "30", "--json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["warnings"] == ["the physical pixel sizes (y 0.5 micrometer, x 0.5 micrometer) cannot be carried "
                                  "through warp, whose pixels have no size per axis (a grid, a rotation or shear); "
                                  "dropped"]
    assert not [note for note in record["notes"] if note.startswith("pixel size")], record["notes"]
    scaled = run("resize", tmp_path / "yx.zarr", "-o", tmp_path / "r.zarr", "--scales", "0.5,0.5", "--json")
    assert "pixel size y 0.5 → 1 µm, x 0.5 → 1 µm" in json.loads(scaled.stdout)["notes"]  # (kept, and said)


def _stack(path: Path, kind: str) -> None:
    """A z-stack of 0.25 um pixels 0.5 um apart: an ImageJ ZCYX (or, of no unit, ZYX) or OME ZYX TIFF,
    or an OME-Zarr's zyx placed at (1, 2, 3)."""
    import tifffile

    data = np.zeros((3, 2, 16, 16) if kind == "imagej" else (3, 16, 16), np.uint16)
    if kind in ("imagej", "imagej-no-unit"):
        unit = {"unit": "um"} if kind == "imagej" else {}
        tifffile.imwrite(path, data, imagej=True, resolution=(4.0, 4.0),
                         metadata={"axes": "ZCYX" if kind == "imagej" else "ZYX", "spacing": 0.5, **unit})
    elif kind == "ome":
        tifffile.imwrite(path, data, ome=True, metadata={"axes": "ZYX", "PhysicalSizeX": 0.25, "PhysicalSizeY": 0.25,
                                                         "PhysicalSizeZ": 0.5})
    else:
        ome_group(path, data, [{"name": name, "type": "space", "unit": "micrometer"} for name in "zyx"],
                  [{"type": "scale", "scale": [0.5, 0.25, 0.25]}, {"type": "translation", "translation": [1, 2, 3]}])


@pytest.mark.parametrize(("kind", "name", "args", "output"), [
    ("imagej", "in.tif", ["crop-pad", "--shape", "8,8"], "{stem}.zarr"),  # sizes of ZCYX no OME-Zarr scale takes
    ("imagej-no-unit", "in.tif", ["crop-pad", "--shape", "8,8"], "{stem}.zarr"),  # named as dropped
    ("ome", "in.ome.tif", ["warp", "--rotate", "30"], "{stem}.zarr"),  # y's and x's sizes through a rotation
    ("zarr", "in.zarr", ["warp", "--rotate", "30"], "{stem}.zarr"),  # and the translation along them
    ("zarr", "in.zarr", ["warp", "--rotate", "30"], "{stem}.tif"),
    ("zarr", "in.zarr", ["crop-pad", "--shape", "8,8"], "{stem}.npy"),  # named as dropped
])
def test_a_dry_run_of_a_chunked_job_says_what_the_run_says_of_the_input_s_metadata(
        tmp_path: Path, kind: str, name: str, args: list[str], output: str) -> None:
    """'crop-pad zcyx.tif --out-dir o --name {stem}.zarr --shape 8,8 --dry-run --json' of an ImageJ
    stack gave warnings [] where the run warns 'zarr cannot hold the physical pixel sizes (z 0.5
    micrometer, ...) of axes ZCYX'; a rotation's dropped sizes and translation, and what a .npy
    names under 'dropped', went unsaid too. A dry run of a chunked job (a zarr on either side) now
    says them as its run does, in its records and on stderr, from the input as stored."""
    source = tmp_path / name
    _stack(source, kind)
    batch = (args[0], source, *args[1:], "--out-dir", tmp_path / "out", "--name", output)
    dry, real = run(*batch, "--dry-run", "--json"), run(*batch, "--json")
    assert dry.exit_code == real.exit_code == 0, (dry.stderr, real.stderr)
    dry_record, record = (json.loads(result.stdout.splitlines()[0]) for result in (dry, real))
    assert record["warnings"] or record.get("dropped")  # (something to say, which the dry run said nothing of)
    assert (dry_record["warnings"], dry_record.get("dropped")) == (record["warnings"], record.get("dropped"))
    said = [line for line in real.stderr.splitlines() if line.startswith("Warning")]
    assert [line for line in dry.stderr.splitlines() if line.startswith("Warning")] == said
