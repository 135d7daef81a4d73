//! Training RevGNN on a Planetoid graph, the protocol of PyG's `examples/rev_gnn.py`:
//! RandomNodeLoader parts (shuffled each epoch), loss on the training nodes of each part,
//! Adam, evaluation on the whole graph.
//!
//! Like a compiled PopTorch model, the training step is traced and differentiated once, for
//! fixed sizes: every part is padded to the same node, edge and feature-entry counts
//! (padding is masked out of the loss), so one graph serves every step. Evaluation is a
//! second, inference-mode trace of the same model over the whole graph, reading the same
//! parameters from the executor's store. No clock is read here (wasm has none): callers
//! time epochs themselves.

use super::config::MAX_ACTIVATION_BYTES;
pub use super::config::{OptimizerKind, TrainConfig};
use super::data::{mean_adjacency, GraphData, PaddedLoader, Part, RandomNodeLoader};
use super::nn::{RevGnn, RevGnnConfig};
use crate::autograd::{training_graph, TrainOptions};
use crate::exec::{run, Store};
use crate::ir::{Graph, OptimizerStep, Reduction};
use crate::rng::Rng;
use crate::tensor::{CsrMatrix, DType, Tensor};
use crate::trace::{SparseVar, Tracer};
use std::rc::Rc;

