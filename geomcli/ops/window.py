"""Where CenterCropPad's window lies on one axis: integer arithmetic only, no numpy, so the
kernels and the numpy-free image path (geomcli.engine.operations) place it by one rule."""

from __future__ import annotations


def center_crop_pad_window(length: int, target: int) -> tuple[slice, slice]:
    """What center_crop_pad keeps of an axis of ``length`` for a ``target`` length, and where it
    goes: (the input's slice, the output's slice), of equal lengths; the rest is padding.

    A crop starts at floor((length - target) / 2); a pad puts the odd extra element at the end.

    >>> center_crop_pad_window(5, 2), center_crop_pad_window(3, 6)
    ((slice(1, 3, None), slice(0, 2, None)), (slice(0, 3, None), slice(1, 4, None)))
    """
    if target <= length:
        start = (length - target) // 2
        return slice(start, start + target), slice(0, target)
    before = (target - length) // 2
    return slice(0, length), slice(before, before + length)
