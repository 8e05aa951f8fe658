"""zarr's zstd and gzip codecs, each decoding a chunk no further than the chunk can need: zarr
decodes a chunk whole before it looks at its size, so a 32 KB zstd chunk of an 8x8x3 array took
1 GiB twice over (2.1 GB resident), each worker's chunks side by side.

Installed by :func:`install` for zarr's codec names ``zstd`` and ``gzip``, under zarr's class names
(what `geomcli info` shows); they encode as zarr's. The zlib, gzip, bz2 and lzma of numcodecs
are bounded the same way, as a v3 array's ``numcodecs.*`` codecs and as a v2 array's compressor
(given its chunk's bound by :func:`bound_compressor` once the array is open: numcodecs is handed
no chunk's shape): a 242-byte bz2 chunk inflated to 300 MB before its size was looked at. A v2
zstd, blosc or lz4 buffer, and a v3 blosc one, is refused where its header declares more than
the bound: numcodecs makes a buffer of the size declared first.
"""

from __future__ import annotations

import asyncio
import bz2
import functools
import gzip
import io
import lzma
import math
import zlib
from collections.abc import Callable
from typing import Any

import numcodecs
import zarr.codecs
import zarr.codecs.numcodecs
from zarr.core.buffer.cpu import as_numpy_array_wrapper

# beyond a chunk's raw bytes, what another codec's output may add (a shard's index: 16 bytes for
# each inner chunk, at most one an element), so a chain of codecs is bounded too
_INDEX_BYTES_PER_ELEMENT = 16
_SLACK = 4096
# the largest buffer made up front for a zstd frame that declares no size: a chunk shape of 10**5
# along each axis would ask for petabytes (zarr writes the size; a frame without it is rare)
_MOST_BUFFER = 1 << 32


def most_bytes(shape: tuple[int, ...], itemsize: int) -> int:
    """The most bytes a chunk of ``shape`` (items of ``itemsize`` bytes) decodes to, at any stage.

    >>> most_bytes((8, 8, 3), 1)
    7552
    """
    elements = math.prod(shape)
    return 2 * elements * itemsize + _INDEX_BYTES_PER_ELEMENT * elements + _SLACK


def _bound(chunk_spec: Any) -> int | None:
    """:func:`most_bytes` of a chunk; None for variable-length items (strings), which have no bound."""
    dtype = chunk_spec.dtype.to_native_dtype()
    if dtype.hasobject or dtype.itemsize == 0:
        return None
    return most_bytes(chunk_spec.shape, dtype.itemsize)


def _too_big(codec: str, chunk_spec: Any, bound: int) -> ValueError:
    shape = "x".join(map(str, chunk_spec.shape))
    return ValueError(f"a {codec} chunk of {shape} {chunk_spec.dtype.to_native_dtype()} decodes past the "
                      f"{bound} bytes it can need")


class ZstdCodec(zarr.codecs.ZstdCodec):
    """zarr's, refusing a frame that declares more than the chunk's bound; a frame that declares no
    size decoded into a buffer of the bound."""

    def _decode_sync(self, chunk_bytes: Any, chunk_spec: Any) -> Any:
        bound = _bound(chunk_spec)
        declared = declared_size(chunk_bytes.to_bytes()[:18])
        if bound is None or declared is not None and declared <= bound or declared is None and bound > _MOST_BUFFER:
            # numcodecs': a buffer of the size declared, or grown as it decodes a frame that declares none
            return super()._decode_sync(chunk_bytes, chunk_spec)
        if declared is not None:
            raise _too_big("zstd", chunk_spec, bound)
        import imagecodecs

        def decode(data: Any) -> bytes:
            try:
                return bytes(imagecodecs.zstd_decode(data.tobytes(), out=bound))
            except imagecodecs.ZstdError as error:
                if "too small" in str(error):
                    raise _too_big("zstd", chunk_spec, bound) from error
                raise

        return as_numpy_array_wrapper(decode, chunk_bytes, chunk_spec.prototype)


