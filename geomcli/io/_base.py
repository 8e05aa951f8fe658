"""What every format backend shares: the result types, the size limit, error helpers.

The result types are NamedTuples: callers update them with ``_replace`` (their
``dataclasses.replace``). Being tuples, they compare equal to tuples of the same values; no code
compares them with tuples.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from geomcli.errors import GeomError

if TYPE_CHECKING:
    import numpy as np

DEFAULT_MAX_PIXELS: int = 2**31

# (1 byte of header is enough to tell most formats apart; WebP needs 12)
SNIFF_BYTES = 16


# geomcli's names of a resolution's units (Metadata.unit) as their symbols
_UNIT_SYMBOLS = {"micron": "\u00b5m", "millimeter": "mm", "centimeter": "cm", "inch": "in"}

# units a resolution can be converted between, in inches
_INCHES = {"inch": 1.0, "centimeter": 1 / 2.54, "millimeter": 1 / 25.4, "micron": 1 / 25400}


class SeriesError(GeomError):
    """A TIFF of several image series of different shapes, read without --series: which one is
    meant cannot be told. ``series`` lists them, (shape, dtype, axes) each, for ``info`` to show."""

    def __init__(self, message: str, series: tuple[tuple[tuple[int, ...], str, str], ...]) -> None:
        super().__init__(message)
        self.series = series


class Metadata(NamedTuple):
    """What a file says about its pixels besides their values, carried from read to write.

    The writer fits it to the array it writes: sizes (ImageJ/OME, EXIF) come from the data, so
    they are never stale. A field the output format cannot hold becomes one warning.
    """

    icc: bytes | None = None
    """The ICC colour profile, byte for byte."""
    resolution: tuple[float, float] | None = None
    """Pixels per ``unit`` along x and y (DPI when the unit is inch)."""
    unit: str | None = None
    """``inch``, ``centimeter``, ``millimeter``, ``micron``, or None (a ratio without a unit)."""
    exif: bytes | None = None
    """The EXIF block; its orientation is 1 once the pixels have been turned upright."""
    axes: str | None = None
    """The TIFF's axes as its ImageJ/OME/shaped metadata names them, e.g. ``ZCYX``."""
    axes_kind: str | None = None
    """Where ``axes`` came from: ``imagej``, ``ome`` or ``shaped`` (tifffile's JSON)."""
    imagej: tuple[tuple[str, float | str], ...] = ()
    """ImageJ entries that stay true through a crop: spacing, finterval, unit."""
    compression: str | None = None
    """The TIFF compression, by tifffile's name: ``zlib``, ``lzma``, ``lzw``, ``jpeg``, ``zstd``."""
    jpeg: tuple[int, tuple[tuple[int, ...], ...], bool] | None = None
    """A JPEG input's coding: its chroma subsampling (Pillow's 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0; -1 grey or other),
    its quantisation tables, which a JPEG output keeps unless --quality or --subsampling says, and whether
    it is progressive, which a JPEG output keeps."""
    dropped: tuple[str, ...] = ()
    """What the file said that no output carries (OME-XML channel names, ImageJ display ranges...),
    each named in one warning when a file is written from it."""
    sizes_left_out: tuple[str, ...] = ()
    """The pixel sizes the file states that :meth:`pixel_size` leaves out (an OME-XML PhysicalSizeX
    or ImageJ spacing of 0, below 0, NaN or Inf), as ``dropped`` names them: info notes them."""
    xmp: bytes | None = None
    """The XMP packet, byte for byte (a PNG's iTXt ``XML:com.adobe.xmp``, a JPEG's APP1, WebP's XMP)."""
    text: tuple[tuple[bytes, bytes], ...] = ()
    """A PNG's tEXt, zTXt and iTXt chunks but the XMP one: (chunk type, body as stored)."""
    comment: bytes | None = None
    """A JPEG's (first COM segment) or GIF's comment, byte for byte."""
    png_colour: tuple[tuple[bytes, bytes], ...] = ()
    """A PNG's gAMA, cHRM and sRGB chunks (type, body as stored): how its values are shown where
    it has no ICC profile (gamma 1.0: linear light)."""
    physical: tuple[tuple[str, float, str | None], ...] = ()
    """An OME-TIFF's physical pixel sizes: (axis X, Y or Z, size, unit or None for OME's micrometre),
    and its time increment (axis T, unit or None for seconds), as each operation makes them
    (twice the size after space-to-depth of blocksize 2)."""
    bits: int | None = None
    """The bits of a sample where fewer than its dtype's (a 12-bit camera's, read as uint16): an
    encoding a TIFF output keeps, as its compression, where it can (uncompressed, values that fit)."""
    channels: tuple[str, ...] = ()
    """An OME-TIFF's channel names, one for each channel of its C axis (one for a page of one
    plane): an output of as many channels keeps them."""
    plain_resolution: bool = False
    """Whether an ImageJ TIFF's resolution is in its own ResolutionUnit (inch, centimeter), its
    description naming no unit: ImageJ takes that for its calibration (but 72 dpi, see
    :attr:`calibrated`), and it is the TIFF's DPI all the same."""
    tile: tuple[int, int] | None = None
    """A tiled TIFF's tile length and width, an encoding kept like the compression (a viewer of a
    big image reads the tiles it shows)."""
    predictor: int | None = None
    """A compressed TIFF's predictor (2, horizontal differencing of integers; 3, floating point), an
    encoding kept with its compression: without it, a 32x32 LZW crop of a 16-bit gradient took 2965
    bytes, 465 with it."""
    colour: bool | None = None
    """Whether 3 or 4 channels are colours (RGB, RGBA): False where an operation made them of
    space (space-to-depth's 2x2 blocks of one grey channel) or a TIFF's photometric says they are
    none (grey samples, CMYK), None where the shape says it."""
    inks: bool = False
    """Whether 4 channels are a TIFF's CMYK inks (photometric SEPARATED): a TIFF output of 4
    channels is written as CMYK again, not as 1 grey and 3 extra samples a viewer shows grey."""
    palette: bytes | None = None
    """A palette image's colours, 3 bytes (R, G, B) an entry, where its indices were read as they
    are (``palette=True``): an output of one channel of uint8 indices is written with it."""
    palette_alpha: bytes | None = None
    """The alpha of the palette's first entries (a PNG's tRNS; a GIF's transparent entry is 0,
    the others 255), where it has transparency."""
    palette_16bit: bytes | None = None
    """A palette TIFF's colours where they are 16-bit (its ColorMap uses the low bytes): R, G, B
    little-endian uint16 an entry, beside ``palette``, which holds their high bytes (what libtiff's
    and Pillow's readers show). A TIFF output writes them as they are; a PNG, GIF or BMP holds the
    high bytes alone."""
    zunit: str | None = None
    """The unit of an ImageJ slice spacing where it is not ``unit`` (Fiji's ``zunit`` beside a
    resolution in another: 0.25 micron pixels, 0.5 millimeter slices), by geomcli's names."""

    @property
    def dpi(self) -> tuple[float, float] | None:
        """The resolution in pixels per inch, when it has a length unit."""
        if self.resolution is None or self.unit not in _INCHES:
            return None
        inches = _INCHES[self.unit]
        return (self.resolution[0] / inches, self.resolution[1] / inches)

    @property
    def calibrated(self) -> bool:
        """Whether the resolution is a microscope's calibration (ImageJ's unit: micron, mm, nm...),
        which a TIFF's own ResolutionUnit (inch, centimeter) is not. An ImageJ TIFF's unit is its
        calibration's, cm and inch too (ImageJ writes them in its description, and ResolutionUnit
        3 and 2 beside them): 0.05 cm pixels with a 0.5 cm slice spacing, not 50.8 dpi."""
        if self.resolution is None or self.unit is None:
            return False
        if self.axes_kind == "imagej" and self.plain_resolution:
            # ImageJ's TIFF reader: ResolutionUnit inch or cm is its calibration, but 72 pixels per
            # inch, which it takes for a default and leaves uncalibrated
            return self.unit == "centimeter" or self.resolution != (72.0, 72.0)
        return self.axes_kind == "imagej" or self.unit not in ("inch", "centimeter")

    def pixel_size_named(self) -> str | None:
        """A calibration's resolution (see :attr:`calibrated`) as a warning names it: its pixel
        size in its unit, which no DPI was meant for; None for a resolution that is no calibration.

        >>> Metadata(resolution=(4.0, 2.0), unit="micron", axes_kind="imagej").pixel_size_named()
        'pixel size (0.25 x 0.5 micron)'
        >>> Metadata(resolution=(300.0, 300.0), unit="inch").pixel_size_named() is None
        True
        """
        if self.resolution is None or not self.calibrated:
            return None
        x, y = (1 / pixels for pixels in self.resolution)
        return f"pixel size ({x:g} {self.unit})" if x == y else f"pixel size ({x:g} x {y:g} {self.unit})"

    def pixel_size(self) -> dict[str, dict[str, Any]] | None:
        """The size of a pixel along x, y (and z), with its unit, as ``info`` shows it: an OME-TIFF's
        physical sizes (micrometres where it names no unit), else an ImageJ calibration (its
        resolution's pixels per unit, and its slice spacing); None where the file gives none.

        >>> Metadata(physical=(("X", 0.5, None), ("Y", 0.25, "nm"))).pixel_size()
        {'x': {'size': 0.5, 'unit': 'µm'}, 'y': {'size': 0.25, 'unit': 'nm'}}
        >>> Metadata(resolution=(4.0, 2.0), unit="micron", imagej=(("spacing", 3.0),)).pixel_size()
        {'x': {'size': 0.25, 'unit': 'µm'}, 'y': {'size': 0.5, 'unit': 'µm'}, 'z': {'size': 3.0, 'unit': 'µm'}}
        >>> Metadata(resolution=(300.0, 300.0), unit="inch").pixel_size() is None
        True
        >>> Metadata(resolution=(20.0, 20.0), unit="centimeter", axes="YX", axes_kind="imagej").pixel_size()
        {'x': {'size': 0.05, 'unit': 'cm'}, 'y': {'size': 0.05, 'unit': 'cm'}}
        >>> Metadata(unit="micron", axes="ZYX", axes_kind="imagej", imagej=(("spacing", 3.0),)).pixel_size()
        {'z': {'size': 3.0, 'unit': 'µm'}}
        >>> Metadata(resolution=(4.0, 4.0), unit="micron", zunit="millimeter", imagej=(("spacing", 0.5),)).pixel_size()
        {'x': {'size': 0.25, 'unit': 'µm'}, 'y': {'size': 0.25, 'unit': 'µm'}, 'z': {'size': 0.5, 'unit': 'mm'}}
        """
        if any(axis != "T" for axis, _, _ in self.physical):  # (a time increment is no pixel's size)
            return {axis.lower(): {"size": size, "unit": unit or "\u00b5m"} for axis, size, unit in self.physical
                    if axis != "T"}
        # a spacing's unit with no resolution: X and Y uncalibrated, Z in it (an ImageJ zunit, or a rotation's)
        spaced = self.resolution is None and self.unit is not None and self.axes_kind == "imagej"
        if not spaced and (self.resolution is None or not self.calibrated):
            return None
        unit = _UNIT_SYMBOLS.get(self.unit or "", self.unit)
        sizes: dict[str, dict[str, Any]] = {}
        if self.resolution is not None:
            x, y = self.resolution
            sizes = {"x": {"size": 1 / x, "unit": unit}, "y": {"size": 1 / y, "unit": unit}}
        spacing = dict(self.imagej).get("spacing")
        if isinstance(spacing, (int, float)) and 0 < spacing < math.inf:  # (as imagej_physical reads it)
            sizes["z"] = {"size": float(spacing), "unit": _UNIT_SYMBOLS.get(self.zunit, self.zunit) if self.zunit
                          else unit}
        return sizes or None

    def scaled(self, factor: float) -> Metadata:
        """The same, for pixels ``factor`` times as many per unit (space-to-depth: 1/b)."""
        if self.resolution is None:
            return self
        return self._replace(resolution=(self.resolution[0] * factor, self.resolution[1] * factor))

    def upright(self, orientation: int) -> Metadata:
        """The same, for pixels turned upright by EXIF/TIFF ``orientation``: 5 to 8 swap x and y,
        and an orientation the XMP packet states (as Lightroom writes it beside EXIF's) is 1, as
        EXIF's is, else a viewer that reads it turns the upright pixels again."""
        turned = self
        if self.xmp is not None and orientation in ORIENTATIONS:
            turned = turned._replace(xmp=_XMP_ORIENTATION.sub(rb"\g<1>1\g<2>", self.xmp))
        if turned.resolution is None or orientation not in (5, 6, 7, 8):
            return turned
        return turned._replace(resolution=turned.resolution[::-1])

    def kept(self) -> Metadata:
        """What ``--strip`` leaves: the TIFF compression, predictor and tiles, which are no metadata
        but an encoding, what the channels are, and a palette kept (--keep-palette): what the
        indices mean."""
        return Metadata(compression=self.compression, tile=self.tile, predictor=self.predictor, colour=self.colour,
                        inks=self.inks, bits=self.bits, palette=self.palette, palette_alpha=self.palette_alpha,
                        palette_16bit=self.palette_16bit)

    def __repr__(self) -> str:
        # the ICC profile, the EXIF block, XMP and text are kilobytes of bytes, of no use to read
        shown = (f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True)
                 if name not in ("icc", "exif", "xmp", "text", "png_colour", "palette", "palette_alpha",
                                 "palette_16bit"))
        return f"Metadata({', '.join(shown)})"


