"""ONNX Resize (opset 19): nearest, linear and cubic resampling of any axes of a tensor.

Resize is separable: per resized axis, each output index reads a few input indices (its taps)
with weights. They are worked out once per axis (a plan), in exact rational arithmetic where a
decision is taken (which tap is nearest, whether a point lies outside the roi), then applied
axis by axis. Nearest is a gather. The weighted passes of one or two axes of the common dtypes
go to the compiled kernel (:mod:`geomcli.ops._fast`), in axis order and in tap order as the
reference sums them. The rest (complex, float16, bfloat16, byte-swapped data, three axes or
more, and everything where the kernel is not built) take the numpy path, the shrinking axes
first: products of small dense matrices (runs of an axis's weights, "bands") with cache-sized
pieces of the data in float64; two passes whose second axis follows the first run together, a
run of the first one's outputs at a time, with no intermediate array.
``geomcli.ops.reference.resize`` is the same in its readable form, and the tests hold this
module to it.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from types import ModuleType
from typing import Any, Literal, TypeAlias

import numpy as np

from geomcli.cpus import share
from geomcli.errors import GeomError
from geomcli.ops import _numeric
from geomcli.ops._checks import (
    Flag,
    Int,
    Ints,
    Real,
    Reals,
    as_out,
    as_threads,
    bytes_text,
    new_output,
    refuse_unwritable,
    shown,
    to_array,
)

_compiled: ModuleType | None
try:
    from geomcli.ops._fast import _resize as _compiled
except ImportError:  # not built: a checkout that was never installed, or no C compiler at install time
    _compiled = None

__all__ = ["check_resize_arguments", "check_resize_mode", "resize", "resize_changed_axes", "resize_coordinate_map",
           "resize_output_shape", "resize_window"]

Mode: TypeAlias = Literal["nearest", "linear", "cubic"]
Transform: TypeAlias = Literal[
    "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"
]
NearestMode: TypeAlias = Literal["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
Policy: TypeAlias = Literal["stretch", "not_larger", "not_smaller"]
Shape: TypeAlias = tuple[int, ...]

_FUNC = "resize"
_MODES = ("nearest", "linear", "cubic")
_TRANSFORMS = (
    "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"
)
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")
# Resize-19's T1 is every tensor type; strings by kind (str, bytes, StringDType).
_NUMERIC = frozenset(
    ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
    + ["float16", "float32", "float64", "bfloat16", "complex64", "complex128"]
)
_TYPES_TEXT = "bool, int8-int64, uint8-uint64, float16/32/64, bfloat16, complex64/128, str, bytes or StringDType"
_HALF = Fraction(1, 2)
# Beyond this the per-axis index arithmetic leaves int64 for Python ints (object arrays).
_INT64_SAFE = 1 << 62


# --- validation -----------------------------------------------------------------------------


def _where(shape: Shape) -> str:
    return f"input shape {shape}"


def _choice(value: Any, name: str, choices: tuple[str, ...], where: str) -> str:
    if not isinstance(value, str) or value not in choices:
        raise GeomError(f"{_FUNC}: {name} must be one of {', '.join(choices)}; found {shown(value)} ({where})")
    return value


def _flag(value: Any, name: str, where: str) -> bool:
    # ONNX keeps these as int attributes: 0 and 1 are taken beside False and True
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and int(value) in (0, 1)):
        return bool(value)
    raise GeomError(f"{_FUNC}: {name} must be 0, 1, False or True; found {shown(value)} ({where})")


def _float32(value: int | float | np.integer | np.floating) -> np.float32:
    """``value`` as a float32, infinite past its range: an int past a float64's too (10**400)."""
    with np.errstate(over="ignore"):
        try:
            return np.float32(value)
        except OverflowError:
            return np.float32(math.inf if value > 0 else -math.inf)


