"""The `Examples:` sections of the public API's docstrings, read as Dagster's API docs read
them (Google-style sections, code in `.. code-block:: LANG` directives): which names are public,
and the code blocks each one's examples hold."""

from __future__ import annotations

import importlib
import inspect
import re
import shlex
import textwrap
from dataclasses import dataclass
from typing import Any

import dws_dagster
import dws_dagster.lineage

#: A directive opening a code block, and its language.
_DIRECTIVE = re.compile(r"^(?P<indent> *)\.\. code-block:: *(?P<lang>\w+) *$")


@dataclass(frozen=True)
class Block:
    """One code block of an `Examples:` section."""

    lang: str
    code: str


def public_names() -> dict[str, Any]:
    """Every name `dws_dagster` (its lazy `__all__`) and `dws_dagster.lineage` export, by the
    name a user imports (the same object may be exported by both)."""
    found: dict[str, Any] = {}
    for name in dws_dagster.__all__:
        found[name] = getattr(importlib.import_module(dws_dagster._EXPORTS[name]), name)
    for name in dws_dagster.lineage.__all__:
        found.setdefault(name, getattr(dws_dagster.lineage, name))
    return found


def examples_section(obj: Any) -> str | None:
    """The body of `obj`'s `Examples:` section, dedented; None when it has none."""
    doc = inspect.getdoc(obj) or ""
    lines = doc.splitlines()
    try:
        start = lines.index("Examples:")
    except ValueError:
        return None
    body: list[str] = []
    for line in lines[start + 1 :]:
        if line.strip() and not line.startswith(" "):
            break  # the next section, or prose after the section
        body.append(line)
    return textwrap.dedent("\n".join(body)).strip("\n")


def code_blocks(section: str) -> list[Block]:
    """The code blocks of an `Examples:` section: each directive's indented lines after it."""
    lines = section.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = _DIRECTIVE.match(lines[i])
        i += 1
        if match is None:
            continue
        indent = len(match["indent"])
        code: list[str] = []
        while i < len(lines) and (
            not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent
        ):
            code.append(lines[i])
            i += 1
        blocks.append(Block(match["lang"], textwrap.dedent("\n".join(code)).strip("\n") + "\n"))
    return blocks


def blocks_of(obj: Any, lang: str) -> list[str]:
    section = examples_section(obj)
    return [b.code for b in code_blocks(section or "") if b.lang == lang]


@dataclass(frozen=True)
class ConsoleStep:
    """A `$ ...` line of a console example: its environment, its `dws-dagster` arguments,
    and the `error:` line it shows (None: it shows none)."""

    env: dict[str, str]
    argv: list[str]
    error: str | None


def console_steps(code: str) -> list[ConsoleStep]:
    """The `dws-dagster` commands of a console block, with the error line each shows."""
    steps: list[ConsoleStep] = []
    lines = code.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("$ "):
            continue
        words = shlex.split(line[2:], comments=True)
        env = {}
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            key, value = words.pop(0).split("=", 1)
            env[key] = value
        assert words and words[0] == "dws-dagster", line
        shown = lines[i + 1] if i + 1 < len(lines) else ""
        steps.append(ConsoleStep(env, words[1:], shown if shown.startswith("error: ") else None))
    return steps


def shown_pattern(shown: str) -> re.Pattern[str]:
    """What an example shows of a message, as a pattern: `...` stands for any text, and a
    12-digit hash prefix for any such prefix (the snapshot an example names is not yours)."""
    parts = []
    for piece in re.split(r"(\.\.\.|\b[0-9a-f]{12}\b)", shown):
        if piece == "...":
            parts.append(".*")
        elif re.fullmatch(r"[0-9a-f]{12}", piece):
            parts.append("[0-9a-f]{12}")
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts))
