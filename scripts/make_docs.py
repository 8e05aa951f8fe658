"""Generate the man pages and the README's usage blocks from the Click definitions.

    python scripts/make_docs.py          # rewrite man/*.1 and README.md
    python scripts/make_docs.py --check  # exit 1 and name the stale files (the tests run this)

Nothing here depends on the date or the machine, so the output is the same on every run.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import click

from geomcli.cli import cli
from geomcli.cli.group import commands

ROOT = Path(__file__).resolve().parent.parent
MAN = ROOT / "man"
README = ROOT / "README.md"

DESCRIPTIONS = {
    "crop-pad": (
        "Follows ONNX CenterCropPad, opset 18. Per axis of length d and target t: a crop keeps the "
        "window that starts at floor((d - t) / 2), so an odd difference leaves the window half a "
        "pixel left of (above) the centre; a pad puts floor((t - d) / 2) values before and the rest, "
        "one more when the difference is odd, after. The pad value is the dtype's zero (0, False, "
        "or the empty string), or \\fB\\-\\-fill\\fR. On an image (H\\(muW\\(muC), \\fB\\-\\-shape\\fR H,W "
        "works on the two spatial axes and H,W,C on all three; on a tensor the shape covers every "
        "axis, or the ones \\fB\\-\\-axes\\fR names."
    ),
    "affine-grid": (
        "Follows ONNX AffineGrid, opset 20. The base coordinate of index i on an axis of length n is "
        "(2i + 1)/n - 1, or 2i/(n - 1) - 1 with \\fB\\-\\-align\\-corners\\fR (0 when n is 1), "
        "computed in double precision and rounded once to the grid dtype. Each grid point is theta "
        "times (x, y[, z], 1); the last axis of the grid is (x, y[, z]) with x along W. Without "
        "\\fB\\-\\-theta\\fR the matrix is translate \\(md rotate \\(md shear \\(md scale of the flags."
    ),
    "space-to-depth": (
        "Follows ONNX SpaceToDepth, opset 28. Input (N, C, H, W) with blocksize b becomes "
        "(N, C\\(mub\\(S2, H/b, W/b). In DCR mode channel (bh\\(mub + bw)\\(muC + c holds "
        "x[n, c, h\\(mub + bh, w\\(mub + bw] (as TensorFlow); in CRD mode channel "
        "c\\(mub\\(S2 + bh\\(mub + bw (as PyTorch's pixel_unshuffle). An image H×W×C is taken as N = 1 "
        "and written back as (H/b)×(W/b)×(C\\(mub\\(S2)."
    ),
    "depth-to-space": (
        "Follows ONNX DepthToSpace, opset 28, the exact inverse of SpaceToDepth in the same mode: "
        "(N, C\\(mub\\(S2, H, W) becomes (N, C, H\\(mub, W\\(mub)."
    ),
    "grid-sample": (
        "Follows ONNX GridSample, opset 22. Data (N, C, D1..Dr) and a grid (N, D1out..Drout, r) give "
        "(N, C, D1out..Drout); the grid's last axis is (x, y[, z]), innermost axis first, in -1..1 "
        "units. A coordinate g on an axis of length L is the position ((g + 1)\\(muL - 1)/2, or "
        "(g + 1)/2\\(mu(L - 1) with \\fB\\-\\-align\\-corners\\fR, in double precision. nearest rounds "
        "half to even; linear and cubic (Keys, A = -0.75) follow onnxruntime and PyTorch. Integer "
        "data is computed in double precision, rounded half to even and saturated to its type."
    ),
    "warp": (
        "GridSample of the grid AffineGrid makes from theta for the output's size, made a slab of "
        "rows at a time: the same bits as \\fBgeomcli\\-grid\\-sample\\fR(1) of "
        "\\fBgeomcli\\-affine\\-grid\\fR(1)'s grid, without holding the grid. theta maps output "
        "positions to the input positions sampled."
    ),
    "resize": (
        "Follows ONNX Resize, opset 19, every attribute: nearest, linear and cubic; the six coordinate "
        "transformations; antialias, which widens the filter by 1/scale on a downscale; "
        "keep_aspect_ratio_policy, whose sizes are rounded half up. Integer data is computed in double "
        "precision, rounded half to even and saturated to its type; scales are read as the decimals they "
        "print as (0.7 on length 10 gives 7)."
    ),
    "chain": (
        "The steps: crop-pad, resize, space-to-depth, depth-to-space, grid-sample and warp. A resize "
        "and a crop-pad after it that only crops are made in one pass, the same bits as the two. A "
        "step's error names its step by number; its warnings and notes by its command, and by number "
        "too where that command is given more than once (step 3 (resize): ...). An unknown step or an "
        "option of the wrong step is a usage error "
        "before anything is read."
    ),
    "info": "Reads each file as the transforms would and prints one line (or one JSON object) for it.",
}

ENVIRONMENT = [
    ("GEOMCLI_MAX_PIXELS", "The default of \\fB\\-\\-max\\-pixels\\fR."),
    ("GEOMCLI_THREADS", "The default of \\fB\\-\\-threads\\fR."),
    ("GEOMCLI_SCHEDULER", "The default of \\fB\\-\\-scheduler\\fR (\\fB\\-j\\fR on the command line overrides it)."),
    ("NO_COLOR", "When set and not empty, the summary on stderr has no colour even on a terminal."),
]

# Beyond each command's own "Example:" line: a pipe, a batch and a Makefile rule.
EXTRA_EXAMPLES = {
    "crop-pad": [
        "geomcli crop-pad scan.tiff -o - --shape 512,512 --format npy | python consume.py",
        "geomcli crop-pad 'shots/**/*.png' --out-dir out --shape 224,224 -j 2 --skip-existing",
        "# a Makefile rule (recipe lines start with a tab):\n"
        "out/%.png: shots/%.png\n\tmkdir -p $(@D)\n\tgeomcli crop-pad $< -o $@ --shape 224,224",
    ],
    "space-to-depth": [
        "cat x.npy | geomcli space-to-depth - -o - --blocksize 2 | geomcli depth-to-space - -o y.npy --blocksize 2",
        "geomcli space-to-depth frames/ --out-dir blocks --name '{stem}.npy' --blocksize 4 --mode CRD",
    ],
    "depth-to-space": [
        "geomcli depth-to-space blocks/ --out-dir frames --name '{stem}.tiff' --blocksize 4 --mode CRD --layout HWC",
    ],
    "affine-grid": [
        "geomcli affine-grid --size 8,3,224,224 --theta thetas.npy -o grids.npy --align-corners",
        "geomcli affine-grid --size 1,1,16,64,64 --theta 1,0,0,0,0,1,0,0,0,0,1,0 -o grid3d.npy",
    ],
    "info": ["geomcli info --json samples/*.png samples/*.npy | python -m json.tool --json-lines"],
}

EXIT_STATUS = [
    ("0", "Every file was done."),
    ("1", "A file could not be read, transformed or written; one line Error: PATH: REASON each."),
    ("2", "A command-line mistake, or options a file cannot take as its header shows (a blocksize that does "
          "not divide it, a float result to PNG); nothing is written. Nothing to do is one too: an empty "
          "\\fB\\-\\-files\\-from\\fR list (Error: Invalid value for '\\-\\-files\\-from': \\- lists no input), "
          "a folder or glob with no file geomcli reads (Error: the folder empty has no file geomcli reads ...)."),
    ("130, 143, 129, 152", "Interrupted by SIGINT (Ctrl-C: ended by SIGINT after its clean-up, so a shell loop "
                           "stops too), SIGTERM, SIGHUP (a closed terminal) or SIGXCPU (a soft CPU limit, "
                           "ulimit -St); no partial file is left."),
    ("141", "The reader of standard output or standard error went away (| head -1, 2>&1 | head -1)."),
]

FORMATS = (
    "PNG, JPEG, BMP, GIF and WebP through Pillow; .npy through numpy, always without pickle; "
    ".tif and .tiff through tifffile; .zarr arrays through zarr (pip install 'geomcli[dask]'). - reads "
    "standard input, whose format is found from its first bytes, or writes standard output in "
    "\\fB\\-\\-format\\fR (npy by default). Dtypes are kept: float data goes to .npy or .tiff, never "
    "silently to 8 bits."
)


# groff reads its input as Latin-1: the few non-ASCII characters of the help become glyph names.
GLYPHS = {"×": "\\(mu", "·": "\\(md", "²": "\\(S2", "→": "\\(->", "é": "\\('e"}


def glyphs(text: str) -> str:
    for character, escape in GLYPHS.items():
        text = text.replace(character, escape)
    return text


def roff(text: str) -> str:
    """Escape plain text for roff: backslashes, hyphens, and a leading dot or quote."""
    text = glyphs(text.replace("\\", "\\e").replace("-", "\\-"))
    return re.sub(r"^([.'])", r"\\&\1", text, flags=re.MULTILINE)


def paragraph(text: str) -> str:
    """One help paragraph: filled, or kept line by line where Click's \\b marker says so."""
    if text.startswith("\b"):
        block = textwrap.dedent(text.removeprefix("\b").strip("\n"))
        return f".nf\n{roff(block)}\n.fi"
    return roff(" ".join(text.split()))


