// Graph view: the traced graph as a dataflow graph, module scopes as collapsible groups (the
// model opens at its top-level modules), coloured by IPU / stage / phase; search by name,
// click for an op's shape, line and placement; the printed graph (torch.fx-like text) below.
// Its parts: graph/model.js (scopes, what is drawn), graph/layout.js (dagre),
// graph/render.js (SVG), graph/panzoom.js (drag and wheel), graph/details.js (side panel).
import { h } from "./dom.js";
import { svg, colour } from "../charts/svg.js";
import { graphNodes } from "../plan/adapter.js";
import { buildTree, visibleGraph, groupsAround, search, opsUnder } from "./graph/model.js";
import { layoutGraph } from "./graph/layout.js";
import { drawGraph, arrowDefs } from "./graph/render.js";
import { panZoom } from "./graph/panzoom.js";
import { showDetails } from "./graph/details.js";

/** The most nodes drawn at once: an expansion past it is refused, with a note. */
export const MAX_DRAWN = 1500;
const KEY_NAMES = { ipu: "IPU", stage: "Stage", phase: "Phase" };

export function createGraphView(root, { onColorBy, onGoToLine }) {
  const colorBy = h("select", { id: "color-by" }, [
    h("option", { value: "ipu", text: "IPU" }),
    h("option", { value: "stage", text: "Stage" }),
    h("option", { value: "phase", text: "Phase" }),
  ]);
  colorBy.addEventListener("change", () => onColorBy(colorBy.value));
  const title = h("p", { class: "view-title", id: "graph-title" });
  const stats = h("p", { class: "muted", id: "graph-stats" });
  const find = h("input", { type: "search", id: "graph-search", placeholder: "op, scope, shape or %12", autocomplete: "off", spellcheck: "false" });
  const found = h("span", { class: "muted", id: "graph-found", "aria-live": "polite" });
  const button = (id, text, label, onclick) => h("button", { type: "button", id, text, title: label, "aria-label": label, onclick });
  const legend = h("div", { class: "legend-row", id: "graph-legend" });
  const note = h("p", { class: "graph-note", id: "graph-note", hidden: true });
  const chart = svg("svg", { class: "graph-chart", id: "graph-chart", role: "img", tabindex: "0" });
  const viewport = svg("g", { class: "viewport" });
  chart.append(arrowDefs(), viewport);
  const details = h("div", { class: "graph-details", id: "graph-details", "aria-live": "polite", hidden: true });
  const hint = h("p", { class: "help", text: "Drag to pan, wheel to zoom (0 fits). Click an op or a scope for its details; + or a double-click opens a scope, − closes it." });
  const text = h("pre", { class: "graph-text", id: "graph", tabindex: "0", "aria-label": "Printed graph of the model" });
  root.append(
    h("div", { class: "view-head" }, [h("div", {}, [title, stats]), h("label", { class: "inline", for: "color-by", text: "Colour by " }, [colorBy])]),
    h("div", { class: "graph-tools" }, [
      h("label", { class: "inline", for: "graph-search", text: "Find" }, [find]),
      found,
      h("span", { class: "spacer" }),
      button("graph-expand-all", "Expand all", "Expand every scope", () => setExpanded(new Set([...state.tree.groups.keys()].filter(Boolean)))),
      button("graph-collapse-all", "Collapse all", "Collapse to the top-level modules", () => setExpanded(new Set())),
      button("graph-fit", "Fit", "Fit the graph to the view", () => fitView()),
      button("graph-zoom-in", "+", "Zoom in", () => pz.zoom(1.25)),
      button("graph-zoom-out", "−", "Zoom out", () => pz.zoom(0.8)),
    ]),
    h("div", { class: "graph-legend-row" }, [legend, hint]),
    note,
    h("div", { class: "graph-box" }, [chart, details]),
    h("details", { class: "printed" }, [h("summary", { text: "Printed graph" }), text]),
  );
  const pz = panZoom(chart, viewport);

  const state = { analysis: null, tree: null, layouts: new Map(), expanded: new Set(), vis: null, lay: null, colorBy: "ipu", selected: null, matches: null, matchAt: -1, fitted: false };

  function fitView() {
    if (state.lay) state.fitted = pz.fit({ x: 0, y: 0, width: state.lay.width, height: state.lay.height });
  }

  /** Lays out the drawn graph for `expanded`; false (and a note) if it would draw too many nodes. */
  function relayout(expanded) {
    const vis = visibleGraph(state.tree, expanded);
    if (vis.items.length > MAX_DRAWN) {
      note.hidden = false;
      note.textContent = `That would draw ${vis.items.length.toLocaleString("en")} nodes at once (at most ${MAX_DRAWN.toLocaleString("en")}): open the scopes one at a time.`;
      return false;
    }
    note.hidden = true;
    state.expanded = expanded;
    state.vis = vis;
    const t0 = performance.now();
    state.lay = layoutGraph(vis, state.layouts);
    chart.dataset.layoutMs = String(Math.round(performance.now() - t0));
    draw();
    return true;
  }

  /** The box of scope or op `id` (a drawn node or an expanded scope's frame) in the drawing. */
  const boxOf = (id) => state.lay?.nodes.get(id) ?? state.lay?.clusters.get(id) ?? null;

  /** Expands or collapses to `expanded`, keeping scope `anchor` (if given) where it is on screen. */
  function setExpanded(expanded, anchor = null) {
    const before = anchor ? boxOf(`g:${anchor}`) : null;
    if (!relayout(expanded)) return;
    const after = anchor ? boxOf(`g:${anchor}`) : null;
    if (before && after) pz.keep(before.x, before.y, after.x, after.y);
    else fitView();
  }

  function toggle(id) {
    const next = new Set(state.expanded);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setExpanded(next, id);
    if (state.selected?.kind === "group") select(state.selected);
  }

  /** Draws what is laid out, with the selection and the search's matches marked. */
  function draw() {
    const { tree, vis, lay } = state;
    drawGraph(viewport, { tree, vis, lay, colorBy: state.colorBy });
    chart.dataset.nodes = String(vis.items.length);
    chart.dataset.edges = String(vis.edges.length);
    chart.setAttribute("aria-label", `Dataflow graph of ${tree.nodes.length} ops: ${vis.items.length} nodes drawn, coloured by ${KEY_NAMES[state.colorBy]}`);
    mark();
  }

  function mark() {
    for (const e of viewport.querySelectorAll(".selected, .match")) e.classList.remove("selected", "match");
    const sel = state.selected;
    if (sel) {
      const id = sel.kind === "op" ? state.vis.owner.get(sel.index) : `g:${sel.id}`;
      viewport.querySelector(`[data-id="${CSS.escape(id)}"]`)?.classList.add("selected");
      if (sel.kind === "group") viewport.querySelector(`.cluster[data-group="${CSS.escape(sel.id)}"]`)?.classList.add("selected");
    }
    if (state.matches) {
      const ids = new Set(state.matches.ops.map((i) => state.vis.owner.get(i)));
      for (const g of state.matches.groups) ids.add(`g:${g}`);
      for (const id of ids) viewport.querySelector(`[data-id="${CSS.escape(id)}"]`)?.classList.add("match");
    }
  }

  function select(sel) {
    state.selected = sel;
    showDetails(details, state.tree, sel, { expanded: state.expanded, onSelect: (i) => reveal({ kind: "op", index: i }), onToggle: toggle, onGoToLine, onClose: () => select(null) });
    mark();
  }

  /** Selects `sel`, expanding the scopes around it, and brings it into view. */
  function reveal(sel) {
    const { tree } = state;
    // A scope of one op is drawn as the op.
    if (sel.kind === "group" && tree.groups.get(sel.id).count === 1) sel = { kind: "op", index: opsUnder(tree.groups.get(sel.id))[0] };
    const around = [];
    if (sel.kind === "op") around.push(...groupsAround(tree, sel.index));
    else for (let g = tree.groups.get(sel.id).parent; g && g.id; g = g.parent) around.push(g.id);
    if (around.some((id) => !state.expanded.has(id))) relayout(new Set([...state.expanded, ...around]));
    select(sel);
    const id = sel.kind === "op" ? state.vis.owner.get(sel.index) : `g:${sel.id}`;
    const b = boxOf(id);
    if (b) pz.centre(b.x + b.width / 2, b.y + b.height / 2, 0.6);
  }

  /**
   * Marks what the search box matches (a collapsed scope holding a match is marked too) and
   * says how many; `step` (Enter: 1, Shift+Enter: −1) goes to the next or previous match,
   * opening the scopes around it.
   */
  function runSearch(step = 0) {
    const q = find.value;
    const fresh = !state.matches || state.matches.query !== q;
    if (fresh) {
      state.matches = q.trim() ? { query: q, ...search(state.tree, q) } : null;
      state.matchAt = -1;
    }
    const list = state.matches ? [...state.matches.groups.map((id) => ({ kind: "group", id })), ...state.matches.ops.map((index) => ({ kind: "op", index }))] : [];
    if (!state.matches) found.textContent = "";
    else if (!list.length) found.textContent = "no match";
    else {
      const { ops, groups } = state.matches;
      const what = `${ops.length} op${ops.length === 1 ? "" : "s"}${groups.length ? `, ${groups.length} scope${groups.length === 1 ? "" : "s"}` : ""}`;
      if (step) {
        state.matchAt = (state.matchAt + step + list.length) % list.length;
        found.textContent = `${state.matchAt + 1} of ${list.length}: ${what} · Enter for the next`;
        reveal(list[state.matchAt]);
        return;
      }
      found.textContent = `${what} · Enter to go to the first`;
    }
    mark();
  }
  let searchTimer = 0;
  find.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => runSearch(0), 150);
  });
  find.addEventListener("keydown", (e) => {
    if (e.key !== "Enter") return;
    e.preventDefault();
    clearTimeout(searchTimer);
    runSearch(e.shiftKey ? -1 : 1);
  });

  chart.addEventListener("click", (e) => {
    const t = e.target.closest("[data-toggle], [data-source], .node");
    if (!t) return;
    if (t.dataset.toggle !== undefined) toggle(t.dataset.toggle);
    else if (t.dataset.source !== undefined) reveal({ kind: "op", index: Number(t.dataset.source) });
    else if (t.dataset.index !== undefined) select({ kind: "op", index: Number(t.dataset.index) });
    else select({ kind: "group", id: t.dataset.group });
  });
  chart.addEventListener("dblclick", (e) => {
    const t = e.target.closest(".node.group");
    if (t) toggle(t.dataset.group);
  });
  chart.addEventListener("keydown", (e) => {
    const k = { "+": 1.25, "=": 1.25, "-": 0.8 }[e.key];
    if (k) pz.zoom(k);
    else if (e.key === "0") fitView();
    else if (e.key === "Escape") select(null);
    else return;
    e.preventDefault();
  });

  function drawLegend() {
    const seen = new Map();
    for (const n of state.tree.nodes) seen.set(n.place[state.colorBy], true);
    const keys = [...seen.keys()].sort((a, b) => (a ?? Infinity) - (b ?? Infinity));
    legend.replaceChildren(
      ...keys.map((k) => h("span", { class: "key", style: `--c: ${colour(k)}`, "data-key": k ?? "", text: k === null ? "unplaced" : `${KEY_NAMES[state.colorBy]} ${k}` })),
    );
  }

  return {
    render(a, s) {
      colorBy.value = s.colorBy;
      const fresh = a !== state.analysis;
      const recolour = s.colorBy !== state.colorBy;
      state.colorBy = s.colorBy;
      if (fresh) {
        state.analysis = a;
        const data = graphNodes(a.graph, a.plan, a.file);
        state.tree = buildTree(data.nodes);
        state.layouts = new Map();
        title.textContent = a.title;
        const ipus = data.ipus || 1;
        let scopes = 0;
        for (const g of state.tree.groups.values()) if (g.id && !g.chunk) scopes++;
        const program = a.plan?.numNodes > a.graph.nodes.length ? ` · the planned ${a.training ? "training step" : "program"} has ${a.plan.numNodes} nodes` : "";
        stats.textContent = `${data.nodes.length} ops in ${scopes} module scope${scopes === 1 ? "" : "s"} · ${ipus} IPU${ipus > 1 ? "s" : ""} · ${a.parameters.length} parameter tensors${program}`;
        chart.dataset.ops = String(data.nodes.length);
        // Scopes the new model still has stay open; the selection goes if its op did.
        const kept = new Set([...state.expanded].filter((id) => state.tree.groups.has(id)));
        if (state.selected?.kind === "op" && !state.tree.byIndex.has(state.selected.index)) state.selected = null;
        if (state.selected?.kind === "group" && !state.tree.groups.has(state.selected.id)) state.selected = null;
        if (!relayout(kept)) relayout(new Set());
        state.matches = find.value.trim() ? { query: find.value, ...search(state.tree, find.value) } : null;
        select(state.selected);
        fitView();
        drawLegend();
        text.textContent = a.text;
      } else if (recolour) {
        draw();
        drawLegend();
        select(state.selected);
      } else if (!state.fitted) fitView();
    },
  };
}
