// Preset "transformer-serial": The transformer (transformer.js) in serial phases set by the code. (index.js lists the presets.)
import { TRANSFORMER_MODEL, TRANSFORMER_MODEL_PY } from "./transformer.js";

const TRANSFORMER_SERIAL = `import { nn, poptorch, beginBlock } from "ipu-playground";

${TRANSFORMER_MODEL}
export default ({ options, half }) => {
  // Serial phased execution, set here in the code: two phases of
  // two stages, on IPUs 0 and 1; a phase runs after the previous
  // one, its tensors in Streaming Memory in between. The code runs
  // after the page builds \`options\` from the panel, so what it
  // sets wins (the panel marks the fields it overrides).
  options.setExecutionStrategy(new poptorch.SerialPhasedExecution(
    new poptorch.Phase(new poptorch.Stage("layer0"), new poptorch.Stage("layer1")).ipus(0, 1),
    new poptorch.Phase(new poptorch.Stage("layer2"), new poptorch.Stage("layer3")).ipus(0, 1),
  ));
  const net = new Transformer(64, 4, 1000);
  if (half) net.half(); // the panel's float16 switch
  const adam = new poptorch.optim.Adam(net.parameters(), { lr: 0.0003 });
  return { model: poptorch.trainingModel(net, options, adam), inputs: inputsOf(half) };
};
`;

const TRANSFORMER_SERIAL_PY = `${TRANSFORMER_MODEL_PY}
# Serial phased execution, set here in the code: two phases of
# two stages, on IPUs 0 and 1; a phase runs after the previous
# one, its tensors in Streaming Memory in between. The code runs
# after the page builds \`options\` from the panel, so what it
# sets wins (the panel marks the fields it overrides).
options.setExecutionStrategy(poptorch.SerialPhasedExecution(
    poptorch.Phase(poptorch.Stage("layer0"), poptorch.Stage("layer1")).ipus(0, 1),
    poptorch.Phase(poptorch.Stage("layer2"), poptorch.Stage("layer3")).ipus(0, 1),
))
net = Transformer(64, 4, 1000)
if half:
    net.half()  # the panel's float16 switch
adam = poptorch.optim.Adam(net.parameters(), lr=0.0003)
model = poptorch.trainingModel(net, options, adam)
`;

export default {
  id: "transformer-serial",
  title: "Transformer, serial phased",
  code: TRANSFORMER_SERIAL,
  python: TRANSFORMER_SERIAL_PY,
  options: {},
  ipus: 2,
  expect: { ipus: [0, 1] },
};
