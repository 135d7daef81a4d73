//! The numpy and scipy objects of the Planetoid pickles, read from the generic tree the
//! pickle machine ([`super::pickle::parse`]) produces: numpy's `_reconstruct` +
//! `__setstate__` protocol ([`ndarray_from_value`]), scipy's CSR state dict
//! ([`csr_from_value`], canonical through [`CsrMatrix::canonical`]) and a defaultdict of int
//! lists ([`adjacency_from_value`]). Sizes are read exactly, at most [`MAX_SIZE`].

use super::pickle::{PickleObject, PickleValue, MAX_SIZE};
use crate::tensor::CsrMatrix;
use crate::{Error, Result};

/// Element data of a numpy array, in the array's memory order.
#[derive(Clone, Debug, PartialEq)]
pub enum NdData {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

impl NdData {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            NdData::F32(v) => v.len(),
            NdData::F64(v) => v.len(),
            NdData::I32(v) => v.len(),
            NdData::I64(v) => v.len(),
            NdData::Bool(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as f64.
    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            NdData::F32(v) => v[i] as f64,
            NdData::F64(v) => v[i],
            NdData::I32(v) => v[i] as f64,
            NdData::I64(v) => v[i] as f64,
            NdData::Bool(v) => v[i] as u8 as f64,
        }
    }

    /// Element `i` as an integer, if it is one (floats must be integral).
    pub fn get_i64(&self, i: usize) -> Option<i64> {
        match self {
            NdData::I32(v) => Some(v[i] as i64),
            NdData::I64(v) => Some(v[i]),
            NdData::Bool(v) => Some(v[i] as i64),
            NdData::F32(v) => (v[i].fract() == 0.0).then_some(v[i] as i64),
            NdData::F64(v) => (v[i].fract() == 0.0).then_some(v[i] as i64),
        }
    }
}

/// A numpy array: dtype string (`<f4`, `<f8`, `<i4`, `<i8`, `|b1`), shape and data.
#[derive(Clone, Debug, PartialEq)]
pub struct NdArray {
    pub dtype: String,
    pub shape: Vec<usize>,
    /// Fortran (column-major) memory order.
    pub fortran: bool,
    pub data: NdData,
}

impl NdArray {
    /// Element at `(r, c)` of a 2-D array as f64, whatever the memory order.
    pub fn get2(&self, r: usize, c: usize) -> f64 {
        let i = if self.fortran { c * self.shape[0] + r } else { r * self.shape[1] + c };
        self.data.get_f64(i)
    }

    /// All elements as integers in C (row-major) order; errors if any is not integral.
    pub fn to_i64_c_order(&self, file: &str) -> Result<Vec<i64>> {
        let n = self.data.len();
        let idx = |k: usize| -> usize {
            if !self.fortran || self.shape.len() < 2 {
                return k;
            }
            // Map a C-order flat index to the Fortran-order position.
            let mut rem = k;
            let mut pos = 0;
            let mut stride_f = 1;
            let mut coords = vec![0; self.shape.len()];
            for d in (0..self.shape.len()).rev() {
                coords[d] = rem % self.shape[d];
                rem /= self.shape[d];
            }
            for (&c, &dim) in coords.iter().zip(&self.shape) {
                pos += c * stride_f;
                stride_f *= dim;
            }
            pos
        };
        (0..n)
            .map(|k| {
                self.data
                    .get_i64(idx(k))
                    .ok_or_else(|| Error::data(format!("{file}: array element {k} is not an integer")))
            })
            .collect()
    }
}

fn expect<'v>(v: Option<&'v PickleValue>, file: &str, what: &str) -> Result<&'v PickleValue> {
    v.ok_or_else(|| Error::data(format!("{file}: {what} is missing")))
}

/// A size read exactly (a 64-bit int): a negative one, or one past [`MAX_SIZE`], is an
/// error, never a size cut to 32 bits.
fn as_usize(v: &PickleValue, file: &str, what: &str) -> Result<usize> {
    match v.as_int() {
        Some(i) if i >= 0 => size_of_u64(i as u64, file, what),
        _ => Err(Error::data(format!("{file}: {what} must be a non-negative int, found {}", v.describe()))),
    }
}

