"""Conformance of OpenLineage events to the official JSON Schemas in `shared/openlineage-spec`.

Import `validate_run_event` from any test: it checks the event against
`OpenLineage.json#/$defs/RunEvent` and every facet against the schema its `_schemaURL` names,
with format checking on (date-time, uri, uuid), and lists every problem at once. A facet whose
schema is not in the spec folder (nor one of this package's own facet schemas, which are held
to the same checks), kept under another key than the spec's, or placed where its kind does
not belong (a job facet among run facets) is a problem too: the schemas alone would let
those through, and consumers would not.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from dws_dagster.ol.custom_facets import schema_folder

__all__ = ["spec_dir", "spec_registry", "validate_run_event"]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR = PROJECT_ROOT.parent / "shared"
RUN_EVENT_DEF = "#/$defs/RunEvent"
#: formats the spec uses; jsonschema silently skips a format whose library is missing
REQUIRED_FORMATS = ("date-time", "uri", "uuid")
#: where each kind of facet sits in an event (by the base facet its schema extends)
_CONTAINERS = {
    "RunFacet": "run.facets",
    "JobFacet": "job.facets",
    "DatasetFacet": "facets",
    "InputDatasetFacet": "inputFacets",
    "OutputDatasetFacet": "outputFacets",
}


def spec_dir() -> Path:
    """The spec folder; fails the test when `shared/` is there without it (a broken checkout
    must not pass as 'skipped'), skips it on machines without `shared/` at all."""
    folder = SHARED_DIR / "openlineage-spec"
    if (folder / "OpenLineage.json").is_file():
        return folder
    if SHARED_DIR.is_dir():
        pytest.fail(
            f"OpenLineage spec not found: looked for {folder / 'OpenLineage.json'} "
            f"(the shared folder {SHARED_DIR} exists but has no spec)"
        )
    pytest.skip(f"no shared folder at {SHARED_DIR}: OpenLineage spec conformance not checked")
    raise AssertionError("unreachable")  # pragma: no cover


@functools.cache
def _load(folder: Path) -> tuple[Registry, str]:
    resources: list[tuple[str, Resource]] = []
    core_id = ""
    own = sorted(schema_folder().rglob("*.json"))
    assert own, f"no facet schemas of this package in {schema_folder()}"
    for path in [*sorted(folder.rglob("*.json")), *own]:
        contents = json.loads(path.read_text(encoding="utf-8"))
        schema_id = contents.get("$id")
        if not isinstance(schema_id, str):
            raise AssertionError(f"spec file {path} has no $id")
        resources.append((schema_id, DRAFT202012.create_resource(contents)))
        if path.name == "OpenLineage.json":
            core_id = schema_id
    if not core_id:
        raise AssertionError(f"no OpenLineage.json in {folder}")
    return Registry().with_resources(resources).crawl(), core_id


def spec_registry() -> tuple[Registry, str]:
    """Every spec file registered under its `$id`, and the `$id` of OpenLineage.json."""
    return _load(spec_dir())


def _format_checker() -> FormatChecker:
    checker = FormatChecker()
    missing = [name for name in REQUIRED_FORMATS if name not in checker.checkers]
    if missing:
        pytest.fail(
            f"format checks {missing} unavailable: install the test extra "
            "(rfc3339-validator for date-time, rfc3986-validator for uri)"
        )
    return checker


def _validator(registry: Registry, url: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": url}, registry=registry, format_checker=_format_checker())


def _leaf_errors(error: ValidationError) -> Iterator[ValidationError]:
    """The specific failures under anyOf/oneOf, not just 'is not valid under any'."""
    if error.context:
        for sub in error.context:
            yield from _leaf_errors(sub)
    else:
        yield error


def _where(prefix: str, error: ValidationError) -> str:
    path = "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
    )
    return f"{prefix}{path}" or "$"


def _schema_problems(registry: Registry, url: str, instance: Any, prefix: str) -> list[str]:
    errors = sorted(
        _validator(registry, url).iter_errors(instance),
        key=lambda e: list(map(str, e.absolute_path)),
    )
    return [
        f"{_where(prefix, leaf)}: {leaf.message}"
        for error in errors
        for leaf in _leaf_errors(error)
    ]


def _facet_problems(
    registry: Registry, container: str, key: str, facet: Any, where: str
) -> list[str]:
    if not isinstance(facet, dict):
        return [f"{where}: facet is not an object"]
    url = facet.get("_schemaURL")
    if not isinstance(url, str):
        return [f"{where}: facet has no _schemaURL"]
    base, _hash, fragment = url.partition("#")
    resolver = registry.resolver()
    try:
        definition = resolver.lookup(url).contents
        document = resolver.lookup(base).contents
    except Unresolvable:
        return [f"{where}: _schemaURL {url} names no schema in the OpenLineage spec folder"]
    problems = _schema_problems(registry, url, facet, where)
    # The facet file's top-level properties name the key the spec gives this facet.
    names = sorted(document.get("properties", {}))
    if fragment and names and key not in names:
        expected = " or ".join(map(repr, names))
        problems.append(f"{where}: a facet of {url} belongs under key {expected}")
    kind = _base_kind(definition)
    if kind is not None and _CONTAINERS[kind] != container:
        problems.append(f"{where}: a {kind} ({url}) does not belong in {container}")
    return problems


def _base_kind(definition: Any) -> str | None:
    """Which base facet (RunFacet, JobFacet, ...) a facet definition extends, if it says."""
    if not isinstance(definition, dict):
        return None
    for part in definition.get("allOf", []):
        ref = part.get("$ref", "") if isinstance(part, dict) else ""
        name = ref.rpartition("/")[2]
        if ref.partition("#")[2].startswith("/$defs/") and name in _CONTAINERS:
            return name
    return None


def _facets(event: dict[str, Any]) -> Iterator[tuple[str, str, Any, str]]:
    """(container, key, facet, where) of every facet of a RunEvent."""
    for part in ("run", "job"):
        owner = event.get(part)
        facets = owner.get("facets") if isinstance(owner, dict) else None
        if isinstance(facets, dict):
            for key, facet in facets.items():
                yield f"{part}.facets", key, facet, f"$.{part}.facets.{key}"
    for side, extra in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        datasets = event.get(side)
        if not isinstance(datasets, list):
            continue
        for index, dataset in enumerate(datasets):
            if not isinstance(dataset, dict):
                continue
            for container in ("facets", extra):
                facets = dataset.get(container)
                if isinstance(facets, dict):
                    for key, facet in facets.items():
                        yield container, key, facet, f"$.{side}[{index}].{container}.{key}"


def run_event_problems(event: dict[str, Any]) -> list[str]:
    """Every way `event` (a JSON-ready dict) departs from the spec; empty when it conforms."""
    registry, core_id = spec_registry()
    if not isinstance(event, dict):
        return [f"$: event is a {type(event).__name__}, not an object"]
    # Round-trip through JSON: what a consumer receives, not Python objects that happen to
    # validate (tuples, datetimes).
    try:
        event = json.loads(json.dumps(event))
    except (TypeError, ValueError) as exc:
        return [f"$: event is not JSON-serialisable: {exc}"]
    problems = _schema_problems(registry, core_id + RUN_EVENT_DEF, event, "$")
    schema_url = event.get("schemaURL")
    if isinstance(schema_url, str):
        try:
            registry.resolver().lookup(schema_url)
        except Unresolvable:
            problems.append(f"$.schemaURL: {schema_url} names no schema in the spec folder")
    for container, key, facet, where in _facets(event):
        problems.extend(_facet_problems(registry, container, key, facet, where))
    # A facet missing a base field fails both the event schema and its own: say it once.
    return list(dict.fromkeys(problems))


def validate_run_event(event: dict[str, Any]) -> None:
    """Assert that `event` conforms to the OpenLineage spec, listing every problem."""
    problems = run_event_problems(event)
    if problems:
        listed = "\n  ".join(problems)
        raise AssertionError(
            f"OpenLineage RunEvent does not conform to the spec "
            f"({len(problems)} problems):\n  {listed}"
        )
