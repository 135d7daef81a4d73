//! The [`Module`] trait every module implements (the built-in ones here, the GNN layers of
//! `crate::gnn::nn`, and the JavaScript API's wrappers over both), and the built-in
//! modules: Linear (on dense or sparse input), LayerNorm, Dropout, ReLU, GELU, Embedding,
//! Sequential and the MLP.
//!
//! A module owns its parameters ([`Param`]: shape, dtype and init recipe, the value made on
//! first need, so tracing and planning allocate no weights); calling it records ops under
//! its scope. Parameter names follow PyTorch (`0.weight`, `convs.3.lin_l.bias`). A container
//! a parent indexes itself (PyTorch's `ModuleList`) is not a module here: the parent lists
//! the items as children named `layers.0`, `layers.1`, … (and `named_modules` shows the
//! list's own path, `layers`, as PyTorch does).

use super::{check, SparseVar, Tracer, Var};
use crate::rng::Rng;
use crate::tensor::alloc::check_usize_shape;
use crate::tensor::{DType, Init, Param, Tensor};
use crate::{Error, Result};

/// One argument of a module's forward: a dense tensor or a CSR sparse matrix (node
/// features, an adjacency).
#[derive(Clone, Debug)]
pub enum Arg {
    Dense(Var),
    Sparse(SparseVar),
}

impl Arg {
    /// What the argument is, for error messages (`f32[4,8]`, `a sparse 4x4 matrix`).
    pub fn describe(&self) -> String {
        match self {
            Arg::Dense(v) => v.ty().to_string(),
            Arg::Sparse(s) => format!("a sparse {}x{} matrix", s.n_rows, s.n_cols),
        }
    }
}

impl From<Var> for Arg {
    fn from(v: Var) -> Arg {
        Arg::Dense(v)
    }
}

impl From<SparseVar> for Arg {
    fn from(s: SparseVar) -> Arg {
        Arg::Sparse(s)
    }
}

/// The dense argument `i` of `module`'s forward, or an error naming the module, the
/// argument and what it got.
pub fn dense_arg<'a>(tr: &Tracer, module: &str, args: &'a [Arg], i: usize, what: &str) -> Result<&'a Var> {
    match args.get(i) {
        Some(Arg::Dense(v)) => Ok(v),
        other => Err(arg_error(tr, module, i, what, "a dense tensor", other)),
    }
}

/// The sparse argument `i` of `module`'s forward (see [`dense_arg`]).
pub fn sparse_arg<'a>(tr: &Tracer, module: &str, args: &'a [Arg], i: usize, what: &str) -> Result<&'a SparseVar> {
    match args.get(i) {
        Some(Arg::Sparse(s)) => Ok(s),
        other => Err(arg_error(tr, module, i, what, "a sparse matrix", other)),
    }
}

fn arg_error(tr: &Tracer, module: &str, i: usize, what: &str, want: &str, got: Option<&Arg>) -> Error {
    let at = match tr.current_scope() {
        s if s.is_empty() => String::new(),
        s => format!(" (module '{s}')"),
    };
    let got = got.map_or("nothing".to_string(), Arg::describe);
    Error::trace(format!("{module}.forward{at}: argument {i} ({what}) must be {want}, got {got}"))
}

/// Fails unless `module`'s forward got at most `n` arguments.
pub fn check_arity(tr: &Tracer, module: &str, args: &[Arg], n: usize, signature: &str) -> Result<()> {
    if args.len() > n {
        let at = match tr.current_scope() {
            s if s.is_empty() => String::new(),
            s => format!(" (module '{s}')"),
        };
        return Err(Error::trace(format!(
            "{module}.forward{at} takes ({signature}), {n} argument{}, but got {}",
            if n == 1 { "" } else { "s" },
            args.len()
        )));
    }
    Ok(())
}

/// A module's two kinds of state, walked by the same code.
#[derive(Clone, Copy)]
enum State {
    Parameter,
    Buffer,
}

/// Every parameter or buffer of `m`'s tree, by full dotted name, in tree order.
fn named_state<M: Module + ?Sized>(m: &M, kind: State) -> Vec<(String, Param)> {
    let local = match kind {
        State::Parameter => m.local_parameters(),
        State::Buffer => m.local_buffers(),
    };
    let mut out: Vec<(String, Param)> = local.into_iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
    for (name, child) in m.children() {
        out.extend(named_state(child, kind).into_iter().map(|(n, t)| (format!("{name}.{n}"), t)));
    }
    out
}

/// Calls `f` with every parameter's or buffer's full dotted name and its slot, in
/// [`named_state`] order.
fn for_each_state_mut<M: Module + ?Sized>(m: &mut M, kind: State, f: &mut dyn FnMut(String, &mut Param)) {
    let local = match kind {
        State::Parameter => m.local_parameters_mut(),
        State::Buffer => m.local_buffers_mut(),
    };
    for (n, t) in local {
        f(n.to_string(), t);
    }
    for (name, child) in m.children_mut() {
        for_each_state_mut(child, kind, &mut |n, t| f(format!("{name}.{n}"), t));
    }
}

/// A module: a named tree of parameters with a traced forward, like PyTorch's `nn.Module`.
/// Every module implements [`Module::forward_args`] for the arguments it takes (one dense
/// tensor for most, features and an adjacency for graph convolutions) and says what is
/// wrong with others.
pub trait Module {
    /// Records the forward pass on `args` (inside the caller's scope).
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var>;

    /// [`Module::forward_args`] on one dense tensor.
    fn forward(&self, tr: &Tracer, x: &Var) -> Result<Var> {
        self.forward_args(tr, &[Arg::Dense(x.clone())])
    }

    /// Direct parameters, by local name.
    fn local_parameters(&self) -> Vec<(&str, &Param)> {
        Vec::new()
    }

    /// Direct buffers (persistent state that is not trained, e.g. batch norm's running
    /// statistics), by local name.
    fn local_buffers(&self) -> Vec<(&str, &Param)> {
        Vec::new()
    }

    /// [`Module::local_buffers`], to replace their values (the same names).
    fn local_buffers_mut(&mut self) -> Vec<(&str, &mut Param)> {
        Vec::new()
    }

    /// Calls `f` with every buffer's full dotted name and its slot, in
    /// [`Module::named_buffers`] order.
    fn for_each_buffer_mut(&mut self, f: &mut dyn FnMut(String, &mut Param)) {
        for_each_state_mut(self, State::Buffer, f)
    }

