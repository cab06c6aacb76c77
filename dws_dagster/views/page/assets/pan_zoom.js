// @ts-check
/* The view of the graph: its scale and offset (kept in State) as the canvas's transform; the
 * opening view, fitting, centring a node, showing a box, zooming about a point; dragging,
 * the wheel and the arrow keys. */
/* global Data, Dom, Layout, State */
/* exported PanZoom */

const PanZoom = (() => {
  const viewport = Dom.byId("viewport");
  const canvas = Dom.byId("canvas");
  /** Auto zoom never goes below this: text stays legible. */
  const MIN_READABLE = 0.7;

  /**
   * The view moved to (scale, tx, ty) and shown.
   * @param {number} scale
   * @param {number} tx
   * @param {number} ty
   */
  function show(scale, tx, ty) {
    State.setView(scale, tx, ty);
    const s = State.get();
    canvas.style.transform = "translate(" + s.tx + "px," + s.ty + "px) scale(" + s.scale + ")";
  }

  function viewSize() {
    return { w: viewport.clientWidth, h: viewport.clientHeight };
  }

  /**
   * Node g in the middle of the window, at `scale` (by default the current one).
   * @param {number} g
   * @param {number} [scale]
   */
  function centreOn(g, scale = State.get().scale) {
    const v = viewSize();
    const p = State.get().pos[g];
    show(scale, v.w / 2 - p.x * scale, v.h / 2 - p.y * scale);
  }

  /**
   * Show the box (graph coordinates) whole if it fits at a readable scale, else centre
   * `anchor`'s node at that scale.
   * @param {{ x: number, y: number, w: number, h: number }} box
   * @param {number} anchor
   * @param {number} minScale
   */
  function showBox(box, anchor, minScale) {
    const v = viewSize();
    const pad = 40;
    const fit = Math.min((v.w - 2 * pad) / Math.max(1, box.w), (v.h - 2 * pad) / Math.max(1, box.h), 1);
    if (fit >= minScale) {
      show(fit, v.w / 2 - (box.x + box.w / 2) * fit, v.h / 2 - (box.y + box.h / 2) * fit);
    } else {
      centreOn(anchor, Math.max(minScale, Math.min(State.get().scale, 1)));
    }
  }

  /**
   * The box around some nodes, in graph coordinates.
   * @param {Iterable<number>} groups
   */
  function boxOf(groups) {
    const pos = State.get().pos;
    let x0 = Infinity;
    let y0 = Infinity;
    let x1 = -Infinity;
    let y1 = -Infinity;
    for (const g of groups) {
      const p = pos[g];
      x0 = Math.min(x0, p.x - p.w / 2);
      y0 = Math.min(y0, p.y - p.h / 2);
      x1 = Math.max(x1, p.x + p.w / 2);
      y1 = Math.max(y1, p.y + p.h / 2);
    }
    return { x: x0, y: y0, w: x1 - x0, h: y1 - y0 };
  }

  /** The whole graph, at most at full size. */
  function fitAll() {
    const v = viewSize();
    const pad = 20;
    const { width, height } = State.get();
    const scale = Math.min(1, (v.w - 2 * pad) / width, (v.h - 2 * pad) / height);
    show(scale, (v.w - width * scale) / 2, (v.h - height * scale) / 2);
  }

  /**
   * On open: the whole graph if it fits at a readable scale; else the focus at full size,
   * the view slid (focus still in view) so as little of it as possible lies beyond the
   * graph's edges.
   */
  function openingView() {
    const v = viewSize();
    const pad = 20;
    const { width, height } = State.get();
    const fit = Math.min(1, (v.w - 2 * pad) / width, (v.h - 2 * pad) / height);
    if (fit >= 0.8) {
      show(fit, (v.w - width * fit) / 2, (v.h - height * fit) / 2);
      return;
    }
    centreOn(Data.focus, 1);
    const { tx, ty, pos } = State.get();
    const p = pos[Data.focus];
    show(
      1,
      slide(tx, v.w, width, p.x - p.w / 2, p.x + p.w / 2),
      slide(ty, v.h, height, p.y - p.h / 2, p.y + p.h / 2),
    );
  }

  /**
   * An offset along one axis moved to show less empty space past the graph's ends, while
   * keeping [lo, hi] (the focus, graph units at scale 1) inside the window with a margin.
   * @param {number} t
   * @param {number} size
   * @param {number} total
   * @param {number} lo
   * @param {number} hi
   */
  function slide(t, size, total, lo, hi) {
    const margin = 24;
    if (total <= size) return (size - total) / 2;
    let best = Math.min(0, Math.max(size - total, t)); // no empty space at either end
    // An end of the graph just past the window's edge is brought in (no half-cut nodes).
    const over = best + total - size;
    if (over > 0 && over < size * 0.3) best -= over;
    else if (best < 0 && -best < size * 0.3) best = 0;
    const low = margin - lo;
    const high = size - margin - hi; // the focus kept in view
    return Math.max(low, Math.min(high, best));
  }

  /**
   * Zoom by `factor` about a point of the window (its middle by default).
   * @param {number} factor
   * @param {{ x: number, y: number }} [at]
   */
  function zoom(factor, at) {
    const v = viewSize();
    const { x, y } = at || { x: v.w / 2, y: v.h / 2 };
    const s = State.get();
    const next = Math.min(2.5, Math.max(0.05, s.scale * factor));
    show(next, x - ((x - s.tx) * next) / s.scale, y - ((y - s.ty) * next) / s.scale);
  }

  /**
   * The view moved by (dx, dy) pixels.
   * @param {number} dx
   * @param {number} dy
   */
  function panBy(dx, dy) {
    const s = State.get();
    show(s.scale, s.tx + dx, s.ty + dy);
  }

  /**
   * Lay out again (node heights changed) keeping node `g` where it is on screen.
   * @param {number} g
   */
  function relayout(g) {
    const { pos, scale, tx, ty } = State.get();
    const before = pos[g];
    const sx = tx + before.x * scale;
    const sy = ty + (before.y - before.h / 2) * scale;
    Layout.run();
    const after = State.get().pos[g];
    show(scale, sx - after.x * scale, sy - (after.y - after.h / 2) * scale);
  }

  /** Dragging the background, the wheel (with Ctrl or ⌘: zoom) and the keys move the view. */
  function install() {
    /** @type {{ x: number, y: number, tx: number, ty: number } | null} */
    let drag = null;
    viewport.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0 || Dom.target(ev).closest(".node")) return;
      const s = State.get();
      drag = { x: ev.clientX, y: ev.clientY, tx: s.tx, ty: s.ty };
      viewport.setPointerCapture(ev.pointerId);
      viewport.classList.add("panning");
    });
    viewport.addEventListener("pointermove", (ev) => {
      if (!drag) return;
      show(State.get().scale, drag.tx + ev.clientX - drag.x, drag.ty + ev.clientY - drag.y);
    });
    const endDrag = () => {
      drag = null;
      viewport.classList.remove("panning");
    };
    viewport.addEventListener("pointerup", endDrag);
    viewport.addEventListener("pointercancel", endDrag);
    viewport.addEventListener(
      "wheel",
      (ev) => {
        ev.preventDefault();
        const r = viewport.getBoundingClientRect();
        if (ev.ctrlKey || ev.metaKey) {
          zoom(Math.exp(-ev.deltaY * 0.0025), { x: ev.clientX - r.left, y: ev.clientY - r.top });
        } else {
          panBy(-ev.deltaX, -ev.deltaY);
        }
      },
      { passive: false },
    );
    const step = 60;
    /** @type {Map<string, [number, number]>} what each arrow key moves the view by */
    const moves = new Map([
      ["ArrowLeft", [step, 0]],
      ["ArrowRight", [-step, 0]],
      ["ArrowUp", [0, step]],
      ["ArrowDown", [0, -step]],
    ]);
    viewport.addEventListener("keydown", (ev) => {
      if (ev.target !== viewport) return;
      if (ev.key === "+" || ev.key === "=") return zoom(1.25);
      if (ev.key === "-") return zoom(0.8);
      const move = moves.get(ev.key);
      if (!move) return;
      ev.preventDefault();
      panBy(move[0], move[1]);
    });
  }

  return { MIN_READABLE, centreOn, showBox, boxOf, fitAll, openingView, zoom, relayout, install };
})();
