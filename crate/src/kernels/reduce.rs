//! Reductions: `Reduce` (sum/mean), `SumTo`, `Max`, `ArgMax`, `MaxGrad`, `Softmax`,
//! `LogSoftmax`, `SoftmaxGrad` and `LogSoftmaxGrad`.
//!
//! Accumulation: float32 sums accumulate in f64 and round once; float16 sums accumulate in
//! float32 and round once to half (the IPU's "partials float" behaviour). Softmax-family
//! kernels compute in float32 with f64 row sums; a reduction along the last dim walks
//! contiguous rows, any other dim goes through a gathered copy of each line.

use super::common::{array, bcast_strides, check_bcast, check_dim, for_each_row, slice, split_at_dim, Elem, TagHalf};
use crate::ir::shape::reduced_shape;
use crate::ir::ReduceKind;
use crate::tensor::Tensor;
use crate::Error;
use ndarray::ArrayD;
use std::ops::AddAssign;

/// An accumulator type for sums.
pub(crate) trait Acc: Copy + Default + AddAssign {
    fn of(x: f32) -> Self;
}
impl Acc for f32 {
    #[inline]
    fn of(x: f32) -> Self {
        x
    }
}
impl Acc for f64 {
    #[inline]
    fn of(x: f32) -> Self {
        x as f64
    }
}

/// Sums `x` (row-major, `shape`) into an array of shape `keep` (same rank, 1 on the summed
/// dims), accumulating in `A`.
pub(crate) fn sum_into<A: Acc>(x: &[f32], shape: &[usize], keep: &[usize]) -> Vec<A> {
    let n_out: usize = keep.iter().product();
    let mut acc = vec![A::default(); n_out];
    if n_out == 1 {
        let mut s = A::default();
        for &v in x {
            s += A::of(v);
        }
        acc[0] = s;
        return acc;
    }
    if shape == keep {
        return x.iter().map(|&v| A::of(v)).collect();
    }
    let st = bcast_strides(keep, shape);
    let inner = st.last().copied().unwrap_or(0);
    for_each_row(shape, [&st], |o, [k], len| {
        let row = &x[o..o + len];
        if inner == 1 {
            for (a, &v) in acc[k..k + len].iter_mut().zip(row) {
                *a += A::of(v);
            }
        } else {
            let mut s = A::default();
            for &v in row {
                s += A::of(v);
            }
            acc[k] += s;
        }
    });
    acc
}

/// Sums (or averages) a float tensor into `keep` (same rank, 1 on summed dims) and gives it
/// shape `out_shape`; `div` divides the sums (1 for a sum, the count for a mean).
fn sum_float(t: &Tensor, keep: &[usize], out_shape: &[usize], div: f64) -> crate::Result<Tensor> {
    match t {
        Tensor::F32(a) => {
            let s: Vec<f64> = sum_into::<f64>(&slice(a), a.shape(), keep);
            let v: Vec<f32> = s.into_iter().map(|x| (x / div) as f32).collect();
            Ok(Tensor::F32(array(out_shape, v)?))
        }
        // Float16: float32 partials, float32 results (the caller rounds them to half once).
        Tensor::F16(a) => {
            let s: Vec<f32> = sum_into::<f32>(&slice(a), a.shape(), keep);
            let d = div as f32;
            let v: Vec<f32> = s.into_iter().map(|x| if div == 1.0 { x } else { x / d }).collect();
            Ok(Tensor::F32(array(out_shape, v)?))
        }
        other => Err(Error::exec(format!("input must be float32 or float16, got {}", other.dtype()))),
    }
}

/// `Reduce { kind, dims, keepdim }` (dims empty = all dims).
pub fn reduce(kind: ReduceKind, dims: &[usize], keepdim: bool, t: &Tensor) -> crate::Result<Tensor> {
    let shape = t.shape();
    for &d in dims {
        check_dim(d, shape.len())?;
    }
    let all = dims.is_empty();
    let keep: Vec<usize> =
        shape.iter().enumerate().map(|(i, &d)| if all || dims.contains(&i) { 1 } else { d }).collect();
    // the number of elements averaged: product of the reduced dims' sizes
    let count: usize = shape.iter().enumerate().filter(|(i, _)| all || dims.contains(i)).map(|(_, &d)| d).product();
    let div = match kind {
        ReduceKind::Sum => 1.0,
        ReduceKind::Mean => count as f64,
    };
    sum_float(t, &keep, &reduced_shape(shape, dims, keepdim), div)
}

