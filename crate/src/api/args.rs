//! JavaScript values into Rust ones, at the edge. Every number, string, boolean, list and
//! byte array an exported function takes arrives as a `JsValue` and goes through these, so
//! that a wrong type is a `TypeError` naming the argument (wasm-bindgen's own conversions
//! would truncate 4.7 to 4, wrap -1 to 4294967295, turn "4" into 4, and read a number
//! passed as a string out of bounds). Ranges and names are checked by the core's rules
//! (`trace::check`, `tensor::alloc`), whose errors carry their JS class.
//!
//! Two rules keep the module working after any rejected call: no JS exception unwinds
//! through Rust frames (every property read, call and conversion of a caller's value is a
//! `Reflect`/`catch` import that returns the exception as an `Err`; a getter, a Proxy
//! trap or a `valueOf` can run user code), and nothing is allocated before its length is
//! checked, then only fallibly.

use crate::tensor::alloc::try_with_capacity;
use crate::trace::check::{self, ArgError, ArgErrorKind};
use js_sys::{Array, ArrayBuffer, Float32Array, Function, JsString, Object, Reflect, Uint8Array};
use std::cell::RefCell;
use std::collections::HashMap;
use wasm_bindgen::{JsCast, JsValue};

pub(crate) type JsResult<T> = Result<T, JsValue>;

/// `err` with the structured fields JS callers read instead of the message: `kind` (the
/// layer that raised it, [`crate::ErrorKind::as_str`]), and where known `code`, `fix` and
/// `option` (a plan's diagnostic: its stable code, how to fix it, the `poptorch.Options`
/// key it is about), and `source`: the `file:line` of the traced op it is about (the call
/// that recorded it). Setting a property on an error just made cannot throw.
fn with_fields(err: JsValue, kind: &str, fields: &[(&str, Option<&str>)]) -> JsValue {
    let set = |key: &str, v: &str| {
        let _ = Reflect::set(&err, &JsValue::from_str(key), &JsValue::from_str(v));
    };
    set("kind", kind);
    for &(key, v) in fields {
        if let Some(v) = v {
            set(key, v);
        }
    }
    err
}

/// A plain `Error` with `message`, about what the caller handed the API (`kind` "arg").
pub(crate) fn error(message: &str) -> JsValue {
    with_fields(js_sys::Error::new(message).into(), "arg", &[])
}

/// A `TypeError` with `message` (`kind` "arg").
pub(crate) fn type_error(message: &str) -> JsValue {
    with_fields(js_sys::TypeError::new(message).into(), "arg", &[])
}

/// A `RangeError` with `message` (`kind` "arg").
pub(crate) fn range_error(message: &str) -> JsValue {
    with_fields(js_sys::RangeError::new(message).into(), "arg", &[])
}

/// A core error (or anything that converts into one: a plan's `Diagnostic`) as a JS
/// `Error`: its message, `kind`, and `code`, `fix` and `option` where it has them. The one
/// place a core error crosses into JS.
pub(crate) fn js_err(e: impl Into<crate::Error>) -> JsValue {
    let e: crate::Error = e.into();
    let fields = [("code", e.code()), ("fix", e.fix()), ("option", e.option()), ("source", e.source())];
    with_fields(js_sys::Error::new(e.message()).into(), e.kind().as_str(), &fields)
}

/// A rejected argument as the JS error of its kind (`kind` "arg").
pub(crate) fn arg_err(e: ArgError) -> JsValue {
    match e.kind {
        ArgErrorKind::Type => type_error(&e.message),
        ArgErrorKind::Range => range_error(&e.message),
        ArgErrorKind::Value => error(&e.message),
    }
}

/// `err` (a JS error) about `key`, the caller's option or configuration key: its `option`.
pub(crate) fn on_option(err: JsValue, key: Option<&str>) -> JsValue {
    if let Some(k) = key {
        let _ = Reflect::set(&err, &JsValue::from_str("option"), &JsValue::from_str(k));
    }
    err
}

/// `v`, described for an error message without running any of the caller's code.
pub(crate) fn describe(v: &JsValue) -> String {
    if v.is_undefined() {
        "undefined".into()
    } else if v.is_null() {
        "null".into()
    } else if let Some(b) = v.as_bool() {
        format!("the boolean {b}")
    } else if let Some(x) = v.as_f64() {
        format!("the number {}", check::js_number(x))
    } else if v.is_string() {
        let s: &JsString = v.unchecked_ref();
        if s.length() > 40 {
            format!("a string of {} characters", s.length())
        } else {
            format!("the string {:?}", v.as_string().unwrap_or_default())
        }
    } else if v.is_bigint() {
        "a bigint".into()
    } else if v.is_symbol() {
        "a symbol".into()
    } else if v.is_function() {
        "a function".into()
    } else if v.is_instance_of::<Array>() {
        "an array".into()
    } else if super::tensor_handles::is_handle(v) {
        "a Tensor".into()
    } else {
        "an object".into()
    }
}

