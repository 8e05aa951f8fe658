"""One file through an operation: read, run the operation, write, report; and the other
one-file jobs (``info``, an affine grid). For a one-file ``-o`` run and for every file of a batch
(in worker processes too). Failures a user can cause end up in the file's ``Report``
(geomcli.engine.report shows it and gives the exit code); bugs keep their traceback.

Big results go slab by slab into a memory-mapped output that ``allocate`` gives. Only the
standard library loads at import time; numpy and the backends load when a file is done.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from geomcli.engine.options import unused_by_result, unused_options, write_options
from geomcli.engine.report import reporting
from geomcli.errors import GeomError, OptionFault

if TYPE_CHECKING:
    import numpy as np

    from geomcli.engine.operations import Operation
    from geomcli.engine.options import Common, Fidelity
    from geomcli.engine.summary import Report
    from geomcli.io import Header, Loaded, Metadata, Picture


class FormatConflictError(GeomError):
    """--format names another format than the output's extension."""


def output_format(path: str, given: str | None) -> str:
    """The format of the output ``path``: its extension's, or ``given`` (--format) for ``-``, a name
    without an extension or one geomcli does not know; a GeomError when the two disagree, or for a
    local name geomcli gives its temp files (a batch's sweep of another output's would remove it)."""
    from geomcli import io
    from geomcli.io import _atomic, _remote, _zarr

    if _remote.is_url(path):
        _remote.check_bucket(path)  # before its extension: s3:// has none either
    elif _atomic.is_leftover_name(os.path.basename(path.rstrip("/"))):
        raise GeomError(f"{path}: a name geomcli gives its temp files; choose another")
    if _zarr.is_zarr(path):  # an array chunk by chunk (geomcli.engine.zarr_file)
        if given is not None:
            raise FormatConflictError(f"--format {given} contradicts the extension of {path} (zarr)")
        return "zarr"
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


class _OutputError(GeomError):
    """A failure to open the output, raised from inside an operation: its message names the output."""


def mapped_output(outputs: ExitStack, output: str, shape: tuple[int, ...], dtype: np.dtype,
                  output_format: str, layout: str | None = None, colour: bool | None = None,
                  inks: bool = False, axes_metadata: Metadata | None = None) -> np.ndarray | None:
    """A memory-mapped output for a big result in ``layout`` (None: unknown), its channels
    colours or not as ``colour`` says (Metadata.colour), CMYK where ``inks`` does (Metadata.inks),
    with the OME axes, physical sizes and channel names, or the ImageJ axes and calibration, of
    ``axes_metadata`` where they fit (io.open_output),
    open until ``outputs`` closes (then renamed into place); None for a result that is written from RAM."""
    from geomcli import io

    if not io.maps_output(output, shape, dtype, format=output_format):
        return None
    try:
        return outputs.enter_context(io.open_output(output, shape, dtype, format=output_format, layout=layout,
                                                    colour=colour, inks=inks, axes_metadata=axes_metadata))
    except GeomError as error:
        raise _OutputError(str(error)) from error  # it names the output already


def header_fault(operation: Operation, common: Common, header: Header, input_path: str, output: str,
                 output_format: str) -> str | None:
    """What a file of this header cannot take (a --fill its dtype cannot hold, a blocksize that
    does not divide it, no layout), or what ``output`` cannot hold (a float result to PNG, a zarr's
    result to anything but .zarr, .npy or .tiff), as one line; None where it shows nothing. A
    header of more elements than --max-pixels is left to the run: that is a bad file, the file's
    own failure. The batch asks it of every input's header before anything is written
    (plan.option_faults), one -o file of what it has read (``usage_faults``): either way a usage
    fault, exit 2."""
    from geomcli import io
    from geomcli.engine import layout as layouts
    from geomcli.engine import zarr_file

    given, common = common, layouts.own_axes(judged_by(common, input_path, output), header.format)
    try:
        io.check_size(header.shape, common.max_pixels, io.display_name(input_path))
    except GeomError:
        return None  # a file declaring too many elements (a bomb, say) is a bad file, not the options'
    try:
        shape = planned_shape(operation, header, common)
    except GeomError as error:
        return f"{io.display_name(input_path)}: {error}"
    try:
        check_writable(header, shape, input_path, output, output_format, common)
        zarr_file.check_tasks(operation, input_path, output, given)  # what a task holds: --max-pixels' bound there
    except zarr_file.Unreadable:
        return None  # a bad file (a truncated TIFF): its own failure, as header_as_read's None
    except GeomError as error:
        return str(error)  # it names the output, or the input
    return None


