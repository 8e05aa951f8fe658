"""``python -m geomcli`` and the ``geomcli`` console script: the command line, loaded here so
that a Ctrl-C while it loads (click and the rest: about 30 ms of each start) ends the run as
one later does, "Interrupted" and exit 130, not with Python's traceback."""

import sys

from geomcli.constants import EXIT_INTERRUPTED


def main() -> None:
    try:
        from geomcli.cli import run
    except KeyboardInterrupt:
        print("Interrupted", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
    run()


if __name__ == "__main__":
    main()
