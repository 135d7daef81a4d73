//! Placement: the traced Blocks → Stages → Phases → IPUs, PopTorch's rules, as a side
//! table keyed by node index (the graph's `NodeMeta` is read, never extended).
//!
//! * Blocks come from `meta.block`/`meta.ipu`/`meta.block_kind`, as PopTorch's compiler
//!   reads its `begin_ipu_block`/`end_ipu_block` markers (popart_compiler/source/
//!   CompilerImpl.cpp `setExecutionStrategyAttributes`, Compiler.cpp `setActiveIpu` /
//!   `clearActiveIpu`, CompilerImpl.hpp `active_ipu{0}`):
//!   - ops before the first block of either kind go to an implicit block on IPU 0, stage 0
//!     (the active IPU starts at 0: "the first layers go on IPU 0");
//!   - a `BeginBlock` (or `Block.start`) stays in effect until the next block starts:
//!     later ops inherit it;
//!   - a `Block` scope, when it ends, leaves no block active — not an enclosing `Block`,
//!     not an earlier `BeginBlock` (`end_ipu_block` sets the active IPU to -1). An op
//!     recorded then, before another block starts, is PopTorch's error "No active Block,
//!     all the ops must belong to a Block" (tests/pipelining_test.py `test_missing_block`).
//!     So the rule "with Block every op must be inside a block" binds once a Block scope
//!     has ended: ops before the first block are still placed on IPU 0.
//!
//!   Blocks with one id are one block. Backward nodes carry their forward node's block;
//!   an optimizer update goes with its gradient; placeholders and constants go with their
//!   first reader.
//! * Stages: `AutoStage.SameAsIpu` (stage = IPU, an IPU is required), `AutoIncrement`
//!   (0, 1, 2, … in order), or an explicit stage list; a stage's IPU is `Stage.ipu(n)`, else
//!   its blocks' IPU, else its stage id ("ipu = stage id").
//! * Pipeline stages: a new one at each IPU switch along the forward pass (consecutive
//!   blocks on one IPU merge); training mirrors them for the backward pass, the last forward
//!   stage also running the first backward step: 2F − 1. Phased strategies: one stage per
//!   (phase, stage), backward phases numbered as PopTorch does.
//! * IPUs: max(IPUs used, highest IPU + 1) per replica × replicas, rounded up to a power of
//!   two (error, or a warning with autoRoundNumIPUs), at most 64.
//! * Copies: a value read on another IPU than its producer's is copied once per IPU.

use super::error::Diagnostic;
use super::options::Options;
use super::schedule::StagePass;
use super::strategy::{AutoStage, ExecutionStrategy, PhaseLiveness, PhasedExecution, PipelinedExecution, StageSpec};
use crate::ir::liveness::value_bytes;
use crate::ir::{BlockKind, Graph, InputKind, Op, Pass};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// The IPU of layer `i` of `layers` split evenly over `ipus` (the demo models' and the
/// RevGNN preview's split: one block per IPU).
pub fn ipu_of_layer(i: usize, layers: usize, ipus: usize) -> usize {
    i * ipus / layers.max(1)
}

/// `Some(k)` when layer `i` is the first of [`ipu_of_layer`]'s split on IPU `k`: where a
/// model starts block `ipu<k>`.
pub fn first_layer_on_ipu(i: usize, layers: usize, ipus: usize) -> Option<usize> {
    let k = ipu_of_layer(i, layers, ipus);
    (i == 0 || ipu_of_layer(i - 1, layers, ipus) != k).then_some(k)
}

/// The id of the implicit block that holds the ops before the first block.
pub const DEFAULT_BLOCK: &str = "(default)";

/// A block and where it runs. `nodes` counts its program nodes (backward and optimizer
/// nodes included); `first_node`/`last_node` bound them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockInfo {
    pub id: String,
    /// The annotation that started it (`scoped` or `begin`; `null` for the implicit block
    /// of the ops before the first one).
    pub kind: Option<BlockKind>,
    pub ipu: usize,
    /// The user-level stage id (`Stage`, AutoStage).
    pub stage: usize,
    pub phase: Option<usize>,
    pub first_node: usize,
    pub last_node: usize,
    pub nodes: usize,
}

/// An execution stage: a stretch of the program on one IPU (pipeline stage, shard or a
/// phase's stage). `phase` is set for phased strategies.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageInfo {
    pub id: usize,
    pub ipu: usize,
    pub blocks: Vec<String>,
    pub pass: StagePass,
    pub phase: Option<usize>,
}

/// A phase of a phased strategy: its stages run in parallel on `ipus`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseInfo {
    pub id: usize,
    pub ipus: Vec<usize>,
    pub stages: Vec<usize>,
    pub pass: StagePass,
}

/// Where one node runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePlace {
    pub ipu: usize,
    pub block: usize,
    /// The user-level stage id.
    pub stage: usize,
    pub phase: Option<usize>,
    /// Index into [`Placement::stages`].
    pub pipeline_stage: usize,
}

