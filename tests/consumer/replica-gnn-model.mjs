// A user's sparse-input (GNN) model module for ReplicaWorkers (ipu-playground/replicas.mjs):
// a SAGEConv over a graph part's adjacency (a host CSR matrix), each replica fed its own
// parts. Every worker builds the same seeded model; `graphPart(k)` makes part k.
import { manualSeed, nn, poptorch } from "ipu-playground";

export const NODES = 5;
export const FEATURES = 4;
export const CLASSES = 3;

class Gnn extends nn.Module {
  constructor() {
    super();
    this.conv = new nn.SAGEConv(FEATURES, 6);
    this.lin = new nn.Linear(6, CLASSES);
  }
  forward(x, adj, y) {
    const out = this.lin.forward(this.conv.forward(x, adj).relu());
    return [out, out.crossEntropy(y)];
  }
}

/**
 * Graph part `k`: `{ x, adj, y }`, `NODES` nodes, each row of the mean adjacency with two
 * neighbours (every part the same size, as RandomNodeLoader's fixedSize pads them), its own
 * pattern, features and labels.
 */
export function graphPart(k) {
  let s = 1234567 + 7919 * k;
  const rand = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32) * 2 - 1;
  const indptr = [0];
  const indices = [];
  for (let i = 0; i < NODES; i++) {
    const a = (i + 1 + (k % 2)) % NODES;
    const b = (i + 3 + (k % 2)) % NODES;
    indices.push(Math.min(a, b), Math.max(a, b));
    indptr.push(indices.length);
  }
  return {
    x: { shape: [NODES, FEATURES], data: Float32Array.from({ length: NODES * FEATURES }, rand) },
    adj: { layout: "csr", shape: [NODES, NODES], indptr: Int32Array.from(indptr), indices: Int32Array.from(indices), values: new Float32Array(indices.length).fill(0.5) },
    y: { shape: [NODES], data: Int32Array.from({ length: NODES }, (_, i) => (i + k) % CLASSES), dtype: "int32" },
  };
}

/** Parts `ks` as a call's inputs: the features, adjacencies and labels, each an array of parts. */
export function partInputs(ks) {
  const parts = ks.map(graphPart);
  return [parts.map((p) => p.x), parts.map((p) => p.adj), parts.map((p) => p.y)];
}

/** `{ replicas, accumulation, reduction: "mean" | "sum", optimizer: "adam" | "sgd" }`. */
export default function build({ replicas = 4, accumulation = 1, reduction = "mean", optimizer = "adam" } = {}) {
  manualSeed(3);
  const net = new Gnn();
  const opts = new poptorch.Options().replicationFactor(replicas);
  opts.Training.gradientAccumulation(accumulation);
  opts.Training.accumulationAndReplicationReductionType(reduction === "sum" ? poptorch.ReductionType.Sum : poptorch.ReductionType.Mean);
  const opt = optimizer === "sgd" ? new poptorch.optim.SGD(net.parameters(), { lr: 0.1 }) : new poptorch.optim.Adam(net.parameters(), { lr: 0.01 });
  return poptorch.trainingModel(net, opts, opt);
}
