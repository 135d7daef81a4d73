//! `poptorch.optim`: SGD, Adam, AdamW, RMSprop and LAMB as PopTorch describes them, with
//! PopTorch's extra attributes, parameter groups and constant/variable attributes.
//!
//! An [`Optimizer`] is a description; the executor turns it into one
//! [`OptimizerStep`](crate::ir::OptimizerStep) per parameter ([`Optimizer::step_for`]) and
//! the kernels in [`crate::kernels::optim`] apply it.
//!
//! * Arguments ([`OptimizerArgs`]) are optional like PopTorch's keyword arguments; a missing
//!   one takes PopTorch's default ([`OptimizerType::default_args`]). An argument the
//!   optimizer does not take is an error naming it, as Python's `TypeError` is.
//! * Global attributes (`loss_scaling`, the accumulation types, `max_grad_norm`,
//!   `use_combined_accum`, `bias_correction`) cannot be set per group.
//! * Attributes passed explicitly are **variable**, the rest **constant** (PopTorch's
//!   `_parseArgs`); `lr` is always variable. [`Optimizer::mark_as_constant`] and
//!   [`Optimizer::mark_as_variable`] override that. After compilation a replacement
//!   optimizer may change variable attributes only ([`Optimizer::check_replacement`],
//!   PopART's `validReplacement` rules and messages).
//! * Parameters not listed in any group are trained with the constructor's values
//!   (PopART applies the default optimizer values to every weight without a specific one).

mod parse;
mod replace;

pub use parse::{attribute_name, ArgValue};

use crate::ir::OptimizerStep;
use crate::tensor::DType;
use crate::{Error, Result};

/// Which optimizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OptimizerType {
    Sgd,
    Adam,
    AdamW,
    RmsProp,
    Lamb,
}

impl OptimizerType {
    /// PopTorch's class name.
    pub fn name(self) -> &'static str {
        match self {
            OptimizerType::Sgd => "SGD",
            OptimizerType::Adam => "Adam",
            OptimizerType::AdamW => "AdamW",
            OptimizerType::RmsProp => "RMSprop",
            OptimizerType::Lamb => "LAMB",
        }
    }

    /// Attributes that can be set per parameter group (PopTorch's `_group_vars`).
    pub fn group_attributes(self) -> &'static [&'static str] {
        match self {
            OptimizerType::Sgd => &["lr", "momentum", "dampening", "weight_decay", "nesterov", "velocity_scaling"],
            OptimizerType::Adam | OptimizerType::AdamW => &["lr", "betas", "eps", "weight_decay", "amsgrad"],
            OptimizerType::RmsProp => &["lr", "momentum", "weight_decay", "alpha", "eps", "centered"],
            OptimizerType::Lamb => &["lr", "weight_decay", "betas", "eps", "max_weight_norm"],
        }
    }

    /// Global attributes (PopTorch's `_child_only` minus the group ones).
    pub fn global_attributes(self) -> &'static [&'static str] {
        match self {
            OptimizerType::Sgd => {
                &["loss_scaling", "use_combined_accum", "accum_type", "velocity_accum_type", "max_grad_norm"]
            }
            OptimizerType::Adam => &[
                "loss_scaling",
                "accum_type",
                "first_order_momentum_accum_type",
                "second_order_momentum_accum_type",
                "max_grad_norm",
            ],
            OptimizerType::AdamW => &[
                "loss_scaling",
                "bias_correction",
                "accum_type",
                "first_order_momentum_accum_type",
                "second_order_momentum_accum_type",
                "max_grad_norm",
            ],
            OptimizerType::RmsProp => {
                &["loss_scaling", "accum_type", "first_order_momentum_accum_type", "second_order_momentum_accum_type"]
            }
            OptimizerType::Lamb => &[
                "bias_correction",
                "loss_scaling",
                "accum_type",
                "first_order_momentum_accum_type",
                "second_order_momentum_accum_type",
            ],
        }
    }

    /// PopTorch's defaults for every attribute of this optimizer (`lr` of SGD has none:
    /// it is a required argument).
    pub fn default_args(self) -> OptimizerArgs {
        let common = OptimizerArgs {
            weight_decay: Some(0.0),
            loss_scaling: Some(1.0),
            accum_type: Some(DType::Float32),
            first_order_momentum_accum_type: Some(DType::Float32),
            second_order_momentum_accum_type: Some(DType::Float32),
            max_grad_norm: Some(f32::INFINITY),
            ..OptimizerArgs::default()
        };
        match self {
            OptimizerType::Sgd => OptimizerArgs {
                momentum: Some(0.0),
                dampening: Some(0.0),
                nesterov: Some(false),
                velocity_scaling: Some(1.0),
                use_combined_accum: Some(false),
                velocity_accum_type: Some(DType::Float32),
                ..common
            },
            OptimizerType::Adam => OptimizerArgs {
                lr: Some(1e-3),
                betas: Some((0.9, 0.999)),
                eps: Some(1e-8),
                amsgrad: Some(false),
                ..common
            },
            OptimizerType::AdamW => OptimizerArgs {
                lr: Some(1e-3),
                betas: Some((0.9, 0.999)),
                eps: Some(1e-8),
                weight_decay: Some(1e-2),
                amsgrad: Some(false),
                bias_correction: Some(true),
                ..common
            },
            OptimizerType::RmsProp => OptimizerArgs {
                lr: Some(1e-2),
                alpha: Some(0.99),
                eps: Some(1e-8),
                momentum: Some(0.0),
                centered: Some(false),
                ..common
            },
            OptimizerType::Lamb => OptimizerArgs {
                lr: Some(1e-3),
                betas: Some((0.9, 0.999)),
                eps: Some(1e-8),
                weight_decay: Some(1e-2),
                bias_correction: Some(true),
                max_weight_norm: Some(65500.0),
                ..common
            },
        }
    }
}