/// `n` as a `usize` when it is at most [`MAX_SIZE`], else an error naming `what`.
fn size_of_u64(n: u64, file: &str, what: &str) -> Result<usize> {
    if n > MAX_SIZE {
        return Err(Error::data(format!("{file}: {what} is {n}, more than the limit of {MAX_SIZE}")));
    }
    usize::try_from(n).map_err(|_| Error::data(format!("{file}: {what} is {n}, more than this target can hold")))
}

/// The dtype string (`<f4`, `|b1`, …) of a pickled `numpy.dtype` object.
fn dtype_from_value(v: &PickleValue, file: &str) -> Result<String> {
    let PickleValue::Object(o) = v else {
        return Err(Error::data(format!("{file}: expected a numpy.dtype, found {}", v.describe())));
    };
    let PickleObject { module, name, args, state, offset, .. } = &**o;
    if module != "numpy" || name != "dtype" {
        return Err(Error::data(format!("{file}: expected a numpy.dtype, found {}", v.describe())));
    }
    let descr = args
        .first()
        .and_then(|a| a.as_text())
        .ok_or_else(|| Error::data(format!("{file}: numpy.dtype at byte {offset} has no type string")))?;
    // State: (version, byteorder, subarray, names, fields, elsize, alignment, flags[, metadata]).
    let order = match state.as_deref() {
        Some(PickleValue::Tuple(items)) if items.len() >= 2 => items[1]
            .as_text()
            .ok_or_else(|| Error::data(format!("{file}: numpy.dtype at byte {offset} has no byte order")))?,
        Some(other) => {
            return Err(Error::data(format!(
                "{file}: numpy.dtype at byte {offset} has an unexpected state ({})",
                other.describe()
            )))
        }
        None => "|".into(),
    };
    let dtype = format!("{order}{descr}");
    match dtype.as_str() {
        "<f4" | "<f8" | "<i4" | "<i8" | "|b1" => Ok(dtype),
        _ => Err(Error::data(format!(
            "{file}: unsupported numpy dtype '{dtype}' (at byte {offset}); supported: <f4 <f8 <i4 <i8 |b1"
        ))),
    }
}

