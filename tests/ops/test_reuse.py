"""geomcli.ops.reuse: big outputs' memory given to the next output of the same size, and only then."""

from __future__ import annotations

import gc
import itertools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from conftest import ALL_DTYPES, make_array

import geomcli
import geomcli.ops._checks as checks
import geomcli.ops.affine_grid as grid_ops
import geomcli.ops.center_crop_pad as crop_ops
import geomcli.ops.resize as resize_ops
import geomcli.ops.space_depth as space_depth_ops
from geomcli.errors import GeomError
from geomcli.ops import reuse

SMALL = 1 << 12  # the tests' threshold: outputs of 4 KiB and more are kept


@pytest.fixture
def small_outputs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Keep outputs from 4 KiB, at most two and 1 MiB in all, in a pool of this test's own."""
    monkeypatch.setattr(reuse, "MIN_BYTES", SMALL)
    monkeypatch.setattr(reuse, "MAX_KEPT_BYTES", 1 << 20)
    monkeypatch.setattr(reuse, "_kept", [])
    monkeypatch.setattr(reuse, "_wanted", 0)
    yield


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def _junk(array: np.ndarray) -> None:
    """Every byte 0xA5: what a let-go output leaves for the next one to overwrite."""
    array.view(np.uint8).reshape(-1)[:] = 0xA5


def same_bits(found: np.ndarray, expected: np.ndarray) -> bool:
    return found.dtype == expected.dtype and found.shape == expected.shape and found.tobytes() == expected.tobytes()


def _held_junk(array: np.ndarray) -> bool:
    """Whether every byte is still 0xA5: the memory came from the let-go output."""
    return bool((array.view(np.uint8).reshape(-1) == 0xA5).all())


def test_a_let_go_output_is_given_to_the_next_of_its_size(small_outputs: None) -> None:
    first = reuse.new((32, 64), np.dtype(np.float32))
    assert not first.flags.owndata
    _junk(first)
    address = _address(first)
    del first
    second = reuse.new((64, 16, 2), np.dtype(np.float32))  # another shape, the same bytes
    assert _address(second) == address and _held_junk(second) and not second.flags.owndata
    assert second.shape == (64, 16, 2) and second.dtype == np.float32
    assert second.flags.writeable and second.flags.c_contiguous and second.flags.aligned


def test_memory_is_not_given_while_a_view_of_it_is_left(small_outputs: None) -> None:
    first = reuse.new((32, 64), np.dtype(np.float32))
    first[:] = 7
    view = first[::3, 1:]
    del first
    gc.collect()
    second = reuse.new((32, 64), np.dtype(np.float32))
    assert not np.shares_memory(second, view)
    second[:] = 1
    assert (view == 7).all()
    del view
    third = reuse.new((32, 64), np.dtype(np.float32))
    assert (third == 7).all()  # the first's memory, at last


def test_an_output_of_another_size_lets_the_kept_memory_go(small_outputs: None) -> None:
    reuse.new((1024,), np.dtype(np.float64))  # let go at once
    assert [buffer.nbytes for buffer in reuse._kept] == [8192]
    earlier = reuse.new((1024,), np.dtype(np.float64))
    other = reuse.new((2048,), np.dtype(np.float64))
    assert reuse._kept == []
    del earlier  # of a size no longer asked for: not kept
    assert reuse._kept == []
    del other
    assert [buffer.nbytes for buffer in reuse._kept] == [16384]
    in_use = reuse.new((2048,), np.dtype(np.float64))
    reuse.release()
    assert reuse._kept == []
    del in_use  # nothing is kept until a big output is asked for again
    assert reuse._kept == []


def test_small_outputs_leave_the_kept_memory_alone(small_outputs: None) -> None:
    reuse.new((1024,), np.dtype(np.float64))
    reuse.new((SMALL - 1,), np.dtype(np.uint8))
    reuse.new((SMALL - 1,), np.dtype(np.uint8), zeroed=True)
    assert [buffer.nbytes for buffer in reuse._kept] == [8192]


