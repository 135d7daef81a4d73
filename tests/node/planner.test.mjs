// The planner from the npm package: a JS model traced with Blocks and planned under
// options given as a plain object, as a user of the package does (tests/consumer/plan.mjs
// imports "ipu-playground" by name).
import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { REPO } from "./helpers.mjs";

const CONSUMER = path.join(REPO, "tests", "consumer");
const codes = (list) => list.map((d) => d.code);

describe("plan() from the npm package", () => {
  let m;
  before(async () => {
    m = await import(pathToFileURL(path.join(CONSUMER, "plan.mjs")).href);
  });

  test("blocks on IPUs 0, 1, 0 fail with AutoStage.SameAsIpu and plan with AutoIncrement", () => {
    const model = m.traceThreeBlocks([0, 1, 0]);
    assert.equal(typeof model.traced, "object", "trace() returns the graph for plan() as `traced`");
    const same = m.plan(model, { deviceIterations: 4 });
    assert.equal(same.valid, false);
    assert.equal(same.fits, false);
    assert.deepEqual(codes(same.errors), ["stage_order_conflict"]);
    assert.match(same.errors[0].fix, /AutoIncrement/);
    const auto = m.plan(model, { deviceIterations: 4, executionStrategy: { type: "pipelined", autoStage: "autoIncrement" } });
    assert.equal(auto.valid, true, JSON.stringify(auto.errors));
    assert.deepEqual(auto.blocks.map((b) => [b.id, b.ipu, b.stage]), [["b0", 0, 0], ["b1", 1, 1], ["b2", 0, 2]]);
    assert.equal(auto.ipusUsed, 2);
    // One entry per node of the traced graph, in its order.
    assert.equal(auto.placement.ipu.length, model.graph.nodes.length);
    const linear = model.graph.nodes.findIndex((n) => n.opname === "linear" && n.meta.block === "b1");
    assert.equal(auto.placement.ipu[linear], 1);
  });

  test("a training plan: 2F - 1 stages, the accumulation rule, the memory and time views", () => {
    const model = m.traceThreeBlocks([0, 1, 2]);
    const settings = { training: true, optimizer: "adam" };
    const low = m.plan(model, { autoRoundNumIPUs: true, Training: { gradientAccumulation: 2 } }, settings);
    assert.deepEqual(codes(low.errors), ["pipeline_gradient_accumulation"]);
    assert.match(low.errors[0].message, /pipeline stages \(5\)/);
    const p = m.plan(model, { autoRoundNumIPUs: true, Training: { gradientAccumulation: 8 } }, settings);
    assert.equal(p.valid, true, JSON.stringify(p.errors));
    assert.equal(p.training, true);
    assert.deepEqual(codes(p.warnings), ["ipu_count_rounded"]);
    assert.deepEqual([p.ipusUsed, p.ipusReserved], [3, 4]);
    assert.deepEqual(p.stages.map((s) => s.pass), ["forward", "forward", "forward_backward", "backward", "backward"]);
    assert.deepEqual([p.pipeline.rampUp, p.pipeline.steady, p.pipeline.rampDown], [4, 4, 4]);
    assert.equal(p.memory.ipus.length, 3);
    for (const ipu of p.memory.ipus) {
      assert.ok(ipu.peakBytes > ipu.alwaysLive.weights, "peak includes the weights");
      assert.equal(ipu.steps.node.length, ipu.steps.activations.length);
      assert.equal(ipu.tiles.length, 1472);
    }
    assert.ok(p.copies.some((c) => c.fromIpu === 0 && c.toIpu === 1));
    assert.ok(Math.abs(p.time.throughput - p.time.samplesPerStep / p.time.stepTimeS) < 1e-6 * p.time.throughput);
    // Backward and optimizer nodes are named by the plan's program table.
    const updates = p.program.op.filter((k) => p.program.ops[k] === "optimizer_update").length;
    assert.equal(updates, 6, "two parameters per Linear, three Linears");
  });

  test("a model that does not fit is a valid plan with fits=false", () => {
    // PubMed-sized RevGNN on Mk1's 304 MiB: the forward plan fits, the training plan on a
    // 1,000-layer model with optimizer state does not.
    const rev = m.demoModel("revgnn", { layers: 1000, ipus: 1, training: true, graph: false });
    const p = m.plan(rev, { ipuGeneration: "mk1" }, { training: true, optimizer: "adam", microBatchSize: rev.microBatchSize });
    assert.equal(p.valid, true, JSON.stringify(p.errors.map((e) => e.message)));
    assert.equal(p.fits, false);
    const oom = p.errors.find((e) => e.code === "out_of_memory");
    assert.match(oom.message, /Out of memory on IPU 0/);
    assert.match(oom.message, /1216 tiles × 256\.0 KiB/);
  });

  test("blocks: block() is a scope that leaves no block active, beginBlock() lasts", () => {
    const bad = m.traceMixedBlocks(false);
    const kinds = bad.graph.nodes.filter((n) => n.op !== "placeholder").map((n) => [n.opname, n.meta.block, n.meta.block_kind]);
    assert.deepEqual(kinds, [
      ["linear", "first", "begin"],
      ["relu", "first", "begin"],
      ["linear", "second", "scoped"],
      ["relu", null, "ended"],
      ["mean", null, "ended"],
    ]);
    const p = m.plan(bad, { deviceIterations: 2 });
    assert.equal(p.valid, false);
    assert.deepEqual(codes(p.errors), ["no_active_block"]);
    assert.match(p.errors[0].message, /^No active Block, all the ops must belong to a Block: 'relu'/);
    assert.match(p.errors[0].message, /the Block scope 'second' ended/);
    assert.equal(bad.graph.nodes[p.errors[0].node].opname, "relu");
    const good = m.plan(m.traceMixedBlocks(true), { deviceIterations: 2 });
    assert.equal(good.valid, true, JSON.stringify(good.errors));
    assert.deepEqual(good.blocks.map((b) => [b.id, b.kind, b.ipu]), [["first", "begin", 0], ["second", "scoped", 1], ["third", "begin", 1]]);
  });

  test("demoModel('revgnn') is RevGNN without data for a dataset's sizes", () => {
    const cora = { layers: 3, hidden: 16, groups: 2, inChannels: 1433, outChannels: 7, nodes: 2708, edges: 13264, featureNnz: 49216 };
    const r = m.demoModel("revgnn", { ...cora, ipus: 3, training: true });
    assert.equal(r.microBatchSize, 2708);
    assert.equal(r.graph.nodes.filter((n) => n.opname === "call").length, 3);
    assert.deepEqual(r.parameters.find(([name]) => name === "lin1.weight"), ["lin1.weight", [16, 1433]]);
    assert.deepEqual([...new Set(r.graph.nodes.map((n) => n.meta.block).filter(Boolean))], ["ipu0", "ipu1", "ipu2"]);
    const settings = { training: true, optimizer: "adam", microBatchSize: r.microBatchSize };
    const three = m.plan(r, { Training: { gradientAccumulation: 5 } }, settings);
    assert.deepEqual(three.errors.map((e) => e.code), ["ipu_count_not_power_of_two"], "3 IPUs reserve 4");
    const p = m.plan(r, { autoRoundNumIPUs: true, Training: { gradientAccumulation: 5 } }, settings);
    assert.equal(p.valid, true, JSON.stringify(p.errors));
    assert.ok(p.warnings.some((w) => w.code === "ipu_count_rounded"));
    assert.equal(p.stages.length, 5, "2F - 1");
    assert.throws(() => m.demoModel("revgnn", { ...cora, hidden: 15 }), /hidden size 15 is not divisible/);
    assert.throws(() => m.demoModel("revgnn", { ...cora, nodes: 0 }), (e) => e instanceof RangeError && /nodes must be from 1/.test(e.message));
    assert.throws(() => m.demoModel("mlp", { nodes: 10 }), /nodes is an option of the revgnn demo model only/);
    assert.throws(() => m.demoModel("revgnn", [3]), /config must be an object/);
    // An error about one key of the config names it as err.option (the page marks its line).
    for (const [config, key] of [[{ hidden: 15 }, "hidden"], [{ nodes: 0 }, "nodes"], [{ groups: 1 }, "groups"], [{ dropout: 1 }, "dropout"], [{ layers: 0 }, "layers"]]) {
      assert.throws(() => m.demoModel("revgnn", { ...cora, ...config }), (e) => e.option === key, JSON.stringify(config));
    }
    assert.throws(() => m.demoModel("revgnn", [3]), (e) => e.option === undefined);
  });

  test("bad calls throw an Error naming the cause", () => {
    assert.throws(() => m.plan({}), /must be what trace\(\)/);
    assert.throws(() => m.plan(m.traceMlp([4, 3], 2), undefined, { training: true }), /loss must be a float scalar/);
    assert.throws(() => m.plan(m.traceMlp([4, 3], 2), undefined, { epochs: 3 }), /epochs/);
    // A poptorch.Options is planned as it is, as its JSON is.
    const traced = m.traceMlp([8, 16, 4], 4);
    const opts = new m.poptorch.Options().deviceIterations(2).replicationFactor(2);
    const fromOptions = m.plan(traced, opts);
    const fromJson = m.plan(traced, opts.toJSON());
    delete fromOptions.timings;
    delete fromJson.timings;
    assert.deepEqual(fromOptions, fromJson);
    assert.equal(fromOptions.options.replicationFactor, 2);
    assert.equal(fromOptions.replicas, 2);
    const bad = m.plan(m.traceMlp([4, 3], 2), { deviceIterations: 0 });
    assert.equal(bad.valid, false);
    assert.deepEqual(codes(bad.errors), ["options_not_positive"]);
  });
});