    /// Every buffer of the tree, by full dotted name (PyTorch `named_buffers`): the values
    /// the module was built with; a trace's executor holds the updated ones.
    fn named_buffers(&self) -> Vec<(String, Param)> {
        named_state(self, State::Buffer)
    }

    /// Submodules, by attribute name (a list's items as `list.0`, `list.1`, …).
    fn children(&self) -> Vec<(String, &dyn Module)> {
        Vec::new()
    }

    /// [`Module::local_parameters`], to replace their values (a module with parameters
    /// lists the same names in both).
    fn local_parameters_mut(&mut self) -> Vec<(&str, &mut Param)> {
        Vec::new()
    }

    /// [`Module::children`], mutable (the same names).
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        Vec::new()
    }

    /// Calls `f` with every parameter's full dotted name and the slot holding its value, in
    /// [`Module::named_parameters`] order.
    fn for_each_parameter_mut(&mut self, f: &mut dyn FnMut(String, &mut Param)) {
        for_each_state_mut(self, State::Parameter, f)
    }

    /// Replaces the value of parameter `name` (a full dotted name) with one of the same
    /// dtype and shape; the error names the parameter and both types.
    fn set_parameter(&mut self, name: &str, value: Tensor) -> Result<()> {
        let mut result = Err(Error::trace(format!("the module has no parameter '{name}'")));
        let mut value = Some(value);
        self.for_each_parameter_mut(&mut |n, slot| {
            if n != name {
                return;
            }
            let Some(v) = value.take() else { return };
            result = if slot.dtype() != v.dtype() || slot.shape() != v.shape() {
                Err(Error::trace(format!(
                    "parameter '{name}' is {}{:?}; a {}{:?} cannot replace it (same dtype and shape only)",
                    slot.dtype(),
                    slot.shape(),
                    v.dtype(),
                    v.shape()
                )))
            } else {
                *slot = Param::from_tensor(v);
                Ok(())
            };
        });
        result
    }

    /// Every parameter of the tree, by full dotted name (PyTorch `named_parameters`).
    fn named_parameters(&self) -> Vec<(String, Param)> {
        named_state(self, State::Parameter)
    }

    /// Every submodule path (PyTorch `named_modules`, the root as ""); a list's own path
    /// (`layers` for children `layers.0`, …) comes before its first item.
    fn named_modules(&self) -> Vec<String> {
        let mut out = vec![String::new()];
        for (name, child) in self.children() {
            if let Some((list, _)) = name.rsplit_once('.') {
                if !out.iter().any(|m| m == list) {
                    out.push(list.to_string());
                }
            }
            out.extend(child.named_modules().into_iter().map(|n| {
                if n.is_empty() {
                    name.clone()
                } else {
                    format!("{name}.{n}")
                }
            }));
        }
        out
    }
}

impl<M: Module + ?Sized> Module for Box<M> {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        (**self).forward_args(tr, args)
    }
    fn forward(&self, tr: &Tracer, x: &Var) -> Result<Var> {
        (**self).forward(tr, x)
    }
    fn local_parameters(&self) -> Vec<(&str, &Param)> {
        (**self).local_parameters()
    }
    fn local_buffers(&self) -> Vec<(&str, &Param)> {
        (**self).local_buffers()
    }
    fn local_buffers_mut(&mut self) -> Vec<(&str, &mut Param)> {
        (**self).local_buffers_mut()
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        (**self).children()
    }
    fn local_parameters_mut(&mut self) -> Vec<(&str, &mut Param)> {
        (**self).local_parameters_mut()
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        (**self).children_mut()
    }
}

/// A module taking one dense tensor: its argument, or the error naming what it got.
fn one_dense<'a>(tr: &Tracer, module: &str, args: &'a [Arg]) -> Result<&'a Var> {
    check_arity(tr, module, args, 1, "x")?;
    dense_arg(tr, module, args, 0, "x")
}

/// Calls `module` on `x` inside the scope `name` (how a parent calls a child).
pub fn call(tr: &Tracer, name: &str, module: &dyn Module, x: &Var) -> Result<Var> {
    tr.scope(name, || module.forward(tr, x))
}

/// A float32 parameter `what` of `shape` made by `init` (its size checked now, nothing allocated).
fn param(what: &str, shape: &[usize], init: Init) -> Result<Param> {
    Param::new(what, shape, DType::Float32, init)
}

fn uniform(what: &str, shape: &[usize], bound: f32, rng: &mut Rng) -> Result<Param> {
    param(what, shape, Init::uniform(bound, rng))
}

/// `y = x W^T + b`, initialised like PyTorch and PyG: W and b ~ U(±1/√in).
pub struct Linear {
    pub in_features: usize,
    pub out_features: usize,
    pub weight: Param,
    pub bias: Option<Param>,
}

impl Linear {
    pub fn new(in_features: usize, out_features: usize, bias: bool, rng: &mut Rng) -> Result<Linear> {
        let name = format!("Linear({in_features}, {out_features})");
        if in_features == 0 || out_features == 0 {
            return Err(Error::trace(format!("{name}: sizes must be positive")));
        }
        let bound = 1.0 / (in_features as f32).sqrt();
        // Both sizes are checked before either is drawn, so a failure leaves `rng` as it was.
        check_usize_shape(&format!("{name}: the weight"), &[out_features, in_features], DType::Float32)?;
        let weight = uniform(&format!("{name}: the weight"), &[out_features, in_features], bound, rng)?;
        let bias = match bias {
            true => Some(uniform(&format!("{name}: the bias"), &[out_features], bound, rng)?),
            false => None,
        };
        Ok(Linear { in_features, out_features, weight, bias })
    }

    /// The layer applied to a sparse input (`x @ W^T` as CSR × dense, never densifying x).
    pub fn forward_sparse(&self, tr: &Tracer, x: &SparseVar) -> Result<Var> {
        if x.n_cols != self.in_features {
            return Err(Error::trace(format!(
                "'linear' in scope {}: sparse input has {} columns but the layer takes {}",
                tr.current_scope(),
                x.n_cols,
                self.in_features
            )));
        }
        let wt = tr.param("weight", &self.weight)?.transpose(0, 1)?;
        let y = x.matmul(&wt)?;
        match &self.bias {
            Some(b) => y.add(&tr.param("bias", b)?),
            None => Ok(y),
        }
    }
}

