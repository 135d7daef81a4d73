//! The modules JavaScript models are built from: `Module` (the base class to extend), the
//! built-in layers (Linear, LayerNorm, Dropout, ReLU, GELU, Embedding), `Sequential`,
//! `ModuleList`, and `manualSeed` for their initial parameters.
//!
//! Sizes are whole numbers checked before anything is allocated (see `limits()`); the init
//! generator is copied out of its cell for an initialisation and written back only when it
//! succeeds, so a rejected call neither holds it nor advances it.

use super::args::{self, js_err, JsResult};
use super::host_tensor;
use super::session::{at_js_caller, current, enter_state_owner, is_tracing};
use super::state::{hand_over, replacement, replacement_param, take_handed, Kind};
use super::tensor::{tensor_arg, wrap};
use super::tree::is_module;
use crate::rng::Rng;
use crate::tensor::alloc::check_shape;
use crate::tensor::{DType, Param, Tensor as HostTensor};
use crate::trace::check::{self, MAX_LIST};
use crate::trace::nn as rnn;
use crate::Result;
use std::cell::RefCell;
use wasm_bindgen::prelude::*;

thread_local! {
    static INIT_RNG: RefCell<Rng> = RefCell::new(Rng::new(0));
}

/// Seeds the generator that initialises new modules' parameters (a whole number from 0
/// to 2^53 - 1).
#[wasm_bindgen(js_name = manualSeed)]
pub fn manual_seed(#[wasm_bindgen(unchecked_param_type = "number")] seed: JsValue) -> JsResult<()> {
    let seed = args::whole(&seed, "manualSeed: seed", check::MAX_SEED)?;
    INIT_RNG.with(|r| *r.borrow_mut() = Rng::new(seed));
    Ok(())
}

/// Runs an initialisation on a copy of the init generator, kept only if it succeeds: no
/// borrow is held while `f` allocates, and a failure draws nothing.
pub(super) fn with_rng<T>(f: impl FnOnce(&mut Rng) -> Result<T>) -> JsResult<T> {
    let mut rng = INIT_RNG.with(|r| r.borrow().clone());
    let out = f(&mut rng).map_err(js_err)?;
    INIT_RNG.with(|r| *r.borrow_mut() = rng);
    Ok(out)
}

type Registered = RefCell<Vec<(String, Param)>>;

/// The base class of models written in JavaScript: extend it and define `forward`.
///
/// Parameters and buffers of your own: `this.registerParameter(name, values, shape)` and
/// `this.registerBuffer(name, values, shape)` in the constructor; in `forward`,
/// `this.param(name)` / `this.buffer(name)` read them (named by the module's path) and
/// `this.updateBuffer(name, tensor)` writes a buffer in place. Registering while a trace
/// runs is the reassignment PopTorch rejects, and an error with PopTorch's message.
#[wasm_bindgen]
pub struct Module {
    params: Registered,
    buffers: Registered,
    /// This module's number (`_stateKey`): a trace files it with the module's path, so that
    /// its state is named by its own path also when another module's `forward` reads it
    /// (PyTorch's `F.linear(x, self.fc.weight)` in the parent).
    key: u32,
}

