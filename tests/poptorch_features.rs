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