impl Module for Linear {
    /// On a dense `x` (`x W^T + b`) or a sparse one ([`Linear::forward_sparse`]).
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        check_arity(tr, "Linear", args, 1, "x")?;
        let x = match args.first() {
            Some(Arg::Sparse(x)) => return self.forward_sparse(tr, x),
            _ => dense_arg(tr, "Linear", args, 0, "x")?,
        };
        let w = tr.param("weight", &self.weight)?;
        match &self.bias {
            Some(b) => x.linear(&w, Some(&tr.param("bias", b)?)),
            None => x.linear(&w, None),
        }
    }
    fn local_parameters(&self) -> Vec<(&str, &Param)> {
        let mut v = vec![("weight", &self.weight)];
        if let Some(b) = &self.bias {
            v.push(("bias", b));
        }
        v
    }
    fn local_parameters_mut(&mut self) -> Vec<(&str, &mut Param)> {
        let mut v = vec![("weight", &mut self.weight)];
        if let Some(b) = &mut self.bias {
            v.push(("bias", b));
        }
        v
    }
}

/// A 2-D convolution over NCHW input (PyTorch's `nn.Conv2d` with zero padding): weight
/// `[out, in/groups, kh, kw]` initialised by kaiming_uniform(a=√5), i.e. U(±1/√fan_in)
/// with `fan_in = in/groups·kh·kw`, and the bias U(±1/√fan_in), as PyTorch.
pub struct Conv2d {
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel_size: [usize; 2],
    pub geom: crate::ir::Conv2dGeom,
    /// Zero rows and columns padded after the input first: the uneven part of PyTorch's
    /// `padding='same'` ([`crate::ir::Conv2dGeom::same_padding`]); `[0, 0]` otherwise.
    pub pad_after: [usize; 2],
    pub weight: Param,
    pub bias: Option<Param>,
}

impl Conv2d {
    /// `Conv2d(in, out, kernel_size, stride, padding, dilation, groups, bias)`; the sizes are
    /// checked here (positive, channels divisible by groups) with PyTorch's messages.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
        bias: bool,
        rng: &mut Rng,
    ) -> Result<Conv2d> {
        let name = format!("Conv2d({in_channels}, {out_channels}, kernel_size={kernel_size:?})");
        if in_channels == 0 || out_channels == 0 || kernel_size.contains(&0) {
            return Err(Error::trace(format!("{name}: channels and kernel sizes must be positive")));
        }
        if stride.contains(&0) || dilation.contains(&0) {
            return Err(Error::trace(format!("{name}: stride {stride:?} and dilation {dilation:?} must be positive")));
        }
        if groups == 0 {
            return Err(Error::trace(format!("{name}: groups must be a positive integer")));
        }
        if !in_channels.is_multiple_of(groups) {
            return Err(Error::trace(format!("{name}: in_channels must be divisible by groups ({groups})")));
        }
        if !out_channels.is_multiple_of(groups) {
            return Err(Error::trace(format!("{name}: out_channels must be divisible by groups ({groups})")));
        }
        let geom = crate::ir::Conv2dGeom { stride, padding, dilation, groups };
        let shape = [out_channels, in_channels / groups, kernel_size[0], kernel_size[1]];
        let (weight, bias) = Conv2d::init_parameters(&name, &shape, bias, rng)?;
        Ok(Conv2d { in_channels, out_channels, kernel_size, geom, pad_after: [0, 0], weight, bias })
    }

    /// PyTorch's `padding='same'` (stride 1): the symmetric padding in the convolution, and
    /// one more zero row or column after where the dilated kernel's span is even.
    #[allow(clippy::too_many_arguments)]
    pub fn same(
        in_channels: usize,
        out_channels: usize,
        kernel_size: [usize; 2],
        stride: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
        bias: bool,
        rng: &mut Rng,
    ) -> Result<Conv2d> {
        let (padding, after) = crate::ir::Conv2dGeom::same_padding(kernel_size, stride, dilation)?;
        let mut c = Conv2d::new(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, rng)?;
        c.pad_after = after;
        Ok(c)
    }

    /// The weight and bias, drawn as PyTorch's `reset_parameters` draws them.
    fn init_parameters(name: &str, shape: &[usize; 4], bias: bool, rng: &mut Rng) -> Result<(Param, Option<Param>)> {
        let fan_in = shape[1] * shape[2] * shape[3];
        let bound = 1.0 / (fan_in as f32).sqrt();
        // Checked before anything is drawn, so a failure leaves `rng` as it was.
        check_usize_shape(&format!("{name}: the weight"), shape, DType::Float32)?;
        let weight = uniform(&format!("{name}: the weight"), shape, bound, rng)?;
        let bias = match bias {
            true => Some(uniform(&format!("{name}: the bias"), &[shape[0]], bound, rng)?),
            false => None,
        };
        Ok((weight, bias))
    }
}

impl Module for Conv2d {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        let mut x = one_dense(tr, "Conv2d", args)?.clone();
        if self.pad_after != [0, 0] {
            x = x.pad_after(self.pad_after)?;
        }
        let w = tr.param("weight", &self.weight)?;
        match &self.bias {
            Some(b) => x.conv2d(&w, Some(&tr.param("bias", b)?), self.geom),
            None => x.conv2d(&w, None, self.geom),
        }
    }
    fn local_parameters(&self) -> Vec<(&str, &Param)> {
        let mut v = vec![("weight", &self.weight)];
        if let Some(b) = &self.bias {
            v.push(("bias", b));
        }
        v
    }
    fn local_parameters_mut(&mut self) -> Vec<(&str, &mut Param)> {
        let mut v = vec![("weight", &mut self.weight)];
        if let Some(b) = &mut self.bias {
            v.push(("bias", b));
        }
        v
    }
}

/// `v` as `dtype` (no op when it already is).
fn as_dtype(v: &Var, dtype: DType) -> Result<Var> {
    if v.dtype() == dtype {
        Ok(v.clone())
    } else {
        v.cast(dtype)
    }
}

