"""zarr v3 arrays: a path or URL ending in ``.zarr`` is an array, read and written chunk by chunk
(geomcli.engine.zarr_file drives the chunks; this module opens and makes the arrays).

- **Layout.** An OME-Zarr (NGFF 0.4 or 0.5) group is read at its first (full-resolution)
  level, its axes naming the layout where they fit geomcli's (``c``, ``y``, ``x``, and ``t`` or
  ``n`` as N); a plain array's ``dimension_names`` the same way. An output is written as the
  input was: an OME-Zarr group of one level (the input's axes, each with its name, type and
  unit, a unit only where the input gave one; the scale as the operation makes it; an
  OME-TIFF's physical sizes as its scale and units, see :func:`space_of`), else an array with
  ``dimension_names``.
- **A completion marker, written last.** zarr reads a chunk that was never written as its fill
  value, so an output cut short would read as a whole array. Each output is made with the
  attribute ``geomcli: {"complete": false}`` and marked complete only after its last chunk is
  written; geomcli refuses to read an array so marked incomplete.

Only the standard library loads at import time; zarr loads with the first ``.zarr``.
"""

from __future__ import annotations

import lzma
import math
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NamedTuple

from geomcli.errors import GeomError

if TYPE_CHECKING:
    import numpy as np

    from geomcli.io._base import Header, Metadata

INSTALL = "pip install 'geomcli[dask]'"
MARKER = "geomcli"
# the layout letters of the axis names OME-Zarr and common dimension_names use
_AXIS_LETTERS = {"c": "C", "channel": "C", "channels": "C", "y": "H", "height": "H", "x": "W", "width": "W",
                 "n": "N", "t": "N", "batch": "N", "time": "N"}
_NAMES = {"N": "n", "C": "c", "H": "y", "W": "x"}
_OME_TYPES = {"N": "time", "C": "channel", "H": "space", "W": "space",
              "T": "time", "Z": "space", "Y": "space", "X": "space"}  # and OME's own axes, as a layout
_OME_NAMES = {"N": "t", "C": "c", "H": "y", "W": "x"}
# what a damaged chunk's decompressor raises beyond RuntimeError and ValueError: numcodecs' zlib
# and lzma (a zarr v2 compressor, a v3 numcodecs.* codec) pass on the standard library's own
CODEC_FAILURES: tuple[type[Exception], ...] = (zlib.error, lzma.LZMAError)


def is_zarr(path: str) -> bool:
    """Whether ``path`` names a zarr array (it ends in ``.zarr``).

    >>> is_zarr("scan.zarr"), is_zarr("s3://bucket/scan.zarr/"), is_zarr("scan.npy")
    (True, True, False)
    """
    return path.rstrip("/").lower().endswith(".zarr")


class Space(NamedTuple):
    """An OME-Zarr image's coordinate system, an entry per axis of its array: each axis's OME
    entry (its name, type and unit where it gives one) and its first level's scale (None where
    it gives none)."""

    axes: tuple[dict[str, Any], ...]
    scale: tuple[float, ...] | None = None
    translation: tuple[float, ...] | None = None
    """Where its first pixel's centre lies, per axis, in the units of ``axes``."""
    name: str | None = None
    """The multiscales' name."""
    omero: dict[str, Any] | None = None
    """The image's ``omero`` (its channels' labels, colours and display windows), as given."""
    levels: int = 1
    """How many levels its multiscales list: only the first is read, and an output has that one."""

    def physical(self) -> str:
        """Its scale and units as a warning names them (``y 0.5 nanometer, x 0.25 nanometer``);
        empty where it says nothing of size (a scale of 1 and no unit everywhere)."""
        scale = self.scale or (1.0,) * len(self.axes)
        said = [f"{axis.get('name', '?')} {value:g}{' ' + axis['unit'] if 'unit' in axis else ''}"
                for axis, value in zip(self.axes, scale) if value != 1.0 or "unit" in axis]
        return ", ".join(said)


# OME-XML's unit symbols (PhysicalSizeXUnit) and the UDUNITS names NGFF gives units by
_OME_UNITS = {"Ym": "yottameter", "Zm": "zettameter", "Em": "exameter", "Pm": "petameter", "Tm": "terameter",
              "Gm": "gigameter", "Mm": "megameter", "km": "kilometer", "hm": "hectometer", "dam": "decameter",
              "m": "meter", "dm": "decimeter", "cm": "centimeter", "mm": "millimeter", "\u00b5m": "micrometer",
              "um": "micrometer", "nm": "nanometer", "pm": "picometer", "fm": "femtometer", "am": "attometer",
              "zm": "zeptometer", "ym": "yoctometer", "\u00c5": "angstrom", "in": "inch", "ft": "foot",
              "yd": "yard", "mi": "mile", "pc": "parsec"}


# OME-XML's time unit symbols (TimeIncrementUnit; seconds where it names none) and their UDUNITS names
_OME_TIME_UNITS = {"s": "second", "ms": "millisecond", "\u00b5s": "microsecond", "ns": "nanosecond",
                   "ps": "picosecond", "min": "minute", "h": "hour", "d": "day"}
# NGFF's unit names as OME's symbols (micrometer: the first of µm and um)
_SYMBOLS = {name: symbol for symbol, name in reversed([*_OME_UNITS.items(), *_OME_TIME_UNITS.items()])}