thread_local! {
    static MODULES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn next_key() -> u32 {
    MODULES.with(|c| {
        let k = c.get().wrapping_add(1);
        c.set(k);
        k
    })
}

impl Default for Module {
    fn default() -> Module {
        Module { params: Registered::default(), buffers: Registered::default(), key: next_key() }
    }
}

/// The tensor of `values` (row-major numbers) and `shape` for `what`: the shape checked
/// against the tensor limits before the values are read.
pub(super) fn host_tensor(values: &JsValue, shape: &JsValue, what: &str) -> JsResult<HostTensor> {
    let dims = args::shape(shape, &format!("{what}: shape"))?;
    let dims = check_shape(what, &dims, DType::Float32).map_err(js_err)?;
    let n = dims.iter().product();
    let data = args::f32_values(values, &format!("{what}: values"), n)?;
    HostTensor::from_f32(&dims, data).map_err(|e| args::error(&format!("{what}: {e}")))
}

fn register(
    list: &Registered,
    kind: &str,
    name: JsValue,
    values: JsValue,
    shape: JsValue,
    dtype: JsValue,
) -> JsResult<()> {
    let name = args::name(&name, &format!("{kind} name"))?;
    if name.contains('.') {
        return Err(args::error(&format!("{kind} name '{name}' must contain no '.' (dots join module paths)")));
    }
    if is_tracing() {
        // Named under the module whose forward is running (where `this.register…` is called).
        let scope = current()?.current_scope();
        let full = if scope.is_empty() { name.clone() } else { format!("{scope}.{name}") };
        return Err(js_err(crate::poptorch::model::state_reassigned(kind == "buffer", &full, &name)));
    }
    let what = format!("{kind} '{name}'");
    let t = if args::is_absent(&dtype) {
        host_tensor(&values, &shape, &what)?
    } else {
        let spec = js_sys::Object::new();
        for (k, v) in [("shape", &shape), ("data", &values), ("dtype", &dtype)] {
            js_sys::Reflect::set(&spec, &JsValue::from_str(k), v)?;
        }
        super::host_tensor::from_js(&spec, &what)?
    };
    let mut list = list.borrow_mut();
    list.retain(|(n, _)| *n != name);
    list.push((name, Param::from_tensor(t)));
    Ok(())
}

fn lookup(list: &Registered, kind: &str, name: &JsValue) -> JsResult<(String, Param)> {
    let name = args::string(name, &format!("{kind} name"), check::MAX_NAME_BYTES)?;
    let found = list.borrow().iter().find(|(n, _)| *n == name).map(|(_, t)| t.clone());
    match found {
        Some(t) => Ok((name, t)),
        None => Err(args::error(&format!("no {kind} named {name:?} is registered on this module"))),
    }
}

#[wasm_bindgen]
impl Module {
    #[wasm_bindgen(constructor)]
    pub fn new() -> Module {
        Module::default()
    }
    /// Subclasses override this.
    pub fn forward(&self) -> JsResult<JsValue> {
        Err(args::error("Module.forward is not defined: a subclass of Module must define forward(...)"))
    }
    /// Adds a trainable parameter with initial `values` (row-major numbers, or a Float32Array)
    /// of `shape`. The name: 1 to 256 bytes, no '.', no control characters.
    #[wasm_bindgen(js_name = registerParameter)]
    pub fn register_parameter(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number[] | Float32Array")] values: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    ) -> JsResult<()> {
        register(&self.params, "parameter", name, values, shape, JsValue::UNDEFINED)
    }
    /// Adds a persistent buffer with initial `values` (row-major) of `shape`, of `dtype`
    /// ("float32" unless given; "float16", "int32" — a counter such as BatchNorm's
    /// `num_batches_tracked` — or "bool").
    #[wasm_bindgen(js_name = registerBuffer)]
    pub fn register_buffer(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number[] | Float32Array")] values: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "string")] dtype: JsValue,
    ) -> JsResult<()> {
        register(&self.buffers, "buffer", name, values, shape, dtype)
    }
    /// The parameter `name` in the running trace.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn param(&self, #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue) -> JsResult<JsValue> {
        let (name, t) = lookup(&self.params, "parameter", &name)?;
        let _own = enter_state_owner(self.key);
        current()?.param(&name, &t).map_err(js_err).and_then(wrap)
    }
    /// The buffer `name` in the running trace.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn buffer(&self, #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue) -> JsResult<JsValue> {
        let (name, t) = lookup(&self.buffers, "buffer", &name)?;
        let _own = enter_state_owner(self.key);
        current()?.buffer(&name, &t).map_err(js_err).and_then(wrap)
    }
    /// Writes `value` into buffer `name` in place (PyTorch `buf.copy_(value)`).
    #[wasm_bindgen(js_name = updateBuffer)]
    pub fn update_buffer(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] value: JsValue,
    ) -> JsResult<()> {
        let (name, _) = lookup(&self.buffers, "buffer", &name)?;
        let v = tensor_arg(&value, "updateBuffer: value")?;
        let tr = current()?;
        let _own = enter_state_owner(self.key);
        at_js_caller(&tr, || tr.buffer_update(&name, &v)).map_err(js_err)
    }
    /// A new base holding this one's registered parameters and buffers (the same values):
    /// what a deep copy of a module extending this class starts from (`nn.GroupAddRev`
    /// copies its first group so).
    #[wasm_bindgen(js_name = _copyBase)]
    pub fn copy_base(&self) -> Module {
        Module {
            params: RefCell::new(self.params.borrow().clone()),
            buffers: RefCell::new(self.buffers.borrow().clone()),
            key: next_key(),
        }
    }
    /// This module's number, by which a trace finds its path (see `session::add_module`).
    #[wasm_bindgen(js_name = _stateKey)]
    pub fn state_key(&self) -> u32 {
        self.key
    }
    /// The names of this module's own parameters or buffers (`kind`: "parameter" or
    /// "buffer"); see `state.rs`.
    #[wasm_bindgen(js_name = _stateNames)]
    pub fn state_names(&self, kind: JsValue) -> JsResult<Vec<String>> {
        let list = self.list(Kind::parse(&kind, "_stateNames: kind")?);
        let names = list.borrow().iter().map(|(n, _)| n.clone()).collect();
        Ok(names)
    }
    /// The value of one of this module's own parameters or buffers, as a host tensor.
    #[wasm_bindgen(js_name = _getState)]
    pub fn get_state(&self, kind: JsValue, name: JsValue) -> JsResult<JsValue> {
        let kind = Kind::parse(&kind, "_getState: kind")?;
        let (_, t) = lookup(self.list(kind), kind.as_str(), &name)?;
        host_tensor::to_js(t.value().map_err(js_err)?.as_ref())
    }
    /// Hands one of this module's own parameters or buffers to the caller in Rust (its
    /// shape and dtype, and its value only if made), without materialising it; see
    /// `state::own_param`.
    #[wasm_bindgen(js_name = _stateParam)]
    pub fn state_param(&self, kind: JsValue, name: JsValue) -> JsResult<()> {
        let kind = Kind::parse(&kind, "_stateParam: kind")?;
        let (_, p) = lookup(self.list(kind), kind.as_str(), &name)?;
        hand_over(p);
        Ok(())
    }
    /// Replaces one of this module's own parameters or buffers with the one the caller in
    /// Rust handed over (`state::set_own_param`), checked as `_setState` checks a value.
    #[wasm_bindgen(js_name = _setStateParam)]
    pub fn set_state_param(&self, kind: JsValue, name: JsValue, any_dtype: JsValue) -> JsResult<()> {
        let kind = Kind::parse(&kind, "_setStateParam: kind")?;
        let any_dtype = args::opt_bool(&any_dtype, "_setStateParam: any_dtype", false)?;
        let new = take_handed("_setStateParam")?;
        let list = self.list(kind);
        let (name, old) = lookup(list, kind.as_str(), &name)?;
        let p = replacement_param(kind, &name, &old, new, any_dtype)?;
        no_trace(kind, &name)?;
        for slot in list.borrow_mut().iter_mut().filter(|(n, _)| *n == name) {
            slot.1 = p.clone();
        }
        Ok(())
    }
    /// Replaces the value of one of this module's own parameters or buffers (same shape, and
    /// same dtype unless `any_dtype`; not while a trace runs).
    #[wasm_bindgen(js_name = _setState)]
    pub fn set_state(&self, kind: JsValue, name: JsValue, value: JsValue, any_dtype: JsValue) -> JsResult<()> {
        let kind = Kind::parse(&kind, "_setState: kind")?;
        let any_dtype = args::opt_bool(&any_dtype, "_setState: any_dtype", false)?;
        let list = self.list(kind);
        let (name, old) = lookup(list, kind.as_str(), &name)?;
        let t = host_tensor::from_js(&value, &format!("the new value of {} '{name}'", kind.as_str()))?;
        let t = replacement(kind, &name, &old, t, any_dtype)?;
        no_trace(kind, &name)?;
        let p = Param::from_tensor(t);
        for slot in list.borrow_mut().iter_mut().filter(|(n, _)| *n == name) {
            slot.1 = p.clone();
        }
        Ok(())
    }
}

