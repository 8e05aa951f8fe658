# The compiled GridSample (_grid_sample.c): what geomcli.ops.grid_sample calls. The first three
# take any object with the buffer protocol (collections.abc.Buffer from Python 3.12).
from typing import Any

def sample(
    plane: Any,
    coords: Any,
    out: Any,
    lengths: tuple[int, ...],
    mode: str,
    padding: str,
    align_corners: bool,
    kind: str,
    fill: bytes | float,
    epsilon: float,
    row: int = 0,
    /,
) -> None: ...

def sample_affine(
    plane: Any,
    theta: tuple[float, ...],
    out: Any,
    lengths: tuple[int, ...],
    mode: str,
    padding: str,
    align_corners: bool,
    kind: str,
    fill: bytes | float,
    epsilon: float,
    row: int,
    size: tuple[int, int],
    first: int,
    double: bool,
    /,
) -> None: ...
