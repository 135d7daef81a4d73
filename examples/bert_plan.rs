//! BERT-Large phase-1 pre-training as Graphcore's PopTorch example trains it, planned natively:
//! the model the page's `bert-large` preset writes in JavaScript (www/presets/bert.js), built
//! with the crate's modules (shape-only parameters: nothing is allocated), traced, wrapped by
//! `poptorch::training_model` with Graphcore's options (`pretrain_large_128`: 4 IPUs per
//! replica, layers [3, 7, 7, 7], 4 replicas, gradient accumulation 2048, LAMB, float16 with
//! half partials) and planned (`plan_report`: the training graph, then the plan). Prints one
//! JSON line: the times of each part, the plan's validity, fit and step time, and the
//! process's peak resident memory.
//!
//! ```sh
//! cargo run --release --example bert_plan -- [--layers 24] [--hidden 1024] [--heads 16] \
//!     [--per-ipu 3,7,7,7] [--micro 8] [--replicas 4] [--accumulation 2048] [--serialization 2] \
//!     [--repeat 3]
//! ```

use ipu_playground::compile::Options;
use ipu_playground::ir::{Reduction, TensorType};
use ipu_playground::poptorch::{training_model, HostModel, Optimizer, OptimizerArgs};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::{DType, Tensor};
use ipu_playground::trace::nn::{Embedding, LayerNorm, Linear, Module};
use ipu_playground::trace::{MatMulSerializationMode, Trace, Tracer, Var};
use ipu_playground::Result;
use std::time::Instant;

const VOCAB: usize = 30522;
const SEQ: usize = 128;
const MASK_TOKENS: usize = 20;

struct Config {
    layers: usize,
    hidden: usize,
    heads: usize,
    per_ipu: Vec<usize>,
    micro: usize,
    replicas: usize,
    accumulation: usize,
    /// The MLM decoder's product in this many pieces (embedding_serialization_factor).
    serialization: usize,
    repeat: usize,
}

