"""The ONNX operators on arrays: numpy in, numpy out (ml_dtypes only when a bfloat16 is asked for).

Nothing here knows files, layouts, runs or the command line; the only other part of geomcli
imported is :mod:`geomcli.errors`.
"""
