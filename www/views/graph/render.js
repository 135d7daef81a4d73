// Draws the laid-out graph (views/graph/layout.js) into an SVG group: expanded scopes as
// labelled frames, edges as arrows (an aggregated one carries its count, a fan-out one is a
// stub at each end), ops as boxes coloured by their IPU, stage or phase, collapsed scopes as
// stacked boxes with the share of each colour along their foot. Hit-testing uses the data
// attributes: `data-index` (op), `data-group` (scope), `data-toggle` (expand or collapse).
import { svg, clear, colour, tip } from "../../charts/svg.js";
import { keyShares } from "./model.js";

const CHAR_W = 7; // px per character of the 11.5 px bold labels, about (wide ones: _, m, w)
const KEY_NAMES = { ipu: "IPU", stage: "stage", phase: "phase" };

/** `text` cut to fit `width` px, with an ellipsis. */
export function fit(text, width) {
  const n = Math.max(3, Math.floor(width / CHAR_W));
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

/** "IPU 0", "IPUs 0–3", "no IPU": the values of `shares` for placement `key`. */
export function placementText(shares, key) {
  const vals = shares.map((s) => s.value).filter((v) => v !== null);
  if (!vals.length) return `no ${KEY_NAMES[key]}`;
  const lo = Math.min(...vals);
  const hi = Math.max(...vals);
  const name = KEY_NAMES[key];
  return lo === hi ? `${name} ${lo}` : `${name === "IPU" ? "IPUs" : `${name}s`} ${lo}–${hi}`;
}

/**
 * A scope's name inside the expanded scope drawn around it (`parent`, an item's parent id):
 * its path below that scope, a ModuleList item with its list's name (`layer.3`).
 */
export function shortName(id, parent) {
  const around = parent ? parent.slice(2) : "";
  const rel = around && id.startsWith(`${around}.`) ? id.slice(around.length + 1) : id;
  if (!/^\d+$/.test(rel)) return rel;
  const dot = around.lastIndexOf(".");
  return `${around.slice(dot + 1)}.${rel}`;
}

/** A smooth path through dagre's edge points. */
function pathOf(points) {
  let d = `M${points[0].x},${points[0].y}`;
  for (let i = 1; i < points.length - 1; i++) {
    const p = points[i];
    const q = points[i + 1];
    d += ` Q${p.x},${p.y} ${(p.x + q.x) / 2},${(p.y + q.y) / 2}`;
  }
  const last = points[points.length - 1];
  return `${d} L${last.x},${last.y}`;
}

/** The arrow-head marker the edges use (once per SVG). */
export function arrowDefs() {
  return svg("defs", {}, [
    svg("marker", { id: "graph-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, [
      svg("path", { d: "M0,0 L10,5 L0,10 z", class: "edge-arrow" }),
    ]),
  ]);
}

/**
 * Draws into `root` (an SVG <g>): `tree` and `vis` from model.js, `lay` from layout.js,
 * coloured by `colorBy`.
 */
export function drawGraph(root, { tree, vis, lay, colorBy }) {
  clear(root);
  const clusterLayer = svg("g", { class: "clusters" });
  const edgeLayer = svg("g", { class: "edges" });
  const nodeLayer = svg("g", { class: "nodes" });
  root.append(clusterLayer, edgeLayer, nodeLayer);

  for (const c of vis.clusters) {
    const b = lay.clusters.get(c.id);
    const g = svg("g", { class: "cluster", "data-group": c.group.id });
    g.append(svg("rect", { x: b.x, y: b.y, width: b.width, height: b.height, rx: 10, class: "cluster-box" }));
    const head = svg("g", { class: "cluster-head", "data-toggle": c.group.id, transform: `translate(${b.x + 6},${b.y + 4})` });
    head.append(svg("rect", { width: 14, height: 14, rx: 3, class: "toggle-box" }), svg("path", { d: "M3.5,7 H10.5", class: "toggle-mark" }));
    head.append(svg("text", { x: 19, y: 11.5, class: "cluster-name" }, [fit(c.group.label ?? shortName(c.group.id, c.parent), b.width - 32)]));
    tip(head, `${c.group.label ?? c.group.id}: ${c.group.count} ops (click to collapse)`);
    g.append(head);
    clusterLayer.append(g);
  }

  const itemById = new Map(vis.items.map((it) => [it.id, it]));
  const opName = (i) => {
    const n = tree.byIndex.get(i);
    return `${n.op}${n.scope ? ` ${n.scope}` : ""}`;
  };
  const nameOf = (id) => {
    const port = /^g:(.*)>(in|out)$/.exec(id);
    if (port) return `${port[2] === "in" ? "into" : "out of"} ${port[1]}`;
    const it = itemById.get(id);
    return !it ? id.slice(2) : it.kind === "group" ? (it.group.label ?? it.group.id) : opName(it.index);
  };
  const sourcesText = (e) => e.sources.slice(0, 3).map(opName).join(", ") + (e.sources.length > 3 ? ", …" : "");
  // Stubs: per target, its fan-out inputs side by side above it; per source, one below it.
  const stubsIn = new Map();
  const stubOut = new Map();
  for (const e of lay.edges) {
    if (e.points) {
      const g = svg("g", { class: "edge", "data-from": e.from, "data-to": e.to, "data-count": e.count });
      g.append(svg("path", { d: pathOf(e.points), class: "edge-line", "marker-end": e.to.endsWith(">out") ? undefined : "url(#graph-arrow)" }));
      if (e.count > 1) {
        const mid = e.points[Math.floor(e.points.length / 2)];
        g.append(svg("text", { x: mid.x + 4, y: mid.y - 3, class: "edge-count" }, [`×${e.count}`]));
      }
      tip(g, `${nameOf(e.from)} → ${nameOf(e.to)}${e.count > 1 ? `: ${e.count} edges` : ""}, from ${sourcesText(e)}`);
      edgeLayer.append(g);
    } else {
      if (!stubsIn.has(e.to)) stubsIn.set(e.to, []);
      stubsIn.get(e.to).push(e);
      stubOut.set(e.from, (stubOut.get(e.from) ?? 0) + 1);
    }
  }
  for (const [to, list] of stubsIn) {
    const b = lay.nodes.get(to) ?? lay.clusters.get(to);
    list.forEach((e, i) => {
      const x = b.x + b.width - 12 - i * 14;
      const g = svg("g", { class: "edge stub", "data-from": e.from, "data-to": e.to, "data-count": e.count, "data-source": e.sources[0] });
      g.append(svg("path", { d: `M${x},${b.y - 14} L${x},${b.y}`, class: "edge-line", "marker-end": "url(#graph-arrow)" }));
      g.append(svg("circle", { cx: x, cy: b.y - 16, r: 3, class: "stub-end" }));
      tip(g, `from ${sourcesText(e)}${e.count > 1 ? ` (${e.count} edges)` : ""}: click to go there`);
      edgeLayer.append(g);
    });
  }
  // (A frame's entry port feeding many: its stubs inside say where; nothing more is drawn.)
  for (const [from, n] of stubOut) {
    const b = lay.nodes.get(from);
    if (!b) continue;
    const x = b.x + b.width / 2;
    const y = b.y + b.height;
    const g = svg("g", { class: "stub-out" });
    g.append(svg("path", { d: `M${x},${y} L${x},${y + 12}`, class: "edge-line" }));
    g.append(svg("text", { x: x + 5, y: y + 12, class: "edge-count" }, [`to ${n} nodes`]));
    edgeLayer.append(g);
  }
  for (const [id, p] of lay.ports) edgeLayer.append(svg("circle", { cx: p.x, cy: p.y, r: 2.5, class: "port", "data-port": id }));

  for (const it of vis.items) {
    const b = lay.nodes.get(it.id);
    const shares = keyShares(tree, it, colorBy);
    const where = placementText(shares, colorBy);
    if (it.kind === "op") {
      const n = tree.byIndex.get(it.index);
      const c = colour(n.place[colorBy]);
      const g = svg("g", { class: "node op", "data-index": it.index, "data-id": it.id, "data-scope": n.scope, transform: `translate(${b.x},${b.y})` });
      g.append(svg("rect", { width: b.width, height: b.height, rx: 6, class: "node-box", fill: c, "fill-opacity": 0.14, stroke: c }));
      g.append(svg("rect", { width: 4, height: b.height, rx: 2, fill: c }));
      // A scope of one op is drawn as the op, under its scope's last name.
      const own = it.scope && it.parent !== `g:${it.scope}` ? shortName(it.scope, it.parent) : "";
      const ownW = own ? Math.min(own.length * CHAR_W + 4, 70) : 0;
      g.append(svg("text", { x: 10, y: 16, class: "op-name" }, [fit(n.op, b.width - 18 - ownW)]));
      if (own) g.append(svg("text", { x: b.width - 7, y: 16, class: "op-scope", "text-anchor": "end" }, [fit(own, 66)]));
      g.append(svg("text", { x: 10, y: 31, class: "op-shape" }, [fit(n.shape, b.width - 18)]));
      tip(g, `%${n.index} ${n.op} → ${n.shape}${n.scope ? ` · ${n.scope}` : ""} · ${where}${n.source ? ` · ${n.source}` : ""}`);
      nodeLayer.append(g);
    } else {
      const grp = it.group;
      const g = svg("g", { class: "node group", "data-group": grp.id, "data-id": it.id, transform: `translate(${b.x},${b.y})` });
      g.append(svg("rect", { x: 4, y: 4, width: b.width, height: b.height, rx: 8, class: "group-shadow" }));
      g.append(svg("rect", { width: b.width, height: b.height, rx: 8, class: "group-box" }));
      g.append(svg("text", { x: 12, y: 18, class: "group-name" }, [fit(grp.label ?? shortName(grp.id, it.parent), b.width - 40)]));
      g.append(svg("text", { x: 12, y: 34, class: "group-info" }, [fit(`${grp.count} ops · ${where}`, b.width - 24)]));
      const toggle = svg("g", { class: "group-toggle", "data-toggle": grp.id, transform: `translate(${b.width - 22},6)` });
      toggle.append(svg("rect", { width: 16, height: 16, rx: 3, class: "toggle-box" }), svg("path", { d: "M4,8 H12 M8,4 V12", class: "toggle-mark" }));
      g.append(toggle);
      // The share of each colour among its ops, along the foot.
      let x = 8;
      const total = grp.count;
      for (const s of shares) {
        const w = ((b.width - 16) * s.count) / total;
        g.append(svg("rect", { x, y: b.height - 9, width: Math.max(w, 1), height: 4, fill: colour(s.value), class: "share" }));
        x += w;
      }
      tip(g, `${grp.label ?? grp.id}: ${grp.count} ops · ${where} (double-click or + to expand)`);
      nodeLayer.append(g);
    }
  }
}
