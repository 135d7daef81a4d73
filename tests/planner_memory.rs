//! The planner's memory model: predicted activation peaks against the CPU executor's
//! measured peaks (one IPU, fp32), always-live classes, the fit check and the tile map.

mod planner_support;

use ipu_playground::autograd::{training_graph, TrainOptions};
use ipu_playground::compile::{plan, plan_with, Options, PlanSettings, TensorClass, TensorLocationSettings};
use ipu_playground::exec::{run, Store};
use ipu_playground::ir::liveness::liveness;
use ipu_playground::ir::OptimizerStep;
use ipu_playground::models::{demo_inputs, demo_model, DemoKind, DemoSizes};
use planner_support::*;

/// Plans a small demo model's training graph on one IPU and runs the planned program on
/// the executor: (predicted, measured) peak bytes of live activations.
fn predicted_and_measured(kind: DemoKind, layers: usize) -> (u64, u64) {
    let demo = demo_model(kind, layers, 1, true, &DemoSizes::small(kind)).unwrap();
    let adam = OptimizerStep::adam(1e-3, 0.9, 0.999, 1e-8, 0.0, false);
    let tg =
        training_graph(&demo.trace.graph, 0, &TrainOptions { optimizer: Some(adam), ..Default::default() }).unwrap();
    let p = plan_with(
        &tg.graph,
        &Options::new(),
        &PlanSettings { micro_batch_size: Some(demo.micro_batch_size), ..PlanSettings::default() },
    );
    assert!(p.valid && p.fits, "{:#?}", p.errors);
    assert_eq!(p.ipus_used, 1);
    let mut store = Store::from_params(&demo.trace.params, &demo.trace.buffers, 0).unwrap();
    let r = run(&p.graph, &mut store, &demo_inputs(&demo, 1).unwrap()).unwrap();
    assert!(r.outputs[0].to_f32_vec()[0].is_finite());
    let predicted = p.memory.ipus[0].live_peak_bytes;
    // The planner's one-IPU timeline is ir::liveness's.
    assert_eq!(predicted, liveness(&p.graph).peak());
    (predicted, r.stats.peak_bytes)
}

fn within_5_percent(kind: DemoKind, layers: usize) {
    let (predicted, measured) = predicted_and_measured(kind, layers);
    let ratio = predicted as f64 / measured as f64;
    assert!((0.95..=1.05).contains(&ratio), "{kind:?} x{layers}: predicted {predicted}, measured {measured}");
    assert!(measured > 0);
}

#[test]
fn memory_predicted_peak_matches_the_executor_for_an_mlp() {
    within_5_percent(DemoKind::Mlp, 4);
}

#[test]
fn memory_predicted_peak_matches_the_executor_for_a_transformer_block() {
    within_5_percent(DemoKind::Transformer, 1);
}

#[test]
fn memory_predicted_peak_matches_the_executor_for_revgnn_at_7_and_112_layers() {
    within_5_percent(DemoKind::RevGnn, 7);
    within_5_percent(DemoKind::RevGnn, 112);
    // Reversible layers keep activation memory flat in depth, predicted and measured.
    assert_eq!(predicted_and_measured(DemoKind::RevGnn, 7).0, predicted_and_measured(DemoKind::RevGnn, 112).0);
}

#[test]
fn memory_always_live_counts_weights_optimizer_state_and_accumulators() {
    // Two Linear(8, 8) layers: 2 × 72 floats of weights; SGD momentum keeps one state each.
    let g = on_ipus(&[0, 0], true);
    let p = plan(&g, &Options::new());
    let a = &p.memory.ipus[0].always_live;
    assert_eq!((a.weights, a.optimizer, a.accumulators), (2 * 72 * 4, 2 * 72 * 4, 0));
    assert!(a.code > 0 && a.exchange > 0);
    // Gradient accumulation adds one accumulator per weight.
    let p = plan_opts(&g, |o| {
        o.gradient_accumulation(4).unwrap();
    });
    assert_eq!(p.memory.ipus[0].always_live.accumulators, 2 * 72 * 4);
    // Replicated tensor sharding splits the optimizer state over the replicas.
    let p = plan_opts(&g, |o| {
        let rts = TensorLocationSettings { use_replicated_tensor_sharding: true, ..TensorLocationSettings::on_chip() };
        o.replication_factor(4).unwrap().set_tensor_location(TensorClass::Optimizer, rts).unwrap();
    });
    assert_eq!(p.memory.ipus[0].always_live.optimizer, 2 * 72 * 4 / 4);
    // Inference: no optimizer state.
    let p = plan(&on_ipus(&[0, 0], false), &Options::new());
    assert_eq!(p.memory.ipus[0].always_live.optimizer, 0);
}

