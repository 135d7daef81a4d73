//! Static type inference: the output shapes and dtypes of every op from its inputs'.
//!
//! This is the one place the shape rules live; the tracer, the verifier and autograd all
//! go through [`infer`], and the kernels produce exactly these shapes.

use super::op::{Conv2dGeom, Op, Pool2dGeom, Reduction};
use crate::tensor::DType;
use crate::Error;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Static shape and dtype of a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorType {
    pub shape: Vec<usize>,
    pub dtype: DType,
}

impl TensorType {
    pub fn new(shape: &[usize], dtype: DType) -> TensorType {
        TensorType { shape: shape.to_vec(), dtype }
    }
    pub fn f32(shape: &[usize]) -> TensorType {
        TensorType::new(shape, DType::Float32)
    }
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn nbytes(&self) -> usize {
        self.numel() * self.dtype.size()
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        write!(f, "{}[{}]", self.dtype, dims.join(","))
    }
}

/// NumPy broadcasting of two shapes.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> crate::Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(Error::ir(format!(
                    "shapes {a:?} and {b:?} cannot be broadcast together (dim {i}: {da} vs {db})"
                )))
            }
        };
    }
    Ok(out)
}

fn arity(inputs: &[&TensorType], lo: usize, hi: usize) -> crate::Result<()> {
    if inputs.len() < lo || inputs.len() > hi {
        let want = if lo == hi { lo.to_string() } else { format!("{lo} to {hi}") };
        return Err(Error::ir(format!("expects {want} inputs, got {}", inputs.len())));
    }
    Ok(())
}

fn want_dtype(t: &TensorType, what: &str, ok: &[DType]) -> crate::Result<()> {
    if !ok.contains(&t.dtype) {
        let names: Vec<&str> = ok.iter().map(|d| d.short()).collect();
        return Err(Error::ir(format!("{what} must be {} but is {t}", names.join(" or "))));
    }
    Ok(())
}

const FLOATS: &[DType] = &[DType::Float32, DType::Float16];

/// A module's parameters must have its input's dtype, as in PyTorch (`F.linear` of a float32
/// input and a float16 weight is an error there too, not a silent cast).
fn same_dtype_as_input(x: &TensorType, params: &[(&str, &TensorType)]) -> crate::Result<()> {
    for (what, t) in params {
        if t.dtype != x.dtype {
            return Err(Error::ir(format!(
                "the input {x} and the {what} {t} have different dtypes: give the input the module's dtype \
                 (float16 after module.half()) or cast the module (module.float())"
            )));
        }
    }
    Ok(())
}

fn check_dim(dim: usize, rank: usize) -> crate::Result<()> {
    if dim >= rank {
        return Err(Error::ir(format!("dim {dim} is out of range for a tensor of rank {rank}")));
    }
    Ok(())
}

/// The shape after reducing `dims` (empty = all), with or without the reduced dims kept as 1.
pub fn reduced_shape(shape: &[usize], dims: &[usize], keepdim: bool) -> Vec<usize> {
    let all = dims.is_empty();
    let mut out = Vec::new();
    for (i, &d) in shape.iter().enumerate() {
        if all || dims.contains(&i) {
            if keepdim {
                out.push(1);
            }
        } else {
            out.push(d);
        }
    }
    out
}

/// Shape of torch.matmul(a, b).
pub fn matmul_shape(a: &[usize], b: &[usize]) -> crate::Result<Vec<usize>> {
    if a.is_empty() || b.is_empty() {
        return Err(Error::ir("matmul operands must have at least 1 dim"));
    }
    let (a2, a_vec) = if a.len() == 1 { (vec![1, a[0]], true) } else { (a.to_vec(), false) };
    let (b2, b_vec) = if b.len() == 1 { (vec![b[0], 1], true) } else { (b.to_vec(), false) };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != k2 {
        return Err(Error::ir(format!("matmul shapes {a:?} and {b:?} do not match: inner sizes {k} and {k2}")));
    }
    let batch = broadcast_shapes(&a2[..a2.len() - 2], &b2[..b2.len() - 2])?;
    let mut out = batch;
    if !a_vec {
        out.push(m);
    }
    if !b_vec {
        out.push(n);
    }
    Ok(out)
}

fn nchw<'a>(x: &'a TensorType, what: &str) -> crate::Result<&'a [usize]> {
    want_dtype(x, what, FLOATS)?;
    if x.rank() != 4 {
        return Err(Error::ir(format!("{what} must be 4-D [N, C, H, W], got {x}")));
    }
    Ok(&x.shape)
}

