//! The closed set of operations a graph is made of.
//!
//! Like jaxpr, the set is small and every op has exact semantics (PyTorch's, unless noted).
//! Ops in the "backward" group are produced by autograd only; the tracer never records them.
//! Broadcasting follows NumPy/PyTorch rules everywhere.

use crate::tensor::{DType, Tensor};
use serde::{Deserialize, Serialize};
use std::rc::Rc;

/// Elementwise functions of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryKind {
    Neg,
    Exp,
    Log,
    Sqrt,
    Relu,
    /// GELU with the exact erf form.
    Gelu,
    /// GELU with the tanh approximation.
    GeluTanh,
    Tanh,
    Sigmoid,
}

/// Elementwise functions of two broadcast tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryKind {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
}

/// Reductions for `Reduce`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReduceKind {
    Sum,
    Mean,
}

/// How a loss reduces its per-element values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reduction {
    Mean,
    Sum,
    None,
}

/// Where a graph input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// A model input fed on every call.
    Input,
    /// A trainable parameter held by the executor.
    Parameter,
    /// A persistent buffer held by the executor (may be updated in place).
    Buffer,
}

/// Hyper-parameters of one optimizer update, with PyTorch's semantics (see
/// [`crate::kernels::optim`] for the formulas). `*_dtype` fields say how the optimizer state
/// is stored (float32, or float16: rounded to half after every update, as PopART keeps
/// `accum_type` state tensors); the arithmetic is float32 either way.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OptimizerStep {
    /// torch.optim.SGD: `d = g + wd·p`; with momentum `v = m·v + (1−dampening)·d` (the
    /// first step `v = d`), `d = nesterov ? d + m·v : v`; `p −= lr·d`. The velocity is
    /// stored multiplied by `velocity_scaling` (PopTorch's combined variant; 1 otherwise).
    Sgd {
        lr: f32,
        momentum: f32,
        dampening: f32,
        weight_decay: f32,
        nesterov: bool,
        velocity_scaling: f32,
        velocity_dtype: DType,
    },
    /// Adam (coupled L2 weight decay) or AdamW (`decoupled`: `p *= 1 − lr·wd`), with or
    /// without bias correction.
    Adam {
        lr: f32,
        beta1: f32,
        beta2: f32,
        eps: f32,
        weight_decay: f32,
        decoupled: bool,
        bias_correction: bool,
        first_order_dtype: DType,
        second_order_dtype: DType,
    },
    /// torch.optim.RMSprop (L2 weight decay, optional momentum, optionally centred).
    /// `first_order_dtype` stores the squared-gradient average, `second_order_dtype` the
    /// centred gradient average (PopART's accl1 and accl2).
    RmsProp {
        lr: f32,
        alpha: f32,
        eps: f32,
        weight_decay: f32,
        momentum: f32,
        centered: bool,
        first_order_dtype: DType,
        second_order_dtype: DType,
    },
    /// LAMB (You et al. 2019, as PopTorch's `optim.LAMB`): Adam moments, update
    /// `u = m̂/(√v̂ + eps) + wd·p`, trust ratio `min(‖p‖, max_weight_norm)/‖u‖` (1 when either
    /// norm is 0), `p −= lr·trust·u`.
    Lamb {
        lr: f32,
        beta1: f32,
        beta2: f32,
        eps: f32,
        weight_decay: f32,
        bias_correction: bool,
        max_weight_norm: f32,
        first_order_dtype: DType,
        second_order_dtype: DType,
    },
}

impl OptimizerStep {
    /// Plain PyTorch SGD (no dampening, no Nesterov, float32 state).
    pub fn sgd(lr: f32, momentum: f32, weight_decay: f32) -> OptimizerStep {
        OptimizerStep::Sgd {
            lr,
            momentum,
            dampening: 0.0,
            weight_decay,
            nesterov: false,
            velocity_scaling: 1.0,
            velocity_dtype: DType::Float32,
        }
    }

