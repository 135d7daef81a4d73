//! `Tensor`, a tracing tensor handed to JavaScript: its ops record nodes in the running
//! trace (see `nn.rs`), and `concat`.

use super::js_err;
use super::nn::{at_js_caller, VARS};
use crate::tensor::DType;
use crate::trace::{concat as rconcat, Var};
use js_sys::{Array, Reflect};
use wasm_bindgen::prelude::*;

/// A tracing tensor: the result of an op recorded in the running trace.
#[wasm_bindgen]
pub struct Tensor {
    id: usize,
}

pub(super) fn var(t: &Tensor) -> Result<Var, JsError> {
    VARS.with(|v| v.borrow().get(t.id).cloned())
        .ok_or_else(|| JsError::new("this tensor belongs to a trace that has finished"))
}

pub(super) fn wrap(v: Var) -> Tensor {
    VARS.with(|vars| {
        let mut vars = vars.borrow_mut();
        vars.push(v);
        Tensor { id: vars.len() - 1 }
    })
}

/// Records `f` on the tensor `t`, at the JS caller's line.
pub(super) fn op(t: &Tensor, f: impl FnOnce(&Var) -> crate::trace::TraceResult<Var>) -> Result<Tensor, JsError> {
    let v = var(t)?;
    at_js_caller(v.tracer(), || f(&v)).map(wrap).map_err(js_err)
}

pub(super) fn tensor_from(value: &JsValue, what: &str) -> Result<Var, JsError> {
    let id = Reflect::get(value, &"_id".into()).ok().and_then(|v| v.as_f64());
    match id {
        Some(id) => var(&Tensor { id: id as usize }),
        None => Err(JsError::new(&format!("{what} must be a Tensor, got {}", describe(value)))),
    }
}

fn describe(v: &JsValue) -> String {
    if v.is_undefined() {
        "undefined".into()
    } else if v.is_null() {
        "null".into()
    } else if let Some(s) = v.as_string() {
        format!("the string \"{s}\"")
    } else if let Some(n) = v.as_f64() {
        format!("the number {n}")
    } else if Array::is_array(v) {
        "an array".into()
    } else {
        "an object that is not a Tensor".into()
    }
}

fn dims(v: Option<Vec<i32>>) -> Vec<isize> {
    v.unwrap_or_default().into_iter().map(|d| d as isize).collect()
}

