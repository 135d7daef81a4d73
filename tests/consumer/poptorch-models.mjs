// Models a PopTorch user writes against the npm package, imported by name: each mirrors a
// model of PopTorch's documentation where there is one (docs/user_guide/*.py).
import { nn, poptorch, constant, manualSeed, block } from "ipu-playground";

/** Two linear layers with a cross-entropy loss: forward(x, y) → [logits, loss]. */
export class Classifier extends nn.Module {
  constructor(inF = 3, hidden = 5, classes = 2) {
    super();
    this.fc1 = new nn.Linear(inF, hidden);
    this.fc2 = new nn.Linear(hidden, classes);
  }
  forward(x, y) {
    const logits = this.fc2.forward(this.fc1.forward(x).tanh());
    return [logits, logits.crossEntropy(y)];
  }
}

/** docs/user_guide/device_iterations.py's ExampleModelWithLoss: fc on the flattened [3, 2] sample. */
export class ExampleModelWithLoss extends nn.Module {
  constructor() {
    super();
    this.fc = new nn.Linear(6, 2);
  }
  forward(x, target) {
    const out = this.fc.forward(x.reshape([x.shape[0], -1]));
    return [out, out.crossEntropy(target)];
  }
}

/** docs/user_guide/buffers.py's CounterModel: `self.i += 1; return self.i` with a registered buffer. */
export class CounterModel extends nn.Module {
  constructor() {
    super();
    this.registerBuffer("i", [0], [1]);
  }
  forward() {
    const next = this.buffer("i").add(constant([1], [1]));
    this.updateBuffer("i", next);
    return next;
  }
}

/** The same with a plain tensor attribute: PopTorch freezes it as a constant. */
export class ConstantCounter extends nn.Module {
  constructor() {
    super();
    this.i = [0];
  }
  forward() {
    return constant(this.i, [1]).add(constant([1], [1]));
  }
}

/** docs/user_guide/replica_grouped_weights.py: Z = X @ W, loss mean(Z²); W traced with one replica's slice. */
export class GroupedMatmul extends nn.Module {
  constructor(rows, cols) {
    super();
    this.registerParameter("W", new Float32Array(rows * cols), [rows, cols]);
  }
  forward(x) {
    const z = x.matmul(this.param("W"));
    return [z, poptorch.identity_loss(z.mul(z), "mean")];
  }
}

/** A model whose forward returns no loss. */
export class NoLoss extends nn.Module {
  constructor() {
    super();
    this.fc = new nn.Linear(3, 2);
  }
  forward(x) {
    return this.fc.forward(x).mean();
  }
}

/** Two independent losses. */
export class TwoLosses extends nn.Module {
  constructor() {
    super();
    this.fc = new nn.Linear(3, 2);
  }
  forward(x) {
    const h = this.fc.forward(x);
    return [poptorch.identity_loss(h, "mean"), poptorch.identity_loss(h.mul(h), "sum")];
  }
}

/** A forward that throws the user's own error. */
export class Throws extends nn.Module {
  forward() {
    throw new RangeError("user error from forward");
  }
}

/** Reassigns its buffer inside forward, which PopTorch rejects. */
export class ReassignsBuffer extends nn.Module {
  constructor() {
    super();
    this.registerBuffer("b", [0], [1]);
  }
  forward(x) {
    this.registerBuffer("b", [1], [1]);
    return poptorch.identity_loss(x, "sum");
  }
}

/**
 * Replaces a submodule inside forward (`this.fc1 = nn.Linear(3, 3)` in PyTorch): its parameters
 * are reassigned, which PopTorch rejects after tracing (errorOnBufferOrParameterAddressChanges).
 */
export class ReplacesLayer extends nn.Module {
  constructor() {
    super();
    this.fc1 = new nn.Linear(3, 3);
    this.fc2 = new nn.Linear(3, 1);
  }
  forward(x) {
    this.fc1 = new nn.Linear(3, 3);
    return poptorch.identity_loss(this.fc2.forward(this.fc1.forward(x)), "sum");
  }
}

/** Deletes a submodule inside forward (`del self.fc2`): its parameters are removed, which PopTorch rejects. */
export class DeletesLayer extends nn.Module {
  constructor() {
    super();
    this.fc1 = new nn.Linear(3, 1);
    this.fc2 = new nn.Linear(3, 1);
  }
  forward(x) {
    delete this.fc2;
    return poptorch.identity_loss(this.fc1.forward(x), "sum");
  }
}

/** Registers its parameter again inside forward: a reassigned parameter, which PopTorch rejects. */
export class ReregistersParameter extends nn.Module {
  constructor() {
    super();
    this.registerParameter("w", [1, 1, 1], [3]);
  }
  forward(x) {
    this.registerParameter("w", [2, 2, 2], [3]);
    return poptorch.identity_loss(x.mul(this.param("w")), "sum");
  }
}

/** Three Linear layers in blocks on IPUs 0, 1 and 2: three IPUs, not a power of two. */
export class ThreeIpus extends nn.Module {
  constructor() {
    super();
    this.fc1 = new nn.Linear(3, 3);
    this.fc2 = new nn.Linear(3, 3);
    this.fc3 = new nn.Linear(3, 1);
  }
  forward(x) {
    const a = block("b0", 0, () => this.fc1.forward(x));
    const b = block("b1", 1, () => this.fc2.forward(a));
    return block("b2", 2, () => poptorch.identity_loss(this.fc3.forward(b), "sum"));
  }
}

/** `loss = sum(x · w) · scale` with a [1, 4] weight: d/dw = x · scale (the loss scaling tests). */
export class ScaledDot extends nn.Module {
  constructor(scale) {
    super();
    this.scale = scale;
    this.registerParameter("w", [0.5, 0.5, 0.5, 0.5], [1, 4]);
  }
  forward(x) {
    return poptorch.identity_loss(x.mul(this.param("w")).sum().scale(this.scale), "sum");
  }
}

/** `t[x : x + 4]` on an 8-entry table, x an int32 input: PopTorch's wrap-round slice. */
export class Window extends nn.Module {
  constructor() {
    super();
    this.registerParameter("table", [0, 1, 2, 3, 4, 5, 6, 7], [8]);
  }
  forward(x) {
    const start = x.reshape([]);
    return poptorch.slice(this.param("table"), 0, start, start.add(constant([4], [], "int32")));
  }
}

export function seeded(Model, ...args) {
  manualSeed(7);
  return new Model(...args);
}
