"""The operations as dask.array graphs, chunk by chunk, for arrays that never fit in memory (a
zarr input): each output chunk is the numpy kernel's result on the input chunk it comes from,
so the result equals the kernel's on the whole array, bit for bit.

What makes that true:
- **SpaceToDepth** takes blocks of b×b pixels: every H and W chunk must be a multiple of b (a
  misaligned chunk would split a block), so they are rechunked to the nearest multiples of b.
- **Both** put a pixel's channels side by side (DCR: the block offset first; CRD: the input
  channel first): a chunk must hold every channel, or DepthToSpace's DCR order comes out the
  right shape and silently wrong. C is one chunk (its H chunks made as many times shorter as C
  had chunks, so that a task's block stays about a stored chunk's size).
- **CenterCropPad** is a slice, then pads of the one value the kernel would write there.
- **GridSample, an affine warp and Resize** may read anywhere in a plane: each task holds whole
  planes (every axis from the first the operation changes on), the axes before them keep their
  chunks (images of a stack, channels). A task holds a plane, not the array; an array that is
  one huge plane is one task. Its planes are then cut into chunks of the input's sides.
  What a worker holds for such a task, of P input and Q output chunks (inherent in a plane):
  2P as its planes are gathered (dask's rechunk keeps the P pieces until they are joined), then
  P + Q and the kernel's working arrays; the Q stay until each is written, and on a cluster
  another worker may pull copies of up to Q of them to write. Measured, peak RSS over idle, a
  float32 8192x8192 plane in 16 chunks of 16 MiB (threads: the process; local:2: each worker):
  resize 0.5 38 / 32 and 9, resize 2 (Q = 64) 81 / 80 and 66, warp --rotate 10 33 / 32 and 18,
  grid-sample at a 512 MiB grid (32 chunks, in the task too) 75 / 64 and 32 (threads' vary
  by 10 a run). A stack of one image a chunk holds a few chunks a worker (16 of 16 MiB: 3-7).
  GridSample's grid is cut as the images are: a task is given its images' grid alone (on a
  cluster, sent to the workers before the run: on_workers).
- The writer then rechunks the result to the output's zarr chunks: one dask chunk per zarr
  chunk, so no two tasks write one chunk (concurrent misaligned writes lose data,
  zarr-python#3682).

Imported only for a zarr job; dask loads then.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import os

    import numpy as np

    Dask = Any  # a dask.array.Array: dask annotates it too loosely for strict checking

# the bytes a chunk is given where the input has none of its own (an .npy memory map)
CHUNK_BYTES = 64 << 20
# the most tasks a graph is made of (a 64k x 64k array's 16 x 16 chunks): a zarr's metadata alone can
# declare 10**23 chunks, and dask's list of their sizes along an axis was a MemoryError
MOST_TASKS = 1 << 24
# a stored array cut into more chunks than this has whole chunks grouped into blocks of up to
# GROUPED_BYTES (chunked.grouped): a task per tiny chunk cost far more than reading it
MANY_TASKS = 4096
GROUPED_BYTES = 16 << 20
# the names of the graph layers whose values are arrays held here, literal in the graph (an input
# read whole, a grid's parts by_planes hands its tasks): on_workers scatters them
LITERAL = "literal-"


def aligned(chunks: Sequence[int], multiple: int) -> tuple[int, ...]:
    """Chunks along one axis whose boundaries all fall on multiples of ``multiple`` (the axis's
    length being one): as near the first chunk's size as that allows.

    >>> aligned((5, 5, 5, 1), 2), aligned((4, 4), 2), aligned((3,), 3), aligned((0,), 2)
    ((6, 6, 4), (4, 4), (3,), (0,))
    """
    length = sum(chunks)
    if not length:  # an empty axis is one chunk of 0 for dask (no chunk at all, it refused)
        return (0,)
    size = max(multiple, -(-chunks[0] // multiple) * multiple)  # the first chunk's, up to a multiple
    full, rest = divmod(length, size)
    return (size,) * full + ((rest,) if rest else ())


def crop_pad(data: Dask, target: Sequence[int], axes: Sequence[int] | None, value: np.ndarray,
             max_pixels: int | None = None) -> Dask:
    """CenterCropPad of ``data`` to ``target`` on ``axes`` (all when None), the pad ``value`` a
    0-d array of the data's dtype (the element the kernel writes there); no pad block of more
    than ``max_pixels`` elements (--max-pixels, what a task may hold) where the data's chunks have no more."""
    import dask.array as da

    from geomcli.ops.window import center_crop_pad_window

    chosen = range(data.ndim) if axes is None else [axis % data.ndim for axis in axes]
    kept = [slice(None)] * data.ndim
    pads = [(0, 0)] * data.ndim
    for axis, size in zip(chosen, target):
        source, placed = center_crop_pad_window(data.shape[axis], size)
        kept[axis] = source
        pads[axis] = (placed.start, size - placed.stop)
    cropped = data[tuple(kept)]
    if not any(before or after for before, after in pads):
        return cropped
    if 0 in cropped.shape:  # all pad: dask's pad divided by the empty axis's chunks
        return da.full(tuple(length + before + after for length, (before, after) in zip(cropped.shape, pads)),
                       value, dtype=data.dtype)
    return _padded(cropped, pads, value, max_pixels)


