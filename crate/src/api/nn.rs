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
//! and `ModuleList`. During the trace each submodule's `forward` is wrapped (a `Proxy`
//! whose `apply` trap sets the module path: no code is generated from strings, so the
//! engine runs under a Content-Security-Policy without `unsafe-eval`) so its ops are
//! recorded under its path (`fc1`, `blocks.0.conv`); a leaf Rust module's `forward` enters
//! its path itself ([`enter_rust_module`]), unwrapped. Each op records the `file:line` of the
//! JavaScript call that made it.
//!
//! One trace runs at a time (a `Session`: the tracer, its number, its tensor handles). A
//! guard ends it on every exit path, whatever throws (module discovery and the wrappers
//! included): the wrappers are removed, and the handles die with the session.

use super::args::{self, js_err, JsResult};
use super::modules::{host_tensor, is_module};
use super::tensor::{tensor_arg, wrap};
use super::to_js;
use crate::tensor::alloc::check_shape;
use crate::tensor::DType;
use crate::trace::check::{self, MAX_INPUTS, MAX_LIST, MAX_MODULE_DEPTH};
use crate::trace::nn::Arg;
use crate::trace::{Tracer, Var};
use js_sys::{Array, Function, Object, Proxy, Reflect};
use serde::Serialize;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use wasm_bindgen::prelude::*;

/// The most tensor handles one trace may hand out (below 2^21: see `tensor.rs`).
pub const MAX_HANDLES: usize = 2 * check::MAX_NODES;

/// The running trace.
struct Session {
    /// This trace's number (handles carry it).
    id: u32,
    tracer: Tracer,
    /// The traced value of each handle, by handle index.
    vars: Vec<Var>,
    /// The path of each wrapped submodule, by the index its Proxy handler passes.
    paths: Vec<String>,
    /// The scopes that module calls entered through the glue's handler replaced, innermost last.
    scopes: Vec<String>,
    /// The leaf Rust modules of the model (`_moduleKey`) to their index in `paths`: their
    /// `forward` enters their scope itself ([`enter_rust_module`]), with no Proxy around it.
    rust_modules: HashMap<u32, usize>,
}

/// A module scope entered by a leaf Rust module's `forward`, left when dropped.
pub(crate) struct RustModuleScope(Option<(Tracer, String)>);

impl Drop for RustModuleScope {
    fn drop(&mut self) {
        if let Some((tr, saved)) = self.0.take() {
            tr.restore_scope(saved);
        }
    }
}

/// Enters the scope of the leaf Rust module `key` of the running trace, if it is one of the
/// traced model's submodules (else nothing: a module called outside a trace or not found
/// by the walk records no scope of its own, as a JS object's forward is not wrapped).
pub(crate) fn enter_rust_module(key: u32) -> RustModuleScope {
    SESSION.with(|s| {
        let s = s.borrow();
        let Some(s) = s.as_ref() else { return RustModuleScope(None) };
        match s.rust_modules.get(&key).and_then(|&i| s.paths.get(i)) {
            Some(path) => RustModuleScope(Some((s.tracer.clone(), s.tracer.set_scope(path)))),
            None => RustModuleScope(None),
        }
    })
}

/// The `_moduleKey()` of a leaf Rust module (read through `Reflect`; anything else: `None`).
fn rust_module_key(obj: &JsValue) -> Option<u32> {
    let f = Reflect::get(obj, &JsValue::from_str("_moduleKey")).ok()?;
    let key = f.dyn_ref::<Function>()?.call0(obj).ok()?.as_f64()?;
    (key.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&key)).then_some(key as u32)
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
    static TRACES: Cell<u32> = const { Cell::new(0) };
}

const NO_TRACE: &str = "no trace is running: call modules and tensor ops inside trace(model, inputs)";

/// The running trace's tracer.
pub(super) fn current() -> JsResult<Tracer> {
    SESSION.with(|s| s.borrow().as_ref().map(|s| s.tracer.clone())).ok_or_else(|| args::error(NO_TRACE))
}

