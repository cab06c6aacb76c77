// @ts-check
/* Making the page's elements. Every value from the data reaches the page through textContent
 * or an attribute, never as markup: these helpers are the only way the other modules build
 * elements, and none of them parses HTML. */
/* exported Dom */

const Dom = (() => {
  const SVGNS = "http://www.w3.org/2000/svg";

  /**
   * An element with a class and a text (any value, written as text).
   * @template {keyof HTMLElementTagNameMap} K
   * @param {K} tag
   * @param {string | null} [cls]
   * @param {unknown} [text]
   * @returns {HTMLElementTagNameMap[K]}
   */
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  /**
   * A `<span>` with a class, a text and a tooltip.
   * @param {string | null} cls
   * @param {unknown} [text]
   * @param {string | null} [title]
   */
  function span(cls, text, title) {
    const s = el("span", cls, text);
    if (title) s.title = title;
    return s;
  }

  /**
   * An SVG element with its attributes.
   * @param {string} tag
   * @param {Record<string, string>} attrs
   * @returns {SVGElement}
   */
  function svgEl(tag, attrs) {
    const e = /** @type {SVGElement} */ (document.createElementNS(SVGNS, tag));
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }

  /**
   * An element of the page's own markup (lineage_page.py writes them all).
   * @param {string} id
   * @returns {HTMLElement}
   */
  function byId(id) {
    const found = document.getElementById(id);
    if (!found) throw new Error("the lineage page has no element #" + id);
    return found;
  }

  /**
   * The element an event happened on, for `closest` look-ups.
   * @param {Event} ev
   * @returns {Element}
   */
  function target(ev) {
    return /** @type {Element} */ (ev.target);
  }

  /**
   * The distance from the top of `ancestor` to the top of `child`.
   * @param {HTMLElement} child
   * @param {HTMLElement} ancestor
   */
  function offsetWithin(child, ancestor) {
    let top = 0;
    /** @type {Element | null} */
    let e = child;
    while (e && e !== ancestor) {
      const box = /** @type {HTMLElement} */ (e);
      top += box.offsetTop;
      e = box.offsetParent;
    }
    return top;
  }

  /**
   * `s` as a CSS string, for attribute selectors.
   * @param {string} s
   */
  function cssEscape(s) {
    return window.CSS && CSS.escape ? CSS.escape(s) : String(s).replace(/["\\]/g, "\\$&");
  }

  return { el, span, svgEl, byId, target, offsetWithin, cssEscape };
})();