def planned_shape(operation: Operation, header: Header, common: Common) -> tuple[int, ...]:
    """The output's shape the operation gives a file of this header, or a GeomError for what it
    refuses there, a type no operator takes among them (ml_dtypes' float8 and int4, which a .npy
    or zarr may name: the kernels refuse it only once the pixels are read), or an operation that
    mixes values (Operation.mixed_values) on palette indices."""
    from geomcli.ops._checks import refused_type

    refusal = refused_type(header.dtype, operation.command, "input", f"input shape {header.shape}")
    if refusal is not None:
        raise refusal
    mixed = operation.mixed_values() if header.palette else None
    if mixed is not None:  # a blend of two classes' indices is a third class, or none
        raise GeomError(f"{operation.command}: {mixed} mixes values, which palette indices (--keep-palette) "
                        "cannot be: use --mode nearest, or read the colours without --keep-palette")
    return operation.output_shape(header, common)


def refuse_usage_fault(operation: Operation, common: Common, input_path: str, output: str, output_format: str,
                       header: Header | None = None, report: Report | None = None) -> None:
    """An OptionFault (exit 2) for what :func:`header_fault` finds in ``header`` (what one -o file
    read), or else in the header read here (a chunked job's, whose data is never read whole).
    ``report`` (a chain's) gets the steps up to the one refusing it, as a batch's record has them."""
    from geomcli.engine import layout as layouts

    if header is None:
        header = header_as_read(input_path, common)
    fault = None if header is None else header_fault(operation, common, header, input_path, output, output_format)
    if fault is not None:
        assert header is not None
        judged = layouts.own_axes(judged_by(common, input_path, output), header.format)
        if report is not None and (steps := operation.trace_known(header, judged)):
            report.steps = steps  # type: ignore[attr-defined]  # a key of chain's records only
        raise OptionFault(fault)


def header_as_read(path: str, common: Common) -> Header | None:
    """A file's header as the run reads the file (its --frames, --series, --page, orientation);
    None for one that cannot be read (the run says why: a bad file is its own failure)."""
    from geomcli import io

    fidelity = common.fidelity
    try:
        return io.read_header(path, auto_orient=fidelity.auto_orient, series=fidelity.series, page=fidelity.page,
                              frames=fidelity.frames, palette=fidelity.keep_palette)
    except (GeomError, OSError):
        return None


def check_writable(header: Header, shape: tuple[int, ...], input_path: str, output: str, output_format: str,
                   common: Common) -> None:
    """Refuse an output its format cannot hold: the result's dtype or shape (in its layout, with
    the --compression asked), or a chunked result (a zarr on either side) in a format that cannot
    take it chunk by chunk."""
    from geomcli import io
    from geomcli.engine import layout as layouts
    from geomcli.engine import zarr_file

    layout = layouts.written_layout(header.shape, shape, common.layout, header.layout)
    io.check_writable(header.dtype, shape, output_format, io.display_name(output, output=True), layout,
                      compression=common.fidelity.compression)
    if zarr_file.involved(input_path, output):
        zarr_file.check_output_format(output, output_format)


def _made_alpha(input_shape: tuple[int, ...], input_layout: str | None, output_shape: tuple[int, ...],
                output_layout: str | None, output_format: str) -> str | None:
    """What an image format makes of an H×W×C result whose channels grew to 2 or 4 (a crop-pad of
    RGB to 4 channels, a grey image's 2x2 blocks): its last channel is written as alpha, the
    image's transparency (a try-out's zero-padded channel made an invisible PNG)."""
    from geomcli import io

    if (output_format not in io.IMAGE_FORMATS - {"jpeg"} or output_layout != "HWC" or output_shape[2] not in (2, 4)
            or input_layout not in ("HWC", "HW")):
        return None
    channels = input_shape[2] if input_layout == "HWC" else 1
    if channels == output_shape[2]:
        return None
    kind = "grey + alpha" if output_shape[2] == 2 else "RGB + alpha"
    return (f"the result's {output_shape[2]} channels (the input had {channels}) are written as {kind}: "
            f"its last channel is the {output_format.upper()}'s transparency")


def _no_colours(metadata: Any, output_shape: tuple[int, ...], output_layout: str | None,
                output_format: str) -> str | None:
    """What an image format makes of 3 or 4 channels that are no colours (a TIFF's grey samples or
    CMYK, Metadata.colour False): RGB or RGBA, other colours than they are; a TIFF output writes
    them as grey samples, or CMYK (Metadata.inks). An image format's RGB(A) said nothing of it."""
    from geomcli import io

    if (metadata is None or metadata.colour is not False or output_format not in io.IMAGE_FORMATS
            or output_layout != "HWC" or len(output_shape) != 3 or output_shape[2] not in (3, 4)):
        return None
    kind = "RGB" if output_shape[2] == 3 else "RGBA"
    return (f"its {output_shape[2]} channels are no colours (a TIFF's grey or CMYK samples), written as "
            f"{kind}: a viewer shows them as {kind}")


