//! The core engine end to end: trace → IR → autograd → execute.

use ipu_playground::autograd::{training_graph, TrainOptions};
use ipu_playground::exec::{run, Store};
use ipu_playground::gnn::nn::{GnnBlock, GroupAddRev};
use ipu_playground::ir::{print::print_graph, verify::verify, InputKind, Pass};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::{CsrMatrix, DType, Tensor};
use ipu_playground::trace::nn::{Arg, Dropout, LayerNorm, Linear, Module};
use ipu_playground::trace::{SparseVar, Tracer};
use std::rc::Rc;

/// A small model with two Blocks on two IPUs, traced in inference mode.
#[test]
fn printed_trace_of_a_blocked_module_is_exact() {
    let mut rng = Rng::new(0);
    let fc1 = Linear::new(4, 8, true, &mut rng).unwrap();
    let norm = LayerNorm::new(8);
    let fc2 = Linear::new(8, 2, false, &mut rng).unwrap();
    let tr = Tracer::new();
    tr.set_source(Some("model.rs:1".into()));
    let x = tr.input("x", &[2, 4], DType::Float32).unwrap();
    let h = tr
        .block("embed", Some(0), || {
            let h = tr.scope("fc1", || fc1.forward(&tr, &x))?;
            h.relu()
        })
        .unwrap();
    let y = tr
        .block("head", Some(1), || {
            let h = tr.scope("norm", || norm.forward(&tr, &h))?;
            let h = Dropout { p: 0.5 }.forward(&tr, &h)?;
            tr.scope("fc2", || fc2.forward(&tr, &h))
        })
        .unwrap();
    let t = tr.finish(&[&y]).unwrap();
    let text = print_graph(&t.graph);
    let expected = include_str!("expected/blocked_trace.txt");
    assert_eq!(text, expected, "\n--- got ---\n{text}\n--- want ---\n{expected}");
    verify(&t.graph).unwrap();
}

fn mean_adj(n: usize, rng: &mut Rng) -> CsrMatrix {
    let mut src = Vec::new();
    let mut dst = Vec::new();
    for i in 0..n {
        for _ in 0..3 {
            src.push(rng.below(n) as u32);
            dst.push(i as u32);
        }
        src.push(i as u32);
        dst.push(i as u32);
    }
    ipu_playground::gnn::data::mean_adjacency(n, &src, &dst)
}

struct Stack {
    layers: Vec<GroupAddRev<GnnBlock>>,
    head: Linear,
}

/// Traces `depth` GroupAddRev layers (reversible or not) and a loss; returns the
/// training graph's outputs (loss, grads…) and the executor's memory statistics.
fn run_stack(depth: usize, disable: bool, n: usize) -> (Vec<(String, Vec<f32>)>, f32, u64, u64) {
    let mut rng = Rng::new(7);
    let width = 8;
    let stack = Stack {
        layers: (0..depth)
            .map(|_| {
                let groups = (0..2).map(|_| GnnBlock::new(width / 2, width / 2, 0.5, &mut rng).unwrap()).collect();
                GroupAddRev::new(groups, disable).unwrap()
            })
            .collect(),
        head: Linear::new(width, 3, true, &mut rng).unwrap(),
    };
    let adj_m = mean_adj(n, &mut Rng::new(1));
    let tr = Tracer::new();
    let x = tr.input("x", &[n, width], DType::Float32).unwrap();
    let adj = SparseVar::input(&tr, "adj", n, n, adj_m.nnz()).unwrap();
    let mask = tr.input("mask", &[n, width], DType::Bool).unwrap();
    let mut h = tr.scope("lin", || x.tanh()).unwrap();
    let args = [Arg::Sparse(adj), Arg::Dense(mask)];
    for (i, l) in stack.layers.iter().enumerate() {
        h = tr.scope("convs", || tr.scope(&i.to_string(), || l.forward(&tr, &h, &args))).unwrap();
    }
    let out = tr.scope("head", || stack.head.forward(&tr, &h)).unwrap();
    let loss = out.log_softmax(-1).unwrap().mean(&[], false).unwrap();
    let t = tr.finish(&[&loss]).unwrap();
    let tg = training_graph(&t.graph, 0, &TrainOptions { return_grads: true, ..Default::default() }).unwrap();
    verify(&tg.graph).unwrap();
    let mut data = Rng::new(3);
    let xv: Vec<f32> = (0..n * width).map(|_| data.uniform_range(-1.0, 1.0)).collect();
    let mv: Vec<bool> = (0..n * width).map(|_| data.bernoulli(0.5)).collect();
    let mut inputs = vec![Rc::new(Tensor::from_f32(&[n, width], xv).unwrap())];
    inputs.extend(adj_m.to_tensors(adj_m.nnz()).unwrap().map(Rc::new));
    inputs.push(Rc::new(Tensor::from_bool(&[n, width], mv).unwrap()));
    let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let r = run(&tg.graph, &mut store, &inputs).unwrap();
    let grads = tg.grad_outputs.iter().map(|(name, i)| (name.clone(), r.outputs[*i].to_f32_vec())).collect();
    (grads, r.outputs[0].to_f32_vec()[0], r.stats.saved_for_backward, r.stats.peak_bytes)
}

