//! A model's module tree as the tracer and the state walkers find it: what counts as a
//! module (an object with a `forward` method), its direct children (the items of
//! `_children()`, then its own enumerable properties), and every submodule by dotted path,
//! like PyTorch's `named_modules`.

use super::args::{self, JsResult};
use super::tensor_handles::is_handle;
use crate::trace::check::{self, MAX_LIST, MAX_MODULE_DEPTH};
use js_sys::{Array, Function};
use wasm_bindgen::prelude::*;

/// True for a module: an object with a `forward` method (reading `forward` may run a getter,
/// whose exception is the error).
pub(super) fn is_module(v: &JsValue) -> JsResult<bool> {
    if !v.is_object() || v.is_instance_of::<js_sys::Array>() || is_handle(v) {
        return Ok(false);
    }
    Ok(args::get(v, "forward")?.is_function())
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
            // package's own classes: GroupAddRev's `convs.0`, …).
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
