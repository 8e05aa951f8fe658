"""One chunked job: a zarr input, or a zarr output, through an operation as a dask.array graph,
chunk by chunk (the operation's ``apply_chunked``; geomcli.engine.chunked), never holding the
whole array; on this machine's threads, or with ``--scheduler`` on a Dask cluster.

The output is a zarr array chunked as the input (through the operation's change of shape), and
the result is rechunked to exactly those chunks before it is written: one task per zarr chunk.
It is marked complete last (geomcli.io._zarr). A .npy or .tiff on either side is a memory map
(io.read_array, io.open_output), read or written slab by slab by the same graph.

Imported only for a job with a .zarr on either side; dask and zarr load then.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from geomcli.engine.report import reporting
from geomcli.errors import GeomError

if TYPE_CHECKING:
    from geomcli.engine.operations import Operation
    from geomcli.engine.options import Common
    from geomcli.engine.summary import Report


def involved(input_path: str, output: str) -> bool:
    """Whether a job reads or writes a zarr array (and so runs chunk by chunk)."""
    from geomcli.io import _zarr

    return _zarr.is_zarr(input_path) or _zarr.is_zarr(output)


def transform(operation: Operation, input_path: str, output: str, output_format: str, common: Common,
              scheduler: str | None = None) -> Report:
    """Read, transform and write one chunked job; its report, with any failure in it."""
    from geomcli.engine import summary
    from geomcli.io import _remote

    _remote.configure(common.storage_options)
    report = summary.Report(operation.command, input_path, output, parameters=operation.parameters())
    with reporting(report, common):
        _refuse_in_place(input_path, output)
        data, layout, scale, ome, like = _open(input_path, whole(common))  # a memory map: never held whole
        report.input_shape, report.input_dtype = list(data.shape), str(data.dtype)
        try:
            result = operation.apply_chunked(data, layout, whole(common))
            _check_blocks(data, result, common)
        except GeomError as error:
            raise GeomError(f"{input_path}: {error}") from error
        report.output_shape, report.output_dtype = list(result.shape), str(result.dtype)
        report.value_range = _write(operation, result, data, output, output_format, common, scheduler,
                                    layout=layout, scale=scale, ome=ome, like=like)
        report.notes.append(f"chunk by chunk: {result.npartitions} output chunk(s)")
    return report


def whole(common: Common) -> Common:
    """The options a chunked job's whole arrays are judged by: --max-pixels bounds what a task
    holds (_check_blocks), not the array, which is never held whole."""
    import dataclasses
    import sys

    return dataclasses.replace(common, max_pixels=sys.maxsize)


def _check_blocks(data: Any, result: Any, common: Common) -> None:
    """Refuse a graph whose biggest input or output block has more elements than --max-pixels
    (an operation that reads whole planes of one huge plane, say), before any is computed."""
    from geomcli import io

    for what, array in (("an input chunk", data), ("an output block", result)):
        biggest = tuple(max(axis, default=0) for axis in array.chunks)
        io.check_size(biggest, common.max_pixels, f"{what} {biggest}")


def _refuse_in_place(input_path: str, output: str) -> None:
    from geomcli.io import _remote

    def key(path: str) -> str:
        import os

        path = _remote.local_path(path).rstrip("/")
        return _remote.canonical(path) if _remote.is_url(path) else os.path.realpath(path)

    if key(input_path) == key(output):
        raise GeomError(f"{output}: the output would replace its own input, which is read chunk by chunk as "
                        "the output is written; write another")


def _open(input_path: str, common: Common) -> tuple[Any, str | None, tuple[float, ...] | None, bool, Any]:
    """The input as a dask array of its chunks, its layout, its OME scale, whether it was OME-Zarr,
    and the zarr array itself (or None)."""
    from geomcli import io
    from geomcli.engine import chunked
    from geomcli.io import _zarr

    if _zarr.is_zarr(input_path):
        opened = _zarr.open_input(input_path)
        return chunked.as_dask(opened.array), opened.layout, opened.scale, opened.ome, opened.array
    fidelity = common.fidelity
    loaded = io.read_array(input_path, max_pixels=common.max_pixels, mmap=True, auto_orient=fidelity.auto_orient,
                           frames=fidelity.frames, series=fidelity.series, page=fidelity.page)
    return chunked.as_dask(loaded.data, None), loaded.layout, None, False, None


def _write(operation: Operation, result: Any, data: Any, output: str, output_format: str, common: Common,
           scheduler: str | None, *, layout: str | None, scale: tuple[float, ...] | None, ome: bool,
           like: Any) -> list[Any] | None:
    """Write ``result`` chunk by chunk (one task per output chunk); its value range, found by the
    same pass."""
    import dask.array as da
    from dask.base import compute

    from geomcli import io
    from geomcli.engine import layout as layouts
    from geomcli.io import _zarr

    written_layout = layouts.written_layout(data.shape, result.shape, common.layout, layout)
    if output_format == "zarr":
        if not _zarr.is_zarr(output):
            raise GeomError(f"{output}: a zarr output is named NAME.zarr")
        chunks = _output_chunks(result, data)
        target = _zarr.create_output(output, result.shape, result.dtype, chunks, written_layout, ome=ome,
                                     scale=None if scale is None else operation.scaled(
                                         scale, io.Header("zarr", data.shape, data.dtype, 1, None, layout), common),
                                     like=like)
        result = result.rechunk(chunks)  # one dask chunk per zarr chunk: no two tasks write one chunk
        outputs = None
    else:
        if output_format not in ("npy", "tiff"):
            raise GeomError(f"{output}: a chunked result is written as .zarr, .npy or .tiff, not "
                            f"{output_format.upper()}")
        outputs = io.open_output(output, result.shape, result.dtype, format=output_format, layout=written_layout)
        target = outputs.__enter__()
    try:
        stored = da.store(result, target, lock=False, compute=False)
        ranges = _value_range(result)
        with _scheduler(scheduler, common) as how, warnings.catch_warnings():
            # an all-NaN result has no range (None, as summary.value_range says), not a warning
            warnings.filterwarnings("ignore", "All-NaN", RuntimeWarning)
            found = compute(stored, *ranges, **how)
    except BaseException as error:
        if outputs is not None:
            outputs.__exit__(type(error), error, error.__traceback__)
        raise
    if outputs is not None:
        outputs.__exit__(None, None, None)
    else:
        _zarr.mark_complete(output)
    return None if not ranges else [_plain(found[1]), _plain(found[2])]


def _output_chunks(result: Any, data: Any) -> tuple[int, ...]:
    """The output's zarr chunks: what the graph made of the input's chunks (each axis's first)."""
    from geomcli.engine import chunked

    return chunked.regular(result.chunks)


def _value_range(result: Any) -> tuple[Any, ...]:
    """Lazy [min, max] of a real result (NaN ignored), as summary.value_range reports them; none
    for other kinds."""
    import dask.array as da

    kind = result.dtype.kind
    if kind not in "biuf" or result.size == 0 or (kind == "f" and result.dtype.itemsize > 8):
        return ()
    if kind == "f":
        return da.nanmin(result), da.nanmax(result)
    return result.min(), result.max()


def _plain(value: Any) -> Any:
    import math

    item = value.item() if hasattr(value, "item") else value
    return None if isinstance(item, float) and math.isnan(item) else item


@contextmanager
def _scheduler(scheduler: str | None, common: Common) -> Iterator[dict[str, Any]]:
    """How dask computes: this machine's threads (--threads), or the cluster --scheduler names."""
    from geomcli.engine import chunked
    from geomcli.engine import scheduler as schedulers

    if scheduler is None:
        yield dict(chunked.threads_for(common.threads))
        return
    with schedulers.connect(scheduler, common.debug) as (client, _):
        yield {"scheduler": client}