impl Module {
    fn list(&self, kind: Kind) -> &Registered {
        match kind {
            Kind::Parameter => &self.params,
            Kind::Buffer => &self.buffers,
        }
    }
}

/// Module state changes only between traces (inside one it would be a reassignment).
fn no_trace(kind: Kind, name: &str) -> JsResult<()> {
    if is_tracing() {
        return Err(args::error(&format!(
            "{} '{name}' cannot be replaced while a trace runs: PopTorch does not allow replacing a parameter or \
             buffer in forward",
            kind.as_str()
        )));
    }
    Ok(())
}

/// `forward` of a Rust module on JS arguments (Tensors or SparseTensors of the running
/// trace; `undefined` at the end left out), recorded through the core's `Module` trait.
pub(super) fn rust_forward(module: &dyn rnn::Module, class: &str, values: &[JsValue]) -> JsResult<JsValue> {
    let a = super::sparse::module_args(values, class)?;
    let tr = current()?;
    at_js_caller(&tr, || module.forward_args(&tr, &a)).map_err(js_err).and_then(wrap)
}

/// `_stateNames` of a Rust module: its parameters or buffers with those of its Rust
/// submodules, by dotted name (`lin_l.weight`: JS sees no Rust submodule).
pub(super) fn rust_state_names(module: &dyn rnn::Module, kind: &JsValue) -> JsResult<Vec<String>> {
    Ok(match Kind::parse(kind, "_stateNames: kind")? {
        Kind::Parameter => module.named_parameters().into_iter().map(|(n, _)| n).collect(),
        Kind::Buffer => module.named_buffers().into_iter().map(|(n, _)| n).collect(),
    })
}

