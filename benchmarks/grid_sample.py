"""GridSample speed: geomcli against onnxruntime (and PyTorch and OpenCV where importable), side by side.

Run from the repository root::

    python benchmarks/grid_sample.py              # the anchors of issue 20 (about a minute)
    python benchmarks/grid_sample.py --repeats 3  # quicker, noisier
    python benchmarks/grid_sample.py --size 256   # smaller images

The cases: float32 (1, 3, S, S) sampled with a 30° rotation grid (made by
``geomcli.ops.affine_grid``, not timed) in linear, cubic and nearest mode with zeros padding,
against onnxruntime, PyTorch's ``grid_sample`` and OpenCV's ``remap`` with float maps (the
grid's positions in pixels, made once, not timed; on an S×S×3 image, OpenCV's layout); and a
uint8 S×S×3 warp by the same rotation (affine_grid_sample from theta, timed as the warp command
does it: the image's (1, 3, S, S) view sampled where it lies into an S×S×3 result, the grid's
coordinates made point by point in the kernel; then grid_sample of a grid made beforehand, and on
a (1, 3, S, S) copy), against ``cv2.warpAffine`` with the same matrix. Each
engine runs at 1 and 2 threads; the engines take turns, one call each per round, and each cell
is the median of the rounds. "geomcli" is the kernel as installed (its compiled path where the
extension is built), "numpy" the same kernel with the extension set aside. Each geomcli result
is checked once against onnxruntime before timing.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

# Run from a clone without installing: make `import geomcli` find the package beside us.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from geomcli.ops import grid_sample as grid_sample_module  # noqa: E402
from geomcli.ops.affine_grid import affine_grid  # noqa: E402
from geomcli.ops.grid_sample import affine_grid_sample, grid_sample  # noqa: E402

TURN = 30.0  # degrees
TARGETS = "linear < onnxruntime and < torch; cubic < onnxruntime and < torch; u8 warp <= 3x cv2.warpAffine"


def optional(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        return None


def theta_of(degrees: float) -> np.ndarray:
    a = math.radians(degrees)
    return np.array([[[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0]]], np.float32)


def onnxruntime_session(mode: str, threads: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    import onnxruntime
    from onnx import TensorProto, helper

    node = helper.make_node("GridSample", ["X", "G"], ["Y"], mode=mode, padding_mode="zeros", align_corners=0)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, None),
                                            helper.make_tensor_value_info("G", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return lambda data, grid: session.run(None, {"X": data, "G": grid})[0]


def torch_call(torch: Any, mode: str, threads: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    name = {"linear": "bilinear", "cubic": "bicubic", "nearest": "nearest"}[mode]

    def run(data: np.ndarray, grid: np.ndarray) -> np.ndarray:
        torch.set_num_threads(threads)
        with torch.no_grad():
            result = torch.nn.functional.grid_sample(torch.from_numpy(data), torch.from_numpy(grid), mode=name,
                                                     padding_mode="zeros", align_corners=False)
        out: np.ndarray = result.numpy()
        return out

    return run


def numpy_path(call: Callable[[], np.ndarray]) -> np.ndarray:
    """``call()`` with the compiled extension set aside: geomcli's numpy path."""
    kept = grid_sample_module._compiled
    grid_sample_module._compiled = None
    try:
        return call()
    finally:
        grid_sample_module._compiled = kept


def remap_call(cv2: Any, mode: str, threads: int, image: np.ndarray,
               grid: np.ndarray) -> Callable[[], np.ndarray]:
    """cv2.remap of an H×W×C image with float32 maps: the grid's positions in pixels
    (align_corners=0), zeros outside."""
    height, width = image.shape[:2]
    map_x = ((grid[0, ..., 0].astype(np.float64) + 1) * width - 1) / 2
    map_y = ((grid[0, ..., 1].astype(np.float64) + 1) * height - 1) / 2
    map_x, map_y = map_x.astype(np.float32), map_y.astype(np.float32)
    interpolation = {"linear": cv2.INTER_LINEAR, "cubic": cv2.INTER_CUBIC, "nearest": cv2.INTER_NEAREST}[mode]

    def run() -> np.ndarray:
        cv2.setNumThreads(threads)
        result: np.ndarray = cv2.remap(image, map_x, map_y, interpolation, borderMode=cv2.BORDER_CONSTANT,
                                       borderValue=0)
        return result

    return run


