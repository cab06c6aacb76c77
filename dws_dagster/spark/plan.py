"""Column-level lineage from a classic session's analyzed Spark plan, without running a Spark
job (on Spark Connect, `spark/connect/` reads the client's plan; `spark/column_lineage.py`
picks one).

The plan comes from the JVM as JSON (`analyzed.toJSON()`: one call, nodes in pre-order with
`num-children`, expressions flattened the same way); only file relations need a second look
through py4j, for their root paths. Attributes are linked by `exprId`: each node maps the
attributes it creates to the sources of the attributes it reads, classified as
`spark/lineage_model.py` says. Nodes not understood make the result incomplete, never an
error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame

from dws_dagster.spark.lineage_model import (
    DIRECT_RANK,
    ColumnSource,
    LineageKind,
    PlanLineage,
    Sources,
    plan_inputs,
    stronger,
    tidy,
)
from dws_dagster.spark.plan_paths import format_name, normalise_path

_PASS_THROUGH = {
    "Filter",
    "Sort",
    "GlobalLimit",
    "LocalLimit",
    "Limit",
    "Offset",
    "Tail",
    "SubqueryAlias",
    "Repartition",
    "RepartitionByExpression",
    "RebalancePartitions",
    "Sample",
    "ResolvedHint",
    "Distinct",
    "Deduplicate",
    "DeduplicateWithinWatermark",
    "Intersect",
    "Except",
    "CollectMetrics",
    "EventTimeWatermark",
    "View",
    "Subquery",
    "WithCTE",
    "AppendColumns",
}
_FILE_RELATIONS = {"LogicalRelation", "DataSourceV2Relation", "DataSourceV2ScanRelation"}
_NO_SOURCE_LEAVES = {
    "LocalRelation",
    "LogicalRDD",
    "Range",
    "OneRowRelation",
    "ExternalRDD",
    "LocalLimit",
}


@dataclass
class _Expr:
    cls: str
    fields: dict[str, Any]
    children: list[_Expr] = field(default_factory=list)

    @property
    def expr_id(self) -> int | None:
        raw = self.fields.get("exprId")
        return raw.get("id") if isinstance(raw, dict) else None

    def attributes(self) -> Iterator[_Expr]:
        if self.cls == "AttributeReference":
            yield self
        for child in self.children:
            yield from child.attributes()


@dataclass
class _Node:
    cls: str
    fields: dict[str, Any]
    children: list[_Node] = field(default_factory=list)
    output: list[tuple[int | None, str]] = field(default_factory=list)


def _short(class_name: str) -> str:
    return class_name.rsplit(".", 1)[-1]


def _build_tree(flat: list[dict[str, Any]], make: Any) -> Any:
    """Rebuild a pre-order list with `num-children` into a tree."""
    position = 0

    def take() -> Any:
        nonlocal position
        raw = flat[position]
        position += 1
        node = make(_short(raw.get("class", "?")), raw)
        node.children = [take() for _ in range(int(raw.get("num-children", 0)))]
        return node

    return take()


def _expr(flat: Any) -> _Expr | None:
    if not isinstance(flat, list) or not flat or not isinstance(flat[0], dict):
        return None
    return _build_tree(flat, lambda cls, raw: _Expr(cls, raw))


def _exprs(raw: Any) -> list[_Expr]:
    """A Seq[Expression] field: a list of flattened expressions."""
    if not isinstance(raw, list):
        return []
    return [e for item in raw if (e := _expr(item)) is not None]


class _Analyzer:
    def __init__(self, relations: list[tuple[tuple[str, ...], str | None] | None]) -> None:
        self.relations = relations  # per leaf, in pre-order: (root paths, format) or None
        self.leaf_index = 0
        self.lineage: dict[int | None, Sources] = {}
        self.dataset: set[ColumnSource] = set()
        self.complete = True
        self.inputs: dict[str, tuple[str | None, list[str]]] = {}
        self.types: dict[str, dict[str, tuple[str, bool]]] = {}

    # ------------------------------------------------------------ expressions

    def sources_of(self, expr: _Expr, level: str = "IDENTITY") -> set[ColumnSource]:
        """Sources of an expression's value; `level` is the strongest DIRECT subtype so far."""
        cls = expr.cls
        if cls == "AttributeReference":
            found = set()
            for source in self.lineage.get(expr.expr_id, frozenset()):
                if (
                    source.kind is LineageKind.DIRECT
                    and DIRECT_RANK[source.subtype] < DIRECT_RANK[level]
                ):
                    source = ColumnSource(source.path, source.column, source.kind, level)
                found.add(source)
            return found
        if cls == "Alias":
            return self.sources_of(expr.children[0], level) if expr.children else set()
        if cls == "AggregateExpression" or cls.endswith("AggregateExpression"):
            return self._all(expr.children, "AGGREGATION")
        if cls == "WindowExpression" and len(expr.children) == 2:
            function, spec = expr.children
            found = self.sources_of(function, stronger(level, "TRANSFORMATION"))
            return found | self.indirect(spec.attributes(), "WINDOW")
        if cls == "CaseWhen":
            found = set()
            for index, child in enumerate(expr.children):
                is_condition = index % 2 == 0 and index + 1 < len(expr.children)
                if is_condition:
                    found |= self.indirect(child.attributes(), "CONDITIONAL")
                else:
                    found |= self.sources_of(child, stronger(level, "TRANSFORMATION"))
            return found
        if cls == "If" and len(expr.children) == 3:
            return self.indirect(expr.children[0].attributes(), "CONDITIONAL") | self._all(
                expr.children[1:], stronger(level, "TRANSFORMATION")
            )
        if cls in ("ScalarSubquery", "Exists", "ListQuery", "InSubquery"):
            self.complete = False
        return self._all(expr.children, stronger(level, "TRANSFORMATION"))

    def _all(self, children: Iterable[_Expr], level: str) -> set[ColumnSource]:
        found: set[ColumnSource] = set()
        for child in children:
            found |= self.sources_of(child, level)
        return found

    def indirect(self, attributes: Iterable[_Expr], subtype: str) -> set[ColumnSource]:
        """Attributes used to decide rows or branches: their direct sources become INDIRECT."""
        found: set[ColumnSource] = set()
        for attribute in attributes:
            for source in self.lineage.get(attribute.expr_id, frozenset()):
                if source.kind is LineageKind.DIRECT:
                    source = ColumnSource(source.path, source.column, LineageKind.INDIRECT, subtype)
                found.add(source)
        return found

    def to_dataset(self, exprs: Iterable[_Expr], subtype: str) -> None:
        for expr in exprs:
            self.dataset |= self.indirect(expr.attributes(), subtype)

    def define(self, expr: _Expr) -> tuple[int, str] | None:
        """A named expression (attribute or alias) of a projection: its output attribute."""
        expr_id = expr.expr_id
        if expr_id is None:
            return None
        if expr.cls != "AttributeReference":
            self.lineage[expr_id] = frozenset(self.sources_of(expr))
        return expr_id, str(expr.fields.get("name", ""))

    # ------------------------------------------------------------------ nodes

    def visit(self, node: _Node) -> None:
        for child in node.children:
            self.visit(child)
        handler = getattr(self, f"_node_{node.cls}", None)
        if handler is not None:
            handler(node)
        elif not node.children:
            self._leaf(node)
        elif node.cls in _PASS_THROUGH:
            node.output = list(node.children[0].output)
            self._pass_through_effects(node)
        else:
            self.complete = False
            declared: list[tuple[int | None, str]] = [
                d for e in _exprs(node.fields.get("output")) if (d := self.define(e))
            ]
            node.output = declared or list(node.children[0].output)

    def _leaf(self, node: _Node) -> None:
        relation = (
            self.relations[self.leaf_index] if self.leaf_index < len(self.relations) else None
        )
        self.leaf_index += 1
        attributes = _exprs(node.fields.get("output"))
        node.output = [
            (a.expr_id, str(a.fields.get("name"))) for a in attributes if a.expr_id is not None
        ]
        if node.cls in _FILE_RELATIONS and relation is not None:
            paths, fmt = relation
            types = {
                str(a.fields.get("name")): typed
                for a in attributes
                if (typed := _attribute_type(a)) is not None
            }
            for path in paths:
                names = self.inputs.setdefault(path, (fmt, []))[1]
                names.extend(n for _, n in node.output if n not in names)
                known = self.types.setdefault(path, {})
                for name, typed in types.items():
                    known.setdefault(name, typed)
            for expr_id, name in node.output:
                self.lineage[expr_id] = frozenset(
                    ColumnSource(path, name, LineageKind.DIRECT, "IDENTITY") for path in paths
                )
        elif node.cls not in _NO_SOURCE_LEAVES:
            self.complete = False

    def _pass_through_effects(self, node: _Node) -> None:
        cls = node.cls
        if cls == "Filter":
            self.to_dataset(_exprs([node.fields.get("condition")]), "FILTER")
        elif cls == "Sort":
            self.to_dataset(_exprs(node.fields.get("order")), "SORT")
        elif cls == "Deduplicate":
            self.to_dataset(_exprs(node.fields.get("keys")), "GROUP_BY")
        elif cls == "Distinct":
            self.dataset |= self.indirect(
                (_Expr("AttributeReference", {"exprId": {"id": i}}) for i, _ in node.output),
                "GROUP_BY",
            )
        elif cls in ("Intersect", "Except") and len(node.children) == 2:
            self.dataset |= self.indirect(
                (
                    _Expr("AttributeReference", {"exprId": {"id": i}})
                    for i, _ in node.children[1].output
                ),
                "JOIN",
            )

    def _node_Project(self, node: _Node) -> None:
        node.output = [d for e in _exprs(node.fields.get("projectList")) if (d := self.define(e))]

    def _node_Aggregate(self, node: _Node) -> None:
        self.to_dataset(_exprs(node.fields.get("groupingExpressions")), "GROUP_BY")
        node.output = [
            d for e in _exprs(node.fields.get("aggregateExpressions")) if (d := self.define(e))
        ]

    def _node_Window(self, node: _Node) -> None:
        created = [d for e in _exprs(node.fields.get("windowExpressions")) if (d := self.define(e))]
        node.output = [*node.children[0].output, *created]

    def _node_Join(self, node: _Node) -> None:
        self.to_dataset(_exprs([node.fields.get("condition")]), "JOIN")
        join_type = str((node.fields.get("joinType") or {}).get("object", ""))
        left, right = node.children[0].output, node.children[1].output
        if "LeftSemi" in join_type or "LeftAnti" in join_type:
            self.dataset |= self.indirect(
                (_Expr("AttributeReference", {"exprId": {"id": i}}) for i, _ in right), "JOIN"
            )
            node.output = list(left)
        elif "ExistenceJoin" in join_type:
            self.complete = False
            node.output = list(left)
        else:
            node.output = [*left, *right]

    def _node_Union(self, node: _Node) -> None:
        first = node.children[0].output
        for position, (expr_id, _) in enumerate(first):
            merged = set(self.lineage.get(expr_id, frozenset()))
            for child in node.children[1:]:
                if position < len(child.output):
                    merged |= self.lineage.get(child.output[position][0], frozenset())
            self.lineage[expr_id] = frozenset(merged)
        node.output = list(first)

    def _node_Generate(self, node: _Node) -> None:
        generator = _expr(node.fields.get("generator"))
        sources = self._all(generator.children, "TRANSFORMATION") if generator else set()
        created = []
        for attribute in _exprs(node.fields.get("generatorOutput")):
            self.lineage[attribute.expr_id] = frozenset(sources)
            created.append((attribute.expr_id, str(attribute.fields.get("name"))))
        child = node.children[0].output
        dropped = set(node.fields.get("unrequiredChildIndex") or ())
        node.output = [a for i, a in enumerate(child) if i not in dropped] + created

    def _node_Expand(self, node: _Node) -> None:
        outputs = _exprs(node.fields.get("output"))
        projections = [_exprs(p) for p in node.fields.get("projections") or ()]
        for position, attribute in enumerate(outputs):
            merged: set[ColumnSource] = set()
            for projection in projections:
                if position < len(projection):
                    merged |= self.sources_of(projection[position])
            self.lineage[attribute.expr_id] = frozenset(merged)
        node.output = [(a.expr_id, str(a.fields.get("name"))) for a in outputs]


