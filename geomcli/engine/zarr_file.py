"""One chunked job: a zarr input, or a zarr output, through an operation as a dask.array graph,
chunk by chunk (the operation's ``apply_chunked``; geomcli.engine.chunked), never holding the
whole array; on this machine's threads, or with ``--scheduler`` on a Dask cluster.

The output is a zarr array chunked as the input (through the operation's change of shape; an input
of many tiny chunks as the blocks of them it is read in, chunked.grouped), and
the result is rechunked to exactly those chunks before it is written: one task per zarr chunk.
It is marked complete last (geomcli.io._zarr). A .npy or .tiff on either side is a memory map
(io.read_array, io.open_output), read or written slab by slab by the same graph.

Dask and zarr load only for a job with a .zarr on either side (the plan imports this module for
every file, to ask whether one is).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from geomcli.engine.report import reporting
from geomcli.errors import GeomError, OptionFault

if TYPE_CHECKING:
    import numpy as np

    from geomcli.engine.operations import Operation
    from geomcli.engine.options import Common
    from geomcli.engine.summary import Report
    from geomcli.io import Header, Loaded, Metadata
    from geomcli.io._zarr import Space


def involved(input_path: str, output: str) -> bool:
    """Whether a job reads or writes a zarr array (and so runs chunk by chunk)."""
    from geomcli.io import _zarr

    return _zarr.is_zarr(input_path) or _zarr.is_zarr(output)


def require_modules() -> None:
    """A chunked job reads or writes zarr and runs on Dask (the dask extra): without them, one line
    that says what to install, not an ImportError's traceback."""
    import importlib

    from geomcli.io import _zarr

    for module, does in (("zarr", ".zarr arrays are read and written by zarr"),
                         ("dask.array", ".zarr arrays are done chunk by chunk by Dask")):
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise GeomError(f"{does}, which is not installed: {_zarr.INSTALL}") from error


def is_piped(input_path: str) -> bool:
    """Whether the input is a stream (stdin, a FIFO, process substitution's /dev/fd/N), which has
    no chunks to read one at a time and can be read only once."""
    from geomcli import io
    from geomcli.io import _remote

    return input_path == "-" or (not _remote.is_url(input_path) and io.is_stream(input_path))


def read_piped(input_path: str, common: Common) -> Loaded:
    """A piped input read whole (within --max-pixels), once: its header is judged from it and its
    array is then written chunk by chunk (:func:`transform`'s ``piped``)."""
    from geomcli import io

    fidelity = common.fidelity
    return io.read_array(input_path, max_pixels=common.max_pixels, mmap=False, auto_orient=fidelity.auto_orient,
                         frames=fidelity.frames, series=fidelity.series, page=fidelity.page,
                         palette=fidelity.keep_palette)


def write_whole(data: np.ndarray, output: str) -> None:
    """A small array (an affine grid) written to the zarr array ``output`` whole, a chunk per
    leading index, placed and marked complete as a chunked result is."""
    from geomcli import io
    from geomcli.io import _zarr

    if not _zarr.is_zarr(output):
        raise GeomError(f"{output}: a zarr output is named NAME.zarr")
    io.check_writable(data.dtype, data.shape, "zarr", output)
    chunks = tuple(max(1, length) for length in (1, *data.shape[1:]))[:data.ndim]
    with _zarr.staged(output) as place:
        target = _zarr.create_output(place, data.shape, data.dtype, chunks, None, space=None, name=output)
        _zarr.write_whole(target, data, output)
        _zarr.mark_complete(place, output)


def check_output_format(output: str, output_format: str) -> None:
    """Refuse an output a chunked job cannot write: only a zarr array or a file in one piece (a
    memory map, .npy or .tiff) takes its result chunk by chunk."""
    if output_format not in ("zarr", "npy", "tiff"):
        raise GeomError(f"{output}: a chunked result is written as .zarr, .npy or .tiff, not {output_format.upper()}")


