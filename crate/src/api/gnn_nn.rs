//! The GNN layers of `nn` from JavaScript: `nn.SAGEConv`, `nn.GCNConv` (thin wrappers over
//! `crate::gnn::nn`, like every built-in module) and `nn.GroupAddRev`, PyG's reversible
//! layer, whose groups are JavaScript modules (a `GNNBlock` you write) traced as one
//! invertible region by the core's `GroupAddRev`: activation memory does not grow with
//! depth. Also `randomMask(shape, p)` and `isTraining()`, for the dropout mask RevGNN draws
//! once and shares by every layer.
//!
//! ```js
//! class GNNBlock extends nn.Module {
//!   constructor(c) { super(); this.norm = new nn.LayerNorm(c); this.conv = new nn.SAGEConv(c, c); }
//!   forward(x, adj, mask) {
//!     let h = this.norm.forward(x).relu();
//!     if (mask) h = h.dropoutWithMask(mask, 0.5);
//!     return this.conv.forward(h, adj);
//!   }
//! }
//! const rev = new nn.GroupAddRev(new GNNBlock(80), { numGroups: 2 });   // groups of 80 channels
//! const y = rev.forward(x, adj, mask);                                   // x: [nodes, 160]
//! ```
//!
//! As in PyG, `new GroupAddRev(conv, { numGroups })` uses `conv` as the first group and deep
//! copies of it, each with fresh parameters (PyG's `deepcopy` then `reset_parameters()`),
//! as the others; `new GroupAddRev([m0, m1, …])` (or an `nn.ModuleList`) uses those modules.
//! The groups are its submodules `convs.0`, `convs.1`, …, as PyG names them (`convs.0.convs.1.conv.lin_l.weight`).

use super::args::{self, js_err, JsResult};
use super::modules::{self, rust_module};
use super::session::{at_js_caller, current};
use super::sparse::{arg_to_js, module_args};
use super::tensor::{tensor_arg, wrap};
use crate::gnn::nn as gnn;
use crate::tensor::alloc::check_shape;
use crate::tensor::DType;
use crate::trace::check::{self, MAX_LIST, MAX_TENSOR_BYTES};
use crate::trace::nn::{Arg, Module as RustModule};
use crate::trace::{Tracer, Var};
use crate::{Error, Result};
use js_sys::{Array, Function, Map, Object, Reflect};
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// The most arguments a module's `forward` takes from JavaScript.
const MAX_ARGS: usize = 6;

/// A size of a layer: whole, from 1 (the tensor limits bound the weights).
fn size(v: &JsValue, what: &str) -> JsResult<usize> {
    let n = args::count(v, what, MAX_TENSOR_BYTES)?;
    if n == 0 {
        return Err(args::range_error(&format!("{what} must be at least 1, got 0")));
    }
    Ok(n)
}

rust_module!(
    SAGEConv,
    gnn::SAGEConv,
    "(x, edge_index): node features and PyG's int32 [2, E] edge_index (or the mean-aggregation adjacency)",
    x,
    edge_index
);
rust_module!(
    GCNConv,
    gnn::GCNConv,
    "(x, edge_index): node features and PyG's int32 [2, E] edge_index (or the GCN-normalised adjacency)",
    x,
    edge_index
);

/// `{ aggr = "mean" }`: PyG's aggregation name ("mean", "sum" or "add"); unknown keys are errors.
fn sage_options(v: &JsValue) -> JsResult<gnn::Aggregation> {
    let mut aggr = gnn::Aggregation::Mean;
    if args::is_absent(v) {
        return Ok(aggr);
    }
    args::object(v, "SAGEConv: options")?;
    for (key, val) in args::entries(v, "SAGEConv: options", 16)? {
        match key.as_string().as_deref() {
            Some("aggr") if args::is_absent(&val) => {}
            Some("aggr") => {
                let name = args::string(&val, "SAGEConv: options.aggr", 64)?;
                aggr = gnn::Aggregation::parse(&name).map_err(js_err)?;
            }
            _ => {
                return Err(args::error(&format!(
                    "SAGEConv: options has no option {:?}: the option is aggr",
                    key.as_string().unwrap_or_default()
                )))
            }
        }
    }
    Ok(aggr)
}

