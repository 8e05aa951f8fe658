"""geomcli info: what geomcli reads from files."""

from __future__ import annotations

from typing import Any

import click

from geomcli.cli.base import Command
from geomcli.cli.options import files_from_option, read_stdin_once, storage_option
from geomcli.cli.params import Int, Name
from geomcli.constants import DEFAULT_MAX_PIXELS


@click.command("info", cls=Command, short_help="Format, shape, dtype and value range of files.")
@click.argument("inputs", nargs=-1, metavar="INPUT...", type=Name(allow_dash=True, readable=False))
@files_from_option
@click.option("-r", "--recursive", is_flag=True, help="Take folders' subfolders too.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per file instead of a line.")
@click.option("--frames", type=click.Choice(["all", "first"]), default="all", show_default=True,
              help="An animated GIF, WebP or PNG: all shows its frames stacked on a leading axis, first "
                   "the first frame.")
@click.option("--max-pixels", type=Int(min=1), default=DEFAULT_MAX_PIXELS, show_default=True,
              envvar="GEOMCLI_MAX_PIXELS", show_envvar=True, help="Refuse files with more elements than this.")
@storage_option
def info(inputs: tuple[str, ...], files_from: str | None, recursive: bool, as_json: bool, frames: str,
         max_pixels: int, storage_options: tuple[tuple[str, Any], ...]) -> None:
    """Show what geomcli reads from files: format, shape, dtype, layout, pages, value range, size,
    and the ICC profile, DPI, pixel size (OME, ImageJ, OME-Zarr), EXIF orientation and
    compression where a file has them. Takes
    files, folders (-r for their subfolders), quoted globs, URLs, --files-from and - as the
    transforms do.

    Example: geomcli info samples/photo.png samples/tensor.npy
    """
    from geomcli.cli.running import usage_errors
    from geomcli.engine.info import info_files

    if not inputs and files_from is None:
        raise click.UsageError("give an INPUT, or --files-from FILE", click.get_current_context())
    # (- twice, or - and --files-from -: the second found stdin empty, 'Error: <stdin>: empty input')
    read_stdin_once(*(("the input", path) for path in inputs), ("--files-from", files_from))
    with usage_errors():
        code = info_files(inputs, recursive=recursive, as_json=as_json, frames=frames, max_pixels=max_pixels,
                          files_from=files_from, storage_options=storage_options)
    if code:
        raise SystemExit(code)
