//! RevGNN traced without data: the one place that traces PyG's RevGNN
//! (`examples/rev_gnn.py`, [`RevGnn`]) for a graph of given sizes. The planner's demo model
//! (`models::DemoNet`, the example's `--model revgnn`) and the JavaScript
//! `demoModel("revgnn", …)` (the page's views) both come here.
//!
//! The graph is one training step of the trainer (`gnn::train`) on a graph of `nodes`
//! nodes: CSR features `x` and mean adjacency `adj`, labels `y` and a training mask as
//! inputs, [`RevGnn::forward`] unchanged, and the masked cross-entropy as the one output
//! (a scalar loss, so it can be planned for training). Its layers can be split evenly over
//! IPUs, one `BeginBlock` per IPU on the first layer there (`poptorch.BeginBlock(
//! model.convs[k], ipu_id=…)`, [`Tracer::begin_block_at`]). Nothing is read or padded: the
//! sizes come from the caller, who knows its dataset.

use super::nn::{RevGnn, RevGnnConfig};
use crate::compile::placement::first_layer_on_ipu;
use crate::ir::Reduction;
use crate::rng::Rng;
use crate::tensor::DType;
use crate::trace::check::ArgError;
use crate::trace::{SparseVar, Trace, Tracer};
use crate::{Error, Result};

/// Largest count accepted for a size, so a typo cannot ask for gigabytes of placeholders.
pub const MAX_COUNT: usize = 1 << 28;
/// Most layers traced here (a 1,000-layer RevGNN is the planner's benchmark).
pub const MAX_LAYERS: usize = 4096;

/// The graph a step runs on: nodes, stored adjacency entries (edges and self-loops) and
/// stored feature entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphSizes {
    pub nodes: usize,
    pub edges: usize,
    pub feature_nnz: usize,
}

/// An argument error about one key of a configuration (its JSON key, when it is about one):
/// the page marks the line that sets it. As a [`crate::Error`] the key is its `option`.
#[derive(Debug)]
pub struct KeyError {
    pub key: Option<&'static str>,
    pub error: ArgError,
}

impl KeyError {
    /// `error` about `key`.
    pub fn on(key: &'static str, error: ArgError) -> KeyError {
        KeyError { key: Some(key), error }
    }
}

impl From<ArgError> for KeyError {
    fn from(error: ArgError) -> KeyError {
        KeyError { key: None, error }
    }
}

impl From<KeyError> for Error {
    fn from(e: KeyError) -> Error {
        let err = Error::from(e.error);
        match e.key {
            Some(k) => err.with_option(k),
            None => err,
        }
    }
}

/// `name` (the JSON key) must be from 1 to [`MAX_COUNT`].
fn check_count(name: &'static str, v: usize) -> std::result::Result<(), KeyError> {
    if v == 0 || v > MAX_COUNT {
        return Err(KeyError::on(name, ArgError::range(format!("{name} must be from 1 to {MAX_COUNT}, got {v}"))));
    }
    Ok(())
}

/// Checks the model's sizes and the graph's before anything is built; the error names the
/// size by its JSON key (`layers`, `hidden`, `inChannels`, `outChannels`, `nodes`, `edges`,
/// `featureNnz`; a range error). Groups, divisibility and dropout are [`RevGnn::new`]'s
/// checks.
pub fn check(cfg: &RevGnnConfig, g: &GraphSizes) -> std::result::Result<(), KeyError> {
    if cfg.num_layers == 0 || cfg.num_layers > MAX_LAYERS {
        return Err(KeyError::on(
            "layers",
            ArgError::range(format!("layers must be from 1 to {MAX_LAYERS}, got {}", cfg.num_layers)),
        ));
    }
    for (name, v) in [
        ("hidden", cfg.hidden),
        ("inChannels", cfg.in_channels),
        ("outChannels", cfg.out_channels),
        ("nodes", g.nodes),
        ("edges", g.edges),
        ("featureNnz", g.feature_nnz),
    ] {
        check_count(name, v)?;
    }
    Ok(())
}

/// Builds the model with parameters drawn from `seed` (after [`check`]).
pub fn build(cfg: RevGnnConfig, g: &GraphSizes, seed: u64) -> Result<RevGnn> {
    check(&cfg, g)?;
    RevGnn::new(cfg, &mut Rng::new(seed))
}