#[wasm_bindgen]
impl SAGEConv {
    /// `SAGEConv(in_channels, out_channels, { aggr = "mean" })` with PyG's defaults (`lin_l`
    /// with bias, `lin_r` without), initialised as PyG (see `manualSeed`). `aggr`: `"mean"`
    /// (of the messages on an `edge_index`; a sparse argument is the mean-aggregation
    /// adjacency) or `"sum"` (`"add"`: the sum on an `edge_index`, `adj @ x` on a sparse
    /// adjacency, as PyG's).
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number")] in_channels: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] out_channels: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ aggr?: \"mean\" | \"sum\" | \"add\" }")] options: JsValue,
    ) -> JsResult<SAGEConv> {
        let i = size(&in_channels, "SAGEConv: in_channels")?;
        let o = size(&out_channels, "SAGEConv: out_channels")?;
        let aggr = sage_options(&options)?;
        check_shape(&format!("SAGEConv({i}, {o}): a weight"), &[o as u64, i as u64], DType::Float32).map_err(js_err)?;
        Ok(SAGEConv { inner: RefCell::new(modules::with_rng(|r| gnn::SAGEConv::new(i, o, r))?.with_aggr(aggr)) })
    }
}

impl modules::FreshCopy for gnn::SAGEConv {
    fn fresh_copy(&self) -> JsResult<Self> {
        let (i, o) = (self.lin_l.in_features, self.lin_l.out_features);
        Ok(modules::with_rng(|r| gnn::SAGEConv::new(i, o, r))?.with_aggr(self.aggr))
    }
}

impl modules::FreshCopy for gnn::GCNConv {
    fn fresh_copy(&self) -> JsResult<Self> {
        let (i, o) = (self.lin.in_features, self.lin.out_features);
        modules::with_rng(|r| gnn::GCNConv::new(i, o, r))
    }
}

#[wasm_bindgen]
impl GCNConv {
    /// `GCNConv(in_channels, out_channels)`: glorot weight, zero bias (PyG's defaults).
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number")] in_channels: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] out_channels: JsValue,
    ) -> JsResult<GCNConv> {
        let i = size(&in_channels, "GCNConv: in_channels")?;
        let o = size(&out_channels, "GCNConv: out_channels")?;
        check_shape(&format!("GCNConv({i}, {o}): the weight"), &[o as u64, i as u64], DType::Float32)
            .map_err(js_err)?;
        Ok(GCNConv { inner: RefCell::new(modules::with_rng(|r| gnn::GCNConv::new(i, o, r))?) })
    }
}

/// A group of a `GroupAddRev` written in JavaScript: a module the core calls, which calls
/// the group's `forward` (the one the trace wrapped, so its ops get the group's path). A JS
/// exception is kept in `thrown` and rethrown once the region has unwound.
struct JsGroup {
    obj: JsValue,
    thrown: Rc<RefCell<Option<JsValue>>>,
}

impl RustModule for JsGroup {
    fn forward_args(&self, _tr: &Tracer, a: &[Arg]) -> Result<Var> {
        let call = || -> JsResult<Var> {
            let items = Array::new();
            for x in a {
                items.push(&arg_to_js(x)?);
            }
            let f = args::function(&args::get(&self.obj, "forward")?, "a GroupAddRev group's forward")?;
            let out = Reflect::apply(&f, &self.obj, &items)?;
            tensor_arg(&out, "the result of a GroupAddRev group's forward")
        };
        call().map_err(|e| {
            let msg = e
                .dyn_ref::<js_sys::Error>()
                .map(|x| String::from(x.message()))
                .unwrap_or_else(|| "a GroupAddRev group threw".to_string());
            *self.thrown.borrow_mut() = Some(e);
            Error::trace(msg)
        })
    }
}

