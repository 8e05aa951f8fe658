# The error and odd-input tables pass wrong types on purpose.
# mypy: disable-error-code="arg-type,list-item"
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

import bisect
import functools
import inspect
import itertools
import math
import os
import subprocess
import sys
import typing
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import pytest
from conftest import ALL_DTYPES, FLOAT_DTYPES, ONNX_CASE_MODULES, OnnxCase, make_array
from conftest import onnx_cases as onnx_cases_of
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import geomcli
import geomcli.ops._numeric as numeric
import geomcli.ops.affine_grid as grid_ops
import geomcli.ops.center_crop_pad as crop_ops
import geomcli.ops.space_depth as space_depth_ops
from geomcli import cpus
from geomcli.errors import GeomError
from geomcli.ops import reference
from geomcli.ops.affine_grid import affine_grid, affine_grid_output_shape
from geomcli.ops.center_crop_pad import center_crop_pad, center_crop_pad_output_shape
from geomcli.ops.space_depth import (
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
    if expected.dtype.kind in "UO":
        np.testing.assert_array_equal(actual, expected, strict=True)
    elif np.ascontiguousarray(actual).tobytes() != np.ascontiguousarray(expected).tobytes():
        with warnings.catch_warnings():  # NaNs compare with a warning in some dtypes (bfloat16)
            warnings.simplefilter("ignore", RuntimeWarning)
            np.testing.assert_array_equal(actual, expected, strict=True)  # shows where values differ
        raise AssertionError("equal values, different bits (-0.0 for 0.0, or another NaN payload)")


def eps(dtype: np.dtype) -> float:
    """Machine epsilon, bfloat16 included."""
    return float(ml_dtypes.finfo(dtype).eps)  # type: ignore[no-untyped-call]


def distinct(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """1, 2, 3, ... in any supported dtype (narrow types wrap), so a misplaced element shows."""
    values = np.arange(1, math.prod(shape) + 1).reshape(tuple(shape))
    if dtype.kind == "U":
        return values.astype(str).astype(dtype)
    if dtype.kind == "b":
        return np.asarray(values % 3 == 1)
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
    tolerance = 1e-15 if dtype == np.float64 else 4 * eps(dtype)
    np.testing.assert_allclose(actual.astype(np.float64), expected64, rtol=tolerance, atol=tolerance * scale)


def test_the_oracles_agree_with_each_other() -> None:
    """The loop oracles and the reshape/transpose forms are two independent readings of NOTES.md."""
    x = distinct((2, 3, 6, 9), np.dtype("int32"))
    for b, mode in itertools.product([1, 3], MODES):
        assert_identical(space_to_depth_oracle(x, b, mode), reference.space_to_depth(x, b, mode))
        y = space_to_depth_oracle(x, b, mode)
        assert_identical(depth_to_space_oracle(y, b, mode), x)
        assert_identical(reference.depth_to_space(y, b, mode), x)
    z = distinct((5, 8, 3), np.dtype("int16"))
    for shape in [(3, 8, 3), (8, 5, 2), (0, 11, 3), (5, 8, 3)]:
        assert_identical(crop_pad_oracle(z, shape), reference.center_crop_pad(z, shape))
    theta = np.array([[[0.5, -1.25, 0.1], [2.0, 0.75, -0.3]]])
    for size, align_corners in itertools.product([(1, 1, 3, 5), (1, 1, 1, 4)], [False, True]):
        # float64 sums in another order: equal to the last bit or two
        np.testing.assert_allclose(reference.affine_grid(theta, size, align_corners),
                                   affine_grid_oracle(theta, size, align_corners), rtol=1e-15, atol=1e-15)


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


def onnx_cases() -> dict[str, OnnxCase]:
    """Every backend node case for our four ops."""
    return {name: case for op in OUR_OPS for name, case in onnx_cases_of(op).items()}


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


def test_onnx_cases_come_from_every_generator_of_our_ops_and_no_other() -> None:
    """conftest runs only the generator modules of ONNX_CASE_MODULES: no other module of the
    installed onnx names one of the six operators (where it would make a case we missed), and the
    others are never imported (running all of them cost 7 s of CPU per session)."""
    import onnx.backend.test.case.node as generators

    naming: dict[str, set[str]] = {op: set() for op in ONNX_CASE_MODULES}
    for source in Path(generators.__file__).parent.glob("*.py"):
        text = source.read_text(encoding="utf-8")
        for op in naming:
            if f'"{op}"' in text:
                naming[op].add(source.stem)
    assert naming == {op: {module} for op, module in ONNX_CASE_MODULES.items()}
    for op in ONNX_CASE_MODULES:
        assert onnx_cases_of(op)
    imported = {name.rsplit(".", 1)[1] for name in sys.modules if name.startswith(f"{generators.__name__}.")}
    assert imported == set(ONNX_CASE_MODULES.values())


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
        expected = reference.space_to_depth(x, b, mode)
        y = space_to_depth(x, b, mode=mode)
        assert_identical(y, expected)
        assert_identical(depth_to_space(y, b, mode=mode), x)


def random_bits(shape: tuple[int, ...], dtype: str, offset: int = 0) -> np.ndarray:
    """Every bit pattern (NaN payloads, -0.0, subnormals), C-contiguous, starting ``offset``
    bytes into its buffer (so it can be misaligned for views twice as wide)."""
    dt = np.dtype(dtype)
    raw = np.random.default_rng(11).integers(0, 256, size=math.prod(shape) * dt.itemsize + offset, dtype=np.uint8)
    return np.frombuffer(raw.tobytes(), dtype=dt, offset=offset).reshape(shape)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dtype", "offset"),
    [
        ("int8", 0), ("int8", 1), ("float16", 0), ("float16", 2), ("bfloat16", 0), ("int32", 0),
        ("float32", 0), ("float32", 4), ("uint64", 0), ("complex64", 0),
    ],
)  # fmt: skip
@pytest.mark.parametrize("mode", MODES)
def test_large_space_to_depth_keeps_every_bit(dtype: str, offset: int, mode: str) -> None:
    """Above 1 MiB the kernels copy in cache-sized pieces and, for b = 2, may move pairs of
    elements as one wider integer: every bit pattern must survive, aligned or not."""
    x = random_bits((1, 2, 1030, 1030), dtype, offset)
    y = space_to_depth(x, 2, mode=mode)
    assert_identical(y, reference.space_to_depth(x, 2, mode))
    assert_identical(depth_to_space(y, 2, mode=mode), np.ascontiguousarray(x))


def test_memory_mapped_inputs(tmp_path: Any) -> None:
    """Memory maps (as io may hand over for big .npy files) give the same results as arrays."""
    x = random_bits((1, 3, 700, 800), "uint8")
    mapped = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=x.dtype, shape=x.shape)
    mapped[...] = x
    mapped.flush()
    readonly = np.load(tmp_path / "x.npy", mmap_mode="r")
    for mode in MODES:
        assert np.array_equal(space_to_depth(readonly, 2, mode=mode), reference.space_to_depth(x, 2, mode))
    assert np.array_equal(center_crop_pad(readonly, [1, 3, 500, 900]), reference.center_crop_pad(x, [1, 3, 500, 900]))
    y = depth_to_space(readonly.reshape(1, 12, 350, 400), 2)
    assert np.array_equal(y, reference.depth_to_space(x.reshape(1, 12, 350, 400), 2, "DCR"))


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
    assert_identical(center_crop_pad(x, target), reference.center_crop_pad(x, target))


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
    grid: np.ndarray = np.einsum("nkj,...j->n...k", theta.astype(np.float64), points)
    return grid


@pytest.mark.slow
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [[2, 3, 301, 402], [2, 1, 21, 32, 43]], ids=["2d", "3d"])
@pytest.mark.parametrize("dtype", [np.dtype("float64"), np.dtype("float32")], ids=str)
def test_large_affine_grid(align_corners: bool, size: list[int], dtype: np.dtype) -> None:
    k = len(size) - 2
    theta = np.random.default_rng(7).uniform(-2, 2, size=(size[0], k, k + 1)).astype(dtype)
    grid = affine_grid(theta, size, align_corners=align_corners)
    assert_grid_close(grid, affine_grid_by_einsum(theta, size, align_corners), dtype, scale=8.0)


# --------------------------------------------------------------------------------------------------
# 4. Hypothesis properties
# --------------------------------------------------------------------------------------------------


