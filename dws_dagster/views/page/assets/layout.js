// @ts-check
/* The layout: dagre places the nodes left to right at their drawn heights; each edge then
 * leaves its source from the right side and enters its target from the left, at its own
 * height. The result goes to State, the nodes are moved there and the edges drawn. */
/* global Data, Edges, NodeView, State */
/* exported Layout */

/** @typedef {import("@dagrejs/dagre").GraphLabel} DagreGraphLabel */
/** @typedef {import("@dagrejs/dagre").NodeLabel} DagreNodeLabel */
/** @typedef {import("@dagrejs/dagre").EdgeLabel} DagreEdgeLabel */
/** @typedef {import("@dagrejs/dagre").graphlib.Graph<DagreGraphLabel, DagreNodeLabel, DagreEdgeLabel>} DagreGraph */

const Layout = (() => {
  const G = Data.groups;
  const EDGES = Data.page.edges;
  const NODE_WIDTH = 272;

  /** Lays the graph out again (the nodes' heights may have changed) and draws it. */
  function run() {
    /** @type {DagreGraph} */
    const graph = new dagre.graphlib.Graph();
    // network-simplex ranks best; tight-tree is much faster on large graphs.
    graph.setGraph({
      rankdir: "LR",
      nodesep: 22,
      ranksep: 84,
      edgesep: 10,
      marginx: 30,
      marginy: 30,
      ranker: G.length > 120 ? "tight-tree" : "network-simplex",
    });
    graph.setDefaultEdgeLabel(() => ({}));
    const nodeEls = NodeView.all;
    const heights = nodeEls.map((n) => n.offsetHeight);
    G.forEach((_, g) => {
      graph.setNode(String(g), { width: NODE_WIDTH, height: heights[g] });
    });
    EDGES.forEach((e) => {
      graph.setEdge(String(e[0]), String(e[1]));
    });
    dagre.layout(graph);
    /** @type {NodeBox[]} */
    const pos = G.map((_, g) => {
      const p = graph.node(String(g));
      const x = /** @type {number} */ (p.x);
      const y = /** @type {number} */ (p.y);
      return { x, y, w: NODE_WIDTH, h: heights[g] };
    });
    const points = ports(
      pos,
      EDGES.map((e) => {
        const label = graph.edge(String(e[0]), String(e[1]));
        return /** @type {GraphPoint[]} */ (label.points).slice();
      }),
    );
    const info = graph.graph();
    const width = /** @type {number} */ (info.width);
    const height = /** @type {number} */ (info.height);
    State.setLayout(pos, points, width, height);
    nodeEls.forEach((n, g) => {
      const p = pos[g];
      n.style.left = (p.x - p.w / 2) + "px";
      n.style.top = (p.y - p.h / 2) + "px";
    });
    Edges.draw();
  }

  /**
   * Edges leave a node from its right side and enter the next from its left, each at its
   * own height (ordered as the edges come, so they do not cross there), rather than where
   * the line to the node's centre cuts its box: an edge then never runs across a box of
   * the rank it enters, and arrows into one node do not pile up on one point.
   * @param {NodeBox[]} pos
   * @param {GraphPoint[][]} all each edge's points from dagre, changed in place
   */
  function ports(pos, all) {
    /** @type {{ i: number, y: number }[][]} */
    const outs = G.map(() => []);
    /** @type {{ i: number, y: number }[][]} */
    const ins = G.map(() => []);
    EDGES.forEach((e, i) => {
      const pts = all[i];
      outs[e[0]].push({ i, y: pts[Math.min(1, pts.length - 1)].y });
      ins[e[1]].push({ i, y: pts[Math.max(0, pts.length - 2)].y });
    });
    /**
     * @param {{ i: number, y: number }[]} list
     * @param {number} g
     * @param {boolean} out
     */
    function spread(list, g, out) {
      const p = pos[g];
      const n = list.length;
      list.sort((a, b) => a.y - b.y);
      const top = p.y - p.h / 2 + 10;
      const span = Math.max(0, p.h - 20);
      list.forEach((item, k) => {
        const y = n === 1 ? p.y : top + (span * k) / (n - 1);
        const pts = all[item.i];
        const x = out ? p.x + p.w / 2 : p.x - p.w / 2;
        const lead = { x: out ? x + 18 : x - 18, y };
        if (out) {
          pts[0] = { x, y };
          pts.splice(1, 0, lead);
        } else {
          pts[pts.length - 1] = { x, y };
          pts.splice(pts.length - 1, 0, lead);
        }
      });
    }
    G.forEach((_, g) => {
      spread(outs[g], g, true);
      spread(ins[g], g, false);
    });
    // An edge that closes a cycle (records should not, but may) runs back below both nodes.
    EDGES.forEach((e, i) => {
      const s = pos[e[0]];
      const t = pos[e[1]];
      if (t.x > s.x) return;
      const pts = all[i];
      const first = pts[1];
      const last = pts[pts.length - 2];
      const low = Math.max(s.y + s.h / 2, t.y + t.h / 2) + 24;
      const back = [{ x: first.x, y: low }, { x: last.x, y: low }];
      all[i] = [pts[0], first, ...back, last, pts[pts.length - 1]];
    });
    return all;
  }

  return { run };
})();
