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
    the first on this thread, each done from its front; a thread done with its run takes pieces
    from the back of the run with most left, so one the OS holds back does less (with another
    process busy on one of two cores, space-to-depth of a 512 MiB tensor took 8-19% less). The
    others' threads are daemons, made for the call: an interrupt or an exit never waits for them
    (a pool's idle threads once held an interrupted exit)."""
    count = max(1, min(threads, len(pieces)))
    bounds = [len(pieces) * i // count for i in range(count + 1)]
    runs = [[start, stop] for start, stop in itertools.pairwise(bounds)]  # [front, back) left of each
    lock = threading.Lock()
    failures: list[BaseException] = []

    def take(own: list[int]) -> int | None:
        with lock:
            if failures:  # none of this call's work goes on after a piece has failed
                return None
            if own[0] < own[1]:
                own[0] += 1
                return own[0] - 1
            most = max(runs, key=lambda run: run[1] - run[0])
            if most[0] == most[1]:
                return None
            most[1] -= 1
            return most[1]

    def run(own: list[int]) -> None:
        try:
            while (index := take(own)) is not None:
                work(pieces[index])
        except BaseException as error:  # handed to the caller's thread
            with lock:
                failures.append(error)

    helpers = []
    for own in runs[1:]:
        helper = threading.Thread(target=run, args=(own,), name="geomcli", daemon=True)
        try:
            helper.start()
        except RuntimeError:  # no thread to be had (the process's limit): the others take its run
            break
        helpers.append(helper)
    run(runs[0])
    for helper in helpers:
        helper.join()
    if failures:
        raise failures[0]
