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

// A call's inputs for several parts, one per micro-batch (with replicas,
// PopTorch's combined batch: part r is replica r's): each input an
// array of parts. One part: the part's own inputs.
const callOf = (parts) =>
  parts.length === 1 ? inputsOf(parts[0]) : inputsOf(parts[0]).map((_, i) => parts.map((p) => inputsOf(p)[i]));

// The loader's parts in groups of \`n\`, one group per call.
function* callsOf(loader, n) {
  let group = [];
  for (const part of loader) {
    group.push(part);
    if (group.length === n) {
      yield group;
      group = [];
    }
  }
}

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
  // One call takes a part per micro-batch: replicationFactor (× device
  // iterations × accumulation) of them, each replica its own parts
  // (the Training view runs the replicas on parallel workers). The
  // parts per epoch are rounded up to whole calls.
  const perCall = model.combinedBatchFactor;
  const numParts = Math.ceil(parts / perCall) * perCall;
  // Every part padded to one size, so one compiled model serves them all.
  const loaderOptions = { numParts, shuffle: true, seed: seed + 1, fixedSize: true, epochs };
  const example = new loaders.RandomNodeLoader(data, loaderOptions)[Symbol.iterator]().next().value;
  const loader = new loaders.RandomNodeLoader(data, loaderOptions);
  // Evaluation: the whole graph, no dropout, the weights training left.
  const evaluator = poptorch.inferenceModel(net);
  const whole = [data.x, data.meanAdjacency()];
  return {
    model,
    inputs: inputsOf(example),
    // The Training view: each epoch one step per group of parts (a
    // group with no training node has no loss), then the accuracies.
    // With replica workers model.call gives a promise: await it.
    train: {
      parts: { [Symbol.iterator]: () => callsOf(loader, perCall) },
      step: async (group) => {
        if (!group.some((p) => p.numTrain)) return null;
        const [, loss] = await model.call(...callOf(group));
        // One loss per replica (a part without training nodes has none).
        const losses = Array.from(loss.data).filter(Number.isFinite);
        return losses.reduce((a, b) => a + b, 0) / losses.length;
      },
      evaluate: () => accuracy(evaluator.call(...whole), data),
    },
  };
};
`;

const REVGNN_PY = `# RevGNN on a Planetoid graph: PyG's examples/rev_gnn.py, adapted
# only where this tab needs it (each change is marked "tab:"). The
# views plan one training step of the model below on one part of
# the graph, and the Training view trains it (\`train\` below; pick
# the dataset there).
import math

import torch
import torch.nn.functional as F
from torch.nn import Dropout, LayerNorm, Linear

import poptorch
import torch_geometric.transforms as T
from torch_geometric.datasets import Planetoid
from torch_geometric.loader import RandomNodeLoader
from torch_geometric.nn import GroupAddRev, SAGEConv

# tab: what the page gives the code (the options panel, the
# Training view's dataset and epochs) and the engine's dropout mask.
from playground import options, half, dataset, epochs, random_mask

revgnn = dict(
    layers=7,      # GroupAddRev layers (activation memory stays flat with depth)
    hidden=160,    # channels, split over the groups
    groups=2,
    dropout=0.5,
    lr=0.003,      # Adam
    parts=10,      # RandomNodeLoader parts per epoch
    seed=0,
)


class GNNBlock(torch.nn.Module):
    def __init__(self, in_channels, out_channels, dropout):
        super().__init__()
        self.norm = LayerNorm(in_channels, elementwise_affine=True)
        self.conv = SAGEConv(in_channels, out_channels)
        self.dropout = dropout

    def forward(self, x, adj, dropout_mask=None):
        x = self.norm(x).relu()
        if self.training and dropout_mask is not None:
            # tab: the shared mask applied by the engine's op
            x = x.dropout_with_mask(dropout_mask, self.dropout)
        # tab: the (mean) adjacency matrix where PyG has edge_index
        return self.conv(x, adj)


