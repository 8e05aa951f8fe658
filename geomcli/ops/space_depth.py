"""SpaceToDepth and DepthToSpace (opset 28, DCR and CRD): validate, then one reshape and
transpose, in cache-sized blocks for big arrays."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

from geomcli.cpus import share
from geomcli.errors import GeomError
from geomcli.ops._checks import (
    BLOCK_BYTES,
    Int,
    Mode,
    Shape,
    as_array,
    as_blocksize,
    as_mode,
    as_out,
    as_shape,
    as_threads,
    check_addressable,
    new_output,
    plain_memory,
    split,
    split_axes,
    threads_for,
)


def _nchw_shape(input_shape: Any, blocksize: Any, func: str) -> tuple[Shape, int]:
    """The input shape, checked to be rank 4, and the blocksize, checked to be an integer >= 1."""
    shape = as_shape(input_shape, "input shape", func)
    b = as_blocksize(blocksize, func, f"input shape {shape}")
    if len(shape) != 4:
        raise GeomError(f"{func}: input must have rank 4 (N, C, H, W), found rank {len(shape)} (shape {shape})")
    return shape, b


def space_to_depth_output_shape(
    input_shape: Sequence[int], blocksize: int, *, dtype: DTypeLike | None = None
) -> Shape:
    """The shape :func:`space_to_depth` returns, after validating its arguments.

    A shape no numpy array can have (more elements, or with ``dtype`` more bytes, than numpy
    can address) is refused with a GeomError: an empty input with a huge blocksize, say.

    >>> space_to_depth_output_shape((1, 3, 4, 6), 2)
    (1, 12, 2, 3)
    """
    func = "space_to_depth"
    shape, b = _nchw_shape(input_shape, blocksize, func)
    n, c, h, w = shape
    for name, length in (("height", h), ("width", w)):
        if length % b:
            raise GeomError(f"{func}: {name} {length} is not divisible by blocksize {b} (input shape {shape})")
    output = (n, c * b * b, h // b, w // b)
    check_addressable(output, dtype, func, f"input shape {shape}")
    return output


def depth_to_space_output_shape(
    input_shape: Sequence[int], blocksize: int, *, dtype: DTypeLike | None = None
) -> Shape:
    """The shape :func:`depth_to_space` returns, after validating its arguments.

    A shape no numpy array can have (more elements, or with ``dtype`` more bytes, than numpy
    can address) is refused with a GeomError: an empty input with a huge blocksize, say.

    >>> depth_to_space_output_shape((1, 12, 2, 3), 2)
    (1, 3, 4, 6)
    """
    func = "depth_to_space"
    shape, b = _nchw_shape(input_shape, blocksize, func)
    n, c, h, w = shape
    if c % (b * b):
        raise GeomError(f"{func}: channels {c} are not divisible by blocksize² {b * b} (input shape {shape})")
    output = (n, c // (b * b), h * b, w * b)
    check_addressable(output, dtype, func, f"input shape {shape}")
    return output


def space_to_depth(
    data: Any, blocksize: Int, mode: Mode = "DCR", *, threads: Int | None = None, out: np.ndarray | None = None
) -> np.ndarray:
    """Move each ``blocksize`` × ``blocksize`` block of space into channels.

    Parameters
    ----------
    data : array_like
        Rank 4, (N, C, H, W), of a type :func:`center_crop_pad` takes.
    blocksize : int
        Block edge b >= 1; H and W must be multiples of it (1 is the identity).
    mode : {"DCR", "CRD"}
        Channel order: DCR puts the block offset first, CRD the input channel first.
    threads : int, optional, keyword-only
        Threads that share a large input (4 MiB and more). ``None`` uses every CPU this
        process may run on; at most 1024. The result is the same for any count.
    out : numpy.ndarray, optional, keyword-only
        Where to write the result (a memory-mapped file, or a slab of one), of exactly the
        output's shape and ``data``'s dtype, byte order included; any strides.

    Returns
    -------
    numpy.ndarray
        (N, C·b², H/b, W/b), of ``data``'s dtype, byte order included (``out`` itself
        when given).
        A new output of 32 MiB or more may take the memory of one let go before, and then
        does not own it: the last two let go (of the last size, 1 GiB in all at most) stay
        in memory for that until ``geomcli.ops.reuse.release()`` (see geomcli.ops.reuse).

    Raises
    ------
    GeomError
        If ``data`` is not rank 4, of another type or masked, H or W is not divisible by b,
        b is not an integer >= 1, ``mode`` is not exactly "DCR" or "CRD", ``threads`` is
        not an integer from 1 to 1024, ``out`` is not a writable, unmasked array of the output's shape
        and dtype (byte order included) or overlaps ``data`` or itself, or the output
        cannot be allocated.

    Notes
    -----
    ONNX SpaceToDepth, opset 28. DCR: ``y[n, (bh·b + bw)·C + c, h, w] = x[n, c, h·b + bh, w·b + bw]``
    (TensorFlow's space_to_depth); CRD: ``y[n, c·b² + bh·b + bw, h, w]`` (torch's pixel_unshuffle).
    The two coincide when C == 1.

    Examples
    --------
    >>> x = np.arange(8).reshape(1, 2, 2, 2)
    >>> space_to_depth(x, 2)[0, :, 0, 0]
    array([0, 4, 1, 5, 2, 6, 3, 7])
    >>> space_to_depth(x, 2, mode="CRD")[0, :, 0, 0]
    array([0, 1, 2, 3, 4, 5, 6, 7])
    """
    return _rearrange("space_to_depth", data, blocksize, mode, threads, out)


def _rearrange(func: str, data: Any, blocksize: Any, mode: Any, threads: Any, out: Any) -> np.ndarray:
    """Validate, then move the blocks: cache-blocked for large in-memory arrays, else one transpose."""
    array = as_array(data, func)
    where = f"input shape {array.shape}"
    checked_mode = as_mode(mode, func, where)
    to_space = func == "depth_to_space"
    output_shape = (depth_to_space_output_shape if to_space else space_to_depth_output_shape)(
        array.shape, blocksize, dtype=array.dtype
    )
    b = int(blocksize)
    workers = as_threads(threads, func, where)
    if out is None:
        result = new_output(output_shape, array.dtype, func, where)
    else:
        result = as_out(out, output_shape, array.dtype, array, func, where)
    if result.size == 0:  # nothing to move; the 6-D views of a huge blocksize could not even be made
        return result
    if b > 1 and array.nbytes >= BLOCK_BYTES and plain_memory(array) and array.flags.c_contiguous:
        blocked = _depth_to_space_blocked if to_space else _space_to_depth_blocked
        return blocked(array, b, checked_mode, threads_for(workers, array.nbytes), out=result)
    plain = _depth_to_space_plain if to_space else _space_to_depth_plain
    return plain(array, b, checked_mode, out=result)


def _space_to_depth_plain(array: np.ndarray, b: int, mode: Mode, *, out: np.ndarray | None = None) -> np.ndarray:
    """The defining transpose, in one copy: any dtype, any strides (and the oracle of the fast path)."""
    n, c, h, w = array.shape
    blocks = split_axes(array, (n, c, h // b, b, w // b, b))
    result = np.empty((n, c * b * b, h // b, w // b), dtype=array.dtype) if out is None else out
    if mode == "DCR":
        # (n, c, h/b, bh, w/b, bw) -> (n, bh, bw, c, h/b, w/b)
        np.copyto(split_axes(result, (n, b, b, c, h // b, w // b)), blocks.transpose(0, 3, 5, 1, 2, 4))
    else:
        # (n, c, h/b, bh, w/b, bw) -> (n, c, bh, bw, h/b, w/b)
        np.copyto(split_axes(result, (n, c, b, b, h // b, w // b)), blocks.transpose(0, 1, 3, 5, 2, 4))
    return result


def _block_pieces(n: int, c: int, rows: int, row_bytes: int, block_bytes: int) -> list[tuple[int, slice, slice]]:
    """(batch, channels, rows) pieces of about ``block_bytes`` each, in memory order.

    A piece is whole channel planes when a plane fits in a block, else a band of rows of
    one channel; ``row_bytes`` is what one row of one channel costs.
    """
    plane = rows * row_bytes
    if plane <= block_bytes:
        return [(i, part, slice(None)) for i in range(n) for part in split(c, -(-c * plane // block_bytes))]
    return [
        (i, slice(channel, channel + 1), part)
        for i in range(n)
        for channel in range(c)
        for part in split(rows, -(-plane // block_bytes))
    ]


# numpy's unsigned integer of each item size, for moving raw bits (bool, bfloat16 and floats alike).
_UINTS: dict[int, np.dtype[Any]] = {size: np.dtype(f"u{size}") for size in (1, 2, 4, 8)}


def _space_to_depth_blocked(
    array: np.ndarray, b: int, mode: Mode, threads: int, block_bytes: int = BLOCK_BYTES, *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`_space_to_depth_plain`'s result, ~1 MiB of input at a time, on ``threads`` threads.

    The plain copy reads the whole input once per (bh, bw) pair in DCR mode; here each
    piece of input is still in cache when it is copied to all b² outputs. For b == 2 and
    items of 1, 2 or 4 bytes, each horizontal pair is read as one unsigned integer twice as
    wide: a truncating cast keeps the left item (bw = 0; little-endian); the same pairs read
    one item later give the right one (bw = 1) by the same cast (for the piece that ends the
    input, whose last pair has no item after it, a shift right). Both are contiguous, vectorised loops instead
    of a strided gather. Every output element is a bit copy of one input element, so the result
    is identical to the plain path for any dtype and any number of threads.
    """
    n, c, h, w = array.shape
    hb, wb = h // b, w // b
    result = np.empty((n, c * b * b, hb, wb), dtype=array.dtype) if out is None else out
    # Both modes as one view of the result: (n, bh, bw, c, h/b, w/b).
    if mode == "DCR":
        target = split_axes(result, (n, b, b, c, hb, wb))
    else:
        # (n, c, bh, bw, h/b, w/b) -> (n, bh, bw, c, h/b, w/b)
        target = split_axes(result, (n, c, b, b, hb, wb)).transpose(0, 2, 3, 1, 4, 5)
    source = array.reshape(n, c, hb, b, wb, b)  # (n, c, h/b, bh, w/b, bw)
    itemsize = array.dtype.itemsize
    wide = _UINTS.get(2 * itemsize)
    pairs = array.view(wide) if b == 2 and wide is not None and sys.byteorder == "little" else None

    if pairs is None or not pairs.flags.aligned:

        def work(piece: tuple[int, slice, slice]) -> None:
            i, channels, rows = piece
            # (c, h/b, bh, w/b, bw) -> (bh, bw, c, h/b, w/b)
            np.copyto(target[i, :, :, channels, rows], source[i, channels, rows].transpose(2, 4, 0, 1, 3))

    else:
        narrow = _UINTS[itemsize]
        bits = 8 * itemsize
        wide_pairs = pairs.reshape(n, c, hb, 2, wb)  # (n, c, h/b, bh, w/b): one element per (bw=0, bw=1)
        target_bits = target.view(narrow)
        source_bits = source.view(narrow)
        input_bytes = array.reshape(-1).view(np.uint8)
        row_bytes = w * itemsize

        def later(i: int, channels: slice, rows: slice) -> np.ndarray | None:
            """The pairs of input (i, channels, rows) read one item later, (c, h/b, bh, w/b): each
            holds its right item (bw = 1) in its low bytes. None where that would read past the
            input's end (the last row), or for a piece that is not one contiguous run."""
            first, last, _ = channels.indices(c)
            low, high, _ = rows.indices(hb)
            if high - low != hb and last - first != 1:
                return None
            # whole planes of channels, or rows of one plane: one run of input bytes
            start = ((i * c + first) * h + 2 * low) * row_bytes + itemsize
            stop = ((i * c + last - 1) * h + 2 * high) * row_bytes + itemsize
            if stop > input_bytes.size:
                return None
            return input_bytes[start:stop].view(wide_pairs.dtype).reshape(last - first, high - low, 2, wb)

        def work(piece: tuple[int, slice, slice]) -> None:
            i, channels, rows = piece
            block = wide_pairs[i, channels, rows].transpose(2, 0, 1, 3)  # -> (bh, c, h/b, w/b)
            np.copyto(target_bits[i, :, 0, channels, rows], block, casting="unsafe")
            shifted = later(i, channels, rows) if itemsize < 4 else None
            if shifted is not None:
                # Measured 2x faster than the shift: a plain truncating cast, as for bw = 0
                # (unaligned, which costs a cast nothing on x86).
                np.copyto(target_bits[i, :, 1, channels, rows], shifted.transpose(2, 0, 1, 3), casting="unsafe")
            elif itemsize < 4:
                np.right_shift(block, bits, out=target_bits[i, :, 1, channels, rows], casting="unsafe")
            else:
                # Measured: for 4-byte items the strided copy beats the shift with a cast.
                right = source_bits[i, channels, rows, :, :, 1]  # (c, h/b, bh, w/b)
                np.copyto(target_bits[i, :, 1, channels, rows], right.transpose(2, 0, 1, 3))

    share(_block_pieces(n, c, hb, b * w * itemsize, block_bytes), work, threads)
    return result


