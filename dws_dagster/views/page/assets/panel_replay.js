// @ts-check
/* The replay in the details panel: a node's verdicts (one in full, or their counts, the
 * member the panel is about and every member that did not reproduce), and the whole replay
 * (the banner's "Details"): when, where, its counts, every ref it did not reproduce and the
 * refs it judged that this page does not draw. */
/* global Data, Dom, Format, PanelKit, Verdicts */
/* exported PanelReplay */

/** @typedef {[string | Node, ShownVerdict]} VerdictItem what was judged, and its verdict */

const PanelReplay = (() => {
  const G = Data.groups;
  const { el, span } = Dom;
  const { plural, unit, capital } = Format;
  const { versionSpan } = PanelKit;
  const VERDICT_ROWS = 200; // verdicts listed in a panel table before "and N more"

  /**
   * The differing columns as chips.
   * @param {string[]} columns
   */
  function columnChips(columns) {
    const box = el("span", "links");
    columns.forEach((c) => box.appendChild(span("link diff-col mono", "≠ " + c, c)));
    return box;
  }

  /**
   * One verdict in full: what was recorded beside what the replay wrote, and why.
   * @param {ShownVerdict} e
   * @param {HTMLElement} into
   * @param {[string, string] | null} [key] the member it is of, named
   */
  function verdictRows(e, into, key) {
    const head = el("div", "verdict-head");
    head.appendChild(Verdicts.pill(e.verdict));
    into.appendChild(head);
    const made = e.reproduced
      ? versionSpan(e.reproduced)
      : span("note-inline", e.unlisted ? "not listed on this page" : "nothing written");
    if (e.reproduced && e.reproduced === e.recorded) made.appendChild(document.createTextNode(" (the same)"));
    /** @type {Node | string | null} */
    let cols = null;
    if (e.columns && e.columns.length) cols = columnChips(e.columns);
    else if (e.columns) cols = "none";
    else if (e.verdict === "differs" || e.verdict === "non-deterministic") cols = "not compared";
    const failed = e.verdict === "failed";
    return PanelKit.defList(
      [
        [key ? key[0] : null, key ? key[1] : null],
        ["Recorded", versionSpan(e.recorded)],
        ["Reproduced", made],
        ["Replay step", e.step],
        [failed ? "Error" : "Detail", e.detail, failed ? "error" : null],
        ["Differing columns", cols],
      ],
      into,
    );
  }

  /**
   * Verdicts as a list: what, its verdict, the recorded version beside the reproduced one,
   * then why (a list, not a table: the panel is narrow and a detail can be a long error).
   * @param {VerdictItem[]} items
   * @param {HTMLElement} [into]
   */
  function verdictList(items, into) {
    const list = el("ul", "verdict-list");
    items.forEach((item) => {
      const e = item[1];
      const li = el("li");
      const head = el("div", "vi-head");
      head.appendChild(item[0] instanceof Node ? item[0] : span("vi-what", item[0]));
      head.appendChild(Verdicts.pill(e.verdict));
      li.appendChild(head);
      const facts = el("div", "vi-facts");
      facts.appendChild(span(null, "recorded "));
      facts.appendChild(versionSpan(e.recorded));
      facts.appendChild(span(null, " · reproduced "));
      facts.appendChild(
        e.reproduced
          ? versionSpan(e.reproduced)
          : span(null, e.unlisted ? "not listed on this page" : "nothing written"),
      );
      li.appendChild(facts);
      if (e.detail) li.appendChild(el("div", "vi-detail" + (e.verdict === "failed" ? " error" : ""), e.detail));
      if (e.columns && e.columns.length) {
        const cols = el("div", "vi-cols");
        cols.appendChild(span("what", "differing columns: "));
        cols.appendChild(columnChips(e.columns));
        li.appendChild(cols);
      }
      list.appendChild(li);
    });
    (into || PanelKit.panel).appendChild(list);
    return list;
  }

  /**
   * Pills of the verdicts' counts.
   * @param {ReplaySummary} replay
   * @param {Record<string, number>} counts
   */
  function pills(replay, counts) {
    const box = el("div", "verdicts");
    replay.verdicts.forEach((v) => {
      if (counts[v]) box.appendChild(Verdicts.pill(v, counts[v]));
    });
    return box;
  }

  /**
   * The node's verdicts in its details: one in full, or their counts, the version the panel
   * is about in full, and every version that did not reproduce.
   * @param {number} g
   * @param {ReplaySummary} replay
   */
  function section(g, replay) {
    const d = G[g];
    const r = d.replay;
    const u = unit(d);
    const box = el("div", "replay-box");
    box.appendChild(el("h3", null, "Replay of snapshot " + replay.snapshot_name));
    PanelKit.add(box);
    if (!r) {
      const source = d.kind === "files" || d.kind === "source" || d.status === "source";
      box.appendChild(
        el("p", "note", "The replay judged none of its " + u[1] + (source ? " (source data is not replayed)." : ".")),
      );
      return;
    }
    if (r.judged === 1) {
      const only = /** @type {ShownVerdict} */ (Verdicts.ofMember(g, r.entries[0].member));
      const member = /** @type {number} */ (only.member);
      verdictRows(only, box, d.members > 1 ? [capital(u[0]), d.parts.key[member]] : null);
      return;
    }
    box.appendChild(pills(replay, r.counts));
    if (r.judged < d.members) {
      box.appendChild(
        el("p", "note", plural(r.judged, u[0], u[1]) + " of " + d.members.toLocaleString("en") + " replayed."),
      );
    }
    const main = Verdicts.ofMember(g, d.details.member);
    if (main) {
      box.appendChild(
        el("h4", null, (d.focus ? "Focus " : "Newest ") + u[0] + ": " + d.parts.key[d.details.member]),
      );
      verdictRows(main, box);
    }
    // Every other version that did not reproduce (the one above is not listed twice).
    /** @type {ShownVerdict[]} */
    const bad = [];
    for (let i = 0; i < d.parts.key.length; i++) {
      const e = Verdicts.ofMember(g, i);
      if (e && e.verdict !== "reproduced" && !(main && i === main.member)) bad.push(e);
    }
    if (!bad.length) return;
    const others = main && main.verdict !== "reproduced" ? "Other " + u[1] + " not" : "Not";
    box.appendChild(el("h4", null, others + " reproduced (" + bad.length.toLocaleString("en") + ")"));
    verdictList(
      bad.slice(0, VERDICT_ROWS).map((e) => [d.parts.key[/** @type {number} */ (e.member)], e]),
      box,
    );
    if (bad.length > VERDICT_ROWS) {
      box.appendChild(
        el(
          "p",
          "note",
          "and " + (bad.length - VERDICT_ROWS).toLocaleString("en") + " more: the " + u[1] +
            " list below has each one's verdict.",
        ),
      );
    }
  }

  /**
   * The replay as a whole, in the panel.
   * @param {ReplaySummary} R
   * @param {PageActions} actions
   */
  function render(R, actions) {
    PanelKit.open();
    PanelKit.add(el("h2", null, "Replay of snapshot " + R.snapshot_name));
    PanelKit.add(el("div", "sub", "The newest replay of the snapshot this page shows."));
    const result = R.reproduced
      ? "every ref reproduced exactly"
      : (R.counts.reproduced || 0).toLocaleString("en") + " of " + plural(R.refs, "ref", "refs") +
        " reproduced exactly";
    PanelKit.defList([
      ["Snapshot", R.snapshot, "mono"],
      ["Tags", R.tags.length ? R.tags.join(", ") : null],
      ["Replayed", Format.when(R.replayed_at)],
      ["Into", R.into, "mono"],
      ["In place", R.in_place ? "yes: it wrote into the workspace itself" : "no: into a scratch workspace"],
      ["Result", result],
    ]);
    PanelKit.add(pills(R, R.counts));
    /** @type {VerdictItem[]} */
    const bad = [];
    const centre = (/** @type {number} */ g) => actions.select(g, { centre: true });
    G.forEach((d, g) => {
      if (!d.replay) return;
      for (let i = 0; i < d.parts.key.length; i++) {
        const e = Verdicts.ofMember(g, i);
        if (!e || e.verdict === "reproduced") continue;
        const name = d.members > 1 ? d.name + " · " + d.parts.key[i] : d.name;
        bad.push([PanelKit.groupLink(g, name, centre), e]);
      }
    });
    R.outside.forEach((e) => {
      if (e.verdict !== "reproduced") bad.push([e.ref + " (outside this graph)", e]);
    });
    PanelKit.section("Not reproduced (" + bad.length.toLocaleString("en") + ")");
    if (!bad.length) PanelKit.note("Every ref the replay judged reproduced exactly.");
    else verdictList(bad.slice(0, VERDICT_ROWS));
    if (bad.length > VERDICT_ROWS) {
      PanelKit.note(
        "and " + (bad.length - VERDICT_ROWS).toLocaleString("en") + " more: each node's details list its own.",
      );
    }
    if (R.outside_count) {
      PanelKit.section("Outside this graph (" + R.outside_count.toLocaleString("en") + ")");
      PanelKit.note(
        "Refs the replay judged that this page does not draw: outside the lineage of " +
          Data.page.focus.ref + ", or drawn at another version than the one the snapshot recorded.",
      );
      verdictList(R.outside.map((e) => [e.ref + (e.in_graph ? " (another version is drawn)" : ""), e]));
      if (R.outside_count > R.outside.length) {
        PanelKit.note(
          "and " + (R.outside_count - R.outside.length).toLocaleString("en") +
            " more (dws-dagster replay --format json lists them all).",
        );
      }
    }
  }

  return { section, render };
})();
