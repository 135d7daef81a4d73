// Which poptorch.optim optimizer each wrapped model of the editor's code trains with, as the
// planner's optimizer choice (`plan(…, { optimizer })`: the state it counts per weight).
// engine/package.js notes them as the code builds and wraps; the worker reads them.
//
// The views draw `plan()` of the wrapped module rather than `model.plan()`, because
// `model.plan()` throws PopTorch's error for a plan PopTorch would refuse, and the page
// wants that plan anyway, to mark each error at its node or option field. `plan()` takes the
// optimizer as a choice, and the package's optimizers do not show every attribute (SGD's
// momentum), so the page notes what the planner needs here.

const byOptimizer = new WeakMap();
const byModel = new WeakMap();

/** The planner's choice for `cls` ("SGD", "Adam", …) built with `attrs`. */
export function choiceFor(cls, attrs) {
  const a = attrs && typeof attrs === "object" ? attrs : {};
  switch (cls) {
    case "SGD":
      return Number(a.momentum ?? 0) > 0 ? { choice: "sgdMomentum" } : { choice: "sgd" };
    case "Adam":
      return { choice: "adam" };
    case "AdamW":
      return { choice: "adamW" };
    case "LAMB":
      // Adam's two moments per weight.
      return { choice: "adam", approximate: "LAMB keeps Adam's two moments per weight; the plan counts them as Adam's" };
    case "RMSprop":
      // The squared-gradient average per weight (and more with momentum or centred).
      return { choice: "sgdMomentum", approximate: "RMSprop is counted with one state tensor per weight (its squared-gradient average), as SGD with momentum" };
    default:
      return { choice: "sgd" };
  }
}

export function noteOptimizer(optimizer, cls, attrs) {
  byOptimizer.set(optimizer, { class: cls, ...choiceFor(cls, attrs) });
}

export function noteModel(model, optimizer) {
  // No optimizer: PopTorch's default, SGD without momentum.
  byModel.set(model, optimizer === undefined || optimizer === null ? { class: "SGD", choice: "sgd" } : (byOptimizer.get(optimizer) ?? { class: "SGD", choice: "sgd" }));
}

/** { class, choice, approximate? } of a wrapped model, or null when it was not wrapped through the page's package. */
export function optimizerOf(model) {
  return byModel.get(model) ?? null;
}