#[test]
fn memory_capacity_is_1472_tiles_of_624_kib_on_mk2() {
    let p = plan(&on_ipus(&[0], false), &Options::new());
    assert_eq!(p.memory.capacity_bytes, 1472 * 638_976);
    assert_eq!(p.memory.ipus[0].tiles.len(), 1472);
    let mut o = Options::new();
    o.ipu_generation(ipu_playground::compile::IpuGeneration::Mk1).unwrap();
    let p = plan(&on_ipus(&[0], false), &o);
    assert_eq!((p.memory.capacity_bytes, p.memory.ipus[0].tiles.len()), (1216 * 256 * 1024, 1216));
}

#[test]
fn memory_a_model_that_does_not_fit_names_the_ipu_need_capacity_and_largest_tensors() {
    // 6144-wide layers: 144 MiB of weights each, plus SGD momentum: IPU 1 (three layers)
    // overflows, IPU 0 (one layer) fits.
    let g = chain_sized(&[("b0", Some(0)), ("b1", Some(1)), ("b2", Some(1)), ("b3", Some(1))], true, 4, 6144);
    let p = plan_opts(&g, |o| {
        o.gradient_accumulation(3)
            .unwrap()
            .set_execution_strategy(ipu_playground::compile::ExecutionStrategy::Sharded(Default::default()))
            .unwrap();
    });
    assert!(p.valid, "a plan that does not fit is still valid: {:#?}", p.errors);
    assert!(!p.fits);
    assert!(p.memory.ipus[0].fits && !p.memory.ipus[1].fits);
    let e = error(&p, "out_of_memory");
    assert!(e.message.contains("Out of memory on IPU 1"), "{e}");
    assert!(e.message.contains("897.0 MiB (1472 tiles × 624.0 KiB)"), "{e}");
    assert!(e.message.contains(".weight (144.0 MiB, weight)"), "{e}");
    assert_eq!(e.node, Some(p.memory.ipus[1].peak_step));
    assert!(p.memory.ipus[1].peak_bytes > p.memory.capacity_bytes);
    let largest = &p.memory.ipus[1].largest;
    assert_eq!(largest[0].bytes, 6144 * 6144 * 4);
    assert!(largest.iter().any(|l| l.class == "weight") && largest.iter().any(|l| l.class == "optimizer"));
}

#[test]
fn memory_tile_map_spreads_the_peak_over_every_tile() {
    let g = chain_sized(&[("b0", Some(0)), ("b1", Some(0))], true, 512, 512);
    let p = plan(&g, &Options::new());
    let m = &p.memory.ipus[0];
    let total: u64 = m.tiles.iter().map(|&t| t as u64).sum();
    // Every byte at the peak is on some tile (integer division may drop a few per tile).
    assert!(total <= m.peak_bytes && total + 2 * 1472 >= m.peak_bytes, "{total} vs {}", m.peak_bytes);
    assert!(m.tiles.iter().all(|&t| t > 0));
    assert!(m.max_tile_bytes <= 638_976);
}

#[test]
fn memory_temporaries_are_capped_by_the_available_memory_proportion() {
    let g = chain_sized(&[("b0", Some(0))], false, 8192, 8192);
    let at = |amp: f64| {
        let p = plan_opts(&g, |o| {
            o.set_available_memory_proportion(&[("IPU0", amp)]).unwrap();
        });
        p.memory.ipus[0].peak.temporaries
    };
    // The product's fp32 partials (256 MiB) fit under 0.6 of 897 MiB but not under 0.1.
    assert_eq!(at(0.6), 8192 * 8192 * 4);
    assert_eq!(at(0.1), (0.1 * (1472.0 * 638_976.0)) as u64);
}

#[test]
fn memory_steps_keep_the_peak_when_sampled_and_values_cover_it() {
    let demo = demo_model(DemoKind::RevGnn, 300, 1, true, &DemoSizes::small(DemoKind::RevGnn)).unwrap();
    let tg = training_graph(&demo.trace.graph, 0, &TrainOptions::default()).unwrap();
    let p = plan(&tg.graph, &Options::new());
    let m = &p.memory.ipus[0];
    assert!(m.program_steps > ipu_playground::compile::memory::MAX_STEPS);
    assert!(m.steps.len() <= ipu_playground::compile::memory::MAX_STEPS);
    assert!(m.steps.node.contains(&m.peak_step));
    // The live values at the peak step add up to its activations and gradients.
    let v = &p.memory.values;
    let live: u64 = (0..v.len())
        .filter(|&k| v.ipu[k] == 0 && v.birth[k] <= m.peak_step && m.peak_step <= v.death[k] && v.class[k] != "loaded")
        .map(|k| v.bytes[k])
        .sum();
    assert_eq!(live, m.peak.activations + m.peak.gradients);
}