class WriteOptions(NamedTuple):
    """How an encoder writes; None means the format's documented default."""

    compress_level: int | None = None
    """PNG zlib level 0-9 (default 7)."""
    quality: int | None = None
    """JPEG quality 1-100 (default 95); WebP is lossless unless a quality is given."""
    compression: str | None = None
    """TIFF compression (none, zlib, lzma, zstd, lzw, jpeg, packbits); default: the input's, else none."""
    threads: int | None = None
    """Kept for callers; no encoder uses it (Pillow's and libpng's PNG encoders take one thread)."""
    subsampling: str | None = None
    """JPEG chroma subsampling, 4:4:4, 4:2:2 or 4:2:0; default: a JPEG input's, else 4:2:0."""


class Loaded(NamedTuple):
    """An array read from a file, with what is known about it."""

    data: np.ndarray
    format: str
    layout: str | None
    source: str
    notes: tuple[str, ...] = ()
    metadata: Metadata = Metadata()
    pages: int = 1
    """The pages (TIFF) or frames (GIF, WebP, APNG) the file holds, as :class:`Header` says."""
    file_size: int | None = None
    """The file's size in bytes; None for stdin and pipes, which have none."""
    orientation: int | None = None
    """The orientation an image file stores (1 to 8; EXIF's, or a TIFF's Orientation tag), read
    with its pixels (a pipe is read once); None where it stores none."""
    upright: bool = False
    """Whether the pixels were turned upright by ``orientation`` (not with auto_orient off, nor
    stacked frames or TIFF pages)."""

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype


class Picture(NamedTuple):
    """An 8-bit image (Pillow mode L, LA, RGB or RGBA) read from a file and kept as a Pillow image:
    the array it stands for is ``shape``, uint8. Plain images take this way through crop-pad,
    so a one-shot run never imports numpy (see io.read_picture)."""

    image: Any
    format: str
    source: str
    notes: tuple[str, ...] = ()
    metadata: Metadata = Metadata()
    pages: int = 1
    file_size: int | None = None
    orientation: int | None = None
    upright: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        width, height = self.image.size
        channels = len(self.image.getbands())
        return (height, width) if channels == 1 else (height, width, channels)

    @property
    def layout(self) -> str:
        return image_layout(self.shape)

    @property
    def dtype(self) -> str:
        """The name of its array's dtype (always uint8; Loaded.dtype is a numpy dtype)."""
        return "uint8"

    def to_array(self) -> np.ndarray:
        import numpy as np

        return np.asarray(self.image)

    def value_range(self) -> list[int]:
        """[min, max] over every channel, as summary.value_range gives for the array. From one
        histogram pass (256 counts per band, band after band): getextrema copies each band first."""
        counts = self.image.histogram()
        present = [value for value in range(256) if any(counts[value::256])]
        return [present[0], present[-1]]


class Header(NamedTuple):
    """What a file declares, read without decoding its pixels: the shape, dtype and layout
    :func:`read_array` returns with the same options (a palette TIFF expanded, one frame or
    the stacked frames of an animation)."""

    format: str
    shape: tuple[int, ...]
    dtype: np.dtype
    pages: int
    file_size: int | None
    layout: str | None
    axes: str | None = None
    """A TIFF's axes as its metadata names them (``ZCYX``, read as NCHW), as Metadata.axes."""
    palette: bool = False
    """Whether the values are a palette's indices, read as they are (``palette=True``)."""