class RevGNN(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels, num_layers,
                 dropout, num_groups=2):
        super().__init__()
        self.dropout = dropout
        self.lin1 = Linear(in_channels, hidden_channels)
        self.lin2 = Linear(hidden_channels, out_channels)
        self.norm = LayerNorm(hidden_channels, elementwise_affine=True)
        self.drop = Dropout(dropout)  # tab: F.dropout as a module
        assert hidden_channels % num_groups == 0
        self.convs = torch.nn.ModuleList()
        for _ in range(num_layers):
            conv = GNNBlock(hidden_channels // num_groups,
                            hidden_channels // num_groups, dropout)
            self.convs.append(GroupAddRev(conv, num_groups=num_groups))

    def forward(self, x, adj, y=None, mask=None):
        x = self.lin1(x)
        # One dropout mask shared by every layer (GroupAddRev cuts it per
        # group): the inverse recomputes exactly what the forward did.
        mask_ = None
        if self.training and self.dropout > 0:
            mask_ = random_mask(x.shape, self.dropout)  # tab
        for conv in self.convs:
            x = conv(x, adj, mask_)
        x = self.drop(self.norm(x).relu())
        out = self.lin2(x)
        if y is None:
            return out  # evaluation: the logits
        # tab: a training model returns its loss (PopTorch); the loss
        # on the part's training nodes, by mask
        return out, out.cross_entropy(y, mask)


torch.manual_seed(revgnn["seed"])
# tab: the raw files the page serves (the root is not read)
data = Planetoid("data", dataset, split="full", transform=T.AddSelfLoops())[0]
net = RevGNN(data.num_features, revgnn["hidden"], data.num_classes,
             revgnn["layers"], revgnn["dropout"], revgnn["groups"])
# float16: PopTorch's model.half() (the sparse features and
# adjacency stay float32; every layer computes in float16).
if half:
    net.half()
optimizer = poptorch.optim.Adam(net.parameters(), lr=revgnn["lr"])
model = poptorch.trainingModel(net, options, optimizer)
# One call takes a part per micro-batch: replication_factor (x device
# iterations x accumulation) of them, each replica its own parts. The
# parts per epoch are rounded up to whole calls.
per_call = model.combinedBatchFactor  # tab: the engine's combined batch
num_parts = -(-revgnn["parts"] // per_call) * per_call
# Every part padded to one size, so one compiled model serves them all.
loader_args = dict(num_parts=num_parts, shuffle=True,
                   seed=revgnn["seed"] + 1, fixed_size=True, epochs=epochs)
loader = RandomNodeLoader(data, **loader_args)
# Evaluation: the whole graph, no dropout, the weights training left.
evaluator = poptorch.inferenceModel(net)


def inputs_of(part):
    return {"x": part.x, "adj": part.mean_adjacency(), "y": part.y,
            "mask": part.train_mask}


def call_of(group):
    """A call's inputs for a group of parts: each input a list of parts,
    one per micro-batch (part r is replica r's); one part: its inputs."""
    if len(group) == 1:
        return list(inputs_of(group[0]).values())
    per_part = [list(inputs_of(p).values()) for p in group]
    return [list(column) for column in zip(*per_part)]


def calls_of(parts, n):
    """The loader's parts in groups of n, one group per call."""
    group = []
    for part in parts:
        group.append(part)
        if len(group) == n:
            yield group
            group = []


class Calls:
    """Each epoch (each iteration) the loader's parts in calls."""
    def __iter__(self):
        return calls_of(loader, per_call)


def step(group):
    if not any(p.num_train for p in group):
        return None  # parts with no training node have no loss
    out, loss = model(*call_of(group))
    # One loss per replica (a part without training nodes has none).
    values = loss.tolist()
    values = values if isinstance(values, list) else [values]
    losses = [v for v in values if math.isfinite(v)]
    return sum(losses) / len(losses)


def evaluate():
    logits = evaluator(data.x, data.mean_adjacency()).tolist()
    pred = [max(range(len(row)), key=row.__getitem__) for row in logits]
    y = data.y.tolist()
    accs = {}
    for split in ("train", "val", "test"):
        mask = getattr(data, f"{split}_mask").tolist()
        hits = [p == t for p, t, m in zip(pred, y, mask) if m]
        accs[split] = sum(hits) / max(len(hits), 1)
    return accs


# One micro-batch (a part) for the plan, and the Training view's loop:
# each epoch one step per group of parts, then the accuracies.
inputs = inputs_of(next(iter(RandomNodeLoader(data, **loader_args))))
train = {"parts": Calls(), "step": step, "evaluate": evaluate}
`;

export default { id: "revgnn", title: "RevGNN on PubMed (train it)", code: REVGNN, python: REVGNN_PY, options: {}, ipus: 1, expect: { ipus: [0] } };