def _padded(data: Dask, pads: Sequence[tuple[int, int]], value: np.ndarray, max_pixels: int | None = None) -> Dask:
    """``data`` with ``pads`` of ``value`` on each side of each axis, the pads in blocks of up to
    CHUNK_BYTES and ``max_pixels`` elements (at least the data's own chunk along the axis): dask's
    pad cut them into the data's chunks, so a 4x4 chunk padded to 8200x8200 was 4 million tasks
    (10 GB and ten minutes); a block past --max-pixels refused a run whose chunks were within it."""
    import math

    import dask.array as da

    from geomcli.errors import GeomError

    padded = tuple(length + before + after for length, (before, after) in zip(data.shape, pads))
    for axis, (before, after) in enumerate(pads):
        if not before and not after:
            continue
        elements = 1  # of a block's cross-section
        for other, lengths in enumerate(data.chunks):
            if other != axis:
                elements *= max(1, *lengths)
        most = CHUNK_BYTES // (elements * max(1, data.dtype.itemsize))
        if max_pixels is not None:
            most = min(most, max_pixels // elements)
        step = max(max(data.chunks[axis]), most)
        blocks = sum(-(-width // step) for width in (before, after)) * math.prod(
            len(lengths) for other, lengths in enumerate(data.chunks) if other != axis)
        if blocks > MOST_TASKS:  # a 10**8 x 10**8 pad was a MemoryError listing 2 * 10**8 blocks
            raise GeomError(f"padding to shape {padded} takes {blocks} blocks, more than the {MOST_TASKS} "
                            "tasks a run takes")
        parts = []
        for width in (before, after):
            if width:
                shape = data.shape[:axis] + (width,) + data.shape[axis + 1:]
                chunks = data.chunks[:axis] + (_steps(width, step),) + data.chunks[axis + 1:]
                parts.append(da.full(shape, value, dtype=data.dtype, chunks=chunks))
            else:
                parts.append(None)
        data = da.concatenate([part for part in (parts[0], data, parts[1]) if part is not None], axis=axis)
    return data


def _steps(length: int, step: int) -> tuple[int, ...]:
    full, rest = divmod(length, step)
    return (step,) * full + ((rest,) if rest else ())


def blockwise(data: Dask, kernel: Callable[..., np.ndarray], blocksize: int, *, to_depth: bool) -> Dask:
    """SpaceToDepth (``to_depth``) or DepthToSpace of an (N, C, H, W) dask array, the ``kernel``
    run on each chunk: C in one chunk, H and W chunks multiples of the blocksize for SpaceToDepth.
    Where C was in several chunks, its H chunks are made as many times shorter, so that a task
    holds about a stored chunk's bytes still: an OME-Zarr's channels are a chunk each, and 4 of
    them in 16 MiB chunks made tasks and output chunks of 64 MiB (32 channels, 32 times)."""
    b = blocksize
    n_chunks, c_chunks, h_chunks, w_chunks = data.chunks
    if len(c_chunks) > 1:
        h_chunks = _steps(sum(h_chunks), max(1, -(-max(h_chunks) // len(c_chunks)))) or (0,)
    if to_depth:
        data = data.rechunk({1: -1, 2: aligned(h_chunks, b), 3: aligned(w_chunks, b)})
        _, (channels,), h_chunks, w_chunks = data.chunks
        out_chunks = (n_chunks, (channels * b * b,), tuple(h // b for h in h_chunks), tuple(w // b for w in w_chunks))
    else:
        data = data.rechunk({1: -1, 2: h_chunks})
        _, (channels,), h_chunks, _ = data.chunks
        out_chunks = (n_chunks, (channels // (b * b),), tuple(h * b for h in h_chunks), tuple(w * b for w in w_chunks))
    return data.map_blocks(kernel, dtype=data.dtype, chunks=out_chunks, meta=data._meta)


def by_planes(data: Dask, kernel: Callable[[np.ndarray, Any], np.ndarray], first_whole: int,
              tail: Sequence[int], max_pixels: int, *, per_image: np.ndarray | None = None) -> Dask:
    """``kernel(block, start)`` on blocks that hold every axis from ``first_whole`` on whole (the
    axes before keep their chunks; ``start`` is the block's first index along axis 0), each
    giving a block whose axes from ``first_whole`` on have the lengths ``tail``. Blocks of more
    than ``max_pixels`` elements (--max-pixels: what a task may hold) are refused before any is made.

    ``per_image``: an array of one entry per index of axis 0 (grid-sample's grid), cut as the
    blocks are along it, and ``kernel(block, part)`` given the block's part alone: a task of a
    cluster carried the whole of an array its function held, so a stack of 16 images, each a
    16 MiB chunk, sampled at a 128 MiB grid held 67 chunks a worker on local:2 (23 on threads)."""
    check_planes(data, first_whole, (), max_pixels)
    stored = data.chunks
    data = data.rechunk({axis: -1 for axis in range(first_whole, data.ndim)})
    chunks = data.chunks[:first_whole] + tuple((length,) for length in tail)

    def run(block: np.ndarray, block_info: dict[Any, Any] | None = None) -> np.ndarray:
        start = block_info[0]["array-location"][0][0] if first_whole and block_info else 0
        return kernel(block, start)

    if per_image is None:
        result = data.map_blocks(run, dtype=data.dtype, chunks=chunks, meta=data._meta)
    else:
        import itertools

        import dask.array as da
        from dask.base import tokenize
        from dask.highlevelgraph import HighLevelGraph

        # the parts are views of per_image, literal in the graph (from_array, and a joined
        # contracted block, copied it: a plane's 512 MiB grid twice more); a cluster's run
        # scatters them to its workers first (on_workers)
        name = f"{LITERAL}{tokenize(per_image)}"
        rest = (0,) * (per_image.ndim - 1)
        starts = itertools.accumulate(data.chunks[0], initial=0)
        layer: dict[Any, Any] = {(name, index, *rest): per_image[start:start + length]
                                 for index, (start, length) in enumerate(zip(starts, data.chunks[0]))}
        parts = da.Array(HighLevelGraph.from_collections(name, layer, dependencies=()), name,
                         (data.chunks[0], *((length,) for length in per_image.shape[1:])), dtype=per_image.dtype)

        def run_with(block: np.ndarray, part: Any) -> np.ndarray:
            while isinstance(part, list):  # one block along each axis of its own (contracted, not joined)
                (part,) = part
            return kernel(block, part)

        axes = tuple(range(data.ndim))
        own = (0, *range(data.ndim, data.ndim + per_image.ndim - 1))  # axis 0 the blocks', the rest its own
        result = da.blockwise(run_with, axes, data, axes, parts, own, token="run", dtype=data.dtype,
                              meta=data._meta, concatenate=False,
                              adjust_chunks={axis: chunks[axis] for axis in axes[first_whole:]})
    # each block of whole planes cut into chunks of the input's sides, which the output is chunked
    # by (a plane is one task, not one chunk: a resize to 24576 x 16384 of 2048 x 2048 chunks wrote
    # one chunk of 1.5 GiB a plane, that a viewer read whole for a corner)
    pieces = {axis: min(max(stored[axis]), length)
              for axis, length in zip(range(first_whole, data.ndim), tail) if len(stored[axis]) > 1}
    return result.rechunk(pieces) if pieces else result


def on_workers(result: Dask, client: Any) -> Dask:
    """``result`` to be computed by ``client``'s cluster, with the arrays put in its graph
    literally (an input read whole, a grid's parts :func:`by_planes` made: LITERAL) scattered to
    the workers first, and the graph given their futures: in the graph, a plane's 512 MiB grid
    (or a piped input) went through the scheduler, held in the graph
    there (a joined cluster's: on another machine), and Dask printed its "Sending large graph"
    warning over five lines of stderr. A LocalCluster's workers are sent them directly; a joined
    cluster's as Dask's ``distributed.client.direct-to-workers`` says (by default the scheduler
    passes them on to a worker, keeping none). A joined cluster of no workers yet is waited for,
    as its compute waited."""
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    graph = result.__dask_graph__()
    literal = {name: layer for name, layer in graph.layers.items() if name.startswith(LITERAL)}
    if not literal:
        return result
    client.wait_for_workers(1)
    direct = True if client.cluster is not None else None
    layers = dict(graph.layers)
    for name, layer in literal.items():
        keys = list(layer)
        # hash=False: a key of its own, not a hash of the grid's bytes (a second of a 512 MiB one)
        futures = client.scatter([layer[key] for key in keys], direct=direct, hash=False)
        layers[name] = MaterializedLayer(dict(zip(keys, futures)))
    return type(result)(HighLevelGraph(layers, graph.dependencies), result.name, result.chunks, meta=result._meta)


def check_planes(data: Dask, first_whole: int, tail: Sequence[int], max_pixels: int) -> None:
    """Refuse blocks whole from ``first_whole`` on (as :func:`by_planes` makes) of more than
    ``max_pixels`` elements: the input's, and an output's whose axes from there have the lengths
    ``tail`` (none: not checked here)."""
    from geomcli import io

    kept = tuple(max(axis, default=0) for axis in data.chunks[:first_whole])
    biggest = kept + tuple(data.shape[first_whole:])
    io.check_size(biggest, max_pixels, f"a task's whole planes {biggest}")
    if tail:
        block = kept + tuple(tail)
        io.check_size(block, max_pixels, f"an output block {block}")


def as_dask(data: Any, chunks: Any = None, max_pixels: int | None = None) -> Dask:
    """``data`` (a zarr array, a memory map, an array) as a dask array of its own chunks (a
    sharded zarr's shards: its unit of storage, where a task per inner chunk would be thousands of
    tiny tasks; its chunks where a shard has more elements than ``max_pixels``, a task's limit),
    or of about CHUNK_BYTES each (and ``max_pixels`` elements at most, where the stored chunks allow)."""
    import math

    import dask.array as da
    import numpy as np
    from dask.base import tokenize

    from geomcli.errors import GeomError

    if chunks is None:
        shards = getattr(data, "shards", None)
        fits = shards is not None and (max_pixels is None or math.prod(shards) <= max_pixels)
        chunks = shards if fits else getattr(data, "chunks", None)
    if chunks is None or isinstance(data, tuple):
        chunks = "auto"
    if isinstance(chunks, tuple) and all(isinstance(side, int) and side > 0 for side in chunks):
        tasks = math.prod(-(-length // side) for length, side in zip(data.shape, chunks))
        if tasks > MOST_TASKS:
            raise GeomError(f"chunks {chunks} cut the shape {tuple(data.shape)} into {tasks} tasks, more than "
                            f"the {MOST_TASKS} a run takes")
        chunks = grouped(tuple(data.shape), chunks, data.dtype.itemsize, max_pixels)
    most = None if chunks != "auto" or max_pixels is None else max_pixels * max(1, data.dtype.itemsize)
    source, name = data, None
    if MappedFile.maps_a_file(data):
        source = MappedFile(data)
    elif type(data) is np.ndarray:  # (read whole: dask cuts it into literal chunks, which on_workers scatters;
        # not a subclass, which dask leaves whole in each task)
        name = f"{LITERAL}{tokenize(data, chunks, most)}"
    with _chunk_size(most):
        return da.from_array(source, chunks=chunks, name=name, lock=False, asarray=True, inline_array=True)


class MappedFile:
    """A memory map of a file (a local .npy or TIFF input) that travels to a cluster's workers as
    its file's name and layout, each worker mapping the file itself: pickled, an np.memmap is its
    whole data, so a 2 GiB .npy went into the graph whole, through the client's memory, with
    Dask's warning of a large graph. (The workers read the file where this process names it, as
    they do a batch's files.) Here it reads through the map it was made with. A worker refuses a
    file whose size or modification time is no longer the one read here: another file's bytes,
    read as this one's layout, were silently another image, or a numpy error about strides."""

    def __init__(self, mapped: np.memmap) -> None:
        import mmap
        import os

        import numpy as np

        self.shape, self.dtype, self.ndim = mapped.shape, mapped.dtype, mapped.ndim
        self.filename, self.strides = str(mapped.filename), mapped.strides
        self.version = self._version(os.stat(self.filename))
        # where its first element is in the file: the map starts at the page boundary before mapped.offset
        start = np.frombuffer(mapped._mmap, np.uint8).ctypes.data  # type: ignore[attr-defined]
        self.offset = mapped.ctypes.data - start + mapped.offset - mapped.offset % mmap.ALLOCATIONGRANULARITY
        self.mapped: np.ndarray | None = mapped

    @staticmethod
    def maps_a_file(data: Any) -> bool:
        import numpy as np

        return isinstance(data, np.memmap) and data.filename is not None and getattr(data, "_mmap", None) is not None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "mapped": None}

    @staticmethod
    def _version(stat: os.stat_result) -> tuple[int, int]:
        return stat.st_size, stat.st_mtime_ns

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        return self.filename, self.version, self.offset, self.shape, self.strides, str(self.dtype)

    def __getitem__(self, where: Any) -> np.ndarray:
        if self.mapped is None:
            import os

            import numpy as np

            from geomcli.errors import GeomError

            with open(self.filename, "rb") as file:  # (its size and time, then its map, of one file)
                if self._version(os.fstat(file.fileno())) != self.version:
                    raise GeomError(f"{self.filename}: changed since it was read; run again")
                whole = np.memmap(file, np.uint8, mode="r")
            self.mapped = np.ndarray(self.shape, self.dtype, whole, self.offset, self.strides)
        part: np.ndarray = self.mapped[where]
        return part


def grouped(shape: tuple[int, ...], chunks: tuple[int, ...], itemsize: int,
            max_pixels: int | None = None) -> tuple[int, ...]:
    """Blocks of whole ``chunks`` for an array of ``shape`` cut into more than MANY_TASKS of them,
    each side doubled in turn (the last axis first) until there are no more than that and a block
    holds a MiB (a sixteenth of GROUPED_BYTES), or a block would pass GROUPED_BYTES or
    ``max_pixels`` elements: a task per 1-pixel chunk made 80 000
    tasks of a 2x200x200 array, 10 times zarr's own read of it (zarr reads a block's chunks at
    once). Chunks of that many tasks already big, or few, are kept.

    >>> grouped((200, 200), (1, 1), 4), grouped((20, 18), (10, 9), 4), grouped((64, 1024, 1024), (1, 32, 32), 4)
    ((200, 200), (10, 9), (4, 256, 256))
    """
    import math

    sides = list(chunks)
    ends = [max(side, -(-length // side) * side) for length, side in zip(shape, chunks)]  # whole chunks per axis

    def tasks(sides: list[int]) -> int:
        return math.prod(-(-length // side) for length, side in zip(shape, sides))

    def wanting(sides: list[int]) -> bool:  # more tasks than MANY_TASKS, or blocks under a MiB
        return tasks(sides) > MANY_TASKS or math.prod(sides) * itemsize < GROUPED_BYTES // 16

    if tasks(sides) <= MANY_TASKS:
        return chunks
    while wanting(sides):
        grown = False
        for axis in reversed(range(len(sides))):
            if not wanting(sides):
                break
            wider = min(sides[axis] * 2, ends[axis])
            if wider == sides[axis]:
                continue
            block = math.prod(sides) // sides[axis] * wider
            if block * itemsize > GROUPED_BYTES or (max_pixels is not None and block > max_pixels):
                continue
            sides[axis], grown = wider, True
        if not grown:
            break
    return tuple(sides)


def _chunk_size(most: int | None = None) -> Any:
    """Chunks of about CHUNK_BYTES, or ``most`` bytes where fewer (--max-pixels' elements)."""
    import dask

    return dask.config.set({"array.chunk-size": CHUNK_BYTES if most is None else min(CHUNK_BYTES, most)})


def regular(chunks: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """The one chunk shape of a regular grid near ``chunks`` (each axis's longest chunk, so a
    crop's short first chunk does not make every chunk short): what a zarr output is chunked by.

    >>> regular(((1, 4, 4, 2), (6,), ()))
    (4, 6, 1)
    """
    return tuple(max(1, *axis) if axis else 1 for axis in chunks)


def threads_for(threads: int | None) -> Any:
    """A dask scheduler of ``threads`` threads (None: every CPU) for a run without --scheduler."""
    from geomcli import cpus

    return {"scheduler": "threads", "num_workers": threads or cpus.available_cpus()}