/// A value copied from one IPU to another before `node` (its first reader there) runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IpuCopy {
    pub value: u32,
    pub from_ipu: usize,
    pub to_ipu: usize,
    pub bytes: u64,
    pub node: usize,
}

/// The whole placement.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Placement {
    pub training: bool,
    pub blocks: Vec<BlockInfo>,
    pub stages: Vec<StageInfo>,
    pub phases: Vec<PhaseInfo>,
    pub nodes: Vec<NodePlace>,
    pub copies: Vec<IpuCopy>,
    /// Forward execution stages (F).
    pub forward_stages: usize,
    pub ipus_per_replica: usize,
    pub ipus_used: usize,
    pub ipus_reserved: usize,
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
}

/// Placeholders and constants: placed with their first reader, not blocks of their own.
pub fn is_source(op: &Op) -> bool {
    matches!(op, Op::Placeholder { .. } | Op::Constant { .. })
}

struct RawBlock {
    id: String,
    ipu: Option<usize>,
    kind: Option<BlockKind>,
}

/// Places `g` (a forward or training graph, in program order) under `opts`.
pub fn place(g: &Graph, opts: &Options) -> Placement {
    let mut p = Placement { training: g.nodes.iter().any(|n| n.meta.pass != Pass::Forward), ..Placement::default() };
    let n = g.nodes.len();
    let (raw, block_of) = find_blocks(g, &mut p);
    // Stage, IPU and phase of each block.
    let (stage_of, ipu_of, phase_of) = match &opts.execution_strategy {
        ExecutionStrategy::Pipelined(pe) | ExecutionStrategy::Sharded(pe) => {
            let (s, i) = assign_stages(pe, &raw, &mut p);
            (s, i, vec![None; raw.len()])
        }
        ExecutionStrategy::SerialPhased(ph) | ExecutionStrategy::ParallelPhased(ph) => {
            let parallel = matches!(opts.execution_strategy, ExecutionStrategy::ParallelPhased(_));
            assign_phases(ph, parallel, &raw, &mut p)
        }
    };
    p.nodes = (0..n)
        .map(|i| {
            let b = block_of[i];
            NodePlace { ipu: ipu_of[b], block: b, stage: stage_of[b], phase: phase_of[b], pipeline_stage: 0 }
        })
        .collect();
    if let ExecutionStrategy::Pipelined(_) = opts.execution_strategy {
        check_pipeline_order(g, &raw, &mut p);
    }
    if opts.execution_strategy.is_phased() {
        phase_stages(g, opts, &raw, &mut p);
    } else {
        execution_stages(g, &raw, &mut p);
    }
    // Blocks as placed.
    p.blocks = raw
        .iter()
        .enumerate()
        .map(|(b, r)| BlockInfo {
            id: r.id.clone(),
            kind: r.kind,
            ipu: ipu_of[b],
            stage: stage_of[b],
            phase: phase_of[b],
            first_node: usize::MAX,
            last_node: 0,
            nodes: 0,
        })
        .collect();
    for (i, node) in g.nodes.iter().enumerate() {
        if is_source(&node.op) {
            continue;
        }
        let b = &mut p.blocks[p.nodes[i].block];
        b.first_node = b.first_node.min(i);
        b.last_node = i;
        b.nodes += 1;
    }
    // Blocks with no op (only placeholders) are dropped; node → block indices follow.
    let mut new_index = vec![0usize; p.blocks.len()];
    let mut kept = 0;
    for (b, info) in p.blocks.iter().enumerate() {
        new_index[b] = kept.min(p.blocks.len().saturating_sub(1));
        if info.nodes > 0 {
            kept += 1;
        }
    }
    if kept < p.blocks.len() {
        p.blocks.retain(|b| b.nodes > 0);
        for np in p.nodes.iter_mut() {
            np.block = new_index[np.block].min(p.blocks.len().saturating_sub(1));
        }
    }
    count_ipus(opts, &mut p);
    find_copies(g, opts, &mut p);
    p
}

