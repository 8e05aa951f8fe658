"""Compiled speed-ups, each held bit for bit to :mod:`geomcli.ops.reference` by the tests.

Why compiled code is here (GridSample, float32 (1, 3, 1024, 1024) under a 30° rotation grid, zeros
padding, one thread; issue 20 section 5): geomcli's numpy path gives the reference's bits in
67–90 ms for linear and 185–317 ms for cubic, where onnxruntime takes 84–110 and 139–227 ms and
PyTorch's CPU grid_sample 18.6 and 40.4 ms; a uint8 1024×1024×3 warp took 76 ms against
cv2.warpAffine's 4.2 ms. No numpy formulation gets near: a point is a few dozen flops, but numpy
makes about 12 gathers of it for linear (48 for cubic), each ``np.take`` some 2 ns an element,
and a dozen passes over a slab's arrays for the positions and weights.

``_grid_sample`` (``_grid_sample.c``: C with the buffer protocol only, no numpy headers at build
time) does each point in one pass: position, taps, weights, gathers and sums for every channel,
in double, the reference's operations in the reference's order (so the same bits), with the GIL
released so that threads share the work. Two runs of ``benchmarks/grid_sample.py`` at one
thread (medians, ms, on a shared two-core machine under load from other work, so the ratios
mean more than the times): linear 31–33 ms (numpy path 79–87, onnxruntime 99, PyTorch 38–44),
cubic 49–62 ms (245–302, 167–239, 80–107), nearest 23–27 ms (44–48, 54–62, 22–31).

The uint8 1024×1024×3 warp as the warp command does it (the H×W×3 image's (1, 3, H, W) view
sampled where it lies, into an H×W×3 result; a pixel's three channels in one AVX2 vector where
the processor has it; ``sample_affine``: each point's grid coordinates made from theta in the
kernel, the float64 sums affine_grid rounds, so no grid is written or read): 9.0 ms against
cv2.warpAffine's 3.4 ms in the same run (2.6×; with affine_grid's grid it was 11.9 against 3.7,
3.2×, and 25–34 ms, 6–8×, before that); sampling a grid made beforehand took 9.7 ms in that run,
a (1, 3, H, W) copy 18.9 ms. Two threads: 5.0 against 2.2 ms (2.2×).

``_resize`` (``_resize.c``, the same build and rules) does Resize's weighted passes of one or two
axes: each output row of the first axis summed into a double buffer over whole rows of adjacent
values (vector code), then weighed along the second axis while in cache and stored converted,
with no intermediate array. The numpy path multiplies dense bands of weights, mostly zeros, and
converts in a pass of its own; onnxruntime was 1.7x faster on float32 (1, 3, 1024, 1024) -> 512²
linear antialias (issue 21 section 4). Figures: ``benchmarks/resize.py``.

setuptools builds them on ``pip install .`` (``[tool.setuptools] ext-modules`` in pyproject.toml);
they are optional: without a C compiler, or in a checkout that was never installed,
:mod:`geomcli.ops.grid_sample` and :mod:`geomcli.ops.resize` do everything on their numpy paths.
"""
