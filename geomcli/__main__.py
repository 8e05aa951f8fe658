"""``python -m geomcli``: the same command line as ``geomcli``."""

if __name__ == "__main__":
    from geomcli.cli import run

    run()