/// Optimizer arguments, each optional (PopTorch's keyword arguments; `None` = not given).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OptimizerArgs {
    pub lr: Option<f32>,
    pub momentum: Option<f32>,
    pub dampening: Option<f32>,
    pub weight_decay: Option<f32>,
    pub nesterov: Option<bool>,
    pub betas: Option<(f32, f32)>,
    pub eps: Option<f32>,
    pub alpha: Option<f32>,
    pub centered: Option<bool>,
    pub amsgrad: Option<bool>,
    pub max_weight_norm: Option<f32>,
    pub velocity_scaling: Option<f32>,
    pub loss_scaling: Option<f32>,
    pub use_combined_accum: Option<bool>,
    pub accum_type: Option<DType>,
    pub velocity_accum_type: Option<DType>,
    pub first_order_momentum_accum_type: Option<DType>,
    pub second_order_momentum_accum_type: Option<DType>,
    pub max_grad_norm: Option<f32>,
    pub bias_correction: Option<bool>,
}

impl OptimizerArgs {
    /// The names of the arguments that are set, in declaration order.
    pub fn given(&self) -> Vec<&'static str> {
        let flags = [
            ("lr", self.lr.is_some()),
            ("momentum", self.momentum.is_some()),
            ("dampening", self.dampening.is_some()),
            ("weight_decay", self.weight_decay.is_some()),
            ("nesterov", self.nesterov.is_some()),
            ("betas", self.betas.is_some()),
            ("eps", self.eps.is_some()),
            ("alpha", self.alpha.is_some()),
            ("centered", self.centered.is_some()),
            ("amsgrad", self.amsgrad.is_some()),
            ("max_weight_norm", self.max_weight_norm.is_some()),
            ("velocity_scaling", self.velocity_scaling.is_some()),
            ("loss_scaling", self.loss_scaling.is_some()),
            ("use_combined_accum", self.use_combined_accum.is_some()),
            ("accum_type", self.accum_type.is_some()),
            ("velocity_accum_type", self.velocity_accum_type.is_some()),
            ("first_order_momentum_accum_type", self.first_order_momentum_accum_type.is_some()),
            ("second_order_momentum_accum_type", self.second_order_momentum_accum_type.is_some()),
            ("max_grad_norm", self.max_grad_norm.is_some()),
            ("bias_correction", self.bias_correction.is_some()),
        ];
        flags.into_iter().filter(|f| f.1).map(|f| f.0).collect()
    }

    /// `self` with every unset argument taken from `base`.
    fn or(&self, base: &OptimizerArgs) -> OptimizerArgs {
        macro_rules! pick {
            ($($f:ident),*) => { OptimizerArgs { $($f: self.$f.or(base.$f)),* } };
        }
        pick!(
            lr,
            momentum,
            dampening,
            weight_decay,
            nesterov,
            betas,
            eps,
            alpha,
            centered,
            amsgrad,
            max_weight_norm,
            velocity_scaling,
            loss_scaling,
            use_combined_accum,
            accum_type,
            velocity_accum_type,
            first_order_momentum_accum_type,
            second_order_momentum_accum_type,
            max_grad_norm,
            bias_correction
        )
    }
}

