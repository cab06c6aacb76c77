"""What a `WorkspaceComponent`'s `defs.yaml` may say, and the checks it passes when it loads.

The pydantic models are the schema Dagster shows and editors complete (`dg utils
inspect-component`, `dg check yaml`): unknown keys are refused by the schema. Validation
itself lets them through to `parse_attributes`, which refuses them with a `ComponentConfigError`
(a `DwsError`) naming the file and the key, as it refuses a ref that leaves its resource and a
credential written in the file: the errors every dws_dagster user catches, with the words of
the rest of dws_dagster.

Credentials: a value under a key that names one (`password`, `token`, `secret.key`, …) or that
holds one (a URL's password, a known token's shape) is refused, written out or from the
environment alike — what the YAML gives becomes the configuration of a Dagster resource,
which the Dagster UI shows. The one exception is the store URL: `store_url: "{{ env.VAR }}"`
hands the resource the variable's *name*, and the URL is read where the code runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dws_dagster.assets.bindings import FORMATS, VERSIONINGS
from dws_dagster.errors import ComponentConfigError, DwsError
from dws_dagster.workspace.redaction import is_secret_name, redact_text
from dws_dagster.workspace.refs import ResourceRef

#: `{{ env.NAME }}` or `{{ env('NAME') }}`, the whole value: the one template kept as a name.
_ENV_TEMPLATE = re.compile(
    r"^\{\{\s*env(?:\.(?P<dot>[A-Za-z_][A-Za-z0-9_]*)|\(\s*['\"](?P<call>[A-Za-z_][A-Za-z0-9_]*)"
    r"['\"]\s*\))\s*\}\}$"
)
SEVERITIES = ("blocking", "warning")
CHECK_KINDS = ("data_version", "inputs", "reproduced")


# ------------------------------------------------------------------------------- schema


class _Section(BaseModel):
    # Unknown keys pass validation and are refused by `parse_attributes`, with the file and
    # key named; the schema editors and `dg check yaml` read refuses them too.
    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": False})


class WorkspaceSection(_Section):
    root: str = Field(
        default=".", description="The workspace folder (holding .dataworkspace/), or one in it."
    )
    search_parents: bool = Field(
        default=True, description="Look for .dataworkspace/ in the folders above root."
    )
    store_url: str | None = Field(
        default=None,
        description="The lineage store: '{{ env.VAR }}' names the environment variable that "
        "holds its URL, read where the code runs; a URL written here may hold no password. "
        "Default: $DWS_STORE_URL, .dataworkspace/config.json, else SQLite.",
    )


class IOManagerSection(_Section):
    format: str = Field(default="parquet", description="parquet, csv, json or orc.")
    versioning: str = Field(default="rows", description="rows or files.")
    keep_versions: int = Field(
        default=0, description="Replaced versions kept per ref beyond snapshots'."
    )
    column_lineage: bool = Field(default=True, description="Column lineage from plans.")
    verify_inputs: bool = Field(default=False, description="Re-hash local inputs.")
    default_resource: str | None = Field(
        default=None, description="Resource of assets bound nowhere (at their key path)."
    )


class PySparkSection(_Section):
    spark_config: dict[str, Any] = Field(
        default={}, description="Spark configuration (no credentials: the UI shows it)."
    )


class SensorSection(_Section):
    enabled: bool = Field(default=True, description="Add the lineage sensor.")
    name: str = Field(default="dws_lineage_sensor", description="The sensor's name.")
    running: bool = Field(default=True, description="Runs without being turned on.")
    minimum_interval_seconds: int = Field(default=30, description="Between ticks.")
    snapshot_on_results: bool = Field(
        default=False, description="A snapshot after each run that wrote results."
    )
    openlineage: bool = Field(
        default=True, description="OpenLineage events (OpenLineage's own configuration)."
    )


class AssetBindingSection(_Section):
    key: str | None = Field(default=None, description="One asset's key ('a/b').")
    select: str | None = Field(
        default=None,
        description="Assets by Dagster's selection syntax; each lives at its key path below ref.",
    )
    ref: str = Field(description="The workspace ref: 'resource/subpath'.")
    format: str | None = Field(default=None, description="parquet, csv, json or orc.")
    partition_template: str | None = Field(default=None, description="Below the ref.")
    partition_by: list[str] = Field(default=[], description="Spark partitionBy columns.")
    write_options: dict[str, Any] = Field(default={}, description="Spark writer options.")
    read_options: dict[str, Any] = Field(default={}, description="Spark reader options.")
    versioning: str | None = Field(default=None, description="rows or files.")


class ChecksSection(_Section):
    select: str = Field(
        default="*", description="Which bound assets get checks (selection syntax)."
    )
    checks: list[str] = Field(
        default=list(CHECK_KINDS), description="data_version, inputs, reproduced."
    )
    severity: str = Field(default="warning", description="blocking (ERROR) or warning (WARN).")
    full: bool = Field(default=False, description="Re-read every byte of the data.")


class WorkspaceComponentModel(_Section):
    """The attributes of a `dws_dagster.WorkspaceComponent`."""

    workspace: WorkspaceSection = Field(default_factory=WorkspaceSection)
    io_manager: IOManagerSection = Field(default_factory=IOManagerSection)
    pyspark: PySparkSection = Field(default_factory=PySparkSection)
    sensor: SensorSection = Field(default_factory=SensorSection)
    assets: list[AssetBindingSection] = Field(default=[])
    checks: ChecksSection | None = Field(default=None)


# ------------------------------------------------------------------------------ settings


@dataclass(frozen=True)
class AssetBinding:
    """One entry of `assets`: an asset key or a selection, bound to a ref."""

    where: str
    ref: str
    key: str | None = None
    select: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ComponentSettings:
    """A `defs.yaml`'s attributes, checked and with their templates rendered."""

    file: Path
    workspace: Mapping[str, Any]
    store_url_env: str | None
    io_manager: Mapping[str, Any]
    spark_config: Mapping[str, str]
    sensor: Mapping[str, Any]
    assets: Sequence[AssetBinding]
    checks: Mapping[str, Any] | None


