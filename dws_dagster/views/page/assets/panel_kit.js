// @ts-check
/* The details panel's parts: the panel itself (opened empty, with its close button), section
 * titles, definition lists, tables, name/value tables, status chips, short versions, and
 * links to nodes. */
/* global Data, Dom, Format */
/* exported PanelKit */

/**
 * A row of a definition list: its term, its value (text or an element; the row is left out
 * when it is null, undefined or ""), and the value's class.
 * @typedef {[string | null, unknown, (string | null)?]} DefRow
 */

/** @typedef {string | Node} Cell a table cell: text or an element */

const PanelKit = (() => {
  const { el, span } = Dom;
  const panel = Dom.byId("panel");

  /** The details panel, emptied and shown, with its close button. */
  function open() {
    panel.hidden = false;
    panel.textContent = "";
    panel.scrollTop = 0;
    const close = el("button", "close", "×");
    close.type = "button";
    close.title = "Close the details";
    close.setAttribute("aria-label", "Close the details");
    close.addEventListener("click", () => {
      panel.hidden = true;
    });
    panel.appendChild(close);
  }

  /**
   * Appends `child` to the panel.
   * @template {Node} T
   * @param {T} child
   * @returns {T}
   */
  function add(child) {
    return panel.appendChild(child);
  }

  /** @param {string} title a section's heading */
  function section(title) {
    add(el("h3", null, title));
  }

  /**
   * @param {string} text a note in the panel
   */
  function note(text) {
    add(el("p", "note", text));
  }

  /**
   * A definition list of the rows that have a value.
   * @param {DefRow[]} rows
   * @param {HTMLElement} [into]
   */
  function defList(rows, into) {
    const list = el("dl");
    rows.forEach((r) => {
      if (r[1] === undefined || r[1] === null || r[1] === "") return;
      list.appendChild(el("dt", null, r[0]));
      const dd = el("dd", r[2] || null);
      if (r[1] instanceof Node) dd.appendChild(r[1]);
      else dd.textContent = String(r[1]);
      list.appendChild(dd);
    });
    (into || panel).appendChild(list);
    return list;
  }

  /**
   * A table with a head row.
   * @param {string[]} head
   * @param {Cell[][]} rows
   * @param {HTMLElement} [into]
   * @param {string} [cls]
   */
  function table(head, rows, into, cls) {
    const wrap = el("div", "table-wrap");
    const tbl = el("table", cls || null);
    wrap.appendChild(tbl);
    const tr = el("tr");
    head.forEach((h) => tr.appendChild(el("th", null, h)));
    const thead = el("thead");
    thead.appendChild(tr);
    tbl.appendChild(thead);
    const body = el("tbody");
    rows.forEach((r) => {
      const row = el("tr");
      r.forEach((cell) => {
        if (cell instanceof Node) {
          const td = el("td");
          td.appendChild(cell);
          row.appendChild(td);
        } else {
          row.appendChild(el("td", null, cell));
        }
      });
      body.appendChild(row);
    });
    tbl.appendChild(body);
    (into || panel).appendChild(wrap);
    return tbl;
  }

  /**
   * A time in a table: to the minute (the whole time in its tooltip).
   * @param {string | null | undefined} t
   * @returns {Cell}
   */
  function minute(t) {
    return t ? span(null, Format.when(t).replace(/:\d\d( UTC)?$/, ""), Format.when(t)) : "–";
  }

  /**
   * Names and values (parameters, metrics) as a table, sorted by name.
   * @param {string} title
   * @param {Record<string, unknown> | null | undefined} values
   * @param {HTMLElement} [into]
   * @param {string} [empty] what to say when there are none
   */
  function kvTable(title, values, into, empty) {
    const box = into || panel;
    const keys = values ? Object.keys(values) : [];
    box.appendChild(el("h4", null, title));
    if (!values || !keys.length) {
      box.appendChild(el("p", "note", empty || "none"));
      return;
    }
    table(
      ["name", "value"],
      keys.sort().map((k) => [k, span("mono", Format.shown(values[k]))]),
      box,
      "kv",
    );
  }

  /** @param {string} status a status as a coloured chip */
  function chip(status) {
    return el("span", "chip " + (Data.statuses.indexOf(status) >= 0 ? status : "other"), status);
  }

  /**
   * A version as the page shows versions: short, whole in its tooltip.
   * @param {string | null | undefined} v
   */
  function versionSpan(v) {
    return v ? span("mono", Format.short(v), v) : span(null, "–");
  }

  /**
   * A link to node g.
   * @param {number} g
   * @param {string | null} text its label (the node's name by default)
   * @param {(g: number) => void} onClick
   */
  function groupLink(g, text, onClick) {
    const G = Data.groups;
    const b = el("button", "link", text || G[g].name);
    b.type = "button";
    b.title = G[g].ref || G[g].name;
    b.addEventListener("click", () => onClick(g));
    return b;
  }

  return { panel, open, add, section, note, defList, table, minute, kvTable, chip, versionSpan, groupLink };
})();
