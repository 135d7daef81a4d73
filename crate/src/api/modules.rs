//! The modules JavaScript models are built from: `Module` (the base class to extend), the
//! built-in layers (Linear, LayerNorm, Dropout, ReLU, GELU, Embedding), `Sequential`,
//! `ModuleList`, and `manualSeed` for their initial parameters.

use super::js_err;
use super::nn::{at_js_caller, current, CURRENT};
use super::tensor::{op, var, wrap, Tensor};
use crate::rng::Rng;
use crate::trace::nn as rnn;
use crate::trace::nn::Module as _;
use js_sys::{Function, Reflect};
use std::cell::RefCell;
use wasm_bindgen::prelude::*;

thread_local! {
    static INIT_RNG: RefCell<Rng> = RefCell::new(Rng::new(0));
}

/// Seeds the generator that initialises new modules' parameters.
#[wasm_bindgen(js_name = manualSeed)]
pub fn manual_seed(seed: u32) {
    INIT_RNG.with(|r| *r.borrow_mut() = Rng::new(seed as u64));
}

fn with_rng<T>(f: impl FnOnce(&mut Rng) -> T) -> T {
    INIT_RNG.with(|r| f(&mut r.borrow_mut()))
}

/// The base class of models written in JavaScript: extend it and define `forward`.
///
/// Parameters and buffers of your own: `this.registerParameter(name, values, shape)` and
/// `this.registerBuffer(name, values, shape)` in the constructor; in `forward`,
/// `this.param(name)` / `this.buffer(name)` read them (named by the module's path) and
/// `this.updateBuffer(name, tensor)` writes a buffer in place. Registering again while a
/// trace runs is the reassignment PopTorch rejects, and an error.
#[wasm_bindgen]
#[derive(Default)]
pub struct Module {
    params: Vec<(String, std::rc::Rc<crate::tensor::Tensor>)>,
    buffers: Vec<(String, std::rc::Rc<crate::tensor::Tensor>)>,
}

pub(super) fn host_tensor(values: &[f32], shape: &[usize], what: &str) -> Result<crate::tensor::Tensor, JsError> {
    crate::tensor::Tensor::from_f32(shape, values.to_vec()).map_err(|e| JsError::new(&format!("{what}: {e}")))
}

fn register(
    list: &mut Vec<(String, std::rc::Rc<crate::tensor::Tensor>)>,
    kind: &str,
    name: &str,
    t: crate::tensor::Tensor,
) -> Result<(), JsError> {
    if CURRENT.with(|c| c.borrow().is_some()) {
        return Err(JsError::new(&format!(
            "{kind} '{name}' was reassigned during the trace: PopTorch does not allow replacing a parameter or \
             buffer; update a buffer in place with updateBuffer"
        )));
    }
    if name.is_empty() || name.contains('.') {
        return Err(JsError::new(&format!("{kind} name '{name}' must be non-empty and contain no '.'")));
    }
    list.retain(|(n, _)| n != name);
    list.push((name.to_string(), std::rc::Rc::new(t)));
    Ok(())
}

fn lookup<'a>(
    list: &'a [(String, std::rc::Rc<crate::tensor::Tensor>)],
    kind: &str,
    name: &str,
) -> Result<&'a std::rc::Rc<crate::tensor::Tensor>, JsError> {
    list.iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| t)
        .ok_or_else(|| JsError::new(&format!("no {kind} named '{name}' is registered on this module")))
}

#[wasm_bindgen]
impl Module {
    #[wasm_bindgen(constructor)]
    pub fn new() -> Module {
        Module::default()
    }
    /// Subclasses override this.
    pub fn forward(&self) -> Result<Tensor, JsError> {
        Err(JsError::new("Module.forward is not defined: a subclass of Module must define forward(...)"))
    }
    /// Adds a trainable parameter with initial `values` (row-major) of `shape`.
    #[wasm_bindgen(js_name = registerParameter)]
    pub fn register_parameter(&mut self, name: &str, values: Vec<f32>, shape: Vec<usize>) -> Result<(), JsError> {
        let t = host_tensor(&values, &shape, &format!("parameter '{name}'"))?;
        register(&mut self.params, "parameter", name, t)
    }
    /// Adds a persistent buffer with initial `values` (row-major) of `shape`.
    #[wasm_bindgen(js_name = registerBuffer)]
    pub fn register_buffer(&mut self, name: &str, values: Vec<f32>, shape: Vec<usize>) -> Result<(), JsError> {
        let t = host_tensor(&values, &shape, &format!("buffer '{name}'"))?;
        register(&mut self.buffers, "buffer", name, t)
    }
    /// The parameter `name` in the running trace.
    pub fn param(&self, name: &str) -> Result<Tensor, JsError> {
        let t = lookup(&self.params, "parameter", name)?;
        Ok(wrap(current()?.param(name, t).map_err(js_err)?))
    }
    /// The buffer `name` in the running trace.
    pub fn buffer(&self, name: &str) -> Result<Tensor, JsError> {
        let t = lookup(&self.buffers, "buffer", name)?;
        Ok(wrap(current()?.buffer(name, t).map_err(js_err)?))
    }
    /// Writes `value` into buffer `name` in place (PyTorch `buf.copy_(value)`).
    #[wasm_bindgen(js_name = updateBuffer)]
    pub fn update_buffer(&self, name: &str, value: &Tensor) -> Result<(), JsError> {
        lookup(&self.buffers, "buffer", name)?;
        let v = var(value)?;
        let tr = current()?;
        at_js_caller(&tr, || tr.buffer_update(name, &v)).map_err(js_err)
    }
}

