// A TypeScript user of the npm package: every namespace and the main exports, typed. It is
// only type-checked (tsc --noEmit), never run; the Node tests run the same calls.
import {
  type StateDictValue,
  nn, poptorch, trace, plan, traceMlp, defaultModel, demoModel, limits, version, block, beginBlock, constant, manualSeed,
  datasets, loaders, randomMask, isTraining,
  type HostTensor, type HostTensorInput, type Tensor, type OutputMode, type PoptorchOptimizer, type Parameter,
  type HostSparse, type PlanetoidOptions, type SparseTensor,
} from "ipu-playground";

class Net extends nn.Module {
  fc1: nn.Linear;
  fc2: InstanceType<typeof nn.Linear>;
  norm = new nn.LayerNorm(8);
  layers = new nn.ModuleList([new nn.Linear(8, 8), new nn.ReLU()]);
  constructor() {
    super();
    this.fc1 = new nn.Linear(4, 8);
    this.fc2 = new nn.Linear(8, 3);
    this.registerBuffer("steps", [0], [1]);
  }
  override forward(x: Tensor, y: Tensor): Tensor[] {
    const h: Tensor = block("b0", 0, () => this.norm.forward(this.fc1.forward(x).relu()));
    beginBlock("b1", 1);
    this.updateBuffer("steps", this.buffer("steps").add(constant([1], [1])));
    const out = this.fc2.forward(h);
    return [out, poptorch.identity_loss(out.crossEntropy(y), "mean")];
  }
}

manualSeed(0);
const net = new Net();
const params: Parameter[] = net.parameters();
const named: [string, Parameter][] = net.namedParameters();
const state: Record<string, HostTensor> = net.stateDict();
net.loadStateDict(state, true);
const first: number[] = named[0][1].shape;
const same: Net = net.half().float();

// Options, strategies, enums.
const opts = new poptorch.Options().deviceIterations(2).replicationFactor(2);
opts.Training.gradientAccumulation(4).setAutomaticLossScaling(false);
opts.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Mean);
opts.Training.setMeanAccumulationAndReplicationReductionStrategy(poptorch.MeanReductionStrategy.Post);
opts.setExecutionStrategy(new poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement));
opts.setExecutionStrategy(new poptorch.ShardedExecution("b0", ["b1"], new poptorch.Stage("b2").ipu(1)));
opts.setExecutionStrategy(
  new poptorch.SerialPhasedExecution(new poptorch.Phase("b0"), new poptorch.Phase(new poptorch.Stage("b1")).ipus(0))
    .setTensorsLiveness(poptorch.Liveness.OffChipAfterFwd),
);
opts.setExecutionStrategy(new poptorch.ParallelPhasedExecution(["b0"], ["b1"]).sendTensorsOffChipAfterFwd(true));
const mode: OutputMode = poptorch.OutputMode.All;
opts.outputMode(mode).inputReplicaGrouping(1, poptorch.CommGroupType.Consecutive).broadcastBuffers(false);
opts.setAvailableMemoryProportion({ IPU0: 0.5 }).randomSeed(1).autoRoundNumIPUs(true).ipuGeneration("mk2");
opts.TensorLocations.setActivationLocation(new poptorch.TensorLocationSettings().useOnChipStorage(false));
opts.Precision.setPartialsType("float16").enableStochasticRounding(true).enableFloatingPointExceptions(false);
const json: unknown = opts.toJSON();

// BERT-style features: tied weights, checkpoints, per-op memory, serialised products.
class Bert extends nn.Module {
  embed = new nn.Embedding(16, 4);
  words = nn.SerializedEmbedding.fromEmbedding(new nn.Embedding(16, 4), 4);
  decoder = new nn.Linear(4, 16, false);
  constructor() {
    super();
    this.decoder.tieParameter("weight", this.embed, "weight");
  }
  override forward(ids: Tensor): Tensor {
    const h: Tensor = poptorch.recomputationCheckpoint(this.embed.forward(ids).add(this.words.forward(ids)));
    const pair: Tensor[] = poptorch.recomputationCheckpoint(h, h.relu());
    const y: Tensor = poptorch.serializedMatMul(pair[0], constant(new Array(64).fill(0), [4, 16]), poptorch.MatMulSerializationMode.OutputChannels, 4);
    return poptorch.set_available_memory(this.decoder.forward(h), 0.3).add(poptorch.setAvailableMemory(y, 0.5));
  }
}
const bert = new Bert();
const again = poptorch.Options.fromJSON(json);
const frozen: boolean = again.clone().frozen;

