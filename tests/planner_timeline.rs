//! The time model's structure (intervals, copies, throughput) and the replica rules
//! (shared/spec/reference.md §A.1, §A.8, §A.10, §A.11).

mod planner_support;

use ipu_playground::compile::options::CommGroupType;
use ipu_playground::compile::time::Kind;
use ipu_playground::compile::{plan, plan_with, ExecutionStrategy, IpuGeneration, Options, PlanSettings};
use ipu_playground::tensor::{DType, Tensor};
use ipu_playground::trace::Tracer;
use planner_support::*;
use std::rc::Rc;

#[test]
fn timeline_intervals_are_ordered_and_never_overlap_on_one_ipu() {
    use ipu_playground::compile::{PhaseSpec, PhasedExecution, StageSpec};
    let phases: Vec<PhaseSpec> =
        (0..4).map(|k| PhaseSpec::stages(vec![StageSpec::new(&[&format!("b{k}")]).ipu(k)])).collect();
    let strategies = [
        ExecutionStrategy::parse("pipelined").unwrap(),
        ExecutionStrategy::parse("sharded").unwrap(),
        ExecutionStrategy::ParallelPhased(PhasedExecution::new(phases.clone())),
        ExecutionStrategy::SerialPhased(PhasedExecution::new(phases)),
    ];
    for strategy in strategies {
        let g = on_ipus(&[0, 1, 2, 3], true);
        let name = strategy.name();
        let p = plan_opts(&g, |o| {
            o.gradient_accumulation(8).unwrap().set_execution_strategy(strategy).unwrap();
        });
        assert!(p.valid, "{:#?}", p.errors);
        for t in &p.time.ipus {
            assert!(!t.intervals.is_empty());
            for w in t.intervals.windows(2) {
                assert!(w[0].end <= w[1].start + 1e-15, "{name} IPU {}: {:?} then {:?}", t.ipu, w[0], w[1]);
            }
            assert_eq!(t.intervals[0].start, 0.0);
            assert!(t.intervals.iter().all(|x| x.end > x.start));
            // Every IPU accounts for the whole iteration.
            let covered: f64 = t.intervals.iter().map(|x| x.end - x.start).sum();
            let it = p.time.iteration_time_s;
            assert!((covered - it).abs() < 1e-9 * it + 1e-12, "{name} IPU {}: {covered} of {it}", t.ipu);
        }
    }
}

#[test]
fn timeline_copies_appear_where_values_cross_ipus() {
    let g = on_ipus(&[0, 1], false);
    let p = plan_opts(&g, |o| {
        o.device_iterations(4).unwrap();
    });
    assert_eq!(p.copies.len(), 1);
    let c = &p.copies[0];
    assert_eq!((c.from_ipu, c.to_ipu, c.bytes), (0, 1, 4 * 8 * 4));
    for ipu in [0, 1] {
        assert!(p.time.ipus[ipu].intervals.iter().any(|x| x.kind == Kind::Copy), "IPU {ipu}");
    }
    // One IPU: no copies at all.
    let p = plan(&on_ipus(&[0, 0], false), &Options::new());
    assert!(p.copies.is_empty());
    assert!(p.time.ipus[0].intervals.iter().all(|x| x.kind != Kind::Copy));
}

#[test]
fn timeline_throughput_is_samples_per_step_over_step_time() {
    let g = on_ipus(&[0, 1], true);
    let p = plan_opts(&g, |o| {
        o.gradient_accumulation(6).unwrap().device_iterations(5).unwrap().replication_factor(2).unwrap();
    });
    let t = &p.time;
    // batch 4 × deviceIterations 5 × accumulation 6 × replicas 2.
    assert_eq!(t.samples_per_step, 4 * 5 * 6 * 2);
    assert_eq!((t.iterations_per_step, t.micro_batches_per_iteration, t.micro_batch_size), (5, 6, 4));
    assert!((t.throughput - t.samples_per_step as f64 / t.step_time_s).abs() < 1e-9 * t.throughput);
    assert!((t.step_time_s - 5.0 * t.iteration_time_s).abs() < 1e-12);
    // Training with replicas ends with the all-reduce of gradients.
    assert!(t.ipus[0].intervals.iter().any(|x| x.label.contains("all-reduce")));
    // The micro-batch size can be given.
    let p = plan_with(&g, &Options::new(), &PlanSettings { micro_batch_size: Some(100), ..PlanSettings::default() });
    assert_eq!(p.time.samples_per_step, 100);
}

