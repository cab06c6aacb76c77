"""Tests of the lineage renderers on graphs built by hand."""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

import orjson
import pytest

from dws_dagster.views import diagrams as render_diagram
from dws_dagster.views import focus as render_parts
from dws_dagster.views import report as render_report
from dws_dagster.views.diagrams import render_dot, render_html, render_mermaid
from dws_dagster.views.graph_model import GraphEdge, GraphNode, LastRun, LineageGraph
from dws_dagster.views.page.content import page_data
from dws_dagster.views.report import render_json, render_text

EVENTS_V = "3f2a1b2c4d5e6f708192a3b4c5d6e7f8"
USERS_V = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
JOINED_V = "c0ffee00112233445566778899aabbcc"
HOURLY_V = "ls-9e8d7c6b5a49382716059483726150ab"
REPORT_V = "deadbeefcafebabe0123456789abcdef"


def node(ref: str, version: str | None, **kwargs: object) -> GraphNode:
    return GraphNode(id=f"{ref}@{version}", ref=ref, version=version, **kwargs)  # type: ignore[arg-type]


EVENTS = node("raw/events", EVENTS_V, status="source")
USERS = node("raw/users", USERS_V, status="source", current=False)
JOINED = node("intermediate/joined", JOINED_V, step="join", run_id="run-1")
HOURLY = node("intermediate/hourly", HOURLY_V, step="aggregate", run_id="run-2")
REPORT = node(
    "results/report",
    REPORT_V,
    step="report",
    run_id="run-3",
    start_time="2024-05-01T10:00:00Z",
    end_time="2024-05-01T10:00:01Z",
)
DASH = node("results/dash", None, step="publish", status="failed")


def diamond(**kwargs: object) -> LineageGraph:
    """raw/events and raw/users -> join -> aggregate -> report (focus) -> dash.

    raw/events also feeds aggregate directly (the diamond: two paths from one source), and
    raw/users was read at a version that is no longer current (a stale edge).
    """
    nodes = [EVENTS, USERS, JOINED, HOURLY, REPORT, DASH]
    edges = [
        GraphEdge(EVENTS.id, JOINED.id),
        GraphEdge(USERS.id, JOINED.id, stale=True),
        GraphEdge(JOINED.id, HOURLY.id),
        GraphEdge(EVENTS.id, HOURLY.id),
        GraphEdge(HOURLY.id, REPORT.id),
        GraphEdge(REPORT.id, DASH.id),
    ]
    last_run = LastRun(
        step="report",
        status="ok",
        run_id="run-3",
        start_time="2024-05-01T10:00:00Z",
        end_time="2024-05-01T10:00:01Z",
        duration_seconds=1.234,
        error=None,
    )
    return LineageGraph(
        focus=REPORT.id, nodes={n.id: n for n in nodes}, edges=edges, last_run=last_run, **kwargs
    )  # type: ignore[arg-type]


def cycle() -> LineageGraph:
    """a -> b -> c -> a, plus a self-loop on b: records should never do this, but may."""
    a, b, c = node("ref/a", "a" * 32), node("ref/b", "b" * 32, step="s"), node("ref/c", "c" * 32)
    edges = [
        GraphEdge(a.id, b.id),
        GraphEdge(b.id, c.id),
        GraphEdge(c.id, a.id, stale=True),
        GraphEdge(b.id, b.id),
    ]
    return LineageGraph(focus=a.id, nodes={n.id: n for n in (a, b, c)}, edges=edges)


TRICKY_REF = 'we"ird\\<ref> & co'
TRICKY_STEP = 'step "x" <b>\\'


def tricky() -> LineageGraph:
    """Refs, steps and errors full of characters every output format must escape."""
    odd = node(TRICKY_REF, "1" * 32, step=TRICKY_STEP, run_id="<run>")
    evil = node("raw/<script>alert(1)</script>", "2" * 32, status="source")
    hashy = node("raw/#quot;&amp;`tick`", None, status="missing")
    edges = [GraphEdge(evil.id, odd.id, stale=True), GraphEdge(hashy.id, odd.id)]
    last_run = LastRun(
        step=TRICKY_STEP,
        status="failed",
        run_id="r<1>",
        start_time=None,
        end_time=None,
        duration_seconds=None,
        error='boom <b>"bad"</b> & more',
    )
    return LineageGraph(
        focus=odd.id,
        nodes={n.id: n for n in (odd, evil, hashy)},
        edges=edges,
        last_run=last_run,
        snapshot='snap<"1">',
    )


