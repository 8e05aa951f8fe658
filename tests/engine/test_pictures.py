"""crop-pad of a plain 8-bit image stays a Pillow image (io.Picture), without numpy: its outputs,
reports and refusals must be those of the array path, byte for byte.

``--axes 0,1`` names the same axes as the default on an HW or HWC image but takes the array
path, so every case below runs both ways and compares.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from geomcli import io
from geomcli.cli import cli
from geomcli.engine import operations
from geomcli.ops.window import center_crop_pad_window


def _icc() -> bytes:
    from PIL import ImageCms

    return bytes(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())


def _exif(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return bytes(exif.tobytes())


def _pixels(shape: tuple[int, ...], seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _rgb_jpeg(path: Path) -> None:
    Image.fromarray(_pixels((9, 14, 3))).save(path, quality=90, icc_profile=_icc(), dpi=(300, 150),
                                              exif=_exif(6))


def _palette_png(path: Path, transparent: bool) -> None:
    im = Image.fromarray(_pixels((9, 14)) // 32).convert("P")
    im.putpalette([value for index in range(256) for value in (index * 30 % 256, index * 7 % 256, 255 - index)])
    if transparent:
        im.save(path, transparency=3)
    else:
        im.save(path)


def _animation(path: Path) -> None:
    frames = [Image.fromarray(_pixels((9, 14, 3), seed)) for seed in range(3)]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=40)


def _transparent_gif(path: Path) -> None:
    Image.fromarray(_pixels((9, 14)) // 16).save(path, transparency=2)


def _deep_png(path: Path) -> None:
    io.write_array(_pixels((9, 14, 3)).astype(np.uint16) * 257, str(path))


MAKERS: dict[str, Callable[[Path], None]] = {
    "l.png": lambda p: Image.fromarray(_pixels((9, 14))).save(p, dpi=(72, 72)),
    "lt.png": lambda p: Image.fromarray(_pixels((9, 14))).save(p, transparency=7, icc_profile=_icc()),
    "la.png": lambda p: Image.fromarray(_pixels((9, 14, 2)), "LA").save(p),
    "rgb.png": lambda p: Image.fromarray(_pixels((9, 14, 3))).save(p, icc_profile=_icc(), exif=_exif(3)),
    "rgba.png": lambda p: Image.fromarray(_pixels((10, 15, 4))).save(p),
    "p.png": lambda p: _palette_png(p, transparent=False),
    "pt.png": lambda p: _palette_png(p, transparent=True),
    "rgb.jpg": _rgb_jpeg,
    "rgba.webp": lambda p: Image.fromarray(_pixels((9, 14, 4))).save(p, lossless=True, exact=True),
    "l.gif": lambda p: Image.fromarray(_pixels((9, 14))).save(p),
    "rgb.bmp": lambda p: Image.fromarray(_pixels((9, 14, 3))).save(p),
    "bits.bmp": lambda p: Image.fromarray(_pixels((9, 14)) > 127).save(p),
    "deep.png": _deep_png,
    "t5.png": lambda p: Image.fromarray(_pixels((9, 14, 3))).save(p, exif=_exif(5), dpi=(300, 100)),
    "t8.png": lambda p: Image.fromarray(_pixels((9, 14, 2)), "LA").save(p, exif=_exif(8)),
    "anim.gif": _animation,
    "t.gif": _transparent_gif,
    "l.bmp": lambda p: Image.fromarray(_pixels((9, 14))).save(p),
    "strip.jpg": _rgb_jpeg,
}
# modes the array path must take (not 8-bit images)
ARRAYS_ONLY = {"bits.bmp", "deep.png"}
# what else each file is run with
OPTIONS = {"anim.gif": ["--frames", "first"], "strip.jpg": ["--strip"]}


def run(*args: str) -> tuple[int, dict[str, Any] | None, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    record = json.loads(result.stdout.splitlines()[-1]) if result.stdout.strip() else None
    if record is not None:
        del record["seconds"], record["parameters"]
    return result.exit_code, record, result.stderr


@pytest.mark.parametrize("name", sorted(MAKERS))
@pytest.mark.parametrize("target", ["5,7", "13,20", "4,21", "9,14"])
@pytest.mark.parametrize("suffix", [".png", ".webp", ".bmp", ".gif", ".jpg"])
def test_a_picture_gives_what_its_array_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                              target: str, suffix: str) -> None:
    source = tmp_path / name
    MAKERS[name](source)
    taken = []
    crop_pad_picture = operations.CropPad.apply_picture

    def spy(self: operations.CropPad, picture: io.Picture, common: Any) -> io.Picture:
        taken.append(picture.image.mode)
        return crop_pad_picture(self, picture, common)

    monkeypatch.setattr(operations.CropPad, "apply_picture", spy)
    out = tmp_path / f"out{suffix}"  # one name for both: reports and messages name it
    args = ["crop-pad", str(source), "-o", str(out), "--shape", target, "--json", *OPTIONS.get(name, [])]
    by_picture = run(*args)
    assert len(taken) == (0 if name in ARRAYS_ONLY else 1)
    written = out.read_bytes() if out.exists() else None
    out.unlink(missing_ok=True)
    by_array = run(*args, "--axes", "0,1")
    assert len(taken) == (0 if name in ARRAYS_ONLY else 1)
    assert by_picture == by_array
    assert written == (out.read_bytes() if out.exists() else None)
    assert (written is not None) == (by_picture[0] == 0)


def test_the_picture_path_is_taken_only_where_it_gives_the_same(tmp_path: Path) -> None:
    crop = operations.CropPad((4, 4))

    class Common:
        layout: str | None = None

    assert crop.takes_pictures(Common(), "png")  # type: ignore[arg-type]
    assert not crop.takes_pictures(Common(), "npy")  # type: ignore[arg-type]
    assert not crop.takes_pictures(Common(), "tiff")  # type: ignore[arg-type]
    for other in (operations.CropPad((4, 4), axes=(0, 1)), operations.CropPad((4, 4), fill="0"),
                  operations.CropPad((4, 4, 3)), operations.CropPad((0, 4))):
        assert not other.takes_pictures(Common(), "png")  # type: ignore[arg-type]
    Common.layout = "HWC"
    assert not crop.takes_pictures(Common(), "png")  # type: ignore[arg-type]


@pytest.mark.parametrize("length", range(1, 9))  # Pillow has no empty images
@pytest.mark.parametrize("target", range(1, 9))
def test_pillow_pads_where_the_kernel_pads(length: int, target: int) -> None:
    """Image.crop past the edges fills zeros: the same as center_crop_pad on every offset."""
    import geomcli.ops.center_crop_pad as crop_ops

    data = _pixels((3, length, 2))
    expected = crop_ops.center_crop_pad(data, [3, target], [0, 1])
    kept, placed = center_crop_pad_window(length, target)
    left = kept.start - placed.start
    found = np.asarray(Image.fromarray(data, "LA").crop((left, 0, left + target, 3)))
    assert np.array_equal(found, expected)


def test_read_picture_keeps_plain_images_and_reads_the_rest_as_arrays(tmp_path: Path) -> None:
    for name, maker in MAKERS.items():
        maker(tmp_path / name)
        frames = "first" if "--frames" in OPTIONS.get(name, []) else None
        found = io.read_picture(str(tmp_path / name), frames=frames)
        array = io.read_array(str(tmp_path / name), frames=frames)
        if name in ARRAYS_ONLY:
            assert isinstance(found, io.Loaded)
            continue
        assert isinstance(found, io.Picture), name
        assert found.shape == array.shape and found.dtype == str(array.dtype) and found.layout == array.layout
        assert found.notes == array.notes and found.metadata == array.metadata and found.pages == array.pages
        assert found.file_size == array.file_size
        assert np.array_equal(found.to_array(), array.data)
        assert found.value_range() == [int(array.data.min()), int(array.data.max())]
    np.save(tmp_path / "t.npy", _pixels((2, 3)))
    assert isinstance(io.read_picture(str(tmp_path / "t.npy")), io.Loaded)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_info_of_a_picture_is_its_arrays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    from geomcli.engine.info import info

    MAKERS[name](tmp_path / name)
    frames = "first" if "--frames" in OPTIONS.get(name, []) else "all"
    found = info(str(tmp_path / name), max_pixels=io.DEFAULT_MAX_PIXELS, frames=frames)
    monkeypatch.setattr(io, "read_picture", io.read_array)
    assert found == info(str(tmp_path / name), max_pixels=io.DEFAULT_MAX_PIXELS, frames=frames)


def test_info_of_an_8_bit_image_makes_no_array_of_it(tmp_path: Path) -> None:
    """Its value range was the array's: info of an 80 MP photo took 570 MB (798 MB before a6eeeb8),
    where Pillow's image is 322 MB; Pillow's histogram of its image gives the same range."""
    import tracemalloc

    from geomcli.engine.info import info

    rows, columns = np.indices((600, 800))
    data = np.stack([(rows + columns) % 256, rows % 200, columns % 256], axis=-1).astype(np.uint8)
    Image.fromarray(data).save(tmp_path / "a.png")  # (a small file: its bytes are read whole)
    info(str(tmp_path / "a.png"), max_pixels=io.DEFAULT_MAX_PIXELS, frames="all")  # the imports
    tracemalloc.start()
    try:
        record = info(str(tmp_path / "a.png"), max_pixels=io.DEFAULT_MAX_PIXELS, frames="all")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert record["value_range"] == [0, 255] and record["shape"] == [600, 800, 3]
    assert peak < data.nbytes // 4, peak


def test_a_picture_written_to_an_array_format_is_its_array(tmp_path: Path) -> None:
    MAKERS["rgba.png"](tmp_path / "in.png")
    picture = io.read_picture(str(tmp_path / "in.png"))
    assert isinstance(picture, io.Picture)
    io.write_array(picture, str(tmp_path / "out.npy"))
    assert np.array_equal(np.load(tmp_path / "out.npy"), picture.to_array())


def test_a_plain_image_crop_imports_no_numpy(tmp_path: Path) -> None:
    MAKERS["rgb.png"](tmp_path / "in.png")
    probe = ("import sys\nfrom geomcli.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             "print(sorted(name for name in ('numpy', 'tifffile', 'rich') if name in sys.modules))")
    for shape in ("4,5", "30,40"):
        result = subprocess.run([sys.executable, "-c", probe, "crop-pad", str(tmp_path / "in.png"), "-o",
                                 str(tmp_path / "out.png"), "--shape", shape], capture_output=True, text=True)
        assert result.stdout.split("\n")[-2] == "[]", result.stderr


def test_pipes_give_the_same_bytes_both_ways(tmp_path: Path) -> None:
    MAKERS["rgb.png"](tmp_path / "in.png")
    source = (tmp_path / "in.png").read_bytes()
    results = [CliRunner().invoke(cli, ["crop-pad", "-", "-o", "-", "--format", "png", "--shape", "6,20", *more],
                                  input=source, catch_exceptions=False) for more in ([], ["--axes", "0,1"])]
    assert [r.exit_code for r in results] == [0, 0]
    assert results[0].stdout_bytes == results[1].stdout_bytes and results[0].stdout_bytes.startswith(b"\x89PNG")


def test_an_output_past_pillows_own_size_limit_is_made_as_an_array_is(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Pillow's bomb check (here 40 pixels, an error past 80) applies to Image.crop too; --max-pixels
    is geomcli's only limit on either path."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 40)
    MAKERS["rgb.png"](tmp_path / "in.png")
    outputs = []
    for more in ([], ["--axes", "0,1"]):
        out = tmp_path / f"out{len(outputs)}.png"
        result = CliRunner().invoke(cli, ["crop-pad", str(tmp_path / "in.png"), "-o", str(out), "--shape", "30,40",
                                          *more], catch_exceptions=False)
        assert result.exit_code == 0 and "Warning" not in result.stderr, result.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert Image.MAX_IMAGE_PIXELS == 40  # put back