    /// PyTorch Adam (`decoupled == false`) or AdamW, bias-corrected, float32 state.
    pub fn adam(lr: f32, beta1: f32, beta2: f32, eps: f32, weight_decay: f32, decoupled: bool) -> OptimizerStep {
        OptimizerStep::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            bias_correction: true,
            first_order_dtype: DType::Float32,
            second_order_dtype: DType::Float32,
        }
    }

    /// The learning rate.
    pub fn lr(&self) -> f32 {
        match self {
            OptimizerStep::Sgd { lr, .. }
            | OptimizerStep::Adam { lr, .. }
            | OptimizerStep::RmsProp { lr, .. }
            | OptimizerStep::Lamb { lr, .. } => *lr,
        }
    }
}

/// The geometry of a 2-D convolution over NCHW tensors (PyTorch's `nn.Conv2d` arguments):
/// per spatial dim `(H, W)` a stride, a zero padding on both sides and a dilation, and the
/// number of channel groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Conv2dGeom {
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
}

impl Conv2dGeom {
    /// PyTorch's `padding='same'`: the padding that keeps each spatial size, `d(k−1)/2`
    /// before each spatial dim and the rest, `d(k−1) − d(k−1)/2`, after: where the dilated
    /// kernel's span is even (`d(k−1)` odd) one more row or column goes after than before,
    /// as PyTorch pads (`_convolution_mode`). Returns the symmetric part (the convolution's
    /// own padding) and the extra rows/columns after (0 or 1 per dim), which the caller
    /// pads with zeros first. As in PyTorch, only for stride 1 ("padding='same' is not
    /// supported for strided convolutions").
    pub fn same_padding(
        kernel: [usize; 2],
        stride: [usize; 2],
        dilation: [usize; 2],
    ) -> crate::Result<([usize; 2], [usize; 2])> {
        if stride != [1, 1] {
            return Err(crate::Error::ir(format!(
                "padding='same' is not supported for strided convolutions (stride {stride:?})"
            )));
        }
        let (mut pad, mut extra) = ([0; 2], [0; 2]);
        for axis in 0..2 {
            let total = dilation[axis] * kernel[axis].saturating_sub(1);
            pad[axis] = total / 2;
            extra[axis] = total % 2;
        }
        Ok((pad, extra))
    }

    /// The output size of one spatial dim: `⌊(in + 2p − d(k−1) − 1)/s⌋ + 1`, or `None`
    /// when the dilated kernel does not fit the padded input.
    pub fn out_size(&self, axis: usize, input: usize, kernel: usize) -> Option<usize> {
        let span = self.dilation[axis] * (kernel.checked_sub(1)?) + 1;
        let padded = input + 2 * self.padding[axis];
        (padded >= span).then(|| (padded - span) / self.stride[axis] + 1)
    }
}

/// The window of a 2-D pooling over NCHW tensors (PyTorch's `MaxPool2d`/`AvgPool2d`
/// arguments); `dilation` is 1 for average pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pool2dGeom {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub ceil_mode: bool,
}

impl Pool2dGeom {
    /// PyTorch's `pooling_output_shape`: `⌊ or ⌈(in + 2p − d(k−1) − 1)/s⌉ + 1`, and with
    /// `ceil_mode` a last window that would start in the right padding is dropped. `None`
    /// when no window fits.
    pub fn out_size(&self, axis: usize, input: usize) -> Option<usize> {
        let (k, s, p, d) = (self.kernel[axis], self.stride[axis], self.padding[axis], self.dilation[axis]);
        let span = d * k.checked_sub(1)? + 1;
        let padded = input + 2 * p;
        if padded < span {
            return None;
        }
        let num = padded - span;
        let mut out = if self.ceil_mode { num.div_ceil(s) } else { num / s } + 1;
        if self.ceil_mode && (out - 1) * s >= input + p {
            out -= 1;
        }
        Some(out)
    }
}

