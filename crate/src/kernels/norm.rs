//! `LayerNorm`, `LayerNormGrad`, `BatchNorm`, `BatchNormGrad` and `Dropout`.
//!
//! LayerNorm normalises the trailing `normalized_ndim` dims, so every normalised group is a
//! contiguous row of the row-major input. Row statistics: biased variance, eps inside the
//! square root, as PyTorch.

use super::common::{array, f32_data, float_result};
use crate::tensor::float16;
use crate::tensor::Tensor;
use crate::Error;
use std::borrow::Cow;

/// Splits x's shape into (rows, row length D) for the last `k` dims.
fn rows_of(shape: &[usize], k: usize) -> crate::Result<(usize, usize)> {
    if k == 0 || k > shape.len() {
        return Err(Error::exec(format!("cannot normalise the last {k} dims of a tensor of shape {shape:?}")));
    }
    let split = shape.len() - k;
    Ok((shape[..split].iter().product(), shape[split..].iter().product()))
}

fn affine_param<'a>(t: &'a Tensor, what: &str, norm_shape: &[usize]) -> crate::Result<Cow<'a, [f32]>> {
    if t.shape() != norm_shape {
        return Err(Error::exec(format!("{what} must have the normalised shape {norm_shape:?}, got {:?}", t.shape())));
    }
    f32_data(t, what)
}

/// Mean and 1/sqrt(biased variance + eps) of a row (two passes, f32 with 8 partial sums
/// so the loops vectorise; rows are short, so the rounding stays far below 1e-5).
#[inline]
fn row_stats(row: &[f32], eps: f32) -> (f32, f32) {
    let n = row.len() as f32;
    let mean = sum_slice(row) / n;
    let var = sq_dev_slice(row, mean) / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// Σ v over a slice, in 8 lanes (vectorises).
#[inline]
fn sum_slice(v: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for k in 0..8 {
            acc[k] += c[k];
        }
    }
    acc.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>()
}

/// Σ a·b over two slices, in 8 lanes.
#[inline]
fn dot_slice(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (mut ca, mut cb) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut ca).zip(&mut cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum::<f32>()
}

/// Σ (v − m)² over a slice, in 8 lanes.
#[inline]
fn sq_dev_slice(v: &[f32], m: f32) -> f32 {
    let mut acc = [0f32; 8];
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for k in 0..8 {
            let d = c[k] - m;
            acc[k] += d * d;
        }
    }
    acc.iter().sum::<f32>() + chunks.remainder().iter().map(|&x| (x - m) * (x - m)).sum::<f32>()
}

/// Batch norm's layout: `x[N, C, rest…]` as `N` blocks of `C` planes of `rest` elements.
fn bn_dims(shape: &[usize]) -> crate::Result<(usize, usize, usize)> {
    if shape.len() < 2 {
        return Err(Error::exec(format!("batch norm needs an input [N, C, …], got {shape:?}")));
    }
    Ok((shape[0], shape[1], shape[2..].iter().product()))
}

/// The mean and the sum of squared deviations of channel `ch` (float64 sums).
fn channel_stats(x: &[f32], (n, c, r): (usize, usize, usize), ch: usize) -> (f64, f64) {
    let planes = || (0..n).map(move |i| &x[(i * c + ch) * r..(i * c + ch + 1) * r]);
    let m = (n * r) as f64;
    let mean = planes().flat_map(|p| p.iter()).map(|&v| v as f64).sum::<f64>() / m;
    let ss = planes().flat_map(|p| p.iter()).map(|&v| (v as f64 - mean).powi(2)).sum::<f64>();
    (mean, ss)
}

