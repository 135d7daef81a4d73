//! Parameter names as PyTorch Geometric has them, so trained weights load into PyG's model.
//!
//! The reference is the `RevGNN` of PyG's `examples/rev_gnn.py` (and the project's
//! `shared/bench/pyg_revgnn.py`): `lin1`, `lin2`, `norm` (torch `Linear` / `LayerNorm`),
//! then `convs`, a `ModuleList` of `GroupAddRev`, each holding its groups in its own
//! `ModuleList` named `convs`, each group a `GNNBlock` of `norm` (LayerNorm) and `conv`
//! (SAGEConv: `lin_l` with bias, `lin_r` without). Its `state_dict()` therefore reads
//!
//! ```text
//! lin1.weight  lin1.bias  lin2.weight  lin2.bias  norm.weight  norm.bias
//! convs.{i}.convs.{g}.norm.weight  convs.{i}.convs.{g}.norm.bias
//! convs.{i}.convs.{g}.conv.lin_l.weight  convs.{i}.convs.{g}.conv.lin_l.bias
//! convs.{i}.convs.{g}.conv.lin_r.weight
//! ```
//!
//! Ours are the same names ([`super::nn::GroupAddRev`] names its groups `convs.{g}`, as PyG
//! does). Weights are `[out, in]` in both, so tensors carry over unchanged.

use super::nn::RevGnnConfig;
use super::train::Trainer;
use crate::tensor::{safetensors, Tensor};
use crate::Error;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Tensor names of one GNNBlock, in PyG's registration order.
const BLOCK: [&str; 5] = ["norm.weight", "norm.bias", "conv.lin_l.weight", "conv.lin_l.bias", "conv.lin_r.weight"];

/// PyG's `state_dict()` keys of a RevGNN with this configuration, in PyG's order.
pub fn rev_gnn_keys(cfg: &RevGnnConfig) -> Vec<String> {
    let mut keys: Vec<String> =
        ["lin1.weight", "lin1.bias", "lin2.weight", "lin2.bias", "norm.weight", "norm.bias"].map(String::from).into();
    for i in 0..cfg.num_layers {
        for g in 0..cfg.num_groups {
            keys.extend(BLOCK.iter().map(|t| format!("convs.{i}.convs.{g}.{t}")));
        }
    }
    keys
}

/// The shape PyG gives the tensor `key` (`[out, in]` weights).
fn pyg_shape(cfg: &RevGnnConfig, key: &str) -> Vec<usize> {
    let (h, w) = (cfg.hidden, cfg.hidden / cfg.num_groups.max(1));
    match key {
        "lin1.weight" => vec![h, cfg.in_channels],
        "lin1.bias" | "norm.weight" | "norm.bias" => vec![h],
        "lin2.weight" => vec![cfg.out_channels, h],
        "lin2.bias" => vec![cfg.out_channels],
        k if k.ends_with(".weight") && (k.contains("lin_l") || k.contains("lin_r")) => vec![w, w],
        _ => vec![w],
    }
}

/// The trained parameters under PyG's names, in PyG's `state_dict` order. Every PyG key
/// must be found with PyG's shape, and every parameter must be used: the error names the
/// first that is not.
pub fn rev_gnn_state_dict<'a>(
    cfg: &RevGnnConfig,
    params: &'a HashMap<String, Rc<Tensor>>,
) -> crate::Result<Vec<(String, &'a Tensor)>> {
    let keys = rev_gnn_keys(cfg);
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let t = params
            .get(&key)
            .ok_or_else(|| Error::train(format!("PyG's parameter \"{key}\" has no counterpart in the model")))?;
        let want = pyg_shape(cfg, &key);
        if t.shape() != want.as_slice() {
            return Err(Error::train(format!(
                "parameter \"{key}\" has shape {:?}, but PyG gives it {want:?}",
                t.shape()
            )));
        }
        out.push((key, t.as_ref()));
    }
    if out.len() != params.len() {
        let used: std::collections::HashSet<String> = out.iter().map(|(k, _)| k.clone()).collect();
        let mut extra: Vec<&String> = params.keys().filter(|k| !used.contains(*k)).collect();
        extra.sort();
        return Err(Error::train(format!("parameter \"{}\" has no name in PyG's RevGNN", extra[0])));
    }
    Ok(out)
}