def transform(operation: Operation, input_path: str, output: str, output_format: str, common: Common,
              scheduler: str | None = None, *, piped: Loaded | None = None) -> Report:
    """Read, transform and write one chunked job; its report, with any failure in it. ``piped``: a
    piped input already read (:func:`read_piped`)."""
    from geomcli import io
    from geomcli.engine import layout as layouts
    from geomcli.engine import summary
    from geomcli.engine.options import unused_options
    from geomcli.io import _remote, _zarr

    _remote.configure(common.storage_options)
    report = summary.Report(operation.command, input_path, output, parameters=operation.parameters())
    with reporting(report, common):
        require_modules()
        _refuse_in_place(input_path, output)
        opened, written = input_path, output
        if scheduler is not None:  # a cluster's workers open the arrays by these names
            from geomcli.engine.scheduler import for_workers

            opened, written = for_workers(input_path), for_workers(output)
        data, layout, space, like, file_format, notes, unkept = _open(opened, common, piped)
        report.input_shape, report.input_dtype = list(data.shape), str(data.dtype)
        report.notes.extend(notes)
        if space is not None and space.levels > 1:  # a pyramid's other levels are not made again
            report.notes.append(f"an OME-Zarr of {space.levels} levels: the first (full resolution) alone is read, "
                                "and the output has that one level")
        report.warnings.extend(summary.of_input(layouts.ignored_layout(common, file_format, layout),
                                                io.mislabelled(input_path, file_format)))
        common = layouts.own_axes(common, file_format)
        # (--quality, --page...: said here as for a file read whole, where they went unsaid)
        report.warnings.extend(unused_options(common.fidelity, file_format, output_format))
        report.warnings.extend(operation.unused_options())
        report.notes.extend(operation.notes())
        try:
            result = operation.apply_chunked(data, layout, common)  # --max-pixels: what a task holds
            _check_blocks(data, result, common)
            report.parameters = operation.parameters(data.dtype)  # as used: a --fill as the dtype holds it
            header = io.Header("zarr", data.shape, data.dtype, 1, None, layout)
            report.warnings.extend(operation.cautions(header, common))  # (channels resized), as read whole
            if steps := operation.trace(header, common):  # a chain's shape after each step, as read whole
                report.steps = steps  # type: ignore[attr-defined]  # a key of chain's records only
        except GeomError as error:
            raise GeomError(f"{input_path}: {error}") from error
        report.output_shape, report.output_dtype = list(result.shape), str(result.dtype)
        if output_format == "zarr" and result.dtype.kind in "biufc" and result.dtype.byteorder == ">":
            # zarr v3 keeps no byte order in the data type: a '>f4' result reads back as float32
            report.output_dtype = str(result.dtype.newbyteorder("="))
        given = space
        output_layout = layouts.written_layout(data.shape, result.shape, common.layout, layout)
        space = _carried_space(operation, space, header, result.shape, output_layout, output_format, common, report,
                               file_format)
        held = _zarr.holds(space, output_layout) if output_format == "zarr" else \
            output_format == "tiff" and _zarr.ome_tiff_of(space, output_layout) is not None
        if given is not None and space is not None and held:  # (an output that holds none says so in a warning)
            report.notes.extend(summary.resized_pixels(_zarr.pixel_size(given), _zarr.pixel_size(space)))
        try:
            report.value_range, nan, blocks = _write(operation, result, data, written, output_format, common,
                                                     scheduler, layout=layout, space=space, like=like,
                                                     name=input_path)
            report.notes.extend([summary.NAN_NOTE] if nan else [])
        except GeomError:
            raise
        except OSError as error:
            if common.debug or (error.filename is not None and not _zarr.codec_failed(error)):
                raise  # a file's read or write, which names it (see _write)
            # a damaged chunk's decompressor, or a store's read (a connection reset), naming no file
            raise _chunk_failed(input_path, error) from error
        # a chunk's codec or store failing in a task (numcodecs', imagecodecs' RuntimeError, zarr's
        # ValueError, botocore's): this file's failure; a bug (TypeError, AttributeError) keeps its traceback
        except (RuntimeError, ValueError, KeyError, EOFError) + _zarr.CODEC_FAILURES + _remote._failures() as error:
            if common.debug:
                raise
            raise _chunk_failed(input_path, error) from error
        report.notes.append(f"chunk by chunk: {blocks} output chunk(s)")
        _say_unheld(operation, space, data.shape, layout, result, output, output_format, common, report, file_format,
                    unkept)
    return report


def _carried_space(operation: Operation, space: Space | None, header: Header, shape: tuple[int, ...],
                   output_layout: str | None, output_format: str, common: Common, report: Report,
                   file_format: str) -> Space | None:
    """The input's coordinate system (``space``) as the operation makes it for an output of
    ``shape``, and what of it cannot be carried through the operation, said in ``report``: by the run
    and by its dry run (:func:`say_planned`)."""
    from geomcli.io import _zarr

    # where pixels lie: an OME-Zarr output's translation alone holds it (a TIFF's and .npy's nothing)
    positioned = output_format == "zarr" and _zarr.holds(space, output_layout)
    space = _output_space(operation, space, header, common, report, positioned)
    return _channels_kept(space, shape, operation.command, report, file_format)


