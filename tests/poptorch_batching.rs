//! PopTorch-style execution: batching and output modes, replica-grouped weights, buffers and
//! slicing, each with PopTorch's documented example where one exists. Test names start
//! with the family they check.

use ipu_playground::autograd::{training_graph, TrainOptions};
use ipu_playground::compile::options::{CommGroupType, OutputMode};
use ipu_playground::exec::{run, Store};
use ipu_playground::ir::{OptimizerStep, Reduction};
use ipu_playground::poptorch::grouping::{ReplicaGrouping, VariableRetrievalMode};
use ipu_playground::poptorch::{
    inference_model, input_types, training_model, HostModel, Optimizer, OptimizerArgs, Options,
};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::{DType, Tensor};
use ipu_playground::trace::nn::{call, Linear};
use ipu_playground::trace::slice::Bound;
use ipu_playground::trace::{Trace, Tracer};
use std::rc::Rc;

fn t(shape: &[usize], v: Vec<f32>) -> Rc<Tensor> {
    Rc::new(Tensor::from_f32(shape, v).unwrap())
}

fn sgd(lr: f32) -> Optimizer {
    Optimizer::sgd(OptimizerArgs { lr: Some(lr), ..OptimizerArgs::default() }).unwrap()
}

fn uniform(n: usize, rng: &mut Rng, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.uniform_range(-scale, scale)).collect()
}

// ---- batching ----

#[test]
fn batching_a_batch_dim_that_does_not_divide_is_poptorchs_error() {
    let tr = Tracer::new();
    let x = tr.input("x", &[1, 4], DType::Float32).unwrap();
    let model = HostModel::new(&tr.finish(&[&x.relu().unwrap()]).unwrap());
    let mut o = Options::new();
    o.device_iterations(2).unwrap().replication_factor(2).unwrap();
    let mut m = inference_model(&model, &mut o).unwrap();
    let e = m.call(&[t(&[6, 4], vec![0.0; 24])]).unwrap_err().to_string();
    assert_eq!(
        e,
        "Invalid batch dimension: In the input torch.Size([6, 4]), the batch dimension (6) must be a multiple of \
         Options.deviceIterations(2) * (Options.replicationFactor(2) / \
         Options.inputReplicaGrouping.input_group_size(1)) * Options.Training.gradientAccumulation(1) = 4 because it \
         is used to calculate the batch size which will be executed on the device in any given iteration. For a full \
         explanation see the batching semantics page of the documentation."
    );
}

/// `docs/user_guide/device_iterations.py`'s ExampleModelWithLoss: `fc` on the flattened
/// `[3, 2]` sample, cross-entropy loss; traced for a micro-batch of `batch`.
fn example_model_with_loss(batch: usize) -> Trace {
    let fc = Linear::new(6, 2, true, &mut Rng::new(0)).unwrap();
    let tr = Tracer::new();
    let x = tr.input("x", &[batch, 3, 2], DType::Float32).unwrap();
    let target = tr.input("target", &[batch], DType::Int32).unwrap();
    let reshaped = x.reshape(&[batch as isize, -1]).unwrap();
    let out = call(&tr, "fc", &fc, &reshaped).unwrap();
    let loss = out.cross_entropy(&target, None, Reduction::Mean, None).unwrap();
    tr.finish(&[&out, &loss]).unwrap()
}

/// The example dataset: label 1 or 0, data `rand + label` with its first entry negated.
fn example_dataset(n: usize) -> (Rc<Tensor>, Rc<Tensor>) {
    let mut rng = Rng::new(0);
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for _ in 0..n {
        let label = (rng.uniform_range(0.0, 1.0) > 0.5) as i32;
        let mut d: Vec<f32> = (0..6).map(|_| rng.uniform_range(0.0, 1.0) + label as f32).collect();
        d[0] = -d[0];
        xs.extend(d);
        ys.push(label);
    }
    (t(&[n, 3, 2], xs), Rc::new(Tensor::from_i32(&[n], ys).unwrap()))
}

