//! RevGNN training from JavaScript: `new RevGnnTrainer(name, files, config)`, then
//! `trainEpoch()` and `evaluate()` (the page runs them in its worker; timing is the
//! caller's, with `performance.now()`).

use super::args::{self, arg_err, js_err, JsResult};
use super::to_js;
use crate::gnn::config::{ConfigValue, TrainConfigSpec, MAX_FILE_BYTES};
use crate::gnn::data::{planetoid, PlanetoidOptions, Source};
use crate::gnn::train::Trainer;
use crate::trace::check;
use serde::Serialize;
use std::collections::HashMap;
use wasm_bindgen::prelude::*;

/// A RevGNN on a Planetoid graph with its compiled training and evaluation graphs.
#[wasm_bindgen]
pub struct RevGnnTrainer {
    pub(super) inner: Trainer,
}

/// The trainer's options as the core's [`TrainConfigSpec`]: each own property's value as a
/// [`ConfigValue`] (only converted here; names, types and ranges are checked by the core).
fn config_spec(config: &JsValue) -> JsResult<TrainConfigSpec> {
    let mut spec = TrainConfigSpec::default();
    if args::is_absent(config) {
        return Ok(spec);
    }
    args::object(config, "RevGnnTrainer: config")?;
    for (key, v) in args::entries(config, "RevGnnTrainer: config", 64)? {
        let key = args::string(&key, "a config option's name", check::MAX_NAME_BYTES)?;
        let value = if args::is_absent(&v) {
            None
        } else if let Some(x) = v.as_f64() {
            Some(ConfigValue::Number(x))
        } else if let Some(b) = v.as_bool() {
            Some(ConfigValue::Bool(b))
        } else if v.is_string() {
            // Long strings are described, not copied: no option takes one.
            match args::string(&v, "", 64) {
                Ok(s) => Some(ConfigValue::Text(s)),
                Err(_) => Some(ConfigValue::Other(args::describe(&v))),
            }
        } else {
            Some(ConfigValue::Other(args::describe(&v)))
        };
        spec.options.insert(key, value);
    }
    Ok(spec)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EpochOut {
    epoch: usize,
    loss: f64,
    steps: usize,
    saved_for_backward: u64,
    peak_bytes: u64,
    /// Per op name: [calls, seconds], when `setProfiling(true)` is on.
    op_time: std::collections::BTreeMap<&'static str, (usize, f64)>,
}

/// Turns per-op timing of the executor on or off (`trainEpoch` then reports `opTime`).
#[wasm_bindgen(js_name = setProfiling)]
pub fn set_profiling(#[wasm_bindgen(unchecked_param_type = "boolean")] on: JsValue) -> JsResult<()> {
    crate::exec::set_profiling(args::opt_bool(&on, "setProfiling: on", false)?);
    Ok(())
}

#[wasm_bindgen]
impl RevGnnTrainer {
    /// `name`: "Cora", "CiteSeer" or "PubMed". `files`: `{ x: Uint8Array, tx, allx, y, ty,
    /// ally, graph, "test.index" }` (the raw Planetoid files, each at most 256 MiB).
    /// `config`: optional `{ epochs, layers, hidden, groups, parts, dropout, lr, weightDecay,
    /// optimizer: "adam"|"adamw"|"sgd", seed, noRev, half }`, each checked: whole numbers whole,
    /// numbers finite and in range (epochs at most 5000, layers at most 1001: see
    /// `limits().trainer`), `noRev` and `half` (float16 weights and activations) booleans; an
    /// unknown option is an error.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Record<string, Uint8Array>")] files: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Record<string, unknown>")] config: JsValue,
    ) -> JsResult<RevGnnTrainer> {
        let name = args::string(&name, "RevGnnTrainer: name", 64)?;
        // The options first: a wrong one is reported before the files are read.
        let spec = config_spec(&config)?;
        spec.to_config(usize::MAX).map_err(arg_err)?;
        args::object(&files, "RevGnnTrainer: files")?;
        let mut map = HashMap::new();
        for (key, v) in args::entries(&files, "RevGnnTrainer: files", 64)? {
            let k = args::string(&key, "a file's name", check::MAX_NAME_BYTES)?;
            let bytes = args::bytes(&v, &format!("RevGnnTrainer: files[{k:?}]"), MAX_FILE_BYTES)?;
            map.insert(k, bytes);
        }
        let data = planetoid(&name, Source::Files(&map), &PlanetoidOptions::rev_gnn()).map_err(js_err)?;
        let cfg = spec.to_config(data.num_nodes).map_err(arg_err)?;
        Ok(RevGnnTrainer { inner: Trainer::new(data, cfg).map_err(js_err)? })
    }

    /// One epoch over the shuffled parts: `{ epoch, loss, steps, savedForBackward, peakBytes }`.
    #[wasm_bindgen(js_name = trainEpoch)]
    pub fn train_epoch(&mut self) -> JsResult<JsValue> {
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
    pub fn evaluate(&mut self) -> JsResult<JsValue> {
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
        crate::ir::print::print_graph(self.inner.train_graph())
    }

    /// The training step as `trainEpoch` runs it, for `plan(trainer, options)`: the planner's
    /// prediction of what the executor measures (the page shows both).
    #[wasm_bindgen(getter)]
    pub fn traced(&self) -> super::plan::TracedGraph {
        super::plan::TracedGraph::new(self.inner.train_graph())
    }
}
