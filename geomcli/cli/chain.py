"""geomcli chain: several operations per file, one read and one write, as click's chained
subcommands: each STEP is an operation's name and that operation's own options."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import click

from geomcli.cli.base import Command
from geomcli.cli.blocks import blocks_options, depth_to_space_operation, space_to_depth_operation
from geomcli.cli.crop_pad import crop_pad_operation, crop_pad_options
from geomcli.cli.grid_sample import grid_sample_operation, grid_sample_options
from geomcli.cli.options import common_options, fidelity_options, outputs_options, read_stdin_once, stdin_readers
from geomcli.cli.params import Name
from geomcli.cli.resize import resize_operation, resize_options
from geomcli.cli.running import failing_every_input, run_files
from geomcli.cli.warp import warp_operation, warp_options
from geomcli.engine.operations import Chain, Operation
from geomcli.engine.options import BatchOptions, Common

# name, its options, what makes its operation from them, and its help line
_STEPS: list[tuple[str, Callable[..., Any], Callable[..., Operation], str]] = [
    ("crop-pad", crop_pad_options, crop_pad_operation, "Centre-crop or zero-pad (ONNX CenterCropPad)."),
    ("resize", resize_options, resize_operation, "Resize (ONNX Resize)."),
    ("space-to-depth", blocks_options, space_to_depth_operation, "Blocks of space into channels (SpaceToDepth)."),
    ("depth-to-space", blocks_options, depth_to_space_operation, "Channels into blocks of space (DepthToSpace)."),
    ("grid-sample", grid_sample_options, grid_sample_operation, "Sample at a grid's positions (GridSample)."),
    ("warp", warp_options, warp_operation, "An affine warp (AffineGrid + GridSample)."),
]


class _ChainGroup(Command, click.Group):
    """A chained group whose --help and errors are handled as every command's."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as error:
            # a step's option before the first step: click's guess is a chain option (--sizes: "--series")
            if steps := _steps_taking(error.option_name):
                error.message += f" {error.option_name} is an option of {steps}: give it after the step's name."  # type: ignore[misc]
                error.possibilities = None  # type: ignore[misc]
            raise

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                             list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.NoSuchCommand as error:
            # chain a.png ... or -i a.png b.png: an input read as the first step, which named no input
            if _looks_like_an_input(error.command_name, bool(error.possibilities)):
                error.message += _ITS_OWN_I  # type: ignore[misc]
                error.possibilities = None  # type: ignore[misc]
            raise


_ITS_OWN_I = " A chain reads each input given with its own -i, before the first step: -i INPUT [-i INPUT ...]."


def _steps_taking(option: str, but: str | None = None) -> str:
    """The steps (other than ``but``) that take ``option``, as a message names them; "" for none."""
    steps = [name for name, command in chain.commands.items() if name != but and option in _option_names(command)]
    return f"the {', '.join(steps)} step{'s' if len(steps) > 1 else ''}" if steps else ""


def _option_names(command: click.Command) -> set[str]:
    return {name for param in command.params for name in (*param.opts, *param.secondary_opts)}


def _looks_like_an_input(name: str, like_a_step: bool) -> bool:
    """A path that exists, or else, spelled like no step (crop.pad is a typo), a name with a folder,
    a suffix or a glob in it."""
    import os

    return os.path.lexists(name) or (not like_a_step and (any(char in name for char in "/.*?[") or name == "-"))


# invoked without a step too, so that _run says which steps there are (click's own "Missing command." names none);
# no arguments at all still show the help, and the usage line a step as needed (click would bracket it)
@click.group("chain", cls=_ChainGroup, chain=True, invoke_without_command=True, no_args_is_help=True,
             subcommand_metavar="COMMAND1 [ARGS]... [COMMAND2 [ARGS]...]...",
             short_help="Several operations per file, one read and one write.")
@click.option("-i", "--input", "inputs", multiple=True, metavar="INPUT",
              type=Name(allow_dash=True, readable=False),
              help="A file, folder or quoted glob to read, as the other commands' INPUT (repeat for more; or "
                   "--files-from).")
