// A bounded, seeded fuzz run of the poptorch API from the npm package (imported by name):
// random good and bad arguments to Options, strategies, optimizers, trainingModel /
// inferenceModel, model calls and module state, including Proxies whose traps throw and
// getters that throw. Every call either works or throws an Error with a message (never a
// trap, never a non-Error), and a reference training run after the fuzz gives exactly what
// it gave before.
//
// POPTORCH_FUZZ_SEED=<n> replays a run (the seed is printed); POPTORCH_FUZZ_CALLS=<n> sizes it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { api, models, nn, poptorch, f32, classifierData, values } from "./poptorch-helpers.mjs";
import { rng } from "./helpers.mjs";

const SEED = Number(process.env.POPTORCH_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CALLS = Number(process.env.POPTORCH_FUZZ_CALLS ?? 1500);

const rand = rng(SEED);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const chance = (p) => rand() < p;

const throwingProxy = () =>
  new Proxy({}, {
    get() { throw new Error("trap: get"); },
    ownKeys() { throw new Error("trap: ownKeys"); },
    getOwnPropertyDescriptor() { throw new Error("trap: descriptor"); },
  });
const throwingGetter = () => Object.defineProperty({}, "shape", { get() { throw new TypeError("getter"); }, enumerable: true });

const JUNK = () => pick([
  undefined, null, 0, -1, 1.5, NaN, Infinity, 2 ** 40, "", "x", "all", "autoIncrement", "a\nb", true, {}, [], [1, 2], [[1]],
  () => 1, 4n, Symbol("s"), new Float64Array(2), throwingProxy(), throwingGetter(), { _handle: () => 3 }, { _key: () => "k" },
]);
const COUNT = () => (chance(0.5) ? pick([1, 2, 4, 8]) : JUNK());
const ENUM = () => (chance(0.5) ? pick([...Object.values(poptorch.OutputMode), ...Object.values(poptorch.CommGroupType), "Final", "All"]) : JUNK());
const BOOL = () => (chance(0.6) ? pick([true, false]) : JUNK());

let calls = 0;
/** Runs `f`: it works, or throws an Error with a message. */
function maybe(what, f) {
  calls++;
  try {
    return f();
  } catch (e) {
    assert.ok(!(e instanceof WebAssembly.RuntimeError), `${what}: trapped: ${e?.message} (seed ${SEED})`);
    assert.ok(e instanceof Error, `${what}: threw a non-Error ${String(e)} (seed ${SEED})`);
    assert.ok(typeof e.message === "string" && e.message.length > 0, `${what}: no message (seed ${SEED})`);
    assert.doesNotMatch(e.message, /unreachable|panicked|memory access out of bounds|null pointer passed to rust|recursive use/, `${what} (seed ${SEED})`);
    return undefined;
  }
}

const OPTION_CALLS = [
  (o) => o.deviceIterations(COUNT()), (o) => o.replicationFactor(COUNT()), (o) => o.inputReplicaGrouping(COUNT(), ENUM()),
  (o) => o.broadcastBuffers(BOOL()), (o) => o.autoRoundNumIPUs(BOOL()), (o) => o.outputMode(ENUM(), COUNT()),
  (o) => o.randomSeed(COUNT()), (o) => o.ipuGeneration(pick(["mk1", "mk2", "bow", "ipu2", "x", JUNK()])),
  (o) => o.setAvailableMemoryProportion(pick([{ IPU0: 0.5 }, { IPU1: 2 }, { GPU: 1 }, JUNK()])),
  (o) => o.setExecutionStrategy(chance(0.5) ? strategy() : JUNK()),
  (o) => o.Training.gradientAccumulation(COUNT()), (o) => o.Training.setAutomaticLossScaling(BOOL()),
  (o) => o.Training.accumulationAndReplicationReductionType(pick(["sum", "mean", "noReduction", JUNK()])),
  (o) => o.Training.setMeanAccumulationAndReplicationReductionStrategy(pick(["running", "post", JUNK()])),
  (o) => o.TensorLocations.setWeightLocation(chance(0.5) ? new poptorch.TensorLocationSettings().useOnChipStorage(BOOL()) : JUNK()),
  (o) => o.TensorLocations.numIOTiles(pick([32, 33, 192, 194, JUNK()])),
  (o) => poptorch.Options.fromJSON(pick([o.toJSON(), { deviceIterations: COUNT() }, "{", "[]", JUNK()])),
];

function strategy() {
  const arg = () => pick(["a", ["a", "b"], new poptorch.Stage("c"), poptorch.AutoStage.AutoIncrement, JUNK()]);
  const args = Array.from({ length: Math.floor(rand() * 3) }, arg);
  const S = pick([poptorch.PipelinedExecution, poptorch.ShardedExecution, poptorch.SerialPhasedExecution, poptorch.ParallelPhasedExecution]);
  return new S(...args);
}

const ARG_NAMES = ["lr", "momentum", "weightDecay", "weight_decay", "betas", "eps", "lossScaling", "accumType", "maxGradNorm", "nesterov", "alpha", "bogus"];
function optimizerOptions() {
  if (chance(0.2)) return JUNK();
  const o = {};
  for (let i = 0; i < Math.floor(rand() * 4); i++) o[pick(ARG_NAMES)] = pick([0.1, 0.9, [0.9, 0.99], "float16", "int32", true, -1, JUNK()]);
  if (chance(0.7)) o.lr = pick([0.01, 0.1]);
  return o;
}

test(`poptorch calls with random arguments work or throw Errors, and leave the engine as it was (seed ${SEED})`, () => {
  console.log(`poptorch fuzz: seed ${SEED} (POPTORCH_FUZZ_SEED=${SEED} replays it), ${CALLS} calls`);
  const reference = () => {
    const net = models.seeded(models.Classifier);
    const o = new poptorch.Options().deviceIterations(2).replicationFactor(2);
    const m = poptorch.trainingModel(net, o, new poptorch.optim.Adam(net.parameters(), { lr: 0.05 }));
    const outs = [m.call(...classifierData(8)), m.call(...classifierData(8))].map((r) => r.map((t) => Array.from(t.data)));
    return { outs, weights: values(net) };
  };
  const before = reference();
  const nets = [models.seeded(models.Classifier), models.seeded(models.Classifier), new models.CounterModel()];
  const wrapped = [];
  for (let i = 0; i < CALLS; i++) {
    const kind = Math.floor(rand() * 8);
    if (kind === 0) {
      const o = new poptorch.Options();
      for (let k = 0; k < 3; k++) maybe("Options", () => pick(OPTION_CALLS)(o));
    } else if (kind === 1) {
      maybe("strategy", () => strategy().toJSON());
      maybe("Stage/Phase", () => new poptorch.Phase(...[pick(["a", new poptorch.Stage("b"), JUNK()])]).ipus(COUNT(), COUNT()));
    } else if (kind === 2) {
      const net = pick(nets);
      const params = pick([() => net.parameters(), () => [{ params: net.parameters(), lr: 0.5 }], () => [JUNK()], () => JUNK(), () => []])();
      const Opt = pick(Object.values(poptorch.optim));
      const opt = maybe("optimizer", () => new Opt(params, optimizerOptions()));
      if (opt) {
        maybe("variableAttrs", () => opt.variableAttrs[pick(["markAsConstant", "markAsVariable", "isConstant"])](pick(["lr", "momentum", "weightDecay", "bogus", JUNK()])));
        maybe("update", () => opt.update(optimizerOptions(), pick([undefined, 0, 5, JUNK()])));
      }
    } else if (kind === 3) {
      const model = pick([...nets, new models.NoLoss(), new models.Throws(), JUNK()]);
      const options = chance(0.6) ? new poptorch.Options().deviceIterations(pick([1, 2])) : JUNK();
      const make = chance(0.5) ? poptorch.trainingModel : poptorch.inferenceModel;
      const m = maybe("wrap", () => make(model, options, chance(0.3) ? JUNK() : undefined));
      if (m) wrapped.push(m);
      if (wrapped.length > 6) maybe("destroy", () => wrapped.shift().destroy());
    } else if (kind === 4 && wrapped.length) {
      const m = pick(wrapped);
      const [x, y] = classifierData(pick([2, 4, 3]));
      const input = () => pick([x, y, { ...x, dtype: pick(["float16", "int32", "bool", "f64", JUNK()]) }, { shape: [1e9, 1e9], data: [] },
        { shape: x.shape, data: new BigInt64Array(x.data.length) }, throwingProxy(), throwingGetter(), JUNK()]);
      const inputs = chance(0.5) ? [x, y] : Array.from({ length: Math.floor(rand() * 3) }, input);
      maybe("call", () => m.call(...inputs));
    } else if (kind === 5 && wrapped.length) {
      const m = pick(wrapped);
      maybe("method", () => pick([
        () => m.setOptimizer(chance(0.5) ? new poptorch.optim.SGD(m.model.parameters(), { lr: 0.1 }) : JUNK()),
        () => m.replicaGrouping(pick(["fc1.weight", "x", JUNK()]), ENUM(), COUNT(), pick(["onePerGroup", "allReplicas", JUNK()])),
        () => m.returnInputGradients(pick([0, 1, "input0", JUNK()])),
        () => m.getParameter(pick(["fc1.weight", "nope", JUNK()])),
        () => m.setParameter(pick(["fc1.bias", JUNK()]), pick([f32([5], [1, 2, 3, 4, 5]), f32([2], [1, 2]), JUNK()])),
        () => m.copyWeightsToHost(), () => m.copyWeightsToDevice(), () => m.plan(...classifierData(2)), () => m.compile(...classifierData(2)),
        () => m.lossScaling, () => m.warnings, () => m.options,
      ])());
    } else if (kind === 6) {
      const net = pick(nets);
      maybe("state", () => pick([
        () => net.loadStateDict(pick([net.stateDict(), {}, { "fc1.bias": f32([5], [0, 0, 0, 0, 0]) }, { "fc1.bias": f32([4], [0, 0, 0, 0]) }, JUNK()]), pick([true, false, JUNK()])),
        () => net.namedParameters().map(([, p]) => p.data),
        () => net.buffers(),
        () => api._moduleTo(net, pick(["float16", "float32", JUNK()])),
        () => net.fc1?._setState(pick(["parameter", "buffer", JUNK()]), pick(["weight", "bias", JUNK()]), JUNK()),
      ])());
    } else {
      maybe("trace", () => api.trace(pick(nets), [{ name: "x", shape: [2, 3] }, { name: "y", shape: [2], dtype: "int32" }]));
    }
  }
  assert.ok(calls >= CALLS, `${calls} calls`);
  assert.deepEqual(reference(), before, `the engine works as before the fuzz (seed ${SEED})`);
});