#[test]
fn invertible_region_gradients_equal_the_plain_computation() {
    let (rev, loss_rev, _, _) = run_stack(3, false, 40);
    let (plain, loss_plain, _, _) = run_stack(3, true, 40);
    assert!((loss_rev - loss_plain).abs() < 1e-6, "{loss_rev} vs {loss_plain}");
    assert_eq!(rev.len(), plain.len());
    assert!(rev.len() >= 3 * 2 * 5, "every group's parameters get a gradient: {}", rev.len());
    for ((n1, g1), (n2, g2)) in rev.iter().zip(&plain) {
        assert_eq!(n1, n2);
        let scale = g2.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
        for (a, b) in g1.iter().zip(g2) {
            assert!((a - b).abs() <= 1e-4 * scale, "{n1}: {a} vs {b}");
        }
    }
}

#[test]
fn reversible_memory_does_not_grow_with_depth_and_plain_memory_does() {
    let (_, _, saved_2, _) = run_stack(2, false, 200);
    let (_, _, saved_12, _) = run_stack(12, false, 200);
    assert_eq!(saved_2, saved_12, "reversible: bytes kept for backward must not depend on depth");
    let (_, _, plain_2, _) = run_stack(2, true, 200);
    let (_, _, plain_12, _) = run_stack(12, true, 200);
    assert!(plain_12 > plain_2 * 4, "plain: {plain_2} -> {plain_12} should grow with depth");
    assert!(saved_12 * 3 < plain_12, "reversible {saved_12} vs plain {plain_12}");
}

#[test]
fn training_graph_has_backward_and_optimizer_nodes_placed_like_their_forward() {
    let mut rng = Rng::new(0);
    let fc = Linear::new(3, 2, true, &mut rng).unwrap();
    let tr = Tracer::new();
    let x = tr.input("x", &[4, 3], DType::Float32).unwrap();
    let y = tr.block("b1", Some(1), || tr.scope("fc", || fc.forward(&tr, &x))).unwrap();
    let loss = y.mean(&[], false).unwrap();
    let t = tr.finish(&[&loss]).unwrap();
    let step = ipu_playground::ir::OptimizerStep::sgd(0.1, 0.0, 0.0);
    let tg = training_graph(&t.graph, 0, &TrainOptions { optimizer: Some(step), ..Default::default() }).unwrap();
    let g = &tg.graph;
    let back: Vec<_> =
        g.nodes.iter().filter(|n| n.meta.pass == Pass::Backward && n.op.name().starts_with("matmul")).collect();
    assert!(!back.is_empty());
    assert!(back
        .iter()
        .all(|n| n.meta.block.as_deref() == Some("b1") && n.meta.ipu == Some(1) && n.meta.scope == "fc"));
    let updates: Vec<_> = g.nodes.iter().filter(|n| n.meta.pass == Pass::Optimizer).collect();
    assert_eq!(updates.len(), 2);
    // One SGD step moves the parameters against the gradient: the loss falls.
    let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let xin = Rc::new(Tensor::from_f32(&[4, 3], vec![0.5; 12]).unwrap());
    let l0 = run(g, &mut store, std::slice::from_ref(&xin)).unwrap().outputs[0].to_f32_vec()[0];
    let l1 = run(g, &mut store, &[xin]).unwrap().outputs[0].to_f32_vec()[0];
    assert!(l1 < l0, "{l0} -> {l1}");
    assert_eq!(g.placeholders(InputKind::Parameter).len(), 2);
}

