# The tables of odd inputs pass wrong types on purpose.
# mypy: disable-error-code="arg-type"
"""The kernels on inputs a caller could pass that are neither small nor plain: non-native byte
order, outputs too big to exist or to allocate, array-valued fills, and dtypes outside ONNX.

Each kernel must give the right values or raise GeomError with one line; never another exception.
The fast paths only take inputs of a few MiB and more, so their thresholds are shrunk here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

import ml_dtypes
import numpy as np
import pytest
from conftest import ALL_DTYPES, FLOAT_DTYPES, make_array

import geomcli.ops._checks as checks
import geomcli.ops.affine_grid as grid_ops
import geomcli.ops.center_crop_pad as crop_ops
import geomcli.ops.grid_sample as grid_sample_ops
import geomcli.ops.resize as resize_ops
import geomcli.ops.space_depth as space_depth_ops
from geomcli.errors import GeomError

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


# The dtypes whose items have a byte order: all but bool, int8, uint8 and StringDType (bfloat16
# has one too).
ORDERED_DTYPES = [dtype for dtype in ALL_DTYPES if dtype.kind != "T" and swapped(dtype) != dtype]


def all_paths(monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    """With ``fast``, thresholds so small that tiny arrays take the blocked, threaded paths."""
    if fast:
        monkeypatch.setattr(checks, "BLOCK_BYTES", 1)
        monkeypatch.setattr(checks, "PARALLEL_BYTES", 1)
        monkeypatch.setattr(grid_ops, "_GRID_ROWS_ELEMENTS", 1)


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
    grid = grid_ops.affine_grid(np.array([[[1, 0, 0], [0, 1, 0]]], dtype), [1, 1, 1, 2])
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
    expected = grid_ops.affine_grid(theta, size, threads=2)
    big_endian = theta.astype(swapped(dtype))
    assert same_bits(grid_ops.affine_grid(big_endian, size, threads=2), expected)
    out = np.full(expected.shape, 7, dtype)
    assert grid_ops.affine_grid(big_endian, size, threads=2, out=out) is out
    assert same_bits(out, expected)
    order = r"\(the byte order must match too; theta shape .*\)$"
    with pytest.raises(GeomError, match=r"^affine_grid: out must have shape .* " + order):
        grid_ops.affine_grid(theta, size, out=np.zeros(expected.shape, swapped(dtype)))


def test_complex_pairs_take_native_grids_only() -> None:
    """The pairs view reinterprets bytes: the cause of the QA report's 2.68e-43."""
    assert grid_ops._complex_pairs(np.zeros((1, 2, 2, 2), "=f4")) is not None
    assert grid_ops._complex_pairs(np.zeros((1, 2, 2, 2), swapped(np.dtype("f4")))) is None


