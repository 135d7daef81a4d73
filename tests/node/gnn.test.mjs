// The GNN stack from the npm package, imported by name as a user's project does:
// datasets.Planetoid, loaders.RandomNodeLoader with fixed-size padding, nn.SAGEConv,
// nn.GCNConv, nn.Linear on sparse features, nn.GroupAddRev traced as an invertible region
// (memory flat in depth), and RevGNN trained through poptorch.trainingModel.
import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { REPO } from "./helpers.mjs";

const pkg = createRequire(path.join(REPO, "tests", "consumer", "index.mjs"))("ipu-playground");
const { nn, poptorch, datasets, loaders, trace, plan, manualSeed, randomMask, isTraining } = pkg;

/** The staged raw files of `name` (scripts/stage-data.sh; make test stages them first). */
function rawFiles(name) {
  for (const dir of [path.join(REPO, "data"), path.join(REPO, "../shared/data/planetoid/raw")]) {
    if (!fs.existsSync(path.join(dir, `ind.${name}.graph`))) continue;
    const files = {};
    for (const s of ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"]) {
      files[`ind.${name}.${s}`] = new Uint8Array(fs.readFileSync(path.join(dir, `ind.${name}.${s}`)));
    }
    return files;
  }
  throw new Error(`Planetoid raw files for ${name} not found: run scripts/stage-data.sh`);
}

/** A 6-node graph: a ring both ways plus self loops, 3 features, 2 classes. */
function ring() {
  const n = 6;
  const edges = [];
  for (let i = 0; i < n; i++) edges.push([i, (i + 1) % n], [(i + 1) % n, i], [i, i]);
  return { n, edges };
}

/** The mean-aggregation CSR of `edges` (rows = targets), as a host sparse object. */
function meanCsr(n, edges) {
  const rows = Array.from({ length: n }, () => []);
  for (const [s, d] of edges) rows[d].push(s);
  const indptr = [0];
  const indices = [];
  const values = [];
  for (const r of rows) {
    const sorted = [...r].sort((a, b) => a - b);
    for (const c of sorted) {
      indices.push(c);
      values.push(1 / r.length);
    }
    indptr.push(indices.length);
  }
  return {
    layout: "csr", shape: [n, n],
    indptr: Int32Array.from(indptr), indices: Int32Array.from(indices), values: Float32Array.from(values),
  };
}

const close = (a, b, tol, what) => assert.ok(Math.abs(a - b) <= tol * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);

class GNNBlock extends nn.Module {
  constructor(c, p = 0.5) {
    super();
    this.norm = new nn.LayerNorm(c);
    this.conv = new nn.SAGEConv(c, c);
    this.p = p;
  }
  forward(x, adj, mask) {
    let h = this.norm.forward(x).relu();
    if (mask) h = h.dropoutWithMask(mask, this.p);
    return this.conv.forward(h, adj);
  }
}

class RevGNN extends nn.Module {
  constructor({ features, hidden = 8, classes, layers, groups = 2, dropout = 0.5, disable = false }) {
    super();
    this.dropout = dropout;
    this.lin1 = new nn.Linear(features, hidden);
    const convs = [];
    for (let i = 0; i < layers; i++) {
      convs.push(new nn.GroupAddRev(new GNNBlock(hidden / groups, dropout), { numGroups: groups, disable }));
    }
    this.convs = new nn.ModuleList(convs);
    this.norm = new nn.LayerNorm(hidden);
    this.lin2 = new nn.Linear(hidden, classes);
  }
  forward(x, adj, y, mask) {
    let h = this.lin1.forward(x);
    const m = isTraining() && this.dropout > 0 ? randomMask(h.shape, this.dropout) : null;
    for (let i = 0; i < this.convs.length; i++) h = this.convs.get(i).forward(h, adj, m);
    const out = this.lin2.forward(this.norm.forward(h).relu());
    return y === undefined ? out : [out, out.crossEntropy(y, mask)];
  }
}