/// `SumTo { shape }`: sums `g` down to `shape` (undoes broadcasting).
pub fn sum_to(g: &Tensor, shape: &[usize]) -> crate::Result<Tensor> {
    let gs = g.shape();
    check_bcast(shape, gs, "target shape").map_err(|_| Error::exec(format!("cannot sum {gs:?} down to {shape:?}")))?;
    let mut keep = vec![1; gs.len() - shape.len()];
    keep.extend_from_slice(shape);
    sum_float(g, &keep, shape, 1.0)
}

// ---------------------------------------------------------------------------------------
// max / argmax
// ---------------------------------------------------------------------------------------

/// Ordering for max: NaN is larger than everything (it propagates, like PyTorch).
pub(crate) trait MaxElem: Elem {
    fn gt(self, other: Self) -> bool;
}
impl MaxElem for f32 {
    #[inline]
    fn gt(self, o: Self) -> bool {
        self > o || (self.is_nan() && !o.is_nan())
    }
}
impl MaxElem for i32 {
    #[inline]
    fn gt(self, o: Self) -> bool {
        self > o
    }
}
impl MaxElem for bool {
    #[inline]
    fn gt(self, o: Self) -> bool {
        self & !o
    }
}

/// Max values and the index of the first maximal element along `dim`, laid out
/// `[outer, inner]`.
fn max_along<T: MaxElem>(a: &ArrayD<T>, dim: usize) -> crate::Result<(Vec<T>, Vec<i32>)> {
    check_dim(dim, a.ndim())?;
    let (outer, len, inner) = split_at_dim(a.shape(), dim);
    if len == 0 {
        return Err(Error::exec(format!("cannot take the max over an empty dim {dim}")));
    }
    let x = slice(a);
    let mut best = Vec::with_capacity(outer * inner);
    let mut idx = vec![0i32; outer * inner];
    for o in 0..outer {
        let base = o * len * inner;
        let b0 = best.len();
        best.extend_from_slice(&x[base..base + inner]);
        let (bv, bi) = (&mut best[b0..], &mut idx[o * inner..(o + 1) * inner]);
        for j in 1..len {
            let row = &x[base + j * inner..base + (j + 1) * inner];
            for i in 0..inner {
                if row[i].gt(bv[i]) {
                    bv[i] = row[i];
                    bi[i] = j as i32;
                }
            }
        }
    }
    Ok((best, idx))
}

fn max_typed<T: MaxElem>(t: &Tensor, dim: usize, keepdim: bool, arg: bool) -> crate::Result<Tensor> {
    let a = T::array(t)?;
    let (v, i) = max_along(a, dim)?;
    let shape = reduced_shape(a.shape(), &[dim], keepdim);
    if arg {
        Ok(Tensor::I32(array(&shape, i)?))
    } else {
        Ok(T::wrap(array(&shape, v)?))
    }
}

/// `Max { dim, keepdim }` (values) or `ArgMax` (`arg`: first index of the max, int32).
pub fn max(t: &Tensor, dim: usize, keepdim: bool, arg: bool) -> crate::Result<Tensor> {
    match t {
        Tensor::F32(_) => max_typed::<f32>(t, dim, keepdim, arg),
        Tensor::F16(_) => max_typed::<f32>(t, dim, keepdim, arg).tag_half(),
        Tensor::I32(_) => max_typed::<i32>(t, dim, keepdim, arg),
        Tensor::Bool(_) => max_typed::<bool>(t, dim, keepdim, arg),
    }
}

/// `MaxGrad { dim, keepdim }`: `(x, g)` → zeros like x with `g` at the first maximal element.
pub fn max_grad(x: &Tensor, g: &Tensor, dim: usize) -> crate::Result<Tensor> {
    let xa = x.as_float().map_err(|e| e.context("x"))?;
    let ga = g.as_float().map_err(|e| e.context("gradient"))?;
    let (_, idx) = max_along(xa, dim)?;
    let (outer, len, inner) = split_at_dim(xa.shape(), dim);
    if ga.len() != outer * inner {
        return Err(Error::exec(format!(
            "gradient {:?} does not match the max of {:?} over dim {dim}",
            ga.shape(),
            xa.shape()
        )));
    }
    let gs = slice(ga);
    let mut out = vec![0f32; xa.len()];
    for o in 0..outer {
        for i in 0..inner {
            let k = o * inner + i;
            out[o * len * inner + idx[k] as usize * inner + i] = gs[k];
        }
    }
    Ok(Tensor::F32(array(xa.shape(), out)?))
}