@pytest.mark.parametrize("dtype", ORDERED_DTYPES, ids=str)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("fast", [False, True], ids=["plain", "fast"])
def test_rearranging_kernels_keep_a_non_native_dtype(
    dtype: np.dtype, order: Literal["C", "F"], fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """center_crop_pad, space_to_depth and depth_to_space copy elements bit for bit: a
    non-native input (C or Fortran order) gives its own dtype back, byte order kept, with the
    values of the native run (also through ``out``, which must have that very dtype)."""
    all_paths(monkeypatch, fast)
    rng = np.random.default_rng(9)
    x = make_array(rng, (2, 3, 4, 6), dtype)
    y = make_array(rng, (2, 8, 3, 2), dtype)
    cases: list[tuple[np.ndarray, Callable[..., np.ndarray]]] = [
        (x, lambda data, **kw: crop_ops.center_crop_pad(data, [3, 5, 7], [1, 2, 3], **kw)),
        (x, lambda data, **kw: crop_ops.center_crop_pad(data, [1, 2, 2, 4], fill=data.reshape(-1)[0], **kw)),
        *((x, lambda data, mode=mode, b=b, **kw: space_depth_ops.space_to_depth(data, b, mode, **kw))
          for mode in MODES for b in (1, 2)),
        *((y, lambda data, mode=mode, **kw: space_depth_ops.depth_to_space(data, 2, mode, **kw)) for mode in MODES),
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
            byte_order = r"\(the byte order must match too; input shape .*\)$"
            with pytest.raises(GeomError, match=r": out must have shape .* " + byte_order):
                call(data, out=np.zeros(expected.shape, swapped(data.dtype)))


# --------------------------------------------------------------------------------------------------
# 2. Outputs too big to exist or to allocate; shapes, fills and flags of the wrong kind
# --------------------------------------------------------------------------------------------------

X = np.zeros((1, 1, 3, 3), np.float32)
THETA = np.array([[[1, 0, 0], [0, 1, 0]]], np.float32)
# numpy addresses at most this many bytes (2**63 - 1 on 64-bit machines)
LIMIT = str(np.iinfo(np.intp).max)
NO_ARRAY = rf"; numpy addresses at most {LIMIT} \((input|theta|data) shape \([0-9, ]*\)(, grid shape \([0-9, ]*\))?\)$"

TOO_BIG: dict[str, tuple[Callable[[], object], str]] = {
    # the QA report's cases: numpy's "array is too big" and "Maximum allowed dimension exceeded"
    "ccp-2**62": (lambda: crop_ops.center_crop_pad(X, [1, 1, 3, 2**62]),
                  r"^center_crop_pad: the output shape \(1, 1, 3, 4611686018427387904\) of float32 would take "
                  r"55340232221128654848 bytes \(48\.0 EiB\)"),
    "ccp-uint64-2**63": (lambda: crop_ops.center_crop_pad(X, np.array([1, 1, 2, 2**63], np.uint64)),
                         r"^center_crop_pad: the output shape \(1, 1, 2, 9223372036854775808\) of float32"),
    "ag-2**62": (lambda: grid_ops.affine_grid(THETA, [1, 1, 3, 2**62]),
                 r"^affine_grid: the output shape \(1, 3, 4611686018427387904, 2\) of float32"),
    "ag-uint64-2**63": (lambda: grid_ops.affine_grid(THETA, np.array([1, 1, 2, 2**63], np.uint64)),
                        r"^affine_grid: the output shape \(1, 2, 9223372036854775808, 2\) of float32"),
    # was a MemoryError for the 8 TiB of x coordinates, before the 8 ZiB grid was even tried
    "ag-2**40-squared": (lambda: grid_ops.affine_grid(THETA, [1, 1, 2**40, 2**40]),
                         r"^affine_grid: the output shape \(1, 1099511627776, 1099511627776, 2\) of float32"),
    "ccp-huge-python-int": (lambda: crop_ops.center_crop_pad(X, [1, 1, 3, 10**30]),
                            r"^center_crop_pad: the output shape \(1, 1, 3, 10{30}\) of float32"),
    # empty, but numpy multiplies the lengths other than 0 and refuses it all the same
    "s2d-empty-huge-blocksize": (lambda: space_depth_ops.space_to_depth(np.zeros((1, 1, 0, 0), np.uint8), 2**40),
                                 r"^space_to_depth: the output shape \(1, 1208925819614629174706176, 0, 0\) of uint8 "
                                 r"counts as 1208925819614629174706176 bytes \(1\.0 YiB\): "
                                 r"its lengths other than 0 times the item size"),
    "d2s-empty-huge-blocksize": (lambda: space_depth_ops.depth_to_space(np.zeros((1, 0, 2, 2), np.uint8), 2**40),
                                 r"^depth_to_space: the output shape \(1, 0, 2199023255552, 2199023255552\) of uint8 "
                                 r"counts as"),
    # its shape's check counted elements, not bytes: numpy's ValueError "array is too big"
    "gs-2**61-float64": (lambda: grid_sample_ops.grid_sample(np.broadcast_to(np.float64(0), (1, 2**38, 1, 1)),
                                                             np.broadcast_to(np.float32(0), (1, 2**23, 1, 2))),
                         r"^grid_sample: the output shape \(1, 274877906944, 8388608, 1\) of float64 would take "),
    "ccp-shape-function": (lambda: crop_ops.center_crop_pad_output_shape((1, 1, 3, 3), [1, 1, 3, 2**62], dtype="f4"),
                           r"^center_crop_pad: the output shape \(1, 1, 3, 4611686018427387904\) of float32"),
    "ag-shape-function": (lambda: grid_ops.affine_grid_output_shape((1, 2, 3), [1, 1, 2**40, 2**40], dtype="f2"),
                          r"^affine_grid: the output shape \(1, 1099511627776, 1099511627776, 2\) of float16"),
}


@pytest.mark.parametrize("name", list(TOO_BIG))
def test_outputs_that_cannot_exist_are_refused(name: str) -> None:
    call, message = TOO_BIG[name]
    with pytest.raises(GeomError, match=message + ".*" + NO_ARRAY):
        call()


@pytest.mark.parametrize(
    ("call", "shape"),
    [
        (lambda: crop_ops.center_crop_pad_output_shape((3,), [2**63]),
         r"\(9223372036854775808,\) has 9223372036854775808 elements"),
        (lambda: space_depth_ops.space_to_depth_output_shape((1, 2**62, 4, 4), 2), r"\(1, 18446744073709551616, 2, 2\) has"),
        (lambda: space_depth_ops.depth_to_space_output_shape((1, 4, 2**62, 2**62), 2),
         r"\(1, 1, 9223372036854775808, 9223372036854775808\) has"),
        (lambda: grid_ops.affine_grid_output_shape((0, 2, 3), [0, 1, 2**62, 2**62]),
         r"\(0, 4611686018427387904, 4611686018427387904, 2\) counts as 42535295865117307932921825928971026432 "
         r"elements: its lengths other than 0"),
    ],
)
def test_output_shape_functions_refuse_shapes_no_array_can_have(call: Callable[[], object], shape: str) -> None:
    """Without a dtype they count elements: no array has more than numpy can address."""
    with pytest.raises(GeomError, match=rf"the output shape {shape}.*; numpy addresses at most {LIMIT} \("):
        call()


def huge_view(shape: tuple[int, ...]) -> np.ndarray:
    """One byte seen as an array of ``shape`` (np.broadcast_to stops at 2**62 elements)."""
    return np.lib.stride_tricks.as_strided(np.ones(1, np.uint8), shape=shape, strides=(0,) * len(shape))


@pytest.mark.parametrize(
    ("call", "shape"),
    [
        # 6 EiB: numpy could address it, but no machine maps it (more than any virtual address space)
        (lambda: crop_ops.center_crop_pad(X, [1, 1, 3, 2**59]),
         r"6917529027641081856 bytes \(6\.0 EiB\) for the output of shape \(1, 1, 3, 576460752303423488\) "
         r"and dtype float32 \(input shape \(1, 1, 3, 3\)\)"),
        (lambda: crop_ops.center_crop_pad(X, [1, 1, 3, 2**59], fill=1.0),
         r"6917529027641081856 bytes \(6\.0 EiB\) for the output"),
        (lambda: grid_sample_ops.grid_sample(huge_view((1, 2**24, 3, 4)),
                                             np.broadcast_to(np.float32(0), (1, 2**10, 2**10, 2))),
         r"17592186044416 bytes \(16\.0 TiB\) for the output of shape \(1, 16777216, 1024, 1024\) and dtype uint8 "
         r"\(data shape \(1, 16777216, 3, 4\), grid shape \(1, 1024, 1024, 2\)\)"),
        (lambda: grid_ops.affine_grid(THETA, [1, 1, 2**30, 2**29]),
         r"4611686018427387904 bytes \(4\.0 EiB\) for the output of shape \(1, 1073741824, 536870912, 2\) "
         r"and dtype float32 \(theta shape \(1, 2, 3\)\)"),
        # a view with strides 0 is a real input of 2**62 elements that takes no memory
        (lambda: space_depth_ops.space_to_depth(huge_view((1, 4, 2**30, 2**30)), 2),
         r"4611686018427387904 bytes \(4\.0 EiB\) for the output of shape \(1, 16, 536870912, 536870912\) "
         r"and dtype uint8 \(input shape \(1, 4, 1073741824, 1073741824\)\)"),
        (lambda: space_depth_ops.depth_to_space(huge_view((1, 4, 2**30, 2**30)), 2),
         r"4611686018427387904 bytes \(4\.0 EiB\) for the output of shape \(1, 1, 2147483648, 2147483648\)"),
    ],
)
def test_a_failed_allocation_of_the_output_is_a_geom_error(call: Callable[[], object], shape: str) -> None:
    """A MemoryError from numpy becomes a GeomError that says how much could not be allocated."""
    with pytest.raises(GeomError, match=r"^[a-z_]+: could not allocate " + shape):
        call()


def test_affine_grid_out_of_memory_for_its_work_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """The float64 coordinates can take more than a float16 grid: out of memory there is a GeomError too."""

    def no_memory(length: int, align_corners: bool) -> np.ndarray:
        raise MemoryError(f"Unable to allocate {8 * length} bytes")

    monkeypatch.setattr(grid_ops, "_base_coordinates", no_memory)
    with pytest.raises(GeomError, match=r"^affine_grid: not enough memory for the float64 work arrays of the grid "
                                        r"of shape \(1, 3, 4, 2\) and dtype float16 \(theta shape \(1, 2, 3\)\)$"):
        grid_ops.affine_grid(THETA.astype(np.float16), [1, 1, 3, 4])


@pytest.mark.parametrize(
    ("call", "shape"),
    [
        (lambda: crop_ops.center_crop_pad(np.zeros((0, 3), np.float32), [0, 2**40]), (0, 2**40)),
        (lambda: crop_ops.center_crop_pad(np.broadcast_to(np.float32(1), (2**40, 2**20)), [2, 3]), (2, 3)),
        (lambda: space_depth_ops.space_to_depth(np.zeros((1, 0, 0, 0), np.uint8), 2**40), (1, 0, 0, 0)),
        (lambda: space_depth_ops.space_to_depth(np.zeros((1, 1, 0, 0), np.uint8), 2**20), (1, 2**40, 0, 0)),
        (lambda: space_depth_ops.depth_to_space(np.zeros((1, 0, 0, 0), np.uint8), 2**40), (1, 0, 0, 0)),
        (lambda: space_depth_ops.depth_to_space(np.zeros((0, 4, 2**20, 2**20), np.uint8)[:, :, :0], 2), (0, 1, 0, 2**21)),
        (lambda: grid_ops.affine_grid(np.zeros((0, 2, 3), np.float32), [0, 1, 2**28, 2**28]), (0, 2**28, 2**28, 2)),
        (lambda: grid_ops.affine_grid(np.zeros((0, 3, 4), np.float64), [0, 1, 2**18, 2**18, 2**18]),
         (0, 2**18, 2**18, 2**18, 3)),
    ],
    ids=["ccp-empty", "ccp-broadcast", "s2d-b-2**40", "s2d-b-2**20", "d2s-b-2**40", "d2s-empty", "ag-2d", "ag-3d"],
)
def test_huge_lengths_that_numpy_can_hold_work(call: Callable[[], np.ndarray], shape: tuple[int, ...]) -> None:
    """Empty outputs with huge lengths and crops of huge broadcast views are real arrays: they are made."""
    assert call().shape == shape


@pytest.mark.parametrize(
    ("fill", "found"),
    [
        ([1, 2], "a list of 2 values"),
        ((1,), "a tuple of 1 value"),
        (np.array([1.0, 2.0]), r"an array of shape \(2,\)"),
        (np.array([[1]]), r"an array of shape \(1, 1\)"),
        ({1, 2}, "a set"),
        (np.ma.masked, "a MaskedConstant"),
    ],
)
def test_fill_must_be_a_scalar(fill: object, found: str) -> None:
    """The QA report: a list gave numpy's ValueError, an array its 'truth value ... is ambiguous'."""
    shape = r" \(input shape \(1, 1, 3, 3\)\)$"
    with pytest.raises(GeomError, match=rf"^center_crop_pad: fill must be a scalar, found {found}" + shape):
        crop_ops.center_crop_pad(X, [1, 1, 5, 5], fill=fill)


@pytest.mark.parametrize(
    "fill", [np.array(2.0), np.float32(2.0), np.array(2, np.uint8), np.int64(2), 2, 2.0, np.array([2.0])[0]]
)
def test_fill_may_be_a_0d_array_or_numpy_scalar(fill: object) -> None:
    padded = crop_ops.center_crop_pad(np.ones((1, 1), np.float32), [1, 3], fill=fill)
    assert padded.tolist() == [[2.0, 1.0, 2.0]] and padded.dtype == np.float32


@pytest.mark.parametrize(
    ("dtype", "fill"),
    [
        ("float32", np.array("1.5")),  # a string for a number, if a 0-d array
        ("float32", np.datetime64("2020-01-01")),
        ("int32", np.timedelta64(1, "s")),
        ("float64", np.array(None, dtype=object)),
        ("complex64", object()),
        ("<U2", np.array(1.5)),
        ("float32", 10**400),
    ],
    ids=["str-array-for-float", "datetime", "timedelta", "none-object", "object", "number-array-for-str", "huge-int"],
)
def test_fills_of_another_kind_are_refused(dtype: str, fill: object) -> None:
    with pytest.raises(GeomError, match=r"^center_crop_pad: fill value .* does not fit dtype"):
        crop_ops.center_crop_pad(np.zeros(1, dtype), [3], fill=fill)


@pytest.mark.parametrize(
    "align_corners", [np.array([1, 0]), np.array([]), [1], (True,), None, 1.0, np.float64(1), "1"], ids=repr
)
def test_align_corners_that_is_not_one_flag_is_refused(align_corners: object) -> None:
    """An array of flags gave numpy's 'truth value ... is ambiguous'."""
    with pytest.raises(GeomError, match=r"^affine_grid: align_corners must be a bool or 0/1, found "):
        grid_ops.affine_grid(THETA, [1, 1, 2, 2], align_corners)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: crop_ops.center_crop_pad_output_shape(None, [1]), r"^center_crop_pad: input shape must be a 1-D list"),
        (lambda: crop_ops.center_crop_pad_output_shape((2.5,), [1]),
         r"^center_crop_pad: input shape must hold integers"),
        (lambda: crop_ops.center_crop_pad_output_shape((-1, 3), [1, 1]),
         r"^center_crop_pad: input shape must not hold negative lengths, found \(-1, 3\)$"),
        (lambda: crop_ops.center_crop_pad_output_shape((3,), [1], dtype="no such type"),
         r"^center_crop_pad: dtype 'no such type' is not a numpy dtype \(input shape \(3,\)\)$"),
        (lambda: grid_ops.affine_grid_output_shape(None, [1, 1, 2, 2]), r"^affine_grid: theta shape must be a 1-D list"),
        (lambda: grid_ops.affine_grid_output_shape((-1, 2, 3), [-1, 1, 2, 2]),
         r"^affine_grid: theta shape must not hold negative lengths, found \(-1, 2, 3\)$"),
        (lambda: grid_ops.affine_grid(THETA, [-1, 1, 2, 2]), r"^affine_grid: size\[0\] = -1 does not match"),
        (lambda: space_depth_ops.space_to_depth_output_shape((1, -4, 2, 2), 2),
         r"^space_to_depth: input shape must not hold negative lengths, found \(1, -4, 2, 2\)$"),
        (lambda: space_depth_ops.depth_to_space_output_shape((1, -4, 2, 2), 2), r"^depth_to_space: input shape must not"),
        (lambda: space_depth_ops.depth_to_space_output_shape((1, True, 2, 2), 2),
         r"^depth_to_space: input shape must hold integers, found True$"),
        (lambda: crop_ops.center_crop_pad(X, [1, 1, 3], axes=[0, 1, 10**30]),
         r"^center_crop_pad: axis 10{30} is out of range \[-4, 3\] \(input shape \(1, 1, 3, 3\)\)$"),
        (lambda: crop_ops.center_crop_pad(X, [-1, 2**63], axes=[0, 1]),
         r"^center_crop_pad: target size -1 for axis 0 is negative \(input shape \(1, 1, 3, 3\)\)$"),
    ],
)
def test_shapes_of_the_wrong_kind_are_named(call: Callable[[], object], message: str) -> None:
    with pytest.raises(GeomError, match=message):
        call()


