"""One-shots against the plain script a user would otherwise write (issue 18, section 3).

    python benchmarks/oneshot.py                 # 21 rounds (after one warm-up round)
    python benchmarks/oneshot.py --repeats 5     # a quicker look
    python benchmarks/oneshot.py --module        # python -m geomcli instead of the console script

Each row is one geomcli command and the few lines of numpy, tifffile or Pillow doing the same
job, run as ``python -c`` by the same interpreter (so the same site-packages). Every command is
a fresh process; a round runs each command once, rows and their two sides in turn, so a machine
that slows down or speeds up meanwhile weighs on both sides of a row alike. The table gives each
side's median wall time, the ratio of the medians, and the quartiles of the per-round ratios
(geomcli's run over the plain script's run in the same round): how noisy the row was. The load
average before and after is printed with it. Each row checks once that both sides wrote the
same values.

geomcli is its console script beside this Python (or on PATH) as ``pip install .`` makes it: an
editable install adds its import hooks to every start, and ``python -m geomcli`` is what a clone
without an install can time (``--module``).
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
import run as suite  # benchmarks/run.py, beside this file: its photo-like PNG

TARGET = 1.5  # geomcli / the plain script, issue 18 section 3


@dataclass(frozen=True)
class Case:
    name: str
    geomcli: list[str]  # arguments after the geomcli command
    plain: str  # the user's script, for python -c
    outputs: tuple[str, str]  # geomcli's and the script's output files, compared once


def make_inputs(folder: str) -> None:
    import tifffile

    rng = np.random.default_rng(18)
    np.save(os.path.join(folder, "x.npy"), rng.random((256, 1024), dtype=np.float32))  # 1 MiB
    # 16 channels: tifffile writes 3 or 4 planes as one RGB(A) picture, which geomcli reads as HWC
    tifffile.imwrite(os.path.join(folder, "x.tiff"), rng.random((1, 16, 128, 128), dtype=np.float32))  # 1 MiB NCHW
    suite.photo(os.path.join(folder, "in.png"))


CASES = [
    Case("crop-pad 1 MiB f32 .npy (256,1024) -> (128,512)",
         ["crop-pad", "x.npy", "-o", "g.npy", "--shape", "128,512", "-q"],
         "import numpy as np; a = np.load('x.npy'); np.save('p.npy', a[64:192, 256:768])",
         ("g.npy", "p.npy")),
    Case("space-to-depth 1 MiB f32 .tiff (1,16,128²) b=2",
         ["space-to-depth", "x.tiff", "-o", "g.tiff", "--blocksize", "2", "-q"],
         "import tifffile; a = tifffile.imread('x.tiff'); n, c, h, w = a.shape; "
         "tifffile.imwrite('p.tiff', a.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 3, 5, 1, 2, 4)"
         ".reshape(n, c * 4, h // 2, w // 2))",
         ("g.tiff", "p.tiff")),
    Case("affine-grid --like 1024x768 PNG --rotate 30 -> .npy",
         ["affine-grid", "--like", "in.png", "--rotate", "30", "-o", "g_grid.npy", "-q"],
         "import numpy as np; from PIL import Image; w, h = Image.open('in.png').size; "
         "c, s = np.cos(np.radians(30)), np.sin(np.radians(30)); "
         "x, y = np.meshgrid((2 * np.arange(w) + 1) / w - 1, (2 * np.arange(h) + 1) / h - 1); "
         "np.save('p_grid.npy', np.stack([c * x - s * y, s * x + c * y], -1)[None].astype(np.float32))",
         ("g_grid.npy", "p_grid.npy")),
    Case("crop-pad 1024x768 PNG -> 512² PNG",
         ["crop-pad", "in.png", "-o", "g.png", "--shape", "512,512", "-q"],
         "from PIL import Image; Image.open('in.png').crop((256, 128, 768, 640)).save('p.png')",
         ("g.png", "p.png")),
]


def geomcli_command(module: bool) -> list[str]:
    if module:
        return [sys.executable, "-m", "geomcli"]
    beside = os.path.join(os.path.dirname(sys.executable), "geomcli")
    found = beside if os.path.exists(beside) else shutil.which("geomcli")
    if found is None:
        sys.exit("geomcli is not installed beside this Python or on PATH: pip install . (or --module)")
    return [found]


def _load(path: str) -> np.ndarray:
    if path.endswith(".npy"):
        return np.asarray(np.load(path))
    if path.endswith(".tiff"):
        import tifffile

        return np.asarray(tifffile.imread(path))
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image)


def check(case: Case, folder: str) -> str:
    ours, theirs = (_load(os.path.join(folder, name)) for name in case.outputs)
    if ours.shape != theirs.shape or ours.dtype != theirs.dtype:
        return f"DIFFERENT: {ours.shape} {ours.dtype} against {theirs.shape} {theirs.dtype}"
    if np.array_equal(ours, theirs):
        return "same values"
    # the grid: geomcli sums in float64 and rounds once, the script rounds its float64 products
    difference = float(np.abs(ours.astype(np.float64) - theirs).max())
    return f"max |diff| {difference:.1g}" if difference < 1e-6 else f"DIFFERENT: max |diff| {difference:.3g}"


@dataclass
class Result:
    case: Case
    geomcli: list[float]
    plain: list[float]
    check: str

    @property
    def ratio(self) -> float:
        return statistics.median(self.geomcli) / statistics.median(self.plain)

    def paired(self) -> tuple[float, float]:
        """The quartiles of the per-round ratios."""
        ratios = sorted(ours / theirs for ours, theirs in zip(self.geomcli, self.plain))
        if len(ratios) < 4:
            return ratios[0], ratios[-1]
        quartiles = statistics.quantiles(ratios, n=4)
        return quartiles[0], quartiles[2]


def _timed(command: Sequence[str], folder: str) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=folder)
    return time.perf_counter() - start


def run(folder: str, repeats: int, warm_up: int = 1, module: bool = False,
        cases: Sequence[Case] = CASES) -> list[Result]:
    """Time every case in ``folder`` (inputs made there): ``warm_up`` untimed rounds, then
    ``repeats`` rounds of every command, alternating which side of a row goes first."""
    make_inputs(folder)
    geomcli = geomcli_command(module)
    commands = [([*geomcli, *case.geomcli], [sys.executable, "-c", case.plain]) for case in cases]
    for ours, theirs in commands * warm_up:
        _timed(ours, folder)
        _timed(theirs, folder)
    results = [Result(case, [], [], "") for case in cases]
    for round_ in range(repeats):
        for (ours, theirs), result in zip(commands, results):
            if round_ % 2:
                result.plain.append(_timed(theirs, folder))
                result.geomcli.append(_timed(ours, folder))
            else:
                result.geomcli.append(_timed(ours, folder))
                result.plain.append(_timed(theirs, folder))
    for result in results:
        result.check = check(result.case, folder)
    return results


def render(results: Sequence[Result]) -> str:
    header = ["one-shot", "geomcli", "plain script", "ratio", "per-round p25-p75", "target", "met", "check"]
    cells = [header]
    for result in results:
        low, high = result.paired()
        cells.append([result.case.name, f"{statistics.median(result.geomcli) * 1e3:.1f} ms",
                      f"{statistics.median(result.plain) * 1e3:.1f} ms", f"{result.ratio:.2f}",
                      f"{low:.2f}-{high:.2f}", f"<= {TARGET}x", "yes" if result.ratio <= TARGET else "NO",
                      result.check])
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for index, row in enumerate(cells):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=21, help="timed rounds (default 21)")
    parser.add_argument("--warm-up", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--module", action="store_true", help="time python -m geomcli, not the console script")
    parser.add_argument("--case", default="", help="only the cases whose name contains this")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    cases = [case for case in CASES if args.case in case.name]
    load_before = os.getloadavg()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="geomcli-oneshot-") as folder:
        results = run(folder, args.repeats, args.warm_up, args.module, cases)
    load_after = os.getloadavg()
    print(f"# python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs; geomcli as "
          f"{'python -m geomcli' if args.module else 'its console script'}")
    print(f"# medians of {args.repeats} round(s) (after {args.warm_up} warm-up); ratio = geomcli / plain script; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; took "
          f"{time.perf_counter() - started:.0f} s")
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
