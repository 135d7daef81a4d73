//! Elementwise kernels: `Unary`, `Binary`, `Where`, `Positive`, `Full`, `Cast`,
//! `BroadcastTo`, `SumTo`, `UnaryGrad` and `PowGrad`.
//!
//! Float kernels here work on float32; float16 inputs are read as they are held (float32
//! values, each a half) and [`super::eval`] rounds each result to half once, which is IEEE half
//! arithmetic for `+ - * /` (float32 holds the exact product/quotient well enough for a
//! correctly rounded half result) and "compute in float, store half" for the rest.

use super::common::{
    array, bcast_strides, check_bcast, f32_data, float_result, for_each_row, slice, with_dtype, zip2, Elem, TagHalf,
};
use crate::ir::shape::broadcast_shapes;
use crate::ir::{BinaryKind, UnaryKind};
use crate::tensor::{float16, DType, Tensor};
use crate::Error;
use half::f16;
use ndarray::ArrayD;
use std::f64::consts::{FRAC_2_SQRT_PI, SQRT_2};
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------
// erf / erfc / GELU
// ---------------------------------------------------------------------------------------

/// 1/√π.
const FRAC_1_SQRT_PI: f64 = FRAC_2_SQRT_PI * 0.5;
/// 1/√(2π).
const FRAC_1_SQRT_2PI: f64 = FRAC_1_SQRT_PI / SQRT_2;
/// √(2/π), the GELU tanh-approximation constant.
const SQRT_2_OVER_PI: f64 = FRAC_2_SQRT_PI / SQRT_2;
const GELU_KAPPA: f64 = 0.044715;

/// Below this |x| erf uses the series, above it `1 − erfc` from the continued fraction.
const ERF_SPLIT: f64 = 2.5;
/// Below this x erfc is `1 − erf` (at most a factor 2 of cancellation), above it the
/// continued fraction (which needs ~700 terms at 0.5 but is accurate to ~2e-15 there).
const ERFC_SPLIT: f64 = 0.5;

/// erf(x) for |x| < [`ERF_SPLIT`]:
/// `erf(x) = 2/√π · e^(−x²) · Σₙ 2ⁿ x^(2n+1) / (1·3·…·(2n+1))`. Every term has the sign of
/// x, so the sum has no cancellation; about 1e-15 relative error.
fn erf_series(x: f64) -> f64 {
    let x2 = x * x;
    let mut term = x;
    let mut sum = x;
    for n in 1..400 {
        term *= 2.0 * x2 / (2 * n + 1) as f64;
        sum += term;
        if term.abs() <= sum.abs() * 1e-17 {
            break;
        }
    }
    FRAC_2_SQRT_PI * (-x2).exp() * sum
}

/// erfc(x) for x ≥ [`ERFC_SPLIT`] from Laplace's continued fraction
/// `erfc(x) = e^(−x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …))))`, evaluated with the
/// modified Lentz method; about 2e-15 relative error, and no cancellation in the tail.
fn erfc_cf(x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    if x > 30.0 {
        return 0.0; // below the smallest subnormal
    }
    let mut f = x;
    let mut c = x;
    let mut d = 0.0;
    for j in 1..2000 {
        let a = j as f64 * 0.5;
        d = x + a * d;
        if d == 0.0 {
            d = TINY;
        }
        c = x + a / c;
        if c == 0.0 {
            c = TINY;
        }
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-x * x).exp() * FRAC_1_SQRT_PI / f
}

/// The error function in f64 (relative error about 1e-15).
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    if a < ERF_SPLIT {
        erf_series(x)
    } else {
        (1.0 - erfc_cf(a)).copysign(x)
    }
}

/// The complementary error function `1 − erf(x)` in f64 (relative error ~3e-15, in the
/// far tail too). Slow (a long continued fraction); kernels use [`erfc_fast`].
pub fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        x
    } else if x < 0.0 {
        1.0 + erf(-x)
    } else if x < ERFC_SPLIT {
        1.0 - erf_series(x)
    } else {
        erfc_cf(x)
    }
}

/// Grid spacing and end of the [`erfc_fast`] table.
const TAB_STEP: f64 = 1.0 / 32.0;
const TAB_END: f64 = 6.0;
/// Taylor order of the table (terms h⁰ … h⁹).
const TAB_ORDER: usize = 10;

/// Taylor coefficients of erfc around `z₀ = k/32`, k = 0‥192, built once from the slow
/// accurate [`erfc`]: `erfc⁽ⁿ⁾(z) = (−1)ⁿ · 2/√π · Hₙ₋₁(z) · e^(−z²)` (physicists' Hermite
/// polynomials), so coefficient n is `(−1)ⁿ · 2/√π · e^(−z₀²) · Hₙ₋₁(z₀) / n!`.
fn erfc_table() -> &'static [[f64; TAB_ORDER]] {
    static TABLE: OnceLock<Vec<[f64; TAB_ORDER]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let n = (TAB_END / TAB_STEP) as usize;
        (0..=n)
            .map(|k| {
                let z = k as f64 * TAB_STEP;
                let g = FRAC_2_SQRT_PI * (-z * z).exp();
                let mut c = [0.0; TAB_ORDER];
                c[0] = erfc(z);
                let (mut h_prev, mut h) = (0.0, 1.0); // H₋₁ (unused), H₀
                let mut fact = 1.0;
                for (i, ci) in c.iter_mut().enumerate().skip(1) {
                    fact *= i as f64;
                    let sign = if i % 2 == 1 { -1.0 } else { 1.0 };
                    *ci = sign * g * h / fact;
                    let next = 2.0 * z * h - 2.0 * (i - 1) as f64 * h_prev;
                    h_prev = h;
                    h = next;
                }
                c
            })
            .collect()
    })
}

