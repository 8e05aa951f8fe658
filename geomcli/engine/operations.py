"""One object per operation: its parameters, the output shape it makes from a file's header
alone (for --dry-run and the plan), ``apply`` to a file's array, and what it does to metadata.

A batch's task is (operation, options); nothing elsewhere branches on a command's name. Adding
an operation is an ops module, a class here and a command in geomcli.cli.

Only the standard library loads at import time; numpy and the kernels load when a file is done.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from geomcli.constants import plain_number
from geomcli.errors import GeomError, PlanError

if TYPE_CHECKING:
    from fractions import Fraction

    import numpy as np

    from geomcli.engine.options import Common
    from geomcli.engine.theta import WarpTheta
    from geomcli.io import Header, Loaded, Metadata, Picture
    from geomcli.ops.grid_sample import Mode as SamplingMode
    from geomcli.ops.grid_sample import PaddingMode


class Allocate(Protocol):
    """Where a big result goes: a memory-mapped output of this shape and dtype, or None (in RAM)."""

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype, /) -> np.ndarray | None: ...


def check_size(shape: tuple[int, ...], common: Common) -> None:
    """Refuse an output of more elements than --max-pixels, before it is allocated."""
    from geomcli import io

    io.check_size(shape, common.max_pixels, f"the output {shape}")


class Operation:
    """What every operation answers. ``command`` is its name on the command line and in reports."""

    command: ClassVar[str]

    def parameters(self, dtype: np.dtype | None = None) -> dict[str, Any]:
        """The operation's parameters as its report and JSON record show them: for a file of
        ``dtype`` done, the values used (a --fill as that dtype holds it); else as given."""
        raise NotImplementedError

    def output_shape(self, header: Header, common: Common) -> tuple[int, ...]:
        """What this makes of a file with this header, or a GeomError for what it refuses."""
        raise NotImplementedError

    def apply(self, loaded: Loaded, common: Common, allocate: Allocate | None = None) -> np.ndarray:
        """The result in the file's layout; a big one written into ``allocate``'s memory map."""
        raise NotImplementedError

    def writes_into(self, header: Header, common: Common) -> bool:
        """Whether :meth:`apply` asks ``allocate`` for its result's array for a file of this header
        (a memory map where io.maps_output says so): a dry run says what such an output drops."""
        return False

    def metadata(self, metadata: Metadata, header: Header, common: Common) -> Metadata:
        """The input's metadata as the output's, for an input of this header (most operations
        keep it as it is)."""
        return metadata

    def trace(self, header: Header, common: Common) -> list[dict[str, Any]]:
        """The steps an operation of several makes, for its report (``steps``); none for one."""
        return []

    def trace_known(self, header: Header, common: Common) -> list[dict[str, Any]]:
        """:meth:`trace` for a file a step refuses: each step, its ``output_shape`` null from the
        step that refuses it on; none for an operation of one step."""
        return []

    def unused_options(self) -> list[str]:
        """A warning for each option given that this operation does not use (the spec ignores it)."""
        return []

    def notes(self) -> list[str]:
        """A note for what the options make of every file that is not a fault (a theta holding NaN)."""
        return []

    def files_read(self) -> tuple[tuple[str, str], ...]:
        """(option, path) of each file this operation read besides its inputs (a --grid, a --theta
        file; stdin is none): a batch must not write over these either."""
        return ()

    def stdin_option(self) -> str | None:
        """The option that reads stdin (``--grid -``), if one does: -o - must not be the file the
        shell opened there either."""
        return None

    def cautions(self, header: Header, common: Common) -> list[str]:
        """A warning for what the options do to a file of this header that is seldom meant (the
        spec allows it)."""
        return []

    def mixed_values(self) -> str | None:
        """What of its options makes a value of several input values (a linear mode, antialias), as
        the refusal of palette indices (--keep-palette) names it; None where each output value is
        one input value (a crop, a pad, nearest)."""
        return None

    def takes_rank_layout(self) -> bool:
        """Whether a tensor of no named layout is read in its rank's default (NCHW for rank 4, as
        --layout's help says), which an output named .ome.tif then names (layout.ome_layout)."""
        return False

    def takes_pictures(self, common: Common, output_format: str) -> bool:
        """Whether a plain 8-bit image may stay a Pillow image (io.Picture) through this operation
        (``apply_picture``), read and written without numpy."""
        return False

    def apply_picture(self, picture: Picture, common: Common) -> Picture:
        """The result of a Pillow image, where ``takes_pictures`` says it may stay one."""
        raise NotImplementedError

    def apply_chunked(self, data: Any, layout: str | None, common: Common) -> Any:
        """The result, chunk by chunk, of a dask array ``data`` in ``layout`` (a zarr input's):
        a dask array equal to ``apply``'s result bit for bit (geomcli.engine.chunked)."""
        raise NotImplementedError

    def scaled(self, scale: tuple[float, ...], header: Header, common: Common) -> tuple[float, ...] | None:
        """An OME-Zarr image's pixel scale per axis, for an input of this header, as the output's
        (most operations keep it); None where the output's pixels have no size per axis (a
        grid's arbitrary positions, a rotation: the sizes of space are then dropped, with a warning)."""
        return scale

    def shifted(self, translation: tuple[float, ...], scale: tuple[float, ...], header: Header,
                common: Common) -> tuple[float, ...] | None:
        """An OME-Zarr image's translation (where its first pixel's centre lies, per axis) as the
        output's, for an input of this header and ``scale``; None where this operation does not
        say where its pixels lie (then it is dropped along the axes it samples, with a warning),
        NaN along an axis where only that one's is lost (a flip's pixels run the other way, which
        NGFF's scale and translation cannot say: the other axes keep theirs). NaN stays NaN through
        the arithmetic of a chain's next steps."""
        return None

    def translation_lost(self, translation: tuple[float, ...], scale: tuple[float, ...], header: Header,
                         common: Common) -> tuple[float, ...]:
        """The translation a warning names where ``shifted`` loses it, per axis: the value the step
        that loses it was given. One operation is given the input's; a chain's flip after a
        crop the crop's (Chain)."""
        return translation

    def sampled_axes(self, header: Header, common: Common) -> tuple[int, ...]:
        """The axes of a file of this header whose pixel sizes and translation are lost where
        ``scaled`` or ``shifted`` says None: those the operation places its output pixels along
        (every axis, unless it says fewer); the others keep theirs, as :meth:`scaled_apart` and
        :meth:`shifted_apart` make them."""
        return tuple(range(len(header.shape)))

    def scaled_apart(self, scale: tuple[float, ...], header: Header, common: Common) -> tuple[float, ...]:
        """Where ``scaled`` says None: the scale along the axes :meth:`sampled_axes` leaves out, as
        the operation makes it (Z scaled by a volume's turn about Z that scales Z too); any value
        along the sampled ones, whose sizes are lost. Most such operations leave the others as
        they were."""
        return scale

    def shifted_apart(self, translation: tuple[float, ...], scale: tuple[float, ...], header: Header,
                      common: Common) -> tuple[float, ...]:
        """Where ``shifted`` says None: the translation along the axes :meth:`sampled_axes` leaves
        out, as :meth:`scaled_apart` is the scale (NaN along one it flips); any value along the
        sampled ones."""
        return translation


