"""Tests for geomcli.kernels: the four ONNX geometry operators in pure numpy.

Sections, in order:
 1. the official ONNX backend node cases, generated at test time;
 2. the spec pages' examples as literal arrays;
 3. independent oracles (element loops and closed forms) over every dtype;
 4. hypothesis properties (identity, round trips, output shapes);
 5. decisions where we differ from the ONNX reference evaluator or onnxruntime;
 6. every error branch, and odd inputs that must raise GeomError or work;
 7. onnxruntime as a second oracle, and the import-weight check.
"""

from __future__ import annotations

import functools
import itertools
import math
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import pytest
from conftest import ALL_DTYPES, FLOAT_DTYPES, make_array
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import geomcli
from geomcli.kernels import (
    GeomError,
    affine_grid,
    affine_grid_output_shape,
    center_crop_pad,
    center_crop_pad_output_shape,
    depth_to_space,
    depth_to_space_output_shape,
    space_to_depth,
    space_to_depth_output_shape,
)

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
MODES = ["DCR", "CRD"]
# Hypothesis: enough examples to find edge cases, few enough to keep the file well under a minute.
PROPERTY = settings(max_examples=40, deadline=None)


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def assert_identical(actual: Any, expected: np.ndarray) -> None:
    """Same type, dtype, shape and values; for non-strings also the same bits (so -0.0 != 0.0)."""
    assert isinstance(actual, np.ndarray), f"expected an ndarray, found {type(actual).__name__}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype}, expected {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape}, expected {expected.shape}"
    np.testing.assert_array_equal(actual, expected, strict=True)
    if expected.dtype.kind not in "UO":
        assert np.ascontiguousarray(actual).tobytes() == np.ascontiguousarray(expected).tobytes()


