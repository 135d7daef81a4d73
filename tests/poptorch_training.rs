//! PopTorch-style wrappers (`poptorch::training_model` / `inference_model`) run with IPU
//! semantics on the CPU executor: wrapping rules, loss rules, `set_optimizer`, equivalence
//! with the plain executor, float16 and loss scaling, input gradients. Test names start
//! with the family they check.

use ipu_playground::autograd::{training_graph, TrainOptions};
use ipu_playground::compile::options::{MeanReductionStrategy, OutputMode, ReductionType};
use ipu_playground::compile::ExecutionStrategy;
use ipu_playground::exec::{run, Store};
use ipu_playground::ir::{OptimizerStep, Reduction};
use ipu_playground::poptorch::executor::PoplarExecutor;
use ipu_playground::poptorch::{
    inference_model, input_types, training_model, BatchInput, HostModel, Optimizer, OptimizerArgs, OptimizerType,
    Options, ParamGroup,
};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::{DType, Tensor};
use ipu_playground::trace::nn::{call, Linear};
use ipu_playground::trace::{Trace, Tracer, Var};
use std::rc::Rc;

fn half(l: Linear) -> Linear {
    Linear { weight: l.weight.cast(DType::Float16), bias: l.bias.map(|b| b.cast(DType::Float16)), ..l }
}

/// A two-layer classifier traced for `batch` samples; `loss` turns (logits, labels) into
/// the loss. Outputs: (logits, loss).
fn classifier_with(batch: usize, seed: u64, dtype: DType, loss: impl FnOnce(&Var, &Var) -> Var) -> Trace {
    let mut rng = Rng::new(seed);
    let (mut l1, mut l2) = (Linear::new(3, 5, true, &mut rng).unwrap(), Linear::new(5, 2, true, &mut rng).unwrap());
    if dtype == DType::Float16 {
        (l1, l2) = (half(l1), half(l2));
    }
    let tr = Tracer::new();
    let x = tr.input("x", &[batch, 3], dtype).unwrap();
    let y = tr.input("y", &[batch], DType::Int32).unwrap();
    let h = call(&tr, "fc1", &l1, &x).unwrap().tanh().unwrap();
    let logits = call(&tr, "fc2", &l2, &h).unwrap();
    let l = loss(&logits, &y);
    tr.finish(&[&logits, &l]).unwrap()
}

/// The classifier with a mean cross-entropy loss.
fn classifier(batch: usize, dtype: DType) -> Trace {
    classifier_with(batch, 1, dtype, |l, y| l.cross_entropy(y, None, Reduction::Mean, None).unwrap())
}

fn data(n: usize, seed: u64, dtype: DType) -> (Rc<Tensor>, Rc<Tensor>) {
    let mut rng = Rng::new(seed);
    let x: Vec<f32> = (0..n * 3).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
    let y: Vec<i32> = (0..n).map(|i| ((i * 7 + 3) % 2) as i32).collect();
    (Rc::new(Tensor::from_f32(&[n, 3], x).unwrap().cast(dtype)), Rc::new(Tensor::from_i32(&[n], y).unwrap()))
}

/// Rows `from..to` of a 2-D or 1-D tensor.
fn rows(t: &Tensor, from: usize, to: usize) -> Rc<Tensor> {
    let shape = t.shape();
    let inner: usize = shape[1..].iter().product();
    let v = t.to_f32_vec()[from * inner..to * inner].to_vec();
    let mut s = shape.to_vec();
    s[0] = to - from;
    Rc::new(Tensor::from_f32(&s, v).unwrap().cast(t.dtype()))
}

fn sgd(lr: f32) -> Optimizer {
    Optimizer::sgd(OptimizerArgs { lr: Some(lr), ..OptimizerArgs::default() }).unwrap()
}

fn params(m: &HostModel) -> Vec<(String, Vec<f32>)> {
    m.parameters().into_iter().map(|(n, t)| (n, t.value().unwrap().to_f32_vec())).collect()
}

fn assert_close(a: &[(String, Vec<f32>)], b: &[(String, Vec<f32>)], atol: f32, rtol: f32, what: &str) {
    assert_eq!(a.len(), b.len());
    for ((n, x), (m, y)) in a.iter().zip(b) {
        assert_eq!(n, m);
        for (i, (p, q)) in x.iter().zip(y).enumerate() {
            assert!((p - q).abs() <= atol + rtol * q.abs(), "{what}: {n}[{i}]: {p} vs {q}");
        }
    }
}

/// The plain executor: the model traced for the whole batch, its training graph with one
/// `OptimizerUpdate` per parameter, run `steps` times on consecutive slices of `(x, y)`.
fn plain_training(
    trace: &Trace,
    step: &OptimizerStep,
    x: &Tensor,
    y: &Tensor,
    steps: usize,
) -> Vec<(String, Vec<f32>)> {
    let tg =
        training_graph(&trace.graph, 1, &TrainOptions { optimizer: Some(step.clone()), ..Default::default() }).unwrap();
    let mut store = Store::from_params(&trace.params, &trace.buffers, 0).unwrap();
    let n = x.shape()[0] / steps;
    for s in 0..steps {
        run(&tg.graph, &mut store, &[rows(x, s * n, (s + 1) * n), rows(y, s * n, (s + 1) * n)]).unwrap();
    }
    trace.params.iter().map(|(name, _)| (name.clone(), store.params[name].to_f32_vec())).collect()
}

fn options(d: usize, r: usize, a: usize) -> Options {
    let mut o = Options::new();
    o.device_iterations(d).unwrap().replication_factor(r).unwrap().gradient_accumulation(a).unwrap();
    o
}

// ---- the plan of a wrapped model ----

/// The optimizer state the plan of a training model on `optimizer` keeps on the device.
fn planned_optimizer_state(optimizer: Option<Optimizer>) -> u64 {
    let model = HostModel::new(&classifier(4, DType::Float32));
    let mut m = training_model(&model, &mut Options::new(), optimizer).unwrap();
    let (x, y) = data(4, 0, DType::Float32);
    let plan = m.plan_for(&input_types(&[x, y])).unwrap();
    assert!(plan.valid && plan.training);
    plan.memory.ipus.iter().map(|i| i.always_live.optimizer).sum()
}

