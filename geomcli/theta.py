"""Affine matrices for AffineGrid from what a user types: numbers or transform flags."""

from __future__ import annotations

import math
from collections.abc import Sequence

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
