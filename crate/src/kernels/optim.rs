//! Optimizer math used by the executor for `OptimizerUpdate`: PyTorch's SGD (dampening 0,
//! no Nesterov) and Adam/AdamW (no amsgrad), updating float32 parameters in place.
//!
//! The parameter, gradient and state arrays must have the same shape (the executor creates
//! the state from the parameter); a mismatch is a programming error and panics with both
//! shapes.

use ndarray::{ArrayD, Zip};

/// Adam/AdamW state for one parameter: first and second moments and the step count.
#[derive(Clone, Debug, PartialEq)]
pub struct AdamState {
    pub m: ArrayD<f32>,
    pub v: ArrayD<f32>,
    pub step: u32,
}

impl AdamState {
    /// Zero moments of `shape`, step 0.
    pub fn zeros(shape: &[usize]) -> AdamState {
        AdamState { m: ArrayD::zeros(shape), v: ArrayD::zeros(shape), step: 0 }
    }
}

fn same_shape(what: &str, a: &ArrayD<f32>, b: &ArrayD<f32>) {
    assert_eq!(
        a.shape(),
        b.shape(),
        "optimizer: {what} shape {:?} differs from the parameter's {:?}",
        b.shape(),
        a.shape()
    );
}

/// One SGD step, as `torch.optim.SGD` (dampening 0, nesterov false):
/// `d = g + wd·p`; with momentum `buf = momentum·buf + d` and `d = buf`; `p −= lr·d`.
///
/// A zero-initialised `momentum_buf` gives PyTorch's first step (`buf = d`) exactly.
/// Momentum is applied only when `momentum != 0` and a buffer is given.
pub fn sgd_update(
    param: &mut ArrayD<f32>,
    grad: &ArrayD<f32>,
    momentum_buf: Option<&mut ArrayD<f32>>,
    lr: f32,
    momentum: f32,
    weight_decay: f32,
) {
    same_shape("gradient", param, grad);
    match momentum_buf {
        Some(buf) if momentum != 0.0 => {
            same_shape("momentum buffer", param, buf);
            Zip::from(&mut *param).and(grad).and(buf).for_each(|p, &g, b| {
                let d = if weight_decay != 0.0 { g + weight_decay * *p } else { g };
                *b = *b * momentum + d;
                *p += -lr * *b;
            });
        }
        _ => {
            Zip::from(&mut *param).and(grad).for_each(|p, &g| {
                let d = if weight_decay != 0.0 { g + weight_decay * *p } else { g };
                *p += -lr * d;
            });
        }
    }
}