def _relations(analyzed: Any) -> list[tuple[tuple[str, ...], str | None] | None]:
    """Root paths and format of each leaf of the plan, in pre-order (as in the JSON)."""
    leaves = analyzed.collectLeaves()
    found: list[tuple[tuple[str, ...], str | None] | None] = []
    for index in range(leaves.size()):
        leaf = leaves.apply(index)
        name = leaf.getClass().getSimpleName()
        try:
            if name == "LogicalRelation":
                relation = leaf.relation()
                location, file_format = relation.location(), relation.fileFormat()
            elif name in ("DataSourceV2Relation", "DataSourceV2ScanRelation"):
                table = leaf.table() if name == "DataSourceV2Relation" else leaf.relation().table()
                location, file_format = table.fileIndex(), table.formatName()
            else:
                found.append(None)
                continue
            roots = location.rootPaths()
            paths = tuple(normalise_path(roots.apply(i).toString()) for i in range(roots.size()))
            found.append((paths, format_name(str(file_format))))
        except Exception:  # not a file relation (JDBC, Hive tables...): no path to report
            found.append(None)
    return found


def _attribute_type(attribute: _Expr) -> tuple[str, bool] | None:
    """(Spark simple type, nullable) of a relation's attribute in the plan's JSON (`dataType`
    is the type's JSON form: `long`, or an object for structs, arrays and maps)."""
    raw = attribute.fields.get("dataType")
    if raw is None:
        return None
    try:
        from pyspark.sql.types import _parse_datatype_json_value

        simple = _parse_datatype_json_value(raw).simpleString()
    except Exception:  # a type this pyspark does not know: the column goes untyped
        return None
    return simple, bool(attribute.fields.get("nullable", True))


def analyzed_plan_lineage(df: DataFrame) -> PlanLineage:
    """Input files and column lineage of `df`, a classic session's DataFrame, read from its
    analyzed plan (no Spark job)."""
    analyzed = df._jdf.queryExecution().analyzed()  # no public Python API for the plan
    flat = json.loads(analyzed.toJSON())
    tree = _build_tree(flat, lambda cls, raw: _Node(cls, raw))
    analyzer = _Analyzer(_relations(analyzed))
    analyzer.visit(tree)
    columns: dict[str, tuple[ColumnSource, ...]] = {}
    names = df.columns
    for position, (expr_id, name) in enumerate(tree.output):
        label = names[position] if position < len(names) else name
        columns[label] = tidy(analyzer.lineage.get(expr_id, frozenset()))
    if len(tree.output) != len(names):
        analyzer.complete = False
    inputs = plan_inputs(analyzer.inputs, analyzer.types)
    return PlanLineage(
        inputs=inputs, columns=columns, dataset=tidy(analyzer.dataset), complete=analyzer.complete
    )
