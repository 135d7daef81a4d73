// The transformer both transformer presets train (transformer-serial.js, transformer-parallel.js).

export const TRANSFORMER_MODEL = `// A small transformer language model: 4 layers of self-attention
// + MLP, then a head over the vocabulary. Each layer starts a
// Block (beginBlock: what follows stays in it).
class Attention extends nn.Module {
  constructor(d) {
    super();
    this.d = d;
    this.q = new nn.Linear(d, d);
    this.k = new nn.Linear(d, d);
    this.v = new nn.Linear(d, d);
    this.out = new nn.Linear(d, d);
  }
  forward(x) {
    const scores = this.q.forward(x)
      .matmul(this.k.forward(x).transpose(1, 2))
      .scale(1 / Math.sqrt(this.d));
    return this.out.forward(scores.softmax(-1).matmul(this.v.forward(x)));
  }
}

class Layer extends nn.Module {
  constructor(d) {
    super();
    this.ln1 = new nn.LayerNorm(d);
    this.attn = new Attention(d);
    this.ln2 = new nn.LayerNorm(d);
    this.fc1 = new nn.Linear(d, 4 * d);
    this.fc2 = new nn.Linear(4 * d, d);
  }
  forward(x) {
    const h = x.add(this.attn.forward(this.ln1.forward(x)));
    const mlp = this.fc2.forward(this.fc1.forward(this.ln2.forward(h)).gelu());
    return h.add(mlp);
  }
}

class Transformer extends nn.Module {
  constructor(d, n, vocab) {
    super();
    this.d = d;
    this.layers = new nn.ModuleList(Array.from({ length: n }, () => new Layer(d)));
    this.head = new nn.Linear(d, vocab);
  }
  forward(x, targets) {
    let h = x;
    for (let i = 0; i < this.layers.length; i++) {
      beginBlock(\`layer\${i}\`);
      h = this.layers.get(i).forward(h);
    }
    // Next-token loss over every position (batch × sequence rows).
    return this.head.forward(h.reshape([-1, this.d])).crossEntropy(targets);
  }
}

// One micro-batch; float16 inputs for a model.half() model.
const inputsOf = (half) => [
  { name: "x", shape: [8, 32, 64], dtype: half ? "float16" : "float32" },
  { name: "targets", shape: [8 * 32], dtype: "int32" },
];
`;

export const TRANSFORMER_MODEL_PY = `import math

import torch
import poptorch
from playground import options, half


# A small transformer language model: 4 layers of self-attention
# + MLP, then a head over the vocabulary. Each layer starts a
# Block (poptorch.BeginBlock: what follows stays in it).
class Attention(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.d = d
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.out = torch.nn.Linear(d, d)

    def forward(self, x):
        scores = self.q(x) @ self.k(x).transpose(1, 2) / math.sqrt(self.d)
        return self.out(scores.softmax(-1) @ self.v(x))


class Layer(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.attn = Attention(d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(h))))


class Transformer(torch.nn.Module):
    def __init__(self, d, n, vocab):
        super().__init__()
        self.d = d
        self.layers = torch.nn.ModuleList(
            [poptorch.BeginBlock(Layer(d), f"layer{i}") for i in range(n)])
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, x, targets):
        h = x
        for layer in self.layers:
            h = layer(h)
        # Next-token loss over every position (batch x sequence rows).
        logits = self.head(h.reshape(-1, self.d))
        return torch.nn.functional.cross_entropy(logits, targets)


# One micro-batch; float16 inputs for a model.half() model.
inputs = {
    "x": torch.empty(8, 32, 64, dtype=torch.half if half else torch.float),
    "targets": torch.empty(8 * 32, dtype=torch.long),
}
`;