def space_of(metadata: Metadata) -> Space | None:
    """The OME-Zarr coordinate system of an OME-TIFF of this metadata: its axes (of T, C, Z, Y
    and X) with its physical pixel sizes (OME's unit symbols, micrometres where it names none) and
    its channel names as the omero's labels; None where it gives neither a size nor channel names
    (a plain array's dimension_names hold all it says), or a unit NGFF names none for. Channel
    names without sizes give an OME-Zarr too, of no unit and no scale (NGFF's 1), as with sizes:
    the names need its omero, and the axes are named alike either way.

    The omero's channels hold their labels alone, no ``color`` or ``window``: NGFF 0.5's schema
    (the version written) requires neither, ome-zarr-py and ngff-zarr write an omero only as they
    are given it, and each default would be a guess passed off as the file's: a window of the
    dtype's range shows a 12-bit camera's uint16 near black (and means nothing for floats), a
    colour cycle paints channels the OME-XML gave no colour. Stricter validators (ome-zarr-models,
    NGFF 0.4's schema) want both; a viewer without them picks its own contrast and colour.

    >>> from geomcli.io import Metadata
    >>> space_of(Metadata(axes="CYX", axes_kind="ome", physical=(("X", 0.25, "nm"), ("Y", 0.5, "nm"))))
    Space(axes=({'name': 'c', 'type': 'channel'}, {'name': 'y', 'type': 'space', 'unit': 'nanometer'}, \
{'name': 'x', 'type': 'space', 'unit': 'nanometer'}), scale=(1.0, 0.5, 0.25), translation=None, name=None, \
omero=None, levels=1)
    >>> space_of(Metadata(axes="CYX", axes_kind="ome", channels=("dapi", "gfp"))).omero
    {'channels': [{'label': 'dapi'}, {'label': 'gfp'}]}
    """
    axes = metadata.axes or ""
    if not axes or any(letter not in "TCZYX" for letter in axes):
        return None
    from geomcli.io._tiff import imagej_physical

    sizes: dict[str, tuple[float, str]] = {}
    imagej = imagej_physical(metadata) if metadata.axes_kind == "imagej" else ()
    for axis, size, unit in (*imagej, *metadata.physical):
        if axis not in axes:  # (a ZYX stack's time increment: NGFF's scale is its axes' alone)
            continue
        units = _OME_TIME_UNITS if axis == "T" else _OME_UNITS
        if (unit or ("s" if axis == "T" else "\u00b5m")) not in units:
            return None
        sizes[axis] = (size, units[unit or ("s" if axis == "T" else "\u00b5m")])
    named = bool(metadata.channels) and "C" in axes
    if not sizes and not named:
        return None
    entries = tuple({"name": letter.lower(), "type": _OME_TYPES[letter]}
                    | ({"unit": sizes[letter][1]} if letter in sizes else {}) for letter in axes)
    # its OME channel names, as the omero's channel labels (dropped with it where the channels change)
    omero = {"channels": [{"label": name} for name in metadata.channels]} if named else None
    scale = tuple(sizes[letter][0] if letter in sizes else 1.0 for letter in axes) if sizes else None
    return Space(entries, scale, omero=omero)


def ome_tiff_of(space: Space | None, layout: str | None, bare: bool = False) -> Metadata | None:
    """An OME-TIFF's metadata for an OME-Zarr image of this coordinate system written in
    ``layout``: its axes (of T, C, Z, Y and X) as OME axes, and the scale of its axes of space
    as physical sizes in OME's unit symbols (of time, as its time increment), and its omero's
    channel labels as OME channel names; no size where it gives no scale, nor along an axis of
    space of no unit (OME's default, micrometres, would be a guess) or one OME has no symbol for; None where
    its axes no longer name the layout, or it gives neither sizes nor labels (``bare``: its axes
    alone then, for an output named .ome.tif).

    >>> tiff = ome_tiff_of(Space(({"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "nanometer"},
    ...                           {"name": "x", "type": "space", "unit": "micrometer"}), (1.0, 0.5, 0.25)), "CHW")
    >>> tiff.axes, tiff.axes_kind, tiff.physical
    ('CYX', 'ome', (('Y', 0.5, 'nm'), ('X', 0.25, 'µm')))
    """
    from geomcli.io._base import Metadata
    from geomcli.io._tiff import names_layout

    if space is None or not holds(space, layout):
        return None
    letters = "".join(str(axis.get("name", "?")).upper() for axis in space.axes)
    if not names_layout(letters, layout) or not set(letters) <= set("TCZYX"):
        return None  # (t, y, x read as NHW is a TIFF's TYX, read as its own layout: names_layout)
    physical: list[tuple[str, float, str | None]] = []
    for letter, axis, size in zip(letters, space.axes, space.scale or (), strict=False):
        if letter == "T" and axis.get("unit") in _OME_TIME_UNITS.values():  # (else named as dropped)
            physical.append((letter, size, _SYMBOLS[axis["unit"]]))
        if axis.get("type") != "space":
            continue
        if letter in "ZYX" and axis.get("unit") in _OME_UNITS.values():
            # (an axis of no unit has no size, the others keep theirs: a Z of none, an OME-TIFF's
            # with no PhysicalSizeZ, cost X, Y and T theirs; it is named as dropped where its scale says one)
            physical.append((letter, size, _SYMBOLS[axis["unit"]]))
    listed = (space.omero or {}).get("channels")
    labels = [entry.get("label") if isinstance(entry, dict) else None for entry in listed] \
        if isinstance(listed, list) else []
    # its omero's channel labels, as OME channel names (the TIFF writer names them where they do not fit)
    channels = tuple(str(label) for label in labels) if labels and all(isinstance(label, str) for label in labels) \
        else ()
    if not physical and not channels and not bare:
        return None
    return Metadata(axes=letters, axes_kind="ome", physical=tuple(physical), channels=channels)


