//! RevGNN training from JavaScript: `new RevGnnTrainer(name, files, config)`, then
//! `trainEpoch()` and `evaluate()` (the page runs them in its worker; timing is the
//! caller's, with `performance.now()`).

use super::{js_err, to_js};
use crate::gnn::data::{add_self_loops, load_planetoid_bytes, Split};
use crate::gnn::train::{OptimizerKind, TrainConfig, Trainer};
use js_sys::{Object, Reflect, Uint8Array};
use serde::Serialize;
use std::collections::HashMap;
use wasm_bindgen::prelude::*;

/// A RevGNN on a Planetoid graph with its compiled training and evaluation graphs.
#[wasm_bindgen]
pub struct RevGnnTrainer {
    pub(super) inner: Trainer,
}

fn opt_num(config: &JsValue, key: &str) -> Result<Option<f64>, JsError> {
    if config.is_undefined() || config.is_null() {
        return Ok(None);
    }
    let v = Reflect::get(config, &JsValue::from_str(key)).map_err(|_| JsError::new("config is not an object"))?;
    if v.is_undefined() {
        return Ok(None);
    }
    v.as_f64().map(Some).ok_or_else(|| JsError::new(&format!("config.{key} must be a number")))
}

fn whole(config: &JsValue, key: &str, default: usize) -> Result<usize, JsError> {
    match opt_num(config, key)? {
        None => Ok(default),
        Some(v) if v >= 0.0 && v.fract() == 0.0 => Ok(v as usize),
        Some(v) => Err(JsError::new(&format!("config.{key} must be a whole number, got {v}"))),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EpochOut {
    epoch: usize,
    loss: f64,
    steps: usize,
    saved_for_backward: usize,
    peak_bytes: usize,
    /// Per op name: [calls, seconds], when `setProfiling(true)` is on.
    op_time: std::collections::BTreeMap<&'static str, (usize, f64)>,
}

/// Turns per-op timing of the executor on or off (`trainEpoch` then reports `opTime`).
#[wasm_bindgen(js_name = setProfiling)]
pub fn set_profiling(on: bool) {
    crate::exec::set_profiling(on);
}

#[wasm_bindgen]
impl RevGnnTrainer {
    /// `files`: `{ x: Uint8Array, tx, allx, y, ty, ally, graph, "test.index" }` (the raw
    /// Planetoid files). `config`: optional `{ epochs, layers, hidden, groups, parts,
    /// dropout, lr, weightDecay, optimizer: "adam"|"adamw"|"sgd", seed, noRev }`.
    #[wasm_bindgen(constructor)]
    pub fn new(name: &str, files: &Object, config: JsValue) -> Result<RevGnnTrainer, JsError> {
        let mut map = HashMap::new();
        for key in Object::keys(files).iter() {
            let k = key.as_string().unwrap_or_default();
            let v = Reflect::get(files, &key).map_err(|_| JsError::new("files is not an object"))?;
            let bytes = v
                .dyn_into::<Uint8Array>()
                .map_err(|_| JsError::new(&format!("files[\"{k}\"] must be a Uint8Array")))?;
            map.insert(k, bytes.to_vec());
        }
        let mut data = load_planetoid_bytes(name, &map, Split::Full).map_err(js_err)?;
        add_self_loops(&mut data);
        let d = TrainConfig::default();
        let mut cfg = TrainConfig {
            epochs: whole(&config, "epochs", d.epochs)?,
            layers: whole(&config, "layers", d.layers)?,
            hidden: whole(&config, "hidden", d.hidden)?,
            groups: whole(&config, "groups", d.groups)?,
            parts: whole(&config, "parts", d.parts)?,
            seed: whole(&config, "seed", 0)? as u64,
            ..d
        };
        if let Some(v) = opt_num(&config, "dropout")? {
            cfg.dropout = v as f32;
        }
        if let Some(v) = opt_num(&config, "lr")? {
            cfg.lr = v as f32;
        }
        if let Some(v) = opt_num(&config, "weightDecay")? {
            cfg.weight_decay = v as f32;
        }
        if !config.is_undefined() && !config.is_null() {
            let o = Reflect::get(&config, &"optimizer".into()).unwrap_or(JsValue::UNDEFINED);
            if let Some(s) = o.as_string() {
                cfg.optimizer = OptimizerKind::parse(&s).map_err(js_err)?;
            }
            let r = Reflect::get(&config, &"noRev".into()).unwrap_or(JsValue::UNDEFINED);
            cfg.no_rev = r.as_bool().unwrap_or(false);
        }
        Ok(RevGnnTrainer { inner: Trainer::new(data, cfg).map_err(js_err)? })
    }

    /// One epoch over the shuffled parts: `{ epoch, loss, steps, savedForBackward, peakBytes }`.
    #[wasm_bindgen(js_name = trainEpoch)]
    pub fn train_epoch(&mut self) -> Result<JsValue, JsError> {
        let s = self.inner.train_epoch().map_err(js_err)?;
        to_js(&EpochOut {
            epoch: self.inner.epoch(),
            loss: s.loss,
            steps: s.steps,
            saved_for_backward: s.saved_for_backward,
            peak_bytes: s.peak_bytes,
            op_time: s.op_time.into_iter().collect(),
        })
    }

    /// Accuracy on the whole graph: `{ train, val, test }`.
    pub fn evaluate(&mut self) -> Result<JsValue, JsError> {
        let a = self.inner.evaluate().map_err(js_err)?;
        to_js(&serde_json::json!({ "train": a.train, "val": a.val, "test": a.test }))
    }

    /// Trainable scalars.
    #[wasm_bindgen(getter, js_name = numParams)]
    pub fn num_params(&self) -> usize {
        self.inner.num_params()
    }

    /// The training graph, printed.
    #[wasm_bindgen(js_name = trainingGraphText)]
    pub fn training_graph_text(&self) -> String {
        crate::ir::print::print_graph(&self.inner.train_graph)
    }
}
