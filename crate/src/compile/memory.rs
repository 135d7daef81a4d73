//! The memory model: per IPU, per program step, by class, with a tile map and a fit check.
//!
//! * Always live: code and exchange (estimates, [`super::hardware`]), weights, optimizer
//!   state, gradient accumulators and buffers that live on chip (replicated tensor sharding
//!   divides them by the replicas).
//! * Not always live, over the scheduled program (one step = one node, every IPU on the same
//!   axis): activations and gradients by [`crate::ir::liveness`] (the executor's rules; a
//!   value read on another IPU lives there from its copy to its last reader), nested
//!   sub-graph peaks and op temporaries (dense products keep partials, float or half as
//!   `Precision.partialsType` says, capped by the op's `set_available_memory` proportion or
//!   the IPU's), the pipeline stash (stage inputs, or every saved
//!   activation without recomputation, for each extra micro-batch in flight), and tensors
//!   brought on chip from Streaming Memory (`loaded`).
//! * Streaming Memory contents per step are reported apart (`streaming`), not counted
//!   against the IPU.
//!
//! Every byte count is `u64` (from `ir::liveness::value_bytes`, sums saturating): a
//! deep model's activations, a stash over micro-batches or a model over many IPUs pass
//! 4 GiB, which a 32-bit `usize` (wasm32) would wrap.
//!
//! `live_peak_bytes` is the executor's quantity (activations, gradients and sub-graph
//! peaks, nothing else): for a one-IPU plan it equals `ir::liveness::liveness(g).peak()`
//! and the executor's measured peak.

use super::error::Diagnostic;
use super::hardware::Generation;
use super::options::{Options, Recomputation, TensorClass};
use super::placement::{is_source, Placement};
use super::strategy::ExecutionStrategy;
use super::strategy::PhaseLiveness;
use crate::ir::liveness::{timeline, value_bytes, value_elements as elements, Interval, Lifetimes, Liveness};
use crate::ir::{Graph, InputKind, Op, OptimizerStep, Pass};
use serde::Serialize;

/// Steps listed per IPU at most; longer programs keep the largest step of each stretch
/// (so the peak is always listed).
pub const MAX_STEPS: usize = 2000;
/// Tensors listed as the largest at an IPU's peak.
pub const LARGEST_LISTED: usize = 8;

/// Memory every program step needs on one IPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlwaysLive {
    pub code: u64,
    pub exchange: u64,
    pub weights: u64,
    pub optimizer: u64,
    pub accumulators: u64,
    pub buffers: u64,
}

impl AlwaysLive {
    pub fn total(&self) -> u64 {
        [self.code, self.exchange, self.weights, self.optimizer, self.accumulators, self.buffers]
            .into_iter()
            .fold(0, u64::saturating_add)
    }
}

/// Not-always-live memory of one IPU while one node runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub node: usize,
    pub activations: u64,
    pub stash: u64,
    pub gradients: u64,
    pub temporaries: u64,
    /// Weights, optimizer state and accumulators brought on chip from Streaming Memory.
    pub loaded: u64,
    /// Bytes of this IPU's tensors held in Streaming Memory (not on chip).
    pub streaming: u64,
}

impl Step {
    /// On-chip bytes of the step (Streaming Memory excluded).
    pub fn on_chip(&self) -> u64 {
        [self.activations, self.stash, self.gradients, self.temporaries, self.loaded]
            .into_iter()
            .fold(0, u64::saturating_add)
    }
}

/// Steps as one array per field (index = listed step), to keep long programs' plans small.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepColumns {
    pub node: Vec<usize>,
    pub activations: Vec<u64>,
    pub stash: Vec<u64>,
    pub gradients: Vec<u64>,
    pub temporaries: Vec<u64>,
    pub loaded: Vec<u64>,
    pub streaming: Vec<u64>,
}

impl StepColumns {
    fn push(&mut self, s: &Step) {
        self.node.push(s.node);
        self.activations.push(s.activations);
        self.stash.push(s.stash);
        self.gradients.push(s.gradients);
        self.temporaries.push(s.temporaries);
        self.loaded.push(s.loaded);
        self.streaming.push(s.streaming);
    }

    /// Steps listed.
    pub fn len(&self) -> usize {
        self.node.len()
    }

    pub fn is_empty(&self) -> bool {
        self.node.is_empty()
    }

    /// Listed step `k`.
    pub fn get(&self, k: usize) -> Step {
        Step {
            node: self.node[k],
            activations: self.activations[k],
            stash: self.stash[k],
            gradients: self.gradients[k],
            temporaries: self.temporaries[k],
            loaded: self.loaded[k],
            streaming: self.streaming[k],
        }
    }
}

/// A tensor at an IPU's peak.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Largest {
    pub name: String,
    pub bytes: u64,
    pub class: &'static str,
}