def _say_unheld(operation: Operation, space: Space | None, input_shape: tuple[int, ...], layout: str | None,
                result: Any, output: str, output_format: str, common: Common, report: Report, file_format: str,
                unkept: tuple[str, ...]) -> None:
    """What an output of ``result``'s shape and dtype does not hold of what it is given (``space``,
    as :func:`_carried_space` made it, and ``unkept``), said in ``report``'s warnings, or its
    ``dropped``: by the run once written, and by its dry run (:func:`say_planned`)."""
    from geomcli import io
    from geomcli.engine import layout as layouts
    from geomcli.io import _zarr

    tiff_layout = layouts.result_layout(operation.takes_rank_layout(), input_shape, layout, result.shape, output,
                                        output_format, common)
    said = tiff_metadata(space, tiff_layout, result.ndim, output, common)[1] if output_format == "tiff" else None
    report.warnings.extend([said] if said else [])
    said = _zarr.unstable(result.dtype) if output_format == "zarr" else None
    report.warnings.extend([said] if said else [])
    compression = common.fidelity.compression
    if compression not in (None, "none") and io.maps_output(output, result.shape, result.dtype,
                                                             format=output_format):
        report.warnings.append(f"a big output written chunk by chunk is a memory map, uncompressed: --compression "
                               f"{compression} dropped")
    written_layout = layouts.written_layout(input_shape, result.shape, common.layout, layout)
    _say_dropped(report, space, output_format, written_layout, unkept)
    _say_omero_dropped(report, space, output_format, written_layout, file_format)


def _say_omero_dropped(report: Report, space: Space | None, output_format: str, written_layout: str | None,
                       file_format: str) -> None:
    """What of an OME-Zarr's ``omero`` (its channels' labels, colours, display windows: kept by an
    OME-Zarr output, see _channels_kept) the output does not hold, named once: in a warning, or
    in the record's ``dropped`` for a .npy. A TIFF keeps the labels as OME channel names. (The
    omero of another ``file_format``'s input holds its OME-XML channel names: _omero_named.)"""
    from geomcli.io import _zarr

    if space is None or space.omero is None or (output_format == "zarr" and _zarr.holds(space, written_layout)):
        return
    carried = _zarr.ome_tiff_of(space, written_layout) if output_format == "tiff" else None
    listed = space.omero.get("channels")
    fields = {str(key) for entry in (listed if isinstance(listed, list) else []) if isinstance(entry, dict)
              for key in entry} - ({"label"} if carried is not None and carried.channels else set())
    others = sorted(str(key) for key in space.omero if key != "channels")
    what = ", ".join([*([f"channels' {', '.join(sorted(fields))}"] if fields else []), *others])
    if not what:
        return
    what = _omero_named(space.omero, file_format) if file_format != "zarr" else f"OME-Zarr omero {what}"
    if output_format == "npy":
        report.dropped = [*getattr(report, "dropped", []), what]  # type: ignore[attr-defined]
    else:
        report.warnings.append(f"a {output_format.upper() if output_format != 'zarr' else 'zarr array'} cannot "
                               f"hold the {what}; dropped")


def _omero_named(omero: dict[str, Any], file_format: str) -> str:
    """The omero of an input as a warning names it: an OME-Zarr's as such, another file's (an
    OME-TIFF's, zarr.space_of) by its OME-XML channel names."""
    if file_format == "zarr":
        return "OME-Zarr omero metadata"
    listed = omero.get("channels")
    labels = [str(entry.get("label")) for entry in listed if isinstance(entry, dict)] if isinstance(listed, list) \
        else []
    return f"OME-XML channel names ({', '.join(labels)})"


def _chunk_failed(input_path: str, error: BaseException) -> GeomError:
    return GeomError(f"{input_path}: a chunk could not be read, transformed or written "
                     f"({type(error).__name__}: {_first_line(error)})")


