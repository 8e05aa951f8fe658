"""Resize speed: geomcli against onnxruntime and Pillow, side by side from one run.

Run from the repository root::

    python benchmarks/resize.py              # medians of 10 calls per engine
    python benchmarks/resize.py --repeat 3   # quicker
    python benchmarks/resize.py --small      # every size / 8: that the script runs, not a result

Cases and targets are those of issue 21, section 4: float32 (1, 3, 1024, 1024) to 512x512,
linear with antialias, and to 2048x2048, cubic, faster than onnxruntime; a uint8 1024x1024x3
image (HWC, as geomcli reads images: axes 0 and 1) to 224x224, linear with antialias, faster
than onnxruntime and within 2x of Pillow's ``Image.resize(..., BILINEAR)`` (which antialiases).
onnxruntime runs with its default threads (one per core); geomcli with its default too. Each
engine is timed on its own: geomcli and Pillow on every case first, then onnxruntime (once a
session has run, its threads take CPU from the rest of the process); the first call of each is
left out (set-up, first-touch pages). Each result is checked
once against onnxruntime's: float32 to 1e-4; uint8 to 1, as onnxruntime truncates where geomcli
rounds half to even.
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


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple[int, ...]  # the data's, made by _photo_like (NCHW: made HWC, then moved)
    dtype: Any
    sizes: tuple[int, ...]
    axes: tuple[int, ...]
    attributes: dict[str, Any]
    pillow: bool = False  # an HWC uint8 image Pillow resizes too

    def data(self, shrink: int = 1) -> np.ndarray:
        shape = tuple(n // shrink if n > 3 else n for n in self.shape)
        if len(shape) == 4:  # (1, c, h, w) from (h, w, c)
            image = _photo_like((shape[2], shape[3], shape[1]), self.dtype)
            return np.ascontiguousarray(image.transpose(2, 0, 1)[None])
        return _photo_like(shape, self.dtype)


def _photo_like(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Smooth gradients plus noise: the kind of data a resize meets, not a constant."""
    rng = np.random.default_rng(21)
    ramp = np.add.outer(np.linspace(0, 1, shape[0]), np.linspace(0, 1, shape[1]))
    ramp = ramp.reshape(shape[:2] + (1,) * (len(shape) - 2))
    values = 0.4 * ramp + 0.2 * rng.random(shape)
    if np.dtype(dtype).kind == "u":
        return np.asarray(values * 255, dtype=dtype)
    return np.asarray(values, dtype=dtype)


CASES = [
    Case("f32 1x3x1024² -> 512² linear aa", (1, 3, 1024, 1024), np.float32, (512, 512), (2, 3),
         {"mode": "linear", "antialias": 1}),
    Case("f32 1x3x1024² -> 2048² cubic", (1, 3, 1024, 1024), np.float32, (2048, 2048), (2, 3), {"mode": "cubic"}),
    Case("u8 1024²x3 HWC -> 224² linear aa", (1024, 1024, 3), np.uint8, (224, 224), (0, 1),
         {"mode": "linear", "antialias": 1}, pillow=True),
]


def median_ms(call: Callable[[], object], repeat: int) -> float:
    # set-up, first touch, and as many calls again untimed, for every engine alike: some days the
    # first 15-20 calls of one run were 1.5-3x slower (geomcli 3.4-6.8 ms, then 1.9 from the 19th),
    # which a median of 20 then measured (the same at afe2088, whose runs had given 2.0-2.5)
    for _ in range(1 + repeat):
        call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def onnxruntime_call(case: Case, data: np.ndarray, sizes: tuple[int, ...]) -> Callable[[], np.ndarray]:
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    element = helper.np_dtype_to_tensor_dtype(data.dtype)
    node = helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], axes=list(case.axes), **case.attributes)
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("X", element, list(data.shape))],
        [helper.make_tensor_value_info("Y", element, None)],
        [numpy_helper.from_array(np.array(sizes, dtype=np.int64), "sizes")])
    model = helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 19)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda: np.asarray(session.run(None, {"X": data})[0])


def pillow_call(case: Case, data: np.ndarray, sizes: tuple[int, ...]) -> Callable[[], object] | None:
    if not case.pillow:
        return None
    from PIL import Image

    image = Image.fromarray(data)
    width_height = (sizes[1], sizes[0])
    return lambda: image.resize(width_height, Image.Resampling.BILINEAR)


def run(repeat: int, shrink: int = 1) -> list[str]:
    lines = [f"{'case':36} {'geomcli':>10} {'onnxruntime':>12} {'ratio':>6} {'Pillow':>9} {'ratio':>6}  check"]
    timed = []
    # geomcli and Pillow on every case first, then onnxruntime: once a session has run, its
    # threads take CPU from the rest of the process (geomcli took 4.0 ms instead of 2.2 after
    # one, even once it was dropped)
    for case in CASES:
        data = case.data(shrink)
        sizes = tuple(n // shrink for n in case.sizes)

        def ours(data: np.ndarray = data, case: Case = case, sizes: tuple[int, ...] = sizes) -> np.ndarray:
            return resize(data, sizes=list(sizes), axes=list(case.axes), **case.attributes)

        pillow = pillow_call(case, data, sizes)
        timed.append((case, data, sizes, ours, median_ms(ours, repeat),
                      median_ms(pillow, repeat) if pillow is not None else None))
    for case, data, sizes, ours, geomcli_ms, pillow_ms in timed:
        theirs = onnxruntime_call(case, data, sizes)
        ort_ms = median_ms(theirs, repeat)
        difference = np.abs(ours().astype(np.float64) - theirs().astype(np.float64)).max()
        check = f"max |geomcli - ort| {difference:.2g}"
        pillow_text = f"{pillow_ms:7.1f}ms {geomcli_ms / pillow_ms:5.2f}x" if pillow_ms else f"{'-':>9} {'-':>6}"
        lines.append(f"{case.name:36} {geomcli_ms:8.1f}ms {ort_ms:10.1f}ms {geomcli_ms / ort_ms:5.2f}x "
                     f"{pillow_text}  {check}")
    lines.append("ratio: geomcli's time over the other's (below 1: geomcli is faster); medians of "
                 f"{repeat} calls, {os.cpu_count()} CPUs")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=10, help="timed calls per engine (default 10)")
    parser.add_argument("--small", action="store_true", help="every size divided by 8 (a check that it runs)")
    options = parser.parse_args(argv)
    for line in run(options.repeat, 8 if options.small else 1):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
