//! RevGNN's graph without data, for the page's views: `traceRevGnn(config)` with
//! `{ layers, hidden, groups, dropout, inChannels, outChannels, nodes, edges, featureNnz,
//! training, seed }` returns `{ text, graph, parameters, traced }` like `trace` (validation
//! in `crate::gnn::preview`).

use super::args::{error, js_err, JsResult};
use super::to_js;
use crate::gnn::preview::{trace_rev_gnn, RevGnnPreview};
use serde::Serialize;
use wasm_bindgen::prelude::*;

#[derive(Serialize)]
struct Traced<'a> {
    text: String,
    graph: &'a crate::ir::Graph,
    parameters: Vec<(String, Vec<usize>)>,
}

/// Traces PyG's RevGNN (examples/rev_gnn.py) for a graph of the given sizes.
#[wasm_bindgen(js_name = traceRevGnn)]
pub fn trace_rev_gnn_js(config: JsValue) -> JsResult<JsValue> {
    let p: RevGnnPreview = serde_wasm_bindgen::from_value(config).map_err(|e| error(&format!("traceRevGnn: {e}")))?;
    let t = trace_rev_gnn(&p).map_err(js_err)?;
    let result = to_js(&Traced {
        text: crate::ir::print::print_graph(&t.graph),
        graph: &t.graph,
        parameters: t.params.iter().map(|(n, p)| (n.clone(), p.shape().to_vec())).collect(),
    })?;
    super::plan::TracedGraph::attach(&result, &t.graph)?;
    Ok(result)
}
