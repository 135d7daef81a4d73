// RevGNN on a Planetoid graph: PyG's examples/rev_gnn.py written against the package's
// PopTorch-style API (nn, poptorch, datasets, loaders), with the protocol of
// examples/rev_gnn.rs: split "full" with AddSelfLoops, RandomNodeLoader with 10 shuffled
// parts (padded to one size, so one compiled model serves every part), 7 GroupAddRev layers
// of 2 groups, hidden 160, Adam lr 0.003, loss on the training nodes of each part,
// evaluation on the whole graph.
//
//   node examples/rev_gnn.mjs --dataset PubMed --epochs 200
//
// Options: --dataset NAME, --data-dir DIR (default: data/, then ../shared/data/planetoid/raw),
// --epochs N, --layers N, --hidden N, --groups N, --parts N, --dropout P, --lr X, --seed N,
// --replicas R (replicationFactor R: each call R parts, one per replica, the parts per epoch
// rounded up to a multiple of R; the same weights on one thread as on R workers),
// --no-rev, --eval-every N, --json FILE (also write the summary as JSON), --trainer (train with
// the package's RevGnnTrainer preset instead: the same model, loader and executor driven from
// Rust, for comparing epoch times; `make bench` runs both).
// Run it after `make node-pkg` (it imports the package from tests/consumer or pkg-node/).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
// The package by name where it is installed (tests/consumer), else the built folder.
function loadPackage() {
  const require = createRequire(import.meta.url);
  for (const where of [path.join(root, "tests/consumer/node_modules/ipu-playground"), path.join(root, "pkg-node")]) {
    if (fs.existsSync(path.join(where, "package.json"))) return require(where);
  }
  throw new Error("rev_gnn.mjs: build the package first (make node-pkg)");
}
const { nn, poptorch, datasets, loaders, manualSeed, randomMask, isTraining, RevGnnTrainer } = loadPackage();

// ---- options -------------------------------------------------------------------------
const args = {
  dataset: "PubMed", dataDir: null, epochs: 200, layers: 7, hidden: 160, groups: 2, parts: 10,
  dropout: 0.5, lr: 0.003, seed: 0, noRev: false, evalEvery: 1, json: null, trainer: false, replicas: 1,
};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const flag = argv[i];
  const value = () => {
    if (i + 1 >= argv.length) throw new Error(`${flag} needs a value`);
    return argv[++i];
  };
  const number = () => {
    const v = value();
    const n = Number(v);
    if (v.trim() === "" || !Number.isFinite(n)) throw new Error(`${flag}: '${v}' is not a valid number`);
    return n;
  };
  switch (flag) {
    case "--dataset": args.dataset = value(); break;
    case "--data-dir": args.dataDir = value(); break;
    case "--epochs": args.epochs = number(); break;
    case "--layers": args.layers = number(); break;
    case "--hidden": args.hidden = number(); break;
    case "--groups": args.groups = number(); break;
    case "--parts": args.parts = number(); break;
    case "--dropout": args.dropout = number(); break;
    case "--lr": args.lr = number(); break;
    case "--seed": args.seed = number(); break;
    case "--replicas": args.replicas = number(); break;
    case "--eval-every": args.evalEvery = number(); break;
    case "--json": args.json = value(); break;
    case "--no-rev": args.noRev = true; break;
    case "--trainer": args.trainer = true; break;
    case "-h": case "--help":
      console.log(fs.readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n").slice(0, 16).join("\n"));
      process.exit(0);
    default: throw new Error(`unknown option '${flag}' (see --help)`);
  }
}

// ---- the model: PyG's examples/rev_gnn.py ----------------------------------------------
class GNNBlock extends nn.Module {
  constructor(inChannels, outChannels, dropout) {
    super();
    this.norm = new nn.LayerNorm(inChannels);
    this.conv = new nn.SAGEConv(inChannels, outChannels);
    this.dropout = dropout;
  }
  forward(x, adj, dropoutMask) {
    let h = this.norm.forward(x).relu();
    if (isTraining() && dropoutMask) h = h.dropoutWithMask(dropoutMask, this.dropout);
    return this.conv.forward(h, adj);
  }
}