def holds(space: Space | None, layout: str | None) -> bool:
    """Whether an OME-Zarr image of this layout carries ``space``: its axes still name the
    layout's, and in NGFF's order (time, channel, then 2 or 3 of space: TCZYX, CYX; not a
    TIFF's ZCYX)."""
    if space is None or layout is None or len(space.axes) != len(layout):
        return False
    names = [axis.get("name") for axis in space.axes]
    # (a TIFF's own axes, TYX, are the layout of an OME-TIFF's time series, where t, y, x read as NHW)
    own = "".join(name.upper() for name in names if isinstance(name, str))
    return ome_fits(layout) and (layout_of(names) == layout or own == layout)


def ome_fits(layout: str | None) -> bool:
    """Whether an OME-Zarr image can have these axes: NGFF orders a time axis first, then a
    channel axis, then 2 or 3 of space (TCZYX, CYX; not a TIFF's ZCYX).

    >>> ome_fits("TCZYX"), ome_fits("CHW"), ome_fits("ZCYX"), ome_fits("HWC")
    (True, True, False, False)
    """
    import re

    kinds = "".join(_OME_TYPES.get(letter, "?")[0] for letter in layout or "")
    return re.fullmatch(r"t?c?s{2,3}", kinds) is not None


class Opened(NamedTuple):
    """A zarr input: the array (its full-resolution level), the layout its axes name (or None),
    and its OME-Zarr coordinate system (None for a plain array)."""

    array: Any
    layout: str | None
    space: Space | None


def _zarr() -> Any:
    try:
        import zarr
    except ImportError as error:
        raise GeomError(f".zarr arrays are read and written by zarr, which is not installed: {INSTALL}") from error
    import warnings

    # zarr's Python warning of a data type of no v3 specification (a <U3 array's), a paragraph with
    # its source line on stderr, -q or not: a run says it once, as a Warning: line (see unstable)
    warnings.filterwarnings("ignore", category=getattr(zarr.errors, "UnstableSpecificationWarning", Warning))
    # and its paragraph for each array of a numcodecs.* codec read, of which a reader can do nothing
    warnings.filterwarnings("ignore", message="Numcodecs codecs are not in the Zarr version 3 specification")
    from geomcli.io import _zarr_codecs

    _zarr_codecs.install()
    return zarr


def unstable(dtype: np.dtype) -> str | None:
    """A warning for an output of ``dtype`` where zarr v3 has no specification of its data type
    (fixed-width strings and bytes, structured data: other zarr libraries may not read it); None
    for the rest."""
    import warnings

    try:
        from zarr.core.dtype import get_data_type_from_native_dtype
    except ImportError:
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            get_data_type_from_native_dtype(dtype).to_json(zarr_format=3)
        except (ValueError, TypeError):
            return None
    if not any(type(warning.message).__name__ == "UnstableSpecificationWarning" for warning in caught):
        return None
    return f"zarr v3 has no specification of {dtype} data yet: other zarr libraries may not read this array"


def _store(path: str, read_only: bool) -> Any:
    """The store of ``path``: a local folder, or an fsspec store for a URL (with --storage-option)."""
    from geomcli.io import _remote

    zarr = _zarr()
    path = _remote.local_path(path)
    if not _remote.is_url(path):
        if read_only:  # (an input, which may be anyone's)
            from geomcli.io._zarr_store import ContainedStore

            return ContainedStore(path, read_only=True)
        return zarr.storage.LocalStore(path, read_only=read_only)
    from geomcli.io._zarr_store import BoundedRemoteStore

    options = dict(_remote.filesystem_options(path))
    if _remote.protocol(path) in ("s3", "s3a"):
        # s3fs asks an object's size (a HEAD) before reading it whole, to split one past its block
        # size (50 MiB) into ranged reads 10 at a time: a request more for every chunk (4 chunks
        # took 8), where zarr reads many chunks side by side itself. (--storage-option sets it.)
        options.setdefault("max_concurrency", 1)
    # (an input's chunk objects are read no further than a chunk can take, once it is open)
    store: Any = BoundedRemoteStore.from_url(path, storage_options=options or None, read_only=read_only)
    store.deadline_seconds = _remote.deadline()
    return store


def _open_node(store: Any, mode: str) -> Any:
    """``zarr.open``, a v3 node looked for first, then a v2 one: without a format zarr asks for
    both's metadata side by side, 3 requests (zarr.json, .zarray, .zattrs) to an object store
    where one finds a v3 array (what geomcli writes); a v2 array costs one or two more."""
    zarr = _zarr()
    try:
        return zarr.open(store=store, mode=mode, zarr_format=3)
    except FileNotFoundError:  # (zarr's NodeNotFoundError is one)
        return zarr.open(store=store, mode=mode, zarr_format=2)


def layout_of(names: Any) -> str | None:
    """The geomcli layout axis names spell, or None where they spell none of them: one of the
    named layouts, else OME's single-letter axes ending in y, x with at most one c (TCZYX, ZYX),
    a layout of their own as a TIFF hyperstack's axes are.

    >>> layout_of(["c", "y", "x"]), layout_of(["t", "c", "y", "x"]), layout_of(["t", "c", "z", "y", "x"])
    ('CHW', 'NCHW', 'TCZYX')
    >>> layout_of(["z", "y", "x"]), layout_of(["y", "x", "z"]), layout_of(None)
    ('ZYX', None, None)
    """
    import re

    from geomcli.constants import LAYOUTS

    if not names or any(not isinstance(name, str) for name in names):
        return None
    letters = "".join(_AXIS_LETTERS.get(name.lower(), "?") for name in names)
    if letters in LAYOUTS:
        return letters
    own = "".join(name.upper() for name in names)
    return own if re.fullmatch(r"[TZC]*YX", own) and own.count("C") <= 1 and len(set(own)) == len(own) else None


