"""The HTML lineage page: one self-contained file (`dws-dagster lineage REF --format html`,
the demo's `lineage.html`) that lays the graph out in the browser.

`render_page(graph)` embeds the page's data (`page_content.page_data`) as JSON in a
`<script type="application/json">` element, escaped so no value can close it, with the page's
script and styles (`assets/`) and the vendored dagre layout library
(`_vendor/dagre.min.js`, MIT) inlined: nothing is fetched when the page is viewed.

The script is written as modules, one job each (`PAGE_MODULES`), and joined here rather than
by a bundler: a page opened from a file cannot load modules, and joining plain scripts in a
declared order needs no build step. The modules are checked as front-end code (ESLint and
TypeScript's type check, `npm run check`); this file only orders and inlines them.

Pure functions of the graph, like the other renderers: no Dagster, no Spark.
"""

from __future__ import annotations

import functools
import html
from importlib import resources
from typing import Any

import orjson

from dws_dagster.errors import PageAssetError
from dws_dagster.views.graph_model import LineageGraph
from dws_dagster.views.page.content import page_data

__all__ = ["PAGE_MODULES", "page_script", "render_page", "script_json"]

_ASSETS = "assets"
_VENDOR = "_vendor"
#: The page's script modules (in `assets/`), joined in this order: each uses only those
#: before it (tests/views/test_lineage_page_script.py checks each module's `/* global */` names
#: against it), and the last, the entry point, starts the page.
PAGE_MODULES = (
    "dom.js",
    "format.js",
    "data.js",
    "graph_index.js",
    "column_trace.js",
    "state.js",
    "verdicts.js",
    "node_view.js",
    "edges.js",
    "layout.js",
    "pan_zoom.js",
    "panel_kit.js",
    "panel_trace.js",
    "panel_replay.js",
    "panel_parts.js",
    "panel_history.js",
    "panel_details.js",
    "replay_banner.js",
    "header.js",
    "search.js",
    "actions.js",
    "lineage_page.js",
)


def script_json(data: Any) -> str:
    """`data` as JSON that is safe inside a `<script>` element: `<`, `>` and `&` are written
    as `\\u003c`, `\\u003e` and `\\u0026` (JSON syntax itself has none of them, so only
    string contents change and `JSON.parse` reads them back exactly), so no value can end
    the element (`</script>`) or open a comment (`<!--`). U+2028 and U+2029 are escaped too,
    for readers that take the text as JavaScript."""
    text = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS).decode()
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _inlinable(text: str, what: str, element: str) -> str:
    """`text`, refused if it could close `element` or open a comment where it is inlined."""
    lowered = text.lower()
    if f"</{element}" in lowered or "<!--" in lowered:
        raise PageAssetError(
            f"the lineage page's {what} contains '</{element}' or '<!--' and cannot "
            "be inlined; this is a packaging fault: report it"
        )
    return text


@functools.cache
def _asset(folder: str, name: str, element: str) -> str:
    """A packaged file inlined into `element`, refused if it could close that element."""
    try:
        text = (resources.files(__package__) / folder / name).read_text(encoding="utf-8")
    except OSError as exc:
        raise PageAssetError(
            f"the lineage page's {folder}/{name} is missing from the installed dws_dagster "
            f"({exc}); reinstall the package (pip install --force-reinstall dws_dagster)"
        ) from None
    return _inlinable(text, f"{folder}/{name}", element)


@functools.cache
def page_script() -> str:
    """The page's script: its modules in `PAGE_MODULES` order, inside one function so that
    their names stay out of the window's, all in strict mode."""
    parts = ["(() => {", '"use strict";']
    for name in PAGE_MODULES:
        parts += [f"// ---- {_ASSETS}/{name}", _asset(_ASSETS, name, "script")]
    parts.append("})();")
    return _inlinable("\n".join(parts), "joined script", "script")


def render_page(graph: LineageGraph) -> str:
    """One self-contained page: the data, script, styles and layout library inline."""
    data = page_data(graph)
    title = html.escape(data["title"], quote=True)
    focus = html.escape(data["focus"]["id"], quote=True)
    snapshot = (
        ""
        if graph.snapshot is None
        else (
            f'<span class="snapshot">from snapshot {html.escape(graph.snapshot, quote=True)}</span>'
        )
    )
    return (
        "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en">',
                "<head>",
                '<meta charset="utf-8">',
                '<meta name="viewport" content="width=device-width, initial-scale=1">',
                # Nothing may be fetched: every resource of the page is inline.
                '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
                "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">",
                f"<title>{title}</title>",
                f"<style>{_asset(_ASSETS, 'lineage_page.css', 'style')}</style>",
                "</head>",
                "<body>",
                '<header class="top">',
                f'<h1 title="{focus}">{title}</h1>{snapshot}',
                '<div class="search"><input id="search" type="search" autocomplete="off" '
                'placeholder="Find an asset, column or partition" '
                'aria-label="Find an asset, column or partition">'
                '<ol id="results" class="results" role="listbox" hidden></ol></div>',
                '<div class="tools"><button id="to-focus" type="button" title="Centre the focus">'
                'Focus</button><button id="fit" type="button" title="Show the whole graph">'
                "Fit</button>"
                '<button id="zoom-out" type="button" title="Zoom out" aria-label="Zoom out">'
                "−</button>"
                '<button id="zoom-in" type="button" title="Zoom in" aria-label="Zoom in">'
                "+</button>"
                "</div>",
                '<div id="legend" class="legend"></div>',
                "</header>",
                '<main class="main">',
                '<div id="viewport" class="viewport" tabindex="0" aria-label="Lineage graph">'
                '<div id="canvas" class="canvas"><svg id="edges" class="edges" aria-hidden="true">'
                '</svg><div id="nodes"></div></div>'
                f'<noscript><p class="noscript">This page draws {title} with JavaScript, which is '
                "off. The same lineage is in <code>dws-dagster lineage REF --format json</code> or "
                "<code>--format text</code>.</p></noscript></div>",
                '<aside id="panel" class="panel" aria-label="Details"></aside>',
                "</main>",
                f'<script type="application/json" id="lineage-data">{script_json(data)}</script>',
                f"<script>{_asset(_VENDOR, 'dagre.min.js', 'script')}</script>",
                f"<script>{page_script()}</script>",
                "</body>",
                "</html>",
            ]
        )
        + "\n"
    )
