"""What each worker of a LocalCluster that ``--scheduler local:N`` starts does first (a Dask
preload, scheduler.LOCAL_CONFIG):

- **Leave Ctrl-C to the command.** A terminal sends SIGINT to the whole process group, workers
  included; the command cancels what is in flight and closes the cluster, and a worker's own
  KeyboardInterrupt would only print a traceback on its way out (as -j's workers ignore SIGINT
  for the same reason).
- **Abort its uploads as it ends.** SIGTERM (``timeout`` and ``kill 0`` send it to the whole
  group too) ends a worker at once, as Dask leaves it; first, its multipart uploads under way are
  aborted (io._remote.stop_uploads, as a -j worker does), or they stay pending, and billed, for
  good. A worker closed by its nanny (the command closing the cluster) stops them as it begins
  to close (``dask_teardown``), before it waits for its task's threads.
"""

from __future__ import annotations

import functools
import signal
from typing import Any

from geomcli.io import _remote


def dask_setup(worker: object) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, functools.partial(_terminated, previous))


def dask_teardown(worker: object) -> None:
    _remote.stop_uploads()


def _terminated(previous: Any, signum: int, frame: Any) -> None:
    """SIGTERM: the uploads under way aborted, then what was there before (Dask sets none: the
    process ends by the signal, as it did)."""
    _remote.stop_uploads()
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL if previous is None else previous)
    signal.raise_signal(signum)
