// @ts-check
/* A snapshot's replay verdicts as the page shows them: each verdict with a sign and its
 * words, never its colour alone; the verdict of any member of a node (spelled out in the
 * node's entries, else read from its compact marks); the columns a replay found different. */
/* global Data, Dom */
/* exported Verdicts */

/**
 * A verdict as the page shows it: a member's entry, or one read from the marks (`unlisted`:
 * the data does not spell it out).
 * @typedef {VerdictEntry & { member?: number, unlisted?: boolean }} ShownVerdict
 */

const Verdicts = (() => {
  const G = Data.groups;
  /** @type {Readonly<Record<string, string>>} */
  const SIGN = Object.freeze({
    reproduced: "✓",
    differs: "≠",
    "non-deterministic": "≈",
    failed: "✗",
    "not replayable": "⊘",
  });

  /** @param {string} v */
  function cssClass(v) {
    return Object.prototype.hasOwnProperty.call(SIGN, v) ? "v-" + v.replace(/ /g, "-") : "v-other";
  }

  /** @param {string} v the verdict's sign, "?" for one the page does not know */
  function sign(v) {
    return cssClass(v) === "v-other" ? "?" : SIGN[v];
  }

  /**
   * A verdict's pill: sign, count and words.
   * @param {string} v
   * @param {number} [count]
   * @param {string | null} [title]
   */
  function pill(v, count, title) {
    const p = Dom.el(
      "span",
      "verdict " + cssClass(v),
      sign(v) + " " + (count !== undefined ? count.toLocaleString("en") + " " : "") + v,
    );
    if (title) p.title = title;
    return p;
  }

  /** @type {Map<number, Map<number, MemberVerdict>>} each node's entries by member */
  const entryMaps = new Map();

  /**
   * The verdict of member i of node g: spelled out in its entries, else read from its marks
   * (a plain "reproduced": the replay wrote the very version recorded); null if not judged.
   * @param {number} g
   * @param {number} i
   * @returns {ShownVerdict | null}
   */
  function ofMember(g, i) {
    const r = G[g].replay;
    if (!r || !Data.replay) return null;
    let map = entryMaps.get(g);
    if (!map) {
      const built = new Map();
      r.entries.forEach((e) => built.set(e.member, e));
      entryMaps.set(g, built);
      map = built;
    }
    const listed = map.get(i);
    if (listed) return listed;
    const mark = r.marks.charAt(i);
    if (mark === "-" || mark === "") return null;
    const v = Data.replay.verdicts[mark.charCodeAt(0) - 48];
    const version = G[g].parts.version[i];
    return {
      member: i,
      verdict: v,
      recorded: version,
      step: null,
      detail: null,
      columns: null,
      reproduced: v === "reproduced" ? version : null,
      unlisted: v !== "reproduced",
    };
  }

  /** @type {Map<number, Set<string>>} */
  const differing = new Map();

  /**
   * The columns whose content a replay of node g's versions found different.
   * @param {number} g
   * @returns {Set<string>}
   */
  function differingColumns(g) {
    const known = differing.get(g);
    if (known) return known;
    /** @type {Set<string>} */
    const set = new Set();
    const r = G[g].replay;
    if (r) {
      r.entries.forEach((e) => {
        if (e.verdict !== "reproduced" && e.columns) e.columns.forEach((c) => set.add(c));
      });
    }
    differing.set(g, set);
    return set;
  }

  /**
   * What a verdict says beyond its name, in one line: the detail and the columns.
   * @param {ShownVerdict} e
   */
  function note(e) {
    /** @type {string[]} */
    const parts = [];
    if (e.detail) parts.push(e.detail);
    if (e.columns && e.columns.length) parts.push("columns: " + e.columns.join(", "));
    return parts.join("; ");
  }

  return { SIGN, cssClass, sign, pill, ofMember, differingColumns, note };
})();
