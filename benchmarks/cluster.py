"""A batch on Dask against -j: --scheduler local:2 and -j 2 on the same PNGs, and what a task costs.

    python benchmarks/cluster.py                  # 200 RGB 1024x768 PNGs -> centre 512x512, 3 rounds
    python benchmarks/cluster.py --count 40 --rounds 1
    python benchmarks/cluster.py --work DIR       # keep the generated inputs in DIR for the next run

Prints, per round (they alternate, so a busy machine slows all alike), the wall time and
images/s of ``-j 2``, ``--scheduler local:2`` (which starts its cluster) and ``--scheduler
tcp://...`` joining a LocalCluster of 2 started before its run (and closed after it), from the
shell, and the ratios of the medians (target: local:2 at least 0.9x -j 2). Then, on a
LocalCluster of the same 2 workers, in this process:

- the **task rate**: empty tasks through the run's own dispatch pattern (as_completed, a new one
  per one done): 4 in flight on the 2 workers (each waits a round trip for its next task), and
  512 in flight on 16 worker threads with tasks queued on them (what the client and the scheduler
  sustain, as 256 workers would ask of them), tasks per second;
- the **per-task overhead**: the seconds of a worker thread a task of real files costs beside
  its files' work, ``(threads x span - work) / tasks``, from the files' own timings;
- the **client's plan** per input (listing, names, every input's header checked), all before
  the first file goes out;
- and from these, with the per-image work measured, a projection of 1.28 M images (ImageNet's
  training set) on 16, 64 and 256 workers, its assumptions printed with it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch import CROP, HEIGHT, WIDTH, make_inputs  # noqa: E402

IMAGENET = 1_281_167


def batch_run(inputs: Path, out: Path, how: list[str]) -> tuple[float, list[float]]:
    """(wall seconds of the whole command, each file's seconds of work from its JSON record)."""
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "geomcli", "crop-pad", str(inputs), "--out-dir", str(out),
                           "--shape", f"{CROP},{CROP}", "--json", *how], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    records = [json.loads(line) for line in done.stdout.splitlines()]
    return wall, [record["seconds"] for record in records if "input" in record]


def _nothing() -> list[Any]:
    return []


def task_rate(client: Any, count: int, window: int) -> float:
    """Empty tasks per second through the dispatch's pattern, ``window`` in flight (the dispatch
    keeps 2 per worker thread: 4 here, 512 on 256 workers)."""
    from distributed import as_completed

    completed = as_completed(loop=client.loop)
    submitted = 0
    started = time.perf_counter()
    while submitted < min(count, window):
        completed.add(client.submit(_nothing, pure=False))
        submitted += 1
    done = 0
    for _ in completed:
        done += 1
        if submitted < count:
            completed.add(client.submit(_nothing, pure=False))
            submitted += 1
    return done / (time.perf_counter() - started)


def scheduler_rate(count: int) -> float:
    """Empty tasks per second that the client and the scheduler sustain: 512 in flight on 2
    workers of 8 threads each, tasks queued on the workers (no round trip waited for)."""
    import logging

    import dask
    import distributed

    with dask.config.set({"distributed.scheduler.worker-saturation": float("inf")}):
        local = distributed.LocalCluster(n_workers=2, threads_per_worker=8, processes=True, dashboard_address=None,
                                         silence_logs=logging.CRITICAL,
                                         scheduler_kwargs={"dashboard": False, "dashboard_address": ":0"})
    try:
        with distributed.Client(local, set_as_default=False) as client:
            task_rate(client, 200, 512)  # warm-up
            return task_rate(client, count, 512)
    finally:
        local.close()