/// The plain executor training on consecutive micro-batches of `micro` samples: the outputs
/// of the last step.
fn plain_steps(micro: usize, x: &Tensor, y: &Tensor, steps: usize) -> Vec<Vec<f32>> {
    let trace = example_model_with_loss(micro);
    let tg = training_graph(
        &trace.graph,
        1,
        &TrainOptions { optimizer: Some(OptimizerStep::sgd(0.01, 0.0, 0.0)), ..Default::default() },
    )
    .unwrap();
    let mut store = Store::from_params(&trace.params, &trace.buffers, 0).unwrap();
    let (xv, yv) = (x.to_f32_vec(), y.to_f32_vec());
    let mut last = Vec::new();
    for s in 0..steps {
        let xs = t(&[micro, 3, 2], xv[s * micro * 6..(s + 1) * micro * 6].to_vec());
        let ys = Rc::new(
            Tensor::from_i32(&[micro], yv[s * micro..(s + 1) * micro].iter().map(|&v| v as i32).collect()).unwrap(),
        );
        let r = run(&tg.graph, &mut store, &[xs, ys]).unwrap();
        last = r.outputs.iter().map(|o| o.to_f32_vec()).collect();
    }
    last
}

#[test]
fn batching_device_iterations_example_of_the_docs() {
    // deviceIterations(100) with a model batch size of 2: each call takes 200 samples and, by
    // default in training (OutputMode.Final), returns the output and loss of the final batch.
    let (x, y) = example_dataset(200);
    let model = HostModel::new(&example_model_with_loss(2));
    let mut o = Options::new();
    o.device_iterations(100).unwrap();
    let mut m = training_model(&model, &mut o, None).unwrap();
    let out = m.call(&[x.clone(), y.clone()]).unwrap();
    assert_eq!(out[0].shape(), &[2, 2]);
    assert_eq!(out[1].shape(), &[] as &[usize]);
    let want = plain_steps(2, &x, &y, 100);
    for (got, want) in out.iter().zip(&want) {
        for (p, q) in got.to_f32_vec().iter().zip(want) {
            assert!((p - q).abs() < 1e-5, "{p} vs {q}");
        }
    }
}

#[test]
fn batching_replication_and_accumulation_examples_of_the_docs() {
    // replicationFactor(4), model batch 2: the global batch is 8; Final returns the output
    // and loss of the final batch of each replica.
    let (x, y) = example_dataset(80);
    let model = HostModel::new(&example_model_with_loss(2));
    let mut o = Options::new();
    o.device_iterations(10).unwrap().replication_factor(4).unwrap();
    let mut m = training_model(&model, &mut o, None).unwrap();
    let out = m.call(&[x, y]).unwrap();
    assert_eq!((out[0].shape(), out[1].shape()), (&[8usize, 2][..], &[4usize][..]));
    // gradientAccumulation(8): 16 samples per update; one output per replica.
    let (x, y) = example_dataset(160);
    let model = HostModel::new(&example_model_with_loss(2));
    let mut o = Options::new();
    o.device_iterations(10).unwrap().gradient_accumulation(8).unwrap();
    let mut m = training_model(&model, &mut o, None).unwrap();
    let out = m.call(&[x, y.clone()]).unwrap();
    assert_eq!((out[0].shape(), out[1].shape()), (&[2usize, 2][..], &[] as &[usize]));
    // With OutputMode.All the leading dim is the combined batch.
    let mut o = Options::new();
    o.device_iterations(10).unwrap().gradient_accumulation(8).unwrap().output_mode(OutputMode::All, None).unwrap();
    let model = HostModel::new(&example_model_with_loss(2));
    let (x, y) = example_dataset(160);
    let out = training_model(&model, &mut o, None).unwrap().call(&[x, y]).unwrap();
    assert_eq!((out[0].shape(), out[1].shape()), (&[160usize, 2][..], &[80usize][..]));
}

// ---- output modes ----