// Optimizers.
const adam = new poptorch.optim.Adam(net.parameters(), { lr: 0.003, weightDecay: 0.01 });
adam.variableAttrs.markAsConstant("weightDecay");
const constantEps: boolean = adam.variableAttrs.isConstant("eps");
const sgd: PoptorchOptimizer = new poptorch.optim.SGD([{ params: net.fc1.parameters(), lr: 0.1 }], { lr: 0.01, momentum: 0.9 });
const others: PoptorchOptimizer[] = [
  new poptorch.optim.AdamW(params), new poptorch.optim.RMSprop(params), new poptorch.optim.LAMB(params, { biasCorrection: false }),
];

// The wrapped model.
const model = poptorch.trainingModel(net, opts, adam);
const x: HostTensorInput = { shape: [64, 4], data: new Float32Array(256) };
const y: HostTensorInput = { shape: [64], data: new Int32Array(64), name: "labels" };
const p = model.plan(x, y);
// The plan even where PopTorch would refuse it, and what the wrapper says of itself.
const report = model.plan(x, { shape: [4], dtype: "int32" }, { throwOnInvalid: false });
const wrapperTrace = model.tracedModel?.graph;
const optimizerType: string | undefined = model.optimizerType;
const factor: number = model.combinedBatchFactor;
const outs = model.call(x, y) as HostTensor[];
const loss: Float32Array | Int32Array | Uint8Array = outs[1].data;
model.run(x, y);
model.compile(x, y);
model.setOptimizer(sgd);
model.copyWeightsToHost();
model.copyWeightsToDevice();
const compiled: boolean = model.isCompiled();
const scale: number | undefined = model.lossScaling;
const warnings: string[] = model.warnings;
model.replicaGrouping("fc1.weight", poptorch.CommGroupType.Orthogonal, 2, poptorch.VariableRetrievalMode.OnePerGroup);
model.returnInputGradients(0, "labels");
const w: HostTensor = model.getParameter("fc1.weight");
model.setParameter("fc1.weight", w);
model.destroy();
const inference = poptorch.inferenceModel(net, new poptorch.Options());
const out = inference.call(x, y);

// Slicing with the IPU's rules (inside a forward).
class Window extends nn.Module {
  override forward(t: Tensor, s: Tensor): Tensor {
    return poptorch.slice(t, 0, s, s.add(constant([4], [], "int32")));
  }
}
const windowed = poptorch.dynamicSlice;

// Tracing and planning.
const traced = trace(new Window(), [{ name: "t", shape: [8] }, { name: "s", shape: [], dtype: "int32" }]);
const planned = plan(traceMlp([4, 8, 2], 2), { deviceIterations: 2 }, { training: true });
const demo = demoModel("mlp", { layers: 2 });
const d = defaultModel();
const maxBytes: number = limits().maxTensorBytes;
const v: string = version();

// The GNN stack: datasets, loaders, the GNN layers and sparse inputs.
class Block extends nn.Module {
  norm = new nn.LayerNorm(4);
  conv: nn.SAGEConv = new nn.SAGEConv(4, 4);
  override forward(x: Tensor, adj: SparseTensor, mask?: Tensor): Tensor {
    let h = this.norm.forward(x).relu();
    if (mask) h = h.dropoutWithMask(mask, 0.5);
    return this.conv.forward(h, adj);
  }
}
class Gnn extends nn.Module {
  lin1 = new nn.Linear(500, 8);
  rev: nn.GroupAddRev = new nn.GroupAddRev(new Block(), { numGroups: 2 });
  gcn = new nn.GCNConv(8, 3);
  override forward(x: SparseTensor, adj: SparseTensor, y: Tensor, m: Tensor): Tensor {
    const h = this.lin1.forward(x);
    const mask = isTraining() ? randomMask(h.shape, 0.5) : undefined;
    return this.gcn.forward(this.rev.forward(h, adj, mask), adj).crossEntropy(y, m);
  }
}
async function gnn(files: Record<string, Uint8Array>): Promise<number> {
  const options: PlanetoidOptions = { split: "full", transform: ["AddSelfLoops"] };
  const dataset: datasets.Planetoid = await datasets.Planetoid("PubMed", files, options);
  await datasets.Planetoid("Cora", "/data/");
  const data: datasets.GraphData = dataset.get(0);
  const sizes: number[] = data.splitSizes();
  const loader: loaders.RandomNodeLoader = new loaders.RandomNodeLoader(data, { numParts: 10, shuffle: true, fixedSize: true, epochs: 2 });
  const model = poptorch.trainingModel(new Gnn(), new poptorch.Options());
  let n = sizes[0];
  for (const batch of loader) {
    const b: loaders.Batch = batch;
    const x: HostSparse = b.x;
    model.call(x, b.meanAdjacency(), b.y, b.trainMask);
    n += b.numTrain + (model.stats?.savedForBackward ?? 0);
  }
  // Two replicas, each its own part: every input an array of parts (CallInput).
  const opts = new poptorch.Options().replicationFactor(2);
  const replicated = poptorch.trainingModel(new Gnn(), opts);
  const parts: loaders.Batch[] = [...loader].slice(0, 2);
  const adjs: HostSparse[] = parts.map((p) => p.meanAdjacency());
  replicated.call(parts.map((p) => p.x), adjs, parts.map((p) => p.y), parts.map((p) => p.trainMask));
  return n + data.numNodes + dataset.numClasses;
}