fn not_a(what: &str, want: &str, v: &JsValue) -> JsValue {
    type_error(&format!("{what} must be {want}, got {}", describe(v)))
}

/// True for `undefined` and `null`: an optional argument left out.
pub(crate) fn is_absent(v: &JsValue) -> bool {
    v.is_undefined() || v.is_null()
}

/// A number (any, NaN included).
pub(crate) fn number(v: &JsValue, what: &str) -> JsResult<f64> {
    v.as_f64().ok_or_else(|| not_a(what, "a number", v))
}

/// A whole number from 0 to `max`.
pub(crate) fn whole(v: &JsValue, what: &str, max: u64) -> JsResult<u64> {
    check::whole(number(v, what)?, what, max).map_err(arg_err)
}

/// A whole number from 0 to `max` that fits `usize` on wasm32 (`max` < 2^32).
pub(crate) fn count(v: &JsValue, what: &str, max: usize) -> JsResult<usize> {
    whole(v, what, max as u64).map(|n| n as usize)
}

/// [`count`], or `None` when left out.
pub(crate) fn opt_count(v: &JsValue, what: &str, max: usize) -> JsResult<Option<usize>> {
    if is_absent(v) {
        return Ok(None);
    }
    count(v, what, max).map(Some)
}

/// A whole number from `min` to `max`, either sign.
pub(crate) fn integer(v: &JsValue, what: &str, min: i64, max: i64) -> JsResult<i64> {
    check::integer(number(v, what)?, what, min, max).map_err(arg_err)
}

/// A boolean, or `default` when left out.
pub(crate) fn opt_bool(v: &JsValue, what: &str, default: bool) -> JsResult<bool> {
    if is_absent(v) {
        return Ok(default);
    }
    v.as_bool().ok_or_else(|| not_a(what, "a boolean", v))
}

/// A string of at most `max` UTF-16 units (checked before it is copied into wasm).
pub(crate) fn string(v: &JsValue, what: &str, max: usize) -> JsResult<String> {
    if !v.is_string() {
        return Err(not_a(what, "a string", v));
    }
    let len = v.unchecked_ref::<JsString>().length() as usize;
    if len > max {
        return Err(range_error(&format!("{what} must be at most {max} characters long, got {len}")));
    }
    Ok(v.as_string().unwrap_or_default())
}

/// A name: a string that [`check::name`] accepts.
pub(crate) fn name(v: &JsValue, what: &str) -> JsResult<String> {
    let s = string(v, what, check::MAX_NAME_BYTES)?;
    check::name(what, &s).map_err(arg_err)?;
    Ok(s)
}

/// A function.
pub(crate) fn function(v: &JsValue, what: &str) -> JsResult<Function> {
    if !v.is_function() {
        return Err(not_a(what, "a function", v));
    }
    Ok(v.clone().unchecked_into())
}

/// An object (not `null`, not a primitive; functions count).
pub(crate) fn object(v: &JsValue, what: &str) -> JsResult<Object> {
    if !(v.is_object() || v.is_function()) {
        return Err(not_a(what, "an object", v));
    }
    if let Some(kind) = container_kind(v) {
        return Err(type_error(&format!(
            "{what} must be a plain object ({{ key: value, … }}), got {kind}: its entries are not its properties"
        )));
    }
    Ok(v.clone().unchecked_into())
}

/// What `v` is when it is an object whose contents are not its own properties (an array,
/// a Map, a Set, a typed array, …): read as keyed options it would look empty or hold
/// indices, and be accepted silently. `instanceof` runs no caller code that can throw
/// through Rust (wasm-bindgen's check catches a Proxy's trap).
fn container_kind(v: &JsValue) -> Option<&'static str> {
    if v.is_instance_of::<Array>() {
        Some("an array")
    } else if v.is_instance_of::<js_sys::Map>() || v.is_instance_of::<js_sys::WeakMap>() {
        Some("a Map")
    } else if v.is_instance_of::<js_sys::Set>() || v.is_instance_of::<js_sys::WeakSet>() {
        Some("a Set")
    } else if ArrayBuffer::is_view(v) || v.is_instance_of::<ArrayBuffer>() {
        Some("a typed array or buffer")
    } else if v.is_instance_of::<js_sys::Date>() || v.is_instance_of::<js_sys::RegExp>() {
        Some("a Date or RegExp")
    } else if v.is_instance_of::<js_sys::Promise>() {
        Some("a Promise (await it first)")
    } else {
        None
    }
}