/// The output shape of `Conv2d` for an input and a weight shape.
pub fn conv2d_shape(geom: &Conv2dGeom, x: &[usize], w: &[usize]) -> crate::Result<Vec<usize>> {
    let Conv2dGeom { stride, dilation, groups, .. } = *geom;
    if stride.contains(&0) || dilation.contains(&0) || groups == 0 {
        return Err(Error::ir(format!(
            "stride {stride:?}, dilation {dilation:?} and groups {groups} must be positive"
        )));
    }
    if w.len() != 4 {
        return Err(Error::ir(format!("weight must be 4-D [out_channels, in_channels/groups, kh, kw], got {w:?}")));
    }
    let (c, o) = (x[1], w[0]);
    if !c.is_multiple_of(groups) || !o.is_multiple_of(groups) {
        return Err(Error::ir(format!(
            "in_channels {c} and out_channels {o} must both be divisible by groups {groups}"
        )));
    }
    if w[1] * groups != c {
        return Err(Error::ir(format!(
            "expected the input [N, C, H, W] {x:?} to have {} channels (weight {w:?} with groups {groups}), but it has {c}",
            w[1] * groups
        )));
    }
    let mut out = vec![x[0], o];
    for axis in 0..2 {
        let n = geom.out_size(axis, x[2 + axis], w[2 + axis]).filter(|&n| n > 0).ok_or_else(|| {
            Error::ir(format!(
                "the kernel {:?} (dilation {dilation:?}) is larger than the padded input {:?} (padding {:?})",
                &w[2..],
                &x[2..],
                geom.padding
            ))
        })?;
        out.push(n);
    }
    Ok(out)
}

/// The output shape of `MaxPool2d`/`AvgPool2d`, with PyTorch's checks.
pub fn pool2d_shape(geom: &Pool2dGeom, x: &[usize]) -> crate::Result<Vec<usize>> {
    let Pool2dGeom { kernel, stride, padding, dilation, .. } = *geom;
    if kernel.contains(&0) || stride.contains(&0) || dilation.contains(&0) {
        return Err(Error::ir(format!(
            "kernel {kernel:?}, stride {stride:?} and dilation {dilation:?} must be positive"
        )));
    }
    if padding[0] > kernel[0] / 2 || padding[1] > kernel[1] / 2 {
        return Err(Error::ir(format!(
            "pad should be at most half of effective kernel size, but got pad={padding:?} and kernel_size={kernel:?}"
        )));
    }
    let mut out = x[..2].to_vec();
    for axis in 0..2 {
        let n = geom.out_size(axis, x[2 + axis]).filter(|&n| n > 0).ok_or_else(|| {
            Error::ir(format!(
                "the window {kernel:?} (dilation {dilation:?}) does not fit the padded input {:?}",
                &x[2..]
            ))
        })?;
        out.push(n);
    }
    Ok(out)
}

