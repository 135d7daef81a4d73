//! Training RevGNN on a Planetoid graph, the protocol of PyG's `examples/rev_gnn.py`:
//! RandomNodeLoader parts (shuffled each epoch), loss on the training nodes of each part,
//! Adam, evaluation on the whole graph.
//!
//! A preset over the PopTorch path every model takes (`crate::poptorch`): the RevGNN is
//! traced once for the padded part size (every part is padded to the same node, edge and
//! feature-entry counts, padding masked out of the loss, so one compiled model serves every
//! step) and wrapped by `training_model` with the configured optimizer; evaluation is an
//! `inference_model` of a second, inference-mode trace over the whole graph sharing the
//! same host weights. `examples/rev_gnn.mjs` builds the same thing from JavaScript. No
//! clock is read here (wasm has none): callers time epochs themselves.

use super::config::MAX_ACTIVATION_BYTES;
pub use super::config::{OptimizerKind, TrainConfig};
use super::data::{mean_adjacency, GraphData, PaddedCsr, PaddedLoader, Part, RandomNodeLoader};
use super::nn::{RevGnn, RevGnnConfig};
use crate::ir::{Graph, Reduction};
use crate::poptorch::{inference_model, training_model, HostModel, Optimizer, OptimizerArgs, Options, PoplarExecutor};
use crate::rng::Rng;
use crate::tensor::{DType, Tensor};
use crate::trace::nn::Module;
use crate::trace::{SparseVar, Trace, Tracer};
use crate::{Error, Result};
use std::rc::Rc;

/// One epoch's results.
#[derive(Clone, Debug, Default)]
pub struct EpochStats {
    /// Mean training loss, weighted by training nodes per part (as the PyG example).
    pub loss: f64,
    pub steps: usize,
    /// Largest bytes the forward pass kept for the backward pass, over the steps.
    pub saved_for_backward: u64,
    /// Largest peak of live activation bytes during a step.
    pub peak_bytes: u64,
    /// Per-op calls and seconds, when the executor's profiling is on.
    pub op_time: std::collections::HashMap<&'static str, (usize, f64)>,
}

/// Accuracy on the three splits.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Accuracy {
    pub train: f64,
    pub val: f64,
    pub test: f64,
}

/// A RevGNN wrapped for training and for evaluation, and its loader.
pub struct Trainer {
    pub cfg: TrainConfig,
    pub data: GraphData,
    /// The model as built (its initial weights; the trained ones are [`Trainer::parameters`]).
    pub model: RevGnn,
    /// The traced model and its host weights, shared by both wrappers.
    pub host: HostModel,
    train: PoplarExecutor,
    eval: PoplarExecutor,
    /// The parts, shuffled each epoch and padded to one size.
    pub loader: PaddedLoader,
    eval_inputs: Vec<Rc<Tensor>>,
    epoch: usize,
    /// Set when the loss or the parameters stopped being finite: every later call fails
    /// with this message instead of training on, or reporting accuracies of, NaN weights.
    diverged: Option<String>,
}

/// The three tensors of a sparse input.
fn csr_inputs(m: PaddedCsr) -> Result<[Rc<Tensor>; 3]> {
    Ok(m.tensors()?.map(Rc::new))
}

/// Fails when running `g` would keep more than [`MAX_ACTIVATION_BYTES`] of activations at
/// once (a deep model without reversible layers keeps every layer's for the backward pass).
fn check_activations(cfg: &TrainConfig, what: &str, g: &Graph) -> Result<()> {
    let peak = crate::ir::liveness::liveness(g).peak() as u128;
    if peak > MAX_ACTIVATION_BYTES as u128 {
        let hint = if cfg.no_rev { "reversible layers (noRev: false), " } else { "" };
        return Err(Error::train(format!(
            "{what} of this RevGNN ({} layers, hidden {}) would keep {peak} bytes of activations at once, more \
             than the limit of {MAX_ACTIVATION_BYTES}: use {hint}fewer layers, a smaller hidden size or more parts",
            cfg.layers, cfg.hidden
        )));
    }
    Ok(())
}

