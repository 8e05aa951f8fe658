"""Argument validation and the one dtype policy of the rearranging operators and AffineGrid:
what each takes, the one-line GeomError for what it does not, and work shared over threads."""

from __future__ import annotations

import functools
import itertools
import math
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy as np

if TYPE_CHECKING:
    pass

from geomcli.constants import MAX_THREADS
from geomcli.cpus import available_cpus
from geomcli.errors import GeomError
from geomcli.ops import reuse

# The kernels' numbers as a caller's type checker sees them: numpy's scalars too (np.int64(2) from
# a shape's arithmetic, np.float32(0.5) from a float32 array, np.True_), which the checks take
Int: TypeAlias = int | np.integer[Any]
Ints: TypeAlias = Sequence[int | np.integer[Any]] | np.ndarray
Real: TypeAlias = float | np.floating[Any] | np.integer[Any]
Reals: TypeAlias = Sequence[float | np.floating[Any] | np.integer[Any]] | np.ndarray
Flag: TypeAlias = bool | int | np.bool_ | np.integer[Any]
Mode: TypeAlias = Literal["DCR", "CRD"]
Shape: TypeAlias = tuple[int, ...]

MODES = ("DCR", "CRD")
# The dtype policy (used by as_array): the types these operators take in ONNX (CenterCropPad-18,
# SpaceToDepth-28: "all tensor types" of that list, so no float8 or int4), by numpy's name in any
# byte order; strings by kind, str, bytes (ONNX keeps its strings as bytes) or numpy 2's StringDType
# (variable width: the plain paths only, never kept memory). Refused: float128
# and complex256, dates, durations, objects, records and raw bytes (void).
TENSOR_DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
    + ["float16", "float32", "float64", "bfloat16", "complex64", "complex128"]
)
TENSOR_TEXT = "bool, int8-int64, uint8-uint64, float16/32/64, bfloat16, complex64/128, str, bytes or StringDType"
# AffineGrid-20's T1: theta and the grid.
GRID_DTYPES = frozenset(["float16", "float32", "float64", "bfloat16"])
GRID_TEXT = "float16, float32, float64 or bfloat16"

# The fast paths work on ~1 MiB pieces: small enough to stay in cache while a piece is
# rearranged, big enough that Python's per-piece cost is lost in the copying.
BLOCK_BYTES = 1 << 20
# Outputs smaller than this are made on the calling thread: a thread hand-off costs more.
PARALLEL_BYTES = 4 << 20


# --- validation helpers -------------------------------------------------------------


def is_tensor_type(dtype: np.dtype) -> bool:
    """Whether the rearranging kernels take ``dtype``: see TENSOR_DTYPES; strings are numpy's
    fixed-width str and bytes, and numpy 2's variable-width StringDType (kind T)."""
    return dtype.name in TENSOR_DTYPES or dtype.kind in "UST"


def in_native_order(dtype: np.dtype) -> np.dtype:
    """``dtype`` in this machine's byte order (StringDType has none, and refuses to be asked)."""
    return dtype if dtype.kind == "T" else dtype.newbyteorder("=")


@functools.lru_cache(maxsize=64)
def takes(dtype: np.dtype, grid: bool) -> bool:
    # cached: numpy 2.4 takes ~2 µs for dtype.name, a fifth of a call on a tiny array
    return dtype.name in GRID_DTYPES if grid else is_tensor_type(dtype)


def refused_type(dtype: np.dtype, func: str, name: str, where: str, *, grid: bool = False) -> GeomError | None:
    """The error for a ``dtype`` the operator does not take, or None: a tensor type, or with
    ``grid`` a float type of AffineGrid. The one place of the dtype policy."""
    if takes(dtype, grid):
        return None
    types = GRID_TEXT if grid else TENSOR_TEXT
    return GeomError(f"{func}: {name} must be {types}, found dtype {dtype_text(dtype)} ({where})")


def is_masked(array: Any) -> bool:
    ma = sys.modules.get("numpy.ma")  # not imported: no masked array can exist
    return ma is not None and isinstance(array, ma.MaskedArray)


def to_array(value: Any, func: str, name: str) -> np.ndarray:
    """``value`` as an ndarray (an ndarray, memory maps included, as it is). What numpy raises, or
    the value's own ``__array__`` (a ragged list; a torch tensor that requires grad, whose
    RuntimeError says to detach it), is a GeomError that names the argument."""
    try:
        return np.asanyarray(value)
    except (ValueError, TypeError, RuntimeError) as error:
        raise GeomError(f"{func}: {name} is not an array ({one_line(str(error))})") from error


