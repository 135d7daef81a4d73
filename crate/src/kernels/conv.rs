//! `Conv2d` and its two gradients, over NCHW float32 (float16 is widened by
//! [`super::eval`]).
//!
//! Each (image, group) is one dense product through [`super::matmul::product`] on an
//! im2col matrix: `cols[K, P]` with `K = C/groups·kh·kw` rows (one per weight element) and
//! `P = oh·ow` columns (one per output position), zeros where the window reads padding.
//! The forward is `W_g[O/g, K] @ cols`, the input gradient `W_gᵀ @ g` scattered back by
//! col2im, and the weight gradient `g @ colsᵀ` summed over the batch.

use super::common::{array, f32_data};
use super::gemm_simd::Start;
use super::matmul::product;
use crate::ir::shape::conv2d_shape;
use crate::ir::Conv2dGeom;
use crate::tensor::Tensor;
use crate::Error;

/// The sizes of one convolution, checked once.
struct Dims {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
    /// Input channels per group.
    cg: usize,
    /// Output channels per group.
    og: usize,
}

impl Dims {
    fn new(geom: &Conv2dGeom, x: &[usize], wshape: &[usize]) -> crate::Result<Dims> {
        if x.len() != 4 {
            return Err(Error::exec(format!("input must be 4-D [N, C, H, W], got {x:?}")));
        }
        let out = conv2d_shape(geom, x, wshape)?;
        let g = geom.groups;
        Ok(Dims {
            n: x[0],
            c: x[1],
            h: x[2],
            w: x[3],
            o: wshape[0],
            kh: wshape[2],
            kw: wshape[3],
            oh: out[2],
            ow: out[3],
            cg: x[1] / g,
            og: wshape[0] / g,
        })
    }
    fn k(&self) -> usize {
        self.cg * self.kh * self.kw
    }
    fn p(&self) -> usize {
        self.oh * self.ow
    }
    /// The input row/column read by output position `o` and kernel offset `k` on `axis`, or
    /// `None` in the padding.
    fn src(&self, geom: &Conv2dGeom, axis: usize, o: usize, k: usize, len: usize) -> Option<usize> {
        let pos = (o * geom.stride[axis] + k * geom.dilation[axis]).checked_sub(geom.padding[axis])?;
        (pos < len).then_some(pos)
    }
}