/// The RevGNN traced on sparse features `x` and adjacency `adj` of `nodes` nodes: in
/// training, the masked cross-entropy of a part; otherwise the predicted class of each node.
fn trace_model(model: &RevGnn, training: bool, nodes: usize, x_nnz: usize, edges: usize) -> Result<Trace> {
    let tr = Tracer::new();
    tr.set_training(training);
    let f = model.cfg.in_channels;
    let r = (|| {
        let x = SparseVar::input(&tr, "x", nodes, f, x_nnz)?;
        let adj = SparseVar::input(&tr, "adj", nodes, nodes, edges)?;
        let out = if training {
            let y = tr.input("y", &[nodes], DType::Int32)?;
            let mask = tr.input("train_mask", &[nodes], DType::Bool)?;
            model.forward(&tr, &x, &adj)?.cross_entropy(&y, Some(&mask), Reduction::Mean, None)?
        } else {
            model.forward(&tr, &x, &adj)?.argmax(-1, false)?
        };
        Ok::<_, crate::Error>(out)
    })();
    let out = r?;
    tr.finish(&[&out])
}

impl Trainer {
    /// Builds the model, traces it, wraps it for training and evaluation, compiles both and
    /// checks their activation memory. The config is checked first ([`TrainConfig::check`],
    /// [`TrainConfig::check_model_size`]), so that no size or count is used before it is
    /// known to be in range.
    pub fn new(data: GraphData, cfg: TrainConfig) -> Result<Trainer> {
        cfg.check(data.num_nodes)?;
        cfg.check_model_size(data.num_features, data.num_classes)?;
        let mut rng = Rng::new(cfg.seed);
        let mut model = RevGnn::new(
            RevGnnConfig {
                in_channels: data.num_features,
                hidden: cfg.hidden,
                out_channels: data.num_classes,
                num_layers: cfg.layers,
                num_groups: cfg.groups,
                dropout: cfg.dropout,
                disable_rev: cfg.no_rev,
            },
            &mut rng,
        )?;
        if cfg.half {
            model.for_each_parameter_mut(&mut |_, p| *p = p.cast(DType::Float16));
        }
        let parts = RandomNodeLoader::new(cfg.parts, true, cfg.seed.wrapping_add(1))?;
        let loader = PaddedLoader::new(&data, parts, Some(cfg.epochs))?;
        let sizes = loader.sizes;

        // Training: the loss on the training nodes of one padded part.
        let trace = trace_model(&model, true, sizes.max_nodes, loader.x_capacity, sizes.max_edges)?;
        let host = HostModel::new(&trace);
        let args = OptimizerArgs { lr: Some(cfg.lr), weight_decay: Some(cfg.weight_decay), ..Default::default() };
        let optimizer = match cfg.optimizer {
            OptimizerKind::Adam => Optimizer::adam(args),
            OptimizerKind::AdamW => Optimizer::adamw(args),
            OptimizerKind::Sgd => Optimizer::sgd(args),
        }?;
        let mut opts = Options::new();
        opts.random_seed(cfg.seed.wrapping_add(2))?;
        let mut train = training_model(&host, &mut opts, Some(optimizer))?;
        // Compiled with the first part's shapes (every part has them), without running; the
        // parts are drawn on a copy of the loader, whose first epoch is still to come.
        let first = loader.clone().next_epoch(&data)?;
        let inputs =
            Self::batch_inputs(first.into_iter().next().ok_or_else(|| Error::train("the loader made no part"))?)?;
        train.compile(&inputs)?;
        check_activations(&cfg, "a training step", train.step_graph().ok_or_else(|| Error::train("not compiled"))?)?;

        // Evaluation: the whole graph, inference mode (no dropout), the same weights.
        let nodes = data.num_nodes;
        let full_adj = mean_adjacency(nodes, &data.edge_src, &data.edge_dst);
        let eval_trace = trace_model(&model, false, nodes, data.x.nnz(), full_adj.nnz())?;
        let mut eval = inference_model(&host.with_trace(&eval_trace)?, &mut Options::new())?;
        let mut eval_inputs = Vec::new();
        eval_inputs.extend(csr_inputs(PaddedCsr::exact(data.x.clone()))?);
        eval_inputs.extend(csr_inputs(PaddedCsr::exact(full_adj))?);
        eval.compile(&eval_inputs)?;
        check_activations(&cfg, "the evaluation", eval.step_graph().ok_or_else(|| Error::train("not compiled"))?)?;
        Ok(Trainer { cfg, data, model, host, train, eval, loader, eval_inputs, epoch: 0, diverged: None })
    }