/// A parameter group: parameter names (as the trace names them) and the group's own
/// arguments (group attributes only).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParamGroup {
    pub params: Vec<String>,
    pub args: OptimizerArgs,
}

/// The resolved values of one group: every attribute of [`OptimizerArgs`] set.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GroupValues {
    pub lr: f32,
    pub momentum: f32,
    pub dampening: f32,
    pub weight_decay: f32,
    pub nesterov: bool,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub alpha: f32,
    pub centered: bool,
    pub max_weight_norm: f32,
    pub velocity_scaling: f32,
}

/// A PopTorch optimizer: type, default values, parameter groups, global attributes and
/// which attributes are variable.
#[derive(Clone, Debug, PartialEq)]
pub struct Optimizer {
    ty: OptimizerType,
    /// Constructor arguments, completed with the defaults (the "default group").
    defaults: OptimizerArgs,
    /// Explicit groups: their parameters and completed arguments.
    groups: Vec<ParamGroup>,
    /// Variable attributes, in the order they became variable.
    variable: Vec<String>,
}

fn err(msg: impl Into<String>) -> Error {
    Error::poptorch(msg.into())
}

/// Python's repr of a list of strings: `['lr', 'momentum']`.
pub(crate) fn py_list(items: &[&str]) -> String {
    let inner: Vec<String> = items.iter().map(|s| format!("'{s}'")).collect();
    format!("[{}]", inner.join(", "))
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::Float32 => "torch.float32",
        DType::Float16 => "torch.float16",
        DType::Int32 => "torch.int32",
        DType::Bool => "torch.bool",
    }
}

impl Optimizer {
    /// An optimizer over every parameter of the model (`opt(model.parameters(), …)`).
    pub fn new(ty: OptimizerType, args: OptimizerArgs) -> Result<Optimizer> {
        Optimizer::with_groups(ty, Vec::new(), args)
    }

