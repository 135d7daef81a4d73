//! CPU kernels: [`eval`] runs one IR op on concrete tensors, with PyTorch's semantics (see
//! [`crate::ir::op`]) and exactly the output shapes and dtypes of [`crate::ir::shape::infer`].
//!
//! One file per op family; [`optim`] holds the optimizer math the executor applies for
//! `OptimizerUpdate`. Kernels work on contiguous row-major slices and never panic on bad
//! data: out-of-range indices, malformed CSR structure, shape mismatches and wrong dtypes
//! come back as `Err` with a message naming the offending value (the executor adds the op
//! name and scope).
//!
//! dtypes: every float op runs on float32. Float16 inputs are supported by every float op:
//! a float16 tensor holds its values as float32s ([`Tensor::F16`]), which the kernels read
//! as they read a float32 tensor, with no conversion. Shape/data-movement ops, `Where`,
//! `Cast`, `Max`/`ArgMax`, `SliceGrad` and `DynamicSliceGrad` move the half values as they
//! are; `Reduce`/`SumTo`/`IdentityLoss` accumulate half inputs in float32 ("partials
//! float") and round once; every other float op computes in float32 (matmul accumulating in
//! float32) and rounds each result to half once, in place (matrix products, SpMM and layer
//! norm round each block of rows as they finish it, while it is in cache; `eval` rounds the
//! results of the others, and any still float32) — for `+ − × ÷` that is the
//! correctly rounded IEEE half result, with overflow to ±inf and gradual underflow. Int32
//! `Binary` supports add/sub/mul (wrapping).

use crate::Error;
pub mod conv;
pub mod elementwise;
pub mod gemm_simd;
pub mod loss;
pub mod matmul;
pub mod norm;
pub mod optim;
pub mod pool;
pub mod reduce;
pub mod scatter;
pub mod shape_ops;

mod common;

use crate::ir::Op;
use crate::tensor::{DType, Tensor};
use common::arity;

/// Runs `op` on `inputs` and returns its outputs (see the module docs for dtypes and errors).
///
/// `Placeholder`, `Constant`, `RandomMask` (the executor's seeded generator), `Call`,
/// `InvertibleBackward`, `BufferUpdate` and `OptimizerUpdate` are the executor's business
/// and give an error here.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> crate::Result<Vec<Tensor>> {
    if matches!(op, Op::Cast { .. }) || !inputs.iter().any(|t| t.dtype() == DType::Float16) {
        return dispatch(op, inputs);
    }
    if widens_half(op) {
        let sparse = matches!(op, Op::SpMM { .. } | Op::SpMMTransposed { .. } | Op::SpMMValuesGrad { .. });
        if !sparse && inputs.iter().any(|t| t.dtype() == DType::Float32) {
            let dts: Vec<&str> = inputs.iter().map(|t| t.dtype().short()).collect();
            return Err(Error::exec(format!(
                "mixed float16 and float32 inputs ({}); cast one of them first",
                dts.join(", ")
            )));
        }
    }
    // The kernels give float32 results for float16 inputs, except the ones that only move
    // values (already tagged float16): each is rounded to half here, once, in place.
    dispatch(op, inputs).map(common::round_to_half)
}

/// Ops whose float16 inputs are computed in float32 and rounded back (see module docs); all
/// of their float inputs must have one dtype (sparse values aside).
fn widens_half(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary { .. }
            | Op::Binary { .. }
            | Op::UnaryGrad { .. }
            | Op::PowGrad
            | Op::MatMul
            | Op::MatMulTN
            | Op::Linear { .. }
            | Op::LinearAdd { .. }
            | Op::Conv2d { .. }
            | Op::Conv2dGradInput { .. }
            | Op::Conv2dGradWeight { .. }
            | Op::MaxPool2d { .. }
            | Op::MaxPool2dGrad { .. }
            | Op::AvgPool2d { .. }
            | Op::AvgPool2dGrad { .. }
            | Op::AdaptiveAvgPool2d { .. }
            | Op::AdaptiveAvgPool2dGrad { .. }
            | Op::SpMM { .. }
            | Op::SpMMTransposed { .. }
            | Op::SpMMValuesGrad { .. }
            | Op::MaxGrad { .. }
            | Op::Softmax { .. }
            | Op::LogSoftmax { .. }
            | Op::SoftmaxGrad { .. }
            | Op::LogSoftmaxGrad { .. }
            | Op::LayerNorm { .. }
            | Op::LayerNormGrad { .. }
            | Op::BatchNorm { .. }
            | Op::BatchNormGrad { .. }
            | Op::Dropout { .. }
            | Op::CrossEntropy { .. }
            | Op::CrossEntropyGrad { .. }
            | Op::IndexAdd { .. }
            | Op::GatherGrad { .. }
            | Op::ScatterAdd { .. }
            | Op::ScatterMean { .. }
            | Op::ScatterMeanGrad { .. }
    )
}

