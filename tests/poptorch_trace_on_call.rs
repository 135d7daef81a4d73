//! PopTorch traces a model on its first call, with that call's micro-batch shapes: a wrapper
//! can be made of a model known only by its weights (`HostModel::untraced`), which gets its
//! trace before it compiles (`PoplarExecutor::attach_trace`). This is how the JS API wraps
//! a JS module; the results must be those of wrapping a traced model.

use ipu_playground::ir::{Reduction, TensorType};
use ipu_playground::poptorch::{
    inference_model, input_types, training_model, HostModel, Optimizer, OptimizerArgs, Options,
};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::{DType, Param, Tensor};
use ipu_playground::trace::nn::{call, Linear, Module};
use ipu_playground::trace::{Trace, Tracer};
use std::rc::Rc;

/// `fc` then a mean squared loss against `y`, traced for `batch` rows.
fn traced(fc: &Linear, batch: usize) -> Trace {
    let tr = Tracer::new();
    let x = tr.input("x", &[batch, 3], DType::Float32).unwrap();
    let y = tr.input("y", &[batch, 2], DType::Float32).unwrap();
    let out = call(&tr, "fc", fc, &x).unwrap();
    let d = out.sub(&y).unwrap();
    let loss = d.mul(&d).unwrap().mean(&[], false).unwrap().identity_loss(Reduction::Mean).unwrap();
    tr.finish(&[&out, &loss]).unwrap()
}

fn weights(fc: &Linear) -> Vec<(String, Param)> {
    fc.named_parameters().into_iter().map(|(n, t)| (format!("fc.{n}"), t)).collect()
}

fn data(n: usize) -> (Rc<Tensor>, Rc<Tensor>) {
    let mut rng = Rng::new(3);
    let x: Vec<f32> = (0..n * 3).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
    let y: Vec<f32> = (0..n * 2).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
    (Rc::new(Tensor::from_f32(&[n, 3], x).unwrap()), Rc::new(Tensor::from_f32(&[n, 2], y).unwrap()))
}

fn sgd() -> Optimizer {
    Optimizer::sgd(OptimizerArgs { lr: Some(0.1), momentum: Some(0.9), ..OptimizerArgs::default() }).unwrap()
}

fn opts() -> Options {
    let mut o = Options::new();
    o.device_iterations(2).unwrap().replication_factor(2).unwrap().gradient_accumulation(2).unwrap();
    o
}

#[test]
fn a_model_traced_on_its_first_call_trains_as_one_traced_up_front() {
    let fc = Linear::new(3, 2, true, &mut Rng::new(0)).unwrap();
    let (x, y) = data(16);

    let eager = HostModel::new(&traced(&fc, 2));
    let mut a = training_model(&eager, &mut opts(), Some(sgd())).unwrap();
    let out_a = a.call(&[x.clone(), y.clone()]).unwrap();

    let lazy = HostModel::untraced(weights(&fc), Vec::new());
    assert!(!lazy.is_traced());
    let mut b = training_model(&lazy, &mut opts(), Some(sgd())).unwrap();
    let e = training_model(&lazy, &mut Options::new(), None).err().unwrap().to_string();
    assert!(e.starts_with("Model has already been wrapped"), "wrapping twice is caught before tracing: {e}");
    // The micro-batch types of the first call: 16 rows over 2 × 2 × 2 micro-batches.
    let types = [TensorType { shape: vec![16, 3], dtype: DType::Float32 }];
    assert_eq!(b.micro_batch_types(&types).unwrap()[0].shape, vec![2, 3]);
    let e = b.call(&[x.clone(), y.clone()]).unwrap_err().to_string();
    assert!(e.contains("not been traced"), "{e}");
    b.attach_trace(&traced(&fc, 2)).unwrap();
    assert!(b.model().is_traced() && b.model().same_weights(&lazy));
    let out_b = b.call(&[x, y]).unwrap();
    assert_eq!(out_a, out_b);
    for (n, t) in eager.parameters() {
        assert_eq!(lazy.parameter(&n).unwrap().value().unwrap(), t.value().unwrap(), "{n} trained the same");
    }
    let e = b.attach_trace(&traced(&fc, 2)).unwrap_err().to_string();
    assert!(e.contains("already compiled"), "{e}");
}

