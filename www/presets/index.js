// The editor's presets: code written against the package's JS API, the options each
// starts with (the planner's Options JSON, merged over the defaults) and the IPUs in the
// system (`ipus`). `expect` is what the page tests check: the IPUs the assignment view shows.

const REVGNN = `// RevGNN on a Planetoid graph: the model of PyG's
// examples/rev_gnn.py — lin1 → layers × GroupAddRev(LayerNorm
// → ReLU → shared dropout → SAGEConv) → LayerNorm → ReLU →
// Dropout → lin2 — trained in this tab (Training view).
//
// What you can change here today: the hyper-parameters below,
// which configure the engine's built-in RevGNN trainer.
// Writing the model itself, with nn.SAGEConv,
// datasets.Planetoid and poptorch.trainingModel, comes with
// the PopTorch-style API (issue #10). Pick the dataset in the
// Training view.

export default {
  revgnn: {
    layers: 7,        // GroupAddRev layers (activation memory stays flat with depth)
    hidden: 160,      // channels, split over the groups
    groups: 2,
    dropout: 0.5,
    lr: 0.003,        // Adam
    parts: 10,        // RandomNodeLoader parts per epoch
    seed: 0,
  },
};
`;

const MLP_PIPELINED = `import { nn, block } from "ipu-playground";

// An MLP cut into four Blocks, one per IPU, trained with a
// cross-entropy loss. With PopTorch's default PipelinedExecution
// each switch of IPU starts a pipeline stage; training adds the
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
      // As in PopTorch, a training model returns its loss.
      return [logits, logits.crossEntropy(labels)];
    });
  }
}

export default {
  model: new MLP(512),
  inputs: [
    { name: "x", shape: [32, 784] },
    { name: "labels", shape: [32], dtype: "int32" },
  ],
  training: true, // planned as poptorch.trainingModel: the scalar output is the loss
  optimizer: "adam",
};
`;

const TRANSFORMER = `import { nn, beginBlock } from "ipu-playground";

// A small transformer language model: 4 layers of self-attention
// + MLP, then a head over the vocabulary. Each layer starts a Block
// (beginBlock: what follows stays in it); which IPU and which
// execution phase runs each Block is set in the options panel
// (Execution strategy → phases), as poptorch.SerialPhasedExecution
// and ParallelPhasedExecution take it.
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
    const scores = this.q.forward(x).matmul(this.k.forward(x).transpose(1, 2)).scale(1 / Math.sqrt(this.d));
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
    return h.add(this.fc2.forward(this.fc1.forward(this.ln2.forward(h)).gelu()));
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

export default {
  model: new Transformer(64, 4, 1000),
  inputs: [
    { name: "x", shape: [8, 32, 64] },
    { name: "targets", shape: [8 * 32], dtype: "int32" },
  ],
  training: true,
  optimizer: "adam",
};
`;

const REPLICATED = `import { nn, block } from "ipu-playground";

// A model on 2 IPUs, replicated 4 times (Replication factor in
// the options): every replica holds its own copy of the weights
// and takes its share of each batch, so 2 × 4 = 8 IPUs are used.
class Net extends nn.Module {
  constructor() {
    super();
    this.encoder = new nn.Linear(128, 256);
    this.decoder = new nn.Linear(256, 16);
  }
  forward(x) {
    const h = block("encoder", 0, () => this.encoder.forward(x).gelu());
    return block("decoder", 1, () => this.decoder.forward(h));
  }
}

export default ({ options }) => ({
  model: new Net(),
  inputs: [{ name: "x", shape: [64, 128] }],
  training: false,
});
`;

const BUFFER_COUNTER = `import { nn, constant } from "ipu-playground";

// A counter kept in a registered buffer, updated in place on
// every call (PopTorch semantics: a buffer must be changed in
// place; a plain tensor attribute would be frozen as a constant
// and never count). The graph shows the buffer_update node.
class Counter extends nn.Module {
  constructor() {
    super();
    this.registerBuffer("count", [0], [1]);
    this.fc = new nn.Linear(8, 8);
  }
  forward(x) {
    const next = this.buffer("count").add(constant([1], [1]));
    this.updateBuffer("count", next);
    return this.fc.forward(x).add(next);
  }
}

export default { model: new Counter(), inputs: [{ name: "x", shape: [4, 8] }] };
`;

// Two phases of two stages each, on IPUs 0 and 1 (phased execution keeps every tensor class
// in Streaming Memory by default).
const TRANSFORMER_SERIAL = {
  type: "serialPhased",
  phases: [
    { stages: [{ blocks: ["layer0"], ipu: 0 }, { blocks: ["layer1"], ipu: 1 }] },
    { stages: [{ blocks: ["layer2"], ipu: 0 }, { blocks: ["layer3"], ipu: 1 }] },
  ],
};

// Parallel phases alternate between the even and the odd IPUs.
const TRANSFORMER_PARALLEL = {
  type: "parallelPhased",
  phases: [0, 1, 2, 3].map((i) => ({ stages: [{ blocks: [`layer${i}`], ipu: i % 2 }] })),
};

export const PRESETS = Object.freeze([
  { id: "revgnn", title: "RevGNN on PubMed (train it)", code: REVGNN, options: {}, ipus: 1, expect: { ipus: [0] } },
  {
    id: "mlp-pipelined",
    title: "MLP pipelined over 4 IPUs",
    code: MLP_PIPELINED,
    options: { Training: { gradientAccumulation: 8 }, deviceIterations: 1 },
    ipus: 4,
    expect: { ipus: [0, 1, 2, 3] },
  },
  {
    id: "transformer-serial",
    title: "Transformer, serial phased",
    code: TRANSFORMER,
    options: { executionStrategy: TRANSFORMER_SERIAL },
    ipus: 2,
    expect: { ipus: [0, 1] },
  },
  {
    id: "transformer-parallel",
    title: "Transformer, parallel phased",
    code: TRANSFORMER,
    options: { executionStrategy: TRANSFORMER_PARALLEL },
    ipus: 2,
    expect: { ipus: [0, 1] },
  },
  { id: "replicated", title: "Replicated model (2 IPUs × 4)", code: REPLICATED, options: { replicationFactor: 4, deviceIterations: 2 }, ipus: 8, expect: { ipus: [0, 1], used: 8 } },
  { id: "buffer-counter", title: "Buffer counter (in-place update)", code: BUFFER_COUNTER, options: {}, ipus: 1, expect: { ipus: [0] } },
]);

export const DEFAULT_PRESET = "revgnn";

export function presetById(id) {
  return PRESETS.find((p) => p.id === id) ?? null;
}
