// @ts-check
/* The panel's history of a node: a ref's earlier versions with their parameters and metrics
 * (what changed from the run before in bold), or for a node of many refs the runs that made
 * its members. */
/* global Dom, Format, PanelKit */
/* exported PanelHistory */

const PanelHistory = (() => {
  const { el, span } = Dom;
  const { shown, when } = Format;

  /**
   * The runs that made a node's members, as a table.
   * @param {PageGroup} d
   * @param {HistoryRun[]} runs
   */
  function runTable(d, runs) {
    const u = Format.unit(d);
    PanelKit.note("The runs that made its " + u[1] + ", newest first.");
    PanelKit.table(
      ["finished (UTC)", "status", u[1], "run"],
      runs.map((r) => [
        PanelKit.minute(r.end_time),
        PanelKit.chip(r.status),
        span("wrap", r.count + (r.count > 1 ? ": " + r.first + " … " + r.last : ": " + r.first)),
        r.run_id ? span("mono clip", r.run_id, r.run_id) : "–",
      ]),
    );
  }

  /**
   * Names and values of one run, those that changed since `old` in bold.
   * @param {string} what "parameters" or "metrics"
   * @param {Record<string, unknown> | null} now
   * @param {Record<string, unknown> | null | undefined} old
   * @param {boolean} compare whether there is a run before to compare with
   */
  function facts(what, now, old, compare) {
    const values = now || {};
    const before = old || {};
    const keys = Object.keys(values).sort();
    if (!keys.length) return null;
    const line = el("div", "facts");
    line.appendChild(span("what", what + ": "));
    keys.forEach((k, j) => {
      const changed = compare && shown(before[k]) !== shown(values[k]);
      line.appendChild(
        span(changed ? "changed" : null, k + "=" + shown(values[k]), changed ? "was " + shown(before[k]) : null),
      );
      if (j < keys.length - 1) line.appendChild(document.createTextNode(", "));
    });
    return line;
  }

  /**
   * A ref's versions, newest first.
   * @param {PageGroup} d
   * @param {HistoryVersion[]} h
   */
  function versionList(d, h) {
    PanelKit.note("Versions of " + d.ref + ", newest first; what changed from the run before is in bold.");
    const list = el("ol", "history");
    h.forEach((r, i) => {
      const before = h[i + 1];
      const li = el("li");
      const head = el("div", "history-head");
      head.appendChild(PanelKit.chip(r.status));
      head.appendChild(span(null, " " + when(r.end_time) + " "));
      head.appendChild(span("mono", Format.short(r.version), r.version));
      if (r.current) head.appendChild(span("current", " current"));
      if (r.run_id) head.appendChild(span("mono run", " " + r.run_id, "run " + r.run_id));
      li.appendChild(head);
      const params = facts("parameters", r.parameters, before && before.parameters, !!before);
      if (params) li.appendChild(params);
      const metrics = facts("metrics", r.metrics, before && before.metrics, !!before);
      if (metrics) li.appendChild(metrics);
      if (r.error) li.appendChild(el("div", "error", r.error));
      list.appendChild(li);
    });
    PanelKit.add(list);
  }

  /** @param {PageGroup} d */
  function render(d) {
    PanelKit.section("History");
    const h = d.history;
    if (!h.length) {
      PanelKit.note("No runs recorded.");
      return;
    }
    if ("count" in h[0]) runTable(d, /** @type {HistoryRun[]} */ (h));
    else versionList(d, /** @type {HistoryVersion[]} */ (h));
  }

  return { render };
})();
