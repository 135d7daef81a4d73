// BERT pre-training as Graphcore's PopTorch example trains it (graphcore/examples,
// nlp/bert/pytorch: modeling.py's PipelinedBertForPretraining, ipu_options.py, and the
// configuration in configs_pretraining.yml), written with this package's API. The two BERT
// presets (bert-large.js, bert-base.js) differ only in the configuration block at the top of
// the code and in their options.

/** The code of a BERT preset: `config` is spliced in as the constants a user edits. */
export function bertCode({ title, source, hidden, layers, heads, perIpu, micro, serialization, optimizer }) {
  return `import { nn, poptorch, beginBlock, constant } from "ipu-playground";

// ${title}: Graphcore's PopTorch BERT (nlp/bert/pytorch in
// graphcore/examples), configuration \`${source}\`. The weights
// are never made to plan it: parameters hold shapes until a call
// runs the model.
const H = ${hidden}, LAYERS = ${layers}, HEADS = ${heads}, FF = 4 * H;
const VOCAB = 30522, SEQ = 128, MASK_TOKENS = 20;
const MICRO_BATCH = ${micro};
// The MLM decoder's product in this many pieces over the vocabulary
// (embedding_serialization_factor).
const EMBEDDING_SERIALIZATION = ${serialization};
// Encoder layers per IPU; the embeddings, the pooler and both
// heads go on IPU 0 (the MLM decoder shares the word embedding).
const LAYERS_PER_IPU = [${perIpu.join(", ")}];

class SelfAttention extends nn.Module {
  constructor() {
    super();
    this.query = new nn.Linear(H, H);
    this.key = new nn.Linear(H, H);
    this.value = new nn.Linear(H, H);
  }
  forward(x) {
    const [b, s] = x.shape;
    const split = (t) => t.reshape([b, s, HEADS, H / HEADS]).permute([0, 2, 1, 3]);
    const q = split(this.query.forward(x));
    const k = split(this.key.forward(x));
    const v = split(this.value.forward(x));
    const p = q.matmul(k.transpose(2, 3)).scale(1 / Math.sqrt(H / HEADS)).softmax(-1);
    return p.matmul(v).permute([0, 2, 1, 3]).reshape([b, s, H]);
  }
}

// dense → + residual → LayerNorm (HF's BertSelfOutput / BertOutput).
class Output extends nn.Module {
  constructor(from) {
    super();
    this.dense = new nn.Linear(from, H);
    this.LayerNorm = new nn.LayerNorm(H);
  }
  forward(h, residual) {
    return this.LayerNorm.forward(this.dense.forward(h).add(residual));
  }
}

class Layer extends nn.Module {
  constructor() {
    super();
    this.attention = new SelfAttention();
    this.attentionOutput = new Output(H);
    this.intermediate = new nn.Linear(H, FF);
    this.output = new Output(FF);
  }
  forward(x) {
    const a = this.attentionOutput.forward(this.attention.forward(x), x);
    return this.output.forward(this.intermediate.forward(a).gelu(), a);
  }
}

class Embeddings extends nn.Module {
  constructor() {
    super();
    this.word_embeddings = new nn.Embedding(VOCAB, H);
    this.position_embeddings = new nn.Embedding(512, H);
    this.token_type_embeddings = new nn.Embedding(2, H);
    this.LayerNorm = new nn.LayerNorm(H);
  }
  forward(ids, types) {
    const positions = constant(Array.from({ length: SEQ }, (_, i) => i), [SEQ], "int32");
    const e = this.word_embeddings.forward(ids)
      .add(this.position_embeddings.forward(positions))
      .add(this.token_type_embeddings.forward(types));
    return this.LayerNorm.forward(e);
  }
}

// The MLM decoder (Graphcore's SerializedLinear): the word embedding's
// weight, read here (HF's tie_weights), its product serialised over the
// vocabulary, and a bias of its own.
class Decoder extends nn.Module {
  constructor(wordEmbeddings) {
    super();
    this.wordEmbeddings = wordEmbeddings;
    this.registerParameter("bias", new Float32Array(VOCAB), [VOCAB]);
  }
  forward(x) {
    const w = this.wordEmbeddings.param("weight").transpose(0, 1);
    const mode = poptorch.MatMulSerializationMode.OutputChannels;
    return poptorch.serializedMatMul(x, w, mode, EMBEDDING_SERIALIZATION).add(this.param("bias"));
  }
}

class BertForPretraining extends nn.Module {
  constructor() {
    super();
    this.embeddings = new Embeddings();
    this.layer = new nn.ModuleList(Array.from({ length: LAYERS }, () => new Layer()));
    this.pooler = new nn.Linear(H, H);
    // The MLM head: transform, then the decoder.
    this.transform = new nn.Linear(H, H);
    this.transformNorm = new nn.LayerNorm(H);
    this.decoder = new Decoder(this.embeddings.word_embeddings);
    this.seq_relationship = new nn.Linear(H, 2);
  }
  forward(ids, types, maskedPositions, maskedLabels, nspLabels) {
    beginBlock("Embedding", 0);
    let h = this.embeddings.forward(ids, types);
    let l = 0;
    LAYERS_PER_IPU.forEach((n, ipu) => {
      for (let j = 0; j < n; j++, l++) {
        beginBlock(\`Encoder\${l}\`, ipu);
        // Only each layer's output is stashed for the backward pass:
        // the layer is recomputed from it.
        h = poptorch.recomputationCheckpoint(this.layer.get(l).forward(h));
      }
    });
    beginBlock("Classifier", 0);
    // The masked tokens only, gathered by a one-hot product.
    const pick = maskedPositions.oneHot(SEQ).cast(h.dtype);
    const masked = pick.matmul(h);
    const t = this.transformNorm.forward(this.transform.forward(masked).gelu());
    const scores = this.decoder.forward(t.reshape([-1, H]));
    const cls = poptorch.slice(h, 1, 0, 1).reshape([-1, H]);
    const nsp = this.seq_relationship.forward(this.pooler.forward(cls).tanh());
    const mlmLoss = scores.crossEntropy(maskedLabels.reshape([-1]), null, { ignoreIndex: 0 });
    const nspLoss = nsp.crossEntropy(nspLabels);
    return [scores, poptorch.identityLoss(mlmLoss.add(nspLoss), "none")];
  }
}

// \`options\`: the panel's poptorch.Options (this preset sets them as
// Graphcore's ipu_options.py does); \`half\`: the float16 switch.
export default ({ options, half }) => {
  const net = new BertForPretraining();
  if (half) net.half();
  const optimizer = new poptorch.optim.LAMB(net.parameters(), ${optimizer});
  const int = (name, shape) => ({ name, shape, dtype: "int32" });
  return {
    model: poptorch.trainingModel(net, options, optimizer),
    // One micro-batch.
    inputs: [
      int("input_ids", [MICRO_BATCH, SEQ]),
      int("token_type_ids", [MICRO_BATCH, SEQ]),
      int("masked_lm_positions", [MICRO_BATCH, MASK_TOKENS]),
      int("masked_lm_labels", [MICRO_BATCH, MASK_TOKENS]),
      int("next_sentence_label", [MICRO_BATCH]),
    ],
  };
};
`;
}