thread_local! {
    /// The JS string of each property key the package reads by a name written in its code
    /// (`forward`, `length`, `_stateNames`, …), made once: a JS string made from Rust is a
    /// `TextDecoder` call, and a walk of a 1,000-layer model's tree reads such keys some
    /// 100,000 times. Keyed by the literal's address and length (a `&'static str` lives as
    /// long as the module); the values are never freed (one per literal).
    static KEYS: RefCell<HashMap<(usize, usize), &'static JsValue>> = RefCell::new(HashMap::new());
}

/// The JS string `key`, made once per literal (see `KEYS`).
pub(crate) fn key(key: &'static str) -> &'static JsValue {
    let id = (key.as_ptr() as usize, key.len());
    if let Some(v) = KEYS.with(|k| k.borrow().get(&id).copied()) {
        return v;
    }
    // Made outside the borrow (making a string calls into JS, which may call back into Rust).
    let v: &'static JsValue = Box::leak(Box::new(JsValue::from_str(key)));
    KEYS.with(|k| *k.borrow_mut().entry(id).or_insert(v))
}

/// `obj[key]`, a getter's or Proxy's exception returned as the error.
pub(crate) fn get(obj: &JsValue, key: &'static str) -> JsResult<JsValue> {
    Reflect::get(obj, self::key(key))
}

/// The items of an array of at most `max` items, each read through `Reflect` (a Proxy's
/// traps and getters may throw: that is the error).
pub(crate) fn list(v: &JsValue, what: &str, max: usize) -> JsResult<Vec<JsValue>> {
    if !v.is_instance_of::<Array>() {
        return Err(not_a(what, "an array", v));
    }
    let len = get(v, "length")?;
    let n = count(&len, &format!("{what}.length"), max)?;
    let mut items = try_with_capacity(what, n).map_err(js_err)?;
    for i in 0..n {
        items.push(Reflect::get_u32(v, i as u32)?);
    }
    Ok(items)
}

/// A shape: an array of at most [`check::MAX_RANK`] whole numbers (each at most 2^53 − 1;
/// the tensor limits are checked on the whole shape by `tensor::alloc::check_shape`).
pub(crate) fn shape(v: &JsValue, what: &str) -> JsResult<Vec<u64>> {
    if !v.is_instance_of::<Array>() {
        return Err(not_a(what, "an array of sizes", v));
    }
    let n = count(&get(v, "length")?, &format!("{what}.length"), check::MAX_RANK)?;
    (0..n).map(|i| whole(&Reflect::get_u32(v, i as u32)?, &format!("{what}[{i}]"), check::MAX_SEED)).collect()
}

/// A list of at most [`check::MAX_RANK`] integers from `min` to `max` (dims, sizes with -1).
pub(crate) fn integers(v: &JsValue, what: &str, min: i64, max: i64) -> JsResult<Vec<i64>> {
    if !v.is_instance_of::<Array>() {
        return Err(not_a(what, "an array of whole numbers", v));
    }
    let n = count(&get(v, "length")?, &format!("{what}.length"), check::MAX_RANK)?;
    (0..n).map(|i| integer(&Reflect::get_u32(v, i as u32)?, &format!("{what}[{i}]"), min, max)).collect()
}

/// `what` must hold `n` values but holds `len`.
fn f32_mismatch(what: &str, n: usize, len: f64) -> JsValue {
    range_error(&format!("{what} must hold {n} values (the shape's element count), got {}", check::js_number(len)))
}

/// A fresh Float32Array made by the engine from the caller's typed array `v` of `n` values
/// (a BigInt array throws here, and that is the error): its length and contents are genuine,
/// whatever the caller's object does later. It lives in JS, outside wasm memory.
pub(crate) fn f32_copy(v: &JsValue, what: &str, n: usize) -> JsResult<Float32Array> {
    let ctor: Function = get(&js_sys::global(), "Float32Array")?.unchecked_into();
    let copy: Float32Array = Reflect::construct(&ctor, &Array::of1(v))?.unchecked_into();
    if copy.length() as usize != n {
        return Err(f32_mismatch(what, n, copy.length() as f64));
    }
    Ok(copy)
}

/// Exactly `n` float values: an array of numbers, or a typed array of numbers (copied by
/// the engine, so no per-item calls). The length is checked against `n` before anything
/// is copied into wasm.
pub(crate) fn f32_values(v: &JsValue, what: &str, n: usize) -> JsResult<Vec<f32>> {
    let mismatch = |len: f64| f32_mismatch(what, n, len);
    if ArrayBuffer::is_view(v) && !v.is_instance_of::<js_sys::DataView>() {
        let len = get(v, "length")?;
        if len.as_f64() != Some(n as f64) {
            return Err(mismatch(len.as_f64().unwrap_or(f64::NAN)));
        }
        let copy = f32_copy(v, what, n)?;
        let mut out = try_with_capacity(what, n).map_err(js_err)?;
        out.resize(n, 0.0);
        copy.copy_to(&mut out);
        return Ok(out);
    }
    if !v.is_instance_of::<Array>() {
        return Err(not_a(what, "an array of numbers or a Float32Array", v));
    }
    let len = number(&get(v, "length")?, &format!("{what}.length"))?;
    if len != n as f64 {
        return Err(mismatch(len));
    }
    let mut out = try_with_capacity(what, n).map_err(js_err)?;
    for i in 0..n {
        let item = Reflect::get_u32(v, i as u32)?;
        out.push(number(&item, &format!("{what}[{i}]"))? as f32);
    }
    Ok(out)
}

/// The bytes of a `Uint8Array` of at most `max` bytes (copied fallibly).
pub(crate) fn bytes(v: &JsValue, what: &str, max: usize) -> JsResult<Vec<u8>> {
    if !ArrayBuffer::is_view(v) || !v.is_instance_of::<Uint8Array>() {
        return Err(not_a(what, "a Uint8Array", v));
    }
    let len = get(v, "length")?.as_f64().unwrap_or(0.0);
    if len > max as f64 {
        return Err(range_error(&format!(
            "{what} holds {} bytes, more than the limit of {max}",
            check::js_number(len)
        )));
    }
    let ctor: Function = get(&js_sys::global(), "Uint8Array")?.unchecked_into();
    let copy: Uint8Array = Reflect::construct(&ctor, &Array::of1(v))?.unchecked_into();
    let n = copy.length() as usize;
    if n > max {
        return Err(range_error(&format!("{what} holds {n} bytes, more than the limit of {max}")));
    }
    let mut out = try_with_capacity(what, n).map_err(js_err)?;
    out.resize(n, 0);
    copy.copy_to(&mut out);
    Ok(out)
}

/// The own enumerable string-keyed properties of `obj` with their values (what
/// `Object.entries` gives), at most `max` of them; getters run, and their exceptions are
/// the error. Keys stay JS strings: a caller turns the ones it uses into names.
pub(crate) fn entries(obj: &JsValue, what: &str, max: usize) -> JsResult<Vec<(JsValue, JsValue)>> {
    let keys = Reflect::own_keys(obj)?;
    let mut out = Vec::new();
    for key in keys.iter() {
        if !key.is_string() {
            continue; // symbols
        }
        let desc = Reflect::get_own_property_descriptor(obj.unchecked_ref::<Object>(), &key)?;
        if desc.is_undefined() || !get(&desc, "enumerable")?.is_truthy() {
            continue;
        }
        if out.len() == max {
            return Err(range_error(&format!("{what} has more than {max} properties")));
        }
        let value = Reflect::get(obj, &key)?;
        out.push((key, value));
    }
    Ok(out)
}

/// An options bag (`what`, e.g. "trace: options") holding at most one boolean, `key`
/// (`default` when absent); any other key is an Error naming it: "{what} has no {noun} …:
/// the {nouns} are {key}".
pub(crate) fn one_flag(v: &JsValue, what: &str, key: &str, default: bool, noun: &str, nouns: &str) -> JsResult<bool> {
    if is_absent(v) {
        return Ok(default);
    }
    object(v, what)?;
    let mut flag = default;
    for (k, x) in entries(v, what, 16)? {
        if k.as_string().as_deref() == Some(key) {
            flag = opt_bool(&x, &format!("{what}.{key}"), default)?;
        } else {
            return Err(error(&format!("{what} has no {noun} {}: the {nouns} are {key}", describe(&k))));
        }
    }
    Ok(flag)
}

/// A size of a built-in module: whole, from 1 (the tensor limits bound the product).
pub(super) fn positive_size(v: &JsValue, what: &str) -> JsResult<usize> {
    let n = count(v, what, crate::trace::check::MAX_TENSOR_BYTES)?;
    if n == 0 {
        return Err(range_error(&format!("{what} must be at least 1, got 0")));
    }
    Ok(n)
}