@dataclass(frozen=True)
class CropPad(Operation):
    """CenterCropPad on a file; --shape H,W works on the H and W axes of an image, or of a tensor
    in --layout or the layout its file names. The pad value is --fill, else the dtype's zero.

    A plain 8-bit image (io.Picture) is cropped and padded by Pillow itself, without numpy: the
    same window (geomcli.ops.window), zero padding, the same bytes written (tests/engine/test_pictures.py).
    """

    target: tuple[int, ...]
    axes: tuple[int, ...] | None = None
    fill: str | None = None
    command: ClassVar[str] = "crop-pad"

    def check(self) -> None:
        """A PlanError (a usage error, exit 2, before any file is read) for a --shape of another
        length than --axes."""
        _check_axes_count("--shape", self.target, self.axes)

    def parameters(self, dtype: np.dtype | None = None) -> dict[str, Any]:
        return {"shape": list(self.target), "axes": None if self.axes is None else list(self.axes),
                **_recorded_fill(self.fill, dtype, _pad_value)}

    def takes_pictures(self, common: Common, output_format: str) -> bool:
        """Whether an 8-bit image may stay a Pillow image through this crop-pad to ``output_format``:
        two sizes, both positive, on the image's own H and W, with zero padding."""
        from geomcli.io import IMAGE_FORMATS

        return (len(self.target) == 2 and min(self.target) > 0 and self.axes is None and self.fill is None
                and common.layout is None and output_format in IMAGE_FORMATS)

    def writes_into(self, header: Header, common: Common) -> bool:
        return True

    def apply(self, loaded: Loaded, common: Common, allocate: Allocate | None = None) -> np.ndarray:
        import geomcli.ops.center_crop_pad as crop_ops

        chosen, shape = self._axes_and_shape(loaded.data.shape, loaded.layout, common)
        out = None if allocate is None else allocate(shape, loaded.data.dtype)
        value = None if self.fill is None else parse_fill(self.fill, loaded.data.dtype)
        if out is None:
            return crop_ops.center_crop_pad(loaded.data, self.target, chosen, fill=value, threads=common.threads)
        from geomcli.engine import slabs

        slabs.center_crop_pad(loaded.data, self.target, chosen, fill=value, threads=common.threads, out=out)
        return out

    def crop_window(self, shape: tuple[int, ...], layout: str | None, common: Common) -> tuple[slice, ...] | None:
        """What this keeps of an array of ``shape`` when it only crops (a slice per axis), checked
        as apply checks it; None when it pads anywhere or has a --fill to check."""
        from geomcli.ops.window import center_crop_pad_window

        chosen, output = self._axes_and_shape(shape, layout, common)
        if self.fill is not None or any(out > length for out, length in zip(output, shape)):
            return None
        return tuple(center_crop_pad_window(length, out)[0] for length, out in zip(shape, output))

    def output_shape(self, header: Header, common: Common) -> tuple[int, ...]:
        """What this makes of a file with this header, or refuses (a --fill its dtype cannot
        hold, checked by the kernel itself on a stand-in of the file's shape and dtype, one
        element seen everywhere, cropped to nothing): for --dry-run."""
        import geomcli.ops.center_crop_pad as crop_ops

        _, shape = self._axes_and_shape(header.shape, header.layout, common)
        if self.fill is not None:
            import numpy as np

            stand_in = np.broadcast_to(np.zeros((), header.dtype), header.shape)
            crop_ops.center_crop_pad(stand_in, [0] * stand_in.ndim, fill=parse_fill(self.fill, header.dtype))
        return shape

    def _axes_and_shape(self, shape: tuple[int, ...], layout: str | None,
                        common: Common) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
        """The axes --shape refers to, and the output's shape, checked against --max-pixels."""
        import geomcli.ops.center_crop_pad as crop_ops

        chosen = _crop_pad_axes(self.target, self.axes, shape, common.layout, layout)
        output = crop_ops.center_crop_pad_output_shape(shape, self.target, chosen)
        check_size(output, common)
        return chosen, output

    def shifted(self, translation: tuple[float, ...], scale: tuple[float, ...], header: Header,
                common: Common) -> tuple[float, ...] | None:
        """Moved by the first pixel kept (a crop's offset, or minus a pad's) times the pixel size."""
        from geomcli.ops.window import center_crop_pad_window

        _, output = self._axes_and_shape(header.shape, header.layout, common)
        if not len(translation) == len(scale) == len(output):
            return None
        firsts = [kept.start - placed.start for kept, placed in
                  (center_crop_pad_window(length, out) for length, out in zip(header.shape, output))]
        return tuple(value + first * size for value, first, size in zip(translation, firsts, scale))

    def apply_chunked(self, data: Any, layout: str | None, common: Common) -> Any:
        import geomcli.ops.center_crop_pad as crop_ops
        from geomcli.engine import chunked

        chosen = _crop_pad_axes(self.target, self.axes, data.shape, common.layout, layout)
        crop_ops.center_crop_pad_output_shape(data.shape, self.target, chosen)  # its errors, before any chunk
        return chunked.crop_pad(data, self.target, chosen, _pad_value(self.fill, data.dtype), common.max_pixels)

    def apply_picture(self, picture: Picture, common: Common) -> Picture:
        """Image.crop with a box that may reach past the edges: Pillow fills that part with zeros.
        (The output's shape is the target's H and W and the picture's channels: what
        crop_ops.center_crop_pad_output_shape says of a valid target on the H and W axes.)"""
        from geomcli import io
        from geomcli.ops.window import center_crop_pad_window

        height, width = self.target
        check_size((height, width, *picture.shape[2:]), common)
        (rows, rows_placed), (columns, columns_placed) = (
            center_crop_pad_window(length, size) for length, size in zip(picture.shape, self.target, strict=False))
        top, left = rows.start - rows_placed.start, columns.start - columns_placed.start
        return io.crop_picture(picture, (left, top, left + width, top + height))


def _check_axes_count(option: str, values: tuple[Any, ...] | None, axes: tuple[int, ...] | None) -> None:
    if axes is not None and len(set(axes)) != len(axes):
        repeated = next(axis for axis in axes if axes.count(axis) > 1)
        raise PlanError(f"axis {repeated} is given twice", options="--axes")
    if values is not None and axes is not None and len(values) != len(axes):
        counted = f"{len(values)} value{'' if len(values) == 1 else 's'}"
        raise PlanError(f"{counted} for {len(axes)} ax{'is' if len(axes) == 1 else 'es'}: give one value per axis",
                        options=[option, "--axes"])


def _crop_pad_axes(target: tuple[int, ...], axes: tuple[int, ...] | None, shape: tuple[int, ...],
                   given: str | None, from_file: str | None, option: str = "--shape") -> tuple[int, ...] | None:
    """--axes, or the H and W axes when a two-value --shape meets an array of higher rank whose
    layout --layout or its file names (an image with channels, a TIFF's ImageJ/OME axes,
    stacked frames); else None: every axis. Another count for such an array is an error that
    says what it takes."""
    from geomcli.engine import layout as layouts

    if given is not None:
        layouts.resolve_layout(shape, given, from_file)  # a --layout of another rank is refused, as elsewhere
    if axes is not None or len(target) == len(shape) or len(shape) <= 2:
        return axes
    counted = f"{len(target)} value{'' if len(target) == 1 else 's'}"
    if (given or from_file) is None:
        named = [name for name in layouts.LAYOUTS if len(name) == len(shape)]
        by_layout = f" or --layout ({', '.join(named)})" if named else ""
        raise GeomError(f"{option} has {counted} for a tensor of shape {shape}, which names no layout: give "
                        f"{len(shape)} (one per axis), or pick the axes with --axes (0,1: the first two; -2,-1: "
                        f"the last two){by_layout}")
    layout = layouts.resolve_layout(shape, given, from_file)
    if len(target) == 2:
        return layouts.spatial_axes(layout)
    raise GeomError(f"{option} has {counted} for an input of shape {shape} ({layout}): give 2 (H,W), "
                    f"{len(shape)} (one per axis), or name the axes with --axes")


def _pad_value(text: str | None, dtype: np.dtype) -> Any:
    """The element crop-pad pads data of ``dtype`` with, as the kernel checks and converts --fill
    ``text`` (one element padded onto nothing): a numpy scalar."""
    import numpy as np

    import geomcli.ops.center_crop_pad as crop_ops

    value = None if text is None else parse_fill(text, dtype)
    return crop_ops.center_crop_pad(np.zeros(1, dtype)[:0], [1], fill=value)[0]


def _recorded_fill(text: str | None, dtype: np.dtype | None, used: Callable[[str, np.dtype], Any]) -> dict[str, Any]:
    """A record's ``fill``, where --fill is given: without a file's ``dtype``, as given; with one,
    the value ``used`` makes of it for that dtype, as a numpy scalar of it: ``--fill 0.1`` pads
    float16 data with 0.0999755859375, which the summary line shows as numpy prints a float16
    (0.1) and the JSON record exactly (NaN and Inf as strict_json writes them: "NaN", "Infinity").
    A string dtype's is the text given, which fits exactly or is refused."""
    if text is None:
        return {}
    if dtype is None or dtype.kind in "USTO":
        return {"fill": text}
    return {"fill": used(text, dtype)[()]}


def parse_fill(text: str, dtype: np.dtype) -> bool | int | float | complex | str:
    """--fill read as a value of ``dtype``, for the kernel to judge whether it fits
    (crop_ops._as_fill is the one place that does): for a string dtype the text itself; for
    bool, true or false in any case, else a number (1, 0); for the other types the number the
    text spells, an int when it is one (exact past 2**53), else a float, or for complex types a
    complex. Text that spells no number stays text, which the kernel refuses for a numeric dtype.

    Raises
    ------
    GeomError
        If a finite spelling overflows to infinity when read (1e400): the kernel could not tell
        it from an intended inf, -inf or nan, which are allowed for float types.
    """
    import math

    if dtype.kind in "US":
        return text
    if dtype.kind == "b" and text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    if not plain_number(text):
        return text  # as text, the kernel refuses it
    if "," in text:
        try:
            [float(part) for part in text.split(",")]
        except ValueError:
            return text
        raise GeomError(f"fill value {text!r} is several numbers: one value serves every channel")
    try:
        return int(text)
    except ValueError:
        pass
    value: float | complex
    try:
        value = float(text)
    except ValueError:
        if dtype.kind != "c":
            return text
        try:
            value = complex(text)
        except ValueError:
            return text
    parts = (value.real, value.imag) if isinstance(value, complex) else (value,)
    if any(math.isinf(part) for part in parts) and "inf" not in text.lower():
        raise GeomError(f"fill value {text!r} overflows to infinity; write inf or -inf for an infinite pad value")
    return value