# within shared_opens(): each input path's Opened, opened once (a context's own: a thread's, a task's)
_shared: ContextVar[dict[str, Opened] | None] = ContextVar("geomcli_zarr_shared", default=None)


@contextmanager
def shared_opens() -> Iterator[None]:
    """Within it, :func:`open_input` opens each path once: one file's run read the array's metadata
    for its header, again to judge its tasks, and again to run (3 requests of a URL's 8, 4 chunks
    aside). For one file's checks and run: not longer, where the array could change."""
    token = _shared.set({} if _shared.get() is None else _shared.get())
    try:
        yield
    finally:
        _shared.reset(token)


def open_input(path: str) -> Opened:
    """The array at ``path`` (an OME-Zarr group's first level), with its layout; a GeomError
    for no array there, one that cannot be read, or one a geomcli run left incomplete. Opened
    once within :func:`shared_opens`."""
    shared = _shared.get()
    if shared is None:
        return _open_input(path)
    if path not in shared:
        shared[path] = _open_input(path)
    return shared[path]


def _open_input(path: str) -> Opened:
    from geomcli.io import _remote
    from geomcli.io._base import raised_in

    zarr = _zarr()
    if _remote.is_url(path):  # one request first (see check_readable)
        _remote.check_readable(path)
    try:
        node = _open_node(_store(path, read_only=True), "r")
    except (FileNotFoundError, KeyError) as error:
        raise GeomError(f"{path}: no zarr array there") from error
    except (OSError, ValueError) as error:
        raise GeomError(f"{path}: not a readable zarr array ({_first_line(error)})") from error
    except _remote._failures() as error:  # botocore's, aiohttp's: their own, no OSError
        raise GeomError(f"{path}: cannot read ({_first_line(error)})") from error
    except _METADATA_ERRORS as error:
        if not raised_in(error, "zarr"):
            raise  # geomcli's own: a bug keeps its traceback
        raise GeomError(f"{path}: not a readable zarr array ({_first_line(error)})") from error
    attributes = dict(node.attrs)
    _check_complete(path, attributes)
    if isinstance(node, zarr.Array):
        _check_grid(node, path)
        _bound_compressor(node)
        linked = None if _remote.is_url(path) else _level_of(path, node.ndim)
        if linked is not None:  # a level of an OME-Zarr image, by a link: its image's axes, scale, place
            return Opened(node, *linked)
        return Opened(node, layout_of(dimension_names(node)), None)
    # the attributes are any JSON a file holds: each step is checked for the type it must have
    ome = attributes.get("ome")
    multiscales = (ome.get("multiscales") if isinstance(ome, dict) else None) or attributes.get("multiscales")
    if not multiscales:
        raise GeomError(f"{path}: a zarr group, not an array (nor an OME-Zarr image){_arrays_in(node)}")
    image = _first(multiscales)
    dataset = _first(image.get("datasets")) if isinstance(image, dict) else None
    level = dataset.get("path") if isinstance(dataset, dict) else None
    if not isinstance(level, str):
        raise GeomError(f"{path}: not a readable OME-Zarr image (its multiscales name no first level's path)")
    try:
        array = node[level]
    except KeyError as error:
        raise GeomError(f"{path}: the OME-Zarr level {level!r} is missing") from error
    except ValueError as error:  # a path zarr refuses ('..')
        raise GeomError(f"{path}: not a readable OME-Zarr image ({_first_line(error)})") from error
    if not isinstance(array, zarr.Array):
        raise GeomError(f"{path}: the OME-Zarr level {level!r} is not an array")
    _check_grid(array, path)
    _bound_compressor(array)
    assert isinstance(image, dict) and isinstance(dataset, dict)
    return Opened(array, *_image_space(attributes, image, dataset, path, array.ndim))


def _level_of(path: str, count: int) -> tuple[str | None, Space] | None:
    """The layout and coordinate system of the local array at ``path`` (of ``count`` axes) where it
    is a level of an OME-Zarr image (``ln -s scan.zarr/1 half.zarr``): read from its image's
    multiscales, its own scale and translation (a try-out's level 1 came out as a plain array, its
    pixels of no size, the OME-Zarr it is a level of unsaid); None for another array."""
    real = os.path.realpath(path)
    try:
        group = _open_node(_store(os.path.dirname(real), read_only=True), "r")
        attributes = dict(group.attrs)
    except (FileNotFoundError, KeyError, OSError, ValueError, GeomError, *_METADATA_ERRORS):
        return None
    ome = attributes.get("ome")
    multiscales = (ome.get("multiscales") if isinstance(ome, dict) else None) or attributes.get("multiscales")
    image = _first(multiscales)
    datasets = image.get("datasets") if isinstance(image, dict) else None
    dataset = next((entry for entry in datasets if isinstance(entry, dict)
                    and entry.get("path") == os.path.basename(real)), None) if isinstance(datasets, list) else None
    if dataset is None:
        return None
    assert isinstance(image, dict)
    layout, space = _image_space(attributes, image, dataset, path, count)
    return layout, space._replace(levels=1)  # (its own level alone: no other is dropped)


