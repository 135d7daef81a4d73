//! `loaders` from JavaScript: PyG's `RandomNodeLoader` over a `GraphData`, through the
//! core's loader and padding (`gnn::data::loader`), yielding `Batch`es (induced subgraphs).
//!
//! ```js
//! const loader = new loaders.RandomNodeLoader(data, { numParts: 10, shuffle: true, seed: 1,
//!                                                   fixedSize: true, epochs: 200 });
//! for (const batch of loader) {          // one epoch: new random parts each time
//!   model.call(batch.x, batch.meanAdjacency(), batch.y, batch.trainMask);
//! }
//! ```
//!
//! With `fixedSize`, every part is padded to the same node, edge and feature-entry counts
//! (padding nodes have no features, label 0, every mask false; padding edges are self loops
//! on the last padding node), so one compiled model serves every part, as PopTorch needs
//! static shapes: exact for the first `epochs` epochs (a later one is an error), or, without
//! `epochs`, a bound that fits any part. `scripts/fix-pkg.mjs` makes the loader iterable
//! (each `for … of` draws the next epoch's parts, `_epoch()`, and yields each as a plain
//! object, `Batch._toHost()`, freeing the Rust batch at once).

use super::args::{self, js_err, JsResult};
use super::datasets::graph_arg;
use super::host_tensor;
use super::sparse::host_sparse_to_js;
use crate::gnn::config::MAX_EPOCHS;
use crate::gnn::config::MAX_PARTS;
use crate::gnn::data::{GraphData, PaddedLoader, Part, RandomNodeLoader as CoreLoader, PADDING_NODE_ID};
use crate::tensor::Tensor;
use crate::trace::check;
use serde::Serialize;
use std::rc::Rc;
use wasm_bindgen::prelude::*;

enum Parts {
    Plain(CoreLoader),
    Padded(PaddedLoader),
}

/// PyG's `RandomNodeLoader(data, num_parts, shuffle)`, optionally padded to fixed sizes.
#[wasm_bindgen]
pub struct RandomNodeLoader {
    data: Rc<GraphData>,
    parts: Parts,
}

struct LoaderOptions {
    num_parts: usize,
    shuffle: bool,
    seed: u64,
    fixed_size: bool,
    epochs: Option<usize>,
}