/// `param(name)` of a Rust module in a trace: its parameter `name` as a traced Tensor, under
/// the current scope (the module's own, when the trace found it in the model).
pub(super) fn rust_param(module: &dyn rnn::Module, class: &str, name: &JsValue) -> JsResult<JsValue> {
    let name = args::string(name, &format!("{class}.param: name"), check::MAX_NAME_BYTES)?;
    let params = module.named_parameters();
    let Some((_, p)) = params.iter().find(|(n, _)| *n == name) else {
        let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
        return Err(args::error(&format!("{class} has no parameter {name:?} (its parameters: {})", names.join(", "))));
    };
    let tr = current()?;
    let v = at_js_caller(&tr, || tr.param(&name, p.clone())).map_err(js_err)?;
    wrap(v)
}

/// `_getState` of a Rust module: one of its parameters (dotted name), as a host tensor.
pub(super) fn rust_get_state(
    module: &dyn rnn::Module,
    class: &str,
    kind: &JsValue,
    name: &JsValue,
) -> JsResult<JsValue> {
    let kind = Kind::parse(kind, "_getState: kind")?;
    let name = args::string(name, "_getState: name", check::MAX_NAME_BYTES)?;
    let params = if kind == Kind::Parameter { module.named_parameters() } else { module.named_buffers() };
    match params.iter().find(|(n, _)| *n == name) {
        Some((_, t)) => host_tensor::to_js(t.value().map_err(js_err)?.as_ref()),
        None => Err(args::error(&format!("{class} has no {} named {name:?}", kind.as_str()))),
    }
}

/// `_stateParam` of a Rust module: hands one of its parameters to the caller in Rust.
pub(super) fn rust_state_param(module: &dyn rnn::Module, class: &str, kind: &JsValue, name: &JsValue) -> JsResult<()> {
    let kind = Kind::parse(kind, "_stateParam: kind")?;
    let name = args::string(name, "_stateParam: name", check::MAX_NAME_BYTES)?;
    let state = match kind {
        Kind::Parameter => module.named_parameters(),
        Kind::Buffer => module.named_buffers(),
    };
    match state.into_iter().find(|(n, _)| *n == name) {
        Some((_, p)) => {
            hand_over(p);
            Ok(())
        }
        None => Err(args::error(&format!("{class} has no {} named {name:?}", kind.as_str()))),
    }
}

/// `_setStateParam` of a Rust module: replaces one of its parameters with the one handed
/// over (see `rust_set_state`).
pub(super) fn rust_set_state_param(
    module: &RefCell<dyn rnn::Module>,
    class: &str,
    kind: &JsValue,
    name: &JsValue,
    any_dtype: &JsValue,
) -> JsResult<()> {
    let kind = Kind::parse(kind, "_setStateParam: kind")?;
    let any_dtype = args::opt_bool(any_dtype, "_setStateParam: any_dtype", false)?;
    let name = args::string(name, "_setStateParam: name", check::MAX_NAME_BYTES)?;
    let new = take_handed("_setStateParam")?;
    no_trace(kind, &name)?;
    let mut inner = module.try_borrow_mut().map_err(|_| args::error(&format!("{class} is in use")))?;
    let mut result = Err(args::error(&format!("{class} has no {} named {name:?}", kind.as_str())));
    let mut value = Some(new);
    let mut visit = |n: String, slot: &mut Param| {
        if n == name {
            if let Some(v) = value.take() {
                result = replacement_param(kind, &name, slot, v, any_dtype).map(|p| *slot = p);
            }
        }
    };
    match kind {
        Kind::Parameter => inner.for_each_parameter_mut(&mut visit),
        Kind::Buffer => inner.for_each_buffer_mut(&mut visit),
    }
    result
}

