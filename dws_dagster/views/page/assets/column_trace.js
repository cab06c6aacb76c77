// @ts-check
/* Column lineage traced from one column: every column upstream and downstream of it, the
 * edges the trace followed, and the nodes whose rows whole-table lineage reaches. Pure
 * functions of the data; the page keeps the current trace in State. */
/* global Data, GraphIndex */
/* exported ColumnTrace */

/**
 * @typedef {Object} Trace
 * @property {number} g the traced column's node
 * @property {string} c the traced column
 * @property {Map<string, [number, string]>} up every column upstream, by key
 * @property {Map<string, [number, string]>} down every column downstream, by key
 * @property {Map<number, "up" | "down">} used the column edges followed, and which way
 * @property {Map<string, number[]>} into the edges followed into each column
 * @property {Map<number, number[]>} rows the whole-table edges followed into each node
 * @property {Set<number>} groups the nodes on the path
 */

const ColumnTrace = (() => {
  const CE = Data.columnEdges;
  const { ck, push, derivation, colIn, colOut, rowsIn } = GraphIndex;

  /**
   * Every column upstream and downstream of (g, c): for each, the derivations of the edges
   * into it that the trace followed. Whole-table (dataset) lineage into a node joins the
   * upstream of each of its columns; downstream it marks the node's rows, not its columns.
   * @param {number} g
   * @param {string} c
   * @returns {Trace}
   */
  function trace(g, c) {
    /** @type {Map<string, [number, string]>} */
    const up = new Map();
    /** @type {Map<string, [number, string]>} */
    const down = new Map();
    /** @type {Map<number, "up" | "down">} */
    const used = new Map();
    /** @type {Map<number, number[]>} */
    const rows = new Map();
    /** @type {Map<string, number[]>} column key -> edges into it that the trace used */
    const into = new Map();
    const start = ck(g, c);
    /** @type {[number, string][]} */
    let stack = [[g, c]];
    let seen = new Set([start]);
    const rowsDone = new Set();
    while (stack.length) {
      const item = /** @type {[number, string]} */ (stack.pop());
      let incoming = colIn.get(ck(item[0], item[1])) || [];
      if (!rowsDone.has(item[0])) {
        rowsDone.add(item[0]);
        incoming = incoming.concat(rowsIn[item[0]]);
      }
      incoming.forEach((i) => {
        const e = CE[i];
        const k = ck(e[0], e[1]);
        if (!used.has(i)) used.set(i, "up");
        if (e[3] !== null) push(into, ck(e[2], e[3]), i);
        else push(rows, e[2], i);
        if (!seen.has(k)) {
          seen.add(k);
          up.set(k, [e[0], e[1]]);
          stack.push([e[0], e[1]]);
        }
      });
    }
    stack = [[g, c]];
    seen = new Set([start]);
    while (stack.length) {
      const item = /** @type {[number, string]} */ (stack.pop());
      (colOut.get(ck(item[0], item[1])) || []).forEach((i) => {
        const e = CE[i];
        if (!used.has(i)) used.set(i, "down");
        if (e[3] === null) {
          push(rows, e[2], i);
          return;
        }
        const k = ck(e[2], e[3]);
        push(into, k, i);
        if (!seen.has(k)) {
          seen.add(k);
          down.set(k, [e[2], e[3]]);
          stack.push([e[2], e[3]]);
        }
      });
    }
    const groups = new Set([g]);
    up.forEach((v) => groups.add(v[0]));
    down.forEach((v) => groups.add(v[0]));
    rows.forEach((_, tg) => groups.add(tg));
    return { g, c, up, down, used, into, rows, groups };
  }

  /**
   * Where column `c` of node `g` is on the trace: the traced column, up, down, or off it.
   * @param {Trace | null} t
   * @param {number} g
   * @param {string} c
   * @returns {"sel" | "up" | "down" | null}
   */
  function role(t, g, c) {
    if (!t) return null;
    if (t.g === g && t.c === c) return "sel";
    const k = ck(g, c);
    if (t.up.has(k)) return "up";
    if (t.down.has(k)) return "down";
    return null;
  }

  /**
   * How the trace reached column `c` of node `g`: "← transformation, aggregation".
   * @param {Trace | null} t
   * @param {number} g
   * @param {string} c
   */
  function how(t, g, c) {
    const list = t && t.into.get(ck(g, c));
    if (!list) return "";
    /** @type {string[]} */
    const names = [];
    list.forEach((i) => {
      const d = derivation(CE[i]);
      if (names.indexOf(d) < 0) names.push(d);
    });
    return "← " + names.join(", ");
  }

  /**
   * Whether the trace followed a column edge from node `s` to node `tg`.
   * @param {Trace} t
   * @param {number} s
   * @param {number} tg
   */
  function uses(t, s, tg) {
    let found = false;
    t.used.forEach((_, i) => {
      if (CE[i][0] === s && CE[i][2] === tg) found = true;
    });
    return found;
  }

  return { trace, role, how, uses };
})();