def image_layout(shape: tuple[int, ...]) -> str:
    """The layout of an image read as an array of this shape: HW, or HWC with channels."""
    return "HW" if len(shape) == 2 else "HWC"


def display_name(path: str, *, output: bool = False) -> str:
    """The path as error messages show it: ``-`` is ``<stdin>`` or ``<stdout>``."""
    if path == "-":
        return "<stdout>" if output else "<stdin>"
    return path


def check_size(shape: Iterable[int], max_pixels: int, what: str) -> None:
    """Refuse a declared shape with more than ``max_pixels`` elements, before anything is allocated.

    >>> check_size((100, 100), 10_000, "a.png")
    >>> check_size((100000, 100000), 2**31, "a.png")
    Traceback (most recent call last):
    ...
    geomcli.errors.GeomError: a.png: 10000000000 elements exceed the limit of 2147483648; raise it with ...
    >>> check_size((2**40, 2**40), sys.maxsize, "a.zarr")  # no limit: none to raise
    Traceback (most recent call last):
    ...
    geomcli.errors.GeomError: a.zarr: 1208925819614629174706176 elements, more than an array can index (...)
    """
    # Python ints: a crafted header's product must not wrap around as it would in int64.
    count = math.prod(int(n) for n in shape)
    if count > max_pixels >= sys.maxsize:  # no limit: a chunked job's whole array, which no --max-pixels bounds
        raise GeomError(f"{what}: {count} elements, more than an array can index ({sys.maxsize})")
    if count > max_pixels:
        raise GeomError(
            f"{what}: {count} elements exceed the limit of {max_pixels}; "
            "raise it with --max-pixels or GEOMCLI_MAX_PIXELS"
        )