/// PyG's `GroupAddRev`: see the module docs.
#[wasm_bindgen]
pub struct GroupAddRev {
    inner: gnn::GroupAddRev<JsGroup>,
    thrown: Rc<RefCell<Option<JsValue>>>,
}

/// `{ numGroups, splitDim = -1, disable = false }`; unknown keys are errors.
fn rev_options(v: &JsValue) -> JsResult<(Option<usize>, isize, bool)> {
    let (mut groups, mut split, mut disable) = (None, -1isize, false);
    if args::is_absent(v) {
        return Ok((groups, split, disable));
    }
    args::object(v, "GroupAddRev: options")?;
    for (key, val) in args::entries(v, "GroupAddRev: options", 16)? {
        match key.as_string().as_deref() {
            Some("numGroups") => groups = args::opt_count(&val, "GroupAddRev: options.numGroups", MAX_LIST)?,
            Some("splitDim") if !args::is_absent(&val) => {
                let r = check::MAX_RANK as i64;
                split = args::integer(&val, "GroupAddRev: options.splitDim", -r, r - 1)? as isize;
            }
            Some("splitDim") => {}
            Some("disable") => disable = args::opt_bool(&val, "GroupAddRev: options.disable", false)?,
            _ => {
                return Err(args::error(&format!(
                    "GroupAddRev: options has no option {:?}: the options are numGroups, splitDim, disable",
                    key.as_string().unwrap_or_default()
                )))
            }
        }
    }
    Ok((groups, split, disable))
}

/// The modules of a list of groups: an array, or an `nn.ModuleList` (its `_children()`).
fn group_list(v: &JsValue) -> JsResult<Option<Vec<JsValue>>> {
    let list = if v.is_instance_of::<Array>() {
        v.clone()
    } else if v.is_object() && args::get(v, "_children")?.is_function() && args::get(v, "get")?.is_function() {
        let f: Function = args::get(v, "_children")?.unchecked_into();
        f.call0(v)?
    } else {
        return Ok(None);
    };
    let items = args::list(&list, "GroupAddRev: groups", MAX_LIST)?;
    for (i, m) in items.iter().enumerate() {
        if !super::tree::is_module(m)? {
            return Err(args::type_error(&format!(
                "GroupAddRev: groups[{i}] must be a module (an object with a forward method), got {}",
                args::describe(m)
            )));
        }
    }
    Ok(Some(items))
}

