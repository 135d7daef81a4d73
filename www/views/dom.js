// A tiny DOM builder for the views: h("div", { class: "x", text: "…" }, [children]).
export function h(tag, attrs = {}, children = []) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") e.textContent = v;
    else if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  e.append(...[].concat(children).filter((c) => c !== null && c !== undefined));
  return e;
}

export function stat(label, value, cls = "") {
  return h("div", { class: `stat ${cls}` }, [h("span", { class: "stat-value", text: String(value) }), h("span", { class: "stat-label", text: label })]);
}

/** The width inside `root`'s padding (what a chart drawn in it may use). */
export function contentWidth(root, min = 320) {
  const cs = getComputedStyle(root);
  return Math.max(min, Math.floor(root.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight)) - 2);
}
