// The package as the editor's code imports it ("ipu-playground" is pointed here, see
// usercode.js): the npm package's API unchanged, except that
// - poptorch.trainingModel, model.setOptimizer and the poptorch.optim classes note which
//   optimizer each wrapped model trains with (engine/optimizers.js), so that the plan counts
//   its state;
// - datasets.Planetoid fetched from a URL is kept for the worker's next analyses (each edit
//   runs the code again; the served files do not change while the page is open).
import * as base from "../pkg/ipu_playground.js";
import { noteOptimizer, noteModel } from "./optimizers.js";

export * from "../pkg/ipu_playground.js";

const optim = {};
for (const [name, Base] of Object.entries(base.poptorch.optim)) {
  // A subclass: instanceof, the package's checks and every method stay the package's.
  optim[name] = {
    [name]: class extends Base {
      constructor(params, attributes) {
        super(params, attributes);
        noteOptimizer(this, name, attributes);
      }
    },
  }[name];
}

export function trainingModel(model, options, optimizer) {
  const wrapped = base.trainingModel(model, options, optimizer);
  noteModel(wrapped, optimizer);
  return wrapped;
}

const setOptimizer = base.PoplarExecutor.prototype.setOptimizer;
if (!setOptimizer.__notes) {
  base.PoplarExecutor.prototype.setOptimizer = Object.assign(
    function (optimizer) {
      const r = setOptimizer.call(this, optimizer);
      noteModel(this, optimizer);
      return r;
    },
    { __notes: true },
  );
}

export const poptorch = Object.freeze({ ...base.poptorch, trainingModel, optim: Object.freeze(optim) });

// The last few datasets fetched from a URL, by name, URL and options.
const planetoids = new Map();
const KEEP_PLANETOIDS = 3;

function Planetoid(name, source, options) {
  if (typeof source !== "string") return base.datasets.Planetoid(name, source, options);
  let key;
  try {
    key = JSON.stringify([name, source, options ?? null]);
  } catch {
    return base.datasets.Planetoid(name, source, options);
  }
  if (!planetoids.has(key)) {
    const p = Promise.resolve(base.datasets.Planetoid(name, source, options));
    p.catch(() => planetoids.delete(key));
    planetoids.set(key, p);
    while (planetoids.size > KEEP_PLANETOIDS) planetoids.delete(planetoids.keys().next().value);
  }
  return planetoids.get(key);
}

export const datasets = base.datasets ? Object.freeze({ ...base.datasets, Planetoid }) : undefined;
