"""The public kernels on inputs found by a QA pass: each test shows one defect that was fixed.

Every call here is one a caller could make; each must give the right values or raise a
GeomError with one line, never another exception.
"""

from __future__ import annotations

import decimal
import tracemalloc
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import geomcli.ops._checks as checks
import geomcli.ops._numeric as numeric
import geomcli.ops.affine_grid as grid_ops
import geomcli.ops.center_crop_pad as crop_ops
import geomcli.ops.space_depth as space_depth_ops
from geomcli.errors import GeomError

# --------------------------------------------------------------------------------------------------
# out= between the input's items
# --------------------------------------------------------------------------------------------------


def _interleaved(input_shape: tuple[int, ...], output_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """An input on the even items of one buffer and an output on its odd items: no shared byte."""
    size = max(np.prod(input_shape), np.prod(output_shape))
    buffer = np.zeros(2 * int(size), np.float32)
    data = buffer[0::2][: int(np.prod(input_shape))].reshape(input_shape)
    data[...] = np.arange(data.size).reshape(input_shape)
    return data, buffer[1::2][: int(np.prod(output_shape))].reshape(output_shape)


INTERLEAVED: dict[str, tuple[Callable[..., np.ndarray], tuple[int, ...], tuple[int, ...], tuple[object, ...]]] = {
    "center_crop_pad": (crop_ops.center_crop_pad, (3, 5), (4, 4), ([4, 4],)),
    "space_to_depth": (space_depth_ops.space_to_depth, (1, 2, 4, 6), (1, 8, 2, 3), (2, "CRD")),
    "depth_to_space": (space_depth_ops.depth_to_space, (1, 8, 2, 3), (1, 2, 4, 6), (2, "DCR")),
}


@pytest.mark.parametrize("name", list(INTERLEAVED))
def test_an_out_between_the_inputs_items_is_taken(name: str) -> None:
    kernel, input_shape, output_shape, args = INTERLEAVED[name]
    data, out = _interleaved(input_shape, output_shape)
    expected = kernel(data.copy(), *args)
    before = data.copy()
    assert kernel(data, *args, out=out) is out
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(data, before)


def test_an_out_between_thetas_items_is_taken() -> None:
    buffer = np.zeros(24, np.float32)
    theta, out = buffer[0::2][:6].reshape(1, 2, 3), buffer[1::2].reshape(1, 2, 3, 2)
    theta[...] = [[[1, 0, 0], [0, 1, 0]]]
    expected = grid_ops.affine_grid(theta.copy(), [1, 1, 2, 3])
    assert grid_ops.affine_grid(theta, [1, 1, 2, 3], out=out) is out
    np.testing.assert_array_equal(out, expected)


def test_an_out_that_shares_one_byte_is_still_refused() -> None:
    buffer = np.zeros(64, np.uint8)
    data = buffer[0::2][:16].reshape(1, 1, 4, 4)
    out = buffer[30:46].reshape(1, 4, 2, 2)  # buffer[30] is data's last item
    message = r"^space_to_depth: out overlaps the input; give a separate array \(input shape \(1, 1, 4, 4\)\)$"
    with pytest.raises(GeomError, match=message):
        space_depth_ops.space_to_depth(data, 2, out=out)


def test_an_out_too_costly_to_tell_from_the_input_is_refused() -> None:
    buffer = np.zeros(1 << 22, np.uint8)
    primes = [3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97]
    data = as_strided(buffer, (2,) * 20, [p * 1009 for p in primes[:20]], writeable=False)
    out = as_strided(buffer[1:], (2,) * 20, [2 << i for i in range(20)])  # no two of its items meet
    message = r"^center_crop_pad: out may overlap the input: their strides are too costly to tell apart; give a"
    with pytest.raises(GeomError, match=message):
        crop_ops.center_crop_pad(data, [2] * 20, out=out)


# --------------------------------------------------------------------------------------------------
# fill
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "bool"])
@pytest.mark.parametrize("fill", [np.complex128(1 + 2j), np.complex64(3), 1 + 2j], ids=repr)
def test_a_complex_fill_for_a_real_type_is_refused(dtype: str, fill: object) -> None:
    # a numpy complex lost its imaginary part (float32 padded with 1.0, and a ComplexWarning)
    with pytest.raises(GeomError, match=r"^center_crop_pad: fill value .* does not fit dtype \w+ \(a complex value"):
        crop_ops.center_crop_pad(np.zeros(1, ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype), [3], fill=fill)


