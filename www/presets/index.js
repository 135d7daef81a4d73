// The editor's presets: code written against the package's PopTorch-style API (each builds
// its model and wraps it with poptorch.trainingModel / inferenceModel and the `options` the
// page makes from its panel), the options each starts with (the planner's Options JSON,
// merged over the defaults) and the IPUs in the system (`ipus`). `expect` is what the page
// tests check: the IPUs the assignment view shows.
// Each preset is its own file, its default export `{ id, title, code, options, ipus, half?, expect }`
// (`half`: the float16 switch it starts with).
import revgnn from "./revgnn.js";
import mlpPipelined from "./mlp-pipelined.js";
import transformerSerial from "./transformer-serial.js";
import transformerParallel from "./transformer-parallel.js";
import replicated from "./replicated.js";
import bufferCounter from "./buffer-counter.js";
import bertLarge from "./bert-large.js";
import bertBase from "./bert-base.js";
import resnet50 from "./resnet50.js";

export const PRESETS = Object.freeze([
  revgnn, mlpPipelined, transformerSerial, transformerParallel, replicated, bufferCounter, bertLarge, bertBase, resnet50,
]);

export const DEFAULT_PRESET = "revgnn";

export function presetById(id) {
  return PRESETS.find((p) => p.id === id) ?? null;
}
