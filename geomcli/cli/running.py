"""From a command's parsed options to a run of the engine, and from the engine's outcome to an
exit code: a PlanError is click's usage error (exit 2), another GeomError one line and exit 1."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from geomcli.cli.options import _BATCH_ONLY, is_stdout
from geomcli.errors import GeomError, PlanError

if TYPE_CHECKING:
    from geomcli.engine.operations import Operation
    from geomcli.engine.options import BatchOptions, Common


@contextmanager
def usage_errors() -> Iterator[None]:
    """The engine's plan faults as click's usage errors (exit 2), naming the option at fault."""
    try:
        yield
    except PlanError as error:
        if error.options:
            raise click.BadParameter(str(error), param_hint=error.options) from error  # click quotes each
        raise click.UsageError(str(error), click.get_current_context(silent=True)) from error


class UnmadeError(click.ClickException):
    """The operation could not be made (a --grid or --theta file that cannot be read): every input
    fails with this line, exit 1 (:func:`failing_every_input` gives their --json records)."""


@contextmanager
def engine_errors() -> Iterator[None]:
    """Work the command does before any file (reading a grid, building theta): a plan fault is a
    usage error (exit 2), any other failure one error line (exit 1)."""
    from geomcli.engine.report import describe

    with usage_errors():
        try:
            yield
        except PlanError:
            raise
        except (GeomError, OSError) as error:
            raise UnmadeError(describe(error)) from error


@contextmanager
def failing_every_input(inputs: tuple[str, ...], output: str | None, batch: BatchOptions | None,
                        common: Common) -> Iterator[None]:
    """Making the operation: where it cannot be made (:class:`UnmadeError`), --json still gets a
    record for each input, failed with that line and naming its planned output (a batch's from
    its plan, then the summary's), as for a file that failed; then the error line, exit 1."""
    try:
        yield
    except UnmadeError as error:
        if common.json:
            command = click.get_current_context().find_root().invoked_subcommand or ""
            if batch is None:
                from geomcli.engine import report, summary

                record = summary.Report(command, inputs[0] if inputs else None, output, status="error",
                                        error=error.message).to_json()
                (report.echo_stderr if output is not None and is_stdout(output) else report.echo_stdout)(record)
            elif inputs or batch.files_from is not None:
                from geomcli.engine import workers

                with usage_errors():
                    workers.all_failed(command, common, inputs, batch, error.message)
        raise


def run_files(operation: Operation, inputs: tuple[str, ...], output: str | None, batch: BatchOptions | None,
              common: Common) -> None:
    """One file with -o, or many with --out-dir (geomcli.engine.workers, imported only then)."""
    ctx = click.get_current_context()
    if not inputs and (batch is None or batch.files_from is None):
        # (chain takes its inputs as -i INPUT)
        given = next(param for param in ctx.command.params if param.name == "inputs")
        named = f"{given.opts[0]} INPUT" if isinstance(given, click.Option) else "an INPUT"
        raise click.UsageError(f"give {named}, or --files-from FILE with --out-dir", ctx)
    if batch is None:
        if output is None:
            raise click.UsageError("give -o OUTPUT for one INPUT, or --out-dir DIR", ctx)
        if len(inputs) > 1:
            raise click.UsageError(f"-o takes one INPUT, found {len(inputs)}; give --out-dir DIR for several", ctx)
        from geomcli.engine import zarr_file
        from geomcli.io import _remote, _zarr

        # the checks below may ask the store: with this run's --storage-option (an endpoint given
        # there alone left a glob's check asking AWS, and the glob was read as a name: exit 1)
        _remote.configure(common.storage_options)
        if _remote.is_url(inputs[0]):
            try:
                _remote.check_bucket(inputs[0])  # as a batch's input: s3:// of an unset $BUCKET is no input
            except GeomError as error:
                raise click.UsageError(str(error), ctx) from error

        chunked = zarr_file.involved(inputs[0], output)  # a zarr array (a folder) is one input; it takes --scheduler
        # (- is stdin, whatever is named so); a zarr array is a folder named .zarr, one named else is none
        if inputs[0] != "-" and _is_folder(inputs[0]) and not _zarr.is_zarr(inputs[0]):
            raise click.UsageError(_zarr.misnamed(inputs[0])
                                   or f"{inputs[0]} is a folder; give --out-dir DIR for the files in it", ctx)
        from geomcli.engine import plan

        if plan.is_pattern(inputs[0]):
            # a quoted glob, which -o took as a name: 'Error: shots/*.png: no such file' (exit 1)
            raise click.UsageError(f"{inputs[0]!r} is a pattern, and -o takes one file; give --out-dir DIR for the "
                                   "files it matches", ctx)
        for name, flag in _BATCH_ONLY.items():
            # (an environment variable, GEOMCLI_SCHEDULER, is for the jobs it is for)
            if ctx.get_parameter_source(name) not in (click.core.ParameterSource.DEFAULT,
                                                      click.core.ParameterSource.ENVIRONMENT) and not (
                    chunked and name == "scheduler"):
                # (--scheduler does a zarr array's chunks too: said, where it was left for a guess)
                also = " or a .zarr input or output" if name == "scheduler" else ""
                raise click.UsageError(f"{flag} goes with --out-dir{also}, not -o", ctx)
        run_transform(operation, inputs[0], output, common, ctx.params.get("scheduler") if chunked else None)
        return
    if output is not None:
        raise click.UsageError("-o and --out-dir cannot be combined: -o names one output, --out-dir a folder", ctx)
    from geomcli.engine import workers

    with usage_errors():
        try:
            code = workers.run(operation, common, inputs, batch)
        except PlanError:
            raise
        except GeomError as error:
            raise click.ClickException(str(error)) from error
    if code:
        raise SystemExit(code)


def output_format(output: str, common: Common) -> str:
    """The output's format, or a usage error (exit 2) for an unknown extension, one --format
    contradicts, or one an encoder option is not for (--compression to a PNG): before any input is read."""
    from geomcli import io
    from geomcli.engine import one_file
    from geomcli.engine.options import write_options

    if not output:
        raise click.BadParameter("an empty name; give a file name, or - for stdout", param_hint="'-o' / '--output'")
    try:
        found = one_file.output_format(output, common.format)
    except one_file.FormatConflictError as error:
        raise click.BadParameter(f"{error}; drop --format or change the extension",
                                 param_hint="'-o' / '--output'") from error
    except GeomError as error:
        raise click.BadParameter(str(error), param_hint="'-o' / '--output'") from error
    refusal = io.refused_option(write_options(common), found)
    if refusal is not None:
        raise click.UsageError(f"{refusal} (-o {output})", click.get_current_context())
    return found


def _is_folder(path: str) -> bool:
    """Whether ``path`` is a folder (a URL's prefix of objects: asked of the store only where its
    name has no extension, as a folder's has not; 's3://b/raw -o x.png' said 'no such file')."""
    from geomcli.io import _remote

    if not _remote.is_url(path):
        return os.path.isdir(path)
    if os.path.splitext(path.rstrip("/").rpartition("/")[2])[1] and not path.endswith("/"):
        return False
    try:
        return _remote.is_folder(path)
    except GeomError:
        return False  # a store that cannot be asked: the read says why


def refuse_writing_into(output: str, read: Iterable[tuple[str, str | None]]) -> None:
    """A usage error where ``output`` is a descriptor the shell opened on a file an (option, path)
    of ``read`` reads (``-o - >> input.npy``): the result would be written into it, as GNU cat
    refuses ('input file is output file')."""
    from geomcli.io import display_name, writes_into

    for option, path in read:
        if path is not None and writes_into(output, path):
            raise click.UsageError(f"{display_name(output, output=True)} is {display_name(path)} itself, which "
                                   f"{option} reads: write the output to another file", click.get_current_context())


def run_transform(operation: Operation, input_path: str, output: str, common: Common,
                  scheduler: str | None = None) -> None:
    """One file from the command line: exit 2 for a bad output name or options the file cannot
    take, 1 if the file failed. A zarr job runs on ``scheduler``'s cluster where one is named (else
    on this machine's threads)."""
    from geomcli.engine import one_file, plan, report

    found = output_format(output, common)
    given = next(param for param in click.get_current_context().command.params if param.name == "inputs")
    stdin_option = operation.stdin_option()  # (--grid -: files_read leaves stdin out)
    refuse_writing_into(output, ((given.opts[0] if isinstance(given, click.Option) else "INPUT", input_path),
                                 *operation.files_read(), *([(stdin_option, "-")] if stdin_option else [])))
    with usage_errors():
        plan.check_spared(output, operation.files_read())
        # what the options cannot do with this file: its report, and exit 2 as in a batch
        outcome = one_file.transform_file(operation, input_path, output, found, common, usage_faults=True,
                                          scheduler=scheduler)
    code = report.finish(outcome, common, data_on_stdout=is_stdout(output))
    if code:
        raise SystemExit(code)