#[test]
fn timeline_faster_generations_take_less_time() {
    let g = chain_sized(&[("b0", Some(0))], true, 256, 512);
    let time = |gen| {
        plan_opts(&g, |o| {
            o.ipu_generation(gen).unwrap();
        })
        .time
        .step_time_s
    };
    let (mk1, mk2, bow) = (time(IpuGeneration::Mk1), time(IpuGeneration::Mk2), time(IpuGeneration::Bow));
    assert!(mk1 > mk2 && mk2 > bow, "{mk1} {mk2} {bow}");
}

#[test]
fn timeline_gradient_accumulation_mean_strategy_running_updates_each_micro_batch_post_divides_once() {
    // PopART: with Running (and Mean reduction) each AccumulateOp keeps the running mean,
    // accum = (1 - 1/n)·accum + (1/n)·grad, computing its two factors from a counter with
    // three scalar ops every micro-batch (popx/op/accumulatex.cpp); with Post the sum is
    // divided by accumulation × replicas once, folded into the optimizer's scalars
    // (compoundscalarhelper.cpp): no extra op. One IPU, two Linear layers: 4 parameters.
    use ipu_playground::compile::options::{MeanReductionStrategy, ReductionType};
    let g = on_ipus(&[0, 0], true);
    let params = g.nodes.iter().filter(|n| n.op.name() == "optimizer_update").count();
    assert_eq!(params, 4);
    let step = |accumulation: usize, reduction: ReductionType, strategy: MeanReductionStrategy| {
        let p = plan_opts(&g, |o| {
            o.gradient_accumulation(accumulation)
                .unwrap()
                .accumulation_and_replication_reduction_type(reduction)
                .unwrap()
                .set_mean_accumulation_and_replication_reduction_strategy(strategy)
                .unwrap();
        });
        assert!(p.valid, "{:#?}", p.errors);
        (p.time.iteration_time_s, p.generation.clone())
    };
    let (post, gen) = step(4, ReductionType::Mean, MeanReductionStrategy::Post);
    let (running, _) = step(4, ReductionType::Mean, MeanReductionStrategy::Running);
    let scalar_op = (gen.op_overhead_cycles + gen.sync_cycles) / gen.clock_hz;
    let want = 4.0 * params as f64 * 3.0 * scalar_op;
    assert!(((running - post) - want).abs() < 1e-9 * running, "Running - Post = {} s, want {want} s", running - post);
    // Sum reduction has no mean to keep: Running is the same as Post.
    let (sum_post, _) = step(4, ReductionType::Sum, MeanReductionStrategy::Post);
    let (sum_running, _) = step(4, ReductionType::Sum, MeanReductionStrategy::Running);
    assert_eq!(sum_post, sum_running);
    assert_eq!(sum_post, post);
    // Without accumulation there is no accumulator to update.
    let (one_post, _) = step(1, ReductionType::Mean, MeanReductionStrategy::Post);
    let (one_running, _) = step(1, ReductionType::Mean, MeanReductionStrategy::Running);
    assert_eq!(one_post, one_running);
}

#[test]
fn timeline_gradient_accumulation_adds_each_gradient_into_its_accumulator_every_micro_batch() {
    // Per micro-batch, every weight's gradient is added into its accumulator: an
    // elementwise pass reading the gradient and the accumulator and writing it back.
    let g = chain_sized(&[("b0", Some(0))], true, 64, 4096);
    let iteration = |n: usize| {
        plan_opts(&g, |o| {
            o.gradient_accumulation(n).unwrap();
        })
        .time
        .iteration_time_s
    };
    let p = plan(&g, &Options::new());
    let gen = &p.generation;
    // 4096 × 4096 weights and 4096 biases, float32.
    let bytes = (4096.0 * 4096.0 + 4096.0) * 4.0;
    let per_update = (gen.op_overhead_cycles + gen.sync_cycles) / gen.clock_hz;
    let accumulate = 2.0 * per_update + 3.0 * bytes / (gen.memory_bandwidth * gen.elementwise_efficiency);
    // From 2 to 3 micro-batches: one more micro-batch of work and of accumulation.
    let (two, three, four) = (iteration(2), iteration(3), iteration(4));
    assert!(((four - three) - (three - two)).abs() < 1e-9 * four, "linear in the micro-batches");
    let one_more = three - two;
    let micro_batch_work = one_more - accumulate;
    assert!(micro_batch_work > 0.0);
    // The accumulation is in each micro-batch's share, not in the plan with one micro-batch.
    assert!((iteration(2) - iteration(1) - one_more - accumulate).abs() < 1e-9 * four);
}