def section(text: str, name: str) -> list[str]:
    """The lines under a heading of `render_text`, up to the next blank line."""
    lines = text.splitlines()
    start = lines.index(name) + 1
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return lines[start:end]


# --------------------------------------------------------------------------- text


def test_text_has_the_three_sections_in_order() -> None:
    lines = render_text(diamond()).splitlines()
    headings = [line for line in lines if line in ("Upstream", "Downstream", "Last run")]
    assert headings == ["Upstream", "Downstream", "Last run"]
    assert lines[0] == "Upstream"  # no snapshot line without a snapshot


def test_text_upstream_is_a_tree_with_shared_nodes_seen_above() -> None:
    assert section(render_text(diamond()), "Upstream") == [
        "  results/report@deadbeefcafe  <- report  [ok]",
        "  └── intermediate/hourly@ls-9e8d7c6b5a49  <- aggregate  [ok]",
        "      ├── intermediate/joined@c0ffee001122  <- join  [ok]",
        "      │   ├── raw/events@3f2a1b2c4d5e  [source]",
        "      │   └── raw/users@0a1b2c3d4e5f  [source] (not current) (stale)",
        "      └── raw/events@3f2a1b2c4d5e  [source] (see above)",
    ]


def test_text_downstream_follows_outputs_and_shows_missing_version() -> None:
    assert section(render_text(diamond()), "Downstream") == [
        "  results/report@deadbeefcafe  <- report  [ok]",
        "  └── results/dash (no version)  <- publish  [failed]",
    ]


def test_text_downstream_goes_deeper_than_one_level() -> None:
    graph = diamond()
    extra = node("results/archive", "f" * 32, step="archive")
    graph.nodes[extra.id] = extra
    graph.edges.append(GraphEdge(DASH.id, extra.id))
    assert section(render_text(graph), "Downstream")[-1] == (
        "      └── results/archive@ffffffffffff  <- archive  [ok]"
    )


def test_text_last_run_summary() -> None:
    lines = section(render_text(diamond()), "Last run")
    joined = "\n".join(lines)
    assert "report" in lines[0] and lines[0].strip().startswith("step")
    assert re.search(r"status:\s+ok", joined)
    assert re.search(r"run id:\s+run-3", joined)
    assert re.search(r"started:\s+2024-05-01T10:00:00Z", joined)
    assert re.search(r"finished:\s+2024-05-01T10:00:01Z", joined)
    assert re.search(r"duration:\s+1\.2 s$", joined, re.M)
    assert "error" not in joined


def test_text_last_run_error_and_long_duration() -> None:
    graph = diamond()
    assert graph.last_run is not None
    graph.last_run.status = "failed"
    graph.last_run.error = "ValueError: bad row\n  at line 3"
    graph.last_run.duration_seconds = 3725.0
    joined = "\n".join(section(render_text(graph), "Last run"))
    assert re.search(r"error:\s+ValueError: bad row$", joined, re.M)
    assert re.search(r"^\s+at line 3$", joined, re.M)
    assert "1 h 2 min 5 s" in joined


def test_text_empty_sections_and_never_run() -> None:
    alone = node("raw/only", "9" * 32, status="source")
    text = render_text(LineageGraph(focus=alone.id, nodes={alone.id: alone}))
    assert section(text, "Upstream") == ["  (none)"]
    assert section(text, "Downstream") == ["  (none)"]
    assert section(text, "Last run") == ["  (never run)"]


def test_text_snapshot_is_the_first_line() -> None:
    text = render_text(diamond(snapshot="a1b2c3"))
    assert "snapshot a1b2c3" in text.splitlines()[0]
    assert text.splitlines()[0] not in ("Upstream", "Downstream", "Last run")


