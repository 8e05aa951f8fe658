"""The geomcli command line: one short function per subcommand over the kernels.

Only click and the standard library load at import time, so ``--help``, ``--version``
and usage errors stay fast; numpy and the file backends load inside the commands.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from geomcli.constants import (
    DEFAULT_MAX_PIXELS,
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    FORMATS,
    LAYOUTS,
    TIFF_COMPRESSIONS,
    plain_number,
)
from geomcli.errors import GeomError, StdoutError

if TYPE_CHECKING:
    from geomcli.io import Header
    from geomcli.transform import Operation


class IntList(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2
    """Comma-separated integers, ``224,224``; ``224x224`` is accepted too. Each fits an int64;
    ``sizes``: none is negative; ``empty``: no integers at all (``''``) are allowed."""

    name = "DIMS"

    def __init__(self, sizes: bool = False, empty: bool = False) -> None:
        self.sizes = sizes
        self.empty = empty

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        text = str(value).strip().lower().replace("x", ",")
        if not text and not self.empty:
            self.fail(f"{value!r}: give one or more comma-separated integers", param, ctx)
        try:
            if not plain_number(text):
                raise ValueError(text)
            numbers = tuple(int(part) for part in text.split(",")) if text else ()
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of integers", param, ctx)
        for number in numbers:
            if not -(2**63) <= number < 2**63:
                self.fail(f"{number} does not fit a 64-bit integer", param, ctx)
            if self.sizes and number < 0:
                self.fail(f"{value!r}: a length cannot be negative", param, ctx)
        return numbers


class FloatList(click.ParamType):  # type: ignore[type-arg]
    """Comma-separated numbers, ``1.5,-2``."""

    name = "NUMBERS"

    def __init__(self, counts: tuple[int, ...] = ()) -> None:
        self.counts = counts

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[float, ...]:
        if isinstance(value, tuple):
            return value
        try:
            if not plain_number(str(value)):
                raise ValueError(value)
            numbers = tuple(float(part) for part in str(value).split(","))
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of numbers", param, ctx)
        if self.counts and len(numbers) not in self.counts:
            wanted = " or ".join(map(str, self.counts))
            self.fail(f"{value!r} has {len(numbers)} numbers, expected {wanted}", param, ctx)
        return numbers


class Int(click.IntRange):
    """click's IntRange, refusing what :func:`plain_number` refuses (``--blocksize ２``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not plain_number(value):
            self.fail(f"{value!r} is not a valid integer", param, ctx)
        return super().convert(value, param, ctx)


