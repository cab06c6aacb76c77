"""Definitions-time checks and bindings: refused when the definitions load, before any run."""

import datetime as dt
from pathlib import Path

import pytest
from dagster import (
    DailyPartitionsDefinition,
    Definitions,
    MultiPartitionsDefinition,
    StaticPartitionsDefinition,
    asset,
)

from dws_dagster import (
    BindingError,
    InvalidResourceRefError,
    LineageConflictError,
    ResourceRef,
    UnknownResourceError,
    check_definitions,
    dws_ref,
)
from dws_dagster.assets.bindings import Binding, binding_from_metadata
from dws_dagster.assets.partitions import fill_partition_template, is_hive_style, path_safe
from tests.support.pipeline import build_assets, io_manager, make_workspace


@pytest.fixture
def pipeline_ws(tmp_path: Path):
    return make_workspace(tmp_path / "ws")


def _asset(name: str, **binding):
    @asset(name=name, metadata=dws_ref(**binding) if binding else None)
    def _body():
        return None

    return _body


def defs_with(ws, *assets, **manager) -> Definitions:
    return Definitions(assets=list(assets), resources={"io_manager": io_manager(ws, **manager)})


def test_the_pipeline_passes(pipeline_ws):
    defs = defs_with(pipeline_ws, *build_assets())
    assert check_definitions(defs) is defs


def test_two_assets_on_one_ref_are_named(pipeline_ws):
    defs = defs_with(
        pipeline_ws,
        _asset("a", resource="intermediate-data", subpath="x"),
        _asset("b", resource="intermediate-data", subpath="x/"),
    )
    with pytest.raises(LineageConflictError) as info:
        check_definitions(defs)
    assert "'a'" in str(info.value) and "'b'" in str(info.value)
    assert "intermediate-data/x" in str(info.value)


@pytest.mark.parametrize(("outer", "inner"), [("x", "x/y"), (None, "x")])
def test_nested_refs_are_refused_whatever_the_order(pipeline_ws, outer, inner):
    for order in ((0, 1), (1, 0)):
        pair = [
            _asset("outer", resource="intermediate-data", subpath=outer),
            _asset("inner", resource="intermediate-data", subpath=inner),
        ]
        defs = defs_with(pipeline_ws, *(pair[i] for i in order))
        with pytest.raises(LineageConflictError) as info:
            check_definitions(defs)
        assert "'outer'" in str(info.value) and "'inner'" in str(info.value)


def test_sibling_prefixes_do_not_clash(pipeline_ws):
    defs = defs_with(
        pipeline_ws,
        _asset("a", resource="intermediate-data", subpath="bar/b"),
        _asset("b", resource="intermediate-data", subpath="bar/baz"),
    )
    check_definitions(defs)


def test_default_mapping_clashes_with_an_explicit_ref(pipeline_ws):
    defs = defs_with(
        pipeline_ws,
        _asset("hourly"),
        _asset("other", resource="intermediate-data", subpath="hourly/part"),
    )
    with pytest.raises(LineageConflictError, match="'hourly'.*'other'|'other'.*'hourly'"):
        check_definitions(defs)


def test_unknown_resource_names_the_asset(pipeline_ws):
    defs = defs_with(pipeline_ws, _asset("lost", resource="nowhere", subpath="x"))
    with pytest.raises(UnknownResourceError, match="asset 'lost'.*nowhere"):
        check_definitions(defs)


def test_default_resource_must_be_unambiguous(pipeline_ws):
    pipeline_ws.add_resource("scratch", "intermediate-data", path="scratch")
    with pytest.raises(BindingError, match="asset 'plain'.*default_resource"):
        check_definitions(defs_with(pipeline_ws, _asset("plain")))
    check_definitions(defs_with(pipeline_ws, _asset("plain"), default_resource="scratch"))


def test_dws_ref_refuses_bad_bindings():
    with pytest.raises(InvalidResourceRefError):
        dws_ref("intermediate-data", "../escape")
    with pytest.raises(BindingError, match="unknown format 'xls'"):
        dws_ref("intermediate-data", "x", format="xls")
    with pytest.raises(BindingError, match="no placeholder"):
        dws_ref("intermediate-data", "x", partition_template="fixed")
    with pytest.raises(BindingError, match="partition_by"):
        binding_from_metadata({"dws/ref": "r/x", "dws/partition_by": "col"})
    assert dws_ref("r", "x") == {"dws/ref": "r/x", "dws/format": "parquet"}


def test_partition_subpaths():
    binding = Binding(ResourceRef("inter", "hourly"))
    assert (
        str(fill_partition_template(binding, "2024-01-01-05:00"))
        == "inter/hourly/2024-01-01-05%3A00"
    )
    assert str(fill_partition_template(binding, "a/b")) == "inter/hourly/a%2Fb"
    assert str(fill_partition_template(binding, "..")) == "inter/hourly/%2E%2E"
    assert fill_partition_template(binding, "a:b") != fill_partition_template(binding, "a-b")
    dims = {"date": "2024-01-01", "region": "eu"}
    multi = fill_partition_template(binding, "2024-01-01|eu", dimensions=dims)
    assert str(multi) == "inter/hourly/date=2024-01-01/region=eu"
    assert is_hive_style(binding.ref, multi)
    timed = Binding(ResourceRef("inter", "daily"), partition_template="{start:%Y/%m/%d}")
    window = (dt.datetime(2024, 3, 9), dt.datetime(2024, 3, 10))
    assert (
        str(fill_partition_template(timed, "2024-03-09", window=window)) == "inter/daily/2024/03/09"
    )
    bad = Binding(ResourceRef("inter", "x"), partition_template="{region}")
    with pytest.raises(BindingError, match="cannot be filled"):
        fill_partition_template(bad, "k")
    assert path_safe("2024-01-01") == "2024-01-01"


def test_partitioned_assets_own_their_whole_base_ref(pipeline_ws):
    daily = _partitioned(
        "daily", DailyPartitionsDefinition(start_date="2024-01-01"), subpath="events"
    )
    static = _partitioned(
        "by_region", StaticPartitionsDefinition(["eu", "us"]), subpath="events/eu"
    )
    with pytest.raises(LineageConflictError, match="'by_region'.*'daily'"):
        check_definitions(defs_with(pipeline_ws, daily, static))
    multi = _partitioned(
        "multi",
        MultiPartitionsDefinition(
            {
                "date": DailyPartitionsDefinition(start_date="2024-01-01"),
                "region": StaticPartitionsDefinition(["eu", "us"]),
            }
        ),
        subpath="multi",
    )
    check_definitions(defs_with(pipeline_ws, daily, multi))


def _partitioned(name, partitions_def, **binding):
    @asset(
        name=name, partitions_def=partitions_def, metadata=dws_ref("intermediate-data", **binding)
    )
    def _body():
        return None

    return _body