/// One Adam step, as `torch.optim.Adam` (`decoupled == false`: L2 decay added to the
/// gradient) or `torch.optim.AdamW` (`decoupled`: `p *= 1 − lr·wd` first), with bias
/// correction and amsgrad off:
///
/// ```text
/// step += 1
/// m = m + (1−β1)(g − m);  v = β2·v + (1−β2)·g²
/// p −= lr/(1−β1^step) · m / (sqrt(v)/sqrt(1−β2^step) + eps)
/// ```
#[allow(clippy::too_many_arguments)]
pub fn adam_update(
    param: &mut ArrayD<f32>,
    grad: &ArrayD<f32>,
    state: &mut AdamState,
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    decoupled: bool,
) {
    same_shape("gradient", param, grad);
    same_shape("first moment", param, &state.m);
    same_shape("second moment", param, &state.v);
    state.step += 1;
    let t = state.step as i32;
    // bias corrections in f64, as PyTorch computes them in Python floats
    let bc1 = 1.0 - (beta1 as f64).powi(t);
    let bc2 = 1.0 - (beta2 as f64).powi(t);
    let step_size = (lr as f64 / bc1) as f32;
    let bc2_sqrt = bc2.sqrt() as f32;
    let decay = if decoupled { 1.0 - lr * weight_decay } else { 1.0 };
    let w1 = 1.0 - beta1;
    let w2 = 1.0 - beta2;
    Zip::from(&mut *param).and(grad).and(&mut state.m).and(&mut state.v).for_each(|p, &g, m, v| {
        let g = if !decoupled && weight_decay != 0.0 { g + weight_decay * *p } else { g };
        if decoupled && weight_decay != 0.0 {
            *p *= decay;
        }
        // torch: exp_avg.lerp_(grad, 1 - beta1)
        *m = if w1 < 0.5 { *m + w1 * (g - *m) } else { g - (g - *m) * (1.0 - w1) };
        *v = *v * beta2 + w2 * g * g;
        let denom = v.sqrt() / bc2_sqrt + eps;
        *p += -step_size * *m / denom;
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::IxDyn;

    fn arr(v: &[f32]) -> ArrayD<f32> {
        ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.to_vec()).unwrap()
    }

    #[test]
    fn sgd_plain_weight_decay_and_momentum() {
        let mut p = arr(&[1.0, -2.0]);
        sgd_update(&mut p, &arr(&[0.5, 1.0]), None, 0.1, 0.0, 0.0);
        assert_eq!(p, arr(&[0.95, -2.1]));
        let mut p = arr(&[1.0, -2.0]);
        sgd_update(&mut p, &arr(&[0.5, 1.0]), None, 0.1, 0.0, 0.1);
        // d = g + 0.1 p = [0.6, 0.8]
        assert!((p[0] - 0.94).abs() < 1e-7 && (p[1] + 2.08).abs() < 1e-7);
        // momentum 0.9 over two steps with constant gradient: buf = 1, then 1.9
        let mut p = arr(&[0.0]);
        let mut buf = arr(&[0.0]);
        sgd_update(&mut p, &arr(&[1.0]), Some(&mut buf), 0.1, 0.9, 0.0);
        assert!((p[0] + 0.1).abs() < 1e-7 && buf[0] == 1.0);
        sgd_update(&mut p, &arr(&[1.0]), Some(&mut buf), 0.1, 0.9, 0.0);
        assert!((p[0] + 0.29).abs() < 1e-6 && (buf[0] - 1.9).abs() < 1e-7);
    }

    /// Reference Adam/AdamW in f64, transcribed from torch.optim's single-tensor code.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        p0: &[f64],
        grads: &[Vec<f64>],
        lr: f64,
        b1: f64,
        b2: f64,
        eps: f64,
        wd: f64,
        decoupled: bool,
    ) -> Vec<f64> {
        let mut p = p0.to_vec();
        let mut m = vec![0.0; p.len()];
        let mut v = vec![0.0; p.len()];
        for (t, g) in grads.iter().enumerate() {
            let t = (t + 1) as i32;
            for i in 0..p.len() {
                let mut gi = g[i];
                if decoupled {
                    p[i] *= 1.0 - lr * wd;
                } else {
                    gi += wd * p[i];
                }
                m[i] = b1 * m[i] + (1.0 - b1) * gi;
                v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
                let mh = m[i] / (1.0 - b1.powi(t));
                let vh = v[i] / (1.0 - b2.powi(t));
                p[i] -= lr * mh / (vh.sqrt() + eps);
            }
        }
        p
    }

    #[test]
    fn adam_and_adamw_match_reference() {
        let p0 = [0.5f32, -1.5, 2.0, 0.0];
        let grads: Vec<Vec<f32>> =
            vec![vec![0.1, -0.2, 0.3, 1e-3], vec![-0.4, 0.5, 0.05, -2.0], vec![0.2, 0.2, -0.7, 0.6]];
        for (wd, decoupled) in [(0.0, false), (0.01, false), (0.05, true)] {
            let mut p = arr(&p0);
            let mut st = AdamState::zeros(&[4]);
            for g in &grads {
                adam_update(&mut p, &arr(g), &mut st, 0.01, 0.9, 0.999, 1e-8, wd, decoupled);
            }
            assert_eq!(st.step, 3);
            let g64: Vec<Vec<f64>> = grads.iter().map(|g| g.iter().map(|&x| x as f64).collect()).collect();
            let p064: Vec<f64> = p0.iter().map(|&x| x as f64).collect();
            let want =
                reference(&p064, &g64, 0.01, 0.9f32 as f64, 0.999f32 as f64, 1e-8f32 as f64, wd as f64, decoupled);
            for (a, b) in p.iter().zip(&want) {
                assert!((*a as f64 - b).abs() < 1e-6, "wd {wd} decoupled {decoupled}: {a} vs {b}");
            }
        }
        // first Adam step moves each coordinate by about lr·sign(g)
        let mut p = arr(&[1.0, 1.0]);
        let mut st = AdamState::zeros(&[2]);
        adam_update(&mut p, &arr(&[3.0, -0.01]), &mut st, 0.1, 0.9, 0.999, 1e-8, 0.0, false);
        assert!((p[0] - 0.9).abs() < 1e-6 && (p[1] - 1.1).abs() < 1e-5);
    }
}
