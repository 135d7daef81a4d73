//! `CrossEntropy`, `CrossEntropyGrad` and `IdentityLoss`.
//!
//! Cross-entropy follows `torch.nn.functional.cross_entropy` applied to the rows kept by
//! the node mask: per row `w[t]·(logsumexp(x) − x[t])` (log-softmax based, max-subtracted,
//! in f64); `mean` divides by the sum of the class weights of the kept rows (the number of
//! kept rows without weights) and is NaN when that is 0, like PyTorch on an empty batch;
//! `none` gives 0 at masked-out rows. Rows whose target is `ignore_index` are left out like
//! masked-out rows (PyTorch's `ignore_index`). Targets are checked on the kept rows only
//! (masked-out rows may hold any label). With label smoothing `ε` a kept row's loss is
//! `(1−ε)·w[t]·(lse − x[t]) + ε/C·Σ_c w[c]·(lse − x[c])`, and `mean` still divides by the
//! kept rows' `Σ w[t]`, as PyTorch's `cross_entropy_loss_label_smoothing`.

use super::common::{array, bool_data, f32_data, i32_data};
use super::reduce::reduce;
use crate::ir::{ReduceKind, Reduction};
use crate::tensor::Tensor;
use crate::Error;
use std::borrow::Cow;

struct CeInputs<'a> {
    x: Cow<'a, [f32]>,
    n: usize,
    c: usize,
    /// Per row: `Some((target, weight))` for kept rows.
    rows: Vec<Option<(usize, f64)>>,
    /// Sum of the weights of the kept rows.
    wsum: f64,
}

/// How a cross-entropy reduces, weighs, ignores and smooths (the op's attributes).
pub struct CeOptions<'a> {
    pub reduction: Reduction,
    pub class_weight: Option<&'a [f32]>,
    pub ignore_index: Option<i32>,
    pub label_smoothing: f32,
}

fn ce_inputs<'a>(
    logits: &'a Tensor,
    target: &'a Tensor,
    mask: Option<&'a Tensor>,
    class_weight: Option<&[f32]>,
    ignore_index: Option<i32>,
) -> crate::Result<CeInputs<'a>> {
    let x = f32_data(logits, "logits")?;
    let s = logits.shape();
    if s.len() != 2 {
        return Err(Error::exec(format!("logits must be [N, C], got shape {s:?}")));
    }
    let (n, c) = (s[0], s[1]);
    let t = i32_data(target, "target")?;
    if target.shape() != [n] {
        return Err(Error::exec(format!("target must be [{n}], got shape {:?}", target.shape())));
    }
    let m = match mask {
        Some(m) => {
            if m.shape() != [n] {
                return Err(Error::exec(format!("node mask must be [{n}], got shape {:?}", m.shape())));
            }
            Some(bool_data(m, "node mask")?)
        }
        None => None,
    };
    if let Some(w) = class_weight {
        if w.len() != c {
            return Err(Error::exec(format!("class_weight has {} entries for {c} classes", w.len())));
        }
    }
    let mut rows = Vec::with_capacity(n);
    let mut wsum = 0f64;
    for i in 0..n {
        if m.as_ref().is_some_and(|m| !m[i]) {
            rows.push(None);
            continue;
        }
        let ti = t[i];
        if ignore_index == Some(ti) {
            rows.push(None);
            continue;
        }
        if ti < 0 || ti as usize >= c {
            return Err(Error::exec(format!("target {ti} at row {i} is out of range for {c} classes")));
        }
        let w = class_weight.map_or(1.0, |w| w[ti as usize] as f64);
        wsum += w;
        rows.push(Some((ti as usize, w)));
    }
    Ok(CeInputs { x, n, c, rows, wsum })
}

/// `logsumexp` of a row, in f64.
#[inline]
fn lse(row: &[f32]) -> f64 {
    let m = row.iter().fold(f32::NEG_INFINITY, |m, &v| if v > m || v.is_nan() { v } else { m }) as f64;
    if m.is_infinite() {
        return m;
    }
    m + row.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln()
}

