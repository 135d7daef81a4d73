// A user's model written against the npm package: a Module subclass with submodules found
// by attribute name, a Block annotation, and a ModuleList indexed by the parent.
import { nn, Module, Linear, LayerNorm, ReLU, Dropout, Sequential, ModuleList, block, trace, manualSeed, constant } from "ipu-playground";

export class Encoder extends Module {
  constructor() {
    super();
    this.norm = new LayerNorm(8);
    this.layers = new ModuleList([new Linear(8, 8), new Linear(8, 8)]);
  }
  forward(x) {
    let h = this.norm.forward(x);
    for (let i = 0; i < this.layers.length; i++) h = this.layers.get(i).forward(h).relu();
    return h;
  }
}

// Written the PyTorch way, through the nn namespace.
export class Net extends nn.Module {
  constructor() {
    super();
    this.embed = new nn.Sequential([new nn.Linear(4, 8), new nn.ReLU()]);
    this.encoder = new Encoder();
    this.drop = new Dropout(0.5);
    this.head = new Linear(8, 3, false);
  }
  forward(x) {
    const h = block("stage0", 0, () => this.encoder.forward(this.embed.forward(x)));
    return block("stage1", 1, () => this.head.forward(this.drop.forward(h)));
  }
}

export class Broken extends Module {
  constructor() {
    super();
    this.fc = new Linear(5, 2);
  }
  forward(x) {
    return this.fc.forward(x); // x has 4 features: a shape error at this line
  }
}

// A running mean kept in a buffer, updated in place, with a learnt scale and a captured constant.
export class Tracker extends Module {
  constructor() {
    super();
    this.registerBuffer("running_mean", [0, 0, 0], [3]);
    this.registerParameter("scale", [1, 1, 1], [3]);
  }
  forward(x) {
    const mean = this.buffer("running_mean");
    const updated = mean.scale(0.9).add(x.mean([0]).scale(0.1));
    this.updateBuffer("running_mean", updated);
    const offset = constant([0.5, 0.5, 0.5], [3]);
    return x.sub(updated).mul(this.param("scale")).add(offset);
  }
}

export class WithTracker extends Module {
  constructor() {
    super();
    this.track = new Tracker();
  }
  forward(x) {
    return this.track.forward(x);
  }
}

// Reassigns its buffer inside forward, which PopTorch rejects.
export class Reassigns extends Tracker {
  forward(x) {
    this.registerBuffer("running_mean", [1, 1, 1], [3]);
    return x;
  }
}

export function traceNet(options) {
  manualSeed(0);
  return trace(new Net(), [{ name: "x", shape: [2, 4] }], options);
}

export { trace, nn, Module, Linear };