/// PyTorch's `nn.BatchNorm2d(num_features, eps, momentum, affine, track_running_stats)`
/// over NCHW (any `[N, C, …]` input, so it serves as BatchNorm1d too).
///
/// Training (a training trace) normalises with the batch statistics (one `batch_norm` op,
/// which keeps only its input for the backward pass) and, with `track_running_stats`,
/// updates the buffers in place as PyTorch: `running = (1 − m)·running + m·batch` with the
/// unbiased batch variance, `num_batches_tracked += 1`, and `m = 1/num_batches_tracked`
/// when `momentum` is `None` (a cumulative average). Evaluation normalises with the
/// running statistics (elementwise ops), or with the batch's when they are not tracked.
pub struct BatchNorm2d {
    pub num_features: usize,
    pub eps: f32,
    pub momentum: Option<f32>,
    pub weight: Option<Param>,
    pub bias: Option<Param>,
    pub running_mean: Option<Param>,
    pub running_var: Option<Param>,
    pub num_batches_tracked: Option<Param>,
}

impl BatchNorm2d {
    /// `BatchNorm2d(num_features, eps=1e-5, momentum=0.1, affine=True,
    /// track_running_stats=True)`: weight 1, bias 0, running mean 0, running var 1.
    pub fn new(
        num_features: usize,
        eps: f32,
        momentum: Option<f32>,
        affine: bool,
        track_running_stats: bool,
    ) -> Result<BatchNorm2d> {
        let name = format!("BatchNorm2d({num_features})");
        if num_features == 0 {
            return Err(Error::trace(format!("{name}: num_features must be positive")));
        }
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(Error::trace(format!("{name}: eps must be a finite number ≥ 0, got {eps}")));
        }
        if let Some(m) = momentum {
            if !(0.0..=1.0).contains(&m) {
                return Err(Error::trace(format!("{name}: momentum must be in [0, 1] or None, got {m}")));
            }
        }
        let (weight, bias) = BatchNorm2d::init_parameters(&name, num_features, affine)?;
        let (running_mean, running_var, num_batches_tracked) = match track_running_stats {
            true => {
                let c = num_features;
                let rm = param(&format!("{name}: running_mean"), &[c], Init::Fill(0.0))?;
                let rv = param(&format!("{name}: running_var"), &[c], Init::Fill(1.0))?;
                (Some(rm), Some(rv), Some(Param::from_tensor(Tensor::zeros(&[], DType::Int32))))
            }
            false => (None, None, None),
        };
        Ok(BatchNorm2d { num_features, eps, momentum, weight, bias, running_mean, running_var, num_batches_tracked })
    }

    /// The affine weight (ones) and bias (zeros), as PyTorch's `reset_parameters`.
    fn init_parameters(name: &str, c: usize, affine: bool) -> Result<(Option<Param>, Option<Param>)> {
        if !affine {
            return Ok((None, None));
        }
        let w = param(&format!("{name}: the weight"), &[c], Init::Fill(1.0))?;
        let b = param(&format!("{name}: the bias"), &[c], Init::Fill(0.0))?;
        Ok((Some(w), Some(b)))
    }

    fn affine(&self, tr: &Tracer) -> Result<Option<(Var, Var)>> {
        match (&self.weight, &self.bias) {
            (Some(w), Some(b)) => Ok(Some((tr.param("weight", w)?, tr.param("bias", b)?))),
            _ => Ok(None),
        }
    }
}

impl Module for BatchNorm2d {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        let x = one_dense(tr, "BatchNorm2d", args)?;
        let c = self.num_features;
        if x.shape().len() < 2 || x.shape()[1] != c {
            return Err(Error::trace(format!(
                "BatchNorm2d({c}) (module '{}'): expected an input [N, {c}, …], got {}",
                tr.current_scope(),
                x.ty()
            )));
        }
        let affine = self.affine(tr)?;
        let aff = affine.as_ref().map(|(w, b)| (w, b));
        let stats = match (&self.running_mean, &self.running_var, &self.num_batches_tracked) {
            (Some(rm), Some(rv), Some(nb)) => Some((rm, rv, nb)),
            _ => None,
        };
        match stats {
            Some((rm, rv, _)) if !tr.training() => {
                // Evaluation: (x − running_mean) / √(running_var + eps) · weight + bias.
                let mut shape = vec![1isize; x.shape().len()];
                shape[1] = c as isize;
                let rm = as_dtype(&tr.buffer("running_mean", rm)?, x.dtype())?.reshape(&shape)?;
                let rv = as_dtype(&tr.buffer("running_var", rv)?, x.dtype())?.reshape(&shape)?;
                let eps = tr.full(&[], x.dtype(), self.eps as f64)?;
                let y = x.sub(&rm)?.div(&rv.add(&eps)?.sqrt()?)?;
                match &affine {
                    Some((w, b)) => y.mul(&w.reshape(&shape)?)?.add(&b.reshape(&shape)?),
                    None => Ok(y),
                }
            }
            _ => {
                let (y, mean, var) = x.batch_norm(aff, self.eps)?;
                if let (true, Some((rm, rv, nb))) = (tr.training(), stats) {
                    let rm = tr.buffer("running_mean", rm)?;
                    let rv = tr.buffer("running_var", rv)?;
                    let nb = tr.buffer("num_batches_tracked", nb)?;
                    let count = nb.add(&tr.full(&[], DType::Int32, 1.0)?)?;
                    tr.buffer_update("num_batches_tracked", &count)?;
                    let dt = rm.dtype();
                    let m = match self.momentum {
                        Some(m) => tr.full(&[], dt, m as f64)?,
                        None => tr.full(&[], dt, 1.0)?.div(&count.cast(dt)?)?,
                    };
                    let keep = tr.full(&[], dt, 1.0)?.sub(&m)?;
                    let new_mean = rm.mul(&keep)?.add(&as_dtype(&mean, dt)?.mul(&m)?)?;
                    let new_var = rv.mul(&keep)?.add(&as_dtype(&var, rv.dtype())?.mul(&m)?)?;
                    tr.buffer_update("running_mean", &new_mean)?;
                    tr.buffer_update("running_var", &new_var)?;
                }
                Ok(y)
            }
        }
    }
    fn local_parameters(&self) -> Vec<(&str, &Param)> {
        [("weight", &self.weight), ("bias", &self.bias)]
            .into_iter()
            .filter_map(|(n, t)| t.as_ref().map(|t| (n, t)))
            .collect()
    }
    fn local_parameters_mut(&mut self) -> Vec<(&str, &mut Param)> {
        [("weight", &mut self.weight), ("bias", &mut self.bias)]
            .into_iter()
            .filter_map(|(n, t)| t.as_mut().map(|t| (n, t)))
            .collect()
    }
    fn local_buffers(&self) -> Vec<(&str, &Param)> {
        [
            ("running_mean", &self.running_mean),
            ("running_var", &self.running_var),
            ("num_batches_tracked", &self.num_batches_tracked),
        ]
        .into_iter()
        .filter_map(|(n, t)| t.as_ref().map(|t| (n, t)))
        .collect()
    }
    fn local_buffers_mut(&mut self) -> Vec<(&str, &mut Param)> {
        [
            ("running_mean", &mut self.running_mean),
            ("running_var", &mut self.running_var),
            ("num_batches_tracked", &mut self.num_batches_tracked),
        ]
        .into_iter()
        .filter_map(|(n, t)| t.as_mut().map(|t| (n, t)))
        .collect()
    }
}

