"""Imported last by a forkserver's preload (workers._PRELOAD, scheduler._WORKER_PRELOAD): freezes
every object the preload made (``gc.freeze``), as Python's gc documentation advises a process that
forks without exec. The collector then never walks them again: not in the workers forked from it
(whose collections would otherwise touch, and so copy, the pages they share), and not as the
forkserver ends, after the run: its teardown walked the ~60,000 objects of Dask's import for
0.1 s, with the run's stdout and stderr still open in it, so a pipe's reader (and
``subprocess.run``) waited that long past the run's end."""

import gc

gc.freeze()