_SECTIONS: dict[str, type[_Section]] = {
    "workspace": WorkspaceSection,
    "io_manager": IOManagerSection,
    "pyspark": PySparkSection,
    "sensor": SensorSection,
    "checks": ChecksSection,
}


def parse_attributes(raw: Mapping[str, Any], file: Path, render: Any) -> ComponentSettings:
    """Check `raw` (the attributes as written, templates unrendered) and render them with
    `render` (Dagster's resolution context: `{{ env.VAR }}` and the rest)."""
    _known_keys(raw, WorkspaceComponentModel, file, "attributes")
    _no_credentials(raw, file, "attributes")
    workspace = dict(raw.get("workspace") or {})
    store_url = workspace.pop("store_url", None)
    store_url_env = _store_url_env(store_url, file) if store_url is not None else None
    rendered = render.resolve_value(
        {key: value for key, value in raw.items() if key != "workspace"} | {"workspace": workspace}
    )
    io_manager = _section(rendered, "io_manager", file)
    _choice(io_manager, "format", FORMATS, file, "attributes.io_manager")
    _choice(io_manager, "versioning", VERSIONINGS, file, "attributes.io_manager")
    checks = rendered.get("checks")
    if checks is not None:
        checks = _section(rendered, "checks", file)
        _choice(checks, "severity", SEVERITIES, file, "attributes.checks")
        for kind in checks["checks"]:
            if kind not in CHECK_KINDS:
                raise ComponentConfigError(
                    f"{file}: attributes.checks.checks: unknown check {kind!r}; choose among "
                    f"{', '.join(CHECK_KINDS)}"
                )
    pyspark = _section(rendered, "pyspark", file)
    return ComponentSettings(
        file=file,
        workspace=_section(rendered, "workspace", file),
        store_url_env=store_url_env,
        io_manager=io_manager,
        spark_config={str(k): str(v) for k, v in pyspark["spark_config"].items()},
        sensor=_section(rendered, "sensor", file),
        assets=[
            _binding(item, file, f"attributes.assets[{index}]")
            for index, item in enumerate(rendered.get("assets") or [])
        ],
        checks=checks,
    )


def _section(rendered: Mapping[str, Any], name: str, file: Path) -> dict[str, Any]:
    """A rendered section, with its defaults, its values of the types the schema says."""
    model = _SECTIONS[name]
    try:
        return model.model_validate(rendered.get(name) or {}).model_dump()
    except ValueError as exc:  # pydantic's ValidationError, after rendering
        raise ComponentConfigError(f"{file}: attributes.{name}: {_first_error(exc)}") from None


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        return f"{where}: {first.get('msg')} (got {first.get('input')!r})"
    return str(exc)


def _choice(
    section: Mapping[str, Any], key: str, choices: Sequence[str], file: Path, where: str
) -> None:
    value = section.get(key)
    if value is not None and value not in choices:
        raise ComponentConfigError(
            f"{file}: {where}.{key}: {value!r} is not one of {', '.join(choices)}"
        )