def test_a_big_padded_output_lets_the_kept_memory_go(small_outputs: None) -> None:
    data = np.ones((4, 40, 40), np.float32)
    reuse.new((4, 48, 48), np.dtype(np.float32))
    assert [buffer.nbytes for buffer in reuse._kept] == [4 * 48 * 48 * 4]
    padded = crop_ops.center_crop_pad(data, [48, 48], [1, 2])  # np.zeros of the kept size itself
    assert padded.flags.owndata and reuse._kept == []
    assert (padded[:, 4:44, 4:44] == 1).all() and padded.sum() == data.sum()


def test_a_memory_error_lets_the_kept_memory_go_before_one_retry(
    small_outputs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    reuse.new((1024,), np.dtype(np.float64))
    assert len(reuse._kept) == 1
    calls: list[int] = []
    zeros = np.zeros

    def short_once(*args: Any, **kwargs: Any) -> np.ndarray:
        calls.append(len(reuse._kept))
        if len(calls) == 1:
            raise MemoryError
        return zeros(*args, **kwargs)

    monkeypatch.setattr(np, "zeros", short_once)
    padded = crop_ops.center_crop_pad(np.ones((3, 3), np.uint8), [2, 5])  # small: nothing let go first
    assert calls == [1, 0] and padded.shape == (2, 5)

    def always_short(*args: Any, **kwargs: Any) -> np.ndarray:
        raise MemoryError

    monkeypatch.setattr(np, "zeros", always_short)
    with pytest.raises(GeomError, match=r"center_crop_pad: could not allocate 10 bytes for the output"):
        crop_ops.center_crop_pad(np.ones((3, 3), np.uint8), [2, 5])


def test_a_collection_inside_keep_cannot_pass_the_bound(small_outputs: None) -> None:
    others = [np.empty(8192, np.uint8) for _ in range(6)]

    class Collecting(list[np.ndarray]):
        """Keeps another let-go buffer while _keep appends to it or looks through it, as a
        collection could (a bound checked before the append would be passed)."""

        def _collect(self) -> None:
            if others:
                reuse._keep(others.pop())

        def append(self, buffer: np.ndarray) -> None:
            self._collect()
            super().append(buffer)
            self._collect()

        def __iter__(self) -> Iterator[np.ndarray]:
            self._collect()
            return super().__iter__()

    reuse._kept = Collecting()
    reuse.new((1024,), np.dtype(np.float64))
    assert others == [] and list.__len__(reuse._kept) == reuse.MAX_KEPT


def test_max_kept_zero_keeps_nothing(small_outputs: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reuse, "MAX_KEPT", 0)
    outputs = [reuse.new((1024,), np.dtype(np.float64)) for _ in range(3)]
    assert all(output.flags.owndata for output in outputs)
    del outputs
    assert reuse._kept == []


def test_without_ctypes_big_outputs_are_plain(small_outputs: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ctypes", None)  # a Python built without libffi
    output = reuse.new((1024,), np.dtype(np.float64))
    assert output.flags.owndata and output.shape == (1024,)
    del output
    assert reuse._kept == []


def test_sub_array_dtypes_are_as_np_empty_makes_them(small_outputs: None) -> None:
    dtype = np.dtype((np.float64, (2, 2)))
    assert reuse.new((512,), dtype).shape == np.empty((512,), dtype).shape == (512, 2, 2)


def test_at_most_two_buffers_and_the_byte_bound_are_kept(small_outputs: None) -> None:
    outputs = [reuse.new((1024,), np.dtype(np.float64)) for _ in range(3)]
    addresses = {_address(output) for output in outputs}
    assert len(addresses) == 3  # live outputs never share memory
    del outputs
    assert len(reuse._kept) == reuse.MAX_KEPT == 2
    big = [reuse.new((384 << 10,), np.dtype(np.uint8)) for _ in range(3)]  # 2 fit in 1 MiB
    del big
    assert [buffer.nbytes for buffer in reuse._kept] == [384 << 10, 384 << 10]
    biggest = reuse.new((600 << 10,), np.dtype(np.uint8))  # alone more than half: kept alone
    another = reuse.new((600 << 10,), np.dtype(np.uint8))
    del biggest, another
    assert [buffer.nbytes for buffer in reuse._kept] == [600 << 10]
    past = reuse.new(((1 << 20) + 1,), np.dtype(np.uint8))  # past the bound: never kept, and
    assert past.flags.owndata and reuse._kept == []  # another size, so the kept one goes


def test_the_threshold_and_object_outputs(small_outputs: None) -> None:
    assert reuse.new((SMALL - 1,), np.dtype(np.uint8)).flags.owndata
    assert not reuse.new((SMALL,), np.dtype(np.uint8)).flags.owndata
    objects = reuse.new((SMALL,), np.dtype(object))
    assert objects.flags.owndata and objects[0] is None


KEPT_DTYPES = [dtype for dtype in ALL_DTYPES if dtype.kind != "T"]  # StringDType: see below


def test_stringdtype_outputs_never_take_kept_memory(small_outputs: None) -> None:
    """Its items refer to strings its array owns: an array made on raw memory would be none."""
    _junk(reuse.new((8, 512), np.dtype(np.uint8)))
    strings = reuse.new((SMALL,), np.dtype(np.dtypes.StringDType()))
    assert strings.flags.owndata and strings[0] == ""


@pytest.mark.parametrize("dtype", [*KEPT_DTYPES, np.dtype(">f8"), np.dtype("S3")], ids=str)
def test_every_dtype_in_kept_memory(small_outputs: None, dtype: np.dtype) -> None:
    first = reuse.new((8, 512), dtype)
    _junk(first)
    del first
    second = reuse.new((8, 512), dtype)
    assert _held_junk(second) and second.dtype == dtype and second.flags.aligned and second.flags.writeable


@pytest.fixture
def small_fast_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The blocked, threaded and row-block paths of big outputs, for small ones."""
    monkeypatch.setattr(checks, "BLOCK_BYTES", 1 << 10)
    monkeypatch.setattr(checks, "PARALLEL_BYTES", 1 << 10)
    monkeypatch.setattr(grid_ops, "_GRID_ROWS_ELEMENTS", 1 << 6)
    monkeypatch.setattr(grid_ops, "_GRID_BLOCK_BYTES", dict.fromkeys((2, 3), 1 << 12))


@pytest.mark.parametrize("dtype", KEPT_DTYPES, ids=str)
def test_the_kernels_overwrite_every_byte_of_kept_memory(
    small_outputs: None, small_fast_paths: None, rng: np.random.Generator, dtype: np.dtype
) -> None:
    data = make_array(rng, (2, 12, 18, 24), dtype)

    def in_junk(kernel: Callable[..., np.ndarray], expected: np.ndarray, *args: Any) -> None:
        for threads in (1, 2):
            _junk(reuse.new(expected.shape, expected.dtype))  # let go at once, full of 0xA5
            found = kernel(*args, threads=threads)
            assert not found.flags.owndata  # in the kept memory
            np.testing.assert_array_equal(found, expected)

    for mode in ("DCR", "CRD"):
        moved = space_depth_ops.space_to_depth(data, 3, mode, threads=1)
        in_junk(space_depth_ops.space_to_depth, moved, data, 3, mode)
        in_junk(space_depth_ops.depth_to_space, data, moved, 3, mode)
    in_junk(crop_ops.center_crop_pad, data[:, 1:11, 1:16, 3:20], data, [10, 15, 17], [1, 2, 3])


RESIZES = {
    "nearest": {"scales": [2, 1.5], "axes": [2, 3]},
    "numpy-passes": {"sizes": [1, 5, 40, 30], "mode": "linear"},  # three axes
    "passes": {"scales": [1.5, 2], "axes": [2, 3], "mode": "linear"},  # the compiled kernel's, for its types
    "cubic-roi": {"sizes": [25, 40], "axes": [2, 3], "mode": "cubic",
                  "coordinate_transformation_mode": "tf_crop_and_resize", "roi": [-0.2, -0.1, 1.1, 1.3]},  # fill
    "copy": {"scales": [1, 1], "axes": [2, 3]},
}
# bool and strings take nearest only (and a copy)
RESIZE_CASES = [pytest.param(dtype, attributes, id=f"{name}-{dtype}") for name, attributes in RESIZES.items()
                for dtype in KEPT_DTYPES if dtype.kind not in "bSU" or attributes.get("mode", "nearest") == "nearest"]


@pytest.mark.parametrize(("dtype", "attributes"), RESIZE_CASES)
def test_resize_overwrites_every_byte_of_kept_memory(
    small_outputs: None, rng: np.random.Generator, dtype: np.dtype, attributes: dict[str, Any]
) -> None:
    data = make_array(rng, (2, 3, 30, 24), dtype)  # every output 4 KiB or more, even of 1-byte items
    found = resize_ops.resize(data, **attributes)
    # the result in an out of zeros and in one of junk: the kernel writes every element of both
    expected = resize_ops.resize(data, **attributes, out=np.zeros_like(found))
    in_junk = np.empty_like(found)
    _junk(in_junk)
    assert same_bits(resize_ops.resize(data, **attributes, out=in_junk), expected)
    for threads in (1, 2):
        _junk(reuse.new(expected.shape, expected.dtype))  # let go at once, full of 0xA5
        found = resize_ops.resize(data, **attributes, threads=threads)
        assert not found.flags.owndata  # in the kept memory
        assert same_bits(found, expected)


def test_every_kernel_says_its_output_may_be_in_kept_memory() -> None:
    """And that memory let go stays in use until release(): two resizes of (1, 3, 2000, 2000) by 3,
    let go, left 823 MiB resident."""
    for name in geomcli.__all__:
        kernel = getattr(geomcli, name)
        if callable(kernel) and name != "GeomError":
            returns = " ".join((kernel.__doc__ or "").split("Returns\n", 1)[1].split("Raises\n", 1)[0].split())
            assert "may take the memory of one let go before" in returns, name
            assert "stay in memory for that until ``geomcli.ops.reuse.release()``" in returns, name


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, ml_dtypes.bfloat16], ids=str)
@pytest.mark.parametrize("size", [[3, 1, 40, 48], [2, 1, 6, 20, 48]], ids=["2-D", "3-D"])
def test_affine_grids_in_kept_memory_keep_their_bits(
    small_outputs: None, small_fast_paths: None, rng: np.random.Generator, dtype: type, size: list[int]
) -> None:
    spatial = len(size) - 2
    theta = rng.uniform(-2, 2, (size[0], spatial, spatial + 1)).astype(dtype)
    expected = np.ones(grid_ops.affine_grid_output_shape(theta.shape, size), theta.dtype)
    grid_ops.affine_grid(theta, size, True, threads=1, out=expected)  # into memory of its own
    for threads in (1, 2):
        _junk(reuse.new(expected.shape, expected.dtype))
        found = grid_ops.affine_grid(theta, size, True, threads=threads)
        assert not found.flags.owndata
        assert found.tobytes() == expected.tobytes()


def test_threads_at_once_get_outputs_of_their_own(small_outputs: None) -> None:
    clashes: list[int] = []

    def work(mark: int) -> None:
        for _ in range(300):
            output = reuse.new((1024,), np.dtype(np.int64))
            output[:] = mark
            if not (output == mark).all():
                clashes.append(mark)

    threads = [threading.Thread(target=work, args=(mark,)) for mark in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clashes == []
    assert len(reuse._kept) <= reuse.MAX_KEPT


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_is_not_held_by_a_lock_another_thread_had(small_outputs: None) -> None:
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with reuse._lock:
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    try:
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's exit status is the assertion
            code = 3
            try:
                signal.alarm(10)
                code = 0 if reuse.new((1024,), np.dtype(np.float64)).nbytes == 8192 else 4
            finally:
                os._exit(code)
    finally:
        release.set()
        holder.join()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_outputs_from_32_mib_are_kept() -> None:
    """The real threshold: glibc's largest mmap threshold, below which its heap hands freed memory
    back by itself."""
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], np.float32)
    try:
        below = grid_ops.affine_grid(theta, (1, 1, 2048, 2047))  # 32 MiB less 16 KiB
        assert below.flags.owndata
        first = grid_ops.affine_grid(theta, (1, 1, 2048, 2048))  # (1, 2048, 2048, 2) float32: 32 MiB
        assert first.nbytes == reuse.MIN_BYTES and not first.flags.owndata
        expected = first.copy()
        _junk(first)
        del first
        second = grid_ops.affine_grid(theta, (1, 1, 2048, 2048))
        assert not second.flags.owndata
        np.testing.assert_array_equal(second, expected)
    finally:
        reuse.release()


# --- the grids' work arrays ------------------------------------------------------------


@pytest.mark.parametrize("fill", [0xFF, 0xA5], ids=["NaN", "junk"])
@pytest.mark.parametrize("size", [[3, 1, 40, 48], [2, 1, 6, 20, 48]], ids=["2-D", "3-D"])
def test_grids_made_in_work_memory_full_of_junk_keep_their_bits(
    small_fast_paths: None, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch, size: list[int], fill: int
) -> None:
    """Work arrays are new memory, which may hold what freed memory held: the 1s and 0/1 selectors
    of the matrix product and every term must be set anew, whatever it holds (NaN, 0xA5 bytes)."""
    carve, carved = grid_ops._carve, []

    def carve_junk(memory: np.ndarray, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
        memory[:] = fill
        carved.append(memory.nbytes)
        return carve(memory, shapes)

    monkeypatch.setattr(grid_ops, "_carve", carve_junk)
    spatial = len(size) - 2
    theta = rng.uniform(-2, 2, (size[0], spatial, spatial + 1)).astype(np.float32)
    expected = np.zeros(grid_ops.affine_grid_output_shape(theta.shape, size), theta.dtype)
    grid_ops._affine_grid_plain(theta.astype(np.float64), [grid_ops._base_coordinates(n, False) for n in size[:1:-1]],
                               expected)
    for threads in (1, 2):
        found = grid_ops.affine_grid(theta, size, threads=threads)
        assert found.tobytes() == expected.tobytes()
    assert len(carved) >= 3  # the row-block path ran, on one thread and on two


@pytest.mark.parametrize("start", [0, 1, 8, 40])
def test_carved_work_arrays_start_on_cache_lines_apart_inside_their_memory(start: int) -> None:
    shapes = [(3, 5, 2), (7,), (0,), (2, 9)]
    memory = np.empty(grid_ops._carved_bytes(shapes) + start, np.uint8)[start:]
    arrays = grid_ops._carve(memory, shapes)
    low, high = _address(memory), _address(memory) + memory.nbytes
    spans = []
    for array, shape in zip(arrays, shapes, strict=True):
        assert array.shape == shape and array.dtype == np.float64 and array.base is not None
        if array.size == 0:  # no memory: its address is numpy's to choose
            continue
        assert _address(array) % 64 == 0
        spans.append((_address(array), _address(array) + array.nbytes))
        assert low <= spans[-1][0] and spans[-1][1] <= high
    spans.sort()
    assert all(end <= begin for (_, end), (begin, _) in itertools.pairwise(spans))
