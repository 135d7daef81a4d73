//! The Rust state behind the `poptorch` objects (options, strategies, stages, phases,
//! optimizers) and how a function finds it from an object it is handed.
//!
//! wasm-bindgen gives an exported method its own `&self` but not the state of another
//! object passed as a `JsValue`. So each object keeps its state in an `Rc<RefCell<T>>`
//! registered here under a number that its hidden `_handle()` method returns; a function
//! taking such an object asks the package glue (`__ipuHandleOf`, `scripts/fix-pkg.mjs`),
//! which answers only for a live object it made, through its class's own `_handle()` (so a
//! look-alike, or an object given a `_handle` of its own, names no other object's state),
//! and looks the number up, for the type it expects. Entries are weak: the state lives as
//! long as an object holding it.

use super::super::args::JsResult;
use js_sys::{Function, Reflect};
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use wasm_bindgen::prelude::*;
use wasm_bindgen::{JsCast, JsValue};

#[derive(Default)]
struct Registry {
    next: u32,
    items: HashMap<u32, Weak<dyn Any>>,
    /// Entries after the last sweep of dead ones (the next sweep comes at twice as many).
    swept: usize,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

/// Registers `state`; the number its object's `_handle()` returns.
pub(crate) fn register<T: 'static>(state: &Rc<RefCell<T>>) -> u32 {
    let any: Rc<dyn Any> = state.clone();
    REGISTRY.with(|r| {
        let mut r = r.borrow_mut();
        if r.items.len() >= 2 * r.swept.max(64) {
            r.items.retain(|_, w| w.strong_count() > 0);
            r.swept = r.items.len();
        }
        r.next = r.next.wrapping_add(1);
        let id = r.next;
        r.items.insert(id, Rc::downgrade(&any));
        id
    })
}

#[wasm_bindgen]
extern "C" {
    /// The package glue's reading of a handle (`scripts/fix-pkg.mjs`): for a live object the
    /// glue made, of a class with `_handle()`, that class's own method's answer; undefined
    /// for anything else (a look-alike with a `_handle` of its own included). Without
    /// fix-pkg's glue (the wasm tests) an `Err`: the object's `_handle()` is called.
    #[wasm_bindgen(catch, js_name = __ipuHandleOf)]
    fn glue_handle_of(v: &JsValue) -> Result<JsValue, JsValue>;
}

/// The state of type `T` behind `v`, or `None` when `v` is not one of this package's objects
/// naming live state of that type.
pub(crate) fn lookup<T: 'static>(v: &JsValue) -> JsResult<Option<Rc<RefCell<T>>>> {
    if !v.is_object() {
        return Ok(None);
    }
    let id = match glue_handle_of(v) {
        Ok(id) => id,
        Err(_) => {
            let f = Reflect::get(v, crate::api::args::key("_handle"))?;
            if !f.is_function() {
                return Ok(None);
            }
            f.unchecked_ref::<Function>().call0(v)?
        }
    };
    let Some(id) = id.as_f64().filter(|x| x.fract() == 0.0 && *x >= 0.0 && *x <= u32::MAX as f64) else {
        return Ok(None);
    };
    let any = REGISTRY.with(|r| r.borrow().items.get(&(id as u32)).and_then(Weak::upgrade));
    Ok(any.and_then(|a| a.downcast::<RefCell<T>>().ok()))
}

/// A state object's type for an error message: its constructor's name (read through
/// `Reflect`), or `typeof` for a primitive.
pub(crate) fn type_name(v: &JsValue) -> String {
    if v.is_undefined() {
        return "undefined".into();
    }
    if v.is_null() {
        return "null".into();
    }
    if !(v.is_object() || v.is_function()) {
        return v.js_typeof().as_string().unwrap_or_else(|| "unknown".into());
    }
    if js_sys::Array::is_array(v) {
        return "Array".into();
    }
    Reflect::get(v, &JsValue::from_str("constructor"))
        .ok()
        .and_then(|c| Reflect::get(&c, &JsValue::from_str("name")).ok())
        .and_then(|n| n.as_string())
        .filter(|n| !n.is_empty() && n.len() <= 64 && !n.chars().any(char::is_control))
        .unwrap_or_else(|| "object".into())
}