def _output_space(operation: Operation, space: Space | None, header: Header, common: Common,
                  report: Report, positioned: bool) -> Space | None:
    """The input's OME-Zarr coordinate system as the operation makes it: the scale
    (Operation.scaled) and the translation (Operation.shifted; where the operation does not say
    where its pixels lie, dropped along the axes it samples, Operation.sampled_axes: a rotated
    z-stack keeps its z; with a warning where the output is ``positioned``, one that could have
    held them). An input without a translation has its first pixel's centre at 0: a crop or a
    resize moves it, and the output says where to."""
    if space is None:
        return None
    scale = space.scale or (1.0,) * len(header.shape)
    sampled = operation.sampled_axes(header, common)
    if space.translation is None:
        zeros = (0.0,) * len(header.shape)
        moved = operation.shifted(zeros, scale, header, common)
        flipped = [] if moved is None else [index for index, value in enumerate(moved) if math.isnan(value)]
        # (where it does not say: the axes it does not sample, as it moves them, a volume's z under a turn about z)
        apart = operation.shifted_apart(zeros, scale, header, common) if moved is None else moved
        kept = tuple(0.0 if math.isnan(value) or moved is None and index in sampled else value
                     for index, value in enumerate(apart))
        translation = kept if any(kept) else None
        if positioned and (flipped or moved is None and operation.scaled(scale, header, common) is not None):
            # pixels of a size that run the other way (a flip): no translation says where they lie,
            # and the output's none (NGFF's 0) puts its first pixel where the input's was: said
            names = ", ".join(str(space.axes[index].get("name", "?")) for index in flipped or sampled)
            report.warnings.append(f"the OME-Zarr pixel positions along {names} (its first pixel's centre at 0: it "
                                   f"gives no translation) cannot be carried through {operation.command} (a flip "
                                   "runs its pixels the other way, which NGFF's scale and translation cannot say); "
                                   "dropped")
    else:
        moved = operation.shifted(space.translation, scale, header, common)
        # (NaN: the operation flips that axis alone, the others' are kept; where it does not say, the
        # axes it does not sample are as it moves them)
        apart = operation.shifted_apart(space.translation, scale, header, common) if moved is None else moved
        lost = [index for index, value in enumerate(apart) if math.isnan(value) or moved is None and index in sampled]
        translation = apart
        if lost:
            kept = tuple(0.0 if index in lost else value for index, value in enumerate(apart))
            translation = kept if any(kept) else None
            given = operation.translation_lost(space.translation, scale, header, common)  # (a chain's at its step)
            what = (f"{list(given)}" if len(lost) == len(kept) else
                    f"{[given[index] for index in lost]} along "
                    f"{', '.join(str(space.axes[index].get('name', '?')) for index in lost)}")
            why = "it does not say where its pixels lie" if moved is None else "a flip runs its pixels the other way"
            if positioned:
                report.warnings.append(f"the OME-Zarr translation {what} cannot be carried through "
                                       f"{operation.command} ({why}); dropped")
    from geomcli.io._zarr import Space

    scaled = operation.scaled(scale, header, common)
    if scaled is None:  # no size per axis: the sampled axes of space keep none, nor their units
        spatial = [axis.get("type") == "space" and index in sampled for index, axis in enumerate(space.axes)]
        dropped = Space(tuple(axis for axis, drop in zip(space.axes, spatial) if drop),
                        tuple(value for value, drop in zip(scale, spatial) if drop)).physical()
        if dropped:
            report.warnings.append(f"the physical pixel sizes ({dropped}) cannot be carried through "
                                   f"{operation.command}, whose pixels have no size per axis (a grid, a rotation "
                                   "or shear); dropped")
        apart = operation.scaled_apart(scale, header, common)  # (the axes it does not sample: z under a turn about z)
        return space._replace(axes=tuple({key: value for key, value in axis.items() if key != "unit" or not drop}
                                         for axis, drop in zip(space.axes, spatial)),
                              scale=tuple(1.0 if drop else value for value, drop in zip(apart, spatial)),
                              translation=translation)
    # (an image of no scale, pixels of 1, likewise has one where the operation changed it)
    unscaled = space.scale is None and all(value == 1.0 for value in scaled)
    return space._replace(scale=None if unscaled else scaled, translation=translation)


def _channels_kept(space: Space | None, shape: tuple[int, ...], command: str, report: Report,
                   file_format: str = "zarr") -> Space | None:
    """``space`` with its ``omero`` (the channels' labels, colours, windows) where the output has
    as many channels as it lists; else without it, and a warning (space-to-depth's channels are
    blocks of pixels). An omero holding NaN or Infinity (Python's JSON reads them) is dropped with
    a warning too: written back, it made the output's zarr.json no JSON a strict reader takes."""
    import json

    if space is None or space.omero is None:
        return space
    try:
        json.dumps(space.omero, allow_nan=False)
    except ValueError:
        report.warnings.append("the OME-Zarr omero metadata holds NaN or Infinity, which JSON has no number for; "
                               "dropped")
        return space._replace(omero=None)
    channels = space.omero.get("channels")
    where = [index for index, axis in enumerate(space.axes) if axis.get("type") == "channel"]
    if not isinstance(channels, list) or (len(where) == 1 and len(shape) == len(space.axes)
                                          and shape[where[0]] == len(channels)):
        return space
    named = _omero_named(space.omero, file_format)
    report.warnings.append(f"the {named} of {len(channels)} channel(s) does not fit the output of {command}; dropped"
                           if file_format == "zarr" else f"the {named} do not fit the output of {command}; dropped")
    return space._replace(omero=None)


def _say_dropped(report: Report, space: Space | None, output_format: str, written_layout: str | None,
                 unkept: tuple[str, ...]) -> None:
    """What the input said that a chunked output does not hold, named: ``unkept`` (an image's ICC
    profile, EXIF...: a zarr holds its array's coordinate system alone, and a .npy nothing, by
    their nature) in the record's ``dropped``, as one_file's record of a .npy names them; the
    physical pixel sizes in a warning (``dropped`` for a .npy), as io.unkept names a field."""
    from geomcli.io import _zarr

    if unkept:
        report.dropped = list(unkept)  # type: ignore[attr-defined]
    said = "" if space is None else space.physical()
    if not said or (output_format == "zarr" and _zarr.holds(space, written_layout)):
        return
    carried = _zarr.ome_tiff_of(space, written_layout) if output_format == "tiff" else None
    if carried is not None:  # an OME-TIFF's physical sizes and time increment: the rest is named
        assert space is not None and space.scale is not None
        kept = [carried.axes is not None and carried.axes[index] in {entry[0] for entry in carried.physical}
                for index in range(len(space.axes))]
        said = space._replace(axes=tuple(axis for axis, held in zip(space.axes, kept) if not held),
                              scale=tuple(value for value, held in zip(space.scale, kept) if not held)).physical()
        if not said:
            return
    what = f"physical pixel sizes ({said})"
    if output_format == "npy":
        report.dropped = [*unkept, what]  # type: ignore[attr-defined]
    elif output_format == "zarr":
        axes = "".join(str(axis.get("name", "?")) for axis in space.axes).upper()  # type: ignore[union-attr]
        report.warnings.append(f"zarr cannot hold the {what} of axes {axes} (OME-Zarr orders time, channel, then "
                               "2 or 3 of space); dropped")
    else:
        report.warnings.append(f"a {output_format.upper()} written chunk by chunk cannot hold the {what}; dropped")