/// `y = 2x` on `[1, 1]` micro-batches.
fn doubler() -> HostModel {
    let tr = Tracer::new();
    let x = tr.input("x", &[1, 1], DType::Float32).unwrap();
    HostModel::new(&tr.finish(&[&x.scale(2.0).unwrap()]).unwrap())
}

fn run_mode(mode: Option<(OutputMode, Option<usize>)>) -> Tensor {
    let mut o = Options::new();
    o.device_iterations(4).unwrap().replication_factor(2).unwrap();
    if let Some((m, p)) = mode {
        o.output_mode(m, p).unwrap();
    }
    let mut m = inference_model(&doubler(), &mut o).unwrap();
    // Combined batch 8: device iteration d, replica r reads row 2d + r.
    m.call(&[t(&[8, 1], (0..8).map(|i| i as f32).collect())]).unwrap().remove(0)
}

#[test]
fn output_mode_all_final_every_n_sum_and_the_defaults() {
    let all = run_mode(Some((OutputMode::All, None)));
    assert_eq!(all.to_f32_vec(), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]);
    assert_eq!(all.shape(), &[8, 1]);
    assert_eq!(run_mode(None), all, "inference defaults to All");
    let fin = run_mode(Some((OutputMode::Final, None)));
    assert_eq!((fin.shape(), fin.to_f32_vec()), (&[2usize, 1][..], vec![12.0, 14.0]));
    let every = run_mode(Some((OutputMode::EveryN, Some(2))));
    assert_eq!(every.to_f32_vec(), vec![4.0, 6.0, 12.0, 14.0], "device iterations 2 and 4");
    let sum = run_mode(Some((OutputMode::Sum, None)));
    assert_eq!(sum.to_f32_vec(), vec![24.0, 32.0], "per replica, over device iterations");
    // EveryN needs a period (the planner's Options check it).
    assert!(Options::new().output_mode(OutputMode::EveryN, None).is_err());
}

// ---- replica grouping ----