/** Graphcore's ipu_options.py as the planner's Options JSON, with the configuration's numbers. */
export function bertOptions({ replicas, accumulation, proportions }) {
  return {
    replicationFactor: replicas,
    autoRoundNumIPUs: true,
    deviceIterations: 1,
    outputMode: "sum",
    randomSeed: 5,
    executionStrategy: { type: "pipelined", autoStage: "autoIncrement" },
    availableMemoryProportion: Object.fromEntries(proportions.map((p, i) => [`IPU${i}`, p])),
    Training: { gradientAccumulation: accumulation, accumulationAndReplicationReductionType: "mean" },
    TensorLocations: { optimizer: { useOnChipStorage: false, useReplicatedTensorSharding: true } },
    Precision: { partialsType: "half", enableStochasticRounding: true },
  };
}

/** The same preset in Python, as Graphcore's PopTorch code writes it (`config` as in bertCode). */
export function bertPython({ title, source, hidden, layers, heads, perIpu, micro, serialization, optimizer }) {
  return `import math

import torch
import torch.nn.functional as F
import poptorch
from playground import options, half

# ${title}: Graphcore's PopTorch BERT (nlp/bert/pytorch in
# graphcore/examples), configuration \`${source}\`. The weights
# are never made to plan it: parameters hold shapes until a call
# runs the model.
H, LAYERS, HEADS = ${hidden}, ${layers}, ${heads}
FF = 4 * H
VOCAB, SEQ, MASK_TOKENS = 30522, 128, 20
MICRO_BATCH = ${micro}
# The MLM decoder's product in this many pieces over the vocabulary
# (embedding_serialization_factor).
EMBEDDING_SERIALIZATION = ${serialization}
# Encoder layers per IPU; the embeddings, the pooler and both
# heads go on IPU 0 (the MLM decoder shares the word embedding).
LAYERS_PER_IPU = [${perIpu.join(", ")}]


class SelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.query = torch.nn.Linear(H, H)
        self.key = torch.nn.Linear(H, H)
        self.value = torch.nn.Linear(H, H)

    def forward(self, x):
        b, s, _ = x.shape
        split = lambda t: t.reshape(b, s, HEADS, H // HEADS).permute(0, 2, 1, 3)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        p = (q @ k.transpose(2, 3) * (1 / math.sqrt(H // HEADS))).softmax(-1)
        return (p @ v).permute(0, 2, 1, 3).reshape(b, s, H)


# dense -> + residual -> LayerNorm (HF's BertSelfOutput / BertOutput).
class Output(torch.nn.Module):
    def __init__(self, from_):
        super().__init__()
        self.dense = torch.nn.Linear(from_, H)
        self.LayerNorm = torch.nn.LayerNorm(H)

    def forward(self, h, residual):
        return self.LayerNorm(self.dense(h) + residual)


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = SelfAttention()
        self.attentionOutput = Output(H)
        self.intermediate = torch.nn.Linear(H, FF)
        self.output = Output(FF)

    def forward(self, x):
        a = self.attentionOutput(self.attention(x), x)
        return self.output(F.gelu(self.intermediate(a)), a)


class Embeddings(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = torch.nn.Embedding(VOCAB, H)
        self.position_embeddings = torch.nn.Embedding(512, H)
        self.token_type_embeddings = torch.nn.Embedding(2, H)
        self.LayerNorm = torch.nn.LayerNorm(H)

    def forward(self, ids, types):
        positions = torch.arange(SEQ)
        e = self.word_embeddings(ids) + self.position_embeddings(positions) \\
            + self.token_type_embeddings(types)
        return self.LayerNorm(e)


# The MLM decoder (Graphcore's SerializedLinear): the word embedding's
# weight, read here (HF's tie_weights), its product serialised over the
# vocabulary, and a bias of its own.
class Decoder(torch.nn.Module):
    def __init__(self, word_embeddings):
        super().__init__()
        self.wordEmbeddings = word_embeddings
        self.bias = torch.nn.Parameter(torch.zeros(VOCAB))

    def forward(self, x):
        w = self.wordEmbeddings.weight.transpose(0, 1)
        mode = poptorch.MatMulSerializationMode.OutputChannels
        return poptorch.serializedMatMul(x, w, mode, EMBEDDING_SERIALIZATION) + self.bias


class BertForPretraining(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = Embeddings()
        self.layer = torch.nn.ModuleList([Layer() for _ in range(LAYERS)])
        self.pooler = torch.nn.Linear(H, H)
        # The MLM head: transform, then the decoder.
        self.transform = torch.nn.Linear(H, H)
        self.transformNorm = torch.nn.LayerNorm(H)
        self.decoder = Decoder(self.embeddings.word_embeddings)
        self.seq_relationship = torch.nn.Linear(H, 2)

    def forward(self, ids, types, masked_positions, masked_labels, nsp_labels):
        poptorch.Block.start("Embedding", 0)
        h = self.embeddings(ids, types)
        l = 0
        for ipu, n in enumerate(LAYERS_PER_IPU):
            for _ in range(n):
                poptorch.Block.start(f"Encoder{l}", ipu)
                # Only each layer's output is stashed for the backward pass:
                # the layer is recomputed from it.
                h = poptorch.recomputationCheckpoint(self.layer[l](h))
                l += 1
        poptorch.Block.start("Classifier", 0)
        # The masked tokens only, gathered by a one-hot product.
        pick = F.one_hot(masked_positions, SEQ).to(h.dtype)
        masked = pick @ h
        t = self.transformNorm(F.gelu(self.transform(masked)))
        scores = self.decoder(t.reshape(-1, H))
        cls = h[:, 0]  # the first token
        nsp = self.seq_relationship(torch.tanh(self.pooler(cls)))
        mlm_loss = F.cross_entropy(scores, masked_labels.reshape(-1), ignore_index=0)
        nsp_loss = F.cross_entropy(nsp, nsp_labels)
        return scores, poptorch.identity_loss(mlm_loss + nsp_loss, reduction="none")


# \`options\`: the panel's poptorch.Options (this preset sets them as
# Graphcore's ipu_options.py does); \`half\`: the float16 switch.
net = BertForPretraining()
if half:
    net.half()
optimizer = poptorch.optim.LAMB(net.parameters(), ${pythonKwargs(optimizer)})
model = poptorch.trainingModel(net, options, optimizer)
# One micro-batch.
inputs = {
    "input_ids": torch.empty(MICRO_BATCH, SEQ, dtype=torch.long),
    "token_type_ids": torch.empty(MICRO_BATCH, SEQ, dtype=torch.long),
    "masked_lm_positions": torch.empty(MICRO_BATCH, MASK_TOKENS, dtype=torch.long),
    "masked_lm_labels": torch.empty(MICRO_BATCH, MASK_TOKENS, dtype=torch.long),
    "next_sentence_label": torch.empty(MICRO_BATCH, dtype=torch.long),
}
`;
}

/** `{ lr: 0.006, weightDecay: 0.01 }` (the JavaScript preset's text) as Python keyword arguments, in PopTorch's snake_case. */
function pythonKwargs(text) {
  return text
    .replace(/^\{\s*|\s*\}$/g, "")
    .split(/,\s*/)
    .map((kv) => {
      const [k, v] = kv.split(/:\s*/);
      return `${k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}=${v === "false" ? "False" : v === "true" ? "True" : v}`;
    })
    .join(", ");
}
