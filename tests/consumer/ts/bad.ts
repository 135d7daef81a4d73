// Calls the .d.ts must reject (tests/node/poptorch-types.test.mjs expects each error).
import { nn, poptorch, type HostTensorInput } from "ipu-playground";

new poptorch.Options().deviceIterations("2");
new poptorch.Options().outputMode("everything");
poptorch.trainingModel(new nn.Linear(2, 2), { deviceIterations: 2 });
const x: HostTensorInput = { shape: [2], data: "12" };
new poptorch.Stage("a", 3);
export { x };
