"""Opening the HTML lineage page of a large graph in headless Chromium.

A synthetic lineage of `--assets` partitioned assets of `--partitions` partitions each (in
layers of ten, each asset reading one to three earlier ones partition by partition, with
parameters and column lineage in every record) and a report reading the last one (the
focus) is rendered by `render_html`; Chromium then opens it from a file, `--repeats` times,
alternating with two baselines measured in the same run:

  blank page        an empty HTML file: what opening any file costs
  same bytes        a file of the page's size holding its JSON data and no script: what
                    reading that many bytes costs before any layout

Printed for the page: the time from navigation to the page's ready mark (its nodes laid out
and the focus centred), and the script's own parts (JSON parse, building the nodes, the dagre
layout, placing the view); each as milliseconds (median) and as a ratio to the blank page.
Also printed: the Python side (`page_data`, `render_html`) and the file's size.

Target: the page ready in under 2 s at 200 assets x 1,000 partitions.

    python bench/lineage_page.py --assets 200 --partitions 1000 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assets", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--columns", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from dws_dagster.views.diagrams import render_html
    from dws_dagster.views.page.content import page_data
    from dws_dagster.views.page.document import script_json
    from tests.views.lineage_page_graphs import synthetic_graph

    started = time.perf_counter()
    graph = synthetic_graph(args.assets, args.partitions, columns=args.columns)
    built = time.perf_counter()
    data = page_data(graph)
    modelled = time.perf_counter()
    page = render_html(graph)
    rendered = time.perf_counter()
    print(
        f"graph: {len(graph.nodes):,} versions, {len(graph.edges):,} edges "
        f"({args.assets} assets x {args.partitions} partitions; built in "
        f"{built - started:.1f} s)"
    )
    print(
        f"page: {len(data['groups'])} nodes, {len(data['edges'])} edges, "
        f"{len(data['column_edges'])} column edges, {len(page) / 1e6:.1f} MB"
    )
    print(
        f"python: page_data {modelled - built:.2f} s, render_html (page_data included) "
        f"{rendered - modelled:.2f} s"
    )

    with tempfile.TemporaryDirectory(prefix="dws-bench-page-") as tmp:
        folder = Path(tmp)
        files = {
            "blank page": folder / "blank.html",
            "same bytes": folder / "bytes.html",
            "lineage page": folder / "page.html",
        }
        files["blank page"].write_text("<!DOCTYPE html><title>blank</title>", encoding="utf-8")
        files["same bytes"].write_text(
            '<!DOCTYPE html><title>bytes</title><script type="application/json">'
            f"{script_json(data)}</script>",
            encoding="utf-8",
        )
        files["lineage page"].write_text(page, encoding="utf-8")
        loads: dict[str, list[float]] = {name: [] for name in files}
        parts: dict[str, list[float]] = {}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                for _ in range(args.repeats):
                    for name, path in files.items():
                        context = browser.new_context(
                            viewport={"width": args.width, "height": args.height}
                        )
                        tab = context.new_page()
                        tab.goto(path.as_uri(), timeout=120_000)
                        if name == "lineage page":
                            tab.wait_for_selector("html[data-ready=true]", timeout=120_000)
                            # From the navigation's start to the end of the page's script
                            # (nodes laid out, focus centred), as the page measured it.
                            timings = tab.evaluate("window.lineagePage.timings")
                            focus_box = tab.locator(".node.focus").bounding_box()
                            if focus_box is None or focus_box["x"] < 0:
                                raise SystemExit("the focus is not in the window")
                            loads[name].append(timings["ready"])
                            for key, value in timings.items():
                                parts.setdefault(key, []).append(value)
                        else:
                            loads[name].append(
                                tab.evaluate(
                                    "performance.getEntriesByType('navigation')[0].loadEventEnd"
                                )
                            )
                        context.close()
            finally:
                browser.close()

    blank = statistics.median(loads["blank page"])
    print(f"\nChromium, median of {args.repeats} (ratio to the blank page, {blank:.0f} ms):")
    for name in ("same bytes", "lineage page"):
        value = statistics.median(loads[name])
        label = name + (" (to ready)" if name == "lineage page" else "")
        print(f"  {label:<26}{value:8.0f} ms   {value / blank:6.1f}x")
    print("  the page's script:")
    for key in ("parse", "build", "layout", "show", "total"):
        value = statistics.median(parts[key])
        print(f"    {key:<24}{value:8.0f} ms   {value / blank:6.1f}x")
    ready = statistics.median(loads["lineage page"])
    verdict = "met" if ready < 2000 else "NOT met"
    print(
        f"\ntarget (ready < 2 s at 200 assets x 1,000 partitions): {ready / 1000:.2f} s, {verdict}"
    )


if __name__ == "__main__":
    main()