/// PyTorch's `MaxPool2d(kernel_size, stride=kernel_size, padding, dilation, ceil_mode)`.
pub struct MaxPool2d {
    pub geom: crate::ir::Pool2dGeom,
}

impl Module for MaxPool2d {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        one_dense(tr, "MaxPool2d", args)?.max_pool2d(self.geom)
    }
}

/// PyTorch's `AvgPool2d(kernel_size, stride=kernel_size, padding, ceil_mode,
/// count_include_pad=True)`.
pub struct AvgPool2d {
    pub geom: crate::ir::Pool2dGeom,
    pub count_include_pad: bool,
}

impl Module for AvgPool2d {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        one_dense(tr, "AvgPool2d", args)?.avg_pool2d(self.geom, self.count_include_pad)
    }
}

/// PyTorch's `AdaptiveAvgPool2d(output_size)`.
pub struct AdaptiveAvgPool2d {
    pub output: [usize; 2],
}

impl Module for AdaptiveAvgPool2d {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        one_dense(tr, "AdaptiveAvgPool2d", args)?.adaptive_avg_pool2d(self.output)
    }
}

/// PyTorch's `Flatten(start_dim=1, end_dim=-1)`.
pub struct Flatten {
    pub start_dim: isize,
    pub end_dim: isize,
}

impl Module for Flatten {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        one_dense(tr, "Flatten", args)?.flatten(self.start_dim, self.end_dim)
    }
}

/// Layer normalisation over the last dim, weight 1 and bias 0 at init.
pub struct LayerNorm {
    pub eps: f32,
    pub weight: Param,
    pub bias: Param,
}

impl LayerNorm {
    /// A LayerNorm over `size` features (sizes a program chose: allocation failure aborts).
    pub fn new(size: usize) -> LayerNorm {
        LayerNorm {
            eps: 1e-5,
            weight: Param::new("LayerNorm: the weight", &[size], DType::Float32, Init::Fill(1.0))
                .expect("a program's size"),
            bias: Param::new("LayerNorm: the bias", &[size], DType::Float32, Init::Fill(0.0))
                .expect("a program's size"),
        }
    }

    /// [`LayerNorm::new`] for a size a user chose: positive, checked against the tensor
    /// limits and allocated fallibly.
    pub fn try_new(size: usize) -> Result<LayerNorm> {
        if size == 0 {
            return Err(Error::trace("LayerNorm(0): the size must be positive"));
        }
        let what = format!("LayerNorm({size})");
        Ok(LayerNorm {
            eps: 1e-5,
            weight: param(&format!("{what}: the weight"), &[size], Init::Fill(1.0))?,
            bias: param(&format!("{what}: the bias"), &[size], Init::Fill(0.0))?,
        })
    }
}

impl Module for LayerNorm {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        let x = one_dense(tr, "LayerNorm", args)?;
        let w = tr.param("weight", &self.weight)?;
        let b = tr.param("bias", &self.bias)?;
        x.layer_norm(1, Some((&w, &b)), self.eps)
    }
    fn local_parameters(&self) -> Vec<(&str, &Param)> {
        vec![("weight", &self.weight), ("bias", &self.bias)]
    }
    fn local_parameters_mut(&mut self) -> Vec<(&str, &mut Param)> {
        vec![("weight", &mut self.weight), ("bias", &mut self.bias)]
    }
}

/// Dropout: in a training trace, a fresh mask per run; in an inference trace, identity.
pub struct Dropout {
    pub p: f32,
}

impl Module for Dropout {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        let x = one_dense(tr, "Dropout", args)?;
        if !tr.training() || self.p == 0.0 {
            return Ok(x.clone());
        }
        let mask = tr.random_mask(x.shape(), self.p)?;
        x.dropout_with_mask(&mask, self.p)
    }
}

/// ReLU.
pub struct ReLU;

impl Module for ReLU {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        one_dense(tr, "ReLU", args)?.relu()
    }
}

/// GELU (exact erf form).
pub struct GELU;

impl Module for GELU {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        one_dense(tr, "GELU", args)?.gelu()
    }
}

/// A lookup table: int32 indices → rows of `weight` (init N(0, 1) as PyTorch).
pub struct Embedding {
    pub weight: Param,
}

impl Embedding {
    /// An `Embedding(num, dim)` of sizes a program chose (allocation failure aborts).
    pub fn new(num: usize, dim: usize, rng: &mut Rng) -> Embedding {
        Embedding::try_new(num, dim, rng).expect("a program's sizes")
    }

    /// [`Embedding::new`] for sizes a user chose: positive, checked against the tensor
    /// limits and allocated fallibly; a failure draws nothing from `rng`.
    pub fn try_new(num: usize, dim: usize, rng: &mut Rng) -> Result<Embedding> {
        if num == 0 || dim == 0 {
            return Err(Error::trace(format!("Embedding({num}, {dim}): sizes must be positive")));
        }
        let what = format!("Embedding({num}, {dim}): the weight");
        check_usize_shape(&what, &[num, dim], DType::Float32)?;
        Ok(Embedding { weight: param(&what, &[num, dim], Init::normal(rng))? })
    }
}

impl Module for Embedding {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        let idx = one_dense(tr, "Embedding", args)?;
        if idx.dtype() != DType::Int32 {
            return Err(Error::trace(format!("Embedding takes int32 indices, got {}", idx.ty())));
        }
        let w = tr.param("weight", &self.weight)?;
        let flat = idx.reshape(&[-1])?;
        let rows = w.index_select(0, &flat)?;
        let mut shape: Vec<isize> = idx.shape().iter().map(|&d| d as isize).collect();
        shape.push(self.weight.shape()[1] as isize);
        rows.reshape(&shape)
    }
    fn local_parameters(&self) -> Vec<(&str, &Param)> {
        vec![("weight", &self.weight)]
    }
    fn local_parameters_mut(&mut self) -> Vec<(&str, &mut Param)> {
        vec![("weight", &mut self.weight)]
    }
}

