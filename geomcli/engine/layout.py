"""Between the layouts files come in (H×W×C images, tensors named by --layout) and the
kernels' ONNX layout, NCHW."""

from __future__ import annotations

from typing import TYPE_CHECKING

from geomcli.constants import LAYOUTS
from geomcli.errors import GeomError

if TYPE_CHECKING:  # arrays come in and go out as they are: a crop of a plain image needs no numpy
    import numpy as np

__all__ = ["LAYOUTS", "from_nchw", "from_nchw_shape", "output_layout", "resolve_layout", "spatial_axes",
           "to_nchw", "to_nchw_shape", "written_layout"]
_DEFAULT_FOR_RANK = {2: "HW", 4: "NCHW"}


def resolve_layout(shape: tuple[int, ...], given: str | None, from_file: str | None) -> str:
    """The layout of an array: the user's word first, then the file's, then the rank's default.

    The messages do not name the file: the caller's error line does, once.
    """
    layout = given or from_file or _DEFAULT_FOR_RANK.get(len(shape))
    if layout is None:
        raise GeomError(
            f"a rank-{len(shape)} tensor {shape} has no default layout; give --layout "
            f"({', '.join(name for name in LAYOUTS if len(name) == len(shape)) or 'one of ' + ', '.join(LAYOUTS)})"
        )
    if len(layout) != len(shape):
        raise GeomError(f"layout {layout} needs rank {len(layout)}, found shape {shape}")
    return layout


def to_nchw(data: np.ndarray, layout: str) -> np.ndarray:
    """A view of ``data`` as (N, C, H, W); no copy is made."""
    # Missing axes become length-1 axes, then the named ones are put in N, C, H, W order.
    expanded = data.reshape(data.shape + (1,) * (4 - data.ndim))
    present = layout + "".join(axis for axis in "NCHW" if axis not in layout)
    return expanded.transpose([present.index(axis) for axis in "NCHW"])


def from_nchw(data: np.ndarray, layout: str) -> np.ndarray:
    """A view of an (N, C, H, W) result in ``layout``; HW grows to HWC when channels appear."""
    layout = output_layout(layout, data.shape[1])
    view = data.transpose(["NCHW".index(axis) for axis in layout + "".join(a for a in "NCHW" if a not in layout)])
    return view.reshape(view.shape[: len(layout)])


def output_layout(layout: str, channels: int) -> str:
    """The layout a result in ``layout`` is written in: HW grows to HWC when it has channels.

    >>> output_layout("HW", 4), output_layout("HW", 1), output_layout("CHW", 4)
    ('HWC', 'HW', 'CHW')
    """
    return "HWC" if layout == "HW" and channels != 1 else layout


def to_nchw_shape(shape: tuple[int, ...], layout: str) -> tuple[int, int, int, int]:
    """The shape :func:`to_nchw` gives an array of ``shape`` in ``layout``.

    >>> to_nchw_shape((480, 640, 3), "HWC")
    (1, 3, 480, 640)
    """
    lengths = dict(zip(layout, shape, strict=True))
    n, c, h, w = (lengths.get(axis, 1) for axis in "NCHW")
    return n, c, h, w


def from_nchw_shape(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    """The shape :func:`from_nchw` gives an (N, C, H, W) array of ``shape`` in ``layout``.

    >>> from_nchw_shape((1, 12, 240, 320), "HWC"), from_nchw_shape((1, 4, 2, 2), "HW")
    ((240, 320, 12), (2, 2, 4))
    """
    return tuple(shape["NCHW".index(axis)] for axis in output_layout(layout, shape[1]))


def spatial_axes(layout: str) -> tuple[int, int]:
    """The positions of H and W in ``layout``."""
    return layout.index("H"), layout.index("W")


def written_layout(input_shape: tuple[int, ...], output_shape: tuple[int, ...], given: str | None,
                   from_file: str | None) -> str | None:
    """The layout an operation's result is in: the input's (--layout, else the file's, else HW for
    rank 2), an HW input grown to HWC where the result has channels (layout.output_layout); None
    when no layout of the result's rank is known (a rank-3 tensor of no named layout, say).

    >>> written_layout((8, 12), (4, 6, 4), None, None), written_layout((8, 12, 3), (4, 6, 12), None, "HWC")
    ('HWC', 'HWC')
    >>> written_layout((2, 8, 12), (2, 4, 6), None, None) is None
    True
    """
    layout = given or from_file or ("HW" if len(input_shape) == 2 else None)
    if layout == "HW" and len(output_shape) == 3:
        layout = "HWC"
    return layout if layout is not None and len(layout) == len(output_shape) else None
