"""Names and values written into Spark SQL text. The Spark code builds expressions as SQL text
(one call into Spark, where Column objects take one per operation, and the same text on a
classic session and on Spark Connect), so every column name and string value in that text goes
through here."""

from __future__ import annotations


def quoted_name(name: str) -> str:
    """A column name as a Spark SQL identifier, whatever characters it holds."""
    return "`" + name.replace("`", "``") + "`"


def string_literal(text: str) -> str:
    """A Spark SQL string literal of `text`."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
