//! The `poptorch` namespace of the JavaScript API (PopTorch's names in camelCase; one
//! implementation, the Rust core in `crate::poptorch` and `crate::compile`):
//!
//! * [`options`]: `poptorch.Options` with `Training` and `TensorLocations`,
//!   `TensorLocationSettings`;
//! * [`strategy`]: `PipelinedExecution`, `ShardedExecution`, `SerialPhasedExecution`,
//!   `ParallelPhasedExecution`, `Stage`, `Phase`;
//! * [`enums`]: `OutputMode`, `ReductionType`, `MeanReductionStrategy`, `CommGroupType`,
//!   `VariableRetrievalMode`, `Liveness`, `AutoStage` (strings: the core's JSON names);
//! * [`optim`]: `poptorch.optim.{SGD, Adam, AdamW, RMSprop, LAMB}`;
//! * [`model`]: `trainingModel`, `inferenceModel` and the `PoplarExecutor` they return;
//! * [`export`]: the wrapped model as a Python file (`model.toPython`, `exportPoptorch`,
//!   `exportPytorch`), its weights as safetensors, and the engine's reference step;
//! * `identity_loss`, `recomputationCheckpoint`, `set_available_memory`, `serializedMatMul`
//!   (here) and the slicing helpers.
//!
//! wasm-bindgen exports classes at the top level only, under `Poptorch…` names;
//! `scripts/fix-pkg.mjs` builds the `poptorch` namespace from them (and gives the
//! constructors and methods that take `*args` in PopTorch their variadic form).

pub mod enums;
pub mod export;
pub(crate) mod handles;
pub mod model;
pub mod optim;
pub mod options;
pub mod strategy;

use super::args::{self, js_err, JsResult};
use super::session::at_js_caller;
use super::tensor::{tensor_arg, wrap};
use crate::ir::Reduction;
use crate::trace::check::{MAX_RANK, MAX_TENSOR_BYTES};
use crate::trace::slice::Bound;
use wasm_bindgen::prelude::*;

/// `poptorch.identity_loss(x, reduction)`: marks `x` as the model's loss (`"sum"`, `"mean"`
/// or `"none"`: PopART reduces it so, and seeds a `"none"` loss with ones). Inside a
/// trace; the one independent loss of a training model's forward.
#[wasm_bindgen(js_name = identityLoss, unchecked_return_type = "Tensor")]
pub fn identity_loss(
    #[wasm_bindgen(unchecked_param_type = "Tensor")] x: JsValue,
    #[wasm_bindgen(unchecked_param_type = "\"sum\" | \"mean\" | \"none\"")] reduction: JsValue,
) -> JsResult<JsValue> {
    let v = tensor_arg(&x, "identity_loss: x")?;
    let r = match args::string(&reduction, "identity_loss: reduction", 8)?.as_str() {
        "sum" => Reduction::Sum,
        "mean" => Reduction::Mean,
        "none" => Reduction::None,
        other => {
            return Err(args::error(&format!(
                "identity_loss: reduction must be \"sum\", \"mean\" or \"none\", got {other:?}"
            )))
        }
    };
    at_js_caller(v.tracer(), || v.identity_loss(r)).map_err(js_err).and_then(wrap)
}

/// `poptorch.recomputationCheckpoint(...tensors)` (the glue's variadic form calls this with
/// an array): each tensor is stashed for the backward pass instead of recomputed, and
/// recomputation restarts from it (see `Var::recomputation_checkpoint`). Returns the
/// tensors, in order.
#[wasm_bindgen(js_name = _recomputationCheckpoint, unchecked_return_type = "Tensor[]")]
pub fn recomputation_checkpoint(
    #[wasm_bindgen(unchecked_param_type = "Tensor[]")] tensors: JsValue,
) -> JsResult<JsValue> {
    let list = args::list(&tensors, "recomputationCheckpoint: tensors", crate::trace::check::MAX_LIST)?;
    let out = js_sys::Array::new();
    for (i, t) in list.iter().enumerate() {
        let v = tensor_arg(t, &format!("recomputationCheckpoint: argument {i}"))
            .map_err(|_| args::type_error("recomputationCheckpoint: all inputs must be Tensors"))?;
        out.push(&at_js_caller(v.tracer(), || v.recomputation_checkpoint()).map_err(js_err).and_then(wrap)?);
    }
    Ok(out.into())
}

/// `poptorch.set_available_memory(x, proportion)` / `setAvailableMemory`: the share of tile
/// memory in (0, 1] the op that made `x` (a matmul, convolution, gather or scatter, found
/// as PopTorch finds it) may use for temporaries; returns `x`.
#[wasm_bindgen(js_name = setAvailableMemory, unchecked_return_type = "Tensor")]
pub fn set_available_memory(
    #[wasm_bindgen(unchecked_param_type = "Tensor")] x: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number")] proportion: JsValue,
) -> JsResult<JsValue> {
    let v = tensor_arg(&x, "set_available_memory: x").map_err(|_| {
        args::type_error(&format!(
            "You may only set available memory for Tensor values. {} is not supported.",
            args::describe(&x)
        ))
    })?;
    let p = args::number(&proportion, "set_available_memory: proportion")?;
    if !(p > 0.0 && p <= 1.0) {
        return Err(args::range_error(&format!(
            "set_available_memory: the available memory proportion must be in (0, 1], got {p}"
        )));
    }
    at_js_caller(v.tracer(), || v.set_available_memory(p)).map_err(js_err).and_then(wrap)
}

