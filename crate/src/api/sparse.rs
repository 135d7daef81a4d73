//! Sparse (CSR) matrices at the JavaScript edge, the form graph data takes: node features
//! and adjacencies.
//!
//! * On the host, a plain object like the dense host tensors (`host_tensor.rs`):
//!   ```js
//!   { layout: "csr", shape: [rows, cols], indptr: Int32Array(rows + 1),
//!     indices: Int32Array(nnz), values: Float32Array(nnz) }
//!   ```
//!   Datasets and loaders hand these out (`data.x`, `batch.meanAdjacency()`); a model input
//!   may be one, and is then traced as a `SparseTensor`. Entries past the real ones (a
//!   padded batch's) sit in the last row with value 0. Every index is checked
//!   ([`crate::gnn::data::check_csr`]) before the matrix reaches a kernel.
//! * In a trace, a `SparseTensor` handle: three traced values (indptr, indices, values) and
//!   the matrix's size. Like a `Tensor`, it belongs to the trace that made it, and only the
//!   package's own handles are recognised. `a.matmul(x)` is sparse × dense; `nn.Linear`,
//!   `nn.SAGEConv`, `nn.GCNConv` and `nn.GroupAddRev` take it as an argument.

use super::args::{self, js_err, JsResult};
use super::session::{at_js_caller, lookup_var, register_var};
use super::tensor::{tensor_arg, wrap};
use crate::gnn::data::{check_csr, PaddedCsr};
use crate::tensor::Tensor;
use crate::trace::check;
use crate::trace::nn::Arg;
use crate::trace::SparseVar;
use js_sys::{Array, Float32Array, Function, Int32Array, Object, Reflect, WeakMap};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// A sparse matrix (CSR) in a trace: see the module docs. Valid only inside the trace that
/// made it.
#[wasm_bindgen]
pub struct SparseTensor {
    trace: u32,
    ids: [u32; 3],
    rows: usize,
    cols: usize,
}

thread_local! {
    /// Every SparseTensor object this module made, to `[trace, indptr, indices, values,
    /// rows, cols]` (handle indices and sizes).
    static HANDLES: WeakMap = WeakMap::new();
}

/// The JS handle of `s` in the running trace.
pub(super) fn wrap_sparse(s: SparseVar) -> JsResult<JsValue> {
    let (trace, a) = register_var(s.indptr)?;
    let (_, b) = register_var(s.indices)?;
    let (_, c) = register_var(s.values)?;
    let obj = JsValue::from(SparseTensor { trace, ids: [a, b, c], rows: s.n_rows, cols: s.n_cols });
    let key = Array::of4(&trace.into(), &a.into(), &b.into(), &c.into());
    key.push(&(s.n_rows as f64).into());
    key.push(&(s.n_cols as f64).into());
    HANDLES.with(|h| h.set(obj.unchecked_ref(), &key));
    Ok(obj)
}

/// The traced matrix of a handle this module made (without running the caller's code).
fn sparse_of(v: &JsValue) -> Option<JsResult<SparseVar>> {
    if !v.is_object() {
        return None;
    }
    let key = HANDLES.with(|h| h.get(v.unchecked_ref::<Object>()));
    if key.is_undefined() {
        return None;
    }
    // The key is an array this module made and never hands out.
    let n = |i: u32| Reflect::get_u32(&key, i).ok().and_then(|x| x.as_f64()).unwrap_or(0.0);
    let (trace, ids) = (n(0) as u32, [n(1) as u32, n(2) as u32, n(3) as u32]);
    let (n_rows, n_cols) = (n(4) as usize, n(5) as usize);
    Some((|| {
        let indptr = lookup_var(trace, ids[0])?;
        let indices = lookup_var(trace, ids[1])?;
        let values = lookup_var(trace, ids[2])?;
        Ok(SparseVar { indptr, indices, values, n_rows, n_cols })
    })())
}

/// A module's argument: a `Tensor` or a `SparseTensor` of the running trace.
pub(super) fn module_arg(v: &JsValue, what: &str) -> JsResult<Arg> {
    match sparse_of(v) {
        Some(s) => Ok(Arg::Sparse(s?)),
        None if super::tensor_handles::is_handle(v) => Ok(Arg::Dense(tensor_arg(v, what)?)),
        None => Err(args::type_error(&format!("{what} must be a Tensor or a SparseTensor, got {}", args::describe(v)))),
    }
}

/// A module's arguments: the given values up to the last one given (`undefined` and `null`
/// at the end are left out, as optional arguments are); a missing one before that is an
/// error.
pub(super) fn module_args(values: &[JsValue], module: &str) -> JsResult<Vec<Arg>> {
    let n = values.iter().rposition(|v| !args::is_absent(v)).map_or(0, |i| i + 1);
    values[..n].iter().enumerate().map(|(i, v)| module_arg(v, &format!("{module}.forward: argument {i}"))).collect()
}

/// The JS value of a module argument (a new handle in the running trace).
pub(super) fn arg_to_js(a: &Arg) -> JsResult<JsValue> {
    match a {
        Arg::Dense(v) => wrap(v.clone()),
        Arg::Sparse(s) => wrap_sparse(s.clone()),
    }
}