/// A deep MLP with big activations and small parameters, traced for training: a batch of
/// 131,072 rows of 256 features (128 MiB per activation), 256-wide layers (256 KiB of
/// weights each). Tracing allocates only the parameters.
fn big_mlp(layers: usize) -> ipu_playground::ir::Graph {
    let sizes = DemoSizes { batch: 131_072, input: 256, width: 256, classes: 16, ..DemoSizes::small(DemoKind::Mlp) };
    let demo = demo_model(DemoKind::Mlp, layers, 1, true, &sizes).unwrap();
    training_graph(&demo.trace.graph, 0, &TrainOptions { optimizer: Some(sgd()), ..Default::default() }).unwrap().graph
}

/// The reference: live activation bytes by their definition (ir::liveness's rules), summed
/// in 128 bits with no shared code: while node i runs, every counted value born before it
/// and read at i or later, plus the counted values it makes that something reads.
fn reference_peak(g: &ipu_playground::ir::Graph) -> u128 {
    use ipu_playground::ir::{InputKind, Op};
    let n = g.nodes.len();
    let mut last: Vec<Option<usize>> = vec![None; g.values.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        for v in &node.inputs {
            last[v.0 as usize] = Some(i);
        }
    }
    for v in &g.outputs {
        last[v.0 as usize] = Some(n);
    }
    let bytes = |v: usize| -> u128 {
        let ty = &g.values[v].ty;
        ty.shape.iter().map(|&d| d as u128).product::<u128>() * ty.dtype.size() as u128
    };
    let counted = |v: usize| match &g.nodes[g.values[v].node].op {
        Op::Placeholder { kind, .. } => *kind == InputKind::Input,
        Op::Constant { .. } => false,
        _ => true,
    };
    (0..n)
        .map(|i| {
            let before: u128 = (0..g.values.len())
                .filter(|&v| counted(v) && g.values[v].node < i && last[v].is_some_and(|d| d >= i))
                .map(bytes)
                .sum();
            let born: u128 = g.nodes[i]
                .outputs
                .iter()
                .map(|v| v.0 as usize)
                .filter(|&v| counted(v) && last[v].is_some())
                .map(bytes)
                .sum();
            before + born
        })
        .max()
        .unwrap_or(0)
}

/// The 40-layer model's peak of live activations and gradients in training (10.0 GiB;
/// tests/wasm_plan.rs checks the same number in wasm): 80 tensors of 128 MiB (the input,
/// the Linear and ReLU outputs of the 39 hidden layers, the gradient entering the last
/// hidden layer), the logits' gradient (131,072 × 16 floats), the last layer's weight
/// gradient (16 × 256 floats) and the loss.
const BIG_MLP_PEAK: u64 = 80 * (128 << 20) + 131_072 * 16 * 4 + 16 * 256 * 4 + 4;

#[test]
fn memory_bytes_are_64_bit_a_deep_model_past_4_gib_plans_exactly() {
    let g = big_mlp(40);
    let p = plan(&g, &Options::new());
    assert!(p.valid, "{:#?}", p.errors);
    let m = &p.memory.ipus[0];
    let want = reference_peak(&p.graph);
    assert!(want > 8 << 30, "the model keeps more than 8 GiB of activations: {want}");
    assert_eq!(m.live_peak_bytes as u128, want);
    assert_eq!(m.live_peak_bytes, liveness(&p.graph).peak());
    assert_eq!(m.live_peak_bytes, BIG_MLP_PEAK);

    // The peak step and the always-live memory add up, in 64 bits.
    assert_eq!(m.peak_bytes, m.always_live.total() + m.peak.activations + m.peak.gradients + m.peak.temporaries);
    assert!(!m.fits && !p.fits);
    // The live values listed at the peak step add up to its activations and gradients.
    let v = &p.memory.values;
    let live: u128 = (0..v.len())
        .filter(|&k| v.birth[k] <= m.peak_step && m.peak_step <= v.death[k])
        .map(|k| v.bytes[k] as u128)
        .sum();
    assert_eq!(live, (m.peak.activations + m.peak.gradients) as u128);
    // The JSON carries the exact numbers.
    let j: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(j["memory"]["ipus"][0]["livePeakBytes"].as_u64(), Some(BIG_MLP_PEAK));
    assert!(p.plan_line().contains(&format!("peak_bytes_max_ipu={}", m.peak_bytes)));
}