fn one(t: crate::Result<Tensor>) -> crate::Result<Vec<Tensor>> {
    t.map(|t| vec![t])
}

fn dispatch(op: &Op, ins: &[&Tensor]) -> crate::Result<Vec<Tensor>> {
    use elementwise as ew;
    match op {
        Op::Placeholder { .. }
        | Op::Constant { .. }
        | Op::RandomMask { .. }
        | Op::Call { .. }
        | Op::InvertibleBackward { .. }
        | Op::BufferUpdate { .. }
        | Op::OptimizerUpdate { .. } => {
            Err(Error::exec(format!("'{}' is run by the executor, not by a CPU kernel", op.name())))
        }
        Op::Full { shape, dtype, value } => {
            arity(ins, 0)?;
            Ok(vec![ew::full(shape, *dtype, *value)])
        }
        Op::Unary { kind } => {
            arity(ins, 1)?;
            one(ew::unary(*kind, ins[0]))
        }
        Op::Binary { kind } => {
            arity(ins, 2)?;
            one(ew::binary(*kind, ins[0], ins[1]))
        }
        Op::Where => {
            arity(ins, 3)?;
            one(ew::where_(ins[0], ins[1], ins[2]))
        }
        Op::Positive => {
            arity(ins, 1)?;
            one(ew::positive(ins[0]))
        }
        Op::Cast { dtype } => {
            arity(ins, 1)?;
            one(ew::cast(ins[0], *dtype))
        }
        Op::BroadcastTo { shape } => {
            arity(ins, 1)?;
            one(ew::broadcast_to(ins[0], shape))
        }
        Op::SumTo { shape } => {
            arity(ins, 1)?;
            one(reduce::sum_to(ins[0], shape))
        }
        Op::UnaryGrad { kind } => {
            arity(ins, 2)?;
            one(ew::unary_grad(*kind, ins[0], ins[1]))
        }
        Op::PowGrad => {
            arity(ins, 3)?;
            ew::pow_grad(ins[0], ins[1], ins[2])
        }
        Op::MatMul => {
            arity(ins, 2)?;
            one(matmul::matmul(ins[0], ins[1]))
        }
        Op::MatMulTN => {
            arity(ins, 2)?;
            one(matmul::matmul_tn(ins[0], ins[1]))
        }
        Op::Linear { has_bias } => {
            arity(ins, 2 + *has_bias as usize)?;
            one(matmul::linear(ins[0], ins[1], ins.get(2).copied(), None))
        }
        Op::LinearAdd { has_bias } => {
            arity(ins, 3 + *has_bias as usize)?;
            let bias = if *has_bias { Some(ins[2]) } else { None };
            one(matmul::linear(ins[0], ins[1], bias, ins.last().copied()))
        }
        Op::Conv2d { geom, has_bias } => {
            arity(ins, 2 + *has_bias as usize)?;
            one(conv::conv2d(geom, ins[0], ins[1], ins.get(2).copied()))
        }
        Op::Conv2dGradInput { geom, in_shape } => {
            arity(ins, 2)?;
            one(conv::conv2d_grad_input(geom, in_shape, ins[0], ins[1]))
        }
        Op::Conv2dGradWeight { geom, weight_shape } => {
            arity(ins, 2)?;
            one(conv::conv2d_grad_weight(geom, weight_shape, ins[0], ins[1]))
        }
        Op::MaxPool2d { geom } => {
            arity(ins, 1)?;
            one(pool::max_pool2d(geom, ins[0]))
        }
        Op::MaxPool2dGrad { geom } => {
            arity(ins, 2)?;
            one(pool::max_pool2d_grad(geom, ins[0], ins[1]))
        }
        Op::AvgPool2d { geom, count_include_pad } => {
            arity(ins, 1)?;
            one(pool::avg_pool2d(geom, *count_include_pad, ins[0]))
        }
        Op::AvgPool2dGrad { geom, count_include_pad, in_shape } => {
            arity(ins, 1)?;
            one(pool::avg_pool2d_grad(geom, *count_include_pad, in_shape, ins[0]))
        }
        Op::AdaptiveAvgPool2d { output } => {
            arity(ins, 1)?;
            one(pool::adaptive_avg_pool2d(*output, ins[0]))
        }
        Op::AdaptiveAvgPool2dGrad { in_shape } => {
            arity(ins, 1)?;
            one(pool::adaptive_avg_pool2d_grad(in_shape, ins[0]))
        }
        Op::SpMM { n_rows, n_cols } => {
            arity(ins, 4)?;
            one(matmul::spmm(ins, *n_rows, *n_cols))
        }
        Op::SpMMTransposed { n_rows, n_cols } => {
            arity(ins, 4)?;
            one(matmul::spmm_t(ins, *n_rows, *n_cols))
        }
        Op::SpMMValuesGrad { n_rows, n_cols } => {
            arity(ins, 4)?;
            one(matmul::spmm_values_grad(ins, *n_rows, *n_cols))
        }
        Op::Reduce { kind, dims, keepdim } => {
            arity(ins, 1)?;
            one(reduce::reduce(*kind, dims, *keepdim, ins[0]))
        }
        Op::Max { dim, keepdim } => {
            arity(ins, 1)?;
            one(reduce::max(ins[0], *dim, *keepdim, false))
        }
        Op::ArgMax { dim, keepdim } => {
            arity(ins, 1)?;
            one(reduce::max(ins[0], *dim, *keepdim, true))
        }
        Op::MaxGrad { dim, .. } => {
            arity(ins, 2)?;
            one(reduce::max_grad(ins[0], ins[1], *dim))
        }
        Op::Softmax { dim } => {
            arity(ins, 1)?;
            one(reduce::softmax(ins[0], *dim, false))
        }
        Op::LogSoftmax { dim } => {
            arity(ins, 1)?;
            one(reduce::softmax(ins[0], *dim, true))
        }
        Op::SoftmaxGrad { dim } => {
            arity(ins, 2)?;
            one(reduce::softmax_grad(ins[0], ins[1], *dim, false))
        }
        Op::LogSoftmaxGrad { dim } => {
            arity(ins, 2)?;
            one(reduce::softmax_grad(ins[0], ins[1], *dim, true))
        }
        Op::LayerNorm { normalized_ndim, eps, affine } => {
            arity(ins, if *affine { 3 } else { 1 })?;
            one(norm::layer_norm(ins, *normalized_ndim, *eps, *affine))
        }
        Op::LayerNormGrad { normalized_ndim, eps, affine } => {
            arity(ins, if *affine { 3 } else { 2 })?;
            norm::layer_norm_grad(ins, *normalized_ndim, *eps, *affine)
        }
        Op::BatchNorm { eps, affine } => {
            arity(ins, if *affine { 3 } else { 1 })?;
            norm::batch_norm(ins, *eps, *affine)
        }
        Op::BatchNormGrad { eps, affine } => {
            arity(ins, if *affine { 3 } else { 2 })?;
            norm::batch_norm_grad(ins, *eps, *affine)
        }
        Op::Dropout { p } => {
            arity(ins, 2)?;
            one(norm::dropout(ins[0], ins[1], *p))
        }
        Op::CrossEntropy { reduction, class_weight, has_mask, ignore_index, label_smoothing } => {
            arity(ins, 2 + *has_mask as usize)?;
            let mask = if *has_mask { Some(ins[2]) } else { None };
            let how = loss::CeOptions {
                reduction: *reduction,
                class_weight: class_weight.as_deref(),
                ignore_index: *ignore_index,
                label_smoothing: *label_smoothing,
            };
            one(loss::cross_entropy(ins[0], ins[1], mask, &how))
        }
        Op::CrossEntropyGrad { reduction, class_weight, has_mask, ignore_index, label_smoothing } => {
            arity(ins, 3 + *has_mask as usize)?;
            let mask = if *has_mask { Some(ins[2]) } else { None };
            let g = ins[2 + *has_mask as usize];
            let how = loss::CeOptions {
                reduction: *reduction,
                class_weight: class_weight.as_deref(),
                ignore_index: *ignore_index,
                label_smoothing: *label_smoothing,
            };
            one(loss::cross_entropy_grad(ins[0], ins[1], mask, g, &how))
        }
        Op::OneHot { num_classes } => {
            arity(ins, 1)?;
            one(shape_ops::one_hot(ins[0], *num_classes))
        }
        Op::IdentityLoss { reduction } => {
            arity(ins, 1)?;
            one(loss::identity_loss(ins[0], *reduction))
        }
        Op::Reshape { shape } => {
            arity(ins, 1)?;
            one(shape_ops::reshape(ins[0], shape))
        }
        Op::Permute { dims } => {
            arity(ins, 1)?;
            one(shape_ops::permute(ins[0], dims))
        }
        Op::Concat { dim } => one(shape_ops::concat(ins, *dim)),
        Op::Split { sizes, dim } => {
            arity(ins, 1)?;
            shape_ops::split(ins[0], sizes, *dim)
        }
        Op::Slice { dim, start, end, step } => {
            arity(ins, 1)?;
            one(shape_ops::slice_op(ins[0], *dim, *start, *end, *step))
        }
        Op::SliceGrad { in_shape, dim, start, end, step } => {
            arity(ins, 1)?;
            one(shape_ops::slice_grad(ins[0], in_shape, *dim, *start, *end, *step))
        }
        Op::DynamicSlice { dim, size } => {
            arity(ins, 2)?;
            one(shape_ops::dynamic_slice(ins[0], ins[1], *dim, *size))
        }
        Op::DynamicSliceGrad { in_shape, dim, size } => {
            arity(ins, 2)?;
            one(shape_ops::dynamic_slice_grad(ins[0], ins[1], in_shape, *dim, *size))
        }
        Op::IndexSelect { dim } => {
            arity(ins, 2)?;
            one(shape_ops::index_select(ins[0], ins[1], *dim))
        }
        Op::IndexAdd { dim, dim_size } => {
            arity(ins, 2)?;
            one(shape_ops::index_add(ins[0], ins[1], *dim, *dim_size))
        }
        Op::Gather { dim } => {
            arity(ins, 2)?;
            one(shape_ops::gather(ins[0], ins[1], *dim))
        }
        Op::GatherGrad { dim, in_shape } => {
            arity(ins, 2)?;
            one(shape_ops::gather_grad(ins[0], ins[1], *dim, in_shape))
        }
        Op::ScatterAdd { dim_size } => {
            arity(ins, 2)?;
            one(scatter::scatter(ins[0], ins[1], *dim_size, false))
        }
        Op::ScatterMean { dim_size } => {
            arity(ins, 2)?;
            one(scatter::scatter(ins[0], ins[1], *dim_size, true))
        }
        Op::ScatterMeanGrad { dim_size } => {
            arity(ins, 2)?;
            one(scatter::scatter_mean_grad(ins[0], ins[1], *dim_size))
        }
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Helpers for the kernel unit tests.

    pub use super::eval;
    use crate::ir::shape::{infer, TensorType};
    use crate::ir::Op;
    use crate::tensor::Tensor;

    /// A float32 tensor.
    pub fn f32t(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32(shape, v.to_vec()).unwrap()
    }

    /// Runs `op`, panicking on error, and checks the outputs against shape inference.
    pub fn run(op: &Op, inputs: &[&Tensor]) -> Vec<Tensor> {
        let out = eval(op, inputs).unwrap_or_else(|e| panic!("{op:?} failed: {e}"));
        let tys: Vec<TensorType> = inputs.iter().map(|t| TensorType::new(t.shape(), t.dtype())).collect();
        let refs: Vec<&TensorType> = tys.iter().collect();
        let want = infer(op, &refs).unwrap_or_else(|e| panic!("infer rejects {op:?}: {e}"));
        let got: Vec<TensorType> = out.iter().map(|t| TensorType::new(t.shape(), t.dtype())).collect();
        assert_eq!(got, want, "{op:?}: kernel output types differ from shape inference");
        out
    }

    /// Runs a single-output op.
    pub fn run1(op: &Op, inputs: &[&Tensor]) -> Tensor {
        let mut out = run(op, inputs);
        assert_eq!(out.len(), 1);
        out.remove(0)
    }

    /// Asserts `|got − want| ≤ tol·(1 + |want|)` elementwise.
    pub fn close(got: &[f32], want: &[f32], tol: f32) {
        assert_eq!(got.len(), want.len(), "lengths differ: {got:?} vs {want:?}");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= tol * (1.0 + w.abs()),
                "element {i}: got {g}, want {w}\n got {got:?}\nwant {want:?}"
            );
        }
    }

    /// Asserts that `got` is float16 and holds each of `exact` (float32 results) rounded to
    /// float16, bit for bit (any NaN for a NaN); `what` names the case.
    pub fn assert_rounded_half(got: &Tensor, exact: &[f32], what: &str) {
        assert_eq!(got.dtype(), crate::tensor::DType::Float16, "{what}");
        let got = got.to_f32_vec();
        assert_eq!(got.len(), exact.len(), "{what}: lengths");
        for (i, (&g, &e)) in got.iter().zip(exact).enumerate() {
            let w = crate::tensor::float16::round(e);
            let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
            assert!(same, "{what}, element {i}: got {g} ({:#x}), want {w} ({:#x}) from {e}", g.to_bits(), w.to_bits());
        }
    }

    /// `Σ t·w` in f64 (a scalar "loss" for finite differences).
    pub fn dotv(t: &Tensor, w: &[f32]) -> f64 {
        let v = t.to_f64_vec();
        assert_eq!(v.len(), w.len());
        v.iter().zip(w).map(|(&a, &b)| a * b as f64).sum()
    }

    /// Central finite differences of `f` at `x` with step `h`.
    pub fn numeric_grad(f: impl Fn(&[f32]) -> f64, x: &[f32], h: f32) -> Vec<f32> {
        let mut xv = x.to_vec();
        (0..x.len())
            .map(|i| {
                let orig = xv[i];
                xv[i] = orig + h;
                let up = f(&xv);
                xv[i] = orig - h;
                let down = f(&xv);
                xv[i] = orig;
                let step = (orig + h) as f64 - (orig - h) as f64;
                ((up - down) / step) as f32
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use crate::ir::{InputKind, Op};
    use crate::tensor::{DType, Tensor};

    trait Wide {
        /// A float16 tensor's values as float32 (other tensors as they are).
        fn cast_wide(&self) -> Tensor;
    }
    impl Wide for Tensor {
        fn cast_wide(&self) -> Tensor {
            if self.dtype() == DType::Float16 {
                self.cast(DType::Float32)
            } else {
                self.clone()
            }
        }
    }

    #[test]
    fn executor_ops_are_rejected() {
        let op = Op::Placeholder { kind: InputKind::Input, name: "x".into() };
        assert!(eval(&op, &[]).unwrap_err().to_string().contains("executor"));
        let x = f32t(&[1], &[1.0]);
        assert!(eval(&Op::BufferUpdate { name: "b".into() }, &[&x]).unwrap_err().to_string().contains("executor"));
    }

    /// Random float16 values (as a float16 tensor), spread over float16's range: most of
    /// order one, some near its largest finite value (sums and products overflow to inf) and
    /// some subnormal.
    fn halves(rng: &mut crate::rng::Rng, shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|i| {
                let x = rng.normal();
                match i % 17 {
                    3 => x * 40000.0,
                    7 => x * 1e-6,
                    _ => x,
                }
            })
            .collect();
        Tensor::from_f32(shape, v).unwrap().cast(DType::Float16)
    }

    /// The kernels that round float16 results themselves (layer norm and its gradient and
    /// SpMM a row at a time, the strided matrix products a block of rows at a time, as each
    /// is finished) and the ones `eval` rounds afterwards give, bit for bit, what the
    /// float32 kernel gives on the same values rounded once afterwards
    /// ([`crate::tensor::float16::round`], checked against the `half` crate) — the float16
    /// results `eval` gave when it rounded every result in a second pass. Shapes leave row
    /// and column tails in every GEMM kernel and a `k` of more than one panel.
    #[test]
    fn float16_results_are_the_float32_results_rounded_once() {
        let mut rng = crate::rng::Rng::new(7);
        let check = |op: &Op, ins: &[&Tensor]| {
            let half = run(op, ins);
            let wide: Vec<Tensor> = ins.iter().map(|t| t.cast_wide()).collect();
            let wide_refs: Vec<&Tensor> = wide.iter().collect();
            let full = run(op, &wide_refs);
            assert_eq!(half.len(), full.len());
            for (h, f) in half.iter().zip(&full) {
                assert_eq!(h.dtype(), DType::Float16, "{op:?}");
                let want = f.cast(DType::Float16).to_f32_vec();
                let got = h.to_f32_vec();
                assert_eq!(got.len(), want.len());
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
                    assert!(same, "{op:?}: element {i}: {g:e} ({:#x}) vs {w:e} ({:#x})", g.to_bits(), w.to_bits());
                }
            }
        };
        use crate::ir::BinaryKind as B;
        let (a, b) = (halves(&mut rng, &[7, 21]), halves(&mut rng, &[7, 21]));
        let (row, col) = (halves(&mut rng, &[21]), halves(&mut rng, &[7, 1]));
        for kind in [B::Add, B::Sub, B::Mul, B::Div, B::Pow] {
            check(&Op::Binary { kind }, &[&a, &b]);
            check(&Op::Binary { kind }, &[&a, &row]);
            check(&Op::Binary { kind }, &[&col, &a]);
        }
        let mask = Tensor::from_bool(&[7, 21], rng.bernoulli_mask(7 * 21, 0.5)).unwrap();
        for p in [0.5, 0.1] {
            check(&Op::Dropout { p }, &[&a, &mask]);
        }
        let (w, bias) = (halves(&mut rng, &[21]), halves(&mut rng, &[21]));
        check(&Op::LayerNorm { normalized_ndim: 1, eps: 1e-5, affine: false }, &[&a]);
        check(&Op::LayerNorm { normalized_ndim: 1, eps: 1e-5, affine: true }, &[&a, &w, &bias]);
        check(&Op::LayerNormGrad { normalized_ndim: 1, eps: 1e-5, affine: false }, &[&a, &b]);
        check(&Op::LayerNormGrad { normalized_ndim: 1, eps: 1e-5, affine: true }, &[&a, &w, &b]);
        // CSR [5 x 7] with an empty row; float32 values, float16 dense operand.
        let indptr = Tensor::from_i32(&[6], vec![0, 2, 2, 5, 6, 8]).unwrap();
        let indices = Tensor::from_i32(&[8], vec![0, 6, 1, 2, 3, 4, 5, 6]).unwrap();
        let vals = Tensor::from_f32(&[8], (0..8).map(|i| 0.25 + i as f32 * 0.3).collect()).unwrap();
        check(&Op::SpMM { n_rows: 5, n_cols: 7 }, &[&indptr, &indices, &vals, &a]);
        // m = 13 (tails of 4- and 6-row blocks), k = 150 (two panels of 128), n = 37.
        let (x, y) = (halves(&mut rng, &[13, 150]), halves(&mut rng, &[150, 37]));
        check(&Op::MatMul, &[&x, &y]);
        let xt = halves(&mut rng, &[150, 13]);
        check(&Op::MatMulTN, &[&xt, &y]);
        let (wt, bl, add) = (halves(&mut rng, &[37, 150]), halves(&mut rng, &[37]), halves(&mut rng, &[13, 37]));
        check(&Op::Linear { has_bias: true }, &[&x, &wt, &bl]);
        check(&Op::Linear { has_bias: false }, &[&x, &wt]);
        check(&Op::LinearAdd { has_bias: true }, &[&x, &wt, &bl, &add]);
        let batched = halves(&mut rng, &[2, 13, 150]);
        check(&Op::MatMul, &[&batched, &y]);
    }

    #[test]
    fn arity_is_checked() {
        let x = f32t(&[1], &[1.0]);
        let e = eval(&Op::MatMul, &[&x]).unwrap_err().to_string();
        assert!(e.contains("expects 2 inputs"), "{e}");
    }
}
