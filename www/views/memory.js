// Memory view: per IPU, bytes by class stacked over program steps with the capacity line;
// clicking a step lists the tensors live there; the tile map at the peak.
import { h, plannerMissing, stat, contentWidth } from "./dom.js";
import { drawMemory } from "../charts/memory.js";
import { drawTiles } from "../charts/tiles.js";
import { memoryData, tilesData, liveTensors, planIpus, parametersPerIpu } from "../plan/adapter.js";
import { bytes } from "../charts/svg.js";

export function createMemoryView(root) {
  const missing = h("div");
  const ipuSel = h("select", { id: "memory-ipu" });
  const head = h("div", { class: "view-head" }, [h("h3", { text: "Memory over program steps" }), h("label", { class: "inline", for: "memory-ipu", text: "IPU " }, [ipuSel])]);
  const stats = h("div", { class: "stats" });
  const canvas = h("canvas", { id: "memory-chart", role: "img", tabindex: "0", "aria-label": "Memory by class over program steps; click a step to list its live tensors" });
  const legend = h("div", { class: "legend-row" });
  const live = h("div", { class: "live", id: "live-tensors", "aria-live": "polite" });
  const tiles = h("canvas", { id: "tile-map", role: "img", "aria-label": "Tile map: bytes per tile at the peak" });
  const tileNote = h("p", { class: "muted" });
  const body = h("div", {}, [head, stats, canvas, legend, live, h("h3", { text: "Tile map at the peak" }), tileNote, tiles]);
  root.append(missing, body);
  let plan = null;
  let chart = null;
  let selected = null;

  function draw() {
    const ipu = Number(ipuSel.value);
    const data = memoryData(plan, ipu);
    if (!data) return;
    stats.replaceChildren(stat("peak", bytes(data.peakBytes)), stat("capacity", bytes(data.capacity)), stat("fits", data.fits ? "yes" : "no", data.fits ? "ok" : "bad"));
    chart = drawMemory(canvas, { ...data, width: contentWidth(root, 480), height: 240, selected });
    legend.replaceChildren(...data.classes.filter((c) => data.steps.some((s) => s.values[c] > 0)).map((c) => h("span", { class: `key key-${c}`, text: c })));
    const t = tilesData(plan, ipu);
    if (t) {
      const r = drawTiles(tiles, { ...t, width: contentWidth(root, 480) });
      tileNote.textContent = `${t.tiles.length} tiles of ${bytes(t.bytesPerTile)}; ${r.over} over capacity.`;
    }
    if (selected !== null && data.steps[selected]) {
      const step = data.steps[selected];
      const rows = liveTensors(plan, ipu, step.node);
      live.replaceChildren(
        h("h4", { text: `Live at step ${selected} (${step.label}): ${rows.length} tensors` }),
        h("table", { class: "table" }, [
          h("thead", {}, [h("tr", {}, ["tensor", "class", "bytes"].map((t) => h("th", { text: t, scope: "col" })))]),
          h("tbody", {}, rows.slice(0, 40).map((v) => h("tr", {}, [v.name ?? `%${v.value}`, v.class, bytes(v.bytes)].map((t) => h("td", { text: t }))))),
        ]),
      );
    } else {
      live.replaceChildren(h("p", { class: "muted", text: "Click a step in the chart (or focus it and use ← →) to list the tensors live there." }));
    }
  }

  canvas.addEventListener("click", (e) => {
    if (!chart) return;
    const r = canvas.getBoundingClientRect();
    selected = chart.stepAt(e.clientX - r.left);
    draw();
  });
  canvas.addEventListener("keydown", (e) => {
    const n = memoryData(plan, Number(ipuSel.value))?.steps.length ?? 0;
    if (!n || !["ArrowLeft", "ArrowRight"].includes(e.key)) return;
    e.preventDefault();
    selected = Math.min(n - 1, Math.max(0, (selected ?? -1) + (e.key === "ArrowRight" ? 1 : -1)));
    draw();
  });
  ipuSel.addEventListener("change", () => {
    selected = null;
    draw();
  });

  return {
    render(a) {
      plan = a.plan;
      const ipus = planIpus(plan);
      const prev = ipuSel.value;
      ipuSel.replaceChildren(...ipus.map((i) => h("option", { value: i, text: String(i) })));
      if (ipus.map(String).includes(prev)) ipuSel.value = prev;
      const has = Boolean(plan.memory);
      missing.replaceChildren();
      body.hidden = !has;
      if (!has) {
        const g = plan.generation;
        const params = parametersPerIpu(a.graph, plan);
        missing.append(
          plannerMissing("The memory timeline and tile map"),
          h("p", { class: "muted", text: g ? `Each ${g.name} IPU has ${g.tiles} tiles × ${bytes(g.bytesPerTile)} = ${bytes(g.tiles * g.bytesPerTile)} of In-Processor Memory; this plan uses ${plan.ipusUsed} IPU${plan.ipusUsed > 1 ? "s" : ""}.` : "" }),
          h("h3", { text: "What the trace already tells: parameters per IPU (float32, as traced)" }),
          h("table", { class: "table", id: "params-per-ipu" }, [
            h("thead", {}, [h("tr", {}, ["IPU", "parameter tensors", "bytes", "share of the IPU's memory"].map((t) => h("th", { text: t, scope: "col" })))]),
            h("tbody", {}, params.map((p) => h("tr", {}, [`IPU ${p.ipu}`, String(p.parameters), bytes(p.bytes), g ? `${((p.bytes / (g.tiles * g.bytesPerTile)) * 100).toFixed(2)} %` : ""].map((t) => h("td", { text: t }))))),
          ]),
          h("p", { class: "muted", text: "Optimizer state, activations, gradients, code and exchange buffers come on top; the planner will count them." }),
        );
        return;
      }
      selected = null;
      draw();
    },
  };
}