#[test]
fn replica_grouping_example_of_the_docs_trains_the_whole_model() {
    // docs/user_guide/replica_grouped_weights.py: 8 replicas; W (40×56) split 4 ways between
    // orthogonal groups of 2 replicas ({0,4}, {1,5}, …), the input split 2 ways by
    // inputReplicaGrouping(4, Consecutive); Z = X @ W, loss mean(Z²); SGD lr 0.01, 4 steps.
    // Replica r computes X[r / 4] @ W[r % 4]: together the whole model, whose CPU training
    // the grouped weights must follow.
    let (shards, data_shards, steps) = (4usize, 2usize, 4usize);
    let mut rng = Rng::new(100);
    let x_full = uniform(24 * 40, &mut rng, 1.0);
    let w_full = uniform(40 * 56, &mut rng, (5.0f32 * 8.0).powf(-0.5));
    // The grouped host value: W reshaped to [40, 4, 14] and transposed to [4, 40, 14].
    let slice = |w: &[f32], g: usize| -> Vec<f32> {
        (0..40).flat_map(|i| w[i * 56 + 14 * g..i * 56 + 14 * (g + 1)].to_vec()).collect()
    };
    let grouped: Vec<f32> = (0..shards).flat_map(|g| slice(&w_full, g)).collect();

    let tr = Tracer::new();
    let x = tr.input("X", &[1, 12, 40], DType::Float32).unwrap();
    let w = tr.param("W", t(&[40, 14], vec![0.0; 40 * 14])).unwrap();
    let z = x.matmul(&w).unwrap();
    let loss = z.mul(&z).unwrap().identity_loss(Reduction::Mean).unwrap();
    let model = HostModel::new(&tr.finish(&[&z, &loss]).unwrap());
    model.set_parameter("W", Tensor::from_f32(&[shards, 40, 14], grouped).unwrap()).unwrap();
    let mut o = Options::new();
    o.replication_factor(data_shards * shards).unwrap();
    o.input_replica_grouping(shards, CommGroupType::Consecutive).unwrap();
    o.output_mode(OutputMode::All, None).unwrap();
    let mut m = training_model(&model, &mut o, Some(sgd(0.01))).unwrap();
    m.replica_grouping(
        "W",
        ReplicaGrouping {
            kind: CommGroupType::Orthogonal,
            group_size: data_shards,
            retrieval: VariableRetrievalMode::OnePerGroup,
        },
    )
    .unwrap();
    let xs = t(&[data_shards, 12, 40], x_full.clone());
    let mut losses = Vec::new();
    for _ in 0..steps {
        let out = m.call(std::slice::from_ref(&xs)).unwrap();
        assert_eq!(out[1].shape(), &[8]);
        losses.push(out[1].to_f32_vec().iter().sum::<f32>() / 8.0);
    }
    // Replicas 0 and 4 hold group 0's slice.
    assert_eq!(m.replica_parameter(0, "W"), m.replica_parameter(4, "W"));
    assert_ne!(m.replica_parameter(0, "W"), m.replica_parameter(1, "W"));

    // The whole model on the CPU.
    let tr = Tracer::new();
    let x = tr.input("X", &[24, 40], DType::Float32).unwrap();
    let w = tr.param("W", t(&[40, 56], w_full)).unwrap();
    let z = x.matmul(&w).unwrap();
    let loss = z.mul(&z).unwrap().identity_loss(Reduction::Mean).unwrap();
    let full = tr.finish(&[&loss]).unwrap();
    let tg = training_graph(
        &full.graph,
        0,
        &TrainOptions { optimizer: Some(OptimizerStep::sgd(0.01, 0.0, 0.0)), ..Default::default() },
    )
    .unwrap();
    let mut store = Store::from_params(&full.params, &full.buffers, 0).unwrap();
    for (k, loss) in losses.iter().enumerate() {
        let want = run(&tg.graph, &mut store, &[t(&[24, 40], x_full.clone())]).unwrap().outputs[0].to_f32_vec()[0];
        assert!((loss - want).abs() < 1e-5 * want.abs(), "step {k}: loss {loss} vs the whole model's {want}");
    }
    let host = model.parameter("W").unwrap().value().unwrap();
    assert_eq!(host.shape(), &[4, 40, 14], "one slice per group on the host");
    let want: Vec<f32> = (0..shards).flat_map(|g| slice(&store.params["W"].to_f32_vec(), g)).collect();
    for (p, q) in host.to_f32_vec().iter().zip(&want) {
        assert!((p - q).abs() < 1e-6, "{p} vs {q}");
    }
}

/// `y = x * w` with a `[2]` weight, loss sum(y); each replica reads its own input row.
fn grouped_model() -> HostModel {
    let tr = Tracer::new();
    let x = tr.input("x", &[1, 2], DType::Float32).unwrap();
    let w = tr.param("w", t(&[2], vec![1.0, 1.0])).unwrap();
    let loss = x.mul(&w).unwrap().identity_loss(Reduction::Sum).unwrap();
    HostModel::new(&tr.finish(&[&loss]).unwrap())
}

fn grouped_step(kind: CommGroupType, size: usize, retrieval: VariableRetrievalMode) -> Rc<Tensor> {
    let model = grouped_model();
    let mut o = Options::new();
    o.replication_factor(4).unwrap();
    let mut m = training_model(&model, &mut o, Some(sgd(1.0))).unwrap();
    m.replica_grouping("w", ReplicaGrouping { kind, group_size: size, retrieval }).unwrap();
    m.call(&[t(&[4, 2], vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0])]).unwrap();
    model.parameter("w").unwrap().value().unwrap()
}

