//! The execution strategies (shared/spec/reference.md §A.3, §A.13): pipelined depth rules and
//! schedule, sharded execution, and the phased strategies' phases, parity and liveness.

mod planner_support;

use ipu_playground::compile::options::Recomputation;
use ipu_playground::compile::schedule::StagePass;
use ipu_playground::compile::strategy::PhaseLiveness;
use ipu_playground::compile::time::Kind;
use ipu_playground::compile::{
    plan, AutoStage, ExecutionStrategy, Options, PhaseSpec, PhasedExecution, PipelinedExecution, Plan, StageSpec,
    TensorClass, TensorLocationSettings,
};
use ipu_playground::ir::Pass;
use planner_support::*;

fn sharded() -> ExecutionStrategy {
    ExecutionStrategy::Sharded(PipelinedExecution::default())
}

// ---- pipelined ----

#[test]
fn pipelined_forward_stages_are_ipu_switches_plus_one_and_training_has_2f_minus_1() {
    let inf = on_ipus(&[0, 1, 2, 3], false);
    let p = plan_opts(&inf, |o| {
        o.device_iterations(4).unwrap();
    });
    assert_eq!(p.stages.len(), 4);
    assert!(p.stages.iter().all(|s| s.pass == StagePass::Forward));
    let tr = on_ipus(&[0, 1, 2, 3], true);
    let p = plan_opts(&tr, |o| {
        o.gradient_accumulation(7).unwrap();
    });
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(p.stages.len(), 7, "2F - 1 with F = 4");
    assert_eq!(p.stages.iter().map(|s| s.ipu).collect::<Vec<_>>(), [0, 1, 2, 3, 2, 1, 0]);
    use StagePass::*;
    assert_eq!(
        p.stages.iter().map(|s| s.pass).collect::<Vec<_>>(),
        [Forward, Forward, Forward, ForwardBackward, Backward, Backward, Backward]
    );
}

#[test]
fn pipelined_consecutive_blocks_on_one_ipu_merge_into_one_stage() {
    let g = chain(&[("a", Some(0)), ("b", Some(0)), ("c", Some(1))], false);
    let p = plan_opts(&g, |o| {
        o.device_iterations(2).unwrap();
    });
    assert_eq!(p.stages.len(), 2);
    assert_eq!(p.stages[0].blocks, ["a", "b"]);
}

#[test]
fn pipelined_training_needs_gradient_accumulation_of_at_least_the_stages() {
    let g = on_ipus(&[0, 1, 2], true);
    let p = plan_opts(&g, |o| {
        o.gradient_accumulation(4).unwrap();
    });
    let e = error(&p, "pipeline_gradient_accumulation");
    assert!(
        e.message
            .contains("gradientAccumulation (4) must be greater than or equal to the number of pipeline stages (5)"),
        "{e}"
    );
    assert!(e.message.contains("a model with 3 pipeline stages has 2 more stages when training"), "{e}");
    assert!(e.fix.contains("gradientAccumulation(5)"));
    assert!(!p.valid);
    let p = plan_opts(&g, |o| {
        o.gradient_accumulation(5).unwrap().auto_round_num_ipus(true).unwrap();
    });
    assert!(p.valid, "{:#?}", p.errors);
}

#[test]
fn pipelined_training_without_optimizer_updates_warns_that_no_state_is_counted() {
    let fwd = on_ipus(&[0, 1], false);
    let tg = ipu_playground::autograd::training_graph(&fwd, 0, &Default::default()).unwrap().graph;
    let p = plan_opts(&tg, |o| {
        o.gradient_accumulation(3).unwrap();
    });
    assert!(p.valid && p.training, "{:#?}", p.errors);
    assert_eq!(warning_codes(&p), ["no_optimizer"]);
    assert!(p.memory.ipus.iter().all(|m| m.always_live.optimizer == 0));
    // With the optimizer's updates: no warning.
    let p = plan_opts(&on_ipus(&[0, 1], true), |o| {
        o.gradient_accumulation(3).unwrap();
    });
    assert!(p.warnings.is_empty(), "{:#?}", p.warnings);
}

