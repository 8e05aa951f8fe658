"""The CPUs this process may use, and pieces of work shared among them: the kernels' and the PNG
encoder's threads and a batch's default job count. Standard library only, so a batch of plain
images never imports numpy for it."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


# numpy (copies, casts, sums) and zlib release the GIL while they work, so pieces that write
# disjoint parts of one result run in parallel. Which thread does which piece must never
# change a value: the callers make their results identical for any thread count.

_Piece = TypeVar("_Piece")


def share(pieces: Sequence[_Piece], work: Callable[[_Piece], None], threads: int) -> None:
    """``work(piece)`` for every piece: in order on this thread, or in ``threads`` contiguous runs,
    the first on this thread. The others' threads are daemons, made for the call: an interrupt
    or an exit never waits for them (a pool's idle threads once held an interrupted exit)."""
    count = max(1, min(threads, len(pieces)))
    bounds = [len(pieces) * i // count for i in range(count + 1)]
    first, *others = [pieces[start:stop] for start, stop in itertools.pairwise(bounds)]
    failures: list[BaseException] = []

    def run(part: Sequence[_Piece]) -> None:
        try:
            for piece in part:
                work(piece)
        except BaseException as error:  # handed to the caller's thread
            failures.append(error)

    helpers, here = [], [first]
    for part in others:
        helper = threading.Thread(target=run, args=(part,), name="geomcli", daemon=True)
        try:
            helper.start()
        except RuntimeError:  # no thread to be had (the process's limit): this one takes the part
            here.append(part)
        else:
            helpers.append(helper)
    try:
        for part in here:
            for piece in part:
                work(piece)
    except Exception:
        for helper in helpers:  # none of this call's work goes on after it has failed
            helper.join()
        raise
    for helper in helpers:
        helper.join()
    if failures:
        raise failures[0]
