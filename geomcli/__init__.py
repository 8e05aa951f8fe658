"""ONNX geometry operators on numpy arrays, exactly as the spec defines them.

``center_crop_pad``, ``resize``, ``affine_grid``, ``grid_sample``, ``space_to_depth`` and
``depth_to_space``: each named after its ONNX operator, with the spec's inputs and attributes
(their defaults too) as arguments. An array, or anything numpy reads, in; a new array of the
input's dtype out. Any bad argument is a :class:`GeomError` (a ValueError) of one line.
``help(geomcli.resize)`` and the others give the rules where the spec is silent.

>>> import numpy as np
>>> import geomcli
>>> geomcli.center_crop_pad(np.arange(12).reshape(3, 4), [2, 2])
array([[1, 2],
       [5, 6]])
>>> geomcli.resize(np.array([[0, 10], [20, 30]], dtype=np.uint8), sizes=[3, 3], mode="linear")
array([[ 0,  5, 10],
       [10, 15, 20],
       [20, 25, 30]], dtype=uint8)
>>> geomcli.resize(np.zeros((2, 2)), sizes=[3])
Traceback (most recent call last):
geomcli.errors.GeomError: resize: sizes has 1 value for rank 2 (input shape (2, 2))
"""

# The kernels load numpy, so they are looked up on first use: ``geomcli --help`` stays fast.
# The version is written here once (pyproject.toml reads it from here): ``--version`` reads it at
# no cost, where importlib.metadata took 34 ms of imports.

from importlib import import_module
from typing import TYPE_CHECKING, Any

from geomcli.errors import GeomError

if TYPE_CHECKING:
    # what type checkers see of the kernels looked up below: their signatures, where the lookup
    # alone made each of them Any (no error for mode="bilinear", nor for geomcli.no_such_name)
    from geomcli.ops.affine_grid import affine_grid as affine_grid
    from geomcli.ops.center_crop_pad import center_crop_pad as center_crop_pad
    from geomcli.ops.grid_sample import grid_sample as grid_sample
    from geomcli.ops.resize import resize as resize
    from geomcli.ops.space_depth import depth_to_space as depth_to_space
    from geomcli.ops.space_depth import space_to_depth as space_to_depth

# each operator and the module it lives in, imported on first use
_KERNELS = {
    "center_crop_pad": "geomcli.ops.center_crop_pad",
    "affine_grid": "geomcli.ops.affine_grid",
    "space_to_depth": "geomcli.ops.space_depth",
    "depth_to_space": "geomcli.ops.space_depth",
    "grid_sample": "geomcli.ops.grid_sample",
    "resize": "geomcli.ops.resize",
}
__version__ = "0.1.0"
__all__ = ["GeomError", "__version__", *_KERNELS]


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        if name in _KERNELS:
            return getattr(import_module(_KERNELS[name]), name)
        raise AttributeError(f"module 'geomcli' has no attribute {name!r}")


def __dir__() -> list[str]:
    """What the package offers: its kernels (not yet imported) and GeomError, not its own imports."""
    return sorted(__all__)