/// Infers output types, or says why the inputs do not fit the op.
pub fn infer(op: &Op, inputs: &[&TensorType]) -> crate::Result<Vec<TensorType>> {
    let one = |t: TensorType| Ok(vec![t]);
    match op {
        Op::Placeholder { .. } | Op::Constant { .. } => {
            Err(Error::ir("placeholders and constants get their type from their value, not from inputs"))
        }
        Op::Full { shape, dtype, .. } => {
            arity(inputs, 0, 0)?;
            one(TensorType::new(shape, *dtype))
        }
        Op::RandomMask { shape, p } => {
            arity(inputs, 0, 0)?;
            if !(0.0..1.0).contains(p) {
                return Err(Error::ir(format!("dropout probability must be in [0, 1), got {p}")));
            }
            one(TensorType::new(shape, DType::Bool))
        }
        Op::Unary { .. } => {
            arity(inputs, 1, 1)?;
            want_dtype(inputs[0], "input", FLOATS)?;
            one(inputs[0].clone())
        }
        Op::Binary { .. } => {
            arity(inputs, 2, 2)?;
            let (a, b) = (inputs[0], inputs[1]);
            if a.dtype != b.dtype {
                return Err(Error::ir(format!("operands have different dtypes: {a} and {b}")));
            }
            want_dtype(a, "operands", &[DType::Float32, DType::Float16, DType::Int32])?;
            one(TensorType::new(&broadcast_shapes(&a.shape, &b.shape)?, a.dtype))
        }
        Op::Where => {
            arity(inputs, 3, 3)?;
            want_dtype(inputs[0], "condition", &[DType::Bool])?;
            if inputs[1].dtype != inputs[2].dtype {
                return Err(Error::ir(format!("branches have different dtypes: {} and {}", inputs[1], inputs[2])));
            }
            let s = broadcast_shapes(&broadcast_shapes(&inputs[0].shape, &inputs[1].shape)?, &inputs[2].shape)?;
            one(TensorType::new(&s, inputs[1].dtype))
        }
        Op::Positive => {
            arity(inputs, 1, 1)?;
            one(TensorType::new(&inputs[0].shape, DType::Bool))
        }
        Op::MatMul => {
            arity(inputs, 2, 2)?;
            want_dtype(inputs[0], "left operand", FLOATS)?;
            if inputs[0].dtype != inputs[1].dtype {
                return Err(Error::ir(format!("operands have different dtypes: {} and {}", inputs[0], inputs[1])));
            }
            one(TensorType::new(&matmul_shape(&inputs[0].shape, &inputs[1].shape)?, inputs[0].dtype))
        }
        Op::MatMulTN => {
            arity(inputs, 2, 2)?;
            let (a, b) = (inputs[0], inputs[1]);
            want_dtype(a, "left operand", FLOATS)?;
            if a.dtype != b.dtype {
                return Err(Error::ir(format!("operands have different dtypes: {a} and {b}")));
            }
            if a.rank() != 2 || b.rank() != 2 || a.shape[0] != b.shape[0] {
                return Err(Error::ir(format!("matmul_tn needs a[k,m] and b[k,n] with the same k, got {a} and {b}")));
            }
            one(TensorType::new(&[a.shape[1], b.shape[1]], a.dtype))
        }
        Op::LinearAdd { has_bias } => {
            let n = 3 + *has_bias as usize;
            arity(inputs, n, n)?;
            let out = infer(&Op::Linear { has_bias: *has_bias }, &inputs[..n - 1])?;
            let addend = inputs[n - 1];
            if addend.shape != out[0].shape || addend.dtype != out[0].dtype {
                return Err(Error::ir(format!("the addend must be {} like the product, got {addend}", out[0])));
            }
            Ok(out)
        }
        Op::Linear { has_bias } => {
            arity(inputs, 2 + *has_bias as usize, 2 + *has_bias as usize)?;
            let (x, w) = (inputs[0], inputs[1]);
            want_dtype(x, "input", FLOATS)?;
            if w.rank() != 2 {
                return Err(Error::ir(format!("weight must be 2-D [out, in], got {w}")));
            }
            let last = *x.shape.last().ok_or_else(|| Error::ir("input must have at least 1 dim"))?;
            if last != w.shape[1] {
                return Err(Error::ir(format!(
                    "input {x} has {last} features but the weight {w} expects {} (shapes {:?} and {:?})",
                    w.shape[1], x.shape, w.shape
                )));
            }
            if *has_bias && inputs[2].shape != [w.shape[0]] {
                return Err(Error::ir(format!("bias must be [{}], got {}", w.shape[0], inputs[2])));
            }
            same_dtype_as_input(
                x,
                &[("weight", w)].into_iter().chain(has_bias.then(|| ("bias", inputs[2]))).collect::<Vec<_>>(),
            )?;
            let mut s = x.shape.clone();
            *s.last_mut().unwrap() = w.shape[0];
            one(TensorType::new(&s, x.dtype))
        }
        Op::Conv2d { geom, has_bias } => {
            let n = 2 + *has_bias as usize;
            arity(inputs, n, n)?;
            let (x, w) = (inputs[0], inputs[1]);
            let xs = nchw(x, "input")?;
            let out = conv2d_shape(geom, xs, &w.shape)?;
            if *has_bias && inputs[2].shape != [w.shape[0]] {
                return Err(Error::ir(format!("bias must be [{}], got {}", w.shape[0], inputs[2])));
            }
            let params: Vec<(&str, &TensorType)> =
                [("weight", w)].into_iter().chain(has_bias.then(|| ("bias", inputs[2]))).collect();
            same_dtype_as_input(x, &params)?;
            one(TensorType::new(&out, x.dtype))
        }
        Op::Conv2dGradInput { geom, in_shape } => {
            arity(inputs, 2, 2)?;
            let (w, g) = (inputs[0], inputs[1]);
            if in_shape.len() != 4 || conv2d_shape(geom, in_shape, &w.shape)? != g.shape {
                return Err(Error::ir(format!("gradient {g} does not match a convolution of {in_shape:?} by {w}")));
            }
            one(TensorType::new(in_shape, g.dtype))
        }
        Op::Conv2dGradWeight { geom, weight_shape } => {
            arity(inputs, 2, 2)?;
            let (x, g) = (inputs[0], inputs[1]);
            let xs = nchw(x, "input")?;
            if conv2d_shape(geom, xs, weight_shape)? != g.shape {
                return Err(Error::ir(format!("gradient {g} does not match a convolution of {x} by {weight_shape:?}")));
            }
            one(TensorType::new(weight_shape, g.dtype))
        }
        Op::MaxPool2d { geom } | Op::AvgPool2d { geom, .. } => {
            arity(inputs, 1, 1)?;
            let xs = nchw(inputs[0], "input")?;
            if matches!(op, Op::AvgPool2d { .. }) && geom.dilation != [1, 1] {
                return Err(Error::ir(format!("average pooling has no dilation, got {:?}", geom.dilation)));
            }
            one(TensorType::new(&pool2d_shape(geom, xs)?, inputs[0].dtype))
        }
        Op::AdaptiveAvgPool2d { output } => {
            arity(inputs, 1, 1)?;
            let xs = nchw(inputs[0], "input")?;
            if output.contains(&0) {
                return Err(Error::ir(format!("the output size {output:?} must be positive")));
            }
            one(TensorType::new(&[xs[0], xs[1], output[0], output[1]], inputs[0].dtype))
        }
        Op::MaxPool2dGrad { geom } => {
            arity(inputs, 2, 2)?;
            let xs = nchw(inputs[0], "input")?;
            if pool2d_shape(geom, xs)? != inputs[1].shape {
                return Err(Error::ir(format!("gradient {} does not match pooling {}", inputs[1], inputs[0])));
            }
            one(inputs[0].clone())
        }
        Op::AvgPool2dGrad { geom, in_shape, .. } => {
            arity(inputs, 1, 1)?;
            if in_shape.len() != 4 || pool2d_shape(geom, in_shape)? != inputs[0].shape {
                return Err(Error::ir(format!("gradient {} does not match pooling {in_shape:?}", inputs[0])));
            }
            one(TensorType::new(in_shape, inputs[0].dtype))
        }
        Op::AdaptiveAvgPool2dGrad { in_shape } => {
            arity(inputs, 1, 1)?;
            let g = nchw(inputs[0], "gradient")?;
            if in_shape.len() != 4 || in_shape[..2] != g[..2] {
                return Err(Error::ir(format!("gradient {} does not match pooling {in_shape:?}", inputs[0])));
            }
            one(TensorType::new(in_shape, inputs[0].dtype))
        }
        Op::SpMM { n_rows, n_cols } => {
            arity(inputs, 4, 4)?;
            want_dtype(inputs[0], "indptr", &[DType::Int32])?;
            want_dtype(inputs[1], "indices", &[DType::Int32])?;
            want_dtype(inputs[2], "values", &[DType::Float32])?;
            if inputs[0].shape != [n_rows + 1] {
                return Err(Error::ir(format!("indptr must be [{}], got {}", n_rows + 1, inputs[0])));
            }
            if inputs[1].rank() != 1 || inputs[1].shape != inputs[2].shape {
                return Err(Error::ir(format!(
                    "indices {} and values {} must be 1-D of equal length",
                    inputs[1], inputs[2]
                )));
            }
            let d = inputs[3];
            if d.rank() != 2 || d.shape[0] != *n_cols {
                return Err(Error::ir(format!(
                    "dense operand must be [{n_cols}, F] for a {n_rows}x{n_cols} sparse matrix, got {d}"
                )));
            }
            one(TensorType::new(&[*n_rows, d.shape[1]], d.dtype))
        }
        Op::Reduce { dims, keepdim, .. } => {
            arity(inputs, 1, 1)?;
            want_dtype(inputs[0], "input", FLOATS)?;
            for &d in dims {
                check_dim(d, inputs[0].rank())?;
            }
            one(TensorType::new(&reduced_shape(&inputs[0].shape, dims, *keepdim), inputs[0].dtype))
        }
        Op::Max { dim, keepdim } | Op::ArgMax { dim, keepdim } => {
            arity(inputs, 1, 1)?;
            check_dim(*dim, inputs[0].rank())?;
            if inputs[0].shape[*dim] == 0 {
                return Err(Error::ir(format!("cannot take the max over an empty dim {dim}")));
            }
            let dtype = if matches!(op, Op::ArgMax { .. }) { DType::Int32 } else { inputs[0].dtype };
            one(TensorType::new(&reduced_shape(&inputs[0].shape, &[*dim], *keepdim), dtype))
        }
        Op::Softmax { dim } | Op::LogSoftmax { dim } => {
            arity(inputs, 1, 1)?;
            want_dtype(inputs[0], "input", FLOATS)?;
            check_dim(*dim, inputs[0].rank())?;
            one(inputs[0].clone())
        }
        Op::LayerNorm { normalized_ndim, affine, .. } => {
            let n = if *affine { 3 } else { 1 };
            arity(inputs, n, n)?;
            let x = inputs[0];
            want_dtype(x, "input", FLOATS)?;
            if *normalized_ndim == 0 || *normalized_ndim > x.rank() {
                return Err(Error::ir(format!("cannot normalise the last {normalized_ndim} dims of {x}")));
            }
            let norm_shape = &x.shape[x.rank() - normalized_ndim..];
            if *affine {
                for (what, t) in [("weight", inputs[1]), ("bias", inputs[2])] {
                    if t.shape != norm_shape {
                        return Err(Error::ir(format!(
                            "{what} must have the normalised shape {norm_shape:?}, got {t}"
                        )));
                    }
                }
                same_dtype_as_input(x, &[("weight", inputs[1]), ("bias", inputs[2])])?;
            }
            one(x.clone())
        }
        Op::BatchNorm { affine, .. } => {
            let n = if *affine { 3 } else { 1 };
            arity(inputs, n, n)?;
            let x = inputs[0];
            want_dtype(x, "input", FLOATS)?;
            if x.rank() < 2 {
                return Err(Error::ir(format!("batch norm needs an input [N, C, …] of at least 2 dims, got {x}")));
            }
            let c = x.shape[1];
            if x.numel() / c.max(1) <= 1 {
                return Err(Error::ir(format!(
                    "Expected more than 1 value per channel when training, got input size {:?}",
                    x.shape
                )));
            }
            if *affine {
                for (what, t) in [("weight", inputs[1]), ("bias", inputs[2])] {
                    if t.shape != [c] {
                        return Err(Error::ir(format!("{what} must be [{c}] (one per channel), got {t}")));
                    }
                }
                same_dtype_as_input(x, &[("weight", inputs[1]), ("bias", inputs[2])])?;
            }
            let stat = TensorType::new(&[c], x.dtype);
            Ok(vec![x.clone(), stat.clone(), stat])
        }
        Op::BatchNormGrad { affine, .. } => {
            let n = if *affine { 3 } else { 2 };
            arity(inputs, n, n)?;
            let (x, g) = (inputs[0], inputs[n - 1]);
            if x.rank() < 2 || g.shape != x.shape {
                return Err(Error::ir(format!("gradient {g} must have the input's shape {x}")));
            }
            let mut out = vec![x.clone()];
            if *affine {
                out.push(TensorType::new(&[x.shape[1]], x.dtype));
                out.push(TensorType::new(&[x.shape[1]], x.dtype));
            }
            Ok(out)
        }
        Op::Dropout { p } => {
            arity(inputs, 2, 2)?;
            want_dtype(inputs[0], "input", FLOATS)?;
            want_dtype(inputs[1], "mask", &[DType::Bool])?;
            if !(0.0..1.0).contains(p) {
                return Err(Error::ir(format!("dropout probability must be in [0, 1), got {p}")));
            }
            if inputs[0].shape != inputs[1].shape {
                return Err(Error::ir(format!("mask {} must have the input's shape {}", inputs[1], inputs[0])));
            }
            one(inputs[0].clone())
        }
        Op::CrossEntropy { reduction, class_weight, has_mask, label_smoothing, .. } => {
            if !(0.0..=1.0).contains(label_smoothing) {
                return Err(Error::ir(format!("label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")));
            }
            let n = 2 + *has_mask as usize;
            arity(inputs, n, n)?;
            let (logits, target) = (inputs[0], inputs[1]);
            want_dtype(logits, "logits", FLOATS)?;
            want_dtype(target, "target", &[DType::Int32])?;
            if logits.rank() != 2 {
                return Err(Error::ir(format!("logits must be [N, C], got {logits}")));
            }
            if target.shape != [logits.shape[0]] {
                return Err(Error::ir(format!("target must be [{}], got {target}", logits.shape[0])));
            }
            if *has_mask && inputs[2].shape != [logits.shape[0]] {
                return Err(Error::ir(format!("node mask must be [{}], got {}", logits.shape[0], inputs[2])));
            }
            if *has_mask {
                want_dtype(inputs[2], "node mask", &[DType::Bool])?;
            }
            if let Some(w) = class_weight {
                if w.len() != logits.shape[1] {
                    return Err(Error::ir(format!(
                        "class_weight has {} entries for {} classes",
                        w.len(),
                        logits.shape[1]
                    )));
                }
            }
            let s = if *reduction == Reduction::None { vec![logits.shape[0]] } else { vec![] };
            one(TensorType::new(&s, logits.dtype))
        }
        Op::IdentityLoss { reduction } => {
            arity(inputs, 1, 1)?;
            want_dtype(inputs[0], "loss", FLOATS)?;
            let s = if *reduction == Reduction::None { inputs[0].shape.clone() } else { vec![] };
            one(TensorType::new(&s, inputs[0].dtype))
        }
        Op::Reshape { shape } => {
            arity(inputs, 1, 1)?;
            if shape.iter().product::<usize>() != inputs[0].numel() {
                return Err(Error::ir(format!(
                    "cannot reshape {} ({} elements) to {shape:?}",
                    inputs[0],
                    inputs[0].numel()
                )));
            }
            one(TensorType::new(shape, inputs[0].dtype))
        }
        Op::Permute { dims } => {
            arity(inputs, 1, 1)?;
            let r = inputs[0].rank();
            let mut seen = vec![false; r];
            if dims.len() != r || dims.iter().any(|&d| d >= r || std::mem::replace(&mut seen[d], true)) {
                return Err(Error::ir(format!("{dims:?} is not a permutation of the {r} dims of {}", inputs[0])));
            }
            let s: Vec<usize> = dims.iter().map(|&d| inputs[0].shape[d]).collect();
            one(TensorType::new(&s, inputs[0].dtype))
        }
        Op::Concat { dim } => {
            if inputs.is_empty() {
                return Err(Error::ir("concat needs at least one input"));
            }
            let first = inputs[0];
            check_dim(*dim, first.rank())?;
            let mut s = first.shape.clone();
            s[*dim] = 0;
            for t in inputs {
                if t.dtype != first.dtype || t.rank() != first.rank() {
                    return Err(Error::ir(format!("cannot concat {first} with {t}")));
                }
                for (i, (&a, &b)) in first.shape.iter().zip(&t.shape).enumerate() {
                    if i != *dim && a != b {
                        return Err(Error::ir(format!(
                            "cannot concat {first} with {t} along dim {dim}: dim {i} differs"
                        )));
                    }
                }
                s[*dim] += t.shape[*dim];
            }
            one(TensorType::new(&s, first.dtype))
        }
        Op::Split { sizes, dim } => {
            arity(inputs, 1, 1)?;
            let x = inputs[0];
            check_dim(*dim, x.rank())?;
            if sizes.iter().sum::<usize>() != x.shape[*dim] {
                return Err(Error::ir(format!("split sizes {sizes:?} do not add up to dim {dim} of {x}")));
            }
            Ok(sizes
                .iter()
                .map(|&n| {
                    let mut s = x.shape.clone();
                    s[*dim] = n;
                    TensorType::new(&s, x.dtype)
                })
                .collect())
        }
        Op::Slice { dim, start, end, step } => {
            arity(inputs, 1, 1)?;
            let x = inputs[0];
            check_dim(*dim, x.rank())?;
            if *step == 0 || start > end || *end > x.shape[*dim] {
                return Err(Error::ir(format!("slice {start}:{end}:{step} is invalid for dim {dim} of {x}")));
            }
            let mut s = x.shape.clone();
            s[*dim] = (end - start).div_ceil(*step);
            one(TensorType::new(&s, x.dtype))
        }
        Op::DynamicSlice { dim, size } => {
            arity(inputs, 2, 2)?;
            let x = inputs[0];
            check_dim(*dim, x.rank())?;
            want_dtype(inputs[1], "start", &[DType::Int32])?;
            if inputs[1].shape.iter().product::<usize>() != 1 || inputs[1].rank() > 1 {
                return Err(Error::ir(format!("the start must be an int32 scalar or [1], got {}", inputs[1])));
            }
            if *size == 0 || *size > x.shape[*dim] {
                return Err(Error::ir(format!("a dynamic slice of size {size} does not fit dim {dim} of {x}")));
            }
            let mut s = x.shape.clone();
            s[*dim] = *size;
            one(TensorType::new(&s, x.dtype))
        }
        Op::IndexSelect { dim } => {
            arity(inputs, 2, 2)?;
            check_dim(*dim, inputs[0].rank())?;
            want_dtype(inputs[1], "index", &[DType::Int32])?;
            if inputs[1].rank() != 1 {
                return Err(Error::ir(format!("index must be 1-D, got {}", inputs[1])));
            }
            let mut s = inputs[0].shape.clone();
            s[*dim] = inputs[1].shape[0];
            one(TensorType::new(&s, inputs[0].dtype))
        }
        Op::Gather { dim } => {
            arity(inputs, 2, 2)?;
            check_dim(*dim, inputs[0].rank())?;
            want_dtype(inputs[1], "index", &[DType::Int32])?;
            if inputs[1].rank() != inputs[0].rank() {
                return Err(Error::ir(format!("index {} must have the rank of the input {}", inputs[1], inputs[0])));
            }
            for (i, (&a, &b)) in inputs[1].shape.iter().zip(&inputs[0].shape).enumerate() {
                if i != *dim && a > b {
                    return Err(Error::ir(format!(
                        "index {} is larger than the input {} in dim {i}",
                        inputs[1], inputs[0]
                    )));
                }
            }
            one(TensorType::new(&inputs[1].shape, inputs[0].dtype))
        }
        Op::OneHot { num_classes } => {
            arity(inputs, 1, 1)?;
            want_dtype(inputs[0], "input", &[DType::Int32])?;
            if *num_classes == 0 {
                return Err(Error::ir("num_classes must be positive"));
            }
            let mut s = inputs[0].shape.clone();
            s.push(*num_classes);
            one(TensorType::new(&s, DType::Int32))
        }
        Op::Cast { dtype } => {
            arity(inputs, 1, 1)?;
            one(TensorType::new(&inputs[0].shape, *dtype))
        }
        Op::BroadcastTo { shape } => {
            arity(inputs, 1, 1)?;
            if &broadcast_shapes(&inputs[0].shape, shape)? != shape {
                return Err(Error::ir(format!("cannot broadcast {} to {shape:?}", inputs[0])));
            }
            one(TensorType::new(shape, inputs[0].dtype))
        }
        Op::ScatterAdd { dim_size } | Op::ScatterMean { dim_size } => {
            arity(inputs, 2, 2)?;
            let (src, idx) = (inputs[0], inputs[1]);
            want_dtype(src, "source", FLOATS)?;
            want_dtype(idx, "index", &[DType::Int32])?;
            if src.rank() == 0 || idx.shape != [src.shape[0]] {
                return Err(Error::ir(format!(
                    "index must be [{}] to match the source {src}, got {idx}",
                    src.shape.first().unwrap_or(&0)
                )));
            }
            let mut s = src.shape.clone();
            s[0] = *dim_size;
            one(TensorType::new(&s, src.dtype))
        }
        Op::BufferUpdate { .. } | Op::OptimizerUpdate { .. } => {
            arity(inputs, 1, 1)?;
            Ok(vec![])
        }
        Op::SumTo { shape } => {
            arity(inputs, 1, 1)?;
            if broadcast_shapes(shape, &inputs[0].shape)? != inputs[0].shape {
                return Err(Error::ir(format!("cannot sum {} down to {shape:?}", inputs[0])));
            }
            one(TensorType::new(shape, inputs[0].dtype))
        }
        Op::UnaryGrad { .. } => {
            arity(inputs, 2, 2)?;
            one(inputs[1].clone())
        }
        Op::PowGrad => {
            arity(inputs, 3, 3)?;
            Ok(vec![inputs[2].clone(), inputs[2].clone()])
        }
        Op::MaxGrad { .. } => {
            arity(inputs, 2, 2)?;
            one(inputs[0].clone())
        }
        Op::SoftmaxGrad { .. } | Op::LogSoftmaxGrad { .. } => {
            arity(inputs, 2, 2)?;
            one(inputs[0].clone())
        }
        Op::LayerNormGrad { normalized_ndim, affine, .. } => {
            let n = if *affine { 3 } else { 2 };
            arity(inputs, n, n)?;
            let x = inputs[0];
            let mut out = vec![x.clone()];
            if *affine {
                let ns = &x.shape[x.rank() - normalized_ndim..];
                out.push(TensorType::new(ns, x.dtype));
                out.push(TensorType::new(ns, x.dtype));
            }
            Ok(out)
        }
        Op::CrossEntropyGrad { has_mask, .. } => {
            let n = 3 + *has_mask as usize;
            arity(inputs, n, n)?;
            one(inputs[0].clone())
        }
        Op::SliceGrad { in_shape, .. } => {
            arity(inputs, 1, 1)?;
            one(TensorType::new(in_shape, inputs[0].dtype))
        }
        Op::DynamicSliceGrad { in_shape, dim, size } => {
            arity(inputs, 2, 2)?;
            check_dim(*dim, in_shape.len())?;
            want_dtype(inputs[1], "start", &[DType::Int32])?;
            let mut want = in_shape.clone();
            want[*dim] = *size;
            if inputs[0].shape != want || *size > in_shape[*dim] {
                return Err(Error::ir(format!(
                    "gradient {} does not match a slice {want:?} of {in_shape:?}",
                    inputs[0]
                )));
            }
            one(TensorType::new(in_shape, inputs[0].dtype))
        }
        Op::IndexAdd { dim, dim_size } => {
            arity(inputs, 2, 2)?;
            let mut s = inputs[0].shape.clone();
            check_dim(*dim, s.len())?;
            s[*dim] = *dim_size;
            one(TensorType::new(&s, inputs[0].dtype))
        }
        Op::GatherGrad { in_shape, .. } => {
            arity(inputs, 2, 2)?;
            one(TensorType::new(in_shape, inputs[0].dtype))
        }
        Op::ScatterMeanGrad { .. } => {
            arity(inputs, 2, 2)?;
            let mut s = inputs[1].shape.clone();
            s[0] = inputs[0].shape[0];
            one(TensorType::new(&s, inputs[1].dtype))
        }
        Op::SpMMTransposed { n_cols, .. } => {
            arity(inputs, 4, 4)?;
            one(TensorType::new(&[*n_cols, inputs[3].shape[1]], inputs[3].dtype))
        }
        Op::SpMMValuesGrad { .. } => {
            arity(inputs, 4, 4)?;
            one(TensorType::new(&inputs[1].shape, inputs[3].dtype))
        }
        Op::Call { region } => {
            let g = &region.forward;
            let ins = g.placeholders(super::op::InputKind::Input);
            if ins.len() != inputs.len() {
                return Err(Error::ir(format!(
                    "region '{}' takes {} inputs, got {}",
                    region.name,
                    ins.len(),
                    inputs.len()
                )));
            }
            for ((name, v), t) in ins.iter().zip(inputs) {
                if g.ty(*v) != *t {
                    return Err(Error::ir(format!(
                        "region '{}' input '{name}' is {} but got {t}",
                        region.name,
                        g.ty(*v)
                    )));
                }
            }
            Ok(g.outputs.iter().map(|&v| g.ty(v).clone()).collect())
        }
        Op::InvertibleBackward { region, needs_grad, .. } => {
            // (y, g_y, others…) → (x, g_i for inputs with needs_grad)
            let g = &region.forward;
            let ins = g.placeholders(super::op::InputKind::Input);
            if inputs.len() != ins.len() + 1 || needs_grad.len() != ins.len() {
                return Err(Error::ir(format!(
                    "invertible backward of '{}' takes {} inputs and {} grad flags, got {} and {}",
                    region.name,
                    ins.len() + 1,
                    ins.len(),
                    inputs.len(),
                    needs_grad.len()
                )));
            }
            let mut out = vec![g.ty(ins[0].1).clone()];
            out.extend(ins.iter().zip(needs_grad).filter(|(_, &n)| n).map(|((_, v), _)| g.ty(*v).clone()));
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_padding_same_is_pytorchs() {
        use crate::ir::Conv2dGeom;
        // PyTorch: d(k - 1)/2 before, the rest after; stride 1 only.
        assert_eq!(Conv2dGeom::same_padding([3, 1], [1, 1], [1, 1]).unwrap(), ([1, 0], [0, 0]));
        assert_eq!(Conv2dGeom::same_padding([5, 3], [1, 1], [2, 3]).unwrap(), ([4, 3], [0, 0]));
        assert_eq!(Conv2dGeom::same_padding([2, 4], [1, 1], [1, 1]).unwrap(), ([0, 1], [1, 1]));
        assert_eq!(Conv2dGeom::same_padding([2, 3], [1, 1], [3, 1]).unwrap(), ([1, 1], [1, 0]));
        let e = Conv2dGeom::same_padding([3, 3], [2, 1], [1, 1]).unwrap_err().to_string();
        assert!(e.contains("padding='same' is not supported for strided convolutions"), "{e}");
    }
    use crate::ir::op::*;

    #[test]
    fn broadcasting_rules() {
        assert_eq!(broadcast_shapes(&[2, 3], &[3]).unwrap(), vec![2, 3]);
        assert_eq!(broadcast_shapes(&[4, 1], &[1, 5]).unwrap(), vec![4, 5]);
        assert_eq!(broadcast_shapes(&[2, 1, 3], &[4, 3]).unwrap(), vec![2, 4, 3]);
        assert_eq!(broadcast_shapes(&[], &[2]).unwrap(), vec![2]);
        assert!(broadcast_shapes(&[2, 3], &[4]).unwrap_err().to_string().contains("cannot be broadcast"));
    }

    #[test]
    fn matmul_shapes() {
        assert_eq!(matmul_shape(&[2, 3], &[3, 4]).unwrap(), vec![2, 4]);
        assert_eq!(matmul_shape(&[5, 2, 3], &[3, 4]).unwrap(), vec![5, 2, 4]);
        assert_eq!(matmul_shape(&[3], &[3, 4]).unwrap(), vec![4]);
        assert_eq!(matmul_shape(&[2, 3], &[3]).unwrap(), vec![2]);
        assert!(matmul_shape(&[2, 3], &[4, 4]).unwrap_err().to_string().contains("inner sizes 3 and 4"));
    }

    #[test]
    fn linear_mismatch_names_both_shapes() {
        let x = TensorType::f32(&[2, 5]);
        let w = TensorType::f32(&[8, 4]);
        let e = infer(&Op::Linear { has_bias: false }, &[&x, &w]).unwrap_err().to_string();
        assert!(e.contains("[2, 5]") && e.contains("[8, 4]"), "{e}");
    }

    #[test]
    fn a_modules_parameters_must_have_its_inputs_dtype() {
        // PyTorch: F.linear / F.layer_norm of a float32 input with float16 parameters raises.
        let (x32, x16) = (TensorType::f32(&[2, 4]), TensorType::new(&[2, 4], DType::Float16));
        let (w16, b16) = (TensorType::new(&[8, 4], DType::Float16), TensorType::new(&[8], DType::Float16));
        let e = infer(&Op::Linear { has_bias: true }, &[&x32, &w16, &b16]).unwrap_err().to_string();
        assert!(e.contains("different dtypes") && e.contains("f32[2,4]") && e.contains("f16[8,4]"), "{e}");
        assert_eq!(infer(&Op::Linear { has_bias: true }, &[&x16, &w16, &b16]).unwrap()[0].dtype, DType::Float16);
        let e = infer(&Op::Linear { has_bias: true }, &[&x16, &w16, &TensorType::f32(&[8])]).unwrap_err().to_string();
        assert!(e.contains("the bias f32[8]"), "{e}");
        let (g16, g32) = (TensorType::new(&[4], DType::Float16), TensorType::f32(&[4]));
        let ln = Op::LayerNorm { normalized_ndim: 1, affine: true, eps: 1e-5 };
        assert!(infer(&ln, &[&x32, &g16, &g16]).unwrap_err().to_string().contains("the weight f16[4]"));
        assert!(infer(&ln, &[&x16, &g16, &g32]).unwrap_err().to_string().contains("the bias f32[4]"));
        assert_eq!(infer(&ln, &[&x16, &g16, &g16]).unwrap()[0].dtype, DType::Float16);
    }

    #[test]
    fn reductions_and_splits() {
        let x = TensorType::f32(&[2, 3, 4]);
        let r = infer(&Op::Reduce { kind: ReduceKind::Sum, dims: vec![1], keepdim: true }, &[&x]).unwrap();
        assert_eq!(r[0].shape, vec![2, 1, 4]);
        let r = infer(&Op::Reduce { kind: ReduceKind::Mean, dims: vec![], keepdim: false }, &[&x]).unwrap();
        assert_eq!(r[0].shape, Vec::<usize>::new());
        let r = infer(&Op::Split { sizes: vec![3, 1], dim: 2 }, &[&x]).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].shape, vec![2, 3, 1]);
        let r = infer(&Op::Slice { dim: 2, start: 1, end: 4, step: 2 }, &[&x]).unwrap();
        assert_eq!(r[0].shape, vec![2, 3, 2]);
    }
}