@st.composite
def arrays_and_axes(draw: st.DrawFn) -> tuple[np.ndarray, list[int] | None, list[int]]:
    """An array of any dtype and rank 0-4 (sides 0-5), and axes: None, or a subset in any order,
    some negative. Returns (x, axes as passed, the same axes as non-negative ints)."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    x = distinct(shape, draw(st.sampled_from(ALL_DTYPES)))
    rank = len(shape)
    if draw(st.booleans()):
        return x, None, list(range(rank))
    order = draw(st.permutations(range(rank)))
    chosen = list(order[: draw(st.integers(0, rank))])
    passed = [axis - rank if draw(st.booleans()) else axis for axis in chosen]
    return x, passed, chosen


@PROPERTY
@given(arrays_and_axes())
def test_property_crop_pad_to_own_shape_is_identity(problem: tuple[np.ndarray, list[int] | None, list[int]]) -> None:
    x, axes, chosen = problem
    assert_identical(center_crop_pad(x, [x.shape[a] for a in chosen], axes=axes), x)


@PROPERTY
@given(arrays_and_axes(), st.lists(st.integers(0, 4), min_size=4, max_size=4))
def test_property_pad_then_crop_back_is_identity(
    problem: tuple[np.ndarray, list[int] | None, list[int]], extra: list[int]
) -> None:
    x, axes, chosen = problem
    padded = center_crop_pad(x, [x.shape[a] + e for a, e in zip(chosen, extra)], axes=axes)
    assert_identical(center_crop_pad(padded, [x.shape[a] for a in chosen], axes=axes), x)


@PROPERTY
@given(arrays_and_axes(), st.lists(st.integers(0, 7), min_size=4, max_size=4))
def test_property_crop_pad_matches_oracle_and_shape_rule(
    problem: tuple[np.ndarray, list[int] | None, list[int]], targets: list[int]
) -> None:
    x, axes, chosen = problem
    shape = targets[: len(chosen)]
    rule = list(x.shape)  # the spec's rule: listed axes take their target, the rest stay
    for axis, target in zip(chosen, shape):
        rule[axis] = target
    y = center_crop_pad(x, shape, axes=axes)
    assert y.shape == tuple(rule) == center_crop_pad_output_shape(x.shape, shape, axes)
    assert_identical(y, crop_pad_oracle(x, shape, axes))


@st.composite
def nchw_problems(draw: st.DrawFn) -> tuple[int, int, int, int, int, int, np.dtype]:
    """(n, c, h, w, b, _, dtype) with small sides; h and w count blocks, not pixels."""
    return (
        draw(st.integers(0, 2)),
        draw(st.integers(1, 3)),
        draw(st.integers(0, 3)),
        draw(st.integers(0, 3)),
        draw(st.integers(1, 4)),
        0,
        draw(st.sampled_from(ALL_DTYPES)),
    )


@PROPERTY
@given(nchw_problems(), st.sampled_from(MODES))
def test_property_space_depth_round_trips(problem: tuple[int, int, int, int, int, int, np.dtype], mode: str) -> None:
    n, c, h, w, b, _, dtype = problem
    x = distinct((n, c, h * b, w * b), dtype)
    y = space_to_depth(x, b, mode=mode)
    assert y.shape == (n, c * b * b, h, w) == space_to_depth_output_shape(x.shape, b)
    assert_identical(depth_to_space(y, b, mode=mode), x)
    z = distinct((n, c * b * b, h, w), dtype)
    back = depth_to_space(z, b, mode=mode)
    assert back.shape == (n, c, h * b, w * b) == depth_to_space_output_shape(z.shape, b)
    assert_identical(space_to_depth(back, b, mode=mode), z)


@PROPERTY
@given(
    st.lists(st.integers(1, 7), min_size=2, max_size=3),
    st.integers(1, 3),
    st.booleans(),
    st.sampled_from(FLOAT_DTYPES),
)
def test_property_identity_theta_gives_the_base_grid(
    spatial: list[int], n: int, align_corners: bool, dtype: np.dtype
) -> None:
    k = len(spatial)
    size = [n, 1, *spatial]
    theta = np.broadcast_to(np.eye(k, k + 1), (n, k, k + 1)).astype(dtype)
    grid = affine_grid(theta, size, align_corners=align_corners)
    assert grid.shape == (n, *spatial, k) == affine_grid_output_shape(theta.shape, size)
    assert grid.dtype == dtype
    for j in range(k):  # coordinate j (x, y, z) varies along spatial axis k-1-j only
        axis = k - 1 - j
        length = spatial[axis]
        line = np.moveaxis(grid[..., j], axis + 1, -1).reshape(-1, length)
        expected = np.array(base_coordinates(length, align_corners))
        for row in line:
            np.testing.assert_allclose(row.astype(np.float64), expected, rtol=0, atol=eps(dtype))
        if align_corners and length > 1:  # the corners are exactly -1 and +1, in every dtype
            assert np.all(line[:, 0] == -1) and np.all(line[:, -1] == 1)
        elif not align_corners:
            assert np.all(np.abs(line.astype(np.float64)) < 1)
        if length == 1:
            assert np.all(line == 0)


@PROPERTY
@given(
    st.lists(st.integers(1, 6), min_size=2, max_size=3),
    st.integers(0, 3),
    st.integers(1, 4),
    st.booleans(),
)
def test_property_affine_grid_shape_rule(spatial: list[int], n: int, channels: int, align_corners: bool) -> None:
    k = len(spatial)
    theta = np.zeros((n, k, k + 1), dtype=np.float32)
    size = np.array([n, channels, *spatial], dtype=np.int64)
    expected = (n, *spatial, k)
    assert affine_grid_output_shape(theta.shape, size) == expected
    assert affine_grid(theta, size, align_corners=align_corners).shape == expected


@pytest.mark.parametrize(
    ("function", "args", "expected"),
    [
        (center_crop_pad_output_shape, ((20, 10, 3), [10, 7, 3]), (10, 7, 3)),
        (center_crop_pad_output_shape, ((20, 8, 3), [10, 9], [-3, -2]), (10, 9, 3)),
        (center_crop_pad_output_shape, ((3, 20, 8), np.array([10, 9], dtype=np.int32), [1, 2]), (3, 10, 9)),
        (center_crop_pad_output_shape, ((), []), ()),
        (center_crop_pad_output_shape, ((5, 6), [], []), (5, 6)),
        (affine_grid_output_shape, ((8, 2, 3), [8, 3, 1024, 1024]), (8, 1024, 1024, 2)),
        (affine_grid_output_shape, ((2, 3, 4), np.array([2, 1, 128, 64, 32])), (2, 128, 64, 32, 3)),
        (space_to_depth_output_shape, ((8, 64, 512, 512), 4), (8, 1024, 128, 128)),
        (space_to_depth_output_shape, ((1, 3, 4096, 4096), 2), (1, 12, 2048, 2048)),
        (space_to_depth_output_shape, ((1, 3, 5, 7), 1), (1, 3, 5, 7)),
        (depth_to_space_output_shape, ((8, 1024, 128, 128), 4), (8, 64, 512, 512)),
        (depth_to_space_output_shape, ((2, 27, 3, 1), 3), (2, 3, 9, 3)),
    ],
)
def test_output_shape_functions(function: Callable[..., tuple[int, ...]], args: tuple[Any, ...], expected: tuple[int, ...]) -> None:
    result = function(*args)
    assert result == expected
    assert type(result) is tuple and all(type(v) is int for v in result)


@pytest.mark.parametrize(
    ("function", "args", "match"),
    [
        (center_crop_pad_output_shape, ((3, 4), [1, 2], [0]), r"^center_crop_pad: .*shape"),
        (center_crop_pad_output_shape, ((3, 4), [1, 2], [0, 0]), r"^center_crop_pad: .*(repeated|more than once)"),
        (center_crop_pad_output_shape, ((3, 4), [-1, 2]), r"^center_crop_pad: .*negative"),
        (affine_grid_output_shape, ((1, 2, 3), [2, 1, 4, 4]), r"^affine_grid: .*(batch|size\[0\])"),
        (affine_grid_output_shape, ((1, 2, 3), [1, 1, 0, 4]), r"^affine_grid: .*size"),
        (space_to_depth_output_shape, ((1, 3, 5, 4), 2), r"^space_to_depth: height 5 is not divisible by blocksize 2"),
        (space_to_depth_output_shape, ((1, 3, 4), 2), r"^space_to_depth: .*rank"),
        (depth_to_space_output_shape, ((1, 6, 2, 2), 2), r"^depth_to_space: .*divisible"),
    ],
)
def test_output_shape_functions_validate(function: Callable[..., Any], args: tuple[Any, ...], match: str) -> None:
    with pytest.raises(GeomError, match=match):
        function(*args)


# --------------------------------------------------------------------------------------------------
# 5. Decisions where we differ from the ONNX reference evaluator (onnx 1.23) or onnxruntime (1.32)
# --------------------------------------------------------------------------------------------------


def _onnx_model(op_type: str, opset: int, inputs: list[np.ndarray], output_dtype: np.dtype | None,
                attributes: dict[str, Any]) -> onnx.ModelProto:  # fmt: skip
    names = [f"input{i}" for i in range(len(inputs))]
    node = onnx.helper.make_node(op_type, names, ["output"])
    for key, value in attributes.items():
        kind = onnx.AttributeProto.INTS if isinstance(value, list) else None
        node.attribute.append(onnx.helper.make_attribute(key, value, attr_type=kind))

    def element_type(dtype: np.dtype | None) -> int:
        if dtype is None:
            return onnx.TensorProto.UNDEFINED
        if dtype.kind in "OU":
            return onnx.TensorProto.STRING
        return onnx.helper.np_dtype_to_tensor_dtype(dtype)

    graph = onnx.helper.make_graph(
        [node],
        "case",
        [onnx.helper.make_tensor_value_info(n, element_type(a.dtype), None) for n, a in zip(names, inputs)],
        [onnx.helper.make_tensor_value_info("output", element_type(output_dtype), None)],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    model.ir_version = 10  # onnxruntime 1.32 reads it, and it carries every opset used here
    return model


def reference_run(op_type: str, opset: int, inputs: list[np.ndarray], **attributes: Any) -> np.ndarray:
    """The ONNX reference evaluator on one node."""
    from onnx.reference import ReferenceEvaluator

    model = _onnx_model(op_type, opset, inputs, None, attributes)
    with warnings.catch_warnings():
        # its AffineGrid divides by zero for a size-1 axis with align_corners (and then gives -1)
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"onnx\.reference\.")
        (output,) = ReferenceEvaluator(model).run(None, {f"input{i}": a for i, a in enumerate(inputs)})
    return np.asarray(output)


def ort_run(op_type: str, opset: int, inputs: list[np.ndarray], **attributes: Any) -> np.ndarray:
    """onnxruntime's CPU provider on one node; the output has the first input's type."""
    import onnxruntime

    model = _onnx_model(op_type, opset, inputs, inputs[0].dtype, attributes)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4  # expected failures would otherwise print to stderr
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    (output,) = session.run(None, {f"input{i}": a for i, a in enumerate(inputs)})
    return np.asarray(output)


def test_decision_string_padding_is_the_empty_string() -> None:
    """Pad-18's zero for strings is "". The reference pads ONNX string tensors (object arrays, as
    onnx.numpy_helper gives them) with the integer 0; we keep the dtype and pad with ""."""
    x = np.array(["a", "bb", "c"], dtype="<U4")
    y = center_crop_pad(x, [6])
    assert_identical(y, np.array(["", "a", "bb", "c", "", ""], dtype="<U4"))
    reference = reference_run("CenterCropPad", 18, [x.astype(object), np.array([6])])
    assert list(reference[1:4]) == ["a", "bb", "c"]
    assert [type(v) for v in reference[[0, 4, 5]]] == [int, int, int]  # 0, not ""


@pytest.mark.parametrize(
    ("shape", "axes"), [([1, 2], [0]), ([2], [0, 1]), ([2], None), ([1, 2, 3], None)], ids=["2-for-1", "1-for-2", "1-for-rank-2", "3-for-rank-2"]
)
def test_decision_shape_and_axes_lengths_must_match(shape: list[int], axes: list[int] | None) -> None:
    """Shape inference rejects len(shape) != number of axes, and so do we."""
    x = distinct((3, 4), np.dtype("float32"))
    with pytest.raises(GeomError, match=r"^center_crop_pad: .*shape"):
        center_crop_pad(x, shape, axes=axes)


def test_decision_length_mismatch_others_truncate_or_broadcast() -> None:
    """The reference truncates (zip) and onnxruntime broadcasts a short shape; we raise instead."""
    x = distinct((3, 4), np.dtype("float32"))
    truncated = reference_run("CenterCropPad", 18, [x, np.array([1, 2])], axes=[0])
    assert_identical(truncated, crop_pad_oracle(x, [1], [0]))  # the 2 was dropped
    broadcast = ort_run("CenterCropPad", 18, [x, np.array([2])], axes=[0, 1])
    assert_identical(broadcast, crop_pad_oracle(x, [2, 2]))  # the 2 was used for both axes
    for shape, axes in (([1, 2], [0]), ([2], [0, 1])):
        with pytest.raises(GeomError, match=r"^center_crop_pad: .*shape"):
            center_crop_pad(x, shape, axes=axes)


@pytest.mark.parametrize("axes", [[1, -1], [0, 0], [-2, 0], [-1, 1]])
def test_decision_repeated_axes_are_errors(axes: list[int]) -> None:
    """The spec leaves repeated axes undefined. The reference lets the last one win silently,
    onnxruntime rejects them; we reject them too, including 1 and -1 on a rank-2 array."""
    x = distinct((3, 4), np.dtype("float32"))
    shape = [1, 2]
    with pytest.raises(GeomError, match=r"^center_crop_pad: .*(repeated|more than once)"):
        center_crop_pad(x, shape, axes=axes)
    last_wins = {axis % 2: target for axis, target in zip(axes, shape)}
    reference = reference_run("CenterCropPad", 18, [x, np.array(shape)], axes=axes)
    assert_identical(reference, crop_pad_oracle(x, list(last_wins.values()), list(last_wins)))
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

    with pytest.raises(InvalidArgument, match="'axes' has duplicates"):
        ort_run("CenterCropPad", 18, [x, np.array(shape)], axes=axes)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=FLOAT_IDS)
def test_decision_affine_grid_dtype_follows_theta(dtype: np.dtype) -> None:
    """The spec types grid like theta (T1). The reference always returns float32; we keep
    float16, float32, float64 and bfloat16 (so only float32 agrees with it)."""
    theta = np.array([[[1.0, 0.5, 0.25], [0.0, 1.0, -0.5]]]).astype(dtype)
    size = np.array([1, 1, 2, 3])
    assert affine_grid(theta, size).dtype == dtype
    assert reference_run("AffineGrid", 20, [theta, size]).dtype == np.float32


@pytest.mark.parametrize("size", [[1, 1, 1, 1], [1, 1, 1, 3], [1, 1, 3, 1]], ids=["1x1", "1x3", "3x1"])
def test_decision_size_one_axis_gives_zero(size: list[int]) -> None:
    """A length-1 axis has its single point at 0 for both align_corners values, as PyTorch. With
    align_corners=1 the reference gives -1 (after a division by zero), onnxruntime +1."""
    theta = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=np.float32)
    one_axes = [j for j, length in enumerate(reversed(size[2:])) if length == 1]  # 0 = x (W), 1 = y (H)
    for align_corners in (0, 1):
        grid = affine_grid(theta, size, align_corners=align_corners)
        for j in one_axes:
            assert np.all(grid[..., j] == 0)
    size64 = np.array(size, dtype=np.int64)
    reference = reference_run("AffineGrid", 20, [theta, size64], align_corners=1)
    onnxruntime = ort_run("AffineGrid", 20, [theta, size64], align_corners=1)
    for j in one_axes:
        assert np.all(reference[..., j] == -1)
        assert np.all(onnxruntime[..., j] == 1)


@pytest.mark.parametrize("size", [[1, 1, 1, 20003], [1, 1, 20003, 1]], ids=["width", "height"])
def test_decision_no_extra_point_on_long_axes(size: list[int]) -> None:
    """The reference builds coordinates with np.arange and a float step, which yields one point
    too many with align_corners=1 for axes >= 20002 (and then fails to reshape). We use the
    closed form: exactly n points, -1 and +1 exactly at the ends."""
    theta = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=np.float32)
    grid = affine_grid(theta, size, align_corners=True)
    assert grid.shape == (1, size[2], size[3], 2)
    j = 0 if size[3] > 1 else 1
    line = grid[..., j].ravel()
    assert line.size == 20003
    assert line[0] == -1 and line[-1] == 1 and line[10001] == 0
    assert np.all(np.diff(line) > 0)
    with pytest.raises(ValueError, match="reshape"):
        reference_run("AffineGrid", 20, [theta, np.array(size)], align_corners=1)


def test_decision_batch_mismatch_is_an_error() -> None:
    """The reference ignores size[0] and returns theta's batch; onnxruntime and PyTorch reject a
    mismatch, and so do we."""
    theta = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=np.float32)
    size = np.array([2, 1, 1, 2])
    with pytest.raises(GeomError, match=r"^affine_grid: .*(batch|size\[0\])"):
        affine_grid(theta, size)
    assert reference_run("AffineGrid", 20, [theta, size]).shape == (1, 1, 2, 2)
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail

    with pytest.raises(Fail, match=r"size\[0\] \(2\) must equal theta batch dimension \(1\)"):
        ort_run("AffineGrid", 20, [theta, size])


@pytest.mark.parametrize("mode", ["crd", "dcr", "Crd", "XYZ", "", " DCR"])
def test_decision_unknown_modes_are_errors(mode: str) -> None:
    """Only "DCR" and "CRD" exist. The reference's DepthToSpace treats any mode other than "DCR"
    as CRD (so "crd" silently works there); its SpaceToDepth rejects them, as we do."""
    x = distinct((1, 8, 2, 3), np.dtype("float32"))
    with pytest.raises(GeomError, match=r"^depth_to_space: mode"):
        depth_to_space(x, 2, mode=mode)
    s = distinct((1, 2, 4, 6), np.dtype("float32"))
    with pytest.raises(GeomError, match=r"^space_to_depth: mode"):
        space_to_depth(s, 2, mode=mode)
    reference = reference_run("DepthToSpace", 28, [x], blocksize=2, mode=mode)
    assert_identical(reference, depth_to_space_oracle(x, 2, "CRD"))
    with pytest.raises(ValueError, match="mode"):
        reference_run("SpaceToDepth", 28, [s], blocksize=2, mode=mode)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DTYPE_IDS)
def test_decision_rank0_with_empty_shape_is_identity(dtype: np.dtype) -> None:
    """A scalar has no axes to crop: shape [] gives it back unchanged (dtype included). The
    reference agrees; this pins the behaviour the spec leaves implicit."""
    x = np.asarray(distinct((), dtype), dtype=dtype)
    assert_identical(center_crop_pad(x, []), x)
    assert_identical(center_crop_pad(x, np.array([], dtype=np.int64)), x)
    if dtype == np.float32:
        assert_identical(reference_run("CenterCropPad", 18, [x, np.array([], dtype=np.int64)]), x)


def test_decision_empty_axes_with_empty_shape_is_identity() -> None:
    """axes=[] with shape=[] names no axis, so nothing changes. The reference agrees."""
    x = distinct((3, 4), np.dtype("float32"))
    assert_identical(center_crop_pad(x, [], axes=[]), x)
    assert_identical(center_crop_pad(x, np.array([], dtype=np.int32), axes=np.array([], dtype=np.int64)), x)
    assert_identical(reference_run("CenterCropPad", 18, [x, np.array([], dtype=np.int64)], axes=[]), x)


# --------------------------------------------------------------------------------------------------
# 6. Every error branch; odd inputs raise GeomError or work, never anything else
# --------------------------------------------------------------------------------------------------

X34 = distinct((3, 4), np.dtype("float32"))
X4D = distinct((1, 3, 5, 4), np.dtype("float32"))
THETA_2D = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=np.float32)
THETA_3D = np.array([[[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]]], dtype=np.float32)


@dataclass(frozen=True)
class ErrorCase:
    call: Callable[[], object]
    match: str
    shape_text: tuple[str, ...] = ()  # the message names one of these (the input's shape)


CCP = "^center_crop_pad: "
AG = "^affine_grid: "
S2D = "^space_to_depth: "
D2S = "^depth_to_space: "

ERROR_CASES: dict[str, ErrorCase] = {
    # CenterCropPad
    "ccp-repeated-axis": ErrorCase(lambda: center_crop_pad(X34, [1, 2], axes=[0, 0]), CCP + ".*(repeated|more than once)", ("(3, 4)",)),
    "ccp-repeated-1-and-minus-1": ErrorCase(lambda: center_crop_pad(X34, [1, 2], axes=[1, -1]), CCP + ".*(repeated|more than once)", ("(3, 4)",)),
    "ccp-axis-too-large": ErrorCase(lambda: center_crop_pad(X34, [1], axes=[2]), CCP + "axis 2 .*range", ("(3, 4)",)),
    "ccp-axis-too-negative": ErrorCase(lambda: center_crop_pad(X34, [1], axes=[-3]), CCP + "axis -3 .*range", ("(3, 4)",)),
    "ccp-axis-on-rank0": ErrorCase(lambda: center_crop_pad(np.float32(1), [1], axes=[0]), CCP + "axis 0 .*range", ("()",)),
    "ccp-shape-longer-than-axes": ErrorCase(lambda: center_crop_pad(X34, [1, 2], axes=[0]), CCP + "shape", ("(3, 4)",)),
    "ccp-shape-shorter-than-rank": ErrorCase(lambda: center_crop_pad(X34, [2]), CCP + "shape", ("(3, 4)",)),
    "ccp-shape-for-rank0": ErrorCase(lambda: center_crop_pad(np.float32(1), [1]), CCP + "shape", ("()",)),
    "ccp-negative-target": ErrorCase(lambda: center_crop_pad(X34, [2, -1]), CCP + ".*negative", ("(3, 4)",)),
    "ccp-negative-target-array": ErrorCase(lambda: center_crop_pad(X34, np.array([-5], dtype=np.int32), axes=[1]), CCP + ".*negative", ("(3, 4)",)),
    "ccp-shape-2d": ErrorCase(lambda: center_crop_pad(X34, np.array([[2, 2]])), CCP + "shape .*1-D"),
    "ccp-shape-scalar": ErrorCase(lambda: center_crop_pad(X34, 2), CCP + "shape .*1-D"),
    "ccp-shape-non-integer": ErrorCase(lambda: center_crop_pad(X34, [2.5, 3]), CCP + "shape .*integer"),
    "ccp-shape-float-array": ErrorCase(lambda: center_crop_pad(X34, np.array([2.0, 3.0])), CCP + "shape .*integer"),
    "ccp-shape-bools": ErrorCase(lambda: center_crop_pad(X34, np.array([True, True])), CCP + "shape .*integer"),
    "ccp-shape-string": ErrorCase(lambda: center_crop_pad(X34, "23"), CCP + "shape"),
    "ccp-shape-none": ErrorCase(lambda: center_crop_pad(X34, None), CCP + "shape"),
    "ccp-axes-non-integer": ErrorCase(lambda: center_crop_pad(X34, [2], axes=[0.5]), CCP + "ax.*integer"),
    "ccp-axes-2d": ErrorCase(lambda: center_crop_pad(X34, [2], axes=[[0]]), CCP + "axes .*1-D"),
    "ccp-object-data": ErrorCase(lambda: center_crop_pad(np.array([1, "a"], dtype=object), [1]), CCP + ".*dtype object"),
    # AffineGrid
    "ag-2d-theta-with-5-sizes": ErrorCase(lambda: affine_grid(THETA_2D, [1, 1, 2, 2, 2]), AG + "theta .*\\(N, 3, 4\\)", ("(1, 2, 3)",)),
    "ag-3d-theta-with-4-sizes": ErrorCase(lambda: affine_grid(THETA_3D, [1, 1, 2, 2]), AG + "theta .*\\(N, 2, 3\\)", ("(1, 3, 4)",)),
    "ag-theta-2x2": ErrorCase(lambda: affine_grid(np.zeros((1, 2, 2), np.float32), [1, 1, 2, 2]), AG + "theta", ("(1, 2, 2)",)),
    "ag-theta-rank2": ErrorCase(lambda: affine_grid(np.zeros((2, 3), np.float32), [1, 1, 2, 2]), AG + "theta", ("(2, 3)",)),
    "ag-theta-rank4": ErrorCase(lambda: affine_grid(np.zeros((1, 2, 3, 1), np.float32), [1, 1, 2, 2]), AG + "theta", ("(1, 2, 3, 1)",)),
    "ag-size-3-values": ErrorCase(lambda: affine_grid(THETA_2D, [1, 2, 2]), AG + "size .*4 values", ("[1, 2, 2]",)),
    "ag-size-6-values": ErrorCase(lambda: affine_grid(THETA_2D, [1, 1, 2, 2, 2, 2]), AG + "size .*4 values", ("[1, 1, 2, 2, 2, 2]",)),
    "ag-batch-mismatch": ErrorCase(lambda: affine_grid(THETA_2D, [2, 1, 2, 2]), AG + ".*(batch|size\\[0\\])", ("[2, 1, 2, 2]", "(1, 2, 3)")),
    "ag-height-0": ErrorCase(lambda: affine_grid(THETA_2D, [1, 1, 0, 2]), AG + ".*size.*at least 1", ("[1, 1, 0, 2]",)),
    "ag-width-negative": ErrorCase(lambda: affine_grid(THETA_2D, [1, 1, 2, -3]), AG + ".*size.*at least 1", ("[1, 1, 2, -3]",)),
    "ag-depth-0": ErrorCase(lambda: affine_grid(THETA_3D, [1, 1, 0, 2, 2]), AG + ".*size.*at least 1", ("[1, 1, 0, 2, 2]",)),
    "ag-theta-int32": ErrorCase(lambda: affine_grid(THETA_2D.astype(np.int32), [1, 1, 2, 2]), AG + "theta .*float", ("(1, 2, 3)",)),
    "ag-theta-int64-list": ErrorCase(lambda: affine_grid([[[1, 0, 0], [0, 1, 0]]], [1, 1, 2, 2]), AG + "theta .*float", ("(1, 2, 3)",)),
    "ag-theta-complex64": ErrorCase(lambda: affine_grid(THETA_2D.astype(np.complex64), [1, 1, 2, 2]), AG + "theta .*float", ("(1, 2, 3)",)),
    "ag-theta-bool": ErrorCase(lambda: affine_grid(THETA_2D.astype(bool), [1, 1, 2, 2]), AG + "theta .*float", ("(1, 2, 3)",)),
    "ag-theta-string": ErrorCase(lambda: affine_grid(THETA_2D.astype(str), [1, 1, 2, 2]), AG + "theta .*float", ("(1, 2, 3)",)),
    "ag-size-float": ErrorCase(lambda: affine_grid(THETA_2D, [1.0, 1.0, 2.0, 2.0]), AG + "size .*integer"),
    "ag-size-2d": ErrorCase(lambda: affine_grid(THETA_2D, np.array([[1, 1, 2, 2]])), AG + "size .*1-D"),
    "ag-align-corners-2": ErrorCase(lambda: affine_grid(THETA_2D, [1, 1, 2, 2], align_corners=2), AG + "align_corners"),
    "ag-align-corners-str": ErrorCase(lambda: affine_grid(THETA_2D, [1, 1, 2, 2], align_corners="yes"), AG + "align_corners"),
    # SpaceToDepth / DepthToSpace
    "s2d-height-not-divisible": ErrorCase(lambda: space_to_depth(X4D, 2), S2D + "height 5 is not divisible by blocksize 2", ("(1, 3, 5, 4)",)),
    "s2d-width-not-divisible": ErrorCase(lambda: space_to_depth(X4D, 5), S2D + "width 4 is not divisible by blocksize 5", ("(1, 3, 5, 4)",)),
    "s2d-rank3": ErrorCase(lambda: space_to_depth(X4D[0], 1), S2D + ".*rank 4.*rank 3", ("(3, 5, 4)",)),
    "s2d-rank5": ErrorCase(lambda: space_to_depth(X4D[None], 1), S2D + ".*rank 4.*rank 5", ("(1, 1, 3, 5, 4)",)),
    "s2d-rank0": ErrorCase(lambda: space_to_depth(np.float32(1), 1), S2D + ".*rank 4.*rank 0", ("()",)),
    "s2d-mode-lowercase": ErrorCase(lambda: space_to_depth(X4D, 1, mode="crd"), S2D + "mode"),
    "s2d-mode-bytes": ErrorCase(lambda: space_to_depth(X4D, 1, mode=b"DCR"), S2D + "mode"),
    "s2d-mode-none": ErrorCase(lambda: space_to_depth(X4D, 1, mode=None), S2D + "mode"),
    "s2d-blocksize-0": ErrorCase(lambda: space_to_depth(X4D, 0), S2D + "blocksize .*at least 1"),
    "s2d-blocksize-negative": ErrorCase(lambda: space_to_depth(X4D, -1), S2D + "blocksize .*at least 1"),
    "s2d-blocksize-float": ErrorCase(lambda: space_to_depth(X4D, 2.5), S2D + "blocksize .*integer"),
    "s2d-blocksize-integral-float": ErrorCase(lambda: space_to_depth(X4D, 1.0), S2D + "blocksize .*integer"),
    "s2d-blocksize-true": ErrorCase(lambda: space_to_depth(X4D, True), S2D + "blocksize .*integer"),
    "s2d-blocksize-string": ErrorCase(lambda: space_to_depth(X4D, "2"), S2D + "blocksize .*integer"),
    "s2d-blocksize-none": ErrorCase(lambda: space_to_depth(X4D, None), S2D + "blocksize .*integer"),
    "d2s-channels-not-divisible": ErrorCase(lambda: depth_to_space(np.zeros((1, 6, 2, 2), np.uint8), 2), D2S + "channels 6 .*divisible", ("(1, 6, 2, 2)",)),
    "d2s-channels-not-divisible-b3": ErrorCase(lambda: depth_to_space(np.zeros((1, 3, 2, 2), np.uint8), 3), D2S + "channels 3 .*divisible", ("(1, 3, 2, 2)",)),
    "d2s-rank3": ErrorCase(lambda: depth_to_space(np.zeros((4, 2, 2), np.uint8), 2), D2S + ".*rank 4.*rank 3", ("(4, 2, 2)",)),
    "d2s-rank5": ErrorCase(lambda: depth_to_space(np.zeros((1, 1, 4, 2, 2), np.uint8), 2), D2S + ".*rank 4.*rank 5", ("(1, 1, 4, 2, 2)",)),
    "d2s-mode-unknown": ErrorCase(lambda: depth_to_space(X4D, 1, mode="RDC"), D2S + "mode"),
    "d2s-blocksize-0": ErrorCase(lambda: depth_to_space(X4D, 0), D2S + "blocksize .*at least 1"),
    "d2s-blocksize-float": ErrorCase(lambda: depth_to_space(X4D, 2.5), D2S + "blocksize .*integer"),
    "d2s-blocksize-numpy-bool": ErrorCase(lambda: depth_to_space(X4D, np.bool_(True)), D2S + "blocksize .*integer"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_error_branches(name: str) -> None:
    case = ERROR_CASES[name]
    with pytest.raises(GeomError, match=case.match) as caught:
        case.call()
    assert "\n" not in str(caught.value), "error messages are one line"


@pytest.mark.parametrize("name", [name for name, case in ERROR_CASES.items() if case.shape_text])
def test_error_messages_name_the_input_shape(name: str) -> None:
    """The issue: a message names the function, what was expected, what was found, and the input shape."""
    case = ERROR_CASES[name]
    with pytest.raises(GeomError) as caught:
        case.call()
    assert any(text in str(caught.value) for text in case.shape_text), str(caught.value)


def test_geom_error_is_one_public_value_error() -> None:
    assert geomcli.GeomError is GeomError
    assert issubclass(GeomError, ValueError)


def test_the_package_offers_its_kernels_and_geom_error_only() -> None:
    """dir() and tab completion show what is offered, not the package's own imports (Any, errors)."""
    assert dir(geomcli) == sorted(geomcli.__all__) == [
        "GeomError", "__version__", "affine_grid", "center_crop_pad", "depth_to_space", "grid_sample", "resize",
        "space_to_depth"]
    assert all(callable(getattr(geomcli, name)) for name in geomcli.__all__ if name != "__version__")


