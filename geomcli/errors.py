"""The one exception geomcli raises for bad input; importing it costs nothing."""


class GeomError(ValueError):
    """A one-line message: what was expected, what was found, and where."""


class StdoutError(Exception):
    """Standard output cannot take the text asked of it (closed, full, failing): the whole run
    ends with this one error, exit 1. Not a GeomError, so no file's handler takes it for its own."""
