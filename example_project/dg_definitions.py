"""The example's code location as a `dg` project (`[tool.dg]` in pyproject.toml): the
definitions `example_project/defs/` holds, loaded by Dagster's loader for defs folders. The
same definitions as `example_project/definitions.py` builds in Python."""

from pathlib import Path

from dagster import Definitions, definitions, load_from_defs_folder


@definitions
def defs() -> Definitions:
    return load_from_defs_folder(path_within_project=Path(__file__).parent)
