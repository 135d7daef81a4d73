// The page's Python features an exported model (`model.toPython`) calls, each forwarded to
// one package op, checked against PyTorch's values for the same call (worked out by hand
// from PyTorch's definitions, noted beside each) and against the op it records: torch.where,
// index_select, gather, split, cat, full, the arithmetic functions, torch.max's values and
// indices, a slice with a step, `to`, F.linear, F.layer_norm, F.one_hot, F.conv2d and the
// pools, F.cross_entropy's ignore_index and label_smoothing; nn.Module's add_module,
// get_submodule, get_parameter, get_buffer, register_parameter; nn.init; and
// safetensors.torch.load_file through the package's `loadSafetensors`.
import { describe, test, before } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { createRequire } from "node:module";
import { loadTestPython } from "./python-runner.mjs";
import { REPO } from "./helpers.mjs";

const api = createRequire(path.join(REPO, "tests", "consumer", "package.json"))("ipu-playground");
const { poptorch } = api;

let python;
before(async () => {
  python = await loadTestPython(api);
});

const context = () => ({ options: new poptorch.Options(), ipus: 4, half: false, dataset: "Cora" });

/** What the page needs from a file that only prints (a model to plan). */
const TAIL = `\nimport poptorch as _p\nimport torch as _t\nmodel = _p.inferenceModel(_t.nn.Linear(1, 1))\ninputs = {"x": _t.empty(1, 1)}\n`;

/** Runs `code` as model.py; what it printed (one JSON line per print) and its exports. */
async function run(code, { tail = false } = {}) {
  const lines = [];
  const log = console.log;
  console.log = (s) => lines.push(String(s));
  let exports;
  try {
    exports = await python.run(tail ? code + TAIL : code, context());
  } finally {
    console.log = log;
  }
  return { exports, printed: lines.join("\n").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)) };
}

/** `actual` (nested lists) equal to `expected` within float32 rounding. */
function close(actual, expected, what) {
  const flat = (v) => (Array.isArray(v) ? v.flatMap(flat) : [v]);
  const shape = (v) => (Array.isArray(v) ? [v.length, ...shape(v[0])] : []);
  assert.deepEqual(shape(actual), shape(expected), `${what}: shape`);
  flat(actual).forEach((x, i) => {
    const y = flat(expected)[i];
    assert.ok(Math.abs(x - y) <= 1e-5 + 1e-5 * Math.abs(y), `${what}: element ${i} is ${x}, PyTorch gives ${y}`);
  });
}

/** The traced graph's ops but placeholders. */
const ops = (model) => model.tracedModel.graph.nodes.filter((n) => n.op !== "placeholder").map((n) => n.op);

