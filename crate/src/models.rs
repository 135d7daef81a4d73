//! Demo models for the planner, traced with one Block per IPU the way a PopTorch user
//! annotates them (`BeginBlock` at each IPU's first layer): an MLP, a transformer encoder
//! and RevGNN (by default with PubMed-like padded sizes; no data needed — traced by
//! `gnn::preview`, the one home of RevGNN without data). The planner's example, its tests
//! and benchmark, and the JavaScript `demoModel` share them ([`DemoConfig`] is its
//! configuration), with inputs the CPU executor can run ([`demo_inputs`]).

use crate::compile::placement::first_layer_on_ipu;
use crate::gnn::nn::{RevGnn, RevGnnConfig};
use crate::gnn::preview::{self, GraphSizes, KeyError};
use crate::ir::{InputKind, Reduction, TensorType};
use crate::rng::Rng;
use crate::tensor::{DType, Tensor};
use crate::trace::check::ArgError;
use crate::trace::nn::{call, Embedding, LayerNorm, Linear};
use crate::trace::{Trace, Tracer, Var};
use crate::{Error, Result};
use serde::Deserialize;
use std::rc::Rc;

/// Which demo model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoKind {
    Mlp,
    Transformer,
    RevGnn,
}

impl DemoKind {
    pub fn parse(s: &str) -> crate::Result<DemoKind> {
        match s.to_ascii_lowercase().as_str() {
            "mlp" => Ok(DemoKind::Mlp),
            "transformer" => Ok(DemoKind::Transformer),
            "revgnn" | "rev_gnn" | "rev-gnn" => Ok(DemoKind::RevGnn),
            _ => Err(Error::trace(format!("unknown model '{s}': use mlp, transformer or revgnn"))),
        }
    }
}

/// Sizes of a demo model. [`DemoSizes::full`] is what the example plans; [`DemoSizes::small`]
/// keeps the executor fast in tests.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoSizes {
    /// MLP and transformer: samples per micro-batch.
    pub batch: usize,
    /// MLP: input features and hidden width; transformer: model width.
    pub input: usize,
    pub width: usize,
    /// Transformer: sequence length, heads, feed-forward width, vocabulary.
    pub seq: usize,
    pub heads: usize,
    pub ff: usize,
    pub vocab: usize,
    /// Output classes.
    pub classes: usize,
    /// RevGNN: nodes per padded part, edges per part (self-loops included), stored feature
    /// entries, features, hidden width and groups.
    pub nodes: usize,
    pub edges: usize,
    pub x_nnz: usize,
    pub features: usize,
    pub hidden: usize,
    pub groups: usize,
    /// RevGNN: the dropout probability.
    pub dropout: f32,
    /// The seed the parameters are drawn from.
    pub seed: u64,
}

impl DemoSizes {
    /// The example's sizes. RevGNN: PubMed (19,717 nodes, 500 features, 3 classes) in 10
    /// RandomNodeLoader parts, padded as the trainer pads them (the engine benchmark's
    /// sizes): 1,973 nodes, 14,000 edges with self-loops and 120,000 stored features per
    /// part; hidden 160 in 2 groups (`examples/rev_gnn.py`).
    pub fn full(kind: DemoKind) -> DemoSizes {
        let base = DemoSizes {
            batch: 32,
            input: 784,
            width: 1024,
            seq: 128,
            heads: 4,
            ff: 1024,
            vocab: 1000,
            classes: 10,
            nodes: 1973,
            edges: 14_000,
            x_nnz: 120_000,
            features: 500,
            hidden: 160,
            groups: 2,
            dropout: 0.5,
            seed: 0,
        };
        match kind {
            DemoKind::Transformer => DemoSizes { batch: 8, width: 256, ..base },
            DemoKind::RevGnn => DemoSizes { classes: 3, ..base },
            DemoKind::Mlp => base,
        }
    }

