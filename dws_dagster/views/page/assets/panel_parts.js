// @ts-check
/* The panel's list of a node's members (partitions, files, versions): folded until opened,
 * the first PARTS_SHOWN rows then "show all"; each with its status, version, replay verdict,
 * when and which run. A search hit opens it on its row. */
/* global Data, Dom, Format, PanelKit, Verdicts */
/* exported PanelParts */

const PanelParts = (() => {
  const G = Data.groups;
  const STATUSES = Data.statuses;
  const { el, span } = Dom;
  const PARTS_SHOWN = 2000; // partition rows listed before "show all"

  /**
   * The key of the verdicts' signs, above the table.
   * @param {ReplaySummary} replay
   */
  function verdictKey(replay) {
    const key = el("p", "note verdict-key", "Replay: ");
    replay.verdicts.forEach((v, i) => {
      const item = span("key-item");
      item.appendChild(span("verdict mini " + Verdicts.cssClass(v), Verdicts.SIGN[v]));
      item.appendChild(document.createTextNode(" " + v));
      key.appendChild(item);
      if (i < replay.verdicts.length - 1) key.appendChild(document.createTextNode(" "));
    });
    return key;
  }

  /**
   * One member's row.
   * @param {number} g
   * @param {number} i
   * @returns {Cell[]}
   */
  function row(g, i) {
    const d = G[g];
    const p = d.parts;
    const status = STATUSES[p.status.charCodeAt(i) - 48];
    const key = p.ref && p.ref[i] !== p.key[i] ? p.key[i] + " (" + p.ref[i] + ")" : p.key[i];
    const run = p.run[i] >= 0 ? Data.page.runs[p.run[i]] : null;
    const dot = span("dot " + status, "", status);
    dot.setAttribute("role", "img");
    dot.setAttribute("aria-label", status);
    const name = span(null, key);
    name.insertBefore(dot, name.firstChild);
    const version = p.version[i];
    /** @type {Cell[]} */
    const cells = [name, span("mono", version ? version.slice(0, 8) : "–", version)];
    if (d.replay) {
      const e = Verdicts.ofMember(g, i);
      // The sign alone (the key above the table names each), so the row still fits.
      if (e) {
        const note = Verdicts.note(e);
        const words = e.verdict + (note ? ": " + note : "");
        const pill = span("verdict mini " + Verdicts.cssClass(e.verdict), Verdicts.sign(e.verdict), words);
        pill.setAttribute("aria-label", e.verdict);
        cells.push(pill);
      } else {
        cells.push("–");
      }
    }
    return cells.concat([PanelKit.minute(p.end[i]), run ? span("mono clip", run, run) : "–"]);
  }

  /**
   * The section, its list folded unless `part` (a member to show) is given.
   * @param {number} g
   * @param {number} [part]
   */
  function render(g, part) {
    const d = G[g];
    const u = Format.unit(d);
    const p = d.parts;
    PanelKit.section(Format.capital(u[1]));
    const box = el("details", "parts-list");
    const summary = el(
      "summary",
      null,
      "List " + Format.plural(d.members, u[0], u[1]) + (d.members !== d.count ? " (" + d.count + " keys)" : ""),
    );
    box.appendChild(summary);
    PanelKit.add(box);
    if (d.replay && Data.replay) box.appendChild(verdictKey(Data.replay));
    let filled = false;

    /** @param {boolean} all every member, or the first PARTS_SHOWN */
    function fill(all) {
      let old = box.querySelector("table, .more-parts");
      while (old) {
        old.remove();
        old = box.querySelector("table, .more-parts");
      }
      const n = all ? p.key.length : Math.min(p.key.length, PARTS_SHOWN);
      /** @type {Cell[][]} */
      const rows = [];
      for (let i = 0; i < n; i++) rows.push(row(g, i));
      const head = [u[0], "version"].concat(d.replay ? ["replay"] : [], ["finished (UTC)", "run"]);
      const tbl = PanelKit.table(head, rows, box, "parts");
      const trs = tbl.tBodies[0].rows;
      for (let j = 0; j < n; j++) {
        const st = STATUSES[p.status.charCodeAt(j) - 48];
        if (st !== "ok" && st !== "source") trs[j].classList.add("st-" + st);
      }
      if (d.focus && trs[Data.page.focus.member]) trs[Data.page.focus.member].classList.add("focus");
      if (part !== undefined && trs[part]) {
        trs[part].classList.add("hit");
        trs[part].scrollIntoView({ block: "center" });
      }
      if (n < p.key.length) {
        const more = el("button", "link more-parts", "Show all " + p.key.length.toLocaleString("en"));
        more.type = "button";
        more.addEventListener("click", () => fill(true));
        box.appendChild(more);
      }
    }

    box.addEventListener("toggle", () => {
      if (box.open && !filled) {
        filled = true;
        fill(part !== undefined && part >= PARTS_SHOWN);
      }
    });
    if (part !== undefined) box.open = true;
  }

  return { render };
})();
