//! `Tensor`, a tracing tensor handed to JavaScript: its ops record nodes in the running
//! trace (see `nn.rs`), and `concat`.
//!
//! A handle belongs to its trace: it carries the trace's number and its index there, and
//! only handles this module made are recognised (a `WeakMap` of the handle objects, so a
//! look-alike object such as `{ _id: 0 }` is not a Tensor). A handle kept from a trace that
//! has ended is a clear error instead of naming whatever has its index in the next trace.

use super::args::{self, js_err, JsResult};
use super::session::{at_js_caller, lookup_var, register_var};
use super::tensor_handles::{self, handle_of};
use crate::tensor::DType;
use crate::trace::check::{MAX_LIST, MAX_RANK, MAX_TENSOR_BYTES};
use crate::trace::{concat as rconcat, Var};
use wasm_bindgen::prelude::*;

/// A tracing tensor: the result of an op recorded in the running trace. Valid only inside
/// the `trace(...)` call that made it.
#[wasm_bindgen]
pub struct Tensor {
    trace: u32,
    id: u32,
}

/// The JS object for a new handle to `v` in the running trace.
pub(super) fn wrap(v: Var) -> JsResult<JsValue> {
    let (trace, id) = register_var(v)?;
    let obj = JsValue::from(Tensor { trace, id });
    tensor_handles::mark(&obj, trace, id);
    Ok(obj)
}

/// The traced value of the argument `what`, which must be a Tensor of the running trace.
pub(super) fn tensor_arg(v: &JsValue, what: &str) -> JsResult<Var> {
    match handle_of(v) {
        Some((trace, id)) => lookup_var(trace, id),
        None => Err(args::type_error(&format!("{what} must be a Tensor, got {}", args::describe(v)))),
    }
}

/// An optional Tensor argument.
fn opt_tensor_arg(v: &JsValue, what: &str) -> JsResult<Option<Var>> {
    if args::is_absent(v) {
        return Ok(None);
    }
    tensor_arg(v, what).map(Some)
}

/// A dim: a whole number from -16 to 15 (the tracer checks it against the tensor's rank).
fn dim_arg(v: &JsValue, what: &str) -> JsResult<isize> {
    args::integer(v, what, -(MAX_RANK as i64), MAX_RANK as i64 - 1).map(|d| d as isize)
}

fn opt_dims(v: &JsValue, what: &str) -> JsResult<Vec<isize>> {
    if args::is_absent(v) {
        return Ok(Vec::new());
    }
    let d = args::integers(v, what, -(MAX_RANK as i64), MAX_RANK as i64 - 1)?;
    Ok(d.into_iter().map(|d| d as isize).collect())
}

impl Tensor {
    fn var(&self) -> JsResult<Var> {
        lookup_var(self.trace, self.id)
    }

    /// Records `f` on this tensor, at the JS caller's line.
    fn op(&self, f: impl FnOnce(&Var) -> crate::Result<Var>) -> JsResult<JsValue> {
        let v = self.var()?;
        at_js_caller(v.tracer(), || f(&v)).map_err(js_err).and_then(wrap)
    }

    fn binary(&self, o: &JsValue, what: &str, f: impl FnOnce(&Var, &Var) -> crate::Result<Var>) -> JsResult<JsValue> {
        let o = tensor_arg(o, &format!("Tensor.{what}: other"))?;
        self.op(|v| f(v, &o))
    }
}