#[test]
fn memory_a_training_models_plan_counts_its_optimizers_state_per_parameter_group() {
    // fc1: 3×5 + 5 = 20 elements, fc2: 5×2 + 2 = 12; float32 state.
    let adam = Optimizer::adam(OptimizerArgs::default()).unwrap();
    assert_eq!(planned_optimizer_state(Some(adam)), 2 * 32 * 4, "Adam: two moments per element");
    assert_eq!(planned_optimizer_state(None), 0, "the default SGD(lr=0.01) keeps no state");
    let momentum = OptimizerArgs { lr: Some(0.01), momentum: Some(0.9), ..OptimizerArgs::default() };
    let sgd = Optimizer::sgd(momentum.clone()).unwrap();
    assert_eq!(planned_optimizer_state(Some(sgd)), 32 * 4, "SGD with momentum: one velocity per element");
    // The optimizer's updates change no liveness: the predicted peak of live bytes is the
    // one the executor measures running the step.
    let model = HostModel::new(&classifier(4, DType::Float32));
    let adam = Optimizer::adam(OptimizerArgs::default()).unwrap();
    let mut m = training_model(&model, &mut Options::new(), Some(adam)).unwrap();
    let (x, y) = data(4, 0, DType::Float32);
    let predicted = m.plan_for(&input_types(&[x.clone(), y.clone()])).unwrap().memory.ipus[0].live_peak_bytes;
    m.call(&[x, y]).unwrap();
    assert!(predicted > 0);
    assert_eq!(predicted, m.last_stats().unwrap().peak_bytes);
    // A group with momentum for fc1 only: only fc1's elements keep a velocity.
    let groups = vec![
        ParamGroup { params: vec!["fc1.weight".into(), "fc1.bias".into()], args: momentum },
        ParamGroup { params: vec!["fc2.weight".into(), "fc2.bias".into()], args: OptimizerArgs::default() },
    ];
    let grouped = Optimizer::with_groups(
        OptimizerType::Sgd,
        groups,
        OptimizerArgs { lr: Some(0.01), ..OptimizerArgs::default() },
    );
    assert_eq!(planned_optimizer_state(Some(grouped.unwrap())), 20 * 4);
}

// ---- wrapping ----

#[test]
fn wrapping_twice_is_poptorchs_error_until_destroy() {
    let model = HostModel::new(&classifier(2, DType::Float32));
    let mut m = training_model(&model, &mut Options::new(), None).unwrap();
    let e = training_model(&model, &mut Options::new(), None).err().unwrap().to_string();
    assert_eq!(
        e,
        "Model has already been wrapped in 'poptorch.trainingModel'. Call model.destroy() on the model to unwrap \
         before wrapping again."
    );
    // An inference model of a wrapped model is fine (train, then validate).
    inference_model(&model, &mut Options::new()).unwrap();
    m.destroy().unwrap();
    training_model(&model, &mut Options::new(), None).unwrap();
}

#[test]
fn wrapping_inference_with_accumulation_or_an_optimizer_fails() {
    let model = HostModel::new(&classifier(2, DType::Float32));
    let mut o = options(1, 1, 2);
    let e = inference_model(&model, &mut o).err().unwrap().to_string();
    assert_eq!(
        e,
        "You must set poptorch.Options().Training.gradientAccumulation to 1 or leave it as its default value (1) \
         when running a poptorch.inferenceModel(). Use poptorch.Options().deviceIterations to process a sufficient \
         number of batches each run for pipelined execution instead."
    );
    let mut o = options(1, 1, 2);
    o.set_execution_strategy(ExecutionStrategy::parse("sharded").unwrap()).unwrap();
    let e = inference_model(&model, &mut o).err().unwrap().to_string();
    assert!(e.ends_with("when running a poptorch.inferenceModel()."), "no pipelining hint when sharded: {e}");
    let e = PoplarExecutor::new(&model, &mut Options::new(), false, Some(sgd(0.1))).err().unwrap().to_string();
    assert_eq!(e, "Optimizer should be None for inference");
    let mut inf = inference_model(&model, &mut Options::new()).unwrap();
    assert_eq!(inf.set_optimizer(sgd(0.1)).unwrap_err().to_string(), "Optimizer should be None for inference");
}

#[test]
fn wrapping_a_plan_error_is_thrown_with_its_fix_code_and_option() {
    // Three layers in blocks on IPUs 0, 1 and 2: PopTorch reserves a power of two, so the
    // model's three IPUs are an error without autoRoundNumIPUs; the thrown error names the
    // fix as the plan's diagnostic does.
    let mut rng = Rng::new(2);
    let layers: Vec<Linear> = (0..3).map(|_| Linear::new(3, 3, true, &mut rng).unwrap()).collect();
    let tr = Tracer::new();
    let mut h = tr.input("x", &[2, 3], DType::Float32).unwrap();
    for (i, l) in layers.iter().enumerate().take(2) {
        h = tr.block(&format!("b{i}"), Some(i), || call(&tr, &format!("fc{i}"), l, &h)).unwrap();
    }
    let loss = tr
        .block("b2", Some(2), || call(&tr, "fc2", &layers[2], &h)?.mean(&[], false)?.identity_loss(Reduction::Sum))
        .unwrap();
    let model = HostModel::new(&tr.finish(&[&loss]).unwrap());
    let sharded = || {
        let mut o = Options::new();
        o.set_execution_strategy(ExecutionStrategy::parse("sharded").unwrap()).unwrap();
        o
    };
    let (x, _) = data(2, 3, DType::Float32);
    let mut m = training_model(&model, &mut sharded(), None).unwrap();
    let e = m.call(std::slice::from_ref(&x)).unwrap_err();
    assert_eq!(e.kind(), ipu_playground::ErrorKind::Plan);
    assert_eq!((e.code(), e.option()), (Some("ipu_count_not_power_of_two"), Some("autoRoundNumIPUs")));
    let fix = e.fix().unwrap();
    assert!(fix.contains("poptorch.Options().autoRoundNumIPUs(True)"), "{fix}");
    assert!(e.message().contains("uses 3 IPUs") && e.message().ends_with(fix), "{e}");
    m.destroy().unwrap();
    let mut o = sharded();
    o.auto_round_num_ipus(true).unwrap();
    let mut m = training_model(&model, &mut o, None).unwrap();
    m.call(std::slice::from_ref(&x)).unwrap();
}

