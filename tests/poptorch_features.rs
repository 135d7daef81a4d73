//! PopTorch features of BERT-style models (issue #16): tied weights, recomputation
//! checkpoints, per-op available memory and the precision options, serialised products.
//! Numbers are checked against values worked out by hand here (plain loops), never against
//! the engine itself.

mod planner_support;

use ipu_playground::autograd::{training_graph, TrainOptions};
use ipu_playground::compile::{ExecutionStrategy, PhaseSpec, PhasedExecution, PipelinedExecution, StageSpec};
use ipu_playground::exec::{run, Store};
use ipu_playground::ir::{InputKind, Op, Reduction};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::{DType, Tensor};
use ipu_playground::trace::nn::{Embedding, Linear, Module};
use ipu_playground::trace::{Trace, Tracer};
use planner_support::*;
use std::rc::Rc;

// ---- tied weights ----

const V: usize = 5; // vocabulary
const D: usize = 3; // hidden size
const B: usize = 4; // tokens

/// An embedding and a decoder sharing its weight (`decoder.weight = embed.weight`), the
/// decoder on `decoder_ipu` when given (a Block per module), and the loss
/// `sum(decoder(embed(ids)) * c)` for a constant `c`.
fn tied_model(decoder_ipu: Option<usize>, c: &[f32]) -> (Trace, Embedding) {
    let mut rng = Rng::new(3);
    let embed = Embedding::new(V, D, &mut rng);
    let mut decoder = Linear::new(D, V, false, &mut rng).unwrap();
    decoder.weight = embed.weight.clone();
    let tr = Tracer::new();
    let ids = tr.input("ids", &[B], DType::Int32).unwrap();
    let cv = tr.constant(Tensor::from_f32(&[B, V], c.to_vec()).unwrap()).unwrap();
    let h = tr.block("embed", Some(0), || tr.scope("embed", || embed.forward(&tr, &ids))).unwrap();
    let loss = tr
        .block("head", Some(decoder_ipu.unwrap_or(0)), || {
            let logits = tr.scope("decoder", || decoder.forward(&tr, &h))?;
            logits.mul(&cv)?.identity_loss(Reduction::Sum)
        })
        .unwrap();
    (tr.finish(&[&loss]).unwrap(), embed)
}

fn c_values() -> Vec<f32> {
    (0..B * V).map(|k| ((k * 7 % 11) as f32 - 5.0) / 4.0).collect()
}

#[test]
fn a_tied_weight_is_one_parameter_under_its_first_name() {
    let (t, _) = tied_model(None, &c_values());
    let params = t.graph.placeholders(InputKind::Parameter);
    assert_eq!(params.len(), 1, "{params:?}");
    assert_eq!(params[0].0, "embed.weight");
    assert_eq!(t.params.len(), 1);
    assert_eq!(t.tied, vec![("decoder.weight".to_string(), "embed.weight".to_string())]);
    // One gradient and one optimizer update.
    let tg = training_graph(&t.graph, 0, &TrainOptions { optimizer: Some(sgd()), ..Default::default() }).unwrap();
    let updates = tg.graph.nodes.iter().filter(|n| matches!(n.op, Op::OptimizerUpdate { .. })).count();
    assert_eq!(updates, 1);
}

#[test]
fn a_tied_weights_gradient_is_the_sum_of_both_uses() {
    let c = c_values();
    let (t, embed) = tied_model(None, &c);
    let ids = [1i32, 4, 1, 0];
    let tg = training_graph(&t.graph, 0, &TrainOptions { return_grads: true, ..Default::default() }).unwrap();
    let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let input = Rc::new(Tensor::from_i32(&[B], ids.to_vec()).unwrap());
    let r = run(&tg.graph, &mut store, &[input]).unwrap();
    let (name, k) = &tg.grad_outputs[0];
    assert_eq!(name, "embed.weight");
    let got = r.outputs[*k].to_f32_vec();
    // By hand: L = Σ_bv c[b,v]·(h[b]·W[v]) with h[b] = W[ids[b]].
    // dL/dW[v] = Σ_b c[b,v]·h[b] (the decoder's use) and dL/dW[ids[b]] += Σ_v c[b,v]·W[v]
    // (the embedding's use).
    let w = embed.weight.value().unwrap().to_f32_vec();
    let mut want = vec![0f32; V * D];
    for b in 0..B {
        let row = ids[b] as usize;
        for v in 0..V {
            for d in 0..D {
                want[v * D + d] += c[b * V + v] * w[row * D + d];
                want[row * D + d] += c[b * V + v] * w[v * D + d];
            }
        }
    }
    for (g, e) in got.iter().zip(&want) {
        assert!((g - e).abs() < 1e-5, "{got:?} vs {want:?}");
    }
    // The decoder's use alone would miss the embedding's rows: the sum differs from it.
    let decoder_only: f32 =
        (0..D).map(|d| (0..B).map(|b| c[b * V + 1] * w[ids[b] as usize * D + d]).sum::<f32>()).sum();
    let row1: f32 = got[D..2 * D].iter().sum();
    assert!((row1 - decoder_only).abs() > 1e-3, "row 1 gets both uses: {row1} vs {decoder_only}");
}

