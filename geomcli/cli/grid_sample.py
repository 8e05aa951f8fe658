"""geomcli grid-sample: ONNX GridSample on files, with a grid from a file or stdin."""

from __future__ import annotations

import click

from geomcli.cli.base import Command
from geomcli.cli.options import common_options, fidelity_options, files_options, sampling_options
from geomcli.cli.running import engine_errors, run_files
from geomcli.engine.options import BatchOptions, Common


@click.command("grid-sample", cls=Command, short_help="Sample inputs at a grid's positions (ONNX GridSample).")
@click.option("--grid", "grid_path", required=True, metavar="FILE|-",
              help="The grid, (N, Hout, Wout, 2) for images and 2-D tensors ((N, Dout..., r) for r spatial "
                   "axes), x first, in -1..1 units: a .npy or TIFF file, or - for stdin.")
@sampling_options
@files_options
@common_options
@fidelity_options
def grid_sample(inputs: tuple[str, ...], output: str | None, batch: BatchOptions | None, grid_path: str,
                mode: str, padding_mode: str, align_corners: bool, fill: str | None, common: Common) -> None:
    """Sample each input at the positions a grid gives (ONNX GridSample, opset 22).

    An H×W×C image is data (1, C, H, W): a grid (1, Ho, Wo, 2) gives an Ho×Wo×C image of
    the input's dtype. A batch applies the one grid to every input. The grid that
    affine-grid makes for an image turns, scales or shears it.

    Example: geomcli grid-sample samples/photo.png --grid samples/grid.npy -o turned.png
    """
    if grid_path == "-" and "-" in inputs:
        raise click.UsageError("--grid - and the input - cannot both read stdin")
    from geomcli.engine.operations import GridSample
    from geomcli.engine.theta import read_grid

    with engine_errors():
        grid = read_grid(grid_path, common.max_pixels)
    operation = GridSample(grid, grid_path, mode, padding_mode, align_corners, fill)
    run_files(operation, inputs, output, batch, common)
