"""Shared fixtures: a seeded generator and the dtypes every kernel must take."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

# Every ONNX tensor type, as numpy spells it (bfloat16 through ml_dtypes).
ALL_DTYPES = [
    np.dtype(bool),
    *map(np.dtype, ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]),
    *map(np.dtype, ["float16", "float32", "float64"]),
    np.dtype(ml_dtypes.bfloat16),
    *map(np.dtype, ["complex64", "complex128"]),
    np.dtype("<U4"),
]
FLOAT_DTYPES = [np.dtype("float16"), np.dtype("float32"), np.dtype("float64"), np.dtype(ml_dtypes.bfloat16)]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(42)


def make_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Distinct-ish values of any supported dtype, so misplaced elements show."""
    values = rng.integers(1, 100, size=shape)
    if dtype.kind == "U":
        return values.astype(str).astype(dtype)
    if dtype.kind == "b":
        return values % 2 == 1
    if dtype.kind == "c":
        return (values + 1j * rng.integers(1, 100, size=shape)).astype(dtype)
    return values.astype(dtype)