@pytest.mark.timeout(10)
def test_text_cycle_terminates_and_marks_repeats() -> None:
    text = render_text(cycle())
    up = section(text, "Upstream")
    assert up[0].startswith("  ref/a@aaaaaaaaaaaa")
    # a <- c <- b, and b's inputs are a (the focus, seen) and b itself (seen): no expansion.
    assert [line.split("@")[0].strip(" │├└─") for line in up] == [
        "ref/a",
        "ref/c",
        "ref/b",
        "ref/a",
        "ref/b",
    ]
    assert up[1].endswith("(stale)")
    assert up[3].endswith("(see above)") and up[4].endswith("(see above)")
    assert sum("(see above)" in line for line in up) == 2
    down = section(text, "Downstream")
    assert len(down) == 5 and down[-1].endswith("(stale) (see above)")


@pytest.mark.timeout(20)
def test_text_long_chain_does_not_hit_the_recursion_limit() -> None:
    nodes = [node(f"ref/{i}", f"{i:032x}") for i in range(3000)]
    edges = [GraphEdge(nodes[i].id, nodes[i + 1].id) for i in range(2999)]
    graph = LineageGraph(focus=nodes[-1].id, nodes={n.id: n for n in nodes}, edges=edges)
    up = section(render_text(graph), "Upstream")
    assert len(up) == 42  # 41 levels, then a note about the 2959 deeper ones
    assert "2959 more node(s)" in up[-1]
    assert up[-2].endswith("└── ref/2959@000000000000  [ok]")


# --------------------------------------------------------------------------- JSON


def test_json_round_trips_through_orjson_and_is_sorted() -> None:
    data = render_json(diamond(snapshot="snap-1"))
    assert orjson.loads(orjson.dumps(data)) == data
    assert data["focus"] == REPORT.id and data["snapshot"] == "snap-1"
    ids = [n["id"] for n in data["nodes"]]
    assert ids == sorted(ids) and set(ids) == {n.id for n in diamond().nodes.values()}
    dash = next(n for n in data["nodes"] if n["id"] == DASH.id)
    assert dash["version"] is None and dash["status"] == "failed" and dash["step"] == "publish"
    pairs = [(e["source"], e["target"]) for e in data["edges"]]
    assert pairs == sorted(pairs) and len(pairs) == 6
    assert [e for e in data["edges"] if e["stale"]] == [
        {"source": USERS.id, "target": JOINED.id, "stale": True}
    ]
    assert data["last_run"]["duration_seconds"] == 1.234
    assert data["last_run"]["run_id"] == "run-3"


def test_json_trees_are_preorder_lists_with_depths() -> None:
    data = render_json(diamond())
    up = [
        (e["id"], e["depth"], e.get("stale", False), e.get("repeated", False))
        for e in data["upstream"]
    ]
    assert up == [
        (REPORT.id, 0, False, False),
        (HOURLY.id, 1, False, False),
        (JOINED.id, 2, False, False),
        (EVENTS.id, 3, False, False),
        (USERS.id, 3, True, False),
        (EVENTS.id, 2, False, True),
    ]
    down = [(e["id"], e["depth"]) for e in data["downstream"]]
    assert down == [(REPORT.id, 0), (DASH.id, 1)]


def test_json_and_text_handle_a_chain_deeper_than_encoders_nest() -> None:
    nodes = [
        GraphNode(id=f"r/n{i}@{i:032x}", ref=f"r/n{i}", version=f"{i:032x}") for i in range(600)
    ]
    edges = [GraphEdge(nodes[i + 1].id, nodes[i].id) for i in range(599)]
    graph = LineageGraph(focus=nodes[0].id, nodes={n.id: n for n in nodes}, edges=edges)
    data = orjson.loads(orjson.dumps(render_json(graph)))
    assert [e["depth"] for e in data["upstream"]] == list(range(600))
    text = render_text(graph)
    assert "559 more node(s) deeper than 40 levels" in text
    assert max(len(line) for line in text.splitlines()) < 300


def test_json_is_deterministic_whatever_the_input_order() -> None:
    graph = diamond()
    shuffled = diamond()
    order = list(shuffled.nodes.items())
    random.Random(7).shuffle(order)
    shuffled.nodes = dict(order)
    random.Random(8).shuffle(shuffled.edges)
    assert orjson.dumps(render_json(shuffled)) == orjson.dumps(render_json(graph))


