//! Linear algebra: `MatMul` (torch.matmul), `Linear`, and the CSR kernels `SpMM`,
//! `SpMMTransposed` and `SpMMValuesGrad`.
//!
//! Dense products all go through one `product` (see there): the kernels of
//! [`super::gemm_simd`] in wasm and on x86-64, ndarray's `general_mat_mul` (matrixmultiply)
//! elsewhere. Float16 operands are widened to float32 by [`super::eval`], multiplied with
//! float32 accumulation, and rounded to half once.

use super::common::{array, bcast_strides, dot, f32_data, float_result, for_each_row, i32_data};
use super::gemm_simd::Start;
use crate::ir::shape::{broadcast_shapes, matmul_shape};
use crate::tensor::{float16, Tensor};
use crate::Error;
use ndarray::{linalg::general_mat_mul, ArrayView2, ArrayViewMut2};
use std::borrow::Cow;

fn view2<'a>(d: &'a [f32], r: usize, c: usize) -> crate::Result<ArrayView2<'a, f32>> {
    ArrayView2::from_shape((r, c), d).map_err(|e| Error::exec(format!("internal: bad matrix view {r}x{c}: {e}")))
}

/// `c = a @ b` for row-major `a[m,k]`, `b[k,n]`, `c[m,n]`: AVX2 where the CPU has it,
/// else matrixmultiply.
fn gemm(a: &[f32], b: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) -> crate::Result<()> {
    #[cfg(target_arch = "x86_64")]
    if n >= 16 && super::gemm_simd::gemm_nn_x86(a, b, c, m, k, n) {
        return Ok(());
    }
    let av = view2(a, m, k)?;
    let bv = view2(b, k, n)?;
    let mut cv = ArrayViewMut2::from_shape((m, n), c)
        .map_err(|e| Error::exec(format!("internal: bad output view {m}x{n}: {e}")))?;
    general_mat_mul(1.0, &av, &bv, 0.0, &mut cv);
    Ok(())
}

/// `start + op(a) @ b` as a new row-major `[m,n]` buffer, where `op(a)` is `a[m,k]` or,
/// with `a_transposed`, the transpose of an `a` stored as `[k,m]`, and `start` a bias per
/// column and/or an addend `[m,n]` (see [`Start`]); with `half`, every entry rounded to
/// the nearest float16 (the strided kernels round each block of rows as they finish it,
/// while it is in cache).
///
/// The one entry to the dense kernels: the strided kernels (wasm simd128, AVX-512) take the
/// transposed operand, the start and an unzeroed output directly; the others (AVX2,
/// matrixmultiply) get a transposed copy and a pass adding the start.
#[allow(clippy::too_many_arguments)]
pub(super) fn product(
    a: &[f32],
    a_transposed: bool,
    b: &[f32],
    start: Start,
    m: usize,
    k: usize,
    n: usize,
    half: bool,
) -> crate::Result<Vec<f32>> {
    let mut out = Vec::with_capacity(m * n);
    let c = &mut out.spare_capacity_mut()[..m * n];
    if super::gemm_simd::gemm_strided(a, a_transposed, b, start, c, m, k, n, half) {
        // SAFETY: gemm_strided wrote all m*n entries.
        unsafe { out.set_len(m * n) };
        return Ok(out);
    }
    let mut out = product_unstrided(a, a_transposed, b, start, m, k, n)?;
    if half {
        float16::round_slice(&mut out);
    }
    Ok(out)
}

/// [`product`] on the kernels that read `A` row-major only and start from zero (AVX2,
/// matrixmultiply): a transposed copy of `A`, then a pass adding the start.
fn product_unstrided(
    a: &[f32],
    a_transposed: bool,
    b: &[f32],
    start: Start,
    m: usize,
    k: usize,
    n: usize,
) -> crate::Result<Vec<f32>> {
    let at;
    let a = if a_transposed {
        at = super::shape_ops::transpose_last2(&a[..m * k], k, m);
        &at[..]
    } else {
        a
    };
    let mut out = vec![0f32; m * n];
    gemm(a, b, &mut out, m, k, n)?;
    if n > 0 {
        if let Some(bias) = start.bias {
            for row in out.chunks_exact_mut(n) {
                for (o, &v) in row.iter_mut().zip(bias) {
                    *o += v;
                }
            }
        }
        if let Some(addend) = start.addend {
            for (o, &v) in out.iter_mut().zip(addend) {
                *o += v;
            }
        }
    }
    Ok(out)
}

