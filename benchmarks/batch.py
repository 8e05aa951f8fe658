"""Batch speed: geomcli crop-pad over a folder against ImageMagick's mogrify, on the same PNGs.

    python benchmarks/batch.py                 # 200 RGB 1024x768 PNGs -> centre 512x512 PNGs
    python benchmarks/batch.py --count 40      # a quicker look
    python benchmarks/batch.py --work DIR      # keep the generated inputs in DIR for the next run

One run prints, for both tools, images per second and the total size of the PNGs written, the
ratios geomcli / mogrify, and geomcli's per-file overhead in a batch: its wall time less the time
its own decode, crop and encode take on the same files in one process, per file.

Both write PNG with zlib level 7, ImageMagick's default (PNG quality 75: level 7, adaptive row
filters). mogrify runs with MAGICK_THREAD_LIMIT=1 (one core), as the issue's anchor was measured;
geomcli runs with -j 2. Where ImageMagick is not installed, its half is skipped with a note.
"""

from __future__ import annotations

import argparse
import io as bytes_io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

WIDTH, HEIGHT, CROP = 1024, 768, 512


def make_inputs(folder: Path, count: int) -> list[Path]:
    """``count`` RGB gradients with sensor-like noise, seeded: the same files on every machine."""
    folder.mkdir(parents=True, exist_ok=True)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    paths = []
    for index in range(count):
        path = folder / f"shot{index:04d}.png"
        paths.append(path)
        if path.exists():
            continue
        rng = np.random.default_rng(index)
        angle = rng.uniform(0, 2 * np.pi)
        ramp = (np.cos(angle) * x / WIDTH + np.sin(angle) * y / HEIGHT + 1) / 2
        colour = rng.uniform(40, 215, 3).astype(np.float32)
        image = ramp[..., None] * colour + (1 - ramp[..., None]) * colour[::-1]
        image += rng.normal(0, 4, image.shape).astype(np.float32)
        Image.fromarray(np.clip(np.rint(image), 0, 255).astype(np.uint8)).save(path, compress_level=6)
    return paths