/// One epoch's results.
#[derive(Clone, Debug, Default)]
pub struct EpochStats {
    /// Mean training loss, weighted by training nodes per part (as the PyG example).
    pub loss: f64,
    pub steps: usize,
    /// Largest bytes the forward pass kept for the backward pass, over the steps.
    pub saved_for_backward: usize,
    /// Largest peak of live activation bytes during a step.
    pub peak_bytes: usize,
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

/// A RevGNN, its compiled training and evaluation graphs, and the executor state.
pub struct Trainer {
    pub cfg: TrainConfig,
    pub data: GraphData,
    pub model: RevGnn,
    pub store: Store,
    pub train_graph: Graph,
    pub eval_graph: Graph,
    /// The parts, shuffled each epoch and padded to one size.
    pub loader: PaddedLoader,
    eval_inputs: Vec<Rc<Tensor>>,
    epoch: usize,
    /// Set when the loss or the parameters stopped being finite: every later call fails
    /// with this message instead of training on, or reporting accuracies of, NaN weights.
    diverged: Option<String>,
}

fn csr_inputs(m: &CsrMatrix, nnz: usize) -> Result<[Rc<Tensor>; 3], String> {
    Ok(m.to_tensors(nnz)?.map(Rc::new))
}

/// Fails when running `g` would keep more than [`MAX_ACTIVATION_BYTES`] of activations at
/// once (a deep model without reversible layers keeps every layer's for the backward pass).
fn check_activations(cfg: &TrainConfig, what: &str, g: &Graph) -> Result<(), String> {
    let peak = crate::ir::liveness::liveness(g).peak() as u128;
    if peak > MAX_ACTIVATION_BYTES as u128 {
        let hint = if cfg.no_rev { "reversible layers (noRev: false), " } else { "" };
        return Err(format!(
            "{what} of this RevGNN ({} layers, hidden {}) would keep {peak} bytes of activations at once, more \
             than the limit of {MAX_ACTIVATION_BYTES}: use {hint}fewer layers, a smaller hidden size or more parts",
            cfg.layers, cfg.hidden
        ));
    }
    Ok(())
}

impl Trainer {
    /// Builds the model and traces, differentiates and checks both graphs.
    /// The config is checked first ([`TrainConfig::check`], [`TrainConfig::check_model_size`]),
    /// so that no size or count is used before it is known to be in range.
    pub fn new(data: GraphData, cfg: TrainConfig) -> Result<Trainer, String> {
        cfg.check(data.num_nodes).map_err(|e| e.message)?;
        cfg.check_model_size(data.num_features, data.num_classes).map_err(|e| e.message)?;
        let mut rng = Rng::new(cfg.seed);
        let model = RevGnn::new(
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
        )
        .map_err(|e| e.0)?;
        let parts = RandomNodeLoader::new(cfg.parts, true, cfg.seed.wrapping_add(1)).map_err(|e| e.0)?;
        let loader = PaddedLoader::new(&data, parts, Some(cfg.epochs)).map_err(|e| e.0)?;
        let (sizes, x_nnz) = (loader.sizes, loader.x_capacity);

        // Training step: loss on the training nodes of one padded part.
        let tr = Tracer::new();
        tr.set_training(true);
        let n = sizes.max_nodes;
        let x = SparseVar::input(&tr, "x", n, data.num_features, x_nnz).map_err(|e| e.0)?;
        let adj = SparseVar::input(&tr, "adj", n, n, sizes.max_edges).map_err(|e| e.0)?;
        let y = tr.input("y", &[n], DType::Int32).map_err(|e| e.0)?;
        let mask = tr.input("train_mask", &[n], DType::Bool).map_err(|e| e.0)?;
        let logits = model.forward(&tr, &x, &adj).map_err(|e| e.0)?;
        let loss = logits.cross_entropy(&y, Some(&mask), Reduction::Mean, None).map_err(|e| e.0)?;
        let trace = tr.finish(&[&loss]).map_err(|e| e.0)?;
        let step = match cfg.optimizer {
            OptimizerKind::Adam | OptimizerKind::AdamW => {
                OptimizerStep::adam(cfg.lr, 0.9, 0.999, 1e-8, cfg.weight_decay, cfg.optimizer == OptimizerKind::AdamW)
            }
            OptimizerKind::Sgd => OptimizerStep::sgd(cfg.lr, 0.0, cfg.weight_decay),
        };
        let tg = training_graph(&trace.graph, 0, &TrainOptions { optimizer: Some(step), ..Default::default() })
            .map_err(|e| e.0)?;
        // Updates right after their gradient's last use, as PopART schedules them.
        let program = crate::compile::schedule::updates_early(&tg.graph).map_err(|e| e.0)?;
        crate::ir::verify::verify(&program).map_err(|e| e.0)?;
        let train_graph = crate::exec::fuse::fuse(&program).map_err(|e| e.0)?;
        check_activations(&cfg, "a training step", &train_graph)?;
        let store = Store::new(&trace.params, &trace.buffers, cfg.seed.wrapping_add(2));

        // Evaluation: the whole graph, inference mode (no dropout).
        let et = Tracer::new();
        let nn_ = data.num_nodes;
        let x = SparseVar::input(&et, "x", nn_, data.num_features, data.x.nnz()).map_err(|e| e.0)?;
        let full_adj = mean_adjacency(nn_, &data.edge_src, &data.edge_dst);
        let adj = SparseVar::input(&et, "adj", nn_, nn_, full_adj.nnz()).map_err(|e| e.0)?;
        let pred = model.forward(&et, &x, &adj).and_then(|l| l.argmax(-1, false)).map_err(|e| e.0)?;
        let eval_trace = et.finish(&[&pred]).map_err(|e| e.0)?;
        let eval_graph = crate::exec::fuse::fuse(&eval_trace.graph).map_err(|e| e.0)?;
        check_activations(&cfg, "the evaluation", &eval_graph)?;
        let mut eval_inputs = Vec::new();
        eval_inputs.extend(csr_inputs(&data.x, data.x.nnz())?);
        eval_inputs.extend(csr_inputs(&full_adj, full_adj.nnz())?);

        Ok(Trainer { cfg, data, model, store, train_graph, eval_graph, loader, eval_inputs, epoch: 0, diverged: None })
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

    /// The inputs of the training graph for one padded part.
    fn batch_inputs(part: Part) -> Result<Vec<Rc<Tensor>>, String> {
        let n = part.sub.num_nodes;
        let mut inputs = Vec::new();
        inputs.extend(part.x().tensors()?.map(Rc::new));
        inputs.extend(part.mean_adjacency().tensors()?.map(Rc::new));
        inputs.push(Rc::new(Tensor::from_i32(&[n], part.sub.y)?));
        inputs.push(Rc::new(Tensor::from_bool(&[n], part.sub.train_mask)?));
        Ok(inputs)
    }

    /// Epochs run so far.
    pub fn epoch(&self) -> usize {
        self.epoch
    }

    /// One epoch: a training step on each part.
    pub fn train_epoch(&mut self) -> Result<EpochStats, String> {
        if let Some(msg) = &self.diverged {
            return Err(msg.clone());
        }
        if self.epoch >= self.cfg.epochs {
            return Err(format!("the graphs were compiled for {} epochs, all of which have run", self.cfg.epochs));
        }
        let subs = self.loader.next_epoch(&self.data).map_err(|e| e.0)?;
        let mut stats = EpochStats::default();
        let (mut tot, mut count) = (0.0f64, 0usize);
        let parts = subs.len();
        for (i, part) in subs.into_iter().enumerate() {
            let n_train = part.num_train();
            if n_train == 0 {
                continue; // no training node in this part: PyG's loss would be NaN
            }
            let inputs = Self::batch_inputs(part)?;
            let r = run(&self.train_graph, &mut self.store, &inputs).map_err(|e| e.0)?;
            let loss = r.outputs[0].to_f64_vec()[0];
            if !loss.is_finite() {
                let what = format!("the loss became {loss} at epoch {}, part {} of {parts}", self.epoch + 1, i + 1);
                let msg = self.divergence(&what);
                self.diverged = Some(msg.clone());
                return Err(msg);
            }
            tot += loss * n_train as f64;
            count += n_train;
            stats.steps += 1;
            stats.saved_for_backward = stats.saved_for_backward.max(r.stats.saved_for_backward);
            stats.peak_bytes = stats.peak_bytes.max(r.stats.peak_bytes);
            crate::exec::merge_op_times(&mut stats.op_time, &r.stats.op_time);
        }
        stats.loss = tot / count.max(1) as f64;
        self.epoch += 1;
        Ok(stats)
    }

    /// Predictions on the whole graph, and accuracy on each split.
    /// Fails (and stays failed) once training has diverged: NaN weights have no accuracy.
    pub fn evaluate(&mut self) -> Result<Accuracy, String> {
        if let Some(msg) = &self.diverged {
            return Err(msg.clone());
        }
        let finite = |t: &Tensor| t.as_f32().map(|a| a.iter().all(|x| x.is_finite())).unwrap_or(true);
        if let Some(name) = self.store.params.iter().find(|(_, t)| !finite(t)).map(|(n, _)| n.clone()) {
            let what = format!("parameter '{name}' is no longer finite after epoch {}", self.epoch);
            let msg = self.divergence(&what);
            self.diverged = Some(msg.clone());
            return Err(msg);
        }
        let r = run(&self.eval_graph, &mut self.store, &self.eval_inputs).map_err(|e| e.0)?;
        let pred = r.outputs[0].to_f64_vec();
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
        self.store.params.values().map(|t| t.numel()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gnn::data::add_self_loops;

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

    #[test]
    fn revgnn_learns_a_toy_graph() {
        let cfg = TrainConfig { epochs: 30, layers: 3, hidden: 8, parts: 2, lr: 0.01, ..TrainConfig::default() };
        let mut t = Trainer::new(toy(), cfg).unwrap();
        let first = t.train_epoch().unwrap().loss;
        let mut last = first;
        for _ in 1..30 {
            last = t.train_epoch().unwrap().loss;
        }
        assert!(last < first * 0.7, "loss {first} -> {last}");
        let acc = t.evaluate().unwrap();
        assert!(acc.test >= 0.8, "{acc:?}");
        assert!(t.train_epoch().unwrap_err().contains("30 epochs"));
    }

    #[test]
    fn bad_configs_are_named() {
        let e = |cfg: TrainConfig| Trainer::new(toy(), cfg).err().unwrap();
        assert!(e(TrainConfig { hidden: 7, ..TrainConfig::default() }).contains("not divisible"));
        assert!(e(TrainConfig { parts: 1000, ..TrainConfig::default() }).contains("parts"));
        assert!(e(TrainConfig { groups: 1, ..TrainConfig::default() }).contains("smaller than '2'"));
        assert!(
            e(TrainConfig { epochs: 1_000_000, ..TrainConfig::default() }).contains("epochs must be from 1 to 5000")
        );
        assert!(e(TrainConfig { lr: f32::NAN, ..TrainConfig::default() }).contains("lr must be above 0"));
        assert!(e(TrainConfig { layers: 1001, hidden: 4096, ..TrainConfig::default() }).contains("parameters"));
    }

    #[test]
    fn the_activation_peak_is_the_executors_measurement_found_without_running() {
        for no_rev in [false, true] {
            let cfg = TrainConfig { layers: 3, hidden: 8, parts: 2, no_rev, ..TrainConfig::default() };
            let mut t = Trainer::new(toy(), cfg).unwrap();
            let (predicted_train, predicted_eval) = (
                crate::ir::liveness::liveness(&t.train_graph).peak(),
                crate::ir::liveness::liveness(&t.eval_graph).peak(),
            );
            let measured = t.train_epoch().unwrap().peak_bytes;
            assert_eq!(predicted_train, measured, "no_rev {no_rev}");
            let r = run(&t.eval_graph, &mut t.store, &t.eval_inputs).unwrap();
            assert_eq!(predicted_eval, r.stats.peak_bytes, "no_rev {no_rev}");
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
        assert!(e.starts_with("training diverged: the loss became NaN at epoch 1, part 1 of 2"), "{e}");
        assert!(e.contains("learning rate is too high (lr = 0.5; the default is 0.003)"), "{e}");
        // No accuracies from NaN weights, and no more epochs.
        assert_eq!(t.evaluate().unwrap_err(), e);
        assert_eq!(t.train_epoch().unwrap_err(), e);
    }
}
