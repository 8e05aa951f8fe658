"""geomcli crop-pad: ONNX CenterCropPad on files."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from geomcli.cli.base import Command
from geomcli.cli.options import common_options, fidelity_options, files_options
from geomcli.cli.params import IntList
from geomcli.cli.running import run_files, usage_errors
from geomcli.engine.operations import CropPad
from geomcli.engine.options import BatchOptions, Common


def crop_pad_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """CenterCropPad's inputs, for ``geomcli crop-pad`` and a chain's crop-pad step."""
    for option in reversed([
        click.option("--shape", "target", type=IntList(sizes=True), required=True,
                     help="Target lengths: H,W (or H,W,C) on an image; one per axis (or per --axes) on a tensor."),
        click.option("--axes", type=IntList(), default=None, metavar="AXES",
                     help="The axes --shape refers to; negative values count from the end.  [default: all, or H "
                          "and W for two values on an image or a tensor in a known --layout]"),
        click.option("--fill", type=str, default=None,
                     help="Pad value, in the input's dtype (must fit it exactly): a number, inf/-inf/nan, "
                          "true/false, or text for string tensors.  [default: the dtype's zero]"),
    ]):
        command = option(command)
    return command


def crop_pad_operation(common: Common, target: tuple[int, ...], axes: tuple[int, ...] | None,
                       fill: str | None) -> CropPad:
    """The operation the options ask for; a --shape of another length than --axes is a usage error."""
    operation = CropPad(target, axes, fill)
    with usage_errors():
        operation.check()
    return operation


@click.command("crop-pad", cls=Command, short_help="Centre-crop or zero-pad (ONNX CenterCropPad).")
@crop_pad_options
@files_options
@common_options
@fidelity_options
def crop_pad(inputs: tuple[str, ...], output: str | None, batch: BatchOptions | None, common: Common,
             **options: Any) -> None:
    """Centre-crop or zero-pad to a target shape (ONNX CenterCropPad, opset 18).

    A crop keeps the window starting at floor((d - t) / 2); a pad puts the odd extra
    element at the end (right/bottom). On an image, --shape H,W crops or pads the two
    spatial axes and keeps the channels. One INPUT goes to -o; several, folders and
    globs go to --out-dir.

    Example: geomcli crop-pad samples/photo.png -o square.png --shape 100,100

    Example: geomcli crop-pad samples/photo.png samples/rgba.png --out-dir squares --shape 40,40
    """
    run_files(crop_pad_operation(common, **options), inputs, output, batch, common)
