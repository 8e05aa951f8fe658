"""Kernel speed: geomcli against onnxruntime, the ONNX reference evaluator and the memory floor.

Run from the repository root::

    python benchmarks/kernels.py            # the full run (a few minutes)
    python benchmarks/kernels.py --quick    # fewer repeats, about one minute
    python benchmarks/kernels.py --case s2d # only the cases whose name contains "s2d"

Every case is timed for each engine: the first call on its own (fresh output memory, cold
caches, lazy set-up), then the median of several more calls (the steady state). The floor is
the memory bandwidth the operator cannot beat: ``np.copyto`` of the output's size into a
preallocated array (for affine-grid, filling a preallocated array of the output shape).
"fresh" is the same into a new array each call: what a call that returns an array in new memory
pays first; past glibc's mmap threshold (32 MiB) a new array is new pages, which the kernel faults
in and zeroes, below it the memory of the last call comes back. Each case starts with nothing
kept (``reuse.release()``), and each timed result but the first is let go at once, so from the
third call on geomcli's new output takes the memory of the one before (geomcli.ops.reuse), as
onnxruntime's arena hands its outputs the same memory call after call; the first call, in the
"(1st)" column, pays for new pages. "out=" times geomcli writing into one
preallocated output (the ``out=`` argument): the work alone. geomcli, out=, the floor and fresh
are timed in rounds, one call of each in turn, so the ratios to the floor compare calls made
within milliseconds of each other; onnxruntime and the reference are timed after them, each on
its own (onnxruntime's threads spin on after a call and would slow the next one).
Each geomcli result is checked once per case against onnxruntime and the reference.

Cases and targets are those of issue 2, section 5. Nothing here is imported by ``geomcli``;
it needs numpy, onnx and onnxruntime only. The pieces (``CASES``, ``run_case``, ``render``)
are plain functions and data so a larger benchmark suite can import and reuse them.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Run from a clone without installing: make `import geomcli` find the package beside us.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import geomcli.ops.affine_grid as grid_ops
import geomcli.ops.center_crop_pad as crop_ops
import geomcli.ops.space_depth as space_depth_ops
from geomcli.ops import reuse

Inputs = dict[str, np.ndarray]


# --- the cases ----------------------------------------------------------------------


@dataclass
class Case:
    """One benchmark case: how to build its inputs and run each engine on them."""

    name: str
    group: str  # "crop-pad", "affine-grid" or "space-to-depth": picks the target
    make_inputs: Callable[[], Inputs]  # the ONNX node's inputs, by name
    geomcli: Callable[..., np.ndarray]  # (inputs, out=None): out is a preallocated output
    op: str  # the ONNX op type
    opset: int
    attributes: dict[str, Any] = field(default_factory=dict)
    exact: bool = True  # equal arrays, else allclose (float grids)


TARGETS = {"crop-pad": 1.6, "affine-grid": 3.0, "space-to-depth": 2.5}
FLOOR_KIND = {"crop-pad": "copy", "affine-grid": "write", "space-to-depth": "copy"}


def _crop_case(name: str, shape: tuple[int, ...], dtype: str, target: list[int], axes: list[int]) -> Case:
    def make_inputs() -> Inputs:
        rng = np.random.default_rng(42)
        data = rng.integers(0, 255, size=shape, dtype=np.uint8).astype(dtype, copy=False)
        return {"data": data, "shape": np.array(target, dtype=np.int64)}

    return Case(
        name,
        "crop-pad",
        make_inputs,
        lambda x, out=None: crop_ops.center_crop_pad(x["data"], x["shape"], axes, out=out),
        "CenterCropPad",
        18,
        {"axes": axes},
    )


def _grid_case(name: str, theta_shape: tuple[int, ...], size: list[int], align_corners: int) -> Case:
    def make_inputs() -> Inputs:
        rng = np.random.default_rng(42)
        spatial = theta_shape[1]
        theta = np.zeros(theta_shape, dtype=np.float32)
        # A mild random affine map near the identity: every term of the sum matters.
        theta[:, :, :spatial] = np.eye(spatial) + rng.uniform(-0.3, 0.3, size=(theta_shape[0], spatial, spatial))
        theta[:, :, spatial] = rng.uniform(-0.2, 0.2, size=(theta_shape[0], spatial))
        return {"theta": theta, "size": np.array(size, dtype=np.int64)}

    return Case(
        name,
        "affine-grid",
        make_inputs,
        lambda x, out=None: grid_ops.affine_grid(x["theta"], x["size"], align_corners=bool(align_corners), out=out),
        "AffineGrid",
        20,
        {"align_corners": align_corners},
        exact=False,
    )


def _s2d_case(name: str, shape: tuple[int, ...], dtype: str, blocksize: int, mode: str) -> Case:
    def make_inputs() -> Inputs:
        rng = np.random.default_rng(42)
        return {"data": rng.integers(0, 255, size=shape, dtype=np.uint8).astype(dtype, copy=False)}

    return Case(
        name,
        "space-to-depth",
        make_inputs,
        lambda x, out=None: space_depth_ops.space_to_depth(x["data"], blocksize, mode, out=out),  # type: ignore[arg-type]
        "SpaceToDepth",
        28,
        {"blocksize": blocksize, "mode": mode},
    )


# Issue 2, section 5: exactly these.
CASES: list[Case] = [
    _crop_case("crop f32 (8,3,2048,2048)->1536²", (8, 3, 2048, 2048), "float32", [1536, 1536], [2, 3]),
    _crop_case("pad  f32 (8,3,2048,2048)->2560²", (8, 3, 2048, 2048), "float32", [2560, 2560], [2, 3]),
    _crop_case("crop u8 4000x6000x3->3000²", (4000, 6000, 3), "uint8", [3000, 3000], [0, 1]),
    _grid_case("grid2d (8,2,3) 1024² ac=0", (8, 2, 3), [8, 3, 1024, 1024], 0),
    _grid_case("grid2d (8,2,3) 1024² ac=1", (8, 2, 3), [8, 3, 1024, 1024], 1),
    _grid_case("grid3d (2,3,4) 128³ ac=0", (2, 3, 4), [2, 1, 128, 128, 128], 0),
    _grid_case("grid3d (2,3,4) 128³ ac=1", (2, 3, 4), [2, 1, 128, 128, 128], 1),
    _s2d_case("s2d f32 (8,64,512²) b2 DCR", (8, 64, 512, 512), "float32", 2, "DCR"),
    _s2d_case("s2d f32 (8,64,512²) b2 CRD", (8, 64, 512, 512), "float32", 2, "CRD"),
    _s2d_case("s2d f32 (8,64,512²) b4 DCR", (8, 64, 512, 512), "float32", 4, "DCR"),
    _s2d_case("s2d f32 (8,64,512²) b4 CRD", (8, 64, 512, 512), "float32", 4, "CRD"),
    _s2d_case("s2d u8 (1,3,4096²) b2 DCR", (1, 3, 4096, 4096), "uint8", 2, "DCR"),
    _s2d_case("s2d u8 (1,3,4096²) b2 CRD", (1, 3, 4096, 4096), "uint8", 2, "CRD"),
]


# --- the engines --------------------------------------------------------------------


def _first_output(session: Any, inputs: Inputs) -> np.ndarray:
    return session.run(None, inputs)[0]  # type: ignore[no-any-return]


def one_node_model(case: Case, inputs: Inputs, opset: int, attributes: dict[str, Any]) -> onnx.ModelProto:
    """A model of the single node ``case.op``, typed from the actual inputs."""
    names = list(inputs)
    node = helper.make_node(case.op, names, ["output"], **attributes)
    # All three ops keep the type of their first input (data, or theta for AffineGrid).
    output_type = helper.np_dtype_to_tensor_dtype(inputs[names[0]].dtype)
    graph = helper.make_graph(
        [node],
        case.name,
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items()],
        [helper.make_tensor_value_info("output", output_type, None)],
    )
    # IR 10 and the op's own opset: onnxruntime 1.32 accepts both for all three ops.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def ort_runner(case: Case, inputs: Inputs) -> tuple[Callable[[], np.ndarray] | None, str]:
    """An onnxruntime call for the case, and a note on how it was built (or why it is missing)."""
    attempts = [(case.opset, case.attributes)]
    if case.op == "SpaceToDepth" and case.attributes.get("mode") == "DCR":
        # SpaceToDepth-13 has no mode attribute and is DCR: the fallback for older runtimes.
        attempts.append((13, {"blocksize": case.attributes["blocksize"]}))
    errors = []
    for opset, attributes in attempts:
        model = one_node_model(case, inputs, opset, attributes)
        options = ort.SessionOptions()
        try:
            session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception as error:  # onnxruntime raises its own untyped errors for unsupported ops
            errors.append(f"opset {opset}: {str(error).splitlines()[0][:80]}")
            continue
        note = f"opset {opset}" if opset == case.opset else f"opset {opset} (fallback: {'; '.join(errors)})"
        return functools.partial(_first_output, session, inputs), note
    return None, "; ".join(errors)


def reference_runner(case: Case, inputs: Inputs) -> Callable[[], np.ndarray]:
    evaluator = ReferenceEvaluator(one_node_model(case, inputs, case.opset, case.attributes))
    return lambda: evaluator.run(None, inputs)[0]  # type: ignore[index]


def floor_runner(case: Case, output_shape: tuple[int, ...], dtype: np.dtype,
                 fresh: bool = False) -> Callable[[], None]:
    """The memory floor: a copy of the output's size, or a fill of the output, into touched memory;
    ``fresh``: into a new array each call, which the OS must fault in (and zero) first, as a
    call that returns an array in new memory does."""
    target = None if fresh else np.ones(output_shape, dtype=dtype)

    def into() -> np.ndarray:
        return np.empty(output_shape, dtype=dtype) if target is None else target

    if FLOOR_KIND[case.group] == "write":
        return lambda: into().fill(0.5)
    source = np.full(output_shape, 2, dtype=dtype)
    return lambda: np.copyto(into(), source)


# --- timing -------------------------------------------------------------------------


@dataclass
class Timing:
    first: float  # seconds, the first call
    median: float  # seconds, the median of the calls after it
    repeats: int


def measure(call: Callable[[], Any], repeats: int, budget: float) -> tuple[Timing, Any]:
    """Time the first call, then at most ``repeats`` more, stopping early once past ``budget`` seconds.

    Returns the first call's result too (for the correctness check); later results are
    dropped at once so no more than two outputs are alive.
    """
    timings, firsts = measure_alongside({"call": call}, repeats, budget)
    return timings["call"], firsts["call"]


def measure_alongside(
    calls: dict[str, Callable[[], Any]], repeats: int, budget: float
) -> tuple[dict[str, Timing], dict[str, Any]]:
    """Time each call's first run, in turn, then rounds of one run of each, at most ``repeats``
    rounds, stopping early once past ``budget`` seconds: the VM's drift over the seconds this
    takes falls on all of them alike, so their ratios hold better than those of medians taken
    one after another (the floor of a case moved 1.4-2.5 ms from run to run). Only for calls
    that leave no threads spinning behind them: onnxruntime's slowed the call after it.
    Returns the timings and each call's first result; later results are dropped at once."""
    gc.collect()
    firsts, first_times = {}, {}
    for name, call in calls.items():
        start = time.perf_counter()
        firsts[name] = call()
        first_times[name] = time.perf_counter() - start
    times: dict[str, list[float]] = {name: [] for name in calls}
    spent, rounds = 0.0, 0
    while rounds < repeats and (rounds < 3 or spent < budget):
        for name, call in calls.items():
            start = time.perf_counter()
            result = call()
            elapsed = time.perf_counter() - start
            del result
            times[name].append(elapsed)
            spent += elapsed
        rounds += 1
    timings = {name: Timing(first_times[name], statistics.median(times[name]), rounds) for name in calls}
    return timings, firsts


