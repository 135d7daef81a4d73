//! Placement rules of the planner (PopTorch's Block, BeginBlock, Stage, AutoStage and IPU
//! count rules, shared/spec/reference.md §A.2-A.3, §A.13), with the cases PopTorch's
//! documentation gives.

mod planner_support;

use ipu_playground::compile::{plan, AutoStage, ExecutionStrategy, Options, PipelinedExecution, Plan, StageSpec};
use ipu_playground::ir::{BlockKind, Graph, Op, Pass};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::DType;
use ipu_playground::trace::nn::{Linear, Module};
use ipu_playground::trace::{Tracer, Var};
use ipu_playground::Result;
use planner_support::*;

fn strategy(s: ExecutionStrategy) -> Options {
    let mut o = Options::new();
    o.set_execution_strategy(s).unwrap();
    o
}

fn auto(a: AutoStage) -> Options {
    strategy(ExecutionStrategy::Pipelined(PipelinedExecution { auto_stage: Some(a), stages: None }))
}

fn stages(list: Vec<StageSpec>) -> Options {
    strategy(ExecutionStrategy::Pipelined(PipelinedExecution { auto_stage: None, stages: Some(list) }))
}

// ---- blocks ----

#[test]
fn blocks_first_ops_go_on_ipu_0_and_later_ops_inherit_the_previous_block() {
    // BeginBlock semantics: ops before the first block on IPU 0; every op after a
    // BeginBlock stays in it until the next one.
    let mut rng = Rng::new(0);
    let (l0, l1, l2) = (
        Linear::new(8, 8, true, &mut rng).unwrap(),
        Linear::new(8, 8, true, &mut rng).unwrap(),
        Linear::new(8, 8, true, &mut rng).unwrap(),
    );
    let tr = Tracer::new();
    let x = tr.input("x", &[4, 8], DType::Float32).unwrap();
    let h = tr.scope("l0", || l0.forward(&tr, &x)).unwrap().relu().unwrap();
    tr.begin_block("encoder", Some(1));
    let h = tr.scope("l1", || l1.forward(&tr, &h)).unwrap().tanh().unwrap();
    let h = tr.scope("l2", || l2.forward(&tr, &h)).unwrap();
    let loss = h.mean(&[], false).unwrap();
    let g = tr.finish(&[&loss]).unwrap().graph;
    let p = plan_opts(&g, |o| {
        o.device_iterations(2).unwrap();
    });
    let ipu_of = |op: &str, k: usize| {
        let i = g.nodes.iter().enumerate().filter(|(_, n)| n.op.name() == op).nth(k).unwrap().0;
        p.placement.ipu[i]
    };
    assert_eq!(ipu_of("linear", 0), 0, "ops before the first block go on IPU 0");
    assert_eq!(ipu_of("relu", 0), 0);
    assert_eq!((ipu_of("linear", 1), ipu_of("tanh", 0), ipu_of("linear", 2), ipu_of("mean", 0)), (1, 1, 1, 1));
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(p.blocks.iter().map(|b| (b.id.as_str(), b.ipu)).collect::<Vec<_>>(), [("(default)", 0), ("encoder", 1)]);
}

#[test]
fn blocks_with_one_id_are_one_block() {
    let g = chain(&[("a", Some(0)), ("b", Some(1)), ("a", Some(0))], false);
    let p = plan(&g, &auto(AutoStage::AutoIncrement));
    let ids: Vec<&str> = p.blocks.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    let a = &p.blocks[0];
    assert_eq!((a.ipu, a.stage), (0, 0));
    // Both parts of block a share its stage.
    let stages_of_a: std::collections::BTreeSet<usize> =
        (0..g.nodes.len()).filter(|&i| p.placement.block[i] == 0).map(|i| p.placement.stage[i]).collect();
    assert_eq!(stages_of_a.len(), 1);
}

