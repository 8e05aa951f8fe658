"""Between the layouts files come in (H×W×C images, tensors named by --layout, a TIFF's own axes
such as ImageJ's TZCYX) and the kernels' ONNX layout, NCHW.

A layout names each axis of an array. geomcli's own (``LAYOUTS``) use the letters N, C, H, W; a
TIFF hyperstack's layout is its axes string (``TZCYX``, ``TCZYX``, ``ZYX``...), whose Y and X are H
and W, C (or S, its samples, where it has them) the channels, and every other axis a stack axis:
those are flattened, in order, into N and restored after the kernel (their lengths: ``batch``).

A volume warp (``volume=True``) reads a z-stack as one volume, NCDHW: Z is D, not a stack axis.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from geomcli.constants import LAYOUTS
from geomcli.errors import GeomError, OptionFault

if TYPE_CHECKING:
    import numpy as np

    from geomcli.engine.options import Common

__all__ = ["LAYOUTS", "batch_shape", "flattens_in_place", "from_nchw", "from_nchw_shape", "given_layout",
           "ignored_layout", "in_file_terms", "ome_layout", "output_layout", "own_axes", "resolve_layout",
           "result_layout", "roles", "spatial_axes", "tensor_layout", "to_nchw", "to_nchw_shape", "with_z",
           "written_layout", "z_named"]
_DEFAULT_FOR_RANK = {2: "HW", 4: "NCHW"}


def resolve_layout(shape: tuple[int, ...], given: str | None, from_file: str | None) -> str:
    """The layout of an array: the user's word first, then the file's, then the rank's default.

    The messages do not name the file: the caller's error line does, once.
    """
    layout = given or from_file or _DEFAULT_FOR_RANK.get(len(shape))
    fitting = [name for name in LAYOUTS if len(name) == len(shape)]
    if layout is None and not fitting:  # (naming --layout's choices would send the user to a dead end)
        raise GeomError(f"a rank-{len(shape)} tensor {shape} fits no layout: --layout names 2 to 4 axes "
                        f"({', '.join(LAYOUTS)})")
    if layout is None:
        raise GeomError(f"a rank-{len(shape)} tensor {shape} has no default layout; give --layout "
                        f"({', '.join(fitting)})")
    if len(layout) != len(shape):
        raise GeomError(f"layout {layout} needs rank {len(layout)}, found shape {shape}")
    return layout


def given_layout(given: str | None, file_format: str) -> str | None:
    """The --layout a file of ``file_format`` is read in: --layout names a tensor's axes; an image
    (PNG, JPEG, BMP, GIF, WebP) is H×W×C or H×W and keeps them, so one --layout serves a folder of
    tensors and images (a try-out's grey PNG beside HWC .npy files was refused)."""
    from geomcli import io

    return None if file_format in io.IMAGE_FORMATS else given


def own_axes(common: Common, file_format: str) -> Common:
    """The options a file of ``file_format`` is read with: :func:`given_layout`'s --layout."""
    import dataclasses

    layout = given_layout(common.layout, file_format)
    return common if layout == common.layout else dataclasses.replace(common, layout=layout)


def ignored_layout(common: Common, file_format: str, file_layout: str | None) -> str | None:
    """The warning for a --layout that an image does not take and that differs from its own."""
    if own_axes(common, file_format) is common or common.layout == file_layout:
        return None
    return f"--layout {common.layout} is for tensors: this {file_format.upper()} image is read as {file_layout}"


def roles(layout: str, volume: bool = False) -> str:
    """What each axis of ``layout`` is to the kernels: N (a stack axis), C, H or W; with
    ``volume``, a z-stack's Z is D, the volume's depth.

    >>> roles("NHWC"), roles("TZCYX"), roles("ZYXS"), roles("TCZYX"), roles("TZCYX", volume=True)
    ('NHWC', 'NNCHW', 'NHWC', 'NCNHW', 'NDCHW')
    """
    if layout in LAYOUTS:
        return layout
    channels = "S" if "S" in layout else "C"  # an RGB hyperstack's C is a stack axis of RGB images
    named = {"Y": "H", "X": "W", channels: "C", **({"Z": "D"} if volume else {})}
    return "".join(named.get(axis, "N") for axis in layout)


def _inner(volume: bool) -> str:
    """The kernel's axes after N: C, H, W, or C, D, H, W for a volume."""
    return "CDHW" if volume else "CHW"


def batch_shape(shape: tuple[int, ...], layout: str, volume: bool = False) -> tuple[int, ...]:
    """The lengths of the stack axes of an array of ``shape`` in ``layout``, which N flattens.

    >>> batch_shape((2, 3, 4, 8, 8), "TZCYX"), batch_shape((2, 3, 8, 8), "NCHW"), batch_shape((8, 8), "HW")
    ((2, 3), (2,), ())
    """
    return tuple(length for length, role in zip(shape, roles(layout, volume), strict=True) if role == "N")


def flattens_in_place(layout: str, volume: bool = False) -> bool:
    """Whether :func:`to_nchw` of a C-ordered array in ``layout`` is a view: its stack axes are
    next to each other (TZCYX), not apart (OME's TCZYX, whose N is copied together)."""
    positions = [index for index, role in enumerate(roles(layout, volume)) if role == "N"]
    return not positions or positions[-1] - positions[0] == len(positions) - 1


def to_nchw(data: np.ndarray, layout: str, volume: bool = False) -> np.ndarray:
    """``data`` as (N, C, H, W), or (N, C, D, H, W) for a ``volume``: a view, but for stack axes
    apart (see :func:`flattens_in_place`)."""
    # the stack axes first, then C, [D,] H, W; missing axes become length-1 axes
    named = roles(layout, volume)
    order = ([index for index, role in enumerate(named) if role == "N"]
             + [named.index(a) for a in _inner(volume) if a in named])
    return data.transpose(order).reshape(to_nchw_shape(data.shape, layout, volume))


def from_nchw(data: np.ndarray, layout: str, batch: tuple[int, ...] | None = None,
              volume: bool = False) -> np.ndarray:
    """A view of an (N, C, H, W) result (N, C, D, H, W for a ``volume``) in ``layout``; HW grows
    to HWC when channels appear. ``batch``: the lengths N is restored to, for a layout of several
    stack axes (:func:`batch_shape`)."""
    named = roles(output_layout(layout, data.shape[1]), volume)
    batch = _batch(named, data.shape[0], batch)
    # (N, C, H, W) -> (*batch, C, H, W) for several stack axes -> the layout's order, the missing
    # length-1 axes last (and dropped: a reshape that only drops them keeps the other strides)
    if len(batch) > 1:
        data = data.reshape(*batch, *data.shape[1:])
    first = max(len(batch), 1)  # where C is: axis 0 is N even for a layout without one
    stacks = iter(range(len(batch)))
    order = [next(stacks) if role == "N" else first + _inner(volume).index(role) for role in named]
    view = data.transpose(order + [axis for axis in range(data.ndim) if axis not in order])
    return view.reshape(view.shape[: len(named)])


def _batch(named: str, n: int, batch: tuple[int, ...] | None) -> tuple[int, ...]:
    count = named.count("N")
    if batch is None:
        if count > 1:
            raise ValueError(f"a layout of {count} stack axes needs their lengths (batch)")
        batch = (n,) * count
    assert len(batch) == count and math.prod(batch) == n, (named, n, batch)
    return batch


def output_layout(layout: str, channels: int) -> str:
    """The layout a result in ``layout`` is written in: HW grows to HWC when it has channels, a
    grey stack NHW to NCHW, and a TIFF's axes without channels gain a C before Y (ZYX to ZCYX).

    >>> output_layout("HW", 4), output_layout("HW", 1), output_layout("CHW", 4), output_layout("NHW", 4)
    ('HWC', 'HW', 'CHW', 'NCHW')
    >>> output_layout("TZYX", 4), output_layout("TZCYX", 4)
    ('TZCYX', 'TZCYX')
    """
    if channels == 1:
        return layout
    if layout not in LAYOUTS and "C" not in roles(layout):
        return layout.replace("Y", "CY")
    return {"HW": "HWC", "NHW": "NCHW"}.get(layout, layout)


def to_nchw_shape(shape: tuple[int, ...], layout: str, volume: bool = False) -> tuple[int, ...]:
    """The shape :func:`to_nchw` gives an array of ``shape`` in ``layout``.

    >>> to_nchw_shape((480, 640, 3), "HWC"), to_nchw_shape((2, 3, 4, 8, 8), "TZCYX")
    ((1, 3, 480, 640), (6, 4, 8, 8))
    >>> to_nchw_shape((2, 3, 4, 8, 8), "TZCYX", volume=True), to_nchw_shape((5, 8, 8), "ZYX", volume=True)
    ((2, 4, 3, 8, 8), (1, 1, 5, 8, 8))
    """
    named = roles(layout, volume)
    lengths = dict(zip(named, shape, strict=True))
    return math.prod(batch_shape(shape, layout, volume)), *(lengths.get(axis, 1) for axis in _inner(volume))


def from_nchw_shape(shape: tuple[int, ...], layout: str, batch: tuple[int, ...] | None = None,
                    volume: bool = False) -> tuple[int, ...]:
    """The shape :func:`from_nchw` gives an (N, C, H, W) array of ``shape`` in ``layout``
    ((N, C, D, H, W) for a ``volume``).

    >>> from_nchw_shape((1, 12, 240, 320), "HWC"), from_nchw_shape((1, 4, 2, 2), "HW")
    ((240, 320, 12), (2, 2, 4))
    >>> from_nchw_shape((6, 16, 4, 4), "TZCYX", (2, 3)), from_nchw_shape((2, 4, 3, 8, 8), "TZCYX", volume=True)
    ((2, 3, 16, 4, 4), (2, 3, 4, 8, 8))
    """
    named = roles(output_layout(layout, shape[1]), volume)
    stacks = iter(_batch(named, shape[0], batch))
    return tuple(next(stacks) if role == "N" else shape[1 + _inner(volume).index(role)] for role in named)


@contextmanager
def in_file_terms(shape: tuple[int, ...], layout: str | None, *, as_nchw: bool = False,
                  volume: bool = False) -> Iterator[None]:
    """A kernel's GeomError about the (N, C, H, W) array :func:`to_nchw` makes of an array of
    ``shape`` in ``layout``, reworded to name ``shape`` and ``layout``: what the user's file holds,
    not the kernel's view of it. ``as_nchw`` keeps that view beside them, for messages that count
    the kernel's N or rank (grid_sample's); ``volume``: the view is a volume's NCDHW. The kernels
    know nothing of files, so the rewording is here; called from Python they say what they were given.

    >>> with in_file_terms((5, 4, 3), "HWC"):
    ...     raise GeomError("space_to_depth: height 5 is odd (input shape (1, 3, 5, 4))")
    Traceback (most recent call last):
    ...
    geomcli.errors.GeomError: space_to_depth: height 5 is odd (input shape (5, 4, 3), layout HWC)
    """
    shape = tuple(int(length) for length in shape)
    nchw = None if layout is None or len(layout) != len(shape) else to_nchw_shape(shape, layout, volume)
    try:
        yield
    except GeomError as error:
        if nchw is None or nchw == shape or len(error.args) != 1:
            raise
        view = f", as {'NCDHW' if volume else 'NCHW'} {nchw}" if as_nchw else ""
        # in place: the error keeps its class (an OptionFault stays one) and its traceback
        error.args = (str(error.args[0]).replace(f"shape {nchw}", f"shape {shape}, layout {layout}{view}"),)
        raise


def spatial_axes(layout: str, volume: bool = False) -> tuple[int, ...]:
    """The positions of H and W (a TIFF's Y and X) in ``layout``; of D, H and W (Z, Y, X) for a ``volume``."""
    named = roles(layout, volume)
    return tuple(named.index(axis) for axis in _inner(volume)[1:])


def written_layout(input_shape: tuple[int, ...], output_shape: tuple[int, ...], given: str | None,
                   from_file: str | None) -> str | None:
    """The layout an operation's result is in: the input's (--layout, else the file's, else HW for
    rank 2), grown by a channel axis where the result has one more (HW to HWC, NHW to NCHW, ZYX
    to ZCYX); None when no layout of the result's rank is known (a rank-3 tensor of no named
    layout, say).

    >>> written_layout((8, 12), (4, 6, 4), None, None), written_layout((8, 12, 3), (4, 6, 12), None, "HWC")
    ('HWC', 'HWC')
    >>> written_layout((2, 8, 12), (2, 4, 6), None, None) is None
    True
    """
    layout = given or from_file or ("HW" if len(input_shape) == 2 else None)
    if layout is not None and len(output_shape) == len(layout) + 1:
        layout = output_layout(layout, 2)
    return layout if layout is not None and len(layout) == len(output_shape) else None


def ome_layout(input_shape: tuple[int, ...], output_shape: tuple[int, ...], given: str | None,
               from_file: str | None) -> str | None:
    """The layout a result named .ome.tif is described in, by an operation that reads a tensor of
    no named layout in its rank's default (:func:`resolve_layout`: NCHW for rank 4; space-to-depth,
    depth-to-space, grid-sample, warp): :func:`written_layout`'s, that default standing for the
    file's. The name asks for OME-XML, and the kernel has already taken those axes for N, C, H
    and W, so the file says so (N as OME's modulo axis Q, as ``--layout NCHW`` writes it) rather
    than being a plain TIFF under an OME name; refusing would only make the user type the layout
    the run used. A rank of no default (3), or an operation that assumes none (crop-pad over
    every axis), is still written without OME-XML, with a warning: no axes were taken.

    >>> ome_layout((2, 3, 8, 8), (2, 12, 4, 4), None, None), ome_layout((3, 8, 8), (12, 4, 4), None, None)
    ('NCHW', None)
    """
    return written_layout(input_shape, output_shape, given, from_file or _DEFAULT_FOR_RANK.get(len(input_shape)))


def result_layout(by_rank: bool, input_shape: tuple[int, ...], file_layout: str | None, shape: tuple[int, ...],
                  output: str, output_format: str, common: Common) -> str | None:
    """The layout a result of ``shape`` is written in (:func:`written_layout`); for a TIFF named
    .ome.tif, the one a tensor of no named layout was read in too, where the operation reads it in
    its rank's (``by_rank``: :func:`ome_layout`), so that the OME-XML its name asks for names
    those axes."""
    if output_format == "tiff" and not common.fidelity.strip and by_rank:
        from geomcli.io import _tiff

        if _tiff.names_ome(output):
            return ome_layout(input_shape, shape, common.layout, file_layout)
    return written_layout(input_shape, shape, common.layout, file_layout)


def tensor_layout(shape: tuple[int, ...], given: str | None, from_file: str | None, volume: bool = False,
                  axes: str | None = None) -> str | None:
    """The layout an interpolating operation reads an array in: --layout ``given``, the file's, HW
    or NCHW by rank; None for a tensor of another rank named by no layout, taken as (N, C, D1,
    ..., Dr). A ``volume`` (--volume) is a layout with a Z axis (a TIFF's ``axes`` where its layout
    reads its Z as N), or that tensor; any other is an OptionFault (exit 2)."""
    if given is None and from_file is None and len(shape) not in (2, 4):
        return with_z(None, shape, volume)
    layout = resolve_layout(shape, given, from_file)
    return with_z(z_named(layout, axes, given) if volume else layout, shape, volume)


def z_named(layout: str | None, axes: str | None, given: str | None) -> str | None:
    """A TIFF's own ``axes`` (ZCYX, ZYXS) where its layout is geomcli's with Z read as N (NCHW,
    NHWC) and no --layout was ``given``: the same axes to every kernel, where Z can be found (as a
    volume's depth); else ``layout``."""
    if (not given and layout in LAYOUTS and "N" in layout and axes is not None and len(axes) == len(layout)
            and axes[layout.index("N")] == "Z"):
        return axes
    return layout


def with_z(layout: str | None, shape: tuple[int, ...], volume: bool) -> str | None:
    """``layout`` (None: a tensor of no named axes), refused (an OptionFault, exit 2) for a
    ``volume`` where it is neither a layout with a Z axis nor a rank-5 tensor's None."""
    if volume and ("Z" not in layout if layout is not None else len(shape) != 5):
        found = f"a rank-{len(shape)} tensor {shape}" if layout is None else f"axes {layout} {shape}, no Z"
        if layout is not None and "Y" in layout:  # (a TIFF's axes: one plane's Z is read as none)
            found += " (a TIFF's Z of one plane is not kept as an axis)"
        raise OptionFault(f"--volume takes a z-stack (a TIFF's or OME-Zarr's Z axis) or a rank-5 tensor of no "
                          f"named axes; found {found}")
    return layout
