"""What every command writes with: JSON on stdout, progress bars on stderr, and streams that
print any file name.

Shared here so that `--format json` and the bars look the same whatever the command; tqdm is
imported only when a bar is drawn, so commands that draw none do not load it.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson


def print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def progress_bar(total: int | None, desc: str, unit: str = "it", **kwargs: Any) -> Any:
    """A bar on stderr, shown on a terminal only and gone when closed."""
    from tqdm import tqdm

    return tqdm(
        total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, disable=None, **kwargs
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
