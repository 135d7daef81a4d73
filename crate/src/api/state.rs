//! The parameters and buffers of JavaScript modules, read and written from outside a trace:
//! `namedParameters()`, `parameters()`, `namedBuffers()`, `buffers()`, `stateDict()` and
//! `loadStateDict()` on every `nn` module (the namespace puts them on the classes'
//! prototypes, calling the functions here with the module), and the `Parameter` handles
//! optimizers take.
//!
//! Each module class answers three hidden methods for its *own* state (not its
//! submodules'): `_stateNames(kind)`, `_getState(kind, name)` (a host tensor, see
//! `host_tensor.rs`) and `_setState(kind, name, value)` (same dtype and shape; not while a
//! trace runs), with `kind` `"parameter"` or `"buffer"`. A module without them (ReLU,
//! Sequential, a plain object with a `forward`) has no state of its own. Submodules are
//! found as the tracer finds them (`tree::walk`), so full names are the traced names
//! (`encoder.layers.0.weight`), in PyTorch's order: a module's own first, then each
//! submodule's.

use super::args::{self, JsResult};
use super::host_tensor;
use super::session::is_tracing;
use super::tree::{is_module, walk};
use crate::poptorch::HostModel;
use crate::tensor::{DType, Param, Tensor};
use crate::trace::check::MAX_LIST;
use js_sys::{Array, Function, Object, Reflect, WeakMap};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// Parameters or buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Parameter,
    Buffer,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Parameter => "parameter",
            Kind::Buffer => "buffer",
        }
    }
    /// The `kind` argument of the hidden methods.
    pub fn parse(v: &JsValue, what: &str) -> JsResult<Kind> {
        match v.as_string().as_deref() {
            Some("parameter") => Ok(Kind::Parameter),
            Some("buffer") => Ok(Kind::Buffer),
            _ => {
                Err(args::type_error(&format!("{what} must be \"parameter\" or \"buffer\", got {}", args::describe(v))))
            }
        }
    }
}

/// The module's hidden method `name`, if it has one.
fn method(m: &JsValue, name: &'static str) -> JsResult<Option<Function>> {
    let f = args::get(m, name)?;
    Ok(if f.is_function() { Some(f.unchecked_into()) } else { None })
}

/// Names of `m`'s own state of `kind`.
pub(crate) fn own_names(m: &JsValue, kind: Kind) -> JsResult<Vec<String>> {
    let Some(f) = method(m, "_stateNames")? else {
        return Ok(Vec::new());
    };
    let list = f.call1(m, args::key(kind.as_str()))?;
    args::list(&list, "_stateNames()", MAX_LIST)?.iter().map(|n| args::name(n, "a state name")).collect()
}

/// The value of `m`'s own state `name`.
pub(crate) fn own_value(m: &JsValue, kind: Kind, name: &str) -> JsResult<Tensor> {
    flush()?;
    let f =
        method(m, "_getState")?.ok_or_else(|| args::error(&format!("the module has no {} '{name}'", kind.as_str())))?;
    let v = f.call2(m, args::key(kind.as_str()), &JsValue::from_str(name))?;
    host_tensor::from_js(&v, &format!("the {} '{name}'", kind.as_str()))
}

thread_local! {
    /// A parameter or buffer passing between Rust and a module's hidden `_stateParam` /
    /// `_setStateParam` (Rust calls the method, which gives or takes it here at once).
    static HANDED: RefCell<Option<Param>> = const { RefCell::new(None) };
}

/// Gives `p` to the Rust caller of a module's `_stateParam`.
pub(crate) fn hand_over(p: Param) {
    HANDED.with(|h| *h.borrow_mut() = Some(p));
}

/// The parameter handed to `_setStateParam` by its Rust caller (`what` names the method).
pub(crate) fn take_handed(what: &str) -> JsResult<Param> {
    HANDED.with(|h| h.borrow_mut().take()).ok_or_else(|| {
        args::error(&format!("{what} is called by the package with a parameter it hands over; none was given"))
    })
}

