"""The options several commands share, as decorators that hand each command the engine's plain
records (geomcli.engine.options) instead of loose flags."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import click

from geomcli.cli.params import Float, FloatList, Int, KeyValue, Name
from geomcli.constants import DEFAULT_MAX_PIXELS, FORMAT_ALIASES, FORMATS, LAYOUTS, MAX_THREADS, TIFF_COMPRESSIONS
from geomcli.engine.options import BatchOptions, Common, Fidelity


def _checked_storage_options(ctx: click.Context, param: click.Parameter,
                             value: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    """--storage-option's pairs, geomcli's own deadline_seconds checked as the command line is
    read: a run of no URL never checked it ('info a.png --storage-option deadline_seconds=abc'
    exited 0)."""
    if value:
        from geomcli.errors import PlanError
        from geomcli.io import _remote

        for key, given in value:
            if key == _remote.DEADLINE_OPTION:
                try:
                    _remote.check_deadline(given)
                except PlanError as error:
                    raise click.BadParameter(str(error).removeprefix("--storage-option "), ctx, param) from error
    return value


storage_option = click.option(
    "--storage-option", "storage_options", type=KeyValue(), multiple=True, callback=_checked_storage_options,
    help="An option for the filesystems of s3://, gs://, az:// and https:// inputs and outputs "
         "(endpoint_url=..., anon=true; a JSON value is read as JSON); repeat for more. geomcli's own, "
         "deadline_seconds=N (default 60; null: none), bounds each read or put with its retries; a store "
         "that answers none of 3 in a row is given up for the run. Credentials "
         "come from each filesystem's own configuration (AWS_* variables, ~/.aws, ...).")


def complete_a_file(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """A shell completes the value to a path, as a click.Path's: for an option that names a file
    but is not one (--theta FILE|NUMBERS)."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


files_from_option = click.option(
    "--files-from", metavar="FILE", type=Name(dir_okay=False, allow_dash=True),
    help="Take inputs from FILE too, one a line or NUL-separated (find -print0; - for stdin), each name "
         "as written (no glob).")