    /// Small sizes for tests (the same structure).
    pub fn small(kind: DemoKind) -> DemoSizes {
        let base = DemoSizes {
            batch: 8,
            input: 24,
            width: 32,
            seq: 16,
            heads: 2,
            ff: 64,
            vocab: 50,
            classes: 5,
            nodes: 60,
            edges: 240,
            x_nnz: 300,
            features: 40,
            hidden: 16,
            groups: 2,
            dropout: 0.5,
            seed: 0,
        };
        match kind {
            DemoKind::RevGnn => DemoSizes { classes: 3, ..base },
            _ => base,
        }
    }
}

/// Most parameters a demo model may have (1 GiB of float32), checked before building one.
pub const MAX_DEMO_PARAMETERS: usize = 1 << 28;
/// Most layers of a demo model (a 1,000-layer RevGNN is the planner's benchmark).
pub const MAX_DEMO_LAYERS: usize = preview::MAX_LAYERS;

impl DemoSizes {
    /// RevGNN: the graph one step runs on.
    pub fn graph_sizes(&self) -> GraphSizes {
        GraphSizes { nodes: self.nodes, edges: self.edges, feature_nnz: self.x_nnz }
    }
}

/// The configuration of a demo model from JSON (the JavaScript `demoModel(kind, config)`):
/// `{layers = 4, ipus = 1, training = false, small = false, graph = true}` for every kind,
/// and for RevGNN the model's and the graph's sizes, each defaulting to
/// [`DemoSizes::full`] (or [`DemoSizes::small`]): `{hidden, groups, dropout, inChannels,
/// outChannels, nodes, edges, featureNnz, seed}` (`edges` counts stored adjacency entries,
/// self-loops included; `featureNnz` stored feature entries). Unknown keys are rejected
/// by name.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DemoConfig {
    pub layers: usize,
    pub ipus: usize,
    /// Trace training behaviour (dropout masks).
    pub training: bool,
    /// Start from the test sizes.
    pub small: bool,
    /// Return the graph and its text (large for deep models).
    pub graph: bool,
    pub hidden: Option<usize>,
    pub groups: Option<usize>,
    pub dropout: Option<f32>,
    pub in_channels: Option<usize>,
    pub out_channels: Option<usize>,
    pub nodes: Option<usize>,
    pub edges: Option<usize>,
    pub feature_nnz: Option<usize>,
    pub seed: Option<u64>,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            layers: 4,
            ipus: 1,
            training: false,
            small: false,
            graph: true,
            hidden: None,
            groups: None,
            dropout: None,
            in_channels: None,
            out_channels: None,
            nodes: None,
            edges: None,
            feature_nnz: None,
            seed: None,
        }
    }
}

impl DemoConfig {
    /// Parses a config object (an array is not accepted in its place: its items would be
    /// read by position). Range errors name the key; `ipus` is checked against the layers
    /// when the model is traced ([`DemoNet::trace`]).
    pub fn from_json(json: &str) -> std::result::Result<DemoConfig, KeyError> {
        let v: serde_json::Value = serde_json::from_str(json).map_err(|e| ArgError::value(e.to_string()))?;
        if !v.is_object() {
            return Err(ArgError::type_(format!("config must be an object like {{\"layers\": 4}}, got {v}")).into());
        }
        let c: DemoConfig = serde_json::from_value(v).map_err(|e| ArgError::value(e.to_string()))?;
        if c.layers == 0 || c.layers > MAX_DEMO_LAYERS {
            return Err(KeyError::on(
                "layers",
                ArgError::range(format!("layers must be from 1 to {MAX_DEMO_LAYERS}, got {}", c.layers)),
            ));
        }
        Ok(c)
    }