/// `poptorch.serializedMatMul(lhs, rhs, mode, factor = 0, keepPrecision = false)`: `lhs @
/// rhs` as `factor` smaller products split on the dimension `mode` names
/// (`poptorch.MatMulSerializationMode`), which `factor` must divide; see
/// `Var::serialized_matmul`.
#[wasm_bindgen(js_name = serializedMatMul, unchecked_return_type = "Tensor")]
pub fn serialized_matmul(
    #[wasm_bindgen(unchecked_param_type = "Tensor")] lhs: JsValue,
    #[wasm_bindgen(unchecked_param_type = "Tensor")] rhs: JsValue,
    #[wasm_bindgen(unchecked_param_type = "MatMulSerializationMode")] mode: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "number")] factor: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "boolean")] keep_precision: JsValue,
) -> JsResult<JsValue> {
    let a = tensor_arg(&lhs, "serializedMatMul: lhs")?;
    let b = tensor_arg(&rhs, "serializedMatMul: rhs")?;
    let mode: crate::trace::MatMulSerializationMode =
        enums::parse(&mode, "serializedMatMul: mode", &enums::matmul_serialization_mode())?;
    let factor = if args::is_absent(&factor) {
        0
    } else {
        args::whole(&factor, "serializedMatMul: factor", u32::MAX as u64)? as usize
    };
    let keep = args::opt_bool(&keep_precision, "serializedMatMul: keepPrecision", false)?;
    at_js_caller(a.tracer(), || a.serialized_matmul(&b, mode, factor, keep)).map_err(js_err).and_then(wrap)
}

/// A slice bound: a whole number (constant) or an int32 scalar Tensor of the trace.
fn bound(v: &JsValue, what: &str) -> JsResult<Option<i64>> {
    if v.as_f64().is_some() {
        return args::integer(v, what, -(MAX_TENSOR_BYTES as i64), MAX_TENSOR_BYTES as i64).map(Some);
    }
    Ok(None)
}

/// `x[start:end:step]` along `dim` with the IPU's slicing rules: `start` and `end` whole
/// numbers (constants), or int32 scalar Tensors that differ by a constant (`t[x:x+4]`:
/// `end = x.add(c)` with `c` an int32 constant), which wraps round past the end of the dim.
/// PopTorch's errors otherwise (a float offset, a size that does not divide the dim, …).
#[wasm_bindgen(js_name = _poptorchSlice, unchecked_return_type = "Tensor")]
pub fn slice(
    #[wasm_bindgen(unchecked_param_type = "Tensor")] x: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number")] dim: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number | Tensor")] start: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number | Tensor")] end: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "number")] step: JsValue,
) -> JsResult<JsValue> {
    let v = tensor_arg(&x, "slice: x")?;
    let d = args::integer(&dim, "slice: dim", -(MAX_RANK as i64), MAX_RANK as i64 - 1)? as isize;
    let step =
        if args::is_absent(&step) { 1 } else { args::integer(&step, "slice: step", 1, MAX_TENSOR_BYTES as i64)? };
    let s = bound(&start, "slice: start")?;
    let e = bound(&end, "slice: end")?;
    let sv = if s.is_none() { Some(tensor_arg(&start, "slice: start")?) } else { None };
    let ev = if e.is_none() { Some(tensor_arg(&end, "slice: end")?) } else { None };
    let sb = sv.as_ref().map_or(Bound::Const(s.unwrap_or(0)), Bound::Var);
    let eb = ev.as_ref().map_or(Bound::Const(e.unwrap_or(0)), Bound::Var);
    at_js_caller(v.tracer(), || v.slice_bounds(d, sb, eb, step)).map_err(js_err).and_then(wrap)
}

/// `poptorch.dynamic_slice(x, dim, start, size, step)`: `size` entries of `dim` from the
/// int32 scalar Tensor `start`, wrapping round past the end, then every `step`-th.
#[wasm_bindgen(js_name = _poptorchDynamicSlice, unchecked_return_type = "Tensor")]
pub fn dynamic_slice(
    #[wasm_bindgen(unchecked_param_type = "Tensor")] x: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number")] dim: JsValue,
    #[wasm_bindgen(unchecked_param_type = "Tensor")] start: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number")] size: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "number")] step: JsValue,
) -> JsResult<JsValue> {
    let v = tensor_arg(&x, "dynamicSlice: x")?;
    let d = args::integer(&dim, "dynamicSlice: dim", -(MAX_RANK as i64), MAX_RANK as i64 - 1)? as isize;
    let s = tensor_arg(&start, "dynamicSlice: start")?;
    let size = args::integer(&size, "dynamicSlice: size", -(MAX_TENSOR_BYTES as i64), MAX_TENSOR_BYTES as i64)?;
    let step = if args::is_absent(&step) {
        1
    } else {
        args::integer(&step, "dynamicSlice: step", 1, MAX_TENSOR_BYTES as i64)?
    };
    at_js_caller(v.tracer(), || v.dynamic_slice(d, &s, size, step)).map_err(js_err).and_then(wrap)
}
