"""Affine matrices for AffineGrid from what a user types: numbers or transform flags.

Every number typed is finite, and so is every matrix entry it makes, in float64 and in the
grid dtype: Inf, NaN, or a number that overflows, is a usage error naming its option (exit 2).
A theta file may hold Inf and NaN (the kernel takes them); a finite value it holds that the
grid dtype cannot is that file's error.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import DTypeLike

from geomcli.errors import GeomError, OptionFault, PlanError
from geomcli.ops._numeric import round_once

if TYPE_CHECKING:
    from geomcli.io import Header

_FLAGS = ("rotate", "scale", "translate", "shear")
# from_transforms' defaults, by which a flag counts as given
_IDENTITY: tuple[Any, ...] = (0.0, (1.0,), (0.0, 0.0), (0.0, 0.0))


def as_batch(theta: np.ndarray, spatial: int, source: str) -> np.ndarray:
    """(N, s, s+1) matrices from a file's array; a single (s, s+1) matrix becomes N = 1."""
    expected = (spatial, spatial + 1)
    if theta.shape == expected:
        theta = theta[np.newaxis]
    if theta.ndim != 3 or theta.shape[1:] != expected:
        raise GeomError(f"{source}: theta must have shape (N, {expected[0]}, {expected[1]}) or {expected} "
                        f"for a {spatial}-D grid, found {theta.shape}")
    return theta


def fit_batch(matrices: np.ndarray, batch: int, source: str, what: str) -> np.ndarray:
    """A file's (k, s, s+1) matrices for N = ``batch`` grids: one matrix for every N (a read-only
    broadcast view), or one per N; ``what`` names where N came from, for the error."""
    count = matrices.shape[0]
    if count == 1:
        return np.broadcast_to(matrices, (batch, *matrices.shape[1:]))
    if count != batch:
        raise GeomError(f"{source}: theta holds {count} matrices for {what}; give one matrix, or one per N")
    return matrices


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
    matrices = cast(np.array(numbers, dtype=np.float64).reshape(-1, spatial, spatial + 1), np.dtype(dtype))
    return np.broadcast_to(matrices, (batch, spatial, spatial + 1))


