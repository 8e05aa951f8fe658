"""Memory, not time: what resize, warp and grid-sample hold a worker on a zarr of whole-plane tasks.

    python benchmarks/zarr_planes.py                      # one 8192x8192 float32 plane, 16 chunks of 16 MiB
    python benchmarks/zarr_planes.py --side 2048 --chunk 512
    python benchmarks/zarr_planes.py --images 16          # a stack: 16 planes, one a chunk

Each operation runs from the shell on the threads (no --scheduler) and on a LocalCluster of two
one-thread workers started as ``--scheduler local:2`` starts one; the figure is peak resident
memory over idle in the input's chunks: the whole process on threads (its client's share too),
each worker on local:2 (benchmarks/zarr_chunked.py's measure). Such a task holds whole planes:
2P as it gathers a plane of P chunks, then P + Q (Q output chunks); see geomcli.engine.chunked.
Memory is fine to measure on a busy machine; the threads' figure varies by about 10 a run.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_RUN_HERE = "--measure-here"  # the threads' run: geomcli in this process, its peak printed


def _rss() -> int:
    """This process's resident bytes now (a worker's, run there)."""
    import resource

    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def _peak() -> int:
    """This process's peak resident bytes so far (the kernel's VmHWM; see zarr_chunked._peak)."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def _imports() -> None:
    """What the tasks import, so that the memory before the run counts it."""
    import importlib

    for name in ("numpy", "zarr", "dask.array", "geomcli.ops.resize", "geomcli.ops.grid_sample",
                 "geomcli.engine.chunked", "geomcli.engine.zarr_file", "geomcli.engine.operations"):
        importlib.import_module(name)


def make_inputs(work: Path, images: int, side: int, chunk: int) -> tuple[Path, Path]:
    """A random float32 zarr, (side, side) or (images, 1, side, side), and a grid of a 10° turn."""
    import numpy as np
    import zarr

    shape, chunks = ((side, side), (chunk, chunk)) if images == 1 else ((images, 1, side, side), (1, 1, chunk, chunk))
    path, grid = work / "in.zarr", work / "grid.npy"
    array = zarr.create_array(str(path), shape=shape, dtype="float32", chunks=chunks, overwrite=True)
    rng = np.random.default_rng(0)
    for start in range(0, shape[0], chunks[0]):
        array[start:start + chunks[0]] = rng.standard_normal((min(chunks[0], shape[0] - start), *shape[1:]),
                                                             dtype=np.float32)
    subprocess.run([sys.executable, "-m", "geomcli", "affine-grid", "--rotate", "10", "-q", "--size",
                    f"{images},1,{side},{side}", "-o", str(grid)], check=True)
    return path, grid


def on_threads(args: list[str]) -> list[float]:
    """The peak over idle, in bytes, of a run without --scheduler (this script, in a new process)."""
    done = subprocess.run([sys.executable, __file__, _RUN_HERE, *args], check=True, capture_output=True, text=True)
    return [float(done.stdout.split()[-1])]


def on_local(args: list[str]) -> list[float]:
    """Each worker's peak over idle, in bytes, of the run on a fresh ``local:2`` cluster."""
    from geomcli.engine import scheduler

    with scheduler.connect("local:2") as (client, cluster):
        assert cluster is not None
        client.run(_imports)
        before: dict[str, Any] = client.run(_rss)
        subprocess.run([sys.executable, "-m", "geomcli", *args, "--scheduler", cluster.scheduler_address],
                       check=True)
        peaks: dict[str, Any] = client.run(_peak)
    return sorted((peaks[worker] - before[worker] for worker in peaks), reverse=True)


def main(argv: list[str]) -> int:
    if argv[:1] == [_RUN_HERE]:
        from geomcli.cli.group import main as geomcli

        _imports()
        before = _rss()
        try:
            geomcli(argv[1:])
        except SystemExit as stop:
            if stop.code:
                raise
        print(_peak() - before)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=8192, help="the planes' side (default 8192)")
    parser.add_argument("--chunk", type=int, default=2048, help="the chunks' side (default 2048: 16 MiB)")
    parser.add_argument("--images", type=int, default=1, help="planes, one a chunk along N (default 1)")
    parser.add_argument("--work", type=Path, default=None, help="where the inputs go (default a temporary folder)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="geomcli-bench-planes-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        source, grid = make_inputs(work, args.images, args.side, args.chunk)
        out, layout = work / "out.zarr", [] if args.images == 1 else ["--layout", "NCHW"]
        chunk_bytes = 4 * args.chunk**2
        print(f"{'' if args.images == 1 else f'{args.images} x '}{args.side}x{args.side} float32 in chunks of "
              f"{args.chunk}x{args.chunk} ({chunk_bytes / 2**20:g} MiB): peak over idle, in chunks")
        print("| operation | threads (the process) | local:2 (each worker) |")
        print("|---|---|---|")
        for name, flags in (("resize --scales 0.5,0.5", ["resize", "--scales", "0.5,0.5", "--mode", "linear"]),
                            ("resize --scales 2,2", ["resize", "--scales", "2,2", "--mode", "linear"]),
                            ("warp --rotate 10", ["warp", "--rotate", "10"]),
                            ("grid-sample (a 10° turn)", ["grid-sample", "--grid", str(grid)])):
            command = [flags[0], str(source), "-o", str(out), "-q", *layout, *flags[1:]]
            figures = []
            for how in (on_threads, on_local):
                shutil.rmtree(out, ignore_errors=True)
                figures.append(" and ".join(f"{peak / chunk_bytes:.1f}" for peak in how(command)))
            print(f"| {name} | {figures[0]} | {figures[1]} |", flush=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
