//! Optimizer math for `OptimizerUpdate` and the PopTorch-style executor: one step of SGD,
//! Adam/AdamW, RMSprop or LAMB on a float32 parameter, with the formulas of the optimizer
//! each [`OptimizerStep`] variant names (PyTorch's `torch.optim` for SGD, Adam, AdamW and
//! RMSprop; PopTorch's `optim.LAMB` for LAMB, see [`lamb`]).
//!
//! State (velocity, moments) lives in an [`OptState`] the caller keeps per parameter;
//! `None` means "no step taken yet" and is filled on the first step. A state tensor whose
//! dtype is float16 is rounded to half precision after each update (PopTorch's
//! `*_accum_type=torch.float16`); the arithmetic itself is float32.
//!
//! Shapes: the parameter, gradient and state arrays must match; a mismatch is an `Err`
//! naming both shapes, never a panic.

use crate::ir::OptimizerStep;
use crate::tensor::{float16, DType};
use crate::Error;
use ndarray::{ArrayD, Zip};

/// SGD velocity of one parameter, stored multiplied by the velocity scaling.
#[derive(Clone, Debug, PartialEq)]
pub struct SgdState {
    pub velocity: ArrayD<f32>,
    pub dtype: DType,
}

/// Adam/AdamW/LAMB state of one parameter: first and second moments and the step count.
#[derive(Clone, Debug, PartialEq)]
pub struct AdamState {
    pub m: ArrayD<f32>,
    pub v: ArrayD<f32>,
    pub step: u32,
    pub m_dtype: DType,
    pub v_dtype: DType,
}

impl AdamState {
    /// Zero float32 moments of `shape`, step 0.
    pub fn zeros(shape: &[usize]) -> AdamState {
        AdamState {
            m: ArrayD::zeros(shape),
            v: ArrayD::zeros(shape),
            step: 0,
            m_dtype: DType::Float32,
            v_dtype: DType::Float32,
        }
    }
}

/// RMSprop state of one parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct RmsPropState {
    /// Running average of squared gradients.
    pub square_avg: ArrayD<f32>,
    /// Running average of gradients (centred variant only).
    pub grad_avg: Option<ArrayD<f32>>,
    /// Momentum buffer (momentum > 0 only).
    pub momentum_buf: Option<ArrayD<f32>>,
    pub square_dtype: DType,
    pub grad_avg_dtype: DType,
}

/// The optimizer state of one parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum OptState {
    Sgd(SgdState),
    Adam(AdamState),
    RmsProp(RmsPropState),
    Lamb(AdamState),
}

impl OptState {
    /// Bytes the state tensors take in their storage dtypes.
    pub fn bytes(&self) -> usize {
        match self {
            OptState::Sgd(s) => s.velocity.len() * s.dtype.size(),
            OptState::Adam(s) | OptState::Lamb(s) => s.m.len() * s.m_dtype.size() + s.v.len() * s.v_dtype.size(),
            OptState::RmsProp(s) => {
                s.square_avg.len() * s.square_dtype.size()
                    + s.grad_avg.as_ref().map_or(0, |a| a.len() * s.grad_avg_dtype.size())
                    + s.momentum_buf.as_ref().map_or(0, |a| a.len() * 4)
            }
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            OptState::Sgd(_) => "SGD",
            OptState::Adam(_) => "Adam",
            OptState::RmsProp(_) => "RMSprop",
            OptState::Lamb(_) => "LAMB",
        }
    }
}

fn step_kind(step: &OptimizerStep) -> &'static str {
    match step {
        OptimizerStep::Sgd { .. } => "SGD",
        OptimizerStep::Adam { .. } => "Adam",
        OptimizerStep::RmsProp { .. } => "RMSprop",
        OptimizerStep::Lamb { .. } => "LAMB",
    }
}

fn same_shape(what: &str, p: &ArrayD<f32>, other: &ArrayD<f32>) -> crate::Result<()> {
    if p.shape() != other.shape() {
        return Err(Error::exec(format!(
            "optimizer: {what} shape {:?} differs from the parameter's {:?}",
            other.shape(),
            p.shape()
        )));
    }
    Ok(())
}

