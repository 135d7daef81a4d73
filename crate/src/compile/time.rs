//! The time model: per-op FLOPs and bytes → BSP supersteps (compute, sync, exchange) at
//! the generation's rates, IPU-Link copies, host I/O and Streaming Memory transfers, laid
//! out per IPU for one iteration of the strategy; throughput in samples per second.
//!
//! An op is one superstep: the exchange brings its inputs to the tiles
//! (`exchangeFraction` of its input bytes at the exchange bandwidth), a sync, then compute:
//! a fixed overhead plus the larger of its FLOPs at the dense rate (fp16 or fp32 peak ×
//! `matmulEfficiency`) and its bytes at the elementwise or gather bandwidth. Reshapes and
//! permutes are views (free). Every tunable is in [`super::hardware::Generation`].
//!
//! * Sharded (and one IPU): stages run one after another; the others idle.
//! * Pipelined: micro-batches flow through the stages; each pipeline step lasts as long as
//!   its busiest IPU, then the stages' outputs cross the IPU-Links. Backward stages recompute
//!   their forward stage when recomputation is on.
//! * Phased: phases run in order, their stages in parallel; weights and activations in
//!   Streaming Memory are loaded before and stored after (overlapped with compute except
//!   `OffChipAfterFwdNoOverlap`; parallel phases load the next phase on the other group).
//! * Training ends each iteration with the gradient all-reduce across replicas and the
//!   weight updates.
//! * Gradient accumulation (PopART's `AccumulateOp`, willow/src/patterns/
//!   optimizerdecompose.cpp `gradAccum`, popx/op/accumulatex.cpp): each micro-batch adds
//!   every weight's gradient into its accumulator, an elementwise pass where the gradient
//!   is made. With the mean strategy `Running` (and Mean reduction) the accumulator is kept
//!   as the running mean, `accum = (1 − 1/n)·accum + (1/n)·grad`, whose factors cost three
//!   scalar ops per accumulator per micro-batch; with `Post` it is a plain sum and the
//!   division by accumulation × replicas is folded into the optimizer's scalars
//!   (compoundscalarhelper.cpp), so it costs nothing apart; `PostAndLoss` adds one scalar
//!   op per micro-batch (the loss divided by the replicas before the backward pass).
//! * Automatic loss scaling (PopART's automaticlossscaling.cpp, default tracking
//!   `AllNonViewChangingGradientTensors`): a histogram of every float16 gradient each
//!   micro-batch, and one loss-scale update per iteration.

use super::hardware::Generation;
use super::memory::Transfer;
use super::options::{MeanReductionStrategy, Options, OutputMode, Recomputation, ReductionType};
use super::placement::{is_source, Placement};
use super::schedule::{Pipeline, StagePass};
use super::strategy::ExecutionStrategy;
use super::strategy::PhaseLiveness;
use crate::ir::liveness::{sub_graph, value_bytes, value_elements};
use crate::ir::{Graph, InputKind, Op};
use crate::tensor::DType;
use serde::Serialize;
use std::collections::HashMap;

/// Intervals listed per plan at most (the rest of a long iteration is cut, `truncated`).
pub const MAX_INTERVALS: usize = 50_000;

/// What an IPU does during an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Compute,
    Exchange,
    Sync,
    Copy,
    Stream,
    Idle,
}

/// One interval of an IPU's timeline, in seconds from the start of the iteration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeInterval {
    pub start: f64,
    pub end: f64,
    pub kind: Kind,
    pub label: String,
}

/// One IPU's timeline.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IpuTime {
    pub ipu: usize,
    pub intervals: Vec<TimeInterval>,
    /// Seconds of each kind in the iteration.
    pub busy: std::collections::BTreeMap<&'static str, f64>,
}

/// The time part of a plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Time {
    /// One host call: `iterationsPerStep` iterations.
    pub step_time_s: f64,
    /// The drawn timeline: one iteration (training: the micro-batches of one weight update).
    pub iteration_time_s: f64,
    pub iterations_per_step: usize,
    pub micro_batches_per_iteration: usize,
    pub micro_batch_size: usize,
    pub samples_per_step: u64,
    /// Samples per second, all replicas together.
    pub throughput: f64,
    pub ipus: Vec<IpuTime>,
    pub truncated: bool,
}