#[wasm_bindgen]
impl GroupAddRev {
    /// `GroupAddRev(conv, { numGroups, splitDim = -1, disable = false })`: `conv` a module
    /// (copied with fresh parameters for groups 1, …; `numGroups` required) or a list of
    /// modules (the groups; `numGroups`, if given, must match). At least 2 groups.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "Module | object[]")] conv: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ numGroups?: number, splitDim?: number, disable?: boolean }")]
        options: JsValue,
    ) -> JsResult<GroupAddRev> {
        let (num_groups, split_dim, disable) = rev_options(&options)?;
        let groups = match group_list(&conv)? {
            Some(list) => {
                if let Some(n) = num_groups.filter(|&n| n != list.len()) {
                    return Err(args::error(&format!(
                        "GroupAddRev: numGroups is {n} but {} modules were given as the groups",
                        list.len()
                    )));
                }
                list
            }
            None => {
                if !super::tree::is_module(&conv)? {
                    return Err(args::type_error(&format!(
                        "GroupAddRev: conv must be a module (an object with a forward method) or a list of them, got {}",
                        args::describe(&conv)
                    )));
                }
                // PyG's words.
                let n = num_groups.ok_or_else(|| args::error("GroupAddRev: Please specific 'num_groups'"))?;
                if n < 2 {
                    return Err(args::error(&format!(
                        "GroupAddRev: The number of groups should not be smaller than '2' (got {n})"
                    )));
                }
                let mut list = vec![conv.clone()];
                for _ in 1..n {
                    list.push(deep_copy(&conv, &Map::new(), 0)?);
                }
                list
            }
        };
        let thrown = Rc::new(RefCell::new(None));
        let groups: Vec<JsGroup> = groups.into_iter().map(|obj| JsGroup { obj, thrown: thrown.clone() }).collect();
        let inner = gnn::GroupAddRev::with_split_dim(groups, split_dim, disable)
            .map_err(|e| js_err(e.context("GroupAddRev")))?;
        Ok(GroupAddRev { inner, thrown })
    }

    /// Records the layer on `x` with the groups' other arguments (the adjacency, then
    /// per-node extras such as the dropout mask, cut per group): `forward(x, adj, mask?)`.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn forward(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] x: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | SparseTensor")] a1: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | SparseTensor")] a2: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | SparseTensor")] a3: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | SparseTensor")] a4: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | SparseTensor")] a5: JsValue,
    ) -> JsResult<JsValue> {
        let values = [x, a1, a2, a3, a4, a5];
        debug_assert_eq!(values.len(), MAX_ARGS);
        let a = module_args(&values, "GroupAddRev")?;
        let tr = current()?;
        let x = match a.first() {
            Some(Arg::Dense(x)) => x.clone(),
            _ => return Err(args::type_error("GroupAddRev.forward: x must be a Tensor")),
        };
        *self.thrown.borrow_mut() = None;
        let r = at_js_caller(&tr, || self.inner.forward(&tr, &x, &a[1..]));
        match r {
            Ok(y) => wrap(y),
            // A group's exception, as it was thrown.
            Err(e) => Err(self.thrown.borrow_mut().take().unwrap_or_else(|| js_err(e))),
        }
    }

    /// The groups, as submodules `convs.0`, `convs.1`, … (for the trace's module walk).
    #[wasm_bindgen(js_name = _children)]
    pub fn children(&self) -> Vec<JsValue> {
        self.inner
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| Array::of2(&JsValue::from_str(&format!("convs.{i}")), &g.obj).into())
            .collect()
    }

    /// The number of groups.
    #[wasm_bindgen(getter, js_name = numGroups)]
    pub fn num_groups(&self) -> usize {
        self.inner.groups.len()
    }

    /// A copy whose groups are copies with fresh parameters.
    #[wasm_bindgen(js_name = _resetCopy)]
    pub fn reset_copy(&self) -> JsResult<GroupAddRev> {
        let seen = Map::new();
        let thrown = Rc::new(RefCell::new(None));
        let groups = self
            .inner
            .groups
            .iter()
            .map(|g| Ok(JsGroup { obj: deep_copy(&g.obj, &seen, 0)?, thrown: thrown.clone() }))
            .collect::<JsResult<Vec<_>>>()?;
        let inner =
            gnn::GroupAddRev::with_split_dim(groups, self.inner.split_dim, self.inner.disable).map_err(js_err)?;
        Ok(GroupAddRev { inner, thrown })
    }
}