#[test]
fn a_tied_weight_has_one_home_in_the_plan() {
    let (t, _) = tied_model(None, &c_values());
    let tg = training_graph(&t.graph, 0, &TrainOptions { optimizer: Some(sgd()), ..Default::default() }).unwrap();
    let p = plan_opts(&tg.graph, |_| {});
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(p.memory.ipus[0].always_live.weights, (V * D * 4) as u64, "counted once");
    // SGD with momentum: one velocity for the one parameter.
    assert_eq!(p.memory.ipus[0].always_live.optimizer, (V * D * 4) as u64);
}

#[test]
fn tied_weights_on_two_ipus_are_refused_when_pipelining_and_copied_between_phases() {
    // PopTorch: "You need to place layers that share weights on the same IPU" (sharded and
    // pipelined; PopART refuses to copy a variable between pipeline stages). Graphcore's BERT
    // puts its tied decoder on IPU 0 with the embedding for this reason.
    let (t, _) = tied_model(Some(1), &c_values());
    let p = plan_opts(&t.graph, |o| {
        o.device_iterations(2).unwrap();
    });
    let e = error(&p, "shared_weight_across_ipus");
    assert!(e.message.contains("'embed.weight'"), "{e}");
    let p = plan_opts(&t.graph, |o| {
        o.set_execution_strategy(ExecutionStrategy::Sharded(PipelinedExecution::default())).unwrap();
    });
    error(&p, "shared_weight_across_ipus");
    // Phased execution copies it: the plan shows the copy of the weight to IPU 1.
    let phases = vec![
        PhaseSpec::stages(vec![StageSpec::new(&["embed"]).ipu(0)]),
        PhaseSpec::stages(vec![StageSpec::new(&["head"]).ipu(1)]),
    ];
    let p = plan_opts(&t.graph, |o| {
        o.set_execution_strategy(ExecutionStrategy::ParallelPhased(PhasedExecution::new(phases))).unwrap();
    });
    assert!(!error_codes(&p).contains(&"shared_weight_across_ipus"), "{:#?}", p.errors);
    let w = t.graph.placeholders(InputKind::Parameter)[0].1;
    let copy = p.copies.iter().find(|c| c.value == w.0).expect("the weight is copied");
    assert_eq!((copy.from_ipu, copy.to_ipu, copy.bytes), (0, 1, (V * D * 4) as u64));
}

// ---- recomputation checkpoints ----

/// Two IPUs: four `Linear(32, 32) + tanh` layers on IPU 0 (a checkpoint after layer
/// `checkpoint_after` if given), one layer and the loss on IPU 1; a training graph.
fn two_stage(checkpoint_after: Option<usize>) -> ipu_playground::ir::Graph {
    let mut rng = Rng::new(0);
    let tr = Tracer::new();
    let x = tr.input("x", &[64, 32], DType::Float32).unwrap();
    let layers: Vec<Linear> = (0..5).map(|_| Linear::new(32, 32, true, &mut rng).unwrap()).collect();
    let h = tr
        .block("a", Some(0), || {
            let mut h = x.clone();
            for (i, l) in layers[..4].iter().enumerate() {
                h = tr.scope(&format!("l{i}"), || l.forward(&tr, &h))?.tanh()?;
                if checkpoint_after == Some(i) {
                    h = h.recomputation_checkpoint()?;
                }
            }
            Ok(h)
        })
        .unwrap();
    let loss = tr.block("b", Some(1), || tr.scope("l4", || layers[4].forward(&tr, &h))?.mean(&[], false)).unwrap();
    let t = tr.finish(&[&loss]).unwrap();
    training_graph(&t.graph, 0, &TrainOptions { optimizer: Some(sgd()), ..Default::default() }).unwrap().graph
}

