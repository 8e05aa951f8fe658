"""What every format backend shares: the result types, the size limit, error helpers."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from geomcli.errors import GeomError

DEFAULT_MAX_PIXELS: int = 2**31

# (1 byte of header is enough to tell most formats apart; WebP needs 12)
SNIFF_BYTES = 16


@dataclass(frozen=True)
class Loaded:
    """An array read from a file, with what is known about it."""

    data: np.ndarray
    format: str
    layout: str | None
    source: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Header:
    """What a file declares, read without decoding its pixels."""

    format: str
    shape: tuple[int, ...]
    dtype: np.dtype
    pages: int
    file_size: int | None
    layout: str | None


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
    geomcli.errors.GeomError: a.png: 10000000000 elements exceed the limit of 2147483648; raise it with --max-pixels or GEOMCLI_MAX_PIXELS
    """
    # Python ints: a crafted header's product must not wrap around as it would in int64.
    count = math.prod(int(n) for n in shape)
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
    """Whether ``package``'s own code raised ``exc`` (some frame of its traceback is in it).

    Backends raise TypeError, AssertionError and the like on crafted files; those are bad files.
    The same types raised by geomcli's own code are bugs and keep their traceback.
    """
    marker = f"{package}/"
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename.replace("\\", "/")
        if marker in filename and "/geomcli/" not in filename:
            return True
        tb = tb.tb_next
    return False