def imagemagick() -> str | None:
    """mogrify's path if it is ImageMagick (a stand-in script may answer to the name)."""
    mogrify = shutil.which("mogrify")
    if mogrify is None:
        return None
    try:
        version = subprocess.run([mogrify, "-version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return mogrify if "ImageMagick" in version else None


def timed(command: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def total_size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.glob("*.png"))


def _pillow_one(job: tuple[Path, Path]) -> None:
    source, target = job
    with Image.open(source) as image:
        left, top = (image.width - CROP) // 2, (image.height - CROP) // 2
        image.crop((left, top, left + CROP, top + CROP)).save(target, compress_level=7)


def bare_pillow_pool(paths: list[Path], out: Path, processes: int) -> float:
    """The floor for a Python tool: a bare Pillow pool, no checks, no reports, no atomic writes."""
    import multiprocessing

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        pool.map(_pillow_one, [(path, out / path.name) for path in paths], chunksize=4)
    return time.perf_counter() - started


def overhead_per_file(paths: list[Path], out: Path) -> tuple[float, float]:
    """(decode + crop + encode, everything else a batch does per file), in seconds per file.

    Both are timed here, file by file, alternately, so a busy machine slows both alike: first
    the bare work through geomcli's own functions (the PNG read as a Pillow image, cropped by
    Pillow, encoded to memory), then the same file through the batch's per-file path (folder
    check, read with its chunk checks and metadata, size check, atomic write with fsync, report
    with value range).
    """

    from geomcli import io
    from geomcli.engine import jobs, operations, plan
    from geomcli.engine.options import Common
    from geomcli.io import _pillow  # the encoder write_array uses, here to memory

    common = Common(quiet=True)
    target = (CROP, CROP)
    crop = operations.CropPad(target)
    task = plan.Task(crop, common)
    out.mkdir(parents=True, exist_ok=True)
    jobs.transform(task, plan.Job(0, str(paths[0]), str(out / "warm-up.png"), "png"))  # imports, once
    bare = whole = 0.0
    for index, path in enumerate(paths):
        # alternate which goes first, so neither always meets the file cold in the page cache
        for which in ("bare", "whole") if index % 2 else ("whole", "bare"):
            started = time.perf_counter()
            if which == "bare":
                picture = io.read_picture(str(path))  # a plain RGB PNG: cropped by Pillow, as in the batch
                assert isinstance(picture, io.Picture)
                _pillow.save(crop.apply_picture(picture, common).image, bytes_io.BytesIO(), "png")
                bare += time.perf_counter() - started
            else:
                report = jobs.transform(task, plan.Job(index, str(path), str(out / path.name), "png"))
                whole += time.perf_counter() - started
                assert report.status == "ok", report.error
    return bare / len(paths), (whole - bare) / len(paths)


def start_up_seconds(path: Path, out: Path) -> float:
    """A batch of one small file: interpreter, imports, planning, one job."""
    return timed([sys.executable, "-m", "geomcli", "crop-pad", str(path), "--out-dir", str(out),
                  "--shape", "8,8", "-q"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="how many input PNGs (default 200)")
    parser.add_argument("--jobs", type=int, default=2, help="geomcli -j (default 2)")
    parser.add_argument("--work", type=Path, default=None, help="keep inputs and outputs here")
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="geomcli-bench-"))
    try:
        inputs = make_inputs(work / "in", args.count)
        n = len(inputs)
        print(f"{n} RGB {WIDTH}x{HEIGHT} PNGs -> centre {CROP}x{CROP} PNG, {os.cpu_count()} CPUs")

        geomcli = [sys.executable, "-m", "geomcli", "crop-pad", str(work / "in"), "--shape", f"{CROP},{CROP}", "-q"]
        results: dict[str, tuple[float, int]] = {}
        for jobs in sorted({1, args.jobs}):
            out = work / f"geomcli-j{jobs}"
            shutil.rmtree(out, ignore_errors=True)
            seconds = timed([*geomcli, "--out-dir", str(out), "-j", str(jobs)])
            results[f"geomcli -j {jobs}"] = (seconds, total_size(out))

        out = work / "pillow-pool"
        shutil.rmtree(out, ignore_errors=True)
        results[f"bare Pillow pool {args.jobs}"] = (bare_pillow_pool(inputs, out, args.jobs), total_size(out))

        mogrify = imagemagick()
        if mogrify is None:
            print("note: ImageMagick's mogrify is not installed; its half is skipped (apt-get install imagemagick)")
        else:
            out = work / "mogrify"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            seconds = timed([mogrify, "-path", str(out), "-gravity", "center", "-background", "black",
                             "-extent", f"{CROP}x{CROP}", *map(str, inputs)], env={"MAGICK_THREAD_LIMIT": "1"})
            results["mogrify (1 thread)"] = (seconds, total_size(out))
            with Image.open(out / inputs[0].name) as theirs, Image.open(work / "geomcli-j1" / inputs[0].name) as ours:
                same = np.array_equal(np.asarray(theirs), np.asarray(ours))
            print(f"same pixels in {inputs[0].name}: {same}")

        for name, (seconds, size) in results.items():
            print(f"{name:<20} {seconds:7.2f} s  {n / seconds:7.2f} images/s  {size / 2**20:8.2f} MiB")
        ours_name = f"geomcli -j {args.jobs}"
        if "mogrify (1 thread)" in results:
            theirs_s, theirs_size = results["mogrify (1 thread)"]
            ours_s, ours_size = results[ours_name]
            print(f"speed ratio {ours_name} / mogrify: {theirs_s / ours_s:.2f}x  (target >= 1.9)")
            print(f"size ratio  {ours_name} / mogrify: {ours_size / theirs_size:.3f}  (target <= 1.10)")
            pool_s = results[f"bare Pillow pool {args.jobs}"][0]
            print(f"for reference, bare Pillow pool / mogrify: {theirs_s / pool_s:.2f}x")

        bare, extra = overhead_per_file(inputs, work / "in-process")
        small = work / "small.png"
        Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(small)
        start_up = start_up_seconds(small, work / "start-up")
        print(f"decode+crop+encode: {bare * 1000:.1f} ms/file; the batch's per-file path adds "
              f"{extra * 1000:.2f} ms/file; start-up {start_up * 1000:.0f} ms once = "
              f"{start_up / n * 1000:.2f} ms/file over {n} files")
        print(f"per-file overhead: {(extra + start_up / n) * 1000:.2f} ms  (target < 5)")
        one_s = results["geomcli -j 1"][0]
        print(f"(from wall times, noisier: -j 1 {one_s / n * 1000:.1f} ms/file against {bare * 1000:.1f} ms of work)")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
