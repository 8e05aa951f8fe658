"""geomcli: ONNX geometry operators on images and tensors.

The kernels load numpy and the version loads importlib.metadata, so both are looked
up on first use: ``geomcli --help`` stays fast.
"""

from importlib import import_module
from typing import Any

from geomcli.errors import GeomError

_KERNELS = ("center_crop_pad", "affine_grid", "space_to_depth", "depth_to_space")
__all__ = ["GeomError", "__version__", *_KERNELS]


def __getattr__(name: str) -> Any:
    if name in _KERNELS:
        return getattr(import_module("geomcli.kernels"), name)
    if name == "__version__":
        from importlib.metadata import version

        return version("geomcli")
    raise AttributeError(f"module 'geomcli' has no attribute {name!r}")
