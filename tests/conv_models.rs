//! Convolutional models end to end: the VJPs of `conv2d`, the pools and batch norm through
//! the tracer, autograd and the executor against central finite differences; batch norm's
//! running statistics against PyTorch's update rule; and a small ResNet-style network
//! (conv, bn, relu, conv, bn, add, relu; maxpool; adaptive avgpool; flatten; linear) traced,
//! trained one step and planned.

use ipu_playground::autograd::{training_graph, TrainOptions};
use ipu_playground::compile::{plan_with, Options, PlanSettings};
use ipu_playground::exec::{run, Store};
use ipu_playground::ir::liveness::liveness;
use ipu_playground::ir::{Conv2dGeom, OptimizerStep, Pool2dGeom, Reduction};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::{DType, Tensor};
use ipu_playground::trace::nn::{
    call, AdaptiveAvgPool2d, Arg, BatchNorm2d, Conv2d, Flatten, Linear, MaxPool2d, Module,
};
use ipu_playground::trace::{Tracer, Var};
use ipu_playground::Result;
use std::rc::Rc;

fn values(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.uniform_range(-1.0, 1.0)).collect()
}

/// Values at least 0.05 apart (no ties, no kink within a finite-difference step).
fn distinct(rng: &mut Rng, n: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..n).map(|i| -1.0 + 0.05 * i as f32).collect();
    for i in (1..n).rev() {
        let j = (rng.uniform_range(0.0, 1.0) * (i + 1) as f32) as usize;
        v.swap(i, j.min(i));
    }
    v
}

/// Traces `f` on an input `x` of `shape` (training mode), takes `loss = Σ f(x)·r` for a fixed
/// random `r`, and checks the gradient of every parameter and of `x` against central
/// differences (step `d`) of the forward graph run on the executor.
fn check_gradients(shape: &[usize], x0: Vec<f32>, d: f32, f: &dyn Fn(&Tracer, &Var) -> Result<Var>) {
    let mut rng = Rng::new(11);
    let tr = Tracer::new();
    tr.set_training(true);
    let x = tr.input("x", shape, DType::Float32).unwrap();
    let y = f(&tr, &x).unwrap();
    let r = tr.constant(Tensor::from_f32(y.shape(), values(&mut rng, y.shape().iter().product())).unwrap()).unwrap();
    let loss = y.mul(&r).unwrap().sum(&[], false).unwrap();
    let t = tr.finish(&[&loss]).unwrap();
    let opts = TrainOptions { return_grads: true, input_grads: vec!["x".into()], ..Default::default() };
    let tg = training_graph(&t.graph, 0, &opts).unwrap();
    let input = |v: Vec<f32>| vec![Rc::new(Tensor::from_f32(shape, v).unwrap())];
    let store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let out = run(&tg.graph, &mut store.clone(), &input(x0.clone())).unwrap().outputs;
    let loss_at = |s: &Store, xv: Vec<f32>| -> f64 {
        run(&t.graph, &mut s.clone(), &input(xv)).unwrap().outputs[0].to_f32_vec()[0] as f64
    };
    let close = |got: f32, num: f64, what: &str| {
        assert!(
            (got as f64 - num).abs() <= 2e-3 + 2e-3 * num.abs(),
            "{what}: autograd {got}, finite differences {num}"
        );
    };
    let (_, xi) = &tg.input_grad_outputs[0];
    for (k, &got) in out[*xi].to_f32_vec().iter().enumerate() {
        let at = |delta: f32| {
            let mut v = x0.clone();
            v[k] += delta;
            loss_at(&store, v)
        };
        close(got, (at(d) - at(-d)) / (2.0 * d as f64), &format!("d loss / d x[{k}]"));
    }
    for (name, idx) in &tg.grad_outputs {
        let p0 = store.params[name].to_f32_vec();
        for (k, &got) in out[*idx].to_f32_vec().iter().enumerate() {
            let at = |delta: f32| {
                let mut p = p0.clone();
                p[k] += delta;
                let mut s = store.clone();
                s.params.insert(name.clone(), Rc::new(Tensor::from_f32(store.params[name].shape(), p).unwrap()));
                loss_at(&s, x0.clone())
            };
            close(got, (at(d) - at(-d)) / (2.0 * d as f64), &format!("d loss / d {name}[{k}]"));
        }
    }
    assert!(!tg.grad_outputs.is_empty() || t.params.is_empty());
}