/// One IPU's memory.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IpuMemory {
    pub ipu: usize,
    pub always_live: AlwaysLive,
    /// Listed program steps (all, or the largest of each stretch of a long program).
    pub steps: StepColumns,
    /// Steps of the program (before sampling).
    pub program_steps: usize,
    /// The step at the peak.
    pub peak: Step,
    /// Always-live plus the largest step.
    pub peak_bytes: u64,
    /// The node of the largest step.
    pub peak_step: usize,
    /// The executor's quantity: peak of activations, gradients and sub-graph peaks.
    pub live_peak_bytes: u64,
    pub fits: bool,
    pub largest: Vec<Largest>,
    /// Bytes per tile at the peak.
    pub tiles: Vec<u32>,
    /// The fullest tile at the peak.
    pub max_tile_bytes: u64,
}

/// Values' stays in IPU memory (for "live tensors at step"), one array per field: value
/// `value[k]` (produced by node `node[k]`) holds `bytes[k]` on IPU `ipu[k]` from step
/// `birth[k]` to step `death[k]` (inclusive; the program's length: to the end).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ValueColumns {
    pub value: Vec<u32>,
    pub node: Vec<usize>,
    pub ipu: Vec<usize>,
    /// `activation`, `gradient` or `loaded`.
    pub class: Vec<&'static str>,
    pub bytes: Vec<u64>,
    pub birth: Vec<usize>,
    pub death: Vec<usize>,
}

impl ValueColumns {
    pub fn len(&self) -> usize {
        self.value.len()
    }

    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }
}

/// A Streaming Memory transfer: `bytes` loaded onto (or stored from) `ipu` around `node`,
/// for every micro-batch, or `once` per iteration (around the weight update).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub ipu: usize,
    pub node: usize,
    pub bytes: u64,
    pub once: bool,
}

/// The memory part of a plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    pub capacity_bytes: u64,
    pub ipus: Vec<IpuMemory>,
    pub values: ValueColumns,
    /// Streaming Memory loads and stores, for the time model.
    #[serde(skip)]
    pub transfers: Vec<Transfer>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Activation,
    Gradient,
    Loaded,
    Streaming,
}

/// A short label for a node: op name and scope, `(backward)`/`(optimizer)` when not forward.
pub fn node_label(g: &Graph, i: usize) -> String {
    let n = &g.nodes[i];
    let mut s = n.op.name().to_string();
    if let Op::Placeholder { name, .. } | Op::Constant { name, .. } = &n.op {
        s = format!("{s} {name}");
    } else if !n.meta.scope.is_empty() {
        s.push(' ');
        s.push_str(&n.meta.scope);
    }
    match n.meta.pass {
        Pass::Forward => {}
        Pass::Backward => s.push_str(" (backward)"),
        Pass::Optimizer => s.push_str(" (optimizer)"),
    }
    s
}

fn value_name(g: &Graph, v: usize) -> String {
    let node = g.values[v].node;
    match &g.nodes[node].op {
        Op::Placeholder { name, .. } | Op::Constant { name, .. } => name.clone(),
        _ => format!("%{v} = {}", node_label(g, node)),
    }
}

/// Bytes of optimizer state for a parameter of `elements` elements, each state tensor in
/// its own dtype (PopTorch's accumulation types: float32 or float16).
fn optimizer_state_bytes(step: &OptimizerStep, elements: u64) -> u64 {
    let per_element = match step {
        OptimizerStep::Sgd { momentum, velocity_dtype, .. } if *momentum != 0.0 => velocity_dtype.size(),
        OptimizerStep::Sgd { .. } => 0,
        OptimizerStep::Adam { first_order_dtype, second_order_dtype, .. }
        | OptimizerStep::Lamb { first_order_dtype, second_order_dtype, .. } => {
            first_order_dtype.size() + second_order_dtype.size()
        }
        // Square average, the centred gradient average, and a float32 momentum buffer.
        OptimizerStep::RmsProp { centered, momentum, first_order_dtype, second_order_dtype, .. } => {
            first_order_dtype.size()
                + if *centered { second_order_dtype.size() } else { 0 }
                + if *momentum > 0.0 { 4 } else { 0 }
        }
    };
    (per_element as u64).saturating_mul(elements)
}

/// The scratch a dense product (convolutions included: poplin plans them like matmuls)
/// asks for beyond its outputs, and the most it gets: `(wanted, cap)`, `None` for other ops.
/// Wanted: its partial results, one per output element in `Precision.partialsType` (4 bytes
/// as float, 2 as half; an estimate: PopLin's planner keeps at most that many). Cap: its own
/// `set_available_memory` proportion, else its IPU's (`availableMemoryProportion`, 0.6 by
/// default), of `capacity`. The time model charges an op held below what it wants
/// ([`super::time`]).
pub(super) fn dense_scratch(g: &Graph, i: usize, opts: &Options, capacity: u64, ipu: usize) -> Option<(u64, u64)> {
    let n = &g.nodes[i];
    match n.op {
        Op::MatMul
        | Op::MatMulTN
        | Op::Linear { .. }
        | Op::LinearAdd { .. }
        | Op::Conv2d { .. }
        | Op::Conv2dGradInput { .. }
        | Op::Conv2dGradWeight { .. }
        | Op::SpMM { .. }
        | Op::SpMMTransposed { .. } => {
            let per = opts.precision.partials_type.bytes();
            let wanted = n.outputs.iter().map(|v| elements(g.ty(*v)).saturating_mul(per)).fold(0, u64::saturating_add);
            let share =
                n.meta.available_memory.map(|p| p.0).unwrap_or_else(|| opts.available_memory_proportion_for(ipu));
            Some((wanted, (share * capacity as f64) as u64))
        }
        _ => None,
    }
}

