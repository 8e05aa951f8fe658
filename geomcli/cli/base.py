"""The click Command every geomcli command is: --help and --version text for a closed or full
stdout, a reader gone, and control characters in messages, handled as for any command's text."""

from __future__ import annotations

import os
import sys

import click

from geomcli.constants import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED
from geomcli.errors import StdoutError


def drop_stdout() -> None:
    """Whoever read our stdout has gone: what is left for it goes to /dev/null, not to an error."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class Command(click.Command):
    """--help and --version print while the arguments are parsed, then stop: their text for a
    closed stdout is an error (exit 1) and for a reader gone exit 141, as for any command's text."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # (click's parser takes the arguments out of the list it is given)
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as error:
            takes_files = any(isinstance(param, click.Argument) for param in self.params)  # (a chain's step: -i)
            if takes_files and (named := _file_taken_for(error.option_name, given)) is not None:
                # 'crop-pad -dash.png ...' said only "No such option '-d'"
                error.message += f" {named} is a file: name it ./{named} (or put it after --, which ends the options)."  # type: ignore[misc]
                error.possibilities = None  # type: ignore[misc]
            escape_message(error)
            raise
        except click.ClickException as error:
            escape_message(error)
            raise
        except click.exceptions.Exit as stop:
            if stop.exit_code == 0 and sys.stdout is None:  # click.echo wrote nowhere
                raise StdoutError("<stdout>: standard output is closed") from None
            raise
        except BrokenPipeError:  # before click's main, which would exit 1
            drop_stdout()
            raise SystemExit(EXIT_BROKEN_PIPE) from None
        except KeyboardInterrupt:  # before click's main, which would say "Aborted!" and exit 1
            click.echo("Interrupted", err=True)
            raise SystemExit(EXIT_INTERRUPTED) from None


def _file_taken_for(option: str, args: list[str]) -> str | None:
    """The argument click read as the unknown ``option`` (a cluster of short ones reads '-dash.png'
    as '-d'), where it is a file or folder that exists; else None."""
    return next((arg for arg in args if arg.startswith(option) and os.path.lexists(arg)), None)


def escape_message(error: click.ClickException) -> None:
    """Escape the control characters of the message click is to show for ``error`` (a path in it
    must not break the line), as every other line geomcli prints has them escaped. Not the help
    text that click (8.2+) shows for a command given no arguments."""
    from geomcli.engine.summary import printable

    if not isinstance(error, getattr(click.exceptions, "NoArgsIsHelpError", ())):
        error.message = printable(error.message)  # type: ignore[misc]  # Final to type checkers only