/// `MatMul`: torch.matmul on float32 — 1-D operands are promoted (a row vector on the left,
/// a column on the right) and the added dim removed; batch dims broadcast.
pub fn matmul(a: &Tensor, b: &Tensor) -> crate::Result<Tensor> {
    let (x, y) = (f32_data(a, "left operand")?, f32_data(b, "right operand")?);
    let (xs, ys) = (a.shape(), b.shape());
    let out_shape = matmul_shape(xs, ys)?;
    let a2: Vec<usize> = if xs.len() == 1 { vec![1, xs[0]] } else { xs.to_vec() };
    let b2: Vec<usize> = if ys.len() == 1 { vec![ys[0], 1] } else { ys.to_vec() };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let n = b2[b2.len() - 1];
    let (abatch, bbatch) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let batch = broadcast_shapes(abatch, bbatch)?;
    let nb: usize = batch.iter().product();
    let half = matches!((a, b), (Tensor::F16(_), Tensor::F16(_)));
    if nb == 1 {
        return Ok(float_result(half, array(&out_shape, product(&x, false, &y, Start::default(), m, k, n, half)?)?));
    }
    let mut out = vec![0f32; nb * m * n];
    let (sa, sb) = (bcast_strides(abatch, &batch), bcast_strides(bbatch, &batch));
    let (ia, ib) = (sa.last().copied().unwrap_or(0), sb.last().copied().unwrap_or(0));
    let (amat, bmat, cmat) = (m * k, k * n, m * n);
    let mut err = Ok(());
    for_each_row(&batch, [&sa, &sb], |o, [oa, ob], len| {
        for i in 0..len {
            let (pa, pb, pc) = ((oa + i * ia) * amat, (ob + i * ib) * bmat, (o + i) * cmat);
            match product(&x[pa..pa + amat], false, &y[pb..pb + bmat], Start::default(), m, k, n, half) {
                Ok(c) => out[pc..pc + cmat].copy_from_slice(&c),
                Err(e) if err.is_ok() => err = Err(e),
                Err(_) => {}
            }
        }
    });
    err?;
    Ok(float_result(half, array(&out_shape, out)?))
}

/// `MatMulTN`: `(a[k,m], b[k,n])` → `aᵀ @ b`, `[m,n]`, reading `a` in place.
pub fn matmul_tn(a: &Tensor, b: &Tensor) -> crate::Result<Tensor> {
    let (x, y) = (f32_data(a, "left operand")?, f32_data(b, "right operand")?);
    let (xs, ys) = (a.shape(), b.shape());
    if xs.len() != 2 || ys.len() != 2 || xs[0] != ys[0] {
        return Err(Error::exec(format!(
            "matmul_tn needs a[k,m] and b[k,n] with the same k, got shapes {xs:?} and {ys:?}"
        )));
    }
    let (k, m, n) = (xs[0], xs[1], ys[1]);
    let half = matches!((a, b), (Tensor::F16(_), Tensor::F16(_)));
    Ok(float_result(half, array(&[m, n], product(&x, true, &y, Start::default(), m, k, n, half)?)?))
}

