"""CenterCropPad (opset 18): validate, then copy the window and fill the border."""

from __future__ import annotations

import math
from collections.abc import Sequence, Sized
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

from geomcli.cpus import share
from geomcli.errors import GeomError
from geomcli.ops._checks import (
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
    in_native_order,
    is_tensor_type,
    new_output,
    normalize_axes,
    one_line,
    plain_memory,
    shown,
    split,
    threads_for,
)
from geomcli.ops._numeric import round_once
from geomcli.ops.window import center_crop_pad_window


def center_crop_pad_output_shape(
    input_shape: Sequence[int], shape: Ints, axes: Ints | None = None, *, dtype: DTypeLike | None = None
) -> Shape:
    """The shape :func:`center_crop_pad` returns, after validating its arguments.

    A shape no numpy array can have (more elements, or with ``dtype`` more bytes, than numpy
    can address) is refused with a GeomError.

    >>> center_crop_pad_output_shape((20, 8, 3), [10, 9], axes=[0, 1])
    (10, 9, 3)
    """
    func = "center_crop_pad"
    input_shape = as_shape(input_shape, "input shape", func)
    rank = len(input_shape)
    targets = as_ints(shape, "shape", func, f"input shape {input_shape}")
    chosen = tuple(range(rank)) if axes is None else normalize_axes(axes, rank, input_shape, func)
    if len(targets) != len(chosen):
        what = "the input's rank" if axes is None else "the number of axes"
        values = f"{len(targets)} value{'' if len(targets) == 1 else 's'}"
        raise GeomError(f"{func}: shape has {values} but {what} is {len(chosen)} (input shape {input_shape})")
    output = list(input_shape)
    for axis, target in zip(chosen, targets, strict=True):
        if target < 0:
            raise GeomError(f"{func}: target size {target} for axis {axis} is negative (input shape {input_shape})")
        output[axis] = target
    check_addressable(tuple(output), dtype, func, f"input shape {input_shape}")
    return tuple(output)


def _as_fill(fill: Any, dtype: np.dtype, func: str, where: str) -> np.ndarray:
    """``fill`` as a 0-d array of ``dtype``, refusing values the dtype cannot hold: integers out
    of range or with a fraction, numbers that overflow a float type to Inf, strings that would be
    cut short, and a string for a numeric dtype or a number for a string dtype.

    ``fill`` is one value: a Python or numpy scalar, or a 0-d array (taken as its scalar).
    Dates, durations, objects and records are not values of a tensor type, though numpy would
    make numbers of them.
    """
    if isinstance(fill, np.ndarray) and fill.ndim == 0:
        fill = fill[()]
    if isinstance(fill, np.ndarray) or (isinstance(fill, Sized) and not isinstance(fill, (str, bytes, np.generic))):
        if isinstance(fill, np.ndarray):  # a 0-d one here is masked (np.ma.masked): it has no value
            found = f"an array of shape {fill.shape}" if fill.ndim else f"a {type(fill).__name__}"
        elif isinstance(fill, (list, tuple)):
            found = f"a {type(fill).__name__} of {len(fill)} value{'' if len(fill) == 1 else 's'}"
        else:
            found = f"a {type(fill).__name__}"
        raise GeomError(f"{func}: fill must be a scalar, found {found} ({where})")
    refusal = f"{func}: fill value {shown(fill)} does not fit dtype {dtype_text(dtype)}"
    if isinstance(fill, np.generic) and fill.dtype.kind in "mMOV" and not is_tensor_type(fill.dtype):
        raise GeomError(f"{refusal} ({fill.dtype} is no tensor type; {where})")
    # numpy would drop the imaginary part of a numpy complex (with a ComplexWarning), as it
    # refuses a Python complex: both are refused, whatever their imaginary part
    if isinstance(fill, (complex, np.complexfloating)) and dtype.kind in "biufV":
        raise GeomError(f"{refusal} (a complex value for a real type; {where})")
    is_text = isinstance(fill, (str, bytes))
    if is_text and dtype.kind not in "UST":
        raise GeomError(f"{refusal} (text for a {'bool' if dtype.kind == 'b' else 'numeric'} type; {where})")
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            native = in_native_order(dtype)
            if native.name == "bfloat16" and not is_text:
                value = round_once(np.array(fill, dtype=np.float64), native)
            else:
                value = np.array(fill, dtype=native)
            # after the value: ml_dtypes ignores a byte order when assigning, not when casting
            value = value.astype(dtype)
        if dtype.kind in "UST":
            stored = value.item()
            fits = is_text and (stored == fill or isinstance(stored, bytes) and stored.decode("latin-1") == fill)
        elif is_text:
            fits = False
        elif dtype.kind in "fcV":  # float types round, but a finite part must not become Inf
            stored, asked = complex(value.astype(np.complex128 if dtype.kind == "c" else np.float64)), complex(fill)
            fits = all(math.isfinite(kept) or not math.isfinite(wanted)
                       for kept, wanted in ((stored.real, asked.real), (stored.imag, asked.imag)))
        else:
            fits = bool(value.item() == fill)
    except (ValueError, TypeError, ArithmeticError) as error:  # decimal's signalling NaN: InvalidOperation
        raise GeomError(f"{refusal} ({one_line(str(error))}; {where})") from error
    if not fits:
        raise GeomError(f"{refusal} ({where})")
    return value


