"""Every use of Dagster internals, in one place, each behind one small function.

Dagster gives an IO manager no public way to set the data version of the materialization it is
storing, nor to see which asset is consuming an input or the asset's run config. These
functions reach into the step context for that; `tests/test_dagster_compat.py` exercises each
against the installed Dagster, so an upgrade that moves them fails loudly there rather than
silently losing data versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster import AssetKey, DataVersion, InputContext, OutputContext

from .errors import DwsError


class DagsterCompatibilityError(DwsError):
    """The installed Dagster no longer offers an internal dws_dagster relies on."""


def _step_context(context: InputContext | OutputContext) -> Any:
    try:
        return context.step_context
    except Exception as exc:  # DagsterInvariantViolationError outside a run
        raise DagsterCompatibilityError(
            f"no step context for {type(context).__name__}: dws_dagster needs a running "
            f"Dagster step (build_*_context without a step cannot set data versions) ({exc})"
        ) from None


def set_data_version(context: OutputContext, version: str) -> None:
    """Make `version` the Dagster data version of the materialization being stored.

    Dagster reads the step's data-version cache after `handle_output` returns, when it builds
    the materialization event, so setting it here makes the event carry the content version.
    """
    step_context = _step_context(context)
    setter = getattr(step_context, "set_data_version", None)
    if setter is None:
        raise DagsterCompatibilityError(
            "this Dagster's step context has no set_data_version(): pin dagster to a version "
            "dws_dagster supports (see pyproject.toml)"
        )
    setter(context.asset_key, DataVersion(version))


def consumer_asset_keys(context: InputContext) -> list[AssetKey]:
    """The assets computed by the step that loads this input."""
    step_context = _step_context(context)
    return sorted(step_context.get_output_asset_keys(), key=lambda key: key.path)


def step_identity(context: InputContext) -> tuple[str, str]:
    """(run id, step key) of the step loading an input: InputContext offers neither."""
    step_context = _step_context(context)
    return step_context.run_id, step_context.step.key


def asset_metadata(context: InputContext, key: AssetKey) -> Mapping[str, Any] | None:
    """Definition metadata of another asset of the running job (the consumer of an input)."""
    step_context = _step_context(context)
    try:
        return step_context.job_def.asset_layer.get(key).metadata
    except Exception:  # not an asset of this job
        return None


def op_config(context: InputContext | OutputContext) -> Mapping[str, Any]:
    """The run config of the asset's op (its Config class), as plain values."""
    config = getattr(_step_context(context), "op_config", None)
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return dict(config)
    return {"config": config}
