"""Each operator in its defining few lines, as the spec and ``shared/spec/NOTES.md`` write it:
readable, slow, and the oracle the tests hold the fast kernels to.

Nothing here validates its arguments: the public kernels do that first.
"""


# --- Resize (opset 19) ------------------------------------------------------------------------
#
# Per resized axis: the coordinate transformation maps an output index to a coordinate of the
# input, exactly (fractions); the coordinate gives the taps and their weights; the output is the
# weighted sum of the taps, one axis after another. The decisions where the spec is read one way
# of several are geomcli.ops.resize's Notes.

import math  # noqa: E402
from fractions import Fraction  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from geomcli.ops import _numeric  # noqa: E402


def resize_coordinate(i: int, in_len: int, out_len: int, scale: Fraction, transform: str,
                      roi: tuple[Fraction, Fraction] = (Fraction(0), Fraction(1))) -> Fraction:
    """``x_original`` of output index ``i``, exactly: the spec's formula for ``transform``, with
    ``scale`` the scale (its product with ``in_len`` is ``output_width``)."""
    half = Fraction(1, 2)
    if transform == "half_pixel":
        return (i + half) / scale - half
    if transform == "half_pixel_symmetric":
        adjustment = out_len / (scale * in_len)
        offset = Fraction(in_len, 2) * (1 - adjustment)
        return offset + (i + half) / scale - half
    if transform == "pytorch_half_pixel":
        return (i + half) / scale - half if out_len > 1 else Fraction(0)
    if transform == "align_corners":
        return Fraction(i * (in_len - 1), out_len - 1) if out_len > 1 else Fraction(0)
    if transform == "asymmetric":
        return i / scale
    start, end = roi  # tf_crop_and_resize
    if out_len > 1:
        return start * (in_len - 1) + i * (end - start) * (in_len - 1) / (out_len - 1)
    return (start + end) * (in_len - 1) / 2


def resize_kernel(distance: float, mode: str, a: float) -> float:
    """The linear (triangle) or cubic (Keys, coefficient ``a``) kernel at ``distance``."""
    d = abs(distance)
    if mode == "linear":
        return max(0.0, 1.0 - d)
    if d <= 1:
        return ((a + 2) * d - (a + 3)) * d * d + 1
    if d < 2:
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return 0.0


def resize_taps(x: Fraction, in_len: int, scale: Fraction, mode: str, nearest_mode: str, a: float,
                exclude_outside: bool, antialias: bool) -> list[tuple[int, float]]:
    """(input index, weight) pairs output coordinate ``x`` reads; indices outside the input read
    its edge (clamped)."""
    last = in_len - 1
    if mode == "nearest":
        index = {
            "round_prefer_floor": math.ceil(x - Fraction(1, 2)),
            "round_prefer_ceil": math.floor(x + Fraction(1, 2)),
            "floor": math.floor(x),
            "ceil": math.ceil(x),
        }[nearest_mode]
        return [(min(max(index, 0), last), 1.0)]
    # antialias stretches the kernel by max(1, 1/scale): taps j with |j - x| * stretch < support
    stretch = min(scale, Fraction(1)) if antialias else Fraction(1)
    support = 1 if mode == "linear" else 2
    reach = support / stretch
    taps = range(math.floor(x - reach) + 1, math.ceil(x + reach))
    weights = [resize_kernel(float((j - x) * stretch), mode, a) for j in taps]
    if exclude_outside:
        weights = [w if 0 <= j <= last else 0.0 for j, w in zip(taps, weights)]
    if antialias or exclude_outside:
        total = sum(weights)
        weights = [w / total for w in weights] if total != 0 else weights
    return [(min(max(j, 0), last), w) for j, w in zip(taps, weights)]


def resize(data: np.ndarray, output_shape: tuple[int, ...], scales: list[Fraction],
           rois: list[tuple[Fraction, Fraction]], *, mode: str, coordinate_transformation_mode: str,
           cubic_coeff_a: float, exclude_outside: bool, extrapolation_value: float, nearest_mode: str,
           antialias: bool) -> np.ndarray:
    """Resize-19 of ``data`` to ``output_shape``, one axis after another in order: ``scales`` and
    ``rois`` give every axis's scale (exact) and (start, end). An axis whose every output reads
    its own index with weight 1 is left as it is. Points outside the input on any axis
    (tf_crop_and_resize) read ``extrapolation_value``."""
    transform = coordinate_transformation_mode
    nearest = mode == "nearest"
    values = data if nearest else data.astype(_numeric.working_dtype(data.dtype))
    outside: list[tuple[int, list[int]]] = []
    for axis, out_len in enumerate(output_shape):
        in_len = data.shape[axis]
        if out_len == 0:
            return np.empty(output_shape, dtype=data.dtype)
        coordinates = [resize_coordinate(i, in_len, out_len, scales[axis], transform, rois[axis])
                       for i in range(out_len)]
        taps = [resize_taps(x, in_len, scales[axis], mode, nearest_mode, cubic_coeff_a, exclude_outside, antialias)
                for x in coordinates]
        cropped = transform == "tf_crop_and_resize"
        beyond = [i for i, x in enumerate(coordinates) if cropped and not 0 <= x <= in_len - 1]
        outside.append((axis, beyond))
        reads_itself = all(sum(w for j, w in row if j == i) == 1 and all(w == 0 for j, w in row if j != i)
                           for i, row in enumerate(taps))
        if out_len == in_len and reads_itself and not beyond:
            continue
        moved = np.moveaxis(values, axis, 0)
        if nearest:
            result = moved[[row[0][0] for row in taps]]
        else:
            result = np.zeros((out_len, *moved.shape[1:]), dtype=values.dtype)
            for i, row in enumerate(taps):
                for j, w in row:
                    result[i] += w * moved[j]
        values = np.moveaxis(result, 0, axis)
    values = np.array(values, copy=True)
    fill: Any = extrapolation_value
    if nearest and data.dtype.kind != "b":
        fill = _numeric.to_dtype(np.array([extrapolation_value]), data.dtype)[0]
    for axis, indices in outside:
        if indices:
            values[(slice(None),) * axis + (indices,)] = fill if data.dtype.kind != "b" else bool(fill)
    return values if nearest else _numeric.to_dtype(values, data.dtype)