/// erfc from the Taylor table: nearest grid point, |h| ≤ 1/64, degree 9 (relative error
/// about 1e-15, checked against [`erfc`] in the tests); the far tail uses [`erfc`].
/// About 10× faster than [`erfc`], which is what the GELU kernels call per element.
pub fn erfc_fast(z: f64) -> f64 {
    if z.is_nan() {
        return z;
    }
    if z < 0.0 {
        return 2.0 - erfc_fast(-z);
    }
    if z >= TAB_END {
        return erfc(z);
    }
    let k = (z / TAB_STEP + 0.5) as usize;
    let h = z - k as f64 * TAB_STEP;
    let c = &erfc_table()[k];
    let mut acc = c[TAB_ORDER - 1];
    for &ci in c[..TAB_ORDER - 1].iter().rev() {
        acc = acc * h + ci;
    }
    acc
}

/// Exact GELU `x·Φ(x) = x/2 · erfc(−x/√2)`.
pub fn gelu(x: f64) -> f64 {
    0.5 * x * erfc_fast(-x / SQRT_2)
}

/// Derivative of the exact GELU: `Φ(x) + x·φ(x)`.
pub fn gelu_grad(x: f64) -> f64 {
    0.5 * erfc_fast(-x / SQRT_2) + x * (-0.5 * x * x).exp() * FRAC_1_SQRT_2PI
}

/// GELU with the tanh approximation, `x/2·(1 + tanh(u))`, `u = √(2/π)(x + 0.044715x³)`,
/// written as `x·σ(2u)` so that no cancellation happens for negative x.
pub fn gelu_tanh(x: f64) -> f64 {
    let u = SQRT_2_OVER_PI * (x + GELU_KAPPA * x * x * x);
    x / (1.0 + (-2.0 * u).exp())
}

/// Derivative of [`gelu_tanh`]: `(1 + t)/2 + x/2·(1 − t²)·√(2/π)(1 + 3·0.044715x²)`.
pub fn gelu_tanh_grad(x: f64) -> f64 {
    let u = SQRT_2_OVER_PI * (x + GELU_KAPPA * x * x * x);
    let t = u.tanh();
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_KAPPA * x * x)
}

#[inline]
fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// `f(x)` for one float32 value.
#[inline]
pub fn unary_f32(kind: UnaryKind, x: f32) -> f32 {
    match kind {
        UnaryKind::Neg => -x,
        UnaryKind::Exp => x.exp(),
        UnaryKind::Log => x.ln(),
        UnaryKind::Sqrt => x.sqrt(),
        UnaryKind::Relu => {
            if x > 0.0 || x.is_nan() {
                x
            } else {
                0.0
            }
        }
        UnaryKind::Gelu => gelu(x as f64) as f32,
        UnaryKind::GeluTanh => gelu_tanh(x as f64) as f32,
        UnaryKind::Tanh => x.tanh(),
        UnaryKind::Sigmoid => sigmoid(x),
    }
}

/// `g · f'(x)` for one float32 value.
#[inline]
pub fn unary_grad_f32(kind: UnaryKind, x: f32, g: f32) -> f32 {
    match kind {
        UnaryKind::Neg => -g,
        UnaryKind::Exp => g * x.exp(),
        UnaryKind::Log => g / x,
        UnaryKind::Sqrt => g / (2.0 * x.sqrt()),
        UnaryKind::Relu => {
            if x > 0.0 {
                g
            } else {
                0.0
            }
        }
        UnaryKind::Gelu => (g as f64 * gelu_grad(x as f64)) as f32,
        UnaryKind::GeluTanh => (g as f64 * gelu_tanh_grad(x as f64)) as f32,
        UnaryKind::Tanh => {
            let t = x.tanh();
            g * (1.0 - t * t)
        }
        UnaryKind::Sigmoid => {
            let s = sigmoid(x);
            g * s * (1.0 - s)
        }
    }
}

/// `f` of every element. With `exact` (`f` gives an input, its negation or zero), a float16
/// input's results are halves already and come back float16, unrounded; any other float16
/// result is rounded by [`super::eval`].
fn map_f32(t: &Tensor, what: &str, exact: bool, f: impl Fn(f32) -> f32) -> crate::Result<Tensor> {
    let a = t.as_float().map_err(|e| e.context(what))?;
    let v: Vec<f32> = slice(a).iter().map(|&x| f(x)).collect();
    Ok(float_result(exact && matches!(t, Tensor::F16(_)), array(a.shape(), v)?))
}

/// `Unary { kind }` on float32.
pub fn unary(kind: UnaryKind, x: &Tensor) -> crate::Result<Tensor> {
    // one monomorphised loop per kind (no per-element dispatch)
    match kind {
        UnaryKind::Neg => map_f32(x, "input", true, |v| unary_f32(UnaryKind::Neg, v)),
        UnaryKind::Exp => map_f32(x, "input", false, |v| unary_f32(UnaryKind::Exp, v)),
        UnaryKind::Log => map_f32(x, "input", false, |v| unary_f32(UnaryKind::Log, v)),
        UnaryKind::Sqrt => map_f32(x, "input", false, |v| unary_f32(UnaryKind::Sqrt, v)),
        UnaryKind::Relu => map_f32(x, "input", true, |v| unary_f32(UnaryKind::Relu, v)),
        UnaryKind::Gelu => map_f32(x, "input", false, |v| unary_f32(UnaryKind::Gelu, v)),
        UnaryKind::GeluTanh => map_f32(x, "input", false, |v| unary_f32(UnaryKind::GeluTanh, v)),
        UnaryKind::Tanh => map_f32(x, "input", false, |v| unary_f32(UnaryKind::Tanh, v)),
        UnaryKind::Sigmoid => map_f32(x, "input", false, |v| unary_f32(UnaryKind::Sigmoid, v)),
    }
}