#[test]
fn wrapping_freezes_options_and_the_default_optimizer_is_sgd_lr_0_01() {
    let trace = classifier(4, DType::Float32);
    let model = HostModel::new(&trace);
    let mut o = Options::new();
    let mut m = training_model(&model, &mut o, None).unwrap();
    assert!(o.device_iterations(2).is_err(), "options given to a wrapper are frozen");
    assert_eq!(m.optimizer().unwrap().step_for("fc1.weight"), OptimizerStep::sgd(0.01, 0.0, 0.0));
    let (x, y) = data(4, 3, DType::Float32);
    m.call(&[x.clone(), y.clone()]).unwrap();
    let want = plain_training(&trace, &OptimizerStep::sgd(0.01, 0.0, 0.0), &x, &y, 1);
    assert_close(&params(&model), &want, 1e-7, 1e-6, "default SGD");
}

#[test]
fn wrapping_compile_copies_and_static_input_shapes() {
    let model = HostModel::new(&classifier(2, DType::Float32));
    let mut m = training_model(&model, &mut options(1, 2, 2), None).unwrap();
    assert_eq!(m.copy_weights_to_host().unwrap_err().to_string(), "Model has not been compiled or has been destroyed.");
    assert_eq!(
        m.copy_weights_to_device().unwrap_err().to_string(),
        "Model has not been compiled or has been destroyed."
    );
    let (x, y) = data(8, 1, DType::Float32);
    m.compile(&[x.clone(), y.clone()]).unwrap();
    assert!(m.is_compiled() && m.warnings().is_empty());
    m.compile(&[x.clone(), y.clone()]).unwrap();
    assert!(m.warnings().contains(&"Call to compile() ignored: the executable is already compiled".to_string()));
    m.call(&[x.clone(), y.clone()]).unwrap();
    let end = "\nThis error occurred because the inputs passed at runtime don't match the inputs used to compile the \
               model.\nTo recompile the model for the new inputs create a new inferenceModel / trainingModel wrapper \
               or call destroy() on the curent one and try again.";
    let (x4, y4) = data(4, 1, DType::Float32);
    let e = m.call(&[x4, y4]).unwrap_err().to_string();
    assert_eq!(e, format!("Shape mismatch for x: expected torch.Size([8, 3]) but got torch.Size([4, 3]).{end}"));
    let xi = Rc::new(x.cast(DType::Int32));
    let e = m.call(&[xi, y.clone()]).unwrap_err().to_string();
    assert_eq!(e, format!("Data type mismatch for x: expected torch.float32 but got torch.int32.{end}"));
    let e = m.call(std::slice::from_ref(&x)).unwrap_err().to_string();
    assert_eq!(e, format!("Number of positional arguments mismatch: expected 2 arguments but got 1.{end}"));
    // The combined batch must cut into the traced micro-batch.
    let model = HostModel::new(&classifier(2, DType::Float32));
    let mut m = training_model(&model, &mut options(1, 2, 2), None).unwrap();
    let (x, y) = data(12, 1, DType::Float32);
    let e = m.call(&[x, y]).unwrap_err().to_string();
    assert!(e.contains("'x'") && e.contains("f32[2,3]") && e.contains("f32[3,3]"), "{e}");
    // Destroyed: the executable is gone.
    m.destroy().unwrap();
    assert_eq!(m.copy_weights_to_host().unwrap_err().to_string(), "Model has not been compiled or has been destroyed.");
}

// ---- losses ----

#[test]
fn loss_no_loss_and_several_losses_are_poptorchs_errors() {
    let (x, y) = data(2, 1, DType::Float32);
    let no_loss = classifier_with(2, 1, DType::Float32, |l, _| l.mean(&[], false).unwrap());
    let mut m = training_model(&HostModel::new(&no_loss), &mut Options::new(), None).unwrap();
    assert_eq!(m.call(&[x.clone(), y.clone()]).unwrap_err().to_string(), "Couldn't find a loss in graph!");
    let two = classifier_with(2, 1, DType::Float32, |l, y| {
        let a = l.cross_entropy(y, None, Reduction::Mean, None).unwrap();
        let b = l.identity_loss(Reduction::Mean).unwrap();
        a.add(&b).unwrap()
    });
    let mut m = training_model(&HostModel::new(&two), &mut Options::new(), None).unwrap();
    assert_eq!(
        m.call(&[x.clone(), y.clone()]).unwrap_err().to_string(),
        "Multiple independent losses found in graph. Graph must have one final loss. Wrap final graph loss in \
         poptorch.identity_loss."
    );
    // Wrapped in identity_loss: one final loss, and it trains.
    let wrapped = classifier_with(2, 1, DType::Float32, |l, y| {
        let a = l.cross_entropy(y, None, Reduction::Mean, None).unwrap();
        let b = l.identity_loss(Reduction::Mean).unwrap();
        a.add(&b).unwrap().identity_loss(Reduction::Sum).unwrap()
    });
    let mut m = training_model(&HostModel::new(&wrapped), &mut Options::new(), None).unwrap();
    m.call(&[x, y]).unwrap();
}

#[test]
fn loss_identity_loss_reductions_scale_the_gradient() {
    // identity_loss(z, sum) has n times the gradient of identity_loss(z, mean); 'none' is
    // seeded with ones, as sum.
    let step_of = |reduction: Reduction| {
        let t = classifier_with(4, 1, DType::Float32, move |l, _| l.tanh().unwrap().identity_loss(reduction).unwrap());
        let model = HostModel::new(&t);
        let before = params(&model);
        let mut m = training_model(&model, &mut Options::new(), Some(sgd(0.01))).unwrap();
        let (x, y) = data(4, 5, DType::Float32);
        m.call(&[x, y]).unwrap();
        let after = params(&model);
        before
            .iter()
            .zip(after)
            .flat_map(|((_, a), (_, b))| a.iter().zip(b).map(|(p, q)| p - q).collect::<Vec<f32>>())
            .collect::<Vec<f32>>()
    };
    let (mean, sum, none) = (step_of(Reduction::Mean), step_of(Reduction::Sum), step_of(Reduction::None));
    for ((m, s), n) in mean.iter().zip(&sum).zip(&none) {
        assert!((m * 8.0 - s).abs() <= 1e-6 + 1e-4 * s.abs(), "{m} × 8 vs {s}");
        assert!((s - n).abs() <= 1e-7 + 1e-5 * s.abs(), "sum {s} vs none {n}");
    }
}