/// An operation. Inputs are listed per variant as `(a, b, …)`; attributes are the fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    // ---- graph inputs (no inputs) ----
    /// A named graph input: model input, parameter or buffer.
    Placeholder { kind: InputKind, name: String },
    /// A tensor frozen into the graph (a captured tensor or a literal).
    Constant {
        #[serde(skip)]
        value: Rc<Tensor>,
        name: String,
    },
    /// A tensor filled with one value.
    Full { shape: Vec<usize>, dtype: DType, value: f64 },
    /// A fresh random bool mask on every run, true with probability `1 - p` (dropout's keep
    /// mask), drawn from the executor's seeded generator.
    RandomMask { shape: Vec<usize>, p: f32 },

    // ---- elementwise ----
    /// `f(a)`, same shape and dtype.
    Unary { kind: UnaryKind },
    /// `f(a, b)` with broadcasting; both operands have the same dtype.
    Binary { kind: BinaryKind },
    /// `(cond: bool, a, b)` → `cond ? a : b`, all broadcast.
    Where,
    /// `(a)` → `a > 0` as bool. Used by autograd and masks.
    Positive,

    // ---- linear algebra ----
    /// `(a, b)` → torch.matmul(a, b): 1-D and batched operands, batch dims broadcast.
    MatMul,
    /// `(a[k,m], b[k,n])` → `aᵀ @ b`, `[m,n]`: a Linear's weight gradient `gᵀ @ x` without
    /// materialising the transpose (what torch gets from `grad.t().mm(x)` on a view).
    MatMulTN,
    /// `(x, weight[out,in], bias[out]?)` → `x @ weight^T + bias` over the last dim of x.
    Linear { has_bias: bool },
    /// `(x, weight[out,in], bias[out]?, addend)` → `x @ weight^T + bias + addend`, addend of
    /// the output's shape (torch's `addmm`). Never traced: `exec::fuse` makes it from an
    /// `Add` whose operand is a `Linear` used nowhere else, saving a pass over the output.
    LinearAdd { has_bias: bool },
    /// `(indptr i32[n+1], indices i32[nnz], values f32[nnz], dense[m,f])` → CSR(n×m) @ dense, [n,f].
    SpMM { n_rows: usize, n_cols: usize },

    /// `(x[N,C,H,W], weight[O,C/groups,kh,kw], bias[O]?)` → torch.nn.functional.conv2d,
    /// `[N,O,H',W']`.
    Conv2d { geom: Conv2dGeom, has_bias: bool },

    // ---- pooling ----
    /// `(x[N,C,H,W])` → the maximum of each window (padding is −∞), `[N,C,H',W']`.
    MaxPool2d { geom: Pool2dGeom },
    /// `(x[N,C,H,W])` → the mean of each window; `count_include_pad` divides by the whole
    /// window (padding counted as zeros) instead of the elements inside the input.
    AvgPool2d { geom: Pool2dGeom, count_include_pad: bool },
    /// `(x[N,C,H,W])` → `[N,C,oh,ow]`, output `i` the mean of input rows
    /// `⌊i·H/oh⌋ .. ⌈(i+1)·H/oh⌉` (likewise columns), as torch's adaptive_avg_pool2d.
    AdaptiveAvgPool2d { output: [usize; 2] },

    // ---- reductions ----
    /// Sum or mean over `dims` (empty = all dims).
    Reduce { kind: ReduceKind, dims: Vec<usize>, keepdim: bool },
    /// Maximum values over `dim` (gradient flows to the first maximal element).
    Max { dim: usize, keepdim: bool },
    /// Index of the first maximal element over `dim`, as int32.
    ArgMax { dim: usize, keepdim: bool },
    /// Softmax over `dim`.
    Softmax { dim: usize },
    /// Log-softmax over `dim`.
    LogSoftmax { dim: usize },

    // ---- normalisation, regularisation, losses ----
    /// `(x, weight?, bias?)`: normalise over the last `normalized_ndim` dims.
    LayerNorm { normalized_ndim: usize, eps: f32, affine: bool },
    /// Training-mode batch norm over dim 1 of `x[N, C, …]` (PyTorch's `F.batch_norm` with
    /// `training=True`): `(x, weight[C]?, bias[C]?)` → `(y, mean[C], var[C])`, y normalised
    /// with the batch mean and biased variance; `var` is the unbiased batch variance (what
    /// the running statistics are updated with). Only `y` has a gradient.
    BatchNorm { eps: f32, affine: bool },
    /// `(x, mask: bool)` → `mask ? x / (1-p) : 0`. The mask is an explicit input.
    Dropout { p: f32 },
    /// `(logits[N,C], target i32[N], node_mask bool[N]?)`: softmax cross-entropy over the
    /// rows kept by the mask and whose target is not `ignore_index`, weighted per class when
    /// `class_weight` is given, with PyTorch's `label_smoothing` (the target mixed with the
    /// uniform distribution over the C classes).
    CrossEntropy {
        reduction: Reduction,
        class_weight: Option<Vec<f32>>,
        has_mask: bool,
        ignore_index: Option<i32>,
        label_smoothing: f32,
    },
    /// Marks the final loss; `sum`/`mean` reduce it to a scalar, `none` passes it through.
    IdentityLoss { reduction: Reduction },

    // ---- shape ops ----
    /// Same elements, new shape (no -1 left: the tracer resolves it).
    Reshape { shape: Vec<usize> },
    /// Reorders dims: output dim i is input dim `dims[i]`.
    Permute { dims: Vec<usize> },
    /// `(a, b, …)` joined along `dim`.
    Concat { dim: usize },
    /// One input, several outputs of `sizes` along `dim` (chunk and split).
    Split { sizes: Vec<usize>, dim: usize },
    /// Elements `start, start+step, …` below `end` along `dim`.
    Slice { dim: usize, start: usize, end: usize, step: usize },
    /// `(x, start i32[] or i32[1])` → `size` entries of `dim` from `start`, wrapping round
    /// past the end (PopART's DynamicSlice: the start is read as an unsigned 32-bit integer,
    /// taken modulo the dim's length, and entry `j` is `(start + j) mod len`). PopTorch
    /// makes it from a slice `t[x:x+size]` whose start is a tensor.
    DynamicSlice { dim: usize, size: usize },
    /// `(x, index i32[k])` → x with dim `dim` replaced by the `k` selected entries.
    IndexSelect { dim: usize },
    /// `(x, index i32)` → torch.gather(x, dim, index).
    Gather { dim: usize },
    /// Converts to `dtype`.
    Cast { dtype: DType },
    /// Broadcasts to `shape`.
    BroadcastTo { shape: Vec<usize> },

    // ---- graph (message passing) ops ----
    /// `(src[E,…], index i32[E])` → out[dim_size,…], `out[index[e]] += src[e]`.
    ScatterAdd { dim_size: usize },
    /// Like `ScatterAdd` but the mean per target row (0 where nothing arrives).
    ScatterMean { dim_size: usize },

    // ---- state ----
    /// `(value)`: writes `value` into buffer `name` in place (PyTorch `copy_`); no output.
    BufferUpdate { name: String },

    // ---- backward (produced by autograd only) ----
    /// `(g)` → sum of `g` down to `shape` (undoes broadcasting).
    SumTo { shape: Vec<usize> },
    /// `(x, g)` → `g * f'(x)` for the unary `kind`.
    UnaryGrad { kind: UnaryKind },
    /// `(a, b, g)` → `(g * b * a^(b-1), g * a^b * ln a)`, unreduced (broadcast shape).
    PowGrad,
    /// `(x, g)` → gradient of `Max { dim, keepdim }` w.r.t. x.
    MaxGrad { dim: usize, keepdim: bool },
    /// `(y, g)` → gradient of softmax given its output y.
    SoftmaxGrad { dim: usize },
    /// `(y, g)` → gradient of log-softmax given its output y.
    LogSoftmaxGrad { dim: usize },
    /// `(x, weight?, g)` → `(gx, gweight?, gbias?)`.
    LayerNormGrad { normalized_ndim: usize, eps: f32, affine: bool },
    /// `(x, weight?, g)` → `(gx, gweight?, gbias?)` of `BatchNorm`'s `y`.
    BatchNormGrad { eps: f32, affine: bool },
    /// `(logits, target, node_mask?, g)` → gradient w.r.t. logits.
    CrossEntropyGrad {
        reduction: Reduction,
        class_weight: Option<Vec<f32>>,
        has_mask: bool,
        ignore_index: Option<i32>,
        label_smoothing: f32,
    },
    /// `(x i32[…])` → `i32[…, num_classes]`, 1 at each value's class (torch's
    /// `F.one_hot`, int32 here). No gradient.
    OneHot { num_classes: usize },
    /// `(weight, g)` → the gradient of `Conv2d` w.r.t. its input of shape `in_shape`.
    Conv2dGradInput { geom: Conv2dGeom, in_shape: Vec<usize> },
    /// `(x, g)` → the gradient of `Conv2d` w.r.t. its weight of shape `weight_shape`.
    Conv2dGradWeight { geom: Conv2dGeom, weight_shape: Vec<usize> },
    /// `(x, g)` → the gradient of `MaxPool2d` w.r.t. x (to the first maximum of each window).
    MaxPool2dGrad { geom: Pool2dGeom },
    /// `(g)` → the gradient of `AvgPool2d` w.r.t. its input of shape `in_shape`.
    AvgPool2dGrad { geom: Pool2dGeom, count_include_pad: bool, in_shape: Vec<usize> },
    /// `(g)` → the gradient of `AdaptiveAvgPool2d` w.r.t. its input of shape `in_shape`.
    AdaptiveAvgPool2dGrad { in_shape: Vec<usize> },
    /// `(g)` → zeros of `in_shape` with `g` written at the slice.
    SliceGrad { in_shape: Vec<usize>, dim: usize, start: usize, end: usize, step: usize },
    /// `(g, start)` → zeros of `in_shape` with `g` written at the wrapped positions of
    /// `DynamicSlice { dim, size }` (its adjoint; `size` ≤ the dim, so no position repeats).
    DynamicSliceGrad { in_shape: Vec<usize>, dim: usize, size: usize },
    /// `(g, index)` → zeros[dim_size along dim] with rows of g added at `index` (index_select's adjoint).
    IndexAdd { dim: usize, dim_size: usize },
    /// `(g, index)` → gather's adjoint: zeros of `in_shape`, `out[..index..] += g`.
    GatherGrad { dim: usize, in_shape: Vec<usize> },
    /// `(index, g)` → per-edge gradient of `ScatterMean`: `g[index[e]] / count[index[e]]`.
    ScatterMeanGrad { dim_size: usize },
    /// `(indptr, indices, values, g[n,f])` → CSR^T @ g, [m,f] (SpMM's adjoint w.r.t. dense).
    SpMMTransposed { n_rows: usize, n_cols: usize },
    /// `(indptr, indices, dense[m,f], g[n,f])` → gradient w.r.t. the CSR values, [nnz].
    SpMMValuesGrad { n_rows: usize, n_cols: usize },

    // ---- regions and training ----
    /// Runs a sub-graph. With `inverse` set it is an invertible region: autograd stores no
    /// inputs for it and recomputes them from its outputs in the backward pass.
    Call { region: Rc<Region> },
    /// Backward of an invertible `Call`: `(y, g_y, others…)` → `(x, g_i for each input i with
    /// needs_grad[i])`. `vjp` is one graph `(y, others…, g_y)` → `(x, g_i…)`: the region's
    /// inverse rebuilds `x` from `y`, then the forward is re-run locally and differentiated
    /// (sharing the function evaluations the inverse already made, see `ir::simplify`).
    InvertibleBackward {
        region: Rc<Region>,
        #[serde(skip)]
        vjp: Rc<crate::ir::Graph>,
        needs_grad: Vec<bool>,
    },
    /// Updates parameter `param` in place from its gradient `(g)`; optimizer state lives in
    /// the executor's store under `param`'s name. No output.
    OptimizerUpdate { param: String, step: OptimizerStep },
}

