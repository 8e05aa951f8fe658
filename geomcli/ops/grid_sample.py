"""GridSample (opset 22): sample data at the positions a grid gives, in 1, 2, 3 or more
spatial dimensions, with nearest, N-linear or N-cubic interpolation.

Validation first (shapes, dtypes, attributes, ``fill``, ``out``), then the compute in slabs of
output points, each slab's work arrays a few MiB whatever the output's size (so a caller can
also hand the kernel one slab of a grid and of an ``out`` array at a time). In a slab the
positions, the weights and one flat index per point are made once, in float64; the points whose
taps all lie inside the data (most of them) take every channel's taps with one ``np.take`` per
row of taps at fixed offsets from that index. The others (a band along the edges, and points
wholly outside) are kept until a slab's worth has gathered and done tap by tap, each tap padded
on its own. :func:`geomcli.ops.reference.grid_sample` is the same arithmetic one point at a
time; the tests hold the two to the same bits.

Where the compiled kernel (:mod:`geomcli.ops._fast`) is built and covers the case
(:func:`_compiled_kind` decides), it does each slab instead, every point in one pass with the
GIL released, with the same bits again; the numpy path does the rest.

:func:`affine_grid_sample` is grid_sample of AffineGrid's grid (the warp command): where the
compiled kernel covers the case it makes each point's coordinates from theta as it goes, the
same float64 sums rounded once as affine_grid's, instead of writing a grid and reading it back.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal, Protocol, TypeAlias

import numpy as np

from geomcli.errors import GeomError
from geomcli.ops import _numeric
from geomcli.ops._checks import (
    GRID_DTYPES,
    GRID_TEXT,
    TENSOR_DTYPES,
    TENSOR_TEXT,
    Flag,
    Int,
    as_out,
    as_threads,
    check_addressable,
    dtype_text,
    is_masked,
    new_output,
    shown,
    to_array,
)
from geomcli.ops.affine_grid import affine_grid, affine_grid_checked, affine_grid_output_shape

_compiled: ModuleType | None
try:
    from geomcli.ops._fast import _grid_sample as _compiled
except ImportError:  # not built: a checkout that was never installed, or no C compiler at install time
    _compiled = None

__all__ = ["affine_grid_sample", "grid_sample", "grid_sample_output_shape"]

Shape = tuple[int, ...]

_FUNC = "grid_sample"
Mode: TypeAlias = Literal["linear", "nearest", "cubic"]
PaddingMode: TypeAlias = Literal["zeros", "border", "reflection"]
_MODES = ("linear", "nearest", "cubic")
_OPSET16_MODES = {"bilinear": "linear", "bicubic": "cubic"}
_PADDINGS = ("zeros", "border", "reflection")
_STRING_KINDS = "UST"
_CUBIC_A = -0.75  # Keys' parameter, as onnxruntime and PyTorch

# The float64 work arrays of one slab of output points, per thread: small enough to stay in the
# caches between the passes over them, big enough that numpy's per-call cost is lost.
_SLAB_BYTES = 1 << 22
# Below this many output values (points x channels) the calling thread does it all.
_PARALLEL_VALUES = 1 << 16
# The compiled kernel's pieces: at most this many points (whole output rows where they fit), fewer
# where the channels make a piece's converted grid or staged output pass _SLAB_BYTES; enough
# pieces for the threads to share the work evenly.
_COMPILED_POINTS = 1 << 16
# What the compiled kernel interpolates (linear, cubic) in float64 as the reference does; native
# byte order. Nearest copies items of any fixed size.
_COMPILED_NUMERIC = frozenset(
    ["float16", "float32", "float64", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"]
)


# --- validation -----------------------------------------------------------------------


def _where(data_shape: Shape, grid_shape: Shape) -> str:
    return f"data shape {data_shape}, grid shape {grid_shape}"


def _as_shape(values: Any, name: str) -> Shape:
    """A shape: a sequence of integers >= 0."""
    try:
        shape = tuple(values)
    except TypeError as error:
        raise GeomError(f"{_FUNC}: {name} must be a sequence of integers, found {shown(values)}") from error
    for length in shape:
        if isinstance(length, (bool, np.bool_)) or not isinstance(length, (int, np.integer)) or length < 0:
            raise GeomError(f"{_FUNC}: {name} must hold integers >= 0, found {shown(shape)}")
    return tuple(int(length) for length in shape)


def grid_sample_output_shape(data_shape: Sequence[int], grid_shape: Sequence[int]) -> Shape:
    """The shape :func:`grid_sample` returns for these shapes, after validating them.

    Data (N, C, D1, ..., Dr) and a grid (N, D1_out, ..., Dr_out, r) give (N, C, D1_out, ...,
    Dr_out), for any r >= 1. A shape no numpy array can have is refused.

    >>> grid_sample_output_shape((2, 3, 10, 20), (2, 5, 6, 2))
    (2, 3, 5, 6)
    >>> grid_sample_output_shape((1, 1, 7), (1, 4, 1))
    (1, 1, 4)
    """
    data = _as_shape(data_shape, "data shape")
    grid = _as_shape(grid_shape, "grid shape")
    where = _where(data, grid)
    if len(data) < 3:
        raise GeomError(f"{_FUNC}: data must have rank >= 3 (N, C, D1, ..., Dr), found rank {len(data)} ({where})")
    rank = len(data) - 2
    if len(grid) != rank + 2:
        raise GeomError(
            f"{_FUNC}: grid must have rank {rank + 2} (N, {rank} output lengths, {rank}) for data of rank "
            f"{rank + 2}, found rank {len(grid)} ({where})"
        )
    if grid[-1] != rank:
        raise GeomError(
            f"{_FUNC}: grid's last axis must hold {rank} coordinates (x first: innermost axis first) for "
            f"{rank} spatial axes, found {grid[-1]} ({where})"
        )
    if grid[0] != data[0]:
        raise GeomError(f"{_FUNC}: grid's batch N = {grid[0]} does not match data's N = {data[0]} ({where})")
    output = (data[0], data[1], *grid[1:-1])
    if math.prod(length or 1 for length in output) > sys.maxsize:
        raise GeomError(f"{_FUNC}: the output shape {output} has more elements than numpy can address ({where})")
    return output


def _as_array(value: Any, name: str) -> np.ndarray:
    array = to_array(value, _FUNC, name)
    if is_masked(array):
        raise GeomError(f"{_FUNC}: {name} is a masked array, whose mask would be lost; give its .filled(value) "
                        f"({name} shape {array.shape})")
    return array


def _check_dtypes(data: np.ndarray, grid: np.ndarray) -> None:
    where = _where(data.shape, grid.shape)
    if data.dtype.name not in TENSOR_DTYPES and data.dtype.kind not in _STRING_KINDS:
        raise GeomError(f"{_FUNC}: data must be {TENSOR_TEXT}, found dtype {dtype_text(data.dtype)} ({where})")
    if grid.dtype.name not in GRID_DTYPES:
        raise GeomError(f"{_FUNC}: grid must be {GRID_TEXT}, found dtype {dtype_text(grid.dtype)} ({where})")


def _as_mode(mode: Any, where: str) -> str:
    if isinstance(mode, str) and mode in _OPSET16_MODES:
        raise GeomError(
            f"{_FUNC}: mode {mode!r} is opset 16's name; use {_OPSET16_MODES[mode]!r} "
            f"(mode must be 'linear', 'nearest' or 'cubic'; {where})"
        )
    if not isinstance(mode, str) or mode not in _MODES:
        raise GeomError(f"{_FUNC}: mode must be 'linear', 'nearest' or 'cubic', found {shown(mode)} ({where})")
    return mode


def _as_padding(padding_mode: Any, where: str) -> str:
    if not isinstance(padding_mode, str) or padding_mode not in _PADDINGS:
        raise GeomError(
            f"{_FUNC}: padding_mode must be 'zeros', 'border' or 'reflection', found {shown(padding_mode)} ({where})"
        )
    return padding_mode


def _as_flag(align_corners: Any, where: str) -> bool:
    if isinstance(align_corners, (np.bool_, np.integer)):
        align_corners = align_corners.item()
    if not isinstance(align_corners, int) or align_corners not in (0, 1):
        raise GeomError(f"{_FUNC}: align_corners must be a bool or 0/1, found {shown(align_corners)} ({where})")
    return bool(align_corners)


def check_mode(mode: Any, dtype: np.dtype | str) -> None:
    """Refuse, as :func:`grid_sample` would, a mode that data of ``dtype`` cannot take (bool and
    strings: nearest only): for a caller that knows data's dtype before its values (a file's header).

    >>> check_mode("linear", "bool")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    geomcli.errors.GeomError: grid_sample: mode 'linear' interpolates numbers; bool data takes mode 'nearest' only ...
    """
    where = "judged from data's dtype alone"
    _check_mode(_as_mode(mode, where), np.dtype(dtype), where)


def _check_mode(mode: str, dtype: np.dtype, where: str) -> None:
    if mode != "nearest" and dtype.kind in "b" + _STRING_KINDS:
        raise GeomError(
            f"{_FUNC}: mode {mode!r} interpolates numbers; {dtype_text(dtype)} data takes mode 'nearest' only "
            f"({where})"
        )


def check_fill(fill: Any, dtype: np.dtype | str, *, name: str = f"{_FUNC}: fill") -> np.ndarray:
    """``fill`` as :func:`grid_sample` takes it for data of ``dtype`` (a 0-d array of it), or the
    refusal it would raise of a value that dtype cannot hold: for a caller that knows data's dtype
    before its values (a file's header). ``name`` is the value's, as the refusal begins with it
    (another operator's value held to the same rule: resize's extrapolation value on a file).

    >>> check_fill(255, "uint8"), check_fill(0.1, "float16")
    (array(255, dtype=uint8), array(0.1, dtype=float16))
    >>> check_fill(256, "uint8")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    geomcli.errors.GeomError: grid_sample: fill 256 does not fit data's dtype uint8: ...
    """
    return _as_fill(fill, np.dtype(dtype), "judged from data's dtype alone", name)


def _as_fill(fill: Any, dtype: np.dtype, where: str, name: str = f"{_FUNC}: fill") -> np.ndarray:
    """``fill`` as a 0-d array of ``dtype``, refused unless the dtype holds it: an integer in
    range (a float only if whole), a real or complex number that stays finite if it was, True/False
    (0/1) for bool, text that fits for strings. 0, the default, is "" for strings."""
    if isinstance(fill, np.ndarray) and fill.ndim == 0 and not is_masked(fill):
        fill = fill[()]
    refusal = f"{name} {shown(fill)} does not fit data's dtype {dtype_text(dtype)}"
    is_text = isinstance(fill, (str, bytes, np.str_, np.bytes_))
    is_number = isinstance(fill, (int, float, complex, np.number, np.bool_))
    if not (is_text or is_number):
        raise GeomError(f"{refusal}: fill must be one number or string ({where})")
    if dtype.kind in _STRING_KINDS:
        if is_number and not isinstance(fill, (bool, np.bool_)) and fill == 0:
            fill = b"" if dtype.kind == "S" else ""
        elif not is_text:
            raise GeomError(f"{refusal}: a number for string data ({where})")
        try:
            value = np.array(fill, dtype=dtype)
        except (ValueError, TypeError) as error:  # text that bytes cannot encode, say
            raise GeomError(f"{refusal} ({' '.join(str(error).split())}; {where})") from error
        kept = value.item()
        if kept != fill and not (isinstance(kept, bytes) and isinstance(fill, str) and kept.decode("latin-1") == fill):
            raise GeomError(f"{refusal}: it would be cut to {shown(kept)} ({where})")
        return value
    if is_text:
        raise GeomError(f"{refusal}: text for numeric data ({where})")
    if isinstance(fill, (complex, np.complexfloating)) and dtype.kind != "c":
        raise GeomError(f"{refusal}: a complex value for real data ({where})")
    if dtype.kind in "biu":
        whole = isinstance(fill, (int, np.integer, np.bool_)) or (math.isfinite(fill) and float(fill).is_integer())
        low, high = (0, 1) if dtype.kind == "b" else (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
        if not whole or not low <= int(fill) <= high:
            raise GeomError(f"{refusal}: not a whole number in [{low}, {high}] ({where})")
        return np.array(int(fill), dtype=dtype)
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            if dtype.name == "bfloat16":
                value = _numeric.round_once(np.array(float(fill), dtype=np.float64), dtype.newbyteorder("="))
                value = value.astype(dtype)
            else:
                value = np.array(fill, dtype=dtype)
        asked = complex(fill)
        kept = complex(value.astype(np.complex128)) if dtype.kind == "c" else complex(float(value.astype(np.float64)))
    except (OverflowError, ValueError, TypeError) as error:
        raise GeomError(f"{refusal} ({' '.join(str(error).split())}; {where})") from error
    for wanted, stored in ((asked.real, kept.real), (asked.imag, kept.imag)):
        if math.isfinite(wanted) and not math.isfinite(stored):
            raise GeomError(f"{refusal}: it overflows to {kept if dtype.kind == 'c' else kept.real} ({where})")
    return value


# --- the compute ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """What every slab needs: the validated attributes, the axes and the values a tap outside reads."""

    mode: str
    padding: str
    align_corners: bool
    lengths: Shape  # spatial lengths, outermost first
    strides: Shape  # of each spatial axis in a flattened (C, D1·...·Dr) plane, in elements
    dtype: np.dtype  # data's, byte order included
    fill: np.ndarray  # 0-d, of data's dtype
    numeric: bool  # linear or cubic
    work: np.dtype  # what linear and cubic compute in: _numeric.working_dtype
    epsilon: float  # fill_epsilon of the grid's dtype


def grid_sample(
    data: Any,
    grid: Any,
    mode: Mode = "linear",
    padding_mode: PaddingMode = "zeros",
    align_corners: Flag = False,
    *,
    fill: Any = 0,
    threads: Int | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Sample ``data`` at the normalised positions of ``grid``.

    Parameters
    ----------
    data : array_like
        (N, C, D1, ..., Dr), r >= 1, of any ONNX tensor type: bool, int8-int64,
        uint8-uint64, float16/32/64, bfloat16 (ml_dtypes), complex64/128, or strings
        (str, bytes, StringDType); either byte order, any strides (data that is not
        C-contiguous is copied once: the gathers need it so).
    grid : array_like, float16, float32, float64 or bfloat16
        (N, D1_out, ..., Dr_out, r): positions in [-1, 1] (outside is padding), the last
        axis ordered (x, y[, z]): innermost spatial axis first.
    mode : {"linear", "nearest", "cubic"}
        N-linear (2**r taps), nearest, or N-cubic (4**r taps, Keys' kernel, A = -0.75).
    padding_mode : {"zeros", "border", "reflection"}
        What a tap outside the data reads: ``fill``, the nearest edge pixel, or the pixel
        mirrored at the borders (several times if need be).
    align_corners : bool or 0/1
        If true, -1 and 1 are the centres of the corner pixels; otherwise their outer edges.
    fill : scalar, optional, keyword-only
        What a tap outside reads with ``padding_mode="zeros"`` (0 where the tap's weight is
        0: see Notes), and what a point with a coordinate that is not finite gives in every
        padding mode: one value data's dtype holds (no 300 in uint8, no 0.5 in an integer
        type). 0 (the spec's value) is False for bool and "" for strings.
    threads : int, optional, keyword-only
        Threads that share the slabs of a large output. ``None`` uses every CPU this process
        may run on; at most 1024. The result is the same for any count.
    out : numpy.ndarray, optional, keyword-only
        Where to write the result (a slab of a memory-mapped file, say): exactly the output's
        shape and data's dtype, byte order included; any strides. Besides data, the grid and
        the output, the kernel's work arrays take a few MiB per thread whatever the sizes, so
        an output can be made slab by slab: a slab of the grid's rows into the same rows of
        ``out``.

    Returns
    -------
    numpy.ndarray
        (N, C, D1_out, ..., Dr_out) of data's dtype (``out`` itself when given).
        A new output of 32 MiB or more may take the memory of one let go before, and then
        does not own it: the last two let go (of the last size, 1 GiB in all at most) stay
        in memory for that until ``geomcli.ops.reuse.release()`` (see geomcli.ops.reuse).

    Raises
    ------
    GeomError
        If data has rank < 3 or is of another type (float128, object, datetime64, ...); if
        the grid is not a float type, its rank is not data's, its N differs from data's, or
        its last axis does not hold r coordinates; if a mode is not one of the three (the
        opset-16 names ``bilinear``/``bicubic`` with a hint), ``padding_mode`` neither,
        ``align_corners`` is not a bool or 0/1; if linear or cubic is asked of bool or string
        data; if ``fill`` does not fit data's dtype; if ``padding_mode`` is border or
        reflection and a spatial axis of data is empty while the output is not; if
        ``threads`` is not an integer from 1 to 1024; if ``out`` is not a writable, unmasked array of the
        output's shape and dtype or may overlap data or the grid; or if either is masked.

    Notes
    -----
    ONNX GridSample, opset 22 (opset 20's N-D form; 16's 4-D names are refused). Where the
    spec is silent, this kernel decides:

    - Coordinates are unnormalised in float64: ``x = (g + 1) / 2 * (L - 1)`` with
      align_corners, else ``x = ((g + 1) * L - 1) / 2``.
    - nearest: ``rint(x)`` (half to even), then the padding on that index.
    - linear: border clamps x to [0, L - 1], reflection mirrors it into [0, L - 1] (with
      align_corners) or [-0.5, L - 0.5] where it lies outside; then taps ``floor(x)``,
      ``floor(x) + 1``, weights ``1 - t``, ``t``, each tap padded by its index.
    - cubic: x is not padded; taps ``floor(x) - 1 .. floor(x) + 2``, each padded by its
      index, weights ``far(t + 1), near(t), near(1 - t), far(2 - t)`` of Keys' kernel with
      A = -0.75 (as onnxruntime and PyTorch; the ONNX reference clamps x first for border).
    - A tap index past an end is clamped (border) or mirrored (reflection: about the edge
      pixels' centres with align_corners, their outer edges without); a reflected axis of
      length 1 reads its only pixel.
    - Under border or reflection every tap of an axis of length 1 reads its pixel, so linear
      and cubic take it with weight 1: exactly the pixel, inf and NaN too (summed tap by
      tap, the weights missed it by a rounding error, which a tie in an integer type shows).
    - The taps' values are combined innermost axis first, each sum in tap order, as
      onnxruntime and the ONNX reference nest their 1-D interpolations.
    - Linear and cubic compute in float64 (complex128 for complex data, both parts
      interpolated alike) and round once to data's dtype: integers half to even and
      saturated to their range, bfloat16 without double rounding. int64/uint64 values past
      2**53 are rounded to float64 first. bool and string data take nearest only.
    - Nearest copies data's values (any dtype, exactly).
    - A point whose coordinates are not all finite reads ``fill``, in every padding mode. A
      finite coordinate takes the padding however far out it lies: one whose position
      overflows float64 (1e308 on 4 pixels) is the largest float64 of its sign there.
    - A tap of weight 0 that reads a pixel still takes part: an Inf or NaN beside a point
      spreads to it (as in onnxruntime and PyTorch). Which pixel that tap is differs where x was padded: we pad x
      (border clamps it to [0, L - 1], as PyTorch's clip), onnxruntime 1.32 pads the taps of
      the unpadded x. Border, data ``[1, inf]``, align_corners, x = -1: we read 0 and 1 (NaN,
      as the ONNX reference), onnxruntime -1 and 0, both the edge (1); without align_corners
      at x = -0.5 the reference (which clamps only outside [-0.5, L - 0.5]) and onnxruntime
      give 1, we NaN. Reflection, ``[5, inf, 3, 7, 9]``, align_corners, x = -2: we (and the
      reference) reflect to 2 and read 2 and 3 (3), onnxruntime reflects -2 and -1 to 2 and
      1 (NaN). Finite data: the same values.
    - With zeros padding a tap outside reads ``fill``, unless one of its weights (per axis) is
      exactly 0: then it reads 0, as under the spec's fill 0, so it counts for nothing and a
      NaN or infinite ``fill`` (NaN times 0) reaches only the points it weighs in. A point on
      the last pixel centre (x = L - 1: taps L - 1 and L, weights 1 and 0) reads its pixel.
      So does one past it by the grid's rounding alone: at a point with a tap inside on every
      axis, a tap outside whose weight is at most :func:`fill_epsilon` x L (float32's epsilon
      times the axis's length; float64's for a float64 grid) reads 0 too. AffineGrid's
      coordinates of a pixel centre are exact only for lengths 2**k (2**k + 1 with
      align_corners), elsewhere often an ulp off: an identity warp of 120 x 160 with
      ``fill=nan`` gave 320 NaN edge pixels. One a thousandth of a pixel past the centre
      reads NaN. With ``fill`` 0 none of this changes a bit (onnxruntime's and the official
      cases' results stay exact); another finite fill loses such a tap's share, fill times a
      weight of at most fill_epsilon x L.
    - With zeros padding, data with an empty spatial axis gives ``fill`` wherever the output
      has points (the interpolation of taps that all read ``fill``).

    Examples
    --------
    >>> row = np.arange(4.0).reshape(1, 1, 1, 4)  # one row of four pixels: 0, 1, 2, 3
    >>> grid = np.array([[[[-1.0, 0.0], [0.0, 0.0], [1.0, 0.0]]]])  # its left end, centre, right end
    >>> grid_sample(row, grid, align_corners=True)
    array([[[[0. , 1.5, 3. ]]]])
    >>> grid_sample(row, grid)  # -1 and 1 are the outer edges: half of each end tap reads fill 0
    array([[[[0. , 1.5, 1.5]]]])
    >>> grid_sample(row, grid, padding_mode="border")
    array([[[[0. , 1.5, 3. ]]]])
    >>> grid_sample(row.astype(np.uint8), grid, mode="nearest", fill=9)  # x = -0.5 -> 0, 1.5 -> 2, 3.5 -> 4
    array([[[[0, 2, 9]]]], dtype=uint8)
    """
    array = _as_array(data, "data")
    points = _as_array(grid, "grid")
    result, plan, workers = _prepared(array, points, mode, padding_mode, align_corners, fill, threads, out)
    if plan is not None:
        _run(array, points, result, plan, workers)
    return result


def affine_grid_sample(
    data: Any,
    theta: Any,
    size: Sequence[int],
    mode: Mode = "linear",
    padding_mode: PaddingMode = "zeros",
    align_corners: bool | int = False,
    *,
    fill: Any = 0,
    threads: int | None = None,
    out: np.ndarray | None = None,
    rows: slice | None = None,
) -> np.ndarray:
    """:func:`grid_sample` of the grid :func:`~geomcli.ops.affine_grid.affine_grid` makes: an affine warp.

    ``grid_sample(data, affine_grid(theta, size, align_corners, rows=rows), mode, padding_mode,
    align_corners, fill=fill, out=out)``, bit for bit, the arguments as there (``rows``: only
    these rows of the output, as ``out``'s). Where the compiled kernel covers the case (2-D,
    float32 or float64 theta) it makes each point's grid coordinates itself, the same float64
    sums rounded once to theta's type, and no grid is held; elsewhere the grid is made first.

    Raises
    ------
    GeomError
        As affine_grid and grid_sample do for these arguments.

    Examples
    --------
    >>> row = np.arange(4.0).reshape(1, 1, 1, 4)
    >>> shift = np.array([[[1.0, 0.0, 0.5], [0.0, 1.0, 0.0]]])  # a quarter of the width to the left
    >>> affine_grid_sample(row, shift, (1, 1, 1, 4), padding_mode="border")
    array([[[[1., 2., 3., 3.]]]])
    """
    matrices, grid_shape, rows, _ = affine_grid_checked(theta, size, align_corners, threads=threads, rows=rows)
    grid_dtype = matrices.dtype.newbyteorder("=")
    if _compiled is None or len(grid_shape) != 4 or grid_dtype.name not in ("float32", "float64"):
        return grid_sample(data, affine_grid(matrices, size, align_corners, threads=threads, rows=rows), mode,
                           padding_mode, align_corners, fill=fill, threads=threads, out=out)
    array = _as_array(data, "data")
    # what grid_sample checks of a grid: its shape and dtype, here of one never made
    stand_in = np.broadcast_to(np.zeros((), grid_dtype), grid_shape)
    result, plan, workers = _prepared(array, stand_in, mode, padding_mode, align_corners, fill, threads, out)
    if plan is None:
        return result
    if _compiled_kind(plan) is None:  # complex or bfloat16 data, say: the numpy path reads a grid
        grid = affine_grid(matrices, size, plan.align_corners, threads=workers, rows=rows)
        _run(array, grid, result, plan, workers)
        return result
    thetas = [tuple(matrix.ravel().tolist()) for matrix in matrices.astype(np.float64)]
    height = affine_grid_output_shape(matrices.shape, size)[1]
    affine = _AffineGrid(thetas, (height, grid_shape[2]), rows.start, grid_dtype == np.float64)
    _run(array, None, result, plan, workers, affine)
    return result


def fill_epsilon(grid_dtype: np.dtype) -> float:
    """The grid's rounding per pixel of an axis's length: float64's machine epsilon for a float64
    grid, float32's for the others. With zeros padding a tap outside, at a point with a tap inside
    on every axis, whose weight is at most this times the axis's length reads 0, not ``fill``:
    its position lies past the last pixel centre by the grid's rounding alone (see grid_sample)."""
    dtype = np.dtype(grid_dtype)
    return 2.0**-52 if dtype.kind == "f" and dtype.itemsize == 8 else 2.0**-23


def _prepared(array: np.ndarray, points: np.ndarray, mode: Any, padding_mode: Any, align_corners: Any, fill: Any,
              threads: Any, out: Any) -> tuple[np.ndarray, _Plan | None, int]:
    """grid_sample's arguments validated: the result array, the plan of its compute (None where
    the result is already made: empty, or fill throughout) and the thread count."""
    _check_dtypes(array, points)
    where = _where(array.shape, points.shape)
    output_shape = grid_sample_output_shape(array.shape, points.shape)
    check_addressable(output_shape, array.dtype, _FUNC, where)  # in bytes: the shape's check counts elements
    chosen_mode = _as_mode(mode, where)
    padding = _as_padding(padding_mode, where)
    corners = _as_flag(align_corners, where)
    _check_mode(chosen_mode, array.dtype, where)
    fill_value = _as_fill(fill, array.dtype, where)
    workers = as_threads(threads, _FUNC, where)
    lengths = array.shape[2:]
    result = new_output(output_shape, array.dtype, _FUNC, where) if out is None else as_out(
        out, output_shape, array.dtype, array, _FUNC, where, name="data", others=[("grid", points)])
    if result.size == 0:
        return result, None, workers
    if 0 in lengths:
        if padding != "zeros":
            raise GeomError(
                f"{_FUNC}: padding_mode {padding!r} repeats data's pixels, but a spatial axis of data is empty "
                f"({where})"
            )
        result[...] = fill_value  # no pixel to interpolate: every point reads fill
        return result, None, workers
    strides = tuple(math.prod(lengths[axis + 1:]) for axis in range(len(lengths)))
    numeric = chosen_mode != "nearest"
    plan = _Plan(chosen_mode, padding, corners, lengths, strides, array.dtype, fill_value, numeric,
                 _numeric.working_dtype(array.dtype), fill_epsilon(points.dtype))
    return result, plan, workers


@dataclass(frozen=True)
class _AffineGrid:
    """A grid the compiled kernel makes as it goes (sample_affine): AffineGrid's for an output of
    ``size`` (H, W), its rows from ``first_row`` on."""

    thetas: list[tuple[float, ...]]  # per batch item: x's row of theta, then y's, in float64
    size: tuple[int, int]
    first_row: int
    double: bool  # a float64 grid, else float32


def _run(data: np.ndarray, grid: np.ndarray | None, result: np.ndarray, plan: _Plan, threads: int,
         affine: _AffineGrid | None = None) -> None:
    """The output in slabs of points, each slab of each batch item a piece of work; the grid's
    coordinates read from ``grid``, or made by the compiled kernel from ``affine``."""
    batch, channels = data.shape[:2]
    rank = len(plan.lengths)
    kind = _compiled_kind(plan)
    if kind is not None and _read_in_place(data, plan):
        planes = data  # an H×W×C image's (1, C, H, W) view, say: sampled where it lies
    else:
        # (N, C, D1, ..., Dr) -> (N, C, D1·...·Dr): np.take gathers from a C-contiguous plane (it would
        # copy a strided one on every call), so strided data is copied once here.
        planes = np.ascontiguousarray(data).reshape(batch, channels, -1)
    points = result.shape[2:]
    count = math.prod(points)
    merged: np.ndarray | None = None
    if grid is not None:
        try:
            merged = grid.reshape(batch, count, rank, copy=False)
        except ValueError:  # a grid whose point axes do not merge (broadcast, say): each slab taken by its indices
            pass

    def coordinates(n: int, start: int, stop: int) -> np.ndarray:
        """(stop - start, r) coordinates of points [start, stop) of batch item ``n``."""
        assert grid is not None
        if merged is not None:
            return merged[n, start:stop]
        picked: np.ndarray = grid[n][np.unravel_index(np.arange(start, stop), points)]
        return picked
    try:
        target: np.ndarray | None = result.reshape(batch, channels, count, copy=False)
    except ValueError:  # an out= whose output axes do not merge: each slab is put in by its indices
        target = None
    if kind is None:
        slab, row = _slab_points(plan, channels), 0
    else:
        slab, row = _compiled_piece(plan, channels, points)
    pieces = [(n, start, min(count, start + slab)) for n in range(batch) for start in range(0, count, slab)]

    def put(n: int, where: np.ndarray | slice, values: np.ndarray) -> None:
        """Values (C, k) of data's dtype into output points ``where`` (flat) of batch item ``n``."""
        if target is not None:
            if isinstance(where, slice):
                target[n, :, where] = values
            else:
                for row, part in zip(target[n], values):  # row by row: numpy's fast 1-D scatter
                    row[where] = part
            return
        flat = np.arange(count)[where]
        at: tuple[Any, ...] = (slice(None), *np.unravel_index(flat, points))
        result[n][at] = values

    def view(n: int, start: int, stop: int) -> np.ndarray | None:
        """Where a slab's values go, if the output can take them in place."""
        return None if target is None else target[n, :, start:stop]

    def worker() -> _Pieces:
        if kind is not None:
            return _CompiledWorker(planes, coordinates, plan, kind, row, view, put, affine)
        return _Worker(planes, coordinates, plan, min(slab, count), view, put)

    if threads > 1 and batch * channels * count >= _PARALLEL_VALUES and len(pieces) > 1:
        _share(pieces, worker, threads)
    else:
        only = worker()
        for piece in pieces:
            only.work(piece)
        only.finish()


def _compiled_kind(plan: _Plan) -> str | None:
    """What the compiled kernel is told data's dtype is, or None where the numpy path does the work:
    the one place that chooses between the two.

    The compiled kernel does a slab's points in one pass each (position, taps, weights, gathers,
    sums for every channel) where numpy makes a dozen passes (four dozen for cubic) over arrays
    of the slab; it gives the same bits, so it is used wherever it is built and covers the case:
    1 to 3 spatial axes; linear and cubic on float16/32/64 and 8- to 64-bit integers in native
    byte order ("float32", ...); nearest on any dtype of fixed-size items ("raw": bool, bfloat16,
    complex, fixed-width strings, either byte order). The rest (complex, bfloat16 or byte-swapped
    data with linear or cubic, StringDType, 4 or more spatial axes), and everything when the
    extension is not built, takes the numpy path.
    """
    if _compiled is None or not 1 <= len(plan.lengths) <= 3:
        return None
    if plan.mode != "nearest" and plan.padding != "zeros" and 1 in plan.lengths:
        return None  # a 1-pixel axis reads its pixel with weight 1: _axis
    if plan.mode == "nearest":
        return None if plan.dtype.hasobject or plan.dtype.kind == "T" else "raw"
    return plan.dtype.name if plan.dtype.isnative and plan.dtype.name in _COMPILED_NUMERIC else None


def _read_in_place(data: np.ndarray, plan: _Plan) -> bool:
    """Whether the compiled kernel takes ``data`` with its own strides (whole items): for nearest and
    2-D linear; the other interpolations read an axis's neighbours as a row, so their data is
    copied C-contiguous. An H×W×C uint8 image's channels then lie side by side, a pixel's taps of
    every channel in one cache line, and the kernel takes them all in one vector (with AVX2)."""
    size = data.dtype.itemsize
    if any(stride % size or stride < 0 for stride in data.strides):  # the kernel's offsets are from the start up
        return False
    return plan.mode == "nearest" or (plan.mode == "linear" and len(plan.lengths) == 2)


def _compiled_piece(plan: _Plan, channels: int, points: Shape) -> tuple[int, int]:
    """Points per piece of the compiled kernel, and the output's row length when pieces are whole
    rows (the kernel then walks them in tiles), else 0."""
    per_point = channels * plan.dtype.itemsize + len(plan.lengths) * 8  # a staged output, a converted grid
    size = max(1024, min(_COMPILED_POINTS, _SLAB_BYTES // per_point))
    row = points[-1] if len(points) > 1 else 0
    if 0 < row <= size:
        return size // row * row, row
    return size, 0


def _raw(array: np.ndarray) -> np.ndarray:
    """``array`` as unsigned integers (or void) of its item size: what nearest copies, through a
    buffer any dtype can give (bfloat16's cannot)."""
    size = array.dtype.itemsize
    view: np.ndarray = array.view(f"u{size}" if size in (1, 2, 4, 8) else f"V{size}")
    return view


class _Pieces(Protocol):
    """Work on pieces of the output, (batch item, first point, end point); then the rest."""

    def work(self, piece: tuple[int, int, int]) -> None: ...

    def finish(self) -> None: ...


class _CompiledWorker:
    """One thread's share of the pieces, done by the compiled kernel: each piece in one call that
    releases the GIL, its values written in place (or staged where the output cannot take them)."""

    def __init__(self, planes: np.ndarray, coordinates: Callable[[int, int, int], np.ndarray], plan: _Plan,
                 kind: str, row: int, view: Callable[[int, int, int], np.ndarray | None],
                 put: Callable[[int, np.ndarray | slice, np.ndarray], None], affine: _AffineGrid | None) -> None:
        self.raw = kind == "raw"
        self.planes = _raw(planes) if self.raw else planes
        self.coordinates, self.plan, self.kind, self.row, self.view, self.put = coordinates, plan, kind, row, view, put
        self.affine = affine
        self.fill: bytes | float = plan.fill.tobytes() if self.raw else float(plan.fill.astype(np.float64))

    def work(self, piece: tuple[int, int, int]) -> None:
        n, start, stop = piece
        assert _compiled is not None
        into = self.view(n, start, stop)
        staged = into is None
        values = np.empty((self.planes.shape[1], stop - start), self.plan.dtype) if into is None else into
        plan, affine, target = self.plan, self.affine, _raw(values) if self.raw else values
        if affine is not None:
            first = affine.first_row * affine.size[1] + start  # the piece's first point in the whole grid
            _compiled.sample_affine(self.planes[n], affine.thetas[n], target, plan.lengths, plan.mode, plan.padding,
                                    plan.align_corners, self.kind, self.fill, plan.epsilon, self.row, affine.size,
                                    first, affine.double)
        else:
            coordinates = self.coordinates(n, start, stop)
            if coordinates.dtype not in (np.float32, np.float64) or not coordinates.dtype.isnative:
                coordinates = coordinates.astype(np.float64)  # float16, bfloat16, byte-swapped: exactly
            _compiled.sample(self.planes[n], coordinates, target, plan.lengths, plan.mode, plan.padding,
                             plan.align_corners, self.kind, self.fill, plan.epsilon, self.row)
        if staged:
            self.put(n, slice(start, stop), values)

    def finish(self) -> None:
        """Nothing is kept from piece to piece."""


class _Worker:
    """One thread's share of the slabs.

    Its (C, S) work arrays are made once and used by each slab in turn: new ones per slab would
    be new pages each time (the allocator gives memory of this size back to the system when it
    is freed, and the next slab's first writes fault it in again). The points with taps outside
    the data are kept until there are a slab's worth of them, then done in one go: a few hundred
    per slab cost more in numpy's per-call time than in work.
    """

    def __init__(self, planes: np.ndarray, coordinates: Callable[[int, int, int], np.ndarray], plan: _Plan, points: int,
                 view: Callable[[int, int, int], np.ndarray | None],
                 put: Callable[[int, np.ndarray | slice, np.ndarray], None]) -> None:
        self.planes, self.coordinates, self.plan, self.view, self.put = planes, coordinates, plan, view, put
        self.channels = channels = planes.shape[1]
        taps = _taps(plan.mode)
        self.index = np.empty(taps * points, np.intp)
        self.gathered = np.empty(channels * taps * points, plan.dtype)
        self.sums = [np.empty(channels * points, plan.work) for _ in plan.lengths]
        self.term = np.empty(channels * points, plan.work)
        self.capacity = points
        self.pending_n = -1
        self.pending_where: list[np.ndarray] = []
        self.pending_positions: list[list[np.ndarray]] = []
        self.pending_count = 0

    def shaped(self, array: np.ndarray, count: int) -> np.ndarray:
        """The first (C, count) of one of the (C·S,) work arrays, contiguous."""
        return array[: self.channels * count].reshape(self.channels, count)

    def work(self, piece: tuple[int, int, int]) -> None:
        n, start, stop = piece
        in_place = self.view(n, start, stop)
        into = np.empty((self.channels, stop - start), self.plan.dtype) if in_place is None else in_place
        # numpy's error state is per thread: NaN/Inf and huge coordinates are handled, not warned of
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            outside = _sample_slab(self.planes[n], self.coordinates(n, start, stop), into, self.plan, self)
        if in_place is None:
            self.put(n, slice(start, stop), into)
        if outside is not None:
            where, positions = outside
            if n != self.pending_n:
                self.finish()
                self.pending_n = n
            self.pending_where.append(where + start)
            self.pending_positions.append(positions)
            self.pending_count += where.size
            if self.pending_count >= self.capacity:
                self.finish()

    def finish(self) -> None:
        """The values of the points kept, put in place of what their slabs made of them."""
        if not self.pending_count:
            return
        where = np.concatenate(self.pending_where)
        positions = [np.concatenate(axis) for axis in zip(*self.pending_positions)]
        self.pending_where, self.pending_positions, self.pending_count = [], [], 0
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            values = _outside(self.planes[self.pending_n], positions, self.plan)
            stored = np.empty(values.shape, self.plan.dtype)
            if self.plan.numeric:
                _store(values, stored, self.plan.dtype)
            else:
                stored[...] = values
        self.put(self.pending_n, where, stored)


def _taps(mode: str) -> int:
    """Taps per axis."""
    return 1 if mode == "nearest" else 2 if mode == "linear" else 4


def _slab_points(plan: _Plan, channels: int) -> int:
    """Points per slab: ~_SLAB_BYTES of work arrays. Per point and channel: an accumulator per
    axis, a term and a gathered value per innermost tap; per point: each axis's position,
    weights, indices and masks."""
    rank = len(plan.lengths)
    taps = _taps(plan.mode)
    per_point = channels * (plan.work.itemsize * (rank + 1) + taps * plan.dtype.itemsize) + rank * taps * 25 + 16
    return max(256, _SLAB_BYTES // per_point)


def _share(pieces: list[tuple[int, int, int]], worker: Callable[[], _Pieces], threads: int) -> None:
    """Every piece done by one of ``threads`` workers (each on its thread, taking the next piece
    left, then finishing); the pieces write disjoint parts of the output, so the result does not
    depend on who does which."""
    lock = threading.Lock()
    remaining = iter(pieces)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            mine = worker()
            while True:
                with lock:
                    piece = None if failures else next(remaining, None)
                if piece is None:
                    break
                mine.work(piece)
            if not failures:
                mine.finish()
        except BaseException as error:  # handed to the caller's thread
            with lock:
                failures.append(error)

    helpers = []
    for _ in range(min(threads, len(pieces)) - 1):
        helper = threading.Thread(target=run, name="geomcli-grid-sample", daemon=True)
        try:
            helper.start()
        except RuntimeError:  # no thread to be had (the process's limit): the others take its pieces
            break
        helpers.append(helper)
    run()
    for helper in helpers:
        helper.join()
    if failures:
        raise failures[0]


@dataclass
class _Axis:
    """One spatial axis of a slab: each tap's index on the axis, whether it lies outside (zeros
    padding; None when no tap of the slab does), and its weight (None for nearest)."""

    index: list[np.ndarray]
    outside: list[np.ndarray | None]
    weights: list[np.ndarray] | None
    # zeros padding: where each tap does not count, and reads 0 however it lies (see _negligible)
    negligible: list[np.ndarray | None] | None = None


def _sample_slab(plane: np.ndarray, coordinates: np.ndarray, target: np.ndarray, plan: _Plan,
                 worker: _Worker) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """Output points [start, stop) of one batch item: ``plane`` (C, D1·...·Dr), ``coordinates``
    (S, r) with x first, ``target`` (C, S) of data's dtype. Returns the points with taps outside
    the data, if any, and their positions: their values in ``target`` are still to be made
    (by :func:`_outside`)."""
    rank = len(plan.lengths)
    # outermost axis first: the grid's last coordinate is the outermost axis's
    positions = [coordinates[:, rank - 1 - axis].astype(np.float64) for axis in range(rank)]
    for x, length in zip(positions, plan.lengths):
        _unnormalize(x, length, plan.align_corners)
    # not finite: NaN or Inf in the grid. A finite coordinate whose position overflows lies past
    # every border: the largest float64 of its sign (reference.unnormalize)
    unfinite = None
    for axis, x in enumerate(positions):
        if not math.isfinite(float(np.add.reduce(x))):  # one fast pass; a huge sum only looks closer
            bad = ~np.isfinite(x)
            overflow = bad & np.isfinite(coordinates[:, rank - 1 - axis].astype(np.float64))
            if overflow.any():
                np.copyto(x, np.copysign(sys.float_info.max, x), where=overflow)
                bad &= ~overflow
            unfinite = bad if unfinite is None else unfinite | bad
    if unfinite is not None:
        if not unfinite.any():
            unfinite = None
        else:
            for x in positions:
                x[unfinite] = 0.0  # any finite position: these points are given fill below
    interior = _interior(positions, plan)
    outside = None
    if interior is None:
        values = _general(plane, positions, plan)
    else:
        values = _gather_interior(plane, interior, plan, worker)
        if interior.inside is not None:
            if unfinite is not None:  # they are given fill here
                np.logical_or(interior.inside, unfinite, out=interior.inside)
            where = np.flatnonzero(~interior.inside)
            if where.size:
                outside = where, interior.positions(where)
    if plan.numeric:
        _store(values, target, plan.dtype)
    else:
        np.copyto(target, values)
    if unfinite is not None:
        target[:, unfinite] = plan.fill
    return outside


@dataclass
class _Interior:
    """A slab's taps computed as if every one lay inside: per axis the first tap's index (clipped
    so that all taps are pixels) and the floor of the (padded) position, its fraction and the
    weights; and where the taps truly all lie inside (None: everywhere). The values of points
    elsewhere are made later by _outside, from :meth:`positions`."""

    first: list[np.ndarray]  # intp, per axis
    floor: list[np.ndarray]  # float64 whole numbers, clipped to a few taps past the ends (not for reflection)
    fraction: list[np.ndarray | None]  # None for nearest
    weights: list[list[np.ndarray]]  # [] for nearest
    inside: np.ndarray | None

    def positions(self, rest: np.ndarray) -> list[np.ndarray]:
        """The padded positions of points ``rest``: floor + fraction is the position exactly."""
        return [f[rest] if t is None else f[rest] + t[rest] for f, t in zip(self.floor, self.fraction)]


def _interior(positions: list[np.ndarray], plan: _Plan) -> _Interior | None:
    """The taps of finite positions (overwritten), for the points whose taps all lie inside the
    data, the common case: no padding to apply tap by tap, one flat index per point and fixed
    offsets for the taps. None if an axis is shorter than the taps."""
    taps = _taps(plan.mode)
    if min(plan.lengths) < taps:
        return None
    offset = -1 if plan.mode == "cubic" else 0
    first, floors, fractions, weights = [], [], [], []
    inside: np.ndarray | None = None
    for x, length in zip(positions, plan.lengths):
        if plan.mode == "nearest":
            f = np.rint(x, out=x)
            t = None
        else:
            if plan.mode == "linear" and plan.padding == "border":
                np.minimum(np.maximum(x, 0.0, out=x), length - 1.0, out=x)
            elif plan.mode == "linear" and plan.padding == "reflection":
                _reflect(x, length, plan.align_corners)
            f = np.floor(x)
            t = np.subtract(x, f, out=x)
            weights.append(_weights_of(t, plan.mode))
        if plan.padding == "reflection":
            # a mirror sees floors modulo its period: kept exact for _general, not clipped
            floors.append(f)
            f = f.copy()
        # floors a few taps past an end are all alike here (wholly outside); clipped, they cast
        np.minimum(np.maximum(f, -2.0 - taps, out=f), length + 1.0, out=f)
        index = f.astype(np.intp)
        if offset:
            index += offset
        # the first tap's index as unsigned: a negative one is huge, so one comparison finds both ends
        unsigned = index.view(np.uintp)
        fits = unsigned <= length - taps
        inside = fits if inside is None else np.logical_and(inside, fits, out=inside)
        first.append(np.minimum(unsigned, length - taps, out=unsigned).view(np.intp))  # a pixel everywhere
        if plan.padding != "reflection":
            floors.append(f)
        fractions.append(t)
    assert inside is not None
    return _Interior(first, floors, fractions, weights, None if inside.all() else inside)


def _outside(plane: np.ndarray, positions: list[np.ndarray], plan: _Plan) -> np.ndarray:
    """(C, S) values at finite (padded) positions with taps outside the data.

    With zeros padding a point one of whose axes has all its taps outside reads only ``fill``:
    its value is the interpolation of ``fill`` by its weights, the same for every channel (the
    same operations as _interpolate's on taps that all read fill). The others (a band along the
    edges, and with border or reflection padding all of them) are done tap by tap by _general.
    """
    channels = plane.shape[0]
    values = np.empty((channels, positions[0].size), plan.work if plan.numeric else plan.dtype)
    rest = np.arange(positions[0].size)
    if plan.padding == "zeros":
        taps = _taps(plan.mode)
        offset = -1 if plan.mode == "cubic" else 0
        away = np.zeros(rest.size, bool)
        for x, length in zip(positions, plan.lengths):
            start = np.floor(x) + offset
            away |= (start + (taps - 1) < 0) | (start > length - 1)
        if away.any():
            weights = [] if not plan.numeric else [_weights(x[away], plan.mode) for x in positions]
            filled = _interpolated_fill(weights, plan)
            for row in values:
                row[away] = filled
            rest = rest[~away]
    if rest.size:
        redone = _general(plane, [x[rest] for x in positions], plan)
        for row, part in zip(values, redone):  # row by row: numpy's fast 1-D scatter
            row[rest] = part
    return values


def _weights(x: np.ndarray, mode: str) -> list[np.ndarray]:
    """The linear or cubic weights of the taps of positions ``x`` (overwritten)."""
    return _weights_of(np.subtract(x, np.floor(x), out=x), mode)


def _weights_of(t: np.ndarray, mode: str) -> list[np.ndarray]:
    """The taps' weights for fractions ``t``: ``1 - t, t`` (linear; ``t`` itself is the second), or
    Keys' ``far(t + 1), near(t), near(1 - t), far(2 - t)`` (cubic)."""
    if mode == "linear":
        return [np.subtract(1.0, t), t]
    return [_far(t + 1.0), _near(t), _near(1.0 - t), _far(2.0 - t)]


def _interpolated_fill(weights: list[list[np.ndarray]], plan: _Plan) -> np.ndarray | Any:
    """``fill`` interpolated by these weights (per axis, per tap; none for nearest), innermost axis
    first, each sum in tap order: what a point all of whose taps read fill gives."""
    if not plan.numeric:
        return plan.fill
    fill = plan.fill.astype(plan.work)
    if plan.work.kind == "c":
        parts = [_interpolated_fill_of(float(part), weights) for part in (fill.real, fill.imag)]
        both = np.empty(parts[0].shape, plan.work)
        both.real, both.imag = parts
        return both
    return _interpolated_fill_of(float(fill), weights)


def _interpolated_fill_of(fill: float, weights: list[list[np.ndarray]]) -> np.ndarray:
    # level: the lattice's value so far where no outer tap weighs 0; zero: where one does, whose
    # taps all read 0 (_gather's rule), so that a NaN or Inf fill does not spread through them
    level: np.ndarray | float = fill
    zero: np.ndarray | float = 0.0
    for axis in reversed(weights):
        total = axis[0] * np.where(axis[0] == 0, zero, level)
        total_zero = axis[0] * zero
        for weight in axis[1:]:
            total = total + weight * np.where(weight == 0, zero, level)
            total_zero = total_zero + weight * zero
        level, zero = total, total_zero
    assert isinstance(level, np.ndarray)
    return level


def _gather_interior(plane: np.ndarray, interior: _Interior, plan: _Plan, worker: _Worker) -> np.ndarray:
    """(C, S) values from taps that all lie inside: the flat index of each point's first tap once,
    each tap a fixed offset from it; the same operations as _interpolate otherwise, in the same
    order (innermost axis first, each sum in tap order)."""
    flat = None
    for index, stride in zip(interior.first, plan.strides):
        term = index if stride == 1 else np.multiply(index, stride)
        flat = term if flat is None else np.add(flat, term, out=flat)
    assert flat is not None
    channels, count = plane.shape[0], flat.shape[0]
    if not plan.numeric:
        gathered: np.ndarray = np.take(plane, flat, axis=1, mode="clip")
        return gathered
    taps = len(interior.weights[0])
    # the innermost axis's taps are neighbours: all of them in one take, (taps, S) -> (C, taps, S)
    contraction = _Contraction(
        plane, flat, interior.weights, plan.strides,
        index=worker.index[: taps * count].reshape(taps, count),
        gathered=worker.gathered[: channels * taps * count].reshape(channels, taps, count),
        steps=np.arange(taps, dtype=np.intp)[:, None],
        sums=[worker.shaped(total, count) for total in worker.sums],
        term=worker.shaped(worker.term, count),
    )
    return contraction.at(0, 0)


@dataclass
class _Contraction:
    """The taps of _gather_interior and its work arrays (a class, not a recursive closure: that
    would be a reference cycle holding a slab's arrays until the garbage collector runs)."""

    plane: np.ndarray
    flat: np.ndarray
    weights: list[list[np.ndarray]]
    strides: Shape
    index: np.ndarray
    gathered: np.ndarray
    steps: np.ndarray
    sums: list[np.ndarray]
    term: np.ndarray

    def at(self, level: int, offset: int) -> np.ndarray:
        """The interpolation over axes ``level`` .. r-1 of the taps ``offset`` from each point's first."""
        total = self.sums[level]
        if level == len(self.weights) - 1:
            np.add(self.flat, self.steps + offset, out=self.index)
            np.take(self.plane, self.index, axis=1, out=self.gathered, mode="clip")
            for k, weight in enumerate(self.weights[level]):
                if k == 0:
                    _weighted(self.gathered[:, 0], weight, total)
                else:
                    np.add(total, _weighted(self.gathered[:, k], weight, self.term), out=total)
            return total
        for k, weight in enumerate(self.weights[level]):
            inner = self.at(level + 1, offset + k * self.strides[level])
            if k == 0:
                _weighted(inner, weight, total)
            else:
                np.add(total, _weighted(inner, weight, inner), out=total)
        return total


def _general(plane: np.ndarray, positions: list[np.ndarray], plan: _Plan) -> np.ndarray:
    """(C, S) values at finite positions (overwritten), every tap padded on its own: the form of
    the reference, for points with taps outside the data (and data shorter than the taps)."""
    axes = [_axis(x, length, plan) for x, length in zip(positions, plan.lengths)]
    if plan.numeric:
        if plan.padding == "zeros":
            _negligible(axes, plan)
        return _interpolate(plane, axes, plan, 0, None, None)
    flat = None
    outside = None
    for axis, stride in zip(axes, plan.strides):
        term = axis.index[0] if stride == 1 else axis.index[0] * stride
        flat = term if flat is None else flat + term
        outside = _either(outside, axis.outside[0])
    assert flat is not None
    return _gather(plane, flat, outside, plan)


def _negligible(axes: list[_Axis], plan: _Plan) -> None:
    """Set each axis's ``negligible`` taps (zeros padding): those of weight 0, and, at a point
    with a tap inside on every axis, those outside whose weight is at most the grid's rounding
    (fill_epsilon times the axis's length)."""
    near: np.ndarray | bool = True  # a tap inside on every axis
    for axis in axes:
        inside: np.ndarray | bool = False
        for outside in axis.outside:
            inside = inside | (True if outside is None else ~outside)
        near = near & inside
    for axis, length in zip(axes, plan.lengths):
        assert axis.weights is not None
        tolerance = plan.epsilon * length
        axis.negligible = []
        for outside, weight in zip(axis.outside, axis.weights):
            zero = weight == 0
            if outside is not None:
                zero |= outside & near & (np.abs(weight) <= tolerance)
            axis.negligible.append(zero if zero.any() else None)


def _either(first: np.ndarray | None, second: np.ndarray | None) -> np.ndarray | None:
    if first is None:
        return second
    if second is None:
        return first
    both: np.ndarray = first | second
    return both


def _unnormalize(x: np.ndarray, length: int, align_corners: bool) -> None:
    """Normalised coordinates as positions in pixels, in place, in the reference's operations (a
    folded form, (g + 1)·(L/2) - 0.5, overflows for other g)."""
    np.add(x, 1.0, out=x)
    if align_corners:  # (g + 1) / 2 * (L - 1)
        np.multiply(x, 0.5, out=x)  # the same bits as / 2
        np.multiply(x, length - 1, out=x)
    else:  # ((g + 1) * L - 1) / 2
        np.multiply(x, length, out=x)
        np.subtract(x, 1.0, out=x)
        np.multiply(x, 0.5, out=x)


def _axis(x: np.ndarray, length: int, plan: _Plan) -> _Axis:
    """The taps of finite positions ``x`` on an axis of ``length`` (``x`` is overwritten)."""
    if plan.mode == "nearest":
        np.rint(x, out=x)
        return _Axis(*_pad_taps(x, 0, 1, length, plan), None)
    if length == 1 and plan.padding != "zeros":
        # every tap reads the one pixel and the weights sum to 1: summed in float64 they missed
        # it by an ulp or two (1.1 on 1x1 data, cubic and border: 1.0999999999999992)
        return _Axis([np.zeros(x.shape, np.intp)], [None], [np.ones(x.shape)])
    if plan.mode == "linear":
        if plan.padding == "border":
            np.clip(x, 0.0, length - 1.0, out=x)
        elif plan.padding == "reflection":
            _reflect(x, length, plan.align_corners)
    # + 0.0: math.floor's int 0 for -0.0 (x = -0.0 on a 1-pixel axis with align_corners), so that t
    # keeps x's -0.0 as in reference.axis_taps; it is the weight of a tap outside
    first = np.floor(x) + 0.0
    t = np.subtract(x, first, out=x)
    weights = _weights_of(t, plan.mode)
    index, outside = _pad_taps(first, -1 if plan.mode == "cubic" else 0, len(weights), length, plan)
    return _Axis(index, outside, weights)


def _near(d: np.ndarray) -> np.ndarray:
    """Keys' kernel for 0 <= d < 1, in place: ((A + 2)·d - (A + 3))·d·d + 1."""
    result: np.ndarray = np.multiply(d, _CUBIC_A + 2)
    np.subtract(result, _CUBIC_A + 3, out=result)
    np.multiply(result, d, out=result)
    np.multiply(result, d, out=result)
    np.add(result, 1.0, out=result)
    return result


def _far(d: np.ndarray) -> np.ndarray:
    """Keys' kernel for 1 <= d < 2, in place on ``d`` (a temporary): ((A·d - 5A)·d + 8A)·d - 4A."""
    result: np.ndarray = np.multiply(d, _CUBIC_A)
    np.subtract(result, 5 * _CUBIC_A, out=result)
    np.multiply(result, d, out=result)
    np.add(result, 8 * _CUBIC_A, out=result)
    np.multiply(result, d, out=result)
    np.subtract(result, 4 * _CUBIC_A, out=result)
    return result


def _reflect(x: np.ndarray, length: int, align_corners: bool) -> None:
    """Positions outside the borders mirrored into them, in place (reference.reflect's arithmetic)."""
    low, high = (0.0, length - 1.0) if align_corners else (-0.5, length - 0.5)
    outside = (x < low) | (x > high)
    if not outside.any():
        return
    span = high - low
    if span == 0:
        x[outside] = low
        return
    d = np.fmod(np.abs(x[outside] - low), 2 * span)
    np.subtract(2 * span, d, out=d, where=d > span)
    x[outside] = low + d


def _pad_taps(floor: np.ndarray, offset: int, taps: int, length: int,
              plan: _Plan) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
    """The indices of taps ``floor + offset``, ``floor + offset + 1``, ... (``floor``: float64
    whole numbers, any size) after the padding, and for zeros padding where each lies outside
    (None if nowhere in the slab)."""
    if plan.padding == "reflection":
        period = 2 * (length - 1) if plan.align_corners else 2 * length
        if period == 0:  # a length-1 axis with align_corners: its only pixel
            zero = np.zeros(floor.shape, np.intp)
            return [zero] * taps, [None] * taps
        # exact (floor - 1 would not be, past 2**53), and keeps the taps' indices modulo the
        # period, which is all a mirror looks at
        base = np.fmod(floor, period).astype(np.intp)
        if offset:
            base += offset
    else:
        # past these bounds every tap lies outside (zeros) or clamps to the same edge (border)
        base = np.clip(floor + offset if offset else floor, -taps, length).astype(np.intp)
    index: list[np.ndarray] = []
    outside: list[np.ndarray | None] = []
    for k in range(taps):
        tap = base + k if k else base
        low, high = int(tap.min()), int(tap.max())
        if low >= 0 and high < length:
            index.append(tap)
            outside.append(None)
            continue
        if plan.padding == "zeros":
            # negative indices look huge as unsigned: one comparison finds both ends
            outside.append(tap.view(np.uintp) >= length)
            index.append(np.clip(tap, 0, length - 1))
        elif plan.padding == "border":
            outside.append(None)
            index.append(np.clip(tap, 0, length - 1))
        else:
            outside.append(None)
            index.append(_mirror(tap, length, plan.align_corners))
    return index, outside


def _mirror(tap: np.ndarray, length: int, align_corners: bool) -> np.ndarray:
    """Integer tap indices mirrored into [0, length) (reference.mirror_index), as a new array."""
    m: np.ndarray
    if align_corners:
        period = 2 * (length - 1)
        m = np.mod(tap, period)
        np.subtract(period, m, out=m, where=m > length - 1)
    else:
        period = 2 * length
        m = np.mod(tap, period)
        np.subtract(period - 1, m, out=m, where=m >= length)
    return m


def _gather(plane: np.ndarray, flat: np.ndarray, outside: np.ndarray | None, plan: _Plan,
            into: np.ndarray | None = None, weightless: np.ndarray | None = None) -> np.ndarray:
    """The (C, S) values of ``plane`` at flat indices ``flat``, ``fill`` where ``outside``, and 0
    where a tap outside is also ``weightless`` (one of its weights is 0): fill times 0 would
    be NaN for a NaN or infinite fill, where the tap does not count."""
    gathered = np.take(plane, flat, axis=1, mode="clip", out=into)
    if outside is not None:
        np.copyto(gathered, plan.fill, where=outside)
        if weightless is not None:
            np.copyto(gathered, 0, where=outside & weightless)
    return gathered


def _weighted(values: np.ndarray, weight: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``values * weight`` (weight (S,) along the last axis) into ``out``: complex part by part."""
    if out.dtype.kind == "c":
        parts = values.view(values.real.dtype).reshape(*values.shape, 2)
        np.multiply(parts, weight[:, None], out=out.view(np.float64).reshape(*out.shape, 2))
    else:
        np.multiply(values, weight, out=out)
    return out


def _interpolate(plane: np.ndarray, axes: list[_Axis], plan: _Plan, level: int, base: np.ndarray | None,
                 outside: np.ndarray | None, weightless: np.ndarray | None = None) -> np.ndarray:
    """The interpolation over axes ``level`` .. r-1 of the taps whose flat offset over the axes
    before is ``base`` (None at the top), outside the data where ``outside`` and with a weight
    of 0 there where ``weightless``, as a new (C, S) array of the working dtype: each tap's
    value times its weight, summed in tap order."""
    axis = axes[level]
    weights = axis.weights
    assert weights is not None
    stride = plan.strides[level]
    innermost = level == len(axes) - 1
    total: np.ndarray | None = None
    term: np.ndarray | None = None
    negligible = axis.negligible or [None] * len(weights)
    for index, tap_outside, weight, tap_negligible in zip(axis.index, axis.outside, weights, negligible):
        flat = index if stride == 1 else index * stride
        if base is not None:
            flat = flat + base
        where_outside = _either(outside, tap_outside)
        where_weightless = _either(weightless, tap_negligible)
        if innermost:
            values = _gather(plane, flat, where_outside, plan, weightless=where_weightless)
        else:
            values = _interpolate(plane, axes, plan, level + 1, flat, where_outside, where_weightless)
        if total is None:
            total = _weighted(values, weight, np.empty(values.shape, plan.work))
            continue
        if term is None:
            term = np.empty(values.shape, plan.work)
        np.add(total, _weighted(values, weight, term), out=total)
    assert total is not None
    return total


def _store(values: np.ndarray, target: np.ndarray, dtype: np.dtype) -> None:
    """Interpolated ``values`` into ``target`` of data's dtype by _numeric's rule: a plain cast for
    float16/32/64 and complex (what _numeric.to_dtype does for them), without its new array."""
    if dtype.kind in "fc" and dtype.name != "bfloat16":
        np.copyto(target, values, casting="unsafe")
    else:
        np.copyto(target, _numeric.to_dtype(values, dtype))
