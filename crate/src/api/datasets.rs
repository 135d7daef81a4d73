//! `datasets` from JavaScript: the Planetoid graphs through the core's one entry point
//! (`gnn::data::planetoid`), and `GraphData`, the graph a dataset holds (PyG's `Data`).
//!
//! ```js
//! const dataset = await datasets.Planetoid("PubMed", files, { split: "full", transform: ["AddSelfLoops"] });
//! const data = dataset.get(0);          // or dataset.data
//! data.x;                               // sparse features: { layout: "csr", shape, indptr, indices, values }
//! data.y; data.trainMask;               // host tensors: { shape, dtype, data }
//! data.meanAdjacency();                 // SAGEConv's adjacency of the whole graph
//! ```
//!
//! `datasets.Planetoid(name, files | baseUrl, options)` is appended to the glue by
//! `scripts/fix-pkg.mjs`: given a URL (a string or `URL`) it fetches the eight raw files
//! (`_planetoidFiles(name)` names them) from there, as a page or worker does from `/data/`;
//! given `{ "ind.cora.x": Uint8Array, … }` (or keyed `x`, `tx`, …) it uses the bytes, as Node
//! does. Either way it resolves to a `PlanetoidDataset`, built here.

use super::args::{self, js_err, JsResult};
use super::host_tensor;
use super::sparse::host_sparse_to_js;
use crate::gnn::config::MAX_FILE_BYTES;
use crate::gnn::data::{
    gcn_adjacency, mean_adjacency, planetoid, planetoid::canonical_name, planetoid::raw_file_name, GraphData,
    PaddedCsr, PlanetoidOptions, Source, PLANETOID_FILES,
};
use crate::tensor::Tensor;
use crate::trace::check;
use js_sys::{Object, WeakMap, JSON};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// The raw file names of Planetoid dataset `name` (`ind.cora.x`, …), in the order PyG reads
/// them; an unknown name is an error listing the names.
#[wasm_bindgen(js_name = _planetoidFiles)]
pub fn planetoid_files(#[wasm_bindgen(unchecked_param_type = "string")] name: JsValue) -> JsResult<Vec<String>> {
    let name = args::string(&name, "datasets.Planetoid: name", 64)?;
    let canon = canonical_name(&name).map_err(js_err)?;
    Ok(PLANETOID_FILES.iter().map(|s| raw_file_name(canon, s)).collect())
}

/// Options as JSON text (`JSON.stringify` may run the caller's getters; what they throw is
/// the error), `{}` when left out.
pub(super) fn json_of(v: &JsValue, what: &str) -> JsResult<String> {
    if args::is_absent(v) {
        return Ok("{}".into());
    }
    if !v.is_object() || js_sys::Array::is_array(v) {
        return Err(args::type_error(&format!("{what} must be an object, got {}", args::describe(v))));
    }
    JSON::stringify(v)?.as_string().ok_or_else(|| args::error(&format!("{what} cannot be turned into JSON")))
}

thread_local! {
    /// Each GraphData object this module made, to its number …
    static DATA_IDS: WeakMap = WeakMap::new();
    static NEXT_ID: Cell<u32> = const { Cell::new(0) };
    /// … and the graph behind the number, while the object lives.
    static GRAPHS: RefCell<HashMap<u32, Weak<GraphData>>> = RefCell::new(HashMap::new());
}

/// The graph of a `GraphData` object this package made, or a TypeError naming `what`.
pub(super) fn graph_arg(v: &JsValue, what: &str) -> JsResult<Rc<GraphData>> {
    let not = || args::type_error(&format!("{what} must be a GraphData (dataset.get(0)), got {}", args::describe(v)));
    if !v.is_object() {
        return Err(not());
    }
    let id = DATA_IDS.with(|m| m.get(v.unchecked_ref::<Object>())).as_f64().ok_or_else(not)? as u32;
    GRAPHS
        .with(|g| g.borrow().get(&id).and_then(Weak::upgrade))
        .ok_or_else(|| args::error(&format!("{what}: this GraphData has been freed")))
}

/// A graph (PyG's `Data`): sparse node features, labels, split masks and edges. Its tensor
/// getters return one view per field, made on the first read and frozen (the object and its
/// shape; the typed arrays are the view's own copy of the graph's values), so `data.y.data[i]`
/// in a loop copies nothing.
#[wasm_bindgen(js_name = GraphData)]
pub struct JsGraphData {
    data: Rc<GraphData>,
    views: RefCell<HashMap<&'static str, JsValue>>,
}

