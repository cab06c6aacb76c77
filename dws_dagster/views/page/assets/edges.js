// @ts-check
/* The edges' layer: an SVG path per edge along the layout's points (each saying how many
 * inputs it stands for where that does not cover another count), and, while a column is
 * traced, a curve from each column on its path to the next. */
/* global ColumnTrace, Data, Dom, Format, GraphIndex, NodeView, State */
/* exported Edges */

const Edges = (() => {
  const G = Data.groups;
  const CE = Data.columnEdges;
  const { svgEl } = Dom;
  const svg = Dom.byId("edges");
  /** Arrow heads: id and colour. */
  const MARKERS = [
    ["arrow", "#8a9099"],
    ["arrow-stale", "#e65100"],
    ["arrow-path", "#37474f"],
    ["arrow-up", "#00838f"],
    ["arrow-down", "#7b1fa2"],
  ];

  /**
   * A B-spline through dagre's points (d3's curveBasis), the way dagre-d3 draws edges.
   * @param {readonly GraphPoint[]} p
   */
  function basis(p) {
    let d = "M" + p[0].x + "," + p[0].y;
    if (p.length === 2) return d + "L" + p[1].x + "," + p[1].y;
    let x0 = p[0].x;
    let y0 = p[0].y;
    let x1 = p[1].x;
    let y1 = p[1].y;
    d += "L" + (5 * x0 + x1) / 6 + "," + (5 * y0 + y1) / 6;
    for (let i = 2; i < p.length; i++) {
      const x = p[i].x;
      const y = p[i].y;
      d +=
        "C" + (2 * x0 + x1) / 3 + "," + (2 * y0 + y1) / 3 + " " + (x0 + 2 * x1) / 3 + "," +
        (y0 + 2 * y1) / 3 + " " + (x0 + 4 * x1 + x) / 6 + "," + (y0 + 4 * y1 + y) / 6;
      x0 = x1;
      y0 = y1;
      x1 = x;
      y1 = y;
    }
    d +=
      "C" + (2 * x0 + x1) / 3 + "," + (2 * y0 + y1) / 3 + " " + (x0 + 2 * x1) / 3 + "," +
      (y0 + 2 * y1) / 3 + " " + x1 + "," + y1;
    return d;
  }

  /** Every edge again, from the state's layout and trace. */
  function draw() {
    const { trace: t, points, width, height } = State.get();
    svg.textContent = "";
    svg.setAttribute("width", String(Math.ceil(width)));
    svg.setAttribute("height", String(Math.ceil(height)));
    const defs = svgEl("defs", {});
    MARKERS.forEach((m) => {
      const marker = svgEl("marker", {
        id: m[0],
        viewBox: "0 0 10 10",
        refX: "9",
        refY: "5",
        markerWidth: "7",
        markerHeight: "7",
        orient: "auto",
      });
      marker.appendChild(svgEl("path", { d: "M0,0 L10,5 L0,10 z", fill: m[1] }));
      defs.appendChild(marker);
    });
    svg.appendChild(defs);
    const layer = svgEl("g", {});
    /** @type {{ x: number, y: number, w: number, h: number }[]} */
    const labels = [];
    Data.page.edges.forEach((e, i) => {
      const onPath = t && t.groups.has(e[0]) && t.groups.has(e[1]) && ColumnTrace.uses(t, e[0], e[1]);
      const stale = e[3] > 0;
      const cls = "edge" + (stale ? " stale" : "") + (onPath ? " on-path" : "");
      const path = svgEl("path", {
        d: basis(points[i]),
        class: cls,
        "marker-end": "url(#" + (onPath ? "arrow-path" : stale ? "arrow-stale" : "arrow") + ")",
      });
      const title = svgEl("title", {});
      title.textContent =
        G[e[0]].name + " → " + G[e[1]].name + " (" + Format.plural(e[2], "input", "inputs") +
        (stale ? ", " + e[3] + " stale" : "") + ")";
      path.appendChild(title);
      layer.appendChild(path);
      if (e[2] > 1) {
        // How many inputs the edge stands for, where that does not cover another count.
        const pts = points[i];
        const at = pts[pts.length - 2];
        const text = "×" + e[2];
        const box = { x: at.x - 6 - text.length * 7, y: at.y - 16, w: text.length * 7, h: 12 };
        const covers = labels.some(
          (b) => b.x < box.x + box.w && box.x < b.x + b.w && b.y < box.y + box.h && box.y < b.y + b.h,
        );
        if (!covers) {
          labels.push(box);
          const label = svgEl("text", {
            x: String(at.x - 6),
            y: String(at.y - 5),
            class: "edge-count",
            "text-anchor": "end",
          });
          label.textContent = text;
          layer.appendChild(label);
        }
      }
    });
    svg.appendChild(layer);
    if (t) drawColumnEdges(t);
  }

  /**
   * Column to column curves between the rows of traced columns.
   * @param {Trace} t
   */
  function drawColumnEdges(t) {
    const layer = svgEl("g", {});
    t.used.forEach((dir, i) => {
      const e = CE[i];
      const from = rowPoint(e[0], e[1], "right");
      const to = e[3] === null ? headPoint(e[2]) : rowPoint(e[2], e[3], "left");
      if (!from || !to) return;
      const dx = Math.max(40, Math.abs(to.x - from.x) / 2);
      const d =
        "M" + from.x + "," + from.y + "C" + (from.x + dx) + "," + from.y + " " + (to.x - dx) +
        "," + to.y + " " + to.x + "," + to.y;
      const path = svgEl("path", {
        d,
        class: "col-edge " + dir + (e[4] === "indirect" ? " indirect" : ""),
        "marker-end": "url(#arrow-" + dir + ")",
      });
      const title = svgEl("title", {});
      title.textContent =
        GraphIndex.colLabel(e[0], e[1]) + " → " +
        (e[3] === null ? G[e[2]].name + " (rows)" : GraphIndex.colLabel(e[2], e[3])) + ": " +
        e[4] + (e[5] ? ", " + e[5] : "");
      path.appendChild(title);
      layer.appendChild(path);
    });
    svg.appendChild(layer);
  }

  /**
   * Where a line to or from column `c` of node `g` meets the node's side; null when the
   * column is not listed.
   * @param {number} g
   * @param {string} c
   * @param {"left" | "right"} side
   * @returns {GraphPoint | null}
   */
  function rowPoint(g, c, side) {
    const node = NodeView.element(g);
    const li = /** @type {HTMLElement | null} */ (
      node.querySelector('.col[data-col="' + Dom.cssEscape(c) + '"]')
    );
    if (!li) return null;
    const p = State.get().pos[g];
    const y = p.y - p.h / 2 + Dom.offsetWithin(li, node) + li.offsetHeight / 2;
    return { x: side === "right" ? p.x + p.w / 2 : p.x - p.w / 2, y };
  }

  /**
   * Where whole-table lineage enters node `g`: by its title.
   * @param {number} g
   * @returns {GraphPoint}
   */
  function headPoint(g) {
    const p = State.get().pos[g];
    return { x: p.x - p.w / 2, y: p.y - p.h / 2 + 16 };
  }

  return { draw };
})();
