"""Resize-19 (geomcli.ops.resize) against the official backend cases, onnxruntime and the ONNX
reference where they agree, our readable reference (geomcli.ops.reference), and cases worked out
by hand from the spec's formulas wherever they disagree (the Notes of ``resize``)."""

from __future__ import annotations

import math
import subprocess
import sys
import tracemalloc
from fractions import Fraction
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from conftest import ALL_DTYPES, FLOAT_DTYPES, make_array, onnx_cases
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

from geomcli.errors import GeomError
from geomcli.ops import _numeric, reference
from geomcli.ops import resize as resize_module
from geomcli.ops.center_crop_pad import center_crop_pad
from geomcli.ops.resize import resize, resize_changed_axes, resize_coordinate_map, resize_output_shape, resize_window

MODES = ["nearest", "linear", "cubic"]
TRANSFORMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
              "tf_crop_and_resize"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
F32 = np.float32


def f32(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


# --- oracles -------------------------------------------------------------------------------------


def by_reference(data: np.ndarray, roi: Any = None, scales: Any = None, sizes: Any = None, *,
                 axes: Any = None, keep_aspect_ratio_policy: str = "stretch", **attributes: Any) -> np.ndarray:
    """geomcli.ops.reference.resize with the public arguments (read by the kernel's parsers)."""
    sizing = resize_module._sizing(data.shape, scales, sizes, axes, keep_aspect_ratio_policy)
    rois = resize_module._as_roi(roi, sizing, data.shape, False)
    every_scale = [Fraction(1)] * data.ndim
    every_roi = [(Fraction(0), Fraction(1))] * data.ndim
    for position, axis in enumerate(sizing.axes):
        every_scale[axis] = sizing.scales[position]
        if rois is not None:
            every_roi[axis] = rois[position]
    options = {"mode": "nearest", "coordinate_transformation_mode": "half_pixel", "cubic_coeff_a": -0.75,
               "exclude_outside": False, "extrapolation_value": 0.0, "nearest_mode": "round_prefer_floor",
               "antialias": False, **attributes}
    options["cubic_coeff_a"] = float(F32(options["cubic_coeff_a"]))
    options["extrapolation_value"] = float(F32(options["extrapolation_value"]))
    return reference.resize(data, sizing.output_shape, every_scale, every_roi, **options)


def onnx_model(data: np.ndarray, roi: Any, scales: Any, sizes: Any, attributes: dict[str, Any]) -> Any:
    """A one-node opset-19 model, roi/scales/sizes as initialisers."""
    import onnx
    from onnx import helper, numpy_helper

    names = ["X", "roi" if roi is not None else "", "scales" if scales is not None else "",
             "sizes" if sizes is not None else ""]
    while names[-1] == "":
        names.pop()
    constants = []
    for name, value, dtype in (("roi", roi, np.float32), ("scales", scales, np.float32), ("sizes", sizes, np.int64)):
        if value is not None:
            constants.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
    node = helper.make_node("Resize", names, ["Y"], **attributes)
    element = helper.np_dtype_to_tensor_dtype(data.dtype)
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("X", element, None)],
                              [helper.make_tensor_value_info("Y", element, None)], constants)
    return helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 19)])


def by_onnxruntime(data: np.ndarray, roi: Any = None, scales: Any = None, sizes: Any = None,
                   **attributes: Any) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    session = ort.InferenceSession(onnx_model(data, roi, scales, sizes, attributes).SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"X": data})[0])


def by_onnx_reference(data: np.ndarray, roi: Any = None, scales: Any = None, sizes: Any = None,
                      **attributes: Any) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    return np.asarray(ReferenceEvaluator(onnx_model(data, roi, scales, sizes, attributes)).run(None, {"X": data})[0])


def exact_coordinates(shape: tuple[int, ...], roi: Any, scales: Any, sizes: Any, axes: Any, attributes: dict[str, Any]
                      ) -> list[tuple[int, list[Fraction]]]:
    """(input length, every output coordinate) per resized axis, exactly."""
    policy = attributes.get("keep_aspect_ratio_policy", "stretch")
    sizing = resize_module._sizing(shape, scales, sizes, axes, policy)
    rois = resize_module._as_roi(roi, sizing, shape, False)
    transform = attributes.get("coordinate_transformation_mode", "half_pixel")
    found = []
    for position, axis in enumerate(sizing.axes):
        n, out = shape[axis], sizing.output_shape[axis]
        box = rois[position] if rois is not None else (Fraction(0), Fraction(1))
        found.append((n, [reference.resize_coordinate(i, n, out, sizing.scales[position], transform, box)
                          for i in range(out)]))
    return found


def near_a_boundary(shape: tuple[int, ...], roi: Any, scales: Any, sizes: Any, axes: Any,
                    attributes: dict[str, Any], within: float, *, taps_matter: bool) -> bool:
    """Whether a coordinate lies within ``within`` of where a float32 (onnxruntime) or float64
    (the reference) evaluation can decide otherwise than the exact one: a rounding boundary of
    nearest (a half-integer, or an integer for floor/ceil), an integer for the reference's
    linear and cubic (which taps), or the edges of tf_crop_and_resize. x == 0 is exact
    everywhere and not counted."""
    mode = attributes.get("mode", "nearest")
    nearest_mode = attributes.get("nearest_mode", "round_prefer_floor")
    for n, coordinates in exact_coordinates(shape, roi, scales, sizes, axes, attributes):
        for x in coordinates:
            if x == 0:
                continue
            marks = []
            if mode == "nearest" and nearest_mode.startswith("round"):
                marks += [Fraction(math.floor(x)) + Fraction(1, 2)]
            elif mode == "nearest" or taps_matter:
                marks += [Fraction(math.floor(x)), Fraction(math.ceil(x))]
            if attributes.get("coordinate_transformation_mode") == "tf_crop_and_resize":
                marks += [Fraction(0), Fraction(n - 1)]
            if any(abs(x - mark) < within for mark in marks):
                return True
    return False


# --- the official backend cases ------------------------------------------------------------------

# The conformance data of these two encode the reference's align_corners, which divides by the
# fractional scale * n - 1; we divide by the output's integer length - 1 (see test below).
REFERENCE_ALIGN_CORNERS = {"test_resize_downsample_scales_linear_align_corners",
                           "test_resize_downsample_scales_cubic_align_corners"}


def official(name: str) -> tuple[np.ndarray, dict[str, Any], np.ndarray]:
    """(data, resize's keywords, expected) of one official case. Its inputs come without names:
    roi is the first of three, scales are floats and sizes integers."""
    case = onnx_cases("Resize")[name]
    inputs, outputs = case.data_sets[0]
    data, rest = inputs[0], list(inputs[1:])
    keywords: dict[str, Any] = dict(case.attributes)
    if len(rest) == 2:
        keywords["roi"] = rest.pop(0)
    keywords["scales" if rest[0].dtype.kind == "f" else "sizes"] = rest[0]
    return data, keywords, outputs[0]


def test_official_cases_are_all_there() -> None:
    assert len(onnx_cases("Resize")) == 39


@pytest.mark.parametrize("name", sorted(set(onnx_cases("Resize")) - REFERENCE_ALIGN_CORNERS))
def test_official_case(name: str) -> None:
    data, keywords, expected = official(name)
    got = resize(data, **keywords)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if keywords.get("mode", "nearest") == "nearest":
        np.testing.assert_array_equal(got, expected)
    else:
        # Both compute in float64 and round once to float32; another order of the same sums can
        # land one float32 step away (all 37 match exactly today).
        np.testing.assert_array_max_ulp(got, expected, maxulp=1)


def test_official_align_corners_downsamples_encode_the_references_fractional_length() -> None:
    # linear: 2x4 by 0.6 -> 1x2. The text's length_resized is 2: x = i * 3 / 1 = 0, 3.
    data, keywords, expected = official("test_resize_downsample_scales_linear_align_corners")
    np.testing.assert_allclose(expected, [[[[1, 3.142857]]]], rtol=1e-6)  # the reference: x = 3 / 1.4
    np.testing.assert_array_equal(resize(data, **keywords), [[[[1, 4]]]])
    np.testing.assert_array_equal(by_onnxruntime(data, **keywords), [[[[1, 4]]]])
    # cubic: 4x4 (1..16) by 0.8 -> 3x3, x = 0, 1.5, 3 per axis. At 1.5 Keys' weights (A=-0.75) are
    # -3/32, 19/32, 19/32, -3/32: 2.5 on a row 1..4, and the data are linear, so 4*row + col + 1.
    data, keywords, expected = official("test_resize_downsample_scales_cubic_align_corners")
    assert abs(expected[0, 0, 0, 1] - 2.395190) < 1e-5  # the reference: x = 3 / 2.2
    by_hand = np.array([[1, 2.5, 4], [7, 8.5, 10], [13, 14.5, 16]], dtype=np.float32)
    np.testing.assert_array_equal(resize(data, **keywords)[0, 0], by_hand)
    np.testing.assert_allclose(by_onnxruntime(data, **keywords)[0, 0], by_hand, rtol=1e-6)


# --- onnxruntime and the ONNX reference as oracles, where they agree ----------------------------


