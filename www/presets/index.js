// The editor's presets: code written against the package's PopTorch-style API (each builds
// its model and wraps it with poptorch.trainingModel / inferenceModel and the `options` the
// page makes from its panel), the options each starts with (the planner's Options JSON,
// merged over the defaults) and the IPUs in the system (`ipus`). `expect` is what the page
// tests check: the IPUs the assignment view shows.

// RevGNN written with the package's GNN stack (nn.SAGEConv, nn.GroupAddRev, datasets.Planetoid,
// loaders.RandomNodeLoader): PyG's examples/rev_gnn.py, as examples/rev_gnn.mjs has it.
const REVGNN = `import { nn, poptorch, datasets, loaders, manualSeed, randomMask, isTraining } from "ipu-playground";

// RevGNN on a Planetoid graph: PyG's examples/rev_gnn.py. The
// views plan one training step of the model below on one part of
// the graph, and the Training view trains it (\`train\` below;
// pick the dataset there).
export const revgnn = {
  layers: 7,      // GroupAddRev layers (activation memory stays flat with depth)
  hidden: 160,    // channels, split over the groups
  groups: 2,
  dropout: 0.5,
  lr: 0.003,      // Adam
  parts: 10,      // RandomNodeLoader parts per epoch
  seed: 0,
};

class GNNBlock extends nn.Module {
  constructor(inChannels, outChannels, dropout) {
    super();
    this.norm = new nn.LayerNorm(inChannels);
    this.conv = new nn.SAGEConv(inChannels, outChannels);
    this.dropout = dropout;
  }
  forward(x, adj, dropoutMask) {
    let h = this.norm.forward(x).relu();
    if (isTraining() && dropoutMask) h = h.dropoutWithMask(dropoutMask, this.dropout);
    return this.conv.forward(h, adj);
  }
}

class RevGNN extends nn.Module {
  constructor(inChannels, hidden, outChannels, numLayers, dropout, numGroups) {
    super();
    if (hidden % numGroups !== 0) {
      throw new Error(\`hidden size \${hidden} is not divisible by the number of groups \${numGroups}\`);
    }
    this.dropout = dropout;
    this.lin1 = new nn.Linear(inChannels, hidden);
    this.norm = new nn.LayerNorm(hidden);
    this.drop = new nn.Dropout(dropout);
    this.lin2 = new nn.Linear(hidden, outChannels);
    const c = hidden / numGroups;
    this.convs = new nn.ModuleList(Array.from({ length: numLayers },
      () => new nn.GroupAddRev(new GNNBlock(c, c, dropout), { numGroups })));
  }
  forward(x, adj, y, mask) {
    let h = this.lin1.forward(x);
    // One dropout mask shared by every layer (GroupAddRev cuts it per
    // group): the inverse recomputes exactly what the forward did.
    const dropoutMask = isTraining() && this.dropout > 0 ? randomMask(h.shape, this.dropout) : null;
    for (let i = 0; i < this.convs.length; i++) h = this.convs.get(i).forward(h, adj, dropoutMask);
    h = this.drop.forward(this.norm.forward(h).relu());
    const out = this.lin2.forward(h);
    if (y === undefined) return out; // evaluation: the logits
    // Training: the loss on the part's training nodes comes out too,
    // as PopTorch wants.
    return [out, out.crossEntropy(y, mask)];
  }
}

// Accuracy on each split: the share of its nodes whose top class is their label.
// (Each read of \`data.y\`, \`data.x\`, … is a fresh copy: read it once.)
function accuracy(logits, data) {
  const [n, c] = logits.shape;
  const out = logits.data;
  const labels = data.y.data;
  const hit = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    let best = 0;
    for (let k = 1; k < c; k++) if (out[i * c + k] > out[i * c + best]) best = k;
    hit[i] = best === labels[i] ? 1 : 0;
  }
  const share = (mask) => {
    let [ok, all] = [0, 0];
    mask.data.forEach((m, i) => { if (m) { all++; ok += hit[i]; } });
    return ok / Math.max(all, 1);
  };
  return { train: share(data.trainMask), val: share(data.valMask), test: share(data.testMask) };
}

// The model's inputs for one part of the graph.
const inputsOf = (part) => [
  { ...part.x, name: "x" },
  { ...part.meanAdjacency(), name: "adj" },
  { ...part.y, name: "y" },
  { ...part.trainMask, name: "mask" },
];

// \`dataset\`: the Training view's choice; \`dataUrl\`: the served
// data/ folder; \`epochs\`: set when the Training view runs this;
// \`half\`: the options panel's float16 switch.
export default async ({ options, dataset, dataUrl, epochs, half }) => {
  const { layers, hidden, groups, dropout, lr, parts, seed } = revgnn;
  manualSeed(seed);
  const graph = await datasets.Planetoid(dataset, dataUrl, { split: "full", transform: ["AddSelfLoops"] });
  const data = graph.get(0);
  const net = new RevGNN(data.numFeatures, hidden, data.numClasses, layers, dropout, groups);
  // float16: PopTorch's model.half() (the sparse features and
  // adjacency stay float32; every layer computes in float16).
  if (half) net.half();
  const adam = new poptorch.optim.Adam(net.parameters(), { lr });
  const model = poptorch.trainingModel(net, options, adam);
  // Every part padded to one size, so one compiled model serves them all.
  const loaderOptions = { numParts: parts, shuffle: true, seed: seed + 1, fixedSize: true, epochs };
  const example = new loaders.RandomNodeLoader(data, loaderOptions)[Symbol.iterator]().next().value;
  const loader = new loaders.RandomNodeLoader(data, loaderOptions);
  // Evaluation: the whole graph, no dropout, the weights training left.
  const evaluator = poptorch.inferenceModel(net);
  const whole = [data.x, data.meanAdjacency()];
  return {
    model,
    inputs: inputsOf(example),
    // The Training view: each epoch one step per part (a part with
    // no training node has no loss), then the accuracies.
    train: {
      parts: loader,
      step: (part) => (part.numTrain ? model.call(...inputsOf(part))[1].data[0] : null),
      evaluate: () => accuracy(evaluator.call(...whole), data),
    },
  };
};
`;

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

const TRANSFORMER_MODEL = `// A small transformer language model: 4 layers of self-attention
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

// Parallel phases alternate between the even and the odd IPUs (the panel's phases JSON).
const PARALLEL_PHASES = {
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
    code: TRANSFORMER_SERIAL,
    options: {},
    ipus: 2,
    expect: { ipus: [0, 1] },
  },
  {
    id: "transformer-parallel",
    title: "Transformer, parallel phased",
    code: TRANSFORMER_PARALLEL,
    options: { executionStrategy: PARALLEL_PHASES },
    ipus: 2,
    expect: { ipus: [0, 1] },
  },
  { id: "replicated", title: "Replicated model (2 IPUs × 4)", code: REPLICATED, options: { replicationFactor: 4, Training: { gradientAccumulation: 4 } }, ipus: 8, expect: { ipus: [0, 1], used: 8 } },
  { id: "buffer-counter", title: "Buffer counter (in-place update)", code: BUFFER_COUNTER, options: {}, ipus: 1, expect: { ipus: [0] } },
]);

export const DEFAULT_PRESET = "revgnn";

export function presetById(id) {
  return PRESETS.find((p) => p.id === id) ?? null;
}
