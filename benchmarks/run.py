"""Every benchmark of issue 5 in one run: start-up, one-shot crop-pad against ImageMagick and vips,
the one-shots against the plain scripts (benchmarks/oneshot.py), the kernels (benchmarks/kernels.py),
and peak memory on 4 GiB tensors.

Run from the repository root, with geomcli installed (its console script on PATH or beside
this Python)::

    python benchmarks/run.py            # the full run (a few minutes; needs ~10 GB of disk)
    python benchmarks/run.py --quick    # smaller files, fewer repeats: about a minute

Prints one table of geomcli's medians, what it is compared with, the ratio and the target, then
the kernel table. Commands are timed as whole processes (wall clock, median of the repeats; the
one-shot commands round-robin, so drift weighs on all alike);
peak memory is the child's ``ru_maxrss``, read by a small wrapper process around it. ImageMagick
and vips are used where installed; a row says so where they are missing. The big files go to a
temporary folder (``--tmp``, default beside this clone under /work or /tmp) and are deleted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, os.pardir))

GIB = 1 << 30
MIB = 1 << 20


@dataclass
class Row:
    section: str
    case: str
    geomcli: str  # the measured figure, with its unit
    against: str  # what it is compared with, and its figure
    ratio: float | None
    target: str
    met: bool | None


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def install_kind() -> str:
    """How geomcli is installed: an editable install pays ~10 ms of import hooks on every start."""
    import json
    from importlib import metadata

    try:
        direct = json.loads(metadata.distribution("geomcli").read_text("direct_url.json") or "{}")
    except metadata.PackageNotFoundError:
        return "geomcli not installed"
    editable = direct.get("dir_info", {}).get("editable", False)
    return "editable install (pip install -e)" if editable else "installed (pip install .)"


def geomcli_command() -> list[str]:
    beside = os.path.join(os.path.dirname(sys.executable), "geomcli")
    found = beside if os.path.exists(beside) else shutil.which("geomcli")
    if found is None:
        sys.exit("geomcli is not installed: pip install -e . first")
    return [found]


def _interleaved_medians(commands: dict[str, list[str]], repeats: int, cwd: str) -> dict[str, float]:
    """Median wall time of each command, run round-robin (after one warm-up each), so that a
    machine slowing down or speeding up meanwhile weighs on every command alike."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():
        subprocess.run(command, check=True, capture_output=True, cwd=cwd)
    for _ in range(repeats):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True, cwd=cwd)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


# --- start-up -------------------------------------------------------------------------


def start_up(repeats: int) -> list[Row]:
    medians = _interleaved_medians({"python": [sys.executable, "-c", "pass"],
                                    "click": [sys.executable, "-c", "import click"],
                                    "version": [*geomcli_command(), "--version"]}, repeats, os.getcwd())
    python, click, version = medians["python"], medians["click"], medians["version"]
    ratio = version / click
    return [
        Row("start-up", "python -c pass", _ms(python), "-", None, "", None),
        Row("start-up", "geomcli --version", _ms(version), f"import click {_ms(click)}", ratio, "<= 1.5x",
            ratio <= 1.5),
    ]


# --- one-shot crop-pad of a PNG --------------------------------------------------------


def photo(path: str) -> None:
    """A 1024×768 RGB PNG that compresses like a photo: smooth gradients and a little noise."""
    from PIL import Image

    rng = np.random.default_rng(42)
    y, x = np.mgrid[0:768, 0:1024].astype(np.float32)
    base = np.stack([x / 4, y / 3, (x + y) / 7 + 40 * np.sin(x / 50) * np.cos(y / 70)], axis=-1)
    pixels = np.clip(base + rng.normal(0, 4, base.shape), 0, 255).astype(np.uint8)
    Image.fromarray(pixels).save(path)