def _float32_attribute(value: Any, name: str, where: str, *, finite: bool) -> float:
    """An ONNX float attribute: a real number, as the float32 it is stored as."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise GeomError(f"{_FUNC}: {name} must be a real number, found {shown(value)} ({where})")
    stored = float(_float32(value))
    if finite and not math.isfinite(stored):
        raise GeomError(f"{_FUNC}: {name} must be finite in float32, found {shown(value)} ({where})")
    return stored


def _as_data(data: Any) -> np.ndarray:
    masked = sys.modules.get("numpy.ma")
    if masked is not None and isinstance(data, masked.MaskedArray):
        raise GeomError(f"{_FUNC}: data is a masked array, whose mask would be lost; give its .filled(value) "
                        f"(input shape {data.shape})")
    # a plain ndarray view of subclasses too (memory maps, matrices)
    array = np.asarray(to_array(data, _FUNC, "data"))
    dtype = array.dtype
    if not (dtype.kind == "b" or dtype.kind in "UST" or dtype.name in _NUMERIC):
        raise GeomError(f"{_FUNC}: data must be {_TYPES_TEXT}; found dtype {dtype} ({_where(array.shape)})")
    return array


def _array_like(values: Any, name: str) -> Any:
    """An array-like that is neither a sequence nor an ndarray (a torch tensor, say) as an
    ndarray, as the other kernels take their lists; anything else as it is."""
    if values is None or isinstance(values, (Sequence, np.ndarray)) or not hasattr(values, "__array__"):
        return values
    return to_array(values, _FUNC, name)


def _as_list(values: Any, name: str, where: str, what: str = "numbers") -> list[Any]:
    """The values of a 1-D sequence or array of numbers (each checked by the caller)."""
    values = _array_like(values, name)
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise GeomError(f"{_FUNC}: {name} must be a 1-D list of {what}, found {shown(values)} ({where})")
    array = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if array.ndim != 1:
        raise GeomError(f"{_FUNC}: {name} must be 1-D, found shape {array.shape} ({where})")
    # (a list of Python ints past 64 bits makes an object array: numbers still, refused by the range checks)
    big_ints = array.dtype.kind == "O" and all(type(value) is int for value in array)
    if array.size and array.dtype.kind not in "iuf" and not big_ints:
        raise GeomError(f"{_FUNC}: {name} must hold numbers, found dtype {array.dtype} ({where})")
    # A list keeps its Python ints, however big, for the range checks; an array its numpy
    # scalars, whose precision _decimal reads.
    refuse_unwritable(values, name, _FUNC, where)
    return list(values)


def _as_axes(axes: Any, rank: int, where: str) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(rank))
    found = _as_list(axes, "axes", where, "integers")
    normalised = []
    for value in found:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise GeomError(f"{_FUNC}: axes must hold integers, found {shown(value)} ({where})")
        if not -rank <= value < rank:
            raise GeomError(f"{_FUNC}: axes must be in [{-rank}, {rank - 1}], found {value} ({where})")
        axis = int(value) % rank
        if axis in normalised:
            raise GeomError(f"{_FUNC}: axes repeats axis {axis} (axes {list(found)}, {where})")
        normalised.append(axis)
    return tuple(normalised)


def _decimal(value: float | np.floating[Any]) -> Fraction:
    """The number a float stands for: the shortest decimal that reads back as it (in its own
    precision), exactly. float32 0.7 is 7/10, not 0.699999988079071."""
    return Fraction(np.format_float_positional(value, unique=True, trim="-"))


def _as_scales(scales: Any, where: str) -> list[Fraction]:
    """Scales as ONNX holds them, float32, each read as its decimal (see _decimal)."""
    found = _as_list(scales, "scales", where)
    exact = []
    for index, value in enumerate(found):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise GeomError(f"{_FUNC}: scales must hold numbers, found {shown(value)} at index {index} ({where})")
        stored = _float32(value)
        if not (np.isfinite(stored) and stored > 0):
            raise GeomError(
                f"{_FUNC}: scales must be > 0 and finite in float32, found {shown(value)} at index {index} ({where})"
            )
        exact.append(_decimal(stored))
    return exact


def _as_sizes(sizes: Any, where: str) -> list[int]:
    found = _as_list(sizes, "sizes", where, "integers")
    for index, value in enumerate(found):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise GeomError(f"{_FUNC}: sizes must hold integers, found {shown(value)} at index {index} ({where})")
        if value < 1:
            raise GeomError(f"{_FUNC}: sizes must be >= 1, found {value} at index {index} ({where})")
    return [int(value) for value in found]


def _as_shape(data_shape: Any) -> Shape:
    if isinstance(data_shape, (str, bytes)) or not isinstance(data_shape, (Sequence, np.ndarray)):
        raise GeomError(f"{_FUNC}: data_shape must be a 1-D list of integers, found {shown(data_shape)}")
    shape = []
    for value in np.asarray(data_shape).tolist() if isinstance(data_shape, np.ndarray) else data_shape:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
            raise GeomError(f"{_FUNC}: data_shape must hold integers >= 0, found {shown(value)}")
        shape.append(int(value))
    return tuple(shape)


def _is_empty(values: Any) -> bool:
    if isinstance(values, np.ndarray):
        return values.size == 0
    return isinstance(values, Sequence) and not isinstance(values, (str, bytes)) and len(values) == 0


def _given(values: Any, other: Any) -> bool:
    """Whether an optional input is given. As in ONNX graphs, an empty list beside a given other
    input stands for an absent one."""
    return values is not None and not (other is not None and _is_empty(values))


@dataclass(frozen=True)
class _Sizing:
    """The resized axes in the order given, and per axis its output length and the scale of the
    coordinate formulas (exact; its product with the input length is ``output_width``)."""

    axes: tuple[int, ...]
    output_shape: Shape
    scales: tuple[Fraction, ...]


def _sizing(shape: Shape, scales: Any, sizes: Any, axes: Any, policy: Any) -> _Sizing:
    where = _where(shape)
    policy = _choice(policy, "keep_aspect_ratio_policy", _POLICIES, where)
    scales, sizes = _array_like(scales, "scales"), _array_like(sizes, "sizes")
    has_scales, has_sizes = _given(scales, sizes), _given(sizes, scales)
    if has_scales and has_sizes:
        raise GeomError(f"{_FUNC}: give scales or sizes, not both ({where})")
    if not (has_scales or has_sizes):
        raise GeomError(f"{_FUNC}: give scales or sizes, found neither ({where})")
    name = "scales" if has_scales else "sizes"
    factors = _as_scales(scales, where) if has_scales else []
    lengths = [] if has_scales else _as_sizes(sizes, where)
    count = len(factors) + len(lengths)
    listed = _as_axes(axes, len(shape), where)
    if count != len(listed):
        target = f"axes {list(listed)}" if axes is not None else f"rank {len(shape)}"
        raise GeomError(f"{_FUNC}: {name} has {count} value{'' if count == 1 else 's'} for {target} ({where})")
    output = list(shape)
    if has_scales:
        for axis, factor in zip(listed, factors):
            output[axis] = math.floor(shape[axis] * factor)
        return _Sizing(listed, tuple(output), tuple(factors))
    for axis, size in zip(listed, lengths):
        if shape[axis] == 0:
            raise GeomError(f"{_FUNC}: cannot resize axis {axis} of length 0 to {size} ({where})")
    ratios = [Fraction(size, shape[axis]) for axis, size in zip(listed, lengths)]
    if policy != "stretch" and ratios:
        common = min(ratios) if policy == "not_larger" else max(ratios)
        ratios = [common] * len(ratios)
        for axis in listed:
            # round_int of the spec: halfway cases up, exactly
            output[axis] = math.floor(common * shape[axis] + _HALF)
    else:
        for axis, size in zip(listed, lengths):
            output[axis] = size
    return _Sizing(listed, tuple(output), tuple(ratios))


def resize_output_shape(
    data_shape: Sequence[int] | np.ndarray,
    scales: Sequence[float] | np.ndarray | None = None,
    sizes: Sequence[int] | np.ndarray | None = None,
    *,
    axes: Sequence[int] | np.ndarray | None = None,
    keep_aspect_ratio_policy: Policy = "stretch",
) -> Shape:
    """The shape :func:`resize` gives an input of shape ``data_shape``, without data.

    Parameters
    ----------
    data_shape : sequence of int
        The input's shape, every length >= 0.
    scales, sizes, axes, keep_aspect_ratio_policy
        As for :func:`resize`: exactly one of ``scales`` and ``sizes``.

    Returns
    -------
    tuple of int
        The output shape; the axes not listed keep their length.

    Raises
    ------
    GeomError
        For the shape and sizing errors of :func:`resize`, or a ``data_shape`` that is
        not a list of integers >= 0.

    Examples
    --------
    >>> resize_output_shape((1, 3, 300, 451), sizes=[256, 256], axes=[2, 3],
    ...                     keep_aspect_ratio_policy="not_smaller")
    (1, 3, 256, 385)
    >>> resize_output_shape((10,), scales=[0.7])
    (7,)
    >>> resize_output_shape((192, 195), sizes=[224, 224], keep_aspect_ratio_policy="not_smaller")
    (224, 228)
    """
    shape = _as_shape(data_shape)
    return _sizing(shape, scales, sizes, axes, keep_aspect_ratio_policy).output_shape


def _as_roi(roi: Any, sizing: _Sizing, shape: Shape, needed: bool) -> list[tuple[Fraction, Fraction]] | None:
    """(start, end) per resized axis, exactly, or None when no roi is given."""
    where = _where(shape)
    roi = _array_like(roi, "roi")
    if roi is None or _is_empty(roi):
        if needed:
            raise GeomError(
                f"{_FUNC}: coordinate_transformation_mode tf_crop_and_resize needs roi, found none ({where})"
            )
        return None
    found = _as_list(roi, "roi", where)
    count = len(sizing.axes)
    if len(found) != 2 * count:
        raise GeomError(
            f"{_FUNC}: roi must hold {2 * count} values (the starts, then the ends, of axes {list(sizing.axes)}), "
            f"found {len(found)} ({where})"
        )
    exact = []
    for index, value in enumerate(found):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise GeomError(f"{_FUNC}: roi must hold numbers, found {shown(value)} at index {index} ({where})")
        if not isinstance(value, (int, np.integer)) and not np.isfinite(value):
            raise GeomError(f"{_FUNC}: roi must hold finite numbers, found {shown(value)} at index {index} ({where})")
        exact.append(Fraction(int(value)) if isinstance(value, (int, np.integer)) else _decimal(value))
    return [(exact[i], exact[count + i]) for i in range(count)]


# --- per-axis plans -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """What one axis does: output index i reads ``taps[i, k]`` with weight ``weights[i, k]``
    (nearest: one tap, no weights), or the extrapolation value where ``outside[i]``."""

    axis: int
    in_len: int
    out_len: int
    taps: np.ndarray  # (out_len, k) intp, clamped into [0, in_len)
    weights: np.ndarray | None  # (out_len, k) float64
    outside: np.ndarray | None  # (out_len,) bool, tf_crop_and_resize only

    def is_identity(self) -> bool:
        if self.out_len != self.in_len or (self.outside is not None and self.outside.any()):
            return False
        own = np.arange(self.out_len)[:, None] == self.taps
        if self.weights is None:
            return bool(own.all())
        return bool(np.all(np.where(own, self.weights, 0.0).sum(axis=1) == 1.0)
                    and np.all(self.weights[~own] == 0.0))


def _line(transform: str, in_len: int, out_len: int, scale: Fraction,
          roi: tuple[Fraction, Fraction] | None) -> tuple[Fraction, Fraction]:
    """(a, b) with ``x_original = a * x_resized + b``: every coordinate transformation is affine."""
    if transform in ("half_pixel", "pytorch_half_pixel"):
        if transform == "pytorch_half_pixel" and out_len <= 1:
            return Fraction(0), Fraction(0)
        return 1 / scale, _HALF / scale - _HALF
    if transform == "half_pixel_symmetric":
        # offset = center * (1 - adjustment), adjustment = output_width_int / output_width; an
        # empty axis has no width to adjust to (nor an output): no offset
        width = scale * in_len
        offset = Fraction(in_len, 2) * (1 - out_len / width) if width else Fraction(0)
        return 1 / scale, offset + _HALF / scale - _HALF
    if transform == "asymmetric":
        return 1 / scale, Fraction(0)
    if transform == "align_corners":
        # length_resized is the output's integer length (see resize's Notes)
        if out_len <= 1:
            return Fraction(0), Fraction(0)
        return Fraction(in_len - 1, out_len - 1), Fraction(0)
    start, end = roi if roi is not None else (Fraction(0), Fraction(1))
    if out_len <= 1:
        return Fraction(0), (start + end) * (in_len - 1) / 2
    return (end - start) * (in_len - 1) / (out_len - 1), start * (in_len - 1)


def _exact_coordinates(a: Fraction, b: Fraction, out_len: int) -> tuple[np.ndarray, np.ndarray, int]:
    """``(floor, rest, den)`` with ``a*i + b = floor[i] + rest[i] / den`` and
    ``0 <= rest[i] < den`` for every output index i: integers, exact."""
    den = math.lcm(a.denominator, b.denominator)
    slope, offset = int(a * den), int(b * den)
    if abs(slope) * max(out_len - 1, 0) + abs(offset) < _INT64_SAFE and den < _INT64_SAFE:
        numer = slope * np.arange(out_len, dtype=np.int64) + offset
    else:
        # a tiny scale or a roi of many digits: Python ints, slower but still exact
        numer = np.array([slope * i + offset for i in range(out_len)], dtype=object)
    floor = numer // den
    return floor, numer - floor * den, den


def _keys(distance: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic kernel (Keys 1981, eq. 4) with coefficient ``a``, of |distance|."""
    d = np.abs(distance)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _plan(axis: int, in_len: int, out_len: int, scale: Fraction, roi: tuple[Fraction, Fraction] | None, *,
          mode: str, transform: str, nearest_mode: str, cubic_coeff_a: float, exclude_outside: bool,
          antialias: bool) -> _Plan:
    a, b = _line(transform, in_len, out_len, scale, roi)
    floor, rest, den = _exact_coordinates(a, b, out_len)
    outside = None
    if transform == "tf_crop_and_resize":
        # x < 0 or x > in_len - 1, compared exactly
        outside = np.asarray((floor < 0) | (floor > in_len - 1) | ((floor == in_len - 1) & (rest > 0)), dtype=bool)
    last = in_len - 1
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            index = floor + (2 * rest > den)
        elif nearest_mode == "round_prefer_ceil":
            index = floor + (2 * rest >= den)
        elif nearest_mode == "floor":
            index = floor
        else:
            index = floor + (rest > 0)
        taps = np.minimum(np.maximum(index, 0), last).astype(np.intp)
        return _Plan(axis, in_len, out_len, taps[:, None], None, outside)
    if den < 1 << 53:
        frac = rest.astype(np.float64) / float(den)
    else:
        frac = np.array([r / den for r in rest.tolist()], dtype=np.float64)
    stretch = min(scale, Fraction(1)) if antialias else Fraction(1)
    support = 1 if mode == "linear" else 2
    half_width = math.ceil(support / stretch)
    if out_len == 0:
        # antialias widens the taps to support / scale a side, bounded by the input's length (an
        # output of 1 or more has scale >= 1 / in_len) but for an empty output: at scale 1e-20,
        # numpy was asked for 2e20 ("Maximum allowed size exceeded"), at 1e-12 a MemoryError
        return _Plan(axis, in_len, 0, np.zeros((0, 1), np.intp), np.zeros((0, 1)), outside)
    # taps floor(x) - half_width + 1 .. floor(x) + half_width cover every j with
    # |j - x| * stretch < support
    offsets = np.arange(1 - half_width, half_width + 1)
    # a point far outside (which tf_crop_and_resize extrapolates) gets taps near the input
    start = np.minimum(np.maximum(floor, -2 * half_width), in_len + 2 * half_width).astype(np.int64)
    taps = start[:, None] + offsets[None, :]
    distance = (offsets[None, :] - frac[:, None]) * float(stretch)
    weights = np.maximum(1.0 - np.abs(distance), 0.0) if mode == "linear" else _keys(distance, cubic_coeff_a)
    if exclude_outside:
        weights[(taps < 0) | (taps > last)] = 0.0
    if antialias or exclude_outside:
        total = weights.sum(axis=1, keepdims=True)
        # a point whose taps all weigh 0 keeps its zero weights (it reads 0) rather than 0/0
        np.divide(weights, total, out=weights, where=total != 0)
    if in_len == 1:
        # every tap reads the one pixel, and the weights sum to 1 exactly (0 where exclude_outside
        # left none): summed in float64 they missed it by an ulp or two, so a 1-pixel axis
        # upscaled came out uneven ([1.1] to 3, cubic: 1.0999999999999994, 1.1, 1.1000000000000003)
        whole = np.where(weights.sum(axis=1, keepdims=True) != 0, 1.0, 0.0)
        return _Plan(axis, in_len, out_len, np.zeros((out_len, 1), np.intp), whole, outside)
    clamped = np.clip(taps, 0, last).astype(np.intp)
    return _Plan(axis, in_len, out_len, clamped, weights, outside)