def center_crop_pad(
    data: Any,
    shape: Ints,
    axes: Ints | None = None,
    *,
    fill: Any = None,
    threads: Int | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Centre-crop or zero-pad ``data`` to ``shape`` on ``axes``.

    Parameters
    ----------
    data : array_like
        Input of a type CenterCropPad takes: bool, int8-int64, uint8-uint64,
        float16/32/64, bfloat16 (ml_dtypes), complex64/128, or strings (numpy str or
        bytes arrays, or numpy 2's StringDType); either byte order, any strides. A memory
        map is read only where it lands in the output.
    shape : sequence of int or 1-D int32/int64 array
        Target length of each axis in ``axes``; every value >= 0.
    axes : sequence of int or 1-D int array, optional
        The axes ``shape`` refers to; negative values count from the end. Defaults
        to all axes, in which case ``len(shape)`` must equal ``data.ndim``.
    fill : scalar, optional, keyword-only
        A pad value other than the dtype's zero (an extension of ONNX, for images): one
        value (a Python or numpy scalar, or a 0-d array) that fits the dtype exactly (no
        300 in uint8, no 0.5 in an integer type).
    threads : int, optional, keyword-only
        Threads that share the copy of a large output (4 MiB and more). ``None`` uses
        every CPU this process may run on; at most 1024. The result is the same for any count.
    out : numpy.ndarray, optional, keyword-only
        Where to write the result (a memory-mapped file, say), of exactly the output's
        shape and ``data``'s dtype, byte order included; any strides. Its padding is
        written with the pad value, so what it held before does not matter.

    Returns
    -------
    numpy.ndarray
        A new array of ``data``'s dtype, byte order included (``out`` itself when given);
        the unlisted axes keep their length.
        A new output of 32 MiB or more may take the memory of one let go before, and then
        does not own it: the last two let go (of the last size, 1 GiB in all at most) stay
        in memory for that until ``geomcli.ops.reuse.release()`` (see geomcli.ops.reuse).

    Raises
    ------
    GeomError
        If an axis is out of ``[-r, r-1]`` or repeated, ``shape`` is not 1-D, holds
        non-integers or negative values, or its length differs from the number of
        axes; if ``data`` is of another type (float128, datetime64, object, float8, ...)
        or a masked array; if ``fill`` is not one value that fits its dtype; if
        ``threads`` is not an integer from 1 to 1024; if ``out`` is not a writable, unmasked array of
        the output's shape and dtype (byte order included), or overlaps ``data`` or itself;
        if the output would be bigger than numpy can address, or cannot be allocated.

    Notes
    -----
    ONNX CenterCropPad, opset 18. Per axis of length ``d`` and target ``t``:
    cropping keeps ``[s, s + t)`` with ``s = (d - t) // 2`` (the window sits half a
    pixel left of centre when ``d - t`` is odd); padding puts ``(t - d) // 2`` zeros
    before and the rest after. The pad value is the dtype's zero: 0, False or "".

    Examples
    --------
    >>> center_crop_pad(np.arange(5), [2])
    array([1, 2])
    >>> center_crop_pad(np.arange(1, 4), [6])
    array([0, 1, 2, 3, 0, 0])
    >>> center_crop_pad(np.array([["a", "b"]]), [1, 3])
    array([['a', 'b', '']], dtype='<U1')
    """
    func = "center_crop_pad"
    array = as_array(data, func)
    where = f"input shape {array.shape}"
    output_shape = center_crop_pad_output_shape(array.shape, shape, axes, dtype=array.dtype)
    pad_value = None if fill is None else _as_fill(fill, array.dtype, func, where)
    workers = as_threads(threads, func, where)
    given = None if out is None else as_out(out, output_shape, array.dtype, array, func, where)
    windows = [center_crop_pad_window(d, t) for d, t in zip(array.shape, output_shape, strict=True)]
    source = [kept for kept, _ in windows]
    target = [placed for _, placed in windows]
    # One pass over memory: a single copy for the data and, for the padding, zeroed pages
    # from the kernel (pages that are all padding are never touched). np.empty when nothing
    # is padded; border fills or np.pad measured 1.5x slower.
    if given is not None:
        # a given output may hold anything: only its padding is written, around the window
        result = given
        _fill_border(result, target, np.zeros((), array.dtype) if pad_value is None else pad_value)
    elif all(wanted <= length for length, wanted in zip(array.shape, output_shape, strict=True)):
        result = new_output(output_shape, array.dtype, func, where)
    else:
        result = new_output(output_shape, array.dtype, func, where, zeroed=pad_value is None, value=pad_value)
    # The trailing Ellipsis keeps rank 0 a (0-d) view rather than a scalar.
    into: Any = (*target, ...)
    taken: Any = (*source, ...)
    _copy(result[into], array[taken], workers)
    return result


def _fill_border(result: np.ndarray, window: list[slice], value: np.ndarray) -> None:
    """Write ``value`` everywhere in ``result`` outside ``window``, each element once.

    Axis by axis: the slabs before and after the window on axis i, within the window on the
    axes before i. Together they cover the outside of the window without overlap.
    """
    inner: list[slice] = []
    for length, part in zip(result.shape, window, strict=True):
        start, stop, _ = part.indices(length)
        for outside in (slice(0, start), slice(stop, length)):
            if outside.stop > outside.start:
                result[(*inner, outside, ...)] = value
        inner.append(slice(start, stop))



def _copy(target: np.ndarray, source: np.ndarray, threads: int) -> None:
    """``np.copyto(target, source)``, in slabs along the outermost axis long enough to share."""
    threads = threads_for(threads, target.nbytes)
    if threads > 1 and plain_memory(source):
        for axis, length in enumerate(target.shape):
            if length >= threads:
                slabs = [(slice(None),) * axis + (part,) for part in split(length, threads)]
                share(slabs, lambda slab: np.copyto(target[slab], source[slab]), threads)
                return
    np.copyto(target, source)