class Float(click.types.FloatParamType):
    """click's float, refusing what :func:`plain_number` refuses (``--rotate ９０``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not plain_number(value):
            self.fail(f"{value!r} is not a valid float", param, ctx)
        return super().convert(value, param, ctx)


# The options' records are NamedTuples: a frozen dataclass would take half a millisecond to
# define, at every start-up.
class Fidelity(NamedTuple):
    """What a transform keeps of a file besides its values, and how it encodes the output."""

    auto_orient: bool = True
    strip: bool = False
    frames: str | None = None
    series: int | None = None
    page: int | None = None
    compress_level: int | None = None
    quality: int | None = None
    compression: str | None = None


class Common(NamedTuple):
    """The options every transform takes."""

    layout: str | None
    format: str | None
    quiet: bool
    json: bool
    debug: bool
    max_pixels: int
    threads: int | None
    fidelity: Fidelity = Fidelity()


def common_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared options and hand the command one ``Common`` as ``common``."""

    @click.option("--layout", type=click.Choice(LAYOUTS), default=None,
                  help="Axes of a tensor input. Images are HWC (HW for one channel); rank 4 defaults to NCHW.")
    @click.option("--format", "format_", type=click.Choice(FORMATS, case_sensitive=False), default=None,
                  help="Output format for -o - (default npy) or a name without a known extension; "
                       "a known extension decides, and --format must agree with it.")
    @click.option("-q", "--quiet", is_flag=True, help="No summary on stderr (errors are still shown).")
    @click.option("--json", "as_json", is_flag=True,
                  help="One JSON object per file on stdout (on stderr when stdout carries the data).")
    @click.option("--debug", is_flag=True, help="Show the traceback of an error.")
    @click.option("--max-pixels", type=Int(min=1), default=DEFAULT_MAX_PIXELS, show_default=True,
                  envvar="GEOMCLI_MAX_PIXELS", show_envvar=True,
                  help="Refuse inputs and outputs with more elements than this, before allocating them.")
    @click.option("--threads", type=Int(min=1), default=None, envvar="GEOMCLI_THREADS",
                  show_envvar=True, help="Threads for large arrays and PNG compression; results (and files) are "
                  "the same for any count.  [default: every CPU]")
    @functools.wraps(command)
    def wrapper(layout: str | None, format_: str | None, quiet: bool, as_json: bool, debug: bool,
                max_pixels: int, threads: int | None, **kwargs: Any) -> Any:
        if as_json and not _is_stdout(kwargs.get("output")):
            from geomcli import transform

            transform.check_stdout()  # before any file is written, not at the first record
        common = Common(layout, format_ and format_.lower(), quiet, as_json, debug, max_pixels, threads)
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
    @click.option("--frames", type=click.Choice(["all", "first"]), default=None,
                  help="An animated GIF, WebP or PNG: all stacks its frames on a leading axis (write "
                       ".tiff or .npy), first takes frame 1.  [default: refuse animations]")
    @click.option("--series", type=Int(min=0), default=None, metavar="N",
                  help="TIFF: read series N (from 0) only.  [default: every page, and every series of "
                       "one shape, stacked on the leading axis]")
    @click.option("--page", type=Int(min=0), default=None, metavar="N",
                  help="TIFF: read page N (from 0) only.")
    @click.option("--compress-level", type=Int(0, 9), default=None, metavar="0-9",
                  help="PNG output: zlib level; 0 stores, 9 codes the rows both ways and keeps the "
                       "smaller. At 1-8, rows like a photograph's are run-length coded where a sample "
                       "of them shows that is as small: five times faster, at most 1.6% bigger in our "
                       "tests.  [default: 7]")
    @click.option("--quality", type=Int(1, 100), default=None, metavar="1-100",
                  help="JPEG output: quality (default 95). WebP output: lossy at this quality "
                       "(default: lossless).")
    @click.option("--compression", type=click.Choice(TIFF_COMPRESSIONS), default=None,
                  help="TIFF output: compression; zlib and lzma always work, lzw, jpeg, packbits and zstd "
                       "need imagecodecs.  [default: the input TIFF's, else none]")
    @functools.wraps(command)
    def wrapper(no_auto_orient: bool, strip: bool, frames: str | None, series: int | None, page: int | None,
                compress_level: int | None, quality: int | None, compression: str | None, common: Common,
                **kwargs: Any) -> Any:
        if series is not None and page is not None:
            raise click.UsageError("give --series or --page, not both", click.get_current_context())
        fidelity = Fidelity(not no_auto_orient, strip, frames, series, page, compress_level, quality, compression)
        return command(common=common._replace(fidelity=fidelity), **kwargs)

    return wrapper


def output_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("-o", "--output", required=True, metavar="OUTPUT",
                        type=click.Path(dir_okay=False, allow_dash=True, writable=False),
                        help="Where to write the result; - for stdout.")(command)


class BatchOptions(NamedTuple):
    """The options of a run over many files (``--out-dir`` and what goes with it)."""

    out_dir: str | None
    name: str
    recursive: bool
    jobs: int | None
    fail_fast: bool
    skip_existing: bool
    no_clobber: bool
    dry_run: bool


_BATCH_ONLY = {"name": "--name", "recursive": "-r/--recursive", "jobs": "-j/--jobs", "keep_going": "--fail-fast",
               "skip_existing": "--skip-existing", "no_clobber": "-n/--no-clobber", "dry_run": "--dry-run"}


