"""The forkserver that worker processes fork from (-j's pool, a LocalCluster's workers), started
early so that its imports run beside this process's work."""

from __future__ import annotations

import signal
from collections.abc import Collection, Iterable


def set_preload(modules: Iterable[str]) -> None:
    """What the forkserver imports before it forks a worker: ``modules``, then
    geomcli.engine.preloaded, which freezes what they made."""
    import multiprocessing

    multiprocessing.get_context("forkserver").set_forkserver_preload([*modules, "geomcli.engine.preloaded"])


def start(held: Collection[signal.Signals] = (signal.SIGINT,)) -> None:
    """Start the forkserver now (with the preload already set), the signals ``held`` blocked
    meanwhile: it inherits the mask, and keeps it.

    SIGINT: a Ctrl-C while it starts and imports its preload (before it ignores SIGINT itself)
    waits and is dropped, where it printed a KeyboardInterrupt's traceback beside this process's
    "Interrupted". Its workers inherit the mask too; they ignore SIGINT anyway. Here the signal
    waits until the server is up.

    A LocalCluster's (scheduler.start_local_workers_early) holds SIGTERM and SIGHUP too, for good:
    one sent to the whole process group ended the server, and multiprocessing, which reads a
    worker's end from its forkserver, then took each worker for dead (exit 255), and Dask closed
    them, with the reports of the outputs they had placed. The server still ends with this
    process (its pipe from here closes). So does multiprocessing's resource tracker, started
    first here with the same mask: a SIGHUP to the group ended it, and the next call on it started
    another, which printed a traceback (KeyError) for each semaphore of the first as the cluster
    closed."""
    from multiprocessing import forkserver, resource_tracker

    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(held))
    try:
        # its process ignores SIGINT and SIGTERM, and keeps the rest held; it unblocks those two
        # here as it starts it (bpo-33613): held again
        resource_tracker.ensure_running()
        signal.pthread_sigmask(signal.SIG_BLOCK, set(held))
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