#[test]
fn the_micro_batch_of_a_call_is_poptorchs_batch_dimension_rule() {
    let fc = Linear::new(3, 2, true, &mut Rng::new(0)).unwrap();
    let m = training_model(&HostModel::untraced(weights(&fc), Vec::new()), &mut opts(), None).unwrap();
    let e = m.micro_batch_types(&[TensorType { shape: vec![12, 3], dtype: DType::Float32 }]).unwrap_err().to_string();
    assert!(
        e.starts_with("Invalid batch dimension: In the input torch.Size([12, 3]), the batch dimension (12)"),
        "{e}"
    );
    assert!(e.contains("= 8 because"), "{e}");
}

#[test]
fn a_plan_needs_no_compilation_and_then_is_the_compiled_plan() {
    let fc = Linear::new(3, 2, true, &mut Rng::new(0)).unwrap();
    let (x, y) = data(16);
    let model = HostModel::untraced(weights(&fc), Vec::new());
    let mut m = training_model(&model, &mut opts(), None).unwrap();
    m.attach_trace(&traced(&fc, 2)).unwrap();
    let before = m.plan_for(&input_types(&[x.clone(), y.clone()])).unwrap();
    assert!(!m.is_compiled(), "planning does not compile");
    assert!(before.valid, "{:?}", before.errors);
    m.compile(&[x.clone(), y.clone()]).unwrap();
    let after = m.plan_for(&input_types(&[x, y.clone()])).unwrap();
    assert_eq!(before.to_json(), after.to_json());
    let (x8, y8) = data(8);
    let e = m.plan_for(&input_types(&[x8, y8])).unwrap_err().to_string();
    assert!(e.starts_with("Shape mismatch for x: expected torch.Size([16, 3]) but got torch.Size([8, 3])"), "{e}");
}

#[test]
fn a_plan_report_is_the_plan_poptorch_refuses_with_its_reasons_and_counts_what_compiles() {
    // Three replicas of a one-IPU model: three IPUs, not a power of two (PopTorch refuses it
    // unless autoRoundNumIPUs rounds up to four).
    let fc = Linear::new(3, 2, true, &mut Rng::new(0)).unwrap();
    let (x, y) = data(6);
    let types = input_types(&[x.clone(), y.clone()]);
    let wrapped = |round: bool| {
        let mut o = Options::new();
        o.replication_factor(3).unwrap().auto_round_num_ipus(round).unwrap();
        let mut m = training_model(&HostModel::untraced(weights(&fc), Vec::new()), &mut o, Some(sgd())).unwrap();
        m.attach_trace(&traced(&fc, 2)).unwrap();
        m
    };
    let mut refused = wrapped(false);
    let e = refused.plan_for(&types).unwrap_err();
    assert_eq!(e.code(), Some("ipu_count_not_power_of_two"), "{e}");
    let report = refused.plan_report(&types).unwrap();
    assert!(!report.valid);
    let d = report.errors.iter().find(|d| d.code == "ipu_count_not_power_of_two").expect("PopTorch's reason");
    assert_eq!(d.option.as_deref(), Some("autoRoundNumIPUs"));
    assert!(e.message().starts_with(&d.message), "the report's reason is the error compiling throws: {e}");
    assert_eq!(refused.compile(&[x.clone(), y.clone()]).unwrap_err().code(), Some("ipu_count_not_power_of_two"));
    // SGD with momentum: one velocity per weight (6 + 2 floats), as the accepted model compiles it.
    let mut accepted = wrapped(true);
    accepted.compile(&[x.clone(), y.clone()]).unwrap();
    let state = |p: &ipu_playground::compile::Plan| p.memory.ipus.iter().map(|i| i.always_live.optimizer).sum::<u64>();
    assert_eq!(state(&report), 4 * 8);
    assert_eq!(state(accepted.plan().unwrap()), state(&report));
    // A compiled model's report is its compiled plan, with what the wrapper logged since.
    accepted.compile(&[x.clone(), y]).unwrap();
    let logged = accepted.plan_report(&types).unwrap();
    assert_eq!(logged.warnings.last().map(|w| w.code), Some("compile_ignored"));
    assert_eq!(logged.warnings.len(), accepted.plan().unwrap().warnings.len() + 1);
    // Inputs that do not divide into micro-batches are still an error.
    let (x5, y5) = data(5);
    assert!(wrapped(false).plan_report(&input_types(&[x5, y5])).is_err());
}

