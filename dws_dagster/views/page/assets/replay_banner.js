// @ts-check
/* The banner under the header on the page of a replayed snapshot: the replay's result in one
 * sentence, its other verdicts counted, the refs it judged beyond this graph, and a button to
 * the whole replay. */
/* global Dom, Format, Verdicts */
/* exported ReplayBanner */

const ReplayBanner = (() => {
  const { el } = Dom;

  /** @param {ReplaySummary} R */
  function headline(R) {
    const n = R.counts.reproduced || 0;
    if (R.refs === 0) return "it judged no refs";
    if (n === R.refs) {
      return (R.refs === 1 ? "its one ref" : "all " + R.refs.toLocaleString("en") + " refs") + " reproduced exactly";
    }
    return n.toLocaleString("en") + " of " + Format.plural(R.refs, "ref", "refs") + " reproduced exactly";
  }

  /**
   * @param {ReplaySummary} R
   * @param {() => void} onDetails opens the whole replay
   */
  function show(R, onDetails) {
    const box = el("div", "replay-banner " + (R.reproduced ? "good" : "bad"));
    box.id = "replay";
    box.setAttribute("role", "status");
    const head = el("span", "headline");
    head.appendChild(el("strong", null, (R.reproduced ? "✓ " : "≠ ") + "Replay of snapshot " + R.snapshot_name));
    const on = Format.when(R.replayed_at).replace(/:\d\d( UTC)?$/, "$1");
    head.appendChild(document.createTextNode(" on " + on + ": " + headline(R)));
    head.title = "Into " + R.into + (R.in_place ? " (in place)" : "");
    box.appendChild(head);
    R.verdicts.forEach((v) => {
      if (v !== "reproduced" && R.counts[v]) box.appendChild(Verdicts.pill(v, R.counts[v]));
    });
    if (R.outside_count) {
      box.appendChild(
        el("span", "outside", Format.plural(R.outside_count, "more ref", "more refs") + " outside this graph"),
      );
    }
    const more = el("button", "replay-more", "Details");
    more.type = "button";
    more.title = "The whole replay: every ref it did not reproduce, and why";
    more.setAttribute("aria-label", "Replay details");
    more.addEventListener("click", onDetails);
    box.appendChild(more);
    const top = /** @type {HTMLElement} */ (document.querySelector(".top"));
    top.after(box);
  }

  return { show };
})();