/// `_setState` of a Rust module: replaces one of its own parameters (same shape, and same
/// dtype unless `any_dtype`; not while a trace runs).
pub(super) fn rust_set_state(
    module: &RefCell<dyn rnn::Module>,
    class: &str,
    kind: &JsValue,
    name: &JsValue,
    value: &JsValue,
    any_dtype: &JsValue,
) -> JsResult<()> {
    let kind = Kind::parse(kind, "_setState: kind")?;
    let any_dtype = args::opt_bool(any_dtype, "_setState: any_dtype", false)?;
    let name = args::string(name, "_setState: name", check::MAX_NAME_BYTES)?;
    let t = host_tensor::from_js(value, &format!("the new value of {} '{name}'", kind.as_str()))?;
    no_trace(kind, &name)?;
    let mut inner = module.try_borrow_mut().map_err(|_| args::error(&format!("{class} is in use")))?;
    let mut result = Err(args::error(&format!("{class} has no {} named {name:?}", kind.as_str())));
    let mut value = Some(t);
    let mut visit = |n: String, slot: &mut Param| {
        if n == name {
            if let Some(v) = value.take() {
                result = replacement(kind, &name, slot, v, any_dtype).map(|t| *slot = Param::from_tensor(t));
            }
        }
    };
    match kind {
        Kind::Parameter => inner.for_each_parameter_mut(&mut visit),
        Kind::Buffer => inner.for_each_buffer_mut(&mut visit),
    }
    result
}

/// A copy of a Rust module with fresh parameters, as PyG's `copy.deepcopy(m)` then
/// `m.reset_parameters()` makes (`nn.GroupAddRev` copies its first group so).
pub(super) trait FreshCopy: Sized {
    fn fresh_copy(&self) -> JsResult<Self>;
}

impl FreshCopy for rnn::Linear {
    fn fresh_copy(&self) -> JsResult<Self> {
        with_rng(|r| rnn::Linear::new(self.in_features, self.out_features, self.bias.is_some(), r))
    }
}
impl FreshCopy for rnn::LayerNorm {
    fn fresh_copy(&self) -> JsResult<Self> {
        let mut m = rnn::LayerNorm::try_new(self.weight.numel()).map_err(js_err)?;
        m.eps = self.eps;
        Ok(m)
    }
}
impl FreshCopy for rnn::Embedding {
    fn fresh_copy(&self) -> JsResult<Self> {
        let s = self.weight.shape();
        with_rng(|r| rnn::Embedding::try_new(s[0], s[1], r))
    }
}
impl FreshCopy for rnn::SerializedEmbedding {
    fn fresh_copy(&self) -> JsResult<Self> {
        let s = self.splits[0].weight.shape();
        let factor = self.splits.len();
        with_rng(|r| rnn::SerializedEmbedding::try_new(s[0] * factor, s[1], factor, r))
    }
}
impl FreshCopy for rnn::Dropout {
    fn fresh_copy(&self) -> JsResult<Self> {
        Ok(rnn::Dropout { p: self.p })
    }
}
impl FreshCopy for rnn::ReLU {
    fn fresh_copy(&self) -> JsResult<Self> {
        Ok(rnn::ReLU)
    }
}
impl FreshCopy for rnn::GELU {
    fn fresh_copy(&self) -> JsResult<Self> {
        Ok(rnn::GELU)
    }
}

