"""Where the pixels of one resize differ: geomcli (ONNX Resize-19) against torchvision, Pillow and OpenCV.

    python benchmarks/resize_compare.py            # the difference table (markdown) and its checks
    python benchmarks/resize_compare.py --time     # and uint8 1024x1024x3 -> 224² timed side by side

Needs Pillow, opencv-python-headless and torch (CPU) beside geomcli; a tool that is missing is
left out of the table with a note. torchvision itself is not needed: its two pieces are
reproduced here as torchvision's source has them (``transforms.functional`` and
``_functional_tensor.resize``, v1; ``transforms.v2.functional.resize_image``, v2):

- ``Resize(256)``'s size: the shorter side becomes 256 and the longer ``int(256 * long / short)``,
  truncated;
- on a tensor, v1 casts uint8 to float32, calls ``torch.nn.functional.interpolate(img, size,
  mode="bilinear" | "bicubic", align_corners=False, antialias=True)``, clamps a bicubic result to
  0..255, rounds half to even and casts back; v2 passes uint8 to ``interpolate`` as it is (torch's
  own uint8 kernels) on CPUs with AVX2 for bilinear, on every CPU for bicubic; on a PIL image
  both call Pillow's ``Image.resize``.

Each row compares two uint8 HWC results of the same size: max and mean |difference| in uint8
levels and the share of values that differ. The "check" column tests the reason given for a
difference: geomcli's exact (float64) result put through the other tool's arithmetic (its
rounding, its intermediate rounding, its cubic coefficient) must then land within the stated
distance of the other tool's pixels.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# Run from a clone without installing: make `import geomcli` find the package beside us.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from geomcli.ops.resize import resize  # noqa: E402

Image = np.ndarray  # (H, W, C) uint8


def photo(height: int, width: int, seed: int = 21) -> Image:
    """A photo-like RGB image: smooth gradients, a fine texture, hard edges and sensor noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    u, v = x / width, y / height
    base = np.stack([200 * u + 30, 180 * v + 40, 120 + 60 * np.sin(9 * u + 5 * v)], axis=-1)
    base += (25 * np.sin(x / 1.7) * np.cos(y / 2.3))[..., None]  # texture near the Nyquist limit
    box = (np.abs(u - 0.55) < 0.18) & (np.abs(v - 0.45) < 0.22)
    base[box] = [235, 60, 50]
    base[(x + 2 * y) % 97 < 3] = 15  # thin dark lines
    base += rng.normal(0, 4, base.shape)
    return np.asarray(np.clip(np.rint(base), 0, 255), dtype=np.uint8)


# --- geomcli -----------------------------------------------------------------------------------


def geomcli_exact(image: Image, sizes: tuple[int, int], **attributes: Any) -> np.ndarray:
    """geomcli's result before its one rounding: the same resize of the image as float64."""
    return resize(image.astype(np.float64), sizes=list(sizes), axes=[0, 1], **attributes)


def geomcli_u8(image: Image, sizes: tuple[int, int], **attributes: Any) -> Image:
    return resize(image, sizes=list(sizes), axes=[0, 1], **attributes)


# --- torch, as torchvision calls it --------------------------------------------------------------