def task_overhead(client: Any, inputs: list[Path], out: Path, files_per_task: int) -> tuple[float, float, int]:
    """(seconds of a worker thread each task costs beside its files, seconds of work per file,
    tasks) for ``inputs`` in tasks of ``files_per_task`` files, as the dispatch sends them."""
    from distributed import as_completed

    from geomcli.engine import cluster, operations, plan
    from geomcli.engine.options import Common

    task = plan.Task(operations.CropPad((CROP, CROP)), Common(quiet=True, threads=1))
    jobs = [plan.Job(index, str(path), str(out / path.name), "png") for index, path in enumerate(inputs)]
    batches = [jobs[start:start + files_per_task] for start in range(0, len(jobs), files_per_task)]
    threads = sum(client.nthreads().values())
    client.gather(client.submit(cluster.do_files, task, batches[0][:1], None, pure=False))  # imports, once
    completed = as_completed(loop=client.loop, with_results=True)
    queue = list(batches)
    started = time.perf_counter()
    for _ in range(min(len(queue), 2 * threads)):
        completed.add(client.submit(cluster.do_files, task, queue.pop(0), None, pure=False))
    work = 0.0
    for _, (done, _) in completed:
        work += sum(report.seconds for report, _ in done)
        if queue:
            completed.add(client.submit(cluster.do_files, task, queue.pop(0), None, pure=False))
    span = time.perf_counter() - started
    return (threads * span - work) / len(batches), work / len(jobs), len(batches)


def planning(inputs: Path, rounds: int = 3) -> tuple[float, float]:
    """Seconds per input of what comes before any file goes out: the client's plan (the listing
    and the names, plan.plan), and every input's header checked (plan.option_faults), timed here
    in one process; past cluster.HEADERS_HERE inputs the workers check the headers, in tasks."""
    from geomcli.engine import operations, plan
    from geomcli.engine.options import BatchOptions, Common

    common = Common(quiet=True)
    options = BatchOptions(out_dir=str(inputs.parent / "planned"))
    task = plan.Task(operations.CropPad((CROP, CROP)), common)
    planned, checked = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        jobs = plan.plan([str(inputs)], options, common)
        planned.append((time.perf_counter() - started) / len(jobs))
        started = time.perf_counter()
        plan.option_faults(task, plan.to_do(jobs, options))
        checked.append((time.perf_counter() - started) / len(jobs))
    return statistics.median(planned), statistics.median(checked)


