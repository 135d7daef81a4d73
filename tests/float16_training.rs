//! A float16 RevGNN trained a few steps (Adam) on the plain executor: every loss, every
//! output logit and every updated weight must match, bit for bit, the values recorded from
//! the executor as it was when float16 tensors were stored as `half::f16` arrays (each op
//! widened its operands into new float32 arrays and rounded its results into new float16
//! arrays). The working storage of a float16 tensor may change; its values may not.
//!
//! The golden file was made by this test itself, run once on that implementation with
//! `RECORD_FLOAT16_GOLDEN=1 cargo test --test float16_training` (commit "golden data for
//! float16 training" on branch `half`); it holds each value's float16 bits as hex.

use half::f16;
use ipu_playground::autograd::{training_graph, TrainOptions};
use ipu_playground::exec::{run, Store};
use ipu_playground::gnn::nn::{RevGnn, RevGnnConfig};
use ipu_playground::ir::{OptimizerStep, Reduction};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::{DType, Tensor};
use ipu_playground::trace::nn::Module;
use ipu_playground::trace::{SparseVar, Tracer};
use std::collections::BTreeMap;
use std::rc::Rc;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/float16_training/revgnn_adam.json");

const NODES: usize = 12;
const FEATURES: usize = 10;
const CLASSES: usize = 3;

/// A random sparse matrix `rows × cols` in CSR form with about `per_row` entries a row.
fn csr(rows: usize, cols: usize, per_row: usize, rng: &mut Rng, mean: bool) -> [Rc<Tensor>; 3] {
    let (mut indptr, mut indices, mut values) = (vec![0i32], vec![], vec![]);
    for _ in 0..rows {
        let mut cs: Vec<i32> =
            (0..per_row).map(|_| (rng.uniform_range(0.0, cols as f32) as usize % cols) as i32).collect();
        cs.sort();
        cs.dedup();
        for &c in &cs {
            indices.push(c);
            values.push(if mean { 1.0 / cs.len() as f32 } else { rng.uniform_range(-1.0, 1.0) });
        }
        indptr.push(indices.len() as i32);
    }
    let nnz = indices.len();
    [
        Rc::new(Tensor::from_i32(&[rows + 1], indptr).unwrap()),
        Rc::new(Tensor::from_i32(&[nnz], indices).unwrap()),
        Rc::new(Tensor::from_f32(&[nnz], values).unwrap()),
    ]
}

/// Each value's float16 bits, as hex.
fn bits(t: &Tensor) -> Vec<String> {
    assert_eq!(t.dtype(), DType::Float16, "a float16 value");
    t.to_f32_vec().iter().map(|&v| format!("{:04x}", f16::from_f32(v).to_bits())).collect()
}

/// Trains the float16 RevGNN `steps` steps; returns each step's outputs and the weights after
/// the last one, by name.
fn train(steps: usize) -> BTreeMap<String, Vec<String>> {
    let mut rng = Rng::new(7);
    let cfg = RevGnnConfig {
        in_channels: FEATURES,
        hidden: 8,
        out_channels: CLASSES,
        num_layers: 2,
        num_groups: 2,
        dropout: 0.25,
        disable_rev: false,
    };
    let mut model = RevGnn::new(cfg, &mut rng).unwrap();
    model.for_each_parameter_mut(&mut |_, p| *p = p.cast(DType::Float16));
    let x = csr(NODES, FEATURES, 4, &mut rng, false);
    let adj = csr(NODES, NODES, 3, &mut rng, true);
    let y: Vec<i32> = (0..NODES).map(|i| ((i * 5 + 1) % CLASSES) as i32).collect();
    let mask: Vec<bool> = (0..NODES).map(|i| i % 4 != 3).collect();

    let tr = Tracer::new();
    tr.set_training(true);
    let xs = SparseVar::input(&tr, "x", NODES, FEATURES, x[1].numel()).unwrap();
    let adjs = SparseVar::input(&tr, "adj", NODES, NODES, adj[1].numel()).unwrap();
    let yv = tr.input("y", &[NODES], DType::Int32).unwrap();
    let mv = tr.input("train_mask", &[NODES], DType::Bool).unwrap();
    let logits = model.forward(&tr, &xs, &adjs).unwrap();
    let loss = logits.cross_entropy(&yv, Some(&mv), Reduction::Mean, None).unwrap();
    let trace = tr.finish(&[&logits, &loss]).unwrap();

    // Adam with float16 first moments (PopTorch's accum_type), weight decay on.
    let step = OptimizerStep::Adam {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-4,
        weight_decay: 0.01,
        decoupled: true,
        bias_correction: true,
        first_order_dtype: DType::Float16,
        second_order_dtype: DType::Float32,
    };
    let tg = training_graph(&trace.graph, 1, &TrainOptions { optimizer: Some(step), ..Default::default() }).unwrap();
    let mut store = Store::from_params(&trace.params, &trace.buffers, 3).unwrap();
    let mut inputs: Vec<Rc<Tensor>> = x.iter().chain(adj.iter()).cloned().collect();
    inputs.push(Rc::new(Tensor::from_i32(&[NODES], y).unwrap()));
    inputs.push(Rc::new(Tensor::from_bool(&[NODES], mask).unwrap()));

    let mut got = BTreeMap::new();
    for s in 0..steps {
        let out = run(&tg.graph, &mut store, &inputs).unwrap();
        for (i, o) in out.outputs.iter().enumerate() {
            got.insert(format!("step{s}.output{i}"), bits(o));
        }
    }
    for (name, _) in &trace.params {
        got.insert(format!("param.{name}"), bits(&store.params[name]));
    }
    got
}

#[test]
fn float16_revgnn_adam_steps_are_bit_identical_to_the_recorded_ones() {
    let got = train(3);
    if std::env::var_os("RECORD_FLOAT16_GOLDEN").is_some() {
        std::fs::write(GOLDEN, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
        return;
    }
    let text = std::fs::read_to_string(GOLDEN).expect("the golden file (see the module docs)");
    let want: BTreeMap<String, Vec<String>> = serde_json::from_str(&text).unwrap();
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
    for (name, w) in &want {
        let g = &got[name];
        assert_eq!(g.len(), w.len(), "{name}: length");
        let diff: Vec<usize> = (0..w.len()).filter(|&i| g[i] != w[i]).collect();
        assert!(
            diff.is_empty(),
            "{name}: {} of {} values differ, first at {}: {} vs {}",
            diff.len(),
            w.len(),
            diff[0],
            g[diff[0]],
            w[diff[0]]
        );
    }
    // The run trains: the loss moves and is finite.
    assert_ne!(got["step0.output1"], got["step2.output1"]);
}
