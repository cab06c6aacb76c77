"""Damage to parsed JSON for the fuzz tests: values of the wrong kind (names that would lead
outside the workspace, wrong types, nesting), every path into a parsed file, and a copy of it
with one path replaced, deleted or nested (`mutated_json` draws one)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

#: Stands for the absolute path of the sentinel folder beside the workspace in damaged files.
ABSOLUTE = "/@sentinels@"


def json_values(depth: int = 3) -> st.SearchStrategy[Any]:
    leaves = (
        st.none()
        | st.booleans()
        | st.integers(-5, 2**40)
        | st.sampled_from(
            [
                "",
                "..",
                "../../outside",
                ABSOLUTE,
                "a/../b",
                "results/exp",
                "v1",
                "0" * 32,
                "ok",
                "script",
                "\x00",
                "snapshots/../..",
                "x" * 300,
            ]
        )
    )
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "ref",
                        "version",
                        "hash",
                        "tags",
                        "folder",
                        "record",
                        "op",
                        "position",
                        "segment",
                        "offset",
                        "format",
                        "refs",
                        "x",
                        "step",
                        "name",
                        "inputs",
                        "provenance",
                        "parameters",
                        "metrics",
                        "status",
                    ]
                ),
                inner,
                max_size=3,
            )
        ),
        max_leaves=6,
    )


def paths_in(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths_in(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:4]):
            found += paths_in(item, (*prefix, index))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any, action: str) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(value) if isinstance(value, dict) else list(value)
    if rest:
        copy[head] = replaced(value[head], rest, new, action)
    elif action == "delete":
        del copy[head]
    elif action == "nest":
        copy[head] = [value[head]]
    else:
        copy[head] = new
    return copy


def mutated_json(draw: st.DrawFn, parsed: Any) -> Any:
    """`parsed` with one path replaced by another JSON value, deleted or nested in a list."""
    path = draw(st.sampled_from(paths_in(parsed)))
    action = draw(st.sampled_from(["replace", "delete", "nest"]) if path else st.just("replace"))
    return replaced(parsed, path, draw(json_values()), action)