describe("datasets.Planetoid", () => {
  test("Cora from its raw bytes: PyG's counts, splits and transforms", async () => {
    const files = rawFiles("cora");
    const pub = await datasets.Planetoid("Cora", files);
    assert.equal(pub.name, "Cora");
    assert.equal(pub.length, 1);
    const d = pub.get(0);
    assert.deepEqual([d.numNodes, d.numFeatures, d.numClasses, d.numEdges], [2708, 1433, 7, 10556]);
    assert.deepEqual(d.splitSizes(), [140, 500, 1000]);
    const x = d.x;
    assert.equal(x.layout, "csr");
    assert.deepEqual(x.shape, [2708, 1433]);
    assert.equal(x.indptr.length, 2709);
    assert.equal(x.indices.length, 49216);
    assert.equal(x.values.reduce((a, b) => a + b, 0), 49216, "Cora's features are 0/1");
    assert.deepEqual([d.y.dtype, d.y.shape], ["int32", [2708]]);
    assert.deepEqual([d.trainMask.dtype, d.edgeIndex.shape], ["bool", [2, 10556]]);
    // One frozen view per field: the same object on every read, no copy per `data.y[i]`.
    for (const k of ["x", "y", "trainMask", "valMask", "testMask", "edgeIndex"]) {
      assert.equal(d[k], d[k], k);
      assert.ok(Object.isFrozen(d[k]) && Object.isFrozen(d[k].shape), k);
    }
    assert.throws(() => {
      d.y.shape = [1]; // a module is strict: writing a frozen field throws
    }, TypeError);
    const full = (await datasets.Planetoid("cora", files, { split: "full", transform: ["AddSelfLoops"] })).data;
    assert.deepEqual(full.splitSizes(), [1208, 500, 1000]);
    assert.equal(full.numEdges, 10556 + 2708);
    const adj = full.meanAdjacency();
    assert.equal(adj.indices.length, 10556 + 2708);
    // Each row of the mean adjacency sums to 1 (every node has its self loop).
    for (const r of [0, 1, 2707]) {
      let s = 0;
      for (let k = adj.indptr[r]; k < adj.indptr[r + 1]; k++) s += adj.values[k];
      close(s, 1, 1e-6, `row ${r}`);
    }
    const norm = (await datasets.Planetoid("Cora", files, { transform: ["NormalizeFeatures"] })).data.x;
    let s0 = 0;
    for (let k = norm.indptr[0]; k < norm.indptr[1]; k++) s0 += norm.values[k];
    close(s0, 1, 1e-6, "a normalised row");
  });

  test("bad input is an Error naming the cause: the test index, the option, the name", async () => {
    const files = rawFiles("cora");
    const lines = new TextDecoder().decode(files["ind.cora.test.index"]).trim().split("\n");
    lines[999] = "99999";
    const bad = { ...files, "ind.cora.test.index": new TextEncoder().encode(lines.join("\n")) };
    await assert.rejects(datasets.Planetoid("Cora", bad), {
      message: "ind.cora.test.index: line 1000: test index 99999 is out of range for the 2708 nodes (1708 in ind.cora.allx + 1000 in ind.cora.tx)",
    });
    await assert.rejects(datasets.Planetoid("Cora", files, { splt: "full" }), /unknown field `splt`/);
    await assert.rejects(datasets.Planetoid("Cora", files, { transform: ["AddSelfLoop"] }), /unknown variant `AddSelfLoop`/);
    await assert.rejects(datasets.Planetoid("Reddit", files), /unknown Planetoid dataset 'Reddit'; valid names are Cora, CiteSeer, PubMed/);
    const { "ind.cora.ty": _, ...missing } = files;
    await assert.rejects(datasets.Planetoid("Cora", missing), /missing file ind\.cora\.ty/);
    await assert.rejects(datasets.Planetoid("Cora", { ...files, "ind.cora.x": [1, 2] }), TypeError);
    await assert.rejects(datasets.Planetoid("Cora", "/data/"), /fetch/);
  });
});