/// A JS class over a Rust module of `crate::trace::nn` or `crate::gnn::nn` (one `Module`
/// trait): `forward(x, ...rest)` on Tensors or SparseTensors, and the state protocol of
/// `state.rs`. The built-in layers here and the GNN layers (`gnn_nn.rs`) are all made by it.
macro_rules! rust_module {
    ($name:ident, $inner:ty, $sig:literal, $x:ident $(, $rest:ident)*) => {
        #[wasm_bindgen]
        pub struct $name {
            inner: RefCell<$inner>,
        }
        #[wasm_bindgen]
        impl $name {
            #[doc = concat!("Records the module on `", $sig, "` in the running trace.")]
            #[wasm_bindgen(unchecked_return_type = "Tensor")]
            pub fn forward(
                &self,
                #[wasm_bindgen(unchecked_param_type = "Tensor | SparseTensor")] $x: JsValue,
                $(#[wasm_bindgen(unchecked_optional_param_type = "Tensor | SparseTensor")] $rest: JsValue,)*
            ) -> JsResult<JsValue> {
                // Its ops are recorded under its path in the running trace (the trace knows
                // it by `_moduleKey`, and wraps no Proxy around this forward).
                let _scope = $crate::api::session::enter_rust_module(self.module_key());
                let inner = self.inner.borrow();
                $crate::api::modules::rust_forward(&*inner, stringify!($name), &[$x $(, $rest)*])
            }
            /// `module.param(name)` inside a trace: this module's parameter `name` (dotted, as
            /// `namedParameters` names it) as a Tensor of the running trace, recorded under
            /// the module's path. Another module may read it (PyTorch's
            /// `F.linear(x, self.embed.weight)`): it is one parameter wherever it is read,
            /// with one gradient, the sum of its uses'.
            #[wasm_bindgen(unchecked_return_type = "Tensor")]
            pub fn param(&self, #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue) -> JsResult<JsValue> {
                let _scope = $crate::api::session::enter_rust_module(self.module_key());
                $crate::api::modules::rust_param(&*self.inner.borrow(), stringify!($name), &name)
            }
            /// The key a trace knows this module by: the address of its state, fixed for its
            /// life (a leaf module's ops are recorded under its path without a Proxy).
            #[wasm_bindgen(js_name = _moduleKey)]
            pub fn module_key(&self) -> u32 {
                &self.inner as *const _ as usize as u32
            }
            /// The names of its own parameters or buffers.
            #[wasm_bindgen(js_name = _stateNames)]
            pub fn state_names(&self, kind: JsValue) -> JsResult<Vec<String>> {
                $crate::api::modules::rust_state_names(&*self.inner.borrow(), &kind)
            }
            /// One of its parameters or buffers, as a host tensor.
            #[wasm_bindgen(js_name = _getState)]
            pub fn get_state(&self, kind: JsValue, name: JsValue) -> JsResult<JsValue> {
                $crate::api::modules::rust_get_state(&*self.inner.borrow(), stringify!($name), &kind, &name)
            }
            /// Replaces one of its parameters or buffers (same shape, and same dtype unless `any_dtype`;
            /// not while a trace runs).
            #[wasm_bindgen(js_name = _setState)]
            pub fn set_state(&self, kind: JsValue, name: JsValue, value: JsValue, any_dtype: JsValue) -> JsResult<()> {
                $crate::api::modules::rust_set_state(&self.inner, stringify!($name), &kind, &name, &value, &any_dtype)
            }
            /// Hands one of its parameters to the caller in Rust (see `state::own_param`).
            #[wasm_bindgen(js_name = _stateParam)]
            pub fn state_param(&self, kind: JsValue, name: JsValue) -> JsResult<()> {
                $crate::api::modules::rust_state_param(&*self.inner.borrow(), stringify!($name), &kind, &name)
            }
            /// Replaces one of its parameters with the one the caller in Rust handed over.
            #[wasm_bindgen(js_name = _setStateParam)]
            pub fn set_state_param(&self, kind: JsValue, name: JsValue, any_dtype: JsValue) -> JsResult<()> {
                $crate::api::modules::rust_set_state_param(&self.inner, stringify!($name), &kind, &name, &any_dtype)
            }
            /// A copy with fresh parameters (PyG's `deepcopy` then `reset_parameters()`).
            #[wasm_bindgen(js_name = _resetCopy)]
            pub fn reset_copy(&self) -> JsResult<$name> {
                let m = $crate::api::modules::FreshCopy::fresh_copy(&*self.inner.borrow())?;
                Ok($name { inner: RefCell::new(m) })
            }
        }
    };
}
pub(super) use rust_module;

rust_module!(Linear, rnn::Linear, "x (dense, or a SparseTensor: sparse features)", x);
rust_module!(LayerNorm, rnn::LayerNorm, "x", x);
rust_module!(Dropout, rnn::Dropout, "x", x);
rust_module!(ReLU, rnn::ReLU, "x", x);
rust_module!(GELU, rnn::GELU, "x", x);
rust_module!(Embedding, rnn::Embedding, "x (int32 indices)", x);
rust_module!(SerializedEmbedding, rnn::SerializedEmbedding, "x (int32 indices)", x);

#[wasm_bindgen]
impl Linear {
    /// `Linear(in_features, out_features, bias = true)`, initialised as PyTorch: whole
    /// sizes from 1, the weight `[out, in]` within the tensor limits (`limits()`).
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number")] in_features: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] out_features: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] bias: JsValue,
    ) -> JsResult<Linear> {
        let i = args::positive_size(&in_features, "Linear: in_features")?;
        let o = args::positive_size(&out_features, "Linear: out_features")?;
        let bias = args::opt_bool(&bias, "Linear: bias", true)?;
        Ok(Linear { inner: RefCell::new(with_rng(|r| rnn::Linear::new(i, o, bias, r))?) })
    }
}