#[test]
fn a_checkpoint_is_stashed_instead_of_recomputed() {
    // PopTorch's documentation: "When recomputation is enabled, these values will not be
    // recomputed and they will be stored in memory between forward and backwards passes
    // instead." Pipelined training on 2 IPUs turns recomputation on.
    let plain = two_stage(None);
    let ck = two_stage(Some(1));
    let tanh1 = ck.nodes.iter().filter(|n| n.op.name() == "tanh").nth(1).unwrap();
    assert!(tanh1.meta.checkpoint, "the producer of the checkpointed value is marked");
    assert_eq!(ipu_playground::ir::print::print_graph(&ck).matches("| checkpoint").count(), 1);
    assert!(ck.nodes.iter().filter(|n| n.meta.checkpoint).count() == 1, "backward copies are not checkpoints");
    let opts = |o: &mut ipu_playground::compile::Options| {
        o.gradient_accumulation(4).unwrap();
    };
    let (p0, p1) = (plan_opts(&plain, opts), plan_opts(&ck, opts));
    assert!(p0.valid && p1.valid, "{:#?}", p1.errors);
    // Stage 0 of 3 has 2 micro-batches in flight before its backward stage: the input x
    // (64 × 32 floats) was stashed for them; the checkpoint (as large) is stashed too.
    let value = 64 * 32 * 4;
    assert_eq!(p0.memory.ipus[0].peak.stash, 2 * value);
    assert_eq!(p1.memory.ipus[0].peak.stash, 2 * 2 * value);
    // The backward stage no longer recomputes the checkpoint's op: the iteration is shorter.
    assert!(
        p1.time.iteration_time_s < p0.time.iteration_time_s,
        "{} vs {}",
        p1.time.iteration_time_s,
        p0.time.iteration_time_s
    );
}

#[test]
fn recomputation_restarts_from_the_nearest_checkpoint() {
    // Without a checkpoint, stage 0's activations are all rebuilt when its backward stage
    // starts; with one after layer 1, layers 0-1 are rebuilt only when the backward pass
    // reaches them, so fewer recomputed values are live at once.
    let live_at_bwd_start = |g: &ipu_playground::ir::Graph| {
        let p = plan_opts(g, |o| {
            o.gradient_accumulation(4).unwrap();
        });
        // The first backward node on IPU 0.
        let first_bwd = (0..g.nodes.len())
            .find(|&i| g.nodes[i].meta.pass != ipu_playground::ir::Pass::Forward && p.placement.ipu[i] == 0)
            .unwrap();
        let v = &p.memory.values;
        (0..v.len())
            .filter(|&k| {
                v.ipu[k] == 0 && v.class[k] == "activation" && v.birth[k] <= first_bwd && first_bwd <= v.death[k]
            })
            .map(|k| v.bytes[k])
            .sum::<u64>()
    };
    let (plain, ck) = (live_at_bwd_start(&two_stage(None)), live_at_bwd_start(&two_stage(Some(1))));
    assert!(ck < plain, "{ck} vs {plain}");
}

/// One IPU: four `Linear(32, 32) + tanh` layers (a checkpoint after layer
/// `checkpoint_after` if given) and the loss; a training graph.
fn one_stage(checkpoint_after: Option<usize>) -> ipu_playground::ir::Graph {
    let mut rng = Rng::new(0);
    let tr = Tracer::new();
    let x = tr.input("x", &[64, 32], DType::Float32).unwrap();
    let layers: Vec<Linear> = (0..4).map(|_| Linear::new(32, 32, true, &mut rng).unwrap()).collect();
    let mut h = x.clone();
    for (i, l) in layers.iter().enumerate() {
        h = tr.scope(&format!("l{i}"), || l.forward(&tr, &h)?.tanh()).unwrap();
        if checkpoint_after == Some(i) {
            h = h.recomputation_checkpoint().unwrap();
        }
    }
    let loss = h.mean(&[], false).unwrap();
    let t = tr.finish(&[&loss]).unwrap();
    training_graph(&t.graph, 0, &TrainOptions { optimizer: Some(sgd()), ..Default::default() }).unwrap().graph
}

