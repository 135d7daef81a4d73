//! The tracer from JavaScript: `trace(model, inputs, options)`, `block`, `beginBlock` and
//! `constant`. The modules a model is built from are in `modules.rs`, the tracing `Tensor`
//! in `tensor.rs`.
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

use super::modules::host_tensor;
use super::tensor::{tensor_from, wrap, Tensor};
use super::{js_err, to_js};
use crate::tensor::DType;
use crate::trace::{Tracer, Var};
use js_sys::{Array, Function, Object, Reflect};
use serde::Serialize;
use std::cell::RefCell;
use wasm_bindgen::prelude::*;

thread_local! {
    pub(super) static CURRENT: RefCell<Option<Tracer>> = const { RefCell::new(None) };
    pub(super) static VARS: RefCell<Vec<Var>> = const { RefCell::new(Vec::new()) };
}

pub(super) fn current() -> Result<Tracer, JsError> {
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

/// Runs `f` with the tracer recording the JS caller as the ops' source.
pub(super) fn at_js_caller<T>(tr: &Tracer, f: impl FnOnce() -> T) -> T {
    tr.set_source(js_caller());
    let r = f();
    tr.set_source(None);
    r
}

/// A tensor of `values` (row-major) and `shape` captured by the model: frozen into the
/// graph as a constant `_tensor_constant<i>` (listed in the trace's `constants`).
#[wasm_bindgen]
pub fn constant(values: Vec<f32>, shape: Vec<usize>) -> Result<Tensor, JsError> {
    let t = host_tensor(&values, &shape, "constant")?;
    let tr = current()?;
    at_js_caller(&tr, || tr.constant(t)).map(wrap).map_err(js_err)
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
    let make = Function::new_with_args(
        "orig, enter, leave",
        "return function(...a) { enter(); try { return orig.apply(this, a); } finally { leave(); } };",
    );
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
        let w = make.call3(&JsValue::UNDEFINED, &orig, enter.as_ref(), leave.as_ref())?;
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
