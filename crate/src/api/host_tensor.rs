//! Host tensors in JavaScript: the values model wrappers return and accept, and the values
//! of parameters and buffers. One form everywhere, a plain object:
//!
//! ```js
//! { shape: [2, 3], dtype: "float32", data: Float32Array(6) }   // row-major
//! ```
//!
//! `dtype` is `"float32"`, `"float16"`, `"int32"` or `"bool"`; `data` is a `Float32Array`
//! for the float types (a float16 value is the exact value of the half), an `Int32Array`
//! for int32 and a `Uint8Array` of 0 and 1 for bool. Inputs take the same object, or
//! `{ shape, data }` with the dtype read from `data` (`Int32Array` → int32, `Uint8Array` →
//! bool, a `Float32Array` or an array of numbers → float32), and an optional `name` (a
//! model input's name). A `dtype` given with the data converts numbers to it (float16
//! rounds each to the nearest half); int32 data must be whole numbers in the int32 range,
//! bool data 0/1 or booleans. The shape is checked against the tensor limits before the
//! data is read, and the data's length against the shape. A plan's inputs may be
//! shape-only, `{ shape, dtype }` with no `data` (a plan reads only their types).
//!
//! A state dict's values (`loadStateDict`) may also be what a PyTorch user has at hand:
//! PyTorch's `tensor.tolist()`, nested arrays of numbers (rectangular; a plain number is a
//! 0-d tensor), read in the dtype of the parameter they are loaded into ([`from_js_or_nested`]).

use super::args::{self, js_err, range_error, type_error, JsResult};
use crate::ir::TensorType;
use crate::tensor::alloc::{check_shape, try_with_capacity};
use crate::tensor::{DType, Tensor};
use crate::trace::check;
use js_sys::{Array, ArrayBuffer, Function, Int32Array, Object, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};

/// The dtype's name in a host tensor.
pub(crate) fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::Float32 => "float32",
        DType::Float16 => "float16",
        DType::Int32 => "int32",
        DType::Bool => "bool",
    }
}

fn set(obj: &Object, key: &str, v: &JsValue) -> JsResult<()> {
    Reflect::set(obj, &JsValue::from_str(key), v)?;
    Ok(())
}

/// `t` as a host tensor object (its data copied out of wasm memory).
pub(crate) fn to_js(t: &Tensor) -> JsResult<JsValue> {
    let obj = Object::new();
    let shape = Array::new();
    for &d in t.shape() {
        shape.push(&JsValue::from(d as f64));
    }
    set(&obj, "shape", &shape)?;
    set(&obj, "dtype", &JsValue::from_str(dtype_name(t.dtype())))?;
    let data: JsValue = match t {
        Tensor::F32(_) | Tensor::F16(_) => {
            let v = t.to_f32_vec();
            js_sys::Float32Array::from(v.as_slice()).into()
        }
        Tensor::I32(a) => {
            let v: Vec<i32> = a.iter().copied().collect();
            Int32Array::from(v.as_slice()).into()
        }
        Tensor::Bool(a) => {
            let v: Vec<u8> = a.iter().map(|&b| b as u8).collect();
            Uint8Array::from(v.as_slice()).into()
        }
    };
    set(&obj, "data", &data)?;
    Ok(obj.into())
}

/// A fresh typed array of class `ctor` made from the caller's typed array `v` by the engine
/// (its length and contents are then genuine, whatever getters `v` has).
fn typed_copy(v: &JsValue, ctor: &'static str) -> JsResult<JsValue> {
    let c: Function = args::get(&js_sys::global(), ctor)?.unchecked_into();
    Reflect::construct(&c, &Array::of1(v))
}

fn length_mismatch(what: &str, n: usize, len: f64) -> JsValue {
    range_error(&format!("{what} must hold {n} values (the shape's element count), got {}", check::js_number(len)))
}

fn is_typed(v: &JsValue) -> bool {
    ArrayBuffer::is_view(v) && !v.is_instance_of::<js_sys::DataView>()
}

/// Exactly `n` values of the plain array `v`, each read by `read` (item, index); otherwise a
/// TypeError saying `v` must be `must_be`, or a RangeError for a length other than `n`.
fn array_values<T>(
    v: &JsValue,
    what: &str,
    n: usize,
    must_be: &str,
    mut read: impl FnMut(JsValue, usize) -> JsResult<T>,
) -> JsResult<Vec<T>> {
    if !v.is_instance_of::<Array>() {
        return Err(type_error(&format!("{what} must be {must_be}, got {}", args::describe(v))));
    }
    let len = args::number(&args::get(v, "length")?, &format!("{what}.length"))?;
    if len != n as f64 {
        return Err(length_mismatch(what, n, len));
    }
    let mut out = try_with_capacity(what, n).map_err(js_err)?;
    for i in 0..n {
        out.push(read(Reflect::get_u32(v, i as u32)?, i)?);
    }
    Ok(out)
}