/// Scratch of an op beyond its outputs: a dense product's partials, at most its cap
/// ([`dense_scratch`]).
fn op_temporaries(g: &Graph, i: usize, opts: &Options, capacity: u64, ipu: usize) -> u64 {
    dense_scratch(g, i, opts, capacity, ipu).map(|(wanted, cap)| wanted.min(cap)).unwrap_or(0)
}

struct Residency {
    ipu: usize,
    class: Class,
    iv: Interval,
    value: usize,
}

/// What every pass of the memory model reads: the graph, its placement and liveness, the
/// options and hardware, and the tables derived from them once.
struct Ctx<'a> {
    g: &'a Graph,
    place: &'a Placement,
    opts: &'a Options,
    gen: &'a Generation,
    life: &'a Liveness,
    lt: &'a Lifetimes,
    n: usize,
    nipus: usize,
    capacity: u64,
    replicas: usize,
    training: bool,
    pipelined: bool,
    recompute: bool,
    /// Single-stage training with `RecomputeAll`: activations between checkpoints are
    /// dropped after the forward pass and rebuilt for the backward pass.
    recompute_all: bool,
    phased: Option<PhaseLiveness>,
    /// Readers of each value.
    readers: Vec<Vec<usize>>,
    /// First node of each execution stage.
    stage_first: Vec<usize>,
    /// Recomputation checkpoints (`poptorch.recomputationCheckpoint`): for each forward
    /// node, its segment, the number of checkpoints of its stage before it; and where each
    /// (stage, segment) is recomputed, its first backward reader. A stage without
    /// checkpoints is recomputed at the start of its backward stage.
    segment: Vec<usize>,
    rebuild_at: std::collections::HashMap<(usize, usize), usize>,
    /// First and last node of each (phase, ipu).
    phase_range: std::collections::HashMap<(usize, usize), (usize, usize)>,
}

/// What the passes build: residencies of values, Streaming Memory transfers, each IPU's
/// always-live bytes and tensors, and the stash.
struct Acc {
    res: Vec<Residency>,
    transfers: Vec<Transfer>,
    always: Vec<AlwaysLive>,
    /// (ipu, name, bytes, class) of always-live tensors, for the largest list and tile map.
    fixed: Vec<(usize, String, u64, &'static str)>,
    /// Stash per IPU (bytes).
    stash: Vec<u64>,
}

/// Builds the memory model (and its fit errors and warnings), in four passes: activations
/// and gradients, then parameters, buffers, optimizer state and accumulators, then code and
/// exchange, then each IPU's timeline of program steps.
pub fn memory(
    g: &Graph,
    place: &Placement,
    opts: &Options,
    gen: &Generation,
    life: &Liveness,
) -> (Memory, Vec<Diagnostic>, Vec<Diagnostic>) {
    let c = context(g, place, opts, gen, life);
    let mut a = Acc {
        res: Vec::new(),
        transfers: Vec::new(),
        always: vec![AlwaysLive::default(); c.nipus],
        fixed: Vec::new(),
        stash: vec![0u64; c.nipus],
    };
    activations_and_gradients(&c, &mut a);
    weights_and_state(&c, &mut a);
    code_and_exchange(&c, &mut a);
    timelines(&c, a)
}

fn context<'a>(
    g: &'a Graph,
    place: &'a Placement,
    opts: &'a Options,
    gen: &'a Generation,
    life: &'a Liveness,
) -> Ctx<'a> {
    let nipus = place.ipus_per_replica.max(1);
    let pipelined = matches!(opts.execution_strategy, ExecutionStrategy::Pipelined(_)) && nipus > 1;
    let training = place.training;
    let phased = match &opts.execution_strategy {
        ExecutionStrategy::SerialPhased(p) | ExecutionStrategy::ParallelPhased(p) => Some(p.liveness()),
        _ => None,
    };
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); g.values.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        for &v in &node.inputs {
            let r = &mut readers[v.0 as usize];
            if r.last() != Some(&i) {
                r.push(i);
            }
        }
    }
    let mut stage_first = vec![usize::MAX; place.stages.len()];
    let mut phase_range: std::collections::HashMap<(usize, usize), (usize, usize)> = Default::default();
    for (i, node) in g.nodes.iter().enumerate() {
        if is_source(&node.op) {
            continue;
        }
        let np = place.nodes[i];
        stage_first[np.pipeline_stage] = stage_first[np.pipeline_stage].min(i);
        if let Some(k) = np.phase {
            let r = phase_range.entry((k, np.ipu)).or_insert((i, i));
            r.0 = r.0.min(i);
            r.1 = r.1.max(i);
        }
    }
    // Checkpoint segments per forward stage, in program order.
    let mut segment = vec![0usize; g.nodes.len()];
    let mut seen = vec![0usize; place.stages.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        if node.meta.pass != Pass::Forward || is_source(&node.op) {
            continue;
        }
        let s = place.nodes[i].pipeline_stage;
        segment[i] = seen[s];
        if node.meta.checkpoint {
            seen[s] += 1;
        }
    }
    let mut rebuild_at: std::collections::HashMap<(usize, usize), usize> = Default::default();
    for (i, node) in g.nodes.iter().enumerate() {
        let s = place.nodes[i].pipeline_stage;
        if node.meta.pass != Pass::Forward || is_source(&node.op) || seen[s] == 0 {
            continue;
        }
        for v in &node.outputs {
            if let Some(&r) = readers[v.0 as usize].iter().find(|&&r| g.nodes[r].meta.pass != Pass::Forward) {
                let e = rebuild_at.entry((s, segment[i])).or_insert(r);
                *e = (*e).min(r);
            }
        }
    }
    Ctx {
        g,
        place,
        opts,
        gen,
        life,
        lt: &life.lifetimes,
        n: g.nodes.len(),
        nipus,
        capacity: gen.capacity_bytes(),
        replicas: opts.replication_factor.max(1),
        training,
        pipelined,
        recompute: pipelined
            && training
            && matches!(opts.auto_recomputation, Recomputation::Pipeline | Recomputation::RecomputeAll),
        recompute_all: !pipelined
            && phased.is_none()
            && training
            && opts.auto_recomputation == Recomputation::RecomputeAll,
        phased,
        readers,
        stage_first,
        segment,
        rebuild_at,
        phase_range,
    }
}

