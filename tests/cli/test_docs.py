"""Docs that stay true: the README's commands run, the generated blocks and man pages are
fresh and render without warnings, and CI runs the README's test command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def fenced_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def readme_commands() -> list[str]:
    """Every shell line of the README that runs geomcli: set-up lines keep their geomcli part."""
    commands = []
    for block in fenced_blocks("sh"):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if "pip install" in line:
                commands += [part.strip() for part in line.split("&&") if part.strip().startswith("geomcli ")]
            elif "geomcli " in line and "_COMPLETE" not in line:
                commands.append(line)
    for block in fenced_blocks("console"):
        commands += [line[2:] for line in block.splitlines() if line.startswith("$ geomcli ")]
    return commands


def help_examples() -> list[str]:
    from geomcli.cli.group import commands

    return [line.strip().removeprefix("Example: ") for command in commands().values()
            for line in (command.help or "").splitlines() if line.strip().startswith("Example: geomcli ")]


def test_ci_runs_the_readme_test_command() -> None:
    test_line = next(line for block in fenced_blocks("sh") for line in block.splitlines() if "pytest" in line)
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    steps = [step.strip() for step in test_line.split("&&")]
    assert steps[-1] in ci_lines, f"{steps[-1]!r} is not a line of .ci/run"
    assert any("pip install" in line and "'.[test,dask]'" in line for line in ci_lines)


def test_the_readmes_lint_line_checks_what_ci_checks() -> None:
    """The README's 'ruff check . && mypy geomcli/' left out of mypy the benchmarks, scripts and
    samples CI type-checks: a change passing it could fail CI."""
    def targets(line: str, tool: str) -> set[str]:
        command = re.search(rf"(?:^|; |&& ){tool} ([^&#]*)", line)
        assert command is not None, line
        words = command.group(1).split()
        return {word.rstrip("/") for word in words if not word.startswith("-")}

    (readme_line,) = (line for block in fenced_blocks("sh") for line in block.splitlines() if "lint-imports" in line)
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    for tool in ("ruff check", "mypy"):
        (ci_line,) = (line for line in ci_lines if f"; {tool} " in line)
        assert targets(readme_line, tool) == targets(ci_line, tool), tool
    assert any(line.strip().endswith("lint-imports") for line in ci_lines)


def test_generated_docs_are_fresh() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_docs.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_readme_pictures_are_fresh() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_pictures.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_readme_is_short() -> None:
    assert len(README.splitlines()) <= 200


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
@pytest.mark.parametrize("page", sorted((ROOT / "man").glob("*.1")), ids=lambda path: path.name)
def test_man_page_renders_without_warnings(page: Path) -> None:
    result = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(page)], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == ""


@pytest.mark.parametrize("page", sorted((ROOT / "man").glob("*.1")), ids=lambda path: path.name)
def test_man_page_holds_no_control_characters(page: Path) -> None:
    """A help paragraph Click keeps unwrapped (its \\b marker) is a no-fill block, not a backspace."""
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", page.read_text(encoding="utf-8"))


def test_man_pages_name_every_environment_variable_of_their_command() -> None:
    import click

    from geomcli.cli.group import commands

    for name, command in commands().items():
        environment = (ROOT / "man" / f"geomcli-{name}.1").read_text(encoding="utf-8").split(".SH ENVIRONMENT")[1]
        environment = environment.split(".SH FILES")[0]
        listed = set(re.findall(r"^\.B (\w+)$", environment, flags=re.MULTILINE)) - {"NO_COLOR"}
        assert listed == {param.envvar for param in command.params if isinstance(param, click.Option)
                          and param.envvar}, name


def test_man_pages_list_every_exit_code_the_readme_lists() -> None:
    """geomcli.1 and each command's page said 130 and 143 alone: a SIGHUP's 129 and a SIGXCPU's 152
    (README, docs/safety.md) were missing."""
    from geomcli.cli.group import commands

    table = README.split("## Exit codes and safety")[1].split("\n\n")[1]
    documented = {code for row in re.findall(r"^\| ([0-9 /]+) \|", table, flags=re.MULTILINE)
                  for code in row.split(" / ")}
    assert {"0", "1", "2", "129", "130", "141", "143", "152"} <= documented
    pages = sorted((ROOT / "man").glob("*.1"))
    assert len(pages) == 1 + len(commands())
    for page in pages:
        status = page.read_text(encoding="utf-8").split(".SH EXIT STATUS")[1].split(".SH ")[0]
        listed = {code for codes in re.findall(r"^\.B ([0-9, ]+)$", status, flags=re.MULTILINE)
                  for code in codes.split(", ")}
        assert listed == documented, page.name


@pytest.mark.parametrize("doc", ["README.md", "docs/safety.md"])
def test_the_nothing_to_do_lines_the_exit_codes_quote_are_what_each_run_gives(doc: str, tmp_path: Path) -> None:
    """An empty --files-from list, an empty folder and a glob matching nothing exit 2, which the
    exit code tables did not say (a script took 2 for a typo only). Each quoted command runs and
    ends with the line quoted beside it, nothing written."""
    table = (ROOT / doc).read_text(encoding="utf-8")
    row = next(line for line in table.splitlines() if line.startswith("| 2 |"))
    quoted = re.findall(r"`([^`]*geomcli [^`]*)`[^`]*→ `(Error: [^`]*)`", row)
    assert len(quoted) == 3, row
    (tmp_path / "empty").mkdir()
    for command, line in quoted:
        result = run_in(tmp_path, command.replace("\\|", "|"))
        assert result.returncode == 2, (command, result.stderr)
        assert result.stderr.splitlines()[-1] == line.replace("\\|", "|"), command
        assert "Usage: geomcli resize" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["empty"]


def run_in(folder: Path, command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=folder, capture_output=True, text=True,
                          env=env)


def test_readme_commands_run_in_order_on_a_copy_of_the_samples_and_print_what_it_shows(tmp_path: Path) -> None:
    """As a reader would type them, one after the other: later ones may read what earlier ones
    wrote. Each console block's output line, but for the time it took, is what geomcli prints (one
    run of each command checks both, where each console command ran twice)."""
    shown: dict[str, str] = {}
    for block in fenced_blocks("console"):
        lines = block.splitlines()
        for command, output in zip(lines[::2], lines[1::2], strict=True):
            shown[command.removeprefix("$ ")] = output
    shutil.copytree(ROOT / "samples", tmp_path / "samples")
    commands = readme_commands()
    assert shown and set(shown) <= set(commands)  # (no console block would check no output)
    for command in commands:
        result = run_in(tmp_path, command)
        assert result.returncode == 0, f"{command}\n{result.stderr}"
        assert "Traceback" not in result.stderr, command
        if command in shown:
            printed = result.stderr.strip()
            assert re.sub(r" in \d+ ms$", "", printed) == re.sub(r" in \d+ ms$", "", shown[command]), command


@pytest.mark.parametrize("command", help_examples())
def test_help_example_runs_on_a_copy_of_the_samples(command: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "samples", tmp_path / "samples")
    result = run_in(tmp_path, command)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr


def test_the_man_pages_batch_examples_of_blocks_run_one_after_the_other(tmp_path: Path) -> None:
    """space-to-depth's frames/ -> blocks/ .npy, then depth-to-space's blocks/ -> frames: the .npy of an
    image holds no layout, and the second stopped at 'a rank-3 tensor (30, 40, 48) has no default layout'."""
    import numpy as np
    import tifffile
    from PIL import Image

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import make_docs
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    (tmp_path / "frames").mkdir()
    shutil.copy(ROOT / "samples" / "photo.png", tmp_path / "frames" / "photo.png")
    (to_blocks,) = (line for line in make_docs.EXTRA_EXAMPLES["space-to-depth"] if "frames/" in line)
    (back,) = make_docs.EXTRA_EXAMPLES["depth-to-space"]
    for command in (to_blocks, back.replace("--out-dir frames", "--out-dir frames_back")):
        result = run_in(tmp_path, command)
        assert result.returncode == 0, result.stderr
    photo = tifffile.imread(tmp_path / "frames_back" / "photo.tiff")
    assert np.array_equal(photo, np.asarray(Image.open(ROOT / "samples" / "photo.png")))


def test_readme_worked_space_to_depth_example() -> None:
    import numpy as np

    from geomcli import space_to_depth

    x = np.array([[f"{c}{i}" for i in range(16)] for c in "ab"]).reshape(1, 2, 4, 4)
    for mode in ("DCR", "CRD"):
        corners = "   ".join(f"{value:<2}" for value in space_to_depth(x, 2, mode)[0, :, 0, 0]).rstrip()
        label = f"{mode} (default):" if mode == "DCR" else f"{mode}:"
        assert f"{label:<17}{corners}" in README


def test_the_wheel_carries_every_module_and_the_man_pages(tmp_path: Path) -> None:
    """`pip install .` (not -e) must give users the subpackages and the man pages too, and a
    machine without a C compiler still gets its wheel, without the compiled GridSample (which is
    optional). Built with no compiler (CC=false: the compile alone takes 30 s) and with the test
    extra's setuptools (an isolated build environment fetches one first)."""
    import zipfile

    build = tmp_path / "build"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path), str(ROOT), "--config-settings", f"--build-option=build --build-base {build}"],
                   check=True, capture_output=True, env={**os.environ, "CC": "false"})
    (wheel,) = tmp_path.glob("geomcli-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "geomcli").rglob("*.py")}
    assert modules <= names, modules - names
    assert "geomcli/py.typed" in names  # a user's type checker reads the kernels' annotations
    pages = {f"share/man/man1/{page.name}" for page in (ROOT / "man").glob("*.1")}
    assert {name.split(".data/data/", 1)[-1] for name in names} >= pages
    assert not [name for name in names if name.endswith(".so")]


def test_every_option_has_help_and_shows_its_default() -> None:
    import click

    from geomcli.cli.group import commands

    for name, command in commands().items():
        ctx = click.Context(command)
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            assert param.help, f"{name} {param.opts} has no help"
            default = param.get_default(ctx, call=False)
            if param.required or param.is_flag and not param.secondary_opts or default in (None, False, ()):
                continue
            if not isinstance(default, (str, int, float, tuple, bool)):  # click's "no default" marker
                continue
            record = param.get_help_record(ctx)
            assert record is not None and "default:" in record[1], f"{name} {param.opts} hides its default"


def test_readme_crop_pad_table_is_what_each_tool_computes() -> None:
    """Each row of 'where the extra pixel goes': geomcli's column by the kernel itself, the others by
    the rules the text gives them (ImageMagick's window at d//2 - t//2; torchvision's crop at
    round((d - t) / 2), half to even, and its pad of (t - d) // 2 before)."""
    import numpy as np

    from geomcli import center_crop_pad

    rows = re.findall(r"^\| (\d+) → (\d+) \((crop|pad)\) \| (.+?) \| (.+?) \| (.+?) \|$", README, flags=re.MULTILINE)
    assert len(rows) == 5
    for length, target, kind, ours, magick, torchvision in rows:
        d, t = int(length), int(target)
        kept = center_crop_pad(np.arange(1, d + 1), [t])
        if kind == "crop":
            assert (int(ours), int(magick), int(torchvision)) == (kept[0] - 1, d // 2 - t // 2, round((d - t) / 2))
        else:
            before = int(np.argmax(kept == 1))
            said = {text: [int(n) for n in re.findall(r"\d+", text)] for text in (ours, magick, torchvision)}
            assert said[ours] == [before, t - d - before]
            assert said[magick] == [t // 2 - d // 2, t - d - (t // 2 - d // 2)]
            assert said[torchvision] == [(t - d) // 2, t - d - (t - d) // 2]


def test_readme_resize_sizes_are_what_onnx_and_torchvision_give() -> None:
    """The sizes the resize section quotes: not_smaller 256 against torchvision's Resize(256) (its
    long side int(256 * long / short)), and where CenterCrop(224) starts on each."""
    from geomcli.ops.resize import resize_output_shape

    def onnx(height: int, width: int) -> tuple[int, ...]:
        return resize_output_shape((height, width), sizes=[256, 256], keep_aspect_ratio_policy="not_smaller")

    def torchvision(height: int, width: int) -> tuple[int, int]:
        short, long = sorted((height, width))
        return (256, int(256 * long / short)) if height <= width else (int(256 * long / short), 256)

    section = README.split("## resize:")[1].split("\n## ")[0]
    assert "451·256/300 = 384.85 half up (385), torchvision truncates (384)" in section
    assert f"{451 * 256 / 300:.2f}" == "384.85" and onnx(300, 451) == (256, 385) and torchvision(300, 451) == (256, 384)
    assert "(480×640 → 256×341)" in section and onnx(480, 640) == torchvision(480, 640) == (256, 341)
    quoted = re.search(r"\(300×402 → 256×343: torchvision's `round\((\d+) / 2\)`, half to even, is (\d+), "
                       r"ONNX's `(\d+) // 2` is (\d+)\)", section)
    assert quoted is not None and onnx(300, 402) == torchvision(300, 402) == (256, 343)
    excess, torchvision_start, same_excess, onnx_start = (int(n) for n in quoted.groups())
    assert excess == same_excess == 343 - 224 and excess % 4 == 3
    assert (torchvision_start, onnx_start) == (round(excess / 2), excess // 2)


def test_the_commands_that_take_out_dir_are_those_the_docs_name() -> None:
    """The README said every command takes folders and globs with --out-dir; affine-grid reads no
    input and info writes none. docs/files.md names the commands that do."""
    from geomcli.cli.group import commands

    files_md = (ROOT / "docs" / "files.md").read_text(encoding="utf-8")
    listed = re.search(r"Every command that transforms files \(([^)]*)\)", " ".join(files_md.split()))
    assert listed is not None and "Every command\nthat transforms files takes files" in README
    names = listed.group(1).replace("`", "").replace("chain with -i", "chain")
    named = set(re.findall(r"[a-z]+(?:-[a-z]+)*", names)) - {"and"}
    taking = {name for name, command in commands().items()
              if any("--out-dir" in getattr(param, "opts", ()) for param in command.params)}
    assert named == taking


def test_the_json_keys_docs_files_names_are_in_the_records(tmp_path: Path) -> None:
    """docs/files.md gave the transforms' record keys (command, output, input_shape, ...) right after
    describing info, whose records hold none of them; each list is now named for its command."""
    import json

    text = " ".join((ROOT / "docs" / "files.md").read_text(encoding="utf-8").split())
    lists = re.findall(r"one object per file with at least `([a-z_, ]+)` (?:\(`\"ok\"`/`\"error\"`\) )?and `error`",
                       text)
    assert len(lists) == 2
    info_keys, transform_keys = ({*key_list.replace(" ", "").split(","), "error"} for key_list in lists)
    shutil.copytree(ROOT / "samples", tmp_path / "samples")
    info = run_in(tmp_path, "geomcli info samples/photo.png nosuch.png --json")
    transform = run_in(tmp_path, "geomcli crop-pad samples/photo.png nosuch.png --out-dir out --shape 8,8 --json")
    for result, keys in ((info, info_keys), (transform, transform_keys)):
        records = [json.loads(line) for line in result.stdout.splitlines()]
        records = [record for record in records if record.get("status") != "summary"]
        assert sorted(record["status"] for record in records) == ["error", "ok"], result.stdout
        for record in records:
            assert keys <= set(record), keys - set(record)


def test_the_docs_way_back_from_a_json_name_to_its_bytes_finds_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    """--json writes a name that is not UTF-8 with lone surrogate escapes ("caf\\udce9.png"), which
    jq makes U+FFFD; docs/files.md says so and gives the Python line that gets the bytes back: run
    as written, it lists the failed input's exact bytes (beside a good one of such a name)."""
    from PIL import Image

    text = (ROOT / "docs" / "files.md").read_text(encoding="utf-8")
    assert '`"input": "caf\\udce9.png"`' in text
    (line,) = [line for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)
               for line in block.splitlines() if "os.fsencode" in line]
    shots = tmp_path / "shots"
    shots.mkdir()
    Image.new("RGB", (12, 10)).save(os.fsdecode(bytes(shots) + b"/caf\xe9.png"), format="PNG")
    (shots / os.fsdecode(b"d\xe9j\xe0.png")).write_bytes(b"not a png")
    env = {**os.environ, "NO_COLOR": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "failed.list").read_bytes() == b"shots/d\xe9j\xe0.png\0"
    assert os.path.exists(os.fsencode(tmp_path) + b"/out/caf\xe9.png")
