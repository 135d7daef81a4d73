//! The 2-D arguments of the vision ops, read once for the `Tensor` methods
//! (`x.conv2d(w, b, { stride })`, `x.maxPool2d(3, { stride: 2 })`) and the modules
//! (`nn.Conv2d`, `nn.MaxPool2d`, …): a size is a whole number `n` (`[n, n]`) or a pair
//! `[h, w]`, the optional ones in an options object with camelCase names.

use super::args::{self, JsResult};
use crate::ir::{Conv2dGeom, Pool2dGeom};
use crate::trace::check::MAX_TENSOR_BYTES;
use wasm_bindgen::{JsCast, JsValue};

/// A 2-D size: a whole number `n` (→ `[n, n]`) or a pair `[h, w]`, each at least `min`;
/// `default` when absent.
pub(super) fn pair(v: &JsValue, what: &str, min: usize, default: Option<[usize; 2]>) -> JsResult<[usize; 2]> {
    if args::is_absent(v) {
        return default.ok_or_else(|| args::type_error(&format!("{what} is required: a whole number or [h, w]")));
    }
    let vals = if v.is_instance_of::<js_sys::Array>() {
        args::integers(v, what, 0, MAX_TENSOR_BYTES as i64)?
    } else {
        vec![args::integer(v, what, 0, MAX_TENSOR_BYTES as i64)?; 2]
    };
    match *vals.as_slice() {
        [h, w] if h >= min as i64 && w >= min as i64 => Ok([h as usize, w as usize]),
        [_, _] => Err(args::range_error(&format!("{what} must be at least {min}, got {vals:?}"))),
        _ => Err(args::type_error(&format!("{what} must be a whole number or [h, w], got {} sizes", vals.len()))),
    }
}

/// The options object of a constructor (`{}` when absent).
pub(super) fn options(v: &JsValue, what: &str) -> JsResult<JsValue> {
    if args::is_absent(v) {
        return Ok(js_sys::Object::new().into());
    }
    if !v.is_object() || v.is_instance_of::<js_sys::Array>() {
        return Err(args::type_error(&format!("{what} must be an options object, got {}", args::describe(v))));
    }
    Ok(v.clone())
}

/// Pooling options: `stride` (default the kernel), `padding`, `dilation`, `ceilMode`.
pub(super) fn pool_geom(kernel: &JsValue, opts: &JsValue, what: &str, dilation: bool) -> JsResult<Pool2dGeom> {
    let kernel = pair(kernel, &format!("{what}: kernelSize"), 1, None)?;
    let o = options(opts, &format!("{what}: options"))?;
    let stride = pair(&args::get(&o, "stride")?, &format!("{what}: stride"), 1, Some(kernel))?;
    let padding = pair(&args::get(&o, "padding")?, &format!("{what}: padding"), 0, Some([0, 0]))?;
    let dilation = match dilation {
        true => pair(&args::get(&o, "dilation")?, &format!("{what}: dilation"), 1, Some([1, 1]))?,
        false => [1, 1],
    };
    let ceil_mode = args::opt_bool(&args::get(&o, "ceilMode")?, &format!("{what}: ceilMode"), false)?;
    Ok(Pool2dGeom { kernel, stride, padding, dilation, ceil_mode })
}

/// Convolution options for a kernel of `kernel`: `stride`, `padding` (sizes, or PyTorch's
/// `"valid"` and `"same"`), `dilation` (sizes) and `groups`; with the zero rows and columns
/// `"same"` pads after the input first (its uneven part, see `Conv2dGeom::same_padding`).
pub(super) fn conv_geom(opts: &JsValue, what: &str, kernel: [usize; 2]) -> JsResult<(Conv2dGeom, [usize; 2])> {
    let stride = pair(&args::get(opts, "stride")?, &format!("{what}: stride"), 1, Some([1, 1]))?;
    let dilation = pair(&args::get(opts, "dilation")?, &format!("{what}: dilation"), 1, Some([1, 1]))?;
    let p = args::get(opts, "padding")?;
    let mut after = [0, 0];
    let padding = match p.as_string().as_deref() {
        Some("valid") => [0, 0],
        Some("same") => {
            let (padding, extra) = Conv2dGeom::same_padding(kernel, stride, dilation)
                .map_err(|e| args::error(&format!("{what}: {}", e.message())))?;
            after = extra;
            padding
        }
        Some(other) => {
            return Err(args::error(&format!(
                "{what}: padding must be a size, [h, w], \"valid\" or \"same\", got the string {other:?}"
            )))
        }
        None => pair(&p, &format!("{what}: padding"), 0, Some([0, 0]))?,
    };
    let g = args::get(opts, "groups")?;
    let groups = if args::is_absent(&g) { 1 } else { args::positive_size(&g, &format!("{what}: groups"))? };
    Ok((Conv2dGeom { stride, padding, dilation, groups }, after))
}
