// Pan (drag) and zoom (wheel, or the + / − keys) of an SVG drawing: `viewport` is the <g>
// whose transform moves, `svgEl` the element that takes the pointer. A drag that moved more
// than a few pixels swallows the click it ends with, so dragging over a node does not select it.

const MIN_K = 0.02;
const MAX_K = 3;
const DRAG_PX = 4;

export function panZoom(svgEl, viewport) {
  let t = { x: 0, y: 0, k: 1 };
  const apply = () => {
    viewport.setAttribute("transform", `translate(${t.x},${t.y}) scale(${t.k})`);
    svgEl.dataset.zoom = t.k.toFixed(3);
  };
  const size = () => ({ w: svgEl.clientWidth, h: svgEl.clientHeight });
  const zoomAt = (factor, sx, sy) => {
    const k = Math.min(MAX_K, Math.max(MIN_K, t.k * factor));
    t = { x: sx - ((sx - t.x) * k) / t.k, y: sy - ((sy - t.y) * k) / t.k, k };
    apply();
  };

  let drag = null;
  let swallowClick = false;
  svgEl.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    drag = { id: e.pointerId, x: e.clientX, y: e.clientY, tx: t.x, ty: t.y, moved: false };
  });
  svgEl.addEventListener("pointermove", (e) => {
    if (!drag || e.pointerId !== drag.id) return;
    const dx = e.clientX - drag.x;
    const dy = e.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < DRAG_PX) return;
    if (!drag.moved) {
      drag.moved = true;
      svgEl.setPointerCapture(e.pointerId);
      svgEl.classList.add("panning");
    }
    t = { ...t, x: drag.tx + dx, y: drag.ty + dy };
    apply();
  });
  const end = (e) => {
    if (!drag || e.pointerId !== drag.id) return;
    swallowClick = drag.moved;
    drag = null;
    svgEl.classList.remove("panning");
  };
  svgEl.addEventListener("pointerup", end);
  svgEl.addEventListener("pointercancel", end);
  svgEl.addEventListener(
    "click",
    (e) => {
      if (swallowClick) {
        e.stopPropagation();
        e.preventDefault();
      }
      swallowClick = false;
    },
    true,
  );
  svgEl.addEventListener(
    "wheel",
    (e) => {
      e.preventDefault();
      const r = svgEl.getBoundingClientRect();
      const dy = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY;
      zoomAt(Math.exp(-dy * 0.0015), e.clientX - r.left, e.clientY - r.top);
    },
    { passive: false },
  );

  return {
    get transform() {
      return { ...t };
    },
    /** Zooms by `factor` about the middle of the view. */
    zoom(factor) {
      const { w, h } = size();
      zoomAt(factor, w / 2, h / 2);
    },
    /** Shows the box { x, y, width, height } (drawing units) whole and centred, no larger than 1:1. */
    fit(box, pad = 16) {
      const { w, h } = size();
      if (!w || !h) return false;
      const k = Math.min(MAX_K, 1, Math.max(MIN_K, Math.min((w - 2 * pad) / box.width, (h - 2 * pad) / box.height)));
      t = { k, x: (w - box.width * k) / 2 - box.x * k, y: Math.max(pad, (h - box.height * k) / 2) - box.y * k };
      apply();
      return true;
    },
    /** Moves (at the current zoom, or at least `minK`) so that drawing point (x, y) is in the middle. */
    centre(x, y, minK = 0) {
      const { w, h } = size();
      const k = Math.max(t.k, minK);
      t = { k, x: w / 2 - x * k, y: h / 2 - y * k };
      apply();
    },
    /** Moves so that drawing point (x, y) is where drawing point (x0, y0) was on screen. */
    keep(x0, y0, x, y) {
      t = { ...t, x: t.x + (x0 - x) * t.k, y: t.y + (y0 - y) * t.k };
      apply();
    },
  };
}