def common_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared options and hand the command one ``Common`` as ``common``."""

    @click.option("--layout", type=click.Choice(LAYOUTS), default=None,
                  help="Axes of a tensor input. Images keep their own, HWC (HW for one channel), whatever "
                       "--layout says. Rank 4 defaults to NCHW where channels matter (space-to-depth, "
                       "depth-to-space, grid-sample, warp). On a tensor, --shape, --sizes and --scales name "
                       "every axis unless --axes or --layout picks some.")
    @click.option("--format", "format_", type=click.Choice((*FORMATS, *FORMAT_ALIASES), case_sensitive=False),
                  default=None,
                  help="Output format for -o - (default npy) or a name without a known extension; "
                       "a known extension decides, and --format must agree with it.")
    @click.option("-q", "--quiet", is_flag=True, help="No summary and no warnings on stderr (errors are still shown).")
    @click.option("--json", "as_json", is_flag=True,
                  help="One JSON object per file on stdout (on stderr when stdout carries the data).")
    @click.option("--debug", is_flag=True, help="Show the traceback of an error.")
    @click.option("--max-pixels", type=Int(min=1), default=DEFAULT_MAX_PIXELS, show_default=True,
                  envvar="GEOMCLI_MAX_PIXELS", show_envvar=True,
                  help="Refuse inputs and outputs with more elements than this, before allocating them.")
    @click.option("--threads", type=Int(min=1, max=MAX_THREADS), default=None, envvar="GEOMCLI_THREADS",
                  show_envvar=True, help="Threads for large arrays and PNG compression; results (and files) are "
                  "the same for any count.  [default: every CPU]")
    @storage_option
    @functools.wraps(command)
    def wrapper(layout: str | None, format_: str | None, quiet: bool, as_json: bool, debug: bool,
                max_pixels: int, threads: int | None, storage_options: tuple[tuple[str, Any], ...],
                **kwargs: Any) -> Any:
        if as_json and not is_stdout(kwargs.get("output")):
            from geomcli.engine import report

            report.check_stdout()  # before any file is written, not at the first record
        format_ = format_ and FORMAT_ALIASES.get(format_.lower(), format_.lower())
        common = Common(layout, format_, quiet, as_json, debug, max_pixels, threads,
                        storage_options=storage_options)
        return command(common=common, **kwargs)

    return wrapper


def fidelity_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Metadata, frames, TIFF pages and encoder options; they go into ``common.fidelity``.
    Applied under ``common_options``."""

    @click.option("--no-auto-orient", is_flag=True,
                  help="Keep an image's pixels as stored instead of turning them upright by its EXIF (or "
                       "TIFF) orientation; the EXIF is then written as found.")
    @click.option("--strip", is_flag=True,
                  help="Write no metadata: no ICC profile, DPI/resolution, EXIF or TIFF axes (and no "
                       "warnings about them). Without it, each is kept where the output format holds "
                       "it, with one warning per field it cannot hold.")
    @click.option("--keep-palette", is_flag=True,
                  help="Read a palette PNG, GIF, BMP or TIFF (a label mask) as its indices, H x W uint8 "
                       "(a TIFF's of its dtype, uint16 too; a TIFF's pages, or an animated PNG's frames "
                       "with --frames all, stacked on a leading axis), and write them with its palette and "
                       "transparency to PNG, GIF, BMP or TIFF (.npy and "
                       ".zarr hold the indices alone). Only nearest sampling keeps indices: a linear or cubic "
                       "mode is refused.  [default: palette images read as RGB or RGBA]")
    @click.option("--frames", type=click.Choice(["all", "first"]), default=None,
                  help="An animated GIF, WebP or PNG: all stacks its frames on a leading axis (write "
                       ".tiff or .npy), first takes frame 1.  [default: refuse animations]")
    @click.option("--series", type=Int(min=0), default=None, metavar="N",
                  help="TIFF: read series N (from 0) only.  [default: every page, and every series of "
                       "one shape, stacked on the leading axis]")
    @click.option("--page", type=Int(min=0), default=None, metavar="N",
                  help="TIFF: read page N (from 0) only.")
    @click.option("--compress-level", type=Int(0, 9), default=None, metavar="0-9",
                  help="PNG output: zlib level; 0 stores, 9 is the smallest. At 1-8 a photograph's rows "
                       "are run-length coded where a band of them shows that is no bigger: a few times "
                       "faster.  [default: 7]")
    @click.option("--quality", type=Int(1, 100), default=None, metavar="1-100",
                  help="JPEG output: quality.  [default: a JPEG input's own quantisation tables, else "
                       "95] WebP output: lossy at this quality (default: lossless).")
    @click.option("--subsampling", type=click.Choice(["4:4:4", "4:2:2", "4:2:0"]), default=None,
                  help="JPEG output: chroma subsampling.  [default: a JPEG input's, else 4:2:0]")
    @click.option("--compression", type=click.Choice(TIFF_COMPRESSIONS), default=None,
                  help="TIFF output: compression (through imagecodecs).  [default: the input TIFF's, "
                       "else none]")
    @functools.wraps(command)
    def wrapper(no_auto_orient: bool, strip: bool, keep_palette: bool, frames: str | None, series: int | None,
                page: int | None, compress_level: int | None, quality: int | None, subsampling: str | None,
                compression: str | None, common: Common, **kwargs: Any) -> Any:
        if series is not None and page is not None:
            raise click.UsageError("give --series or --page, not both", click.get_current_context())
        fidelity = Fidelity(not no_auto_orient, strip, frames, series, page, compress_level, quality, compression,
                            subsampling, keep_palette)
        return command(common=dataclasses.replace(common, fidelity=fidelity), **kwargs)

    return wrapper


def output_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("-o", "--output", required=True, metavar="OUTPUT",
                        type=click.Path(allow_dash=True, writable=False), callback=_no_folder,
                        help="Where to write the result; - for stdout.")(command)


_BATCH_ONLY = {"name": "--name", "recursive": "-r/--recursive", "jobs": "-j/--jobs", "keep_going": "--fail-fast",
               "skip_existing": "--skip-existing", "no_clobber": "-n/--no-clobber", "dry_run": "--dry-run",
               "scheduler": "--scheduler", "files_from": "--files-from"}


def files_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """INPUT..., -o for one file, or --out-dir and the batch options for many; the command gets
    ``inputs``, ``output`` and, with --out-dir, one ``BatchOptions`` as ``batch`` (else None)."""
    return click.argument("inputs", nargs=-1, required=False, metavar="INPUT...",
                          type=Name(allow_dash=True, readable=False))(outputs_options(command))


