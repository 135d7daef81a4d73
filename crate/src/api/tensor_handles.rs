//! Which JS objects are `Tensor` handles: a `WeakMap` of the handle objects `tensor.rs`
//! made, to their packed (trace, index). Only those are recognised, so a look-alike object
//! such as `{ _id: 0 }` is not a Tensor, and asking runs none of the caller's code. Below
//! `args.rs`, which names a Tensor argument as "a Tensor" in its messages.

use js_sys::{Object, WeakMap};
use wasm_bindgen::{JsCast, JsValue};

/// Handle indices stay below 2^21, so (trace, index) packs exactly into one f64.
const ID_BITS: f64 = (1u64 << 21) as f64;

thread_local! {
    /// Every handle object made, to its packed (trace, index).
    static HANDLES: WeakMap = WeakMap::new();
}

/// Records `obj` as the handle of (`trace`, `id`).
pub(super) fn mark(obj: &JsValue, trace: u32, id: u32) {
    debug_assert!((id as f64) < ID_BITS);
    HANDLES.with(|h| h.set(obj.unchecked_ref(), &JsValue::from(trace as f64 * ID_BITS + id as f64)));
}

/// The (trace, index) of a handle, without running any of the caller's code.
pub(super) fn handle_of(v: &JsValue) -> Option<(u32, u32)> {
    if !v.is_object() {
        return None;
    }
    let key = HANDLES.with(|h| h.get(v.unchecked_ref::<Object>()));
    let k = key.as_f64()?;
    Some(((k / ID_BITS).floor() as u32, (k % ID_BITS) as u32))
}

/// True for a Tensor handle (of any trace).
pub(super) fn is_handle(v: &JsValue) -> bool {
    handle_of(v).is_some()
}
