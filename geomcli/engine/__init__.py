"""Runs: one object per operation, one file through an operation, plans for many files, worker
processes, and the reports that make the one exit code. No click: the command line (geomcli.cli)
turns what a user typed into the records of :mod:`geomcli.engine.options`, and the engine's
errors into exit codes."""
