"""Each operator in its defining few lines, as the spec and ``shared/spec/NOTES.md`` write it:
readable, slow, and the oracle the tests hold the fast kernels to.

Nothing here validates its arguments: the public kernels do that first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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
