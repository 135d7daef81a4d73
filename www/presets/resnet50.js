// Preset "resnet50": ResNet-50 trained on ImageNet-sized images, one IPU per replica, as
// Graphcore trains it (graphcore/examples vision/cnns/pytorch/train/configs.yml `resnet50`).
// (index.js lists the presets.)

const RESNET50 = `import { nn, poptorch } from "ipu-playground";

// torchvision's ResNet-50 (Bottleneck blocks [3, 4, 6, 3]) trained as
// Graphcore's PopTorch CNN example trains it (configuration \`resnet50\`
// in vision/cnns/pytorch/train/configs.yml): one IPU per replica,
// float16 weights and activations, SGD with momentum, label smoothing,
// 18 images per micro-batch × gradient accumulation 57 (options), and
// manual recomputation on one IPU (recompute_mode: manual, PopART's
// RecomputeAll: options' autoRecomputation) with the configuration's
// recompute_checkpoints: the residual sums add, add_1, add_2, add_3,
// add_5, add_6, add_7, add_9, add_11, add_12, add_13, add_14, add_15,
// every convolution and norm of layer4, avgpool and fc. What lies
// between two checkpoints is recomputed in the backward pass.
const MICRO_BATCH = 18, CLASSES = 1000;
const CHECKPOINTED_SUMS = new Set([0, 1, 2, 3, 5, 6, 7, 9, 11, 12, 13, 14, 15]);
const ck = (t) => poptorch.recomputationCheckpoint(t);

class Bottleneck extends nn.Module {
  // \`index\`: the block's number in the network (its sum is add_<index>);
  // \`everything\`: checkpoint each convolution and norm too (layer4).
  constructor(inC, width, stride, index, everything) {
    super();
    this.sumCheckpoint = CHECKPOINTED_SUMS.has(index);
    this.everything = everything;
    const out = width * 4;
    this.conv1 = new nn.Conv2d(inC, width, 1, { bias: false });
    this.bn1 = new nn.BatchNorm2d(width);
    this.conv2 = new nn.Conv2d(width, width, 3, { stride, padding: 1, bias: false });
    this.bn2 = new nn.BatchNorm2d(width);
    this.conv3 = new nn.Conv2d(width, out, 1, { bias: false });
    this.bn3 = new nn.BatchNorm2d(out);
    this.downsample = stride !== 1 || inC !== out
      ? new nn.ModuleList([new nn.Conv2d(inC, out, 1, { stride, bias: false }), new nn.BatchNorm2d(out)])
      : null;
  }
  forward(x) {
    const c = (t) => (this.everything ? ck(t) : t);
    let h = c(this.bn1.forward(c(this.conv1.forward(x)))).relu();
    h = c(this.bn2.forward(c(this.conv2.forward(h)))).relu();
    h = c(this.bn3.forward(c(this.conv3.forward(h))));
    let identity = x;
    if (this.downsample) {
      const [conv, bn] = [this.downsample.get(0), this.downsample.get(1)];
      identity = c(bn.forward(c(conv.forward(x))));
    }
    const sum = h.add(identity);
    return (this.sumCheckpoint ? ck(sum) : sum).relu();
  }
}

class ResNet50 extends nn.Module {
  constructor() {
    super();
    this.conv1 = new nn.Conv2d(3, 64, 7, { stride: 2, padding: 3, bias: false });
    this.bn1 = new nn.BatchNorm2d(64);
    this.maxpool = new nn.MaxPool2d(3, { stride: 2, padding: 1 });
    let inC = 64, index = 0;
    const stage = (width, blocks, stride, everything = false) => new nn.Sequential(Array.from({ length: blocks }, (_, i) => {
      const b = new Bottleneck(inC, width, i === 0 ? stride : 1, index++, everything);
      inC = width * 4;
      return b;
    }));
    this.layer1 = stage(64, 3, 1);
    this.layer2 = stage(128, 4, 2);
    this.layer3 = stage(256, 6, 2);
    this.layer4 = stage(512, 3, 2, true);
    this.avgpool = new nn.AdaptiveAvgPool2d(1);
    this.flatten = new nn.Flatten();
    this.fc = new nn.Linear(2048, CLASSES);
  }
  forward(x, labels) {
    let h = this.maxpool.forward(this.bn1.forward(this.conv1.forward(x)).relu());
    for (const layer of [this.layer1, this.layer2, this.layer3, this.layer4]) h = layer.forward(h);
    const logits = ck(this.fc.forward(this.flatten.forward(ck(this.avgpool.forward(h)))));
    return [logits, logits.crossEntropy(labels, null, { labelSmoothing: 0.1 })];
  }
}

// \`options\`: the panel's poptorch.Options; \`half\`: the float16 switch
// (Graphcore's precision "16.16": float16 weights and compute).
export default ({ options, half }) => {
  const net = new ResNet50();
  if (half) net.half();
  const sgd = new poptorch.optim.SGD(net.parameters(), { lr: 2.0, momentum: 0.9, weightDecay: 0.0001, lossScaling: 128 });
  return {
    model: poptorch.trainingModel(net, options, sgd),
    // One micro-batch of 224×224 images.
    inputs: [
      { name: "x", shape: [MICRO_BATCH, 3, 224, 224], dtype: half ? "float16" : "float32" },
      { name: "labels", shape: [MICRO_BATCH], dtype: "int32" },
    ],
  };
};
`;