    /// The message for a loss or parameters that stopped being finite (`what`), with the
    /// likely cause.
    fn divergence(&self, what: &str) -> String {
        let d = TrainConfig::default();
        let (lr, wd) = (self.cfg.lr, self.cfg.weight_decay);
        let cause = if lr > d.lr {
            format!("most likely the learning rate is too high (lr = {lr}; the default is {}): try a smaller lr", d.lr)
        } else if wd > 0.1 {
            format!("most likely the weight decay is too high (weightDecay = {wd}): try a smaller one")
        } else {
            format!(
                "the learning rate (lr = {lr}) may still be too high for this model, or the input features hold \
                 very large values"
            )
        };
        format!("training diverged: {what}; {cause}. Build a new trainer to start again")
    }

    /// The inputs of the training step for one padded part.
    fn batch_inputs(part: Part) -> Result<Vec<Rc<Tensor>>> {
        let n = part.sub.data.num_nodes;
        let mut inputs = Vec::new();
        inputs.extend(csr_inputs(part.x())?);
        inputs.extend(csr_inputs(part.mean_adjacency())?);
        inputs.push(Rc::new(Tensor::from_i32(&[n], part.sub.data.y)?));
        inputs.push(Rc::new(Tensor::from_bool(&[n], part.sub.data.train_mask)?));
        Ok(inputs)
    }

    /// Epochs run so far.
    pub fn epoch(&self) -> usize {
        self.epoch
    }

    /// The compiled training step (forward and backward of one part), as it runs.
    pub fn train_graph(&self) -> &Graph {
        self.train.step_graph().expect("compiled in Trainer::new")
    }

    /// The compiled evaluation (the whole graph, inference mode).
    pub fn eval_graph(&self) -> &Graph {
        self.eval.step_graph().expect("compiled in Trainer::new")
    }

    /// The current (trained) parameters, by name (materialised).
    pub fn parameters(&self) -> Result<Vec<(String, Rc<Tensor>)>> {
        self.host.parameters().into_iter().map(|(n, p)| Ok((n, p.value()?))).collect()
    }

    /// One epoch: a training step on each part.
    pub fn train_epoch(&mut self) -> Result<EpochStats> {
        if let Some(msg) = &self.diverged {
            return Err(Error::train(msg.clone()));
        }
        if self.epoch >= self.cfg.epochs {
            return Err(Error::train(format!(
                "the graphs were compiled for {} epochs, all of which have run",
                self.cfg.epochs
            )));
        }
        let subs = self.loader.next_epoch(&self.data)?;
        let mut stats = EpochStats::default();
        let (mut tot, mut count) = (0.0f64, 0usize);
        let parts = subs.len();
        for (i, part) in subs.into_iter().enumerate() {
            let n_train = part.num_train();
            if n_train == 0 {
                continue; // no training node in this part: PyG's loss would be NaN
            }
            let inputs = Self::batch_inputs(part)?;
            let out = self.train.call(&inputs)?;
            let loss = out[0].to_f64_vec()[0];
            if !loss.is_finite() {
                let what = format!("the loss became {loss} at epoch {}, part {} of {parts}", self.epoch + 1, i + 1);
                let msg = self.divergence(&what);
                self.diverged = Some(msg.clone());
                return Err(Error::train(msg));
            }
            tot += loss * n_train as f64;
            count += n_train;
            stats.steps += 1;
            if let Some(r) = self.train.last_stats() {
                stats.saved_for_backward = stats.saved_for_backward.max(r.saved_for_backward);
                stats.peak_bytes = stats.peak_bytes.max(r.peak_bytes);
                crate::exec::merge_op_times(&mut stats.op_time, &r.op_time);
            }
        }
        stats.loss = tot / count.max(1) as f64;
        self.epoch += 1;
        Ok(stats)
    }