/// Rounds every element to the nearest half when `dtype` is float16.
pub fn round_to(a: &mut ArrayD<f32>, dtype: DType) {
    if dtype == DType::Float16 {
        a.mapv_inplace(|x| float16::to_f32(float16::from_f32(x)));
    }
}

/// One update of `param` from `grad` by `step`, with the learning rate multiplied by
/// `lr_scale` (schedules). `state` is created on the first step; a state of another
/// optimizer is an error.
pub fn apply(
    step: &OptimizerStep,
    param: &mut ArrayD<f32>,
    grad: &ArrayD<f32>,
    state: &mut Option<OptState>,
    lr_scale: f32,
) -> crate::Result<()> {
    same_shape("gradient", param, grad)?;
    if let Some(s) = state.as_ref() {
        if s.kind() != step_kind(step) {
            return Err(Error::exec(format!("the parameter has {} state but a {} update", s.kind(), step_kind(step))));
        }
    }
    match *step {
        OptimizerStep::Sgd { lr, momentum, dampening, weight_decay, nesterov, velocity_scaling, velocity_dtype } => {
            let h = SgdHyper { lr: lr * lr_scale, momentum, dampening, weight_decay, nesterov, velocity_scaling };
            if momentum == 0.0 {
                sgd(param, grad, None, &h);
                Ok(())
            } else {
                let first = state.is_none();
                let st = state.get_or_insert_with(|| {
                    OptState::Sgd(SgdState { velocity: ArrayD::zeros(param.shape()), dtype: velocity_dtype })
                });
                let OptState::Sgd(s) = st else { unreachable!("kind checked above") };
                same_shape("velocity", param, &s.velocity)?;
                sgd(param, grad, Some((&mut s.velocity, first)), &h);
                round_to(&mut s.velocity, s.dtype);
                Ok(())
            }
        }
        OptimizerStep::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            bias_correction,
            first_order_dtype,
            second_order_dtype,
        } => {
            let st = state
                .get_or_insert_with(|| OptState::Adam(moments(param.shape(), first_order_dtype, second_order_dtype)));
            let OptState::Adam(s) = st else { unreachable!("kind checked above") };
            let h = AdamHyper { lr: lr * lr_scale, beta1, beta2, eps, weight_decay, decoupled, bias_correction };
            adam(param, grad, s, &h)
        }
        OptimizerStep::RmsProp {
            lr,
            alpha,
            eps,
            weight_decay,
            momentum,
            centered,
            first_order_dtype,
            second_order_dtype,
        } => {
            let st = state.get_or_insert_with(|| {
                OptState::RmsProp(RmsPropState {
                    square_avg: ArrayD::zeros(param.shape()),
                    grad_avg: centered.then(|| ArrayD::zeros(param.shape())),
                    momentum_buf: (momentum > 0.0).then(|| ArrayD::zeros(param.shape())),
                    square_dtype: first_order_dtype,
                    grad_avg_dtype: second_order_dtype,
                })
            });
            let OptState::RmsProp(s) = st else { unreachable!("kind checked above") };
            let h = RmsPropHyper { lr: lr * lr_scale, alpha, eps, weight_decay, momentum, centered };
            rmsprop(param, grad, s, &h)
        }
        OptimizerStep::Lamb {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            bias_correction,
            max_weight_norm,
            first_order_dtype,
            second_order_dtype,
        } => {
            let st = state
                .get_or_insert_with(|| OptState::Lamb(moments(param.shape(), first_order_dtype, second_order_dtype)));
            let OptState::Lamb(s) = st else { unreachable!("kind checked above") };
            let h = LambHyper { lr: lr * lr_scale, beta1, beta2, eps, weight_decay, bias_correction, max_weight_norm };
            lamb(param, grad, s, &h)
        }
    }
}

