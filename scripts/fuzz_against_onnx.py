"""Cross-check the command line against the ONNX graph it claims to reproduce.

    python scripts/fuzz_against_onnx.py [--cases 400] [--seed 0] [--only resize,chain,...] [--keep DIR] [-v]

A run of --cases takes about a second a case. Each case writes a random input (.npy of every
dtype the CLI takes, bfloat16 too; a zarr of random chunks; a grey, RGB, RGBA or 16-bit PNG; a
TIFF stack of one series or of a series per page), runs ``python -m geomcli <command> ... --json``
on it (resize, crop-pad, space-to-depth, depth-to-space, grid-sample, affine-grid, warp, chain),
reads the written file back, and builds the graph the same run is in ONNX with ``onnx.helper``
(Resize-19 with every attribute, CenterCropPad-18, SpaceToDepth/DepthToSpace-28, GridSample-22,
AffineGrid-20; images as their H and W axes, or as (N, C, H, W)), run in onnxruntime and in
``onnx.reference.ReferenceEvaluator``. Per case:

- when onnxruntime and the reference agree, geomcli must agree with them: else a MISMATCH;
- when they disagree, or one of them has no kernel, geomcli must agree with one of them, or with
  a stand-in the verdict names: ``ort float`` / ``ref float64`` (the graph on the data as
  floats, rounded half to even and saturated once: geomcli's integer rule, where onnxruntime
  truncates and the reference weighs integers in their own type), ``decided`` (the reference
  asked as help(geomcli.resize) decided where the two differ: align_corners and
  tf_crop_and_resize divide by the output length less one; pytorch_half_pixel reads 0 on an
  output of length 1), ``ort 2-D`` (a 1-D resize lifted to (1, n) for onnxruntime, which runs
  no 1-D linear or cubic) or ``closed form`` (docs/spec/NOTES.md's AffineGrid, length 1 included).
  Where none of them applies (antialias with those divisions) the case is ``unverified``;
- geomcli refusing what either of them runs is a MISMATCH (an empty result in a PNG or TIFF,
  which cannot hold one, is not);
- the CLI's result equals the Python API's on the same array, bit for bit (``chain``: equals the
  steps run one after another through .npy files), and the --json record's output shape and
  dtype are the written file's.

Values agree within two units in the last place of float16 and bfloat16, within 1e-5 of the
data's range for float32 and float64 (onnxruntime and the reference weigh in float32), and
within 1 for integers. Prints each mismatch with its command, then the cases run per operator
and their verdicts; exits 1 if any case mismatched. Seeded: ``--seed S --first K --cases 1``
replays case K of seed S (``--keep DIR`` keeps its files).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any

import imagecodecs
import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import tifffile
from onnx import helper
from onnx.reference import ReferenceEvaluator
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import geomcli  # noqa: E402

DTYPES = ["uint8", "int8", "uint16", "int16", "int32", "int64", "float16", "float32", "float64", "bfloat16"]
FLOATS = ["float16", "float32", "float64", "bfloat16"]
# binary fractions: float32 holds them exactly, so no tie hangs on how a decimal is read
NICE_SCALES = [0.25, 0.375, 0.5, 0.625, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0]
# decimals float32 rounds: geomcli reads them as the decimal they print as (help(geomcli.resize))
DECIMAL_SCALES = [0.3, 0.45, 0.6, 0.7, 0.9, 1.1, 1.3, 2.2]
THREADS = "2"  # the kernels' threaded paths, whose results must not depend on the count
ROI_VALUES = [-0.25, -0.125, 0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25]


def as_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def random_data(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    kind = as_dtype(dtype)
    if dtype in FLOATS:
        return rng.uniform(-100, 100, shape).astype(kind)
    info = np.iinfo(kind)
    low, high = max(int(info.min), -1_000_000), min(int(info.max), 1_000_000)
    return rng.integers(low, high, shape, endpoint=True).astype(kind)


def save_npy(path: Path, array: np.ndarray) -> None:
    if array.dtype == ml_dtypes.bfloat16:
        # np.save writes '<V2' for bfloat16, which reads back as raw bytes; the name round-trips
        with open(path, "wb") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "bfloat16", "fortran_order": False,
                                                     "shape": array.shape})
            f.write(np.ascontiguousarray(array).tobytes())
    else:
        np.save(path, array)


def load(path: Path) -> np.ndarray:
    if path.suffix == ".npy":
        return np.asarray(np.load(path))
    if path.suffix == ".zarr":
        import zarr

        return np.asarray(zarr.open_array(str(path), mode="r")[...])
    if path.suffix in (".tif", ".tiff"):
        with tifffile.TiffFile(path) as tif:
            axes = tif.series[0].axes
        array = np.asarray(tifffile.imread(path))
        # a stack whose channels grew is written ZCYX (geomcli's NCHW): compared channels last
        return np.moveaxis(array, axes.index("C"), -1) if "C" in axes and array.ndim == len(axes) else array
    if path.suffix == ".png":
        return np.asarray(imagecodecs.png_decode(path.read_bytes()))
    with Image.open(path) as image:
        return np.asarray(image)


# --- ONNX -----------------------------------------------------------------------------------


def tensor_type(dtype: np.dtype) -> int:
    return int(helper.np_dtype_to_tensor_dtype(dtype))


def make_model(nodes: list[onnx.NodeProto], feeds: dict[str, np.ndarray], output: str, output_dtype: np.dtype,
               opset: int, constants: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info(name, tensor_type(a.dtype), a.shape) for name, a in feeds.items()]
    initializers = [onnx.numpy_helper.from_array(a, name) for name, a in (constants or {}).items()]
    graph = helper.make_graph(nodes, "case", inputs, [helper.make_tensor_value_info(output, tensor_type(output_dtype),
                                                                                    None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray | str:
    if any(a.dtype == ml_dtypes.bfloat16 for a in feeds.values()):
        return "onnxruntime: no bfloat16 feeds from numpy"
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return np.asarray(session.run(None, feeds)[0])
    except Exception as e:  # noqa: BLE001 - any refusal of onnxruntime's is a result to compare
        return f"onnxruntime: {str(e).splitlines()[0][:160]}"


def run_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray | str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its divisions by zero (AffineGrid on length 1)
            outputs: Any = ReferenceEvaluator(model).run(None, feeds)
            return np.asarray(outputs[0])
    except Exception as e:  # noqa: BLE001 - as run_ort
        return f"reference: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def in_float(case: Case, runner: Callable[[onnx.ModelProto, dict[str, np.ndarray]], np.ndarray | str],
             work: np.dtype | None = None) -> np.ndarray | str:
    """``runner`` on the data as float32 (float64 beside a float64 grid), converted once (integers
    rounded half to even and saturated): what geomcli promises for integers, bfloat16 and
    float16, where onnxruntime truncates or has no kernel and the reference weighs integers
    in their own type."""
    grid = case.feeds.get("grid")
    if work is None:
        work = np.dtype(np.float64) if grid is not None and grid.dtype == np.float64 else np.dtype(np.float32)
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    for value in [*model.graph.input, *model.graph.output]:
        if value.name in ("X", "Y"):
            value.type.tensor_type.elem_type = tensor_type(work)
    result = runner(model, dict(case.feeds, X=case.feeds["X"].astype(work)))
    if isinstance(result, str):
        return result
    return case.from_onnx(converted(result, case.dtype))


def lifted_resize(case: Case) -> np.ndarray | str:
    """onnxruntime on a 1-D Resize lifted to (1, n) with axes [1] (its linear and cubic take no 1-D
    input), the data as float32, converted once as :func:`in_float`: where the reference runs
    alone, a second oracle (seed 171, case 53: the reference's taps one pixel off)."""
    data = case.feeds.get("X")
    if case.operator != "resize" or case.model is None or data is None or data.ndim != 1:
        return "onnxruntime lifted: not a 1-D resize"
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    node = model.graph.node[0]
    kept = [attribute for attribute in node.attribute if attribute.name != "axes"]
    del node.attribute[:]
    node.attribute.extend([*kept, helper.make_attribute("axes", [1])])
    for value in [*model.graph.input, *model.graph.output]:
        if value.name in ("X", "Y"):
            value.type.tensor_type.elem_type = tensor_type(np.dtype(np.float32))
    model.graph.input[0].type.tensor_type.shape.dim.insert(0, onnx.TensorShapeProto.Dimension(dim_value=1))
    result = run_ort(model, dict(case.feeds, X=data.astype(np.float32)[None]))
    return result if isinstance(result, str) else converted(result[0], case.dtype)


def converted(result: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind not in "iu":
        return result.astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(np.rint(result.astype(np.float64)), info.min, info.max).astype(dtype)


# --- comparison -----------------------------------------------------------------------------


def difference(found: np.ndarray, expected: np.ndarray, dtype: np.dtype) -> str | None:
    """Why ``found`` (geomcli's, of ``dtype``) is not ``expected``, or None when it is."""
    if found.shape != expected.shape:
        return f"shape {found.shape} != {expected.shape}"
    if found.size == 0:
        return None
    a, b = found.astype(np.float64), expected.astype(np.float64)
    if dtype.kind in "iu":
        tolerance = 1.0
    else:
        eps = {"float16": 2 ** -10, "bfloat16": 2 ** -7}.get(dtype.name, 5e-6)
        tolerance = 2 * eps * max(1.0, float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0)))
    both_nan = np.isnan(a) & np.isnan(b)
    bad = ~both_nan & ~(np.abs(a - b) <= tolerance)
    if not bad.any():
        return None
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{int(bad.sum())} of {bad.size} differ, first at {at}: {a[at]!r} != {b[at]!r}"