// ---- set_optimizer ----

#[test]
fn set_optimizer_changing_a_variable_attribute_takes_effect() {
    let model = HostModel::new(&classifier(2, DType::Float32));
    let mut m = training_model(&model, &mut Options::new(), Some(sgd(0.1))).unwrap();
    let (x, y) = data(2, 1, DType::Float32);
    m.call(&[x.clone(), y.clone()]).unwrap();
    let after_one = params(&model);
    m.set_optimizer(sgd(0.0)).unwrap();
    m.call(&[x.clone(), y.clone()]).unwrap();
    assert_eq!(params(&model), after_one, "lr 0: nothing moves");
    m.set_optimizer(sgd(0.1)).unwrap();
    m.call(&[x, y]).unwrap();
    assert_ne!(params(&model), after_one);
}

#[test]
fn set_optimizer_changing_a_constant_fails_and_the_old_one_keeps_working() {
    let (x, y) = data(2, 1, DType::Float32);
    let twin = HostModel::new(&classifier(2, DType::Float32));
    let mut reference = training_model(&twin, &mut Options::new(), Some(sgd(0.1))).unwrap();
    let model = HostModel::new(&classifier(2, DType::Float32));
    let mut m = training_model(&model, &mut Options::new(), Some(sgd(0.1))).unwrap();
    for _ in 0..2 {
        m.call(&[x.clone(), y.clone()]).unwrap();
        reference.call(&[x.clone(), y.clone()]).unwrap();
    }
    // momentum was not passed: a constant 0; passing it makes it variable.
    let with_momentum =
        Optimizer::sgd(OptimizerArgs { lr: Some(0.1), momentum: Some(0.9), ..Default::default() }).unwrap();
    let e = m.set_optimizer(with_momentum).unwrap_err().to_string();
    assert_eq!(
        e,
        "New optimizer is not a valid replacement. Problem with momentums. Default value is not a valid replacement. \
         Can not replace a constant value with a non constant value."
    );
    let e = m.set_optimizer(Optimizer::adam(OptimizerArgs::default()).unwrap()).unwrap_err().to_string();
    assert_eq!(e, "New optimizer is not a valid replacement. Can not replace optimizer of type SGD with new optimizer of type Adam");
    let mut wd =
        Optimizer::sgd(OptimizerArgs { lr: Some(0.1), weight_decay: Some(0.5), ..Default::default() }).unwrap();
    wd.mark_as_constant("weight_decay").unwrap();
    assert!(m.set_optimizer(wd).unwrap_err().to_string().contains("Problem with weight decays"));
    // Nothing half-applied: the old optimizer goes on exactly as the twin's.
    assert_eq!(m.optimizer().unwrap(), &sgd(0.1));
    m.call(&[x.clone(), y.clone()]).unwrap();
    reference.call(&[x, y]).unwrap();
    assert_eq!(params(&model), params(&twin));
}

#[test]
fn set_optimizer_float16_accumulation_needs_the_running_mean() {
    let model = HostModel::new(&classifier(2, DType::Float32));
    let f16acc = || Optimizer::adam(OptimizerArgs { accum_type: Some(DType::Float16), ..Default::default() }).unwrap();
    // Before compilation PopTorch switches the strategy itself.
    let m = training_model(&model, &mut Options::new(), Some(f16acc())).unwrap();
    assert_eq!(
        m.options().training.mean_accumulation_and_replication_reduction_strategy,
        MeanReductionStrategy::Running
    );
    drop(m);
    let model = HostModel::new(&classifier(2, DType::Float32));
    let mut m =
        training_model(&model, &mut Options::new(), Some(Optimizer::adam(OptimizerArgs::default()).unwrap())).unwrap();
    let (x, y) = data(2, 1, DType::Float32);
    m.call(&[x, y]).unwrap();
    let e = m.set_optimizer(f16acc()).unwrap_err().to_string();
    assert_eq!(
        e,
        "Invalid optimizer: the new optimizer would require changing options.Training.\
         meanAccumulationAndReplicationReductionStrategy to poptorch.MeanReductionStrategy.Running but the executable \
         is already compiled."
    );
}

// ---- equivalence with the plain executor ----

fn equivalence_case(opt: Optimizer, d: usize, r: usize, a: usize) {
    let micro = 2;
    let big = micro * r * a;
    let (x, y) = data(big * d, 7, DType::Float32);
    let model = HostModel::new(&classifier(micro, DType::Float32));
    let step = opt.step_for("fc1.weight");
    let mut m = training_model(&model, &mut options(d, r, a), Some(opt)).unwrap();
    m.call(&[x.clone(), y.clone()]).unwrap();
    let want = plain_training(&classifier(big, DType::Float32), &step, &x, &y, d);
    assert_close(&params(&model), &want, 1e-6, 1e-6, &format!("D={d} R={r} A={a}"));
}

#[test]
fn equivalence_replicas_times_accumulation_equal_one_big_batch() {
    let momentum =
        || Optimizer::sgd(OptimizerArgs { lr: Some(0.5), momentum: Some(0.9), ..Default::default() }).unwrap();
    let adam = || Optimizer::adam(OptimizerArgs { lr: Some(0.05), ..Default::default() }).unwrap();
    equivalence_case(momentum(), 1, 2, 2);
    equivalence_case(adam(), 1, 2, 2);
    equivalence_case(adam(), 1, 4, 1);
    equivalence_case(adam(), 1, 1, 4);
    // Device iterations are consecutive optimizer steps on consecutive slices.
    equivalence_case(momentum(), 3, 2, 2);
    equivalence_case(adam(), 3, 2, 2);
}