#[wasm_bindgen]
impl LayerNorm {
    /// `LayerNorm(size, { eps = 1e-5 })` over the last dim: a whole size from 1; `eps`
    /// (PyTorch's, BERT's 1e-12) a finite positive number.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number")] size: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ eps?: number }")] options: JsValue,
    ) -> JsResult<LayerNorm> {
        let n = args::positive_size(&size, "LayerNorm: size")?;
        let mut m = rnn::LayerNorm::try_new(n).map_err(js_err)?;
        if !args::is_absent(&options) {
            args::object(&options, "LayerNorm: options")?;
            for (key, val) in args::entries(&options, "LayerNorm: options", 16)? {
                match key.as_string().as_deref() {
                    Some("eps") if args::is_absent(&val) => {}
                    Some("eps") => {
                        let eps = args::number(&val, "LayerNorm: options.eps")?;
                        if !(eps.is_finite() && (eps as f32) > 0.0) {
                            return Err(args::range_error(&format!(
                                "LayerNorm: options.eps must be a positive number, got {}",
                                check::js_number(eps)
                            )));
                        }
                        m.eps = eps as f32;
                    }
                    _ => {
                        return Err(args::error(&format!(
                            "LayerNorm: options has no option {:?}: the option is eps",
                            key.as_string().unwrap_or_default()
                        )))
                    }
                }
            }
        }
        Ok(LayerNorm { inner: RefCell::new(m) })
    }
}

#[wasm_bindgen]
impl Dropout {
    /// `Dropout(p)`, `0 <= p < 1`.
    #[wasm_bindgen(constructor)]
    pub fn new(#[wasm_bindgen(unchecked_param_type = "number")] p: JsValue) -> JsResult<Dropout> {
        let p = args::number(&p, "Dropout: p")?;
        if !(0.0..1.0).contains(&p) {
            return Err(args::range_error(&format!("Dropout: p must be in [0, 1), got {}", check::js_number(p))));
        }
        Ok(Dropout { inner: RefCell::new(rnn::Dropout { p: p as f32 }) })
    }
}

impl Default for ReLU {
    fn default() -> Self {
        ReLU::new()
    }
}

impl Default for GELU {
    fn default() -> Self {
        GELU::new()
    }
}

#[wasm_bindgen]
impl ReLU {
    #[wasm_bindgen(constructor)]
    pub fn new() -> ReLU {
        ReLU { inner: RefCell::new(rnn::ReLU) }
    }
}

#[wasm_bindgen]
impl GELU {
    #[wasm_bindgen(constructor)]
    pub fn new() -> GELU {
        GELU { inner: RefCell::new(rnn::GELU) }
    }
}

#[wasm_bindgen]
impl Embedding {
    /// `Embedding(num_embeddings, embedding_dim)`, weights N(0, 1): whole sizes from 1, the
    /// weight within the tensor limits.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number")] num_embeddings: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] embedding_dim: JsValue,
    ) -> JsResult<Embedding> {
        let n = args::positive_size(&num_embeddings, "Embedding: num_embeddings")?;
        let d = args::positive_size(&embedding_dim, "Embedding: embedding_dim")?;
        Ok(Embedding { inner: RefCell::new(with_rng(|r| rnn::Embedding::try_new(n, d, r))?) })
    }
}

