//! Optimizers against reference values: every case of `tests/golden/optim/optim.json`
//! (made by `tests/golden/make_optim_golden.py`: torch.optim for SGD, Adam, AdamW and
//! RMSprop; a numpy transcription of the LAMB paper's formula — as PopTorch's
//! `optim.LAMB.step` states it — for LAMB and for AdamW without bias correction) is built
//! through `poptorch::optim::Optimizer` from PopTorch's keyword arguments, turned into the
//! parameter's `OptimizerStep` and applied step by step by the executor's
//! `optimizer_update`. Tolerance: `|got − want| ≤ 1e-6 + 1e-5·|want|` after every step.
//!
//! The LAMB reference (You et al., "Large Batch Optimization for Deep Learning: Training BERT
//! in 76 minutes", arXiv 1904.00962, Algorithm 2, with φ(z) = min(z, max_weight_norm) as
//! PopTorch's `optim.LAMB` and PopART's `AdamMode::Lamb` use it), per step t:
//!
//! ```text
//! m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
//! u = (m/bc1) / (√v/√bc2 + eps) + wd·p        bc_i = 1 − β_i^t (1 without bias correction)
//! r1 = min(‖p‖, max_weight_norm);  r2 = ‖u‖;  trust = 1 if r1 = 0 or r2 = 0 else r1/r2
//! p −= lr·trust·u
//! ```
//!
//! AdamW without bias correction is the same as AdamW with `bc1 = bc2 = 1`.

use ipu_playground::exec::{optimizer_update, Store};
use ipu_playground::poptorch::optim::{Optimizer, OptimizerArgs, OptimizerType};
use ipu_playground::tensor::Tensor;
use serde_json::Value;
use std::rc::Rc;

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data: Vec<f32> = v["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
    Tensor::from_f32(&shape, data).unwrap()
}

fn args(v: &Value) -> OptimizerArgs {
    let f = |k: &str| v.get(k).and_then(Value::as_f64).map(|x| x as f32);
    let b = |k: &str| v.get(k).and_then(Value::as_bool);
    let known = [
        "lr",
        "momentum",
        "dampening",
        "weight_decay",
        "nesterov",
        "betas",
        "eps",
        "alpha",
        "centered",
        "bias_correction",
        "max_weight_norm",
    ];
    for k in v.as_object().unwrap().keys() {
        assert!(known.contains(&k.as_str()), "the test does not map argument {k}");
    }
    OptimizerArgs {
        lr: f("lr"),
        momentum: f("momentum"),
        dampening: f("dampening"),
        weight_decay: f("weight_decay"),
        nesterov: b("nesterov"),
        betas: v.get("betas").map(|p| (p[0].as_f64().unwrap() as f32, p[1].as_f64().unwrap() as f32)),
        eps: f("eps"),
        alpha: f("alpha"),
        centered: b("centered"),
        bias_correction: b("bias_correction"),
        max_weight_norm: f("max_weight_norm"),
        ..OptimizerArgs::default()
    }
}

#[test]
fn optimizers_match_reference_values_step_by_step() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/optim/optim.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 17, "{} cases", cases.len());
    let mut seen = std::collections::HashSet::new();
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let ty = match c["optimizer"].as_str().unwrap() {
            "SGD" => OptimizerType::Sgd,
            "Adam" => OptimizerType::Adam,
            "AdamW" => OptimizerType::AdamW,
            "RMSprop" => OptimizerType::RmsProp,
            "LAMB" => OptimizerType::Lamb,
            o => panic!("{name}: unknown optimizer {o}"),
        };
        seen.insert(ty.name());
        let opt = Optimizer::new(ty, args(&c["args"])).unwrap_or_else(|e| panic!("{name}: {e}"));
        let step = opt.step_for("p");
        let p0 = tensor(&c["param"]);
        let mut store = Store::new(&[("p".to_string(), Rc::new(p0))], &[], 0);
        for (k, (g, want)) in c["grads"].as_array().unwrap().iter().zip(c["after"].as_array().unwrap()).enumerate() {
            optimizer_update(&mut store, "p", &step, &tensor(g)).unwrap_or_else(|e| panic!("{name}: {e}"));
            let got = store.params["p"].to_f32_vec();
            let want = tensor(want).to_f32_vec();
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                let tol = 1e-6 + 1e-5 * b.abs();
                assert!((a - b).abs() <= tol, "{name}: step {} element {i}: got {a}, want {b}", k + 1);
            }
        }
    }
    assert_eq!(seen.len(), 5, "every optimizer has cases: {seen:?}");
}
