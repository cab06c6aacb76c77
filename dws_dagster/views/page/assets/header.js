// @ts-check
/* The header's own parts: the legend of the statuses the page uses (and of column lineage's
 * colours, when it has any), and a warning when the lineage was cut short. */
/* global Data, Dom */
/* exported Header */

const Header = (() => {
  const { el } = Dom;

  /** The legend: a swatch per status some node has, then the column-lineage colours. */
  function legend() {
    const box = Dom.byId("legend");
    /** @type {Set<string>} */
    const used = new Set();
    Data.groups.forEach((d) => Object.keys(d.counts).forEach((s) => used.add(s)));
    Data.statuses.forEach((s) => {
      if (!used.has(s)) return;
      const item = el("span");
      item.appendChild(el("span", "sw " + s));
      item.appendChild(document.createTextNode(s));
      box.appendChild(item);
    });
    if (Data.columnEdges.length) {
      /** @type {[string, string][]} */
      const lineage = [
        ["var(--up)", "upstream column"],
        ["var(--down)", "downstream column"],
      ];
      lineage.forEach(([colour, words]) => {
        const item = el("span");
        item.appendChild(el("span", "sw")).style.background = colour;
        item.appendChild(document.createTextNode(words));
        box.appendChild(item);
      });
    }
  }

  /** A warning when the lineage stopped before its end. */
  function partialWarning() {
    if (!Data.page.truncated) return;
    const warn = el(
      "span",
      "warning",
      "Partial: the lineage stopped at " + Data.page.counts.nodes.toLocaleString("en") +
        " versions; nodes beyond are not shown",
    );
    /** @type {HTMLElement} */ (document.querySelector(".top")).appendChild(warn);
  }

  return { legend, partialWarning };
})();
