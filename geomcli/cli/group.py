"""The geomcli command group: the signals, the broken pipes and the closed streams every command
meets, --version, and ``main``/``run`` for the console script. The commands live one module each.

Only click and the standard library load at import time, so ``--help``, ``--version`` and usage
errors stay fast; numpy and the file backends load inside the commands.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import sys
from importlib import import_module
from typing import Any, NoReturn

import click

from geomcli.cli.base import Command, drop_stdout, escape_message
from geomcli.constants import EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_INTERRUPTED
from geomcli.errors import StdoutError

# Each command and the module that defines it, loaded when named (click's pattern for lazily
# loaded subcommands): a run imports its own command's module, not the other eight.
_COMMANDS = {
    "affine-grid": "geomcli.cli.affine_grid:affine_grid",
    "chain": "geomcli.cli.chain:chain",
    "crop-pad": "geomcli.cli.crop_pad:crop_pad",
    "depth-to-space": "geomcli.cli.blocks:depth_to_space",
    "grid-sample": "geomcli.cli.grid_sample:grid_sample",
    "info": "geomcli.cli.info:info",
    "resize": "geomcli.cli.resize:resize",
    "space-to-depth": "geomcli.cli.blocks:space_to_depth",
    "warp": "geomcli.cli.warp:warp",
}


class _Group(Command, click.Group):
    """Ctrl-C exits 130 (the console script then ends by SIGINT: :func:`_end_by_sigint`), SIGTERM
    143, SIGHUP 129, SIGXCPU 152 and a closed stdout pipe 141, all without a traceback."""

    command_class = Command

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        module, name = _COMMANDS[cmd_name].split(":")
        command: click.Command = getattr(import_module(module), name)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        import signal  # here, not at start-up: geomcli --version and --help never get this far

        from geomcli import io

        io.clear_signals()
        _hold_standard_descriptors()
        # a signal the caller ignores (SIG_IGN: `geomcli ... &` in a script, nohup) stays ignored
        previous = {number: signal.getsignal(number) for number in io.STOP_SIGNALS}
        if previous[signal.SIGINT] is signal.default_int_handler:
            signal.signal(signal.SIGINT, _interrupt)
        for number in io.STOP_SIGNALS:
            if number != signal.SIGINT and previous[number] == signal.SIG_DFL:
                signal.signal(number, _terminate)
        try:
            try:
                done = super().invoke(ctx)
            except ImportError:
                if io.signal_taken() is None:
                    raise
                done = None  # numpy turns a signal that breaks into its import into an ImportError
            # a signal taken whose exception became that, or vanished (see io._atomic.signals_taken)
            io.refuse_after_signal()
            return done
        except click.ClickException as error:
            escape_message(error)
            raise
        except KeyboardInterrupt:
            click.echo("Interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            drop_stdout()
            ctx.exit(EXIT_BROKEN_PIPE)
        except StdoutError as error:
            click.echo(f"Error: {error}", err=True)
            ctx.exit(EXIT_FAILED)
        except FileNotFoundError as error:
            # os.getcwd's, wherever a relative name is made absolute: a traceback from deep inside
            if error.filename is not None or _current_folder_exists():
                raise
            click.echo("Error: the current folder has been deleted, so a relative name reaches nothing; "
                       "cd to a folder, or give absolute names", err=True)
            ctx.exit(EXIT_FAILED)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
            io.clear_signals()  # a library write later in this process is not this run's to stop


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
    if sys.stdout is not None and hasattr(sys.stdout, "reconfigure"):
        # a character its encoding lacks is escaped, as stderr's are: a latin-1 or ASCII locale's
        # stdout raised UnicodeEncodeError (a traceback) on --dry-run's arrow and info's names
        sys.stdout.reconfigure(errors="backslashreplace")


def _current_folder_exists() -> bool:
    try:
        os.getcwd()
    except FileNotFoundError:
        return False
    return True


def _interrupt(signum: int, frame: Any) -> None:
    if _noted(signum):
        return  # raised where the block it came in ends (io.signals_deferred)
    raise KeyboardInterrupt


def _terminate(signum: int, frame: Any) -> None:
    if _noted(signum):
        return
    raise SystemExit(128 + signum)  # as the shell reports a process the signal ended: 143 for SIGTERM


def _noted(signum: int) -> bool:
    """Note ``signum`` (no output is placed from now on, whatever becomes of the exception); True
    where its exception waits for the end of a deferring block (a first signal only)."""
    from geomcli import io

    first = io.signal_taken() is None
    io.note_signal(signum)
    return first and io.deferring()


def installed_version() -> str:
    """The version (geomcli.__version__, which the package metadata is made from)."""
    from geomcli import __version__

    return __version__


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"geomcli {installed_version()}")
        ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version and exit.")
def cli() -> None:
    """Apply ONNX geometry operators to images and tensors, exactly as the spec defines them.

    Inputs: PNG, JPEG, BMP, GIF, WebP (Pillow), .npy, .tif/.tiff, .zarr arrays, or - for stdin;
    with geomcli[dask], any may be a URL (s3://, gs://, az://, https://, file://).
    """


def commands() -> dict[str, click.Command]:
    """Every command by name, each module loaded (for the man pages and their tests)."""
    return {name: command for name in cli.list_commands(None) if (command := cli.get_command(None, name))}  # type: ignore[arg-type]


def main(args: list[str] | None = None, prog_name: str = "geomcli") -> None:
    """The command line, as a function: it always ends in SystemExit (click's standalone mode)."""
    try:
        cli.main(args=args, prog_name=prog_name)
    except StdoutError as error:  # --help or --version for a closed stdout
        click.echo(f"Error: {error}", err=True)
        raise SystemExit(EXIT_FAILED) from None
    except OSError as error:
        # --help, --version and usage errors write before any command runs, out of _Group.invoke's reach
        if error.errno not in _STREAM_FULL or _raised_below_the_command_line(error):
            raise
        unshown = _unshown_click_error(error)
        if unshown is not None:  # a full stderr loses the message, not its exit code (2 for usage)
            raise SystemExit(unshown.exit_code) from None
        with contextlib.suppress(OSError):  # a full stderr has no room for the message either
            click.echo(f"Error: <stdout>: cannot write ({error.strerror})", err=True)
        raise SystemExit(EXIT_FAILED) from None


_STREAM_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO, errno.EAGAIN)


def _raised_below_the_command_line(error: BaseException) -> bool:
    """Whether ``error`` came from the engine, io or the kernels: a file's, not a write of text to
    a standard stream (--debug lets it out, for its traceback, which read '<stdout>: cannot write')."""
    below = ("geomcli.engine", "geomcli.io", "geomcli.ops")
    frame = error.__traceback__
    while frame is not None:
        if str(frame.tb_frame.f_globals.get("__name__", "")).startswith(below):
            return True
        frame = frame.tb_next
    return False


def _unshown_click_error(error: OSError) -> click.ClickException | None:
    """The usage error (or other click error) whose message stderr could not take, where
    ``error`` came from its ``show``; None for a write of text to stdout."""
    frame = error.__traceback__
    while frame is not None:
        shown = frame.tb_frame.f_locals.get("self")
        if frame.tb_frame.f_code.co_name == "show" and isinstance(shown, click.ClickException):
            return shown
        frame = frame.tb_next
    return None


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
    if code == EXIT_INTERRUPTED:
        _end_by_sigint()
    if "multiprocessing" in sys.modules or _watched():
        # the teardown's collections then skip what the imports made (Dask's ~60,000 objects: 0.1 s)
        gc.freeze()
        sys.exit(code)
    os._exit(code or 0)


def _end_by_sigint() -> NoReturn:
    """End a Ctrl-C'd run by SIGINT, as a shell expects: an exit status of 130 tells bash the
    program took the Ctrl-C for its own, so a `for` loop over files (and xargs) went on to the
    next one. A KeyboardInterrupt that reaches the top ends Python by SIGINT, after its exit
    handlers (multiprocessing's too); its traceback is not shown ("Interrupted" was said).
    The shell's $? is 130 still; Python's subprocess sees -2."""
    sys.excepthook = lambda *args: None
    raise KeyboardInterrupt


def _watched() -> bool:
    """Whether a profiler, tracer or coverage runs: they write what they found at exit."""
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12+: coverage's sys.monitoring core
    tools = monitoring is not None and any(monitoring.get_tool(tool) for tool in range(6))
    return bool(sys.gettrace() or sys.getprofile() or tools)
