"""The expressions of a Spark Connect plan in the small form column lineage needs.

A Connect client sends expressions unresolved: column names rather than attributes, function
names rather than functions, and SQL text as it was written (`selectExpr`, `expr`, `filter`
with a string). Lineage needs only what decides it: which names an expression reads, through
which function (an aggregate, a conditional, a window), and what it is called. Both the
protobuf expressions (`proto_expressions`) and SQL text (`sql_parser`) become these few node
types, so one evaluator (`expression_lineage`) serves both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Attr:
    """A column by name (`parts`: qualifier, column and nested fields, not yet told apart);
    `plan_id` names the DataFrame it was taken from (`df.col`), if any. `niladic`: a SQL
    keyword function (`current_date`) unless a column has the name."""

    parts: tuple[str, ...]
    plan_id: int | None = None
    niladic: bool = False


@dataclass(frozen=True)
class Lit:
    """A value that reads no column (a literal, a lambda's variable, a parameter)."""


@dataclass(frozen=True)
class Call:
    """A function or operator. `name` is Spark's function name in lower case; names in angle
    brackets are operations every Spark has (operators, casts, field access). `aggregate`
    overrides what the name says (user-defined functions)."""

    name: str
    args: tuple[Expr, ...] = ()
    aggregate: bool | None = None
    user_defined: bool = False


@dataclass(frozen=True)
class Alias:
    child: Expr
    names: tuple[str, ...]


@dataclass(frozen=True)
class Star:
    """`*`, `t.*` or `struct_column.*`; `plan_id` for `df["*"]`."""

    target: tuple[str, ...] = ()
    plan_id: int | None = None


@dataclass(frozen=True)
class Over:
    function: Expr
    partition: tuple[Expr, ...]
    order: tuple[Expr, ...]
    frame: tuple[Expr, ...] = ()


@dataclass(frozen=True)
class Opaque:
    """Something lineage cannot follow (a subquery, a typed Scala aggregate, text that did not
    parse): its `children`, where known, count as transformed, and the lineage is incomplete."""

    why: str
    children: tuple[Expr, ...] = ()


Expr = Attr | Lit | Call | Alias | Star | Over | Opaque

OPERATOR = "<op>"
CAST = "<cast>"
EXTRACT = "<extract>"
LAMBDA = "<lambda>"
ROW = "<row>"


def walk(expr: Expr) -> list[Expr]:
    """`expr` and everything under it."""
    found: list[Expr] = [expr]
    if isinstance(expr, Call):
        children: tuple[Expr, ...] = expr.args
    elif isinstance(expr, Alias):
        children = (expr.child,)
    elif isinstance(expr, Over):
        children = (expr.function, *expr.partition, *expr.order, *expr.frame)
    elif isinstance(expr, Opaque):
        children = expr.children
    else:
        children = ()
    for child in children:
        found.extend(walk(child))
    return found


def split_name(text: str) -> tuple[str, ...]:
    """`a.b`, `` `a.b`.c ``: the parts of a multi-part name (Spark's rules for backticks)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    index = 0
    while index < len(text):
        char = text[index]
        if char == "`":
            if quoted and index + 1 < len(text) and text[index + 1] == "`":
                current.append("`")
                index += 2
                continue
            quoted = not quoted
        elif char == "." and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    return tuple(parts)
