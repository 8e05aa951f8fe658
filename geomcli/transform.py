"""One file through an operator: read, convert the layout, run the kernel, write, report.

The engine under the commands, for a one-file ``-o`` run (geomcli.cli) and for every file of a
batch (geomcli.batch, in worker processes too). Failures a user can cause end up in the file's
``Report`` (``finish`` shows it and gives the exit code); bugs keep their traceback.

Each operation (``CropPad``, ``blocks``) takes the ``Loaded`` file and returns the result in the
file's layout; big results go slab by slab into a memory-mapped output that ``allocate`` gives.
CropPad also takes a plain 8-bit image as an ``io.Picture`` (read without numpy) and returns one.
Each has a shape function (``CropPad.output_shape``, ``blocks_shape``) that says from a header alone
what the operation would make, or refuse, for ``--dry-run``.

Only the standard library loads at import time; numpy and the backends load when a file is done.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, Protocol, overload

import click

from geomcli.constants import EXIT_FAILED, plain_number
from geomcli.errors import GeomError, StdoutError

if TYPE_CHECKING:
    from typing import TypeAlias

    import numpy as np

    from geomcli.cli import Common, Fidelity
    from geomcli.io import Header, Loaded, Metadata, Picture, WriteOptions
    from geomcli.summary import Report

    # (loaded, *, common, allocate) -> the result: an array, or a Picture for a Picture (CropPad)
    Operation: TypeAlias = Callable[..., np.ndarray | Picture]

class FormatConflictError(GeomError):
    """--format names another format than the output's extension."""


def output_format(path: str, given: str | None) -> str:
    """The format of the output ``path``: its extension's, or ``given`` (--format) for ``-``, a name
    without an extension or one geomcli does not know; a GeomError when the two disagree."""
    from geomcli import io

    fmt = io.format_for_path(path, given)
    if given is None or path == "-" or not os.path.splitext(path)[1]:
        return fmt
    try:
        named = io.format_for_path(path)
    except GeomError:
        return fmt  # an extension of no format: --format decides
    if named != fmt:
        raise FormatConflictError(f"--format {fmt} contradicts the extension of {path} ({named})")
    return fmt


def write_options(common: Common) -> WriteOptions:
    """How the output is encoded: --compress-level, --quality, --compression, --threads."""
    from geomcli import io

    fidelity = common.fidelity
    return io.WriteOptions(fidelity.compress_level, fidelity.quality, fidelity.compression, common.threads)


def check_size(shape: tuple[int, ...], common: Common) -> None:
    """Refuse an output of more elements than --max-pixels, before it is allocated."""
    from geomcli import io

    io.check_size(shape, common.max_pixels, f"the output {shape}")


# ---- reporting ----------------------------------------------------------------------------


def describe(error: GeomError | OSError) -> str:
    """``<path>: <reason>``: our messages name their file; an OSError names it apart."""
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.filename}: {error.strerror or error}"
    return str(error)


# why a batch skips an input whose output exists, found when planned or when the output was placed
OUTPUT_EXISTS = "the output exists (--no-clobber)"


@contextmanager
def reporting(report: Report, common: Common) -> Iterator[Report]:
    """Time the work on one file and record a failure in its report instead of raising; an output
    that no_replace (-n) found made meanwhile marks it skipped (see :func:`skipped`)."""
    started = time.perf_counter()
    try:
        yield report
    except BrokenPipeError:
        raise  # the reader of stdout has gone: not this file's failure (see cli._Group)
    except (GeomError, OSError) as error:
        if _output_existed(error):
            skipped(report, OUTPUT_EXISTS)
        elif common.debug:
            raise
        else:
            report.status, report.error = "error", describe(error)
    finally:
        report.seconds = time.perf_counter() - started


def _output_existed(error: BaseException) -> bool:
    from geomcli.io._atomic import OutputExistsError

    return isinstance(error, OutputExistsError)


def skipped(report: Report, reason: str) -> None:
    """Mark a file skipped when its output was found made, after it was read and transformed:
    nothing was written, so no warning about what was written stays (as a skip when planned)."""
    report.status, report.error, report.value_range = "skipped", None, None
    report.warnings.clear()
    report.notes.append(reason)


