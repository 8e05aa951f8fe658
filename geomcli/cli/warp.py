"""geomcli warp: an affine warp of files, GridSample of AffineGrid's grid, made in slabs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from geomcli.cli.base import Command
from geomcli.cli.options import (
    common_options,
    fidelity_options,
    files_options,
    flags_given,
    read_stdin_once,
    sampling_options,
    stdin_readers,
    transform_options,
)
from geomcli.cli.params import FloatList, IntList
from geomcli.cli.running import engine_errors, failing_every_input, run_files
from geomcli.engine.operations import Warp
from geomcli.engine.options import BatchOptions, Common

if TYPE_CHECKING:
    from geomcli.ops.grid_sample import Mode as SamplingMode
    from geomcli.ops.grid_sample import PaddingMode


def warp_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """theta, the output's size and GridSample's attributes, for ``geomcli warp`` and a chain's step."""
    command = sampling_options(command)
    command = click.option("--dtype", type=click.Choice(("float32", "float64", "float16", "bfloat16")), default=None,
                           help="theta's and the grid's dtype.  [default: a theta file's float dtype, else "
                                "float32]")(command)
    command = click.option("--size", type=IntList(sizes=True), default=None, metavar="[D,]H,W",
                           help="The output's height and width (and depth, for a rank-5 tensor or --volume).  "
                                "[default: the input's]")(command)
    command = click.option("--volume", is_flag=True,
                           help="Warp a z-stack (a TIFF's or OME-Zarr's Z axis) as one volume, Z Y X, by 3x4 "
                                "matrices (--theta, 12 numbers each), not plane by plane; T stays a stack, "
                                "C channels.")(command)
    return transform_options(command)


def warp_operation(common: Common, theta_text: str | None, rotate: float, scale: tuple[float, ...],
                   translate: tuple[float, ...], shear: tuple[float, ...], size: tuple[int, ...] | None,
                   dtype: str | None, mode: SamplingMode, padding_mode: PaddingMode, align_corners: bool,
                   fill: str | None, volume: bool = False) -> Warp:
    """The operation, with theta built (and a theta file read) before any input."""
    from geomcli.engine import theta as thetas

    ctx = click.get_current_context()
    flags = flags_given()
    if theta_text is not None and flags:
        raise click.UsageError(f"--theta cannot be combined with --{', --'.join(flags)}", ctx)
    if size is not None and (len(size) not in (2, 3) or min(size) < 1):
        raise click.BadParameter(f"give H,W (D,H,W for a rank-5 tensor): lengths of at least 1, found "
                                 f"{','.join(map(str, size))}", param_hint="'--size'")
    theta_file = theta_text if thetas.is_file(theta_text) else None
    theta_option = next(param for param in ctx.command.params if param.name == "theta_text")
    numbers = None if theta_text is None or theta_file else FloatList().convert(theta_text, theta_option, ctx)
    transforms = (rotate, scale, translate, shear)
    with engine_errors():
        theta = thetas.for_warp(theta_file, numbers, transforms, dtype, common.max_pixels)
    if volume and 3 not in theta.matrices:  # whatever the inputs are: the options' own mistake
        if theta_text is None:
            found = "--rotate, --scale, --shear and --translate make 2-D matrices; give --theta"
        elif theta_file is None:
            found = f"--theta gives {len(numbers or ())} numbers"
        else:
            found = f"{theta_file} holds 2-D matrices {theta.of_rank(2).shape}"
        raise click.UsageError(f"--volume warps in 3-D, by 3x4 matrices (12 numbers each): {found}", ctx)
    return Warp(theta, theta_text, size, mode, padding_mode, align_corners, fill,
                flags=None if theta_text is not None else transforms, volume=volume, grid_dtype=dtype)


@click.command("warp", cls=Command, short_help="Turn, scale, shear or move images (AffineGrid + GridSample).")
@warp_options
@files_options
@common_options
@fidelity_options
def warp(inputs: tuple[str, ...], output: str | None, batch: BatchOptions | None, common: Common,
         **options: Any) -> None:
    """Warp images and tensors by an affine matrix: what grid-sample gives for the grid
    affine-grid makes from the same flags, bit for bit, without holding that grid.

    theta maps output positions to the input positions sampled, in -1..1 units across the
    width and across the height: --scale 2 shows twice the width and height (the picture
    shrinks to half), --translate 0.5,0 shows what lies a quarter of the width to the right
    (the picture moves left), --rotate 30 turns the -1..1 square 30° counter-clockwise as a
    viewer sees it: a square picture turns, one W wide and H high is sheared too (W 160,
    H 120: its rows turn 23°, its columns 38°); an a° turn of it into its own size is
    --theta cos(a),-sin(a)·H/W,0,sin(a)·W/H,cos(a),0. Given together, the flags compose as
    translate · rotate · shear · scale (scale applies first). The output is the input's H×W
    unless --size. A rank-5 tensor (N, C, D, H, W) of no named axes (.npy, a plain zarr) is
    warped in 3-D, by --theta's 3×4 matrices; a TIFF's or OME-Zarr's z-stack, plane by plane,
    or with --volume in 3-D as one volume: Z is D, one matrix for every T (or one per T), its
    axes and channels kept, its physical sizes where theta only scales and shifts (a rotation or
    shear drops those of the axes it mixes, with a warning: a turn about Z keeps Z's), and
    --size D,H,W.

    Example: geomcli warp samples/photo.png -o turned.png --rotate 30
    """
    read_stdin_once(("--theta", options["theta_text"]), *stdin_readers(inputs, batch))
    with failing_every_input(inputs, output, batch, common):
        operation = warp_operation(common, **options)
    run_files(operation, inputs, output, batch, common)
