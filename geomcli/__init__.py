"""geomcli: ONNX geometry operators on images and tensors.

The kernels load numpy, so they are imported on first use: ``geomcli --version``
and ``--help`` stay fast.
"""

from importlib import import_module
from importlib.metadata import version as _version
from typing import Any

from geomcli.errors import GeomError

__version__ = _version("geomcli")

_KERNELS = ("center_crop_pad", "affine_grid", "space_to_depth", "depth_to_space")
__all__ = ["GeomError", "__version__", *_KERNELS]


def __getattr__(name: str) -> Any:
    if name in _KERNELS:
        return getattr(import_module("geomcli.kernels"), name)
    raise AttributeError(f"module 'geomcli' has no attribute {name!r}")