/// Blocks in order of first appearance and each node's block (see the module docs).
fn find_blocks(g: &Graph, p: &mut Placement) -> (Vec<RawBlock>, Vec<usize>) {
    let mut raw: Vec<RawBlock> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let n = g.nodes.len();
    let mut block_of: Vec<Option<usize>> = vec![None; n];
    let mut default_block: Option<usize> = None;
    // The block of the last forward op that had one, and the annotation behind it.
    let mut last_block: Option<(usize, Option<BlockKind>)> = None;
    let mut reported_outside = false;
    let mut conflicts: Vec<String> = Vec::new();
    let mut default_of = |raw: &mut Vec<RawBlock>| -> usize {
        *default_block.get_or_insert_with(|| {
            raw.push(RawBlock { id: DEFAULT_BLOCK.into(), ipu: Some(0), kind: None });
            raw.len() - 1
        })
    };
    for (i, node) in g.nodes.iter().enumerate() {
        if is_source(&node.op) {
            continue;
        }
        let named = node.meta.block.as_deref().map(|id| {
            let b = *index.entry(id).or_insert_with(|| {
                raw.push(RawBlock { id: id.to_string(), ipu: None, kind: node.meta.block_kind });
                raw.len() - 1
            });
            if let Some(ipu) = node.meta.ipu {
                match raw[b].ipu {
                    None => raw[b].ipu = Some(ipu),
                    Some(prev) if prev != ipu && !conflicts.contains(&raw[b].id) => {
                        conflicts.push(raw[b].id.clone());
                        p.errors.push(
                            Diagnostic::new(
                                "block_ipu_conflict",
                                format!("Block '{id}' is placed on IPU {prev} and, later, on IPU {ipu}: blocks with one id are one block and run on one IPU."),
                                "Give the block one IPU, or use different ids for the two parts.",
                            )
                            .at(i),
                        );
                    }
                    _ => {}
                }
            }
            b
        });
        block_of[i] = Some(match (named, node.meta.pass, &node.op) {
            // An update runs where its gradient is.
            (_, Pass::Optimizer, _) if !node.inputs.is_empty() => {
                block_of[g.values[node.inputs[0].0 as usize].node].unwrap_or_else(|| default_of(&mut raw))
            }
            (Some(b), Pass::Forward, _) => {
                last_block = Some((b, node.meta.block_kind));
                b
            }
            (Some(b), _, _) => b,
            // No block of its own after a BeginBlock: it inherits the block (graphs from the
            // tracer record the BeginBlock's block on every later op; this is for others).
            (None, Pass::Forward, _)
                if node.meta.block_kind.is_none() && matches!(last_block, Some((_, Some(BlockKind::Begin)))) =>
            {
                last_block.expect("matched").0
            }
            // No block after a Block scope ended (or after blocks of unknown kind).
            (None, Pass::Forward, _) if node.meta.block_kind == Some(BlockKind::Ended) || last_block.is_some() => {
                if !reported_outside {
                    reported_outside = true;
                    let after = match last_block {
                        Some((b, Some(BlockKind::Scoped))) => format!("the Block scope '{}' ended", raw[b].id),
                        _ => "a Block scope ended".to_string(),
                    };
                    p.errors.push(
                        Diagnostic::new(
                            "no_active_block",
                            format!(
                                "No active Block, all the ops must belong to a Block: {} comes after {after}, and \
                                 when a Block scope ends no block is active (PopTorch does not go back to an \
                                 enclosing Block or to an earlier BeginBlock; only ops before the first block go \
                                 to IPU 0).",
                                crate::ir::describe_site(&node.op, &node.meta)
                            ),
                            "Put the op inside a Block (poptorch.Block, JS block(id, ipu, fn)), or start a block \
                             before it with BeginBlock (JS beginBlock(id, ipu)), which stays in effect for the ops \
                             after it.",
                        )
                        .at(i),
                    );
                }
                // Keep planning: treat it as part of the previous op's block.
                (0..i).rev().find_map(|j| block_of[j]).unwrap_or_else(|| default_of(&mut raw))
            }
            (None, _, _) => default_of(&mut raw),
        });
    }
    if raw.is_empty() {
        default_of(&mut raw);
    }
    // Placeholders and constants: with their first reader.
    let mut first_reader: Vec<Option<usize>> = vec![None; g.values.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        for &v in &node.inputs {
            first_reader[v.0 as usize].get_or_insert(i);
        }
    }
    let fallback = block_of.iter().flatten().next().copied().unwrap_or(0);
    let block_of: Vec<usize> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            block_of[i].unwrap_or_else(|| {
                node.outputs
                    .iter()
                    .filter_map(|v| first_reader[v.0 as usize])
                    .min()
                    .and_then(|r| block_of[r])
                    .unwrap_or(fallback)
            })
        })
        .collect();
    (raw, block_of)
}