/// A deep copy of a module for a new group, as PyG's `copy.deepcopy(conv)` followed by
/// `reset_parameters()`: the package's modules are copied with fresh parameters
/// (`_resetCopy()`); an object extending `nn.Module` gets a new base (its registered
/// parameters and buffers copied, `_copyBase()`) with the same prototype; any other object
/// with the same prototype; its own properties are copied deeply (modules and arrays of
/// them; other values shared). A `resetParameters()` of yours is then called on the copy.
/// `seen` maps originals to copies (shared submodules stay shared, cycles end).
fn deep_copy(v: &JsValue, seen: &Map, depth: usize) -> JsResult<JsValue> {
    if depth > check::MAX_MODULE_DEPTH {
        return Err(args::error(&format!(
            "GroupAddRev: the module to copy is nested more than {} levels deep",
            check::MAX_MODULE_DEPTH
        )));
    }
    if !v.is_object() || v.is_function() {
        return Ok(v.clone());
    }
    if seen.has(v) {
        return Ok(seen.get(v));
    }
    let copy = if v.is_instance_of::<Array>() {
        let items = args::list(v, "GroupAddRev: a list to copy", MAX_LIST)?;
        let out = Array::new();
        seen.set(v, &out);
        for item in &items {
            out.push(&deep_copy(item, seen, depth + 1)?);
        }
        return Ok(out.into());
    } else if let Some(f) = method(v, "_resetCopy")? {
        let c = f.call0(v)?;
        seen.set(v, &c);
        return Ok(c);
    } else if super::tree::is_module(v)? {
        let proto = Object::get_prototype_of(v);
        let fresh: JsValue = match method(v, "_copyBase")? {
            Some(f) => {
                let base = f.call0(v)?;
                let ok = Reflect::set_prototype_of(base.unchecked_ref::<Object>(), &proto)?;
                if !ok {
                    return Err(args::error("GroupAddRev: the copy of a module cannot take its prototype"));
                }
                base
            }
            None => Object::create(&proto).into(),
        };
        seen.set(v, &fresh);
        for (key, val) in args::entries(v, "GroupAddRev: a module to copy", MAX_LIST)? {
            if key.as_string().as_deref() == Some("__wbg_ptr") {
                continue; // the new base's own pointer stays
            }
            let c = if super::tree::is_module(&val)? || val.is_instance_of::<Array>() {
                deep_copy(&val, seen, depth + 1)?
            } else {
                val
            };
            Reflect::set(&fresh, &key, &c)?;
        }
        fresh
    } else {
        return Ok(v.clone());
    };
    if let Some(f) = method(&copy, "resetParameters")? {
        f.call0(&copy)?;
    }
    Ok(copy)
}

/// `obj[name]` when it is a function.
fn method(obj: &JsValue, name: &'static str) -> JsResult<Option<Function>> {
    let f = args::get(obj, name)?;
    Ok(if f.is_function() { Some(f.unchecked_into()) } else { None })
}

/// A dropout keep-mask of `shape` (bool, each element kept with probability `1 - p`),
/// drawn when the step runs: RevGNN draws one after `lin1` and shares it by every layer
/// (`x.dropoutWithMask(mask, p)` applies it). A whole-number shape within the tensor
/// limits; `0 <= p < 1`.
#[wasm_bindgen(js_name = randomMask, unchecked_return_type = "Tensor")]
pub fn random_mask(
    #[wasm_bindgen(unchecked_param_type = "number[] | Uint32Array")] shape: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number")] p: JsValue,
) -> JsResult<JsValue> {
    // A Tensor's `shape` (a typed array) or an array of sizes.
    let shape = if js_sys::ArrayBuffer::is_view(&shape) { Array::from(&shape).into() } else { shape };
    let dims = args::shape(&shape, "randomMask: shape")?;
    let dims = check_shape("randomMask: the mask", &dims, DType::Bool).map_err(js_err)?;
    let p = args::number(&p, "randomMask: p")?;
    if !(0.0..1.0).contains(&p) {
        return Err(args::range_error(&format!("randomMask: p must be in [0, 1), got {}", check::js_number(p))));
    }
    let tr = current()?;
    at_js_caller(&tr, || tr.random_mask(&dims, p as f32)).map_err(js_err).and_then(wrap)
}

/// Whether the running trace is a training trace (`trainingModel`, or `trace(..., {
/// training: true })`): PyTorch's `self.training` inside `forward`.
#[wasm_bindgen(js_name = isTraining)]
pub fn is_training() -> JsResult<bool> {
    Ok(current()?.training())
}