def random_case(seed: int, *, for_onnxruntime: bool) -> tuple[np.ndarray, dict[str, Any], dict[str, Any]]:
    """A small random float32 case: (data, roi/scales/sizes/axes, attributes). For onnxruntime
    the layouts its linear and cubic take: 2-D, or 4-D resized on H and W."""
    rng = np.random.default_rng(seed)
    mode = MODES[seed % 3]
    transform = TRANSFORMS[(seed // 3) % 6]
    attributes: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": transform}
    if mode == "nearest":
        attributes["nearest_mode"] = NEAREST_MODES[(seed // 18) % 4]
    else:
        attributes["antialias"] = int(rng.random() < 0.5)
        # onnxruntime takes exclude_outside for linear only with antialias
        if mode == "cubic" or attributes["antialias"]:
            attributes["exclude_outside"] = int(rng.random() < 0.4)
        if mode == "cubic" and rng.random() < 0.3:
            attributes["cubic_coeff_a"] = -0.5
    four_d = not for_onnxruntime or rng.random() < 0.7
    shape = (1, 2, *map(int, rng.integers(1, 8, 2))) if four_d else tuple(map(int, rng.integers(1, 8, 2)))
    inputs: dict[str, Any] = {"axes": [2, 3] if four_d else [0, 1]}
    if not for_onnxruntime and rng.random() < 0.5:
        inputs["axes"] = [-1] if rng.random() < 0.5 else [3, 1]
    count = len(inputs["axes"])
    if rng.random() < 0.5:
        inputs["scales"] = np.round(rng.uniform(0.3, 3.0, count), 1).astype(np.float32)
    else:
        inputs["sizes"] = rng.integers(1, 12, count)
        if rng.random() < 0.3:
            attributes["keep_aspect_ratio_policy"] = ["not_larger", "not_smaller"][seed % 2]
    if transform == "tf_crop_and_resize":
        start = np.round(rng.uniform(-0.3, 0.6, count), 2)
        inputs["roi"] = np.concatenate([start, np.round(start + rng.uniform(0.2, 1.0, count), 2)]).astype(np.float32)
        attributes["extrapolation_value"] = float(rng.choice([0.0, 7.0]))
    return rng.random(shape, dtype=np.float32), inputs, attributes


def where_onnxruntime_differs(data: np.ndarray, inputs: dict[str, Any], attributes: dict[str, Any]) -> str:
    """Why onnxruntime may differ on this case (the Notes of resize), or ""."""
    sizing = resize_module._sizing(data.shape, inputs.get("scales"), inputs.get("sizes"), inputs["axes"],
                                   attributes.get("keep_aspect_ratio_policy", "stretch"))
    kept = [sizing.output_shape[axis] == data.shape[axis] for axis in sizing.axes]
    transform = attributes["coordinate_transformation_mode"]
    if sizing.output_shape == data.shape:
        return "copies an unchanged shape"
    if any(k and scale != 1 for k, scale in zip(kept, sizing.scales)) and attributes.get("antialias"):
        return "copies an axis kept by a scale != 1 under antialias"
    if transform == "tf_crop_and_resize" and any(kept):
        return "copies an axis of unchanged length under tf_crop_and_resize"
    if near_a_boundary(data.shape, inputs.get("roi"), inputs.get("scales"), inputs.get("sizes"), inputs["axes"],
                       attributes, 1e-4, taps_matter=False):
        return "works in float32 near a rounding boundary"
    return ""


ORACLE_SEEDS = range(100)


@pytest.mark.parametrize("seed", ORACLE_SEEDS)
def test_onnxruntime_agrees(seed: int) -> None:
    data, inputs, attributes = random_case(seed, for_onnxruntime=True)
    if where_onnxruntime_differs(data, inputs, attributes):
        return
    ours = resize(data, **inputs, **attributes)
    theirs = by_onnxruntime(data, inputs.get("roi"), inputs.get("scales"), inputs.get("sizes"),
                            axes=inputs["axes"], **attributes)
    assert ours.shape == theirs.shape
    # onnxruntime works in float32: coordinates and weights to ~1e-7, sums of ~10 taps
    np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-5)


def test_the_oracles_run_on_most_cases() -> None:
    runs = [seed for seed in ORACLE_SEEDS if not where_onnxruntime_differs(*random_case(seed, for_onnxruntime=True))]
    assert len(runs) >= 65
    runs = [seed for seed in ORACLE_SEEDS
            if not where_the_reference_differs(*random_case(seed + 1000, for_onnxruntime=False))]
    assert len(runs) >= 30


def where_the_reference_differs(data: np.ndarray, inputs: dict[str, Any], attributes: dict[str, Any]) -> str:
    transform = attributes["coordinate_transformation_mode"]
    sizing = resize_module._sizing(data.shape, inputs.get("scales"), inputs.get("sizes"), inputs.get("axes"),
                                   attributes.get("keep_aspect_ratio_policy", "stretch"))
    fractional = any(scale * data.shape[axis] != sizing.output_shape[axis]
                     for scale, axis in zip(sizing.scales, sizing.axes))
    if transform in ("align_corners", "tf_crop_and_resize") and fractional:
        return "divides by the fractional scale * n - 1"
    if transform == "pytorch_half_pixel" and any(sizing.output_shape[axis] == 1 for axis in sizing.axes):
        return "reads -0.5 at an output length of 1"
    if inputs.get("scales") is not None and any(
            math.floor(data.shape[axis] * float(F32(scale))) != sizing.output_shape[axis]
            for scale, axis in zip(inputs["scales"], sizing.axes)):
        return "takes the binary value of a float32 scale for the length"
    if near_a_boundary(data.shape, inputs.get("roi"), inputs.get("scales"), inputs.get("sizes"), inputs.get("axes"),
                       attributes, 1e-6, taps_matter=True):
        return "takes float64 (and its float32 roi and scales) for exact near a boundary"
    return ""


@pytest.mark.parametrize("seed", ORACLE_SEEDS)
def test_onnx_reference_agrees(seed: int) -> None:
    data, inputs, attributes = random_case(seed + 1000, for_onnxruntime=False)
    if where_the_reference_differs(data, inputs, attributes):
        return
    ours = resize(data, **inputs, **attributes)
    # the reference's axes must come sorted and positive (else numpy's transpose fails in it)
    axes = [axis % data.ndim for axis in inputs["axes"]]
    order = np.argsort(axes)
    given = {name: np.asarray(inputs[name])[order] for name in ("scales", "sizes") if name in inputs}
    if "roi" in inputs:
        given["roi"] = np.concatenate([inputs["roi"][: len(axes)][order], inputs["roi"][len(axes):][order]])
    theirs = by_onnx_reference(data, given.get("roi"), given.get("scales"), given.get("sizes"),
                               axes=sorted(axes), **attributes)
    assert ours.shape == theirs.shape
    # the reference's cubic weights come out to ~1e-7 (float32 somewhere in its arithmetic)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


# --- the fast kernel against the readable reference ----------------------------------------------


@pytest.mark.parametrize("seed", range(100))
def test_kernel_matches_readable_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    data, inputs, attributes = random_case(seed + 5000, for_onnxruntime=False)
    dtype = [np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.uint8), np.dtype(np.int16)][seed % 4]
    if dtype.kind == "f":
        data = data.astype(dtype)
    else:
        data = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, size=data.shape, endpoint=True).astype(dtype)
    ours = resize(data, **inputs, **attributes)
    slow = by_reference(data, **inputs, **attributes)
    assert ours.dtype == slow.dtype == dtype
    if attributes["mode"] == "nearest":
        np.testing.assert_array_equal(ours, slow)  # a gather
    elif dtype.kind in "iu":
        assert_rounded_from(ours, by_reference(data.astype(np.float64), **inputs, **attributes))
    elif dtype == np.float32:
        np.testing.assert_array_max_ulp(ours, slow, maxulp=1)
    else:
        np.testing.assert_allclose(ours, slow, rtol=1e-12, atol=1e-12)


LAYOUTS = [  # (shape, sizes, axes): each way the kernel goes
    ((2, 9, 11), [5, 7], [1, 2]),  # two passes at once, the second axis last
    ((9, 11, 3), [4, 17], [0, 1]),  # two at once, channels after the second (its run transposed)
    ((6, 11, 20), [3, 5], [0, 1]),  # two at once, many values after the second
    ((9, 11, 3), [7, 3], [1, 0]),  # the later axis shrinks more, so goes first: one pass each
    ((5, 6, 7), [3, 9, 4], None),  # three passes
    ((40, 3), [13], [0]),  # one pass, few values after it
    ((4, 50), [21], [1]),  # one pass along a last axis
    ((30, 20), [11], [0]),  # one pass with many values after it
]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize(("shape", "sizes", "axes"), LAYOUTS)
@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64", "complex64"])
def test_every_path_of_the_kernel(shape: tuple[int, ...], sizes: list[int], axes: list[int] | None, dtype: str,
                                  compiled: bool, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    # tiny pieces and products, and two threads, make small arrays take every branch: runs of
    # bands, split products, column chunks, threaded jobs; the compiled passes in many jobs; and
    # the numpy path where the compiled kernel would take the case
    if not compiled:
        monkeypatch.setattr(resize_module, "_compiled", None)
    monkeypatch.setattr(resize_module, "_PIECE", 64)
    monkeypatch.setattr(resize_module, "_PRODUCT", 300)
    data = make_array(rng, shape, np.dtype(dtype))
    for keywords in ({"mode": "linear", "antialias": True}, {"mode": "cubic", "exclude_outside": True},
                     {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
                      "roi": [-0.1] * len(sizes) + [0.9] * len(sizes), "extrapolation_value": 3.0}):
        ours = resize(data, sizes=sizes, axes=axes, threads=2, **keywords)
        assert ours.dtype == data.dtype
        assert_rounded_from(ours, by_reference(data.astype(_numeric.working_dtype(data.dtype)), sizes=sizes, axes=axes,
                                               **keywords))


# --- a window of the output: the same bits, less work -----------------------------------------


def random_window(rng: np.random.Generator, shape: tuple[int, ...]) -> list[slice]:
    starts = [int(rng.integers(0, length + 1)) for length in shape]
    return [slice(start, int(rng.integers(start, length + 1))) for start, length in zip(starts, shape)]


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_a_window_is_the_resize_cut_bit_for_bit(dtype: np.dtype, seed: int) -> None:
    rng = np.random.default_rng(seed)
    data, inputs, attributes = random_case(seed + 7000, for_onnxruntime=False)
    data = make_array(rng, data.shape, dtype)
    if dtype.kind == "f" and seed % 3 == 0:  # inf and nan spread alike in the window
        data.flat[int(rng.integers(0, data.size))] = np.inf
        data.flat[int(rng.integers(0, data.size))] = np.nan
    if dtype.kind in "bUT":
        attributes = {"mode": "nearest", **{name: value for name, value in attributes.items()
                                            if name in ("coordinate_transformation_mode", "nearest_mode")}}
        if attributes["coordinate_transformation_mode"] == "tf_crop_and_resize":
            attributes["coordinate_transformation_mode"] = "half_pixel"  # strings have no extrapolation value
    whole = resize(data, **inputs, **attributes)
    for _ in range(4):
        window = random_window(rng, whole.shape)
        part = resize_window(data, window, **inputs, **attributes)
        expected = whole[tuple(window)]
        assert part.shape == expected.shape and part.dtype == expected.dtype
        assert part.tobytes() == expected.tobytes()
        assert part.base is None or part.base.size == part.size  # no view that keeps the whole alive


def test_a_window_makes_only_its_outputs_where_the_bits_allow(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[int, ...]] = []
    apply = resize_module._apply
    monkeypatch.setattr(resize_module, "_apply", lambda array, shape, *rest: made.append(shape) or apply(array, shape,
                                                                                                            *rest))
    photo = np.zeros((375, 500, 3), dtype=np.uint8)
    recipe = {"sizes": [256, 256], "axes": [0, 1], "keep_aspect_ratio_policy": "not_smaller", "mode": "linear",
              "antialias": True}
    window = [slice(16, 240), slice(58, 282), slice(None)]
    assert resize_window(photo, window, **recipe).shape == (224, 224, 3)
    assert made == [(224, 224, 3)]  # the compiled kernel: each output its own sum
    made.clear()
    resize_window(photo.astype(np.complex64), window, **recipe)
    assert made == [(256, 341, 3)]  # the numpy path's products: the whole, then the window


def test_a_window_takes_a_slice_per_axis() -> None:
    with pytest.raises(GeomError, match="one slice of step 1 per axis of the output"):
        resize_window(np.zeros((4, 4)), [slice(0, 2)], sizes=[2, 2])
    with pytest.raises(GeomError, match="one slice of step 1"):
        resize_window(np.zeros((4, 4)), [slice(0, 2, 2), slice(None)], sizes=[2, 2])


def test_the_benchmark_runs_small() -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "benchmarks/resize.py", "--small", "--repeat", "1"], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("max |geomcli - ort|") == 3 and "Pillow" in done.stdout


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dtype", ["uint8", "float32", "float16", "int64"])
def test_threads_and_out_give_the_same_bits(mode: str, dtype: str, rng: np.random.Generator) -> None:
    """threads= and out= as the other kernels take them: any thread count, an out of any strides
    (a C-contiguous one written in place), the same bits; out is what is returned."""
    data = make_array(rng, (3, 400, 300), np.dtype(dtype))  # outputs past 4 MiB of float64 work: threads share it
    kwargs: dict[str, Any] = {"sizes": [700, 520], "axes": [1, 2], "mode": mode}
    expected = resize(data, **kwargs, threads=1)
    assert_array_equal(resize(data, **kwargs, threads=2), expected, strict=True)
    for out in (np.empty((3, 700, 520), dtype), np.empty((520, 700, 3), dtype).transpose(2, 1, 0)):
        assert resize(data, **kwargs, out=out) is out
        assert_array_equal(out, expected, strict=True)
    with pytest.raises(GeomError, match=r"^resize: threads must be 1 to 1024, found 0"):
        resize(data, **kwargs, threads=0)
    with pytest.raises(GeomError, match=r"^resize: out must"):
        resize(data, **kwargs, out=np.empty((3, 700, 521), dtype))
    with pytest.raises(GeomError, match=r"^resize: out"):
        resize(data, **kwargs, out=np.empty((3, 700, 520), "complex128"))


def test_matmul_stays_below_the_product_size(monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator) -> None:
    monkeypatch.setattr(resize_module, "_PRODUCT", 50)
    for left_shape, right_shape in [((7, 3), (3, 2)), ((2, 3), (3, 9)), ((1, 60), (60, 1))]:
        left, right = rng.random(left_shape), rng.random(right_shape)
        out = np.empty((left_shape[0], right_shape[1]))
        resize_module._matmul(left, right, out)
        np.testing.assert_allclose(out, left @ right, rtol=1e-14)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_every_dtype(dtype: np.dtype, mode: str, rng: np.random.Generator) -> None:
    data = make_array(rng, (2, 3, 4), dtype)
    kwargs: dict[str, Any] = {"sizes": [5, 2], "axes": [1, 2], "mode": mode}
    if mode != "nearest" and (dtype.kind == "b" or dtype.kind in "UST"):
        what = "bool" if dtype.kind == "b" else "string"
        with pytest.raises(GeomError, match=f"^resize: {what} data takes mode nearest only, found mode {mode}"):
            resize(data, **kwargs)
        return
    ours = resize(data, **kwargs)
    assert ours.dtype == dtype and ours.shape == (2, 5, 2)
    if mode == "nearest":
        np.testing.assert_array_equal(ours, by_reference(data, **kwargs))
        # half_pixel, round_prefer_floor: x = -0.2, 0.4, 1, 1.6, 2.2 and 0.5, 2.5
        rows, cols = np.array([0, 0, 1, 2, 2]), np.array([0, 2])
        np.testing.assert_array_equal(ours, data[:, rows][:, :, cols])
        return
    wide = by_reference(data.astype(_numeric.working_dtype(dtype)), **kwargs)
    assert_rounded_from(ours, wide)


@pytest.mark.parametrize("dtype", [dtype for dtype in ALL_DTYPES if dtype.kind in "iufc" and dtype.itemsize > 1],
                         ids=str)
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_the_other_byte_order_gives_the_same_bits(dtype: np.dtype, mode: str, antialias: bool,
                                                  rng: np.random.Generator) -> None:
    """Big-endian data is resized as its native copy is, bit for bit (its sums took another path:
    int16 [3, -15, 18, -2] at scale 1.5 gave 13 where 12.5 rounds to 12)."""
    x = np.array([3, -15, 18, -2], np.int16)
    assert resize(x.astype(">i2"), scales=[1.5], mode="linear").tolist() == [3, -6, -10, 12, 8, -2]
    data = make_array(rng, (3, 9, 7), dtype)
    other = data.astype(dtype.newbyteorder("S"))
    for kwargs in ({"scales": [0.6, 1.5], "axes": [1, 2]}, {"sizes": [2, 5, 3]}):
        ours = resize(other, mode=mode, antialias=antialias, **kwargs)
        assert ours.dtype == other.dtype
        np.testing.assert_array_equal(ours, resize(data, mode=mode, antialias=antialias, **kwargs), strict=False)


def assert_rounded_from(ours: np.ndarray, wide: np.ndarray) -> None:
    """``ours`` is ``wide`` (float64 or complex128, the same sums in another order) converted once
    to ours' dtype: equal, except one step off where ``wide`` sits on a rounding tie of that dtype
    (the other order's float64 sum can land on either side of it)."""
    if ours.dtype.kind == "c":
        assert_rounded_from(ours.real, wide.real)
        assert_rounded_from(ours.imag, wide.imag)
        return
    wide = np.real(wide)
    if ours.dtype == np.float64:
        np.testing.assert_allclose(ours, wide, rtol=1e-12, atol=1e-12)
        return
    expected = _numeric.to_dtype(wide, ours.dtype)
    differ = ours != expected
    midpoint = (ours.astype(np.float64) + expected.astype(np.float64)) / 2
    on_a_tie = np.abs(wide - midpoint) <= 1e-12 * np.maximum(np.abs(wide), 1)
    assert np.all(on_a_tie[differ]), (ours[differ], expected[differ], wide[differ])


def test_complex_interpolates_both_parts() -> None:
    data = np.array([1 + 10j, 3 - 10j], dtype=np.complex64)
    expected = np.array([1 + 10j, 1.5 + 5j, 2.5 - 5j, 3 - 10j], dtype=np.complex64)  # x = -0.25, 0.25, 0.75, 1.25
    np.testing.assert_array_equal(resize(data, sizes=[4], mode="linear"), expected)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_floats_are_computed_in_float64_and_rounded_once(dtype: np.dtype, mode: str, rng: np.random.Generator) -> None:
    data = rng.normal(size=(6, 7)).astype(dtype)
    got = resize(data, sizes=[9, 4], mode=mode, antialias=True)
    assert got.dtype == dtype
    assert_rounded_from(got, by_reference(data.astype(np.float64), sizes=[9, 4], mode=mode, antialias=True))


# --- the disagreements, worked out by hand -------------------------------------------------------


def test_align_corners_and_tf_crop_divide_by_the_integer_length() -> None:
    # tf_crop_and_resize, length 4 by 0.6 -> 2, roi [0.25, 0.75]: x = 0.75 + i * 0.5 * 3 / (2 - 1)
    data = f32(0, 10, 20, 30)
    keywords: dict[str, Any] = {"roi": f32(0.25, 0.75), "scales": f32(0.6), "mode": "linear",
                                "coordinate_transformation_mode": "tf_crop_and_resize"}
    np.testing.assert_array_equal(resize(data, **keywords), [7.5, 22.5])
    assert by_onnx_reference(data[None], roi=f32(0, 0.25, 1, 0.75), scales=f32(1, 0.6), mode="linear",
                             coordinate_transformation_mode="tf_crop_and_resize")[0, 1] == pytest.approx(18.214285)
    # a length-1 output reads x = 0 (align_corners) or the roi's centre (tf_crop_and_resize)
    assert resize(data, sizes=[1], mode="linear", coordinate_transformation_mode="align_corners").tolist() == [0]
    assert resize(data, roi=[0.25, 0.75], sizes=[1], mode="linear",
                  coordinate_transformation_mode="tf_crop_and_resize").tolist() == [15]


def test_pytorch_half_pixel_at_length_1_reads_0() -> None:
    data = f32(0, 10, 20, 30)
    keywords: dict[str, Any] = {"sizes": [1], "mode": "cubic", "coordinate_transformation_mode": "pytorch_half_pixel"}
    assert resize(data, **keywords).tolist() == [0]
    assert by_onnxruntime(data[None], sizes=[1, 1], mode="cubic",
                          coordinate_transformation_mode="pytorch_half_pixel").tolist() == [[0]]
    # the reference reads x = -0.5: taps -2..1 clamp to 0 0 0 1, weights -3/32 19/32 19/32 -3/32
    assert by_onnx_reference(data, **keywords).tolist() == [-0.9375]


def test_an_axis_kept_by_a_scale_other_than_1_is_resampled() -> None:
    # length 3 by 1.25 stays 3; x = (i + 0.5) / 1.25 - 0.5 = -0.1, 0.7, 1.5
    data = f32(0, 10, 20)
    assert resize(data, scales=[1.25], mode="linear").tolist() == [0, 7, 15]
    assert by_onnx_reference(data, scales=f32(1.25), mode="linear").tolist() == [0, 7, 15]
    assert by_onnxruntime(data[None], scales=f32(1, 1.25), mode="linear").tolist() == [[0, 10, 20]]  # copied


def test_tf_crop_and_resize_samples_its_roi_at_an_unchanged_length() -> None:
    # roi [0.5, 1] on length 3 -> 3: x = 0.5 * 2 + i * 0.5 * 2 / 2 = 1, 1.5, 2
    data = f32(0, 10, 20)
    keywords: dict[str, Any] = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}
    assert resize(data, roi=[0.5, 1.0], sizes=[3], **keywords).tolist() == [10, 15, 20]
    assert by_onnxruntime(data[None], roi=f32(0, 0.5, 1, 1), sizes=[1, 3], **keywords).tolist() == [[0, 10, 20]]