S2D = np.zeros((1, 4, 2, 2), np.uint8)
READ_ONLY = np.zeros((1, 1, 3, 3), np.float32)
READ_ONLY.flags.writeable = False


@pytest.mark.parametrize(
    ("call", "where"),
    [
        (lambda: space_depth_ops.space_to_depth(S2D, 2.0), "input shape (1, 4, 2, 2)"),
        (lambda: space_depth_ops.space_to_depth(S2D, True), "input shape (1, 4, 2, 2)"),
        (lambda: space_depth_ops.space_to_depth(S2D, 0), "input shape (1, 4, 2, 2)"),
        (lambda: space_depth_ops.space_to_depth(S2D, 2, "crd"), "input shape (1, 4, 2, 2)"),
        (lambda: space_depth_ops.depth_to_space(S2D, 2, None), "input shape (1, 4, 2, 2)"),
        (lambda: space_depth_ops.depth_to_space(S2D, 2, threads="2"), "input shape (1, 4, 2, 2)"),
        (lambda: space_depth_ops.depth_to_space(S2D, 2, out=[0]), "input shape (1, 4, 2, 2)"),
        (lambda: space_depth_ops.depth_to_space(S2D, 2, out=np.zeros((1, 1, 4, 4))), "input shape (1, 4, 2, 2)"),
        (lambda: space_depth_ops.space_to_depth(S2D, 2, out=S2D.reshape(1, 16, 1, 1)), "input shape (1, 4, 2, 2)"),
        (lambda: crop_ops.center_crop_pad(X, "11"), "input shape (1, 1, 3, 3)"),
        (lambda: crop_ops.center_crop_pad(X, [[1, 1]]), "input shape (1, 1, 3, 3)"),
        (lambda: crop_ops.center_crop_pad(X, [1.0, 1.0], axes=[2, 3]), "input shape (1, 1, 3, 3)"),
        (lambda: crop_ops.center_crop_pad(X, [1], axes=[True]), "input shape (1, 1, 3, 3)"),
        (lambda: crop_ops.center_crop_pad(X, [1], axes=np.array([0.5])), "input shape (1, 1, 3, 3)"),
        (lambda: crop_ops.center_crop_pad(X, [1, 1, 5, 5], fill="a"), "input shape (1, 1, 3, 3)"),
        (lambda: crop_ops.center_crop_pad(X, [1, 1, 5, 5], fill=1e39), "input shape (1, 1, 3, 3)"),
        (lambda: crop_ops.center_crop_pad(X, [1, 1, 5, 5], fill=1j), "input shape (1, 1, 3, 3)"),
        (lambda: crop_ops.center_crop_pad(X, [1, 1, 5, 5], fill=np.datetime64(1, "s")), "input shape (1, 1, 3, 3)"),
        (lambda: crop_ops.center_crop_pad(X, [1, 1, 3, 3], out=READ_ONLY), "input shape (1, 1, 3, 3)"),
        (lambda: crop_ops.center_crop_pad(X, [1, 1, 3, 3], threads=0), "input shape (1, 1, 3, 3)"),
        (lambda: crop_ops.center_crop_pad_output_shape((1, 2), [1, 1], dtype="no such type"), "input shape (1, 2)"),
        (lambda: grid_ops.affine_grid(THETA, [1, 1, 2, 2], align_corners=2), "theta shape (1, 2, 3)"),
        (lambda: grid_ops.affine_grid(THETA, [1, 1, 2]), "theta shape (1, 2, 3)"),
        (lambda: grid_ops.affine_grid(THETA, "1122"), "theta shape (1, 2, 3)"),
        (lambda: grid_ops.affine_grid(THETA, [1, -1, 2, 2]), "theta shape (1, 2, 3)"),
        (lambda: grid_ops.affine_grid(THETA, [1, 1, 0, 2]), "theta shape (1, 2, 3)"),
        (lambda: grid_ops.affine_grid(THETA, [2, 1, 2, 2]), "theta shape (1, 2, 3)"),
        (lambda: grid_ops.affine_grid(THETA, [1, 1, 2, 2], threads=1.0), "theta shape (1, 2, 3)"),
        (lambda: grid_ops.affine_grid(THETA, [1, 1, 2, 2], out=np.zeros((1, 2, 2, 2))), "theta shape (1, 2, 3)"),
    ],
)
def test_every_error_about_an_input_names_its_shape(call: Callable[[], object], where: str) -> None:
    """Issue 2's rule: a message names the function, what was expected, what was found, and the
    input shape (the QA report: blocksize, mode, threads, fill, out and the types of shape, axes
    and size did not say it)."""
    with pytest.raises(GeomError) as raised:
        call()
    message = str(raised.value)
    assert message.endswith(f"{where})") and "\n" not in message, message


