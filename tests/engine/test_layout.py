"""Layouts: every named layout goes to NCHW and back without moving an element."""

from __future__ import annotations

import numpy as np
import pytest

from geomcli.engine.layout import (
    LAYOUTS,
    from_nchw,
    from_nchw_shape,
    output_layout,
    resolve_layout,
    to_nchw,
    to_nchw_shape,
)
from geomcli.errors import GeomError


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