@dataclass
class Case:
    operator: str  # the counter's key
    description: str
    files: dict[str, np.ndarray]  # input file name -> what it holds
    command: list[str]  # geomcli's arguments; the output is {out}
    output: str  # the output's file name
    model: onnx.ModelProto | None
    feeds: dict[str, np.ndarray]
    api: Callable[[], np.ndarray] | None  # the Python API on the same array
    dtype: np.dtype  # the result's
    # what the ONNX result must be turned into to be the file's (images: drop the batch axis)
    from_onnx: Callable[[np.ndarray], np.ndarray] = lambda a: a
    oracle: Callable[[], np.ndarray | str] | None = None  # a closed form, where the spec needs one
    steps: list[list[str]] = field(default_factory=list)  # chain: each step as its own command
    writers: dict[str, Callable[[Path, np.ndarray], None]] = field(default_factory=dict)


# --- case makers ----------------------------------------------------------------------------


def cli_axes(rng: np.random.Generator, axes: list[int], rank: int) -> str:
    return ",".join(str(a - rank if rng.random() < 0.3 else a) for a in axes)


def numbers(values: Any) -> str:
    return ",".join(repr(float(v)) if not float(v).is_integer() else str(int(v)) for v in values)


def resize_attributes(rng: np.random.Generator, dtype: str, naxes: int) -> tuple[dict[str, Any], list[str], str]:
    """Random Resize-19 attributes and inputs: (kernel keywords, CLI options, a description)."""
    mode = str(rng.choice(["nearest", "linear", "cubic"]))
    transform = str(rng.choice(["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                "asymmetric", "tf_crop_and_resize"]))
    kw: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": transform}
    cli = [f"--mode={mode}", f"--coordinate-transformation-mode={transform}"]
    if rng.random() < 0.5:
        pool = DECIMAL_SCALES if rng.random() < 0.2 else NICE_SCALES
        kw["scales"] = [float(rng.choice(pool)) for _ in range(naxes)]
        cli.append(f"--scales={numbers(kw['scales'])}")
    else:
        kw["sizes"] = [int(s) for s in rng.integers(1, 10, naxes)]
        cli.append(f"--sizes={','.join(map(str, kw['sizes']))}")
        policy = str(rng.choice(["stretch", "not_larger", "not_smaller"]))
        kw["keep_aspect_ratio_policy"] = policy
        cli.append(f"--keep-aspect-ratio-policy={policy}")
    if transform == "tf_crop_and_resize":
        starts = rng.choice(ROI_VALUES[:8], naxes)
        ends = rng.choice(ROI_VALUES[4:], naxes)
        kw["roi"] = [float(v) for v in [*starts, *ends]]
        cli.append(f"--roi={numbers(kw['roi'])}")
        # one the output's dtype holds: the CLI refuses -3.5 for integers (as --fill), uint8 -3 too
        outside = {"u": [0.0, 7.0, 3.0], "i": [0.0, 7.0, -3.0]}.get(dtype[0], [0.0, 7.0, -3.5])
        kw["extrapolation_value"] = float(rng.choice(outside))
        cli.append(f"--extrapolation-value={numbers([kw['extrapolation_value']])}")
    if mode == "nearest":
        kw["nearest_mode"] = str(rng.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]))
        cli.append(f"--nearest-mode={kw['nearest_mode']}")
    else:
        if mode == "cubic":
            kw["cubic_coeff_a"] = float(rng.choice([-0.75, -0.5, -0.625]))
            cli.append(f"--cubic-coeff-a={numbers([kw['cubic_coeff_a']])}")
        if rng.random() < 0.3:
            kw["exclude_outside"] = True
            cli.append("--exclude-outside")
        if rng.random() < 0.4:
            kw["antialias"] = True
            cli.append("--antialias")
    return kw, cli, " ".join(cli)


def resize_node(kw: dict[str, Any], axes: list[int] | None, dtype: np.dtype,
                feeds: dict[str, np.ndarray]) -> onnx.NodeProto:
    """A Resize-19 node of ``kw``; its roi, scales and sizes are added to ``feeds``."""
    names = ["X", "", "", ""]
    if "roi" in kw:
        feeds["roi"] = np.array(kw["roi"], dtype=np.float32)
        names[1] = "roi"
    if "scales" in kw:
        feeds["scales"] = np.array(kw["scales"], dtype=np.float32)
        names[2] = "scales"
    else:
        feeds["sizes"] = np.array(kw["sizes"], dtype=np.int64)
        names[3] = "sizes"
    attributes = {k: v for k, v in kw.items() if k not in ("roi", "scales", "sizes")}
    for flag in ("exclude_outside", "antialias"):
        if flag in attributes:
            attributes[flag] = int(attributes[flag])
    if axes is not None:
        attributes["axes"] = axes
    while names[-1] == "":
        names.pop()
    return helper.make_node("Resize", names, ["Y"], **attributes)


UNVERIFIABLE = "no oracle: "


def decided_resize(data: np.ndarray, kw: dict[str, Any], axes: list[int] | None,
                   out_shape: tuple[int, ...]) -> np.ndarray | str:
    """The reference on float64 data, asked as geomcli decided where the two differ: align_corners
    and tf_crop_and_resize divide by the output length less one, so scales are given as the
    sizes they make (without antialias, whose width a scale sets); rounded half to even and
    saturated once for integers. Where onnxruntime has no kernel (cubic on 1-D, int64, ...)."""
    asked = dict(kw)
    transform = asked["coordinate_transformation_mode"]
    listed = list(axes if axes is not None else range(data.ndim))
    stretched = "sizes" in asked and asked.get("keep_aspect_ratio_policy", "stretch") == "stretch"
    if "sizes" in asked and not stretched:
        pick = min if asked["keep_aspect_ratio_policy"] == "not_larger" else max
        scale = pick(Fraction(size, data.shape[a]) for size, a in zip(asked["sizes"], listed, strict=True))
        if any((scale * data.shape[a]).denominator == 2 for a in listed):
            # geomcli rounds it up, as the spec's round_int says, the reference down; and no
            # reference call gives the policy's scale with that length
            return UNVERIFIABLE + "a kept aspect's length at an exact half"
    if transform in ("align_corners", "tf_crop_and_resize") and not stretched:
        if asked.get("antialias"):
            return UNVERIFIABLE + "antialias with align_corners or tf_crop_and_resize and a scale"
        asked.pop("scales", None)
        asked["sizes"] = [out_shape[a] for a in listed]
        asked["keep_aspect_ratio_policy"] = "stretch"
    whole = [Fraction(repr(scale)) * data.shape[a] == out_shape[a] and Fraction(repr(scale)) != Fraction(
        repr(float(np.float32(scale)))) for scale, a in zip(asked.get("scales", []), listed, strict=False)]
    if any(whole) and not all(whole):
        return UNVERIFIABLE + "a decimal scale whose product is whole beside other scales"
    if "scales" in asked and all(Fraction(repr(scale)) * data.shape[a] == out_shape[a]
                                 for scale, a in zip(asked["scales"], listed, strict=True)):
        # a decimal scale whose product is whole (1.3 on 10): geomcli reads the decimal (13), the
        # reference the float32 below it (12); as sizes, the scale is the decimal's exactly
        del asked["scales"]
        asked["sizes"] = [out_shape[a] for a in listed]
        asked["keep_aspect_ratio_policy"] = "stretch"
    ones = [a for a in listed if out_shape[a] == 1]
    if transform == "pytorch_half_pixel" and ones and len(ones) < len(listed):
        return UNVERIFIABLE + "pytorch_half_pixel to length 1 beside other axes"
    if transform == "pytorch_half_pixel" and ones:
        # x = 0 for an output of length 1 (the reference: -0.5): asymmetric's x = i / scale
        asked["coordinate_transformation_mode"] = "asymmetric"
    feeds = {"X": data.astype(np.float64)}
    node = resize_node(asked, axes, feeds["X"].dtype, feeds)
    result = run_reference(make_model([node], feeds, "Y", feeds["X"].dtype, 19), feeds)
    return result if isinstance(result, str) else converted(result, data.dtype)


def one_node(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int) -> np.ndarray | str:
    """The reference on one node."""
    return run_reference(make_model([node], feeds, "Y", feeds["X"].dtype, opset), feeds)


def containers(rng: np.random.Generator, data: np.ndarray) -> tuple[str, str, dict[str, Any]]:
    """An input and an output name (.npy, or a zarr of random chunks, which takes the chunked path)
    and the writer of the input."""
    zarr_ok = data.dtype != ml_dtypes.bfloat16 and data.ndim >= 1
    source = "in.zarr" if zarr_ok and rng.random() < 0.2 else "in.npy"
    target = "out.zarr" if zarr_ok and rng.random() < 0.2 else "out.npy"
    chunks = tuple(int(rng.integers(1, n + 1)) if n else 1 for n in data.shape)
    writers = {"in.zarr": lambda path, array: write_zarr(path, array, chunks)} if source == "in.zarr" else {}
    return source, target, writers


def write_zarr(path: Path, array: np.ndarray, chunks: tuple[int, ...]) -> None:
    import zarr

    stored = zarr.create_array(store=str(path), shape=array.shape, chunks=chunks, dtype=array.dtype)
    stored[...] = array


def layout_axes(rng: np.random.Generator, rank: int) -> tuple[str, list[int]] | None:
    """A --layout that names H and W on a tensor of this rank, and their axes; or None."""
    choices = {4: [("NCHW", [2, 3]), ("NHWC", [1, 2])], 3: [("CHW", [1, 2]), ("HWC", [0, 1]), ("NHW", [1, 2])],
               2: [("HW", [0, 1])]}.get(rank, [])
    if not choices or rng.random() < 0.7:
        return None
    layout, axes = choices[int(rng.integers(len(choices)))]
    return layout, axes


def resize_case(rng: np.random.Generator) -> Case:
    dtype = str(rng.choice(DTYPES))
    rank = int(rng.integers(1, 5))
    shape = tuple(int(s) for s in rng.choice([1, 2, 3, 4, 5, 7, 8], rank))
    data = random_data(rng, dtype, shape)
    named = layout_axes(rng, rank)
    given_axes = rng.random() < 0.6
    axes = [int(a) for a in rng.permutation(rank)[: int(rng.integers(1, rank + 1))]] if given_axes else None
    if named is not None:
        axes = named[1]
    naxes = len(axes) if axes is not None else rank
    kw, options, text = resize_attributes(rng, dtype, naxes)
    source, target, writers = containers(rng, data)
    command = ["resize", source, "-o", target, *options]
    if named is not None:
        command.append(f"--layout={named[0]}")
    elif axes is not None:
        command.append(f"--axes={cli_axes(rng, axes, rank)}")
    feeds = {"X": data}
    node = resize_node(kw, axes, data.dtype, feeds)
    return Case("resize", f"{dtype}{shape} axes={axes} {text}", {source: data}, command, target,
                make_model([node], feeds, "Y", data.dtype, 19), feeds,
                lambda: geomcli.resize(data, axes=axes, **kw), data.dtype,
                oracle=lambda: decided_resize(data, kw, axes, geomcli.resize(data, axes=axes, **kw).shape),
                writers=writers)


def crop_pad_case(rng: np.random.Generator) -> Case:
    dtype = str(rng.choice(DTYPES))
    rank = int(rng.integers(1, 5))
    shape = tuple(int(s) for s in rng.integers(1, 8, rank))
    data = random_data(rng, dtype, shape)
    axes = [int(a) for a in rng.permutation(rank)[: int(rng.integers(1, rank + 1))]] if rng.random() < 0.6 else None
    named = layout_axes(rng, rank)
    if named is not None:
        axes = named[1]
    target = [int(t) for t in rng.integers(0 if rng.random() < 0.1 else 1, 10, len(axes or shape))]
    source, output, writers = containers(rng, data)
    command = ["crop-pad", source, "-o", output, f"--shape={','.join(map(str, target))}"]
    attributes: dict[str, Any] = {}
    if named is not None:
        command.append(f"--layout={named[0]}")
        attributes["axes"] = axes
    elif axes is not None:
        command.append(f"--axes={cli_axes(rng, axes, rank)}")
        attributes["axes"] = axes
    feeds = {"X": data, "shape": np.array(target, dtype=np.int64)}
    node = helper.make_node("CenterCropPad", ["X", "shape"], ["Y"], **attributes)
    return Case("crop-pad", f"{dtype}{shape} shape={target} axes={axes}", {source: data}, command, output,
                make_model([node], feeds, "Y", data.dtype, 18), feeds,
                lambda: geomcli.center_crop_pad(data, target, axes=axes), data.dtype, writers=writers)


def space_depth_case(rng: np.random.Generator) -> Case:
    to_depth = rng.random() < 0.5
    op, command_name = ("SpaceToDepth", "space-to-depth") if to_depth else ("DepthToSpace", "depth-to-space")
    dtype = str(rng.choice(DTYPES))
    b = int(rng.integers(1, 4))
    mode: Any = str(rng.choice(["DCR", "CRD"]))
    n = int(rng.integers(1, 3))
    if to_depth:
        c, h, w = int(rng.integers(1, 4)), b * int(rng.integers(1, 4)), b * int(rng.integers(1, 4))
    else:
        c, h, w = b * b * int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    if rng.random() < 0.05:
        h += 1  # not a multiple: everyone refuses
    nchw = random_data(rng, dtype, (n, c, h, w))
    layout = str(rng.choice(["NCHW", "NHWC", "default"]))
    data = nchw.transpose(0, 2, 3, 1).copy() if layout == "NHWC" else nchw
    command = [command_name, "in.npy", "-o", "out.npy", f"--blocksize={b}", f"--mode={mode}"]
    if layout != "default":
        command.append(f"--layout={layout}")
    node = helper.make_node(op, ["X"], ["Y"], blocksize=b, mode=mode)  # SpaceToDepth has a mode since opset 28
    feeds = {"X": nchw}
    kernel = geomcli.space_to_depth if to_depth else geomcli.depth_to_space

    def api() -> np.ndarray:
        result = kernel(nchw, b, mode=mode)
        return result.transpose(0, 2, 3, 1) if layout == "NHWC" else result

    def from_onnx(a: np.ndarray) -> np.ndarray:
        return a.transpose(0, 2, 3, 1) if layout == "NHWC" else a

    return Case(command_name, f"{dtype}{data.shape} {layout} b={b} {mode}", {"in.npy": data}, command, "out.npy",
                make_model([node], feeds, "Y", nchw.dtype, 28), feeds, api, nchw.dtype, from_onnx)


def grid_sample_case(rng: np.random.Generator) -> Case:
    dtype = str(rng.choice(DTYPES))
    spatial = 3 if rng.random() < 0.2 else 2
    n = int(rng.integers(1, 3))
    shape = (n, int(rng.integers(1, 4)), *(int(s) for s in rng.integers(1, 7, spatial)))
    data = random_data(rng, dtype, shape)
    grid_dtype = np.dtype(str(rng.choice(["float32", "float64"])))
    out_spatial = tuple(int(s) for s in rng.integers(1, 6, spatial))
    grid = rng.uniform(-1.3, 1.3, (n, *out_spatial, spatial)).astype(grid_dtype)
    mode: Any = str(rng.choice(["linear", "nearest", "cubic"]))
    padding: Any = str(rng.choice(["zeros", "border", "reflection"]))
    align = bool(rng.random() < 0.5)
    command = ["grid-sample", "in.npy", "--grid", "grid.npy", "-o", "out.npy", f"--mode={mode}",
               f"--padding-mode={padding}"] + (["--align-corners"] if align else [])
    feeds = {"X": data, "grid": grid}
    node = helper.make_node("GridSample", ["X", "grid"], ["Y"], mode=mode, padding_mode=padding,
                            align_corners=int(align))
    # the reference clamps the coordinate before a cubic border lookup (NOTES.md), and onnxruntime
    # has no 5-D cubic: no one to ask
    unasked = UNVERIFIABLE + "5-D cubic with border padding"
    return Case("grid-sample", f"{dtype}{shape} grid {grid_dtype}{grid.shape} {mode} {padding} align={align}",
                {"in.npy": data, "grid.npy": grid}, command, "out.npy", make_model([node], feeds, "Y", data.dtype, 22),
                feeds, lambda: geomcli.grid_sample(data, grid, mode=mode, padding_mode=padding,
                                                   align_corners=align), data.dtype,
                oracle=(lambda: unasked) if (spatial, mode, padding) == (3, "cubic", "border") else None)


def affine_grid_oracle(theta: np.ndarray, size: list[int], align: bool) -> np.ndarray:
    """NOTES.md's closed form, in float64: base coordinates per axis, then theta @ [x, y(, z), 1]."""
    def base(length: int) -> np.ndarray:
        i = np.arange(length, dtype=np.float64)
        if align:
            return np.zeros(1) if length == 1 else 2 * i / (length - 1) - 1
        return (2 * i + 1) / length - 1
    spatial = size[2:]
    axes = [base(s) for s in spatial]  # D, H, W or H, W
    mesh = np.meshgrid(*axes, indexing="ij")
    points = np.stack([*reversed(mesh), np.ones_like(mesh[0])], axis=-1)  # (x, y[, z], 1)
    grid: np.ndarray = np.einsum("...k,njk->n...j", points, theta.astype(np.float64))
    return grid


def affine_grid_case(rng: np.random.Generator) -> Case:
    dtype = np.dtype(ml_dtypes.bfloat16) if rng.random() < 0.15 else np.dtype(
        str(rng.choice(["float16", "float32", "float64"])))
    spatial = 3 if rng.random() < 0.25 else 2
    n = int(rng.integers(1, 3))
    size = [n, int(rng.integers(1, 4)), *(int(s) for s in rng.integers(1, 7, spatial))]
    theta = rng.uniform(-1.5, 1.5, (n, spatial, spatial + 1)).astype(dtype)
    align = bool(rng.random() < 0.5)
    command = ["affine-grid", "-o", "out.npy", f"--size={','.join(map(str, size))}",
               f"--theta={numbers(theta.astype(np.float64).reshape(-1))}", f"--dtype={dtype.name}"]
    command += ["--align-corners"] if align else []
    feeds = {"theta": theta, "size": np.array(size, dtype=np.int64)}
    node = helper.make_node("AffineGrid", ["theta", "size"], ["Y"], align_corners=int(align))
    return Case("affine-grid", f"{dtype.name} size={size} align={align}", {}, command, "out.npy",
                make_model([node], feeds, "Y", dtype, 20), feeds,
                lambda: geomcli.affine_grid(theta, size, align_corners=align), dtype,
                oracle=lambda: affine_grid_oracle(theta, size, align))


def warp_case(rng: np.random.Generator) -> Case:
    """warp of an (N, C, H, W) tensor, or in 3-D of an (N, C, D, H, W) one by 3×4 matrices."""
    dtype = str(rng.choice(["uint8", "int16", "float32", "float64"]))
    spatial = 3 if rng.random() < 0.3 else 2
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), *(int(s) for s in rng.integers(1, 7, spatial)))
    data = random_data(rng, dtype, shape)
    theta = rng.uniform(-1.5, 1.5, (shape[0], spatial, spatial + 1)).astype(np.float32)
    # (onnxruntime has no 5-D cubic, and the reference's cubic border is wrong: 3-D takes the others)
    mode: Any = str(rng.choice(["linear", "nearest"] if spatial == 3 else ["linear", "nearest", "cubic"]))
    padding: Any = str(rng.choice(["zeros", "border", "reflection"]))
    align = bool(rng.random() < 0.5)
    command = ["warp", "in.npy", "-o", "out.npy", f"--theta={numbers(theta.astype(np.float64).reshape(-1))}",
               f"--mode={mode}", f"--padding-mode={padding}"] + (["--align-corners"] if align else [])
    feeds = {"X": data, "theta": theta}
    size = np.array(shape, dtype=np.int64)
    nodes = [helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=int(align)),
             helper.make_node("GridSample", ["X", "grid"], ["Y"], mode=mode, padding_mode=padding,
                              align_corners=int(align))]

    def api() -> np.ndarray:
        return geomcli.grid_sample(data, geomcli.affine_grid(theta, list(shape), align_corners=align), mode=mode,
                                   padding_mode=padding, align_corners=align)

    def oracle() -> np.ndarray | str:
        # onnxruntime's GridSample on the closed-form grid (its AffineGrid differs on length 1)
        grid = affine_grid_oracle(theta, list(shape), align).astype(np.float32)
        float_feeds = {"X": data.astype(np.float32), "grid": grid}
        node = helper.make_node("GridSample", ["X", "grid"], ["Y"], mode=mode, padding_mode=padding,
                                align_corners=int(align))
        result = run_ort(make_model([node], float_feeds, "Y", np.dtype(np.float32), 22), float_feeds)
        if isinstance(result, str) or data.dtype.kind not in "iu":
            return result
        info = np.iinfo(data.dtype)
        return np.clip(np.rint(result.astype(np.float64)), info.min, info.max).astype(data.dtype)

    return Case("warp", f"{dtype}{shape} {mode} {padding} align={align}", {"in.npy": data}, command, "out.npy",
                make_model(nodes, feeds, "Y", data.dtype, 22, {"size": size}), feeds, api, data.dtype,
                oracle=oracle)