// ---------------------------------------------------------------------------------------
// softmax family
// ---------------------------------------------------------------------------------------

/// Applies `f(input lines, output line)` to every line along `dim` of row-major data of
/// `shape`. Lines along the last dim are contiguous slices; others are gathered.
pub(crate) fn along_dim<const N: usize>(
    shape: &[usize],
    dim: usize,
    ins: [&[f32]; N],
    mut f: impl FnMut([&[f32]; N], &mut [f32]),
) -> Vec<f32> {
    let n: usize = shape.iter().product();
    let mut out = vec![0f32; n];
    let (outer, len, inner) = split_at_dim(shape, dim);
    if len == 0 || n == 0 {
        return out;
    }
    if inner == 1 {
        for (r, o) in out.chunks_exact_mut(len).enumerate() {
            let s = r * len;
            f(ins.map(|x| &x[s..s + len]), o);
        }
    } else {
        // Lines along an inner dim are strided: copy tiles of TILE lines at once so that
        // each pass over the block reads and writes TILE contiguous values per step.
        const TILE: usize = 16;
        let mut bufs: [Vec<f32>; N] = std::array::from_fn(|_| vec![0f32; TILE * len]);
        let mut ob = vec![0f32; TILE * len];
        for o in 0..outer {
            let blk = o * len * inner;
            let mut i0 = 0;
            while i0 < inner {
                let w = TILE.min(inner - i0);
                for k in 0..N {
                    for j in 0..len {
                        let st = blk + j * inner + i0;
                        for (t, &v) in ins[k][st..st + w].iter().enumerate() {
                            bufs[k][t * len + j] = v;
                        }
                    }
                }
                for t in 0..w {
                    f(std::array::from_fn(|k| &bufs[k][t * len..(t + 1) * len]), &mut ob[t * len..(t + 1) * len]);
                }
                for j in 0..len {
                    let st = blk + j * inner + i0;
                    for (t, o) in out[st..st + w].iter_mut().enumerate() {
                        *o = ob[t * len + j];
                    }
                }
                i0 += w;
            }
        }
    }
    out
}

#[inline]
fn row_max(x: &[f32]) -> f32 {
    x.iter().fold(f32::NEG_INFINITY, |m, &v| if v > m || v.is_nan() { v } else { m })
}

/// Softmax of one line (max-subtracted).
pub(crate) fn softmax_row(x: &[f32], y: &mut [f32]) {
    let m = row_max(x);
    let mut s = 0f64;
    for (o, &v) in y.iter_mut().zip(x) {
        let e = (v - m).exp();
        *o = e;
        s += e as f64;
    }
    let inv = (1.0 / s) as f32;
    for o in y.iter_mut() {
        *o *= inv;
    }
}

/// Log-softmax of one line: `x − max − ln Σ exp(x − max)`.
pub(crate) fn log_softmax_row(x: &[f32], y: &mut [f32]) {
    let m = row_max(x);
    let s: f64 = x.iter().map(|&v| (v - m).exp() as f64).sum();
    let lse = m as f64 + s.ln();
    for (o, &v) in y.iter_mut().zip(x) {
        *o = (v as f64 - lse) as f32;
    }
}

fn float_in<'a>(t: &'a Tensor, what: &str) -> crate::Result<&'a ArrayD<f32>> {
    t.as_float().map_err(|e| e.context(what))
}

/// `Softmax { dim }` (`log`: `LogSoftmax`).
pub fn softmax(t: &Tensor, dim: usize, log: bool) -> crate::Result<Tensor> {
    let a = float_in(t, "input")?;
    check_dim(dim, a.ndim())?;
    let x = slice(a);
    let v = if log {
        along_dim(a.shape(), dim, [&x], |[r], o| log_softmax_row(r, o))
    } else {
        along_dim(a.shape(), dim, [&x], |[r], o| softmax_row(r, o))
    };
    Ok(Tensor::F32(array(a.shape(), v)?))
}

