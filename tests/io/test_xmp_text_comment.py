"""XMP, PNG text chunks and comments travel from input to output, byte for byte; where the output
could hold metadata but not the piece, one warning names it; .npy names it in ``dropped`` only.
(EXIF, ICC and DPI: test_fidelity.) The files are made as the tools that make them make them:
Pillow's PngInfo and JPEG save, ImageMagick's convert."""

from __future__ import annotations

import io as io_module
import json
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result
from conftest import needs_imagemagick, run

from geomcli import io
from geomcli.io import Metadata, _png

XMP = (b'<?xpacket begin="\xef\xbb\xbf" id="W5M0MpCehiHzreSzNTczkc9d"?>\n'
       b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
       b'<rdf:Description xmlns:dc="http://purl.org/dc/elements/1.1/" dc:format="image/png"/>'
       b'</rdf:RDF></x:xmpmeta>\n<?xpacket end="w"?>')
COMMENT = b"made by a camera \xc3\xa9"  # UTF-8, as most tools write a JPEG comment

# each command on a 12x16 image, the output 8x10 or so: every kind of operation writes metadata
COMMANDS = [
    ("crop-pad", "--shape", "8,10"),
    ("resize", "--sizes", "6,8", "--mode", "linear"),
    ("warp", "--rotate", "30"),
]


def warnings_of(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]


def text_chunks(path: Path | str) -> list[tuple[bytes, bytes]]:
    """A PNG's tEXt, zTXt and iTXt chunks as stored, read here without geomcli or Pillow."""
    data = Path(path).read_bytes()
    chunks, pos = [], 8
    while pos < len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        if kind in (b"tEXt", b"zTXt", b"iTXt"):
            chunks.append((kind, data[pos + 8 : pos + 8 + length]))
        pos += 12 + length
    return chunks


def opened_info(path: Path | str) -> dict[str, Any]:
    from PIL import Image

    with Image.open(path) as im:
        im.load()  # a PNG's chunks after the pixels too
        return dict(im.info)


def pillow_png(path: Path, data: np.ndarray, **save: Any) -> Path:
    """A PNG with text of every kind Pillow writes: tEXt, zTXt, compressed iTXt, and an XMP iTXt."""
    from PIL import Image, PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("Title", "a test card")
    info.add_text("Description", "long words " * 40, zip=True)
    info.add_itxt("Author", "Zoë", lang="fr", tkey="Auteur", zip=True)
    info.add_itxt("XML:com.adobe.xmp", XMP.decode())
    Image.fromarray(data).save(path, pnginfo=info, **save)
    return path


def pillow_jpeg(path: Path, data: np.ndarray, **save: Any) -> Path:
    from PIL import Image

    Image.fromarray(data).save(path, comment=COMMENT, xmp=XMP, quality=95, **save)
    return path


