// The page's Python (www/python, run by Pyodide as the worker runs it, through
// www/engine/python.js) against the same models written in JavaScript: the same plans, the
// same PopTorch errors, and each op's source line the Python file's. One Pyodide for the file.
import { describe, test, before } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { createRequire } from "node:module";
import { loadTestPython } from "./python-runner.mjs";
import { REPO } from "./helpers.mjs";

const api = createRequire(path.join(REPO, "tests", "consumer", "package.json"))("ipu-playground");
const { nn, poptorch, block, beginBlock, constant } = api;
const { pythonTraceback } = await import(path.join(REPO, "www", "engine", "python.js"));

let python;
before(async () => {
  python = await loadTestPython(api);
});

/** The page's context (analysis.js codeContext): the panel's options as a poptorch.Options. */
const context = (json = {}, extra = {}) => ({ options: poptorch.Options.fromJSON(json), ipus: 4, half: false, dataset: "Cora", ...extra });

/** Runs `code` as model.py; its model planned on the combined batch, as the page plans it. */
async function runPython(code, json = {}) {
  const exports = await python.run(code, context(json));
  return { exports, ...planOf(exports.default) };
}

function planOf({ model, inputs }) {
  const factor = model.combinedBatchFactor;
  const call = inputs.map((s) => ({ name: s.name, dtype: s.dtype, shape: [s.shape[0] * factor, ...s.shape.slice(1)] }));
  return { model, plan: model.plan(...call, { throwOnInvalid: false }) };
}

/** A plan as JSON with every `file:line` (model.py:12, python.test.mjs:80) left out. */
const digest = (plan) => JSON.stringify(plan, (_, v) => (typeof v === "string" ? v.replace(/[\w.-]+\.(py|mjs|js):\d+/g, "<site>") : v));

/** The 1-based line of the first line of `code` that contains `text`. */
const lineOf = (code, text) => code.split("\n").findIndex((l) => l.includes(text)) + 1;

const MLP_PY = `import torch
import poptorch
from playground import options

class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x, labels):
        poptorch.Block.start("first", 0)
        h = self.fc1(x).relu()
        poptorch.Block.start("second", 1)
        logits = self.fc2(h)
        return logits, torch.nn.functional.cross_entropy(logits, labels)

net = MLP()
options.Training.gradientAccumulation(GA)
model = poptorch.trainingModel(net, options, poptorch.optim.Adam(net.parameters(), lr=0.001))
inputs = {"x": torch.empty(8, 16), "labels": torch.empty(8, dtype=torch.int32)}
`;

class MlpJs extends nn.Module {
  constructor() {
    super();
    this.fc1 = new nn.Linear(16, 32);
    this.fc2 = new nn.Linear(32, 4);
  }
  forward(x, labels) {
    beginBlock("first", 0);
    const h = this.fc1.forward(x).relu();
    beginBlock("second", 1);
    const logits = this.fc2.forward(h);
    return [logits, logits.crossEntropy(labels)];
  }
}

function mlpJs(ga) {
  const net = new MlpJs();
  const options = poptorch.Options.fromJSON({});
  options.Training.gradientAccumulation(ga);
  const model = poptorch.trainingModel(net, options, new poptorch.optim.Adam(net.parameters(), { lr: 0.001 }));
  return { model, inputs: [{ name: "x", shape: [8, 16], dtype: "float32" }, { name: "labels", shape: [8], dtype: "int32" }] };
}

