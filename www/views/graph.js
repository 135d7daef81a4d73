// Graph view: the traced graph's ops grouped by module scope, coloured by IPU / stage /
// phase, with the printed graph (torch.fx-like text) below.
import { h, contentWidth } from "./dom.js";
import { drawGraph } from "../charts/graph.js";
import { graphData } from "../plan/adapter.js";

export function createGraphView(root, { onColorBy }) {
  const colorBy = h("select", { id: "color-by" }, [
    h("option", { value: "ipu", text: "IPU" }),
    h("option", { value: "stage", text: "Stage" }),
    h("option", { value: "phase", text: "Phase" }),
  ]);
  colorBy.addEventListener("change", () => onColorBy(colorBy.value));
  const title = h("p", { class: "view-title", id: "graph-title" });
  const stats = h("p", { class: "muted", id: "graph-stats" });
  const chart = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  chart.setAttribute("class", "graph-chart");
  chart.setAttribute("role", "img");
  chart.setAttribute("id", "graph-chart");
  const text = h("pre", { class: "graph-text", id: "graph", tabindex: "0", "aria-label": "Printed graph of the model" });
  root.append(
    h("div", { class: "view-head" }, [h("div", {}, [title, stats]), h("label", { class: "inline", for: "color-by", text: "Colour by " }, [colorBy])]),
    h("div", { class: "chart-scroll" }, [chart]),
    h("details", { class: "printed" }, [h("summary", { text: "Printed graph" }), text]),
  );
  return {
    render(a, state) {
      colorBy.value = state.colorBy;
      const data = graphData(a.graph, a.plan, state.colorBy);
      title.textContent = a.title;
      const ipus = data.ipus || 1;
      const program = a.plan?.numNodes > a.graph.nodes.length ? ` · the planned ${a.training ? "training step" : "program"} has ${a.plan.numNodes} nodes` : "";
      stats.textContent = `${data.ops} ops in ${data.groups.length} scope groups · ${ipus} IPU${ipus > 1 ? "s" : ""} · ${a.parameters.length} parameter tensors${program}`;
      chart.setAttribute("aria-label", `Graph of ${data.ops} ops grouped by module scope, coloured by ${state.colorBy}`);
      drawGraph(chart, { ...data, width: contentWidth(root, 560) });
      text.textContent = a.text;
    },
  };
}