#[test]
fn conv2d_gradients_match_finite_differences() {
    let mut rng = Rng::new(1);
    for (stride, padding, dilation, groups, bias) in
        [([1, 1], [1, 1], [1, 1], 1, true), ([2, 1], [0, 2], [1, 2], 2, false), ([2, 2], [1, 0], [2, 1], 4, true)]
    {
        let conv = Conv2d::new(4, 4, [3, 2], stride, padding, dilation, groups, bias, &mut rng).unwrap();
        let x0 = values(&mut rng, 2 * 4 * 6 * 5);
        check_gradients(&[2, 4, 6, 5], x0, 1e-2, &|tr, x| call(tr, "conv", &conv, x));
    }
}

#[test]
fn pooling_gradients_match_finite_differences() {
    let mut rng = Rng::new(2);
    let geom = |k, s, p, d, ceil_mode| Pool2dGeom { kernel: k, stride: s, padding: p, dilation: d, ceil_mode };
    for g in [geom([3, 3], [2, 2], [1, 1], [1, 1], false), geom([2, 3], [2, 1], [1, 0], [2, 1], true)] {
        let x0 = distinct(&mut rng, 2 * 2 * 7 * 6);
        check_gradients(&[2, 2, 7, 6], x0, 1e-2, &|_, x| x.max_pool2d(g));
    }
    for (g, cip) in
        [(geom([3, 3], [2, 2], [1, 1], [1, 1], true), false), (geom([2, 2], [1, 2], [1, 1], [1, 1], false), true)]
    {
        check_gradients(&[1, 2, 7, 6], values(&mut rng, 84), 1e-2, &|_, x| x.avg_pool2d(g, cip));
    }
    check_gradients(&[1, 2, 7, 5], values(&mut rng, 70), 1e-2, &|_, x| x.adaptive_avg_pool2d([3, 2]));
}

#[test]
fn batch_norm_gradients_match_finite_differences() {
    let mut rng = Rng::new(3);
    let mut bn = BatchNorm2d::new(3, 1e-5, Some(0.1), true, true).unwrap();
    // Non-trivial affine parameters.
    bn.set_parameter("weight", Tensor::from_f32(&[3], vec![0.5, 1.5, -0.7]).unwrap()).unwrap();
    bn.set_parameter("bias", Tensor::from_f32(&[3], vec![0.1, -0.2, 0.3]).unwrap()).unwrap();
    // Batch norm is not linear in x: a smaller step keeps the central differences' O(d²)
    // error below the tolerance (float32 rounding stays far below it at this step).
    check_gradients(&[2, 3, 3, 2], values(&mut rng, 36), 3e-3, &|tr, x| call(tr, "bn", &bn, x));
    let plain = BatchNorm2d::new(3, 1e-5, None, false, false).unwrap();
    check_gradients(&[4, 3], values(&mut rng, 12), 3e-3, &|tr, x| call(tr, "bn", &plain, x));
}

