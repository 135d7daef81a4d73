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
