// Fit / errors view: whether the plan is valid and fits, and the planner's errors and
// warnings, each with its fix; an error tied to a node jumps to its source line.
import { h } from "./dom.js";
import { fitItems } from "../plan/adapter.js";

export function createFitView(root, { onGoToLine }) {
  const verdict = h("p", { class: "verdict", id: "fit-verdict" });
  const list = h("ul", { class: "issues", id: "fit-list" });
  root.append(verdict, list);
  return {
    render(a) {
      const plan = a.plan;
      const items = fitItems(plan);
      const errors = items.filter((i) => i.level === "error").length;
      verdict.className = `verdict ${errors ? "bad" : "ok"}`;
      verdict.textContent = errors
        ? `${errors} error${errors > 1 ? "s" : ""}: this configuration would not compile.`
        : plan.fits === null || plan.fits === undefined
          ? "Valid configuration. Whether it fits in memory needs the planner (not available in this build)."
          : plan.fits
            ? "Valid, and it fits in every IPU's memory."
            : "Valid, but it does not fit in memory.";
      list.replaceChildren(
        ...items.map((i) => {
          const src = Number.isInteger(i.node) ? a.graph.nodes[i.node]?.meta?.source : null;
          const line = src ? Number(src.split(":").pop()) : null;
          return h("li", { class: `issue ${i.level}` }, [
            h("span", { class: "badge", text: i.level }),
            h("div", {}, [
              h("p", { class: "issue-message", text: i.message }),
              i.fix ? h("p", { class: "issue-fix", text: `Fix: ${i.fix}` }) : null,
              line ? h("button", { type: "button", class: "link", text: `Go to line ${line}`, onclick: () => onGoToLine(line, i.message) }) : null,
            ]),
          ]);
        }),
      );
      if (!items.length) list.append(h("li", { class: "issue none", text: "No errors or warnings." }));
    },
  };
}
