"""``geomcli info``: what geomcli reads from files, taking the inputs the transforms take (files,
folders, ``-r``, quoted globs, ``-``): format, shape, dtype, bit depth, layout, pages, ICC
profile, DPI, EXIF orientation, XMP, PNG text, comment, compression and value range, per file."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from geomcli.engine.one_file import maps_input
from geomcli.engine.plan import expand, folders_left_text, input_key, passed_over_text, read_list
from geomcli.engine.report import check_stdout, describe, echo_stderr, show_info
from geomcli.errors import GeomError

if TYPE_CHECKING:
    import numpy as np

    from geomcli.io import Metadata


def info_files(arguments: Sequence[str], *, recursive: bool, as_json: bool, frames: str | None,
               max_pixels: int, files_from: str | None = None,
               storage_options: tuple[tuple[str, Any], ...] = ()) -> int:
    """Each input read and shown in turn, then those ``files_from`` lists (--files-from), once all
    are found; the exit code (1 if any failed). ``storage_options``: for URLs' filesystems
    (--storage-option). A store taken for dead on the way is asked nothing more
    (io._remote.watching_stores)."""
    from geomcli.io import _remote

    _remote.configure(storage_options)
    check_stdout()
    with _remote.watching_stores():
        return _info_found(arguments, recursive=recursive, as_json=as_json, frames=frames, max_pixels=max_pixels,
                           files_from=files_from)


def _info_found(arguments: Sequence[str], *, recursive: bool, as_json: bool, frames: str | None,
                max_pixels: int, files_from: str | None) -> int:
    listed = () if files_from is None else read_list(files_from)  # before any record
    # every argument expanded before any record, as a transform plans: a pattern matching nothing is
    # a usage error (exit 2) with nothing shown, not one after the records of the arguments before it
    found: list[tuple[str, Any]] = []
    passed_over: list[str] = []  # the files of folders and patterns that are no input
    folders_left: list[str] = []  # the subfolders of folders, without -r
    seen: set[str] = set()  # a file named twice (two patterns, a name and ./name) is shown once, as done once
    for argument, literal in [*((argument, False) for argument in arguments), *((name, True) for name in listed)]:
        if argument == "-" and not literal:
            found.append((argument, None))  # stdin, read as it comes
            continue
        sources = expand([], recursive, [argument]) if literal else \
            expand([argument], recursive, passed_over=passed_over, folders_left=folders_left)
        for source in sources:
            if input_key(source.path) not in seen:
                seen.add(input_key(source.path))
                found.append((argument, source))
    if passed_over:
        echo_stderr(f"Warning: {passed_over_text(passed_over)}")
    if folders_left:
        echo_stderr(f"Warning: {folders_left_text(sorted(set(folders_left)))}")
    code = 0
    for argument, source in found:
        if source is not None and source.error is not None:
            record: dict[str, Any] = _failed(source.path, source.error)
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
            sizes = described.pop("pixel_size")
            dtype = described["dtype"]  # (its str is no dtype's name for numpy's StringDType)
            return {"input": path, "format": "zarr", **described, "dtype": str(dtype),
                    "bit_depth": _bit_depth(dtype), "pages": None, "icc": None, "dpi": None,
                    "pixel_size": sizes,
                    "orientation": None, "upright": False, "value_range": None, "file_size": None,
                    "xmp": None, "text": [], "comment": None,
                    "notes": ["value range not read: it would read every chunk"], "status": "ok", "error": None}
        past = _past_the_limit(path, max_pixels, frames)
        if past is not None:
            return past
        loaded = io.read_picture(path, max_pixels=max_pixels, frames=frames, mmap=maps_input(path))
        if isinstance(loaded, io.Picture):
            # an 8-bit image's range is Pillow's histogram's: no array of it is made (an 80 MP photo
            # took 570 MB, where Pillow's image is 322 MB)
            return _record(path, loaded.format, loaded.shape, np.dtype(np.uint8), loaded.layout, loaded.pages,
                           loaded.metadata, loaded.value_range(), loaded.file_size, list(loaded.notes),
                           loaded.orientation, loaded.upright)
        data = loaded.data
        if isinstance(data, np.memmap):
            from geomcli.engine import slabs

            value_range, nan = slabs.range_and_nan(data)
        else:
            value_range, nan = summary.range_and_nan(data)
        return _record(path, loaded.format, data.shape, data.dtype, loaded.layout, loaded.pages, loaded.metadata,
                       value_range, loaded.file_size, [*loaded.notes, *([summary.NAN_NOTE] if nan else [])],
                       loaded.orientation, loaded.upright)
    except io.SeriesError as error:
        # which one a transform is to read is its --series; info shows them all
        return {**_nothing_read(path), "format": "tiff",
                "series": [{"index": index, "shape": list(shape), "dtype": dtype, "axes": axes}
                           for index, (shape, dtype, axes) in enumerate(error.series)],
                "notes": [f"{len(error.series)} image series of different shapes; a transform takes one "
                          "with --series N"]}
    except (GeomError, OSError) as error:
        return _failed(path, describe(error))


def _nothing_read(path: str) -> dict[str, Any]:
    """The keys of every record (_record's), for a file whose pixels were not read: a script reading
    record["shape"] of a failed file finds None, not a KeyError, as in a transform's record."""
    return {"input": path, "format": None, "shape": None, "dtype": None, "bit_depth": None, "layout": None,
            "pages": None, "icc": None, "dpi": None, "pixel_size": None, "orientation": None, "upright": False,
            "xmp": None, "text": [], "comment": None, "compression": None, "value_range": None, "file_size": None,
            "notes": [], "status": "ok", "error": None}


def _failed(path: str, error: str) -> dict[str, Any]:
    return {**_nothing_read(path), "status": "error", "error": error}


# a TIFF of more decoded bytes than this that is read tile by tile has its value range taken a region
# at a time: decoded whole, a 512 MiB one peaked at 1.3 GB
TILED_RANGE_BYTES = 256 << 20
REGION_BYTES = 64 << 20


def _past_the_limit(path: str, max_pixels: int, frames: str | None) -> dict[str, Any] | None:
    """The record of a local TIFF or .npy that the transforms read chunk by chunk (tile by tile,
    or a memory map) where the whole read would be refused or costly: past ``max_pixels``, from
    its header and tags alone, as a zarr's (a 200 GB stack the transforms take was refused as a
    bomb is: 'elements exceed the limit', exit 1; its value range would read it all); a TIFF of
    more than TILED_RANGE_BYTES within it, its value range taken region by region. None for
    another file, read whole as before."""
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
    elements = math.prod(header.shape)
    past = elements > max_pixels
    if not past and (kind == "npy" or elements * header.dtype.itemsize <= TILED_RANGE_BYTES):
        return None
    metadata, notes, value_range, nan = io.Metadata(), [], None, False
    if kind == "tiff":
        tiles = io.tiff_as_zarr(path, max_pixels=max_pixels)
        if tiles is None or tiles[0].strile > max_pixels:
            return None  # decoded whole, or a strip past the limit, by a transform too: as before
        metadata, notes = tiles[2], list(tiles[0].notes)
        if not past:
            import importlib.util

            if importlib.util.find_spec("zarr") is None:  # (tifffile's store needs it: read whole)
                return None
            value_range, nan = _range_by_regions(tiles[0], max_pixels)
    if past:
        notes.append(f"value range not read: {elements} elements, more than --max-pixels (a transform reads it "
                     "chunk by chunk)")
    from geomcli.engine import summary

    return _record(path, kind, header.shape, header.dtype, header.layout, header.pages, metadata, value_range,
                   header.file_size, [*notes, *([summary.NAN_NOTE] if nan else [])])


def _record(path: str, format: str, shape: tuple[int, ...], dtype: Any, layout: str | None, pages: int | None,
            metadata: Metadata, value_range: list[Any] | None, file_size: int | None, notes: list[str],
            orientation: int | None = None, upright: bool = False) -> dict[str, Any]:
    """The record of a file read (or described from its header and tags): its shape, dtype and layout as
    the transforms read it, and what its metadata says."""
    from geomcli import io

    sizes = metadata.pixel_size()
    # a microscope's calibration (ImageJ's pixels per micron) is its pixel size, not dots per inch; an
    # ImageJ TIFF's ResolutionUnit alone (no unit in its description) is both, as ImageJ and a TIFF reader read it
    plain = not metadata.calibrated or metadata.plain_resolution
    dpi = None if metadata.dpi is None or not plain else [round(value, 3) for value in metadata.dpi]
    return {"input": path, "format": format, "shape": list(shape), "dtype": str(dtype),
            "bit_depth": metadata.bits or _bit_depth(dtype),
            "layout": layout, "pages": pages,
            "icc": None if metadata.icc is None else io.icc_description(metadata.icc),
            "dpi": dpi, "pixel_size": sizes,
            "orientation": orientation, "upright": upright, "xmp": None if metadata.xmp is None else len(metadata.xmp),
            "text": io.text_keywords(metadata.text),
            "comment": None if metadata.comment is None else metadata.comment.decode("utf-8", "replace"),
            "compression": metadata.compression, "value_range": value_range, "file_size": file_size,
            "notes": [*notes, *(f"{size} left out of the pixel size" for size in metadata.sizes_left_out)],
            "status": "ok", "error": None}


def _range_by_regions(tiles: Any, max_pixels: int) -> tuple[list[Any] | None, bool]:
    """The value range (and whether NaN is held) of a TIFF's tiles, a region of about
    REGION_BYTES (and at most ``max_pixels`` elements) at a time."""
    from geomcli.engine import summary

    budget = max(1, min(max_pixels, REGION_BYTES // max(1, tiles.dtype.itemsize)))
    return summary.joined_range(summary.range_and_nan(tiles[region]) for region in _regions(tiles.shape, budget))


def _regions(shape: tuple[int, ...], budget: int) -> Iterator[tuple[slice, ...]]:
    """Regions covering an array of ``shape``, in order: bands along the first axis of about
    ``budget`` elements, a band of each index of it where one index holds more.

    >>> list(_regions((4, 3), 6)), len(list(_regions((2, 8, 5), 10)))
    ([(slice(0, 2, None),), (slice(2, 4, None),)], 8)
    """
    import math

    if not shape:
        yield ()
        return
    tail = math.prod(shape[1:])
    if tail <= budget or len(shape) == 1:
        step = max(1, budget // max(1, tail))
        for start in range(0, shape[0], step):
            yield (slice(start, min(start + step, shape[0])),)
        return
    for index in range(shape[0]):
        for rest in _regions(shape[1:], budget):
            yield (slice(index, index + 1), *rest)


def _bit_depth(dtype: np.dtype) -> int:
    return 1 if dtype.kind == "b" else dtype.itemsize * 8