    /// The sizes of demo model `kind`: the defaults with this config's RevGNN sizes (which
    /// only RevGNN takes), checked by `gnn::preview`.
    pub fn sizes(&self, kind: DemoKind) -> std::result::Result<DemoSizes, KeyError> {
        let base = if self.small { DemoSizes::small(kind) } else { DemoSizes::full(kind) };
        let revgnn_keys = [
            ("hidden", self.hidden.is_some()),
            ("groups", self.groups.is_some()),
            ("dropout", self.dropout.is_some()),
            ("inChannels", self.in_channels.is_some()),
            ("outChannels", self.out_channels.is_some()),
            ("nodes", self.nodes.is_some()),
            ("edges", self.edges.is_some()),
            ("featureNnz", self.feature_nnz.is_some()),
        ];
        if kind != DemoKind::RevGnn {
            if let Some((key, _)) = revgnn_keys.iter().find(|k| k.1) {
                return Err(KeyError::on(
                    key,
                    ArgError::value(format!("{key} is an option of the revgnn demo model only")),
                ));
            }
        }
        let s = DemoSizes {
            hidden: self.hidden.unwrap_or(base.hidden),
            groups: self.groups.unwrap_or(base.groups),
            dropout: self.dropout.unwrap_or(base.dropout),
            features: self.in_channels.unwrap_or(base.features),
            classes: self.out_channels.unwrap_or(base.classes),
            nodes: self.nodes.unwrap_or(base.nodes),
            edges: self.edges.unwrap_or(base.edges),
            x_nnz: self.feature_nnz.unwrap_or(base.x_nnz),
            seed: self.seed.unwrap_or(base.seed),
            ..base
        };
        if kind == DemoKind::RevGnn {
            let cfg = RevGnnConfig {
                in_channels: s.features,
                hidden: s.hidden,
                out_channels: s.classes,
                num_layers: self.layers,
                num_groups: s.groups,
                dropout: s.dropout,
                disable_rev: false,
            };
            preview::check(&cfg, &s.graph_sizes())?;
        }
        Ok(s)
    }
}

impl DemoSizes {
    /// How many parameters demo model `kind` with `layers` layers has (saturating).
    pub fn parameters(&self, kind: DemoKind, layers: usize) -> usize {
        let lin = |i: usize, o: usize| i.saturating_mul(o).saturating_add(o);
        if kind == DemoKind::Mlp {
            // Linear(input, width), layers - 2 × Linear(width, width), Linear(width, classes).
            return match layers {
                0 => 0,
                1 => lin(self.input, self.classes),
                _ => lin(self.width, self.width)
                    .saturating_mul(layers - 2)
                    .saturating_add(lin(self.input, self.width) + lin(self.width, self.classes)),
            };
        }
        let per_layer = match kind {
            DemoKind::Mlp => 0,
            DemoKind::Transformer => {
                let d = self.width;
                lin(d, 3 * d) + lin(d, d) + lin(d, self.ff) + lin(self.ff, d) + 4 * d
            }
            DemoKind::RevGnn => {
                // Per group: SAGEConv (lin_l with bias, lin_r without) and a LayerNorm.
                let w = self.hidden / self.groups.max(1);
                self.groups * (lin(w, w) + w * w + 2 * w)
            }
        };
        let ends = match kind {
            DemoKind::Mlp => 0,
            DemoKind::Transformer => self.vocab * self.width + lin(self.width, self.classes),
            DemoKind::RevGnn => lin(self.features, self.hidden) + lin(self.hidden, self.classes) + 2 * self.hidden,
        };
        per_layer.saturating_mul(layers).saturating_add(ends)
    }
}

/// A traced demo model: `trace.graph.outputs[0]` is its scalar loss.
pub struct DemoModel {
    pub kind: DemoKind,
    pub trace: Trace,
    /// Samples per micro-batch (nodes per part for RevGNN).
    pub micro_batch_size: usize,
    pub sizes: DemoSizes,
}

/// Starts block `ipu<k>` on IPU k at layer `i` when the layer is the first on its IPU.
fn begin(tr: &Tracer, i: usize, layers: usize, ipus: usize) {
    if let Some(k) = first_layer_on_ipu(i, layers, ipus) {
        tr.begin_block(&format!("ipu{k}"), Some(k));
    }
}

