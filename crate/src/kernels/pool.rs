//! 2-D pooling over NCHW float32 (float16 is widened by [`super::eval`]): `MaxPool2d`,
//! `AvgPool2d`, `AdaptiveAvgPool2d` and their gradients, with PyTorch's windows.

use super::common::{array, f32_data};
use crate::ir::shape::pool2d_shape;
use crate::ir::Pool2dGeom;
use crate::tensor::Tensor;
use crate::Error;

fn nchw(shape: &[usize], what: &str) -> crate::Result<[usize; 4]> {
    match shape {
        &[n, c, h, w] => Ok([n, c, h, w]),
        other => Err(Error::exec(format!("{what} must be 4-D [N, C, H, W], got {other:?}"))),
    }
}

/// The input positions `[lo, hi)` a window covers on one axis, clipped to the input; for
/// average pooling also the window's size counting padding (clipped to the padded input,
/// as PyTorch's `hend = min(hstart + k, H + pad)`).
fn window(g: &Pool2dGeom, axis: usize, o: usize, len: usize) -> (usize, usize, usize) {
    let start = (o * g.stride[axis]) as isize - g.padding[axis] as isize;
    let span = (g.dilation[axis] * (g.kernel[axis] - 1) + 1) as isize;
    let end_padded = (start + span).min((len + g.padding[axis]) as isize);
    let padded = (end_padded - start) as usize;
    (start.max(0) as usize, (start + span).min(len as isize) as usize, padded)
}

/// The input positions a max-pooling window reads on one axis (dilated taps inside the input).
fn taps(g: &Pool2dGeom, axis: usize, o: usize, len: usize) -> Vec<usize> {
    let start = (o * g.stride[axis]) as isize - g.padding[axis] as isize;
    (0..g.kernel[axis])
        .map(|k| start + (k * g.dilation[axis]) as isize)
        .filter(|&p| p >= 0 && (p as usize) < len)
        .map(|p| p as usize)
        .collect()
}

/// `MaxPool2d`: the maximum of each window; the index of the first maximum (row-major in
/// the window) goes to the gradient.
/// A max pool's values, the input index of each output's maximum, and the output shape.
type MaxPooled = (Vec<f32>, Vec<usize>, Vec<usize>);

fn max_pool(g: &Pool2dGeom, x: &Tensor) -> crate::Result<MaxPooled> {
    let [n, c, h, w] = nchw(x.shape(), "input")?;
    let out = pool2d_shape(g, x.shape())?;
    let (oh, ow) = (out[2], out[3]);
    let xd = f32_data(x, "input")?;
    let mut vals = Vec::with_capacity(n * c * oh * ow);
    let mut arg = Vec::with_capacity(n * c * oh * ow);
    for plane in 0..n * c {
        let src = &xd[plane * h * w..(plane + 1) * h * w];
        for oi in 0..oh {
            let rows = taps(g, 0, oi, h);
            for oj in 0..ow {
                let cols = taps(g, 1, oj, w);
                let (mut best, mut at) = (f32::NEG_INFINITY, None);
                for &r in &rows {
                    for &col in &cols {
                        let v = src[r * w + col];
                        // As PyTorch: the first maximum, and NaN propagates.
                        if at.is_none() || v > best || v.is_nan() {
                            best = v;
                            at = Some(r * w + col);
                        }
                    }
                }
                let at = at.ok_or_else(|| Error::exec("internal: a pooling window with no input element"))?;
                vals.push(best);
                arg.push(plane * h * w + at);
            }
        }
    }
    Ok((vals, arg, out))
}

/// `MaxPool2d`.
pub fn max_pool2d(g: &Pool2dGeom, x: &Tensor) -> crate::Result<Tensor> {
    let (vals, _, out) = max_pool(g, x)?;
    Ok(Tensor::F32(array(&out, vals)?))
}

/// `MaxPool2dGrad`: `(x, g)` → each window's gradient added at its first maximum.
pub fn max_pool2d_grad(geom: &Pool2dGeom, x: &Tensor, g: &Tensor) -> crate::Result<Tensor> {
    let (_, arg, out) = max_pool(geom, x)?;
    if g.shape() != out {
        return Err(Error::exec(format!("gradient {:?} does not match the output {out:?}", g.shape())));
    }
    let gd = f32_data(g, "gradient")?;
    let mut gx = vec![0f32; x.numel()];
    for (&i, &v) in arg.iter().zip(gd.iter()) {
        gx[i] += v;
    }
    Ok(Tensor::F32(array(x.shape(), gx)?))
}

/// Calls `f(plane, out index, input rows, input cols, divisor)` for every output of
/// `AvgPool2d` on an input of `shape`.
fn avg_windows(
    g: &Pool2dGeom,
    count_include_pad: bool,
    shape: &[usize],
    mut f: impl FnMut(usize, usize, (usize, usize), (usize, usize), f32),
) -> crate::Result<Vec<usize>> {
    let [n, c, h, w] = nchw(shape, "input")?;
    let out = pool2d_shape(g, shape)?;
    let (oh, ow) = (out[2], out[3]);
    for plane in 0..n * c {
        for oi in 0..oh {
            let (r0, r1, rp) = window(g, 0, oi, h);
            for oj in 0..ow {
                let (c0, c1, cp) = window(g, 1, oj, w);
                let div = if count_include_pad { rp * cp } else { (r1 - r0) * (c1 - c0) };
                f(plane, (plane * oh + oi) * ow + oj, (r0, r1), (c0, c1), div as f32);
            }
        }
    }
    Ok(out)
}

