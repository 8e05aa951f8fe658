"""A local zarr store that reads nothing outside its folder: an array from a stranger (an upload,
an archive unpacked) may hold a chunk or a ``zarr.json`` that is a symbolic link to any file the
user can read (``c/0/0 -> ~/.ssh/id_rsa``), which zarr's LocalStore read as that chunk's bytes,
into the output's pixels; or a FIFO or device, which it read until it ended (never, for a FIFO or
/dev/zero). A link that stays inside the folder is read as before.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from typing import Any

import zarr.storage


class ContainedStore(zarr.storage.LocalStore):
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

    async def get(self, key: str, prototype: Any = None, byte_range: Any = None) -> Any:
        self._check_inside(key)
        return await super().get(key, prototype, byte_range)

    async def get_partial_values(self, prototype: Any, key_ranges: Iterable[tuple[str, Any]]) -> list[Any]:
        key_ranges = list(key_ranges)
        for key, _ in key_ranges:
            self._check_inside(key)
        return await super().get_partial_values(prototype, key_ranges)
