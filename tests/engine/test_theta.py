"""theta from inline numbers and transform flags."""

from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest

from geomcli.engine.theta import (
    as_batch,
    cast,
    check_invertible,
    check_numbers,
    fit_batch,
    for_warp,
    from_numbers,
    from_transforms,
    given_flags,
    recorded,
)
from geomcli.errors import GeomError, PlanError


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


def test_fit_batch_one_matrix_for_every_n_or_one_each() -> None:
    shared = fit_batch(np.ones((1, 2, 3)), 4, "t.npy", "--size's N = 4")
    assert shared.shape == (4, 2, 3) and shared.strides[0] == 0
    each = np.arange(24.0).reshape(4, 2, 3)
    assert fit_batch(each, 4, "t.npy", "--size's N = 4") is each
    with pytest.raises(GeomError, match=r"^t\.npy: theta holds 3 matrices for x\.npy's N = 2; give one matrix, or one "
                                        r"per N$"):
        fit_batch(np.ones((3, 3, 4)), 2, "t.npy", "x.npy's N = 2")


def test_a_warps_numbers_make_matrices_for_each_rank_they_fit() -> None:
    twelve = for_warp(None, tuple(range(12)), (0.0, (1.0,), (0.0, 0.0), (0.0, 0.0)), None, 10**6)
    assert twelve.of_rank(2).shape == (2, 2, 3) and twelve.of_rank(3).shape == (1, 3, 4)
    assert twelve.of_rank(3).dtype == np.float32
    six = for_warp(None, tuple(range(6)), (0.0, (1.0,), (0.0, 0.0), (0.0, 0.0)), "float64", 10**6)
    assert six.of_rank(2).tolist() == [[[0, 1, 2], [3, 4, 5]]]
    with pytest.raises(GeomError, match=r"^--theta: a 3-D warp \(of a rank-5 tensor\) takes 12 numbers per matrix, "
                                        r"found 6$"):
        six.of_rank(3)
    flags = for_warp(None, None, (90.0, (1.0,), (0.0, 0.0), (0.0, 0.0)), None, 10**6)
    assert flags.of_rank(2).tolist() == [[[0, -1, 0], [1, 0, 0]]]
    with pytest.raises(GeomError, match=r"^--rotate, --scale, --shear and --translate make 2-D matrices"):
        flags.of_rank(3)
    with pytest.raises(PlanError, match=r"^a 2-D warp takes 6 numbers per matrix, a 3-D warp \(of a rank-5 tensor\) "
                                        r"12; found 9$"):
        for_warp(None, tuple(range(9)), (0.0, (1.0,), (0.0, 0.0), (0.0, 0.0)), None, 10**6)


def test_huge_flags_keep_their_value_without_a_warning() -> None:
    # rounding to 15 decimals multiplies by 1e15: past 1.8e293 that overflowed to inf
    assert from_transforms(scale=(1e300,)).tolist() == [[1e300, 0.0, 0.0], [0.0, 1e300, 0.0]]
    assert from_transforms(translate=(-1e308, 0.0)).tolist() == [[1.0, 0.0, -1e308], [0.0, 1.0, 0.0]]


def test_flags_that_overflow_make_inf_silently_for_the_caller_to_refuse() -> None:
    assert not np.isfinite(from_transforms(scale=(1e200,), shear=(1e200, 0.0))).all()


@pytest.mark.parametrize("dtype, largest, over", [
    (np.float16, 65504.0, 65520.0), (np.float32, 3.4028234663852886e38, 3.5e38),
    (ml_dtypes.bfloat16, 3.3895313892515355e38, 3.4e38),
])
def test_cast_refuses_a_finite_value_the_grid_dtype_turns_inf(dtype: type, largest: float, over: float) -> None:
    fits = cast(np.array([[largest, -largest, np.inf], [-np.inf, np.nan, 0.5]]), np.dtype(dtype))
    assert fits.dtype == np.dtype(dtype) and fits.astype(np.float64)[0, :2].tolist() == [largest, -largest]
    for value in (over, -over):
        message = f"theta value {value:g} does not fit the {np.dtype(dtype)} grid (largest ±{largest:g})"
        with pytest.raises(GeomError, match=f"^{re.escape(message)}$"):
            cast(np.array([[1.0, value]]), np.dtype(dtype))


def test_from_numbers_refuses_what_the_grid_dtype_cannot_hold() -> None:
    with pytest.raises(GeomError, match=r"^theta value 1e\+39 does not fit the float32 grid"):
        from_numbers([1e39, 0, 0, 0, 1, 0], 2, 4, dtype=np.float32)


@pytest.mark.parametrize("numbers, flags, option, found", [
    ((1, 0, 0, 0, 1, math.inf), (0.0, (1.0,), (0.0, 0.0), (0.0, 0.0)), "--theta", "inf"),
    (None, (math.nan, (1.0,), (0.0, 0.0), (0.0, 0.0)), "--rotate", "nan"),
    (None, (0.0, (1.0, -math.inf), (0.0, 0.0), (0.0, 0.0)), "--scale", "-inf"),
    (None, (0.0, (1.0,), (0.0, math.inf), (0.0, 0.0)), "--translate", "inf"),
    (None, (0.0, (1.0,), (0.0, 0.0), (math.nan, 0.0)), "--shear", "nan"),
])
def test_check_numbers_names_the_option(numbers: tuple[float, ...] | None, flags: tuple[object, ...], option: str,
                                        found: str) -> None:
    with pytest.raises(PlanError, match=rf"^every number must be finite, found {found}\b") as caught:
        check_numbers(numbers, flags)
    assert caught.value.options == [option]