/// `AvgPool2d`.
pub fn avg_pool2d(g: &Pool2dGeom, count_include_pad: bool, x: &Tensor) -> crate::Result<Tensor> {
    let [_, _, h, w] = nchw(x.shape(), "input")?;
    let xd = f32_data(x, "input")?;
    let mut vals = Vec::new();
    let out = avg_windows(g, count_include_pad, x.shape(), |plane, _, (r0, r1), (c0, c1), div| {
        let src = &xd[plane * h * w..];
        let s: f32 = (r0..r1).map(|r| src[r * w + c0..r * w + c1].iter().sum::<f32>()).sum();
        vals.push(s / div);
    })?;
    Ok(Tensor::F32(array(&out, vals)?))
}

/// `AvgPool2dGrad`: `(g)` → each window's gradient spread over its input elements.
pub fn avg_pool2d_grad(
    geom: &Pool2dGeom,
    count_include_pad: bool,
    in_shape: &[usize],
    g: &Tensor,
) -> crate::Result<Tensor> {
    let [_, _, h, w] = nchw(in_shape, "input")?;
    let gd = f32_data(g, "gradient")?;
    let mut gx = vec![0f32; in_shape.iter().product()];
    let want = pool2d_shape(geom, in_shape)?;
    if g.shape() != want {
        return Err(Error::exec(format!("gradient {:?} does not match the output {want:?}", g.shape())));
    }
    avg_windows(geom, count_include_pad, in_shape, |plane, o, (r0, r1), (c0, c1), div| {
        spread(&mut gx[plane * h * w..], w, (r0, r1), (c0, c1), gd[o] / div);
    })?;
    Ok(Tensor::F32(array(in_shape, gx)?))
}

/// Adds `v` to every element of the window rows `r0..r1`, columns `c0..c1` of a plane of
/// width `w` (an average pool's gradient spread over its window).
fn spread(plane: &mut [f32], w: usize, (r0, r1): (usize, usize), (c0, c1): (usize, usize), v: f32) {
    for r in r0..r1 {
        plane[r * w + c0..r * w + c1].iter_mut().for_each(|e| *e += v);
    }
}

/// PyTorch's adaptive window of output `i` of `out` over `len`: `⌊i·len/out⌋ ..
/// ⌈(i+1)·len/out⌉`.
fn adaptive(i: usize, out: usize, len: usize) -> (usize, usize) {
    (i * len / out, ((i + 1) * len).div_ceil(out))
}

fn adaptive_windows(
    output: [usize; 2],
    shape: &[usize],
    mut f: impl FnMut(usize, usize, (usize, usize), (usize, usize), f32),
) -> crate::Result<()> {
    let [n, c, h, w] = nchw(shape, "input")?;
    let [oh, ow] = output;
    if oh == 0 || ow == 0 {
        return Err(Error::exec(format!("the output size {output:?} must be positive")));
    }
    for plane in 0..n * c {
        for oi in 0..oh {
            let (r0, r1) = adaptive(oi, oh, h);
            for oj in 0..ow {
                let (c0, c1) = adaptive(oj, ow, w);
                f(plane, (plane * oh + oi) * ow + oj, (r0, r1), (c0, c1), ((r1 - r0) * (c1 - c0)) as f32);
            }
        }
    }
    Ok(())
}

/// `AdaptiveAvgPool2d`.
pub fn adaptive_avg_pool2d(output: [usize; 2], x: &Tensor) -> crate::Result<Tensor> {
    let [n, c, h, w] = nchw(x.shape(), "input")?;
    let xd = f32_data(x, "input")?;
    let mut vals = Vec::new();
    adaptive_windows(output, x.shape(), |plane, _, (r0, r1), (c0, c1), div| {
        let src = &xd[plane * h * w..];
        let s: f32 = (r0..r1).map(|r| src[r * w + c0..r * w + c1].iter().sum::<f32>()).sum();
        vals.push(if div > 0.0 { s / div } else { f32::NAN });
    })?;
    Ok(Tensor::F32(array(&[n, c, output[0], output[1]], vals)?))
}

/// `AdaptiveAvgPool2dGrad`: `(g)` → each window's gradient spread over its elements.
pub fn adaptive_avg_pool2d_grad(in_shape: &[usize], g: &Tensor) -> crate::Result<Tensor> {
    let [n, c, h, w] = nchw(in_shape, "input")?;
    let gs = nchw(g.shape(), "gradient")?;
    if gs[..2] != [n, c] {
        return Err(Error::exec(format!("gradient {:?} does not match the input {in_shape:?}", g.shape())));
    }
    let gd = f32_data(g, "gradient")?;
    let mut gx = vec![0f32; n * c * h * w];
    adaptive_windows([gs[2], gs[3]], in_shape, |plane, o, (r0, r1), (c0, c1), div| {
        spread(&mut gx[plane * h * w..], w, (r0, r1), (c0, c1), gd[o] / div);
    })?;
    Ok(Tensor::F32(array(in_shape, gx)?))
}
