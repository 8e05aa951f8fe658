"""GridSample's compiled path (geomcli.ops._fast._grid_sample) against the readable reference, bit for
bit: every mode × padding × align_corners, every dtype it covers, 1-D to 3-D, positions outside,
near ties, NaN and Inf, tiny and empty arrays, strided inputs and outputs, threads; what it does
not cover goes to the numpy path, which still works without the extension."""

from __future__ import annotations

import math
import os
import threading
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from geomcli.errors import GeomError
from geomcli.ops import grid_sample as module
from geomcli.ops import reference
from geomcli.ops.affine_grid import affine_grid
from geomcli.ops.grid_sample import grid_sample

MODES = ("linear", "nearest", "cubic")
PADDINGS = ("zeros", "border", "reflection")
COMBOS = [(m, p, a) for m in MODES for p in PADDINGS for a in (False, True)]
# (data shape, grid shape): longer than the taps (interior and edge points) and as short as can be
SHAPES: dict[int, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {
    1: [((2, 2, 9), (2, 13, 1)), ((1, 1, 1), (1, 6, 1))],
    2: [((2, 2, 6, 7), (2, 4, 5, 2)), ((1, 1, 1, 2), (1, 3, 3, 2))],
    3: [((1, 2, 5, 4, 6), (1, 2, 3, 3, 3)), ((1, 1, 1, 3, 2), (1, 2, 2, 2, 3))],
}
OTHER_INTERPOLATED = ["float16", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]

needs_compiled = pytest.mark.skipif(module._compiled is None, reason="the extension is not built")


def assert_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same dtype, shape and bits; NaN where the reference has NaN (its payload is not looked at)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if actual.dtype.kind in "fc" or actual.dtype == ml_dtypes.bfloat16:
        real = actual.dtype.kind == "c"
        for part in ((np.real, np.imag) if real else (lambda a: a,)):
            a, e = np.ascontiguousarray(part(actual)), np.ascontiguousarray(part(expected))
            nan = np.isnan(e.astype(np.float64))
            np.testing.assert_array_equal(np.isnan(a.astype(np.float64)), nan)
            unsigned = f"u{a.dtype.itemsize}"
            np.testing.assert_array_equal(a.view(unsigned)[~nan], e.view(unsigned)[~nan])
    else:
        np.testing.assert_array_equal(actual, expected)


def make_grid(rng: np.random.Generator, shape: tuple[int, ...], lengths: tuple[int, ...], align_corners: bool,
              dtype: Any = np.float64) -> np.ndarray:
    """Positions over and past the data, with the awkward ones planted: NaN, ±Inf, ones so large
    their positions overflow (float64) or lie far out, -1 and 1 exactly, -0.0, and the normalised
    coordinates of pixel centres and of half-way points (nearest's ties, linear's exact taps)."""
    grid = rng.uniform(-1.6, 1.6, size=shape)
    flat = grid.reshape(-1, shape[-1])
    huge = 1e308 if np.dtype(dtype).itemsize == 8 else 3e38  # its position overflows / is far away but finite
    specials = [np.nan, np.inf, -np.inf, huge, -1.0, 1.0, -0.0, -huge]
    for k, value in enumerate(specials):
        flat[(3 * k + 1) % flat.shape[0], k % shape[-1]] = value
    rows = flat.shape[0]
    for k in range(rows // 3):  # every third point: ties and centres on every axis
        for axis in range(shape[-1]):
            length = lengths[len(lengths) - 1 - axis]  # coordinate 0 is x, the innermost axis
            x = (k % (2 * length + 2)) / 2 - 0.5  # -0.5, 0, 0.5, ..., L: centres and half-way points
            aligned = align_corners and length > 1
            flat[3 * k + 2, axis] = x * 2 / (length - 1) - 1 if aligned else (2 * x + 1) / length - 1
    with np.errstate(over="ignore"):
        return grid.astype(dtype)


def make_data(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Values spread over (and past, for integers) the dtype's range; -0.0, NaN and ±Inf in float data."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        wide = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
        small = rng.integers(max(info.min, -9), min(info.max, 9), size=shape, endpoint=True).astype(dtype)
        return np.where(rng.random(shape) < 0.5, wide, small)
    data = (rng.normal(size=shape) * 60 + 30).astype(dtype)
    data.flat[::5] = -0.0  # a zero's sign shows where a weight of ±0 meets it
    if data.size > 6:
        data.flat[[1, 4, 6]] = [np.nan, np.inf, -np.inf]
    return data


def make_complex(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    data = np.empty(shape, np.complex64)
    data.real, data.imag = make_data(rng, shape, np.float32), make_data(rng, shape, np.float32)[::-1]
    return data


def run_both(data: np.ndarray, grid: np.ndarray, mode: str, padding: str, align_corners: bool, fill: Any,
             **options: Any) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):  # the reference's numpy scalars warn of Inf × 0, overflow
        expected = reference.grid_sample(data, grid, mode, padding, align_corners, fill)
    return grid_sample(data, grid, mode, padding, align_corners, fill=fill, **options), expected


# --- the extension is there, and used ------------------------------------------------


def test_extension_is_built_where_ci_runs() -> None:
    """CI installs the project with a C compiler at hand: the extension must have been built there.
    (A checkout that was never installed runs everything on the numpy path.)"""
    if os.environ.get("CI") != "true" and module._compiled is None:
        pytest.skip("the extension is not built (pip install -e . builds it)")
    assert module._compiled is not None


@needs_compiled
def test_the_compiled_kernel_does_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    sample = module._compiled.sample  # type: ignore[union-attr]

    def spy(*args: Any) -> None:
        calls.append(args[7])
        sample(*args)

    monkeypatch.setattr(module._compiled, "sample", spy)
    data = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    grid = np.zeros((1, 2, 2, 2))
    grid_sample(data, grid)
    grid_sample(data.astype(ml_dtypes.bfloat16), grid, "nearest")
    assert calls == ["float32", "raw"]


# --- bit for bit, over the matrix ----------------------------------------------------


@needs_compiled
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8"])
@pytest.mark.parametrize("mode, padding, align_corners", COMBOS)
def test_equals_reference(mode: str, padding: str, align_corners: bool, dtype: str, rank: int) -> None:
    rng = np.random.default_rng([rank, len(dtype), MODES.index(mode), PADDINGS.index(padding), align_corners])
    for shape, grid_shape in SHAPES[rank]:
        data = make_data(rng, shape, dtype)
        for grid_dtype in (np.float32, np.float64):
            grid = make_grid(rng, grid_shape, shape[2:], align_corners, grid_dtype)
            assert_bits(*run_both(data, grid, mode, padding, align_corners, 7))


@needs_compiled
@pytest.mark.parametrize("dtype", OTHER_INTERPOLATED)
@pytest.mark.parametrize("mode, padding", [(m, p) for m in ("linear", "cubic") for p in PADDINGS])
def test_other_dtypes_equal_reference(mode: str, padding: str, dtype: str) -> None:
    """float16 rounded once from float64 (ties to even, subnormals, overflow to Inf) and every
    integer rounded half to even and saturated, 64-bit ones included (2**63 and 2**64 and past
    are their largest values), in 2-D and 3-D."""
    rng = np.random.default_rng([len(dtype), MODES.index(mode), PADDINGS.index(padding)])
    fill = 5 if dtype != "float16" else 0.1
    for rank in (2, 3):
        shape, grid_shape = SHAPES[rank][0]
        data = make_data(rng, shape, dtype)
        align_corners = bool(rng.integers(2))
        grid = make_grid(rng, grid_shape, shape[2:], align_corners)
        assert_bits(*run_both(data, grid, mode, padding, align_corners, fill))


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("fill", [np.nan, np.inf, -2.5])
def test_a_fill_of_nan_or_inf_equals_reference(mode: str, fill: float, compiled: bool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A tap outside whose weight is 0 reads 0, not fill (NaN and Inf times 0 would be NaN):
    the interior, edge and wholly-outside points of both paths, every rank, bit for bit. The
    grid's pixel centres give taps of weight exactly 0 at and past the edges; a point on whole
    pixel positions with an axis 2 or 3 pixels out (its taps all outside) reads fill itself."""
    if compiled and module._compiled is None:
        pytest.skip("the extension is not built")
    if not compiled:
        monkeypatch.setattr(module, "_compiled", None)
    rng = np.random.default_rng([MODES.index(mode), int(compiled)])
    for rank in (1, 2, 3):
        for shape, grid_shape in SHAPES[rank]:
            for dtype in (np.float32, np.float64):
                align_corners = bool(rng.integers(2))
                data = make_data(rng, shape, dtype)
                grid = make_grid(rng, grid_shape, shape[2:], align_corners)
                lengths = shape[2:][::-1]  # x first, as the grid's coordinates
                planted = grid.reshape(-1, rank)[:4]  # (a view) the first points: whole pixels, one axis far out
                for k, point in enumerate(planted):
                    pixels = [int(rng.integers(length)) for length in lengths]
                    pixels[k % rank] = [-3, -2, lengths[k % rank] + 1, lengths[k % rank] + 2][k]
                    point[:] = [2 * x / max(1, n - 1) - 1 if align_corners else (2 * x + 1) / n - 1
                                for x, n in zip(pixels, lengths)]
                actual, expected = run_both(data, grid, mode, "zeros", align_corners, fill)
                assert_bits(actual, expected)
                if mode == "linear" and fill == np.inf and not (align_corners and 1 in lengths):
                    # weights >= 0 on taps that all read inf: inf, not inf + inf × 0 (a 1-pixel axis with
                    # align_corners has every position on its pixel)
                    planted_values = actual.reshape(*actual.shape[:2], -1)[0, :, :len(planted)]
                    assert (planted_values == np.inf).all()


@needs_compiled
def test_float16_rounding_over_every_value() -> None:
    """Every float16 as data (a 256 × 256 image of all bit patterns), sampled half-way and a third
    of the way between neighbours along each row: the float64 sums rounded to float16 by the
    compiled code, against the numpy path (numpy's cast is the reference's rounding)."""
    data = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(1, 1, 256, 256)
    x = np.concatenate([np.arange(255) + 0.5, np.arange(255) + 1 / 3])
    xs, ys = np.meshgrid(x * 2 / 255 - 1, np.arange(256) * 2 / 255 - 1)
    grid = np.stack([xs, ys], axis=-1)[None]
    with np.errstate(over="ignore", invalid="ignore"):
        actual = grid_sample(data, grid, align_corners=True)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(module, "_compiled", None)
            expected = grid_sample(data, grid, align_corners=True)
    assert_bits(actual, expected)


@needs_compiled
@pytest.mark.parametrize("mode, padding, align_corners", COMBOS)
def test_larger_grids_equal_the_numpy_path(mode: str, padding: str, align_corners: bool) -> None:
    """An image turned, scaled and shifted past its edges, in pieces of whole output rows walked in
    tiles, over two threads: the same bits as the numpy path (held to the reference elsewhere)."""
    rng = np.random.default_rng(3)
    data = make_data(rng, (2, 3, 70, 90), np.float32)
    a = 0.6
    theta = np.array([[np.cos(a), -np.sin(a), 0.2], [np.sin(a), np.cos(a), -0.1]]) * 1.3
    ys, xs = np.mgrid[-1:1:75j, -1:1:83j]
    grid = np.einsum("ij,jhw->hwi", theta, np.stack([xs, ys, np.ones_like(xs)]))[None].repeat(2, axis=0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "_PARALLEL_VALUES", 1)
        patch.setattr(module, "_COMPILED_POINTS", 300)  # 3 rows of 83 per piece: many pieces
        actual = grid_sample(data, grid, mode, padding, align_corners, fill=2, threads=2)
        patch.setattr(module, "_compiled", None)
        expected = grid_sample(data, grid, mode, padding, align_corners, fill=2, threads=1)
    assert_bits(actual, expected)


@needs_compiled
@pytest.mark.parametrize("dtype", [np.dtype(bool), np.dtype(ml_dtypes.bfloat16), np.dtype("complex64"),
                                   np.dtype("complex128"), np.dtype(">f4"), np.dtype(">i8"), np.dtype("<U3"),
                                   np.dtype("S2"), np.dtype("int64"), np.dtype("float16")])
def test_nearest_copies_any_fixed_size_item(dtype: np.dtype) -> None:
    rng = np.random.default_rng(5)
    values = rng.integers(1, 99, size=(2, 2, 5, 6))
    data = (values.astype(str) if dtype.kind in "US" else values % 2 if dtype.kind == "b" else values).astype(dtype)
    fill = "z" if dtype.kind in "US" else True if dtype.kind == "b" else 3
    for align_corners in (False, True):
        grid = make_grid(rng, (2, 4, 5, 2), (5, 6), align_corners)
        for padding in PADDINGS:
            assert_bits(*run_both(data, grid, "nearest", padding, align_corners, fill))


# --- awkward inputs ------------------------------------------------------------------


@needs_compiled
def test_empty_and_tiny() -> None:
    rng = np.random.default_rng(6)
    for data_shape, grid_shape in [((1, 2, 3, 4), (1, 0, 5, 2)), ((0, 2, 3, 4), (0, 2, 2, 2)),
                                   ((1, 0, 3, 4), (1, 2, 2, 2)), ((1, 1, 1, 1), (1, 1, 1, 2)),
                                   ((3, 1, 2), (3, 1, 1))]:
        data = make_data(rng, data_shape, np.float32)
        grid = make_grid(rng, grid_shape, data_shape[2:], False) if math.prod(grid_shape) else np.zeros(grid_shape)
        for mode, padding, align_corners in COMBOS:
            assert_bits(*run_both(data, grid, mode, padding, align_corners, 1))


@needs_compiled
@pytest.mark.parametrize("mode", MODES)
def test_strided_inputs_and_outputs(mode: str) -> None:
    """Strided and byte-swapped data (copied once), a strided grid, a broadcast grid (read piece by
    piece), an out= slice of a larger array, one with negative strides, one whose axes do not
    merge (staged): all the same bits."""
    rng = np.random.default_rng(7)
    base = make_data(rng, (2, 7, 8, 3), np.float64)
    data = base.transpose(0, 3, 1, 2)[:, ::2]  # (2, 2, 7, 8), strided
    grid = make_grid(rng, (2, 5, 12, 2), (7, 8), False)[:, :, ::2]  # (2, 5, 6, 2), strided
    with np.errstate(all="ignore"):
        expected = reference.grid_sample(data, grid, mode, "reflection", False, 0)
    assert_bits(grid_sample(data, grid, mode, "reflection"), expected)
    swapped = data.astype(">f8")
    assert_bits(grid_sample(swapped, grid, mode, "reflection"), expected.astype(">f8"))
    big = np.zeros((2, 2, 10, 12))
    assert_bits(grid_sample(data, grid, mode, "reflection", out=big[:, :, 2:7, 3:9]), expected)
    backwards = np.zeros((2, 2, 5, 6))[:, ::-1, ::-1, ::-1]
    assert_bits(grid_sample(data, grid, mode, "reflection", out=backwards), expected)
    unmerged = np.zeros((2, 6, 5, 2)).transpose(0, 3, 2, 1)  # (2, 2, 5, 6): its point axes do not merge
    assert_bits(grid_sample(data, grid, mode, "reflection", out=unmerged), expected)
    row = make_grid(rng, (1, 1, 6, 2), (7, 8), False)
    broadcast = np.broadcast_to(row, (2, 5, 6, 2))
    assert_bits(*run_both(data, broadcast, mode, "reflection", False, 0))
    # data with negative strides (rows and columns reversed): nearest read its rows after the first as outside
    reversed_data = data[:, :, ::-1, ::-1]
    with np.errstate(all="ignore"):
        expected = reference.grid_sample(np.ascontiguousarray(reversed_data), grid, mode, "reflection", False, 0)
    assert_bits(grid_sample(reversed_data, grid, mode, "reflection"), expected)
    line = np.arange(5.0).reshape(1, 1, 5)[:, :, ::-1]
    at_pixels = np.linspace(-1, 1, 5).reshape(1, 5, 1)
    assert grid_sample(line, at_pixels, mode, align_corners=True).tolist() == [[[4.0, 3.0, 2.0, 1.0, 0.0]]]


@needs_compiled
@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64", *OTHER_INTERPOLATED])
@pytest.mark.parametrize("padding, align_corners", [(p, a) for p in PADDINGS for a in (False, True)])
def test_channels_last_data_is_sampled_where_it_lies(padding: str, align_corners: bool, dtype: str,
                                                      channels: int) -> None:
    """An N×H×W×C array seen as (N, C, H, W), as the warp command hands an image over: 2-D linear
    reads it with its strides (uint8 of up to 4 channels all at once, in one AVX2 vector where the
    processor has it; 5 channels and other dtypes each channel on its own), into channels-last
    and channels-first outputs, with float32 and float64 grids: edge points, points outside, NaN
    and Inf positions, the reference's bits."""
    rng = np.random.default_rng([channels, len(dtype), PADDINGS.index(padding), align_corners])
    data = make_data(rng, (2, 9, 11, channels), dtype).transpose(0, 3, 1, 2)
    assert module._read_in_place(data, plan_of(dtype, "linear"))
    for grid_dtype, fill in ((np.float64, 0), (np.float32, 7)):
        grid = make_grid(rng, (2, 7, 13, 2), (9, 11), align_corners, grid_dtype)
        found, expected = run_both(data, grid, "linear", padding, align_corners, fill)
        assert_bits(found, expected)
        last = np.empty((2, 7, 13, channels), dtype).transpose(0, 3, 1, 2)
        assert_bits(grid_sample(data, grid, "linear", padding, align_corners, fill=fill, out=last), expected)


@needs_compiled
@pytest.mark.parametrize("channels", [3, 4])
def test_a_larger_channels_last_uint8_image_equals_the_numpy_path(channels: int) -> None:
    """Many runs of a rotation grid over an image 300 pixels wide (tiles, their ends, rows that
    wrap), threads, against the numpy path's copy of the data: the same bits."""
    rng = np.random.default_rng(channels)
    image = rng.integers(0, 256, (1, 70, 300, channels), dtype=np.uint8)
    turn = math.radians(30)
    theta = np.array([[[math.cos(turn), -math.sin(turn), 0.05], [math.sin(turn), math.cos(turn), -0.1]]])
    grid = affine_grid(theta.astype(np.float32), (1, channels, 61, 290))
    data = image.transpose(0, 3, 1, 2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "_compiled", None)
        expected = grid_sample(data, grid)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "_PARALLEL_VALUES", 1)
        patch.setattr(module, "_COMPILED_POINTS", 1000)
        for threads in (1, 2):
            assert_bits(grid_sample(data, grid, threads=threads), expected)
        # at the process's thread limit the caller does every piece itself (it raised RuntimeError)
        patch.setattr(threading.Thread, "start", lambda self: (_ for _ in ()).throw(RuntimeError("no thread")))
        assert_bits(grid_sample(data, grid, threads=2), expected)


@needs_compiled
@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int16, np.float32, np.complex128, ml_dtypes.bfloat16,
                                   np.dtype(">f8"), np.dtype("S3")])
def test_nearest_reads_channels_last_data_where_it_lies(dtype: Any) -> None:
    rng = np.random.default_rng(11)
    data = rng.integers(0, 100, (1, 6, 7, 3)).astype(dtype).transpose(0, 3, 1, 2)
    assert module._read_in_place(data, plan_of(dtype, "nearest"))
    for padding in PADDINGS:
        grid = make_grid(rng, (1, 5, 8, 2), (6, 7), False)
        assert_bits(*run_both(data, grid, "nearest", padding, False, 0))


def test_what_is_copied_before_the_compiled_kernel_reads_it() -> None:
    """The interpolations other than 2-D linear read an axis's neighbours as a row: their data is
    made C-contiguous first, as is data whose strides are not whole items."""
    channels_last = np.zeros((1, 5, 6, 3), np.float32).transpose(0, 3, 1, 2)
    assert module._read_in_place(channels_last, plan_of(np.float32, "linear"))
    assert not module._read_in_place(channels_last, plan_of(np.float32, "cubic"))
    assert not module._read_in_place(channels_last[..., None], plan_of(np.float32, "linear", rank=3))
    packed = np.zeros((1, 2, 3, 4), [("a", np.uint8), ("b", np.float32)])["b"]  # strides of 5 bytes
    assert not module._read_in_place(packed, plan_of(np.float32, "linear"))
    assert module._read_in_place(channels_last[..., None], plan_of(np.float32, "nearest", rank=3))


@needs_compiled
def test_grids_of_other_float_types_read_exactly() -> None:
    rng = np.random.default_rng(8)
    data = make_data(rng, (1, 2, 6, 7), np.float32)
    for dtype in (np.float16, ml_dtypes.bfloat16, np.dtype(">f4"), np.dtype(">f8")):
        grid = make_grid(rng, (1, 3, 4, 2), (6, 7), True, dtype)
        for mode in MODES:
            assert_bits(*run_both(data, grid, mode, "border", True, 0))


@needs_compiled
def test_threads_give_the_same_bits() -> None:
    rng = np.random.default_rng(9)
    data = make_data(rng, (2, 3, 20, 30), np.uint8)
    grid = make_grid(rng, (2, 25, 41, 2), (20, 30), False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "_PARALLEL_VALUES", 1)
        patch.setattr(module, "_COMPILED_POINTS", 64)
        one = grid_sample(data, grid, "cubic", threads=1)
        for threads in (2, 3):
            assert_bits(grid_sample(data, grid, "cubic", threads=threads), one)
    sub = (slice(None), slice(None), slice(0, 4), slice(0, 5))
    assert_bits(one[sub], run_both(data, grid[:, :4, :5], "cubic", "zeros", False, 0)[1])


# --- what is not compiled, and no extension at all -----------------------------------


def plan_of(dtype: Any, mode: str, rank: int = 2) -> Any:
    dtype = np.dtype(dtype)
    return module._Plan(mode, "zeros", False, (3,) * rank, (1,) * rank, dtype, np.zeros((), dtype), mode != "nearest",
                        np.dtype(np.complex128 if dtype.kind == "c" else np.float64), 2.0**-23)


@needs_compiled
def test_what_falls_back_to_numpy() -> None:
    assert module._compiled_kind(plan_of(np.float32, "linear")) == "float32"
    assert module._compiled_kind(plan_of(np.uint64, "cubic", rank=3)) == "uint64"
    assert module._compiled_kind(plan_of(np.complex64, "nearest", rank=1)) == "raw"
    for dtype, mode, rank in [(np.complex64, "linear", 2), (ml_dtypes.bfloat16, "cubic", 2), (">f4", "linear", 2),
                              (np.float32, "linear", 4), (np.float32, "nearest", 4),
                              (np.dtypes.StringDType(), "nearest", 2)]:
        assert module._compiled_kind(plan_of(dtype, mode, rank)) is None


@pytest.mark.parametrize("mode", MODES)
def test_the_numpy_path_without_the_extension(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """With the extension away (as in a checkout that was never built), every case still works, on
    the numpy path, with the reference's bits."""
    monkeypatch.setattr(module, "_compiled", None)
    monkeypatch.setattr(module, "_slab_points", lambda plan, channels: 4)  # many slabs: kept edge points too
    rng = np.random.default_rng(10)
    for rank in (1, 2, 3):
        shape, grid_shape = SHAPES[rank][0]
        for dtype in (np.float32, np.uint8, np.complex64):
            data = make_data(rng, shape, dtype) if dtype != np.complex64 else make_complex(rng, shape)
            for padding in PADDINGS:
                grid = make_grid(rng, grid_shape, shape[2:], True)
                assert_bits(*run_both(data, grid, mode, padding, True, 2))


@needs_compiled
def test_the_extension_checks_what_it_is_given() -> None:
    """Errors of the caller (geomcli.ops.grid_sample validates first, so none reaches a user)."""
    sample = module._compiled.sample  # type: ignore[union-attr]
    plane, coords, out = np.zeros((2, 3, 4), np.float32), np.zeros((5, 2), np.float32), np.zeros((2, 5), np.float32)
    sample(plane, coords, out, (3, 4), "linear", "zeros", False, "float32", 0.0, 0.0)
    for args, error in [
        ((plane, coords, out, (3, 4), "bilinear", "zeros", False, "float32", 0.0, 0.0), "unknown mode"),
        ((plane, coords, out, (3, 4), "linear", "wrap", False, "float32", 0.0, 0.0), "unknown padding"),
        ((plane, coords, out, (3, 4), "linear", "zeros", False, "complex64", 0.0, 0.0), "not compiled"),
        ((plane, coords, out, (1, 3, 4, 1), "linear", "zeros", False, "float32", 0.0, 0.0), "spatial axes"),
        ((plane, coords, out, (3, 0), "linear", "zeros", False, "float32", 0.0, 0.0), ">= 1"),
        ((plane, coords.astype(np.int32), out, (3, 4), "linear", "zeros", False, "float32", 0.0, 0.0),
         "float32 or float64"),
        ((plane, coords[:, :1], out, (3, 4), "linear", "zeros", False, "float32", 0.0, 0.0), r"\(S, r\)"),
        ((plane, coords, out[:, :4], (3, 4), "linear", "zeros", False, "float32", 0.0, 0.0), r"\(S, r\)"),
        ((plane, coords, out.astype(np.float64), (3, 4), "linear", "zeros", False, "float32", 0.0, 0.0), "item size"),
        ((plane, coords, out, (3, 5), "linear", "zeros", False, "float32", 0.0, 0.0), "item size"),
        ((plane, coords, out, (3, 4), "nearest", "zeros", False, "raw", b"\0", 0.0), "one item's bytes"),
        ((plane, coords, out[None], (3, 4), "linear", "zeros", False, "float32", 0.0, 0.0), "2-D"),
    ]:
        with pytest.raises(ValueError, match=error):
            sample(*args)
    with pytest.raises(ValueError, match="strided innermost axis"):  # 2-D linear and nearest take any strides
        sample(plane[:, :, ::2], coords, out, (3, 2), "cubic", "zeros", False, "float32", 0.0, 0.0)
    with pytest.raises(ValueError, match="whole items"):
        misaligned = np.zeros((2, 3, 9), np.uint8)[:, :, 1:].view(np.float32)  # (2, 3, 2), strides (27, 9, 4)
        sample(misaligned, coords, out, (3, 2), "linear", "zeros", False, "float32", 0.0, 0.0)
    with pytest.raises(ValueError, match=r"\(C, D1..Dr\)"):  # neither shaped nor C-contiguous
        sample(plane[:, :, ::2].reshape(2, 6)[:, ::-1], coords, out, (3, 4), "linear", "zeros", False, "float32", 0.0,
               0.0)
    with pytest.raises(TypeError):
        sample(plane, coords, out, (3, 4), "nearest", "zeros", False, "raw", 0.0, 0.0)  # fill: bytes for nearest


# --- affine_grid_sample: the grid's coordinates made in the kernel ------------------------------

def rotation(degrees: float) -> list[list[float]]:
    c, s = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    return [[c, -s, 0.0], [s, c, 0.0]]


# rotation, scale, shear, translation, all four, a degenerate matrix (every point one position),
# -0.0 terms, coordinates past float32's range (Inf) and Inf × 0 (NaN), and NaN in theta itself
THETAS = {
    "rotation": rotation(30), "scale": [[1.7, 0.0, 0.0], [0.0, 0.45, 0.0]],
    "shear": [[1.0, 0.6, 0.0], [-0.3, 1.0, 0.0]], "translation": [[1.0, 0.0, 0.37], [0.0, 1.0, -1.25]],
    "mixed": [[0.9 * 1.2, -0.44, 0.1], [0.31, 0.77, -0.05]], "degenerate": [[0.0, 0.0, 0.5], [0.0, 0.0, -0.25]],
    "signed zeros": [[-1.0, -0.0, -0.0], [0.0, -1.0, -0.0]], "huge": [[1e38, 3e38, 0.0], [2e300, -1.0, 1e-300]],
    "not finite": [[np.inf, 0.0, 0.0], [0.0, 1.0, np.nan]],
}
# (data height, width), (output height, width): the same, one row, one column, other sizes
AFFINE_SIZES = [((7, 9), (7, 9)), ((6, 8), (1, 11)), ((5, 7), (10, 1)), ((9, 4), (4, 13)), ((1, 1), (3, 2))]


def composed(data: np.ndarray, theta: np.ndarray, size: tuple[int, ...], mode: str, padding: str, align: bool,
             rows: slice | None, threads: int, fill: Any) -> np.ndarray:
    """What affine_grid_sample promises: grid_sample of affine_grid's grid."""
    grid = affine_grid(theta, size, align, rows=rows)
    return grid_sample(data, grid, mode, padding, align, fill=fill, threads=threads)


def affine_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one for each call of the compiled sample_affine."""
    calls: list[int] = []
    sample_affine = module._compiled.sample_affine  # type: ignore[union-attr]

    def spy(*args: Any) -> None:
        calls.append(1)
        sample_affine(*args)

    monkeypatch.setattr(module._compiled, "sample_affine", spy)
    return calls


@needs_compiled
@pytest.mark.parametrize("mode, padding, align_corners", COMBOS)
def test_affine_grid_sample_is_grid_sample_of_affine_grids_grid(monkeypatch: pytest.MonkeyPatch, mode: str,
                                                                padding: str, align_corners: bool) -> None:
    """Bit for bit, over thetas (float32 and float64), data types, sizes, slabs of rows, pieces
    of the output (whole rows, and points that straddle rows) and threads."""
    calls = affine_calls(monkeypatch)
    pieces = module._compiled_piece
    monkeypatch.setattr(module, "_PARALLEL_VALUES", 1)  # tiny outputs shared by the threads too
    rng = np.random.default_rng(21)
    dtypes = ["uint8", "int16", "float32", "float64"]
    for k, matrix in enumerate(THETAS.values()):
        for theta_dtype in (np.float32, np.float64):
            with np.errstate(over="ignore"):
                theta = np.array([matrix, rotation(-50 + 11 * k)], theta_dtype)  # a batch of two
            for (in_h, in_w), (out_h, out_w) in AFFINE_SIZES:
                dtype = dtypes[(k + out_w) % len(dtypes)]
                data = make_data(rng, (2, 3, in_h, in_w), dtype)
                size = (2, 3, out_h, out_w)
                # pieces of (points, row length): as chosen, a few points that straddle rows, whole rows
                for rows, piece, threads in [(None, None, 1), (slice(1, out_h), (5, 0), 2),
                                             (slice(0, 1), (out_w, out_w), 1), (slice(out_h - 1, None), (3, 0), 2)]:
                    chosen = pieces if piece is None else lambda plan, channels, points, p=piece: p
                    monkeypatch.setattr(module, "_compiled_piece", chosen)
                    expected = composed(data, theta, size, mode, padding, align_corners, rows, threads, 3)
                    calls.clear()
                    actual = module.affine_grid_sample(data, theta, size, mode, padding, align_corners, fill=3,
                                                       threads=threads, rows=rows)
                    assert_bits(actual, expected)
                    # a 1-pixel axis under border or reflection is read with weight 1 by the numpy path
                    one_pixel = mode != "nearest" and padding != "zeros" and 1 in (in_h, in_w)
                    assert bool(calls) == (actual.size > 0 and not one_pixel)


@needs_compiled
@pytest.mark.parametrize("channels", [1, 3, 4, 5])
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("mode", MODES)
def test_affine_grid_sample_of_channels_last_data_into_a_channels_last_result(
        monkeypatch: pytest.MonkeyPatch, mode: str, dtype: str, channels: int) -> None:
    """An H×W×C image's (1, C, H, W) view, as the warp command gives it (uint8 with C <= 4: one
    vector a pixel), into an H×W×C result's view, a slab of rows at a time."""
    calls = affine_calls(monkeypatch)
    rng = np.random.default_rng(22)
    image = make_data(rng, (23, 31, channels), dtype)
    theta = np.array([[[0.8, -0.7, 0.1], [0.6, 0.9, -0.2]]], np.float32)
    size = (1, channels, 29, 37)
    for padding, align_corners in [("zeros", False), ("border", True), ("reflection", False)]:
        expected = composed(image.transpose(2, 0, 1)[None], theta, size, mode, padding, align_corners, None, 1, 0)
        result = np.empty((29, 37, channels), dtype)
        for rows in (slice(0, 10), slice(10, 11), slice(11, 29)):
            module.affine_grid_sample(image.transpose(2, 0, 1)[None], theta, size, mode, padding, align_corners,
                                      out=result.transpose(2, 0, 1)[None][:, :, rows], rows=rows)
        assert_bits(result.transpose(2, 0, 1)[None], expected)
    assert len(calls) == 9


@pytest.mark.parametrize("case", ["float16 theta", "bfloat16 theta", "3-D", "complex data", "bfloat16 data",
                                  "no extension"])
def test_affine_grid_sample_makes_the_grid_where_the_kernel_does_not(monkeypatch: pytest.MonkeyPatch,
                                                                    case: str) -> None:
    rng = np.random.default_rng(23)
    theta: np.ndarray = np.array([[[0.9, -0.4, 0.1], [0.4, 0.9, 0.0]]])
    data = make_data(rng, (1, 2, 6, 7), np.float32)
    size: tuple[int, ...] = (1, 2, 5, 8)
    if case == "float16 theta":
        theta = theta.astype(np.float16)
    elif case == "bfloat16 theta":
        theta = theta.astype(ml_dtypes.bfloat16)
    elif case == "3-D":
        theta, data, size = np.array([[[0.9, -0.4, 0, 0.1], [0.4, 0.9, 0, 0], [0, 0, 1, 0.2]]]), \
            make_data(rng, (1, 2, 4, 6, 7), np.float32), (1, 2, 3, 5, 8)
    elif case == "complex data":
        data = make_complex(rng, data.shape)
    elif case == "bfloat16 data":
        data = data.astype(ml_dtypes.bfloat16)
    elif module._compiled is not None:
        monkeypatch.setattr(module, "_compiled", None)
    if module._compiled is not None:
        calls = affine_calls(monkeypatch)
    # (nearest copies complex and bfloat16 items: the kernel's, with its grid made in it)
    for mode in MODES if case not in ("complex data", "bfloat16 data") else ("linear", "cubic"):
        rows = slice(1, 4)
        expected = composed(data, theta, size, mode, "border", False, rows, 1, 0)
        assert_bits(module.affine_grid_sample(data, theta, size, mode, "border", rows=rows), expected)
    if module._compiled is not None:
        assert not calls


@pytest.mark.parametrize("theta_dtype", [np.float32, np.float16])  # the kernel's checks, and the composition's
def test_affine_grid_sample_refuses_what_affine_grid_or_grid_sample_refuse(theta_dtype: Any) -> None:
    data = np.zeros((1, 2, 4, 5), np.uint8)
    theta = np.zeros((1, 2, 3), theta_dtype)
    bad: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((data, theta, (1, 2, 3)), {}),  # size of 3 values
        ((data, theta[:, :1], (1, 2, 3, 4)), {}),  # theta's shape
        ((data, theta, (2, 2, 3, 4)), {}),  # size's N
        ((data, theta.astype(np.int32), (1, 2, 3, 4)), {}),
        ((data[0], theta, (1, 2, 3, 4)), {}),  # data's rank
        ((data.astype(np.float128), theta, (1, 2, 3, 4)), {}),
        ((data, theta, (1, 2, 3, 4), "bilinear"), {}),
        ((data, theta, (1, 2, 3, 4), "linear", "wrap"), {}),
        ((data, theta, (1, 2, 3, 4), "linear", "zeros", 2), {}),
        ((data, theta, (1, 2, 3, 4)), {"fill": 300}),
        ((data, theta, (1, 2, 3, 4)), {"threads": 0}),
        ((data, theta, (1, 2, 3, 4)), {"rows": slice(0, 3, 2)}),
        ((data, theta, (1, 2, 3, 4)), {"out": np.zeros((1, 2, 3, 4), np.int8)}),
        ((data, theta, (1, 2, 3, 4)), {"out": np.zeros((1, 2, 3, 4), np.uint8), "rows": slice(1, 3)}),
        ((data, theta, (1, 2, 4, 5)), {"out": data}),
    ]
    for args, options in bad:
        with pytest.raises(GeomError) as composition:
            grid = affine_grid(args[1], args[2], *args[5:6], rows=options.get("rows"), threads=options.get("threads"))
            grid_sample(args[0], grid, *args[3:], **{k: v for k, v in options.items() if k != "rows"})
        with pytest.raises(GeomError) as fused:
            module.affine_grid_sample(*args, **options)
        assert str(fused.value) == str(composition.value), args[2:]


@needs_compiled
def test_the_extension_checks_the_affine_grid_it_is_given() -> None:
    sample_affine = module._compiled.sample_affine  # type: ignore[union-attr]
    plane, out = np.zeros((2, 3, 4), np.float32), np.zeros((2, 6), np.float32)
    theta = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
    sample_affine(plane, theta, out, (3, 4), "linear", "zeros", False, "float32", 0.0, 0.0, 0, (2, 3), 0, False)
    for lengths, size, first, error in [((1, 3, 4, 1), (2, 3), 0, "spatial axes"), ((3,), (2, 3), 0, "2 lengths"),
                                        ((3, 4), (0, 3), 0, "size"), ((3, 4), (2, 3), 1, "within its grid"),
                                        ((3, 4), (2, 3), -1, "within its grid"),
                                        ((3, 4), (2**62, 2**62), 0, "within its grid")]:
        with pytest.raises(ValueError, match=error):
            sample_affine(plane, theta, out, lengths, "linear", "zeros", False, "float32", 0.0, 0.0, 0, size, first,
                          False)
    with pytest.raises(TypeError):
        sample_affine(plane, theta[:5], out, (3, 4), "linear", "zeros", False, "float32", 0.0, 0.0, 0, (2, 3), 0, False)