def as_array(data: Any, func: str, name: str = "input", *, grid: bool = False) -> np.ndarray:
    """The input as an ndarray of a type the operator takes (memory maps stay maps). A masked
    array is refused: its mask would be dropped, and the result hold what lies under it."""
    array = to_array(data, func, name)
    if is_masked(array):
        raise GeomError(
            f"{func}: {name} is a masked array, whose mask would be lost; give its .filled(value) "
            f"({name} shape {array.shape})"
        )
    refusal = refused_type(array.dtype, func, name, f"{name} shape {array.shape}", grid=grid)
    if refusal is not None:
        raise refusal
    return array


def shown(value: Any, limit: int | None = 80) -> str:
    """``repr(value)`` fit for a one-line message: a numpy number as the number it is (``0.0``,
    not ``np.float64(0.0)``), a multi-line repr (an array's, a masked array's) on one line, a
    long one cut short (``limit=None``: not), and an int of more digits than Python writes out
    (its ValueError; 4300 by default) by its size.

    >>> shown(10**5000)
    'an integer of 16610 bits'
    """
    if isinstance(value, np.generic) and value.dtype.kind in "biufc":
        value = value.item()
    if unwritable(value):
        return f"an integer of {abs(value).bit_length()} bits"
    return one_line(repr(value), limit)


def unwritable(value: Any) -> bool:
    """Whether ``value`` is an int of more decimal digits than Python writes (sys.set_int_max_str_digits):
    refused as an integer argument before any message would write it."""
    limit = sys.get_int_max_str_digits()
    return isinstance(value, int) and limit > 0 and value.bit_length() > 3 * limit and abs(value) >= 10**limit


def refuse_unwritable(values: Iterable[Any], name: str, func: str, where: str) -> None:
    for index, value in enumerate(values):
        if unwritable(value):
            raise GeomError(f"{func}: {name} is too big at index {index}: {shown(value)}{about(where)}")


def one_line(text: str, limit: int | None = None) -> str:
    if "\n" in text:
        text = " ".join(text.split())
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def about(where: str) -> str:
    """The end of a message: `` (input shape (1, 3, 4, 4))``, say; nothing for no ``where``."""
    return f" ({where})" if where else ""


def as_int(value: Any, name: str, func: str, where: str) -> int:
    """A Python int from an int or numpy integer; bools and floats are refused. ``where``, the
    shape of the input the value is for, ends the messages of these checks."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise GeomError(f"{func}: {name} must be an integer, found {shown(value)}{about(where)}")
    if unwritable(value):
        raise GeomError(f"{func}: {name} is too big: {shown(value)}{about(where)}")
    return int(value)


def as_ints(values: Any, name: str, func: str, where: str = "") -> Shape:
    """A tuple of ints from a sequence of ints or a 1-D integer array.

    A list or tuple of ints is taken as it is, so Python ints past int64 stay themselves (numpy
    would make them objects, or floats next to a negative value) for the callers' range checks.
    """
    if isinstance(values, (str, bytes)) or values is None:
        raise GeomError(f"{func}: {name} must be a 1-D list of integers, found {shown(values)}{about(where)}")
    if isinstance(values, (list, tuple)):
        for value in values:
            if isinstance(value, (bool, np.bool_)):
                raise GeomError(f"{func}: {name} must hold integers, found {shown(value)}{about(where)}")
        if all(isinstance(value, (int, np.integer)) for value in values):
            refuse_unwritable(values, name, func, where)
            return tuple(int(value) for value in values)
    try:
        array = np.asarray(values)
    except (ValueError, TypeError, RuntimeError) as error:
        raise GeomError(
            f"{func}: {name} must be a 1-D list of integers ({one_line(str(error))}){about(where)}"
        ) from error
    if array.ndim != 1:
        raise GeomError(f"{func}: {name} must be 1-D, found shape {array.shape}{about(where)}")
    if array.size == 0:
        return ()
    if array.dtype.kind not in "iu":
        raise GeomError(f"{func}: {name} must hold integers, found dtype {array.dtype}{about(where)}")
    return tuple(int(value) for value in array.tolist())


def as_shape(values: Any, name: str, func: str) -> Shape:
    """An array's shape: a 1-D list of integers >= 0."""
    shape = as_ints(values, name, func)
    if any(length < 0 for length in shape):
        raise GeomError(f"{func}: {name} must not hold negative lengths, found {shape}")
    return shape


