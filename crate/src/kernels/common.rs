//! Helpers shared by the kernel families: element traits, contiguous access, argument
//! checks and the row-wise broadcasting walker.

use crate::tensor::{float16, DType, Tensor};
use crate::Error;
use ndarray::{ArrayD, IxDyn};
use std::borrow::Cow;

/// An element type a [`Tensor`] can hold. `f32` is float32's and float16's: a float16
/// tensor's values are float32s ([`Tensor::F16`]); its generic kernels run on `f32` and
/// give their results float16's tag back ([`with_dtype`]).
pub(crate) trait Elem: Copy + Default + PartialEq + std::fmt::Debug + 'static {
    /// The array of this element type inside `t`, or an error naming the dtype.
    fn array(t: &Tensor) -> crate::Result<&ArrayD<Self>>;
    /// Wraps an array into a tensor.
    fn wrap(a: ArrayD<Self>) -> Tensor;
}

macro_rules! impl_elem {
    ($t:ty, $variant:ident, $dt:expr) => {
        impl Elem for $t {
            fn array(t: &Tensor) -> crate::Result<&ArrayD<Self>> {
                match t {
                    Tensor::$variant(a) => Ok(a),
                    other => Err(Error::exec(format!("expected a {} tensor, got {}", $dt, other.dtype()))),
                }
            }
            fn wrap(a: ArrayD<Self>) -> Tensor {
                Tensor::$variant(a)
            }
        }
    };
}

impl Elem for f32 {
    fn array(t: &Tensor) -> crate::Result<&ArrayD<f32>> {
        match t {
            Tensor::F32(a) | Tensor::F16(a) => Ok(a),
            other => Err(Error::exec(format!("expected a float tensor, got {}", other.dtype()))),
        }
    }
    fn wrap(a: ArrayD<f32>) -> Tensor {
        Tensor::F32(a)
    }
}
impl_elem!(i32, I32, DType::Int32);
impl_elem!(bool, Bool, DType::Bool);

/// Runs `$body` with the type alias `$T` bound to the element type of `$dt`. For float16
/// that is `f32` (its storage), and the float32 results of `$body` (a `Result` of a tensor
/// or of tensors) are tagged float16 again: for the data-movement kernels this macro
/// serves, which move float16 values without computing new ones.
macro_rules! with_dtype {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            $crate::tensor::DType::Float32 => {
                type $T = f32;
                $body
            }
            $crate::tensor::DType::Float16 => {
                type $T = f32;
                $crate::kernels::common::TagHalf::tag_half($body)
            }
            $crate::tensor::DType::Int32 => {
                type $T = i32;
                $body
            }
            $crate::tensor::DType::Bool => {
                type $T = bool;
                $body
            }
        }
    };
}
pub(crate) use with_dtype;

/// The elements of `a` in row-major order, borrowed when `a` is already contiguous.
pub(crate) fn slice<T: Clone>(a: &ArrayD<T>) -> Cow<'_, [T]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(a.iter().cloned().collect()),
    }
}

/// Builds a row-major array; the error names the shape and the length.
pub(crate) fn array<T>(shape: &[usize], data: Vec<T>) -> crate::Result<ArrayD<T>> {
    let n = data.len();
    ArrayD::from_shape_vec(IxDyn(shape), data)
        .map_err(|e| Error::exec(format!("internal: {n} values do not fit shape {shape:?} ({e})")))
}

/// Row-major f32 data of a float input (float32, or float16's values held as float32), or an
/// error naming the input.
pub(crate) fn f32_data<'a>(t: &'a Tensor, what: &str) -> crate::Result<Cow<'a, [f32]>> {
    match t {
        Tensor::F32(a) | Tensor::F16(a) => Ok(slice(a)),
        other => Err(Error::exec(format!("{what} must be float32, got {}", other.dtype()))),
    }
}

/// Row-major i32 data of an int32 input, or an error naming the input.
pub(crate) fn i32_data<'a>(t: &'a Tensor, what: &str) -> crate::Result<Cow<'a, [i32]>> {
    match t {
        Tensor::I32(a) => Ok(slice(a)),
        other => Err(Error::exec(format!("{what} must be int32, got {}", other.dtype()))),
    }
}

