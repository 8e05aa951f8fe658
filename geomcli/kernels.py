"""The ONNX geometry operators, in pure numpy.

CenterCropPad (opset 18), AffineGrid (opset 20), SpaceToDepth and DepthToSpace
(opset 28), exactly as the spec pages define them. Every public function
validates its arguments first and raises :class:`GeomError` with a one-line
message; after validation numpy does the work and must not raise.

A new output of 32 MiB or more that is not padded takes the memory of one of the same size the
caller has let go, if geomcli.reuse kept it: new pages cost the OS's zeroing first.

This module imports numpy only (and geomcli's own numpy-free window arithmetic, CPU count and
kept memory): no I/O, no printing, no CLI.
"""

from __future__ import annotations

import functools
import itertools
import math
import sys
from collections.abc import Sequence, Sized
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

from geomcli import reuse
from geomcli.cpus import available_cpus, share
from geomcli.errors import GeomError
from geomcli.ops._numeric import round_once
from geomcli.window import center_crop_pad_window

__all__ = [
    "GeomError",
    "affine_grid",
    "affine_grid_output_shape",
    "center_crop_pad",
    "center_crop_pad_output_shape",
    "center_crop_pad_window",
    "depth_to_space",
    "depth_to_space_output_shape",
    "space_to_depth",
    "space_to_depth_output_shape",
]

Ints: TypeAlias = "Sequence[int] | np.ndarray"
Mode: TypeAlias = Literal["DCR", "CRD"]
Shape: TypeAlias = tuple[int, ...]

_MODES = ("DCR", "CRD")
# The dtype policy (used by _as_array): the types these operators take in ONNX (CenterCropPad-18,
# SpaceToDepth-28: "all tensor types" of that list, so no float8 or int4), by numpy's name in any
# byte order; strings by kind, str, bytes (ONNX keeps its strings as bytes) or numpy 2's StringDType
# (variable width: the plain paths only, never kept memory). Refused: float128
# and complex256, dates, durations, objects, records and raw bytes (void).
_TENSOR_DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
    + ["float16", "float32", "float64", "bfloat16", "complex64", "complex128"]
)
_TENSOR_TEXT = "bool, int8-int64, uint8-uint64, float16/32/64, bfloat16, complex64/128, str, bytes or StringDType"
# AffineGrid-20's T1: theta and the grid.
_GRID_DTYPES = frozenset(["float16", "float32", "float64", "bfloat16"])
_GRID_TEXT = "float16, float32, float64 or bfloat16"

# The fast paths work on ~1 MiB pieces: small enough to stay in cache while a piece is
# rearranged, big enough that Python's per-piece cost is lost in the copying.
_BLOCK_BYTES = 1 << 20
# Outputs smaller than this are made on the calling thread: a thread hand-off costs more.
_PARALLEL_BYTES = 4 << 20


# --- validation helpers -------------------------------------------------------------


def _is_tensor_type(dtype: np.dtype) -> bool:
    """Whether the rearranging kernels take ``dtype``: see _TENSOR_DTYPES; strings are numpy's
    fixed-width str and bytes, and numpy 2's variable-width StringDType (kind T)."""
    return dtype.name in _TENSOR_DTYPES or dtype.kind in "UST"


def _in_native_order(dtype: np.dtype) -> np.dtype:
    """``dtype`` in this machine's byte order (StringDType has none, and refuses to be asked)."""
    return dtype if dtype.kind == "T" else dtype.newbyteorder("=")


@functools.lru_cache(maxsize=64)
def _takes(dtype: np.dtype, grid: bool) -> bool:
    # cached: numpy 2.4 takes ~2 µs for dtype.name, a fifth of a call on a tiny array
    return dtype.name in _GRID_DTYPES if grid else _is_tensor_type(dtype)


def _refused_type(dtype: np.dtype, func: str, name: str, where: str, *, grid: bool = False) -> GeomError | None:
    """The error for a ``dtype`` the operator does not take, or None: a tensor type, or with
    ``grid`` a float type of AffineGrid. The one place of the dtype policy."""
    if _takes(dtype, grid):
        return None
    types = _GRID_TEXT if grid else _TENSOR_TEXT
    return GeomError(f"{func}: {name} must be {types}, found dtype {_dtype_text(dtype)} ({where})")