/// One pre-norm transformer encoder layer's modules.
pub struct EncoderLayer {
    ln1: LayerNorm,
    qkv: Linear,
    proj: Linear,
    ln2: LayerNorm,
    ff1: Linear,
    ff2: Linear,
}

impl EncoderLayer {
    fn new(s: &DemoSizes, rng: &mut Rng) -> Result<EncoderLayer> {
        let d = s.width;
        if s.heads == 0 || !d.is_multiple_of(s.heads) {
            return Err(Error::trace(format!("width {d} is not divisible by {} heads", s.heads)));
        }
        Ok(EncoderLayer {
            ln1: LayerNorm::new(d),
            qkv: Linear::new(d, 3 * d, true, rng)?,
            proj: Linear::new(d, d, true, rng)?,
            ln2: LayerNorm::new(d),
            ff1: Linear::new(d, s.ff, true, rng)?,
            ff2: Linear::new(s.ff, d, true, rng)?,
        })
    }

    /// x + attention(LN(x)), then + FF(LN(·)) with GELU.
    fn forward(&self, tr: &Tracer, x: &Var, s: &DemoSizes) -> Result<Var> {
        let (b, t, d, h) = (s.batch as isize, s.seq as isize, s.width, s.heads);
        let dh = (d / h) as isize;
        let a = call(tr, "ln1", &self.ln1, x)?;
        let parts = call(tr, "qkv", &self.qkv, &a)?.chunk(3, -1)?;
        let heads = |v: &Var| -> Result<Var> { v.reshape(&[b, t, h as isize, dh])?.permute(&[0, 2, 1, 3]) };
        let (q, k, v) = (heads(&parts[0])?, heads(&parts[1])?, heads(&parts[2])?);
        let scores = q.matmul(&k.transpose(-2, -1)?)?.scale(1.0 / (dh as f64).sqrt())?.softmax(-1)?;
        let ctx = scores.matmul(&v)?.permute(&[0, 2, 1, 3])?.reshape(&[b, t, d as isize])?;
        let x = x.add(&call(tr, "proj", &self.proj, &ctx)?)?;
        let f = call(tr, "ln2", &self.ln2, &x)?;
        let f = call(tr, "ff1", &self.ff1, &f)?.gelu()?;
        x.add(&call(tr, "ff2", &self.ff2, &f)?)
    }
}

enum Net {
    Mlp(Vec<Linear>),
    Transformer { embed: Embedding, layers: Vec<EncoderLayer>, head: Linear },
    RevGnn(RevGnn),
}

/// A demo model with its parameters initialised, ready to trace.
pub struct DemoNet {
    pub kind: DemoKind,
    pub layers: usize,
    pub sizes: DemoSizes,
    net: Net,
}

impl DemoNet {
    /// Builds demo model `kind` with `layers` layers (parameters drawn from a fixed seed).
    pub fn new(kind: DemoKind, layers: usize, sizes: &DemoSizes) -> Result<DemoNet> {
        if layers == 0 {
            return Err(Error::trace("the number of layers must be positive"));
        }
        let n = sizes.parameters(kind, layers);
        if n > MAX_DEMO_PARAMETERS {
            return Err(Error::trace(format!(
                "a {kind:?} of {layers} layers would have about {n} parameters, more than the {MAX_DEMO_PARAMETERS} \
                 (1 GiB of float32) a demo model may have: use fewer layers"
            )));
        }
        let mut rng = Rng::new(sizes.seed);
        let s = sizes;
        let net = match kind {
            DemoKind::Mlp => Net::Mlp(
                (0..layers)
                    .map(|i| {
                        let fan_in = if i == 0 { s.input } else { s.width };
                        let fan_out = if i + 1 == layers { s.classes } else { s.width };
                        Linear::new(fan_in, fan_out, true, &mut rng)
                    })
                    .collect::<Result<_>>()?,
            ),
            DemoKind::Transformer => Net::Transformer {
                embed: Embedding::new(s.vocab, s.width, &mut rng),
                layers: (0..layers).map(|_| EncoderLayer::new(s, &mut rng)).collect::<Result<_>>()?,
                head: Linear::new(s.width, s.classes, true, &mut rng)?,
            },
            DemoKind::RevGnn => Net::RevGnn(preview::build(
                RevGnnConfig {
                    in_channels: s.features,
                    hidden: s.hidden,
                    out_channels: s.classes,
                    num_layers: layers,
                    num_groups: s.groups,
                    dropout: s.dropout,
                    disable_rev: false,
                },
                &s.graph_sizes(),
                s.seed,
            )?),
        };
        Ok(DemoNet { kind, layers, sizes: sizes.clone(), net })
    }