# --------------------------------------------------------------------------------------------------
# 3. The dtype policy: ONNX's types for these operators, and bytes; nothing else
# --------------------------------------------------------------------------------------------------

TAKES = "bool, int8-int64, uint8-uint64, float16/32/64, bfloat16, complex64/128, str, bytes or StringDType"
# long double is float64 on some machines (Windows, macOS on Apple silicon): a tensor type there
LONG_DOUBLES = [np.dtype(np.longdouble), np.dtype(np.clongdouble)] if np.dtype(np.longdouble).itemsize > 8 else []
REFUSED = [
    *LONG_DOUBLES,
    np.dtype("datetime64[D]"), np.dtype("timedelta64[s]"), np.dtype(object), np.dtype([("a", "<i4")]),
    np.dtype("V4"),
    # ONNX types since opset 19/21, but not among the types these operators take
    np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2), np.dtype(ml_dtypes.int4),
]


def _kernel_calls() -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    return {
        "center_crop_pad": lambda data: crop_ops.center_crop_pad(data, [1, 1, 3, 3]),
        "space_to_depth": lambda data: space_depth_ops.space_to_depth(data, 2),
        "depth_to_space": lambda data: space_depth_ops.depth_to_space(data, 1),
    }


@pytest.mark.parametrize("dtype", REFUSED, ids=str)
@pytest.mark.parametrize("func", list(_kernel_calls()))
def test_types_these_operators_do_not_take_are_refused(dtype: np.dtype, func: str) -> None:
    """The QA report: float128 was cropped and padded as if it were an ONNX type."""
    message = rf"^{func}: input must be {TAKES}, found dtype {re.escape(str(dtype))} \(input shape \(1, 1, 2, 2\)\)$"
    with pytest.raises(GeomError, match=message):
        _kernel_calls()[func](np.zeros((1, 1, 2, 2), dtype))