def test_a_tap_of_weight_0_takes_part_as_in_onnxruntime() -> None:
    """[1, 2, inf, 4] align_corners to 7: x = 0, 0.5, 1, 1.5, 2, 2.5, 3. At x = 1 the taps are 1
    and 2 with weights 1 and 0: 0 · inf = NaN, as onnxruntime gives; the ONNX reference and our
    readable reference take the single tap 1 there (2). Every path of the kernel alike."""
    keywords: dict[str, Any] = {"sizes": [1, 7], "mode": "linear", "coordinate_transformation_mode": "align_corners"}
    data = f32(1, 2, np.inf, 4)[None]
    expected = [1.0, 1.5, np.nan, np.inf, np.inf, np.inf, 4.0]
    np.testing.assert_array_equal(by_onnxruntime(data, **keywords)[0], expected)
    for dtype in ("float32", "float64", "float16", "complex128"):
        np.testing.assert_array_equal(resize(data.astype(dtype), **keywords)[0].real, expected)
    with np.errstate(invalid="ignore"):
        assert by_reference(data, **keywords)[0, 2] == 2.0
        assert by_onnx_reference(data, **keywords)[0, 2] == 2.0


def test_non_finite_data_reaches_other_outputs_than_in_onnxruntime() -> None:
    """Three places where onnxruntime 1.32's taps are not ours, seen only through Inf and NaN
    (finite data gives the same values): it clamps x = -0.125 to 0 and reads taps 0 and 1
    (weight 0 on the inf: NaN), where our taps -1 and 0 both read pixel 0; it leaves out the
    end taps of weight 0 of an antialias window (x = 2.5 at scale 0.4: taps 0 and 5 weigh
    0; tap 5 is the inf at 4, 0 * inf = NaN, as the ONNX reference gives); and it weighs a
    kept axis (W = 1 to 1, cubic: taps -1..2, all pixel 0, weights 0, 1, 0, 0), which we copy."""
    half: dict[str, Any] = {"sizes": [4, 1], "mode": "linear"}
    data = f32(1, np.inf, 3)[:, None]
    np.testing.assert_array_equal(resize(data, **half)[:, 0], [1, np.inf, np.inf, 3])
    np.testing.assert_array_equal(by_onnxruntime(data, **half)[:, 0], [np.nan, np.inf, np.inf, 3])
    window: dict[str, Any] = {"sizes": [1, 2], "mode": "linear", "coordinate_transformation_mode": "asymmetric",
                              "antialias": 1}
    data = f32(1, 2, 3, 4, np.inf)[None]
    assert np.isnan(resize(data, **window)[0, 1])
    with np.errstate(invalid="ignore"):
        assert np.isnan(by_onnx_reference(data, **window)[0, 1])
    assert by_onnxruntime(data, **window)[0, 1] == np.inf
    np.testing.assert_allclose(resize(data, **window)[0, 0], by_onnxruntime(data, **window)[0, 0], rtol=1e-6)
    kept: dict[str, Any] = {"sizes": [8, 1], "mode": "cubic", "coordinate_transformation_mode": "align_corners"}
    data = f32(1, 2, 3, 4, 5, np.inf)[:, None]
    ours = resize(data, **kept)[:, 0]
    np.testing.assert_array_equal(ours, resize(data[:, 0], sizes=[8], mode="cubic",
                                               coordinate_transformation_mode="align_corners"))
    assert ours[5] == -np.inf and np.isnan(by_onnxruntime(data, **kept)[5, 0])
    np.testing.assert_allclose(ours[:5], by_onnxruntime(data, **kept)[:5, 0], rtol=1e-6)


def test_keep_aspect_ratio_rounds_an_exact_half_up_where_float_products_fall_below_it() -> None:
    """224/192 * 195 and 224/320 * 325 are both 227.5 exactly; onnxruntime's float32 product
    falls below the half for the first, the reference's float64 one for the second, and each
    then gives 227 (the Notes of resize). A centre crop to 224 after it starts one column
    later here, so the resized arrays agree but the crops are one pixel apart."""
    keywords: dict[str, Any] = {"sizes": [224, 224], "keep_aspect_ratio_policy": "not_smaller", "mode": "linear"}
    first, second = np.zeros((192, 195), np.float32), np.zeros((320, 325), np.float32)
    assert resize(first, **keywords).shape == resize(second, **keywords).shape == (224, 228)
    assert by_onnx_reference(first, **keywords).shape == (224, 228)
    assert by_onnxruntime(first, **keywords).shape == (224, 227)
    assert by_onnx_reference(second, **keywords).shape == (224, 227)
    assert by_onnxruntime(second, **keywords).shape == (224, 228)
    ramp = np.arange(195, dtype=np.float32)[None].repeat(192, axis=0)
    ours, theirs = resize(ramp, **keywords), by_onnxruntime(ramp, **keywords)
    np.testing.assert_allclose(ours[:, :227], theirs, atol=1e-4)
    np.testing.assert_array_equal(center_crop_pad(ours, [224, 224]), ours[:, 2:226])
    np.testing.assert_array_equal(center_crop_pad(theirs, [224, 224]), theirs[:, 1:225])


def test_negative_axes_count_from_the_end_under_every_policy() -> None:
    """axes [-1] is axis 1 of a rank-2 tensor (the spec's [-r, r-1]). (5, 4), sizes [3, 3] on
    axes [-1, 0], not_smaller: one scale max(3/4, 3/5) = 3/4, so 4 -> 3 and 5 -> 3.75 -> 4.
    onnxruntime 1.32 leaves the axes of a negative number out under not_larger/not_smaller
    (with stretch it takes them); the ONNX reference fails on any negative axis."""
    data = np.zeros((5, 4), np.float32)
    keywords: dict[str, Any] = {"sizes": [3, 3], "keep_aspect_ratio_policy": "not_smaller", "mode": "linear"}
    assert resize(data, axes=[-1, 0], **keywords).shape == (4, 3)
    assert resize(data, axes=[1, 0], **keywords).shape == (4, 3)
    assert by_onnxruntime(data, axes=[1, 0], **keywords).shape == (4, 3)
    assert by_onnxruntime(data, axes=[-1, 0], **keywords).shape == (3, 4)  # -1 left out: 3/5 from axis 0 alone
    with pytest.raises(ValueError, match="axes don't match array"):
        by_onnx_reference(data, axes=[-1, 0], **keywords)


