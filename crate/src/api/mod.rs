//! The JavaScript API: a thin wasm-bindgen layer over the Rust crate. Every function either
//! returns plain JS objects or throws an `Error` whose message names the cause.

mod gnn;
pub mod nn;
pub mod train;
mod weights;

use crate::ir::{print::print_graph, Graph};
use crate::trace::TraceError;
use serde::Serialize;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

fn js_err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

fn to_js<T: Serialize>(v: &T) -> Result<JsValue, JsError> {
    v.serialize(&serde_wasm_bindgen::Serializer::json_compatible()).map_err(js_err)
}

#[derive(Serialize)]
struct TracedModel<'a> {
    text: String,
    graph: &'a Graph,
}

fn traced(g: &Graph) -> Result<JsValue, JsError> {
    to_js(&TracedModel { text: print_graph(g), graph: g })
}

/// The crate's version.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// Traces an MLP with layer `sizes` on a `[batch, sizes[0]]` input; returns
/// `{ text, graph }`: the printed graph and its JSON form.
#[wasm_bindgen(js_name = traceMlp)]
pub fn trace_mlp(sizes: Vec<usize>, batch: usize) -> Result<JsValue, JsError> {
    let t = crate::trace::nn::trace_mlp(&sizes, batch, 0).map_err(|e: TraceError| js_err(e))?;
    traced(&t.graph)
}

/// The playground's default model (an MLP 4 → 16 → 16 → 3 on a batch of 8), traced.
#[wasm_bindgen(js_name = defaultModel)]
pub fn default_model() -> Result<JsValue, JsError> {
    trace_mlp(vec![4, 16, 16, 3], 8)
}