    /// Traces the model with its layers split evenly over `ipus` IPUs (one Block per IPU);
    /// `training` traces training behaviour (dropout masks).
    pub fn trace(&self, ipus: usize, training: bool) -> Result<DemoModel> {
        let layers = self.layers;
        if ipus == 0 || ipus > layers {
            return Err(Error::trace(format!(
                "{ipus} IPUs for {layers} layers: give each IPU at least one layer (1 <= ipus <= layers)"
            )));
        }
        let tr = Tracer::new();
        tr.set_training(training);
        let s = &self.sizes;
        let (loss, mb) = match &self.net {
            Net::Mlp(lins) => {
                let x = tr.input("x", &[s.batch, s.input], DType::Float32)?;
                let y = tr.input("y", &[s.batch], DType::Int32)?;
                let mut h = x;
                for (i, lin) in lins.iter().enumerate() {
                    begin(&tr, i, layers, ipus);
                    h = tr.scope("layers", || call(&tr, &i.to_string(), lin, &h))?;
                    if i + 1 < layers {
                        h = h.relu()?;
                    }
                }
                (h.cross_entropy(&y, None, Reduction::Mean, None)?, s.batch)
            }
            Net::Transformer { embed, layers: encs, head } => {
                let tokens = tr.input("tokens", &[s.batch, s.seq], DType::Int32)?;
                let y = tr.input("y", &[s.batch], DType::Int32)?;
                let mut h: Option<Var> = None;
                for (i, enc) in encs.iter().enumerate() {
                    begin(&tr, i, layers, ipus);
                    let x = match h.take() {
                        Some(x) => x,
                        None => call(&tr, "embed", embed, &tokens)?,
                    };
                    h = Some(tr.scope("layers", || tr.scope(&i.to_string(), || enc.forward(&tr, &x, s)))?);
                }
                let pooled = h.expect("layers >= 1").mean(&[1], false)?;
                let logits = call(&tr, "head", head, &pooled)?;
                (logits.cross_entropy(&y, None, Reduction::Mean, None)?, s.batch)
            }
            Net::RevGnn(model) => {
                let trace = preview::trace(model, &s.graph_sizes(), ipus, training)?;
                return Ok(DemoModel { kind: self.kind, trace, micro_batch_size: s.nodes, sizes: s.clone() });
            }
        };
        let trace = tr.finish(&[&loss])?;
        Ok(DemoModel { kind: self.kind, trace, micro_batch_size: mb, sizes: s.clone() })
    }
}

/// Builds and traces demo model `kind` ([`DemoNet::new`], then [`DemoNet::trace`]).
pub fn demo_model(kind: DemoKind, layers: usize, ipus: usize, training: bool, sizes: &DemoSizes) -> Result<DemoModel> {
    DemoNet::new(kind, layers, sizes)?.trace(ipus, training)
}

