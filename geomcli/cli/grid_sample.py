"""geomcli grid-sample: ONNX GridSample on files, with a grid from a file or stdin."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from geomcli.cli.base import Command
from geomcli.cli.options import (
    common_options,
    fidelity_options,
    files_options,
    read_stdin_once,
    sampling_options,
    stdin_readers,
)
from geomcli.cli.params import Name
from geomcli.cli.running import engine_errors, failing_every_input, run_files
from geomcli.engine.operations import GridSample
from geomcli.engine.options import BatchOptions, Common

if TYPE_CHECKING:
    from geomcli.ops.grid_sample import Mode as SamplingMode
    from geomcli.ops.grid_sample import PaddingMode


def grid_sample_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--grid and GridSample's attributes, for ``geomcli grid-sample`` and a chain's step."""
    command = sampling_options(command)
    command = click.option("--volume", is_flag=True,
                           help="Sample a z-stack (a TIFF's or OME-Zarr's Z axis) as one volume, Z Y X, at a 3-D "
                                "grid (N, Dout, Hout, Wout, 3), not plane by plane; T stays a stack (N), C "
                                "channels.")(command)
    return click.option("--grid", "grid_path", required=True, metavar="FILE|-",
                        type=Name(allow_dash=True, readable=False),
                        help="The grid, (N, Hout, Wout, 2) for 2-D data of batch N (1 for an image; (N, Dout..., "
                             "r) for r spatial axes), x first, in -1..1 units: a .npy, TIFF or .zarr, or - for "
                             "stdin.")(command)


def grid_sample_operation(common: Common, grid_path: str, mode: SamplingMode, padding_mode: PaddingMode,
                          align_corners: bool, fill: str | None, volume: bool = False) -> GridSample:
    """The operation, with its grid read (before any input)."""
    from geomcli.engine.theta import read_grid

    with engine_errors():
        grid = read_grid(grid_path, common.max_pixels)
    return GridSample(grid, grid_path, mode, padding_mode, align_corners, fill, volume)


@click.command("grid-sample", cls=Command, short_help="Sample inputs at a grid's positions (ONNX GridSample).")
@grid_sample_options
@files_options
@common_options
@fidelity_options
def grid_sample(inputs: tuple[str, ...], output: str | None, batch: BatchOptions | None, common: Common,
                **options: Any) -> None:
    """Sample each input at the positions a grid gives (ONNX GridSample, opset 22).

    An H×W×C image is data (1, C, H, W): a grid (1, Ho, Wo, 2) gives an Ho×Wo×C image of
    the input's dtype. A batch applies the one grid to every input. The grid that
    affine-grid makes for an image turns, scales or shears it. A TIFF's or OME-Zarr's z-stack is
    sampled plane by plane, or with --volume as one volume (Z is D) at a grid (N, Dout, Hout, Wout,
    3).

    Example: geomcli grid-sample samples/photo.png --grid samples/grid.npy -o turned.png
    """
    read_stdin_once(("--grid", options["grid_path"]), *stdin_readers(inputs, batch))
    with failing_every_input(inputs, output, batch, common):
        operation = grid_sample_operation(common, **options)
    run_files(operation, inputs, output, batch, common)