/// Row-major bool data of a bool input, or an error naming the input.
pub(crate) fn bool_data<'a>(t: &'a Tensor, what: &str) -> crate::Result<Cow<'a, [bool]>> {
    match t {
        Tensor::Bool(a) => Ok(slice(a)),
        other => Err(Error::exec(format!("{what} must be bool, got {}", other.dtype()))),
    }
}

/// Checks the number of inputs.
pub(crate) fn arity(inputs: &[&Tensor], n: usize) -> crate::Result<()> {
    if inputs.len() != n {
        return Err(Error::exec(format!("expects {n} inputs, got {}", inputs.len())));
    }
    Ok(())
}

/// Checks that `dim` is a dim of a tensor of `rank`.
pub(crate) fn check_dim(dim: usize, rank: usize) -> crate::Result<()> {
    if dim >= rank {
        return Err(Error::exec(format!("dim {dim} is out of range for a tensor of rank {rank}")));
    }
    Ok(())
}

/// Splits `shape` around `dim` into (outer, len, inner) element counts.
pub(crate) fn split_at_dim(shape: &[usize], dim: usize) -> (usize, usize, usize) {
    let outer = shape[..dim].iter().product();
    let inner = shape[dim + 1..].iter().product();
    (outer, shape[dim], inner)
}

/// Validates every entry of an index vector against `bound` (reports the first bad one).
pub(crate) fn check_indices(idx: &[i32], bound: usize, what: &str) -> crate::Result<()> {
    if let Some(p) = idx.iter().position(|&v| v < 0 || v as usize >= bound) {
        return Err(Error::exec(format!("{what} {} at position {p} is out of range for size {bound}", idx[p])));
    }
    Ok(())
}

/// Strides (in elements) of a row-major tensor of `shape` seen through NumPy broadcasting to
/// `out`: one per dim of `out`, 0 on the dims where `shape` is broadcast or missing.
pub(crate) fn bcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let r = out.len();
    let k = shape.len();
    let mut s = vec![0; r];
    let mut acc = 1;
    for i in (0..k).rev() {
        s[r - k + i] = if shape[i] == 1 { 0 } else { acc };
        acc *= shape[i];
    }
    s
}

/// Checks that `shape` broadcasts to `out` (every dim equal or 1, no extra dims).
pub(crate) fn check_bcast(shape: &[usize], out: &[usize], what: &str) -> crate::Result<()> {
    let ok = shape.len() <= out.len() && shape.iter().rev().zip(out.iter().rev()).all(|(&s, &o)| s == o || s == 1);
    if !ok {
        return Err(Error::exec(format!("{what} of shape {shape:?} cannot be broadcast to {out:?}")));
    }
    Ok(())
}

/// Walks `out` (row-major) one innermost row at a time. For every row it calls
/// `f(out_offset, in_offsets, row_len)`, where `in_offsets[k]` is where the row starts in the
/// k-th input, addressed with `strides[k]` (from [`bcast_strides`]); inside the row the k-th
/// input advances by `strides[k][last]` (0 or 1 for broadcasting). A 0-d `out` is one row of 1.
pub(crate) fn for_each_row<const N: usize>(
    out: &[usize],
    strides: [&[usize]; N],
    mut f: impl FnMut(usize, [usize; N], usize),
) {
    if out.contains(&0) {
        return;
    }
    let r = out.len();
    if r == 0 {
        f(0, [0; N], 1);
        return;
    }
    let inner = out[r - 1];
    let mut idx = vec![0usize; r - 1];
    let mut offs = [0usize; N];
    let mut o = 0;
    loop {
        f(o, offs, inner);
        o += inner;
        let mut d = r - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for k in 0..N {
                offs[k] += strides[k][d];
            }
            if idx[d] < out[d] {
                break;
            }
            for k in 0..N {
                offs[k] -= strides[k][d] * out[d];
            }
            idx[d] = 0;
        }
    }
}