fn moments(shape: &[usize], m_dtype: DType, v_dtype: DType) -> AdamState {
    AdamState { m_dtype, v_dtype, ..AdamState::zeros(shape) }
}

/// SGD hyper-parameters (see [`OptimizerStep::Sgd`]).
#[derive(Clone, Copy, Debug)]
pub struct SgdHyper {
    pub lr: f32,
    pub momentum: f32,
    pub dampening: f32,
    pub weight_decay: f32,
    pub nesterov: bool,
    pub velocity_scaling: f32,
}

/// One SGD step as `torch.optim.SGD`:
///
/// ```text
/// d = g + wd·p
/// momentum ≠ 0:  v = d on the first step, else v = m·v + (1 − dampening)·d
///                d = nesterov ? d + m·v : v
/// p −= lr·d
/// ```
///
/// `velocity` is `(stored velocity, first step)`; the stored value is `velocity_scaling·v`
/// (PopTorch's combined variant keeps the velocity scaled to stay in float16 range).
pub fn sgd(param: &mut ArrayD<f32>, grad: &ArrayD<f32>, velocity: Option<(&mut ArrayD<f32>, bool)>, h: &SgdHyper) {
    let SgdHyper { lr, momentum, dampening, weight_decay, nesterov, velocity_scaling: vs } = *h;
    match velocity {
        Some((buf, first)) if momentum != 0.0 => {
            Zip::from(&mut *param).and(grad).and(buf).for_each(|p, &g, b| {
                let d = if weight_decay != 0.0 { g + weight_decay * *p } else { g };
                let v = if first { d } else { momentum * (*b / vs) + (1.0 - dampening) * d };
                *b = v * vs;
                let d = if nesterov { d + momentum * v } else { v };
                *p -= lr * d;
            });
        }
        _ => {
            Zip::from(&mut *param).and(grad).for_each(|p, &g| {
                let d = if weight_decay != 0.0 { g + weight_decay * *p } else { g };
                *p -= lr * d;
            });
        }
    }
}

/// Adam/AdamW hyper-parameters (see [`OptimizerStep::Adam`]).
#[derive(Clone, Copy, Debug)]
pub struct AdamHyper {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub decoupled: bool,
    pub bias_correction: bool,
}

/// Bias corrections `(1 − β1^t, 1 − β2^t)` in f64 (PyTorch computes them in Python floats),
/// or `(1, 1)` without bias correction.
fn bias_corrections(beta1: f32, beta2: f32, t: u32, on: bool) -> (f64, f64) {
    if !on {
        return (1.0, 1.0);
    }
    let t = t as i32;
    (1.0 - (beta1 as f64).powi(t), 1.0 - (beta2 as f64).powi(t))
}

/// One Adam step as `torch.optim.Adam` (`decoupled == false`: L2 decay added to the
/// gradient) or `torch.optim.AdamW` (`decoupled`: `p *= 1 − lr·wd` first), amsgrad off:
///
/// ```text
/// step += 1
/// m = m + (1−β1)(g − m);  v = β2·v + (1−β2)·g²
/// p −= lr/bc1 · m / (√v/√bc2 + eps)      bc_i = 1 − β_i^step (1 without bias correction)
/// ```
pub fn adam(param: &mut ArrayD<f32>, grad: &ArrayD<f32>, s: &mut AdamState, h: &AdamHyper) -> crate::Result<()> {
    same_shape("first moment", param, &s.m)?;
    same_shape("second moment", param, &s.v)?;
    s.step += 1;
    let (bc1, bc2) = bias_corrections(h.beta1, h.beta2, s.step, h.bias_correction);
    let step_size = (h.lr as f64 / bc1) as f32;
    let bc2_sqrt = bc2.sqrt() as f32;
    let (wd, decoupled) = (h.weight_decay, h.decoupled);
    let decay = if decoupled { 1.0 - h.lr * wd } else { 1.0 };
    let (w1, beta2, w2, eps) = (1.0 - h.beta1, h.beta2, 1.0 - h.beta2, h.eps);
    let (m_dt, v_dt) = (s.m_dtype, s.v_dtype);
    Zip::from(&mut *param).and(grad).and(&mut s.m).and(&mut s.v).for_each(|p, &g, m, v| {
        let g = if !decoupled && wd != 0.0 { g + wd * *p } else { g };
        if decoupled && wd != 0.0 {
            *p *= decay;
        }
        // torch: exp_avg.lerp_(grad, 1 - beta1)
        *m = if w1 < 0.5 { *m + w1 * (g - *m) } else { g - (g - *m) * (1.0 - w1) };
        *v = *v * beta2 + w2 * g * g;
        *m = round1(*m, m_dt);
        *v = round1(*v, v_dt);
        let denom = v.sqrt() / bc2_sqrt + eps;
        *p += -step_size * *m / denom;
    });
    Ok(())
}