impl JsGraphData {
    /// The JS object of `data`, recognised later by [`graph_arg`].
    pub(super) fn make(data: Rc<GraphData>) -> JsValue {
        let id = NEXT_ID.with(|n| {
            n.set(n.get().wrapping_add(1));
            n.get()
        });
        GRAPHS.with(|g| {
            let mut g = g.borrow_mut();
            g.retain(|_, w| w.strong_count() > 0);
            g.insert(id, Rc::downgrade(&data));
        });
        let obj = JsValue::from(JsGraphData { data, views: RefCell::default() });
        DATA_IDS.with(|m| m.set(obj.unchecked_ref(), &JsValue::from(id)));
        obj
    }
}

fn bool_tensor(mask: &[bool]) -> JsResult<JsValue> {
    host_tensor::to_js(&Tensor::from_bool(&[mask.len()], mask.to_vec()).map_err(args::js_err)?)
}

/// `Object.freeze` on `v` and on its `shape` array.
fn freeze(v: &JsValue) -> JsResult<()> {
    let shape = js_sys::Reflect::get(v, &JsValue::from_str("shape"))?;
    if shape.is_object() {
        Object::freeze(shape.unchecked_ref::<Object>());
    }
    Object::freeze(v.unchecked_ref::<Object>());
    Ok(())
}

impl JsGraphData {
    /// The view of field `key`: made by `make` on the first read and frozen, then the same
    /// object on every read.
    fn view(&self, key: &'static str, make: impl FnOnce(&GraphData) -> JsResult<JsValue>) -> JsResult<JsValue> {
        if let Some(v) = self.views.borrow().get(key) {
            return Ok(v.clone());
        }
        let v = make(&self.data)?;
        freeze(&v)?;
        self.views.borrow_mut().insert(key, v.clone());
        Ok(v)
    }
}

#[wasm_bindgen(js_class = GraphData)]
impl JsGraphData {
    /// The dataset's name.
    #[wasm_bindgen(getter)]
    pub fn name(&self) -> String {
        self.data.name.clone()
    }
    #[wasm_bindgen(getter, js_name = numNodes)]
    pub fn num_nodes(&self) -> usize {
        self.data.num_nodes
    }
    /// Directed edges (self loops included once a transform added them).
    #[wasm_bindgen(getter, js_name = numEdges)]
    pub fn num_edges(&self) -> usize {
        self.data.num_edges()
    }
    #[wasm_bindgen(getter, js_name = numFeatures)]
    pub fn num_features(&self) -> usize {
        self.data.num_features
    }
    #[wasm_bindgen(getter, js_name = numClasses)]
    pub fn num_classes(&self) -> usize {
        self.data.num_classes
    }
    /// The node features, a host CSR matrix `[numNodes, numFeatures]` (one frozen view,
    /// the same object on every read).
    #[wasm_bindgen(getter, unchecked_return_type = "HostSparse")]
    pub fn x(&self) -> JsResult<JsValue> {
        self.view("x", |d| host_sparse_to_js(&PaddedCsr::exact(d.x.clone())))
    }
    /// Labels, int32 `[numNodes]` (one frozen view).
    #[wasm_bindgen(getter, unchecked_return_type = "HostTensor")]
    pub fn y(&self) -> JsResult<JsValue> {
        self.view("y", |d| host_tensor::to_js(&Tensor::from_i32(&[d.num_nodes], d.y.clone()).map_err(args::js_err)?))
    }
    #[wasm_bindgen(getter, js_name = trainMask, unchecked_return_type = "HostTensor")]
    pub fn train_mask(&self) -> JsResult<JsValue> {
        self.view("trainMask", |d| bool_tensor(&d.train_mask))
    }
    #[wasm_bindgen(getter, js_name = valMask, unchecked_return_type = "HostTensor")]
    pub fn val_mask(&self) -> JsResult<JsValue> {
        self.view("valMask", |d| bool_tensor(&d.val_mask))
    }
    #[wasm_bindgen(getter, js_name = testMask, unchecked_return_type = "HostTensor")]
    pub fn test_mask(&self) -> JsResult<JsValue> {
        self.view("testMask", |d| bool_tensor(&d.test_mask))
    }
    /// Edges as PyG's `edge_index`: int32 `[2, numEdges]`, sources then targets (one frozen
    /// view).
    #[wasm_bindgen(getter, js_name = edgeIndex, unchecked_return_type = "HostTensor")]
    pub fn edge_index(&self) -> JsResult<JsValue> {
        self.view("edgeIndex", |d| host_tensor::to_js(&d.edge_index().map_err(args::js_err)?))
    }
    /// SAGEConv's mean-aggregation adjacency of the whole graph (rows are targets).
    #[wasm_bindgen(js_name = meanAdjacency, unchecked_return_type = "HostSparse")]
    pub fn mean_adjacency(&self) -> JsResult<JsValue> {
        let d = &self.data;
        host_sparse_to_js(&PaddedCsr::exact(mean_adjacency(d.num_nodes, &d.edge_src, &d.edge_dst)))
    }
    /// GCNConv's normalised adjacency `D^-1/2 (A + I) D^-1/2` of the whole graph.
    #[wasm_bindgen(js_name = gcnAdjacency, unchecked_return_type = "HostSparse")]
    pub fn gcn_adjacency(&self) -> JsResult<JsValue> {
        let d = &self.data;
        host_sparse_to_js(&PaddedCsr::exact(gcn_adjacency(d.num_nodes, &d.edge_src, &d.edge_dst)))
    }
    /// Sizes of the train, val and test splits.
    #[wasm_bindgen(js_name = splitSizes)]
    #[wasm_bindgen(unchecked_return_type = "number[]")]
    pub fn split_sizes(&self) -> JsValue {
        let (a, b, c) = self.data.split_sizes();
        js_sys::Array::of3(&(a as f64).into(), &(b as f64).into(), &(c as f64).into()).into()
    }
}

