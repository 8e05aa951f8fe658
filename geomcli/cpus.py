"""The CPUs this process may use, and pieces of work shared among them: the kernels' and the PNG
encoder's threads and a batch's default job count. Standard library only, so a batch of plain
images never imports numpy for it."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


# numpy (copies, casts, sums) and zlib release the GIL while they work, so pieces that write
# disjoint parts of one result run in parallel. Which thread does which piece must never
# change a value: the callers make their results identical for any thread count.

_Piece = TypeVar("_Piece")
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _executor(workers: int) -> ThreadPoolExecutor:
    """A shared pool of at least ``workers`` threads, made on first use (the import is lazy)."""
    global _pool, _pool_size
    from concurrent.futures import ThreadPoolExecutor

    with _pool_lock:
        if _pool is None or _pool_size < workers:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool, _pool_size = ThreadPoolExecutor(workers, thread_name_prefix="geomcli"), workers
        return _pool


def share(pieces: Sequence[_Piece], work: Callable[[_Piece], None], threads: int) -> None:
    """``work(piece)`` for every piece: in order on this thread, or in ``threads`` contiguous runs."""
    threads = min(threads, len(pieces))
    if threads <= 1:
        for piece in pieces:
            work(piece)
        return

    def run(part: Sequence[_Piece]) -> None:
        for piece in part:
            work(piece)

    bounds = [len(pieces) * i // threads for i in range(threads + 1)]
    parts = [pieces[start:stop] for start, stop in itertools.pairwise(bounds)]
    # The calling thread takes the first run itself, so a busy pool can never stall it.
    futures = [_executor(threads - 1).submit(run, part) for part in parts[1:]]
    run(parts[0])
    for future in futures:
        future.result()
