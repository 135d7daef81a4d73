// Preset "resnet50": ResNet-50 trained on ImageNet-sized images, one IPU per replica, as
// Graphcore trains it (graphcore/examples vision/cnns/pytorch/train/configs.yml `resnet50`).
// (index.js lists the presets.)

const RESNET50 = `import { nn, poptorch } from "ipu-playground";

// torchvision's ResNet-50 (Bottleneck blocks [3, 4, 6, 3]) trained as
// Graphcore's PopTorch CNN example trains it (configuration \`resnet50\`
// in vision/cnns/pytorch/train/configs.yml): one IPU per replica,
// float16 weights and activations, SGD with momentum, label smoothing.
// Graphcore fits 18 images per micro-batch on one IPU with manual
// recomputation checkpoints and 8-bit image input, which this planner
// does not model on one IPU: 8 here, and gradient accumulation 128
// (options) for about the same 16,416 images per step (16,384).
const MICRO_BATCH = 8, CLASSES = 1000;

class Bottleneck extends nn.Module {
  constructor(inC, width, stride) {
    super();
    const out = width * 4;
    this.conv1 = new nn.Conv2d(inC, width, 1, { bias: false });
    this.bn1 = new nn.BatchNorm2d(width);
    this.conv2 = new nn.Conv2d(width, width, 3, { stride, padding: 1, bias: false });
    this.bn2 = new nn.BatchNorm2d(width);
    this.conv3 = new nn.Conv2d(width, out, 1, { bias: false });
    this.bn3 = new nn.BatchNorm2d(out);
    this.downsample = stride !== 1 || inC !== out
      ? new nn.Sequential([new nn.Conv2d(inC, out, 1, { stride, bias: false }), new nn.BatchNorm2d(out)])
      : null;
  }
  forward(x) {
    let h = this.bn1.forward(this.conv1.forward(x)).relu();
    h = this.bn2.forward(this.conv2.forward(h)).relu();
    h = this.bn3.forward(this.conv3.forward(h));
    const identity = this.downsample ? this.downsample.forward(x) : x;
    return h.add(identity).relu();
  }
}

class ResNet50 extends nn.Module {
  constructor() {
    super();
    this.conv1 = new nn.Conv2d(3, 64, 7, { stride: 2, padding: 3, bias: false });
    this.bn1 = new nn.BatchNorm2d(64);
    this.maxpool = new nn.MaxPool2d(3, { stride: 2, padding: 1 });
    let inC = 64;
    const stage = (width, blocks, stride) => new nn.Sequential(Array.from({ length: blocks }, (_, i) => {
      const b = new Bottleneck(inC, width, i === 0 ? stride : 1);
      inC = width * 4;
      return b;
    }));
    this.layer1 = stage(64, 3, 1);
    this.layer2 = stage(128, 4, 2);
    this.layer3 = stage(256, 6, 2);
    this.layer4 = stage(512, 3, 2);
    this.avgpool = new nn.AdaptiveAvgPool2d(1);
    this.flatten = new nn.Flatten();
    this.fc = new nn.Linear(2048, CLASSES);
  }
  forward(x, labels) {
    let h = this.maxpool.forward(this.bn1.forward(this.conv1.forward(x)).relu());
    for (const layer of [this.layer1, this.layer2, this.layer3, this.layer4]) h = layer.forward(h);
    const logits = this.fc.forward(this.flatten.forward(this.avgpool.forward(h)));
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

export default {
  id: "resnet50",
  title: "ResNet-50 on 1 IPU × 16 replicas",
  code: RESNET50,
  options: {
    replicationFactor: 16,
    // Each replica keeps its own batch-norm statistics (PopTorch cannot broadcast buffers).
    broadcastBuffers: false,
    deviceIterations: 1,
    randomSeed: 42,
    availableMemoryProportion: { IPU0: 0.16 },
    Training: { gradientAccumulation: 128 },
    Precision: { partialsType: "half", enableStochasticRounding: true },
  },
  ipus: 16,
  half: true,
  expect: { ipus: [0] },
};