def files_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """INPUT..., -o for one file, or --out-dir and the batch options for many; the command gets
    ``inputs``, ``output`` and one ``BatchOptions`` as ``batch``."""

    @click.argument("inputs", nargs=-1, required=True, metavar="INPUT...",
                    type=click.Path(allow_dash=True, readable=False))
    @click.option("-o", "--output", metavar="OUTPUT", type=click.Path(dir_okay=False, allow_dash=True),
                  help="Where to write the result of one INPUT; - for stdout.")
    @click.option("--out-dir", metavar="DIR", type=click.Path(file_okay=False),
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
    @click.option("--skip-existing", is_flag=True, help="Skip inputs whose output is not older than they are.")
    @click.option("-n", "--no-clobber", is_flag=True, help="Never replace an existing file; skip its input.")
    @click.option("--dry-run", is_flag=True,
                  help="List input -> output and the output shape from the headers; write nothing.")
    @functools.wraps(command)
    def wrapper(out_dir: str | None, name: str, recursive: bool, jobs: int | None, keep_going: bool,
                skip_existing: bool, no_clobber: bool, dry_run: bool, **kwargs: Any) -> Any:
        batch = BatchOptions(out_dir, name, recursive, jobs, not keep_going, skip_existing, no_clobber, dry_run)
        return command(batch=batch, **kwargs)

    return wrapper


def run_files(command: str, inputs: tuple[str, ...], output: str | None, batch: BatchOptions, common: Common,
              parameters: dict[str, Any], operate: Operation,
              shape_of: Callable[[Header], tuple[int, ...]]) -> None:
    """One file with -o, or many with --out-dir (geomcli.batch, imported only then)."""
    ctx = click.get_current_context()
    if batch.out_dir is None:
        if output is None:
            raise click.UsageError("give -o OUTPUT for one INPUT, or --out-dir DIR", ctx)
        if len(inputs) > 1:
            raise click.UsageError(f"-o takes one INPUT, found {len(inputs)}; give --out-dir DIR for several", ctx)
        if os.path.isdir(inputs[0]):
            raise click.UsageError(f"{inputs[0]} is a folder; give --out-dir DIR for the files in it", ctx)
        for name, flag in _BATCH_ONLY.items():
            if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT:
                raise click.UsageError(f"{flag} goes with --out-dir, not -o", ctx)
        run_transform(command, inputs[0], output, common, parameters, operate)
        return
    if output is not None:
        raise click.UsageError("-o and --out-dir cannot be combined: -o names one output, --out-dir a folder", ctx)
    from geomcli import batch as batches

    code = batches.run(batches.Task(command, parameters, operate, shape_of, common), inputs, batch)
    if code:
        raise SystemExit(code)


def _output_format(output: str, common: Common) -> str:
    """The output's format, or a usage error (exit 2) for an unknown extension, one --format
    contradicts, or one an encoder option is not for (--compression to a PNG): before any input is read."""
    from geomcli import io, transform

    if not output:
        raise click.BadParameter("an empty name; give a file name, or - for stdout", param_hint="'-o' / '--output'")
    try:
        output_format = transform.output_format(output, common.format)
    except transform.FormatConflictError as error:
        raise click.BadParameter(f"{error}; drop --format or change the extension",
                                 param_hint="'-o' / '--output'") from error
    except GeomError as error:
        raise click.BadParameter(str(error), param_hint="'-o' / '--output'") from error
    refusal = io.refused_option(transform.write_options(common), output_format)
    if refusal is not None:
        raise click.UsageError(f"{refusal} (-o {output})", click.get_current_context())
    return output_format


def run_transform(command: str, input_path: str, output: str, common: Common, parameters: dict[str, Any],
                  operate: Operation) -> None:
    """One file from the command line: exit 2 for a bad output name, 1 if the file failed."""
    from geomcli import transform

    output_format = _output_format(output, common)
    report = transform.transform_file(command, input_path, output, output_format, common, parameters, operate)
    code = transform.finish(report, common, data_on_stdout=_is_stdout(output))
    if code:
        raise SystemExit(code)


def _drop_stdout() -> None:
    """Whoever read our stdout has gone: what is left for it goes to /dev/null, not to an error."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class _Command(click.Command):
    """--help and --version print while the arguments are parsed, then stop: their text for a
    closed stdout is an error (exit 1) and for a reader gone exit 141, as for any command's text."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.ClickException as error:
            _escape_message(error)
            raise
        except click.exceptions.Exit as stop:
            if stop.exit_code == 0 and sys.stdout is None:  # click.echo wrote nowhere
                raise StdoutError("<stdout>: standard output is closed") from None
            raise
        except BrokenPipeError:  # before click's main, which would exit 1
            _drop_stdout()
            raise SystemExit(EXIT_BROKEN_PIPE) from None
        except KeyboardInterrupt:  # before click's main, which would say "Aborted!" and exit 1
            click.echo("Interrupted", err=True)
            raise SystemExit(EXIT_INTERRUPTED) from None


class _Group(_Command, click.Group):
    """Ctrl-C exits 130, SIGTERM 143 and a closed stdout pipe 141, all without a traceback."""

    command_class = _Command

    def invoke(self, ctx: click.Context) -> Any:
        import signal  # here, not at start-up: geomcli --version and --help never get this far

        from geomcli.io import _atomic

        _signalled.clear()
        _atomic.signals_taken = _signalled
        _hold_standard_descriptors()
        # a signal the caller ignores (SIG_IGN: `geomcli ... &` in a script) stays ignored
        previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
        if previous[signal.SIGINT] is signal.default_int_handler:
            signal.signal(signal.SIGINT, _interrupt)
        if previous[signal.SIGTERM] == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _terminate)
        try:
            try:
                done = super().invoke(ctx)
            except ImportError:
                if not _signalled:
                    raise
                done = None  # numpy turns a signal that breaks into its import into an ImportError
            # a signal taken whose exception became that, or vanished (see _atomic.signals_taken)
            _atomic.refuse_after_signal()
            return done
        except click.ClickException as error:
            _escape_message(error)
            raise
        except KeyboardInterrupt:
            click.echo("Interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            _drop_stdout()
            ctx.exit(EXIT_BROKEN_PIPE)
        except StdoutError as error:
            click.echo(f"Error: {error}", err=True)
            ctx.exit(EXIT_FAILED)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
            _signalled.clear()  # a library write later in this process is not this run's to stop


def _escape_message(error: click.ClickException) -> None:
    """Escape the control characters of the message click is to show for ``error`` (a path in it
    must not break the line), as every other line geomcli prints has them escaped. Not the help
    text that click (8.2+) shows for a command given no arguments."""
    from geomcli.summary import printable

    if not isinstance(error, getattr(click.exceptions, "NoArgsIsHelpError", ())):
        error.message = printable(error.message)  # type: ignore[misc]  # Final to type checkers only


def _is_stdout(output: str | None) -> bool:
    """Whether the data goes to standard output (``-``, /dev/stdout, ...): JSON then goes to stderr."""
    from geomcli import io

    return output is not None and io.is_stdout(output)


def _hold_standard_descriptors() -> None:
    """/dev/null on a closed descriptor 0, 1 or 2, so no file opened later takes its number (C
    code writing to "stderr" would write into it); Python's stream stays None for a closed
    stdout (data and text for it are refused), and a closed stderr's messages go nowhere."""
    for descriptor in (0, 1, 2):
        try:
            os.fstat(descriptor)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != descriptor:
                os.dup2(opened, descriptor)
                os.close(opened)
            os.set_inheritable(descriptor, True)  # held for child processes too
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process


# The signal (SIGINT or SIGTERM) that stopped the run, once one has
_signalled: list[int] = []


def _interrupt(signum: int, frame: Any) -> None:
    _signalled[:] = [signum]
    raise KeyboardInterrupt


def _terminate(signum: int, frame: Any) -> None:
    _signalled[:] = [signum]
    raise SystemExit(EXIT_TERMINATED)


def installed_version() -> str:
    """The version from the package metadata, found by the dist-info folder's name:
    importlib.metadata would cost 25 ms, a third of a one-liner's start-up."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("geomcli-") and name.endswith(".dist-info"):
                return name.removeprefix("geomcli-").removesuffix(".dist-info")
    from importlib.metadata import version

    return version("geomcli")


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"geomcli {installed_version()}")
        ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version and exit.")
def cli() -> None:
    """Apply ONNX geometry operators to images and tensors, exactly as the spec defines them.

    Inputs: PNG, JPEG, BMP, GIF, WebP (Pillow), .npy, .tif/.tiff, or - for stdin.
    """


@cli.command("crop-pad", short_help="Centre-crop or zero-pad (ONNX CenterCropPad).")
@click.option("--shape", "target", type=IntList(sizes=True), required=True,
              help="Target lengths: H,W (or H,W,C) on an image; one per axis (or per --axes) on a tensor.")
@click.option("--axes", type=IntList(), default=None, metavar="AXES",
              help="The axes --shape refers to; negative values count from the end.  [default: all, or H "
                   "and W for two values on an image or a tensor in a known --layout]")
@click.option("--fill", type=str, default=None,
              help="Pad value, in the input's dtype (must fit it exactly): a number, inf/-inf/nan, "
                   "true/false, or text for string tensors.  [default: the dtype's zero]")
@files_options
@common_options
@fidelity_options
def crop_pad(inputs: tuple[str, ...], output: str | None, batch: BatchOptions, target: tuple[int, ...],
             axes: tuple[int, ...] | None, fill: str | None, common: Common) -> None:
    """Centre-crop or zero-pad to a target shape (ONNX CenterCropPad, opset 18).

    A crop keeps the window starting at floor((d - t) / 2); a pad puts the odd extra
    element at the end (right/bottom). On an image, --shape H,W crops or pads the two
    spatial axes and keeps the channels. One INPUT goes to -o; several, folders and
    globs go to --out-dir.

    Example: geomcli crop-pad samples/photo.png -o square.png --shape 100,100

    Example: geomcli crop-pad samples/photo.png samples/rgba.png --out-dir squares --shape 40,40
    """
    from geomcli import transform

    parameters = {"shape": list(target), "axes": None if axes is None else list(axes),
                  **({} if fill is None else {"fill": fill})}
    crop = transform.CropPad(target, axes, fill)
    run_files("crop-pad", inputs, output, batch, common, parameters, crop,
              functools.partial(crop.output_shape, common=common))


def blocks_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """INPUT..., -o/--out-dir, --blocksize and --mode, shared by space-to-depth and depth-to-space."""
    command = files_options(command)
    command = click.option("--mode", type=click.Choice(["DCR", "CRD"]), default="DCR", show_default=True,
                           help="Channel order: depth-column-row (DCR) or column-row-depth (CRD).")(command)
    command = click.option("--blocksize", type=Int(min=1), required=True,
                           help="Block edge b; 1 is the identity.")(command)
    return command


def run_blocks(command: str, kernel_name: str, inputs: tuple[str, ...], output: str | None, batch: BatchOptions,
               blocksize: int, mode: str, common: Common) -> None:
    from geomcli import transform

    run_files(command, inputs, output, batch, common, {"blocksize": blocksize, "mode": mode},
              functools.partial(transform.blocks, kernel_name=kernel_name, blocksize=blocksize, mode=mode),
              functools.partial(transform.blocks_shape, kernel_name=kernel_name, blocksize=blocksize, common=common))


@cli.command("space-to-depth", short_help="Blocks of space into channels (ONNX SpaceToDepth).")
@blocks_options
@common_options
@fidelity_options
def space_to_depth(inputs: tuple[str, ...], output: str | None, batch: BatchOptions, blocksize: int, mode: str,
                   common: Common) -> None:
    """Move blocks of space into channels (ONNX SpaceToDepth, opset 28).

    An H×W×C image becomes (H/b)×(W/b)×(C·b²); a tensor is read in --layout (NCHW
    for rank 4) and written back in it. Channel k of the result is what the ONNX
    operator puts there for the same data as NCHW: DCR k = (bh·b + bw)·C + c,
    CRD k = c·b² + bh·b + bw. H and W must be multiples of the blocksize.

    Example: geomcli space-to-depth samples/tensor.npy -o blocks.npy --blocksize 2
    """
    run_blocks("space-to-depth", "space_to_depth", inputs, output, batch, blocksize, mode, common)


@cli.command("depth-to-space", short_help="Channels into blocks of space (ONNX DepthToSpace).")
@blocks_options
@common_options
@fidelity_options
def depth_to_space(inputs: tuple[str, ...], output: str | None, batch: BatchOptions, blocksize: int, mode: str,
                   common: Common) -> None:
    """Move channels back into blocks of space (ONNX DepthToSpace, opset 13, the inverse of SpaceToDepth).

    An H×W×C image becomes (H·b)×(W·b)×(C/b²); in the same --mode it undoes
    space-to-depth exactly. C must be a multiple of blocksize².

    Example: geomcli depth-to-space samples/blocks.npy -o restored.npy --blocksize 2
    """
    run_blocks("depth-to-space", "depth_to_space", inputs, output, batch, blocksize, mode, common)


@cli.command("affine-grid", short_help="Sampling grids from affine matrices (ONNX AffineGrid).")
@output_option
@click.option("--size", type=IntList(empty=True), default=None,
              help="N,C,H,W for a 2-D grid or N,C,D,H,W for a 3-D grid.")
@click.option("--like", type=click.Path(dir_okay=False, allow_dash=False), default=None,
              help="Take C,H,W (C,D,H,W from a rank-5 tensor) from this file; N is theta's batch.")
@click.option("--theta", "theta_text", default=None, metavar="FILE|NUMBERS",
              help="(N,2,3)/(N,3,4) matrices from a .npy/.tiff file (- reads one from stdin), or inline: "
                   "6 (2-D) or 12 (3-D) comma-separated numbers per matrix, row by row.  "
                   "[default: the transform flags]")
@click.option("--rotate", type=Float(), default=0.0, show_default=True, help="Rotation in degrees (2-D).")
@click.option("--scale", type=FloatList((1, 2)), default="1", show_default=True, metavar="S[,SY]",
              help="Scale of x and y (2-D).")
@click.option("--translate", type=FloatList((2,)), default="0,0", show_default=True, metavar="TX,TY",
              help="Translation in grid units, where the image spans -1..1 (2-D).")
@click.option("--shear", type=FloatList((2,)), default="0,0", show_default=True, metavar="SX,SY",
              help="Shear factors of x by y and of y by x (2-D).")
@click.option("--align-corners", is_flag=True, help="-1 and 1 are the centres of the corner pixels, not their edges.")
@click.option("--dtype", type=click.Choice(("float32", "float64", "float16", "bfloat16")), default=None,
              help="Grid dtype.  [default: a theta file's float dtype, else float32]")
@common_options
def affine_grid(output: str, size: tuple[int, ...] | None, like: str | None, theta_text: str | None,
                rotate: float, scale: tuple[float, ...], translate: tuple[float, ...], shear: tuple[float, ...],
                align_corners: bool, dtype: str | None, common: Common) -> None:
    """Sampling grids from affine matrices (ONNX AffineGrid, opset 20).

    Writes (N,H,W,2) or (N,D,H,W,3) grids of (x, y[, z]) positions in -1..1 units, x
    along W, as GridSample reads them. Without --theta the matrix is built from the
    flags as translate · rotate · shear · scale (scale applies first); theta maps
    output positions to the positions sampled.

    Example: geomcli affine-grid --like samples/photo.png --rotate 30 -o grid.npy
    """
    ctx = click.get_current_context()
    if (size is None) == (like is None):
        raise click.UsageError("give exactly one of --size and --like", ctx)
    flags_used = [name for name in ("rotate", "scale", "translate", "shear")
                  if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT]
    if theta_text is not None and flags_used:
        raise click.UsageError(f"--theta cannot be combined with --{', --'.join(flags_used)}", ctx)
    if theta_text == "-" and like == "-":
        raise click.UsageError("--theta - and --like - cannot both read stdin", ctx)
    if size is not None:
        _check_grid_size(size)
        if len(size) == 5 and flags_used:
            raise click.UsageError(f"--{', --'.join(flags_used)} make 2-D matrices; a 3-D grid (5 --size values) "
                                   "takes --theta", ctx)
    output_format = _output_format(output, common)
    from geomcli import summary, transform
    from geomcli import theta as thetas

    theta_file = theta_text if thetas.is_file(theta_text) else None
    theta_option = next(param for param in ctx.command.params if param.name == "theta_text")
    numbers = None if theta_text is None or theta_file else FloatList().convert(theta_text, theta_option, ctx)
    if numbers is not None and size is not None:
        try:
            thetas.check_count(numbers, len(size) - 2, size[0])
        except GeomError as error:
            raise click.BadParameter(str(error).removeprefix("--theta: "), param_hint="'--theta'") from error
    report = summary.Report("affine-grid", theta_text or "(flags)", output,
                            parameters={"align_corners": align_corners, "theta": theta_text or "flags"})
    with transform.reporting(report, common):
        theta, grid_size = thetas.resolve(size, like, theta_file, numbers, (rotate, scale, translate, shear), dtype,
                                          common.layout, common.max_pixels)
        transform.affine_grid(report, theta, grid_size, align_corners, output, output_format, common)
    code = transform.finish(report, common, data_on_stdout=_is_stdout(output))
    if code:
        raise SystemExit(code)


def _check_grid_size(size: tuple[int, ...]) -> None:
    """--size as a usage error (exit 2), before anything is read or allocated."""
    found = "none" if not size else f"{len(size)} ({','.join(map(str, size))})"
    if len(size) not in (4, 5):
        raise click.BadParameter(f"give N,C,H,W or N,C,D,H,W: 4 or 5 values, found {found}",
                                 param_hint="'--size'")
    if min(size[:2]) < 0 or min(size[2:]) < 1:
        raise click.BadParameter(f"N and C must not be negative and the spatial sizes must be at least 1, "
                                 f"found {','.join(map(str, size))}", param_hint="'--size'")


def _info_line(record: dict[str, Any]) -> str:
    parts = [f"{record['format']} {'×'.join(map(str, record['shape']))} {record['dtype']}",
             f"layout {record['layout'] or '-'}", f"{record['pages']} page(s)"]
    if record["value_range"]:
        low, high = record["value_range"]
        parts.append(f"range [{low:g}, {high:g}]")
    if record["file_size"] is not None:
        parts.append(f"{record['file_size']} bytes")
    return f"{record['input']}: " + ", ".join(parts)


@cli.command("info", short_help="Format, shape, dtype and value range of files.")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...",
                type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per file instead of a line.")
@click.option("--frames", type=click.Choice(["all", "first"]), default="all", show_default=True,
              help="An animated GIF, WebP or PNG: all shows its frames stacked on a leading axis, first "
                   "the first frame.")
@click.option("--max-pixels", type=Int(min=1), default=DEFAULT_MAX_PIXELS, show_default=True,
              envvar="GEOMCLI_MAX_PIXELS", show_envvar=True, help="Refuse files with more elements than this.")
def info(inputs: tuple[str, ...], as_json: bool, frames: str, max_pixels: int) -> None:
    """Show format, shape, dtype, pages, value range and size of files.

    Example: geomcli info samples/photo.png samples/tensor.npy
    """
    from geomcli import summary, transform

    transform.check_stdout()
    failed = 0
    for path in inputs:
        record = transform.info(path, max_pixels=max_pixels, frames=frames)
        if record["status"] != "ok":
            failed += 1
            transform.echo_stderr(f"Error: {record['error']}")
        if as_json:
            transform.echo_stdout(summary.strict_json(record))
        elif record["status"] == "ok":
            transform.echo_stdout(_info_line(record))
    if failed:
        raise SystemExit(EXIT_FAILED)


def main(args: list[str] | None = None, prog_name: str = "geomcli") -> None:
    """The command line, as a function: it always ends in SystemExit (click's standalone mode)."""
    try:
        cli.main(args=args, prog_name=prog_name)
    except StdoutError as error:  # --help or --version for a closed stdout
        click.echo(f"Error: {error}", err=True)
        raise SystemExit(EXIT_FAILED) from None
    except OSError as error:
        # --help, --version and usage errors write before any command runs, out of _Group.invoke's reach
        if error.errno not in _STREAM_FULL:
            raise
        with contextlib.suppress(OSError):  # a full stderr has no room for the message either
            click.echo(f"Error: <stdout>: cannot write ({error.strerror})", err=True)
        raise SystemExit(EXIT_FAILED) from None


_STREAM_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO, errno.EAGAIN)


def run() -> None:
    """The console script and ``python -m geomcli``: :func:`main`, then an exit that skips the
    interpreter's teardown, which frees every module and object one by one: 10-12 ms of a
    105 ms one-shot crop. By then every output is written, closed and renamed; only the
    standard streams' buffers are left, flushed here. A run that started worker processes
    (multiprocessing removes its temp folder at exit) or runs under a profiler, tracer or
    coverage (they write at exit) ends the usual way."""
    try:
        main()
        code: str | int | None = 0
    except SystemExit as stop:
        code = stop.code
    if code is not None and not isinstance(code, int):
        if sys.stderr is not None:  # as Python's own exit does with SystemExit("message")
            with contextlib.suppress(OSError):
                print(code, file=sys.stderr)
        code = EXIT_FAILED
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except OSError as error:
            # what is left in the buffer cannot be written: dropped, not tried again at exit
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
            if stream is sys.stdout and not code:  # what was written did not all arrive
                code = EXIT_BROKEN_PIPE if isinstance(error, BrokenPipeError) else EXIT_FAILED
    if "multiprocessing" in sys.modules or _watched():
        sys.exit(code)
    os._exit(code or 0)


def _watched() -> bool:
    """Whether a profiler, tracer or coverage runs: they write what they found at exit."""
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12+: coverage's sys.monitoring core
    tools = monitoring is not None and any(monitoring.get_tool(tool) for tool in range(6))
    return bool(sys.gettrace() or sys.getprofile() or tools)