fn round1(x: f32, dtype: DType) -> f32 {
    if dtype == DType::Float16 {
        float16::to_f32(float16::from_f32(x))
    } else {
        x
    }
}

/// RMSprop hyper-parameters (see [`OptimizerStep::RmsProp`]).
#[derive(Clone, Copy, Debug)]
pub struct RmsPropHyper {
    pub lr: f32,
    pub alpha: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub momentum: f32,
    pub centered: bool,
}

/// One RMSprop step as `torch.optim.RMSprop`:
///
/// ```text
/// g += wd·p
/// s = α·s + (1−α)·g²
/// centred: a = α·a + (1−α)·g;  avg = √(s − a²) + eps      else avg = √s + eps
/// momentum > 0: b = m·b + g/avg; p −= lr·b               else p −= lr·g/avg
/// ```
pub fn rmsprop(
    param: &mut ArrayD<f32>,
    grad: &ArrayD<f32>,
    s: &mut RmsPropState,
    h: &RmsPropHyper,
) -> crate::Result<()> {
    same_shape("square average", param, &s.square_avg)?;
    let RmsPropHyper { lr, alpha, eps, weight_decay: wd, momentum, centered } = *h;
    if centered && s.grad_avg.is_none() {
        s.grad_avg = Some(ArrayD::zeros(param.shape()));
    }
    if momentum > 0.0 && s.momentum_buf.is_none() {
        s.momentum_buf = Some(ArrayD::zeros(param.shape()));
    }
    for a in [&s.grad_avg, &s.momentum_buf].into_iter().flatten() {
        same_shape("RMSprop state", param, a)?;
    }
    let (sq_dt, ga_dt) = (s.square_dtype, s.grad_avg_dtype);
    let n = param.len();
    let ps = param.as_slice_mut().ok_or_else(|| Error::exec("optimizer: parameter is not contiguous"))?;
    let gs = grad.as_slice().ok_or_else(|| Error::exec("optimizer: gradient is not contiguous"))?;
    let sq = s.square_avg.as_slice_mut().ok_or_else(|| Error::exec("optimizer: state is not contiguous"))?;
    let mut ga = match (centered, s.grad_avg.as_mut()) {
        (true, Some(a)) => Some(a.as_slice_mut().ok_or_else(|| Error::exec("optimizer: state is not contiguous"))?),
        _ => None,
    };
    let mut mb = match (momentum > 0.0, s.momentum_buf.as_mut()) {
        (true, Some(b)) => Some(b.as_slice_mut().ok_or_else(|| Error::exec("optimizer: state is not contiguous"))?),
        _ => None,
    };
    for i in 0..n {
        let g = if wd != 0.0 { gs[i] + wd * ps[i] } else { gs[i] };
        sq[i] = round1(sq[i] * alpha + (1.0 - alpha) * g * g, sq_dt);
        let avg = match ga.as_deref_mut() {
            Some(ga) => {
                // torch: grad_avg.lerp_(grad, 1 - alpha)
                let w = 1.0 - alpha;
                ga[i] = round1(if w < 0.5 { ga[i] + w * (g - ga[i]) } else { g - (g - ga[i]) * (1.0 - w) }, ga_dt);
                (sq[i] - ga[i] * ga[i]).sqrt() + eps
            }
            None => sq[i].sqrt() + eps,
        };
        match mb.as_deref_mut() {
            Some(b) => {
                b[i] = b[i] * momentum + g / avg;
                ps[i] -= lr * b[i];
            }
            None => ps[i] -= lr * g / avg,
        }
    }
    Ok(())
}