def test_integers_round_half_to_even_and_saturate() -> None:
    linear: dict[str, Any] = {"sizes": [4], "mode": "linear"}  # x = -0.25, 0.25, 0.75, 1.25
    assert resize(np.array([0, 1], dtype=np.uint8), **linear).tolist() == [0, 0, 1, 1]  # 0.25 -> 0, 0.75 -> 1
    assert resize(np.array([0, 10], dtype=np.uint8), **linear).tolist() == [0, 2, 8, 10]  # 2.5 -> 2, 7.5 -> 8
    # onnxruntime truncates: 0.75 -> 0 and 7.5 -> 7
    assert by_onnxruntime(np.array([[0, 1]], dtype=np.uint8), sizes=[1, 4], mode="linear").tolist() == [[0, 0, 0, 1]]
    assert by_onnxruntime(np.array([[0, 10]], dtype=np.uint8), sizes=[1, 4], mode="linear").tolist() == [[0, 2, 7, 10]]
    # cubic overshoots past the range; the result saturates
    cubic = resize(np.array([0, 127, 127, -128], dtype=np.int8), sizes=[8], mode="cubic")
    wide = resize(np.array([0, 127, 127, -128], dtype=np.float64), sizes=[8], mode="cubic")
    assert wide.max() > 127 and wide.min() < -128
    np.testing.assert_array_equal(cubic, np.clip(np.rint(wide), -128, 127))
    for dtype in ("int64", "uint64"):
        big = np.array([np.iinfo(dtype).max, np.iinfo(dtype).max - 1000], dtype=dtype)
        assert resize(big, sizes=[4], mode="cubic").dtype == dtype  # saturates in range, no overflow


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_onnxruntime_clips_int8_to_0_255_under_antialias(mode: str, scale: float) -> None:
    """onnxruntime 1.32's antialias path clips int8 as if it were uint8: every negative result
    is 0, on a downscale and on an upscale (where antialias changes nothing in the formula).
    We keep int8's range, as the ONNX reference does and as int32 data gives in onnxruntime."""
    data = np.array([[-50, -20, 10, 40, 100, 7]], dtype=np.int8)
    keywords: dict[str, Any] = {"mode": mode, "antialias": 1}
    ours = resize(data, scales=[1, scale], **keywords)
    assert (ours < 0).any()
    np.testing.assert_array_equal(ours, by_onnx_reference(data, scales=F32([1, scale]), **keywords))
    np.testing.assert_array_equal(ours, resize(data.astype(np.int32), scales=[1, scale], **keywords))
    theirs = by_onnxruntime(data, scales=F32([1, scale]), **keywords)
    assert theirs.min() == 0 and (theirs[ours < 0] == 0).all()
    assert (by_onnxruntime(data.astype(np.int32), scales=F32([1, scale]), **keywords) < 0).any()


def test_the_notes_int8_example_under_antialias() -> None:
    """resize's Notes gave onnxruntime's [0, 29] and our [-31, 29] for this row: the second value is
    21 in all three (taps 1..4, the last read at the edge, weigh 1 3 3 1: (-20 + 30 + 120 + 40) / 8)."""
    data = np.array([[-50, -20, 10, 40]], dtype=np.int8)
    keywords: dict[str, Any] = {"mode": "linear", "antialias": 1}
    assert resize(data[0], scales=[0.5], **keywords).tolist() == [-31, 21]
    assert by_onnx_reference(data, scales=F32([1, 0.5]), **keywords).tolist() == [[-31, 21]]
    assert by_onnxruntime(data, scales=F32([1, 0.5]), **keywords).tolist() == [[0, 21]]
    assert "``[0, 21]``, where we and the reference give ``[-31, 21]``" in " ".join((resize.__doc__ or "").split())


def test_onnxruntime_rounds_a_half_away_from_zero_under_antialias() -> None:
    """Two taps of weight 1/2 each (linear, antialias, 2x down) land on halves: onnxruntime rounds
    them away from zero (-42.5 -> -43, 42.5 -> 43), not half up as the Notes said; we round half
    to even (-42, 42), as the reference does."""
    data = np.array([[-42, -43], [42, 43]], dtype=np.int32)
    keywords: dict[str, Any] = {"mode": "linear", "antialias": 1}
    np.testing.assert_array_equal(resize(data, scales=[1, 0.5], **keywords), [[-42], [42]])
    np.testing.assert_array_equal(by_onnx_reference(data, scales=F32([1, 0.5]), **keywords), [[-42], [42]])
    np.testing.assert_array_equal(by_onnxruntime(data, scales=F32([1, 0.5]), **keywords), [[-43], [43]])


def test_a_float32_scale_is_read_as_its_decimal() -> None:
    # 10 * 0.7 = 7, as onnxruntime; the reference and ONNX's shape inference multiply the binary
    # value 0.699999988... and give 6
    assert resize_output_shape((10,), scales=[0.7]) == (7,)
    assert resize_output_shape((10,), scales=f32(0.7)) == (7,)
    data = np.arange(10, dtype=np.float32)[None]
    assert by_onnxruntime(data, scales=f32(1, 0.7)).shape == (1, 7)
    assert by_onnx_reference(data, scales=f32(1, 0.7)).shape == (1, 6)
    # ties are ties: asymmetric 0.4 puts output 1 at x = 2.5 exactly
    data = np.arange(0, 80, 10, dtype=np.float32)
    keywords: dict[str, Any] = {"scales": [0.4], "coordinate_transformation_mode": "asymmetric"}
    assert resize(data, nearest_mode="round_prefer_ceil", **keywords).tolist() == [0, 30, 50]
    assert resize(data, nearest_mode="round_prefer_floor", **keywords).tolist() == [0, 20, 50]
    assert by_onnxruntime(data[None], scales=f32(1, 0.4), nearest_mode="round_prefer_ceil",
                          coordinate_transformation_mode="asymmetric").tolist() == [[0, 30, 50]]
    assert by_onnx_reference(data, scales=f32(0.4), nearest_mode="round_prefer_ceil",
                             coordinate_transformation_mode="asymmetric").tolist() == [0, 20, 50]
    # and whole numbers are whole: half_pixel 0.6 puts output 4 at x = 4.5 / 0.6 - 0.5 = 7 exactly,
    # which floor reads as 7; in float32 (onnxruntime) and from the binary 0.6000000238 (the
    # reference) it is 6.9999997, read as 6 by both (found by a try-out: outputs 4 and 7 differ)
    data = np.arange(20, dtype=np.float32)
    ours = resize(data, scales=[0.6], nearest_mode="floor")
    assert ours.tolist() == [0, 2, 3, 5, 7, 8, 10, 12, 13, 15, 17, 18]
    theirs = by_onnxruntime(data[None], scales=f32(1, 0.6), nearest_mode="floor")[0]
    assert theirs.tolist() == [0, 2, 3, 5, 6, 8, 10, 11, 13, 15, 17, 18]
    assert np.flatnonzero(ours != theirs).tolist() == [4, 7]
    assert by_onnx_reference(data, scales=f32(0.6), nearest_mode="floor")[[4, 7]].tolist() == [6, 11]


def test_a_roi_is_read_as_its_decimal() -> None:
    # roi [0.6, 1.1] on length 4 -> 6: x = 1.8 + 0.3 i, and x = 3 at i = 4 is inside
    data = f32(0, 10, 20, 30)
    keywords: dict[str, Any] = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
                                "extrapolation_value": -1.0}
    assert resize(data, roi=f32(0.6, 1.1), sizes=[6], **keywords).tolist() == [18, 21, 24, 27, 30, -1]
    np.testing.assert_allclose(by_onnxruntime(data[None], roi=f32(0, 0.6, 1, 1.1), sizes=[1, 6], **keywords),
                               [[18, 21, 24, 27, 30, -1]], rtol=1e-6)
    # the reference takes 3.00000007 (float32 0.6 and 1.1) for outside
    assert by_onnx_reference(data, roi=f32(0.6, 1.1), sizes=[6], **keywords).tolist()[4] == -1


def test_coordinates_are_exact() -> None:
    # not_smaller 4x5 -> 9x11: scale 9/4, width 11.25; column 5 reads
    # x = 2.5 * (1 - 11/11.25) + 5.5 / 2.25 - 0.5 = 2 exactly
    data = np.tile(f32(0, 10, 20, 30, 40), (4, 1))
    keywords: dict[str, Any] = {"sizes": [9, 9], "coordinate_transformation_mode": "half_pixel_symmetric",
                                "keep_aspect_ratio_policy": "not_smaller"}
    assert resize(data, mode="cubic", **keywords)[0, 5] == 20  # a cubic at an integer reads the pixel
    assert by_onnxruntime(data, mode="cubic", **keywords)[0, 5] == 20
    assert by_onnx_reference(data, mode="cubic", **keywords)[0, 5] == pytest.approx(10, abs=1e-5)  # wrong taps