def same(case: Case, expected: np.ndarray, found: Any) -> bool:
    found = np.asarray(found)
    if found.shape != expected.shape:
        return False
    if case.exact:
        return found.dtype == expected.dtype and bool(np.array_equal(found, expected))
    return bool(np.allclose(found, expected, rtol=1e-5, atol=1e-5))


@dataclass
class Result:
    case: Case
    floor: Timing
    fresh: Timing  # the floor into a new array each call
    engines: dict[str, Timing | None]  # geomcli, geomcli out=, onnxruntime, reference; None: cannot run
    checks: dict[str, bool | None]  # per other engine: does geomcli match it?
    notes: list[str]

    def ratio(self, engine: str) -> float | None:
        timing = self.engines.get(engine)
        return None if timing is None else timing.median / self.floor.median

    @property
    def target_met(self) -> bool:
        return self.met("geomcli")

    def met(self, engine: str) -> bool:
        """Within the target ratio of the floor, and no slower than onnxruntime and the reference."""
        ours = self.engines[engine]
        assert ours is not None
        others = [t.median for name, t in self.engines.items() if not name.startswith("geomcli") and t is not None]
        ratio = self.ratio(engine)
        return ratio is not None and ratio <= TARGETS[self.case.group] and all(ours.median <= t for t in others)