describe("Python in Pyodide, forwarded to the package", () => {
  test("an MLP in two Blocks, pipelined over 2 IPUs with Adam: the JavaScript model's plan, byte for byte; ops at their Python lines", async () => {
    const code = MLP_PY.replace("GA", "4");
    const py = await runPython(code);
    const js = planOf(mlpJs(4));
    assert.equal(py.plan.valid, true, JSON.stringify(py.plan.errors));
    assert.equal(py.plan.ipusUsed, 2);
    assert.equal(digest(py.plan), digest(js.plan));
    const text = py.model.tracedModel.text;
    assert.match(text, new RegExp(`linear\\(.*# fc1 \\| block "first" ipu 0 \\| model\\.py:${lineOf(code, "self.fc1(x)")}`));
    assert.match(text, new RegExp(`cross_entropy\\(.*block "second" ipu 1 \\| model\\.py:${lineOf(code, "cross_entropy")}`));
    assert.equal(digest(py.model.tracedModel.graph.nodes.map((n) => n.meta?.block ?? null)), digest(js.model.tracedModel.graph.nodes.map((n) => n.meta?.block ?? null)));
  });

  test("setCallerSite: the site ops record while it is set, the JS caller's again once cleared; bad arguments are refused", () => {
    class Two extends nn.Module {
      forward(x) {
        api.setCallerSite("told.py", 41);
        const a = x.relu();
        api.setCallerSite(null);
        return a.exp();
      }
    }
    const { text } = api.trace(new Two(), [{ name: "x", shape: [2] }]);
    assert.match(text, /relu\(.*# told\.py:41\n/);
    assert.match(text, /exp\(.*# python\.test\.mjs:\d+\n/);
    assert.throws(() => api.setCallerSite("a.py", 0), RangeError);
    assert.throws(() => api.setCallerSite("a.py", 1.5), TypeError);
    assert.throws(() => api.setCallerSite(7, 1), TypeError);
    assert.throws(() => api.setCallerSite("line\nbreak", 1));
    api.setCallerSite(undefined);
  });

  test("gradient accumulation below the 2F − 1 pipeline stages: PopTorch's error, as in JavaScript", async () => {
    const py = await runPython(MLP_PY.replace("GA", "2"));
    const js = planOf(mlpJs(2));
    assert.equal(py.plan.valid, false);
    assert.deepEqual(py.plan.errors.map((e) => e.message), js.plan.errors.map((e) => e.message));
    assert.match(py.plan.errors[0].message, /gradientAccumulation \(2\) must be greater than or equal to the number of pipeline stages \(3\)/);
  });

  test("wrapping a model twice: PopTorch's message at the Python line", async () => {
    const code = `import torch, poptorch
net = torch.nn.Linear(4, 4)
a = poptorch.trainingModel(net)
b = poptorch.trainingModel(net)
`;
    await assert.rejects(python.run(code, context()), (err) => {
      assert.equal(err.line, 4);
      assert.match(err.message, /Model has already been wrapped in 'poptorch\.trainingModel'\. Call model\.destroy\(\) on the model to unwrap before wrapping again\./);
      return true;
    });
  });

  test("a file that gives the page no model says what to set", async () => {
    await assert.rejects(python.run("print('hello')\n", context()), (err) => {
      assert.match(err.message, /^model\.py must set `model`/);
      return true;
    });
  });

  test("Python's own errors: a syntax error at its line and column, a runtime error at the user's frame", async () => {
    await assert.rejects(python.run("import torch\nx = (1,\n", context()), (err) => {
      assert.equal(err.kind, "syntax");
      assert.equal(err.line, 2);
      return true;
    });
    const code = `import torch
def f():
    return torch.nn.Linear(4, 4).nope
f()
`;
    await assert.rejects(python.run(code, context()), (err) => {
      assert.equal(err.kind, "model");
      assert.equal(err.line, 3);
      assert.match(err.message, /^AttributeError: .*nope/);
      return true;
    });
  });

  test("a shape error in forward, met by the page's own plan call, has the Python traceback's line", async () => {
    const code = `import torch, poptorch
class Bad(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)
    def forward(self, x):
        return self.fc(x)
model = poptorch.inferenceModel(Bad())
inputs = [torch.empty(2, 5)]
`;
    const exports = await python.run(code, context());
    assert.throws(() => planOf(exports.default), (err) => {
      const tb = pythonTraceback(err.message);
      assert.equal(tb.line, 7);
      assert.match(tb.message, /Linear.*8.*5|shape|5.*8/i);
      return true;
    });
  });
});

describe("running a model from Python", () => {
  test("a buffer counter called three times (§A.8): host tensors in and out, print() to the console", async () => {
    const code = `import torch, poptorch
from playground import options

class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))
        self.fc = torch.nn.Linear(8, 8)
    def forward(self, x):
        self.count += 1
        return self.fc(x) + self.count

net = Counter()
model = poptorch.inferenceModel(net, options)
for call in range(3):
    out = model(torch.ones(4, 8))
    model.copyWeightsToHost()
    print(f"after call {call + 1}: count = {net.state_dict()['count'].tolist()}, out {list(out.shape)}")
inputs = [torch.empty(4, 8)]
`;
    const lines = [];
    const log = console.log;
    console.log = (s) => lines.push(String(s));
    try {
      await python.run(code, context());
    } finally {
      console.log = log;
    }
    assert.deepEqual(lines.join("\n").trim().split("\n"), [
      "after call 1: count = [1.0], out [4, 8]",
      "after call 2: count = [2.0], out [4, 8]",
      "after call 3: count = [3.0], out [4, 8]",
    ]);
  });
});

describe("torch.nn.LayerNorm's eps", () => {
  // torch.nn.functional.layer_norm(x, (4,), eps=0.5) in PyTorch 2.15.0.
  const X = [[1, 2, 3, 4], [0.5, -1, 2, 0]];
  const TORCH = [
    [-1.1338934898376465, -0.37796449661254883, 0.37796449661254883, 1.1338934898376465],
    [0.09667365252971649, -1.0634101629257202, 1.2567574977874756, -0.2900209426879883],
  ];
  test("LayerNorm(4, eps=0.5) in Python: the traced eps and PyTorch's values; elementwise_affine=False and a bad eps are errors", async () => {
    const code = `import torch, poptorch
norm = torch.nn.LayerNorm(4, eps=0.5)
model = poptorch.inferenceModel(norm)
print(model(torch.tensor(${JSON.stringify(X)})).tolist())
inputs = [torch.empty(2, 4)]
`;
    const lines = [];
    const log = console.log;
    console.log = (s) => lines.push(String(s));
    let exports;
    try {
      exports = await python.run(code, context());
    } finally {
      console.log = log;
    }
    const got = JSON.parse(lines.join("\n").trim());
    got.forEach((row, i) => row.forEach((v, j) => assert.ok(Math.abs(v - TORCH[i][j]) < 1e-6, `[${i}][${j}]: ${v}, PyTorch ${TORCH[i][j]}`)));
    exports.default.model.plan({ name: "x", shape: [2, 4], dtype: "float32" });
    const ln = exports.default.model.tracedModel.graph.nodes.find((n) => n.op === "layer_norm");
    assert.equal(ln.eps, 0.5);
    await assert.rejects(python.run("import torch\nnorm = torch.nn.LayerNorm(4, elementwise_affine=False)\n", context()), (err) => /ValueError: LayerNorm: elementwise_affine=False is not in this engine/.test(err.message) && err.line === 2);
    await assert.rejects(python.run("import torch\nnorm = torch.nn.LayerNorm(4, eps=-1.0)\n", context()), (err) => /LayerNorm: options\.eps must be a positive number, got -1/.test(err.message) && err.line === 2);
  });
  test("new nn.LayerNorm(4, { eps: 0.5 }) in JavaScript: PyTorch's values; unknown options are errors", () => {
    const norm = new nn.LayerNorm(4, { eps: 0.5 });
    const model = poptorch.inferenceModel(norm);
    const out = model.call({ shape: [2, 4], dtype: "float32", data: Float32Array.from(X.flat()) });
    Array.from(out.data).forEach((v, k) => assert.ok(Math.abs(v - TORCH.flat()[k]) < 1e-6, `${k}: ${v}`));
    assert.throws(() => new nn.LayerNorm(4, { epsilon: 0.5 }), /LayerNorm: options has no option "epsilon": the option is eps/);
    assert.throws(() => new nn.LayerNorm(4, { eps: 0 }), /LayerNorm: options.eps must be a positive number, got 0/);
  });
});

describe("torch_geometric.nn.SAGEConv's aggr", () => {
  // PyG 2.8.1's SAGEConv (torch 2.15) on these inputs and weights, printed by
  // `conv(x, edge_index).tolist()`: node 1 gets three messages (from 0, 2 and 2 again), the
  // others one each, so only its row tells the mean from the sum.
  const PYG = {
    mean: [[0.37499997, -0.20000005], [-0.23333333, -1.3249999], [0.875, 0.7125001], [0.92500001, -1.0875001]],
    sum: [[0.37499997, -0.20000005], [0.10000008, -3.3249998], [0.875, 0.7125001], [0.92500001, -1.0875001]],
  };
  PYG.add = PYG.sum;
  const code = (aggr) => `import torch
from torch_geometric.nn import SAGEConv

x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [-2.0, 1.0, 0.75], [0.0, -0.5, 1.25]])
edge_index = torch.tensor([[0, 1, 2, 3, 0, 2], [1, 2, 1, 0, 3, 1]], dtype=torch.int32)
conv = SAGEConv(3, 2, aggr=${JSON.stringify(aggr)})
conv.load_state_dict({
    "lin_l.weight": torch.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]),
    "lin_l.bias": torch.tensor([0.05, -0.1]),
    "lin_r.weight": torch.tensor([[-0.3, 0.2, 0.1], [0.0, -0.4, 0.25]]),
})
print(conv(x, edge_index).tolist())
`;
  for (const aggr of ["mean", "sum", "add"]) {
    test(`aggr="${aggr}" on an edge_index: PyG's values`, async () => {
      const lines = [];
      const log = console.log;
      console.log = (s) => lines.push(String(s));
      try {
        await python.run(code(aggr), context());
      } finally {
        console.log = log;
      }
      const got = JSON.parse(lines.join("\n").trim());
      assert.equal(got.length, 4);
      got.forEach((row, i) => row.forEach((v, j) => assert.ok(Math.abs(v - PYG[aggr][i][j]) < 1e-6, `[${i}][${j}]: ${v}, PyG ${PYG[aggr][i][j]}`)));
    });
  }

  test("an aggregation the engine lacks is a Python error naming it, at the user's line; so is a PyG option it lacks", async () => {
    await assert.rejects(python.run(code("max"), context()), (err) => {
      // The package's own rule (gnn::Aggregation::parse), not a second copy in the Python layer.
      assert.match(err.message, /SAGEConv: aggregation "max" is not in this engine: it has "mean" and "sum" \(or "add"\)/);
      assert.equal(err.line, 6);
      return true;
    });
    await assert.rejects(python.run(code("mean").replace('aggr="mean"', "root_weight=False"), context()), (err) => {
      assert.match(err.message, /ValueError: SAGEConv: root_weight=False is not in this engine: it has PyG's default root_weight=True/);
      return true;
    });
    // The package's own check, for JavaScript callers.
    assert.throws(() => new nn.SAGEConv(3, 2, { aggr: "lstm" }), /SAGEConv: aggregation "lstm" is not in this engine: it has "mean" and "sum" \(or "add"\)/);
    assert.throws(() => new nn.SAGEConv(3, 2, { agr: "sum" }), /SAGEConv: options has no option "agr": the option is aggr/);
  });
});

// The patterns of PopTorch's user guide (docs/user_guide/buffers.py and trainingModel.py),
// written here as a user would write them: whole scripts that print, run and check on the host.
describe("whole PopTorch scripts, as the user guide writes them", () => {
  /** Runs `code`; resolves { exports, lines } (what it printed). */
  async function runPrinting(code) {
    const lines = [];
    const log = console.log;
    console.log = (s) => lines.push(String(s));
    try {
      return { exports: await python.run(code, context()), lines: lines.join("\n").trim().split("\n") };
    } finally {
      console.log = log;
    }
  }

  test("buffers: a plain tensor attribute is frozen, a registered buffer counts; its host value after copyWeightsToHost; the last model called is planned", async () => {
    const code = `import torch
import poptorch


class Frozen(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.steps = torch.tensor([0.0])

    def forward(self):
        self.steps += 1  # a plain attribute: a constant of the graph
        return self.steps


frozen = poptorch.inferenceModel(Frozen())
for _ in range(2):
    print(frozen())


class Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.tensor([0.0]))

    def forward(self):
        self.steps += 1  # in place: the buffer counts
        return self.steps


net = Counting()
counting = poptorch.inferenceModel(net)
for _ in range(3):
    print(counting())
counting.copyWeightsToHost()  # an inference model's buffers reach the host only so
torch.testing.assert_close(net.steps, torch.tensor([3.0]))
`;
    const { exports, lines } = await runPrinting(code);
    assert.deepEqual(lines, ["tensor([1.])", "tensor([1.])", "tensor([1.])", "tensor([2.])", "tensor([3.])"]);
    const { plan, model } = planOf(exports.default);
    assert.equal(plan.valid, true);
    assert.match(model.tracedModel.text, /buffer_update/);
  });

  test("training: a loss module, a hundred steps, then the trained module run on the host (model.eval(); model(x))", async () => {
    const code = `import torch
import poptorch


class Regressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.criterion = torch.nn.MSELoss()

    def forward(self, x, y=None):
        out = self.lin(x)
        if not self.training:
            return out
        return out, self.criterion(out, y)


torch.manual_seed(0)
net = Regressor()
trainer = poptorch.trainingModel(net)
x, y = torch.randn(8), torch.randn(8)
for step in range(100):
    out, loss = trainer(x, y)
    print(f"{step} {loss:.5f}")
trainer.copyWeightsToHost()
net.eval()
on_host = net(x)
# The host runs the weights after the last update: the next step's output.
assert torch.allclose(on_host, trainer(x, y)[0])
assert not torch.allclose(on_host, out)
`;
    const { exports, lines } = await runPrinting(code);
    const losses = lines.map((l) => Number(l.split(" ")[1]));
    assert.equal(losses.length, 100);
    assert.ok(losses.every(Number.isFinite) && losses[99] < losses[0] / 2, `${losses[0]} → ${losses[99]}`);
    assert.equal(planOf(exports.default).plan.valid, true, "the last model called is planned");
  });

  test("parallel phased execution of Stage lists, weights kept in a list and used in forward, torch.split: planned on 4 IPUs; PopTorch's parity rule", async () => {
    const code = `import torch
import torch.nn.functional as F
import poptorch

poptorch.setLogLevel(1)
PAIRS, WIDTH = 2, 6


class Crossed(torch.nn.Module):
    """Two columns of matmuls, swapped between phases; its weights kept in a list."""

    def __init__(self):
        super().__init__()
        self.mats = []
        for k in range(PAIRS * 4):
            w = torch.nn.Parameter(torch.rand(WIDTH, WIDTH), requires_grad=True)
            self.register_parameter(f"m{k}", w)
            self.mats.append(w)

    def forward(self, x, y=None):
        mats = iter(self.mats)
        with poptorch.Block("phase0_col0"):
            cols = torch.split(x, WIDTH)
        for p in range(PAIRS * 2):
            nxt = []
            for c in range(2):
                with poptorch.Block(f"phase{p}_col{c}"):
                    nxt.append(F.relu(torch.matmul(next(mats), cols[c])))
            cols = nxt[1], nxt[0]
        with poptorch.Block(f"phase{PAIRS * 2 - 1}_col1"):
            out = cols[0] + cols[1]
            return out if y is None else (out, torch.nn.L1Loss()(out, y))


opts = poptorch.Options()
phases = [[poptorch.Stage(f"phase{p}_col0").ipu(p % 2), poptorch.Stage(f"phase{p}_col1").ipu(2 + p % 2)] for p in range(PAIRS * 2)]
opts.setExecutionStrategy(poptorch.ParallelPhasedExecution(*phases))
model = poptorch.trainingModel(Crossed(), opts)
model.compile(torch.rand(WIDTH * 2, 1), torch.rand(WIDTH, 1))
`;
    const { exports } = await runPrinting(code);
    const { plan, model } = planOf(exports.default);
    assert.equal(plan.valid, true, JSON.stringify(plan.errors));
    assert.equal(plan.ipusUsed, 4);
    assert.match(model.tracedModel.text, /matmul\(%4, %2\).*block "phase0_col0"/, "the first weight of the list is parameter m0");
    // Phase 1 on IPU 0, an odd phase on an even IPU: compiling fails with PopTorch's rule, at the call.
    await assert.rejects(runPrinting(code.replace(".ipu(p % 2)", ".ipu(0)")), (err) => {
      assert.equal(err.code, "parallel_phase_parity");
      assert.match(err.message, /even phases must run on even IPUs and odd phases on odd IPUs/);
      assert.equal(err.line, lineOf(code, "model.compile("));
      return true;
    });
  });
});

// PopTorch's user-guide snippets (reference.md §A), in Python and in JavaScript: the same plans.
const CASES = [
  {
    name: "with poptorch.Block on IPUs 0, 1, 0 and AutoStage.AutoIncrement (§A.2)",
    py: `import torch, poptorch
from playground import options

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)
        self.c = torch.nn.Linear(8, 8)
    def forward(self, x):
        with poptorch.Block("A", ipu_id=0):
            x = self.a(x)
        with poptorch.Block("B", ipu_id=1):
            x = self.b(x)
        with poptorch.Block("C", ipu_id=0):
            x = self.c(x)
            loss = poptorch.identity_loss(x.sum(), reduction="mean")
        return x, loss

options.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
options.Training.gradientAccumulation(8)
model = poptorch.trainingModel(Net(), options)
inputs = [torch.empty(4, 8)]
`,
    js() {
      class Net extends nn.Module {
        constructor() {
          super();
          this.a = new nn.Linear(8, 8);
          this.b = new nn.Linear(8, 8);
          this.c = new nn.Linear(8, 8);
        }
        forward(x) {
          x = block("A", 0, () => this.a.forward(x));
          x = block("B", 1, () => this.b.forward(x));
          return block("C", 0, () => {
            const y = this.c.forward(x);
            return [y, poptorch.identity_loss(y.sum(), "mean")];
          });
        }
      }
      const options = poptorch.Options.fromJSON({});
      options.setExecutionStrategy(new poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement));
      options.Training.gradientAccumulation(8);
      return { model: poptorch.trainingModel(new Net(), options), inputs: [{ name: "x", shape: [4, 8], dtype: "float32" }] };
    },
    valid: true,
  },
  {
    name: "BeginBlock on submodules, sharded (§A.2, §A.3)",
    py: `import torch, poptorch
from playground import options

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 8)
        self.l2 = poptorch.BeginBlock(torch.nn.Linear(8, 8), "second", ipu_id=1)
    def forward(self, x):
        return self.l2(self.l1(x).relu())

options.setExecutionStrategy(poptorch.ShardedExecution())
model = poptorch.inferenceModel(Net(), options)
inputs = [torch.empty(4, 8)]
`,
    js() {
      class Net extends nn.Module {
        constructor() {
          super();
          this.l1 = new nn.Linear(8, 8);
          this.l2 = new nn.Linear(8, 8);
        }
        forward(x) {
          const h = this.l1.forward(x).relu();
          beginBlock("second", 1);
          return this.l2.forward(h);
        }
      }
      const options = poptorch.Options.fromJSON({});
      options.setExecutionStrategy(new poptorch.ShardedExecution());
      return { model: poptorch.inferenceModel(new Net(), options), inputs: [{ name: "x", shape: [4, 8], dtype: "float32" }] };
    },
    valid: true,
  },
  {
    name: "serial phased execution of Phases of Stages (§A.2, §A.3)",
    py: `import torch, poptorch
from playground import options

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l0 = torch.nn.Linear(16, 16)
        self.l1 = torch.nn.Linear(16, 16)
    def forward(self, x):
        with poptorch.Block("p0", ipu_id=0):
            x = self.l0(x).relu()
        with poptorch.Block("p1", ipu_id=0):
            x = self.l1(x)
            return x, poptorch.identity_loss(x.mean(), reduction="mean")

strategy = poptorch.SerialPhasedExecution(poptorch.Phase(poptorch.Stage("p0").ipu(0)), poptorch.Phase(poptorch.Stage("p1").ipu(0)))
options.setExecutionStrategy(strategy)
model = poptorch.trainingModel(Net(), options)
inputs = [torch.empty(4, 16)]
`,
    js() {
      class Net extends nn.Module {
        constructor() {
          super();
          this.l0 = new nn.Linear(16, 16);
          this.l1 = new nn.Linear(16, 16);
        }
        forward(x) {
          x = block("p0", 0, () => this.l0.forward(x).relu());
          return block("p1", 0, () => {
            const y = this.l1.forward(x);
            return [y, poptorch.identity_loss(y.mean(), "mean")];
          });
        }
      }
      const options = poptorch.Options.fromJSON({});
      options.setExecutionStrategy(new poptorch.SerialPhasedExecution(new poptorch.Phase(new poptorch.Stage("p0").ipu(0)), new poptorch.Phase(new poptorch.Stage("p1").ipu(0))));
      return { model: poptorch.trainingModel(new Net(), options), inputs: [{ name: "x", shape: [4, 16], dtype: "float32" }] };
    },
    valid: true,
  },
  {
    name: "a buffer changed in place (copy_), replicated: PopTorch's broadcast error (§A.8)",
    py: `import torch, poptorch
from playground import options

class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))
        self.fc = torch.nn.Linear(8, 8)
    def forward(self, x):
        self.count.copy_(self.count + 1)
        return self.fc(x)

options.replicationFactor(2)
model = poptorch.inferenceModel(Counter(), options)
inputs = [torch.empty(4, 8)]
`,
    js() {
      class Counter extends nn.Module {
        constructor() {
          super();
          this.registerBuffer("count", [0], [1]);
          this.fc = new nn.Linear(8, 8);
        }
        forward(x) {
          const c = this.buffer("count");
          this.updateBuffer("count", c.add(constant([1], [], c.dtype)));
          return this.fc.forward(x);
        }
      }
      const options = poptorch.Options.fromJSON({});
      options.replicationFactor(2);
      return { model: poptorch.inferenceModel(new Counter(), options), inputs: [{ name: "x", shape: [4, 8], dtype: "float32" }] };
    },
    thrown: /^PopTorch does not support broadcasting buffers\. .*broadcastBuffers\(False\)\.$/,
  },
  {
    name: "replica grouping of a weight through the wrapper (poptorch_model.W.replicaGrouping), 4 replicas in groups of 2 (§A.10)",
    py: `import torch, poptorch
from playground import options

options.replicationFactor(4)
net = torch.nn.Linear(8, 8)
model = poptorch.inferenceModel(net, options)
model.weight.replicaGrouping(poptorch.enums.CommGroupType.Consecutive, 2, poptorch.enums.VariableRetrievalMode.OnePerGroup)
inputs = [torch.empty(2, 8)]
`,
    js() {
      const options = poptorch.Options.fromJSON({});
      options.replicationFactor(4);
      const model = poptorch.inferenceModel(new nn.Linear(8, 8), options);
      model.replicaGrouping("weight", poptorch.CommGroupType.Consecutive, 2, poptorch.VariableRetrievalMode.OnePerGroup);
      return { model, inputs: [{ name: "input0", shape: [2, 8], dtype: "float32" }] };
    },
    valid: true,
  },
  {
    name: "optimizers: SGD with momentum over parameter groups, torch.optim's SGD converted as PopTorch converts it (§A.5)",
    py: `import torch, poptorch
from playground import options

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 2)
    def forward(self, x, y):
        out = self.fc2(self.fc1(x).relu())
        return out, torch.nn.functional.cross_entropy(out, y)

net = Net()
sgd = torch.optim.SGD([{"params": net.fc1.parameters(), "lr": 0.0}, {"params": net.fc2.parameters()}], lr=0.1, momentum=0.9)
model = poptorch.trainingModel(net, options, sgd)
inputs = {"x": torch.empty(4, 8), "y": torch.empty(4, dtype=torch.long)}
`,
    js() {
      class Net extends nn.Module {
        constructor() {
          super();
          this.fc1 = new nn.Linear(8, 8);
          this.fc2 = new nn.Linear(8, 2);
        }
        forward(x, y) {
          const out = this.fc2.forward(this.fc1.forward(x).relu());
          return [out, out.crossEntropy(y)];
        }
      }
      const net = new Net();
      const sgd = new poptorch.optim.SGD([{ params: net.fc1.parameters(), lr: 0 }, { params: net.fc2.parameters() }], { lr: 0.1, momentum: 0.9 });
      return { model: poptorch.trainingModel(net, poptorch.Options.fromJSON({}), sgd), inputs: [{ name: "x", shape: [4, 8], dtype: "float32" }, { name: "y", shape: [4], dtype: "int32" }] };
    },
    valid: true,
  },
];

/** The plan of a wrapped model, or the message of the error planning it throws. */
function outcome(spec) {
  try {
    return { plan: planOf(spec).plan };
  } catch (e) {
    return { thrown: e.message };
  }
}

describe("PopTorch's user-guide snippets in Python give the JavaScript equivalents' plans", () => {
  for (const c of CASES) {
    test(c.name, async () => {
      const py = outcome((await python.run(c.py, context())).default);
      const js = outcome(c.js());
      assert.equal(py.thrown, js.thrown);
      if (c.thrown) {
        assert.match(py.thrown, c.thrown);
        return;
      }
      assert.equal(py.plan.valid, c.valid, JSON.stringify(py.plan.errors.map((e) => e.message)));
      assert.deepEqual(py.plan.errors.map((e) => e.message), js.plan.errors.map((e) => e.message));
      assert.equal(digest(py.plan), digest(js.plan));
    });
  }
});