@pytest.mark.parametrize("dtype", [*REFUSED, np.dtype("int32"), np.dtype("complex64"), np.dtype("<U3")], ids=str)
def test_affine_grid_takes_its_four_float_types_only(dtype: np.dtype) -> None:
    message = (r"^affine_grid: theta must be float16, float32, float64 or bfloat16, "
               rf"found dtype {re.escape(str(dtype))} \(theta shape \(1, 2, 3\)\)$")
    with pytest.raises(GeomError, match=message):
        grid_ops.affine_grid(np.zeros((1, 2, 3), dtype), [1, 1, 2, 2])


@pytest.mark.parametrize("dtype", [np.dtype("S3"), np.dtype("<U5"), np.dtype(">U5")], ids=str)
@pytest.mark.parametrize("func", list(_kernel_calls()))
def test_strings_and_bytes_are_taken(dtype: np.dtype, func: str) -> None:
    """numpy str arrays are ONNX strings; bytes arrays were taken before and stay taken (the
    fill tests pad them), as ONNX keeps its strings as bytes."""
    data = np.array([["ab", "c"], ["", "xyz"]], dtype).reshape(1, 1, 2, 2)
    found = _kernel_calls()[func](data)
    assert found.dtype == dtype
    assert sorted(filter(None, found.reshape(-1).tolist())) == sorted(filter(None, data.reshape(-1).tolist()))


