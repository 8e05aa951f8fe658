"""``python -m geomcli`` and the ``geomcli`` console script: the command line, loaded here so
that a Ctrl-C while it loads (click and the rest: about 30 ms of each start) ends the run as
one later does, "Interrupted" and the end by SIGINT (exit status 130), not Python's traceback."""

import sys


def main() -> None:
    try:
        from geomcli.cli import run
    except KeyboardInterrupt:
        print("Interrupted", file=sys.stderr)
        sys.excepthook = lambda *args: None  # ended by SIGINT, as a run is (cli.group._end_by_sigint)
        raise
    run()


if __name__ == "__main__":
    main()
