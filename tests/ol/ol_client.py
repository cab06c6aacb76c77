"""Load an event dict back into openlineage-python's own classes, field for field.

The event builders write dicts directly (faster than going through the client's attrs
classes); this is the check that they still say exactly what the client would: every key must
be a field of the client's class for that place (facets found by their `_schemaURL`), every
value must have the field's type, and the client's serialization of what was loaded must give
the dict back. The JSON Schemas alone would not catch a misspelt optional field: most facet
schemas allow additional properties.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import types
import typing
from enum import Enum
from typing import Any

import attr
import openlineage.client.generated as generated
from openlineage.client.event_v2 import RunEvent
from openlineage.client.generated.base import BaseFacet
from openlineage.client.serde import Serde

from dws_dagster.ol import custom_facets

__all__ = ["as_client_event", "check_client_roundtrip"]


class NotTheClientsShape(AssertionError):
    """The dict has a key, value or facet the client's classes do not."""


@functools.cache
def _facet_classes() -> dict[str, type]:
    """Every facet class the client ships, and this package's own, by its schema URL."""
    found: dict[str, type] = {}
    modules = [
        importlib.import_module(f"{generated.__name__}.{module_info.name}")
        for module_info in pkgutil.iter_modules(generated.__path__)
    ]
    for module in [*modules, custom_facets]:
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseFacet)
                and value is not BaseFacet
                and attr.has(value)
            ):
                found.setdefault(value._get_schema(), value)
    return found


@functools.cache
def _fields(cls: type) -> dict[str, Any]:
    attr.resolve_types(cls)
    return {field.name: field for field in attr.fields(cls)}


def _convert(value: Any, hint: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        problems = []
        for option in (arg for arg in args if arg is not type(None)):
            try:
                return _convert(value, option, where)
            except NotTheClientsShape as exc:
                problems.append(str(exc))
        raise NotTheClientsShape("; ".join(problems))
    if origin is list:
        if not isinstance(value, list):
            raise NotTheClientsShape(f"{where}: expected a list, got {value!r}")
        return [_convert(item, args[0], f"{where}[{index}]") for index, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise NotTheClientsShape(f"{where}: expected an object, got {value!r}")
        return {key: _convert(item, args[1], f"{where}.{key}") for key, item in value.items()}
    if hint is Any:
        return value
    if origin is typing.Literal:
        if value not in args:
            raise NotTheClientsShape(f"{where}: {value!r} is not one of {args}")
        return value
    if isinstance(hint, type) and issubclass(hint, Enum):
        try:
            return hint(value)
        except ValueError:
            raise NotTheClientsShape(f"{where}: {value!r} is not a {hint.__name__}") from None
    if isinstance(hint, type) and attr.has(hint):
        return _build(hint, value, where)
    if hint is float and type(value) is int:
        return value
    if isinstance(hint, type) and type(value) is not hint:
        raise NotTheClientsShape(f"{where}: expected {hint.__name__}, got {value!r}")
    return value


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise NotTheClientsShape(f"{where}: expected an object for {cls.__name__}, got {data!r}")
    if issubclass(cls, BaseFacet):
        url = data.get("_schemaURL")
        concrete = _facet_classes().get(url)
        if concrete is None or not issubclass(concrete, cls):
            raise NotTheClientsShape(
                f"{where}: no {cls.__name__} of the client has the schema URL {url!r}"
            )
        cls = concrete
    fields = _fields(cls)
    kwargs = {}
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            raise NotTheClientsShape(f"{where}: {cls.__name__} has no field {key!r}")
        if not field.init:
            continue  # `_schemaURL`: the class sets it, and the round trip compares it
        kwargs[field.alias] = _convert(value, field.type, f"{where}.{key}")
    for name, field in fields.items():
        if name not in data and field.init and _optional(field.type):
            kwargs[field.alias] = None  # absent means unset, not the class's default ({}, [])
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise NotTheClientsShape(f"{where}: {cls.__name__} refuses {data!r}: {exc}") from None


def _optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(
        None
    ) in typing.get_args(hint)


def as_client_event(event: dict[str, Any]) -> RunEvent:
    """The client's `RunEvent` holding what `event` holds; raises `NotTheClientsShape`."""
    return _build(RunEvent, event, "event")


def check_client_roundtrip(event: dict[str, Any]) -> None:
    """`event` loads into the client's classes and serializes back to itself."""
    again = Serde.to_dict(as_client_event(event))
    if again != event:
        raise NotTheClientsShape(f"the client's serialization differs:\n{again}\n!=\n{event}")