/// Interprets `numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), 'b')` followed by
/// `BUILD (version, shape, dtype, is_fortran, raw_bytes)` as an [`NdArray`].
pub fn ndarray_from_value(v: &PickleValue, file: &str) -> Result<NdArray> {
    let PickleValue::Object(o) = v else {
        return Err(Error::data(format!("{file}: expected a numpy array, found {}", v.describe())));
    };
    let PickleObject { module, name, args, state, offset, .. } = &**o;
    let offset = *offset;
    if !(name == "_reconstruct" && (module == "numpy.core.multiarray" || module == "numpy._core.multiarray")) {
        return Err(Error::data(format!("{file}: expected a numpy array, found {}", v.describe())));
    }
    if !args.first().is_some_and(|a| a.is_global("numpy", "ndarray")) {
        return Err(Error::data(format!(
            "{file}: numpy array at byte {offset} is not a plain numpy.ndarray (subclasses are not supported)"
        )));
    }
    let Some(PickleValue::Tuple(st)) = state.as_deref() else {
        return Err(Error::data(format!("{file}: numpy array at byte {offset} has no tuple state")));
    };
    // Version 1 state has 5 entries; the version-0 layout omits the version.
    let st: &[PickleValue] = match st.len() {
        5 if st[0].as_int() == Some(1) => &st[1..],
        4 => st,
        n => {
            return Err(Error::data(format!(
                "{file}: numpy array at byte {offset} has a state of {n} items (expected version 1 with 5)"
            )))
        }
    };
    let PickleValue::Tuple(shape_v) = &st[0] else {
        return Err(Error::data(format!("{file}: numpy array at byte {offset} has no shape tuple")));
    };
    let shape =
        shape_v.iter().map(|s| as_usize(s, file, "array dimension")).collect::<std::result::Result<Vec<_>, _>>()?;
    let dtype = dtype_from_value(&st[1], file)?;
    let fortran = match &st[2] {
        PickleValue::Bool(b) => *b,
        PickleValue::Int(i) => *i != 0,
        other => {
            return Err(Error::data(format!(
                "{file}: numpy array at byte {offset} has a non-boolean order flag ({})",
                other.describe()
            )))
        }
    };
    let raw: &[u8] = match &st[3] {
        PickleValue::Bytes(b) => b,
        other => {
            return Err(Error::data(format!(
                "{file}: numpy array at byte {offset} has no raw byte data ({})",
                other.describe()
            )))
        }
    };
    let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let itemsize = match dtype.as_str() {
        "<f4" | "<i4" => 4,
        "<f8" | "<i8" => 8,
        _ => 1,
    };
    let Some(count) = count.filter(|c| c.checked_mul(itemsize) == Some(raw.len())) else {
        return Err(Error::data(format!(
            "{file}: numpy array at byte {offset} of shape {shape:?} and dtype {dtype} needs {} bytes but has {}",
            count.map_or("too many".to_string(), |c| (c as u128 * itemsize as u128).to_string()),
            raw.len()
        )));
    };
    let data = match dtype.as_str() {
        "<f4" => NdData::F32(raw.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()),
        "<f8" => NdData::F64(raw.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect()),
        "<i4" => NdData::I32(raw.chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect()),
        "<i8" => NdData::I64(raw.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect()),
        _ => {
            if let Some(bad) = raw.iter().position(|&b| b > 1) {
                return Err(Error::data(format!(
                    "{file}: boolean array at byte {offset} has value {} at {bad}",
                    raw[bad]
                )));
            }
            NdData::Bool(raw.iter().map(|&b| b == 1).collect())
        }
    };
    debug_assert_eq!(data.len(), count);
    Ok(NdArray { dtype, shape, fortran, data })
}

fn one_d_ints(a: &NdArray, file: &str, what: &str) -> Result<Vec<i64>> {
    if a.shape.len() != 1 {
        return Err(Error::data(format!("{file}: CSR {what} must be 1-D, has shape {:?}", a.shape)));
    }
    match a.data {
        NdData::I32(_) | NdData::I64(_) => a.to_i64_c_order(file),
        _ => Err(Error::data(format!("{file}: CSR {what} must be an integer array, has dtype {}", a.dtype))),
    }
}