#[wasm_bindgen]
impl Tensor {
    /// Internal handle (used to recognise tensors passed back from JS).
    #[wasm_bindgen(getter, js_name = _id)]
    pub fn id(&self) -> usize {
        self.id
    }
    #[wasm_bindgen(getter)]
    pub fn shape(&self) -> Result<Vec<usize>, JsError> {
        Ok(var(self)?.shape().to_vec())
    }
    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> Result<String, JsError> {
        Ok(var(self)?.dtype().to_string())
    }
    pub fn add(&self, o: &Tensor) -> Result<Tensor, JsError> {
        let o = var(o)?;
        op(self, |v| v.add(&o))
    }
    pub fn sub(&self, o: &Tensor) -> Result<Tensor, JsError> {
        let o = var(o)?;
        op(self, |v| v.sub(&o))
    }
    pub fn mul(&self, o: &Tensor) -> Result<Tensor, JsError> {
        let o = var(o)?;
        op(self, |v| v.mul(&o))
    }
    pub fn div(&self, o: &Tensor) -> Result<Tensor, JsError> {
        let o = var(o)?;
        op(self, |v| v.div(&o))
    }
    pub fn pow(&self, o: &Tensor) -> Result<Tensor, JsError> {
        let o = var(o)?;
        op(self, |v| v.pow(&o))
    }
    pub fn matmul(&self, o: &Tensor) -> Result<Tensor, JsError> {
        let o = var(o)?;
        op(self, |v| v.matmul(&o))
    }
    /// `self * s` for a number `s`.
    pub fn scale(&self, s: f64) -> Result<Tensor, JsError> {
        op(self, |v| v.scale(s))
    }
    pub fn neg(&self) -> Result<Tensor, JsError> {
        op(self, Var::neg)
    }
    pub fn exp(&self) -> Result<Tensor, JsError> {
        op(self, Var::exp)
    }
    pub fn log(&self) -> Result<Tensor, JsError> {
        op(self, Var::log)
    }
    pub fn sqrt(&self) -> Result<Tensor, JsError> {
        op(self, Var::sqrt)
    }
    pub fn relu(&self) -> Result<Tensor, JsError> {
        op(self, Var::relu)
    }
    pub fn gelu(&self) -> Result<Tensor, JsError> {
        op(self, Var::gelu)
    }
    pub fn tanh(&self) -> Result<Tensor, JsError> {
        op(self, Var::tanh)
    }
    pub fn sigmoid(&self) -> Result<Tensor, JsError> {
        op(self, Var::sigmoid)
    }
    /// Sum over `dims` (all when omitted).
    pub fn sum(&self, dims_: Option<Vec<i32>>, keepdim: Option<bool>) -> Result<Tensor, JsError> {
        op(self, |v| v.sum(&dims(dims_), keepdim.unwrap_or(false)))
    }
    /// Mean over `dims` (all when omitted).
    pub fn mean(&self, dims_: Option<Vec<i32>>, keepdim: Option<bool>) -> Result<Tensor, JsError> {
        op(self, |v| v.mean(&dims(dims_), keepdim.unwrap_or(false)))
    }
    pub fn max(&self, dim: i32, keepdim: Option<bool>) -> Result<Tensor, JsError> {
        op(self, |v| v.max(dim as isize, keepdim.unwrap_or(false)))
    }
    pub fn argmax(&self, dim: i32, keepdim: Option<bool>) -> Result<Tensor, JsError> {
        op(self, |v| v.argmax(dim as isize, keepdim.unwrap_or(false)))
    }
    pub fn softmax(&self, dim: i32) -> Result<Tensor, JsError> {
        op(self, |v| v.softmax(dim as isize))
    }
    #[wasm_bindgen(js_name = logSoftmax)]
    pub fn log_softmax(&self, dim: i32) -> Result<Tensor, JsError> {
        op(self, |v| v.log_softmax(dim as isize))
    }
    /// Reshape; one entry may be -1.
    pub fn reshape(&self, shape: Vec<i32>) -> Result<Tensor, JsError> {
        let s: Vec<isize> = shape.into_iter().map(|d| d as isize).collect();
        op(self, |v| v.reshape(&s))
    }
    pub fn transpose(&self, a: i32, b: i32) -> Result<Tensor, JsError> {
        op(self, |v| v.transpose(a as isize, b as isize))
    }
    pub fn permute(&self, order: Vec<u32>) -> Result<Tensor, JsError> {
        let d: Vec<usize> = order.into_iter().map(|x| x as usize).collect();
        op(self, |v| v.permute(&d))
    }
    /// Cross-entropy of logits against int32 `target`, over rows where `mask` (bool) is set.
    #[wasm_bindgen(js_name = crossEntropy)]
    pub fn cross_entropy(&self, target: &Tensor, mask: Option<Tensor>) -> Result<Tensor, JsError> {
        let t = var(target)?;
        let m = mask.as_ref().map(var).transpose()?;
        op(self, |v| v.cross_entropy(&t, m.as_ref(), crate::ir::Reduction::Mean, None))
    }
    /// Converts to "float32", "float16", "int32" or "bool".
    pub fn cast(&self, dtype: &str) -> Result<Tensor, JsError> {
        let dt = DType::parse(dtype).map_err(js_err)?;
        op(self, |v| v.cast(dt))
    }
}

/// Concatenates tensors along `dim`.
#[wasm_bindgen]
pub fn concat(tensors: Vec<Tensor>, dim: i32) -> Result<Tensor, JsError> {
    let vars = tensors.iter().map(var).collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&Var> = vars.iter().collect();
    let first = vars.first().ok_or_else(|| JsError::new("concat of no tensors"))?;
    at_js_caller(first.tracer(), || rconcat(&refs, dim as isize)).map(wrap).map_err(js_err)
}
