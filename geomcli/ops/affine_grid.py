"""AffineGrid (opset 20): validate, then the grid as float64 sums rounded once."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

from geomcli.cpus import share
from geomcli.errors import GeomError
from geomcli.ops import _checks
from geomcli.ops._checks import (
    Flag,
    Int,
    Ints,
    Shape,
    as_array,
    as_ints,
    as_out,
    as_shape,
    as_threads,
    check_addressable,
    dtype_text,
    new_output,
    shown,
    split,
    threads_for,
)
from geomcli.ops._numeric import round_once


def affine_grid_output_shape(theta_shape: Sequence[int], size: Ints, *, dtype: DTypeLike | None = None) -> Shape:
    """The grid shape :func:`affine_grid` returns, after validating ``theta``'s shape and ``size``.

    A shape no numpy array can have (more elements, or with ``dtype`` more bytes, than numpy
    can address) is refused with a GeomError.

    >>> affine_grid_output_shape((2, 2, 3), [2, 3, 5, 6])
    (2, 5, 6, 2)
    """
    func = "affine_grid"
    theta_shape = as_shape(theta_shape, "theta shape", func)
    where = f"theta shape {theta_shape}"
    sizes = as_ints(size, "size", func, where)
    if len(sizes) not in (4, 5):
        raise GeomError(
            f"{func}: size must have 4 values (N, C, H, W) or 5 (N, C, D, H, W), found {shown(list(sizes))} ({where})"
        )
    spatial = len(sizes) - 2
    expected = (spatial, spatial + 1)
    if len(theta_shape) != 3 or theta_shape[1:] != expected:
        raise GeomError(
            f"{func}: theta must have shape (N, {expected[0]}, {expected[1]}) for a size of {len(sizes)} values, "
            f"found {theta_shape}"
        )
    if sizes[0] != theta_shape[0]:
        raise GeomError(f"{func}: size[0] = {sizes[0]} does not match theta's batch of {theta_shape[0]} ({where})")
    if sizes[1] < 0:
        raise GeomError(
            f"{func}: the channel count size[1] must not be negative, found size {shown(list(sizes))} ({where})"
        )
    if min(sizes[2:]) < 1:
        raise GeomError(f"{func}: spatial sizes must be at least 1, found size {shown(list(sizes))} ({where})")
    output = (sizes[0], *sizes[2:], spatial)
    check_addressable(output, dtype, func, where, grid=True)
    return output


def affine_grid_checked(
    theta: Any, size: Ints, align_corners: Flag = False, *, threads: Int | None = None, rows: slice | None = None
) -> tuple[np.ndarray, Shape, slice, int]:
    """What :func:`affine_grid` checks of these arguments, checked: theta as an array, the shape of
    the grid (of its ``rows`` only), those rows as ``slice(start, stop)`` within the grid, and the
    thread count. Raises the GeomErrors affine_grid raises for them.

    >>> affine_grid_checked(np.zeros((1, 2, 3)), [1, 3, 5, 6], rows=slice(2, None))[1:3]
    ((1, 3, 6, 2), slice(2, 5, None))
    """
    func = "affine_grid"
    matrices = as_array(theta, func, "theta", grid=True)
    where = f"theta shape {matrices.shape}"
    if isinstance(align_corners, (np.bool_, np.integer)):
        align_corners = align_corners.item()
    # the type first: an array of flags would make `in` ambiguous
    if not isinstance(align_corners, int) or align_corners not in (0, 1):
        raise GeomError(f"{func}: align_corners must be a bool or 0/1, found {shown(align_corners)} ({where})")
    output_shape = affine_grid_output_shape(matrices.shape, size, dtype=matrices.dtype.newbyteorder("="))
    height = output_shape[-3]
    if rows is None:
        rows = slice(0, height)
    if not isinstance(rows, slice) or rows.step not in (None, 1):
        raise GeomError(f"{func}: rows must be a slice of step 1, found {shown(rows)} ({where})")
    rows = slice(*rows.indices(height)[:2])
    output_shape = (*output_shape[:-3], max(0, rows.stop - rows.start), *output_shape[-2:])
    return matrices, output_shape, rows, as_threads(threads, func, where)


def _base_coordinates(length: int, align_corners: bool) -> np.ndarray:
    """Closed-form sample positions in [-1, 1], in float64 (no float-step arange drift)."""
    index = np.arange(length, dtype=np.float64)
    if align_corners:
        return 2 * index / (length - 1) - 1 if length > 1 else np.zeros(1)
    return (2 * index + 1) / length - 1


def affine_grid(
    theta: Any,
    size: Ints,
    align_corners: Flag = False,
    *,
    threads: Int | None = None,
    out: np.ndarray | None = None,
    rows: slice | None = None,
) -> np.ndarray:
    """Sampling grids for a batch of affine matrices, as torch's ``affine_grid``.

    Parameters
    ----------
    theta : array_like, float16, float32, float64 or bfloat16
        Shape (N, 2, 3) for 2-D grids or (N, 3, 4) for 3-D grids.
    size : sequence of int or 1-D int array
        The target image size, (N, C, H, W) or (N, C, D, H, W); C is not used.
    align_corners : bool or 0/1
        If true, -1 and 1 are the centres of the corner pixels; otherwise their
        outer edges.
    threads : int, optional, keyword-only
        Threads that share a large grid (4 MiB and more). ``None`` uses every CPU this
        process may run on; at most 1024. The result is the same for any count.
    out : numpy.ndarray, optional, keyword-only
        Where to write the grid (a memory-mapped file, say), of exactly its shape and
        dtype (theta's type in native byte order); any strides.
    rows : slice, optional, keyword-only
        Only these rows (positions along H) of each grid, exactly as the whole grid's
        ``[:, rows]`` (3-D: ``[:, :, rows]``) would hold them: a big grid made slab by slab.
        A step other than 1 is refused.

    Returns
    -------
    numpy.ndarray
        Shape (N, H, W, 2) or (N, D, H, W, 3), of ``theta``'s type in native byte order
        (``out`` itself when given): the grid holds new values, not theta's bytes. The last
        axis is (x, y[, z]): x runs along W, y along H, z along D.
        A new output of 32 MiB or more may take the memory of one let go before, and then
        does not own it: the last two let go (of the last size, 1 GiB in all at most) stay
        in memory for that until ``geomcli.ops.reuse.release()`` (see geomcli.ops.reuse).

    Raises
    ------
    GeomError
        If theta's dtype is not a float type or theta is a masked array, its shape does
        not fit ``size``, ``size[0]`` differs from theta's batch, a spatial size is below
        1, ``align_corners`` is not a bool or 0/1, ``threads`` is not an integer from 1 to 1024,
        ``out`` is not a writable, unmasked array of the grid's shape and dtype (byte order
        included) or overlaps theta or itself, or if the grid would be bigger than numpy can
        address, or it or its float64 work arrays cannot be allocated.

    Notes
    -----
    ONNX AffineGrid, opset 20: ``grid[n, h, w] = theta[n] @ [x_w, y_h, 1]``. The base
    coordinate of index i on an axis of length L is ``(2i + 1)/L - 1``, or
    ``2i/(L - 1) - 1`` with align_corners, computed in float64 and rounded once to
    the output dtype. An axis of length 1 has the coordinate 0 either way (as PyTorch).

    Examples
    --------
    >>> identity = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    >>> affine_grid(identity, [1, 1, 1, 2], align_corners=True)[0, 0]
    array([[-1.,  0.],
           [ 1.,  0.]])
    >>> affine_grid(identity, [1, 1, 1, 2])[0, 0, :, 0]
    array([-0.5,  0.5])
    """
    func = "affine_grid"
    matrices, output_shape, rows, workers = affine_grid_checked(theta, size, align_corners, threads=threads, rows=rows)
    where = f"theta shape {matrices.shape}"
    grid_dtype = matrices.dtype.newbyteorder("=")
    if out is None:
        result = new_output(output_shape, grid_dtype, func, where)
    else:
        result = as_out(out, output_shape, grid_dtype, matrices, func, where, "theta")
    if result.size == 0:  # no grids: not even the coordinates of their huge axes are made
        return result
    workers = threads_for(workers, result.nbytes)
    try:
        # (n, d?, h, w) spatial lengths in output order; the coordinates come reversed: x, y, z.
        full = affine_grid_output_shape(matrices.shape, size)
        axes_xyz = [_base_coordinates(n, bool(align_corners)) for n in reversed(full[1:-1])]
        axes_xyz[1] = axes_xyz[1][rows]
        weights = matrices.astype(np.float64)
        if _grid_rows(result, axes_xyz) is not None:
            _affine_grid_rows(weights, axes_xyz, result, workers)
        elif len(axes_xyz) == 2 and _complex_pairs(result) is not None:
            _affine_grid_pairs(weights, axes_xyz, result, workers)
        else:
            _affine_grid_plain(weights, axes_xyz, result, workers)
    except MemoryError as error:
        # the float64 coordinates and sums can outgrow a float16 grid (a long row, say)
        raise GeomError(
            f"{func}: not enough memory for the float64 work arrays of the grid of shape {output_shape} "
            f"and dtype {dtype_text(grid_dtype)} ({where})"
        ) from error
    return result


def _grid_terms(rows: np.ndarray, axes_xyz: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The two float64 terms of one output coordinate for grids (m, [d,] h, w): the y[, z] part,
    shaped (m, [d,] h, 1), and the x part, shaped (m, 1, [1,] w); ``rows`` is theta's row (m, s+1).

    The grid is separable: ``row @ [x, y, z, 1]`` is ``((row[-1] + y*row[1]) + z*row[2]) + x*row[0]``,
    always added in this order so every path rounds the same way.
    """
    spatial = len(axes_xyz)

    def along(j: int) -> np.ndarray:  # axis j (x, y, z) where it lies in (m, [d,] h, w), times its weight
        shape = [1] * (spatial + 1)
        shape[spatial - j] = len(axes_xyz[j])
        term: np.ndarray = axes_xyz[j].reshape(shape) * rows[:, j].reshape((-1,) + (1,) * spatial)
        return term

    rest = rows[:, spatial].reshape((-1,) + (1,) * spatial)
    for j in range(1, spatial):  # y, then z: the slower axes
        rest = rest + along(j)
    return rest, along(0)