# --------------------------------------------------------------------------------------------------
# 4. Messages stay one line whatever was passed
# --------------------------------------------------------------------------------------------------

MATRIX = np.arange(4).reshape(2, 2)  # its repr takes two lines


class TwoLines:
    def __repr__(self) -> str:
        return "TwoLines(\n    1,\n)"


ODD_ARGUMENTS: dict[str, Callable[[], object]] = {
    "blocksize": lambda: space_depth_ops.space_to_depth(X, MATRIX),
    "mode": lambda: space_depth_ops.depth_to_space(X, 1, MATRIX),
    "threads": lambda: crop_ops.center_crop_pad(X, [1, 1, 3, 3], threads=MATRIX),
    "align_corners": lambda: grid_ops.affine_grid(THETA, [1, 1, 2, 2], MATRIX),
    "fill": lambda: crop_ops.center_crop_pad(X, [1, 1, 5, 5], fill=TwoLines()),
    "dtype": lambda: crop_ops.center_crop_pad_output_shape((3,), [3], dtype=MATRIX),
    "long-mode": lambda: space_depth_ops.space_to_depth(X, 1, "DCR" * 1000),
    # grid_sample and affine_grid wrote these out whole: 100 kB lines for a 100,000-letter string
    "grid-sample-long-mode": lambda: grid_sample_ops.grid_sample(X, GRID, "linear" * 1000),
    "grid-sample-long-padding": lambda: grid_sample_ops.grid_sample(X, GRID, padding_mode="zeros" * 1000),
    "grid-sample-long-fill": lambda: grid_sample_ops.grid_sample(X, GRID, fill="0" * 1000),
    "grid-sample-fill-cut": lambda: grid_sample_ops.grid_sample(np.zeros((1, 1, 2, 2), "U500"), GRID,
                                                                 mode="nearest", fill="x" * 501),
    "grid-sample-align-corners": lambda: grid_sample_ops.grid_sample(X, GRID, align_corners=MATRIX),
    "grid-sample-long-shape": lambda: grid_sample_ops.grid_sample_output_shape([-1] * 1000, (1, 2, 2, 2)),
    "affine-grid-long-size": lambda: grid_ops.affine_grid(THETA, list(range(1000))),
    "affine-grid-spatial-size": lambda: grid_ops.affine_grid(THETA, [1, 1, *[0] * 1000]),
}


