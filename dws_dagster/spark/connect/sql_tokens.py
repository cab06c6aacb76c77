"""The words and symbols of Spark SQL expression text, as `sql_parser` reads them: the tokens,
and the keyword sets that tell the parser where an operand, a function's arguments or a type
ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class SqlSyntaxError(Exception):
    """Text this parser does not follow (it may still be valid Spark SQL)."""


_TOKEN = re.compile(
    r"""
    (?P<space>\s+|--[^\n]*|/\*.*?\*/)
  | (?P<string>[rR]?'(?:[^'\\]|\\.)*'|[rR]?"(?:[^"\\]|\\.)*")
  | (?P<quoted>`(?:[^`]|``)*`)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:BD|bd|[LSYDFlsydf])?(?![A-Za-z_]))
  | (?P<word>[A-Za-z_][A-Za-z_0-9]*|\d+[A-Za-z_][A-Za-z_0-9]*)
  | (?P<symbol><=>|>>>|<<|>>|\|\||<=|>=|<>|!=|==|::|->|=>|[-+*/%&|^~!=<>()\[\],.:?])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class Token:
    kind: str  # string, number, word, quoted, symbol, end
    text: str

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


def tokenize(text: str) -> list[Token]:
    found: list[Token] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise SqlSyntaxError(f"unexpected {text[position]!r}")
        position = match.end()
        kind = match.lastgroup or ""
        if kind == "space":
            continue
        value = match.group()
        if kind == "quoted":
            kind, value = "word_q", value[1:-1].replace("``", "`")
        found.append(Token(kind, value))
    found.append(Token("end", ""))
    return found


BINARY_SYMBOLS = frozenset(
    [
        "+",
        "-",
        "*",
        "/",
        "%",
        "||",
        "&",
        "|",
        "^",
        "=",
        "==",
        "!=",
        "<>",
        "<",
        "<=",
        ">",
        ">=",
        "<=>",
        "<<",
        ">>",
        ">>>",
    ]
)
BINARY_WORDS = frozenset({"AND", "OR", "DIV", "LIKE", "ILIKE", "RLIKE", "REGEXP", "BETWEEN"})
TYPED_LITERALS = frozenset({"DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "TIME", "X"})
INTERVAL_UNITS = frozenset(
    unit + suffix
    for unit in (
        [
            "YEAR",
            "MONTH",
            "WEEK",
            "DAY",
            "HOUR",
            "MINUTE",
            "SECOND",
            "MILLISECOND",
            "MICROSECOND",
            "NANOSECOND",
        ]
    )
    for suffix in ("", "S")
) | {"TO"}
#: Keyword functions a column of the same name hides (Spark's grammar, without parentheses).
NILADIC = frozenset(
    {"CURRENT_DATE", "CURRENT_TIMESTAMP", "CURRENT_TIME", "CURRENT_USER", "USER", "SESSION_USER"}
)
#: Functions whose first argument is a unit keyword, not a column (`timestampadd(HOUR, 1, t)`).
UNIT_FIRST = frozenset(
    {"timestampadd", "dateadd", "date_add", "timestampdiff", "datediff", "date_diff", "time_diff"}
)
#: Words that end an operand list: they belong to the construct around it.
STOPS = frozenset(
    {"AS", "THEN", "ELSE", "WHEN", "END", "FROM", "FOR", "IN", "PLACING", "ORDER", "PARTITION"}
    | {"ROWS", "RANGE", "PRECEDING", "FOLLOWING", "ASC", "DESC", "NULLS", "DISTRIBUTE", "SORT"}
    | {"CLUSTER", "BY", "ESCAPE", "IGNORE", "RESPECT", "WITHIN", "FILTER", "OVER"}
)
