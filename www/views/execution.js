// Execution view: a Gantt chart per IPU (compute, exchange, sync, copies, streaming), the
// throughput estimate and the IPUs reserved.
import { h, plannerMissing, stat, contentWidth } from "./dom.js";
import { drawGantt } from "../charts/gantt.js";
import { ganttData } from "../plan/adapter.js";
import { seconds, KIND_COLOURS } from "../charts/svg.js";

export function createExecutionView(root) {
  const missing = h("div");
  const stats = h("div", { class: "stats" });
  const chart = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  chart.setAttribute("id", "gantt-chart");
  chart.setAttribute("role", "img");
  chart.setAttribute("aria-label", "Execution timeline per IPU");
  const legend = h("div", { class: "legend-row" }, Object.keys(KIND_COLOURS).filter((k) => k !== "idle").map((k) => h("span", { class: `key kind-${k}`, text: k })));
  const body = h("div", {}, [stats, h("div", { class: "chart-scroll" }, [chart]), legend]);
  root.append(missing, body);
  return {
    render(a) {
      const d = ganttData(a.plan);
      body.hidden = !d;
      missing.replaceChildren();
      if (!d) {
        missing.append(plannerMissing("The execution timeline and the throughput estimate"), h("p", { class: "muted", text: `IPUs reserved for this plan: ${a.plan.ipusReserved} (${a.plan.ipusUsed} used).` }));
        return;
      }
      stats.replaceChildren(
        stat("step time", seconds(d.stepTimeS)),
        stat("samples / step", d.samplesPerStep),
        stat("throughput", `${Math.round(d.throughput).toLocaleString("en")} samples/s`),
        stat("IPUs reserved", d.ipusReserved),
      );
      drawGantt(chart, { ...d, width: contentWidth(root, 560) });
    },
  };
}