@dataclass(frozen=True)
class _Blocks(Operation):
    """SpaceToDepth or DepthToSpace on a file in any layout (NCHW for rank 4 unless --layout); the
    result in that layout. Metadata: b times fewer pixels per unit (depth-to-space: b times more)."""

    blocksize: int
    mode: str = "DCR"
    kernel: ClassVar[str]

    def takes_rank_layout(self) -> bool:
        return True

    def parameters(self, dtype: np.dtype | None = None) -> dict[str, Any]:
        return {"blocksize": self.blocksize, "mode": self.mode}

    def output_shape(self, header: Header, common: Common) -> tuple[int, ...]:
        from geomcli.engine import layout as layouts

        chosen = layouts.resolve_layout(header.shape, common.layout, header.layout)
        with layouts.in_file_terms(header.shape, chosen):
            shape = self._nchw_output_shape(layouts.to_nchw_shape(header.shape, chosen))
        output = layouts.from_nchw_shape(shape, chosen, layouts.batch_shape(header.shape, chosen))
        check_size(output, common)
        return output

    def writes_into(self, header: Header, common: Common) -> bool:
        from geomcli.engine import layout as layouts

        chosen = layouts.resolve_layout(header.shape, common.layout, header.layout)
        with layouts.in_file_terms(header.shape, chosen):
            channels = self._nchw_output_shape(_onnx_shape(header.shape, chosen))[1]
        return _maps(chosen, channels)

    def apply(self, loaded: Loaded, common: Common, allocate: Allocate | None = None) -> np.ndarray:
        import geomcli.ops.space_depth as space_depth_ops
        from geomcli.engine import layout as layouts

        chosen = layouts.resolve_layout(loaded.data.shape, common.layout, loaded.layout)
        with layouts.in_file_terms(loaded.data.shape, chosen):
            prepared = _prepared(loaded.data, chosen, self._nchw_output_shape, common, allocate)
            if prepared.view is None:
                result = getattr(space_depth_ops, self.kernel)(prepared.data, self.blocksize, self.mode,
                                                               threads=common.threads)
                return _finished(result, chosen, prepared)
            from geomcli.engine import slabs

            getattr(slabs, self.kernel)(prepared.data, self.blocksize, self.mode, threads=common.threads,
                                        out=prepared.view)
        return _finished(prepared.view, chosen, prepared)

    def apply_chunked(self, data: Any, layout: str | None, common: Common) -> Any:
        import functools

        import geomcli.ops.space_depth as space_depth_ops
        from geomcli.engine import chunked
        from geomcli.engine import layout as layouts

        chosen = layouts.resolve_layout(data.shape, common.layout, layout)
        nchw = layouts.to_nchw(data, chosen)
        with layouts.in_file_terms(data.shape, chosen):
            self._nchw_output_shape(nchw.shape)  # its errors, before any chunk
        kernel = functools.partial(getattr(space_depth_ops, self.kernel), blocksize=self.blocksize, mode=self.mode,
                                   threads=1)  # dask runs the chunks side by side
        result = chunked.blockwise(nchw, kernel, self.blocksize, to_depth=self.kernel == "space_to_depth")
        return layouts.from_nchw(result, chosen, layouts.batch_shape(data.shape, chosen))

    def scaled(self, scale: tuple[float, ...], header: Header, common: Common) -> tuple[float, ...]:
        """b times the pixel size along y and x (depth-to-space: 1/b)."""
        from geomcli.engine import layout as layouts

        layout = layouts.resolve_layout(header.shape, common.layout, header.layout)
        if len(scale) != len(layout):
            return scale
        factor = self.blocksize if self.kernel == "space_to_depth" else 1 / self.blocksize
        return tuple(value * factor if role in "HW" else value for role, value in zip(layouts.roles(layout), scale))

    def shifted(self, translation: tuple[float, ...], scale: tuple[float, ...], header: Header,
                common: Common) -> tuple[float, ...] | None:
        """On y and x, the first output pixel's centre: space-to-depth's is its block's, (b - 1)/2
        input pixels on; depth-to-space's is the first of b in its input pixel, (b - 1)/(2b) of
        one back."""
        from geomcli.engine import layout as layouts

        layout = layouts.resolve_layout(header.shape, common.layout, header.layout)
        if not len(translation) == len(scale) == len(layout):
            return None
        b = self.blocksize
        step = (b - 1) / 2 if self.kernel == "space_to_depth" else -(b - 1) / (2 * b)
        return tuple(value + step * size if role in "HW" else value
                     for role, value, size in zip(layouts.roles(layout), translation, scale))

    def _nchw_output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        import geomcli.ops.space_depth as space_depth_ops

        result: tuple[int, ...] = getattr(space_depth_ops, f"{self.kernel}_output_shape")(shape, self.blocksize)
        return result


@dataclass(frozen=True)
class SpaceToDepth(_Blocks):
    command: ClassVar[str] = "space-to-depth"
    kernel: ClassVar[str] = "space_to_depth"

    def metadata(self, metadata: Metadata, header: Header, common: Common) -> Metadata:
        # channels made of blocks of pixels are no colours, even 4 of them from one grey channel
        return metadata.scaled(1 / self.blocksize)._replace(colour=False if self.blocksize > 1 else metadata.colour)


@dataclass(frozen=True)
class DepthToSpace(_Blocks):
    command: ClassVar[str] = "depth-to-space"
    kernel: ClassVar[str] = "depth_to_space"

    def metadata(self, metadata: Metadata, header: Header, common: Common) -> Metadata:
        # the channels it leaves are those before a space-to-depth: their shape says what they are
        return metadata.scaled(self.blocksize)._replace(colour=None if self.blocksize > 1 else metadata.colour)


def _maps(layout: str | None, channels: int, volume: bool = False) -> bool:
    """Whether a result in ``layout`` can be written into a memory-mapped output: the kernel's
    (N, C, ...) view of it is a view (a TIFF's stack axes apart, as OME's TCZYX, are not)."""
    from geomcli.engine import layout as layouts

    return layout is None or layouts.flattens_in_place(layouts.output_layout(layout, channels), volume)


def _as_tensor(shape: tuple[int, ...], common: Common, from_file: str | None, volume: bool = False,
               axes: str | None = None) -> str | None:
    """The layout an interpolating operation reads an array in (layout.tensor_layout), --layout
    from ``common``."""
    from geomcli.engine import layout as layouts

    return layouts.tensor_layout(shape, common.layout, from_file, volume, axes)


def _to_onnx(data: np.ndarray, layout: str | None, volume: bool = False) -> np.ndarray:
    from geomcli.engine import layout as layouts

    return data if layout is None else layouts.to_nchw(data, layout, volume)


def _from_onnx_shape(shape: tuple[int, ...], layout: str | None, batch: tuple[int, ...] | None,
                     volume: bool = False) -> tuple[int, ...]:
    from geomcli.engine import layout as layouts

    return shape if layout is None else layouts.from_nchw_shape(shape, layout, batch, volume)


def _batch(shape: tuple[int, ...], layout: str | None, volume: bool = False) -> tuple[int, ...] | None:
    """The lengths of a layout's stack axes (geomcli.engine.layout.batch_shape); None for none."""
    from geomcli.engine import layout as layouts

    return None if layout is None else layouts.batch_shape(shape, layout, volume)


class _Prepared(NamedTuple):
    """An input as a kernel takes it: its (N, C, ...) view, the result's shape there, its stack
    axes' lengths, and, where the result goes to a memory-mapped output, that output (in the
    file's layout) and its (N, C, ...) view for the kernel to write."""

    data: np.ndarray
    shape: tuple[int, ...]
    batch: tuple[int, ...] | None
    out: np.ndarray | None
    view: np.ndarray | None
    volume: bool = False


def _prepared(data: np.ndarray, layout: str | None, output_shape: Callable[[tuple[int, ...]], tuple[int, ...]],
              common: Common, allocate: Allocate | None, volume: bool = False) -> _Prepared:
    """``data`` in ``layout`` (None: already (N, C, ...)) made ready for a kernel whose result's
    shape ``output_shape`` gives (checked against --max-pixels before anything is allocated);
    ``volume``: a z-stack read as (N, C, D, H, W)."""
    batch = _batch(data.shape, layout, volume)
    onnx = _to_onnx(data, layout, volume)
    shape = output_shape(onnx.shape)
    written = _from_onnx_shape(shape, layout, batch, volume)
    check_size(written, common)
    if allocate is None or not _maps(layout, shape[1], volume):
        return _Prepared(onnx, shape, batch, None, None, volume)
    out = allocate(written, data.dtype)
    view = None if out is None else _onnx_view(out, layout, shape[1], volume)
    return _Prepared(onnx, shape, batch, out, view, volume)


def _result(prepared: _Prepared, layout: str | None, dtype: np.dtype) -> np.ndarray:
    """Where a sampling kernel writes: the memory-mapped output's (N, C, ...) view, or one of a new
    array in the file's layout, so that an H×W×C result needs no transposing copy afterwards (the
    compiled GridSample writes any strides)."""
    import numpy as np

    volume = prepared.volume
    if prepared.view is not None:
        return prepared.view
    if not _maps(layout, prepared.shape[1], volume):
        return np.empty(prepared.shape, dtype)
    return _onnx_view(np.empty(_from_onnx_shape(prepared.shape, layout, prepared.batch, volume), dtype), layout,
                      prepared.shape[1], volume)


def _finished(result: np.ndarray, layout: str | None, prepared: _Prepared) -> np.ndarray:
    """A kernel's (N, C, ...) result in the file's layout: the memory-mapped output it wrote, or
    a view of the result."""
    if prepared.out is not None:
        return prepared.out
    return result if layout is None else _from_onnx(result, layout, prepared.batch, prepared.volume)


def _onnx_view(out: np.ndarray, layout: str | None, channels: int, volume: bool = False) -> np.ndarray:
    """``out``, allocated in the file's layout, as the (N, C, ...) array the kernel writes."""
    from geomcli.engine import layout as layouts

    return out if layout is None else layouts.to_nchw(out, layouts.output_layout(layout, channels), volume)