def test_a_linear_sample_at_a_pixel_reads_that_pixel_where_the_reference_reads_the_one_before() -> None:
    """half_pixel_symmetric 7 -> 3 by scale 0.5 (width 3.5): output 0 reads x = 3.5 · (1 - 3/3.5)
    + 0.5/0.5 - 0.5 = 1 exactly, pixel 1, as onnxruntime gives. The ONNX reference computes x =
    1.0000000000000002 in floats; shifted by its one pixel of edge padding it rounds to 2.0,
    whose two nearest taps (a tie going to the lower) are pixels 0 and 1, weighed 1 and 2e-16:
    pixel 0 (found by scripts/fuzz_against_onnx.py --seed 171, case 53, on bfloat16)."""
    data = f32(-58.75, 66.5, 4.8125, -27.375, -3.90625, 70, -82)
    keywords: dict[str, Any] = {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"}
    expected = [66.5, -27.375, 70.0]  # pixels 1, 3 and 5: x = 1, 3, 5
    assert resize(data, scales=[0.5], **keywords).tolist() == expected
    assert by_reference(data, scales=[0.5], **keywords).tolist() == expected
    assert by_onnxruntime(data[None], scales=f32(1, 0.5), **keywords).tolist() == [expected]  # (no 1-D linear)
    assert by_onnx_reference(data, scales=f32(0.5), **keywords).tolist() == [-58.75, -27.375, 70.0]


def test_an_axis_of_length_1_gives_its_pixel_at_every_output() -> None:
    """Every tap of a 1-pixel axis reads that pixel and the weights sum to 1, so each output is
    the pixel. Summed in float64 they missed it by an ulp: a 1x2 uint8 [[1, 2]] to 3x3 cubic
    gave rows [1, 1, 2], [1, 2, 2], [1, 2, 2], as the middle column (x = 1/2: weights symmetric,
    1.5 exactly, half to even 2) fell either side of its tie."""
    row = resize(np.array([1, 2], dtype=np.uint8), sizes=[3], mode="cubic")
    assert row.tolist() == [1, 2, 2]  # x = -1/6, 1/2, 7/6
    np.testing.assert_array_equal(resize(np.array([[1, 2]], dtype=np.uint8), sizes=[3, 3], mode="cubic"),
                                  np.tile(row, (3, 1)))
    np.testing.assert_array_equal(by_reference(np.array([[1, 2]], dtype=np.uint8), sizes=[3, 3], mode="cubic"),
                                  np.tile(row, (3, 1)))
    for mode in ("linear", "cubic"):
        for transform in TRANSFORMS[:5]:
            for size in (2, 3, 5, 7):
                keywords: dict[str, Any] = {"sizes": [size], "mode": mode, "coordinate_transformation_mode": transform}
                assert resize(np.array([1.1]), **keywords).tolist() == [1.1] * size
                assert resize(np.array([1.1]), exclude_outside=True, **keywords).tolist() == [1.1] * size
                assert resize(f32(np.inf), **keywords).tolist() == [np.inf] * size
    # the reference sums the taps: 1.1 * (weights summing to 1 in exact arithmetic) misses 1.1
    assert by_onnx_reference(np.array([1.1]), sizes=[3], mode="cubic").tolist() != [1.1] * 3


def test_keys_weights_are_float64_where_the_oracles_take_float32() -> None:
    """align_corners 4 -> 7 puts x at 0, 0.5, ..., 3. At a whole x Keys' weights are 0, 1, 0, 0
    and at x = 1.5 they are symmetric, for any a: the pixel, and 1.5 on a ramp. The ONNX
    reference (a float32 A times a Python float ratio) and onnxruntime compute the weights in
    float32: with a = -0.6 (float32 holds it only approximately) they no longer sum to 1."""
    keywords: dict[str, Any] = {"sizes": [1, 7], "mode": "cubic", "coordinate_transformation_mode": "align_corners"}
    ramp = np.array([[0, 1, 2, 3]], dtype=np.float64)
    whole_and_half = [0, 2, 3, 4, 6]  # x = 0, 1, 1.5, 2, 3
    for a in (-0.6, -0.75):
        ours = resize(ramp, cubic_coeff_a=a, **keywords)[0]
        assert ours[whole_and_half].tolist() == [0, 1, 1.5, 2, 3]
        np.testing.assert_array_equal(resize(ramp.astype(np.float32), cubic_coeff_a=a, **keywords)[0],
                                      ours.astype(np.float32))
    reference_at_3 = by_onnx_reference(ramp, cubic_coeff_a=-0.6, **keywords)[0, 6]
    assert reference_at_3 != 3 and reference_at_3 == pytest.approx(2.9999993, abs=1e-7)
    onnxruntime = by_onnxruntime(ramp.astype(np.float32), cubic_coeff_a=-0.6, **keywords)[0]
    assert onnxruntime[0] != 0 and onnxruntime[6] != 3
    np.testing.assert_allclose(onnxruntime[whole_and_half], [0, 1, 1.5, 2, 3], atol=1e-5)
    # a short binary fraction keeps their float32 weights exact at these points
    assert by_onnx_reference(ramp, cubic_coeff_a=-0.75, **keywords)[0, whole_and_half].tolist() == [0, 1, 1.5, 2, 3]
    assert by_onnxruntime(ramp.astype(np.float32), cubic_coeff_a=-0.75,
                          **keywords)[0, whole_and_half].tolist() == [0, 1, 1.5, 2, 3]


def test_keep_aspect_ratio_rounds_half_up() -> None:
    assert resize_output_shape((300, 451), sizes=[256, 256], keep_aspect_ratio_policy="not_smaller") == (256, 385)
    assert resize_output_shape((200, 301), sizes=[100, 1000], keep_aspect_ratio_policy="not_larger") == (100, 151)
    assert resize_output_shape((1, 3, 2, 4), sizes=[1, 3], axes=[2, 3], keep_aspect_ratio_policy="not_larger") == (
        1, 3, 1, 2)
    # scales ignore the policy (not applicable); a scale's length is floor(n * scale)
    assert resize_output_shape((5,), scales=[0.5], keep_aspect_ratio_policy="not_smaller") == (2,)
    # the policy's one scale drives the coordinates: 3x5 not_smaller 4x4 -> scale 4/3 on both axes
    data = np.arange(5, dtype=np.float64)[None].repeat(3, axis=0)
    got = resize(data, sizes=[4, 4], mode="linear", keep_aspect_ratio_policy="not_smaller")
    assert got.shape == (4, 7)
    np.testing.assert_allclose(got[0], [0, 0.625, 1.375, 2.125, 2.875, 3.625, 4])  # x = (i + .5) * 3/4 - .5


def test_antialias_by_hand() -> None:
    # scale 1/2: x0 = 0.5; the triangle stretched to width 2 weighs taps -1..2 as 1 3 3 1 (/8);
    # tap -1 reads the edge. exclude_outside drops it: (3/8) / (7/8) of 10.
    data = f32(10, 0, 0, 0, 0, 0, 0, 0)
    assert resize(data, scales=[0.5], mode="linear", antialias=True).tolist() == [5, 0, 0, 0]
    assert resize(data, scales=[0.5], mode="linear", antialias=1, exclude_outside=1)[0] == F32(30 / 7)
    # Keys (A = -0.75) stretched to width 4: taps -3..4 at distances 1.75 .. 0.25 (weights sum 2);
    # output 1 reads 10 through taps -1 and 0 only: (far(1.75) + far(1.25)) / 2 = -45/640 of 10
    assert resize(data, scales=[0.5], mode="cubic", antialias=True).tolist() == [5, -0.703125, 0, 0]


def test_the_readmes_pillow_settings_hold(rng: np.random.Generator) -> None:
    # README: Pillow's resize((w, h), BILINEAR) is --sizes h,w --mode linear --antialias
    # --exclude-outside; without --exclude-outside its border differs
    from PIL import Image

    data = rng.uniform(0, 255, (300, 451)).astype(np.float32)
    data[:, -3:] = 255  # an edge the border taps see
    settings = {"mode": "linear", "antialias": True}
    pillow = np.asarray(Image.fromarray(data, mode="F").resize((200, 173), Image.Resampling.BILINEAR))
    np.testing.assert_allclose(resize(data, sizes=[173, 200], exclude_outside=True, **settings), pillow, atol=1e-3)
    assert np.abs(resize(data, sizes=[173, 200], **settings) - pillow).max() > 1


def test_alpha_is_resized_as_a_channel_not_premultiplied_as_pillow_does() -> None:
    # README and docs/files.md: the Pillow settings above hold on RGB, not on RGBA, which Pillow
    # premultiplies by alpha. Transparent green beside opaque purple, 2x down: output column 2
    # reads input columns 3..6 by 1 3 3 1 (/8), column 3 transparent: alpha 7/8 of 255, and 1/8 of
    # its green shows (32 levels), where Pillow's premultiplied green is 0
    from PIL import Image

    rgba = np.zeros((8, 8, 4), np.uint8)
    rgba[:, :4] = (0, 255, 0, 0)
    rgba[:, 4:] = (128, 0, 128, 255)
    settings: dict[str, Any] = {"sizes": [4, 4], "axes": [0, 1], "mode": "linear", "antialias": True,
                                "exclude_outside": True}
    ours = resize(rgba, **settings)
    assert ours[0, 2].tolist() == [112, 32, 112, 223]
    for channel in range(4):  # each channel alone, alpha too
        assert np.array_equal(ours[..., channel], resize(rgba[..., channel], **settings))
    pillow = np.asarray(Image.fromarray(rgba, "RGBA").resize((4, 4), Image.Resampling.BILINEAR))
    assert pillow[0, 2].tolist() == [128, 0, 128, 223]
    opaque = np.asarray(Image.fromarray(rgba[..., :3], "RGB").resize((4, 4), Image.Resampling.BILINEAR))
    assert np.abs(opaque.astype(int) - ours[..., :3]).max() <= 1  # without alpha, within 1 level


def test_the_readmes_torchvision_settings_hold(rng: np.random.Generator) -> None:
    # README: torchvision's Resize(256) is those settings at its own size; not_smaller is not it
    # (torch is the bench extra's: benchmarks/resize_compare.py shows the same where it is installed)
    torch = pytest.importorskip("torch")
    settings = {"mode": "linear", "antialias": True}
    image = rng.uniform(0, 255, (480, 640)).astype(np.float32)
    size = [256, int(256 * 640 / 480)]  # torchvision's _compute_resized_output_size: 341
    theirs = torch.nn.functional.interpolate(torch.from_numpy(image)[None, None], size=size, mode="bilinear",
                                             align_corners=False, antialias=True)[0, 0].numpy()
    np.testing.assert_allclose(resize(image, sizes=size, exclude_outside=True, **settings), theirs, atol=1e-2)
    policy = resize(image, sizes=[256, 256], keep_aspect_ratio_policy="not_smaller", exclude_outside=True, **settings)
    assert policy.shape == theirs.shape and np.abs(policy - theirs).max() > 1  # the width sampled at 256/480


def test_the_readmes_torchvision_bicubic_settings_hold_for_its_float_path_alone(rng: np.random.Generator) -> None:
    """README, cubic up: `--cubic-coeff-a -0.5 --exclude-outside` is torchvision's float path (v1
    casts a uint8 tensor to float32) within 1 level. It said "torchvision" alone, but v2 hands a
    uint8 tensor to torch's uint8 kernel, which rounds and clips between its two passes as Pillow
    (torchvision on a PIL image) does: far from it where edges overshoot."""
    torch = pytest.importorskip("torch")
    from PIL import Image

    image = rng.choice(np.array([0, 255], np.uint8), (12, 16, 3))  # an edge at every other pixel
    size = [24, 32]
    ours = resize(image, sizes=size, axes=[0, 1], mode="cubic", cubic_coeff_a=-0.5, exclude_outside=True)
    tensor = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))[None]

    def interpolate(data: Any) -> np.ndarray:
        out = torch.nn.functional.interpolate(data, size=size, mode="bicubic", align_corners=False, antialias=True)
        return np.asarray(out[0].permute(1, 2, 0).numpy())

    v1 = np.rint(np.clip(interpolate(tensor.to(torch.float32)), 0, 255)).astype(np.uint8)
    v2 = interpolate(tensor)
    pillow = np.asarray(Image.fromarray(image).resize(size[::-1], Image.Resampling.BICUBIC))
    assert np.abs(ours.astype(int) - v1).max() <= 1
    assert np.abs(v2.astype(int) - pillow).max() <= 1
    assert np.abs(ours.astype(int) - v2).max() > 10


def test_the_readmes_pillow_bilinear_row_is_torchvision_v2s_on_uint8_not_v1s(rng: np.random.Generator) -> None:
    """README, linear + antialias down: Pillow's rounding between passes (1 level on many values) is
    torchvision's on a PIL image and v2's on a uint8 tensor (torch's uint8 kernel); the row said 'or
    uint8 tensor', but v1 casts one to float32 and matches `--exclude-outside` to float rounding."""
    torch = pytest.importorskip("torch")
    from PIL import Image

    image = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    size = [20, 27]
    ours = resize(image, sizes=size, axes=[0, 1], mode="linear", antialias=True, exclude_outside=True)
    tensor = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))[None]

    def interpolate(data: Any) -> np.ndarray:
        out = torch.nn.functional.interpolate(data, size=size, mode="bilinear", align_corners=False, antialias=True)
        return np.asarray(out[0].permute(1, 2, 0).numpy())

    v1 = np.rint(interpolate(tensor.to(torch.float32))).astype(np.uint8)
    v2 = interpolate(tensor)
    pillow = np.asarray(Image.fromarray(image).resize(size[::-1], Image.Resampling.BILINEAR))
    assert np.mean(ours != v1) < 0.01 and np.abs(ours.astype(int) - v1).max() <= 1
    assert np.mean(v2 != pillow) < 0.01
    for theirs in (v2, pillow):
        assert np.abs(ours.astype(int) - theirs).max() == 1 and np.mean(ours != theirs) > 0.05


def test_the_readmes_opencv_inter_area_row_holds(rng: np.random.Generator) -> None:
    """README: at exactly 2x down OpenCV's INTER_AREA is linear without antialias, a 2x2 box, within
    1 level (it rounds a half up, the graph to even), which the row did not say."""
    cv2 = pytest.importorskip("cv2")
    image = rng.integers(0, 256, (16, 24, 3), dtype=np.uint8)
    area = np.asarray(cv2.resize(image, (12, 8), interpolation=cv2.INTER_AREA))
    ours = resize(image, sizes=[8, 12], axes=[0, 1], mode="linear")
    exact = resize(image.astype(np.float64), sizes=[8, 12], axes=[0, 1], mode="linear")
    assert np.array_equal(exact * 4, image.reshape(8, 2, 12, 2, 3).sum(axis=(1, 3)))  # the 2x2 box
    assert np.array_equal(np.floor(exact + 0.5).astype(np.uint8), area)
    assert np.abs(ours.astype(int) - area).max() == 1  # the halves, rounded to even here


def test_linear_exclude_outside_without_antialias_reads_the_edge() -> None:
    # onnxruntime refuses this combination; the text defines it: x = -0.25 reads taps -1 and 0
    # with weights 1/4 and 3/4, tap -1 weighs 0 and the rest renormalise to the edge pixel
    data = f32(0, 10, 20)
    got = resize(data, sizes=[6], mode="linear", exclude_outside=True)
    np.testing.assert_array_equal(got, resize(data, sizes=[6], mode="linear"))
    assert got.tolist() == [0, 2.5, 7.5, 12.5, 17.5, 20]


def test_nearest_modes_by_hand() -> None:
    data = np.array([0, 1, 2])
    # asymmetric by 2: x = 0, 0.5, 1, 1.5, 2, 2.5 (the last clamped to 2)
    expected = {"round_prefer_floor": [0, 0, 1, 1, 2, 2], "round_prefer_ceil": [0, 1, 1, 2, 2, 2],
                "floor": [0, 0, 1, 1, 2, 2], "ceil": [0, 1, 1, 2, 2, 2]}
    for nearest_mode, indices in expected.items():
        got = resize(data, scales=[2], coordinate_transformation_mode="asymmetric", nearest_mode=nearest_mode)
        assert got.tolist() == indices, nearest_mode


