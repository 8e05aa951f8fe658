"""Each operator in its defining few lines, as the spec and ``shared/spec/NOTES.md`` write it:
readable, slow, and the oracle the tests hold the fast kernels to.

Nothing here validates its arguments: the public kernels do that first.
"""