/// `BatchNorm { eps, affine }`: `(x, weight?, bias?)` → `(y, mean, unbiased var)`.
pub fn batch_norm(inputs: &[&Tensor], eps: f32, affine: bool) -> crate::Result<Vec<Tensor>> {
    let x = inputs[0];
    let dims @ (n, c, r) = bn_dims(x.shape())?;
    let m = n * r;
    if m <= 1 {
        return Err(Error::exec(format!(
            "Expected more than 1 value per channel when training, got input size {:?}",
            x.shape()
        )));
    }
    let xd = f32_data(x, "input")?;
    let wb = if affine {
        Some((affine_param(inputs[1], "weight", &[c])?, affine_param(inputs[2], "bias", &[c])?))
    } else {
        None
    };
    let mut y = vec![0f32; xd.len()];
    let (mut means, mut vars) = (vec![0f32; c], vec![0f32; c]);
    for ch in 0..c {
        let (mean, ss) = channel_stats(&xd, dims, ch);
        let rstd = 1.0 / (ss / m as f64 + eps as f64).sqrt();
        let (scale, shift) = match &wb {
            Some((w, b)) => (rstd * w[ch] as f64, b[ch] as f64),
            None => (rstd, 0.0),
        };
        for i in 0..n {
            let at = (i * c + ch) * r;
            for (o, &v) in y[at..at + r].iter_mut().zip(&xd[at..at + r]) {
                *o = ((v as f64 - mean) * scale + shift) as f32;
            }
        }
        means[ch] = mean as f32;
        vars[ch] = (ss / (m - 1) as f64) as f32;
    }
    Ok(vec![Tensor::F32(array(x.shape(), y)?), Tensor::F32(array(&[c], means)?), Tensor::F32(array(&[c], vars)?)])
}

/// `BatchNormGrad { eps, affine }`: `(x, weight?, g)` → `(gx, gweight?, gbias?)`, with
/// `x̂ = (x − mean)·rstd` over `M = N·rest` elements per channel:
/// `gbias = Σ g`, `gweight = Σ g·x̂`, `gx = w·rstd/M · (M·g − Σ g − x̂·Σ g·x̂)`.
pub fn batch_norm_grad(inputs: &[&Tensor], eps: f32, affine: bool) -> crate::Result<Vec<Tensor>> {
    let x = inputs[0];
    let g = inputs[inputs.len() - 1];
    let dims @ (n, c, r) = bn_dims(x.shape())?;
    if g.shape() != x.shape() {
        return Err(Error::exec(format!("gradient {:?} must have the input's shape {:?}", g.shape(), x.shape())));
    }
    let (xd, gd) = (f32_data(x, "input")?, f32_data(g, "gradient")?);
    let w = if affine { Some(affine_param(inputs[1], "weight", &[c])?) } else { None };
    let m = (n * r) as f64;
    let mut gx = vec![0f32; xd.len()];
    let (mut gw, mut gb) = (vec![0f32; c], vec![0f32; c]);
    for ch in 0..c {
        let (mean, ss) = channel_stats(&xd, dims, ch);
        let rstd = 1.0 / (ss / m + eps as f64).sqrt();
        let (mut sg, mut sgx) = (0f64, 0f64);
        for i in 0..n {
            let at = (i * c + ch) * r;
            for (&v, &gv) in xd[at..at + r].iter().zip(&gd[at..at + r]) {
                sg += gv as f64;
                sgx += gv as f64 * (v as f64 - mean) * rstd;
            }
        }
        let k = w.as_ref().map_or(1.0, |w| w[ch] as f64) * rstd / m;
        for i in 0..n {
            let at = (i * c + ch) * r;
            for ((o, &v), &gv) in gx[at..at + r].iter_mut().zip(&xd[at..at + r]).zip(&gd[at..at + r]) {
                let xh = (v as f64 - mean) * rstd;
                *o = (k * (m * gv as f64 - sg - xh * sgx)) as f32;
            }
        }
        gw[ch] = sgx as f32;
        gb[ch] = sg as f32;
    }
    let mut out = vec![Tensor::F32(array(x.shape(), gx)?)];
    if affine {
        out.push(Tensor::F32(array(&[c], gw)?));
        out.push(Tensor::F32(array(&[c], gb)?));
    }
    Ok(out)
}