/// True while a trace runs.
pub(super) fn is_tracing() -> bool {
    SESSION.with(|s| s.borrow().is_some())
}

/// Files `v` in the running trace: its handle's (trace, index).
pub(super) fn register_var(v: Var) -> JsResult<(u32, u32)> {
    SESSION.with(|s| {
        let mut s = s.borrow_mut();
        let s = s.as_mut().ok_or_else(|| args::error(NO_TRACE))?;
        if s.vars.len() >= MAX_HANDLES {
            return Err(args::error(&format!(
                "the trace has made {MAX_HANDLES} tensors, the limit: does forward loop without end?"
            )));
        }
        s.vars.try_reserve(1).map_err(|_| args::error("the trace's tensors: out of memory"))?;
        s.vars.push(v);
        Ok((s.id, (s.vars.len() - 1) as u32))
    })
}

/// The traced value of handle (`trace`, `id`): an error for a handle of a trace that has ended.
pub(super) fn lookup_var(trace: u32, id: u32) -> JsResult<Var> {
    SESSION.with(|s| match s.borrow().as_ref() {
        Some(s) if s.id == trace => {
            s.vars.get(id as usize).cloned().ok_or_else(|| args::error("this Tensor is not one of this trace's"))
        }
        _ => Err(args::error(&format!(
            "this Tensor belongs to trace #{trace}, which has ended: a Tensor is valid only inside the trace(...) \
             call that made it"
        ))),
    })
}

/// A caller's file name as recorded: its last path segment, printed on one line of the
/// graph, so it may not break it.
fn source_of(file: &str, line_no: &str) -> String {
    let file = file.rsplit('/').next().unwrap_or(file);
    let file: String = file
        .chars()
        .take(check::MAX_NAME_BYTES)
        .map(|c| if c.is_control() || c == '\u{2028}' || c == '\u{2029}' { '?' } else { c })
        .collect();
    format!("{file}:{line_no}")
}

/// Whether a frame's file is this package's own (its JS glue, its wasm) rather than the user's.
fn is_package_file(file: &str) -> bool {
    file.contains("ipu_playground") || file.starts_with("wasm") || file.contains("wasm-function")
}

thread_local! {
    /// `Error.prepareStackTrace` while [`js_caller`] reads a stack, where the engine is V8
    /// (Node, Chromium): V8 hands it the stack as call-site objects, and only the frames up
    /// to the first of the user's are asked for their file and line, instead of formatting
    /// every frame into the `stack` string and parsing it. It leaves its answer in
    /// `HOOK_FOUND` (`Some(None)`: it ran and found no user frame).
    static HOOK: Closure<dyn Fn(JsValue, JsValue) -> JsValue> =
        Closure::new(|_error: JsValue, frames: JsValue| {
            HOOK_FOUND.with(|f| *f.borrow_mut() = Some(user_frame(&frames)));
            JsValue::UNDEFINED
        });
    static HOOK_FOUND: RefCell<Option<Option<String>>> = const { RefCell::new(None) };
}

/// Calls the call-site method `name` of `frame`.
fn call_site(frame: &JsValue, name: &str) -> Option<JsValue> {
    let f = Reflect::get(frame, &JsValue::from_str(name)).ok()?;
    f.dyn_ref::<Function>()?.call0(frame).ok()
}

/// The `file:line` of the first of V8's call sites (`frames`) outside this package: not a
/// builtin (no file name: `<anonymous>` in a stack string), not this package's glue or wasm,
/// not code from `eval`.
fn user_frame(frames: &JsValue) -> Option<String> {
    let frames = frames.dyn_ref::<Array>()?;
    for i in 0..frames.length() {
        let frame = frames.get(i);
        let Some(file) = call_site(&frame, "getFileName").and_then(|f| f.as_string()) else { continue };
        if is_package_file(&file) || file.contains("<anonymous>") {
            continue;
        }
        if call_site(&frame, "isEval").is_some_and(|e| e.is_truthy()) {
            continue;
        }
        let line = call_site(&frame, "getLineNumber").and_then(|l| l.as_f64())?;
        return Some(source_of(&file, &(line as u64).to_string()));
    }
    None
}

