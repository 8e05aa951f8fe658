"""The small constants the command line, io, layout and batch share; the standard library only, so
the command line can import them at start-up (help text, Click choices) for free."""

FORMATS = ("png", "jpeg", "bmp", "gif", "webp", "npy", "tiff")
"""The formats read and written, as --format names them."""

LAYOUTS = ("NCHW", "NHWC", "CHW", "HWC", "HW")
"""The layouts --layout names."""

TIFF_COMPRESSIONS = ("none", "zlib", "lzma", "zstd", "lzw", "jpeg", "packbits")
"""The TIFF compressions --compression takes."""

DEFAULT_MAX_PIXELS = 2**31
"""The default of --max-pixels: the elements an input or output may have."""

EXIT_FAILED, EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_BROKEN_PIPE = 1, 130, 143, 141
"""Exit codes: a file failed; Ctrl-C; SIGTERM; stdout's reader went away (as a shell reports SIGPIPE)."""
