// A user's model written against the npm package: a Module subclass with submodules found
// by attribute name, a Block annotation, and a ModuleList indexed by the parent.
import { Module, Linear, LayerNorm, ReLU, Dropout, Sequential, ModuleList, block, trace, manualSeed } from "ipu-playground";

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

export class Net extends Module {
  constructor() {
    super();
    this.embed = new Sequential([new Linear(4, 8), new ReLU()]);
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

export function traceNet(options) {
  manualSeed(0);
  return trace(new Net(), [{ name: "x", shape: [2, 4] }], options);
}

export { trace };