def one_line(exc: BaseException) -> str:
    """A backend's exception as a short single line (some carry newlines or nothing at all)."""
    text = " ".join(str(exc).split())
    if not text:
        text = type(exc).__name__
    return text[:200]


def raised_in(exc: BaseException, package: str) -> bool:
    """Whether ``package``'s own code raised ``exc``: of the frames in its traceback that are
    geomcli's or the package's, the innermost is the package's (numpy or the standard library
    below it count for whoever called them).

    Backends raise ValueError, TypeError, AssertionError and the like on crafted files; those
    are bad files. The same types raised by geomcli's own code, or by a geomcli callback the
    package called (a logging handler), are bugs and keep their traceback.
    """
    marker = f"/{package}/"
    innermost = False
    tb = exc.__traceback__
    while tb is not None:
        filename = os.path.abspath(tb.tb_frame.f_code.co_filename).replace("\\", "/")
        if filename.startswith(_OURS):
            innermost = False
        elif marker in filename:
            innermost = True
        tb = tb.tb_next
    return innermost


# the folder of the geomcli package, as raised_in compares frame file names
_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))).replace("\\", "/") + "/"


# XMP's tiff:Orientation, as an attribute or an element: the digit between the two groups
_XMP_ORIENTATION = re.compile(rb"""(tiff:Orientation\s*=\s*["']\s*|<tiff:Orientation>\s*)[2-8]"""
                              rb"""(\s*["']|\s*</tiff:Orientation>)""")

# EXIF/TIFF orientation -> what turning the pixels upright does
ORIENTATIONS = {
    2: "mirrored left-right",
    3: "rotated 180 degrees",
    4: "flipped top-bottom",
    5: "transposed",
    6: "rotated 90 degrees clockwise",
    7: "transversed",
    8: "rotated 90 degrees counter-clockwise",
}


def orient(data: np.ndarray, orientation: int) -> np.ndarray:
    """Turn an HW(C) array upright the way ImageOps.exif_transpose turns an image."""
    import numpy as np

    if orientation == 2:
        return data[:, ::-1]
    if orientation == 3:
        return data[::-1, ::-1]
    if orientation == 4:
        return data[::-1]
    if orientation == 5:
        return data.swapaxes(0, 1)
    if orientation == 6:
        return np.rot90(data, -1)
    if orientation == 7:
        return data[::-1, ::-1].swapaxes(0, 1)
    if orientation == 8:
        return np.rot90(data, 1)
    return data
