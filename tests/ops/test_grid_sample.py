"""GridSample (opset 22): geomcli.ops.grid_sample against the official backend cases, onnxruntime,
closed-form oracles on tiny arrays, the readable reference (bit for bit) and properties; each
difference from the ONNX reference, onnxruntime and PyTorch written down; every error branch."""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from conftest import ALL_DTYPES, FLOAT_DTYPES, make_array, onnx_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from geomcli.errors import GeomError
from geomcli.ops import grid_sample as module
from geomcli.ops import reference
from geomcli.ops.grid_sample import grid_sample, grid_sample_output_shape

MODES = ("linear", "nearest", "cubic")
PADDINGS = ("zeros", "border", "reflection")
COMBOS = [(m, p, a) for m in MODES for p in PADDINGS for a in (False, True)]
A = -0.75


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same dtype, shape and values, NaN where NaN (the sign of a zero is not looked at)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if actual.dtype.kind in "fcV":
        wide = np.complex128 if actual.dtype.kind == "c" else np.float64
        np.testing.assert_array_equal(actual.astype(wide), expected.astype(wide))
    else:
        np.testing.assert_array_equal(actual, expected)


# --- onnx, onnxruntime ----------------------------------------------------------------


def _model(mode: str, padding: str, align_corners: bool, data_type: int, grid_type: int) -> Any:
    from onnx import helper

    node = helper.make_node("GridSample", ["X", "G"], ["Y"], mode=mode, padding_mode=padding,
                            align_corners=int(align_corners))
    graph = helper.make_graph([node], "grid_sample", [helper.make_tensor_value_info("X", data_type, None),
                                                      helper.make_tensor_value_info("G", grid_type, None)],
                              [helper.make_tensor_value_info("Y", data_type, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])


@functools.cache
def _session(mode: str, padding: str, align_corners: bool, dtype: str) -> Any:
    import onnxruntime
    from onnx import helper

    kind = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(_model(mode, padding, align_corners, kind, kind).SerializeToString(),
                                        options, providers=["CPUExecutionProvider"])


def run_onnxruntime(data: np.ndarray, grid: np.ndarray, mode: str, padding: str, align_corners: bool) -> np.ndarray:
    session = _session(mode, padding, align_corners, data.dtype.name)
    result: np.ndarray = session.run(None, {"X": data, "G": grid})[0]
    return result


def run_onnx_reference(data: np.ndarray, grid: np.ndarray, mode: str, padding: str,
                       align_corners: bool) -> np.ndarray:
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    model = _model(mode, padding, align_corners, helper.np_dtype_to_tensor_dtype(data.dtype),
                   helper.np_dtype_to_tensor_dtype(grid.dtype))
    result: np.ndarray = ReferenceEvaluator(model).run(None, {"X": data, "G": grid})[0]
    return result


# --- the official backend cases -------------------------------------------------------

OFFICIAL = [
    "test_gridsample", "test_gridsample_aligncorners_true", "test_gridsample_bicubic",
    "test_gridsample_bicubic_align_corners_0_additional_1", "test_gridsample_bicubic_align_corners_1_additional_1",
    "test_gridsample_bilinear", "test_gridsample_bilinear_align_corners_0_additional_1",
    "test_gridsample_bilinear_align_corners_1_additional_1", "test_gridsample_border_padding",
    "test_gridsample_nearest", "test_gridsample_nearest_align_corners_0_additional_1",
    "test_gridsample_nearest_align_corners_1_additional_1", "test_gridsample_reflection_padding",
    "test_gridsample_volumetric_bilinear_align_corners_0", "test_gridsample_volumetric_bilinear_align_corners_1",
    "test_gridsample_volumetric_nearest_align_corners_0", "test_gridsample_volumetric_nearest_align_corners_1",
    "test_gridsample_zeros_padding",
]


def test_official_cases_are_the_18() -> None:
    assert sorted(onnx_cases("GridSample")) == sorted(OFFICIAL) and len(OFFICIAL) == 18


@pytest.mark.parametrize("name", OFFICIAL)
def test_official_case(name: str) -> None:
    """float32 data and grids whose expected outputs are literals in onnx's generator, made in
    float32 (PyTorch's) and printed to 6 or 7 digits: ours, the float64 result rounded once,
    agrees to 2e-6 on values up to 13.5 (measured: at most 1.2e-6). test_gridsample_bicubic's
    literals have 4 decimals only (-0.1406 for -0.140625): 6e-5 there. Nearest is exact."""
    case = onnx_cases("GridSample")[name]
    attributes = {"mode": "linear", "padding_mode": "zeros", "align_corners": 0, **case.attributes}
    for (data, grid), (expected,) in case.data_sets:
        actual = grid_sample(data, grid, attributes["mode"], attributes["padding_mode"], attributes["align_corners"])
        assert actual.dtype == expected.dtype == np.float32 and actual.shape == expected.shape
        if attributes["mode"] == "nearest":
            np.testing.assert_array_equal(actual, expected)
        else:
            atol = 6e-5 if name == "test_gridsample_bicubic" else 2e-6
            np.testing.assert_allclose(actual, expected, rtol=0, atol=atol)


# --- onnxruntime as a second oracle ---------------------------------------------------


# onnxruntime has no 5-D cubic (geomcli has: see test_closed_form_nd)
ORT_CASES = [(rank, *combo) for rank in (2, 3) for combo in COMBOS if not (rank == 3 and combo[0] == "cubic")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("rank", "mode", "padding", "align_corners"), ORT_CASES)
def test_onnxruntime_oracle(dtype: str, rank: int, mode: str, padding: str, align_corners: bool) -> None:
    """Random data and grids reaching 0.7 past both ends. onnxruntime computes float32 data in
    float32 (positions, weights, sums), so float32 agrees to float32 precision; float64 to a few
    ulps (measured: at most 6e-16; its compiled arithmetic rounds its own way, and it pads the
    linear taps, not the position, past the borders: the same value up to a rounding). Nearest is
    exact: these grids hold no near-ties (see test_float64_positions_differ_from_float32_near_ties)."""
    rng = np.random.default_rng(7 + rank)
    shape = (2, 3, 5, 6) if rank == 2 else (2, 2, 3, 4, 5)
    data = rng.normal(size=shape).astype(dtype)
    grid = rng.uniform(-1.7, 1.7, size=(2, *((4, 7) if rank == 2 else (3, 2, 4)), rank)).astype(dtype)
    grid[0, 0, 0] = -1.0  # the exact ends
    grid[1, 0, 0] = 1.0
    expected = run_onnxruntime(data, grid, mode, padding, align_corners)
    actual = grid_sample(data, grid, mode, padding, align_corners)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if mode == "nearest":
        np.testing.assert_array_equal(actual, expected)
    elif dtype == "float32":
        np.testing.assert_allclose(actual, expected, rtol=2e-5, atol=2e-5)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-13, atol=1e-13)


# --- closed forms ---------------------------------------------------------------------


def keys(s: float) -> float:
    """Keys' cubic convolution kernel, A = -0.75, in its textbook piecewise form."""
    s = abs(s)
    if s <= 1:
        return (A + 2) * s**3 - (A + 3) * s**2 + 1
    if s < 2:
        return A * s**3 - 5 * A * s**2 + 8 * A * s - 4 * A
    return 0.0


