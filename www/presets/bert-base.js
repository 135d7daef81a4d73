// Preset "bert-base": BERT-Base phase-1 pre-training on 4 IPUs per replica, as Graphcore
// trains it (configs_pretraining.yml `pretrain_base_128`). (index.js lists the presets.)
import { bertCode, bertPython, bertOptions } from "./bert.js";

const CONFIG = {
  title: "BERT-Base phase-1 pre-training (sequence length 128)",
  source: "pretrain_base_128",
  hidden: 768,
  layers: 12,
  heads: 12,
  perIpu: [0, 4, 4, 4],
  micro: 32,
  serialization: 1,
  // LAMBNoBiasCorrection in Graphcore's configuration.
  optimizer: "{ lr: 0.006, weightDecay: 0.01, biasCorrection: false, lossScaling: 16384 }",
};

export default {
  id: "bert-base",
  title: "BERT-Base pre-training (4 IPUs × 4 replicas)",
  code: bertCode(CONFIG),
  python: bertPython(CONFIG),
  options: bertOptions({ replicas: 4, accumulation: 512, proportions: [0.25, 0.25, 0.25, 0.25] }),
  ipus: 16,
  half: true,
  expect: { ipus: [0, 1, 2, 3] },
};
