"""The one facet of this package's own: `dws_metrics`, the metrics of a results dataset.

A results asset's metrics (a forecast's MAE and RMSE, in its `results.json`) describe the data
as a whole; the spec's `dataQualityMetrics` holds per-column measures (nulls, distinct values,
sum, min, max, quantiles) and `outputStatistics` the rows, bytes and files written, so neither
can say them. The spec's rule for such a facet is a key prefixed by its producer (`dws_`) and
a schema of its own: `spec/facets/1-0-0/DwsMetricsDatasetFacet.json` beside this module, named
by the facet's `_schemaURL` and shipped with the package.

The class is the client's way to declare a facet (an attrs class whose `_get_schema` names its
schema), so a consumer using openlineage-python can read the facet back; events are built as
dicts (`facets`) with the same schema URL.
"""

from __future__ import annotations

from pathlib import Path

import attr
from openlineage.client.facet_v2 import DatasetFacet

__all__ = ["METRICS_FACET", "METRICS_SCHEMA_FILE", "DwsMetricsDatasetFacet", "schema_folder"]

#: the facet's key among a dataset's facets
METRICS_FACET = "dws_metrics"
_SCHEMA_URL = (
    "https://raw.githubusercontent.com/dws-dagster/dws_dagster/main/dws_dagster/ol/spec/facets/"
    "1-0-0/DwsMetricsDatasetFacet.json#/$defs/DwsMetricsDatasetFacet"
)


def schema_folder() -> Path:
    """The folder of this package's facet schemas (one file per facet and version)."""
    return Path(__file__).resolve().parent / "spec" / "facets"


#: the schema file `_SCHEMA_URL` names
METRICS_SCHEMA_FILE = schema_folder() / "1-0-0" / "DwsMetricsDatasetFacet.json"


@attr.define
class DwsMetricsDatasetFacet(DatasetFacet):
    """The metrics a results dataset's version was scored with, by name."""

    metrics: dict[str, float | int | str | bool] = attr.field(factory=dict)

    @staticmethod
    def _get_schema() -> str:
        return _SCHEMA_URL