class Graph(NamedTuple):
    """A chunked job's input as stored (:func:`_stored`) and the graph of its result, no chunk read."""

    stored: _Opened
    result: Any  # a dask array
    common: Common  # the options as its run takes them (layouts.own_axes)


def check_tasks(operation: Operation, input_path: str, output: str, common: Common) -> Graph | None:
    """Refuse, from a chunked job's input as stored (a zarr's chunks, a .npy's or tiled TIFF's
    chunks as the run makes them; no chunk is read), a graph whose tasks would hold more than
    --max-pixels (:func:`_check_blocks`), as the run would: the plan and --dry-run find it with
    the headers, before anything is written. (An input read whole to be chunked, a pipe or a
    palette TIFF, say, is judged by the run.) The graph checked, for :func:`say_planned`; None
    for a job that is not chunked, or whose input is read whole."""
    from geomcli.engine import layout as layouts

    if not involved(input_path, output):
        return None
    require_modules()
    stored = _stored(input_path, common)
    if stored is None:
        return None
    data, layout, file_format = stored.data, stored.layout, stored.format
    common = layouts.own_axes(common, file_format)
    try:
        result = operation.apply_chunked(data, layout, common)
        _check_blocks(data, result, common)
    except GeomError as error:
        raise GeomError(f"{input_path}: {error}") from error
    return Graph(stored, result, common)


def whole_graph(operation: Operation, header: Header, metadata: Metadata, common: Common) -> Graph:
    """The graph of a chunked job whose input is decoded whole (a PNG, a palette or planar TIFF:
    no :func:`check_tasks` graph), from its ``header`` and ``metadata`` (io.read_metadata), no
    pixel read: for :func:`say_planned`, as :func:`_open` makes it for the run."""
    import numpy as np

    from geomcli.engine import chunked
    from geomcli.engine import layout as layouts
    from geomcli.io import _zarr

    data = chunked.as_dask(_NoPixels(header.shape, np.dtype(header.dtype)), None)
    opened = _Opened(data, header.layout, _zarr.space_of(metadata), None, header.format, (), _unkept(metadata))
    common = layouts.own_axes(common, header.format)
    return Graph(opened, operation.apply_chunked(data, header.layout, common), common)


