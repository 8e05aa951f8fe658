"""geomcli info: what geomcli reads from files."""

from __future__ import annotations

import click

from geomcli.cli.base import Command
from geomcli.cli.params import Int
from geomcli.constants import DEFAULT_MAX_PIXELS


@click.command("info", cls=Command, short_help="Format, shape, dtype and value range of files.")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...",
                type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per file instead of a line.")
@click.option("--frames", type=click.Choice(["all", "first"]), default="all", show_default=True,
              help="An animated GIF, WebP or PNG: all shows its frames stacked on a leading axis, first "
                   "the first frame.")
@click.option("--max-pixels", type=Int(min=1), default=DEFAULT_MAX_PIXELS, show_default=True,
              envvar="GEOMCLI_MAX_PIXELS", show_envvar=True, help="Refuse files with more elements than this.")
def info(inputs: tuple[str, ...], as_json: bool, frames: str, max_pixels: int) -> None:
    """Show format, shape, dtype, pages, value range and size of files.

    Example: geomcli info samples/photo.png samples/tensor.npy
    """
    from geomcli.engine import one_file

    code = one_file.info_files(inputs, as_json=as_json, frames=frames, max_pixels=max_pixels)
    if code:
        raise SystemExit(code)
