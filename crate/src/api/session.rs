//! The running trace as the JS API sees it: one `Session` at a time (the tracer, its number,
//! the tensor handles it has handed out, the module paths its scopes use), and the caller's
//! `file:line` each op records. `nn.rs` starts and ends a session around a model's
//! `forward`; `tensor.rs`, `modules.rs` and `sparse.rs` record ops in it.
//!
//! The caller's site comes from the package glue's capture where it has one (V8, with
//! `scripts/fix-pkg.mjs`'s glue), else from a stack read here.

use super::args::{self, JsResult};
use crate::trace::check;
use crate::trace::{Tracer, Var};
use js_sys::{Array, Function, Object, Reflect};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use wasm_bindgen::prelude::*;

/// The most tensor handles one trace may hand out (below 2^21: see `tensor_handles.rs`).
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
    /// The JS `nn.Module`s of the model (`_stateKey`) to their index in `paths` (`None`:
    /// one object found at two paths, whose state is then named by the running scope).
    state_owners: HashMap<u32, Option<usize>>,
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
            Some(path) => RustModuleScope(Some((s.tracer.clone(), s.tracer.enter_module(path)))),
            None => RustModuleScope(None),
        }
    })
}

/// Enters the scope of the JS `nn.Module` numbered `key` (its `_stateKey`) while it reads or
/// writes its own state, if the trace found it at one path: its parameters and buffers are
/// named by that path whichever module's `forward` reads them, as PyTorch names them.
pub(crate) fn enter_state_owner(key: u32) -> RustModuleScope {
    SESSION.with(|s| {
        let s = s.borrow();
        let Some(s) = s.as_ref() else { return RustModuleScope(None) };
        match s.state_owners.get(&key).copied().flatten().and_then(|i| s.paths.get(i)) {
            Some(path) => RustModuleScope(Some((s.tracer.clone(), s.tracer.set_scope(path)))),
            None => RustModuleScope(None),
        }
    })
}

/// The Block of `poptorch.BeginBlock(module, id, ipu)` on `obj` (its `_beginBlock` mark,
/// `[id, ipu]`, set by `nn.rs`'s `_beginBlockOf`), if any.
fn begin_block_mark(obj: &JsValue) -> Option<(String, Option<usize>)> {
    let mark = Reflect::get(obj, args::key("_beginBlock")).ok()?;
    let mark = mark.dyn_into::<Array>().ok()?;
    let id = mark.get(0).as_string()?;
    let ipu = mark.get(1).as_f64().map(|n| n as usize);
    Some((id, ipu))
}

/// The `_stateKey()` of a JS `nn.Module` (read through `Reflect`; anything else: `None`).
fn state_key(obj: &JsValue) -> Option<u32> {
    let f = Reflect::get(obj, args::key("_stateKey")).ok()?;
    let key = f.dyn_ref::<Function>()?.call0(obj).ok()?.as_f64()?;
    (key.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&key)).then_some(key as u32)
}

/// The `_moduleKey()` of a leaf Rust module (read through `Reflect`; anything else: `None`).
fn rust_module_key(obj: &JsValue) -> Option<u32> {
    let f = Reflect::get(obj, args::key("_moduleKey")).ok()?;
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

thread_local! {
    /// The site a host told with [`set_caller_site`] (say a Python layer over this package,
    /// whose lines no JavaScript stack holds): while set, every op records it instead of the
    /// JS caller's.
    static TOLD_SITE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// `setCallerSite(file, line)`: the `file:line` the ops recorded from now on name, instead
/// of the first JavaScript frame outside the package, until `setCallerSite(null)` clears
/// it. For a language whose calls reach the package through JavaScript that is not the
/// user's (the page's Python, run by Pyodide, sets the line of the user's file before each
/// call it forwards). `file` a name (its last path segment is kept, as for a JS file),
/// `line` a whole number from 1.
#[wasm_bindgen(js_name = setCallerSite)]
pub fn set_caller_site(
    #[wasm_bindgen(unchecked_param_type = "string | null")] file: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number")] line: JsValue,
) -> JsResult<()> {
    if args::is_absent(&file) {
        TOLD_SITE.with(|t| *t.borrow_mut() = None);
        return Ok(());
    }
    let file = args::name(&file, "setCallerSite: file")?;
    let line = args::integer(&line, "setCallerSite: line", 1, u32::MAX as i64)?;
    TOLD_SITE.with(|t| *t.borrow_mut() = Some(source_of(&file, &line.to_string())));
    Ok(())
}

/// The `file:line` of the first JavaScript frame outside this package, or the site told by
/// [`set_caller_site`].
///
/// This runs for every op the JS API records, so it avoids formatting the whole stack where
/// it can: first from the few frames the glue captured when the call entered wasm
/// ([`glue_caller`]); else on V8 through [`HOOK`], elsewhere (or where
/// `Error.prepareStackTrace` cannot be set) by parsing the `stack` string. The caller's
/// `Error.stackTraceLimit` and `Error.prepareStackTrace` are put back as they were.
fn js_caller() -> Option<String> {
    if let Some(site) = TOLD_SITE.with(|t| t.borrow().clone()) {
        return Some(site);
    }
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

/// Starts a session for `tracer`: the new trace's number, which its handles carry. The
/// caller ends it with [`end`] on every path out.
pub(super) fn start(tracer: &Tracer) -> u32 {
    let id = TRACES.with(|t| {
        let id = t.get().wrapping_add(1);
        t.set(id);
        id
    });
    SESSION.with(|s| {
        *s.borrow_mut() = Some(Session {
            id,
            tracer: tracer.clone(),
            vars: Vec::new(),
            paths: Vec::new(),
            scopes: Vec::new(),
            rust_modules: HashMap::new(),
            state_owners: HashMap::new(),
        })
    });
    id
}

/// Ends the running session: every handle of the trace dies with it.
pub(super) fn end() {
    SESSION.with(|s| *s.borrow_mut() = None);
}

/// Files submodule `path` of the traced model as the next module index, and a leaf Rust
/// module's key (its `_moduleKey`) with it; whether `obj` is such a leaf.
pub(super) fn add_module(path: &str, obj: &JsValue) -> bool {
    let key = rust_module_key(obj);
    let owner = state_key(obj);
    let begin = begin_block_mark(obj);
    SESSION.with(|s| {
        if let Some(s) = s.borrow_mut().as_mut() {
            if let Some((id, ipu)) = &begin {
                s.tracer.begin_block_at_deferred(path, id, *ipu);
            }
            s.paths.push(path.to_string());
            let index = s.paths.len() - 1;
            if let Some(k) = key {
                s.rust_modules.insert(k, index);
            }
            if let Some(k) = owner {
                s.state_owners.entry(k).and_modify(|i| *i = None).or_insert(Some(index));
            }
        }
    });
    key.is_some()
}

/// The glue's module trap, on entry: ops are recorded under submodule `index`'s path until
/// the matching [`exit_module`]. A call for a trace that has ended does nothing.
#[wasm_bindgen(js_name = _enterModule)]
pub fn enter_module(trace: u32, index: u32) {
    SESSION.with(|s| {
        if let Some(s) = s.borrow_mut().as_mut().filter(|s| s.id == trace) {
            if let Some(path) = s.paths.get(index as usize) {
                let saved = s.tracer.enter_module(path);
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