/// `Linear`: `(x[.., in], weight[out, in], bias[out]?)` → `x @ weight^T + bias` over the
/// last dim of x (x is flattened to 2-D for one matrix product). With `addend` (the
/// `LinearAdd` op: a `Linear` whose only use was an `Add`, fused by `exec::fuse`), that
/// tensor of the output's shape is added too, as the product's starting value.
pub fn linear(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, addend: Option<&Tensor>) -> crate::Result<Tensor> {
    let (xd, wd) = (f32_data(x, "input")?, f32_data(w, "weight")?);
    let (xs, ws) = (x.shape(), w.shape());
    if ws.len() != 2 {
        return Err(Error::exec(format!("weight must be 2-D [out, in], got shape {ws:?}")));
    }
    let Some(&inn) = xs.last() else {
        return Err(Error::exec("input must have at least 1 dim"));
    };
    let (out_f, w_in) = (ws[0], ws[1]);
    if inn != w_in {
        return Err(Error::exec(format!(
            "input has {inn} features but the weight expects {w_in} (shapes {xs:?} and {ws:?})"
        )));
    }
    let rows: usize = xs[..xs.len() - 1].iter().product();
    let mut shape = xs.to_vec();
    *shape.last_mut().unwrap_or(&mut 0) = out_f;
    let bd = match bias {
        Some(b) if b.shape() != [out_f] => {
            return Err(Error::exec(format!("bias must be [{out_f}], got shape {:?}", b.shape())))
        }
        Some(b) => Some(f32_data(b, "bias")?),
        None => None,
    };
    let ad = match addend {
        Some(a) if a.shape() != shape => {
            return Err(Error::exec(format!("addend must have the output's shape {shape:?}, got {:?}", a.shape())))
        }
        Some(a) => Some(f32_data(a, "addend")?),
        None => None,
    };
    let wt = super::shape_ops::transpose_last2(&wd, out_f, inn);
    // Float16 operands (all of them, or `eval` rounds the result): rounded in the product.
    let half = [Some(x), Some(w), bias, addend].iter().flatten().all(|t| matches!(t, Tensor::F16(_)));
    let start = Start { bias: bd.as_deref(), addend: ad.as_deref() };
    let out = product(&xd, false, &wt, start, rows, inn, out_f, half)?;
    Ok(float_result(half, array(&shape, out)?))
}

/// A validated CSR structure: `indptr` (n_rows + 1, starting at 0, non-decreasing, ending
/// at nnz) and `indices` (each in `0..n_cols`).
struct Csr<'a> {
    indptr: Cow<'a, [i32]>,
    indices: Cow<'a, [i32]>,
}

impl Csr<'_> {
    #[inline]
    fn row(&self, r: usize) -> std::ops::Range<usize> {
        self.indptr[r] as usize..self.indptr[r + 1] as usize
    }
}

fn csr<'a>(indptr: &'a Tensor, indices: &'a Tensor, n_rows: usize, n_cols: usize) -> crate::Result<Csr<'a>> {
    let p = i32_data(indptr, "indptr")?;
    let ix = i32_data(indices, "indices")?;
    if indptr.shape() != [n_rows + 1] {
        return Err(Error::exec(format!(
            "indptr must be [{}] for {n_rows} rows, got shape {:?}",
            n_rows + 1,
            indptr.shape()
        )));
    }
    if indices.shape().len() != 1 {
        return Err(Error::exec(format!("indices must be 1-D, got shape {:?}", indices.shape())));
    }
    let nnz = ix.len();
    if p[0] != 0 {
        return Err(Error::exec(format!("indptr must start at 0, got {}", p[0])));
    }
    if let Some(r) = p.windows(2).position(|w| w[1] < w[0]) {
        return Err(Error::exec(format!("indptr decreases at row {r} ({} then {})", p[r], p[r + 1])));
    }
    if p[n_rows] as usize != nnz {
        return Err(Error::exec(format!("indptr ends at {} but there are {nnz} indices", p[n_rows])));
    }
    if let Some(k) = ix.iter().position(|&c| c < 0 || c as usize >= n_cols) {
        return Err(Error::exec(format!(
            "column index {} at position {k} is out of range for {n_cols} columns",
            ix[k]
        )));
    }
    Ok(Csr { indptr: p, indices: ix })
}

fn check_nnz(t: &Tensor, what: &str, nnz: usize) -> crate::Result<()> {
    if t.shape() != [nnz] {
        return Err(Error::exec(format!("{what} must be [{nnz}] (one per stored entry), got shape {:?}", t.shape())));
    }
    Ok(())
}

/// Row-major data and feature count of a 2-D float32 `[rows, F]` operand.
fn dense<'a>(t: &'a Tensor, what: &str, rows: usize) -> crate::Result<(Cow<'a, [f32]>, usize)> {
    let d = f32_data(t, what)?;
    let s = t.shape();
    if s.len() != 2 || s[0] != rows {
        return Err(Error::exec(format!("{what} must be [{rows}, F], got shape {s:?}")));
    }
    Ok((d, s[1]))
}

