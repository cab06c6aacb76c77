// @ts-check
/* Values as the page writes them: short versions, counts with their noun, times to the second,
 * durations, and what a node's members are called. Text only, no elements. */
/* exported Format */

const Format = (() => {
  /**
   * A version, short (the first 12 characters).
   * @param {string | null | undefined} v
   */
  function short(v) {
    return v ? String(v).slice(0, 12) : "–";
  }

  /**
   * `n` with its noun: "1 partition", "62 partitions".
   * @param {number} n
   * @param {string} one
   * @param {string} many
   */
  function plural(n, one, many) {
    return n.toLocaleString("en") + " " + (n === 1 ? one : many);
  }

  /**
   * A parameter or metric value: strings as they are, the rest as JSON.
   * @param {unknown} v
   */
  function shown(v) {
    if (v === null || v === undefined) return "–";
    return typeof v === "string" ? v : JSON.stringify(v);
  }

  /**
   * An ISO time, to the second, UTC spelled out.
   * @param {string | null | undefined} t
   */
  function when(t) {
    if (!t) return "–";
    return String(t).replace("T", " ").replace(/\.\d+/, "").replace(/\+00:00$/, " UTC");
  }

  /**
   * Seconds as "3.5 s" or "1 h 2 min 3 s".
   * @param {number | null | undefined} s
   */
  function duration(s) {
    if (s === null || s === undefined) return "–";
    if (s < 60) return s.toFixed(1) + " s";
    const whole = Math.round(s);
    const h = Math.floor(whole / 3600);
    const m = Math.floor((whole % 3600) / 60);
    return (h ? h + " h " : "") + m + " min " + (whole % 60) + " s";
  }

  /**
   * What a node's members are called, one and many.
   * @param {PageGroup} d
   * @returns {[string, string]}
   */
  function unit(d) {
    if (d.kind === "files") return ["file", "files"];
    return d.partitioned ? ["partition", "partitions"] : ["version", "versions"];
  }

  /**
   * `s` with a capital first letter.
   * @param {string} s
   */
  function capital(s) {
    return s.charAt(0).toUpperCase() + s.slice(1);
  }

  /**
   * The line under a node's name: what kind of node it is.
   * @param {PageGroup} d
   */
  function subText(d) {
    if (d.kind === "asset") return d.ref || d.name;
    if (d.kind === "step") return "step " + d.step;
    if (d.kind === "files") return (d.role || "source data") + " files";
    if (d.kind === "source") return (d.role || "source") + " · " + d.ref;
    if (d.role) return d.role;
    return d.details.status === "source" ? "source data" : "no step recorded";
  }

  /**
   * Distinct values with their counts ("1 (3), 2 (1) and 4 more"); the value alone when
   * there is only one.
   * @param {Record<string, number> | undefined} values
   * @param {number | undefined} more
   */
  function distinct(values, more) {
    if (!values) return null;
    const keys = Object.keys(values);
    if (keys.length === 1 && !more) return keys[0];
    return (
      keys.map((k) => k + " (" + values[k] + ")").join(", ") + (more ? " and " + more + " more" : "")
    );
  }

  return { short, plural, shown, when, duration, unit, capital, subText, distinct };
})();
