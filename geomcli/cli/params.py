"""The command line's value types: lists of integers and numbers, and numbers typed in ASCII
(constants.plain_number), each one click ParamType."""

from __future__ import annotations

import re
from typing import Any

import click

from geomcli.constants import plain_number

_X_SEPARATED = re.compile(r"[0-9]+(?: *[xX,] *[0-9]+)+")  # 640x480; with an x in it, checked apart


class IntList(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2
    """Comma-separated integers, ``224,224``, each an int64; ``640x480`` is refused, being width x height
    where it comes from (ImageMagick, ffmpeg). ``sizes``: none is negative; ``empty``: no integers at
    all (``''``) are allowed."""

    name = "DIMS"

    def __init__(self, sizes: bool = False, empty: bool = False) -> None:
        self.sizes = sizes
        self.empty = empty

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        text = str(value).strip()
        if "x" in text.lower() and _X_SEPARATED.fullmatch(text):
            # ImageMagick's and ffmpeg's 640x480 is width x height: read as H,W it was the transpose
            self.fail(f"{value!r}: give the numbers comma-separated, in the order the option names them "
                      "(an x is ambiguous: 640x480 is width x height to ImageMagick and ffmpeg)", param, ctx)
        if not text and not self.empty:
            self.fail(f"{value!r}: give one or more comma-separated integers", param, ctx)
        try:
            if not plain_number(text):
                raise ValueError(text)
            numbers = tuple(int(part) for part in text.split(",")) if text else ()
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of integers", param, ctx)
        for number in numbers:
            if not -(2**63) <= number < 2**63:
                self.fail(f"{number} does not fit a 64-bit integer", param, ctx)
            if self.sizes and number < 0:
                self.fail(f"{value!r}: a length cannot be negative", param, ctx)
        return numbers


class FloatList(click.ParamType):  # type: ignore[type-arg]
    """Comma-separated numbers, ``1.5,-2``."""

    name = "NUMBERS"

    def __init__(self, counts: tuple[int, ...] = ()) -> None:
        self.counts = counts

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[float, ...]:
        if isinstance(value, tuple):
            return value
        try:
            if not plain_number(str(value)):
                raise ValueError(value)
            numbers = tuple(float(part) for part in str(value).split(","))
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of numbers", param, ctx)
        if self.counts and len(numbers) not in self.counts:
            wanted = " or ".join(map(str, self.counts))
            self.fail(f"{value!r} has {len(numbers)} numbers, expected {wanted}", param, ctx)
        return numbers


class Int(click.IntRange):
    """click's IntRange, refusing what :func:`plain_number` refuses (``--blocksize ２``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not plain_number(value):
            self.fail(f"{value!r} is not a valid integer", param, ctx)
        return super().convert(value, param, ctx)


class Float(click.types.FloatParamType):
    """click's float, refusing what :func:`plain_number` refuses (``--rotate ９０``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not plain_number(value):
            self.fail(f"{value!r} is not a valid float", param, ctx)
        return super().convert(value, param, ctx)


class Name(click.Path):
    """A path that is not empty: ``""`` is what an unset shell variable gives (``"$SRC"``), which
    read as a name said ``Error: : no such file`` (exit 1), or in a batch that --name gave an empty
    name for nothing shown."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == "":
            self.fail("an empty name (an unset variable?); give a file" + (", or - for stdin" if self.allow_dash
                                                                          else ""), param, ctx)
        return super().convert(value, param, ctx)


class KeyValue(click.ParamType):  # type: ignore[type-arg]
    """``KEY=VALUE``, the value read as JSON where it is JSON (``true``, ``5``, ``{"a": 1}``),
    else as the text it is; a value that begins as JSON does (``{``, ``[``, ``"``) must be JSON.

    >>> KeyValue().convert("endpoint_url=http://127.0.0.1:9000", None, None)
    ('endpoint_url', 'http://127.0.0.1:9000')
    >>> KeyValue().convert("anon=true", None, None), KeyValue().convert('client_kwargs={"verify": false}', None, None)
    (('anon', True), ('client_kwargs', {'verify': False}))
    """

    name = "KEY=VALUE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[str, Any]:
        if isinstance(value, tuple):
            return value
        key, equals, text = str(value).partition("=")
        if not equals or not key.strip() or not key.strip().isidentifier():
            self.fail(f"{value!r} is not KEY=VALUE with KEY a name", param, ctx)
        import json

        try:
            return key.strip(), json.loads(text)
        except ValueError as error:
            if text.lstrip()[:1] in ('{', '[', '"'):  # meant as JSON: not to be taken as text
                self.fail(f"{value!r}: the value is not valid JSON ({error})", param, ctx)
            return key.strip(), text
