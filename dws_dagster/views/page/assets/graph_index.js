// @ts-check
/* Look-ups over the data, built once: each node's edges in and out, and each column's
 * column-lineage edges (by "node\0column" key), with the whole-table edges into each node. */
/* global Data */
/* exported GraphIndex */

const GraphIndex = (() => {
  const G = Data.groups;
  const CE = Data.columnEdges;

  /**
   * The key of column `c` of node `g` in the maps below.
   * @param {number} g
   * @param {string} c
   */
  function ck(g, c) {
    return g + "\u0000" + c;
  }

  /**
   * @template K, V
   * @param {Map<K, V[]>} map
   * @param {K} key
   * @param {V} value
   */
  function push(map, key, value) {
    const list = map.get(key);
    if (list) list.push(value);
    else map.set(key, [value]);
  }

  /**
   * What a column-lineage edge did: its subtype ("aggregation"), else its kind.
   * @param {ColumnEdge} e
   */
  function derivation(e) {
    return e[5] ? e[5] : e[4];
  }

  /**
   * "asset.column"; a folder of files ends in "/", so its columns read "folder/ · column".
   * @param {number} g
   * @param {string} c
   */
  function colLabel(g, c) {
    const name = G[g].name;
    return name.charAt(name.length - 1) === "/" ? name + " · " + c : name + "." + c;
  }

  /** @type {number[][]} indexes into `edges` of each node's inputs */
  const inputsOf = G.map(() => []);
  /** @type {number[][]} and of its outputs */
  const outputsOf = G.map(() => []);
  Data.page.edges.forEach((e, i) => {
    outputsOf[e[0]].push(i);
    inputsOf[e[1]].push(i);
  });
  /** @type {Map<string, number[]>} indexes into `column_edges` into each column */
  const colIn = new Map();
  /** @type {Map<string, number[]>} and out of it */
  const colOut = new Map();
  /** @type {number[][]} whole-table edges into each node */
  const rowsIn = G.map(() => []);
  CE.forEach((e, i) => {
    push(colOut, ck(e[0], e[1]), i);
    if (e[3] === null) rowsIn[e[2]].push(i);
    else push(colIn, ck(e[2], e[3]), i);
  });

  return { ck, push, derivation, colLabel, inputsOf, outputsOf, colIn, colOut, rowsIn };
})();