def finish(report: Report, common: Common, data_on_stdout: bool) -> int:
    """Show one file's outcome; the exit code it asks for."""
    from geomcli import summary

    if report.status != "ok":
        echo_stderr(f"Error: {report.error}")
    elif not common.quiet and not common.json:
        for warning in report.warnings:
            echo_stderr(f"Warning: {report.output}: {warning}")
        summary.show(report)
    if common.json:
        if data_on_stdout:
            click.echo(report.to_json(), err=True)
        else:
            echo_stdout(report.to_json())
    return 0 if report.status == "ok" else EXIT_FAILED


def check_stdout() -> None:
    """Text is asked for on stdout: a closed one ends the run (callers check before any work)."""
    import sys

    if sys.stdout is None:
        raise StdoutError("<stdout>: standard output is closed")


def echo_stdout(text: str) -> None:
    """A line of text on standard output (info lines, JSON records), control characters escaped
    (summary.printable): a closed or failing stdout ends the run with an error, never loses the
    text in silence."""
    from geomcli.summary import printable

    check_stdout()
    try:
        click.echo(printable(text))
    except BrokenPipeError:
        raise
    except OSError as error:
        raise StdoutError(f"<stdout>: cannot write ({error.strerror or error})") from error


def echo_stderr(line: str) -> None:
    """A message line on standard error (Error:, Warning:, a batch's counts), control characters
    escaped (summary.printable): a file name in it cannot break the line or drive the terminal."""
    from geomcli.summary import printable

    click.echo(printable(line), err=True)


# ---- one file ---------------------------------------------------------------------------------


class Allocate(Protocol):
    """Where a big result goes: a memory-mapped output of this shape and dtype, or None (in RAM)."""

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype, /) -> np.ndarray | None: ...


class _OutputError(GeomError):
    """A failure to open the output, raised from inside an operation: its message names the output."""


def mapped_output(outputs: ExitStack, output: str, shape: tuple[int, ...], dtype: np.dtype,
                  output_format: str, layout: str | None = None) -> np.ndarray | None:
    """A memory-mapped output for a big result in ``layout`` (None: unknown), open until
    ``outputs`` closes (then renamed into place); None for a result that is written from RAM."""
    from geomcli import io

    if not io.maps_output(output, shape, dtype, format=output_format):
        return None
    try:
        return outputs.enter_context(io.open_output(output, shape, dtype, format=output_format, layout=layout))
    except GeomError as error:
        raise _OutputError(str(error)) from error  # it names the output already