def _image_space(attributes: dict[str, Any], image: dict[str, Any], dataset: dict[str, Any], path: str,
                 count: int) -> tuple[str | None, Space]:
    """The layout and coordinate system of the level ``dataset`` of an OME-Zarr ``image`` (its
    multiscales entry; ``attributes``: its group's), of ``count`` axes."""
    listed = image.get("axes")
    axes = tuple(_entry(axis) for axis in listed) if isinstance(listed, list) else ()  # (NGFF 0.3's: bare names)
    scale, translation = _transforms(dataset, path, count)
    # the multiscales' own transformations apply after every level's: folded into the level's, so that
    # the output (a level's alone) puts each pixel where the input did (a try-out's were dropped)
    outer_scale, outer_translation = _transforms(image, path, count)
    if outer_scale is not None:
        scale = tuple(outer * own for outer, own in zip(outer_scale, scale or (1.0,) * count, strict=True))
        translation = None if translation is None else tuple(
            outer * own for outer, own in zip(outer_scale, translation, strict=True))
    if outer_translation is not None:
        translation = tuple(outer + own for outer, own in
                            zip(outer_translation, translation or (0.0,) * count, strict=True))
    name = image.get("name")
    ome = attributes.get("ome")
    omero = (ome if isinstance(ome, dict) else attributes).get("omero")  # (NGFF 0.4's beside its multiscales)
    datasets = image.get("datasets")
    return (layout_of([axis.get("name") for axis in axes]),
            Space(axes, scale, translation, name if isinstance(name, str) else None,
                  omero if isinstance(omero, dict) else None, len(datasets) if isinstance(datasets, list) else 1))


def _transforms(entry: dict[str, Any], path: str,
                count: int) -> tuple[tuple[float, ...] | None, tuple[float, ...] | None]:
    """The scale and translation of an OME dataset's (or multiscales') coordinateTransformations,
    None for one it has not; a GeomError for one of another length than the array's ``count``
    axes (a try-out's was written as it was, and a resize left it unscaled)."""
    given = entry.get("coordinateTransformations")
    transforms = {transform.get("type"): transform for transform in given if isinstance(transform, dict)} \
        if isinstance(given, list) else {}
    scale, translation = (_numbers(transforms[kind].get(kind), path, kind) if kind in transforms else None
                          for kind in ("scale", "translation"))
    for kind, numbers in (("scale", scale), ("translation", translation)):
        if numbers is not None and len(numbers) != count:
            raise GeomError(f"{path}: not a readable OME-Zarr image (its {kind} has {len(numbers)} numbers for "
                            f"{count} axes)")
    if scale is not None and 0.0 in scale:
        # pixels of no size: every pixel at one place, which an output's scale kept (a resize of it too)
        raise GeomError(f"{path}: not a readable OME-Zarr image (its scale {list(scale)} holds 0: pixels of no size)")
    if scale is not None and min(scale) < 0:
        # NGFF's scale is a pixel's size along its axis; below 0 it mirrors the axis, which no size
        # geomcli shows or writes (info's, an OME-TIFF's PhysicalSize, which OME holds above 0) says
        raise GeomError(f"{path}: not a readable OME-Zarr image (its scale {list(scale)} holds {min(scale):g}: a "
                        "pixel's size is above 0)")
    return scale, translation


def dimension_names(array: Any) -> list[str] | None:
    """A zarr array's axis names: a v3 array's ``dimension_names``, a v2 array's
    ``_ARRAY_DIMENSIONS`` attribute (xarray's, the names v2 has no field for); None where it
    gives none."""
    if array.metadata.zarr_format == 3:
        given = array.metadata.dimension_names
    else:
        given = array.attrs.get("_ARRAY_DIMENSIONS")
    return list(given) if isinstance(given, (list, tuple)) and all(isinstance(name, str) for name in given) else None