def test_json_without_last_run_and_with_cycle() -> None:
    data = render_json(cycle())
    assert data["last_run"] is None and data["snapshot"] is None
    orjson.dumps(data)
    repeated = [e for e in data["upstream"] if e.get("repeated")]
    assert {e["id"] for e in repeated} == {"ref/a@" + "a" * 32, "ref/b@" + "b" * 32}


def test_json_adds_placeholders_for_edge_ends_without_nodes() -> None:
    graph = diamond()
    graph.edges.append(GraphEdge("raw/gone@" + "0" * 32, JOINED.id))
    data = render_json(graph)
    gone = next(n for n in data["nodes"] if n["id"] == "raw/gone@" + "0" * 32)
    assert gone["ref"] == "raw/gone" and gone["version"] == "0" * 32
    assert gone["status"] == "missing"


# --------------------------------------------------------------------------- DOT

_DOT_TOKEN = re.compile(
    r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<arrow>->)'
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_.]*|-?\d+(?:\.\d+)?)|(?P<punct>[{}\[\];=,]))",
    re.S,
)


def dot_unquote(token: str) -> str:
    assert token[0] == token[-1] == '"'
    return re.sub(
        r"\\(.)",
        lambda m: {"n": "\n", '"': '"', "\\": "\\"}.get(m.group(1), "\\" + m.group(1)),
        token[1:-1],
        flags=re.S,
    )