def judged_by(common: Common, input_path: str, output: str) -> Common:
    """The options a job's header is judged by: a chunked job (a zarr on either side) holds
    blocks, never its whole arrays, which --max-pixels then does not bound."""
    from geomcli.engine import zarr_file

    return zarr_file.whole(common) if output and zarr_file.involved(input_path, output) else common


def transform_file(operation: Operation, input_path: str, output: str, output_format: str,
                   common: Common, *, usage_faults: bool = False, scheduler: str | None = None) -> Report:
    """Read, transform and write one file; its report, with any failure in it. With
    ``usage_faults`` (one -o file) what the options cannot do with the file read
    (:func:`header_fault`) is an OptionFault, a usage fault, as a batch finds it from the headers.
    A chunked job (a zarr on either side) runs on ``scheduler``'s cluster, if one is named.

    ``operation.apply`` makes the result; for a big output, ``allocate(shape, dtype)`` gives it a
    memory-mapped destination to write slab by slab (else None: in RAM).
    """
    from geomcli import io
    from geomcli.engine import layout as layouts
    from geomcli.engine import summary, zarr_file
    from geomcli.engine.operations import header_of
    from geomcli.io import _remote

    _remote.configure(common.storage_options)  # for a URL, the zarr header's too: in a worker too
    report = summary.Report(operation.command, input_path, output, parameters=operation.parameters())
    if zarr_file.involved(input_path, output):
        from geomcli.io import _zarr

        piped = None
        with _zarr.shared_opens():  # the header's, the tasks' check's and the run's open are one
            with reporting(report, common):
                if zarr_file.is_piped(input_path):  # a pipe can be read once: whole, within --max-pixels
                    piped = zarr_file.read_piped(input_path, common)
                if usage_faults:  # from its header: a chunked job's data is never read whole
                    refuse_usage_fault(operation, common, input_path, output, output_format,
                                       None if piped is None else header_of(piped), report)
            if report.status != "ok":
                return report
            return zarr_file.transform(operation, input_path, output, output_format, common, scheduler, piped=piped)
    with reporting(report, common), ExitStack() as outputs:
        fidelity = common.fidelity
        if usage_faults and fidelity.keep_palette and operation.mixed_values() is not None \
                and not io.is_stdin(input_path) and not io.is_stream(input_path):
            # a blend of palette indices refused from the header, as a batch refuses it, before any
            # pixel is read (a pipe, which can be read once, is judged once read)
            refuse_usage_fault(operation, common, input_path, output, output_format, report=report)
        pictures = operation.takes_pictures(common, output_format)
        loaded = (io.read_picture if pictures else io.read_array)(
            input_path, max_pixels=common.max_pixels, auto_orient=fidelity.auto_orient, frames=fidelity.frames,
            series=fidelity.series, page=fidelity.page, mmap=maps_input(input_path), palette=fidelity.keep_palette)
        report.input_shape, report.input_dtype = list(loaded.shape), str(loaded.dtype)
        report.notes.extend(loaded.notes)
        report.notes.extend(operation.notes())
        report.warnings.extend(summary.of_input(layouts.ignored_layout(common, loaded.format, loaded.layout),
                                                io.mislabelled(input_path, loaded.format)))
        common = layouts.own_axes(common, loaded.format)
        report.warnings.extend(unused_options(fidelity, loaded.format, output_format))
        report.warnings.extend(operation.unused_options())
        picture = isinstance(loaded, io.Picture)
        if not isinstance(loaded, io.Picture):  # (a plain crop's picture: no cautions; its faults below)
            header = header_of(loaded)
            if usage_faults:
                refuse_usage_fault(operation, common, input_path, output, output_format, header, report)
            report.warnings.extend(operation.cautions(header, common))
        mapped: list[np.ndarray] = []

        def allocate(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
            if _compresses(output_format, fidelity, loaded.metadata) or loaded.metadata.palette is not None:
                return None  # a map holds raw bytes: a compressed output, or a palette's, is encoded from RAM
            layout = layouts.result_layout(operation.takes_rank_layout(), loaded.shape, loaded.layout, shape, output,
                                           output_format, common)
            # a map keeps no metadata, but whether its channels are colours or inks (its photometric),
            # its OME axes, physical sizes and channel names, and its ImageJ axes and calibration
            made = _output_metadata(operation, loaded.metadata, header_of(loaded), common, output, output_format)
            channels, _ = _named_as(made, output, output_format, layout, len(shape), common)
            axes_metadata = io.Metadata(axes=channels.axes, axes_kind="ome", physical=channels.physical,
                                        channels=channels.channels) if channels.axes_kind == "ome" else \
                io.Metadata(axes=channels.axes, axes_kind="imagej", resolution=channels.resolution, unit=channels.unit,
                            imagej=channels.imagej, zunit=channels.zunit) if channels.axes_kind == "imagej" else None
            out = mapped_output(outputs, output, shape, dtype, output_format, layout, channels.colour, channels.inks,
                                axes_metadata)
            mapped.extend([] if out is None else [out])
            return out

        try:
            result = (operation.apply_picture(loaded, common) if isinstance(loaded, io.Picture)
                      else operation.apply(loaded, common, allocate))
        except _OutputError:
            raise
        except GeomError as error:
            # a plain crop's picture can only fail its options (--max-pixels): a usage fault, as an
            # array's is, judged without the numpy that path exists to avoid; an OptionFault stays one
            usage = (usage_faults and picture) or isinstance(error, OptionFault)
            raise (OptionFault if usage else GeomError)(f"{io.display_name(input_path)}: {error}") from error
        if usage_faults and isinstance(result, io.Picture):  # an output format short of its channels
            try:
                io.check_writable(result.dtype, tuple(result.shape), output_format,
                                  io.display_name(output, output=True))
            except GeomError as error:
                raise OptionFault(str(error)) from error
        written = layouts.result_layout(operation.takes_rank_layout(), loaded.shape, loaded.layout,
                                        tuple(result.shape), output, output_format, common)
        # the shape the file holds: an image's C×H×W result is written H×W×C, its one channel as H×W
        report.output_shape = list(io.written_shape(result.shape, output_format, written))
        report.warnings.extend(unused_by_result(fidelity, output_format, report.output_shape))
        report.output_dtype = str(result.dtype)
        report.warnings.extend(_stdout_default(output, common.format, loaded.format, result))
        if not isinstance(loaded, io.Picture):  # (a picture's crop takes no --fill)
            report.parameters = operation.parameters(loaded.data.dtype)  # as used: a --fill as the dtype holds it
        _add_steps(report, operation, loaded, common)
        metadata, unnamed = _named_as(_output_metadata(operation, loaded.metadata, header_of(loaded), common, output,
                                                       output_format), output, output_format, written,
                                      len(result.shape), common)
        report.warnings.extend([unnamed] if unnamed else [])
        if output_format == "tiff":
            report.notes.extend(summary.resized_pixels(loaded.metadata.pixel_size(), metadata.pixel_size()))
        if mapped:
            # renamed into place as the ExitStack closes
            from geomcli.engine import slabs

            assert not isinstance(result, io.Picture)  # only an array asks allocate for a map

            report.value_range, nan = slabs.range_and_nan(result)
            report.notes.extend([summary.NAN_NOTE] if nan else [])
            metadata = _said_of_map(metadata, tuple(result.shape), result.dtype, written, output_format, report)
        else:
            metadata = _as_image(metadata, tuple(loaded.shape), loaded.layout, tuple(result.shape), str(result.dtype),
                                 written, output_format, common, report)
            report.warnings.extend(io.write_array(
                result, output, format=output_format, options=write_options(common), metadata=metadata,
                layout=written))
            if isinstance(result, io.Picture):
                report.value_range = result.value_range()
            else:
                report.value_range, nan = summary.range_and_nan(result)
                report.notes.extend([summary.NAN_NOTE] if nan else [])
        if output_format == "npy" and io.dropped(metadata, output_format):
            # .npy holds no metadata, mapped or not: no warning for its nature, the record says what it left
            report.dropped = io.dropped(metadata, output_format)  # type: ignore[attr-defined]
    return report


def _as_image(metadata: Metadata, input_shape: tuple[int, ...], input_layout: str | None,
              shape: tuple[int, ...], dtype: str, written: str | None, output_format: str, common: Common,
              report: Report) -> Metadata:
    """``metadata`` as an image format takes a result of ``shape`` and ``dtype`` in the ``written``
    layout, said in ``report``: its last channel made alpha, or channels that are no colours
    written as RGB(A), whose GRAY or CMYK profile is then dropped, or a palette (--keep-palette)
    that a result of several channels, or a PNG's of 16-bit indices, cannot take. By the run, and
    by its dry run (:func:`planned_metadata`)."""
    from geomcli import io
    from geomcli.engine import layout as layouts

    held = io.written_shape(shape, output_format, written)
    # (a TIFF's writer judges its own, a stack of pages of indices included: its write_plan, run and dry run alike)
    if metadata.palette is not None and output_format in io.PALETTE_FORMATS - {"tiff"} and len(held) != 2:
        report.warnings.append(f"the palette ({len(metadata.palette) // 3} colours) is for one channel of indices, "
                               f"not a {'x'.join(map(str, held))} result; dropped")
        metadata = metadata._replace(palette=None, palette_alpha=None, palette_16bit=None)
    elif metadata.palette is not None and output_format in io.PALETTE_FORMATS - {"tiff"} and dtype != "uint8":
        # a palette indexes 8-bit values (a 16-bit PNG is grey or colour); a TIFF's writer judges its own
        report.warnings.append(f"{output_format.upper()} cannot hold the palette ({len(metadata.palette) // 3} "
                               f"colours) of {dtype} indices (a palette image's are 8-bit); dropped")
        metadata = metadata._replace(palette=None, palette_alpha=None, palette_16bit=None)

    input_layout = layouts.written_layout(input_shape, input_shape, common.layout, input_layout)
    made_alpha = _made_alpha(input_shape, input_layout, shape, written, output_format)
    no_colours = None if made_alpha else _no_colours(metadata, shape, written, output_format)
    report.warnings.extend(filter(None, [made_alpha or no_colours]))
    if no_colours and metadata.icc is not None and metadata.icc[16:20] != b"RGB ":
        # its GRAY or CMYK profile would label the RGB(A) (libpng: an invalid ICC colour space)
        space = metadata.icc[16:20].decode("latin-1").strip()
        metadata = metadata._replace(icc=None)
        report.warnings.append(f"its {space} ICC profile does not describe RGB; dropped")
    return metadata


def planned_metadata(operation: Operation, metadata: Metadata, header: Header, shape: tuple[int, ...],
                     common: Common, output: str, output_format: str, report: Report) -> None:
    """What the run of a file written whole says of its input's ``metadata`` (io.read_metadata,
    no pixel read), said in its dry run's ``report`` by the run's own code: the .ome.tif name it
    cannot keep, what the operation drops (a rotation's DPI and physical sizes), what the image
    format makes of its channels, what the output cannot hold (io.unkept: a JPEG's loss, a PNG's
    EXIF to a BMP...), the TIFF writer's own (its write_plan: axes, compression, an ImageJ
    spacing), and a .npy's ``dropped``. Not what the pixel values decide (a GIF's colours, a TIFF's
    12-bit fit). A big output written through a memory map (where the run's allocate maps it) says
    what the map drops instead."""
    from geomcli import io
    from geomcli.engine import layout as layouts

    written = layouts.result_layout(operation.takes_rank_layout(), header.shape, header.layout, shape, output,
                                    output_format, common)
    mapped = (not _compresses(output_format, common.fidelity, metadata) and metadata.palette is None
              and operation.writes_into(header, common)
              and io.maps_output(output, shape, header.dtype, format=output_format))  # as the run's allocate
    metadata, unnamed = _named_as(_output_metadata(operation, metadata, header, common, output, output_format),
                                  output, output_format, written, len(shape), common)
    report.warnings.extend([unnamed] if unnamed else [])
    if mapped:
        metadata = _said_of_map(metadata, shape, header.dtype, written, output_format, report)
    else:
        metadata = _as_image(metadata, header.shape, header.layout, shape, str(header.dtype), written, output_format,
                             common, report)
        report.warnings.extend(io.unkept(metadata, output_format, write_options(common)))
        if output_format == "tiff":  # the TIFF writer's own, from the shape, dtype and metadata (not the values)
            import numpy as np

            from geomcli.io import _tiff

            report.warnings.extend(_tiff.write_plan(shape, np.dtype(header.dtype), metadata, write_options(common),
                                                    io.display_name(output, output=True), written)[2])
    if output_format == "npy" and io.dropped(metadata, output_format):
        report.dropped = io.dropped(metadata, output_format)  # type: ignore[attr-defined]


def _said_of_map(metadata: Metadata, shape: tuple[int, ...], dtype: np.dtype, written: str | None,
                 output_format: str, report: Report) -> Metadata:
    """``metadata`` less what a memory-mapped output of ``shape`` holds itself, what the map
    cannot hold said in ``report``. By the run, and by its dry run (:func:`planned_metadata`)."""
    from geomcli.io import _tiff

    # (the compression is not compared: a compressed output is never mapped, see allocate)
    if output_format == "tiff" and _tiff.carries_ome(shape, written, metadata):
        # its OME axes, physical sizes and channel names (where they fit) are the map's
        refused = _tiff.channels_refusal(metadata.channels, shape, metadata.axes) if metadata.channels else None
        report.warnings.extend([refused] if refused else [])
        metadata = metadata._replace(axes=None, axes_kind=None, physical=(), channels=())
    if output_format == "tiff" and _tiff.carries_imagej(shape, dtype, written, metadata):
        # its ImageJ axes, resolution and unit, slice spacing and frame interval are the map's
        metadata = metadata._replace(axes=None, axes_kind=None, resolution=None, unit=None, imagej=(), zunit=None)
    if output_format != "npy":
        report.warnings.extend(_unmapped(metadata))
    return metadata


def _unmapped(metadata: Metadata) -> list[str]:
    """Warnings for what of ``metadata`` a memory-mapped TIFF does not hold, each named: one for
    what the map cannot hold (its ICC profile, resolution, tiles, the OME or ImageJ axes it could
    not write), one for each thing no output carries (as io.unkept names them from RAM).
    ``metadata``: what is left once the map's own (OME or ImageJ axes and calibration) are taken
    out; its encoding (compression, photometric) is the map's too, and axes of no kind are its layout's."""
    from geomcli import io

    lost = io.dropped(metadata._replace(dropped=(), axes=None, axes_kind=None, inks=False), "npy")
    if metadata.axes_kind in ("imagej", "ome"):
        lost.append(f"{'ImageJ' if metadata.axes_kind == 'imagej' else 'OME'} axes metadata ({metadata.axes})")
    if metadata.tile is not None:
        lost.append(f"TIFF tiles ({metadata.tile[0]} x {metadata.tile[1]})")
    said = [f"a big output is written through a memory map, which cannot hold the {', '.join(lost)}; dropped"] \
        if lost else []
    return said + [f"{what} cannot be carried; dropped" for what in metadata.dropped]


def _add_steps(report: Report, operation: Operation, loaded: Loaded | Picture, common: Common) -> None:
    """An operation of several steps (chain) reports each step's shape (``steps`` in its JSON)."""
    from geomcli.engine.operations import header_of

    steps = operation.trace(header_of(loaded), common)
    if steps:
        report.steps = steps  # type: ignore[attr-defined]  # a key of chain's records only


def _output_metadata(operation: Operation, metadata: Metadata, header: Header, common: Common, output: str,
                     output_format: str) -> Metadata:
    """The input's metadata as the output's: nothing but the compression with --strip, else as
    the operation makes it. An ImageJ calibration bound for an OME-TIFF (a .ome.tif name) is OME's
    physical sizes first, so the operation makes them as it makes an OME input's: a plane's
    rotation drops X's and Y's, not Z's, which went with the ImageJ resolution (the spacing's unit)."""
    if common.fidelity.strip:
        return metadata.kept()
    if metadata.axes_kind == "imagej":
        ome, refused = _named_as(metadata, output, output_format, header.layout, len(header.shape), common)
        metadata = metadata if refused else ome
    metadata = _physical_sizes(operation, operation.metadata(metadata, header, common), header, common)
    return _imagej_intervals(operation, metadata, header, common)


def unnamed_warning(output: str, output_format: str, layout: str | None, ndim: int, common: Common) -> str | None:
    """The warning a run gives for an output named .ome.tif that cannot be an OME-TIFF
    (:func:`_named_as`), as a dry run tells it from a header: of a file whose own OME or ImageJ
    axes were not read, which its layout (``layout``) then stands for."""
    from geomcli import io

    return _named_as(io.Metadata(), output, output_format, layout, ndim, common)[1]


def _named_as(metadata: Metadata, output: str, output_format: str, layout: str | None, ndim: int,
              common: Common) -> tuple[Metadata, str | None]:
    """``metadata`` as the output's name promises it: an OME-TIFF's for a TIFF named .ome.tif
    (io._tiff.as_ome), an ImageJ hyperstack's calibration as OME's physical sizes; a warning where
    it cannot be one. --strip writes none, on purpose."""
    if output_format != "tiff" or common.fidelity.strip:
        return metadata, None  # (tifffile and numpy unloaded: a plain image's crop needs neither)
    from geomcli.io import _tiff

    if not _tiff.names_ome(output):
        return metadata, None
    return _tiff.as_ome(metadata, layout, ndim)


def _axis_letters(layout: str, metadata: Metadata) -> str:
    """The file's axis letters of an array in ``layout``: Y and X for H and W, and for N the axis of
    the file's own that a layout reads as N (a ZCYX stack is NCHW, "Z as N")."""
    from geomcli.engine import layout as layouts

    if layout not in layouts.LAYOUTS:
        return layout  # a TIFF's own axes (TZCYX)
    letters = layout.replace("H", "Y").replace("W", "X")
    if "N" in layout and metadata.axes is not None and len(metadata.axes) == len(layout):
        letters = letters.replace("N", metadata.axes[layout.index("N")])
    return letters


def _imagej_intervals(operation: Operation, metadata: Metadata, header: Header, common: Common) -> Metadata:
    """An ImageJ hyperstack's slice spacing (along Z) and frame interval and rate (along T) as the
    operation makes them, as an OME-TIFF's PhysicalSizeZ: half the spacing after a resize to twice
    the slices."""
    from geomcli.engine import layout as layouts

    entries = dict(metadata.imagej)
    if not {"spacing", "finterval", "fps"} & entries.keys():
        return metadata
    letters = _axis_letters(layouts.resolve_layout(header.shape, common.layout, header.layout), metadata)
    ones = tuple(1.0 for _ in letters)
    factors = operation.scaled(ones, header, common)
    sampled: set[str] = set()
    if factors is None:  # a rotation's: the axes it samples have no size; the others are as it makes them
        factors = operation.scaled_apart(ones, header, common)
        sampled = {letters[index] for index in operation.sampled_axes(header, common) if index < len(letters)}
    if len(factors) != len(letters):
        return metadata
    factor = dict(zip(letters, factors))
    dropped = []
    for key, axis, power in (("spacing", "Z", 1), ("finterval", "T", 1), ("fps", "T", -1)):
        if key in entries and axis in sampled:  # (a volume's turn that mixes Z with Y or X)
            dropped.append(f"ImageJ {key} {float(entries.pop(key)):g}")
        elif key in entries:
            entries[key] = float(entries[key]) * factor.get(axis, 1.0) ** power
    if dropped:
        from geomcli.engine.operations import sizeless

        return metadata._replace(imagej=tuple(entries.items()),
                                 dropped=(*metadata.dropped, f"{', '.join(dropped)} of {sizeless(operation)}"))
    return metadata._replace(imagej=tuple(entries.items()))


def _physical_sizes(operation: Operation, metadata: Metadata, header: Header, common: Common) -> Metadata:
    """An OME-TIFF's physical pixel sizes as the operation makes them: Operation.scaled, as for an
    OME-Zarr's scale (twice the size along y and x after space-to-depth of blocksize 2)."""
    from geomcli.engine import layout as layouts

    if not metadata.physical:
        return metadata
    letters = _axis_letters(layouts.resolve_layout(header.shape, common.layout, header.layout), metadata)
    sizes = {axis: size for axis, size, _ in metadata.physical}
    given = tuple(sizes.get(letter, 1.0) for letter in letters)
    scale = operation.scaled(given, header, common)
    if scale is None:  # the sampled axes' sizes are lost; the others (a stack's Z) are as the operation makes them
        from geomcli.engine.operations import sizeless

        sampled = {letters[index] for index in operation.sampled_axes(header, common) if index < len(letters)}
        apart = dict(zip(letters, operation.scaled_apart(given, header, common)))
        kept = tuple((axis, apart.get(axis, size), unit) for axis, size, unit in metadata.physical
                     if axis not in sampled)
        lost = "" if not kept else " along " + ", ".join(axis for axis, _, _ in metadata.physical if axis in sampled)
        return metadata._replace(physical=kept,
                                 dropped=(*metadata.dropped, f"OME physical sizes{lost} of {sizeless(operation)}"))
    if len(scale) != len(letters):
        return metadata._replace(physical=())
    scaled = dict(zip(letters, scale))  # (an axis --layout names otherwise, a stack axis, keeps its size)
    return metadata._replace(physical=tuple((axis, scaled.get(axis, size), unit)
                                            for axis, size, unit in metadata.physical))


def _stdout_default(output: str, given: str | None, input_format: str, result: np.ndarray | Picture) -> list[str]:
    """-o - without --format writes NPY: piped on to a command that wants a picture, or put in a
    .png by the shell's >, the bytes are NPY without a word. Said where the input's own format
    could hold the result, the format the user would have expected."""
    from geomcli import io

    if output != "-" or given is not None or input_format == "npy":
        return []
    try:
        io.check_writable(result.dtype, tuple(result.shape), input_format, io.display_name(output, output=True))
    except GeomError:
        return []
    return [f"written as NPY, the default for -o -: give --format {input_format} for {input_format.upper()}, "
            "as the input is (or --format npy)"]


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


def affine_grid_file(theta_text: str | None, theta_file: str | None, numbers: tuple[float, ...] | None,
                     size: tuple[int, ...] | None, like: str | None, flags: tuple[Any, ...], dtype: str | None,
                     align_corners: bool, output: str, output_format: str, common: Common,
                     volume: bool = False) -> Report:
    """``geomcli affine-grid``: theta from a file, inline ``numbers`` or the transform ``flags``
    (geomcli.engine.theta), the grid's size from ``size`` or ``like`` (``volume``: its z-stack as
    one volume); the grids written to ``output``. Its report, with any failure in it."""
    from geomcli.engine import summary
    from geomcli.engine import theta as thetas
    from geomcli.io import _remote

    _remote.configure(common.storage_options)
    # theta as given; made from the flags, the matrix used (once it is made) and those flags
    made = {} if theta_text is not None else {"flags": thetas.given_flags(flags)}
    report = summary.Report("affine-grid", theta_text or "(flags)", output,
                            parameters={"align_corners": align_corners, "theta": theta_text, **made,
                                        **({"volume": True} if volume else {})})
    with reporting(report, common):
        theta, grid_size = thetas.resolve(size, like, theta_file, numbers, flags, dtype, common.layout,
                                          common.max_pixels, auto_orient=common.fidelity.auto_orient,
                                          frames=common.fidelity.frames or "first", series=common.fidelity.series,
                                          page=common.fidelity.page, warnings=report.warnings, volume=volume)
        if theta_text is None and len(theta):  # N = 0 (--size 0,...) makes no grid and uses no matrix
            report.parameters["theta"] = thetas.recorded(theta[0])
        _write_grid(report, theta, grid_size, align_corners, output, output_format, common)
    return report


def _write_grid(report: Report, theta: np.ndarray, size: tuple[int, ...], align_corners: bool, output: str,
                output_format: str, common: Common) -> None:
    """Make the grids and write them to ``output`` (a file memory-mapped when big, or a .zarr), filling ``report``."""
    import geomcli.ops.affine_grid as grid_ops
    from geomcli import io
    from geomcli.engine import summary

    report.input_shape, report.input_dtype = list(theta.shape), str(theta.dtype)
    shape = grid_ops.affine_grid_output_shape(theta.shape, size)
    try:  # grids are floats: -o grid.png is what the options ask, a usage fault as warp's float result to PNG
        io.check_writable(theta.dtype, shape, output_format, io.display_name(output, output=True))
    except GeomError as error:
        raise OptionFault(str(error)) from error
    if output_format == "zarr":  # a grid is small (within --max-pixels): made whole, stored whole
        from geomcli.engine import zarr_file

        grid = grid_ops.affine_grid(theta, size, align_corners, threads=common.threads)
        zarr_file.write_whole(grid, output)
        report.value_range = summary.value_range(grid)
    else:
        grid = _write_grid_file(theta, size, shape, align_corners, output, output_format, common, report)
    report.output_shape, report.output_dtype = list(grid.shape), str(grid.dtype)
    if not _all_finite(theta):
        report.notes.append("theta holds NaN or Inf: so do the grid positions it reaches")


def _write_grid_file(theta: np.ndarray, size: tuple[int, ...], shape: tuple[int, ...], align_corners: bool,
                     output: str, output_format: str, common: Common, report: Report) -> np.ndarray:
    """The grids written to a file (memory-mapped when big); their range in ``report``."""
    import geomcli.ops.affine_grid as grid_ops
    from geomcli import io
    from geomcli.engine import summary

    with ExitStack() as outputs:
        # the kernel's grid is theta's type in native byte order
        grid = mapped_output(outputs, output, shape, theta.dtype.newbyteorder("="), output_format)
        if grid is None:
            grid = grid_ops.affine_grid(theta, size, align_corners, threads=common.threads)
            io.write_array(grid, output, format=output_format)
            report.value_range = summary.value_range(grid)
        else:
            from geomcli.engine import slabs

            slabs.affine_grid(theta, size, align_corners, threads=common.threads, out=grid)
            report.value_range = slabs.value_range(grid)
    return grid


def _all_finite(theta: np.ndarray) -> bool:
    """Whether theta holds no NaN or Inf; a broadcast theta (one matrix for every N) is checked once."""
    import numpy as np

    distinct = theta[:1] if theta.ndim and theta.strides[0] == 0 else theta
    return bool(np.isfinite(distinct).all())