/// The class weight of class `c` (1 without weights).
fn cw(class_weight: Option<&[f32]>, c: usize) -> f64 {
    class_weight.map_or(1.0, |w| w[c] as f64)
}

/// `CrossEntropy`: `(logits, target, node_mask?)`.
pub fn cross_entropy(
    logits: &Tensor,
    target: &Tensor,
    mask: Option<&Tensor>,
    how: &CeOptions<'_>,
) -> crate::Result<Tensor> {
    let ce = ce_inputs(logits, target, mask, how.class_weight, how.ignore_index)?;
    let eps = how.label_smoothing as f64;
    let mut per = vec![0f64; ce.n];
    for (i, row) in ce.rows.iter().enumerate() {
        if let Some((t, w)) = *row {
            let xr = &ce.x[i * ce.c..(i + 1) * ce.c];
            let l = lse(xr);
            per[i] = (1.0 - eps) * w * (l - xr[t] as f64);
            if eps != 0.0 {
                let smooth: f64 = xr.iter().enumerate().map(|(c, &v)| cw(how.class_weight, c) * (l - v as f64)).sum();
                per[i] += eps / ce.c as f64 * smooth;
            }
        }
    }
    match how.reduction {
        Reduction::None => Ok(Tensor::F32(array(&[ce.n], per.into_iter().map(|v| v as f32).collect())?)),
        Reduction::Sum => Ok(Tensor::scalar(per.iter().sum::<f64>() as f32)),
        Reduction::Mean => Ok(Tensor::scalar((per.iter().sum::<f64>() / ce.wsum) as f32)),
    }
}

/// `CrossEntropyGrad`: `(logits, target, node_mask?, g)` → gradient w.r.t. the logits:
/// `g·((1−ε)·w[t]·(softmax(x) − onehot(t)) + ε/C·(W·softmax(x) − w))` on kept rows, with
/// `W = Σ w` (divided by the kept weight sum for `mean`), 0 on rows left out. `g` is a
/// scalar for `mean`/`sum` and `[N]` for `none`.
pub fn cross_entropy_grad(
    logits: &Tensor,
    target: &Tensor,
    mask: Option<&Tensor>,
    g: &Tensor,
    how: &CeOptions<'_>,
) -> crate::Result<Tensor> {
    let reduction = how.reduction;
    let ce = ce_inputs(logits, target, mask, how.class_weight, how.ignore_index)?;
    let eps = how.label_smoothing as f64;
    let wall: f64 = (0..ce.c).map(|c| cw(how.class_weight, c)).sum();
    let gd = f32_data(g, "gradient")?;
    let want = if reduction == Reduction::None { ce.n } else { 1 };
    if gd.len() != want {
        return Err(Error::exec(format!(
            "gradient has shape {:?}; expected {} for reduction {reduction:?}",
            g.shape(),
            if want == 1 { "a scalar".to_string() } else { format!("[{want}]") }
        )));
    }
    let mut out = vec![0f32; ce.n * ce.c];
    let mut p = vec![0f64; ce.c];
    for (i, row) in ce.rows.iter().enumerate() {
        let Some((t, w)) = *row else { continue };
        let gi = match reduction {
            Reduction::None => gd[i] as f64,
            Reduction::Sum => gd[0] as f64,
            Reduction::Mean => gd[0] as f64 / ce.wsum,
        };
        let xr = &ce.x[i * ce.c..(i + 1) * ce.c];
        let l = lse(xr);
        let k = eps / ce.c as f64;
        for (j, (pj, &v)) in p.iter_mut().zip(xr).enumerate() {
            let sm = (v as f64 - l).exp();
            *pj = (1.0 - eps) * w * sm + k * (wall * sm - cw(how.class_weight, j));
        }
        p[t] -= (1.0 - eps) * w;
        for (o, &pj) in out[i * ce.c..(i + 1) * ce.c].iter_mut().zip(&p) {
            *o = (gi * pj) as f32;
        }
    }
    Ok(Tensor::F32(array(&[ce.n, ce.c], out)?))
}