/// Activations and gradients: where each value lives, on which IPU, copied or stashed
/// (pipelines), recomputed, or loaded and stored (phases).
fn activations_and_gradients(c: &Ctx, a: &mut Acc) {
    let Ctx {
        g,
        place,
        opts,
        n,
        lt,
        training,
        pipelined,
        recompute,
        recompute_all,
        phased,
        ref readers,
        ref stage_first,
        ref segment,
        ref rebuild_at,
        ref phase_range,
        ..
    } = *c;
    let Acc { res, transfers, stash, .. } = a;
    #[allow(clippy::needless_range_loop)] // `v` indexes several tables
    for v in 0..g.values.len() {
        if !lt.is_live(v) {
            continue;
        }
        let birth = lt.birth[v];
        let death = lt.death[v].expect("live");
        let bytes = lt.bytes[v];
        let home = place.nodes[birth].ipu;
        let prod = &g.nodes[birth];
        let class = if prod.meta.pass == Pass::Forward { Class::Activation } else { Class::Gradient };
        let is_output = death == n;
        let mut push = |ipu: usize, start: usize, end: usize, c: Class| {
            res.push(Residency { ipu, class: c, iv: Interval { start, end, bytes }, value: v });
        };
        // Readers grouped by IPU, in program order.
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        for &r in &readers[v] {
            let ipu = place.nodes[r].ipu;
            match groups.iter_mut().find(|x| x.0 == ipu) {
                Some(x) => x.1.push(r),
                None => groups.push((ipu, vec![r])),
            }
        }
        if !groups.iter().any(|x| x.0 == home) {
            groups.insert(0, (home, Vec::new()));
        }
        // A copy to another IPU happens at its first reader there: the home copy lives until then.
        let copy_out = |only: &dyn Fn(usize) -> bool| -> Option<usize> {
            groups.iter().filter(|x| x.0 != home).filter_map(|x| x.1.iter().copied().find(|&r| only(r))).max()
        };
        if pipelined && training && class == Class::Activation {
            // Pipelined training. With recomputation (PopTorch's default) each stage stashes
            // its inputs (model inputs and values copied in) and its checkpoints
            // (`recomputationCheckpoint`) for every micro-batch in flight until its backward
            // stage, and recomputes the rest there, each segment between checkpoints just
            // before its backward pass reads it (an estimate of PopART's recompute schedule);
            // without, every value the backward stage reads is stashed.
            let is_input = matches!(prod.op, Op::Placeholder { kind: InputKind::Input, .. });
            let checkpoint = prod.meta.checkpoint;
            for (ipu, rs) in &groups {
                let start = if *ipu == home { birth } else { rs[0] };
                let fwd_first = rs.iter().copied().find(|&r| g.nodes[r].meta.pass == Pass::Forward);
                let fwd_last = rs.iter().copied().filter(|&r| g.nodes[r].meta.pass == Pass::Forward).max();
                let bwd_first = rs.iter().copied().find(|&r| g.nodes[r].meta.pass != Pass::Forward);
                let out = if *ipu == home { copy_out(&|_| true) } else { None };
                let last = rs.iter().copied().chain(out).max().unwrap_or(start);
                let end = if is_output && *ipu == home { n } else { last };
                // Micro-batches in flight between forward stage f and its backward stage.
                let depth = |f: usize| place.stages.len().saturating_sub(1 + 2 * f);
                let stage_input = is_input || *ipu != home || checkpoint;
                if recompute && stage_input {
                    let f = if checkpoint && *ipu == home { Some(birth) } else { fwd_first };
                    if let Some(f) = f {
                        let add = (depth(place.nodes[f].pipeline_stage) as u64).saturating_mul(bytes);
                        stash[*ipu] = stash[*ipu].saturating_add(add);
                    }
                    push(*ipu, start, end, class);
                } else if let Some(bf) = bwd_first {
                    let (fs, bs) = (place.nodes[start].pipeline_stage, place.nodes[bf].pipeline_stage);
                    if recompute && bs > fs {
                        // Dropped after the forward stage, rebuilt at the start of the backward one.
                        let fwd_end = fwd_last.into_iter().chain(out).max().unwrap_or(start);
                        let rebuilt = match rebuild_at.get(&(fs, segment[birth])) {
                            Some(&r) => r.max(stage_first[bs]),
                            None => stage_first[bs],
                        };
                        push(*ipu, start, fwd_end, class);
                        push(*ipu, rebuilt.min(bf).max(fwd_end + 1), end, class);
                    } else {
                        push(*ipu, start, end, class);
                        stash[*ipu] = stash[*ipu].saturating_add((bs.saturating_sub(fs) as u64).saturating_mul(bytes));
                    }
                } else {
                    push(*ipu, start, end, class);
                }
            }
            continue;
        }
        if let (Some(liveness), Some(kp)) = (phased, place.nodes[birth].phase) {
            // Phased: a value goes through Streaming Memory to the readers the liveness mode
            // says (another phase, after the forward pass or after each phase).
            let off = opts.off_chip(TensorClass::Activation, elements(&g.values[v].ty)) && !is_output;
            let split = |r: usize| -> bool {
                off && place.nodes[r].phase != Some(kp)
                    && match liveness {
                        PhaseLiveness::AlwaysLive => false,
                        PhaseLiveness::OffChipAfterFwd | PhaseLiveness::OffChipAfterFwdNoOverlap => {
                            prod.meta.pass == Pass::Forward && g.nodes[r].meta.pass != Pass::Forward
                        }
                        PhaseLiveness::OffChipAfterEachPhase => true,
                    }
            };
            if readers[v].iter().any(|&r| split(r)) {
                let home_near =
                    groups.iter().find(|x| x.0 == home).and_then(|x| x.1.iter().copied().filter(|&r| !split(r)).max());
                let piece_end = home_near.into_iter().chain(copy_out(&|r| !split(r))).max().unwrap_or(birth);
                push(home, birth, piece_end, class);
                let mut first_load = n;
                for (ipu, rs) in &groups {
                    let near: Vec<usize> = rs.iter().copied().filter(|&r| !split(r)).collect();
                    if *ipu != home && !near.is_empty() {
                        push(*ipu, near[0], *near.last().expect("non-empty"), class);
                    }
                    // Loaded at the start of each reading phase on this IPU.
                    let mut by_phase: Vec<(usize, usize, usize)> = Vec::new();
                    for &r in rs.iter().filter(|&&r| split(r)) {
                        let k = place.nodes[r].phase.unwrap_or(0);
                        match by_phase.iter_mut().find(|x| x.0 == k) {
                            Some(x) => x.2 = r,
                            None => by_phase.push((k, r, r)),
                        }
                    }
                    for (k, first, last) in by_phase {
                        let start = phase_range.get(&(k, *ipu)).map(|r| r.0).unwrap_or(first).min(first);
                        first_load = first_load.min(start);
                        push(*ipu, start, last, class);
                        transfers.push(Transfer { ipu: *ipu, node: start, bytes, once: false });
                    }
                }
                transfers.push(Transfer { ipu: home, node: piece_end, bytes, once: false });
                if piece_end + 1 < first_load {
                    push(home, piece_end + 1, first_load - 1, Class::Streaming);
                }
                continue;
            }
        }
        if recompute_all
            && class == Class::Activation
            && !prod.meta.checkpoint
            && !matches!(prod.op, Op::Placeholder { .. })
            && groups.len() == 1
            && !is_output
        {
            // RecomputeAll on one stage: live through the forward pass, dropped, and rebuilt
            // with its segment (the values since the last checkpoint) just before the
            // backward pass first reads any of them (an estimate of PopART's schedule).
            let rs = &groups[0].1;
            let fwd_last = rs.iter().copied().filter(|&r| g.nodes[r].meta.pass == Pass::Forward).max();
            if let Some(bf) = rs.iter().copied().find(|&r| g.nodes[r].meta.pass != Pass::Forward) {
                let fwd_end = fwd_last.unwrap_or(birth).max(birth);
                let stage = place.nodes[birth].pipeline_stage;
                let rebuilt = rebuild_at.get(&(stage, segment[birth])).copied().unwrap_or(bf).min(bf);
                let last = *rs.last().expect("a backward reader");
                push(home, birth, fwd_end, class);
                if rebuilt > fwd_end {
                    push(home, rebuilt, last, class);
                } else {
                    push(home, fwd_end + 1, last, class);
                }
                continue;
            }
        }
        for (ipu, rs) in &groups {
            if *ipu == home {
                let last = rs.iter().copied().chain(copy_out(&|_| true)).max().unwrap_or(birth);
                push(home, birth, if is_output { n } else { last }, class);
            } else {
                push(*ipu, rs[0], if is_output { n } else { *rs.last().expect("non-empty") }, class);
            }
        }
    }
}