def pixel_matrix(theta: np.ndarray, height: int, width: int) -> np.ndarray:
    """theta (normalised output -> normalised input, align_corners=0) as a 2x3 map of output pixel
    (x, y) to input pixel: what cv2.warpAffine takes with WARP_INVERSE_MAP."""
    def to_normalised(length: int) -> tuple[float, float]:  # g = (2i + 1)/L - 1 = a·i + b
        return 2.0 / length, 1.0 / length - 1.0

    def to_pixels(length: int) -> tuple[float, float]:  # x = ((g + 1)·L - 1)/2 = c·g + d
        return length / 2.0, (length - 1) / 2.0

    (ax, bx), (ay, by) = to_normalised(width), to_normalised(height)
    (cx, dx), (cy, dy) = to_pixels(width), to_pixels(height)
    t = theta[0].astype(np.float64)
    into = np.array([[ax, 0, bx], [0, ay, by], [0, 0, 1]])
    back = np.array([[cx, 0, dx], [0, cy, dy], [0, 0, 1]])
    matrix: np.ndarray = (back @ np.vstack([t, [0, 0, 1]]) @ into)[:2]
    return matrix


def median_ms(runs: list[float]) -> float:
    return statistics.median(runs) * 1e3


def time_rounds(calls: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Each call once (warm-up), then ``repeats`` rounds of one call each in turn: medians in ms."""
    for call in calls.values():
        call()
    runs: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            runs[name].append(time.perf_counter() - start)
    return {name: median_ms(times) for name, times in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="image height and width (1024)")
    parser.add_argument("--repeats", type=int, default=10, help="timed rounds per case (10)")
    parser.add_argument("--threads", default="1,2", help="thread counts to time (1,2)")
    args = parser.parse_args()
    size, repeats = args.size, args.repeats
    thread_counts = [int(t) for t in args.threads.split(",")]
    torch, cv2 = optional("torch"), optional("cv2")

    rng = np.random.default_rng(0)
    theta = theta_of(TURN)
    grid = affine_grid(theta, [1, 3, size, size])
    data = rng.random((1, 3, size, size), dtype=np.float32)
    image = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)

    compiled = grid_sample_module._compiled is not None
    print(f"GridSample, float32 (1, 3, {size}, {size}), {TURN:g}° rotation grid, zeros padding; "
          f"medians of {repeats} rounds (ms); ratio = geomcli / other, below 1 is faster")
    print(f"targets: {TARGETS}")
    print(f"geomcli {'compiled' if compiled else 'numpy (the extension is not built)'}, numpy {np.__version__}, "
          f"onnxruntime {__import__('onnxruntime').__version__}"
          + (f", torch {torch.__version__}" if torch else ", torch not installed")
          + (f", opencv {cv2.__version__}" if cv2 else ", opencv not installed"))
    header = f"{'case':<16}{'threads':>8}{'geomcli':>9}{'numpy':>8}{'ratio':>7}{'onnxrt':>8}{'ratio':>7}"
    header += f"{'torch':>8}{'ratio':>7}" if torch else ""
    header += f"{'cv2':>8}{'ratio':>7}" if cv2 else ""
    print(header)
    hwc = np.ascontiguousarray(data[0].transpose(1, 2, 0))

    for mode in ("linear", "cubic", "nearest"):
        for threads in thread_counts:
            ort = onnxruntime_session(mode, threads)
            calls: dict[str, Callable[[], Any]] = {
                "geomcli": lambda: grid_sample(data, grid, mode, threads=threads),  # noqa: B023
                "numpy": lambda: numpy_path(lambda: grid_sample(data, grid, mode, threads=threads)),  # noqa: B023
                "onnxruntime": lambda: ort(data, grid),  # noqa: B023
            }
            if torch:
                calls["torch"] = lambda: torch_call(torch, mode, threads)(data, grid)  # noqa: B023
            if cv2:
                calls["cv2"] = remap_call(cv2, mode, threads, hwc, grid)
            ours = calls["geomcli"]()
            np.testing.assert_allclose(ours, calls["onnxruntime"](), rtol=1e-4, atol=1e-4)
            np.testing.assert_array_equal(ours, calls["numpy"]())
            ms = time_rounds(calls, repeats)
            row = f"{mode:<16}{threads:>8}{ms['geomcli']:>9.1f}"
            for other in ("numpy", "onnxruntime", "torch", "cv2"):
                if other in ms:
                    row += f"{ms[other]:>8.1f}{ms['geomcli'] / ms[other]:>7.2f}"
            print(row, flush=True)

    # the uint8 warp: H×W×3 seen as (1, 3, H, W), the grid made and applied as the warp command does
    # (into an H×W×3 result); and the same image copied channels-first
    batch = np.ascontiguousarray(image.transpose(2, 0, 1))[None]
    hwc_view = image.transpose(2, 0, 1)[None]
    result = np.empty_like(image)
    result_view = result.transpose(2, 0, 1)[None]
    matrix = pixel_matrix(theta, size, size)
    # the matrix is the grid's map in pixels: check it on the grid itself (float32 grid: ~1e-4 px)
    rows, cols = np.mgrid[0:size, 0:size]
    mapped = np.einsum("ij,jhw->hwi", matrix, np.stack([cols, rows, np.ones_like(rows)]).astype(np.float64))
    unnormalised = (grid[0].astype(np.float64) + 1) * size / 2 - 0.5
    assert np.abs(mapped - unnormalised).max() < 1e-3
    print(f"\nuint8 warp {size}x{size}x3, linear, zeros: affine_grid_sample (geomcli) "
          f"against cv2.warpAffine (INTER_LINEAR, WARP_INVERSE_MAP, BORDER_CONSTANT)")
    print(f"{'case':<16}{'threads':>8}{'geomcli':>9}" + (f"{'cv2':>8}{'ratio':>7}" if cv2 else "  (no opencv)"))
    for threads in thread_counts:
        def warp(threads: int = threads) -> np.ndarray:  # as the warp command: its grid made as it goes
            affine_grid_sample(hwc_view, theta, (1, 3, size, size), threads=threads, out=result_view)
            return result

        def sample(threads: int = threads) -> np.ndarray:
            return grid_sample(hwc_view, grid, threads=threads, out=result_view)

        def sample_nchw(threads: int = threads) -> np.ndarray:
            return grid_sample(batch, grid, threads=threads)

        calls = {"geomcli": warp, "sample": sample, "sample_nchw": sample_nchw}
        if cv2:
            def opencv(threads: int = threads) -> np.ndarray:
                cv2.setNumThreads(threads)
                flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
                result: np.ndarray = cv2.warpAffine(image, matrix, (size, size), flags=flags,
                                                    borderMode=cv2.BORDER_CONSTANT, borderValue=0)
                return result

            calls["cv2"] = opencv
            assert np.array_equal(warp(), sample_nchw()[0].transpose(1, 2, 0))
            difference = np.abs(warp().astype(int) - opencv().astype(int))
            print(f"  (cv2's fixed-point result differs from ours by at most {difference.max()} levels)")
        ms = time_rounds(calls, repeats)
        for name, key in (("u8 warp", "geomcli"), ("u8 sample only", "sample"), ("u8 sample NCHW", "sample_nchw")):
            row = f"{name:<16}{threads:>8}{ms[key]:>9.1f}"
            if cv2:
                row += f"{ms['cv2']:>8.1f}{ms[key] / ms['cv2']:>7.2f}"
            print(row, flush=True)


if __name__ == "__main__":
    main()