#[test]
fn equivalence_sum_reduction_and_the_running_mean() {
    let (x, y) = data(8, 7, DType::Float32);
    let run_with = |o: &mut Options, lr: f32| {
        let model = HostModel::new(&classifier(2, DType::Float32));
        let mut m = training_model(&model, o, Some(sgd(lr))).unwrap();
        m.call(&[x.clone(), y.clone()]).unwrap();
        params(&model)
    };
    let post = run_with(&mut options(1, 2, 2), 0.4);
    let mut running = options(1, 2, 2);
    running.set_mean_accumulation_and_replication_reduction_strategy(MeanReductionStrategy::Running).unwrap();
    assert_close(&run_with(&mut running, 0.4), &post, 1e-7, 1e-6, "Running vs Post");
    // Sum over 4 micro-batches with lr/4 is the mean with lr.
    let mut sum = options(1, 2, 2);
    sum.accumulation_and_replication_reduction_type(ReductionType::Sum).unwrap();
    assert_close(&run_with(&mut sum, 0.1), &post, 1e-7, 1e-6, "Sum vs Mean");
}

#[test]
fn equivalence_all_outputs_are_the_big_batch_outputs() {
    let (x, y) = data(8, 9, DType::Float32);
    let model = HostModel::new(&classifier(2, DType::Float32));
    let mut o = options(1, 2, 2);
    o.output_mode(OutputMode::All, None).unwrap();
    let mut m = training_model(&model, &mut o, None).unwrap();
    let big = classifier(8, DType::Float32);
    let mut store = Store::from_params(&big.params, &big.buffers, 0).unwrap();
    let want = run(&big.graph, &mut store, &[x.clone(), y.clone()]).unwrap().outputs[0].to_f32_vec();
    let out = m.call(&[x, y]).unwrap();
    assert_eq!(out[0].shape(), &[8, 2]);
    assert_eq!(out[1].shape(), &[4], "one loss per micro-batch");
    for (p, q) in out[0].to_f32_vec().iter().zip(&want) {
        assert!((p - q).abs() < 1e-6, "{p} vs {q}");
    }
}

// ---- float16 and loss scaling ----

#[test]
fn fp16_training_stays_within_half_precision_of_float32() {
    let (x, y) = data(24, 11, DType::Float32);
    let opt = || Optimizer::adam(OptimizerArgs { lr: Some(0.01), ..Default::default() }).unwrap();
    let half_model = HostModel::new(&classifier(2, DType::Float16));
    let mut m = training_model(&half_model, &mut options(3, 2, 2), Some(opt())).unwrap();
    let out = m.call(&[Rc::new(x.cast(DType::Float16)), y.clone()]).unwrap();
    assert_eq!(out[1].dtype(), DType::Float16);
    let want = plain_training(&classifier(8, DType::Float32), &opt().step_for("w"), &x, &y, 3);
    let got: Vec<(String, Vec<f32>)> = params(&half_model);
    assert!(half_model.parameters().iter().all(|(_, t)| t.dtype() == DType::Float16));
    assert_close(&got, &want, 4e-3, 2e-2, "float16 vs float32");
}

#[test]
fn loss_scaling_manual_leaves_float32_training_unchanged() {
    let (x, y) = data(8, 7, DType::Float32);
    let train = |ls: f32| {
        let model = HostModel::new(&classifier(2, DType::Float32));
        let opt =
            Optimizer::sgd(OptimizerArgs { lr: Some(0.3), loss_scaling: Some(ls), ..Default::default() }).unwrap();
        let mut m = training_model(&model, &mut options(2, 2, 1), Some(opt)).unwrap();
        m.call(&[x.clone(), y.clone()]).unwrap();
        params(&model)
    };
    assert_close(&train(1024.0), &train(1.0), 1e-7, 1e-6, "loss scaling 1024");
}

/// A float16 model whose weight gradient is `x · 2^-14` per element: with `x = 2^-12` it is
/// 2^-26, below float16's smallest subnormal.
fn tiny_gradient_model() -> HostModel {
    let tr = Tracer::new();
    let x = tr.input("x", &[1, 4], DType::Float16).unwrap();
    let w = Rc::new(Tensor::full(&[1, 4], DType::Float16, 0.5));
    let z = x.mul(&tr.param("w", &w).unwrap()).unwrap();
    let loss = z.sum(&[], false).unwrap().scale(2f64.powi(-14)).unwrap().identity_loss(Reduction::Sum).unwrap();
    HostModel::new(&tr.finish(&[&loss]).unwrap())
}

#[test]
fn loss_scaling_rescues_float16_gradients_from_underflow() {
    let x = Rc::new(Tensor::full(&[1, 4], DType::Float16, 2f64.powi(-12)));
    let step = |ls: f32| {
        let model = tiny_gradient_model();
        let opt =
            Optimizer::sgd(OptimizerArgs { lr: Some(65536.0), loss_scaling: Some(ls), ..Default::default() }).unwrap();
        let mut m = training_model(&model, &mut Options::new(), Some(opt)).unwrap();
        m.call(std::slice::from_ref(&x)).unwrap();
        model.parameter("w").unwrap().value().unwrap().to_f32_vec()
    };
    assert_eq!(step(1.0), vec![0.5; 4], "the gradient underflows to 0 in float16");
    // Scaled by 2^15 it is 2^-11 in float16; unscaled in float32 it moves w by 2^16 · 2^-26.
    assert_eq!(step(32768.0), vec![0.5 - 2f32.powi(-10); 4]);
    // A factor past float16's range makes the float16 seed infinite, as on the IPU.
    assert!(step(65536.0).iter().all(|w| !w.is_finite()));
}

#[test]
fn loss_scaling_automatic_doubles_while_gradients_are_small_and_halves_when_large() {
    let mut o = options(4, 1, 1);
    o.set_automatic_loss_scaling(true).unwrap();
    let model = tiny_gradient_model();
    let mut m = training_model(&model, &mut o, Some(sgd(0.0))).unwrap();
    let x = Rc::new(Tensor::full(&[4, 4], DType::Float16, 2f64.powi(-12)));
    m.call(std::slice::from_ref(&x)).unwrap();
    assert!(!m.optimizer().unwrap().is_constant("loss_scaling"), "automatic loss scaling makes it variable");
    assert_eq!(m.loss_scaling(), Some(16.0), "1 doubled after each of 4 steps");
    // Doubling stops at the largest float16 (the seed must stay finite).
    let model = tiny_gradient_model();
    let mut o = options(2, 1, 1);
    o.set_automatic_loss_scaling(true).unwrap();
    let opt =
        Optimizer::sgd(OptimizerArgs { lr: Some(0.0), loss_scaling: Some(40000.0), ..Default::default() }).unwrap();
    let mut m = training_model(&model, &mut o, Some(opt)).unwrap();
    m.call(&[Rc::new(Tensor::full(&[2, 4], DType::Float16, 2f64.powi(-12)))]).unwrap();
    assert_eq!(m.loss_scaling(), Some(65504.0));
}

