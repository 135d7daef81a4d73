// A user writing a small ResNet-style network with the package's convolutional layers:
// Conv2d, BatchNorm2d, MaxPool2d, AdaptiveAvgPool2d and Flatten, traced for training and
// planned.
import { nn, trace, plan, manualSeed } from "ipu-playground";

export class BasicBlock extends nn.Module {
  constructor(c) {
    super();
    this.conv1 = new nn.Conv2d(c, c, 3, { padding: 1, bias: false });
    this.bn1 = new nn.BatchNorm2d(c);
    this.conv2 = new nn.Conv2d(c, c, 3, { padding: 1, bias: false });
    this.bn2 = new nn.BatchNorm2d(c);
  }
  forward(x) {
    const h = this.bn1.forward(this.conv1.forward(x)).relu();
    return this.bn2.forward(this.conv2.forward(h)).add(x).relu();
  }
}

export class TinyResNet extends nn.Module {
  constructor(c = 8, classes = 10) {
    super();
    this.conv1 = new nn.Conv2d(3, c, 7, { stride: 2, padding: 3, bias: false });
    this.bn1 = new nn.BatchNorm2d(c);
    this.maxpool = new nn.MaxPool2d(3, { stride: 2, padding: 1 });
    this.layer1 = new BasicBlock(c);
    this.avgpool = new nn.AdaptiveAvgPool2d(1);
    this.flatten = new nn.Flatten();
    this.fc = new nn.Linear(c, classes);
  }
  forward(x, y) {
    let h = this.maxpool.forward(this.bn1.forward(this.conv1.forward(x)).relu());
    h = this.flatten.forward(this.avgpool.forward(this.layer1.forward(h)));
    return this.fc.forward(h).crossEntropy(y, null, { labelSmoothing: 0.1 });
  }
}

export function traceTinyResNet(batch = 4, size = 32) {
  manualSeed(0);
  return trace(
    new TinyResNet(),
    [
      { name: "x", shape: [batch, 3, size, size] },
      { name: "y", shape: [batch], dtype: "int32" },
    ],
    { training: true },
  );
}

export { nn, plan, trace };