# --- applying the plans ----------------------------------------------------------------------


def _gather(values: np.ndarray, plan: _Plan, into: np.ndarray | None = None) -> np.ndarray:
    taps = plan.taps[:, 0]
    if not values.flags.c_contiguous and len(taps) < plan.in_len:
        # np.take copies data that is not C-contiguous whole first (a memory map's slice, a
        # broadcast view: 37 GiB for sizes [10, 10] of a (100000, 100000) one); an index copies
        # only what it takes
        taken = values[(slice(None),) * plan.axis + (taps,)]
        if into is None:
            return taken
        np.copyto(into, taken)
        return into
    if into is None:
        return np.take(values, taps, axis=plan.axis)
    # "clip" changes no index (every tap is inside), and writes into ``into`` without the
    # output-sized buffer that "raise" makes
    return np.take(values, taps, axis=plan.axis, out=into, mode="clip")


# The weighted passes work in pieces of about this many float64 values (1 MiB): a piece is
# converted and weighed while it stays in cache.
_PIECE = 1 << 17
# Each matrix product is at most this many multiply-adds: cache-sized, and small enough that
# OpenBLAS runs it on the calling thread (from about twice this it starts threads of its own,
# which spin, and on a busy machine wait a scheduler tick each: 100x slower). Our threads share
# the products instead.
_PRODUCT = 1 << 18
# An axis followed by fewer values than this (an image's channels) is weighed as a last axis,
# one value after it at a time; with more, as rows of many values.
_NARROW = 16


@dataclass(frozen=True)
class _Band:
    """Outputs ``[start, stop)`` read inputs ``[low, high)`` through the dense ``weights``
    (stop - start, high - low): a run of an axis's outputs as one small matrix."""

    start: int
    stop: int
    low: int
    high: int
    weights: np.ndarray


def _bands(plan: _Plan, rows: int) -> list[_Band]:
    """The plan's weights in runs of ``rows`` outputs (taps clamped to an edge add up)."""
    assert plan.weights is not None
    taps = plan.taps
    starts = np.arange(0, plan.out_len, rows)
    lows = np.minimum.reduceat(taps.min(axis=1), starts)
    highs = np.maximum.reduceat(taps.max(axis=1), starts) + 1
    # every band's matrix in one array, filled by one np.add.at (per-band calls were most of the
    # planning time): an output's weights add up in tap order, as they would band by band
    band = np.arange(plan.out_len) // rows
    dense = np.zeros((len(starts), rows, int((highs - lows).max())))
    np.add.at(dense, (band[:, None], (np.arange(plan.out_len) % rows)[:, None], taps - lows[band][:, None]),
              plan.weights)
    found = []
    for number, (start, low, high) in enumerate(zip(starts.tolist(), lows.tolist(), highs.tolist())):
        stop = min(start + rows, plan.out_len)
        found.append(_Band(start, stop, low, high, np.ascontiguousarray(dense[number, :stop - start, :high - low])))
    return found


def _band_rows(plan: _Plan, last: bool) -> int:
    """Outputs per band. A band of b outputs spans about b / ratio + k inputs for k taps: a
    longer band multiplies more zeros, a shorter one makes products too thin to be fast, the
    more so along a last axis (where a band's outputs are a product's narrow side). A band's
    matrix stays within a piece (a steep antialiased shrink has many taps)."""
    taps = int(plan.taps.shape[1])
    ratio = plan.out_len / plan.in_len
    rows = max(16, min(64, round(8 * taps * ratio))) if last else max(8, min(64, round(2 * taps * ratio)))
    while rows > 1 and rows * (rows / ratio + taps) > _PIECE:
        rows //= 2
    return rows