/// Inputs the CPU executor can run the demo's graph on (valid class labels, token ids and
/// CSR matrices), drawn from `seed`.
pub fn demo_inputs(m: &DemoModel, seed: u64) -> crate::Result<Vec<Rc<Tensor>>> {
    let mut rng = Rng::new(seed);
    let s = &m.sizes;
    let inputs: Vec<(String, TensorType)> = m
        .trace
        .graph
        .placeholders(InputKind::Input)
        .into_iter()
        .map(|(n, v)| (n.to_string(), m.trace.graph.ty(v).clone()))
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < inputs.len() {
        let (name, ty) = &inputs[i];
        if let Some(base) = name.strip_suffix(".indptr") {
            // A CSR matrix: indptr, indices, values.
            let rows = ty.shape[0] - 1;
            let nnz = inputs[i + 1].1.shape[0];
            let cols = if base == "x" { s.features } else { s.nodes };
            let indptr: Vec<i32> = (0..=rows).map(|r| (r * nnz / rows.max(1)) as i32).collect();
            let indices: Vec<i32> = (0..nnz).map(|_| rng.below(cols) as i32).collect();
            let values: Vec<f32> = (0..nnz).map(|_| rng.uniform_range(0.0, 1.0)).collect();
            out.push(Rc::new(Tensor::from_i32(&[rows + 1], indptr)?));
            out.push(Rc::new(Tensor::from_i32(&[nnz], indices)?));
            out.push(Rc::new(Tensor::from_f32(&[nnz], values)?));
            i += 3;
            continue;
        }
        let n = ty.numel();
        out.push(Rc::new(match ty.dtype {
            DType::Float32 => Tensor::from_f32(&ty.shape, (0..n).map(|_| rng.uniform_range(-1.0, 1.0)).collect())?,
            DType::Int32 => {
                let hi = if name == "tokens" { s.vocab } else { s.classes };
                Tensor::from_i32(&ty.shape, (0..n).map(|_| rng.below(hi) as i32).collect())?
            }
            DType::Bool => Tensor::from_bool(&ty.shape, (0..n).map(|_| rng.below(2) == 1).collect())?,
            other => {
                return Err(Error::trace(format!(
                    "demo input '{name}' has dtype {other}, which demo_inputs does not make"
                )))
            }
        }));
        i += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_counts_match_the_traced_models() {
        for kind in [DemoKind::Mlp, DemoKind::Transformer, DemoKind::RevGnn] {
            let s = DemoSizes::small(kind);
            let m = demo_model(kind, 3, 1, false, &s).unwrap();
            let traced: usize = m.trace.params.iter().map(|(_, t)| t.numel()).sum();
            assert_eq!(s.parameters(kind, 3), traced, "{kind:?}");
        }
    }

    #[test]
    fn layers_split_evenly_with_one_block_per_ipu() {
        assert_eq!(
            (0..7).map(|i| crate::compile::placement::ipu_of_layer(i, 7, 3)).collect::<Vec<_>>(),
            [0, 0, 0, 1, 1, 2, 2]
        );
        for kind in [DemoKind::Mlp, DemoKind::Transformer, DemoKind::RevGnn] {
            let m = demo_model(kind, 4, 2, true, &DemoSizes::small(kind)).unwrap();
            let blocks: std::collections::BTreeSet<(String, usize)> =
                m.trace.graph.nodes.iter().filter_map(|n| Some((n.meta.block.clone()?, n.meta.ipu?))).collect();
            let want: std::collections::BTreeSet<(String, usize)> =
                [("ipu0".to_string(), 0), ("ipu1".to_string(), 1)].into_iter().collect();
            assert_eq!(blocks, want, "{kind:?}");
            assert!(m.trace.graph.ty(m.trace.graph.outputs[0]).shape.is_empty(), "the loss is a scalar");
            assert_eq!(demo_inputs(&m, 0).unwrap().len(), m.trace.graph.placeholders(InputKind::Input).len());
        }
        assert!(demo_model(DemoKind::Mlp, 2, 3, false, &DemoSizes::small(DemoKind::Mlp)).is_err());
        let e = DemoNet::new(DemoKind::Transformer, 4096, &DemoSizes::full(DemoKind::Transformer)).err().unwrap();
        assert!(e.to_string().contains("parameters") && e.to_string().contains("fewer layers"), "{}", e.to_string());
        assert!(DemoKind::parse("cnn").unwrap_err().to_string().contains("mlp"));
    }
}