/// `Binary { kind }` with broadcasting on float32 or int32 (int32: add, sub, mul, wrapping).
pub fn binary(kind: BinaryKind, a: &Tensor, b: &Tensor) -> crate::Result<Tensor> {
    let out = broadcast_shapes(a.shape(), b.shape())?;
    match (a, b) {
        (Tensor::F32(x) | Tensor::F16(x), Tensor::F32(y) | Tensor::F16(y)) => {
            let (xs, ys) = (slice(x), slice(y));
            let (xsh, ysh) = (x.shape(), y.shape());
            let v = match kind {
                BinaryKind::Add => zip2(&xs, xsh, &ys, ysh, &out, |p, q| p + q),
                BinaryKind::Sub => zip2(&xs, xsh, &ys, ysh, &out, |p, q| p - q),
                BinaryKind::Mul => zip2(&xs, xsh, &ys, ysh, &out, |p, q| p * q),
                BinaryKind::Div => zip2(&xs, xsh, &ys, ysh, &out, |p, q| p / q),
                BinaryKind::Pow => zip2(&xs, xsh, &ys, ysh, &out, f32::powf),
            };
            Ok(Tensor::F32(array(&out, v)?))
        }
        (Tensor::I32(x), Tensor::I32(y)) => {
            let (xs, ys) = (slice(x), slice(y));
            let (xsh, ysh) = (x.shape(), y.shape());
            let v = match kind {
                BinaryKind::Add => zip2(&xs, xsh, &ys, ysh, &out, i32::wrapping_add),
                BinaryKind::Sub => zip2(&xs, xsh, &ys, ysh, &out, i32::wrapping_sub),
                BinaryKind::Mul => zip2(&xs, xsh, &ys, ysh, &out, i32::wrapping_mul),
                BinaryKind::Div | BinaryKind::Pow => {
                    return Err(Error::exec(format!(
                        "{kind:?} is not supported on int32 operands (cast to float32 first)"
                    )))
                }
            };
            Ok(Tensor::I32(array(&out, v)?))
        }
        _ if a.dtype() != b.dtype() => {
            Err(Error::exec(format!("operands have different dtypes: {} and {}", a.dtype(), b.dtype())))
        }
        _ => Err(Error::exec(format!("operands must be float32, float16 or int32, got {}", a.dtype()))),
    }
}

fn where_typed<T: Elem>(c: &ArrayD<bool>, a: &Tensor, b: &Tensor) -> crate::Result<Tensor> {
    let (x, y) = (T::array(a)?, T::array(b)?);
    let out = broadcast_shapes(&broadcast_shapes(c.shape(), x.shape())?, y.shape())?;
    let (cs, xs, ys) = (slice(c), slice(x), slice(y));
    let v: Vec<T> = if c.shape() == out.as_slice() && x.shape() == c.shape() && y.shape() == c.shape() {
        cs.iter().zip(xs.iter().zip(ys.iter())).map(|(&k, (&p, &q))| if k { p } else { q }).collect()
    } else {
        let sc = bcast_strides(c.shape(), &out);
        let sx = bcast_strides(x.shape(), &out);
        let sy = bcast_strides(y.shape(), &out);
        let (ic, ix, iy) = (sc[sc.len() - 1], sx[sx.len() - 1], sy[sy.len() - 1]);
        let mut v = Vec::with_capacity(out.iter().product());
        for_each_row(&out, [&sc, &sx, &sy], |_, [oc, ox, oy], len| {
            v.extend((0..len).map(|i| if cs[oc + i * ic] { xs[ox + i * ix] } else { ys[oy + i * iy] }))
        });
        v
    };
    Ok(T::wrap(array(&out, v)?))
}

/// `Where`: `(cond, a, b)` → `cond ? a : b`, all broadcast; any dtype for `a`/`b`.
pub fn where_(cond: &Tensor, a: &Tensor, b: &Tensor) -> crate::Result<Tensor> {
    let c = cond.as_bool().map_err(|e| e.context("condition"))?;
    if a.dtype() != b.dtype() {
        return Err(Error::exec(format!("branches have different dtypes: {} and {}", a.dtype(), b.dtype())));
    }
    if a.shape().is_empty() && b.shape().is_empty() && c.shape().is_empty() {
        // 0-d: the general path needs at least one dim for its stride lookups
        let pick = if c.iter().next().copied().unwrap_or(false) { a } else { b };
        return Ok(pick.clone());
    }
    with_dtype!(a.dtype(), T => where_typed::<T>(c, a, b))
}

/// `Positive`: `a > 0` as bool (any dtype; NaN is not positive).
pub fn positive(a: &Tensor) -> crate::Result<Tensor> {
    let (shape, v): (&[usize], Vec<bool>) = match a {
        Tensor::F32(x) | Tensor::F16(x) => (x.shape(), slice(x).iter().map(|&v| v > 0.0).collect()),
        Tensor::I32(x) => (x.shape(), slice(x).iter().map(|&v| v > 0).collect()),
        Tensor::Bool(x) => (x.shape(), slice(x).into_owned()),
    };
    Ok(Tensor::Bool(array(shape, v)?))
}

