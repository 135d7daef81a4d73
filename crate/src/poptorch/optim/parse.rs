//! Optimizer arguments from named values of any type, as callers outside Rust hand them
//! over (the JS API's `new poptorch.optim.Adam(params, { lr: 0.003, weightDecay: 0.01 })`):
//! names in PopTorch's snake_case or in camelCase, values checked against each attribute's
//! type. An unknown name is Python's `TypeError` for an unexpected keyword argument, as
//! PopTorch's constructors raise it; ranges are checked by [`Optimizer`]'s own validation.

use super::{err, Optimizer, OptimizerArgs, OptimizerType};
use crate::tensor::DType;
use crate::Result;

/// A value as the caller gave it.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgValue {
    Number(f64),
    Bool(bool),
    /// A list of numbers (`betas`).
    Numbers(Vec<f64>),
    Text(String),
    /// Anything else, described for the error message.
    Other(String),
}

impl ArgValue {
    fn describe(&self) -> String {
        match self {
            ArgValue::Number(x) => format!("the number {x}"),
            ArgValue::Bool(b) => format!("the boolean {b}"),
            ArgValue::Numbers(v) => format!("a list of {} numbers", v.len()),
            ArgValue::Text(s) => format!("the string {s:?}"),
            ArgValue::Other(d) => d.clone(),
        }
    }
}

/// PopTorch's snake_case name of an attribute given in either spelling (`weightDecay` →
/// `weight_decay`; `lr` and `weight_decay` stay as they are).
pub fn attribute_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn number(name: &str, v: &ArgValue) -> Result<f32> {
    match v {
        ArgValue::Number(x) => Ok(*x as f32),
        other => Err(err(format!("{name} must be a number, got {}", other.describe()))),
    }
}

fn boolean(name: &str, v: &ArgValue) -> Result<bool> {
    match v {
        ArgValue::Bool(b) => Ok(*b),
        other => Err(err(format!("{name} must be a boolean, got {}", other.describe()))),
    }
}

fn dtype(name: &str, v: &ArgValue) -> Result<DType> {
    match v {
        ArgValue::Text(s) => {
            let s = s.strip_prefix("torch.").unwrap_or(s);
            DType::parse(s).map_err(|_| {
                err(format!("Accumulation types must be either torch.float32 or torch.float16 ({name} got {s:?})"))
            })
        }
        other => Err(err(format!("{name} must be a dtype name, \"float32\" or \"float16\", got {}", other.describe()))),
    }
}

fn pair(name: &str, v: &ArgValue) -> Result<(f32, f32)> {
    match v {
        ArgValue::Numbers(xs) if xs.len() == 2 => Ok((xs[0] as f32, xs[1] as f32)),
        other => Err(err(format!("{name} must be a list of two numbers, got {}", other.describe()))),
    }
}

impl OptimizerArgs {
    /// The arguments `ty`'s constructor (`what`: `"Adam.__init__()"`, or `"parameter group
    /// 1"`) was given as `(name, value)` pairs; a name no attribute of `ty` has is PopTorch's
    /// unexpected-keyword error, a value of the wrong type names the attribute. Values are
    /// range-checked when the optimizer is built.
    pub fn parse(ty: OptimizerType, what: &str, pairs: &[(String, ArgValue)]) -> Result<OptimizerArgs> {
        let allowed: Vec<&str> = ty.group_attributes().iter().chain(ty.global_attributes()).copied().collect();
        let mut a = OptimizerArgs::default();
        for (given, v) in pairs {
            let name = attribute_name(given);
            if !allowed.contains(&name.as_str()) {
                return Err(err(format!("{what} got an unexpected keyword argument '{given}'")));
            }
            let n = name.as_str();
            match n {
                "lr" => a.lr = Some(number(n, v)?),
                "momentum" => a.momentum = Some(number(n, v)?),
                "dampening" => a.dampening = Some(number(n, v)?),
                "weight_decay" => a.weight_decay = Some(number(n, v)?),
                "nesterov" => a.nesterov = Some(boolean(n, v)?),
                "betas" => a.betas = Some(pair(n, v)?),
                "eps" => a.eps = Some(number(n, v)?),
                "alpha" => a.alpha = Some(number(n, v)?),
                "centered" => a.centered = Some(boolean(n, v)?),
                "amsgrad" => a.amsgrad = Some(boolean(n, v)?),
                "max_weight_norm" => a.max_weight_norm = Some(number(n, v)?),
                "velocity_scaling" => a.velocity_scaling = Some(number(n, v)?),
                "loss_scaling" => a.loss_scaling = Some(number(n, v)?),
                "use_combined_accum" => a.use_combined_accum = Some(boolean(n, v)?),
                "accum_type" => a.accum_type = Some(dtype(n, v)?),
                "velocity_accum_type" => a.velocity_accum_type = Some(dtype(n, v)?),
                "first_order_momentum_accum_type" => a.first_order_momentum_accum_type = Some(dtype(n, v)?),
                "second_order_momentum_accum_type" => a.second_order_momentum_accum_type = Some(dtype(n, v)?),
                "max_grad_norm" => a.max_grad_norm = Some(number(n, v)?),
                "bias_correction" => a.bias_correction = Some(boolean(n, v)?),
                _ => return Err(err(format!("{what} got an unexpected keyword argument '{given}'"))),
            }
        }
        Ok(a)
    }
}

