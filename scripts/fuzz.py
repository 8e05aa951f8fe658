"""A long fuzz run of the command line: mutated PNG, TIFF and NPY files through crop-pad,
space-to-depth, info and affine-grid --like, for as long as asked.

    python scripts/fuzz.py --minutes 10 [--seed N]

The same targets and checks as tests/cli/test_robustness.py (exit 0, or exit 1 with one line
``Error: <path>: <reason>``, no temp file left). A failing input is saved as
tests/data/fuzz/<sha1>.<ext>, which test_fuzz_regressions then runs on every test run.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import struct
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import test_robustness as targets  # noqa: E402

KINDS = ["png", "png16", "tiff", "zlib-tiff", "npy", "npy-header"]
COMMANDS = ["crop-pad", "space-to-depth", "info", "theta"]
EDGES = [0, 1, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """Bit flips, byte changes, a header number set to an edge value, a cut: as the test's strategy."""
    out = bytearray(data)
    for _ in range(rng.randint(0, 6)):
        at = rng.randrange(len(out))
        if rng.random() < 0.5:
            out[at] ^= 1 << rng.randrange(8)
        else:
            out[at] = rng.randrange(256)
    if rng.random() < 0.5:
        at = rng.randrange(max(1, min(len(out), 200) - 4))
        struct.pack_into(rng.choice(["<I", ">I"]), out, at, rng.choice(EDGES))
    if rng.random() < 0.4:
        out = out[: rng.randint(1, len(out))]
    return bytes(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=None)
    options = parser.parse_args()
    seed = options.seed if options.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    deadline = time.monotonic() + options.minutes * 60
    runs = failures = 0
    saved = ROOT / "tests" / "data" / "fuzz"
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        while time.monotonic() < deadline:
            fmt, whole = targets.fuzz_seed(rng.choice(KINDS))
            data = mutate(whole, rng)
            command = rng.choice(COMMANDS)
            runs += 1
            try:
                targets.check_cli_on(folder, fmt, data, command)
            except BaseException as error:  # noqa: BLE001 - any failure is a finding to keep
                if isinstance(error, KeyboardInterrupt):
                    raise
                failures += 1
                saved.mkdir(parents=True, exist_ok=True)
                path = saved / f"{hashlib.sha1(data).hexdigest()[:16]}.{fmt}"
                path.write_bytes(data)
                print(f"FAIL {command} on {path}:", file=sys.stderr)
                traceback.print_exc()
    print(f"seed {seed}: {runs} runs in {options.minutes:g} min, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
