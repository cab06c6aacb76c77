"""What the function names in a Spark Connect plan mean to Spark's analyzer, as far as column
lineage depends on it.

The analyzed plan says by its structure what each function is (an aggregate is wrapped in an
aggregate expression, `nvl2` is replaced by an `If`); a Connect plan names functions only. These
tables give the same answers for Spark's built-in functions: they come from Spark's own function
registry, and `tests/spark/test_connect_plan.py` checks them against the registry of the installed
pyspark, so an upgrade that adds or changes a function fails there first. A name not in the
registry (a UDF by name, a catalog function) has no known kind: the lineage says it is
incomplete rather than guess.
"""

from __future__ import annotations

from dws_dagster.spark.connect.function_registry import BUILTIN_FUNCTIONS

#: Aggregate functions (Spark's AggregateFunction, without the window-only ranking functions,
#: which the analyzer does not wrap as aggregates), and `product`, which Spark Connect adds.
AGGREGATES = frozenset(
    [
        "any",
        "any_value",
        "approx_count_distinct",
        "approx_percentile",
        "approx_top_k",
        "approx_top_k_accumulate",
        "approx_top_k_combine",
        "array_agg",
        "avg",
        "bit_and",
        "bit_or",
        "bit_xor",
        "bitmap_and_agg",
        "bitmap_construct_agg",
        "bitmap_or_agg",
        "bool_and",
        "bool_or",
        "collect_list",
        "collect_set",
        "collect_union",
        "corr",
        "count",
        "count_if",
        "covar_pop",
        "covar_samp",
        "every",
        "first",
        "first_value",
        "histogram_numeric",
        "hll_sketch_agg",
        "hll_union_agg",
        "kll_merge_agg_bigint",
        "kll_merge_agg_double",
        "kll_merge_agg_float",
        "kll_sketch_agg_bigint",
        "kll_sketch_agg_double",
        "kll_sketch_agg_float",
        "kurtosis",
        "last",
        "last_value",
        "listagg",
        "max",
        "mean",
        "measure",
        "median",
        "min",
        "percentile",
        "percentile_approx",
        "regr_avgx",
        "regr_avgy",
        "regr_count",
        "regr_intercept",
        "regr_r2",
        "regr_slope",
        "regr_sxx",
        "regr_sxy",
        "regr_syy",
        "schema_of_variant_agg",
        "skewness",
        "some",
        "std",
        "stddev",
        "stddev_pop",
        "stddev_samp",
        "string_agg",
        "sum",
        "theta_intersection_agg",
        "theta_sketch_agg",
        "theta_union_agg",
        "tuple_intersection_agg_double",
        "tuple_intersection_agg_integer",
        "var_pop",
        "var_samp",
        "variance",
        "vector_avg",
        "vector_sum",
        "product",
    ]
)


#: Functions that make one or more rows of several columns from one select item.
GENERATORS = frozenset(
    {
        "explode",
        "explode_outer",
        "posexplode",
        "posexplode_outer",
        "inline",
        "inline_outer",
        "stack",
        "json_tuple",
    }
)

#: Window ranking functions whose input, to Spark, is the window's order (`rank()` compares
#: rows by it); the other ranking functions read no column.
ORDERED_RANKING = frozenset({"rank", "dense_rank", "percent_rank"})


def is_known(name: str) -> bool:
    """Whether `name` (lower case) is a built-in function or an operation every Spark has
    (the expression parser's `<op>`, `<cast>`, ...)."""
    return name in BUILTIN_FUNCTIONS or name.startswith("<")


def conditional_layout(name: str, count: int) -> tuple[list[int], list[int]] | None:
    """For a function that picks a branch (Spark's `CaseWhen` and `If`, and the functions the
    analyzer replaces by one), the positions of its `count` arguments that decide the branch
    and of those whose value it returns; None for any other function."""
    positions = list(range(count))
    if name == "when":  # CASE WHEN c1 THEN v1 ... ELSE e END: c1, v1, ..., e
        conditions = [i for i in positions if i % 2 == 0 and i + 1 < count]
        return conditions, [i for i in positions if i not in conditions]
    if name == "decode" and count > 2:  # decode(x, s1, r1, ..., default): x = s1 picks r1
        searches = [i for i in positions[1:] if i % 2 == 1 and i + 1 < count]
        return [0, *searches], [i for i in positions[1:] if i not in searches]
    if name in ("if", "nvl2") and count == 3:
        return [0], [1, 2]
    if name == "nullifzero" and count == 1:  # if x = 0 then null else x
        return [0], [0]
    if name == "assert_true" and count >= 1:  # if c then null else raise_error(message)
        return [0], positions[1:]
    return None