def run_case(case: Case, repeats: int, budget: float, log: Callable[[str], None]) -> Result:
    reuse.release()  # the first call pays for new memory, not the last case's kept outputs
    inputs = case.make_inputs()
    notes: list[str] = []
    engines: dict[str, Timing | None] = {}
    checks: dict[str, bool | None] = {}

    start = time.perf_counter()
    expected = case.geomcli(inputs)  # the first call: new memory, cold caches
    first = time.perf_counter() - start
    # into one output, touched once and reused by every call: the cost of the work alone
    out = np.ones_like(expected)
    timings = measure_alongside(
        {
            "geomcli": lambda: case.geomcli(inputs),
            "geomcli out=": functools.partial(case.geomcli, inputs, out=out),
            "floor": floor_runner(case, expected.shape, expected.dtype),
            "fresh": floor_runner(case, expected.shape, expected.dtype, fresh=True),
        },
        repeats,
        budget,
    )[0]  # their first results are not kept: geomcli's first, above, is the one checked
    engines["geomcli"] = Timing(first, timings["geomcli"].median, timings["geomcli"].repeats)
    engines["geomcli out="] = timings["geomcli out="]
    floor_timing, fresh_timing = timings["floor"], timings["fresh"]
    if not np.array_equal(out, expected, equal_nan=True):
        notes.append(f"{case.name}: geomcli with out= differs from geomcli")
    for name, timing in timings.items():
        log(f"  {name:<12}{timing.median * 1e3:9.1f} ms")
    del out, timings

    call, note = ort_runner(case, inputs)
    if case.op == "SpaceToDepth" or call is None:
        notes.append(f"onnxruntime: {note}")
    if call is None:
        engines["onnxruntime"] = checks["onnxruntime"] = None
    else:
        timing, found = measure(call, repeats, budget)
        engines["onnxruntime"] = timing
        checks["onnxruntime"] = same(case, expected, found)
        del found, call
        log(f"  onnxruntime {timing.median * 1e3:9.1f} ms")

    reference = reference_runner(case, inputs)
    timing, found = measure(reference, repeats, budget)
    engines["reference"] = timing
    checks["reference"] = same(case, expected, found)
    del found, reference
    log(f"  reference   {timing.median * 1e3:9.1f} ms")
    return Result(case, floor_timing, fresh_timing, engines, checks, notes)