class _NoPixels:
    """An array's shape and dtype alone, for a graph never computed (:func:`whole_graph`): a
    broadcast zero in its place was hashed and cut into chunks whole by dask.array.from_array, a
    dry run of a 12000x12000 RGB PNG to .zarr peaking at 490 MB."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.shape, self.dtype, self.ndim = shape, dtype, len(shape)

    def __getitem__(self, where: Any) -> np.ndarray:
        import numpy as np

        part: np.ndarray = np.broadcast_to(np.zeros((), self.dtype), self.shape)[where]
        return part

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        return self.shape, str(self.dtype)


def say_planned(operation: Operation, graph: Graph, output: str, output_format: str, report: Report) -> None:
    """What the run of a chunked job (``graph``: :func:`check_tasks`) says of its input's metadata,
    said in its dry run's ``report``, by the run's own code from the input as stored: its OME-Zarr
    scale, translation and channels (an OME-TIFF's physical sizes, an ImageJ calibration) that
    the operation or the output cannot carry, and what else the input said that the output does
    not hold (its ``dropped``)."""
    from geomcli import io
    from geomcli.engine import layout as layouts

    stored, result, common = graph
    header = io.Header("zarr", stored.data.shape, stored.data.dtype, 1, None, stored.layout)
    output_layout = layouts.written_layout(stored.data.shape, result.shape, common.layout, stored.layout)
    space = _carried_space(operation, stored.space, header, result.shape, output_layout, output_format, common,
                           report, stored.format)
    _say_unheld(operation, space, stored.data.shape, stored.layout, result, output, output_format, common, report,
                stored.format, stored.unkept)


def whole(common: Common) -> Common:
    """The options a chunked job's whole arrays are judged by: --max-pixels bounds what a task
    holds (_check_blocks), not the array, which is never held whole."""
    import dataclasses
    import sys

    return dataclasses.replace(common, max_pixels=sys.maxsize)


def _check_blocks(data: Any, result: Any, common: Common) -> None:
    """Refuse a graph whose biggest input or output block has more elements than --max-pixels
    (an operation that reads whole planes of one huge plane, say), before any is computed."""
    from geomcli import io

    for what, array in (("an input chunk", data), ("an output block", result)):
        biggest = tuple(max(axis, default=0) for axis in array.chunks)
        io.check_size(biggest, common.max_pixels, f"{what} {biggest}")


def _refuse_in_place(input_path: str, output: str) -> None:
    from geomcli.io import _remote

    def key(path: str) -> str:
        import os

        path = _remote.local_path(path).rstrip("/")
        return _remote.canonical(path) if _remote.is_url(path) else os.path.realpath(path)

    if key(input_path) == key(output):  # the command line's mistake (exit 2), as a batch's output over an input
        raise OptionFault(f"{output}: the output would replace its own input, which is read chunk by chunk as "
                          "the output is written; write another")


class _Opened(NamedTuple):
    data: Any  # a dask array
    layout: str | None
    space: Space | None
    array: Any  # the zarr array, or None
    format: str
    notes: tuple[str, ...]
    unkept: tuple[str, ...]


def _open(input_path: str, common: Common, piped: Loaded | None = None) -> _Opened:
    """The input as a dask array of its chunks, its layout, its OME-Zarr coordinate system (None
    for another input), the zarr array itself (or None), the input's format, what its read
    notes (a TIFF pyramid's first level alone read, a palette expanded) and what else its
    metadata says that a chunked output does not hold (:func:`_unkept`): as stored
    (:func:`_stored`), else decoded whole (a palette TIFF, say), within --max-pixels. ``piped``: a
    piped input already read whole."""
    from geomcli import io
    from geomcli.engine import chunked
    from geomcli.io import _zarr

    if piped is not None:
        return _Opened(chunked.as_dask(piped.data, None), piped.layout, _zarr.space_of(piped.metadata), None,
                       piped.format, piped.notes, _unkept(piped.metadata))
    stored = _stored(input_path, common)
    if stored is not None:
        return stored
    fidelity = common.fidelity
    loaded = io.read_array(input_path, max_pixels=common.max_pixels, mmap=True, auto_orient=fidelity.auto_orient,
                           frames=fidelity.frames, series=fidelity.series, page=fidelity.page,
                           palette=fidelity.keep_palette)
    return _Opened(chunked.as_dask(loaded.data, None), loaded.layout, _zarr.space_of(loaded.metadata), None,
                   loaded.format, loaded.notes, _unkept(loaded.metadata))


def _unkept(metadata: Metadata) -> tuple[str, ...]:
    """What ``metadata`` says beside its coordinate system (the OME-Zarr scale a zarr output keeps,
    which :func:`_say_dropped` judges): none of it is written chunk by chunk."""
    from geomcli import io
    from geomcli.io import _zarr

    # sizes no OME-Zarr scale takes (in 'pixel', of axes other than TCZYX) are named with the rest
    space = _zarr.space_of(metadata)
    held = () if space is not None else metadata.physical
    if space is not None and space.omero is not None:  # its channel names are the omero's (_say_omero_dropped)
        metadata = metadata._replace(channels=())
    if space is not None and metadata.axes_kind == "imagej":  # its calibration is the scale, where it has the axis
        # (a ZYX stack's frame interval has no t to be the scale of: named, where it went unsaid)
        scaled = {str(axis.get("name")) for axis in space.axes if "unit" in axis}
        # (a stack of no length unit has its interval alone as the scale: its resolution is named)
        metadata = metadata._replace(resolution=None if "x" in scaled else metadata.resolution, imagej=tuple(
            (key, value) for key, value in metadata.imagej
            if not (key == "spacing" and "z" in scaled or key == "finterval" and "t" in scaled)))
    return tuple(io.dropped(metadata._replace(physical=held, axes_kind=None), "npy"))


class Unreadable(GeomError):
    """:func:`_stored`'s input could not be read: a bad file (a truncated TIFF), the file's failure
    (exit 1) where :func:`check_tasks` finds it, not the options' (a usage fault) as its chunks' are."""


@contextmanager
def _reading() -> Iterator[None]:
    try:
        yield
    except GeomError as error:
        raise Unreadable(str(error)) from error


def _stored(input_path: str, common: Common) -> _Opened | None:
    """As :func:`_open`, where the input is read chunk by chunk as it is stored: a zarr array, a
    TIFF through tifffile's zarr store (tile by tile or strip by strip, in chunks of about
    CHUNK_BYTES), a local .npy as a memory map; None for one that must be decoded whole. A read's
    GeomError is an Unreadable."""
    from geomcli import io
    from geomcli.engine import chunked
    from geomcli.io import _zarr

    if _zarr.is_zarr(input_path):
        with _reading():
            opened = _zarr.open_input(input_path)
        try:
            data = chunked.as_dask(opened.array, max_pixels=common.max_pixels)
        except GeomError as error:  # (more chunks than a run takes)
            raise GeomError(f"{input_path}: {error}") from error
        return _Opened(data, opened.layout, opened.space, opened.array, "zarr", (), ())
    if _remote_or_stream(input_path):
        return None
    fidelity = common.fidelity
    if io.format_for_path(input_path) == "tiff":
        with _reading():
            tiles = io.tiff_as_zarr(input_path, series=fidelity.series, auto_orient=fidelity.auto_orient,
                                    max_pixels=common.max_pixels, page=fidelity.page)
        if tiles is not None:
            array, layout, metadata = tiles
            return _Opened(chunked.as_dask(array, "auto", common.max_pixels), layout, _zarr.space_of(metadata), None,
                           "tiff", array.notes, _unkept(metadata))
    if io.format_for_path(input_path) != "npy":
        return None
    with _reading():
        loaded = io.read_array(input_path, max_pixels=whole(common).max_pixels, mmap=True,
                               auto_orient=fidelity.auto_orient, frames=fidelity.frames, series=fidelity.series,
                               page=fidelity.page)
    return _Opened(chunked.as_dask(loaded.data, None), loaded.layout, _zarr.space_of(loaded.metadata), None,
                   loaded.format, loaded.notes, _unkept(loaded.metadata))


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:200] if lines else "no message"


def _remote_or_stream(path: str) -> bool:
    """Whether ``path`` is a URL or a stream (stdin, a FIFO), which have no memory map nor zarr store."""
    from geomcli.io import _remote

    return _remote.is_url(path) or is_piped(path)


def tiff_metadata(space: Space | None, layout: str | None, ndim: int, output: str,
                  common: Common) -> tuple[Metadata | None, str | None]:
    """A TIFF output's OME metadata of an OME-Zarr's coordinate system (zarr.ome_tiff_of), and for
    one named .ome.tif, which promises OME-XML, its axes where it gives neither sizes nor labels
    (a plain array's, its layout's: io._tiff.as_ome); a warning where it cannot be one."""
    from geomcli import io
    from geomcli.io import _tiff, _zarr

    ome = _zarr.ome_tiff_of(space, layout)
    if ome is not None or common.fidelity.strip or not _tiff.names_ome(output):
        return ome, None
    ome = _zarr.ome_tiff_of(space, layout, bare=True)
    if ome is not None:
        return ome, None
    named, said = _tiff.as_ome(io.Metadata(), layout, ndim)
    return (named if named.axes_kind == "ome" else None), said


def _write(operation: Operation, result: Any, data: Any, output: str, output_format: str, common: Common,
           scheduler: str | None, *, layout: str | None, space: Space | None,
           like: Any, name: str) -> tuple[list[Any] | None, bool, int]:
    """Write ``result`` chunk by chunk (one task per output chunk, or shard); its value range and
    whether it holds NaN (summary.range_and_nan), found by the same pass, and the chunks written.
    ``name``: the input, as a failure on a cluster names it."""
    from geomcli import io
    from geomcli.engine import layout as layouts
    from geomcli.engine import summary
    from geomcli.io import _zarr

    written_layout = layouts.result_layout(operation.takes_rank_layout(), data.shape, layout, result.shape, output,
                                           output_format, common)
    if output_format == "zarr":
        if not _zarr.is_zarr(output):
            raise GeomError(f"{output}: a zarr output is named NAME.zarr")
        chunks = _output_chunks(result, data)
        place: str | None = None
        try:
            with _zarr.staged(output) as place:  # into place only when whole: a failed run leaves what was there
                target = _zarr.create_output(place, result.shape, result.dtype, chunks, written_layout,
                                             space=space, like=like, name=output)
                with _scheduler(scheduler, common) as (how, _):
                    # one dask chunk per zarr chunk: no two tasks write one chunk
                    ranges = _write_blocks(result.rechunk(chunks), target, None, how, name)
                _zarr.mark_complete(place, output)
        except OSError as error:  # a chunk's write (a full disk) names no file, or the staging folder's
            if error.filename is not None and not (place and str(error.filename).startswith(place)):
                raise  # an input chunk's read, which names its file
            if _zarr.codec_failed(error):
                raise  # an input chunk's decompressor (bz2's 'Invalid data stream'), which names none
            raise GeomError(f"{output}: cannot write ({error.strerror or error})") from error
        return (*summary.joined_range(ranges), len(ranges))
    else:
        from geomcli.engine.options import write_options

        check_output_format(output, output_format)
        # an OME-Zarr's axes and scale, as an OME-TIFF's axes and physical sizes
        ome = tiff_metadata(space, written_layout, result.ndim, output, common)[0] if output_format == "tiff" \
            else None
        outputs = io.open_output(output, result.shape, result.dtype, format=output_format, layout=written_layout,
                                 options=write_options(common), axes_metadata=ome)
        target = outputs.__enter__()
    try:
        with _scheduler(scheduler, common) as (how, client):
            # a worker process writes a zarr chunk itself (above); a file here (a memory map) only
            # this process can write, so a cluster's blocks come back to be put in it one by one
            ranges = _write_blocks(result, target, client, how, name)
    except BaseException as error:
        outputs.__exit__(type(error), error, error.__traceback__)
        raise
    outputs.__exit__(None, None, None)
    return (*summary.joined_range(ranges), len(ranges))


def _write_blocks(result: Any, target: Any, client: Any, how: dict[str, Any], name: str) -> list[Any]:
    """Each block of ``result`` put in ``target`` by one task that also gives its range and
    whether it holds NaN (summary.range_and_nan), so that a block is let go once written (a
    separate pass for the range would hold it); with a ``client``, the blocks come back and are
    put here as they complete. The blocks' ranges."""
    import numpy as np
    from dask.base import compute
    from dask.delayed import delayed

    from geomcli.engine.scheduler import scheduler_kept

    on_cluster = client if client is not None else how.get("scheduler")
    if on_cluster is not None and not isinstance(on_cluster, str):
        from geomcli.engine import chunked

        with scheduler_kept(on_cluster, name, _NOT_WRITTEN):
            result = chunked.on_workers(result, on_cluster)  # (a grid's parts: not in the graph)
    starts = [np.cumsum((0, *lengths[:-1])) for lengths in result.chunks]
    blocks = result.to_delayed(optimize_graph=True)
    indices = list(np.ndindex(*result.numblocks))
    places = [tuple(slice(int(start[i]), int(start[i]) + lengths[i])
                    for start, lengths, i in zip(starts, result.chunks, index, strict=True)) for index in indices]
    # pure=False: a task's key is not a hash of its arguments (a memory map's would read it all)
    if client is None:
        tasks = [delayed(_put, pure=False)(blocks[index], target, place)
                 for index, place in zip(indices, places, strict=True)]
        cluster = how.get("scheduler")
        if cluster is None or isinstance(cluster, str):
            return list(compute(*tasks, **how))
        # on a cluster, whose workers write the chunks: a failure or Ctrl-C here waits until none
        # is writing one, as the pool above is shut down, before the output is removed (a joined
        # cluster's workers get no signal, and wrote their chunks into the array removed)
        futures = cluster.compute(tasks)
        del result, blocks, tasks  # (their grid parts' futures: each part then goes once its tasks are done)
        try:
            with scheduler_kept(cluster, name, _NOT_WRITTEN):
                return list(cluster.gather(futures))
        except BaseException:
            from geomcli.engine.scheduler import cancel_and_wait, signals_held

            with signals_held():
                cancel_and_wait(cluster, futures)
            raise
    from distributed import as_completed

    futures = client.compute([delayed(_block_and_range, pure=False)(blocks[index]) for index in indices])
    del result, blocks  # (as above)
    where = {future.key: place for future, place in zip(futures, places, strict=True)}
    ranges = []
    with scheduler_kept(client, name, _NOT_WRITTEN):
        for future in as_completed(futures, loop=client.loop):
            block, found = future.result()
            target[where[future.key]] = block
            ranges.append(found)
            future.release()
    return ranges


# what a zarr job whose joined cluster's scheduler went away leaves (scheduler.scheduler_kept)
_NOT_WRITTEN = "the output was not written"



def _put(block: Any, target: Any, place: tuple[slice, ...]) -> tuple[list[Any] | None, bool]:
    from geomcli.engine import summary

    target[place] = block
    return summary.range_and_nan(block)


def _block_and_range(block: Any) -> tuple[Any, tuple[list[Any] | None, bool]]:
    from geomcli.engine import summary

    return block, summary.range_and_nan(block)


def _output_chunks(result: Any, data: Any) -> tuple[int, ...]:
    """The output's zarr chunks: what the graph made of the input's chunks (each axis's first)."""
    from geomcli.engine import chunked

    return chunked.regular(result.chunks)


@contextmanager
def _scheduler(scheduler: str | None, common: Common) -> Iterator[tuple[dict[str, Any], Any]]:
    """How dask computes: this machine's threads (--threads), or the cluster --scheduler names
    (with its client)."""
    from geomcli.engine import chunked
    from geomcli.engine import scheduler as schedulers

    if scheduler is None:
        from concurrent.futures import ThreadPoolExecutor

        from geomcli.io import _remote

        how = dict(chunked.threads_for(common.threads))
        # a pool of our own, shut down before a failure goes on: dask raises the first task's
        # error while others still run, and they would write into an output being removed
        pool = ThreadPoolExecutor(how["num_workers"], initializer=_remote.pool_initializer())
        try:
            yield {**how, "pool": pool}, None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return
    with schedulers.connect(scheduler, common.debug) as (client, _):
        yield {"scheduler": client}, client
