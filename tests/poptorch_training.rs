//! PopTorch-style training and inference wrappers (`poptorch::training_model` /
//! `inference_model`) run with IPU semantics on the CPU executor. Test names start with the
//! family they check: `wrapping_`, `loss_`, `set_optimizer_`, `equivalence_`, `fp16_`,
//! `loss_scaling_`, `input_grads_`.

use ipu_playground::autograd::{training_graph, TrainOptions};
use ipu_playground::compile::options::{MeanReductionStrategy, ReductionType};
use ipu_playground::exec::{run, Store};
use ipu_playground::ir::{OptimizerStep, Reduction};
use ipu_playground::poptorch::{inference_model, training_model, HostModel, Optimizer, OptimizerArgs, Options};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::{DType, Tensor};
use ipu_playground::trace::nn::{call, Linear};
use ipu_playground::trace::{Trace, Tracer};
use std::rc::Rc;

/// A two-layer classifier traced for a batch of `batch`: outputs (logits, mean cross-entropy).
fn classifier(batch: usize, seed: u64, dtype: DType) -> Trace {
    let mut rng = Rng::new(seed);
    let l1 = Linear::new(3, 5, true, &mut rng).unwrap();
    let l2 = Linear::new(5, 2, true, &mut rng).unwrap();
    let (l1, l2) = if dtype == DType::Float16 { (half(l1), half(l2)) } else { (l1, l2) };
    let tr = Tracer::new();
    let x = tr.input("x", &[batch, 3], dtype).unwrap();
    let y = tr.input("y", &[batch], DType::Int32).unwrap();
    let h = call(&tr, "fc1", &l1, &x).unwrap().tanh().unwrap();
    let logits = call(&tr, "fc2", &l2, &h).unwrap();
    let loss = logits.cross_entropy(&y, None, Reduction::Mean, None).unwrap();
    tr.finish(&[&logits, &loss]).unwrap()
}

fn half(l: Linear) -> Linear {
    Linear {
        weight: Rc::new(l.weight.cast(DType::Float16)),
        bias: l.bias.map(|b| Rc::new(b.cast(DType::Float16))),
        ..l
    }
}

fn data(n: usize, seed: u64, dtype: DType) -> (Rc<Tensor>, Rc<Tensor>) {
    let mut rng = Rng::new(seed);
    let x: Vec<f32> = (0..n * 3).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
    let y: Vec<i32> = (0..n).map(|i| (i % 2) as i32).collect();
    let x = Tensor::from_f32(&[n, 3], x).unwrap();
    (Rc::new(x.cast(dtype)), Rc::new(Tensor::from_i32(&[n], y).unwrap()))
}

#[test]
fn smoke() {
    let model = HostModel::new(&classifier(2, 1, DType::Float32));
    let mut opts = Options::new();
    opts.replication_factor(2).unwrap().device_iterations(2).unwrap();
    opts.gradient_accumulation(2).unwrap();
    let mut m = training_model(&model, &mut opts, None).unwrap();
    let (x, y) = data(16, 2, DType::Float32);
    let out = m.call(&[x, y]).unwrap();
    println!("{:?}", out);
}