@pytest.fixture
def photo(rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_png_text_and_xmp_travel_into_a_png_byte_for_byte(tmp_path: Path, photo: np.ndarray,
                                                           command: tuple[str, ...]) -> None:
    source = pillow_png(tmp_path / "in.png", photo)
    result = run(command[0], source, "-o", tmp_path / "o.png", *command[1:])
    assert result.exit_code == 0 and warnings_of(result) == []
    assert text_chunks(tmp_path / "o.png") == text_chunks(source)
    assert opened_info(tmp_path / "o.png")["xmp"] == XMP


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_jpeg_comment_and_xmp_travel_into_a_jpeg_and_a_png(tmp_path: Path, photo: np.ndarray,
                                                           command: tuple[str, ...]) -> None:
    source = pillow_jpeg(tmp_path / "in.jpg", photo)
    result = run(command[0], source, "-o", tmp_path / "o.jpg", *command[1:])
    assert result.exit_code == 0 and [w for w in warnings_of(result) if "lossy" not in w] == []
    info = opened_info(tmp_path / "o.jpg")
    assert (info["comment"], info["xmp"]) == (COMMENT, XMP)
    # into a PNG: the comment a tEXt Comment chunk (as ImageMagick writes one), then back into a JPEG
    assert run(command[0], source, "-o", tmp_path / "o.png", *command[1:]).exit_code == 0
    assert (b"tEXt", b"Comment\0" + COMMENT) in text_chunks(tmp_path / "o.png")
    assert opened_info(tmp_path / "o.png")["xmp"] == XMP
    assert run("crop-pad", tmp_path / "o.png", "-o", tmp_path / "back.jpg", "--shape", "4,4").exit_code == 0
    assert opened_info(tmp_path / "back.jpg")["comment"] == COMMENT


def test_png_into_a_jpeg_keeps_xmp_and_warns_once_of_the_text(tmp_path: Path, photo: np.ndarray) -> None:
    source = pillow_png(tmp_path / "in.png", photo)
    result = run("crop-pad", source, "-o", tmp_path / "o.jpg", "--shape", "8,10")
    assert result.exit_code == 0
    named = "JPEG cannot hold the PNG text chunks (Title, Description, Author); dropped"
    assert warnings_of(result)[1:] == [f"Warning: {tmp_path / 'o.jpg'}: {named}"]
    assert opened_info(tmp_path / "o.jpg")["xmp"] == XMP
    record = json.loads(run("crop-pad", source, "-o", tmp_path / "o.jpg", "--shape", "8,10", "--json").stdout)
    assert record["warnings"][1:] == [named]


def test_into_a_tiff_xmp_travels_and_the_rest_is_one_warning_each(tmp_path: Path, photo: np.ndarray) -> None:
    """TIFF holds XMP (tag 700, written by tifffile, read back as is, and on to a PNG again); it
    has no place for PNG text or a JPEG comment."""
    import tifffile

    png = pillow_png(tmp_path / "in.png", photo)
    record = json.loads(run("crop-pad", png, "-o", tmp_path / "a.tiff", "--shape", "8,10", "--json").stdout)
    assert record["warnings"] == ["TIFF cannot hold the PNG text chunks (Title, Description, Author); dropped"]
    with tifffile.TiffFile(tmp_path / "a.tiff") as tif:
        assert bytes(tif.pages[0].tags[700].value) == XMP
    assert run("crop-pad", tmp_path / "a.tiff", "-o", tmp_path / "back.png", "--shape", "6,6", "-q").exit_code == 0
    assert opened_info(tmp_path / "back.png")["xmp"] == XMP
    jpeg = pillow_jpeg(tmp_path / "in.jpg", photo)
    result = run("crop-pad", jpeg, "-o", tmp_path / "b.tiff", "--shape", "8,10")
    assert warnings_of(result) == [f"Warning: {tmp_path / 'b.tiff'}: TIFF cannot hold the comment; dropped"]


def test_npy_drops_them_without_a_warning_and_json_names_them(tmp_path: Path, photo: np.ndarray) -> None:
    png = pillow_png(tmp_path / "in.png", photo)
    jpeg = pillow_jpeg(tmp_path / "in.jpg", photo)
    for source, dropped in ((png, ["XMP packet", "PNG text chunks (Title, Description, Author)"]),
                            (jpeg, ["XMP packet", "comment"])):
        result = run("crop-pad", source, "-o", tmp_path / "o.npy", "--shape", "8,10")
        assert result.exit_code == 0 and "Warning" not in result.stderr
        record = json.loads(run("crop-pad", source, "-o", tmp_path / "o.npy", "--shape", "8,10", "--json").stdout)
        assert record["warnings"] == [] and record["dropped"] == dropped


def test_exif_icc_and_dpi_still_travel_beside_them(tmp_path: Path, photo: np.ndarray) -> None:
    from PIL import Image, ImageCms

    icc = bytes(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
    exif = Image.Exif()
    exif[0x010F] = "GeomCam"
    source = pillow_png(tmp_path / "in.png", photo, icc_profile=icc, dpi=(300, 300), exif=exif.tobytes())
    assert run("resize", source, "-o", tmp_path / "o.png", "--sizes", "6,8").stderr.count("Warning") == 0
    metadata = io.read_array(str(tmp_path / "o.png")).metadata
    assert metadata.icc == icc and metadata.dpi == pytest.approx((150, 150), abs=0.05)
    assert metadata.exif is not None and b"GeomCam" in metadata.exif
    assert text_chunks(tmp_path / "o.png") == text_chunks(source)


def test_a_16bit_png_carries_its_text_too(tmp_path: Path, rng: np.random.Generator) -> None:
    data = rng.integers(0, 65536, (12, 16), dtype=np.uint16)
    source = pillow_png(tmp_path / "in.png", data)
    assert run("crop-pad", source, "-o", tmp_path / "o.png", "--shape", "8,10").exit_code == 0
    assert io.read_array(str(tmp_path / "o.png")).data.dtype == np.uint16
    assert text_chunks(tmp_path / "o.png") == text_chunks(source)
    assert opened_info(tmp_path / "o.png")["xmp"] == XMP
    # and an RGB one, which only geomcli's own encoder writes
    io.write_array(rng.integers(0, 65536, (12, 16, 3), dtype=np.uint16), str(tmp_path / "rgb.png"),
                   metadata=Metadata(xmp=XMP, text=((b"tEXt", b"Title\0x"),)))
    assert text_chunks(tmp_path / "rgb.png")[0] == (b"tEXt", b"Title\0x")
    assert io.read_array(str(tmp_path / "rgb.png")).metadata.xmp == XMP


def test_text_after_the_pixels_travels(tmp_path: Path, photo: np.ndarray) -> None:
    """ImageMagick writes its text chunks after IDAT, where Pillow reads them only on decoding."""
    from PIL import Image

    Image.fromarray(photo).save(tmp_path / "plain.png")
    data = (tmp_path / "plain.png").read_bytes()
    body = b"comment\0after the pixels"
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    (tmp_path / "in.png").write_bytes(data[:-12] + chunk + data[-12:])
    assert run("crop-pad", tmp_path / "in.png", "-o", tmp_path / "o.png", "--shape", "4,4").exit_code == 0
    assert text_chunks(tmp_path / "o.png") == [(b"tEXt", body)]
    # a JPEG takes a PNG's comment as its own
    assert run("crop-pad", tmp_path / "in.png", "-o", tmp_path / "o.jpg", "--shape", "4,4").exit_code == 0
    assert opened_info(tmp_path / "o.jpg")["comment"] == b"after the pixels"


def with_late_text(png: bytes, body: bytes) -> bytes:
    """``png`` with one tEXt of ``body`` after its IDAT chunks, as ImageMagick places its text."""
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    return png[:-12] + chunk + png[-12:]


def late_text_png(path: Path, data: np.ndarray, body: bytes, **save: Any) -> Path:
    """A PNG of ``data`` with one tEXt of ``body`` after its IDAT chunks."""
    from PIL import Image

    Image.fromarray(data).save(path, **save)
    path.write_bytes(with_late_text(path.read_bytes(), body))
    return path


def bytes_read() -> int:
    """What this process has read so far, every file and pipe ("rchar")."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts reads by /proc/self/io (Linux)")
def test_a_dry_run_finds_a_big_pngs_late_text_without_reading_its_pixels(tmp_path: Path) -> None:
    """A dry run read a PNG's file whole for the text chunks after its image data: all 50 MB of
    a big one, for a batch all their bytes. Its chunks are walked by their lengths now, the image
    data skipped: a few KB read, the same warnings as the run's."""
    body = b"Late\0after the pixels"
    late_text_png(tmp_path / "small.png", np.zeros((4, 4, 3), np.uint8), body)
    big = late_text_png(tmp_path / "big.png", np.zeros((4096, 4096, 3), np.uint8), body, compress_level=0,
                        dpi=(300, 300))
    assert big.stat().st_size > 50_000_000
    args = ["--out-dir", tmp_path / "o", "--name", "{stem}.npy", "--shape", "8,8", "--json"]
    assert run("crop-pad", tmp_path / "small.png", *args, "--dry-run").exit_code == 0  # (imports loaded)
    before = bytes_read()
    dry = run("crop-pad", big, *args, "--dry-run")
    read = bytes_read() - before
    assert dry.exit_code == 0, dry.stderr
    assert read < 64 << 10, read
    done = run("crop-pad", big, *args)
    assert done.exit_code == 0, done.stderr
    planned, reported = json.loads(dry.stdout.splitlines()[0]), json.loads(done.stdout.splitlines()[0])
    assert planned["dropped"] == reported["dropped"] == ["DPI (299.999 x 299.999)", "PNG text chunk (Late)"]
    assert planned["warnings"] == reported["warnings"]


@pytest.mark.parametrize("late", [0, 1, 3])
@pytest.mark.parametrize("side", [60, 400])
def test_a_pngs_chunks_are_found_from_its_first_and_last_bytes(tmp_path: Path, rng: np.random.Generator,
                                                               late: int, side: int) -> None:
    """A URL's PNG is read by its first and last 64 KiB: its text after the image data (in several
    IDATs, or within the first bytes of a small file) is found back from its IEND, as the whole
    file's walk finds it; one that begins before the last 64 KiB (past the first) is not."""
    path = tmp_path / "in.png"
    data = pillow_png(path, rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).read_bytes()
    for index in range(late):
        data = with_late_text(data, b"Late%d\0after the pixels" % index)
    path.write_bytes(data)
    apart = _png.stored_chunks_apart(data[: 64 << 10], data[-(64 << 10) :], len(data))
    whole = _png.stored_chunks(str(path))
    assert _png.text_chunks(apart, 1 << 20) == _png.text_chunks(whole, 1 << 20)
    assert len(_png.text_chunks(whole, 1 << 20)[0]) == 3 + late
    assert _png.sixteen_bit(apart) == _png.sixteen_bit(whole) is False
    if late and side == 400:  # past the first bytes, a text chunk that begins before the last: none after it
        big = with_late_text(data, b"Big\0" + bytes(100_000))
        later = _png.stored_chunks_apart(big[: 64 << 10], big[-(64 << 10) :], len(big))
        assert _png.text_keywords(_png.text_chunks(later, 1 << 20)[0]) == ["Title", "Description", "Author"]


@pytest.mark.parametrize("fmt", ["gif", "webp"])
def test_a_gif_comment_and_a_webp_xmp_travel(tmp_path: Path, rng: np.random.Generator, fmt: str) -> None:
    from PIL import Image

    if fmt == "gif":
        Image.fromarray(rng.integers(0, 256, (12, 16), dtype=np.uint8)).save(tmp_path / "in.gif", comment=COMMENT,
                                                                               optimize=False)
    else:
        Image.fromarray(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)).save(tmp_path / "in.webp", xmp=XMP,
                                                                               lossless=True)
    result = run("crop-pad", tmp_path / f"in.{fmt}", "-o", tmp_path / f"o.{fmt}", "--shape", "8,10")
    assert result.exit_code == 0 and warnings_of(result) == []
    info = opened_info(tmp_path / f"o.{fmt}")
    assert (info["comment"] if fmt == "gif" else info["xmp"]) == (COMMENT if fmt == "gif" else XMP)


def test_what_a_jpeg_cannot_take_is_one_warning_and_the_file_is_written(tmp_path: Path) -> None:
    data = np.zeros((4, 6, 3), np.uint8)
    big = Metadata(xmp=b"<x>" + b" " * 70000 + b"</x>", comment=b"c" * 70000)
    said = io.write_array(data, str(tmp_path / "o.jpg"), metadata=big)
    assert list(said[1:]) == ["JPEG cannot hold the XMP packet of 70007 bytes (one segment takes 65504); dropped",
                              "JPEG cannot hold the comment of 70000 bytes (one segment takes 65533); dropped"]
    assert "xmp" not in opened_info(tmp_path / "o.jpg")
    said = io.write_array(data, str(tmp_path / "o.png"), metadata=Metadata(comment=b"a\0b"))
    assert list(said) == ["PNG cannot hold the comment (it holds a NUL byte, which a PNG text chunk cannot); dropped"]


@pytest.mark.parametrize("fmt", ["png", "webp"])
def test_exif_too_long_for_a_jpeg_is_one_warning_not_a_traceback(tmp_path: Path, photo: np.ndarray,
                                                                 fmt: str) -> None:
    """A PNG's eXIf or a WebP's EXIF holds any length; one of 100 KB (a maker note) written to a
    JPEG ended the run with Pillow's 'ValueError: EXIF data is too long' and a traceback, a batch
    too, its other files unwritten. It is dropped with a warning; the rest of the file is written."""
    from PIL import ExifTags, Image

    exif = Image.Exif()
    exif[0x010F] = "Canon"
    exif.get_ifd(ExifTags.IFD.Exif)[0x927C] = b"M" * 100_000
    saving: dict[str, Any] = {"lossless": True} if fmt == "webp" else {}
    Image.fromarray(photo).save(tmp_path / f"big.{fmt}", exif=exif.tobytes(), **saving)
    Image.fromarray(photo).save(tmp_path / "small.png")
    result = run("crop-pad", tmp_path / f"big.{fmt}", tmp_path / "small.png", "--out-dir", tmp_path / "out",
                 "--name", "{stem}.jpg", "--shape", "8,8")
    assert result.exit_code == 0
    size = len(exif.tobytes())
    assert f"Warning: {tmp_path / 'out' / 'big.jpg'}: JPEG cannot hold the EXIF data of {size} bytes (one segment " \
           "takes 65533); dropped" in warnings_of(result)
    assert "exif" not in opened_info(tmp_path / "out" / "big.jpg") and (tmp_path / "out" / "small.jpg").exists()
    exif.get_ifd(ExifTags.IFD.Exif)[0x927C] = b"M" * 60_000  # one that fits is written
    Image.fromarray(photo).save(tmp_path / f"fits.{fmt}", exif=exif.tobytes(), **saving)
    assert run("crop-pad", tmp_path / f"fits.{fmt}", "-o", tmp_path / "fits.jpg", "--shape", "8,8", "-q").exit_code == 0
    assert len(opened_info(tmp_path / "fits.jpg")["exif"]) == len(exif.tobytes())


def test_a_jpeg_with_two_comments_keeps_the_first_and_names_the_other(tmp_path: Path, photo: np.ndarray) -> None:
    source = pillow_jpeg(tmp_path / "one.jpg", photo)
    data = source.read_bytes()
    second = b"\xff\xfe" + struct.pack(">H", 2 + 6) + b"second"
    (tmp_path / "in.jpg").write_bytes(data[:2] + second + data[2:])  # right after SOI
    result = run("crop-pad", tmp_path / "in.jpg", "-o", tmp_path / "o.jpg", "--shape", "4,4")
    assert warnings_of(result)[1:] == [
        f"Warning: {tmp_path / 'o.jpg'}: the JPEG's 1 comment(s) after the first cannot be carried; dropped"]
    assert opened_info(tmp_path / "o.jpg")["comment"] == b"second"


def photoshop_app13(resource: int, body: bytes) -> bytes:
    """A JPEG APP13 segment of one Photoshop image resource, as Photoshop and Lightroom write it."""
    block = b"8BIM" + struct.pack(">H", resource) + b"\0\0" + struct.pack(">I", len(body)) + body
    payload = b"Photoshop 3.0\0" + block + b"\0" * (len(body) % 2)
    return b"\xff\xed" + struct.pack(">H", 2 + len(payload)) + payload


@pytest.mark.parametrize(("resource", "body", "said"), [
    (0x0404, b"\x1c\x02\x78\x00\x07Caption\x1c\x02\x74\x00\x09(c) Anna.", True),  # IPTC caption, copyright
    (0x0404, b"", False),  # Photoshop's empty IPTC record: nothing is lost
    (0x03ED, b"\0\x48\0\0\0\x01\0\x01\0\x48\0\0\0\x01\0\x01", False)])  # resolution info only
def test_a_jpegs_iptc_record_is_named_when_dropped(tmp_path: Path, photo: np.ndarray, resource: int, body: bytes,
                                                  said: bool) -> None:
    """A photo's IPTC caption, keywords and copyright (Photoshop's APP13) were dropped without a
    word, where the docs promise a warning for each field an output does not keep."""
    data = pillow_jpeg(tmp_path / "one.jpg", photo).read_bytes()
    (tmp_path / "in.jpg").write_bytes(data[:2] + photoshop_app13(resource, body) + data[2:])
    warning = (f"Warning: {tmp_path / 'o.jpg'}: the JPEG's IPTC record "
               "(caption, keywords, copyright: Photoshop's APP13) ")
    result = run("crop-pad", tmp_path / "in.jpg", "-o", tmp_path / "o.jpg", "--shape", "4,4")
    assert result.exit_code == 0
    assert (warning + "cannot be carried; dropped" in warnings_of(result)) == said
    result = run("crop-pad", tmp_path / "in.jpg", "-o", tmp_path / "o.jpg", "--shape", "4,4", "--strip")
    assert result.exit_code == 0 and not any("IPTC" in line for line in warnings_of(result))


def test_a_multi_picture_jpegs_other_images_are_named_when_dropped(tmp_path: Path, photo: np.ndarray) -> None:
    """An MPO JPEG (a phone's gain or depth map, a stereo camera's two eyes) lost its second
    image without a word; the first is read, as before, and a warning names the others."""
    from PIL import Image

    Image.fromarray(photo).save(tmp_path / "in.jpg", format="MPO", save_all=True,
                                append_images=[Image.fromarray(photo[::2, ::2])])
    result = run("crop-pad", tmp_path / "in.jpg", "-o", tmp_path / "o.png", "--shape", "8,10")
    assert result.exit_code == 0
    assert warnings_of(result) == [f"Warning: {tmp_path / 'o.png'}: the JPEG's 1 other image(s) after the first "
                                   "(MPO: a preview, gain or depth map, or the other eye) cannot be carried; dropped"]
    with Image.open(tmp_path / "in.jpg") as im:
        assert np.array_equal(io.read_array(str(tmp_path / "o.png")).data, np.asarray(im)[2:10, 3:13])


def png_chunks(path: Path | str) -> list[tuple[bytes, bytes]]:
    """Every chunk of a PNG, (type, body), read here without geomcli or Pillow."""
    data = Path(path).read_bytes()
    chunks, pos = [], 8
    while pos < len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        chunks.append((kind, data[pos + 8 : pos + 8 + length]))
        pos += 12 + length
    return chunks


def plain_png(data: np.ndarray) -> bytes:
    """A PNG of nothing but its IHDR, pixels and IEND."""
    from PIL import Image

    encoded = io_module.BytesIO()
    Image.fromarray(data).save(encoded, format="PNG")
    return encoded.getvalue()


LINEAR = [(b"gAMA", struct.pack(">I", 100000)),  # gamma 1.0: linear light, as a renderer writes it
          (b"cHRM", struct.pack(">8I", 31270, 32900, 70800, 29200, 17000, 79700, 13100, 4600))]  # BT.2020's


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_a_pngs_gamma_and_primaries_travel_into_a_png(tmp_path: Path, rng: np.random.Generator,
                                                       dtype: type) -> None:
    """A PNG of linear light (gAMA 1.0) or other primaries (cHRM) lost them without a word, and
    viewers that honour them (browsers) then showed its crop darker, in other colours. They are
    carried to a PNG as stored, before the pixels; another format names them in a warning."""
    from geomcli.io import _png

    data = rng.integers(0, np.iinfo(dtype).max, (12, 16, 3), dtype=dtype)
    plain = _png.encode(data, 6) if dtype is np.uint16 else plain_png(data)
    source = tmp_path / "in.png"
    chunks = b"".join(_png._chunk(kind, body) for kind, body in LINEAR)
    source.write_bytes(plain[:33] + chunks + plain[33:])  # after the IHDR
    result = run("crop-pad", source, "-o", tmp_path / "o.png", "--shape", "8,10")
    assert result.exit_code == 0 and warnings_of(result) == []
    written = png_chunks(tmp_path / "o.png")
    kinds = [kind for kind, _ in written]
    assert [chunk for chunk in written if chunk[0] in (b"gAMA", b"cHRM")] == LINEAR
    assert kinds.index(b"cHRM") < kinds.index(b"IDAT") and kinds.index(b"gAMA") < kinds.index(b"IDAT")
    if dtype is np.uint8:
        result = run("crop-pad", source, "-o", tmp_path / "o.jpg", "--shape", "8,10")
        assert warnings_of(result)[1:] == [
            f"Warning: {tmp_path / 'o.jpg'}: JPEG cannot hold the PNG gamma 1 (gAMA) and primaries (cHRM); dropped"]


@pytest.mark.parametrize("chunks", [
    [(b"sRGB", b"\0")], [(b"gAMA", struct.pack(">I", 45455))],
    [(b"gAMA", struct.pack(">I", 45455)), (b"cHRM", struct.pack(">8I", 31270, 32900, 64000, 33000, 30000, 60000,
                                                                 15000, 6000))]], ids=["sRGB", "gamma", "both"])
def test_srgbs_own_colour_chunks_are_dropped_without_a_word(tmp_path: Path, photo: np.ndarray,
                                                             chunks: list[tuple[bytes, bytes]]) -> None:
    # what a JPEG or TIFF without them is taken for anyway (Pillow writes gAMA 1/2.2 on request,
    # Photoshop writes all three): nothing a viewer shows changes
    from geomcli.io import _png

    plain = plain_png(photo)
    source = tmp_path / "in.png"
    source.write_bytes(plain[:33] + b"".join(_png._chunk(kind, body) for kind, body in chunks) + plain[33:])
    result = run("crop-pad", source, "-o", tmp_path / "o.tiff", "--shape", "8,10")
    assert result.exit_code == 0 and warnings_of(result) == []
    assert run("crop-pad", source, "-o", tmp_path / "o.png", "--shape", "8,10", "-q").exit_code == 0
    assert [chunk for chunk in png_chunks(tmp_path / "o.png") if chunk[0] in (b"sRGB", b"gAMA", b"cHRM")] == chunks


ORIENTED_XMP = {
    "attribute": b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
                 b'<rdf:Description rdf:about="" xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:Orientation="{}" '
                 b'tiff:Make="Canon"/></rdf:RDF></x:xmpmeta>',
    "element": b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
               b'<rdf:Description rdf:about="" xmlns:tiff="http://ns.adobe.com/tiff/1.0/">'
               b"<tiff:Orientation>{}</tiff:Orientation></rdf:Description></rdf:RDF></x:xmpmeta>",
}


@pytest.mark.parametrize("form", ORIENTED_XMP)
@pytest.mark.parametrize("fmt", ["jpg", "png", "webp", "tiff"])
def test_an_xmp_orientation_is_1_once_the_pixels_are_upright(tmp_path: Path, photo: np.ndarray, form: str,
                                                             fmt: str) -> None:
    """A photo whose EXIF and XMP both say orientation 6 (Lightroom writes both) came out upright
    with EXIF orientation 1 but the XMP's tiff:Orientation still 6: a viewer that reads the XMP
    turned the upright picture a second time. It says 1 too; with --no-auto-orient, 6 as stored."""
    import tifffile
    from PIL import Image

    xmp = ORIENTED_XMP[form].replace(b"{}", b"6")
    source = tmp_path / f"in.{fmt}"
    if fmt == "tiff":
        tifffile.imwrite(source, photo, photometric="rgb", extratags=[(274, "H", 1, 6, True), (700, 1, len(xmp), xmp,
                                                                                               True)])
    else:
        exif = Image.Exif()
        exif[0x0112] = 6
        saving: dict[str, Any] = {"lossless": True} if fmt == "webp" else {}
        if fmt == "png":
            from PIL import PngImagePlugin

            saving["pnginfo"] = PngImagePlugin.PngInfo()
            saving["pnginfo"].add_itxt("XML:com.adobe.xmp", xmp.decode())
        Image.fromarray(photo).save(source, exif=exif.tobytes(), xmp=xmp, **saving)
    for flags, orientation in (((), b"1"), (("--no-auto-orient",), b"6")):
        out = tmp_path / f"o.{fmt}"
        result = run("crop-pad", source, "-o", out, "--shape", "8,8", *flags)
        assert result.exit_code == 0
        written = io.read_array(str(out), auto_orient=False).metadata.xmp
        assert written == ORIENTED_XMP[form].replace(b"{}", orientation)


def test_strip_writes_none_of_them(tmp_path: Path, photo: np.ndarray) -> None:
    source = pillow_png(tmp_path / "in.png", photo)
    result = run("crop-pad", source, "-o", tmp_path / "o.jpg", "--shape", "4,4", "--strip")
    assert [w for w in warnings_of(result) if "lossy" not in w] == []
    assert run("crop-pad", source, "-o", tmp_path / "o.png", "--shape", "4,4", "--strip").exit_code == 0
    assert text_chunks(tmp_path / "o.png") == [] and "comment" not in opened_info(tmp_path / "o.jpg")


def test_zTXt_and_compressed_xmp_are_inflated_no_further_than_pillows_bound(tmp_path: Path,
                                                                            photo: np.ndarray) -> None:
    from PIL import Image, PngImagePlugin

    bomb = zlib.compress(b"\0" * (PngImagePlugin.MAX_TEXT_CHUNK * 4), 9)
    info = PngImagePlugin.PngInfo()
    info.add(b"zTXt", b"Bomb\0\0" + bomb)
    Image.fromarray(photo).save(tmp_path / "bomb.png", pnginfo=info)
    result = run("crop-pad", tmp_path / "bomb.png", "-o", tmp_path / "o.png", "--shape", "4,4")
    assert result.exit_code == 1 and "Decompressed data too large" in result.stderr
    # an XMP iTXt past the bound is dropped, not inflated (geomcli's own reading of it)
    itxt = _png.XMP_KEYWORD + b"\0\1\0\0\0" + zlib.compress(b" " * 5000)
    assert _png.text_chunks(b"\x89PNG\r\n\x1a\n" + _png._chunk(b"iTXt", itxt), 4096) == ((), None)
    assert _png.text_chunks(b"\x89PNG\r\n\x1a\n" + _png._chunk(b"iTXt", itxt), 8192) == ((), b" " * 5000)


# ---- files ImageMagick makes ----------------------------------------------------------------------

@needs_imagemagick
def test_imagemagick_comments_travel(tmp_path: Path, photo: np.ndarray) -> None:
    from PIL import Image

    Image.fromarray(photo).save(tmp_path / "in.png")
    subprocess.run(["convert", str(tmp_path / "in.png"), "-set", "comment", "hi", str(tmp_path / "im.jpg")],
                   check=True)
    subprocess.run(["convert", str(tmp_path / "in.png"), "-set", "comment", "hi", str(tmp_path / "im.png")],
                   check=True)
    assert run("crop-pad", tmp_path / "im.jpg", "-o", tmp_path / "o.jpg", "--shape", "8,10").exit_code == 0
    assert opened_info(tmp_path / "o.jpg")["comment"] == b"hi"
    assert run("warp", tmp_path / "im.png", "-o", tmp_path / "o.png", "--rotate", "10").exit_code == 0
    assert text_chunks(tmp_path / "o.png") == text_chunks(tmp_path / "im.png")
    # ImageMagick reads a geomcli PNG's comment and XMP as its own
    identify = ["identify", "-format", "%c", str(tmp_path / "o.png")]
    assert subprocess.run(identify, check=True, capture_output=True).stdout == b"hi"


def test_info_shows_which_are_present(tmp_path: Path, photo: np.ndarray) -> None:
    png = pillow_png(tmp_path / "in.png", photo)
    jpeg = pillow_jpeg(tmp_path / "in.jpg", photo)
    line = run("info", png).stdout
    assert f"XMP packet of {len(XMP)} bytes, PNG text Title, Description, Author" in line
    assert "comment 'made by a camera é'" in run("info", jpeg).stdout
    record = json.loads(run("info", jpeg, "--json").stdout)
    assert (record["xmp"], record["text"], record["comment"]) == (len(XMP), [], COMMENT.decode())
    record = json.loads(run("info", png, "--json").stdout)
    assert (record["text"], record["comment"]) == (["Title", "Description", "Author"], None)