#[wasm_bindgen]
impl Tensor {
    /// The static shape.
    #[wasm_bindgen(getter)]
    pub fn shape(&self) -> Result<Vec<usize>, JsValue> {
        Ok(self.var()?.shape().to_vec())
    }
    /// The dtype: "f32", "f16", "i32" or "bool".
    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> Result<String, JsValue> {
        Ok(self.var()?.dtype().to_string())
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn add(&self, #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue) -> JsResult<JsValue> {
        self.binary(&other, "add", Var::add)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn sub(&self, #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue) -> JsResult<JsValue> {
        self.binary(&other, "sub", Var::sub)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn mul(&self, #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue) -> JsResult<JsValue> {
        self.binary(&other, "mul", Var::mul)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn div(&self, #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue) -> JsResult<JsValue> {
        self.binary(&other, "div", Var::div)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn pow(&self, #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue) -> JsResult<JsValue> {
        self.binary(&other, "pow", Var::pow)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn matmul(&self, #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue) -> JsResult<JsValue> {
        self.binary(&other, "matmul", Var::matmul)
    }
    /// `self * s` for a number `s`.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn scale(&self, #[wasm_bindgen(unchecked_param_type = "number")] s: JsValue) -> JsResult<JsValue> {
        let s = args::number(&s, "Tensor.scale: s")?;
        self.op(|v| v.scale(s))
    }
    /// Dropout with a keep mask drawn once (`randomMask(shape, p)`): `self * mask / (1 - p)`
    /// in training. RevGNN draws one mask and shares it by every layer.
    #[wasm_bindgen(js_name = dropoutWithMask, unchecked_return_type = "Tensor")]
    pub fn dropout_with_mask(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] mask: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] p: JsValue,
    ) -> JsResult<JsValue> {
        let m = tensor_arg(&mask, "Tensor.dropoutWithMask: mask")?;
        let p = args::number(&p, "Tensor.dropoutWithMask: p")?;
        if !(0.0..1.0).contains(&p) {
            return Err(args::range_error(&format!(
                "Tensor.dropoutWithMask: p must be in [0, 1), got {}",
                crate::trace::check::js_number(p)
            )));
        }
        self.op(|v| v.dropout_with_mask(&m, p as f32))
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn neg(&self) -> JsResult<JsValue> {
        self.op(Var::neg)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn exp(&self) -> JsResult<JsValue> {
        self.op(Var::exp)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn log(&self) -> JsResult<JsValue> {
        self.op(Var::log)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn sqrt(&self) -> JsResult<JsValue> {
        self.op(Var::sqrt)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn relu(&self) -> JsResult<JsValue> {
        self.op(Var::relu)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn gelu(&self) -> JsResult<JsValue> {
        self.op(Var::gelu)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn tanh(&self) -> JsResult<JsValue> {
        self.op(Var::tanh)
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn sigmoid(&self) -> JsResult<JsValue> {
        self.op(Var::sigmoid)
    }
    /// Sum over `dims` (all when omitted); dims are whole numbers from -16 to 15.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn sum(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number[]")] dims: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] keepdim: JsValue,
    ) -> JsResult<JsValue> {
        let d = opt_dims(&dims, "Tensor.sum: dims")?;
        let k = args::opt_bool(&keepdim, "Tensor.sum: keepdim", false)?;
        self.op(|v| v.sum(&d, k))
    }
    /// Mean over `dims` (all when omitted).
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn mean(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number[]")] dims: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] keepdim: JsValue,
    ) -> JsResult<JsValue> {
        let d = opt_dims(&dims, "Tensor.mean: dims")?;
        let k = args::opt_bool(&keepdim, "Tensor.mean: keepdim", false)?;
        self.op(|v| v.mean(&d, k))
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn max(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] dim: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] keepdim: JsValue,
    ) -> JsResult<JsValue> {
        let d = dim_arg(&dim, "Tensor.max: dim")?;
        let k = args::opt_bool(&keepdim, "Tensor.max: keepdim", false)?;
        self.op(|v| v.max(d, k))
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn argmax(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] dim: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] keepdim: JsValue,
    ) -> JsResult<JsValue> {
        let d = dim_arg(&dim, "Tensor.argmax: dim")?;
        let k = args::opt_bool(&keepdim, "Tensor.argmax: keepdim", false)?;
        self.op(|v| v.argmax(d, k))
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn softmax(&self, #[wasm_bindgen(unchecked_param_type = "number")] dim: JsValue) -> JsResult<JsValue> {
        let d = dim_arg(&dim, "Tensor.softmax: dim")?;
        self.op(|v| v.softmax(d))
    }
    #[wasm_bindgen(js_name = logSoftmax, unchecked_return_type = "Tensor")]
    pub fn log_softmax(&self, #[wasm_bindgen(unchecked_param_type = "number")] dim: JsValue) -> JsResult<JsValue> {
        let d = dim_arg(&dim, "Tensor.logSoftmax: dim")?;
        self.op(|v| v.log_softmax(d))
    }
    /// Reshape to `shape` (at most 16 whole sizes; one may be -1, inferred).
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn reshape(&self, #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue) -> JsResult<JsValue> {
        let s = args::integers(&shape, "Tensor.reshape: shape", -1, MAX_TENSOR_BYTES as i64)?;
        let s: Vec<isize> = s.into_iter().map(|d| d as isize).collect();
        self.op(|v| v.reshape(&s))
    }
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn transpose(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] dim0: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] dim1: JsValue,
    ) -> JsResult<JsValue> {
        let a = dim_arg(&dim0, "Tensor.transpose: dim0")?;
        let b = dim_arg(&dim1, "Tensor.transpose: dim1")?;
        self.op(|v| v.transpose(a, b))
    }
    /// Permute dims (`order`: a permutation of 0 … rank-1).
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn permute(&self, #[wasm_bindgen(unchecked_param_type = "number[]")] order: JsValue) -> JsResult<JsValue> {
        let d = args::integers(&order, "Tensor.permute: order", 0, MAX_RANK as i64 - 1)?;
        let d: Vec<usize> = d.into_iter().map(|x| x as usize).collect();
        self.op(|v| v.permute(&d))
    }
    /// Cross-entropy (mean) of logits against int32 `target`, over rows where `mask` (bool)
    /// is set; `options`: PyTorch's `ignoreIndex` (an int32: rows with that target count for
    /// nothing; -100 unless given, as `F.cross_entropy`) and `labelSmoothing` (0 to 1,
    /// default 0).
    #[wasm_bindgen(js_name = crossEntropy, unchecked_return_type = "Tensor")]
    pub fn cross_entropy(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] target: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] mask: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ ignoreIndex?: number; labelSmoothing?: number }")]
        options: JsValue,
    ) -> JsResult<JsValue> {
        let t = tensor_arg(&target, "Tensor.crossEntropy: target")?;
        let m = opt_tensor_arg(&mask, "Tensor.crossEntropy: mask")?;
        /// PyTorch's default `ignore_index`.
        const IGNORE_INDEX: i32 = -100;
        let (mut ignore, mut smooth) = (Some(IGNORE_INDEX), 0.0f32);
        if !args::is_absent(&options) {
            let ii = args::get(&options, "ignoreIndex")?;
            if !args::is_absent(&ii) {
                ignore =
                    Some(args::integer(&ii, "Tensor.crossEntropy: ignoreIndex", i32::MIN as i64, i32::MAX as i64)?
                        as i32);
            }
            let ls = args::get(&options, "labelSmoothing")?;
            if !args::is_absent(&ls) {
                let v = args::number(&ls, "Tensor.crossEntropy: labelSmoothing")?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(args::range_error(&format!(
                        "Tensor.crossEntropy: labelSmoothing must be between 0.0 and 1.0, got {}",
                        crate::trace::check::js_number(v)
                    )));
                }
                smooth = v as f32;
            }
        }
        self.op(|v| v.cross_entropy_with(&t, m.as_ref(), crate::ir::Reduction::Mean, None, ignore, smooth))
    }
    /// `F.oneHot(self, numClasses)` of int32 class indices (int32 result, one more dim).
    #[wasm_bindgen(js_name = oneHot, unchecked_return_type = "Tensor")]
    pub fn one_hot(&self, #[wasm_bindgen(unchecked_param_type = "number")] num_classes: JsValue) -> JsResult<JsValue> {
        let n = args::count(&num_classes, "Tensor.oneHot: numClasses", MAX_TENSOR_BYTES)?;
        if n == 0 {
            return Err(args::range_error("Tensor.oneHot: numClasses must be at least 1, got 0"));
        }
        self.op(|v| v.one_hot(n))
    }
    /// `F.conv2d(self, weight, bias, { stride, padding, dilation, groups })` on NCHW: weight
    /// `[O, C/groups, kh, kw]`, bias `[O]` or null.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn conv2d(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] weight: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] bias: JsValue,
        #[wasm_bindgen(
            unchecked_optional_param_type = "{ stride?: number | [number, number]; padding?: number | [number, number] | \"valid\" | \"same\"; dilation?: number | [number, number]; groups?: number }"
        )]
        options: JsValue,
    ) -> JsResult<JsValue> {
        let w = tensor_arg(&weight, "Tensor.conv2d: weight")?;
        let b = opt_tensor_arg(&bias, "Tensor.conv2d: bias")?;
        let opts = if args::is_absent(&options) { js_sys::Object::new().into() } else { options };
        let kernel = match w.shape() {
            [_, _, kh, kw] => [*kh, *kw],
            s => {
                return Err(args::error(&format!("Tensor.conv2d: weight must be [out, in/groups, kH, kW], got {s:?}")))
            }
        };
        let (geom, after) = super::geometry::conv_geom(&opts, "Tensor.conv2d", kernel)?;
        self.op(|v| v.pad_after(after)?.conv2d(&w, b.as_ref(), geom))
    }
    /// `F.max_pool2d(self, kernelSize, { stride = kernelSize, padding, dilation, ceilMode })`.
    #[wasm_bindgen(js_name = maxPool2d, unchecked_return_type = "Tensor")]
    pub fn max_pool2d(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] kernel_size: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "object")] options: JsValue,
    ) -> JsResult<JsValue> {
        let geom = super::geometry::pool_geom(&kernel_size, &options, "Tensor.maxPool2d", true)?;
        self.op(|v| v.max_pool2d(geom))
    }
    /// `F.avg_pool2d(self, kernelSize, { stride = kernelSize, padding, ceilMode,
    /// countIncludePad = true })`.
    #[wasm_bindgen(js_name = avgPool2d, unchecked_return_type = "Tensor")]
    pub fn avg_pool2d(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] kernel_size: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "object")] options: JsValue,
    ) -> JsResult<JsValue> {
        let geom = super::geometry::pool_geom(&kernel_size, &options, "Tensor.avgPool2d", false)?;
        let cip = if args::is_absent(&options) {
            true
        } else {
            args::opt_bool(&args::get(&options, "countIncludePad")?, "Tensor.avgPool2d: countIncludePad", true)?
        };
        self.op(|v| v.avg_pool2d(geom, cip))
    }
    /// `F.adaptive_avg_pool2d(self, outputSize)`.
    #[wasm_bindgen(js_name = adaptiveAvgPool2d, unchecked_return_type = "Tensor")]
    pub fn adaptive_avg_pool2d(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] output_size: JsValue,
    ) -> JsResult<JsValue> {
        let out = super::geometry::pair(&output_size, "Tensor.adaptiveAvgPool2d: outputSize", 1, None)?;
        self.op(|v| v.adaptive_avg_pool2d(out))
    }
    /// `torch.flatten(self, startDim = 0, endDim = -1)`.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn flatten(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] start_dim: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] end_dim: JsValue,
    ) -> JsResult<JsValue> {
        let s = if args::is_absent(&start_dim) { 0 } else { dim_arg(&start_dim, "Tensor.flatten: startDim")? };
        let e = if args::is_absent(&end_dim) { -1 } else { dim_arg(&end_dim, "Tensor.flatten: endDim")? };
        self.op(|v| v.flatten(s, e))
    }
    /// Converts to "float32", "float16", "int32" or "bool".
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn cast(&self, #[wasm_bindgen(unchecked_param_type = "string")] dtype: JsValue) -> JsResult<JsValue> {
        let dt =
            DType::parse(&args::string(&dtype, "Tensor.cast: dtype", 16)?).map_err(|e| args::error(e.message()))?;
        self.op(|v| v.cast(dt))
    }
    /// `F.linear(self, weight, bias)`: `self @ weight^T + bias`, weight `[out, in]`, bias
    /// `[out]` or null (one `linear` op, as `nn.Linear` records).
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn linear(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] weight: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] bias: JsValue,
    ) -> JsResult<JsValue> {
        let w = tensor_arg(&weight, "Tensor.linear: weight")?;
        let b = opt_tensor_arg(&bias, "Tensor.linear: bias")?;
        self.op(|v| v.linear(&w, b.as_ref()))
    }
    /// `F.layer_norm(self, normalizedShape, weight, bias, eps = 1e-5)`: over the last dims,
    /// which must be `normalizedShape`; weight and bias both or neither.
    #[wasm_bindgen(js_name = layerNorm, unchecked_return_type = "Tensor")]
    pub fn layer_norm(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] normalized_shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] weight: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] bias: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] eps: JsValue,
    ) -> JsResult<JsValue> {
        let shape = args::integers(&normalized_shape, "Tensor.layerNorm: normalizedShape", 0, MAX_TENSOR_BYTES as i64)?;
        let x = self.var()?.shape().to_vec();
        let last = x.len().checked_sub(shape.len()).map(|i| &x[i..]);
        if shape.is_empty() || last.map(|l| l.iter().map(|&d| d as i64).ne(shape.iter().copied())).unwrap_or(true) {
            return Err(args::error(&format!(
                "Tensor.layerNorm: normalizedShape {shape:?} must be the last dims of the input's shape {x:?}"
            )));
        }
        let w = opt_tensor_arg(&weight, "Tensor.layerNorm: weight")?;
        let b = opt_tensor_arg(&bias, "Tensor.layerNorm: bias")?;
        let affine = match (&w, &b) {
            (Some(w), Some(b)) => Some((w, b)),
            (None, None) => None,
            _ => return Err(args::error("Tensor.layerNorm: give both weight and bias, or neither")),
        };
        let eps = if args::is_absent(&eps) { 1e-5 } else { args::number(&eps, "Tensor.layerNorm: eps")? };
        self.op(|v| v.layer_norm(shape.len(), affine, eps as f32))
    }
    /// Training-mode batch norm over dim 1 with the batch's statistics (`F.batch_norm(…,
    /// training=True)`): `[y, batch mean, unbiased batch variance]`; weight and bias both or
    /// neither.
    #[wasm_bindgen(js_name = batchNorm, unchecked_return_type = "[Tensor, Tensor, Tensor]")]
    pub fn batch_norm(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] weight: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] bias: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] eps: JsValue,
    ) -> JsResult<JsValue> {
        let w = opt_tensor_arg(&weight, "Tensor.batchNorm: weight")?;
        let b = opt_tensor_arg(&bias, "Tensor.batchNorm: bias")?;
        let affine = match (&w, &b) {
            (Some(w), Some(b)) => Some((w, b)),
            (None, None) => None,
            _ => return Err(args::error("Tensor.batchNorm: give both weight and bias, or neither")),
        };
        let eps = if args::is_absent(&eps) { 1e-5 } else { args::number(&eps, "Tensor.batchNorm: eps")? };
        let v = self.var()?;
        let (y, mean, var) = at_js_caller(v.tracer(), || v.batch_norm(affine, eps as f32)).map_err(js_err)?;
        let out = js_sys::Array::new();
        for t in [y, mean, var] {
            out.push(&wrap(t)?);
        }
        Ok(out.into())
    }
    /// `torch.where(cond, self, other)`: `self` where bool `cond` is set, else `other`.
    #[wasm_bindgen(js_name = "where", unchecked_return_type = "Tensor")]
    pub fn where_(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] cond: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue,
    ) -> JsResult<JsValue> {
        let c = tensor_arg(&cond, "Tensor.where: cond")?;
        let o = tensor_arg(&other, "Tensor.where: other")?;
        self.op(|v| v.where_(&c, &o))
    }
    /// `torch.index_select(self, dim, index)`: the entries along `dim` an int32 index picks.
    #[wasm_bindgen(js_name = indexSelect, unchecked_return_type = "Tensor")]
    pub fn index_select(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] dim: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] index: JsValue,
    ) -> JsResult<JsValue> {
        let d = dim_arg(&dim, "Tensor.indexSelect: dim")?;
        let i = tensor_arg(&index, "Tensor.indexSelect: index")?;
        self.op(|v| v.index_select(d, &i))
    }
    /// `torch.gather(self, dim, index)` with an int32 index.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn gather(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] dim: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] index: JsValue,
    ) -> JsResult<JsValue> {
        let d = dim_arg(&dim, "Tensor.gather: dim")?;
        let i = tensor_arg(&index, "Tensor.gather: index")?;
        self.op(|v| v.gather(d, &i))
    }
    /// `torch.split(self, sizes, dim)` with a list of sizes: the pieces (one `split` op).
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn split(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] sizes: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] dim: JsValue,
    ) -> JsResult<JsValue> {
        let s = args::integers(&sizes, "Tensor.split: sizes", 0, MAX_TENSOR_BYTES as i64)?;
        let s: Vec<usize> = s.into_iter().map(|x| x as usize).collect();
        let d = if args::is_absent(&dim) { 0 } else { dim_arg(&dim, "Tensor.split: dim")? };
        let v = self.var()?;
        let parts = at_js_caller(v.tracer(), || v.split(&s, d)).map_err(js_err)?;
        let out = js_sys::Array::new();
        for p in parts {
            out.push(&wrap(p)?);
        }
        Ok(out.into())
    }
    /// `self[start:end:step]` along `dim` (PyTorch's basic slicing of one dim).
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn slice(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] dim: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] start: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] end: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] step: JsValue,
    ) -> JsResult<JsValue> {
        let d = dim_arg(&dim, "Tensor.slice: dim")?;
        let a = args::count(&start, "Tensor.slice: start", MAX_TENSOR_BYTES)?;
        let b = args::count(&end, "Tensor.slice: end", MAX_TENSOR_BYTES)?;
        let st = if args::is_absent(&step) { 1 } else { args::count(&step, "Tensor.slice: step", MAX_TENSOR_BYTES)? };
        self.op(|v| v.slice(d, a, b, st))
    }
    /// `out[index[e]] += self[e]` into `dimSize` rows (PyG's scatter with reduce "sum";
    /// PyTorch's `zeros(dimSize, …).index_add(0, index, self)`).
    #[wasm_bindgen(js_name = scatterAdd, unchecked_return_type = "Tensor")]
    pub fn scatter_add(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] index: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] dim_size: JsValue,
    ) -> JsResult<JsValue> {
        let i = tensor_arg(&index, "Tensor.scatterAdd: index")?;
        let n = args::count(&dim_size, "Tensor.scatterAdd: dimSize", MAX_TENSOR_BYTES)?;
        self.op(|v| v.scatter_add(&i, n))
    }
    /// The mean of `self[e]` per row `index[e]` of `dimSize` rows (0 where none; PyG's
    /// scatter with reduce "mean").
    #[wasm_bindgen(js_name = scatterMean, unchecked_return_type = "Tensor")]
    pub fn scatter_mean(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] index: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] dim_size: JsValue,
    ) -> JsResult<JsValue> {
        let i = tensor_arg(&index, "Tensor.scatterMean: index")?;
        let n = args::count(&dim_size, "Tensor.scatterMean: dimSize", MAX_TENSOR_BYTES)?;
        self.op(|v| v.scatter_mean(&i, n))
    }
}

/// Concatenates `tensors` (at most 65536 Tensors) along `dim`.
#[wasm_bindgen(unchecked_return_type = "Tensor")]
pub fn concat(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] tensors: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number")] dim: JsValue,
) -> JsResult<JsValue> {
    let items = args::list(&tensors, "concat: tensors", MAX_LIST)?;
    let d = dim_arg(&dim, "concat: dim")?;
    let vars = items
        .iter()
        .enumerate()
        .map(|(i, t)| tensor_arg(t, &format!("concat: tensors[{i}]")))
        .collect::<JsResult<Vec<_>>>()?;
    let refs: Vec<&Var> = vars.iter().collect();
    let first =
        vars.first().ok_or_else(|| args::error("concat: tensors is empty: concat needs at least one Tensor"))?;
    at_js_caller(first.tracer(), || rconcat(&refs, d)).map_err(js_err).and_then(wrap)
}