#[test]
fn buffers_persist_and_reassignment_is_rejected() {
    let tr = Tracer::new();
    let x = tr.input("x", &[3], DType::Float32).unwrap();
    let running = Rc::new(Tensor::zeros(&[3], DType::Float32));
    let (y, err) = tr
        .scope("bn", || {
            let r = tr.buffer("running_mean", &running)?;
            let upd = r.scale(0.9)?.add(&x.scale(0.1)?)?;
            tr.buffer_update("running_mean", &upd)?;
            let other = Rc::new(Tensor::zeros(&[3], DType::Float32));
            let err = tr.buffer("running_mean", &other).unwrap_err();
            Ok((x.sub(&upd)?, err))
        })
        .unwrap();
    assert!(
        err.to_string().contains("'bn.running_mean'") && err.to_string().contains("reassigned"),
        "{}",
        err.to_string()
    );
    let t = tr.finish(&[&y]).unwrap();
    let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let xin = Rc::new(Tensor::from_f32(&[3], vec![1.0, 2.0, 3.0]).unwrap());
    for _ in 0..2 {
        run(&t.graph, &mut store, std::slice::from_ref(&xin)).unwrap();
    }
    let got = store.buffers["bn.running_mean"].to_f32_vec();
    for (g, w) in got.iter().zip([0.19f32, 0.38, 0.57]) {
        assert!((g - w).abs() < 1e-6, "{got:?}");
    }
    assert!(print_graph(&t.graph).contains("buffer_update"));
}

#[test]
fn shape_mismatch_names_op_scope_source_and_both_shapes() {
    let mut rng = Rng::new(0);
    let fc = Linear::new(5, 2, true, &mut rng).unwrap();
    let tr = Tracer::new();
    let x = tr.input("x", &[2, 4], DType::Float32).unwrap();
    let w = tr.scope("encoder", || tr.scope("fc", || tr.param("weight", &fc.weight))).unwrap();
    let (line, err) = tr.scope("encoder", || tr.scope("fc", || Ok((line!(), x.linear(&w, None))))).unwrap();
    let err = err.unwrap_err().to_string();
    assert!(err.contains("'linear'") && err.contains("encoder.fc"), "{err}");
    assert!(err.contains(&format!("engine.rs:{line}")), "{err}");
    assert!(err.contains("f32[2,4]") && err.contains("f32[2,5]"), "{err}");
}

#[test]
fn optimizer_updates_run_as_soon_as_their_gradient_is_final() {
    let mut rng = Rng::new(0);
    let (fc1, fc2) = (Linear::new(3, 4, true, &mut rng).unwrap(), Linear::new(4, 2, true, &mut rng).unwrap());
    let tr = Tracer::new();
    let x = tr.input("x", &[5, 3], DType::Float32).unwrap();
    let h = tr.scope("fc1", || fc1.forward(&tr, &x)).unwrap().tanh().unwrap();
    let loss = tr.scope("fc2", || fc2.forward(&tr, &h)).unwrap().mean(&[], false).unwrap();
    let t = tr.finish(&[&loss]).unwrap();
    let step = ipu_playground::ir::OptimizerStep::sgd(0.1, 0.0, 0.0);
    let tg = training_graph(&t.graph, 0, &TrainOptions { optimizer: Some(step), ..Default::default() }).unwrap();
    let program = ipu_playground::compile::schedule::updates_early(&tg.graph).unwrap();
    verify(&program).unwrap();
    let pos = |f: &dyn Fn(&ipu_playground::ir::Node) -> bool| program.nodes.iter().position(f).unwrap();
    let fc2_update =
        pos(&|n| matches!(&n.op, ipu_playground::ir::Op::OptimizerUpdate { param, .. } if param == "fc2.weight"));
    let last_backward = program.nodes.iter().rposition(|n| n.meta.pass == Pass::Backward).unwrap();
    assert!(fc2_update < last_backward, "fc2's update waits for fc1's backward:\n{}", print_graph(&program));
    // Same numbers as applying every update at the end: fc2.weight is not read after it.
    let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let xin = Rc::new(Tensor::from_f32(&[5, 3], vec![0.3; 15]).unwrap());
    let l0 = run(&program, &mut store, std::slice::from_ref(&xin)).unwrap().outputs[0].to_f32_vec()[0];
    let l1 = run(&t.graph, &mut store, &[xin]).unwrap().outputs[0].to_f32_vec()[0];
    assert!(l1 < l0, "{l0} -> {l1}");
}