// A small ResNet stem: the vision modules and Tensor ops, typed.
class Stem extends nn.Module {
  conv = new nn.Conv2d(3, 8, 3, { stride: 2, padding: 1, bias: false });
  bn = new nn.BatchNorm2d(8, { momentum: 0.1 });
  pool = new nn.MaxPool2d(3, { stride: 2, padding: 1 });
  avg = new nn.AvgPool2d([2, 2], { countIncludePad: false });
  gap = new nn.AdaptiveAvgPool2d(1);
  flat = new nn.Flatten(1);
  fc = new nn.Linear(8, 10);
  override forward(x: Tensor, y: Tensor): Tensor[] {
    const h: Tensor = this.pool.forward(this.bn.forward(this.conv.forward(x)).relu());
    const g: Tensor = this.flat.forward(this.gap.forward(this.avg.forward(h)));
    const logits = this.fc.forward(g);
    const direct: Tensor = x.conv2d(constant(new Float32Array(27), [1, 3, 3, 3]), null, { padding: [1, 1] })
      .maxPool2d(2).avgPool2d(2, { ceilMode: true }).adaptiveAvgPool2d([1, 1]).flatten(1);
    const onehot: Tensor = y.oneHot(10);
    return [logits.crossEntropy(y, null, { ignoreIndex: -100, labelSmoothing: 0.1 }), direct, onehot];
  }
}
const stemPlan = poptorch.trainingModel(new Stem(), new poptorch.Options().deviceIterations(1)).plan(
  { shape: [2, 3, 32, 32], dtype: "float32" },
  { shape: [2], dtype: "int32" },
);

// PyG's conventions: conv(x, edge_index) with an int32 [2, E] tensor; a state dict of nested
// lists or a Map; a step's gradients read through anchored tensors.
class PygNet extends nn.Module {
  sage = new nn.SAGEConv(4, 4);
  gcn = new nn.GCNConv(4, 2);
  override forward(x: Tensor, edgeIndex: Tensor): Tensor {
    return this.gcn.forward(this.sage.forward(x, edgeIndex).relu(), edgeIndex);
  }
}
const pygNet = new PygNet();
pygNet.sage.loadStateDict({ "lin_l.weight": [[1, 2, 3, 4], [0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2]], "lin_l.bias": [0, 0, 0, 0] }, false);
pygNet.gcn.loadStateDict(new Map<string, StateDictValue>([["bias", [0.5, -0.5]], ["lin.weight", { shape: [2, 4], data: new Float32Array(8) }]]));
const anchored = poptorch.trainingModel(pygNet, new poptorch.Options().anchorTensor("g", "Gradient___model.gcn.bias", poptorch.OutputMode.Final, 1));
anchored.call({ shape: [5, 4], data: new Float32Array(20) }, { shape: [2, 3], dtype: "int32", data: new Int32Array([0, 1, 2, 1, 2, 3]) });
const gcnBiasGrad: HostTensor = anchored.getAnchoredTensor("g");

export {
  gcnBiasGrad, first, same, json, frozen, constantEps, others, p, loss, compiled, scale, warnings, out, windowed, traced, planned, demo,
  d, maxBytes, v, gnn, stemPlan, report, wrapperTrace, optimizerType, factor, bert,
};