describe("loaders.RandomNodeLoader", () => {
  let data;
  before(async () => {
    data = (await datasets.Planetoid("Cora", rawFiles("cora"), { split: "full", transform: ["AddSelfLoops"] })).data;
  });

  test("parts as PyG's: ceil(N / numParts) nodes, every node once per epoch, new parts each epoch", () => {
    const loader = new loaders.RandomNodeLoader(data, { numParts: 10, shuffle: true, seed: 3 });
    const epoch = () => [...loader].map((b) => Array.from(b.nodeIds.data));
    const a = epoch();
    assert.deepEqual(a.map((p) => p.length), [271, 271, 271, 271, 271, 271, 271, 271, 271, 269]);
    assert.deepEqual(a.flat().sort((x, y) => x - y), Array.from({ length: 2708 }, (_, i) => i));
    const b = epoch();
    assert.notDeepEqual(a[0], b[0]);
    const again = new loaders.RandomNodeLoader(data, { numParts: 10, shuffle: true, seed: 3 });
    assert.deepEqual([...again].map((p) => Array.from(p.nodeIds.data)), a, "seeded");
    const plain = [...new loaders.RandomNodeLoader(data, { numParts: 4 })];
    assert.deepEqual(Array.from(plain[1].nodeIds.data.slice(0, 3)), [677, 678, 679], "contiguous without shuffle");
    // An induced subgraph keeps the edges inside the part only.
    const part = plain[0];
    assert.ok(part.numEdges < data.numEdges / 2 && part.numEdges >= part.numNodes, `${part.numEdges}`);
  });

  test("fixedSize: every part padded to one size, exact for the epochs asked", () => {
    const loader = new loaders.RandomNodeLoader(data, { numParts: 10, shuffle: true, seed: 1, fixedSize: true, epochs: 3 });
    const { maxNodes, maxEdges, xCapacity } = loader.fixedSizes;
    assert.equal(maxNodes, 272);
    let sawFullEdges = false;
    for (let e = 0; e < 3; e++) {
      for (const b of loader) {
        assert.equal(b.numNodes, maxNodes);
        assert.equal(b.numEdges, maxEdges);
        assert.ok(b.numRealNodes < maxNodes);
        sawFullEdges ||= b.numRealEdges === maxEdges;
        const [x, adj] = [b.x, b.meanAdjacency()];
        assert.deepEqual([x.indptr.length, x.indices.length, adj.indices.length], [maxNodes + 1, xCapacity, maxEdges]);
        assert.equal(b.trainMask.data.slice(b.numRealNodes).reduce((s, v) => s + v, 0), 0, "padding never trains");
        assert.equal(b.nodeIds.data[maxNodes - 1], -1);
      }
    }
    assert.ok(sawFullEdges, "the edge count is the largest part's (exact, not a bound)");
    assert.throws(() => [...loader], /computed for 3 epochs/);
  });

  test("a part's edgeIndex (padding edges looping on the last padding node) gives the convs its adjacencies' results", () => {
    const loader = new loaders.RandomNodeLoader(data, { numParts: 10, shuffle: true, seed: 2, fixedSize: true, epochs: 1 });
    const b = [...loader][0];
    assert.deepEqual(b.edgeIndex.shape, [2, b.numEdges]);
    const pad = b.numNodes - 1;
    for (let k = b.numRealEdges; k < b.numEdges; k++) {
      assert.deepEqual([b.edgeIndex.data[k], b.edgeIndex.data[b.numEdges + k]], [pad, pad]);
    }
    manualSeed(4);
    const lin = new nn.Linear(data.numFeatures, 8);
    const sage = new nn.SAGEConv(8, 8);
    const gcn = new nn.GCNConv(8, 4);
    class Net extends nn.Module {
      constructor() { super(); this.lin = lin; this.sage = sage; this.gcn = gcn; }
      forward(x, a, g) { return this.gcn.forward(this.sage.forward(this.lin.forward(x), a).relu(), g); }
    }
    const viaEdges = poptorch.inferenceModel(new Net()).call(b.x, b.edgeIndex, b.edgeIndex);
    const viaCsr = poptorch.inferenceModel(new Net()).call(b.x, b.meanAdjacency(), b.gcnAdjacency());
    assert.deepEqual(viaEdges.shape, [b.numNodes, 4]);
    for (let i = 0; i < b.numRealNodes * 4; i++) {
      assert.ok(Math.abs(viaEdges.data[i] - viaCsr.data[i]) <= 1e-5 + 1e-4 * Math.abs(viaCsr.data[i]), `${i}: ${viaEdges.data[i]} vs ${viaCsr.data[i]}`);
    }
  });

  test("the iterator yields plain objects, freeing each Rust batch at once (also when the loop breaks)", () => {
    const loader = new loaders.RandomNodeLoader(data, { numParts: 3, shuffle: true, seed: 5 });
    for (const b of loader) {
      assert.ok(!(b instanceof loaders.Batch), "a plain object: nothing of it waits in wasm memory for the GC");
      assert.equal(typeof b.free, "undefined");
      assert.equal(b.meanAdjacency(), b.meanAdjacency(), "computed once");
      assert.equal(b.gcnAdjacency().indptr.length, b.numNodes + 1);
      break; // the two parts left are freed by the iterator's return()
    }
    assert.equal([...loader].length, 3, "the next epoch is whole");
  });

  test("bad options are named", () => {
    assert.throws(() => new loaders.RandomNodeLoader(data, {}), { name: "TypeError", message: /numParts is required/ });
    assert.throws(() => new loaders.RandomNodeLoader(data, { numParts: 0 }), RangeError);
    assert.throws(() => new loaders.RandomNodeLoader(data, { numParts: 3000 }), /exceeds the graph's 2708 nodes/);
    assert.throws(() => new loaders.RandomNodeLoader(data, { numParts: 2, parts: 3 }), /has no option "parts"/);
    assert.throws(() => new loaders.RandomNodeLoader(data, { numParts: 2, epochs: 3 }), /needs fixedSize: true/);
    assert.throws(() => new loaders.RandomNodeLoader({}, { numParts: 2 }), { name: "TypeError", message: /must be a GraphData/ });
    assert.throws(() => new loaders.RandomNodeLoader(data, { numParts: 2.5 }), TypeError);
  });
});

describe("GNN layers from JavaScript", () => {
  test("SAGEConv computes lin_l(mean of neighbours) + lin_r(x), as PyG", () => {
    manualSeed(4);
    const { n, edges } = ring();
    class Net extends nn.Module {
      constructor() { super(); this.conv = new nn.SAGEConv(3, 2); }
      forward(x, adj) { return this.conv.forward(x, adj); }
    }
    const net = new Net();
    assert.deepEqual(net.namedParameters().map(([k]) => k), ["conv.lin_l.weight", "conv.lin_l.bias", "conv.lin_r.weight"]);
    const xs = Float32Array.from({ length: n * 3 }, (_, i) => Math.sin(i));
    const out = poptorch.inferenceModel(net).call({ shape: [n, 3], data: xs }, meanCsr(n, edges));
    const sd = net.stateDict();
    const [wl, bl, wr] = ["conv.lin_l.weight", "conv.lin_l.bias", "conv.lin_r.weight"].map((k) => sd[k].data);
    for (let i = 0; i < n; i++) {
      const nb = edges.filter(([, d]) => d === i).map(([s]) => s);
      for (let o = 0; o < 2; o++) {
        let want = bl[o];
        for (let f = 0; f < 3; f++) {
          const mean = nb.reduce((acc, j) => acc + xs[j * 3 + f], 0) / nb.length;
          want += wl[o * 3 + f] * mean + wr[o * 3 + f] * xs[i * 3 + f];
        }
        close(out.data[i * 2 + o], want, 1e-5, `out[${i},${o}]`);
      }
    }
  });

  test("GCNConv: Â (x Wᵀ) + b with the normalised adjacency; Linear on sparse features", () => {
    manualSeed(5);
    class Net extends nn.Module {
      constructor() { super(); this.lin = new nn.Linear(4, 3); this.conv = new nn.GCNConv(3, 2); }
      forward(x, adj) { return this.conv.forward(this.lin.forward(x), adj); }
    }
    const net = new Net();
    // x: sparse 3x4, adj: the 3-node GCN adjacency of 0 <-> 1 (self loops on all three).
    const x = { layout: "csr", shape: [3, 4], indptr: Int32Array.from([0, 2, 2, 3]), indices: Int32Array.from([0, 3, 1]), values: Float32Array.from([1, 2, 3]) };
    const r2 = 1 / 2;
    const adj = { layout: "csr", shape: [3, 3], indptr: Int32Array.from([0, 2, 4, 5]), indices: Int32Array.from([0, 1, 0, 1, 2]), values: Float32Array.from([r2, r2, r2, r2, 1]) };
    const { text } = trace(net, [{ name: "x", shape: [3, 4], layout: "csr", nnz: 3 }, { name: "adj", shape: [3, 3], layout: "csr", nnz: 5 }]);
    assert.match(text, /spmm\(%0, %1, %2, /, "nn.Linear on the sparse features is a sparse product");
    assert.equal(text.match(/= linear\(/g).length, 1, `only GCNConv's own weight is a dense linear:\n${text}`);
    const out = poptorch.inferenceModel(net).call(x, adj).data;
    const sd = net.stateDict();
    const [lw, lb, cw, cb] = ["lin.weight", "lin.bias", "conv.lin.weight", "conv.bias"].map((k) => sd[k].data);
    const dense = [[1, 0, 0, 2], [0, 0, 0, 0], [0, 3, 0, 0]];
    const h = dense.map((row) => [0, 1, 2].map((o) => lb[o] + row.reduce((a, v, f) => a + v * lw[o * 4 + f], 0)));
    const hw = h.map((row) => [0, 1].map((o) => row.reduce((a, v, f) => a + v * cw[o * 3 + f], 0)));
    const A = [[r2, r2, 0], [r2, r2, 0], [0, 0, 1]];
    for (let i = 0; i < 3; i++) for (let o = 0; o < 2; o++) {
      close(out[i * 2 + o], cb[o] + A[i].reduce((a, v, j) => a + v * hw[j][o], 0), 1e-5, `out[${i},${o}]`);
    }
  });

  test("GroupAddRev: an invertible region per layer, groups named blocks.i, fresh weights in each copy", () => {
    manualSeed(0);
    const net = new RevGNN({ features: 5, classes: 3, layers: 2 });
    const names = net.namedParameters().map(([k]) => k);
    assert.ok(names.includes("convs.1.convs.1.conv.lin_l.weight"), names.join(" "));
    assert.equal(names.filter((k) => k.startsWith("convs.0.")).length, 2 * 5);
    const sd = net.stateDict();
    assert.notDeepEqual(sd["convs.0.convs.0.conv.lin_l.weight"].data, sd["convs.0.convs.1.conv.lin_l.weight"].data,
      "the copy of the group has its own, fresh, parameters (PyG's deepcopy + reset_parameters)");
    const n = 6;
    const inputs = [
      { name: "x", shape: [n, 5], layout: "csr", nnz: 6 },
      { name: "adj", shape: [n, n], layout: "csr", nnz: 18 },
      { name: "y", shape: [n], dtype: "int32" },
      { name: "mask", shape: [n], dtype: "bool" },
    ];
    const { graph, text } = trace(net, inputs, { training: true });
    const calls = graph.nodes.filter((v) => v.opname === "call");
    assert.equal(calls.length, 2, text);
    assert.ok(graph.nodes.filter((v) => v.opname === "random_mask").length === 1, "one shared dropout mask");
    const plain = trace(new RevGNN({ features: 5, classes: 3, layers: 2, disable: true }), inputs, { training: true });
    assert.equal(plain.graph.nodes.filter((v) => v.opname === "call").length, 0, "disable: the plain computation");
    // A list of modules is the groups themselves.
    const list = new nn.GroupAddRev([new GNNBlock(2), new GNNBlock(2), new GNNBlock(2)]);
    assert.equal(list.numGroups, 3);
  });

  test("a wrapped RevGNN's getTracedModel({ regions: false }): tracedModel without the call nodes' region bodies", () => {
    manualSeed(0);
    const net = new RevGNN({ features: 5, classes: 3, layers: 3 });
    const model = poptorch.trainingModel(net, new poptorch.Options(), new poptorch.optim.Adam(net.parameters(), { lr: 0.01 }));
    assert.equal(model.getTracedModel({ regions: false }), null, "not traced before its first plan");
    const n = 6;
    model.plan(
      { name: "x", shape: [n, 5], layout: "csr", indptr: [0, 1, 2, 3, 4, 5, 6], indices: [0, 1, 2, 3, 4, 0], values: [1, 1, 1, 1, 1, 1] },
      { name: "adj", shape: [n, n], layout: "csr", indptr: [0, 1, 2, 3, 4, 5, 6], indices: [0, 1, 2, 3, 4, 5], values: [1, 1, 1, 1, 1, 1] },
      { name: "y", shape: [n], dtype: "int32" },
      { name: "mask", shape: [n], dtype: "bool" },
    );
    const full = model.tracedModel;
    const lean = model.getTracedModel({ regions: false });
    assert.equal(lean.text, full.text, "the printed text still prints every region");
    assert.match(lean.text, /region "convs\.2\.rev"/);
    assert.deepEqual(lean.parameters, full.parameters);
    const calls = full.graph.nodes.filter((v) => v.opname === "call");
    assert.equal(calls.length, 3);
    assert.ok(calls.every((c) => c.op === "call" && c.region?.forward?.nodes.length > 0 && c.region.inverse), "the full trace has each region");
    assert.ok(lean.graph.nodes.filter((v) => v.opname === "call").every((c) => c.op === "call" && !("region" in c)));
    // Otherwise the same JSON, node for node.
    const stripped = full.graph.nodes.map(({ region, ...rest }) => rest);
    assert.deepEqual(lean.graph.nodes, stripped);
    assert.deepEqual(lean.graph.values, full.graph.values);
    assert.deepEqual(lean.graph.outputs, full.graph.outputs);
    assert.deepEqual(model.getTracedModel({ regions: true }).graph, full.graph);
    assert.deepEqual(model.getTracedModel().graph, full.graph);
    assert.throws(() => model.getTracedModel({ region: false }), /getTracedModel: settings has no key the string "region": the settings are regions/);
    assert.throws(() => model.getTracedModel({ regions: 1 }), /getTracedModel: settings\.regions/);
  });

  test("GroupAddRev errors: PyG's messages, the sizes, a group's own exception", () => {
    assert.throws(() => new nn.GroupAddRev(new GNNBlock(2)), /Please specific 'num_groups'/);
    assert.throws(() => new nn.GroupAddRev(new GNNBlock(2), { numGroups: 1 }), /should not be smaller than '2' \(got 1\)/);
    assert.throws(() => new nn.GroupAddRev([new GNNBlock(2)], { numGroups: 2 }), /numGroups is 2 but 1 modules/);
    assert.throws(() => new nn.GroupAddRev(new GNNBlock(2), { numGroups: 2, split: 0 }), /has no option "split"/);
    assert.throws(() => new nn.GroupAddRev(42, { numGroups: 2 }), TypeError);
    class Odd extends nn.Module {
      constructor() { super(); this.rev = new nn.GroupAddRev(new GNNBlock(2), { numGroups: 2 }); }
      forward(x, adj) { return this.rev.forward(x, adj); }
    }
    const adjSpec = { name: "adj", shape: [4, 4], layout: "csr", nnz: 4 };
    assert.throws(() => trace(new Odd(), [{ name: "x", shape: [4, 5] }, adjSpec]), /size 5 along dim -1, which 2 groups cannot share equally/);
    class Boom extends nn.Module { forward() { throw new RangeError("boom in a group"); } }
    class Throws extends nn.Module {
      constructor() { super(); this.rev = new nn.GroupAddRev([new Boom(), new Boom()]); }
      forward(x, adj) { return this.rev.forward(x, adj); }
    }
    assert.throws(() => trace(new Throws(), [{ name: "x", shape: [4, 4] }, adjSpec]), { name: "RangeError", message: "boom in a group" });
    // The package still works after the rejected calls.
    assert.equal(trace(new Odd(), [{ name: "x", shape: [4, 4] }, adjSpec]).graph.nodes.filter((v) => v.opname === "call").length, 1);
  });

  test("reversible: the planner's and the executor's kept bytes are flat in depth (7 vs 28 layers, within 1%); without, they grow", () => {
    const [n, f] = [400, 50];
    // The loss alone, as a training model returns it.
    class Loss extends nn.Module {
      constructor(net) { super(); this.net = net; }
      forward(x, adj, y, mask) { return this.net.forward(x, adj, y, mask)[1]; }
    }
    const specs = [
      { name: "x", shape: [n, f], layout: "csr", nnz: 2000 },
      { name: "adj", shape: [n, n], layout: "csr", nnz: 4000 },
      { name: "y", shape: [n], dtype: "int32" },
      { name: "mask", shape: [n], dtype: "bool" },
    ];
    // The same sizes as host data: 5 features and 10 neighbours per node.
    const csr = (rows, cols, per, col) => ({
      layout: "csr", shape: [rows, cols],
      indptr: Int32Array.from({ length: rows + 1 }, (_, r) => r * per),
      indices: Int32Array.from({ length: rows * per }, (_, k) => col(Math.floor(k / per), k % per) % cols),
      values: Float32Array.from({ length: rows * per }, () => 1 / per),
    });
    const inputs = [
      csr(n, f, 5, (r, k) => r * 7 + k * 11),
      csr(n, n, 10, (r, k) => r + k * 37),
      { shape: [n], data: Int32Array.from({ length: n }, (_, i) => i % 3) },
      { shape: [n], data: Uint8Array.from({ length: n }, (_, i) => i % 2) },
    ];
    const kept = (layers, disable) => {
      manualSeed(1);
      const net = new Loss(new RevGNN({ features: f, hidden: 32, classes: 3, layers, disable }));
      const p = plan(trace(net, specs, { training: true }), {}, { training: true, optimizer: "adam" });
      assert.equal(p.valid, true, JSON.stringify(p.errors));
      const model = poptorch.trainingModel(net, new poptorch.Options(), new poptorch.optim.Adam(net.parameters(), { lr: 0.001 }));
      model.call(...inputs);
      const measured = model.stats.savedForBackward;
      model.destroy();
      return { planned: p.memory.ipus[0].livePeakBytes, measured };
    };
    const [r7, r28] = [kept(7, false), kept(28, false)];
    for (const k of ["planned", "measured"]) {
      assert.ok(Math.abs(r28[k] - r7[k]) <= 0.01 * r7[k], `reversible, ${k}: ${r7[k]} bytes at 7 layers, ${r28[k]} at 28`);
    }
    const [p7, p28] = [kept(7, true), kept(28, true)];
    for (const k of ["planned", "measured"]) {
      assert.ok(p28[k] > 2 * p7[k], `plain, ${k}: ${p7[k]} -> ${p28[k]} should grow with depth`);
      assert.ok(r28[k] * 2 < p28[k], `${k}: reversible ${r28[k]} vs plain ${p28[k]}`);
    }
  });
});

describe("RevGNN through poptorch.trainingModel", () => {
  test("a sparse first input: the plan's micro-batch is its rows, not the length of its indptr", () => {
    class Net extends nn.Module {
      constructor() { super(); this.lin = new nn.Linear(4, 3); }
      forward(x, y) { const out = this.lin.forward(x); return [out, out.crossEntropy(y)]; }
    }
    const net = new Net();
    const model = poptorch.trainingModel(net, new poptorch.Options(), new poptorch.optim.SGD(net.parameters(), { lr: 0.1 }));
    const x = { layout: "csr", shape: [3, 4], indptr: Int32Array.from([0, 2, 2, 3]), indices: Int32Array.from([0, 3, 1]), values: Float32Array.from([1, 2, 3]) };
    const p = model.plan(x, { shape: [3], dtype: "int32", data: Int32Array.from([0, 1, 2]) }, { throwOnInvalid: false });
    assert.equal(p.time.microBatchSize, 3);
    assert.equal(p.time.samplesPerStep, 3);
  });

  test("rev and disable give the same loss and the same trained weights (the inverse is exact)", async () => {
    const data = (await datasets.Planetoid("Cora", rawFiles("cora"), { split: "full", transform: ["AddSelfLoops"] })).data;
    const run = (disable) => {
      manualSeed(7);
      const net = new RevGNN({ features: data.numFeatures, hidden: 16, classes: 7, layers: 3, disable });
      const model = poptorch.trainingModel(net, new poptorch.Options().randomSeed(3), new poptorch.optim.Adam(net.parameters(), { lr: 0.01 }));
      const loader = new loaders.RandomNodeLoader(data, { numParts: 4, shuffle: true, seed: 2, fixedSize: true, epochs: 1 });
      const losses = [];
      for (const b of loader) losses.push(model.call(b.x, b.meanAdjacency(), b.y, b.trainMask)[1].data[0]);
      model.destroy();
      return { losses, sd: net.stateDict() };
    };
    const rev = run(false);
    const plain = run(true);
    rev.losses.forEach((l, i) => close(l, plain.losses[i], 1e-5, `loss ${i}`));
    for (const k of Object.keys(plain.sd)) {
      const [a, b] = [rev.sd[k].data, plain.sd[k].data];
      for (let i = 0; i < a.length; i++) close(a[i], b[i], 1e-4, `${k}[${i}]`);
    }
  });

  test("Cora: the loss falls over a few epochs and the evaluation beats chance", async () => {
    const data = (await datasets.Planetoid("Cora", rawFiles("cora"), { split: "full", transform: ["AddSelfLoops"] })).data;
    manualSeed(0);
    const net = new RevGNN({ features: data.numFeatures, hidden: 32, classes: 7, layers: 3 });
    const model = poptorch.trainingModel(net, new poptorch.Options(), new poptorch.optim.Adam(net.parameters(), { lr: 0.01 }));
    const loader = new loaders.RandomNodeLoader(data, { numParts: 4, shuffle: true, seed: 1, fixedSize: true, epochs: 5 });
    const epochs = [];
    for (let e = 0; e < 5; e++) {
      let [tot, cnt] = [0, 0];
      for (const b of loader) {
        const [, loss] = model.call(b.x, b.meanAdjacency(), b.y, b.trainMask);
        tot += loss.data[0] * b.numTrain;
        cnt += b.numTrain;
      }
      epochs.push(tot / cnt);
    }
    assert.ok(epochs[4] < 0.8 * epochs[0], `loss ${epochs.join(" -> ")}`);
    const logits = poptorch.inferenceModel(net).call(data.x, data.meanAdjacency());
    assert.deepEqual(logits.shape, [2708, 7]);
    let [ok, all] = [0, 0];
    const [y, test] = [data.y.data, data.testMask.data];
    for (let i = 0; i < 2708; i++) {
      if (!test[i]) continue;
      const row = logits.data.subarray(i * 7, i * 7 + 7);
      ok += row.indexOf(Math.max(...row)) === y[i];
      all++;
    }
    assert.ok(ok / all > 0.5, `test accuracy ${ok / all} after 5 epochs`);
  });
});