/// `LayerNorm { normalized_ndim, eps, affine }`: `(x, weight?, bias?)`.
pub fn layer_norm(inputs: &[&Tensor], k: usize, eps: f32, affine: bool) -> crate::Result<Tensor> {
    let x = inputs[0];
    let xd = f32_data(x, "input")?;
    let shape = x.shape();
    let (rows, d) = rows_of(shape, k)?;
    let norm_shape = &shape[shape.len() - k..];
    let wb = if affine {
        Some((affine_param(inputs[1], "weight", norm_shape)?, affine_param(inputs[2], "bias", norm_shape)?))
    } else {
        None
    };
    // A float16 input: each output row rounded to half as it is finished, in cache.
    let half = matches!(x, Tensor::F16(_));
    let mut out = vec![0f32; xd.len()];
    if d > 0 {
        for r in 0..rows {
            let row = &xd[r * d..(r + 1) * d];
            let orow = &mut out[r * d..(r + 1) * d];
            let (mean, rstd) = row_stats(row, eps);
            match &wb {
                Some((w, b)) => {
                    for (((o, &v), &wv), &bv) in orow.iter_mut().zip(row).zip(w.iter()).zip(b.iter()) {
                        *o = (v - mean) * rstd * wv + bv;
                    }
                }
                None => {
                    for (o, &v) in orow.iter_mut().zip(row) {
                        *o = (v - mean) * rstd;
                    }
                }
            }
            if half {
                float16::round_slice(orow);
            }
        }
    }
    Ok(float_result(half, array(shape, out)?))
}

/// `LayerNormGrad`: `(x, weight?, g)` → `(gx, gweight?, gbias?)`:
/// `gx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂))` with `ĝ = g·weight`, `gweight = Σ g·x̂`,
/// `gbias = Σ g` over the rows.
pub fn layer_norm_grad(inputs: &[&Tensor], k: usize, eps: f32, affine: bool) -> crate::Result<Vec<Tensor>> {
    let x = inputs[0];
    let g = inputs[if affine { 2 } else { 1 }];
    let xd = f32_data(x, "input")?;
    let gd = f32_data(g, "gradient")?;
    let shape = x.shape();
    if g.shape() != shape {
        return Err(Error::exec(format!("gradient {:?} must have the input's shape {shape:?}", g.shape())));
    }
    let (rows, d) = rows_of(shape, k)?;
    let norm_shape = &shape[shape.len() - k..];
    let w = if affine { Some(affine_param(inputs[1], "weight", norm_shape)?) } else { None };
    // Float16 input and gradient: each row of gx rounded to half as it is finished.
    let half = matches!((x, g), (Tensor::F16(_), Tensor::F16(_)));
    let mut gx = vec![0f32; xd.len()];
    let mut gw = vec![0f32; d];
    let mut gb = vec![0f32; d];
    let mut xhat = vec![0f32; d];
    let mut ghat = vec![0f32; d];
    let ones = vec![1f32; d];
    let wv: &[f32] = match &w {
        Some(w) => w,
        None => &ones,
    };
    if d > 0 {
        for r in 0..rows {
            let row = &xd[r * d..(r + 1) * d];
            let grow = &gd[r * d..(r + 1) * d];
            let (mean, rstd) = row_stats(row, eps);
            for ((((xh, gh), gwj), gbj), ((&xv, &gv), &w)) in xhat
                .iter_mut()
                .zip(ghat.iter_mut())
                .zip(gw.iter_mut())
                .zip(gb.iter_mut())
                .zip(row.iter().zip(grow).zip(wv))
            {
                *xh = (xv - mean) * rstd;
                *gh = gv * w;
                *gwj += gv * *xh;
                *gbj += gv;
            }
            let m1 = sum_slice(&ghat) / d as f32;
            let m2 = dot_slice(&ghat, &xhat) / d as f32;
            let grow = &mut gx[r * d..(r + 1) * d];
            for ((o, &gh), &xh) in grow.iter_mut().zip(&ghat).zip(&xhat) {
                *o = rstd * (gh - m1 - xh * m2);
            }
            if half {
                float16::round_slice(grow);
            }
        }
    }
    // (float16: the weight's and bias's sums are rounded once, by `eval`)
    let mut out = vec![float_result(half, array(shape, gx)?)];
    if affine {
        out.push(Tensor::F32(array(norm_shape, gw)?));
        out.push(Tensor::F32(array(norm_shape, gb)?));
    }
    Ok(out)
}