def test_a_signalling_decimal_nan_fill_is_refused() -> None:
    # bool compared False with Decimal("sNaN"), which raises decimal.InvalidOperation
    with pytest.raises(GeomError, match=r"^center_crop_pad: fill value Decimal\('sNaN'\) does not fit dtype bool"):
        crop_ops.center_crop_pad(np.zeros(1, bool), [3], fill=decimal.Decimal("sNaN"))


def test_a_fill_message_names_a_big_endian_bfloat16_as_such() -> None:
    big_endian = np.dtype(ml_dtypes.bfloat16).newbyteorder(">")
    with pytest.raises(GeomError, match=r"^center_crop_pad: fill value 'a' does not fit dtype >bfloat16 "):
        crop_ops.center_crop_pad(np.zeros(1, big_endian), [3], fill="a")


# --------------------------------------------------------------------------------------------------
# affine_grid: tall, narrow grids
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("spatial", "size"), [(2, [1, 1, 1 << 20, 1]), (3, [1, 1, 1 << 10, 1 << 10, 1])], ids=str)
def test_a_tall_narrow_grid_needs_no_float64_arrays_of_its_height(spatial: int, size: list[int]) -> None:
    # Each thread kept float64 rest terms, and ones, for every row of the grid: a 4 MiB float16
    # grid of 2**20 x 1 peaked at 132 MiB on two threads (2**24 x 1: 1.9 GB); now its one float64
    # coordinate axis (8 MiB) and its work (2 MiB blocks of sums, x and rest terms per thread).
    theta = np.zeros((1, spatial, spatial + 1), np.float16)
    out = np.empty(grid_ops.affine_grid_output_shape(theta.shape, size), np.float16)
    tracemalloc.start()
    try:
        grid_ops.affine_grid(theta, size, threads=2, out=out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak


GRID_SIZES = [[1, 1, 13, 1], [3, 2, 5, 7], [2, 1, 3, 4, 5], [1, 1, 5, 1, 3], [2, 1, 3, 7, 2]]


@pytest.mark.parametrize("dtype", ["float16", "float64", "bfloat16"])
@pytest.mark.parametrize("size", GRID_SIZES, ids=str)
@pytest.mark.parametrize("threads", [1, 3])
def test_grid_rows_in_chunks_of_rest_terms_keep_the_bits(
    dtype: str, size: list[int], threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of rest terms that start and end inside a plane (3-D) and a grid, NaN, Inf and -0.0
    in theta: the bits of _affine_grid_plain (a NaN may stand for any NaN: see
    test_affine_grid_rows_equal_the_plain_sums)."""
    grid_dtype = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    rng = np.random.default_rng(sum(size) + threads)
    spatial = len(size) - 2
    theta = (rng.standard_normal((size[0], spatial, spatial + 1)) * 10.0 ** rng.integers(-3, 4)).astype(grid_dtype)
    theta.reshape(-1)[::5] = -0.0
    theta.reshape(-1)[rng.integers(0, theta.size, 3)] = [np.nan, np.inf, -np.inf]
    for align_corners in (False, True):
        expected = np.empty(grid_ops.affine_grid_output_shape(theta.shape, size), grid_dtype)
        axes = [grid_ops._base_coordinates(n, align_corners) for n in reversed(expected.shape[1:-1])]
        grid_ops._affine_grid_plain(theta.astype(np.float64), axes, expected, 1)
        monkeypatch.setattr(grid_ops, "_GRID_ROWS_ELEMENTS", 1)
        monkeypatch.setattr(checks, "PARALLEL_BYTES", 1)
        for rows_per_block, rows_per_chunk in ((1, 1), (1, 3), (2, 5), (3, 3)):
            block_bytes = 8 * spatial * size[-1] * rows_per_block
            monkeypatch.setattr(grid_ops, "_GRID_BLOCK_BYTES", dict.fromkeys((2, 3), block_bytes))
            monkeypatch.setattr(grid_ops, "_GRID_REST_ROWS", rows_per_chunk)
            found = grid_ops.affine_grid(theta, size, align_corners, threads=threads)
            bits = space_depth_ops._UINTS[grid_dtype.itemsize]
            both_nan = np.isnan(found.astype(np.float64)) & np.isnan(expected.astype(np.float64))
            assert ((found.view(bits) == expected.view(bits)) | both_nan).all()


def _strided_grid(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An output whose coordinates are not adjacent rows: the plain path's."""
    return np.empty((*shape[:-1], shape[-1] + 1), dtype)[..., :-1]


def test_a_bfloat16_grid_on_the_plain_path_is_rounded_a_block_at_a_time() -> None:
    # round_once took the float64 sums of a whole batch slice: a 64 MiB grid in a strided output
    # peaked at 1.2 GB (4 MiB here: 75 MiB)
    theta = np.array([[[1.0, 0.5, 0.25], [0.125, 1.0, -0.5]]], ml_dtypes.bfloat16)
    out = _strided_grid((1, 1024, 1024, 2), theta.dtype)
    tracemalloc.start()
    try:
        grid_ops.affine_grid(theta, [1, 1, 1024, 1024], threads=2, out=out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak


@pytest.mark.parametrize("size", [[3, 1, 4, 7], [2, 1, 3, 4, 5], [1, 1, 1, 1], [40, 1, 1, 2]], ids=str)
@pytest.mark.parametrize("block", [1, 5, 7, 64])
def test_bfloat16_blocks_of_the_plain_path_keep_the_bits(
    size: list[int], block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(sum(size) + block)
    spatial = len(size) - 2
    theta = (rng.standard_normal((size[0], spatial, spatial + 1)) * 100).astype(ml_dtypes.bfloat16)
    theta.reshape(-1)[::4] = -0.0
    theta.reshape(-1)[rng.integers(0, theta.size)] = np.inf
    sums = np.empty(grid_ops.affine_grid_output_shape(theta.shape, size))
    axes = [grid_ops._base_coordinates(n, True) for n in reversed(sums.shape[1:-1])]
    grid_ops._affine_grid_plain(theta.astype(np.float64), axes, sums, 1)
    expected = numeric.round_once(sums, theta.dtype)
    monkeypatch.setattr(checks, "BLOCK_BYTES", 8 * block)
    for threads in (1, 3):
        out = _strided_grid(sums.shape, theta.dtype)
        grid_ops.affine_grid(theta, size, True, threads=threads, out=out)
        assert out.astype(np.float32).tobytes() == expected.astype(np.float32).tobytes()


# --- masked arrays, outputs whose items meet, dtypes of the shape helpers --------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda x: crop_ops.center_crop_pad(x, [1, 1, 5, 5]),
        lambda x: space_depth_ops.space_to_depth(x, 1),
        lambda x: space_depth_ops.depth_to_space(x, 1),
    ],
    ids=["crop-pad", "space-to-depth", "depth-to-space"],
)
def test_a_masked_input_is_refused_not_stripped_of_its_mask(call: Callable[[np.ndarray], object]) -> None:
    """The QA report: the mask was dropped in silence, and the result held what lay under it."""
    masked = np.ma.masked_array(np.arange(9.0).reshape(1, 1, 3, 3), mask=np.eye(3, dtype=bool)[None, None])
    with pytest.raises(GeomError, match=r": input is a masked array, whose mask would be lost; give its \.filled"):
        call(masked)


def test_a_masked_theta_or_out_is_refused() -> None:
    theta = np.ma.masked_array([[[1.0, 0, 0], [0, 1, 0]]], mask=False)
    with pytest.raises(GeomError, match=r"^affine_grid: theta is a masked array"):
        grid_ops.affine_grid(theta, [1, 1, 2, 2])
    out = np.ma.masked_array(np.zeros((1, 1, 2, 2)), mask=True)
    with pytest.raises(GeomError, match=r"^center_crop_pad: out is a masked array, whose mask would not follow"):
        crop_ops.center_crop_pad(np.ones((1, 1, 2, 2)), [1, 1, 2, 2], out=out)
    assert out.mask.all()


@pytest.mark.parametrize(
    ("shape", "strides"),
    [((1, 4, 2, 2), (0, 0, 8, 4)), ((1, 4, 2, 2), (64, 4, 8, 4)), ((1, 4, 2, 2), (64, 16, 4, 12))],
    ids=["zero-stride", "rows-over-channels", "columns-over-rows"],
)
def test_an_out_whose_items_share_memory_is_refused(shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
    """The QA report: a writable out with a zero stride was taken, and threads wrote one element twice."""
    out = as_strided(np.zeros(64, np.float32), shape, strides)
    with pytest.raises(GeomError, match=r"^space_to_depth: out has elements that share memory \(strides "):
        space_depth_ops.space_to_depth(np.ones((1, 1, 4, 4), np.float32), 2, out=out)


def test_an_out_whose_items_interleave_without_meeting_is_taken() -> None:
    buffer = np.zeros(64, np.float32)
    out = as_strided(buffer, (1, 4, 2, 2), (256, 4, 32, 16))  # channels between the columns
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    assert space_depth_ops.space_to_depth(x, 2, out=out) is out
    np.testing.assert_array_equal(out, space_depth_ops.space_to_depth(x, 2))


@pytest.mark.parametrize(
    "call",
    [
        lambda: crop_ops.center_crop_pad_output_shape((3,), [1], dtype=object),
        lambda: space_depth_ops.space_to_depth_output_shape((1, 1, 2, 2), 2, dtype="datetime64[s]"),
        lambda: space_depth_ops.depth_to_space_output_shape((1, 4, 1, 1), 2, dtype=[("a", "<f4")]),
        lambda: grid_ops.affine_grid_output_shape((1, 2, 3), [1, 1, 2, 2], dtype=np.int32),
    ],
    ids=["object", "datetime", "record", "int-grid"],
)
def test_the_shape_helpers_refuse_a_dtype_their_kernel_refuses(call: Callable[[], object]) -> None:
    """The QA report: only the item size was used, so an object dtype was sized as 8 bytes."""
    with pytest.raises(GeomError, match=r"^\w+: the output must be .*, found dtype .* \((input|theta) shape "):
        call()


@pytest.mark.parametrize(("dtype", "kind"), [("uint8", "numeric"), ("complex64", "numeric"), ("bool", "bool")])
def test_a_text_fill_for_a_number_says_so_not_pythons_parse_error(dtype: str, kind: str) -> None:
    with pytest.raises(GeomError, match=rf"^center_crop_pad: fill value '' does not fit dtype {dtype} "
                                        rf"\(text for a {kind} type; input shape \(1,\)\)$"):
        crop_ops.center_crop_pad(np.zeros(1, dtype), [3], fill="")


def test_an_empty_out_with_a_zero_stride_is_taken() -> None:
    """No items, none to share memory: the reviewer's case was refused."""
    out = as_strided(np.zeros(4, np.float32), (1, 1, 0, 4), (0, 0, 0, 0))
    assert crop_ops.center_crop_pad(np.ones((1, 1, 3, 4), np.float32), [1, 1, 0, 4], out=out) is out


def test_an_out_over_theta_is_said_to_overlap_theta() -> None:
    buffer = np.zeros(64, np.float32)
    theta = buffer[:6].reshape(1, 2, 3)
    theta[...] = [[[1, 0, 0], [0, 1, 0]]]
    with pytest.raises(GeomError, match=r"^affine_grid: out overlaps theta; give a separate array \(theta shape"):
        grid_ops.affine_grid(theta, [1, 1, 4, 4], out=buffer[4:36].reshape(1, 4, 4, 2))