#[wasm_bindgen]
impl SparseTensor {
    /// `[rows, cols]`.
    #[wasm_bindgen(getter)]
    pub fn shape(&self) -> Vec<usize> {
        vec![self.rows, self.cols]
    }
    /// The stored entries (padding included).
    #[wasm_bindgen(getter)]
    pub fn nnz(&self) -> JsResult<usize> {
        Ok(lookup_var(self.trace, self.ids[1])?.shape()[0])
    }
    /// `this @ x` for a dense `x` of `cols` rows.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn matmul(&self, #[wasm_bindgen(unchecked_param_type = "Tensor")] x: JsValue) -> JsResult<JsValue> {
        let x = tensor_arg(&x, "SparseTensor.matmul: x")?;
        let s = self.var()?;
        if x.shape().first() != Some(&self.cols) {
            return Err(args::error(&format!(
                "SparseTensor.matmul: a {}x{} matrix times {}: x must have {} rows",
                self.rows,
                self.cols,
                x.ty(),
                self.cols
            )));
        }
        at_js_caller(x.tracer(), || s.matmul(&x)).map_err(js_err).and_then(wrap)
    }
}

impl SparseTensor {
    fn var(&self) -> JsResult<SparseVar> {
        Ok(SparseVar {
            indptr: lookup_var(self.trace, self.ids[0])?,
            indices: lookup_var(self.trace, self.ids[1])?,
            values: lookup_var(self.trace, self.ids[2])?,
            n_rows: self.rows,
            n_cols: self.cols,
        })
    }
}

/// True for a host CSR object (`layout: "csr"`); reading `layout` may run a getter.
pub(super) fn is_host_sparse(v: &JsValue) -> JsResult<bool> {
    if !v.is_object() {
        return Ok(false);
    }
    Ok(args::get(v, "layout")?.as_string().as_deref() == Some("csr"))
}

/// `m` as a host CSR object (its arrays copied out of wasm memory).
pub(super) fn host_sparse_to_js(m: &PaddedCsr) -> JsResult<JsValue> {
    let [indptr, indices, values] = m.tensors().map_err(js_err)?;
    let obj = Object::new();
    let set = |k: &str, v: &JsValue| Reflect::set(&obj, &JsValue::from_str(k), v).map(|_| ());
    set("layout", &"csr".into())?;
    set("shape", &Array::of2(&m.matrix.nrows.into(), &m.matrix.ncols.into()))?;
    let ints = |t: &Tensor| -> JsValue {
        match t {
            Tensor::I32(a) => Int32Array::from(a.as_slice().unwrap_or(&[])).into(),
            _ => JsValue::UNDEFINED,
        }
    };
    set("indptr", &ints(&indptr))?;
    set("indices", &ints(&indices))?;
    let v = values.to_f32_vec();
    set("values", &Float32Array::from(v.as_slice()).into())?;
    Ok(obj.into())
}

/// A fresh typed array of class `ctor` made from the caller's `v` (a typed array or an
/// array of numbers) by the engine: its length and contents are genuine.
fn typed(v: &JsValue, ctor: &'static str, what: &str, max: usize) -> JsResult<JsValue> {
    if !(js_sys::ArrayBuffer::is_view(v) || v.is_instance_of::<Array>()) {
        return Err(args::type_error(&format!(
            "{what} must be an {ctor} or an array of numbers, got {}",
            args::describe(v)
        )));
    }
    let len = args::get(v, "length")?.as_f64().unwrap_or(0.0);
    if len > max as f64 {
        return Err(args::range_error(&format!(
            "{what} holds {} entries, more than the limit of {max}",
            check::js_number(len)
        )));
    }
    let c: Function = args::get(&js_sys::global(), ctor)?.unchecked_into();
    Reflect::construct(&c, &Array::of1(v))
}

/// A host CSR object as the three tensors a traced `SparseTensor` input takes, and its
/// `[rows, cols]`; every index is checked.
pub(super) fn host_sparse_from_js(v: &JsValue, what: &str) -> JsResult<([Tensor; 3], [usize; 2])> {
    let dims = args::shape(&args::get(v, "shape")?, &format!("{what}.shape"))?;
    if dims.len() != 2 {
        return Err(args::type_error(&format!("{what}.shape must be [rows, cols], got {} sizes", dims.len())));
    }
    let max = check::MAX_TENSOR_BYTES / 4;
    let (rows, cols) = (dims[0], dims[1]);
    if rows >= max as u64 || cols > i32::MAX as u64 {
        return Err(args::range_error(&format!("{what}: a {rows}x{cols} matrix is over the tensor limits")));
    }
    let (rows, cols) = (rows as usize, cols as usize);
    let i32s = |key: &'static str| -> JsResult<Vec<i32>> {
        let a: Int32Array = typed(&args::get(v, key)?, "Int32Array", &format!("{what}.{key}"), max)?.unchecked_into();
        Ok(a.to_vec())
    };
    let indptr = i32s("indptr")?;
    let indices = i32s("indices")?;
    let values: Float32Array =
        typed(&args::get(v, "values")?, "Float32Array", &format!("{what}.values"), max)?.unchecked_into();
    let values = values.to_vec();
    check_csr(what, rows, cols, &indptr, &indices, values.len()).map_err(js_err)?;
    let nnz = indices.len();
    let t = [
        Tensor::from_i32(&[rows + 1], indptr).map_err(args::js_err)?,
        Tensor::from_i32(&[nnz], indices).map_err(args::js_err)?,
        Tensor::from_f32(&[nnz], values).map_err(args::js_err)?,
    ];
    Ok((t, [rows, cols]))
}
