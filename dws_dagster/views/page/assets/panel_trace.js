// @ts-check
/* The panel's column-lineage box, while a column is traced: its upstream and downstream
 * columns as links (each saying how it feeds the next), and the nodes whose rows whole-table
 * lineage reaches. */
/* global ColumnTrace, Data, Dom, GraphIndex, PanelKit */
/* exported PanelTrace */

const PanelTrace = (() => {
  const G = Data.groups;
  const CE = Data.columnEdges;
  const { el } = Dom;
  const { colLabel } = GraphIndex;

  /**
   * @param {Trace} t
   * @param {PageActions} actions
   */
  function render(t, actions) {
    const box = el("div", "trace-box");
    const h = el("h3", null, "Column lineage of " + colLabel(t.g, t.c));
    const clear = el("button", "clear", "clear");
    clear.type = "button";
    clear.title = "Stop tracing this column (Esc)";
    clear.addEventListener("click", actions.clearColumn);
    h.appendChild(clear);
    box.appendChild(h);

    /**
     * How column (g, c) upstream feeds the next: the derivations of the edges out of it.
     * @param {number} g
     * @param {string} c
     */
    function feeds(g, c) {
      /** @type {string[]} */
      const outs = [];
      (GraphIndex.colOut.get(GraphIndex.ck(g, c)) || []).forEach((i) => {
        if (t.used.has(i)) {
          const e = CE[i];
          const s =
            GraphIndex.derivation(e) + " → " +
            (e[3] === null ? G[e[2]].name + " (rows)" : colLabel(e[2], e[3]));
          if (outs.indexOf(s) < 0) outs.push(s);
        }
      });
      return outs.join("; ");
    }

    /**
     * @param {string} title
     * @param {Map<string, [number, string]>} map
     * @param {"up" | "down"} cls
     */
    function list(title, map, cls) {
      box.appendChild(el("h4", null, title + " (" + map.size + ")"));
      if (!map.size) {
        box.appendChild(el("p", "note", "none recorded"));
        return;
      }
      const ul = el("ul", "trace");
      map.forEach((v) => {
        const li = el("li");
        const b = el("button", "link col-link " + cls, colLabel(v[0], v[1]));
        b.type = "button";
        b.addEventListener("click", () => actions.selectColumn(v[0], v[1]));
        li.appendChild(b);
        const how = cls === "up" ? feeds(v[0], v[1]) : ColumnTrace.how(t, v[0], v[1]);
        if (how) li.appendChild(el("span", "kind", " " + how));
        ul.appendChild(li);
      });
      box.appendChild(ul);
    }

    list("Upstream", t.up, "up");
    list("Downstream", t.down, "down");
    /** @type {string[]} */
    const rowsOf = [];
    t.rows.forEach((_, g) => rowsOf.push(G[g].name));
    if (rowsOf.length) {
      box.appendChild(
        el(
          "p",
          "note",
          "Whole-table lineage (filters, joins, sorts) reaches the rows of: " + rowsOf.join(", "),
        ),
      );
    }
    PanelKit.add(box);
  }

  return { render };
})();