/// Parameters, buffers, optimizer state and accumulators: always live on their IPU, or in
/// Streaming Memory and loaded when used.
fn weights_and_state(c: &Ctx, a: &mut Acc) {
    let Ctx { g, place, opts, n, replicas, training, phased, ref readers, ref phase_range, .. } = *c;
    let Acc { res, transfers, always, fixed, .. } = a;
    // Parameter → (its optimizer step, the update node).
    let mut updates: std::collections::HashMap<&str, (&OptimizerStep, usize)> = Default::default();
    for (i, node) in g.nodes.iter().enumerate() {
        if let Op::OptimizerUpdate { param, step } = &node.op {
            updates.insert(param.as_str(), (step, i));
        }
    }
    let accumulate = training && opts.training.gradient_accumulation > 1;
    for (i, node) in g.nodes.iter().enumerate() {
        let Op::Placeholder { kind, name } = &node.op else { continue };
        if *kind == InputKind::Input {
            continue;
        }
        let v = node.outputs[0].0 as usize;
        let ty = &g.values[v].ty;
        let ipu = place.nodes[i].ipu;
        let elements = elements(ty);
        let bytes = value_bytes(ty);
        if *kind == InputKind::Buffer {
            always[ipu].buffers = always[ipu].buffers.saturating_add(bytes);
            fixed.push((ipu, name.clone(), bytes, "buffer"));
            continue;
        }
        let shard = |class: TensorClass, bytes: u64| {
            if opts.sharded_across_replicas(class, elements) {
                bytes.div_ceil(replicas as u64)
            } else {
                bytes
            }
        };
        let wbytes = shard(TensorClass::Weight, bytes);
        let update = updates.get(name.as_str()).copied();
        if opts.off_chip(TensorClass::Weight, elements) && !readers[v].is_empty() {
            // Brought on chip for the phases (or the stretch) that read it.
            let mut spans: Vec<(usize, usize)> = Vec::new();
            for &r in &readers[v] {
                let span = match place.nodes[r].phase {
                    Some(k) => phase_range.get(&(k, place.nodes[r].ipu)).copied().unwrap_or((r, r)),
                    None => (r, r),
                };
                match spans.iter_mut().find(|s| s.0 <= span.1 && span.0 <= s.1) {
                    Some(s) => *s = (s.0.min(span.0), s.1.max(span.1)),
                    None => spans.push(span),
                }
            }
            if phased.is_none() {
                let (a, b) =
                    (spans.iter().map(|s| s.0).min().unwrap_or(0), spans.iter().map(|s| s.1).max().unwrap_or(0));
                spans = vec![(a, b)];
            }
            spans.sort_unstable();
            let mut cursor = 0;
            for &(a, b) in &spans {
                res.push(Residency {
                    ipu,
                    class: Class::Loaded,
                    iv: Interval { start: a, end: b, bytes: wbytes },
                    value: v,
                });
                transfers.push(Transfer { ipu, node: a, bytes: wbytes, once: false });
                if a > cursor {
                    let iv = Interval { start: cursor, end: a - 1, bytes: wbytes };
                    res.push(Residency { ipu, class: Class::Streaming, iv, value: v });
                }
                cursor = b + 1;
            }
            if cursor < n {
                res.push(Residency {
                    ipu,
                    class: Class::Streaming,
                    iv: Interval { start: cursor, end: n, bytes: wbytes },
                    value: v,
                });
            }
            // The updated weight goes back to Streaming Memory once per iteration.
            if let Some((_, u)) = update {
                transfers.push(Transfer { ipu: place.nodes[u].ipu, node: u, bytes: wbytes, once: true });
            }
        } else {
            always[ipu].weights = always[ipu].weights.saturating_add(wbytes);
            fixed.push((ipu, name.clone(), wbytes, "weight"));
        }
        let Some((step, update)) = update else { continue };
        let upd_ipu = place.nodes[update].ipu;
        // Optimizer state and accumulators: on chip for good, or loaded for the update and
        // stored back after it, once per iteration.
        let mut state = |class: TensorClass, bytes: u64, what: &str, label: &'static str| {
            if bytes == 0 {
                return;
            }
            if opts.off_chip(class, elements) {
                let mut add = |start: usize, end: usize, c: Class| {
                    if start <= end {
                        res.push(Residency { ipu: upd_ipu, class: c, iv: Interval { start, end, bytes }, value: v });
                    }
                };
                add(update, update, Class::Loaded);
                if update > 0 {
                    add(0, update - 1, Class::Streaming);
                }
                add(update + 1, n, Class::Streaming);
                transfers.push(Transfer { ipu: upd_ipu, node: update, bytes: bytes.saturating_mul(2), once: true });
            } else {
                let slot = match class {
                    TensorClass::Optimizer => &mut always[upd_ipu].optimizer,
                    _ => &mut always[upd_ipu].accumulators,
                };
                *slot = slot.saturating_add(bytes);
                fixed.push((upd_ipu, format!("{name} ({what})"), bytes, label));
            }
        };
        state(
            TensorClass::Optimizer,
            shard(TensorClass::Optimizer, optimizer_state_bytes(step, elements)),
            "optimizer state",
            "optimizer",
        );
        if accumulate {
            state(
                TensorClass::Accumulator,
                shard(TensorClass::Accumulator, bytes),
                "gradient accumulator",
                "accumulator",
            );
        }
    }
}