class _Scratch:
    """One worker's buffers, reused piece after piece: new memory costs the OS's zeroing of its
    pages first, which is more than the work on a piece."""

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype
        self.buffers: dict[str, np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        size = math.prod(shape)
        buffer = self.buffers.get(name)
        if buffer is None or buffer.size < size:
            buffer = self.buffers[name] = np.empty(max(size, 1), dtype=self.dtype)
        return buffer[:size].reshape(shape)


Job: TypeAlias = "Callable[[_Scratch], None]"


def _matmul(left: np.ndarray, right: np.ndarray, out: np.ndarray) -> None:
    """``out = left @ right``, split into products of at most _PRODUCT multiply-adds (by rows of
    ``left``, else by columns of ``right``) so that none starts OpenBLAS's threads."""
    rows, inner = left.shape
    columns = right.shape[1]
    if rows * inner * columns <= _PRODUCT:
        np.matmul(left, right, out=out)
    elif rows >= columns:
        step = max(1, _PRODUCT // (inner * columns))
        for first in range(0, rows, step):
            np.matmul(left[first:first + step], right, out=out[first:first + step])
    else:
        step = max(1, _PRODUCT // (inner * rows))
        for first in range(0, columns, step):
            np.matmul(left, right[:, first:first + step], out=out[:, first:first + step])


def _run(jobs: list[Job], work: np.dtype, values: int, threads: int) -> None:
    """Every job, on this thread or shared with the others (geomcli.cpus.share: numpy's products
    and copies and the compiled passes let go of the GIL), each thread with its own scratch.
    Threads only for ``values`` (the output's, in the working dtype) of 4 MiB or more: below,
    measured, one thread is faster. (A thread pool made per call, each thread taking the next
    job, was measured slower: float32 (1, 3, 1024, 1024) -> 512² 3.5 ms on two threads, against
    1.6 ms shared so and 3.2 ms on one.)"""
    workers = min(threads, len(jobs)) if values * work.itemsize >= 4 * _PIECE * 8 else 1
    mine = threading.local()

    def do(job: Job) -> None:
        scratch = getattr(mine, "scratch", None)
        if scratch is None:
            scratch = mine.scratch = _Scratch(work)
        with _quiet():
            job(scratch)

    share(jobs, do, workers)


def _quiet() -> Any:
    """NaN and inf in the data are values like any other (they spread through a product as the
    formula says): no floating-point warnings for them. Per thread: numpy's error state is."""
    return np.errstate(invalid="ignore", over="ignore", divide="ignore")


def _wide_jobs(source: np.ndarray, plan: _Plan, target: np.ndarray, final: bool) -> list[Job]:
    """The pass of an axis with many values after it, ``source`` (p, n, q) -> ``target``
    (p, m, q): per band ``weights @ source[i, low:high, columns]``, in float64."""
    bands = _bands(plan, _band_rows(plan, last=False))
    width = source.shape[2]
    columns = max(1, min(width, _PRODUCT // max(band.weights.size for band in bands)))
    # straight into the target when it is the working dtype and a product fills whole rows
    direct = not final and columns == width
    groups: list[list[_Band]] = []  # runs of bands whose inputs, converted once, fit a piece
    for band in bands:
        if groups and (band.high - groups[-1][0].low) * columns <= _PIECE:
            groups[-1].append(band)
        else:
            groups.append([band])

    def job(i: int, first: int, last: int, group: list[_Band]) -> Job:
        low, high = group[0].low, max(band.high for band in group)
        start, stop = group[0].start, group[-1].stop

        def run(scratch: _Scratch) -> None:
            if source.dtype == scratch.dtype:
                piece = source[i, low:high, first:last]
            else:
                piece = scratch.get("piece", (high - low, last - first))
                np.copyto(piece, source[i, low:high, first:last], casting="unsafe")
            result = target[i, start:stop] if direct else scratch.get("result", (stop - start, last - first))
            for band in group:
                _matmul(band.weights, piece[band.low - low:band.high - low],
                        out=result[band.start - start:band.stop - start])
            if not direct:
                target[i, start:stop, first:last] = _numeric.to_dtype(result, target.dtype) if final else result

        return run

    return [job(i, first, min(first + columns, width), group)
            for i in range(source.shape[0]) for first in range(0, width, columns) for group in groups]


def _last_jobs(source: np.ndarray, plan: _Plan, target: np.ndarray, final: bool) -> list[Job]:
    """The pass of a last axis, ``source`` (p, n) -> ``target`` (p, m) (either may be a strided
    view): per band ``source[rows, low:high] @ weights.T``, in float64, a few hundred rows at a
    time (their inputs stay in cache)."""
    bands = _bands(plan, _band_rows(plan, last=True))
    transposed = [np.ascontiguousarray(band.weights.T) for band in bands]
    rows = max(1, min(_PRODUCT // max(band.weights.size for band in bands), 2 * _PIECE // plan.in_len))
    # a product needs rows of adjacent values: other views are copied, piece by piece
    adjacent = source.strides[1] == source.itemsize

    def job(first: int, last: int) -> Job:
        def run(scratch: _Scratch) -> None:
            if source.dtype == scratch.dtype and adjacent:
                piece = source[first:last]
            else:
                piece = scratch.get("piece", (last - first, plan.in_len))
                np.copyto(piece, source[first:last], casting="unsafe")
            result = scratch.get("result", (last - first, plan.out_len))
            for band, weights in zip(bands, transposed):
                _matmul(piece[:, band.low:band.high], weights, out=result[:, band.start:band.stop])
            target[first:last] = _numeric.to_dtype(result, target.dtype) if final else result

        return run

    return [job(first, min(first + rows, source.shape[0])) for first in range(0, source.shape[0], rows)]


def _weigh(values: np.ndarray, plan: _Plan, target: np.ndarray, final: bool, threads: int) -> None:
    """One axis's weighted pass from ``values`` into ``target`` (of the pass's output shape):
    ``final``, converted to target's dtype piece by piece; else target is the working dtype."""
    before = math.prod(values.shape[: plan.axis])
    after = math.prod(values.shape[plan.axis + 1:])
    work = _numeric.working_dtype(values.dtype)
    source = values.reshape(before, plan.in_len, after)
    out = target.reshape(before, plan.out_len, after)
    if after >= _NARROW:
        jobs = _wide_jobs(source, plan, out, final)
    else:
        jobs = [job for j in range(after) for job in _last_jobs(source[:, :, j], plan, out[:, :, j], final)]
    _run(jobs, work, target.size, threads)


def _pair_jobs(source: np.ndarray, first: _Plan, second: _Plan, target: np.ndarray) -> list[Job]:
    """Two passes at once, ``first``'s axis before ``second``'s: ``source`` (p, n1, a, n2, b)
    -> ``target`` (p, m1, a, m2, b), a run of the first axis's outputs at a time. The run never
    leaves cache and no intermediate array is made; the result goes into the target converted.

    With values after the second axis (b > 1, an image's channels) the run is made transposed,
    (a, n2, b, rows), by products ``piece.T @ weights.T``, so that the second axis comes first
    for products ``weights @ run[j, low:high]``, and goes into the target transposed back.
    Without (a last axis), the run is (rows, a, n2) and the second products are
    ``run[:, low:high] @ weights.T``."""
    p, n1, a, n2, b = source.shape
    rest = a * n2 * b
    flip = b > 1
    bands = _bands(first, _band_rows(first, last=False))
    seconds = _bands(second, _band_rows(second, last=not flip))
    size = bands[0].stop - bands[0].start
    # a run of whole bands, about a piece
    rows = max(size, min(first.out_len, (_PIECE // rest) // size * size))
    columns = max(1, min(rest, _PRODUCT // max(band.weights.size for band in bands)))
    if flip:
        columns = max(1, min(columns, _PIECE // rows))
    weights_t = [np.ascontiguousarray(band.weights.T) for band in bands]
    seconds_t = [np.ascontiguousarray(band.weights.T) for band in seconds]

    def job(i: int, start: int, stop: int) -> Job:
        mine = [(band, weights) for band, weights in zip(bands, weights_t) if start <= band.start < stop]
        low, high = mine[0][0].low, max(band.high for band, _ in mine)
        count = stop - start

        def run(scratch: _Scratch) -> None:
            made = scratch.get("run", (rest, count) if flip else (count, rest))
            for begin in range(0, rest, columns):
                end = min(begin + columns, rest)
                piece = scratch.get("piece", (high - low, end - begin))
                np.copyto(piece, source[i, low:high].reshape(high - low, rest)[:, begin:end], casting="unsafe")
                for band, weights in mine:
                    inputs = piece[band.low - low:band.high - low]
                    if flip:
                        _matmul(inputs.T, weights, out=made[begin:end, band.start - start:band.stop - start])
                    else:
                        _matmul(band.weights, inputs, out=made[band.start - start:band.stop - start, begin:end])
            if flip:
                stacked = made.reshape(a, n2, b * count)
                result = scratch.get("result", (second.out_len, b * count))
                for j in range(a):
                    for band in seconds:
                        _matmul(band.weights, stacked[j, band.low:band.high], out=result[band.start:band.stop])
                    done = _numeric.to_dtype(result, target.dtype).reshape(second.out_len, b, count)
                    target[i, start:stop, j] = done.transpose(2, 0, 1)
            else:
                lines = made.reshape(count * a, n2)
                result = scratch.get("result", (count * a, second.out_len))
                for band, weights in zip(seconds, seconds_t):
                    _matmul(lines[:, band.low:band.high], weights, out=result[:, band.start:band.stop])
                target[i, start:stop] = _numeric.to_dtype(result, target.dtype).reshape(count, a, second.out_len, 1)

        return run

    return [job(i, start, min(start + rows, first.out_len))
            for i in range(p) for start in range(0, first.out_len, rows)]


def _fill_outside(result: np.ndarray, plans: list[_Plan], value: Any) -> None:
    for plan in plans:
        if plan.outside is not None and plan.outside.any():
            result[(slice(None),) * plan.axis + (plan.outside,)] = value


def resize(
    data: Any,
    roi: Reals | None = None,
    scales: Reals | None = None,
    sizes: Ints | None = None,
    *,
    mode: Mode = "nearest",
    coordinate_transformation_mode: Transform = "half_pixel",
    cubic_coeff_a: Real = -0.75,
    exclude_outside: Flag = False,
    extrapolation_value: Real = 0.0,
    keep_aspect_ratio_policy: Policy = "stretch",
    nearest_mode: NearestMode = "round_prefer_floor",
    antialias: Flag = False,
    axes: Ints | None = None,
    threads: Int | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Resize ``data`` on ``axes`` to ``sizes`` or by ``scales``, as ONNX Resize-19 does.

    Parameters
    ----------
    data : array_like
        Any tensor type: bool, int8-int64, uint8-uint64, float16/32/64, bfloat16
        (ml_dtypes), complex64/128, strings (str, bytes, StringDType). Bool and strings
        take ``mode="nearest"`` only.
    roi : sequence of float, optional
        ``[start_1, ..., start_n, end_1, ..., end_n]`` for the n resized axes, normalised
        to the input's coordinates. Needed by ``tf_crop_and_resize``, ignored by the other
        transformations (checked for length and finiteness when given). Empty is absent.
    scales : sequence of float, optional
        One scale > 0 per resized axis, taken as float32 (ONNX's type for it).
    sizes : sequence of int, optional
        One target length >= 1 per resized axis, read per ``keep_aspect_ratio_policy``.
        Exactly one of ``scales`` and ``sizes``; an empty one beside the other is absent.
    mode : {"nearest", "linear", "cubic"}
    coordinate_transformation_mode : {"half_pixel", "half_pixel_symmetric", \
"pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"}
    cubic_coeff_a : float
        Keys' coefficient of the cubic kernel (taken as float32); cubic only.
    exclude_outside : bool or {0, 1}
        Weigh taps outside the input 0 and renormalise; linear and cubic only.
    extrapolation_value : float
        What ``tf_crop_and_resize`` gives points outside the input (taken as float32,
        then converted to data's dtype as interpolated values are).
    keep_aspect_ratio_policy : {"stretch", "not_larger", "not_smaller"}
        How ``sizes`` is read; not applicable to (and ignored with) ``scales``. The policy's one
        scale is taken over every axis in ``axes``: for an NCHW tensor give ``axes=[2, 3]``, or N
        and C take part (``not_larger`` of sizes ``[1, 3, 224, 224]`` scales N = 1 to 0).
    nearest_mode : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}
        Nearest only.
    antialias : bool or {0, 1}
        On a downscale, widen the linear or cubic filter by ``1/scale`` and normalise.
    axes : sequence of int, optional
        The axes ``roi``, ``scales`` and ``sizes`` refer to (negative count from the end);
        every axis by default.
    threads : int, optional
        Threads to share the work (outputs of 4 MiB or more); every CPU this process may
        run on by default; at most 1024.
    out : numpy.ndarray, optional
        Where to write the result: writable, of the output's shape and data's dtype, byte
        order included; any strides (a C-contiguous one is written in place; another is
        copied in). It must not overlap data.

    Returns
    -------
    numpy.ndarray
        A new array of data's dtype (``out`` when given); the unlisted axes keep their length.
        A new output of 32 MiB or more may take the memory of one let go before, and then
        does not own it: the last two let go (of the last size, 1 GiB in all at most) stay
        in memory for that until ``geomcli.ops.reuse.release()`` (see geomcli.ops.reuse).

    Raises
    ------
    GeomError
        If both or neither of ``scales`` and ``sizes`` are given; their length differs
        from the number of axes; a scale is not > 0 and finite in float32, a size not an
        integer >= 1, or a size is asked of an axis of length 0; an axis is out of
        ``[-r, r-1]`` or repeated; a mode, transformation, nearest mode or policy is not
        one of its names; ``tf_crop_and_resize`` has no roi, or a roi has the wrong length
        or a non-finite value; ``cubic_coeff_a`` is not finite, ``extrapolation_value`` not
        a real number, ``exclude_outside`` or ``antialias`` not 0/1; ``exclude_outside`` or
        ``antialias`` is asked of nearest; bool or string data is asked for linear or
        cubic, or string data for a point outside the input (there is no string
        extrapolation value); data is of another type or a masked array; the output is
        bigger than numpy can address, or it or the work arrays do not fit in memory.

    Notes
    -----
    ONNX Resize, opset 19. Per resized axis of input length ``n``, output index ``i``
    maps to ``x = a*i + b`` by the coordinate transformation, computed exactly (as
    fractions) wherever a decision hangs on it; linear taps ``floor(x), floor(x)+1``,
    cubic ``floor(x)-1 .. floor(x)+2`` with Keys' kernel; taps outside read the edge
    (unless ``exclude_outside``). Data is computed in float64 (complex128 for complex)
    and converted once: integers rounded half to even and saturated, floats rounded once.
    (The float64 sum is rounded: weights that are no binary fractions, sixths say, can put
    a sum that is a tie in exact arithmetic one rounding error off it, as the reference's.)
    Nearest copies elements: exact for every type.

    Where the ONNX reference (onnx 1.23) and onnxruntime (1.32) differ, we do this:

    - A scale (float32, as ONNX holds it) and a roi value are read as the decimal they
      print as, exactly: float32 0.7 is 7/10, not 0.699999988... So ``scales=[0.7]`` on
      length 10 gives ``floor(10 * 7/10) = 7``, as onnxruntime (float32 arithmetic) and
      Python floats do; the reference and ONNX's shape inference take the binary value
      and give 6. Ties stay ties (asymmetric 0.4: x = 2.5 exactly, so round_prefer_ceil
      reads 3, as onnxruntime; the reference 2), whole numbers stay whole (half_pixel 0.6
      puts output 4 at x = 7 exactly, which floor reads as 7; onnxruntime's float32 and the
      reference's binary 0.6000000238 give 6.9999997, read as 6) and a roi of [0.6, 1.1] on
      length 4 ends exactly at 3, inside (the reference: 3.00000007, outside). ``roi`` does not change
      the output length (the spec's summary line multiplies by ``roi_end - roi_start``;
      the reference, onnxruntime and shape inference do not).
    - ``align_corners`` and ``tf_crop_and_resize`` divide by the integer output length
      less one, as the text's "length of the resized tensor" says (onnxruntime, PyTorch,
      TensorFlow); the reference, and the official cases
      ``test_resize_downsample_scales_*_align_corners``, divide by ``scale*n - 1``.
      A length-1 output reads ``x = 0`` (``tf_crop_and_resize``: the roi's centre).
    - ``pytorch_half_pixel`` with an output length of 1 reads ``x = 0`` (the text and
      onnxruntime); the reference reads -0.5.
    - An axis kept at its length by a scale != 1 (1.25 on length 3) is resampled with
      that scale, as the formulas and the reference say; onnxruntime copies it when the
      whole shape is unchanged or under antialias. ``tf_crop_and_resize`` with an
      unchanged length samples its roi (onnxruntime copies). An axis whose every output
      reads its own index with weight 1 is copied (so NaN and inf there stay themselves).
      An input axis of length 1 gives its one pixel at every output, exactly (its taps
      all read it and their weights sum to 1), inf and NaN too; onnxruntime and the
      reference sum the taps, which can miss it by a rounding error, and give NaN for an
      inf under cubic (whose weights are not all positive).
    - Integers are rounded half to even and saturated once (as the reference);
      onnxruntime truncates (0.75 -> 0), has no uint8 cubic without antialias, and with
      antialias rounds half away from zero (int32's -42.5 -> -43) and clips to uint8 between its
      two passes (the width first):
      a dozen levels apart where a cubic's overshoot is clipped (12 on benchmarks/resize_compare's
      500x375 photo to 224x299),
      within 1 level of those two passes redone in float64. It clips int8 to [0, 255] there
      too: under antialias every negative int8 result is 0 (``[-50, -20, 10, 40]`` by 0.5:
      ``[0, 21]``, where we and the reference give ``[-31, 21]``).
    - ``exclude_outside`` and ``antialias`` with nearest are undefined in the text
      (onnxruntime refuses the first, the reference the second): both are refused.
      onnxruntime also refuses exclude_outside for linear without antialias; we take it
      (it can only renormalise the two taps at the edge, which then reads the edge).
    - Coordinates are exact where they decide a tap. The reference works in float64, and
      a coordinate one rounding error off an integer shifts its tap window by one (a cubic
      at x = 2 reads pixel 1 there); onnxruntime works in float32, so a near-tie can move.
    - Keys' weights are computed in float64 from ``cubic_coeff_a``'s float32 value. The
      reference (its ``A`` a float32 scalar) and onnxruntime compute them in float32, so their
      cubic results are ~1e-7 off ours even on float64 data, and with an ``a`` that is no
      short binary fraction (-0.6) their weights no longer sum to 1: ``[0, 1, 2, 3]`` to 7
      with align_corners reads 3 at x = 3 here, 2.9999993 in the reference (float64 data)
      and 2.9999964 in onnxruntime (float32), which gives -1.1e-6 at x = 0.
    - A tap of weight 0 takes part, as in onnxruntime: linear at a whole x reads x and x + 1
      with weights 1 and 0, so an Inf or NaN at x + 1 gives NaN there (``[1, 2, inf, 4]``
      align_corners to 7: ``[1, 1.5, nan, inf, inf, inf, 4]``); the ONNX reference (and
      :func:`geomcli.ops.reference.resize`) read x alone there: 2. Finite data: the same.
      Elsewhere onnxruntime's taps differ, which only non-finite data shows: it clamps a
      coordinate before the first pixel to 0 and reads taps 0 and 1 (``[1, inf, 3]`` to 4,
      half_pixel: NaN first, where we read 1); it leaves out an antialias window's end taps
      of weight 0 (``[1, 2, 3, 4, inf]`` to 2, asymmetric: inf last, where we and the ONNX
      reference give NaN); and it weighs an axis it keeps (cubic (6, 1) to (8, 1): NaN from
      the W axis where we copy it).
    - A negative axis counts from the end under every policy. onnxruntime leaves the axes given
      as negative numbers out of ``not_larger``/``not_smaller`` ((5, 4), sizes [3, 3], axes
      [-1, 0], not_smaller: (3, 4) there, (4, 3) here and there with axes [1, 0]); the
      reference fails on any negative axis.
    - A policy's lengths are ``sizes[i] / n`` times each length, rounded half up exactly.
      onnxruntime computes that product in float32 and the reference in float64, so where it
      is an exact half either may fall below it and round down, each at other shapes:
      192x195 ``not_smaller`` 224 (227.5) gives 224x228 here and in the reference, 224x227 in
      onnxruntime; 320x325 (227.5 too) gives 224x228 here and in onnxruntime, 224x227 in the
      reference. A centre crop to 224x224 after it then keeps columns 2..225 of 228 here,
      1..224 of onnxruntime's 227: the two crops are one pixel apart.

    A policy other than ``stretch`` scales every listed axis by one scale (the smallest or
    largest ``sizes[i] / n``), used by the coordinate formulas too, and rounds each length
    half up: 300x451 ``not_smaller`` 256 gives 256x385. Antialias uses the same scale per
    axis (``sizes[i] / n`` under ``stretch``). With exclude_outside, a point whose inside
    taps weigh 0 in total reads 0. ``cubic_coeff_a`` and ``extrapolation_value`` are
    float32 attributes in ONNX and are taken as their float32 values.

    Examples
    --------
    >>> resize(np.array([[1, 2], [3, 4]]), scales=[2, 2])
    array([[1, 1, 2, 2],
           [1, 1, 2, 2],
           [3, 3, 4, 4],
           [3, 3, 4, 4]])
    >>> resize(np.array([0.0, 10.0, 20.0, 30.0]), sizes=[2], mode="linear")
    array([ 5., 25.])
    >>> resize(np.array([0, 10], dtype=np.uint8), sizes=[4], mode="linear")
    array([ 0,  2,  8, 10], dtype=uint8)
    """
    return _resize(data, roi, scales, sizes, None, mode=mode,
                   coordinate_transformation_mode=coordinate_transformation_mode, cubic_coeff_a=cubic_coeff_a,
                   exclude_outside=exclude_outside, extrapolation_value=extrapolation_value,
                   keep_aspect_ratio_policy=keep_aspect_ratio_policy, nearest_mode=nearest_mode,
                   antialias=antialias, axes=axes, threads=threads, out=out)


def resize_window(
    data: Any,
    window: Sequence[slice],
    roi: Sequence[float] | np.ndarray | None = None,
    scales: Sequence[float] | np.ndarray | None = None,
    sizes: Sequence[int] | np.ndarray | None = None,
    **attributes: Any,
) -> np.ndarray:
    """``resize(data, roi, scales, sizes, **attributes)[window]`` as a new array, the same bits,
    making only the window's outputs where that is bit for bit the same: nearest, and the
    compiled kernel's passes (each output its own sum, in tap order). Elsewhere (the numpy
    path's band products sum in an order of their own) the whole resize, then the window.

    Why: a resize followed by a centre crop (chain's ImageNet recipe: 375x500 -> 256x341 -> 224²)
    makes 43% fewer outputs.

    Parameters
    ----------
    data, roi, scales, sizes, **attributes
        As :func:`resize` takes them.
    window : sequence of slice
        One slice of step 1 per axis, on the output's shape.

    Returns
    -------
    numpy.ndarray
        A new array of data's dtype, of the window's shape.

    Raises
    ------
    GeomError
        What :func:`resize` raises, and a window of another length or a step other than 1.

    >>> resize_window(np.arange(4.0), [slice(1, 3)], sizes=[8], mode="linear")
    array([0.25, 0.75])
    """
    return _resize(data, roi, scales, sizes, tuple(window), **attributes)


def _resize(data: Any, roi: Any, scales: Any, sizes: Any, window: tuple[slice, ...] | None, *,
            threads: Any = None, out: Any = None, **attributes: Any) -> np.ndarray:
    array = _as_data(data)
    shape, where, kind = array.shape, _where(array.shape), array.dtype.kind
    sizing, rois, settings, fill = _settled(shape, roi, scales, sizes, **attributes)
    _check_mode(settings["mode"], array.dtype, where)
    count = as_threads(threads, _FUNC, where)
    output = sizing.output_shape
    if math.prod(output) * max(array.dtype.itemsize, 8) > sys.maxsize:
        raise GeomError(f"{_FUNC}: the output of shape {output} is bigger than numpy can address ({where})")
    target: np.ndarray | None = None if out is None else as_out(out, output, array.dtype, array, _FUNC, where,
                                                                name="data")
    into: np.ndarray | None = None
    if window is None:
        # The output is made before the plans, which are as long as its axes: an output that
        # cannot be held is refused at once (sizes [10**8, 10**8] of a 2x2 took 37 s and 13 GiB
        # of plans to find out). A C-contiguous out takes the results where they are made.
        into = target if target is not None and target.flags.c_contiguous else new_output(
            output, array.dtype, _FUNC, where)
    try:
        plans = _plans(shape, sizing, rois, settings)
        if kind in "UST":
            _refuse_string_extrapolation(plans, rois, where)
        working = [plan for plan in plans if plan.out_len == 0 or not plan.is_identity()]
        if window is not None:
            return _apply_window(array, output, working, fill, _as_window(window, output), count)
        result = _apply(array, output, working, fill, count, into)
    except MemoryError as error:
        # the output is made: what is missing is the work's (a strided view's copy, say)
        copied = "" if array.flags.c_contiguous else (
            f"; data that is not C-contiguous may be copied whole: {bytes_text(array.size * array.dtype.itemsize)}")
        raise GeomError(f"{_FUNC}: not enough memory for the work arrays of the output of shape {output}{copied} "
                        f"({where})") from error
    if target is None or result is target:
        return result
    np.copyto(target, result)
    return target


def _as_window(window: tuple[slice, ...], output: Shape) -> list[tuple[int, int]]:
    """(start, stop) per axis of ``output``."""
    if len(window) != len(output) or any(part.step not in (None, 1) for part in window):
        raise GeomError(f"{_FUNC}: a window takes one slice of step 1 per axis of the output {output}")
    return [part.indices(length)[:2] for part, length in zip(window, output)]


def _apply_window(array: np.ndarray, output_shape: Shape, plans: list[_Plan], fill: float,
                  window: list[tuple[int, int]], threads: int) -> np.ndarray:
    """_apply's result in ``window`` only: each plan cut to the window's outputs and the inputs
    their taps read, the data cut alike (an axis no plan resamples: its outputs are its inputs)."""
    cut_shape = tuple(max(0, stop - start) for start, stop in window)
    if any(plan.weights is not None for plan in plans) and not _compiles(array.dtype, plans):
        whole = _apply(array, output_shape, plans, fill, threads)
        return np.array(whole[tuple(slice(start, stop) for start, stop in window)], copy=True)
    if math.prod(cut_shape) == 0:
        return np.empty(cut_shape, dtype=array.dtype)
    reads = [slice(start, stop) for start, stop in window]
    cut = []
    for plan in plans:
        start, stop = window[plan.axis]
        taps = plan.taps[start:stop]
        low, high = int(taps.min()), int(taps.max()) + 1
        reads[plan.axis] = slice(low, high)
        cut.append(_Plan(plan.axis, high - low, stop - start, taps - low,
                         None if plan.weights is None else plan.weights[start:stop],
                         None if plan.outside is None else plan.outside[start:stop]))
    return _apply(array[tuple(reads)], cut_shape, cut, fill, threads)


def _refuse_string_extrapolation(plans: list[_Plan], rois: list[tuple[Fraction, Fraction]] | None,
                                 where: str) -> None:
    for position, plan in enumerate(plans):
        if plan.outside is not None and plan.outside.any():
            assert rois is not None
            start, end = rois[position]
            raise GeomError(
                f"{_FUNC}: string data has no extrapolation value, and tf_crop_and_resize reads outside "
                f"axis {plan.axis} (its roi {float(start)} to {float(end)}, {where})"
            )


def check_resize_mode(mode: Any, dtype: np.dtype | str) -> None:
    """Refuse, as :func:`resize` would, a mode that data of ``dtype`` cannot take (bool and strings:
    nearest only): for a caller that knows data's dtype before its values (a file's header).

    >>> check_resize_mode("linear", "bool")
    Traceback (most recent call last):
    geomcli.errors.GeomError: resize: bool data takes mode nearest only, found mode linear
    """
    _check_mode(_choice(mode, "mode", _MODES, "judged from data's dtype alone"), np.dtype(dtype), None)


def _check_mode(mode: str, dtype: np.dtype, where: str | None) -> None:
    if mode != "nearest" and dtype.kind in "bUST":
        what = "bool" if dtype.kind == "b" else "string"
        raise GeomError(f"{_FUNC}: {what} data takes mode nearest only, found mode {mode}"
                        + ("" if where is None else f" ({where})"))


def resize_coordinate_map(
    data_shape: Sequence[int] | np.ndarray,
    roi: Sequence[float] | np.ndarray | None = None,
    scales: Sequence[float] | np.ndarray | None = None,
    sizes: Sequence[int] | np.ndarray | None = None,
    **attributes: Any,
) -> tuple[tuple[Fraction, Fraction], ...]:
    """Per axis of the data, ``(a, b)`` with ``x_input = a * x_output + b``: where :func:`resize`
    (with these arguments, ``attributes`` its keywords) samples each output pixel, in the input's
    pixel coordinates, exactly; ``(1, 0)`` on an axis it does not list. What a physical
    coordinate system of the output (an OME-Zarr translation) is made from.

    >>> resize_coordinate_map((4, 10), scales=[1, 0.5])  # half_pixel: x_in = 2 x_out + 0.5
    ((Fraction(1, 1), Fraction(0, 1)), (Fraction(2, 1), Fraction(1, 2)))
    """
    shape = _as_shape(data_shape)
    sizing, rois, settings, _ = _settled(shape, roi, scales, sizes, **attributes)
    lines = [(Fraction(1), Fraction(0))] * len(shape)
    for position, axis in enumerate(sizing.axes):
        lines[axis] = _line(settings["transform"], shape[axis], sizing.output_shape[axis], sizing.scales[position],
                            None if rois is None else rois[position])
    return tuple(lines)


def resize_changed_axes(
    data_shape: Sequence[int] | np.ndarray,
    roi: Sequence[float] | np.ndarray | None = None,
    scales: Sequence[float] | np.ndarray | None = None,
    sizes: Sequence[int] | np.ndarray | None = None,
    **attributes: Any,
) -> tuple[int, ...]:
    """The axes :func:`resize` (with these arguments, ``attributes`` its keywords) does more on
    than copy. Along every other axis each part of the input, resized alike, gives that part of
    the result bit for bit: an engine may split the data there (geomcli.engine.chunked).

    >>> resize_changed_axes((8, 3, 64, 64), scales=[1, 1, 0.5, 1], mode="linear")
    (2,)
    """
    shape = _as_shape(data_shape)
    sizing, rois, settings, _ = _settled(shape, roi, scales, sizes, **attributes)
    return tuple(plan.axis for plan in _plans(shape, sizing, rois, settings)
                 if plan.out_len == 0 or not plan.is_identity())


def _settled(shape: Shape, roi: Any, scales: Any, sizes: Any, *, mode: Any = "nearest",
             coordinate_transformation_mode: Any = "half_pixel", cubic_coeff_a: Any = -0.75,
             exclude_outside: Any = False, extrapolation_value: Any = 0.0, keep_aspect_ratio_policy: Any = "stretch",
             nearest_mode: Any = "round_prefer_floor", antialias: Any = False,
             axes: Any = None) -> tuple[_Sizing, list[tuple[Fraction, Fraction]] | None, dict[str, Any], float]:
    """resize's arguments checked: the sizing, the rois, the settings a plan takes, the fill."""
    where = _where(shape)
    mode = _choice(mode, "mode", _MODES, where)
    transform = _choice(coordinate_transformation_mode, "coordinate_transformation_mode", _TRANSFORMS, where)
    nearest = _choice(nearest_mode, "nearest_mode", _NEAREST_MODES, where)
    a = _float32_attribute(cubic_coeff_a, "cubic_coeff_a", where, finite=True)
    fill = _float32_attribute(extrapolation_value, "extrapolation_value", where, finite=False)
    exclude = _flag(exclude_outside, "exclude_outside", where)
    widen = _flag(antialias, "antialias", where)
    sizing = _sizing(shape, scales, sizes, axes, keep_aspect_ratio_policy)
    rois = _as_roi(roi, sizing, shape, transform == "tf_crop_and_resize")
    if mode == "nearest" and (exclude or widen):
        name = "exclude_outside" if exclude else "antialias"
        raise GeomError(f"{_FUNC}: {name} is undefined for mode nearest; use linear or cubic ({where})")
    settings = {"mode": mode, "transform": transform, "nearest_mode": nearest, "cubic_coeff_a": a,
                "exclude_outside": exclude, "antialias": widen}
    return sizing, rois, settings, fill


def check_resize_arguments(roi: Any, scales: Any, sizes: Any, **attributes: Any) -> None:
    """A GeomError for what is wrong with resize's arguments whatever the data: sizes below 1,
    scales not finite and positive, an unknown mode, antialias or exclude_outside with nearest,
    tf_crop_and_resize without a roi of twice as many numbers, ... (checked against a shape with
    one axis per size or scale; what the data's shape decides, such as the axes, is not)."""
    count = len(scales if _given(scales, sizes) else sizes if _given(sizes, scales) else [])
    shape = (1,) * count
    try:
        _settled(shape, roi, scales, sizes, **attributes)
    except GeomError as error:
        raise GeomError(str(error).removesuffix(f" ({_where(shape)})")) from error


def _plans(shape: Shape, sizing: _Sizing, rois: list[tuple[Fraction, Fraction]] | None,
           settings: dict[str, Any]) -> list[_Plan]:
    """Each listed axis's plan."""
    return [_plan(axis, shape[axis], sizing.output_shape[axis], sizing.scales[position],
                  None if rois is None else rois[position], **settings)
            for position, axis in enumerate(sizing.axes)]


def _apply(array: np.ndarray, output_shape: Shape, plans: list[_Plan], fill: float, threads: int,
           into: np.ndarray | None = None) -> np.ndarray:
    """The plans applied to ``array`` on up to ``threads`` threads: a gather for nearest,
    weighted passes for the others, into ``into`` when given (a C-contiguous array of the
    output's shape and dtype); then the points outside the input (tf_crop_and_resize) take
    ``fill``."""
    dtype = array.dtype
    if math.prod(output_shape) == 0:
        return np.empty(output_shape, dtype=dtype) if into is None else into
    if not plans:
        if into is None:
            return np.array(array, copy=True)
        np.copyto(into, array)
        return into
    # the shrinking axes first: every later pass then works on less
    order = sorted(plans, key=lambda plan: plan.out_len / plan.in_len)
    if order[0].weights is None:
        result = _gather_all(array, output_shape, order, into)
        value: Any = bool(fill) if dtype.kind == "b" else None
    else:
        result = _weigh_all(array, output_shape, order, threads, into)
        value = None
    if any(plan.outside is not None for plan in plans):
        if value is None:
            value = _numeric.to_dtype(np.array([fill]), dtype)[0]
        _fill_outside(result, plans, value)
    return result


# Nearest's gathers are made a band of about this many bytes at a time: gathered axis by axis
# whole, the first axis's result was held beside the output (half of it, on a 2x2 upscale)
_GATHERED_BAND = 1 << 22


def _gather_all(array: np.ndarray, output_shape: Shape, order: list[_Plan], into: np.ndarray | None) -> np.ndarray:
    """Nearest's gathers in ``order``, into ``into`` or a new array, a band of the output at a
    time: runs of an axis no later than the first gathered one, the axes before it one index
    at a time (a band is contiguous), the earliest whose rows fit in _GATHERED_BAND."""
    if len(order) == 1:
        return _gather(array, order[0], into)
    result = np.empty(output_shape, dtype=array.dtype) if into is None else into
    first = min(plan.axis for plan in order)
    # a band's arrays are at most its rows times, on each later axis, the longer of input and output
    row_bytes = [array.dtype.itemsize * math.prod(max(pair) for pair in zip(array.shape[axis + 1:],
                                                                            output_shape[axis + 1:]))
                 for axis in range(first + 1)]
    axis = next((axis for axis, size in enumerate(row_bytes) if size <= _GATHERED_BAND), first)
    rows = max(1, _GATHERED_BAND // max(row_bytes[axis], 1))
    # the plans as they apply to array[outer], whose first axis is ``axis``
    shifted = [replace(plan, axis=plan.axis - axis) for plan in order]
    banded = shifted[[plan.axis for plan in shifted].index(0)] if axis == first else None
    rest = [plan for plan in shifted if plan is not banded]
    for outer in np.ndindex(*output_shape[:axis]):
        source, target = array[outer], result[outer]
        for start in range(0, output_shape[axis], rows):
            stop = min(start + rows, output_shape[axis])
            band = source[start:stop] if banded is None else _gather(
                source, replace(banded, out_len=stop - start, taps=banded.taps[start:stop], outside=None))
            for plan in rest[:-1]:
                band = _gather(band, plan)
            _gather(band, rest[-1], target[start:stop])
    return result


def _weigh_all(array: np.ndarray, output_shape: Shape, order: list[_Plan], threads: int,
               into: np.ndarray | None = None) -> np.ndarray:
    """The weighted passes in ``order``, into ``into`` or a new array of array's dtype (the
    compiled kernel's, where it is built and covers the case), on up to ``threads`` threads."""
    dtype = array.dtype
    work = _numeric.working_dtype(dtype)
    result = np.empty(output_shape, dtype=dtype) if into is None else into
    if _compiles(dtype, order):
        # data of the other byte order is made native first: the same sums as native data's, so the same bits
        native = dtype.newbyteorder("=")
        target = result if dtype.isnative else np.empty(output_shape, dtype=native)
        _run(_compiled_jobs(np.ascontiguousarray(array, dtype=native), sorted(order, key=lambda plan: plan.axis),
                            target), work, result.size, threads)
        if target is not result:
            result[...] = target
        return result
    _weigh_by_bands(array, order, result, threads)
    # A band's product multiplies every input in its span, most of them by weight 0: a NaN or inf
    # there would turn every output of the band into NaN, where the formula spreads it only to
    # the outputs that tap it. Only then (the bands' result not all finite) are the sums redone
    # tap by tap, as the compiled kernel makes them.
    if (result.dtype.kind in "fc" or result.dtype.name == "bfloat16") and not np.isfinite(result).all():
        _weigh_by_taps(array, order, result)
    return result


def _weigh_by_bands(array: np.ndarray, order: list[_Plan], result: np.ndarray, threads: int) -> None:
    """The numpy path's weighted passes in ``order`` into ``result``: products of bands."""
    work = _numeric.working_dtype(array.dtype)
    if len(order) == 2 and order[0].axis < order[1].axis and math.prod(array.shape[order[0].axis + 1:]) >= _NARROW:
        first, second = order
        grouped = (math.prod(array.shape[:first.axis]), first.in_len,
                   math.prod(array.shape[first.axis + 1:second.axis]), second.in_len,
                   math.prod(array.shape[second.axis + 1:]))
        target = result.reshape(grouped[0], first.out_len, grouped[2], second.out_len, grouped[4])
        _run(_pair_jobs(array.reshape(grouped), first, second, target), work, result.size, threads)
        return
    # every pass but the last makes a working-dtype array; the last converts into the result
    values = array
    shape = list(array.shape)
    for position, plan in enumerate(order):
        shape[plan.axis] = plan.out_len
        final = position == len(order) - 1
        target = result if final else np.empty(shape, dtype=work)
        _weigh(values, plan, target, final, threads)
        values = target


def _weigh_by_taps(array: np.ndarray, order: list[_Plan], result: np.ndarray) -> None:
    """The weighted passes into ``result`` as the formula sums them: per output, its own taps
    (the plan's, weight 0 included) in tap order, axis after axis in axis order, in the working
    dtype, converted once. For data with NaN or inf, where the bands would spread them; a block
    of the first axis's outputs at a time, of about _PIECE float64 values at each pass."""
    first, *rest = sorted(order, key=lambda plan: plan.axis)
    assert first.weights is not None
    shape = list(array.shape)
    shape[first.axis] = 1
    widest = math.prod(shape)  # the values one output of first's has, at its largest pass
    for plan in rest:
        shape[plan.axis] = plan.out_len
        widest = max(widest, math.prod(shape))
    # each part weighed on its own (a complex product would make 0 · inf of the other part)
    parts = (array.real, array.imag) if array.dtype.kind == "c" else (array,)
    count = max(1, _PIECE // max(1, widest))
    with _quiet():
        for start in range(0, first.out_len, count):
            rows = slice(start, start + count)
            steps: list[tuple[int, np.ndarray, np.ndarray | None]] = [(first.axis, first.taps[rows],
                                                                        first.weights[rows])]
            steps += [(plan.axis, plan.taps, plan.weights) for plan in rest]
            sums = [_tap_sums(part, steps) for part in parts]
            values = sums[0]
            if len(sums) == 2:
                values = np.empty(sums[0].shape, np.complex128)
                values.real, values.imag = sums
            result[(slice(None),) * first.axis + (rows,)] = _numeric.to_dtype(values, result.dtype)


def _tap_sums(values: np.ndarray, steps: list[tuple[int, np.ndarray, np.ndarray | None]]) -> np.ndarray:
    """Each step's (axis, taps, weights) summed tap by tap into float64, one after another."""
    for axis, taps, weights in steps:
        assert weights is not None
        shape = [1] * values.ndim
        shape[axis] = len(taps)
        total = np.zeros(values.shape[:axis] + (len(taps),) + values.shape[axis + 1:])
        for k in range(taps.shape[1]):
            total += np.take(values, taps[:, k], axis=axis).astype(np.float64) * weights[:, k].reshape(shape)
        values = total
    return values


# what the compiled kernel takes: data's dtype, in native byte order (the rest takes the numpy path)
_COMPILED_KINDS = frozenset(
    ["float32", "float64", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"])


def _compiles(dtype: np.dtype, plans: list[_Plan]) -> bool:
    """Whether the compiled kernel does these weighted passes on data of ``dtype``."""
    return _compiled is not None and len(plans) <= 2 and dtype.name in _COMPILED_KINDS


def _compiled_jobs(source: np.ndarray, plans: list[_Plan], target: np.ndarray) -> list[Job]:
    """One or two axes' passes by the compiled kernel, in axis order as the reference makes them
    (the same sums, so the same bits): each job a run of the first axis's output rows, each row
    weighed along the second axis while it is in cache and stored in target's dtype.

    Why it is compiled (float32 (1, 3, 1024, 1024) -> 512² linear antialias, and the uint8 photos
    of ``geomcli chain``'s ImageNet recipe; issue 21): the numpy path multiplies dense bands of
    weights, mostly zeros, in BLAS products, then converts; onnxruntime was 1.7x faster there.
    """
    assert _compiled is not None
    first = plans[0]
    shape = source.shape
    p = math.prod(shape[:first.axis])
    if len(plans) == 2:
        second = plans[1]
        a, n2, b = math.prod(shape[first.axis + 1:second.axis]), second.in_len, math.prod(shape[second.axis + 1:])
        m2, taps2, weights2 = second.out_len, second.taps.astype(np.int64), second.weights
    else:
        a, n2, b = 1, math.prod(shape[first.axis + 1:]), 1
        m2, taps2, weights2 = n2, None, None
    assert first.weights is not None
    taps1, weights1 = first.taps.astype(np.int64), first.weights
    sizes = (p, first.in_len, a, n2, b, first.out_len, m2, taps1.shape[1], 1 if taps2 is None else taps2.shape[1])
    rows = p * first.out_len
    # about a piece's values per job, so that the threads share the work evenly
    step = max(1, _PIECE // max(1, a * m2 * b))

    def job(start: int, stop: int) -> Job:
        def run(scratch: _Scratch) -> None:
            assert _compiled is not None
            _compiled.resample(source, target, taps1, weights1, taps2, weights2, sizes, target.dtype.name, start,
                               stop)

        return run

    return [job(start, min(rows, start + step)) for start in range(0, rows, step)]
