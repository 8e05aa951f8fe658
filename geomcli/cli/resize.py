"""geomcli resize: ONNX Resize on files."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from geomcli.cli.base import Command
from geomcli.cli.options import common_options, fidelity_options, files_options
from geomcli.cli.params import Float, FloatList, IntList
from geomcli.cli.running import run_files, usage_errors
from geomcli.engine.operations import Resize
from geomcli.engine.options import BatchOptions, Common

_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def resize_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Resize's attributes and inputs, for ``geomcli resize`` and a chain's resize step."""
    for option in reversed([
        click.option("--sizes", type=IntList(sizes=True), default=None, metavar="DIMS",
                     help="Target lengths: H,W on an image; one per axis (or per --axes) on a tensor."),
        click.option("--scales", type=FloatList(), default=None, metavar="NUMBERS",
                     help="Scales, as --sizes names axes (ONNX holds them as float32)."),
        click.option("--axes", type=IntList(), default=None, metavar="AXES",
                     help="The axes --sizes, --scales and --roi refer to; negative values count from the end."),
        click.option("--mode", type=click.Choice(["nearest", "linear", "cubic"]), default="nearest",
                     show_default=True, help="Interpolation."),
        click.option("--coordinate-transformation-mode", type=click.Choice(_TRANSFORMS), default="half_pixel",
                     show_default=True, help="How an output index maps to an input coordinate."),
        click.option("--roi", type=FloatList(), default=None, metavar="NUMBERS",
                     help="tf_crop_and_resize's region: the starts, then the ends, of the resized axes "
                          "(on an image start_H,start_W,end_H,end_W), normalised to 0..1."),
        click.option("--cubic-coeff-a", type=Float(), default=-0.75, show_default=True, metavar="A",
                     help="Keys' coefficient of the cubic kernel."),
        click.option("--exclude-outside", is_flag=True,
                     help="Weigh taps outside the input 0 and renormalise (linear and cubic)."),
        click.option("--extrapolation-value", type=Float(), default=0.0, show_default=True, metavar="V",
                     help="What tf_crop_and_resize gives points outside the input."),
        click.option("--keep-aspect-ratio-policy", type=click.Choice(["stretch", "not_larger", "not_smaller"]),
                     default="stretch", show_default=True,
                     help="How --sizes is read: exactly, or one scale for all axes that fits inside (not_larger) "
                          "or covers (not_smaller) the sizes."),
        click.option("--nearest-mode", type=click.Choice(_NEAREST), default="round_prefer_floor", show_default=True,
                     help="How nearest rounds a coordinate."),
        click.option("--antialias", is_flag=True,
                     help="On a downscale, widen the linear or cubic filter by 1/scale (as Pillow does)."),
    ]):
        command = option(command)
    return command


def resize_operation(common: Common, sizes: tuple[int, ...] | None, scales: tuple[float, ...] | None,
                     axes: tuple[int, ...] | None, roi: tuple[float, ...] | None, **attributes: Any) -> Resize:
    """The operation the options ask for; giving both or neither of --sizes and --scales, or
    options that are wrong whatever the files (Resize.check), is a usage error."""
    if (sizes is None) == (scales is None):
        raise click.UsageError("give exactly one of --sizes and --scales")
    operation = Resize(sizes, scales, axes, roi, **attributes)
    with usage_errors():
        operation.check()
    return operation


@click.command("resize", cls=Command, short_help="Resize images and tensors (ONNX Resize).")
@resize_options
@files_options
@common_options
@fidelity_options
def resize(inputs: tuple[str, ...], output: str | None, batch: BatchOptions | None, common: Common,
           **options: Any) -> None:
    """Resize to sizes or by scales (ONNX Resize, opset 19), exactly as an ONNX graph does.

    The defaults are the spec's (nearest, half_pixel). An exported "shorter side to 256"
    is --sizes 256,256 --keep-aspect-ratio-policy not_smaller --mode linear --antialias;
    that is not torchvision's Resize(256), which truncates the long side to int(256 * long
    / short) and samples each axis at its own out/in. Its pixels, like Pillow's
    resize((w, h), BILINEAR), are --sizes h,w --mode linear --antialias --exclude-outside
    at its size, within 1 level; but not on RGBA or grey + alpha, where Pillow
    premultiplies the colours by alpha: geomcli resizes each channel alone, alpha too, as
    the graph does, so where alpha varies the colours differ, and those under transparent
    pixels show at their edges.

    Example: geomcli resize samples/photo.png -o small.png --sizes 60,80 --mode linear --antialias
    """
    run_files(resize_operation(common, **options), inputs, output, batch, common)
