//! RevGNN traced without data, for the page's graph and assignment views: the forward
//! pass over a graph of given sizes (the whole-graph pass `Trainer::evaluate` runs, or a
//! training-mode trace with the shared dropout mask). The sizes come from the caller, who
//! knows its dataset; nothing is read or padded here.

use super::nn::{RevGnn, RevGnnConfig};
use crate::rng::Rng;
use crate::trace::{SparseVar, Trace, Tracer};
use serde::Deserialize;

/// The model's hyper-parameters and the graph's sizes (JSON keys in camelCase).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RevGnnPreview {
    pub layers: usize,
    pub hidden: usize,
    pub groups: usize,
    #[serde(default = "half")]
    pub dropout: f32,
    /// Node features and classes.
    pub in_channels: usize,
    pub out_channels: usize,
    /// Nodes, stored adjacency entries (edges and self-loops) and stored feature entries.
    pub nodes: usize,
    pub edges: usize,
    pub feature_nnz: usize,
    #[serde(default)]
    pub training: bool,
    #[serde(default)]
    pub seed: u64,
}

fn half() -> f32 {
    0.5
}

/// Largest sizes accepted, so a typo cannot ask for gigabytes of placeholders.
const MAX_LAYERS: usize = 1024;
const MAX_COUNT: usize = 1 << 28;

/// Traces the model; errors name the size that is out of range.
pub fn trace_rev_gnn(p: &RevGnnPreview) -> Result<Trace, String> {
    if p.layers == 0 || p.layers > MAX_LAYERS {
        return Err(format!("layers must be from 1 to {MAX_LAYERS}, got {}", p.layers));
    }
    for (name, v) in [
        ("hidden", p.hidden),
        ("inChannels", p.in_channels),
        ("outChannels", p.out_channels),
        ("nodes", p.nodes),
        ("edges", p.edges),
        ("featureNnz", p.feature_nnz),
    ] {
        if v == 0 || v > MAX_COUNT {
            return Err(format!("{name} must be from 1 to {MAX_COUNT}, got {v}"));
        }
    }
    let cfg = RevGnnConfig {
        in_channels: p.in_channels,
        hidden: p.hidden,
        out_channels: p.out_channels,
        num_layers: p.layers,
        num_groups: p.groups,
        dropout: p.dropout,
        disable_rev: false,
    };
    let model = RevGnn::new(cfg, &mut Rng::new(p.seed)).map_err(|e| e.0)?;
    let tr = Tracer::new();
    tr.set_training(p.training);
    let x = SparseVar::input(&tr, "x", p.nodes, p.in_channels, p.feature_nnz).map_err(|e| e.0)?;
    let adj = SparseVar::input(&tr, "adj", p.nodes, p.nodes, p.edges).map_err(|e| e.0)?;
    let logits = model.forward(&tr, &x, &adj).map_err(|e| e.0)?;
    tr.finish(&[&logits]).map_err(|e| e.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Op;

    fn cora(layers: usize) -> RevGnnPreview {
        RevGnnPreview {
            layers,
            hidden: 16,
            groups: 2,
            dropout: 0.5,
            in_channels: 1433,
            out_channels: 7,
            nodes: 2708,
            edges: 10556 + 2708,
            feature_nnz: 49216,
            training: false,
            seed: 0,
        }
    }

    #[test]
    fn one_region_per_layer_and_the_logits_shape() {
        let t = trace_rev_gnn(&cora(3)).unwrap();
        let calls = t.graph.nodes.iter().filter(|n| matches!(n.op, Op::Call { .. })).count();
        assert_eq!(calls, 3);
        let out = t.graph.outputs[0];
        assert_eq!(t.graph.ty(out).shape, vec![2708, 7]);
        assert!(t.graph.nodes.iter().any(|n| n.meta.scope.starts_with("convs.2")));
        assert_eq!(t.params.len(), 6 + 3 * 2 * 5);
    }

    #[test]
    fn bad_sizes_are_named() {
        let e = trace_rev_gnn(&RevGnnPreview { layers: 0, ..cora(1) }).unwrap_err();
        assert!(e.contains("layers"), "{e}");
        let e = trace_rev_gnn(&RevGnnPreview { nodes: 0, ..cora(1) }).unwrap_err();
        assert!(e.contains("nodes"), "{e}");
        let e = trace_rev_gnn(&RevGnnPreview { hidden: 15, ..cora(1) }).unwrap_err();
        assert!(e.contains("not divisible"), "{e}");
        let bad: Result<RevGnnPreview, _> = serde_json::from_str(r#"{"layers":1,"hiden":4}"#);
        assert!(bad.unwrap_err().to_string().contains("hiden"));
    }
}