def test_check_numbers_takes_finite_numbers() -> None:
    check_numbers((1e308, -1e308, 0, 0, 1, 0), (1e308, (1e308, -1e308), (0.0, 0.0), (0.0, 0.0)))


@pytest.mark.parametrize("flags, message", [
    ((0.0, (0.0,), (0.0, 0.0), (0.0, 0.0)),
     "--scale 0 makes a singular matrix: every output pixel would sample one point"),
    ((0.0, (0.0, 1.0), (0.5, 0.0), (0.0, 0.0)),
     "--scale 0,1 --translate 0.5,0 make a singular matrix: every output pixel would sample one line of the input"),
    # exactly singular in the real numbers, not quite in float64 once turned
    ((30.0, (1.0,), (0.0, 0.0), (1.0, 1.0)),
     "--rotate 30 --shear 1,1 make a singular matrix: every output pixel would sample one line of the input"),
])
def test_check_invertible_refuses_flags_that_make_a_singular_matrix(flags: tuple[object, ...], message: str) -> None:
    with pytest.raises(PlanError, match=f"^{re.escape(message)}$"):
        check_invertible(flags)


def test_a_tiny_scale_or_shift_is_kept_not_rounded_to_zero() -> None:
    """The turn alone is rounded to 15 decimals: the matrix was, which made --scale 1e-50 singular
    in float64 (refused) and --translate 1e-20 no shift."""
    assert from_transforms(scale=(1e-50,), translate=(1e-20, 0.0)).tolist() == [[1e-50, 0.0, 1e-20],
                                                                                  [0.0, 1e-50, 0.0]]
    assert from_transforms(rotate=90, scale=(1e-50,)).tolist() == [[0.0, -1e-50, 0.0], [1e-50, 0.0, 0.0]]
    check_invertible((0.0, (1e-50,), (0.0, 0.0), (0.0, 0.0)))  # regular in float64, where its grid is made


@pytest.mark.parametrize("matrix, dtype, message", [
    # float16's smallest subnormal is 6e-8: 1e-8 rounds to 0, a grid of one point
    ([[1e-8, 0, 0], [0, 1e-8, 0]], np.float16, "theta is singular once rounded to float16 (its numbers are not): "
                                               "every output pixel would sample one point"),
    ([[1e-50, 0, 0], [0, 1e-50, 0]], np.float32, "theta is singular once rounded to float32 (its numbers are "
                                                 "not): every output pixel would sample one point"),
    # shear 1,0.9999: 0.9999 is 1 in float16 and bfloat16, rows alike
    ([[1, 1, 0], [0.9999, 1, 0]], ml_dtypes.bfloat16, "theta is singular once rounded to bfloat16"),
])
def test_cast_refuses_a_matrix_its_rounding_makes_singular(matrix: list[list[float]], dtype: type,
                                                           message: str) -> None:
    with pytest.raises(GeomError, match=f"^{re.escape(message)}"):
        cast(np.array([matrix]), np.dtype(dtype))


def test_cast_names_the_matrix_made_singular_by_its_n() -> None:
    matrices = np.array([[[1, 0, 0], [0, 1, 0]], [[1e-8, 0, 0], [0, 1, 0]]])
    with pytest.raises(GeomError, match=r"^theta for N = 1 is singular once rounded to float16 .* one line of the "):
        cast(matrices, np.dtype(np.float16))
    shared = np.broadcast_to(matrices[1:], (3, 2, 3))  # one matrix for every N
    with pytest.raises(GeomError, match=r"^theta is singular once rounded to float16"):
        cast(shared, np.dtype(np.float16))


def test_cast_takes_a_matrix_singular_in_its_own_numbers_and_one_that_stays_regular() -> None:
    assert cast(np.zeros((1, 2, 3)), np.dtype(np.float16)).tolist() == np.zeros((1, 2, 3)).tolist()  # asked for
    assert cast(np.array([[[1e-4, 0, 0], [0, 1e-4, 0]]]), np.dtype(np.float16))[0, 0, 0] == np.float16(1e-4)
    assert np.isnan(cast(np.array([[[np.nan, 0, 0], [0, 1e-8, 0]]]), np.dtype(np.float16))[0, 0, 0])


def test_check_invertible_takes_the_identity_and_regular_or_overflowing_flags() -> None:
    check_invertible((0.0, (1.0,), (0.0, 0.0), (0.0, 0.0)))
    check_invertible((30.0, (0.5, 2.0), (0.1, 0.2), (0.3, -0.2)))
    check_invertible((0.0, (1e300,), (0.0, 0.0), (1e300, 0.0)))  # the overflow is the caller's to name


@pytest.mark.parametrize("flags, expected", [
    ((0.0, (1.0,), (0.0, 0.0), (0.0, 0.0)), {}),
    ((10.0, (1.0,), (0.0, 0.0), (0.0, 0.0)), {"rotate": 10.0}),
    ((0.0, (2.0, 0.5), (0.0, -0.25), (0.1, 0.0)),
     {"scale": [2.0, 0.5], "translate": [0.0, -0.25], "shear": [0.1, 0.0]}),
])
def test_given_flags_are_those_that_move_anything(flags: tuple[object, ...], expected: dict[str, object]) -> None:
    assert given_flags(flags) == expected


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, ml_dtypes.bfloat16])
def test_a_recorded_matrix_is_the_numbers_used_as_plain_floats(dtype: type) -> None:
    used = from_transforms(rotate=10.0).astype(dtype)
    rows = recorded(used)
    assert all(type(number) is float for row in rows for number in row)  # JSON writes them as they are
    assert np.array_equal(np.array(rows, dtype=np.float64).astype(dtype), used)