@dataclass(frozen=True)
class GridSample(Operation):
    """GridSample on a file: an H×W×C image is data (1, C, H, W), a tensor is read in its layout
    (a rank-3 or rank-5 one of no named layout as (N, C, D1, ..., Dr)); one grid for every file.
    The result is in the input's layout and dtype; metadata is kept as crop-pad keeps it. With
    ``volume`` (--volume), a z-stack of named axes is (N, C, D, H, W), Z its D, for a 3-D grid
    (N, Dout, Hout, Wout, 3), as warp --volume reads it."""

    grid: np.ndarray = field(compare=False, repr=False)
    grid_name: str = "-"
    mode: SamplingMode = "linear"
    padding_mode: PaddingMode = "zeros"
    align_corners: bool = False
    fill: str | None = None
    volume: bool = False
    # whether every position is finite: found once, where the grid is read, not once a file
    grid_finite: bool = field(init=False, compare=False, repr=False)
    command: ClassVar[str] = "grid-sample"

    def __post_init__(self) -> None:
        # a NaN or an Inf is the min or the max (NaN propagates): no array of the grid's size made
        finite = self.grid.size == 0 or math.isfinite(float(self.grid.min())) and math.isfinite(float(self.grid.max()))
        object.__setattr__(self, "grid_finite", finite)

    def takes_rank_layout(self) -> bool:
        return True

    def notes(self) -> list[str]:
        return [] if self.grid_finite else ["the grid holds NaN or Inf: those positions read the fill value"]

    def parameters(self, dtype: np.dtype | None = None) -> dict[str, Any]:
        return {"grid": self.grid_name, **({"volume": True} if self.volume else {}), "mode": self.mode,
                "padding_mode": self.padding_mode,
                "align_corners": self.align_corners, **_recorded_fill(self.fill, dtype, _sampled_fill)}

    def files_read(self) -> tuple[tuple[str, str], ...]:
        return () if self.grid_name == "-" else (("--grid", self.grid_name),)

    def stdin_option(self) -> str | None:
        return "--grid" if self.grid_name == "-" else None

    def mixed_values(self) -> str | None:
        return None if self.mode == "nearest" else f"--mode {self.mode}"

    def output_shape(self, header: Header, common: Common) -> tuple[int, ...]:
        layout = _as_tensor(header.shape, common, header.layout, self.volume, header.axes)
        return _sampled_shape(self, header, common, layout, self.volume)

    def writes_into(self, header: Header, common: Common) -> bool:
        layout = _as_tensor(header.shape, common, header.layout, self.volume, header.axes)
        return _maps(layout, _onnx_shape(header.shape, layout, self.volume)[1], self.volume)  # channels kept

    def apply(self, loaded: Loaded, common: Common, allocate: Allocate | None = None) -> np.ndarray:
        from geomcli.engine import layout as layouts
        from geomcli.ops.grid_sample import grid_sample

        layout = _as_tensor(loaded.data.shape, common, loaded.layout, self.volume, loaded.metadata.axes)
        with layouts.in_file_terms(loaded.data.shape, layout, as_nchw=True, volume=self.volume):
            prepared = _prepared(loaded.data, layout, self._onnx_output_shape, common, allocate, self.volume)
            fill = 0 if self.fill is None else parse_fill(self.fill, loaded.data.dtype)
            result = grid_sample(prepared.data, self.grid, self.mode, self.padding_mode, self.align_corners,
                                 fill=fill, threads=common.threads, out=_result(prepared, layout, loaded.data.dtype))
        return _finished(result, layout, prepared)

    def apply_chunked(self, data: Any, layout: str | None, common: Common) -> Any:
        """Each image's grid on chunks of whole planes (images and channels split as stored)."""
        from geomcli.engine import chunked
        from geomcli.engine import layout as layouts
        from geomcli.ops.grid_sample import grid_sample

        layout = _as_tensor(data.shape, common, layout, self.volume)
        batch = _batch(data.shape, layout, self.volume)
        onnx = _to_onnx(data, layout, self.volume)
        with layouts.in_file_terms(data.shape, layout, as_nchw=True, volume=self.volume):
            shape = self._onnx_output_shape(onnx.shape)  # its errors, before any chunk
        fill = 0 if self.fill is None else parse_fill(self.fill, data.dtype)

        # the task's function holds these, not self: a cluster's task carried the whole grid in it
        mode, padding_mode, align_corners = self.mode, self.padding_mode, self.align_corners

        def sample(block: np.ndarray, grid: np.ndarray) -> np.ndarray:  # (the block's images' grid alone)
            return grid_sample(block, grid, mode, padding_mode, align_corners, fill=fill,
                               threads=1)  # dask runs the chunks side by side

        result = chunked.by_planes(onnx, sample, 2, shape[2:], common.max_pixels, per_image=self.grid)
        return result if layout is None else _from_onnx(result, layout, batch, self.volume)

    def scaled(self, scale: tuple[float, ...], header: Header, common: Common) -> tuple[float, ...] | None:
        """None: a grid's positions are arbitrary, so its output's pixels have no size of the input's."""
        return None

    def sampled_axes(self, header: Header, common: Common) -> tuple[int, ...]:
        """The sampled plane's (or volume's) axes: a stack's Z (but with --volume) or T, and C, keep their sizes."""
        layout = _as_tensor(header.shape, common, header.layout, self.volume, header.axes)
        return _sampled_axes(header.shape, layout, self.volume)

    def metadata(self, metadata: Metadata, header: Header, common: Common) -> Metadata:
        return _resolution_scaled(self, metadata, header, common)

    def _onnx_output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        from geomcli.ops.grid_sample import grid_sample_output_shape

        return grid_sample_output_shape(shape, self.grid.shape)