/// An op's work.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// Seconds of compute (overhead included).
    pub compute: f64,
    pub exchange: f64,
    pub sync: f64,
}

impl Cost {
    pub fn total(&self) -> f64 {
        self.compute + self.exchange + self.sync
    }
    fn add(&mut self, o: Cost) {
        self.compute += o.compute;
        self.exchange += o.exchange;
        self.sync += o.sync;
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Class {
    Free,
    Dense,
    Gather,
    Elementwise,
}

/// Ops that only change a view (free, and not gradients PopART tracks for loss scaling).
fn is_view(op: &Op) -> bool {
    matches!(op, Op::Reshape { .. } | Op::Permute { .. })
}

/// FLOPs and bytes of node `i` of `g` and the kind of kernel it needs.
fn flops_bytes(g: &Graph, i: usize) -> (f64, f64, f64, Class) {
    let n = &g.nodes[i];
    let ty = |k: usize| g.ty(n.inputs[k]);
    let in_bytes: f64 = n.inputs.iter().map(|v| value_bytes(g.ty(*v)) as f64).sum();
    let out_bytes: f64 = n.outputs.iter().map(|v| value_bytes(g.ty(*v)) as f64).sum();
    let out_numel: f64 = n.outputs.iter().map(|v| value_elements(g.ty(*v)) as f64).sum();
    let (flops, class) = match &n.op {
        Op::Placeholder { .. } | Op::Constant { .. } => (0.0, Class::Free),
        op if is_view(op) => (0.0, Class::Free),
        Op::MatMul => {
            let k = *ty(0).shape.last().unwrap_or(&1) as f64;
            (2.0 * out_numel * k, Class::Dense)
        }
        Op::MatMulTN => (2.0 * out_numel * ty(0).shape.first().copied().unwrap_or(1) as f64, Class::Dense),
        Op::Linear { .. } | Op::LinearAdd { .. } => (2.0 * out_numel * ty(1).shape[1] as f64, Class::Dense),
        // Convolutions: 2 FLOPs per multiply-add of the direct definition (what poplin's
        // convolution planner counts), `N·O·oh·ow · C/g·kh·kw` of them for the forward and
        // for each gradient; bytes are the operands and result once (modelled). The
        // efficiency is the dense products' (an estimate: PopLin's conv vertices reach a
        // different fraction of peak than its matmuls, shape by shape).
        Op::Conv2d { .. } => {
            let w = &ty(1).shape;
            (2.0 * out_numel * (w[1] * w[2] * w[3]) as f64, Class::Dense)
        }
        Op::Conv2dGradInput { .. } => {
            let w = &ty(0).shape;
            (2.0 * value_elements(ty(1)) as f64 * (w[1] * w[2] * w[3]) as f64, Class::Dense)
        }
        Op::Conv2dGradWeight { .. } => {
            let w = &g.ty(n.outputs[0]).shape;
            (2.0 * value_elements(ty(1)) as f64 * (w[1] * w[2] * w[3]) as f64, Class::Dense)
        }
        // Pools read every input element once per window it sits in and write each output:
        // one compare or add per tap (modelled); memory bound, as elementwise ops.
        Op::MaxPool2d { geom }
        | Op::AvgPool2d { geom, .. }
        | Op::MaxPool2dGrad { geom }
        | Op::AvgPool2dGrad { geom, .. } => {
            let taps = (geom.kernel[0] * geom.kernel[1]) as f64;
            let outs = match &n.op {
                Op::MaxPool2d { .. } | Op::AvgPool2d { .. } => out_numel,
                _ => value_elements(ty(n.inputs.len() - 1)) as f64,
            };
            (outs * taps, Class::Elementwise)
        }
        // Batch norm reads x twice (statistics, then normalising) and writes y; its
        // gradient reads x and g twice and writes gx (modelled as memory-bound passes).
        Op::BatchNorm { .. } | Op::BatchNormGrad { .. } => {
            let x = value_bytes(ty(0)) as f64;
            let extra = if matches!(n.op, Op::BatchNormGrad { .. }) { 2.0 * x } else { x };
            return (8.0 * out_numel, in_bytes + out_bytes + extra, in_bytes, Class::Elementwise);
        }
        Op::AdaptiveAvgPool2d { .. } | Op::AdaptiveAvgPool2dGrad { .. } => {
            (out_numel.max(value_elements(ty(0)) as f64), Class::Elementwise)
        }
        Op::SpMM { .. } | Op::SpMMTransposed { .. } => {
            let nnz = value_elements(ty(1)) as f64;
            let f = *g.ty(n.outputs[0]).shape.last().unwrap_or(&1) as f64;
            return (2.0 * nnz * f, nnz * f * 4.0 + out_bytes, in_bytes, Class::Gather);
        }
        Op::SpMMValuesGrad { .. } => {
            let nnz = value_elements(ty(1)) as f64;
            let f = *ty(2).shape.last().unwrap_or(&1) as f64;
            return (2.0 * nnz * f, 2.0 * nnz * f * 4.0, in_bytes, Class::Gather);
        }
        Op::IndexSelect { .. }
        | Op::Gather { .. }
        | Op::ScatterAdd { .. }
        | Op::ScatterMean { .. }
        | Op::IndexAdd { .. }
        | Op::GatherGrad { .. }
        | Op::ScatterMeanGrad { .. } => (out_numel, Class::Gather),
        _ => (4.0 * out_numel.max(in_bytes / 4.0), Class::Elementwise),
    };
    (flops, in_bytes + out_bytes, in_bytes, class)
}

/// The cost model for one generation, with sub-graph costs memoised.
pub struct CostModel<'a> {
    gen: &'a Generation,
    memo: HashMap<*const Graph, Cost>,
}

impl<'a> CostModel<'a> {
    pub fn new(gen: &'a Generation) -> CostModel<'a> {
        CostModel { gen, memo: HashMap::new() }
    }

    /// A small op on scalars: its fixed overhead and a sync.
    pub fn scalar_op(&self) -> Cost {
        Cost { compute: self.gen.op_overhead_cycles / self.gen.clock_hz, exchange: 0.0, sync: self.sync() }
    }

    fn sync(&self) -> f64 {
        self.gen.sync_cycles / self.gen.clock_hz
    }

    /// An elementwise pass over `bytes` (read and written) as one op.
    fn elementwise(&self, bytes: f64) -> Cost {
        let gen = self.gen;
        Cost {
            compute: gen.op_overhead_cycles / gen.clock_hz
                + bytes / (gen.memory_bandwidth * gen.elementwise_efficiency),
            exchange: 0.0,
            sync: self.sync(),
        }
    }

    /// Adding a gradient of `grad_bytes` into its accumulator (read both, write the
    /// accumulator), with the running mean's factors when `running`.
    pub fn accumulate(&self, grad_bytes: f64, running: bool) -> Cost {
        let mut c = self.elementwise(3.0 * grad_bytes);
        if running {
            // counter + 1, b = 1 / (counter + 1), a = 1 − b (accumulatex.cpp).
            for _ in 0..3 {
                c.add(self.scalar_op());
            }
        }
        c
    }

    /// A histogram of a float16 gradient of `bytes` (automatic loss scaling).
    pub fn histogram(&self, bytes: f64) -> Cost {
        self.elementwise(bytes)
    }

    /// The cost of node `i` of `g` (a node running a sub-graph costs the sub-graph).
    pub fn node(&mut self, g: &Graph, i: usize) -> Cost {
        let node = &g.nodes[i];
        if let Some(sub) = sub_graph(&node.op) {
            let key = sub as *const Graph;
            if let Some(c) = self.memo.get(&key) {
                return *c;
            }
            let mut c = Cost::default();
            for j in 0..sub.nodes.len() {
                c.add(self.node(sub, j));
            }
            self.memo.insert(key, c);
            return c;
        }
        let gen = self.gen;
        let (flops, bytes, in_bytes, class) = flops_bytes(g, i);
        if class == Class::Free {
            return Cost::default();
        }
        let half = node.outputs.first().is_some_and(|v| g.ty(*v).dtype == DType::Float16);
        let overhead = gen.op_overhead_cycles / gen.clock_hz;
        let work = match class {
            Class::Dense => flops / (gen.peak_flops(half) * gen.matmul_efficiency),
            Class::Gather => bytes / gen.gather_bandwidth,
            _ => bytes / (gen.memory_bandwidth * gen.elementwise_efficiency),
        };
        let work = match node.op {
            Op::OptimizerUpdate { .. } => work * 3.0, // reads and writes the parameter and its state
            _ => work,
        };
        Cost {
            compute: overhead + work,
            exchange: gen.exchange_fraction * in_bytes / gen.exchange_bandwidth,
            sync: gen.sync_cycles / gen.clock_hz,
        }
    }
}

struct Builder {
    ipus: Vec<IpuTime>,
    count: usize,
    truncated: bool,
}

impl Builder {
    /// Where `ipu`'s lane ends so far.
    fn lane_end(&self, ipu: usize) -> f64 {
        self.ipus[ipu].intervals.last().map(|x| x.end).unwrap_or(0.0)
    }