def _arrays_in(group: Any) -> str:
    """What a group's arrays are, for its error: the names a user would pick from (an array is
    read by a path of its own ending in .zarr); empty for none, or a listing that fails."""
    try:
        names = sorted(name for name, _ in group.arrays())
    except Exception:  # noqa: BLE001 - the listing only helps the error it is in
        return ""
    if not names:
        return ""
    shown = ", ".join(repr(name) for name in names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return (f"; it holds the arrays {shown}: geomcli reads an array by a name of its own ending in .zarr (locally, "
            "a link: ln -s GROUP.zarr/ARRAY ARRAY.zarr)")


def has_metadata(folder: str) -> bool:
    """Whether the local ``folder`` is a zarr array or group: it holds a zarr.json, .zarray or .zgroup."""
    try:
        return not _ZARR_METADATA.isdisjoint(os.listdir(folder))
    except OSError:
        return False


def holds_array(folder: str) -> bool:
    """Whether the local ``folder`` is a zarr array, not a group: its .zarray (v2), or a zarr.json
    whose node_type is "array" (v3). False where neither can be read."""
    import json

    if os.path.isfile(os.path.join(folder, ".zarray")):
        return True
    try:
        with open(os.path.join(folder, "zarr.json"), "rb") as file:
            return bool(json.load(file).get("node_type") == "array")
    except (OSError, ValueError, AttributeError):
        return False


def misnamed(folder: str) -> str | None:
    """Why a local ``folder`` whose name does not end in .zarr is no input, where it is a zarr array
    or group (its zarr.json, .zarray or .zgroup: an array in a group, an OME-Zarr level, say);
    None for another folder, whose error is a folder's."""
    if not has_metadata(folder):
        return None
    return (f"{folder}: a zarr array or group, read only by a name ending in .zarr: link it under one "
            "(ln -s FOLDER NAME.zarr)")


def _first(listed: Any) -> Any:
    """The first entry of a JSON list, or None for anything else."""
    return listed[0] if isinstance(listed, list) and listed else None


def _numbers(given: Any, path: str, kind: str) -> tuple[float, ...]:
    """An OME scale or translation: a list of finite numbers, else a GeomError (a NaN or Infinity,
    which Python's JSON reads, would be written back as no JSON a strict reader takes)."""
    if not isinstance(given, list) or not all(isinstance(n, (int, float)) and not isinstance(n, bool)
                                              and math.isfinite(n) for n in given):
        raise GeomError(f"{path}: not a readable OME-Zarr image (its {kind} {str(given)[:100]} is not a list of "
                        "finite numbers)")
    return tuple(map(float, given))


# what zarr raises, besides ValueError, on metadata it cannot make an array of (a shape of floats,
# a fill value of the wrong type, a shard of zero chunks): caught only when raised in zarr's code
_METADATA_ERRORS = (TypeError, ZeroDivisionError, AttributeError, IndexError, OverflowError)


def _bound_compressor(array: Any) -> None:
    """Bound what an input's chunks are decoded into, and the size of the chunk files (or
    objects) read."""
    from geomcli.io import _zarr_codecs
    from geomcli.io._zarr_store import ChunkBound

    _zarr_codecs.bound_compressor(array)
    store = array.store_path.store
    if isinstance(store, ChunkBound):
        store.bound_chunks(tuple(array.shards or array.chunks), array.dtype)


def _check_grid(array: Any, path: str) -> None:
    """Refuse a shape or chunks zarr opens but no run can take: a chunk of 0 (or less) elements
    along an axis divided dask by zero; a length past int64 failed numpy in dask. And a data type
    of no ONNX tensor type (datetime64), as a .npy's: each operation refused it in its own words,
    some naming no file, crop-pad an input shape of (0,)."""
    from geomcli.io import _npy

    _npy.refuse_type(array.dtype, path)
    sides = (*array.chunks, *(array.shards or ()))
    if any(side < 1 for side in sides) or any(not 0 <= length < 2**63 for length in array.shape):
        raise GeomError(f"{path}: not a readable zarr array (shape {tuple(array.shape)} in chunks {tuple(sides)})")


def _entry(axis: Any) -> dict[str, Any]:
    """An OME axis's name, type and unit, as far as it gives them."""
    given = axis if isinstance(axis, dict) else {"name": axis}
    return {key: given[key] for key in ("name", "type", "unit") if isinstance(given.get(key), str)}


def read_header(path: str) -> Header:
    """What the array at ``path`` declares, from its metadata alone (no chunk is read)."""
    from geomcli.io._base import Header

    opened = open_input(path)
    return Header("zarr", tuple(opened.array.shape), opened.array.dtype, 1, None, opened.layout)


def describe(path: str) -> dict[str, Any]:
    """What ``geomcli info`` shows of a zarr array, from its metadata alone: its dtype (numpy's),
    chunks (and shards) and codecs where an image shows its compression, an OME-Zarr's scale,
    translation and number of levels (the first alone is read); no value range, which would read
    every chunk."""
    opened = open_input(path)
    array = opened.array
    # what packs the bytes (a sharded array's inner codecs; the serializer only lays them out)
    codecs = [type(codec).__name__.removesuffix("Codec").lower() for codec in (*array.filters, *array.compressors)]
    return {"shape": list(array.shape), "dtype": array.dtype, "layout": opened.layout,
            "chunks": list(array.chunks), "shards": None if array.shards is None else list(array.shards),
            "compression": ", ".join(codecs) or "none", "ome": opened.space is not None,
            "scale": None if opened.space is None or opened.space.scale is None else list(opened.space.scale),
            "translation": None if opened.space is None or opened.space.translation is None
            else list(opened.space.translation),
            "levels": None if opened.space is None else opened.space.levels,
            "pixel_size": None if opened.space is None else pixel_size(opened.space)}


def pixel_size(space: Space) -> dict[str, dict[str, Any]] | None:
    """The size of a pixel along each axis of space of an OME-Zarr image, by the axis's name, with
    its unit as OME's symbol (micrometer: µm; a unit OME has no symbol for by its name, none where
    it gives none); None where its scale gives none.

    >>> pixel_size(Space(({"name": "c"}, {"name": "y", "type": "space", "unit": "micrometer"},
    ...                   {"name": "x", "type": "space", "unit": "micrometer"}), (1.0, 0.5, 0.25)))
    {'y': {'size': 0.5, 'unit': 'µm'}, 'x': {'size': 0.25, 'unit': 'µm'}}
    """
    if space.scale is None:
        return None
    sizes = {str(axis.get("name", "?")): {"size": size, "unit": _SYMBOLS.get(axis.get("unit", ""), axis.get("unit"))}
             for axis, size in zip(space.axes, space.scale) if axis.get("type") == "space"}
    return sizes or None


def _says_incomplete(attributes: Any) -> bool:
    """Whether an array's (or OME-Zarr group's) attributes carry geomcli's marker saying incomplete:
    the one rule of what a run left unfinished (no marker: not geomcli's output, or an older one)."""
    marker = attributes.get(MARKER) if isinstance(attributes, dict) else None
    return isinstance(marker, dict) and marker.get("complete") is False


def _check_complete(path: str, attributes: dict[str, Any]) -> None:
    if _says_incomplete(attributes):
        raise GeomError(f"{path}: an incomplete output (the run writing it stopped); write it again")


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:200] if lines else type(error).__name__


