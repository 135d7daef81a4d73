use super::*;

fn args() -> OptimizerArgs {
    OptimizerArgs::default()
}

#[test]
fn defaults_follow_poptorch() {
    let lamb = Optimizer::lamb(args()).unwrap();
    match lamb.step_for("w") {
        OptimizerStep::Lamb { lr, beta1, beta2, eps, weight_decay, bias_correction, max_weight_norm, .. } => {
            assert_eq!((lr, beta1, beta2, eps, weight_decay), (1e-3, 0.9, 0.999, 1e-8, 1e-2));
            assert!(bias_correction);
            assert_eq!(max_weight_norm, 65500.0);
        }
        s => panic!("{s:?}"),
    }
    assert_eq!(lamb.loss_scaling(), 1.0);
    assert_eq!(lamb.max_grad_norm(), f32::INFINITY);
    let adamw = Optimizer::adamw(args()).unwrap();
    match adamw.step_for("w") {
        OptimizerStep::Adam { weight_decay, decoupled, bias_correction, .. } => {
            assert_eq!(weight_decay, 1e-2);
            assert!(decoupled && bias_correction);
        }
        s => panic!("{s:?}"),
    }
    let rms = Optimizer::rmsprop(args()).unwrap();
    assert!(matches!(rms.step_for("w"), OptimizerStep::RmsProp { lr, alpha, .. } if lr == 1e-2 && alpha == 0.99));
    let e = Optimizer::sgd(args()).unwrap_err().to_string();
    assert!(e.contains("required") && e.contains("'lr'"), "{e}");
}

#[test]
fn unexpected_arguments_and_bad_values_are_named() {
    let e =
        Optimizer::sgd(OptimizerArgs { lr: Some(0.1), betas: Some((0.9, 0.99)), ..args() }).unwrap_err().to_string();
    assert_eq!(e, "SGD.__init__() got an unexpected keyword argument 'betas'");
    let e = Optimizer::adam(OptimizerArgs { accum_type: Some(DType::Int32), ..args() }).unwrap_err().to_string();
    assert!(e.starts_with("Accumulation types must be either torch.float32 or torch.float16"), "{e}");
    let e = Optimizer::adam(OptimizerArgs { amsgrad: Some(true), ..args() }).unwrap_err().to_string();
    assert_eq!(e, "Only non-amsgrad Adam/AdamW optimizers are supported.");
    let e = Optimizer::sgd(OptimizerArgs { lr: Some(-1.0), ..args() }).unwrap_err().to_string();
    assert_eq!(e, "Invalid learning rate: -1");
    let e = Optimizer::adam(OptimizerArgs { betas: Some((0.9, 1.0)), ..args() }).unwrap_err().to_string();
    assert_eq!(e, "Invalid beta parameter at index 1: 1");
    let e = Optimizer::sgd(OptimizerArgs { lr: Some(0.1), nesterov: Some(true), ..args() }).unwrap_err().to_string();
    assert!(e.contains("Nesterov"), "{e}");
    let e = Optimizer::sgd(OptimizerArgs { lr: Some(0.1), max_grad_norm: Some(f32::NAN), ..args() })
        .unwrap_err()
        .to_string();
    assert_eq!(e, "Maximum norm of gradients cannot be NaN");
    let groups = vec![
        ParamGroup { params: vec!["a".into()], args: OptimizerArgs { centered: Some(true), ..args() } },
        ParamGroup { params: vec!["b".into()], args: args() },
    ];
    let e = Optimizer::with_groups(OptimizerType::RmsProp, groups, args()).unwrap_err().to_string();
    assert!(e.contains("same value for the 'centered' attribute (Group 0: True / Group 1: False)"), "{e}");
    let groups =
        vec![ParamGroup { params: vec!["a".into()], args: OptimizerArgs { loss_scaling: Some(2.0), ..args() } }];
    let e = Optimizer::with_groups(OptimizerType::Adam, groups, args()).unwrap_err().to_string();
    assert!(e.contains("'loss_scaling'") && e.contains("global"), "{e}");
}