def test_extrapolation_value_takes_the_dtype() -> None:
    # roi [-1, 2] on length 2 -> 4: x = -1 + i = -1, 0, 1, 2; the first and last are outside
    keywords: dict[str, Any] = {"roi": [-1.0, 2.0], "sizes": [4],
                                "coordinate_transformation_mode": "tf_crop_and_resize"}
    assert resize(np.array([1, 2], dtype=np.uint8), extrapolation_value=300.0, **keywords).tolist() == [255, 1, 2, 255]
    assert resize(np.array([1, 2], dtype=np.int8), extrapolation_value=-2.5, **keywords).tolist() == [-2, 1, 2, -2]
    assert resize(np.array([True, True]), extrapolation_value=0.0, **keywords).tolist() == [False, True, True, False]
    assert resize(np.array([1, 2], dtype=np.float16), extrapolation_value=0.1, mode="linear", **keywords).tolist() == [
        float(np.float16(np.float32(0.1))), 1, 2, float(np.float16(np.float32(0.1)))]
    inside = resize(np.array([1.0, 2.0]), roi=[0.0, 2.0], sizes=[3], mode="linear", extrapolation_value=9,
                    coordinate_transformation_mode="tf_crop_and_resize")
    assert inside.tolist() == [1.0, 2.0, 9.0]  # x = 0, 1, 2
    # x = 0, 0.5, 1: strings need no extrapolation value while every point is inside
    assert resize(np.array(["a", "b"]), roi=[0.0, 1.0], sizes=[3],
                  coordinate_transformation_mode="tf_crop_and_resize").tolist() == ["a", "a", "b"]


# --- properties --------------------------------------------------------------------------------


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("mode", MODES)
def test_scale_1_is_the_identity(mode: str, transform: str, rng: np.random.Generator) -> None:
    data = rng.random((3, 4, 5))
    data[0, 0, 0], data[1, 2, 3] = np.inf, np.nan  # an unchanged axis is copied, not weighed
    options: list[dict[str, Any]] = [{}]
    if mode != "nearest":
        options += [{"antialias": True}, {"exclude_outside": True}, {"antialias": 1, "exclude_outside": 1}]
    for extra in options:
        keywords: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": transform, **extra}
        if transform == "tf_crop_and_resize":
            keywords["roi"] = [0, 0, 0, 1, 1, 1]
        np.testing.assert_array_equal(resize(data, scales=[1, 1, 1], **keywords), data)
        np.testing.assert_array_equal(resize(data, sizes=[3, 4, 5], **keywords), data)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_antialias_only_changes_a_downscale(mode: str, rng: np.random.Generator) -> None:
    data = rng.random((5, 6))
    for scales in ([2.0, 1.5], [1.0, 3.0]):
        np.testing.assert_allclose(resize(data, scales=scales, mode=mode, antialias=True),
                                   resize(data, scales=scales, mode=mode), rtol=1e-13, atol=1e-13)
    assert not np.allclose(resize(data, scales=[0.5, 0.5], mode=mode, antialias=True),
                           resize(data, scales=[0.5, 0.5], mode=mode))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_nearest_integer_upscale_repeats(dtype: np.dtype, rng: np.random.Generator) -> None:
    data = make_array(rng, (2, 3, 2), dtype)
    repeated = np.repeat(np.repeat(data, 3, axis=1), 2, axis=2)
    for transform, nearest_mode in [("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
                                    ("asymmetric", "floor"), ("pytorch_half_pixel", "round_prefer_floor")]:
        got = resize(data, scales=[3, 2], axes=[1, -1], coordinate_transformation_mode=transform,
                     nearest_mode=nearest_mode)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, repeated)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(0, 6), min_size=1, max_size=3),
       factors=st.lists(st.sampled_from([0.25, 0.5, 0.7, 1.0, 1.3, 2.0, 2.5]), min_size=3, max_size=3),
       lengths=st.lists(st.integers(1, 7), min_size=3, max_size=3),
       use_scales=st.booleans(),
       policy=st.sampled_from(["stretch", "not_larger", "not_smaller"]),
       mode=st.sampled_from(MODES))
def test_output_shape_is_resize_output_shape(shape: list[int], factors: list[float], lengths: list[int],
                                             use_scales: bool, policy: str, mode: str) -> None:
    data = np.zeros(shape)
    rank = len(shape)
    if not use_scales and 0 in shape:
        return
    keywords: dict[str, Any] = ({"scales": factors[:rank]} if use_scales else {"sizes": lengths[:rank]})
    expected = resize_output_shape(shape, keep_aspect_ratio_policy=policy, **keywords)
    assert resize(data, mode=mode, keep_aspect_ratio_policy=policy, **keywords).shape == expected
    if use_scales:
        assert expected == tuple(math.floor(n * Fraction(str(s))) for n, s in zip(shape, factors))


def test_empty_output_and_empty_input() -> None:
    assert resize(np.arange(3.0), scales=[0.25], mode="linear").shape == (0,)
    assert resize(np.zeros((0, 4)), scales=[1, 0.5], mode="cubic").shape == (0, 2)
    assert resize(np.zeros((3, 0), dtype=np.uint8), sizes=[5], axes=[0]).shape == (5, 0)


@pytest.mark.parametrize("transform", [t for t in TRANSFORMS if t != "tf_crop_and_resize"])
@pytest.mark.parametrize("mode", MODES)
def test_an_empty_axis_scaled_in_every_transformation(mode: str, transform: str) -> None:
    """An axis of length 0 resized by a scale has no output width: half_pixel_symmetric's
    adjustment (output_width_int / output_width) divided 0 by 0, a ZeroDivisionError (and a
    traceback from geomcli resize) where the other transformations gave the empty result."""
    keywords: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": transform}
    assert resize(np.zeros((0, 3), np.float32), scales=[2, 1.5], **keywords).shape == (0, 4)
    assert resize_changed_axes((0, 3), scales=[2, 1.5], **keywords) == (0, 1)
    assert resize_coordinate_map((0, 3), scales=[2, 1.5], **keywords)[1] == resize_coordinate_map(
        (1, 3), scales=[2, 1.5], **keywords)[1]


def test_bfloat16_and_big_coordinates() -> None:
    data = np.array([1, 2, 3], dtype=ml_dtypes.bfloat16)
    assert resize(data, sizes=[5], mode="linear").dtype == data.dtype
    # a tiny scale makes denominators past int64: the coordinate arithmetic goes to Python ints
    tiny = float(np.float32(1e-30))
    assert resize(np.arange(4.0), scales=[tiny], axes=[0]).shape == (0,)
    far = resize(np.arange(4.0), roi=[1e-30, 1 - 1e-17], sizes=[3], mode="linear",
                 coordinate_transformation_mode="tf_crop_and_resize")
    np.testing.assert_allclose(far, [0, 1.5, 3])


# --- errors ------------------------------------------------------------------------------------