class RevGNN extends nn.Module {
  constructor(inChannels, hiddenChannels, outChannels, numLayers, dropout, numGroups, disable) {
    super();
    if (hiddenChannels % numGroups !== 0) throw new Error("hidden must be divisible by groups");
    this.dropout = dropout;
    this.lin1 = new nn.Linear(inChannels, hiddenChannels);
    this.norm = new nn.LayerNorm(hiddenChannels);
    this.drop = new nn.Dropout(dropout);
    this.lin2 = new nn.Linear(hiddenChannels, outChannels);
    const c = hiddenChannels / numGroups;
    const convs = [];
    for (let i = 0; i < numLayers; i++) {
      convs.push(new nn.GroupAddRev(new GNNBlock(c, c, dropout), { numGroups, disable }));
    }
    this.convs = new nn.ModuleList(convs);
  }
  // x: sparse features, adj: the mean-aggregation adjacency; with y and mask (training),
  // the loss on the masked nodes comes out too, as PopTorch wants.
  forward(x, adj, y, mask) {
    let h = this.lin1.forward(x);
    // One dropout mask, shared by every layer (GroupAddRev cuts it per group): the inverse
    // then recomputes exactly what the forward did.
    const dropoutMask = isTraining() && this.dropout > 0 ? randomMask(h.shape, this.dropout) : null;
    for (let i = 0; i < this.convs.length; i++) h = this.convs.get(i).forward(h, adj, dropoutMask);
    h = this.drop.forward(this.norm.forward(h).relu());
    const out = this.lin2.forward(h);
    if (y === undefined) return out;
    return [out, out.crossEntropy(y, mask)];
  }
}

// ---- data ----------------------------------------------------------------------------
function dataDir() {
  if (args.dataDir) return args.dataDir;
  for (const d of [path.join(root, "data"), path.join(root, "../shared/data/planetoid/raw")]) {
    if (fs.existsSync(path.join(d, "ind.pubmed.graph"))) return d;
  }
  return path.join(root, "data");
}

function readFiles(dir, name) {
  const files = {};
  for (const suffix of ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"]) {
    const f = path.join(dir, `ind.${name.toLowerCase()}.${suffix}`);
    if (!fs.existsSync(f)) throw new Error(`missing ${f}: run scripts/stage-data.sh`);
    files[suffix] = new Uint8Array(fs.readFileSync(f));
  }
  return files;
}

function accuracy(logits, y, masks) {
  const [n, c] = logits.shape;
  const out = logits.data;
  const acc = masks.map(() => [0, 0]);
  for (let i = 0; i < n; i++) {
    let best = 0;
    for (let k = 1; k < c; k++) if (out[i * c + k] > out[i * c + best]) best = k;
    masks.forEach((m, j) => {
      if (m.data[i]) {
        acc[j][1]++;
        if (best === y.data[i]) acc[j][0]++;
      }
    });
  }
  return acc.map(([ok, all]) => ok / Math.max(all, 1));
}

// Training through the JS modules: poptorch.trainingModel over RevGNN, the loader's padded
// parts, and an inference model of the same module over the whole graph.
function moduleRun(data, dataset) {
  manualSeed(args.seed);
  const net = new RevGNN(data.numFeatures, args.hidden, dataset.numClasses, args.layers, args.dropout, args.groups, args.noRev);
  const R = args.replicas;
  const opts = new poptorch.Options().randomSeed(args.seed + 2).replicationFactor(R);
  const model = poptorch.trainingModel(net, opts, new poptorch.optim.Adam(net.parameters(), { lr: args.lr }));
  const trainLoader = new loaders.RandomNodeLoader(data, {
    numParts: Math.ceil(args.parts / R) * R, shuffle: true, seed: args.seed + 1, fixedSize: true, epochs: args.epochs,
  });
  // With replicas, a call takes one part per replica: each input an array of parts.
  function* calls() {
    let group = [];
    for (const part of trainLoader) {
      group.push(part);
      if (group.length === R) {
        yield group;
        group = [];
      }
    }
  }
  // Evaluation: the whole graph, inference mode (no dropout), the weights training left.
  const evaluator = poptorch.inferenceModel(net);
  const whole = [data.x, data.meanAdjacency()];
  const [y, masks] = [data.y, [data.trainMask, data.valMask, data.testMask]];
  return {
    trainEpoch(epoch) {
      let [total, count, savedForBackward, peakBytes] = [0, 0, 0, 0];
      for (const group of calls()) {
        // A part without training nodes: its loss would be NaN (with replicas, the call's).
        if (group.some((p) => p.numTrain === 0)) continue;
        const inputs = R === 1 ? [group[0].x, group[0].meanAdjacency(), group[0].y, group[0].trainMask]
          : [group.map((p) => p.x), group.map((p) => p.meanAdjacency()), group.map((p) => p.y), group.map((p) => p.trainMask)];
        const [, loss] = model.call(...inputs);
        group.forEach((p, r) => {
          const l = loss.data[r];
          if (!Number.isFinite(l)) throw new Error(`training diverged: the loss became ${l} at epoch ${epoch}`);
          total += l * p.numTrain;
          count += p.numTrain;
        });
        const s = model.stats;
        savedForBackward = Math.max(savedForBackward, s.savedForBackward);
        peakBytes = Math.max(peakBytes, s.peakBytes);
      }
      return { loss: total / Math.max(count, 1), savedForBackward, peakBytes };
    },
    evaluate() {
      const [train, val, test] = accuracy(evaluator.call(...whole), y, masks);
      return { train, val, test };
    },
  };
}