def _is_masked(array: Any) -> bool:
    ma = sys.modules.get("numpy.ma")  # not imported: no masked array can exist
    return ma is not None and isinstance(array, ma.MaskedArray)


def _as_array(data: Any, func: str, name: str = "input", *, grid: bool = False) -> np.ndarray:
    """The input as an ndarray of a type the operator takes (memory maps stay maps). A masked
    array is refused: its mask would be dropped, and the result hold what lies under it."""
    try:
        array = data if isinstance(data, np.ndarray) else np.asarray(data)
    except (ValueError, TypeError) as error:
        raise GeomError(f"{func}: {name} is not an array ({_one_line(str(error))})") from error
    if _is_masked(array):
        raise GeomError(
            f"{func}: {name} is a masked array, whose mask would be lost; give its .filled(value) "
            f"({name} shape {array.shape})"
        )
    refusal = _refused_type(array.dtype, func, name, f"{name} shape {array.shape}", grid=grid)
    if refusal is not None:
        raise refusal
    return array


def _shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` fit for a one-line message: a multi-line repr (an array's, a masked
    array's) on one line, and a long one cut short."""
    return _one_line(repr(value), limit)


def _one_line(text: str, limit: int | None = None) -> str:
    if "\n" in text:
        text = " ".join(text.split())
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def _about(where: str) -> str:
    """The end of a message: `` (input shape (1, 3, 4, 4))``, say; nothing for no ``where``."""
    return f" ({where})" if where else ""


def _as_int(value: Any, name: str, func: str, where: str) -> int:
    """A Python int from an int or numpy integer; bools and floats are refused. ``where``, the
    shape of the input the value is for, ends the messages of these checks."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise GeomError(f"{func}: {name} must be an integer, found {_shown(value)}{_about(where)}")
    return int(value)


def _as_ints(values: Any, name: str, func: str, where: str = "") -> Shape:
    """A tuple of ints from a sequence of ints or a 1-D integer array.

    A list or tuple of ints is taken as it is, so Python ints past int64 stay themselves (numpy
    would make them objects, or floats next to a negative value) for the callers' range checks.
    """
    if isinstance(values, (str, bytes)) or values is None:
        raise GeomError(f"{func}: {name} must be a 1-D list of integers, found {_shown(values)}{_about(where)}")
    if isinstance(values, (list, tuple)):
        for value in values:
            if isinstance(value, (bool, np.bool_)):
                raise GeomError(f"{func}: {name} must hold integers, found {_shown(value)}{_about(where)}")
        if all(isinstance(value, (int, np.integer)) for value in values):
            return tuple(int(value) for value in values)
    try:
        array = np.asarray(values)
    except (ValueError, TypeError) as error:
        raise GeomError(
            f"{func}: {name} must be a 1-D list of integers ({_one_line(str(error))}){_about(where)}"
        ) from error
    if array.ndim != 1:
        raise GeomError(f"{func}: {name} must be 1-D, found shape {array.shape}{_about(where)}")
    if array.size == 0:
        return ()
    if array.dtype.kind not in "iu":
        raise GeomError(f"{func}: {name} must hold integers, found dtype {array.dtype}{_about(where)}")
    return tuple(int(value) for value in array.tolist())


def _as_shape(values: Any, name: str, func: str) -> Shape:
    """An array's shape: a 1-D list of integers >= 0."""
    shape = _as_ints(values, name, func)
    if any(length < 0 for length in shape):
        raise GeomError(f"{func}: {name} must not hold negative lengths, found {shape}")
    return shape


def _itemsize(dtype: Any, func: str, where: str, grid: bool) -> int:
    """The item size of ``dtype``, a type the operator takes: 1 for None, so that a check
    counts elements."""
    if dtype is None:
        return 1
    try:
        found = np.dtype(dtype)
    except (TypeError, ValueError) as error:
        raise GeomError(f"{func}: dtype {_shown(dtype)} is not a numpy dtype ({where})") from error
    refusal = _refused_type(found, func, "the output", where, grid=grid)
    if refusal is not None:
        raise refusal
    return int(found.itemsize)


def _check_addressable(output: Shape, dtype: Any, func: str, where: str, *, grid: bool = False) -> None:
    """Refuse an output shape no numpy array can have, before anything is allocated.

    numpy refuses an array whose lengths other than 0, times the item size, pass the largest
    intp ("array is too big", "Maximum allowed dimension exceeded"): empty arrays included. With
    ``dtype`` None the lengths alone are counted (no dtype has items of less than a byte).
    """
    span = _itemsize(dtype, func, where, grid)
    for length in output:
        span *= length or 1
    if span <= sys.maxsize:
        return
    if dtype is None:
        of_dtype, verb, amount, factors = "", "has", f"{span} elements", "its lengths other than 0"
    else:
        of_dtype, verb, amount = f" of {_dtype_text(np.dtype(dtype))}", "would take", _bytes_text(span)
        factors = "its lengths other than 0 times the item size"
    taken = f"counts as {amount}: {factors}" if 0 in output else f"{verb} {amount}"
    raise GeomError(
        f"{func}: the output shape {output}{of_dtype} {taken}; numpy addresses at most {sys.maxsize} ({where})"
    )


def _bytes_text(count: int) -> str:
    """``count`` bytes, exact and in binary units: ``6917529027641081856 bytes (6.0 EiB)``."""
    if count < 1024:
        return f"{count} bytes"
    size = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"):
        size /= 1024
        if size < 1024:
            return f"{count} bytes ({size:.1f} {unit})"
    return f"{count} bytes ({size / 1024:.1f} YiB)"


def _new_output(
    shape: Shape, dtype: np.dtype, func: str, where: str, *, zeroed: bool = False, value: np.ndarray | None = None
) -> np.ndarray:
    """``np.empty`` (``np.zeros`` if ``zeroed``, ``np.full`` with a ``value``) of an output whose
    shape passed _check_addressable, made by geomcli.reuse (a big empty one may be in memory kept
    from an earlier output); a MemoryError becomes a GeomError that names the bytes."""
    try:
        return reuse.new(shape, dtype, zeroed=zeroed, value=value)
    except MemoryError as error:
        raise GeomError(
            f"{func}: could not allocate {_bytes_text(math.prod(shape) * dtype.itemsize)} "
            f"for the output of shape {shape} and dtype {_dtype_text(dtype)} ({where})"
        ) from error


def _as_mode(mode: Any, func: str, where: str) -> Mode:
    if not isinstance(mode, str) or mode not in _MODES:
        raise GeomError(f"{func}: mode must be 'DCR' or 'CRD', found {_shown(mode)} ({where})")
    return mode  # type: ignore[return-value]


def _as_blocksize(blocksize: Any, func: str, where: str) -> int:
    size = _as_int(blocksize, "blocksize", func, where)
    if size < 1:
        raise GeomError(f"{func}: blocksize must be at least 1, found {size} ({where})")
    return size


def _normalize_axes(axes: Any, rank: int, input_shape: Shape, func: str) -> Shape:
    found = _as_ints(axes, "axes", func, f"input shape {input_shape}")
    normalized = []
    for axis in found:
        if not -rank <= axis < rank:
            raise GeomError(
                f"{func}: axis {axis} is out of range [{-rank}, {rank - 1}] (input shape {input_shape})"
            )
        normalized.append(axis % rank)
    if len(set(normalized)) != len(normalized):
        raise GeomError(f"{func}: axes {list(found)} name an axis more than once (input shape {input_shape})")
    return tuple(normalized)


def _as_out(
    out: Any, shape: Shape, dtype: np.dtype, data: np.ndarray, func: str, where: str, name: str = "the input"
) -> np.ndarray:
    """``out`` checked to take a result of exactly ``shape`` and ``dtype`` without touching ``data``.

    The byte order must match too: the fast paths move raw bytes into ``out`` (the pairs of
    _space_to_depth_blocked), and a result's byte order is the kernel's one rule, not the caller's.
    """
    if not isinstance(out, np.ndarray):
        raise GeomError(f"{func}: out must be a numpy array, found {type(out).__name__} ({where})")
    if out.shape != shape or out.dtype != dtype:
        same_type = _in_native_order(out.dtype) == _in_native_order(dtype)
        order = "the byte order must match too; " if same_type else ""
        raise GeomError(
            f"{func}: out must have shape {shape} and dtype {_dtype_text(dtype)}, "
            f"found shape {out.shape} and dtype {_dtype_text(out.dtype)} ({order}{where})"
        )
    if not out.flags.writeable:
        raise GeomError(f"{func}: out is read-only ({where})")
    if _is_masked(out):
        raise GeomError(f"{func}: out is a masked array, whose mask would not follow the values ({where})")
    if _overlaps_itself(out):
        raise GeomError(f"{func}: out has elements that share memory (strides {out.strides}; {where})")
    overlap = _overlap(out, data, name)
    if overlap is not None:
        raise GeomError(f"{func}: out {overlap}; give a separate array ({where})")
    return out


def _overlaps_itself(array: np.ndarray) -> bool:
    """Whether elements of ``array`` may share memory (a zero stride, say), by a sufficient test:
    its axes of length > 1, innermost first by stride, each step past all the ones inside it."""
    if array.size == 0:
        return False
    span = array.itemsize
    for stride, length in sorted((abs(s), n) for n, s in zip(array.shape, array.strides) if n > 1):
        if stride < span:
            return True
        span += stride * (length - 1)
    return False


# The effort np.shares_memory may spend on an out= whose bounds meet the input's: a few ms at
# most (measured: 4 ms on 8-30 axes of random strides, 0.1 ms on 4 axes).
_OVERLAP_WORK = 100_000


def _overlap(out: np.ndarray, data: np.ndarray, name: str) -> str | None:
    """How ``out`` meets ``data``, for the message, or None if they share no byte.

    Exact where their memory bounds meet, so an ``out`` that lies between the input's items (every
    other item of one buffer) is taken; refused when the proof would cost more than _OVERLAP_WORK.
    """
    if not np.may_share_memory(out, data):
        return None
    try:
        # numpy's stubs name only -1 and 0, its two special values; any bound is documented
        shared = np.shares_memory(out, data, max_work=_OVERLAP_WORK)  # type: ignore[arg-type]
        return f"overlaps {name}" if shared else None
    except np.exceptions.TooHardError:
        return f"may overlap {name}: their strides are too costly to tell apart"


def _dtype_text(dtype: np.dtype) -> str:
    """How a message names ``dtype``: numpy's name, with the byte order where it is not native
    (``>f4``); ml_dtypes' bfloat16 as ``>bfloat16`` rather than numpy's ``>V2``."""
    if dtype.name == "bfloat16" and not dtype.isnative:
        return f"{dtype.byteorder}bfloat16"
    return str(dtype)


def _split_axes(array: np.ndarray, shape: Shape) -> np.ndarray:
    """``array.reshape(shape)`` where that only splits axes: always a view, never a copy, so
    writes through it land in ``array`` whatever its strides (a memory map's slab, say)."""
    return array.reshape(shape, copy=False)


def _as_threads(threads: Any, func: str, where: str) -> int:
    """The number of threads to use: ``None`` means every CPU this process may run on."""
    if threads is None:
        return available_cpus()
    count = _as_int(threads, "threads", func, where)
    if count < 1:
        raise GeomError(f"{func}: threads must be at least 1, found {count} ({where})")
    return count


# --- pieces of work on several threads (geomcli.cpus.share) -----------------------------
# Results are identical for any thread count (a grid's sum of two NaNs aside: see
# _affine_grid_rows).


def _threads_for(threads: int, nbytes: int) -> int:
    """How many of ``threads`` to start for ``nbytes`` of work: one below _PARALLEL_BYTES, and at
    most one a quarter of it (1 MiB): thousands asked for would spend their time starting and
    taking turns at the pieces (8000 threads on a 7 MiB crop: 12 s, against 7 ms on two)."""
    return 1 if nbytes < _PARALLEL_BYTES else min(threads, 4 * nbytes // _PARALLEL_BYTES)


def _split(length: int, parts: int) -> list[slice]:
    """``range(length)`` cut into at most ``parts`` nearly equal, non-empty slices."""
    parts = max(1, min(parts, length))
    bounds = [length * i // parts for i in range(parts + 1)]
    return [slice(start, stop) for start, stop in itertools.pairwise(bounds)]


# --- CenterCropPad ------------------------------------------------------------------


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
    input_shape = _as_shape(input_shape, "input shape", func)
    rank = len(input_shape)
    targets = _as_ints(shape, "shape", func, f"input shape {input_shape}")
    chosen = tuple(range(rank)) if axes is None else _normalize_axes(axes, rank, input_shape, func)
    if len(targets) != len(chosen):
        what = "the input's rank" if axes is None else "the number of axes"
        raise GeomError(
            f"{func}: shape has {len(targets)} values but {what} is {len(chosen)} (input shape {input_shape})"
        )
    output = list(input_shape)
    for axis, target in zip(chosen, targets, strict=True):
        if target < 0:
            raise GeomError(f"{func}: target size {target} for axis {axis} is negative (input shape {input_shape})")
        output[axis] = target
    _check_addressable(tuple(output), dtype, func, f"input shape {input_shape}")
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
    refusal = f"{func}: fill value {_shown(fill)} does not fit dtype {_dtype_text(dtype)}"
    if isinstance(fill, np.generic) and fill.dtype.kind in "mMOV" and not _is_tensor_type(fill.dtype):
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
            native = _in_native_order(dtype)
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
        raise GeomError(f"{refusal} ({_one_line(str(error))}; {where})") from error
    if not fits:
        raise GeomError(f"{refusal} ({where})")
    return value


def center_crop_pad(
    data: Any,
    shape: Ints,
    axes: Ints | None = None,
    *,
    fill: Any = None,
    threads: int | None = None,
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
        every CPU this process may run on. The result is the same for any count.
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
        does not own it (see geomcli.reuse).

    Raises
    ------
    GeomError
        If an axis is out of ``[-r, r-1]`` or repeated, ``shape`` is not 1-D, holds
        non-integers or negative values, or its length differs from the number of
        axes; if ``data`` is of another type (float128, datetime64, object, float8, ...)
        or a masked array; if ``fill`` is not one value that fits its dtype; if
        ``threads`` is not an integer >= 1; if ``out`` is not a writable, unmasked array of
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
    array = _as_array(data, func)
    where = f"input shape {array.shape}"
    output_shape = center_crop_pad_output_shape(array.shape, shape, axes, dtype=array.dtype)
    pad_value = None if fill is None else _as_fill(fill, array.dtype, func, where)
    workers = _as_threads(threads, func, where)
    given = None if out is None else _as_out(out, output_shape, array.dtype, array, func, where)
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
        result = _new_output(output_shape, array.dtype, func, where)
    else:
        result = _new_output(output_shape, array.dtype, func, where, zeroed=pad_value is None, value=pad_value)
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


def _plain_memory(array: np.ndarray) -> bool:
    """Whether the fast paths may take ``array``: an in-memory ndarray of a non-string type.

    Memory maps and other subclasses, strings and anything unusual take the plain path.
    """
    return type(array) is np.ndarray and array.dtype.kind not in "OSUT"


def _copy(target: np.ndarray, source: np.ndarray, threads: int) -> None:
    """``np.copyto(target, source)``, in slabs along the outermost axis long enough to share."""
    threads = _threads_for(threads, target.nbytes)
    if threads > 1 and _plain_memory(source):
        for axis, length in enumerate(target.shape):
            if length >= threads:
                slabs = [(slice(None),) * axis + (part,) for part in _split(length, threads)]
                share(slabs, lambda slab: np.copyto(target[slab], source[slab]), threads)
                return
    np.copyto(target, source)


# --- AffineGrid ---------------------------------------------------------------------


def affine_grid_output_shape(theta_shape: Sequence[int], size: Ints, *, dtype: DTypeLike | None = None) -> Shape:
    """The grid shape :func:`affine_grid` returns, after validating ``theta``'s shape and ``size``.

    A shape no numpy array can have (more elements, or with ``dtype`` more bytes, than numpy
    can address) is refused with a GeomError.

    >>> affine_grid_output_shape((2, 2, 3), [2, 3, 5, 6])
    (2, 5, 6, 2)
    """
    func = "affine_grid"
    theta_shape = _as_shape(theta_shape, "theta shape", func)
    where = f"theta shape {theta_shape}"
    sizes = _as_ints(size, "size", func, where)
    if len(sizes) not in (4, 5):
        raise GeomError(
            f"{func}: size must have 4 values (N, C, H, W) or 5 (N, C, D, H, W), found {list(sizes)} ({where})"
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
        raise GeomError(f"{func}: the channel count size[1] must not be negative, found size {list(sizes)} ({where})")
    if min(sizes[2:]) < 1:
        raise GeomError(f"{func}: spatial sizes must be at least 1, found size {list(sizes)} ({where})")
    output = (sizes[0], *sizes[2:], spatial)
    _check_addressable(output, dtype, func, where, grid=True)
    return output


def _base_coordinates(length: int, align_corners: bool) -> np.ndarray:
    """Closed-form sample positions in [-1, 1], in float64 (no float-step arange drift)."""
    index = np.arange(length, dtype=np.float64)
    if align_corners:
        return 2 * index / (length - 1) - 1 if length > 1 else np.zeros(1)
    return (2 * index + 1) / length - 1


def affine_grid(
    theta: Any,
    size: Ints,
    align_corners: bool | int = False,
    *,
    threads: int | None = None,
    out: np.ndarray | None = None,
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
        process may run on. The result is the same for any count.
    out : numpy.ndarray, optional, keyword-only
        Where to write the grid (a memory-mapped file, say), of exactly its shape and
        dtype (theta's type in native byte order); any strides.

    Returns
    -------
    numpy.ndarray
        Shape (N, H, W, 2) or (N, D, H, W, 3), of ``theta``'s type in native byte order
        (``out`` itself when given): the grid holds new values, not theta's bytes. The last
        axis is (x, y[, z]): x runs along W, y along H, z along D.
        A new output of 32 MiB or more may take the memory of one let go before, and then
        does not own it (see geomcli.reuse).

    Raises
    ------
    GeomError
        If theta's dtype is not a float type or theta is a masked array, its shape does
        not fit ``size``, ``size[0]`` differs from theta's batch, a spatial size is below
        1, ``align_corners`` is not a bool or 0/1, ``threads`` is not an integer >= 1,
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
    matrices = _as_array(theta, func, "theta", grid=True)
    where = f"theta shape {matrices.shape}"
    if isinstance(align_corners, (np.bool_, np.integer)):
        align_corners = align_corners.item()
    # the type first: an array of flags would make `in` ambiguous
    if not isinstance(align_corners, int) or align_corners not in (0, 1):
        raise GeomError(f"{func}: align_corners must be a bool or 0/1, found {_shown(align_corners)} ({where})")
    grid_dtype = matrices.dtype.newbyteorder("=")
    output_shape = affine_grid_output_shape(matrices.shape, size, dtype=grid_dtype)
    workers = _as_threads(threads, func, where)
    if out is None:
        result = _new_output(output_shape, grid_dtype, func, where)
    else:
        result = _as_out(out, output_shape, grid_dtype, matrices, func, where, "theta")
    if result.size == 0:  # no grids: not even the coordinates of their huge axes are made
        return result
    workers = _threads_for(workers, result.nbytes)
    try:
        # (n, d?, h, w) spatial lengths in output order; the coordinates come reversed: x, y, z.
        axes_xyz = [_base_coordinates(n, bool(align_corners)) for n in reversed(output_shape[1:-1])]
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
            f"and dtype {_dtype_text(grid_dtype)} ({where})"
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
                if target.size > _BLOCK_BYTES // 8:
                    rest, x_term = np.broadcast_arrays(rest, x_term)
                for block in _sum_blocks(target.shape, _BLOCK_BYTES // 8):
                    np.copyto(target[block], round_once(rest[block] + x_term[block], result.dtype))
            else:
                np.add(rest, x_term, out=target, casting="unsafe")

    share([(batch, k) for batch in _split(result.shape[0], threads) for k in range(len(axes_xyz))], work, threads)


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
        pieces = [(batch, slice(None)) for batch in _split(count, threads)]
    else:  # a few big grids: each cut into bands of rows
        pieces = [(slice(n, n + 1), band) for n in range(count) for band in _split(height, threads)]

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
        with reuse.work_memory(_carved_bytes(shapes)) as memory:
            work_in(part, *_carve(memory, shapes))

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

    share(_split(rows.shape[0], threads), work, threads)


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


# --- SpaceToDepth / DepthToSpace ----------------------------------------------------


def _nchw_shape(input_shape: Any, blocksize: Any, func: str) -> tuple[Shape, int]:
    """The input shape, checked to be rank 4, and the blocksize, checked to be an integer >= 1."""
    shape = _as_shape(input_shape, "input shape", func)
    b = _as_blocksize(blocksize, func, f"input shape {shape}")
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
    _check_addressable(output, dtype, func, f"input shape {shape}")
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
    _check_addressable(output, dtype, func, f"input shape {shape}")
    return output


def space_to_depth(
    data: Any, blocksize: int, mode: Mode = "DCR", *, threads: int | None = None, out: np.ndarray | None = None
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
        process may run on. The result is the same for any count.
    out : numpy.ndarray, optional, keyword-only
        Where to write the result (a memory-mapped file, or a slab of one), of exactly the
        output's shape and ``data``'s dtype, byte order included; any strides.

    Returns
    -------
    numpy.ndarray
        (N, C·b², H/b, W/b), of ``data``'s dtype, byte order included (``out`` itself
        when given).
        A new output of 32 MiB or more may take the memory of one let go before, and then
        does not own it (see geomcli.reuse).

    Raises
    ------
    GeomError
        If ``data`` is not rank 4, of another type or masked, H or W is not divisible by b,
        b is not an integer >= 1, ``mode`` is not exactly "DCR" or "CRD", ``threads`` is
        not an integer >= 1, ``out`` is not a writable, unmasked array of the output's shape
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
    array = _as_array(data, func)
    where = f"input shape {array.shape}"
    checked_mode = _as_mode(mode, func, where)
    to_space = func == "depth_to_space"
    output_shape = (depth_to_space_output_shape if to_space else space_to_depth_output_shape)(
        array.shape, blocksize, dtype=array.dtype
    )
    b = int(blocksize)
    workers = _as_threads(threads, func, where)
    if out is None:
        result = _new_output(output_shape, array.dtype, func, where)
    else:
        result = _as_out(out, output_shape, array.dtype, array, func, where)
    if result.size == 0:  # nothing to move; the 6-D views of a huge blocksize could not even be made
        return result
    if b > 1 and array.nbytes >= _BLOCK_BYTES and _plain_memory(array) and array.flags.c_contiguous:
        blocked = _depth_to_space_blocked if to_space else _space_to_depth_blocked
        return blocked(array, b, checked_mode, _threads_for(workers, array.nbytes), out=result)
    plain = _depth_to_space_plain if to_space else _space_to_depth_plain
    return plain(array, b, checked_mode, out=result)


def _space_to_depth_plain(array: np.ndarray, b: int, mode: Mode, *, out: np.ndarray | None = None) -> np.ndarray:
    """The defining transpose, in one copy: any dtype, any strides (and the oracle of the fast path)."""
    n, c, h, w = array.shape
    blocks = _split_axes(array, (n, c, h // b, b, w // b, b))
    result = np.empty((n, c * b * b, h // b, w // b), dtype=array.dtype) if out is None else out
    if mode == "DCR":
        # (n, c, h/b, bh, w/b, bw) -> (n, bh, bw, c, h/b, w/b)
        np.copyto(_split_axes(result, (n, b, b, c, h // b, w // b)), blocks.transpose(0, 3, 5, 1, 2, 4))
    else:
        # (n, c, h/b, bh, w/b, bw) -> (n, c, bh, bw, h/b, w/b)
        np.copyto(_split_axes(result, (n, c, b, b, h // b, w // b)), blocks.transpose(0, 1, 3, 5, 2, 4))
    return result


def _block_pieces(n: int, c: int, rows: int, row_bytes: int, block_bytes: int) -> list[tuple[int, slice, slice]]:
    """(batch, channels, rows) pieces of about ``block_bytes`` each, in memory order.

    A piece is whole channel planes when a plane fits in a block, else a band of rows of
    one channel; ``row_bytes`` is what one row of one channel costs.
    """
    plane = rows * row_bytes
    if plane <= block_bytes:
        return [(i, part, slice(None)) for i in range(n) for part in _split(c, -(-c * plane // block_bytes))]
    return [
        (i, slice(channel, channel + 1), part)
        for i in range(n)
        for channel in range(c)
        for part in _split(rows, -(-plane // block_bytes))
    ]


# numpy's unsigned integer of each item size, for moving raw bits (bool, bfloat16 and floats alike).
_UINTS: dict[int, np.dtype[Any]] = {size: np.dtype(f"u{size}") for size in (1, 2, 4, 8)}


def _space_to_depth_blocked(
    array: np.ndarray, b: int, mode: Mode, threads: int, block_bytes: int = _BLOCK_BYTES, *,
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
        target = _split_axes(result, (n, b, b, c, hb, wb))
    else:
        # (n, c, bh, bw, h/b, w/b) -> (n, bh, bw, c, h/b, w/b)
        target = _split_axes(result, (n, c, b, b, hb, wb)).transpose(0, 2, 3, 1, 4, 5)
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
    data: Any, blocksize: int, mode: Mode = "DCR", *, threads: int | None = None, out: np.ndarray | None = None
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
        does not own it (see geomcli.reuse).

    Raises
    ------
    GeomError
        If ``data`` is not rank 4, of another type or masked, its channels are not divisible
        by b², b is not an integer >= 1, ``mode`` is not exactly "DCR" or "CRD", ``threads``
        is not an integer >= 1, ``out`` is not a writable, unmasked array of the output's
        shape and dtype (byte order included) or overlaps ``data`` or itself, or the output
        cannot be allocated.

    Notes
    -----
    ONNX DepthToSpace (opset 13; the inverse of SpaceToDepth opset 28). In the same
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
    target = _split_axes(result, (n, c, h, b, w, b))
    if mode == "DCR":
        # (n, bh, bw, c, h, w) -> (n, c, h, bh, w, bw)
        np.copyto(target, _split_axes(array, (n, b, b, c, h, w)).transpose(0, 3, 4, 1, 5, 2))
    else:
        # (n, c, bh, bw, h, w) -> (n, c, h, bh, w, bw)
        np.copyto(target, _split_axes(array, (n, c, b, b, h, w)).transpose(0, 1, 4, 2, 5, 3))
    return result


def _depth_to_space_blocked(
    array: np.ndarray, b: int, mode: Mode, threads: int, block_bytes: int = _BLOCK_BYTES, *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`_depth_to_space_plain`'s result, one ~1 MiB piece of output at a time, on ``threads`` threads."""
    n, depth, h, w = array.shape
    c = depth // (b * b)
    result = np.empty((n, c, h * b, w * b), dtype=array.dtype) if out is None else out
    target = _split_axes(result, (n, c, h, b, w, b))  # (n, c, h, bh, w, bw)
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
