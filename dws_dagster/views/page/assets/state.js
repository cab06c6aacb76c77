// @ts-check
/* What the page is showing: the selected node, the traced column, the nodes whose columns are
 * open, the view (scale and offset) and the layout. One object, changed only through the
 * functions below; every other module reads it through `State.get()`, typed read-only. */
/* global Data */
/* exported State */

/** @typedef {{ x: number, y: number }} GraphPoint a point in graph coordinates */
/** @typedef {{ x: number, y: number, w: number, h: number }} NodeBox a node: centre and size */

/**
 * @typedef {Object} PageStateView
 * @property {number | null} selected the node whose details the panel shows
 * @property {Trace | null} trace the traced column
 * @property {ReadonlySet<number>} expanded nodes whose columns were opened
 * @property {number} scale
 * @property {number} tx
 * @property {number} ty
 * @property {readonly NodeBox[]} pos each node's box
 * @property {readonly GraphPoint[][]} points each edge's points
 * @property {number} width the graph's
 * @property {number} height
 */

const State = (() => {
  const state = {
    /** @type {number | null} */
    selected: Data.focus,
    /** @type {Trace | null} */
    trace: null,
    /** @type {Set<number>} */
    expanded: new Set(),
    scale: 1,
    tx: 0,
    ty: 0,
    /** @type {NodeBox[]} */
    pos: [],
    /** @type {GraphPoint[][]} */
    points: [],
    width: 0,
    height: 0,
  };

  /**
   * The state, to read.
   * @returns {Readonly<PageStateView>}
   */
  function get() {
    return state;
  }

  /**
   * The view: graph coordinates times `scale`, moved by (`tx`, `ty`).
   * @param {number} scale
   * @param {number} tx
   * @param {number} ty
   */
  function setView(scale, tx, ty) {
    state.scale = scale;
    state.tx = tx;
    state.ty = ty;
  }

  /**
   * A new layout: the nodes' boxes, the edges' points, the graph's size.
   * @param {NodeBox[]} pos
   * @param {GraphPoint[][]} points
   * @param {number} width
   * @param {number} height
   */
  function setLayout(pos, points, width, height) {
    state.pos = pos;
    state.points = points;
    state.width = width;
    state.height = height;
  }

  /** @param {number | null} g the node the panel is about, or none */
  function setSelected(g) {
    state.selected = g;
  }

  /** @param {Trace | null} t the traced column, or none */
  function setTrace(t) {
    state.trace = t;
  }

  /** @param {number} g a node whose columns are opened, or closed if they were open */
  function toggleExpanded(g) {
    if (state.expanded.has(g)) state.expanded.delete(g);
    else state.expanded.add(g);
  }

  /** For tools and tests (`window.lineagePage.state`): the state, read-only. */
  const view = Object.freeze({
    get selected() {
      return state.selected;
    },
    get trace() {
      return state.trace;
    },
    get expanded() {
      return Array.from(state.expanded);
    },
    get scale() {
      return state.scale;
    },
    get tx() {
      return state.tx;
    },
    get ty() {
      return state.ty;
    },
    get width() {
      return state.width;
    },
    get height() {
      return state.height;
    },
  });

  return { get, setView, setLayout, setSelected, setTrace, toggleExpanded, view };
})();