/// Code and exchange buffers: per tile, by the op kinds each IPU runs.
fn code_and_exchange(c: &Ctx, a: &mut Acc) {
    let Ctx { g, place, gen, nipus, .. } = *c;
    let always = &mut a.always;
    let mut kinds: Vec<Vec<&'static str>> = vec![Vec::new(); nipus];
    for (i, node) in g.nodes.iter().enumerate() {
        if !is_source(&node.op) {
            let k = &mut kinds[place.nodes[i].ipu];
            if !k.contains(&node.op.name()) {
                k.push(node.op.name());
            }
        }
    }
    let tiles = gen.tiles as u64;
    for (ipu, a) in always.iter_mut().enumerate() {
        let per_tile = gen.code_bytes_per_tile as u64 + (kinds[ipu].len() * gen.code_bytes_per_op_kind_per_tile) as u64;
        a.code = tiles * per_tile;
        a.exchange = tiles * gen.exchange_bytes_per_tile as u64;
    }
}

/// Each IPU's timeline of program steps, its peak, tile map and fit check, and the values
/// table.
fn timelines(c: &Ctx, a: Acc) -> (Memory, Vec<Diagnostic>, Vec<Diagnostic>) {
    let Ctx { g, place, opts, gen, life, n, nipus, capacity, .. } = *c;
    let Acc { res, transfers, always, fixed, stash } = a;
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    let mut ipus = Vec::new();
    for ipu in 0..nipus {
        let pick =
            |c: Class| -> Vec<Interval> { res.iter().filter(|r| r.ipu == ipu && r.class == c).map(|r| r.iv).collect() };
        let act = pick(Class::Activation);
        let grad = pick(Class::Gradient);
        let live: Vec<Interval> = act.iter().chain(&grad).copied().collect();
        let inner: Vec<u64> = (0..n).map(|i| if place.nodes[i].ipu == ipu { life.inner_peak[i] } else { 0 }).collect();
        let scratch: Vec<u64> = (0..n)
            .map(|i| if place.nodes[i].ipu == ipu { op_temporaries(g, i, opts, capacity, ipu) } else { 0 })
            .collect();
        let t_live = timeline(n, &live, &inner);
        let t_act = timeline(n, &act, &[]);
        let t_grad = timeline(n, &grad, &[]);
        let t_loaded = timeline(n, &pick(Class::Loaded), &[]);
        let t_stream = timeline(n, &pick(Class::Streaming), &[]);
        let mk = |i: usize| Step {
            node: i,
            activations: t_act.during[i],
            stash: stash[ipu],
            gradients: t_grad.during[i],
            temporaries: t_live.during[i]
                .saturating_sub(t_act.during[i])
                .saturating_sub(t_grad.during[i])
                .saturating_add(scratch[i]),
            loaded: t_loaded.during[i],
            streaming: t_stream.during[i],
        };
        let (mut peak_i, mut peak_v) = (0usize, 0u64);
        for i in 0..n {
            let v = mk(i).on_chip();
            if v > peak_v || i == 0 {
                peak_i = i;
                peak_v = v;
            }
        }
        // Sampled steps: the largest of each stretch.
        let stride = n.div_ceil(MAX_STEPS).max(1);
        let mut steps = StepColumns::default();
        let mut i = 0;
        while i < n {
            let end = (i + stride).min(n);
            let best = if (i..end).contains(&peak_i) {
                peak_i
            } else {
                (i..end).max_by_key(|&j| (mk(j).on_chip(), std::cmp::Reverse(j))).expect("non-empty")
            };
            steps.push(&mk(best));
            i = end;
        }
        let al = always[ipu].clone();
        let peak_bytes = al.total().saturating_add(peak_v);
        // Largest tensors at the peak.
        let mut at_peak: Vec<(String, u64, &'static str)> = res
            .iter()
            .filter(|r| r.ipu == ipu && r.class != Class::Streaming && r.iv.start <= peak_i && peak_i <= r.iv.end)
            .map(|r| {
                let class = match r.class {
                    Class::Activation => "activation",
                    Class::Gradient => "gradient",
                    _ => "loaded",
                };
                (value_name(g, r.value), r.iv.bytes, class)
            })
            .collect();
        at_peak.extend(fixed.iter().filter(|f| f.0 == ipu).map(|f| (f.1.clone(), f.2, f.3)));
        at_peak.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let peak_step = if n == 0 { Step::default() } else { mk(peak_i) };
        let tiles = tile_map(gen, &al, &at_peak, peak_step.stash + peak_step.temporaries);
        let max_tile = tiles.iter().copied().max().unwrap_or(0) as u64;
        let largest: Vec<Largest> = at_peak
            .iter()
            .take(LARGEST_LISTED)
            .map(|(name, bytes, class)| Largest { name: name.clone(), bytes: *bytes, class })
            .collect();
        let fits = peak_bytes <= capacity;
        if !fits {
            let top: Vec<String> =
                largest.iter().take(3).map(|l| format!("{} ({}, {})", l.name, human(l.bytes), l.class)).collect();
            errors.push(
                Diagnostic::new(
                    "out_of_memory",
                    format!(
                        "Out of memory on IPU {ipu}: it needs {} at step {peak_i} ({}) but has {} ({} tiles × {}). \
                         Always live: {} (code {}, weights {}, optimizer {}); at the peak: activations {}, \
                         gradients {}, stash {}, temporaries {}, loaded {}. Largest: {}.",
                        human(peak_bytes),
                        node_label(g, peak_i),
                        human(capacity),
                        gen.tiles,
                        human(gen.bytes_per_tile as u64),
                        human(al.total()),
                        human(al.code),
                        human(al.weights),
                        human(al.optimizer),
                        human(peak_step.activations),
                        human(peak_step.gradients),
                        human(peak_step.stash),
                        human(peak_step.temporaries),
                        human(peak_step.loaded),
                        top.join(", ")
                    ),
                    "Spread the blocks over more IPUs, keep weights or optimizer state in Streaming Memory \
                     (TensorLocations), recompute activations, use a smaller micro-batch, or replicated tensor sharding.",
                )
                .at(peak_i),
            );
        } else if max_tile > gen.bytes_per_tile as u64 {
            warnings.push(Diagnostic::new(
                "tile_out_of_memory",
                format!(
                    "IPU {ipu} fits in total but its fullest tile needs {} of {} at step {peak_i}.",
                    human(max_tile),
                    human(gen.bytes_per_tile as u64)
                ),
                "Lower availableMemoryProportion or split the largest tensors.",
            ));
        }
        ipus.push(IpuMemory {
            ipu,
            always_live: al,
            steps,
            program_steps: n,
            peak: peak_step.clone(),
            peak_bytes,
            peak_step: peak_i,
            live_peak_bytes: t_live.peak,
            fits,
            largest,
            tiles,
            max_tile_bytes: max_tile,
        });
    }
    let mut order: Vec<&Residency> = res.iter().filter(|r| r.class != Class::Streaming).collect();
    order.sort_by_key(|r| (r.iv.start, r.ipu, r.value));
    let mut values = ValueColumns::default();
    for r in order {
        values.value.push(r.value as u32);
        values.node.push(g.values[r.value].node);
        values.ipu.push(r.ipu);
        values.class.push(match r.class {
            Class::Activation => "activation",
            Class::Gradient => "gradient",
            _ => "loaded",
        });
        values.bytes.push(r.iv.bytes);
        values.birth.push(r.iv.start);
        values.death.push(r.iv.end);
    }
    (Memory { capacity_bytes: capacity, ipus, values, transfers }, errors, warnings)
}

/// Bytes per tile at the peak: code and exchange on every tile; each tensor spread over as
/// many tiles as its grain allows, starting where the previous one ended (Poplar's linear
/// mapping); stash and temporaries spread evenly.
fn tile_map(gen: &Generation, al: &AlwaysLive, tensors: &[(String, u64, &'static str)], spread: u64) -> Vec<u32> {
    let t = gen.tiles;
    let t64 = t as u64;
    let mut tiles = vec![al.code.saturating_add(al.exchange) / t64; t];
    let mut cursor = 0usize;
    let mut add_range = |tiles: &mut Vec<u64>, bytes: u64| {
        let k = bytes.div_ceil(gen.tile_grain_bytes as u64).clamp(1, t64);
        let per = bytes / k;
        let rem = bytes - per * k;
        for j in 0..k {
            let tile = &mut tiles[(cursor + j as usize) % t];
            *tile = tile.saturating_add(per + u64::from(j < rem));
        }
        cursor = (cursor + k as usize) % t;
    };
    for (_, bytes, _) in tensors {
        add_range(&mut tiles, *bytes);
    }
    for tile in tiles.iter_mut() {
        *tile = tile.saturating_add(spread / t64);
    }
    tiles.into_iter().map(|b| b.min(u32::MAX as u64) as u32).collect()
}

/// Bytes for people: `1.5 MiB`.
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2} GiB", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}