def option_entry(param: click.Parameter, ctx: click.Context) -> str:
    record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
    if record is None:
        return ""
    names, help_text = record
    return f".TP\n.B {roff(names)}\n{roff(help_text)}\n"


def man_page(name: str, command: click.Command) -> str:
    ctx = click.Context(command, info_name=f"geomcli {name}", help_option_names=["-h", "--help"])
    help_text = command.help or ""
    summary_line = command.get_short_help_str(limit=200)
    paragraphs = [p.strip() for p in help_text.split("\n\n") if p.strip()]
    examples = [p.removeprefix("Example: ") for p in paragraphs if p.startswith("Example:")]
    body = [p for p in paragraphs[1:] if not p.startswith("Example:")]
    usage = " ".join(command.collect_usage_pieces(ctx))
    envvars = {param.envvar for param in command.params if isinstance(param, click.Option)}
    lines = [
        f'.TH "GEOMCLI\\-{roff(name.upper())}" 1 "" "geomcli" "geomcli manual"',
        ".SH NAME",
        f"geomcli\\-{roff(name)} - {roff(summary_line)}",
        ".SH SYNOPSIS",
        f".B geomcli {roff(name)}",
        roff(usage),
        ".SH DESCRIPTION",
        *(paragraph(p) + "\n.PP" for p in body),
        glyphs(DESCRIPTIONS[name]),
        ".SH OPTIONS",
        "".join(option_entry(param, ctx) for param in command.get_params(ctx)).rstrip("\n"),
        ".SH EXIT STATUS",
        *(f".TP\n.B {code}\n{text}" for code, text in EXIT_STATUS),
        ".SH ENVIRONMENT",
        *(f".TP\n.B {variable}\n{text}" for variable, text in ENVIRONMENT
          if variable == "NO_COLOR" or variable in envvars),
        ".SH FILES",
        FORMATS,
        ".SH EXAMPLES",
        *(f".PP\n.nf\n{roff(example)}\n.fi" for example in examples),
        *(f".PP\n.nf\n{roff(example)}\n.fi" for example in EXTRA_EXAMPLES.get(name, [])),
        ".SH SEE ALSO",
        ", ".join(f"\\fBgeomcli\\-{roff(other)}\\fR(1)" for other in sorted(commands()) if other != name)
        + ", \\fBgeomcli\\fR(1)",
    ]
    return "\n".join(lines) + "\n"