/// `Full`: a tensor of `shape` and `dtype` filled with `value`.
pub fn full(shape: &[usize], dtype: DType, value: f64) -> Tensor {
    Tensor::full(shape, dtype, value)
}

fn map_to<A: Elem, B: Elem>(a: &ArrayD<A>, f: impl Fn(A) -> B) -> crate::Result<Tensor> {
    let v: Vec<B> = slice(a).iter().map(|&x| f(x)).collect();
    Ok(B::wrap(array(a.shape(), v)?))
}

/// `Cast`: float → float rounds to nearest even (overflow to inf, subnormals kept);
/// float → int32 truncates toward zero (saturating, NaN → 0); int → float rounds to nearest;
/// anything → bool is `!= 0` (NaN is true); bool → number is 0/1.
pub fn cast(t: &Tensor, to: DType) -> crate::Result<Tensor> {
    match (t, to) {
        (t, to) if t.dtype() == to => Ok(t.clone()),
        (Tensor::F32(a), DType::Float16) => Ok(Tensor::F16(a.mapv(float16::round))),
        (Tensor::F32(a), DType::Int32) => map_to(a, |x: f32| x as i32),
        (Tensor::F32(a), DType::Bool) => map_to(a, |x: f32| x != 0.0),
        (Tensor::F16(a), DType::Float32) => Ok(Tensor::F32(a.clone())),
        (Tensor::F16(a), DType::Int32) => map_to(a, |x: f32| x as i32),
        (Tensor::F16(a), DType::Bool) => map_to(a, |x: f32| x != 0.0),
        (Tensor::I32(a), DType::Float32) => map_to(a, |x: i32| x as f32),
        (Tensor::I32(a), DType::Float16) => map_to(a, |x: i32| float16::to_f32(f16::from_f64(x as f64))).tag_half(),
        (Tensor::I32(a), DType::Bool) => map_to(a, |x: i32| x != 0),
        (Tensor::Bool(a), DType::Float32) => map_to(a, |x: bool| x as u8 as f32),
        (Tensor::Bool(a), DType::Float16) => map_to(a, |x: bool| x as u8 as f32).tag_half(),
        (Tensor::Bool(a), DType::Int32) => map_to(a, |x: bool| x as i32),
        (t, to) => Err(Error::exec(format!("cannot cast {} to {to}", t.dtype()))),
    }
}

fn broadcast_typed<T: Elem>(t: &Tensor, shape: &[usize]) -> crate::Result<Tensor> {
    let a = T::array(t)?;
    check_bcast(a.shape(), shape, "input")?;
    let s = slice(a);
    if a.shape() == shape {
        return Ok(T::wrap(array(shape, s.into_owned())?));
    }
    let st = bcast_strides(a.shape(), shape);
    let inner = st.last().copied().unwrap_or(0);
    let mut v = Vec::with_capacity(shape.iter().product());
    for_each_row(shape, [&st], |_, [o], len| {
        if inner == 1 {
            v.extend_from_slice(&s[o..o + len]);
        } else {
            v.extend(std::iter::repeat_n(s[o], len));
        }
    });
    Ok(T::wrap(array(shape, v)?))
}

/// `BroadcastTo { shape }`, any dtype.
pub fn broadcast_to(t: &Tensor, shape: &[usize]) -> crate::Result<Tensor> {
    with_dtype!(t.dtype(), T => broadcast_typed::<T>(t, shape))
}

/// `UnaryGrad { kind }`: `(x, g)` → `g · f'(x)` (float32; x and g have the same shape).
pub fn unary_grad(kind: UnaryKind, x: &Tensor, g: &Tensor) -> crate::Result<Tensor> {
    let xa = x.as_float().map_err(|e| e.context("x"))?;
    let ga = g.as_float().map_err(|e| e.context("gradient"))?;
    if xa.shape() != ga.shape() {
        return Err(Error::exec(format!("x {:?} and gradient {:?} must have the same shape", xa.shape(), ga.shape())));
    }
    let (xs, gs) = (slice(xa), slice(ga));
    // One monomorphised loop per kind: a per-element `match` (and ReLU's data-dependent
    // branch inside it) keeps the loop from vectorising; a plain select does.
    fn zip_map(xs: &[f32], gs: &[f32], f: impl Fn(f32, f32) -> f32) -> Vec<f32> {
        xs.iter().zip(gs).map(|(&x, &g)| f(x, g)).collect()
    }
    let v = match kind {
        UnaryKind::Neg => zip_map(&xs, &gs, |x, g| unary_grad_f32(UnaryKind::Neg, x, g)),
        UnaryKind::Exp => zip_map(&xs, &gs, |x, g| unary_grad_f32(UnaryKind::Exp, x, g)),
        UnaryKind::Log => zip_map(&xs, &gs, |x, g| unary_grad_f32(UnaryKind::Log, x, g)),
        UnaryKind::Sqrt => zip_map(&xs, &gs, |x, g| unary_grad_f32(UnaryKind::Sqrt, x, g)),
        UnaryKind::Relu => zip_map(&xs, &gs, |x, g| unary_grad_f32(UnaryKind::Relu, x, g)),
        UnaryKind::Gelu => zip_map(&xs, &gs, |x, g| unary_grad_f32(UnaryKind::Gelu, x, g)),
        UnaryKind::GeluTanh => zip_map(&xs, &gs, |x, g| unary_grad_f32(UnaryKind::GeluTanh, x, g)),
        UnaryKind::Tanh => zip_map(&xs, &gs, |x, g| unary_grad_f32(UnaryKind::Tanh, x, g)),
        UnaryKind::Sigmoid => zip_map(&xs, &gs, |x, g| unary_grad_f32(UnaryKind::Sigmoid, x, g)),
    };
    // Neg's and ReLU's gradients are the gradient, its negation or zero: a float16 gradient's
    // are halves already (unrounded); others are rounded by `eval`.
    let exact = matches!(kind, UnaryKind::Neg | UnaryKind::Relu) && matches!(g, Tensor::F16(_));
    Ok(float_result(exact, array(ga.shape(), v)?))
}

