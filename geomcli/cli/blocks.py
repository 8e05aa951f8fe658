"""geomcli space-to-depth and depth-to-space: ONNX SpaceToDepth and DepthToSpace on files."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from geomcli.cli.base import Command
from geomcli.cli.options import common_options, fidelity_options, files_options
from geomcli.cli.params import Int
from geomcli.cli.running import run_files
from geomcli.engine.operations import DepthToSpace, SpaceToDepth
from geomcli.engine.options import BatchOptions, Common


def blocks_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--blocksize and --mode, shared by space-to-depth and depth-to-space and their chain steps."""
    command = click.option("--mode", type=click.Choice(["DCR", "CRD"]), default="DCR", show_default=True,
                           help="Channel order: depth-column-row (DCR) or column-row-depth (CRD).")(command)
    command = click.option("--blocksize", type=Int(min=1), required=True,
                           help="Block edge b; 1 is the identity.")(command)
    return command


def space_to_depth_operation(common: Common, blocksize: int, mode: str) -> SpaceToDepth:
    return SpaceToDepth(blocksize, mode)


def depth_to_space_operation(common: Common, blocksize: int, mode: str) -> DepthToSpace:
    return DepthToSpace(blocksize, mode)


@click.command("space-to-depth", cls=Command, short_help="Blocks of space into channels (ONNX SpaceToDepth).")
@blocks_options
@files_options
@common_options
@fidelity_options
def space_to_depth(inputs: tuple[str, ...], output: str | None, batch: BatchOptions | None, blocksize: int, mode: str,
                   common: Common) -> None:
    """Move blocks of space into channels (ONNX SpaceToDepth, opset 28).

    An H×W×C image becomes (H/b)×(W/b)×(C·b²); a tensor is read in --layout (NCHW
    for rank 4) and written back in it. Channel k of the result is what the ONNX
    operator puts there for the same data as NCHW: DCR k = (bh·b + bw)·C + c,
    CRD k = c·b² + bh·b + bw. H and W must be multiples of the blocksize. A pixel
    is then b pixels a side: its size along y and x is b times the input's (the
    DPI over b; an OME or ImageJ calibration or an OME-Zarr scale times b, which
    a note says); channel names no longer fit the channels, and a warning says they are dropped.

    Example: geomcli space-to-depth samples/tensor.npy -o blocks.npy --blocksize 2
    """
    run_files(SpaceToDepth(blocksize, mode), inputs, output, batch, common)


@click.command("depth-to-space", cls=Command, short_help="Channels into blocks of space (ONNX DepthToSpace).")
@blocks_options
@files_options
@common_options
@fidelity_options
def depth_to_space(inputs: tuple[str, ...], output: str | None, batch: BatchOptions | None, blocksize: int, mode: str,
                   common: Common) -> None:
    """Move channels back into blocks of space (ONNX DepthToSpace, opset 28, the inverse of SpaceToDepth).

    An H×W×C image becomes (H·b)×(W·b)×(C/b²); in the same --mode it undoes
    space-to-depth exactly. C must be a multiple of blocksize². A pixel is then
    1/b of one a side: its size along y and x is the input's over b (the DPI
    times b; an OME or ImageJ calibration or an OME-Zarr scale over b, which a
    note says).

    Example: geomcli depth-to-space samples/blocks.npy -o restored.npy --blocksize 2
    """
    run_files(DepthToSpace(blocksize, mode), inputs, output, batch, common)