def bounce(x: float, low: float, high: float) -> float:
    """The spec's words: reflected at the borders again and again until in bound."""
    if low == high:
        return low
    while x < low or x > high:
        x = 2 * low - x if x < low else 2 * high - x
    return x


def oracle_1d(values: list[float], x: float, mode: str, padding: str, align_corners: bool,
              fill: float = 0.0) -> float:
    """One position x (in pixels) on a 1-D signal, by an explicit formula: the padded signal
    (fill, clamped or bounced index) times the hat or Keys' kernel, summed over the taps."""
    length = len(values)
    low, high = (0.0, length - 1.0) if align_corners else (-0.5, length - 0.5)

    def at(i: int) -> float:
        if 0 <= i < length:
            return values[i]
        if padding == "zeros":
            return fill
        if padding == "border":
            return values[min(max(i, 0), length - 1)]
        return values[int(bounce(float(i), low, high))]

    if mode == "nearest":
        return at(round(x))  # Python's round() is half to even
    if mode == "linear":
        if padding == "border":
            x = min(max(x, 0.0), length - 1.0)
        elif padding == "reflection":
            x = bounce(x, low, high)
        return sum(max(0.0, 1 - abs(x - i)) * at(i) for i in range(math.floor(x), math.floor(x) + 2))
    return sum(keys(x - i) * at(i) for i in range(math.floor(x) - 1, math.floor(x) + 3))


# By hand (see the comments): 1-D data, three positions each, every mode x padding x align_corners.
# align_corners=0: [1, 2, 4, 8], x = -2.25, 2.5, 4.25 (g = -1.875, 0.5, 1.375), borders -0.5, 3.5.
# align_corners=1: [1, 2, 4, 8, 16], x = -1.25, 2.5, 5.5 (g = -1.625, 0.25, 1.75), borders 0, 4.
# Keys' weights: t = 0.5: -0.09375, 0.59375, 0.59375, -0.09375; t = 0.25: -0.10546875,
# 0.87890625, 0.26171875, -0.03515625 (t = 0.75: the same reversed).
BY_HAND = {
    # nearest: rint(-2.25) = -2, rint(2.5) = 2 (half to even), rint(4.25) = 4; ac=1: -1, 2, 6 (even)
    ("nearest", "zeros", False): [0, 4, 0],
    ("nearest", "border", False): [1, 4, 8],
    ("nearest", "reflection", False): [2, 4, 8],  # -2 -> 1, 4 -> 3
    ("nearest", "zeros", True): [0, 4, 0],
    ("nearest", "border", True): [1, 4, 16],
    ("nearest", "reflection", True): [2, 4, 4],  # -1 -> 1, 6 -> 2
    # linear: (2.5) is (4 + 8) / 2; reflection moves -2.25 to 1.25 and 4.25 to 2.75
    ("linear", "zeros", False): [0, 6, 0],
    ("linear", "border", False): [1, 6, 8],
    ("linear", "reflection", False): [2.5, 6, 7],  # .75·2 + .25·4, .25·4 + .75·8
    ("linear", "zeros", True): [0, 6, 0],
    ("linear", "border", True): [1, 6, 16],
    ("linear", "reflection", True): [2.5, 6, 6],  # -1.25 -> 1.25, 5.5 -> 2.5
    # cubic: taps floor(x)-1 .. floor(x)+2, each padded
    ("cubic", "zeros", False): [0, 6.9375, -0.84375],  # (2, 4, 8, 0)·w(.5); (8, 0, 0, 0)·w(.25)
    ("cubic", "border", False): [1, 6.1875, 8],  # (2, 4, 8, 8)·w(.5)
    ("cubic", "reflection", False): [2.41796875, 6.1875, 7.1640625],  # (8, 4, 2, 1)·w(.75); (8, 8, 4, 2)·w(.25)
    ("cubic", "zeros", True): [-0.10546875, 5.4375, -1.5],  # (0, 0, 0, 1)·w(.75); (2, 4, 8, 16)·w(.5); 16·-.09375
    ("cubic", "border", True): [1, 5.4375, 16],
    ("cubic", "reflection", True): [2.41796875, 5.4375, 5.4375],  # (8, 4, 2, 1)·w(.75); (16, 8, 4, 2)·w(.5)
}


def _by_hand_inputs(align_corners: bool) -> tuple[np.ndarray, np.ndarray, list[float]]:
    if align_corners:
        return np.array([1.0, 2, 4, 8, 16]), np.array([-1.625, 0.25, 1.75]), [-1.25, 2.5, 5.5]
    return np.array([1.0, 2, 4, 8]), np.array([-1.875, 0.5, 1.375]), [-2.25, 2.5, 4.25]


@pytest.mark.parametrize(("mode", "padding", "align_corners"), COMBOS)
def test_closed_form_1d_by_hand(mode: str, padding: str, align_corners: bool) -> None:
    values, g, positions = _by_hand_inputs(align_corners)
    actual = grid_sample(values.reshape(1, 1, -1), g.reshape(1, -1, 1), mode, padding, align_corners)
    assert actual.tolist() == [[BY_HAND[mode, padding, align_corners]]]
    # the explicit formula agrees with the hand values, so it can be trusted in 2-D and 3-D
    assert [oracle_1d(values.tolist(), x, mode, padding, align_corners) for x in positions] == \
        BY_HAND[mode, padding, align_corners]


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize(("mode", "padding", "align_corners"), COMBOS)
def test_closed_form_nd(rank: int, mode: str, padding: str, align_corners: bool) -> None:
    """Data that is a product of one signal per axis, d[i, j, k] = a[i]·b[j]·c[k]: every padding
    mode pads each axis on its own (zeros: a tap outside any axis reads 0 = a product with a 0),
    so the N-linear/N-cubic/nearest result is the product of the 1-D results (oracle_1d) at the
    point's position on each axis (3-D cubic included: 4×4×4 taps)."""
    rng = np.random.default_rng(rank)
    lengths = {1: (5,), 2: (4, 3), 3: (3, 2, 4)}[rank]
    signals = [rng.uniform(0.5, 2.0, size=length).tolist() for length in lengths]
    data = functools.reduce(np.multiply.outer, [np.array(s) for s in signals]).reshape(1, 1, *lengths)
    grid = rng.uniform(-1.8, 1.8, size={1: (1, 7, 1), 2: (1, 3, 4, 2), 3: (1, 2, 2, 3, 3)}[rank])
    actual = grid_sample(data, grid, mode, padding, align_corners)
    for point in np.ndindex(*grid.shape[1:-1]):
        g = grid[(0, *point)][::-1]  # outermost axis first
        expected = 1.0
        for signal, gk in zip(signals, g):
            length = len(signal)
            x = (gk + 1) / 2 * (length - 1) if align_corners else ((gk + 1) * length - 1) / 2
            expected *= oracle_1d(signal, x, mode, padding, align_corners)
        assert actual[(0, 0, *point)] == pytest.approx(expected, rel=1e-12, abs=1e-12)


# --- the reference form, bit for bit ---------------------------------------------------

