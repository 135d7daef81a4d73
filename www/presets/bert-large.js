// Preset "bert-large": BERT-Large phase-1 pre-training on 4 IPUs per replica, as Graphcore
// trains it (configs_pretraining.yml `pretrain_large_128`). (index.js lists the presets.)
import { bertCode, bertPython, bertOptions } from "./bert.js";

const CONFIG = {
  title: "BERT-Large phase-1 pre-training (sequence length 128)",
  source: "pretrain_large_128",
  hidden: 1024,
  layers: 24,
  heads: 16,
  perIpu: [3, 7, 7, 7],
  micro: 8,
  serialization: 2,
  optimizer: "{ lr: 0.006, weightDecay: 0.01, lossScaling: 4096 }",
};

export default {
  id: "bert-large",
  title: "BERT-Large pre-training (4 IPUs × 4 replicas)",
  code: bertCode(CONFIG),
  python: bertPython(CONFIG),
  options: bertOptions({ replicas: 4, accumulation: 2048, proportions: [0.15, 0.25, 0.25, 0.25] }),
  ipus: 16,
  half: true,
  expect: { ipus: [0, 1, 2, 3] },
};