describe("the Python an exported model calls", () => {
  test("torch.where, index_select, gather, split, cat, full, add/sub/mul/div/neg, max, a stepped slice, to: PyTorch's values, one op each", async () => {
    const code = `import json
import torch
import poptorch


class Ops(torch.nn.Module):
    def forward(self, x, c, idx, g):
        a, b = torch.split(x, [1, 2], dim=1)
        parts = torch.split(x, 2, dim=1)  # sizes 2 and 1
        m = torch.max(x, dim=1)
        return (
            torch.where(c, x, torch.neg(x)),
            torch.index_select(x, 1, idx.long()),
            torch.gather(x, 1, g.long()),
            a, b, parts[0], parts[1],
            torch.cat([b, a], dim=1),
            torch.mul(x, torch.full((2, 3), 0.5, dtype=torch.float32, device=x.device)),
            torch.div(torch.sub(torch.add(x, x), x), x),
            m.values,
            m.indices,
            x[:, ::2],
            idx.to(torch.int32),
            idx.to(torch.int32, copy=True),
            torch.chunk(x, 2, dim=1)[1],  # pieces of ceil(3 / 2) = 2: the second is one column
            torch.pow(torch.mul(x, x), torch.full((), 0.5, dtype=torch.float32)),
            tuple(torch.max(x, dim=0))[1],
        )


model = poptorch.inferenceModel(Ops())
outs = model(
    torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]),
    torch.tensor([[True, False, True], [False, True, False]], dtype=torch.bool),
    torch.tensor([2, 0]),
    torch.tensor([[0, 0], [2, 1]]),
)
for o in outs:
    print(json.dumps(o.tolist()))
`;
    const { exports, printed } = await run(code);
    const want = [
      [[1, 2, 3], [-4, 5, 6]], // where(c, x, -x)
      [[3, 1], [-6, 4]], // columns 2 and 0
      [[1, 1], [-6, 5]], // x[i][g[i][j]]
      [[1], [4]],
      [[-2, 3], [5, -6]],
      [[1, -2], [4, 5]],
      [[3], [-6]],
      [[-2, 3, 1], [5, -6, 4]],
      [[0.5, -1, 1.5], [2, 2.5, -3]],
      [[1, 1, 1], [1, 1, 1]], // (x + x - x) / x
      [3, 5],
      [2, 1],
      [[1, 3], [4, -6]],
      [2, 0],
      [2, 0],
      [[3], [-6]],
      [[1, 2, 3], [4, 5, 6]], // sqrt(x * x) = |x|
      [1, 1, 0], // the row of each column's max
    ];
    assert.equal(printed.length, want.length);
    want.forEach((w, i) => close(printed[i], w, `output ${i}`));
    const traced = ops(exports.default.model);
    // One split op per torch.split, one full, no cast for the int32 `.long()` and `.to(int32)`
    // (PyTorch returns the tensor itself), one for `copy=True`.
    assert.equal(traced.filter((o) => o === "split").length, 3, traced.join(" "));
    assert.equal(traced.filter((o) => o === "full").length, 2, traced.join(" "));
    assert.equal(traced.filter((o) => o === "cast").length, 1, traced.join(" "));
    for (const o of ["where", "index_select", "gather", "concat", "max", "arg_max", "slice"]) assert.ok(traced.includes(o), `${o} in ${traced.join(" ")}`);
  });

  test("F.linear, F.layer_norm, F.one_hot, F.conv2d, F.max_pool2d, F.avg_pool2d, F.adaptive_avg_pool2d: PyTorch's values, one op each", async () => {
    const code = `import json
import torch
import torch.nn.functional as F
import poptorch


class Functional(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))
        self.b = torch.nn.Parameter(torch.tensor([0.5, -0.5]))
        self.k = torch.nn.Parameter(torch.tensor([[[[1.0, 0.0], [0.0, -1.0]]]]))
        self.kb = torch.nn.Parameter(torch.tensor([0.5]))

    def forward(self, x, idx, img):
        return (
            F.linear(x, self.w, self.b),
            F.layer_norm(x, (3,)),
            F.one_hot(idx.long(), 3),
            F.conv2d(img, self.k, self.kb),
            F.conv2d(img, self.k, self.kb, stride=(2, 2), padding=(1, 1), dilation=(1, 1), groups=1),
            F.max_pool2d(img, (2, 2), stride=(1, 1), padding=(0, 0), dilation=(1, 1), ceil_mode=False),
            F.avg_pool2d(img, (2, 2), stride=(1, 1), padding=(0, 0), ceil_mode=False, count_include_pad=True),
            F.adaptive_avg_pool2d(img, (1, 1)),
        )


model = poptorch.inferenceModel(Functional())
outs = model(
    torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]),
    torch.tensor([2, 0]),
    torch.tensor([[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]]]),
)
for o in outs:
    print(json.dumps(o.tolist()))
`;
    const { exports, printed } = await run(code);
    const want = [
      [[4.5, -2.5], [-1.5, 4.5]], // x @ w.T + b
      // (x - mean) / sqrt(biased var + 1e-5) per row
      [[0.16222122902678932, -1.2977698322143143, 1.135548603187525], [0.6040403272520274, 0.8053871030027032, -1.4094274302547307]],
      [[0, 0, 1], [1, 0, 0]],
      [[[[-3.5, -3.5], [-3.5, -3.5]]]], // x[i][j] - x[i+1][j+1] + 0.5
      [[[[-0.5, -2.5], [-6.5, -3.5]]]], // on the zero-padded 5 x 5 input, every other window
      [[[[5, 6], [8, 9]]]],
      [[[[3, 4], [6, 7]]]],
      [[[[5]]]],
    ];
    assert.equal(printed.length, want.length);
    want.forEach((w, i) => close(printed[i], w, `output ${i}`));
    const traced = ops(exports.default.model);
    for (const o of ["linear", "layer_norm", "one_hot", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"]) assert.ok(traced.includes(o), `${o} in ${traced.join(" ")}`);
    assert.ok(!traced.includes("mat_mul"), "F.linear is the linear op, not a matmul and an add");
  });

  test("F.cross_entropy's ignore_index and label_smoothing: PyTorch's mean losses", async () => {
    const code = `import json
import torch
import torch.nn.functional as F
import poptorch


class Losses(torch.nn.Module):
    def forward(self, logits, target):
        return (
            F.cross_entropy(logits, target),
            F.cross_entropy(logits, target, ignore_index=2),
            F.cross_entropy(logits, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.1),
        )


model = poptorch.inferenceModel(Losses())
outs = model(torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3], [1.0, -1.0, 0.0]]), torch.tensor([0, 2, 1]))
for o in outs:
    print(json.dumps(o.tolist()))
`;
    const { printed } = await run(code);
    // nll_i = logsumexp(row_i) - row_i[target_i]; with label smoothing e:
    // (1 - e) nll_i + e / C * sum_c (logsumexp(row_i) - row_i[c]); means over the counted rows.
    close(printed[0], 1.2169533697769273, "mean");
    close(printed[1], 1.3244586305507688, "ignore_index=2: rows 0 and 2 only");
    close(printed[2], 1.2369533697769273, "label_smoothing=0.1");
    await assert.rejects(
      python.run(code.replace('reduction="mean", label_smoothing=0.1', 'reduction="sum"'), context()),
      (e) => /mean reduction without class weights/.test(e.message),
    );
  });

  test("nn.Module: add_module, get_submodule, get_parameter, get_buffer, register_parameter; nn.init.uniform_", async () => {
    const code = `import json
import torch
import poptorch


root = torch.nn.Module()
root.add_module("layers", torch.nn.Module())
root.layers.add_module("0", torch.nn.Linear(3, 2))
value = torch.empty((2,), dtype=torch.float32)
torch.nn.init.uniform_(value, -0.25, 0.25)
print(json.dumps(value.tolist()))
print(json.dumps([torch.nn.init.zeros_(torch.empty(2)).tolist(), torch.nn.init.ones_(torch.empty(1, 2)).tolist()]))
root.layers.register_parameter("scale", torch.nn.Parameter(torch.tensor([2.0, 3.0])))
root.layers.register_buffer("count", torch.zeros((1,), dtype=torch.float32))
assert root.get_submodule("layers.0") is root.layers._submodules["0"]
assert root.get_submodule("") is root
print(json.dumps(list(root.get_parameter("layers.0.weight").shape)))
print(json.dumps(root.get_parameter("layers.scale").tolist()))
print(json.dumps(root.get_buffer("layers.count").tolist()))
print(json.dumps(sorted(n for n, _ in root.named_parameters())))
for bad in ("layers.1.weight", "layers.nothing", "layers.count"):
    try:
        root.get_parameter(bad)
        print(json.dumps("no error for " + bad))
    except AttributeError as e:
        print(json.dumps(str(e)))
`;
    const { printed } = await run(code, { tail: true });
    assert.equal(printed[0].length, 2);
    assert.ok(printed[0].every((v) => v >= -0.25 && v <= 0.25) && printed[0][0] !== printed[0][1], JSON.stringify(printed[0]));
    assert.deepEqual(printed[1], [[0, 0], [[1, 1]]]);
    assert.deepEqual(printed[2], [2, 3]);
    assert.deepEqual(printed[3], [2, 3]);
    assert.deepEqual(printed[4], [0]);
    assert.deepEqual(printed[5], ["layers.0.bias", "layers.0.weight", "layers.scale"]);
    assert.match(printed[6], /has no attribute `1`/);
    assert.match(printed[7], /`nothing` is not a parameter/);
    assert.match(printed[8], /`count` is not a parameter/);
  });

  test("the package's Tensor.scatterAdd, scatterMean and batchNorm (thin bindings): PyG's scatter sums and means, training-mode batch norm", () => {
    class Scatter extends api.nn.Module {
      forward(src, index) {
        const [y, mean, variance] = src.reshape([1, 4, 2]).permute([0, 2, 1]).batchNorm(null, null, 1e-5);
        return [src.scatterAdd(index, 3), src.scatterMean(index, 3), y, mean, variance];
      }
    }
    const model = poptorch.inferenceModel(new Scatter());
    const out = model.call(
      { name: "src", shape: [4, 2], data: new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]) },
      { name: "index", shape: [4], dtype: "int32", data: new Int32Array([0, 2, 0, 2]) },
    );
    const values = out.map((t) => Array.from(t.data));
    // Rows 0 and 2 of src go to 0, rows 1 and 3 to 2; row 1 gets none (0 for both reductions).
    close(values[0], [1 + 5, 2 + 6, 0, 0, 3 + 7, 4 + 8], "scatterAdd");
    close(values[1], [3, 4, 0, 0, 5, 6], "scatterMean");
    // Channels [1, 3, 5, 7] and [2, 4, 6, 8]: means 4 and 5, biased variance 5 (y, with eps
    // 1e-5), unbiased 20/3.
    const s = Math.sqrt(5 + 1e-5);
    close(values[2], [-3 / s, -1 / s, 1 / s, 3 / s, -3 / s, -1 / s, 1 / s, 3 / s], "batch norm's y");
    close(values[3], [4, 5], "batch mean");
    close(values[4], [20 / 3, 20 / 3], "unbiased batch variance");
    model.destroy();
  });

  test("a submodule's parameter read in its parent's forward is named by the submodule's path, in Python and JavaScript", async () => {
    const code = `import torch
import poptorch


class Parent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = torch.nn.Module()
        self.embeddings.add_module("position", torch.nn.Module())
        self.embeddings.position.register_parameter("weight", torch.nn.Parameter(torch.ones(3, 2)))
        self.embeddings.add_module("word", torch.nn.Module())
        self.embeddings.word.register_parameter("weight", torch.nn.Parameter(torch.ones(3, 2)))

    def forward(self, x):
        return torch.matmul(x, self.embeddings.position.weight) + torch.matmul(x, self.get_parameter("embeddings.word.weight"))


model = poptorch.inferenceModel(Parent())
inputs = {"x": torch.empty(1, 3)}
`;
    const { exports } = await run(code);
    const { model } = exports.default;
    model.plan({ name: "x", shape: [1, 3] });
    assert.deepEqual(model.tracedModel.parameters.map(([n]) => n), ["embeddings.position.weight", "embeddings.word.weight"]);

    class Child extends api.nn.Module {
      constructor() {
        super();
        this.registerParameter("weight", [1, 2, 3, 4, 5, 6], [3, 2]);
      }
    }
    class JsParent extends api.nn.Module {
      constructor() {
        super();
        this.a = new Child();
        this.b = new Child();
      }
      forward(x) {
        return x.matmul(this.a.param("weight")).add(x.matmul(this.b.param("weight")));
      }
    }
    const js = poptorch.inferenceModel(new JsParent());
    js.plan({ name: "x", shape: [1, 3] });
    assert.deepEqual(js.tracedModel.parameters.map(([n]) => n), ["a.weight", "b.weight"]);
    js.destroy();
  });

  test("safetensors.torch.load_file: the package's bytes back as host tensors, loaded strictly; a bad file's cause", async () => {
    const net = new api.nn.Linear(3, 2);
    const model = poptorch.inferenceModel(net);
    model.call({ shape: [1, 3], data: new Float32Array(3) });
    const bytes = model.safetensors();
    python.pyodide.FS.writeFile("/tmp/w.safetensors", bytes);
    python.pyodide.FS.writeFile("/tmp/bad.safetensors", bytes.slice(0, 20));
    const state = net.stateDict();
    const code = `import json
import safetensors.torch
import torch

sd = safetensors.torch.load_file("/tmp/w.safetensors")
print(json.dumps({k: [list(v.shape), v.dtype.name, v.tolist()] for k, v in sorted(sd.items())}))
lin = torch.nn.Linear(3, 2)
lin.load_state_dict(sd, strict=True)
print(json.dumps(lin.weight.tolist()))
try:
    safetensors.torch.load_file("/tmp/bad.safetensors")
except Exception as e:
    print(json.dumps(str(e)))
`;
    const { printed } = await run(code, { tail: true });
    const w = Array.from(state.weight.data);
    const b = Array.from(state.bias.data);
    close(printed[0].weight[2], [w.slice(0, 3), w.slice(3)], "weight");
    assert.deepEqual(printed[0].weight.slice(0, 2), [[2, 3], "float32"]);
    close(printed[0].bias[2], b, "bias");
    close(printed[1], [w.slice(0, 3), w.slice(3)], "the loaded module's weight");
    assert.match(printed[2], /safetensors: the header is \d+ bytes long/);
    model.destroy();
  });
});