#[test]
fn adopting_a_trace_keeps_host_values_and_adds_what_is_new() {
    let fc = Linear::new(3, 2, true, &mut Rng::new(0)).unwrap();
    let trained = Tensor::from_f32(&[2, 3], vec![9.0; 6]).unwrap();
    // The host knows the weight (with a newer value) but not the bias.
    let model = HostModel::untraced(vec![("fc.weight".into(), Param::from_tensor(trained.clone()))], Vec::new());
    let m = model.adopt_trace(&traced(&fc, 2));
    assert!(m.is_traced() && m.same_weights(&model));
    assert_eq!(*model.parameter("fc.weight").unwrap().value().unwrap(), trained, "the host value stays");
    assert!(model.parameter("fc.bias").unwrap().same(fc.bias.as_ref().unwrap()), "the traced value is added");
    // An inference wrapper of an untraced model compiles once traced.
    let mut inf = inference_model(&model, &mut Options::new()).unwrap();
    inf.attach_trace(&traced(&fc, 4)).unwrap();
    let (x, y) = data(4);
    let out = inf.call(&[x, y]).unwrap();
    assert_eq!(out[0].shape(), &[4, 2]);
}

#[test]
fn reloading_host_values_before_compiling_takes_any_dtype() {
    // The module was cast to float16 after it was wrapped: its values replace the host's.
    let fc = Linear::new(3, 2, true, &mut Rng::new(0)).unwrap();
    let model = HostModel::untraced(weights(&fc), Vec::new());
    let mut m = inference_model(&model, &mut Options::new()).unwrap();
    let half =
        Linear { weight: fc.weight.cast(DType::Float16), bias: fc.bias.as_ref().map(|b| b.cast(DType::Float16)), ..fc };
    for (n, t) in weights(&half) {
        model.reload_parameter(&n, t);
    }
    assert_eq!(model.parameter("fc.weight").unwrap().dtype(), DType::Float16);
    let tr = Tracer::new();
    let x = tr.input("x", &[2, 3], DType::Float16).unwrap();
    let out = call(&tr, "fc", &half, &x).unwrap();
    m.attach_trace(&tr.finish(&[&out]).unwrap()).unwrap();
    let y = m.call(&[Rc::new(Tensor::full(&[2, 3], DType::Float16, 1.0))]).unwrap();
    assert_eq!(y[0].dtype(), DType::Float16);
    // Once set, a value of another dtype cannot replace it through set_parameter.
    assert!(model.set_parameter("fc.weight", Tensor::zeros(&[2, 3], DType::Float32)).is_err());
}

#[test]
fn planning_a_large_model_makes_none_of_its_weights_and_compiling_makes_them_all() {
    // 4 × Linear(8192, 8192): 1 GiB of float32 weights, none of them allocated to plan.
    let mut rng = Rng::new(1);
    let layers: Vec<Linear> = (0..4).map(|_| Linear::new(8192, 8192, true, &mut rng).unwrap()).collect();
    let tr = Tracer::new();
    let mut h = tr.input("x", &[2, 8192], DType::Float32).unwrap();
    for (i, l) in layers.iter().enumerate() {
        h = call(&tr, &format!("l{i}"), l, &h).unwrap();
    }
    let loss = h.mul(&h).unwrap().mean(&[], false).unwrap().identity_loss(Reduction::Mean).unwrap();
    let model = HostModel::new(&tr.finish(&[&loss]).unwrap());
    let mut o = Options::new();
    o.gradient_accumulation(1024).unwrap();
    let mut m = training_model(&model, &mut o, Some(sgd())).unwrap();
    let x = TensorType { shape: vec![2 * 1024, 8192], dtype: DType::Float32 };
    let plan = m.plan_for(&[x]).unwrap();
    assert!(plan.training && plan.errors.iter().all(|e| e.code == "out_of_memory"), "{:?}", plan.errors);
    assert_eq!(model.parameters().len(), 8);
    assert!(model.parameters().iter().all(|(_, p)| !p.is_materialised()), "planning made a weight");
    assert!(layers.iter().all(|l| !l.weight.is_materialised()));

    // A small model compiles: every weight is made once, shared by the module and the host.
    let fc = Linear::new(3, 2, true, &mut Rng::new(0)).unwrap();
    let model = HostModel::new(&traced(&fc, 2));
    let mut m = training_model(&model, &mut opts(), Some(sgd())).unwrap();
    let (x, y) = data(16);
    m.compile(&[x, y]).unwrap();
    assert!(fc.weight.is_materialised() && fc.bias.as_ref().unwrap().is_materialised());
}
