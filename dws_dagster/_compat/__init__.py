"""Every use of a library's internals, one module per library (`dagster`, `openlineage`), each
internal behind one small function with its own test in `tests/compat/test_dagster_compat.py` and
`tests/compat/test_openlineage_compat.py`, so a release that moves one breaks one function, loudly.

Import rule: these modules import their library lazily, inside the functions that need it.
"""