/// An embedding looked up in `factor` serial steps, as Graphcore's BERT (`SerializedEmbedding`
/// of examples/nlp/bert/pytorch/modeling.py) does to shrink the lookup's gradient: the table
/// is `factor` tables of `num / factor` rows (`split_embeddings.{i}.weight`, each its own
/// parameter); step `i` looks up the indices in its range (the others at row 0, masked to
/// zero after) and the steps' rows are added. The same values as one `Embedding`.
pub struct SerializedEmbedding {
    pub splits: Vec<Embedding>,
}

impl SerializedEmbedding {
    fn check(num: usize, dim: usize, factor: usize) -> Result<()> {
        if factor == 0 || !num.is_multiple_of(factor) {
            return Err(Error::trace(format!(
                "SerializedEmbedding({num}, {dim}, factor={factor}): the number of embeddings must be divisible by the \
                 serialization factor"
            )));
        }
        Ok(())
    }

    /// `factor` tables of `num / factor` rows each, N(0, 1) as `Embedding`.
    pub fn try_new(num: usize, dim: usize, factor: usize, rng: &mut Rng) -> Result<SerializedEmbedding> {
        SerializedEmbedding::check(num, dim, factor)?;
        let splits = (0..factor).map(|_| Embedding::try_new(num / factor, dim, rng)).collect::<Result<_>>()?;
        Ok(SerializedEmbedding { splits })
    }

    /// The serialised form of `e` (its rows split into `factor` tables, copies of its values).
    pub fn from_embedding(e: &Embedding, factor: usize) -> Result<SerializedEmbedding> {
        let (num, dim) = (e.weight.shape()[0], e.weight.shape()[1]);
        SerializedEmbedding::check(num, dim, factor)?;
        let w = e.weight.value()?.cast(DType::Float32).to_f32_vec();
        let rows = num / factor;
        let splits = (0..factor)
            .map(|i| {
                let part = w[i * rows * dim..(i + 1) * rows * dim].to_vec();
                Ok(Embedding {
                    weight: Param::from_tensor(Tensor::from_f32(&[rows, dim], part)?.cast(e.weight.dtype())),
                })
            })
            .collect::<Result<_>>()?;
        Ok(SerializedEmbedding { splits })
    }
}

impl Module for SerializedEmbedding {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        let idx = one_dense(tr, "SerializedEmbedding", args)?;
        if idx.dtype() != DType::Int32 {
            return Err(Error::trace(format!("SerializedEmbedding takes int32 indices, got {}", idx.ty())));
        }
        let rows = self.splits[0].weight.shape()[0];
        // Index arithmetic in float32 (exact for any table that fits the tensor limits).
        let x = idx.cast(DType::Float32)?;
        let one = tr.full(&[], DType::Float32, 1.0)?;
        let mut sum: Option<Var> = None;
        for (i, split) in self.splits.iter().enumerate() {
            let j = x.sub(&tr.full(&[], DType::Float32, (i * rows) as f64)?)?;
            // 1 where 0 <= j < rows, for whole j: relu(j + 1) - relu(j) is 1 from j = 0 up,
            // relu(rows - j) - relu(rows - 1 - j) is 1 up to j = rows - 1.
            let lo = j.add(&one)?.relu()?.sub(&j.relu()?)?;
            let top = tr.full(&[], DType::Float32, rows as f64)?;
            let hi = top.sub(&j)?.relu()?.sub(&top.sub(&one)?.sub(&j)?.relu()?)?;
            let mask = lo.mul(&hi)?;
            let local = j.mul(&mask)?.cast(DType::Int32)?;
            let looked = tr.scope(&format!("split_embeddings.{i}"), || split.forward(tr, &local))?;
            let mut shape: Vec<isize> = mask.shape().iter().map(|&d| d as isize).collect();
            shape.push(1);
            let y = looked.mul(&mask.reshape(&shape)?.cast(looked.dtype())?)?;
            sum = Some(match sum {
                Some(s) => s.add(&y)?,
                None => y,
            });
        }
        Ok(sum.expect("factor >= 1"))
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        self.splits.iter().enumerate().map(|(i, e)| (format!("split_embeddings.{i}"), e as &dyn Module)).collect()
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        self.splits
            .iter_mut()
            .enumerate()
            .map(|(i, e)| (format!("split_embeddings.{i}"), e as &mut dyn Module))
            .collect()
    }
}

/// Children called in order, named `0`, `1`, ….
#[derive(Default)]
pub struct Sequential {
    pub layers: Vec<Box<dyn Module>>,
}

impl Sequential {
    pub fn new(layers: Vec<Box<dyn Module>>) -> Sequential {
        Sequential { layers }
    }
}

impl Module for Sequential {
    /// The first module gets `args`, each later one the previous one's output.
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        let Some(first) = self.layers.first() else {
            return Ok(one_dense(tr, "Sequential", args)?.clone());
        };
        let mut h = tr.scope("0", || first.forward_args(tr, args))?;
        for (i, layer) in self.layers.iter().enumerate().skip(1) {
            h = call(tr, &i.to_string(), layer.as_ref(), &h)?;
        }
        Ok(h)
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        self.layers.iter().enumerate().map(|(i, l)| (i.to_string(), l.as_ref())).collect()
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        self.layers.iter_mut().enumerate().map(|(i, l)| (i.to_string(), l.as_mut() as &mut dyn Module)).collect()
    }
}

/// A multi-layer perceptron `Linear → ReLU → … → Linear` (the playground's default model),
/// its layers named `layers.0`, `layers.1`, ….
pub struct Mlp {
    pub layers: Vec<Linear>,
}