#[test]
fn timeline_automatic_loss_scaling_histograms_every_float16_gradient() {
    // PopART's automaticlossscaling.cpp: a histogram of each float16 gradient every
    // micro-batch (default tracking: every non-view-changing gradient tensor), and the
    // loss scale's update once per iteration. A float32 model has no histograms.
    let tr = Tracer::new();
    let x = tr.input("x", &[64, 256], DType::Float16).unwrap();
    let w = Rc::new(Tensor::zeros(&[256, 256], DType::Float16));
    let y = x.matmul(&tr.param("w", &w).unwrap()).unwrap().relu().unwrap();
    let loss = y.mean(&[], false).unwrap();
    let fwd = tr.finish(&[&loss]).unwrap().graph;
    let tg = ipu_playground::autograd::training_graph(&fwd, 0, &Default::default()).unwrap().graph;
    let time = |als: bool| {
        let mut o = Options::new();
        o.set_automatic_loss_scaling(als).unwrap();
        let p = plan(&tg, &o);
        (p.time.iteration_time_s, p.generation.clone())
    };
    let ((off, gen), (on, _)) = (time(false), time(true));
    let op = (gen.op_overhead_cycles + gen.sync_cycles) / gen.clock_hz;
    let rate = gen.memory_bandwidth * gen.elementwise_efficiency;
    let mut want = op; // the loss scale's update
    for n in tg.nodes.iter().filter(|n| n.meta.pass == ipu_playground::ir::Pass::Backward) {
        if matches!(n.op.name(), "reshape" | "permute") {
            continue;
        }
        for v in &n.outputs {
            let ty = tg.ty(*v);
            if ty.dtype == DType::Float16 {
                want += op + ty.numel() as f64 * 2.0 / rate;
            }
        }
    }
    assert!(want > 2.0 * op, "some float16 gradients are tracked");
    assert!(((on - off) - want).abs() < 1e-9 * on, "ALS adds {} s, want {want} s", on - off);
}

// ---- replicas ----

