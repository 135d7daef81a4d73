// Preset "mlp-pipelined": An MLP in four Blocks, pipelined over four IPUs. (index.js lists the presets.)

const MLP_PIPELINED = `import { nn, poptorch, block } from "ipu-playground";

// An MLP cut into four Blocks, one per IPU, trained as PopTorch
// trains it. With PopTorch's default PipelinedExecution each
// switch of IPU starts a pipeline stage; training adds the
// backward stages (2F − 1 = 7 in all), so gradient accumulation
// must be at least 7 (try 4 in the options).
class MLP extends nn.Module {
  constructor(width) {
    super();
    this.fc1 = new nn.Linear(784, width);
    this.fc2 = new nn.Linear(width, width);
    this.fc3 = new nn.Linear(width, width);
    this.head = new nn.Linear(width, 10);
  }

  forward(x, labels) {
    const h1 = block("embed", 0, () => this.fc1.forward(x).relu());
    const h2 = block("hidden1", 1, () => this.fc2.forward(h1).relu());
    const h3 = block("hidden2", 2, () => this.fc3.forward(h2).relu());
    return block("head", 3, () => {
      const logits = this.head.forward(h3);
      // A training model returns its loss.
      return [logits, logits.crossEntropy(labels)];
    });
  }
}

// \`options\`: a poptorch.Options made from the options panel;
// \`half\`: its float16 switch.
export default ({ options, half }) => {
  const net = new MLP(512);
  // float16 as PopTorch has it: model.half(), and float16 inputs.
  if (half) net.half();
  const adam = new poptorch.optim.Adam(net.parameters(), { lr: 0.001 });
  return {
    model: poptorch.trainingModel(net, options, adam),
    // One micro-batch; the page calls model.plan() with the
    // combined batch (× device iterations × replicas ×
    // gradient accumulation), as poptorch.DataLoader gives it.
    inputs: [
      { name: "x", shape: [32, 784], dtype: half ? "float16" : "float32" },
      { name: "labels", shape: [32], dtype: "int32" },
    ],
  };
};
`;

export default {
  id: "mlp-pipelined",
  title: "MLP pipelined over 4 IPUs",
  code: MLP_PIPELINED,
  options: { Training: { gradientAccumulation: 8 }, deviceIterations: 1 },
  ipus: 4,
  expect: { ipus: [0, 1, 2, 3] },
};