impl Mlp {
    pub fn new(sizes: &[usize], rng: &mut Rng) -> Result<Mlp> {
        if sizes.len() < 2 {
            return Err(Error::trace(format!(
                "an MLP needs at least two layer sizes (input and output), got {sizes:?}"
            )));
        }
        if sizes.len() - 1 > check::MAX_MLP_LAYERS {
            return Err(Error::trace(format!(
                "an MLP has at most {} layers, got {} sizes ({} layers)",
                check::MAX_MLP_LAYERS,
                sizes.len(),
                sizes.len() - 1
            )));
        }
        if let Some(i) = sizes.iter().position(|&s| s == 0) {
            return Err(Error::trace(format!("layer size {i} is 0: every size must be positive")));
        }
        // Each layer's weight, then all the weights and biases, before any is allocated.
        for w in sizes.windows(2) {
            let what = format!("Linear({}, {}): the weight", w[0], w[1]);
            check_usize_shape(&what, &[w[1], w[0]], DType::Float32)?;
        }
        let bytes: u128 = sizes.windows(2).map(|w| (w[0] as u128 + 1) * w[1] as u128 * 4).sum();
        if bytes > check::MAX_MLP_BYTES as u128 {
            return Err(Error::trace(format!(
                "an MLP of sizes {sizes:?} has {bytes} bytes of parameters, more than the limit of {}",
                check::MAX_MLP_BYTES
            )));
        }
        let items = sizes.windows(2).map(|w| Linear::new(w[0], w[1], true, rng)).collect::<Result<Vec<_>>>()?;
        Ok(Mlp { layers: items })
    }
}

impl Module for Mlp {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        let mut h = one_dense(tr, "Mlp", args)?.clone();
        let n = self.layers.len();
        for (i, layer) in self.layers.iter().enumerate() {
            h = tr.scope("layers", || call(tr, &i.to_string(), layer, &h))?;
            if i + 1 < n {
                h = h.relu()?;
            }
        }
        Ok(h)
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        self.layers.iter().enumerate().map(|(i, l)| (format!("layers.{i}"), l as &dyn Module)).collect()
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        self.layers.iter_mut().enumerate().map(|(i, l)| (format!("layers.{i}"), l as &mut dyn Module)).collect()
    }
}

