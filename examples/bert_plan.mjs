// A BERT-Large-sized model built from JavaScript and planned through
// poptorch.trainingModel(...).plan(...), as a user of the package would: the time and the
// process memory it takes. The parameters are shape-only until something needs their values
// (PyTorch's meta device), so planning allocates no weights; `--materialise` reads them all
// (`stateDict()`) before planning, for comparison.
//
//   node examples/bert_plan.mjs [--layers 24] [--hidden 1024] [--vocab 30522] [--materialise]
//       [--package DIR]
//
// The model: an Embedding vocab×hidden, then `layers` × [4 × Linear hidden→hidden (Q, K, V,
// output), Linear hidden→4·hidden, Linear 4·hidden→hidden, 2 LayerNorms], a loss; batch 1 ×
// 128 tokens per micro-batch, gradient accumulation 16, LAMB. It prints one JSON line.
// Run it after `make node-pkg` (it imports the package from tests/consumer or pkg-node/).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? dflt : process.argv[i + 1];
};
function loadPackage() {
  const require = createRequire(import.meta.url);
  const given = arg("package", null);
  const places = given ? [path.resolve(given)] : [path.join(root, "tests/consumer/node_modules/ipu-playground"), path.join(root, "pkg-node")];
  for (const where of places) {
    if (fs.existsSync(path.join(where, "package.json"))) return require(where);
  }
  throw new Error("bert_plan.mjs: build the package first (make node-pkg)");
}
const { nn, poptorch, manualSeed } = loadPackage();

const layers = Number(arg("layers", 24));
const hidden = Number(arg("hidden", 1024));
const vocab = Number(arg("vocab", 30522));
const seq = 128;

class Layer extends nn.Module {
  constructor() {
    super();
    this.q = new nn.Linear(hidden, hidden);
    this.k = new nn.Linear(hidden, hidden);
    this.v = new nn.Linear(hidden, hidden);
    this.out = new nn.Linear(hidden, hidden);
    this.norm1 = new nn.LayerNorm(hidden);
    this.up = new nn.Linear(hidden, 4 * hidden);
    this.down = new nn.Linear(4 * hidden, hidden);
    this.norm2 = new nn.LayerNorm(hidden);
    this.act = new nn.GELU();
  }
  forward(x) {
    // Attention's products are left out (the weights are what this measures): Q·K·V summed.
    const a = this.out.forward(this.q.forward(x).add(this.k.forward(x)).add(this.v.forward(x)));
    const h = this.norm1.forward(x.add(a));
    return this.norm2.forward(h.add(this.down.forward(this.act.forward(this.up.forward(h)))));
  }
}

class Bert extends nn.Module {
  constructor() {
    super();
    this.embed = new nn.Embedding(vocab, hidden);
    this.layers = new nn.ModuleList(Array.from({ length: layers }, () => new Layer()));
  }
  forward(ids) {
    let h = this.embed.forward(ids);
    for (let i = 0; i < layers; i++) h = this.layers.get(i).forward(h);
    return poptorch.identity_loss(h.mul(h).mean(), "mean");
  }
}

const mib = (b) => Math.round(b / 2 ** 20);
const mem = () => process.memoryUsage();
const t0 = performance.now();
const m0 = mem();
manualSeed(0);
const net = new Bert();
const built = performance.now();
if (process.argv.includes("--materialise")) net.stateDict();
const opts = new poptorch.Options();
opts.Training.gradientAccumulation(16);
const model = poptorch.trainingModel(net, opts, new poptorch.optim.LAMB(net.parameters(), { lr: 0.001 }));
const plan = model.plan({ shape: [16, seq], dtype: "int32" });
const t1 = performance.now();
const m1 = mem();
const params = net.namedParameters().reduce((n, [, p]) => n + p.shape.reduce((a, b) => a * b, 1), 0);
console.log(
  JSON.stringify({
    layers,
    hidden,
    vocab,
    parameters: params,
    materialised: process.argv.includes("--materialise"),
    planValid: plan.valid,
    buildMs: Math.round(built - t0),
    totalMs: Math.round(t1 - t0),
    rssMiB: [mib(m0.rss), mib(m1.rss)],
    rssGrowthMiB: mib(m1.rss - m0.rss),
    arrayBuffersMiB: mib(m1.arrayBuffers),
  }),
);