/// Stage id and IPU of each block for the pipelined and sharded strategies.
fn assign_stages(pe: &PipelinedExecution, raw: &[RawBlock], p: &mut Placement) -> (Vec<usize>, Vec<usize>) {
    let nb = raw.len();
    let mut stage = vec![0usize; nb];
    let mut ipu = vec![0usize; nb];
    if let Some(list) = &pe.stages {
        if pe.auto_stage.is_some() {
            p.warnings.push(
                Diagnostic::new(
                    "auto_stage_ignored",
                    "Both a stage list and an AutoStage were given: the stage list decides.",
                    "Give either a list of stages or an AutoStage.",
                )
                .on("executionStrategy.autoStage"),
            );
        }
        let map = stage_map(list.iter().enumerate(), raw, p);
        for (b, r) in raw.iter().enumerate() {
            stage[b] = map.get(r.id.as_str()).copied().unwrap_or(0);
        }
        for (s, spec) in list.iter().enumerate() {
            let members: Vec<usize> =
                (0..nb).filter(|&b| stage[b] == s && map.contains_key(raw[b].id.as_str())).collect();
            let chosen = stage_ipu(s, spec, &members, raw, p, s);
            for &b in &members {
                ipu[b] = chosen;
            }
        }
        for (b, r) in raw.iter().enumerate() {
            if r.id == DEFAULT_BLOCK {
                ipu[b] = list.first().and_then(|s| s.ipu).unwrap_or(0);
            }
        }
        return (stage, ipu);
    }
    match pe.auto_stage.unwrap_or_default() {
        AutoStage::SameAsIpu => {
            for (b, r) in raw.iter().enumerate() {
                match r.ipu {
                    Some(i) => {
                        stage[b] = i;
                        ipu[b] = i;
                    }
                    None => p.errors.push(
                        Diagnostic::new(
                            "same_as_ipu_without_ipu",
                            format!(
                                "poptorch.AutoStage.SameAsIpu was selected but no IPU was specified for block '{}'.",
                                r.id
                            ),
                            "Give the block an IPU (Block(id, ipu_id=…)), or use poptorch.AutoStage.AutoIncrement.",
                        )
                        .on("executionStrategy.autoStage"),
                    ),
                }
            }
        }
        AutoStage::AutoIncrement => {
            for (b, r) in raw.iter().enumerate() {
                stage[b] = b;
                ipu[b] = r.ipu.unwrap_or(b);
            }
        }
    }
    (stage, ipu)
}

/// Block id → stage index for an explicit list, with PopTorch's checks.
fn stage_map<'a>(
    specs: impl Iterator<Item = (usize, &'a StageSpec)>,
    raw: &[RawBlock],
    p: &mut Placement,
) -> HashMap<&'a str, usize> {
    let mut map: HashMap<&str, usize> = HashMap::new();
    let mut listed: Vec<&str> = Vec::new();
    let mut several = Capped::new();
    for (s, spec) in specs {
        for b in &spec.blocks {
            listed.push(b);
            if map.insert(b.as_str(), s).is_some_and(|prev| prev != s) {
                several.add(&mut p.errors, || {
                    Diagnostic::new(
                        "block_in_several_stages",
                        format!("Block '{}' is associated with more than one stage.", crate::error::brief(b, 80)),
                        "List each block in exactly one stage.",
                    )
                    .on("executionStrategy")
                });
            }
        }
    }
    several.finish(&mut p.errors, "block_in_several_stages", "blocks associated with more than one stage");
    let mut unknown = Capped::new();
    for r in raw {
        if r.id != DEFAULT_BLOCK && !map.contains_key(r.id.as_str()) {
            unknown.add(&mut p.errors, || {
                Diagnostic::new(
                    "unknown_block",
                    format!(
                        "Unknown Block '{}': the list of expected Blocks is {}.",
                        crate::error::brief(&r.id, 80),
                        crate::error::brief(format_args!("{listed:?}"), 400)
                    ),
                    "Add the block to a stage (or a phase), or check its id for typos.",
                )
                .on("executionStrategy")
            });
        }
    }
    unknown.finish(&mut p.errors, "unknown_block", "Blocks of the model in no stage");
    // A set, not a scan of the blocks per listed id (65,536 of each would be 2^32 steps).
    let present: std::collections::HashSet<&str> = raw.iter().map(|r| r.id.as_str()).collect();
    let mut dead = Capped::new();
    for b in listed {
        if !present.contains(b) {
            dead.add(&mut p.warnings, || {
                Diagnostic::new(
                    "dead_block",
                    format!(
                        "Block '{}' is listed in a stage but no op of the model is in it.",
                        crate::error::brief(b, 80)
                    ),
                    "Remove it from the list, or check its id.",
                )
                .on("executionStrategy")
            });
        }
    }
    dead.finish(&mut p.warnings, "dead_block", "listed blocks with no op of the model");
    map
}

/// The first [`Capped::SHOWN`] diagnostics of a kind, then one line counting the rest: a
/// plan with thousands of bad blocks stays a short list of errors.
struct Capped {
    count: usize,
}

impl Capped {
    const SHOWN: usize = 8;

    fn new() -> Capped {
        Capped { count: 0 }
    }

    fn add(&mut self, to: &mut Vec<Diagnostic>, d: impl FnOnce() -> Diagnostic) {
        self.count += 1;
        if self.count <= Self::SHOWN {
            to.push(d());
        }
    }

    fn finish(self, to: &mut Vec<Diagnostic>, code: &'static str, what: &str) {
        if self.count > Self::SHOWN {
            to.push(
                Diagnostic::new(
                    code,
                    format!("{} more {what} (not listed; {} in all).", self.count - Self::SHOWN, self.count),
                    "Fix the ones listed above; the rest are alike.",
                )
                .on("executionStrategy"),
            );
        }
    }
}