/// The forward values (by the label of their producer) live on IPU 0 when the backward pass
/// starts, and the plan.
fn live_when_backward_starts(
    g: &ipu_playground::ir::Graph,
    r: ipu_playground::compile::options::Recomputation,
) -> (Vec<String>, ipu_playground::compile::Plan) {
    let p = plan_opts(g, |o| {
        o.auto_recomputation(r).unwrap();
    });
    let first_bwd = g.nodes.iter().position(|n| n.meta.pass != ipu_playground::ir::Pass::Forward).unwrap();
    let v = &p.memory.values;
    let mut live: Vec<String> = (0..v.len())
        .filter(|&k| v.class[k] == "activation" && v.birth[k] <= first_bwd && first_bwd <= v.death[k])
        .map(|k| format!("{} {}", g.nodes[v.node[k]].meta.scope, g.nodes[v.node[k]].op.name()))
        .collect();
    live.sort();
    (live, p)
}

#[test]
fn one_ipu_recompute_all_keeps_inputs_and_checkpoints_and_rebuilds_each_segment_when_needed() {
    // Graphcore's CNNs on one IPU (`recompute_mode: manual`): PopART's RecomputeAll with
    // recomputationCheckpoint()s. Every forward activation but the inputs and the
    // checkpoints is dropped after the forward pass; each segment between checkpoints is
    // rebuilt when the backward pass first reads it.
    use ipu_playground::compile::options::Recomputation;
    let g = one_stage(Some(1));
    let (kept, p_none) = live_when_backward_starts(&g, Recomputation::None);
    let (recomputed, p_all) = live_when_backward_starts(&g, Recomputation::RecomputeAll);
    assert!(p_none.valid && p_all.valid);
    // Without recomputation every layer's product and tanh waits for the backward pass.
    for l in ["l0", "l1", "l2", "l3"] {
        assert!(kept.iter().any(|s| s.starts_with(&format!("{l} "))), "{l} kept: {kept:?}");
    }
    // With it: the input and the checkpoint (layer 1's tanh) stay; layer 0's and layer 1's
    // product are gone until the backward pass reaches their segment.
    assert!(recomputed.iter().any(|s| s == " input"), "{recomputed:?}");
    assert!(recomputed.iter().any(|s| s == "l1 tanh"), "the checkpoint stays: {recomputed:?}");
    for gone in ["l0 linear", "l0 tanh", "l1 linear"] {
        assert!(!recomputed.iter().any(|s| s == gone), "{gone} is rebuilt later: {recomputed:?}");
    }
    assert!(p_all.memory.ipus[0].peak.activations < p_none.memory.ipus[0].peak.activations);
    // The backward pass runs the forward work again but for the checkpoint: a longer step.
    assert!(p_all.time.iteration_time_s > p_none.time.iteration_time_s);
    // Pipeline (the default) does nothing on one stage: the plan is None's.
    let (default, p_default) = live_when_backward_starts(&g, Recomputation::Pipeline);
    assert_eq!(default, kept);
    assert_eq!(p_default.time.iteration_time_s, p_none.time.iteration_time_s);
    // Without checkpoints everything but the input is rebuilt.
    let (bare, _) = live_when_backward_starts(&one_stage(None), Recomputation::RecomputeAll);
    assert!(!bare.iter().any(|s| s.starts_with("l0 ") || s.starts_with("l1 ")), "{bare:?}");
}

// ---- set_available_memory and the precision options ----

