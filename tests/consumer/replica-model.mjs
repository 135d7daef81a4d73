// A user's model module for ReplicaWorkers (ipu-playground/replicas.mjs): every worker
// imports it and calls its default export to build the same training model (seeded), as
// the main thread does for the one-worker reference.
import { manualSeed, nn, poptorch } from "ipu-playground";
import { Classifier } from "./poptorch-models.mjs";

/** Classifier's layers with dropout between them: each replica draws its own masks. */
class DropClassifier extends nn.Module {
  constructor() {
    super();
    this.fc1 = new nn.Linear(3, 5);
    this.drop = new nn.Dropout(0.5);
    this.fc2 = new nn.Linear(5, 2);
  }
  forward(x, y) {
    const logits = this.fc2.forward(this.drop.forward(this.fc1.forward(x).tanh()));
    return [logits, logits.crossEntropy(y)];
  }
}

/** Classifier with a buffer each forward adds its micro-batch's input sum to (data dependent:
 * with `broadcastBuffers(false)` each replica's own), as docs/user_guide/buffers.py's counter. */
class SeenClassifier extends Classifier {
  constructor() {
    super(3, 5);
    this.registerBuffer("seen", [0], []);
  }
  forward(x, y) {
    this.updateBuffer("seen", this.buffer("seen").add(x.sum()));
    return super.forward(x, y);
  }
}

/**
 * `{ replicas, accumulation, iterations, reduction: "mean" | "sum", grouped, dropout, hidden, buffer, broadcastBuffers, unseeded, failReplica }`:
 * Classifier (3 → `hidden` (5) → 2; with `dropout`, dropout 0.5 after the hidden layer) under SGD with momentum; `grouped` gives fc2.bias one value per
 * pair of replicas (Consecutive groups of 2); `buffer` adds SeenClassifier's buffer `seen`, with
 * `broadcastBuffers` (default false) as the option; `failReplica` makes the worker running that
 * replica fail in its second step (a worker that throws).
 */
export default function build({ replicas = 4, accumulation = 2, iterations = 2, reduction = "mean", grouped = false, dropout = false, hidden = 5, buffer = false, broadcastBuffers = false, unseeded = false, failReplica } = {}) {
  manualSeed(unseeded ? Math.floor(Math.random() * 1e9) : 7);
  const net = buffer ? new SeenClassifier() : dropout ? new DropClassifier() : new Classifier(3, hidden);
  const opts = new poptorch.Options().deviceIterations(iterations).replicationFactor(replicas);
  if (buffer) opts.broadcastBuffers(broadcastBuffers);
  opts.Training.gradientAccumulation(accumulation);
  opts.Training.accumulationAndReplicationReductionType(reduction === "sum" ? poptorch.ReductionType.Sum : poptorch.ReductionType.Mean);
  const model = poptorch.trainingModel(net, opts, new poptorch.optim.SGD(net.parameters(), { lr: 0.1, momentum: 0.9 }));
  if (grouped) model.replicaGrouping("fc2.bias", poptorch.CommGroupType.Consecutive, 2, poptorch.VariableRetrievalMode.AllReplicas);
  if (failReplica !== undefined) {
    const [begin, contribute] = [model.beginCall.bind(model), model.contribute.bind(model)];
    let calls = 0;
    model.beginCall = (inputs) => {
      calls++;
      return begin(inputs);
    };
    model.contribute = () => {
      const [lo, hi] = model.localReplicas;
      if (lo <= failReplica && failReplica < hi && calls === 2) throw new RangeError(`replica ${failReplica} failed on purpose`);
      return contribute();
    };
  }
  return model;
}