def parse_dot(text: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, str, dict]]]:
    """A small DOT reader: fails unless the whole text tokenizes (so quoting is balanced)."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text.rstrip()):
        match = _DOT_TOKEN.match(text, pos)
        assert match, f"cannot tokenize DOT at {text[pos : pos + 40]!r}"
        kind = match.lastgroup
        assert kind is not None
        value = match.group(kind)
        tokens.append((kind, dot_unquote(value) if kind == "quoted" else value))
        pos = match.end()
    assert tokens[:3] == [("word", "digraph"), ("word", "lineage"), ("punct", "{")]
    assert tokens[-1] == ("punct", "}")
    body = tokens[3:-1]
    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict]] = []

    def attrs(at: int) -> tuple[dict[str, str], int]:
        found: dict[str, str] = {}
        if at < len(body) and body[at] == ("punct", "["):
            at += 1
            while body[at] != ("punct", "]"):
                key, eq, value = body[at], body[at + 1], body[at + 2]
                assert eq == ("punct", "=") and key[0] == "word"
                found[key[1]] = value[1]
                at += 3
                if body[at] == ("punct", ","):
                    at += 1
            at += 1
        return found, at

    i = 0
    while i < len(body):
        kind, value = body[i]
        if kind == "word" and value in ("node", "edge", "graph"):
            _, i = attrs(i + 1)
        elif body[i + 1] == ("punct", "="):
            i += 3
        elif body[i + 1] == ("arrow", "->"):
            assert kind == "quoted" and body[i + 2][0] == "quoted"
            found, next_i = attrs(i + 3)
            edges.append((value, body[i + 2][1], found))
            i = next_i
        else:
            assert kind == "quoted", f"unexpected {body[i]}"
            assert value not in nodes, f"node {value!r} declared twice"
            nodes[value], i = attrs(i + 1)
        assert body[i] == ("punct", ";"), f"missing ; before {body[i : i + 3]}"
        i += 1
    return nodes, edges


def test_dot_has_every_node_and_edge_once() -> None:
    graph = diamond()
    nodes, edges = parse_dot(render_dot(graph))
    assert set(nodes) == set(graph.nodes)
    assert sorted((s, t) for s, t, _ in edges) == sorted((e.source, e.target) for e in graph.edges)
    assert len(edges) == len({(s, t) for s, t, _ in edges})
    styles = {(s, t): a.get("style") for s, t, a in edges}
    assert styles[(USERS.id, JOINED.id)] == "dashed"
    assert [k for k, v in styles.items() if v == "dashed"] == [(USERS.id, JOINED.id)]


def test_duplicate_edges_are_drawn_once_and_stale_if_any_is() -> None:
    graph = diamond()
    graph.edges.append(GraphEdge(USERS.id, JOINED.id, stale=False))  # after the stale one
    graph.edges.insert(0, GraphEdge(HOURLY.id, REPORT.id, stale=False))
    _, edges = parse_dot(render_dot(graph))
    assert len(edges) == 6
    assert {(s, t): a.get("style") for s, t, a in edges}[(USERS.id, JOINED.id)] == "dashed"
    data = render_json(graph)
    assert len(data["edges"]) == 6
    assert [(e["source"], e["target"]) for e in data["edges"] if e["stale"]] == [
        (USERS.id, JOINED.id)
    ]
    assert len(re.findall(r" -(?:-|\.-)> ", render_mermaid(graph))) == 6


def test_dot_header_labels_focus_and_colours() -> None:
    text = render_dot(diamond())
    assert text.startswith("digraph lineage {\n  rankdir=LR;")
    nodes, _ = parse_dot(text)
    assert nodes[REPORT.id]["label"] == "results/report\n@deadbeefcafe\nreport\nok"
    assert nodes[DASH.id]["label"] == "results/dash\n(no version)\npublish\nfailed"
    assert nodes[USERS.id]["label"] == "raw/users\n@0a1b2c3d4e5f\nsource (not current)"
    assert "bold" in nodes[REPORT.id]["style"] and "penwidth" in nodes[REPORT.id]
    assert all("penwidth" not in a for k, a in nodes.items() if k != REPORT.id)
    colours = {k: a["fillcolor"] for k, a in nodes.items()}
    assert colours[EVENTS.id] == colours[USERS.id]  # both sources
    assert len({colours[EVENTS.id], colours[REPORT.id], colours[DASH.id]}) == 3


def test_dot_escapes_quotes_backslashes_and_newlines() -> None:
    graph = tricky()
    text = render_dot(graph)
    nodes, edges = parse_dot(text)
    odd_id = f"{TRICKY_REF}@{'1' * 32}"
    assert set(nodes) == set(graph.nodes)
    assert nodes[odd_id]["label"] == f"{TRICKY_REF}\n@111111111111\n{TRICKY_STEP}\nok"
    assert {(s, t) for s, t, _ in edges} == {(e.source, e.target) for e in graph.edges}
    # A raw newline in a ref becomes a line break, never a broken string.
    graph.nodes[odd_id] = GraphNode(id=odd_id, ref="two\nlines", version="1" * 32)
    text = render_dot(graph)
    nodes, _ = parse_dot(text)
    assert nodes[odd_id]["label"].split("\n")[:2] == ["two", "lines"]
    assert 'label="two\\nlines\\n@111111111111\\nok"' in text


def test_dot_quote_helper_is_injective_on_awkward_strings() -> None:
    samples = ["a", 'a"', "a\\", 'a\\"', "a\\n", "a\n", '"', "\\\\"]
    quoted = [render_diagram._dot_quote(s) for s in samples]
    assert len(set(quoted)) == len(samples)
    assert [dot_unquote(q) for q in quoted] == samples


# --------------------------------------------------------------------------- Mermaid


def mermaid_nodes(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in re.finditer(r'^  (\S+)\["(.*)"\]$', text, re.M):
        assert match.group(1) not in found
        found[match.group(1)] = match.group(2)
    return found


def test_mermaid_ids_unique_and_edges() -> None:
    graph = diamond()
    text = render_mermaid(graph)
    assert text.startswith("flowchart LR\n")
    nodes = mermaid_nodes(text)
    assert len(nodes) == len(graph.nodes)
    assert all(re.fullmatch(r"n\d+", key) for key in nodes)
    by_ref = {label.split("<br/>")[0]: key for key, label in nodes.items()}
    solid = re.findall(r"^  (n\d+) --> (n\d+)$", text, re.M)
    dotted = re.findall(r"^  (n\d+) -\.-> (n\d+)$", text, re.M)
    assert dotted == [(by_ref["raw/users"], by_ref["intermediate/joined"])]
    assert len(solid) == 5 and (by_ref["results/report"], by_ref["results/dash"]) in solid
    assert re.search(rf"^  class {by_ref['results/report']} focus$", text, re.M)
    assert re.search(r"^  classDef focus ", text, re.M)
    failed = re.search(r"^  class (\S+) st_failed$", text, re.M)
    assert failed and failed.group(1) == by_ref["results/dash"]
    sources = re.search(r"^  class (\S+) st_source$", text, re.M)
    assert sources and set(sources.group(1).split(",")) == {
        by_ref["raw/events"],
        by_ref["raw/users"],
    }


def test_mermaid_labels_are_escaped() -> None:
    text = render_mermaid(tricky())
    labels = mermaid_nodes(text)
    assert len(labels) == 3
    for label in labels.values():
        assert '"' not in label and "<" not in label.replace("<br/>", "")
        assert ">" not in label.replace("<br/>", "") and "`" not in label
    odd = next(label for label in labels.values() if label.startswith("we"))
    assert odd.startswith("we#quot;ird\\#lt;ref#gt; #amp; co<br/>")
    hashy = next(label for label in labels.values() if "tick" in label)
    # A literal `#quot;` in a ref must not turn into a quote: its `#` is escaped first.
    assert hashy.startswith("raw/#35;quot;#amp;amp;#96;tick#96;")


# --------------------------------------------------------------------------- any graph


def random_case(rng: random.Random, most_nodes: int, most_edges: int) -> tuple[int, list]:
    """A node count and (source index, target index, stale) triples, loops and repeats allowed."""
    count = rng.randint(1, most_nodes)
    pairs = [
        (rng.randrange(count), rng.randrange(count), rng.random() < 0.3)
        for _ in range(rng.randint(0, most_edges))
    ]
    return count, pairs


@pytest.mark.parametrize("seed", range(40))
def test_every_renderer_handles_any_graph(seed: int) -> None:
    count, pairs = random_case(random.Random(1000 + seed), 8, 20)
    nodes = [node(f"r/{i}", f"{i:032x}") for i in range(count)]
    edges = [GraphEdge(nodes[s].id, nodes[t].id, stale) for s, t, stale in pairs]
    graph = LineageGraph(focus=nodes[0].id, nodes={n.id: n for n in nodes}, edges=edges)
    text = render_text(graph)
    reachable_up = {nodes[0].id}
    frontier = [nodes[0].id]
    while frontier:
        current = frontier.pop()
        for e in edges:
            if e.target == current and e.source not in reachable_up:
                reachable_up.add(e.source)
                frontier.append(e.source)
    up = section(text, "Upstream")
    expanded = [line for line in up if "(see above)" not in line and line != "  (none)"]
    if any(e.target == nodes[0].id for e in edges):
        assert len(expanded) == len(reachable_up)  # each reachable node expanded once
    else:
        assert up == ["  (none)"]
    tree = render_json(graph)["upstream"]
    assert orjson.loads(orjson.dumps(tree)) == tree
    dot_nodes, dot_edges = parse_dot(render_dot(graph))
    assert set(dot_nodes) == set(graph.nodes)
    assert {(s, t) for s, t, _ in dot_edges} == {(e.source, e.target) for e in edges}
    assert len(mermaid_nodes(render_mermaid(graph))) == count
    # The HTML page (tests/views/test_lineage_page.py) places every node in one of its boxes.
    data = page_data(graph)
    placed = [key for group in data["groups"] for key in group["parts"]["key"]]
    assert len(placed) == count
    assert render_html(graph).count('id="lineage-data"') == 1


# --------------------------------------------------------------------------- module


def _imported(statements: Iterable[ast.AST]) -> set[str]:
    imported: set[str] = set()
    for item in statements:
        if isinstance(item, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in item.names}
        elif isinstance(item, ast.ImportFrom):
            module = item.module or ""
            imported.add(module if module.startswith("dws_dagster") else module.split(".")[0])
    return imported


@pytest.mark.parametrize(
    "module",
    [render_parts, render_report, render_diagram],
    ids=lambda module: module.__name__.rsplit(".", 1)[-1],
)
def test_render_imports_only_stdlib_orjson_and_the_graph_model(module: ModuleType) -> None:
    tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
    at_load = _imported(tree.body)
    anywhere = _imported(ast.walk(tree))
    assert at_load <= {
        "__future__",
        "bisect",
        "html",
        "dataclasses",
        "typing",
        "orjson",
        "dws_dagster.views.graph_model",
        "dws_dagster.views.focus",
        "dws_dagster.views.report",
        # `short`, the one way versions are shortened for display (the CLI's too).
        "dws_dagster.workspace.versions",
    }
    # `render_html` imports the page module (its own dependencies) only when called.
    assert anywhere - at_load <= {"dws_dagster.views.page.document"}
    assert not {"dagster", "pyspark"} & anywhere
