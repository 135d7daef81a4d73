// Preset "buffer-counter": A counter in a registered buffer, updated in place. (index.js lists the presets.)

const BUFFER_COUNTER = `import { nn, poptorch, constant } from "ipu-playground";

// A counter kept in a registered buffer, updated in place on
// every micro-batch (PopTorch semantics: a buffer must be changed
// in place; a plain tensor attribute would be frozen as a
// constant and never count). The graph shows the buffer_update
// node, the memory view the buffer.
class Counter extends nn.Module {
  constructor() {
    super();
    this.registerBuffer("count", [0], [1]);
    this.fc = new nn.Linear(8, 8);
  }
  forward(x) {
    const count = this.buffer("count");
    const next = count.add(constant([1], [1], count.dtype));
    this.updateBuffer("count", next);
    return this.fc.forward(x).add(next);
  }
}

export default ({ options, half }) => {
  const net = new Counter();
  if (half) net.half(); // the panel's float16 switch: the counter too
  const dtype = half ? "float16" : "float32";
  const model = poptorch.inferenceModel(net, options);
  // Three calls, each of \`deviceIterations\` micro-batches of 4.
  const n = 4 * model.options.deviceIterations;
  const x = { name: "x", shape: [n, 8], dtype, data: new Float32Array(n * 8) };
  for (let call = 1; call <= 3; call++) {
    model.call(x);
    // An inference model's buffers reach the host only here.
    model.copyWeightsToHost();
    console.log(\`after call \${call}: count = \${net.stateDict().count.data[0]}\`);
  }
  return { model, inputs: [{ name: "x", shape: [4, 8], dtype }] };
};
`;

const BUFFER_COUNTER_PY = `import torch
import poptorch
from playground import options, half

# A counter kept in a registered buffer, updated in place on
# every micro-batch (PopTorch semantics: a buffer must be changed
# in place; a plain tensor attribute would be frozen as a
# constant and never count). The graph shows the buffer_update
# node, the memory view the buffer.
class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        self.count += 1
        return self.fc(x) + self.count


net = Counter()
if half:
    net.half()  # the panel's float16 switch: the counter too
dtype = torch.half if half else torch.float
model = poptorch.inferenceModel(net, options)
# Three calls, each of \`deviceIterations\` micro-batches of 4.
n = 4 * model.options.deviceIterations
x = torch.zeros(n, 8, dtype=dtype)
for call in range(1, 4):
    model(x)
    # An inference model's buffers reach the host only here.
    model.copyWeightsToHost()
    print(f"after call {call}: count = {net.state_dict()['count'][0]}")
inputs = {"x": torch.empty(4, 8, dtype=dtype)}
`;

export default { id: "buffer-counter", title: "Buffer counter (in-place update)", code: BUFFER_COUNTER, python: BUFFER_COUNTER_PY, options: {}, ipus: 1, expect: { ipus: [0] } };