#[test]
fn pipelined_training_with_gradients_returned_keeps_each_update_in_its_backward_stage() {
    // A step that returns its gradients to the host as well as updating (what a
    // PoplarExecutor's plan holds): each update still runs where its gradient is made, so
    // the stages stay 2F - 1.
    let fwd = on_ipus(&[0, 1, 2, 3], false);
    let opts =
        ipu_playground::autograd::TrainOptions { optimizer: Some(sgd()), return_grads: true, ..Default::default() };
    let tg = ipu_playground::autograd::training_graph(&fwd, 0, &opts).unwrap().graph;
    let p = plan_opts(&tg, |o| {
        o.gradient_accumulation(7).unwrap();
    });
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(p.stages.iter().map(|s| s.ipu).collect::<Vec<_>>(), [0, 1, 2, 3, 2, 1, 0]);
    assert!(p.memory.ipus.iter().all(|m| m.always_live.optimizer > 0), "SGD with momentum keeps a velocity");
}

#[test]
fn pipelined_inference_needs_device_iterations_of_at_least_the_stages() {
    let g = on_ipus(&[0, 1], false);
    let p = plan(&g, &Options::new());
    let e = error(&p, "pipeline_device_iterations");
    assert!(e
        .message
        .contains("deviceIterations (1) must be greater than or equal to the number of pipeline stages (2)"));
    let p = plan_opts(&g, |o| {
        o.device_iterations(2).unwrap();
    });
    assert!(p.valid, "{:#?}", p.errors);
}

#[test]
fn pipelined_one_ipu_is_not_a_pipeline() {
    let g = on_ipus(&[0, 0], true);
    let p = plan(&g, &Options::new());
    assert!(p.valid && p.pipeline.is_none(), "{:#?}", p.errors);
}

#[test]
fn pipelined_schedule_has_ramp_up_steady_and_ramp_down() {
    let g = on_ipus(&[0, 1, 2], true);
    let p = plan_opts(&g, |o| {
        o.gradient_accumulation(8).unwrap();
    });
    let pl = p.pipeline.as_ref().unwrap();
    assert_eq!((pl.stages, pl.micro_batches), (5, 8));
    assert_eq!((pl.ramp_up, pl.steady, pl.ramp_down), (4, 4, 4));
    // Every micro-batch visits every stage once, stage s at step m + s.
    assert_eq!(pl.schedule.len(), 5 * 8);
    assert!(pl.schedule.iter().all(|c| c.step == c.micro_batch + c.stage && c.ipu == p.stages[c.stage].ipu));
    // The timeline has one copy phase per pipeline step (IPU 0 always takes part or syncs).
    let steps = p.time.ipus[0]
        .intervals
        .iter()
        .filter(|x| matches!(x.kind, Kind::Copy | Kind::Sync) && x.label.ends_with("copies"))
        .count();
    assert_eq!(steps, pl.steps());
}

#[test]
fn pipelined_stash_grows_with_the_distance_to_the_backward_stage() {
    let g = chain_sized(&[("b0", Some(0)), ("b1", Some(1)), ("b2", Some(2)), ("b3", Some(3))], true, 64, 32);
    let stash = |p: &Plan| p.memory.ipus.iter().map(|m| m.peak.stash).collect::<Vec<_>>();
    let p = plan_opts(&g, |o| {
        o.gradient_accumulation(8).unwrap();
    });
    let with = stash(&p);
    // With recomputation each stage stashes its input (x, or the previous stage's output:
    // 64 × 32 floats) for the 2(F - 1 - s) micro-batches in flight before its backward
    // stage; the last IPU, whose stage also runs the first backward step, stashes nothing.
    let input = 64 * 32 * 4;
    assert_eq!(with, [6 * input, 4 * input, 2 * input, 0]);
    // Without recomputation every saved activation is stashed, not only stage inputs.
    let p = plan_opts(&g, |o| {
        o.gradient_accumulation(8).unwrap().auto_recomputation(Recomputation::None).unwrap();
    });
    let without = stash(&p);
    assert!(without[0] > with[0], "{without:?} vs {with:?}");
    // Recomputation costs time in the backward stages.
    let t_with = plan_opts(&g, |o| {
        o.gradient_accumulation(8).unwrap();
    })
    .time
    .iteration_time_s;
    assert!(t_with > p.time.iteration_time_s, "{t_with} vs {}", p.time.iteration_time_s);
}

