"""The ImageNet recipe over a folder: geomcli chain -j 2 against a two-process Pillow script and mogrify.

    python benchmarks/chain_batch.py               # 200 photo-like 500x375 JPEGs, 3 rounds
    python benchmarks/chain_batch.py --count 20 --rounds 1

Each tool takes the shorter side to 256 and the centre 224x224 and writes a JPEG at quality 90,
4:2:0, one output per input:

- **geomcli**: ``chain resize --sizes 256,256 --keep-aspect-ratio-policy not_smaller --mode
  linear --antialias crop-pad --shape 224,224 -j 2`` (ONNX Resize-19 then CenterCropPad);
- **Pillow, 2 processes**: the script a user would write: ``Image.resize`` (BILINEAR, which
  antialiases) to torchvision's ``Resize(256)`` size, then ``crop``, over a
  ``ProcessPoolExecutor(2)`` (Python's start-up and imports counted, as for geomcli);
- **the script writing as geomcli does**: the same, each output written as geomcli writes it
  (optimised Huffman tables, a temp file synced to disk, then renamed into place): like for like
  on the writes, so the rest of the gap is the reads and the resize;
- **mogrify**: ``-resize 256x256^ -gravity center -extent 224x224`` with its default threads
  (both cores), where ImageMagick is installed.

The rounds alternate (a busy machine slows all alike); medians of images/s and the ratios
(target: geomcli at least 0.9x the Pillow script). The pixels differ by design (ONNX's sizes and
filter; see the README's resize table): this measures speed only.
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
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch import imagemagick  # noqa: E402

WIDTH, HEIGHT, SHORT, CROP, QUALITY = 500, 375, 256, 224, 90

PILLOW_SCRIPT = f"""
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from PIL import Image

SAFE = sys.argv[3:] == ["--safe"]

def one(paths):
    source, target = paths
    with Image.open(source) as image:
        width, height = image.size
        scale = {SHORT} / min(width, height)
        size = (max({SHORT}, int(width * scale)), max({SHORT}, int(height * scale)))
        image = image.convert("RGB").resize(size, Image.BILINEAR)
        left, top = (size[0] - {CROP}) // 2, (size[1] - {CROP}) // 2
        cropped = image.crop((left, top, left + {CROP}, top + {CROP}))
        if not SAFE:
            cropped.save(target, quality={QUALITY}, subsampling="4:2:0")
            return
        # as geomcli writes: optimised Huffman tables, a hidden temp file synced, then renamed
        temp = target.with_name("." + target.name + ".tmp")
        with open(temp, "wb") as f:
            cropped.save(f, "JPEG", quality={QUALITY}, subsampling="4:2:0", optimize=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)

if __name__ == "__main__":
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    jobs = [(path, target / path.name) for path in sorted(source.glob("*.jpg"))]
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(one, jobs, chunksize=8))
"""


def make_inputs(folder: Path, count: int) -> Path:
    """``count`` photo-like RGB JPEGs (gradients, edges, noise), quality 90, seeded."""
    folder.mkdir(parents=True, exist_ok=True)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    for index in range(count):
        path = folder / f"photo{index:04d}.jpg"
        if path.exists():
            continue
        rng = np.random.default_rng(index)
        angle = rng.uniform(0, 2 * np.pi)
        ramp = (np.cos(angle) * x / WIDTH + np.sin(angle) * y / HEIGHT + 1) / 2
        colour = rng.uniform(40, 215, 3).astype(np.float32)
        image = ramp[..., None] * colour + (1 - ramp[..., None]) * colour[::-1]
        image[(x // 40 + y // 40) % 2 == 0] *= 0.8  # edges for the filters to smooth
        image += rng.normal(0, 4, image.shape).astype(np.float32)
        Image.fromarray(np.clip(np.rint(image), 0, 255).astype(np.uint8)).save(path, quality=QUALITY)
    return folder


def timed(command: list[str], out: Path, env: dict[str, str] | None = None) -> float:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    return time.perf_counter() - started


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="how many input JPEGs (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--work", type=Path, default=None, help="keep the inputs here for the next run")
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="geomcli-bench-chain-"))
    try:
        inputs = make_inputs(work / "in", args.count)
        script = work / "pillow_recipe.py"
        script.write_text(PILLOW_SCRIPT)
        mogrify = imagemagick()
        runs: dict[str, Callable[[Path], float]] = {
            "geomcli chain -j 2": lambda out: timed(
                [sys.executable, "-m", "geomcli", "chain", "-i", str(inputs), "--out-dir", str(out), "-j", "2", "-q",
                 "--quality", str(QUALITY), "--subsampling", "4:2:0", "resize", "--sizes", f"{SHORT},{SHORT}",
                 "--keep-aspect-ratio-policy", "not_smaller", "--mode", "linear", "--antialias", "crop-pad",
                 "--shape", f"{CROP},{CROP}"], out),
            "Pillow script, 2 processes": lambda out: timed([sys.executable, str(script), str(inputs), str(out)], out),
            "the script writing as geomcli does": lambda out: timed(
                [sys.executable, str(script), str(inputs), str(out), "--safe"], out),
        }
        if mogrify is not None:
            runs["mogrify"] = lambda out: timed(
                [mogrify, "-path", str(out), "-resize", f"{SHORT}x{SHORT}^", "-gravity", "center", "-extent",
                 f"{CROP}x{CROP}", "-quality", str(QUALITY), "-sampling-factor", "4:2:0",
                 *sorted(str(path) for path in inputs.glob("*.jpg"))], out)
        print(f"{args.count} RGB {WIDTH}x{HEIGHT} JPEGs -> shorter side {SHORT}, centre {CROP}x{CROP}, JPEG quality "
              f"{QUALITY} 4:2:0; {args.rounds} round(s)" + ("" if mogrify else "; ImageMagick not installed"))
        walls: dict[str, list[float]] = {name: [] for name in runs}
        for round_ in range(args.rounds):
            for name, run in runs.items():
                walls[name].append(run(work / "out"))
            print(f"round {round_ + 1}: " + ", ".join(f"{name} {values[-1]:.2f} s" for name, values in walls.items()))
        ours = statistics.median(walls["geomcli chain -j 2"])
        print("| run | wall | images/s | geomcli's images/s over this |")
        print("|---|---|---|---|")
        for name, values in walls.items():
            wall = statistics.median(values)
            print(f"| {name} | {wall:.2f} s | {args.count / wall:.1f} | {wall / ours:.2f}x |")
        pillow = statistics.median(walls["Pillow script, 2 processes"])
        print(f"geomcli against the Pillow script: {pillow / ours:.2f}x its images/s (target >= 0.9)")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
