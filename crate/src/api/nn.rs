//! The tracer from JavaScript: `Module` (to extend), built-in modules, `Tensor` (a tracing
//! tensor) and `trace(model, inputs, options)`.
//!
//! ```js
//! import { Module, Linear, trace } from "ipu-playground";
//! class Net extends Module {
//!   constructor() { super(); this.fc1 = new Linear(4, 8); this.fc2 = new Linear(8, 2); }
//!   forward(x) { return this.fc2.forward(this.fc1.forward(x).relu()); }
//! }
//! const { text, graph } = trace(new Net(), [{ name: "x", shape: [2, 4] }]);
//! ```
//!
//! Submodules are found by attribute name (like PyTorch's `named_modules`): any property
//! holding an object with a `forward` method, recursively, and the items of `Sequential`
//! and `ModuleList`. During the trace each submodule's `forward` is wrapped so its ops are
//! recorded under its path (`fc1`, `blocks.0.conv`); the wrappers are removed afterwards.
//! Each op records the `file:line` of the JavaScript call that made it.

use super::{js_err, to_js};
use crate::rng::Rng;
use crate::tensor::DType;
use crate::trace::nn as rnn;
use crate::trace::nn::Module as _;
use crate::trace::{concat as rconcat, Tracer, Var};
use js_sys::{Array, Function, Object, Reflect};
use serde::Serialize;
use std::cell::RefCell;
use wasm_bindgen::prelude::*;