/// A Planetoid dataset (one graph), as `datasets.Planetoid` resolves to.
#[wasm_bindgen]
pub struct PlanetoidDataset {
    data: Rc<GraphData>,
}

#[wasm_bindgen]
impl PlanetoidDataset {
    /// `name`: "Cora", "CiteSeer" or "PubMed" (any case). `files`: the eight raw files,
    /// `{ "ind.cora.x": Uint8Array, … }` or keyed by suffix (`x`, `tx`, `allx`, `y`, `ty`,
    /// `ally`, `graph`, `test.index`), each at most 256 MiB. `options`: `{ split:
    /// "public"|"full"|"random", numTrainPerClass, numVal, numTest, seed, transform:
    /// ["AddSelfLoops", "NormalizeFeatures", "ToUndirected"] }`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Record<string, Uint8Array>")] files: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "PlanetoidOptions")] options: JsValue,
    ) -> JsResult<PlanetoidDataset> {
        let name = args::string(&name, "datasets.Planetoid: name", 64)?;
        canonical_name(&name).map_err(js_err)?;
        let opts = PlanetoidOptions::from_json(&json_of(&options, "datasets.Planetoid: options")?).map_err(js_err)?;
        args::object(&files, "datasets.Planetoid: files")?;
        let mut map = HashMap::new();
        for (key, v) in args::entries(&files, "datasets.Planetoid: files", 64)? {
            let k = args::string(&key, "a file's name", check::MAX_NAME_BYTES)?;
            let bytes = args::bytes(&v, &format!("datasets.Planetoid: files[{k:?}]"), MAX_FILE_BYTES)?;
            map.insert(k, bytes);
        }
        let data = planetoid(&name, Source::Files(&map), &opts).map_err(js_err)?;
        Ok(PlanetoidDataset { data: Rc::new(data) })
    }
    /// The dataset's name ("Cora", "CiteSeer", "PubMed").
    #[wasm_bindgen(getter)]
    pub fn name(&self) -> String {
        self.data.name.clone()
    }
    /// Graphs in the dataset: 1.
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> usize {
        1
    }
    #[wasm_bindgen(getter, js_name = numFeatures)]
    pub fn num_features(&self) -> usize {
        self.data.num_features
    }
    #[wasm_bindgen(getter, js_name = numClasses)]
    pub fn num_classes(&self) -> usize {
        self.data.num_classes
    }
    /// Graph `index` (0, the only one): PyG's `dataset[0]`.
    #[wasm_bindgen(unchecked_return_type = "GraphData")]
    pub fn get(&self, #[wasm_bindgen(unchecked_param_type = "number")] index: JsValue) -> JsResult<JsValue> {
        let i = args::count(&index, "PlanetoidDataset.get: index", u32::MAX as usize)?;
        if i != 0 {
            return Err(args::range_error(&format!("PlanetoidDataset.get: index {i} is out of range (1 graph)")));
        }
        Ok(JsGraphData::make(self.data.clone()))
    }
    /// The graph (`get(0)`).
    #[wasm_bindgen(getter, unchecked_return_type = "GraphData")]
    pub fn data(&self) -> JsValue {
        JsGraphData::make(self.data.clone())
    }
}