def itemsize(dtype: Any, func: str, where: str, grid: bool) -> int:
    """The item size of ``dtype``, a type the operator takes: 1 for None, so that a check
    counts elements."""
    if dtype is None:
        return 1
    try:
        found = np.dtype(dtype)
    except (TypeError, ValueError) as error:
        raise GeomError(f"{func}: dtype {shown(dtype)} is not a numpy dtype ({where})") from error
    refusal = refused_type(found, func, "the output", where, grid=grid)
    if refusal is not None:
        raise refusal
    return int(found.itemsize)


def check_addressable(output: Shape, dtype: Any, func: str, where: str, *, grid: bool = False) -> None:
    """Refuse an output shape no numpy array can have, before anything is allocated.

    numpy refuses an array whose lengths other than 0, times the item size, pass the largest
    intp ("array is too big", "Maximum allowed dimension exceeded"): empty arrays included. With
    ``dtype`` None the lengths alone are counted (no dtype has items of less than a byte).
    """
    span = itemsize(dtype, func, where, grid)
    for length in output:
        span *= length or 1
    if span <= sys.maxsize:
        return
    if dtype is None:
        of_dtype, verb, amount, factors = "", "has", f"{shown(span, None)} elements", "its lengths other than 0"
    else:
        of_dtype, verb, amount = f" of {dtype_text(np.dtype(dtype))}", "would take", bytes_text(span)
        factors = "its lengths other than 0 times the item size"
    taken = f"counts as {amount}: {factors}" if 0 in output else f"{verb} {amount}"
    raise GeomError(
        f"{func}: the output shape {output}{of_dtype} {taken}; numpy addresses at most {sys.maxsize} ({where})"
    )


def bytes_text(count: int) -> str:
    """``count`` bytes, exact and in binary units: ``6917529027641081856 bytes (6.0 EiB)``."""
    if count < 1024:
        return f"{count} bytes"
    if count.bit_length() > 1000:  # past a float's range (and Python may not write its digits)
        return f"2**{count.bit_length() - 1} bytes or more"
    size = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"):
        size /= 1024
        if size < 1024:
            return f"{count} bytes ({size:.1f} {unit})"
    return f"{count} bytes ({size / 1024:.1f} YiB)"


def new_output(
    shape: Shape, dtype: np.dtype, func: str, where: str, *, zeroed: bool = False, value: np.ndarray | None = None
) -> np.ndarray:
    """``np.empty`` (``np.zeros`` if ``zeroed``, ``np.full`` with a ``value``) of an output whose
    shape passed check_addressable, made by geomcli.ops.reuse (a big empty one may be in memory kept
    from an earlier output); a MemoryError becomes a GeomError that names the bytes."""
    try:
        return reuse.new(shape, dtype, zeroed=zeroed, value=value)
    except MemoryError as error:
        raise GeomError(
            f"{func}: could not allocate {bytes_text(math.prod(shape) * dtype.itemsize)} "
            f"for the output of shape {shape} and dtype {dtype_text(dtype)} ({where})"
        ) from error


def as_mode(mode: Any, func: str, where: str) -> Mode:
    if not isinstance(mode, str) or mode not in MODES:
        raise GeomError(f"{func}: mode must be 'DCR' or 'CRD', found {shown(mode)} ({where})")
    return mode  # type: ignore[return-value]


def as_blocksize(blocksize: Any, func: str, where: str) -> int:
    size = as_int(blocksize, "blocksize", func, where)
    if size < 1:
        raise GeomError(f"{func}: blocksize must be at least 1, found {size} ({where})")
    return size


def normalize_axes(axes: Any, rank: int, input_shape: Shape, func: str) -> Shape:
    found = as_ints(axes, "axes", func, f"input shape {input_shape}")
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


