// PyG's code as written, from the npm package imported by name: `conv(x, edge_index)` with a
// [2, E] int32 edge_index (duplicate edges, self-loops, nodes that receive nothing), PyG's
// parameter names loaded strictly (`convs.i` of GroupAddRev), a state dict as PyTorch gives
// one (`tensor.tolist()` nested lists, a Map of name to tensor), and the gradients of a
// training step read as PopTorch reads them (`Options.anchorTensor` +
// `model.getAnchoredTensor`). Every value is checked against PyG's own, from
// tests/golden/pyg/convs.json (tests/golden/make_pyg_golden.py).
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { REPO } from "./helpers.mjs";

const pkg = createRequire(path.join(REPO, "tests", "consumer", "index.mjs"))("ipu-playground");
const { nn, poptorch } = pkg;

const CASES = JSON.parse(fs.readFileSync(path.join(REPO, "tests", "golden", "pyg", "convs.json"), "utf8")).cases;

/** A golden tensor as PyTorch's `tensor.tolist()`: nested arrays of its shape. */
function nested({ shape, data }) {
  const build = (dim, offset) => {
    if (dim === shape.length) return data[offset];
    const stride = shape.slice(dim + 1).reduce((a, b) => a * b, 1);
    return Array.from({ length: shape[dim] }, (_, i) => build(dim + 1, offset + i * stride));
  };
  return build(0, 0);
}

function close(what, got, want, atol = 1e-5, rtol = 1e-4) {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    assert.ok(Math.abs(got[i] - want[i]) <= atol + rtol * Math.abs(want[i]), `${what}[${i}]: got ${got[i]}, PyG ${want[i]}`);
  }
}

function makeConv(c) {
  const { in: cin, out: cout } = c.args;
  if (c.module === "SAGEConv") return new nn.SAGEConv(cin, cout, { aggr: c.args.aggr });
  if (c.module === "GCNConv") return new nn.GCNConv(cin, cout);
  return new nn.GroupAddRev(new nn.SAGEConv(cin, cout), { numGroups: c.args.num_groups });
}

/** The case's module with PyG's parameters, loaded strictly by PyG's names: as nested
 * lists, or (GroupAddRev) a Map of host tensors, as `torch.load` gives a state dict. */
function pygModule(c) {
  const conv = makeConv(c);
  const entries = Object.entries(c.params);
  const dict = c.module === "GroupAddRev"
    ? new Map(entries.map(([k, v]) => [k, { shape: v.shape, data: Float32Array.from(v.data) }]))
    : Object.fromEntries(entries.map(([k, v]) => [k, nested(v)]));
  conv.loadStateDict(dict);
  return conv;
}

const edgeIndex = (c) => ({ shape: c.edge_index.shape, dtype: "int32", data: Int32Array.from(c.edge_index.data) });
const f32 = (t) => ({ shape: t.shape, data: Float32Array.from(t.data) });

class Probe extends nn.Module {
  constructor(conv) { super(); this.conv = conv; }
  forward(x, edgeIndex, g) {
    const out = this.conv.forward(x, edgeIndex);
    return [out, poptorch.identityLoss(out.mul(g), "sum")];
  }
}

describe("PyG's calling conventions", () => {
  for (const c of CASES) {
    test(`${c.name}: ${c.module}(x, edge_index) gives PyG's output, and a step PyG's gradients`, () => {
      const conv = pygModule(c);
      const sd = conv.stateDict();
      assert.deepEqual(Object.keys(sd).sort(), Object.keys(c.params).sort());
      const x = f32(c.x);
      const infer = poptorch.inferenceModel(new Probe(conv));
      const [out] = infer.call(x, edgeIndex(c), f32(c.grad_output));
      close(`${c.name}: out`, out.data, c.out.data);
      infer.destroy();

      const opts = new poptorch.Options();
      for (const name of Object.keys(c.params)) opts.anchorTensor(`grad ${name}`, `Gradient___model.conv.${name}`);
      const net = new Probe(pygModule(c));
      const train = poptorch.trainingModel(net, opts, new poptorch.optim.SGD(net.parameters(), { lr: 0 }));
      train.call(x, edgeIndex(c), f32(c.grad_output));
      for (const name of Object.keys(c.params)) {
        const g = train.getAnchoredTensor(`grad ${name}`);
        assert.deepEqual(g.shape, c.grads[name].shape);
        close(`${c.name}: ${name}.grad`, g.data, c.grads[name].data);
      }
      assert.throws(() => train.getAnchoredTensor("nope"), /No tensor with name nope found\./);
    });
  }

  test("a state dict's values may be nested lists or numbers; a ragged one names its place", () => {
    const lin = new nn.Linear(2, 3);
    lin.loadStateDict({ weight: [[1, 2], [3, 4], [5, 6]], bias: [0.5, -1, 2] });
    assert.deepEqual(Array.from(lin.stateDict().weight.data), [1, 2, 3, 4, 5, 6]);
    assert.throws(() => lin.loadStateDict({ weight: [[1, 2], [3], [5, 6]], bias: [0, 0, 0] }),
      /loadStateDict: state_dict\["weight"\]\[1\] must hold 2 items like the others at its depth, got 1/);
    assert.throws(() => lin.loadStateDict({ weight: [[1, 2], [3, [4]], [5, 6]], bias: [0, 0, 0] }),
      /state_dict\["weight"\]\[1\]\[1\] must be a number \(the nesting is ragged\), got an array/);
    assert.throws(() => lin.loadStateDict({ weight: [[1, 2], [3, 4]], bias: [0, 0, 0] }),
      /weight/);
    assert.throws(() => lin.loadStateDict({ weight: [[1, 2], [3, "x"], [5, 6]], bias: [0, 0, 0] }),
      /state_dict\["weight"\] \(value 3 in row-major order\)/);
    assert.throws(() => lin.loadStateDict(new Map([[1, [0]]])), /key 0 must be a string, got the number 1/);
    // A strict load still names what is missing and unexpected.
    assert.throws(() => lin.loadStateDict(new Map([["weight", [[1, 2], [3, 4], [5, 6]]], ["bais", [0, 0, 0]]])),
      /Missing key\(s\) in state_dict: "bias"\. Unexpected key\(s\) in state_dict: "bais"\./);
  });

  test("an edge_index of the wrong shape or dtype is named", () => {
    const conv = new nn.SAGEConv(3, 2);
    class M extends nn.Module {
      constructor() { super(); this.conv = conv; }
      forward(x, e) { return this.conv.forward(x, e); }
    }
    const m = poptorch.inferenceModel(new M());
    assert.throws(() => m.call({ shape: [4, 3], data: new Float32Array(12) }, { shape: [3, 2], dtype: "int32", data: new Int32Array(6) }),
      /edge_index an int32 \[2, num_edges\] tensor \(sources, then targets\), got edge_index i32\[3,2\]/);
  });
});
