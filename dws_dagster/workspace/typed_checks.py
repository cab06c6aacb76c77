"""Checks compiled from TypedDict declarations, so that each file format is declared once and
both its fast acceptance and the naming of what is wrong come from that one declaration.

Every file and row dws_dagster reads is untrusted, and opening a large store checks hundreds of
thousands of records: the check of a good value must cost about what a hand-written loop
costs, build nothing and import nothing heavy. So each declaration is compiled once (on its
first use: `formats.Format`) into plain Python source, as `dataclasses` does for `__init__`:
one flat function per TypedDict or container, with every scalar test inlined and whole lists
and mappings of scalars tested at C speed (`set(map(type, ...))`, `all(map(...))`). The
function returns None for a good value and, for a bad one, where the first problem is and what
it is; only then does it look item by item. Nothing is copied: callers go on with the value
they parsed.

What a declaration may use:

- `str`, `int`, `bool` (exactly those types: JSON has no subclasses of them), `Any`;
- `Literal[...]` of values of one type; `X | None`;
- `list[X]`, `dict[K, V]` (K a scalar); `dict[str, Any]` is a JSON object, checked only as
  a dict (a JSON parser makes nothing but string keys);
- a TypedDict (unknown keys are allowed: a newer writer's additions survive), with
  `NotRequired` fields;
- `Annotated[X, marker]` with the markers below.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from types import UnionType
from typing import Annotated, Any, Literal, NotRequired, Required, Union, get_args, get_origin

#: Steps from the checked value to the bad part (`("refs", "a/b", "record", "version")`).
Location = tuple[str | int, ...]
#: Where the first problem is and what it is.
Problem = tuple[Location, str]


class Rule:
    """`Annotated[str, Rule(test, explain)]`: a value of that type for which `test` is true.
    `explain(value)` says what is wrong with one that is not. `known` may hold values already
    found good, so a mapping repeating them is accepted without a call per key."""

    __slots__ = ("explain", "known", "test")

    def __init__(
        self,
        test: Callable[[Any], Any],
        explain: Callable[[Any], str],
        known: set[Any] | frozenset[Any] | None = None,
    ) -> None:
        self.test, self.explain, self.known = test, explain, known

    def __repr__(self) -> str:
        return f"Rule({self.test!r})"


class AtLeast:
    """`Annotated[int, AtLeast(n)]`: an integer not below `n`."""

    __slots__ = ("least",)

    def __init__(self, least: int) -> None:
        self.least = least

    def __repr__(self) -> str:
        return f"AtLeast({self.least})"


class Items:
    """`Annotated[list[X], Items(n)]`: a list of exactly `n` items (JSON has no tuples)."""

    __slots__ = ("count",)

    def __init__(self, count: int) -> None:
        self.count = count

    def __repr__(self) -> str:
        return f"Items({self.count})"


CheckFunction = Callable[[Any], Problem | None]

_TYPE_NAMES = {
    str: "a valid string",
    int: "a valid integer",
    bool: "a valid boolean",
    dict: "a valid dictionary",
    list: "a valid list",
}
_MISSING = object()


def compile_check(declaration: Any) -> CheckFunction:
    """The check of `declaration`: None for a good value, else its first `Problem`."""
    return _Compiler().root(declaration)


def _should_be(kind: type) -> str:
    return f"Input should be {_TYPE_NAMES[kind]}"


class _Leaf:
    """A scalar test, inlined where it is used: `test` is an expression of `{v}` (None:
    anything goes), `explain` the name of a function saying what is wrong. `types`: the types
    its values have, when the test is of their type only (for `set(map(type, ...))`); `known`:
    the name of a collection of values known good (a `Rule`'s)."""

    __slots__ = ("explain", "known", "test", "types")

    def __init__(
        self,
        test: str | None,
        explain: str,
        types: frozenset[type] | None = None,
        known: str | None = None,
    ) -> None:
        self.test, self.explain, self.types, self.known = test, explain, types, known


class _Call:
    """A container or TypedDict: the name of the function checking it. `inline`: for a
    TypedDict of scalars, an expression of `{v}` true when it is good, so that a list of them
    is checked without a call per item."""

    __slots__ = ("function", "inline", "nullable")

    def __init__(self, function: str, nullable: bool = False, inline: str | None = None) -> None:
        self.function, self.nullable, self.inline = function, nullable, inline


_Node = _Leaf | _Call


class _Compiler:
    """Writes the source of the functions of one declaration, then runs it once."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"MISSING": _MISSING}
        self.source: list[str] = []
        self.typed_dicts: dict[Any, _Call] = {}
        self.count = 0

    def root(self, declaration: Any) -> CheckFunction:
        node = self.node(declaration)
        if isinstance(node, _Call) and not node.nullable:
            name = node.function
        else:
            name = self.function("value")
            lines = self.check_lines(node, "v", None, 4)
            self.source += [f"def {name}(v):", *lines, "    return None"]
        exec(compile("\n".join(self.source), f"<check of {declaration!r}>", "exec"), self.namespace)
        check: CheckFunction = self.namespace[name]
        return check

    # ------------------------------------------------------------------ naming

    def name(self, value: Any, hint: str) -> str:
        """`value` put in the generated code's namespace, under a fresh name."""
        self.count += 1
        name = f"_{hint}{self.count}"
        self.namespace[name] = value
        return name

    def function(self, hint: str) -> str:
        """A fresh name for a generated function."""
        self.count += 1
        return f"check_{hint}_{self.count}"

    def predicate(self, leaf: _Leaf) -> Callable[[Any], Any]:
        """`leaf`'s test as a function."""
        if leaf.test is None:
            return lambda v: True
        test: Callable[[Any], Any] = eval(f"lambda v: {leaf.test.format(v='v')}", self.namespace)
        return test

    def explainer(self, explain: Callable[[Any], str]) -> str:
        return self.name(explain, "explain")

    # ------------------------------------------------------------------ nodes

    def node(self, tp: Any) -> _Node:
        origin, args = get_origin(tp), get_args(tp)
        if tp is Any:
            return _Leaf(None, self.explainer(lambda v: ""))
        if tp in (str, int, bool):
            return self.type_leaf(tp)
        if origin is Literal:
            return self.literal(args)
        if origin is Annotated:
            return self.annotated(args[0], args[1:])
        if origin in (Union, UnionType):
            return self.optional(tp, args)
        if origin is list:
            return self.sequence(args[0])
        if origin is dict:
            if args == (str, Any):  # a JSON object
                return self.type_leaf(dict)
            return self.mapping(*args)
        if typing.is_typeddict(tp):
            return self.typed_dict(tp)
        raise TypeError(f"cannot check {tp!r}: not a form typed_checks knows")

    def type_leaf(self, kind: type) -> _Leaf:
        return _Leaf(
            f"type({{v}}) is {self.name(kind, 'type')}",
            self.explainer(lambda v: _should_be(kind)),
            frozenset({kind}),
        )

    def literal(self, values: tuple[Any, ...]) -> _Leaf:
        kinds = {type(value) for value in values}
        if len(kinds) != 1:
            raise TypeError(f"Literal{list(values)}: values of one type only")
        shown = [repr(value) for value in values]
        said = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
        return _Leaf(
            f"(type({{v}}) is {self.name(kinds.pop(), 'type')} and {{v}} in "
            f"{self.name(frozenset(values), 'values')})",
            self.explainer(lambda v: f"Input should be {said}"),
        )

    def annotated(self, base: Any, markers: tuple[Any, ...]) -> _Node:
        """`base` with one marker: `Items` on a list, `Rule` on str or int, `AtLeast` on int."""
        if len(markers) != 1:
            raise TypeError(f"Annotated[{base!r}, ...]: one marker")
        (marker,) = markers
        if isinstance(marker, Items) and get_origin(base) is list:
            return self.sequence(get_args(base)[0], count=marker.count)
        if isinstance(marker, AtLeast) and base is int:
            least = marker.least
            test = f"{{v}} >= {least}"
            explain = lambda v: f"Input should be greater than or equal to {least}"  # noqa: E731
            known = None
        elif isinstance(marker, Rule) and base in (str, int):
            test, explain = f"{self.name(marker.test, 'rule')}({{v}})", marker.explain
            known = None if marker.known is None else self.name(marker.known, "known")
        else:
            raise TypeError(f"Annotated[{base!r}, {marker!r}]: not a marker of that type")
        typed = self.type_leaf(base)
        return _Leaf(
            f"({typed.test} and {test})",
            self.explainer(lambda v: explain(v) if type(v) is base else _should_be(base)),
            known=known,
        )

    def optional(self, tp: Any, args: tuple[Any, ...]) -> _Node:
        others = [arg for arg in args if arg is not type(None)]
        if len(others) != 1 or len(args) != 2:
            raise TypeError(f"{tp!r}: only `X | None` is supported")
        node = self.node(others[0])
        if isinstance(node, _Call):
            return _Call(node.function, nullable=True, inline=node.inline)
        if node.test is None:
            return node
        return _Leaf(
            f"({{v}} is None or {node.test})",
            node.explain,
            None if node.types is None else node.types | {type(None)},
        )

    # ------------------------------------------------------------------ functions

    def check_lines(self, node: _Node, var: str, step: str | None, indent: int) -> list[str]:
        """Lines that return the problem of `var`, found at `step` (a source expression; None:
        the value itself)."""
        pad = " " * indent
        at = "()" if step is None else f"({step},)"
        if isinstance(node, _Leaf):
            if node.test is None:
                return []
            return [
                f"{pad}if not {node.test.format(v=var)}:",
                f"{pad}    return ({at}, {node.explain}({var}))",
            ]
        lines = [
            f"{pad}p = {node.function}({var})",
            f"{pad}if p is not None:",
            f"{pad}    return ({at} + p[0], p[1])" if step is not None else f"{pad}    return p",
        ]
        if node.nullable:
            return [f"{pad}if {var} is not None:", *["    " + line for line in lines]]
        return lines

    def all_good(self, node: _Node, values: str) -> str | None:
        """An expression true when every item of `values` passes `node`, with no loop in Python
        (None: every item does; "False": there is none, loop)."""
        if isinstance(node, _Call):
            if node.nullable or node.inline is not None:
                return "False"  # an inline check is looped over (`fast_lines`): no call per item
            return f"not any(map({node.function}, {values}))"  # a problem is true, None false
        if node.test is None:
            return None
        if node.types is not None:
            return f"set(map(type, {values})) <= {self.name(node.types, 'types')}"
        every = f"all(map({self.name(self.predicate(node), 'test')}, {values}))"
        return every if node.known is None else f"({node.known}.issuperset({values}) or {every})"

    def fast_lines(self, node: _Node, values: str, pad: str) -> list[str]:
        """Lines returning None when every item of `values` passes `node` (the good case,
        looked at as a whole); after them, the caller looks item by item."""
        if isinstance(node, _Call) and node.inline is not None and not node.nullable:
            return [
                f"{pad}for x in {values}:",
                f"{pad}    if not {node.inline.format(v='x')}:",
                f"{pad}        break",
                f"{pad}else:",
                f"{pad}    return None",
            ]
        every = self.all_good(node, values)
        return [f"{pad}if {'True' if every is None else every}:", f"{pad}    return None"]

    def start(self, name: str, kind: type) -> list[str]:
        return [
            f"def {name}(v):",
            f"    if type(v) is not {kind.__name__}:",
            f"        return ((), {_should_be(kind)!r})",
        ]

    def sequence(self, item: Any, count: int | None = None) -> _Call:
        node = self.node(item)
        name = self.function("list")
        lines = self.start(name, list)
        if count is not None:
            lines += [
                f"    if len(v) != {count}:",
                f"        return ((), f'List should have {count} items, not {{len(v)}}')",
            ]
        lines += [
            *self.fast_lines(node, "v", "    "),
            "    for i, x in enumerate(v):",
            *self.check_lines(node, "x", "i", 8),
        ]
        self.source += [*lines, "    return None"]
        return _Call(name)

    def mapping(self, key: Any, value: Any) -> _Call:
        key_node, value_node = self.node(key), self.node(value)
        if not isinstance(key_node, _Leaf):
            raise TypeError(f"dict[{key!r}, ...]: keys must be scalars")
        name = self.function("dict")
        lines = self.start(name, dict)
        keys_good = self.all_good(key_node, "v")
        if keys_good is None:
            lines += self.fast_lines(value_node, "v.values()", "    ")
        else:
            lines += [f"    if {keys_good}:", *self.fast_lines(value_node, "v.values()", " " * 8)]
        lines += [
            "    for k, x in v.items():",
            *self.check_lines(key_node, "k", "k", 8),
            *self.check_lines(value_node, "x", "k", 8),
        ]
        self.source += [*lines, "    return None"]
        return _Call(name)

    def typed_dict(self, tp: Any) -> _Call:
        if tp in self.typed_dicts:
            return self.typed_dicts[tp]
        name = self.function(tp.__name__)
        self.typed_dicts[tp] = _Call(name)  # what a TypedDict holding itself refers to
        lines = [*self.start(name, dict), "    get = v.get"]
        inline: list[str] | None = ["type({v}) is dict"]
        for field, hint in typing.get_type_hints(tp, include_extras=True).items():
            # Not `__required_keys__`: under `from __future__ import annotations` it cannot see
            # a `NotRequired` written as text (before Python 3.12).
            qualifier = get_origin(hint)
            required = qualifier is Required or (tp.__total__ and qualifier is not NotRequired)
            if qualifier in (Required, NotRequired):
                (hint,) = get_args(hint)
            node = self.node(hint)
            checks = self.check_lines(node, "x", repr(field), 4)
            if inline is not None and isinstance(node, _Leaf):
                got = f"(t := {{v}}.get({field!r}, MISSING))"
                test = None if node.test is None else node.test.format(v="t")
                if required:
                    inline.append(
                        f"{got} is not MISSING" + ("" if test is None else f" and {test}")
                    )
                elif test is not None:
                    inline.append(f"({got} is MISSING or {test})")
            else:
                inline = None
            if required:
                lines += [
                    f"    x = get({field!r}, MISSING)",
                    "    if x is MISSING:",
                    f"        return (({field!r},), 'Field required')",
                    *checks,
                ]
            elif checks:
                lines += [
                    f"    x = get({field!r}, MISSING)",
                    "    if x is not MISSING:",
                    *["    " + line for line in checks],
                ]
        self.source += [*lines, "    return None"]
        call = _Call(name, inline=None if inline is None else f"({' and '.join(inline)})")
        self.typed_dicts[tp] = call
        return call