#[test]
fn batch_norm_updates_running_statistics_as_pytorch() {
    // momentum 0.1: running = 0.9·running + 0.1·batch (unbiased variance);
    // momentum None: the cumulative average, factor 1/num_batches_tracked.
    let x: Vec<f32> = (0..16).map(|i| ((i * 7) % 11) as f32 * 0.3 - 1.0).collect();
    let (n, c, hw) = (2, 2, 4);
    let mut mean = vec![0f64; c];
    let mut var = vec![0f64; c];
    for ch in 0..c {
        let v: Vec<f64> =
            (0..n).flat_map(|i| (0..hw).map(move |k| (i, k))).map(|(i, k)| x[(i * c + ch) * hw + k] as f64).collect();
        mean[ch] = v.iter().sum::<f64>() / v.len() as f64;
        var[ch] = v.iter().map(|a| (a - mean[ch]).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    }
    for momentum in [Some(0.1f32), None] {
        let bn = BatchNorm2d::new(c, 1e-5, momentum, true, true).unwrap();
        let tr = Tracer::new();
        tr.set_training(true);
        let xv = tr.input("x", &[n, c, 2, 2], DType::Float32).unwrap();
        let y = call(&tr, "bn", &bn, &xv).unwrap();
        let t = tr.finish(&[&y]).unwrap();
        let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
        let input = vec![Rc::new(Tensor::from_f32(&[n, c, 2, 2], x.clone()).unwrap())];
        let mut want_mean = vec![0f64; c];
        let mut want_var = vec![1f64; c];
        for step in 1..=3 {
            run(&t.graph, &mut store, &input).unwrap();
            let m = momentum.map_or(1.0 / step as f64, |m| m as f64);
            for ch in 0..c {
                want_mean[ch] = (1.0 - m) * want_mean[ch] + m * mean[ch];
                want_var[ch] = (1.0 - m) * want_var[ch] + m * var[ch];
            }
            let got_mean = store.buffers["bn.running_mean"].to_f32_vec();
            let got_var = store.buffers["bn.running_var"].to_f32_vec();
            for ch in 0..c {
                assert!((got_mean[ch] as f64 - want_mean[ch]).abs() < 1e-5, "{momentum:?} step {step}: {got_mean:?}");
                assert!((got_var[ch] as f64 - want_var[ch]).abs() < 1e-5, "{momentum:?} step {step}: {got_var:?}");
            }
            assert_eq!(
                store.buffers["bn.num_batches_tracked"].as_i32().unwrap().iter().copied().collect::<Vec<_>>(),
                vec![step]
            );
        }
        // Evaluation uses the running statistics: (x − mean)/√(var + eps) with weight 1, bias 0.
        let tr = Tracer::new();
        let xv = tr.input("x", &[n, c, 2, 2], DType::Float32).unwrap();
        let y = call(&tr, "bn", &bn, &xv).unwrap();
        let t = tr.finish(&[&y]).unwrap();
        let got = run(&t.graph, &mut store, &input).unwrap().outputs[0].to_f32_vec();
        for (k, &g) in got.iter().enumerate() {
            let ch = (k / hw) % c;
            let want = (x[k] as f64 - want_mean[ch]) / (want_var[ch] + 1e-5).sqrt();
            assert!((g as f64 - want).abs() < 1e-5, "eval output {k}: {g} vs {want}");
        }
    }
}

/// conv → bn → relu → conv → bn → (+ x) → relu, as torchvision's BasicBlock.
struct BasicBlock {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    conv2: Conv2d,
    bn2: BatchNorm2d,
}

impl BasicBlock {
    fn new(c: usize, rng: &mut Rng) -> BasicBlock {
        let conv = |rng: &mut Rng| Conv2d::new(c, c, [3, 3], [1, 1], [1, 1], [1, 1], 1, false, rng).unwrap();
        let bn = || BatchNorm2d::new(c, 1e-5, Some(0.1), true, true).unwrap();
        BasicBlock { conv1: conv(rng), bn1: bn(), conv2: conv(rng), bn2: bn() }
    }
}

impl Module for BasicBlock {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        let Some(Arg::Dense(x)) = args.first() else { unreachable!("one dense input") };
        let h = call(tr, "bn1", &self.bn1, &call(tr, "conv1", &self.conv1, x)?)?.relu()?;
        let h = call(tr, "bn2", &self.bn2, &call(tr, "conv2", &self.conv2, &h)?)?;
        h.add(x)?.relu()
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("conv1".into(), &self.conv1 as &dyn Module),
            ("bn1".into(), &self.bn1),
            ("conv2".into(), &self.conv2),
            ("bn2".into(), &self.bn2),
        ]
    }
}

/// stem conv (7×7, stride 2) → bn → relu → maxpool → BasicBlock → adaptive avgpool → flatten → fc.
struct TinyResNet {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    pool: MaxPool2d,
    layer1: BasicBlock,
    avgpool: AdaptiveAvgPool2d,
    flatten: Flatten,
    fc: Linear,
}

impl Module for TinyResNet {
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        let Some(Arg::Dense(x)) = args.first() else { unreachable!("one dense input") };
        let h = call(tr, "bn1", &self.bn1, &call(tr, "conv1", &self.conv1, x)?)?.relu()?;
        let h = call(tr, "maxpool", &self.pool, &h)?;
        let h = call(tr, "layer1", &self.layer1, &h)?;
        let h = call(tr, "flatten", &self.flatten, &call(tr, "avgpool", &self.avgpool, &h)?)?;
        call(tr, "fc", &self.fc, &h)
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("conv1".into(), &self.conv1 as &dyn Module),
            ("bn1".into(), &self.bn1),
            ("layer1".into(), &self.layer1),
            ("fc".into(), &self.fc),
        ]
    }
}