def projection(per_image: float, overhead: float, rate: float, start_up: float, plan_per_input: float,
               header_per_input: float) -> list[str]:
    """Hours for ImageNet's 1.28 M images on 16, 64 and 256 workers of one thread each, in tasks
    of the length the dispatch gives that many (cluster.task_seconds), after the client's plan and
    the headers checked by the workers (in tasks of cluster.HEADER_TASK_FILES)."""
    from geomcli.engine import cluster

    planned = IMAGENET * plan_per_input
    lines = [f"assumed: {per_image * 1000:.0f} ms of work per image on each worker and {overhead * 1000:.1f} ms "
             f"of a worker per task beside its work (both as measured here), at most {rate:.0f} tasks/s through "
             "the client and scheduler (as measured here), inputs and outputs as fast as here (object storage "
             f"must give each worker {1 / per_image:.0f} images/s), {start_up:.0f} s to start, the client's "
             f"plan first: {plan_per_input * 1000:.2f} ms an input as measured here on local files (listing, "
             f"names), {planned / 60:.1f} min for ImageNet, then every header checked by the workers at "
             f"{header_per_input * 1000:.2f} ms an input"]
    for workers in (16, 64, 256):
        header_tasks = -(-IMAGENET // cluster.HEADER_TASK_FILES)
        headers = max(header_tasks * (cluster.HEADER_TASK_FILES * header_per_input + overhead) / workers,
                      header_tasks / rate)
        images_per_task = max(1, round(cluster.task_seconds(workers) / per_image))
        tasks = -(-IMAGENET // images_per_task)
        compute = tasks * (images_per_task * per_image + overhead) / workers
        scheduling = tasks / rate  # the client and the scheduler hand out tasks one after another
        seconds = max(compute, scheduling) + start_up + planned + headers
        bound = "the workers" if compute >= scheduling else "the scheduler"
        lines.append(f"{workers:>4} workers: {seconds / 3600:6.2f} h ({IMAGENET / seconds:7.0f} images/s), tasks of "
                     f"{images_per_task} images, {tasks / seconds:.0f} of {rate:.0f} tasks/s used; bound by {bound}; "
                     f"headers {headers:.0f} s")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="how many input PNGs (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the two (default 3)")
    parser.add_argument("--tasks", type=int, default=2000, help="empty tasks for the task rate (default 2000)")
    parser.add_argument("--work", type=Path, default=None, help="keep inputs and outputs here")
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="geomcli-bench-cluster-"))
    try:
        inputs = make_inputs(work / "in", args.count)
        n = len(inputs)
        print(f"{n} RGB {WIDTH}x{HEIGHT} PNGs -> centre {CROP}x{CROP} PNG, 2 workers, {args.rounds} round(s)")
        from geomcli.engine import scheduler

        walls: dict[str, list[float]] = {"-j 2": [], "--scheduler local:2": [], "--scheduler tcp://": []}
        per_file: list[float] = []
        start_up = 0.0
        for round_ in range(args.rounds):
            for name in walls:
                # the cluster the third joins is up for its run only: its idle scheduler and
                # workers would take CPU from the other two runs
                with contextlib.ExitStack() as joined_cluster:
                    how: list[str] = name.split()
                    if "tcp" in name:
                        started = time.perf_counter()
                        running, _ = joined_cluster.enter_context(scheduler.connect("local:2"))
                        start_up = start_up or time.perf_counter() - started  # Dask's imports too, the first time
                        how = ["--scheduler", str(running.scheduler_info()["address"])]
                    wall, seconds = batch_run(work / "in", work / "out", how)
                walls[name].append(wall)
                per_file.extend(seconds)
                print(f"round {round_ + 1}: {name:<21} {wall:6.2f} s {n / wall:6.1f} images/s "
                      f"({statistics.mean(seconds) * 1000:.0f} ms of work per file)")
        j2, dask, joined = (statistics.median(walls[name]) for name in walls)
        print(f"median: -j 2 {n / j2:.1f} images/s, --scheduler local:2 {n / dask:.1f} images/s: "
              f"{j2 / dask:.2f}x  (target >= 0.9); joining a cluster already up: {n / joined:.1f} "
              f"images/s, {j2 / joined:.2f}x")

        with scheduler.connect("local:2") as (client, _):
            print(f"LocalCluster of 2 started in {start_up:.2f} s (Dask imported, cluster up)")
            turnover = task_rate(client, args.tasks, 4)
            print(f"task turnover: {turnover:.0f} empty tasks/s with 4 in flight on 2 one-thread workers (each "
                  "waits for its next task: a round trip per task)")
            results = []
            for files in (1, 8):
                overhead, per_image, tasks = task_overhead(client, inputs, work / f"tasks-{files}", files)
                results.append((files, overhead, per_image))
                print(f"tasks of {files} file(s): {tasks} tasks, {overhead * 1000:.1f} ms of a worker per task "
                      f"beside its files' work ({per_image * 1000:.0f} ms per file)")
        rate = scheduler_rate(args.tasks)
        print(f"scheduler's task rate: {rate:.0f} empty tasks/s with 512 in flight on 16 worker threads "
              "(tasks queued on the workers: what the client and the scheduler sustain)")
        overhead = results[0][1]  # one file a task: the most tasks, the steadiest figure
        per_image = statistics.median(per_file)
        plan_per_input, header_per_input = planning(work / "in")
        print(f"the client's plan: {plan_per_input * 1000:.2f} ms an input (listing, names); each header checked: "
              f"{header_per_input * 1000:.2f} ms an input")
        print("projection for ImageNet (1.28 M images):")
        for line in projection(per_image, max(overhead, 0.0), rate, start_up, plan_per_input, header_per_input):
            print("  " + line)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