#[wasm_bindgen]
extern "C" {
    /// The glue's site of the call that entered wasm (`scripts/fix-pkg.mjs` defines it in the
    /// package's glue, which captures a few frames at every entry, V8 only): the first frame
    /// outside the package as `"file:line"`, the number 1 for the same text as its previous
    /// answer, or undefined where it does not know. Without fix-pkg's glue (the wasm tests)
    /// the name is not defined: an `Err`, and [`js_caller`] reads the stack itself.
    #[wasm_bindgen(catch, js_name = __ipuCallerSite)]
    fn glue_caller_site() -> Result<JsValue, JsValue>;
}

thread_local! {
    /// The glue's previous answer of [`glue_caller_site`], as recorded.
    static GLUE_SITE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The caller's `file:line` from the glue's capture, if it has it.
fn glue_caller() -> Option<String> {
    let v = glue_caller_site().ok()?;
    if let Some(text) = v.as_string() {
        let (file, line) = text.rsplit_once(':')?;
        let s = source_of(file, line);
        GLUE_SITE.with(|g| *g.borrow_mut() = Some(s.clone()));
        return Some(s);
    }
    if v.as_f64() == Some(1.0) {
        return GLUE_SITE.with(|g| g.borrow().clone());
    }
    None
}

/// The `file:line` of the first JavaScript frame outside this package.
///
/// This runs for every op the JS API records, so it avoids formatting the whole stack where
/// it can: first from the few frames the glue captured when the call entered wasm
/// ([`glue_caller`]); else on V8 through [`HOOK`], elsewhere (or where
/// `Error.prepareStackTrace` cannot be set) by parsing the `stack` string. The caller's
/// `Error.stackTraceLimit` and `Error.prepareStackTrace` are put back as they were.
fn js_caller() -> Option<String> {
    if let Some(site) = glue_caller() {
        return Some(site);
    }
    // Calls through wasm and the package's glue are deep: look past V8's default 10 frames.
    let ctor = Reflect::get(&js_sys::global(), &"Error".into()).ok()?;
    let limit_key = JsValue::from_str("stackTraceLimit");
    let prepare_key = JsValue::from_str("prepareStackTrace");
    let limit = Reflect::get(&ctor, &limit_key).unwrap_or(JsValue::UNDEFINED);
    let _ = Reflect::set(&ctor, &limit_key, &JsValue::from(64));
    // The caller's own prepareStackTrace (own property or not) is restored afterwards.
    let ctor_obj = ctor.unchecked_ref::<Object>();
    let own_prepare = Reflect::get_own_property_descriptor(ctor_obj, &prepare_key)
        .ok()
        .filter(|d| !d.is_undefined())
        .map(|_| Reflect::get(&ctor, &prepare_key).unwrap_or(JsValue::UNDEFINED));
    HOOK_FOUND.with(|f| *f.borrow_mut() = None);
    let hooked = HOOK.with(|h| Reflect::set(&ctor, &prepare_key, h.as_ref()).unwrap_or(false));
    // Reflect.construct: a replaced global Error throws as an Err, not through this frame.
    let err = Reflect::construct(ctor.unchecked_ref::<Function>(), &Array::new()).ok();
    let stack = err.and_then(|e| Reflect::get(&e, &"stack".into()).ok());
    if hooked {
        let _ = match &own_prepare {
            Some(p) => Reflect::set(&ctor, &prepare_key, p),
            None => Reflect::delete_property(ctor_obj, &prepare_key),
        };
    }
    let _ = Reflect::set(&ctor, &limit_key, &limit);
    if let Some(found) = HOOK_FOUND.with(|f| f.take()) {
        return found;
    }
    // Not V8: the stack as a string.
    let stack = stack?.as_string()?;
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
        return Some(source_of(file, line_no));
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

/// A tensor of `values` (row-major numbers or a Float32Array) and `shape` captured by the
/// model: frozen into the graph as a constant `_tensor_constant<i>` (listed in the trace's
/// `constants`). Within the tensor limits (`limits()`). `dtype` (default "float32"):
/// "float32", "float16", "int32" (whole numbers, e.g. a slice offset) or "bool".
#[wasm_bindgen(unchecked_return_type = "Tensor")]
pub fn constant(
    #[wasm_bindgen(unchecked_param_type = "number[] | Float32Array | Int32Array")] values: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "string")] dtype: JsValue,
) -> JsResult<JsValue> {
    let tr = current()?;
    let t = if args::is_absent(&dtype) {
        host_tensor(&values, &shape, "constant")?
    } else {
        let spec = Object::new();
        for (k, v) in [("shape", &shape), ("data", &values), ("dtype", &dtype)] {
            Reflect::set(&spec, &JsValue::from_str(k), v)?;
        }
        super::host_tensor::from_js(&spec, "constant")?
    };
    at_js_caller(&tr, || tr.constant(t)).map_err(js_err).and_then(wrap)
}

/// The Block id and IPU of `block`/`beginBlock`: a name, and a whole number from 0 to 65535.
fn block_args(id: &JsValue, ipu: &JsValue, what: &str) -> JsResult<(String, Option<usize>)> {
    let id = args::name(id, &format!("{what}: id"))?;
    let ipu = args::opt_count(ipu, &format!("{what}: ipu"), check::MAX_IPU as usize)?;
    Ok((id, ipu))
}

/// Runs `fn()` with ops recorded in Block `id` on `ipu` (PopTorch `with poptorch.Block`)
/// and returns its result. `ipu`: a whole number from 0 to 65535, or omitted. As in
/// PopTorch, when `fn` returns no block is active — not an enclosing `block`, not an
/// earlier `beginBlock` — so ops after it need a block of their own (the planner reports
/// PopTorch's "No active Block" otherwise). Each op's `meta.block_kind` records the kind.
#[wasm_bindgen]
pub fn block(
    #[wasm_bindgen(unchecked_param_type = "string")] id: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number | undefined")] ipu: JsValue,
    #[wasm_bindgen(unchecked_param_type = "() => any", js_name = "fn")] f: JsValue,
) -> JsResult<JsValue> {
    let tr = current()?;
    let (id, ipu) = block_args(&id, &ipu, "block")?;
    let f = args::function(&f, "block: fn")?;
    let mut out = Ok(JsValue::UNDEFINED);
    tr.block(&id, ipu, || {
        out = f.call0(&JsValue::UNDEFINED);
        Ok(())
    })
    .map_err(js_err)?;
    out
}

/// Starts Block `id` on `ipu` for every op recorded from now on, until the next block
/// starts (PopTorch `BeginBlock` / `Block.start`). Ops before the first block of either
/// kind go on IPU 0.
#[wasm_bindgen(js_name = beginBlock)]
pub fn begin_block(
    #[wasm_bindgen(unchecked_param_type = "string")] id: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "number")] ipu: JsValue,
) -> JsResult<()> {
    let tr = current()?;
    let (id, ipu) = block_args(&id, &ipu, "beginBlock")?;
    tr.try_begin_block(&id, ipu).map_err(js_err)
}

/// The direct children of `obj` that are modules: the items of `_children()` (Sequential,
/// ModuleList), then its own enumerable properties (not those starting with `__`).
fn children(obj: &JsValue) -> JsResult<Vec<(String, JsValue)>> {
    let mut out = Vec::new();
    let f = args::get(obj, "_children")?;
    if f.is_function() {
        let items = f.unchecked_ref::<Function>().call0(obj)?;
        for (i, v) in args::list(&items, "_children()", MAX_LIST)?.into_iter().enumerate() {
            // An item is a module (named by its index) or a `[name, module]` pair (the
            // package's own classes: GroupAddRev's `blocks.0`, …).
            if v.is_instance_of::<Array>() {
                let pair = args::list(&v, "_children() item", 2)?;
                if let [name, m] = pair.as_slice() {
                    if let Some(name) = name.as_string().filter(|_| is_module(m).unwrap_or(false)) {
                        out.push((name, m.clone()));
                    }
                }
            } else if is_module(&v)? {
                out.push((i.to_string(), v));
            }
        }
    }
    for (key, v) in args::entries(obj, "a module", MAX_LIST)? {
        if !is_module(&v)? {
            continue;
        }
        let name = args::string(&key, "a submodule's attribute name", check::MAX_NAME_BYTES)?;
        if name.starts_with("__") {
            continue;
        }
        check::name("a submodule's attribute name", &name).map_err(args::arg_err)?;
        out.push((name, v));
    }
    Ok(out)
}

/// Every submodule below `obj`, by dotted attribute path (each object once).
pub(crate) fn walk(
    obj: &JsValue,
    prefix: &str,
    depth: usize,
    seen: &js_sys::Set,
    out: &mut Vec<(String, JsValue)>,
) -> JsResult<()> {
    for (name, v) in children(obj)? {
        if seen.has(&v) {
            continue;
        }
        let path = if prefix.is_empty() { name } else { format!("{prefix}.{name}") };
        if depth >= MAX_MODULE_DEPTH {
            return Err(args::error(&format!(
                "module '{path}' is nested more than {MAX_MODULE_DEPTH} levels deep, the limit"
            )));
        }
        if out.len() >= MAX_LIST {
            return Err(args::error(&format!("the model has more than {MAX_LIST} submodules, the limit")));
        }
        seen.add(&v);
        out.push((path.clone(), v.clone()));
        walk(&v, &path, depth + 1, seen, out)?;
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

/// A submodule whose `forward` is wrapped for the trace.
struct Wrapped {
    obj: JsValue,
    /// Its own `forward` before the trace (`None`: it was inherited, so the wrapper is deleted).
    own: Option<JsValue>,
    /// The Proxy's handler: its `apply` trap is deleted after the trace, so a wrapper the
    /// model kept calls the original `forward` (and never the dropped closure).
    handler: Object,
    _trap: Option<Trap>,
}

/// A Proxy `apply` trap in Rust (where the glue has none: [`glue_module_handler`]).
type Trap = Closure<dyn Fn(JsValue, JsValue, JsValue) -> JsResult<JsValue>>;

impl Drop for Wrapped {
    fn drop(&mut self) {
        let _ = Reflect::delete_property(&self.handler, &"apply".into());
    }
}

/// Ends the running trace when dropped, on every exit path of `trace`: puts every wrapped
/// `forward` back (errors ignored: the object may have been frozen since) and forgets the
/// session, and with it every handle of the trace.
struct TraceGuard {
    wrapped: Vec<Wrapped>,
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        for w in self.wrapped.drain(..) {
            let key = JsValue::from_str("forward");
            let _ = match &w.own {
                Some(f) => Reflect::set(&w.obj, &key, f),
                None => Reflect::delete_property(w.obj.unchecked_ref::<Object>(), &key),
            };
        }
        SESSION.with(|s| *s.borrow_mut() = None);
    }
}

#[wasm_bindgen]
extern "C" {
    /// The glue's Proxy handler for submodule `index` of trace `trace` (`scripts/fix-pkg.mjs`):
    /// its `apply` trap, in JS, calls [`enter_module`], the module's `forward`, then
    /// [`exit_module`], so no wasm frame lies between a module's caller and the ops it
    /// records (the glue's capture of the caller then needs only a few frames). Without
    /// fix-pkg's glue (the wasm tests) an `Err`: the trap is a Rust closure.
    #[wasm_bindgen(catch, js_name = __ipuModuleHandler)]
    fn glue_module_handler(trace: u32, index: u32) -> Result<Object, JsValue>;
}

/// The glue's module trap, on entry: ops are recorded under submodule `index`'s path until
/// the matching [`exit_module`]. A call for a trace that has ended does nothing.
#[wasm_bindgen(js_name = _enterModule)]
pub fn enter_module(trace: u32, index: u32) {
    SESSION.with(|s| {
        if let Some(s) = s.borrow_mut().as_mut().filter(|s| s.id == trace) {
            if let Some(path) = s.paths.get(index as usize) {
                let saved = s.tracer.set_scope(path);
                s.scopes.push(saved);
            }
        }
    });
}

/// The glue's module trap, on exit (also when `forward` threw): the scope before the
/// matching [`enter_module`].
#[wasm_bindgen(js_name = _exitModule)]
pub fn exit_module(trace: u32) {
    SESSION.with(|s| {
        if let Some(s) = s.borrow_mut().as_mut().filter(|s| s.id == trace) {
            if let Some(saved) = s.scopes.pop() {
                s.tracer.restore_scope(saved);
            }
        }
    });
}

/// Wraps `obj.forward` in a Proxy that records its ops under `path` (submodule `index` of
/// trace `trace`).
fn wrap_forward(trace: u32, index: u32, path: &str, obj: &JsValue) -> JsResult<Wrapped> {
    let key = JsValue::from_str("forward");
    let orig = Reflect::get(obj, &key)?;
    if !orig.is_function() {
        // A getter may answer differently from the discovery's read.
        return Err(args::type_error(&format!(
            "module '{path}': forward must be a function, got {}",
            args::describe(&orig)
        )));
    }
    let own_desc = Reflect::get_own_property_descriptor(obj.unchecked_ref::<Object>(), &key)?;
    let own = if own_desc.is_undefined() { None } else { Some(orig.clone()) };
    let label = path.to_string();
    let (handler, trap) = match glue_module_handler(trace, index) {
        Ok(handler) => (handler, None),
        Err(_) => {
            // The glue's trap, in Rust: the same entry and exit of the module's scope.
            let trap = Trap::new(move |target: JsValue, this: JsValue, arguments: JsValue| {
                enter_module(trace, index);
                let r = Reflect::apply(target.unchecked_ref::<Function>(), &this, arguments.unchecked_ref::<Array>());
                exit_module(trace);
                r
            });
            let handler = Object::new();
            Reflect::set(&handler, &"apply".into(), trap.as_ref())?;
            (handler, Some(trap))
        }
    };
    let proxy = Proxy::new(&orig, &handler);
    let wrapped = Wrapped { obj: obj.clone(), own, handler, _trap: trap };
    // On failure `wrapped` is dropped, which disarms the Proxy even if a setter kept it.
    if !Reflect::set(obj, &key, &proxy)? {
        return Err(args::error(&format!(
            "cannot trace module '{label}': its forward cannot be replaced for the trace (is the object frozen?)"
        )));
    }
    Ok(wrapped)
}

/// One input of the trace: `{ name = "input<i>", shape, dtype = "float32" }`, or a sparse
/// matrix `{ name, shape: [rows, cols], layout: "csr", nnz }` (a `SparseTensor` in forward:
/// three inputs `<name>.indptr`, `<name>.indices`, `<name>.values`).
fn input(tr: &Tracer, spec: &JsValue, i: usize) -> JsResult<Arg> {
    let what = format!("trace: inputs[{i}]");
    args::object(spec, &what)?;
    let name = args::get(spec, "name")?;
    let name = if args::is_absent(&name) { format!("input{i}") } else { args::name(&name, &format!("{what}.name"))? };
    let shape = args::get(spec, "shape")?;
    if args::is_absent(&shape) {
        return Err(args::type_error(&format!(
            "trace: input '{name}' needs a shape, an array of sizes ({what}.shape)"
        )));
    }
    let shape = args::shape(&shape, &format!("trace: input '{name}': shape"))?;
    let layout = args::get(spec, "layout")?;
    if !args::is_absent(&layout) {
        let l = args::string(&layout, &format!("trace: input '{name}': layout"), 16)?;
        if l != "csr" {
            return Err(args::error(&format!(
                "trace: input '{name}': layout is \"csr\" (a sparse matrix) or absent, got {l:?}"
            )));
        }
        return sparse_input(tr, spec, &name, &shape);
    }
    let dtype = args::get(spec, "dtype")?;
    let dtype = if args::is_absent(&dtype) {
        DType::Float32
    } else {
        let dt = args::string(&dtype, &format!("trace: input '{name}': dtype"), 16)?;
        DType::parse(&dt).map_err(|e| args::error(&format!("trace: input '{name}': {e}")))?
    };
    let shape = check_shape(&format!("model input '{name}'"), &shape, dtype).map_err(js_err)?;
    tr.input(&name, &shape, dtype).map(Arg::Dense).map_err(js_err)
}

/// A sparse (CSR) input of the trace: `shape` `[rows, cols]` and `nnz` stored entries, each
/// array within the tensor limits.
fn sparse_input(tr: &Tracer, spec: &JsValue, name: &str, shape: &[u64]) -> JsResult<Arg> {
    let [rows, cols] = shape else {
        return Err(args::type_error(&format!(
            "trace: input '{name}': a csr matrix has shape [rows, cols], got {} sizes",
            shape.len()
        )));
    };
    let nnz = args::count(&args::get(spec, "nnz")?, &format!("trace: input '{name}': nnz"), check::MAX_TENSOR_BYTES)?;
    check_shape(&format!("model input '{name}.indptr'"), &[rows + 1], DType::Int32).map_err(js_err)?;
    check_shape(&format!("model input '{name}.indices'"), &[nnz as u64], DType::Int32).map_err(js_err)?;
    if *cols > i32::MAX as u64 {
        return Err(args::range_error(&format!("trace: input '{name}': {cols} columns cannot be indexed by int32")));
    }
    crate::trace::SparseVar::input(tr, name, *rows as usize, *cols as usize, nnz).map(Arg::Sparse).map_err(js_err)
}

/// `options`: `{ training = false }`, a boolean; unknown options are errors.
fn training_option(options: &JsValue) -> JsResult<bool> {
    args::one_flag(options, "trace: options", "training", false, "option", "options")
}

/// What one trace of a JS model gives: the core trace, the module paths, and whether
/// `forward` returned an array (a list of outputs) rather than one Tensor.
pub(crate) struct TracedModule {
    pub trace: crate::trace::Trace,
    pub modules: Vec<String>,
    pub returned_list: bool,
}

/// Traces `model.forward(...inputs)` once, with the inputs `make_inputs` declares on the
/// tracer (in the running session, so it may make handles). One trace runs at a time.
pub(crate) fn trace_module(
    model: &JsValue,
    training: bool,
    make_inputs: impl FnOnce(&Tracer) -> JsResult<Vec<Arg>>,
) -> JsResult<TracedModule> {
    if is_tracing() {
        return Err(args::error(
            "trace: a trace is already running (trace was called from inside a model's forward): traces do not nest",
        ));
    }
    if !is_module(model)? {
        return Err(args::type_error(&format!(
            "trace: the model must be an object with a forward method (extend Module), got {}",
            args::describe(model)
        )));
    }
    let tr = Tracer::new();
    tr.set_training(training);
    let id = TRACES.with(|t| {
        let id = t.get().wrapping_add(1);
        t.set(id);
        id
    });
    SESSION.with(|s| {
        *s.borrow_mut() = Some(Session {
            id,
            tracer: tr.clone(),
            vars: Vec::new(),
            paths: Vec::new(),
            scopes: Vec::new(),
            rust_modules: HashMap::new(),
        })
    });
    // From here on the guard ends the trace on every path out of this function.
    let mut guard = TraceGuard { wrapped: Vec::new() };

    let call_args = Array::new();
    for a in make_inputs(&tr)? {
        call_args.push(&super::sparse::arg_to_js(&a)?);
    }
    // Record each submodule's ops under its path: a leaf Rust module enters it itself (by its
    // `_moduleKey`), any other forward is wrapped in a Proxy.
    let mut mods = Vec::new();
    walk(model, "", 0, &js_sys::Set::new(&JsValue::UNDEFINED), &mut mods)?;
    for (index, (path, obj)) in mods.iter().enumerate() {
        let key = rust_module_key(obj);
        SESSION.with(|s| {
            if let Some(s) = s.borrow_mut().as_mut() {
                s.paths.push(path.clone());
                if let Some(k) = key {
                    s.rust_modules.insert(k, index);
                }
            }
        });
        // A forward of the object's own (a JS module, or a Rust module whose forward was
        // replaced) is wrapped in a Proxy that enters its scope.
        let own_forward =
            !Reflect::get_own_property_descriptor(obj.unchecked_ref::<Object>(), &"forward".into())?.is_undefined();
        if key.is_none() || own_forward {
            guard.wrapped.push(wrap_forward(id, index as u32, path, obj)?);
        }
    }
    let forward = args::function(&args::get(model, "forward")?, "trace: model.forward")?;
    let result = Reflect::apply(&forward, model, &call_args)?;
    let returned_list = result.is_instance_of::<Array>();
    let list = if returned_list { args::list(&result, "forward's result", MAX_LIST)? } else { vec![result] };
    let outputs = list
        .iter()
        .enumerate()
        .map(|(i, v)| {
            tensor_arg(
                v,
                &if list.len() == 1 { "forward's result".to_string() } else { format!("forward's result[{i}]") },
            )
        })
        .collect::<JsResult<Vec<_>>>()?;
    drop(guard);

    let refs: Vec<&Var> = outputs.iter().collect();
    let trace = tr.finish(&refs).map_err(js_err)?;
    Ok(TracedModule { trace, modules: mods.into_iter().map(|m| m.0).collect(), returned_list })
}

/// Traces `model.forward(...inputs)` once. `inputs`: at most 1024 of
/// `{ name, shape, dtype = "float32" }`; `options`: `{ training: false }`. Returns
/// `{ text, graph, modules, parameters, constants }`. One trace runs at a time: calling
/// `trace` from inside a model's forward is an error.
#[wasm_bindgen]
pub fn trace(
    #[wasm_bindgen(unchecked_param_type = "Module | { forward: (...inputs: Tensor[]) => Tensor | Tensor[] }")]
    model: JsValue,
    #[wasm_bindgen(unchecked_param_type = "{ name?: string, shape: number[], dtype?: string }[]")] inputs: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "{ training?: boolean }")] options: JsValue,
) -> JsResult<JsValue> {
    if is_tracing() {
        return Err(args::error(
            "trace: a trace is already running (trace was called from inside a model's forward): traces do not nest",
        ));
    }
    if !is_module(&model)? {
        return Err(args::type_error(&format!(
            "trace: the model must be an object with a forward method (extend Module), got {}",
            args::describe(&model)
        )));
    }
    let specs = args::list(&inputs, "trace: inputs", MAX_INPUTS)?;
    let training = training_option(&options)?;
    // Weights a poptorch model trained since reach the modules before they are read.
    super::state::flush()?;
    let TracedModule { trace: t, modules, .. } =
        trace_module(&model, training, |tr| specs.iter().enumerate().map(|(i, spec)| input(tr, spec, i)).collect())?;
    let parameters = t.params.iter().map(|(n, p)| (n.clone(), p.shape().to_vec())).collect();
    let result = to_js(&Traced {
        text: crate::ir::print::print_graph(&t.graph),
        graph: &t.graph,
        modules,
        parameters,
        constants: t.constants.iter().map(|c| c.0.clone()).collect(),
    })?;
    super::plan::TracedGraph::attach(&result, &t.graph)?; // `traced`, for plan()
    Ok(result)
}
