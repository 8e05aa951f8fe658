"""The one rule for operators that compute new values (GridSample, Resize): how data becomes
numbers to interpolate, and how the interpolated numbers go back to data's dtype.

Integers are computed in float64, rounded half to even and saturated to the dtype's range; floats
of 32 bits or fewer are computed in float64 and rounded once to their dtype; complex data
interpolates both parts in complex128.
"""

from __future__ import annotations

import numpy as np


def working_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype values of ``dtype`` are interpolated in: complex128 for complex, else float64."""
    return np.dtype(np.complex128) if dtype.kind == "c" else np.dtype(np.float64)


def to_dtype(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Interpolated ``values`` (float64 or complex128) as ``dtype``: integers rounded half to even
    and saturated to their range (NaN becomes 0), bfloat16 rounded once, other types by a cast."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        rounded: np.ndarray = np.rint(values)
        # float64 cannot hold int64's and uint64's largest values: below 2**63 (2**64) the clip
        # bound is the largest float64 there, which casts in range; from it on, the largest value
        past = rounded >= float(info.max) if info.bits == 64 else None
        high = float(info.max) if info.bits < 64 else np.nextafter(float(info.max), 0.0)
        np.clip(rounded, float(info.min), high, out=rounded)
        # NaN alone is left after the clip; np.nan_to_num would look for infinities too, and on a
        # resize's many small pieces that took half the conversion's time
        np.copyto(rounded, 0.0, where=np.isnan(rounded))
        result: np.ndarray = rounded.astype(dtype)
        if past is not None:
            np.copyto(result, info.max, where=past)
        return result
    with np.errstate(over="ignore", invalid="ignore"):
        result = round_once(values, dtype).astype(dtype, copy=False)
    return result


def round_once(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``values`` rounded once to ``dtype`` if it is bfloat16 and they are float64; else ``values``
    (a cast does it once).

    ml_dtypes casts float64 to bfloat16 through float32, rounding twice: a value just past the
    middle of two bfloat16 numbers can land on the middle first, then go to the even one (the
    farther), and a finite value near the largest can become Inf. Rounded to float32 toward zero,
    with the last bit set where that dropped anything (round to odd), the second rounding is
    exact: float32 keeps 16 more bits than bfloat16.
    """
    if dtype.name != "bfloat16" or values.dtype != np.float64:
        return values
    with np.errstate(over="ignore", invalid="ignore"):
        odd = np.asarray(values.astype(np.float32))
        widened = odd.astype(np.float64)
        inexact = (widened != values) & ~np.isnan(values)
        past = inexact & (np.abs(widened) > np.abs(values))
        odd[past] = np.nextafter(odd[past], np.float32(0))
    odd.view(np.uint32)[inexact] |= 1
    return odd.astype(dtype)
