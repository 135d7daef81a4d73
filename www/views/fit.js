// Fit / errors view: whether PopTorch would accept the configuration and whether it fits,
// the planner's errors and warnings (and the page's own check of the IPUs in the system),
// each with its fix; one tied to a node of the editor's code jumps to its line. An IPU that
// does not fit lists its largest tensors.
import { h, stat } from "./dom.js";
import { fitItems, sourceOf, editorLine, summary } from "../plan/adapter.js";
import { bytes } from "../charts/svg.js";

export function createFitView(root, { onGoToLine }) {
  const verdict = h("p", { class: "verdict", id: "fit-verdict" });
  const stats = h("div", { class: "stats", id: "fit-stats" });
  const list = h("ul", { class: "issues", id: "fit-list" });
  const largest = h("div", { id: "fit-largest" });
  root.append(verdict, stats, list, largest);
  return {
    render(a) {
      const plan = a.plan;
      const items = fitItems(plan, a.checks ?? []);
      const errors = items.filter((i) => i.level === "error");
      const oom = errors.filter((e) => e.code === "out_of_memory");
      const s = summary(plan);
      verdict.className = `verdict ${errors.length ? "bad" : "ok"}`;
      verdict.textContent = !plan.valid
        ? `Invalid: PopTorch would reject this configuration (${errors.length - oom.length} error${errors.length - oom.length === 1 ? "" : "s"}).`
        : !plan.fits
          ? `Valid, but it does not fit: ${oom.length} IPU${oom.length === 1 ? "" : "s"} out of memory.`
          : errors.length
            ? "Valid and it fits, but not on this system."
            : "Valid configuration, and it fits in every IPU's memory.";
      stats.replaceChildren(
        stat("valid", plan.valid ? "yes" : "no", plan.valid ? "ok" : "bad"),
        stat("fits", plan.fits ? "yes" : "no", plan.fits ? "ok fits" : "bad fits"),
        stat("largest IPU peak", bytes(s.peakBytes)),
        stat("capacity per IPU", bytes(s.capacityBytes)),
        stat("IPUs reserved", s.ipusReserved),
      );
      list.replaceChildren(
        ...items.map((i) => {
          const line = editorLine(sourceOf(plan, a.graph, i.node));
          return h("li", { class: `issue ${i.level}`, "data-code": i.code }, [
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
      const over = (plan.memory?.ipus ?? []).filter((m) => !m.fits);
      largest.replaceChildren(
        ...over.map((m) =>
          h("section", { class: "largest" }, [
            h("h3", { text: `IPU ${m.ipu}: needs ${bytes(m.peakBytes)} at its peak (step ${m.peakStep}), has ${bytes(plan.memory.capacityBytes)} — the largest tensors there` }),
            h("table", { class: "table largest-table" }, [
              h("thead", {}, [h("tr", {}, ["tensor", "class", "bytes"].map((t) => h("th", { text: t, scope: "col" })))]),
              h("tbody", {}, (m.largest ?? []).map((t) => h("tr", {}, [t.name, t.class, bytes(t.bytes)].map((x) => h("td", { text: x }))))),
            ]),
          ]),
        ),
      );
    },
  };
}