def main_page() -> str:
    ctx = click.Context(cli, info_name="geomcli", help_option_names=["-h", "--help"])
    lines = [
        '.TH "GEOMCLI" 1 "" "geomcli" "geomcli manual"',
        ".SH NAME",
        "geomcli - ONNX geometry operators on images and tensors",
        ".SH SYNOPSIS",
        ".B geomcli",
        "[\\-\\-version] [\\-h|\\-\\-help] COMMAND ...",
        ".SH DESCRIPTION",
        roff(" ".join((cli.help or "").split())),
        ".SH COMMANDS",
        *(f".TP\n.BR geomcli\\-{roff(name)} (1)\n{roff(command.get_short_help_str(limit=200))}"
          for name, command in sorted(commands().items())),
        ".SH OPTIONS",
        "".join(option_entry(param, ctx) for param in cli.get_params(ctx)).rstrip("\n"),
        ".SH EXIT STATUS",
        *(f".TP\n.B {code}\n{text}" for code, text in EXIT_STATUS),
        ".SH ENVIRONMENT",
        *(f".TP\n.B {variable}\n{text}" for variable, text in ENVIRONMENT),
        ".SH FILES",
        FORMATS,
        ".SH SHELL COMPLETION",
        "Click completes commands, options, file paths and the values of \\fB\\-\\-mode\\fR and "
        "\\fB\\-\\-layout\\fR. For bash:",
        ".PP\n.nf\neval \"$(_GEOMCLI_COMPLETE=bash_source geomcli)\"\n.fi",
        ".PP\nFor zsh and fish, zsh_source and fish_source.",
        ".SH SEE ALSO",
        ", ".join(f"\\fBgeomcli\\-{roff(name)}\\fR(1)" for name in sorted(commands())),
    ]
    return "\n".join(lines) + "\n"


def usage_text(name: str) -> str:
    command = commands()[name]
    with click.Context(command, info_name=f"geomcli {name}", terminal_width=100, max_content_width=100) as ctx:
        return command.get_help(ctx)


def readme_text(current: str) -> str:
    """README.md with every ``<!-- usage: NAME -->`` block refreshed from the live CLI."""

    def refresh(match: re.Match[str]) -> str:
        return f"{match.group(1)}```text\n{usage_text(match.group(2))}\n```\n{match.group(3)}"

    pattern = r"(<!-- usage: ([a-z-]+) -->\n)(?:.*?\n)?(<!-- /usage -->)"
    return re.sub(pattern, refresh, current, flags=re.DOTALL)


def expected_files() -> dict[Path, str]:
    files = {MAN / "geomcli.1": main_page()}
    for name, command in commands().items():
        files[MAN / f"geomcli-{name}.1"] = man_page(name, command)
    files[README] = readme_text(README.read_text(encoding="utf-8"))
    return files


def main(argv: list[str]) -> int:
    stale = [path for path, text in expected_files().items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    if "--check" in argv:
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)} (run python scripts/make_docs.py)", file=sys.stderr)
        return 1 if stale else 0
    MAN.mkdir(exist_ok=True)
    for path, text in expected_files().items():
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