#[test]
fn replica_input_grouping_follows_poptorchs_checks() {
    let mut o = Options::new();
    o.replication_factor(8).unwrap();
    let e = o.input_replica_grouping(2, CommGroupType::All).unwrap_err();
    assert!(e.message.contains("cannot be All"), "{e}");
    let e = o.input_replica_grouping(16, CommGroupType::Consecutive).unwrap_err();
    assert!(e.message.contains("cannot be larger than replicationFactor (8)"), "{e}");
    let e = o.input_replica_grouping(3, CommGroupType::Orthogonal).unwrap_err();
    assert!(e.message.contains("must divide replicationFactor (8)"), "{e}");
    o.input_replica_grouping(2, CommGroupType::Orthogonal).unwrap();
    // NoGrouping is size 1, Consecutive.
    o.input_replica_grouping(4, CommGroupType::NoGrouping).unwrap();
    assert_eq!((o.input_replica_grouping.size, o.input_replica_grouping.kind), (1, CommGroupType::Consecutive));
    // The same checks on JSON.
    let e =
        Options::from_json(r#"{"replicationFactor": 4, "inputReplicaGrouping": {"size": 3, "type": "consecutive"}}"#)
            .unwrap_err();
    assert_eq!(e.code, "input_replica_grouping_not_factor");
}

#[test]
fn replica_groups_share_their_input_so_samples_scale_with_replicas_over_group_size() {
    // §A.11: combined batch = batch × deviceIterations × (replicas / group size) × accumulation.
    let g = on_ipus(&[0], false);
    let p = plan_opts(&g, |o| {
        o.replication_factor(8).unwrap().input_replica_grouping(2, CommGroupType::Consecutive).unwrap();
        o.device_iterations(3).unwrap();
    });
    assert_eq!(p.time.samples_per_step, 4 * 3 * 8 / 2);
    assert_eq!(p.ipus_used, 8);
}

#[test]
fn replica_buffers_updated_in_place_need_broadcast_buffers_off() {
    let tr = Tracer::new();
    let x = tr.input("x", &[3], DType::Float32).unwrap();
    let running = Rc::new(Tensor::zeros(&[3], DType::Float32));
    let r = tr.buffer("running_mean", &running).unwrap();
    let upd = r.scale(0.9).unwrap().add(&x.scale(0.1).unwrap()).unwrap();
    tr.buffer_update("running_mean", &upd).unwrap();
    let g = tr.finish(&[&x.sub(&upd).unwrap()]).unwrap().graph;
    let p = plan_opts(&g, |o| {
        o.replication_factor(2).unwrap();
    });
    let e = error(&p, "broadcast_buffers");
    assert!(e.fix.contains("broadcastBuffers(False)"), "{e}");
    let p = plan_opts(&g, |o| {
        o.replication_factor(2).unwrap().broadcast_buffers(false).unwrap();
    });
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(p.memory.ipus[0].always_live.buffers, 12);
    // One replica: nothing to broadcast.
    assert!(plan(&g, &Options::new()).valid);
}

#[test]
fn replica_sharding_without_replicas_is_a_warning() {
    let g = on_ipus(&[0], true);
    let p = plan_opts(&g, |o| {
        let s = ipu_playground::compile::TensorLocationSettings {
            use_replicated_tensor_sharding: true,
            ..ipu_playground::compile::TensorLocationSettings::on_chip()
        };
        o.set_tensor_location(ipu_playground::compile::TensorClass::Optimizer, s).unwrap();
    });
    assert!(p.valid);
    assert!(warning_codes(&p).contains(&"replicated_tensor_sharding_without_replicas"));
}

/// The four strategies over IPUs 0..4, one block per IPU (phases: one per block).
fn strategies() -> Vec<ExecutionStrategy> {
    use ipu_playground::compile::{PhaseSpec, PhasedExecution, StageSpec};
    let phases: Vec<PhaseSpec> =
        (0..4).map(|k| PhaseSpec::stages(vec![StageSpec::new(&[&format!("b{k}")]).ipu(k)])).collect();
    vec![
        ExecutionStrategy::parse("pipelined").unwrap(),
        ExecutionStrategy::parse("sharded").unwrap(),
        ExecutionStrategy::ParallelPhased(PhasedExecution::new(phases.clone())),
        ExecutionStrategy::SerialPhased(PhasedExecution::new(phases)),
    ]
}

#[test]
fn timeline_busy_adds_up_to_the_iteration_and_long_steady_states_are_elided_not_cut() {
    use ipu_playground::compile::options::MeanReductionStrategy;
    use ipu_playground::compile::time::{STEADY_UNITS_DRAWN, STEADY_UNITS_LISTED};
    let g = on_ipus(&[0, 1, 2, 3], true);
    for strategy in strategies() {
        for mean in [MeanReductionStrategy::Running, MeanReductionStrategy::Post] {
            let name = format!("{} {mean:?}", strategy.name());
            let at = |acc: usize| {
                let p = plan_opts(&g, |o| {
                    o.gradient_accumulation(acc)
                        .unwrap()
                        .replication_factor(2)
                        .unwrap()
                        .set_mean_accumulation_and_replication_reduction_strategy(mean)
                        .unwrap()
                        .set_automatic_loss_scaling(true)
                        .unwrap()
                        .set_execution_strategy(strategy.clone())
                        .unwrap();
                });
                assert!(p.valid, "{name}: {:#?}", p.errors);
                p.time
            };
            let (t15, t16, big) = (at(15), at(16), at(16_384));
            for t in [&t16, &big] {
                let it = t.iteration_time_s;
                for lane in &t.ipus {
                    // Every kind (idle included) adds up to the iteration, per IPU.
                    let busy: f64 = lane.busy.values().sum();
                    assert!((busy - it).abs() <= 1e-9 * it, "{name} IPU {}: busy {busy} of {it}", lane.ipu);
                    assert!(!lane.busy.contains_key("elided"));
                    // The lane covers the iteration, in order, without overlaps.
                    assert_eq!(lane.intervals[0].start, 0.0);
                    for w in lane.intervals.windows(2) {
                        assert!(w[0].end <= w[1].start + 1e-12 * it, "{name}: {:?} then {:?}", w[0], w[1]);
                    }
                    let covered: f64 = lane.intervals.iter().map(|x| x.end - x.start).sum();
                    assert!((covered - it).abs() <= 1e-9 * it, "{name} IPU {}: {covered} of {it}", lane.ipu);
                }
            }
            // 16 micro-batches are drawn in full; 16,384 with their steady state elided, one
            // marked interval per IPU standing for the units left out.
            assert!(t16.ipus.iter().all(|l| l.intervals.iter().all(|x| x.kind != Kind::Elided && x.repeat.is_none())));
            let mut span = None;
            for lane in &big.ipus {
                let el: Vec<_> = lane.intervals.iter().filter(|x| x.kind == Kind::Elided).collect();
                assert_eq!(el.len(), 1, "{name} IPU {}", lane.ipu);
                let r = el[0].repeat.as_ref().expect("an elided interval says what it repeats");
                assert!(r.count > 16_384 - 2 * STEADY_UNITS_DRAWN, "{name}: {} elided", r.count);
                let d = el[0].end - el[0].start;
                assert!((d - r.count as f64 * r.period_s).abs() <= 1e-9 * d, "{name}");
                let per: f64 = r.busy.values().sum();
                assert!((per - r.period_s).abs() <= 1e-9 * r.period_s, "{name}: {per} of {}", r.period_s);
                assert!(
                    span.get_or_insert((el[0].start, el[0].end)) == &(el[0].start, el[0].end),
                    "the same span on every IPU"
                );
                // Bounded drawing: ramps and a few units at each end of the steady state.
                assert!(lane.intervals.len() < 400, "{name} IPU {}: {} intervals", lane.ipu, lane.intervals.len());
                assert!(r.count + 2 * STEADY_UNITS_LISTED <= 16_384 + 8);
            }
            // The elided iteration is the full walk's: each unit adds the same time and the
            // same busy seconds of each kind (16 and 15 micro-batches are walked in full).
            let n = (16_384 - 16) as f64;
            let want = t16.iteration_time_s + n * (t16.iteration_time_s - t15.iteration_time_s);
            assert!((big.iteration_time_s - want).abs() <= 1e-9 * want, "{name}: {} vs {want}", big.iteration_time_s);
            for ((a, b), c) in t15.ipus.iter().zip(&t16.ipus).zip(&big.ipus) {
                for (kind, &s16) in &b.busy {
                    let s15 = a.busy.get(kind).copied().unwrap_or(0.0);
                    let want = s16 + n * (s16 - s15);
                    let got = c.busy.get(kind).copied().unwrap_or(0.0);
                    assert!(
                        (got - want).abs() <= 1e-9 * big.iteration_time_s,
                        "{name} IPU {} {kind}: {got} vs {want}",
                        c.ipu
                    );
                }
            }
            assert!((big.throughput - big.samples_per_step as f64 / big.step_time_s).abs() <= 1e-9 * big.throughput);
        }
    }
}

#[test]
fn timeline_inference_pipeline_over_many_device_iterations_is_elided() {
    let g = on_ipus(&[0, 1, 2, 3], false);
    let at = |di: usize| {
        plan_opts(&g, |o| {
            o.device_iterations(di).unwrap();
        })
        .time
    };
    let (a, b, big) = (at(18), at(19), at(100_000));
    let want = b.iteration_time_s + (100_000 - 19) as f64 * (b.iteration_time_s - a.iteration_time_s);
    assert!((big.iteration_time_s - want).abs() <= 1e-9 * want, "{} vs {want}", big.iteration_time_s);
    for lane in &big.ipus {
        let busy: f64 = lane.busy.values().sum();
        assert!((busy - big.iteration_time_s).abs() <= 1e-9 * big.iteration_time_s);
        let el = lane.intervals.iter().find(|x| x.kind == Kind::Elided).expect("steady steps elided");
        let r = el.repeat.as_ref().unwrap();
        assert_eq!(r.unit, "pipeline step");
        assert!(el.label.contains("pipeline steps"), "{}", el.label);
    }
}