#[test]
fn set_available_memory_goes_to_the_op_poptorch_would_pick() {
    // PopTorch's docstring example: `out = self.conv(x); poptorch.set_available_memory(out, 0.2)`.
    let mut rng = Rng::new(0);
    let conv = ipu_playground::trace::nn::Conv2d::new(4, 4, [3, 3], [2, 2], [0, 0], [1, 1], 1, true, &mut rng).unwrap();
    let lin = Linear::new(8, 8, true, &mut rng).unwrap();
    let tr = Tracer::new();
    let x = tr.input("x", &[1, 4, 9, 9], DType::Float32).unwrap();
    let out = tr.scope("conv", || conv.forward(&tr, &x)).unwrap().set_available_memory(0.2).unwrap();
    // A reshape after a Linear: found one producer up (PopTorch's fixup looks two up).
    let y = tr.input("y", &[2, 8], DType::Float32).unwrap();
    let z =
        tr.scope("lin", || lin.forward(&tr, &y)).unwrap().reshape(&[16]).unwrap().set_available_memory(0.3).unwrap();
    // No product within two producers: nothing is set (PopTorch: an identity).
    let w = y.relu().unwrap().tanh().unwrap().exp().unwrap().set_available_memory(0.4).unwrap();
    assert!(tr.input("bad", &[1], DType::Float32).unwrap().set_available_memory(0.0).is_err(), "(0, 1]");
    assert!(y.set_available_memory(1.5).unwrap_err().to_string().contains("(0, 1]"));
    let g = tr.finish(&[&out, &z, &w]).unwrap().graph;
    let amp = |name: &str| g.nodes.iter().find(|n| n.op.name() == name).unwrap().meta.available_memory.map(|p| p.0);
    assert_eq!(amp("conv2d"), Some(0.2));
    assert_eq!(amp("linear"), Some(0.3));
    assert!(g
        .nodes
        .iter()
        .all(|n| n.op.name() == "conv2d" || n.op.name() == "linear" || n.meta.available_memory.is_none()));
    let text = ipu_playground::ir::print::print_graph(&g);
    assert!(text.lines().any(|l| l.contains("= conv2d(") && l.contains("available memory 0.2")), "{text}");
}

/// `x[n, n] @ w[n, n]` (a Linear without bias), its proportion set when given.
fn product(n: usize, amp: Option<f64>) -> ipu_playground::ir::Graph {
    let lin = Linear::new(n, n, false, &mut Rng::new(0)).unwrap();
    let tr = Tracer::new();
    let x = tr.input("x", &[n, n], DType::Float32).unwrap();
    let mut y = tr.scope("lin", || lin.forward(&tr, &x)).unwrap();
    if let Some(p) = amp {
        y = y.set_available_memory(p).unwrap();
    }
    tr.finish(&[&y]).unwrap().graph
}

/// The temporaries of the plan's step running the product, and the iteration time.
fn product_plan(g: &ipu_playground::ir::Graph, f: impl FnOnce(&mut ipu_playground::compile::Options)) -> (u64, f64) {
    let p = plan_opts(g, f);
    let i = g.nodes.iter().position(|n| n.op.name() == "linear").unwrap();
    let s = &p.memory.ipus[0].steps;
    let k = (0..s.len()).find(|&k| s.node[k] == i).unwrap();
    (s.temporaries[k], p.time.iteration_time_s)
}

#[test]
fn an_ops_available_memory_caps_its_temporaries_and_costs_it_time() {
    let n = 2048;
    let partials = (n * n * 4) as u64; // float partials, one per output element
    let capacity = ipu_playground::compile::hardware::IpuGeneration::Mk2.spec().capacity_bytes();
    let (t_default, time_default) = product_plan(&product(n, None), |_| {});
    assert_eq!(t_default, partials, "0.6 of the IPU holds them");
    // The op's own proportion wins over the IPU's.
    let (t_small, time_small) = product_plan(&product(n, Some(0.01)), |_| {});
    let cap = (0.01 * capacity as f64) as u64;
    assert!(cap < partials);
    assert_eq!(t_small, cap);
    assert!(time_small > time_default, "two passes: {time_small} vs {time_default}");
    // The options-wide proportion is the default for ops without their own.
    let (t_ipu, _) = product_plan(&product(n, None), |o| {
        o.set_available_memory_proportion(&[("IPU0", 0.01)]).unwrap();
    });
    assert_eq!(t_ipu, cap);
    let (t_own, _) = product_plan(&product(n, Some(0.6)), |o| {
        o.set_available_memory_proportion(&[("IPU0", 0.01)]).unwrap();
    });
    assert_eq!(t_own, partials);
}