thread_local! {
    static CURRENT: RefCell<Option<Tracer>> = const { RefCell::new(None) };
    static VARS: RefCell<Vec<Var>> = const { RefCell::new(Vec::new()) };
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

fn current() -> Result<Tracer, JsError> {
    CURRENT
        .with(|c| c.borrow().clone())
        .ok_or_else(|| JsError::new("no trace is running: call modules inside trace(model, inputs)"))
}

/// The `file:line` of the first JavaScript frame outside this package.
fn js_caller() -> Option<String> {
    // Calls through wasm and the package's glue are deep: look past V8's default 10 frames.
    let ctor = Reflect::get(&js_sys::global(), &"Error".into()).ok()?;
    let limit = Reflect::get(&ctor, &"stackTraceLimit".into()).unwrap_or(JsValue::UNDEFINED);
    let _ = Reflect::set(&ctor, &"stackTraceLimit".into(), &JsValue::from(64));
    let err = js_sys::Error::new("");
    let stack = Reflect::get(&err, &"stack".into()).ok().and_then(|s| s.as_string());
    let _ = Reflect::set(&ctor, &"stackTraceLimit".into(), &limit);
    let stack = stack?;
    for line in stack.lines().skip(1) {
        let l = line.trim();
        if l.contains("ipu_playground")
            || l.contains("wasm-function")
            || l.contains("<anonymous>")
            || l.contains("eval at")
        {
            continue;
        }
        let loc = l.rsplit_once('(').map(|(_, r)| r.trim_end_matches(')')).unwrap_or(l.trim_start_matches("at "));
        let mut parts = loc.rsplitn(3, ':');
        let (_col, line_no, file) = (parts.next()?, parts.next()?, parts.next()?);
        let file = file.rsplit('/').next().unwrap_or(file);
        return Some(format!("{file}:{line_no}"));
    }
    None
}

/// A tracing tensor: the result of an op recorded in the running trace.
#[wasm_bindgen]
pub struct Tensor {
    id: usize,
}

fn var(t: &Tensor) -> Result<Var, JsError> {
    VARS.with(|v| v.borrow().get(t.id).cloned())
        .ok_or_else(|| JsError::new("this tensor belongs to a trace that has finished"))
}

fn wrap(v: Var) -> Tensor {
    VARS.with(|vars| {
        let mut vars = vars.borrow_mut();
        vars.push(v);
        Tensor { id: vars.len() - 1 }
    })
}

/// Runs `f` with the tracer recording the JS caller as the ops' source.
fn at_js_caller<T>(tr: &Tracer, f: impl FnOnce() -> T) -> T {
    tr.set_source(js_caller());
    let r = f();
    tr.set_source(None);
    r
}

/// Records `f` on the tensor `t`, at the JS caller's line.
fn op(t: &Tensor, f: impl FnOnce(&Var) -> crate::trace::TraceResult<Var>) -> Result<Tensor, JsError> {
    let v = var(t)?;
    at_js_caller(v.tracer(), || f(&v)).map(wrap).map_err(js_err)
}

fn tensor_from(value: &JsValue, what: &str) -> Result<Var, JsError> {
    let id = Reflect::get(value, &"_id".into()).ok().and_then(|v| v.as_f64());
    match id {
        Some(id) => var(&Tensor { id: id as usize }),
        None => Err(JsError::new(&format!("{what} must be a Tensor, got {}", describe(value)))),
    }
}

fn describe(v: &JsValue) -> String {
    if v.is_undefined() {
        "undefined".into()
    } else if v.is_null() {
        "null".into()
    } else if let Some(s) = v.as_string() {
        format!("the string \"{s}\"")
    } else if let Some(n) = v.as_f64() {
        format!("the number {n}")
    } else if Array::is_array(v) {
        "an array".into()
    } else {
        "an object that is not a Tensor".into()
    }
}

fn dims(v: Option<Vec<i32>>) -> Vec<isize> {
    v.unwrap_or_default().into_iter().map(|d| d as isize).collect()
}

#[wasm_bindgen]
impl Tensor {
    /// Internal handle (used to recognise tensors passed back from JS).
    #[wasm_bindgen(getter, js_name = _id)]
    pub fn id(&self) -> usize {
        self.id
    }
    #[wasm_bindgen(getter)]
    pub fn shape(&self) -> Result<Vec<usize>, JsError> {
        Ok(var(self)?.shape().to_vec())
    }
    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> Result<String, JsError> {
        Ok(var(self)?.dtype().to_string())
    }
    pub fn add(&self, o: &Tensor) -> Result<Tensor, JsError> {
        let o = var(o)?;
        op(self, |v| v.add(&o))
    }
    pub fn sub(&self, o: &Tensor) -> Result<Tensor, JsError> {
        let o = var(o)?;
        op(self, |v| v.sub(&o))
    }
    pub fn mul(&self, o: &Tensor) -> Result<Tensor, JsError> {
        let o = var(o)?;
        op(self, |v| v.mul(&o))
    }
    pub fn div(&self, o: &Tensor) -> Result<Tensor, JsError> {
        let o = var(o)?;
        op(self, |v| v.div(&o))
    }
    pub fn pow(&self, o: &Tensor) -> Result<Tensor, JsError> {
        let o = var(o)?;
        op(self, |v| v.pow(&o))
    }
    pub fn matmul(&self, o: &Tensor) -> Result<Tensor, JsError> {
        let o = var(o)?;
        op(self, |v| v.matmul(&o))
    }
    /// `self * s` for a number `s`.
    pub fn scale(&self, s: f64) -> Result<Tensor, JsError> {
        op(self, |v| v.scale(s))
    }
    pub fn neg(&self) -> Result<Tensor, JsError> {
        op(self, Var::neg)
    }
    pub fn exp(&self) -> Result<Tensor, JsError> {
        op(self, Var::exp)
    }
    pub fn log(&self) -> Result<Tensor, JsError> {
        op(self, Var::log)
    }
    pub fn sqrt(&self) -> Result<Tensor, JsError> {
        op(self, Var::sqrt)
    }
    pub fn relu(&self) -> Result<Tensor, JsError> {
        op(self, Var::relu)
    }
    pub fn gelu(&self) -> Result<Tensor, JsError> {
        op(self, Var::gelu)
    }
    pub fn tanh(&self) -> Result<Tensor, JsError> {
        op(self, Var::tanh)
    }
    pub fn sigmoid(&self) -> Result<Tensor, JsError> {
        op(self, Var::sigmoid)
    }
    /// Sum over `dims` (all when omitted).
    pub fn sum(&self, dims_: Option<Vec<i32>>, keepdim: Option<bool>) -> Result<Tensor, JsError> {
        op(self, |v| v.sum(&dims(dims_), keepdim.unwrap_or(false)))
    }
    /// Mean over `dims` (all when omitted).
    pub fn mean(&self, dims_: Option<Vec<i32>>, keepdim: Option<bool>) -> Result<Tensor, JsError> {
        op(self, |v| v.mean(&dims(dims_), keepdim.unwrap_or(false)))
    }
    pub fn max(&self, dim: i32, keepdim: Option<bool>) -> Result<Tensor, JsError> {
        op(self, |v| v.max(dim as isize, keepdim.unwrap_or(false)))
    }
    pub fn argmax(&self, dim: i32, keepdim: Option<bool>) -> Result<Tensor, JsError> {
        op(self, |v| v.argmax(dim as isize, keepdim.unwrap_or(false)))
    }
    pub fn softmax(&self, dim: i32) -> Result<Tensor, JsError> {
        op(self, |v| v.softmax(dim as isize))
    }
    #[wasm_bindgen(js_name = logSoftmax)]
    pub fn log_softmax(&self, dim: i32) -> Result<Tensor, JsError> {
        op(self, |v| v.log_softmax(dim as isize))
    }
    /// Reshape; one entry may be -1.
    pub fn reshape(&self, shape: Vec<i32>) -> Result<Tensor, JsError> {
        let s: Vec<isize> = shape.into_iter().map(|d| d as isize).collect();
        op(self, |v| v.reshape(&s))
    }
    pub fn transpose(&self, a: i32, b: i32) -> Result<Tensor, JsError> {
        op(self, |v| v.transpose(a as isize, b as isize))
    }
    pub fn permute(&self, order: Vec<u32>) -> Result<Tensor, JsError> {
        let d: Vec<usize> = order.into_iter().map(|x| x as usize).collect();
        op(self, |v| v.permute(&d))
    }
    /// Cross-entropy of logits against int32 `target`, over rows where `mask` (bool) is set.
    #[wasm_bindgen(js_name = crossEntropy)]
    pub fn cross_entropy(&self, target: &Tensor, mask: Option<Tensor>) -> Result<Tensor, JsError> {
        let t = var(target)?;
        let m = mask.as_ref().map(var).transpose()?;
        op(self, |v| v.cross_entropy(&t, m.as_ref(), crate::ir::Reduction::Mean, None))
    }
    /// Converts to "float32", "float16", "int32" or "bool".
    pub fn cast(&self, dtype: &str) -> Result<Tensor, JsError> {
        let dt = DType::parse(dtype).map_err(js_err)?;
        op(self, |v| v.cast(dt))
    }
}

/// Concatenates tensors along `dim`.
#[wasm_bindgen]
pub fn concat(tensors: Vec<Tensor>, dim: i32) -> Result<Tensor, JsError> {
    let vars = tensors.iter().map(var).collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&Var> = vars.iter().collect();
    let first = vars.first().ok_or_else(|| JsError::new("concat of no tensors"))?;
    at_js_caller(first.tracer(), || rconcat(&refs, dim as isize)).map(wrap).map_err(js_err)
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

fn host_tensor(values: &[f32], shape: &[usize], what: &str) -> Result<crate::tensor::Tensor, JsError> {
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

/// A tensor of `values` (row-major) and `shape` captured by the model: frozen into the
/// graph as a constant `_tensor_constant<i>` (listed in the trace's `constants`).
#[wasm_bindgen]
pub fn constant(values: Vec<f32>, shape: Vec<usize>) -> Result<Tensor, JsError> {
    let t = host_tensor(&values, &shape, "constant")?;
    let tr = current()?;
    at_js_caller(&tr, || tr.constant(t)).map(wrap).map_err(js_err)
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

/// Runs `f` with ops recorded in Block `id` on `ipu` (PopTorch `poptorch.Block`).
#[wasm_bindgen]
pub fn block(id: &str, ipu: Option<usize>, f: &Function) -> Result<JsValue, JsValue> {
    let tr = current()?;
    let mut out = Ok(JsValue::UNDEFINED);
    let _ = tr.block(id, ipu, || {
        out = f.call0(&JsValue::UNDEFINED);
        Ok(())
    });
    out
}

/// Starts Block `id` on `ipu` for every op recorded from now on (PopTorch `BeginBlock`).
#[wasm_bindgen(js_name = beginBlock)]
pub fn begin_block(id: &str, ipu: Option<usize>) -> Result<(), JsError> {
    current()?.begin_block(id, ipu);
    Ok(())
}

fn is_module(v: &JsValue) -> bool {
    v.is_object()
        && !Array::is_array(v)
        && Reflect::get(v, &"forward".into()).map(|f| f.is_function()).unwrap_or(false)
        && Reflect::get(v, &"_id".into()).map(|i| i.is_undefined()).unwrap_or(true)
}

/// Every submodule below `obj`, by dotted attribute path.
fn walk(obj: &JsValue, prefix: &str, seen: &js_sys::Set, out: &mut Vec<(String, JsValue)>) -> Result<(), JsValue> {
    let mut children: Vec<(String, JsValue)> = Vec::new();
    if let Ok(f) = Reflect::get(obj, &"_children".into()) {
        if let Some(f) = f.dyn_ref::<Function>() {
            let items: Array = f.call0(obj)?.dyn_into()?;
            for (i, v) in items.iter().enumerate() {
                children.push((i.to_string(), v));
            }
        }
    }
    let o: &Object = obj.unchecked_ref();
    for key in Object::keys(o).iter() {
        let k = key.as_string().unwrap_or_default();
        if k.starts_with("__") {
            continue;
        }
        children.push((k, Reflect::get(obj, &key)?));
    }
    for (name, v) in children {
        if !is_module(&v) || seen.has(&v) {
            continue;
        }
        seen.add(&v);
        let path = if prefix.is_empty() { name } else { format!("{prefix}.{name}") };
        out.push((path.clone(), v.clone()));
        walk(&v, &path, seen, out)?;
    }
    Ok(())
}

#[derive(Serialize)]
struct Traced<'a> {
    text: String,
    graph: &'a crate::ir::Graph,
    modules: Vec<String>,
    parameters: Vec<(String, Vec<usize>)>,
    constants: Vec<String>,
}

struct Wrapped {
    obj: JsValue,
    own: Option<JsValue>,
    _enter: Closure<dyn FnMut()>,
    _leave: Closure<dyn FnMut()>,
}

/// Traces `model.forward(...inputs)` once. `inputs`: `[{ name, shape, dtype = "float32" }]`;
/// `options`: `{ training: false }`. Returns `{ text, graph, modules, parameters, constants }`.
#[wasm_bindgen]
pub fn trace(model: JsValue, inputs: JsValue, options: JsValue) -> Result<JsValue, JsValue> {
    if !is_module(&model) {
        return Err(JsError::new("trace: the model must be an object with a forward method (extend Module)").into());
    }
    let inputs: Array =
        inputs.dyn_into().map_err(|_| JsError::new("trace: inputs must be an array of {name, shape}"))?;
    let tr = Tracer::new();
    let training = !options.is_undefined()
        && !options.is_null()
        && Reflect::get(&options, &"training".into()).map(|v| v.is_truthy()).unwrap_or(false);
    tr.set_training(training);
    let args = Array::new();
    for (i, spec) in inputs.iter().enumerate() {
        let name = Reflect::get(&spec, &"name".into())?.as_string().unwrap_or_else(|| format!("input{i}"));
        let shape: Vec<usize> = serde_wasm_bindgen::from_value(Reflect::get(&spec, &"shape".into())?)
            .map_err(|_| JsError::new(&format!("trace: input '{name}' needs a shape, an array of sizes")))?;
        let dt = Reflect::get(&spec, &"dtype".into())?.as_string().unwrap_or_else(|| "float32".into());
        let dtype = DType::parse(&dt).map_err(js_err)?;
        let v = tr.input(&name, &shape, dtype).map_err(js_err)?;
        args.push(&wrap(v).into());
    }
    // Wrap every submodule's forward so its ops are recorded under its path.
    let mut mods = Vec::new();
    walk(&model, "", &js_sys::Set::new(&JsValue::UNDEFINED), &mut mods)?;
    let mut wrapped = Vec::new();
    for (path, obj) in &mods {
        let orig = Reflect::get(obj, &"forward".into())?;
        let own =
            if Object::has_own(obj.unchecked_ref::<Object>(), &"forward".into()) { Some(orig.clone()) } else { None };
        let saved: std::rc::Rc<RefCell<Vec<Vec<String>>>> = Default::default();
        let (t1, t2, p, s1, s2) = (tr.clone(), tr.clone(), path.clone(), saved.clone(), saved);
        let enter = Closure::<dyn FnMut()>::new(move || s1.borrow_mut().push(t1.set_scope(&p)));
        let leave = Closure::<dyn FnMut()>::new(move || {
            if let Some(prev) = s2.borrow_mut().pop() {
                t2.restore_scope(prev);
            }
        });
        // A Proxy whose apply trap brackets the call with enter/leave (a wrapper made with the
        // Function constructor would need 'unsafe-eval', which the page's CSP refuses).
        let (en, le): (Function, Function) =
            (enter.as_ref().clone().unchecked_into(), leave.as_ref().clone().unchecked_into());
        let apply = Closure::<dyn Fn(JsValue, JsValue, Array) -> Result<JsValue, JsValue>>::new(
            move |f: JsValue, this: JsValue, a: Array| {
                en.call0(&JsValue::UNDEFINED)?;
                let r = Reflect::apply(f.unchecked_ref::<Function>(), &this, &a);
                le.call0(&JsValue::UNDEFINED)?;
                r
            },
        );
        let handler = Object::new();
        Reflect::set(&handler, &"apply".into(), &apply.into_js_value())?;
        let w: JsValue = js_sys::Proxy::new(&orig, &handler).into();
        Reflect::set(obj, &"forward".into(), &w)?;
        wrapped.push(Wrapped { obj: obj.clone(), own, _enter: enter, _leave: leave });
    }
    CURRENT.with(|c| *c.borrow_mut() = Some(tr.clone()));
    let result = Reflect::get(&model, &"forward".into())
        .and_then(|f| f.dyn_into::<Function>())
        .and_then(|f| f.apply(&model, &args));
    // Undo the wrappers and forget the trace's tensors, whatever happened.
    for w in &wrapped {
        match &w.own {
            Some(f) => {
                Reflect::set(&w.obj, &"forward".into(), f)?;
            }
            None => {
                Reflect::delete_property(w.obj.unchecked_ref::<Object>(), &"forward".into())?;
            }
        }
    }
    CURRENT.with(|c| *c.borrow_mut() = None);
    let outputs = result.and_then(|r| {
        let list: Vec<JsValue> = if Array::is_array(&r) { Array::from(&r).iter().collect() } else { vec![r] };
        list.iter().map(|v| tensor_from(v, "forward's result").map_err(JsValue::from)).collect::<Result<Vec<_>, _>>()
    });
    drop(args);
    let outputs = match outputs {
        Ok(o) => o,
        Err(e) => {
            VARS.with(|v| v.borrow_mut().clear());
            return Err(e);
        }
    };
    VARS.with(|v| v.borrow_mut().clear());
    let refs: Vec<&Var> = outputs.iter().collect();
    let t = tr.finish(&refs).map_err(js_err)?;
    let parameters = t.params.iter().map(|(n, p)| (n.clone(), p.shape().to_vec())).collect();
    let rust_modules: Vec<String> = mods.iter().map(|m| m.0.clone()).collect();
    Ok(to_js(&Traced {
        text: crate::ir::print::print_graph(&t.graph),
        graph: &t.graph,
        modules: rust_modules,
        parameters,
        constants: t.constants.iter().map(|c| c.0.clone()).collect(),
    })?)
}