def _imagemagick() -> str | None:
    """A working ImageMagick ``convert``: the real binary, not a stand-in script, where there is one."""
    for candidate in ("/usr/bin/convert", shutil.which("convert")):
        if candidate is None or not os.path.exists(candidate):
            continue
        try:
            done = subprocess.run([candidate, "-version"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0 and "ImageMagick" in done.stdout:
            return candidate
    return None


def one_shot(folder: str, repeats: int) -> list[Row]:
    source = os.path.join(folder, "in.png")
    photo(source)
    case = "crop-pad 1024x768 PNG -> 512² PNG"
    commands = {"geomcli": [*geomcli_command(), "crop-pad", "in.png", "-o", "geomcli.png", "--shape", "512,512", "-q"]}
    convert = _imagemagick()
    if convert is not None:
        commands["convert -extent"] = [convert, "in.png", "-gravity", "center", "-background", "black", "-extent",
                                       "512x512", "convert.png"]
    # What any Python tool pays for the same job: the interpreter, click, Pillow's import, decode and encode
    for name, modules in (("script: python+click+Pillow", "click, PIL.Image"), ("script: python+Pillow", "PIL.Image")):
        commands[name] = [sys.executable, "-c", f"import {modules}; PIL.Image.open('in.png').crop((256, 128, 768, 640))"
                          ".save('script.png', compress_level=7)"]
    vips = shutil.which("vips")
    if vips is not None:
        commands["vips crop"] = [vips, "crop", "in.png", "vips_crop.png", "256", "128", "512", "512"]
        commands["vips gravity"] = [vips, "gravity", "in.png", "vips_gravity.png", "centre", "512", "512"]
    medians = _interleaved_medians(commands, repeats, folder)
    ours = medians.pop("geomcli")
    rows = []
    if convert is None:
        rows.append(Row("one-shot", case, _ms(ours), "ImageMagick: not installed", None, "<= 1.5x", None))
    for name, theirs in medians.items():
        target = "<= 1.5x" if name == "convert -extent" else ""
        met = ours / theirs <= 1.5 if target else None
        rows.append(Row("one-shot", case, _ms(ours), f"{name} {_ms(theirs)}", ours / theirs, target, met))
    if vips is None:
        rows.append(Row("one-shot", case, _ms(ours), "vips: not installed", None, "", None))
    return rows


# --- one-shots against the plain script (benchmarks/oneshot.py) -------------------------------


def plain_scripts(folder: str, repeats: int) -> list[Row]:
    import oneshot  # benchmarks/oneshot.py: its cases, inputs and rounds

    rows = []
    for result in oneshot.run(folder, repeats):
        ours, theirs = statistics.median(result.geomcli), statistics.median(result.plain)
        rows.append(Row("one-shot", result.case.name, _ms(ours), f"plain script {_ms(theirs)}", result.ratio,
                        f"<= {oneshot.TARGET}x", result.ratio <= oneshot.TARGET))
    return rows


# --- peak memory on big tensors ---------------------------------------------------------

_WRAPPER = """
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:]).returncode
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, code)
"""


def peak(command: Sequence[str], cwd: str) -> tuple[float, int]:
    """(seconds, peak RSS in bytes) of one run of ``command``, measured by a fresh wrapper process."""
    done = subprocess.run([sys.executable, "-c", _WRAPPER, *command], capture_output=True, text=True, cwd=cwd,
                          check=True)
    seconds, rss, code = done.stdout.split()
    if code != "0":
        raise SystemExit(f"{' '.join(command)} failed ({code}): {done.stderr}")
    return float(seconds), int(rss)


def _big_npy(path: str, shape: tuple[int, ...]) -> None:
    """A float32 .npy of real (non-zero, non-sparse) data, written a slab at a time."""
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape)
    rows = out.reshape(-1, shape[-1])
    step = max(1, (64 * MIB) // (shape[-1] * 4))
    ramp = np.arange(shape[-1], dtype=np.float32)
    for start in range(0, rows.shape[0], step):
        stop = min(start + step, rows.shape[0])
        rows[start:stop] = ramp + np.arange(start, stop, dtype=np.float32)[:, None]
    out.flush()
    del out, rows


def memory(folder: str, size: int) -> list[Row]:
    """crop-pad to half on two axes and space-to-depth of a ``size``-byte float32 .npy."""
    side = 8192 if size >= 4 * GIB else 4096
    channels = size // (side * side * 4)
    geomcli = geomcli_command()
    rows = []
    source = os.path.join(folder, "big.npy")
    _big_npy(source, (channels, side, side))
    seconds, rss = peak([*geomcli, "crop-pad", "big.npy", "-o", "crop.npy", "--shape",
                         f"{channels},{side // 2},{side // 2}", "-q"], folder)
    output = os.path.getsize(os.path.join(folder, "crop.npy"))
    limit = output + 150 * MIB
    rows.append(Row("memory", f"crop-pad {size / GIB:g} GiB f32 .npy -> half on H, W ({output / GIB:.2g} GiB)",
                    f"{rss / MIB:.0f} MiB peak, {seconds:.1f} s", f"output + 150 MiB = {limit / MIB:.0f} MiB",
                    rss / limit, f"< {limit / MIB:.0f} MiB", rss < limit))
    os.remove(os.path.join(folder, "crop.npy"))
    os.remove(source)
    source = os.path.join(folder, "nchw.npy")
    _big_npy(source, (channels // 4 or 1, 4, side, side))
    seconds, rss = peak([*geomcli, "space-to-depth", "nchw.npy", "-o", "s2d.npy", "--blocksize", "2", "-q"], folder)
    limit = 600 * MIB
    rows.append(Row("memory", f"space-to-depth {size / GIB:g} GiB f32 .npy, b=2",
                    f"{rss / MIB:.0f} MiB peak, {seconds:.1f} s", "600 MiB", rss / limit, "< 600 MiB", rss < limit))
    os.remove(os.path.join(folder, "s2d.npy"))
    os.remove(source)
    return rows


# --- the table ------------------------------------------------------------------------------


def render(rows: Sequence[Row]) -> str:
    header = ["section", "case", "geomcli", "against", "ratio", "target", "met"]
    cells = [header] + [
        [r.section, r.case, r.geomcli, r.against, "-" if r.ratio is None else f"{r.ratio:.2f}", r.target or "-",
         {True: "yes", False: "NO", None: "-"}[r.met]]
        for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for i, row in enumerate(cells):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller files, fewer repeats: about a minute")
    parser.add_argument("--tmp", default=None, metavar="DIR", help="where the big files go (deleted after)")
    args = parser.parse_args(argv)
    import kernels as kernel_bench  # benchmarks/kernels.py: its cases, timing and table

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    repeats = 5 if args.quick else 21
    size = 512 * MIB if args.quick else 4 * GIB
    rows: list[Row] = []
    parent = args.tmp or ("/work" if os.access("/work", os.W_OK) else None)
    with tempfile.TemporaryDirectory(prefix="geomcli-bench-", dir=parent) as folder:
        free = shutil.disk_usage(folder).free
        if free < 2.5 * size + GIB:
            sys.exit(f"{folder}: {free / GIB:.1f} GiB free, the memory benchmark needs {(2.5 * size + GIB) / GIB:.1f}")
        log("start-up")
        rows += start_up(repeats)
        log("one-shot crop-pad")
        rows += one_shot(folder, repeats)
        log("one-shots against the plain scripts")
        rows += plain_scripts(folder, repeats)
        log(f"memory ({size / GIB:g} GiB tensors)")
        rows += memory(folder, size)

    # the kernel table: one case per operator when quick, all of issue 2's otherwise
    if args.quick:
        cases = [kernel_bench.CASES[i] for i in (0, 3, 7)]
        kernel_repeats, budget = 3, 0.5
    else:
        cases, kernel_repeats, budget = kernel_bench.CASES, 11, 4.0
    results = []
    for case in cases:
        log(case.name)
        results.append(kernel_bench.run_case(case, kernel_repeats, budget, log))

    print(f"# {kernel_bench.environment()}; geomcli {install_kind()}")
    print(f"# {'--quick' if args.quick else 'full run'}: medians of {repeats} runs of each command (after a warm-up); "
          "ratio = geomcli / the other (memory: peak / limit)")
    print(render(rows))
    print()
    print("# kernels: medians in ms, (1st) = first call; fresh = the floor into a new array; out= = geomcli into a"
          " preallocated output; x/fl = median / memory floor; ort/geo, ref/geo > 1: geomcli faster")
    print(kernel_bench.render(results))
    met = sum(r.met is True for r in rows) + sum(r.target_met for r in results)
    total = sum(r.met is not None for r in rows) + len(results)
    print(f"# targets met: {met}/{total}; took {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