/// The IPU of a stage: `Stage.ipu(n)`, else its blocks' (which must agree), else `fallback`
/// (its stage id).
fn stage_ipu(
    s: usize,
    spec: &StageSpec,
    members: &[usize],
    raw: &[RawBlock],
    p: &mut Placement,
    fallback: usize,
) -> usize {
    if let Some(i) = spec.ipu {
        return i;
    }
    let ipus: Vec<usize> = members.iter().filter_map(|&b| raw[b].ipu).collect();
    match ipus.first() {
        None => fallback,
        Some(&first) => {
            if ipus.iter().any(|&i| i != first) {
                let mut distinct = ipus.clone();
                distinct.sort_unstable();
                distinct.dedup();
                p.errors.push(Diagnostic::new(
                    "stage_on_several_ipus",
                    format!(
                        "The blocks of stage {s} ({}) are on different IPUs {}: all ops with the same pipeline \
                         stage must also be on the same IPU (virtual graph).",
                        crate::error::brief(spec.blocks.join(", "), 300),
                        crate::error::brief(format_args!("{distinct:?}"), 200)
                    ),
                    "Put the stage on one IPU with Stage(...).ipu(n), or split it into one stage per IPU.",
                ));
            }
            first
        }
    }
}

/// Stage, IPU and phase of each block for the phased strategies.
#[allow(clippy::type_complexity)]
fn assign_phases(
    ph: &PhasedExecution,
    parallel: bool,
    raw: &[RawBlock],
    p: &mut Placement,
) -> (Vec<usize>, Vec<usize>, Vec<Option<usize>>) {
    let nb = raw.len();
    let mut stage = vec![0usize; nb];
    let mut ipu = vec![0usize; nb];
    let mut phase = vec![Some(0usize); nb];
    if ph.auto_stage.is_some() || ph.phases.is_empty() {
        p.errors.push(Diagnostic::new(
            "phased_auto_stage",
            "There is currently no AutoStage for phased execution: the phases must be given explicitly.",
            "List the phases, e.g. SerialPhasedExecution(Phase(\"a\"), Phase(\"b\")) (JSON: \"phases\": [[\"a\"], [\"b\"]]).",
        ).on("executionStrategy"));
    }
    if parallel
        && matches!(ph.tensors_liveness, PhaseLiveness::OffChipAfterFwdNoOverlap | PhaseLiveness::OffChipAfterEachPhase)
    {
        p.errors.push(
            Diagnostic::new(
                "liveness_serial_only",
                format!("Tensor liveness {:?} is only supported for serial phase execution.", ph.tensors_liveness),
                "Use SerialPhasedExecution, or AlwaysLive / sendTensorsOffChipAfterFwd with parallel phases.",
            )
            .on("executionStrategy"),
        );
    }
    // (global stage id, phase, spec)
    let mut flat: Vec<(usize, usize, &StageSpec, Option<usize>)> = Vec::new();
    for (k, phase_spec) in ph.phases.iter().enumerate() {
        if let Some(ipus) = &phase_spec.ipus {
            if ipus.len() != phase_spec.stages.len() {
                p.errors.push(
                    Diagnostic::new(
                        "phase_ipus_mismatch",
                        format!(
                            "Phase {k} contains {} stages but {} IPUs were given.",
                            phase_spec.stages.len(),
                            ipus.len()
                        ),
                        "Give one IPU per stage in phase.ipus(...).",
                    )
                    .on("executionStrategy"),
                );
            }
        }
        for (j, st) in phase_spec.stages.iter().enumerate() {
            let given = phase_spec.ipus.as_ref().and_then(|i| i.get(j).copied());
            flat.push((flat.len(), k, st, given));
        }
    }
    let map = stage_map(flat.iter().map(|(s, _, st, _)| (*s, *st)), raw, p);
    let mut stage_ipus = Vec::new();
    for &(s, k, spec, given) in &flat {
        let members: Vec<usize> = (0..nb).filter(|&b| map.get(raw[b].id.as_str()) == Some(&s)).collect();
        let spec_with = StageSpec { blocks: spec.blocks.clone(), ipu: spec.ipu.or(given) };
        let chosen = stage_ipu(s, &spec_with, &members, raw, p, s);
        stage_ipus.push(chosen);
        for &b in &members {
            stage[b] = s;
            ipu[b] = chosen;
            phase[b] = Some(k);
        }
        if parallel && chosen % 2 != k % 2 {
            p.errors.push(
                Diagnostic::new(
                    "parallel_phase_parity",
                    format!(
                        "Phase {k} runs stage ({}) on IPU {chosen}: when phases are executed in parallel, even phases \
                     must run on even IPUs and odd phases on odd IPUs.",
                        crate::error::brief(spec.blocks.join(", "), 300)
                    ),
                    "Alternate the two IPU groups, e.g. phases on IPUs (0, 2), (1, 3), (0, 2).",
                )
                .on("executionStrategy"),
            );
        }
    }
    // The default block (ops before the first block) joins the first stage.
    for (b, r) in raw.iter().enumerate() {
        if r.id == DEFAULT_BLOCK {
            ipu[b] = stage_ipus.first().copied().unwrap_or(0);
        }
    }
    if !parallel && ph.phases.len() > 1 {
        let sets: Vec<Vec<usize>> = ph
            .phases
            .iter()
            .enumerate()
            .map(|(k, _)| {
                let mut s: Vec<usize> = flat.iter().filter(|f| f.1 == k).map(|f| stage_ipus[f.0]).collect();
                s.sort_unstable();
                s
            })
            .collect();
        if sets.iter().any(|s| s != &sets[0]) {
            p.warnings.push(
                Diagnostic::new(
                    "serial_phase_ipus",
                    format!(
                        "Serial phases should all run on the same IPU group; these phases use {}.",
                        crate::error::brief(format_args!("{sets:?}"), 400)
                    ),
                    "Give every phase the same IPUs, e.g. phase(k).ipus(0, 1), or use ParallelPhasedExecution.",
                )
                .on("executionStrategy"),
            );
        }
    }
    (stage, ipu, phase)
}

