# The compiled Resize passes (_resize.c): what geomcli.ops.resize calls. source, out and the taps
# and weights take any object with the buffer protocol (collections.abc.Buffer from Python 3.12).
from typing import Any

def resample(
    source: Any,
    out: Any,
    taps1: Any,
    weights1: Any,
    taps2: Any | None,
    weights2: Any | None,
    shape: tuple[int, int, int, int, int, int, int, int, int],
    kind: str,
    start: int,
    stop: int,
    /,
) -> None: ...
