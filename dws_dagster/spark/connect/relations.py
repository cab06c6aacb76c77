"""The walk of a Spark Connect client's plan, bottom-up: for each node it does what Spark's
analyzer does to it, as far as lineage depends on it: it gives the node its columns (reads,
projections, aggregates and pivots, `withColumns`, renames, drops, `fillna`), lays out join
outputs (`USING` keys included), unions by position or by name, and records what decides the
rows (filters, sorts, joins, grouping, deduplication) as the dataset's indirect sources.

The server is asked only what the client's plan does not say (`server_schemas`): the columns
of leaves, the names Spark makes up for unnamed expressions, stars over structs, generators and
pivots, and the types either side of a set operation (Spark casts a side whose type differs).
A node whose columns the server names differently from the walk is not trusted, and a node the
walk does not know (a pandas UDF over partitions, SQL text as a relation, a table) is treated
as `spark/plan.py` treats one: its columns carry no sources and the lineage is incomplete,
never guessed.
"""

from __future__ import annotations

from typing import Any

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
)

from dws_dagster.spark.connect.column_resolution import (
    Col,
    Out,
    Scope,
    UnknownNode,
    at_level,
    only_column,
    same_name,
)
from dws_dagster.spark.connect.expression_lineage import ExpressionLineage
from dws_dagster.spark.connect.expressions import Attr, Expr, split_name
from dws_dagster.spark.connect.plan_tree import child_relations
from dws_dagster.spark.connect.proto_expressions import from_proto
from dws_dagster.spark.lineage_model import ColumnSource, LineageKind
from dws_dagster.spark.plan_paths import client_path, format_name

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