/// Traces one training step of `model` on a graph of sizes `g` (see the module docs), its
/// layers split evenly over `ipus` IPUs ([`first_layer_on_ipu`]; one BeginBlock
/// `ipu<k>` per IPU); `training` traces training behaviour (the shared dropout mask).
pub fn trace(model: &RevGnn, g: &GraphSizes, ipus: usize, training: bool) -> Result<Trace> {
    check(&model.cfg, g)?;
    let layers = model.cfg.num_layers;
    if ipus == 0 || ipus > layers {
        return Err(Error::trace(format!(
            "{ipus} IPUs for {layers} layers: give each IPU at least one layer (1 <= ipus <= layers)"
        )));
    }
    let tr = Tracer::new();
    tr.set_training(training);
    // lin1 and the first layers on IPU 0, then a BeginBlock at each IPU's first layer.
    tr.begin_block_at("lin1", "ipu0", Some(0))?;
    for i in 1..layers {
        if let Some(k) = first_layer_on_ipu(i, layers, ipus) {
            tr.begin_block_at(&format!("convs.{i}"), &format!("ipu{k}"), Some(k))?;
        }
    }
    let x = SparseVar::input(&tr, "x", g.nodes, model.cfg.in_channels, g.feature_nnz)?;
    let adj = SparseVar::input(&tr, "adj", g.nodes, g.nodes, g.edges)?;
    let y = tr.input("y", &[g.nodes], DType::Int32)?;
    let mask = tr.input("train_mask", &[g.nodes], DType::Bool)?;
    let logits = model.forward(&tr, &x, &adj)?;
    let loss = logits.cross_entropy(&y, Some(&mask), Reduction::Mean, None)?;
    tr.finish(&[&loss])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Op;

    fn cora(layers: usize) -> (RevGnnConfig, GraphSizes) {
        let cfg = RevGnnConfig {
            in_channels: 1433,
            hidden: 16,
            out_channels: 7,
            num_layers: layers,
            num_groups: 2,
            dropout: 0.5,
            disable_rev: false,
        };
        (cfg, GraphSizes { nodes: 2708, edges: 10556 + 2708, feature_nnz: 49216 })
    }

    #[test]
    fn one_region_per_layer_the_logits_shape_and_a_scalar_loss() {
        let (cfg, g) = cora(3);
        let m = build(cfg, &g, 0).unwrap();
        let t = trace(&m, &g, 1, false).unwrap();
        let calls = t.graph.nodes.iter().filter(|n| matches!(n.op, Op::Call { .. })).count();
        assert_eq!(calls, 3);
        let ce = t.graph.nodes.iter().find(|n| n.op.name() == "cross_entropy").unwrap();
        assert_eq!(t.graph.ty(ce.inputs[0]).shape, vec![2708, 7], "the logits");
        assert!(t.graph.ty(t.graph.outputs[0]).shape.is_empty(), "the loss is a scalar");
        assert!(t.graph.nodes.iter().any(|n| n.meta.scope.starts_with("convs.2")));
        assert_eq!(t.params.len(), 6 + 3 * 2 * 5);
        let blocks: std::collections::BTreeSet<_> = t.graph.nodes.iter().filter_map(|n| n.meta.block.clone()).collect();
        assert_eq!(blocks.into_iter().collect::<Vec<_>>(), ["ipu0"], "one IPU: one block");
    }

    #[test]
    fn layers_split_over_ipus_with_a_begin_block_on_each_ipus_first_layer() {
        let (cfg, g) = cora(4);
        let m = build(cfg, &g, 0).unwrap();
        let t = trace(&m, &g, 2, true).unwrap();
        let block_of = |scope: &str| {
            let op = |n: &&crate::ir::Node| !matches!(n.op, Op::Placeholder { .. });
            let n = t.graph.nodes.iter().filter(op).find(|n| n.meta.scope.starts_with(scope)).unwrap();
            (n.meta.block.clone().unwrap(), n.meta.ipu.unwrap(), n.meta.block_kind.unwrap())
        };
        let begin = crate::ir::BlockKind::Begin;
        assert_eq!(block_of("lin1"), ("ipu0".to_string(), 0, begin));
        assert_eq!(block_of("convs.1"), ("ipu0".to_string(), 0, begin));
        assert_eq!(block_of("convs.2"), ("ipu1".to_string(), 1, begin));
        // Later ops inherit the last BeginBlock, the loss included.
        assert_eq!(block_of("lin2"), ("ipu1".to_string(), 1, begin));
        let ce = t.graph.nodes.iter().find(|n| n.op.name() == "cross_entropy").unwrap();
        assert_eq!(ce.meta.block.as_deref(), Some("ipu1"));
        assert!(t.graph.nodes.iter().any(|n| n.op.name() == "random_mask"), "training: the dropout mask");
    }

    #[test]
    fn bad_sizes_are_named() {
        let (cfg, g) = cora(1);
        let e = build(RevGnnConfig { num_layers: 0, ..cfg.clone() }, &g, 0).err().unwrap().to_string();
        assert!(e.contains("layers"), "{e}");
        let e = build(cfg.clone(), &GraphSizes { nodes: 0, ..g }, 0).err().unwrap().to_string();
        assert!(e.contains("nodes"), "{e}");
        let e = build(RevGnnConfig { in_channels: MAX_COUNT + 1, ..cfg.clone() }, &g, 0).err().unwrap().to_string();
        assert!(e.contains("inChannels"), "{e}");
        let e = build(RevGnnConfig { hidden: 15, ..cfg.clone() }, &g, 0).err().unwrap().to_string();
        assert!(e.contains("not divisible"), "{e}");
        let m = build(cfg, &g, 0).unwrap();
        let e = trace(&m, &g, 2, false).err().unwrap().to_string();
        assert!(e.contains("1 <= ipus <= layers"), "{e}");
    }
}