#[test]
fn explicit_arguments_are_variable_lr_always() {
    let opt = Optimizer::adam(OptimizerArgs { betas: Some((0.8, 0.9)), ..args() }).unwrap();
    assert!(!opt.is_constant("lr"), "lr is always variable");
    assert!(!opt.is_constant("betas"));
    assert!(opt.is_constant("eps") && opt.is_constant("weight_decay") && opt.is_constant("loss_scaling"));
    let mut opt = Optimizer::sgd(OptimizerArgs { lr: Some(0.1), momentum: Some(0.9), ..args() }).unwrap();
    assert!(!opt.is_constant("momentum"));
    opt.mark_as_constant("momentum").unwrap();
    assert!(opt.is_constant("momentum"));
    opt.mark_as_variable("weight_decay").unwrap();
    assert!(!opt.is_constant("weight_decay"));
    let e = opt.mark_as_constant("betas").unwrap_err().to_string();
    assert_eq!(
        e,
        "Unknown attribute betas, allowed values: ['lr', 'momentum', 'dampening', 'weight_decay', 'nesterov', \
         'loss_scaling']"
    );
    // velocity_scaling exists only in the combined variant.
    let mut c = Optimizer::sgd(OptimizerArgs { lr: Some(0.1), use_combined_accum: Some(true), ..args() }).unwrap();
    c.mark_as_variable("velocity_scaling").unwrap();
}

#[test]
fn groups_override_the_defaults_and_the_rest_use_them() {
    let groups = vec![ParamGroup { params: vec!["fc.weight".into()], args: OptimizerArgs { lr: Some(0.5), ..args() } }];
    let opt = Optimizer::with_groups(
        OptimizerType::Sgd,
        groups,
        OptimizerArgs { lr: Some(0.1), momentum: Some(0.9), ..args() },
    )
    .unwrap();
    assert!(
        matches!(opt.step_for("fc.weight"), OptimizerStep::Sgd { lr, momentum, .. } if lr == 0.5 && momentum == 0.9)
    );
    assert!(matches!(opt.step_for("fc.bias"), OptimizerStep::Sgd { lr, .. } if lr == 0.1));
    let e = opt.check_params(&["fc.bias".to_string()]).unwrap_err().to_string();
    assert!(e.contains("'fc.weight'") && e.contains("not a parameter"), "{e}");
    let dup = vec![
        ParamGroup { params: vec!["a".into()], args: args() },
        ParamGroup { params: vec!["a".into()], args: args() },
    ];
    let e = Optimizer::with_groups(OptimizerType::Adam, dup, args()).unwrap_err().to_string();
    assert!(e.contains("more than one parameter group"), "{e}");
}

#[test]
fn update_and_set_lr_change_values_or_nothing() {
    let mut opt = Optimizer::sgd(OptimizerArgs { lr: Some(0.1), ..args() }).unwrap();
    opt.set_lr(0.05).unwrap();
    assert_eq!(opt.step_for("x").lr(), 0.05);
    let before = opt.clone();
    assert!(opt.update(None, OptimizerArgs { momentum: Some(-1.0), ..args() }).is_err());
    assert_eq!(opt, before, "a failed update changes nothing");
    assert!(opt.update(Some(0), OptimizerArgs { lr: Some(1.0), ..args() }).is_err(), "no explicit group 0");
}

fn sgd(lr: f32, momentum: Option<f32>) -> Optimizer {
    Optimizer::sgd(OptimizerArgs { lr: Some(lr), momentum, ..args() }).unwrap()
}

#[test]
fn replacement_changing_a_variable_attribute_is_valid() {
    sgd(0.1, Some(0.9)).check_replacement(&sgd(0.01, Some(0.5))).unwrap();
    let a = Optimizer::adam(OptimizerArgs { lr: Some(1e-3), ..args() }).unwrap();
    let b = Optimizer::adam(OptimizerArgs { lr: Some(1e-4), ..args() }).unwrap();
    a.check_replacement(&b).unwrap();
}