/// LAMB hyper-parameters (see [`OptimizerStep::Lamb`]).
#[derive(Clone, Copy, Debug)]
pub struct LambHyper {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub bias_correction: bool,
    pub max_weight_norm: f32,
}

/// One LAMB step, the formula of PopTorch's `poptorch.optim.LAMB` (its CPU `step`) and
/// PopART's `AdamMode::Lamb`/`LambNoBias`, which follow You et al., "Large Batch
/// Optimization for Deep Learning: Training BERT in 76 minutes" (arXiv 1904.00962,
/// Algorithm 2) with φ(z) = min(z, max_weight_norm):
///
/// ```text
/// step += 1
/// m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
/// u = (m/bc1) / (√v/√bc2 + eps) + wd·p           bc_i = 1 − β_i^step (1 without bias correction)
/// r1 = min(‖p‖₂, max_weight_norm);  r2 = ‖u‖₂     (norms over the whole parameter tensor)
/// trust = 1 if r1 = 0 or r2 = 0, else r1/r2
/// p −= lr·trust·u
/// ```
pub fn lamb(param: &mut ArrayD<f32>, grad: &ArrayD<f32>, s: &mut AdamState, h: &LambHyper) -> crate::Result<()> {
    same_shape("first moment", param, &s.m)?;
    same_shape("second moment", param, &s.v)?;
    s.step += 1;
    let (bc1, bc2) = bias_corrections(h.beta1, h.beta2, s.step, h.bias_correction);
    let (bc1, bc2_sqrt) = (bc1 as f32, bc2.sqrt() as f32);
    let (b1, b2, eps, wd) = (h.beta1, h.beta2, h.eps, h.weight_decay);
    let (m_dt, v_dt) = (s.m_dtype, s.v_dtype);
    let mut upd = ArrayD::<f32>::zeros(param.shape());
    Zip::from(&mut upd).and(&*param).and(grad).and(&mut s.m).and(&mut s.v).for_each(|u, &p, &g, m, v| {
        *m = round1(*m * b1 + (1.0 - b1) * g, m_dt);
        *v = round1(*v * b2 + (1.0 - b2) * g * g, v_dt);
        let denom = v.sqrt() / bc2_sqrt + eps;
        *u = (*m / bc1) / denom + wd * p;
    });
    let norm = |a: &ArrayD<f32>| a.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>().sqrt();
    let r1 = norm(param).min(h.max_weight_norm as f64);
    let r2 = norm(&upd);
    let trust = if r1 == 0.0 || r2 == 0.0 { 1.0 } else { (r1 / r2) as f32 };
    let k = h.lr * trust;
    Zip::from(&mut *param).and(&upd).for_each(|p, &u| *p -= k * u);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use ndarray::IxDyn;

    fn arr(v: &[f32]) -> ArrayD<f32> {
        ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.to_vec()).unwrap()
    }

    #[test]
    fn sgd_plain_weight_decay_and_momentum() {
        let mut p = arr(&[1.0, -2.0]);
        let mut st = None;
        apply(&OptimizerStep::sgd(0.1, 0.0, 0.0), &mut p, &arr(&[0.5, 1.0]), &mut st, 1.0).unwrap();
        assert_eq!(p, arr(&[0.95, -2.1]));
        assert!(st.is_none(), "no state without momentum");
        let mut p = arr(&[1.0, -2.0]);
        apply(&OptimizerStep::sgd(0.1, 0.0, 0.1), &mut p, &arr(&[0.5, 1.0]), &mut None, 1.0).unwrap();
        // d = g + 0.1 p = [0.6, 0.8]
        assert!((p[0] - 0.94).abs() < 1e-7 && (p[1] + 2.08).abs() < 1e-7);
        // momentum 0.9 over two steps with constant gradient: v = 1, then 1.9
        let mut p = arr(&[0.0]);
        let mut st = None;
        let step = OptimizerStep::sgd(0.1, 0.9, 0.0);
        apply(&step, &mut p, &arr(&[1.0]), &mut st, 1.0).unwrap();
        apply(&step, &mut p, &arr(&[1.0]), &mut st, 1.0).unwrap();
        assert!((p[0] + 0.29).abs() < 1e-6, "{p}");
        let Some(OptState::Sgd(s)) = &st else { panic!() };
        assert!((s.velocity[0] - 1.9).abs() < 1e-7);
    }

    #[test]
    fn sgd_dampening_skips_the_first_step_and_velocity_scaling_is_invisible() {
        // torch: the first step sets v = d (no dampening), later v = m v + (1-d) g.
        let mk = |vs: f32| OptimizerStep::Sgd {
            lr: 0.1,
            momentum: 0.5,
            dampening: 0.5,
            weight_decay: 0.0,
            nesterov: false,
            velocity_scaling: vs,
            velocity_dtype: DType::Float32,
        };
        let mut p = arr(&[0.0]);
        let mut st = None;
        apply(&mk(1.0), &mut p, &arr(&[1.0]), &mut st, 1.0).unwrap();
        apply(&mk(1.0), &mut p, &arr(&[1.0]), &mut st, 1.0).unwrap();
        // v1 = 1, v2 = 0.5 + 0.5 = 1 → p = -0.2
        assert!((p[0] + 0.2).abs() < 1e-7, "{p}");
        let mut q = arr(&[0.0]);
        let mut st = None;
        apply(&mk(128.0), &mut q, &arr(&[1.0]), &mut st, 1.0).unwrap();
        apply(&mk(128.0), &mut q, &arr(&[1.0]), &mut st, 1.0).unwrap();
        assert_eq!(p, q);
        let Some(OptState::Sgd(s)) = &st else { panic!() };
        assert_eq!(s.velocity[0], 128.0, "stored scaled");
    }

    #[test]
    fn a_state_of_another_optimizer_or_shape_is_an_error() {
        let mut p = arr(&[1.0]);
        let mut st = None;
        apply(&OptimizerStep::sgd(0.1, 0.9, 0.0), &mut p, &arr(&[1.0]), &mut st, 1.0).unwrap();
        let adam = OptimizerStep::adam(0.1, 0.9, 0.999, 1e-8, 0.0, false);
        let e = apply(&adam, &mut p, &arr(&[1.0]), &mut st, 1.0).unwrap_err().to_string();
        assert!(e.contains("SGD state") && e.contains("Adam update"), "{e}");
        let e = apply(&adam, &mut p, &arr(&[1.0, 2.0]), &mut None, 1.0).unwrap_err().to_string();
        assert!(e.contains("[2]") && e.contains("[1]"), "{e}");
    }

    #[test]
    fn float16_state_is_rounded_to_half() {
        let step = OptimizerStep::Adam {
            lr: 0.1,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
            bias_correction: true,
            first_order_dtype: DType::Float16,
            second_order_dtype: DType::Float32,
        };
        let mut p = arr(&[1.0]);
        let mut st = None;
        apply(&step, &mut p, &arr(&[0.3]), &mut st, 1.0).unwrap();
        let Some(OptState::Adam(s)) = &st else { panic!() };
        // m = 0.1 * 0.3 = 0.03: in half 1966·2^-16 = 0.029998779296875; v kept in f32.
        assert_eq!(s.m[0], f16::from_f32(0.03).to_f32());
        assert_eq!(s.m[0] as f64, 1966.0 / 65536.0);
        assert!((s.v[0] / (0.001 * 0.09) - 1.0).abs() < 1e-4);
        assert_eq!(OptState::Adam(s.clone()).bytes(), 2 + 4);
    }
}