#[test]
fn loss_scaling_automatic_halves_when_the_upper_bin_fills() {
    // loss = sum(x · w): d/dw = x · ls. With x = 1 and ls = 16384 every weight gradient is
    // 16384 > 8188: the upper bin holds them all, so the scale halves each step.
    let tr = Tracer::new();
    let x = tr.input("x", &[1, 4], DType::Float16).unwrap();
    let w = Rc::new(Tensor::full(&[1, 4], DType::Float16, 0.5));
    let loss = x.mul(&tr.param("w", &w).unwrap()).unwrap().identity_loss(Reduction::Sum).unwrap();
    let model = HostModel::new(&tr.finish(&[&loss]).unwrap());
    let mut o = options(2, 1, 1);
    o.set_automatic_loss_scaling(true).unwrap();
    let opt =
        Optimizer::sgd(OptimizerArgs { lr: Some(0.0), loss_scaling: Some(32768.0), ..Default::default() }).unwrap();
    let mut m = training_model(&model, &mut o, Some(opt)).unwrap();
    m.call(&[Rc::new(Tensor::full(&[2, 4], DType::Float16, 1.0))]).unwrap();
    assert_eq!(m.loss_scaling(), Some(8192.0), "32768 → 16384 → 8192");
}

#[test]
fn loss_scaling_automatic_needs_float16_gradients() {
    let mut o = Options::new();
    o.set_automatic_loss_scaling(true).unwrap();
    let mut m = training_model(&HostModel::new(&classifier(2, DType::Float32)), &mut o, None).unwrap();
    let (x, y) = data(2, 1, DType::Float32);
    let e = m.call(&[x, y]).unwrap_err().to_string();
    assert_eq!(e, "[AutomaticLossScale transform] No tracked gradient tensors of type fp16 were found.");
}

// ---- gradients with respect to inputs ----

#[test]
fn input_grads_are_returned_after_the_outputs() {
    let (x, y) = data(8, 3, DType::Float32);
    let model = HostModel::new(&classifier(2, DType::Float32));
    let mut o = options(1, 2, 2);
    o.output_mode(OutputMode::All, None).unwrap();
    let opt = Optimizer::sgd(OptimizerArgs { lr: Some(0.0), loss_scaling: Some(8.0), ..Default::default() }).unwrap();
    let mut m = training_model(&model, &mut o, Some(opt)).unwrap();
    m.return_input_gradients(&["x"]).unwrap();
    let out = m.call(&[x.clone(), y.clone()]).unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(out[2].shape(), &[8, 3]);
    // Each micro-batch's loss is a mean over 2 samples; the big batch's over 8: 4× smaller.
    let big = classifier(8, DType::Float32);
    let opts = TrainOptions { input_grads: vec!["x".into()], ..Default::default() };
    let tg = training_graph(&big.graph, 1, &opts).unwrap();
    let mut store = Store::from_params(&big.params, &big.buffers, 0).unwrap();
    let want = run(&tg.graph, &mut store, &[x, y]).unwrap().outputs[tg.input_grad_outputs[0].1].to_f32_vec();
    for (p, q) in out[2].to_f32_vec().iter().zip(&want) {
        assert!((p - 4.0 * q).abs() < 1e-6, "{p} vs 4 × {q} (unscaled by the loss scaling)");
    }
    let mut inf = inference_model(&model, &mut Options::new()).unwrap();
    assert!(inf.return_input_gradients(&["x"]).is_err());
}

// ---- anchored tensors (Options.anchorTensor, PoplarExecutor.getAnchoredTensor) ----

/// PopTorch's `test_tensor_values` (tests/tensor_names_test.py): a bias gradient and an
/// updated weight anchored by PopART name, read after each call; here also checked against
/// the plain training graph's gradient on the same batch and against SGD's rule.
#[test]
fn anchors_return_a_steps_gradient_and_updated_weight() {
    let model = HostModel::new(&classifier(4, DType::Float32));
    let mut o = Options::new();
    o.anchor_tensor("grad_bias", "Gradient___model.fc2.bias", None, None).unwrap();
    o.anchor_tensor("update_weight", "UpdatedVar___model.fc2.weight", None, None).unwrap();
    o.anchor_tensor("grad_w1", "Gradient___fc1.weight", None, None).unwrap(); // the bare name works too
    let mut m = training_model(&model, &mut o, Some(sgd(0.1))).unwrap();
    let e = m.anchored_tensor("grad_bias").unwrap_err().to_string();
    assert_eq!(e, "No tensor with name grad_bias found.");
    let before = params(&model);
    let w_before = before.iter().find(|(n, _)| n == "fc2.weight").unwrap().1.clone();
    let (x, y) = data(4, 5, DType::Float32);
    m.call(&[x.clone(), y.clone()]).unwrap();
    let grad1 = m.anchored_tensor("grad_bias").unwrap().clone();
    let update1 = m.anchored_tensor("update_weight").unwrap().clone();
    assert_eq!(grad1.shape(), &[2]);
    assert_eq!(update1.shape(), &[2, 5]);
    // The plain executor's gradients of the same step.
    let t = classifier(4, DType::Float32);
    let tg = training_graph(&t.graph, 1, &TrainOptions { return_grads: true, ..Default::default() }).unwrap();
    let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let r = run(&tg.graph, &mut store, &[x, y]).unwrap();
    let grad = |name: &str| r.outputs[tg.grad_outputs.iter().find(|(n, _)| n == name).unwrap().1].to_f32_vec();
    for (a, b) in grad1.to_f32_vec().iter().zip(grad("fc2.bias")) {
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }
    assert_eq!(m.anchored_tensor("grad_w1").unwrap().to_f32_vec(), grad("fc1.weight"));
    for ((u, w), g) in update1.to_f32_vec().iter().zip(&w_before).zip(grad("fc2.weight")) {
        assert!((u - (w - 0.1 * g)).abs() < 1e-6, "updated {u}, SGD gives {}", w - 0.1 * g);
    }
    // A second call with other data: both anchors change.
    let (x2, y2) = data(4, 9, DType::Float32);
    m.call(&[x2, y2]).unwrap();
    assert_ne!(m.anchored_tensor("grad_bias").unwrap().to_f32_vec(), grad1.to_f32_vec());
    assert_ne!(m.anchored_tensor("update_weight").unwrap().to_f32_vec(), update1.to_f32_vec());
}

