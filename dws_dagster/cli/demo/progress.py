"""The demo's progress on stderr, apart from what it runs.

A bar on a terminal; else a line per step as it starts, flushed at once, so a log or a pipe
shows the demo working instead of a minute of silence.
"""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

from dws_dagster.cli.output import terminal_text, underlying


class Progress:
    """The demo's progress on stderr: a bar on a terminal; else a line per step as it starts,
    flushed at once (a log file or a pipe shows the demo working, not a minute of silence)."""

    def __init__(self, total: int | None = None) -> None:
        self.interactive = sys.stderr.isatty()
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.bar = (
            tqdm(
                total=total or 1,
                desc="demo",
                unit="step",
                # the bar's carriage returns go past the CLI's terminal guard; labels are
                # escaped here
                file=underlying(sys.stderr),
                disable=not self.interactive,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]{postfix}",
            )
            if self.interactive
            else None
        )

    def step(self, label: str) -> None:
        """Step `label` starts."""
        if self.bar is not None:
            self.bar.set_postfix_str(terminal_text(label))
            return
        elapsed = int(time.monotonic() - self.started)
        count = f"{self.done + 1}/{self.total} " if self.total else ""
        print(
            f"demo [{elapsed // 60:02d}:{elapsed % 60:02d}] {count}{label}",
            file=sys.stderr,
            flush=True,
        )

    def set_total(self, total: int) -> None:
        self.total = total
        if self.bar is not None:
            self.bar.total = total
            self.bar.refresh()

    def advance(self) -> None:
        """The current step is done."""
        self.done += 1
        if self.bar is not None:
            self.bar.update()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
