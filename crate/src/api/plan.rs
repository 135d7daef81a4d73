//! The IPU planner for JavaScript: `plan(model, options, settings)` and `demoModel(kind,
//! config)`. A thin edge: parsing and validation live in `compile::plan` and
//! `crate::models::DemoConfig`.
//!
//! `model` is what `trace(...)`, `traceMlp(...)`, `defaultModel()` or `demoModel(...)`
//! returns (its `traced` member, a [`TracedGraph`], holds the graph), or that `TracedGraph`
//! itself. `options` is a `poptorch.Options` (used as it is: its values were parsed and
//! checked when they were set), or its JSON, a plain object in camelCase (see
//! `compile::options`), or omitted for PopTorch's defaults. `settings` is
//! `{training, loss, optimizer, microBatchSize}` (see `compile::plan::PlanRequest`), or
//! omitted for an inference plan.
//!
//! The result is the Plan as a plain object, with `timings: {trainingGraphMs, planMs}`. A configuration PopTorch would reject (a
//! wrong option value, a SameAsIpu conflict, accumulation below the stages, an unknown
//! option key, …) is still a plan: `valid: false`, `fits: false` and the causes in
//! `errors`, each with `code`, `message`, `fix` and `node`. A model that does not fit is a
//! valid plan with `fits: false` and `out_of_memory` errors. `plan` throws only when there
//! is nothing to plan: `model` is not a traced model, `settings` do not parse, or training
//! was asked of a graph without a scalar loss or trainable parameters.

use super::args::{self, error, js_err, type_error, JsResult};
use crate::compile::plan::{plan_json_timed, plan_options_timed};
use crate::gnn::preview::KeyError;
use crate::ir::Graph;
use crate::models::{DemoConfig, DemoKind, DemoNet};
use crate::trace::check::ArgError;
use js_sys::{Function, Reflect, JSON};
use serde::Serialize;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// A traced model's graph, kept in wasm memory for `plan` (the `traced` member of a trace
/// result).
#[wasm_bindgen]
pub struct TracedGraph {
    graph: Rc<Graph>,
}

impl TracedGraph {
    /// Wraps a traced graph.
    pub fn new(graph: &Graph) -> TracedGraph {
        TracedGraph { graph: Rc::new(graph.clone()) }
    }

    /// Adds `traced` (this graph) to a trace result object.
    pub fn attach(result: &JsValue, graph: &Graph) -> JsResult<()> {
        Self::attach_shared(result, Rc::new(graph.clone()))
    }

    /// [`Self::attach`] of a graph already shared (a wrapped model's trace): no copy of it.
    pub fn attach_shared(result: &JsValue, graph: Rc<Graph>) -> JsResult<()> {
        Reflect::set(result, &"traced".into(), &TracedGraph { graph }.into())
            .map_err(|_| error("could not attach the traced graph to the result"))?;
        Ok(())
    }
}

/// `performance.now()` where there is one (pages, workers, Node), else 0.
fn now_ms() -> f64 {
    let perf = Reflect::get(&js_sys::global(), &"performance".into()).unwrap_or(JsValue::UNDEFINED);
    Reflect::get(&perf, &"now".into())
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .and_then(|f| f.call0(&perf).ok())
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0)
}

/// An options-like object as JSON text (`None` when left out). `JSON.stringify` may run the
/// caller's getters and `toJSON`; what they throw comes back as an error naming `what`.
fn json_arg(v: &JsValue, what: &str) -> JsResult<Option<String>> {
    if args::is_absent(v) {
        return Ok(None);
    }
    if !v.is_object() || js_sys::Array::is_array(v) {
        return Err(type_error(&format!("{what} must be an object, or left out; got {}", args::describe(v))));
    }
    let s = JSON::stringify(v).map_err(|_| error(&format!("{what} cannot be turned into JSON")))?;
    s.as_string().map(Some).ok_or_else(|| error(&format!("{what} cannot be turned into JSON")))
}

#[wasm_bindgen]
impl TracedGraph {
    /// Nodes in the traced graph.
    #[wasm_bindgen(getter, js_name = numNodes)]
    pub fn num_nodes(&self) -> usize {
        self.graph.nodes.len()
    }

    /// Plans this model: see the module-level `plan`.
    pub fn plan(&self, options: JsValue, settings: JsValue) -> JsResult<JsValue> {
        let s = json_arg(&settings, "plan: settings")?;
        // A `poptorch.Options` is used as it is (its values were checked when they were set);
        // a plain object is the Options JSON, parsed here.
        let p = match super::poptorch::handles::lookup::<crate::compile::Options>(&options)? {
            Some(o) => {
                let o = o.borrow().clone();
                plan_options_timed(&self.graph, &o, Vec::new(), s.as_deref(), &now_ms)
            }
            None => {
                let o = json_arg(&options, "plan: options")?;
                plan_json_timed(&self.graph, o.as_deref(), s.as_deref(), &now_ms)
            }
        }
        .map_err(js_err)?;
        JSON::parse(&p.to_json()).map_err(|_| error("plan: the plan could not be parsed as JSON"))
    }
}