/// Pipelined: stages must come in ascending order along the forward pass, with none missing.
fn check_pipeline_order(g: &Graph, raw: &[RawBlock], p: &mut Placement) {
    let mut ipus: Vec<usize> = p.nodes.iter().map(|n| n.ipu).collect();
    ipus.sort_unstable();
    ipus.dedup();
    if ipus.len() < 2 {
        return; // PopTorch pipelines only across IPUs
    }
    let mut prev: Option<(usize, usize)> = None; // (stage, block)
    let mut used = Vec::new();
    for (i, node) in g.nodes.iter().enumerate() {
        if node.meta.pass != Pass::Forward || is_source(&node.op) {
            continue;
        }
        let np = p.nodes[i];
        used.push(np.stage);
        if let Some((ps, pb)) = prev {
            if np.stage < ps {
                p.errors.push(
                    Diagnostic::new(
                        "stage_order_conflict",
                        format!(
                            "Block '{}' (stage {}, IPU {}) runs after block '{}' (stage {ps}): pipeline stages must \
                             follow the execution order, so the compiler cannot schedule this pipeline. With \
                             AutoStage.SameAsIpu, blocks on IPUs 0, 1, 0 give stages 0, 1, 0.",
                            raw[np.block].id, np.stage, np.ipu, raw[pb].id
                        ),
                        "Use poptorch.AutoStage.AutoIncrement (stages 0, 1, 2, …), or list the stages in execution order.",
                    ).on("executionStrategy.autoStage")
                    .at(i),
                );
                return;
            }
        }
        prev = Some((np.stage, np.block));
    }
    used.sort_unstable();
    used.dedup();
    if let Some(&max) = used.last() {
        // `used` is sorted and without duplicates: the first gap is the first k not at k.
        let missing = used.iter().enumerate().find(|&(k, &s)| s != k).map(|(k, _)| k);
        if let Some(missing) = missing {
            // Many stages are summarised, not listed (a message stays short).
            let listed = if used.len() <= 16 {
                format!("{used:?}")
            } else {
                format!("{:?} … {:?} ({} distinct)", &used[..8], &used[used.len() - 4..], used.len())
            };
            p.errors.push(
                Diagnostic::new(
                    "stage_missing",
                    format!(
                        "The pipeline stages of the ops are {listed}: {} stages, but stage {missing} is missing.",
                        max as u128 + 1
                    ),
                    "Number the stages without gaps (with AutoStage.SameAsIpu, use IPUs 0, 1, 2, … without gaps).",
                )
                .on("executionStrategy"),
            );
        }
    }
}

fn stage_pass_for(p: Pass) -> StagePass {
    if p == Pass::Forward {
        StagePass::Forward
    } else {
        StagePass::Backward
    }
}

/// Pipelined and sharded: a new execution stage at each IPU switch along the forward pass;
/// the backward runs mirror them, the first joining the last forward stage.
fn execution_stages(g: &Graph, raw: &[RawBlock], p: &mut Placement) {
    let mut stages: Vec<StageInfo> = Vec::new();
    let mut cur: Option<usize> = None;
    let mut last_fwd: Option<usize> = None;
    for (i, node) in g.nodes.iter().enumerate() {
        if is_source(&node.op) {
            continue;
        }
        let np = p.nodes[i];
        let backward = node.meta.pass != Pass::Forward;
        let same = cur.filter(|&c| {
            stages[c].ipu == np.ipu
                && match (backward, stages[c].pass) {
                    (false, StagePass::Forward) | (true, StagePass::Backward) => true,
                    (true, _) => Some(c) == last_fwd,
                    (false, _) => false,
                }
        });
        let s = match same {
            Some(c) => {
                if backward && stages[c].pass == StagePass::Forward {
                    stages[c].pass = StagePass::ForwardBackward;
                }
                c
            }
            None => {
                stages.push(StageInfo {
                    id: stages.len(),
                    ipu: np.ipu,
                    blocks: Vec::new(),
                    pass: stage_pass_for(node.meta.pass),
                    phase: None,
                });
                stages.len() - 1
            }
        };
        if !backward {
            last_fwd = Some(s);
        }
        let id = &raw[np.block].id;
        if !stages[s].blocks.contains(id) {
            stages[s].blocks.push(id.clone());
        }
        cur = Some(s);
        p.nodes[i].pipeline_stage = s;
    }
    if stages.is_empty() {
        stages.push(StageInfo { id: 0, ipu: 0, blocks: vec![], pass: StagePass::Forward, phase: None });
    }
    p.forward_stages = stages.iter().filter(|s| s.pass != StagePass::Backward).count().max(1);
    p.stages = stages;
    place_sources(g, p);
}