/// `SpMM { n_rows, n_cols }`: `(indptr, indices, values, dense[n_cols, F])` → `A @ dense`,
/// `[n_rows, F]`; one CSR row at a time, an axpy over the feature dim per stored entry.
pub fn spmm(inputs: &[&Tensor], n_rows: usize, n_cols: usize) -> crate::Result<Tensor> {
    let a = csr(inputs[0], inputs[1], n_rows, n_cols)?;
    check_nnz(inputs[2], "values", a.indices.len())?;
    let vals = f32_data(inputs[2], "values")?;
    let (d, f) = dense(inputs[3], "dense operand", n_cols)?;
    let mut out = vec![0f32; n_rows * f];
    // A float16 dense operand: each output row rounded to half once it is summed, while it
    // is in cache.
    let half = matches!(inputs[3], Tensor::F16(_));
    if f > 0 {
        for (r, orow) in out.chunks_exact_mut(f).enumerate() {
            for k in a.row(r) {
                let c = a.indices[k] as usize;
                let v = vals[k];
                for (o, &x) in orow.iter_mut().zip(&d[c * f..(c + 1) * f]) {
                    *o += v * x;
                }
            }
            if half {
                float16::round_slice(orow);
            }
        }
    }
    Ok(float_result(half, array(&[n_rows, f], out)?))
}

/// `SpMMTransposed { n_rows, n_cols }`: `(indptr, indices, values, g[n_rows, F])` →
/// `A^T @ g`, `[n_cols, F]`.
pub fn spmm_t(inputs: &[&Tensor], n_rows: usize, n_cols: usize) -> crate::Result<Tensor> {
    let a = csr(inputs[0], inputs[1], n_rows, n_cols)?;
    check_nnz(inputs[2], "values", a.indices.len())?;
    let vals = f32_data(inputs[2], "values")?;
    let (g, f) = dense(inputs[3], "gradient", n_rows)?;
    let mut out = vec![0f32; n_cols * f];
    if f > 0 {
        for (r, grow) in g.chunks_exact(f).enumerate() {
            for k in a.row(r) {
                let c = a.indices[k] as usize;
                let v = vals[k];
                for (o, &x) in out[c * f..(c + 1) * f].iter_mut().zip(grow) {
                    *o += v * x;
                }
            }
        }
    }
    Ok(Tensor::F32(array(&[n_cols, f], out)?))
}