def write_png(path: Path, array: np.ndarray) -> None:
    # imagecodecs: Pillow writes no 16-bit RGB(A) PNG, and reads one as 8-bit
    path.write_bytes(imagecodecs.png_encode(array))


def write_tiff_pages(path: Path, array: np.ndarray) -> None:
    """A multi-page TIFF of one page per leading index, each its own series."""
    with tifffile.TiffWriter(path) as tif:
        for page in array:
            tif.write(page, photometric="rgb" if page.ndim == 3 else "minisblack", metadata=None)


def write_tiff_stack(path: Path, array: np.ndarray) -> None:
    """One TIFF series of pages (tifffile's shaped stack)."""
    tifffile.imwrite(path, array, photometric="rgb" if array.ndim == 4 else "minisblack")


def image_case(rng: np.random.Generator) -> Case:
    """A picture file: grey, RGB, RGBA or 16-bit PNG, or a TIFF stack (one series, or a series per
    page); geomcli maps H and W onto its axes, the graph names them (a stack's pages are N)."""
    kind = str(rng.choice(["grey png", "rgb png", "rgba png", "16-bit png", "tiff stack", "tiff pages"]))
    # (tifffile writes a grey stack of width 1, N×H×1, as one page of H×1 with N samples)
    h, w = int(rng.integers(1, 9)), int(rng.integers(2 if kind == "tiff stack" else 1, 9))
    channels = {"grey png": 0, "rgb png": 3, "rgba png": 4, "16-bit png": 0}.get(kind, int(rng.choice([0, 3])))
    dtype = "uint16" if kind == "16-bit png" else str(rng.choice(["uint8", "uint16", "float32"])) \
        if kind.startswith("tiff") else "uint8"
    pages = int(rng.integers(2, 4)) if kind.startswith("tiff") else 0
    op = str(rng.choice(["resize", "crop-pad", "space-to-depth", "depth-to-space", "grid-sample"]))
    if op == "space-to-depth":
        b = int(rng.integers(1, 4))
        h, w = b * max(1, h // b), b * max(1, w // b)
    elif op == "depth-to-space":
        b = 2
        channels = 4
    shape = ((pages,) if pages else ()) + (h, w) + ((channels,) if channels else ())
    data = random_data(rng, dtype, shape)
    name = "in.tif" if pages else "in.png"
    writer = write_tiff_pages if kind == "tiff pages" else write_tiff_stack if pages else write_png
    hw_axes = [1, 2] if pages else [0, 1]
    feeds: dict[str, np.ndarray] = {"X": data}
    output = "out.tif" if pages else "out.png"
    # (N, C, H, W) of the picture, as the spatial operators read it, and back
    nchw = data.reshape((pages or 1, h, w, channels or 1)).transpose(0, 3, 1, 2)
    def back(result: np.ndarray) -> np.ndarray:
        hwc = result.transpose(0, 2, 3, 1)
        hwc = hwc if pages else hwc[0]
        # one channel: H×W in a PNG, and as the input was where it had no channel axis
        return hwc[..., 0] if hwc.shape[-1] == 1 and (output.endswith(".png") or not channels) else hwc

    from_onnx: Callable[[np.ndarray], np.ndarray] = lambda a: a  # noqa: E731
    oracle = None
    if op == "resize":
        kw, options, text = resize_attributes(rng, dtype, 2)
        command = ["resize", name, "-o", output, *options]
        node = resize_node(kw, hw_axes, data.dtype, feeds)
        api: Callable[[], np.ndarray] = lambda: geomcli.resize(data, axes=hw_axes, **kw)  # noqa: E731
        oracle = lambda: decided_resize(data, kw, hw_axes, api().shape)  # noqa: E731
        opset = 19
    elif op == "crop-pad":
        target = [int(t) for t in rng.integers(1, 10, 2)]
        text = f"shape={target}"
        command = ["crop-pad", name, "-o", output, f"--shape={','.join(map(str, target))}"]
        feeds["shape"] = np.array(target, dtype=np.int64)
        node = helper.make_node("CenterCropPad", ["X", "shape"], ["Y"], axes=hw_axes)
        api = lambda: geomcli.center_crop_pad(data, target, axes=hw_axes)  # noqa: E731
        opset = 18
    elif op in ("space-to-depth", "depth-to-space"):
        mode: Any = str(rng.choice(["DCR", "CRD"]))
        text = f"b={b} {mode}"
        made = (channels or 1) * b * b if op == "space-to-depth" else (channels or 1) // (b * b)
        if made > 4 or dtype not in ("uint8", "uint16"):
            output = "out.npy" if not pages else output
        command = [op, name, "-o", output, f"--blocksize={b}", f"--mode={mode}"]
        feeds = {"X": np.ascontiguousarray(nchw)}
        node = helper.make_node("SpaceToDepth" if op == "space-to-depth" else "DepthToSpace", ["X"], ["Y"],
                                blocksize=b, mode=mode)
        kernel = geomcli.space_to_depth if op == "space-to-depth" else geomcli.depth_to_space
        api = lambda: back(kernel(nchw, b, mode=mode))  # noqa: E731
        from_onnx, opset = back, 28
    else:
        grid = rng.uniform(-1.3, 1.3, (pages or 1, int(rng.integers(1, 6)), int(rng.integers(1, 6)), 2))
        grid = grid.astype(np.float32)
        mode = str(rng.choice(["linear", "nearest", "cubic"]))
        padding: Any = str(rng.choice(["zeros", "border", "reflection"]))
        text = f"grid {grid.shape} {mode} {padding}"
        command = ["grid-sample", name, "--grid", "grid.npy", "-o", output, f"--mode={mode}",
                   f"--padding-mode={padding}"]
        feeds = {"X": np.ascontiguousarray(nchw), "grid": grid}
        node = helper.make_node("GridSample", ["X", "grid"], ["Y"], mode=mode, padding_mode=padding)
        api = lambda: back(geomcli.grid_sample(nchw, grid, mode=mode, padding_mode=padding))  # noqa: E731
        from_onnx, opset = back, 22
    files = {name: data, **({"grid.npy": feeds["grid"]} if "grid" in feeds else {})}
    return Case(f"image {op}", f"{kind} {dtype}{shape} {text} -> {output}", files, command, output,
                make_model([node], feeds, "Y", data.dtype, opset), feeds, api, data.dtype, from_onnx, oracle=oracle,
                writers={name: writer})


def resized(data: np.ndarray, kw: dict[str, Any], axes: list[int]) -> np.ndarray:
    return geomcli.resize(data, axes=axes, **kw)


def decided_step(data: np.ndarray, kw: dict[str, Any], axes: list[int]) -> np.ndarray | str:
    return decided_resize(data, kw, axes, resized(data, kw, axes).shape)


def cropped(data: np.ndarray, target: list[int], axes: list[int]) -> np.ndarray:
    return geomcli.center_crop_pad(data, target, axes=axes)


def onnx_cropped(data: np.ndarray, target: list[int], axes: list[int]) -> np.ndarray | str:
    node = helper.make_node("CenterCropPad", ["X", "shape"], ["Y"], axes=axes)
    return one_node(node, {"X": data, "shape": np.array(target, dtype=np.int64)}, 18)


def onnx_blocks(data: np.ndarray) -> np.ndarray | str:
    return one_node(helper.make_node("SpaceToDepth", ["X"], ["Y"], blocksize=2), {"X": data}, 13)


def chain_case(rng: np.random.Generator) -> Case:
    """A chain of 2 or 3 steps on an NCHW tensor, or on a PNG (H and W named by the image; its
    steps alone go through .npy files in --layout HWC or HW)."""
    image = rng.random() < 0.3
    if image:
        dtype = str(rng.choice(["uint8", "uint16"]))
        channels = int(rng.choice([0, 3, 4]))
        shape: tuple[int, ...] = (int(rng.integers(2, 9)), int(rng.integers(2, 9))) + ((channels,) if channels else ())
        hw, axes_option, source_name = [0, 1], [], "in.png"
    else:
        dtype = str(rng.choice(["uint8", "int16", "int32", "float16", "float32", "float64"]))
        shape = (1, int(rng.integers(1, 4)), int(rng.integers(2, 9)), int(rng.integers(2, 9)))
        hw, axes_option, source_name = [2, 3], ["--axes=2,3"], "in.npy"
    data = random_data(rng, dtype, shape)
    steps: list[list[str]] = []
    nodes: list[onnx.NodeProto] = []
    feeds: dict[str, np.ndarray] = {"X": data}
    calls: list[Callable[[np.ndarray], np.ndarray]] = []
    decided: list[Callable[[np.ndarray], np.ndarray | str]] = []
    current = data
    texts = []
    for index in range(int(rng.integers(2, 4))):
        source, target = ("X" if index == 0 else f"T{index}"), f"T{index + 1}"
        choice = str(rng.choice(["resize", "crop-pad"] if image else ["resize", "crop-pad", "space-to-depth"]))
        if choice == "space-to-depth" and (current.shape[2] % 2 or current.shape[3] % 2):
            choice = "crop-pad"
        if choice == "resize":
            kw, options, text = resize_attributes(rng, dtype, 2)
            step_feeds: dict[str, np.ndarray] = {"X": current}
            node = resize_node(kw, hw, current.dtype, step_feeds)
            for key, value in step_feeds.items():
                if key != "X":
                    feeds[f"{key}{index}"] = value
            node = helper.make_node("Resize", [source if i == "X" else (f"{i}{index}" if i else "")
                                               for i in node.input], [target],
                                    **{a.name: helper.get_attribute_value(a) for a in node.attribute})
            steps.append(["resize", *options, *axes_option])
            calls.append(partial(resized, kw=kw, axes=hw))
            decided.append(partial(decided_step, kw=kw, axes=hw))
        elif choice == "crop-pad":
            t = [int(v) for v in rng.integers(1, 9, 2)]
            feeds[f"shape{index}"] = np.array(t, dtype=np.int64)
            node = helper.make_node("CenterCropPad", [source, f"shape{index}"], [target], axes=hw)
            steps.append(["crop-pad", f"--shape={t[0]},{t[1]}", *axes_option])
            text = f"crop-pad {t}"
            calls.append(partial(cropped, target=t, axes=hw))
            decided.append(partial(onnx_cropped, target=t, axes=hw))
        else:
            node = helper.make_node("SpaceToDepth", [source], [target], blocksize=2)
            steps.append(["space-to-depth", "--blocksize=2"])
            text = "space-to-depth 2"
            calls.append(partial(geomcli.space_to_depth, blocksize=2))
            decided.append(onnx_blocks)
        nodes.append(node)
        texts.append(text)
        current = calls[-1](current)
    nodes.append(helper.make_node("Identity", [nodes[-1].output[0]], ["Y"]))

    def api() -> np.ndarray:
        result = data
        for call in calls:
            result = call(result)
        return result

    def oracle() -> np.ndarray | str:
        result: np.ndarray | str = data
        for step in decided:
            if isinstance(result, str):
                break
            result = step(result)
        return result

    if image:  # the steps alone read the .npy of the one before in the image's layout
        steps[1:] = [[step[0], f"--layout={'HWC' if len(shape) == 3 else 'HW'}", *step[1:]] for step in steps[1:]]
    command = ["chain", "-i", source_name, "-o", "out.npy"] + [word for step in steps[:1] for word in step]
    command += [word for step in steps[1:] for word in step if not word.startswith("--layout")]
    return Case("chain", f"{dtype}{shape} " + " | ".join(texts), {source_name: data}, command, "out.npy",
                make_model(nodes, feeds, "Y", data.dtype, 19), feeds, api, data.dtype, steps=steps, oracle=oracle,
                writers={"in.png": write_png})


def big_case(rng: np.random.Generator) -> Case:
    """An output past io's MAP_OUTPUT_BYTES (64 MiB): written slab by slab through a memory map,
    on THREADS threads; held to the API on one thread alone (the reference would take minutes)."""
    dtype = str(rng.choice(["uint8", "float32"]))
    height, width = 2 * int(rng.integers(1000, 1100)), 2 * int(rng.integers(1000, 1100))
    channels = 4 if dtype == "float32" else 16
    data = random_data(rng, dtype, (1, channels, height, width))
    op = str(rng.choice(["crop-pad", "resize", "space-to-depth"]))
    if op == "crop-pad":
        target = [height + int(rng.integers(-3, 40)), width + int(rng.integers(-3, 40))]
        command = ["crop-pad", "in.npy", "-o", "out.npy", f"--shape={target[0]},{target[1]}", "--axes=2,3"]
        api: Callable[[], np.ndarray] = lambda: geomcli.center_crop_pad(data, target, axes=[2, 3],  # noqa: E731
                                                                        threads=1)
    elif op == "resize":
        kw, options, text = resize_attributes(rng, dtype, 2)
        kw.pop("scales", None)
        kw.pop("keep_aspect_ratio_policy", None)
        kw["sizes"] = [height + int(rng.integers(-9, 40)), width + int(rng.integers(-9, 40))]
        options = [o for o in options if not o.startswith(("--scales", "--sizes", "--keep"))]
        command = ["resize", "in.npy", "-o", "out.npy", *options, f"--sizes={kw['sizes'][0]},{kw['sizes'][1]}",
                   "--axes=2,3"]
        api = lambda: geomcli.resize(data, axes=[2, 3], threads=1, **kw)  # noqa: E731
    else:
        command = ["space-to-depth", "in.npy", "-o", "out.npy", "--blocksize=2", "--mode=CRD"]
        api = lambda: geomcli.space_to_depth(data, 2, mode="CRD", threads=1)  # noqa: E731
    return Case(f"big {op}", f"{dtype}{data.shape} " + " ".join(command[4:]), {"in.npy": data}, command, "out.npy",
                None, {}, api, data.dtype)


MAKERS: dict[str, Callable[[np.random.Generator], Case]] = {
    "resize": resize_case, "crop-pad": crop_pad_case, "space-depth": space_depth_case,
    "grid-sample": grid_sample_case, "affine-grid": affine_grid_case, "warp": warp_case, "image": image_case,
    "chain": chain_case, "big": big_case,
}
WEIGHTS = {"resize": 5, "crop-pad": 2, "space-depth": 2, "grid-sample": 2, "affine-grid": 1, "warp": 1, "image": 3,
           "chain": 2, "big": 0.2}


# --- running --------------------------------------------------------------------------------


def geomcli_run(arguments: list[str], where: Path) -> tuple[int, str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), GEOMCLI_THREADS=THREADS, NO_COLOR="1")
    done = subprocess.run([sys.executable, "-m", "geomcli", *arguments, "--json"], cwd=where, env=env,
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


def chain_run(arguments: list[str], where: Path) -> tuple[int, str, str]:
    # the chain's own options go before the first step
    first_step = next(i for i, word in enumerate(arguments) if i and word in ("resize", "crop-pad", "space-to-depth"))
    head, tail = arguments[:first_step], arguments[first_step:]
    env = dict(os.environ, PYTHONPATH=str(ROOT), GEOMCLI_THREADS=THREADS, NO_COLOR="1")
    done = subprocess.run([sys.executable, "-m", "geomcli", *head, "--json", *tail], cwd=where, env=env,
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


def check_record(stdout: str, written: np.ndarray, path: Path) -> list[str]:
    """The --json record's output shape and dtype are the file's (a TIFF's as stored)."""
    if path.suffix == ".tif":
        written = np.asarray(tifffile.imread(path))
    problems = []
    try:
        record = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [f"--json gave no record: {stdout[:200]!r}"]
    if record.get("output_shape") != list(written.shape):
        problems.append(f"--json output_shape {record.get('output_shape')} != written {list(written.shape)}")
    if record.get("output_dtype") != written.dtype.name:
        problems.append(f"--json output_dtype {record.get('output_dtype')} != written {written.dtype.name}")
    steps = record.get("steps")
    if steps and steps[-1].get("output_shape") != list(written.shape):
        problems.append(f"--json last step's output_shape {steps[-1].get('output_shape')} != {list(written.shape)}")
    return problems


def run_case(case: Case, where: Path) -> tuple[str, list[str]]:
    """(the verdict's class, the problems found): class 'ok', 'split:<side>', 'refused' or 'MISMATCH'."""
    for name, array in case.files.items():
        case.writers.get(name, save_npy)(where / name, array)
    run = chain_run if case.operator == "chain" else geomcli_run
    code, stdout, stderr = run(case.command, where)
    ort_result = run_ort(case.model, case.feeds) if case.model is not None else "no model"
    ref_result = run_reference(case.model, case.feeds) if case.model is not None else "no model"
    onnx_results = {"ort": ort_result, "ref": ref_result}
    ran = {k: case.from_onnx(v) for k, v in onnx_results.items() if isinstance(v, np.ndarray)}
    if code != 0:
        lines = stderr.strip().splitlines()
        if "Traceback" in stderr or len(lines) != 1 or code not in (1, 2):
            return "MISMATCH", [f"exit {code} with {stderr.strip()[-400:]!r}"]
        if ran and "cannot hold an empty" in lines[0] and all(v.size == 0 for v in ran.values()):
            return "refused empty", []
        if ran:
            return "MISMATCH", [f"geomcli refuses ({lines[0]}) what {', '.join(ran)} run"]
        return "refused", []
    written = load(where / case.output)
    problems = check_record(stdout, written, where / case.output)
    if written.dtype != case.dtype:
        problems.append(f"written dtype {written.dtype} != {case.dtype}")
    if case.api is not None:
        expected = case.api()
        if expected.shape != written.shape or not np.array_equal(expected, written, equal_nan=True):
            problems.append("the CLI's result is not the API's on the same array: "
                            f"{difference(written, expected, case.dtype) or 'bitwise'}")
    if case.steps:
        problems += chain_steps_problems(case, where, written)
    verdict = "ok"
    others = {"closed form" if case.operator in ("affine-grid", "warp") else "decided": case.oracle} \
        if case.oracle is not None else {}  # (grid-sample's oracle: only an unverifiable reason)
    if (case.dtype.kind in "iu" or case.dtype.name in ("float16", "bfloat16") or "grid" in case.feeds) \
            and "X" in case.feeds and case.model is not None and not case.steps:
        others["ort float"] = lambda: in_float(case, run_ort)
        others["ref float64"] = lambda: in_float(case, run_reference, np.dtype(np.float64))
    if case.operator == "resize" and "X" in case.feeds and case.feeds["X"].ndim == 1:
        others["ort 2-D"] = lambda: lifted_resize(case)
    if len(ran) == 2 and difference(ran["ort"], ran["ref"], case.dtype) is None:
        why = difference(written, ran["ref"], case.dtype)
        if why:
            problems.append(f"onnxruntime and the reference agree; geomcli differs: {why}")
    else:
        sides = [k for k, v in ran.items() if difference(written, v, case.dtype) is None]
        if not sides:
            sides = [k for k, make in others.items() if isinstance(got := make(), np.ndarray)
                     and difference(written, got, case.dtype) is None]
        unverifiable = [got for make in others.values() if isinstance(got := make(), str) and
                        got.startswith(UNVERIFIABLE)]
        if sides:
            verdict = "ok" if len(ran) == 1 and sides == list(ran) else "split:" + "+".join(sides)
        elif unverifiable:
            verdict = "unverified"
        elif ran:
            problems.append(f"{' and '.join(ran)} {'disagree' if len(ran) == 2 else 'alone'}; geomcli differs: "
                            + "; ".join(f"vs {k} {difference(written, v, case.dtype)}" for k, v in ran.items()))
        else:
            verdict = "onnx refuses" if case.model is not None else "API only"
    return ("MISMATCH" if problems else verdict), problems


def chain_steps_problems(case: Case, where: Path, written: np.ndarray) -> list[str]:
    """The chain's file equals its steps run one after another through .npy files."""
    source = case.command[2]
    for index, step in enumerate(case.steps):
        target = f"step{index}.npy"
        code, _, stderr = geomcli_run([step[0], source, "-o", target, *step[1:]], where)
        if code != 0:
            return [f"step {index} alone fails: {stderr.strip()[-200:]}"]
        source = target
    alone = load(where / source)
    if alone.shape != written.shape or not np.array_equal(alone, written, equal_nan=True):
        return [f"chain != its steps one after another: {difference(written, alone, case.dtype) or 'bitwise'}"]
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first", type=int, default=0, help="the number of the first case (to replay one)")
    parser.add_argument("--only", default="", help=f"comma-separated among {', '.join(MAKERS)}")
    parser.add_argument("--keep", type=Path, default=None, help="keep each mismatching case's files here")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case")
    options = parser.parse_args()
    kinds = [k for k in MAKERS if not options.only or k in options.only.split(",")]
    weights = np.array([WEIGHTS[k] for k in kinds], dtype=np.float64)
    counts: Counter[str] = Counter()
    verdicts: Counter[tuple[str, str]] = Counter()
    mismatches = 0
    for number in range(options.first, options.first + options.cases):
        rng = np.random.default_rng([options.seed, number])
        kind = kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]
        try:
            case = MAKERS[kind](rng)
        except geomcli.GeomError:  # a chain whose step empties an axis the next one resizes
            counts["(chains not made)"] += 1
            continue
        with tempfile.TemporaryDirectory() as scratch:
            try:
                verdict, problems = run_case(case, Path(scratch))
            except Exception:  # noqa: BLE001 - the fuzzer's own fault: report it and go on
                verdict, problems = "MISMATCH", ["the fuzzer failed: " + traceback.format_exc(limit=3)]
            if problems and options.keep is not None:
                kept = options.keep / f"case{number}"
                kept.mkdir(parents=True, exist_ok=True)
                for path in Path(scratch).iterdir():
                    (kept / path.name).write_bytes(path.read_bytes())
        counts[case.operator] += 1
        verdicts[(case.operator, verdict)] += 1
        command = "geomcli " + " ".join(case.command)
        if problems:
            mismatches += 1
            print(f"case {number} [{case.operator}] {case.description}\n  {command}", flush=True)
            for problem in problems:
                print(f"  MISMATCH: {problem}", flush=True)
        elif options.verbose:
            print(f"case {number} [{case.operator}] {verdict}: {case.description}", flush=True)
    print(f"\n{sum(counts.values())} cases (seed {options.seed}), {mismatches} mismatching")
    for operator in sorted(counts):
        split = ", ".join(f"{v} {n}" for (o, v), n in sorted(verdicts.items()) if o == operator)
        print(f"  {operator}: {counts[operator]} ({split})")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