    /// Predictions on the whole graph, and accuracy on each split.
    /// Fails (and stays failed) once training has diverged: NaN weights have no accuracy.
    pub fn evaluate(&mut self) -> Result<Accuracy> {
        if let Some(msg) = &self.diverged {
            return Err(Error::train(msg.clone()));
        }
        let finite = |t: &Tensor| t.as_f32().map(|a| a.iter().all(|x| x.is_finite())).unwrap_or(true);
        if let Some(name) = self.parameters()?.iter().find(|(_, t)| !finite(t)).map(|(n, _)| n.clone()) {
            let what = format!("parameter '{name}' is no longer finite after epoch {}", self.epoch);
            let msg = self.divergence(&what);
            self.diverged = Some(msg.clone());
            return Err(Error::train(msg));
        }
        let out = self.eval.call(&self.eval_inputs)?;
        let pred = out[0].to_f64_vec();
        let acc = |mask: &[bool]| {
            let (mut ok, mut n) = (0usize, 0usize);
            for (i, &m) in mask.iter().enumerate() {
                if m {
                    n += 1;
                    ok += (pred[i] as i32 == self.data.y[i]) as usize;
                }
            }
            ok as f64 / n.max(1) as f64
        };
        Ok(Accuracy {
            train: acc(&self.data.train_mask),
            val: acc(&self.data.val_mask),
            test: acc(&self.data.test_mask),
        })
    }