#[test]
fn half_partials_halve_a_products_temporaries() {
    let n = 2048;
    let (t_float, time_float) = product_plan(&product(n, None), |_| {});
    let (t_half, time_half) = product_plan(&product(n, None), |o| {
        o.set_partials_type(DType::Float16).unwrap();
    });
    assert_eq!(t_half * 2, t_float);
    assert!(time_half < time_float, "{time_half} vs {time_float}");
}

#[test]
fn precision_options_are_checked_and_round_trip_through_json() {
    let mut o = ipu_playground::compile::Options::new();
    let e = o.set_partials_type(DType::Int32).unwrap_err();
    assert_eq!(e.option.as_deref(), Some("Precision.partialsType"));
    o.set_partials_type(DType::Float16).unwrap().enable_stochastic_rounding(true).unwrap();
    let back = ipu_playground::compile::Options::from_json(&o.to_json()).unwrap();
    assert_eq!(back.precision, o.precision);
    let j = ipu_playground::compile::Options::from_json(r#"{"Precision": {"partialsType": "half"}}"#).unwrap();
    assert_eq!(j.precision.partials_type, ipu_playground::compile::PartialsType::Half);
    assert!(ipu_playground::compile::Options::from_json(r#"{"Precision": {"partialsType": "int"}}"#).is_err());
    assert!(ipu_playground::compile::Options::from_json(r#"{"Precision": ["half"]}"#).is_err());
}

#[test]
fn stochastic_rounding_is_recorded_and_said_where_it_does_nothing() {
    // PopTorch: stochastic rounding rounds float16 values; recommended for training, not for
    // inference (non-deterministic). A float32 inference model gets both warnings.
    let g = product(8, None);
    let p = plan_opts(&g, |o| {
        o.enable_stochastic_rounding(true).unwrap();
    });
    assert!(p.valid);
    let w = warning_codes(&p);
    assert!(
        w.contains(&"stochastic_rounding_without_float16") && w.contains(&"stochastic_rounding_inference"),
        "{w:?}"
    );
    let plain = plan_opts(&g, |_| {});
    assert!(!warning_codes(&plain).iter().any(|c| c.starts_with("stochastic")));
}

// ---- serializedMatMul ----

use ipu_playground::trace::MatMulSerializationMode as Mode;

const M: usize = 4;
const N: usize = 6;
const P: usize = 8;

fn operands() -> (Vec<f32>, Vec<f32>) {
    let a = (0..M * N).map(|k| ((k * 5 % 13) as f32 - 6.0) / 8.0).collect();
    let b = (0..N * P).map(|k| ((k * 3 % 7) as f32 - 3.0) / 4.0).collect();
    (a, b)
}

/// `a @ b` by hand.
fn product_by_hand(a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut y = vec![0f32; M * P];
    for i in 0..M {
        for j in 0..P {
            y[i * P + j] = (0..N).map(|k| a[i * N + k] * b[k * P + j]).sum();
        }
    }
    y
}

/// Runs `serializedMatMul(a, b, mode, factor)` with `b` a parameter and the loss
/// `sum(y * c)`; returns y and the gradient of b.
fn run_serialized(mode: Mode, factor: usize, c: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (a, b) = operands();
    let tr = Tracer::new();
    let av = tr.input("a", &[M, N], DType::Float32).unwrap();
    let bp = Rc::new(Tensor::from_f32(&[N, P], b).unwrap());
    let bv = tr.param("b", &bp).unwrap();
    let y = av.serialized_matmul(&bv, mode, factor, false).unwrap();
    let cv = tr.constant(Tensor::from_f32(&[M, P], c.to_vec()).unwrap()).unwrap();
    let loss = y.mul(&cv).unwrap().identity_loss(Reduction::Sum).unwrap();
    let t = tr.finish(&[&loss, &y]).unwrap();
    let tg = training_graph(&t.graph, 0, &TrainOptions { return_grads: true, ..Default::default() }).unwrap();
    let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let r = run(&tg.graph, &mut store, &[Rc::new(Tensor::from_f32(&[M, N], a).unwrap())]).unwrap();
    let grad = r.outputs[tg.grad_outputs[0].1].to_f32_vec();
    (r.outputs[1].to_f32_vec(), grad)
}

#[test]
fn serialized_matmul_gives_the_products_values_and_gradient_in_every_mode() {
    let (a, b) = operands();
    let want = product_by_hand(&a, &b);
    let c: Vec<f32> = (0..M * P).map(|k| ((k * 7 % 11) as f32 - 5.0) / 3.0).collect();
    // dL/db = aᵀ c.
    let mut want_grad = vec![0f32; N * P];
    for k in 0..N {
        for j in 0..P {
            want_grad[k * P + j] = (0..M).map(|i| a[i * N + k] * c[i * P + j]).sum();
        }
    }
    for (mode, factor) in [
        (Mode::InputChannels, 2),
        (Mode::ReducingDim, 3),
        (Mode::OutputChannels, 4),
        (Mode::Disabled, 0),
        (Mode::ReducingDim, 1),
    ] {
        let (y, g) = run_serialized(mode, factor, &c);
        for (got, w) in y.iter().zip(&want) {
            assert!((got - w).abs() < 1e-5, "{mode:?}: {y:?} vs {want:?}");
        }
        for (got, w) in g.iter().zip(&want_grad) {
            assert!((got - w).abs() < 1e-5, "{mode:?} gradient: {g:?} vs {want_grad:?}");
        }
    }
}

#[test]
fn serialized_matmul_factor_must_divide_the_dimension() {
    // PopTorch: "factor: Number of serialized multiplications. Must be a factor of the
    // dimension to serialize on."
    let tr = Tracer::new();
    let a = tr.input("a", &[M, N], DType::Float32).unwrap();
    let b = tr.input("b", &[N, P], DType::Float32).unwrap();
    let e = a.serialized_matmul(&b, Mode::OutputChannels, 3, false).unwrap_err().to_string();
    assert!(e.contains("factor (3)") && e.contains("output channels") && e.contains("size 8"), "{e}");
    assert!(a.serialized_matmul(&b, Mode::InputChannels, 0, false).is_err());
    let v = tr.input("v", &[N], DType::Float32).unwrap();
    assert!(a.serialized_matmul(&v, Mode::ReducingDim, 2, false).is_err());
}

#[test]
fn a_serialized_product_has_smaller_temporaries_and_more_steps() {
    let plan_of = |factor: usize| {
        let tr = Tracer::new();
        let a = tr.input("a", &[256, 512], DType::Float32).unwrap();
        let b = tr.input("b", &[512, 1024], DType::Float32).unwrap();
        let y = a.serialized_matmul(&b, Mode::OutputChannels, factor, false).unwrap();
        let g = tr.finish(&[&y]).unwrap().graph;
        let products = g.nodes.iter().filter(|n| n.op.name() == "matmul").count();
        let p = plan_opts(&g, |_| {});
        let s = &p.memory.ipus[0].steps;
        let scratch =
            (0..s.len()).filter(|&k| g.nodes[s.node[k]].op.name() == "matmul").map(|k| s.temporaries[k]).max().unwrap();
        (products, scratch, p.memory.ipus[0].program_steps)
    };
    let (n1, t1, s1) = plan_of(1);
    let (n4, t4, s4) = plan_of(4);
    assert_eq!((n1, n4), (1, 4));
    assert_eq!(t1, 256 * 1024 * 4, "float partials of the whole output");
    assert_eq!(t4 * 4, t1, "each piece's partials");
    assert!(s4 > s1);
}

// ---- embedding serialisation ----

#[test]
fn a_serialized_embedding_looks_up_the_same_rows_with_one_parameter_per_split() {
    use ipu_playground::trace::nn::SerializedEmbedding;
    let (v, d, factor) = (10usize, 3usize, 5usize);
    let embed = Embedding::new(v, d, &mut Rng::new(5));
    let ser = SerializedEmbedding::from_embedding(&embed, factor).unwrap();
    let ids = [0i32, 9, 4, 5, 1, 4];
    let c: Vec<f32> = (0..ids.len() * d).map(|k| k as f32 / 4.0 - 1.0).collect();
    let tr = Tracer::new();
    let x = tr.input("ids", &[2, 3], DType::Int32).unwrap();
    let y = tr.scope("emb", || ser.forward(&tr, &x)).unwrap();
    assert_eq!(y.shape(), &[2, 3, d]);
    let cv = tr.constant(Tensor::from_f32(&[2, 3, d], c.clone()).unwrap()).unwrap();
    let loss = y.mul(&cv).unwrap().identity_loss(Reduction::Sum).unwrap();
    let t = tr.finish(&[&loss, &y]).unwrap();
    let names: Vec<&str> = t.params.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, (0..factor).map(|i| format!("emb.split_embeddings.{i}.weight")).collect::<Vec<_>>());
    let tg = training_graph(&t.graph, 0, &TrainOptions { return_grads: true, ..Default::default() }).unwrap();
    let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let r = run(&tg.graph, &mut store, &[Rc::new(Tensor::from_i32(&[2, 3], ids.to_vec()).unwrap())]).unwrap();
    // The rows of the whole table, by hand.
    let w = embed.weight.value().unwrap().to_f32_vec();
    let want: Vec<f32> = ids.iter().flat_map(|&i| w[i as usize * d..(i as usize + 1) * d].to_vec()).collect();
    assert_eq!(r.outputs[1].to_f32_vec(), want);
    // Gradient of split s: row r gets Σ c over the tokens whose id is 2s + r.
    for (name, k) in &tg.grad_outputs {
        let s: usize = name.split('.').nth(2).unwrap().parse().unwrap();
        let mut want = vec![0f32; 2 * d];
        for (t, &i) in ids.iter().enumerate() {
            if i as usize / 2 == s {
                for e in 0..d {
                    want[(i as usize % 2) * d + e] += c[t * d + e];
                }
            }
        }
        assert_eq!(r.outputs[*k].to_f32_vec(), want, "{name}");
    }
    assert!(SerializedEmbedding::from_embedding(&embed, 3).is_err(), "10 rows do not split in 3");
}

#[test]
fn a_host_model_answers_for_a_tied_parameter_under_either_name() {
    let (t, embed) = tied_model(None, &c_values());
    let host = ipu_playground::poptorch::HostModel::new(&t);
    let a = host.parameter("embed.weight").unwrap();
    let b = host.parameter("decoder.weight").unwrap();
    assert_eq!(a.id(), b.id());
    assert_eq!(a.value().unwrap().to_f32_vec(), embed.weight.value().unwrap().to_f32_vec());
    // A write under the second name is a write of the one tensor.
    host.set_parameter("decoder.weight", Tensor::from_f32(&[V, D], vec![0.5; V * D]).unwrap()).unwrap();
    assert_eq!(host.parameter("embed.weight").unwrap().value().unwrap().to_f32_vec(), vec![0.5; V * D]);
    assert_eq!(host.tied(), t.tied);
}

#[test]
fn keep_precision_adds_float16_pieces_in_float32() {
    let tr = Tracer::new();
    let a = tr.input("a", &[M, N], DType::Float16).unwrap();
    let b = tr.input("b", &[N, P], DType::Float16).unwrap();
    let kept = a.serialized_matmul(&b, Mode::ReducingDim, 3, true).unwrap();
    let plain = a.serialized_matmul(&b, Mode::ReducingDim, 3, false).unwrap();
    assert_eq!((kept.dtype(), plain.dtype()), (DType::Float16, DType::Float16));
    let g = tr.finish(&[&kept, &plain]).unwrap().graph;
    // Three pieces widened, their sum narrowed once: four casts, all for the kept product.
    assert_eq!(g.nodes.iter().filter(|n| n.op.name() == "cast").count(), 4);
}

#[test]
fn another_modules_parameter_used_directly_is_the_same_parameter() {
    // `F.linear(x, self.embed.weight)`: the head reads the embedding's tensor itself.
    let embed = Embedding::new(V, D, &mut Rng::new(1));
    let tr = Tracer::new();
    let ids = tr.input("ids", &[B], DType::Int32).unwrap();
    let h = tr.scope("embed", || embed.forward(&tr, &ids)).unwrap();
    let logits = tr.scope("head", || h.linear(&tr.param("weight", &embed.weight)?, None)).unwrap();
    let t = tr.finish(&[&logits]).unwrap();
    assert_eq!(t.graph.placeholders(InputKind::Parameter).len(), 1);
    assert_eq!(t.tied, vec![("head.weight".to_string(), "embed.weight".to_string())]);
}