def _affine_grid_plain(weights: np.ndarray, axes_xyz: list[np.ndarray], result: np.ndarray, threads: int = 1) -> None:
    """One broadcast sum per (batch slice, coordinate), cast once into the output's strided last axis.

    The pieces write disjoint parts of ``result`` and are shared among ``threads`` threads
    (measured 1.7-1.9x on two cores, 2-D and 3-D); a slice of the batch is done in one sum, so
    millions of tiny grids cost no Python loop each. The oracle of the fast paths, and the path
    of strided outputs and of small 3-D, float16 and bfloat16 grids: big grids in a contiguous
    output take _affine_grid_rows, small 2-D float32/float64 grids _affine_grid_pairs.
    """

    def work(piece: tuple[slice, int]) -> None:
        batch, k = piece
        # NaN or Inf in theta is allowed (0 * inf gives NaN, as the ONNX reference does): no
        # RuntimeWarning on stderr. In here, as numpy's error state does not follow into threads.
        with np.errstate(invalid="ignore", over="ignore"):
            rest, x_term = _grid_terms(weights[batch, k], axes_xyz)
            target = result[batch, ..., k]
            if result.dtype.name == "bfloat16":
                # round_once takes the float64 sums: made a block at a time, not the whole slice's
                # (a 64 MiB grid in a strided output took 1.2 GB of them)
                if target.size > _checks.BLOCK_BYTES // 8:
                    rest, x_term = np.broadcast_arrays(rest, x_term)
                for block in _sum_blocks(target.shape, _checks.BLOCK_BYTES // 8):
                    np.copyto(target[block], round_once(rest[block] + x_term[block], result.dtype))
            else:
                np.add(rest, x_term, out=target, casting="unsafe")

    share([(batch, k) for batch in split(result.shape[0], threads) for k in range(len(axes_xyz))], work, threads)


def _sum_blocks(shape: Shape, limit: int) -> list[tuple[Any, ...]]:
    """Indices that cut an array of ``shape`` into blocks of at most ``limit`` elements (one
    element at least), each contiguous in index order: the inner axes whole, the first one that
    does not fit in slices."""
    if math.prod(shape) <= limit:
        return [(...,)]
    inner = 1
    for axis in range(len(shape) - 1, -1, -1):
        if inner * shape[axis] > limit:
            step = max(1, limit // inner)
            return [
                (*index, slice(start, start + step), ...)
                for index in np.ndindex(*shape[:axis])
                for start in range(0, shape[axis], step)
            ]
        inner *= shape[axis]
    return [(...,)]


def _complex_pairs(result: np.ndarray) -> np.ndarray | None:
    """A 2-D float32/float64 grid (n, h, w, 2) seen as complex64/complex128 (n, h, w), if its
    (x, y) pairs are adjacent in memory and in native byte order (a view reinterprets bytes);
    else None."""
    pair_type = {"float32": np.complex64, "float64": np.complex128}.get(result.dtype.name)
    if (
        pair_type is None
        or not result.dtype.isnative
        or result.strides[-1] != result.itemsize
        or result.ndim != 4
    ):
        return None
    return result.view(pair_type)[..., 0]


def _affine_grid_pairs(weights: np.ndarray, axes_xyz: list[np.ndarray], result: np.ndarray, threads: int) -> None:
    """The 2-D grid with each (x, y) pair as one complex number: the same float64 sums as
    _affine_grid_plain, done pairwise in one contiguous pass, and rounded once when complex128
    is cast to complex64 (2.5x faster than two strided passes).
    """
    pairs = _complex_pairs(result)
    assert pairs is not None
    count, height = result.shape[:2]
    if count >= threads:
        pieces = [(batch, slice(None)) for batch in split(count, threads)]
    else:  # a few big grids: each cut into bands of rows
        pieces = [(slice(n, n + 1), band) for n in range(count) for band in split(height, threads)]

    def work(piece: tuple[slice, slice]) -> None:
        batch, band = piece
        with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf theta: see _affine_grid_plain
            (rest_x, x_of_x), (rest_y, x_of_y) = (_grid_terms(weights[batch, k], axes_xyz) for k in range(2))
            # .real/.imag assignment copies exactly; 1j * value would turn an Inf into NaN.
            rest = np.empty(rest_x.shape, np.complex128)
            rest.real, rest.imag = rest_x, rest_y
            x_term = np.empty(x_of_x.shape, np.complex128)
            x_term.real, x_term.imag = x_of_x, x_of_y
            np.add(rest[:, band], x_term, out=pairs[batch, band], casting="unsafe")

    share(pieces, work, threads)


# Grids of at least this many output elements each go row block by row block; smaller ones
# are summed a batch slice at a time, as a per-grid Python loop would cost more than the sums.
_GRID_ROWS_ELEMENTS = 1 << 16
# The float64 row blocks of _affine_grid_rows, by the number of coordinates. Each block is a few
# numpy calls, and each call waits for the GIL the other thread may hold, so small blocks lose
# on two threads (2-D blocks of 16 rows: slower than one thread); 2-D gained 4-8% going from 1 to
# 2 MiB. A 3-D block of 2 MiB is a matrix product big enough for OpenBLAS's own threads: 2-4x
# slower on two of ours.
_GRID_BLOCK_BYTES = {2: 2 << 20, 3: 1 << 20}
# The rows whose y[, z] terms _affine_grid_rows keeps at once: all of a grid's up to this many
# (1024² or 128³ grids: 1024 or 16384 rows), so a tall, narrow grid needs no float64 arrays of
# its whole height (a 64 MiB float16 grid of 2**24 x 1 took 1.9 GB of them on two threads).
_GRID_REST_ROWS = 1 << 16


def _grid_rows(result: np.ndarray, axes_xyz: list[np.ndarray]) -> np.ndarray | None:
    """A C-contiguous grid of big enough grids, (n, [d,] h, w, s), seen as rows (n·[d·]h, w·s);
    else None. A row is one (d, h): every coordinate of it shares its y[, z] term."""
    spatial, width = len(axes_xyz), len(axes_xyz[0])
    row_items = spatial * width
    if (
        not result.flags.c_contiguous
        or result.size == 0
        or result.size // result.shape[0] < _GRID_ROWS_ELEMENTS
        or 8 * row_items > _GRID_BLOCK_BYTES[spatial]
    ):
        return None
    return result.reshape(-1, row_items)


def _affine_grid_rows(weights: np.ndarray, axes_xyz: list[np.ndarray], result: np.ndarray, threads: int) -> None:
    """Big grids in blocks of rows of 1-2 MiB, each made with contiguous passes only.

    A block of rows (r, w, s) in float64 is filled with each row's y[, z] term (one broadcast
    copy of complex pairs for 2-D, s strided copies for 3-D), then the x terms, a block
    (r, w·s) made once per grid, are added in place, and the block is cast into the output
    rows in one contiguous copy. The sum is _affine_grid_plain's ``rest + x_term``, the same
    operands in the same order, rounded once by the same cast: the bits are identical, but
    for which NaN survives a sum of two NaNs (NaN and Inf in theta), which numpy's add loops
    leave to the SIMD body or its tail (the plain path's choice too varies with the thread
    count). The plain path's strided, cast output and broadcast operand make slower loops
    (3-D: 7.8 -> 5.5 ms per 128³ grid on one thread). The rows of all grids are shared among
    ``threads`` threads in contiguous runs; each run needs a few buffers of a block or of the
    rest terms of up to _GRID_REST_ROWS rows, made for those rows only (_grid_row_terms).

    A 3-D block is one matrix product instead, ``[rest, 1] @ [selectors; x terms]``, whose
    selector rows are 1 where a column holds their coordinate, else 0: every element is
    ``rest + x_term`` plus exact zeros, so the same bits, in half the time of the strided copies
    and the add (28 against 68 µs a block). Not for a grid with a term that is not finite or
    near the subnormal range, or where a coordinate's rest and x terms both hold -0.0: see
    _exact_product. For 2-D the product is slower than the pairs.
    """
    rows = _grid_rows(result, axes_xyz)
    assert rows is not None
    spatial, width = len(axes_xyz), len(axes_xyz[0])
    per_grid = rows.shape[0] // result.shape[0]
    step = max(1, _GRID_BLOCK_BYTES[spatial] // (8 * spatial * width))

    # rows of rest terms at a time: a whole grid, or whole blocks of one
    chunk = min(per_grid, max(step, _GRID_REST_ROWS // step * step))
    # decided once: each Python step of the block loop holds the GIL the other thread waits for
    rounded = functools.partial(round_once, dtype=rows.dtype) if rows.dtype.name == "bfloat16" else None

    # float64 work arrays of each thread: the block; the same x terms in every row of it; one row
    # of them; (row, coordinate) the y[, z] terms of a chunk of rows (3-D: and a 1, for the matrix
    # product); 3-D: the selectors, and the x terms last
    shapes = [(step, width, spatial), (step, spatial * width), (spatial * width,),
              (chunk, spatial + (spatial == 3)), (spatial + 1, spatial * width) if spatial == 3 else (0,)]

    def work(part: slice) -> None:
        # one allocation a thread a call: keeping it for the next call measured no faster (see benchmarks/README.md)
        work_in(part, *_carve(np.empty(_carved_bytes(shapes), np.uint8), shapes))

    def work_in(part: slice, block: np.ndarray, x_rows: np.ndarray, x_row: np.ndarray, terms_of_rows: np.ndarray,
                selectors: np.ndarray) -> None:
        block_rows = block.reshape(step, spatial * width)
        homogeneous = terms_of_rows if spatial == 3 else None
        if homogeneous is not None:
            homogeneous[:, spatial] = 1
            selectors[:] = 0
            for k in range(spatial):
                selectors[k, k::spatial] = 1
        rest = terms_of_rows[:, :spatial]
        # 2-D: a row's (x, y) rest pair as one complex number, copied along the row at once.
        pairs = block.view(np.complex128)[..., 0] if spatial == 2 else None
        rest_pairs = rest.view(np.complex128)[:, 0] if spatial == 2 else None
        start = part.start
        with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf theta: see _affine_grid_plain
            while start < part.stop:
                grid, first = divmod(start, per_grid)
                stop = min(part.stop - grid * per_grid, per_grid, first + chunk)  # rows [first, stop) of it
                for k in range(spatial):
                    terms = _grid_row_terms(weights[grid, k], axes_xyz, first, stop)
                    rest[: stop - first, k], x_row[k::spatial] = terms
                product = spatial == 3 and _exact_product(rest[: stop - first], x_row)
                if product:
                    selectors[spatial] = x_row
                else:
                    x_rows[:] = x_row
                offset = grid * per_grid
                for low in range(first, stop, step):
                    high = min(stop, low + step)
                    size = high - low
                    sums = block_rows[:size]
                    if product and homogeneous is not None:
                        np.matmul(homogeneous[low - first : high - first], selectors, out=sums)
                    else:
                        if pairs is not None and rest_pairs is not None:
                            np.copyto(pairs[:size], rest_pairs[low - first : high - first, None])
                        else:
                            for k in range(spatial):
                                np.copyto(block[:size, :, k], rest[low - first : high - first, k, None])
                        np.add(sums, x_rows[:size], out=sums)
                    np.copyto(rows[offset + low : offset + high], rounded(sums) if rounded else sums, casting="unsafe")
                start = grid * per_grid + stop

    share(split(rows.shape[0], threads), work, threads)


_ALIGNED = 64  # the cache line _carve starts each work array on


def _carved_bytes(shapes: list[tuple[int, ...]]) -> int:
    """The bytes _carve takes for float64 arrays of these shapes, wherever the memory starts."""
    return _ALIGNED + sum(_ALIGNED * -(-8 * math.prod(shape) // _ALIGNED) for shape in shapes)


def _carve(memory: np.ndarray, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """float64 arrays of these shapes, one after another in ``memory`` (uint8, _carved_bytes
    long), each starting on a cache line."""
    arrays, offset = [], -memory.__array_interface__["data"][0] % _ALIGNED
    for shape in shapes:
        size = 8 * math.prod(shape)
        arrays.append(memory[offset : offset + size].view(np.float64).reshape(shape))
        offset += _ALIGNED * -(-size // _ALIGNED)
    return arrays


def _grid_row_terms(row: np.ndarray, axes_xyz: list[np.ndarray], low: int, high: int) -> tuple[np.ndarray, np.ndarray]:
    """_grid_terms of one grid's theta ``row`` (s+1,) for its rows [low, high) only (a row is one
    (d, h)): the rest terms (high - low,) and the x terms (w,), by the same operations in the same
    order, so the same bits."""
    height = len(axes_xyz[1])
    if len(axes_xyz) == 2:
        rest = row[2] + axes_xyz[1][low:high] * row[1]
    else:  # the planes (d) that hold the rows, then the rows of them
        first, last = low // height, -(-high // height)
        planes = (row[3] + axes_xyz[1] * row[1]) + (axes_xyz[2][first:last] * row[2])[:, None]
        rest = planes.reshape(-1)[low - first * height : high - first * height]
    return rest, axes_xyz[0] * row[0]


def _exact_product(rest: np.ndarray, x_row: np.ndarray) -> bool:
    """Whether the matrix product of _affine_grid_rows gives ``rest + x_term`` bit for bit for
    these (row, coordinate) rest terms and this row of x terms (coordinates interleaved):
    - every term is finite (a finite sum says so): 0 × Inf is NaN;
    - no nonzero term is below 2**-969, so a sum is 0 or at least 2**-1021, never subnormal: on
      a thread that flushes subnormals (FTZ/DAZ, which other libraries may set), the product,
      which scales its sums once more, would flush them otherwise than one add;
    - no coordinate has -0.0 among both its rest and its x terms: -0.0 + -0.0 is -0.0, but the
      product's sums start from +0.0."""
    if not (np.isfinite(rest.sum()) and np.isfinite(x_row.sum())):
        return False
    for terms in (x_row, rest):
        magnitudes = np.abs(terms)
        if ((magnitudes < _SMALLEST_TERM) & (magnitudes > 0)).any():
            return False
    x_terms = x_row.reshape(-1, rest.shape[1])
    signed = ((x_terms == 0) & np.signbit(x_terms)).any(axis=0)  # the short side first
    return not (signed.any() and ((rest[:, signed] == 0) & np.signbit(rest[:, signed])).any())


_SMALLEST_TERM = 2.0**-969