@pytest.mark.parametrize("name", list(ODD_ARGUMENTS))
def test_messages_name_odd_arguments_on_one_short_line(name: str) -> None:
    with pytest.raises(GeomError) as caught:
        ODD_ARGUMENTS[name]()
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 300, str(caught.value)


GIANT = 10**5000  # more digits than Python writes out (4300): str() of it is a ValueError
WHERE = r" \(input shape \(1, 1, 3, 3\)\)$"


@pytest.mark.parametrize(("call", "message"), [
    # ints past a float64 escaped as OverflowError (no ValueError): 'int too large to convert to float'
    (lambda: resize_ops.resize(X, scales=[1, 1, 1, 10**400]),
     r"^resize: scales must be > 0 and finite in float32, found 10{76}\.\.\. at index 3" + WHERE),
    (lambda: resize_ops.resize(X, sizes=[1, 1, 2, 2], mode="cubic", cubic_coeff_a=-(10**400)),
     r"^resize: cubic_coeff_a must be finite in float32, found -10{75}\.\.\." + WHERE),
    (lambda: crop_ops.center_crop_pad(X, [1, 1, 3, 10**400]),
     r"^center_crop_pad: the output shape \(1, 1, 3, 10{400}\) of float32 would take 2\*\*1332 bytes or more; "
     r"numpy addresses at most \d+" + WHERE),
    # ints past 4300 digits: the messages that wrote them out raised ValueError, not GeomError
    (lambda: crop_ops.center_crop_pad(X, [1, 1, 3, GIANT]),
     r"^center_crop_pad: shape is too big at index 3: an integer of 16610 bits" + WHERE),
    (lambda: crop_ops.center_crop_pad(X, [3], axes=[-GIANT]),
     r"^center_crop_pad: axes is too big at index 0: an integer of 16610 bits" + WHERE),
    (lambda: crop_ops.center_crop_pad(X, [1, 1, 5, 5], fill=GIANT),
     r"^center_crop_pad: fill value an integer of 16610 bits does not fit dtype float32 "
     r"\(int too large to convert to float; input shape \(1, 1, 3, 3\)\)$"),
    (lambda: resize_ops.resize(X, sizes=[1, 1, 2, GIANT]),
     r"^resize: sizes is too big at index 3: an integer of 16610 bits" + WHERE),
    (lambda: resize_ops.resize(X, sizes=[2], axes=[GIANT]),
     r"^resize: axes is too big at index 0: an integer of 16610 bits" + WHERE),
    (lambda: space_depth_ops.space_to_depth(X, GIANT),
     r"^space_to_depth: blocksize is too big: an integer of 16610 bits" + WHERE),
    (lambda: space_depth_ops.depth_to_space(X, 1, threads=GIANT),
     r"^depth_to_space: threads is too big: an integer of 16610 bits" + WHERE),
    (lambda: grid_ops.affine_grid(THETA, [1, 1, GIANT, 2]),
     r"^affine_grid: size is too big at index 2: an integer of 16610 bits \(theta shape \(1, 2, 3\)\)$"),
    (lambda: grid_sample_ops.grid_sample(X, GRID, fill=GIANT),
     r"^grid_sample: fill an integer of 16610 bits does not fit data's dtype float32"),
])
def test_integers_too_big_for_a_float_or_for_print_are_geom_errors(call: Callable[[], object], message: str) -> None:
    with pytest.raises(GeomError, match=message):
        call()


