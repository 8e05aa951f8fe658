"""What each worker of a LocalCluster that ``--scheduler local:N`` starts does first (a Dask
preload, scheduler.LOCAL_CONFIG): leave Ctrl-C to the command. A terminal sends SIGINT to the
whole process group, workers included; the command cancels what is in flight and closes the
cluster, and a worker's own KeyboardInterrupt would only print a traceback on its way out (as -j's
workers ignore SIGINT for the same reason)."""

from __future__ import annotations

import signal


def dask_setup(worker: object) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
