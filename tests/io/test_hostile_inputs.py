"""Inputs crafted to cost memory or a traceback: pipes of junk, headers that claim more than the
file holds, header values numpy's own check lets through. Each case is one error line (or a
plain read), in bounded memory, measured on a real process where memory is the point.
"""

from __future__ import annotations

import io as bytes_io
import re
import shlex
import struct
import subprocess
import sys
import textwrap
import types
import zlib
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import run
from PIL import Image

from geomcli import io
from geomcli.errors import GeomError

GEOMCLI = shlex.join([sys.executable, "-m", "geomcli"])
# a few times what `geomcli info` of a small file takes (about 33 MiB)
SMALL_RUN_MIB = 100
JUNK_BYTES = 300 << 20


def one_error(stderr: str, name: str | Path) -> str:
    """The reason of the single ``Error: <name>: <reason>`` line ``stderr`` holds (besides a batch's
    count)."""
    assert "Traceback" not in stderr, stderr
    (line,) = [line for line in stderr.splitlines() if not line.startswith("crop-pad: dry run")]
    prefix = f"Error: {name}: "
    assert line.startswith(prefix), stderr
    return line[len(prefix):]


def peak_run(shell: str) -> tuple[int, str, float]:
    """Run a bash command line; its exit status, stderr, and the peak resident memory in MiB of the
    biggest process it ran (ru_maxrss of a fresh parent's children, so no earlier test counts)."""
    parent = textwrap.dedent("""
        import resource, subprocess, sys
        done = subprocess.run(["bash", "-c", sys.argv[1]], capture_output=True, text=True)
        sys.stderr.write(done.stderr)
        print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    """)
    done = subprocess.run([sys.executable, "-c", parent, shell], capture_output=True, text=True, timeout=120)
    code, peak = done.stdout.split()
    return int(code), done.stderr, float(peak)


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png(width: int, height: int, depth: int, colour_type: int, rows: bytes, *extra: bytes,
        interlace: int = 0) -> bytes:
    """A PNG of ``rows`` (each with its filter byte), with ``extra`` chunks before its image data."""
    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour_type, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + b"".join(extra) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def npy_with_shape(shape: str, data: bytes) -> bytes:
    """A version 1.0 .npy of float32 whose header says ``'shape': <shape>``, as written."""
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}".encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


# ---- 1. pipes: sniffed first, read no further than the header declares, held once ----------------


@pytest.mark.parametrize(("source", "reason"), [
    ("-", "unrecognised content (expected one of png, jpeg, bmp, gif, webp, npy, tiff)"),
    (f"<(head -c {JUNK_BYTES} /dev/zero)", "no file extension and unrecognised content"),
])
def test_zeros_in_a_pipe_are_refused_from_their_first_bytes(source: str, reason: str) -> None:
    code, stderr, peak = peak_run(f"head -c {JUNK_BYTES} /dev/zero | {GEOMCLI} info {source}")
    assert code == 1
    assert one_error(stderr, "<stdin>" if source == "-" else "/dev/fd/63").startswith(reason)
    assert peak < SMALL_RUN_MIB, peak  # it was 2 x the 300 MiB


def test_a_fifo_whose_content_disagrees_with_its_name_is_refused_before_the_rest_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "named.npy"
    code, stderr, peak = peak_run(f"mkfifo {fifo}; (printf '\\x89PNG\\r\\n\\x1a\\n'; head -c {JUNK_BYTES} /dev/zero)"
                                  f" > {fifo} & {GEOMCLI} info {fifo}; status=$?; wait; exit $status")
    assert code == 1
    assert one_error(stderr, fifo) == "content is PNG, not NPY"
    assert peak < SMALL_RUN_MIB, peak


@pytest.mark.parametrize("fmt", ["npy", "png", "bmp", "gif", "webp"])  # BMP, GIF, WebP took 2 x the 300 MiB
def test_a_pipe_is_read_no_further_than_its_header_declares(tmp_path: Path, fmt: str) -> None:
    small = tmp_path / f"small.{fmt}"
    shape = (3, 4) if fmt == "gif" else (3, 4, 3)
    io.write_array(np.arange(np.prod(shape), dtype=np.uint8).reshape(shape), str(small))
    code, stderr, peak = peak_run(f"(cat {small}; head -c {JUNK_BYTES} /dev/zero) | {GEOMCLI} info -")
    assert (code, stderr) == (0, ""), stderr
    assert peak < SMALL_RUN_MIB, peak


def test_an_animation_s_frames_are_read_into_one_array_not_stacked_from_copies(tmp_path: Path) -> None:
    """'--frames all' kept a copy of every frame, then stacked them into the array: a 3000x3000
    two-frame WebP (a 51 MiB array) peaked at 317 MiB, 6 times its array, with Pillow's decoder's
    canvases. The frames are now read one by one into the array (248 MiB)."""
    frames = [Image.fromarray(np.full((3000, 3000, 3), value, np.uint8)) for value in (40, 200)]
    frames[0].save(tmp_path / "a.webp", save_all=True, append_images=frames[1:], duration=100)
    array_mib = 2 * 3000 * 3000 * 3 / 2**20
    code, stderr, peak = peak_run(f"{GEOMCLI} crop-pad {tmp_path / 'a.webp'} --frames all -o {tmp_path / 'o.npy'} "
                                  "--shape 2,2 -q")
    assert (code, stderr) == (0, ""), stderr
    assert peak < 5.5 * array_mib, peak
    found = np.load(tmp_path / "o.npy")
    assert found.shape == (2, 2, 2, 3) and found[:, 0, 0, 0].tolist() == [40, 200]


@pytest.mark.parametrize("fmt", ["png", "gif"])
def test_an_animation_s_frames_reach_the_array_without_a_copy_of_each_whole_frame(tmp_path: Path, fmt: str) -> None:
    """Each frame went into the array through np.asarray, whose im.tobytes() held the whole frame
    twice over (its encoded blocks, then their join) beside Pillow's image: a 6000x6000 two-frame
    APNG (a 206 MiB array) peaked at 689 MiB. The frames are copied a band of rows at a time (593
    MiB): what Python and numpy allocate (tracemalloc) is the array, the file's bytes and a band."""
    import tracemalloc

    frames = [Image.new("RGB" if fmt == "png" else "L", (3000, 2000), value) for value in (40, 200)]
    path = tmp_path / f"a.{fmt}"
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=100)
    tracemalloc.start()
    try:
        loaded = io.read_array(str(path), frames="all")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert loaded.data.shape == (2, 2000, 3000, 3) and loaded.data[:, 0, 0, 0].tolist() == [40, 200]
    frame_bytes = loaded.data.nbytes // 2  # (the GIF's grey palette is read as RGB)
    assert peak < loaded.data.nbytes + path.stat().st_size + frame_bytes // 2, (peak, loaded.data.nbytes)


def test_max_pixels_counts_every_frame_with_frames_all_and_the_first_without(tmp_path: Path) -> None:
    """--max-pixels counts the elements of every frame (T x H x W x C) with --frames all, of the
    first frame alone with --frames first."""
    frames = [Image.new("RGB", (8, 6), value) for value in (40, 200, 90)]
    frames[0].save(tmp_path / "a.webp", save_all=True, append_images=frames[1:], duration=100, lossless=True)
    with pytest.raises(GeomError, match=r"a\.webp: 432 elements exceed the limit of 431; raise it"):
        io.read_array(str(tmp_path / "a.webp"), max_pixels=431, frames="all")
    assert io.read_array(str(tmp_path / "a.webp"), max_pixels=432, frames="all").data.shape == (3, 6, 8, 3)
    assert io.read_array(str(tmp_path / "a.webp"), max_pixels=144, frames="first").data.shape == (6, 8, 3)
    with pytest.raises(GeomError, match=r"a\.webp: 144 elements exceed the limit of 143; raise it"):
        io.read_array(str(tmp_path / "a.webp"), max_pixels=143, frames="first")


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_a_later_frame_s_transparency_turns_the_frames_before_it_rgba(mode: str) -> None:
    """Read frame by frame, the frames before the first with transparency grow an alpha, each as
    Pillow converts it to RGBA (as the frames were, when all were read before any was kept)."""
    from geomcli.io import _pillow

    rng = np.random.default_rng(42)
    frames = rng.integers(0, 256, (3, 5, 4, 3) if mode == "RGB" else (3, 5, 4), dtype=np.uint8)
    grown = _pillow._as_rgba(frames, 2)
    assert grown.shape == (3, 5, 4, 4)
    for index in range(2):
        assert np.array_equal(grown[index], np.asarray(Image.fromarray(frames[index], mode).convert("RGBA")))