@outputs_options
@common_options
@fidelity_options
def chain(inputs: tuple[str, ...], output: str | None, batch: BatchOptions | None, common: Common) -> None:
    """Run several operations on each input: one read, the steps in memory, one write.

    Each STEP is an operation's name followed by its own options; metadata is carried
    through every step, and --dry-run --json gives the shape after each step from the headers.
    The ImageNet recipe as an ONNX graph does it (shorter side to 256, centre 224; for
    torchvision's own pixels see geomcli resize --help):

    \b
      geomcli chain -i photos --out-dir crops \\
        resize --sizes 256,256 --keep-aspect-ratio-policy not_smaller --mode linear --antialias \\
        crop-pad --shape 224,224

    The chain's own options (-i, -o, --out-dir, --json, ...) come before the first STEP.

    Example: geomcli chain -i samples/photo.png -o crop.png resize --sizes 96,96 --mode linear crop-pad --shape 80,80
    """
    # for the run, once every step is known
    click.get_current_context().obj = _Run(inputs, output, batch, common, stdin_readers(inputs, batch))


class _Run(NamedTuple):
    inputs: tuple[str, ...]
    output: str | None
    batch: BatchOptions | None
    common: Common
    stdin_readers: list[tuple[str, str | None]]  # the inputs' (the steps' are added to them)


# the steps' options that read a file, and so stdin for -
_FILE_OPTIONS = {"grid_path": "--grid", "theta_text": "--theta"}


@chain.result_callback()
def _run(steps: list[_Pending], **_: Any) -> None:
    """Every step made, the usage faults first: stdin read once among them all, then the steps
    that read no file, then those that do (a grid, a theta) in order, so that a later step's
    mistake is a usage error before an earlier step's file is read."""
    run = click.get_current_context().obj
    if not steps:
        raise click.UsageError("give one or more STEPs after the options: " + ", ".join(name for name, *_ in _STEPS))
    readers = list(run.stdin_readers)
    for step in steps:
        with step.named():
            read_stdin_once(*step.files, *readers)
        readers.extend((f"an earlier {step.name} step's {flag}", value) for flag, value in step.files)
    made: dict[int, Operation] = {}
    with failing_every_input(run.inputs, run.output, run.batch, run.common):
        for index in sorted(range(len(steps)), key=lambda index: steps[index].reads_a_file):
            with steps[index].named():
                made[index] = steps[index].build(run.common, **steps[index].kwargs)
    run_files(Chain(tuple(made[index] for index in range(len(steps)))), run.inputs, run.output, run.batch,
              run.common)


class _Pending(NamedTuple):
    """A step as given, made once every step is known."""

    name: str
    build: Callable[..., Operation]
    kwargs: dict[str, Any]
    context: click.Context  # the step's own: its options' sources, for the builder

    @property
    def files(self) -> list[tuple[str, str | None]]:
        """Its options that read a file (so stdin, for -), with their values."""
        return [(flag, self.kwargs[key]) for key, flag in _FILE_OPTIONS.items() if key in self.kwargs]

    @property
    def reads_a_file(self) -> bool:
        return any(value is not None for _, value in self.files)

    @contextmanager
    def named(self) -> Iterator[None]:
        """In the step's context; a usage error says which step it is, among several."""
        try:
            with self.context.scope(cleanup=False):
                yield
        except click.UsageError as error:
            error.message = f"the {self.name} step: {error.message}"  # type: ignore[misc]
            raise


class _Step(Command):
    """A step: an option of the chain's own given after it says where it goes."""

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[Any]:
        """Its options, then every step: click leaves out the steps already given, as if none could
        come again (resize ... resize ... runs)."""
        from click.shell_completion import CompletionItem

        return [*(item for item in super().shell_complete(ctx, incomplete) if item.value not in chain.commands),
                *(CompletionItem(name, help=chain.commands[name].get_short_help_str())
                  for name in sorted(chain.commands) if name.startswith(incomplete))]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as error:
            if error.option_name in _option_names(chain):
                error.message += f" {error.option_name} is the chain's own option: give it before the first step."  # type: ignore[misc]
            elif steps := _steps_taking(error.option_name, but=self.name):
                # resize --sizes 4,4 --grid g.npy: a step's name left out; click's guess is of this step's (--roi)
                error.message += (f" {error.option_name} is an option of {steps}, not of {self.name}: give it "  # type: ignore[misc]
                                  "after that step's name.")
                error.possibilities = None  # type: ignore[misc]
            raise


def _step(name: str, options: Callable[..., Any], build: Callable[..., Operation], help_text: str) -> click.Command:
    def callback(**kwargs: Any) -> _Pending:
        return _Pending(name, build, kwargs, click.get_current_context())

    # the options on the function first: on a finished command each would be added last, in reverse
    return click.command(name, cls=_Step, help=help_text)(options(callback))


for _name, _options, _build, _help in _STEPS:
    chain.add_command(_step(_name, _options, _build, _help))
