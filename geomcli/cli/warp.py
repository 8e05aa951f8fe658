"""geomcli warp: an affine warp of files, GridSample of AffineGrid's grid, made in slabs."""

from __future__ import annotations

import click

from geomcli.cli.base import Command
from geomcli.cli.options import (
    common_options,
    fidelity_options,
    files_options,
    flags_given,
    sampling_options,
    transform_options,
)
from geomcli.cli.params import FloatList, IntList
from geomcli.cli.running import engine_errors, run_files
from geomcli.engine.options import BatchOptions, Common


@click.command("warp", cls=Command, short_help="Turn, scale, shear or move images (AffineGrid + GridSample).")
@transform_options
@click.option("--size", type=IntList(sizes=True), default=None, metavar="H,W",
              help="The output's height and width.  [default: the input's]")
@click.option("--dtype", type=click.Choice(("float32", "float64", "float16", "bfloat16")), default=None,
              help="theta's and the grid's dtype.  [default: a theta file's float dtype, else float32]")
@sampling_options
@files_options
@common_options
@fidelity_options
def warp(inputs: tuple[str, ...], output: str | None, batch: BatchOptions | None, theta_text: str | None,
         rotate: float, scale: tuple[float, ...], translate: tuple[float, ...], shear: tuple[float, ...],
         size: tuple[int, ...] | None, dtype: str | None, mode: str, padding_mode: str, align_corners: bool,
         fill: str | None, common: Common) -> None:
    """Warp images and tensors by an affine matrix: what grid-sample gives for the grid
    affine-grid makes from the same flags, bit for bit, without holding that grid.

    theta maps output positions to the input positions sampled, in -1..1 units: --scale 2
    shows twice the area (the picture shrinks), --rotate 30 turns the picture 30°
    counter-clockwise as a viewer sees it, --translate 0.5,0 shows what lies a quarter of
    the width to the right (the picture moves left). The output is the input's H×W unless
    --size.

    Example: geomcli warp samples/photo.png -o turned.png --rotate 30
    """
    ctx = click.get_current_context()
    flags = flags_given()
    if theta_text is not None and flags:
        raise click.UsageError(f"--theta cannot be combined with --{', --'.join(flags)}", ctx)
    if theta_text == "-" and "-" in inputs:
        raise click.UsageError("--theta - and the input - cannot both read stdin", ctx)
    if size is not None and (len(size) != 2 or min(size) < 1):
        raise click.BadParameter(f"give H,W: two lengths of at least 1, found {','.join(map(str, size))}",
                                 param_hint="'--size'")
    from geomcli.engine import theta as thetas
    from geomcli.engine.operations import Warp

    theta_file = theta_text if thetas.is_file(theta_text) else None
    theta_option = next(param for param in ctx.command.params if param.name == "theta_text")
    numbers = None if theta_text is None or theta_file else FloatList().convert(theta_text, theta_option, ctx)
    with engine_errors():
        theta = thetas.for_warp(theta_file, numbers, (rotate, scale, translate, shear), dtype, common.max_pixels)
    operation = Warp(theta, theta_text or "flags", None if size is None else (size[0], size[1]), mode, padding_mode,
                     align_corners, fill)
    run_files(operation, inputs, output, batch, common)
