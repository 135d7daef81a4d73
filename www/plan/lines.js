// Where in the editor's code a plan's error or warning belongs: the line of the node it names
// (plan/adapter.js sourceOf), or, for one about an option the code set itself, the line of
// that setter (the analysis's `optionsFromCode`). Used by the editor's markers and by the
// Fit & errors view's "Go to line".
import { sourceOf, editorLine } from "./adapter.js";
import { fieldOfDiagnostic } from "../options.js";

/** The 1-based editor line of `item` ({ code, message, node }) in analysis `a`, or null. */
export function diagnosticLine(a, item) {
  const own = editorLine(sourceOf(a.plan, a.graph, item.node), a.file);
  if (own) return own;
  const fromCode = new Map((a.optionsFromCode ?? []).filter((o) => o.line).map((o) => [o.field, o.line]));
  const f = fieldOfDiagnostic(item);
  return fromCode.get(f) ?? (f === "phases" || f === "autoStage" ? fromCode.get("strategy") : undefined) ?? null;
}
