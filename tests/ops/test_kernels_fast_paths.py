"""The kernels' fast paths (blocked, bit-splitting, threaded) against their plain one-copy paths.

The fast paths only take inputs of a few MiB and more, so these tests call the private
helpers directly with tiny block sizes: small odd arrays then cross many block boundaries.
Every comparison is bit for bit (``tobytes``), for every dtype, both modes, b in 1..4 and
1 to 3 threads.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from conftest import ALL_DTYPES, FLOAT_DTYPES, make_array

import geomcli.ops._checks as checks
import geomcli.ops.affine_grid as grid_ops
import geomcli.ops.center_crop_pad as crop_ops
import geomcli.ops.space_depth as space_depth_ops
from geomcli.constants import MAX_THREADS
from geomcli.errors import GeomError

MODES = ["DCR", "CRD"]
# (n, c, h/b, w/b): odd sizes, N > 1 and C >= 2 (DCR and CRD coincide when C == 1).
BLOCK_SHAPES = [(1, 2, 1, 1), (2, 3, 3, 5), (3, 2, 5, 1), (2, 5, 2, 7)]


def same_bits(found: np.ndarray, expected: np.ndarray) -> bool:
    return found.dtype == expected.dtype and found.shape == expected.shape and found.tobytes() == expected.tobytes()


def same_bits_or_both_nan(found: np.ndarray, expected: np.ndarray) -> bool:
    """Bit for bit, except that a NaN may stand for any NaN."""
    if found.dtype != expected.dtype or found.shape != expected.shape:
        return False
    bits = space_depth_ops._UINTS[found.dtype.itemsize]
    both_nan = np.isnan(found.astype(np.float64)) & np.isnan(expected.astype(np.float64))
    return bool(((found.view(bits) == expected.view(bits)) | both_nan).all())


def with_nan_payloads(array: np.ndarray) -> np.ndarray:
    """Float inputs get a few NaNs with odd payloads and -0.0: a bit copy must keep them."""
    if array.dtype.kind != "f" and array.dtype != np.dtype(ml_dtypes.bfloat16):
        return array
    flat = array.reshape(-1)
    bits = flat.view(space_depth_ops._UINTS[array.dtype.itemsize])
    flat[::7] = -0.0
    bits[3::11] = ~np.zeros(1, dtype=bits.dtype)[0] - 5  # an all-ones NaN pattern, minus a little
    return array


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_space_to_depth_blocked_equals_plain(rng: np.random.Generator, dtype: np.dtype) -> None:
    """Every mode, blocksize, odd block shape, thread count and block size (one block of 1 byte,
    a few rows, whole planes) on one dtype: a small grid in one test, not 192 copies of it."""
    grid = itertools.product(MODES, [1, 2, 3, 4], BLOCK_SHAPES, [1, 3], [1, 40, 1 << 20])
    for mode, b, (n, c, hb, wb), threads, block_bytes in grid:
        x = with_nan_payloads(make_array(rng, (n, c, hb * b, wb * b), dtype))
        case = (mode, b, (n, c, hb, wb), threads, block_bytes)
        expected = space_depth_ops._space_to_depth_plain(x, b, mode)  # type: ignore[arg-type]
        found = space_depth_ops._space_to_depth_blocked(x, b, mode, threads, block_bytes)  # type: ignore[arg-type]
        assert same_bits(found, expected), case
        # And the inverse, blocked, gives the input back bit for bit.
        back = space_depth_ops._depth_to_space_blocked(found, b, mode, threads, block_bytes)  # type: ignore[arg-type]
        assert same_bits(back, x), case
        assert same_bits(back, space_depth_ops._depth_to_space_plain(found, b, mode)), case  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("b", [1, 2, 3, 4])
def test_public_kernels_take_the_fast_path_on_large_inputs(
    rng: np.random.Generator, dtype: np.dtype, mode: str, b: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Shrink the thresholds so a small array goes through the blocked, threaded route.
    monkeypatch.setattr(checks, "BLOCK_BYTES", 64)
    monkeypatch.setattr(checks, "PARALLEL_BYTES", 64)
    x = make_array(rng, (2, 3, 4 * b, 3 * b), dtype)
    for threads in (None, 1, 2):
        y = space_depth_ops.space_to_depth(x, b, mode, threads=threads)  # type: ignore[arg-type]
        assert same_bits(y, space_depth_ops._space_to_depth_plain(x, b, mode))  # type: ignore[arg-type]
        assert same_bits(space_depth_ops.depth_to_space(y, b, mode, threads=threads), x)  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", ["float32", "uint8", "bool"])
def test_space_to_depth_fast_path_falls_back_for_views_and_maps(
    rng: np.random.Generator, dtype: str, tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checks, "BLOCK_BYTES", 64)
    x = make_array(rng, (2, 3, 8, 12), np.dtype(dtype))
    expected = space_depth_ops._space_to_depth_plain(x, 2, "DCR")
    # Non-contiguous: every other column of a wider array; reversed rows (negative strides).
    wider = np.zeros((2, 3, 8, 24), dtype=x.dtype)
    wider[..., ::2] = x
    assert same_bits(space_depth_ops.space_to_depth(wider[..., ::2], 2), expected)
    assert same_bits(space_depth_ops.space_to_depth(x[:, :, ::-1][:, :, ::-1], 2), expected)
    # An unaligned buffer: the item starts one byte into a bytes object.
    raw = np.frombuffer(b"\0" + x.tobytes(), dtype=x.dtype, offset=1).reshape(x.shape)
    assert same_bits(space_depth_ops.space_to_depth(raw, 2), expected)
    # A memory map.
    path = str(tmp_path / "x.npy")  # type: ignore[operator]
    np.save(path, x)
    mapped = np.load(path, mmap_mode="r")
    assert same_bits(space_depth_ops.space_to_depth(mapped, 2), expected)


def test_threads_must_be_a_positive_integer() -> None:
    x = np.zeros((1, 1, 2, 2))
    theta = np.zeros((1, 2, 3))
    shape = r" \(input shape \(1, 1, 2, 2\)\)$"
    with pytest.raises(GeomError, match=r"^space_to_depth: threads must be 1 to 1024, found 0" + shape):
        space_depth_ops.space_to_depth(x, 2, threads=0)
    with pytest.raises(GeomError, match=r"^depth_to_space: threads must be an integer, found 1.5 \(input shape "):
        space_depth_ops.depth_to_space(np.zeros((1, 4, 1, 1)), 2, threads=1.5)  # type: ignore[arg-type]
    with pytest.raises(GeomError, match=r"^center_crop_pad: threads must be an integer, found True" + shape):
        crop_ops.center_crop_pad(x, [1, 1, 1, 1], threads=True)
    with pytest.raises(GeomError, match=r"^affine_grid: threads must be 1 to 1024, found -2 \(theta shape \(1, 2, 3"):
        grid_ops.affine_grid(theta, [1, 1, 2, 2], threads=-2)


@pytest.mark.parametrize("threads", [MAX_THREADS + 1, 10**9, 2**70])
def test_threads_past_the_command_lines_limit_are_refused(threads: int) -> None:
    """The kernels took threads=10**9 (--threads stops at 1024): a 512 MiB crop started 487 threads,
    and a bigger one more."""
    from geomcli.ops import grid_sample as sample_ops
    from geomcli.ops import resize as resize_ops

    x = np.zeros((1, 4, 2, 2))
    calls = {
        "space_to_depth": lambda: space_depth_ops.space_to_depth(x, 2, threads=threads),
        "depth_to_space": lambda: space_depth_ops.depth_to_space(x, 2, threads=threads),
        "center_crop_pad": lambda: crop_ops.center_crop_pad(x, [1, 4, 1, 1], threads=threads),
        "affine_grid": lambda: grid_ops.affine_grid(np.zeros((1, 2, 3)), [1, 1, 2, 2], threads=threads),
        "grid_sample": lambda: sample_ops.grid_sample(x, np.zeros((1, 2, 2, 2)), threads=threads),
        "resize": lambda: resize_ops.resize(x, sizes=[1, 4, 3, 3], threads=threads),
    }
    for name, call in calls.items():
        with pytest.raises(GeomError, match=rf"^{name}: threads must be 1 to {MAX_THREADS}, found {threads} \("):
            call()
    assert space_depth_ops.space_to_depth(x, 2, threads=MAX_THREADS).shape == (1, 16, 1, 1)


def test_every_cpu_is_at_most_the_limit_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """threads=None, every CPU this process may run on, is at most 1024 too, as each kernel's
    docstring says: on a machine of 4096 CPUs it was 4096 (b51b5ad capped only a count given)."""
    from geomcli.ops import _checks

    monkeypatch.setattr(_checks, "available_cpus", lambda: 4096)
    assert _checks.as_threads(None, "resize", "input shape (2, 2)") == MAX_THREADS
    monkeypatch.setattr(_checks, "available_cpus", lambda: 3)
    assert _checks.as_threads(None, "resize", "input shape (2, 2)") == 3


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(
    ("in_shape", "shape", "axes"),
    [
        ((5, 7, 3), [3, 4], [0, 1]),  # crop only: np.empty
        ((5, 7, 3), [8, 4], [0, 1]),  # pad one axis, crop the other
        ((2, 3, 5, 4), [7, 9], [2, 3]),  # pad both
        ((2, 3, 5, 4), [2, 3, 1, 6], None),
        ((), [], None),  # rank 0
    ],
)
def test_center_crop_pad_threaded_equals_single(
    rng: np.random.Generator,
    dtype: np.dtype,
    threads: int,
    in_shape: tuple[int, ...],
    shape: list[int],
    axes: list[int] | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = np.asarray(make_array(rng, in_shape, dtype), dtype=dtype)
    expected = crop_ops.center_crop_pad(x, shape, axes, threads=1)
    monkeypatch.setattr(checks, "PARALLEL_BYTES", 1)
    assert same_bits(crop_ops.center_crop_pad(x, shape, axes, threads=threads), expected)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [[2, 1, 5, 7], [3, 2, 1, 1], [2, 1, 4, 1, 6], [1, 1, 3, 2, 5]], ids=str)
@pytest.mark.parametrize("threads", [2, 3, 7])
def test_affine_grid_threaded_equals_single(
    rng: np.random.Generator,
    dtype: np.dtype,
    align_corners: bool,
    size: list[int],
    threads: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spatial = len(size) - 2
    theta = rng.uniform(-3, 3, size=(size[0], spatial, spatial + 1)).astype(dtype)
    theta.reshape(-1)[::5] = -0.0
    expected = grid_ops.affine_grid(theta, size, align_corners, threads=1)
    monkeypatch.setattr(checks, "PARALLEL_BYTES", 1)
    assert same_bits(grid_ops.affine_grid(theta, size, align_corners, threads=threads), expected)


def _plain_grid(theta: np.ndarray, size: list[int], align_corners: bool) -> np.ndarray:
    result = np.empty(grid_ops.affine_grid_output_shape(theta.shape, size), theta.dtype)
    axes = [grid_ops._base_coordinates(n, align_corners) for n in reversed(result.shape[1:-1])]
    grid_ops._affine_grid_plain(theta.astype(np.float64), axes, result, 1)
    return result


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_affine_grid_complex_pairs_equal_the_plain_sums(dtype: type, threads: int) -> None:
    """The 2-D (x, y) pairs added as complex numbers give the very bits of two strided passes,
    NaN and Inf in theta included (an Inf must not leak into the other coordinate)."""
    rng = np.random.default_rng(threads)
    for trial in range(40):
        n, h, w = (int(v) for v in rng.integers(1, 30, 3))
        theta = (rng.standard_normal((n, 2, 3)) * 10.0 ** rng.integers(-3, 4)).astype(dtype)
        if trial % 4 == 0:
            theta.flat[rng.integers(0, theta.size)] = rng.choice([np.nan, np.inf, -np.inf])
        align = bool(trial % 2)
        assert grid_ops._complex_pairs(np.empty((n, h, w, 2), dtype)) is not None
        fast = grid_ops.affine_grid(theta, [n, 1, h, w], align, threads=threads)
        assert fast.tobytes() == _plain_grid(theta, [n, 1, h, w], align).tobytes()


def test_affine_grid_pairs_fall_back_for_strided_outputs() -> None:
    theta = np.array([[[1.5, 0.25, 0.1], [-0.5, 2.0, 0.3]]], np.float32)
    wide = np.zeros((1, 4, 5, 4), np.float32)
    out = wide[..., ::2]  # the pairs are not adjacent: the plain path writes them
    assert grid_ops._complex_pairs(out) is None
    grid_ops.affine_grid(theta, [1, 1, 4, 5], out=out)
    assert out.tobytes() == _plain_grid(theta, [1, 1, 4, 5], False).tobytes()
    assert (wide[..., 1::2] == 0).all()


def test_affine_grid_many_tiny_grids_in_one_sum() -> None:
    """A batch is summed slice by slice, not grid by grid: a million 1x2 grids are quick and exact."""
    theta = np.tile(np.array([[[2.0, 0.0, 0.5], [0.0, 1.0, -0.25]]], np.float32), (1_000_000, 1, 1))
    theta[::7, 0, 2] = np.inf
    grid = grid_ops.affine_grid(theta, [1_000_000, 1, 1, 2], align_corners=True, threads=2)
    assert grid.shape == (1_000_000, 1, 2, 2)
    assert grid[1, 0].tolist() == [[-1.5, -0.25], [2.5, -0.25]]
    assert np.isinf(grid[::7, ..., 0]).all() and (grid[::7, ..., 1] == -0.25).all()
    assert grid[1:7].tobytes() == np.repeat(grid[1:2], 6, axis=0).tobytes()


# (n, [d,] h, w) of the row-block tests: odd sizes, size-1 axes, one grid and several.
GRID_SIZES = [
    [1, 1, 1, 1], [3, 2, 5, 7], [2, 1, 1, 9], [1, 1, 13, 1], [2, 1, 3, 4, 5], [3, 2, 1, 1, 1], [1, 1, 5, 1, 3]
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", GRID_SIZES, ids=str)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_affine_grid_rows_equal_the_plain_sums(
    dtype: np.dtype, align_corners: bool, size: list[int], threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row blocks of 1, 2 and 3 rows and of whole grids, runs of rows that start and end inside
    a grid: the very bits of _affine_grid_plain, NaN and Inf in theta included.

    Except the sign and payload of a NaN that is the sum of two NaNs: IEEE 754 leaves open
    which one survives, and numpy's add loops choose differently (SIMD body or tail, a
    broadcast scalar or not), so even the plain path's choice depends on how the batch is
    sliced among threads. Such elements only have to be NaN in both.
    """
    rng = np.random.default_rng(len(size) * 100 + threads)
    spatial = len(size) - 2
    theta = (rng.standard_normal((size[0], spatial, spatial + 1)) * 10.0 ** rng.integers(-3, 4)).astype(dtype)
    theta.reshape(-1)[::5] = -0.0
    theta.reshape(-1)[rng.integers(0, theta.size)] = np.nan
    theta.reshape(-1)[rng.integers(0, theta.size)] = np.inf
    theta.reshape(-1)[rng.integers(0, theta.size)] = -np.inf
    expected = _plain_grid(theta, size, align_corners)
    taken: list[int] = []
    rows_path = grid_ops._affine_grid_rows
    monkeypatch.setattr(grid_ops, "_affine_grid_rows", lambda *args: taken.append(1) or rows_path(*args))
    monkeypatch.setattr(grid_ops, "_GRID_ROWS_ELEMENTS", 1)
    monkeypatch.setattr(checks, "PARALLEL_BYTES", 1)
    row_bytes = 8 * spatial * size[-1]
    for rows_per_block in (1, 2, 3, 1000):
        monkeypatch.setattr(grid_ops, "_GRID_BLOCK_BYTES", dict.fromkeys((2, 3), row_bytes * rows_per_block))
        found = grid_ops.affine_grid(theta, size, align_corners, threads=threads)
        assert same_bits_or_both_nan(found, expected)
        out = np.full(expected.shape, 7, dtype)
        assert grid_ops.affine_grid(theta, size, align_corners, threads=threads, out=out) is out
        assert same_bits(out, found)
    # One NaN or Inf alone: no sum of two NaNs, so every bit is defined.
    for special in (np.nan, np.inf):
        alone = np.where(np.isfinite(theta.astype(np.float64)), theta, 0.5).astype(dtype)
        alone.reshape(-1)[rng.integers(0, alone.size)] = special
        assert same_bits(grid_ops.affine_grid(alone, size, align_corners, threads=threads),
                         _plain_grid(alone, size, align_corners))
    assert len(taken) == 10


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
def test_3d_row_blocks_by_a_matrix_product_keep_the_bits(
    dtype: np.dtype, align_corners: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[rest, 1] @ [selectors; x terms] is rest + x exactly where every term is finite; where
    a coordinate's rest and x terms both hold -0.0, or a term is Inf, the blocks are summed."""
    size = [3, 1, 4, 6, 10]
    rng = np.random.default_rng(11)
    products: list[bool] = []
    exact_product = grid_ops._exact_product
    monkeypatch.setattr(grid_ops, "_exact_product", lambda *args: products.append(exact_product(*args)) or products[-1])
    monkeypatch.setattr(grid_ops, "_GRID_ROWS_ELEMENTS", 1)
    # blocks of 7 rows: runs that end inside a grid
    monkeypatch.setattr(grid_ops, "_GRID_BLOCK_BYTES", dict.fromkeys((2, 3), 8 * 3 * 10 * 7))
    finite = (rng.standard_normal((3, 3, 4)) * 10.0 ** rng.integers(-3, 4, (3, 1, 1))).astype(dtype)
    negative_zeros = np.full((3, 3, 4), -0.0, dtype)  # every term -0.0 where x, y, z > 0: the sum is -0.0
    infinite = finite.copy()
    infinite[1, 2, 0] = np.inf
    cases = [(finite, [True] * 3), (negative_zeros, [False] * 3), (infinite, [True, False, True])]
    if np.dtype(dtype) == np.float64:  # terms near the subnormal range: summed, not multiplied
        cases.append((finite * 1e-300, [False] * 3))
    for theta, taken in cases:
        products.clear()
        found = grid_ops.affine_grid(theta, size, align_corners, threads=1)
        assert products == taken
        assert same_bits(found, _plain_grid(theta, size, align_corners))
    zeros = grid_ops.affine_grid(negative_zeros, size, align_corners, threads=1)
    assert (zeros == 0).all() and np.signbit(zeros).any() and not np.signbit(zeros).all()


FLUSHING_THREAD = """
import numpy as np, onnx, onnxruntime
import geomcli.ops.center_crop_pad as crop_ops
import geomcli.ops.affine_grid as grid_ops
import geomcli.ops.space_depth as space_depth_ops
# An onnxruntime session made with this option leaves the thread flushing subnormals (FTZ/DAZ).
graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y"])], "g",
                               [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                               [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 20)])
model.ir_version = 10
options = onnxruntime.SessionOptions()
options.add_session_config_entry("session.set_denormal_as_zero", "1")
onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
assert np.float64(2.2250738585072014e-308) * np.float64(0.5) == 0  # flushing, for this test to mean anything
# x terms 3e-308 + x * 6.00002e-308: sums below the normal range, flushed to -0.0 by a sum
theta = np.array([[[6.00002e-308, 0.0, 0.0, 3e-308], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]])
size = [1, 1, 2, 3, 30000]
plain = np.zeros(grid_ops.affine_grid_output_shape(theta.shape, size))
grid_ops._affine_grid_plain(theta, [grid_ops._base_coordinates(n, False) for n in reversed(size[2:])], plain)
assert grid_ops.affine_grid(theta, size, threads=1).tobytes() == plain.tobytes()
print("same bits")
"""


def test_3d_grid_rows_keep_the_bits_on_a_thread_that_flushes_subnormals() -> None:
    """A QA pass's case: with FTZ on, the matrix product turned -0.0 into +0.0 (its sums are
    scaled once more, from +0.0); terms near the subnormal range are now summed."""
    pytest.importorskip("onnxruntime")
    result = subprocess.run([sys.executable, "-c", FLUSHING_THREAD], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "same bits\n"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("size", [[2, 1, 3, 5], [2, 1, 3, 4, 5]], ids=str)
def test_affine_grid_rows_fall_back_for_strided_and_small_grids(
    dtype: np.dtype, size: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    spatial = len(size) - 2
    theta = np.random.default_rng(7).uniform(-2, 2, (size[0], spatial, spatial + 1)).astype(dtype)
    expected = _plain_grid(theta, size, False)
    grid = np.empty(expected.shape, dtype)
    assert grid_ops._grid_rows(grid, [np.zeros(n) for n in reversed(size[2:])]) is None  # too small a grid
    monkeypatch.setattr(grid_ops, "_GRID_ROWS_ELEMENTS", 1)
    axes = [np.zeros(n) for n in reversed(size[2:])]
    assert grid_ops._grid_rows(grid, axes) is not None
    row_bytes = 8 * spatial * size[-1]  # a row would not fit a block of one byte less
    monkeypatch.setattr(grid_ops, "_GRID_BLOCK_BYTES", dict.fromkeys((2, 3), row_bytes - 1))
    assert grid_ops._grid_rows(grid, axes) is None
    monkeypatch.setattr(grid_ops, "_GRID_BLOCK_BYTES", dict.fromkeys((2, 3), 1 << 20))
    # Odd strides: every other element of the last two axes, and the batch reversed.
    wide = np.zeros((*expected.shape[:-2], 2 * expected.shape[-2], 2 * spatial), dtype)
    out = wide[::-1, ..., ::2, ::2]
    assert grid_ops._grid_rows(out, axes) is None
    assert grid_ops.affine_grid(theta[::-1], size, out=out) is out
    assert same_bits(out[::-1].copy(), expected)
    assert not wide[..., 1::2, :].any() and not wide[..., 1::2].any()


@pytest.mark.parametrize("dtype", ["uint8", "float16", "bool", "bfloat16"])
def test_space_to_depth_right_items_by_the_shifted_cast(
    rng: np.random.Generator, dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bw = 1 comes from the pairs read one item later: only the input's last row, which has
    no item after it, takes the shift (a read past the end would be out of bounds)."""
    item = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    x = with_nan_payloads(make_array(rng, (2, 3, 6, 10), item))
    shifts: list[int] = []
    right_shift = np.right_shift
    monkeypatch.setattr(np, "right_shift", lambda *args, **kwargs: shifts.append(1) or right_shift(*args, **kwargs))
    for mode in MODES:
        for block_bytes in (1, 40, 1 << 20):
            shifts.clear()
            found = space_depth_ops._space_to_depth_blocked(x, 2, mode, 2, block_bytes)  # type: ignore[arg-type]
            assert same_bits(found, space_depth_ops._space_to_depth_plain(x, 2, mode))  # type: ignore[arg-type]
            assert len(shifts) == 1
