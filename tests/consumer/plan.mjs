// A user planning a model with the npm package: PopTorch's documented Block example
// (three blocks on IPUs 0, 1, 0) traced in JavaScript, then planned under poptorch.Options
// given as a plain object.
import { nn, poptorch, block, beginBlock, trace, plan, demoModel, traceMlp, manualSeed } from "ipu-playground";

export class ThreeBlocks extends nn.Module {
  constructor(ipus = [0, 1, 0]) {
    super();
    this.ipus = ipus;
    this.fc1 = new nn.Linear(16, 32);
    this.fc2 = new nn.Linear(32, 32);
    this.fc3 = new nn.Linear(32, 4);
  }
  forward(x) {
    const [a, b, c] = this.ipus;
    const h = block("b0", a, () => this.fc1.forward(x).relu());
    const k = block("b1", b, () => this.fc2.forward(h).relu());
    return block("b2", c, () => this.fc3.forward(k).mean());
  }
}

export function traceThreeBlocks(ipus) {
  manualSeed(0);
  return trace(new ThreeBlocks(ipus), [{ name: "x", shape: [8, 16] }]);
}

/**
 * PopTorch's two kinds of Block, mixed: `beginBlock` (BeginBlock) for the first layer, a
 * `block(...)` scope for the second, then `tail` ops: after a scope ends no block is
 * active, so a ReLU there is PopTorch's "No active Block" error unless `restart` starts a
 * block again with `beginBlock`.
 */
export class MixedBlocks extends nn.Module {
  constructor({ restart }) {
    super();
    this.restart = restart;
    this.fc1 = new nn.Linear(16, 32);
    this.fc2 = new nn.Linear(32, 32);
  }
  forward(x) {
    beginBlock("first", 0);
    const h = this.fc1.forward(x).relu();
    const k = block("second", 1, () => this.fc2.forward(h));
    if (this.restart) beginBlock("third", 1);
    return k.relu().mean();
  }
}

export function traceMixedBlocks(restart) {
  manualSeed(0);
  return trace(new MixedBlocks({ restart }), [{ name: "x", shape: [8, 16] }]);
}

export { plan, demoModel, traceMlp, poptorch };