#[wasm_bindgen]
impl SerializedEmbedding {
    /// `SerializedEmbedding(num_embeddings, embedding_dim, serialization_factor)`: the lookup
    /// in `serialization_factor` steps over tables of `num_embeddings / factor` rows
    /// (`split_embeddings.{i}.weight`, N(0, 1)), as Graphcore's BERT; the factor must divide
    /// `num_embeddings`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number")] num_embeddings: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] embedding_dim: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] serialization_factor: JsValue,
    ) -> JsResult<SerializedEmbedding> {
        let n = args::positive_size(&num_embeddings, "SerializedEmbedding: num_embeddings")?;
        let d = args::positive_size(&embedding_dim, "SerializedEmbedding: embedding_dim")?;
        let f = args::positive_size(&serialization_factor, "SerializedEmbedding: serialization_factor")?;
        Ok(SerializedEmbedding { inner: RefCell::new(with_rng(|r| rnn::SerializedEmbedding::try_new(n, d, f, r))?) })
    }

    /// The serialised form of an `nn.Embedding` (its rows split into the tables, copied).
    #[wasm_bindgen(js_name = fromEmbedding)]
    pub fn from_embedding(
        embedding: &Embedding,
        #[wasm_bindgen(unchecked_param_type = "number")] serialization_factor: JsValue,
    ) -> JsResult<SerializedEmbedding> {
        super::state::flush()?;
        let f = args::positive_size(&serialization_factor, "SerializedEmbedding.fromEmbedding: serialization_factor")?;
        let m = rnn::SerializedEmbedding::from_embedding(&embedding.inner.borrow(), f).map_err(js_err)?;
        Ok(SerializedEmbedding { inner: RefCell::new(m) })
    }
}
/// The items of a container: at most 65536 modules.
fn module_items(items: &JsValue, what: &str) -> JsResult<Vec<JsValue>> {
    let list = args::list(items, &format!("{what}: modules"), MAX_LIST)?;
    for (i, m) in list.iter().enumerate() {
        if !is_module(m)? {
            return Err(args::type_error(&format!(
                "{what}: modules[{i}] must be a module (an object with a forward method), got {}",
                args::describe(m)
            )));
        }
    }
    Ok(list)
}

/// Modules called in order, named `0`, `1`, … (PyTorch `Sequential`).
#[wasm_bindgen]
pub struct Sequential {
    items: Vec<JsValue>,
}

#[wasm_bindgen]
impl Sequential {
    /// `Sequential([m0, m1, …])`: at most 65536 modules.
    #[wasm_bindgen(constructor)]
    pub fn new(#[wasm_bindgen(unchecked_param_type = "object[]")] modules: JsValue) -> JsResult<Sequential> {
        Ok(Sequential { items: module_items(&modules, "Sequential")? })
    }
    /// Calls each module on the previous one's output.
    pub fn forward(&self, x: JsValue) -> JsResult<JsValue> {
        let mut h = x;
        for m in &self.items {
            let f = args::function(&args::get(m, "forward")?, "a Sequential item's forward")?;
            h = f.call1(m, &h)?;
        }
        Ok(h)
    }
    /// The submodules, for the tracer's module walk.
    #[wasm_bindgen(js_name = _children)]
    pub fn children(&self) -> Vec<JsValue> {
        self.items.clone()
    }
}

/// A list of modules indexed by the parent (PyTorch `ModuleList`), named `0`, `1`, ….
#[wasm_bindgen]
pub struct ModuleList {
    items: Vec<JsValue>,
}

#[wasm_bindgen]
impl ModuleList {
    /// `ModuleList([m0, m1, …])`: at most 65536 modules.
    #[wasm_bindgen(constructor)]
    pub fn new(#[wasm_bindgen(unchecked_param_type = "object[]")] modules: JsValue) -> JsResult<ModuleList> {
        Ok(ModuleList { items: module_items(&modules, "ModuleList")? })
    }
    /// The module at `index` (a whole number below `length`).
    pub fn get(&self, #[wasm_bindgen(unchecked_param_type = "number")] index: JsValue) -> JsResult<JsValue> {
        let n = self.items.len();
        let i = args::count(&index, "ModuleList.get: index", u32::MAX as usize)?;
        self.items
            .get(i)
            .cloned()
            .ok_or_else(|| args::range_error(&format!("ModuleList.get: index {i} is out of range (length {n})")))
    }
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> usize {
        self.items.len()
    }
    pub fn forward(&self) -> JsResult<JsValue> {
        Err(args::error("ModuleList is not callable: index its modules with get(i)"))
    }
    #[wasm_bindgen(js_name = _children)]
    pub fn children(&self) -> Vec<JsValue> {
        self.items.clone()
    }
}