#[test]
fn pipelined_weights_shared_across_ipus_are_rejected() {
    // One Linear used in a block on IPU 0 and again on IPU 1.
    use ipu_playground::rng::Rng;
    use ipu_playground::tensor::DType;
    use ipu_playground::trace::nn::{Linear, Module};
    use ipu_playground::trace::Tracer;
    let lin = Linear::new(8, 8, true, &mut Rng::new(0)).unwrap();
    let tr = Tracer::new();
    let x = tr.input("x", &[4, 8], DType::Float32).unwrap();
    let h = tr.block("a", Some(0), || tr.scope("shared", || lin.forward(&tr, &x))).unwrap();
    let y = tr.block("b", Some(1), || tr.scope("shared", || lin.forward(&tr, &h))?.mean(&[], false)).unwrap();
    let g = tr.finish(&[&y]).unwrap().graph;
    let p = plan_opts(&g, |o| {
        o.device_iterations(2).unwrap();
    });
    let e = error(&p, "shared_weight_across_ipus");
    assert!(
        e.message.contains("Can not copy variable tensor 'shared.weight'") && e.message.contains("pipelining"),
        "{e}"
    );
    let p = plan_opts(&g, |o| {
        o.set_execution_strategy(sharded()).unwrap();
    });
    assert!(error(&p, "shared_weight_across_ipus").message.contains("must be on the same IPU"));
}

#[test]
fn many_weights_shared_across_ipus_are_eight_errors_and_one_count() {
    // 30 Linears each used on IPU 0 and again on IPU 1: PopTorch's error for the first
    // eight, then one line counting the rest (a plan does not list thousands of them).
    use ipu_playground::rng::Rng;
    use ipu_playground::tensor::DType;
    use ipu_playground::trace::nn::{Linear, Module};
    use ipu_playground::trace::Tracer;
    let layers: Vec<Linear> = (0..30).map(|i| Linear::new(4, 4, false, &mut Rng::new(i)).unwrap()).collect();
    let tr = Tracer::new();
    let mut h = tr.input("x", &[2, 4], DType::Float32).unwrap();
    for (i, lin) in layers.iter().enumerate() {
        let name = format!("l{i}");
        h = tr.block("a", Some(0), || tr.scope(&name, || lin.forward(&tr, &h))).unwrap();
        h = tr.block("b", Some(1), || tr.scope(&name, || lin.forward(&tr, &h))).unwrap();
    }
    let y = tr.block("b", Some(1), || h.mean(&[], false)).unwrap();
    let g = tr.finish(&[&y]).unwrap().graph;
    let p = plan_opts(&g, |o| {
        o.set_execution_strategy(sharded()).unwrap();
    });
    let shared: Vec<_> = p.errors.iter().filter(|e| e.code == "shared_weight_across_ipus").collect();
    assert_eq!(shared.len(), 9, "{shared:?}");
    assert!(shared[0].message.contains("'l0.weight'"), "{}", shared[0].message);
    assert!(
        shared[8].message.contains("22 more weights read on two IPUs (not listed; 30 in all)"),
        "{}",
        shared[8].message
    );
}

// ---- sharded ----

#[test]
fn sharded_runs_one_ipu_at_a_time() {
    let g = on_ipus(&[0, 1, 2, 3], true);
    let p = plan_opts(&g, |o| {
        o.set_execution_strategy(sharded()).unwrap();
    });
    assert!(p.valid && p.pipeline.is_none(), "{:#?}", p.errors);
    // Busy intervals (compute, exchange, sync of a stage) of two IPUs never overlap.
    let busy: Vec<(usize, f64, f64)> = p
        .time
        .ipus
        .iter()
        .flat_map(|t| {
            t.intervals
                .iter()
                .filter(|x| matches!(x.kind, Kind::Compute | Kind::Exchange) && x.label.starts_with("stage"))
                .map(move |x| (t.ipu, x.start, x.end))
        })
        .collect();
    assert!(busy.len() >= 7);
    for a in &busy {
        for b in &busy {
            if a.0 != b.0 {
                assert!(a.2 <= b.1 + 1e-15 || b.2 <= a.1 + 1e-15, "IPUs {} and {} overlap: {a:?} {b:?}", a.0, b.0);
            }
        }
    }
    // Stages in program order: IPUs 0..3 forward, then back down.
    assert_eq!(p.stages.iter().map(|s| s.ipu).collect::<Vec<_>>(), [0, 1, 2, 3, 2, 1, 0]);
}

#[test]
fn sharded_may_come_back_to_an_ipu() {
    // Unlike pipelining, sharding runs blocks on IPUs 0, 1, 0 one after another.
    let g = on_ipus(&[0, 1, 0], false);
    let p = plan_opts(&g, |o| {
        o.set_execution_strategy(sharded()).unwrap();
    });
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(p.stages.iter().map(|s| s.ipu).collect::<Vec<_>>(), [0, 1, 0]);
}

