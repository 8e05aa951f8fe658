"""The stores zarr arrays are read through (and on a URL written). A local one reads nothing outside
its folder: an array from a stranger (an upload, an archive unpacked) may hold a chunk or a
``zarr.json`` that is a symbolic link to any file the user can read (``c/0/0 -> ~/.ssh/id_rsa``),
which zarr's LocalStore read as that chunk's bytes, into the output's pixels; or a FIFO or device,
which it read until it ended (never, for a FIFO or /dev/zero). A link that stays inside the folder
is read as before. A chunk's file bigger than its chunk can be, once the array's chunks are known
(:meth:`ChunkBound.bound_chunks`), is refused before it is read: zarr read it whole first (a 390 MB
file in place of an 8x8x3 chunk took 473 MB). A URL's chunk objects have the same bound
(:class:`BoundedRemoteStore`): each is read by a range one byte past it, so a bigger object is
refused having sent no more than that, and no request more is made (a HEAD for its size would
double a chunk's requests). A metadata file (zarr.json, .zarray, .zmetadata) past
``METADATA_BYTES`` is refused so too, locally or not. A URL's read or chunk write that fails on an
error that may pass (a connection reset or timed out, S3's 500), once the filesystem's own retries
are spent, is made again up to ``READ_RETRIES`` times, after a pause: one chunk's failed the whole
array's job, hours of work on a cluster, where a batch sends a file that failed so again
(engine.cluster.IO_RETRIES). A chunk is put whole, so a put made again replaces it whole. A
chunk's read or put, these tries and the filesystem's own in, must be done within its deadline
(io._remote.deadline: a stalled store held each chunk for an hour and a half, see io._remote), else it
fails its array's job, saying the store stalled, and is not tried again.
"""

from __future__ import annotations

import asyncio
import functools
import os
import stat
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import zarr.storage

# the names of zarr's metadata files, v3 and v2: what is read before the chunks are known
_METADATA = {"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"}


# the most bytes a metadata file is read to (64 MiB: an array's zarr.json holds a few KB, a v2
# group's .zmetadata some MB): zarr read and parsed any whole, a 100 MB zarr.json on S3 in 3 s and 211 MiB
METADATA_BYTES = 64 << 20
# a chunk's file up to this size (4 MiB) is read, whatever its chunk: its codec then says better what is
# wrong with it (a zstd chunk declaring more than its chunk can take), at no cost that matters
_READ_ANYWAY = 1 << 22
# how often a URL's read (or chunk write) that failed on an error that may pass is made again, and
# the pause before each (seconds, times its number): the filesystem's own retries (s3fs's 5) come within 2 s
READ_RETRIES = 2
RETRY_SECONDS = 1.0


class ChunkBound:
    """What a store's chunk objects may hold, once the array's chunks are known."""

    # the most bytes a chunk's file (a shard's, for a sharded array) may hold, and that chunk's
    # shape and dtype for the message; None: not known (metadata is being read) or no bound (strings)
    chunk_bound: tuple[int, str] | None = None

    def bound_chunks(self, shape: tuple[int, ...], dtype: Any) -> None:
        """Bound the files read whole from now on by what a chunk (or shard) of ``shape`` and
        ``dtype`` can take, compressed or not (see _zarr_codecs.most_bytes); strings have no bound."""
        from geomcli.io._zarr_codecs import most_bytes

        if not dtype.hasobject and dtype.itemsize:
            self.chunk_bound = (most_bytes(shape, dtype.itemsize), f"{'x'.join(map(str, shape))} {dtype}")

    def _most_read(self, key: str) -> int | None:
        """The most bytes the file ``key`` is read to: a metadata file's METADATA_BYTES, a
        chunk's its bound; None where it has none (strings, or chunks not yet known)."""
        if os.path.basename(key) in _METADATA:
            return METADATA_BYTES
        if self.chunk_bound is None:
            return None
        return max(self.chunk_bound[0], _READ_ANYWAY)

    def _too_big(self, key: str, size: int | None, most: int) -> ValueError:
        """The error of the file ``key``, of ``size`` bytes (None: more than ``most``, read so far)."""
        if self.chunk_bound is None or os.path.basename(key) in _METADATA:
            held = f"holds more than the {most} bytes" if size is None else \
                f"holds {size} bytes, more than the {most} bytes"
            return ValueError(f"{key} {held} zarr metadata is read to")
        bound, chunk = self.chunk_bound
        held = f"holds {size} bytes" if size is not None else f"holds more than {most} bytes"
        return ValueError(f"{key} {held}, far past the {bound} a chunk of {chunk} can take")