impl Optimizer {
    /// The same optimizer with every parameter name of its groups mapped by `f` (a caller
    /// that names parameters by its own keys before it knows their traced names resolves
    /// them here); constant/variable attributes and values are kept.
    pub fn map_params(&self, mut f: impl FnMut(&str) -> Result<String>) -> Result<Optimizer> {
        let mut out = self.clone();
        for g in &mut out.groups {
            for p in &mut g.params {
                *p = f(p)?;
            }
        }
        // Two keys may name the same parameter: the groups must still be disjoint.
        let mut seen: Vec<&str> = Vec::new();
        for g in &out.groups {
            for p in &g.params {
                if seen.contains(&p.as_str()) {
                    return Err(err(format!("some parameters appear in more than one parameter group: '{p}'")));
                }
                seen.push(p);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poptorch::optim::ParamGroup;

    fn pairs(items: &[(&str, ArgValue)]) -> Vec<(String, ArgValue)> {
        items.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn camel_and_snake_names_parse_to_the_same_arguments() {
        let camel = pairs(&[
            ("lr", ArgValue::Number(0.003)),
            ("weightDecay", ArgValue::Number(0.01)),
            ("betas", ArgValue::Numbers(vec![0.8, 0.9])),
            ("accumType", ArgValue::Text("float16".into())),
            ("maxGradNorm", ArgValue::Number(1.0)),
        ]);
        let snake = pairs(&[
            ("lr", ArgValue::Number(0.003)),
            ("weight_decay", ArgValue::Number(0.01)),
            ("betas", ArgValue::Numbers(vec![0.8, 0.9])),
            ("accum_type", ArgValue::Text("torch.float16".into())),
            ("max_grad_norm", ArgValue::Number(1.0)),
        ]);
        let a = OptimizerArgs::parse(OptimizerType::Adam, "Adam.__init__()", &camel).unwrap();
        assert_eq!(a, OptimizerArgs::parse(OptimizerType::Adam, "Adam.__init__()", &snake).unwrap());
        assert_eq!(a.weight_decay, Some(0.01));
        assert_eq!(a.betas, Some((0.8, 0.9)));
        assert_eq!(a.accum_type, Some(DType::Float16));
        assert_eq!(a.given(), vec!["lr", "weight_decay", "betas", "accum_type", "max_grad_norm"]);
    }

    #[test]
    fn unknown_names_and_wrong_types_are_named() {
        let e = OptimizerArgs::parse(
            OptimizerType::Adam,
            "Adam.__init__()",
            &pairs(&[("momentum", ArgValue::Number(0.9))]),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "Adam.__init__() got an unexpected keyword argument 'momentum'");
        let e = OptimizerArgs::parse(OptimizerType::Sgd, "SGD.__init__()", &pairs(&[("lrr", ArgValue::Number(0.1))]))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "SGD.__init__() got an unexpected keyword argument 'lrr'");
        let e =
            OptimizerArgs::parse(OptimizerType::Sgd, "SGD.__init__()", &pairs(&[("lr", ArgValue::Text("1".into()))]))
                .unwrap_err()
                .to_string();
        assert_eq!(e, "lr must be a number, got the string \"1\"");
        let e =
            OptimizerArgs::parse(OptimizerType::Sgd, "SGD.__init__()", &pairs(&[("nesterov", ArgValue::Number(1.0))]))
                .unwrap_err()
                .to_string();
        assert_eq!(e, "nesterov must be a boolean, got the number 1");
        let e = OptimizerArgs::parse(OptimizerType::Adam, "x", &pairs(&[("betas", ArgValue::Numbers(vec![0.9]))]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("two numbers"), "{e}");
        // A dtype name parses; the optimizer rejects one that is not a float type.
        let a =
            OptimizerArgs::parse(OptimizerType::Adam, "x", &pairs(&[("accumType", ArgValue::Text("int32".into()))]))
                .unwrap();
        let e = Optimizer::new(OptimizerType::Adam, a).unwrap_err().to_string();
        assert!(e.starts_with("Accumulation types must be either torch.float32 or torch.float16"), "{e}");
        let e =
            OptimizerArgs::parse(OptimizerType::Adam, "x", &pairs(&[("accumType", ArgValue::Text("double".into()))]))
                .unwrap_err()
                .to_string();
        assert!(e.starts_with("Accumulation types must be either torch.float32 or torch.float16"), "{e}");
    }

    #[test]
    fn parameter_names_map_and_stay_disjoint() {
        let groups = vec![
            ParamGroup { params: vec!["#1".into()], args: OptimizerArgs { lr: Some(0.5), ..Default::default() } },
            ParamGroup { params: vec!["#2".into()], args: OptimizerArgs::default() },
        ];
        let mut opt =
            Optimizer::with_groups(OptimizerType::Sgd, groups, OptimizerArgs { lr: Some(0.1), ..Default::default() })
                .unwrap();
        opt.mark_as_variable("momentum").unwrap();
        let named = opt.map_params(|k| Ok(if k == "#1" { "fc.weight".into() } else { "fc.bias".into() })).unwrap();
        assert_eq!(named.param_groups()[0].params, vec!["fc.weight".to_string()]);
        assert!(!named.is_constant("momentum"), "marks are kept");
        assert_eq!(named.step_for("fc.weight").lr(), 0.5);
        let e = opt.map_params(|_| Ok("w".into())).unwrap_err().to_string();
        assert!(e.contains("more than one parameter group"), "{e}");
    }
}