#[test]
fn replacement_changing_a_constant_fails_with_poparts_message() {
    // momentum not passed → constant 0; passing it makes it variable.
    let e = sgd(0.1, None).check_replacement(&sgd(0.1, Some(0.9))).unwrap_err().to_string();
    assert_eq!(
        e,
        "New optimizer is not a valid replacement. Problem with momentums. Default value is not a valid \
         replacement. Can not replace a constant value with a non constant value."
    );
    let mut a = sgd(0.1, Some(0.9));
    a.mark_as_constant("momentum").unwrap();
    let mut b = sgd(0.1, Some(0.5));
    b.mark_as_constant("momentum").unwrap();
    let e = a.check_replacement(&b).unwrap_err().to_string();
    assert_eq!(
        e,
        "New optimizer is not a valid replacement. Problem with momentums. Default value is not a valid \
         replacement. Values are constant but do not match."
    );
    let wd = |w: f32| {
        let mut o = Optimizer::adamw(OptimizerArgs { weight_decay: Some(w), ..args() }).unwrap();
        o.mark_as_constant("weight_decay").unwrap();
        o
    };
    let e = wd(0.01).check_replacement(&wd(0.1)).unwrap_err().to_string();
    assert!(e.contains("Problem with weight decays. Default value is not a valid replacement."), "{e}");
    let ls = |l: f32| Optimizer::adam(OptimizerArgs { loss_scaling: Some(l), ..args() }).unwrap();
    let mut x = ls(128.0);
    x.mark_as_constant("loss_scaling").unwrap();
    let mut y = ls(256.0);
    y.mark_as_constant("loss_scaling").unwrap();
    let e = x.check_replacement(&y).unwrap_err().to_string();
    assert_eq!(
        e,
        "New optimizer is not a valid replacement. Problem with loss scaling. Values are constant but do not match."
    );
}

#[test]
fn replacement_by_another_type_or_mode_fails() {
    let adam = Optimizer::adam(args()).unwrap();
    let e = sgd(0.1, None).check_replacement(&adam).unwrap_err().to_string();
    assert_eq!(e, "New optimizer is not a valid replacement. Can not replace optimizer of type SGD with new optimizer of type Adam");
    let e = adam.check_replacement(&Optimizer::adamw(args()).unwrap()).unwrap_err().to_string();
    assert_eq!(e, "New optimizer is not a valid replacement. Weight decay modes do not match");
    let e =
        Optimizer::adamw(args()).unwrap().check_replacement(&Optimizer::lamb(args()).unwrap()).unwrap_err().to_string();
    assert_eq!(e, "New optimizer is not a valid replacement. Adam modes do not match");
    let lamb_nb = Optimizer::lamb(OptimizerArgs { bias_correction: Some(false), ..args() }).unwrap();
    let e = Optimizer::lamb(args()).unwrap().check_replacement(&lamb_nb).unwrap_err().to_string();
    assert_eq!(e, "New optimizer is not a valid replacement. Adam modes do not match");
    let e = Optimizer::rmsprop(args()).unwrap().check_replacement(&adam).unwrap_err().to_string();
    assert!(e.ends_with("Can not replace optimizer of type Adaptive with new optimizer of type Adam"), "{e}");
    let clip = Optimizer::adam(OptimizerArgs { max_grad_norm: Some(1.0), ..args() }).unwrap();
    let e = adam.check_replacement(&clip).unwrap_err().to_string();
    assert_eq!(e, "New optimizer is not a valid replacement. Clip norm settings do not match.");
}

#[test]
fn replacement_checks_group_specific_values() {
    let mk = |lr_group: f32, wd_group: f32| {
        let groups = vec![ParamGroup {
            params: vec!["w".into()],
            args: OptimizerArgs { lr: Some(lr_group), weight_decay: Some(wd_group), ..args() },
        }];
        Optimizer::with_groups(OptimizerType::Sgd, groups, OptimizerArgs { lr: Some(0.1), ..args() }).unwrap()
    };
    mk(0.5, 0.0).check_replacement(&mk(0.7, 0.0)).unwrap();
    let e = mk(0.5, 0.0).check_replacement(&mk(0.5, 0.01)).unwrap_err().to_string();
    assert_eq!(
        e,
        "New optimizer is not a valid replacement. Problem with weight decays. OptimizerValue for tensor w is not a \
         valid replacement.Values are constant but do not match."
    );
    let e = mk(0.5, 0.0).check_replacement(&sgd(0.1, None)).unwrap_err().to_string();
    assert!(e.ends_with("Replacement OptimizerValueMap has a different number of specific tensors."), "{e}");
}