/// `PowGrad`: `(a, b, g)` → `(g·b·a^(b−1), g·a^b·ln a)` in g's (broadcast) shape, with
/// PyTorch's conventions: the first is 0 where `b == 0`, the second is 0 where
/// `a == 0 && b >= 0`.
pub fn pow_grad(a: &Tensor, b: &Tensor, g: &Tensor) -> crate::Result<Vec<Tensor>> {
    let (ad, bd, gd) = (f32_data(a, "base")?, f32_data(b, "exponent")?, f32_data(g, "gradient")?);
    let out = g.shape().to_vec();
    check_bcast(a.shape(), &out, "base")?;
    check_bcast(b.shape(), &out, "exponent")?;
    let n = gd.len();
    let (mut ga, mut gb) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let grads = |x: f32, y: f32, gv: f32| {
        let da = if y == 0.0 { 0.0 } else { gv * (y * x.powf(y - 1.0)) };
        let db = if x == 0.0 && y >= 0.0 { 0.0 } else { gv * (x.powf(y) * x.ln()) };
        (da, db)
    };
    if out.is_empty() {
        let (da, db) = grads(ad[0], bd[0], gd[0]);
        ga.push(da);
        gb.push(db);
    } else {
        let sa = bcast_strides(a.shape(), &out);
        let sb = bcast_strides(b.shape(), &out);
        let (ia, ib) = (sa[sa.len() - 1], sb[sb.len() - 1]);
        for_each_row(&out, [&sa, &sb], |o, [oa, ob], len| {
            for i in 0..len {
                let (da, db) = grads(ad[oa + i * ia], bd[ob + i * ib], gd[o + i]);
                ga.push(da);
                gb.push(db);
            }
        });
    }
    Ok(vec![Tensor::F32(array(&out, ga)?), Tensor::F32(array(&out, gb)?)])
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::ir::Op;

    #[test]
    fn erf_matches_reference_values() {
        // reference values from CPython's math.erf/erfc (correctly rounded to ~1 ulp)
        let cases = [
            (0.0, 0.0),
            (1e-10, 1.1283791670955126e-10),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (2.0, 0.9953222650189527),
            (2.4999, 0.9995928300996666),
            (2.5, 0.999593047982555),
            (3.0, 0.9999779095030014),
            (-1.5, -0.9661051464753108),
        ];
        for (x, want) in cases {
            let got = erf(x);
            assert!((got - want).abs() <= 1e-14 * want.abs().max(1e-300), "erf({x}) = {got}, want {want}");
        }
        let tails = [
            (2.5, 4.069520174449589e-4),
            (3.0, 2.209049699858544e-5),
            (5.0, 1.537459794428035e-12),
            (10.0, 2.088487583762545e-45),
            (-1.0, 1.842700792949715),
            (0.3, 0.6713732405408726),
            (0.5, 0.4795001221869535),
            (1.0, 0.15729920705028513),
            (1.9315, 0.0063036506361615),
        ];
        for (x, want) in tails {
            let got = erfc(x);
            assert!((got - want).abs() <= 1e-14 * want, "erfc({x}) = {got}, want {want}");
        }
        // the table-driven erfc used by GELU agrees with the series/continued fraction
        for i in -2000..=2000 {
            let z = i as f64 * 0.0037 + 0.0001;
            let (fast, slow) = (erfc_fast(z), erfc(z));
            assert!((fast - slow).abs() <= 2e-14 * slow, "erfc_fast({z}) = {fast}, erfc = {slow}");
        }
        assert_eq!(erfc_fast(40.0), 0.0);
        assert_eq!(erfc_fast(f64::NEG_INFINITY), 2.0);
        assert_eq!(erf(f64::INFINITY), 1.0);
        assert_eq!(erf(f64::NEG_INFINITY), -1.0);
        assert!(erf(f64::NAN).is_nan());
        // GELU at a few points (torch.nn.functional.gelu in float64)
        let rel = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
        assert!(rel(gelu(1.0), 0.8413447460685429));
        assert!(rel(gelu(-3.0), -0.004049694094890287));
        assert!(rel(gelu_tanh(1.0), 0.8411919906082768));
        assert!(rel(gelu_tanh(-3.0), -0.0036373920817729943));
        assert_eq!(gelu(f64::INFINITY), f64::INFINITY);
        assert_eq!(gelu(-40.0), 0.0);
    }

    #[test]
    fn unary_values() {
        let x = f32t(&[4], &[-1.0, 0.0, 0.5, 2.0]);
        let r = |k| run1(&Op::Unary { kind: k }, &[&x]).to_f32_vec();
        assert_eq!(r(UnaryKind::Neg), vec![1.0, -0.0, -0.5, -2.0]);
        assert_eq!(r(UnaryKind::Relu), vec![0.0, 0.0, 0.5, 2.0]);
        close(&r(UnaryKind::Exp), &[0.36787945, 1.0, 1.6487213, 7.389056], 1e-6);
        close(&r(UnaryKind::Tanh), &[-0.7615942, 0.0, 0.46211716, 0.9640276], 1e-6);
        close(&r(UnaryKind::Sigmoid), &[0.26894143, 0.5, 0.62245935, 0.8807971], 1e-6);
        close(&r(UnaryKind::Gelu), &[-0.15865526, 0.0, 0.34573123, 1.9544997], 1e-6);
        close(&r(UnaryKind::GeluTanh), &[-0.158808, 0.0, 0.345714, 1.9545977], 1e-6);
        let y = f32t(&[2], &[4.0, 0.25]);
        close(&run1(&Op::Unary { kind: UnaryKind::Sqrt }, &[&y]).to_f32_vec(), &[2.0, 0.5], 0.0);
        close(&run1(&Op::Unary { kind: UnaryKind::Log }, &[&y]).to_f32_vec(), &[1.3862944, -1.3862944], 1e-6);
        // sigmoid saturates without NaN
        let z = f32t(&[2], &[-200.0, 200.0]);
        assert_eq!(run1(&Op::Unary { kind: UnaryKind::Sigmoid }, &[&z]).to_f32_vec(), vec![0.0, 1.0]);
    }

    #[test]
    fn binary_broadcasting() {
        let a = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let row = f32t(&[3], &[10., 20., 30.]);
        let col = f32t(&[2, 1], &[100., 200.]);
        let s = f32t(&[], &[2.0]);
        let add = Op::Binary { kind: BinaryKind::Add };
        assert_eq!(run1(&add, &[&a, &row]).to_f32_vec(), vec![11., 22., 33., 14., 25., 36.]);
        assert_eq!(run1(&add, &[&row, &a]).to_f32_vec(), vec![11., 22., 33., 14., 25., 36.]);
        assert_eq!(run1(&add, &[&col, &row]).to_f32_vec(), vec![110., 120., 130., 210., 220., 230.]);
        let sub = Op::Binary { kind: BinaryKind::Sub };
        assert_eq!(run1(&sub, &[&s, &a]).to_f32_vec(), vec![1., 0., -1., -2., -3., -4.]);
        let div = Op::Binary { kind: BinaryKind::Div };
        assert_eq!(run1(&div, &[&a, &s]).to_f32_vec(), vec![0.5, 1., 1.5, 2., 2.5, 3.]);
        let pow = Op::Binary { kind: BinaryKind::Pow };
        assert_eq!(run1(&pow, &[&a, &s]).to_f32_vec(), vec![1., 4., 9., 16., 25., 36.]);
        let mul = Op::Binary { kind: BinaryKind::Mul };
        let r3 = f32t(&[2, 1, 3], &[1., 2., 3., 4., 5., 6.]);
        let r2 = f32t(&[4, 1], &[1., 10., 100., 1000.]);
        let out = run1(&mul, &[&r3, &r2]);
        assert_eq!(out.shape(), &[2, 4, 3]);
        assert_eq!(&out.to_f32_vec()[..6], &[1., 2., 3., 10., 20., 30.]);
        assert_eq!(&out.to_f32_vec()[21..], &[4000., 5000., 6000.]);
        assert!(eval(&add, &[&a, &f32t(&[2], &[1., 2.])]).unwrap_err().to_string().contains("cannot be broadcast"));
        // int32 wraps
        let i = Tensor::from_i32(&[3], vec![i32::MAX, 5, -7]).unwrap();
        let j = Tensor::from_i32(&[], vec![2]).unwrap();
        assert_eq!(run1(&add, &[&i, &j]).to_f64_vec(), vec![i32::MIN as f64 + 1.0, 7.0, -5.0]);
        assert_eq!(run1(&mul, &[&i, &j]).to_f64_vec(), vec![-2.0, 10.0, -14.0]);
        assert!(eval(&div, &[&i, &j]).unwrap_err().to_string().contains("int32"));
        assert!(eval(&add, &[&i, &s]).unwrap_err().to_string().contains("different dtypes"));
    }

    #[test]
    fn float16_arithmetic_is_ieee_half() {
        let h = |v: &[f32]| Tensor::from_f32_as_f16(&[v.len()], v).unwrap();
        let add = Op::Binary { kind: BinaryKind::Add };
        let mul = Op::Binary { kind: BinaryKind::Mul };
        let r = run1(&add, &[&h(&[60000.0, 2048.0, 2048.0, 6.1035e-5]), &h(&[10000.0, 1.0, 3.0, -6.0e-5])]);
        assert_eq!(r.dtype(), DType::Float16);
        let v = r.to_f64_vec();
        assert_eq!(v[0], f64::INFINITY); // overflow
        assert_eq!(v[1], 2048.0); // tie to even
        assert_eq!(v[2], 2052.0);
        assert!(v[3] > 0.0 && v[3] < 6.2e-5 / 50.0); // subnormal result
        let r = run1(&mul, &[&h(&[1e-4, 300.0]), &h(&[1e-4, 300.0])]).to_f64_vec();
        assert_eq!(r, vec![0.0, f64::INFINITY]);
        let e = run1(&Op::Unary { kind: UnaryKind::Exp }, &[&h(&[12.0, 0.0])]);
        assert_eq!(e.dtype(), DType::Float16);
        assert_eq!(e.to_f64_vec(), vec![f64::INFINITY, 1.0]);
        // where and broadcast_to in half
        let c = Tensor::from_bool(&[2], vec![true, false]).unwrap();
        let w = run1(&Op::Where, &[&c, &h(&[1.5, 2.5]), &h(&[-1.0])]);
        assert_eq!(w.to_f64_vec(), vec![1.5, -1.0]);
        assert!(eval(&add, &[&h(&[1.0]), &f32t(&[1], &[1.0])]).unwrap_err().to_string().contains("float16"));
    }

    /// Same-shape and broadcast float16 operands give every kind's float32 result rounded to
    /// float16, bit for bit (`eval` rounds it with `round_slice`, 64 values a block): over a
    /// long tensor (several blocks, a partial last one) of values that hit ties, overflow,
    /// subnormals, zeros of both signs, infs and NaNs.
    #[test]
    fn float16_binary_ops_round_every_result_as_float16() {
        let n = 700;
        let special = [65504.0, -65504.0, 2048.0, 1.0, 6e-8, -6e-8, 0.0, -0.0, f32::INFINITY, f32::NAN, 3.0, 1e-4];
        let xs: Vec<f32> = (0..n)
            .map(|i| if i % 7 == 0 { special[i / 7 % special.len()] } else { (i as f32 * 0.37).sin() * 300.0 })
            .collect();
        let ys: Vec<f32> = (0..n)
            .map(|i| if i % 5 == 0 { special[i / 5 % special.len()] } else { (i as f32 * 0.11).cos() * 9.0 + 1e-3 })
            .collect();
        let (x, y) = (Tensor::from_f32_as_f16(&[n], &xs).unwrap(), Tensor::from_f32_as_f16(&[n], &ys).unwrap());
        let (xh, yh) = (x.to_f32_vec(), y.to_f32_vec());
        let one = Tensor::from_f32_as_f16(&[1], &[yh[1]]).unwrap();
        for (kind, f) in [
            (BinaryKind::Add, (|p, q| p + q) as fn(f32, f32) -> f32),
            (BinaryKind::Sub, |p, q| p - q),
            (BinaryKind::Mul, |p, q| p * q),
            (BinaryKind::Div, |p, q| p / q),
            (BinaryKind::Pow, f32::powf),
        ] {
            let op = Op::Binary { kind };
            for (rhs, ys) in [(&y, yh.clone()), (&one, vec![yh[1]; n])] {
                let product: Vec<f32> = xh.iter().zip(&ys).map(|(&p, &q)| f(p, q)).collect();
                assert_rounded_half(
                    &run1(&op, &[&x, rhs]),
                    &product,
                    &format!("{kind:?}, rhs of {} values", rhs.numel()),
                );
            }
        }
    }

    #[test]
    fn where_positive_full_cast() {
        let c = Tensor::from_bool(&[2, 1], vec![true, false]).unwrap();
        let a = f32t(&[3], &[1., 2., 3.]);
        let b = f32t(&[], &[-1.0]);
        let w = run1(&Op::Where, &[&c, &a, &b]);
        assert_eq!(w.to_f32_vec(), vec![1., 2., 3., -1., -1., -1.]);
        let ci = Tensor::from_bool(&[], vec![false]).unwrap();
        let i1 = Tensor::from_i32(&[], vec![1]).unwrap();
        let i2 = Tensor::from_i32(&[], vec![2]).unwrap();
        assert_eq!(run1(&Op::Where, &[&ci, &i1, &i2]).to_f64_vec(), vec![2.0]);
        let p = run1(&Op::Positive, &[&f32t(&[4], &[-1.0, 0.0, 2.0, f32::NAN])]);
        assert_eq!(p.to_f64_vec(), vec![0.0, 0.0, 1.0, 0.0]);
        let f = run1(&Op::Full { shape: vec![2, 2], dtype: DType::Int32, value: 3.0 }, &[]);
        assert_eq!(f.to_f64_vec(), vec![3.0; 4]);
        let x = f32t(&[5], &[-2.75, 2.99, 0.0, 1e30, f32::NAN]);
        let cast = |t: &Tensor, d| run1(&Op::Cast { dtype: d }, &[t]);
        assert_eq!(cast(&x, DType::Int32).to_f64_vec(), vec![-2.0, 2.0, 0.0, i32::MAX as f64, 0.0]);
        assert_eq!(cast(&x, DType::Bool).to_f64_vec(), vec![1.0, 1.0, 0.0, 1.0, 1.0]);
        let h = cast(&x, DType::Float16).to_f64_vec();
        assert_eq!(h[..4], [-2.75, 2.990234375, 0.0, f64::INFINITY]);
        let i = Tensor::from_i32(&[2], vec![16777217, -3]).unwrap();
        assert_eq!(cast(&i, DType::Float32).to_f64_vec(), vec![16777216.0, -3.0]);
        assert_eq!(cast(&i, DType::Float16).to_f64_vec(), vec![f64::INFINITY, -3.0]);
        let bl = Tensor::from_bool(&[2], vec![true, false]).unwrap();
        assert_eq!(cast(&bl, DType::Float16).to_f64_vec(), vec![1.0, 0.0]);
        assert_eq!(cast(&bl, DType::Int32).to_f64_vec(), vec![1.0, 0.0]);
    }

    #[test]
    fn broadcast_to_and_sum_to() {
        let a = f32t(&[2, 1], &[1., 2.]);
        let b = run1(&Op::BroadcastTo { shape: vec![3, 2, 2] }, &[&a]);
        assert_eq!(b.to_f32_vec(), vec![1., 1., 2., 2., 1., 1., 2., 2., 1., 1., 2., 2.]);
        let r = f32t(&[2], &[1., 2.]);
        let b = run1(&Op::BroadcastTo { shape: vec![2, 2] }, &[&r]);
        assert_eq!(b.to_f32_vec(), vec![1., 2., 1., 2.]);
        let bb = Tensor::from_bool(&[], vec![true]).unwrap();
        assert_eq!(run1(&Op::BroadcastTo { shape: vec![2] }, &[&bb]).to_f64_vec(), vec![1.0, 1.0]);
        assert!(eval(&Op::BroadcastTo { shape: vec![3] }, &[&r]).is_err());
        let g = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        assert_eq!(run1(&Op::SumTo { shape: vec![3] }, &[&g]).to_f32_vec(), vec![5., 7., 9.]);
        assert_eq!(run1(&Op::SumTo { shape: vec![2, 1] }, &[&g]).to_f32_vec(), vec![6., 15.]);
        assert_eq!(run1(&Op::SumTo { shape: vec![] }, &[&g]).to_f32_vec(), vec![21.]);
        assert_eq!(run1(&Op::SumTo { shape: vec![1, 3] }, &[&g]).to_f32_vec(), vec![5., 7., 9.]);
        assert_eq!(run1(&Op::SumTo { shape: vec![2, 3] }, &[&g]).to_f32_vec(), g.to_f32_vec());
        let gh = g.cast(DType::Float16);
        let s = run1(&Op::SumTo { shape: vec![3] }, &[&gh]);
        assert_eq!(s.dtype(), DType::Float16);
        assert_eq!(s.to_f64_vec(), vec![5., 7., 9.]);
        assert!(eval(&Op::SumTo { shape: vec![4] }, &[&g]).is_err());
    }

    /// Finite differences of every unary kind against `UnaryGrad`, in f64 via the f64
    /// reference functions where the f32 kernel would be too coarse.
    #[test]
    fn unary_grad_matches_finite_differences() {
        let xs = [-2.1f32, -0.7, -0.2, 0.3, 0.9, 1.7];
        let kinds = [
            UnaryKind::Neg,
            UnaryKind::Exp,
            UnaryKind::Log,
            UnaryKind::Sqrt,
            UnaryKind::Relu,
            UnaryKind::Gelu,
            UnaryKind::GeluTanh,
            UnaryKind::Tanh,
            UnaryKind::Sigmoid,
        ];
        for kind in kinds {
            let pts: Vec<f32> = match kind {
                UnaryKind::Log | UnaryKind::Sqrt => xs.iter().map(|v| v.abs() + 0.3).collect(),
                _ => xs.to_vec(),
            };
            let x = f32t(&[pts.len()], &pts);
            let g = f32t(&[pts.len()], &[1.0, -0.5, 2.0, 0.25, -1.5, 0.75]);
            let got = run1(&Op::UnaryGrad { kind }, &[&x, &g]).to_f32_vec();
            let fd = numeric_grad(
                |v| {
                    let t = f32t(&[pts.len()], v);
                    let y = run1(&Op::Unary { kind }, &[&t]).to_f32_vec();
                    y.iter().zip(g.to_f32_vec()).map(|(&a, b)| a as f64 * b as f64).sum()
                },
                &pts,
                1e-2,
            );
            close(&got, &fd, 2e-3);
            // and a tighter check in f64 for the GELUs
            if matches!(kind, UnaryKind::Gelu | UnaryKind::GeluTanh) {
                let f = if kind == UnaryKind::Gelu { gelu } else { gelu_tanh };
                let df = if kind == UnaryKind::Gelu { gelu_grad } else { gelu_tanh_grad };
                for &p in &pts {
                    let h = 1e-5;
                    let num = (f(p as f64 + h) - f(p as f64 - h)) / (2.0 * h);
                    assert!((num - df(p as f64)).abs() < 1e-8, "{kind:?} at {p}");
                }
            }
        }
    }

    #[test]
    fn pow_grad_matches_finite_differences() {
        let a = f32t(&[2, 3], &[0.5, 1.2, 2.0, 0.8, 1.5, 1.1]);
        let b = f32t(&[3], &[-1.5, 0.5, 2.0]);
        let g = f32t(&[2, 3], &[1.0, -0.5, 0.3, 0.7, -1.2, 0.4]);
        let out = run(&Op::PowGrad, &[&a, &b, &g]);
        let gsum_b = run1(&Op::SumTo { shape: vec![3] }, &[&out[1]]).to_f32_vec();
        let pow = Op::Binary { kind: BinaryKind::Pow };
        let loss = |av: &[f32], bv: &[f32]| -> f64 {
            let y = run1(&pow, &[&f32t(&[2, 3], av), &f32t(&[3], bv)]).to_f32_vec();
            y.iter().zip(g.to_f32_vec()).map(|(&p, q)| p as f64 * q as f64).sum()
        };
        let (av, bv) = (a.to_f32_vec(), b.to_f32_vec());
        let fa = numeric_grad(|v| loss(v, &bv), &av, 1e-2);
        let fb = numeric_grad(|v| loss(&av, v), &bv, 1e-2);
        close(&out[0].to_f32_vec(), &fa, 2e-3);
        close(&gsum_b, &fb, 2e-3);
        // torch's conventions at zero
        let z = f32t(&[2], &[0.0, 0.0]);
        let e = f32t(&[2], &[0.0, 2.0]);
        let one = f32t(&[2], &[1.0, 1.0]);
        let out = run(&Op::PowGrad, &[&z, &e, &one]);
        assert_eq!(out[0].to_f32_vec(), vec![0.0, 0.0]);
        assert_eq!(out[1].to_f32_vec(), vec![0.0, 0.0]);
    }
}