#[test]
fn replica_grouping_retrieval_modes_and_host_shapes() {
    // Consecutive groups of 2: {0,1} sees rows 1,2; {2,3} rows 3,4. Mean (Post) divides by
    // accumulation × replicas = 4: w −= (1+2)/4 and (3+4)/4.
    let one = grouped_step(CommGroupType::Consecutive, 2, VariableRetrievalMode::OnePerGroup);
    assert_eq!(one.shape(), &[2, 2]);
    assert_eq!(one.to_f32_vec(), vec![0.25, 0.25, -0.75, -0.75]);
    let all = grouped_step(CommGroupType::Consecutive, 2, VariableRetrievalMode::AllReplicas);
    assert_eq!(all.shape(), &[4, 2]);
    assert_eq!(all.to_f32_vec(), vec![0.25, 0.25, 0.25, 0.25, -0.75, -0.75, -0.75, -0.75]);
    let ortho = grouped_step(CommGroupType::Orthogonal, 2, VariableRetrievalMode::AllReplicas);
    assert_eq!(ortho.to_f32_vec(), vec![0.0, 0.0, -0.5, -0.5, 0.0, 0.0, -0.5, -0.5], "{{0,2}} and {{1,3}}");
    let shared = grouped_step(CommGroupType::All, 0, VariableRetrievalMode::OnePerGroup);
    assert_eq!((shared.shape(), shared.to_f32_vec()), (&[2usize][..], vec![-1.5, -1.5]), "one value: no group dim");
    let own = grouped_step(CommGroupType::NoGrouping, 0, VariableRetrievalMode::OnePerGroup);
    assert_eq!(own.shape(), &[4, 2]);
    assert_eq!(own.to_f32_vec(), vec![0.75, 0.75, 0.5, 0.5, 0.25, 0.25, 0.0, 0.0]);
}

#[test]
fn replica_grouping_host_tensor_holds_one_slice_per_group() {
    let model = grouped_model();
    model.set_parameter("w", Tensor::from_f32(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap()).unwrap();
    let mut o = Options::new();
    o.replication_factor(4).unwrap();
    let mut m = inference_model(&model, &mut o).unwrap();
    let g = ReplicaGrouping {
        kind: CommGroupType::Orthogonal,
        group_size: 2,
        retrieval: VariableRetrievalMode::OnePerGroup,
    };
    m.replica_grouping("w", g).unwrap();
    let out = m.call(&[t(&[4, 2], vec![1.0; 8])]).unwrap().remove(0);
    // Orthogonal groups {0,2} and {1,3}: sums 3, 7, 3, 7.
    assert_eq!(out.to_f32_vec(), vec![3.0, 7.0, 3.0, 7.0]);
    assert!(m.replica_grouping("w", g).unwrap_err().to_string().contains("before the model is compiled"));
    let e = grouped_model().set_parameter("w", Tensor::zeros(&[2], DType::Int32)).unwrap_err().to_string();
    assert!(e.contains("'w'"), "{e}");
    // A scalar weight cannot have one value per group.
    let tr = Tracer::new();
    let x = tr.input("x", &[1], DType::Float32).unwrap();
    let s = x.mul(&tr.param("s", Rc::new(Tensor::scalar(1.0))).unwrap()).unwrap();
    let model = HostModel::new(&tr.finish(&[&s.identity_loss(Reduction::Sum).unwrap()]).unwrap());
    let mut o = Options::new();
    o.replication_factor(2).unwrap();
    let mut m = training_model(&model, &mut o, None).unwrap();
    let g = ReplicaGrouping {
        kind: CommGroupType::NoGrouping,
        group_size: 0,
        retrieval: VariableRetrievalMode::OnePerGroup,
    };
    m.replica_grouping("s", g).unwrap();
    let e = m.call(&[t(&[2], vec![1.0, 2.0])]).unwrap_err().to_string();
    assert_eq!(e, "Scalars cannot be passed as per-replica weight tensor values");
}

// ---- buffers ----

/// `docs/user_guide/buffers.py`'s CounterModel: `self.i += 1; return self.i`, with `i` a
/// registered buffer, or (`buffer: false`) a plain tensor attribute, frozen as a constant.
fn counter(buffer: bool) -> HostModel {
    let tr = Tracer::new();
    let zero = Rc::new(Tensor::zeros(&[1], DType::Float32));
    let i =
        if buffer { tr.buffer("i", &zero).unwrap() } else { tr.constant(Tensor::zeros(&[1], DType::Float32)).unwrap() };
    let one = tr.full(&[], DType::Float32, 1.0).unwrap();
    let next = i.add(&one).unwrap();
    if buffer {
        tr.buffer_update("i", &next).unwrap();
    }
    HostModel::new(&tr.finish(&[&next]).unwrap())
}

#[test]
fn buffers_counter_example_of_the_docs() {
    let wrong = counter(false);
    let mut m = inference_model(&wrong, &mut Options::new()).unwrap();
    assert_eq!(m.call(&[]).unwrap()[0].to_f32_vec(), vec![1.0]);
    assert_eq!(m.call(&[]).unwrap()[0].to_f32_vec(), vec![1.0], "a plain tensor is frozen as a constant");

    let model = counter(true);
    let mut m = inference_model(&model, &mut Options::new()).unwrap();
    assert_eq!(m.call(&[]).unwrap()[0].to_f32_vec(), vec![1.0]);
    assert_eq!(m.call(&[]).unwrap()[0].to_f32_vec(), vec![2.0]);
    assert_eq!(
        model.buffer("i").unwrap().value().unwrap().to_f32_vec(),
        vec![0.0],
        "inference does not copy buffers back implicitly"
    );
    m.copy_weights_to_host().unwrap();
    assert_eq!(model.buffer("i").unwrap().value().unwrap().to_f32_vec(), vec![2.0]);
}

#[test]
fn buffers_with_replicas_need_broadcast_buffers_off() {
    let mut o = Options::new();
    o.replication_factor(2).unwrap();
    let e = inference_model(&counter(true), &mut o).unwrap().call(&[]).unwrap_err().to_string();
    assert_eq!(
        e,
        "PopTorch does not support broadcasting buffers. If your model is able to tolerate buffers becoming out of \
         sync between replicas, you can disable buffer broadcasting using poptorch.Options.broadcastBuffers(False)."
    );
    let mut o = Options::new();
    o.replication_factor(2).unwrap().broadcast_buffers(false).unwrap().device_iterations(3).unwrap();
    let model = counter(true);
    let mut m = inference_model(&model, &mut o).unwrap();
    // Each replica counts its own 3 iterations.
    assert_eq!(m.call(&[]).unwrap()[0].to_f32_vec(), vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0]);
    assert_eq!(m.replica_buffer(1, "i").unwrap().to_f32_vec(), vec![3.0]);
}

