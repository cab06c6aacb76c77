"""What every OpenLineage event and facet this package builds shares: its producer, its schema
URL and the shape of a facet.

Events are built as the JSON-ready dicts transports send (what the client's `Serde.to_dict`
makes of its `RunEvent` classes: no None values, enums as strings) rather than through those
classes: the lineage sensor renders every event it spools, and the attrs objects (whose
validators parse every URL) would only be converted back to dicts. The schema URLs are the
client's own (each class's, through `dws_dagster._compat.openlineage.schema_url`), so events
follow the spec version of the installed client, and tests load every event back into the
client's classes.

Shared by the asset runs' events (`events`, `dataset_facets`) and the Dagster run's own
(`run_events`), so both name one producer and one spec version.
"""

from __future__ import annotations

import re
from typing import Any, Final

from openlineage.client.event_v2 import RunEvent
from openlineage.client.facet_v2 import (
    base_subset_dataset,
    column_lineage_dataset,
    data_quality_assertions_dataset,
    dataset_version_dataset,
    documentation_dataset,
    documentation_job,
    error_message_run,
    job_dependencies_run,
    job_type_job,
    nominal_time_run,
    output_statistics_output_dataset,
    ownership_dataset,
    ownership_job,
    parent_run,
    processing_engine_run,
    schema_dataset,
    source_code_job,
    source_code_location_job,
    storage_dataset,
    symlinks_dataset,
    tags_dataset,
    tags_job,
    tags_run,
)

from dws_dagster._compat import openlineage as ol_compat
from dws_dagster._version import __version__
from dws_dagster.ol.custom_facets import DwsMetricsDatasetFacet

__all__ = ["INTEGRATION", "PRODUCER", "TAG_SOURCE", "SchemaURL", "facet", "owner_entry"]

#: `producer` of every event and facet: this package's source at this version
PRODUCER = f"https://github.com/dws-dagster/dws_dagster/tree/{__version__}"
#: `jobType.integration`: names the system whose jobs these are, as SPARK or AIRFLOW do
INTEGRATION = "DAGSTER"
#: `source` of every tag this package writes (run, job and dataset tags): Dagster's own
TAG_SOURCE = "DAGSTER"


class SchemaURL:
    """`schemaURL` of a RunEvent and `_schemaURL` of each facet, from the client's classes;
    each facet's by the key it has in an event (run facets, job facets, dataset facets, then
    input and output facets)."""

    RUN_EVENT: Final = ol_compat.schema_url(RunEvent)
    PARENT: Final = ol_compat.schema_url(parent_run.ParentRunFacet)
    PROCESSING_ENGINE: Final = ol_compat.schema_url(processing_engine_run.ProcessingEngineRunFacet)
    NOMINAL_TIME: Final = ol_compat.schema_url(nominal_time_run.NominalTimeRunFacet)
    JOB_DEPENDENCIES: Final = ol_compat.schema_url(job_dependencies_run.JobDependenciesRunFacet)
    ERROR_MESSAGE: Final = ol_compat.schema_url(error_message_run.ErrorMessageRunFacet)
    RUN_TAGS: Final = ol_compat.schema_url(tags_run.TagsRunFacet)
    JOB_TYPE: Final = ol_compat.schema_url(job_type_job.JobTypeJobFacet)
    SOURCE_CODE: Final = ol_compat.schema_url(source_code_job.SourceCodeJobFacet)
    SOURCE_CODE_LOCATION: Final = ol_compat.schema_url(
        source_code_location_job.SourceCodeLocationJobFacet
    )
    DOCUMENTATION: Final = ol_compat.schema_url(documentation_job.DocumentationJobFacet)
    OWNERSHIP: Final = ol_compat.schema_url(ownership_job.OwnershipJobFacet)
    JOB_TAGS: Final = ol_compat.schema_url(tags_job.TagsJobFacet)
    DATASET_VERSION: Final = ol_compat.schema_url(
        dataset_version_dataset.DatasetVersionDatasetFacet
    )
    SYMLINKS: Final = ol_compat.schema_url(symlinks_dataset.SymlinksDatasetFacet)
    SCHEMA: Final = ol_compat.schema_url(schema_dataset.SchemaDatasetFacet)
    COLUMN_LINEAGE: Final = ol_compat.schema_url(column_lineage_dataset.ColumnLineageDatasetFacet)
    STORAGE: Final = ol_compat.schema_url(storage_dataset.StorageDatasetFacet)
    INPUT_SUBSET: Final = ol_compat.schema_url(base_subset_dataset.InputSubsetInputDatasetFacet)
    OUTPUT_SUBSET: Final = ol_compat.schema_url(base_subset_dataset.OutputSubsetOutputDatasetFacet)
    OUTPUT_STATISTICS: Final = ol_compat.schema_url(
        output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet
    )
    DATASET_DOCUMENTATION: Final = ol_compat.schema_url(
        documentation_dataset.DocumentationDatasetFacet
    )
    DATASET_OWNERSHIP: Final = ol_compat.schema_url(ownership_dataset.OwnershipDatasetFacet)
    DATASET_TAGS: Final = ol_compat.schema_url(tags_dataset.TagsDatasetFacet)
    DATA_QUALITY_ASSERTIONS: Final = ol_compat.schema_url(
        data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet
    )
    DWS_METRICS: Final = ol_compat.schema_url(DwsMetricsDatasetFacet)


def facet(schema_url: str, producer: str, **fields: Any) -> dict[str, Any]:
    """A facet: its fields without the None ones, after `_producer` and `_schemaURL`."""
    built = {"_producer": producer, "_schemaURL": schema_url}
    for name, value in fields.items():
        if value is not None:
            built[name] = value
    return built


def owner_entry(owner: str) -> dict[str, str]:
    """An owner of an `ownership` facet (a job's or a dataset's): Dagster owners are
    `team:name` or e-mail addresses."""
    if owner.startswith("team:") and owner[len("team:") :]:
        return {"name": owner[len("team:") :], "type": "team"}
    if re.fullmatch(r"[^@\s]+@[^@\s]+", owner):
        return {"name": owner, "type": "user"}
    return {"name": owner}