_SMALL_DTYPES = [np.dtype(n) for n in ("float64", "float32", "float16", "int16", "uint8", "complex128")]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_kernel_equals_reference(draw: st.DataObject) -> None:
    """The vectorised kernel and reference.grid_sample make the same operations in the same
    order (positions, taps, weights, sums innermost axis first): the same bits, in every rank,
    mode, padding and dtype, for grids reaching far outside, huge and non-finite values included."""
    rank = draw.draw(st.integers(1, 3))
    mode = draw.draw(st.sampled_from(MODES))
    padding = draw.draw(st.sampled_from(PADDINGS))
    align_corners = draw.draw(st.booleans())
    dtype = draw.draw(st.sampled_from(_SMALL_DTYPES))
    seed = draw.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    lengths = tuple(int(v) for v in rng.integers(1, 5, size=rank))
    points = tuple(int(v) for v in rng.integers(1, 4, size=rank)) if rank < 3 else (2, 2, 1)
    data = (rng.normal(size=(2, 2, *lengths)) * 50).astype(dtype)
    grid = rng.uniform(-3, 3, size=(2, *points, rank))
    specials = [np.nan, np.inf, -np.inf, 1e300, -1e300, 1.7e308, -1.0, 1.0, 0.0]
    for _ in range(draw.draw(st.integers(0, 3))):
        grid[(int(rng.integers(2)), *(int(rng.integers(p)) for p in points), int(rng.integers(rank)))] = \
            specials[int(rng.integers(len(specials)))]
    fill = draw.draw(st.sampled_from([0, 3, -2] if dtype.kind != "u" else [0, 3]))
    with np.errstate(over="ignore", invalid="ignore"):
        expected = reference.grid_sample(data, grid, mode, padding, align_corners, fill)
    assert_same(grid_sample(data, grid, mode, padding, align_corners, fill=fill), expected)


@pytest.mark.parametrize(("mode", "padding", "align_corners"), COMBOS)
def test_kernel_equals_reference_float32_grid(mode: str, padding: str, align_corners: bool) -> None:
    """A float32 grid over float32 data, in many slabs on two threads: the same bits too."""
    rng = np.random.default_rng(3)
    data = rng.normal(size=(1, 2, 6, 7)).astype(np.float32)
    grid = rng.uniform(-1.5, 1.5, size=(1, 5, 9, 2)).astype(np.float32)
    expected = reference.grid_sample(data, grid, mode, padding, align_corners)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "_SLAB_BYTES", 1)
        patch.setattr(module, "_PARALLEL_VALUES", 1)
        plan = module._Plan(mode, padding, align_corners, (6, 7), (7, 1), data.dtype, np.zeros((), data.dtype), True,
                            np.dtype(np.float64), 2.0**-23)
        assert module._slab_points(plan, 2) == 256
    assert_same(grid_sample(data, grid, mode, padding, align_corners), expected)


@pytest.mark.parametrize(("mode", "padding", "align_corners"), COMBOS)
@pytest.mark.parametrize("dtype", ["float64", "uint8", "complex64"])
def test_fast_paths_equal_reference(mode: str, padding: str, align_corners: bool, dtype: str) -> None:
    """Data longer than the taps: points whose taps all lie inside go by flat offsets, the others
    (a band along the edges, and the points wholly outside, which read only fill) are kept and
    done together after several slabs, across batch items. The same bits as the reference, 2-D
    and 3-D, with a fill that is not 0 (NaN in a pixel, too, where the dtype has it)."""
    rng = np.random.default_rng(21)
    for shape, points in [((3, 2, 9, 11), (3, 4, 5)), ((2, 1, 5, 6, 5), (2, 2, 2, 3))]:
        data = (rng.normal(size=shape) * 60 + 100).astype(dtype)
        if dtype != "uint8":
            data.flat[7] = np.nan
        grid = rng.uniform(-1.7, 1.7, size=(*points, len(shape) - 2))
        grid[0, 0, 0] = np.nan
        expected = reference.grid_sample(data, grid, mode, padding, align_corners, 3)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(module, "_PARALLEL_VALUES", 1)
            patch.setattr(module, "_slab_points", lambda plan, channels: 4)  # many slabs per batch item
            threads = 2 if dtype == "float64" else 1  # two threads on tiny slabs mostly wait for each other
            actual = grid_sample(data, grid, mode, padding, align_corners, fill=3, threads=threads)
        assert_same(actual, expected)


def test_reference_reflection_agrees_with_the_spec_words() -> None:
    """reference.reflect (one fmod) and reference.mirror_index (integer arithmetic) against the
    spec's "reflected again and again until in bound", and mirror_index against onnxruntime's
    float reflection of an index (GsReflect: n = int(dx / range), r = dx - n·range)."""
    def ort_reflect(x: float, low: float, high: float) -> float:
        span = high - low
        if x < low:
            n, r = divmod_int(low - x, span)
            return low + r if n % 2 == 0 else high - r
        if x > high:
            n, r = divmod_int(x - high, span)
            return high - r if n % 2 == 0 else low + r
        return x

    def divmod_int(dx: float, span: float) -> tuple[int, float]:
        n = int(dx / span)
        return n, dx - n * span

    for length in (1, 2, 3, 5):
        for align_corners in (False, True):
            low, high = reference.borders(length, align_corners)
            for i in range(-25, 26):
                expected = int(bounce(float(i), low, high))
                assert reference.mirror_index(i, length, align_corners) == expected
                if high > low:
                    assert int(ort_reflect(float(i), low, high)) == expected
            for x in np.linspace(-12.3, 14.1, 97):
                assert reference.reflect(float(x), low, high) == pytest.approx(bounce(float(x), low, high), abs=1e-12)


# --- properties -----------------------------------------------------------------------


def _identity_grid(lengths: tuple[int, ...]) -> np.ndarray:
    """align_corners=1 positions of every pixel, exact: each L - 1 a power of two (or L = 1)."""
    axes = [np.linspace(-1, 1, length) if length > 1 else np.zeros(1) for length in lengths]
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack(mesh[::-1], axis=-1)[None]  # x (innermost) first


# bool and strings take nearest only: see test_every_dtype_works_or_raises
TAKEN = [(dtype, mode) for dtype in ALL_DTYPES for mode in MODES if mode == "nearest" or dtype.kind not in "bUT"]


@pytest.mark.parametrize(("dtype", "mode"), TAKEN, ids=str)
def test_identity_grid_returns_data_exactly(dtype: np.dtype, mode: str, rng: np.random.Generator) -> None:
    """Each position lands on a pixel (t = 0): linear weights are (1, 0) and Keys' (0, 1, 0, 0)
    exactly, so every mode gives the data back bit for bit, in every dtype it takes (1-D to 3-D)."""
    for lengths in [(5,), (3, 9), (2, 3, 5)]:
        data = make_array(rng, (1, 2, *lengths), dtype)
        for padding in PADDINGS:
            assert_same(grid_sample(data, _identity_grid(lengths), mode, padding, True), data)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from(PADDINGS))