@dataclass(frozen=True)
class Warp(Operation):
    """An affine warp: GridSample of the grid AffineGrid makes from ``theta`` for an output of
    ``size`` (H, W, or D, H, W; the input's by default), made a slab of output rows at a time so
    that no whole grid is ever held. Bit for bit what grid-sample of affine-grid's grid gives. An
    image or a tensor in its layout is warped in 2-D, a rank-5 tensor of no named layout, (N, C,
    D, H, W), in 3-D. With ``size``, the DPI and pixel sizes follow the pixels, as resize's do.

    ``volume`` (--volume) warps a z-stack of named axes (a TIFF's ZYX, TCZYX, TZCYX, an OME-Zarr's
    zyx) as one volume in 3-D: Z is D, the other stack axes N, C stays C; the result is in the
    file's own axes. Without it such a stack is warped plane by plane, whatever theta holds: a 3x4
    theta file on a z-stack is refused, not taken for --volume, so that the same matrices typed
    (12 numbers, which read as two 2-D matrices as well as one 3-D) and from a file mean the same,
    and a folder's ZYX stacks and its images are not warped in two ways by one option's absence.

    ``theta_name`` is the file or the numbers theta was read from; None for a theta made from the
    transform ``flags`` (rotate, scale, translate, shear), which the record then shows with the
    matrix they made; ``grid_dtype`` the --dtype given, which the record shows too."""

    theta: WarpTheta = field(compare=False, repr=False)
    theta_name: str | None = None
    size: tuple[int, ...] | None = None
    mode: SamplingMode = "linear"
    padding_mode: PaddingMode = "zeros"
    align_corners: bool = False
    fill: str | None = None
    flags: tuple[Any, ...] | None = None
    volume: bool = False
    grid_dtype: str | None = None  # --dtype, where given
    command: ClassVar[str] = "warp"
    # the grid of one slab of output rows: about this many bytes
    SLAB_GRID_BYTES: ClassVar[int] = 8 << 20

    def takes_rank_layout(self) -> bool:
        return True

    def parameters(self, dtype: np.dtype | None = None) -> dict[str, Any]:
        """theta as given, or the matrix used (one for every image) and the flags that made it."""
        from geomcli.engine import theta as thetas

        source = ({"theta": self.theta_name} if self.theta_name is not None else
                  {"theta": thetas.recorded(self.theta.of_rank(2)[0]),
                   "flags": {} if self.flags is None else thetas.given_flags(self.flags)})
        # --dtype and --volume: a key only when given (the grid's dtype changes the pixels)
        return {**source, **({"dtype": self.grid_dtype} if self.grid_dtype is not None else {}),
                "size": None if self.size is None else list(self.size),
                **({"volume": True} if self.volume else {}), "mode": self.mode,
                "padding_mode": self.padding_mode, "align_corners": self.align_corners,
                **_recorded_fill(self.fill, dtype, _sampled_fill)}

    def notes(self) -> list[str]:
        import numpy as np

        # only a theta file can hold them: typed numbers and the flags must be finite
        finite = all(np.isfinite(matrices).all() for matrices in self.theta.matrices.values())
        return [] if finite else ["theta holds NaN or Inf: the positions it reaches read the fill value"]

    def files_read(self) -> tuple[tuple[str, str], ...]:
        from geomcli.engine import theta as thetas

        named = self.theta_name
        return (("--theta", named),) if named is not None and named != "-" and thetas.is_file(named) else ()

    def stdin_option(self) -> str | None:
        return "--theta" if self.theta_name == "-" else None

    def mixed_values(self) -> str | None:
        return None if self.mode == "nearest" else f"--mode {self.mode}"

    def output_shape(self, header: Header, common: Common) -> tuple[int, ...]:
        from geomcli.engine import layout as layouts

        layout = _warp_layout(header.shape, common, header.layout, self.volume, header.axes)
        with self._offering_volume(layouts.z_named(layout, header.axes, common.layout)):
            return _sampled_shape(self, header, common, layout, self.volume)

    @contextlib.contextmanager
    def _offering_volume(self, layout: str | None) -> Iterator[None]:
        """theta refused for a z-stack warped plane by plane, where it holds 3-D matrices (a file's,
        or 12 numbers typed: '2 matrices for 8 images'): the refusal names --volume, which warps it
        by them."""
        try:
            yield
        except GeomError as error:
            if (self.volume or layout is None or "Z" not in layout or 3 not in self.theta.matrices
                    or len(error.args) != 1 or not str(error.args[0]).startswith("theta ")):
                raise
            error.args = (f"{error.args[0]}; with --volume they are 3-D matrices, for the {layout} stack as one "
                          "volume",)
            raise

    def writes_into(self, header: Header, common: Common) -> bool:
        layout = _warp_layout(header.shape, common, header.layout, self.volume, header.axes)
        return _maps(layout, _onnx_shape(header.shape, layout, self.volume)[1], self.volume)  # channels kept

    def apply(self, loaded: Loaded, common: Common, allocate: Allocate | None = None) -> np.ndarray:
        from geomcli.engine import layout as layouts

        layout = _warp_layout(loaded.data.shape, common, loaded.layout, self.volume, loaded.metadata.axes)
        named = layouts.z_named(layout, loaded.metadata.axes, common.layout)
        with self._offering_volume(named), layouts.in_file_terms(loaded.data.shape, layout, as_nchw=True,
                                                                    volume=self.volume):
            prepared = _prepared(loaded.data, layout, self._onnx_output_shape, common, allocate, self.volume)
            result = _result(prepared, layout, loaded.data.dtype)
            self._warp(prepared.data, self._thetas(prepared.shape), result, common.threads)
        return _finished(result, layout, prepared)

    def apply_chunked(self, data: Any, layout: str | None, common: Common) -> Any:
        """Each image's warp on chunks of whole planes (images and channels split as stored); a
        volume's on chunks of whole volumes, Z, Y and X of one (T, C), each within --max-pixels."""
        import numpy as np

        from geomcli.engine import chunked
        from geomcli.engine import layout as layouts

        layout = _warp_layout(data.shape, common, layout, self.volume)
        batch = _batch(data.shape, layout, self.volume)
        onnx = _to_onnx(data, layout, self.volume)
        with self._offering_volume(layout), layouts.in_file_terms(data.shape, layout, as_nchw=True,
                                                                    volume=self.volume):
            shape = self._onnx_output_shape(onnx.shape)  # its errors, before any chunk
        thetas = self._thetas(shape)

        def warp(block: np.ndarray, start: int) -> np.ndarray:
            result = np.empty((*block.shape[:2], *shape[2:]), block.dtype)
            self._warp(block, thetas[start:start + block.shape[0]], result, 1)  # dask runs the chunks side by side
            return result

        result = chunked.by_planes(onnx, warp, 2, shape[2:], common.max_pixels)
        return result if layout is None else _from_onnx(result, layout, batch, self.volume)

    def scaled(self, scale: tuple[float, ...], header: Header, common: Common) -> tuple[float, ...] | None:
        """The pixel size along each warped axis times the input pixels an output pixel steps
        over, where theta scales, flips and shifts each axis alone (zero off its diagonal, one
        matrix for every image; a flip keeps the size): ``--scale 2`` twice the size, ``--size``
        its length in over its length out (as resize makes it; less one of each with
        --align-corners; an axis with no step, warped to one pixel or from one: the extent it shows
        over its length out, as resize's). None for a rotation or shear, whose output's pixels have
        no size per axis."""
        maps = self._axis_maps(header, common)
        return None if maps is None else self._scaled_along(maps, scale, header, common)

    def scaled_apart(self, scale: tuple[float, ...], header: Header, common: Common) -> tuple[float, ...]:
        """:meth:`scaled` along each axis theta leaves alone where it mixes others (its row and
        column zero off the diagonal: Z under a turn about Z), as though theta did that alone."""
        return self._scaled_along(self._axis_maps(header, common, alone=True) or [], scale, header, common)

    def _scaled_along(self, maps: list[tuple[int, float, float, float]], scale: tuple[float, ...], header: Header,
                      common: Common) -> tuple[float, ...]:
        """``scale`` along each axis of ``maps`` (_axis_maps) times the input pixels an output pixel steps over."""
        if not maps or len(scale) != len(header.shape):
            return scale
        output = self.output_shape(header, common)
        scaled = list(scale)
        for axis, factor, a, _ in maps:
            scaled[axis] = scale[axis] * (abs(a) if a else abs(factor) * header.shape[axis] / output[axis])
        return tuple(scaled)

    def shifted(self, translation: tuple[float, ...], scale: tuple[float, ...], header: Header,
                common: Common) -> tuple[float, ...] | None:
        """Moved to where the first output pixel is sampled (x_in = a·x_out + b: b input pixels)
        times the pixel size, where theta scales and shifts each axis alone; NaN along an axis it
        flips (its pixels run the other way), the others' kept; None for a rotation or a shear."""
        maps = self._axis_maps(header, common)
        if maps is None or not len(translation) == len(scale) == len(header.shape):
            return None
        return self._shifted_along(maps, translation, scale)

    def shifted_apart(self, translation: tuple[float, ...], scale: tuple[float, ...], header: Header,
                      common: Common) -> tuple[float, ...]:
        """:meth:`shifted` along each axis theta leaves alone where it mixes others (Z under a turn
        about Z that shifts Z too)."""
        maps = self._axis_maps(header, common, alone=True)
        if not maps or not len(translation) == len(scale) == len(header.shape):
            return translation
        return self._shifted_along(maps, translation, scale)

    @staticmethod
    def _shifted_along(maps: list[tuple[int, float, float, float]], translation: tuple[float, ...],
                       scale: tuple[float, ...]) -> tuple[float, ...]:
        """``translation`` along each axis of ``maps`` (_axis_maps) moved by b input pixels; NaN where it flips."""
        moved = list(translation)
        for axis, factor, _, b in maps:
            moved[axis] = math.nan if factor < 0 else translation[axis] + b * scale[axis]
        return tuple(moved)

    def sampled_axes(self, header: Header, common: Common) -> tuple[int, ...]:
        """The warped plane's (or volume's) axes: a stack's Z or T, and C, keep their sizes (Z is
        warped with --volume); but a warped axis theta leaves alone (its row and column zero off
        the diagonal: Z under a turn about Z) is an axis of its own, whose size and position
        :meth:`scaled_apart` and :meth:`shifted_apart` make, as a plane's rotation keeps a
        stack's Z."""
        layout = _warp_layout(header.shape, common, header.layout, self.volume, header.axes)
        sampled = _sampled_axes(header.shape, layout, self.volume)
        alone = {axis for axis, *_ in self._axis_maps(header, common, alone=True) or ()}
        return tuple(axis for axis in sampled if axis not in alone)

    def cautions(self, header: Header, common: Common) -> list[str]:
        """Typed numbers in 12s on a z-stack of named axes (a TIFF's, an OME-Zarr's), which is
        warped plane by plane: read as two 2-D matrices per 3-D one that was more likely meant."""
        from geomcli.engine import layout as layouts

        try:
            layout = _warp_layout(header.shape, common, header.layout, self.volume)
        except GeomError:
            return []  # a layout the run refuses
        layout = layouts.z_named(layout, header.axes, common.layout)  # ZCYX read as NCHW
        if self.volume or layout is None or "Z" not in layout or len(self.theta.matrices) < 2:
            return []
        from geomcli.engine import theta as thetas

        return [thetas.planes_caution(self.theta.of_rank(2).shape[0], layout, volume_option=True)]

    def _axis_maps(self, header: Header, common: Common,
                   alone: bool = False) -> list[tuple[int, float, float, float]] | None:
        """Per warped axis, (axis, theta's factor f, a, b) with x_in = a·x_out + b in input pixels,
        where theta scales and shifts each axis alone (one matrix for every image): affine-grid's
        coordinate u = alpha·x_out + beta (0 on an axis of one pixel), f·u + the shift, unnormalised
        as grid-sample does, in closed form. None for a rotation or shear; with ``alone``, the
        maps of the axes it leaves alone there (its row and column zero off the diagonal: Z
        under a turn about Z)."""
        import numpy as np

        from geomcli.engine import layout as layouts

        output = self.output_shape(header, common)
        layout = _warp_layout(header.shape, common, header.layout, self.volume, header.axes)
        axes = (2, 3, 4) if layout is None else layouts.spatial_axes(layout, self.volume)  # D, H, W or H, W
        if len(header.shape) != len(output) or max(axes) >= len(output):
            return None
        theta = self.theta.of_rank(len(axes)).astype(np.float64)
        diagonal = np.diagonal(theta[..., :-1], axis1=-2, axis2=-1)
        off = (theta[0, :, :-1] != diagonal[0, :, None] * np.eye(len(axes)))  # mixes row i with column j
        own = ~(off.any(axis=0) | off.any(axis=1)) & (diagonal[0] != 0)  # per row of theta: an axis alone
        if (theta != theta[:1]).any() or not (own.all() or alone):
            return None
        maps = []
        # theta's rows are x, y[, z]: the axes reversed
        for axis, factor, shift, kept in zip(axes, diagonal[0][::-1], theta[0][::-1, -1], own[::-1]):
            if not kept:
                continue
            before, after = header.shape[axis], output[axis]
            if after == 1:
                alpha, beta = 0.0, 0.0
            elif self.align_corners:
                alpha, beta = 2 / (after - 1), -1.0
            else:
                alpha, beta = 2 / after, 1 / after - 1
            half, offset = ((before - 1) / 2, 0.0) if self.align_corners else (before / 2, -0.5)
            f, t = float(factor), float(shift)
            # f·beta + 1 summed so that an axis theta leaves alone (f 1, t 0, as many pixels out as
            # in) starts at b = 0 exactly: (1/60 - 1) + 1 is 1/60 less 4e-17, a translation of 8e-16
            moved = (1 - f) + f / after if beta and not self.align_corners else f * beta + 1
            maps.append((axis, f, half * f * alpha, half * (moved + t) + offset))
        return maps

    def metadata(self, metadata: Metadata, header: Header, common: Common) -> Metadata:
        return _resolution_scaled(self, metadata, header, common)

    def _thetas(self, shape: tuple[int, ...]) -> np.ndarray:
        """One matrix per image of an (N, C, ...) result's ``shape``: the one given for all, or the N given."""
        import numpy as np

        theta = self.theta.of_rank(len(shape) - 2)
        return np.broadcast_to(theta, (shape[0], *theta.shape[1:])) if theta.shape[0] == 1 else theta

    def _warp(self, data: np.ndarray, theta: np.ndarray, result: np.ndarray, threads: int | None) -> None:
        """(N, C, [D,] H, W) ``data`` warped into ``result``, a slab of output rows (along H) at a
        time (where the grid is made, it is made a slab at a time)."""
        import math

        from geomcli.ops.grid_sample import affine_grid_sample

        n, _, *lengths = result.shape
        height = lengths[-2]
        fill = 0 if self.fill is None else parse_fill(self.fill, data.dtype)
        # a row of the grid: (x, y[, z]) at each point of W, times D for a volume's
        row_bytes = n * math.prod(lengths[:-2]) * lengths[-1] * len(lengths) * theta.dtype.itemsize
        step = max(1, self.SLAB_GRID_BYTES // max(1, row_bytes))
        for start in range(0, height, step):
            rows = slice(start, min(height, start + step))
            affine_grid_sample(data, theta, result.shape, self.mode, self.padding_mode, self.align_corners, fill=fill,
                               threads=threads, out=result[..., rows, :], rows=rows)

    def _onnx_output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        from geomcli.ops.affine_grid import affine_grid_output_shape

        n, channels, *lengths = shape
        spatial = len(lengths)
        theta = self.theta.of_rank(spatial)
        if theta.shape[0] not in (1, n):
            things = "volume" if spatial == 3 else "image"
            raise GeomError(f"theta holds {theta.shape[0]} matrices ({spatial}-D: {spatial * (spatial + 1)} numbers "
                            f"each) for {n} {things}{'s' if n != 1 else ''}; give one, or one per {things}")
        if self.size is not None and len(self.size) != spatial:
            raise GeomError(f"--size gives {len(self.size)} lengths; a {spatial}-D warp takes "
                            f"{'H,W' if spatial == 2 else 'D,H,W'}")
        out_lengths = self.size or tuple(lengths)
        affine_grid_output_shape((n, *theta.shape[1:]), (n, channels, *out_lengths))
        return n, channels, *out_lengths


def _sampled_axes(shape: tuple[int, ...], layout: str | None, volume: bool = False) -> tuple[int, ...]:
    """The axes GridSample places its output pixels along, in a file of this layout: H and W (a
    TIFF's Y and X; and Z for a ``volume``), or D1..Dr of an (N, C, D1, ..., Dr) tensor of no named layout."""
    from geomcli.engine import layout as layouts

    return tuple(range(2, len(shape))) if layout is None else layouts.spatial_axes(layout, volume)


def _warp_layout(shape: tuple[int, ...], common: Common, from_file: str | None, volume: bool = False,
                 axes: str | None = None) -> str | None:
    """The layout warp reads an array in: --layout, the file's, HW or NCHW by rank (warped in
    2-D); None for a rank-5 tensor named by no layout, (N, C, D, H, W), warped in 3-D. A
    ``volume`` (--volume) is a layout with a Z axis (a TIFF's ``axes`` where its layout reads its
    Z as N), or that rank-5 tensor; any other is an OptionFault (exit 2)."""
    from geomcli.engine import layout as layouts

    if len(shape) == 5 and common.layout is None and from_file is None:
        return None
    layout = layouts.resolve_layout(shape, common.layout, from_file)
    return layouts.with_z(layouts.z_named(layout, axes, common.layout) if volume else layout, shape, volume)


def _onnx_shape(shape: tuple[int, ...], layout: str | None, volume: bool = False) -> tuple[int, ...]:
    from geomcli.engine import layout as layouts

    return shape if layout is None else layouts.to_nchw_shape(shape, layout, volume)


def _from_onnx(result: np.ndarray, layout: str, batch: tuple[int, ...] | None, volume: bool = False) -> np.ndarray:
    from geomcli.engine import layout as layouts

    return layouts.from_nchw(result, layout, batch, volume)


def _sampled_shape(operation: GridSample | Warp, header: Header, common: Common, layout: str | None,
                   volume: bool = False) -> tuple[int, ...]:
    """What grid-sample or warp makes of a file of this header read in ``layout`` (a z-stack as
    one ``volume``), checked as the kernel checks it: the shapes, --max-pixels, the mode and the
    fill against the dtype."""
    from geomcli.engine import layout as layouts

    with layouts.in_file_terms(header.shape, layout, as_nchw=True, volume=volume):
        shape = operation._onnx_output_shape(_onnx_shape(header.shape, layout, volume))
    output = _from_onnx_shape(shape, layout, _batch(header.shape, layout, volume), volume)
    check_size(output, common)
    _check_mode(operation.mode, header.dtype)
    if operation.fill is not None:
        _sampled_fill(operation.fill, header.dtype)
    return output


def _check_mode(mode: str, dtype: np.dtype) -> None:
    """A --mode the file's dtype cannot take (bool: nearest only), found from its header as
    grid_sample judges it."""
    from geomcli.ops.grid_sample import check_mode

    check_mode(mode, dtype)


def _sampled_fill(text: str, dtype: np.dtype) -> np.ndarray:
    """What a tap outside reads in data of ``dtype`` (a 0-d array), or the refusal of a --fill
    the dtype cannot hold, found from a file's header as grid_sample judges it."""
    from geomcli.ops.grid_sample import check_fill

    return check_fill(parse_fill(text, dtype), dtype)


_RESIZE_DEFAULTS: dict[str, Any] = {
    "mode": "nearest", "coordinate_transformation_mode": "half_pixel", "cubic_coeff_a": -0.75,
    "exclude_outside": False, "extrapolation_value": 0.0, "keep_aspect_ratio_policy": "stretch",
    "nearest_mode": "round_prefer_floor", "antialias": False,
}


@dataclass(frozen=True)
class Resize(Operation):
    """Resize on a file, in the file's own layout: on an image (or a tensor whose layout names H
    and W) two --sizes or --scales name H and W, as crop-pad's --shape does; on a tensor they
    name every axis unless --axes. An image's DPI follows its pixels: twice as many per inch when
    W doubles."""

    sizes: tuple[int, ...] | None = None
    scales: tuple[float, ...] | None = None
    axes: tuple[int, ...] | None = None
    roi: tuple[float, ...] | None = None
    mode: str = "nearest"
    coordinate_transformation_mode: str = "half_pixel"
    cubic_coeff_a: float = -0.75
    exclude_outside: bool = False
    extrapolation_value: float = 0.0
    keep_aspect_ratio_policy: str = "stretch"
    nearest_mode: str = "round_prefer_floor"
    antialias: bool = False
    command: ClassVar[str] = "resize"

    def parameters(self, dtype: np.dtype | None = None) -> dict[str, Any]:
        """What was given, and the attributes not at the spec's defaults (ONNX Resize-19's); not
        an option this resize ignores (:meth:`unused_options` warns of it): the record is of the
        run, as for a reader or writer option a file's formats do not use."""
        ignored = self._ignored()
        given = {"sizes": self.sizes, "scales": self.scales, "axes": self.axes, "roi": self.roi}
        attributes = {name: getattr(self, name) for name in _RESIZE_DEFAULTS
                      if getattr(self, name) != _RESIZE_DEFAULTS[name] or name == "mode"}
        return {**{name: list(value) for name, value in given.items() if value is not None and name not in ignored},
                **{name: value for name, value in attributes.items() if name not in ignored}}

    def check(self) -> None:
        """A PlanError (a usage error, exit 2, before any file is read) for options that are
        wrong whatever the files: sizes below 1, scales not finite and positive, antialias or
        exclude_outside with nearest, tf_crop_and_resize without a roi, ..."""
        from geomcli.ops.resize import check_resize_arguments

        _check_axes_count("--sizes" if self.sizes is not None else "--scales", self.sizes or self.scales, self.axes)
        attributes = {name: getattr(self, name) for name in _RESIZE_DEFAULTS}
        try:
            check_resize_arguments(self.roi, self.scales, self.sizes, **attributes)
        except GeomError as error:
            raise PlanError(str(error)) from error

    def mixed_values(self) -> str | None:
        return None if self.mode == "nearest" else f"--mode {self.mode}"

    def output_shape(self, header: Header, common: Common) -> tuple[int, ...]:
        from geomcli.ops.resize import check_resize_mode, resize_output_shape

        check_resize_mode(self.mode, header.dtype)  # bool and strings: nearest only
        self._check_extrapolation(header.dtype)
        axes = self._axes(header.shape, common, header.layout)
        shape = resize_output_shape(header.shape, self.scales, self.sizes, axes=axes,
                                    keep_aspect_ratio_policy=self.keep_aspect_ratio_policy)  # type: ignore[arg-type]
        check_size(shape, common)
        return shape

    def apply(self, loaded: Loaded, common: Common, allocate: Allocate | None = None) -> np.ndarray:
        from geomcli.ops.resize import resize

        self.output_shape(header_of(loaded), common)  # --max-pixels, before the work
        axes = self._axes(loaded.data.shape, common, loaded.layout)
        return resize(loaded.data, self.roi, self.scales, self.sizes, axes=axes, threads=common.threads,
                      **self._settings())

    def apply_window(self, loaded: Loaded, common: Common, window: tuple[slice, ...]) -> np.ndarray:
        """``window`` of this resize's result, making only what it holds where the kernel can
        (resize_window, the same bits): a chain's crop after it in one pass. The window is of the
        output shape the caller has worked out, and so checked (Chain._resized_and_cropped)."""
        from geomcli.ops.resize import resize_window

        axes = self._axes(loaded.data.shape, common, loaded.layout)
        return resize_window(loaded.data, window, self.roi, self.scales, self.sizes, axes=axes,
                             threads=common.threads, **self._settings())

    def apply_chunked(self, data: Any, layout: str | None, common: Common) -> Any:
        """On chunks whole along every axis from the first resize changes (or is asked about under
        a policy or a roi); the axes before keep their chunks, each block resized alike."""
        from geomcli.engine import chunked
        from geomcli.ops.resize import resize, resize_changed_axes, resize_output_shape

        self._check_extrapolation(data.dtype)
        axes = self._axes(data.shape, common, layout)
        listed = range(data.ndim) if axes is None else [axis % data.ndim for axis in axes]
        given = self.sizes if self.sizes is not None else self.scales
        settings = self._settings()
        output = resize_output_shape(data.shape, self.scales, self.sizes, axes=axes,
                                     keep_aspect_ratio_policy=self.keep_aspect_ratio_policy)  # type: ignore[arg-type]
        lengthened = next((axis for axis in range(data.ndim) if output[axis] != data.shape[axis]), None)
        if lengthened is not None:
            # planning an axis takes memory by its output length (a 10**9-long one: gigabytes), and a
            # task holds every axis from the first resized one whole: those planes are checked first
            chunked.check_planes(data, lengthened, output[lengthened:], common.max_pixels)
        changed = resize_changed_axes(data.shape, self.roi, self.scales, self.sizes, axes=axes, **settings)
        # a listed axis splits where each block's own entry is as plainly nothing: its own length
        # (sizes, stretched) or 1 (scales), without a roi that could move it
        plain = (self.keep_aspect_ratio_policy == "stretch"
                 and self.coordinate_transformation_mode != "tf_crop_and_resize")
        kept = {axis for axis, value in zip(listed, given or ())
                if plain and axis not in changed and value == (1 if self.scales is not None else data.shape[axis])}
        first = next((axis for axis in range(data.ndim) if axis in changed or (axis in listed and axis not in kept)),
                     data.ndim)

        def resized(block: np.ndarray, start: int) -> np.ndarray:
            sizes = None if self.sizes is None else [block.shape[axis] if axis < first else size
                                                     for axis, size in zip(listed, self.sizes)]
            return resize(block, self.roi, self.scales, sizes, axes=axes, threads=1, **settings)  # dask: side by side

        return chunked.by_planes(data, resized, first, output[first:], common.max_pixels)

    def scaled(self, scale: tuple[float, ...], header: Header, common: Common) -> tuple[float, ...]:
        """The pixel size along each axis times the input pixels one output pixel steps over
        (resize_coordinate_map: x_in = a·x_out + b, so a), as :meth:`shifted` places the first:
        then every output pixel lies where it was sampled (align_corners: (in - 1)/(out - 1);
        a scale that does not divide the length: 1/scale). An axis resized to one pixel has no
        step (a = 0): there its length in over its length out, the extent it shows. A roi whose
        start is past its end flips the axis: a size is |a|."""
        if len(scale) != len(header.shape):
            return scale
        output = self.output_shape(header, common)
        return tuple(value * (abs(float(a)) if a else length / out if out else 1.0)
                     for value, (a, _), length, out in zip(scale, self._lines(header, common), header.shape, output,
                                                           strict=True))

    def shifted(self, translation: tuple[float, ...], scale: tuple[float, ...], header: Header,
                common: Common) -> tuple[float, ...] | None:
        """Moved to where the first output pixel is sampled in the input (resize_coordinate_map:
        x_in = a·x_out + b, so b input pixels) times the pixel size; NaN along an axis it flips (a
        roi whose start is past its end), whose pixels run the other way."""
        lines = self._lines(header, common)
        if not len(translation) == len(scale) == len(header.shape):
            return None
        return tuple(math.nan if a < 0 else value + float(b) * size
                     for value, size, (a, b) in zip(translation, scale, lines, strict=True))

    def _lines(self, header: Header, common: Common) -> tuple[tuple[Fraction, Fraction], ...]:
        """Per axis, (a, b) with x_in = a·x_out + b: where each output pixel is sampled."""
        from geomcli.ops.resize import resize_coordinate_map

        axes = self._axes(header.shape, common, header.layout)
        return resize_coordinate_map(header.shape, self.roi, self.scales, self.sizes, axes=axes, **self._settings())

    def _check_extrapolation(self, dtype: np.dtype) -> None:
        """The refusal of an --extrapolation-value data of ``dtype`` cannot hold, as --fill's
        (NaN or 1e10 on uint8): the kernel converts it as it converts interpolated values, which
        on a file would write 0 or 255 in silence. Its float32 value, the one the kernel takes."""
        if self.coordinate_transformation_mode != "tf_crop_and_resize" or self.extrapolation_value == 0:
            return  # ignored (a warning says so), or 0, which every dtype holds (strings have none)
        import numpy as np

        from geomcli.ops.grid_sample import check_fill

        with np.errstate(over="ignore"):
            value = float(np.float32(self.extrapolation_value))
        check_fill(value, dtype, name="resize: extrapolation_value")

    def unused_options(self) -> list[str]:
        return list(self._ignored().values())

    def _ignored(self) -> dict[str, str]:
        """Each option given that the spec ignores with the others given, by its parameter's
        name: the warning it gets."""
        mode, transform = self.mode, self.coordinate_transformation_mode
        ignored: dict[str, str] = {}
        if self.cubic_coeff_a != _RESIZE_DEFAULTS["cubic_coeff_a"] and mode != "cubic":
            ignored["cubic_coeff_a"] = f"--cubic-coeff-a is for --mode cubic, not {mode}; ignored"
        if self.nearest_mode != _RESIZE_DEFAULTS["nearest_mode"] and mode != "nearest":
            ignored["nearest_mode"] = f"--nearest-mode is for --mode nearest, not {mode}; ignored"
        if transform != "tf_crop_and_resize":
            if self.roi is not None:
                ignored["roi"] = f"--roi is for tf_crop_and_resize, not {transform}; ignored"
            if self.extrapolation_value != _RESIZE_DEFAULTS["extrapolation_value"]:
                ignored["extrapolation_value"] = (f"--extrapolation-value is for tf_crop_and_resize, not {transform}; "
                                                  "ignored")
        if self.scales is not None and self.keep_aspect_ratio_policy != "stretch":
            ignored["keep_aspect_ratio_policy"] = "--keep-aspect-ratio-policy is for --sizes, not --scales; ignored"
        return ignored

    def cautions(self, header: Header, common: Common) -> list[str]:
        """Channels resized as pixels are (--sizes 50,50,1 on an RGB image: the nearest channel)."""
        from geomcli.engine import layout as layouts

        try:
            channel = layouts.resolve_layout(header.shape, common.layout, header.layout).find("C")
            output = self.output_shape(header, common)
        except GeomError:
            return []  # no layout, or options the run refuses
        if channel < 0 or output[channel] == header.shape[channel]:
            return []
        return [f"the channel axis is resized ({header.shape[channel]} -> {output[channel]}): channels are "
                "resampled as pixels are"]

    def _settings(self) -> dict[str, Any]:
        """The attributes, as resize takes them."""
        return {name: getattr(self, name) for name in _RESIZE_DEFAULTS}

    def metadata(self, metadata: Metadata, header: Header, common: Common) -> Metadata:
        return _resolution_scaled(self, metadata, header, common)

    def _axes(self, shape: tuple[int, ...], common: Common, from_file: str | None) -> tuple[int, ...] | None:
        given = self.sizes if self.sizes is not None else self.scales
        count = 0 if given is None else len(given)
        option = "--sizes" if self.sizes is not None else "--scales"
        return _crop_pad_axes((0,) * count, self.axes, shape, common.layout, from_file, option)


def _resolution_scaled(operation: Operation, metadata: Metadata, header: Header, common: Common) -> Metadata:
    """The resolution (pixels per unit) along x and y over the pixel size's change there, as
    ``operation.scaled`` makes it."""
    from geomcli.engine import layout as layouts

    if metadata.resolution is None or len(header.shape) < 2:
        return metadata
    try:
        height, width = layouts.spatial_axes(layouts.resolve_layout(header.shape, common.layout, header.layout))
    except GeomError:
        return metadata
    size = operation.scaled((1.0,) * len(header.shape), header, common)
    x, y = metadata.resolution
    if size is None:
        dpi, per = metadata.dpi, f"pixels per {metadata.unit}" if metadata.unit else "pixels (no unit)"
        what = metadata.pixel_size_named() or (f"DPI ({dpi[0]:.0f} x {dpi[1]:.0f})" if dpi
                                               else f"resolution ({x:g} x {y:g} {per})")
        return metadata._replace(resolution=None, dropped=(*metadata.dropped, f"{what} of {sizeless(operation)}"))
    return metadata._replace(resolution=(x / size[width], y / size[height]))


def sizeless(operation: Operation) -> str:
    """The output whose pixels have no size per axis (Operation.scaled None), as a dropped field names it."""
    return f"{operation.command}'s output (its pixels have no size per axis: a grid, a rotation or shear)"


def header_of(loaded: Loaded | Picture) -> Header:
    """What a file's header would say of what was read from it."""
    from geomcli.io import Header

    return Header(loaded.format, tuple(loaded.shape), loaded.dtype, loaded.pages,  # type: ignore[arg-type]
                  loaded.file_size, loaded.layout, loaded.metadata.axes, loaded.metadata.palette is not None)


@dataclass(frozen=True)
class Chain(Operation):
    """Several operations on one file: one read, the steps in memory, one write; metadata carried
    through every step. Each step reads the one before it in that step's output layout; only the
    last may write into a memory-mapped output."""

    steps: tuple[Operation, ...]
    # each step's header for the headers of files seen (Chain._headers), kept with the steps they are of
    walked: dict[Any, tuple[Header, ...]] = field(default_factory=dict, compare=False, repr=False)
    command: ClassVar[str] = "chain"

    def takes_rank_layout(self) -> bool:
        return any(step.takes_rank_layout() for step in self.steps)

    def parameters(self, dtype: np.dtype | None = None) -> dict[str, Any]:
        # every step keeps the dtype
        return {"steps": [{"command": step.command, **step.parameters(dtype)} for step in self.steps]}

    def output_shape(self, header: Header, common: Common) -> tuple[int, ...]:
        return self._headers(header, common)[-1].shape

    def writes_into(self, header: Header, common: Common) -> bool:
        # the last step's (a crop-pad fused with the resize before it writes into it too)
        step, step_header, step_common = self._walk(header, common)[-1]
        return step.writes_into(step_header, step_common)

    def unused_options(self) -> list[str]:
        return [f"{self._named(index)}: {warning}" for index, step in enumerate(self.steps)
                for warning in step.unused_options()]

    def notes(self) -> list[str]:
        return [f"{self._named(index)}: {note}" for index, step in enumerate(self.steps) for note in step.notes()]

    def mixed_values(self) -> str | None:
        return next((f"{self._named(index)}'s {mixed}" for index, step in enumerate(self.steps)
                     if (mixed := step.mixed_values()) is not None), None)

    def files_read(self) -> tuple[tuple[str, str], ...]:
        return tuple((f"{step.command} {option}", path) for step in self.steps for option, path in step.files_read())

    def stdin_option(self) -> str | None:
        return next((f"{step.command} {option}" for step in self.steps if (option := step.stdin_option())), None)

    def cautions(self, header: Header, common: Common) -> list[str]:
        return [f"{self._named(index)}: {warning}"
                for index, (step, step_header, step_common) in enumerate(self._walk(header, common))
                for warning in step.cautions(step_header, step_common)]

    def _named(self, index: int) -> str:
        """Step ``index`` as its warnings and notes name it: by its command, which names one step,
        else by its number too, as its errors are (two resize steps' ignored --roi read alike)."""
        command = self.steps[index].command
        if sum(step.command == command for step in self.steps) == 1:
            return command
        return f"step {index + 1} ({command})"

    def trace(self, header: Header, common: Common) -> list[dict[str, Any]]:
        """Every step's command, parameters and output shape, for the file's report."""
        return [{"command": step.command, **step.parameters(header.dtype), "output_shape": list(after.shape)}
                for (step, _, _), after in zip(self._walk(header, common), self._headers(header, common)[1:])]

    def trace_known(self, header: Header, common: Common) -> list[dict[str, Any]]:
        from geomcli.engine import layout as layouts

        steps, dtype, refused = [], header.dtype, False
        for step in self.steps:
            shape = None
            if not refused:
                try:
                    shape = step.output_shape(header, common)
                except GeomError:
                    refused = True  # this step's fault: the report's error says it
            if shape is not None:
                layout = layouts.written_layout(header.shape, shape, common.layout, header.layout)
                header, common = header._replace(shape=shape, layout=layout), _next_common(common)
            steps.append({"command": step.command, **step.parameters(dtype),
                          "output_shape": None if shape is None else list(shape)})
        return steps

    def apply(self, loaded: Loaded, common: Common, allocate: Allocate | None = None) -> np.ndarray:
        """Each step on the one before's result; a resize and a crop after it in one pass where
        the crop only crops (:meth:`_resized_and_cropped`)."""
        from geomcli.engine import layout as layouts

        index = 0
        while index < len(self.steps):
            result = self._resized_and_cropped(index, loaded, common)
            taken = 1 if result is None else 2
            last = index + taken == len(self.steps)
            if result is None:
                with _in_step(index + 1, self.steps[index]):
                    result = self.steps[index].apply(loaded, common, allocate if last else None)
            elif last and allocate is not None and (out := allocate(result.shape, result.dtype)) is not None:
                out[...] = result
                result = out
            index += taken
            layout = layouts.written_layout(loaded.shape, result.shape, common.layout, loaded.layout)
            loaded = loaded._replace(data=result, layout=layout)
            common = _next_common(common)
        return loaded.data

    def _resized_and_cropped(self, index: int, loaded: Loaded, common: Common) -> np.ndarray | None:
        """Step ``index`` if it is a resize and the next step a crop-pad that only crops, in one:
        only the outputs the crop keeps are made. None for any other pair.

        Why: the ImageNet recipe (a 375x500 photo to 256x341, then its centre 224²) makes 43% fewer
        outputs; the resize was the biggest part of chain's time per photo (benchmarks/README.md)."""
        from geomcli.engine import layout as layouts

        step, crop = self.steps[index], self.steps[index + 1] if index + 1 < len(self.steps) else None
        if not (isinstance(step, Resize) and isinstance(crop, CropPad)):
            return None
        header = header_of(loaded)
        with _in_step(index + 1, step):
            resized = step.output_shape(header, common)
        layout = layouts.written_layout(header.shape, resized, common.layout, header.layout)
        with _in_step(index + 2, crop):
            window = crop.crop_window(resized, layout, _next_common(common))
        if window is None:
            return None
        with _in_step(index + 1, step):
            return step.apply_window(loaded, common, window)

    def apply_chunked(self, data: Any, layout: str | None, common: Common) -> Any:
        """Every step's graph on the one before: one read, one write, still chunk by chunk."""
        from geomcli.engine import layout as layouts

        for step in self.steps:
            result = step.apply_chunked(data, layout, common)
            layout = layouts.written_layout(data.shape, result.shape, common.layout, layout)
            data, common = result, _next_common(common)
        return data

    def metadata(self, metadata: Metadata, header: Header, common: Common) -> Metadata:
        for index, (step, step_header, step_common) in enumerate(self._walk(header, common)):
            before = len(metadata.dropped)
            metadata = step.metadata(metadata, step_header, step_common)
            # what a step dropped, said of that step as its warnings name it (two warps read alike)
            said = tuple(text.replace(f"{step.command}'s output", f"{self._named(index)}'s output")
                         for text in metadata.dropped[before:])
            metadata = metadata._replace(dropped=(*metadata.dropped[:before], *said))
        return metadata

    def scaled(self, scale: tuple[float, ...], header: Header, common: Common) -> tuple[float, ...] | None:
        for step, step_header, step_common in self._walk(header, common):
            scaled = step.scaled(scale, step_header, step_common)
            if scaled is None:
                return None
            scale = scaled
        return scale

    def shifted(self, translation: tuple[float, ...], scale: tuple[float, ...], header: Header,
                common: Common) -> tuple[float, ...] | None:
        for step, step_header, step_common in self._walk(header, common):
            moved = step.shifted(translation, scale, step_header, step_common)
            if moved is None:
                return None
            scaled = step.scaled(scale, step_header, step_common)
            if scaled is None:
                return None
            translation, scale = moved, scaled
        return translation

    def translation_lost(self, translation: tuple[float, ...], scale: tuple[float, ...], header: Header,
                         common: Common) -> tuple[float, ...]:
        # each axis's value as the step given it last before it was lost (NaN after a flip, or every
        # axis where a step says nothing of where its pixels lie): that step's, not the input's
        lost = list(translation)
        for step, step_header, step_common in self._walk(header, common):
            lost = [given if not math.isnan(given) else held for given, held in zip(translation, lost, strict=True)]
            moved = step.shifted(translation, scale, step_header, step_common)
            scaled = step.scaled(scale, step_header, step_common)
            if moved is None or scaled is None:
                break
            translation, scale = moved, scaled
        return tuple(lost)

    def scaled_apart(self, scale: tuple[float, ...], header: Header, common: Common) -> tuple[float, ...]:
        # each step's, or its scale apart where it has no size per axis: a resize of Z then a rotation scales Z
        for step, step_header, step_common in self._walk(header, common):
            scaled = step.scaled(scale, step_header, step_common)
            scale = step.scaled_apart(scale, step_header, step_common) if scaled is None else scaled
        return scale

    def shifted_apart(self, translation: tuple[float, ...], scale: tuple[float, ...], header: Header,
                      common: Common) -> tuple[float, ...]:
        for step, step_header, step_common in self._walk(header, common):
            moved = step.shifted(translation, scale, step_header, step_common)
            scaled = step.scaled(scale, step_header, step_common)
            translation = step.shifted_apart(translation, scale, step_header, step_common) if moved is None else moved
            scale = step.scaled_apart(scale, step_header, step_common) if scaled is None else scaled
        return translation

    def sampled_axes(self, header: Header, common: Common) -> tuple[int, ...]:
        """The axes a step of no size per axis (a rotation) samples; the others' sizes and
        positions are every step's (:meth:`scaled_apart`): a chain of warp and crop-pad of a
        z-stack keeps its z as warp alone does, and a resize of z before or after a rotation scales
        it. (Every step keeps the rank.)"""
        sampled: set[int] = set()
        for step, step_header, step_common in self._walk(header, common):
            ones, zeros = (1.0,) * len(step_header.shape), (0.0,) * len(step_header.shape)
            if step.scaled(ones, step_header, step_common) is None or step.shifted(zeros, ones, step_header,
                                                                                    step_common) is None:
                sampled.update(step.sampled_axes(step_header, step_common))
        return tuple(sorted(sampled))

    def _walk(self, header: Header, common: Common) -> list[tuple[Operation, Header, Common]]:
        """Each step with the header of what it reads and the options it runs with."""
        headers = self._headers(header, common)
        commons = [common] + [_next_common(common)] * (len(self.steps) - 1)
        return list(zip(self.steps, headers, commons))

    def __getstate__(self) -> dict[str, Any]:
        """The chain as pickled for a worker: its steps, not the headers walked (``walked``), which
        this process adds to as it does files itself while a worker is started from another
        thread: pickling it then failed, 'dictionary changed size during iteration'."""
        return {**self.__dict__, "walked": {}}

    def _headers(self, header: Header, common: Common) -> tuple[Header, ...]:
        """The header of the input, then of each step's result (of no file size): worked out once
        for files of one shape (in ``walked``), whose checks, reports and metadata each walk the
        steps (a resize's sizing is in exact fractions)."""
        shape_only = header._replace(file_size=None)
        try:
            walked = self.walked.get((shape_only, common))
        except TypeError:  # options that are no key (a --storage-option's JSON): no memo
            return (header, *self._walk_headers(shape_only, common)[1:])
        if walked is None:
            walked = self._walk_headers(shape_only, common)
            if len(self.walked) >= _WALKS_KEPT:
                self.walked.clear()
            self.walked[shape_only, common] = walked
        return (header, *walked[1:])

    def _walk_headers(self, header: Header, common: Common) -> tuple[Header, ...]:
        from geomcli.engine import layout as layouts

        headers = [header]
        for number, step in enumerate(self.steps, 1):
            with _in_step(number, step):
                shape = step.output_shape(header, common)
            layout = layouts.written_layout(header.shape, shape, common.layout, header.layout)
            header = header._replace(shape=shape, layout=layout)
            headers.append(header)
            common = _next_common(common)
        return tuple(headers)


# the shapes of files a chain keeps its steps' headers for: a batch of photos has a few sizes
_WALKS_KEPT = 64


@contextlib.contextmanager
def _in_step(number: int, step: Operation) -> Iterator[None]:
    """A step's GeomError named by the step: its shapes are those of the step's input, not the
    file's (a try-out read "--shape has 4 values for an input of shape (64, 64, 3)" of a 300x451
    file, from a chain's second crop)."""
    try:
        yield
    except GeomError as error:
        if type(error) is not GeomError:
            raise
        named = str(error).startswith(step.command.replace("-", "_") + ":")  # by its kernel already
        raise GeomError(f"step {number}{'' if named else f' ({step.command})'}: {error}") from error


def _next_common(common: Common) -> Common:
    """The options a later step of a chain runs with: --layout named the input's axes, and the
    step before has said its result's."""
    import dataclasses

    return dataclasses.replace(common, layout=None) if common.layout is not None else common