def test_a_png_chunk_longer_than_its_image_can_need_is_refused_before_it_is_read() -> None:
    start = png(1, 1, 8, 0, b"\0\0")[:33]  # signature and IHDR of a 1x1 grey image
    idat = struct.pack(">I", 2**31 - 1) + b"IDAT"
    stdin = bytes_io.BytesIO(start + idat + bytes(4 << 20))
    with pytest.raises(GeomError, match=r"^<stdin>: not a readable PNG \(chunks run past \d+ bytes, more than a "
                                        r"1x1 image can need\)$"):
        _read_stdin(stdin)
    assert stdin.tell() < 1 << 20


@pytest.mark.parametrize("depth", [8, 16])
def test_a_png_whose_image_data_cannot_hold_its_frame_is_truncated_before_it_is_decoded(
        tmp_path: Path, depth: int) -> None:
    """Past the end of its data, Pillow gave zeros without a word: a 4 KB PNG declaring 40000x40000
    grey was read whole (exit 0) and 'info' of it took 1.6 GB. zlib holds at most 1032 bytes in
    one; here 2 rows of 4000 in 40 bytes of image data (a 16-bit one was "truncated" once decoded)."""
    source = tmp_path / "liar.png"
    row = b"\0" + bytes(4000 * depth // 8)
    source.write_bytes(png(4000, 4000, depth, 0, row * 2))
    result = run("crop-pad", source, "-o", tmp_path / "out.png", "--shape", "8,8")
    assert result.exit_code == 1
    stored = len(zlib.compress(row * 2))
    assert one_error(result.stderr, source) == (
        f"not a readable PNG (truncated: its {stored} bytes of image data hold at most {stored * 1032} of the "
        f"{4000 * 4000 * depth // 8} its 4000x4000 frame needs)")
    assert not (tmp_path / "out.png").exists()


# 64x64 images whose zlib stream ends, whole, after half their rows (each with its filter byte 0)
HALF_ROWS = {
    "grey": (0, (b"\0" + b"\xc8" * 64) * 32, (), 0),
    "rgb": (2, (b"\0" + b"\xc8" * 64 * 3) * 32, (), 0),
    "palette": (3, (b"\0" + b"\x01" * 64) * 32, (chunk(b"PLTE", b"\x10\x20\x30\xc8\xc8\xc8"),), 0),
    # Adam7's first six passes, of (rows, columns) as below; the seventh (32 rows of 64) missing
    "interlaced": (0, b"".join((b"\0" + b"\xc8" * columns) * rows for rows, columns in
                               [(8, 8), (8, 8), (8, 16), (16, 16), (16, 32), (32, 32)]), (), 1),
}
# (bytes inflated, bytes all the rows take) of each
HALF_ROWS_SIZES = {"grey": (2080, 4160), "rgb": (6176, 12352), "palette": (2080, 4160), "interlaced": (2136, 4216)}


@pytest.mark.parametrize("case", HALF_ROWS)
def test_a_png_whose_zlib_stream_ends_with_a_row_before_its_last_is_truncated(tmp_path: Path, case: str) -> None:
    """Pillow's decoder stops where the stream ends, when a row ends there too, without a word (its
    check is commented out in ZipDecode.c): the rows after it were zeros, exit 0. Data within
    deflate's 1032 to 1 of the frame got past the check above; libpng (16 bits) refused it."""
    colour_type, rows, extra, interlace = HALF_ROWS[case]
    source = tmp_path / "half.png"
    source.write_bytes(png(64, 64, 8, colour_type, rows, *extra, interlace=interlace))
    result = run("crop-pad", source, "-o", tmp_path / "out.png", "--shape", "8,8")
    assert result.exit_code == 1
    inflated, needed = HALF_ROWS_SIZES[case]
    assert one_error(result.stderr, source) == (
        f"not a readable PNG (truncated: its image data inflates to {inflated} bytes of the {needed} the rows of "
        "its 64x64 frame take)")
    assert not (tmp_path / "out.png").exists()


@pytest.mark.parametrize("interlace", [0, 1])
@pytest.mark.parametrize("height", [1, 2, 63, 64])
def test_a_png_is_inflated_twice_only_where_the_row_decoded_last_keeps_its_mark(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch,
                                                                               interlace: int, height: int) -> None:
    """Inflating every PNG's data twice cost a fifth of its read, and a file whose row decoded last
    (Adam7's last odd one) was all zeros, as Pillow left it where the stream stops early, still
    paid it: a third of the read of a picture of a black bottom edge. That row is now marked
    before decoding (bytes 1, 2, 3, ...): only a file whose row still holds the mark, where the
    stream stopped early or the picture holds those very bytes, is inflated again; an interlaced
    image of one row always (its row is written in four passes)."""
    from geomcli.io import _png

    inflated: list[bytes] = []
    check = _png.short_stream
    monkeypatch.setattr(_png, "short_stream", lambda data, *more: inflated.append(data) or check(data, *more))
    values = np.arange(64 * height, dtype=np.uint8).reshape(height, 64) % 200 + 2  # (no row is the mark)
    last = height - 1 - (height % 2 if interlace and height > 1 else 0)
    blank, marked = values.copy(), values.copy()
    blank[last] = 0
    marked[last] = np.arange(1, 65)
    for data, checked in ((values, interlace and height == 1), (blank, interlace and height == 1), (marked, True)):
        inflated.clear()
        rows = b"".join(b"\0" + row.tobytes() for row in data)
        if interlace:  # Adam7's passes of the same rows, each row's filter byte 0
            rows = b"".join(b"\0" + row.tobytes() for top, left, down, across in
                            [(0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2),
                             (1, 0, 2, 1)] for row in data[top::down, left::across] if row.size)
        (tmp_path / "a.png").write_bytes(png(64, height, 8, 0, rows, interlace=interlace))
        assert np.array_equal(io.read_array(str(tmp_path / "a.png")).data, data)
        assert len(inflated) == checked


def test_an_apng_frame_whose_zlib_stream_ends_with_a_row_before_its_last_is_truncated(tmp_path: Path) -> None:
    """The same of a later frame of an APNG, read with --frames all (its first frame is whole)."""
    row = b"\0" + b"\xc8" * 64

    def frame_control(sequence: int) -> bytes:
        return chunk(b"fcTL", struct.pack(">IIIIIHHBB", sequence, 64, 64, 0, 0, 1, 10, 0, 0))

    whole = png(64, 64, 8, 0, row * 64, chunk(b"acTL", struct.pack(">II", 2, 0)), frame_control(0))
    later = frame_control(1) + chunk(b"fdAT", struct.pack(">I", 2) + zlib.compress(row * 32))
    source = tmp_path / "later.png"
    source.write_bytes(whole[:whole.rindex(b"IEND") - 4] + later + chunk(b"IEND", b""))
    assert io.read_array(str(source), frames="first").data.shape == (64, 64)
    with pytest.raises(GeomError, match=r"later\.png: not a readable PNG \(truncated: a later frame's image data "
                                        r"inflates to 2080 bytes of the 4160 the rows of its 64x64 frame take\)$"):
        io.read_array(str(source), frames="all")


def test_a_npy_header_over_the_limit_is_refused_before_its_data_is_read() -> None:
    stdin = bytes_io.BytesIO(npy_with_shape("(1000, 1000)", bytes(4 << 20)))
    with pytest.raises(GeomError, match=r"^<stdin>: 1000000 elements exceed the limit of 1000; raise it"):
        _read_stdin(stdin, max_pixels=1000)
    assert stdin.tell() < 1 << 20


def _read_stdin(stdin: bytes_io.BytesIO, max_pixels: int = io.DEFAULT_MAX_PIXELS,
                frames: str | None = None) -> io.Loaded:
    saved = sys.stdin
    sys.stdin = types.SimpleNamespace(buffer=stdin)  # type: ignore[assignment]
    try:
        return io.read_array("-", max_pixels=max_pixels, frames=frames)
    finally:
        sys.stdin = saved


def test_a_pipe_of_a_format_that_declares_no_size_is_read_up_to_the_limit() -> None:
    stdin = bytes_io.BytesIO(b"\xff\xd8\xff" + bytes(4 << 20))
    with pytest.raises(GeomError, match=r"^<stdin>: more than 1112576 bytes, more than 4000 elements could need; "
                                        r"raise the limit with --max-pixels"):
        _read_stdin(stdin, max_pixels=4000)
    assert stdin.tell() == 1112577  # the limit and one byte


def test_a_npy_in_a_pipe_may_take_more_bytes_than_its_elements_at_16_each() -> None:
    """The byte limit is for formats that declare no size; a .npy's header is exact."""
    data = np.array(["x" * 100_000])  # 400 kB in one element
    buffer = bytes_io.BytesIO()
    np.save(buffer, data)
    assert _read_stdin(bytes_io.BytesIO(buffer.getvalue()), max_pixels=1).data[0] == data[0]


def test_an_animated_png_in_a_pipe_is_read_to_its_last_frame() -> None:
    from PIL import Image

    frames = [Image.new("RGB", (40, 30), (index * 60, 0, 0)) for index in range(4)]
    buffer = bytes_io.BytesIO()
    frames[0].save(buffer, format="PNG", save_all=True, append_images=frames[1:])
    loaded = _read_stdin(bytes_io.BytesIO(buffer.getvalue()), frames="all")
    assert loaded.data.shape == (4, 30, 40, 3)
    assert loaded.data[:, 0, 0, 0].tolist() == [0, 60, 120, 180]


def test_a_npy_in_a_pipe_is_held_once(tmp_path: Path) -> None:
    source = tmp_path / "big.npy"
    np.lib.format.open_memmap(source, mode="w+", dtype=np.uint8, shape=(200 << 20,))
    code, stderr, peak = peak_run(f"{GEOMCLI} info - < <(cat {source})")
    assert (code, stderr) == (0, ""), stderr
    # its bytes once, as they came; it was twice (431 MiB): the pieces joined, then np.load's copy
    assert peak < 200 + SMALL_RUN_MIB, peak


def test_a_npy_read_from_a_pipe_equals_the_file(tmp_path: Path) -> None:
    for data in (np.arange(24, dtype=">i4").reshape(2, 3, 4), np.asfortranarray(np.arange(6.0).reshape(2, 3)),
                 np.array(3.5), np.zeros((0, 3), np.float32), np.array(["ab", "c"]), np.array([True, False]),
                 np.arange(5).astype(ml_dtypes.bfloat16)):
        path = tmp_path / "a.npy"
        io.write_array(data, str(path))
        loaded = _read_stdin(bytes_io.BytesIO(path.read_bytes()))
        assert loaded.data.dtype == data.dtype
        np.testing.assert_array_equal(loaded.data, data)


# ---- 2. a JPEG frame bigger than its data --------------------------------------------------------


def jpeg(height: int, width: int, *, declared: tuple[int, int] | None = None, **save: object) -> bytes:
    """A grey JPEG by Pillow; ``declared``: its SOF's height and width patched to these."""
    from PIL import Image

    values = np.random.default_rng(42).integers(0, 256, (height, width), dtype=np.uint8)
    buffer = bytes_io.BytesIO()
    Image.fromarray(values).save(buffer, format="JPEG", **save)
    data = bytearray(buffer.getvalue())
    if declared is not None:
        sof = next(data.find(marker) for marker in (b"\xff\xc0", b"\xff\xc2") if data.find(marker) > 0)
        struct.pack_into(">HH", data, sof + 5, *declared)
    return bytes(data)


@pytest.mark.parametrize("save", [{}, {"progressive": True}], ids=["baseline", "progressive"])
def test_a_jpeg_frame_its_data_cannot_cover_is_refused(tmp_path: Path, save: dict[str, object]) -> None:
    source = tmp_path / "liar.jpg"
    source.write_bytes(jpeg(16, 16, declared=(1000, 1000), **save))
    result = run("crop-pad", source, "-o", tmp_path / "out.png", "--shape", "8,8")
    assert result.exit_code == 1
    assert one_error(result.stderr, source) == "not a readable JPEG (damaged: too little image data for 1000x1000)"
    assert not (tmp_path / "out.png").exists()


def test_a_tiny_jpeg_declaring_a_big_frame_is_refused_in_little_memory(tmp_path: Path) -> None:
    source = tmp_path / "liar.jpg"
    source.write_bytes(jpeg(16, 16, declared=(12000, 12000)))
    code, stderr, peak = peak_run(f"{GEOMCLI} info {source}")
    assert code == 1
    assert "damaged: too little image data for 12000x12000" in one_error(stderr, source)
    assert peak < SMALL_RUN_MIB, peak  # 144 MB of made-up grey before


@pytest.mark.parametrize("save", [{"optimize": True}, {"optimize": True, "progressive": True},
                                  {"subsampling": 2}, {"progressive": True, "subsampling": 2}],
                         ids=["optimized", "progressive", "420", "progressive-420"])
def test_jpegs_at_the_least_data_per_block_are_read(tmp_path: Path, save: dict[str, object]) -> None:
    """One flat colour, optimised Huffman tables: each block codes to a bit or two, the bound itself."""
    from PIL import Image

    source = tmp_path / "flat.jpg"
    mode, colour = ("RGB", (90, 90, 90)) if "subsampling" in save else ("L", 90)
    Image.new(mode, (1003, 997), colour).save(source, format="JPEG", **save)
    loaded = io.read_array(str(source))
    assert loaded.data.shape[:2] == (997, 1003)
    assert abs(int(loaded.data.mean()) - 90) <= 1


def test_a_jpeg_with_restart_markers_and_a_thumbnail_is_read(tmp_path: Path) -> None:
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = 1
    source = tmp_path / "restarts.jpg"
    source.write_bytes(jpeg(64, 48, restart_marker_blocks=1, exif=exif.tobytes()))
    assert io.read_array(str(source)).data.shape == (64, 48)


# ---- 3. npy header values numpy's own check lets through -------------------------------------------


NPY_SHAPES = [
    ("(18446744073709551616, 0)", b"", "dimension 18446744073709551616"),
    ("(True, 2)", bytes(8), "dimension True"),
    ("(4611686018427387904, 0, 4611686018427387904)", b"", "no array can have shape"),
    (f"({'1, ' * 65})", bytes(4), "65 axes, more than numpy's 64"),  # a pipe's read raised ValueError
]


@pytest.mark.parametrize(("shape", "data", "reason"), NPY_SHAPES, ids=["2**64", "bool", "product", "65-axes"])
def test_a_npy_shape_that_is_no_array_shape_is_one_error_line(tmp_path: Path, shape: str, data: bytes,
                                                              reason: str) -> None:
    source = tmp_path / "odd.npy"
    source.write_bytes(npy_with_shape(shape, data))
    expected = f"not a readable NPY (malformed header: {reason}"
    for command in (["info", source], ["crop-pad", source, "-o", tmp_path / "out.npy", "--shape", "1,1"],
                    ["crop-pad", source, "--out-dir", tmp_path / "dry", "--shape", "1,1", "--dry-run"]):
        result = run(*command)
        assert result.exit_code == 1, result.stderr
        assert one_error(result.stderr, source).startswith(expected)
    result = run("info", "-", stdin=source.read_bytes())
    assert one_error(result.stderr, "<stdin>").startswith(expected)
    with pytest.raises(GeomError, match=r"malformed header"):
        io.read_header(str(source))


@pytest.mark.parametrize("version", [b"\x02\x00", b"\x03\x00"], ids=["2.0", "3.0"])
def test_a_npy_header_declaring_4_gb_is_refused_before_it_is_read(tmp_path: Path, version: bytes) -> None:
    """numpy reads the bytes a 2.0 header declares before it checks their number: a batch's header
    read (a file, not the bytes of one) asked for 4 GB, a MemoryError under ulimit -v."""
    source = tmp_path / "long.npy"
    source.write_bytes(b"\x93NUMPY" + version + struct.pack("<I", 2**32 - 1) + b"{" + bytes(64))
    code, stderr, _ = peak_run(f"ulimit -v {2 << 20}; {GEOMCLI} crop-pad {source} --out-dir {tmp_path / 'out'} "
                               "--shape 1,1 --dry-run")
    assert code == 1
    assert one_error(stderr, source) == "not a readable NPY (malformed header: 4294967295 bytes long, more than 10000)"


def test_a_npy_of_an_unknown_version_is_named_so_before_its_header_length(tmp_path: Path) -> None:
    # its length was read as 2.0's and refused first: "4294967295 bytes long"
    source = tmp_path / "v4.npy"
    source.write_bytes(b"\x93NUMPY\x04\x00" + struct.pack("<I", 2**32 - 1) + b"{")
    result = run("info", source)
    assert result.exit_code == 1
    assert one_error(result.stderr, source) == "not a readable NPY (unknown version 4.0)"


def test_npy_shapes_that_are_no_array_shapes_fail_alone_in_workers(tmp_path: Path) -> None:
    for index, (shape, data, _) in enumerate(NPY_SHAPES):
        (tmp_path / f"odd{index}.npy").write_bytes(npy_with_shape(shape, data))
    np.save(tmp_path / "good.npy", np.zeros((2, 2), np.float32))
    done = subprocess.run([sys.executable, "-m", "geomcli", "crop-pad", str(tmp_path / "*.npy"), "--out-dir",
                           str(tmp_path / "out"), "--shape", "1,1", "-j", "2", "-q"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == len(NPY_SHAPES) and all("malformed header" in line for line in errors), done.stderr
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["good.npy"]


# ---- 4. a 16-bit PNG's colour key --------------------------------------------------------------------


@pytest.mark.parametrize(("colour_type", "key"), [(0, 4660), (2, (1, 2, 770))], ids=["grey", "rgb"])
def test_a_16_bit_colour_key_that_is_not_kept_is_noted(tmp_path: Path, colour_type: int, key: object) -> None:
    channels = 1 if colour_type == 0 else 3
    rows = b"".join(b"\0" + bytes(range(2 * channels * 3)) for _ in range(2))
    trns = struct.pack(">H", key) if colour_type == 0 else struct.pack(">3H", *key)  # type: ignore[arg-type]
    source = tmp_path / "keyed.png"
    source.write_bytes(png(3, 2, 16, colour_type, rows, chunk(b"tRNS", trns)))
    loaded = io.read_array(str(source))
    assert loaded.data.dtype == np.uint16
    assert loaded.notes == (f"its transparent colour {key} is not kept (no alpha channel is made)",)


# ---- 5. raw-bytes .npy (np.save of ml_dtypes' types) -------------------------------------------------


def test_a_bfloat16_array_saved_by_numpy_gets_a_message_that_says_what_to_do(tmp_path: Path) -> None:
    source = tmp_path / "bf16.npy"
    np.save(source, np.arange(4).astype(ml_dtypes.bfloat16))  # written as raw bytes: descr '<V2'
    result = run("info", source)
    assert result.exit_code == 1
    reason = one_error(result.stderr, source)
    assert reason == ("dtype |V2 is raw bytes of no type geomcli can tell (np.save writes ml_dtypes' bfloat16 "
                      "so, dropping the type's name); save a.astype(np.float32), which holds each value exactly, "
                      "or a.view(np.uint16), the same bits")
    converted = tmp_path / "f32.npy"
    np.save(converted, np.arange(4).astype(ml_dtypes.bfloat16).astype(np.float32))
    assert run("info", converted).exit_code == 0


def test_a_float8_e5m2_array_saved_by_numpy_gets_a_message_that_says_what_to_do(tmp_path: Path) -> None:
    # its kind is f, so np.save writes descr '<f1', which no reader parses: it was a "malformed header"
    source = tmp_path / "f8.npy"
    np.save(source, np.arange(4).astype(ml_dtypes.float8_e5m2))
    result = run("info", source)
    assert result.exit_code == 1
    assert one_error(result.stderr, source) == (
        "dtype <f1 names no type (np.save writes ml_dtypes' float8_e5m2 so, which no reader takes back); "
        "save a.astype(np.float32), which holds each value exactly, or a.view(np.uint8), the same bits")


def test_a_jpeg_file_is_checked_without_reading_past_its_end_marker(tmp_path: Path) -> None:
    """The frame check maps the file: a JPEG with a gigabyte after its end (a sparse file here)
    costs what a plain one does."""
    source = tmp_path / "long.jpg"
    Image.new("L", (16, 16), 7).save(source)
    with open(source, "r+b") as f:
        f.truncate(1 << 30)
    code, stderr, peak = peak_run(f"{GEOMCLI} crop-pad {source} -o {tmp_path / 'o.png'} --shape 8,8 -q")
    assert (code, stderr) == (0, "")
    assert peak < 200, f"{peak:.0f} MiB"


# ---- 6. a JPEG cut in its scans, an EOI appended: libjpeg fills the rest with grey and only warns ----


def cut_with_eoi(whole: bytes, fraction: float) -> bytes:
    """``whole`` cut ``fraction`` of the way through its scans (first SOS to EOI), an EOI appended."""
    first_scan, end = whole.index(b"\xff\xda"), whole.rindex(b"\xff\xd9")
    return whole[: first_scan + int((end - first_scan) * fraction)] + b"\xff\xd9"


def picture_jpeg(mode: str, **save: object) -> bytes:
    values = np.random.default_rng(42).integers(0, 256, (61, 83, 4), dtype=np.uint8)
    im = Image.fromarray(values, "CMYK") if mode == "CMYK" else Image.fromarray(values[..., :3]).convert(mode)
    buffer = bytes_io.BytesIO()
    im.save(buffer, format="JPEG", **save)
    return buffer.getvalue()


GOOD_JPEGS: dict[str, tuple[str, dict[str, object]]] = {
    f"{mode}-{kind}": (mode, save) for mode in ("L", "RGB", "CMYK") for kind, save in (
        ("baseline", {}), ("progressive", {"progressive": True}), ("restarts", {"restart_marker_blocks": 2}),
        ("420", {"subsampling": 2}), ("optimized", {"optimize": True}), ("scan-header-zeros", {}))}


def good_jpeg(case: str) -> bytes:
    mode, save = GOOD_JPEGS[case]
    whole = picture_jpeg(mode, **save)
    if case.endswith("scan-header-zeros"):
        return zero_scan_header(whole)
    return whole


def zero_scan_header(whole: bytes) -> bytes:
    """A baseline JPEG whose SOS says Ss, Se, Ah and Al are all 0, as some encoders write (T.81
    wants Se 63): libjpeg warns and decodes it as it would with 63, and so does Pillow."""
    data = bytearray(whole)
    sos = data.index(b"\xff\xda")
    spectral = sos + 5 + 2 * data[sos + 4]
    data[spectral : spectral + 3] = bytes(3)
    return bytes(data)


@pytest.mark.parametrize("case", [case for case in GOOD_JPEGS if "progressive" not in case])
@pytest.mark.parametrize("fraction", [0.3, 0.9])
def test_a_sequential_jpeg_cut_mid_scan_with_an_eoi_appended_is_refused(tmp_path: Path, case: str,
                                                                        fraction: float) -> None:
    """It was read, grey from the cut on (exit 0); then "truncated", though the file ends with its EOI."""
    source = tmp_path / "cut.jpg"
    source.write_bytes(cut_with_eoi(good_jpeg(case), fraction))
    frame = "83x61"
    result = run("crop-pad", source, "-o", tmp_path / "out.png", "--shape", "8,8")
    assert result.exit_code == 1
    damaged = f"not a readable JPEG (damaged: its image data runs out before the whole {frame} frame is decoded)"
    assert one_error(result.stderr, source) == damaged
    assert not (tmp_path / "out.png").exists()
    result = run("crop-pad", "-", "-o", tmp_path / "out.png", "--shape", "8,8", stdin=source.read_bytes())
    assert one_error(result.stderr, "<stdin>") == damaged


@pytest.mark.parametrize("case", ["RGB-baseline", "L-optimized", "RGB-420", "RGB-progressive"])
def test_a_jpeg_missing_bytes_in_its_middle_is_damaged_and_one_cut_short_truncated(tmp_path: Path,
                                                                                   case: str) -> None:
    """1000 bytes (of about 3500) taken out of the middle of the scans said "not a readable JPEG
    (truncated)": the file is not cut short (its EOI is there) but damaged inside. A file that does
    end early keeps "truncated". (A smaller gap can decode whole, as wrong blocks: libjpeg takes any
    bits as codes and Pillow does not pass its warnings on.)"""
    whole = good_jpeg(case)
    first_scan, end = whole.index(b"\xff\xda"), whole.rindex(b"\xff\xd9")
    middle = (first_scan + end) // 2
    damaged, cut = tmp_path / "damaged.jpg", tmp_path / "cut.jpg"
    damaged.write_bytes(whole[:middle] + whole[middle + 1000:])
    cut.write_bytes(whole[:middle])
    said = one_error(run("info", damaged).stderr, damaged)
    assert said.startswith("not a readable JPEG (damaged: its ") and "83x61 frame" in said, said
    # "(truncated)" (Pillow's), or "(truncated: its scans stop ...)" for a progressive file
    assert one_error(run("info", cut).stderr, cut).startswith("not a readable JPEG (truncated")
    piped = run("info", "-", stdin=damaged.read_bytes())
    assert one_error(piped.stderr, "<stdin>") == said


@pytest.mark.parametrize("case", ["L-restarts", "RGB-restarts", "CMYK-restarts"])
def test_a_jpeg_missing_bytes_across_a_restart_marker_is_damaged_there(tmp_path: Path, case: str) -> None:
    """A third of the scan taken out of its middle was read (exit 0), the blocks after the gap
    wrong: libjpeg decodes on from the next restart marker and only warns. Its markers RST0-7 are
    then out of order, which says where. (A gap within one restart interval is still read.)"""
    whole = good_jpeg(case)
    first_scan, end = whole.index(b"\xff\xda"), whole.rindex(b"\xff\xd9")
    gap = (end - first_scan) // 3
    middle = (first_scan + end) // 2 - gap // 2
    source = tmp_path / "damaged.jpg"
    source.write_bytes(whole[:middle] + whole[middle + gap:])
    said = one_error(run("info", source).stderr, source)
    found = re.fullmatch(r"not a readable JPEG \(damaged before byte (\d+): its restart marker RST(\d) stands "
                         r"where RST(\d) belongs\)", said)
    assert found is not None, said
    assert middle <= int(found[1]) < end - gap and found[2] != found[3]


def with_fill_bytes(whole: bytes, fill: bytes = b"\xff" * 3) -> bytes:
    """``whole`` with fill bytes (T.81 B.1.1.2: any number of FF may come before a marker) after its
    SOI, before its first SOS and each marker after it but RSTn (its scans' data stuffs each FF
    data byte with a 00, so an FF followed by another byte is a marker), and before its EOI."""
    first_scan = whole.index(b"\xff\xda")
    markers = [found.start() for found in re.finditer(rb"\xff[^\x00\xd0-\xd7]", whole[first_scan:])]
    cuts = [2, *(first_scan + at for at in markers)]
    pieces = [whole[start:end] for start, end in zip([0, *cuts], [*cuts, len(whole)], strict=True)]
    return fill.join(pieces)


@pytest.mark.parametrize("case", ["L-baseline", "RGB-progressive", "CMYK-progressive", "RGB-restarts", "RGB-420"])
def test_a_jpeg_with_fill_bytes_before_its_markers_is_walked_as_without(tmp_path: Path, case: str) -> None:
    """The segment walk (check_data's, end_of_image's) steps over fill bytes as libjpeg does: the
    file reads as it does without them, and its end is its EOI's, as a pipe's second input is looked
    for. A sequential file's scan data ends at its EOI's marker, fill bytes in it."""
    from geomcli.io import _jpeg_check

    whole = good_jpeg(case)
    padded = with_fill_bytes(whole)
    assert len(padded) >= len(whole) + 9 and padded.endswith(b"\xff\xff\xff\xff\xd9")
    for data in (whole, padded):
        assert _jpeg_check.end_of_image(data + b"after") == len(data)
        assert _jpeg_check.check_data(data, "x") == (None if "progressive" in case else len(data) - 2)
    (tmp_path / "whole.jpg").write_bytes(whole)
    (tmp_path / "padded.jpg").write_bytes(padded)
    read = [io.read_array(str(tmp_path / name)).data for name in ("whole.jpg", "padded.jpg")]
    assert np.array_equal(*read)


@pytest.mark.parametrize("case", ["L-baseline", "RGB-progressive", "RGB-restarts"])
@pytest.mark.parametrize("fill", [b"", b"\xff" * 3], ids=["plain", "fill-bytes"])
def test_a_jpeg_cut_anywhere_has_no_end_of_image(case: str, fill: bytes) -> None:
    """Cut in its SOI's marker, its headers (inside a length too), its scans or its EOI, a JPEG has
    no end: a pipe's bytes after it are not looked at for a second input."""
    from geomcli.io import _jpeg_check

    whole = with_fill_bytes(good_jpeg(case), fill) if fill else good_jpeg(case)
    first_scan = whole.index(b"\xff\xda")
    for cut in (1, 3, 5, first_scan + 1, first_scan + 3, (first_scan + len(whole)) // 2, len(whole) - 3,
                len(whole) - 1):
        assert _jpeg_check.end_of_image(whole[:cut]) is None, cut


# (case, bytes cut from the end of its scan data): cuts in its last 2% that the 8 bytes of 1 bits
# once given after the data completed (its last blocks read as flat), and the 7 now given do not
NEAR_THE_END = [("L-baseline", 47), ("L-baseline", 40), ("L-baseline", 33), ("RGB-baseline", 25),
                ("RGB-baseline", 18), ("RGB-restarts", 25), ("L-optimized", 51), ("L-optimized", 44)]


@pytest.mark.parametrize(("case", "missing"), NEAR_THE_END)
def test_a_sequential_jpeg_cut_near_the_end_of_its_scan_with_an_eoi_appended_is_refused(
        tmp_path: Path, case: str, missing: int) -> None:
    whole = good_jpeg(case)
    end = whole.rindex(b"\xff\xd9")
    source = tmp_path / "cut.jpg"
    source.write_bytes(whole[: end - missing] + b"\xff\xd9")
    with pytest.raises(GeomError, match=r"^.*cut.jpg: not a readable JPEG \(damaged: its image data runs out"):
        io.read_array(str(source))


@pytest.mark.parametrize("case", ["L-baseline", "RGB-baseline", "RGB-restarts", "L-optimized"])
def test_a_sequential_jpeg_cut_in_the_last_2_percent_of_its_scan_loses_at_most_its_last_mcu(
        tmp_path: Path, case: str) -> None:
    """What is not detected (see _SCAN_RUNOUT): a cut inside the last blocks, which the bad codes
    libjpeg reads from the bytes after the data complete as flat blocks. Every other cut in the
    last 2% of the data is refused."""
    whole = good_jpeg(case)
    with Image.open(bytes_io.BytesIO(whole)) as im:
        expected = np.asarray(im).astype(int)
    first_scan, end = whole.index(b"\xff\xda"), whole.rindex(b"\xff\xd9")
    source = tmp_path / "cut.jpg"
    refused = 0
    cuts = range(first_scan + int((end - first_scan) * 0.98), end)
    for cut in cuts:
        source.write_bytes(whole[:cut] + b"\xff\xd9")
        try:
            got = io.read_array(str(source)).data.astype(int)
        except GeomError:
            refused += 1
            continue
        wrong = np.argwhere(np.abs(got - expected).reshape(*got.shape[:2], -1).max(axis=2) > 0)
        # grey: its last two 8x8 blocks; 4:2:0 colour: its last 16x16 MCU (six blocks, the
        # last two its Cb and Cr) and the pixel beside, which upsampling blends its chroma into
        mcu, wide, blend = (8, 16, 0) if case.startswith("L") else (16, 16, 1)
        height, width = expected.shape[:2]
        corner = ((height - 1) // mcu * mcu - blend, (width - 1) // mcu * mcu + mcu - wide - blend)
        assert len(wrong) == 0 or (wrong.min(axis=0) >= corner).all(), end - cut
    assert refused >= len(cuts) // 2, (refused, len(cuts))


@pytest.mark.parametrize("mode", ["L", "RGB", "CMYK"])
def test_a_progressive_jpeg_cut_before_its_last_scan_with_an_eoi_appended_is_refused(tmp_path: Path,
                                                                                     mode: str) -> None:
    source = tmp_path / "cut.jpg"
    source.write_bytes(cut_with_eoi(picture_jpeg(mode, progressive=True), 0.2))
    result = run("crop-pad", source, "-o", tmp_path / "out.png", "--shape", "8,8")
    assert result.exit_code == 1
    assert one_error(result.stderr, source) == ("not a readable JPEG (damaged: its scans stop before the "
                                                "whole 83x61 frame is coded)")


@pytest.mark.parametrize("case", GOOD_JPEGS)
def test_whole_jpegs_read_as_pillow_decodes_them(tmp_path: Path, case: str) -> None:
    """From a file and from stdin."""
    whole = good_jpeg(case)
    with Image.open(bytes_io.BytesIO(whole)) as im:
        expected = np.asarray(im.convert("RGB") if im.mode == "CMYK" else im)
    source = tmp_path / "whole.jpg"
    source.write_bytes(whole)
    np.testing.assert_array_equal(io.read_array(str(source)).data, expected)
    np.testing.assert_array_equal(_read_stdin(bytes_io.BytesIO(whole)).data, expected)


def test_an_mpo_reads_its_first_image(tmp_path: Path) -> None:
    source = tmp_path / "pair.mpo.jpg"
    first, second = Image.new("RGB", (40, 24), (200, 10, 10)), Image.new("RGB", (40, 24), (10, 10, 200))
    first.save(source, format="MPO", save_all=True, append_images=[second])
    loaded = io.read_array(str(source))
    assert loaded.pages == 2
    assert abs(loaded.data[..., 0].mean() - 200) < 2


def arithmetic_jpeg(height: int, width: int, data: bytes) -> bytes:
    """A grey SOF9 (arithmetic-coded) JPEG of ``data`` as its one scan: the arithmetic decoder
    takes any bytes (zeros too), and stuffs zeros where they end, without a warning."""
    def segment(marker: int, body: bytes) -> bytes:
        return struct.pack(">BBH", 0xFF, marker, len(body) + 2) + body

    return (b"\xff\xd8" + segment(0xDB, bytes(65)) + segment(0xC9, struct.pack(">BHHB3B", 8, height, width, 1, 1,
                                                                              0x11, 0))
            + segment(0xDA, bytes([1, 1, 0, 0, 63, 0])) + data + b"\xff\xd9")


def test_an_arithmetic_coded_jpeg_declaring_a_big_frame_is_refused_in_little_memory(tmp_path: Path) -> None:
    """196 bytes decoded as a 20000x20000 picture: 1.2 GB and 1.1 s; --max-pixels allowed 46000x46000."""
    source = tmp_path / "arith.jpg"
    source.write_bytes(arithmetic_jpeg(20000, 20000, bytes(100)))
    code, stderr, peak = peak_run(f"{GEOMCLI} crop-pad {source} -o {tmp_path / 'o.npy'} --shape 8,8")
    assert code == 1
    assert one_error(stderr, source) == ("arithmetic-coded JPEG with 100 bytes of image data for 20000x20000, fewer "
                                         "than geomcli reads for a frame over 16777216 pixels (1562500): "
                                         "arithmetic coding bounds no frame by its data")
    assert peak < SMALL_RUN_MIB, peak
    assert not (tmp_path / "o.npy").exists()


@pytest.mark.parametrize(("height", "width", "data"), [(64, 64, 15), (64, 64, 0), (4096, 4096, 10)])
def test_a_flat_arithmetic_coded_jpeg_up_to_16_mpx_is_read(tmp_path: Path, height: int, width: int,
                                                           data: int) -> None:
    """A blank page or a diagram codes to a few bytes: only a frame over 16 Mpx (1 << 24 pixels)
    is held to Huffman coding's least bits per block (it was refused at 64x64 from 15 bytes)."""
    source = tmp_path / "arith.jpg"
    source.write_bytes(arithmetic_jpeg(height, width, bytes(data)))
    loaded = io.read_array(str(source))
    assert loaded.data.shape == (height, width)
    assert len(np.unique(loaded.data)) == 1


def test_an_arithmetic_coded_jpeg_just_over_16_mpx_needs_huffman_codings_least_data(tmp_path: Path) -> None:
    source = tmp_path / "arith.jpg"
    blocks = 4104 * 4096 // 64
    source.write_bytes(arithmetic_jpeg(4104, 4096, bytes(blocks // 4 - 1)))  # 2 bits a block
    with pytest.raises(GeomError, match=r"arithmetic-coded JPEG with 65663 bytes of image data for 4096x4104"):
        io.read_array(str(source))
    source.write_bytes(arithmetic_jpeg(4104, 4096, bytes(blocks // 4)))
    assert io.read_array(str(source)).data.shape == (4104, 4096)


def progressive_scans_jpeg(components: int, scans: int) -> bytes:
    """An 8x8 progressive JPEG of ``components`` components, with a DC scan of the first and then
    ``scans`` tiny scans of the first four, each holding no data: one short of complete."""
    def segment(marker: int, body: bytes) -> bytes:
        return struct.pack(">BBH", 0xFF, marker, len(body) + 2) + body

    frame = struct.pack(">BHHB", 8, 8, 8, components) + b"".join(bytes([i, 0x11, 0]) for i in range(components))
    tiny = segment(0xDA, bytes([4, 1, 0, 2, 0, 3, 0, 4, 0, 0, 63, 0]))
    return (b"\xff\xd8" + segment(0xC2, frame) + segment(0xDA, bytes([1, 0, 0, 0, 63, 0])) + bytes(200)
            + tiny * scans + b"\xff\xd9")


def test_a_jpeg_of_many_tiny_scans_is_checked_in_little_memory(tmp_path: Path) -> None:
    """Every scan was kept, and each component's coefficients looked up in each: 300000 scans
    (4.8 MB) held 34 MiB; the 1000000 of a 16 MB file 112 MiB and 31 s (now 2 s). 30000 scans
    (3.4 MiB held before) show it, in a tenth of the time under tracemalloc."""
    import tracemalloc

    from geomcli.io import _jpeg_check

    data = progressive_scans_jpeg(10, 30_000)
    tracemalloc.start()
    try:
        with pytest.raises(GeomError, match=r"^x: not a readable JPEG \(damaged: its scans stop before the whole"):
            _jpeg_check.check_data(data, "x")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


def test_a_jpeg_frame_of_more_than_10_components_is_refused_before_its_scans_are_read(tmp_path: Path) -> None:
    source = tmp_path / "many.jpg"
    source.write_bytes(progressive_scans_jpeg(11, 1))
    result = run("info", source)
    assert result.exit_code == 1
    assert one_error(result.stderr, source) == ("not a readable JPEG (its frame has 11 components; libjpeg reads at "
                                                "most 10)")


@pytest.mark.parametrize(("fmt", "save"), [("bmp", {}), ("gif", {}), ("webp", {}), ("webp", {"lossless": True}),
                                           ("webp", {"exif": b"Exif\x00\x00II*\x00\x08\x00\x00\x00\x00\x00"})],
                         ids=["bmp", "gif", "webp-lossy", "webp-lossless", "webp-extended"])
def test_a_piped_image_declaring_more_than_the_limit_is_refused_before_its_data_is_read(
        fmt: str, save: dict[str, object]) -> None:
    """A WebP was read to its end, then refused by its decoded frame (VP8, VP8L and VP8X headers)."""
    buffer = bytes_io.BytesIO()
    Image.new("L", (2000, 1000)).save(buffer, format=fmt.upper(), **save)
    stdin = bytes_io.BytesIO(buffer.getvalue() + bytes(4 << 20))
    with pytest.raises(GeomError, match=r"^<stdin>: 2000000 elements exceed the limit of 1000000; raise it"):
        _read_stdin(stdin, max_pixels=1_000_000)
    assert stdin.tell() < 1 << 20  # refused from its header: the junk after it is never read


def test_a_piped_gifs_sub_blocks_are_walked_a_window_at_a_time() -> None:
    """One peek per sub-block took 0.43 us a byte of 1-byte sub-blocks (0.85 s for 2 MB)."""
    from geomcli.io import _stream

    screen = b"GIF89a" + struct.pack("<HHBBB", 8, 8, 0, 0, 0)
    data = screen + b"," + bytes(8) + b"\x00" + b"\x02" + b"\x01\x00" * 200_000 + b"\x00;"
    peeks = []

    def peek(start: int, size: int) -> bytes:
        peeks.append(start)
        return data[start : start + size]

    assert _stream.image_size("gif", peek, "x", 1 << 20) == len(data)
    assert len(peeks) < 20, len(peeks)


def test_a_npy_cut_inside_its_header_is_said_once(tmp_path: Path) -> None:
    """The header reader's own line was wrapped in the same words again."""
    whole = tmp_path / "ok.npy"
    np.save(whole, np.zeros((4, 4), np.float32))
    cut = tmp_path / "cut.npy"
    cut.write_bytes(whole.read_bytes()[:100])
    result = run("info", cut)
    assert result.exit_code == 1
    assert result.stderr.count("not a readable NPY") == 1 and "malformed header: EOF" in result.stderr, result.stderr


@pytest.mark.parametrize(("fmt", "cut", "reason"), [
    ("png", 8, "not a readable PNG (its header is broken or cut short)"),  # the signature alone
    ("png", 40, "not a readable PNG (its header is broken or cut short)"),  # inside the first IDAT's header
    ("gif", 20, "not a readable GIF (its header is broken or cut short)"),
])
def test_a_file_cut_short_after_its_signature_is_not_called_unrecognised(tmp_path: Path, fmt: str, cut: int,
                                                                          reason: str) -> None:
    """Its signature names the format: the reader gave up on what follows (it read "unrecognised
    content", as random bytes do)."""
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(tmp_path / f"f.{fmt}")
    (tmp_path / f"cut.{fmt}").write_bytes((tmp_path / f"f.{fmt}").read_bytes()[:cut])
    result = run("info", tmp_path / f"cut.{fmt}")
    assert result.exit_code == 1
    assert one_error(result.stderr, tmp_path / f"cut.{fmt}") == reason


@pytest.mark.parametrize("save", [{}, {"lossless": True}, {"exif": b"Exif\x00\x00II*\x00\x08\x00\x00\x00\x00\x00"}],
                         ids=["lossy", "lossless", "extended"])
def test_a_webp_cut_short_is_called_truncated(tmp_path: Path, save: dict[str, object]) -> None:
    """A WebP cut short (an interrupted copy) read 'not a readable WEBP (could not create decoder
    object)', libwebp's words, which say nothing of what is wrong with the file."""
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(
        tmp_path / "f.webp", **save)
    whole = (tmp_path / "f.webp").read_bytes()
    cut = tmp_path / "cut.webp"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    for args in (["info", cut], ["crop-pad", cut, "-o", tmp_path / "o.png", "--shape", "4,4"]):
        result = run(*args)
        assert result.exit_code == 1
        assert one_error(result.stderr, cut) == (f"not a readable WEBP (truncated: its RIFF header declares "
                                                 f"{len(whole)} bytes, the file holds {len(whole) * 2 // 3})")
    assert not (tmp_path / "o.png").exists()


def flat_webp(width: int, height: int) -> bytes:
    """A lossless WebP of one colour declaring ``width`` x ``height``: a 16x16 one's VP8L header
    changed (each pixel takes no bits, so its few bytes code any size)."""
    buffer = bytes_io.BytesIO()
    Image.new("RGB", (16, 16), (200, 100, 50)).save(buffer, "WEBP", lossless=True)
    data = bytearray(buffer.getvalue())
    at = data.index(b"VP8L") + 9  # after the chunk's header and its signature byte 0x2f
    bits = int.from_bytes(data[at:at + 4], "little") & ~((1 << 28) - 1)
    data[at:at + 4] = (bits | (width - 1) | (height - 1) << 14).to_bytes(4, "little")
    return bytes(data)


def test_a_big_still_webp_is_read_in_the_memory_its_array_and_image_take(tmp_path: Path) -> None:
    """Pillow decodes a WebP through libwebp's animation decoder: two RGBA canvases, the RGBA bytes
    it hands on and Pillow's image, beside the array. 38 bytes declaring 16383x16383 RGB (805 M
    elements, within the default --max-pixels) took 4.2 GB; here 6000x6000 took 570 MiB for an
    array of 103 MiB. Now: the array, Pillow's image of it (137 MiB), the interpreter."""
    source = tmp_path / "flat.webp"
    source.write_bytes(flat_webp(6000, 6000))
    code, stderr, peak = peak_run(f"{GEOMCLI} crop-pad {source} -o {tmp_path / 'out.png'} --shape 8,8")
    assert code == 0, stderr
    assert peak < 320, peak
    assert np.array_equal(np.asarray(Image.open(tmp_path / "out.png")), np.full((8, 8, 3), (200, 100, 50)))


# ---- GIF frames that reach past the first frame's canvas ------------------------------------------


def gif_blocks(data: bytes) -> list[tuple[bytes, int, int]]:
    """Each block of a GIF (its introducer, start and end), its sub-blocks included."""
    at = 13 + (3 << ((data[10] & 7) + 1) if data[10] & 0x80 else 0)
    blocks = []
    while data[at : at + 1] != b";":
        start, kind = at, data[at : at + 1]
        if kind == b"!":
            at += 2
        else:
            at += 10 + (3 << ((data[at + 9] & 7) + 1) if data[at + 9] & 0x80 else 0) + 1
        while data[at]:
            at += 1 + data[at]
        at += 1
        blocks.append((kind, start, at))
    return blocks


def gif_with_last_frame(last: bytes) -> bytes:
    """An 8x6 GIF of 3 frames by Pillow, its last image block (descriptor to data) replaced."""
    buffer = bytes_io.BytesIO()
    frames = [Image.new("RGB", (8, 6), (60 * i, 0, 0)) for i in range(3)]
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=100)
    data = buffer.getvalue()
    _, start, end = [block for block in gif_blocks(data) if block[0] == b","][-1]
    return data[:start] + last + data[end:]


def gif_image_block(width: int, height: int, declared: tuple[int, int] | None = None) -> bytes:
    """A GIF frame of ``width`` x ``height`` with its own colour table, as an image block; its
    descriptor patched to ``declared`` (width, height)."""
    buffer = bytes_io.BytesIO()
    Image.new("RGB", (width, height), (0, 90, 0)).save(buffer, format="GIF")
    data = buffer.getvalue()
    table = data[13 : 13 + (3 << ((data[10] & 7) + 1))]
    _, start, end = [block for block in gif_blocks(data) if block[0] == b","][0]
    descriptor = bytearray(data[start : start + 10])
    descriptor[9] = 0x80 | (data[10] & 7)
    if declared is not None:
        struct.pack_into("<HH", descriptor, 5, *declared)
    return bytes(descriptor) + table + data[start + 10 : end]


def test_a_gif_frame_larger_than_the_first_is_one_error_line(tmp_path: Path) -> None:
    """Pillow grows its canvas for such a frame, and the frames' arrays did not stack: numpy's
    'all input arrays must have the same shape', with a traceback."""
    source = tmp_path / "grows.gif"
    source.write_bytes(gif_with_last_frame(gif_image_block(10, 7)))
    result = run("crop-pad", source, "-o", tmp_path / "out.npy", "--shape", "4,4", "--frames", "all")
    assert result.exit_code == 1
    assert one_error(result.stderr, source) == ("--frames all: frame 3 reaches to 10x7, past the 8x6 canvas of the "
                                                "first frame (--frames first reads that one)")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["grows.gif"]
    assert run("crop-pad", source, "-o", tmp_path / "first.npy", "--shape", "4,4", "--frames", "first").exit_code == 0


@pytest.mark.parametrize("junk", [b"", b"\xff" * 9], ids=["frame", "frame-after-junk"])
def test_a_tiny_gif_declaring_a_huge_later_frame_is_refused_in_little_memory(tmp_path: Path, junk: bytes) -> None:
    """A 5 KB GIF whose third frame declared 48904x46128 (behind bytes that start no block, which
    Pillow passes over) took 21 GB and 10 s for `geomcli info`, then 'codec configuration error'."""
    source = tmp_path / "liar.gif"
    source.write_bytes(gif_with_last_frame(junk + gif_image_block(8, 6, declared=(48904, 46128))))
    code, stderr, peak = peak_run(f"ulimit -v 3000000; {GEOMCLI} info {source}")
    assert code == 1
    assert one_error(stderr, source) == ("--frames all: frame 3 reaches to 48904x46128, past the 8x6 canvas of the "
                                         "first frame (--frames first reads that one)")
    assert peak < SMALL_RUN_MIB, peak


def test_a_16_bit_png_of_two_ihdr_chunks_is_one_error_line(tmp_path: Path) -> None:
    """libpng's error reached imagecodecs as junk bytes: a UnicodeDecodeError and its traceback."""
    ihdr = struct.pack(">IIBBBBB", 2, 2, 16, 0, 0, 0, 0)
    source = tmp_path / "twice.png"
    source.write_bytes(png(2, 2, 16, 0, b"\x00" + bytes(4) + b"\x00" + bytes(4), chunk(b"IHDR", ihdr)))
    result = run("crop-pad", source, "-o", tmp_path / "out.png", "--shape", "1,1")
    assert result.exit_code == 1
    assert one_error(result.stderr, source) == "not a readable PNG (its IHDR chunk appears twice)"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["twice.png"]


def _encoded(fmt: str, data: np.ndarray) -> bytes:
    """``data`` as a file of ``fmt`` (a TIFF of several pages for a 4-D array), its bytes."""
    buffer = bytes_io.BytesIO()
    if fmt == "npy":
        np.save(buffer, data)
    elif fmt == "tiff":
        import tifffile

        tifffile.imwrite(buffer, data)
    else:
        Image.fromarray(data).save(buffer, format=fmt)
    return buffer.getvalue()


# tifffile leaves a page's tag values unreferenced after the last IFD of a stack (22 bytes here)
@pytest.mark.parametrize("fmt", ["png", "jpeg", "tiff", "tiff-stack", "npy", "bmp", "gif", "webp"])
def test_a_second_input_after_the_first_in_a_pipe_is_refused_other_bytes_are_left(fmt: str,
                                                                                   rng: np.random.Generator) -> None:
    """cat a.png b.png | geomcli ... - read a alone, exit 0, and b was dropped without a word."""
    shape = (2, 12, 10, 3) if fmt == "tiff-stack" else (12, 10, 3)
    fmt = fmt.removesuffix("-stack")
    first, second = (_encoded(fmt, rng.integers(0, 256, shape, dtype=np.uint8)) for _ in range(2))
    alone = _read_stdin(bytes_io.BytesIO(first)).data
    for after in (second, _encoded("png", np.zeros((4, 4), np.uint8))):
        found = io.sniff_format(after)
        assert found is not None
        with pytest.raises(GeomError, match=rf"^<stdin>: another input \({found.upper()}\) starts at byte "
                                            rf"{len(first)}, after the {fmt.upper()}; a pipe holds one input: give "
                                            r"each its own file or pipe$"):
            _read_stdin(bytes_io.BytesIO(first + after))
    # bytes that start no input (a phone's video after its JPEG, padding) are left, as in a file
    for junk in (b"\0" * 100, b"hello\n", b"B", b"BMW photo, 2026\n"):  # 'BM', a BMP's first bytes, starts text too
        np.testing.assert_array_equal(_read_stdin(bytes_io.BytesIO(first + junk)).data, alone)


def test_the_pictures_of_a_multi_picture_jpeg_in_a_pipe_are_its_own(rng: np.random.Generator) -> None:
    """An MPO's later JPEGs follow its first; its APP2 'MPF' index says they are its own."""
    pictures = [Image.fromarray(rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)) for _ in range(2)]
    buffer = bytes_io.BytesIO()
    pictures[0].save(buffer, format="MPO", save_all=True, append_images=pictures[1:])
    assert buffer.getvalue().count(b"\xff\xd8\xff") == 2
    assert _read_stdin(bytes_io.BytesIO(buffer.getvalue())).data.shape == (12, 10, 3)


@pytest.mark.parametrize("fmt", ["png", "jpeg", "tiff"])
@pytest.mark.parametrize("pictures", [2, 3])
def test_an_input_after_a_multi_picture_jpeg_in_a_pipe_is_another(fmt: str, pictures: int,
                                                                  rng: np.random.Generator) -> None:
    """'cat mpo.mpo b.png | geomcli info -' read the MPO and dropped b without a word (the check
    looked for nothing after an MPO's first picture). Its MP index says where its last picture
    ends: an input starting there is another; junk there is left unread, as after a JPEG."""
    images = [Image.fromarray(rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)) for _ in range(pictures)]
    buffer = bytes_io.BytesIO()
    images[0].save(buffer, format="MPO", save_all=True, append_images=images[1:])
    mpo = buffer.getvalue()
    alone = _read_stdin(bytes_io.BytesIO(mpo)).data
    for junk in (b"\0" * 100, b"hello\n"):
        np.testing.assert_array_equal(_read_stdin(bytes_io.BytesIO(mpo + junk)).data, alone)
    after = _encoded(fmt, rng.integers(0, 256, (6, 4, 3), dtype=np.uint8))
    with pytest.raises(GeomError, match=rf"^<stdin>: another input \({fmt.upper()}\) starts at byte {len(mpo)}, "
                                        "after the JPEG"):
        _read_stdin(bytes_io.BytesIO(mpo + after))


def test_two_pictures_catted_into_a_command_fail_it_and_write_nothing(tmp_path: Path,
                                                                       rng: np.random.Generator) -> None:
    for name in ("a.png", "b.png"):
        Image.fromarray(rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)).save(tmp_path / name)
    done = subprocess.run(["bash", "-c", f"cat a.png b.png | {GEOMCLI} crop-pad - -o out.png --shape 8,8"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    size = (tmp_path / "a.png").stat().st_size
    assert one_error(done.stderr, "<stdin>") == (f"another input (PNG) starts at byte {size}, after the PNG; a pipe "
                                                 "holds one input: give each its own file or pipe")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.png", "b.png"]


@pytest.mark.parametrize("fmt", ["png", "npy"])
def test_a_pipe_its_writer_keeps_open_after_one_input_is_not_waited_on(tmp_path: Path, fmt: str,
                                                                       rng: np.random.Generator) -> None:
    """A parent that writes one PNG or .npy to our stdin and waits for us to exit before it closes
    the pipe (Popen.stdin.write, then wait) hung, where the input's own read stops at its end."""
    first = _encoded(fmt, rng.integers(0, 256, (12, 10), dtype=np.uint8))
    output = tmp_path / f"out.{fmt}"
    child = subprocess.Popen([*shlex.split(GEOMCLI), "crop-pad", "-", "-o", str(output), "--shape", "8,8"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdin is not None
    child.stdin.write(first)
    child.stdin.flush()
    try:
        assert child.wait(timeout=30) == 0
    finally:
        child.kill()
        _, stderr = child.communicate()
    assert b"Error" not in stderr
    assert io.read_array(str(output)).data.shape == (8, 8)


def _tiff_with_exif_after_its_pixels(data: np.ndarray, maker_note: bytes) -> bytes:
    """A TIFF whose Exif IFD, written after its pixels as cameras write it, holds ``maker_note``."""
    import tifffile

    buffer = bytes_io.BytesIO()
    # tifffile writes no Exif IFD pointer: a stand-in tag of one LONG (the last: 65000), renamed below
    tifffile.imwrite(buffer, data, extratags=[(65000, "I", 1, 0, False)], metadata=None)
    tiff = bytearray(buffer.getvalue())
    tiff += b"\0" * (len(tiff) & 1)
    at = len(tiff)
    entry = tiff.index(struct.pack("<HHI", 65000, 4, 1))
    tiff[entry : entry + 12] = struct.pack("<HHII", 34665, 4, 1, at)
    # one entry, MakerNote (UNDEFINED), its value right after the IFD
    tiff += struct.pack("<HHHII", 1, 0x927C, 7, len(maker_note), at + 18) + struct.pack("<I", 0) + maker_note
    return bytes(tiff)


def test_a_tiff_whose_exif_maker_note_holds_a_tiff_header_is_one_input(tmp_path: Path,
                                                                      rng: np.random.Generator) -> None:
    """A Nikon maker note starts with a TIFF header of its own ('Nikon\\0\\2\\x10\\0\\0II*\\0'): in an Exif IFD
    after the pixels, past what the check counted (it took the Exif IFD for 4 bytes), a piped
    TIFF was refused as 'another input (TIFF) starts at byte ...' that a file of it was not."""
    data = rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)
    tiff = _tiff_with_exif_after_its_pixels(data, b"Nikon\0\x02\x10\0\0II*\0\x08\0\0\0" + bytes(40))
    (tmp_path / "nikon.tif").write_bytes(tiff)
    np.testing.assert_array_equal(io.read_array(str(tmp_path / "nikon.tif")).data, data)
    np.testing.assert_array_equal(_read_stdin(bytes_io.BytesIO(tiff)).data, data)
    after = _encoded("png", np.zeros((4, 4), np.uint8))
    with pytest.raises(GeomError, match=rf"^<stdin>: another input \(PNG\) starts at byte {len(tiff)}, after the TIFF"):
        _read_stdin(bytes_io.BytesIO(tiff + after))


@pytest.mark.parametrize("stray", [b"xx II*\0", b"x MM\0*\0\0\0\x08", b" \x89PNG\r\n\x1a\n", b"\n\xff\xd8\xff",
                                   b"..\x93NUMPY", b" GIF89a", b"~RIFF\0\0\0\0WEBP"],
                         ids=["tiff", "tiff-offset", "png", "jpeg", "npy", "gif", "webp"])
def test_stray_bytes_after_a_piped_tiff_that_hold_a_signature_are_no_second_input(
        stray: bytes, rng: np.random.Generator, tmp_path: Path) -> None:
    """A few bytes past what a TIFF's IFDs point to that happen to hold a format's signature
    ('xx II*\\0') were refused from a pipe as another input, where the same file read by name was
    read. Within the writer's slack an input starts only where its header follows the signature."""
    data = rng.integers(0, 256, (15, 20), dtype=np.uint8)
    tiff = _encoded("tiff", data) + stray
    (tmp_path / "t.tif").write_bytes(tiff)
    np.testing.assert_array_equal(io.read_array(str(tmp_path / "t.tif")).data, data)
    np.testing.assert_array_equal(_read_stdin(bytes_io.BytesIO(tiff)).data, data)


@pytest.mark.parametrize("fmt", ["tiff", "png", "jpeg", "npy", "gif", "webp"])
@pytest.mark.parametrize("gap", [b"", b"xyz"], ids=["at-end", "in-slack"])
def test_a_second_input_after_a_piped_tiff_is_refused_at_its_end_or_in_its_slack(fmt: str, gap: bytes,
                                                                                 rng: np.random.Generator) -> None:
    """'cat a.tif b.png |' and 'cat a.tif b.tif |' (after a writer's few bytes of slack too):
    another input, whose header follows its signature."""
    tiff = _encoded("tiff", rng.integers(0, 256, (15, 20), dtype=np.uint8))
    after = _encoded(fmt, rng.integers(0, 256, (6, 4, 3) if fmt == "webp" else (6, 4), dtype=np.uint8))
    at = len(tiff) + len(gap)
    said = rf"^<stdin>: another input \({fmt.upper()}\) starts at byte {at}, after the TIFF"
    with pytest.raises(GeomError, match=said):
        _read_stdin(bytes_io.BytesIO(tiff + gap + after))
