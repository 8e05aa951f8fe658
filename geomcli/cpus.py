"""How many CPUs this process may use: the kernels' default thread count and a batch's default
job count. Standard library only, so a batch of plain images never imports numpy for it."""

from __future__ import annotations

import os


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