/// `m`'s own state `name` as a [`Param`]: shape and dtype, not materialised (through the
/// module's `_stateParam`; a module class without it gives its value, through `_getState`).
pub(crate) fn own_param(m: &JsValue, kind: Kind, name: &str) -> JsResult<Param> {
    flush()?;
    if let Some(f) = method(m, "_stateParam")? {
        HANDED.with(|h| h.borrow_mut().take());
        f.call2(m, args::key(kind.as_str()), &JsValue::from_str(name))?;
        if let Some(p) = HANDED.with(|h| h.borrow_mut().take()) {
            return Ok(p);
        }
    }
    Ok(Param::from_tensor(own_value(m, kind, name)?))
}

/// Replaces `m`'s own state `name` with `p` (same checks as [`set_own`]), keeping it as it
/// is (a parameter not made yet stays so) where the module takes a `Param`.
pub(crate) fn set_own_param(m: &JsValue, kind: Kind, name: &str, p: Param, any_dtype: bool) -> JsResult<()> {
    let Some(f) = method(m, "_setStateParam")? else {
        return set_own_as(m, kind, name, p.value().map_err(args::js_err)?.as_ref(), any_dtype);
    };
    hand_over(p);
    let a = Array::of3(args::key(kind.as_str()), &JsValue::from_str(name), &JsValue::from(any_dtype));
    let r = Reflect::apply(&f, m, &a);
    HANDED.with(|h| h.borrow_mut().take());
    r?;
    Ok(())
}

/// Writes `value` into `m`'s own state `name` (of the same dtype, unless `any_dtype`).
fn set_own_as(m: &JsValue, kind: Kind, name: &str, value: &Tensor, any_dtype: bool) -> JsResult<()> {
    let f =
        method(m, "_setState")?.ok_or_else(|| args::error(&format!("the module has no {} '{name}'", kind.as_str())))?;
    let v = host_tensor::to_js(value)?;
    let a = Array::of4(args::key(kind.as_str()), &JsValue::from_str(name), &v, &JsValue::from(any_dtype));
    Reflect::apply(&f, m, &a)?;
    Ok(())
}

/// Writes `value` into `m`'s own state `name` (same dtype and shape).
pub(crate) fn set_own(m: &JsValue, kind: Kind, name: &str, value: &Tensor) -> JsResult<()> {
    set_own_as(m, kind, name, value, false)
}

/// The value to store when `new` replaces `old` in a module's state: the shape must be the
/// old one; a float value of another float dtype is cast to the old dtype (as PyTorch's
/// `copy_` and `load_state_dict` do), or kept as it is with `any_dtype` (a cast of the whole
/// module, `half()` / `float()`); other dtype changes are errors.
pub(crate) fn replacement(kind: Kind, name: &str, old: &Param, new: Tensor, any_dtype: bool) -> JsResult<Tensor> {
    Ok(match replacement_cast(kind, name, old, new.shape(), new.dtype(), any_dtype)? {
        Some(to) => new.cast(to),
        None => new,
    })
}

/// [`replacement`] for a [`Param`] (a cast of one not made yet stays not made).
pub(crate) fn replacement_param(kind: Kind, name: &str, old: &Param, new: Param, any_dtype: bool) -> JsResult<Param> {
    Ok(match replacement_cast(kind, name, old, new.shape(), new.dtype(), any_dtype)? {
        Some(to) => new.cast(to),
        None => new,
    })
}

/// The checks of [`replacement`]: the dtype to cast the new value to, if any.
fn replacement_cast(
    kind: Kind,
    name: &str,
    old: &Param,
    shape: &[usize],
    dtype: DType,
    any_dtype: bool,
) -> JsResult<Option<DType>> {
    let floats = old.dtype().is_float() && dtype.is_float();
    if old.shape() != shape || (old.dtype() != dtype && !floats) {
        return Err(args::error(&format!(
            "{} '{name}' is {}{:?}; a {}{:?} cannot replace it (the same shape, and dtype or another float dtype)",
            kind.as_str(),
            host_tensor::dtype_name(old.dtype()),
            old.shape(),
            host_tensor::dtype_name(dtype),
            shape
        )));
    }
    Ok(if any_dtype || dtype == old.dtype() { None } else { Some(old.dtype()) })
}

/// One piece of state of a module tree.
#[derive(Clone)]
pub(crate) struct Entry {
    /// The full (traced) name.
    pub full: String,
    /// The module that owns it, and its name there.
    pub module: JsValue,
    pub local: String,
}