def cast(matrices: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``matrices`` in ``dtype``, refusing a finite value that would become Inf there, and a
    matrix that the rounding makes singular (its numbers are not): the grid is made from the
    rounded one. Inf and NaN stay as they are. No numpy warning."""
    with np.errstate(over="ignore", invalid="ignore"):
        result = round_once(matrices, dtype).astype(dtype)
        lost = np.isfinite(matrices.astype(np.float64)) & ~np.isfinite(result.astype(np.float64))
    if lost.any():
        import ml_dtypes  # its finfo knows bfloat16 as well as numpy's floats

        value = float(matrices[lost].flat[0])
        largest = float(ml_dtypes.finfo(dtype).max)  # type: ignore[no-untyped-call]
        raise GeomError(f"theta value {value:g} does not fit the {dtype} grid (largest ±{largest:g})")
    made_singular = _made_singular(matrices, result)
    if made_singular is not None:
        index, rank = made_singular
        which = f"theta for N = {index}" if len(matrices) > 1 and matrices.strides[0] else "theta"
        raise SingularCastError(f"{which} is singular once rounded to {dtype} (its numbers are not): every "
                                f"output pixel would sample {_sampled(rank)}")
    return result


class SingularCastError(GeomError):
    """A regular matrix that the grid dtype's rounding makes singular: the dtype asked is at fault."""


def _made_singular(matrices: np.ndarray, result: np.ndarray) -> tuple[int, int] | None:
    """The index and rank of the first matrix regular in its own numbers but singular in
    ``result`` (the same in the grid dtype), or None. Only matrices the rounding changed are
    judged, so a theta file already in the grid dtype costs nothing."""
    spatial = matrices.shape[-2]
    before = matrices[..., :spatial].astype(np.float64)
    after = result[..., :spatial].astype(np.float64)
    with np.errstate(invalid="ignore"):
        judged = ((before != after).any(axis=(-2, -1)) & np.isfinite(before).all(axis=(-2, -1))
                  & np.isfinite(after).all(axis=(-2, -1)))
    if not judged.any():
        return None
    indices = np.flatnonzero(judged)
    regular = np.linalg.matrix_rank(before[indices]) == spatial
    ranks = np.linalg.matrix_rank(after[indices])
    made = regular & (ranks < spatial)
    if not made.any():
        return None
    first = int(np.argmax(made))
    return int(indices[first]), int(ranks[first])


def _sampled(rank: int) -> str:
    """What every output pixel samples through a 2-D matrix of ``rank`` below 2 (or a 3-D one below 3)."""
    return {0: "one point", 1: "one line of the input", 2: "one plane of the input"}[rank]


def check_numbers(numbers: Sequence[float] | None, flags: tuple[Any, ...]) -> None:
    """Refuse, as usage errors naming the option, inline --theta numbers or transform flags
    that are not finite (Inf, NaN, or typed past ±1.8e308, which reads as Inf)."""
    given = [("theta", tuple(numbers))] if numbers is not None else []
    given += [(name, _as_tuple(value)) for name, value in zip(_FLAGS, flags, strict=True)]
    for name, values in given:
        for value in values:
            if not math.isfinite(value):
                overflow = " (a number past ±1.8e308 reads as inf)" if math.isinf(value) else ""
                raise _usage(f"every number must be finite, found {value}{overflow}", [name])


def check_invertible(flags: tuple[Any, ...]) -> None:
    """Refuse, as a usage error, transform flags whose matrix is singular (its 2x2 part of rank
    below 2, to float64's precision): every output pixel would sample one point, or one line, and
    the output would be flat with no word why. Typed --theta numbers may be singular: that is
    legitimate ONNX and asked for by name."""
    given = _given(flags)
    linear = from_transforms(*flags)[:, :2]
    if not given or not np.isfinite(linear).all():  # an overflow is the caller's error to name
        return
    rank = int(np.linalg.matrix_rank(linear))
    if rank == 2:
        return
    typed = " ".join(f"--{name} {','.join(f'{value:g}' for value in _as_tuple(values))}"
                     for name, values in zip(_FLAGS, flags, strict=True) if name in given)
    raise PlanError(f"{typed} make{'s' if len(given) == 1 else ''} a singular matrix: every output pixel "
                    f"would sample {_sampled(rank)}")


def from_transforms(rotate: float = 0.0, scale: Sequence[float] = (1.0,), translate: Sequence[float] = (0.0, 0.0),
                    shear: Sequence[float] = (0.0, 0.0)) -> np.ndarray:
    """One 2-D matrix T·R·H·S: scale first, then shear, rotate (degrees, counter-clockwise
    in x/y), then translate. theta maps output positions to sampling positions.

    >>> from_transforms(scale=(2.0,), translate=(0.5, 0.0)).tolist()
    [[2.0, 0.0, 0.5], [0.0, 2.0, 0.0]]
    """
    sx, sy = (scale[0], scale[0]) if len(scale) == 1 else scale
    angle = math.radians(rotate)
    # Exact zeros, halves and ones for the common angles, not 6e-17: the turn alone is rounded,
    # as a product rounded to 15 decimals would make --scale 1e-50 (or --translate 1e-20) 0.
    cos, sin = round(math.cos(angle), 15) + 0.0, round(math.sin(angle), 15) + 0.0
    scaling = np.diag([sx, sy, 1.0])
    shearing = np.array([[1.0, shear[0], 0.0], [shear[1], 1.0, 0.0], [0.0, 0.0, 1.0]])
    rotation = np.array([[cos, -sin, 0.0], [sin, cos, 0.0], [0.0, 0.0, 1.0]])
    translation = np.array([[1.0, 0.0, translate[0]], [0.0, 1.0, translate[1]], [0.0, 0.0, 1.0]])
    # Finite flags may still overflow here (scale 1e200 by shear 1e200): the caller checks.
    with np.errstate(over="ignore", invalid="ignore"):
        matrix: np.ndarray = (translation @ rotation @ shearing @ scaling)[:2] + 0.0
    return matrix


def given_flags(flags: tuple[Any, ...]) -> dict[str, Any]:
    """The transform flags that move anything (not at the identity's values), as a run's record
    names them.

    >>> given_flags((10.0, (1.0,), (0.5, 0.0), (0.0, 0.0)))
    {'rotate': 10.0, 'translate': [0.5, 0.0]}
    """
    given = _given(flags)
    return {name: list(value) if isinstance(value, Sequence) else value
            for name, value in zip(_FLAGS, flags, strict=True) if name in given}


def recorded(matrix: np.ndarray) -> list[list[float]]:
    """One matrix as a run's record shows it: nested lists of the numbers used, in float64, which
    holds every grid dtype's exactly.

    >>> recorded(from_transforms(rotate=90.0).astype(np.float32))
    [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0]]
    """
    rows: list[list[float]] = matrix.astype(np.float64).tolist()
    return rows


def _usage(message: str, options: Sequence[str]) -> PlanError:
    return PlanError(message, [f"--{name}" for name in options])


def _as_tuple(value: float | Sequence[float]) -> tuple[float, ...]:
    return tuple(value) if isinstance(value, Sequence) else (value,)


def _given(flags: tuple[Any, ...]) -> list[str]:
    """The names of the transform flags that are not the identity's."""
    return [name for name, value, default in zip(_FLAGS, flags, _IDENTITY, strict=True)
            if _as_tuple(value) != _as_tuple(default)]


GRID_DTYPES = ("float32", "float64", "float16", "bfloat16")


def is_file(text: str | None) -> bool:
    """Whether --theta names a file (.npy/.tiff, any path that exists, or - for stdin) rather
    than numbers."""
    return text is not None and (text == "-" or os.path.splitext(text)[1].lower() in (".npy", ".tif", ".tiff", ".zarr")
                                 or os.path.exists(text))


def resolve(size: tuple[int, ...] | None, like: str | None, theta_file: str | None,
            numbers: Sequence[float] | None, flags: tuple[Any, ...], dtype: str | None, layout: str | None,
            max_pixels: int, auto_orient: bool = True, frames: str = "first", series: int | None = None,
            page: int | None = None, warnings: list[str] | None = None,
            volume: bool = False) -> tuple[np.ndarray, tuple[int, ...]]:
    """theta as (N, s, s+1) in the grid dtype, and the grid size it goes with.

    The size comes from ``size`` (N,C,H,W or N,C,D,H,W) or the file ``like`` (its N as grid-sample
    reads it, an animation's by ``frames``: "first", N = 1, or "all", N = its frame count; a
    TIFF's ``series`` or ``page`` alone, if given); theta from ``theta_file``, inline ``numbers``
    or the 2-D transform ``flags``: one matrix for every N, or one per N. The grid's size is
    checked against ``max_pixels`` before theta is built: N matrices could be gigabytes
    themselves. What the options cannot make of
    the files (a layout ``like`` cannot take, matrices that do not fit the grid, an output past
    ``max_pixels``) is an OptionFault, a usage fault (exit 2). ``series`` or ``page`` for a ``like``
    that is no TIFF, and typed numbers in 12s for a z-stack's planes, add their warnings to
    ``warnings``, as grid-sample and warp warn. ``volume`` (--volume): ``like``'s z-stack is one
    volume, (N, C, D, H, W) with Z its D, as warp and grid-sample --volume read it.
    """
    import geomcli.ops.affine_grid as grid_ops
    from geomcli import io

    check_numbers(numbers, flags)
    if numbers is None and theta_file is None:
        check_invertible(flags)
    # what a matrix that overflows is made of: --theta, or the transform flags given
    options = ["theta"] if numbers is not None else _given(flags)
    declared: tuple[int, ...] = ()  # --like's file's shape
    if like is not None:
        # an animation's size is its frames' size (times their count for "all"); an image's turned
        # upright, unless auto_orient is off
        header = io.read_header(like, frames=frames, auto_orient=auto_orient, series=series, page=page)
        declared = header.shape
        for option, value in (("--series", series), ("--page", page)):
            if value is not None and header.format != "tiff" and warnings is not None:
                warnings.append(f"{like}: {option} is for TIFF input, not {header.format.upper()}; ignored")
        batch, *spatial_sizes = _like_size(header, like, layout, volume)
        what = f"{like}'s N = {batch}"
        if (not volume and numbers is not None and len(spatial_sizes) == 3 and len(numbers) % 12 == 0 and layout is None
                and "Z" in (header.layout or "") and warnings is not None):
            warnings.append(planes_caution(len(numbers) // 6, header.layout or ""))
    else:
        assert size is not None
        batch, *spatial_sizes = size
        what = f"--size's N = {batch}"
    spatial = len(spatial_sizes) - 1
    matrices: np.ndarray | None = None
    if theta_file is not None:
        matrices = _grid_theta_file(theta_file, spatial, batch, what, max_pixels)
        dtype = dtype or str(matrices.dtype)
    else:
        if numbers is None and spatial == 2:
            numbers = tuple(from_transforms(*flags).ravel().tolist())
            if not all(map(math.isfinite, numbers)):
                raise _usage("the matrix they make overflows float64 (an entry past ±1.8e308)", options)
        elif numbers is None and from_transforms(*flags).tolist() != from_transforms().tolist():
            raise OptionFault(f"{like}: a rank-5 file makes a 3-D grid, and --rotate, --scale, --shear and "
                              "--translate make 2-D matrices; give --theta")
        elif numbers is None:
            numbers = tuple(1.0 if row == col else 0.0 for row in range(3) for col in range(4))
        try:
            check_count(numbers, spatial, batch)
        except GeomError as error:  # typed numbers that do not fit --like's file: a usage error too
            raise _usage(str(error).removeprefix("--theta: "), ["theta"]) from error
    grid_size = (batch, *spatial_sizes)
    try:
        # (a shape past what numpy addresses is refused as one past max_pixels)
        shape = grid_ops.affine_grid_output_shape((batch, spatial, spatial + 1), grid_size)
        io.check_size(shape, max_pixels, f"the output {shape}")
    except GeomError as error:
        if like is None:
            raise OptionFault(str(error)) from error
        if math.prod(declared) > max_pixels:  # a file declaring too much (a bomb, say) is a bad file
            raise GeomError(f"{like}: {error}") from error
        raise OptionFault(f"{like}: {error}") from error  # what the options make of it, as warp's output
    if matrices is None:
        assert numbers is not None
        # one matrix broadcast to N stays one matrix in memory, in the grid dtype
        try:
            return from_numbers(numbers, spatial, batch, dtype=grid_dtype(dtype or "float32")), grid_size
        except GeomError as error:  # a float64 number that the grid dtype cannot hold
            raise _usage(f"{error}; --dtype float64 holds it", options) from error
    try:
        return cast(matrices, grid_dtype(dtype or "float32")), grid_size
    except SingularCastError as error:  # the file's own numbers are regular: --dtype is at fault
        raise _usage(f"{theta_file}: {error}; --dtype float64 holds it", ["dtype"]) from error
    except GeomError as error:
        raise GeomError(f"{theta_file}: {error}") from error


def planes_caution(count: int, layout: str, volume_option: bool = False) -> str:
    """The warning for typed numbers in 12s on a z-stack of named axes, warped plane by plane:
    read as ``count`` 2-D matrices where 3-D ones were more likely meant; ``volume_option``: the
    command (warp) takes --volume, which warps it in 3-D."""
    way = ("give --volume to warp it as one volume" if volume_option
           else "a 3-D warp takes a rank-5 tensor of no named axes")
    return (f"--theta's {6 * count} numbers are read as {count} 2-D matrices (6 numbers each): a {layout} "
            f"stack is warped plane by plane, not in 3-D ({way})")


def _like_size(header: Header, like: str, layout: str | None, volume: bool = False) -> tuple[int, ...]:
    """The grid size of --like's file, of ``header``: (N, C, H, W) as grid-sample and warp see it
    (a stack's images flattened into N: an OME TCZYX's T·Z planes), (N, C, D, H, W) of a rank-5
    tensor of no named axes, or of a z-stack for a ``volume`` (Z its D). A layout the file cannot
    take is an OptionFault (exit 2), naming the file."""
    from geomcli.engine import layout as layouts

    shape = tuple(header.shape)
    if volume:  # as warp and grid-sample --volume read it, refused where it has no Z as they refuse
        try:
            named = layouts.tensor_layout(shape, layouts.given_layout(layout, header.format), header.layout,
                                          volume=True, axes=header.axes)
        except GeomError as error:
            raise OptionFault(f"{like}: {error}") from error
        return shape if named is None else layouts.to_nchw_shape(shape, named, volume=True)
    try:
        if len(shape) == 5 and header.layout is None:  # a TIFF's or OME-Zarr's TCZYX is a stack of planes
            if layout is not None:
                raise GeomError(f"a rank-5 tensor {shape} is read as N, C, D, H, W; --layout {layout} names rank "
                                "4 or less")
            return shape
        given = layouts.given_layout(layout, header.format)  # an image keeps its own, as grid-sample reads it
        return layouts.to_nchw_shape(shape, layouts.resolve_layout(shape, given, header.layout))
    except GeomError as error:
        raise OptionFault(f"{like}: {error}") from error


def _read_theta(theta_file: str, max_pixels: int) -> np.ndarray:
    """A theta file's array, refused unless it holds floats."""
    return _read_floats(theta_file, max_pixels, "--theta", "theta")


def _read_floats(path: str, max_pixels: int, option: str, what: str) -> np.ndarray:
    """A small array of floats an ``option`` names (theta, a grid; ``what`` names it in errors),
    read whole within ``max_pixels``: a .npy or TIFF file (``-``: stdin) or a .zarr array. A name
    of another extension is the option's mistake (a PlanError, exit 2), found before anything is
    read: no other format holds floats."""
    from geomcli import io
    from geomcli.io import _zarr

    if _zarr.is_zarr(path):
        data = _zarr.read_whole(path, max_pixels)
    else:
        extension = os.path.splitext(path)[1]
        if path != "-" and extension:
            try:
                fmt = io.format_for_path(path)
            except GeomError:
                fmt = None
            if fmt not in _FLOAT_FORMATS:
                raise PlanError(f"{path}: {what} is read from a .npy, .tif, .tiff or .zarr file, the formats that "
                                f"hold floats; not {extension}", options=option)
        data = io.read_array(path, max_pixels=max_pixels, mmap=False).data
    if data.dtype.kind != "f" and data.dtype.name != "bfloat16":
        raise GeomError(f"{io.display_name(path)}: {what} must hold floats, found {data.dtype}")
    return data


# the file formats geomcli reads that hold floats (with .zarr)
_FLOAT_FORMATS = ("npy", "tiff")


def _grid_theta_file(theta_file: str, spatial: int, batch: int, what: str, max_pixels: int) -> np.ndarray:
    """A theta file's matrices for N = ``batch`` grids of ``spatial`` axes (``what`` names where N
    came from). Matrices that do not fit the grid (of the other rank, or neither 1 nor N of them)
    are an OptionFault (exit 2); a file that holds no matrices is that file's failure."""
    data = _read_theta(theta_file, max_pixels)
    other = 5 - spatial
    if data.ndim in (2, 3) and data.shape[-2:] == (other, other + 1):
        raise OptionFault(f"{theta_file}: theta holds {other}-D matrices {data.shape}; a {spatial}-D grid "
                          f"takes (N, {spatial}, {spatial + 1}) or ({spatial}, {spatial + 1})")
    try:
        return fit_batch(as_batch(data, spatial, theta_file), batch, theta_file, what)
    except GeomError as error:
        if data.ndim == 3 and data.shape[1:] == (spatial, spatial + 1):
            raise OptionFault(str(error)) from error  # a count of matrices the grid's N cannot take
        raise


def grid_dtype(name: str) -> np.dtype:
    """The numpy dtype of a --dtype name (bfloat16 from ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes

        bfloat16: np.dtype = np.dtype(ml_dtypes.bfloat16)
        return bfloat16
    return np.dtype(name)


@dataclass(frozen=True)
class WarpTheta:
    """A warp's matrices by the spatial rank of the data they meet (2: images, 3: rank-5 volumes
    and z-stacks warped with --volume), each (1 or N, s, s+1): typed numbers that come in 12s
    make both (two 2-D matrices or one 3-D), and the input's rank (or --volume) picks; a file's or
    the flags' are of one rank. ``refused`` says, for a rank without matrices, what it takes."""

    matrices: dict[int, np.ndarray]
    refused: dict[int, str]

    def of_rank(self, spatial: int) -> np.ndarray:
        """The matrices for data of ``spatial`` axes; a GeomError saying what that takes where none are."""
        if spatial not in self.matrices:
            raise GeomError(self.refused[spatial])
        return self.matrices[spatial]


# a warp by its spatial rank, as messages name it
_WARPED = {2: "a 2-D warp", 3: "a 3-D warp (of a rank-5 tensor)"}


def for_warp(theta_file: str | None, numbers: Sequence[float] | None, flags: tuple[Any, ...], dtype: str | None,
             max_pixels: int) -> WarpTheta:
    """theta for ``geomcli warp``, as :func:`resolve` builds it for affine-grid from the same
    flags, numbers or file: (1 or N, s, s+1) matrices in ``dtype`` (the file's float type, else
    float32) for 2-D data, for 3-D data (rank 5), or for both: typed numbers that come in 12s make
    2-D matrices of 6 numbers and 3-D ones of 12, and each input's rank picks."""
    check_numbers(numbers, flags)
    if numbers is None and theta_file is None:
        check_invertible(flags)
    if theta_file is not None:
        return _warp_theta_file(theta_file, dtype, max_pixels)
    options = ["theta"] if numbers is not None else _given(flags)
    if numbers is None:
        numbers = tuple(from_transforms(*flags).ravel().tolist())
        if not all(map(math.isfinite, numbers)):
            raise _usage("the matrix they make overflows float64 (an entry past ±1.8e308)", options)
        refusals = {3: "--rotate, --scale, --shear and --translate make 2-D matrices, and a rank-5 tensor is "
                       "warped in 3-D; give --theta (12 numbers per matrix)"}
    else:
        refusals = {spatial: f"--theta: {_WARPED[spatial]} takes {spatial * (spatial + 1)} numbers per matrix, "
                             f"found {len(numbers)}" for spatial in (2, 3)}
    if len(numbers) % 6:
        raise _usage(f"a 2-D warp takes 6 numbers per matrix, a 3-D warp (of a rank-5 tensor) 12; found "
                     f"{len(numbers)}", ["theta"])
    fits = [spatial for spatial in (2, 3) if len(numbers) % (spatial * (spatial + 1)) == 0]
    try:
        return WarpTheta({spatial: from_numbers(numbers, spatial, len(numbers) // (spatial * (spatial + 1)),
                                                dtype=grid_dtype(dtype or "float32")) for spatial in fits},
                         {spatial: message for spatial, message in refusals.items() if spatial not in fits})
    except GeomError as error:  # a float64 number that the grid dtype cannot hold
        raise _usage(f"{error}; --dtype float64 holds it", options) from error


def _warp_theta_file(theta_file: str, dtype: str | None, max_pixels: int) -> WarpTheta:
    """A theta file's matrices for a warp: 2-D or 3-D by their shape, the other rank refused."""
    data = _read_theta(theta_file, max_pixels)
    spatial = 3 if data.shape[-2:] == (3, 4) else 2
    matrices = as_batch(data, spatial, theta_file)
    other = 5 - spatial
    refusal = (f"theta from {theta_file} holds {spatial}-D matrices {matrices.shape}; {_WARPED[other]} takes "
               f"(N, {other}, {other + 1}) or ({other}, {other + 1})")
    try:
        return WarpTheta({spatial: cast(matrices, grid_dtype(dtype or str(matrices.dtype)))}, {other: refusal})
    except SingularCastError as error:  # the file's own numbers are regular: --dtype is at fault
        raise _usage(f"{theta_file}: {error}; --dtype float64 holds it", ["dtype"]) from error
    except GeomError as error:
        raise GeomError(f"{theta_file}: {error}") from error


def read_grid(path: str, max_pixels: int) -> np.ndarray:
    """A sampling grid from a file (``-``: stdin), for grid-sample: it must hold floats."""
    return _read_floats(path, max_pixels, "--grid", "a grid")