/// A trainer's current weights as a safetensors file with PyG's names, loadable into PyG's
/// `RevGNN` with `model.load_state_dict(safetensors.torch.load_file(path))`. The metadata
/// records the model's configuration, the dataset and the epochs trained.
pub fn rev_gnn_safetensors(t: &Trainer) -> crate::Result<Vec<u8>> {
    let cfg = &t.model.cfg;
    let params: HashMap<String, Rc<Tensor>> = t.parameters()?.into_iter().collect();
    let tensors = rev_gnn_state_dict(cfg, &params)?;
    let c = &t.cfg;
    let meta: BTreeMap<String, String> = [
        ("format", "pt".to_string()),
        ("model", "RevGNN of PyG examples/rev_gnn.py".into()),
        ("dataset", t.data.name.clone()),
        ("epochs_trained", t.epoch().to_string()),
        ("in_channels", cfg.in_channels.to_string()),
        ("hidden_channels", cfg.hidden.to_string()),
        ("out_channels", cfg.out_channels.to_string()),
        ("num_layers", cfg.num_layers.to_string()),
        ("num_groups", cfg.num_groups.to_string()),
        ("dropout", cfg.dropout.to_string()),
        ("lr", c.lr.to_string()),
        ("optimizer", format!("{:?}", c.optimizer).to_lowercase()),
        ("seed", c.seed.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    safetensors::write(&tensors, &meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gnn::nn::RevGnn;
    use crate::rng::Rng;
    use crate::trace::nn::Module;

    fn cfg() -> RevGnnConfig {
        RevGnnConfig {
            in_channels: 12,
            hidden: 8,
            out_channels: 3,
            num_layers: 2,
            num_groups: 2,
            dropout: 0.5,
            disable_rev: false,
        }
    }

    #[test]
    fn keys_are_pygs_state_dict() {
        // Written out from PyG's module structure (see the module docs), for 2 layers × 2 groups.
        let mut want = vec!["lin1.weight", "lin1.bias", "lin2.weight", "lin2.bias", "norm.weight", "norm.bias"]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        for p in ["convs.0.convs.0", "convs.0.convs.1", "convs.1.convs.0", "convs.1.convs.1"] {
            for t in ["norm.weight", "norm.bias", "conv.lin_l.weight", "conv.lin_l.bias", "conv.lin_r.weight"] {
                want.push(format!("{p}.{t}"));
            }
        }
        assert_eq!(rev_gnn_keys(&cfg()), want);
    }

    #[test]
    fn every_parameter_of_our_model_maps_with_pygs_shape() {
        let model = RevGnn::new(cfg(), &mut Rng::new(0)).unwrap();
        let params: HashMap<String, Rc<Tensor>> =
            model.named_parameters().into_iter().map(|(n, p)| (n, p.value().unwrap())).collect();
        let sd = rev_gnn_state_dict(&cfg(), &params).unwrap();
        assert_eq!(sd.len(), params.len());
        let get = |k: &str| sd.iter().find(|(n, _)| n == k).unwrap().1;
        assert_eq!(get("lin1.weight").shape(), &[8, 12]);
        assert_eq!(get("lin2.weight").shape(), &[3, 8]);
        assert_eq!(get("convs.1.convs.0.conv.lin_l.weight").shape(), &[4, 4]);
        assert_eq!(get("convs.1.convs.1.conv.lin_l.bias").shape(), &[4]);
        // The same tensor object, not a copy.
        assert!(std::ptr::eq(get("convs.0.convs.1.norm.weight"), params["convs.0.convs.1.norm.weight"].as_ref()));
    }

    #[test]
    fn the_traced_parameter_names_map_too() {
        // The trainer's store is keyed by the names the tracer records, not named_parameters.
        use crate::trace::{SparseVar, Tracer};
        let model = RevGnn::new(cfg(), &mut Rng::new(0)).unwrap();
        let tr = Tracer::new();
        tr.set_training(true);
        let x = SparseVar::input(&tr, "x", 5, 12, 10).unwrap();
        let adj = SparseVar::input(&tr, "adj", 5, 5, 10).unwrap();
        let out = model.forward(&tr, &x, &adj).unwrap();
        let t = tr.finish(&[&out]).unwrap();
        let params: HashMap<String, Rc<Tensor>> = t.params.into_iter().map(|(n, p)| (n, p.value().unwrap())).collect();
        assert_eq!(rev_gnn_state_dict(&cfg(), &params).unwrap().len(), 6 + 2 * 2 * 5);
    }

    #[test]
    fn a_trainers_weights_as_safetensors() {
        use crate::gnn::data::GraphData;
        use crate::gnn::train::TrainConfig;
        use crate::tensor::CsrMatrix;
        let n = 12;
        let data = GraphData {
            name: "tiny".into(),
            num_nodes: n,
            num_features: 12,
            num_classes: 3,
            x: CsrMatrix::from_triplets(
                n,
                12,
                &(0..n as u32).collect::<Vec<_>>(),
                &(0..n as u32).collect::<Vec<_>>(),
                &vec![1.0; n],
            ),
            y: (0..n).map(|i| (i % 3) as i32).collect(),
            edge_src: (0..n as u32).collect(),
            edge_dst: (0..n as u32).map(|i| (i + 1) % n as u32).collect(),
            train_mask: (0..n).map(|i| i < 6).collect(),
            val_mask: (0..n).map(|i| (6..9).contains(&i)).collect(),
            test_mask: (0..n).map(|i| i >= 9).collect(),
        };
        let tc = TrainConfig { epochs: 1, layers: 2, hidden: 8, parts: 1, ..TrainConfig::default() };
        let mut t = Trainer::new(data, tc).unwrap();
        t.train_epoch().unwrap();
        let bytes = rev_gnn_safetensors(&t).unwrap();
        let hn = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + hn]).unwrap();
        let meta = &header["__metadata__"];
        assert_eq!(meta["dataset"], "tiny");
        assert_eq!(meta["epochs_trained"], "1");
        assert_eq!(meta["num_layers"], "2");
        let mut names: Vec<&String> = header.as_object().unwrap().keys().filter(|k| *k != "__metadata__").collect();
        names.sort();
        let mut want = rev_gnn_keys(&t.model.cfg);
        want.sort();
        assert_eq!(names, want.iter().collect::<Vec<_>>());
        // The bytes are the trained values (they moved from the initial ones).
        let w = &header["lin2.bias"];
        let [lo, hi] =
            [w["data_offsets"][0].as_u64().unwrap() as usize, w["data_offsets"][1].as_u64().unwrap() as usize];
        let got: Vec<f32> =
            bytes[8 + hn + lo..8 + hn + hi].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        let trained: HashMap<String, Rc<Tensor>> = t.parameters().unwrap().into_iter().collect();
        assert_eq!(got, trained["lin2.bias"].to_f32_vec());
        let init = t.model.lin2.bias.as_ref().unwrap().value().unwrap().to_f32_vec();
        assert_ne!(got, init, "the trained values, not the initial ones");
    }

    #[test]
    fn a_missing_or_extra_parameter_is_named() {
        let model = RevGnn::new(cfg(), &mut Rng::new(0)).unwrap();
        let mut params: HashMap<String, Rc<Tensor>> =
            model.named_parameters().into_iter().map(|(n, p)| (n, p.value().unwrap())).collect();
        let w = params.remove("convs.1.convs.0.conv.lin_r.weight").unwrap();
        let e = rev_gnn_state_dict(&cfg(), &params).unwrap_err().to_string();
        assert!(e.contains("\"convs.1.convs.0.conv.lin_r.weight\""), "{e}");
        params.insert("convs.1.convs.0.conv.lin_r.weight".into(), w);
        params.insert("extra.weight".into(), Rc::new(Tensor::scalar(0.0)));
        let e = rev_gnn_state_dict(&cfg(), &params).unwrap_err().to_string();
        assert!(e.contains("\"extra.weight\""), "{e}");
        params.remove("extra.weight");
        params.insert("lin2.bias".into(), Rc::new(Tensor::zeros(&[4], crate::tensor::DType::Float32)));
        let e = rev_gnn_state_dict(&cfg(), &params).unwrap_err().to_string();
        assert!(e.contains("shape [4]") && e.contains("[3]"), "{e}");
    }
}