def as_out(
    out: Any, shape: Shape, dtype: np.dtype, data: np.ndarray, func: str, where: str, name: str = "the input",
    others: Sequence[tuple[str, np.ndarray]] = (),
) -> np.ndarray:
    """``out`` checked to take a result of exactly ``shape`` and ``dtype`` without touching ``data``
    (nor the ``others``, by name: a grid, say).

    The byte order must match too: the fast paths move raw bytes into ``out`` (the pairs of
    _space_to_depth_blocked), and a result's byte order is the kernel's one rule, not the caller's.
    """
    if not isinstance(out, np.ndarray):
        raise GeomError(f"{func}: out must be a numpy array, found {type(out).__name__} ({where})")
    if out.shape != shape or out.dtype != dtype:
        same_type = in_native_order(out.dtype) == in_native_order(dtype)
        order = "the byte order must match too; " if same_type else ""
        raise GeomError(
            f"{func}: out must have shape {shape} and dtype {dtype_text(dtype)}, "
            f"found shape {out.shape} and dtype {dtype_text(out.dtype)} ({order}{where})"
        )
    if not out.flags.writeable:
        raise GeomError(f"{func}: out is read-only ({where})")
    if is_masked(out):
        raise GeomError(f"{func}: out is a masked array, whose mask would not follow the values ({where})")
    if overlaps_itself(out):
        raise GeomError(f"{func}: out has elements that share memory (strides {out.strides}; {where})")
    for input_name, array in ((name, data), *others):
        found = overlap(out, array, input_name)
        if found is not None:
            raise GeomError(f"{func}: out {found}; give a separate array ({where})")
    return out


def overlaps_itself(array: np.ndarray) -> bool:
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
OVERLAP_WORK = 100_000


def overlap(out: np.ndarray, data: np.ndarray, name: str) -> str | None:
    """How ``out`` meets ``data``, for the message, or None if they share no byte.

    Exact where their memory bounds meet, so an ``out`` that lies between the input's items (every
    other item of one buffer) is taken; refused when the proof would cost more than OVERLAP_WORK.
    """
    if not np.may_share_memory(out, data):
        return None
    try:
        # numpy's stubs name only -1 and 0, its two special values; any bound is documented
        shared = np.shares_memory(out, data, max_work=OVERLAP_WORK)  # type: ignore[arg-type]
        return f"overlaps {name}" if shared else None
    except np.exceptions.TooHardError:
        return f"may overlap {name}: their strides are too costly to tell apart"


def dtype_text(dtype: np.dtype) -> str:
    """How a message names ``dtype``: numpy's name, with the byte order where it is not native
    (``>f4``); ml_dtypes' bfloat16 as ``>bfloat16`` rather than numpy's ``>V2``."""
    if dtype.name == "bfloat16" and not dtype.isnative:
        return f"{dtype.byteorder}bfloat16"
    return str(dtype)


def split_axes(array: np.ndarray, shape: Shape) -> np.ndarray:
    """``array.reshape(shape)`` where that only splits axes: always a view, never a copy, so
    writes through it land in ``array`` whatever its strides (a memory map's slab, say)."""
    return array.reshape(shape, copy=False)


def as_threads(threads: Any, func: str, where: str) -> int:
    """The number of threads to use: ``None`` means every CPU this process may run on; at most
    MAX_THREADS, as --threads (the kernels start up to one a quarter MiB: 487 for a 512 MiB crop)."""
    if threads is None:
        return min(available_cpus(), MAX_THREADS)
    count = as_int(threads, "threads", func, where)
    if not 1 <= count <= MAX_THREADS:
        raise GeomError(f"{func}: threads must be 1 to {MAX_THREADS}, found {shown(count)} ({where})")
    return count


# --- pieces of work on several threads (geomcli.cpus.share) -----------------------------
# Results are identical for any thread count (a grid's sum of two NaNs aside: see
# _affine_grid_rows).


def threads_for(threads: int, nbytes: int) -> int:
    """How many of ``threads`` to start for ``nbytes`` of work: one below PARALLEL_BYTES, and at
    most one a quarter of it (1 MiB): thousands asked for would spend their time starting and
    taking turns at the pieces (8000 threads on a 7 MiB crop: 12 s, against 7 ms on two)."""
    return 1 if nbytes < PARALLEL_BYTES else min(threads, 4 * nbytes // PARALLEL_BYTES)


def split(length: int, parts: int) -> list[slice]:
    """``range(length)`` cut into at most ``parts`` nearly equal, non-empty slices."""
    parts = max(1, min(parts, length))
    bounds = [length * i // parts for i in range(parts + 1)]
    return [slice(start, stop) for start, stop in itertools.pairwise(bounds)]

def plain_memory(array: np.ndarray) -> bool:
    """Whether the fast paths may take ``array``: an in-memory ndarray of a non-string type.

    Memory maps and other subclasses, strings and anything unusual take the plain path.
    """
    return type(array) is np.ndarray and array.dtype.kind not in "OSUT"