class RelationWalker(ExpressionLineage):
    """Walks one plan (`visit` its root), collecting its lineage."""

    # -------------------------------------------------------------- relations

    def visit(self, rel: Any) -> Out:
        kind = rel.WhichOneof("rel_type")
        handler = getattr(self, f"_rel_{kind}", None)
        try:
            if handler is None:
                for child in child_relations(rel):
                    self.visit(child)
                raise UnknownNode(f"a {kind} node")
            out = handler(getattr(rel, kind), rel)
        except Exception:  # UnknownNode, or a plan shape this walk did not expect
            out = self._unknown(rel)
        if rel.HasField("common") and rel.common.HasField("plan_id"):
            self.by_plan_id[rel.common.plan_id] = out.cols
        return out

    def _unknown(self, rel: Any) -> Out:
        """The conservative answer: the node's columns, from the server, without sources."""
        self.complete = False
        try:
            schema = self.server.schema(rel)
        except UnknownNode:
            return Out([])
        return Out([self.new(f.name) for f in schema.fields])

    def _pass(self, msg: Any, rel: Any) -> Out:
        return self.visit(msg.input)

    # As in spark/plan.py: these keep their child's columns and decide no rows by value
    # (a repartition's expressions only place rows; a hint's parameters are names).
    _rel_limit = _rel_offset = _rel_tail = _rel_sample = _rel_repartition = _pass
    _rel_repartition_by_expression = _rel_hint = _rel_with_watermark = _pass
    _rel_collect_metrics = _pass

    def _rel_subquery_alias(self, msg: Any, rel: Any) -> Out:
        child = self.visit(msg.input)
        qualifier = (*msg.qualifier, msg.alias)
        return Out([Col(c.key, c.name, qualifier) for c in child.cols], child.below)

    def _rel_read(self, msg: Any, rel: Any) -> Out:
        schema = self.server.schema(rel)
        if msg.WhichOneof("read_type") != "data_source" or msg.is_streaming:
            self.complete = False  # a table or a stream: no path to report
            qualifier = (
                split_name(msg.named_table.unparsed_identifier)
                if msg.WhichOneof("read_type") == "named_table"
                else ()
            )
            return Out([self.new(f.name, qualifier=qualifier) for f in schema.fields])
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
        return Out(cols)

    def _leaf(self, msg: Any, rel: Any) -> Out:
        return Out([self.new(f.name) for f in self.server.schema(rel).fields])

    _rel_local_relation = _rel_cached_local_relation = _rel_chunked_cached_local_relation = _leaf

    def _rel_range(self, msg: Any, rel: Any) -> Out:
        return Out([self.new("id")])

    def _rel_with_relations(self, msg: Any, rel: Any) -> Out:
        for reference in msg.references:  # subqueries' plans: their inputs are inputs
            self.visit(reference)
        self.complete = False
        return self.visit(msg.root)

    def _rel_project(self, msg: Any, rel: Any) -> Out:
        child = self.visit(msg.input) if msg.HasField("input") else Out([])
        scope = Scope(child.cols, child.below)
        cols = self.project(rel, [from_proto(e) for e in msg.expressions], scope)
        return Out(cols, [*child.cols, *child.below])

    def _rel_filter(self, msg: Any, rel: Any) -> Out:
        child = self.visit(msg.input)
        self.to_dataset([from_proto(msg.condition)], Scope(child.cols, child.below), "FILTER")
        return child

    def _rel_sort(self, msg: Any, rel: Any) -> Out:
        child = self.visit(msg.input)
        scope = Scope(child.cols, child.below)
        self.to_dataset([from_proto(e) for e in msg.order], scope, "SORT")
        return child

    def _rel_deduplicate(self, msg: Any, rel: Any) -> Out:
        child = self.visit(msg.input)
        if msg.all_columns_as_keys or not msg.column_names:
            keys = list(child.cols)
        else:
            keys = [c for c in child.cols if any(same_name(c.name, n) for n in msg.column_names)]
        self.dataset |= self.indirect_cols(keys, "GROUP_BY")
        return child

    def _rel_aggregate(self, msg: Any, rel: Any) -> Out:
        from pyspark.sql.connect.proto import relations_pb2

        child = self.visit(msg.input)
        scope = Scope(child.cols)
        group = [from_proto(e) for e in msg.grouping_expressions]
        sets = [from_proto(e) for s in msg.grouping_sets for e in s.grouping_set]
        aggregates = [from_proto(e) for e in msg.aggregate_expressions]
        self.to_dataset([*group, *sets], scope, "GROUP_BY")
        if msg.group_type == relations_pb2.Aggregate.GroupType.GROUP_TYPE_PIVOT:
            return Out(self._pivot(rel, from_proto(msg.pivot.col), group, aggregates, scope))
        return Out(self.project(rel, [*group, *aggregates], scope))

    def _pivot(
        self, rel: Any, pivot: Expr, group: list[Expr], aggregates: list[Expr], scope: Scope
    ) -> list[Col]:
        """Spark's two layouts of a pivot: with aggregates of simple types (numbers, booleans),
        one aggregate over group and pivot column, then each value's column picked out of it
        (the pivot column is aggregated and grouped by); otherwise one aggregate per value of
        `if(pivot = value, x, null)` (the pivot column decides the branch)."""
        grouped = self.project(rel, group, scope) if group else []
        fields = self.server.schema(rel).fields
        if [c.name for c in grouped] != [f.name for f in fields[: len(grouped)]]:
            raise UnknownNode("a pivot's columns differ from the plan's")
        values = fields[len(grouped) :]
        if not aggregates or len(values) % len(aggregates):
            raise UnknownNode("a pivot's columns differ from its aggregates")
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

    def _rel_with_columns(self, msg: Any, rel: Any) -> Out:
        child = self.visit(msg.input)
        scope = Scope(child.cols)
        values: list[tuple[str, Col]] = []
        for alias in msg.aliases:
            if len(alias.name) != 1:
                raise UnknownNode("withColumns with several names for one value")
            name = alias.name[0]
            values.append((name, self.new(name, self.value(from_proto(alias.expr), scope))))
        cols = []
        for col in child.cols:
            replaced = next((new for name, new in values if same_name(col.name, name)), None)
            cols.append(col if replaced is None else replaced)
        cols.extend(
            new for name, new in values if not any(same_name(c.name, name) for c in child.cols)
        )
        return Out(cols, [*child.cols, *child.below])

    def _rel_with_columns_renamed(self, msg: Any, rel: Any) -> Out:
        child = self.visit(msg.input)
        renames = [(r.col_name, r.new_col_name) for r in msg.renames] or list(
            msg.rename_columns_map.items()
        )
        cols = []
        for col in child.cols:
            new = [to for old, to in renames if same_name(col.name, old)]
            cols.append(Col(col.key, new[-1]) if new else col)
        return Out(cols, child.below)

    def _rel_to_df(self, msg: Any, rel: Any) -> Out:
        child = self.visit(msg.input)
        if len(msg.column_names) != len(child.cols):
            raise UnknownNode("toDF with another number of names")
        return Out([Col(c.key, n) for c, n in zip(child.cols, msg.column_names, strict=True)])

    def _rel_drop(self, msg: Any, rel: Any) -> Out:
        child = self.visit(msg.input)
        scope = Scope(child.cols)
        dropped: set[int] = set()
        for expr in (from_proto(e) for e in msg.columns):
            if not isinstance(expr, Attr):
                raise UnknownNode("drop of an expression")
            try:
                hit = self.resolve(expr, scope)
            except UnknownNode:  # Spark drops nothing for a name it does not find
                continue
            if hit is not None and not hit[1]:
                dropped.add(hit[0].key)
        cols = [
            c
            for c in child.cols
            if c.key not in dropped and not any(same_name(c.name, n) for n in msg.column_names)
        ]
        return Out(cols, child.below)

    def _rel_drop_na(self, msg: Any, rel: Any) -> Out:
        child = self.visit(msg.input)
        names = list(msg.cols)
        read = [c for c in child.cols if not names or any(same_name(c.name, n) for n in names)]
        self.dataset |= self.indirect_cols(read, "FILTER")
        return child

    def _rel_fill_na(self, msg: Any, rel: Any) -> Out:
        child = self.visit(msg.input)
        fields = self.server.schema(msg.input).fields
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
                and (not names or any(same_name(col.name, n) for n in names))
            }
        elif len(values) == len(names):
            filled = {
                i for i, col in enumerate(child.cols) if any(same_name(col.name, n) for n in names)
            }
        else:
            raise UnknownNode("fillna with values that do not match its columns")
        cols = [
            self.new(col.name, at_level(self.lineage[col.key], "TRANSFORMATION"))
            if i in filled
            else col
            for i, col in enumerate(child.cols)
        ]
        return Out(cols, child.below)

    def _rel_join(self, msg: Any, rel: Any) -> Out:
        from pyspark.sql.connect.proto import relations_pb2

        left, right = self.visit(msg.left), self.visit(msg.right)
        if msg.HasField("join_data_type"):
            raise UnknownNode("a typed join")
        join_type = relations_pb2.Join.JoinType.Name(msg.join_type)
        scope = Scope([*left.cols, *right.cols])
        if msg.HasField("join_condition"):
            self.to_dataset([from_proto(msg.join_condition)], scope, "JOIN")
        existence = join_type in ("JOIN_TYPE_LEFT_SEMI", "JOIN_TYPE_LEFT_ANTI")
        if existence:
            self.dataset |= self.indirect_cols(right.cols, "JOIN")
        if not msg.using_columns:
            return Out(list(left.cols) if existence else [*left.cols, *right.cols])
        left_keys = [only_column(left.cols, name) for name in msg.using_columns]
        right_keys = [only_column(right.cols, name) for name in msg.using_columns]
        self.dataset |= self.indirect_cols([*left_keys, *right_keys], "JOIN")
        left_rest = [c for c in left.cols if c not in left_keys]
        right_rest = [c for c in right.cols if c not in right_keys]
        if existence:
            return Out([*left_keys, *left_rest])
        if join_type == "JOIN_TYPE_RIGHT_OUTER":
            keys = right_keys
        elif join_type == "JOIN_TYPE_FULL_OUTER":  # coalesce(left key, right key)
            keys = [
                self.new(
                    lk.name,
                    at_level(self.lineage[lk.key] | self.lineage[rk.key], "TRANSFORMATION"),
                )
                for lk, rk in zip(left_keys, right_keys, strict=True)
            ]
        else:
            keys = left_keys
        return Out([*keys, *left_rest, *right_rest])

    def _rel_set_op(self, msg: Any, rel: Any) -> Out:
        from pyspark.sql.connect.proto import relations_pb2

        left, right = self.visit(msg.left_input), self.visit(msg.right_input)
        self.server.prefetch([msg.left_input, msg.right_input, rel])
        left_types = [f.dataType for f in self.server.schema(msg.left_input).fields]
        right_types = [f.dataType for f in self.server.schema(msg.right_input).fields]
        out_fields = self.server.schema(rel).fields
        if len(left_types) != len(left.cols) or len(right_types) != len(right.cols):
            raise UnknownNode("a set operation's sides differ from the plan's")
        op = relations_pb2.SetOperation.SetOpType.Name(msg.set_op_type)
        if op != "SET_OP_TYPE_UNION":  # intersect, except: the right side decides the rows
            self.dataset |= self.indirect_cols(right.cols, "JOIN")
            pairs: list[tuple[int | None, int | None]] = [(i, None) for i in range(len(left.cols))]
        elif msg.by_name:
            pairs = []
            for i, col in enumerate(left.cols):
                match = [j for j, c in enumerate(right.cols) if same_name(c.name, col.name)]
                if len(match) > 1 or (not match and not msg.allow_missing_columns):
                    raise UnknownNode("union by name without one column of each name")
                pairs.append((i, match[0] if match else None))
            taken = {j for _, j in pairs}
            if msg.allow_missing_columns:
                pairs.extend((None, j) for j in range(len(right.cols)) if j not in taken)
        else:
            if len(left.cols) != len(right.cols):
                raise UnknownNode("a union of sides of different widths")
            pairs = [(i, i) for i in range(len(left.cols))]
        if len(pairs) != len(out_fields):
            raise UnknownNode("a set operation's columns differ from the plan's")
        cols = []
        for (left_at, right_at), out in zip(pairs, out_fields, strict=True):
            sources: set[ColumnSource] = set()
            for at, side, types in ((left_at, left, left_types), (right_at, right, right_types)):
                if at is None:
                    continue
                own = self.lineage[side.cols[at].key]
                # Spark casts a side whose type is not the result's: a transformation
                sources |= (
                    set(own) if types[at] == out.dataType else at_level(own, "TRANSFORMATION")
                )
            qualifier = left.cols[left_at].qualifier if left_at is not None else ()
            cols.append(self.new(out.name, sources, qualifier))
        if op == "SET_OP_TYPE_UNION" and not msg.is_all:  # UNION DISTINCT
            self.dataset |= self.indirect_cols(cols, "GROUP_BY")
        return Out(cols)
