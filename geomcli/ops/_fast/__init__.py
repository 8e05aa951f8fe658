"""Compiled speed-ups, each held bit for bit to :mod:`geomcli.ops.reference` by the tests.

Placeholder: the figures that justify compiled code go here once measured.
"""
