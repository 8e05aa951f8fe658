"""The command line: click alone, one module per command over the engine (geomcli.engine)."""

from geomcli.cli.group import cli, main, run

__all__ = ["cli", "main", "run"]