/// Placeholders and constants take the execution stage (and, in phased plans, the phase) of
/// their first reader.
fn place_sources(g: &Graph, p: &mut Placement) {
    let mut first_reader: Vec<Option<usize>> = vec![None; g.values.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        for &v in &node.inputs {
            first_reader[v.0 as usize].get_or_insert(i);
        }
    }
    for (i, node) in g.nodes.iter().enumerate() {
        if is_source(&node.op) {
            if let Some(r) = node.outputs.iter().filter_map(|v| first_reader[v.0 as usize]).min() {
                p.nodes[i].pipeline_stage = p.nodes[r].pipeline_stage;
                p.nodes[i].phase = p.nodes[r].phase;
            }
        }
    }
}

/// Phased: one execution stage per (phase, stage) of the forward pass, and for training one
/// per backward phase: forward phase k of the last forward phase L runs backward in phase
/// 2L − k (2L + 2 − k with a separate backward phase); the last one is shared unless separate.
fn phase_stages(g: &Graph, opts: &Options, raw: &[RawBlock], p: &mut Placement) {
    let (ExecutionStrategy::SerialPhased(ph) | ExecutionStrategy::ParallelPhased(ph)) = &opts.execution_strategy else {
        return;
    };
    let last = p.nodes.iter().filter_map(|n| n.phase).max().unwrap_or(0);
    let bwd_phase = |k: usize| if ph.separate_backward_phase { 2 * last + 2 - k } else { 2 * last - k };
    // (user stage, pass is backward) → execution stage
    let mut index: HashMap<(usize, bool), usize> = HashMap::new();
    let mut stages: Vec<StageInfo> = Vec::new();
    let mut order: Vec<(usize, usize, bool)> = Vec::new(); // (phase, user stage, backward)
    for (i, node) in g.nodes.iter().enumerate() {
        if is_source(&node.op) {
            continue;
        }
        let np = p.nodes[i];
        let backward = node.meta.pass != Pass::Forward;
        let k = np.phase.unwrap_or(0);
        let phase = if backward { bwd_phase(k) } else { k };
        p.nodes[i].phase = Some(phase);
        if !order.iter().any(|o| o.1 == np.stage && o.2 == backward) {
            order.push((phase, np.stage, backward));
        }
    }
    order.sort_by_key(|o| (o.0, o.2, o.1));
    for &(phase, user_stage, backward) in &order {
        let ipu = p.nodes.iter().zip(&g.nodes).find(|(n, _)| n.stage == user_stage).map(|(n, _)| n.ipu).unwrap_or(0);
        // The last forward phase's backward shares its phase: one stage doing both.
        if backward && !ph.separate_backward_phase {
            if let Some(&s) = index.get(&(user_stage, false)) {
                if stages[s].phase == Some(phase) {
                    stages[s].pass = StagePass::ForwardBackward;
                    index.insert((user_stage, true), s);
                    continue;
                }
            }
        }
        index.insert((user_stage, backward), stages.len());
        stages.push(StageInfo {
            id: stages.len(),
            ipu,
            blocks: Vec::new(),
            pass: if backward { StagePass::Backward } else { StagePass::Forward },
            phase: Some(phase),
        });
    }
    for (i, node) in g.nodes.iter().enumerate() {
        if is_source(&node.op) {
            continue;
        }
        let np = p.nodes[i];
        let s = index[&(np.stage, node.meta.pass != Pass::Forward)];
        p.nodes[i].pipeline_stage = s;
        let id = &raw[np.block].id;
        if !stages[s].blocks.contains(id) {
            stages[s].blocks.push(id.clone());
        }
    }
    if stages.is_empty() {
        stages.push(StageInfo { id: 0, ipu: 0, blocks: vec![], pass: StagePass::Forward, phase: Some(0) });
    }
    // Phases: the stages of each phase id.
    let mut phase_ids: Vec<usize> = stages.iter().filter_map(|s| s.phase).collect();
    phase_ids.sort_unstable();
    phase_ids.dedup();
    p.phases = phase_ids
        .iter()
        .map(|&k| {
            let members: Vec<&StageInfo> = stages.iter().filter(|s| s.phase == Some(k)).collect();
            let mut ipus: Vec<usize> = members.iter().map(|s| s.ipu).collect();
            ipus.sort_unstable();
            ipus.dedup();
            let pass = if members.iter().all(|s| s.pass == StagePass::Forward) {
                StagePass::Forward
            } else if members.iter().all(|s| s.pass == StagePass::Backward) {
                StagePass::Backward
            } else {
                StagePass::ForwardBackward
            };
            PhaseInfo { id: k, ipus, stages: members.iter().map(|s| s.id).collect(), pass }
        })
        .collect();
    p.forward_stages = stages.iter().filter(|s| s.pass != StagePass::Backward).count().max(1);
    p.stages = stages;
    place_sources(g, p);
}