#[test]
fn a_resnet_block_traces_trains_one_step_and_plans() {
    let mut rng = Rng::new(7);
    let c = 8;
    let model = TinyResNet {
        conv1: Conv2d::new(3, c, [7, 7], [2, 2], [3, 3], [1, 1], 1, false, &mut rng).unwrap(),
        bn1: BatchNorm2d::new(c, 1e-5, Some(0.1), true, true).unwrap(),
        pool: MaxPool2d {
            geom: Pool2dGeom { kernel: [3, 3], stride: [2, 2], padding: [1, 1], dilation: [1, 1], ceil_mode: false },
        },
        layer1: BasicBlock::new(c, &mut rng),
        avgpool: AdaptiveAvgPool2d { output: [1, 1] },
        flatten: Flatten { start_dim: 1, end_dim: -1 },
        fc: Linear::new(c, 10, true, &mut rng).unwrap(),
    };
    let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert!(
        names.contains(&"layer1.bn2.weight".to_string()) && names.contains(&"conv1.weight".to_string()),
        "{names:?}"
    );
    assert_eq!(model.named_buffers().len(), 9, "three batch norms, three buffers each");

    let (n, hw) = (4, 32);
    let tr = Tracer::new();
    tr.set_training(true);
    let x = tr.input("x", &[n, 3, hw, hw], DType::Float32).unwrap();
    let labels = tr.input("y", &[n], DType::Int32).unwrap();
    let logits = model.forward(&tr, &x).unwrap();
    assert_eq!(logits.shape(), &[n, 10]);
    let loss = logits.cross_entropy(&labels, None, Reduction::Mean, None).unwrap();
    let t = tr.finish(&[&loss]).unwrap();
    let text = t.graph.to_string();
    assert!(text.contains("conv2d(") && text.contains("stride=[2, 2] padding=[3, 3]"), "{text}");
    assert!(
        text.contains("max_pool2d(") && text.contains("batch_norm(") && text.contains("adaptive_avg_pool2d("),
        "{text}"
    );
    assert!(text.contains("buffer_update"), "{text}");

    let sgd = OptimizerStep::sgd(0.1, 0.0, 0.0);
    let tg = training_graph(&t.graph, 0, &TrainOptions { optimizer: Some(sgd), ..Default::default() }).unwrap();
    assert_eq!(tg.trained.len(), names.len(), "every parameter gets a gradient");
    let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let xs = Rc::new(Tensor::from_f32(&[n, 3, hw, hw], values(&mut rng, n * 3 * hw * hw)).unwrap());
    let ys = Rc::new(Tensor::from_i32(&[n], vec![1, 4, 7, 2]).unwrap());
    let inputs = vec![xs, ys];
    let w0 = store.params["conv1.weight"].to_f32_vec();
    let loss0 = run(&tg.graph, &mut store, &inputs).unwrap().outputs[0].to_f32_vec()[0];
    assert!(loss0.is_finite() && loss0 > 0.0, "{loss0}");
    assert_ne!(store.params["conv1.weight"].to_f32_vec(), w0, "SGD updated the stem convolution");
    assert_eq!(
        store.buffers["layer1.bn2.num_batches_tracked"].as_i32().unwrap().iter().copied().collect::<Vec<_>>(),
        vec![1]
    );
    assert!(store.buffers["bn1.running_mean"].to_f32_vec().iter().any(|&m| m != 0.0));
    // A second step on the same batch lowers the loss.
    let loss1 = run(&tg.graph, &mut store, &inputs).unwrap().outputs[0].to_f32_vec()[0];
    assert!(loss1 < loss0, "{loss0} -> {loss1}");

    // Planned on one IPU: valid, fits, and the activation peak is ir::liveness's, as the
    // executor measures it.
    let p =
        plan_with(&tg.graph, &Options::new(), &PlanSettings { micro_batch_size: Some(n), ..PlanSettings::default() });
    assert!(p.valid && p.fits, "{:#?}", p.errors);
    assert_eq!(p.memory.ipus[0].live_peak_bytes, liveness(&p.graph).peak());
    let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let measured = run(&p.graph, &mut store, &inputs).unwrap().stats.peak_bytes;
    let predicted = p.memory.ipus[0].live_peak_bytes;
    let ratio = predicted as f64 / measured as f64;
    assert!((0.95..=1.05).contains(&ratio), "predicted {predicted}, measured {measured}");
    assert!(p.time.step_time_s > 0.0);
}

