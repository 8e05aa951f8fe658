"""``geomcli info``: what geomcli reads from files, taking the inputs the transforms take (files,
folders, ``-r``, quoted globs, ``-``): format, shape, dtype, bit depth, layout, pages, ICC
profile, DPI, EXIF orientation, XMP, PNG text, comment, compression and value range, per file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from geomcli.engine.one_file import maps_input
from geomcli.engine.plan import expand, read_list
from geomcli.engine.report import check_stdout, describe, show_info
from geomcli.errors import GeomError, PlanError

if TYPE_CHECKING:
    import numpy as np


def info_files(arguments: Sequence[str], *, recursive: bool, as_json: bool, frames: str | None,
               max_pixels: int, files_from: str | None = None,
               storage_options: tuple[tuple[str, Any], ...] = ()) -> int:
    """Each input read and shown in turn, then those ``files_from`` lists (--files-from); the exit
    code (1 if any failed). ``storage_options``: for URLs' filesystems (--storage-option)."""
    from geomcli.io import _remote

    _remote.configure(storage_options)
    check_stdout()
    listed = () if files_from is None else read_list(files_from)
    if "-" in listed:  # before any record: stdin is read as INPUT -, and the list may be stdin
        raise PlanError("- in a --files-from list names no file; give - as an INPUT to read stdin",
                        options="--files-from")
    code = 0
    for argument, literal in [*((argument, False) for argument in arguments), *((name, True) for name in listed)]:
        if argument == "-" and not literal:
            sources: list[Any] = [None]  # stdin, read as it comes
        elif literal:  # a name a list gives, as written (no glob)
            sources = list(expand([], recursive, [argument]))
        else:
            sources = list(expand([argument], recursive))
        for source in sources:
            if source is not None and source.error is not None:
                record: dict[str, Any] = {"input": source.path, "status": "error", "error": source.error}
            else:
                record = info(argument if source is None else source.path, max_pixels=max_pixels, frames=frames)
            code = max(code, show_info(record, as_json))
    return code


def info(path: str, *, max_pixels: int, frames: str | None) -> dict[str, Any]:
    """What ``geomcli info`` says of one file, as a JSON-ready record (status ``error`` on failure).

    The file is read once (a FIFO has nothing left for a second read): the read tells its page count
    and size too. A mapped input's value range is taken slab by slab. The shape is the one the
    transforms read: turned upright by an EXIF orientation, which ``orientation`` and a note say.
    """
    import numpy as np

    from geomcli import io
    from geomcli.engine import summary
    from geomcli.io import _zarr

    try:
        if _zarr.is_zarr(path):
            described = _zarr.describe(path)
            dtype = described["dtype"]  # (its str is no dtype's name for numpy's StringDType)
            return {"input": path, "format": "zarr", **described, "dtype": str(dtype),
                    "bit_depth": _bit_depth(dtype), "pages": None, "icc": None, "dpi": None,
                    "orientation": None, "upright": False, "value_range": None, "file_size": None,
                    "xmp": None, "text": [], "comment": None,
                    "notes": ["value range not read: it would read every chunk"], "status": "ok", "error": None}
        past = _past_the_limit(path, max_pixels, frames)
        if past is not None:
            return past
        loaded = io.read_array(path, max_pixels=max_pixels, frames=frames, mmap=maps_input(path))
        data = loaded.data
        if isinstance(data, np.memmap):
            from geomcli.engine import slabs

            value_range, nan = slabs.range_and_nan(data)
        else:
            value_range, nan = summary.range_and_nan(data)
        metadata = loaded.metadata
        return {"input": path, "format": loaded.format, "shape": list(data.shape), "dtype": str(data.dtype),
                "bit_depth": _bit_depth(data.dtype),
                "layout": loaded.layout, "pages": loaded.pages,
                "icc": None if metadata.icc is None else io.icc_description(metadata.icc),
                "dpi": None if metadata.dpi is None else [round(value, 3) for value in metadata.dpi],
                "orientation": loaded.orientation, "upright": loaded.upright,
                "xmp": None if metadata.xmp is None else len(metadata.xmp),
                "text": io.text_keywords(metadata.text),
                "comment": None if metadata.comment is None else metadata.comment.decode("utf-8", "replace"),
                "compression": metadata.compression, "value_range": value_range, "file_size": loaded.file_size,
                "notes": [*loaded.notes, *([summary.NAN_NOTE] if nan else [])],
                "status": "ok", "error": None}
    except io.SeriesError as error:
        # which one a transform is to read is its --series; info shows them all
        return {"input": path, "format": "tiff", "shape": None, "dtype": None, "layout": None, "pages": None,
                "series": [{"index": index, "shape": list(shape), "dtype": dtype, "axes": axes}
                           for index, (shape, dtype, axes) in enumerate(error.series)],
                "value_range": None, "file_size": None,
                "notes": [f"{len(error.series)} image series of different shapes; a transform takes one "
                          "with --series N"], "status": "ok", "error": None}
    except (GeomError, OSError) as error:
        return {"input": path, "status": "error", "error": describe(error)}


def _past_the_limit(path: str, max_pixels: int, frames: str | None) -> dict[str, Any] | None:
    """The record of a local TIFF or .npy that declares more elements than ``max_pixels`` and that
    the transforms read chunk by chunk (tile by tile, or a memory map), from its header and tags
    alone, as a zarr's: a 200 GB stack the transforms take was refused as a bomb is ('elements
    exceed the limit', exit 1), and its value range would read it all. None for another file."""
    import math

    from geomcli import io
    from geomcli.io import _remote

    if path == "-" or _remote.is_url(path) or io.is_stream(path):
        return None
    try:
        kind = io.format_for_path(path)
    except GeomError:
        return None
    if kind not in ("tiff", "npy"):
        return None
    header = io.read_header(path, frames=frames)
    if math.prod(header.shape) <= max_pixels:
        return None
    metadata = io.Metadata()
    if kind == "tiff":
        tiles = io.tiff_as_zarr(path, max_pixels=max_pixels)
        if tiles is None or tiles[0].strile > max_pixels:
            return None  # decoded whole, or a strip past the limit, by a transform too: refused as before
        metadata = tiles[2]
        notes = list(tiles[0].notes)
    else:
        notes = []
    return {"input": path, "format": kind, "shape": list(header.shape), "dtype": str(header.dtype),
            "bit_depth": _bit_depth(header.dtype), "layout": header.layout, "pages": header.pages,
            "icc": None if metadata.icc is None else io.icc_description(metadata.icc),
            "dpi": None if metadata.dpi is None else [round(value, 3) for value in metadata.dpi],
            "orientation": None, "upright": False, "xmp": None if metadata.xmp is None else len(metadata.xmp),
            "text": io.text_keywords(metadata.text),
            "comment": None if metadata.comment is None else metadata.comment.decode("utf-8", "replace"),
            "compression": metadata.compression, "value_range": None, "file_size": header.file_size,
            "notes": [*notes, f"value range not read: {math.prod(header.shape)} elements, more than --max-pixels "
                      "(a transform reads it chunk by chunk)"], "status": "ok", "error": None}


def _bit_depth(dtype: np.dtype) -> int:
    return 1 if dtype.kind == "b" else dtype.itemsize * 8
