"""The kernels on inputs a caller could pass that are neither small nor plain: non-native byte
order, outputs too big to exist or to allocate, array-valued fills, and dtypes outside ONNX.

Each kernel must give the right values or raise GeomError with one line; never another exception.
The fast paths only take inputs of a few MiB and more, so their thresholds are shrunk here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from geomcli import kernels
from geomcli.errors import GeomError
from tests.conftest import ALL_DTYPES, FLOAT_DTYPES, make_array

MODES = ["DCR", "CRD"]


def same_bits(found: np.ndarray, expected: np.ndarray) -> bool:
    return found.dtype == expected.dtype and found.shape == expected.shape and found.tobytes() == expected.tobytes()


def native(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("=")


def swapped(dtype: np.dtype) -> np.dtype:
    """``dtype`` in the byte order this machine does not use."""
    return dtype.newbyteorder("S")


def same_values(found: np.ndarray, expected: np.ndarray) -> bool:
    """Equal bit for bit once both are in native byte order."""
    return same_bits(found.astype(native(found.dtype)), expected.astype(native(expected.dtype)))


# The dtypes whose items have a byte order: all but bool, int8, uint8 (bfloat16 has one too).
ORDERED_DTYPES = [dtype for dtype in ALL_DTYPES if swapped(dtype) != dtype]


def all_paths(monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    """With ``fast``, thresholds so small that tiny arrays take the blocked, threaded paths."""
    if fast:
        for name in ("_BLOCK_BYTES", "_PARALLEL_BYTES", "_GRID_ROWS_ELEMENTS"):
            monkeypatch.setattr(kernels, name, 1)


# --------------------------------------------------------------------------------------------------
# 1. Byte order: values are read and written, never reinterpreted
# --------------------------------------------------------------------------------------------------


def test_ordered_dtypes_are_the_ones_with_a_byte_order() -> None:
    assert {str(d) for d in ORDERED_DTYPES} == {
        "int16", "int32", "int64", "uint16", "uint32", "uint64", "float16", "float32", "float64",
        "bfloat16", "complex64", "complex128", "<U4",
    }


@pytest.mark.parametrize("dtype", [np.dtype(">f4"), np.dtype(">f8")], ids=str)
def test_affine_grid_of_a_big_endian_theta_reported(dtype: np.dtype) -> None:
    """The QA report: x came out as 2.68e-43 instead of -0.5, 0.5."""
    grid = kernels.affine_grid(np.array([[[1, 0, 0], [0, 1, 0]]], dtype), [1, 1, 1, 2])
    assert grid.dtype == native(dtype) and grid.dtype.isnative
    assert grid[0, 0, :, 0].tolist() == [-0.5, 0.5] and grid[0, 0, :, 1].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("size", [[2, 1, 3, 5], [1, 1, 1, 2], [2, 1, 3, 4, 5]], ids=str)
@pytest.mark.parametrize("fast", [False, True], ids=["plain", "fast"])
def test_affine_grid_non_native_theta(
    dtype: np.dtype, size: list[int], fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A non-native theta gives the native theta's grid, bit for bit and in native order, on every
    path (plain, complex pairs, row blocks): the grid holds new values, not theta's bytes. ``out``
    must be of that native dtype; one of the other byte order is refused, not half-converted."""
    all_paths(monkeypatch, fast)
    spatial = len(size) - 2
    theta = np.random.default_rng(5).uniform(-2, 2, (size[0], spatial, spatial + 1)).astype(dtype)
    expected = kernels.affine_grid(theta, size, threads=2)
    big_endian = theta.astype(swapped(dtype))
    assert same_bits(kernels.affine_grid(big_endian, size, threads=2), expected)
    out = np.full(expected.shape, 7, dtype)
    assert kernels.affine_grid(big_endian, size, threads=2, out=out) is out
    assert same_bits(out, expected)
    with pytest.raises(GeomError, match=r"^affine_grid: out must have shape .* \(the byte order must match too\)$"):
        kernels.affine_grid(theta, size, out=np.zeros(expected.shape, swapped(dtype)))


def test_complex_pairs_take_native_grids_only() -> None:
    """The pairs view reinterprets bytes: the cause of the QA report's 2.68e-43."""
    assert kernels._complex_pairs(np.zeros((1, 2, 2, 2), "=f4")) is not None
    assert kernels._complex_pairs(np.zeros((1, 2, 2, 2), swapped(np.dtype("f4")))) is None


@pytest.mark.parametrize("dtype", ORDERED_DTYPES, ids=str)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("fast", [False, True], ids=["plain", "fast"])
def test_rearranging_kernels_keep_a_non_native_dtype(
    dtype: np.dtype, order: str, fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """center_crop_pad, space_to_depth and depth_to_space copy elements bit for bit: a
    non-native input (C or Fortran order) gives its own dtype back, byte order kept, with the
    values of the native run (also through ``out``, which must have that very dtype)."""
    all_paths(monkeypatch, fast)
    rng = np.random.default_rng(9)
    x = make_array(rng, (2, 3, 4, 6), dtype)
    y = make_array(rng, (2, 8, 3, 2), dtype)
    cases: list[tuple[np.ndarray, Callable[..., np.ndarray]]] = [
        (x, lambda data, **kw: kernels.center_crop_pad(data, [3, 5, 7], [1, 2, 3], **kw)),
        (x, lambda data, **kw: kernels.center_crop_pad(data, [1, 2, 2, 4], fill=data.reshape(-1)[0], **kw)),
        *((x, lambda data, mode=mode, b=b, **kw: kernels.space_to_depth(data, b, mode, **kw))
          for mode in MODES for b in (1, 2)),
        *((y, lambda data, mode=mode, **kw: kernels.depth_to_space(data, 2, mode, **kw)) for mode in MODES),
    ]
    for given, call in cases:
        expected = call(given, threads=2)
        for data in (given, given.astype(swapped(dtype))):
            data = np.asarray(data, order=order)
            found = call(data, threads=2)
            assert found.dtype == data.dtype and same_values(found, expected)
            out = np.zeros(expected.shape, data.dtype)
            assert call(data, threads=2, out=out) is out
            assert same_bits(out, found)
            with pytest.raises(GeomError, match=r": out must have shape .* \(the byte order must match too\)$"):
                call(data, out=np.zeros(expected.shape, swapped(data.dtype)))
