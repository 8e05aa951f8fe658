"""Layouts: every named layout goes to NCHW and back without moving an element."""

from __future__ import annotations

import re

import numpy as np
import pytest

from geomcli.engine.layout import (
    LAYOUTS,
    batch_shape,
    flattens_in_place,
    from_nchw,
    from_nchw_shape,
    in_file_terms,
    output_layout,
    resolve_layout,
    spatial_axes,
    to_nchw,
    to_nchw_shape,
    written_layout,
)
from geomcli.errors import GeomError, OptionFault


@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip_and_axis_meaning(layout: str, rng: np.random.Generator) -> None:
    sizes = {"N": 2, "C": 3, "H": 4, "W": 5}
    data = rng.integers(0, 1000, size=[sizes[axis] for axis in layout])
    nchw = to_nchw(data, layout)
    assert nchw.shape == tuple(sizes[axis] if axis in layout else 1 for axis in "NCHW")
    # The element at a named position lands at the same named position in NCHW.
    position = {"N": 1, "C": 2, "H": 3, "W": 4}
    index = tuple(position[axis] if axis in layout else 0 for axis in "NCHW")
    assert nchw[index] == data[tuple(position[axis] for axis in layout)]
    assert np.array_equal(from_nchw(nchw, layout), data)
    assert to_nchw_shape(data.shape, layout) == nchw.shape
    assert from_nchw_shape(nchw.shape, layout) == data.shape


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", [1, 4])
def test_shapes_are_those_of_the_views(layout: str, channels: int) -> None:
    nchw = np.zeros((2, channels, 3, 5))
    if "N" not in layout:
        nchw = nchw[:1]
    result = from_nchw(nchw, layout)
    assert from_nchw_shape(nchw.shape, layout) == result.shape
    assert to_nchw(result, output_layout(layout, channels)).shape == nchw.shape


def test_hw_grows_channels_when_the_result_has_them() -> None:
    nchw = np.arange(8).reshape(1, 2, 2, 2)
    assert from_nchw(nchw, "HW").shape == (2, 2, 2)
    assert np.array_equal(from_nchw(nchw, "HW")[..., 1], nchw[0, 1])


def test_resolve_layout_order_and_errors() -> None:
    assert resolve_layout((1, 3, 4, 4), None, None) == "NCHW"
    assert resolve_layout((4, 4), None, None) == "HW"
    assert resolve_layout((4, 4, 3), None, "HWC") == "HWC"
    assert resolve_layout((3, 4, 4), "CHW", "HWC") == "CHW"
    with pytest.raises(GeomError,
                       match=r"^a rank-3 tensor \(3, 4, 4\) has no default layout; give --layout \(CHW, HWC, NHW\)$"):
        resolve_layout((3, 4, 4), None, None)
    with pytest.raises(GeomError, match=r"^layout NCHW needs rank 4, found shape \(3, 4\)$"):
        resolve_layout((3, 4), "NCHW", None)



@pytest.mark.parametrize("shape", [(), (8,), (1, 3, 4, 4, 4)])
def test_a_tensor_of_a_rank_no_layout_has_is_not_sent_to_layout(shape: tuple[int, ...]) -> None:
    # it was told to give --layout (one of NCHW, ..., HW), none of which fits it
    with pytest.raises(GeomError, match=rf"^a rank-{len(shape)} tensor {re.escape(str(shape))} fits no layout: "
                                        r"--layout names 2 to 4 axes \(NCHW, NHWC, CHW, HWC, NHW, HW\)$"):
        resolve_layout(shape, None, None)


# a TIFF's own axes as layouts: (axes, shape); the stack axes are all but C (or S), Y and X
TIFF_AXES = [("TZCYX", (2, 3, 4, 5, 6)), ("TCZYX", (2, 4, 3, 5, 6)), ("ZYX", (3, 5, 6)), ("QQYXS", (2, 3, 5, 6, 4)),
             ("TZSYX", (2, 3, 4, 5, 6)), ("ZCYXS", (2, 3, 5, 6, 4))]