/// `cols[K, P]` of image `img`, group `grp` (see the module docs).
fn im2col(x: &[f32], d: &Dims, geom: &Conv2dGeom, img: usize, grp: usize, cols: &mut [f32]) {
    let p = d.p();
    for ci in 0..d.cg {
        let plane = &x[((img * d.c) + grp * d.cg + ci) * d.h * d.w..][..d.h * d.w];
        for ki in 0..d.kh {
            for kj in 0..d.kw {
                let row = &mut cols[((ci * d.kh + ki) * d.kw + kj) * p..][..p];
                for oi in 0..d.oh {
                    let out = &mut row[oi * d.ow..(oi + 1) * d.ow];
                    match d.src(geom, 0, oi, ki, d.h) {
                        None => out.fill(0.0),
                        Some(r) => {
                            let src = &plane[r * d.w..(r + 1) * d.w];
                            for (oj, o) in out.iter_mut().enumerate() {
                                *o = d.src(geom, 1, oj, kj, d.w).map_or(0.0, |c| src[c]);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Adds `cols[K, P]` back into the input gradient of image `img`, group `grp` (im2col's
/// adjoint).
fn col2im(cols: &[f32], d: &Dims, geom: &Conv2dGeom, img: usize, grp: usize, gx: &mut [f32]) {
    let p = d.p();
    for ci in 0..d.cg {
        let plane = &mut gx[((img * d.c) + grp * d.cg + ci) * d.h * d.w..][..d.h * d.w];
        for ki in 0..d.kh {
            for kj in 0..d.kw {
                let row = &cols[((ci * d.kh + ki) * d.kw + kj) * p..][..p];
                for oi in 0..d.oh {
                    let Some(r) = d.src(geom, 0, oi, ki, d.h) else { continue };
                    let dst = &mut plane[r * d.w..(r + 1) * d.w];
                    for (oj, &v) in row[oi * d.ow..(oi + 1) * d.ow].iter().enumerate() {
                        if let Some(c) = d.src(geom, 1, oj, kj, d.w) {
                            dst[c] += v;
                        }
                    }
                }
            }
        }
    }
}

/// `Conv2d`: `(x, weight, bias?)`.
pub fn conv2d(geom: &Conv2dGeom, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> crate::Result<Tensor> {
    let d = Dims::new(geom, x.shape(), w.shape())?;
    let (xd, wd) = (f32_data(x, "input")?, f32_data(w, "weight")?);
    let bd = match bias {
        Some(b) if b.shape() != [d.o] => {
            return Err(Error::exec(format!("bias must be [{}], got {:?}", d.o, b.shape())))
        }
        Some(b) => Some(f32_data(b, "bias")?),
        None => None,
    };
    let (k, p) = (d.k(), d.p());
    let mut out = vec![0f32; d.n * d.o * p];
    let mut cols = vec![0f32; k * p];
    for img in 0..d.n {
        for grp in 0..geom.groups {
            im2col(&xd, &d, geom, img, grp, &mut cols);
            let wg = &wd[grp * d.og * k..(grp + 1) * d.og * k];
            let y = product(wg, false, &cols, Start::default(), d.og, k, p, false)?;
            let dst = &mut out[(img * d.o + grp * d.og) * p..][..d.og * p];
            dst.copy_from_slice(&y);
            if let Some(b) = &bd {
                for (oc, row) in dst.chunks_exact_mut(p.max(1)).enumerate() {
                    let bv = b[grp * d.og + oc];
                    row.iter_mut().for_each(|v| *v += bv);
                }
            }
        }
    }
    Ok(Tensor::F32(array(&[d.n, d.o, d.oh, d.ow], out)?))
}

fn check_grad(d: &Dims, g: &Tensor) -> crate::Result<()> {
    if g.shape() != [d.n, d.o, d.oh, d.ow] {
        return Err(Error::exec(format!(
            "gradient {:?} does not match the output [{}, {}, {}, {}]",
            g.shape(),
            d.n,
            d.o,
            d.oh,
            d.ow
        )));
    }
    Ok(())
}

/// `Conv2dGradInput`: `(weight, g)` → the input gradient of shape `in_shape`.
pub fn conv2d_grad_input(geom: &Conv2dGeom, in_shape: &[usize], w: &Tensor, g: &Tensor) -> crate::Result<Tensor> {
    let d = Dims::new(geom, in_shape, w.shape())?;
    check_grad(&d, g)?;
    let (wd, gd) = (f32_data(w, "weight")?, f32_data(g, "gradient")?);
    let (k, p) = (d.k(), d.p());
    let mut gx = vec![0f32; d.n * d.c * d.h * d.w];
    for img in 0..d.n {
        for grp in 0..geom.groups {
            let wg = &wd[grp * d.og * k..(grp + 1) * d.og * k];
            let gg = &gd[(img * d.o + grp * d.og) * p..][..d.og * p];
            // W_gᵀ[K, O/g] @ g[O/g, P]: W_g is stored [O/g, K].
            let cols = product(wg, true, gg, Start::default(), k, d.og, p, false)?;
            col2im(&cols, &d, geom, img, grp, &mut gx);
        }
    }
    Ok(Tensor::F32(array(in_shape, gx)?))
}

/// `Conv2dGradWeight`: `(x, g)` → the weight gradient of shape `weight_shape`.
pub fn conv2d_grad_weight(geom: &Conv2dGeom, weight_shape: &[usize], x: &Tensor, g: &Tensor) -> crate::Result<Tensor> {
    let d = Dims::new(geom, x.shape(), weight_shape)?;
    check_grad(&d, g)?;
    let (xd, gd) = (f32_data(x, "input")?, f32_data(g, "gradient")?);
    let (k, p) = (d.k(), d.p());
    let mut gw = vec![0f32; d.o * k];
    let mut cols = vec![0f32; k * p];
    let mut cols_t = vec![0f32; p * k];
    for img in 0..d.n {
        for grp in 0..geom.groups {
            im2col(&xd, &d, geom, img, grp, &mut cols);
            for (r, row) in cols.chunks_exact(p.max(1)).enumerate() {
                for (c, &v) in row.iter().enumerate() {
                    cols_t[c * k + r] = v;
                }
            }
            let gg = &gd[(img * d.o + grp * d.og) * p..][..d.og * p];
            let dst = &mut gw[grp * d.og * k..(grp + 1) * d.og * k];
            // g[O/g, P] @ colsᵀ[P, K], added to the sum so far.
            let sum = product(gg, false, &cols_t, Start { bias: None, addend: Some(&*dst) }, d.og, p, k, false)?;
            dst.copy_from_slice(&sum);
        }
    }
    Ok(Tensor::F32(array(weight_shape, gw)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], v: Vec<f32>) -> Tensor {
        Tensor::from_f32(shape, v).unwrap()
    }

    /// A direct 7-loop convolution, the definition.
    fn naive(geom: &Conv2dGeom, x: &Tensor, w: &Tensor) -> Vec<f32> {
        let d = Dims::new(geom, x.shape(), w.shape()).unwrap();
        let (xd, wd) = (x.to_f32_vec(), w.to_f32_vec());
        let mut out = vec![0f32; d.n * d.o * d.oh * d.ow];
        for n in 0..d.n {
            for o in 0..d.o {
                let grp = o / d.og;
                for oi in 0..d.oh {
                    for oj in 0..d.ow {
                        let mut s = 0f32;
                        for ci in 0..d.cg {
                            for ki in 0..d.kh {
                                for kj in 0..d.kw {
                                    let (Some(r), Some(c)) = (d.src(geom, 0, oi, ki, d.h), d.src(geom, 1, oj, kj, d.w))
                                    else {
                                        continue;
                                    };
                                    let xv = xd[((n * d.c + grp * d.cg + ci) * d.h + r) * d.w + c];
                                    s += xv * wd[((o * d.cg + ci) * d.kh + ki) * d.kw + kj];
                                }
                            }
                        }
                        out[((n * d.o + o) * d.oh + oi) * d.ow + oj] = s;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn matches_the_definition_and_the_adjoints_are_adjoint() {
        let mut rng = crate::rng::Rng::new(5);
        let mut r = |n: usize| (0..n).map(|_| rng.uniform_range(-1.0, 1.0)).collect::<Vec<f32>>();
        let geom = Conv2dGeom { stride: [2, 1], padding: [1, 2], dilation: [1, 2], groups: 2 };
        let x = t(&[2, 4, 5, 6], r(240));
        let w = t(&[6, 2, 3, 2], r(72));
        let y = conv2d(&geom, &x, &w, None).unwrap();
        let want = naive(&geom, &x, &w);
        assert_eq!(y.shape(), &[2, 6, 3, 8]);
        for (a, b) in y.to_f32_vec().iter().zip(&want) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
        // <conv(x, w), g> = <x, gx(g)> = <w, gw(g)>: the gradients are the adjoints.
        let g = t(y.shape(), r(y.numel()));
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| (*x as f64) * (*y as f64)).sum::<f64>();
        let lhs = dot(&y.to_f32_vec(), &g.to_f32_vec());
        let gx = conv2d_grad_input(&geom, x.shape(), &w, &g).unwrap();
        let gw = conv2d_grad_weight(&geom, w.shape(), &x, &g).unwrap();
        assert!((lhs - dot(&x.to_f32_vec(), &gx.to_f32_vec())).abs() < 1e-3);
        assert!((lhs - dot(&w.to_f32_vec(), &gw.to_f32_vec())).abs() < 1e-3);
        let e = conv2d(&geom, &t(&[1, 3, 5, 6], r(90)), &w, None).unwrap_err().to_string();
        assert!(e.contains("divisible by groups"), "{e}");
    }
}
