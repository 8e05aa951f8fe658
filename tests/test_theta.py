"""theta from inline numbers and transform flags."""

from __future__ import annotations

import math

import numpy as np
import pytest

from geomcli.errors import GeomError
from geomcli.theta import as_batch, from_numbers, from_transforms


def test_identity_by_default() -> None:
    assert from_transforms().tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]


def test_composition_order_scale_shear_rotate_translate() -> None:
    matrix = from_transforms(rotate=30, scale=(2.0, 3.0), translate=(0.25, -0.5), shear=(0.1, 0.2))
    c, s = math.cos(math.radians(30)), math.sin(math.radians(30))
    linear = np.array([[c, -s], [s, c]]) @ np.array([[1, 0.1], [0.2, 1]]) @ np.diag([2.0, 3.0])
    assert np.allclose(matrix[:, :2], linear, rtol=0, atol=1e-15)
    assert matrix[:, 2].tolist() == [0.25, -0.5]


def test_right_angle_is_exact() -> None:
    assert from_transforms(rotate=90).tolist() == [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0]]


def test_numbers_one_matrix_for_every_n_or_one_each() -> None:
    shared = from_numbers([1, 2, 3, 4, 5, 6], 2, 3)
    assert shared.shape == (3, 2, 3) and (shared == shared[0]).all()
    each = from_numbers(list(range(12)), 2, 2)
    assert each[1].tolist() == [[6, 7, 8], [9, 10, 11]]
    assert from_numbers(list(range(12)), 3, 1).shape == (1, 3, 4)
    with pytest.raises(GeomError, match=r"^--theta: a 2-D grid takes 6 numbers per matrix: 6 for one matrix; found 7$"):
        from_numbers(list(range(7)), 2, 1)
    with pytest.raises(GeomError, match=r"^--theta: a 3-D grid takes 12 numbers per matrix: 12 for one matrix shared "
                                        r"by every N, or 36 for one matrix per N = 3; found 6$"):
        from_numbers(list(range(6)), 3, 3)


def test_numbers_in_the_grid_dtype_broadcast_not_copied() -> None:
    shared = from_numbers([1, 2, 3, 4, 5, 6], 2, 10**9, dtype=np.float16)
    assert shared.dtype == np.float16 and shared.strides[0] == 0 and not shared.flags.writeable


def test_as_batch() -> None:
    assert as_batch(np.zeros((2, 3)), 2, "t.npy").shape == (1, 2, 3)
    assert as_batch(np.zeros((5, 3, 4)), 3, "t.npy").shape == (5, 3, 4)
    with pytest.raises(GeomError, match=r"t\.npy: theta must have shape \(N, 2, 3\) or \(2, 3\) .* found \(3, 4\)"):
        as_batch(np.zeros((3, 4)), 2, "t.npy")
