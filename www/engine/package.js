// The package as the editor's code imports it ("ipu-playground" is pointed here, see
// usercode.js): the npm package's API unchanged, except that poptorch.trainingModel,
// model.setOptimizer and the poptorch.optim classes note which optimizer each wrapped model
// trains with (engine/optimizers.js), so that the plan counts its state.
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