def depth_to_space(
    data: Any, blocksize: Int, mode: Mode = "DCR", *, threads: Int | None = None, out: np.ndarray | None = None
) -> np.ndarray:
    """Move channels back into ``blocksize`` × ``blocksize`` blocks of space.

    Parameters
    ----------
    data : array_like
        Rank 4, (N, C·b², H, W), of a type :func:`center_crop_pad` takes.
    blocksize : int
        Block edge b >= 1; the channel count must be a multiple of b².
    mode : {"DCR", "CRD"}
        The channel order, as for :func:`space_to_depth`.
    threads, out : optional, keyword-only
        As for :func:`space_to_depth`.

    Returns
    -------
    numpy.ndarray
        (N, C, H·b, W·b), of ``data``'s dtype, byte order included (``out`` itself when
        given).
        A new output of 32 MiB or more may take the memory of one let go before, and then
        does not own it: the last two let go (of the last size, 1 GiB in all at most) stay
        in memory for that until ``geomcli.ops.reuse.release()`` (see geomcli.ops.reuse).

    Raises
    ------
    GeomError
        If ``data`` is not rank 4, of another type or masked, its channels are not divisible
        by b², b is not an integer >= 1, ``mode`` is not exactly "DCR" or "CRD", ``threads``
        is not an integer from 1 to 1024, ``out`` is not a writable, unmasked array of the output's
        shape and dtype (byte order included) or overlaps ``data`` or itself, or the output
        cannot be allocated.

    Notes
    -----
    ONNX DepthToSpace (opset 28; the inverse of SpaceToDepth). In the same
    mode, ``depth_to_space(space_to_depth(x, b), b)`` equals ``x`` exactly.

    Examples
    --------
    >>> y = np.arange(8).reshape(1, 8, 1, 1)
    >>> depth_to_space(y, 2)[0, :, :, :].tolist()
    [[[0, 2], [4, 6]], [[1, 3], [5, 7]]]
    >>> depth_to_space(y, 2, mode="CRD")[0, 0].tolist()
    [[0, 1], [2, 3]]
    """
    return _rearrange("depth_to_space", data, blocksize, mode, threads, out)