/// `SpMMValuesGrad { n_rows, n_cols }`: `(indptr, indices, dense[n_cols, F], g[n_rows, F])`
/// → `[nnz]`, entry k at (r, c) is `g[r] · dense[c]`.
pub fn spmm_values_grad(inputs: &[&Tensor], n_rows: usize, n_cols: usize) -> crate::Result<Tensor> {
    let a = csr(inputs[0], inputs[1], n_rows, n_cols)?;
    let (d, f) = dense(inputs[2], "dense operand", n_cols)?;
    let (g, fg) = dense(inputs[3], "gradient", n_rows)?;
    if f != fg {
        return Err(Error::exec(format!("dense operand has {f} features but the gradient has {fg}")));
    }
    let nnz = a.indices.len();
    let mut out = vec![0f32; nnz];
    for r in 0..n_rows {
        let grow = &g[r * f..(r + 1) * f];
        for k in a.row(r) {
            let c = a.indices[k] as usize;
            out[k] = dot(grow, &d[c * f..(c + 1) * f]);
        }
    }
    Ok(Tensor::F32(array(&[nnz], out)?))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::ir::Op;
    use crate::tensor::{DType, Tensor};

    fn seq(shape: &[usize], scale: f32) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|i| ((i * 7 % 5) as f32 - 2.0) * scale + i as f32 * 0.01).collect();
        f32t(shape, &v)
    }

    /// Naive torch.matmul reference for (possibly batched) operands.
    fn naive(a: &Tensor, b: &Tensor) -> Vec<f32> {
        let (x, y) = (a.to_f32_vec(), b.to_f32_vec());
        let (xs, ys) = (a.shape().to_vec(), b.shape().to_vec());
        let (m, k) = (xs[xs.len() - 2], xs[xs.len() - 1]);
        let n = ys[ys.len() - 1];
        let na = x.len() / (m * k);
        let nb = y.len() / (k * n);
        let batches = na.max(nb);
        let mut out = vec![];
        for bi in 0..batches {
            let (ba, bb) = (if na == 1 { 0 } else { bi }, if nb == 1 { 0 } else { bi });
            for i in 0..m {
                for j in 0..n {
                    out.push((0..k).map(|t| x[ba * m * k + i * k + t] * y[bb * k * n + t * n + j]).sum());
                }
            }
        }
        out
    }

    #[test]
    fn matmul_tn_is_the_product_with_the_transposed_left_operand() {
        // a stored [k=3, m=2]; aᵀ = [[1, 3, 5], [2, 4, 6]]
        let a = f32t(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
        let b = f32t(&[3, 2], &[7., 8., 9., 10., 11., 12.]);
        let c = run1(&Op::MatMulTN, &[&a, &b]);
        assert_eq!(c.shape(), &[2, 2]);
        assert_eq!(c.to_f32_vec(), vec![7. + 27. + 55., 8. + 30. + 60., 14. + 36. + 66., 16. + 40. + 72.]);
        // a long k (several panels of the kernel) against MatMul on an explicit transpose
        let (a, b) = (seq(&[300, 19], 0.1), seq(&[300, 37], 0.2));
        let at = run1(&Op::Permute { dims: vec![1, 0] }, &[&a]);
        close(&run1(&Op::MatMulTN, &[&a, &b]).to_f32_vec(), &naive(&at, &b), 1e-3);
        let e = eval(&Op::MatMulTN, &[&a, &seq(&[299, 37], 1.0)]).unwrap_err().to_string();
        assert!(e.contains("same k"), "{e}");
    }

    /// The path of CPUs without AVX-512 (this one may have it, so it is called directly):
    /// transposed A, bias and addend against a plain loop.
    #[test]
    fn unstrided_product_handles_the_transposed_operand_and_the_start() {
        use super::super::gemm_simd::Start;
        let (m, k, n) = (7, 19, 21);
        let val = |i: usize, s: f32| ((i * 37 % 11) as f32 - 5.0) * s;
        let a: Vec<f32> = (0..m * k).map(|i| val(i, 0.1)).collect();
        let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        let b: Vec<f32> = (0..k * n).map(|i| val(i, 0.2)).collect();
        let bias: Vec<f32> = (0..n).map(|i| val(i, 1.0)).collect();
        let addend: Vec<f32> = (0..m * n).map(|i| val(i, 0.5)).collect();
        let start = Start { bias: Some(&bias), addend: Some(&addend) };
        for (src, transposed) in [(&a, false), (&at, true)] {
            let got = super::product_unstrided(src, transposed, &b, start, m, k, n).unwrap();
            for i in 0..m {
                for j in 0..n {
                    let want = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum::<f32>() + bias[j] + addend[i * n + j];
                    assert!((got[i * n + j] - want).abs() < 1e-4, "transposed={transposed} [{i},{j}]");
                }
            }
        }
    }

    #[test]
    fn linear_add_starts_the_product_from_the_addend() {
        let x = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let w = f32t(&[2, 3], &[1., 0., -1., 0.5, 0.5, 0.5]);
        let b = f32t(&[2], &[10., 20.]);
        let r = f32t(&[2, 2], &[0.25, -1., 2., 3.]);
        let y = run1(&Op::LinearAdd { has_bias: true }, &[&x, &w, &b, &r]);
        assert_eq!(y.to_f32_vec(), vec![-2. + 10. + 0.25, 3. + 20. - 1., -2. + 10. + 2., 7.5 + 20. + 3.]);
        let y = run1(&Op::LinearAdd { has_bias: false }, &[&x, &w, &r]);
        assert_eq!(y.to_f32_vec(), vec![-2. + 0.25, 3. - 1., -2. + 2., 7.5 + 3.]);
        let e = eval(&Op::LinearAdd { has_bias: false }, &[&x, &w, &b]).unwrap_err().to_string();
        assert!(e.contains("addend must have the output's shape"), "{e}");
    }

    #[test]
    fn matmul_shapes_and_values() {
        let a = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = f32t(&[3, 2], &[7., 8., 9., 10., 11., 12.]);
        let c = run1(&Op::MatMul, &[&a, &b]);
        assert_eq!(c.to_f32_vec(), vec![58., 64., 139., 154.]);
        let v = f32t(&[3], &[1., 0., -1.]);
        let r = run1(&Op::MatMul, &[&a, &v]);
        assert_eq!(r.shape(), &[2]);
        assert_eq!(r.to_f32_vec(), vec![-2., -2.]);
        assert!(eval(&Op::MatMul, &[&f32t(&[2], &[1., -1.]), &b]).is_err());
        let r = run1(&Op::MatMul, &[&f32t(&[3], &[1., -1., 2.]), &b]);
        assert_eq!(r.to_f32_vec(), vec![7. - 9. + 22., 8. - 10. + 24.]);
        let d = run1(&Op::MatMul, &[&v, &v]);
        assert_eq!(d.shape(), &[] as &[usize]);
        assert_eq!(d.to_f32_vec(), vec![2.]);
        let a3 = seq(&[4, 2, 3], 0.5);
        let b3 = seq(&[4, 3, 5], 0.25);
        close(&run1(&Op::MatMul, &[&a3, &b3]).to_f32_vec(), &naive(&a3, &b3), 1e-6);
        let b2 = seq(&[3, 5], 0.25);
        close(&run1(&Op::MatMul, &[&a3, &b2]).to_f32_vec(), &naive(&a3, &b2), 1e-6);
        let a2 = seq(&[2, 3], 0.5);
        close(&run1(&Op::MatMul, &[&a2, &b3]).to_f32_vec(), &naive(&a2, &b3), 1e-6);
        // [2,1,2,3] @ [3,3,2] → [2,3,2,2]
        let x = seq(&[2, 1, 2, 3], 0.5);
        let y = seq(&[3, 3, 2], 0.3);
        let out = run1(&Op::MatMul, &[&x, &y]);
        assert_eq!(out.shape(), &[2, 3, 2, 2]);
        let xv = x.to_f32_vec();
        let yv = y.to_f32_vec();
        let ov = out.to_f32_vec();
        for i in 0..2 {
            for j in 0..3 {
                let xi = f32t(&[2, 3], &xv[i * 6..i * 6 + 6]);
                let yj = f32t(&[3, 2], &yv[j * 6..j * 6 + 6]);
                close(&ov[(i * 3 + j) * 4..(i * 3 + j) * 4 + 4], &naive(&xi, &yj), 1e-6);
            }
        }
        assert!(eval(&Op::MatMul, &[&a, &a]).unwrap_err().to_string().contains("inner sizes"));
    }

    #[test]
    fn matmul_and_linear_in_half() {
        let a = Tensor::from_f32_as_f16(&[1, 2], &[256., 256.]).unwrap();
        let b = Tensor::from_f32_as_f16(&[2, 1], &[128., 128.]).unwrap();
        let c = run1(&Op::MatMul, &[&a, &b]);
        assert_eq!(c.dtype(), DType::Float16);
        assert_eq!(c.to_f64_vec(), vec![f64::INFINITY]); // 65536 overflows half
                                                         // partial sums beyond half range are fine when the result fits (f32 accumulation)
        let a = Tensor::from_f32_as_f16(&[1, 3], &[60000., 60000., -60000.]).unwrap();
        let b = Tensor::from_f32_as_f16(&[3, 1], &[1., 1., 1.]).unwrap();
        assert_eq!(run1(&Op::MatMul, &[&a, &b]).to_f64_vec(), vec![60000.]);
        let x = Tensor::from_f32_as_f16(&[2, 2], &[1., 2., 3., 4.]).unwrap();
        let w = Tensor::from_f32_as_f16(&[1, 2], &[0.5, 0.25]).unwrap();
        let bias = Tensor::from_f32_as_f16(&[1], &[1.]).unwrap();
        let y = run1(&Op::Linear { has_bias: true }, &[&x, &w, &bias]);
        assert_eq!(y.dtype(), DType::Float16);
        assert_eq!(y.to_f64_vec(), vec![2.0, 3.5]);
    }

    #[test]
    fn linear_values() {
        let x = f32t(&[2, 1, 3], &[1., 2., 3., 4., 5., 6.]);
        let w = f32t(&[2, 3], &[1., 0., -1., 0.5, 0.5, 0.5]);
        let b = f32t(&[2], &[10., 20.]);
        let y = run1(&Op::Linear { has_bias: true }, &[&x, &w, &b]);
        assert_eq!(y.shape(), &[2, 1, 2]);
        assert_eq!(y.to_f32_vec(), vec![8., 23., 8., 27.5]);
        let y = run1(&Op::Linear { has_bias: false }, &[&f32t(&[3], &[1., 2., 3.]), &w]);
        assert_eq!(y.shape(), &[2]);
        assert_eq!(y.to_f32_vec(), vec![-2., 3.]);
        let e = eval(&Op::Linear { has_bias: false }, &[&f32t(&[2], &[1., 2.]), &w]).unwrap_err().to_string();
        assert!(e.contains("[2]") && e.contains("[2, 3]"), "{e}");
        assert!(eval(&Op::Linear { has_bias: true }, &[&x, &w, &f32t(&[3], &[0.; 3])]).is_err());
    }

    fn csr_inputs() -> (Tensor, Tensor, Tensor) {
        // [[1, 0, 2, 0], [0, 0, 0, 0], [0, 3, 4, 5]]
        (
            Tensor::from_i32(&[4], vec![0, 2, 2, 5]).unwrap(),
            Tensor::from_i32(&[5], vec![0, 2, 1, 2, 3]).unwrap(),
            f32t(&[5], &[1., 2., 3., 4., 5.]),
        )
    }

    #[test]
    fn spmm_values_and_validation() {
        let (p, i, v) = csr_inputs();
        let d = f32t(&[4, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]);
        let op = Op::SpMM { n_rows: 3, n_cols: 4 };
        let y = run1(&op, &[&p, &i, &v, &d]);
        assert_eq!(y.to_f32_vec(), vec![11., 14., 0., 0., 9. + 20. + 35., 12. + 24. + 40.]);
        let bad_ptr = Tensor::from_i32(&[4], vec![0, 3, 2, 5]).unwrap();
        assert!(eval(&op, &[&bad_ptr, &i, &v, &d]).unwrap_err().to_string().contains("decreases at row 1"));
        let bad_end = Tensor::from_i32(&[4], vec![0, 2, 2, 4]).unwrap();
        assert!(eval(&op, &[&bad_end, &i, &v, &d]).unwrap_err().to_string().contains("ends at 4"));
        let bad_idx = Tensor::from_i32(&[5], vec![0, 2, 1, 2, 4]).unwrap();
        let e = eval(&op, &[&p, &bad_idx, &v, &d]).unwrap_err().to_string();
        assert!(e.contains("column index 4") && e.contains("4 columns"), "{e}");
        let neg = Tensor::from_i32(&[5], vec![0, -1, 1, 2, 3]).unwrap();
        assert!(eval(&op, &[&p, &neg, &v, &d]).unwrap_err().to_string().contains("-1"));
        assert!(eval(&op, &[&p, &i, &v, &f32t(&[3, 2], &[0.; 6])]).is_err());
        // half dense operand
        let dh = d.cast(DType::Float16);
        let yh = run1(&op, &[&p, &i, &v, &dh]);
        assert_eq!(yh.dtype(), DType::Float16);
        assert_eq!(yh.to_f64_vec(), y.to_f64_vec());
    }

    #[test]
    fn spmm_adjoints_match_finite_differences() {
        let (p, i, v) = csr_inputs();
        let dv: Vec<f32> = (0..8).map(|k| k as f32 * 0.3 - 1.0).collect();
        let gv: Vec<f32> = (0..6).map(|k| 0.7 - k as f32 * 0.4).collect();
        let g = f32t(&[3, 2], &gv);
        let fwd = Op::SpMM { n_rows: 3, n_cols: 4 };
        let loss =
            |vals: &[f32], dense: &[f32]| dotv(&run1(&fwd, &[&p, &i, &f32t(&[5], vals), &f32t(&[4, 2], dense)]), &gv);
        let vv = v.to_f32_vec();
        let gd = run1(&Op::SpMMTransposed { n_rows: 3, n_cols: 4 }, &[&p, &i, &v, &g]).to_f32_vec();
        close(&gd, &numeric_grad(|x| loss(&vv, x), &dv, 1e-2), 1e-3);
        let gval = run1(&Op::SpMMValuesGrad { n_rows: 3, n_cols: 4 }, &[&p, &i, &f32t(&[4, 2], &dv), &g]).to_f32_vec();
        close(&gval, &numeric_grad(|x| loss(x, &dv), &vv, 1e-2), 1e-3);
    }
}