def distinct(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """1, 2, 3, ... in any supported dtype (narrow types wrap), so a misplaced element shows."""
    values = np.arange(1, math.prod(shape) + 1).reshape(tuple(shape))
    if dtype.kind == "U":
        return values.astype(str).astype(dtype)
    if dtype.kind == "b":
        return values % 3 == 1
    if dtype.kind == "c":
        return (values - 1j * values).astype(dtype)
    return values.astype(dtype)


# ---- oracles: written from the closed forms in NOTES.md, independent of the kernels ---------------


def crop_pad_oracle(data: np.ndarray, shape: Sequence[int], axes: Sequence[int] | None = None) -> np.ndarray:
    """Element by element: output index i on an axis reads input index i + offset, or zero."""
    rank = data.ndim
    chosen = list(range(rank)) if axes is None else [axis + rank if axis < 0 else axis for axis in axes]
    out_shape = list(data.shape)
    for axis, target in zip(chosen, shape, strict=True):
        out_shape[axis] = int(target)
    # crop: start = (d - t) // 2; pad: (t - d) // 2 zeros before, i.e. a negative offset.
    offsets = [(d - t) // 2 if t <= d else -((t - d) // 2) for d, t in zip(data.shape, out_shape)]
    out = np.zeros(out_shape, dtype=data.dtype)  # the dtype's zero: 0, False, "" (and bf16 0)
    for index in np.ndindex(*out_shape):
        source = tuple(i + o for i, o in zip(index, offsets))
        if all(0 <= s < d for s, d in zip(source, data.shape)):
            out[index] = data[source]
    return out


def crop_pad_by_slices(data: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """The same rule with one slice per axis; fast enough for the large-array tests."""
    out = np.zeros(tuple(shape), dtype=data.dtype)
    src: list[slice] = []
    dst: list[slice] = []
    for d, t in zip(data.shape, shape, strict=True):
        if t <= d:
            start = (d - t) // 2
            src.append(slice(start, start + t))
            dst.append(slice(0, t))
        else:
            before = (t - d) // 2
            src.append(slice(0, d))
            dst.append(slice(before, before + d))
    out[tuple(dst)] = data[tuple(src)]
    return out


def _depth_index(c: int, bh: int, bw: int, channels: int, b: int, mode: str) -> int:
    if mode == "DCR":
        return (bh * b + bw) * channels + c
    return c * b * b + bh * b + bw


def space_to_depth_oracle(data: np.ndarray, b: int, mode: str) -> np.ndarray:
    """y[n, depth(c, bh, bw), h, w] = x[n, c, h*b + bh, w*b + bw], with explicit loops."""
    n, c, h, w = data.shape
    out = np.zeros((n, c * b * b, h // b, w // b), dtype=data.dtype)
    for ni, ci, hi, wi, bh, bw in itertools.product(
        range(n), range(c), range(h // b), range(w // b), range(b), range(b)
    ):
        out[ni, _depth_index(ci, bh, bw, c, b, mode), hi, wi] = data[ni, ci, hi * b + bh, wi * b + bw]
    return out


def depth_to_space_oracle(data: np.ndarray, b: int, mode: str) -> np.ndarray:
    """The inverse loop: y[n, c, h*b + bh, w*b + bw] = x[n, depth(c, bh, bw), h, w]."""
    n, depth, h, w = data.shape
    c = depth // (b * b)
    out = np.zeros((n, c, h * b, w * b), dtype=data.dtype)
    for ni, ci, hi, wi, bh, bw in itertools.product(range(n), range(c), range(h), range(w), range(b), range(b)):
        out[ni, ci, hi * b + bh, wi * b + bw] = data[ni, _depth_index(ci, bh, bw, c, b, mode), hi, wi]
    return out


def space_to_depth_by_transpose(data: np.ndarray, b: int, mode: str) -> np.ndarray:
    """NOTES.md's reshape/transpose form, for arrays too large for the loops."""
    n, c, h, w = data.shape
    blocks = data.reshape(n, c, h // b, b, w // b, b)
    order = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    return blocks.transpose(order).reshape(n, c * b * b, h // b, w // b)


def depth_to_space_by_transpose(data: np.ndarray, b: int, mode: str) -> np.ndarray:
    n, depth, h, w = data.shape
    c = depth // (b * b)
    if mode == "DCR":
        # (n, bh, bw, c, h, w) -> (n, c, h, bh, w, bw)
        blocks = data.reshape(n, b, b, c, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        # (n, c, bh, bw, h, w) -> (n, c, h, bh, w, bw)
        blocks = data.reshape(n, c, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return blocks.reshape(n, c, h * b, w * b)


def base_coordinates(n: int, align_corners: bool) -> list[float]:
    """Closed form in float64: (2i+1)/n - 1, or 2i/(n-1) - 1 with align_corners (0 when n == 1)."""
    if align_corners:
        return [0.0] if n == 1 else [2 * i / (n - 1) - 1 for i in range(n)]
    return [(2 * i + 1) / n - 1 for i in range(n)]


def affine_grid_oracle(theta: np.ndarray, size: Sequence[int], align_corners: bool) -> np.ndarray:
    """grid[n, (d,) h, w] = theta[n] @ [x_w, y_h, (z_d,) 1] with loops, in float64."""
    matrices = np.asarray(theta).astype(np.float64)
    if len(size) == 4:
        n, _, height, width = (int(s) for s in size)
        spatial: tuple[int, ...] = (height, width)
    else:
        n, _, depth, height, width = (int(s) for s in size)
        spatial = (depth, height, width)
    k = len(spatial)
    # the last axis is ordered (x, y[, z]): coordinate j runs along spatial axis k-1-j.
    bases = [base_coordinates(length, align_corners) for length in reversed(spatial)]
    grid = np.zeros((n, *spatial, k))
    for batch in range(n):
        for index in np.ndindex(*spatial):
            point = [bases[j][index[k - 1 - j]] for j in range(k)] + [1.0]
            for row in range(k):
                grid[(batch, *index, row)] = sum(matrices[batch, row, j] * point[j] for j in range(k + 1))
    return grid


def assert_grid_close(actual: Any, expected64: np.ndarray, dtype: np.dtype, scale: float = 1.0) -> None:
    """Output dtype is theta's; values within a few units of that dtype's precision."""
    assert isinstance(actual, np.ndarray)
    assert actual.dtype == dtype, f"dtype {actual.dtype}, expected {dtype}"
    assert actual.shape == expected64.shape, f"shape {actual.shape}, expected {expected64.shape}"
    eps = float(ml_dtypes.finfo(dtype).eps)
    tolerance = 1e-15 if dtype == np.float64 else 4 * eps
    np.testing.assert_allclose(actual.astype(np.float64), expected64, rtol=tolerance, atol=tolerance * scale)


def test_the_oracles_agree_with_each_other() -> None:
    """The loop oracles and the reshape/transpose forms are two independent readings of NOTES.md."""
    x = distinct((2, 3, 6, 9), np.dtype("int32"))
    for b, mode in itertools.product([1, 3], MODES):
        assert_identical(space_to_depth_oracle(x, b, mode), space_to_depth_by_transpose(x, b, mode))
        y = space_to_depth_oracle(x, b, mode)
        assert_identical(depth_to_space_oracle(y, b, mode), x)
        assert_identical(depth_to_space_by_transpose(y, b, mode), x)
    z = distinct((5, 8, 3), np.dtype("int16"))
    for shape in [(3, 8, 3), (8, 5, 2), (0, 11, 3), (5, 8, 3)]:
        assert_identical(crop_pad_oracle(z, shape), crop_pad_by_slices(z, shape))


# --------------------------------------------------------------------------------------------------
# 1. The official ONNX backend node cases
# --------------------------------------------------------------------------------------------------

OUR_OPS = ("CenterCropPad", "AffineGrid", "SpaceToDepth", "DepthToSpace")

# Listed here so that pytest can collect quickly; test_onnx_case_list_is_complete checks the list
# against what the installed onnx generates.
ONNX_CASE_NAMES = [
    "test_center_crop_pad_crop",
    "test_center_crop_pad_pad",
    "test_center_crop_pad_crop_and_pad",
    "test_center_crop_pad_crop_axes_hwc",
    "test_center_crop_pad_crop_negative_axes_hwc",
    "test_center_crop_pad_crop_axes_chw",
    "test_affine_grid_2d",
    "test_affine_grid_2d_align_corners",
    "test_affine_grid_3d",
    "test_affine_grid_3d_align_corners",
    "test_spacetodepth",
    "test_spacetodepth_example",
    "test_spacetodepth_dcr_mode_example",
    "test_spacetodepth_crd_mode_example",
    "test_depthtospace_example",
    "test_depthtospace_crd_mode_example",
]


@dataclass(frozen=True)
class OnnxCase:
    name: str
    op_type: str
    attributes: dict[str, Any]
    data_sets: list[tuple[list[np.ndarray], list[np.ndarray]]]


def _to_array(value: Any) -> np.ndarray:
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return np.asarray(value)


@functools.cache
def onnx_cases() -> dict[str, OnnxCase]:
    """Every backend node case for our four ops, generated once per session (takes seconds)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        # Importing the generators runs all of them; the Cast cases overflow on purpose. The
        # filter here (not only pyproject's) keeps this working under `pytest -W error`.
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"onnx\.backend\.test\.case\.node\.")
        cases = collect_testcases(None)
    found: dict[str, OnnxCase] = {}
    for case in cases:
        node = case.model.graph.node[0]
        if node.op_type not in OUR_OPS or "_expanded" in case.name:
            continue
        attributes = {}
        for attribute in node.attribute:
            value = onnx.helper.get_attribute_value(attribute)
            attributes[attribute.name] = value.decode() if isinstance(value, bytes) else value
        data_sets = [
            ([_to_array(v) for v in inputs], [_to_array(v) for v in outputs]) for inputs, outputs in case.data_sets
        ]
        found[case.name] = OnnxCase(case.name, node.op_type, attributes, data_sets)
    return found


def run_kernel(op_type: str, attributes: dict[str, Any], inputs: list[np.ndarray]) -> np.ndarray:
    """Call our kernel the way an ONNX node with these attributes would be run."""
    known = {
        "CenterCropPad": {"axes"},
        "AffineGrid": {"align_corners"},
        "SpaceToDepth": {"blocksize", "mode"},
        "DepthToSpace": {"blocksize", "mode"},
    }[op_type]
    assert set(attributes) <= known, f"unexpected attributes {attributes} for {op_type}"
    if op_type == "CenterCropPad":
        return center_crop_pad(inputs[0], inputs[1], axes=attributes.get("axes"))
    if op_type == "AffineGrid":
        return affine_grid(inputs[0], inputs[1], align_corners=attributes.get("align_corners", 0))
    kernel = space_to_depth if op_type == "SpaceToDepth" else depth_to_space
    return kernel(inputs[0], attributes["blocksize"], mode=attributes.get("mode", "DCR"))


def test_onnx_case_list_is_complete() -> None:
    """Every backend case of our ops that onnx generates is in ONNX_CASE_NAMES, and vice versa."""
    assert sorted(onnx_cases()) == sorted(ONNX_CASE_NAMES)


@pytest.mark.parametrize("name", ONNX_CASE_NAMES)
def test_onnx_backend_case(name: str) -> None:
    case = onnx_cases()[name]
    assert case.data_sets, f"{name} has no data"
    for inputs, outputs in case.data_sets:
        (expected,) = outputs
        actual = run_kernel(case.op_type, case.attributes, inputs)
        if case.op_type == "AffineGrid":
            assert actual.dtype == expected.dtype == np.float32
            assert actual.shape == expected.shape
            np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)
        else:
            assert_identical(actual, expected)


# --------------------------------------------------------------------------------------------------
# 2. The spec pages' examples, as literal arrays
# --------------------------------------------------------------------------------------------------

# SpaceToDepth-28.txt, test_spacetodepth_dcr_mode_example / _crd_mode_example (shared output).
SPEC_S2D_DCR_INPUT = np.array(
    [[[[0, 18, 1, 19, 2, 20], [36, 54, 37, 55, 38, 56], [3, 21, 4, 22, 5, 23], [39, 57, 40, 58, 41, 59]],
      [[9, 27, 10, 28, 11, 29], [45, 63, 46, 64, 47, 65], [12, 30, 13, 31, 14, 32], [48, 66, 49, 67, 50, 68]]]],
    dtype=np.float32,
)  # fmt: skip
SPEC_S2D_CRD_INPUT = np.array(
    [[[[0, 9, 1, 10, 2, 11], [18, 27, 19, 28, 20, 29], [3, 12, 4, 13, 5, 14], [21, 30, 22, 31, 23, 32]],
      [[36, 45, 37, 46, 38, 47], [54, 63, 55, 64, 56, 65], [39, 48, 40, 49, 41, 50], [57, 66, 58, 67, 59, 68]]]],
    dtype=np.float32,
)  # fmt: skip
SPEC_S2D_OUTPUT = np.array(
    [[[[0, 1, 2], [3, 4, 5]], [[9, 10, 11], [12, 13, 14]], [[18, 19, 20], [21, 22, 23]],
      [[27, 28, 29], [30, 31, 32]], [[36, 37, 38], [39, 40, 41]], [[45, 46, 47], [48, 49, 50]],
      [[54, 55, 56], [57, 58, 59]], [[63, 64, 65], [66, 67, 68]]]],
    dtype=np.float32,
)  # fmt: skip


@pytest.mark.parametrize(("mode", "spec_input"), [("DCR", SPEC_S2D_DCR_INPUT), ("CRD", SPEC_S2D_CRD_INPUT)])
def test_spec_space_to_depth_example(mode: str, spec_input: np.ndarray) -> None:
    assert_identical(space_to_depth(spec_input, 2, mode=mode), SPEC_S2D_OUTPUT)
    assert_identical(depth_to_space(SPEC_S2D_OUTPUT, 2, mode=mode), spec_input)


def test_spec_space_to_depth_default_mode_is_dcr() -> None:
    assert_identical(space_to_depth(SPEC_S2D_DCR_INPUT, 2), SPEC_S2D_OUTPUT)
    assert_identical(depth_to_space(SPEC_S2D_OUTPUT, 2), SPEC_S2D_DCR_INPUT)


def _arange(shape: tuple[int, ...], start: int = 0) -> np.ndarray:
    return np.arange(start, start + math.prod(shape), dtype=np.float32).reshape(shape)


# CenterCropPad-18.txt: arange inputs; we check the printed corner rows literally and the whole
# output against the slice the closed form names.
@pytest.mark.parametrize(
    ("x", "shape", "axes", "out_shape", "literal_rows", "window"),
    [
        pytest.param(
            _arange((20, 10, 3)), [10, 7, 3], None, (10, 7, 3),
            {(0, 0): [153, 154, 155], (0, -1): [171, 172, 173], (-1, -1): [441, 442, 443]},
            (slice(5, 15), slice(1, 8), slice(None)), id="crop",
        ),
        pytest.param(
            _arange((10, 7, 3), start=1), [20, 10, 3], None, (20, 10, 3),
            {(0, 0): [0, 0, 0], (5, 1): [1, 2, 3], (14, 7): [208, 209, 210], (14, 8): [0, 0, 0]},
            None, id="pad",
        ),
        pytest.param(
            _arange((20, 8, 3)), [10, 10, 3], None, (10, 10, 3),
            {(0, 0): [0, 0, 0], (0, 1): [120, 121, 122], (0, -2): [141, 142, 143], (0, -1): [0, 0, 0],
             (-1, 1): [336, 337, 338], (-1, -2): [357, 358, 359]},
            None, id="crop_and_pad",
        ),
        pytest.param(
            _arange((20, 8, 3)), [10, 9], [0, 1], (10, 9, 3),
            {(0, 0): [120, 121, 122], (0, -1): [0, 0, 0], (-1, -2): [357, 358, 359]},
            None, id="crop_axes_hwc",
        ),
        pytest.param(
            _arange((20, 8, 3)), [10, 9], [-3, -2], (10, 9, 3),
            {(0, 0): [120, 121, 122], (0, -1): [0, 0, 0], (-1, -2): [357, 358, 359]},
            None, id="crop_negative_axes_hwc",
        ),
        pytest.param(
            _arange((3, 20, 8)), [10, 9], [1, 2], (3, 10, 9),
            {(0, 0): [40, 41, 42, 43, 44, 45, 46, 47, 0], (2, -1): [432, 433, 434, 435, 436, 437, 438, 439, 0]},
            None, id="crop_axes_chw",
        ),
    ],
)  # fmt: skip
def test_spec_center_crop_pad_examples(
    x: np.ndarray,
    shape: list[int],
    axes: list[int] | None,
    out_shape: tuple[int, ...],
    literal_rows: dict[tuple[int, int], list[float]],
    window: tuple[slice, ...] | None,
) -> None:
    y = center_crop_pad(x, np.array(shape, dtype=np.int64), axes=axes)
    assert y.shape == out_shape
    assert y.dtype == np.float32
    for index, row in literal_rows.items():
        np.testing.assert_array_equal(y[index], np.array(row, dtype=np.float32))
    if window is not None:
        assert_identical(y, x[window])
    assert_identical(y, crop_pad_oracle(x, shape, axes))


SPEC_THETA_2D = np.array(
    [[[1.0889444, -3.2880466, 5.0], [2.0223253, 1.0960155, -3.3]],
     [[0.83578837, -0.55442286, 2.5], [0.78762794, 0.8397114, 1.1]]],
    dtype=np.float32,
)  # fmt: skip
SPEC_THETA_3D = np.array(
    [[[2.6830733, -0.7943316, 0.21829216, 5.0], [0.62225395, 3.2880466, -0.53033006, -3.3],
      [0.24721935, 1.7241772, 0.07809311, -1.1]],
     [[-0.35552558, 1.0044229, 1.3995191, 2.5], [0.17578839, 0.06028857, -0.9240381, 1.1],
      [-1.1, -0.45, 0.45, 2.2]]],
    dtype=np.float32,
)  # fmt: skip


# AffineGrid-20.txt: the first row of each example's grid (grid[0, 0] or grid[0, 0, 0]).
@pytest.mark.parametrize(
    ("theta", "size", "align_corners", "first_row"),
    [
        pytest.param(SPEC_THETA_2D, [2, 3, 5, 6], 0, [
            [6.722984, -5.8620834], [7.085965, -5.187975], [7.448947, -4.5138664],
            [7.811928, -3.8397582], [8.17491, -3.1656497], [8.537891, -2.4915411]], id="2d"),
        pytest.param(SPEC_THETA_2D, [2, 3, 5, 6], 1, [
            [7.1991024, -6.4183407], [7.63468, -5.6094103], [8.070257, -4.8004804],
            [8.505836, -3.9915502], [8.941414, -3.18262], [9.376991, -2.3736901]], id="2d_align_corners"),
        pytest.param(SPEC_THETA_3D, [2, 3, 4, 5, 6], 0, [
            [3.2358518, -6.0512347, -2.7439277], [4.13021, -5.8438168, -2.6615214],
            [5.0245676, -5.636399, -2.579115], [5.9189253, -5.428981, -2.4967084],
            [6.813283, -5.221563, -2.4143019], [7.7076406, -5.014145, -2.3318954]], id="3d"),
        pytest.param(SPEC_THETA_3D, [2, 3, 4, 5, 6], 1, [
            [2.89296603, -6.67997074, -3.14948988], [3.96619534, -6.43106842, -3.05060196],
            [5.03942490, -6.18216705, -2.95171404], [6.11265421, -5.93326569, -2.85282660],
            [7.18588352, -5.68436432, -2.75393867], [8.25911236, -5.43546295, -2.65505123]],
            id="3d_align_corners"),
    ],
)  # fmt: skip
def test_spec_affine_grid_first_rows(
    theta: np.ndarray, size: list[int], align_corners: int, first_row: list[list[float]]
) -> None:
    grid = affine_grid(theta, np.array(size, dtype=np.int64), align_corners=align_corners)
    spatial = size[2:]
    assert grid.shape == (2, *spatial, len(spatial))
    assert grid.dtype == np.float32
    row = grid[(0,) * len(spatial)]  # grid[0, 0] (2-D) or grid[0, 0, 0] (3-D): the W axis
    np.testing.assert_allclose(row, np.array(first_row, dtype=np.float32), rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------------------------------
# 3. Independent oracles, parametrised over every dtype
# --------------------------------------------------------------------------------------------------

DTYPE_IDS = [str(dtype) for dtype in ALL_DTYPES]
FLOAT_IDS = [str(dtype) for dtype in FLOAT_DTYPES]

CROP_PAD_CASES = [
    pytest.param((5, 7), [3, 4], None, id="crop-even-and-odd"),
    pytest.param((4, 3), [7, 6], None, id="pad-odd-and-odd"),
    pytest.param((4, 3), [8, 5], None, id="pad-even-and-even"),
    pytest.param((3, 6, 2), [6, 3], [0, 1], id="pad-and-crop-axes"),
    pytest.param((2, 5, 4), [1, 6], [-1, -2], id="negative-axes-out-of-order"),
    pytest.param((2, 3, 4, 5), [1, 4, 2, 8], None, id="rank4"),
    pytest.param((6,), [0], None, id="crop-to-empty"),
    pytest.param((0, 3), [3, 3], None, id="pad-from-empty"),
    pytest.param((3, 4), [3, 4], None, id="same-shape"),
    pytest.param((), [], None, id="rank0"),
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize(("in_shape", "shape", "axes"), CROP_PAD_CASES)
def test_center_crop_pad_matches_oracle(
    rng: np.random.Generator,
    dtype: np.dtype,
    in_shape: tuple[int, ...],
    shape: list[int],
    axes: list[int] | None,
) -> None:
    # asarray: conftest's make_array returns a numpy scalar (not a 0-d array) for shape ()
    x = np.asarray(make_array(rng, in_shape, dtype), dtype=dtype)
    before = x.copy()
    y = center_crop_pad(x, shape, axes=axes)
    assert_identical(y, crop_pad_oracle(x, shape, axes))
    assert_identical(x, before)  # the input is not modified


@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        pytest.param([2, 6], None, id="list"),
        pytest.param((2, 6), None, id="tuple"),
        pytest.param(np.array([2, 6], dtype=np.int32), None, id="int32-array"),
        pytest.param(np.array([2, 6], dtype=np.int64), None, id="int64-array"),
        pytest.param([np.int64(2), np.int32(6)], None, id="numpy-scalars"),
        pytest.param([6], np.array([1], dtype=np.int32), id="int32-axes"),
        pytest.param([6, 2], np.array([-1, 0], dtype=np.int64), id="int64-axes"),
        pytest.param([6, 2], (1, -2), id="tuple-axes"),
    ],
)
def test_center_crop_pad_accepts_int_sequences_and_arrays(shape: Any, axes: Any) -> None:
    x = distinct((3, 4), np.dtype("int32"))
    plain_axes = None if axes is None else [int(a) for a in axes]
    expected = crop_pad_oracle(x, [int(s) for s in shape], plain_axes)
    assert_identical(center_crop_pad(x, shape, axes=axes), expected)


S2D_CASES = [
    pytest.param((1, 2, 4, 6), 2, id="c2-b2"),
    pytest.param((2, 3, 6, 3), 3, id="c3-b3"),
    pytest.param((1, 2, 3, 6), 3, id="c2-b3"),
    pytest.param((2, 3, 2, 4), 1, id="b1"),
]
D2S_CASES = [
    pytest.param((1, 8, 2, 3), 2, id="c8-b2"),
    pytest.param((2, 18, 2, 1), 3, id="c18-b3"),
    pytest.param((1, 27, 1, 2), 3, id="c27-b3"),
    pytest.param((2, 3, 2, 4), 1, id="b1"),
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("in_shape", "b"), S2D_CASES)
def test_space_to_depth_matches_oracle(
    rng: np.random.Generator, dtype: np.dtype, mode: str, in_shape: tuple[int, ...], b: int
) -> None:
    x = make_array(rng, in_shape, dtype)
    before = x.copy()
    assert_identical(space_to_depth(x, b, mode=mode), space_to_depth_oracle(x, b, mode))
    assert_identical(x, before)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("in_shape", "b"), D2S_CASES)
def test_depth_to_space_matches_oracle(
    rng: np.random.Generator, dtype: np.dtype, mode: str, in_shape: tuple[int, ...], b: int
) -> None:
    x = make_array(rng, in_shape, dtype)
    before = x.copy()
    assert_identical(depth_to_space(x, b, mode=mode), depth_to_space_oracle(x, b, mode))
    assert_identical(x, before)


def test_dcr_and_crd_differ_when_c_is_at_least_2() -> None:
    """Guards the cases above: with C >= 2 the two modes give different results."""
    x = distinct((1, 2, 6, 6), np.dtype("int32"))
    for b in (2, 3):
        assert not np.array_equal(space_to_depth(x, b, mode="DCR"), space_to_depth(x, b, mode="CRD"))
    y = distinct((1, 18, 2, 2), np.dtype("int32"))
    assert not np.array_equal(depth_to_space(y, 3, mode="DCR"), depth_to_space(y, 3, mode="CRD"))


@pytest.mark.parametrize(
    ("op", "shape", "b"),
    [
        pytest.param("s2d", (0, 2, 4, 6), 2, id="s2d-n0"),
        pytest.param("s2d", (1, 2, 0, 6), 2, id="s2d-h0"),
        pytest.param("s2d", (1, 0, 6, 3), 3, id="s2d-c0"),
        pytest.param("d2s", (0, 8, 2, 3), 2, id="d2s-n0"),
        pytest.param("d2s", (1, 9, 2, 0), 3, id="d2s-w0"),
        pytest.param("d2s", (1, 0, 2, 2), 2, id="d2s-c0"),
    ],
)
@pytest.mark.parametrize("mode", MODES)
def test_space_depth_empty_arrays(op: str, shape: tuple[int, ...], b: int, mode: str) -> None:
    """ONNX allows zero-sized tensors; the shape rules still hold."""
    x = np.zeros(shape, dtype=np.float32)
    if op == "s2d":
        assert_identical(space_to_depth(x, b, mode=mode), space_to_depth_oracle(x, b, mode))
    else:
        assert_identical(depth_to_space(x, b, mode=mode), depth_to_space_oracle(x, b, mode))


# Views a caller can pass: the kernels must read them by index, not by memory layout.
LAYOUTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "fortran": np.asfortranarray,
    "reversed-w": lambda x: x[..., ::-1],
    "strided": lambda x: np.repeat(x, 2, axis=-1)[..., ::2],
    "transposed": lambda x: np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2),
    "readonly": lambda x: _readonly(x),
}


def _readonly(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x.flags.writeable = False
    return x


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "complex128", "bool", "<U4"])
def test_non_contiguous_inputs(layout: str, dtype: str) -> None:
    view = LAYOUTS[layout]
    dt = np.dtype(dtype)
    x4 = view(distinct((2, 3, 4, 6), dt))
    for b, mode in itertools.product([2, 1], MODES):
        assert_identical(space_to_depth(x4, b, mode=mode), space_to_depth_oracle(np.array(x4), b, mode))
    d4 = view(distinct((2, 8, 2, 4), dt))
    for mode in MODES:
        assert_identical(depth_to_space(d4, 2, mode=mode), depth_to_space_oracle(np.array(d4), 2, mode))
    x3 = view(distinct((3, 5, 6), dt))
    for target in ([2, 3, 3], [5, 8, 9], [3, 2, 8]):
        assert_identical(center_crop_pad(x3, target), crop_pad_oracle(np.array(x3), target))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=FLOAT_IDS)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize(
    "size",
    [
        pytest.param([1, 3, 2, 3], id="2d-n1"),
        pytest.param([2, 1, 4, 5], id="2d-n2"),
        pytest.param([2, 1, 1, 4], id="2d-h1"),
        pytest.param([1, 2, 3, 1], id="2d-w1"),
        pytest.param([1, 1, 2, 3, 4], id="3d-n1"),
        pytest.param([2, 1, 3, 1, 2], id="3d-h1"),
    ],
)
def test_affine_grid_matches_closed_form(
    rng: np.random.Generator, dtype: np.dtype, align_corners: bool, size: list[int]
) -> None:
    k = len(size) - 2
    theta = rng.uniform(-2, 2, size=(size[0], k, k + 1)).astype(dtype)
    grid = affine_grid(theta, size, align_corners=align_corners)
    assert_grid_close(grid, affine_grid_oracle(theta, size, align_corners), dtype, scale=2.0 * (k + 1))


@pytest.mark.parametrize(
    "size",
    [np.array([1, 1, 3, 4], dtype=np.int64), np.array([1, 1, 3, 4], dtype=np.int32), (1, 1, 3, 4), [1, 1, 3, 4]],
    ids=["int64", "int32", "tuple", "list"],
)
@pytest.mark.parametrize("align_corners", [True, False, 0, 1, np.bool_(True), np.int64(0)], ids=repr)
def test_affine_grid_accepts_size_and_flag_forms(size: Any, align_corners: Any) -> None:
    theta = np.array([[[1.0, 0.5, 0.25], [-0.5, 2.0, 0.0]]], dtype=np.float64)
    grid = affine_grid(theta, size, align_corners=align_corners)
    assert_grid_close(grid, affine_grid_oracle(theta, [1, 1, 3, 4], bool(align_corners)), np.dtype(np.float64), 4.0)


def test_affine_grid_last_axis_is_x_then_y_then_z() -> None:
    """x runs along W, y along H, z along D (GridSample's layout), shown with distinct lengths."""
    theta = np.array([[[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]]])
    grid = affine_grid(theta, [1, 1, 2, 3, 5], align_corners=True)
    np.testing.assert_array_equal(grid[0, 0, 0, :, 0], [-1.0, -0.5, 0.0, 0.5, 1.0])  # x along W (5)
    np.testing.assert_array_equal(grid[0, 0, :, 0, 1], [-1.0, 0.0, 1.0])  # y along H (3)
    np.testing.assert_array_equal(grid[0, :, 0, 0, 2], [-1.0, 1.0])  # z along D (2)


# ---- large arrays: whatever blocking, threading or fast paths the kernels use for speed -----------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "dtype", "b"),
    [
        pytest.param((1, 3, 2048, 2048), "uint8", 2, id="uint8-b2-12MiB"),
        pytest.param((3, 5, 514, 770), "uint16", 2, id="uint16-b2-odd-sizes"),
        pytest.param((2, 8, 512, 512), "float32", 4, id="float32-b4-16MiB"),
        pytest.param((1, 2, 600, 900), "float64", 3, id="float64-b3"),
        pytest.param((1, 3, 1024, 1024), "bool", 2, id="bool-b2"),
        pytest.param((1, 2, 256, 512), "complex128", 2, id="complex128-b2"),
    ],
)
def test_large_space_to_depth_round_trip(shape: tuple[int, ...], dtype: str, b: int) -> None:
    x = np.random.default_rng(7).integers(0, 255, size=shape).astype(dtype)
    for mode in MODES:
        expected = space_to_depth_by_transpose(x, b, mode)
        y = space_to_depth(x, b, mode=mode)
        assert_identical(y, expected)
        assert_identical(depth_to_space(y, b, mode=mode), x)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("in_shape", "target", "dtype"),
    [
        pytest.param((4, 1600, 1600), (4, 1100, 2100), "float32", id="float32-crop-and-pad-40MiB"),
        pytest.param((4, 1025, 1537), (4, 2049, 2047), "float32", id="float32-pad-odd"),
        pytest.param((1501, 2003, 3), (1000, 1001, 3), "uint8", id="uint8-crop-hwc"),
    ],
)
def test_large_center_crop_pad(in_shape: tuple[int, ...], target: tuple[int, ...], dtype: str) -> None:
    x = np.random.default_rng(7).integers(1, 255, size=in_shape).astype(dtype)
    assert_identical(center_crop_pad(x, target), crop_pad_by_slices(x, target))


def affine_grid_by_einsum(theta: np.ndarray, size: Sequence[int], align_corners: bool) -> np.ndarray:
    """The closed form vectorised, in float64: one coordinate vector per spatial axis."""
    coordinates = []
    for n in size[:1:-1]:  # W, H, (D): the order of the grid's last axis
        i = np.arange(n, dtype=np.float64)
        if align_corners:
            coordinates.append(2 * i / (n - 1) - 1 if n > 1 else np.zeros(1))
        else:
            coordinates.append((2 * i + 1) / n - 1)
    mesh = np.meshgrid(*reversed(coordinates), indexing="ij")  # each (D,) H, W
    points = np.stack([*reversed(mesh), np.ones_like(mesh[0])], axis=-1)  # (..., x, y, (z,) 1)
    return np.einsum("nkj,...j->n...k", theta.astype(np.float64), points)


@pytest.mark.slow
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [[2, 3, 301, 402], [2, 1, 21, 32, 43]], ids=["2d", "3d"])
@pytest.mark.parametrize("dtype", [np.dtype("float64"), np.dtype("float32")], ids=str)
def test_large_affine_grid(align_corners: bool, size: list[int], dtype: np.dtype) -> None:
    k = len(size) - 2
    theta = np.random.default_rng(7).uniform(-2, 2, size=(size[0], k, k + 1)).astype(dtype)
    grid = affine_grid(theta, size, align_corners=align_corners)
    assert_grid_close(grid, affine_grid_by_einsum(theta, size, align_corners), dtype, scale=8.0)