/// Traces an MLP of `sizes` on a `[batch, sizes[0]]` input (inference mode).
pub fn trace_mlp(sizes: &[usize], batch: usize, seed: u64) -> Result<super::Trace> {
    if batch == 0 {
        return Err(Error::trace("the batch size must be positive"));
    }
    let model = Mlp::new(sizes, &mut Rng::new(seed))?;
    let tr = Tracer::new();
    let x = tr.input("x", &[batch, sizes[0]], DType::Float32)?;
    let y = model.forward(&tr, &x)?;
    tr.finish(&[&y])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ir::InputKind;

    #[test]
    fn sequential_names_follow_pytorch() {
        let mut rng = Rng::new(0);
        let m = Sequential::new(vec![
            Box::new(Linear::new(4, 8, true, &mut rng).unwrap()),
            Box::new(ReLU),
            Box::new(Linear::new(8, 2, true, &mut rng).unwrap()),
        ]);
        let names: Vec<String> = m.named_parameters().into_iter().map(|p| p.0).collect();
        assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
        assert_eq!(m.named_modules(), ["", "0", "1", "2"]);
        let tr = Tracer::new();
        let x = tr.input("x", &[3, 4], DType::Float32).unwrap();
        let y = m.forward(&tr, &x).unwrap();
        assert_eq!(y.shape(), &[3, 2]);
        let t = tr.finish(&[&y]).unwrap();
        let params: Vec<&str> = t.graph.placeholders(InputKind::Parameter).into_iter().map(|p| p.0).collect();
        assert_eq!(params, ["0.weight", "0.bias", "2.weight", "2.bias"]);
    }

    #[test]
    fn linear_init_is_bounded_by_one_over_sqrt_fan_in() {
        let l = Linear::new(100, 50, true, &mut Rng::new(1)).unwrap();
        let w = l.weight.value().unwrap().to_f32_vec();
        let max = w.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(max <= 0.1 && max > 0.09, "{max}");
    }

    #[test]
    fn dropout_is_identity_in_inference_and_masked_in_training() {
        let tr = Tracer::new();
        let x = tr.input("x", &[3, 4], DType::Float32).unwrap();
        let y = Dropout { p: 0.5 }.forward(&tr, &x).unwrap();
        assert_eq!(y.id(), x.id());
        tr.set_training(true);
        let y = Dropout { p: 0.5 }.forward(&tr, &x).unwrap();
        let t = tr.finish(&[&y]).unwrap();
        let ops: Vec<&str> = t.graph.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["input", "random_mask", "dropout"]);
    }

    #[test]
    fn embedding_gathers_rows() {
        let tr = Tracer::new();
        let idx = tr.input("idx", &[2, 3], DType::Int32).unwrap();
        let e = Embedding::new(10, 4, &mut Rng::new(0));
        let same = Embedding::try_new(10, 4, &mut Rng::new(0)).unwrap();
        assert_eq!(e.weight.value().unwrap(), same.weight.value().unwrap());
        let y = e.forward(&tr, &idx).unwrap();
        assert_eq!(y.shape(), &[2, 3, 4]);
        assert!(Mlp::new(&[4], &mut Rng::new(0)).is_err());
    }

    #[test]
    fn sizes_too_large_are_errors_and_leave_the_generator_unchanged() {
        let mut rng = Rng::new(3);
        let e = Linear::new(100_000, 100_000, true, &mut rng).err().unwrap().to_string();
        assert!(e.starts_with("Linear(100000, 100000): the weight: f32[100000,100000] needs 40000000000 bytes"), "{e}");
        let e = Embedding::try_new(100_000, 100_000, &mut rng).err().unwrap().to_string();
        assert!(e.contains("Embedding(100000, 100000)") && e.contains("40000000000 bytes"), "{e}");
        assert!(Embedding::try_new(0, 4, &mut rng).is_err());
        let e = LayerNorm::try_new(1 << 30).err().unwrap().to_string();
        assert!(e.contains("LayerNorm(1073741824)") && e.contains("4294967296 bytes"), "{e}");
        assert!(LayerNorm::try_new(0).is_err());
        assert_eq!(LayerNorm::try_new(3).unwrap().weight.value().unwrap().to_f32_vec(), vec![1.0; 3]);
        // Nothing was drawn by the failed constructors.
        assert_eq!(rng.next_u64(), Rng::new(3).next_u64());
        let sizes = vec![2; check::MAX_MLP_LAYERS + 2];
        assert!(Mlp::new(&sizes, &mut rng).err().unwrap().to_string().contains("at most 1024 layers"));
        // Every layer within the tensor limit (8192 x 8192 floats is 256 MiB), five of them not.
        let e = Mlp::new(&[8192; 6], &mut rng).err().unwrap().to_string();
        assert!(e.contains("has 1342341120 bytes of parameters, more than the limit of 1073741824"), "{e}");
        let mut fresh = Rng::new(3);
        fresh.next_u64();
        assert_eq!(rng.next_u64(), fresh.next_u64());
    }

    #[test]
    fn lists_show_in_named_modules_and_linear_takes_sparse_input() {
        let m = Mlp::new(&[4, 8, 2], &mut Rng::new(0)).unwrap();
        assert_eq!(m.named_modules(), ["", "layers", "layers.0", "layers.1"]);
        let l = Linear::new(5, 3, true, &mut Rng::new(0)).unwrap();
        let tr = Tracer::new();
        let x = SparseVar::input(&tr, "x", 4, 5, 7).unwrap();
        let y = l.forward_args(&tr, &[Arg::Sparse(x)]).unwrap();
        assert_eq!(y.shape(), &[4, 3]);
        let ops: Vec<&str> = tr.finish(&[&y]).unwrap().graph.nodes.iter().map(|n| n.op.name()).collect();
        assert!(ops.contains(&"spmm") && !ops.contains(&"linear"), "{ops:?}");
        let tr = Tracer::new();
        let x = tr.input("x", &[2, 5], DType::Float32).unwrap();
        let e =
            tr.scope("act", || ReLU.forward_args(&tr, &[x.clone().into(), x.clone().into()])).unwrap_err().to_string();
        assert_eq!(e, "ReLU.forward (module 'act') takes (x), 1 argument, but got 2");
        let s = SparseVar::input(&tr, "s", 2, 5, 3).unwrap();
        let e = LayerNorm::new(5).forward_args(&tr, &[s.into()]).unwrap_err().to_string();
        assert_eq!(e, "LayerNorm.forward: argument 0 (x) must be a dense tensor, got a sparse 2x5 matrix");
    }

    /// The mutable views list what the immutable ones do.
    pub(crate) fn check_mut_views(m: &mut dyn Module) {
        let names: Vec<String> = m.named_parameters().into_iter().map(|p| p.0).collect();
        let mut muts = Vec::new();
        m.for_each_parameter_mut(&mut |n, _| muts.push(n));
        assert_eq!(names, muts);
    }

    #[test]
    fn parameters_are_replaced_by_name_with_their_dtype_and_shape() {
        let mut rng = Rng::new(0);
        let mut m = Sequential::new(vec![
            Box::new(Linear::new(4, 3, true, &mut rng).unwrap()),
            Box::new(LayerNorm::new(3)),
            Box::new(Embedding::new(5, 2, &mut rng)),
        ]);
        check_mut_views(&mut m);
        check_mut_views(&mut Mlp::new(&[3, 4, 2], &mut rng).unwrap());
        m.set_parameter("1.bias", Tensor::full(&[3], DType::Float32, 2.0)).unwrap();
        assert_eq!(m.named_parameters()[3].1.value().unwrap().to_f32_vec(), vec![2.0; 3]);
        let e = m.set_parameter("1.bias", Tensor::zeros(&[4], DType::Float32)).unwrap_err().to_string();
        assert_eq!(e, "parameter '1.bias' is f32[3]; a f32[4] cannot replace it (same dtype and shape only)");
        assert_eq!(
            m.set_parameter("9.weight", Tensor::zeros(&[1], DType::Float32)).unwrap_err().to_string(),
            "the module has no parameter '9.weight'"
        );
    }

    #[test]
    fn parameters_are_made_on_first_need_with_the_same_values_early_or_late() {
        let build = || {
            let mut rng = Rng::new(7);
            let m = Sequential::new(vec![
                Box::new(Linear::new(4, 3, true, &mut rng).unwrap()),
                Box::new(Embedding::try_new(6, 2, &mut rng).unwrap()),
                Box::new(LayerNorm::try_new(3).unwrap()),
            ]);
            (m, rng.next_u64())
        };
        let (early, after_early) = build();
        // Tracing reads shapes only.
        let tr = Tracer::new();
        let x = tr.input("x", &[2, 4], DType::Float32).unwrap();
        let y = call(&tr, "0", early.layers[0].as_ref(), &x).unwrap();
        let t = tr.finish(&[&y]).unwrap();
        assert_eq!(t.params.len(), 2);
        assert!(early.named_parameters().iter().all(|(_, p)| !p.is_materialised()));
        assert!(t.params[0].1.same(&early.named_parameters()[0].1), "the trace holds the module's parameter");
        let values = |m: &Sequential, order: &[usize]| {
            let params = m.named_parameters();
            let mut out = vec![Vec::new(); params.len()];
            for &i in order {
                out[i] = params[i].1.value().unwrap().to_f32_vec();
            }
            out
        };
        let (late, after_late) = build();
        assert_eq!(after_early, after_late, "each parameter draws one seed, whatever its size");
        let a = values(&early, &[0, 1, 2, 3, 4]);
        // Materialised in the opposite order, and the embedding only after another model drew.
        let _ = build();
        let b = values(&late, &[4, 3, 2, 1, 0]);
        assert_eq!(a, b);
        assert!(a[0].iter().all(|v| v.abs() <= 0.5) && a[0].iter().any(|v| *v != a[0][0]));
        assert_eq!((a[3].clone(), a[4].clone()), (vec![1.0; 3], vec![0.0; 3]));
        // The embedding's N(0, 1) values are those of the seed it drew, as PyTorch's normal_.
        let mut rng = Rng::new(7);
        let (_, _) = (rng.next_u64(), rng.next_u64());
        let mut want = vec![0f32; 12];
        Rng::new(rng.next_u64()).fill_normal(&mut want);
        assert_eq!(a[2], want);
    }

    #[test]
    fn mlp_trace_names_layers() {
        let t = trace_mlp(&[4, 8, 2], 3, 0).unwrap();
        let text = crate::ir::print::print_graph(&t.graph);
        assert!(text.contains("layers.0.weight") && text.contains("layers.1.bias"), "{text}");
        assert_eq!(text.matches("linear(").count(), 2);
        assert!(trace_mlp(&[4, 0, 2], 3, 0).unwrap_err().to_string().contains("size"));
        assert!(trace_mlp(&[4, 2], 0, 0).unwrap_err().to_string().contains("batch"));
    }
}
