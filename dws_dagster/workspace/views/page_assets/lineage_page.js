/* The lineage page (lineage_page.py inlines this file after the data and dagre).
 *
 * One node per asset or step (its partitions grouped), laid out left to right by dagre;
 * the focus centred on open; a details panel; column lineage traced across nodes; search;
 * on the page of a replayed snapshot, each node's replay verdicts and a banner summing them up.
 * Every value from the data reaches the page through textContent or an attribute, never as
 * markup. */
(function () {
  "use strict";
  var started = performance.now();
  var DATA = JSON.parse(document.getElementById("lineage-data").textContent);
  var parsed = performance.now();
  var G = DATA.groups;
  var STATUSES = DATA.statuses;
  var CE = DATA.column_edges;
  var NODE_WIDTH = 272;
  var MIN_READABLE = 0.7;      // auto zoom never goes below this: text stays legible
  var COLS_SHOWN = 40;         // columns listed in an expanded node
  var COLS_BESIDE_PATH = 6;    // other columns listed beside the traced ones
  var PARTS_SHOWN = 2000;      // partition rows listed before "show all"
  var VERDICT_ROWS = 200;      // verdicts listed in a panel table before "and N more"
  var REPLAY = DATA.replay || null;

  var viewport = document.getElementById("viewport");
  var canvas = document.getElementById("canvas");
  var svg = document.getElementById("edges");
  var nodesEl = document.getElementById("nodes");
  var panel = document.getElementById("panel");
  var search = document.getElementById("search");
  var results = document.getElementById("results");
  var SVGNS = "http://www.w3.org/2000/svg";

  // ------------------------------------------------------------------ helpers

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function svgEl(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  function short(v) { return v ? String(v).slice(0, 12) : "–"; }
  function plural(n, one, many) { return n.toLocaleString("en") + " " + (n === 1 ? one : many); }
  function shown(v) {
    if (v === null || v === undefined) return "–";
    return typeof v === "string" ? v : JSON.stringify(v);
  }
  function when(t) {
    if (!t) return "–";
    return String(t).replace("T", " ").replace(/\.\d+/, "").replace(/\+00:00$/, " UTC");
  }
  function duration(s) {
    if (s === null || s === undefined) return "–";
    if (s < 60) return s.toFixed(1) + " s";
    var whole = Math.round(s), h = Math.floor(whole / 3600), m = Math.floor(whole % 3600 / 60);
    return (h ? h + " h " : "") + m + " min " + (whole % 60) + " s";
  }
  function unit(d) {
    if (d.kind === "files") return ["file", "files"];
    return d.partitioned ? ["partition", "partitions"] : ["version", "versions"];
  }
  function ck(g, c) { return g + "\u0000" + c; }
  function push(map, key, value) {
    var list = map.get(key);
    if (list) list.push(value); else map.set(key, [value]);
  }
  function derivation(e) { return e[5] ? e[5] : e[4]; }
  /* "asset.column"; a folder of files ends in "/", so its columns read "folder/ · column". */
  function colLabel(g, c) {
    var name = G[g].name;
    return name.charAt(name.length - 1) === "/" ? name + " · " + c : name + "." + c;
  }

  // ------------------------------------------------------------------ replay verdicts

  /* Each verdict has a sign and its words on the page, never its colour alone. */
  var VERDICT_SIGN = { "reproduced": "✓", "differs": "≠", "non-deterministic": "≈",
                       "failed": "✗", "not replayable": "⊘" };
  function verdictClass(v) {
    return Object.prototype.hasOwnProperty.call(VERDICT_SIGN, v) ? "v-" + v.replace(/ /g, "-")
      : "v-other";
  }
  function verdictPill(v, count, title) {
    var sign = verdictClass(v) === "v-other" ? "?" : VERDICT_SIGN[v];
    var pill = el("span", "verdict " + verdictClass(v), sign + " " +
                  (count !== undefined ? count.toLocaleString("en") + " " : "") + v);
    if (title) pill.title = title;
    return pill;
  }
  var entryMaps = new Map();
  /* The verdict of member i of node g: spelled out in its entries, else read from its marks
   * (a plain "reproduced": the replay wrote the very version recorded); null if not judged. */
  function memberVerdict(g, i) {
    var r = G[g].replay;
    if (!r) return null;
    var map = entryMaps.get(g);
    if (!map) {
      map = new Map();
      r.entries.forEach(function (e) { map.set(e.member, e); });
      entryMaps.set(g, map);
    }
    if (map.has(i)) return map.get(i);
    var mark = r.marks.charAt(i);
    if (mark === "-" || mark === "") return null;
    var v = REPLAY.verdicts[mark.charCodeAt(0) - 48];
    var version = G[g].parts.version[i];
    return { member: i, verdict: v, recorded: version, step: null, detail: null, columns: null,
             reproduced: v === "reproduced" ? version : null, unlisted: v !== "reproduced" };
  }
  /* The columns whose content a replay of node g's versions found different. */
  var differing = new Map();
  function differingColumns(g) {
    var set = differing.get(g);
    if (set) return set;
    set = new Set();
    var r = G[g].replay;
    if (r) r.entries.forEach(function (e) {
      if (e.verdict !== "reproduced" && e.columns) e.columns.forEach(function (c) { set.add(c); });
    });
    differing.set(g, set);
    return set;
  }
  /* What a verdict says beyond its name, in one line: the detail and the columns. */
  function verdictNote(e) {
    var parts = [];
    if (e.detail) parts.push(e.detail);
    if (e.columns && e.columns.length) parts.push("columns: " + e.columns.join(", "));
    return parts.join("; ");
  }

  // ------------------------------------------------------------------ indexes

  var inputsOf = G.map(function () { return []; });
  var outputsOf = G.map(function () { return []; });
  DATA.edges.forEach(function (e, i) { outputsOf[e[0]].push(i); inputsOf[e[1]].push(i); });
  var colIn = new Map(), colOut = new Map();
  var rowsIn = G.map(function () { return []; });
  CE.forEach(function (e, i) {
    push(colOut, ck(e[0], e[1]), i);
    if (e[3] === null) rowsIn[e[2]].push(i); else push(colIn, ck(e[2], e[3]), i);
  });
  var FOCUS = DATA.focus.group;

  var state = {
    selected: FOCUS, trace: null, expanded: new Set(),
    scale: 1, tx: 0, ty: 0, pos: [], width: 0, height: 0
  };

  // ------------------------------------------------------------------ column lineage

  /* Every column upstream and downstream of (g, c): for each, the derivations of the edges
   * into it that the trace followed. Whole-table (dataset) lineage into a node joins the
   * upstream of each of its columns; downstream it marks the node's rows, not its columns. */
  function trace(g, c) {
    var up = new Map(), down = new Map(), used = new Map(), rows = new Map();
    var into = new Map();  // column key -> edges into it that the trace used
    var start = ck(g, c);
    var stack = [[g, c]], seen = new Set([start]), rowsDone = new Set();
    while (stack.length) {
      var item = stack.pop();
      var incoming = colIn.get(ck(item[0], item[1])) || [];
      if (!rowsDone.has(item[0])) { rowsDone.add(item[0]); incoming = incoming.concat(rowsIn[item[0]]); }
      incoming.forEach(function (i) {
        var e = CE[i], k = ck(e[0], e[1]);
        if (!used.has(i)) used.set(i, "up");
        if (e[3] !== null) push(into, ck(e[2], e[3]), i); else push(rows, e[2], i);
        if (!seen.has(k)) { seen.add(k); up.set(k, [e[0], e[1]]); stack.push([e[0], e[1]]); }
      });
    }
    stack = [[g, c]]; seen = new Set([start]);
    while (stack.length) {
      item = stack.pop();
      (colOut.get(ck(item[0], item[1])) || []).forEach(function (i) {
        var e = CE[i];
        if (!used.has(i)) used.set(i, "down");
        if (e[3] === null) { push(rows, e[2], i); return; }
        var k = ck(e[2], e[3]);
        push(into, k, i);
        if (!seen.has(k)) { seen.add(k); down.set(k, [e[2], e[3]]); stack.push([e[2], e[3]]); }
      });
    }
    var groups = new Set([g]);
    up.forEach(function (v) { groups.add(v[0]); });
    down.forEach(function (v) { groups.add(v[0]); });
    rows.forEach(function (_, tg) { groups.add(tg); });
    return { g: g, c: c, up: up, down: down, used: used, into: into, rows: rows, groups: groups };
  }

  function columnRole(g, c) {
    var t = state.trace;
    if (!t) return null;
    if (t.g === g && t.c === c) return "sel";
    var k = ck(g, c);
    if (t.up.has(k)) return "up";
    if (t.down.has(k)) return "down";
    return null;
  }

  function howText(g, c) {
    var t = state.trace, list = t && t.into.get(ck(g, c));
    if (!list) return "";
    var names = [];
    list.forEach(function (i) {
      var d = derivation(CE[i]);
      if (names.indexOf(d) < 0) names.push(d);
    });
    return "← " + names.join(", ");
  }

  // ------------------------------------------------------------------ nodes

  var nodeEls = [];

  function statusBar(counts, total) {
    var bar = el("div", "bar");
    var parts = [];
    STATUSES.forEach(function (s) {
      if (!counts[s]) return;
      var seg = el("span", s);
      seg.style.flexGrow = String(counts[s]);
      bar.appendChild(seg);
      parts.push(counts[s].toLocaleString("en") + " " + s);
    });
    bar.title = parts.join(", ") + " of " + total.toLocaleString("en");
    bar.setAttribute("role", "img");
    bar.setAttribute("aria-label", bar.title);
    return bar;
  }

  /* What the node holds: its version, or how many partitions (files, versions) and which. */
  function infoLines(d) {
    var det = d.details;
    if (d.count > 1) {
      var u = unit(d);
      return [plural(d.count, u[0], u[1]), d.range[0] + " … " + d.range[1]];
    }
    if (d.partitioned && d.range) return ["1 " + unit(d)[0] + " · " + det.status, d.range[0]];
    return [(det.version ? "@" + short(det.version) : "no version") + " · " + det.status];
  }

  function subText(d) {
    if (d.kind === "asset") return d.ref || d.name;
    if (d.kind === "step") return "step " + d.step;
    if (d.kind === "files") return (d.role || "source data") + " files";
    if (d.kind === "source") return (d.role || "source") + " · " + d.ref;
    if (d.role) return d.role;
    return d.details.status === "source" ? "source data" : "no step recorded";
  }

  function buildNode(g) {
    var d = G[g];
    var n = el("div", "node st-" + d.status + (d.focus ? " focus" : ""));
    n.dataset.group = String(g);
    n.tabIndex = 0;
    n.setAttribute("role", "button");
    var title = el("div", "title", d.name);
    title.title = d.name;
    n.appendChild(title);
    if (d.focus) n.appendChild(el("span", "badge", "focus"));
    var sub = el("div", "sub", subText(d));
    sub.title = sub.textContent;
    n.appendChild(sub);
    infoLines(d).forEach(function (line, i) {
      var info = el("div", i ? "sub range" : "info", line);
      info.title = line;
      n.appendChild(info);
    });
    if (d.members > 1) n.appendChild(statusBar(d.counts, d.members));
    if (d.replay) n.appendChild(verdictLine(g));
    var extra = el("div", "node-cols");
    n.appendChild(extra);
    n.addEventListener("click", function (ev) {
      var col = ev.target.closest(".col");
      if (col) { selectColumn(g, col.dataset.col); ev.stopPropagation(); return; }
      if (ev.target.closest(".cols-btn")) { toggleColumns(g); ev.stopPropagation(); return; }
      select(g);
    });
    n.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); select(g); }
    });
    fillColumns(g, n, extra);
    return n;
  }

  /* The node's replay verdicts, under its status: one pill (and what it found) when the
   * replay judged one of its versions, else a pill per verdict with its count. */
  function verdictLine(g) {
    var d = G[g], r = d.replay;
    var box = el("div", "verdicts");
    var words = [];
    if (r.judged === 1) {
      var e = memberVerdict(g, r.entries.length ? r.entries[0].member : r.marks.search(/[0-9]/));
      box.appendChild(verdictPill(e.verdict, undefined, verdictNote(e) || null));
      words.push(e.verdict);
      if (e.columns && e.columns.length) {
        var cols = "columns: " + e.columns.join(", ");
        box.appendChild(span("verdict-cols", cols, cols));
      }
      if (e.detail) box.appendChild(span("verdict-note", e.detail, e.detail));
    } else {
      REPLAY.verdicts.forEach(function (v) {
        if (!r.counts[v]) return;
        box.appendChild(verdictPill(v, r.counts[v]));
        words.push(r.counts[v].toLocaleString("en") + " " + v);
      });
      if (r.judged < d.members) {
        box.appendChild(el("span", "verdict-of", "of " + plural(r.judged, unit(d)[0], unit(d)[1]) +
                           " replayed"));
      }
    }
    box.setAttribute("aria-label", "Replay: " + words.join(", "));
    box.title = "Replay of snapshot " + REPLAY.snapshot_name + ": " + words.join(", ");
    return box;
  }

  /* The node's columns: a button when folded; the list when expanded or traced (the traced
   * columns first-class, a few others beside them, the rest counted). */
  function fillColumns(g, n, box) {
    var d = G[g];
    box = box || n.querySelector(".node-cols");
    box.textContent = "";
    var t = state.trace;
    var traced = t && t.groups.has(g);
    var rowsNote = t && t.rows.get(g);
    if (rowsNote) {
      var kinds = [];
      rowsNote.forEach(function (i) {
        var k = derivation(CE[i]) + " (" + CE[i][1] + ")";
        if (kinds.indexOf(k) < 0) kinds.push(k);
      });
      box.appendChild(el("div", "rows-note", "rows ← " + kinds.join(", ")));
    }
    if (!d.columns.length) return;
    var open = state.expanded.has(g) || traced;
    var btn = el("button", "cols-btn", plural(d.columns.length, "column", "columns") +
                 (open ? " ▴" : " ▾"));
    btn.type = "button";
    btn.setAttribute("aria-expanded", open ? "true" : "false");
    box.appendChild(btn);
    if (!open) return;
    var list = el("ul", "cols");
    var picked = d.columns;
    var limit = state.expanded.has(g) ? COLS_SHOWN : COLS_BESIDE_PATH;
    if (traced) {
      var onPath = d.columns.filter(function (c) { return columnRole(g, c); });
      var others = d.columns.filter(function (c) { return !columnRole(g, c); });
      picked = onPath.concat(others.slice(0, Math.max(0, limit - onPath.length)));
      picked = d.columns.filter(function (c) { return picked.indexOf(c) >= 0; });
    } else {
      picked = d.columns.slice(0, limit);
    }
    picked.forEach(function (c) {
      var role = columnRole(g, c);
      var differs = differingColumns(g).has(c);
      var li = el("li", "col" + (role ? " " + role : (t ? " off" : "")) + (differs ? " differs" : ""));
      li.dataset.col = c;
      li.title = colLabel(g, c) + (differs ? " — its content differs in the replay" : "") +
        " — click to trace its lineage";
      if (differs) li.appendChild(span("dmark", "≠", "its content differs in the replay"));
      li.appendChild(el("span", "name", c));
      var how = howText(g, c);
      if (how) {
        var howEl = el("span", "how", how);
        howEl.title = how;
        li.appendChild(howEl);
      }
      list.appendChild(li);
    });
    if (picked.length < d.columns.length) {
      list.appendChild(el("li", "more", "+" + (d.columns.length - picked.length) +
                          " more (all in the details panel)"));
    }
    box.appendChild(list);
  }

  function buildNodes() {
    var frag = document.createDocumentFragment();
    G.forEach(function (d, g) { var n = buildNode(g); nodeEls.push(n); frag.appendChild(n); });
    nodesEl.appendChild(frag);
  }

  // ------------------------------------------------------------------ layout and drawing

  function layout() {
    var graph = new dagre.graphlib.Graph();
    // network-simplex ranks best; tight-tree is much faster on large graphs.
    graph.setGraph({ rankdir: "LR", nodesep: 22, ranksep: 84, edgesep: 10, marginx: 30,
                     marginy: 30, ranker: G.length > 120 ? "tight-tree" : "network-simplex" });
    graph.setDefaultEdgeLabel(function () { return {}; });
    var heights = nodeEls.map(function (n) { return n.offsetHeight; });
    G.forEach(function (d, g) {
      graph.setNode(String(g), { width: NODE_WIDTH, height: heights[g] });
    });
    DATA.edges.forEach(function (e) { graph.setEdge(String(e[0]), String(e[1])); });
    dagre.layout(graph);
    state.pos = G.map(function (d, g) {
      var p = graph.node(String(g));
      return { x: p.x, y: p.y, w: NODE_WIDTH, h: heights[g] };
    });
    state.points = ports(DATA.edges.map(function (e) {
      return graph.edge(String(e[0]), String(e[1])).points.slice();
    }));
    var info = graph.graph();
    state.width = info.width;
    state.height = info.height;
    nodeEls.forEach(function (n, g) {
      var p = state.pos[g];
      n.style.left = (p.x - p.w / 2) + "px";
      n.style.top = (p.y - p.h / 2) + "px";
    });
    drawEdges();
  }

  /* Edges leave a node from its right side and enter the next from its left, each at its
   * own height (ordered as the edges come, so they do not cross there), rather than where
   * the line to the node's centre cuts its box: an edge then never runs across a box of
   * the rank it enters, and arrows into one node do not pile up on one point. */
  function ports(all) {
    var outs = G.map(function () { return []; }), ins = G.map(function () { return []; });
    DATA.edges.forEach(function (e, i) {
      var pts = all[i];
      outs[e[0]].push({ i: i, y: pts[Math.min(1, pts.length - 1)].y });
      ins[e[1]].push({ i: i, y: pts[Math.max(0, pts.length - 2)].y });
    });
    function spread(list, g, out) {
      var p = state.pos[g], n = list.length;
      list.sort(function (a, b) { return a.y - b.y; });
      var top = p.y - p.h / 2 + 10, span = Math.max(0, p.h - 20);
      list.forEach(function (item, k) {
        var y = n === 1 ? p.y : top + span * k / (n - 1);
        var pts = all[item.i], x = out ? p.x + p.w / 2 : p.x - p.w / 2;
        var lead = { x: out ? x + 18 : x - 18, y: y };
        if (out) { pts[0] = { x: x, y: y }; pts.splice(1, 0, lead); }
        else { pts[pts.length - 1] = { x: x, y: y }; pts.splice(pts.length - 1, 0, lead); }
      });
    }
    G.forEach(function (d, g) { spread(outs[g], g, true); spread(ins[g], g, false); });
    // An edge that closes a cycle (records should not, but may) runs back below both nodes.
    DATA.edges.forEach(function (e, i) {
      var s = state.pos[e[0]], t = state.pos[e[1]];
      if (t.x > s.x) return;
      var pts = all[i], first = pts[1], last = pts[pts.length - 2];
      var low = Math.max(s.y + s.h / 2, t.y + t.h / 2) + 24;
      all[i] = [pts[0], first, { x: first.x, y: low }, { x: last.x, y: low }, last,
                pts[pts.length - 1]];
    });
    return all;
  }

  /* A B-spline through dagre's points (d3's curveBasis), the way dagre-d3 draws edges. */
  function basis(points) {
    var p = points, d = "M" + p[0].x + "," + p[0].y;
    if (p.length === 2) return d + "L" + p[1].x + "," + p[1].y;
    var x0 = p[0].x, y0 = p[0].y, x1 = p[1].x, y1 = p[1].y;
    d += "L" + (5 * x0 + x1) / 6 + "," + (5 * y0 + y1) / 6;
    for (var i = 2; i < p.length; i++) {
      var x = p[i].x, y = p[i].y;
      d += "C" + (2 * x0 + x1) / 3 + "," + (2 * y0 + y1) / 3 + " " + (x0 + 2 * x1) / 3 + "," +
        (y0 + 2 * y1) / 3 + " " + (x0 + 4 * x1 + x) / 6 + "," + (y0 + 4 * y1 + y) / 6;
      x0 = x1; y0 = y1; x1 = x; y1 = y;
    }
    d += "C" + (2 * x0 + x1) / 3 + "," + (2 * y0 + y1) / 3 + " " + (x0 + 2 * x1) / 3 + "," +
      (y0 + 2 * y1) / 3 + " " + x1 + "," + y1;
    return d;
  }

  function drawEdges() {
    svg.textContent = "";
    svg.setAttribute("width", String(Math.ceil(state.width)));
    svg.setAttribute("height", String(Math.ceil(state.height)));
    var defs = svgEl("defs", {});
    [["arrow", "#8a9099"], ["arrow-stale", "#e65100"], ["arrow-path", "#37474f"],
     ["arrow-up", "#00838f"], ["arrow-down", "#7b1fa2"]].forEach(function (m) {
      var marker = svgEl("marker", { id: m[0], viewBox: "0 0 10 10", refX: "9", refY: "5",
                                     markerWidth: "7", markerHeight: "7", orient: "auto" });
      marker.appendChild(svgEl("path", { d: "M0,0 L10,5 L0,10 z", fill: m[1] }));
      defs.appendChild(marker);
    });
    svg.appendChild(defs);
    var t = state.trace;
    var layer = svgEl("g", {});
    var labels = [];
    DATA.edges.forEach(function (e, i) {
      var onPath = t && t.groups.has(e[0]) && t.groups.has(e[1]) && pathUses(e[0], e[1]);
      var stale = e[3] > 0;
      var cls = "edge" + (stale ? " stale" : "") + (onPath ? " on-path" : "");
      var path = svgEl("path", { d: basis(state.points[i]), "class": cls,
        "marker-end": "url(#" + (onPath ? "arrow-path" : stale ? "arrow-stale" : "arrow") + ")" });
      var title = svgEl("title", {});
      title.textContent = G[e[0]].name + " → " + G[e[1]].name + " (" +
        plural(e[2], "input", "inputs") + (stale ? ", " + e[3] + " stale" : "") + ")";
      path.appendChild(title);
      layer.appendChild(path);
      if (e[2] > 1) {
        // How many inputs the edge stands for, where that does not cover another count.
        var pts = state.points[i], at = pts[pts.length - 2], text = "×" + e[2];
        var box = { x: at.x - 6 - text.length * 7, y: at.y - 16, w: text.length * 7, h: 12 };
        if (!labels.some(function (b) { return b.x < box.x + box.w && box.x < b.x + b.w &&
                                               b.y < box.y + box.h && box.y < b.y + b.h; })) {
          labels.push(box);
          var label = svgEl("text", { x: String(at.x - 6), y: String(at.y - 5),
                                      "class": "edge-count", "text-anchor": "end" });
          label.textContent = text;
          layer.appendChild(label);
        }
      }
    });
    svg.appendChild(layer);
    if (t) drawColumnEdges(t);
  }

  function pathUses(s, tg) {
    var t = state.trace, found = false;
    t.used.forEach(function (_, i) { if (CE[i][0] === s && CE[i][2] === tg) found = true; });
    return found;
  }

  /* Column to column curves between the rows of traced columns. */
  function drawColumnEdges(t) {
    var layer = svgEl("g", {});
    t.used.forEach(function (dir, i) {
      var e = CE[i];
      var from = rowPoint(e[0], e[1], "right"), to = e[3] === null
        ? headPoint(e[2]) : rowPoint(e[2], e[3], "left");
      if (!from || !to) return;
      var dx = Math.max(40, Math.abs(to.x - from.x) / 2);
      var d = "M" + from.x + "," + from.y + "C" + (from.x + dx) + "," + from.y + " " +
        (to.x - dx) + "," + to.y + " " + to.x + "," + to.y;
      var path = svgEl("path", { d: d, "class": "col-edge " + dir + (e[4] === "indirect" ? " indirect" : ""),
                                 "marker-end": "url(#arrow-" + dir + ")" });
      var title = svgEl("title", {});
      title.textContent = colLabel(e[0], e[1]) + " → " + (e[3] === null
        ? G[e[2]].name + " (rows)" : colLabel(e[2], e[3])) + ": " + e[4] + (e[5] ? ", " + e[5] : "");
      path.appendChild(title);
      layer.appendChild(path);
    });
    svg.appendChild(layer);
  }

  function rowPoint(g, c, side) {
    var li = nodeEls[g].querySelector('.col[data-col="' + cssEscape(c) + '"]');
    if (!li) return null;
    var p = state.pos[g];
    var y = p.y - p.h / 2 + offsetWithin(li, nodeEls[g]) + li.offsetHeight / 2;
    return { x: side === "right" ? p.x + p.w / 2 : p.x - p.w / 2, y: y };
  }
  function headPoint(g) {
    var p = state.pos[g];
    return { x: p.x - p.w / 2, y: p.y - p.h / 2 + 16 };
  }
  function offsetWithin(child, ancestor) {
    var top = 0, e = child;
    while (e && e !== ancestor) { top += e.offsetTop; e = e.offsetParent; }
    return top;
  }
  function cssEscape(s) {
    return window.CSS && CSS.escape ? CSS.escape(s) : String(s).replace(/["\\]/g, "\\$&");
  }

  // ------------------------------------------------------------------ view

  function applyView() {
    canvas.style.transform = "translate(" + state.tx + "px," + state.ty + "px) scale(" +
      state.scale + ")";
  }
  function viewSize() { return { w: viewport.clientWidth, h: viewport.clientHeight }; }

  function centreOn(g) {
    var v = viewSize(), p = state.pos[g];
    state.tx = v.w / 2 - p.x * state.scale;
    state.ty = v.h / 2 - p.y * state.scale;
    applyView();
  }

  /* Show the box (graph coordinates) whole if it fits at a readable scale, else centre
   * `anchor`'s node at that scale. */
  function showBox(box, anchor, minScale) {
    var v = viewSize(), pad = 40;
    var fit = Math.min((v.w - 2 * pad) / Math.max(1, box.w), (v.h - 2 * pad) / Math.max(1, box.h), 1);
    if (fit >= minScale) {
      state.scale = fit;
      state.tx = v.w / 2 - (box.x + box.w / 2) * fit;
      state.ty = v.h / 2 - (box.y + box.h / 2) * fit;
      applyView();
    } else {
      state.scale = Math.max(minScale, Math.min(state.scale, 1));
      centreOn(anchor);
    }
  }

  function boxOf(groups) {
    var x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    groups.forEach(function (g) {
      var p = state.pos[g];
      x0 = Math.min(x0, p.x - p.w / 2); y0 = Math.min(y0, p.y - p.h / 2);
      x1 = Math.max(x1, p.x + p.w / 2); y1 = Math.max(y1, p.y + p.h / 2);
    });
    return { x: x0, y: y0, w: x1 - x0, h: y1 - y0 };
  }

  function fitAll() {
    var v = viewSize(), pad = 20;
    state.scale = Math.min(1, (v.w - 2 * pad) / state.width, (v.h - 2 * pad) / state.height);
    state.tx = (v.w - state.width * state.scale) / 2;
    state.ty = (v.h - state.height * state.scale) / 2;
    applyView();
  }

  /* On open: the whole graph if it fits at a readable scale; else the focus at full size,
   * the view slid (focus still in view) so as little of it as possible lies beyond the
   * graph's edges. */
  function openingView() {
    var v = viewSize(), pad = 20;
    var fit = Math.min(1, (v.w - 2 * pad) / state.width, (v.h - 2 * pad) / state.height);
    if (fit >= 0.8) {
      state.scale = fit;
      state.tx = (v.w - state.width * fit) / 2;
      state.ty = (v.h - state.height * fit) / 2;
      applyView();
      return;
    }
    state.scale = 1;
    centreOn(FOCUS);
    var p = state.pos[FOCUS];
    state.tx = slide(state.tx, v.w, state.width, p.x - p.w / 2, p.x + p.w / 2);
    state.ty = slide(state.ty, v.h, state.height, p.y - p.h / 2, p.y + p.h / 2);
    applyView();
  }
  /* An offset along one axis moved to show less empty space past the graph's ends, while
   * keeping [lo, hi] (the focus, graph units at scale 1) inside the window with a margin. */
  function slide(t, size, total, lo, hi) {
    var margin = 24;
    if (total <= size) return (size - total) / 2;
    var best = Math.min(0, Math.max(size - total, t));   // no empty space at either end
    // An end of the graph just past the window's edge is brought in (no half-cut nodes).
    var over = best + total - size;
    if (over > 0 && over < size * 0.3) best -= over;
    else if (best < 0 && -best < size * 0.3) best = 0;
    var low = margin - lo, high = size - margin - hi;     // the focus kept in view
    return Math.max(low, Math.min(high, best));
  }

  function zoom(factor, cx, cy) {
    var v = viewSize();
    if (cx === undefined) { cx = v.w / 2; cy = v.h / 2; }
    var next = Math.min(2.5, Math.max(0.05, state.scale * factor));
    state.tx = cx - (cx - state.tx) * next / state.scale;
    state.ty = cy - (cy - state.ty) * next / state.scale;
    state.scale = next;
    applyView();
  }

  /* Lay out again (node heights changed) keeping node `g` where it is on screen. */
  function relayout(g) {
    var before = state.pos[g];
    var sx = state.tx + before.x * state.scale, sy = state.ty + (before.y - before.h / 2) * state.scale;
    layout();
    var after = state.pos[g];
    state.tx = sx - after.x * state.scale;
    state.ty = sy - (after.y - after.h / 2) * state.scale;
    applyView();
  }

  // ------------------------------------------------------------------ selection

  function select(g, opts) {
    opts = opts || {};
    if (state.selected !== null && nodeEls[state.selected]) {
      nodeEls[state.selected].classList.remove("selected");
    }
    state.selected = g;
    nodeEls[g].classList.add("selected");
    renderPanel(g, opts);
    if (opts.centre) centreOn(g);
  }

  function refreshColumns() {
    nodeEls.forEach(function (n, g) { fillColumns(g, n); });
    var t = state.trace;
    viewport.classList.toggle("dim", !!t);
    nodeEls.forEach(function (n, g) { n.classList.toggle("on-path", !!t && t.groups.has(g)); });
  }

  /* Trace a column: the nodes on its path show their columns (so they are laid out again),
   * and the view shows the whole path if it fits at a readable size, else the column's node. */
  function selectColumn(g, c) {
    state.trace = trace(g, c);
    refreshColumns();
    relayout(g);
    showBox(boxOf(state.trace.groups), g, MIN_READABLE);
    select(g);
  }

  function clearColumn() {
    if (!state.trace) return;
    var g = state.trace.g;
    state.trace = null;
    refreshColumns();
    relayout(g);
    if (state.selected !== null) renderPanel(state.selected); else if (REPLAY) renderReplay();
  }

  function toggleColumns(g) {
    if (state.expanded.has(g)) state.expanded.delete(g); else state.expanded.add(g);
    fillColumns(g, nodeEls[g]);
    relayout(g);
  }

  // ------------------------------------------------------------------ details panel

  function section(title) { panel.appendChild(el("h3", null, title)); }
  function dl(rows, into) {
    var list = el("dl");
    rows.forEach(function (r) {
      if (r[1] === undefined || r[1] === null || r[1] === "") return;
      list.appendChild(el("dt", null, r[0]));
      var dd = el("dd", r[2] || null, r[1]);
      list.appendChild(dd);
    });
    (into || panel).appendChild(list);
    return list;
  }
  function table(head, rows, into, cls) {
    var wrap = el("div", "table-wrap");
    var tbl = el("table", cls || null);
    wrap.appendChild(tbl);
    var tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", null, h)); });
    var thead = el("thead");
    thead.appendChild(tr);
    tbl.appendChild(thead);
    var body = el("tbody");
    rows.forEach(function (r) {
      var row = el("tr");
      r.forEach(function (cell) {
        if (cell instanceof Node) { var td = el("td"); td.appendChild(cell); row.appendChild(td); }
        else row.appendChild(el("td", null, cell));
      });
      body.appendChild(row);
    });
    tbl.appendChild(body);
    (into || panel).appendChild(wrap);
    return tbl;
  }
  function span(cls, text, title) {
    var s = el("span", cls, text);
    if (title) s.title = title;
    return s;
  }
  /* A time in a table: to the minute (the whole time in its tooltip). */
  function minute(t) {
    return t ? span(null, when(t).replace(/:\d\d( UTC)?$/, ""), when(t)) : "–";
  }
  function kvTable(title, values, into, empty) {
    into = into || panel;
    var keys = values ? Object.keys(values) : [];
    into.appendChild(el("h4", null, title));
    if (!keys.length) { into.appendChild(el("p", "note", empty || "none")); return; }
    table(["name", "value"], keys.sort().map(function (k) {
      return [k, span("mono", shown(values[k]))];
    }), into, "kv");
  }
  function chip(status) {
    return el("span", "chip " + (STATUSES.indexOf(status) >= 0 ? status : "other"), status);
  }
  function groupLink(g, text) {
    var b = el("button", "link", text || G[g].name);
    b.type = "button";
    b.title = G[g].ref || G[g].name;
    b.addEventListener("click", function () { select(g, { centre: true }); });
    return b;
  }

  /* The details panel, emptied and shown, with its close button. */
  function openPanel() {
    panel.hidden = false;
    panel.textContent = "";
    panel.scrollTop = 0;
    var close = el("button", "close", "×");
    close.type = "button";
    close.title = "Close the details";
    close.setAttribute("aria-label", "Close the details");
    close.addEventListener("click", function () { panel.hidden = true; });
    panel.appendChild(close);
  }

  function renderPanel(g, opts) {
    opts = opts || {};
    var d = G[g], det = d.details;
    openPanel();
    var h = el("h2", null, d.name);
    panel.appendChild(h);
    panel.appendChild(el("div", "sub", subText(d)));
    if (d.focus) {
      panel.appendChild(el("p", "note", "The focus: the lineage of " + DATA.focus.ref +
                           " is what this page shows."));
    }

    if (state.trace) renderTrace();

    var u = unit(d);
    var rows = [];
    if (d.count > 1) {
      rows.push([u[1].charAt(0).toUpperCase() + u[1].slice(1),
                 plural(d.count, u[0], u[1]) + " (" + d.range[0] + " … " + d.range[1] + ")"]);
    }
    if (d.count > 1) rows.push([d.focus ? "Focus " + u[0] : "Newest " + u[0], d.parts.key[det.member]]);
    rows.push([d.count > 1 ? "Its version" : "Version", det.version || "(none)", "mono"]);
    rows.push(["Status", d.members > 1 ? statusSummary(d) : det.status]);
    rows.push(["Step", det.step]);
    rows.push(["Role", det.role]);
    rows.push(["Code version", distinct(det.code_versions, det.code_versions_more)]);
    rows.push(["Git commit", distinct(det.git_commits, det.git_commits_more), "mono"]);
    rows.push(["Format", det.format]);
    if (det.rows !== undefined) {
      rows.push(["Rows", det.rows.toLocaleString("en") +
                 (det.rows_of > 1 ? " in " + plural(det.rows_of, u[0], u[1]) : "")]);
    }
    var run = d.last_run;
    // One version whose last run made it: its run, parameters and metrics are the last run's.
    var same = d.count <= 1 && run && run.version === det.version && run.status === "ok";
    if (!same) {
      rows.push(["Run", det.run_id, "mono"]);
      rows.push(["Finished", det.end_time ? when(det.end_time) : null]);
    }
    dl(rows);
    if (d.members > 1) panel.appendChild(statusBar(d.counts, d.members));
    if (REPLAY) renderReplaySection(g);
    if (!same) {
      kvTable(d.count > 1 ? "Parameters (same for every " + u[0] + ")" : "Parameters", det.parameters);
      if (det.varying.length) {
        panel.appendChild(el("p", "note", "Varies by " + u[0] + ": " + det.varying.join(", ")));
      }
      if (d.count <= 1 || det.metrics) kvTable("Metrics", det.metrics, panel, "none recorded");
    }

    section("Last run");
    if (!run) {
      panel.appendChild(el("p", "note", "No run recorded (data from outside any step)."));
    } else {
      var runRows = [["Status", run.status], ["Step", run.step], ["Run id", run.run_id, "mono"],
                     [u[0].charAt(0).toUpperCase() + u[0].slice(1), d.partitioned ? run.partition : null],
                     ["Version", run.version, "mono"], ["Code version", run.code_version],
                     ["Started", when(run.start_time)], ["Finished", when(run.end_time)],
                     ["Duration", duration(run.duration_seconds)]];
      var list = dl(runRows);
      if (run.error) {
        list.appendChild(el("dt", null, "Error"));
        list.appendChild(el("dd", "error", run.error));
      }
      kvTable(same ? "Parameters" : "Parameters of the last run", run.parameters);
      kvTable(same ? "Metrics" : "Metrics of the last run", run.metrics, panel, "none recorded");
    }

    if (d.columns.length || d.external_columns.length) {
      section("Columns (" + d.columns.length + ")");
      panel.appendChild(el("p", "note", "Click a column to see where it comes from and what it feeds."));
      var cols = el("div", "links col-list");
      d.columns.forEach(function (c) {
        var role = columnRole(g, c);
        var differs = differingColumns(g).has(c);
        var b = el("button", "link col-link" + (role ? " " + role : "") + (differs ? " differs" : ""),
                   differs ? "≠ " + c : c);
        b.type = "button";
        b.dataset.col = c;
        if (differs) b.title = "Its content differs in the replay";
        b.addEventListener("click", function () { selectColumn(g, c); });
        cols.appendChild(b);
      });
      panel.appendChild(cols);
      if (d.external_columns.length) {
        panel.appendChild(el("h4", null, "From outside this graph"));
        table(["source", "column", "into", "how"], d.external_columns.map(function (x) {
          return [x[0], x[1], x[2] === null ? "(rows)" : x[2], x[4] || x[3]];
        }));
      }
    }

    section("Inputs and outputs");
    var ins = el("div", "links"), outs = el("div", "links");
    inputsOf[g].forEach(function (i) {
      var e = DATA.edges[i];
      ins.appendChild(groupLink(e[0], G[e[0]].name + (e[2] > 1 ? " ×" + e[2] : "") +
                                (e[3] ? " (stale)" : "")));
    });
    outputsOf[g].forEach(function (i) {
      var e = DATA.edges[i];
      outs.appendChild(groupLink(e[1], G[e[1]].name + (e[2] > 1 ? " ×" + e[2] : "")));
    });
    panel.appendChild(el("h4", null, "Reads"));
    panel.appendChild(inputsOf[g].length ? ins : el("p", "note", "nothing recorded"));
    panel.appendChild(el("h4", null, "Read by"));
    panel.appendChild(outputsOf[g].length ? outs : el("p", "note", "nothing yet"));
    if (d.self_reads) {
      panel.appendChild(el("p", "note", "Its " + u[1] + " also read each other (" +
                           plural(d.self_reads, "input", "inputs") + ")."));
    }

    if (d.members > 1) renderParts(g, opts.part);
    renderHistory(d);
  }

  /* A version as the page shows versions: short, whole in its tooltip. */
  function versionSpan(v) { return v ? span("mono", short(v), v) : span(null, "–"); }
  function defList(rows, into) {
    var list = el("dl");
    rows.forEach(function (r) {
      if (r[1] === undefined || r[1] === null || r[1] === "") return;
      list.appendChild(el("dt", null, r[0]));
      var dd = el("dd", r[2] || null);
      if (r[1] instanceof Node) dd.appendChild(r[1]); else dd.textContent = String(r[1]);
      list.appendChild(dd);
    });
    (into || panel).appendChild(list);
    return list;
  }
  function columnChips(columns) {
    var box = el("span", "links");
    columns.forEach(function (c) { box.appendChild(span("link diff-col mono", "≠ " + c, c)); });
    return box;
  }
  /* One verdict in full: what was recorded beside what the replay wrote, and why. */
  function verdictRows(e, into, key) {
    var head = el("div", "verdict-head");
    head.appendChild(verdictPill(e.verdict));
    into.appendChild(head);
    var made = e.reproduced ? versionSpan(e.reproduced)
      : span("note-inline", e.unlisted ? "not listed on this page" : "nothing written");
    if (e.reproduced && e.reproduced === e.recorded) made.appendChild(document.createTextNode(" (the same)"));
    var cols = null;
    if (e.columns && e.columns.length) cols = columnChips(e.columns);
    else if (e.columns) cols = "none";
    else if (e.verdict === "differs" || e.verdict === "non-deterministic") cols = "not compared";
    return defList([[key ? key[0] : null, key ? key[1] : null],
                    ["Recorded", versionSpan(e.recorded)],
                    ["Reproduced", made],
                    ["Replay step", e.step],
                    [e.verdict === "failed" ? "Error" : "Detail", e.detail,
                     e.verdict === "failed" ? "error" : null],
                    ["Differing columns", cols]], into);
  }

  /* The node's verdicts in its details: one in full, or their counts, the version the panel
   * is about in full, and every version that did not reproduce. */
  function renderReplaySection(g) {
    var d = G[g], r = d.replay, u = unit(d);
    var box = el("div", "replay-box");
    box.appendChild(el("h3", null, "Replay of snapshot " + REPLAY.snapshot_name));
    panel.appendChild(box);
    if (!r) {
      box.appendChild(el("p", "note", "The replay judged none of its " + u[1] +
                         (d.kind === "files" || d.kind === "source" || d.status === "source"
                           ? " (source data is not replayed)." : ".")));
      return;
    }
    if (r.judged === 1) {
      var only = memberVerdict(g, r.entries[0].member);
      verdictRows(only, box, d.members > 1 ? [u[0].charAt(0).toUpperCase() + u[0].slice(1),
                                              d.parts.key[only.member]] : null);
      return;
    }
    var pills = el("div", "verdicts");
    REPLAY.verdicts.forEach(function (v) { if (r.counts[v]) pills.appendChild(verdictPill(v, r.counts[v])); });
    box.appendChild(pills);
    if (r.judged < d.members) {
      box.appendChild(el("p", "note", plural(r.judged, u[0], u[1]) + " of " + d.members.toLocaleString("en") +
                         " replayed."));
    }
    var main = memberVerdict(g, d.details.member);
    if (main) {
      box.appendChild(el("h4", null, (d.focus ? "Focus " : "Newest ") + u[0] + ": " +
                         d.parts.key[d.details.member]));
      verdictRows(main, box);
    }
    // Every other version that did not reproduce (the one above is not listed twice).
    var bad = [];
    for (var i = 0; i < d.parts.key.length; i++) {
      var e = memberVerdict(g, i);
      if (e && e.verdict !== "reproduced" && !(main && i === main.member)) bad.push(e);
    }
    if (!bad.length) return;
    box.appendChild(el("h4", null, (main && main.verdict !== "reproduced" ? "Other " + u[1] + " not"
      : "Not") + " reproduced (" + bad.length.toLocaleString("en") + ")"));
    verdictList(bad.slice(0, VERDICT_ROWS).map(function (e) {
      return [d.parts.key[e.member], e];
    }), box);
    if (bad.length > VERDICT_ROWS) {
      box.appendChild(el("p", "note", "and " + (bad.length - VERDICT_ROWS).toLocaleString("en") +
                         " more: the " + u[1] + " list below has each one's verdict."));
    }
  }
  /* Verdicts as a list, [what (text or a node), verdict entry] each: what, its verdict, the
   * recorded version beside the reproduced one, then why (a list, not a table: the panel is
   * narrow and a detail can be a long error). */
  function verdictList(items, into) {
    var list = el("ul", "verdict-list");
    items.forEach(function (item) {
      var e = item[1], li = el("li");
      var head = el("div", "vi-head");
      head.appendChild(item[0] instanceof Node ? item[0] : span("vi-what", item[0]));
      head.appendChild(verdictPill(e.verdict));
      li.appendChild(head);
      var facts = el("div", "vi-facts");
      facts.appendChild(span(null, "recorded "));
      facts.appendChild(versionSpan(e.recorded));
      facts.appendChild(span(null, " · reproduced "));
      facts.appendChild(e.reproduced ? versionSpan(e.reproduced)
        : span(null, e.unlisted ? "not listed on this page" : "nothing written"));
      li.appendChild(facts);
      if (e.detail) li.appendChild(el("div", "vi-detail" + (e.verdict === "failed" ? " error" : ""), e.detail));
      if (e.columns && e.columns.length) {
        var cols = el("div", "vi-cols");
        cols.appendChild(span("what", "differing columns: "));
        cols.appendChild(columnChips(e.columns));
        li.appendChild(cols);
      }
      list.appendChild(li);
    });
    (into || panel).appendChild(list);
    return list;
  }

  /* The replay as a whole (the banner's "Replay details"): when, where, its counts, every
   * ref it did not reproduce, and the refs it judged that this page does not draw. */
  function renderReplay() {
    if (state.selected !== null && nodeEls[state.selected]) {
      nodeEls[state.selected].classList.remove("selected");
    }
    state.selected = null;
    var R = REPLAY;
    openPanel();
    panel.appendChild(el("h2", null, "Replay of snapshot " + R.snapshot_name));
    panel.appendChild(el("div", "sub", "The newest replay of the snapshot this page shows."));
    defList([["Snapshot", R.snapshot, "mono"],
             ["Tags", R.tags.length ? R.tags.join(", ") : null],
             ["Replayed", when(R.replayed_at)],
             ["Into", R.into, "mono"],
             ["In place", R.in_place ? "yes: it wrote into the workspace itself" : "no: into a scratch workspace"],
             ["Result", R.reproduced ? "every ref reproduced exactly"
               : (R.counts.reproduced || 0).toLocaleString("en") + " of " +
                 plural(R.refs, "ref", "refs") + " reproduced exactly"]]);
    var pills = el("div", "verdicts");
    R.verdicts.forEach(function (v) { if (R.counts[v]) pills.appendChild(verdictPill(v, R.counts[v])); });
    panel.appendChild(pills);
    var bad = [];
    G.forEach(function (d, g) {
      if (!d.replay) return;
      for (var i = 0; i < d.parts.key.length; i++) {
        var e = memberVerdict(g, i);
        if (!e || e.verdict === "reproduced") continue;
        bad.push([groupLink(g, d.members > 1 ? d.name + " · " + d.parts.key[i] : d.name), e]);
      }
    });
    R.outside.forEach(function (e) {
      if (e.verdict !== "reproduced") bad.push([e.ref + " (outside this graph)", e]);
    });
    section("Not reproduced (" + bad.length.toLocaleString("en") + ")");
    if (!bad.length) panel.appendChild(el("p", "note", "Every ref the replay judged reproduced exactly."));
    else verdictList(bad.slice(0, VERDICT_ROWS));
    if (bad.length > VERDICT_ROWS) {
      panel.appendChild(el("p", "note", "and " + (bad.length - VERDICT_ROWS).toLocaleString("en") +
                           " more: each node's details list its own."));
    }
    if (R.outside_count) {
      section("Outside this graph (" + R.outside_count.toLocaleString("en") + ")");
      panel.appendChild(el("p", "note", "Refs the replay judged that this page does not draw: " +
                           "outside the lineage of " + DATA.focus.ref + ", or drawn at another " +
                           "version than the one the snapshot recorded."));
      verdictList(R.outside.map(function (e) {
        return [e.ref + (e.in_graph ? " (another version is drawn)" : ""), e];
      }));
      if (R.outside_count > R.outside.length) {
        panel.appendChild(el("p", "note", "and " + (R.outside_count - R.outside.length)
          .toLocaleString("en") + " more (dws-dagster replay --format json lists them all)."));
      }
    }
  }

  /* The banner under the header: the replay's result in one sentence, its other verdicts
   * counted, the refs it judged beyond this graph, and a button to the whole replay. */
  function replayBanner() {
    var R = REPLAY, n = R.counts.reproduced || 0;
    var box = el("div", "replay-banner " + (R.reproduced ? "good" : "bad"));
    box.id = "replay";
    box.setAttribute("role", "status");
    var said = R.refs === 0 ? "it judged no refs"
      : n === R.refs ? (R.refs === 1 ? "its one ref" : "all " + R.refs.toLocaleString("en") + " refs") +
        " reproduced exactly"
      : n.toLocaleString("en") + " of " + plural(R.refs, "ref", "refs") + " reproduced exactly";
    var head = el("span", "headline");
    head.appendChild(el("strong", null, (R.reproduced ? "✓ " : "≠ ") + "Replay of snapshot " +
                        R.snapshot_name));
    head.appendChild(document.createTextNode(" on " +
      when(R.replayed_at).replace(/:\d\d( UTC)?$/, "$1") + ": " + said));
    head.title = "Into " + R.into + (R.in_place ? " (in place)" : "");
    box.appendChild(head);
    R.verdicts.forEach(function (v) {
      if (v !== "reproduced" && R.counts[v]) box.appendChild(verdictPill(v, R.counts[v]));
    });
    if (R.outside_count) {
      box.appendChild(el("span", "outside", plural(R.outside_count, "more ref", "more refs") +
                         " outside this graph"));
    }
    var more = el("button", "replay-more", "Details");
    more.type = "button";
    more.title = "The whole replay: every ref it did not reproduce, and why";
    more.setAttribute("aria-label", "Replay details");
    more.addEventListener("click", renderReplay);
    box.appendChild(more);
    var top = document.querySelector(".top");
    top.parentNode.insertBefore(box, top.nextSibling);
  }

  function statusSummary(d) {
    return STATUSES.filter(function (s) { return d.counts[s]; }).map(function (s) {
      return d.counts[s].toLocaleString("en") + " " + s;
    }).join(", ");
  }
  function distinct(values, more) {
    if (!values) return null;
    var keys = Object.keys(values);
    if (keys.length === 1 && !more) return keys[0];
    return keys.map(function (k) { return k + " (" + values[k] + ")"; }).join(", ") +
      (more ? " and " + more + " more" : "");
  }

  function renderTrace() {
    var t = state.trace;
    var box = el("div", "trace-box");
    var h = el("h3", null, "Column lineage of " + colLabel(t.g, t.c));
    var clear = el("button", "clear", "clear");
    clear.type = "button";
    clear.title = "Stop tracing this column (Esc)";
    clear.addEventListener("click", clearColumn);
    h.appendChild(clear);
    box.appendChild(h);
    function list(title, map, cls) {
      box.appendChild(el("h4", null, title + " (" + map.size + ")"));
      if (!map.size) { box.appendChild(el("p", "note", "none recorded")); return; }
      var ul = el("ul", "trace");
      map.forEach(function (v) {
        var li = el("li");
        var b = el("button", "link col-link " + cls, colLabel(v[0], v[1]));
        b.type = "button";
        b.addEventListener("click", function () { selectColumn(v[0], v[1]); });
        li.appendChild(b);
        var how = howText(v[0], v[1]);
        if (cls === "up") {
          // How this column feeds the next one: the derivations of the edges out of it.
          var outs = [];
          (colOut.get(ck(v[0], v[1])) || []).forEach(function (i) {
            if (t.used.has(i)) {
              var e = CE[i];
              var s = derivation(e) + " → " +
                (e[3] === null ? G[e[2]].name + " (rows)" : colLabel(e[2], e[3]));
              if (outs.indexOf(s) < 0) outs.push(s);
            }
          });
          how = outs.join("; ");
        }
        if (how) li.appendChild(el("span", "kind", " " + how));
        ul.appendChild(li);
      });
      box.appendChild(ul);
    }
    list("Upstream", t.up, "up");
    list("Downstream", t.down, "down");
    var rowsOf = [];
    t.rows.forEach(function (_, g) { rowsOf.push(G[g].name); });
    if (rowsOf.length) {
      box.appendChild(el("p", "note", "Whole-table lineage (filters, joins, sorts) reaches " +
                         "the rows of: " + rowsOf.join(", ")));
    }
    panel.appendChild(box);
  }

  function renderParts(g, part) {
    var d = G[g], u = unit(d), p = d.parts;
    section(u[1].charAt(0).toUpperCase() + u[1].slice(1));
    var box = el("details", "parts-list");
    var summary = el("summary", null, "List " + plural(d.members, u[0], u[1]) +
                     (d.members !== d.count ? " (" + d.count + " keys)" : ""));
    box.appendChild(summary);
    panel.appendChild(box);
    if (d.replay) {
      var key = el("p", "note verdict-key", "Replay: ");
      REPLAY.verdicts.forEach(function (v, i) {
        var item = span("key-item");
        item.appendChild(span("verdict mini " + verdictClass(v), VERDICT_SIGN[v]));
        item.appendChild(document.createTextNode(" " + v));
        key.appendChild(item);
        if (i < REPLAY.verdicts.length - 1) key.appendChild(document.createTextNode(" "));
      });
      box.appendChild(key);
    }
    var filled = false;
    function fill(all) {
      var old = box.querySelector("table, .more-parts");
      while (old) { old.remove(); old = box.querySelector("table, .more-parts"); }
      var n = all ? p.key.length : Math.min(p.key.length, PARTS_SHOWN);
      var rows = [];
      for (var i = 0; i < n; i++) {
        var status = STATUSES[p.status.charCodeAt(i) - 48];
        var key = p.ref && p.ref[i] !== p.key[i] ? p.key[i] + " (" + p.ref[i] + ")" : p.key[i];
        var run = p.run[i] >= 0 ? DATA.runs[p.run[i]] : null;
        var dot = span("dot " + status, "", status);
        dot.setAttribute("role", "img");
        dot.setAttribute("aria-label", status);
        var name = span(null, key);
        name.insertBefore(dot, name.firstChild);
        var row = [name, span("mono", p.version[i] ? p.version[i].slice(0, 8) : "–", p.version[i])];
        if (d.replay) {
          var e = memberVerdict(g, i);
          // The sign alone (the key above the table names each), so the row still fits.
          var pill = e ? span("verdict mini " + verdictClass(e.verdict),
                              verdictClass(e.verdict) === "v-other" ? "?" : VERDICT_SIGN[e.verdict],
                              e.verdict + (verdictNote(e) ? ": " + verdictNote(e) : "")) : "–";
          if (e) pill.setAttribute("aria-label", e.verdict);
          row.push(pill);
        }
        rows.push(row.concat([minute(p.end[i]), run ? span("mono clip", run, run) : "–"]));
      }
      var head = [u[0], "version"].concat(d.replay ? ["replay"] : [], ["finished (UTC)", "run"]);
      var tbl = table(head, rows, box, "parts");
      var trs = tbl.tBodies[0].rows;
      for (var j = 0; j < n; j++) {
        var st = STATUSES[p.status.charCodeAt(j) - 48];
        if (st !== "ok" && st !== "source") trs[j].classList.add("st-" + st);
      }
      if (d.focus && trs[DATA.focus.member]) trs[DATA.focus.member].classList.add("focus");
      if (part !== undefined && trs[part]) {
        trs[part].classList.add("hit");
        trs[part].scrollIntoView({ block: "center" });
      }
      if (n < p.key.length) {
        var more = el("button", "link more-parts", "Show all " + p.key.length.toLocaleString("en"));
        more.type = "button";
        more.addEventListener("click", function () { fill(true); });
        box.appendChild(more);
      }
    }
    box.addEventListener("toggle", function () {
      if (box.open && !filled) { filled = true; fill(part >= PARTS_SHOWN); }
    });
    if (part !== undefined) box.open = true;
  }

  function renderHistory(d) {
    section("History");
    var h = d.history;
    if (!h.length) { panel.appendChild(el("p", "note", "No runs recorded.")); return; }
    if (h[0].count !== undefined) {
      var u = unit(d);
      panel.appendChild(el("p", "note", "The runs that made its " + u[1] + ", newest first."));
      table(["finished (UTC)", "status", u[1], "run"], h.map(function (r) {
        return [minute(r.end_time), chip(r.status),
                span("wrap", r.count + (r.count > 1 ? ": " + r.first + " … " + r.last : ": " + r.first)),
                r.run_id ? span("mono clip", r.run_id, r.run_id) : "–"];
      }));
      return;
    }
    panel.appendChild(el("p", "note", "Versions of " + d.ref + ", newest first; what changed " +
                         "from the run before is in bold."));
    var list = el("ol", "history");
    h.forEach(function (r, i) {
      var before = h[i + 1];
      var li = el("li");
      var head = el("div", "history-head");
      head.appendChild(chip(r.status));
      head.appendChild(span(null, " " + when(r.end_time) + " "));
      head.appendChild(span("mono", short(r.version), r.version));
      if (r.current) head.appendChild(span("current", " current"));
      if (r.run_id) head.appendChild(span("mono run", " " + r.run_id, "run " + r.run_id));
      li.appendChild(head);
      [["parameters", r.parameters, before && before.parameters],
       ["metrics", r.metrics, before && before.metrics]].forEach(function (part) {
        var values = part[1] || {}, old = part[2] || {};
        var keys = Object.keys(values).sort();
        if (!keys.length) return;
        var line = el("div", "facts");
        line.appendChild(span("what", part[0] + ": "));
        keys.forEach(function (k, j) {
          var changed = before && shown(old[k]) !== shown(values[k]);
          line.appendChild(span(changed ? "changed" : null, k + "=" + shown(values[k]),
                                changed ? "was " + shown(old[k]) : null));
          if (j < keys.length - 1) line.appendChild(document.createTextNode(", "));
        });
        li.appendChild(line);
      });
      if (r.error) li.appendChild(el("div", "error", r.error));
      list.appendChild(li);
    });
    panel.appendChild(list);
  }

  // ------------------------------------------------------------------ search

  var index = null;
  function buildIndex() {
    index = { nodes: [], columns: [], parts: [] };
    G.forEach(function (d, g) {
      index.nodes.push({ text: (d.name + " " + d.ref).toLowerCase(), g: g });
      d.columns.forEach(function (c) {
        index.columns.push({ text: (d.name + "." + c).toLowerCase(), col: c.toLowerCase(), g: g, c: c });
      });
    });
  }
  var active = -1, found = [];
  function runSearch() {
    var q = search.value.trim().toLowerCase();
    results.textContent = "";
    found = [];
    active = -1;
    if (!q) { results.hidden = true; return; }
    if (!index) buildIndex();
    function rank(text, q2) { return text.indexOf(q2) === 0 ? 0 : 1; }
    var nodes = index.nodes.filter(function (x) { return x.text.indexOf(q) >= 0; })
      .sort(function (a, b) {
        return rank(G[a.g].name.toLowerCase(), q) - rank(G[b.g].name.toLowerCase(), q);
      })
      .slice(0, 10);
    nodes.forEach(function (x) { found.push({ what: "node", label: G[x.g].name, g: x.g }); });
    var cols = index.columns.filter(function (x) { return x.text.indexOf(q) >= 0; })
      .sort(function (a, b) { return rank(a.col, q) - rank(b.col, q); }).slice(0, 12);
    cols.forEach(function (x) { found.push({ what: "column", label: colLabel(x.g, x.c), g: x.g, c: x.c }); });
    if (q.length >= 2) {
      var hits = 0;
      for (var g = 0; g < G.length && hits < 8; g++) {
        var keys = G[g].parts.key;
        if (G[g].members < 2) continue;
        for (var i = 0; i < keys.length && hits < 8; i++) {
          if (String(keys[i]).toLowerCase().indexOf(q) >= 0) {
            found.push({ what: unit(G[g])[0], label: G[g].name + " · " + keys[i], g: g, part: i });
            hits++;
          }
        }
      }
    }
    if (!found.length) {
      results.appendChild(el("li", "none", "Nothing named like that"));
    }
    found.forEach(function (r, i) {
      var li = el("li");
      li.setAttribute("role", "option");
      li.appendChild(el("span", "what", r.what));
      li.appendChild(el("span", "label", r.label));
      li.title = r.label;
      li.addEventListener("mousedown", function (ev) { ev.preventDefault(); choose(i); });
      results.appendChild(li);
    });
    results.hidden = false;
  }
  function choose(i) {
    var r = found[i];
    if (!r) return;
    results.hidden = true;
    search.blur();
    if (r.c !== undefined) { selectColumn(r.g, r.c); return; }
    if (state.scale < MIN_READABLE) state.scale = 1;
    select(r.g, { centre: true, part: r.part });
  }
  function highlight(i) {
    var items = results.querySelectorAll("li");
    items.forEach(function (li, j) { li.classList.toggle("active", j === i); });
    if (items[i]) items[i].scrollIntoView({ block: "nearest" });
    active = i;
  }
  var pending = null;
  search.addEventListener("input", function () {
    clearTimeout(pending);
    pending = setTimeout(runSearch, 60);
  });
  search.addEventListener("keydown", function (ev) {
    if (ev.key === "ArrowDown") { ev.preventDefault(); highlight(Math.min(found.length - 1, active + 1)); }
    else if (ev.key === "ArrowUp") { ev.preventDefault(); highlight(Math.max(0, active - 1)); }
    else if (ev.key === "Enter") { clearTimeout(pending); runSearch(); choose(active >= 0 ? active : 0); }
    else if (ev.key === "Escape") { results.hidden = true; }
  });
  search.addEventListener("blur", function () { setTimeout(function () { results.hidden = true; }, 150); });
  search.addEventListener("focus", function () { if (search.value.trim()) runSearch(); });

  // ------------------------------------------------------------------ panning and zooming

  var drag = null;
  viewport.addEventListener("pointerdown", function (ev) {
    if (ev.button !== 0 || ev.target.closest(".node")) return;
    drag = { x: ev.clientX, y: ev.clientY, tx: state.tx, ty: state.ty, moved: false };
    viewport.setPointerCapture(ev.pointerId);
    viewport.classList.add("panning");
  });
  viewport.addEventListener("pointermove", function (ev) {
    if (!drag) return;
    state.tx = drag.tx + ev.clientX - drag.x;
    state.ty = drag.ty + ev.clientY - drag.y;
    drag.moved = true;
    applyView();
  });
  function endDrag() { drag = null; viewport.classList.remove("panning"); }
  viewport.addEventListener("pointerup", endDrag);
  viewport.addEventListener("pointercancel", endDrag);
  viewport.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var r = viewport.getBoundingClientRect();
    if (ev.ctrlKey || ev.metaKey) {
      zoom(Math.exp(-ev.deltaY * 0.0025), ev.clientX - r.left, ev.clientY - r.top);
    } else {
      state.tx -= ev.deltaX;
      state.ty -= ev.deltaY;
      applyView();
    }
  }, { passive: false });
  viewport.addEventListener("keydown", function (ev) {
    var step = 60;
    if (ev.target !== viewport) return;
    if (ev.key === "ArrowLeft") state.tx += step;
    else if (ev.key === "ArrowRight") state.tx -= step;
    else if (ev.key === "ArrowUp") state.ty += step;
    else if (ev.key === "ArrowDown") state.ty -= step;
    else if (ev.key === "+" || ev.key === "=") return zoom(1.25);
    else if (ev.key === "-") return zoom(0.8);
    else return;
    ev.preventDefault();
    applyView();
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape" && document.activeElement !== search) clearColumn();
    if (ev.key === "/" && document.activeElement !== search) { ev.preventDefault(); search.focus(); }
  });
  document.getElementById("zoom-in").addEventListener("click", function () { zoom(1.25); });
  document.getElementById("zoom-out").addEventListener("click", function () { zoom(0.8); });
  document.getElementById("fit").addEventListener("click", fitAll);
  document.getElementById("to-focus").addEventListener("click", function () {
    state.scale = 1;
    select(FOCUS, { centre: true });
  });

  function legend() {
    var box = document.getElementById("legend");
    var used = new Set();
    G.forEach(function (d) { Object.keys(d.counts).forEach(function (s) { used.add(s); }); });
    STATUSES.forEach(function (s) {
      if (!used.has(s)) return;
      var item = el("span");
      item.appendChild(el("span", "sw " + s));
      item.appendChild(document.createTextNode(s));
      box.appendChild(item);
    });
    if (CE.length) {
      var up = el("span"); up.appendChild(el("span", "sw")).style.background = "var(--up)";
      up.appendChild(document.createTextNode("upstream column"));
      var down = el("span"); down.appendChild(el("span", "sw")).style.background = "var(--down)";
      down.appendChild(document.createTextNode("downstream column"));
      box.appendChild(up);
      box.appendChild(down);
    }
  }

  // ------------------------------------------------------------------ start

  buildNodes();
  legend();
  if (REPLAY) replayBanner();
  if (DATA.truncated) {
    var warn = el("span", "warning", "Partial: the lineage stopped at " +
                  DATA.counts.nodes.toLocaleString("en") + " versions; nodes beyond are not shown");
    document.querySelector(".top").appendChild(warn);
  }
  var built = performance.now();
  layout();
  var laidOut = performance.now();
  select(FOCUS);
  openingView();
  var done = performance.now();
  window.lineagePage = {
    // Milliseconds: the script's parts, and `ready` since the navigation started.
    timings: { parse: parsed - started, build: built - parsed, layout: laidOut - built,
               show: done - laidOut, total: done - started, ready: done },
    state: state
  };
  document.documentElement.setAttribute("data-ready", "true");
})();
