"""What each worker of a LocalCluster that ``--scheduler local:N`` starts does first (a Dask
preload, scheduler.LOCAL_CONFIG):

- **Leave its ending to the command.** A terminal sends Ctrl-C (SIGINT) to the whole process
  group, workers included, as a closed terminal sends SIGHUP, and ``kill -TERM -PGID``, a shell's
  job control, systemd (KillMode=control-group) or a CI runner's timeout SIGTERM. The command
  cancels what is in flight, takes from each worker the reports of the outputs its task placed,
  and closes the cluster (its workers end); a worker ended by the signal itself took those
  reports with it, or printed a KeyboardInterrupt's traceback. So workers ignore the three, as
  -j's workers ignore SIGINT and SIGHUP (and the forkserver they come from holds them:
  forkserver.start). They still end with the command, even one ended by SIGKILL: Dask's worker
  process exits once its parent's pipe closes.
- **Abort its uploads as it ends.** A worker closed by its nanny (the command closing the
  cluster) stops its multipart uploads under way as it begins to close (``dask_teardown``),
  before it waits for its task's threads (io._remote.stop_uploads, as a -j worker does), or they
  stay pending, and billed, for good.
"""

from __future__ import annotations

import signal

from geomcli.io import _remote


def dask_setup(worker: object) -> None:
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)


def dask_teardown(worker: object) -> None:
    _remote.stop_uploads()