// The same training through the package's preset (RevGnnTrainer: the model built in Rust).
function presetRun(data, files) {
  const trainer = new RevGnnTrainer(args.dataset, files, {
    epochs: args.epochs, layers: args.layers, hidden: args.hidden, groups: args.groups, parts: args.parts,
    dropout: args.dropout, lr: args.lr, seed: args.seed, noRev: args.noRev,
  });
  return { trainEpoch: () => trainer.trainEpoch(), evaluate: () => trainer.evaluate() };
}

async function main() {
  const t0 = performance.now();
  const files = readFiles(dataDir(), args.dataset);
  const dataset = await datasets.Planetoid(args.dataset, files, {
    split: "full",
    transform: ["AddSelfLoops"],
  });
  const data = dataset.get(0);
  const [tr, va, te] = data.splitSizes();
  console.log(
    `${dataset.name}: nodes=${data.numNodes} edges(with self-loops)=${data.numEdges} features=${data.numFeatures} ` +
      `classes=${data.numClasses} train/val/test=${tr}/${va}/${te} (${((performance.now() - t0) / 1000).toFixed(2)}s to load)`,
  );

  const run = args.trainer ? presetRun(data, files) : moduleRun(data, dataset);
  const times = [];
  let best = { val: -Infinity, test: 0, epoch: 0 };
  let last = { train: 0, val: 0, test: 0 };
  let kept = 0;
  let peak = 0;
  for (let epoch = 1; epoch <= args.epochs; epoch++) {
    const t = performance.now();
    const { loss, savedForBackward, peakBytes } = run.trainEpoch(epoch);
    const secs = (performance.now() - t) / 1000;
    times.push(secs);
    kept = Math.max(kept, savedForBackward);
    peak = Math.max(peak, peakBytes);
    if (epoch === args.epochs || (args.evalEvery > 0 && epoch % args.evalEvery === 0)) {
      const { train, val, test } = run.evaluate();
      last = { train, val, test };
      if (val > best.val) best = { val, test, epoch };
      console.log(`epoch ${String(epoch).padStart(4)} loss ${loss.toFixed(4)} train ${train.toFixed(4)} val ${val.toFixed(4)} test ${test.toFixed(4)} time ${secs.toFixed(3)}s`);
    } else {
      console.log(`epoch ${String(epoch).padStart(4)} loss ${loss.toFixed(4)} time ${secs.toFixed(3)}s`);
    }
  }
  const sorted = (times.length > 1 ? times.slice(1) : times).sort((a, b) => a - b); // the first epoch warms up
  const median = sorted[Math.floor(sorted.length / 2)];
  const rssMib = process.resourceUsage().maxRSS / 1024;
  const mib = (b) => (b / 2 ** 20).toFixed(1);
  console.log(
    `SUMMARY ${args.dataset} layers=${args.layers} rev=${!args.noRev} replicas=${args.replicas} (${args.trainer ? "RevGnnTrainer" : "nn modules + poptorch"}): final test ${last.test.toFixed(4)} (val ${last.val.toFixed(4)}), ` +
      `best val ${best.val.toFixed(4)} @ epoch ${best.epoch} test ${best.test.toFixed(4)}, median epoch ${median.toFixed(3)}s, ` +
      `saved for backward ${mib(kept)} MiB, peak activations ${mib(peak)} MiB, peak RSS ${rssMib.toFixed(0)} MiB`,
  );
  if (args.json) {
    fs.writeFileSync(args.json, JSON.stringify({
      framework: args.trainer ? "ipu-playground-js-trainer" : "ipu-playground-js", dataset: args.dataset, layers: args.layers, rev: !args.noRev, epochs: args.epochs,
      final_test_acc: last.test, final_val_acc: last.val, best_val: best.val, best_val_test: best.test,
      epoch_median_s: median, saved_for_backward_bytes: kept, peak_activation_bytes: peak, peak_rss_mb: rssMib,
    }));
  }
}

main().catch((e) => {
  console.error(`rev_gnn.mjs: ${e.message}`);
  process.exit(1);
});