def _no_folder(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """-o names a file, or a zarr array (a folder, replaced whole); - is stdout, whatever is named so."""
    import os

    from geomcli.io._zarr import is_zarr

    if value is not None and value != "-" and os.path.isdir(value) and not is_zarr(value):
        raise click.BadParameter(f"File {value!r} is a directory.", ctx, param)
    return value


def _no_dash(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--out-dir - would make a folder named -, where - means stdin or stdout to every command."""
    if value == "-":
        raise click.BadParameter("- is stdout, which takes one output (-o -); a folder named - is ./-", ctx, param)
    return value


def _checked_scheduler(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--scheduler (or GEOMCLI_SCHEDULER) checked as the command line is read, as GEOMCLI_THREADS
    is: a run that does not use it (-o, -j) never checked it ('GEOMCLI_SCHEDULER=bogus crop-pad
    a.png -o b.png' exited 0, where a batch refused it)."""
    if value is not None:
        from geomcli.engine.scheduler import parse_scheduler
        from geomcli.errors import PlanError

        try:
            parse_scheduler(value)
        except PlanError as error:
            # named as the batch's own check names it (plan), and the variable where it came from
            from_environment = ctx.get_parameter_source("scheduler") is click.core.ParameterSource.ENVIRONMENT
            hint = "'--scheduler' (env var: 'GEOMCLI_SCHEDULER')" if from_environment else "'--scheduler'"
            raise click.BadParameter(str(error), ctx, param_hint=hint) from error
    return value


def outputs_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """-o, or --out-dir and the batch options: the command gets ``output`` and ``batch``."""

    @click.option("-o", "--output", metavar="OUTPUT", type=click.Path(allow_dash=True), callback=_no_folder,
                  help="Where to write the result of one INPUT; - for stdout.")
    @click.option("--out-dir", metavar="DIR", type=click.Path(file_okay=False), callback=_no_dash,
                  help="Write one output per input into DIR (made if missing): for several inputs, "
                       "folders and quoted globs such as 'shots/**/*.png'.")
    @click.option("--name", default="{stem}{suffix}", show_default=True, metavar="TEMPLATE",
                  help="Output name under --out-dir from {stem} {suffix} {name} {parent} {index} "
                       "(format specs allowed: {index:05d}); its extension picks the format.")
    @click.option("-r", "--recursive", is_flag=True, help="Take folders' subfolders too, mirrored under --out-dir.")
    @click.option("-j", "--jobs", type=Int(min=1), default=None, metavar="N",
                  help="Worker processes.  [default: the number of CPUs; 1 for under 8 MB of input]")
    @click.option("--keep-going/--fail-fast", default=True, show_default=True,
                  help="After a file fails, go on with the rest, or stop.")
    @click.option("--skip-existing", is_flag=True,
                  help="With --out-dir: skip inputs whose output is not older than they are (nor than the "
                       "--grid or --theta file).")
    @click.option("-n", "--no-clobber", is_flag=True,
                  help="With --out-dir: never replace an existing file; skip its input.")
    @click.option("--dry-run", is_flag=True,
                  help="With --out-dir: list input -> output and the output shape from the headers; "
                       "write nothing.")
    @files_from_option
    @click.option("--scheduler", default=None, metavar="local|local:N|tcp://HOST:PORT", envvar="GEOMCLI_SCHEDULER",
                  show_envvar=True, callback=_checked_scheduler,
                  help="Do the files on Dask: local:N starts N worker processes for the run, an address joins "
                       "a running cluster (pip install 'geomcli[dask]'); -j N runs without it.  [default: -j]")
    @functools.wraps(command)
    def wrapper(out_dir: str | None, name: str, recursive: bool, jobs: int | None, keep_going: bool,
                skip_existing: bool, no_clobber: bool, dry_run: bool, files_from: str | None, scheduler: str | None,
                **kwargs: Any) -> Any:
        if jobs is not None and click.get_current_context().get_parameter_source(
                "scheduler") is click.core.ParameterSource.ENVIRONMENT:
            scheduler = None  # GEOMCLI_SCHEDULER is a default: -j on the command line wins
        batch = None if out_dir is None else BatchOptions(out_dir, name, recursive, jobs, not keep_going,
                                                          skip_existing, no_clobber, dry_run, scheduler, files_from)
        return command(batch=batch, **kwargs)

    return wrapper


def read_stdin_once(*readers: tuple[str, str | None]) -> None:
    """A usage error (exit 2), before anything is read, where two of ``readers`` (an option's name
    and its value; ``the input`` for INPUT) name stdin (``-``, /dev/stdin, ...): it can be read
    once, and the second would find it empty."""
    from geomcli import io

    named = [f"{name} {value}" for name, value in readers if value is not None and io.is_stdin(value)]
    if len(named) > 1:
        raise click.UsageError(f"{named[0]} and {named[1]} cannot both read stdin: it can be read once",
                               click.get_current_context())


def stdin_readers(inputs: tuple[str, ...], batch: BatchOptions | None) -> list[tuple[str, str | None]]:
    """What of the inputs may read stdin: INPUT ``-`` (or /dev/stdin) and ``--files-from -`` (for
    read_stdin_once)."""
    from geomcli import io

    return [("the input", next((path for path in inputs if io.is_stdin(path)), None)),
            ("--files-from", None if batch is None else batch.files_from)]


def is_stdout(output: str | None) -> bool:
    """Whether the data goes to standard output (``-``, /dev/stdout, ...): JSON then goes to stderr."""
    from geomcli import io

    return output is not None and io.is_stdout(output)


def transform_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """theta from a file, inline numbers, or the transform flags: one vocabulary for affine-grid
    and warp. The command gets ``theta_text``, ``rotate``, ``scale``, ``translate`` and ``shear``."""
    for option in reversed([
        click.option("--theta", "theta_text", default=None, metavar="FILE|NUMBERS", shell_complete=complete_a_file,
                      help="(N,2,3)/(N,3,4) matrices from a .npy/.tiff/.zarr (- reads one from stdin), or inline: "
                           "6 (2-D) or 12 (3-D) comma-separated numbers per matrix, row by row.  "
                           "[default: the transform flags]"),
        click.option("--rotate", type=Float(), default=0.0, show_default=True, help="Rotation in degrees (2-D)."),
        click.option("--scale", type=FloatList((1, 2)), default="1", show_default=True, metavar="S[,SY]",
                      help="Scale of x and y (2-D)."),
        click.option("--translate", type=FloatList((2,)), default="0,0", show_default=True, metavar="TX,TY",
                      help="Translation in grid units, where the image spans -1..1 (2-D)."),
        click.option("--shear", type=FloatList((2,)), default="0,0", show_default=True, metavar="SX,SY",
                      help="Shear factors of x by y and of y by x (2-D)."),
    ]):
        command = option(command)
    return command


def flags_given() -> list[str]:
    """The transform flags typed on the command line (not left at their identity defaults)."""
    ctx = click.get_current_context()
    return [name for name in ("rotate", "scale", "translate", "shear")
            if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT]


def sampling_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """GridSample's attributes, shared by grid-sample and warp: --mode, --padding-mode,
    --align-corners and --fill."""
    for option in reversed([
        click.option("--mode", default="linear", show_default=True, callback=_sampling_mode,
                      shell_complete=_complete_sampling_mode, metavar="[linear|nearest|cubic]",
                      help="Interpolation: N-linear, nearest (half to even) or N-cubic (Keys, A = -0.75)."),
        click.option("--padding-mode", type=click.Choice(["zeros", "border", "reflection"]), default="zeros",
                      show_default=True, help="What a position outside the input reads: --fill (0), the nearest "
                      "border pixel, or the input mirrored at its borders."),
        click.option("--align-corners", is_flag=True,
                      help="-1 and 1 are the centres of the corner pixels, not their outer edges."),
        click.option("--fill", type=str, default=None,
                      help="What a tap outside reads with --padding-mode zeros (a tap of weight 0, or of the grid's "
                           "rounding beside a pixel centre, reads 0, so a nan fill reaches only the pixels it "
                           "weighs in), and a position that is not finite (NaN, "
                           "inf) with any padding mode, in the input's dtype (must fit it exactly).  "
                           "[default: the dtype's zero]"),
    ]):
        command = option(command)
    return command


# not a click.Choice, which would not name GridSample-16's modes as such (_sampling_mode)
SAMPLING_MODES = ("linear", "nearest", "cubic")


def _complete_sampling_mode(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """The modes a shell completes --mode to, as a Choice's would be."""
    return [mode for mode in SAMPLING_MODES if mode.startswith(incomplete)]


def _sampling_mode(ctx: click.Context, param: click.Parameter, value: str) -> str:
    renamed = {"bilinear": "linear", "bicubic": "cubic"}
    if value in renamed:
        raise click.BadParameter(f"{value!r} is GridSample-16's name; opset 20 and later call it "
                                 f"{renamed[value]!r}", ctx, param)
    if value not in SAMPLING_MODES:
        raise click.BadParameter(f"{value!r} is not one of 'linear', 'nearest', 'cubic'", ctx, param)
    return value
