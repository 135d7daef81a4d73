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

const MLP_PIPELINED_PY = `import torch
import poptorch
from playground import options, half

# An MLP cut into four Blocks, one per IPU, trained as PopTorch
# trains it. With PopTorch's default PipelinedExecution each
# switch of IPU starts a pipeline stage; training adds the
# backward stages (2F - 1 = 7 in all), so gradient accumulation
# must be at least 7 (try 4 in the options).
class MLP(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, width)
        self.fc2 = torch.nn.Linear(width, width)
        self.fc3 = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, 10)

    def forward(self, x, labels):
        with poptorch.Block("embed", ipu_id=0):
            h1 = self.fc1(x).relu()
        with poptorch.Block("hidden1", ipu_id=1):
            h2 = self.fc2(h1).relu()
        with poptorch.Block("hidden2", ipu_id=2):
            h3 = self.fc3(h2).relu()
        with poptorch.Block("head", ipu_id=3):
            logits = self.head(h3)
            # A training model returns its loss.
            return logits, torch.nn.functional.cross_entropy(logits, labels)


# \`options\`: a poptorch.Options made from the options panel;
# \`half\`: its float16 switch.
net = MLP(512)
# float16 as PopTorch has it: model.half(), and float16 inputs.
if half:
    net.half()
adam = poptorch.optim.Adam(net.parameters(), lr=0.001)
model = poptorch.trainingModel(net, options, adam)
# One micro-batch; the page calls model.plan() with the
# combined batch (x device iterations x replicas x
# gradient accumulation), as poptorch.DataLoader gives it.
inputs = {
    "x": torch.empty(32, 784, dtype=torch.half if half else torch.float),
    "labels": torch.empty(32, dtype=torch.long),
}
`;

export default {
  id: "mlp-pipelined",
  title: "MLP pipelined over 4 IPUs",
  code: MLP_PIPELINED,
  python: MLP_PIPELINED_PY,
  options: { Training: { gradientAccumulation: 8 }, deviceIterations: 1 },
  ipus: 4,
  expect: { ipus: [0, 1, 2, 3] },
};
