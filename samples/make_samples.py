"""Write the sample files the README, the --help examples and the tests use.

Deterministic: a seeded generator and geomcli's own writers (no timestamps), so a re-run gives
the same bytes; tests/test_io.py checks that. Run from the repository root:

    python samples/make_samples.py            # into samples/
    python samples/make_samples.py OUT_DIR    # anywhere else
"""

from __future__ import annotations

import os
import sys

import numpy as np

from geomcli import io


def photo(rng: np.random.Generator) -> np.ndarray:
    """120x160 RGB uint8: a sky-to-ground gradient, a sun, a house, a little sensor noise."""
    h, w = 120, 160
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    sky = np.stack([90 + 60 * y / h, 150 + 50 * y / h, 235 - 30 * y / h], axis=-1)
    ground = np.stack([70 + 30 * x / w, 130 - 20 * y / h, 50 + 0 * x], axis=-1)
    image = np.where((y > 80)[..., None], ground, sky)
    sun = (x - 125) ** 2 + (y - 25) ** 2 < 14**2
    image[sun] = (255, 220, 90)
    image[55:95, 30:75] = (180, 90, 60)  # wall
    roof = (y >= 35) & (y < 55) & (np.abs(x - 52.5) < (y - 35) * 1.3)
    image[roof] = (120, 40, 40)
    image[70:95, 45:58] = (70, 45, 30)  # door
    image[62:74, 62:72] = (200, 230, 250)  # window
    image += rng.normal(0, 3, image.shape)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def gray16(rng: np.random.Generator) -> np.ndarray:
    """64x96 uint16 over the full 16-bit range, so 8-bit truncation would show."""
    y, x = np.mgrid[0:64, 0:96]
    ramp = (x * 65535 // 95).astype(np.int64)
    ring = 20000 * np.cos(np.hypot(x - 48, y - 32) / 4)
    values = ramp + ring + rng.integers(-64, 65, ramp.shape)
    image: np.ndarray = np.clip(values, 0, 65535).astype(np.uint16)
    return image


def rgba(rng: np.random.Generator) -> np.ndarray:
    """48x64 RGBA uint8: a colour disc on a transparent background, soft edge."""
    y, x = np.mgrid[0:48, 0:64].astype(np.float64)
    distance = np.hypot(x - 32, y - 24)
    alpha = np.clip((20 - distance) * 64, 0, 255)
    colour = np.stack([255 * x / 63, 255 * y / 47, 255 - 255 * x / 63], axis=-1)
    image = np.concatenate([colour, alpha[..., None]], axis=-1)
    rounded: np.ndarray = np.rint(image).astype(np.uint8)
    return rounded


def tensor(rng: np.random.Generator) -> np.ndarray:
    """A float32 NCHW tensor (1, 3, 8, 12) whose values tell where they came from."""
    n, c, h, w = 1, 3, 8, 12
    index = np.arange(n * c * h * w, dtype=np.float32).reshape(n, c, h, w)
    return index + rng.random((n, c, h, w), dtype=np.float32).round(2) / 10


def blocks(data: np.ndarray, blocksize: int = 2) -> np.ndarray:
    """SpaceToDepth (DCR) of the tensor, so depth-to-space has an input: (1, 12, 4, 6)."""
    n, c, h, w = data.shape
    b = blocksize
    # (n, c, h/b, b, w/b, b) -> (n, b, b, c, h/b, w/b)
    split = data.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return np.ascontiguousarray(split.reshape(n, c * b * b, h // b, w // b))


def stack(rng: np.random.Generator) -> np.ndarray:
    """A (4, 32, 48) uint16 stack: four 'focal planes' of one blurry spot, with noise."""
    y, x = np.mgrid[0:32, 0:48].astype(np.float64)
    planes = []
    for z in range(4):
        sigma = 3 + 2 * abs(z - 1.5)
        spot = 40000 * np.exp(-((x - 24) ** 2 + (y - 16) ** 2) / (2 * sigma**2))
        planes.append(spot + 1000 + rng.normal(0, 100, spot.shape))
    return np.clip(np.rint(planes), 0, 65535).astype(np.uint16)


def theta() -> np.ndarray:
    """(1, 2, 3) float32: rotate 30 degrees and scale by 0.8 about the centre."""
    angle, scale = np.deg2rad(30), 0.8
    cos, sin = np.cos(angle) * scale, np.sin(angle) * scale
    return np.array([[[cos, -sin, 0.0], [sin, cos, 0.0]]], dtype=np.float32)


def grid() -> np.ndarray:
    """(1, 60, 80, 2) float32: theta.npy's sampling grid at half the photo's size, for grid-sample."""
    from geomcli import affine_grid

    return affine_grid(theta(), (1, 3, 60, 80))


def main(folder: str) -> None:
    rng = np.random.default_rng(42)
    t = tensor(rng)
    files = {
        "photo.png": photo(rng),
        "gray16.png": gray16(rng),
        "rgba.png": rgba(rng),
        "tensor.npy": t,
        "blocks.npy": blocks(t),
        "stack.tiff": stack(rng),
        "theta.npy": theta(),
        "grid.npy": grid(),
    }
    for name, data in files.items():
        io.write_array(data, os.path.join(folder, name))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
