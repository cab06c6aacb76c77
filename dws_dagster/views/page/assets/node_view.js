// @ts-check
/* The graph's nodes: one box per asset or step with its partitions grouped (how many, their
 * range, a bar of their statuses), its replay verdicts, and its columns, folded or listed
 * with the traced ones first-class. What a click on a node does is the caller's
 * (`NodeHandlers`). */
/* global ColumnTrace, Data, Dom, Format, GraphIndex, State, Verdicts */
/* exported NodeView */

/**
 * @typedef {Object} NodeHandlers
 * @property {(g: number) => void} select show node g's details
 * @property {(g: number, c: string) => void} selectColumn trace column c of node g
 * @property {(g: number) => void} toggleColumns open or fold node g's columns
 */

const NodeView = (() => {
  const G = Data.groups;
  const CE = Data.columnEdges;
  const { el, span } = Dom;
  const COLS_SHOWN = 40; // columns listed in an expanded node
  const COLS_BESIDE_PATH = 6; // other columns listed beside the traced ones
  const nodesEl = Dom.byId("nodes");
  const viewport = Dom.byId("viewport");
  /** @type {HTMLDivElement[]} */
  const nodeEls = [];

  /**
   * A bar of the members' statuses, each as wide as its count.
   * @param {Record<string, number>} counts
   * @param {number} total
   */
  function statusBar(counts, total) {
    const bar = el("div", "bar");
    /** @type {string[]} */
    const parts = [];
    Data.statuses.forEach((s) => {
      if (!counts[s]) return;
      const seg = el("span", s);
      seg.style.flexGrow = String(counts[s]);
      bar.appendChild(seg);
      parts.push(counts[s].toLocaleString("en") + " " + s);
    });
    bar.title = parts.join(", ") + " of " + total.toLocaleString("en");
    bar.setAttribute("role", "img");
    bar.setAttribute("aria-label", bar.title);
    return bar;
  }

  /**
   * What the node holds: its version, or how many partitions (files, versions) and which.
   * @param {PageGroup} d
   */
  function infoLines(d) {
    const det = d.details;
    const range = /** @type {[string, string]} */ (d.range);
    if (d.count > 1) {
      const u = Format.unit(d);
      return [Format.plural(d.count, u[0], u[1]), range[0] + " … " + range[1]];
    }
    if (d.partitioned && d.range) return ["1 " + Format.unit(d)[0] + " · " + det.status, range[0]];
    return [(det.version ? "@" + Format.short(det.version) : "no version") + " · " + det.status];
  }

  /**
   * The node's replay verdicts, under its status: one pill (and what it found) when the
   * replay judged one of its versions, else a pill per verdict with its count.
   * @param {number} g
   * @param {GroupReplay} r
   * @param {ReplaySummary} replay
   */
  function verdictLine(g, r, replay) {
    const d = G[g];
    const box = el("div", "verdicts");
    /** @type {string[]} */
    const words = [];
    if (r.judged === 1) {
      const member = r.entries.length ? r.entries[0].member : r.marks.search(/[0-9]/);
      const e = /** @type {ShownVerdict} */ (Verdicts.ofMember(g, member));
      box.appendChild(Verdicts.pill(e.verdict, undefined, Verdicts.note(e) || null));
      words.push(e.verdict);
      if (e.columns && e.columns.length) {
        const cols = "columns: " + e.columns.join(", ");
        box.appendChild(span("verdict-cols", cols, cols));
      }
      if (e.detail) box.appendChild(span("verdict-note", e.detail, e.detail));
    } else {
      replay.verdicts.forEach((v) => {
        if (!r.counts[v]) return;
        box.appendChild(Verdicts.pill(v, r.counts[v]));
        words.push(r.counts[v].toLocaleString("en") + " " + v);
      });
      if (r.judged < d.members) {
        const u = Format.unit(d);
        box.appendChild(
          el("span", "verdict-of", "of " + Format.plural(r.judged, u[0], u[1]) + " replayed"),
        );
      }
    }
    box.setAttribute("aria-label", "Replay: " + words.join(", "));
    box.title = "Replay of snapshot " + replay.snapshot_name + ": " + words.join(", ");
    return box;
  }

  /**
   * The node's columns: a button when folded; the list when expanded or traced (the traced
   * columns first-class, a few others beside them, the rest counted).
   * @param {number} g
   */
  function fillColumns(g) {
    const d = G[g];
    const box = /** @type {HTMLElement} */ (nodeEls[g].querySelector(".node-cols"));
    box.textContent = "";
    const { trace: t, expanded } = State.get();
    const traced = t && t.groups.has(g);
    const rowsNote = t && t.rows.get(g);
    if (rowsNote) {
      /** @type {string[]} */
      const kinds = [];
      rowsNote.forEach((i) => {
        const k = GraphIndex.derivation(CE[i]) + " (" + CE[i][1] + ")";
        if (kinds.indexOf(k) < 0) kinds.push(k);
      });
      box.appendChild(el("div", "rows-note", "rows ← " + kinds.join(", ")));
    }
    if (!d.columns.length) return;
    const open = expanded.has(g) || traced;
    const btn = el(
      "button",
      "cols-btn",
      Format.plural(d.columns.length, "column", "columns") + (open ? " ▴" : " ▾"),
    );
    btn.type = "button";
    btn.setAttribute("aria-expanded", open ? "true" : "false");
    box.appendChild(btn);
    if (!open) return;
    const list = el("ul", "cols");
    let picked = d.columns;
    const limit = expanded.has(g) ? COLS_SHOWN : COLS_BESIDE_PATH;
    if (traced) {
      const onPath = d.columns.filter((c) => ColumnTrace.role(t, g, c));
      const others = d.columns.filter((c) => !ColumnTrace.role(t, g, c));
      picked = onPath.concat(others.slice(0, Math.max(0, limit - onPath.length)));
      picked = d.columns.filter((c) => picked.indexOf(c) >= 0);
    } else {
      picked = d.columns.slice(0, limit);
    }
    picked.forEach((c) => {
      const role = ColumnTrace.role(t, g, c);
      const differs = Verdicts.differingColumns(g).has(c);
      const li = el(
        "li",
        "col" + (role ? " " + role : t ? " off" : "") + (differs ? " differs" : ""),
      );
      li.dataset.col = c;
      li.title =
        GraphIndex.colLabel(g, c) +
        (differs ? " — its content differs in the replay" : "") +
        " — click to trace its lineage";
      if (differs) li.appendChild(span("dmark", "≠", "its content differs in the replay"));
      li.appendChild(el("span", "name", c));
      const how = ColumnTrace.how(t, g, c);
      if (how) {
        const howEl = el("span", "how", how);
        howEl.title = how;
        li.appendChild(howEl);
      }
      list.appendChild(li);
    });
    if (picked.length < d.columns.length) {
      list.appendChild(
        el(
          "li",
          "more",
          "+" + (d.columns.length - picked.length) + " more (all in the details panel)",
        ),
      );
    }
    box.appendChild(list);
  }

  /**
   * @param {number} g
   * @param {NodeHandlers} on
   */
  function buildNode(g, on) {
    const d = G[g];
    const n = el("div", "node st-" + d.status + (d.focus ? " focus" : ""));
    n.dataset.group = String(g);
    n.tabIndex = 0;
    n.setAttribute("role", "button");
    const title = el("div", "title", d.name);
    title.title = d.name;
    n.appendChild(title);
    if (d.focus) n.appendChild(el("span", "badge", "focus"));
    const sub = el("div", "sub", Format.subText(d));
    sub.title = sub.textContent || "";
    n.appendChild(sub);
    infoLines(d).forEach((line, i) => {
      const info = el("div", i ? "sub range" : "info", line);
      info.title = line;
      n.appendChild(info);
    });
    if (d.members > 1) n.appendChild(statusBar(d.counts, d.members));
    if (d.replay && Data.replay) n.appendChild(verdictLine(g, d.replay, Data.replay));
    n.appendChild(el("div", "node-cols"));
    n.addEventListener("click", (ev) => {
      const col = /** @type {HTMLElement | null} */ (Dom.target(ev).closest(".col"));
      if (col) {
        on.selectColumn(g, col.dataset.col || "");
        ev.stopPropagation();
        return;
      }
      if (Dom.target(ev).closest(".cols-btn")) {
        on.toggleColumns(g);
        ev.stopPropagation();
        return;
      }
      on.select(g);
    });
    n.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") {
        ev.preventDefault();
        on.select(g);
      }
    });
    return n;
  }

  /**
   * Every node, into the page (laid out later).
   * @param {NodeHandlers} on
   */
  function build(on) {
    const frag = document.createDocumentFragment();
    G.forEach((_, g) => {
      const n = buildNode(g, on);
      nodeEls.push(n);
      fillColumns(g);
      frag.appendChild(n);
    });
    nodesEl.appendChild(frag);
  }

  /** Every node's columns again (the trace changed), and who is on its path. */
  function refreshColumns() {
    nodeEls.forEach((_, g) => fillColumns(g));
    const t = State.get().trace;
    viewport.classList.toggle("dim", !!t);
    nodeEls.forEach((n, g) => n.classList.toggle("on-path", !!t && t.groups.has(g)));
  }

  /**
   * Marks node g selected (none for null) instead of the one selected so far.
   * @param {number | null} g
   */
  function markSelected(g) {
    const before = State.get().selected;
    if (before !== null && nodeEls[before]) nodeEls[before].classList.remove("selected");
    if (g !== null) nodeEls[g].classList.add("selected");
  }

  /** @param {number} g */
  function element(g) {
    return nodeEls[g];
  }

  /** Every node's element, by index. */
  const all = /** @type {readonly HTMLDivElement[]} */ (nodeEls);

  return { build, element, all, fillColumns, refreshColumns, markSelected, statusBar };
})();
