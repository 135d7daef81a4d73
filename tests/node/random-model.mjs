// The fuzz layer's generator of random models, shared by tests/node/fuzz.test.mjs (which
// traces them among bad calls) and scripts/check-export.mjs (which exports the ones that
// trace and checks them against PyTorch). A random model's forward applies random ops with
// random (often bad) arguments to its inputs and earlier results; each op goes through the
// caller's `attempt(what, f)`, which returns f's result or undefined when it threw, so the
// model keeps whatever traced.

export const DIMS = [0, 0, 1, -1, -1, -2, 2, 5, 15, 16, -17, 1.5, NaN, "0", undefined, null, [0], 1e9];
export const SHAPES = [[], [1], [4], [2, 4], [4, 2], [2, 1, 4], [1, 1], [0], [0, 4], [2, 0, 1], [4, 3, 2, 1]];
export const DTYPES = [undefined, "float32", "float16", "int32", "bool"];
export const BAD_NAMES = ["", "a\nb", "x\r", "tab\there", "nul\0", "esc\x1b[31m", "ls\u2028", "ps\u2029", "\x7f", "n".repeat(257)];

/** The layers a random forward may call (made with the package's current seed). */
export function randomLayers(api) {
  return { lin: new api.Linear(4, 2), norm: new api.LayerNorm(4), emb: new api.Embedding(5, 3), drop: new api.Dropout(0.3), act: new api.GELU() };
}

/** `randomOp(x, y, kept)`: one random op on tensor `x`, with `y`, a `kept` tensor (maybe from an
 * ended trace) or a bad value as its other operand. `pick` draws from a list. */
export function randomOps(api, pick, layers) {
  return function randomOp(x, y, kept) {
    const other = pick([y, x, kept, { _id: 0 }, { __wbg_ptr: 0 }, 3, "t", null, undefined, [x], new api.Tensor()]);
    const ops = [
      () => x.add(other), () => x.sub(other), () => x.mul(other), () => x.div(other), () => x.pow(other),
      () => x.matmul(other), () => x.scale(pick([2, -0.5, NaN, "2", undefined, {}])),
      () => x.relu(), () => x.exp(), () => x.neg(), () => x.gelu(), () => x.sigmoid(),
      () => x.sum(pick([undefined, [0], [1], [0, 0], [5], [-1, 1], "0", [1.5], [NaN], Array(17).fill(0)]), pick([undefined, true, false, 1, "yes"])),
      () => x.mean(pick([undefined, [0], [-1], [2]]), pick([undefined, true, "no"])),
      () => x.max(pick(DIMS), pick([undefined, true, 0])), () => x.argmax(pick(DIMS)),
      () => x.softmax(pick(DIMS)), () => x.logSoftmax(pick(DIMS)),
      () => x.reshape(pick([[-1], [2, -1], [-1, -1], [-2, 4], [4, 2], [1e9, 1e9], [3], "8", [2.5, 4], [], [2 ** 40, 2 ** 40], Array(17).fill(1)])),
      () => x.transpose(pick(DIMS), pick(DIMS)), () => x.permute(pick([[1, 0], [0, 0], [0], [0, 1, 2], [-1, 0], "10", [1.5, 0]])),
      () => x.cast(pick(["float16", "int32", "bool", "float64", "", 3, "f".repeat(100), undefined])),
      () => x.crossEntropy(other, pick([undefined, other, 3])),
      () => api.concat(pick([[x, x], [x, other], [], "xx", [x], Array(3).fill(other)]), pick(DIMS)),
      () => api.constant(pick([[1, 2], new Float32Array([1, 2]), [1, "a"], [NaN, Infinity], "12", [1], new BigInt64Array(2), new Float64Array(2)]),
        pick([[2], [1, 2], [3], [-2], [2.5], "2", [1e9, 1e9], undefined])),
      () => api.block(pick(["b", ...BAD_NAMES, 7, undefined]), pick([0, 1, undefined, -1, 65536, 1.5, "1"]), pick([() => x.relu(), 3, undefined, () => { throw new Error("user error in a block"); }])),
      () => api.beginBlock(pick(["b2", ...BAD_NAMES, null]), pick([0, 2, -1, NaN, undefined])),
      () => x.shape, () => x.dtype,
      () => pick(Object.values(layers)).forward(pick([x, other])),
      () => x.neg().sqrt().tanh().sigmoid().gelu().log(),
    ];
    return pick(ops)();
  };
}

/** A module whose forward applies `steps` random ops (each through `attempt`) to a pool of its
 * inputs and results and returns the last; it keeps one tensor of the pool in `kept.stale`
 * (a stale handle for a later trace to misuse). */
export function randomOpsModel(api, { pick, randomOp, layers, attempt, kept, steps = 12 }) {
  return new (class extends api.Module {
    constructor() { super(); this.layers = layers; }
    forward(...xs) {
      const pool = [...xs];
      for (let i = 0; i < steps; i++) {
        const r = attempt("an op in forward", () => randomOp(pick(pool), pick(pool), kept.stale));
        if (r instanceof api.Tensor) pool.push(r);
      }
      kept.stale = pick(pool);
      return pool[pool.length - 1];
    }
  })();
}

