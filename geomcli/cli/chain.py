"""geomcli chain: several operations per file, one read and one write, as click's chained
subcommands: each STEP is an operation's name and that operation's own options."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import click

from geomcli.cli.base import Command
from geomcli.cli.blocks import blocks_options, depth_to_space_operation, space_to_depth_operation
from geomcli.cli.crop_pad import crop_pad_operation, crop_pad_options
from geomcli.cli.grid_sample import grid_sample_operation, grid_sample_options
from geomcli.cli.options import common_options, fidelity_options, outputs_options, read_stdin_once, stdin_readers
from geomcli.cli.resize import resize_operation, resize_options
from geomcli.cli.running import run_files
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


@click.group("chain", cls=_ChainGroup, chain=True, short_help="Several operations per file, one read and one write.")
@click.option("-i", "--input", "inputs", multiple=True, metavar="INPUT",
              type=click.Path(allow_dash=True, readable=False),
              help="A file, folder or quoted glob to read, as the other commands' INPUT (repeat for more; or "
                   "--files-from).")
@outputs_options
@common_options
@fidelity_options
def chain(inputs: tuple[str, ...], output: str | None, batch: BatchOptions | None, common: Common) -> None:
    """Run several operations on each input: one read, the steps in memory, one write.

    Each STEP is an operation's name followed by its own options; metadata is carried
    through every step, and --dry-run --json gives the shape after each step from the headers.
    The ImageNet recipe (shorter side to 256, centre 224):

    \b
      geomcli chain -i photos --out-dir crops \\
        resize --sizes 256,256 --keep-aspect-ratio-policy not_smaller --mode linear --antialias \\
        crop-pad --shape 224,224

    The chain's own options (-i, -o, --out-dir, --json, ...) come before the first STEP.

    Example: geomcli chain -i samples/photo.png -o crop.png resize --sizes 96,96 --mode linear crop-pad --shape 80,80
    """
    # for the steps (which read their grids and thetas now) and for the run, once every step is made
    click.get_current_context().obj = _Run(inputs, output, batch, common, stdin_readers(inputs, batch))


class _Run(NamedTuple):
    inputs: tuple[str, ...]
    output: str | None
    batch: BatchOptions | None
    common: Common
    stdin_readers: list[tuple[str, str | None]]  # the inputs', then each step's as it is made


# the steps' options that read a file, and so stdin for -
_FILE_OPTIONS = {"grid_path": "--grid", "theta_text": "--theta"}


@chain.result_callback()
def _run(steps: list[Operation], **_: Any) -> None:
    run = click.get_current_context().obj
    if not steps:
        raise click.UsageError("give one or more STEPs after the options: " + ", ".join(name for name, *_ in _STEPS))
    run_files(Chain(tuple(steps)), run.inputs, run.output, run.batch, run.common)


class _Step(Command):
    """A step: an option of the chain's own given after it says where it goes."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as error:
            own = {name for param in chain.params for name in (*param.opts, *param.secondary_opts)}
            if error.option_name in own:
                error.message += f" {error.option_name} is the chain's own option: give it before the first step."  # type: ignore[misc]
            raise


def _step(name: str, options: Callable[..., Any], build: Callable[..., Operation], help_text: str) -> click.Command:
    def callback(**kwargs: Any) -> Operation:
        run = click.get_current_context().find_object(_Run)
        assert run is not None  # the chain's callback made it before any step's
        try:
            own = [(flag, kwargs[key]) for key, flag in _FILE_OPTIONS.items() if key in kwargs]
            read_stdin_once(*own, *run.stdin_readers)  # before this step reads its file
            run.stdin_readers.extend((f"an earlier {name} step's {flag}", value) for flag, value in own)
            return build(run.common, **kwargs)
        except click.UsageError as error:  # which step it is, among several
            error.message = f"the {name} step: {error.message}"  # type: ignore[misc]
            raise

    # the options on the function first: on a finished command each would be added last, in reverse
    return click.command(name, cls=_Step, help=help_text)(options(callback))


for _name, _options, _build, _help in _STEPS:
    chain.add_command(_step(_name, _options, _build, _help))