/// `IdentityLoss { reduction }`: `sum`/`mean` of all elements (a scalar), or the input itself.
pub fn identity_loss(x: &Tensor, reduction: Reduction) -> crate::Result<Tensor> {
    match reduction {
        Reduction::None => match x {
            Tensor::F32(_) | Tensor::F16(_) => Ok(x.clone()),
            other => Err(Error::exec(format!("loss must be float32 or float16, got {}", other.dtype()))),
        },
        Reduction::Sum => reduce(ReduceKind::Sum, &[], false, x),
        Reduction::Mean => reduce(ReduceKind::Mean, &[], false, x),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::ir::{Op, Reduction};
    use crate::tensor::{DType, Tensor};

    fn ce_op(reduction: Reduction, class_weight: Option<Vec<f32>>, has_mask: bool) -> Op {
        Op::CrossEntropy { reduction, class_weight, has_mask, ignore_index: None, label_smoothing: 0.0 }
    }

    #[test]
    fn cross_entropy_values() {
        let x = f32t(&[3, 3], &[1., 2., 3., 0., 0., 0., 5., 1., -1.]);
        let t = Tensor::from_i32(&[3], vec![2, 1, 1]).unwrap();
        let m = Tensor::from_bool(&[3], vec![true, false, true]).unwrap();
        // row losses: lse - x[t]
        let l0 = (1f64.exp() + 2f64.exp() + 3f64.exp()).ln() - 3.0;
        let l1 = 3f64.ln();
        let l2 = (5f64.exp() + 1f64.exp() + (-1f64).exp()).ln() - 1.0;
        let none = run1(&ce_op(Reduction::None, None, false), &[&x, &t]).to_f32_vec();
        close(&none, &[l0 as f32, l1 as f32, l2 as f32], 1e-6);
        let none = run1(&ce_op(Reduction::None, None, true), &[&x, &t, &m]).to_f32_vec();
        close(&none, &[l0 as f32, 0.0, l2 as f32], 1e-6);
        let mean = run1(&ce_op(Reduction::Mean, None, true), &[&x, &t, &m]).to_f32_vec();
        close(&mean, &[((l0 + l2) / 2.0) as f32], 1e-6);
        let sum = run1(&ce_op(Reduction::Sum, None, false), &[&x, &t]).to_f32_vec();
        close(&sum, &[(l0 + l1 + l2) as f32], 1e-6);
        let w = vec![1.0, 0.5, 2.0];
        let mean = run1(&ce_op(Reduction::Mean, Some(w.clone()), true), &[&x, &t, &m]).to_f32_vec();
        close(&mean, &[((2.0 * l0 + 0.5 * l2) / 2.5) as f32], 1e-6);
        let sum = run1(&ce_op(Reduction::Sum, Some(w), false), &[&x, &t]).to_f32_vec();
        close(&sum, &[(2.0 * l0 + 0.5 * l1 + 0.5 * l2) as f32], 1e-6);
        // out-of-range targets name the row and the value; masked-out rows are not checked
        let bad = Tensor::from_i32(&[3], vec![2, 7, 1]).unwrap();
        let e = eval(&ce_op(Reduction::Mean, None, false), &[&x, &bad]).unwrap_err().to_string();
        assert!(e.contains("target 7") && e.contains("row 1"), "{e}");
        assert!(eval(&ce_op(Reduction::Mean, None, true), &[&x, &bad, &m]).is_ok());
        let neg = Tensor::from_i32(&[3], vec![-1, 0, 0]).unwrap();
        assert!(eval(&ce_op(Reduction::Sum, None, false), &[&x, &neg]).unwrap_err().to_string().contains("-1"));
        // empty mask: mean is NaN (torch), sum is 0
        let none_kept = Tensor::from_bool(&[3], vec![false; 3]).unwrap();
        assert!(run1(&ce_op(Reduction::Mean, None, true), &[&x, &t, &none_kept]).to_f32_vec()[0].is_nan());
        assert_eq!(run1(&ce_op(Reduction::Sum, None, true), &[&x, &t, &none_kept]).to_f32_vec(), vec![0.0]);
        // large logits stay finite
        let big = f32t(&[1, 2], &[1000., 0.]);
        let z = Tensor::from_i32(&[1], vec![0]).unwrap();
        assert_eq!(run1(&ce_op(Reduction::Mean, None, false), &[&big, &z]).to_f32_vec(), vec![0.0]);
        let h = x.cast(DType::Float16);
        assert_eq!(run1(&ce_op(Reduction::Mean, None, false), &[&h, &t]).dtype(), DType::Float16);
    }

    #[test]
    fn cross_entropy_grad_matches_finite_differences() {
        let (n, c) = (5, 4);
        let xv: Vec<f32> = (0..n * c).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.4).collect();
        let t = Tensor::from_i32(&[n], vec![0, 3, 1, 1, 2]).unwrap();
        let m = Tensor::from_bool(&[n], vec![true, true, false, true, false]).unwrap();
        for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
            for cw in [None, Some(vec![0.5, 2.0, 1.0, 1.5])] {
                for has_mask in [false, true] {
                    for (ignore_index, label_smoothing) in [(None, 0.0), (Some(1), 0.0), (Some(3), 0.2), (None, 0.1)] {
                        let fwd = Op::CrossEntropy {
                            reduction,
                            class_weight: cw.clone(),
                            has_mask,
                            ignore_index,
                            label_smoothing,
                        };
                        let bwd = Op::CrossEntropyGrad {
                            reduction,
                            class_weight: cw.clone(),
                            has_mask,
                            ignore_index,
                            label_smoothing,
                        };
                        let gv: Vec<f32> =
                            if reduction == Reduction::None { vec![0.3, -1.2, 0.8, 1.1, -0.4] } else { vec![0.7] };
                        let gshape: Vec<usize> = if reduction == Reduction::None { vec![n] } else { vec![] };
                        let g = f32t(&gshape, &gv);
                        let x = f32t(&[n, c], &xv);
                        let mut ins = vec![&x, &t];
                        if has_mask {
                            ins.push(&m);
                        }
                        let mut bins = ins.clone();
                        bins.push(&g);
                        let got = run1(&bwd, &bins).to_f32_vec();
                        let loss = |v: &[f32]| {
                            let xx = f32t(&[n, c], v);
                            let mut ins = vec![&xx, &t];
                            if has_mask {
                                ins.push(&m);
                            }
                            dotv(&run1(&fwd, &ins), &gv)
                        };
                        close(&got, &numeric_grad(loss, &xv, 1e-2), 2e-3);
                        if has_mask {
                            // masked-out rows get no gradient
                            assert!(got[2 * c..3 * c].iter().all(|&v| v == 0.0));
                        }
                        if ignore_index == Some(1) {
                            // ignored rows (targets 1 at rows 2 and 3) get no gradient
                            assert!(got[2 * c..4 * c].iter().all(|&v| v == 0.0));
                        }
                    }
                }
            }
        }
        let x = f32t(&[n, c], &xv);
        let bad_g = f32t(&[2], &[1., 1.]);
        assert!(eval(
            &Op::CrossEntropyGrad {
                reduction: Reduction::Mean,
                class_weight: None,
                has_mask: false,
                ignore_index: None,
                label_smoothing: 0.0
            },
            &[&x, &t, &bad_g]
        )
        .is_err());
    }

    #[test]
    fn identity_loss_reductions() {
        let x = f32t(&[2, 2], &[1., 2., 3., 4.]);
        let r = |red| run1(&Op::IdentityLoss { reduction: red }, &[&x]);
        assert_eq!(r(Reduction::Sum).to_f32_vec(), vec![10.]);
        assert_eq!(r(Reduction::Mean).to_f32_vec(), vec![2.5]);
        assert_eq!(r(Reduction::None).to_f32_vec(), vec![1., 2., 3., 4.]);
        assert_eq!(r(Reduction::Sum).shape(), &[] as &[usize]);
    }
}