def transform_file(command: str, input_path: str, output: str, output_format: str, common: Common,
                   parameters: dict[str, Any], operate: Operation) -> Report:
    """Read, transform and write one file; its report, with any failure in it.

    ``operate(loaded, common=..., allocate=...)`` makes the result; for a big output, ``allocate(shape,
    dtype)`` gives it a memory-mapped destination to write slab by slab (else None: in RAM).
    """
    from geomcli import io, summary

    report = summary.Report(command, input_path, output, parameters=parameters)
    with reporting(report, common), ExitStack() as outputs:
        fidelity = common.fidelity
        pictures = isinstance(operate, CropPad) and operate.takes_pictures(common, output_format)
        loaded = (io.read_picture if pictures else io.read_array)(
            input_path, max_pixels=common.max_pixels, auto_orient=fidelity.auto_orient, frames=fidelity.frames,
            series=fidelity.series, page=fidelity.page, mmap=maps_input(input_path))
        report.input_shape, report.input_dtype = list(loaded.shape), str(loaded.dtype)
        report.notes.extend(loaded.notes)
        report.warnings.extend(_unused_options(fidelity, loaded.format, output_format))
        mapped: list[np.ndarray] = []

        def allocate(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
            if _compresses(output_format, fidelity, loaded.metadata):
                return None  # a map holds raw bytes: a compressed output is encoded from RAM
            layout = written_layout(loaded.shape, shape, common.layout, loaded.layout)
            out = mapped_output(outputs, output, shape, dtype, output_format, layout)
            mapped.extend([] if out is None else [out])
            return out

        try:
            result = operate(loaded, common=common, allocate=allocate)
        except _OutputError:
            raise
        except GeomError as error:
            raise GeomError(f"{io.display_name(input_path)}: {error}") from error
        report.output_shape, report.output_dtype = list(result.shape), str(result.dtype)
        if mapped:
            # renamed into place as the ExitStack closes
            from geomcli import slabs

            assert not isinstance(result, io.Picture)  # only an array asks allocate for a map

            report.value_range = slabs.value_range(result)
            # (the compression is not compared: a compressed output is never mapped, see allocate)
            kept = _output_metadata(command, parameters, loaded.metadata, fidelity)
            if kept._replace(compression=None) != io.Metadata():
                report.warnings.append("a big output is written through a memory map, without metadata")
        else:
            report.warnings.extend(io.write_array(
                result, output, format=output_format, options=write_options(common),
                metadata=_output_metadata(command, parameters, loaded.metadata, fidelity),
                layout=written_layout(loaded.shape, result.shape, common.layout, loaded.layout)))
            report.value_range = (result.value_range() if isinstance(result, io.Picture)
                                  else summary.value_range(result))
    return report


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


def _output_metadata(command: str, parameters: dict[str, Any], metadata: Metadata, fidelity: Fidelity) -> Metadata:
    """The input's metadata as the output's: nothing but the compression with --strip; for
    space-to-depth, b times fewer pixels per unit (depth-to-space: b times more)."""
    if fidelity.strip:
        return metadata.kept()
    if command == "space-to-depth":
        return metadata.scaled(1 / parameters["blocksize"])
    if command == "depth-to-space":
        return metadata.scaled(parameters["blocksize"])
    return metadata


def _unused_options(fidelity: Fidelity, input_format: str, output_format: str) -> list[str]:
    """One warning for each encoder or reader option this file's formats do not use.
    (--compression on output other than TIFF is a usage error: io.refused_option.)"""
    unused = []
    if fidelity.quality is not None and output_format not in ("jpeg", "webp"):
        unused.append(f"--quality is for JPEG and WebP output, not {output_format.upper()}; ignored")
    if fidelity.compress_level is not None and output_format != "png":
        unused.append(f"--compress-level is for PNG output, not {output_format.upper()}; ignored")
    for name, value in (("--series", fidelity.series), ("--page", fidelity.page)):
        if value is not None and input_format != "tiff":
            unused.append(f"{name} is for TIFF input, not {input_format.upper()}; ignored")
    return unused


def _compresses(output_format: str, fidelity: Fidelity, metadata: Metadata) -> bool:
    """Whether the output is to be compressed: --compression, or else a TIFF's own compression
    carried to a TIFF output. (--compression on another format is refused: io.refused_option.)"""
    if fidelity.compression is not None:
        return fidelity.compression != "none"
    return output_format == "tiff" and metadata.compression not in (None, "none")


# Inputs smaller than this are read into memory, not mapped: a small file truncated by another
# process while it is being transformed then costs nothing, where a mapped one would raise SIGBUS.
MAP_INPUT_BYTES = 64 << 20


def maps_input(path: str) -> bool:
    """Whether to let io map ``path`` (a big uncompressed .npy/.tiff), not read it into memory."""
    try:
        return path != "-" and os.stat(path).st_size >= MAP_INPUT_BYTES
    except OSError:
        return False  # the read says why


def info(path: str, *, max_pixels: int, frames: str | None) -> dict[str, Any]:
    """What ``geomcli info`` says of one file, as a JSON-ready record (status ``error`` on failure).

    The file is read once (a FIFO has nothing left for a second read): the read tells its page count
    and size too. A mapped input's value range is taken slab by slab.
    """
    import numpy as np

    from geomcli import io, summary

    try:
        loaded = io.read_array(path, max_pixels=max_pixels, frames=frames, mmap=maps_input(path))
        data = loaded.data
        if isinstance(data, np.memmap):
            from geomcli import slabs

            value_range = slabs.value_range(data)
        else:
            value_range = summary.value_range(data)
        return {"input": path, "format": loaded.format, "shape": list(data.shape), "dtype": str(data.dtype),
                "layout": loaded.layout, "pages": loaded.pages, "value_range": value_range,
                "file_size": loaded.file_size, "status": "ok", "error": None}
    except (GeomError, OSError) as error:
        return {"input": path, "status": "error", "error": describe(error)}


# ---- the operations -----------------------------------------------------------------------


class CropPad:
    """CenterCropPad on a file; --shape H,W works on the H and W axes of an image, or of a tensor
    in --layout or the layout its file names. The pad value is --fill, else the dtype's zero.

    A plain 8-bit image (io.Picture) is cropped and padded by Pillow itself, without numpy: the
    same window (geomcli.window), zero padding, the same bytes written (tests/test_pictures.py).
    (A plain class, not a frozen dataclass: half a millisecond less at every start-up. mypy
    takes no NamedTuple for a Callable.)
    """

    def __init__(self, target: tuple[int, ...], axes: tuple[int, ...] | None = None, fill: str | None = None) -> None:
        self.target = target
        self.axes = axes
        self.fill = fill

    def __repr__(self) -> str:
        return f"CropPad(target={self.target!r}, axes={self.axes!r}, fill={self.fill!r})"

    def takes_pictures(self, common: Common, output_format: str) -> bool:
        """Whether an 8-bit image may stay a Pillow image through this crop-pad to ``output_format``:
        two sizes, both positive, on the image's own H and W, with zero padding."""
        from geomcli.io import IMAGE_FORMATS

        return (len(self.target) == 2 and min(self.target) > 0 and self.axes is None and self.fill is None
                and common.layout is None and output_format in IMAGE_FORMATS)

    @overload
    def __call__(self, loaded: Picture, *, common: Common, allocate: Allocate | None = None) -> Picture: ...

    @overload
    def __call__(self, loaded: Loaded, *, common: Common, allocate: Allocate | None = None) -> np.ndarray: ...

    def __call__(self, loaded: Loaded | Picture, *, common: Common,
                 allocate: Allocate | None = None) -> np.ndarray | Picture:
        from geomcli.io import Picture

        if isinstance(loaded, Picture):
            return self._crop_pad_picture(loaded, common)
        from geomcli import kernels

        chosen, shape = self._axes_and_shape(loaded.data.shape, loaded.layout, common)
        out = None if allocate is None else allocate(shape, loaded.data.dtype)
        value = None if self.fill is None else parse_fill(self.fill, loaded.data.dtype)
        if out is None:
            return kernels.center_crop_pad(loaded.data, self.target, chosen, fill=value, threads=common.threads)
        from geomcli import slabs

        slabs.center_crop_pad(loaded.data, self.target, chosen, fill=value, threads=common.threads, out=out)
        return out

    def output_shape(self, header: Header, *, common: Common) -> tuple[int, ...]:
        """What this makes of a file with this header, or refuses (a --fill its dtype cannot
        hold, checked by the kernel itself on a stand-in of the file's shape and dtype, one
        element seen everywhere, cropped to nothing): for --dry-run."""
        from geomcli import kernels

        _, shape = self._axes_and_shape(header.shape, header.layout, common)
        if self.fill is not None:
            import numpy as np

            stand_in = np.broadcast_to(np.zeros((), header.dtype), header.shape)
            kernels.center_crop_pad(stand_in, [0] * stand_in.ndim, fill=parse_fill(self.fill, header.dtype))
        return shape

    def _axes_and_shape(self, shape: tuple[int, ...], layout: str | None,
                        common: Common) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
        """The axes --shape refers to, and the output's shape, checked against --max-pixels."""
        from geomcli import kernels

        chosen = _crop_pad_axes(self.target, self.axes, shape, common.layout, layout)
        output = kernels.center_crop_pad_output_shape(shape, self.target, chosen)
        check_size(output, common)
        return chosen, output

    def _crop_pad_picture(self, picture: Picture, common: Common) -> Picture:
        """Image.crop with a box that may reach past the edges: Pillow fills that part with zeros.
        (The output's shape is the target's H and W and the picture's channels: what
        kernels.center_crop_pad_output_shape says of a valid target on the H and W axes.)"""
        from geomcli import io
        from geomcli.window import center_crop_pad_window

        height, width = self.target
        check_size((height, width, *picture.shape[2:]), common)
        (rows, rows_placed), (columns, columns_placed) = (
            center_crop_pad_window(length, size) for length, size in zip(picture.shape, self.target, strict=False))
        top, left = rows.start - rows_placed.start, columns.start - columns_placed.start
        return io.crop_picture(picture, (left, top, left + width, top + height))


def _crop_pad_axes(target: tuple[int, ...], axes: tuple[int, ...] | None, shape: tuple[int, ...],
                   given: str | None, from_file: str | None) -> tuple[int, ...] | None:
    """--axes, or the H and W axes when a two-value --shape meets an array of higher rank whose
    layout --layout or its file names (an image with channels, a TIFF's ImageJ/OME axes,
    stacked frames); else None: every axis."""
    from geomcli import layout as layouts

    if given is not None:
        layouts.resolve_layout(shape, given, from_file)  # a --layout of another rank is refused, as elsewhere
    if axes is not None or len(target) != 2 or len(shape) <= 2 or (given or from_file) is None:
        return axes
    return layouts.spatial_axes(layouts.resolve_layout(shape, given, from_file))


def parse_fill(text: str, dtype: np.dtype) -> bool | int | float | complex | str:
    """--fill read as a value of ``dtype``, for the kernel to judge whether it fits
    (kernels._as_fill is the one place that does): for a string dtype the text itself; for
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


def blocks(loaded: Loaded, *, kernel_name: str, blocksize: int, mode: str, common: Common,
           allocate: Allocate | None = None) -> np.ndarray:
    """Run a rank-4 kernel on a file in any layout; the result in that layout."""
    from geomcli import kernels
    from geomcli import layout as layouts

    chosen = layouts.resolve_layout(loaded.data.shape, common.layout, loaded.layout)
    data = layouts.to_nchw(loaded.data, chosen)
    shape = getattr(kernels, f"{kernel_name}_output_shape")(data.shape, blocksize)
    check_size(shape, common)
    out = None if allocate is None else allocate(layouts.from_nchw_shape(shape, chosen), data.dtype)
    if out is None:
        result = getattr(kernels, kernel_name)(data, blocksize, mode, threads=common.threads)
        return layouts.from_nchw(result, chosen)
    from geomcli import slabs

    nchw_out = layouts.to_nchw(out, layouts.output_layout(chosen, shape[1]))
    getattr(slabs, kernel_name)(data, blocksize, mode, threads=common.threads, out=nchw_out)
    return out


def blocks_shape(header: Header, *, kernel_name: str, blocksize: int,
                 common: Common) -> tuple[int, ...]:
    """What :func:`blocks` makes of a file with this header."""
    from geomcli import kernels
    from geomcli import layout as layouts

    chosen = layouts.resolve_layout(header.shape, common.layout, header.layout)
    shape = getattr(kernels, f"{kernel_name}_output_shape")(layouts.to_nchw_shape(header.shape, chosen), blocksize)
    check_size(shape, common)
    return layouts.from_nchw_shape(shape, chosen)


def affine_grid(report: Report, theta: np.ndarray, size: tuple[int, ...], align_corners: bool, output: str,
                output_format: str, common: Common) -> None:
    """Make the grids and write them to ``output`` (memory-mapped when big), filling ``report``."""
    from geomcli import io, kernels, summary

    report.input_shape, report.input_dtype = list(theta.shape), str(theta.dtype)
    shape = kernels.affine_grid_output_shape(theta.shape, size)
    with ExitStack() as outputs:
        # the kernel's grid is theta's type in native byte order
        grid = mapped_output(outputs, output, shape, theta.dtype.newbyteorder("="), output_format)
        if grid is None:
            grid = kernels.affine_grid(theta, size, align_corners, threads=common.threads)
            io.write_array(grid, output, format=output_format)
            report.value_range = summary.value_range(grid)
        else:
            from geomcli import slabs

            slabs.affine_grid(theta, size, align_corners, threads=common.threads, out=grid)
            report.value_range = slabs.value_range(grid)
    report.output_shape, report.output_dtype = list(grid.shape), str(grid.dtype)
    if not _all_finite(theta):
        report.notes.append("theta holds NaN or Inf: so do the grid positions it reaches")


def _all_finite(theta: np.ndarray) -> bool:
    """Whether theta holds no NaN or Inf; a broadcast theta (one matrix for every N) is checked once."""
    import numpy as np

    distinct = theta[:1] if theta.ndim and theta.strides[0] == 0 else theta
    return bool(np.isfinite(distinct).all())
