"""Where devagent changes a library's own code at run time, one module per library.

Each module names the library version it was written for (`WRITTEN_FOR`), says what each patch
buys, and keeps its patches behind functions the callers apply where they need them (each applies
once; a wrapper it puts in place keeps the library's own function as `__wrapped__`): importing
this package or any of its modules imports none of the libraries they patch, and nothing of
devagent's (a leaf any layer may use). tests/unit/test_patches.py fails when a library changes
under a patch: the names it replaces, their signatures, the patch taking effect, applying twice.
"""