/// Plans `model` on IPUs under `options` (see the module docs): returns the Plan object.
#[wasm_bindgen]
pub fn plan(model: JsValue, options: JsValue, settings: JsValue) -> JsResult<JsValue> {
    let got = args::describe(&model);
    let not_traced = || {
        type_error(&format!(
            "plan: the model must be what trace(), traceMlp(), defaultModel() or demoModel() returns; got {got}"
        ))
    };
    if !model.is_object() {
        return Err(not_traced());
    }
    let inner = Reflect::get(&model, &"traced".into()).unwrap_or(JsValue::UNDEFINED);
    let traced = if inner.is_object() { inner } else { model };
    let method: Function = Reflect::get(&traced, &"plan".into())
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or_else(not_traced)?;
    method.call2(&traced, &options, &settings)
}

/// Traces a demo model for the planner: `kind` is `"mlp"`, `"transformer"` or `"revgnn"`;
/// `config` is `{layers = 4, ipus = 1, training = false, small = false, graph = true}`:
/// the layers are split evenly over `ipus` IPUs, one Block per IPU; `training` traces
/// training behaviour (dropout masks); `small` uses the test sizes; `graph: false` leaves
/// out `text`, `graph` and `parameters` (large for deep models). RevGNN — the one entry
/// point for RevGNN without data, e.g. the page's views of a dataset — also takes the
/// model's and the graph's sizes `{hidden, groups, dropout, inChannels, outChannels, nodes,
/// edges, featureNnz, seed}` (PubMed-like padded parts by default; see
/// `crate::models::DemoConfig`); its graph is one training step ending in the masked
/// cross-entropy. Returns `{text, graph, parameters, traced, microBatchSize, timings:
/// {parametersMs, traceMs}}`, ready for `plan`.
#[wasm_bindgen(js_name = demoModel)]
pub fn demo_model(
    #[wasm_bindgen(unchecked_param_type = "string")] kind: JsValue,
    config: JsValue,
) -> JsResult<JsValue> {
    let kind = args::string(&kind, "demoModel: kind", 32)?;
    let kind = DemoKind::parse(&kind).map_err(|e| error(&format!("demoModel: {e}")))?;
    // An error about one key of `config` names it as `err.option` (the page marks its line).
    let keyed = |e: KeyError| {
        let err = args::arg_err(ArgError { message: format!("demoModel: {}", e.error.message), ..e.error });
        args::on_option(err, e.key)
    };
    let cfg = match json_arg(&config, "demoModel: config")? {
        Some(j) => DemoConfig::from_json(&j).map_err(keyed)?,
        None => DemoConfig::default(),
    };
    let sizes = cfg.sizes(kind).map_err(keyed)?;
    let t0 = now_ms();
    let net = DemoNet::new(kind, cfg.layers, &sizes).map_err(js_err)?;
    let t1 = now_ms();
    let m = net.trace(cfg.ipus, cfg.training).map_err(js_err)?;
    let t2 = now_ms();
    let out: JsValue = if cfg.graph {
        super::to_js(&Traced {
            text: crate::ir::print::print_graph(&m.trace.graph),
            graph: &m.trace.graph,
            parameters: m.trace.params.iter().map(|(n, p)| (n.clone(), p.shape().to_vec())).collect(),
        })?
    } else {
        js_sys::Object::new().into()
    };
    TracedGraph::attach(&out, &m.trace.graph)?;
    let timings = js_sys::Object::new();
    let set = |o: &JsValue, k: &str, v: f64| {
        Reflect::set(o, &k.into(), &JsValue::from(v)).map_err(|_| error("demoModel: could not build the result"))
    };
    set(&timings, "parametersMs", t1 - t0)?;
    set(&timings, "traceMs", t2 - t1)?;
    set(&out, "microBatchSize", m.micro_batch_size as f64)?;
    Reflect::set(&out, &"timings".into(), &timings).map_err(|_| error("demoModel: could not build the result"))?;
    Ok(out)
}

/// A traced model as `trace` returns it (without `modules` and `constants`).
#[derive(Serialize)]
struct Traced<'a> {
    text: String,
    graph: &'a Graph,
    parameters: Vec<(String, Vec<usize>)>,
}
