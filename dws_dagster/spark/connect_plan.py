"""Column-level lineage of a Spark Connect DataFrame, from the plan its client sends.

A Connect session has no analyzed plan in this process, and the protocol returns none: its
`AnalyzePlan` answers with schemas and explain text. What the client does have is its own plan
(`df._plan`, the `spark.connect.Relation` it sends): unresolved, with names where the analyzed
plan has attributes. This module walks that plan bottom-up and does for each node what Spark's
analyzer does to it, as far as lineage depends on it: it resolves names to the columns of the
node's children (qualifiers, `df.col` references by plan id, nested fields), expands stars,
lays out join outputs (`USING` keys included), unions by position or by name, and classifies
each expression the way `spark/plan.py` classifies the analyzed one (identity, transformation,
aggregation; filter, join, group-by, sort, window and conditional inputs), so that the same
plan gives the same lineage on either kind of session.

The server is asked only what the client's plan does not say, by `AnalyzePlan` schema
requests on sub-plans: the columns of leaves (a file read's names and types; these requests
go in parallel), the names Spark makes up for unnamed expressions, stars over structs,
generators and pivots, and the types either side of a set operation (Spark casts a side whose
type differs). The root's schema is the DataFrame's own, kept by the client. A node whose
columns the server names differently from the walk is not trusted: its columns get no sources.
A node the walk does not know (a pandas UDF over partitions, SQL text as a relation, a table)
is treated as `spark/plan.py` treats one: its columns carry no sources and the lineage is
incomplete, never guessed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NumericType,
    ShortType,
    StringType,
    StructType,
)

from dws_dagster.spark import connect_functions as functions
from dws_dagster.spark.connect_expressions import (
    Alias,
    Attr,
    Call,
    Expr,
    Lit,
    Opaque,
    Over,
    Star,
    from_proto,
    split_name,
)
from dws_dagster.spark.plan import (
    ColumnSource,
    LineageKind,
    PlanInput,
    PlanLineage,
    Sources,
    client_path,
    format_name,
    repeated,
    stronger,
    tidy,
)

#: The result types Spark's PivotFirst aggregate handles (its layout of a pivot).
_PIVOT_FIRST_TYPES = (
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    ByteType,
    BooleanType,
    DecimalType,
)

#: Parallel schema requests for the leaves of one plan (the server analyzes them at once).
_SCHEMA_WORKERS = 4


@dataclass(frozen=True)
class _Col:
    """One output column of a node: `key` links it to its sources (as an `exprId` does in the
    analyzed plan); `qualifier` is the alias or table name it may be named through."""

    key: int
    name: str
    qualifier: tuple[str, ...] = ()


@dataclass
class _Out:
    """A node's columns, and those below it that a Sort or Filter above may still name (Spark
    resolves such a name through the projection under it)."""

    cols: list[_Col]
    below: list[_Col] = field(default_factory=list)


@dataclass
class _Scope:
    cols: list[_Col]
    fallback: list[_Col] = field(default_factory=list)


class _Unknown(Exception):
    """A node the walk cannot follow: its columns get no sources, the lineage is incomplete."""


def _same(a: str, b: str) -> bool:
    return a.lower() == b.lower()  # Spark's default resolver: names are case-insensitive


def _at_level(sources: Iterable[ColumnSource], level: str) -> set[ColumnSource]:
    """`sources` read through an expression of strength `level`: direct ones weaker than it
    take it (a cast of an identity is a transformation), indirect ones stay."""
    found: set[ColumnSource] = set()
    for source in sources:
        if source.kind is LineageKind.DIRECT and stronger(source.subtype, level) != source.subtype:
            source = ColumnSource(source.path, source.column, source.kind, level)
        found.add(source)
    return found


def _as_indirect(sources: Iterable[ColumnSource], subtype: str) -> set[ColumnSource]:
    return {
        ColumnSource(s.path, s.column, LineageKind.INDIRECT, subtype)
        if s.kind is LineageKind.DIRECT
        else s
        for s in sources
    }


class _Walker:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.keys = itertools.count()
        self.lineage: dict[int, Sources] = {}
        self.dataset: set[ColumnSource] = set()
        self.complete = True
        self.inputs: dict[str, tuple[str | None, list[str]]] = {}
        self.types: dict[str, dict[str, tuple[str, bool]]] = {}
        self.by_plan_id: dict[int, list[_Col]] = {}
        self.schemas: dict[bytes, StructType | None] = {}

    # ------------------------------------------------------------------ server

    def key(self, rel: Any) -> bytes:
        return bytes(rel.SerializeToString(deterministic=True))

    def _ask(self, rel: Any) -> StructType | None:
        from pyspark.sql.connect.proto import base_pb2

        plan = base_pb2.Plan()
        plan.root.CopyFrom(rel)
        try:
            schema = self.client.schema(plan)
        except Exception:  # a part of the plan the server does not analyze on its own
            return None
        return schema if isinstance(schema, StructType) else None

    def prefetch(self, rels: Sequence[Any]) -> None:
        """Schemas of `rels` in parallel requests (those not asked yet)."""
        wanted = {}
        for rel in rels:
            key = self.key(rel)
            if key not in self.schemas:
                wanted[key] = rel
        if len(wanted) == 1:
            ((key, rel),) = wanted.items()
            self.schemas[key] = self._ask(rel)
        elif wanted:
            with ThreadPoolExecutor(min(_SCHEMA_WORKERS, len(wanted))) as pool:
                for key, schema in zip(wanted, pool.map(self._ask, wanted.values()), strict=True):
                    self.schemas[key] = schema

    def schema(self, rel: Any) -> StructType:
        key = self.key(rel)
        if key not in self.schemas:
            self.schemas[key] = self._ask(rel)
        schema = self.schemas[key]
        if schema is None:
            raise _Unknown("the server gave no schema for a part of the plan")
        return schema

    # ------------------------------------------------------------ columns

    def new(self, name: str, sources: Iterable[ColumnSource] = (), qualifier=()) -> _Col:
        col = _Col(next(self.keys), name, tuple(qualifier))
        self.lineage[col.key] = frozenset(sources)
        return col

    def resolve(self, attr: Attr, scope: _Scope) -> tuple[_Col, tuple[str, ...]] | None:
        """The column `attr` names and the nested fields it reads, as Spark resolves it; None
        for a keyword function no column hides (`current_date`)."""
        if attr.plan_id is not None:
            cols = self.by_plan_id.get(attr.plan_id)
            found = _match(cols, attr.parts) if cols is not None else None
        else:
            found = _match(scope.cols, attr.parts) or _match(scope.fallback, attr.parts)
        if found is None:
            if attr.niladic:
                return None
            raise _Unknown(f"column {'.'.join(attr.parts)} not found")
        return found

    def star(self, star: Star, scope: _Scope) -> tuple[list[_Col], _Col | None]:
        """The columns a star names, or (no columns, the struct column) for `struct.*`."""
        if star.plan_id is not None:
            cols = self.by_plan_id.get(star.plan_id)
            if cols is None:
                raise _Unknown("a star over a DataFrame not in the plan")
            return list(cols), None
        if not star.target:
            return list(scope.cols), None
        qualified = [
            c
            for c in scope.cols
            if len(c.qualifier) >= len(star.target)
            and all(
                _same(a, b)
                for a, b in zip(c.qualifier[-len(star.target) :], star.target, strict=True)
            )
        ]
        if qualified:
            return qualified, None
        col, _ = self.resolve(Attr(star.target), scope) or (None, ())
        if col is None:
            raise _Unknown("a star over nothing")
        return [], col

    # -------------------------------------------------------- expressions

    def value(self, expr: Expr, scope: _Scope, level: str = "IDENTITY") -> set[ColumnSource]:
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
            return _at_level(self.lineage[col.key], reach)
        if isinstance(expr, Alias):
            return self.value(expr.child, scope, level)
        if isinstance(expr, Star):  # inside a function: hash(*), struct(*)
            cols, struct = self.star(expr, scope)
            found: set[ColumnSource] = set()
            for col in [*cols, *([struct] if struct else [])]:
                found |= _at_level(self.lineage[col.key], stronger(level, "TRANSFORMATION"))
            return found
        if isinstance(expr, Over):
            return self.window(expr, scope, level)
        if isinstance(expr, Opaque):
            self.complete = False
            return self.all(expr.children, scope, "TRANSFORMATION")
        return self.call(expr, scope, level)

    def call(self, call: Call, scope: _Scope, level: str) -> set[ColumnSource]:
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

    def window(self, over: Over, scope: _Scope, level: str) -> set[ColumnSource]:
        function = over.function
        inner = stronger(level, "TRANSFORMATION")
        if isinstance(function, Call) and function.name in functions.ORDERED_RANKING:
            found = self.all(over.order, scope, inner)  # Spark gives rank() the order as input
        else:
            found = self.value(function, scope, inner)
        return found | self.indirect([*over.partition, *over.order, *over.frame], scope, "WINDOW")

    def all(self, exprs: Iterable[Expr], scope: _Scope, level: str) -> set[ColumnSource]:
        found: set[ColumnSource] = set()
        for expr in exprs:
            found |= self.value(expr, scope, level)
        return found

    def indirect(self, exprs: Iterable[Expr], scope: _Scope, subtype: str) -> set[ColumnSource]:
        """Columns an expression reads to decide rows or branches: their direct sources become
        INDIRECT `subtype`, whatever function reads them."""
        found: set[ColumnSource] = set()
        for col in self.columns_read(exprs, scope):
            found |= _as_indirect(self.lineage[col.key], subtype)
        return found

    def columns_read(self, exprs: Iterable[Expr], scope: _Scope) -> Iterator[_Col]:
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

    def to_dataset(self, exprs: Iterable[Expr], scope: _Scope, subtype: str) -> None:
        self.dataset |= self.indirect(exprs, scope, subtype)

    # ------------------------------------------------------------ projections

    def project(self, rel: Any, exprs: Sequence[Expr], scope: _Scope) -> list[_Col]:
        """The columns of a select list (Project, Aggregate, WithColumns' values)."""
        items: list[list[_Col] | _Wide] = []
        for expr in exprs:
            if isinstance(expr, Star):
                cols, struct = self.star(expr, scope)
                if struct is None:
                    items.append(cols)
                else:  # struct.*: each field a transformation of the struct
                    sources = _at_level(self.lineage[struct.key], "TRANSFORMATION")
                    items.append(_Wide(None, sources))
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
                items.append(_Wide(names, sources))
                continue
            if isinstance(expr, Alias):
                if len(expr.names) != 1:
                    raise _Unknown("several names for one value")
                items.append([self.new(expr.names[0], self.value(expr.child, scope))])
                continue
            items.append([self.new("", self.value(expr, scope))])  # named by Spark
        return self._lay_out(rel, items)

    def _lay_out(self, rel: Any, items: list[list[_Col] | _Wide]) -> list[_Col]:
        unnamed = any(
            (isinstance(item, _Wide) and item.names is None)
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
        names = [f.name for f in self.schema(rel).fields]
        widths = [
            len(item) if isinstance(item, list) else None if item.names is None else len(item.names)
            for item in items
        ]
        if widths.count(None) > 1:
            raise _Unknown("more than one generator or struct star in one select")
        rest = len(names) - sum(w for w in widths if w is not None)
        if rest < 0 or (None not in widths and rest != 0):
            raise _Unknown("the server's columns differ from the plan's")
        cols: list[_Col] = []
        position = 0
        for item, width in zip(items, widths, strict=True):
            count = rest if width is None else width
            given = names[position : position + count]
            position += count
            if isinstance(item, _Wide):
                cols.extend(self.new(n, item.sources) for n in given)
                continue
            for col, name in zip(item, given, strict=True):
                if col.name and col.name != name:
                    raise _Unknown(f"the server names column {name!r}, the walk {col.name!r}")
                cols.append(col if col.name else _Col(col.key, name))
        return cols

    def check_names(self, rel: Any, cols: list[_Col]) -> list[_Col]:
        """`cols` if the server names the node's columns the same, else _Unknown."""
        names = [f.name for f in self.schema(rel).fields]
        if names != [c.name for c in cols]:
            raise _Unknown("the server's columns differ from the plan's")
        return cols

    # -------------------------------------------------------------- relations

    def visit(self, rel: Any) -> _Out:
        kind = rel.WhichOneof("rel_type")
        handler = getattr(self, f"_rel_{kind}", None)
        try:
            if handler is None:
                for child in _child_relations(rel):
                    self.visit(child)
                raise _Unknown(f"a {kind} node")
            out = handler(getattr(rel, kind), rel)
        except Exception:  # _Unknown, or a plan shape this walk did not expect
            out = self._unknown(rel)
        if rel.HasField("common") and rel.common.HasField("plan_id"):
            self.by_plan_id[rel.common.plan_id] = out.cols
        return out

    def _unknown(self, rel: Any) -> _Out:
        """The conservative answer: the node's columns, from the server, without sources."""
        self.complete = False
        try:
            schema = self.schema(rel)
        except _Unknown:
            return _Out([])
        return _Out([self.new(f.name) for f in schema.fields])

    def _pass(self, msg: Any, rel: Any) -> _Out:
        return self.visit(msg.input)

    # As in spark/plan.py: these keep their child's columns and decide no rows by value
    # (a repartition's expressions only place rows; a hint's parameters are names).
    _rel_limit = _rel_offset = _rel_tail = _rel_sample = _rel_repartition = _pass
    _rel_repartition_by_expression = _rel_hint = _rel_with_watermark = _pass
    _rel_collect_metrics = _pass

    def _rel_subquery_alias(self, msg: Any, rel: Any) -> _Out:
        child = self.visit(msg.input)
        qualifier = (*msg.qualifier, msg.alias)
        return _Out([_Col(c.key, c.name, qualifier) for c in child.cols], child.below)

    def _rel_read(self, msg: Any, rel: Any) -> _Out:
        schema = self.schema(rel)
        if msg.WhichOneof("read_type") != "data_source" or msg.is_streaming:
            self.complete = False  # a table or a stream: no path to report
            qualifier = (
                split_name(msg.named_table.unparsed_identifier)
                if msg.WhichOneof("read_type") == "named_table"
                else ()
            )
            return _Out([self.new(f.name, qualifier=qualifier) for f in schema.fields])
        source = msg.data_source
        raw = list(source.paths) or ([source.options["path"]] if "path" in source.options else [])
        paths = [client_path(p) for p in raw]
        if not paths:  # JDBC and other sources without files
            self.complete = False
        fmt = format_name(source.format)
        cols = []
        for f in schema.fields:
            sources = [ColumnSource(p, f.name, LineageKind.DIRECT, "IDENTITY") for p in paths]
            cols.append(self.new(f.name, sources))
        for path in paths:
            names = self.inputs.setdefault(path, (fmt, []))[1]
            names.extend(f.name for f in schema.fields if f.name not in names)
            known = self.types.setdefault(path, {})
            for f in schema.fields:
                known.setdefault(f.name, (f.dataType.simpleString(), f.nullable))
        return _Out(cols)

    def _leaf(self, msg: Any, rel: Any) -> _Out:
        return _Out([self.new(f.name) for f in self.schema(rel).fields])

    _rel_local_relation = _rel_cached_local_relation = _rel_chunked_cached_local_relation = _leaf

    def _rel_range(self, msg: Any, rel: Any) -> _Out:
        return _Out([self.new("id")])

    def _rel_with_relations(self, msg: Any, rel: Any) -> _Out:
        for reference in msg.references:  # subqueries' plans: their inputs are inputs
            self.visit(reference)
        self.complete = False
        return self.visit(msg.root)

    def _rel_project(self, msg: Any, rel: Any) -> _Out:
        child = self.visit(msg.input) if msg.HasField("input") else _Out([])
        scope = _Scope(child.cols, child.below)
        cols = self.project(rel, [from_proto(e) for e in msg.expressions], scope)
        return _Out(cols, [*child.cols, *child.below])

    def _rel_filter(self, msg: Any, rel: Any) -> _Out:
        child = self.visit(msg.input)
        self.to_dataset([from_proto(msg.condition)], _Scope(child.cols, child.below), "FILTER")
        return child

    def _rel_sort(self, msg: Any, rel: Any) -> _Out:
        child = self.visit(msg.input)
        scope = _Scope(child.cols, child.below)
        self.to_dataset([from_proto(e) for e in msg.order], scope, "SORT")
        return child

    def _rel_deduplicate(self, msg: Any, rel: Any) -> _Out:
        child = self.visit(msg.input)
        if msg.all_columns_as_keys or not msg.column_names:
            keys = list(child.cols)
        else:
            keys = [c for c in child.cols if any(_same(c.name, n) for n in msg.column_names)]
        self.dataset |= self._indirect_cols(keys, "GROUP_BY")
        return child

    def _indirect_cols(self, cols: Iterable[_Col], subtype: str) -> set[ColumnSource]:
        found: set[ColumnSource] = set()
        for col in cols:
            found |= _as_indirect(self.lineage[col.key], subtype)
        return found

    def _rel_aggregate(self, msg: Any, rel: Any) -> _Out:
        from pyspark.sql.connect.proto import relations_pb2

        child = self.visit(msg.input)
        scope = _Scope(child.cols)
        group = [from_proto(e) for e in msg.grouping_expressions]
        sets = [from_proto(e) for s in msg.grouping_sets for e in s.grouping_set]
        aggregates = [from_proto(e) for e in msg.aggregate_expressions]
        self.to_dataset([*group, *sets], scope, "GROUP_BY")
        if msg.group_type == relations_pb2.Aggregate.GroupType.GROUP_TYPE_PIVOT:
            return _Out(self._pivot(rel, from_proto(msg.pivot.col), group, aggregates, scope))
        return _Out(self.project(rel, [*group, *aggregates], scope))

    def _pivot(
        self, rel: Any, pivot: Expr, group: list[Expr], aggregates: list[Expr], scope: _Scope
    ) -> list[_Col]:
        """Spark's two layouts of a pivot: with aggregates of simple types (numbers, booleans),
        one aggregate over group and pivot column, then each value's column picked out of it
        (the pivot column is aggregated and grouped by); otherwise one aggregate per value of
        `if(pivot = value, x, null)` (the pivot column decides the branch)."""
        grouped = self.project(rel, group, scope) if group else []
        fields = self.schema(rel).fields
        if [c.name for c in grouped] != [f.name for f in fields[: len(grouped)]]:
            raise _Unknown("a pivot's columns differ from the plan's")
        values = fields[len(grouped) :]
        if not aggregates or len(values) % len(aggregates):
            raise _Unknown("a pivot's columns differ from its aggregates")
        if all(isinstance(f.dataType, _PIVOT_FIRST_TYPES) for f in values):
            self.to_dataset([pivot], scope, "GROUP_BY")
            extra = self.value(pivot, scope, "AGGREGATION")
        else:
            extra = self.indirect([pivot], scope, "CONDITIONAL")
        return [
            *grouped,
            *(
                self.new(f.name, self.value(aggregates[i % len(aggregates)], scope) | extra)
                for i, f in enumerate(values)
            ),
        ]

    def _rel_with_columns(self, msg: Any, rel: Any) -> _Out:
        child = self.visit(msg.input)
        scope = _Scope(child.cols)
        values: list[tuple[str, _Col]] = []
        for alias in msg.aliases:
            if len(alias.name) != 1:
                raise _Unknown("withColumns with several names for one value")
            name = alias.name[0]
            values.append((name, self.new(name, self.value(from_proto(alias.expr), scope))))
        cols = []
        for col in child.cols:
            replaced = next((new for name, new in values if _same(col.name, name)), None)
            cols.append(col if replaced is None else replaced)
        cols.extend(new for name, new in values if not any(_same(c.name, name) for c in child.cols))
        return _Out(cols, [*child.cols, *child.below])

    def _rel_with_columns_renamed(self, msg: Any, rel: Any) -> _Out:
        child = self.visit(msg.input)
        renames = [(r.col_name, r.new_col_name) for r in msg.renames] or list(
            msg.rename_columns_map.items()
        )
        cols = []
        for col in child.cols:
            new = [to for old, to in renames if _same(col.name, old)]
            cols.append(_Col(col.key, new[-1]) if new else col)
        return _Out(cols, child.below)

    def _rel_to_df(self, msg: Any, rel: Any) -> _Out:
        child = self.visit(msg.input)
        if len(msg.column_names) != len(child.cols):
            raise _Unknown("toDF with another number of names")
        return _Out([_Col(c.key, n) for c, n in zip(child.cols, msg.column_names, strict=True)])

    def _rel_drop(self, msg: Any, rel: Any) -> _Out:
        child = self.visit(msg.input)
        scope = _Scope(child.cols)
        dropped: set[int] = set()
        for expr in (from_proto(e) for e in msg.columns):
            if not isinstance(expr, Attr):
                raise _Unknown("drop of an expression")
            try:
                hit = self.resolve(expr, scope)
            except _Unknown:  # Spark drops nothing for a name it does not find
                continue
            if hit is not None and not hit[1]:
                dropped.add(hit[0].key)
        cols = [
            c
            for c in child.cols
            if c.key not in dropped and not any(_same(c.name, n) for n in msg.column_names)
        ]
        return _Out(cols, child.below)

    def _rel_drop_na(self, msg: Any, rel: Any) -> _Out:
        child = self.visit(msg.input)
        names = list(msg.cols)
        read = [c for c in child.cols if not names or any(_same(c.name, n) for n in names)]
        self.dataset |= self._indirect_cols(read, "FILTER")
        return child

    def _rel_fill_na(self, msg: Any, rel: Any) -> _Out:
        child = self.visit(msg.input)
        fields = self.schema(msg.input).fields
        names, values = list(msg.cols), list(msg.values)
        if len(values) == 1:
            kind = values[0].WhichOneof("literal_type")
            wanted: type = (
                StringType
                if kind == "string"
                else BooleanType
                if kind == "boolean"
                else NumericType
            )
            filled = {
                i
                for i, (col, f) in enumerate(zip(child.cols, fields, strict=True))
                if isinstance(f.dataType, wanted)
                and (not names or any(_same(col.name, n) for n in names))
            }
        elif len(values) == len(names):
            filled = {
                i for i, col in enumerate(child.cols) if any(_same(col.name, n) for n in names)
            }
        else:
            raise _Unknown("fillna with values that do not match its columns")
        cols = [
            self.new(col.name, _at_level(self.lineage[col.key], "TRANSFORMATION"))
            if i in filled
            else col
            for i, col in enumerate(child.cols)
        ]
        return _Out(cols, child.below)

    def _rel_join(self, msg: Any, rel: Any) -> _Out:
        from pyspark.sql.connect.proto import relations_pb2

        left, right = self.visit(msg.left), self.visit(msg.right)
        if msg.HasField("join_data_type"):
            raise _Unknown("a typed join")
        join_type = relations_pb2.Join.JoinType.Name(msg.join_type)
        scope = _Scope([*left.cols, *right.cols])
        if msg.HasField("join_condition"):
            self.to_dataset([from_proto(msg.join_condition)], scope, "JOIN")
        existence = join_type in ("JOIN_TYPE_LEFT_SEMI", "JOIN_TYPE_LEFT_ANTI")
        if existence:
            self.dataset |= self._indirect_cols(right.cols, "JOIN")
        if not msg.using_columns:
            return _Out(list(left.cols) if existence else [*left.cols, *right.cols])
        left_keys = [_only(left.cols, name) for name in msg.using_columns]
        right_keys = [_only(right.cols, name) for name in msg.using_columns]
        self.dataset |= self._indirect_cols([*left_keys, *right_keys], "JOIN")
        left_rest = [c for c in left.cols if c not in left_keys]
        right_rest = [c for c in right.cols if c not in right_keys]
        if existence:
            return _Out([*left_keys, *left_rest])
        if join_type == "JOIN_TYPE_RIGHT_OUTER":
            keys = right_keys
        elif join_type == "JOIN_TYPE_FULL_OUTER":  # coalesce(left key, right key)
            keys = [
                self.new(
                    lk.name,
                    _at_level(self.lineage[lk.key] | self.lineage[rk.key], "TRANSFORMATION"),
                )
                for lk, rk in zip(left_keys, right_keys, strict=True)
            ]
        else:
            keys = left_keys
        return _Out([*keys, *left_rest, *right_rest])

    def _rel_set_op(self, msg: Any, rel: Any) -> _Out:
        from pyspark.sql.connect.proto import relations_pb2

        left, right = self.visit(msg.left_input), self.visit(msg.right_input)
        self.prefetch([msg.left_input, msg.right_input, rel])
        left_types = [f.dataType for f in self.schema(msg.left_input).fields]
        right_types = [f.dataType for f in self.schema(msg.right_input).fields]
        out_fields = self.schema(rel).fields
        if len(left_types) != len(left.cols) or len(right_types) != len(right.cols):
            raise _Unknown("a set operation's sides differ from the plan's")
        op = relations_pb2.SetOperation.SetOpType.Name(msg.set_op_type)
        if op != "SET_OP_TYPE_UNION":  # intersect, except: the right side decides the rows
            self.dataset |= self._indirect_cols(right.cols, "JOIN")
            pairs: list[tuple[int | None, int | None]] = [(i, None) for i in range(len(left.cols))]
        elif msg.by_name:
            pairs = []
            for i, col in enumerate(left.cols):
                match = [j for j, c in enumerate(right.cols) if _same(c.name, col.name)]
                if len(match) > 1 or (not match and not msg.allow_missing_columns):
                    raise _Unknown("union by name without one column of each name")
                pairs.append((i, match[0] if match else None))
            taken = {j for _, j in pairs}
            if msg.allow_missing_columns:
                pairs.extend((None, j) for j in range(len(right.cols)) if j not in taken)
        else:
            if len(left.cols) != len(right.cols):
                raise _Unknown("a union of sides of different widths")
            pairs = [(i, i) for i in range(len(left.cols))]
        if len(pairs) != len(out_fields):
            raise _Unknown("a set operation's columns differ from the plan's")
        cols = []
        for (left_at, right_at), out in zip(pairs, out_fields, strict=True):
            sources: set[ColumnSource] = set()
            for at, side, types in ((left_at, left, left_types), (right_at, right, right_types)):
                if at is None:
                    continue
                own = self.lineage[side.cols[at].key]
                # Spark casts a side whose type is not the result's: a transformation
                sources |= (
                    set(own) if types[at] == out.dataType else _at_level(own, "TRANSFORMATION")
                )
            qualifier = left.cols[left_at].qualifier if left_at is not None else ()
            cols.append(self.new(out.name, sources, qualifier))
        if op == "SET_OP_TYPE_UNION" and not msg.is_all:  # UNION DISTINCT
            self.dataset |= self._indirect_cols(cols, "GROUP_BY")
        return _Out(cols)


@dataclass(frozen=True)
class _Wide:
    """Columns a single select item makes, named by Spark (`names` None) or by an alias."""

    names: tuple[str, ...] | None
    sources: set[ColumnSource]


def _match(cols: Sequence[_Col], parts: tuple[str, ...]) -> tuple[_Col, tuple[str, ...]] | None:
    """Spark's resolution of a multi-part name among `cols`: a qualifier first (`t.col`, the
    longest that matches), then a column with nested fields (`col.field`); two different
    columns for one name is no answer (Spark refuses it as ambiguous)."""
    for size in range(min(3, len(parts) - 1), 0, -1):
        found = {
            c.key: c
            for c in cols
            if len(c.qualifier) >= size
            and all(_same(a, b) for a, b in zip(c.qualifier[-size:], parts[:size], strict=True))
            and _same(c.name, parts[size])
        }
        if len(found) == 1:
            return next(iter(found.values())), parts[size + 1 :]
        if found:
            raise _Unknown(f"ambiguous column {'.'.join(parts)}")
    found = {c.key: c for c in cols if _same(c.name, parts[0])}
    if len(found) > 1:
        raise _Unknown(f"ambiguous column {'.'.join(parts)}")
    return (next(iter(found.values())), parts[1:]) if found else None


def _only(cols: Sequence[_Col], name: str) -> _Col:
    found = [c for c in cols if _same(c.name, name)]
    if len({c.key for c in found}) != 1:
        raise _Unknown(f"no single column {name} to join on")
    return found[0]


def _child_relations(rel: Any) -> Iterator[Any]:
    """The relations directly under a node of a kind the walk does not know."""
    from google.protobuf.message import Message

    kind = rel.WhichOneof("rel_type")
    if kind is None:
        return
    node = getattr(rel, kind)
    pending: list[Message] = [node]
    while pending:
        message = pending.pop()
        for descriptor, value in message.ListFields():
            values = value if repeated(descriptor) else [value]
            for item in values:
                if not isinstance(item, Message):
                    continue
                if item.DESCRIPTOR.full_name == "spark.connect.Relation":
                    yield item
                else:
                    pending.append(item)


def _leaves(rel: Any) -> Iterator[Any]:
    """Nodes whose schema the walk will ask for in any case (reads and other leaves)."""
    kind = rel.WhichOneof("rel_type")
    children = list(_child_relations(rel))
    if kind in ("read", "sql", "local_relation", "cached_local_relation"):
        yield rel
    for child in children:
        yield from _leaves(child)


def connect_plan_lineage(df: DataFrame) -> PlanLineage:
    """Input files and column lineage of a Spark Connect DataFrame (AnalyzePlan requests only,
    no Spark job)."""
    connect: Any = df  # pyspark.sql.connect.dataframe.DataFrame: its private plan
    client = connect.sparkSession.client
    root = connect._plan.to_proto(client).root
    schema = df.schema  # the client keeps it: the root's schema costs no request here
    names = [f.name for f in schema.fields]
    walker = _Walker(client)
    walker.schemas[walker.key(root)] = schema
    walker.prefetch(list(_leaves(root)))
    out = walker.visit(root)
    columns: dict[str, tuple[ColumnSource, ...]]
    if [c.name for c in out.cols] == names:
        columns = {
            name: tidy(walker.lineage[col.key]) for col, name in zip(out.cols, names, strict=True)
        }
    else:
        walker.complete = False
        columns = dict.fromkeys(names, ())
    inputs = tuple(
        PlanInput(
            path,
            fmt,
            tuple(cols),
            tuple((c, *walker.types[path][c]) for c in cols if c in walker.types.get(path, {})),
        )
        for path, (fmt, cols) in sorted(walker.inputs.items())
    )
    return PlanLineage(
        inputs=inputs, columns=columns, dataset=tidy(walker.dataset), complete=walker.complete
    )