#[test]
fn buffers_of_a_training_model_reach_the_host_and_reassigning_is_an_error() {
    // A running count of training samples next to the loss.
    let tr = Tracer::new();
    let x = tr.input("x", &[2, 1], DType::Float32).unwrap();
    let seen = tr.buffer("seen", Rc::new(Tensor::zeros(&[], DType::Float32))).unwrap();
    tr.buffer_update("seen", &seen.add(&tr.full(&[], DType::Float32, 2.0).unwrap()).unwrap()).unwrap();
    let w = tr.param("w", t(&[1], vec![0.5])).unwrap();
    let loss = x.mul(&w).unwrap().identity_loss(Reduction::Mean).unwrap();
    let model = HostModel::new(&tr.finish(&[&loss]).unwrap());
    let mut o = Options::new();
    o.device_iterations(2).unwrap();
    let mut m = training_model(&model, &mut o, None).unwrap();
    m.call(&[t(&[4, 1], vec![1.0; 4])]).unwrap();
    assert_eq!(
        model.buffer("seen").unwrap().value().unwrap().to_f32_vec(),
        vec![4.0],
        "training weights and buffers come back"
    );
    // Registering another tensor under a buffer's name is PopTorch's reassignment error.
    let tr = Tracer::new();
    tr.buffer("b", Rc::new(Tensor::zeros(&[1], DType::Float32))).unwrap();
    let e = tr.buffer("b", Rc::new(Tensor::zeros(&[1], DType::Float32))).unwrap_err().to_string();
    assert!(e.contains("reassigned"), "{e}");
}

// ---- slicing ----

