// Preset "revgnn": RevGNN written with the package's GNN stack, trained in the Training view. (index.js lists the presets.)

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

export default { id: "revgnn", title: "RevGNN on PubMed (train it)", code: REVGNN, options: {}, ipus: 1, expect: { ipus: [0] } };