def declared_size(head: bytes) -> int | None:
    """The content size a zstd frame's header declares (RFC 8878, 3.1.1.1); None where it declares
    none or is no zstd frame.

    >>> declared_size(bytes.fromhex("28b52ffd2000"))  # single segment, 1-byte size: empty
    0
    >>> declared_size(bytes.fromhex("28b52ffd0058"))  # a window, no size
    """
    if len(head) < 6 or head[:4] != b"\x28\xb5\x2f\xfd":
        return None
    descriptor = head[4]
    single_segment = descriptor >> 5 & 1
    at = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
    width = (single_segment, 2, 4, 8)[descriptor >> 6]
    if not width or len(head) < at + width:
        return None
    return int.from_bytes(head[at : at + width], "little") + (256 if width == 2 else 0)


class GzipCodec(zarr.codecs.GzipCodec):
    """zarr's, reading no further than the chunk's bound."""

    def _decode_sync(self, chunk_bytes: Any, chunk_spec: Any) -> Any:
        bound = _bound(chunk_spec)
        if bound is None:
            return super()._decode_sync(chunk_bytes, chunk_spec)

        def decode(data: Any) -> bytes:
            with gzip.GzipFile(fileobj=io.BytesIO(data.tobytes()), mode="rb") as decompressor:
                decoded = decompressor.read(bound + 1)  # numcodecs' GZip, read no further
            if len(decoded) > bound:
                raise _too_big("gzip", chunk_spec, bound)
            return decoded

        return as_numpy_array_wrapper(decode, chunk_bytes, chunk_spec.prototype)


def inflate(codec: Any, data: Any, bound: int, chunk: str) -> bytes:
    """The numcodecs ``codec``'s (zlib, gzip, bz2 or lzma) decoding of ``data``, read no further
    than ``bound`` bytes; a ValueError naming the ``chunk`` (its shape and dtype) past them."""
    raw = bytes(data)
    name = codec.codec_id
    try:
        if name == "gzip":
            with gzip.GzipFile(fileobj=io.BytesIO(raw), mode="rb") as decompressor:
                decoded = decompressor.read(bound + 1)
        else:
            streams: dict[str, Callable[[], Any]] = {
                "zlib": zlib.decompressobj, "bz2": bz2.BZ2Decompressor,
                "lzma": lambda: lzma.LZMADecompressor(format=codec.format, filters=codec.filters)}
            stream = streams[name]()
            decoded = stream.decompress(raw, bound + 1)
            if len(decoded) <= bound and not stream.eof:  # (what the one-shot decompress raises)
                raise EOFError("cut short")
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as error:  # bz2's OSError names no file
        raise ValueError(f"a {name} chunk of {chunk} is damaged ({error})") from error
    if len(decoded) > bound:
        raise ValueError(f"a {name} chunk of {chunk} decodes past the {bound} bytes it can need")
    return decoded


def _chunk(chunk_spec: Any) -> str:
    return f"{'x'.join(map(str, chunk_spec.shape))} {chunk_spec.dtype.to_native_dtype()}"


class _BoundedNumcodec:
    """A zarr v3 ``numcodecs.*`` codec that decodes a chunk no further than its bound."""

    _codec: Any

    async def _decode_single(self, chunk_data: Any, chunk_spec: Any) -> Any:
        bound = _bound(chunk_spec)
        if bound is None or not isinstance(self._codec, _BoundedCompressor):  # (numcodecs' registry without ours)
            return await super()._decode_single(chunk_data, chunk_spec)  # type: ignore[misc]
        decode = functools.partial(self._codec._within, bound=bound, chunk=_chunk(chunk_spec))
        return await asyncio.to_thread(as_numpy_array_wrapper, decode, chunk_data, chunk_spec.prototype)


class NumcodecsZlib(_BoundedNumcodec, zarr.codecs.numcodecs.Zlib):
    pass


class NumcodecsGZip(_BoundedNumcodec, zarr.codecs.numcodecs.GZip):
    pass


class NumcodecsBZ2(_BoundedNumcodec, zarr.codecs.numcodecs.BZ2):
    pass


class NumcodecsLZMA(_BoundedNumcodec, zarr.codecs.numcodecs.LZMA):
    pass


class NumcodecsZstd(_BoundedNumcodec, zarr.codecs.numcodecs.Zstd):
    pass