#[test]
fn slicing_a_constant_width_window_wraps_round_on_every_iteration() {
    // t[x : x + 4] on an 8-entry table, x read per device iteration.
    let tr = Tracer::new();
    let table = tr.param("table", t(&[8], (0..8).map(|i| i as f32).collect())).unwrap();
    let x = tr.input("x", &[1], DType::Int32).unwrap();
    let end = x.add(&tr.full(&[], DType::Int32, 4.0).unwrap()).unwrap();
    let window = table.slice_bounds(0, Bound::Var(&x), Bound::Var(&end), 1).unwrap();
    let model = HostModel::new(&tr.finish(&[&window]).unwrap());
    let mut o = Options::new();
    o.device_iterations(3).unwrap();
    let mut m = inference_model(&model, &mut o).unwrap();
    let out = m.call(&[Rc::new(Tensor::from_i32(&[3], vec![0, 6, 7]).unwrap())]).unwrap().remove(0);
    assert_eq!(
        out.to_f32_vec(),
        vec![0.0, 1.0, 2.0, 3.0, 6.0, 7.0, 0.0, 1.0, 7.0, 0.0, 1.0, 2.0],
        "PyTorch would return [6, 7] and [7]"
    );
}

/// The plan's gradient all-reduce of a weight `w` of 1,024 float32 values, 8 replicas,
/// `w` grouped by `grouping` (none: shared by all): its seconds on IPU 0, if any.
fn planned_all_reduce(grouping: Option<(CommGroupType, usize)>) -> Option<f64> {
    let tr = Tracer::new();
    let x = tr.input("x", &[1, 1024], DType::Float32).unwrap();
    let w = tr.param("w", t(&[1024], vec![1.0; 1024])).unwrap();
    let loss = x.mul(&w).unwrap().identity_loss(Reduction::Sum).unwrap();
    let model = HostModel::new(&tr.finish(&[&loss]).unwrap());
    let mut o = Options::new();
    o.replication_factor(8).unwrap();
    let mut m = training_model(&model, &mut o, Some(sgd(0.1))).unwrap();
    if let Some((kind, group_size)) = grouping {
        let g = ReplicaGrouping { kind, group_size, retrieval: VariableRetrievalMode::OnePerGroup };
        m.replica_grouping("w", g).unwrap();
    }
    let plan = m.plan_report(&input_types(&[t(&[8, 1024], vec![0.0; 8 * 1024])])).unwrap();
    assert!(plan.valid, "{:?}", plan.errors);
    let reduce: Vec<f64> = plan.time.ipus[0]
        .intervals
        .iter()
        .filter(|i| i.label == "gradient all-reduce across replicas")
        .map(|i| i.end - i.start)
        .collect();
    assert!(reduce.len() <= 1, "{reduce:?}");
    reduce.first().copied()
}

#[test]
fn replica_grouping_the_plans_all_reduce_spans_each_weights_group_only() {
    // A ring all-reduce of B bytes over k replicas moves 2(k-1)/k·B through each IPU's links,
    // then the replicas synchronise: the hardware's link bandwidth and sync (hardware.rs).
    let gen = Options::new().ipu_generation.spec();
    let bytes = 4.0 * 1024.0;
    let ring = |k: f64| 2.0 * (k - 1.0) / k * bytes / gen.ipu_link_bandwidth + gen.ipu_sync_cycles / gen.clock_hz;
    let close = |got: Option<f64>, want: f64| {
        let got = got.expect("an all-reduce interval");
        assert!((got - want).abs() <= 1e-12 * want, "{got} vs {want}");
    };
    close(planned_all_reduce(None), ring(8.0));
    close(planned_all_reduce(Some((CommGroupType::All, 0))), ring(8.0));
    close(planned_all_reduce(Some((CommGroupType::Consecutive, 2))), ring(2.0));
    close(planned_all_reduce(Some((CommGroupType::Orthogonal, 4))), ring(4.0));
    // Every replica its own value: nothing to reduce.
    assert_eq!(planned_all_reduce(Some((CommGroupType::NoGrouping, 0))), None);
}