/// `f(a, b)` elementwise with broadcasting, in row-major order of `out`.
pub(crate) fn zip2<A: Copy, B: Copy, O>(
    a: &[A],
    ash: &[usize],
    b: &[B],
    bsh: &[usize],
    out: &[usize],
    f: impl Fn(A, B) -> O,
) -> Vec<O> {
    let n: usize = out.iter().product();
    if ash == out && bsh == out {
        return a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect();
    }
    if ash == out && b.len() == 1 {
        let y = b[0];
        return a.iter().map(|&x| f(x, y)).collect();
    }
    if bsh == out && a.len() == 1 {
        let x = a[0];
        return b.iter().map(|&y| f(x, y)).collect();
    }
    let sa = bcast_strides(ash, out);
    let sb = bcast_strides(bsh, out);
    let (ia, ib) = (sa.last().copied().unwrap_or(0), sb.last().copied().unwrap_or(0));
    let mut v = Vec::with_capacity(n);
    for_each_row(out, [&sa, &sb], |_, [oa, ob], len| match (ia, ib) {
        (1, 1) => v.extend(a[oa..oa + len].iter().zip(&b[ob..ob + len]).map(|(&x, &y)| f(x, y))),
        (1, _) => {
            let y = b[ob];
            v.extend(a[oa..oa + len].iter().map(|&x| f(x, y)))
        }
        (_, 1) => {
            let x = a[oa];
            v.extend(b[ob..ob + len].iter().map(|&y| f(x, y)))
        }
        _ => v.extend((0..len).map(|_| f(a[oa], b[ob]))),
    });
    v
}

/// Dot product with 8 independent partial sums (vectorises; the summation order differs
/// from a plain left-to-right loop only in rounding).
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for t in 0..8 {
            acc[t] += x[t] * y[t];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// Float32 results that hold float16 values, tagged float16 (no rounding: see [`with_dtype`]).
pub(crate) trait TagHalf {
    fn tag_half(self) -> Self;
}

impl TagHalf for Tensor {
    fn tag_half(self) -> Tensor {
        match self {
            Tensor::F32(a) => Tensor::F16(a),
            t => t,
        }
    }
}

impl<T: TagHalf> TagHalf for Vec<T> {
    fn tag_half(self) -> Vec<T> {
        self.into_iter().map(T::tag_half).collect()
    }
}

impl<T: TagHalf> TagHalf for crate::Result<T> {
    fn tag_half(self) -> crate::Result<T> {
        self.map(T::tag_half)
    }
}

/// A float result: float16 when `half` (its values already halves, to be kept unrounded),
/// else float32.
pub(crate) fn float_result(half: bool, a: ArrayD<f32>) -> Tensor {
    if half {
        Tensor::F16(a)
    } else {
        Tensor::F32(a)
    }
}

/// Float32 results of a float16 computation rounded to float16 in place and tagged float16
/// (round to nearest even, overflow to inf, subnormals kept); other results as they are.
pub(crate) fn round_to_half(outputs: Vec<Tensor>) -> Vec<Tensor> {
    outputs
        .into_iter()
        .map(|t| match t {
            Tensor::F32(mut a) => {
                float16::round_array(&mut a);
                Tensor::F16(a)
            }
            t => t,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_walker_visits_rows() {
        let out = [2, 3];
        let sa = bcast_strides(&[3], &out);
        let sb = bcast_strides(&[2, 1], &out);
        assert_eq!(sa, vec![0, 1]);
        assert_eq!(sb, vec![1, 0]);
        let mut rows = vec![];
        for_each_row(&out, [&sa, &sb], |o, offs, len| rows.push((o, offs, len)));
        assert_eq!(rows, vec![(0, [0, 0], 3), (3, [0, 1], 3)]);
        let v = zip2(&[1, 2, 3], &[3], &[10, 20], &[2, 1], &out, |x, y| x + y);
        assert_eq!(v, vec![11, 12, 13, 21, 22, 23]);
        let v = zip2(&[1, 2], &[2, 1], &[10, 20, 30], &[1, 3], &[2, 3], |x, y| x * y);
        assert_eq!(v, vec![10, 20, 30, 20, 40, 60]);
        // scalar output
        let a: Vec<f32> = (0..19).map(|i| i as f32).collect();
        assert_eq!(dot(&a, &a), (0..19).map(|i| (i * i) as f32).sum::<f32>());
        let v = zip2(&[2], &[], &[5], &[1], &[1], |x, y| x * y);
        assert_eq!(v, vec![10]);
        // empty output
        let v: Vec<i32> = zip2(&[], &[0, 3], &[1, 2, 3], &[3], &[0, 3], |x: i32, y: i32| x + y);
        assert!(v.is_empty());
        assert!(check_bcast(&[2, 1], &[3, 2, 5], "a").is_ok());
        assert!(check_bcast(&[3], &[2, 2], "a").unwrap_err().to_string().contains("cannot be broadcast"));
    }
}
