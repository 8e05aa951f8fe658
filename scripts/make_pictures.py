"""Make the README's pictures of what warp's flags do, from samples/photo.png, with geomcli itself.

    python scripts/make_pictures.py          # rewrite docs/pictures/*.png
    python scripts/make_pictures.py --check  # exit 1 and name the pictures that differ (a test runs this)

Each picture is one geomcli command (its flags head its column in the README), so the pictures cannot drift
from what the commands do.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PICTURES = ROOT / "docs" / "pictures"
PHOTO = "samples/photo.png"

# name -> the geomcli arguments that make it, the output last
COMMANDS: dict[str, list[str]] = {
    "photo": ["crop-pad", PHOTO, "--shape", "120,160"],
    "rotate": ["warp", PHOTO, "--rotate", "30"],
    "scale": ["warp", PHOTO, "--scale", "2"],
    "shear": ["warp", PHOTO, "--shear", "0.4,0"],
    "translate": ["warp", PHOTO, "--translate", "0.5,0"],
    "zeros": ["warp", PHOTO, "--rotate", "20", "--scale", "1.6", "--padding-mode", "zeros"],
    "border": ["warp", PHOTO, "--rotate", "20", "--scale", "1.6", "--padding-mode", "border"],
    "reflection": ["warp", PHOTO, "--rotate", "20", "--scale", "1.6", "--padding-mode", "reflection"],
    # the window round the house's window, 8x enlarged (scale 0.12): how each mode fills in between pixels
    "nearest": ["warp", PHOTO, "--scale", "0.12", "--translate", "-0.16,0.1", "--mode", "nearest"],
    "linear": ["warp", PHOTO, "--scale", "0.12", "--translate", "-0.16,0.1", "--mode", "linear"],
    "cubic": ["warp", PHOTO, "--scale", "0.12", "--translate", "-0.16,0.1", "--mode", "cubic"],
}


def make(folder: Path) -> None:
    import os

    from geomcli.cli import main

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        for name, arguments in COMMANDS.items():
            try:
                main([*arguments, "-o", str(folder / f"{name}.png"), "-q", "--compress-level", "9"])
            except SystemExit as stop:
                if stop.code:
                    raise
    finally:
        os.chdir(here)


def main(argv: list[str]) -> int:
    if "--check" not in argv:
        PICTURES.mkdir(parents=True, exist_ok=True)
        make(PICTURES)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        make(Path(scratch))
        stale = [name for name in COMMANDS
                 if (Path(scratch) / f"{name}.png").read_bytes() != (PICTURES / f"{name}.png").read_bytes()]
    if stale:
        print(f"stale pictures: {', '.join(stale)}; run python scripts/make_pictures.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