/// `Dropout { p }`: `(x, mask)` → `mask ? x / (1 − p) : 0`.
pub fn dropout(x: &Tensor, mask: &Tensor, p: f32) -> crate::Result<Tensor> {
    let xd = f32_data(x, "input")?;
    let md = super::common::bool_data(mask, "mask")?;
    if x.shape() != mask.shape() {
        return Err(Error::exec(format!("mask {:?} must have the input's shape {:?}", mask.shape(), x.shape())));
    }
    if !(0.0..1.0).contains(&p) {
        return Err(Error::exec(format!("dropout probability must be in [0, 1), got {p}")));
    }
    // Branch-free: a random mask makes a branch unpredictable (half the elements mispredict).
    let scale = 1.0 / (1.0 - p);
    let v: Vec<f32> = xd.iter().zip(md.iter()).map(|(&v, &m)| v * (m as u8 as f32 * scale)).collect();
    // A float16 input times 0 or a power of two (p = 0, ½, ¾, …) is a float16 value already
    // wherever its magnitude stays within float16's largest, 65504: the significand is
    // kept, and a subnormal scaled up stays a multiple of 2^-24. So it needs no rounding,
    // the pass that costs a float16 dropout most of its time; one look at the greatest
    // magnitude's bits (a NaN's are above every number's) tells. Otherwise (another p, a
    // result past 65504, an inf or a NaN) it is rounded as every float16 result is.
    let exact = matches!(x, Tensor::F16(_))
        && scale.to_bits() & 0x007f_ffff == 0
        && v.iter().fold(0u32, |most, r| most.max(r.to_bits() & 0x7fff_ffff)) <= 65504f32.to_bits();
    Ok(float_result(exact, array(x.shape(), v)?))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::ir::Op;
    use crate::tensor::{DType, Tensor};

    #[test]
    fn layer_norm_values() {
        let x = f32t(&[2, 3], &[1., 2., 3., -1., 0., 4.]);
        let y = run1(&Op::LayerNorm { normalized_ndim: 1, eps: 0.0, affine: false }, &[&x]).to_f32_vec();
        let s = (2.0f32 / 3.0).sqrt();
        close(&y[..3], &[-1.0 / s, 0.0, 1.0 / s], 1e-6);
        // row 2: mean 1, var (4+1+9)/3
        let sd = (14.0f32 / 3.0).sqrt();
        close(&y[3..], &[-2.0 / sd, -1.0 / sd, 3.0 / sd], 1e-6);
        let w = f32t(&[3], &[1., 2., 0.5]);
        let b = f32t(&[3], &[0., 1., -1.]);
        let y = run1(&Op::LayerNorm { normalized_ndim: 1, eps: 1e-5, affine: true }, &[&x, &w, &b]).to_f32_vec();
        let r = 1.0 / (2.0f32 / 3.0 + 1e-5).sqrt();
        close(&y[..3], &[-r, 1.0, 0.5 * r - 1.0], 1e-6);
        // normalising over 2 dims = over the whole row of 6
        let y = run1(&Op::LayerNorm { normalized_ndim: 2, eps: 0.0, affine: false }, &[&x]).to_f32_vec();
        assert!(y.iter().sum::<f32>().abs() < 1e-5);
        assert!(eval(&Op::LayerNorm { normalized_ndim: 1, eps: 0.0, affine: true }, &[&x, &b, &f32t(&[2], &[0.; 2])])
            .is_err());
        let h = x.cast(DType::Float16);
        assert_eq!(
            run1(&Op::LayerNorm { normalized_ndim: 1, eps: 1e-5, affine: false }, &[&h]).dtype(),
            DType::Float16
        );
    }

    #[test]
    fn layer_norm_grad_matches_finite_differences() {
        let shape = [3, 2, 4];
        let xv: Vec<f32> = (0..24).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.3).collect();
        let gv: Vec<f32> = (0..24).map(|i| ((i * 5 % 13) as f32 - 6.0) * 0.2).collect();
        for k in [1, 2] {
            let ns: Vec<usize> = shape[3 - k..].to_vec();
            let d: usize = ns.iter().product();
            let wv: Vec<f32> = (0..d).map(|i| 0.5 + i as f32 * 0.1).collect();
            let bv: Vec<f32> = (0..d).map(|i| i as f32 * 0.05 - 0.2).collect();
            let (w, b, g) = (f32t(&ns, &wv), f32t(&ns, &bv), f32t(&shape, &gv));
            let eps = 1e-5;
            // affine
            let fwd = Op::LayerNorm { normalized_ndim: k, eps, affine: true };
            let out = run(&Op::LayerNormGrad { normalized_ndim: k, eps, affine: true }, &[&f32t(&shape, &xv), &w, &g]);
            assert_eq!(out.len(), 3);
            let lx = |v: &[f32]| dotv(&run1(&fwd, &[&f32t(&shape, v), &w, &b]), &gv);
            close(&out[0].to_f32_vec(), &numeric_grad(lx, &xv, 1e-2), 2e-3);
            let lw = |v: &[f32]| dotv(&run1(&fwd, &[&f32t(&shape, &xv), &f32t(&ns, v), &b]), &gv);
            close(&out[1].to_f32_vec(), &numeric_grad(lw, &wv, 1e-2), 2e-3);
            let lb = |v: &[f32]| dotv(&run1(&fwd, &[&f32t(&shape, &xv), &w, &f32t(&ns, v)]), &gv);
            close(&out[2].to_f32_vec(), &numeric_grad(lb, &bv, 1e-2), 2e-3);
            // no affine
            let fwd = Op::LayerNorm { normalized_ndim: k, eps, affine: false };
            let out = run(&Op::LayerNormGrad { normalized_ndim: k, eps, affine: false }, &[&f32t(&shape, &xv), &g]);
            assert_eq!(out.len(), 1);
            let lx = |v: &[f32]| dotv(&run1(&fwd, &[&f32t(&shape, v)]), &gv);
            close(&out[0].to_f32_vec(), &numeric_grad(lx, &xv, 1e-2), 2e-3);
        }
    }

    #[test]
    fn dropout_scales_kept_values() {
        let x = f32t(&[4], &[1., 2., 3., 4.]);
        let m = Tensor::from_bool(&[4], vec![true, false, true, false]).unwrap();
        assert_eq!(run1(&Op::Dropout { p: 0.5 }, &[&x, &m]).to_f32_vec(), vec![2., 0., 6., 0.]);
        assert_eq!(run1(&Op::Dropout { p: 0.0 }, &[&x, &m]).to_f32_vec(), vec![1., 0., 3., 0.]);
        assert!(eval(&Op::Dropout { p: 1.0 }, &[&x, &m]).is_err());
        let m2 = Tensor::from_bool(&[2], vec![true, false]).unwrap();
        assert!(eval(&Op::Dropout { p: 0.5 }, &[&x, &m2]).is_err());
    }

    /// A float16 dropout is the float32 product rounded to float16, bit for bit, whether
    /// the kernel skips the rounding (p a power-of-two scale, every result within 65504)
    /// or not (another p; a result past 65504; inf and NaN inputs).
    #[test]
    fn a_float16_dropout_is_the_rounded_product() {
        let cases: [&[f32]; 4] = [
            &[1.5, -2.25, 32752.0, -32752.0, 6e-8, -3e-6, 0.0, -0.0, 1e-3, 0.1],
            &[32768.0, 1.0, -0.5, 2.0],
            &[f32::INFINITY, 1.0, f32::NEG_INFINITY, 3.0],
            &[f32::NAN, 1.0, -1.0, 0.25],
        ];
        for xs in cases {
            let n = xs.len();
            let x = f32t(&[n], xs).cast(DType::Float16);
            let m = Tensor::from_bool(&[n], (0..n).map(|i| i % 3 != 1).collect()).unwrap();
            for p in [0.0f32, 0.5, 0.75, 0.3] {
                let scale = 1.0 / (1.0 - p);
                let product: Vec<f32> =
                    x.to_f32_vec().iter().zip(m.to_f64_vec()).map(|(&v, k)| v * (k as f32 * scale)).collect();
                assert_rounded_half(&run1(&Op::Dropout { p }, &[&x, &m]), &product, &format!("p = {p}, {xs:?}"));
            }
        }
    }
}