    /// Appends an interval to `ipu`'s lane; a gap before it is filled with idle time.
    fn push(&mut self, ipu: usize, start: f64, end: f64, kind: Kind, label: &str) {
        if end <= start {
            return;
        }
        let lane = self.lane_end(ipu);
        if start > lane && kind != Kind::Idle {
            self.push(ipu, lane, start, Kind::Idle, "idle");
        }
        let name = match kind {
            Kind::Compute => "compute",
            Kind::Exchange => "exchange",
            Kind::Sync => "sync",
            Kind::Copy => "copy",
            Kind::Stream => "stream",
            Kind::Idle => "idle",
        };
        *self.ipus[ipu].busy.entry(name).or_insert(0.0) += end - start;
        let list = &mut self.ipus[ipu].intervals;
        if let Some(last) = list.last_mut() {
            if last.kind == kind && last.label == label && (last.end - start).abs() <= 1e-12 * end.max(1e-9) {
                last.end = end;
                return;
            }
        }
        if self.count >= MAX_INTERVALS {
            self.truncated = true;
            return;
        }
        self.count += 1;
        list.push(TimeInterval { start, end, kind, label: label.to_string() });
    }

    /// Work `c` on `ipu` from `t`: exchange, sync, compute. Returns the end.
    fn work(&mut self, ipu: usize, t: f64, c: Cost, label: &str) -> f64 {
        self.push(ipu, t, t + c.exchange, Kind::Exchange, label);
        self.push(ipu, t + c.exchange, t + c.exchange + c.sync, Kind::Sync, label);
        self.push(ipu, t + c.exchange + c.sync, t + c.total(), Kind::Compute, label);
        t + c.total()
    }
}

/// Builds the time model of a placed program.
#[allow(clippy::too_many_arguments)]
pub fn time(
    g: &Graph,
    place: &Placement,
    opts: &Options,
    gen: &Generation,
    pipeline: Option<&Pipeline>,
    transfers: &[Transfer],
    micro_batch_size: usize,
) -> Time {
    let nipus = place.ipus_per_replica.max(1);
    let training = place.training;
    let mut cm = CostModel::new(gen);
    let ns = place.stages.len();
    // Per execution stage: work per micro-batch (optimizer updates apart), host input bytes,
    // bytes copied out to other IPUs, Streaming Memory bytes.
    let mut stage_cost = vec![Cost::default(); ns];
    let mut update_cost = vec![Cost::default(); nipus];
    let mut grad_bytes = vec![0f64; nipus];
    let mut input_bytes = vec![0f64; ns];
    let accumulate = training && opts.training.gradient_accumulation > 1;
    let mean = opts.training.accumulation_and_replication_reduction_type == ReductionType::Mean;
    let strategy = opts.training.mean_accumulation_and_replication_reduction_strategy;
    let running = mean && strategy == MeanReductionStrategy::Running;
    let loss_scaling = training && opts.training.automatic_loss_scaling;
    for (i, node) in g.nodes.iter().enumerate() {
        let np = place.nodes[i];
        if loss_scaling && node.meta.pass == crate::ir::Pass::Backward && !is_view(&node.op) {
            for v in &node.outputs {
                let ty = g.ty(*v);
                if ty.dtype == DType::Float16 {
                    stage_cost[np.pipeline_stage].add(cm.histogram(value_bytes(ty) as f64));
                }
            }
        }
        match &node.op {
            Op::OptimizerUpdate { .. } => {
                update_cost[np.ipu].add(cm.node(g, i));
                let gb = value_bytes(g.ty(node.inputs[0])) as f64;
                grad_bytes[np.ipu] += gb;
                if accumulate {
                    // Where the gradient is made, every micro-batch.
                    let made = place.nodes[g.values[node.inputs[0].0 as usize].node].pipeline_stage;
                    stage_cost[made].add(cm.accumulate(gb, running));
                }
            }
            Op::Placeholder { kind: InputKind::Input, .. } => {
                input_bytes[np.pipeline_stage] += value_bytes(g.ty(node.outputs[0])) as f64
            }
            op if is_source(op) => {}
            _ => stage_cost[np.pipeline_stage].add(cm.node(g, i)),
        }
    }
    let last_ipu = place.stages.last().map(|s| s.ipu).unwrap_or(0);
    if training && mean && strategy == MeanReductionStrategy::PostAndLoss && opts.replication_factor > 1 {
        // The loss divided by the replicas before the backward pass, each micro-batch.
        if let Some(s) = place.stages.iter().position(|s| s.pass != StagePass::Forward) {
            stage_cost[s].add(cm.scalar_op());
        }
    }
    if loss_scaling {
        // The loss scale's update, once per iteration.
        update_cost[last_ipu].add(cm.scalar_op());
    }
    let mut copy_out = vec![0f64; ns];
    let mut copy_ipus: Vec<Vec<usize>> = vec![Vec::new(); ns];
    for c in &place.copies {
        let s = place.nodes[g.values[c.value as usize].node].pipeline_stage;
        copy_out[s] += c.bytes as f64;
        for ipu in [c.from_ipu, c.to_ipu] {
            if !copy_ipus[s].contains(&ipu) {
                copy_ipus[s].push(ipu);
            }
        }
    }
    // Streaming Memory traffic: per micro-batch with its stage, or once per iteration with
    // the weight update.
    let mut stage_stream = vec![0f64; ns];
    let mut update_stream = vec![0f64; nipus];
    for t in transfers {
        if t.once {
            update_stream[t.ipu] += t.bytes as f64;
        } else {
            stage_stream[place.nodes[t.node.min(g.nodes.len().saturating_sub(1))].pipeline_stage] += t.bytes as f64;
        }
    }
    let out_bytes: f64 = g.outputs.iter().map(|v| value_bytes(g.ty(*v)) as f64).sum();
    // Backward stages recompute their forward stage in pipelined training.
    let recompute = training
        && opts.auto_recomputation == Recomputation::Pipeline
        && matches!(opts.execution_strategy, ExecutionStrategy::Pipelined(_))
        && nipus > 1;
    if recompute {
        let f = place.forward_stages;
        for b in 0..ns {
            if place.stages[b].pass == StagePass::Backward && b + 1 < 2 * f {
                let fwd = 2 * f - 2 - b;
                let extra = stage_cost[fwd];
                stage_cost[b].add(extra);
            }
        }
    }
    let label = |s: usize| -> String {
        let st = &place.stages[s];
        let pass = match st.pass {
            StagePass::Forward => "fwd",
            StagePass::ForwardBackward => "fwd+bwd",
            StagePass::Backward => "bwd",
        };
        format!("stage {s} {pass} ({})", st.blocks.join(","))
    };
    let mut b = Builder {
        ipus: (0..nipus).map(|ipu| IpuTime { ipu, ..IpuTime::default() }).collect(),
        count: 0,
        truncated: false,
    };
    let host = |bytes: f64| bytes / gen.host_bandwidth;
    let link = |bytes: f64| bytes / gen.ipu_link_bandwidth;
    let stream = |bytes: f64| bytes / gen.streaming_bandwidth;
    let ipu_sync = gen.ipu_sync_cycles / gen.clock_hz;
    let micro_batches = if training { opts.training.gradient_accumulation.max(1) } else { 1 };
    let mut t = 0.0f64;
    let (iterations_per_step, mbs) = match (&opts.execution_strategy, pipeline) {
        (ExecutionStrategy::Pipelined(_), Some(p)) => {
            // One pipeline over p.micro_batches: step t runs stage s on micro-batch t - s.
            let steps = p.steps();
            let active: Vec<Vec<usize>> =
                (0..steps).map(|st| (0..ns).filter(|&s| st >= s && st - s < p.micro_batches).collect()).collect();
            for (st, act) in active.iter().enumerate() {
                let mut ends = vec![t; nipus];
                for &s in act {
                    let ipu = place.stages[s].ipu;
                    let l = label(s);
                    let mut e = ends[ipu];
                    let inb = input_bytes[s] + stage_stream[s];
                    if inb > 0.0 {
                        let d = if input_bytes[s] > 0.0 { host(input_bytes[s]) } else { 0.0 } + stream(stage_stream[s]);
                        b.push(ipu, e, e + d, Kind::Stream, &l);
                        e += d;
                    }
                    e = b.work(ipu, e, stage_cost[s], &l);
                    ends[ipu] = e;
                }
                let busiest = ends.iter().copied().fold(t, f64::max);
                for (ipu, &e) in ends.iter().enumerate() {
                    b.push(ipu, e, busiest, Kind::Idle, "waiting for the busiest IPU");
                }
                // Inter-IPU copies of the stages that ran, then the next step.
                let copy = act.iter().map(|&s| link(copy_out[s])).fold(0.0, f64::max);
                let involved: Vec<usize> = act.iter().flat_map(|&s| copy_ipus[s].iter().copied()).collect();
                let end = busiest + ipu_sync + copy;
                for ipu in 0..nipus {
                    let kind = if involved.contains(&ipu) { Kind::Copy } else { Kind::Sync };
                    b.push(ipu, busiest, end, kind, &format!("pipeline step {st} copies"));
                }
                t = end;
            }
            // Inference pipelines over the device iterations; training over the accumulation.
            if training {
                (opts.device_iterations.max(1), p.micro_batches)
            } else {
                (1, p.micro_batches)
            }
        }
        (ExecutionStrategy::SerialPhased(ph) | ExecutionStrategy::ParallelPhased(ph), _) => {
            // Phases in order, their stages in parallel. Parallel phases load the next phase
            // onto the other IPU group while this one computes; serial phases prefetch with
            // IO tiles, so only loads longer than the previous phase's compute show (none
            // hidden with OffChipAfterFwdNoOverlap).
            let parallel = matches!(opts.execution_strategy, ExecutionStrategy::ParallelPhased(_));
            let overlap = ph.liveness() != PhaseLiveness::OffChipAfterFwdNoOverlap;
            let seq: Vec<&super::placement::PhaseInfo> = (0..micro_batches).flat_map(|_| place.phases.iter()).collect();
            let io_of = |s: usize| stream(stage_stream[s]) + host(input_bytes[s]);
            let mut loaded_at = vec![f64::NAN; ns]; // parallel: when a stage's loads are done
            let mut prev_compute = vec![0.0f64; nipus];
            for (k, phase) in seq.iter().enumerate() {
                let mut end = t;
                let mut compute = vec![0.0f64; nipus];
                for &s in &phase.stages {
                    let ipu = place.stages[s].ipu;
                    let load = format!("phase {} loads", phase.id);
                    let start = if parallel && !loaded_at[s].is_nan() {
                        loaded_at[s].max(t)
                    } else {
                        let io = io_of(s);
                        let visible = if parallel || !overlap { io } else { (io - prev_compute[ipu]).max(0.0) };
                        let from = t.max(b.lane_end(ipu));
                        b.push(ipu, from, from + visible, Kind::Stream, &load);
                        from + visible
                    };
                    let e = b.work(ipu, start, stage_cost[s], &label(s));
                    compute[ipu] = stage_cost[s].total();
                    end = end.max(e);
                }
                if parallel {
                    // The next phase's group loads while this one computes.
                    if let Some(next) = seq.get(k + 1) {
                        for &s in &next.stages {
                            let ipu = place.stages[s].ipu;
                            let from = t.max(b.lane_end(ipu));
                            b.push(ipu, from, from + io_of(s), Kind::Stream, &format!("phase {} loads", next.id));
                            loaded_at[s] = from + io_of(s);
                        }
                    }
                }
                let copy = phase.stages.iter().map(|&s| link(copy_out[s])).fold(0.0, f64::max);
                for ipu in 0..nipus {
                    b.push(ipu, b.lane_end(ipu).max(t), end, Kind::Idle, "waiting for the phase to end");
                    let from = b.lane_end(ipu).max(end);
                    let kind = if copy > 0.0 { Kind::Copy } else { Kind::Sync };
                    b.push(ipu, from, end + ipu_sync + copy, kind, &format!("end of phase {}", phase.id));
                }
                prev_compute = compute;
                t = end + ipu_sync + copy;
                // Loads that outlast the phase delay the next one.
                t = t.max((0..nipus).map(|q| b.lane_end(q)).fold(t, f64::max));
            }
            (opts.device_iterations.max(1), micro_batches)
        }
        _ => {
            // Sharded or one IPU: stages one after another.
            for _ in 0..micro_batches {
                for s in 0..ns {
                    let ipu = place.stages[s].ipu;
                    let l = label(s);
                    let io = host(input_bytes[s]) + stream(stage_stream[s]);
                    b.push(ipu, t, t + io, Kind::Stream, &l);
                    let e = b.work(ipu, t + io, stage_cost[s], &l);
                    for other in 0..nipus {
                        if other != ipu {
                            b.push(other, t, e, Kind::Idle, "another IPU's stage runs");
                        }
                    }
                    t = e;
                    if copy_out[s] > 0.0 {
                        let d = ipu_sync + link(copy_out[s]);
                        for ipu in 0..nipus {
                            let kind = if copy_ipus[s].contains(&ipu) { Kind::Copy } else { Kind::Idle };
                            b.push(ipu, t, t + d, kind, &format!("copies after stage {s}"));
                        }
                        t += d;
                    }
                }
            }
            (opts.device_iterations.max(1), micro_batches)
        }
    };
    // Outputs to the host, then (training) the all-reduce across replicas and the updates.
    // outputMode: All returns every micro-batch's outputs, EveryN every N-th, Final and Sum one.
    let returned = match opts.resolved_output_mode(training) {
        OutputMode::All => mbs,
        OutputMode::EveryN => mbs.div_ceil(opts.output_return_period.unwrap_or(1).max(1)),
        _ => 1,
    };
    let outs = out_bytes * returned as f64;
    if outs > 0.0 {
        let d = host(outs);
        for ipu in 0..nipus {
            if ipu == last_ipu {
                b.push(ipu, t, t + d, Kind::Stream, "outputs to the host");
            } else {
                b.push(ipu, t, t + d, Kind::Idle, "outputs to the host");
            }
        }
        t += d;
    }
    if training {
        let replicas = opts.replication_factor.max(1) as f64;
        let reduce = if replicas > 1.0 {
            grad_bytes.iter().map(|&gb| 2.0 * (replicas - 1.0) / replicas * link(gb)).fold(0.0, f64::max) + ipu_sync
        } else {
            0.0
        };
        let mut end = t;
        for (ipu, &cost) in update_cost.iter().enumerate() {
            let mut e = t;
            if reduce > 0.0 {
                b.push(ipu, e, e + reduce, Kind::Copy, "gradient all-reduce across replicas");
                e += reduce;
            }
            if update_stream[ipu] > 0.0 {
                let d = stream(update_stream[ipu]);
                b.push(ipu, e, e + d, Kind::Stream, "optimizer state and weights to and from Streaming Memory");
                e += d;
            }
            e = b.work(ipu, e, cost, "weight update");
            end = end.max(e);
        }
        for ipu in 0..nipus {
            let last = b.ipus[ipu].intervals.last().map(|x| x.end).unwrap_or(t);
            b.push(ipu, last.max(t), end, Kind::Idle, "waiting for the weight updates");
        }
        t = end;
    }
    for ipu in 0..nipus {
        b.push(ipu, b.lane_end(ipu), t, Kind::Idle, "idle");
    }
    let iteration = t;
    let step = iteration * iterations_per_step as f64;
    let groups = opts.input_replica_grouping.size.max(1);
    let samples = [micro_batch_size, mbs, iterations_per_step, opts.replication_factor.max(1)]
        .into_iter()
        .fold(1u64, |acc, k| acc.saturating_mul(k as u64))
        / groups as u64;
    Time {
        step_time_s: step,
        iteration_time_s: iteration,
        iterations_per_step,
        micro_batches_per_iteration: mbs,
        micro_batch_size,
        samples_per_step: samples,
        throughput: if step > 0.0 { samples as f64 / step } else { 0.0 },
        ipus: b.ipus,
        truncated: b.truncated,
    }
}
