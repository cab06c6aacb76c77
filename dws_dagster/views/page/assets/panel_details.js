// @ts-check
/* A node's details in the panel, top to bottom: what it is, the traced column (if any), its
 * version, status, step, code and data figures, its replay verdicts, its parameters and
 * metrics, its last run, its columns, what it reads and what reads it, its members, and its
 * history. */
/* global ColumnTrace, Data, Dom, Format, GraphIndex, NodeView, PanelHistory, PanelKit,
   PanelParts, PanelReplay, PanelTrace, State, Verdicts */
/* exported PanelDetails */

/**
 * @typedef {Object} SelectOptions
 * @property {boolean} [centre] bring the node to the middle of the window
 * @property {number} [scale] at this scale (else the current one)
 * @property {number} [part] the member to show in the node's list
 */

const PanelDetails = (() => {
  const G = Data.groups;
  const { el } = Dom;
  const { plural, unit, capital, when } = Format;

  /** @param {PageGroup} d its statuses, counted: "61 ok, 1 failed" */
  function statusSummary(d) {
    return Data.statuses
      .filter((s) => d.counts[s])
      .map((s) => d.counts[s].toLocaleString("en") + " " + s)
      .join(", ");
  }

  /**
   * The facts at the top: members, version, status, step, code, data.
   * @param {PageGroup} d
   * @param {boolean} same whether its last run made its one version
   * @returns {DefRow[]}
   */
  function factRows(d, same) {
    const det = d.details;
    const u = unit(d);
    /** @type {DefRow[]} */
    const rows = [];
    if (d.count > 1) {
      const range = /** @type {[string, string]} */ (d.range);
      rows.push([capital(u[1]), plural(d.count, u[0], u[1]) + " (" + range[0] + " … " + range[1] + ")"]);
      rows.push([d.focus ? "Focus " + u[0] : "Newest " + u[0], d.parts.key[det.member]]);
    }
    rows.push([d.count > 1 ? "Its version" : "Version", det.version || "(none)", "mono"]);
    rows.push(["Status", d.members > 1 ? statusSummary(d) : det.status]);
    rows.push(["Step", det.step]);
    rows.push(["Role", det.role]);
    rows.push(["Code version", Format.distinct(det.code_versions, det.code_versions_more)]);
    rows.push(["Git commit", Format.distinct(det.git_commits, det.git_commits_more), "mono"]);
    rows.push(["Format", det.format]);
    if (det.rows !== undefined) {
      const of = det.rows_of || 0;
      rows.push(["Rows", det.rows.toLocaleString("en") + (of > 1 ? " in " + plural(of, u[0], u[1]) : "")]);
    }
    if (!same) {
      rows.push(["Run", det.run_id, "mono"]);
      rows.push(["Finished", det.end_time ? when(det.end_time) : null]);
    }
    return rows;
  }

  /**
   * The last run: how it went, its parameters and metrics.
   * @param {PageGroup} d
   * @param {boolean} same
   */
  function lastRun(d, same) {
    const run = d.last_run;
    PanelKit.section("Last run");
    if (!run) {
      PanelKit.note("No run recorded (data from outside any step).");
      return;
    }
    const list = PanelKit.defList([
      ["Status", run.status],
      ["Step", run.step],
      ["Run id", run.run_id, "mono"],
      [capital(unit(d)[0]), d.partitioned ? run.partition : null],
      ["Version", run.version, "mono"],
      ["Code version", run.code_version],
      ["Started", when(run.start_time)],
      ["Finished", when(run.end_time)],
      ["Duration", Format.duration(run.duration_seconds)],
    ]);
    if (run.error) {
      list.appendChild(el("dt", null, "Error"));
      list.appendChild(el("dd", "error", run.error));
    }
    PanelKit.kvTable(same ? "Parameters" : "Parameters of the last run", run.parameters);
    PanelKit.kvTable(same ? "Metrics" : "Metrics of the last run", run.metrics, undefined, "none recorded");
  }

  /**
   * Its columns as links (each starts a trace), and column sources outside the graph.
   * @param {number} g
   * @param {PageActions} actions
   */
  function columns(g, actions) {
    const d = G[g];
    if (!d.columns.length && !d.external_columns.length) return;
    PanelKit.section("Columns (" + d.columns.length + ")");
    PanelKit.note("Click a column to see where it comes from and what it feeds.");
    const cols = el("div", "links col-list");
    const t = State.get().trace;
    d.columns.forEach((c) => {
      const role = ColumnTrace.role(t, g, c);
      const differs = Verdicts.differingColumns(g).has(c);
      const b = el(
        "button",
        "link col-link" + (role ? " " + role : "") + (differs ? " differs" : ""),
        differs ? "≠ " + c : c,
      );
      b.type = "button";
      b.dataset.col = c;
      if (differs) b.title = "Its content differs in the replay";
      b.addEventListener("click", () => actions.selectColumn(g, c));
      cols.appendChild(b);
    });
    PanelKit.add(cols);
    if (d.external_columns.length) {
      PanelKit.add(el("h4", null, "From outside this graph"));
      PanelKit.table(
        ["source", "column", "into", "how"],
        d.external_columns.map((x) => [x[0], x[1], x[2] === null ? "(rows)" : x[2], x[4] || x[3]]),
      );
    }
  }

  /**
   * What it reads and what reads it, as links.
   * @param {number} g
   * @param {PageActions} actions
   */
  function inputsAndOutputs(g, actions) {
    const d = G[g];
    const edges = Data.page.edges;
    const centre = (/** @type {number} */ to) => actions.select(to, { centre: true });
    PanelKit.section("Inputs and outputs");
    const ins = el("div", "links");
    const outs = el("div", "links");
    GraphIndex.inputsOf[g].forEach((i) => {
      const e = edges[i];
      const label = G[e[0]].name + (e[2] > 1 ? " ×" + e[2] : "") + (e[3] ? " (stale)" : "");
      ins.appendChild(PanelKit.groupLink(e[0], label, centre));
    });
    GraphIndex.outputsOf[g].forEach((i) => {
      const e = edges[i];
      outs.appendChild(PanelKit.groupLink(e[1], G[e[1]].name + (e[2] > 1 ? " ×" + e[2] : ""), centre));
    });
    PanelKit.add(el("h4", null, "Reads"));
    PanelKit.add(GraphIndex.inputsOf[g].length ? ins : el("p", "note", "nothing recorded"));
    PanelKit.add(el("h4", null, "Read by"));
    PanelKit.add(GraphIndex.outputsOf[g].length ? outs : el("p", "note", "nothing yet"));
    if (d.self_reads) {
      PanelKit.note(
        "Its " + unit(d)[1] + " also read each other (" + plural(d.self_reads, "input", "inputs") + ").",
      );
    }
  }

  /**
   * Node g's details, in the panel.
   * @param {number} g
   * @param {SelectOptions} opts
   * @param {PageActions} actions
   */
  function render(g, opts, actions) {
    const d = G[g];
    const det = d.details;
    const u = unit(d);
    PanelKit.open();
    PanelKit.add(el("h2", null, d.name));
    PanelKit.add(el("div", "sub", Format.subText(d)));
    if (d.focus) {
      PanelKit.note("The focus: the lineage of " + Data.page.focus.ref + " is what this page shows.");
    }
    const trace = State.get().trace;
    if (trace) PanelTrace.render(trace, actions);

    const run = d.last_run;
    // One version whose last run made it: its run, parameters and metrics are the last run's.
    const same = !!(d.count <= 1 && run && run.version === det.version && run.status === "ok");
    PanelKit.defList(factRows(d, same));
    if (d.members > 1) PanelKit.add(NodeView.statusBar(d.counts, d.members));
    if (Data.replay) PanelReplay.section(g, Data.replay);
    if (!same) {
      PanelKit.kvTable(d.count > 1 ? "Parameters (same for every " + u[0] + ")" : "Parameters", det.parameters);
      if (det.varying.length) PanelKit.note("Varies by " + u[0] + ": " + det.varying.join(", "));
      if (d.count <= 1 || det.metrics) PanelKit.kvTable("Metrics", det.metrics, undefined, "none recorded");
    }
    lastRun(d, same);
    columns(g, actions);
    inputsAndOutputs(g, actions);
    if (d.members > 1) PanelParts.render(g, opts.part);
    PanelHistory.render(d);
  }

  return { render };
})();