class NumcodecsBlosc(_BoundedNumcodec, zarr.codecs.numcodecs.Blosc):
    pass


class NumcodecsLZ4(_BoundedNumcodec, zarr.codecs.numcodecs.LZ4):
    pass


class _BoundedCompressor:
    """A zarr v2 compressor that decodes a chunk no further than ``bound`` (bytes, and the
    chunk's shape and dtype), once :func:`bound_compressor` has set it."""

    bound: tuple[int, str] | None = None

    def decode(self, buf: Any, out: Any = None) -> Any:
        if self.bound is None or out is not None:
            return super().decode(buf, out)  # type: ignore[misc]
        return self._within(memoryview(buf).cast("B"), *self.bound)

    def _within(self, data: Any, bound: int, chunk: str) -> Any:
        return inflate(self, data, bound, chunk)


class Zlib(_BoundedCompressor, numcodecs.Zlib):  # type: ignore[misc]  # (numcodecs is untyped)
    pass


class GZip(_BoundedCompressor, numcodecs.GZip):  # type: ignore[misc]  # (numcodecs is untyped)
    pass


class BZ2(_BoundedCompressor, numcodecs.BZ2):  # type: ignore[misc]  # (numcodecs is untyped)
    pass


class LZMA(_BoundedCompressor, numcodecs.LZMA):  # type: ignore[misc]  # (numcodecs is untyped)
    pass


def _blosc_size(head: bytes) -> int | None:
    """The bytes a blosc buffer's header declares it decodes to (bytes 4 to 8)."""
    return int.from_bytes(head[4:8], "little") if len(head) >= 16 else None


def _lz4_size(head: bytes) -> int | None:
    """The bytes numcodecs' LZ4 buffer declares it decodes to (its first 4)."""
    return int.from_bytes(head[:4], "little") if len(head) >= 4 else None


class _DeclaredSize(_BoundedCompressor):
    """A zarr v2 compressor whose buffer declares the size it decodes to, and numcodecs makes a
    buffer of that size first: refused past the chunk's bound."""

    codec_id: str
    declared: Callable[[bytes], int | None]

    def _within(self, data: Any, bound: int, chunk: str) -> Any:
        declared = type(self).declared(bytes(data[:18]))
        if declared is not None and declared > bound:
            raise ValueError(f"a {self.codec_id} chunk of {chunk} declares {declared} bytes, past the "
                             f"{bound} it can need")
        if declared is None and self.codec_id == "zstd":  # no size: a buffer of the bound (see ZstdCodec)
            import imagecodecs

            try:
                return bytes(imagecodecs.zstd_decode(bytes(data), out=bound))
            except imagecodecs.ZstdError as error:
                if "too small" in str(error):
                    raise ValueError(f"a zstd chunk of {chunk} decodes past the {bound} bytes it can need") from error
                raise
        return super(_BoundedCompressor, self).decode(data)  # type: ignore[misc]  # numcodecs'


class Zstd(_DeclaredSize, numcodecs.Zstd):  # type: ignore[misc]  # (numcodecs is untyped)
    declared = staticmethod(declared_size)


class Blosc(_DeclaredSize, numcodecs.Blosc):  # type: ignore[misc]  # (numcodecs is untyped)
    declared = staticmethod(_blosc_size)


class LZ4(_DeclaredSize, numcodecs.LZ4):  # type: ignore[misc]  # (numcodecs is untyped)
    declared = staticmethod(_lz4_size)


class BloscCodec(zarr.codecs.BloscCodec):
    """zarr's, refusing a chunk whose header declares more than the chunk can need (numcodecs
    makes a buffer of the size declared before it decodes)."""

    def _decode_sync(self, chunk_bytes: Any, chunk_spec: Any) -> Any:
        bound = _bound(chunk_spec)
        declared = _blosc_size(chunk_bytes.to_bytes()[:16])
        if bound is not None and declared is not None and declared > bound:
            raise ValueError(f"a blosc chunk of {_chunk(chunk_spec)} declares {declared} bytes, past the "
                             f"{bound} it can need")
        return super()._decode_sync(chunk_bytes, chunk_spec)


