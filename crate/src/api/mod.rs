//! The JavaScript API: a thin wasm-bindgen layer over the Rust crate. Every function either
//! returns plain JS objects or throws: a `TypeError` for an argument of the wrong type, a
//! `RangeError` for a number out of range, an `Error` for anything else, each naming the
//! argument and the cause. Arguments arrive as `JsValue`s and are converted in `args.rs`;
//! the rules and limits are the core's, listed by [`limits`]. No panic reaches JS from bad
//! input, and the module keeps working after any number of rejected calls.

pub mod args;
pub mod datasets;
mod geometry;
pub mod gnn_nn;
pub mod host_tensor;
pub mod loaders;
pub mod modules;
pub mod nn;
pub mod plan;
pub mod poptorch;
pub mod session;
pub mod sparse;
pub mod state;
pub mod tensor;
mod tensor_handles;
pub mod train;
mod tree;
pub mod vision;
mod weights;

use crate::ir::{print::print_graph, Graph};
use crate::trace::check;
use args::{js_err, JsResult};
use serde::Serialize;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// `v` as a plain JS object, as `JSON.parse` of its JSON reads it: written to one JSON
/// string in Rust and parsed by the engine's own JSON parser, which for a large result (a
/// traced graph of 10,000 nodes, a plan) is many times faster than building the object a
/// property at a time across the boundary. Non-finite numbers become `null`, as in JSON.
pub(crate) fn to_js<T: Serialize>(v: &T) -> JsResult<JsValue> {
    let text = serde_json::to_string(v).map_err(|e| js_err(crate::Error::from(e)))?;
    js_sys::JSON::parse(&text)
}

#[derive(Serialize)]
struct TracedModel<'a> {
    text: String,
    graph: &'a Graph,
}

/// `{text, graph, traced}`: the printed graph, its JSON, and the graph for `plan`.
fn traced(g: &Graph) -> JsResult<JsValue> {
    let v = to_js(&TracedModel { text: print_graph(g), graph: g })?;
    plan::TracedGraph::attach(&v, g)?;
    Ok(v)
}

/// The crate's version.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// Calls `hook()` as long engine work advances (the tracer every 4096 nodes, autograd every
/// 4096 nodes, the planner after each pass), so a host can tell a long analysis from code
/// that loops: the page's analysis worker forwards it to the main thread, whose guard stops
/// only an analysis that makes no progress. `null` removes it. The hook's exceptions are
/// ignored; calling `setProgressHook` from inside the hook is an Error.
#[wasm_bindgen(js_name = setProgressHook)]
pub fn set_progress_hook(#[wasm_bindgen(unchecked_param_type = "(() => void) | null")] hook: JsValue) -> JsResult<()> {
    let hook: Option<Box<dyn Fn()>> = if hook.is_null() || hook.is_undefined() {
        None
    } else {
        let f = args::function(&hook, "setProgressHook: hook")?;
        Some(Box::new(move || {
            let _ = f.call0(&JsValue::NULL);
        }))
    };
    if crate::progress::set_hook(hook) {
        Ok(())
    } else {
        Err(args::error("setProgressHook: called from inside the progress hook"))
    }
}

/// Traces an MLP with layer `sizes` (2 to 1025 whole numbers from 1) on a
/// `[batch, sizes[0]]` input; returns `{ text, graph, traced }`: the printed graph, its JSON
/// form and the graph for `plan`. Every weight and the input stay within the tensor limits,
/// all parameters within 1 GiB (`limits()`).
#[wasm_bindgen(js_name = traceMlp)]
pub fn trace_mlp(
    #[wasm_bindgen(unchecked_param_type = "number[]")] sizes: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number")] batch: JsValue,
) -> JsResult<JsValue> {
    let sizes = args::list(&sizes, "traceMlp: sizes", check::MAX_MLP_LAYERS + 1)?
        .iter()
        .enumerate()
        .map(|(i, v)| args::count(v, &format!("traceMlp: sizes[{i}]"), check::MAX_TENSOR_BYTES))
        .collect::<JsResult<Vec<_>>>()?;
    let batch = args::count(&batch, "traceMlp: batch", check::MAX_TENSOR_BYTES)?;
    let t = crate::trace::nn::trace_mlp(&sizes, batch, 0).map_err(js_err)?;
    traced(&t.graph)
}

/// The playground's default model (an MLP 4 → 16 → 16 → 3 on a batch of 8), traced.
#[wasm_bindgen(js_name = defaultModel)]
pub fn default_model() -> JsResult<JsValue> {
    let t = crate::trace::nn::trace_mlp(&[4, 16, 16, 3], 8, 0).map_err(js_err)?;
    traced(&t.graph)
}

/// Every limit on what the API accepts, in one object (the README and the package's
/// `.d.ts` list the same numbers).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Limits {
    max_tensor_bytes: usize,
    max_rank: usize,
    max_name_bytes: usize,
    max_ipu: u64,
    max_nodes: usize,
    max_list: usize,
    max_inputs: usize,
    max_module_depth: usize,
    max_mlp_layers: usize,
    max_mlp_bytes: usize,
    max_seed: u64,
    trainer: TrainerLimits,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TrainerLimits {
    max_epochs: usize,
    max_layers: usize,
    max_hidden: usize,
    max_blocks: usize,
    max_parts: usize,
    max_lr: f64,
    max_weight_decay: f64,
    max_params: usize,
    max_activation_bytes: usize,
    max_file_bytes: usize,
}

/// The limits on sizes, counts, names and trainer options: `{ maxTensorBytes, maxRank,
/// maxNameBytes, maxIpu, maxNodes, maxList, maxInputs, maxModuleDepth, maxMlpLayers,
/// maxMlpBytes, maxSeed, trainer: { maxEpochs, maxLayers, maxHidden, maxBlocks, maxParts, maxLr, maxWeightDecay,
/// maxParams, maxActivationBytes, maxFileBytes } }`.
#[wasm_bindgen]
pub fn limits() -> JsResult<JsValue> {
    use crate::gnn::config as c;
    to_js(&Limits {
        max_tensor_bytes: check::MAX_TENSOR_BYTES,
        max_rank: check::MAX_RANK,
        max_name_bytes: check::MAX_NAME_BYTES,
        max_ipu: check::MAX_IPU,
        max_nodes: check::MAX_NODES,
        max_list: check::MAX_LIST,
        max_inputs: check::MAX_INPUTS,
        max_module_depth: check::MAX_MODULE_DEPTH,
        max_mlp_layers: check::MAX_MLP_LAYERS,
        max_mlp_bytes: check::MAX_MLP_BYTES,
        max_seed: check::MAX_SEED,
        trainer: TrainerLimits {
            max_epochs: c::MAX_EPOCHS,
            max_layers: c::MAX_LAYERS,
            max_hidden: c::MAX_HIDDEN,
            max_blocks: c::MAX_BLOCKS,
            max_parts: c::MAX_PARTS,
            max_lr: c::MAX_LR,
            max_weight_decay: c::MAX_WEIGHT_DECAY,
            max_params: c::MAX_PARAMS,
            max_activation_bytes: c::MAX_ACTIVATION_BYTES,
            max_file_bytes: c::MAX_FILE_BYTES,
        },
    })
}