/// Exactly `n` int32 values: an `Int32Array`, or an array of whole numbers in range.
fn i32_values(v: &JsValue, what: &str, n: usize) -> JsResult<Vec<i32>> {
    if v.is_instance_of::<Int32Array>() {
        let copy: Int32Array = typed_copy(v, "Int32Array")?.unchecked_into();
        if copy.length() as usize != n {
            return Err(length_mismatch(what, n, copy.length() as f64));
        }
        let mut out = try_with_capacity(what, n).map_err(js_err)?;
        out.resize(n, 0);
        copy.copy_to(&mut out);
        return Ok(out);
    }
    array_values(v, what, n, "an Int32Array or an array of whole numbers", |item, i| {
        Ok(args::integer(&item, &format!("{what}[{i}]"), i32::MIN as i64, i32::MAX as i64)? as i32)
    })
}

/// Exactly `n` booleans: a `Uint8Array` of 0 and 1, or an array of booleans.
fn bool_values(v: &JsValue, what: &str, n: usize) -> JsResult<Vec<bool>> {
    if v.is_instance_of::<Uint8Array>() {
        let copy: Uint8Array = typed_copy(v, "Uint8Array")?.unchecked_into();
        if copy.length() as usize != n {
            return Err(length_mismatch(what, n, copy.length() as f64));
        }
        let mut bytes = try_with_capacity(what, n).map_err(js_err)?;
        bytes.resize(n, 0u8);
        copy.copy_to(&mut bytes);
        if let Some(i) = bytes.iter().position(|&b| b > 1) {
            return Err(range_error(&format!("{what}[{i}] must be 0 or 1 for a bool tensor, got {}", bytes[i])));
        }
        return Ok(bytes.into_iter().map(|b| b == 1).collect());
    }
    array_values(v, what, n, "a Uint8Array of 0 and 1 or an array of booleans", |item, i| {
        item.as_bool()
            .ok_or_else(|| type_error(&format!("{what}[{i}] must be a boolean, got {}", args::describe(&item))))
    })
}

/// A host tensor from `v` (see the module docs), with its optional `name`. `what` names
/// the argument in errors.
pub(crate) fn from_js_named(v: &JsValue, what: &str) -> JsResult<(Option<String>, Tensor)> {
    match parse(v, what, false)? {
        (name, _, Some(t)) => Ok((name, t)),
        (_, _, None) => unreachable!("data is required"),
    }
}

/// A host tensor from `v` as [`from_js_named`] reads it, or a shape-only one
/// (`{ shape, dtype }`, no `data`: a plan reads only types): its name, type and value if
/// given.
pub(crate) fn from_js_named_or_type(v: &JsValue, what: &str) -> JsResult<(Option<String>, TensorType, Option<Tensor>)> {
    parse(v, what, true)
}

fn parse(v: &JsValue, what: &str, type_only: bool) -> JsResult<(Option<String>, TensorType, Option<Tensor>)> {
    if !v.is_object() || v.is_instance_of::<Array>() || is_typed(v) {
        return Err(type_error(&format!(
            "{what} must be a host tensor {{ shape, data, dtype? }}, got {}",
            args::describe(v)
        )));
    }
    let name = args::get(v, "name")?;
    let name = if args::is_absent(&name) { None } else { Some(args::name(&name, &format!("{what}.name"))?) };
    let shape = args::get(v, "shape")?;
    if args::is_absent(&shape) {
        return Err(type_error(&format!("{what} needs a shape, an array of sizes ({what}.shape)")));
    }
    let dims = args::shape(&shape, &format!("{what}.shape"))?;
    let data = args::get(v, "data")?;
    let dtype = args::get(v, "dtype")?;
    let dtype = if args::is_absent(&dtype) {
        if data.is_instance_of::<Int32Array>() {
            DType::Int32
        } else if data.is_instance_of::<Uint8Array>() {
            DType::Bool
        } else {
            DType::Float32
        }
    } else {
        let s = args::string(&dtype, &format!("{what}.dtype"), 16)?;
        DType::parse(&s).map_err(|e| args::error(&format!("{what}.dtype: {e}")))?
    };
    if type_only && args::is_absent(&data) {
        // Described, never allocated: only the micro-batch's shape is made (and checked).
        let dims = crate::tensor::alloc::check_type_shape(what, &dims, dtype).map_err(js_err)?;
        return Ok((name, TensorType { shape: dims, dtype }, None));
    }
    let dims = check_shape(what, &dims, dtype).map_err(js_err)?;
    let ty = TensorType { shape: dims.clone(), dtype };
    let n: usize = dims.iter().product();
    let data_what = format!("{what}.data");
    let t = match dtype {
        DType::Float32 => Tensor::from_f32(&dims, args::f32_values(&data, &data_what, n)?),
        DType::Float16 => Tensor::from_f32_as_f16(&dims, &args::f32_values(&data, &data_what, n)?),
        DType::Int32 => Tensor::from_i32(&dims, i32_values(&data, &data_what, n)?),
        DType::Bool => Tensor::from_bool(&dims, bool_values(&data, &data_what, n)?),
    }
    .map_err(|e| args::error(&format!("{what}: {e}")))?;
    Ok((name, ty, Some(t)))
}