def _depth_to_space_plain(array: np.ndarray, b: int, mode: Mode, *, out: np.ndarray | None = None) -> np.ndarray:
    """The defining transpose, in one copy: any dtype, any strides (and the oracle of the fast path)."""
    n, depth, h, w = array.shape
    c = depth // (b * b)
    result = np.empty((n, c, h * b, w * b), dtype=array.dtype) if out is None else out
    target = split_axes(result, (n, c, h, b, w, b))
    if mode == "DCR":
        # (n, bh, bw, c, h, w) -> (n, c, h, bh, w, bw)
        np.copyto(target, split_axes(array, (n, b, b, c, h, w)).transpose(0, 3, 4, 1, 5, 2))
    else:
        # (n, c, bh, bw, h, w) -> (n, c, h, bh, w, bw)
        np.copyto(target, split_axes(array, (n, c, b, b, h, w)).transpose(0, 1, 4, 2, 5, 3))
    return result


def _depth_to_space_blocked(
    array: np.ndarray, b: int, mode: Mode, threads: int, block_bytes: int = BLOCK_BYTES, *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`_depth_to_space_plain`'s result, one ~1 MiB piece of output at a time, on ``threads`` threads."""
    n, depth, h, w = array.shape
    c = depth // (b * b)
    result = np.empty((n, c, h * b, w * b), dtype=array.dtype) if out is None else out
    target = split_axes(result, (n, c, h, b, w, b))  # (n, c, h, bh, w, bw)
    # Both modes as one view of the input: (n, bh, bw, c, h, w).
    if mode == "DCR":
        source = array.reshape(n, b, b, c, h, w)
    else:
        # (n, c, bh, bw, h, w) -> (n, bh, bw, c, h, w)
        source = array.reshape(n, c, b, b, h, w).transpose(0, 2, 3, 1, 4, 5)

    def work(piece: tuple[int, slice, slice]) -> None:
        i, channels, rows = piece
        # (bh, bw, c, h, w) -> (c, h, bh, w, bw)
        np.copyto(target[i, channels, rows], source[i, :, :, channels, rows].transpose(2, 3, 0, 4, 1))

    share(_block_pieces(n, c, h, b * b * w * array.dtype.itemsize, block_bytes), work, threads)
    return result