/// The modules of the tree at `root` (the root as ""), each object once, in the tracer's
/// order.
pub(crate) fn modules(root: &JsValue) -> JsResult<Vec<(String, JsValue)>> {
    if !is_module(root)? {
        return Err(args::type_error(&format!(
            "the model must be a module (an object with a forward method; extend nn.Module), got {}",
            args::describe(root)
        )));
    }
    flush()?;
    let seen = js_sys::Set::new(&JsValue::UNDEFINED);
    seen.add(root);
    let mut out = vec![(String::new(), root.clone())];
    walk(root, "", 0, &seen, &mut out)?;
    Ok(out)
}

/// Every parameter (or buffer) of the tree at `root`, by full name.
pub(crate) fn entries(root: &JsValue, kind: Kind) -> JsResult<Vec<Entry>> {
    Ok(entries_of(root, &[kind])?.pop().unwrap_or_default())
}

/// Every parameter and every buffer of the tree at `root`, by full name, from one walk
/// of the tree (`[parameters, buffers]`).
pub(crate) fn entries_all(root: &JsValue) -> JsResult<[Vec<Entry>; 2]> {
    let mut lists = entries_of(root, &[Kind::Parameter, Kind::Buffer])?.into_iter();
    Ok([lists.next().unwrap_or_default(), lists.next().unwrap_or_default()])
}

/// The state of each of `kinds` in the tree at `root`, by full name, from one walk.
fn entries_of(root: &JsValue, kinds: &[Kind]) -> JsResult<Vec<Vec<Entry>>> {
    let mut out = vec![Vec::new(); kinds.len()];
    for (path, m) in modules(root)? {
        for (&kind, list) in kinds.iter().zip(out.iter_mut()) {
            for local in own_names(&m, kind)? {
                let full = if path.is_empty() { local.clone() } else { format!("{path}.{local}") };
                list.push(Entry { full, module: m.clone(), local });
            }
        }
    }
    Ok(out)
}

/// The state `entries` name (of `kind`), not materialised.
pub(crate) fn params_of(entries: &[Entry], kind: Kind) -> JsResult<Vec<(String, Param)>> {
    entries.iter().map(|e| Ok((e.full.clone(), own_param(&e.module, kind, &e.local)?))).collect()
}

/// Every parameter (or buffer) of the tree at `root` with its value.
pub(crate) fn values(root: &JsValue, kind: Kind) -> JsResult<Vec<(String, Rc<Tensor>)>> {
    entries(root, kind)?.into_iter().map(|e| Ok((e.full, Rc::new(own_value(&e.module, kind, &e.local)?)))).collect()
}

/// Host values a model wrapper holds that its JS modules have not been given yet.
struct Pending {
    host: HostModel,
    params: Vec<Entry>,
    buffers: Vec<Entry>,
}

thread_local! {
    static PENDING: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
}

/// Records that `host` holds newer values than the modules of `params` and `buffers`
/// (after a training call, `copyWeightsToHost`, `destroy`). They are copied into the
/// modules lazily, as PopTorch copies trained weights to the host when the model's
/// parameters, buffers or forward are next used: before any read of module state through
/// this file, and before a trace.
pub(crate) fn mark_dirty(host: &HostModel, params: Vec<Entry>, buffers: Vec<Entry>) {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        p.retain(|q| !q.host.same_weights(host));
        p.push(Pending { host: host.clone(), params, buffers });
    });
}

/// Copies every pending host value into its module (see [`mark_dirty`]). Not while a
/// trace runs (a module's state cannot change then; the values stay pending). A value the
/// module no longer takes (its parameter was registered again with another shape since the
/// model was wrapped) is left out: the module holds what its user put there last.
pub(crate) fn flush() -> JsResult<()> {
    if is_tracing() || PENDING.with(|p| p.borrow().is_empty()) {
        return Ok(());
    }
    let list = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
    for p in &list {
        for e in &p.params {
            if let Some(v) = p.host.parameter(&e.full) {
                let _ = set_own_param(&e.module, Kind::Parameter, &e.local, v, false);
            }
        }
        for e in &p.buffers {
            if let Some(v) = p.host.buffer(&e.full) {
                let _ = set_own_param(&e.module, Kind::Buffer, &e.local, v, false);
            }
        }
    }
    Ok(())
}

thread_local! {
    /// A number for each module object a key was asked for (parameter identity).
    static MODULE_IDS: WeakMap = WeakMap::new();
    static NEXT_ID: Cell<u32> = const { Cell::new(0) };
}