X = np.zeros((1, 3, 4, 4), dtype=np.float32)
WHERE = r"\(input shape \(1, 3, 4, 4\)\)"


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"scales": [1, 1, 2, 2], "sizes": [1, 3, 8, 8]}, r"^resize: give scales or sizes, not both " + WHERE + "$"),
        ({}, r"^resize: give scales or sizes, found neither " + WHERE + "$"),
        ({"scales": [], "sizes": []}, r"^resize: give scales or sizes, found neither"),
        ({"scales": [2, 2]}, r"^resize: scales has 2 values for rank 4 " + WHERE + "$"),
        ({"sizes": [8, 8, 8], "axes": [2, 3]}, r"^resize: sizes has 3 values for axes \[2, 3\]"),
        ({"sizes": [8], "axes": [2, 3]}, r"^resize: sizes has 1 value for axes \[2, 3\]"),
        ({"scales": [1, 1, 0, 2]}, r"^resize: scales must be > 0 and finite in float32, found 0 at index 2"),
        ({"scales": [1, 1, -2.0, 2]}, r"must be > 0 and finite in float32, found -2.0 at index 2"),
        ({"scales": [1, 1, 1e-50, 2]}, r"must be > 0 and finite in float32, found 1e-50 at index 2"),
        ({"scales": [1, 1, 1e39, 2]}, r"must be > 0 and finite in float32, found 1e\+39"),
        ({"scales": [1, 1, float("nan"), 2]}, r"found nan at index 2"),
        ({"scales": [1, 1, True, 2]}, r"^resize: scales must hold numbers, found True at index 2"),
        ({"scales": "2"}, r"^resize: scales must be a 1-D list of numbers, found '2'"),
        ({"scales": np.ones((2, 2))}, r"^resize: scales must be 1-D, found shape \(2, 2\)"),
        ({"scales": ["a", "b", "c", "d"]}, r"^resize: scales must hold numbers, found dtype <U1"),
        ({"sizes": [1, 3, 0, 8]}, r"^resize: sizes must be >= 1, found 0 at index 2"),
        ({"sizes": [1, 3, -4, 8]}, r"^resize: sizes must be >= 1, found -4 at index 2"),
        ({"sizes": [1, 3, 4.0, 8]}, r"^resize: sizes must hold integers, found 4.0 at index 2"),
        ({"sizes": [8], "axes": [4]}, r"^resize: axes must be in \[-4, 3\], found 4 " + WHERE),
        ({"sizes": [8], "axes": [-5]}, r"^resize: axes must be in \[-4, 3\], found -5"),
        ({"sizes": [8, 8], "axes": [2, -2]}, r"^resize: axes repeats axis 2 \(axes \[2, -2\], input shape"),
        ({"sizes": [8], "axes": [2.0]}, r"^resize: axes must hold integers, found 2.0"),
        ({"sizes": [8], "axes": 2}, r"^resize: axes must be a 1-D list of integers, found 2"),
        ({"sizes": [8, 8], "axes": [2, 3], "mode": "bilinear"},
         r"^resize: mode must be one of nearest, linear, cubic; found 'bilinear' " + WHERE + "$"),
        ({"sizes": [8, 8], "axes": [2, 3], "coordinate_transformation_mode": "tf_half_pixel_for_nn"},
         r"^resize: coordinate_transformation_mode must be one of half_pixel, .*; found 'tf_half_pixel_for_nn'"),
        ({"sizes": [8, 8], "axes": [2, 3], "nearest_mode": "round"},
         r"^resize: nearest_mode must be one of round_prefer_floor, .*; found 'round'"),
        ({"sizes": [8, 8], "axes": [2, 3], "keep_aspect_ratio_policy": "fit"},
         r"^resize: keep_aspect_ratio_policy must be one of stretch, not_larger, not_smaller; found 'fit'"),
        ({"sizes": [8, 8], "axes": [2, 3], "coordinate_transformation_mode": "tf_crop_and_resize"},
         r"^resize: coordinate_transformation_mode tf_crop_and_resize needs roi, found none " + WHERE + "$"),
        ({"sizes": [8, 8], "axes": [2, 3], "roi": [0, 0, 1], "coordinate_transformation_mode": "tf_crop_and_resize"},
         r"^resize: roi must hold 4 values \(the starts, then the ends, of axes \[2, 3\]\), found 3 " + WHERE),
        ({"sizes": [8, 8], "axes": [2, 3], "roi": [0, 0, 1, 1, 1], "mode": "linear"},
         r"^resize: roi must hold 4 values"),
        ({"sizes": [8, 8], "axes": [2, 3], "roi": [0, float("inf"), 1, 1]},
         r"^resize: roi must hold finite numbers, found inf at index 1"),
        ({"sizes": [8, 8], "axes": [2, 3], "roi": [0, None, 1, 1]},
         r"^resize: roi must hold numbers, found dtype object"),
        ({"sizes": [8, 8], "axes": [2, 3], "roi": [0, True, 1, 1]},
         r"^resize: roi must hold numbers, found True at index 1"),
        ({"sizes": [8, 8], "axes": [2, 3], "cubic_coeff_a": float("nan")},
         r"^resize: cubic_coeff_a must be finite in float32, found nan"),
        ({"sizes": [8, 8], "axes": [2, 3], "cubic_coeff_a": "-0.5"},
         r"^resize: cubic_coeff_a must be a real number, found '-0.5'"),
        ({"sizes": [8, 8], "axes": [2, 3], "extrapolation_value": None},
         r"^resize: extrapolation_value must be a real number, found None"),
        ({"sizes": [8, 8], "axes": [2, 3], "exclude_outside": 2, "mode": "cubic"},
         r"^resize: exclude_outside must be 0, 1, False or True; found 2"),
        ({"sizes": [8, 8], "axes": [2, 3], "antialias": "yes", "mode": "linear"},
         r"^resize: antialias must be 0, 1, False or True; found 'yes'"),
        ({"sizes": [8, 8], "axes": [2, 3], "exclude_outside": True},
         r"^resize: exclude_outside is undefined for mode nearest; use linear or cubic " + WHERE + "$"),
        ({"sizes": [2, 2], "axes": [2, 3], "antialias": 1},
         r"^resize: antialias is undefined for mode nearest; use linear or cubic " + WHERE + "$"),
    ],
)
def test_errors(keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(GeomError, match=message):
        resize(X, **keywords)


def test_a_numpy_number_is_named_as_the_number_it_is() -> None:
    with pytest.raises(GeomError, match=r"^resize: scales must be > 0 and finite in float32, found 0\.0 at index 0 "):
        resize(np.zeros((4, 4)), scales=np.array([0.0, 1.0]))
    with pytest.raises(GeomError, match=r"^resize: sizes must hold integers, found 10\.5 at index 0 "):
        resize(np.zeros((4, 4)), sizes=np.array([10.5, 3.0]))


def test_data_errors() -> None:
    with pytest.raises(GeomError, match=r"^resize: data must be bool, .*; found dtype object \(input shape \(2,\)\)$"):
        resize(np.array([1, None]), scales=[2])
    with pytest.raises(GeomError, match=r"^resize: data must be .*; found dtype datetime64\[s\]"):
        resize(np.array(["2020-01-01"], dtype="datetime64[s]"), scales=[2])
    with pytest.raises(GeomError, match=r"^resize: data is a masked array, whose mask would be lost"):
        resize(np.ma.masked_array([1.0, 2.0], mask=[0, 1]), scales=[2])
    with pytest.raises(GeomError, match=r"^resize: data is not an array"):
        resize([[1, 2], [3]], scales=[2])
    with pytest.raises(GeomError, match=r"^resize: cannot resize axis 1 of length 0 to 3 \(input shape \(2, 0\)\)$"):
        resize(np.zeros((2, 0)), sizes=[3], axes=[1])
    with pytest.raises(GeomError, match=r"^resize: string data has no extrapolation value, and tf_crop_and_resize "
                                        r"reads outside axis 0 \(its roi -0.5 to 1.0, input shape \(2,\)\)$"):
        resize(np.array(["a", "b"]), roi=[-0.5, 1.0], sizes=[3], coordinate_transformation_mode="tf_crop_and_resize")


def test_outputs_too_big() -> None:
    with pytest.raises(GeomError, match=r"^resize: the output of shape \(1099511627776, 1099511627776\) is bigger than "
                                        r"numpy can address \(input shape \(2, 2\)\)$"):
        resize(np.zeros((2, 2)), sizes=[2**40, 2**40])
    # past 64 bits a list of Python ints is an object array: still numbers, judged by size
    with pytest.raises(GeomError, match=r"^resize: the output of shape \(2, 1180591620717411303424\) is bigger than "):
        resize(np.zeros((2, 2)), sizes=[2, 2**70])
    with pytest.raises(GeomError, match=r"^resize: could not allocate 281474976710656 bytes \(256\.0 TiB\) for the "
                                        r"output of shape \(35184372088832,\) and dtype float64 "
                                        r"\(input shape \(1,\)\)$"):
        resize(np.zeros(1), sizes=[2**45], mode="linear")


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_an_output_that_cannot_be_held_is_refused_before_its_plans(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plans are as long as the output's axes: for these sizes they would take hours and more
    memory than the machine has (sizes [10**8, 10**8]: 37 s and 13 GiB, then the refusal)."""
    monkeypatch.setattr(resize_module, "_plans", lambda *args: pytest.fail("plans made for an output never made"))
    with pytest.raises(GeomError, match=r"^resize: could not allocate 2305843009213693952 bytes \(2\.0 EiB\) for the "
                                        r"output of shape \(1073741824, 536870912\) and dtype float32 "
                                        r"\(input shape \(2, 2\)\)$"):
        resize(np.zeros((2, 2), np.float32), sizes=[2**30, 2**29], mode=mode)


def test_memory_missing_for_the_work_is_not_said_to_be_the_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """It read 'the output of shape (10, 10) does not fit in memory' for a linear resize of a
    broadcast (100000, 100000) view, copied whole by the work."""

    def no_memory(*args: Any, **kwargs: Any) -> np.ndarray:
        raise MemoryError("Unable to allocate 37.3 GiB for an array with shape (100000, 100000)")

    monkeypatch.setattr(resize_module, "_weigh_all", no_memory)
    view = np.broadcast_to(np.float32(1), (100000, 100000))
    with pytest.raises(GeomError, match=r"^resize: not enough memory for the work arrays of the output of shape "
                                        r"\(10, 10\); data that is not C-contiguous may be copied whole: 40000000000 "
                                        r"bytes \(37\.3 GiB\) \(input shape \(100000, 100000\)\)$"):
        resize(view, sizes=[10, 10], mode="linear")
    with pytest.raises(GeomError, match=r"^resize: not enough memory for the work arrays of the output of shape "
                                        r"\(4, 6\) \(input shape \(2, 3\)\)$"):
        resize(np.zeros((2, 3)), scales=[2, 2], mode="linear")


@pytest.mark.parametrize("into", [False, True])
def test_nearest_copies_only_what_it_takes_of_a_strided_view(into: bool) -> None:
    """np.take copied a view that is not C-contiguous whole first: sizes [10, 10] of a broadcast
    (100000, 100000) view was 'does not fit in memory' (37.3 GiB)."""
    view = np.broadcast_to(np.arange(4000.0), (4000, 4000))  # 128 MB, as seen
    out = np.empty((10, 10)) if into else None
    tracemalloc.start()
    try:
        got = resize(view, sizes=[10, 10], out=out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_array_equal(got, resize(np.ascontiguousarray(view), sizes=[10, 10]))
    assert peak < 1 << 20, peak


def test_nearest_writes_into_out_without_a_copy_of_the_output() -> None:
    data = np.arange(1000 * 1000, dtype=np.uint32).reshape(1000, 1000)
    out = np.empty((1000, 2000), np.uint32)  # 8 MB
    tracemalloc.start()
    try:
        got = resize(data, sizes=[2000], axes=[1], out=out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got is out
    assert_array_equal(out, np.repeat(data, 2, axis=1))
    assert peak < out.nbytes // 4, peak


@pytest.mark.parametrize("shape", [(1000, 1000), (1, 2, 500, 1000)], ids=["hw", "nchw"])
def test_nearest_on_two_axes_holds_no_intermediate_beside_the_output(shape: tuple[int, ...]) -> None:
    """The first axis's gather was held whole while the second's made the output: 1.5 times the
    output on a 2x2 upscale (a 2x2 upscale of an 80 MP photo: 1.44 GB for a 960 MB result)."""
    data = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    sizes = [2 * shape[-2], 2 * shape[-1]]
    tracemalloc.start()
    try:
        got = resize(data, sizes=sizes, axes=[-2, -1])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_array_equal(got, data.repeat(2, axis=-2).repeat(2, axis=-1))
    assert peak < got.nbytes * 5 // 4, (peak, got.nbytes)


@pytest.mark.parametrize("band", [1, 40])
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("transform", ["half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"])
def test_nearest_in_bands_is_the_reference(monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator, band: int,
                                           nearest_mode: str, transform: str) -> None:
    """Gathered a band of the output at a time (here a row of one axis, or a few), bit for bit the
    reference for every nearest_mode and transform, on axes after untouched ones and on the first."""
    monkeypatch.setattr(resize_module, "_GATHERED_BAND", band)
    for dtype, shape, sizes, axes in [(np.float32, (2, 3, 5, 4), [7, 3], [1, 3]),
                                      (np.uint8, (4, 5, 3), [3, 8], [0, 1]),
                                      (np.bool_, (2, 3, 6), [5, 4], [-2, -1]),
                                      (np.uint8, (6, 2, 3, 4), [2, 3], [2, 3])]:
        data = (rng.standard_normal(shape) * 50).astype(dtype)
        roi = [0.2, -0.3, 0.9, 1.2] if transform == "tf_crop_and_resize" else None
        options: dict[str, Any] = {"coordinate_transformation_mode": transform, "nearest_mode": nearest_mode,
                                   "extrapolation_value": 1.0}
        got = resize(data, roi, sizes=sizes, axes=axes, **options)
        want = by_reference(data, roi, sizes=sizes, axes=axes, **options)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (dtype, shape)


def test_a_steep_antialiased_shrink_keeps_its_bands_small() -> None:
    data = np.sin(np.arange(20000) / 300.0)
    got = resize(data, sizes=[3], mode="linear", antialias=True)  # 13334 taps per output
    slow = by_reference(data, sizes=[3], mode="linear", antialias=True)
    np.testing.assert_allclose(got, slow, rtol=1e-12, atol=1e-14)
    assert resize_module._band_rows(resize_module._plan(0, 20000, 3, Fraction(3, 20000), None, mode="linear",
                                                        transform="half_pixel", nearest_mode="floor",
                                                        cubic_coeff_a=-0.75, exclude_outside=False,
                                                        antialias=True), last=False) == 2


def test_output_shape_errors() -> None:
    with pytest.raises(GeomError, match=r"^resize: data_shape must hold integers >= 0, found -1$"):
        resize_output_shape((2, -1), scales=[1, 1])
    with pytest.raises(GeomError, match=r"^resize: data_shape must be a 1-D list of integers, found 3$"):
        resize_output_shape(3, scales=[1])
    with pytest.raises(GeomError, match=r"^resize: give scales or sizes, not both \(input shape \(2,\)\)$"):
        resize_output_shape((2,), scales=[1], sizes=[2])


def test_empty_inputs_beside_the_other_are_absent() -> None:
    data = np.arange(4.0)
    np.testing.assert_array_equal(resize(data, roi=[], scales=[], sizes=[2]), resize(data, sizes=[2]))
    np.testing.assert_array_equal(resize(data, scales=np.array([2.0]), sizes=np.array([], dtype=np.int64)),
                                  resize(data, scales=[2]))


# --- the faster planning and conversion against the pieces they replaced, bit for bit -----------


def bands_one_by_one(plan: Any, rows: int) -> list[Any]:
    """resize_module._bands as it was: one matrix and one np.add.at per band."""
    found = []
    for start in range(0, plan.out_len, rows):
        stop = min(start + rows, plan.out_len)
        taps, weights = plan.taps[start:stop], plan.weights[start:stop]
        low, high = int(taps.min()), int(taps.max()) + 1
        dense = np.zeros((stop - start, high - low))
        np.add.at(dense, (np.arange(stop - start)[:, None], taps - low), weights)
        found.append(resize_module._Band(start, stop, low, high, dense))
    return found


def run_in_equal_shares(jobs: list[Any], work: np.dtype, values: int, threads: int) -> None:
    """resize_module._run as it was: each worker a fixed share of the jobs (here one after another)."""
    workers = 2
    share = -(-len(jobs) // workers)
    for first in range(0, len(jobs), share):
        scratch = resize_module._Scratch(work)
        for job in jobs[first:first + share]:
            job(scratch)


def to_dtype_by_nan_to_num(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """_numeric.to_dtype as it was: np.nan_to_num after the clip."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        rounded: np.ndarray = np.rint(values)
        past = rounded >= float(info.max) if info.bits == 64 else np.zeros(rounded.shape, bool)
        high = float(info.max) if info.bits < 64 else np.nextafter(float(info.max), 0.0)
        np.clip(rounded, float(info.min), high, out=rounded)
        np.nan_to_num(rounded, copy=False, nan=0.0)
        result = rounded.astype(dtype)
        result[past] = info.max
        return result
    with np.errstate(over="ignore", invalid="ignore"):
        return _numeric.round_once(values, dtype).astype(dtype, copy=False)


SAME_BITS_DTYPES = [np.dtype(name) for name in ("uint8", "int16", "float16", "float32", "float64")] + [
    np.dtype(ml_dtypes.bfloat16)]


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_new_path_gives_the_old_paths_bits(draw: st.DataObject) -> None:
    rank = draw.draw(st.integers(1, 3))
    shape = tuple(draw.draw(st.lists(st.integers(1, 23), min_size=rank, max_size=rank)))
    axes = draw.draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    sizes = draw.draw(st.lists(st.integers(1, 41), min_size=len(axes), max_size=len(axes)))
    dtype = draw.draw(st.sampled_from(SAME_BITS_DTYPES))
    keywords = {"mode": draw.draw(st.sampled_from(["linear", "cubic"])), "antialias": draw.draw(st.booleans()),
                "exclude_outside": draw.draw(st.booleans()),
                "coordinate_transformation_mode": draw.draw(st.sampled_from(TRANSFORMS[:-1]))}
    tiny = draw.draw(st.booleans())
    seeded = np.random.default_rng(draw.draw(st.integers(0, 2**32 - 1)))
    data = make_array(seeded, shape, dtype)
    if dtype.kind == "f":  # values of every bit, not only integers
        data = (data * seeded.random(shape)).astype(dtype)
    with pytest.MonkeyPatch.context() as patch:
        if tiny:  # every branch: runs of bands, split products, column chunks, threaded jobs
            patch.setattr(resize_module, "_PIECE", 64)
            patch.setattr(resize_module, "_PRODUCT", 300)
        new = resize(data, sizes=sizes, axes=axes, threads=2, **keywords)
        patch.setattr(resize_module, "_bands", bands_one_by_one)
        patch.setattr(resize_module, "_run", run_in_equal_shares)
        patch.setattr(_numeric, "to_dtype", to_dtype_by_nan_to_num)
        old = resize(data, sizes=sizes, axes=axes, threads=2, **keywords)
    assert new.dtype == old.dtype and new.shape == old.shape
    assert new.tobytes() == old.tobytes()


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint32", "int64", "uint64"])
def test_integer_conversion_gives_the_nan_to_num_bits(dtype: str, rng: np.random.Generator) -> None:
    values = rng.standard_normal(500) * 2.0 ** rng.integers(0, 70, size=500)
    values[:7] = [np.nan, np.inf, -np.inf, 0.5, -0.5, 2.5, -1e300]
    got = _numeric.to_dtype(values, np.dtype(dtype))
    assert got.tobytes() == to_dtype_by_nan_to_num(values, np.dtype(dtype)).tobytes()


def test_bands_are_the_one_by_one_matrices() -> None:
    for n, m, mode, antialias in [(1024, 512, "linear", True), (17, 40, "cubic", False), (1000, 7, "cubic", True),
                                  (5, 1, "linear", True), (9, 9, "linear", False)]:
        plan = resize_module._plan(0, n, m, Fraction(m, n), None, mode=mode, transform="half_pixel",
                                   nearest_mode="floor", cubic_coeff_a=-0.75, exclude_outside=False,
                                   antialias=antialias)
        for rows in (1, 3, 8, 64):
            ours, theirs = resize_module._bands(plan, rows), bands_one_by_one(plan, rows)
            spans = [(b.start, b.stop, b.low, b.high) for b in ours]
            assert spans == [(b.start, b.stop, b.low, b.high) for b in theirs]
            for mine, old in zip(ours, theirs):
                assert mine.weights.shape == old.weights.shape and mine.weights.tobytes() == old.weights.tobytes()
                assert mine.weights.flags.c_contiguous


def test_nan_and_inf_in_the_data_raise_no_floating_point_warning() -> None:
    """They are values like any other, spread by the products as the formula says (one thread and two)."""
    import warnings

    for shape in ((1, 3, 40, 30), (1, 3, 400, 300)):
        data = np.ones(shape, np.float32)
        data[0, 0, 3, 3], data[0, 1, 5, 5] = np.nan, np.inf
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            found = resize(data, sizes=[shape[2] + 10, shape[3] // 2], axes=[2, 3], mode="cubic", antialias=True)
        assert np.isnan(found).any() and np.isfinite(found[0, 2]).all()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "complex64", "float64"])
@pytest.mark.parametrize(("shape", "sizes"), [((16,), [5]), ((3, 16), [2, 5]), ((6, 6, 16), [4, 4, 5])])
def test_an_inf_reaches_only_the_outputs_that_tap_it(dtype: str, shape: tuple[int, ...], sizes: list[int]) -> None:
    """16 -> 5 linear (half_pixel): x = 1.1, 4.3, 7.5, 10.7, 13.9, so no output taps input 12.
    An inf there left every output finite in the compiled kernel (float32/64, one or two axes)
    but turned every output of its band into NaN on the numpy path (float16, bfloat16, complex,
    three axes): the bands multiply their whole span, the inf by weight 0 (0 · inf = NaN).
    onnxruntime and both references give the finite values. Cubic taps 9 .. 12 for x = 10.7 and
    12 .. 15 for 13.9, input 12 with a negative weight: -inf there, the rest finite."""
    kind = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    line = np.arange(16.0)
    line[12] = np.inf
    data = np.broadcast_to(line, shape).astype(kind)
    linear = resize(data, sizes=sizes, mode="linear").reshape(-1, 5).astype(np.complex128)
    expected = np.array([1.1, 4.3, 7.5, 10.7, 13.9]).astype(kind).astype(np.complex128)
    np.testing.assert_allclose(linear, np.broadcast_to(expected, linear.shape), rtol=1e-15)
    cubic = resize(data, sizes=sizes, mode="cubic").reshape(-1, 5).astype(np.complex128)
    assert np.isfinite(cubic[:, :3]).all()
    if len(shape) == 1:  # (on more axes the other axes' taps add -inf and inf: NaN, as the formula says)
        assert (cubic[:, 3:] == -np.inf).all()


def test_an_inf_costs_the_numpy_path_little_more_memory() -> None:
    """The tap-by-tap sums that an inf or NaN calls for go a block of outputs at a time: they
    made the whole input in float64 and three float64 arrays of each pass's size (float16 data
    doubled on three axes: 43 MiB at the peak, against 9 MiB without the inf)."""
    import tracemalloc

    peaks = []
    for value in (1.0, np.inf):
        data = np.ones((20, 100, 100), np.float16)
        data[3, 5, 7] = value
        out = np.empty((40, 200, 200), np.float16)
        tracemalloc.start()
        try:
            resize(data, sizes=list(out.shape), mode="linear", out=out, threads=1)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert np.isinf(out).any() == (value == np.inf)
    assert peaks[1] < 1.5 * peaks[0], [peak >> 20 for peak in peaks]


# --- the compiled passes ---------------------------------------------------------------------------

COMPILED_LAYOUTS = [  # (shape, sizes, axes)
    ((2, 3, 9, 11), [5, 17], [2, 3]),  # an NCHW image: the second axis last
    ((9, 11, 3), [4, 17], [0, 1]),  # an HWC image: channels after the second axis
    ((9, 11, 6), [4, 17], [0, 1]),  # channels summed four, then two, side by side
    ((9, 11, 5), [13, 6], [0, 1]),  # four, then one
    ((5, 4, 6, 7), [3, 9], [1, 3]),  # two axes with one between them
    ((9, 11, 3), [7, 3], [1, 0]),  # axes given in the other order: still made in axis order
    ((30, 20), [11], [0]),  # one axis, values after it
    ((4, 50), [21], [1]),  # one axis, the last
]
COMPILED_KEYWORDS = [
    {"mode": "linear"}, {"mode": "linear", "antialias": True}, {"mode": "cubic", "antialias": True},
    {"mode": "cubic", "exclude_outside": True, "coordinate_transformation_mode": "align_corners"},
    {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "roi": "ROI",
     "extrapolation_value": 3.0},
]


@pytest.mark.skipif(resize_module._compiled is None, reason="the compiled kernel is not built")
@pytest.mark.parametrize(("shape", "sizes", "axes"), COMPILED_LAYOUTS)
@pytest.mark.parametrize("dtype", sorted(resize_module._COMPILED_KINDS))
def test_the_compiled_passes_are_the_references_sums(shape: tuple[int, ...], sizes: list[int], axes: list[int],
                                                     dtype: str, rng: np.random.Generator) -> None:
    """In axis order, each a sum from 0.0 in tap order, converted once: the reference's float64
    values converted (up to a tie its weights, rounded another way, put on the other side), and
    within one step of the numpy path's bands; integers at their extremes saturate as it does."""
    kind = np.dtype(dtype)
    data = make_array(rng, shape, kind)
    if kind.kind in "iu":  # the extremes, which cubic overshoots: saturated
        data.flat[::3] = np.iinfo(kind).max
        data.flat[1::5] = np.iinfo(kind).min
    for keywords in COMPILED_KEYWORDS:
        if keywords.get("roi") == "ROI":
            keywords = {**keywords, "roi": [-0.1] * len(sizes) + [0.9] * len(sizes)}
        ours = resize(data, sizes=sizes, axes=axes, **keywords)
        assert ours.dtype == kind
        wide = by_reference(data.astype(np.float64), sizes=sizes, axes=axes, **keywords)
        scale = float(np.abs(data.astype(np.float64)).max())
        if kind.kind in "iu" and kind.itemsize == 8:  # past 2**53 float64 itself is steps of up to 1024 apart
            np.testing.assert_allclose(ours.astype(np.float64), _numeric.to_dtype(wide, kind).astype(np.float64),
                                       rtol=1e-12, atol=1e-12 * scale)
        else:
            assert_rounded_from(ours, wide)
        compiled = resize_module._compiled
        try:
            resize_module._compiled = None
            banded = resize(data, sizes=sizes, axes=axes, **keywords)
        finally:
            resize_module._compiled = compiled
        if kind == np.float32:
            np.testing.assert_array_max_ulp(ours, banded, maxulp=1)
        elif kind.itemsize == 8:  # float64's own rounding errors, summed in two orders
            np.testing.assert_allclose(ours.astype(np.float64), banded.astype(np.float64), rtol=1e-12,
                                       atol=1e-12 * max(scale, 1))
        else:
            assert np.abs(ours.astype(np.float64) - banded.astype(np.float64)).max() <= 1


@pytest.mark.skipif(resize_module._compiled is None, reason="the compiled kernel is not built")
def test_the_compiled_kernel_checks_what_it_is_handed() -> None:
    """The Python side validates everything; the C side still refuses what would read or write
    past a buffer."""
    kernel = resize_module._compiled
    source, out = np.zeros((1, 4, 1, 1, 1), np.float32), np.zeros((1, 2, 1, 1, 1), np.float32)
    taps, weights = np.array([[0, 1], [2, 3]], np.int64), np.full((2, 2), 0.5)
    shape = (1, 4, 1, 1, 1, 2, 1, 2, 1)
    kernel.resample(source, out, taps, weights, None, None, shape, "float32", 0, 2)
    with pytest.raises(ValueError, match="a tap lies outside its axis"):
        kernel.resample(source, out, np.array([[0, 4], [2, 3]], np.int64), weights, None, None, shape, "float32", 0, 2)
    with pytest.raises(ValueError, match="out holds 8 bytes, not 4"):
        kernel.resample(source, out, taps, weights, None, None, (1, 4, 1, 1, 1, 1, 1, 2, 1), "float32", 0, 1)
    with pytest.raises(ValueError, match="shape or rows out of range"):
        kernel.resample(source, out, taps, weights, None, None, shape, "float32", 0, 3)
    with pytest.raises(ValueError, match="dtype float16 is not compiled"):
        kernel.resample(source, out, taps, weights, None, None, shape, "float16", 0, 2)


@pytest.mark.parametrize("dtype", ["int64", "uint64"])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_the_largest_64_bit_value_stays_itself(dtype: str, mode: str) -> None:
    """A constant image of int64's (uint64's) largest value: its float64 sums are 2**63 (2**64),
    past the range, and saturate to the largest value itself, not to the largest double below
    (found by a try-out: 2**63 - 1024); the same by the compiled kernels and the numpy path, and
    by grid_sample."""
    import geomcli
    from geomcli.ops import resize as resize_module

    top = np.iinfo(dtype).max
    data = np.full((1, 1, 3, 4), top, dtype)
    expected = np.full((1, 1, 6, 8), top, dtype)
    assert np.array_equal(resize(data, scales=[1, 1, 2, 2], mode=mode), expected)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(resize_module, "_compiled", None)
        assert np.array_equal(resize(data, scales=[1, 1, 2, 2], mode=mode), expected)
    grid = np.zeros((1, 2, 2, 2), np.float32)
    assert np.array_equal(geomcli.grid_sample(data, grid, mode=mode), np.full((1, 1, 2, 2), top, dtype))
    assert np.array_equal(geomcli.ops._numeric.to_dtype(np.array([2.0**70, -(2.0**70), np.nan]), np.dtype(dtype)),
                          np.array([top, np.iinfo(dtype).min, 0], dtype))


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scale", [1e-3, 1e-12, 1e-20])
def test_antialias_to_an_empty_axis_makes_no_taps(mode: str, scale: float) -> None:
    """floor(8 * scale) is 0; antialias widened the taps to 2 / scale a side all the same: at
    1e-20 numpy's "ValueError: Maximum allowed size exceeded" (a traceback from the command
    line), at 1e-12 "the output of shape (1, 2, 0, 8) does not fit in memory"."""
    data = np.arange(128, dtype=np.float32).reshape(1, 2, 8, 8)
    for exclude_outside in (0, 1):
        result = resize(data, scales=[1, 1, scale, 1], mode=mode, antialias=1, exclude_outside=exclude_outside)
        assert result.shape == (1, 2, 0, 8) and result.dtype == np.float32