macro_rules! builtin {
    ($name:ident, $inner:ty) => {
        #[wasm_bindgen]
        pub struct $name {
            inner: $inner,
        }
        #[wasm_bindgen]
        impl $name {
            /// Records the module on `x` in the running trace.
            pub fn forward(&self, x: &Tensor) -> Result<Tensor, JsError> {
                let tr = current()?;
                let inner = &self.inner;
                op(x, |v| inner.forward(&tr, v))
            }
        }
    };
}

builtin!(Linear, rnn::Linear);
builtin!(LayerNorm, rnn::LayerNorm);
builtin!(Dropout, rnn::Dropout);
builtin!(ReLU, rnn::ReLU);
builtin!(GELU, rnn::GELU);
builtin!(Embedding, rnn::Embedding);

#[wasm_bindgen]
impl Linear {
    /// `Linear(in, out, bias = true)`, initialised as PyTorch.
    #[wasm_bindgen(constructor)]
    pub fn new(in_features: usize, out_features: usize, bias: Option<bool>) -> Result<Linear, JsError> {
        let inner =
            with_rng(|r| rnn::Linear::new(in_features, out_features, bias.unwrap_or(true), r)).map_err(js_err)?;
        Ok(Linear { inner })
    }
}

#[wasm_bindgen]
impl LayerNorm {
    #[wasm_bindgen(constructor)]
    pub fn new(size: usize) -> LayerNorm {
        LayerNorm { inner: rnn::LayerNorm::new(size) }
    }
}

#[wasm_bindgen]
impl Dropout {
    #[wasm_bindgen(constructor)]
    pub fn new(p: f32) -> Result<Dropout, JsError> {
        if !(0.0..1.0).contains(&p) {
            return Err(JsError::new(&format!("Dropout: p must be in [0, 1), got {p}")));
        }
        Ok(Dropout { inner: rnn::Dropout { p } })
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
        ReLU { inner: rnn::ReLU }
    }
}

#[wasm_bindgen]
impl GELU {
    #[wasm_bindgen(constructor)]
    pub fn new() -> GELU {
        GELU { inner: rnn::GELU }
    }
}

#[wasm_bindgen]
impl Embedding {
    #[wasm_bindgen(constructor)]
    pub fn new(num: usize, dim: usize) -> Embedding {
        Embedding { inner: with_rng(|r| rnn::Embedding::new(num, dim, r)) }
    }
}

fn call_forward(m: &JsValue, x: &JsValue) -> Result<JsValue, JsValue> {
    let f: Function = Reflect::get(m, &"forward".into())?.dyn_into()?;
    f.call1(m, x)
}

/// Modules called in order, named `0`, `1`, … (PyTorch `Sequential`).
#[wasm_bindgen]
pub struct Sequential {
    items: Vec<JsValue>,
}

#[wasm_bindgen]
impl Sequential {
    #[wasm_bindgen(constructor)]
    pub fn new(items: Vec<JsValue>) -> Sequential {
        Sequential { items }
    }
    /// Calls each module on the previous one's output.
    pub fn forward(&self, x: JsValue) -> Result<JsValue, JsValue> {
        let mut h = x;
        for m in &self.items {
            h = call_forward(m, &h)?;
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
    #[wasm_bindgen(constructor)]
    pub fn new(items: Vec<JsValue>) -> ModuleList {
        ModuleList { items }
    }
    pub fn get(&self, i: usize) -> Result<JsValue, JsError> {
        self.items
            .get(i)
            .cloned()
            .ok_or_else(|| JsError::new(&format!("ModuleList index {i} is out of range (length {})", self.items.len())))
    }
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> usize {
        self.items.len()
    }
    pub fn forward(&self) -> Result<JsValue, JsError> {
        Err(JsError::new("ModuleList is not callable: index its modules with get(i)"))
    }
    #[wasm_bindgen(js_name = _children)]
    pub fn children(&self) -> Vec<JsValue> {
        self.items.clone()
    }
}