/// `SoftmaxGrad { dim }`: `(y, g)` → `y·(g − Σ g·y)`; with `log` (`LogSoftmaxGrad`):
/// `g − exp(y)·Σ g`.
pub fn softmax_grad(y: &Tensor, g: &Tensor, dim: usize, log: bool) -> crate::Result<Tensor> {
    let (ya, ga) = (float_in(y, "output")?, float_in(g, "gradient")?);
    check_dim(dim, ya.ndim())?;
    if ya.shape() != ga.shape() {
        return Err(Error::exec(format!(
            "output {:?} and gradient {:?} must have the same shape",
            ya.shape(),
            ga.shape()
        )));
    }
    let (ys, gs) = (slice(ya), slice(ga));
    let v = if log {
        along_dim(ya.shape(), dim, [&ys, &gs], |[yr, gr], o| {
            let s: f64 = gr.iter().map(|&v| v as f64).sum();
            let s = s as f32;
            for ((o, &yv), &gv) in o.iter_mut().zip(yr).zip(gr) {
                *o = gv - yv.exp() * s;
            }
        })
    } else {
        along_dim(ya.shape(), dim, [&ys, &gs], |[yr, gr], o| {
            let d: f64 = yr.iter().zip(gr).map(|(&a, &b)| a as f64 * b as f64).sum();
            let d = d as f32;
            for ((o, &yv), &gv) in o.iter_mut().zip(yr).zip(gr) {
                *o = yv * (gv - d);
            }
        })
    };
    Ok(Tensor::F32(array(ya.shape(), v)?))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::ir::{Op, ReduceKind};
    use crate::tensor::{DType, Tensor};

    #[test]
    fn sums_and_means() {
        let x = f32t(&[2, 3, 2], &[1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12.]);
        let r = |kind, dims: &[usize], keepdim| run1(&Op::Reduce { kind, dims: dims.to_vec(), keepdim }, &[&x]);
        let s = r(ReduceKind::Sum, &[], false);
        assert_eq!(s.shape(), &[] as &[usize]);
        assert_eq!(s.to_f32_vec(), vec![78.]);
        let s = r(ReduceKind::Sum, &[1], true);
        assert_eq!(s.shape(), &[2, 1, 2]);
        assert_eq!(s.to_f32_vec(), vec![9., 12., 27., 30.]);
        let s = r(ReduceKind::Sum, &[0, 2], false);
        assert_eq!(s.to_f32_vec(), vec![18., 26., 34.]);
        let m = r(ReduceKind::Mean, &[2], false);
        assert_eq!(m.shape(), &[2, 3]);
        assert_eq!(m.to_f32_vec(), vec![1.5, 3.5, 5.5, 7.5, 9.5, 11.5]);
        let m = r(ReduceKind::Mean, &[], true);
        assert_eq!(m.shape(), &[1, 1, 1]);
        assert_eq!(m.to_f32_vec(), vec![6.5]);
        assert!(eval(&Op::Reduce { kind: ReduceKind::Sum, dims: vec![3], keepdim: false }, &[&x]).is_err());
        // float16: accumulate in f32, round once (2048 + 1 + 1 is 2050 exactly)
        let h = Tensor::from_f32_as_f16(&[3], &[2048., 1., 1.]).unwrap();
        let s = run1(&Op::Reduce { kind: ReduceKind::Sum, dims: vec![], keepdim: false }, &[&h]);
        assert_eq!(s.dtype(), DType::Float16);
        assert_eq!(s.to_f64_vec(), vec![2050.]);
        let h = Tensor::from_f32_as_f16(&[2], &[60000., 60000.]).unwrap();
        let s = run1(&Op::Reduce { kind: ReduceKind::Sum, dims: vec![], keepdim: false }, &[&h]);
        assert_eq!(s.to_f64_vec(), vec![f64::INFINITY]);
        let s = run1(&Op::Reduce { kind: ReduceKind::Mean, dims: vec![], keepdim: false }, &[&h]);
        assert_eq!(s.to_f64_vec(), vec![60000.]);
    }

    #[test]
    fn max_argmax_first_and_nan() {
        let x = f32t(&[2, 3], &[1., 5., 5., 7., -1., 7.]);
        let m = run1(&Op::Max { dim: 1, keepdim: false }, &[&x]);
        assert_eq!(m.to_f32_vec(), vec![5., 7.]);
        let a = run1(&Op::ArgMax { dim: 1, keepdim: true }, &[&x]);
        assert_eq!(a.shape(), &[2, 1]);
        assert_eq!(a.to_f64_vec(), vec![1., 0.]);
        let a = run1(&Op::ArgMax { dim: 0, keepdim: false }, &[&x]);
        assert_eq!(a.to_f64_vec(), vec![1., 0., 1.]);
        let y = f32t(&[3], &[1., f32::NAN, 3.]);
        assert!(run1(&Op::Max { dim: 0, keepdim: false }, &[&y]).to_f32_vec()[0].is_nan());
        assert_eq!(run1(&Op::ArgMax { dim: 0, keepdim: false }, &[&y]).to_f64_vec(), vec![1.]);
        let i = Tensor::from_i32(&[2, 2], vec![3, -1, 2, 9]).unwrap();
        assert_eq!(run1(&Op::Max { dim: 0, keepdim: false }, &[&i]).to_f64_vec(), vec![3., 9.]);
        let e = f32t(&[2, 0], &[]);
        assert!(eval(&Op::Max { dim: 1, keepdim: false }, &[&e]).is_err());
    }

    #[test]
    fn max_grad_matches_finite_differences() {
        let x = f32t(&[2, 3, 2], &[0.1, 0.9, 0.5, -0.3, 0.7, 0.2, -1.0, 0.4, 0.3, 0.8, 0.6, -0.2]);
        for (dim, keepdim) in [(0, false), (1, true), (2, false)] {
            let y = run1(&Op::Max { dim, keepdim }, &[&x]);
            let gv: Vec<f32> = (0..y.numel()).map(|i| 0.5 + i as f32 * 0.25).collect();
            let g = f32t(y.shape(), &gv);
            let got = run1(&Op::MaxGrad { dim, keepdim }, &[&x, &g]).to_f32_vec();
            let fd = numeric_grad(
                |v| dotv(&run1(&Op::Max { dim, keepdim }, &[&f32t(&[2, 3, 2], v)]), &gv),
                &x.to_f32_vec(),
                1e-2,
            );
            close(&got, &fd, 1e-3);
        }
    }

    #[test]
    fn softmax_values_and_stability() {
        let x = f32t(&[2, 3], &[1., 2., 3., 1000., 1000., 1000.]);
        let s = run1(&Op::Softmax { dim: 1 }, &[&x]).to_f32_vec();
        close(&s, &[0.09003057, 0.24472847, 0.66524096, 1. / 3., 1. / 3., 1. / 3.], 1e-6);
        let l = run1(&Op::LogSoftmax { dim: 1 }, &[&x]).to_f32_vec();
        close(&l, &[-2.407606, -1.407606, -0.407606, -1.0986123, -1.0986123, -1.0986123], 1e-6);
        let s0 = run1(&Op::Softmax { dim: 0 }, &[&f32t(&[2, 2], &[0., 1., 0., 3.])]).to_f32_vec();
        close(&s0, &[0.5, 0.11920292, 0.5, 0.8807971], 1e-6);
    }

    #[test]
    fn softmax_grads_match_finite_differences() {
        let shape = [2, 3, 4];
        let xv: Vec<f32> = (0..24).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.3).collect();
        let gv: Vec<f32> = (0..24).map(|i| ((i * 5 % 13) as f32 - 6.0) * 0.2).collect();
        for dim in 0..3 {
            for log in [false, true] {
                let fwd = if log { Op::LogSoftmax { dim } } else { Op::Softmax { dim } };
                let bwd = if log { Op::LogSoftmaxGrad { dim } } else { Op::SoftmaxGrad { dim } };
                let y = run1(&fwd, &[&f32t(&shape, &xv)]);
                let got = run1(&bwd, &[&y, &f32t(&shape, &gv)]).to_f32_vec();
                let fd = numeric_grad(|v| dotv(&run1(&fwd, &[&f32t(&shape, v)]), &gv), &xv, 1e-2);
                close(&got, &fd, 2e-3);
            }
        }
    }
}