def test_whole_pixel_grid_with_nearest_is_fancy_indexing(rank: int, seed: int, align_corners: bool,
                                                         padding: str) -> None:
    rng = np.random.default_rng(seed)
    lengths = tuple(int(v) for v in rng.integers(1, 6, size=rank))
    data = make_array(rng, (2, 3, *lengths), np.dtype(np.int32))
    out_shape = tuple(int(v) for v in rng.integers(1, 4, size=rank))
    indices = [rng.integers(0, length, size=(2, *out_shape)) for length in lengths]
    coordinates = []
    for index, length in zip(indices, lengths):
        if align_corners:
            coordinates.append(2 * index / (length - 1) - 1 if length > 1 else np.zeros(index.shape))
        else:
            coordinates.append((2 * index + 1) / length - 1)
    grid = np.stack(coordinates[::-1], axis=-1)
    expected = np.stack([data[n][(slice(None), *(index[n] for index in indices))] for n in range(2)])
    np.testing.assert_array_equal(grid_sample(data, grid, "nearest", padding, align_corners), expected)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_every_dtype_works_or_raises(dtype: np.dtype, mode: str, rng: np.random.Generator) -> None:
    """Every ONNX tensor type: a result of its dtype equal to the reference's, or for bool and
    strings under linear/cubic the documented GeomError."""
    data = make_array(rng, (1, 2, 3, 4), dtype)
    grid = rng.uniform(-1.3, 1.3, size=(1, 2, 5, 2))
    if mode != "nearest" and dtype.kind in "bUT":
        with pytest.raises(GeomError, match=r"interpolates numbers; .* takes mode 'nearest' only"):
            grid_sample(data, grid, mode)
        return
    actual = grid_sample(data, grid, mode, "reflection")
    assert actual.dtype == dtype and actual.shape == (1, 2, 2, 5)
    assert_same(actual, reference.grid_sample(data, grid, mode, "reflection"))


@pytest.mark.parametrize("dtype", [np.dtype(np.longdouble), np.dtype(object), np.dtype("datetime64[s]"),
                                   np.dtype("V4"), np.dtype(np.clongdouble)], ids=str)
def test_unsupported_data_dtypes_raise(dtype: np.dtype) -> None:
    if dtype == np.float64 or dtype == np.complex128:  # where long double is double
        pytest.skip("long double is double here")
    with pytest.raises(GeomError, match=r"data must be bool, int8-int64, .* found dtype"):
        grid_sample(np.zeros((1, 1, 2, 2), dtype), np.zeros((1, 1, 1, 2)))


@pytest.mark.parametrize("grid_dtype", FLOAT_DTYPES, ids=str)
def test_every_grid_float_type(grid_dtype: np.dtype) -> None:
    """float16/32/64 and bfloat16 grids: positions are their exact float64 values."""
    data = np.arange(12.0).reshape(1, 1, 3, 4)
    grid = np.array([[[[-0.5, 0.25], [0.75, -1.0]]]]).astype(grid_dtype)
    assert_same(grid_sample(data, grid), grid_sample(data, grid.astype(np.float64)))


def test_integers_round_half_to_even() -> None:
    """Midway values (x.5 exactly) round to the even integer, as np.rint: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0."""
    data = np.array([0, 1, 2, 3, 0, -1], np.int16).reshape(1, 1, 6)
    grid = (np.array([0.5, 1.5, 2.5, 4.5]) / 2.5 - 1).reshape(1, 4, 1)  # align_corners: x = (g + 1)·2.5
    assert grid_sample(data, grid, "linear", align_corners=True).ravel().tolist() == [0, 2, 2, 0]


@pytest.mark.parametrize(("dtype", "low", "high"), [("uint8", 0, 255), ("int8", -128, 127), ("uint16", 0, 65535)])
def test_integers_saturate(dtype: str, low: int, high: int) -> None:
    """Keys' kernel overshoots at a step: the float64 value past the range saturates, never wraps."""
    data = np.array([low, low, high, high], dtype).reshape(1, 1, 4)
    grid = ((np.array([0.8, 2.2]) / 1.5) - 1).reshape(1, 2, 1)  # align_corners, L = 4: x = 0.8 and 2.2
    wide = reference.grid_sample(data.astype(np.float64), grid, "cubic", "border", True)
    assert wide.min() < low and wide.max() > high  # the float64 result leaves the range
    assert grid_sample(data, grid, "cubic", "border", True).ravel().tolist() == [low, high]


def test_int64_past_2_53_is_rounded_to_float64_first() -> None:
    """Documented: linear/cubic see int64 as float64, so 2**53 + 1 comes back as 2**53; nearest copies it."""
    data = np.array([2**53 + 1, 2**53 + 1], np.int64).reshape(1, 1, 2)
    grid = np.array([[[-1.0]]])
    assert grid_sample(data, grid, "linear", align_corners=True).item() == 2**53
    assert grid_sample(data, grid, "nearest", align_corners=True).item() == 2**53 + 1


def test_bfloat16_is_rounded_once() -> None:
    """1 + 2**-8 + 2**-37 lies just past the midpoint of bfloat16's 1 and 1 + 2**-7: rounded once it
    is 1 + 2**-7; through float32 it would land on the midpoint and go to the even 1."""
    data = np.array([1.0, 1.0 + 2**-7], ml_dtypes.bfloat16).reshape(1, 1, 2)
    grid = np.array([[[2.0**-29]]])  # align_corners, L = 2: x = 0.5 + 2**-30
    assert float(grid_sample(data, grid, align_corners=True).item()) == 1.0 + 2**-7
    assert float(np.float32(1 + 2**-8 + 2**-37).astype(ml_dtypes.bfloat16)) == 1.0