/// Interprets a pickled `scipy.sparse.csr_matrix` as a [`CsrMatrix`].
///
/// The result is canonical, like `todense()` followed by reading the non-zeros: column
/// indices sorted within each row, duplicate entries summed and explicit zeros dropped.
pub fn csr_from_value(v: &PickleValue, file: &str) -> Result<CsrMatrix> {
    let PickleValue::Object(o) = v else {
        return Err(Error::data(format!("{file}: expected a scipy csr_matrix, found {}", v.describe())));
    };
    let PickleObject { module, name, args, state, offset, .. } = &**o;
    let is_csr = |m: &str, n: &str| n == "csr_matrix" && (m == "scipy.sparse.csr" || m == "scipy.sparse._csr");
    let direct = is_csr(module, name);
    // Older pickles: copy_reg._reconstructor(csr_matrix, object, None).
    let via_reconstructor = name == "_reconstructor"
        && (module == "copy_reg" || module == "copyreg")
        && matches!(args.first(), Some(PickleValue::Global(g)) if is_csr(&g.module, &g.name));
    if !direct && !via_reconstructor {
        return Err(Error::data(format!("{file}: expected a scipy csr_matrix, found {}", v.describe())));
    }
    let Some(st) = state.as_deref().filter(|s| matches!(s, PickleValue::Dict(_))) else {
        return Err(Error::data(format!("{file}: csr_matrix at byte {offset} has no state dict")));
    };
    if let Some(fmt) = st.dict_get("format") {
        if fmt.as_text().as_deref() != Some("csr") {
            return Err(Error::data(format!("{file}: csr_matrix at byte {offset} has format {}", fmt.describe())));
        }
    }
    let shape = expect(st.dict_get("_shape"), file, "csr_matrix _shape")?;
    let (nrows, ncols) = match shape {
        PickleValue::Tuple(s) if s.len() == 2 => {
            (as_usize(&s[0], file, "matrix rows")?, as_usize(&s[1], file, "matrix columns")?)
        }
        other => return Err(Error::data(format!("{file}: csr_matrix _shape is {}", other.describe()))),
    };
    let indptr = ndarray_from_value(expect(st.dict_get("indptr"), file, "csr_matrix indptr")?, file)?;
    let indices = ndarray_from_value(expect(st.dict_get("indices"), file, "csr_matrix indices")?, file)?;
    let data = ndarray_from_value(expect(st.dict_get("data"), file, "csr_matrix data")?, file)?;
    let indptr = one_d_ints(&indptr, file, "indptr")?;
    let indices = one_d_ints(&indices, file, "indices")?;
    if data.shape.len() != 1 {
        return Err(Error::data(format!("{file}: CSR data must be 1-D, has shape {:?}", data.shape)));
    }
    let bad = |what: &str| Error::data(format!("{file}: csr_matrix at byte {offset}: {what}"));
    if indptr.iter().any(|&p| p < 0) {
        return Err(bad("negative indptr entry"));
    }
    if let Some(&p) = indptr.iter().find(|&&p| p as u64 > MAX_SIZE) {
        return Err(bad(&format!("indptr entry {p} is more than the limit of {MAX_SIZE}")));
    }
    if let Some(&c) = indices.iter().find(|&&c| c < 0 || c as u64 >= ncols as u64 || c > u32::MAX as i64) {
        return Err(bad(&format!("column index {c} out of range for {ncols} columns")));
    }
    let values: Vec<f32> = (0..data.data.len()).map(|i| data.data.get_f64(i) as f32).collect();
    let m = CsrMatrix::new(
        nrows,
        ncols,
        indptr.into_iter().map(|p| p as usize).collect(),
        indices.into_iter().map(|c| c as u32).collect(),
        values,
    )
    .map_err(|e| bad(e.message()))?;
    Ok(m.canonical())
}

/// Interprets a pickled `collections.defaultdict(list)` (or a plain dict) of
/// `int -> [int, …]` as adjacency lists, in the dict's insertion order.
pub fn adjacency_from_value(v: &PickleValue, file: &str) -> Result<Vec<(i64, Vec<i64>)>> {
    let items = match v {
        PickleValue::Dict(items) => items,
        PickleValue::Object(o) if o.module == "collections" && o.name == "defaultdict" => {
            let PickleObject { args, dict_items, list_items, state, offset, .. } = &**o;
            let factory_ok = match args.first() {
                None | Some(PickleValue::None) => true,
                Some(f) => f.is_global("__builtin__", "list") || f.is_global("builtins", "list"),
            };
            if !factory_ok || args.len() > 1 || !list_items.is_empty() || state.is_some() {
                return Err(Error::data(format!(
                    "{file}: defaultdict at byte {offset} is not a plain defaultdict(list)"
                )));
            }
            dict_items
        }
        other => {
            return Err(Error::data(format!("{file}: expected a dict of adjacency lists, found {}", other.describe())))
        }
    };
    items
        .iter()
        .map(|(k, val)| {
            let key = k
                .as_int()
                .ok_or_else(|| Error::data(format!("{file}: adjacency key is {}, not an int", k.describe())))?;
            let PickleValue::List(ns) = val else {
                return Err(Error::data(format!("{file}: adjacency of node {key} is {}, not a list", val.describe())));
            };
            let ns = ns
                .iter()
                .map(|n| {
                    n.as_int().ok_or_else(|| {
                        Error::data(format!("{file}: neighbour of node {key} is {}, not an int", n.describe()))
                    })
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Ok((key, ns))
        })
        .collect()
}
