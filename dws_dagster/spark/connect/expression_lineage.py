"""The sources of each expression of a Spark Connect plan, found as `spark/plan.py` finds those
of the analyzed plan's: names resolved to the columns of the node's children as Spark's
analyzer resolves them (qualifiers, `df.col` references by plan id, nested fields), stars
expanded, and each expression classified (identity, transformation, aggregation; filter, join,
group-by, sort, window and conditional inputs) by what its functions are to Spark
(`functions`).

`ExpressionLineage` holds what a walk of one plan knows (each column's sources, the dataset's
indirect sources, the inputs read); `relations` walks the plan's nodes with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from dws_dagster.spark.connect import functions
from dws_dagster.spark.connect.column_resolution import (
    Col,
    Scope,
    UnknownNode,
    Wide,
    as_indirect,
    at_level,
    match_name,
    same_name,
)
from dws_dagster.spark.connect.expressions import (
    Alias,
    Attr,
    Call,
    Expr,
    Lit,
    Opaque,
    Over,
    Star,
)
from dws_dagster.spark.connect.server_schemas import ServerSchemas
from dws_dagster.spark.lineage_model import ColumnSource, Sources, stronger


class ExpressionLineage:
    """The lineage one walk of a plan has found so far, and the evaluation of expressions
    against it; `server` answers what the client's plan does not say."""

    def __init__(self, client: Any) -> None:
        self.server = ServerSchemas(client)
        self.keys = itertools.count()
        self.lineage: dict[int, Sources] = {}
        self.dataset: set[ColumnSource] = set()
        self.complete = True
        self.inputs: dict[str, tuple[str | None, list[str]]] = {}
        self.types: dict[str, dict[str, tuple[str, bool]]] = {}
        self.by_plan_id: dict[int, list[Col]] = {}

    # ------------------------------------------------------------ columns

    def new(self, name: str, sources: Iterable[ColumnSource] = (), qualifier=()) -> Col:
        col = Col(next(self.keys), name, tuple(qualifier))
        self.lineage[col.key] = frozenset(sources)
        return col

    def resolve(self, attr: Attr, scope: Scope) -> tuple[Col, tuple[str, ...]] | None:
        """The column `attr` names and the nested fields it reads, as Spark resolves it; None
        for a keyword function no column hides (`current_date`)."""
        if attr.plan_id is not None:
            cols = self.by_plan_id.get(attr.plan_id)
            found = match_name(cols, attr.parts) if cols is not None else None
        else:
            found = match_name(scope.cols, attr.parts) or match_name(scope.fallback, attr.parts)
        if found is None:
            if attr.niladic:
                return None
            raise UnknownNode(f"column {'.'.join(attr.parts)} not found")
        return found

    def star(self, star: Star, scope: Scope) -> tuple[list[Col], Col | None]:
        """The columns a star names, or (no columns, the struct column) for `struct.*`."""
        if star.plan_id is not None:
            cols = self.by_plan_id.get(star.plan_id)
            if cols is None:
                raise UnknownNode("a star over a DataFrame not in the plan")
            return list(cols), None
        if not star.target:
            return list(scope.cols), None
        qualified = [
            c
            for c in scope.cols
            if len(c.qualifier) >= len(star.target)
            and all(
                same_name(a, b)
                for a, b in zip(c.qualifier[-len(star.target) :], star.target, strict=True)
            )
        ]
        if qualified:
            return qualified, None
        col, _ = self.resolve(Attr(star.target), scope) or (None, ())
        if col is None:
            raise UnknownNode("a star over nothing")
        return [], col

    # -------------------------------------------------------- expressions

    def value(self, expr: Expr, scope: Scope, level: str = "IDENTITY") -> set[ColumnSource]:
        """Sources of an expression's value, as `spark/plan.py` finds them in the analyzed one;
        `level` is the strongest direct subtype of the expressions around it."""
        if isinstance(expr, Lit):
            return set()
        if isinstance(expr, Attr):
            hit = self.resolve(expr, scope)
            if hit is None:
                return set()
            col, nested = hit
            reach = stronger(level, "TRANSFORMATION") if nested else level
            return at_level(self.lineage[col.key], reach)
        if isinstance(expr, Alias):
            return self.value(expr.child, scope, level)
        if isinstance(expr, Star):  # inside a function: hash(*), struct(*)
            cols, struct = self.star(expr, scope)
            found: set[ColumnSource] = set()
            for col in [*cols, *([struct] if struct else [])]:
                found |= at_level(self.lineage[col.key], stronger(level, "TRANSFORMATION"))
            return found
        if isinstance(expr, Over):
            return self.window(expr, scope, level)
        if isinstance(expr, Opaque):
            self.complete = False
            return self.all(expr.children, scope, "TRANSFORMATION")
        return self.call(expr, scope, level)

    def call(self, call: Call, scope: Scope, level: str) -> set[ColumnSource]:
        aggregate = (
            call.aggregate if call.aggregate is not None else call.name in functions.AGGREGATES
        )
        if aggregate:
            args = call.args
            if call.name == "count":  # count(*) is count(1) to Spark
                args = tuple(a for a in args if not isinstance(a, Star))
            return self.all(args, scope, "AGGREGATION")
        layout = functions.conditional_layout(call.name, len(call.args))
        if layout is not None:
            conditions, values = layout
            found = self.indirect([call.args[i] for i in conditions], scope, "CONDITIONAL")
            return found | self.all(
                [call.args[i] for i in values], scope, stronger(level, "TRANSFORMATION")
            )
        if call.user_defined or not functions.is_known(call.name):
            self.complete = False  # a function Spark's registry does not have: kind unknown
        return self.all(call.args, scope, stronger(level, "TRANSFORMATION"))

    def window(self, over: Over, scope: Scope, level: str) -> set[ColumnSource]:
        function = over.function
        inner = stronger(level, "TRANSFORMATION")
        if isinstance(function, Call) and function.name in functions.ORDERED_RANKING:
            found = self.all(over.order, scope, inner)  # Spark gives rank() the order as input
        else:
            found = self.value(function, scope, inner)
        return found | self.indirect([*over.partition, *over.order, *over.frame], scope, "WINDOW")

    def all(self, exprs: Iterable[Expr], scope: Scope, level: str) -> set[ColumnSource]:
        found: set[ColumnSource] = set()
        for expr in exprs:
            found |= self.value(expr, scope, level)
        return found

    def indirect(self, exprs: Iterable[Expr], scope: Scope, subtype: str) -> set[ColumnSource]:
        """Columns an expression reads to decide rows or branches: their direct sources become
        INDIRECT `subtype`, whatever function reads them."""
        found: set[ColumnSource] = set()
        for col in self.columns_read(exprs, scope):
            found |= as_indirect(self.lineage[col.key], subtype)
        return found

    def columns_read(self, exprs: Iterable[Expr], scope: Scope) -> Iterator[Col]:
        for expr in exprs:
            if isinstance(expr, Attr):
                hit = self.resolve(expr, scope)
                if hit is not None:
                    yield hit[0]
            elif isinstance(expr, Star):
                cols, struct = self.star(expr, scope)
                yield from cols
                if struct is not None:
                    yield struct
            elif isinstance(expr, Alias):
                yield from self.columns_read([expr.child], scope)
            elif isinstance(expr, Over):
                yield from self.columns_read(
                    [expr.function, *expr.partition, *expr.order, *expr.frame], scope
                )
            elif isinstance(expr, Opaque):
                self.complete = False
                yield from self.columns_read(expr.children, scope)
            elif isinstance(expr, Call):
                args = expr.args
                if expr.name == "count":
                    args = tuple(a for a in args if not isinstance(a, Star))
                yield from self.columns_read(args, scope)

    def to_dataset(self, exprs: Iterable[Expr], scope: Scope, subtype: str) -> None:
        self.dataset |= self.indirect(exprs, scope, subtype)

    def indirect_cols(self, cols: Iterable[Col], subtype: str) -> set[ColumnSource]:
        found: set[ColumnSource] = set()
        for col in cols:
            found |= as_indirect(self.lineage[col.key], subtype)
        return found

    # ------------------------------------------------------------ projections

    def project(self, rel: Any, exprs: Sequence[Expr], scope: Scope) -> list[Col]:
        """The columns of a select list (Project, Aggregate, WithColumns' values)."""
        items: list[list[Col] | Wide] = []
        for expr in exprs:
            if isinstance(expr, Star):
                cols, struct = self.star(expr, scope)
                if struct is None:
                    items.append(cols)
                else:  # struct.*: each field a transformation of the struct
                    sources = at_level(self.lineage[struct.key], "TRANSFORMATION")
                    items.append(Wide(None, sources))
                continue
            if isinstance(expr, Attr):
                hit = self.resolve(expr, scope)
                if hit is not None and not hit[1]:
                    items.append([hit[0]])
                    continue
                if hit is not None:  # st.x: the field, named as the field
                    items.append([self.new(hit[1][-1], self.value(expr, scope))])
                    continue
            generator = expr.child if isinstance(expr, Alias) else expr
            if isinstance(generator, Call) and generator.name in functions.GENERATORS:
                sources = self.all(generator.args, scope, "TRANSFORMATION")
                names = expr.names if isinstance(expr, Alias) else None
                items.append(Wide(names, sources))
                continue
            if isinstance(expr, Alias):
                if len(expr.names) != 1:
                    raise UnknownNode("several names for one value")
                items.append([self.new(expr.names[0], self.value(expr.child, scope))])
                continue
            items.append([self.new("", self.value(expr, scope))])  # named by Spark
        return self._lay_out(rel, items)

    def _lay_out(self, rel: Any, items: list[list[Col] | Wide]) -> list[Col]:
        unnamed = any(
            (isinstance(item, Wide) and item.names is None)
            or (isinstance(item, list) and any(not c.name for c in item))
            for item in items
        )
        if not unnamed:
            return [
                col
                for item in items
                for col in (
                    item
                    if isinstance(item, list)
                    else [self.new(n, item.sources) for n in item.names or ()]
                )
            ]
        names = [f.name for f in self.server.schema(rel).fields]
        widths = [
            len(item) if isinstance(item, list) else None if item.names is None else len(item.names)
            for item in items
        ]
        if widths.count(None) > 1:
            raise UnknownNode("more than one generator or struct star in one select")
        rest = len(names) - sum(w for w in widths if w is not None)
        if rest < 0 or (None not in widths and rest != 0):
            raise UnknownNode("the server's columns differ from the plan's")
        cols: list[Col] = []
        position = 0
        for item, width in zip(items, widths, strict=True):
            count = rest if width is None else width
            given = names[position : position + count]
            position += count
            if isinstance(item, Wide):
                cols.extend(self.new(n, item.sources) for n in given)
                continue
            for col, name in zip(item, given, strict=True):
                if col.name and col.name != name:
                    raise UnknownNode(f"the server names column {name!r}, the walk {col.name!r}")
                cols.append(col if col.name else Col(col.key, name))
        return cols

    def check_names(self, rel: Any, cols: list[Col]) -> list[Col]:
        """`cols` if the server names the node's columns the same, else UnknownNode."""
        names = [f.name for f in self.server.schema(rel).fields]
        if names != [c.name for c in cols]:
            raise UnknownNode("the server's columns differ from the plan's")
        return cols
