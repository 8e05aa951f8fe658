"""Affine matrices for AffineGrid from what a user types: numbers or transform flags."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from geomcli.errors import GeomError


def as_batch(theta: np.ndarray, spatial: int, source: str) -> np.ndarray:
    """(N, s, s+1) matrices from a file's array; a single (s, s+1) matrix becomes N = 1."""
    expected = (spatial, spatial + 1)
    if theta.shape == expected:
        theta = theta[np.newaxis]
    if theta.ndim != 3 or theta.shape[1:] != expected:
        raise GeomError(f"{source}: theta must have shape (N, {expected[0]}, {expected[1]}) or {expected} "
                        f"for a {spatial}-D grid, found {theta.shape}")
    return theta


def check_count(numbers: Sequence[float], spatial: int, batch: int) -> None:
    """Refuse inline numbers that are neither one matrix nor one per N."""
    per_matrix = spatial * (spatial + 1)
    if len(numbers) not in (per_matrix, per_matrix * batch):
        each = f", or {per_matrix * batch} for one matrix per N = {batch}" if batch > 1 else ""
        raise GeomError(f"--theta: a {spatial}-D grid takes {per_matrix} numbers per matrix: {per_matrix} "
                        f"for one matrix{' shared by every N' if batch > 1 else ''}{each}; found {len(numbers)}")


def from_numbers(numbers: Sequence[float], spatial: int, batch: int, *, dtype: DTypeLike = np.float64) -> np.ndarray:
    """Inline matrices, row by row: one matrix for every N (a read-only broadcast view, one
    matrix in memory), or one per N; in ``dtype``."""
    check_count(numbers, spatial, batch)
    matrices = np.array(numbers, dtype=np.float64).reshape(-1, spatial, spatial + 1).astype(dtype)
    return np.broadcast_to(matrices, (batch, spatial, spatial + 1))


def from_transforms(rotate: float = 0.0, scale: Sequence[float] = (1.0,), translate: Sequence[float] = (0.0, 0.0),
                    shear: Sequence[float] = (0.0, 0.0)) -> np.ndarray:
    """One 2-D matrix T·R·H·S: scale first, then shear, rotate (degrees, counter-clockwise
    in x/y), then translate. theta maps output positions to sampling positions.

    >>> from_transforms(scale=(2.0,), translate=(0.5, 0.0)).tolist()
    [[2.0, 0.0, 0.5], [0.0, 2.0, 0.0]]
    """
    sx, sy = (scale[0], scale[0]) if len(scale) == 1 else scale
    angle = math.radians(rotate)
    cos, sin = math.cos(angle), math.sin(angle)
    scaling = np.diag([sx, sy, 1.0])
    shearing = np.array([[1.0, shear[0], 0.0], [shear[1], 1.0, 0.0], [0.0, 0.0, 1.0]])
    rotation = np.array([[cos, -sin, 0.0], [sin, cos, 0.0], [0.0, 0.0, 1.0]])
    translation = np.array([[1.0, 0.0, translate[0]], [0.0, 1.0, translate[1]], [0.0, 0.0, 1.0]])
    matrix = translation @ rotation @ shearing @ scaling
    # Exact zeros and ones for the common angles, not 6e-17.
    exact: np.ndarray = np.round(matrix[:2], 15) + 0.0
    return exact


GRID_DTYPES = ("float32", "float64", "float16", "bfloat16")


def is_file(text: str | None) -> bool:
    """Whether --theta names a file (.npy/.tiff, or any path that exists) rather than numbers."""
    return text is not None and (os.path.splitext(text)[1].lower() in (".npy", ".tif", ".tiff")
                                 or os.path.exists(text))


def resolve(size: tuple[int, ...] | None, like: str | None, theta_file: str | None,
            numbers: Sequence[float] | None, flags: tuple[Any, ...], dtype: str | None, layout: str | None,
            max_pixels: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """theta as (N, s, s+1) in the grid dtype, and the grid size it goes with.

    The size comes from ``size`` (N,C,H,W or N,C,D,H,W) or the file ``like`` (N from theta); theta
    from ``theta_file``, inline ``numbers`` or the 2-D transform ``flags``. The grid's size is
    checked against ``max_pixels`` before theta is built: N matrices could be gigabytes themselves.
    """
    from geomcli import io, kernels
    from geomcli import layout as layouts

    if like is not None:
        header = io.read_header(like, frames="first")  # an animation's size is its frames' size
        try:
            chosen = layouts.resolve_layout(header.shape, layout, header.layout) if len(header.shape) != 5 else "NCDHW"
        except GeomError as error:
            raise GeomError(f"{like}: {error}") from error
        lengths = dict(zip(chosen, header.shape, strict=True))
        spatial_sizes = [lengths.get("C", 1)] + [lengths[axis] for axis in "DHW" if axis in lengths]
    else:
        assert size is not None
        spatial_sizes = list(size[1:])
    spatial = len(spatial_sizes) - 1
    matrices: np.ndarray | None = None
    if theta_file is not None:
        loaded = io.read_array(theta_file, max_pixels=max_pixels, mmap=False)
        if loaded.data.dtype.kind != "f" and loaded.data.dtype.name != "bfloat16":
            raise GeomError(f"{theta_file}: theta must hold floats, found {loaded.data.dtype}")
        matrices = as_batch(loaded.data, spatial, theta_file)
        dtype = dtype or str(matrices.dtype)
        batch = matrices.shape[0]
    else:
        batch = size[0] if size is not None else 1
        if numbers is not None:
            if size is None:
                batch = max(1, len(numbers) // (spatial * (spatial + 1)))
        elif spatial == 2:
            numbers = tuple(from_transforms(*flags).ravel().tolist())
        elif from_transforms(*flags).tolist() != from_transforms().tolist():
            raise GeomError(f"{like}: a rank-5 file makes a 3-D grid, and --rotate, --scale, --shear and "
                            "--translate make 2-D matrices; give --theta")
        else:
            numbers = tuple(1.0 if row == col else 0.0 for row in range(3) for col in range(4))
        check_count(numbers, spatial, batch)
    grid_size = tuple(size) if size is not None else (batch, *spatial_sizes)
    shape = kernels.affine_grid_output_shape((batch, spatial, spatial + 1), grid_size)
    io.check_size(shape, max_pixels, f"the output {shape}")
    if matrices is None:
        assert numbers is not None
        # one matrix broadcast to N stays one matrix in memory, in the grid dtype
        return from_numbers(numbers, spatial, batch, dtype=grid_dtype(dtype or "float32")), grid_size
    return matrices.astype(grid_dtype(dtype or "float32")), grid_size


def grid_dtype(name: str) -> np.dtype:
    """The numpy dtype of a --dtype name (bfloat16 from ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes

        bfloat16: np.dtype = np.dtype(ml_dtypes.bfloat16)
        return bfloat16
    return np.dtype(name)