def check_items(data: Any, items: int, name: str, chunk: str) -> None:
    """Refuse a variable-length chunk whose header declares other than its ``items``: numcodecs
    makes an array of the count declared before it reads on (4 bytes: 2**31 - 1 is 16 GiB)."""
    head = bytes(memoryview(data).cast("B")[:4])
    declared = int.from_bytes(head, "little") if len(head) == 4 else items  # (shorter: numcodecs says so)
    if declared != items:
        raise ValueError(f"a {name} chunk of {chunk} declares {declared} items")


class _CountedCodec:
    """A zarr v3 variable-length codec (zarr's, by its ``_name``) that refuses a chunk declaring
    other than its items."""

    _name: str

    def _decode_sync(self, chunk_bytes: Any, chunk_spec: Any) -> Any:
        check_items(chunk_bytes.as_array_like(), math.prod(chunk_spec.shape), self._name, _chunk(chunk_spec))
        return super()._decode_sync(chunk_bytes, chunk_spec)  # type: ignore[misc]


class VLenUTF8Codec(_CountedCodec, zarr.codecs.VLenUTF8Codec):
    _name = "vlen-utf8"


class VLenBytesCodec(_CountedCodec, zarr.codecs.VLenBytesCodec):
    _name = "vlen-bytes"


class _CountedFilter:
    """A zarr v2 variable-length filter that refuses a chunk declaring other than ``items``
    (the chunk's element count, and its shape and dtype), once :func:`bound_compressor` has set it."""

    codec_id: str
    items: tuple[int, str] | None = None

    def decode(self, buf: Any, out: Any = None) -> Any:
        if self.items is not None:
            check_items(buf, self.items[0], self.codec_id, self.items[1])
        return super().decode(buf, out)  # type: ignore[misc]


class VLenUTF8(_CountedFilter, numcodecs.VLenUTF8):  # type: ignore[misc]  # (numcodecs is untyped)
    pass


class VLenBytes(_CountedFilter, numcodecs.VLenBytes):  # type: ignore[misc]  # (numcodecs is untyped)
    pass


def bound_compressor(array: Any) -> None:
    """Give the compressor of the zarr v2 ``array`` its chunk's bound, and its variable-length
    filter the chunk's item count (a v3 codec finds them itself)."""
    compressor = getattr(array.metadata, "compressor", None)
    dtype = array.dtype
    shape = tuple(array.chunks)
    chunk = f"{'x'.join(map(str, shape))} {dtype}"
    if isinstance(compressor, _BoundedCompressor) and not dtype.hasobject and dtype.itemsize:
        compressor.bound = (most_bytes(shape, dtype.itemsize), chunk)
    for codec in getattr(array.metadata, "filters", None) or ():
        if isinstance(codec, _CountedFilter):
            codec.items = (math.prod(shape), chunk)


@functools.cache
def install() -> None:
    """Make zarr decode ``zstd`` and ``gzip`` chunks with the bounded codecs, and numcodecs'
    zlib, gzip, bz2 and lzma, and the variable-length strings and bytes, v3 and v2 (once a process)."""
    from numcodecs.registry import register_codec as register_numcodec
    from zarr.registry import register_codec

    chosen = {}
    for name, codec in (("zstd", ZstdCodec), ("gzip", GzipCodec), ("numcodecs.zlib", NumcodecsZlib),
                        ("numcodecs.gzip", NumcodecsGZip), ("numcodecs.bz2", NumcodecsBZ2),
                        ("numcodecs.lzma", NumcodecsLZMA), ("numcodecs.zstd", NumcodecsZstd),
                        ("numcodecs.blosc", NumcodecsBlosc), ("numcodecs.lz4", NumcodecsLZ4),
                        ("vlen-utf8", VLenUTF8Codec), ("vlen-bytes", VLenBytesCodec), ("blosc", BloscCodec)):
        register_codec(name, codec)
        chosen[name] = f"{codec.__module__}.{codec.__qualname__}"
    zarr.config.set({"codecs": {**zarr.config.get("codecs"), **chosen}})
    for numcodec in (Zlib, GZip, BZ2, LZMA, Zstd, Blosc, LZ4, VLenUTF8, VLenBytes):
        register_numcodec(numcodec)