#[test]
fn sharded_is_slower_than_a_full_pipeline_for_the_same_work() {
    let g = chain_sized(&[("b0", Some(0)), ("b1", Some(1)), ("b2", Some(2)), ("b3", Some(3))], true, 256, 256);
    let pipe = plan_opts(&g, |o| {
        o.gradient_accumulation(32).unwrap();
    });
    let shard = plan_opts(&g, |o| {
        o.gradient_accumulation(32).unwrap().set_execution_strategy(sharded()).unwrap();
    });
    assert_eq!(pipe.time.samples_per_step, shard.time.samples_per_step);
    assert!(pipe.time.throughput > shard.time.throughput, "{} vs {}", pipe.time.throughput, shard.time.throughput);
}

// ---- phased ----

fn phased(parallel: bool, phases: Vec<PhaseSpec>, f: impl FnOnce(&mut PhasedExecution)) -> Options {
    let mut pe = PhasedExecution::new(phases);
    f(&mut pe);
    let mut o = Options::new();
    o.set_execution_strategy(if parallel {
        ExecutionStrategy::ParallelPhased(pe)
    } else {
        ExecutionStrategy::SerialPhased(pe)
    })
    .unwrap();
    o
}

fn three_phases_on(ipus: [usize; 3]) -> Vec<PhaseSpec> {
    (0..3).map(|k| PhaseSpec::stages(vec![StageSpec::new(&[&format!("b{k}")]).ipu(ipus[k])])).collect()
}

#[test]
fn phased_needs_explicit_phases() {
    let g = on_ipus(&[0, 0, 0], false);
    let p = plan(&g, &phased(false, vec![], |_| {}));
    let e = error(&p, "phased_auto_stage");
    assert!(e.message.contains("no AutoStage for phased execution"), "{e}");
    let p = plan(&g, &phased(false, three_phases_on([0, 0, 0]), |pe| pe.auto_stage = Some(AutoStage::AutoIncrement)));
    assert!(error_codes(&p).contains(&"phased_auto_stage"));
}

