"""geomcli affine-grid: ONNX AffineGrid, from matrices in a file, inline or built from flags."""

from __future__ import annotations

import dataclasses

import click

from geomcli.cli.base import Command
from geomcli.cli.options import common_options, is_stdout, output_option, read_stdin_once, transform_options
from geomcli.cli.params import FloatList, Int, IntList, Name
from geomcli.cli.running import output_format, refuse_writing_into, usage_errors
from geomcli.engine.options import Common
from geomcli.errors import GeomError


@click.command("affine-grid", cls=Command, short_help="Sampling grids from affine matrices (ONNX AffineGrid).")
@output_option
@click.option("--size", type=IntList(empty=True), default=None,
              help="N,C,H,W for a 2-D grid or N,C,D,H,W for a 3-D grid.")
@click.option("--like", type=Name(allow_dash=False), default=None, metavar="FILE",
              help="Take N,C,H,W (N,C,D,H,W from a rank-5 tensor) from this file, as grid-sample and warp "
                   "read it.")
@click.option("--no-auto-orient", is_flag=True,
              help="With --like: the file's shape as stored, as grid-sample --no-auto-orient reads it, not "
                   "turned upright by its EXIF (or TIFF) orientation.")
@click.option("--frames", type=click.Choice(["all", "first"]), default=None,
              help="With --like: an animated GIF, WebP or PNG as grid-sample --frames reads it: all gives N = "
                   "its frame count, first N = 1.  [default: first]")
@click.option("--series", type=Int(min=0), default=None, metavar="N",
              help="With --like: a TIFF's series N only, as grid-sample --series reads it.  [default: every "
                   "page, and every series of one shape]")
@click.option("--page", type=Int(min=0), default=None, metavar="N",
              help="With --like: a TIFF's page N only (N = 1), as grid-sample --page reads it.")
@click.option("--volume", is_flag=True,
              help="With --like: a z-stack's (a TIFF's or OME-Zarr's Z axis) grid as one volume, (T, D, H, W, 3) "
                   "from 3x4 matrices (--theta, 12 numbers each), as warp and grid-sample --volume read it; "
                   "not one 2-D grid per plane.")
@transform_options
@click.option("--align-corners", is_flag=True,
              help="-1 and 1 are the centres of the corner pixels, not their outer edges.")
@click.option("--dtype", type=click.Choice(("float32", "float64", "float16", "bfloat16")), default=None,
              help="theta's and the grid's dtype.  [default: a theta file's float dtype, else float32]")
@common_options
def affine_grid(output: str, size: tuple[int, ...] | None, like: str | None, no_auto_orient: bool,
                frames: str | None, series: int | None, page: int | None, volume: bool, theta_text: str | None,
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
    if no_auto_orient and like is None:
        raise click.UsageError("--no-auto-orient is for --like's file", ctx)
    for name, value in (("frames", frames), ("series", series), ("page", page), ("volume", volume or None)):
        if value is not None and like is None:
            raise click.UsageError(f"--{name} is for --like's file", ctx)
    if series is not None and page is not None:
        raise click.UsageError("give --series or --page, not both", ctx)
    common = dataclasses.replace(common, fidelity=dataclasses.replace(common.fidelity, auto_orient=not no_auto_orient,
                                                                      frames=frames, series=series, page=page))
    flags_used = [name for name in ("rotate", "scale", "translate", "shear")
                  if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT]
    if theta_text is not None and flags_used:
        raise click.UsageError(f"--theta cannot be combined with --{', --'.join(flags_used)}", ctx)
    if volume and flags_used:  # as warp --volume refuses them
        raise click.UsageError("--volume makes 3-D grids, from 3x4 matrices (12 numbers each): --rotate, --scale, "
                               "--shear and --translate make 2-D matrices; give --theta", ctx)
    read_stdin_once(("--theta", theta_text), ("--like", like))
    if size is not None:
        _check_grid_size(size)
        if len(size) == 5 and flags_used:
            raise click.UsageError(f"--{', --'.join(flags_used)} make{'s' if len(flags_used) == 1 else ''} 2-D "
                                   "matrices; a 3-D grid (5 --size values) takes --theta", ctx)
    found = output_format(output, common)
    from geomcli.engine import one_file, plan, report
    from geomcli.engine import theta as thetas

    if like is not None:  # (--theta is its input, which -o may name, as any command's)
        with usage_errors():
            plan.check_spared(output, [("--like", like)])

    theta_file = theta_text if thetas.is_file(theta_text) else None
    refuse_writing_into(output, (("--theta", theta_file), ("--like", like)))
    theta_option = next(param for param in ctx.command.params if param.name == "theta_text")
    numbers = None if theta_text is None or theta_file else FloatList().convert(theta_text, theta_option, ctx)
    if numbers is not None and size is not None:
        try:
            thetas.check_count(numbers, len(size) - 2, size[0])
        except GeomError as error:
            raise click.BadParameter(str(error).removeprefix("--theta: "), param_hint="'--theta'") from error
    with usage_errors():
        flags = (rotate, scale, translate, shear)
        outcome = one_file.affine_grid_file(theta_text, theta_file, numbers, size, like, flags, dtype, align_corners,
                                            output, found, common, volume)
    code = report.finish(outcome, common, data_on_stdout=is_stdout(output))
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
