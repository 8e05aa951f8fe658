"""The one exception geomcli raises for bad input; importing it costs nothing."""


class GeomError(ValueError):
    """A one-line message: what was expected, what was found, and where."""


class PlanError(GeomError):
    """A run that cannot be done as asked, found before anything is read or written (two inputs
    for one output, an output over an input, a name that leaves --out-dir): a usage fault, exit 2.
    ``options`` names the options at fault, where there are some."""

    def __init__(self, message: str, options: str | list[str] | None = None) -> None:
        super().__init__(message)
        self.options = [options] if isinstance(options, str) else options


class OptionFault(GeomError):
    """What the options cannot do with the one file a run was given (a blocksize that does not
    divide it, a float result to PNG), found from what was read of it: a usage fault, exit 2, as a
    batch finds it from its inputs' headers before anything is written; still that file's report
    (its one error line, its JSON record)."""


class StdoutError(Exception):
    """Standard output cannot take the text asked of it (closed, full, failing): the whole run
    ends with this one error, exit 1. Not a GeomError, so no file's handler takes it for its own."""
