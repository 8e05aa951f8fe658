"""A tensor past a worker's share of memory, chunk by chunk: crop + space-to-depth of a float32 zarr.

    python benchmarks/zarr_chunked.py                    # 2 GiB, chunks of 64 MiB, 3 rounds
    python benchmarks/zarr_chunked.py --gib 0.25 --rounds 1
    python benchmarks/zarr_chunked.py --codec none       # an uncompressed zarr: the chain's own cost
    python benchmarks/zarr_chunked.py --cold             # each run reads its input from the disk

The array is (N, 16, 2048, 2048) float32, chunked (1, 16, 1024, 1024): 64 MiB a chunk, every
channel in one (DCR's order needs them together). One ``geomcli chain`` crops it to 2000x2000
and turns it into (N, 64, 1000, 1000), written as a zarr of (1, 64, 500, 500) chunks (61 MiB).
The runs alternate (a busy machine slows all alike), medians:

- **memory-mapped**: the same chain from a ``.npy`` to a ``.npy`` on this machine's 2 threads
  (the run the issue compares with: no zarr, no Dask);
- **threads**: zarr to zarr, dask's threaded scheduler;
- **local:2**: zarr to zarr, ``--scheduler local:2`` from the shell (its cluster's start in it);
- **1 worker / 2 workers**: zarr to zarr joining a LocalCluster of 1 or 2 one-thread worker
  processes started before the run (the scaling), each worker's peak RSS over its RSS before
  the run, in chunks (target: at most 4).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHANNELS, BLOCK = 16, 2


class Sizes:
    """The array's side, the crop (48 less: the chunks' edges move by 24) and the chunk of half a side."""

    def __init__(self, side: int) -> None:
        self.side, self.crop = side, side - 48
        self.chunk = (1, CHANNELS, side // 2, side // 2)
        self.chunk_bytes = 4 * CHANNELS * (side // 2) ** 2


SIZES = Sizes(2048)


def make_inputs(work: Path, images: int, compressed: bool) -> tuple[Path, Path]:
    """The same random array as a zarr (default codecs, or none: like for like with the .npy,
    the chain's own cost without a codec's) and a .npy."""
    import numpy as np
    import zarr

    zarr_path, npy_path = work / ("in.zarr" if compressed else "in-raw.zarr"), work / "in.npy"
    shape = (images, CHANNELS, SIZES.side, SIZES.side)
    if zarr_path.exists() and npy_path.exists() and np.load(npy_path, mmap_mode="r").shape == shape:
        return zarr_path, npy_path
    rng = np.random.default_rng(0)
    codecs: dict[str, Any] = {} if compressed else {"compressors": None}  # (an output takes its input's)
    array = zarr.create_array(str(zarr_path), shape=shape, dtype="float32", chunks=SIZES.chunk,
                              dimension_names=["t", "c", "y", "x"], overwrite=True, **codecs)
    npy = np.lib.format.open_memmap(npy_path, mode="w+", dtype=np.float32, shape=shape)
    for n in range(images):
        plane = rng.standard_normal(shape[1:], dtype=np.float32)
        array[n] = plane
        npy[n] = plane
    npy.flush()
    return zarr_path, npy_path


COLD = False  # --cold: each run reads its input from the disk, not from the page cache


def evict(path: Path) -> None:
    """Drop ``path`` (a file, or every file of a folder) from the page cache, after writing back
    whatever is dirty: the next read comes from the disk, as a big array's first read does.
    (posix_fadvise's DONTNEED needs no root, as /proc/sys/vm/drop_caches would.)"""
    os.sync()
    for file in [path] if path.is_file() else [item for item in path.rglob("*") if item.is_file()]:
        descriptor = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)


def chain(source: Path, target: Path, how: list[str]) -> float:
    """Wall seconds of one ``geomcli chain`` from the shell (its input evicted first, with --cold)."""
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    if COLD:
        evict(source)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "geomcli", "chain", "-i", str(source), "-o", str(target), "-q",
                    "--layout", "NCHW", *how, "crop-pad", "--shape", f"{SIZES.crop},{SIZES.crop}", "space-to-depth",
                    "--blocksize", str(BLOCK)], check=True)
    return time.perf_counter() - started


def _rss() -> int:
    """This process's resident bytes now (a worker's, run there)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def _imports() -> None:
    """What a worker imports for the chain's tasks, so that its memory before the run counts them."""
    import importlib

    for name in ("numpy", "zarr", "dask.array", "geomcli.ops.center_crop_pad", "geomcli.ops.space_depth",
                 "geomcli.engine.chunked", "geomcli.engine.zarr_file", "geomcli.engine.operations"):
        importlib.import_module(name)


