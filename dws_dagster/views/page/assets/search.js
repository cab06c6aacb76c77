// @ts-check
/* The search box: nodes, columns and partitions whose names hold what was typed, listed as
 * one types (names that start with it first), chosen with the mouse or the keys ("/" to get
 * there, arrows, Enter, Esc). */
/* global Data, Dom, Format, GraphIndex, PanZoom, State */
/* exported Search */

/**
 * @typedef {Object} SearchHit
 * @property {string} what "node", "column", or what the node's members are called
 * @property {string} label
 * @property {number} g the node
 * @property {string} [c] the column
 * @property {number} [part] the member
 */

const Search = (() => {
  const G = Data.groups;
  const { el } = Dom;
  const search = /** @type {HTMLInputElement} */ (Dom.byId("search"));
  const results = Dom.byId("results");

  /**
   * @typedef {Object} SearchIndex
   * @property {{ text: string, g: number }[]} nodes
   * @property {{ text: string, col: string, g: number, c: string }[]} columns
   */

  /** @type {SearchIndex | null} built on the first search */
  let index = null;
  /** @type {SearchHit[]} what the list shows */
  let found = [];
  let active = -1;
  /** @type {number | undefined} */
  let pending;

  /** @returns {SearchIndex} */
  function buildIndex() {
    /** @type {SearchIndex} */
    const built = { nodes: [], columns: [] };
    G.forEach((d, g) => {
      built.nodes.push({ text: (d.name + " " + d.ref).toLowerCase(), g });
      d.columns.forEach((c) => {
        built.columns.push({ text: (d.name + "." + c).toLowerCase(), col: c.toLowerCase(), g, c });
      });
    });
    return built;
  }

  /**
   * 0 for a name that starts with `q`, else 1.
   * @param {string} text
   * @param {string} q
   */
  function rank(text, q) {
    return text.indexOf(q) === 0 ? 0 : 1;
  }

  /**
   * What matches `q`: up to 10 nodes, 12 columns and 8 partitions.
   * @param {SearchIndex} idx
   * @param {string} q
   * @returns {SearchHit[]}
   */
  function matches(idx, q) {
    /** @type {SearchHit[]} */
    const hits = [];
    idx.nodes
      .filter((x) => x.text.indexOf(q) >= 0)
      .sort((a, b) => rank(G[a.g].name.toLowerCase(), q) - rank(G[b.g].name.toLowerCase(), q))
      .slice(0, 10)
      .forEach((x) => hits.push({ what: "node", label: G[x.g].name, g: x.g }));
    idx.columns
      .filter((x) => x.text.indexOf(q) >= 0)
      .sort((a, b) => rank(a.col, q) - rank(b.col, q))
      .slice(0, 12)
      .forEach((x) => hits.push({ what: "column", label: GraphIndex.colLabel(x.g, x.c), g: x.g, c: x.c }));
    if (q.length >= 2) {
      let parts = 0;
      for (let g = 0; g < G.length && parts < 8; g++) {
        const keys = G[g].parts.key;
        if (G[g].members < 2) continue;
        for (let i = 0; i < keys.length && parts < 8; i++) {
          if (String(keys[i]).toLowerCase().indexOf(q) >= 0) {
            hits.push({ what: Format.unit(G[g])[0], label: G[g].name + " · " + keys[i], g, part: i });
            parts++;
          }
        }
      }
    }
    return hits;
  }

  /**
   * @param {PageActions} actions
   */
  function install(actions) {
    function runSearch() {
      const q = search.value.trim().toLowerCase();
      results.textContent = "";
      found = [];
      active = -1;
      if (!q) {
        results.hidden = true;
        return;
      }
      if (!index) index = buildIndex();
      found = matches(index, q);
      if (!found.length) results.appendChild(el("li", "none", "Nothing named like that"));
      found.forEach((r, i) => {
        const li = el("li");
        li.setAttribute("role", "option");
        li.appendChild(el("span", "what", r.what));
        li.appendChild(el("span", "label", r.label));
        li.title = r.label;
        li.addEventListener("mousedown", (ev) => {
          ev.preventDefault();
          choose(i);
        });
        results.appendChild(li);
      });
      results.hidden = false;
    }

    /** @param {number} i */
    function choose(i) {
      const r = found[i];
      if (!r) return;
      results.hidden = true;
      search.blur();
      if (r.c !== undefined) {
        actions.selectColumn(r.g, r.c);
        return;
      }
      const readable = State.get().scale >= PanZoom.MIN_READABLE;
      actions.select(r.g, { centre: true, scale: readable ? undefined : 1, part: r.part });
    }

    /** @param {number} i */
    function highlight(i) {
      const items = results.querySelectorAll("li");
      items.forEach((li, j) => li.classList.toggle("active", j === i));
      if (items[i]) items[i].scrollIntoView({ block: "nearest" });
      active = i;
    }

    search.addEventListener("input", () => {
      clearTimeout(pending);
      pending = setTimeout(runSearch, 60);
    });
    search.addEventListener("keydown", (ev) => {
      if (ev.key === "ArrowDown") {
        ev.preventDefault();
        highlight(Math.min(found.length - 1, active + 1));
      } else if (ev.key === "ArrowUp") {
        ev.preventDefault();
        highlight(Math.max(0, active - 1));
      } else if (ev.key === "Enter") {
        clearTimeout(pending);
        runSearch();
        choose(active >= 0 ? active : 0);
      } else if (ev.key === "Escape") {
        results.hidden = true;
      }
    });
    search.addEventListener("blur", () => {
      setTimeout(() => {
        results.hidden = true;
      }, 150);
    });
    search.addEventListener("focus", () => {
      if (search.value.trim()) runSearch();
    });
  }

  /** Whether the search box has the keyboard. */
  function hasFocus() {
    return document.activeElement === search;
  }

  function focus() {
    search.focus();
  }

  return { install, hasFocus, focus };
})();