@pytest.mark.parametrize(("shape", "axes", "message"), [
    ([4], None, "shape has 1 value but the input's rank is 2"),
    ([4, 4, 4], None, "shape has 3 values but the input's rank is 2"),
    ([4, 4], [0], "shape has 2 values but the number of axes is 1"),
])
def test_crop_pad_shape_of_another_length_names_both_counts(shape: list[int], axes: list[int] | None,
                                                           message: str) -> None:
    with pytest.raises(GeomError, match=rf"^center_crop_pad: {message} \(input shape \(3, 5\)\)$"):
        crop_ops.center_crop_pad(np.zeros((3, 5)), shape, axes)


# --------------------------------------------------------------------------------------------------
# Array-likes that are not numpy arrays (a torch tensor, say)
# --------------------------------------------------------------------------------------------------


class ArrayLike:
    """An object numpy reads through ``__array__`` alone, as it reads a torch tensor."""

    def __init__(self, values: object) -> None:
        self.values = values

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        return np.asarray(self.values, dtype)  # type: ignore[call-overload]


class RequiresGrad:
    """Stands for a torch tensor that requires grad, whose ``__array__`` raises RuntimeError."""

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")


GRID = np.zeros((1, 2, 2, 2), np.float32)


@pytest.mark.parametrize(("call", "where"), [
    (lambda: crop_ops.center_crop_pad(RequiresGrad(), [1]), "center_crop_pad: input"),
    (lambda: space_depth_ops.space_to_depth(RequiresGrad(), 1), "space_to_depth: input"),
    (lambda: space_depth_ops.depth_to_space(RequiresGrad(), 1), "depth_to_space: input"),
    (lambda: grid_ops.affine_grid(RequiresGrad(), [1, 1, 2, 2]), "affine_grid: theta"),
    (lambda: grid_sample_ops.grid_sample(RequiresGrad(), GRID), "grid_sample: data"),
    (lambda: grid_sample_ops.grid_sample(X, RequiresGrad()), "grid_sample: grid"),
    (lambda: resize_ops.resize(RequiresGrad(), sizes=[1]), "resize: data"),
    (lambda: resize_ops.resize(X, sizes=RequiresGrad()), "resize: sizes"),
    (lambda: resize_ops.resize(X, scales=RequiresGrad()), "resize: scales"),
    (lambda: resize_ops.resize(X, sizes=[2], axes=RequiresGrad()), "resize: axes"),
    (lambda: resize_ops.resize(X, sizes=[2], axes=[3], roi=RequiresGrad(),
                               coordinate_transformation_mode="tf_crop_and_resize"), "resize: roi"),
])
def test_an_array_like_numpy_cannot_read_is_a_geom_error(call: Callable[[], object], where: str) -> None:
    """Its RuntimeError escaped as it was, naming no argument."""
    with pytest.raises(GeomError, match=rf"^{where} is not an array \(Can't call numpy\(\) on Tensor that requires "
                                        r"grad\. Use tensor\.detach\(\)\.numpy\(\) instead\.\)$"):
        call()


def test_resize_takes_array_likes_for_its_lists_as_the_other_kernels_do() -> None:
    """sizes=torch.tensor([3, 5]) was 'sizes must be a 1-D list of integers, found tensor([3, 5])',
    where center_crop_pad's shape and affine_grid's size take it."""
    data = np.arange(20.0).reshape(4, 5)
    for listed, attributes in [
        ({"sizes": [3, 7], "axes": [1, 0]}, {"mode": "linear"}),
        ({"scales": [0.7, 1.5]}, {"mode": "cubic"}),
        ({"scales": [], "sizes": [2, 3]}, {}),  # an empty one beside the other is absent
        ({"sizes": [2, 3], "roi": []}, {}),  # an empty roi too
        ({"sizes": [3, 7], "roi": [0.1, 0.2, 0.9, 1.0]}, {"coordinate_transformation_mode": "tf_crop_and_resize"}),
    ]:
        expected = resize_ops.resize(data, **listed, **attributes)  # type: ignore[arg-type]
        got = resize_ops.resize(data, **{name: ArrayLike(values) for name, values in listed.items()},
                                **attributes)  # type: ignore[arg-type]
        assert same_bits(got, expected), listed
    assert crop_ops.center_crop_pad(data, ArrayLike([2, 2])).shape == (2, 2)
    assert grid_ops.affine_grid(THETA, ArrayLike([1, 1, 2, 3])).shape == (1, 2, 3, 2)