/// The identity of parameter `local` of module object `m`: the same module object and
/// name always give the same key, whatever path reaches the module.
pub(crate) fn key(m: &JsValue, local: &str) -> String {
    let obj: &Object = m.unchecked_ref();
    let id = MODULE_IDS.with(|ids| match ids.get(obj).as_f64() {
        Some(id) => id as u32,
        None => {
            let id = NEXT_ID.with(|n| {
                let id = n.get().wrapping_add(1);
                n.set(id);
                id
            });
            ids.set(obj, &JsValue::from(id));
            id
        }
    });
    // A control character: no traced name (which has none) can look like a key.
    format!("\u{1}{id}\u{1}{local}")
}

/// A parameter of a module: a live view (its value is read from the module on each access)
/// and an identity for optimizers' parameter groups.
#[wasm_bindgen]
pub struct Parameter {
    module: JsValue,
    local: String,
    name: String,
}

#[wasm_bindgen]
impl Parameter {
    /// The name, relative to the module `parameters()` was called on.
    #[wasm_bindgen(getter)]
    pub fn name(&self) -> String {
        self.name.clone()
    }
    /// The value now: `{ shape, dtype, data }`.
    #[wasm_bindgen(getter, unchecked_return_type = "HostTensor")]
    pub fn value(&self) -> JsResult<JsValue> {
        host_tensor::to_js(&own_value(&self.module, Kind::Parameter, &self.local)?)
    }
    /// The shape (an array of sizes; the value is not made for it).
    #[wasm_bindgen(getter, unchecked_return_type = "number[]")]
    pub fn shape(&self) -> JsResult<JsValue> {
        let p = own_param(&self.module, Kind::Parameter, &self.local)?;
        Ok(p.shape().iter().map(|&d| JsValue::from(d as f64)).collect::<Array>().into())
    }
    /// `"float32"`, `"float16"`, `"int32"` or `"bool"`.
    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> JsResult<String> {
        Ok(host_tensor::dtype_name(own_param(&self.module, Kind::Parameter, &self.local)?.dtype()).into())
    }
    /// The values now, row-major (a copy).
    #[wasm_bindgen(getter, unchecked_return_type = "Float32Array | Int32Array | Uint8Array")]
    pub fn data(&self) -> JsResult<JsValue> {
        args::get(&self.value()?, "data")
    }
    #[wasm_bindgen(js_name = _key)]
    pub fn key(&self) -> String {
        key(&self.module, &self.local)
    }
}

/// The key of a `Parameter` (for optimizers), or an error naming `what`.
pub(crate) fn parameter_key(v: &JsValue, what: &str) -> JsResult<String> {
    let not = || {
        args::type_error(&format!("{what} must be a Parameter (from module.parameters()), got {}", args::describe(v)))
    };
    if !v.is_object() {
        return Err(not());
    }
    let f = args::get(v, "_key")?;
    if !f.is_function() {
        return Err(not());
    }
    let k = f.unchecked_ref::<Function>().call0(v)?;
    k.as_string().filter(|s| s.starts_with('\u{1}')).ok_or_else(not)
}

/// `module.namedParameters()`: `[name, Parameter]` pairs; a tied parameter once, under its
/// first name (PyTorch's `named_parameters` drops the duplicates of a shared tensor too).
#[wasm_bindgen(js_name = _namedParameters, unchecked_return_type = "[string, Parameter][]")]
pub fn named_parameters(module: JsValue) -> JsResult<JsValue> {
    let out = Array::new();
    let mut seen = std::collections::HashSet::new();
    for e in entries(&module, Kind::Parameter)? {
        if !seen.insert(own_param(&e.module, Kind::Parameter, &e.local)?.id()) {
            continue;
        }
        let p = Parameter { module: e.module, local: e.local, name: e.full.clone() };
        out.push(&Array::of2(&JsValue::from_str(&e.full), &JsValue::from(p)));
    }
    Ok(out.into())
}

/// `module.namedBuffers()`: `[name, HostTensor]` pairs (copies of the values now).
#[wasm_bindgen(js_name = _namedBuffers, unchecked_return_type = "[string, HostTensor][]")]
pub fn named_buffers(module: JsValue) -> JsResult<JsValue> {
    let out = Array::new();
    for (name, t) in values(&module, Kind::Buffer)? {
        out.push(&Array::of2(&JsValue::from_str(&name), &host_tensor::to_js(&t)?));
    }
    Ok(out.into())
}