/// A host tensor from `v` (its `name`, if any, ignored).
pub(crate) fn from_js(v: &JsValue, what: &str) -> JsResult<Tensor> {
    from_js_named(v, what).map(|(_, t)| t)
}

/// A host tensor from `v`, or PyTorch's `tensor.tolist()` (nested arrays of numbers, or a
/// number) read as a `dtype` tensor: the shape is the nesting's, every array at one depth
/// must have the same length, and the leaves must be numbers (booleans for bool).
pub(crate) fn from_js_or_nested(v: &JsValue, what: &str, dtype: DType) -> JsResult<Tensor> {
    if !v.is_instance_of::<Array>() && v.as_f64().is_none() && v.as_bool().is_none() {
        return from_js(v, what);
    }
    // The shape: the first item at each depth, down to a leaf.
    let mut dims: Vec<u64> = Vec::new();
    let mut probe = v.clone();
    while probe.is_instance_of::<Array>() {
        if dims.len() == check::MAX_RANK {
            return Err(range_error(&format!("{what} nests arrays more than {} deep", check::MAX_RANK)));
        }
        let len = args::count(&args::get(&probe, "length")?, &format!("{what}.length"), u32::MAX as usize)?;
        dims.push(len as u64);
        if len == 0 {
            break;
        }
        probe = Reflect::get_u32(&probe, 0)?;
    }
    let dims = check_shape(what, &dims, dtype).map_err(js_err)?;
    let n: usize = dims.iter().product();
    let mut leaves: Vec<JsValue> = try_with_capacity(what, n).map_err(js_err)?;
    flatten(v, &dims, what, &mut leaves)?;
    let number = |i: usize| args::number(&leaves[i], &format!("{what} (value {i} in row-major order)"));
    let t = match dtype {
        DType::Float32 => {
            Tensor::from_f32(&dims, (0..n).map(|i| number(i).map(|x| x as f32)).collect::<JsResult<_>>()?)
        }
        DType::Float16 => {
            Tensor::from_f32_as_f16(&dims, &(0..n).map(|i| number(i).map(|x| x as f32)).collect::<JsResult<Vec<_>>>()?)
        }
        DType::Int32 => Tensor::from_i32(
            &dims,
            (0..n)
                .map(|i| {
                    args::integer(&leaves[i], &format!("{what} (value {i})"), i32::MIN as i64, i32::MAX as i64)
                        .map(|x| x as i32)
                })
                .collect::<JsResult<_>>()?,
        ),
        DType::Bool => Tensor::from_bool(
            &dims,
            (0..n)
                .map(|i| {
                    let l = &leaves[i];
                    l.as_bool().or(l.as_f64().filter(|x| *x == 0.0 || *x == 1.0).map(|x| x == 1.0)).ok_or_else(|| {
                        type_error(&format!("{what} (value {i}) must be a boolean or 0/1, got {}", args::describe(l)))
                    })
                })
                .collect::<JsResult<_>>()?,
        ),
    }
    .map_err(|e| args::error(&format!("{what}: {e}")))?;
    Ok(t)
}

/// The leaves of the nested arrays `v` of shape `dims`, in row-major order; an array of
/// another length, or a leaf where an array belongs (or the reverse), names its place.
fn flatten(v: &JsValue, dims: &[usize], at: &str, out: &mut Vec<JsValue>) -> JsResult<()> {
    let Some((&n, rest)) = dims.split_first() else {
        if v.is_instance_of::<Array>() {
            return Err(type_error(&format!("{at} must be a number (the nesting is ragged), got an array")));
        }
        out.push(v.clone());
        return Ok(());
    };
    if !v.is_instance_of::<Array>() {
        return Err(type_error(&format!(
            "{at} must be an array of {n} (the nesting is ragged), got {}",
            args::describe(v)
        )));
    }
    let len = args::number(&args::get(v, "length")?, &format!("{at}.length"))?;
    if len != n as f64 {
        return Err(range_error(&format!(
            "{at} must hold {n} items like the others at its depth, got {}",
            check::js_number(len)
        )));
    }
    for i in 0..n {
        flatten(&Reflect::get_u32(v, i as u32)?, rest, &format!("{at}[{i}]"), out)?;
    }
    Ok(())
}