/// An anchor's output mode: `All` returns every micro-batch's gradient (concatenated along
/// dim 0, as outputs are), the model's default for training (`Final`) the last one.
#[test]
fn anchors_follow_their_output_mode() {
    let model = HostModel::new(&classifier(2, DType::Float32));
    let mut o = options(1, 1, 2);
    o.anchor_tensor("all", "Gradient___model.fc2.bias", Some(OutputMode::All), None).unwrap();
    o.anchor_tensor("last", "Gradient___model.fc2.bias", None, None).unwrap();
    let mut m = training_model(&model, &mut o, Some(sgd(0.0))).unwrap();
    let (x, y) = data(4, 5, DType::Float32);
    m.call(&[x.clone(), y.clone()]).unwrap();
    let all = m.anchored_tensor("all").unwrap().to_f32_vec();
    assert_eq!(all.len(), 4);
    assert_eq!(m.anchored_tensor("last").unwrap().to_f32_vec(), all[2..].to_vec());
    // Each micro-batch's gradient is the plain graph's on its two rows (lr 0: same weights).
    let t = classifier(2, DType::Float32);
    let tg = training_graph(&t.graph, 1, &TrainOptions { return_grads: true, ..Default::default() }).unwrap();
    for mb in 0..2 {
        let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
        let r = run(&tg.graph, &mut store, &[rows(&x, 2 * mb, 2 * mb + 2), rows(&y, 2 * mb, 2 * mb + 2)]).unwrap();
        let (_, k) = tg.grad_outputs.iter().find(|(n, _)| n == "fc2.bias").unwrap();
        for (a, b) in all[2 * mb..2 * mb + 2].iter().zip(r.outputs[*k].to_f32_vec()) {
            assert!((a - b).abs() < 1e-6, "micro-batch {mb}: {a} vs {b}");
        }
    }
}

#[test]
fn anchors_of_unknown_tensors_or_on_inference_models_are_errors() {
    let model = HostModel::new(&classifier(4, DType::Float32));
    let (x, y) = data(4, 5, DType::Float32);
    let mut o = Options::new();
    o.anchor_tensor("g", "Gradient___model.fc9.bias", None, None).unwrap();
    let mut m = training_model(&model, &mut o, None).unwrap();
    let e = m.call(&[x.clone(), y.clone()]).unwrap_err().to_string();
    assert!(
        e.starts_with("anchorTensor(\"g\", \"Gradient___model.fc9.bias\"): no trained parameter is named \"fc9.bias\""),
        "{e}"
    );
    assert!(e.contains("fc1.weight"), "{e}");
    m.destroy().unwrap();
    let mut o = Options::new();
    o.anchor_tensor("a", "Accl___model.fc1.weight", None, None).unwrap();
    let mut m = training_model(&model, &mut o, None).unwrap();
    let e = m.call(&[x.clone(), y.clone()]).unwrap_err().to_string();
    assert!(e.contains("a parameter's gradient is \"Gradient___model.<name>\""), "{e}");
    m.destroy().unwrap();
    let mut o = Options::new();
    o.anchor_tensor("g", "Gradient___model.fc1.weight", None, None).unwrap();
    let mut m = inference_model(&model, &mut o).unwrap();
    let e = m.call(&[x, y]).unwrap_err().to_string();
    assert!(e.contains("an inferenceModel computes no Gradient tensors"), "{e}");
    // PopTorch's own checks of the call.
    let e =
        Options::new().anchor_tensor("e", "Gradient___model.fc1.weight", Some(OutputMode::EveryN), None).unwrap_err();
    assert!(e.message.contains("EveryN needs an output return period"), "{}", e.message);
    assert!(Options::new().anchor_tensor("", "x", None, None).is_err());
}

// ---- sparse inputs: the combined batch as one graph part per micro-batch slice ----

/// A classifier on sparse features (`x`, CSR of `rows`×5 with `nnz` entries, through an
/// `spmm` Linear): a graph part's node features, as RevGNN's first layer reads them.
fn sparse_classifier(rows: usize, nnz: usize) -> Trace {
    use ipu_playground::trace::nn::{Arg, Module};
    use ipu_playground::trace::SparseVar;
    let mut rng = Rng::new(5);
    let (l1, l2) = (Linear::new(5, 4, true, &mut rng).unwrap(), Linear::new(4, 2, true, &mut rng).unwrap());
    let tr = Tracer::new();
    let x = SparseVar::input(&tr, "x", rows, 5, nnz).unwrap();
    let y = tr.input("y", &[rows], DType::Int32).unwrap();
    let h = tr.scope("fc1", || l1.forward_args(&tr, &[Arg::Sparse(x)])).unwrap().tanh().unwrap();
    let logits = call(&tr, "fc2", &l2, &h).unwrap();
    let l = logits.cross_entropy(&y, None, Reduction::Mean, None).unwrap();
    tr.finish(&[&logits, &l]).unwrap()
}

/// Part `k`: a 3×5 CSR matrix of 5 entries (its own pattern and values) and its labels, as
/// `[indptr, indices, values, y]`.
fn sparse_part(k: usize) -> [Rc<Tensor>; 4] {
    let mut rng = Rng::new(100 + k as u64);
    let indptr = [vec![0, 2, 3, 5], vec![0, 1, 3, 5], vec![0, 3, 4, 5]][k % 3].clone();
    let indices: Vec<i32> = (0..3)
        .flat_map(|row| {
            let (a, b) = (indptr[row] as usize, indptr[row + 1] as usize);
            (0..b - a).map(move |j| ((row + j * 2 + k) % 5) as i32)
        })
        .collect();
    let mut by_row = indices.clone();
    for row in 0..3 {
        by_row[indptr[row] as usize..indptr[row + 1] as usize].sort();
    }
    let values: Vec<f32> = (0..5).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
    let y: Vec<i32> = (0..3).map(|i| ((i + k) % 2) as i32).collect();
    [
        Rc::new(Tensor::from_i32(&[4], indptr).unwrap()),
        Rc::new(Tensor::from_i32(&[5], by_row).unwrap()),
        Rc::new(Tensor::from_f32(&[5], values).unwrap()),
        Rc::new(Tensor::from_i32(&[3], y).unwrap()),
    ]
}