/// `module.stateDict()`: `{ name: HostTensor }`, parameters then buffers (copies).
#[wasm_bindgen(js_name = _stateDict, unchecked_return_type = "Record<string, HostTensor>")]
pub fn state_dict(module: JsValue) -> JsResult<JsValue> {
    let out = Object::new();
    for kind in [Kind::Parameter, Kind::Buffer] {
        for (name, t) in values(&module, kind)? {
            Reflect::set(&out, &JsValue::from_str(&name), &host_tensor::to_js(&t)?)?;
        }
    }
    Ok(out.into())
}

/// A `Map`'s entries as a plain object, read through the engine's `Array.from` (a throwing
/// iterator is the error); a key that is not a string is a TypeError.
fn map_as_object(map: &JsValue) -> JsResult<JsValue> {
    let from: Function = args::get(&args::get(&js_sys::global(), "Array")?, "from")?.unchecked_into();
    let pairs = Reflect::apply(&from, &JsValue::UNDEFINED, &Array::of1(map))?;
    let obj = Object::new();
    for (i, pair) in args::list(&pairs, "loadStateDict: state_dict", 4 * MAX_LIST)?.iter().enumerate() {
        let key = Reflect::get_u32(pair, 0)?;
        if !key.is_string() {
            return Err(args::type_error(&format!(
                "loadStateDict: state_dict's key {i} must be a string, got {}",
                args::describe(&key)
            )));
        }
        Reflect::set(&obj, &key, &Reflect::get_u32(pair, 1)?)?;
    }
    Ok(obj.into())
}

/// `module.loadStateDict(dict, strict = true)`: writes each `dict[name]` (a host tensor of
/// the same dtype and shape, or PyTorch's `tensor.tolist()` nested arrays, read in the
/// parameter's dtype) into the module's parameter or buffer `name`. `dict` is an object or
/// a `Map` (names to values, as `torch.load` gives a state dict). With `strict`, a missing
/// or unexpected key is an error (PyTorch's check), and nothing is written.
#[wasm_bindgen(js_name = _loadStateDict)]
pub fn load_state_dict(module: JsValue, dict: JsValue, strict: JsValue) -> JsResult<()> {
    let strict = args::opt_bool(&strict, "loadStateDict: strict", true)?;
    let dict = if dict.is_instance_of::<js_sys::Map>() { map_as_object(&dict)? } else { dict };
    args::object(&dict, "loadStateDict: state_dict")?;
    let mut all: Vec<(Kind, Entry)> = Vec::new();
    for kind in [Kind::Parameter, Kind::Buffer] {
        all.extend(entries(&module, kind)?.into_iter().map(|e| (kind, e)));
    }
    let given = args::entries(&dict, "loadStateDict: state_dict", 4 * MAX_LIST)?;
    let mut writes = Vec::new();
    let mut unexpected = Vec::new();
    for (k, v) in &given {
        let k = args::string(k, "loadStateDict: a key", crate::trace::check::MAX_NAME_BYTES * 8)?;
        match all.iter().find(|(_, e)| e.full == k) {
            Some((kind, e)) => {
                let current = own_param(&e.module, *kind, &e.local)?;
                let t =
                    host_tensor::from_js_or_nested(v, &format!("loadStateDict: state_dict[{k:?}]"), current.dtype())?;
                replacement(*kind, &k, &current, t.clone(), false)?;
                writes.push((*kind, e.clone(), t));
            }
            None => unexpected.push(k),
        }
    }
    if strict {
        let missing: Vec<&str> = all
            .iter()
            .filter(|(_, e)| !writes.iter().any(|(_, w, _)| w.full == e.full))
            .map(|(_, e)| e.full.as_str())
            .collect();
        if !missing.is_empty() || !unexpected.is_empty() {
            let q = |v: &[&str]| v.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ");
            let mut msg = "Error(s) in loading state_dict:".to_string();
            if !missing.is_empty() {
                msg.push_str(&format!(" Missing key(s) in state_dict: {}.", q(&missing)));
            }
            if !unexpected.is_empty() {
                let u: Vec<&str> = unexpected.iter().map(String::as_str).collect();
                msg.push_str(&format!(" Unexpected key(s) in state_dict: {}.", q(&u)));
            }
            return Err(args::error(&msg));
        }
    }
    // Each parameter's identity before the writes: a tied parameter (one tensor under several
    // names) stays one, holding the last value written to any of its names, as PyTorch's
    // copies into the shared tensor leave it.
    let before =
        all.iter().map(|(k, e)| own_param(&e.module, *k, &e.local).map(|p| p.id())).collect::<JsResult<Vec<_>>>()?;
    for (kind, e, t) in &writes {
        set_own(&e.module, *kind, &e.local, t)?;
    }
    let mut last: std::collections::HashMap<*const (), usize> = std::collections::HashMap::new();
    for (k, (_, w, _)) in writes.iter().enumerate().filter(|(_, (kind, _, _))| *kind == Kind::Parameter) {
        if let Some(j) = all.iter().position(|(_, x)| x.full == w.full) {
            last.insert(before[j], k);
        }
    }
    for (i, (kind, e)) in all.iter().enumerate().filter(|(_, (kind, _))| *kind == Kind::Parameter) {
        if let Some(&k) = last.get(&before[i]) {
            let w = &writes[k].1;
            if w.full != e.full {
                let p = own_param(&w.module, *kind, &w.local)?;
                set_own_param(&e.module, *kind, &e.local, p, false)?;
            }
        }
    }
    Ok(())
}

