"""Nested fields of the schema facet, parsed from Spark's simple type strings.

The sensor records each column's type as Spark writes it (`DataType.simpleString()`, e.g.
`array<struct<a:int,b:string>>`), so this parses text and needs no Spark: `ol` imports
neither Dagster nor Spark. Fields inside structs are named as OpenLineage's Spark integration
names them, so catalogs show one shape whichever integration wrote the dataset.
"""

from __future__ import annotations

from typing import Any

__all__ = ["schema_field", "spark_type_fields"]


class _Unparsable(Exception):
    """A type string this parser does not follow (e.g. Spark's truncated `... N more`)."""


def spark_type_fields(spark_type: str) -> list[dict[str, Any]] | None:
    """Nested fields of a Spark simple type string (schema facet fields), or None when it has
    no struct inside.

    `struct<a:int,b:string>` gives fields a and b; `array<struct<...>>` an `_element` field and
    `map<k,struct<...>>` `key` and `value` fields, as OpenLineage's Spark integration names
    them; a string this does not parse (Spark truncates wide structs) gives None.
    """
    try:
        _text, children, end = _parse_type(spark_type, 0)
    except (_Unparsable, IndexError, ValueError):
        return None
    if end != len(spark_type):
        return None
    return children


def schema_field(column: str, spark_type: str, position: int | None) -> dict[str, Any]:
    """A schema facet field: a column, its type string and, for a struct inside, its nested
    fields."""
    return _field(column, spark_type, position, spark_type_fields(spark_type))


def _field(
    name: str, spark_type: str, position: int | None, children: list[dict[str, Any]] | None
) -> dict[str, Any]:
    field: dict[str, Any] = {"name": name, "type": spark_type}
    if position is not None:
        field["ordinal_position"] = position
    if children is not None:
        field["fields"] = children
    return field


def _parse_type(text: str, start: int) -> tuple[str, list[dict[str, Any]] | None, int]:
    """(type string, nested fields or None, end index) of the type starting at `start`."""
    if text.startswith("struct<", start):
        return _parse_struct(text, start)
    if text.startswith("array<", start):
        element, children, end = _parse_type(text, start + len("array<"))
        end = _expect(text, end, ">")
        nested = [_field("_element", element, None, children)] if children is not None else None
        return text[start:end], nested, end
    if text.startswith("map<", start):
        key, key_children, end = _parse_type(text, start + len("map<"))
        end = _expect(text, end, ",")
        value, value_children, end = _parse_type(text, end)
        end = _expect(text, end, ">")
        nested = None
        if key_children is not None or value_children is not None:
            nested = [
                _field("key", key, None, key_children),
                _field("value", value, None, value_children),
            ]
        return text[start:end], nested, end
    depth, end = 0, start
    while end < len(text):
        char = text[end]
        if char in "(<":
            depth += 1
        elif char in ")>" and depth:
            depth -= 1
        elif char in ",>" and not depth:
            break
        end += 1
    if end == start:
        raise _Unparsable(text)
    return text[start:end], None, end


def _parse_struct(text: str, start: int) -> tuple[str, list[dict[str, Any]], int]:
    position = start + len("struct<")
    fields: list[dict[str, Any]] = []
    if text.startswith(">", position):
        return text[start : position + 1], fields, position + 1
    while True:
        colon = text.index(":", position)
        name = text[position:colon]
        if not name or any(char in name for char in "<>,"):
            raise _Unparsable(text)
        field_type, children, position = _parse_type(text, colon + 1)
        fields.append(_field(name, field_type, len(fields) + 1, children))
        if text.startswith(",", position):
            position += 1
            continue
        end = _expect(text, position, ">")
        return text[start:end], fields, end


def _expect(text: str, position: int, char: str) -> int:
    if not text.startswith(char, position):
        raise _Unparsable(text)
    return position + 1
