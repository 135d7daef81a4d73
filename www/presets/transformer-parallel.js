// Preset "transformer-parallel": The transformer (transformer.js) in parallel phases set in the options panel. (index.js lists the presets.)
import { TRANSFORMER_MODEL, TRANSFORMER_MODEL_PY } from "./transformer.js";

const TRANSFORMER_PARALLEL = `import { nn, poptorch, beginBlock } from "ipu-playground";

${TRANSFORMER_MODEL}
// Parallel phased execution, set in the options panel (Execution
// strategy → Phases): each phase on IPU 0 or 1, alternating, as
// poptorch.ParallelPhasedExecution takes it.
export default ({ options, half }) => {
  const net = new Transformer(64, 4, 1000);
  if (half) net.half(); // the panel's float16 switch
  const adam = new poptorch.optim.Adam(net.parameters(), { lr: 0.0003 });
  return { model: poptorch.trainingModel(net, options, adam), inputs: inputsOf(half) };
};
`;

// Parallel phases alternate between the even and the odd IPUs (the panel's phases JSON).
const PARALLEL_PHASES = {
  type: "parallelPhased",
  phases: [0, 1, 2, 3].map((i) => ({ stages: [{ blocks: [`layer${i}`], ipu: i % 2 }] })),
};

const TRANSFORMER_PARALLEL_PY = `${TRANSFORMER_MODEL_PY}
# Parallel phased execution, set in the options panel (Execution
# strategy -> Phases): each phase on IPU 0 or 1, alternating, as
# poptorch.ParallelPhasedExecution takes it.
net = Transformer(64, 4, 1000)
if half:
    net.half()  # the panel's float16 switch
adam = poptorch.optim.Adam(net.parameters(), lr=0.0003)
model = poptorch.trainingModel(net, options, adam)
`;

export default {
  id: "transformer-parallel",
  title: "Transformer, parallel phased",
  code: TRANSFORMER_PARALLEL,
  python: TRANSFORMER_PARALLEL_PY,
  options: { executionStrategy: PARALLEL_PHASES },
  ipus: 2,
  expect: { ipus: [0, 1] },
};
