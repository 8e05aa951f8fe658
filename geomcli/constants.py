"""The small constants the command line, io, layout and batch share, and the rule for typed numbers;
the standard library only, so the command line can import them at start-up (help text, Click
choices) for free."""

FORMATS = ("png", "jpeg", "bmp", "gif", "webp", "npy", "tiff")
"""The formats read and written, as --format names them."""

FORMAT_ALIASES = {"jpg": "jpeg", "tif": "tiff"}
"""The other names --format takes, as the extensions spell them."""

LAYOUTS = ("NCHW", "NHWC", "CHW", "HWC", "NHW", "HW")
"""The layouts --layout names."""

TIFF_COMPRESSIONS = ("none", "zlib", "lzma", "zstd", "lzw", "jpeg", "packbits")
"""The TIFF compressions --compression takes."""

NAME_MAX = 255
"""Bytes in one file name, on Linux's file systems: an output's, and its hidden temp's beside it."""

MAX_THREADS = 1024
"""The most --threads: a chunked run's Dask pool starts up to one thread per chunk, so
--threads 99999999999 on a zarr of many chunks started thousands of threads."""

DEFAULT_MAX_PIXELS = 2**31
"""The default of --max-pixels: the elements an input or output may have."""

EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 1, 2, 130, 141
"""Exit codes: a file failed; the command line asked what cannot be done (click's own code for
its usage errors); Ctrl-C; stdout's reader went away (as a shell reports SIGPIPE). A run a stop
signal ended exits 128 + its number, as a shell reports it: 143 for SIGTERM, 129 for SIGHUP."""


def plain_number(text: str) -> bool:
    """Whether ``text`` may spell a number as typed in ASCII: int() and float() also take other
    scripts' digits (``２``, ``٣``) and digit-group underscores (``1_0``), which no one means.
    The command line's numeric options and --fill (transform.parse_fill) both keep to it.

    >>> plain_number("1.5e3"), plain_number("２"), plain_number("1_0")
    (True, False, False)
    """
    return text.isascii() and "_" not in text