fn args() -> std::result::Result<Config, String> {
    let mut c = Config {
        layers: 24,
        hidden: 1024,
        heads: 16,
        per_ipu: vec![3, 7, 7, 7],
        micro: 8,
        replicas: 4,
        accumulation: 2048,
        serialization: 2,
        repeat: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = || value.parse::<usize>().map_err(|e| format!("{flag} {value}: {e}"));
        match flag.as_str() {
            "--layers" => c.layers = num()?,
            "--hidden" => c.hidden = num()?,
            "--heads" => c.heads = num()?,
            "--micro" => c.micro = num()?,
            "--replicas" => c.replicas = num()?,
            "--accumulation" => c.accumulation = num()?,
            "--serialization" => c.serialization = num()?,
            "--repeat" => c.repeat = num()?.max(1),
            "--per-ipu" => {
                c.per_ipu = value
                    .split(',')
                    .map(|s| s.trim().parse::<usize>())
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|e| format!("--per-ipu {value}: {e}"))?
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if c.per_ipu.iter().sum::<usize>() != c.layers {
        return Err(format!("--per-ipu {:?} does not add up to {} layers", c.per_ipu, c.layers));
    }
    Ok(c)
}

/// One encoder layer (HF's BertLayer): self-attention, dense + residual + LayerNorm, the
/// feed-forward, dense + residual + LayerNorm.
struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    intermediate: Linear,
    out: Linear,
    out_norm: LayerNorm,
}

impl Layer {
    fn new(h: usize, rng: &mut Rng) -> Result<Layer> {
        Ok(Layer {
            query: Linear::new(h, h, true, rng)?,
            key: Linear::new(h, h, true, rng)?,
            value: Linear::new(h, h, true, rng)?,
            attn_out: Linear::new(h, h, true, rng)?,
            attn_norm: LayerNorm::new(h),
            intermediate: Linear::new(h, 4 * h, true, rng)?,
            out: Linear::new(4 * h, h, true, rng)?,
            out_norm: LayerNorm::new(h),
        })
    }

    fn modules(&mut self) -> Vec<&mut dyn Module> {
        vec![
            &mut self.query,
            &mut self.key,
            &mut self.value,
            &mut self.attn_out,
            &mut self.attn_norm,
            &mut self.intermediate,
            &mut self.out,
            &mut self.out_norm,
        ]
    }

    fn forward(&self, tr: &Tracer, x: &Var, heads: usize) -> Result<Var> {
        let (b, s, h) = (x.shape()[0] as isize, x.shape()[1] as isize, x.shape()[2] as isize);
        let d = h / heads as isize;
        let split = |t: Var| t.reshape(&[b, s, heads as isize, d])?.permute(&[0, 2, 1, 3]);
        let q = split(tr.scope("attention.self.query", || self.query.forward(tr, x))?)?;
        let k = split(tr.scope("attention.self.key", || self.key.forward(tr, x))?)?;
        let v = split(tr.scope("attention.self.value", || self.value.forward(tr, x))?)?;
        let p = q.matmul(&k.transpose(2, 3)?)?.scale(1.0 / (d as f64).sqrt())?.softmax(-1)?;
        let ctx = p.matmul(&v)?.permute(&[0, 2, 1, 3])?.reshape(&[b, s, h])?;
        let a = tr.scope("attention.output", || {
            let y = tr.scope("dense", || self.attn_out.forward(tr, &ctx))?.add(x)?;
            tr.scope("LayerNorm", || self.attn_norm.forward(tr, &y))
        })?;
        let f = tr.scope("intermediate.dense", || self.intermediate.forward(tr, &a))?.gelu()?;
        tr.scope("output", || {
            let y = tr.scope("dense", || self.out.forward(tr, &f))?.add(&a)?;
            tr.scope("LayerNorm", || self.out_norm.forward(tr, &y))
        })
    }
}

/// BERT for pre-training: the embeddings, the encoder, the pooler and the two heads (MLM,
/// its decoder the word embedding's weight, its product serialised over the vocabulary as
/// Graphcore's SerializedLinear, with a bias of its own; next sentence).
struct Bert {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    embed_norm: LayerNorm,
    layers: Vec<Layer>,
    pooler: Linear,
    transform: Linear,
    transform_norm: LayerNorm,
    decoder: Linear,
    seq_relationship: Linear,
}

impl Bert {
    fn new(c: &Config) -> Result<Bert> {
        let mut rng = Rng::new(5);
        let h = c.hidden;
        let word = Embedding::new(VOCAB, h, &mut rng);
        // Only the decoder's bias is used: its weight is the word embedding's.
        let decoder = Linear::new(h, VOCAB, true, &mut rng)?;
        let mut bert = Bert {
            word,
            position: Embedding::new(512, h, &mut rng),
            token_type: Embedding::new(2, h, &mut rng),
            embed_norm: LayerNorm::new(h),
            layers: (0..c.layers).map(|_| Layer::new(h, &mut rng)).collect::<Result<_>>()?,
            pooler: Linear::new(h, h, true, &mut rng)?,
            transform: Linear::new(h, h, true, &mut rng)?,
            transform_norm: LayerNorm::new(h),
            decoder,
            seq_relationship: Linear::new(h, 2, true, &mut rng)?,
        };
        bert.half();
        Ok(bert)
    }

    /// `model.half()`: every parameter float16 (still shape-only).
    fn half(&mut self) {
        let mut all: Vec<&mut dyn Module> = vec![
            &mut self.word,
            &mut self.position,
            &mut self.token_type,
            &mut self.embed_norm,
            &mut self.pooler,
            &mut self.transform,
            &mut self.transform_norm,
            &mut self.decoder,
            &mut self.seq_relationship,
        ];
        for l in &mut self.layers {
            all.extend(l.modules());
        }
        for m in all {
            m.for_each_parameter_mut(&mut |_, p| *p = p.cast(DType::Float16));
        }
    }

    fn trace(&self, c: &Config) -> Result<Trace> {
        let tr = Tracer::new();
        tr.set_training(true);
        let int = |name: &str, shape: &[usize]| tr.input(name, shape, DType::Int32);
        let ids = int("input_ids", &[c.micro, SEQ])?;
        let types = int("token_type_ids", &[c.micro, SEQ])?;
        let positions = int("masked_lm_positions", &[c.micro, MASK_TOKENS])?;
        let labels = int("masked_lm_labels", &[c.micro, MASK_TOKENS])?;
        let nsp_labels = int("next_sentence_label", &[c.micro])?;
        tr.begin_block("Embedding", Some(0));
        let mut h = tr.scope("embeddings", || {
            let pos = tr.constant(Tensor::from_i32(&[SEQ], (0..SEQ as i32).collect())?)?;
            let e = tr.scope("word_embeddings", || self.word.forward(&tr, &ids))?;
            let e = e.add(&tr.scope("position_embeddings", || self.position.forward(&tr, &pos))?)?;
            let e = e.add(&tr.scope("token_type_embeddings", || self.token_type.forward(&tr, &types))?)?;
            tr.scope("LayerNorm", || self.embed_norm.forward(&tr, &e))
        })?;
        let mut l = 0;
        for (ipu, &n) in c.per_ipu.iter().enumerate() {
            for _ in 0..n {
                tr.begin_block(&format!("Encoder{l}"), Some(ipu));
                let y = tr.scope(&format!("layer.{l}"), || self.layers[l].forward(&tr, &h, c.heads))?;
                h = y.recomputation_checkpoint()?;
                l += 1;
            }
        }
        tr.begin_block("Classifier", Some(0));
        let pick = positions.one_hot(SEQ)?.cast(DType::Float16)?;
        let masked = pick.matmul(&h)?;
        let t = tr.scope("transform", || self.transform.forward(&tr, &masked))?.gelu()?;
        let t = tr.scope("transformNorm", || self.transform_norm.forward(&tr, &t))?;
        let t = t.reshape(&[-1, c.hidden as isize])?;
        let scores = tr.scope("decoder", || {
            // The word embedding's weight (one parameter with the lookup's), serialised.
            let w = tr.param("weight", &self.word.weight)?.transpose(0, 1)?;
            let y = t.serialized_matmul(&w, MatMulSerializationMode::OutputChannels, c.serialization, false)?;
            y.add(&tr.param("bias", self.decoder.bias.clone().expect("the decoder has a bias"))?)
        })?;
        let cls = h.slice(1, 0, 1, 1)?.reshape(&[-1, c.hidden as isize])?;
        let pooled = tr.scope("pooler", || self.pooler.forward(&tr, &cls))?.tanh()?;
        let nsp = tr.scope("seq_relationship", || self.seq_relationship.forward(&tr, &pooled))?;
        let flat = labels.reshape(&[-1])?;
        let mlm_loss = scores.cross_entropy_with(&flat, None, Reduction::Mean, None, Some(0), 0.0)?;
        let nsp_loss = nsp.cross_entropy(&nsp_labels, None, Reduction::Mean, None)?;
        let loss = mlm_loss.add(&nsp_loss)?.identity_loss(Reduction::None)?;
        tr.finish(&[&scores, &loss])
    }
}

/// Graphcore's ipu_options.py with the configuration's numbers, as the preset's options.
fn options(c: &Config) -> Result<Options> {
    let proportions: Vec<String> = [0.15, 0.25, 0.25, 0.25]
        .iter()
        .take(c.per_ipu.len())
        .enumerate()
        .map(|(i, p)| format!("\"IPU{i}\": {p}"))
        .collect();
    let json = format!(
        r#"{{"replicationFactor": {}, "autoRoundNumIPUs": true, "outputMode": "sum", "randomSeed": 5,
            "executionStrategy": {{"type": "pipelined", "autoStage": "autoIncrement"}},
            "availableMemoryProportion": {{{}}},
            "Training": {{"gradientAccumulation": {}, "accumulationAndReplicationReductionType": "mean"}},
            "TensorLocations": {{"optimizer": {{"useOnChipStorage": false, "useReplicatedTensorSharding": true}}}},
            "Precision": {{"partialsType": "half", "enableStochasticRounding": true}}}}"#,
        c.replicas,
        proportions.join(", "),
        c.accumulation
    );
    Options::from_json(&json).map_err(Into::into)
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// The process's peak resident memory (Linux `VmHWM`), in bytes.
fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = s.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> std::process::ExitCode {
    let c = match args() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bert_plan: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match run(&c) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bert_plan: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(c: &Config) -> Result<()> {
    let (mut build, mut trace, mut plan_ms) = (vec![], vec![], vec![]);
    let mut last = None;
    for _ in 0..c.repeat {
        let t = Instant::now();
        let bert = Bert::new(c)?;
        build.push(ms(t));
        let t = Instant::now();
        let traced = bert.trace(c)?;
        trace.push(ms(t));
        let t = Instant::now();
        let model = HostModel::new(&traced);
        let mut o = options(c)?;
        let lamb = Optimizer::lamb(OptimizerArgs {
            lr: Some(0.006),
            weight_decay: Some(0.01),
            loss_scaling: Some(4096.0),
            ..OptimizerArgs::default()
        })?;
        let mut m = training_model(&model, &mut o, Some(lamb))?;
        // The combined batch: micro-batch × replicas × accumulation, shape-only.
        let f = m.combined_batch_factor();
        let int = |shape: Vec<usize>| TensorType { shape, dtype: DType::Int32 };
        let inputs = [
            int(vec![c.micro * f, SEQ]),
            int(vec![c.micro * f, SEQ]),
            int(vec![c.micro * f, MASK_TOKENS]),
            int(vec![c.micro * f, MASK_TOKENS]),
            int(vec![c.micro * f]),
        ];
        let plan = m.plan_report(&inputs)?;
        plan_ms.push(ms(t));
        last = Some((traced.graph.nodes.len(), plan));
    }
    let (nodes, plan) = last.expect("repeat >= 1");
    let (b, t, p) = (median(build), median(trace), median(plan_ms));
    let planned = plan.graph.nodes.len();
    println!(
        "{{\"model\": \"bert\", \"layers\": {}, \"hidden\": {}, \"per_ipu\": {:?}, \"replicas\": {}, \"accumulation\": {}, \
         \"forward_nodes\": {nodes}, \"planned_nodes\": {planned}, \"build_ms\": {b:.1}, \"trace_ms\": {t:.1}, \
         \"training_graph_and_plan_ms\": {p:.1}, \"total_ms\": {:.1}, \"valid\": {}, \"fits\": {}, \"step_time_s\": {:.4}, \
         \"samples_per_s\": {:.1}, \"peak_rss_bytes\": {}, \"runs\": {}}}",
        c.layers,
        c.hidden,
        c.per_ipu,
        c.replicas,
        c.accumulation,
        b + t + p,
        plan.valid,
        plan.fits,
        plan.time.step_time_s,
        plan.time.throughput,
        peak_rss().unwrap_or(0),
        c.repeat
    );
    Ok(())
}