/// A sub-graph called from a graph node, with an optional inverse (invertible regions).
///
/// `forward` maps inputs `(x, others…)` to one output `y`. For an invertible region
/// `inverse` maps `(y, others…)` back to `x`; both take the same `others` in the same order.
#[derive(Debug, PartialEq, Serialize)]
pub struct Region {
    pub name: String,
    pub forward: crate::ir::Graph,
    pub inverse: Option<crate::ir::Graph>,
}

impl Op {
    /// The short name used in printed graphs and JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Placeholder { kind: InputKind::Input, .. } => "input",
            Op::Placeholder { kind: InputKind::Parameter, .. } => "parameter",
            Op::Placeholder { kind: InputKind::Buffer, .. } => "buffer",
            Op::Constant { .. } => "constant",
            Op::Full { .. } => "full",
            Op::RandomMask { .. } => "random_mask",
            Op::Unary { kind } => match kind {
                UnaryKind::Neg => "neg",
                UnaryKind::Exp => "exp",
                UnaryKind::Log => "log",
                UnaryKind::Sqrt => "sqrt",
                UnaryKind::Relu => "relu",
                UnaryKind::Gelu | UnaryKind::GeluTanh => "gelu",
                UnaryKind::Tanh => "tanh",
                UnaryKind::Sigmoid => "sigmoid",
            },
            Op::Binary { kind } => match kind {
                BinaryKind::Add => "add",
                BinaryKind::Sub => "sub",
                BinaryKind::Mul => "mul",
                BinaryKind::Div => "div",
                BinaryKind::Pow => "pow",
            },
            Op::Where => "where",
            Op::Positive => "positive",
            Op::MatMul => "matmul",
            Op::MatMulTN => "matmul_tn",
            Op::Linear { .. } => "linear",
            Op::LinearAdd { .. } => "linear_add",
            Op::SpMM { .. } => "spmm",
            Op::Conv2d { .. } => "conv2d",
            Op::MaxPool2d { .. } => "max_pool2d",
            Op::AvgPool2d { .. } => "avg_pool2d",
            Op::AdaptiveAvgPool2d { .. } => "adaptive_avg_pool2d",
            Op::Reduce { kind: ReduceKind::Sum, .. } => "sum",
            Op::Reduce { kind: ReduceKind::Mean, .. } => "mean",
            Op::Max { .. } => "max",
            Op::ArgMax { .. } => "argmax",
            Op::Softmax { .. } => "softmax",
            Op::LogSoftmax { .. } => "log_softmax",
            Op::LayerNorm { .. } => "layer_norm",
            Op::BatchNorm { .. } => "batch_norm",
            Op::Dropout { .. } => "dropout",
            Op::CrossEntropy { .. } => "cross_entropy",
            Op::IdentityLoss { .. } => "identity_loss",
            Op::Reshape { .. } => "reshape",
            Op::Permute { .. } => "permute",
            Op::Concat { .. } => "concat",
            Op::Split { .. } => "split",
            Op::Slice { .. } => "slice",
            Op::DynamicSlice { .. } => "dynamic_slice",
            Op::IndexSelect { .. } => "index_select",
            Op::Gather { .. } => "gather",
            Op::Cast { .. } => "cast",
            Op::BroadcastTo { .. } => "broadcast_to",
            Op::ScatterAdd { .. } => "scatter_add",
            Op::ScatterMean { .. } => "scatter_mean",
            Op::BufferUpdate { .. } => "buffer_update",
            Op::SumTo { .. } => "sum_to",
            Op::UnaryGrad { .. } => "unary_grad",
            Op::PowGrad => "pow_grad",
            Op::MaxGrad { .. } => "max_grad",
            Op::SoftmaxGrad { .. } => "softmax_grad",
            Op::LogSoftmaxGrad { .. } => "log_softmax_grad",
            Op::LayerNormGrad { .. } => "layer_norm_grad",
            Op::BatchNormGrad { .. } => "batch_norm_grad",
            Op::CrossEntropyGrad { .. } => "cross_entropy_grad",
            Op::OneHot { .. } => "one_hot",
            Op::Conv2dGradInput { .. } => "conv2d_grad_input",
            Op::Conv2dGradWeight { .. } => "conv2d_grad_weight",
            Op::MaxPool2dGrad { .. } => "max_pool2d_grad",
            Op::AvgPool2dGrad { .. } => "avg_pool2d_grad",
            Op::AdaptiveAvgPool2dGrad { .. } => "adaptive_avg_pool2d_grad",
            Op::SliceGrad { .. } => "slice_grad",
            Op::DynamicSliceGrad { .. } => "dynamic_slice_grad",
            Op::IndexAdd { .. } => "index_add",
            Op::GatherGrad { .. } => "gather_grad",
            Op::ScatterMeanGrad { .. } => "scatter_mean_grad",
            Op::SpMMTransposed { .. } => "spmm_t",
            Op::SpMMValuesGrad { .. } => "spmm_values_grad",
            Op::Call { .. } => "call",
            Op::InvertibleBackward { .. } => "invertible_backward",
            Op::OptimizerUpdate { .. } => "optimizer_update",
        }
    }

    /// True for ops that write executor state (never removed as dead code).
    pub fn has_side_effect(&self) -> bool {
        matches!(self, Op::BufferUpdate { .. } | Op::OptimizerUpdate { .. })
    }
}