const RESNET50_PY = `import torch
import torch.nn as nn
import torch.nn.functional as F
import poptorch
from playground import options, half

# torchvision's ResNet-50 (Bottleneck blocks [3, 4, 6, 3]) trained as
# Graphcore's PopTorch CNN example trains it (configuration \`resnet50\`
# in vision/cnns/pytorch/train/configs.yml): one IPU per replica,
# float16 weights and activations, SGD with momentum, label smoothing,
# 18 images per micro-batch x gradient accumulation 57 (options), and
# manual recomputation on one IPU (recompute_mode: manual, PopART's
# RecomputeAll: options' autoRecomputation) with the configuration's
# recompute_checkpoints: the residual sums add, add_1, add_2, add_3,
# add_5, add_6, add_7, add_9, add_11, add_12, add_13, add_14, add_15,
# every convolution and norm of layer4, avgpool and fc. What lies
# between two checkpoints is recomputed in the backward pass.
MICRO_BATCH, CLASSES = 18, 1000
CHECKPOINTED_SUMS = {0, 1, 2, 3, 5, 6, 7, 9, 11, 12, 13, 14, 15}
ck = poptorch.recomputationCheckpoint


class Bottleneck(nn.Module):
    # \`index\`: the block's number in the network (its sum is add_<index>);
    # \`everything\`: checkpoint each convolution and norm too (layer4).
    def __init__(self, in_c, width, stride, index, everything):
        super().__init__()
        self.sum_checkpoint = index in CHECKPOINTED_SUMS
        self.everything = everything
        out = width * 4
        self.conv1 = nn.Conv2d(in_c, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.downsample = None
        if stride != 1 or in_c != out:
            self.downsample = nn.ModuleList([nn.Conv2d(in_c, out, 1, stride=stride, bias=False),
                                             nn.BatchNorm2d(out)])

    def forward(self, x):
        c = ck if self.everything else (lambda t: t)
        h = F.relu(c(self.bn1(c(self.conv1(x)))))
        h = F.relu(c(self.bn2(c(self.conv2(h)))))
        h = c(self.bn3(c(self.conv3(h))))
        identity = x
        if self.downsample is not None:
            identity = c(self.downsample[1](c(self.downsample[0](x))))
        s = h + identity
        return F.relu(ck(s) if self.sum_checkpoint else s)


class ResNet50(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.in_c, self.index = 64, 0
        self.layer1 = self._stage(64, 3, 1)
        self.layer2 = self._stage(128, 4, 2)
        self.layer3 = self._stage(256, 6, 2)
        self.layer4 = self._stage(512, 3, 2, everything=True)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(2048, CLASSES)

    def _stage(self, width, blocks, stride, everything=False):
        layers = []
        for i in range(blocks):
            layers.append(Bottleneck(self.in_c, width, stride if i == 0 else 1, self.index, everything))
            self.in_c, self.index = width * 4, self.index + 1
        return nn.Sequential(*layers)

    def forward(self, x, labels):
        h = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        for layer in (self.layer1, self.layer2, self.layer3, self.layer4):
            h = layer(h)
        logits = ck(self.fc(self.flatten(ck(self.avgpool(h)))))
        return logits, F.cross_entropy(logits, labels, label_smoothing=0.1)


# \`options\`: the panel's poptorch.Options; \`half\`: the float16 switch
# (Graphcore's precision "16.16": float16 weights and compute).
net = ResNet50()
if half:
    net.half()
sgd = poptorch.optim.SGD(net.parameters(), lr=2.0, momentum=0.9, weight_decay=0.0001, loss_scaling=128)
model = poptorch.trainingModel(net, options, sgd)
# One micro-batch of 224x224 images.
inputs = {
    "x": torch.empty(MICRO_BATCH, 3, 224, 224, dtype=torch.half if half else torch.float),
    "labels": torch.empty(MICRO_BATCH, dtype=torch.long),
}
`;

export default {
  id: "resnet50",
  title: "ResNet-50 on 1 IPU × 16 replicas",
  code: RESNET50,
  python: RESNET50_PY,
  options: {
    replicationFactor: 16,
    // Each replica keeps its own batch-norm statistics (PopTorch cannot broadcast buffers).
    broadcastBuffers: false,
    deviceIterations: 1,
    randomSeed: 42,
    availableMemoryProportion: { IPU0: 0.16 },
    // recompute_mode: manual (explicitRecomputation + RecomputeAll).
    autoRecomputation: "recomputeAll",
    Training: { gradientAccumulation: 57 },
    Precision: { partialsType: "half", enableStochasticRounding: true },
  },
  ipus: 16,
  half: true,
  expect: { ipus: [0] },
};