def codec_failed(error: OSError) -> bool:
    """Whether a chunk's decompressor raised the OSError ``error``, on a damaged chunk: bz2's
    'Invalid data stream' under numcodecs (a zarr v2 compressor, a v3 ``numcodecs.bz2``), gzip's
    BadGzipFile. Either names no file, and so read as the output's write failing."""
    import gzip

    from geomcli.io._base import raised_in

    return isinstance(error, gzip.BadGzipFile) or raised_in(error, "numcodecs")


def _reason(error: BaseException) -> str:
    """An OSError's reason alone: its text names the file, a staging folder the user never named."""
    return (error.strerror if isinstance(error, OSError) else None) or _first_line(error)


def exists(path: str) -> bool:
    """Whether a zarr array or group is at ``path``."""
    _zarr()  # (zarr not installed: its GeomError, not False)
    try:
        _open_node(_store(path, read_only=True), "r")
    except (FileNotFoundError, KeyError, OSError, ValueError):
        return False
    return True


def incomplete(path: str) -> bool:
    """Whether the zarr array at ``path`` (a folder or a URL) is one a geomcli run left marked
    incomplete (it stopped before the last chunk): read from its metadata (zarr.json) alone, a
    request for a URL. False where there is none, or it cannot be read (one past METADATA_BYTES,
    as a zarr input's is refused): then it is not ours to redo or remove."""
    import json

    from geomcli.io import _remote
    from geomcli.io._zarr_store import METADATA_BYTES

    local = _remote.local_path(path)
    try:
        # read a byte past the bound, no further: -n and --skip-existing read a stranger's file here
        if _remote.is_url(local):
            fs, where = _remote.filesystem(local)
            text = fs.cat_file(f"{where.rstrip('/')}/zarr.json", start=0, end=METADATA_BYTES + 1)
        else:
            with open(os.path.join(local, "zarr.json"), "rb") as file:
                text = file.read(METADATA_BYTES + 1)
        if len(text) > METADATA_BYTES:
            return False
        return _says_incomplete(json.loads(text).get("attributes"))
    except (GeomError, ValueError, AttributeError):
        return False
    except _remote._failures():  # botocore's, aiohttp's: their own, no OSError
        return False


def remove_incomplete(url: str) -> bool:
    """Remove the zarr array at ``url`` if a geomcli run left it marked incomplete (never one
    marked complete, nor one without the marker); whether it did. For a caller that stopped the
    run writing it (a batch's sweep: workers.py, cluster.py, through jobs.remove_leftovers),
    which a worker ended by os._exit never unwinds to (see :func:`staged`). Its metadata, the
    marker, goes last: a removal cut short leaves an array still marked, removed next time."""
    from geomcli.io import _remote

    if not incomplete(url):
        return False
    try:
        fs, where = _remote.filesystem(_remote.local_path(url))
        where = where.rstrip("/")
        marked = f"{where}/zarr.json"
        fs.invalidate_cache(where)  # a listing cached before the run stopped misses its last chunks
        rest = [found for found in fs.find(where) if found.rstrip("/") != marked]
        if rest:
            fs.rm(rest)
        fs.rm(marked)
    except GeomError:  # a sweep: the run's own outcome is the one to report
        return False
    except _remote._failures():
        return False
    return True


def read_whole(path: str, max_pixels: int) -> np.ndarray:
    """A small zarr array (a grid, theta) read whole, within ``max_pixels``; a chunk its codec or
    store fails on is a GeomError naming the array, as a chunked job's is."""
    import numpy as np

    from geomcli.io import _remote
    from geomcli.io._base import check_size

    array = open_input(path).array
    check_size(array.shape, max_pixels, path)
    failures: tuple[type[BaseException], ...] = (RuntimeError, ValueError, *CODEC_FAILURES, *_remote._failures())
    try:
        return np.asarray(array[...])
    except failures as error:
        raise GeomError(f"{path}: a chunk could not be read ({_first_line(error)})") from error


def write_whole(target: Any, data: np.ndarray, path: str) -> None:
    """``data`` put in the new zarr array ``target`` whole; a store's failure a GeomError naming ``path``."""
    from geomcli.io import _remote

    failures: tuple[type[BaseException], ...] = (RuntimeError, ValueError, *CODEC_FAILURES, *_remote._failures())
    try:
        target[...] = data
    except failures as error:
        raise GeomError(f"{path}: cannot write a zarr array ({_first_line(error)})") from error


def refusal(dtype: np.dtype) -> str | None:
    """Why zarr cannot hold ``dtype`` (it has no data type for bfloat16 or a long double), or None:
    from the header, before a run makes its temporary array and fails there."""
    try:
        from zarr.core.dtype import get_data_type_from_native_dtype
    except ImportError:  # no zarr (the write says what to install), or a zarr that moved it
        return None
    try:
        get_data_type_from_native_dtype(dtype)
    except ValueError:
        return f"cannot hold {dtype} data"
    return None