def _peak() -> int:
    """This process's peak resident bytes so far (a worker's, run there): the kernel's VmHWM, not
    getrusage's ru_maxrss, which a process inherits from the one that forked it (here the one
    that made the 2 GiB inputs) and keeps across exec."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def on_workers(source: Path, target: Path, workers: int) -> tuple[float, list[float]]:
    """(wall seconds, each worker's peak over its resident memory before, in chunks) of the chain
    joining a fresh LocalCluster of ``workers`` one-thread processes, started as ``--scheduler
    local:N`` starts one (their imports done first)."""
    from geomcli.engine import scheduler

    with scheduler.connect(f"local:{workers}") as (client, cluster):  # as --scheduler local:N starts it
        assert cluster is not None
        client.run(_imports)
        before: dict[str, Any] = client.run(_rss)
        wall = chain(source, target, ["--scheduler", cluster.scheduler_address])
        peaks: dict[str, Any] = client.run(_peak)
    return wall, [(peaks[worker] - before[worker]) / SIZES.chunk_bytes for worker in peaks]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=2.0, help="the array's size (default 2 GiB)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--work", type=Path, default=None, help="keep the inputs here for the next run")
    parser.add_argument("--side", type=int, default=2048, help="the planes' side (default 2048; chunks of half)")
    parser.add_argument("--codec", choices=["default", "none"], default="default",
                        help="the zarr's codecs: zarr's default (zstd), or none (like for like with the .npy)")
    parser.add_argument("--cold", action="store_true",
                        help="evict each run's input from the page cache first (cold against cold)")
    args = parser.parse_args(argv)

    global SIZES, COLD
    SIZES, COLD = Sizes(args.side), args.cold
    images = max(1, round(args.gib * 2**30 / (4 * CHANNELS * args.side**2)))
    work = args.work or Path(tempfile.mkdtemp(prefix="geomcli-bench-zarr-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        zarr_in, npy_in = make_inputs(work, images, compressed=args.codec == "default")
        size = images * CHANNELS * args.side**2 * 4 / 2**30
        print(f"({images}, {CHANNELS}, {args.side}, {args.side}) float32, {size:.2f} GiB, chunks {SIZES.chunk} "
              f"({SIZES.chunk_bytes / 2**20:g} MiB, codecs: {args.codec}): crop-pad {SIZES.crop},{SIZES.crop} + "
              f"space-to-depth {BLOCK}, {args.rounds} round(s), inputs {'cold' if COLD else 'warm'}")
        walls: dict[str, list[float]] = {name: [] for name in
                                         ("memory-mapped", "threads", "local:2", "1 worker", "2 workers")}
        memory: dict[str, list[float]] = {"1 worker": [], "2 workers": []}
        for round_ in range(args.rounds):
            walls["memory-mapped"].append(chain(npy_in, work / "out.npy", []))
            walls["threads"].append(chain(zarr_in, work / "out.zarr", []))
            walls["local:2"].append(chain(zarr_in, work / "out.zarr", ["--scheduler", "local:2"]))
            for workers in (1, 2):
                name = f"{workers} worker{'s' if workers > 1 else ''}"
                wall, chunks = on_workers(zarr_in, work / "out.zarr", workers)
                walls[name].append(wall)
                memory[name].extend(chunks)
            print(f"round {round_ + 1}: " + ", ".join(f"{name} {values[-1]:.2f} s" for name, values in walls.items()))
        floor = statistics.median(walls["memory-mapped"])
        print("| run | wall | GiB/s | against memory-mapped | peak per worker |")
        print("|---|---|---|---|---|")
        for name, values in walls.items():
            wall = statistics.median(values)
            peak = f"{max(memory[name]):.1f} chunks (target <= 4)" if name in memory else "-"
            print(f"| {name} | {wall:.2f} s | {size / wall:.2f} | {wall / floor:.2f}x | {peak} |")
        one, two = statistics.median(walls["1 worker"]), statistics.median(walls["2 workers"])
        print(f"scaling 1 -> 2 workers: {one / two:.2f}x faster (2 cores, the client and scheduler on them too); "
              f"local:2 against memory-mapped: {statistics.median(walls['local:2']) / floor:.2f}x (target <= 1.2)")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
