// The Graph view's side panel: what the selected op or scope is. An op: its output shape,
// scope, source line (a link to the editor), placement (IPU, stage, phase), the ops it reads
// and the ops that read it. A scope: its op count, placement span and the ops it holds by kind.
import { h } from "../dom.js";
import { PLACEMENT_KEYS } from "../../plan/adapter.js";
import { keyShares, opsUnder } from "./model.js";
import { placementText } from "./render.js";

const LIST_MAX = 12;
const KEY_TITLES = { ipu: "IPU", stage: "Stage", phase: "Phase" };

/**
 * Fills `box` for `selected` ({ kind: "op", index } | { kind: "group", id } | null).
 * `onSelect(index)` goes to an op, `onToggle(id)` expands or collapses a scope,
 * `onGoToLine(line)` shows a line of the editor, `onClose()` clears the selection. Hidden
 * when nothing is selected.
 */
export function showDetails(box, tree, selected, { expanded, onSelect, onToggle, onGoToLine, onClose }) {
  box.replaceChildren();
  box.hidden = !selected;
  if (!selected) return;
  box.append(h("button", { type: "button", class: "close", "aria-label": "Close the details", title: "Close", text: "×", onclick: onClose }));
  const row = (label, value) => h("div", { class: "kv" }, [h("dt", { text: label }), h("dd", {}, [value])]);
  if (selected.kind === "op") {
    const n = tree.byIndex.get(selected.index);
    const opLink = (i) => {
      const m = tree.byIndex.get(i);
      return h("li", {}, [h("button", { type: "button", class: "link", text: `%${i} ${m.op}`, title: m.scope, onclick: () => onSelect(i) })]);
    };
    const list = (indices) => {
      if (!indices.length) return h("span", { class: "muted", text: "none" });
      const ul = h("ul", { class: "op-list" }, indices.slice(0, LIST_MAX).map(opLink));
      if (indices.length > LIST_MAX) ul.append(h("li", { class: "muted", text: `and ${indices.length - LIST_MAX} more` }));
      return ul;
    };
    const source = n.line
      ? h("button", { type: "button", class: "link", id: "graph-detail-line", text: `line ${n.line}`, title: n.source, onclick: () => onGoToLine?.(n.line) })
      : h("span", { class: n.source ? "" : "muted", text: n.source || "none" });
    box.append(
      h("h4", { text: `%${n.index} ${n.op}` }),
      h("dl", {}, [
        row("Shape", h("code", { text: n.shape || "–" })),
        row("Scope", h("span", { text: n.scope || "(top level)" })),
        row("Source", source),
        ...PLACEMENT_KEYS.map((k) => row(KEY_TITLES[k], h("span", { "data-key": k, text: n.place[k] === null ? "–" : String(n.place[k]) }))),
        row("Reads", list(n.inputs)),
        row("Read by", list(tree.users.get(n.index) ?? [])),
      ]),
    );
    return;
  }
  const g = tree.groups.get(selected.id);
  const kinds = new Map();
  for (const i of opsUnder(g)) {
    const op = tree.byIndex.get(i).op.split(" ")[0];
    kinds.set(op, (kinds.get(op) ?? 0) + 1);
  }
  const top = [...kinds.entries()].sort((a, b) => b[1] - a[1]);
  const item = { kind: "group", group: g };
  const open = expanded.has(g.id);
  box.append(
    h("h4", { text: g.label ?? g.id }),
    h("dl", {}, [
      row("Ops", h("span", { text: String(g.count) })),
      ...PLACEMENT_KEYS.map((k) => row(KEY_TITLES[k], h("span", { "data-key": k, text: placementText(keyShares(tree, item, k), k) }))),
      row("Kinds", h("span", { text: top.slice(0, 8).map(([k, c]) => `${k} ×${c}`).join(", ") + (top.length > 8 ? ", …" : "") })),
    ]),
    h("button", { type: "button", id: "graph-detail-toggle", text: open ? "Collapse" : "Expand", onclick: () => onToggle(g.id) }),
  );
}