    /// Number of trainable scalars.
    pub fn num_params(&self) -> usize {
        self.host.parameters().iter().map(|(_, t)| t.numel()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gnn::data::add_self_loops;
    use crate::tensor::CsrMatrix;

    /// A small two-community graph: features say the class, edges mostly stay inside it.
    fn toy() -> GraphData {
        let n = 60;
        let mut rng = Rng::new(5);
        let y: Vec<i32> = (0..n).map(|i| (i % 2) as i32).collect();
        let (mut rows, mut cols, mut vals) = (vec![], vec![], vec![]);
        for (i, &yi) in y.iter().enumerate() {
            rows.push(i as u32);
            cols.push((yi as u32) * 2 + rng.below(2) as u32);
            vals.push(1.0);
        }
        let x = CsrMatrix::from_triplets(n, 4, &rows, &cols, &vals);
        let (mut src, mut dst) = (vec![], vec![]);
        for i in 0..n {
            for _ in 0..3 {
                let j = (rng.below(n / 2) * 2 + i % 2) as u32;
                src.push(j);
                dst.push(i as u32);
            }
        }
        let mut d = GraphData {
            name: "toy".into(),
            num_nodes: n,
            num_features: 4,
            num_classes: 2,
            x,
            y,
            edge_src: src,
            edge_dst: dst,
            train_mask: (0..n).map(|i| i < 40).collect(),
            val_mask: (0..n).map(|i| (40..50).contains(&i)).collect(),
            test_mask: (0..n).map(|i| i >= 50).collect(),
        };
        add_self_loops(&mut d);
        d
    }

    /// A 3-layer RevGNN (`half`: float16) trained its 30 epochs on the toy graph: the loss
    /// falls by 30% and the test accuracy reaches 0.8. The trainer, done.
    fn trained_on_the_toy_graph(half: bool) -> Trainer {
        let cfg = TrainConfig { epochs: 30, layers: 3, hidden: 8, parts: 2, lr: 0.01, half, ..TrainConfig::default() };
        let mut t = Trainer::new(toy(), cfg).unwrap();
        let first = t.train_epoch().unwrap().loss;
        let mut last = first;
        for _ in 1..30 {
            last = t.train_epoch().unwrap().loss;
        }
        assert!(last < first * 0.7, "loss {first} -> {last}");
        let acc = t.evaluate().unwrap();
        assert!(acc.test >= 0.8, "{acc:?}");
        t
    }

    #[test]
    fn revgnn_learns_a_toy_graph() {
        let mut t = trained_on_the_toy_graph(false);
        assert!(t.train_epoch().unwrap_err().message().contains("30 epochs"));
    }

    #[test]
    fn a_half_revgnn_learns_the_toy_graph_with_float16_weights() {
        let t = trained_on_the_toy_graph(true);
        let params = t.parameters().unwrap();
        assert!(params.iter().all(|(_, p)| p.dtype() == DType::Float16), "every weight float16");
    }

    #[test]
    fn bad_configs_are_named() {
        let e = |cfg: TrainConfig| Trainer::new(toy(), cfg).err().unwrap();
        assert!(e(TrainConfig { hidden: 7, ..TrainConfig::default() }).message().contains("not divisible"));
        assert!(e(TrainConfig { parts: 1000, ..TrainConfig::default() }).message().contains("parts"));
        assert!(e(TrainConfig { groups: 1, ..TrainConfig::default() }).message().contains("smaller than '2'"));
        assert!(e(TrainConfig { epochs: 1_000_000, ..TrainConfig::default() })
            .message()
            .contains("epochs must be from 1 to 5000"));
        assert!(e(TrainConfig { lr: f32::NAN, ..TrainConfig::default() }).message().contains("lr must be above 0"));
        assert!(e(TrainConfig { layers: 1001, hidden: 4096, ..TrainConfig::default() })
            .message()
            .contains("parameters"));
    }

    #[test]
    fn the_activation_peak_is_the_executors_measurement_found_without_running() {
        for no_rev in [false, true] {
            let cfg = TrainConfig { layers: 3, hidden: 8, parts: 2, no_rev, ..TrainConfig::default() };
            let mut t = Trainer::new(toy(), cfg).unwrap();
            let (predicted_train, predicted_eval) = (
                crate::ir::liveness::liveness(t.train_graph()).peak(),
                crate::ir::liveness::liveness(t.eval_graph()).peak(),
            );
            let measured = t.train_epoch().unwrap().peak_bytes;
            assert_eq!(predicted_train, measured, "no_rev {no_rev}");
            t.evaluate().unwrap();
            assert_eq!(predicted_eval, t.eval.last_stats().unwrap().peak_bytes, "no_rev {no_rev}");
        }
    }

    #[test]
    fn the_parameter_count_is_known_before_the_model_is_built() {
        for cfg in [
            TrainConfig { layers: 3, hidden: 8, parts: 2, ..TrainConfig::default() },
            TrainConfig { layers: 2, hidden: 12, groups: 3, parts: 2, ..TrainConfig::default() },
        ] {
            let t = Trainer::new(toy(), cfg.clone()).unwrap();
            assert_eq!(cfg.param_count(4, 2), Some(t.num_params() as u128));
        }
    }

    #[test]
    fn a_loss_that_turns_nan_stops_training_with_the_epoch_and_the_likely_cause() {
        // Features near f32's largest value: the first product overflows, the loss is NaN.
        let mut d = toy();
        d.x.values.iter_mut().for_each(|v| *v = 3e38);
        let cfg = TrainConfig { layers: 2, hidden: 8, parts: 2, lr: 0.5, ..TrainConfig::default() };
        let mut t = Trainer::new(d, cfg).unwrap();
        let e = t.train_epoch().unwrap_err();
        assert!(e.message().starts_with("training diverged: the loss became NaN at epoch 1, part 1 of 2"), "{e}");
        assert!(e.message().contains("learning rate is too high (lr = 0.5; the default is 0.003)"), "{e}");
        // No accuracies from NaN weights, and no more epochs.
        assert_eq!(t.evaluate().unwrap_err(), e);
        assert_eq!(t.train_epoch().unwrap_err(), e);
    }
}
