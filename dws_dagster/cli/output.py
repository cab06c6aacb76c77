"""What every command writes with: the one writer of text to the terminal, JSON on stdout,
progress bars on stderr, and streams that print any file name.

Data reaches the output from everywhere: step names, errors of failed steps, snapshot
messages, metric and parameter names and values, file names, a catalog's HTTP answer. Any of
them may hold characters that drive a terminal instead of showing: ESC and the C0 controls
(`ESC[2J` clears the screen, OSC 0 sets the window title, OSC 8 plants a link, a carriage
return overwrites the line), the C1 controls U+0080–U+009F (single-character CSI and OSC on
many terminals), bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069: text
shown reversed) and the other format characters (zero-width, line and paragraph separators),
or a newline that starts a line the command did not write. So nothing is escaped where it is
printed; `main` puts `TerminalStream` over stdout and stderr while a command runs, and every
character of that kind is shown escaped, as Python writes it in a string (`\\x1b`, `\\u202e`,
`\\n`), whatever renderer printed it:

* a write keeps its leading and trailing newlines (a command's own layout: `print()`,
  `print("\\nRefs:")`, a log line's end) and its tabs; a newline inside it is data, escaped;
* `say(line)` writes one line of a renderer: any newline in it is data, escaped;
* `print_json` writes exact JSON: the characters above are written as JSON's own `\\uXXXX`
  escapes, so the output parses to exactly the values, and shows no control either;
* `write_exact` writes a document as it is (the HTML lineage page, which escapes for HTML);
* progress bars draw on the stream under the guard (a bar is made of carriage returns) with
  their labels escaped.

File names that are not UTF-8 are kept by Python as surrogate escapes and written back as their
bytes (`utf8_tolerant_output`), except bytes 0x80–0x9F, the C1 controls of 8-bit terminals,
which are escaped (`\\x9b`) like the rest. tqdm is imported only when a bar is drawn, so
commands that draw none do not load it.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import orjson

#: Unicode categories never written raw: controls, format characters (bidi overrides and
#: isolates, zero-width characters...), line and paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
#: Surrogate escapes of the bytes 0x80–0x9F (C1 controls on an 8-bit terminal); those of
#: 0xA0–0xFF are written back as the bytes of a file name that is not UTF-8.
_C1_BYTES = range(0xDC80, 0xDCA0)
_SURROGATE_BYTES = range(0xDC80, 0xDD00)


def unsafe(char: str) -> bool:
    """Whether `char` may not reach a terminal raw (newline and tab included: whoever writes
    decides where those are layout)."""
    code = ord(char)
    if 0x20 <= code < 0x7F:
        return False
    if 0xD800 <= code <= 0xDFFF:
        return code not in _SURROGATE_BYTES or code in _C1_BYTES
    return unicodedata.category(char) in _UNSAFE_CATEGORIES


def escaped(char: str) -> str:
    """`char` as Python writes it in a string literal (`\\x1b`, `\\u202e`, `\\n`); a surrogate
    escape as the byte it stands for (`\\x9b`)."""
    code = ord(char)
    if code in _SURROGATE_BYTES:
        return f"\\x{code - 0xDC00:02x}"
    return repr(char)[1:-1]


def terminal_text(text: str, keep: str = "") -> str:
    """`text` with every character `unsafe` for a terminal shown escaped, except those in
    `keep` (the writer's own newlines or tabs)."""
    if text.isprintable():  # the usual case, checked at C speed
        return text
    return "".join(c if c in keep or not unsafe(c) else escaped(c) for c in text)


def _guarded(text: str) -> str:
    """A write as the terminal may see it: its leading and trailing newlines and its tabs kept
    (the writer's layout), any other newline and every other unsafe character escaped."""
    if text.isprintable():
        return text
    body = text.strip("\n")
    if not body:
        return text
    start = len(text) - len(text.lstrip("\n"))
    return text[:start] + terminal_text(body, keep="\t") + text[start + len(body) :]


class TerminalStream:
    """A text stream over `stream` that escapes what `_guarded` escapes in everything written
    through it; everything else (flush, fileno, isatty, encoding...) is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(_guarded(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def underlying(stream: Any) -> Any:
    """The stream under a `TerminalStream` (or `stream` itself): for what is written exactly."""
    return stream.stream if isinstance(stream, TerminalStream) else stream


@contextmanager
def terminal_safe_output() -> Iterator[None]:
    """stdout and stderr behind a `TerminalStream` for the block (as they were after it)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalStream(saved[0]), TerminalStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def say(line: str = "", *, file: TextIO | None = None) -> None:
    """One line of a command's text output (stdout unless `file`): a newline in it is data and
    is shown escaped, as is every other character unsafe for a terminal."""
    (sys.stdout if file is None else file).write(terminal_text(line, keep="\t") + "\n")


def say_lines(lines: Iterable[str], *, file: TextIO | None = None) -> None:
    for line in lines:
        say(line, file=file)


def say_text(text: str, *, file: TextIO | None = None) -> None:
    """A renderer's multi-line text, whose newlines are its own (its data's are escaped or
    replaced by the renderer): each line through `say`."""
    say_lines(text[:-1].split("\n") if text.endswith("\n") else text.split("\n"), file=file)


_JSON_UNSAFE = re.compile(r"[^\x00-\x7e]")


def json_text(value: Any) -> str:
    """`value` as indented JSON whose every character is safe on a terminal: orjson escapes
    the C0 controls; the other unsafe characters (C1, DEL, bidi and format characters), which
    it writes raw, become `\\uXXXX` escapes. Parsed, it is exactly `value`."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    return _JSON_UNSAFE.sub(_json_escape, text) if not text.isascii() or "\x7f" in text else text


def _json_escape(match: re.Match[str]) -> str:
    char = match.group(0)
    if not unsafe(char):
        return char
    code = ord(char)
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def print_json(value: Any) -> None:
    write_exact(json_text(value) + "\n")


def write_exact(text: str) -> None:
    """`text` to stdout as it is, past the terminal guard: a document whose format escapes
    what it holds (JSON from `json_text`, the HTML page)."""
    underlying(sys.stdout).write(text)


def progress_bar(total: int | None, desc: str, unit: str = "it", **kwargs: Any) -> Any:
    """A bar on stderr, shown on a terminal only and gone when closed; its label escaped (a
    ref's name), the bar itself drawn on the stream under the guard."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=terminal_text(desc),
        unit=unit,
        file=underlying(sys.stderr),
        leave=False,
        disable=None,
        **kwargs,
    )


def utf8_tolerant_output() -> None:
    """File names that are not UTF-8 (kept by Python as surrogate escapes) are written back as
    their bytes instead of failing the print."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="surrogateescape")
            except (ValueError, OSError):
                pass
