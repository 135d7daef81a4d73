// Stage / phase assignment view: Blocks → Stages → Phases per IPU, and for a pipeline its
// ramp-up / steady / ramp-down chart over micro-batches; the copies between IPUs.
import { h, stat, contentWidth } from "./dom.js";
import { drawStages } from "../charts/stages.js";
import { drawPipeline } from "../charts/pipeline.js";
import { summary, stagesData, pipelineData, nodeLabel } from "../plan/adapter.js";
import { bytes } from "../charts/svg.js";

const svgEl = (id, label) => {
  const e = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  e.setAttribute("id", id);
  e.setAttribute("role", "img");
  e.setAttribute("aria-label", label);
  return e;
};

export function createAssignmentView(root) {
  const stats = h("div", { class: "stats", id: "assignment-stats" });
  const stages = svgEl("stages-chart", "Blocks, stages and phases per IPU");
  const pipeHead = h("h3", { text: "Pipeline over micro-batches" });
  const pipeNote = h("p", { class: "muted" });
  const pipe = svgEl("pipeline-chart", "Pipeline schedule: stages over time steps");
  const pipeBox = h("section", { class: "pipeline" }, [pipeHead, pipeNote, h("div", { class: "chart-scroll" }, [pipe])]);
  const copies = h("div", { class: "copies" });
  root.append(
    stats,
    h("h3", { text: "Blocks → stages → phases, per IPU" }),
    h("div", { class: "chart-scroll" }, [stages]),
    pipeBox,
    copies,
  );
  return {
    render(a) {
      const plan = a.plan;
      const s = summary(plan);
      stats.replaceChildren(
        stat("strategy", s.strategy),
        stat("IPUs used", s.ipusUsed, "ipus-used"),
        stat("IPUs reserved", s.ipusReserved),
        stat("per replica × replicas", `${s.ipusPerReplica} × ${s.replicas}`),
        stat("blocks", s.blocks),
        stat(s.phases ? "phases" : "stages", s.phases || s.stages, "stage-count"),
        stat("inter-IPU copies", s.copies ? `${s.copies} · ${bytes(s.copyBytes)}` : "0"),
        stat("plan", s.valid ? "valid" : "invalid", s.valid ? "ok" : "bad"),
      );
      drawStages(stages, { ...stagesData(plan), width: contentWidth(root, 480) });
      const p = pipelineData(plan);
      pipeBox.hidden = !p;
      if (p) {
        pipeNote.textContent =
          `${p.stages.length} stages × ${p.microBatches} micro-batches (${plan.training ? "gradient accumulation" : "device iterations"}): ramp-up ${p.rampUp} step${p.rampUp === 1 ? "" : "s"}, steady ${p.steady}, ramp-down ${p.rampDown}.` +
          (p.gaps.length ? " The steady state is drawn shortened (…)." : "");
        drawPipeline(pipe, { ...p, width: contentWidth(root, 480) });
      }
      const list = plan.copies ?? [];
      copies.replaceChildren();
      if (list.length) {
        copies.append(
          h("h3", { text: "Copies between IPUs" }),
          h("table", { class: "table" }, [
            h("thead", {}, [h("tr", {}, ["value", "from", "to", "bytes", "read by"].map((t) => h("th", { text: t, scope: "col" })))]),
            h("tbody", {}, list.slice(0, 50).map((c) => h("tr", {}, [`%${c.value}`, `IPU ${c.fromIpu}`, `IPU ${c.toIpu}`, bytes(c.bytes), `step ${c.node}: ${nodeLabel(plan, c.node)}`].map((t) => h("td", { text: t }))))),
          ]),
        );
        if (list.length > 50) copies.append(h("p", { class: "muted", text: `… and ${list.length - 50} more.` }));
      }
    },
  };
}