def test_the_kernels_annotations_resolve_at_run_time() -> None:
    """Tools that read a signature's types (typing.get_type_hints: validators, CLI and config
    builders) could not read center_crop_pad's: 'unsupported operand type(s) for |: 'str' and
    'NoneType'', from an alias written as a string."""
    for name in geomcli.__all__:
        kernel = getattr(geomcli, name)
        if inspect.isfunction(kernel):
            hints = typing.get_type_hints(kernel)
            assert set(hints) == {*inspect.signature(kernel).parameters, "return"}, name


USER_SCRIPT = """
import numpy as np
import geomcli

reveal_type(geomcli.space_to_depth(np.zeros((1, 1, 2, 2)), 2))
geomcli.resize(np.zeros(3), sizes=[2], mode="bilinear")
geomcli.grid_sample(np.zeros((1, 1, 2)), np.zeros((1, 2, 1)), "bilinear", padding_mode="edge")
geomcli.no_such_kernel
"""


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for this module's checks of a user's script: numpy's stubs read once (their
    second check took 2.6 s more without it); mypy checks each cached module is unchanged."""
    return tmp_path_factory.mktemp("mypy_cache")


@pytest.mark.slow
def test_type_checkers_see_the_kernels_signatures(tmp_path: Path, mypy_cache: Path) -> None:
    """The kernels are looked up on first use, which alone made each of them Any to a type checker:
    a caller's mypy --strict saw no wrong mode, no missing name and no return type. py.typed says
    the package's annotations are to be read (pip install . without it: "missing library stubs").
    grid_sample's modes are Literal types as resize's are (they were str)."""
    root = Path(geomcli.__file__).parent
    assert (root / "py.typed").is_file()
    (tmp_path / "user.py").write_text(USER_SCRIPT)
    found = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir",
                            str(mypy_cache), "user.py"],
                           cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "MYPYPATH": str(root.parent)})
    lines = [line.split(": ", 1)[1] for line in found.stdout.splitlines()]
    assert lines == [
        'note: Revealed type is "numpy.ndarray[tuple[Any, ...], numpy.dtype[Any]]"',
        'error: Argument "mode" to "resize" has incompatible type "Literal[\'bilinear\']"; '
        'expected "Literal[\'nearest\', \'linear\', \'cubic\']"  [arg-type]',
        'error: Argument 3 to "grid_sample" has incompatible type "Literal[\'bilinear\']"; '
        'expected "Literal[\'linear\', \'nearest\', \'cubic\']"  [arg-type]',
        'error: Argument "padding_mode" to "grid_sample" has incompatible type "Literal[\'edge\']"; '
        'expected "Literal[\'zeros\', \'border\', \'reflection\']"  [arg-type]',
        'error: Module has no attribute "no_such_kernel"  [attr-defined]',
    ], found.stdout + found.stderr


NUMPY_NUMBERS_SCRIPT = """
import numpy as np
import geomcli

