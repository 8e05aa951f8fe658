"""The one exception geomcli raises for bad input; importing it costs nothing."""


class GeomError(ValueError):
    """A one-line message: what was expected, what was found, and where."""