class ContainedStore(ChunkBound, zarr.storage.LocalStore):
    """zarr's LocalStore, reading only regular files whose real path is inside its root's."""

    def _check_inside(self, key: str) -> None:
        path = os.path.join(self.root, key)
        real = os.path.realpath(path)
        root = os.path.realpath(self.root)
        if os.path.commonpath([real, root]) != root:
            raise ValueError(f"{key} is a link to {real}, outside the array's folder")
        try:
            mode = os.stat(real).st_mode
        except OSError:
            return  # (no such chunk: zarr's fill value, as LocalStore reads it)
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            raise ValueError(f"{key} is not a regular file")

    def _check_size(self, key: str) -> None:
        """Refuse a chunk's file bigger than the chunk can take, a metadata file past METADATA_BYTES."""
        most = self._most_read(key)
        if most is None:
            return
        try:
            size = os.stat(os.path.join(self.root, key)).st_size
        except OSError:
            return
        if size > most:
            raise self._too_big(key, size, most)

    async def get(self, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
        self._check_inside(key)
        if byte_range is None:  # (a shard's parts are read by their ranges, bounded by its index)
            self._check_size(key)
        return await super().get(key, prototype, byte_range)

    async def get_partial_values(self, prototype: Any, key_ranges: Iterable[tuple[str, Any]]) -> list[Any]:
        key_ranges = list(key_ranges)
        for key, _ in key_ranges:
            self._check_inside(key)
        return await super().get_partial_values(prototype, key_ranges)


class BoundedRemoteStore(ChunkBound, zarr.storage.FsspecStore):
    """zarr's FsspecStore, reading a chunk's object no further than one byte past what the chunk
    can take (a 20 MiB object in place of a 4x8 chunk was read whole: 104 MiB at its peak), and
    making a read or a write (a chunk's put, whole) that failed on an error that may pass again,
    within the deadline of the bytes it moves (``deadline_seconds``: --storage-option's, as the
    store was made: a worker that unpickles it has no options of the run's)."""

    deadline_seconds: float | None = None

    async def get(self, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
        most = self._most_read(key)
        if most is None or byte_range is not None:  # (a shard's parts are read by their ranges, bounded by its index)
            return await self._retried(functools.partial(super().get, key, prototype, byte_range), key, "read")
        from zarr.abc.store import RangeByteRequest

        # (its deadline grows by what the chunk can hold, not by the 4 MiB read anyway, nor a metadata file's bound)
        moved = self.chunk_bound[0] if self.chunk_bound is not None and most != METADATA_BYTES else None
        found = await self._retried(functools.partial(super().get, key, prototype, RangeByteRequest(0, most + 1)),
                                    key, "read", moved)
        if found is not None and len(found) > most:
            raise self._too_big(key, None, most)
        return found

    async def set(self, key: str, value: Any, byte_range: Any = None) -> None:
        from geomcli.io import _remote

        with _remote.chunk_put(key):  # a worker ending waits for it before its sweep lists the array
            await self._retried(functools.partial(super().set, key, value, byte_range), key, "write", len(value))

    async def _retried(self, call: Callable[[], Awaitable[Any]], key: str, doing: str, size: int | None = None) -> Any:
        """``call()``, made again after a failure that may pass; a StalledError past its deadline."""
        from geomcli.io import _remote

        if self.deadline_seconds is None:
            return await self._tries(call)
        seconds = self.deadline_seconds + (size or 0) / _remote.SLOWEST_RATE
        try:
            async with asyncio.timeout(seconds) as within:
                return await self._tries(call)
        except TimeoutError as error:
            if not within.expired():  # (a store's own timeout, which may pass)
                raise
            raise _remote.stalled(self.fs.unstrip_protocol(f"{self.path}/{key}"), doing, seconds) from error

    @staticmethod
    async def _tries(call: Callable[[], Awaitable[Any]]) -> Any:
        from geomcli.io import _remote

        for retry in range(READ_RETRIES + 1):
            if retry and _remote._stopped:  # (the process ended during the pause: no put is begun after)
                raise InterruptedError("the process is ending")
            try:
                return await call()
            except _remote._failures() as error:
                if retry == READ_RETRIES or not _remote.may_pass(error) or _remote._stopped:
                    raise  # (a process ending waits for its puts: it does not wait for their retries)
            await asyncio.sleep(RETRY_SECONDS * (retry + 1))
        raise AssertionError("unreachable")
