//! Whether a new optimizer may replace the one a model was compiled with: PopART's
//! `Optimizer::validReplacement` rules and messages (`willow/src/optimizer.cpp`,
//! `sgd.cpp`, `adam.cpp`, `adaptive.cpp`, `optimizervalue.cpp`, `optimizervaluemap.cpp`).
//!
//! Constant attributes are compiled into the program, so they must keep their value;
//! variable ones are streamed to the device and may change. Each attribute family is a map:
//! a default value (the constructor's) and one specific value per parameter of an explicit
//! group. The checks run in PopART's order and the first failure is the error:
//!
//! 1. clipping (`max_grad_norm`): "Clip norm settings do not match." / "… at index 0 …";
//! 2. the PopART optimizer type (SGD; Adam for Adam, AdamW and LAMB; Adaptive for RMSprop):
//!    "Can not replace optimizer of type A with new optimizer of type B";
//! 3. modes: "Adam modes do not match" (Adam/AdamW vs LAMB, bias correction on vs off),
//!    "Weight decay modes do not match" (Adam's L2 vs AdamW/LAMB's decoupled decay),
//!    "Adaptive modes do not match" (RMSprop centred or not);
//! 4. each family: "Problem with {learning rates|…}. Default value is not a valid
//!    replacement. Values are constant but do not match." (or "Can not replace a constant
//!    value with a non constant value.");
//! 5. SGD's velocity tensor and accumulator layout; the state dtypes of the others
//!    (compiled-in storage; our message, PopART's wording).

use super::{err, GroupValues, Optimizer, OptimizerArgs, OptimizerType};
use crate::tensor::DType;
use crate::{Error, Result};

/// One attribute family: the attribute whose constness rules it, PopART's name for it in
/// messages, and how to read its value.
struct Family {
    attr: &'static str,
    label: &'static str,
    value: fn(&GroupValues, &OptimizerArgs) -> f32,
}

const LOSS_SCALING: Family =
    Family { attr: "loss_scaling", label: "loss scaling", value: |_, d| d.loss_scaling.unwrap_or(1.0) };
const LR: Family = Family { attr: "lr", label: "learning rates", value: |v, _| v.lr };
const WD: Family = Family { attr: "weight_decay", label: "weight decays", value: |v, _| v.weight_decay };
const MOMENTUM: Family = Family { attr: "momentum", label: "momentums", value: |v, _| v.momentum };

fn families(ty: OptimizerType, combined: bool) -> Vec<Family> {
    match ty {
        OptimizerType::Sgd => {
            let mut f = vec![LOSS_SCALING, LR, WD, MOMENTUM];
            if combined {
                f.push(Family {
                    attr: "velocity_scaling",
                    label: "velocity scalings",
                    value: |v, _| v.velocity_scaling,
                });
            }
            f.push(Family { attr: "nesterov", label: "nesterov", value: |v, _| if v.nesterov { 1.0 } else { 0.0 } });
            // PopART compiles dampening in as well but does not name it in its checks.
            f.push(Family { attr: "dampening", label: "dampenings", value: |v, _| v.dampening });
            f
        }
        OptimizerType::Adam | OptimizerType::AdamW | OptimizerType::Lamb => vec![
            LOSS_SCALING,
            LR,
            WD,
            Family { attr: "betas", label: "beta1s", value: |v, _| v.beta1 },
            Family { attr: "betas", label: "beta2s", value: |v, _| v.beta2 },
            Family { attr: "eps", label: "eps", value: |v, _| v.eps },
            Family { attr: "max_weight_norm", label: "mwn", value: |v, _| v.max_weight_norm },
        ],
        OptimizerType::RmsProp => vec![
            LOSS_SCALING,
            LR,
            WD,
            Family { attr: "alpha", label: "alphas", value: |v, _| v.alpha },
            MOMENTUM,
            Family { attr: "eps", label: "eps", value: |v, _| v.eps },
        ],
    }
}

/// PopART's optimizer class behind a PopTorch optimizer.
fn popart_type(ty: OptimizerType) -> &'static str {
    match ty {
        OptimizerType::Sgd => "SGD",
        OptimizerType::Adam | OptimizerType::AdamW | OptimizerType::Lamb => "Adam",
        OptimizerType::RmsProp => "Adaptive",
    }
}

fn popart_dtype(d: DType) -> &'static str {
    match d {
        DType::Float16 => "FLOAT16",
        DType::Float32 => "FLOAT",
        DType::Int32 => "INT32",
        DType::Bool => "BOOL",
    }
}

/// `OptimizerValue::validReplacement`.
fn value_ok(old: (bool, f32), new: (bool, f32)) -> std::result::Result<(), &'static str> {
    if old.0 != new.0 {
        return Err("Can not replace a constant value with a non constant value.");
    }
    if old.0 && old.1 - new.1 != 0.0 {
        return Err("Values are constant but do not match.");
    }
    Ok(())
}

fn replacement_error(detail: impl std::fmt::Display) -> Error {
    err(format!("New optimizer is not a valid replacement. {detail}"))
}