    /// An optimizer with explicit parameter groups (`opt([{'params': …, 'lr': …}, …], …)`);
    /// `args` gives the defaults every group starts from. An empty list means one group of
    /// every parameter.
    pub fn with_groups(ty: OptimizerType, groups: Vec<ParamGroup>, args: OptimizerArgs) -> Result<Optimizer> {
        let allowed: Vec<&str> = ty.group_attributes().iter().chain(ty.global_attributes()).copied().collect();
        for name in args.given() {
            if !allowed.contains(&name) {
                return Err(err(format!("{}.__init__() got an unexpected keyword argument '{name}'", ty.name())));
            }
        }
        if ty == OptimizerType::Sgd && args.lr.is_none() {
            return Err(err("SGD.__init__() missing 1 required positional argument: 'lr'"));
        }
        let defaults = args.or(&ty.default_args());
        let mut seen: Vec<&str> = Vec::new();
        let mut resolved = Vec::new();
        for (i, g) in groups.iter().enumerate() {
            for name in g.args.given() {
                if ty.global_attributes().contains(&name) {
                    return Err(err(format!(
                        "parameter group {i} sets '{name}', a global attribute of {}: set it on the optimizer \
                         (only {} can differ per group)",
                        ty.name(),
                        py_list(ty.group_attributes())
                    )));
                }
                if !allowed.contains(&name) {
                    return Err(err(format!(
                        "parameter group {i} sets '{name}', which {} does not have (group attributes: {})",
                        ty.name(),
                        py_list(ty.group_attributes())
                    )));
                }
            }
            if g.params.is_empty() {
                return Err(err(format!(
                    "parameter group {i} has no parameters: optimizer got an empty parameter list"
                )));
            }
            for p in &g.params {
                if seen.contains(&p.as_str()) {
                    return Err(err(format!("some parameters appear in more than one parameter group: '{p}'")));
                }
                seen.push(p);
            }
            resolved.push(g.clone());
        }
        let mut variable: Vec<String> = vec!["lr".to_string()];
        let markable = Self::markable(ty, defaults.use_combined_accum == Some(true));
        for name in args.given() {
            if markable.contains(&name) && !variable.iter().any(|v| v == name) {
                variable.push(name.to_string());
            }
        }
        let opt = Optimizer { ty, defaults, groups: resolved, variable };
        opt.validate()?;
        Ok(opt)
    }

    /// `poptorch.optim.SGD(params, lr, …)`.
    pub fn sgd(args: OptimizerArgs) -> Result<Optimizer> {
        Optimizer::new(OptimizerType::Sgd, args)
    }
    /// `poptorch.optim.Adam(params, …)`.
    pub fn adam(args: OptimizerArgs) -> Result<Optimizer> {
        Optimizer::new(OptimizerType::Adam, args)
    }
    /// `poptorch.optim.AdamW(params, …)`.
    pub fn adamw(args: OptimizerArgs) -> Result<Optimizer> {
        Optimizer::new(OptimizerType::AdamW, args)
    }
    /// `poptorch.optim.RMSprop(params, …)`.
    pub fn rmsprop(args: OptimizerArgs) -> Result<Optimizer> {
        Optimizer::new(OptimizerType::RmsProp, args)
    }
    /// `poptorch.optim.LAMB(params, …)` (`bias_correction: Some(false)` is LAMB without bias
    /// correction).
    pub fn lamb(args: OptimizerArgs) -> Result<Optimizer> {
        Optimizer::new(OptimizerType::Lamb, args)
    }