fn loader_options(v: &JsValue) -> JsResult<LoaderOptions> {
    const WHAT: &str = "RandomNodeLoader: options";
    args::object(v, WHAT)?;
    let mut o = LoaderOptions { num_parts: 0, shuffle: false, seed: 0, fixed_size: false, epochs: None };
    let mut parts = None;
    for (key, val) in args::entries(v, WHAT, 16)? {
        let k = key.as_string().unwrap_or_default();
        let what = format!("{WHAT}.{k}");
        match k.as_str() {
            "numParts" => parts = args::opt_count(&val, &what, MAX_PARTS)?,
            "shuffle" => o.shuffle = args::opt_bool(&val, &what, false)?,
            "seed" if !args::is_absent(&val) => o.seed = args::whole(&val, &what, check::MAX_SEED)?,
            "seed" => {}
            "fixedSize" => o.fixed_size = args::opt_bool(&val, &what, false)?,
            "epochs" => o.epochs = args::opt_count(&val, &what, MAX_EPOCHS)?,
            _ => {
                return Err(args::error(&format!(
                    "{WHAT} has no option {k:?}: the options are numParts, shuffle, seed, fixedSize, epochs"
                )))
            }
        }
    }
    o.num_parts = parts.ok_or_else(|| args::type_error(&format!("{WHAT}.numParts is required (a whole number)")))?;
    if o.num_parts == 0 {
        return Err(args::range_error(&format!("{WHAT}.numParts must be at least 1, got 0")));
    }
    if o.epochs == Some(0) {
        return Err(args::range_error(&format!("{WHAT}.epochs must be at least 1, got 0")));
    }
    if o.epochs.is_some() && !o.fixed_size {
        return Err(args::error(&format!("{WHAT}.epochs sizes the padding: it needs fixedSize: true")));
    }
    Ok(o)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Sizes {
    max_nodes: usize,
    max_edges: usize,
    x_capacity: usize,
}

#[wasm_bindgen]
impl RandomNodeLoader {
    /// `RandomNodeLoader(data, { numParts, shuffle = false, seed = 0, fixedSize = false,
    /// epochs })`: `numParts` parts of `ceil(numNodes / numParts)` nodes (the last may be
    /// smaller; at most the graph's nodes); `shuffle` draws new random parts every epoch
    /// from `seed`, else the parts are contiguous id ranges; `fixedSize` pads every part to
    /// one size (see the module docs).
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "GraphData")] data: JsValue,
        #[wasm_bindgen(unchecked_param_type = "RandomNodeLoaderOptions")] options: JsValue,
    ) -> JsResult<RandomNodeLoader> {
        let data = graph_arg(&data, "RandomNodeLoader: data")?;
        let o = loader_options(&options)?;
        if o.num_parts > data.num_nodes {
            return Err(args::range_error(&format!(
                "RandomNodeLoader: options.numParts = {} exceeds the graph's {} nodes",
                o.num_parts, data.num_nodes
            )));
        }
        let core = CoreLoader::new(o.num_parts, o.shuffle, o.seed).map_err(js_err)?;
        let parts = if o.fixed_size {
            Parts::Padded(PaddedLoader::new(&data, core, o.epochs).map_err(js_err)?)
        } else {
            Parts::Plain(core)
        };
        Ok(RandomNodeLoader { data, parts })
    }

    /// The next epoch's batches (what one `for … of` over the loader yields).
    #[wasm_bindgen(js_name = _epoch, unchecked_return_type = "Batch[]")]
    pub fn epoch(&mut self) -> JsResult<Vec<Batch>> {
        let parts = match &mut self.parts {
            Parts::Plain(l) => l.subgraphs(&self.data).map_err(js_err)?.into_iter().map(Part::exact).collect(),
            Parts::Padded(l) => l.next_epoch(&self.data).map_err(js_err)?,
        };
        Ok(parts.into_iter().map(|part| Batch { part }).collect())
    }

    /// The requested number of parts.
    #[wasm_bindgen(getter, js_name = numParts)]
    pub fn num_parts(&self) -> usize {
        match &self.parts {
            Parts::Plain(l) => l.num_parts(),
            Parts::Padded(l) => l.loader().num_parts(),
        }
    }

    /// The fixed sizes every batch is padded to, `{ maxNodes, maxEdges, xCapacity }`, or
    /// `null` without `fixedSize`.
    #[wasm_bindgen(getter, js_name = fixedSizes)]
    pub fn fixed_sizes(&self) -> JsResult<JsValue> {
        match &self.parts {
            Parts::Plain(_) => Ok(JsValue::NULL),
            Parts::Padded(l) => super::to_js(&Sizes {
                max_nodes: l.sizes.max_nodes,
                max_edges: l.sizes.max_edges,
                x_capacity: l.x_capacity,
            }),
        }
    }
}

/// One part of a loader: the induced subgraph of its nodes (PyG's `data.subgraph(index)`),
/// padded when the loader pads.
#[wasm_bindgen]
pub struct Batch {
    part: Part,
}

fn host(t: crate::Result<Tensor>) -> JsResult<JsValue> {
    host_tensor::to_js(&t.map_err(args::js_err)?)
}

