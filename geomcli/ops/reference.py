"""Each operator in its defining few lines, as the spec and the kernels' documented decisions write it:
readable, slow, and the oracle the tests hold the fast kernels to.

Nothing here validates its arguments: the public kernels do that first.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from geomcli.ops import _numeric

# ---- CenterCropPad ------------------------------------------------------------------------------


def center_crop_pad(data: np.ndarray, shape: Sequence[int], axes: Sequence[int] | None = None) -> np.ndarray:
    """Per listed axis of length d and target t: a crop keeps ``[(d - t) // 2 :][:t]``; a pad puts
    ``(t - d) // 2`` of the dtype's zeros before and the rest after."""
    chosen = range(data.ndim) if axes is None else [axis % data.ndim for axis in axes]
    targets = dict(zip(chosen, shape, strict=True))
    out = np.zeros([targets.get(axis, length) for axis, length in enumerate(data.shape)], dtype=data.dtype)
    source, target = [], []
    for axis, length in enumerate(data.shape):
        t = targets.get(axis, length)
        start = abs(length - t) // 2
        source.append(slice(start, start + t) if t <= length else slice(None))
        target.append(slice(None) if t <= length else slice(start, start + length))
    out[tuple(target)] = data[tuple(source)]
    return out


# ---- AffineGrid ---------------------------------------------------------------------------------


def affine_grid(theta: np.ndarray, size: Sequence[int], align_corners: bool = False) -> np.ndarray:
    """``grid[n, (d,) h, w] = theta[n] @ (x_w, y_h, (z_d,) 1)`` for base coordinates spread over
    -1..1 (0 on an axis of length 1 with align_corners), summed in float64, in theta's dtype."""
    spatial = [int(length) for length in size[2:]]

    def base(length: int) -> np.ndarray:
        index = np.arange(length, dtype=np.float64)
        if align_corners:
            return 2 * index / (length - 1) - 1 if length > 1 else np.zeros(1)
        return (2 * index + 1) / length - 1

    # the points (x, y[, z], 1), x along the last axis: shape (*spatial, k + 1)
    axes = np.meshgrid(*[base(length) for length in spatial], indexing="ij")
    points = np.stack([*reversed(axes), np.ones(spatial)], axis=-1)
    matrices = np.broadcast_to(theta, (int(size[0]), *np.shape(theta)[1:])).astype(np.float64)
    grid: np.ndarray = np.einsum("nrj,...j->n...r", matrices, points).astype(theta.dtype)
    return grid


# ---- SpaceToDepth / DepthToSpace ----------------------------------------------------------------


def space_to_depth(data: np.ndarray, blocksize: int, mode: str = "DCR") -> np.ndarray:
    """(N, C, H, W) -> (N, C·b², H/b, W/b): reshape to (n, c, h/b, b, w/b, b), then DCR puts the
    block offsets before the channels, CRD after them."""
    n, c, h, w = data.shape
    b = blocksize
    blocks = data.reshape(n, c, h // b, b, w // b, b)
    # (n, c, h/b, bh, w/b, bw) -> DCR (n, bh, bw, c, h/b, w/b) or CRD (n, c, bh, bw, h/b, w/b)
    order = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    return blocks.transpose(order).reshape(n, c * b * b, h // b, w // b)


def depth_to_space(data: np.ndarray, blocksize: int, mode: str = "DCR") -> np.ndarray:
    """The exact inverse of :func:`space_to_depth` in the same mode."""
    n, depth, h, w = data.shape
    b = blocksize
    c = depth // (b * b)
    if mode == "DCR":
        # (n, bh, bw, c, h, w) -> (n, c, h, bh, w, bw)
        blocks = data.reshape(n, b, b, c, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        # (n, c, bh, bw, h, w) -> (n, c, h, bh, w, bw)
        blocks = data.reshape(n, c, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return blocks.reshape(n, c, h * b, w * b)


# --- GridSample (opset 22) -----------------------------------------------------------
# One output point at a time, one tap at a time, in Python floats (float64): the kernel in
# geomcli.ops.grid_sample must give the same bits. The tap values of a point form a lattice of
# 1, 2 or 4 taps per axis; it is contracted innermost axis first, each sum taken left to right,
# as onnxruntime and the ONNX reference nest their 1-D interpolations.

CUBIC_A = -0.75  # Keys' parameter, as onnxruntime and PyTorch


def unnormalize(g: float, length: int, align_corners: bool) -> float:
    """A normalised coordinate in [-1, 1] as a position in pixels of an axis of ``length``. A
    finite ``g`` whose position overflows float64 lies past every border: the largest float64 of
    its sign (Inf would read fill, as a point with no position)."""
    if align_corners:
        x = (g + 1) / 2 * (length - 1)
    else:
        x = ((g + 1) * length - 1) / 2
    if math.isinf(x) and math.isfinite(g):
        return math.copysign(sys.float_info.max, x)
    return x


def borders(length: int, align_corners: bool) -> tuple[float, float]:
    """The two ends reflection mirrors at: the corner pixels' centres, or their outer edges."""
    return (0.0, length - 1.0) if align_corners else (-0.5, length - 0.5)


def reflect(x: float, low: float, high: float) -> float:
    """``x`` mirrored at ``low`` and ``high`` until it lies between them (the spec's "keeps being
    reflected until becoming in bound"), as one exact fmod of its distance from ``low`` by the
    period, twice the span."""
    span = high - low
    if span == 0:
        return low
    d = math.fmod(abs(x - low), 2 * span)
    return low + (2 * span - d if d > span else d)


def mirror_index(i: int, length: int, align_corners: bool) -> int:
    """An integer tap index mirrored into [0, length): at the corner pixels' centres (period
    2(L - 1); a length-1 axis has its one pixel) or at their outer edges (period 2L), in exact
    integer arithmetic: the tap index a float reflection of ``i`` would give."""
    if align_corners:
        if length == 1:
            return 0
        period = 2 * (length - 1)
        m = i % period
        return period - m if m > length - 1 else m
    period = 2 * length
    m = i % period
    return period - 1 - m if m >= length else m


def pad_index(i: int, length: int, padding_mode: str, align_corners: bool) -> int | None:
    """The pixel tap ``i`` reads on an axis of ``length``: None for ``fill`` (zeros)."""
    if 0 <= i < length:
        return i
    if padding_mode == "zeros":
        return None
    if padding_mode == "border":
        return min(max(i, 0), length - 1)
    return mirror_index(i, length, align_corners)


def cubic_near(d: float) -> float:
    """Keys' kernel for 0 <= d < 1."""
    return ((CUBIC_A + 2) * d - (CUBIC_A + 3)) * d * d + 1


def cubic_far(d: float) -> float:
    """Keys' kernel for 1 <= d < 2."""
    return ((CUBIC_A * d - 5 * CUBIC_A) * d + 8 * CUBIC_A) * d - 4 * CUBIC_A


def axis_taps(x: float, length: int, mode: str, padding_mode: str,
              align_corners: bool) -> tuple[list[int | None], list[float]]:
    """The taps (pixel index, or None for ``fill``) of a position ``x`` on one axis, and their weights.

    - nearest: ``rint(x)`` (half to even), then the padding on that index;
    - linear: border clamps ``x`` to [0, L - 1] and reflection mirrors it into the borders first;
      taps ``floor(x)`` and ``floor(x) + 1`` with weights ``1 - t`` and ``t``, each tap padded;
    - cubic: ``x`` as it is; taps ``floor(x) - 1 .. floor(x) + 2``, each padded, weighted
      ``far(t + 1), near(t), near(1 - t), far(2 - t)``;
    - linear and cubic on a 1-pixel axis with border or reflection: that pixel, weight 1.
    """
    if mode == "nearest":
        return [pad_index(int(np.rint(x)), length, padding_mode, align_corners)], [1.0]
    if length == 1 and padding_mode != "zeros":
        return [0], [1.0]  # every tap reads the one pixel, and the weights sum to 1
    if mode == "linear":
        if padding_mode == "border":
            x = min(max(x, 0.0), length - 1.0)
        elif padding_mode == "reflection":
            low, high = borders(length, align_corners)
            if x < low or x > high:
                x = reflect(x, low, high)
    f = math.floor(x)
    t = x - f
    if mode == "linear":
        first, weights = f, [1 - t, t]
    else:
        first, weights = f - 1, [cubic_far(t + 1), cubic_near(t), cubic_near(1 - t), cubic_far(2 - t)]
    taps = [pad_index(first + k, length, padding_mode, align_corners) for k in range(len(weights))]
    return taps, weights


def scaled(weight: float, values: np.ndarray) -> np.ndarray:
    """``weight * values``, a complex value part by part (numpy's complex product would also take
    0 × the other part: an infinite imaginary part would make the real part NaN)."""
    if values.dtype.kind != "c":
        return weight * values
    result = np.empty_like(values)
    result.real, result.imag = weight * values.real, weight * values.imag
    return result


def grid_sample(data: np.ndarray, grid: np.ndarray, mode: str = "linear", padding_mode: str = "zeros",
                align_corners: bool = False, fill: Any = 0) -> np.ndarray:
    """GridSample-22 by its definition: (N, C, D1..Dr) sampled at grid (N, D1out..Drout, r).

    Each point's coordinates (x innermost) are unnormalised in float64; a point with a coordinate
    that is not finite (or over data with an empty spatial axis) reads ``fill``. Otherwise
    :func:`axis_taps` gives each axis's taps and weights, every tap of the lattice reads its
    pixel (``fill`` where any index is None, but 0 where one of its weights is also exactly 0:
    the fill of the taps that do not count), and the lattice is contracted innermost axis
    first. Linear and cubic work in ``_numeric.working_dtype`` and end in
    ``_numeric.to_dtype``; nearest copies data's values.
    """
    batch, channels, *lengths = data.shape
    rank = len(lengths)
    points = grid.shape[1:-1]
    numeric = mode != "nearest"
    work = _numeric.working_dtype(data.dtype) if numeric else data.dtype
    fill_value = np.array("" if fill == 0 and data.dtype.kind in "UST" else fill, dtype=data.dtype)
    if data.dtype.name == "bfloat16":
        fill_value = _numeric.round_once(np.array(fill, dtype=np.float64), data.dtype)
    values = data.astype(work) if numeric else data
    fill_work = np.full(channels, fill_value.astype(work) if numeric else fill_value, dtype=work)
    zero_work = np.zeros(channels, dtype=work)
    # the grid's rounding per pixel of an axis's length: float64's epsilon, float32's for the rest
    epsilon = 2.0**-52 if grid.dtype.kind == "f" and grid.dtype.itemsize == 8 else 2.0**-23
    result = np.empty((batch, channels, *points), dtype=work)
    for n in range(batch):
        for point in np.ndindex(*points):
            g = [float(v) for v in grid[(n, *point)].astype(np.float64)][::-1]  # outermost axis first
            x = [unnormalize(v, length, align_corners) for v, length in zip(g, lengths)]
            if 0 in lengths or not all(math.isfinite(v) for v in x):  # no pixel, or no position
                result[(n, slice(None), *point)] = fill_work
                continue
            per_axis = [axis_taps(v, length, mode, padding_mode, align_corners) for v, length in zip(x, lengths)]
            # the taps that do not count: weight 0, or, at a point with a tap inside on every axis, a
            # tap outside whose weight is within the grid's rounding of 0 (its position is an ulp
            # or so past the last pixel centre, which it is meant to be on)
            near = all(any(i is not None for i in taps) for taps, _ in per_axis)
            negligible = [[w == 0 or (near and i is None and abs(w) <= epsilon * length) for i, w in zip(*taps)]
                          for taps, length in zip(per_axis, lengths)]
            # the lattice of tap values, (C, k1, ..., kr)
            lattice = np.empty((channels, *(len(taps) for taps, _ in per_axis)), dtype=work)
            for combo in itertools.product(*(range(len(taps)) for taps, _ in per_axis)):
                index = [per_axis[a][0][k] for a, k in enumerate(combo)]
                if None not in index:
                    read = values[(n, slice(None), *index)]
                elif any(negligible[a][k] for a, k in enumerate(combo)):
                    read = zero_work  # a tap that does not count reads fill times 0, even NaN or Inf
                else:
                    read = fill_work
                at: tuple[Any, ...] = (slice(None), *combo)
                lattice[at] = read
            if not numeric:
                result[(n, slice(None), *point)] = lattice.reshape(channels)
                continue
            for axis in reversed(range(rank)):  # innermost first: (C, k1, .., ka) -> (C, k1, .., k(a-1))
                weights = per_axis[axis][1]
                total = scaled(weights[0], lattice[..., 0])
                for k in range(1, len(weights)):
                    total = total + scaled(weights[k], lattice[..., k])
                lattice = total
            result[(n, slice(None), *point)] = lattice
    return _numeric.to_dtype(result, data.dtype) if numeric else result

# --- Resize (opset 19) ------------------------------------------------------------------------
#
# Per resized axis: the coordinate transformation maps an output index to a coordinate of the
# input, exactly (fractions); the coordinate gives the taps and their weights; the output is the
# weighted sum of the taps, one axis after another. The decisions where the spec is read one way
# of several are geomcli.ops.resize's Notes.


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
    if in_len == 1:  # every tap reads the one pixel, and the weights sum to 1 (0 if none is left)
        return [(0, 1.0 if sum(weights) != 0 else 0.0)]
    return [(min(max(j, 0), last), w) for j, w in zip(taps, weights)]


def resize(data: np.ndarray, output_shape: tuple[int, ...], scales: list[Fraction],
           rois: list[tuple[Fraction, Fraction]], *, mode: str, coordinate_transformation_mode: str,
           cubic_coeff_a: float, exclude_outside: bool, extrapolation_value: float, nearest_mode: str,
           antialias: bool) -> np.ndarray:
    """Resize-19 of ``data`` to ``output_shape``, one axis after another in order: ``scales`` and
    ``rois`` give every axis's scale (exact) and (start, end). An axis whose every output reads
    its own index with weight 1 is left as it is. Points outside the input on any axis
    (tf_crop_and_resize) read ``extrapolation_value``. An oracle for finite data: a tap of weight
    0 at a whole coordinate is left out here, where the kernel (as onnxruntime) counts it, so an
    inf beside it makes NaN there and not here (resize's docstring)."""
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
