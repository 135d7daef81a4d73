// Execution view: a Gantt chart per IPU over one iteration (compute, exchange, sync, copies,
// streaming), the time of a step, the throughput estimate, the IPUs used and reserved, and
// each IPU's busy time by kind.
import { h, stat, contentWidth } from "./dom.js";
import { drawGantt, units } from "../charts/gantt.js";
import { ganttData } from "../plan/adapter.js";
import { seconds, KIND_COLOURS } from "../charts/svg.js";

const KINDS = Object.keys(KIND_COLOURS).filter((k) => k !== "idle");

export function createExecutionView(root) {
  const stats = h("div", { class: "stats", id: "execution-stats" });
  const note = h("p", { class: "muted", id: "execution-note" });
  const chart = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  chart.setAttribute("id", "gantt-chart");
  chart.setAttribute("role", "img");
  chart.setAttribute("aria-label", "Execution timeline per IPU");
  const legend = h("div", { class: "legend-row" }, KINDS.map((k) => h("span", { class: `key kind-${k}`, style: `--c: ${KIND_COLOURS[k]}`, text: k })));
  const busy = h("div", { class: "busy", id: "busy-table" });
  root.append(stats, note, h("div", { class: "chart-scroll" }, [chart]), legend, busy);
  return {
    render(a) {
      const d = ganttData(a.plan);
      if (!d) {
        stats.replaceChildren();
        note.textContent = "The plan has no timeline.";
        chart.replaceChildren();
        busy.replaceChildren();
        return;
      }
      stats.replaceChildren(
        stat("step time", seconds(d.stepTimeS), "step-time"),
        stat("samples / step", d.samplesPerStep.toLocaleString("en")),
        stat("throughput", `${Math.round(d.throughput).toLocaleString("en")} samples/s`, "throughput"),
        stat("IPUs used", d.ipusUsed),
        stat("IPUs reserved", d.ipusReserved, "ipus-reserved"),
      );
      const mb = d.microBatchesPerIteration;
      note.textContent =
        `One iteration (${seconds(d.iterationTimeS)}): ${mb} micro-batch${mb === 1 ? "" : "es"} of ${d.microBatchSize}` +
        `${d.replicas > 1 ? ` on each of ${d.replicas} replicas (one replica drawn)` : ""}; a step (one host call) runs ${d.iterationsPerStep} iteration${d.iterationsPerStep === 1 ? "" : "s"}.` +
        (d.gap
          ? ` The steady state is drawn shortened: at “…” ${d.gap.count.toLocaleString("en")} more ${units(d.gap.unit, d.gap.count)} (${seconds(d.gap.end - d.gap.start)}), each like the one drawn before, are left out; the busy table counts them.`
          : "") +
        " Estimates: a roofline per op in BSP supersteps (see the README's planner section).";
      const r = drawGantt(chart, { ...d, width: contentWidth(root, 560) });
      chart.dataset.rects = String(r.rects);
      busy.replaceChildren(
        h("table", { class: "table" }, [
          h("thead", {}, [h("tr", {}, ["IPU", ...KINDS, "idle"].map((t) => h("th", { text: t, scope: "col" })))]),
          h("tbody", {}, d.rows.map((row) => h("tr", {}, [`IPU ${row.ipu}`, ...KINDS.map((k) => seconds(row.busy[k] ?? 0)), seconds(row.busy.idle ?? 0)].map((t) => h("td", { text: t }))))),
        ]),
      );
    },
  };
}