/// IPUs per replica, used and reserved, with PopTorch's power-of-two and 64-IPU rules.
fn count_ipus(opts: &Options, p: &mut Placement) {
    let mut used: Vec<usize> = p.nodes.iter().map(|n| n.ipu).collect();
    used.sort_unstable();
    used.dedup();
    let max_id = used.last().copied().unwrap_or(0);
    // Saturating: an IPU index or replica count near usize::MAX is still just too many.
    p.ipus_per_replica = used.len().max(max_id.saturating_add(1));
    let total = p.ipus_per_replica.saturating_mul(opts.replication_factor.max(1));
    p.ipus_used = total;
    let max = opts.ipu_generation.spec().max_ipus;
    if total > max {
        p.errors.push(
            Diagnostic::new(
                "too_many_ipus",
                format!(
                    "Too many IPUs requested ({total}): more than {max} IPUs per process need distributed execution."
                ),
                "Use fewer IPUs per replica or fewer replicas, or run distributed (several processes).",
            )
            .on("replicationFactor"),
        );
        p.ipus_reserved = total;
        return;
    }
    let reserved = total.next_power_of_two();
    p.ipus_reserved = reserved;
    if reserved != total {
        if opts.auto_round_num_ipus {
            p.warnings.push(
                Diagnostic::new(
                    "ipu_count_rounded",
                    format!(
                        "Reserving {reserved} IPUs when the model uses only {total}: {} will be reserved but not used.",
                        reserved - total
                    ),
                    "Use a power of two of IPUs (per replica × replicas) to use every reserved IPU.",
                )
                .on("autoRoundNumIPUs"),
            );
        } else {
            p.errors.push(
                Diagnostic::new(
                    "ipu_count_not_power_of_two",
                    format!(
                    "The model uses {total} IPUs, but PopTorch must reserve at least {reserved}: it reserves a power \
                     of two of IPUs (at most 64) per process."
                ),
                    "Change the model to use a power of two of IPUs, or set poptorch.Options().autoRoundNumIPUs(True).",
                )
                .on("autoRoundNumIPUs"),
            );
        }
    }
}

/// Inter-IPU copies, and PopTorch's rule against weights shared across IPUs.
fn find_copies(g: &Graph, opts: &Options, p: &mut Placement) {
    let mut done: HashMap<(u32, usize), ()> = HashMap::new();
    let mut reported: HashSet<u32> = HashSet::new();
    let mut shared = Capped::new();
    for (i, node) in g.nodes.iter().enumerate() {
        let to = p.nodes[i].ipu;
        for &v in &node.inputs {
            let prod = g.values[v.0 as usize].node;
            let from = p.nodes[prod].ipu;
            if from == to {
                continue;
            }
            match &g.nodes[prod].op {
                Op::Constant { .. } => continue, // compiled into each IPU's program
                Op::Placeholder { kind: kind @ (InputKind::Parameter | InputKind::Buffer), name }
                    if !opts.execution_strategy.is_phased() =>
                {
                    if reported.insert(v.0) {
                        let what = if *kind == InputKind::Parameter { "Parameter" } else { "Buffer" };
                        let message = match opts.execution_strategy {
                            ExecutionStrategy::Pipelined(_) => format!(
                                "Can not copy variable tensor '{name}' between IPUs {from} and {to} when pipelining: all \
                                 pipeline stages using a variable must be on the same IPU. ({what} shared by ops on \
                                 two IPUs.)"
                            ),
                            _ => format!(
                                "{what} '{name}' is read on IPU {from} and IPU {to}: layers that share weights must be on \
                                 the same IPU."
                            ),
                        };
                        shared.add(&mut p.errors, || {
                            Diagnostic::new(
                                "shared_weight_across_ipus",
                                message,
                                "Put every layer using this weight in blocks on one IPU.",
                            )
                            .at(i)
                        });
                    }
                    continue;
                }
                _ => {}
            }
            if done.insert((v.0, to), ()).is_none() {
                p.copies.push(IpuCopy { value: v.0, from_ipu: from, to_ipu: to, bytes: value_bytes(g.ty(v)), node: i });
            }
        }
    }
    shared.finish(&mut p.errors, "shared_weight_across_ipus", "weights read on two IPUs");
}