def test_complex_interpolates_both_parts() -> None:
    """Each part on its own: an infinite imaginary part leaves the real part finite (numpy's
    complex product would make it NaN: 0 × Inf)."""
    rng = np.random.default_rng(5)
    real, imag = rng.normal(size=(2, 1, 2, 4, 4))
    data = real + 1j * imag
    imag[0, 0, 0, 0] = data.imag[0, 0, 0, 0] = np.inf
    grid = rng.uniform(-1.2, 1.2, size=(1, 3, 3, 2))
    for mode in ("linear", "cubic"):
        with np.errstate(invalid="ignore"):
            imag_part = grid_sample(imag, grid, mode)
        both = grid_sample(data, grid, mode)
        assert_same(both.real, grid_sample(real, grid, mode))
        assert_same(both.imag, imag_part)
        assert np.isfinite(both.real).all()


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize(("mode", "padding", "align_corners"), COMBOS)
def test_non_finite_positions_read_fill(mode: str, padding: str, align_corners: bool, compiled: bool,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """NaN, Inf and -Inf in any coordinate read fill, in every padding mode; huge finite
    coordinates take the padding and finish at once, those whose position overflows float64
    too (1.7e308 on 4 pixels: the position is past 3e308; it read fill, also under border)."""
    if not compiled:
        monkeypatch.setattr(module, "_compiled", None)
    data = np.arange(1.0, 13.0).reshape(1, 1, 3, 4)
    bad = [(np.nan, 0.0), (0.0, np.inf), (-np.inf, 0.3)]
    grid = np.array([[bad + [(1e300, 0.0), (-1e300, 1e300), (1.7e308, 0.0), (-1.7e308, 1.7e308)]]])
    actual = grid_sample(data, grid, mode, padding, align_corners, fill=-7)
    assert actual[0, 0, 0, :3].tolist() == [-7] * 3
    huge = actual[0, 0, 0, 3:]
    if padding == "zeros":
        assert huge.tolist() == [-7] * 4  # every tap outside
    elif padding == "border":
        assert huge.tolist() == [8, 9, 8, 9]  # the right end of row 1; the bottom-left corner
    else:
        assert np.isin(huge, data).all()  # some pixel, mirrored in
    with np.errstate(over="ignore"):
        assert_same(actual, reference.grid_sample(data, grid, mode, padding, align_corners, -7))


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_fill_reaches_only_the_points_it_weighs_in(mode: str, align_corners: bool, compiled: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A NaN fill marks what lies outside: the pixel centres of the data (the identity grid: the
    edge rows' taps past the edge weigh 0) read their pixels exactly, 2-D and 3-D, while a point
    a quarter pixel past the last centre, whose tap outside counts, reads NaN. It spread one
    pixel (linear) or two (cubic) into the picture. (Lengths whose centres AffineGrid's float
    coordinates hit exactly: 2**k + 1 with align_corners, 2**k without.)"""
    from geomcli.ops.affine_grid import affine_grid

    if not compiled:
        monkeypatch.setattr(module, "_compiled", None)
    rng = np.random.default_rng(5)
    lengths = (3, 5, 9) if align_corners else (2, 4, 8)
    for theta, size in [(np.eye(2, 3)[None], (1, 2, *lengths[1:])), (np.eye(3, 4)[None], (1, 2, *lengths))]:
        data = rng.normal(size=size)
        grid = affine_grid(theta, size, align_corners).astype(np.float64)
        np.testing.assert_array_equal(grid_sample(data, grid, mode, align_corners=align_corners, fill=np.nan), data)
        grid[..., 0] += 0.5 / (size[-1] - 1 if align_corners else size[-1])  # x a quarter pixel on
        past = grid_sample(data, grid, mode, align_corners=align_corners, fill=np.nan)
        reached = slice(0, -1) if mode == "linear" else slice(1, -2)  # x + 0.25 with taps only inside
        assert np.isnan(past[..., -1]).all() and not np.isnan(past[..., reached]).any()


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_a_pixel_centre_an_ulp_off_still_reads_its_pixel_not_fill(mode: str, dtype: Any, compiled: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """An identity warp with a NaN fill: AffineGrid's coordinates of the edge pixels' centres lie
    an ulp or so past them for most lengths (120 x 160: x = -4.7e-7), and their taps outside,
    weighted by that rounding alone, made 320 edge pixels NaN. Such a tap (at most fill_epsilon x
    the axis's length) reads 0 now, as the reference says; one a thousandth of a pixel out still
    reads fill, a point wholly outside reads fill by all its weights, and fill 0 changes no bit."""
    from geomcli.ops.affine_grid import affine_grid

    if not compiled:
        monkeypatch.setattr(module, "_compiled", None)
    data = np.random.default_rng(6).normal(size=(1, 2, 12, 20))
    grid = affine_grid(np.eye(2, 3, dtype=dtype)[None], data.shape, False)
    same = grid_sample(data, grid, mode, fill=np.nan)
    assert not np.isnan(same).any()
    np.testing.assert_allclose(same, data, rtol=0, atol=1e-5)
    assert_same(same, reference.grid_sample(data, grid, mode, fill=np.nan))
    assert_same(grid_sample(data, grid, mode), reference.grid_sample(data, grid, mode))
    pushed = grid.copy()
    pushed[..., 0] -= np.asarray(2e-3 / 20, dtype)  # a thousandth of a pixel past the left centres
    assert np.isnan(grid_sample(data, pushed, mode, fill=np.nan)[..., 0]).all()
    away = np.full((1, 1, 3, 2), -5.0, dtype)
    away[..., 1] = grid[:, :1, :3, 1]  # wholly left of the data, beside rows whose centres are an ulp off
    outside = grid_sample(data, away, mode, fill=7.0)  # fill interpolated by every weight, as before
    assert_same(outside, reference.grid_sample(data, away, mode, fill=7.0))
    np.testing.assert_allclose(outside, 7.0, rtol=1e-15)


@pytest.mark.parametrize("mode", MODES)
def test_fill_is_honoured(mode: str) -> None:
    """zeros padding: a tap outside reads fill, in data's dtype: a point wholly outside gives it,
    a point half outside (x = -0.5 without align_corners) mixes it in."""
    data = np.full((1, 1, 2, 2), 100, np.uint8)
    grid = np.array([[[[-3.0, 0.0], [-1.0, -0.5]]]])
    result = grid_sample(data, grid, mode, fill=20).ravel().tolist()
    assert result[0] == 20
    assert result[1] == {"nearest": 100, "linear": 60, "cubic": round(20 * keys(1.5) + 20 * keys(0.5)
                                                                       + 100 * keys(0.5) + 100 * keys(1.5))}[mode]
    assert grid_sample(np.array(["ab", "cd"]).reshape(1, 1, 2), np.array([[[5.0]]]), "nearest",
                       fill="zz").item() == "zz"
    assert grid_sample(np.array(["ab", "cd"]).reshape(1, 1, 2), np.array([[[5.0]]]), "nearest").item() == ""
    assert grid_sample(np.ones((1, 1, 2), complex), np.array([[[5.0]]]), fill=2 - 1j).item() == 2 - 1j
    assert grid_sample(np.ones((1, 1, 2), bool), np.array([[[5.0]]]), "nearest").item() is False


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("align_corners", [False, True])
def test_reflection_on_a_length_1_axis_reads_its_only_pixel(mode: str, align_corners: bool) -> None:
    """Every tap reads the one pixel: each mode gives it exactly."""
    data = np.array([[[[2.0]]]])
    grid = np.array([[[[-3.3, -1.0], [0.4, 1.0], [7.9, 0.2], [1.0, 1.0]]]])
    result = grid_sample(data, grid, mode, "reflection", align_corners)
    assert_same(result, np.full((1, 1, 1, 4), 2.0))
    assert_same(result, reference.grid_sample(data, grid, mode, "reflection", align_corners))


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("padding", ["border", "reflection"])
def test_an_axis_of_length_1_gives_its_pixel_under_border_and_reflection(mode: str, padding: str) -> None:
    """A 1x2 row [1, 2] sampled at x = 0.5 (g = 0 on W = 2): the W weights are symmetric, so 1.5
    exactly, 2 in uint8 (half to even), whatever y reads of the one row: every H tap is that row
    and the H weights sum to 1. Summed tap by tap they missed 1 by an ulp: cubic with border gave
    2, 2, 1 down a column."""
    grid = np.zeros((1, 4, 1, 2))
    grid[0, :, 0, 1] = [-0.9, 0.1, 0.7, 3.3]
    data = np.array([[[[1, 2]]]], dtype=np.uint8)
    assert grid_sample(data, grid, mode, padding).ravel().tolist() == [2, 2, 2, 2]
    assert grid_sample(data.astype(np.float64), grid, mode, padding).ravel().tolist() == [1.5] * 4
    point = np.array([[[[0.3, 0.3], [-1.7, 0.9]]]])
    assert grid_sample(np.array([[[[1.1]]]]), point, mode, padding).ravel().tolist() == [1.1, 1.1]
    assert grid_sample(np.array([[[[np.inf]]]]), point, mode, padding).ravel().tolist() == [np.inf, np.inf]
    assert_same(grid_sample(data, grid, mode, padding), reference.grid_sample(data, grid, mode, padding))


def test_empty_and_zero_size() -> None:
    grid = np.zeros((2, 3, 4, 2))
    assert grid_sample(np.zeros((2, 0, 5, 5)), grid).shape == (2, 0, 3, 4)
    assert grid_sample(np.zeros((0, 3, 5, 5)), np.zeros((0, 3, 4, 2))).shape == (0, 3, 3, 4)
    assert grid_sample(np.zeros((2, 3, 5, 5)), np.zeros((2, 0, 4, 2))).shape == (2, 3, 0, 4)
    # data with no pixel: zeros padding gives fill everywhere
    for mode in MODES:
        assert (grid_sample(np.zeros((2, 3, 0, 5)), grid, mode, fill=4) == 4).all()
        assert_same(grid_sample(np.zeros((2, 3, 0, 5)), grid, mode, fill=4),
                    reference.grid_sample(np.zeros((2, 3, 0, 5)), grid, mode, fill=4))
    with pytest.raises(GeomError, match=r"padding_mode 'border' repeats data's pixels, but a spatial axis .* empty"):
        grid_sample(np.zeros((2, 3, 0, 5)), grid, padding_mode="border")


def test_threads_and_slabs_give_the_same_result() -> None:
    rng = np.random.default_rng(11)
    data = rng.normal(size=(2, 3, 40, 50)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, size=(2, 60, 70, 2))
    for mode in MODES:
        whole = grid_sample(data, grid, mode, threads=1)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(module, "_SLAB_BYTES", 1 << 12)  # 256-point slabs
            assert_same(grid_sample(data, grid, mode, threads=2), whole)
            assert_same(grid_sample(data, grid, mode, threads=5), whole)


def test_out_and_output_made_slab_by_slab() -> None:
    """A caller with the grid in pieces (the warp command) writes each piece's rows into a view
    of one output: the same as one call."""
    rng = np.random.default_rng(12)
    data = rng.integers(0, 256, size=(1, 1, 30, 40), dtype=np.uint8)
    grid = rng.uniform(-1.1, 1.1, size=(1, 25, 33, 2)).astype(np.float32)
    whole = grid_sample(data, grid, "cubic")
    out = np.empty_like(whole)
    for start in range(0, 25, 7):
        piece = out[:, :, start:start + 7]
        assert grid_sample(data, grid[:, start:start + 7], "cubic", out=piece) is piece
    assert_same(out, whole)
    # an out whose axes do not merge (every other column of a wider array)
    wide = np.zeros((1, 1, 25, 66), np.uint8)
    assert_same(grid_sample(data, grid, "cubic", out=wide[..., ::2]), whole)


def test_strided_byte_swapped_and_list_inputs() -> None:
    rng = np.random.default_rng(13)
    base = rng.normal(size=(1, 5, 6, 2))
    data = base.transpose(0, 3, 1, 2)  # (1, 2, 5, 6), not contiguous
    grid = rng.uniform(-1.2, 1.2, size=(1, 4, 3, 4))[..., 1::2]  # strided last axis
    expected = reference.grid_sample(np.ascontiguousarray(data), np.ascontiguousarray(grid), "cubic")
    assert_same(grid_sample(data, grid, "cubic"), expected)
    swapped = grid_sample(data.astype(">f8"), grid.astype(">f4"), "cubic")
    assert swapped.dtype == np.dtype(">f8")
    np.testing.assert_allclose(swapped, grid_sample(data, grid.astype(np.float32), "cubic"), rtol=0, atol=0)
    assert grid_sample([[[1.0, 3.0]]], [[[0.0]]], align_corners=True).tolist() == [[[2.0]]]


def test_work_memory_is_bounded_by_slabs() -> None:
    """2.25M output points (nearest and linear over a broadcast grid, which owns no memory): what
    the kernel allocates besides the output stays within a few slabs' work arrays (4 MiB each),
    not the ~200 MiB of float64 arrays over every point."""
    import tracemalloc

    data = np.arange(600 * 800, dtype=np.uint8).reshape(1, 1, 600, 800)
    row = np.random.default_rng(15).uniform(-1.1, 1.1, size=(1, 1, 1500, 2))
    grid = np.broadcast_to(row, (1, 1500, 1500, 2))
    out = np.empty((1, 1, 1500, 1500), np.uint8)
    for mode in ("nearest", "linear"):
        tracemalloc.start()
        try:
            grid_sample(data, grid, mode, out=out, threads=2)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 24 << 20, f"{mode}: {peak / 2**20:.1f} MiB"


def test_four_spatial_axes() -> None:
    """Any r >= 1: a 4-D (rank-6) case against the reference."""
    rng = np.random.default_rng(14)
    data = rng.normal(size=(1, 2, 2, 3, 2, 3))
    grid = rng.uniform(-1.3, 1.3, size=(1, 2, 1, 2, 1, 4))
    for mode in MODES:
        assert_same(grid_sample(data, grid, mode, "border"), reference.grid_sample(data, grid, mode, "border"))


def test_output_shape() -> None:
    assert grid_sample_output_shape((2, 3, 10, 20), (2, 5, 6, 2)) == (2, 3, 5, 6)
    assert grid_sample_output_shape((1, 4, 2, 3, 5), (1, 7, 8, 9, 3)) == (1, 4, 7, 8, 9)
    assert grid_sample_output_shape((1, 1, 7), (1, 4, 1)) == (1, 1, 4)


# --- where others differ --------------------------------------------------------------


def test_differs_from_onnx_reference_cubic_border() -> None:
    """At x = -0.3 (align_corners, 8 pixels 0, 1, 4, ..., 49) the taps are -2 .. 1, clamped to
    0, 0, 0, 1: pixel 1 weighs far(1.3) = -0.11025. The ONNX reference first clamps x to 0 and
    reads pixel 0 alone (onnxruntime#10607 calls that a bug); onnxruntime agrees with us."""
    data = (np.arange(8.0) ** 2).reshape(1, 1, 1, 8)
    grid = np.array([[[[2 * -0.3 / 7 - 1, 0.0]]]])
    ours = grid_sample(data, grid, "cubic", "border", True).item()
    assert ours == pytest.approx(-0.11025, abs=1e-12)
    assert run_onnx_reference(data, grid, "cubic", "border", True).item() == 0.0
    assert run_onnxruntime(data, grid, "cubic", "border", True).item() == pytest.approx(ours, abs=1e-12)


def test_differs_from_onnx_reference_integers() -> None:
    """The ONNX reference weighs uint8 data with weights of data's dtype (0.5 -> 0): zeros. We
    compute in float64: 150 (linear), 178 (cubic)."""
    data = np.array([[[[100, 200]]]], np.uint8)
    grid = np.array([[[[0.0, 0.0]]]], np.float32)
    assert grid_sample(data, grid, "linear", align_corners=True).item() == 150
    assert run_onnx_reference(data, grid, "linear", "zeros", True).item() == 0
    # cubic, taps -1 .. 2 read 0, 100, 200, 0 (zeros): 0.59375 · 300 = 178.125
    assert grid_sample(data, grid, "cubic", align_corners=True).item() == 178
    assert run_onnx_reference(data, grid, "cubic", "zeros", True).item() == 0


def test_differs_from_onnx_reference_reflection_on_length_1() -> None:
    """The ONNX reference divides by the span 0 and fails; we read the only pixel."""
    data = np.array([[[[5.0]]]])
    grid = np.array([[[[0.3, 0.0]]]])
    with np.errstate(divide="ignore"), pytest.raises(OverflowError):
        run_onnx_reference(data, grid, "linear", "reflection", True)
    assert grid_sample(data, grid, "linear", "reflection", True).item() == 5.0


def test_differs_from_pytorch_nearest_reflection_tie() -> None:
    """W = 4, x = -1.5 (g = -1.5, align_corners=0). PyTorch reflects the position first (-1.5 ->
    0.5), then rounds half to even: index 0. We round first (-2, the even one) and mirror the
    index: 1, as onnxruntime and the ONNX reference do. (torch is not a test dependency: its
    order is written out here, from aten's grid_sampler_compute_source_index.)"""
    data = np.array([[[[10.0, 11.0, 12.0, 13.0]]]])
    grid = np.array([[[[-1.5, 0.0]]]])
    x = ((-1.5 + 1) * 4 - 1) / 2
    assert x == -1.5
    pytorch_index = int(np.rint(min(max(bounce(x, -0.5, 3.5), 0.0), 3.0)))  # reflect, clip, then round
    assert pytorch_index == 0
    assert grid_sample(data, grid, "nearest", "reflection").item() == 11.0
    assert run_onnxruntime(data, grid, "nearest", "reflection", False).item() == 11.0
    assert run_onnx_reference(data, grid, "nearest", "reflection", False).item() == 11.0


def test_float64_positions_differ_from_float32_near_ties() -> None:
    """L = 5, g = float32(0.2) = 0.200000003: x = 2.5000000075 in float64, index 3 for us; both
    onnxruntime and the ONNX reference compute x in float32, get 2.5 and round it to 2."""
    data = np.arange(5.0, dtype=np.float32).reshape(1, 1, 1, 5)
    grid = np.array([[[[0.2, 0.0]]]], np.float32)
    assert grid_sample(data, grid, "nearest").item() == 3.0
    assert run_onnxruntime(data, grid, "nearest", "zeros", False).item() == 2.0
    assert run_onnx_reference(data, grid, "nearest", "zeros", False).item() == 2.0


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize(("g", "onnxruntime"), [(1e7, 10.0), (1e8, 0.0), (-1e9, 0.0), (1e30, 1.0)])
def test_onnxruntime_reads_far_out_border_positions_off_the_data(g: float, onnxruntime: float,
                                                                   align_corners: bool) -> None:
    """Linear with border padding on a row 1..5 reads an edge however far out the position is
    (5 to the right, 1 to the left): so do we and the ONNX reference. onnxruntime 1.32 works in
    float32, where past 2**24 neighbouring taps are no longer 1 apart: at g = 1e7 (x = 2.5e7 + 2,
    floats 2 apart) its weights add up to 2 and it reads 10, a value not in the data; further
    out 0, and at 1e30 (past int64) the left edge, 1."""
    data = np.arange(1.0, 6.0, dtype=np.float32).reshape(1, 1, 1, 5)
    grid = np.array([[[[g, 0.0]]]], np.float32)
    edge = 5.0 if g > 0 else 1.0
    assert grid_sample(data, grid, "linear", "border", align_corners).item() == edge
    assert run_onnx_reference(data, grid, "linear", "border", align_corners).item() == edge
    assert run_onnxruntime(data, grid, "linear", "border", align_corners).item() == onnxruntime


@pytest.mark.parametrize(("padding", "row", "g", "align_corners", "onnxruntime", "onnx_reference"), [
    # x = -1 clamped to 0: taps 0 (weight 1) and 1 (weight 0); onnxruntime clamps taps -1, 0
    ("border", [1.0, np.inf], -3.0, True, 1.0, np.nan),
    # x = -0.5: we clamp it to 0; the reference keeps taps -1 and 0, onnxruntime clamps them
    ("border", [1.0, np.inf], -1.0, False, 1.0, 1.0),
    # x = -2 reflected to 2: taps 2 and 3 (weight 0); onnxruntime reflects taps -2, -1 to 2, 1
    ("reflection", [5.0, np.inf, 3.0, 7.0, 9.0], -2.0, True, np.nan, 3.0),
])
def test_padding_a_position_or_its_taps_parts_with_non_finite_data(
        padding: str, row: list[float], g: float, align_corners: bool, onnxruntime: float,
        onnx_reference: float) -> None:
    """We pad the position (border clamps x to [0, L - 1], PyTorch's clip; reflection mirrors
    it), then take taps floor(x), floor(x) + 1; onnxruntime 1.32 takes the taps of the unpadded
    x and pads each. With finite data the values agree; a tap of weight 0 (it still takes
    part, 0 · inf = NaN) can be another pixel, so an Inf there parts them. The ONNX reference
    clamps only outside [-0.5, L - 0.5] (align_corners=0)."""
    data = np.array([[[row, row]]])  # two equal rows: y = 0 (g = -1, align_corners) reads row 0
    grid = np.array([[[[g, -1.0 if align_corners else -0.5]]]])
    ours = grid_sample(data, grid, "linear", padding, align_corners).item()
    expected = 3.0 if padding == "reflection" else np.nan
    np.testing.assert_equal(ours, expected)
    np.testing.assert_equal(run_onnxruntime(data, grid, "linear", padding, align_corners).item(), onnxruntime)
    with np.errstate(invalid="ignore"):  # the reference's own 0 · inf
        reference_value = run_onnx_reference(data, grid, "linear", padding, align_corners).item()
    np.testing.assert_equal(reference_value, onnx_reference)
    finite = np.nan_to_num(data, posinf=4.0)
    assert grid_sample(finite, grid, "linear", padding, align_corners).item() == pytest.approx(
        run_onnxruntime(finite, grid, "linear", padding, align_corners).item(), abs=1e-12)


# --- errors ---------------------------------------------------------------------------

D4 = np.zeros((1, 2, 3, 4))
G4 = np.zeros((1, 5, 6, 2))


@pytest.mark.parametrize(("data", "grid", "kwargs", "match"), [
    (np.zeros((1, 2)), np.zeros((1, 1, 0)), {}, r"data must have rank >= 3 \(N, C, D1, \.\.\., Dr\), found rank 2"),
    (D4, np.zeros((1, 5, 2)), {}, r"grid must have rank 4 \(N, 2 output lengths, 2\) for data of rank 4, found rank 3"),
    (D4, np.zeros((1, 5, 6, 3)), {}, r"grid's last axis must hold 2 coordinates .* found 3 \(data shape"),
    (D4, np.zeros((2, 5, 6, 2)), {}, r"grid's batch N = 2 does not match data's N = 1"),
    (D4, G4.astype(np.int32), {}, r"grid must be float16, float32, float64 or bfloat16, found dtype int32"),
    (np.zeros((1, 2, 3, 4), object), G4, {}, r"data must be .* found dtype object"),
    ([[[1.0], [1.0, 2.0]]], G4, {}, r"data is not an array"),
    (np.ma.masked_array(D4), G4, {}, r"data is a masked array"),
    (D4, np.ma.masked_array(G4), {}, r"grid is a masked array"),
    (D4, G4, {"mode": "bilinear"}, r"mode 'bilinear' is opset 16's name; use 'linear'"),
    (D4, G4, {"mode": "bicubic"}, r"mode 'bicubic' is opset 16's name; use 'cubic'"),
    (D4, G4, {"mode": "area"}, r"mode must be 'linear', 'nearest' or 'cubic', found 'area'"),
    (D4, G4, {"mode": 1}, r"mode must be 'linear', 'nearest' or 'cubic', found 1"),
    (D4, G4, {"padding_mode": "wrap"}, r"padding_mode must be 'zeros', 'border' or 'reflection', found 'wrap'"),
    (D4, G4, {"align_corners": 2}, r"align_corners must be a bool or 0/1, found 2"),
    (D4, G4, {"align_corners": "yes"}, r"align_corners must be a bool or 0/1, found 'yes'"),
    (np.zeros((1, 2, 3, 4), bool), G4, {"mode": "cubic"}, r"mode 'cubic' interpolates numbers; bool data"),
    (np.zeros((1, 2, 3, 4), "U2"), G4, {}, r"mode 'linear' interpolates numbers; <U2 data"),
    (D4.astype(np.uint8), G4, {"fill": 300},
     r"fill 300 does not fit data's dtype uint8: not a whole number in \[0, 255\] \("),
    (D4.astype(np.int8), G4, {"fill": 0.5}, r"fill 0.5 does not fit data's dtype int8: not a whole number"),
    (D4.astype(np.int8), G4, {"fill": np.nan}, r"fill nan does not fit data's dtype int8"),
    (D4.astype(bool), G4, {"fill": 2, "mode": "nearest"}, r"fill 2 does not fit data's dtype bool"),
    (D4.astype(np.float16), G4, {"fill": 1e40},
     r"fill 1e\+40 does not fit data's dtype float16: it overflows to inf \("),
    (D4.astype(np.float32), G4, {"fill": -1e39},
     r"fill -1e\+39 does not fit data's dtype float32: it overflows to -inf \("),
    (D4.astype(np.complex64), G4, {"fill": 1e39 - 2j},
     r"fill \(1e\+39-2j\) does not fit data's dtype complex64: it overflows to \(inf-2j\) \("),
    (D4.astype(np.float32), G4, {"fill": 10**400}, r"fill 1000.* does not fit data's dtype float32"),
    (D4, G4, {"fill": 1j}, r"fill 1j does not fit data's dtype float64: a complex value for real data"),
    (D4, G4, {"fill": "x"}, r"fill 'x' does not fit data's dtype float64: text for numeric data"),
    (D4, G4, {"fill": [1]}, r"fill \[1\] does not fit .* must be one number or string"),
    (D4, G4, {"fill": None}, r"fill None does not fit .* must be one number or string"),
    (np.zeros((1, 2, 3, 4), "U2"), G4, {"fill": "abc", "mode": "nearest"}, r"fill 'abc' .* <U2: it would be cut to"),
    (np.zeros((1, 2, 3, 4), "U2"), G4, {"fill": 3, "mode": "nearest"}, r"fill 3 .* a number for string data"),
    (np.zeros((1, 2, 3, 4), "S2"), G4, {"fill": "é", "mode": "nearest"}, r"fill 'é' does not fit data's dtype \|S2"),
    (D4, G4, {"threads": 0}, r"threads must be 1 to 1024, found 0"),
    (D4, G4, {"threads": True}, r"threads must be an integer, found True"),
    (D4, G4, {"out": [0]}, r"out must be a numpy array, found list"),
    (D4, G4, {"out": np.zeros((1, 2, 5, 5))}, r"out must have shape \(1, 2, 5, 6\) and dtype float64, found shape"),
    (D4, G4, {"out": np.zeros((1, 2, 5, 6), np.float32)}, r"found shape \(1, 2, 5, 6\) and dtype float32"),
    (D4, G4, {"out": np.broadcast_to(np.zeros(()), (1, 2, 5, 6))}, r"out is read-only"),
    (D4, G4, {"out": np.ma.masked_array(np.zeros((1, 2, 5, 6)))}, r"out is a masked array"),
    (np.zeros((1, 2, 5, 6)), np.zeros((1, 5, 6, 2)), {"out": "data"}, r"out overlaps data; give a separate array"),
    (D4, np.zeros((1, 2, 5, 6)).reshape(1, 5, 6, 2), {"out": "grid"}, r"out overlaps grid; give a separate array"),
    # the kernels' one check of out (grid_sample had a copy of its own without these)
    (D4, G4, {"out": np.lib.stride_tricks.as_strided(np.zeros(60), (1, 2, 5, 6), (0, 0, 48, 8))},
     r"out has elements that share memory"),
    (D4, G4, {"out": np.zeros((1, 2, 5, 6), ">f8")}, r"dtype float64, found shape \(1, 2, 5, 6\) and dtype >f8 \(the "
                                                      r"byte order must match too"),
])
def test_errors(data: Any, grid: Any, kwargs: dict[str, Any], match: str) -> None:
    if isinstance(kwargs.get("out"), str):
        kwargs = {**kwargs, "out": {"data": data, "grid": grid}[kwargs["out"]].reshape(-1)[:60].reshape(1, 2, 5, 6)}
    with pytest.raises(GeomError, match=match):
        grid_sample(data, grid, **kwargs)


def test_errors_are_one_line_and_say_where() -> None:
    with pytest.raises(GeomError) as caught:
        grid_sample(D4, np.zeros((2, 5, 6, 2)))
    message = str(caught.value)
    assert "\n" not in message and message.endswith("(data shape (1, 2, 3, 4), grid shape (2, 5, 6, 2))")


@pytest.mark.parametrize(("data_shape", "grid_shape", "match"), [
    ((1, 2, 3.0), (1, 2, 1), r"data shape must hold integers >= 0, found \(1, 2, 3.0\)"),
    ((1, -2, 3), (1, 2, 1), r"data shape must hold integers >= 0"),
    ((1, 2, 3), 5, r"grid shape must be a sequence of integers, found 5"),
    ((1, 1, 2**40), (1, 2**40, 2**30, 1), r"grid must have rank 3"),
    ((1, 2**31, 2**20), (1, 2**40, 1), r"the output shape \(1, 2147483648, 1099511627776\) has more elements than"),
])
def test_output_shape_errors(data_shape: Any, grid_shape: Any, match: str) -> None:
    with pytest.raises(GeomError, match=match):
        grid_sample_output_shape(data_shape, grid_shape)


def test_no_warning_escapes() -> None:
    """NaN, Inf and overflowing positions are handled, not warned of (warnings are errors here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grid = np.array([[[[np.nan, np.inf], [1e308, -1e308]]]])
        for mode, padding, align_corners in COMBOS:
            grid_sample(np.ones((1, 1, 2, 2), np.float32), grid, mode, padding, align_corners, threads=1)