x = np.zeros((1, 4, 6, 6), np.float32)
half = np.float32(0.5)
print(geomcli.resize(x, scales=(np.int64(1), 1, half, half), mode="cubic", cubic_coeff_a=np.float32(-0.5),
                     exclude_outside=np.True_, antialias=1, threads=np.int64(1)).shape)
print(geomcli.resize(x, sizes=[np.int64(3), np.uint8(3)], axes=(np.int64(-2), -1)).shape)
print(geomcli.resize(x, sizes=[1, 4, 3, 3], coordinate_transformation_mode="tf_crop_and_resize",
                     roi=[np.float32(0)] * 4 + [1] * 4, extrapolation_value=np.float16(1)).shape)
print(geomcli.center_crop_pad(x, [np.int64(4)], axes=[np.int32(-1)], threads=np.int32(1)).shape)
grid = geomcli.affine_grid(np.eye(2, 3)[None], [np.int64(1), 4, 3, 3], align_corners=np.True_)
print(geomcli.grid_sample(x, grid, align_corners=np.True_, threads=np.int64(1)).shape)
print(geomcli.depth_to_space(geomcli.space_to_depth(x, np.int64(2)), np.int64(2)).shape)
geomcli.resize(x, sizes="1,4,3,3")
"""


@pytest.mark.slow
def test_type_checkers_take_the_numpy_numbers_the_kernels_take(tmp_path: Path, mypy_cache: Path) -> None:
    """py.typed promised Python numbers only: mypy --strict refused np.int64 sizes, axes and
    blocksize, np.float32 scales and cubic_coeff_a, np.True_ or 1 for antialias and align_corners,
    all of which the kernels take (a shape's arithmetic gives np.int64, a float32 array's element
    np.float32); a str where numbers go is still an error."""
    root = Path(geomcli.__file__).parent
    (tmp_path / "user.py").write_text(NUMPY_NUMBERS_SCRIPT)
    env = {**os.environ, "MYPYPATH": str(root.parent), "PYTHONPATH": str(root.parent)}
    found = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir",
                            str(mypy_cache), "user.py"], cwd=tmp_path, capture_output=True, text=True, env=env)
    lines = [line.split(": ", 1)[1] for line in found.stdout.splitlines()]
    assert lines == [
        'error: Argument "sizes" to "resize" has incompatible type "str"; '
        'expected "Sequence[int | integer[Any]] | ndarray[tuple[Any, ...], dtype[Any]] | None"  [arg-type]',
    ], found.stdout + found.stderr
    ran = subprocess.run([sys.executable, "user.py"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert ran.stdout.splitlines() == ["(1, 4, 3, 3)"] * 3 + ["(1, 4, 6, 4)", "(1, 4, 3, 3)", "(1, 4, 6, 6)"]
    assert ran.stderr.rstrip().endswith("GeomError: resize: sizes must be a 1-D list of integers, found '1,4,3,3' "
                                        "(input shape (1, 4, 6, 6))"), ran.stderr


# Inputs a caller could pass that the spec neither allows nor forbids. Each must either work or
# raise GeomError: never a TypeError, IndexError, OverflowError, ... from inside numpy.
ODD_CALLS: dict[str, Callable[[], object]] = {
    "ccp-huge-target": lambda: center_crop_pad(X34, [10**30, 2]),
    "ccp-huge-axis": lambda: center_crop_pad(X34, [2, 2], axes=[0, 10**30]),
    "ccp-target-none-inside": lambda: center_crop_pad(X34, [2, None]),
    "ccp-uint64-shape": lambda: center_crop_pad(X34, np.array([2, 2], dtype=np.uint64)),
    "ccp-uint8-shape": lambda: center_crop_pad(X34, np.array([2, 2], dtype=np.uint8)),
    "ccp-axes-string": lambda: center_crop_pad(X34, [2], axes="0"),
    "ccp-axes-int": lambda: center_crop_pad(X34, [2], axes=0),
    "ccp-axes-bool": lambda: center_crop_pad(X34, [2], axes=[True]),
    "ccp-axes-float-array": lambda: center_crop_pad(X34, [2], axes=np.array([0.0])),
    "ccp-ragged-shape": lambda: center_crop_pad(X34, [[2], [2, 2]]),
    "ccp-data-none": lambda: center_crop_pad(None, []),
    "ccp-data-str": lambda: center_crop_pad("abc", []),
    "ccp-data-list": lambda: center_crop_pad([[1, 2], [3, 4]], [1, 1]),
    "ccp-data-ragged": lambda: center_crop_pad([[1, 2], [3]], [1, 1]),
    "ccp-data-datetime": lambda: center_crop_pad(np.array(["2024-01-01"], dtype="datetime64[D]"), [3]),
    "ccp-data-structured": lambda: center_crop_pad(np.zeros(2, dtype=[("a", "i4")]), [3]),
    "ccp-data-bytes": lambda: center_crop_pad(np.array([b"ab", b"c"]), [3]),
    "ccp-data-big-endian": lambda: center_crop_pad(np.arange(4, dtype=">i4"), [6]),
    "ag-theta-none": lambda: affine_grid(None, [1, 1, 2, 2]),
    "ag-size-none": lambda: affine_grid(THETA_2D, None),
    "ag-size-string": lambda: affine_grid(THETA_2D, "1122"),
    "ag-size-huge": lambda: affine_grid(THETA_2D, [1, 1, 10**30, 2]),
    "ag-size-uint64": lambda: affine_grid(THETA_2D, np.array([1, 1, 2, 2], dtype=np.uint64)),
    "ag-size-channels-0": lambda: affine_grid(THETA_2D, [1, 0, 2, 2]),
    "ag-size-channels-negative": lambda: affine_grid(THETA_2D, [1, -1, 2, 2]),
    "ag-batch-0": lambda: affine_grid(np.zeros((0, 2, 3), np.float32), [0, 1, 2, 2]),
    "ag-theta-nan": lambda: affine_grid(np.full((1, 2, 3), np.nan, np.float32), [1, 1, 2, 2]),
    "ag-theta-object": lambda: affine_grid(THETA_2D.astype(object), [1, 1, 2, 2]),
    "ag-theta-ragged": lambda: affine_grid([[[1.0, 0.0], [0.0, 1.0, 0.0]]], [1, 1, 2, 2]),
    "ag-theta-big-endian": lambda: affine_grid(THETA_2D.astype(">f8"), [1, 1, 2, 2]),
    "ag-align-corners-none": lambda: affine_grid(THETA_2D, [1, 1, 2, 2], align_corners=None),
    "ag-align-corners-float": lambda: affine_grid(THETA_2D, [1, 1, 2, 2], align_corners=1.0),
    "s2d-blocksize-huge": lambda: space_to_depth(X4D, 10**30),
    "s2d-blocksize-numpy-int": lambda: space_to_depth(distinct((1, 2, 4, 4), np.dtype("int8")), np.int64(2)),
    "s2d-blocksize-array": lambda: space_to_depth(X4D, np.array([1])),
    "s2d-mode-int": lambda: space_to_depth(X4D, 1, mode=1),
    "s2d-mode-numpy-str": lambda: space_to_depth(X4D, 1, mode=np.str_("CRD")),
    "s2d-data-none": lambda: space_to_depth(None, 1),
    "s2d-data-list": lambda: space_to_depth([[[[1, 2], [3, 4]]]], 2),
    "s2d-data-object": lambda: space_to_depth(np.zeros((1, 1, 2, 2), dtype=object), 2),
    "s2d-data-big-endian": lambda: space_to_depth(np.arange(16, dtype=">u2").reshape(1, 1, 4, 4), 2),
    "d2s-data-datetime": lambda: depth_to_space(np.zeros((1, 4, 1, 1), dtype="datetime64[s]"), 2),
    "d2s-data-big-endian": lambda: depth_to_space(np.arange(16, dtype=">f4").reshape(1, 4, 2, 2), 2),
}


@pytest.mark.parametrize("name", list(ODD_CALLS))
def test_odd_inputs_raise_geom_error_or_work(name: str) -> None:
    try:
        result = ODD_CALLS[name]()
    except GeomError as error:
        assert "\n" not in str(error)
    else:
        assert isinstance(result, np.ndarray)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        pytest.param(lambda: center_crop_pad(np.arange(4, dtype=">i4"), [6]), np.array([0, 0, 1, 2, 3, 0]), id="ccp"),
        pytest.param(
            lambda: space_to_depth(np.arange(16, dtype=">u2").reshape(1, 1, 4, 4), 2),
            space_to_depth_oracle(np.arange(16, dtype="<u2").reshape(1, 1, 4, 4), 2, "DCR"), id="s2d",
        ),
        pytest.param(
            lambda: depth_to_space(np.arange(16, dtype=">f4").reshape(1, 4, 2, 2), 2),
            depth_to_space_oracle(np.arange(16, dtype="<f4").reshape(1, 4, 2, 2), 2, "DCR"), id="d2s",
        ),
    ],
)  # fmt: skip
def test_big_endian_inputs_are_refused_or_read_correctly(call: Callable[[], np.ndarray], expected: np.ndarray) -> None:
    """Big-endian arrays come from .npy files written elsewhere; reinterpreting bytes would scramble them."""
    try:
        result = call()
    except GeomError:
        return
    np.testing.assert_array_equal(result, expected)


def test_blocksize_accepts_numpy_integers() -> None:
    x = distinct((1, 2, 6, 6), np.dtype("int16"))
    for b in (np.int64(3), np.int32(3), np.uint8(3)):
        assert_identical(space_to_depth(x, b), space_to_depth_oracle(x, 3, "DCR"))
        assert_identical(depth_to_space(space_to_depth(x, b), b), x)


# ---- the fill extension (keyword-only, for the CLI's --fill; not part of ONNX) -------------------


@pytest.mark.parametrize(
    ("data", "fill", "expected"),
    [
        (np.array([1, 2], dtype=np.uint8), 7, np.array([7, 1, 2, 7], dtype=np.uint8)),
        (np.array([1.5], dtype=np.float32), -0.5, np.array([-0.5, 1.5, -0.5, -0.5], dtype=np.float32)),
        (np.array(["ab"], dtype="<U2"), "-", np.array(["-", "ab", "-", "-"], dtype="<U2")),
        (np.array([True]), True, np.array([True, True, True, True])),
    ],
)
def test_fill_pads_with_the_given_value(data: np.ndarray, fill: Any, expected: np.ndarray) -> None:
    assert_identical(center_crop_pad(data, [len(expected)], fill=fill), expected)
    assert_identical(center_crop_pad(expected, [len(data)], fill=fill), data)  # a crop ignores fill


@pytest.mark.parametrize(
    ("dtype", "fill"),
    [("uint8", 300), ("uint8", -1), ("int32", 0.5), ("float32", "a"), ("<U2", 1), ("int8", None)],
)
def test_fill_must_fit_the_dtype(dtype: str, fill: Any) -> None:
    if fill is None:  # None means "the dtype's zero"
        assert_identical(center_crop_pad(np.ones(1, dtype=dtype), [2], fill=None), np.array([1, 0], dtype=dtype))
        return
    with pytest.raises(GeomError, match=r"^center_crop_pad: fill"):
        center_crop_pad(np.ones(1, dtype=dtype), [3], fill=fill)


# --------------------------------------------------------------------------------------------------
# 7. onnxruntime as a second oracle; what importing the kernels costs
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("in_shape", "shape", "axes"),
    [
        ((5, 7, 3), [2, 10, 3], None),
        ((4, 9, 2), [7, 4], [0, 1]),
        ((3, 8, 6), [5, 1], [-1, -2]),
        ((2, 3, 4, 5), [3, 0, 6, 5], None),
    ],
)
def test_center_crop_pad_matches_onnxruntime(
    rng: np.random.Generator, in_shape: tuple[int, ...], shape: list[int], axes: list[int] | None
) -> None:
    """onnxruntime runs CenterCropPad only for int64 shapes (and not on every dtype): float32 here."""
    x = make_array(rng, in_shape, np.dtype("float32"))
    attributes = {} if axes is None else {"axes": axes}
    expected = ort_run("CenterCropPad", 18, [x, np.array(shape, dtype=np.int64)], **attributes)
    assert_identical(center_crop_pad(x, shape, axes=axes), expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "uint8", "int64"])
@pytest.mark.parametrize(("shape", "b"), [((2, 3, 6, 9), 3), ((1, 2, 4, 6), 2)])
def test_space_depth_match_onnxruntime(mode: str, dtype: str, shape: tuple[int, ...], b: int) -> None:
    """onnxruntime 1.32 runs SpaceToDepth-28 with its mode attribute, and DepthToSpace."""
    x = distinct(shape, np.dtype(dtype))
    y = space_to_depth(x, b, mode=mode)
    assert_identical(y, ort_run("SpaceToDepth", 28, [x], blocksize=b, mode=mode))
    assert_identical(depth_to_space(y, b, mode=mode), ort_run("DepthToSpace", 28, [y], blocksize=b, mode=mode))


@pytest.mark.parametrize("align_corners", [0, 1])
@pytest.mark.parametrize("size", [[2, 3, 5, 6], [2, 1, 3, 4, 5]], ids=["2d", "3d"])
def test_affine_grid_matches_onnxruntime(rng: np.random.Generator, align_corners: int, size: list[int]) -> None:
    k = len(size) - 2
    theta = rng.uniform(-2, 2, size=(size[0], k, k + 1)).astype(np.float32)
    expected = ort_run("AffineGrid", 20, [theta, np.array(size, dtype=np.int64)], align_corners=align_corners)
    grid = affine_grid(theta, size, align_corners=align_corners)
    assert grid.dtype == expected.dtype == np.float32
    np.testing.assert_allclose(grid, expected, rtol=1e-5, atol=1e-5)


def test_importing_kernels_loads_no_cli_or_io_libraries() -> None:
    """geomcli.ops imports numpy only: no click, rich, PIL or tifffile (nor the test oracles)."""
    heavy = ["click", "rich", "PIL", "tifffile", "onnx", "onnxruntime", "hypothesis"]
    code = (
        "import sys, geomcli.ops.center_crop_pad, geomcli.ops.affine_grid, geomcli.ops.space_depth\n"
        f"print(sorted({{name.split('.')[0] for name in sys.modules}} & set({heavy!r})))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# ---- the threads extension (keyword-only; not part of ONNX): any count gives the same bits --------


@functools.cache
def _threads_inputs() -> dict[str, np.ndarray]:
    """Inputs whose outputs are big enough (> 4 MiB) for the kernels to split; made on first use."""
    rng = np.random.default_rng(3)
    return {
        "image": rng.integers(0, 255, size=(3, 1100, 1000)).astype(np.float32),
        "nchw": rng.integers(0, 255, size=(1, 3, 2048, 2050)).astype(np.uint8),
        "depth": rng.integers(0, 255, size=(2, 12, 600, 700)).astype(np.int16),
        "theta": rng.uniform(-2, 2, size=(2, 2, 3)).astype(np.float32),
    }


def _threaded_calls() -> dict[str, tuple[Callable[..., np.ndarray], Callable[[], np.ndarray]]]:
    """The kernels that take ``threads=``: a call, and its expected result from an oracle."""
    data = _threads_inputs
    candidates: dict[str, tuple[Callable[..., np.ndarray], Callable[[], np.ndarray]]] = {
        "center_crop_pad": (
            lambda **kw: center_crop_pad(data()["image"], [3, 1201, 901], **kw),
            lambda: reference.center_crop_pad(data()["image"], [3, 1201, 901]),
        ),
        "space_to_depth": (
            lambda **kw: space_to_depth(data()["nchw"], 2, mode="CRD", **kw),
            lambda: reference.space_to_depth(data()["nchw"], 2, "CRD"),
        ),
        "depth_to_space": (
            lambda **kw: depth_to_space(data()["depth"], 2, mode="DCR", **kw),
            lambda: reference.depth_to_space(data()["depth"], 2, "DCR"),
        ),
        "affine_grid": (
            lambda **kw: affine_grid(data()["theta"], [2, 1, 700, 801], align_corners=True, **kw),
            lambda: affine_grid_by_einsum(data()["theta"], [2, 1, 700, 801], True),
        ),
    }
    kernels: dict[str, Callable[..., np.ndarray]] = {
        "center_crop_pad": center_crop_pad,
        "space_to_depth": space_to_depth,
        "depth_to_space": depth_to_space,
        "affine_grid": affine_grid,
    }
    return {name: calls for name, calls in candidates.items() if "threads" in inspect.signature(kernels[name]).parameters}


THREADED = _threaded_calls()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(THREADED))
def test_threads_give_the_same_result(name: str) -> None:
    call, expected = THREADED[name]
    single = call(threads=1)
    if name == "affine_grid":
        assert_grid_close(single, expected(), np.dtype(np.float32), scale=8.0)
    else:
        assert_identical(single, expected())
    for threads in (2, 3, 7, None):
        assert_identical(call(threads=threads), single)


@pytest.mark.parametrize("name", list(THREADED))
@pytest.mark.parametrize(
    ("threads", "match"),
    [(0, "1 to 1024"), (-2, "1 to 1024"), (1025, "1 to 1024"), (2.5, "integer"), (True, "integer"),
     ("2", "integer")],
)
def test_threads_must_be_an_integer_from_1_to_1024(name: str, threads: Any, match: str) -> None:
    call, _ = THREADED[name]
    with pytest.raises(GeomError, match=rf"^{name}: threads .*{match}"):
        call(threads=threads)


@pytest.mark.parametrize("bad", [np.array(["2020-01-01"], dtype="datetime64[D]"), np.array([1], dtype="timedelta64[s]"),
                                 np.zeros(2, dtype=[("a", "i4")]), np.array([None, 1], dtype=object)])
def test_non_tensor_dtypes_are_refused(bad: np.ndarray) -> None:
    with pytest.raises(GeomError, match=r"center_crop_pad: input must be bool, .*, found dtype .* \(input shape"):
        center_crop_pad(bad, [1])


def test_negative_channel_count_is_named_as_such() -> None:
    with pytest.raises(GeomError, match=r"affine_grid: the channel count size\[1\] must not be negative"):
        affine_grid(np.zeros((1, 2, 3), np.float32), [1, -1, 2, 2])


def test_ragged_theta_is_named_theta() -> None:
    with pytest.raises(GeomError, match=r"affine_grid: theta is not an array"):
        affine_grid([[[1.0, 0.0, 0.0], [0.0, 1.0]]], [1, 1, 2, 2])


@pytest.mark.parametrize("dtype, fill", [
    (np.float16, 1e10), (np.float32, 1e39), (np.dtype(ml_dtypes.bfloat16), 1e39), (np.complex64, 1e39 + 1j),
    (np.dtype("<U1"), "zz"), (np.dtype("S1"), "zz"), (np.uint8, 256), (np.int8, 1.5), (np.dtype(bool), 2),
    (np.float32, "1"), (np.dtype("<U2"), 0), (np.complex64, complex(math.nan, 1e39)),
    (np.complex64, complex(math.inf, 1e39)),
])
def test_fill_that_does_not_fit_is_refused(dtype: type, fill: object) -> None:
    """Not a silent Inf, a cut string or a wrapped integer."""
    data = np.zeros(2, dtype=dtype)
    with pytest.raises(GeomError, match=r"center_crop_pad: fill value .* does not fit dtype"):
        center_crop_pad(data, [4], fill=fill)


@pytest.mark.parametrize("dtype, fill", [
    (np.float16, np.inf), (np.float32, 0.1), (np.dtype(ml_dtypes.bfloat16), 2.5), (np.dtype("<U2"), "z"),
    (np.dtype("S2"), "z"), (np.uint8, 255), (np.dtype(bool), True), (np.complex64, complex(math.inf, 2.5)),
])
def test_fill_that_fits_pads_with_it(dtype: type, fill: object) -> None:
    data = np.zeros(1, dtype=dtype)
    padded = center_crop_pad(data, [3], fill=fill)
    assert padded.dtype == data.dtype and padded[0] == padded[2] == np.array(fill, dtype=dtype)


@pytest.mark.parametrize("call", [
    lambda: space_to_depth(np.zeros((1, 1, 2, 2)), 2, mode=np.array(["DCR"])),
    lambda: space_to_depth_output_shape(None, 2),  # type: ignore[arg-type]
    lambda: depth_to_space_output_shape("1,4,2,2", 2),  # type: ignore[arg-type]
])
def test_odd_mode_and_shape_arguments_raise_geom_error(call: Callable[[], object]) -> None:
    with pytest.raises(GeomError, match=r"(space_to_depth|depth_to_space): (mode must be|input shape must)"):
        call()


# --- bfloat16: rounded once -------------------------------------------------------------

@functools.cache
def _bfloat16_magnitudes() -> list[Fraction]:
    with np.errstate(invalid="ignore"):  # the NaNs among the bit patterns
        numbers = np.arange(0x8000, dtype=np.uint16).view(BFLOAT16).astype(np.float64)
    return [Fraction(float(n)) for n in numbers[np.isfinite(numbers)]] + [Fraction(2) ** 128]


def _bfloat16_nearest(value: float) -> float:
    """The oracle: ``value`` rounded once to bfloat16, to nearest, ties to even, in exact
    arithmetic over every finite bfloat16 number (2**128 standing for Inf, as IEEE rounds)."""
    if math.isnan(value) or math.isinf(value):
        return value
    candidates = _bfloat16_magnitudes()
    exact, magnitude = Fraction(value), abs(Fraction(value))
    if magnitude >= candidates[-1]:
        return math.copysign(math.inf, value)
    above = candidates[bisect.bisect_left(candidates, magnitude)]
    below = candidates[bisect.bisect_right(candidates, magnitude) - 1]
    if magnitude - below != above - magnitude:
        nearest = below if magnitude - below < above - magnitude else above
    else:  # a tie: the one whose last significand bit is 0
        nearest = below if int(np.array(float(below), BFLOAT16).view(np.uint16)) % 2 == 0 else above
    result = math.inf if nearest == 2**128 else float(nearest)
    return math.copysign(result, value) if exact != 0 or math.copysign(1, value) < 0 else result


def test_round_once_to_bfloat16_is_one_rounding(rng: np.random.Generator) -> None:
    # just past the middle of two bfloat16 numbers, where float32 first lands on the middle
    middles = [float(np.array(v, np.float32)) for v in (1.00390625, -0.6640625 - 2**-9, 3.0 + 2**-7)]
    values = [m + d for m in middles for d in (2**-40, -(2**-40), 0.0)]
    values += [3.396177428211476e38, 3.3961775e38, -3.39617742e38, 3.4e38, 1e39, 2.0**-133 * 1.5, -(2.0**-140),
               -0.0, 0.0, 9.2e-41, 1e-300, math.inf, -math.inf]
    values += list(rng.standard_normal(200) * 10.0 ** rng.integers(-40, 38, 200))
    found = numeric.round_once(np.array(values), BFLOAT16).astype(np.float64)
    expected = [_bfloat16_nearest(v) for v in values]
    assert [float(f) for f in found] == expected
    assert all(math.copysign(1, f) == math.copysign(1, e) for f, e in zip(found, expected, strict=True))
    nan = numeric.round_once(np.array([math.nan]), BFLOAT16)
    assert nan.dtype == BFLOAT16 and np.isnan(nan.astype(np.float64)).all()


def test_bfloat16_grids_are_the_float64_grid_rounded_once() -> None:
    """ml_dtypes' float64 -> bfloat16 cast goes through float32, rounding twice: the grids may not
    use it (x = 2*10944+1)/65539 - 1 lands on a tie in float32, then on the farther neighbour)."""
    identity = np.array([[[1, 0, 0], [0, 1, 0]]], BFLOAT16)
    grid = grid_ops.affine_grid(identity, [1, 1, 1, 65539])
    assert float(grid[0, 0, 10944, 0]) == _bfloat16_nearest((2 * 10944 + 1) / 65539 - 1) == -0.66796875
    huge = np.array([[[-(2.0**127), 0, 2.0**127], [0, 1, 0]]], BFLOAT16)  # finite in float64: not Inf
    assert float(grid_ops.affine_grid(huge, [1, 1, 1, 65791])[0, 0, 128, 0]) == float(ml_dtypes.finfo(BFLOAT16).max)
    for size in ([2, 1, 300, 301], [1, 1, 5, 7]):  # the row-block path and the plain one
        theta = np.array([[[0.7, -0.3, 0.1], [0.2, 1.3, -0.4]]] * size[0], BFLOAT16)
        found = grid_ops.affine_grid(theta, size, True).astype(np.float64)
        exact = grid_ops.affine_grid(theta.astype(np.float64), size, True)
        step = max(1, exact.size // 3000)
        assert [float(v) for v in found.flat[::step]] == [_bfloat16_nearest(float(v)) for v in exact.flat[::step]]


def test_a_bfloat16_fill_is_rounded_once_and_kept_in_either_byte_order() -> None:
    data = np.arange(4, dtype=np.float32).astype(BFLOAT16.newbyteorder(">"))
    padded = crop_ops.center_crop_pad(data, [6], fill=1.5)
    assert padded.dtype == data.dtype
    assert padded.astype(np.float32).tolist() == [1.5, 0, 1, 2, 3, 1.5]
    signed = crop_ops.center_crop_pad(data, [6], fill=-0.0).astype(np.float32)
    assert math.copysign(1, signed[0]) == -1 and signed[0] == 0
    near_largest = crop_ops.center_crop_pad(np.zeros(1, BFLOAT16), [2], fill=3.396177428211476e38)
    assert float(near_largest[1]) == float(ml_dtypes.finfo(BFLOAT16).max)


def test_threads_are_capped_by_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[int] = []
    share = cpus.share

    def counted(pieces: Sequence[Any], work: Callable[[Any], None], threads: int) -> None:
        started.append(threads)
        share(pieces, work, threads)

    for module in (crop_ops, grid_ops, space_depth_ops):
        monkeypatch.setattr(module, "share", counted)
    data = np.ones((300000, 8), np.float32)
    assert np.array_equal(crop_ops.center_crop_pad(data, [300000, 6], threads=1024), data[:, 1:7])
    grid = grid_ops.affine_grid(np.eye(2, 3)[None], [1, 1, 1024, 1024], threads=1024)
    assert np.array_equal(grid, grid_ops.affine_grid(np.eye(2, 3)[None], [1, 1, 1024, 1024], threads=1))
    blocks = np.ones((1, 4, 512, 512), np.float32)
    assert space_depth_ops.space_to_depth(blocks, 2, threads=1024).shape == (1, 16, 256, 256)
    assert started and max(started) <= 16  # at most one thread a MiB of output


# ---- rows= (not part of ONNX): a grid made slab by slab, as warp makes it ------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("size", [(2, 1, 37, 29), (1, 1, 3, 11, 7), (1, 1, 1100, 700)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_rows_of_a_grid_are_the_whole_grids_rows_bit_for_bit(
    rng: np.random.Generator, dtype: np.dtype, size: tuple[int, ...], align_corners: bool
) -> None:
    spatial = len(size) - 2
    theta = rng.normal(size=(size[0], spatial, spatial + 1)).astype(dtype)
    whole = affine_grid(theta, size, align_corners)
    height = size[-2]
    for rows in (slice(0, 1), slice(3, height // 2), slice(height // 2, height), slice(5, 5), slice(height - 1, None)):
        part = affine_grid(theta, size, align_corners, rows=rows)
        expected = whole[:, rows] if spatial == 2 else whole[:, :, rows]
        assert part.shape == expected.shape and part.tobytes() == expected.tobytes()


def test_rows_must_be_a_slice_of_step_one() -> None:
    with pytest.raises(GeomError, match=r"^affine_grid: rows must be a slice of step 1, found slice\(0, 4, 2\)"):
        affine_grid(np.eye(2, 3)[None], (1, 1, 4, 4), rows=slice(0, 4, 2))