/** The highest int value + 1 input `name` may take (a cross-entropy target's classes, an index's rows), else 2. */
export function intBound(graph, name) {
  const node = graph.nodes.find((n) => n.op === "placeholder" && n.kind === "input" && n.name === name);
  if (!node) return 2;
  const v = node.outputs[0];
  for (const n of graph.nodes) {
    const shapeOf = (i) => graph.values[n.inputs[i]].shape;
    if (n.op === "cross_entropy" && n.inputs[1] === v) return Math.max(1, shapeOf(0)[1] ?? 1);
    if ((n.op === "index_select" || n.op === "gather") && n.inputs[1] === v) return Math.max(1, shapeOf(0)[n.dim]);
    if (n.op === "one_hot" && n.inputs[0] === v) return Math.max(1, n.num_classes);
  }
  return 2;
}

/**
 * One micro-batch with data for a traced `graph`'s input `specs` (the export checks' inputs):
 * inputs with data kept, shape-only ones drawn from `rand` (floats roughly normal, as
 * torch.randn would give; ints below `intBound`).
 */
export function microBatch(specs, graph, rand) {
  return specs.map((s, i) => {
    if (s.data !== undefined || s.layout === "csr") return s;
    const n = s.shape.reduce((a, b) => a * b, 1);
    const name = s.name ?? `input${i}`;
    const dtype = s.dtype ?? "float32";
    if (dtype === "int32") {
      const hi = intBound(graph, name);
      return { name, shape: s.shape, dtype, data: Int32Array.from({ length: n }, () => Math.floor(rand() * hi)) };
    }
    if (dtype === "bool") return { name, shape: s.shape, dtype, data: Uint8Array.from({ length: n }, () => (rand() < 0.5 ? 1 : 0)) };
    return { name, shape: s.shape, dtype, data: Float32Array.from({ length: n }, () => rand() + rand() + rand() - 1.5) };
  });
}

/**
 * `inner` (a random model) with the loss PopTorch's training wrapper needs, one that a parameter
 * reaches: the model's output (float32 for the sum) times a parameter of its own, summed. The
 * export checks (the round trip and make check-export) train it so.
 */
export function withLoss(api, inner) {
  class WithLoss extends api.nn.Module {
    constructor() {
      super();
      this.inner = inner;
      this.registerParameter("scale", [1.5], [1]);
    }
    forward(...xs) {
      const y = this.inner.forward(...xs);
      const y32 = y.dtype === "float32" ? y : y.cast("float32");
      return [y, api.poptorch.identityLoss(y32.mul(this.param("scale")), "sum")];
    }
  }
  return new WithLoss();
}

/**
 * The export checks' random models (tests/node/export-roundtrip.test.mjs and
 * scripts/check-export.mjs): model `i` (from 0, the package seeded with `seed * 100003 + i`)
 * is `randomOpsModel` over `randomLayers` with `withLoss`, in a training wrapper, on one to
 * three input specs, its picks drawn from `rand`. Each one that plans with at least three
 * non-placeholder nodes is passed to `await use({ i, made, model, specs, plan, graph })`,
 * until `count` have been used (out of at most `count * 40` tried); one that throws while
 * made, planned or used is skipped, and so is one of too few ops: `skip(why)` gets the
 * reason (the error's first line without its node number and source sites). The model is
 * destroyed after `use`. Returns how many were used.
 */
export async function forEachRandomModel(api, { seed, count, rand, skip = () => {} }, use) {
  const pick = (xs) => xs[Math.floor(rand() * xs.length)];
  const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
  const attempt = (_, f) => {
    try {
      return f();
    } catch {
      return undefined;
    }
  };
  const kept = { stale: null };
  let made = 0;
  for (let i = 0; made < count && i < count * 40; i++) {
    api.manualSeed(seed * 100003 + i);
    const layers = randomLayers(api);
    const inner = randomOpsModel(api, { pick, randomOp: randomOps(api, pick, layers), layers, attempt, kept });
    const specs = Array.from({ length: int(1, 3) }, (_, k) => ({ name: `x${k}`, shape: pick(SHAPES), dtype: pick(DTYPES) ?? "float32" }));
    let why = null;
    try {
      const model = api.poptorch.trainingModel(withLoss(api, inner), new api.poptorch.Options());
      try {
        const plan = model.plan(...specs, { throwOnInvalid: false });
        const graph = model.tracedModel.graph;
        if (graph.nodes.filter((n) => n.op !== "placeholder").length < 3) why = "fewer than 2 ops traced";
        else await use({ i, made, model, specs, plan, graph });
      } finally {
        model.destroy();
      }
    } catch (e) {
      // One the engine cannot trace or run (the fuzz layer's subject, not the export's): the
      // reason without the node's number and source line, one count per kind.
      why = String(e?.message ?? e).replace(/^node \d+ \([^)]*\)\)?:? */, "").replace(/\(.*?:\d+\)/g, "").split("\n")[0].slice(0, 100);
    }
    if (why) skip(why);
    else made++;
  }
  return made;
}