# --- the table ----------------------------------------------------------------------


def _ms(timing: Timing | None) -> str:
    return "-" if timing is None else f"{timing.median * 1e3:.1f}"


def _first(timing: Timing | None) -> str:
    return "-" if timing is None else f"{timing.first * 1e3:.0f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _mark(check: bool | None) -> str:
    return {True: "ok", False: "DIFF", None: "-"}[check]


def render(results: Sequence[Result]) -> str:
    """A plain-text table: medians in ms (first call in brackets), then the ratios to the floor."""
    header = [
        "case",
        "floor",
        "fresh",
        "geomcli",
        "(1st)",
        "out=",
        "ort",
        "(1st)",
        "ref",
        "(1st)",
        "geo/fl",
        "out/fl",
        "ort/fl",
        "ref/fl",
        "target",
        "ort/geo",
        "ref/geo",
        "check",
        "met",
        "out= met",
    ]
    rows = [header]
    for r in results:
        geomcli, onnxrt, ref = r.engines["geomcli"], r.engines.get("onnxruntime"), r.engines["reference"]
        assert geomcli is not None
        rows.append(
            [
                r.case.name,
                f"{r.floor.median * 1e3:.1f} {FLOOR_KIND[r.case.group]}",
                f"{r.fresh.median * 1e3:.1f}",
                _ms(geomcli),
                _first(geomcli),
                _ms(r.engines["geomcli out="]),
                _ms(onnxrt),
                _first(onnxrt),
                _ms(ref),
                _first(ref),
                _x(r.ratio("geomcli")),
                _x(r.ratio("geomcli out=")),
                _x(r.ratio("onnxruntime")),
                _x(r.ratio("reference")),
                f"<={TARGETS[r.case.group]}",
                _x(None if onnxrt is None else onnxrt.median / geomcli.median),
                _x(None if ref is None else ref.median / geomcli.median),
                f"ort {_mark(r.checks.get('onnxruntime'))}, ref {_mark(r.checks.get('reference'))}",
                "yes" if r.target_met else "NO",
                "yes" if r.met("geomcli out=") else "NO",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for i, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def environment() -> str:
    return (
        f"python {platform.python_version()}, numpy {np.__version__}, onnx {onnx.__version__}, "
        f"onnxruntime {ort.__version__} (CPUExecutionProvider), {os.cpu_count()} cores, {platform.machine()}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats: about one minute")
    parser.add_argument("--case", default="", metavar="SUBSTRING", help="only the cases whose name contains this")
    args = parser.parse_args(argv)
    repeats, budget = (3, 0.5) if args.quick else (11, 4.0)

    chosen = [case for case in CASES if args.case in case.name]
    if not chosen:
        parser.error(f"no case name contains {args.case!r}; the cases are: " + ", ".join(c.name for c in CASES))

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    results = []
    started = time.perf_counter()
    for case in chosen:
        log(case.name)
        results.append(run_case(case, repeats, budget, log))
        gc.collect()

    print(f"# {environment()}")
    print(
        f"# medians of up to {repeats} calls after the first ({'--quick' if args.quick else 'full run'}), in ms; "
        "(1st) = the first call; fresh = the floor into a new array; out= = geomcli into a preallocated output; "
        "x/fl = median / floor; ort/geo, ref/geo > 1 means geomcli is faster"
    )
    print(render(results))
    notes = sorted({note for r in results for note in r.notes})
    for note in notes:
        print(f"# {note}")
    met = sum(r.target_met for r in results)
    print(f"# targets met: {met}/{len(results)}; took {time.perf_counter() - started:.0f} s")
    return 0 if all(all(c is not False for c in r.checks.values()) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