def _known_keys(raw: Any, model: type[BaseModel], file: Path, where: str) -> None:
    """Refuse keys the model does not know, at any depth; name the first one."""
    if not isinstance(raw, Mapping):
        return
    fields = model.model_fields
    for key, value in raw.items():
        if key not in fields:
            raise ComponentConfigError(
                f"{file}: {where}.{key}: unknown key; {where} takes {', '.join(sorted(fields))}"
            )
        annotation = fields[key].annotation
        inner = _section_type(annotation)
        if inner is None:
            continue
        if isinstance(value, list):
            for index, item in enumerate(value):
                _known_keys(item, inner, file, f"{where}.{key}[{index}]")
        else:
            _known_keys(value, inner, file, f"{where}.{key}")


def _section_type(annotation: Any) -> type[BaseModel] | None:
    """The section model an annotation holds (`X`, `X | None`, `list[X]`), if any."""
    candidates = [annotation, *getattr(annotation, "__args__", ())]
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, _Section):
            return candidate
    return None


def _no_credentials(raw: Any, file: Path, where: str) -> None:
    """Refuse a credential anywhere in the attributes (see the module's docstring)."""
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            path = f"{where}.{key}"
            if path == "attributes.workspace.store_url":
                continue  # checked by _store_url_env
            if isinstance(value, str) and value.strip() and is_secret_name(str(key)):
                raise ComponentConfigError(
                    f"{file}: {path}: a credential may not be written in defs.yaml, nor taken "
                    "into it from the environment ({{ env.VAR }}): it would become resource "
                    "configuration, which the Dagster UI shows. Remove it; give it to Spark "
                    "through the environment or spark-defaults.conf where the code runs"
                )
            _no_credentials(value, file, path)
    elif isinstance(raw, list):
        for index, item in enumerate(raw):
            _no_credentials(item, file, f"{where}[{index}]")
    elif isinstance(raw, str) and redact_text(raw) != raw:
        raise ComponentConfigError(
            f"{file}: {where}: the value holds a credential (a password in a URL, a token); "
            "keep credentials out of defs.yaml, in the environment where the code runs"
        )


def _store_url_env(value: Any, file: Path) -> str:
    """The environment variable `store_url` names: `{{ env.VAR }}` only, so the URL and its
    password stay in the environment and out of the resource's configuration."""
    where = f"{file}: attributes.workspace.store_url"
    text = str(value).strip()
    found = _ENV_TEMPLATE.match(text)
    if found:
        return found["dot"] or found["call"]
    if redact_text(text) != text:
        raise ComponentConfigError(
            f"{where}: the URL holds a password, written in defs.yaml (kept under version "
            "control): put the whole URL in an environment variable and write "
            '"{{ env.DWS_STORE_URL }}"'
        )
    raise ComponentConfigError(
        f"{where}: give the environment variable that holds the store's URL, as "
        '"{{ env.DWS_STORE_URL }}" (the URL is read where the code runs); a URL without a '
        "password can also go in .dataworkspace/config.json ('dws-dagster init --store URL')"
    )


def _binding(item: Any, file: Path, where: str) -> AssetBinding:
    section = AssetBindingSection.model_validate(item) if isinstance(item, Mapping) else None
    if section is None:
        raise ComponentConfigError(f"{file}: {where}: expected a mapping with key or select, ref")
    if (section.key is None) == (section.select is None):
        raise ComponentConfigError(
            f"{file}: {where}: give either key (one asset) or select (a selection), not "
            f"{'both' if section.key else 'neither'}"
        )
    try:
        ref = ResourceRef.parse(section.ref)
    except DwsError as exc:
        raise ComponentConfigError(f"{file}: {where}.ref: {exc}") from None
    for name in ("format", "versioning"):
        value = getattr(section, name)
        choices = FORMATS if name == "format" else VERSIONINGS
        if value is not None and value not in choices:
            raise ComponentConfigError(
                f"{file}: {where}.{name}: {value!r} is not one of {', '.join(choices)}"
            )
    options = {
        name: getattr(section, name)
        for name in (
            "format",
            "partition_template",
            "partition_by",
            "write_options",
            "read_options",
            "versioning",
        )
        if getattr(section, name) not in (None, [], {})
    }
    return AssetBinding(
        where=where, ref=str(ref), key=section.key, select=section.select, options=options
    )