/// Parts `ks` as the call's four inputs, each a list of parts.
fn sparse_inputs(ks: &[usize]) -> Vec<BatchInput> {
    (0..4).map(|i| BatchInput::Parts(ks.iter().map(|&k| sparse_part(k)[i].clone()).collect())).collect()
}

#[test]
fn sparse_parts_on_three_executors_of_four_replicas_equal_one_executor_bit_for_bit() {
    let adam = || Optimizer::adam(OptimizerArgs { lr: Some(0.05), ..Default::default() }).unwrap();
    for kind in [ReductionType::Mean, ReductionType::Sum] {
        let opts = || {
            let mut o = options(1, 4, 1);
            o.accumulation_and_replication_reduction_type(kind).unwrap();
            o
        };
        let one = HostModel::new(&sparse_classifier(3, 5));
        let mut m = training_model(&one, &mut opts(), Some(adam())).unwrap();
        let mut want_out = Vec::new();
        for step in 0..3 {
            want_out = m.call_inputs(&sparse_inputs(&[step, step + 1, step + 2, step + 3])).unwrap();
        }
        // Three executors (three wasm instances on three workers): replicas 0, 1..3 and 3.
        let hosts: Vec<HostModel> = (0..3).map(|_| HostModel::new(&sparse_classifier(3, 5))).collect();
        let mut ex: Vec<PoplarExecutor> =
            hosts.iter().map(|h| training_model(h, &mut opts(), Some(adam())).unwrap()).collect();
        for (e, (lo, hi)) in ex.iter_mut().zip([(0, 1), (1, 3), (3, 4)]) {
            e.set_local_replicas(lo, hi).unwrap();
        }
        let mut got_out = Vec::new();
        for step in 0..3 {
            let inputs = sparse_inputs(&[step, step + 1, step + 2, step + 3]);
            for e in ex.iter_mut() {
                assert_eq!(e.begin_call_inputs(&inputs).unwrap(), 1);
            }
            let all: Vec<f32> = ex.iter_mut().flat_map(|e| e.contribute().unwrap()).collect();
            ex.iter_mut().for_each(|e| e.apply(&all).unwrap());
            let parts: Vec<_> = ex.iter_mut().map(|e| e.end_call().unwrap()).collect();
            got_out = ex[0].assemble(parts).unwrap();
        }
        for h in &hosts {
            for ((n, a), (_, b)) in params(h).iter().zip(params(&one)) {
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(a), bits(&b), "{kind:?}: {n} differs between three executors and one");
            }
        }
        assert_eq!(got_out.len(), want_out.len());
        for (g, w) in got_out.iter().zip(&want_out) {
            assert_eq!(g.to_f32_vec(), w.to_f32_vec(), "{kind:?}: outputs");
        }
        // The loss output (Final per replica): one per replica, each its own part's loss.
        assert_eq!(want_out[1].shape(), &[4]);
    }
}

#[test]
fn sparse_parts_reduce_as_the_mean_or_sum_of_single_part_gradients() {
    let lr = 0.1;
    // Each part alone (one replica): SGD's step w - lr·g gives g = (w - w') / lr.
    let start = params(&HostModel::new(&sparse_classifier(3, 5)));
    let alone: Vec<Vec<(String, Vec<f32>)>> = (0..4)
        .map(|k| {
            let h = HostModel::new(&sparse_classifier(3, 5));
            let mut m = training_model(&h, &mut options(1, 1, 1), Some(sgd(lr))).unwrap();
            m.call_inputs(&sparse_inputs(&[k])).unwrap();
            params(&h)
        })
        .collect();
    // Two replicas × two accumulation steps: the combined batch's four slices, parts 0..4.
    for kind in [ReductionType::Mean, ReductionType::Sum] {
        let mut o = options(1, 2, 2);
        o.accumulation_and_replication_reduction_type(kind).unwrap();
        let h = HostModel::new(&sparse_classifier(3, 5));
        let mut m = training_model(&h, &mut o, Some(sgd(lr))).unwrap();
        m.call_inputs(&sparse_inputs(&[0, 1, 2, 3])).unwrap();
        let scale = if kind == ReductionType::Mean { 0.25 } else { 1.0 };
        let want: Vec<(String, Vec<f32>)> = start
            .iter()
            .enumerate()
            .map(|(p, (n, w))| {
                let v = (0..w.len())
                    .map(|i| {
                        let g: f32 = alone.iter().map(|a| (w[i] - a[p].1[i]) / lr).sum();
                        w[i] - lr * scale * g
                    })
                    .collect();
                (n.clone(), v)
            })
            .collect();
        assert_close(&params(&h), &want, 1e-6, 1e-5, &format!("{kind:?}"));
        assert_ne!(params(&h), start, "{kind:?}: the step changed the weights");
    }
}

#[test]
fn sparse_parts_of_the_wrong_count_or_type_are_errors_naming_the_input_and_part() {
    let h = HostModel::new(&sparse_classifier(3, 5));
    let mut m = training_model(&h, &mut options(1, 2, 1), None).unwrap();
    let e = m.call_inputs(&sparse_inputs(&[0, 1, 2])).unwrap_err().to_string();
    assert!(e.contains("input 'x.indptr': 3 parts given") && e.contains("= 2 of them"), "{e}");
    let mut bad = sparse_inputs(&[0, 1]);
    if let BatchInput::Parts(p) = &mut bad[1] {
        p[1] = Rc::new(Tensor::from_i32(&[4], vec![0, 1, 2, 3]).unwrap());
    }
    let e = m.call_inputs(&bad).unwrap_err().to_string();
    assert!(e.contains("input 'x.indices': part 1 is") && e.contains("fixedSize"), "{e}");
    // Two parts of one type are what the call takes.
    m.call_inputs(&sparse_inputs(&[0, 1])).unwrap();
}