def create_output(path: str, shape: tuple[int, ...], dtype: np.dtype, chunks: tuple[int, ...], layout: str | None,
                  *, space: Space | None, like: Any = None, name: str | None = None) -> Any:
    """A new zarr array at ``path`` (replacing what is there), marked incomplete: an OME-Zarr
    group of one level in ``space`` (the output's axes, scale) when one is given and the layout
    fits, else an array with dimension_names. ``name``: the output as errors name it, where
    ``path`` is its hidden staging folder (:func:`staged`).
    ``like``: an input array whose compressors it takes, and its sharding: a sharded input's
    output is stored in shards of ``chunks`` (each written whole by one task), of the input's
    inner chunks where they divide them."""
    from geomcli.io import _remote

    zarr = _zarr()
    kept = dimension_names(like) if like is not None else None
    names: list[str] | None
    if kept and layout is not None and len(kept) == len(layout) and layout_of(list(kept)) == layout:
        names = [str(name) for name in kept]  # the input's own names where they still fit (t, z: not n)
    else:
        given = _OME_NAMES if space is not None else _NAMES  # OME-Zarr 0.5: the array's names are its axes'
        names = None if layout is None else [given.get(letter, letter.lower()) for letter in layout]
    # the input's axes (names, types, units); else an array, and zarr_file._say_dropped tells
    axes = [dict(axis) for axis in space.axes] if space is not None and holds(space, layout) else None
    if axes is not None:
        names = [axis["name"] for axis in axes]
    options: dict[str, Any] = {}
    if like is not None and getattr(like.metadata, "zarr_format", 3) == 3:
        options["compressors"] = like.compressors
        if like.shards is not None and len(like.chunks) == len(chunks):
            options["shards"] = chunks
            chunks = tuple(inner if shard % inner == 0 else shard for inner, shard in zip(like.chunks, chunks))
    incomplete = {MARKER: {"complete": False}}
    store = _store(path, read_only=False)
    try:
        if axes is not None:
            assert space is not None and layout is not None
            transforms = [{"type": "scale", "scale": list(space.scale or (1.0,) * len(layout))}]
            if space.translation is not None:
                transforms.append({"type": "translation", "translation": list(space.translation)})
            image: dict[str, Any] = {"axes": axes, "datasets": [{"path": "0", "coordinateTransformations": transforms}]}
            ome: dict[str, Any] = {"version": "0.5", "multiscales": [
                image | ({} if space.name is None else {"name": space.name})]}
            if space.omero is not None:
                ome["omero"] = space.omero
            group = zarr.open_group(store=store, mode="w", attributes={"ome": ome, **incomplete})
            return group.create_array("0", shape=shape, dtype=dtype, chunks=chunks, dimension_names=names,
                                      **options)
        return zarr.create_array(store=store, shape=shape, dtype=dtype, chunks=chunks, dimension_names=names,
                                 attributes=incomplete, overwrite=True, **options)
    except (OSError, ValueError, TypeError) as error:
        raise GeomError(f"{name or path}: cannot write a zarr array ({_reason(error)})") from error
    except _remote._failures() as error:  # botocore's no credentials, say
        raise GeomError(f"{name or path}: cannot write a zarr array ({_reason(error)})") from error


@contextmanager
def staged(path: str) -> Iterator[str]:
    """Where to write the zarr output ``path``: for a local path a hidden sibling, moved into
    place only when the body ends well, and removed when it does not (io._atomic.atomic_folder);
    an array already at ``path`` is never touched by a failed run, nor under -n (but one marked
    incomplete).
    For a URL, ``path`` itself (object storage has no rename), removed when the run fails; a
    process ended without unwinding (a -j worker's SIGTERM) leaves it marked incomplete, for the
    sweep of its run (:func:`remove_incomplete`)."""
    from geomcli.io import _atomic, _remote

    local = _remote.local_path(path)
    if _remote.is_url(local):
        try:
            yield path
        except BaseException:
            _remove_url(local)
            raise
        return
    _refuse_other_folder(local)
    # under -n too, an array a stopped run left incomplete is replaced (engine.plan.skip_reason)
    with _atomic.atomic_folder(local, replace=_atomic.replaces() or incomplete(local)) as temporary:
        yield temporary


# what a folder holds where it is a zarr array or group (zarr v3; v2), which an output may replace
_ZARR_METADATA = frozenset({"zarr.json", ".zarray", ".zgroup"})


def _refuse_other_folder(path: str) -> None:
    """Refuse to replace a folder at a zarr output's name that holds files but no zarr metadata:
    someone's data under a name ending .zarr, which the output removed with all it held. An
    empty one, an array, a file and a symbolic link (the link replaced, not what it names) are
    replaced as before."""
    if os.path.islink(path):
        return
    try:
        names = os.listdir(path)
    except OSError:  # no folder there
        return
    if names and _ZARR_METADATA.isdisjoint(names):
        raise GeomError(f"{path}: a folder that is no zarr array (no zarr.json) is there; "
                        "it is not replaced: move it, or write elsewhere")


def _remove_url(url: str) -> None:
    from geomcli.io import _remote

    try:
        fs, where = _remote.filesystem(url)
        if fs.exists(where):
            fs.rm(where, recursive=True)
    except Exception:  # noqa: BLE001 - the run's own failure is the one to report
        pass


def mark_complete(path: str, name: str | None = None) -> None:
    """Mark the output at ``path`` complete: the last write of a run, after every chunk.
    ``name``: as for :func:`create_output`."""
    try:
        node = _open_node(_store(path, read_only=False), "r+")
        marker = dict(node.attrs.get(MARKER) or {})
        node.attrs[MARKER] = {**marker, "complete": True}
    except (OSError, ValueError, KeyError) as error:
        raise GeomError(f"{name or path}: cannot mark the zarr array complete ({_reason(error)})") from error