/// Ops `relu`, `exp`, `tanh`, … on a `[4, 8]` input, each recorded as its step says:
/// `Scoped(id, ipu)` inside its own `with Block(id, ipu_id=ipu)`, `Begin(id, ipu)` after
/// `BeginBlock`/`Block.start(id, ipu)`, `Plain` with no annotation of its own. The loss (a
/// mean) is recorded with the last op, inside its scope when that is one.
enum Step {
    Scoped(&'static str, usize),
    Begin(&'static str, usize),
    Plain,
}

fn unary(x: &Var, k: usize) -> Result<Var> {
    match k {
        0 => x.relu(),
        1 => x.exp(),
        2 => x.tanh(),
        3 => x.sigmoid(),
        4 => x.neg(),
        _ => x.gelu(),
    }
}

fn steps(list: &[Step]) -> Graph {
    let tr = Tracer::new();
    let x = tr.input("x", &[4, 8], DType::Float32).unwrap();
    let mut h = x;
    for (k, step) in list.iter().enumerate() {
        let last = k + 1 == list.len();
        let op = |h: &Var| -> Result<Var> {
            let y = unary(h, k)?;
            if last {
                y.mean(&[], false)
            } else {
                Ok(y)
            }
        };
        h = match step {
            Step::Scoped(id, ipu) => tr.block(id, Some(*ipu), || op(&h)).unwrap(),
            Step::Begin(id, ipu) => {
                tr.begin_block(id, Some(*ipu));
                op(&h).unwrap()
            }
            Step::Plain => op(&h).unwrap(),
        };
    }
    tr.finish(&[&h]).unwrap().graph
}

/// The IPU of the op named `name`.
fn ipu_of(g: &Graph, p: &Plan, name: &str) -> usize {
    p.placement.ipu[g.nodes.iter().position(|n| n.op.name() == name).unwrap()]
}

#[test]
fn blocks_an_op_after_a_block_scope_ends_has_no_active_block() {
    // PopTorch's tests/pipelining_test.py `test_missing_block`: `with Block(ipu_id=0)`
    // around the first op, a second op after it: "No active Block, all the ops must belong
    // to a Block" (CompilerImpl.cpp setExecutionStrategyAttributes, after end_ipu_block set
    // the active IPU to -1).
    let mut rng = Rng::new(0);
    let lin = Linear::new(8, 8, true, &mut rng).unwrap();
    let tr = Tracer::new();
    let x = tr.input("x", &[4, 8], DType::Float32).unwrap();
    let h = tr.block("b0", Some(0), || lin.forward(&tr, &x)).unwrap();
    let loss = h.relu().unwrap().mean(&[], false).unwrap();
    let g = tr.finish(&[&loss]).unwrap().graph;
    let p = plan(&g, &Options::new());
    let e = error(&p, "no_active_block");
    assert!(e.message.starts_with("No active Block, all the ops must belong to a Block"), "{e}");
    assert!(e.message.contains("'relu'") && e.message.contains("the Block scope 'b0' ended"), "{e}");
    assert!(e.fix.contains("BeginBlock"), "{}", e.fix);
    let relu = g.nodes.iter().position(|n| n.op.name() == "relu").unwrap();
    assert_eq!(e.node, Some(relu));
    assert_eq!(p.errors.iter().filter(|e| e.code == "no_active_block").count(), 1, "reported once");
    assert!(!p.valid && !p.fits);
}

#[test]
fn blocks_scoped_blocks_on_four_ipus_as_in_poptorchs_inline_example() {
    // docs/user_guide/pipeline_simple.py (annotations_inline): four `with Block(ipu_id=…)`
    // scopes, every op inside one, deviceIterations(4).
    let g = steps(&[Step::Scoped("0", 0), Step::Scoped("1", 1), Step::Scoped("2", 2), Step::Scoped("3", 3)]);
    let p = plan_opts(&g, |o| {
        o.device_iterations(4).unwrap();
    });
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(
        p.blocks.iter().map(|b| (b.id.as_str(), b.ipu, b.stage)).collect::<Vec<_>>(),
        [("0", 0, 0), ("1", 1, 1), ("2", 2, 2), ("3", 3, 3)]
    );
    assert!(p.blocks.iter().all(|b| b.kind == Some(BlockKind::Scoped)));
    assert_eq!(p.stages.len(), 4);
}

#[test]
fn blocks_ops_before_the_first_block_of_either_kind_go_on_ipu_0() {
    // The active IPU starts at 0 (CompilerImpl.hpp: "By default, the active IPU is 0 in case
    // setActiveIpu is never used"): ops before the first Block scope are placed, not rejected,
    // like the layers before the first BeginBlock (the BERT example of pipeline_simple.py).
    for first in [Step::Scoped("a", 1), Step::Begin("a", 1)] {
        let g = steps(&[Step::Plain, first, Step::Scoped("b", 1)]);
        let p = plan_opts(&g, |o| {
            o.device_iterations(2).unwrap();
        });
        assert!(p.valid, "{:#?}", p.errors);
        assert_eq!((ipu_of(&g, &p, "relu"), ipu_of(&g, &p, "exp"), ipu_of(&g, &p, "tanh")), (0, 1, 1));
        assert_eq!(p.blocks[0].id, "(default)");
        assert_eq!(p.blocks[0].kind, None);
    }
}

#[test]
fn blocks_a_scope_ends_every_block_even_an_enclosing_one_or_an_earlier_begin_block() {
    // PopTorch keeps no stack of blocks: `Block.__exit__` calls end_ipu_block whatever was
    // active before, so ops after an inner scope (inside an outer one), or after a scope
    // that followed a BeginBlock, have no block.
    let tr = Tracer::new();
    let x = tr.input("x", &[4, 8], DType::Float32).unwrap();
    let y = tr
        .block("outer", Some(0), || {
            let h = tr.block("inner", Some(0), || x.relu())?;
            h.exp() // after the inner scope: no active block
        })
        .unwrap();
    let g = tr.finish(&[&y.mean(&[], false).unwrap()]).unwrap().graph;
    let p = plan(&g, &Options::new());
    let e = error(&p, "no_active_block");
    assert!(e.message.contains("'exp'") && e.message.contains("'inner' ended"), "{e}");

    let g = steps(&[Step::Begin("begin", 0), Step::Scoped("scoped", 0), Step::Plain]);
    let p = plan(&g, &Options::new());
    let e = error(&p, "no_active_block");
    assert!(e.message.contains("'tanh'"), "{e}");
    assert_eq!(e.node, g.nodes.iter().position(|n| n.op.name() == "tanh"));

    // A BeginBlock after the scope makes the later ops valid again, and they inherit it.
    let g = steps(&[Step::Scoped("scoped", 0), Step::Begin("begin", 1), Step::Plain, Step::Plain]);
    let p = plan_opts(&g, |o| {
        o.device_iterations(2).unwrap();
    });
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(
        ["relu", "exp", "tanh", "sigmoid", "mean"].map(|op| ipu_of(&g, &p, op)),
        [0, 1, 1, 1, 1],
        "ops after a BeginBlock inherit it"
    );
    assert_eq!(p.blocks.iter().map(|b| b.kind).collect::<Vec<_>>(), [Some(BlockKind::Scoped), Some(BlockKind::Begin)]);
}

#[test]
fn blocks_kind_reaches_backward_nodes_and_a_graph_without_kinds_keeps_the_old_rule() {
    // Autograd copies the forward node's meta, the Block kind included.
    let g = steps(&[Step::Begin("a", 0), Step::Scoped("b", 1)]);
    let opts = ipu_playground::autograd::TrainOptions { input_grads: vec!["x".into()], ..Default::default() };
    let tg = ipu_playground::autograd::training_graph(&g, 0, &opts).unwrap().graph;
    let backward: Vec<_> =
        tg.nodes.iter().filter(|n| n.meta.pass == Pass::Backward && n.meta.block.is_some()).collect();
    assert!(backward.iter().any(|n| n.meta.block.as_deref() == Some("a")));
    assert!(backward.iter().any(|n| n.meta.block.as_deref() == Some("b")));
    for n in backward {
        let want = if n.meta.block.as_deref() == Some("a") { BlockKind::Begin } else { BlockKind::Scoped };
        assert_eq!(n.meta.block_kind, Some(want), "{}", n.op.name());
    }
    // A graph made elsewhere, with blocks but no kinds: an op without a block after them
    // is rejected (unknown kind: as a scope), and after a BeginBlock it inherits the block.
    let mut g = steps(&[Step::Scoped("a", 0), Step::Plain]);
    for n in g.nodes.iter_mut() {
        if n.meta.block_kind == Some(BlockKind::Ended) || n.meta.block.is_some() {
            n.meta.block_kind = None;
        }
    }
    assert!(error(&plan(&g, &Options::new()), "no_active_block").message.contains("'exp'"));
    let mut g = steps(&[Step::Begin("a", 1), Step::Plain]);
    let exp = g.nodes.iter().position(|n| n.op.name() == "exp").unwrap();
    g.nodes[exp].meta.block = None;
    g.nodes[exp].meta.ipu = None;
    g.nodes[exp].meta.block_kind = None;
    let p = plan(&g, &Options::new());
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(ipu_of(&g, &p, "exp"), 1);
}

#[test]
fn blocks_backward_and_optimizer_nodes_are_placed_with_their_forward_nodes() {
    let g = chain(&[("b0", Some(0)), ("b1", Some(1))], true);
    let p = plan_opts(&g, |o| {
        o.gradient_accumulation(3).unwrap();
    });
    assert!(p.valid, "{:#?}", p.errors);
    for (i, n) in p.graph.nodes.iter().enumerate() {
        match &n.op {
            Op::OptimizerUpdate { param, .. } => {
                let want = if param.starts_with("layer0") { 0 } else { 1 };
                assert_eq!(p.placement.ipu[i], want, "update of {param}");
            }
            _ if n.meta.pass == Pass::Backward && n.meta.scope == "layer0" => assert_eq!(p.placement.ipu[i], 0),
            _ if n.meta.pass == Pass::Backward && n.meta.scope == "layer1" => assert_eq!(p.placement.ipu[i], 1),
            _ => {}
        }
    }
}

#[test]
fn blocks_one_id_on_two_ipus_is_rejected() {
    let g = chain(&[("a", Some(0)), ("a", Some(1))], false);
    let p = plan(&g, &Options::new());
    assert!(error(&p, "block_ipu_conflict").message.contains("Block 'a'"));
}

// ---- stages ----

#[test]
fn autostage_same_as_ipu_on_ipus_0_1_0_fails_to_schedule() {
    // PopTorch's example: blocks on IPUs 0, 1, 0 with SameAsIpu give stages 0, 1, 0.
    let g = on_ipus(&[0, 1, 0], false);
    let p = plan_opts(&g, |o| {
        o.device_iterations(4).unwrap();
    });
    let e = error(&p, "stage_order_conflict");
    assert!(e.message.contains("stage 0") && e.message.contains("stage 1"), "{e}");
    assert!(e.fix.contains("AutoIncrement"), "{}", e.fix);
    assert!(!p.valid);
}

#[test]
fn autostage_auto_increment_on_ipus_0_1_0_compiles() {
    let g = on_ipus(&[0, 1, 0], false);
    let mut o = auto(AutoStage::AutoIncrement);
    o.device_iterations(3).unwrap();
    let p = plan(&g, &o);
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(p.blocks.iter().map(|b| b.stage).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(p.stages.iter().map(|s| s.ipu).collect::<Vec<_>>(), [0, 1, 0]);
    assert_eq!((p.ipus_used, p.stages.len()), (2, 3));
}

#[test]
fn autostage_same_as_ipu_needs_an_ipu_for_every_block() {
    let g = chain(&[("a", Some(0)), ("b", None)], false);
    let p = plan(&g, &Options::new());
    let e = error(&p, "same_as_ipu_without_ipu");
    assert!(e.message.contains("SameAsIpu was selected but no IPU was specified for block 'b'"), "{e}");
}

#[test]
fn autostage_ipu_is_the_stage_id_when_neither_is_given() {
    let g = chain(&[("a", None), ("b", None), ("c", None)], false);
    let mut o = auto(AutoStage::AutoIncrement);
    o.device_iterations(3).unwrap();
    let p = plan(&g, &o);
    assert_eq!(p.blocks.iter().map(|b| (b.stage, b.ipu)).collect::<Vec<_>>(), [(0, 0), (1, 1), (2, 2)]);
    // With an explicit stage list too.
    let mut o = stages(vec![StageSpec::new(&["a", "b"]), StageSpec::new(&["c"])]);
    o.device_iterations(2).unwrap();
    let p = plan(&g, &o);
    assert_eq!(p.blocks.iter().map(|b| (b.stage, b.ipu)).collect::<Vec<_>>(), [(0, 0), (0, 0), (1, 1)]);
    assert!(p.valid, "{:#?}", p.errors);
}

#[test]
fn autostage_stage_ipu_wins_over_the_blocks_ipu() {
    let g = chain(&[("a", Some(3)), ("b", Some(3))], false);
    let mut o = stages(vec![StageSpec::new(&["a"]).ipu(0), StageSpec::new(&["b"]).ipu(1)]);
    o.device_iterations(2).unwrap();
    let p = plan(&g, &o);
    assert_eq!(p.blocks.iter().map(|b| b.ipu).collect::<Vec<_>>(), [0, 1]);
    assert!(p.valid, "{:#?}", p.errors);
}

#[test]
fn autostage_explicit_stage_lists_are_checked() {
    let g = chain(&[("a", Some(0)), ("b", Some(1))], false);
    // A model block missing from the list.
    let p = plan(&g, &stages(vec![StageSpec::new(&["a"])]));
    let e = error(&p, "unknown_block");
    assert!(e.message.contains("Unknown Block 'b'") && e.message.contains("[\"a\"]"), "{e}");
    // A block in two stages.
    let p = plan(&g, &stages(vec![StageSpec::new(&["a", "b"]), StageSpec::new(&["b"])]));
    assert!(error(&p, "block_in_several_stages").message.contains("'b' is associated with more than one stage"));
    // One stage over two IPUs.
    let p = plan(&g, &stages(vec![StageSpec::new(&["a", "b"])]));
    assert!(error(&p, "stage_on_several_ipus").message.contains("same pipeline stage"));
    // A listed block with no ops: a warning.
    let mut o = stages(vec![StageSpec::new(&["a"]), StageSpec::new(&["b", "ghost"])]);
    o.device_iterations(2).unwrap();
    let p = plan(&g, &o);
    assert!(p.valid && warning_codes(&p).contains(&"dead_block"), "{:#?}", p.errors);
    // A stage list and an AutoStage: the list decides, with a warning.
    let mut o = strategy(ExecutionStrategy::Pipelined(PipelinedExecution {
        auto_stage: Some(AutoStage::AutoIncrement),
        stages: Some(vec![StageSpec::new(&["a"]), StageSpec::new(&["b"])]),
    }));
    o.device_iterations(2).unwrap();
    let p = plan(&g, &o);
    assert!(p.valid, "{:#?}", p.errors);
    assert_eq!(warning_codes(&p), ["auto_stage_ignored"]);
    assert_eq!(p.blocks.iter().map(|b| b.stage).collect::<Vec<_>>(), [0, 1]);
}

#[test]
fn autostage_missing_stage_ids_are_rejected() {
    // SameAsIpu on IPUs 0 and 2: stage 1 has no op.
    let g = on_ipus(&[0, 2], false);
    let p = plan_opts(&g, |o| {
        o.device_iterations(4).unwrap().auto_round_num_ipus(true).unwrap();
    });
    let e = error(&p, "stage_missing");
    assert!(e.message.contains("stage 1 is missing"), "{e}");
}

// ---- IPU count ----

#[test]
fn ipu_count_three_ipus_reserve_four_and_fail_without_auto_round() {
    let g = on_ipus(&[0, 1, 2], false);
    let p = plan_opts(&g, |o| {
        o.device_iterations(3).unwrap();
    });
    assert_eq!((p.ipus_used, p.ipus_reserved), (3, 4));
    let e = error(&p, "ipu_count_not_power_of_two");
    assert!(e.message.contains("uses 3 IPUs") && e.message.contains("at least 4"), "{e}");
    assert!(e.fix.contains("autoRoundNumIPUs(True)"));
    assert_eq!(e.option.as_deref(), Some("autoRoundNumIPUs"));
    assert!(!p.valid);
}

#[test]
fn ipu_count_auto_round_turns_the_error_into_a_warning() {
    let g = on_ipus(&[0, 1, 2], false);
    let p = plan_opts(&g, |o| {
        o.device_iterations(3).unwrap().auto_round_num_ipus(true).unwrap();
    });
    assert!(p.valid, "{:#?}", p.errors);
    let w = p.warnings.iter().find(|w| w.code == "ipu_count_rounded").unwrap();
    assert!(w.message.contains("Reserving 4 IPUs") && w.message.contains("1 will be reserved but not used"), "{w}");
}

#[test]
fn ipu_count_counts_up_to_the_highest_ipu_and_multiplies_by_replicas() {
    // Blocks on IPUs 0 and 3 use four IPUs (max id + 1), as PopTorch counts.
    let g = on_ipus(&[0, 3], false);
    let p = plan_opts(&g, |o| {
        o.set_execution_strategy(ExecutionStrategy::Sharded(PipelinedExecution::default())).unwrap();
        o.replication_factor(2).unwrap();
    });
    assert_eq!((p.ipus_per_replica, p.replicas, p.ipus_used, p.ipus_reserved), (4, 2, 8, 8));
    assert!(p.valid, "{:#?}", p.errors);
}

#[test]
fn ipu_count_above_64_is_an_error() {
    let g = on_ipus(&[0, 1], false);
    let p = plan_opts(&g, |o| {
        o.replication_factor(33).unwrap().device_iterations(2).unwrap();
    });
    assert_eq!(p.ipus_used, 66);
    let e = error(&p, "too_many_ipus");
    assert!(e.message.contains("Too many IPUs requested (66)") && e.message.contains("distributed"), "{e}");
    // 64 is fine.
    let p = plan_opts(&g, |o| {
        o.replication_factor(32).unwrap().device_iterations(2).unwrap();
    });
    assert!(p.valid, "{:#?}", p.errors);
}

#[test]
fn ipu_count_inter_ipu_copies_carry_values_across() {
    let g = on_ipus(&[0, 1], true);
    let p = plan_opts(&g, |o| {
        o.gradient_accumulation(3).unwrap();
    });
    // Forward: b0's output goes to IPU 1; backward: its gradient comes back to IPU 0.
    let dirs: std::collections::BTreeSet<(usize, usize)> = p.copies.iter().map(|c| (c.from_ipu, c.to_ipu)).collect();
    assert_eq!(dirs, [(0, 1), (1, 0)].into_iter().collect());
    for c in &p.copies {
        let prod = p.graph.values[c.value as usize].node;
        assert_eq!(p.placement.ipu[prod], c.from_ipu);
        assert_eq!(p.placement.ipu[c.node], c.to_ipu);
        assert_eq!(c.bytes, p.graph.values[c.value as usize].ty.nbytes() as u64);
    }
}

/// A plan with too many IPUs stops at that error: no table per IPU (memory, tiles,
/// timeline) is built, whatever the count, and the plan stays small.
fn assert_stopped_at_too_many_ipus(p: &Plan, total: &str) {
    assert!(!p.valid && !p.fits);
    let e = error(p, "too_many_ipus");
    assert!(e.message.contains(&format!("Too many IPUs requested ({total})")), "{e}");
    assert!(p.memory.ipus.is_empty() && p.time.ipus.is_empty() && p.pipeline.is_none());
    assert!(p.memory.capacity_bytes > 0);
    // The plan holds the program (its size grows with the graph), nothing per IPU.
    let json = serde_json::to_string(p).unwrap();
    assert!(json.len() < (64 << 10) + 200 * p.num_nodes, "{} bytes of JSON for {} nodes", json.len(), p.num_nodes);
}

#[test]
fn ipu_count_one_block_on_ipu_65535_stops_at_the_count() {
    // Used to build 65,536 IPUs' tables (25 s, 2 GB) before failing.
    for training in [false, true] {
        let g = on_ipus(&[65_535], training);
        let p = plan_opts(&g, |o| {
            o.device_iterations(2).unwrap();
        });
        assert_eq!((p.ipus_per_replica, p.ipus_used), (65_536, 65_536));
        assert_stopped_at_too_many_ipus(&p, "65536");
        // Sharded and phased strategies stop alike.
        let p = plan_opts(&g, |o| {
            o.set_execution_strategy(ExecutionStrategy::Sharded(PipelinedExecution::default())).unwrap();
        });
        assert_stopped_at_too_many_ipus(&p, "65536");
    }
    // A stage's IPU (Stage(...).ipu(n): any whole number) at the end of usize saturates
    // rather than wrapping to a small count.
    let g = on_ipus(&[0, 1], false);
    let p = plan_opts(&g, |o| {
        o.device_iterations(2).unwrap();
        o.set_execution_strategy(ExecutionStrategy::Pipelined(PipelinedExecution {
            auto_stage: None,
            stages: Some(vec![StageSpec::new(&["b0"]), StageSpec::new(&["b1"]).ipu(usize::MAX)]),
        }))
        .unwrap();
    });
    assert_eq!(p.ipus_per_replica, usize::MAX);
    assert_stopped_at_too_many_ipus(&p, &usize::MAX.to_string());
}

#[test]
fn ipu_count_replicas_and_many_ipus_up_to_65536_stop_at_the_count() {
    // Replicas × IPUs per replica up to 65,536, and beyond (saturating).
    for (ipus, replicas, total) in [
        (vec![0], 65_536, "65536"),
        (vec![0, 1], 32_768, "65536"),
        (vec![0, 1], usize::MAX, &usize::MAX.to_string()[..]),
        ((0..2_000).collect::<Vec<_>>(), 1, "2000"),
        (vec![0, 9_999], 1, "10000"),
    ] {
        let g = on_ipus(&ipus, false);
        let p = plan_opts(&g, |o| {
            o.device_iterations(2).unwrap();
            o.replication_factor(replicas).unwrap();
        });
        assert_stopped_at_too_many_ipus(&p, total);
    }
}

#[test]
fn many_bad_blocks_give_a_short_list_of_short_errors() {
    // 5,000 listed blocks, none of them the model's: one unknown Block (whose message
    // would list all 5,000) and 5,000 dead ones (a warning each, and a scan per block).
    let g = on_ipus(&[0, 1], false);
    let names: Vec<String> = (0..5_000).map(|i| format!("listed_block_{i}")).collect();
    let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    let p = plan_opts(&g, |o| {
        o.device_iterations(2).unwrap();
        o.set_execution_strategy(ExecutionStrategy::Pipelined(PipelinedExecution {
            auto_stage: None,
            stages: Some(vec![StageSpec::new(&refs)]),
        }))
        .unwrap();
    });
    let cap = ipu_playground::error::MAX_MESSAGE_BYTES;
    for d in p.errors.iter().chain(&p.warnings) {
        assert!(d.message.len() <= cap && d.fix.len() <= cap, "{} bytes: {}", d.message.len(), d.code);
    }
    let unknown: Vec<_> = p.errors.iter().filter(|e| e.code == "unknown_block").collect();
    assert_eq!(unknown.len(), 2, "{unknown:#?}");
    assert!(unknown[0].message.starts_with("Unknown Block 'b0': the list of expected Blocks is [\"listed_block_0\""));
    assert!(unknown[0].message.ends_with("… (more)."), "{}", unknown[0].message);
    let dead: Vec<_> = p.warnings.iter().filter(|w| w.code == "dead_block").collect();
    assert_eq!(dead.len(), 9);
    assert_eq!(dead[8].message, "4992 more listed blocks with no op of the model (not listed; 5000 in all).");
    let json = serde_json::to_string(&p.errors).unwrap();
    assert!(json.len() < 16 << 10, "{} bytes of errors", json.len());
}