def torchvision_size(height: int, width: int, size: int) -> tuple[int, int]:
    """torchvision's _compute_resized_output_size for Resize(size): the long side truncated."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = size, int(size * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def torch_resize(image: Image, sizes: tuple[int, int], mode: str, antialias: bool, native_uint8: bool = False,
                 keep_float: bool = False) -> np.ndarray:
    """torchvision's tensor resize: v1 (float32, clamp for bicubic, round, cast) or v2's uint8 kernel."""
    import torch

    tensor = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))[None]
    if not native_uint8:
        tensor = tensor.to(torch.float32)
    out = torch.nn.functional.interpolate(tensor, size=list(sizes), mode=mode, align_corners=False,
                                          antialias=antialias)
    if not native_uint8 and not keep_float:
        if mode == "bicubic":
            out = out.clamp(0, 255)
        out = out.round().to(torch.uint8)
    return np.asarray(out[0].permute(1, 2, 0).numpy())


# --- Pillow and OpenCV ---------------------------------------------------------------------------


def pillow_resize(image: Image, sizes: tuple[int, int], resample: str) -> Image:
    from PIL import Image as PILImage

    method = getattr(PILImage.Resampling, resample)
    return np.asarray(PILImage.fromarray(image).resize((sizes[1], sizes[0]), method))


def opencv_resize(image: Image, sizes: tuple[int, int], interpolation: str) -> Image:
    import cv2

    return np.asarray(cv2.resize(image, (sizes[1], sizes[0]), interpolation=getattr(cv2, interpolation)))


# --- the explanations, as arithmetic ---------------------------------------------------------------


def round_half_up(values: np.ndarray) -> Image:
    return np.asarray(np.clip(np.floor(values + 0.5), 0, 255), dtype=np.uint8)


def pillow_two_passes(image: Image, sizes: tuple[int, int], **attributes: Any) -> Image:
    """Pillow's order of work in exact arithmetic: the width first, rounded half up and clipped to
    uint8 (its clip8), then the height, rounded again; what is left is its fixed-point weights
    (22 bits). With ``exclude_outside=True``: Pillow drops the taps outside the image and
    renormalises."""
    across = round_half_up(resize(image.astype(np.float64), sizes=[sizes[1]], axes=[1], **attributes))
    return round_half_up(resize(across.astype(np.float64), sizes=[sizes[0]], axes=[0], **attributes))


def opencv_fixed_point_linear(image: Image, sizes: tuple[int, int]) -> Image:
    """OpenCV's uint8 INTER_LINEAR as its SIMD path does it (imgproc/src/resize.cpp): source
    positions (i + 0.5) * in/out - 0.5 in float32, clamped at the edges, 2 taps (no antialias);
    weights 1 - f and f each rounded to 11 bits (INTER_RESIZE_COEF_BITS); the horizontal pass
    kept as int32 (x 2048); the vertical pass ``((row0 >> 4) * w0 >> 16) + ((row1 >> 4) * w1 >> 16)``,
    then ``(sum + 2) >> 2``: truncations on the way, one rounding half up at the end."""

    def taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
        x = ((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5).astype(np.float32)
        left = np.floor(x).astype(np.int64)
        frac = (x - left).astype(np.float32)
        frac = np.where(left < 0, np.float32(0), frac)
        left = np.maximum(left, 0)
        frac = np.where(left >= n_in - 1, np.float32(0), frac)
        left = np.minimum(left, n_in - 1)
        weights = np.stack([np.rint((np.float32(1) - frac) * 2048), np.rint(frac * 2048)], 1).astype(np.int64)
        return np.stack([left, np.minimum(left + 1, n_in - 1)], 1), weights

    (ys, wy), (xs, wx) = taps(image.shape[0], sizes[0]), taps(image.shape[1], sizes[1])
    data = image.astype(np.int64)
    rows = data[:, xs[:, 0]] * wx[None, :, 0, None] + data[:, xs[:, 1]] * wx[None, :, 1, None]
    total = ((rows[ys[:, 0]] >> 4) * wy[:, 0, None, None] >> 16) + ((rows[ys[:, 1]] >> 4) * wy[:, 1, None, None] >> 16)
    return np.asarray(np.clip((total + 2) >> 2, 0, 255), dtype=np.uint8)


# --- the table ------------------------------------------------------------------------------------


@dataclass
class Row:
    case: str
    against: str
    sizes: str
    geomcli: Image
    other: Image | None  # None: the tool is missing
    why: str
    check: str = ""

    def figures(self) -> str:
        if self.other is None:
            return "(not installed)"
        if self.geomcli.shape != self.other.shape:
            return f"sizes differ: {self.geomcli.shape[:2]} vs {self.other.shape[:2]}"
        difference = np.abs(self.geomcli.astype(np.int16) - self.other.astype(np.int16))
        return f"{difference.max()} / {difference.mean():.3f} / {100 * np.mean(difference > 0):.1f}%"


def within(ours: np.ndarray, theirs: np.ndarray | None) -> str:
    if theirs is None:
        return "-"
    difference = np.abs(ours.astype(np.int16) - theirs.astype(np.int16))
    return f"max {difference.max()}, {100 * np.mean(difference > 0):.2f}% differ"


def available(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def rows() -> tuple[list[str], list[Row]]:
    notes: list[str] = []
    have_torch, have_cv2 = available("torch"), available("cv2")
    torch_call: Callable[..., np.ndarray | None] = torch_resize if have_torch else (lambda *a, **k: None)
    cv2_call: Callable[..., Image | None] = opencv_resize if have_cv2 else (lambda *a, **k: None)
    if not have_torch:
        notes.append("torch is not installed: its rows are empty")
    if not have_cv2:
        notes.append("OpenCV is not installed: its rows are empty")
    aa = {"mode": "linear", "antialias": True}
    aa_outside = {**aa, "exclude_outside": True}
    table: list[Row] = []

    # 1. ImageNet: Resize(256) of a 300x451 photo
    image = photo(300, 451)
    ours = geomcli_u8(image, (256, 256), keep_aspect_ratio_policy="not_smaller", **aa)
    tv = torchvision_size(300, 451, 256)
    tie = resize(np.zeros((512, 769, 1), np.uint8), sizes=[256, 256], axes=[0, 1],
                 keep_aspect_ratio_policy="not_smaller", mode="linear").shape[:2]
    table.append(Row("Resize(256) of 300×451", "torchvision `Resize(256)`: the size",
                     f"{ours.shape[0]}×{ours.shape[1]} vs {tv[0]}×{tv[1]}", ours, np.zeros((*tv, 3), np.uint8),
                     "ONNX scales both axes by 256/300 and rounds 451 × 256/300 = 384.85 half up; torchvision "
                     "truncates `int(256 * 451 / 300)`",
                     f"a tie, 512×769 (384.5): geomcli {tie[0]}×{tie[1]}, torchvision "
                     f"{'×'.join(map(str, torchvision_size(512, 769, 256)))}"))
    wide = (256, ours.shape[1])
    table.append(Row("Resize(256) of 300×451", "torch `interpolate` forced to 256×385", "256×385",
                     geomcli_u8(image, (256, 256), keep_aspect_ratio_policy="not_smaller", **aa_outside),
                     torch_call(image, wide, "bilinear", True),
                     "same size, other positions: ONNX samples the width with the policy's scale 256/300, torch "
                     "with 385/451; the gap grows to 0.17 px at the right edge (geomcli here with "
                     "`--exclude-outside`, to leave the borders out of it)",
                     "geomcli `--sizes 256,385` (stretch) `--exclude-outside`: "
                     + within(geomcli_u8(image, wide, **aa_outside), torch_call(image, wide, "bilinear", True))))
    # where the sizes agree (480x640 -> 256x341 either way), the width is still sampled otherwise
    agree = photo(480, 640)
    agree_tv = torchvision_size(480, 640, 256)
    agree_ours = geomcli_u8(agree, (256, 256), keep_aspect_ratio_policy="not_smaller", **aa_outside)
    agree_v1 = torch_call(agree, agree_tv, "bilinear", True)
    table.append(Row("Resize(256) of 480×640", "torchvision v1 (float32 tensor)",
                     f"{agree_ours.shape[0]}×{agree_ours.shape[1]} vs {agree_tv[0]}×{agree_tv[1]}", agree_ours,
                     agree_v1,
                     "the sizes agree, the positions do not: ONNX samples the width with the policy's scale "
                     "256/480, torch with 341/640 (geomcli here with `--exclude-outside`)",
                     "geomcli `--sizes 256,341` (stretch) `--exclude-outside`: "
                     + within(geomcli_u8(agree, agree_tv, **aa_outside), agree_v1)))
    at_tv = geomcli_u8(image, tv, **aa)
    exact_outside = geomcli_exact(image, tv, **aa_outside)
    v1 = torch_call(image, tv, "bilinear", True)
    v1_float = torch_call(image, tv, "bilinear", True, keep_float=True)
    gap = "-" if v1_float is None else f"{np.abs(exact_outside - v1_float).max():.1g}"
    table.append(Row("Resize(256), at torchvision's 256×384", "torchvision v1 (float32 tensor)", "256×384", at_tv, v1,
                     "the outermost ring of pixels: torch drops the filter's taps outside the image and "
                     "renormalises (ONNX `exclude_outside=1`); ONNX's default clamps them onto the edge pixel. "
                     "Inside, only float32 sums",
                     "geomcli `--exclude-outside`: " + within(geomcli_u8(image, tv, **aa_outside), v1)
                     + f" (float32 vs float64 before rounding: {gap} levels)"))
    v2 = torch_call(image, tv, "bilinear", True, native_uint8=True)
    two_passes = pillow_two_passes(image, tv, **aa_outside)
    table.append(Row("Resize(256), at torchvision's 256×384", "torchvision v2 (uint8 tensor, AVX2)", "256×384", at_tv,
                     v2, "torch's uint8 kernel works as Pillow does (next row): width, round, height, round",
                     "Pillow's two passes: " + within(two_passes, v2)))
    pil = pillow_resize(image, tv, "BILINEAR")
    table.append(Row("Resize(256), at torchvision's 256×384", "Pillow `BILINEAR` (torchvision on a PIL image)",
                     "256×384", at_tv, pil,
                     "the same filter, but Pillow resizes the width, rounds to uint8, then the height; it "
                     "renormalises at the borders as torch; 22-bit fixed-point weights",
                     "two passes rounded half up, `exclude_outside`: " + within(two_passes, pil)
                     + "; geomcli `--exclude-outside`: " + within(geomcli_u8(image, tv, **aa_outside), pil)))
    cv_linear = cv2_call(image, tv, "INTER_LINEAR")
    table.append(Row("Resize(256), at torchvision's 256×384", "OpenCV `INTER_LINEAR`", "256×384", at_tv, cv_linear,
                     "no antialias: 2 taps per axis however much it shrinks; then 11-bit weights and "
                     "truncating shifts",
                     "geomcli without `--antialias`: " + within(geomcli_u8(image, tv, mode="linear"), cv_linear)
                     + "; OpenCV's fixed point re-done: " + within(opencv_fixed_point_linear(image, tv), cv_linear)))

    # 2. a 2x downscale, linear, with and without antialias
    big = photo(600, 902)
    half = (300, 451)
    ours_aa = geomcli_u8(big, half, **aa)
    ours_plain = geomcli_u8(big, half, mode="linear")
    pil = pillow_resize(big, half, "BILINEAR")
    table.append(Row("2× down, linear + antialias", "Pillow `BILINEAR`", "600×902 → 300×451", ours_aa, pil,
                     "Pillow's two passes, each rounded to uint8; its border renormalisation",
                     "two passes rounded half up, `exclude_outside`: "
                     + within(pillow_two_passes(big, half, **aa_outside), pil)
                     + "; geomcli `--exclude-outside`: " + within(geomcli_u8(big, half, **aa_outside), pil)))
    torch_aa = torch_call(big, half, "bilinear", True)
    table.append(Row("2× down, linear + antialias", "torch `antialias=True` (float32)", "600×902 → 300×451", ours_aa,
                     torch_aa, "the border ring (torch renormalises)",
                     "geomcli `--exclude-outside`: " + within(geomcli_u8(big, half, **aa_outside), torch_aa)))
    area = cv2_call(big, half, "INTER_AREA")
    table.append(Row("2× down, linear + antialias", "OpenCV `INTER_AREA`", "600×902 → 300×451", ours_aa, area,
                     "a 2×2 box ([1, 1]/2 per axis) where the widened triangle is [1, 3, 3, 1]/8: at exactly 2× "
                     "INTER_AREA is linear *without* antialias",
                     "geomcli without `--antialias`: " + within(ours_plain, area) + "; rounded half up: "
                     + within(round_half_up(geomcli_exact(big, half, mode="linear")), area)))
    cv_linear = cv2_call(big, half, "INTER_LINEAR")
    table.append(Row("2× down, linear, no antialias", "OpenCV `INTER_LINEAR`", "600×902 → 300×451", ours_plain,
                     cv_linear,
                     "both average 2×2 pixels (weights 1/2, exact in 11 bits); OpenCV rounds a .5 up, geomcli "
                     "to even",
                     "geomcli's float64 rounded half up: "
                     + within(round_half_up(geomcli_exact(big, half, mode="linear")), cv_linear)))
    table.append(Row("2× down, linear, no antialias", "torch `antialias=False` (float32)", "600×902 → 300×451",
                     ours_plain, torch_call(big, half, "bilinear", False),
                     "none: the same average, rounded half to even (quarters are exact in float32)"))

    # 3. a 2x upscale, cubic
    double = (600, 902)
    ours_cubic = geomcli_u8(image, double, mode="cubic")
    keys = {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": True}
    pil = pillow_resize(image, double, "BICUBIC")
    table.append(Row("2× up, cubic", "Pillow `BICUBIC`", "300×451 → 600×902", ours_cubic, pil,
                     "Pillow's cubic has a = -0.5 (ONNX's default -0.75), renormalises at the borders, and "
                     "rounds and clips to uint8 between its two passes",
                     "two passes, a = -0.5, `exclude_outside`: " + within(pillow_two_passes(image, double, **keys), pil)
                     + "; one pass: " + within(round_half_up(geomcli_exact(image, double, **keys)), pil)))
    cv_cubic = cv2_call(image, double, "INTER_CUBIC")
    table.append(Row("2× up, cubic", "OpenCV `INTER_CUBIC`", "300×451 → 600×902", ours_cubic, cv_cubic,
                     "none here: OpenCV's cubic has a = -0.75, as ONNX, and clamps border taps as ONNX does",
                     "geomcli `--cubic-coeff-a -0.5`: "
                     + within(geomcli_u8(image, double, mode="cubic", cubic_coeff_a=-0.5), cv_cubic)))
    odd = (411, 726)  # 1.37x and 1.61x: weights that 11 bits do not hold exactly
    cv_odd = cv2_call(image, odd, "INTER_CUBIC")
    ours_odd = geomcli_u8(image, odd, mode="cubic")
    table.append(Row("1.37× / 1.61× up, cubic", "OpenCV `INTER_CUBIC`", "300×451 → 411×726", ours_odd, cv_odd,
                     "OpenCV's weights in 11-bit fixed point (INTER_RESIZE_COEF_BITS); the filter is ONNX's",
                     "-" if cv_odd is None
                     else f"{np.count_nonzero(ours_odd != cv_odd)} of {ours_odd.size} values differ"))
    tv_up = torch_call(image, double, "bicubic", True)
    table.append(Row("2× up, cubic", "torchvision v1 `Resize` bicubic (float32; antialias=True, its default)",
                     "300×451 → 600×902", ours_cubic, tv_up,
                     "with antialias torch takes its antialias kernel even to enlarge, and that one has a = -0.5 "
                     "(Pillow's) and renormalises at the borders",
                     "geomcli `--cubic-coeff-a -0.5 --exclude-outside`: "
                     + within(geomcli_u8(image, double, **keys), tv_up)))
    tv_up_v2 = torch_call(image, double, "bicubic", True, native_uint8=True)
    table.append(Row("2× up, cubic", "torchvision v2 bicubic (uint8 tensor)", "300×451 → 600×902", ours_cubic,
                     tv_up_v2, "torch's uint8 kernel, which v2 takes for bicubic on every CPU, works as Pillow does: "
                     "a = -0.5, width, round and clip, height, round",
                     "Pillow's two passes: " + within(pillow_two_passes(image, double, **keys), tv_up_v2)
                     + "; geomcli `--cubic-coeff-a -0.5 --exclude-outside`: "
                     + within(geomcli_u8(image, double, **keys), tv_up_v2)))
    table.append(Row("2× up, cubic", "torch bicubic, `antialias=False` (float32)", "300×451 → 600×902", ours_cubic,
                     torch_call(image, double, "bicubic", False),
                     "a = -0.75 and clamped border taps, as ONNX: float32 rounding only"))
    return notes, table


def render(table: list[Row]) -> str:
    lines = ["| resize | geomcli against | sizes | max / mean abs diff / values that differ | why | check |",
             "|---|---|---|---|---|---|"]
    for row in table:
        lines.append(f"| {row.case} | {row.against} | {row.sizes} | {row.figures()} | {row.why} | {row.check or '-'} |")
    return "\n".join(lines)


# --- timing ---------------------------------------------------------------------------------------


def timing(rounds: int) -> list[str]:
    """uint8 1024x1024x3 -> 224x224, linear with antialias: geomcli, Pillow and onnxruntime in turn."""
    from PIL import Image as PILImage

    data = photo(1024, 1024)
    picture = PILImage.fromarray(data)
    calls: dict[str, Callable[[], object]] = {
        "geomcli": lambda: resize(data, sizes=[224, 224], axes=[0, 1], mode="linear", antialias=True),
        "Pillow BILINEAR": lambda: picture.resize((224, 224), PILImage.Resampling.BILINEAR),
    }
    if available("onnxruntime"):
        import onnx
        import onnxruntime as ort
        from onnx import helper, numpy_helper

        node = helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], axes=[0, 1], mode="linear", antialias=1)
        graph = helper.make_graph(
            [node], "resize", [helper.make_tensor_value_info("X", onnx.TensorProto.UINT8, list(data.shape))],
            [helper.make_tensor_value_info("Y", onnx.TensorProto.UINT8, None)],
            [numpy_helper.from_array(np.array([224, 224], np.int64), "sizes")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]).SerializeToString()
        options = ort.SessionOptions()
        # its threads otherwise spin on after a call, and would slow the next engine in the round
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        calls["onnxruntime (no spinning)"] = lambda: session.run(None, {"X": data})
        spinning = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    times: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        call()
    load = os.getloadavg()[0]
    names = list(calls)
    for index in range(rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            for _ in range(3):
                start = time.perf_counter()
                calls[name]()
                times[name].append(time.perf_counter() - start)
    if "onnxruntime (no spinning)" in calls:  # as it is set up by default, on its own after the rounds
        spinning.run(None, {"X": data})
        times["onnxruntime (default), after"] = []
        for _ in range(3 * rounds):
            start = time.perf_counter()
            spinning.run(None, {"X": data})
            times["onnxruntime (default), after"].append(time.perf_counter() - start)
    ours = statistics.median(times["geomcli"])
    lines = [f"uint8 1024x1024x3 -> 224x224 linear antialias; {rounds} rounds of 3 calls each, alternating; "
             f"load average {load:.2f} -> {os.getloadavg()[0]:.2f}"]
    for name, values in times.items():
        quartiles = statistics.quantiles(values, n=4)
        median = statistics.median(values)
        lines.append(f"  {name:26} median {median * 1e3:7.2f} ms  (p25 {quartiles[0] * 1e3:.2f}, p75 "
                     f"{quartiles[2] * 1e3:.2f})  geomcli / this: {ours / median:.2f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--time", action="store_true", help="also time uint8 1024x1024x3 -> 224² side by side")
    parser.add_argument("--rounds", type=int, default=15, help="timing rounds (default 15)")
    options = parser.parse_args(argv)
    versions = [f"numpy {np.__version__}"]
    for module in ("PIL", "cv2", "torch", "onnxruntime"):
        if available(module):
            versions.append(f"{module} {sys.modules[module].__version__}")
    print(f"# {', '.join(versions)}; max / mean in uint8 levels")
    notes, table = rows()
    for note in notes:
        print(f"# {note}")
    print(render(table))
    if options.time:
        print()
        for line in timing(options.rounds):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