#[test]
fn shape_errors_name_the_op_and_the_cause() {
    let mut rng = Rng::new(4);
    let conv = Conv2d::new(3, 4, [3, 3], [1, 1], [0, 0], [1, 1], 1, true, &mut rng).unwrap();
    let tr = Tracer::new();
    let x = tr.input("x", &[1, 2, 5, 5], DType::Float32).unwrap();
    let e = call(&tr, "conv", &conv, &x).unwrap_err().to_string();
    assert!(
        e.contains("'conv2d' in scope conv") && e.contains("to have 3 channels") && e.contains("but it has 2"),
        "{e}"
    );
    let small = tr.input("s", &[1, 3, 2, 2], DType::Float32).unwrap();
    let e = call(&tr, "conv", &conv, &small).unwrap_err().to_string();
    assert!(e.contains("larger than the padded input"), "{e}");
    let g = Pool2dGeom { kernel: [2, 2], stride: [2, 2], padding: [2, 0], dilation: [1, 1], ceil_mode: false };
    let e = small.max_pool2d(g).unwrap_err().to_string();
    assert!(
        e.contains("'max_pool2d'") && e.contains("conv_models.rs") && e.contains("pad should be at most half"),
        "{e}"
    );
    let e = small.flatten(2, 1).unwrap_err().to_string();
    assert!(e.contains("start_dim (2) cannot come after end_dim (1)"), "{e}");
    assert_eq!(small.flatten(1, -1).unwrap().shape(), &[1, 12]);
    assert!(Conv2d::new(3, 4, [3, 3], [1, 1], [0, 0], [1, 1], 2, true, &mut rng)
        .err()
        .unwrap()
        .to_string()
        .contains("in_channels must be divisible by groups"));
    let one = tr.input("one", &[1, 3, 1, 1], DType::Float32).unwrap();
    let e = one.batch_norm(None, 1e-5).unwrap_err().to_string();
    assert!(e.contains("Expected more than 1 value per channel when training"), "{e}");
    let _ = Conv2dGeom { stride: [1, 1], padding: [0, 0], dilation: [1, 1], groups: 1 };
}

/// PyTorch's `nn.Conv2d(..., padding='same')`, uneven cases included (one more zero row or
/// column after than before), against PyTorch's output and gradients of x, weight and bias
/// (tests/golden/modules/conv2d_same.json, made by tests/golden/make_golden.py).
#[test]
fn conv2d_padding_same_matches_pytorch_including_uneven_padding() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/modules/conv2d_same.json");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let tensor = |v: &serde_json::Value| {
        let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        Tensor::from_f32(&shape, v["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect())
            .unwrap()
    };
    let pair = |v: &serde_json::Value| [v[0].as_u64().unwrap() as usize, v[1].as_u64().unwrap() as usize];
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    let mut uneven = 0;
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let a = &c["args"];
        let (cin, cout) = (a["in"].as_u64().unwrap() as usize, a["out"].as_u64().unwrap() as usize);
        let mut conv =
            Conv2d::same(cin, cout, pair(&a["kernel_size"]), [1, 1], pair(&a["dilation"]), 1, true, &mut Rng::new(0))
                .unwrap();
        uneven += (conv.pad_after != [0, 0]) as usize;
        conv.set_parameter("weight", tensor(&c["params"]["weight"])).unwrap();
        conv.set_parameter("bias", tensor(&c["params"]["bias"])).unwrap();
        let (x, g) = (tensor(&c["x"]), tensor(&c["grad_output"]));
        let tr = Tracer::new();
        let xv = tr.input("x", x.shape(), DType::Float32).unwrap();
        let gv = tr.input("g", g.shape(), DType::Float32).unwrap();
        let out = conv.forward_args(&tr, &[Arg::Dense(xv)]).unwrap();
        let loss = out.mul(&gv).unwrap().sum(&[], false).unwrap();
        let t = tr.finish(&[&loss, &out]).unwrap();
        let opts = TrainOptions { return_grads: true, input_grads: vec!["x".into()], ..Default::default() };
        let tg = training_graph(&t.graph, 0, &opts).unwrap();
        let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
        let r = run(&tg.graph, &mut store, &[Rc::new(x), Rc::new(g)]).unwrap();
        let close = |what: &str, got: Vec<f32>, want: &serde_json::Value| {
            let want = tensor(want).to_f32_vec();
            assert_eq!(got.len(), want.len(), "{name}: {what}");
            for (i, (p, q)) in got.iter().zip(&want).enumerate() {
                assert!((p - q).abs() <= 1e-5 + 1e-4 * q.abs(), "{name}: {what}[{i}]: got {p}, PyTorch {q}");
            }
        };
        close("out", r.outputs[1].to_f32_vec(), &c["out"]);
        close("x.grad", r.outputs[tg.input_grad_outputs[0].1].to_f32_vec(), &c["grads"]["x"]);
        for (p, i) in &tg.grad_outputs {
            close(&format!("{p}.grad"), r.outputs[*i].to_f32_vec(), &c["grads"][p.as_str()]);
        }
    }
    assert_eq!(uneven, 4, "every case pads unevenly along at least one dim");
}