@pytest.mark.parametrize(("layout", "shape"), TIFF_AXES)
def test_a_tiffs_axes_flatten_into_n_and_back(layout: str, shape: tuple[int, ...], rng: np.random.Generator) -> None:
    data = rng.integers(0, 1000, size=shape)
    channel = "S" if "S" in layout else "C"
    stacks = [i for i, axis in enumerate(layout) if axis not in (channel, "Y", "X")]
    spatial = [layout.index(channel)] if channel in layout else []
    order = stacks + spatial + [layout.index("Y"), layout.index("X")]
    moved = data.transpose(order)
    expected = moved.reshape(-1, *moved.shape[len(stacks):])
    if not spatial:
        expected = expected[:, None]
    nchw = to_nchw(data, layout)
    assert nchw.shape == to_nchw_shape(shape, layout) and np.array_equal(nchw, expected)
    batch = batch_shape(shape, layout)
    assert batch == tuple(shape[i] for i in stacks)
    assert np.array_equal(from_nchw(nchw, layout, batch), data)
    assert from_nchw_shape(nchw.shape, layout, batch) == shape
    assert flattens_in_place(layout) == (layout != "TCZYX")
    assert spatial_axes(layout) == (layout.index("Y"), layout.index("X"))


def test_a_tiffs_axes_without_channels_gain_them_before_y() -> None:
    nchw = np.arange(3 * 4 * 2 * 2).reshape(3, 4, 2, 2)
    assert output_layout("ZYX", 4) == written_layout((3, 4, 4), (3, 4, 2, 2), None, "ZYX") == "ZCYX"
    assert np.array_equal(from_nchw(nchw, "ZYX"), nchw) and from_nchw_shape(nchw.shape, "ZYX") == (3, 4, 2, 2)
    assert from_nchw(nchw[:, :1], "ZYX").shape == (3, 2, 2)
    with pytest.raises(ValueError, match="^a layout of 2 stack axes needs their lengths"):
        from_nchw(nchw, "TZYX")


@pytest.mark.parametrize("shape, layout, as_nchw, said", [
    ((375, 500, 3), "HWC", False, "(input shape (375, 500, 3), layout HWC)"),
    ((2, 3, 4, 8, 8), "TZCYX", False, "(input shape (2, 3, 4, 8, 8), layout TZCYX)"),
    ((375, 500, 3), "HWC", True, "(input shape (375, 500, 3), layout HWC, as NCHW (1, 3, 375, 500))"),
])
def test_a_kernels_error_names_the_files_shape_and_layout(shape: tuple[int, ...], layout: str, as_nchw: bool,
                                                        said: str) -> None:
    kernels = to_nchw_shape(shape, layout)
    with pytest.raises(OptionFault) as caught, in_file_terms(shape, layout, as_nchw=as_nchw):
        raise OptionFault(f"space_to_depth: height 375 is not divisible by blocksize 7 (input shape {kernels})")
    assert str(caught.value) == f"space_to_depth: height 375 is not divisible by blocksize 7 {said}"


@pytest.mark.parametrize("shape, layout, message", [
    ((2, 3, 8, 8), "NCHW", "space_to_depth: height 8 ... (input shape (2, 3, 8, 8))"),  # the kernel's own
    ((2, 3, 8), None, "grid_sample: ... (data shape (2, 3, 8), grid shape (2, 4, 1))"),  # no layout: (N, C, D)
    ((8, 8, 3), "HWC", "theta holds 2 matrices (2-D: 6 numbers each) for 1 image; give one, or one per image"),
])
def test_an_error_already_in_the_files_terms_is_left_as_it_is(shape: tuple[int, ...], layout: str | None,
                                                            message: str) -> None:
    with pytest.raises(GeomError) as caught, in_file_terms(shape, layout):
        raise GeomError(message)
    assert str(caught.value) == message
