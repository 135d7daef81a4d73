//! Message-passing reductions: `ScatterAdd`, `ScatterMean` and `ScatterMeanGrad`.
//!
//! A source `[E, …]` is a list of E contiguous rows; row e goes to output row `index[e]`.
//! Float32 only (float16 is widened by [`super::eval`] and rounded once at the end).

use super::common::{array, check_indices, f32_data, i32_data};
use crate::tensor::Tensor;
use crate::Error;
use std::borrow::Cow;

/// Source rows: the data, the row length and the validated target index of each row.
struct Rows<'a> {
    data: Cow<'a, [f32]>,
    len: usize,
    index: Cow<'a, [i32]>,
}

fn rows_and_index<'a>(src: &'a Tensor, index: &'a Tensor, dim_size: usize) -> crate::Result<Rows<'a>> {
    let s = src.shape();
    let d = f32_data(src, "source")?;
    let idx = i32_data(index, "index")?;
    if s.is_empty() || index.shape() != [s[0]] {
        return Err(Error::exec(format!(
            "index must be [{}] to match the source {s:?}, got shape {:?}",
            s.first().unwrap_or(&0),
            index.shape()
        )));
    }
    check_indices(&idx, dim_size, "index")?;
    Ok(Rows { data: d, len: s[1..].iter().product(), index: idx })
}

fn counts(idx: &[i32], dim_size: usize) -> Vec<u32> {
    let mut c = vec![0u32; dim_size];
    for &i in idx {
        c[i as usize] += 1;
    }
    c
}

/// `ScatterAdd { dim_size }` (`mean`: `ScatterMean`, 0 where nothing arrives).
pub fn scatter(src: &Tensor, index: &Tensor, dim_size: usize, mean: bool) -> crate::Result<Tensor> {
    let Rows { data: d, len: f, index: idx } = rows_and_index(src, index, dim_size)?;
    let mut out = vec![0f32; dim_size * f];
    if f > 0 {
        for (e, row) in d.chunks_exact(f).enumerate() {
            let r = idx[e] as usize;
            for (o, &v) in out[r * f..(r + 1) * f].iter_mut().zip(row) {
                *o += v;
            }
        }
        if mean {
            let c = counts(&idx, dim_size);
            for (row, &n) in out.chunks_exact_mut(f).zip(&c) {
                if n > 1 {
                    let n = n as f32;
                    row.iter_mut().for_each(|v| *v /= n);
                }
            }
        }
    }
    let mut shape = src.shape().to_vec();
    shape[0] = dim_size;
    Ok(Tensor::F32(array(&shape, out)?))
}

/// `ScatterMeanGrad { dim_size }`: `(index[E], g[dim_size, …])` → `[E, …]`,
/// row e is `g[index[e]] / count[index[e]]`.
pub fn scatter_mean_grad(index: &Tensor, g: &Tensor, dim_size: usize) -> crate::Result<Tensor> {
    let gd = f32_data(g, "gradient")?;
    let gs = g.shape();
    if gs.first() != Some(&dim_size) {
        return Err(Error::exec(format!("gradient must be [{dim_size}, …], got shape {gs:?}")));
    }
    let idx = i32_data(index, "index")?;
    if index.shape().len() != 1 {
        return Err(Error::exec(format!("index must be 1-D, got shape {:?}", index.shape())));
    }
    check_indices(&idx, dim_size, "index")?;
    let f: usize = gs[1..].iter().product();
    let c = counts(&idx, dim_size);
    let mut out = Vec::with_capacity(idx.len() * f);
    for &i in idx.iter() {
        let r = i as usize;
        let n = c[r] as f32;
        out.extend(gd[r * f..(r + 1) * f].iter().map(|&v| v / n));
    }
    let mut shape = gs.to_vec();
    shape[0] = idx.len();
    Ok(Tensor::F32(array(&shape, out)?))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::ir::Op;
    use crate::tensor::{DType, Tensor};

    #[test]
    fn scatter_add_and_mean() {
        let src = f32t(&[4, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]);
        let idx = Tensor::from_i32(&[4], vec![2, 0, 2, 2]).unwrap();
        let s = run1(&Op::ScatterAdd { dim_size: 4 }, &[&src, &idx]);
        assert_eq!(s.shape(), &[4, 2]);
        assert_eq!(s.to_f32_vec(), vec![3., 4., 0., 0., 13., 16., 0., 0.]);
        let m = run1(&Op::ScatterMean { dim_size: 4 }, &[&src, &idx]);
        assert_eq!(m.to_f32_vec(), vec![3., 4., 0., 0., 13. / 3., 16. / 3., 0., 0.]);
        let bad = Tensor::from_i32(&[4], vec![2, 0, 4, 2]).unwrap();
        let e = eval(&Op::ScatterAdd { dim_size: 4 }, &[&src, &bad]).unwrap_err().to_string();
        assert!(e.contains("index 4") && e.contains("size 4"), "{e}");
        assert!(eval(&Op::ScatterAdd { dim_size: 4 }, &[&src, &Tensor::from_i32(&[3], vec![0; 3]).unwrap()]).is_err());
        // 1-D source (one value per edge) and half
        let s1 = run1(
            &Op::ScatterAdd { dim_size: 2 },
            &[&f32t(&[3], &[1., 2., 3.]), &Tensor::from_i32(&[3], vec![1, 1, 0]).unwrap()],
        );
        assert_eq!(s1.to_f32_vec(), vec![3., 3.]);
        let sh = run1(&Op::ScatterMean { dim_size: 4 }, &[&src.cast(DType::Float16), &idx]);
        assert_eq!(sh.dtype(), DType::Float16);
        assert_eq!(sh.to_f64_vec(), m.cast(DType::Float16).to_f64_vec());
    }

    #[test]
    fn scatter_grads_match_finite_differences() {
        let sv: Vec<f32> = (0..15).map(|i| i as f32 * 0.2 - 1.0).collect();
        let idx = Tensor::from_i32(&[5], vec![3, 0, 3, 1, 3]).unwrap();
        let gv: Vec<f32> = (0..12).map(|i| 0.5 - i as f32 * 0.15).collect();
        let g = f32t(&[4, 3], &gv);
        // ScatterMean's adjoint
        let fwd = Op::ScatterMean { dim_size: 4 };
        let got = run1(&Op::ScatterMeanGrad { dim_size: 4 }, &[&idx, &g]).to_f32_vec();
        let fd = numeric_grad(|v| dotv(&run1(&fwd, &[&f32t(&[5, 3], v), &idx]), &gv), &sv, 1e-2);
        close(&got, &fd, 1e-3);
        // ScatterAdd's adjoint is IndexSelect on dim 0
        let fwd = Op::ScatterAdd { dim_size: 4 };
        let got = run1(&Op::IndexSelect { dim: 0 }, &[&g, &idx]).to_f32_vec();
        let fd = numeric_grad(|v| dotv(&run1(&fwd, &[&f32t(&[5, 3], v), &idx]), &gv), &sv, 1e-2);
        close(&got, &fd, 1e-3);
        assert!(eval(&Op::ScatterMeanGrad { dim_size: 3 }, &[&idx, &g]).is_err());
    }
}
