"""A Spark Connect plan's protobuf expressions (`spark.connect.Expression`) as the node types
of `expressions`: SQL text inside them (`expression_string`) goes through `sql_parser`, and any
kind of expression not known here becomes an `Opaque` node, which makes the lineage incomplete
rather than wrong.
"""

from __future__ import annotations

from typing import Any

from dws_dagster.spark.connect.expressions import (
    CAST,
    EXTRACT,
    LAMBDA,
    Alias,
    Attr,
    Call,
    Expr,
    Lit,
    Opaque,
    Over,
    Star,
    split_name,
)
from dws_dagster.spark.connect.sql_parser import parse_expression

#: Python UDF evaluation types that aggregate (pyspark.util.PythonEvalType: grouped-aggregate
#: pandas and Arrow UDFs); Spark wraps them in an aggregate as it does its own aggregates.
_AGGREGATING_UDF_EVAL_TYPES = frozenset({202, 250, 251, 252})


def from_proto(message: Any) -> Expr:
    """A `spark.connect.Expression` (or a bare `SortOrder`, as Sort and windows hold them) as an
    `Expr`."""
    if message.DESCRIPTOR.name == "SortOrder":
        return from_proto(message.child)
    kind = message.WhichOneof("expr_type")
    if kind == "literal" or kind == "unresolved_named_lambda_variable":
        return Lit()
    if kind == "unresolved_attribute":
        attribute = message.unresolved_attribute
        if attribute.is_metadata_column:
            return Opaque("a hidden metadata column")
        return Attr(
            split_name(attribute.unparsed_identifier),
            attribute.plan_id if attribute.HasField("plan_id") else None,
        )
    if kind == "unresolved_function":
        function = message.unresolved_function
        args = tuple(from_proto(a) for a in function.arguments)
        name = function.function_name.lower()
        if name == "when":  # CaseWhen's branches, flattened as Spark's CaseWhen children are
            return Call("when", args)
        return Call(
            name,
            args,
            user_defined=function.is_user_defined_function or function.is_internal,
        )
    if kind == "call_function":
        call = message.call_function
        return Call(call.function_name.lower(), tuple(from_proto(a) for a in call.arguments))
    if kind == "expression_string":
        return parse_expression(message.expression_string.expression)
    if kind == "unresolved_star":
        star = message.unresolved_star
        target = split_name(star.unparsed_target)[:-1] if star.unparsed_target else ()
        return Star(target, star.plan_id if star.HasField("plan_id") else None)
    if kind == "alias":
        return Alias(from_proto(message.alias.expr), tuple(message.alias.name))
    if kind == "cast":
        return Call(CAST, (from_proto(message.cast.expr),))
    if kind == "sort_order":
        return from_proto(message.sort_order.child)
    if kind == "lambda_function":
        return Call(LAMBDA, (from_proto(message.lambda_function.function),))
    if kind == "window":
        window = message.window
        frame: tuple[Expr, ...] = ()
        if window.HasField("frame_spec"):
            frame = tuple(
                from_proto(bound.value)
                for bound in (window.frame_spec.lower, window.frame_spec.upper)
                if bound.WhichOneof("boundary") == "value"
            )
        return Over(
            from_proto(window.window_function),
            tuple(from_proto(e) for e in window.partition_spec),
            tuple(from_proto(e) for e in window.order_spec),
            frame,
        )
    if kind == "unresolved_extract_value":
        extract = message.unresolved_extract_value
        return Call(EXTRACT, (from_proto(extract.child), from_proto(extract.extraction)))
    if kind == "update_fields":
        update = message.update_fields
        fields = [from_proto(update.struct_expression)]
        if update.HasField("value_expression"):
            fields.append(from_proto(update.value_expression))
        return Call(EXTRACT, tuple(fields))
    if kind == "named_argument_expression":
        return from_proto(message.named_argument_expression.value)
    if kind == "common_inline_user_defined_function":
        udf = message.common_inline_user_defined_function
        aggregate = (
            udf.python_udf.eval_type in _AGGREGATING_UDF_EVAL_TYPES
            if udf.WhichOneof("function") == "python_udf"
            else bool(udf.java_udf.aggregate)
            if udf.WhichOneof("function") == "java_udf"
            else False
        )
        return Call(
            udf.function_name.lower() or "<udf>",
            tuple(from_proto(a) for a in udf.arguments),
            aggregate=aggregate,
        )
    if kind == "unresolved_regex":
        return Opaque("a column regex (colRegex)")
    return Opaque(f"a {kind or 'empty'} expression")