    /// Attributes `markAsConstant`/`markAsVariable` accept (`list(defaults) + _child_vars`).
    fn markable(ty: OptimizerType, combined: bool) -> Vec<&'static str> {
        let mut v: Vec<&'static str> =
            ty.group_attributes().iter().copied().filter(|a| *a != "velocity_scaling" || combined).collect();
        v.push("loss_scaling");
        v
    }

    /// Every value in range; the error names the attribute (and group) as PyTorch does.
    fn validate(&self) -> Result<()> {
        let name = self.ty.name();
        let check_group = |a: &OptimizerArgs, at: &str| -> Result<()> {
            let lr = a.lr.unwrap_or(0.0);
            if lr.is_nan() || lr < 0.0 {
                return Err(err(format!("Invalid learning rate: {lr}{at}")));
            }
            let m = a.momentum.unwrap_or(0.0);
            if m.is_nan() || m < 0.0 {
                return Err(err(format!("Invalid momentum value: {m}{at}")));
            }
            let wd = a.weight_decay.unwrap_or(0.0);
            if wd.is_nan() || wd < 0.0 {
                return Err(err(format!("Invalid weight_decay value: {wd}{at}")));
            }
            let eps = a.eps.unwrap_or(0.0);
            if eps.is_nan() || eps < 0.0 {
                return Err(err(format!("Invalid epsilon value: {eps}{at}")));
            }
            if let Some((b1, b2)) = a.betas {
                for (i, b) in [b1, b2].into_iter().enumerate() {
                    if !(0.0..1.0).contains(&b) {
                        return Err(err(format!("Invalid beta parameter at index {i}: {b}{at}")));
                    }
                }
            }
            let alpha = a.alpha.unwrap_or(0.0);
            if alpha.is_nan() || alpha < 0.0 {
                return Err(err(format!("Invalid alpha value: {alpha}{at}")));
            }
            let d = a.dampening.unwrap_or(0.0);
            if !d.is_finite() {
                return Err(err(format!("Invalid dampening value: {d}{at}")));
            }
            if a.nesterov == Some(true) && (m <= 0.0 || d != 0.0) {
                return Err(err(format!("Nesterov momentum requires a momentum and zero dampening{at}")));
            }
            let vs = a.velocity_scaling.unwrap_or(1.0);
            if !(vs.is_finite() && vs > 0.0) {
                return Err(err(format!("velocity_scaling must be a positive finite number, got {vs}{at}")));
            }
            let mwn = a.max_weight_norm.unwrap_or(1.0);
            if mwn.is_nan() || mwn < 0.0 {
                return Err(err(format!("max_weight_norm must be non-negative, got {mwn}{at}")));
            }
            if a.amsgrad == Some(true) {
                return Err(err("Only non-amsgrad Adam/AdamW optimizers are supported."));
            }
            Ok(())
        };
        check_group(&self.defaults, "")?;
        for (i, g) in self.groups.iter().enumerate() {
            check_group(&g.args.or(&self.defaults), &format!(" (parameter group {i})"))?;
        }
        let d = &self.defaults;
        let ls = d.loss_scaling.unwrap_or(1.0);
        if !(ls.is_finite() && ls > 0.0) {
            return Err(err(format!("loss_scaling must be a positive finite number, got {ls}")));
        }
        if d.max_grad_norm.is_some_and(f32::is_nan) {
            return Err(err("Maximum norm of gradients cannot be NaN"));
        }
        if d.max_grad_norm.is_some_and(|n| n <= 0.0) {
            return Err(err(format!("max_grad_norm must be positive, got {}", d.max_grad_norm.unwrap())));
        }
        for t in
            [d.accum_type, d.velocity_accum_type, d.first_order_momentum_accum_type, d.second_order_momentum_accum_type]
                .into_iter()
                .flatten()
        {
            if !t.is_float() {
                return Err(err(format!(
                    "Accumulation types must be either torch.float32 or torch.float16 (got {} in {name})",
                    dtype_name(t)
                )));
            }
        }
        if self.ty == OptimizerType::RmsProp {
            let centered = |g: &ParamGroup| g.args.centered.or(d.centered).unwrap_or(false);
            let c0 = self.groups.first().map_or(d.centered.unwrap_or(false), centered);
            for (i, g) in self.groups.iter().enumerate() {
                let c = centered(g);
                if c != c0 {
                    return Err(err(format!(
                        "All parameter groups must have the same value for the 'centered' attribute \
                         (Group 0: {} / Group {i}: {})",
                        py_bool(c0),
                        py_bool(c)
                    )));
                }
            }
        }
        Ok(())
    }

    /// The optimizer type.
    pub fn optimizer_type(&self) -> OptimizerType {
        self.ty
    }

    /// The constructor's arguments completed with the defaults.
    pub fn defaults(&self) -> &OptimizerArgs {
        &self.defaults
    }

    /// The explicit parameter groups, with the arguments each group set itself.
    pub fn param_groups(&self) -> &[ParamGroup] {
        &self.groups
    }

    /// True when `attr` is constant (PopTorch's `variable_attrs.isConstant`; the name in
    /// snake_case or camelCase).
    pub fn is_constant(&self, attr: &str) -> bool {
        let attr = attribute_name(attr);
        !self.variable.contains(&attr)
    }

    /// The variable attributes (PopTorch's `variable_attrs`), in the order they became
    /// variable.
    pub fn variable_attributes(&self) -> &[String] {
        &self.variable
    }

    /// Attributes [`Optimizer::mark_as_constant`] accepts.
    pub fn allowed_attributes(&self) -> Vec<&'static str> {
        Self::markable(self.ty, self.combined())
    }

    /// `attr` in snake_case, if it is one of [`Optimizer::allowed_attributes`].
    fn check_known(&self, attr: &str) -> Result<String> {
        let allowed = self.allowed_attributes();
        let name = attribute_name(attr);
        if !allowed.contains(&name.as_str()) {
            return Err(err(format!("Unknown attribute {attr}, allowed values: {}", py_list(&allowed))));
        }
        Ok(name)
    }

    /// `variable_attrs.markAsConstant(attr)` (the name in snake_case or camelCase).
    pub fn mark_as_constant(&mut self, attr: &str) -> Result<()> {
        let attr = self.check_known(attr)?;
        self.variable.retain(|v| *v != attr);
        Ok(())
    }

    /// `variable_attrs.markAsVariable(attr)` (the name in snake_case or camelCase).
    pub fn mark_as_variable(&mut self, attr: &str) -> Result<()> {
        let attr = self.check_known(attr)?;
        if self.is_constant(&attr) {
            self.variable.push(attr);
        }
        Ok(())
    }

    /// Changes attribute values: of the defaults (`group: None`, which every group then
    /// inherits unless it set the attribute itself) or of one group. Nothing changes when
    /// the new values are invalid.
    pub fn update(&mut self, group: Option<usize>, args: OptimizerArgs) -> Result<()> {
        let mut next = self.clone();
        match group {
            None => {
                let allowed: Vec<&str> =
                    self.ty.group_attributes().iter().chain(self.ty.global_attributes()).copied().collect();
                if let Some(bad) = args.given().into_iter().find(|n| !allowed.contains(n)) {
                    return Err(err(format!("{} has no attribute '{bad}'", self.ty.name())));
                }
                next.defaults = args.or(&self.defaults);
            }
            Some(i) => {
                let n = self.groups.len();
                let g = next.groups.get_mut(i).ok_or_else(|| {
                    err(format!("parameter group {i} does not exist: the optimizer has {n} explicit groups"))
                })?;
                if let Some(bad) = args.given().into_iter().find(|n| !self.ty.group_attributes().contains(n)) {
                    return Err(err(format!(
                        "'{bad}' cannot be set on parameter group {i}: group attributes are {}",
                        py_list(self.ty.group_attributes())
                    )));
                }
                g.args = args.or(&g.args);
            }
        }
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// Sets the learning rate of the defaults and of every group (what an LR scheduler does).
    pub fn set_lr(&mut self, lr: f32) -> Result<()> {
        let mut next = self.clone();
        next.defaults.lr = Some(lr);
        for g in &mut next.groups {
            if g.args.lr.is_some() {
                g.args.lr = Some(lr);
            }
        }
        next.validate()?;
        *self = next;
        Ok(())
    }

    fn combined(&self) -> bool {
        self.defaults.use_combined_accum == Some(true)
    }

    /// The loss scaling factor (global).
    pub fn loss_scaling(&self) -> f32 {
        self.defaults.loss_scaling.unwrap_or(1.0)
    }

    /// The maximum global gradient norm (`inf` = no clipping). LAMB and RMSprop have none.
    pub fn max_grad_norm(&self) -> f32 {
        match self.ty {
            OptimizerType::RmsProp | OptimizerType::Lamb => f32::INFINITY,
            _ => self.defaults.max_grad_norm.unwrap_or(f32::INFINITY),
        }
    }

    /// The dtype gradients are accumulated in (`accum_type`).
    pub fn accum_type(&self) -> DType {
        self.defaults.accum_type.unwrap_or(DType::Float32)
    }

    /// True for SGD's combined variant (`use_combined_accum=True`).
    pub fn use_combined_accum(&self) -> bool {
        self.ty == OptimizerType::Sgd && self.combined()
    }

    /// True when this optimizer needs PopTorch's Running mean reduction strategy: a float16
    /// accumulator outside SGD's combined variant (PopTorch switches the strategy itself
    /// before compilation).
    pub fn needs_running_mean(&self) -> bool {
        self.accum_type() == DType::Float16 && !self.use_combined_accum()
    }

    /// The group (index) of parameter `param`, if an explicit group lists it.
    pub fn group_of(&self, param: &str) -> Option<usize> {
        self.groups.iter().position(|g| g.params.iter().any(|p| p == param))
    }

    /// The resolved arguments applying to parameter `param`.
    fn args_for(&self, param: &str) -> OptimizerArgs {
        match self.group_of(param) {
            Some(i) => self.groups[i].args.or(&self.defaults),
            None => self.defaults.clone(),
        }
    }

    pub(crate) fn values(a: &OptimizerArgs) -> GroupValues {
        let (beta1, beta2) = a.betas.unwrap_or((0.9, 0.999));
        GroupValues {
            lr: a.lr.unwrap_or(0.0),
            momentum: a.momentum.unwrap_or(0.0),
            dampening: a.dampening.unwrap_or(0.0),
            weight_decay: a.weight_decay.unwrap_or(0.0),
            nesterov: a.nesterov.unwrap_or(false),
            beta1,
            beta2,
            eps: a.eps.unwrap_or(1e-8),
            alpha: a.alpha.unwrap_or(0.99),
            centered: a.centered.unwrap_or(false),
            max_weight_norm: a.max_weight_norm.unwrap_or(65500.0),
            velocity_scaling: a.velocity_scaling.unwrap_or(1.0),
        }
    }

    /// Checks that every parameter named by a group is one of `model_params`.
    pub fn check_params(&self, model_params: &[String]) -> Result<()> {
        for (i, g) in self.groups.iter().enumerate() {
            for p in &g.params {
                if !model_params.contains(p) {
                    return Err(err(format!(
                        "parameter group {i} of the {} optimizer names '{p}', which is not a parameter of the model",
                        self.ty.name()
                    )));
                }
            }
        }
        Ok(())
    }

    /// The update applied to parameter `param`.
    pub fn step_for(&self, param: &str) -> OptimizerStep {
        let v = Self::values(&self.args_for(param));
        let d = &self.defaults;
        let first = d.first_order_momentum_accum_type.unwrap_or(DType::Float32);
        let second = d.second_order_momentum_accum_type.unwrap_or(DType::Float32);
        let bias_correction = d.bias_correction.unwrap_or(true);
        match self.ty {
            OptimizerType::Sgd => OptimizerStep::Sgd {
                lr: v.lr,
                momentum: v.momentum,
                dampening: v.dampening,
                weight_decay: v.weight_decay,
                nesterov: v.nesterov,
                velocity_scaling: if self.combined() { v.velocity_scaling } else { 1.0 },
                velocity_dtype: if self.combined() {
                    DType::Float32
                } else {
                    d.velocity_accum_type.unwrap_or(DType::Float32)
                },
            },
            OptimizerType::Adam | OptimizerType::AdamW => OptimizerStep::Adam {
                lr: v.lr,
                beta1: v.beta1,
                beta2: v.beta2,
                eps: v.eps,
                weight_decay: v.weight_decay,
                decoupled: self.ty == OptimizerType::AdamW,
                bias_correction: self.ty == OptimizerType::Adam || bias_correction,
                first_order_dtype: first,
                second_order_dtype: second,
            },
            OptimizerType::RmsProp => OptimizerStep::RmsProp {
                lr: v.lr,
                alpha: v.alpha,
                eps: v.eps,
                weight_decay: v.weight_decay,
                momentum: v.momentum,
                centered: v.centered,
                first_order_dtype: first,
                second_order_dtype: second,
            },
            OptimizerType::Lamb => OptimizerStep::Lamb {
                lr: v.lr,
                beta1: v.beta1,
                beta2: v.beta2,
                eps: v.eps,
                weight_decay: v.weight_decay,
                bias_correction,
                max_weight_norm: v.max_weight_norm,
                first_order_dtype: first,
                second_order_dtype: second,
            },
        }
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

#[cfg(test)]
mod tests;