/// `module.half()` / `module.float()`: every float parameter and buffer of the tree cast to
/// `dtype` ("float16" or "float32"), as PyTorch's `Module.half()`; the module is returned.
#[wasm_bindgen(js_name = _moduleTo)]
pub fn module_to(module: JsValue, dtype: JsValue) -> JsResult<JsValue> {
    let to = match dtype.as_string().as_deref() {
        Some("float16") => crate::tensor::DType::Float16,
        Some("float32") => crate::tensor::DType::Float32,
        _ => {
            return Err(args::type_error(&format!(
                "dtype must be \"float16\" or \"float32\", got {}",
                args::describe(&dtype)
            )))
        }
    };
    // A tied parameter is cast once and stays one tensor.
    let mut cast: std::collections::HashMap<*const (), Param> = std::collections::HashMap::new();
    for kind in [Kind::Parameter, Kind::Buffer] {
        for e in entries(&module, kind)? {
            let p = own_param(&e.module, kind, &e.local)?;
            if p.dtype().is_float() && p.dtype() != to {
                let c = match kind {
                    Kind::Parameter => cast.entry(p.id()).or_insert_with(|| p.cast(to)).clone(),
                    Kind::Buffer => p.cast(to),
                };
                set_own_param(&e.module, kind, &e.local, c, true)?;
            }
        }
    }
    Ok(module)
}

/// `module.tieParameter(name, source, sourceName = name)`: this module's parameter `name`
/// becomes `source`'s parameter `sourceName` (PyTorch's `decoder.weight = embed.weight`):
/// one tensor, so a trace reads it as one parameter with one gradient and one optimizer
/// state (see `trace::Trace::tied`). Same shape and dtype; not while a trace runs.
#[wasm_bindgen(js_name = _tieParameter)]
pub fn tie_parameter(target: JsValue, name: JsValue, source: JsValue, source_name: JsValue) -> JsResult<()> {
    let name = args::name(&name, "tieParameter: name")?;
    let source_name = if args::is_absent(&source_name) {
        name.clone()
    } else {
        args::name(&source_name, "tieParameter: sourceName")?
    };
    for (m, what) in [(&target, "the module"), (&source, "tieParameter: source")] {
        if !is_module(m)? {
            return Err(args::type_error(&format!("{what} must be a module, got {}", args::describe(m))));
        }
    }
    if is_tracing() {
        return Err(args::error(&format!(
            "tieParameter('{name}') while a trace runs: tie parameters in the constructor, before the model is traced"
        )));
    }
    if method(&target, "_setStateParam")?.is_none() || !own_names(&target, Kind::Parameter)?.contains(&name) {
        return Err(args::error(&format!("tieParameter: the module has no parameter '{name}' to tie")));
    }
    if !own_names(&source, Kind::Parameter)?.contains(&source_name) {
        return Err(args::error(&format!("tieParameter: the source module has no parameter '{source_name}'")));
    }
    let p = own_param(&source, Kind::Parameter, &source_name)?;
    set_own_param(&target, Kind::Parameter, &name, p, false)
}