impl Optimizer {
    /// PopART's Adam mode (Adam, AdamNoBias, Lamb, LambNoBias) of an Adam-family optimizer.
    fn adam_mode(&self) -> &'static str {
        let bias = self.defaults.bias_correction.unwrap_or(true);
        match (self.ty, bias) {
            (OptimizerType::Lamb, true) => "Lamb",
            (OptimizerType::Lamb, false) => "LambNoBias",
            (OptimizerType::AdamW, false) => "AdamNoBias",
            _ => "Adam",
        }
    }

    /// Parameters with a specific value: those of the explicit groups, in order.
    fn specific_params(&self) -> Vec<&str> {
        self.groups.iter().flat_map(|g| g.params.iter().map(String::as_str)).collect()
    }

    /// Checks that `new` can replace `self` on a compiled model (PopART's rules, see the
    /// module docs). `Ok` means every difference is in a variable attribute.
    pub fn check_replacement(&self, new: &Optimizer) -> Result<()> {
        let (old_norm, new_norm) = (self.max_grad_norm(), new.max_grad_norm());
        if old_norm.is_finite() != new_norm.is_finite() {
            return Err(replacement_error("Clip norm settings do not match."));
        }
        if old_norm.is_finite() && old_norm != new_norm {
            return Err(replacement_error("Clip norm settings at index 0 do not match."));
        }
        let (a, b) = (popart_type(self.ty), popart_type(new.ty));
        if a != b {
            return Err(replacement_error(format!(
                "Can not replace optimizer of type {a} with new optimizer of type {b}"
            )));
        }
        match a {
            "Adam" => {
                if self.adam_mode() != new.adam_mode() {
                    return Err(replacement_error("Adam modes do not match"));
                }
                let l2 = |o: &Optimizer| o.ty == OptimizerType::Adam;
                if l2(self) != l2(new) {
                    return Err(replacement_error("Weight decay modes do not match"));
                }
            }
            "Adaptive" => {
                let centered = |o: &Optimizer| Optimizer::values(&o.args_for_first()).centered;
                if centered(self) != centered(new) {
                    return Err(replacement_error("Adaptive modes do not match"));
                }
            }
            _ => {}
        }
        let combined = self.use_combined_accum();
        for fam in families(self.ty, combined) {
            self.check_family(new, &fam)?;
        }
        if self.ty == OptimizerType::Sgd {
            let has_velocity =
                |o: &Optimizer| !o.is_constant("momentum") || Optimizer::values(&o.defaults).momentum != 0.0;
            if has_velocity(self) != has_velocity(new) {
                return Err(replacement_error("this does not require a velocity tensor, but other does."));
            }
            if has_velocity(self) {
                let layout = |o: &Optimizer| if o.use_combined_accum() { "Combined" } else { "Separate" };
                if layout(self) != layout(new) {
                    return Err(replacement_error(format!(
                        "this has SGDAccumulatorAndMomentum {}, but other has {}",
                        layout(self),
                        layout(new)
                    )));
                }
                if !combined {
                    let (x, y) = (self.accum_type(), new.accum_type());
                    if x != y {
                        return Err(replacement_error(format!(
                            "this has SGDAccumulatorAndMomentum::Separate and sgdAccumType {}, but other has {}",
                            popart_dtype(x),
                            popart_dtype(y)
                        )));
                    }
                    let v = |o: &Optimizer| o.defaults.velocity_accum_type.unwrap_or(DType::Float32);
                    if v(self) != v(new) {
                        return Err(replacement_error(format!(
                            "this has SGDAccumulatorAndMomentum::Separate and sgd2Accl1Type {}, but other has {}",
                            popart_dtype(v(self)),
                            popart_dtype(v(new))
                        )));
                    }
                }
            }
        } else {
            let types = |o: &Optimizer| {
                (
                    o.defaults.first_order_momentum_accum_type.unwrap_or(DType::Float32),
                    o.defaults.second_order_momentum_accum_type.unwrap_or(DType::Float32),
                )
            };
            let (x, y) = (types(self), types(new));
            for (what, p, q) in [("accl1Type", x.0, y.0), ("accl2Type", x.1, y.1)] {
                if p != q {
                    return Err(replacement_error(format!(
                        "this has {what} {}, but other has {}",
                        popart_dtype(p),
                        popart_dtype(q)
                    )));
                }
            }
        }
        Ok(())
    }

    /// The resolved arguments of the first group (the defaults without explicit groups).
    fn args_for_first(&self) -> OptimizerArgs {
        self.groups.first().map_or(self.defaults.clone(), |g| g.args.or(&self.defaults))
    }

    /// `OptimizerValueMap::validReplacement` for one family (or `OptimizerValue` for the
    /// global loss scaling).
    /// The error names the family: `Problem with <family>. <detail>`.
    fn check_family(&self, new: &Optimizer, fam: &Family) -> Result<()> {
        let fail = |detail: &dyn std::fmt::Display| replacement_error(format!("Problem with {}. {detail}", fam.label));
        let get = |o: &Optimizer, args: &OptimizerArgs| {
            (o.is_constant(fam.attr), (fam.value)(&Optimizer::values(args), &o.defaults))
        };
        let old_default = get(self, &self.defaults);
        let new_default = get(new, &new.defaults);
        if fam.attr == "loss_scaling" {
            return value_ok(old_default, new_default).map_err(|e| fail(&e));
        }
        value_ok(old_default, new_default)
            .map_err(|e| fail(&format!("Default value is not a valid replacement. {e}")))?;
        let (olds, news) = (self.specific_params(), new.specific_params());
        if olds.len() != news.len() {
            return Err(fail(&"Replacement OptimizerValueMap has a different number of specific tensors."));
        }
        for p in olds {
            if !news.contains(&p) {
                return Err(fail(&format!("Could not find tensor {p} in replacement OptimizerValueMap.")));
            }
            let (o, n) = (get(self, &self.args_for(p)), get(new, &new.args_for(p)));
            value_ok(o, n)
                .map_err(|e| fail(&format!("OptimizerValue for tensor {p} is not a valid replacement.{e}")))?;
        }
        Ok(())
    }
}
