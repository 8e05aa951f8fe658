"""Tensors bigger than memory: the operators slab by slab, from a (memory-mapped) input into a
memory-mapped output, handing each slab's pages back to the OS once it is done.

Every slab is one kernel call on slices, with ``out=`` a slice of the output, so the result is
bit for bit the kernel's on the whole array. Peak memory is a few slabs, not the tensor: pages
of a map count towards the process's memory once touched, and :func:`geomcli.io.release` drops
them after each slab. Imported by the CLI only for an output that is memory-mapped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

import geomcli.ops.affine_grid as grid_ops
import geomcli.ops.center_crop_pad as crop_ops
import geomcli.ops.space_depth as space_depth_ops
from geomcli import io
from geomcli.engine import summary
from geomcli.ops import window

# About this much output per kernel call: big enough for the kernels' threads and fast paths,
# small next to the memory targets (an input slab and an output slab are resident at once).
SLAB_BYTES = 32 << 20


def center_crop_pad(data: np.ndarray, shape: tuple[int, ...], axes: tuple[int, ...] | None, *, fill: Any,
                    threads: int | None, out: np.ndarray) -> None:
    """``crop_ops.center_crop_pad(data, shape, axes, fill=fill, out=out)``, slab by slab.

    The leading axes are walked; per slab only the input rows that land in the output are read.
    """
    full = crop_ops.center_crop_pad_output_shape(data.shape, shape, axes)
    # the pad value as the kernel validates and converts it: one element padded onto nothing
    value = crop_ops.center_crop_pad(np.zeros(1, data.dtype)[:0], [1], fill=fill)[0]
    _crop_pad_into(data, full, value, threads, out)


def _crop_pad_into(data: np.ndarray, shape: tuple[int, ...], value: Any, threads: int | None,
                   out: np.ndarray) -> None:
    if out.nbytes <= SLAB_BYTES or out.ndim == 0:
        crop_ops.center_crop_pad(data, shape, fill=value, threads=threads, out=out)
        io.release(data)
        io.release(out)
        return
    kept, placed = window.center_crop_pad_window(data.shape[0], shape[0])
    _fill(out[: placed.start], value)
    _fill(out[placed.stop :], value)
    count = placed.stop - placed.start
    if out[0].nbytes > SLAB_BYTES:
        for k in range(count):  # one row is more than a slab: go one axis deeper
            _crop_pad_into(data[kept.start + k], shape[1:], value, threads, out[placed.start + k])
        return
    for rows in _steps(count, SLAB_BYTES // max(out[0].nbytes, 1)):
        source = data[kept.start + rows.start : kept.start + rows.stop]
        target = out[placed.start + rows.start : placed.start + rows.stop]
        crop_ops.center_crop_pad(source, target.shape, fill=value, threads=threads, out=target)
        io.release(source)
        io.release(target)


def _fill(region: np.ndarray, value: Any) -> None:
    """``region[...] = value`` for padding, slab by slab."""
    for part in _parts(region):
        part[...] = value
        io.release(part)


def space_to_depth(data: np.ndarray, blocksize: int, mode: str, *, threads: int | None,
                   out: np.ndarray) -> None:
    """``space_depth_ops.space_to_depth(data, blocksize, mode, out=out)`` on NCHW views, slab by slab:
    whole batch items while they fit, else bands of b·k input rows, which fill k output rows."""
    space_depth_ops.space_to_depth_output_shape(data.shape, blocksize)
    _blocks(space_depth_ops.space_to_depth, data, blocksize, mode, threads, out, rows_in=blocksize, rows_out=1)


def depth_to_space(data: np.ndarray, blocksize: int, mode: str, *, threads: int | None,
                   out: np.ndarray) -> None:
    """``space_depth_ops.depth_to_space(data, blocksize, mode, out=out)`` on NCHW views, slab by slab:
    whole batch items while they fit, else bands of k input rows, which fill b·k output rows."""
    space_depth_ops.depth_to_space_output_shape(data.shape, blocksize)
    _blocks(space_depth_ops.depth_to_space, data, blocksize, mode, threads, out, rows_in=1, rows_out=blocksize)


def _blocks(kernel: Any, data: np.ndarray, blocksize: int, mode: str, threads: int | None, out: np.ndarray,
            rows_in: int, rows_out: int) -> None:
    n, height = out.shape[0], out.shape[2]
    item = out[0].nbytes if n else 0
    if item <= SLAB_BYTES:
        slabs = [(items, slice(None), slice(None)) for items in _steps(n, SLAB_BYTES // max(item, 1))]
    else:
        # output rows per slab, in whole blocks of input rows
        step = max(1, SLAB_BYTES // max(out[0, :, 0].nbytes, 1) // rows_out) * rows_out
        slabs = [
            (slice(i, i + 1), slice(rows.start * rows_in // rows_out, rows.stop * rows_in // rows_out), rows)
            for i in range(n)
            for rows in _steps(height, step)
        ]
    for items, rows_of_input, rows_of_output in slabs:
        source = data[items, :, rows_of_input]
        target = out[items, :, rows_of_output]
        # the slab copied into RAM in one sequential pass, so the kernel's fast paths take it
        kernel(np.ascontiguousarray(source), blocksize, mode, threads=threads, out=target)
        io.release(source)
        io.release(target)


def affine_grid(theta: np.ndarray, size: tuple[int, ...], align_corners: bool, *, threads: int | None,
                out: np.ndarray) -> None:
    """``grid_ops.affine_grid(theta, size, align_corners, out=out)``, whole grids (n) at a time, as
    many as fit a slab (one grid a call took 50 µs each: a million tiny grids, 100 s)."""
    grid_ops.affine_grid_output_shape(theta.shape, size)
    n = theta.shape[0]
    for grids in _steps(n, SLAB_BYTES // max(out[0].nbytes if n else 0, 1)):
        target = out[grids]
        count = grids.stop - grids.start
        grid_ops.affine_grid(theta[grids], (count, *size[1:]), align_corners, threads=threads, out=target)
        io.release(target)


def value_range(data: np.ndarray) -> list[Any] | None:
    """``summary.value_range(data)``, read slab by slab."""
    return range_and_nan(data)[0]


def range_and_nan(data: np.ndarray) -> tuple[list[Any] | None, bool]:
    """``summary.range_and_nan(data)``, read slab by slab."""
    return summary.joined_range(_slab_ranges(data))


def _slab_ranges(data: np.ndarray) -> Iterator[tuple[list[Any] | None, bool]]:
    for part in _parts(data):
        yield summary.range_and_nan(part)
        io.release(part)


def _parts(array: np.ndarray) -> Iterator[np.ndarray]:
    """``array`` in pieces of at most SLAB_BYTES (or one row of its last axis), outermost axis first."""
    if array.nbytes <= SLAB_BYTES or array.ndim == 0:
        yield array
        return
    row = array[0].nbytes
    if row > SLAB_BYTES:
        for k in range(array.shape[0]):
            yield from _parts(array[k])
        return
    for rows in _steps(array.shape[0], SLAB_BYTES // max(row, 1)):
        yield array[rows]


def _steps(length: int, step: int) -> list[slice]:
    step = max(step, 1)
    return [slice(start, min(start + step, length)) for start in range(0, length, step)]
