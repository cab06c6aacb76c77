// @ts-check
/* The lineage page's entry point, last of its modules (lineage_page.py joins them in the
 * order PAGE_MODULES declares, after the data and dagre): builds the nodes, the legend and
 * the banner, lays the graph out, opens on the focus, and connects the controls.
 *
 * One node per asset or step (its partitions grouped), laid out left to right by dagre;
 * the focus centred on open; a details panel; column lineage traced across nodes; search;
 * on the page of a replayed snapshot, each node's replay verdicts and a banner summing them up.
 * Every value from the data reaches the page through textContent or an attribute, never as
 * markup. */
/* global Actions, Data, Dom, Header, Layout, NodeView, PanZoom, ReplayBanner, Search, State */

/**
 * What the page tells tools and tests (`window.lineagePage`).
 * @typedef {Object} LineagePageHandle
 * @property {Record<string, number>} timings milliseconds: the script's parts, and `ready`
 *   since the navigation started
 * @property {object} state the page's state, read-only
 */

/** @typedef {Window & { lineagePage?: LineagePageHandle }} LineagePageWindow */

(() => {
  NodeView.build(Actions);
  Header.legend();
  if (Data.replay) ReplayBanner.show(Data.replay, Actions.showReplay);
  Header.partialWarning();
  const built = performance.now();
  Layout.run();
  const laidOut = performance.now();
  Actions.select(Data.focus);
  PanZoom.openingView();
  const done = performance.now();

  Search.install(Actions);
  PanZoom.install();
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && !Search.hasFocus()) Actions.clearColumn();
    if (ev.key === "/" && !Search.hasFocus()) {
      ev.preventDefault();
      Search.focus();
    }
  });
  Dom.byId("zoom-in").addEventListener("click", () => PanZoom.zoom(1.25));
  Dom.byId("zoom-out").addEventListener("click", () => PanZoom.zoom(0.8));
  Dom.byId("fit").addEventListener("click", PanZoom.fitAll);
  Dom.byId("to-focus").addEventListener("click", () => {
    Actions.select(Data.focus, { centre: true, scale: 1 });
  });

  const { started, parsed } = Data;
  /** @type {LineagePageWindow} */ (window).lineagePage = {
    timings: {
      parse: parsed - started,
      build: built - parsed,
      layout: laidOut - built,
      show: done - laidOut,
      total: done - started,
      ready: done,
    },
    state: State.view,
  };
  document.documentElement.setAttribute("data-ready", "true");
})();
