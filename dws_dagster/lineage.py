"""Drop-in replacement for `dataworkspaces.lineage`: change the import, keep the code.

from dws_dagster.lineage import LineageBuilder   # was: from dataworkspaces.lineage import ...
"""

from __future__ import annotations

from dws_dagster.lineage_api.builder import LineageBuilder
from dws_dagster.lineage_api.params import (
    BooleanParameter,
    ChoiceParameter,
    CmdLineParameter,
    ConstantParameter,
    LineageParameter,
    add_lineage_parameters_to_arg_parser,
    get_lineage_parameter_values,
)
from dws_dagster.lineage_api.steps import Lineage, ResultsLineage, infer_step_name
from dws_dagster.workspace.refs import ResourceRef

__all__ = [
    "BooleanParameter",
    "ChoiceParameter",
    "CmdLineParameter",
    "ConstantParameter",
    "Lineage",
    "LineageBuilder",
    "LineageParameter",
    "ResourceRef",
    "ResultsLineage",
    "add_lineage_parameters_to_arg_parser",
    "get_lineage_parameter_values",
    "infer_step_name",
]
