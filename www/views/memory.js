// Memory view: per IPU, bytes by class stacked over program steps with the capacity line;
// clicking a step (or ← → on the focused chart) lists what is live there; the tile map at
// the IPU's peak.
import { h, stat, contentWidth } from "./dom.js";
import { drawMemory } from "../charts/memory.js";
import { drawTiles } from "../charts/tiles.js";
import { drawTileScale } from "../charts/tiles.js";
import { memoryData, tilesData, liveTensors, planIpus, stepLabel, CLASS_LABELS, PER_STEP } from "../plan/adapter.js";
import { bytes, CLASS_COLOURS } from "../charts/svg.js";

/** Tensors listed at a step (the largest); the rest are counted. */
const LISTED = 40;

export function createMemoryView(root) {
  const ipuSel = h("select", { id: "memory-ipu" });
  const head = h("div", { class: "view-head" }, [h("h3", { text: "Memory over program steps" }), h("label", { class: "inline", for: "memory-ipu", text: "IPU " }, [ipuSel])]);
  const stats = h("div", { class: "stats", id: "memory-stats" });
  const note = h("p", { class: "muted", id: "memory-note" });
  const canvas = h("canvas", { id: "memory-chart", role: "img", tabindex: "0", "aria-label": "Memory by class over program steps; click a step, or use the arrow keys, to list what is live there" });
  const legend = h("div", { class: "legend-row", id: "memory-legend" });
  const always = h("input", { type: "checkbox", id: "memory-always", checked: true });
  const controls = h("div", { class: "memory-controls" }, [
    h("label", { for: "memory-always" }, [always, "Stack the always-live memory (code, exchange, weights, optimizer state, …) under the rest"]),
  ]);
  const scale = h("canvas", { class: "tile-scale-bar", "aria-hidden": "true" });
  const scaleRow = h("div", { class: "tile-scale" }, ["0", scale, ""]);
  const live = h("div", { class: "live", id: "live-tensors", "aria-live": "polite" });
  const tiles = h("canvas", { id: "tile-map", role: "img", "aria-label": "Tile map: bytes per tile at the peak" });
  const tileNote = h("p", { class: "muted", id: "tile-note" });
  root.append(head, stats, note, controls, canvas, legend, live, h("h3", { text: "Tile map at the peak" }), tileNote, scaleRow, tiles);
  let plan = null;
  let data = null;
  let chart = null;
  let selected = null;

  /** The chart: every class against the capacity, or (unticked) only what changes over the
   *  program, against what the always-live memory leaves of the capacity. */
  function drawChart() {
    const all = always.checked;
    chart = drawMemory(canvas, {
      ...data,
      classes: all ? data.classes : PER_STEP,
      capacity: all ? data.capacity : Math.max(0, data.capacity - data.alwaysLiveBytes),
      capacityLabel: all ? "capacity" : "capacity left by the always-live memory",
      width: contentWidth(root, 480),
      height: 260,
      selected,
    });
  }

  function showLive() {
    if (selected === null || !data?.x.length) {
      live.replaceChildren(h("p", { class: "muted", text: "Click a step in the chart (or focus it and use ← →) to list what is live there." }));
      return;
    }
    const node = data.x[selected];
    const { tensors, always, step } = liveTensors(plan, data.ipu, node);
    for (const [k, v] of Object.entries(step)) live.dataset[k] = String(v);
    const onChip = ["activations", "stash", "gradients", "temporaries", "loaded"].filter((c) => step[c] > 0).map((c) => `${CLASS_LABELS[c]} ${bytes(step[c])}`);
    live.replaceChildren(
      h("h4", { text: `Live at ${stepLabel(plan, data, selected)}: ${tensors.length} tensor${tensors.length === 1 ? "" : "s"}` }),
      h("p", { class: "muted", text: `This step: ${onChip.join(" · ") || "nothing but the always-live memory"}${step.streaming ? ` · in Streaming Memory ${bytes(step.streaming)}` : ""}. Always live: ${always.map((a) => `${a.label} ${bytes(a.bytes)}`).join(" · ") || "nothing"}.` }),
    );
    if (tensors.length) {
      live.append(
        h("table", { class: "table" }, [
            h("thead", {}, [h("tr", {}, ["tensor", "class", "bytes"].map((t) => h("th", { text: t, scope: "col" })))]),
            h("tbody", {}, tensors.slice(0, LISTED).map((v) => h("tr", { "data-bytes": v.bytes, "data-class": v.class }, [v.name, v.class, bytes(v.bytes)].map((t) => h("td", { text: t }))))),
          ]),
      );
    }
    if (tensors.length > LISTED) live.append(h("p", { class: "muted", text: `… and ${tensors.length - LISTED} smaller ones.` }));
  }

  function draw() {
    const ipu = Number(ipuSel.value);
    data = memoryData(plan, ipu);
    if (!data) {
      stats.replaceChildren();
      note.textContent = `The plan has no memory for IPU ${ipu}.`;
      return;
    }
    // Exact byte counts of the always-live classes, for tests and tools (the stats round them).
    for (const [c, b] of Object.entries(data.alwaysLive)) stats.dataset[c] = String(b);
    stats.replaceChildren(
      ...[
      stat("peak", bytes(data.peakBytes), "peak"),
      stat("capacity", bytes(data.capacity)),
      stat("fits", data.fits ? "yes" : "no", data.fits ? "ok" : "bad"),
      stat("always live", bytes(data.alwaysLiveBytes)),
      stat("weights", bytes(data.alwaysLive.weights)),
      stat("activation peak (executor's count)", bytes(data.livePeakBytes)),
      data.streamingMax ? stat("in Streaming Memory", bytes(data.streamingMax)) : null,
      ].filter(Boolean),
    );
    note.textContent =
      data.x.length < data.programSteps
        ? `${data.programSteps} program steps; the ${data.x.length} drawn are the largest of each stretch (the peak, step ${data.peakStep}, among them).`
        : `${data.programSteps} program steps, one node each; the peak is at step ${data.peakStep}.`;
    drawChart();
    showLegend();
    const t = tilesData(plan, ipu);
    if (t) {
      const r = drawTiles(tiles, { ...t, width: contentWidth(root, 480) });
      tileNote.textContent = `${t.tiles.length} tiles of ${bytes(t.bytesPerTile)}; the fullest holds ${bytes(t.maxTileBytes)}; ${r.over} over capacity. The planner spreads each tensor linearly over the tiles (not Poplar's real mapping).`;
      drawTileScale(scale, 160, 10);
      scaleRow.lastChild.textContent = `${bytes(t.bytesPerTile)} (a full tile); dark red: over`;
    }
    if (!data.fits && selected === null) selected = data.peakIndex;
    showLive();
  }

  function showLegend() {
    const shown = always.checked ? data.classes : PER_STEP;
    legend.replaceChildren(...shown.filter((c) => data.series[c].some((v) => v > 0)).map((c) => h("span", { class: "key", style: `--c: ${CLASS_COLOURS[c]}`, text: CLASS_LABELS[c] })));
  }

  always.addEventListener("change", () => {
    if (!data) return;
    drawChart();
    showLegend();
  });

  const select = (i) => {
    selected = i;
    drawChart();
    showLive();
  };
  canvas.addEventListener("click", (e) => {
    if (!chart) return;
    const r = canvas.getBoundingClientRect();
    select(chart.indexAt(e.clientX - r.left));
  });
  canvas.addEventListener("keydown", (e) => {
    const n = data?.x.length ?? 0;
    if (!n || !["ArrowLeft", "ArrowRight", "Home", "End"].includes(e.key)) return;
    e.preventDefault();
    const next = { ArrowRight: (selected ?? -1) + 1, ArrowLeft: (selected ?? 1) - 1, Home: 0, End: n - 1 }[e.key];
    select(Math.min(n - 1, Math.max(0, next)));
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
      // The IPU that does not fit first, else the one kept from before.
      const bad = ipus.find((i) => plan.memory?.ipus?.find((m) => m.ipu === i)?.fits === false);
      if (bad !== undefined) ipuSel.value = String(bad);
      else if (ipus.map(String).includes(prev)) ipuSel.value = prev;
      selected = null;
      draw();
    },
  };
}
