// Preset "replicated": A model on 2 IPUs replicated 4 times, with a replica-grouped weight. (index.js lists the presets.)

const REPLICATED = `import { nn, poptorch, block } from "ipu-playground";

// A model on 2 IPUs, replicated 4 times (Replication factor in
// the options): 2 × 4 = 8 IPUs. Each replica takes its share of
// each batch. The decoder's weight is replica-grouped: pairs of
// consecutive replicas ({0, 1}, {2, 3}) share one copy, trained
// on their pair's data only, so the host holds one copy per
// group.
class Net extends nn.Module {
  constructor() {
    super();
    this.encoder = new nn.Linear(128, 256);
    this.decoder = new nn.Linear(256, 16);
  }
  forward(x, labels) {
    const h = block("encoder", 0, () => this.encoder.forward(x).gelu());
    return block("decoder", 1, () => {
      const out = this.decoder.forward(h);
      return [out, out.crossEntropy(labels)];
    });
  }
}

export default ({ options, half }) => {
  const net = new Net();
  if (half) net.half(); // the panel's float16 switch
  const dtype = half ? "float16" : "float32";
  const sgd = new poptorch.optim.SGD(net.parameters(), { lr: 0.05 });
  const model = poptorch.trainingModel(net, options, sgd);
  model.replicaGrouping("decoder.weight", poptorch.CommGroupType.Consecutive, 2,
                        poptorch.VariableRetrievalMode.OnePerGroup);
  const micro = [
    { name: "x", shape: [16, 128], dtype },
    { name: "labels", shape: [16], dtype: "int32" },
  ];
  // One step on made-up data: each group's copy learns from its
  // own replicas' share of the batch.
  const { deviceIterations: d, replicationFactor: r, Training } = model.options;
  const n = 16 * d * r * Training.gradientAccumulation;
  const x = new Float32Array(n * 128).map((_, i) => Math.sin(i * 0.37));
  const labels = new Int32Array(n).map((_, i) => i % 16);
  model.call({ name: "x", shape: [n, 128], dtype, data: x },
             { name: "labels", shape: [n], data: labels });
  const w = model.getParameter("decoder.weight");
  console.log(\`decoder.weight on the host: [\${w.shape}], one copy per group\`);
  const per = w.data.length / w.shape[0];
  const copy = (g) => Array.from(w.data.subarray(g * per, (g + 1) * per));
  for (let g = 1; g < w.shape[0]; g++) {
    const a = copy(0), b = copy(g);
    const diff = Math.max(...a.map((v, i) => Math.abs(v - b[i])));
    console.log(\`after one step, group \${g}'s copy differs from group 0's by up to \${diff.toExponential(2)}\`);
  }
  return { model, inputs: micro };
};
`;

const REPLICATED_PY = `import math

import torch
import poptorch
from playground import options, half


# A model on 2 IPUs, replicated 4 times (Replication factor in
# the options): 2 x 4 = 8 IPUs. Each replica takes its share of
# each batch. The decoder's weight is replica-grouped: pairs of
# consecutive replicas ({0, 1}, {2, 3}) share one copy, trained
# on their pair's data only, so the host holds one copy per
# group.
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(128, 256)
        self.decoder = torch.nn.Linear(256, 16)

    def forward(self, x, labels):
        with poptorch.Block("encoder", ipu_id=0):
            h = torch.nn.functional.gelu(self.encoder(x))
        with poptorch.Block("decoder", ipu_id=1):
            out = self.decoder(h)
            return out, torch.nn.functional.cross_entropy(out, labels)


net = Net()
if half:
    net.half()  # the panel's float16 switch
dtype = torch.half if half else torch.float
sgd = poptorch.optim.SGD(net.parameters(), lr=0.05)
model = poptorch.trainingModel(net, options, sgd)
model.decoder.weight.replicaGrouping(poptorch.CommGroupType.Consecutive, 2,
                                     poptorch.VariableRetrievalMode.OnePerGroup)
inputs = {"x": torch.empty(16, 128, dtype=dtype),
          "labels": torch.empty(16, dtype=torch.long)}
# One step on made-up data: each group's copy learns from its
# own replicas' share of the batch.
opts = model.options
n = 16 * opts.deviceIterations * opts.replicationFactor * opts.Training.gradientAccumulation
x = torch.tensor([[math.sin((r * 128 + c) * 0.37) for c in range(128)] for r in range(n)], dtype=dtype)
labels = torch.tensor([i % 16 for i in range(n)], dtype=torch.long)
model(x, labels)
w = model.getParameter("decoder.weight")
print(f"decoder.weight on the host: {list(w.shape)}, one copy per group")
copies = w.tolist()
flat = lambda c: [v for row in c for v in row]
for g in range(1, len(copies)):
    diff = max(abs(a - b) for a, b in zip(flat(copies[0]), flat(copies[g])))
    print(f"after one step, group {g}'s copy differs from group 0's by up to {diff:.2e}")
`;

export default { id: "replicated", title: "Replicated model (2 IPUs × 4)", code: REPLICATED, python: REPLICATED_PY, options: { replicationFactor: 4, Training: { gradientAccumulation: 4 } }, ipus: 8, expect: { ipus: [0, 1], used: 8 } };
