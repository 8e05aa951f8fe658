"""Plain records of what a run was asked: what every operation takes (``Common``), what it keeps
of a file and how it encodes the output (``Fidelity``), and a run over many files (``BatchOptions``).
Frozen and picklable: a batch sends them to its workers once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from geomcli.constants import DEFAULT_MAX_PIXELS

if TYPE_CHECKING:
    from geomcli.io import WriteOptions


@dataclass(frozen=True)
class Fidelity:
    """What a transform keeps of a file besides its values, and how it encodes the output."""

    auto_orient: bool = True
    strip: bool = False
    frames: str | None = None
    series: int | None = None
    page: int | None = None
    compress_level: int | None = None
    quality: int | None = None
    compression: str | None = None
    subsampling: str | None = None
    keep_palette: bool = False  # a palette image's indices, not its colours (io.read_array's palette)


@dataclass(frozen=True)
class Common:
    """The options every operation takes: the input's layout, the output's format, what is shown,
    the size limit and the threads."""

    layout: str | None = None
    format: str | None = None
    quiet: bool = False
    json: bool = False
    debug: bool = False
    max_pixels: int = DEFAULT_MAX_PIXELS
    threads: int | None = None
    fidelity: Fidelity = field(default_factory=Fidelity)
    # --storage-option KEY=VALUE: for the filesystems of URLs (geomcli.io._remote), beside their own configuration
    storage_options: tuple[tuple[str, Any], ...] = ()


def write_options(common: Common) -> WriteOptions:
    """How the output is encoded: --compress-level, --quality, --compression, --threads."""
    from geomcli import io

    fidelity = common.fidelity
    return io.WriteOptions(fidelity.compress_level, fidelity.quality, fidelity.compression, common.threads,
                           fidelity.subsampling)


def unused_options(fidelity: Fidelity, input_format: str, output_format: str) -> list[str]:
    """One warning for each encoder or reader option this file's formats do not use (a reader's
    is of the input). (--compression on output other than TIFF is a usage error: io.refused_option.)"""
    from geomcli.engine import summary

    unused = []
    if fidelity.quality is not None and output_format not in ("jpeg", "webp"):
        unused.append(f"--quality is for JPEG and WebP output, not {output_format.upper()}; ignored")
    if fidelity.subsampling is not None and output_format != "jpeg":
        unused.append(f"--subsampling is for JPEG output, not {output_format.upper()}; ignored")
    if fidelity.compress_level is not None and output_format != "png":
        unused.append(f"--compress-level is for PNG output, not {output_format.upper()}; ignored")
    for name, value in (("--series", fidelity.series), ("--page", fidelity.page)):
        if value is not None and input_format != "tiff":
            unused.extend(summary.of_input(f"{name} is for TIFF input, not {input_format.upper()}; ignored"))
    return unused


def unused_by_result(fidelity: Fidelity, output_format: str, written_shape: list[int]) -> list[str]:
    """A warning for an encoder option the result's shape leaves nothing to do: --subsampling of a
    grey JPEG (``written_shape`` as the file holds it), whose one component has no chroma.

    >>> unused_by_result(Fidelity(subsampling="4:4:4"), "jpeg", [20, 30])
    ['--subsampling is for colour JPEG output, not grey (one channel, no chroma); ignored']
    >>> unused_by_result(Fidelity(subsampling="4:4:4"), "jpeg", [20, 30, 3])
    []
    """
    grey = len(written_shape) == 2 or (len(written_shape) == 3 and written_shape[-1] == 1)
    if fidelity.subsampling is not None and output_format == "jpeg" and grey:
        return ["--subsampling is for colour JPEG output, not grey (one channel, no chroma); ignored"]
    return []


@dataclass(frozen=True)
class BatchOptions:
    """A run over many files: ``--out-dir`` and what goes with it."""

    out_dir: str
    name: str = "{stem}{suffix}"
    recursive: bool = False
    jobs: int | None = None
    fail_fast: bool = False
    skip_existing: bool = False
    no_clobber: bool = False
    dry_run: bool = False
    scheduler: str | None = None  # --scheduler: the Dask cluster that does the files (geomcli.engine.cluster)
    files_from: str | None = None  # --files-from: a list of inputs, one a line or NUL-separated (- for stdin)