#[wasm_bindgen]
impl Batch {
    /// Nodes, padding included.
    #[wasm_bindgen(getter, js_name = numNodes)]
    pub fn num_nodes(&self) -> usize {
        self.part.sub.data.num_nodes
    }
    /// Nodes of the graph in this part.
    #[wasm_bindgen(getter, js_name = numRealNodes)]
    pub fn num_real_nodes(&self) -> usize {
        self.part.num_real_nodes
    }
    /// Edges, padding included.
    #[wasm_bindgen(getter, js_name = numEdges)]
    pub fn num_edges(&self) -> usize {
        self.part.sub.num_edges()
    }
    #[wasm_bindgen(getter, js_name = numRealEdges)]
    pub fn num_real_edges(&self) -> usize {
        self.part.num_real_edges
    }
    /// Training nodes in this part.
    #[wasm_bindgen(getter, js_name = numTrain)]
    pub fn num_train(&self) -> usize {
        self.part.num_train()
    }
    /// Node features, a host CSR matrix (its entries padded to the loader's capacity).
    #[wasm_bindgen(getter, unchecked_return_type = "HostSparse")]
    pub fn x(&self) -> JsResult<JsValue> {
        host_sparse_to_js(&self.part.x())
    }
    /// Labels, int32 (0 for padding).
    #[wasm_bindgen(getter, unchecked_return_type = "HostTensor")]
    pub fn y(&self) -> JsResult<JsValue> {
        let s = &self.part.sub.data;
        host(Tensor::from_i32(&[s.num_nodes], s.y.clone()))
    }
    #[wasm_bindgen(getter, js_name = trainMask, unchecked_return_type = "HostTensor")]
    pub fn train_mask(&self) -> JsResult<JsValue> {
        let s = &self.part.sub.data;
        host(Tensor::from_bool(&[s.num_nodes], s.train_mask.clone()))
    }
    #[wasm_bindgen(getter, js_name = valMask, unchecked_return_type = "HostTensor")]
    pub fn val_mask(&self) -> JsResult<JsValue> {
        let s = &self.part.sub.data;
        host(Tensor::from_bool(&[s.num_nodes], s.val_mask.clone()))
    }
    #[wasm_bindgen(getter, js_name = testMask, unchecked_return_type = "HostTensor")]
    pub fn test_mask(&self) -> JsResult<JsValue> {
        let s = &self.part.sub.data;
        host(Tensor::from_bool(&[s.num_nodes], s.test_mask.clone()))
    }
    /// True for the part's own nodes, false for padding.
    #[wasm_bindgen(getter, js_name = nodeMask, unchecked_return_type = "HostTensor")]
    pub fn node_mask(&self) -> JsResult<JsValue> {
        let n = self.part.sub.data.num_nodes;
        host(Tensor::from_bool(&[n], (0..n).map(|i| i < self.part.num_real_nodes).collect()))
    }
    /// The graph's id of each node, int32 (-1 for padding).
    #[wasm_bindgen(getter, js_name = nodeIds, unchecked_return_type = "HostTensor")]
    pub fn node_ids(&self) -> JsResult<JsValue> {
        let ids = &self.part.sub.node_ids;
        let v = ids.iter().map(|&i| if i == PADDING_NODE_ID { -1 } else { i as i32 }).collect();
        host(Tensor::from_i32(&[ids.len()], v))
    }
    /// The part's edges as PyG's `edge_index`, int32 `[2, numEdges]` (padding edges are self
    /// loops on the last padding node, so they reach no real node in SAGEConv or GCNConv).
    #[wasm_bindgen(getter, js_name = edgeIndex, unchecked_return_type = "HostTensor")]
    pub fn edge_index(&self) -> JsResult<JsValue> {
        host(self.part.sub.data.edge_index())
    }
    /// SAGEConv's mean-aggregation adjacency of the part (its entries padded to the loader's
    /// edge count).
    #[wasm_bindgen(js_name = meanAdjacency, unchecked_return_type = "HostSparse")]
    pub fn mean_adjacency(&self) -> JsResult<JsValue> {
        host_sparse_to_js(&self.part.mean_adjacency())
    }
    /// GCNConv's normalised adjacency of the part.
    #[wasm_bindgen(js_name = gcnAdjacency, unchecked_return_type = "HostSparse")]
    pub fn gcn_adjacency(&self) -> JsResult<JsValue> {
        host_sparse_to_js(&self.part.gcn_adjacency())
    }
    /// Every member above as a plain object (the adjacencies as values), copied out of wasm
    /// memory: what the loader's iterator yields, freeing the batch at once, so that no
    /// part waits in wasm memory for the garbage collector (which does not see it: an
    /// epoch of PubMed parts is about 10 MiB).
    #[wasm_bindgen(js_name = _toHost)]
    pub fn to_host(&self) -> JsResult<JsValue> {
        let o = js_sys::Object::new();
        let set = |k: &str, v: JsValue| js_sys::Reflect::set(&o, &JsValue::from_str(k), &v).map(|_| ());
        set("numNodes", (self.num_nodes() as f64).into())?;
        set("numRealNodes", (self.num_real_nodes() as f64).into())?;
        set("numEdges", (self.num_edges() as f64).into())?;
        set("numRealEdges", (self.num_real_edges() as f64).into())?;
        set("numTrain", (self.num_train() as f64).into())?;
        set("x", self.x()?)?;
        set("y", self.y()?)?;
        set("trainMask", self.train_mask()?)?;
        set("valMask", self.val_mask()?)?;
        set("testMask", self.test_mask()?)?;
        set("nodeMask", self.node_mask()?)?;
        set("nodeIds", self.node_ids()?)?;
        set("edgeIndex", self.edge_index()?)?;
        set("meanAdjacency", self.mean_adjacency()?)?;
        set("gcnAdjacency", self.gcn_adjacency()?)?;
        Ok(o.into())
    }
}