#[test]
fn phased_backward_phases_are_numbered_as_poptorch_does() {
    let g = on_ipus(&[0, 0, 0], true);
    let phase_of = |p: &Plan, pass: Pass, scope: &str| -> usize {
        let i = p
            .graph
            .nodes
            .iter()
            .position(|n| n.meta.pass == pass && n.meta.scope == scope && n.op.name() != "parameter")
            .unwrap();
        p.placement.phase[i].unwrap()
    };
    // Forward 0, 1, 2 → backward 4, 3, 2 (the last phase runs both).
    let p = plan(&g, &phased(false, three_phases_on([0, 0, 0]), |_| {}));
    assert!(p.valid, "{:#?}", p.errors);
    let scopes = ["layer0", "layer1", "layer2"];
    assert_eq!(scopes.map(|s| phase_of(&p, Pass::Forward, s)), [0, 1, 2]);
    assert_eq!(scopes.map(|s| phase_of(&p, Pass::Backward, s)), [4, 3, 2]);
    assert_eq!(p.phases.iter().map(|ph| ph.id).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    assert_eq!(p.phases[2].pass, StagePass::ForwardBackward);
    // useSeparateBackwardPhase: 6, 5, 4.
    let p = plan(&g, &phased(false, three_phases_on([0, 0, 0]), |pe| pe.separate_backward_phase = true));
    assert_eq!(scopes.map(|s| phase_of(&p, Pass::Backward, s)), [6, 5, 4]);
    assert_eq!(p.phases.iter().map(|ph| ph.id).collect::<Vec<_>>(), [0, 1, 2, 4, 5, 6]);
}

#[test]
fn phased_parallel_phases_alternate_even_and_odd_ipus() {
    // The documentation's example: phases on IPUs (0, 2), (1, 3), (0, 2).
    let g = chain(
        &[("a0", Some(0)), ("a1", Some(2)), ("b0", Some(1)), ("b1", Some(3)), ("c0", Some(0)), ("c1", Some(2))],
        false,
    );
    let two = |x: &str, y: &str, i: usize, j: usize| {
        PhaseSpec::stages(vec![StageSpec::new(&[x]).ipu(i), StageSpec::new(&[y]).ipu(j)])
    };
    let ok = vec![two("a0", "a1", 0, 2), two("b0", "b1", 1, 3), two("c0", "c1", 0, 2)];
    let p = plan(&g, &phased(true, ok, |_| {}));
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(p.phases.iter().map(|ph| ph.ipus.clone()).collect::<Vec<_>>(), [vec![0, 2], vec![1, 3], vec![0, 2]]);
    let bad = vec![two("a0", "a1", 0, 2), two("b0", "b1", 0, 2), two("c0", "c1", 1, 3)];
    let p = plan(&g, &phased(true, bad, |_| {}));
    let e = error(&p, "parallel_phase_parity");
    assert!(e.message.contains("even phases must run on even IPUs and odd phases on odd IPUs"), "{e}");
    // Serial phases may use any IPUs.
    let p = plan(&g, &phased(false, vec![two("a0", "a1", 0, 1), two("b0", "b1", 0, 1), two("c0", "c1", 0, 1)], |_| {}));
    assert!(p.valid, "{:#?}", p.errors);
}

#[test]
fn phased_serial_phases_on_different_ipu_groups_are_a_warning() {
    // Serial phases run one after another on the same IPUs (`phase(k).ipus(0, 1)` for
    // every k): phases on IPU 0, then IPU 1, then IPU 0 get a warning; all on IPU 0 none.
    let g = on_ipus(&[0, 0, 0], false);
    let p = plan(&g, &phased(false, three_phases_on([0, 1, 0]), |_| {}));
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(warning_codes(&p), ["serial_phase_ipus"]);
    assert!(p.warnings[0].message.contains("[[0], [1], [0]]"), "{}", p.warnings[0].message);
    let p = plan(&g, &phased(false, three_phases_on([0, 0, 0]), |_| {}));
    assert!(p.warnings.is_empty(), "{:#?}", p.warnings);
}

#[test]
fn phased_phase_ipus_must_match_its_stages() {
    let g = on_ipus(&[0, 0], false);
    let phases = vec![PhaseSpec::blocks(&["b0"]).ipus(&[0, 1]), PhaseSpec::blocks(&["b1"])];
    let p = plan(&g, &phased(false, phases, |_| {}));
    assert!(error(&p, "phase_ipus_mismatch").message.contains("contains 1 stages but 2 IPUs"));
}

#[test]
fn phased_offchip_modes_of_each_phase_are_serial_only() {
    let g = on_ipus(&[0, 1, 0], false);
    let p = plan(
        &g,
        &phased(true, three_phases_on([0, 1, 0]), |pe| pe.tensors_liveness = PhaseLiveness::OffChipAfterEachPhase),
    );
    assert!(error(&p, "liveness_serial_only").message.contains("only supported for serial phase execution"));
    let p = plan(
        &g,
        &phased(false, three_phases_on([0, 0, 0]), |pe| pe.tensors_liveness = PhaseLiveness::OffChipAfterEachPhase),
    );
    assert!(p.valid, "{:#?}", p.errors);
}

#[test]
fn phased_tensors_default_to_streaming_memory_and_load_around_each_phase() {
    let g = chain_sized(&[("b0", Some(0)), ("b1", Some(0)), ("b2", Some(0))], true, 16, 64);
    let p = plan(&g, &phased(false, three_phases_on([0, 0, 0]), |_| {}));
    let m = &p.memory.ipus[0];
    // Weights and optimizer state live in Streaming Memory, loaded for the phases that use them.
    assert_eq!((m.always_live.weights, m.always_live.optimizer), (0, 0));
    assert!(m.steps.loaded.iter().any(|&b| b > 0) && m.steps.streaming.iter().any(|&b| b > 0));
    assert!(p.time.ipus[0].busy.get("stream").copied().unwrap_or(0.0) > 0.0);
    // Weights on chip when asked.
    let mut o = phased(false, three_phases_on([0, 0, 0]), |_| {});
    o.set_tensor_location(TensorClass::Weight, TensorLocationSettings::on_chip()).unwrap();
    let on = plan(&g, &o);
    assert_eq!(on.memory.ipus[0].always_live.weights, 3 * (64 * 64 + 64) * 4);
    // Activations leave the chip between forward and backward with OffChipAfterFwd.
    let keep = plan(&g, &phased(false, three_phases_on([0, 0, 0]), |_| {}));
    let off =
        plan(&g, &phased(false, three_phases_on([0, 0, 0]), |pe| pe.tensors_liveness = PhaseLiveness::OffChipAfterFwd));
    let max = |p: &Plan| p.memory.ipus[0].steps.streaming.iter().copied().max().unwrap();
    assert!(max(&off) > max(&keep), "{} vs {}", max(&off), max(&keep));
    assert!(off.memory.ipus[0].peak.activations <= keep.memory.ipus[0].peak.activations);
}
