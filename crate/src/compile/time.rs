//! The time model: per-op FLOPs and bytes → BSP supersteps (compute, sync, exchange) at
//! the generation's rates, IPU-Link copies, host I/O and Streaming Memory transfers, laid
//! out per IPU for one iteration of the strategy; throughput in samples per second.
//!
//! An op is one superstep: the exchange brings its inputs to the tiles
//! (`exchangeFraction` of its input bytes at the exchange bandwidth), a sync, then compute:
//! a fixed overhead plus the larger of its FLOPs at the dense rate (fp16 or fp32 peak ×
//! `matmulEfficiency`) and its bytes at the elementwise or gather bandwidth. Reshapes and
//! permutes are views (free). Every tunable is in [`super::hardware::Generation`]. A dense
//! product also exchanges its partial results (`Precision.partialsType`: float or half) and,
//! held below the temporaries it wants by its available memory proportion (the op's own
//! `set_available_memory`, else the IPU's), runs in more passes (estimates, see
//! `CostModel::partials`).
//!
//! * Sharded (and one IPU): stages run one after another; the others idle.
//! * Pipelined: micro-batches flow through the stages; each pipeline step lasts as long as
//!   its busiest IPU, then the stages' outputs cross the IPU-Links. Backward stages recompute
//!   their forward stage when recomputation is on, but for its checkpoints
//!   (`recomputationCheckpoint`), which are stashed.
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
//!
//! The timeline is laid out unit by unit (a micro-batch, or a pipeline step), and identical
//! units repeat: the micro-batches of a sharded iteration, those of a phased one after the
//! first (which loads its first phase) and before the last (which prefetches nothing), and
//! the pipeline's steady steps. A run of more than [`STEADY_UNITS_DRAWN`] such units keeps
//! its first and last [`STEADY_UNITS_LISTED`]; the ones between are one [`Kind::Elided`]
//! interval per IPU, `count` copies of the unit before it (`repeat`), whose time goes into
//! `busy` by kind. The cost of a plan does not grow with the accumulation, device iterations
//! or replicas, and every IPU's `busy` adds up to the iteration.

use super::hardware::Generation;
use super::memory::{dense_scratch, Transfer};
use super::options::{MeanReductionStrategy, Options, OutputMode, Recomputation, ReductionType};
use super::placement::{is_source, Placement};
use super::schedule::{Pipeline, StagePass};
use super::strategy::ExecutionStrategy;
use super::strategy::{PhaseLiveness, PhasedExecution};
use crate::ir::liveness::{sub_graph, value_bytes, value_elements};
use crate::ir::{Graph, InputKind, Op};
use crate::tensor::DType;
use serde::Serialize;
use std::collections::BTreeMap;
use std::collections::HashMap;

/// Identical units (micro-batches or pipeline steps) in a row drawn in full at most.
pub const STEADY_UNITS_DRAWN: usize = 16;
/// Units kept at each end of a longer run of identical units; the rest is elided.
pub const STEADY_UNITS_LISTED: usize = 2;

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
    /// Units like the one before, left out of the drawing (`repeat` says how many).
    Elided,
}

impl Kind {
    /// The name used in `busy` and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Compute => "compute",
            Kind::Exchange => "exchange",
            Kind::Sync => "sync",
            Kind::Copy => "copy",
            Kind::Stream => "stream",
            Kind::Idle => "idle",
            Kind::Elided => "elided",
        }
    }
}

/// What an [`Kind::Elided`] interval stands for: `count` units of `period_s` seconds each,
/// every one like the unit drawn before it, with `busy` seconds of each kind per unit.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Repeat {
    pub count: usize,
    /// `micro-batch` or `pipeline step`.
    pub unit: &'static str,
    pub period_s: f64,
    pub busy: std::collections::BTreeMap<&'static str, f64>,
}

/// One interval of an IPU's timeline, in seconds from the start of the iteration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeInterval {
    pub start: f64,
    pub end: f64,
    pub kind: Kind,
    pub label: String,
    /// Only on [`Kind::Elided`] intervals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Repeat>,
}

/// One IPU's timeline.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IpuTime {
    pub ipu: usize,
    pub intervals: Vec<TimeInterval>,
    /// Seconds of each kind in the iteration (elided units included); they add up to the
    /// iteration time.
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
        // Views (`is_view`) move nothing.
        Op::Reshape { .. } | Op::Permute { .. } => (0.0, Class::Free),
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
        // Every other op is listed, so that a new op is a compile error here until it has a
        // cost: these stream their operands once, at a few operations per element.
        Op::Full { .. }
        | Op::RandomMask { .. }
        | Op::Unary { .. }
        | Op::Binary { .. }
        | Op::Where
        | Op::Positive
        | Op::Reduce { .. }
        | Op::Max { .. }
        | Op::ArgMax { .. }
        | Op::OneHot { .. }
        | Op::Softmax { .. }
        | Op::LogSoftmax { .. }
        | Op::LayerNorm { .. }
        | Op::Dropout { .. }
        | Op::CrossEntropy { .. }
        | Op::IdentityLoss { .. }
        | Op::Concat { .. }
        | Op::Split { .. }
        | Op::Slice { .. }
        | Op::DynamicSlice { .. }
        | Op::Cast { .. }
        | Op::BroadcastTo { .. }
        | Op::BufferUpdate { .. }
        | Op::SumTo { .. }
        | Op::UnaryGrad { .. }
        | Op::PowGrad
        | Op::MaxGrad { .. }
        | Op::SoftmaxGrad { .. }
        | Op::LogSoftmaxGrad { .. }
        | Op::LayerNormGrad { .. }
        | Op::CrossEntropyGrad { .. }
        | Op::SliceGrad { .. }
        | Op::DynamicSliceGrad { .. }
        | Op::Call { .. }
        | Op::InvertibleBackward { .. }
        | Op::OptimizerUpdate { .. } => (4.0 * out_numel.max(in_bytes / 4.0), Class::Elementwise),
    };
    (flops, in_bytes + out_bytes, in_bytes, class)
}

/// The floating-point operations of `g`'s dense products (matrix products, linears,
/// convolutions and their gradients) by op name ([`Op::name`]), its sub-graphs included (a
/// region's body and an invertible backward's graph, once per node that runs them): the
/// counts the cost model charges at the peak rate ([`flops_bytes`]).
/// `examples/rev_gnn.rs --profile` divides them by the measured time of those ops, to set
/// a CPU's achieved rate beside its peak.
pub fn dense_flops(g: &Graph) -> std::collections::BTreeMap<&'static str, f64> {
    let mut by_op = std::collections::BTreeMap::new();
    add_dense_flops(g, &mut by_op);
    by_op
}

fn add_dense_flops(g: &Graph, by_op: &mut std::collections::BTreeMap<&'static str, f64>) {
    for (i, n) in g.nodes.iter().enumerate() {
        match sub_graph(&n.op) {
            Some(sub) => add_dense_flops(sub, by_op),
            None => {
                if let (flops, _, _, Class::Dense) = flops_bytes(g, i) {
                    *by_op.entry(n.op.name()).or_insert(0.0) += flops;
                }
            }
        }
    }
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

    /// What a dense product's partials add to node `i` (estimates, marked so in the README):
    /// their cross-tile reduction exchanges them once (`wanted` bytes: half partials halve
    /// it), and an op whose available memory (`cap`) holds less than it wants is split into
    /// `⌈wanted / cap⌉` passes, each extra one a superstep that exchanges its inputs again
    /// (PopLin trades cycles for temporary memory so).
    pub fn partials(&self, g: &Graph, i: usize, wanted: u64, cap: u64) -> Cost {
        let gen = self.gen;
        let (_, _, in_bytes, _) = flops_bytes(g, i);
        let extra = wanted.div_ceil(cap.max(1)).saturating_sub(1) as f64;
        Cost {
            compute: extra * gen.op_overhead_cycles / gen.clock_hz,
            exchange: gen.exchange_fraction * (wanted as f64 + extra * in_bytes) / gen.exchange_bandwidth,
            sync: extra * self.sync(),
        }
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

type Busy = std::collections::BTreeMap<&'static str, f64>;

struct Builder {
    ipus: Vec<IpuTime>,
}

impl Builder {
    /// Where `ipu`'s lane ends so far.
    fn lane_end(&self, ipu: usize) -> f64 {
        self.ipus[ipu].intervals.last().map(|x| x.end).unwrap_or(0.0)
    }

    /// Appends an interval to `ipu`'s lane; a gap before it is filled with idle time (an
    /// idle interval is stretched back over it).
    fn push(&mut self, ipu: usize, start: f64, end: f64, kind: Kind, label: &str) {
        if end <= start {
            return;
        }
        let lane = self.lane_end(ipu);
        let start = if start > lane {
            if kind == Kind::Idle {
                lane
            } else {
                self.push(ipu, lane, start, Kind::Idle, "idle");
                start
            }
        } else {
            start
        };
        *self.ipus[ipu].busy.entry(kind.name()).or_insert(0.0) += end - start;
        let list = &mut self.ipus[ipu].intervals;
        if let Some(last) = list.last_mut() {
            if last.kind == kind && last.label == label && (last.end - start).abs() <= 1e-12 * end.max(1e-9) {
                last.end = end;
                return;
            }
        }
        list.push(TimeInterval { start, end, kind, label: label.to_string(), repeat: None });
    }

    /// Work `c` on `ipu` from `t`: exchange, sync, compute. Returns the end.
    fn work(&mut self, ipu: usize, t: f64, c: Cost, label: &str) -> f64 {
        self.push(ipu, t, t + c.exchange, Kind::Exchange, label);
        self.push(ipu, t + c.exchange, t + c.exchange + c.sync, Kind::Sync, label);
        self.push(ipu, t + c.exchange + c.sync, t + c.total(), Kind::Compute, label);
        t + c.total()
    }

    /// Every lane idle up to `t` (the end of a unit).
    fn fill_to(&mut self, t: f64) {
        for ipu in 0..self.ipus.len() {
            self.push(ipu, self.lane_end(ipu), t, Kind::Idle, "idle");
        }
    }

    fn busy(&self) -> Vec<Busy> {
        self.ipus.iter().map(|x| x.busy.clone()).collect()
    }
}

/// Lays out `n` units (micro-batches or pipeline steps) with `run(builder, k, t)`, which
/// draws unit `k` from `t` and returns its end. The units in `steady` are identical: when
/// there are more than [`STEADY_UNITS_DRAWN`] of them, the first and last
/// [`STEADY_UNITS_LISTED`] are drawn and those between become one elided interval per IPU,
/// copies of the unit before them; `run`'s last argument is then the seconds elided just
/// before the unit it draws (to move any state it keeps in absolute time), else 0.
/// Returns the end of the last unit.
fn lay_out(
    b: &mut Builder,
    mut t: f64,
    n: usize,
    steady: std::ops::Range<usize>,
    unit: &'static str,
    mut run: impl FnMut(&mut Builder, usize, f64, f64) -> f64,
) -> f64 {
    let steady = steady.start.min(n)..steady.end.min(n);
    let elide = (steady.len() > STEADY_UNITS_DRAWN)
        .then(|| (steady.start + STEADY_UNITS_LISTED, steady.end - STEADY_UNITS_LISTED));
    let mut before: Option<(f64, Vec<Busy>)> = None;
    let mut skipped = 0.0;
    let mut k = 0;
    while k < n {
        if let Some((from, to)) = elide {
            if k + 1 == from {
                before = Some((t, b.busy()));
            }
            if k == from {
                let (t0, busy0) = before.take().expect("the unit before the elided ones was drawn");
                let period = t - t0;
                let count = to - from;
                let d = count as f64 * period;
                for (ipu, was) in busy0.iter().enumerate() {
                    let lane = &mut b.ipus[ipu];
                    let per: Busy = lane
                        .busy
                        .iter()
                        .map(|(kind, s)| (*kind, s - was.get(kind).copied().unwrap_or(0.0)))
                        .filter(|(_, s)| *s > 0.0)
                        .collect();
                    for (kind, s) in &per {
                        *lane.busy.entry(kind).or_insert(0.0) += count as f64 * s;
                    }
                    let units = match (count, unit.ends_with("ch")) {
                        (1, _) => unit.to_string(),
                        (_, true) => format!("{unit}es"),
                        _ => format!("{unit}s"),
                    };
                    lane.intervals.push(TimeInterval {
                        start: t,
                        end: t + d,
                        kind: Kind::Elided,
                        label: format!("{count} more {units} ({from}–{}) like {unit} {}", to - 1, from - 1),
                        repeat: Some(Repeat { count, unit, period_s: period, busy: per }),
                    });
                }
                t += d;
                skipped = d;
                k = to;
                continue;
            }
        }
        t = run(b, k, t, std::mem::take(&mut skipped));
        b.fill_to(t);
        k += 1;
    }
    t
}

/// The costs [`costs`] finds, which the layout passes read.
struct Costs {
    stage_cost: Vec<Cost>,
    update_cost: Vec<Cost>,
    /// Per IPU, the bytes its gradient all-reduce across replicas moves through its links.
    reduce_bytes: Vec<f64>,
    input_bytes: Vec<f64>,
    last_ipu: usize,
    copy_out: Vec<f64>,
    copy_ipus: Vec<Vec<usize>>,
    stage_stream: Vec<f64>,
    update_stream: Vec<f64>,
    out_bytes: f64,
}

/// What the layout passes read.
struct Ctx<'a> {
    place: &'a Placement,
    opts: &'a Options,
    gen: &'a Generation,
    nipus: usize,
    training: bool,
    ns: usize,
    costs: Costs,
}

impl Ctx<'_> {
    /// A stage's label: `stage 2 bwd (b0,b1)`.
    fn label(&self, s: usize) -> String {
        let st = &self.place.stages[s];
        let pass = match st.pass {
            StagePass::Forward => "fwd",
            StagePass::ForwardBackward => "fwd+bwd",
            StagePass::Backward => "bwd",
        };
        format!("stage {s} {pass} ({})", st.blocks.join(","))
    }

    /// Seconds to move `bytes` to or from the host.
    fn host(&self, bytes: f64) -> f64 {
        bytes / self.gen.host_bandwidth
    }

    /// Seconds to copy `bytes` over an IPU link.
    fn link(&self, bytes: f64) -> f64 {
        bytes / self.gen.ipu_link_bandwidth
    }

    /// Seconds to move `bytes` to or from Streaming Memory.
    fn stream(&self, bytes: f64) -> f64 {
        bytes / self.gen.streaming_bandwidth
    }

    /// Seconds of one sync across IPUs.
    fn ipu_sync(&self) -> f64 {
        self.gen.ipu_sync_cycles / self.gen.clock_hz
    }
}

/// What the time model reads beside the graph and options: the samples in one micro-batch,
/// and the replicas each weight's gradient is reduced across (its replica group, by
/// parameter name; a weight not named: every replica).
pub struct Shape<'a> {
    pub micro_batch_size: usize,
    pub weight_replicas: &'a BTreeMap<String, usize>,
}

/// Builds the time model of a placed program, in passes: its [`costs`], the program laid
/// out per IPU for the strategy ([`pipeline_steps`], [`phases`] or [`stages_in_turn`]),
/// then [`outputs_and_update`].
pub fn time(
    g: &Graph,
    place: &Placement,
    opts: &Options,
    gen: &Generation,
    pipeline: Option<&Pipeline>,
    transfers: &[Transfer],
    shape: &Shape,
) -> Time {
    let micro_batch_size = shape.micro_batch_size;
    let nipus = place.ipus_per_replica.max(1);
    let c = Ctx {
        place,
        opts,
        gen,
        nipus,
        training: place.training,
        ns: place.stages.len(),
        costs: costs(g, place, opts, gen, transfers, shape.weight_replicas),
    };
    let mut b = Builder { ipus: (0..nipus).map(|ipu| IpuTime { ipu, ..IpuTime::default() }).collect() };
    let (t, iterations_per_step, mbs) = match (&opts.execution_strategy, pipeline) {
        (ExecutionStrategy::Pipelined(_), Some(p)) => pipeline_steps(&c, &mut b, p),
        (ExecutionStrategy::SerialPhased(ph) | ExecutionStrategy::ParallelPhased(ph), _) => phases(&c, &mut b, ph),
        _ => stages_in_turn(&c, &mut b),
    };
    let t = outputs_and_update(&c, &mut b, t, mbs);
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
    }
}

/// The work of a placed program: per execution stage the work of one micro-batch
/// (optimizer updates apart, recomputation added), host input bytes, bytes copied out to
/// other IPUs and Streaming Memory bytes; per IPU the weight update and its Streaming
/// Memory traffic.
fn costs(
    g: &Graph,
    place: &Placement,
    opts: &Options,
    gen: &Generation,
    transfers: &[Transfer],
    weight_replicas: &BTreeMap<String, usize>,
) -> Costs {
    let nipus = place.ipus_per_replica.max(1);
    let training = place.training;
    let mut cm = CostModel::new(gen);
    let ns = place.stages.len();
    // Per execution stage: work per micro-batch (optimizer updates apart), host input bytes,
    // bytes copied out to other IPUs, Streaming Memory bytes.
    let mut stage_cost = vec![Cost::default(); ns];
    // What a backward stage recomputes of its forward stage: every forward op but the
    // checkpoints (`recomputationCheckpoint`), whose outputs are stashed.
    let mut recompute_cost = vec![Cost::default(); ns];
    let mut update_cost = vec![Cost::default(); nipus];
    let replicas = opts.replication_factor.max(1);
    let mut reduce_bytes = vec![0f64; nipus];
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
            Op::OptimizerUpdate { param, .. } => {
                update_cost[np.ipu].add(cm.node(g, i));
                let gb = value_bytes(g.ty(node.inputs[0])) as f64;
                // A ring all-reduce over the k replicas that share the weight moves
                // 2(k-1)/k of its gradient through each IPU's links.
                let k = weight_replicas.get(param).copied().unwrap_or(replicas).clamp(1, replicas) as f64;
                reduce_bytes[np.ipu] += 2.0 * (k - 1.0) / k * gb;
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
            _ => {
                let mut cost = cm.node(g, i);
                if let Some((wanted, cap)) = dense_scratch(g, i, opts, gen.capacity_bytes(), np.ipu) {
                    cost.add(cm.partials(g, i, wanted, cap));
                }
                stage_cost[np.pipeline_stage].add(cost);
                if node.meta.pass == crate::ir::Pass::Forward && !node.meta.checkpoint {
                    recompute_cost[np.pipeline_stage].add(cost);
                }
            }
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
    let pipelined = matches!(opts.execution_strategy, ExecutionStrategy::Pipelined(_)) && nipus > 1;
    let recompute = training
        && matches!(opts.auto_recomputation, Recomputation::Pipeline | Recomputation::RecomputeAll)
        && pipelined;
    if recompute {
        let f = place.forward_stages;
        for (b, cost) in stage_cost.iter_mut().enumerate() {
            if place.stages[b].pass == StagePass::Backward && b + 1 < 2 * f {
                cost.add(recompute_cost[2 * f - 2 - b]);
            }
        }
    } else if training
        && matches!(opts.execution_strategy, ExecutionStrategy::Pipelined(_) | ExecutionStrategy::Sharded(_))
        && opts.auto_recomputation == Recomputation::RecomputeAll
    {
        // RecomputeAll on one stage: the backward pass on each IPU runs that IPU's forward
        // work again, but for the checkpoints.
        // (A stage of both passes recomputes its own forward work.)
        for (f, add) in recompute_cost.iter().enumerate() {
            let target = match place.stages[f].pass {
                StagePass::ForwardBackward => Some(f),
                StagePass::Forward => {
                    let ipu = place.stages[f].ipu;
                    (0..ns).find(|&b| place.stages[b].pass == StagePass::Backward && place.stages[b].ipu == ipu)
                }
                StagePass::Backward => None,
            };
            if let Some(b) = target {
                stage_cost[b].add(*add);
            }
        }
    }
    Costs {
        stage_cost,
        update_cost,
        reduce_bytes,
        input_bytes,
        last_ipu,
        copy_out,
        copy_ipus,
        stage_stream,
        update_stream,
        out_bytes,
    }
}

/// A pipeline over the micro-batches, step by step. Returns the end, the iterations per
/// step and the micro-batches per iteration.
fn pipeline_steps(c: &Ctx, b: &mut Builder, p: &Pipeline) -> (f64, usize, usize) {
    let Ctx { place, opts, nipus, training, ns, .. } = *c;
    let Costs { ref stage_cost, ref input_bytes, ref copy_out, ref copy_ipus, ref stage_stream, .. } = c.costs;
    // One pipeline over p.micro_batches: step st runs stage s on micro-batch st - s;
    // the steady steps (every stage busy) are identical.
    let m = p.micro_batches;
    let step = |b: &mut Builder, st: usize, t: f64, _: f64| -> f64 {
        let act: Vec<usize> = (0..ns).filter(|&s| st >= s && st - s < m).collect();
        let mut ends = vec![t; nipus];
        for &s in &act {
            let ipu = place.stages[s].ipu;
            let l = c.label(s);
            let mut e = ends[ipu];
            let inb = input_bytes[s] + stage_stream[s];
            if inb > 0.0 {
                let d = if input_bytes[s] > 0.0 { c.host(input_bytes[s]) } else { 0.0 } + c.stream(stage_stream[s]);
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
        let copy = act.iter().map(|&s| c.link(copy_out[s])).fold(0.0, f64::max);
        let involved: Vec<usize> = act.iter().flat_map(|&s| copy_ipus[s].iter().copied()).collect();
        let end = busiest + c.ipu_sync() + copy;
        for ipu in 0..nipus {
            let kind = if involved.contains(&ipu) { Kind::Copy } else { Kind::Sync };
            b.push(ipu, busiest, end, kind, &format!("pipeline step {st} copies"));
        }
        end
    };
    let t = lay_out(b, 0.0, p.steps(), p.ramp_up..p.ramp_up + p.steady, "pipeline step", step);
    // Inference pipelines over the device iterations; training over the accumulation.
    if training {
        (t, opts.device_iterations.max(1), m)
    } else {
        (t, 1, m)
    }
}

/// Phases in order, micro-batch by micro-batch (see [`pipeline_steps`] for the result).
fn phases(c: &Ctx, b: &mut Builder, ph: &PhasedExecution) -> (f64, usize, usize) {
    let Ctx { place, opts, nipus, training, ns, .. } = *c;
    let Costs { ref stage_cost, ref input_bytes, ref copy_out, ref stage_stream, .. } = c.costs;
    let micro_batches = if training { opts.training.gradient_accumulation.max(1) } else { 1 };
    // Phases in order, their stages in parallel. Parallel phases load the next phase
    // onto the other IPU group while this one computes; serial phases prefetch with
    // IO tiles, so only loads longer than the previous phase's compute show (none
    // hidden with OffChipAfterFwdNoOverlap). The micro-batches between the first
    // (nothing prefetched for it) and the last (it prefetches nothing) are identical.
    let parallel = matches!(opts.execution_strategy, ExecutionStrategy::ParallelPhased(_));
    let overlap = ph.liveness() != PhaseLiveness::OffChipAfterFwdNoOverlap;
    let phases = &place.phases;
    let io_of = |s: usize| c.stream(stage_stream[s]) + c.host(input_bytes[s]);
    let mut loaded_at = vec![f64::NAN; ns]; // parallel: when a stage's loads are done
    let mut prev_compute = vec![0.0f64; nipus];
    let micro_batch = |b: &mut Builder, mb: usize, mut t: f64, skipped: f64| -> f64 {
        for x in loaded_at.iter_mut() {
            *x += skipped;
        }
        for (j, phase) in phases.iter().enumerate() {
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
                let e = b.work(ipu, start, stage_cost[s], &c.label(s));
                compute[ipu] = stage_cost[s].total();
                end = end.max(e);
            }
            if parallel {
                // The next phase's group loads while this one computes.
                let next = match phases.get(j + 1) {
                    Some(n) => Some(n),
                    None if mb + 1 < micro_batches => phases.first(),
                    None => None,
                };
                if let Some(next) = next {
                    for &s in &next.stages {
                        let ipu = place.stages[s].ipu;
                        let from = t.max(b.lane_end(ipu));
                        b.push(ipu, from, from + io_of(s), Kind::Stream, &format!("phase {} loads", next.id));
                        loaded_at[s] = from + io_of(s);
                    }
                }
            }
            let copy = phase.stages.iter().map(|&s| c.link(copy_out[s])).fold(0.0, f64::max);
            for ipu in 0..nipus {
                b.push(ipu, b.lane_end(ipu).max(t), end, Kind::Idle, "waiting for the phase to end");
                let from = b.lane_end(ipu).max(end);
                let kind = if copy > 0.0 { Kind::Copy } else { Kind::Sync };
                b.push(ipu, from, end + c.ipu_sync() + copy, kind, &format!("end of phase {}", phase.id));
            }
            prev_compute = compute;
            t = end + c.ipu_sync() + copy;
            // Loads that outlast the phase delay the next one.
            t = t.max((0..nipus).map(|q| b.lane_end(q)).fold(t, f64::max));
        }
        t
    };
    let t = lay_out(b, 0.0, micro_batches, 1..micro_batches - 1, "micro-batch", micro_batch);
    (t, opts.device_iterations.max(1), micro_batches)
}

/// Sharded or one IPU: stages one after another (see [`pipeline_steps`] for the result).
fn stages_in_turn(c: &Ctx, b: &mut Builder) -> (f64, usize, usize) {
    let Ctx { place, opts, nipus, training, ns, .. } = *c;
    let Costs { ref stage_cost, ref input_bytes, ref copy_out, ref copy_ipus, ref stage_stream, .. } = c.costs;
    let micro_batches = if training { opts.training.gradient_accumulation.max(1) } else { 1 };
    // Sharded or one IPU: stages one after another, every micro-batch alike.
    let micro_batch = |b: &mut Builder, _: usize, mut t: f64, _: f64| -> f64 {
        for s in 0..ns {
            let ipu = place.stages[s].ipu;
            let l = c.label(s);
            let io = c.host(input_bytes[s]) + c.stream(stage_stream[s]);
            b.push(ipu, t, t + io, Kind::Stream, &l);
            let e = b.work(ipu, t + io, stage_cost[s], &l);
            for other in 0..nipus {
                if other != ipu {
                    b.push(other, t, e, Kind::Idle, "another IPU's stage runs");
                }
            }
            t = e;
            if copy_out[s] > 0.0 {
                let d = c.ipu_sync() + c.link(copy_out[s]);
                for ipu in 0..nipus {
                    let kind = if copy_ipus[s].contains(&ipu) { Kind::Copy } else { Kind::Idle };
                    b.push(ipu, t, t + d, kind, &format!("copies after stage {s}"));
                }
                t += d;
            }
        }
        t
    };
    let t = lay_out(b, 0.0, micro_batches, 0..micro_batches, "micro-batch", micro_batch);
    (t, opts.device_iterations.max(1), micro_batches)
}

/// Outputs to the host after the program, then (training) the all-reduce across replicas
/// and the weight updates; every lane filled to the end. Returns the iteration's end.
fn outputs_and_update(c: &Ctx, b: &mut Builder, t: f64, mbs: usize) -> f64 {
    let Ctx { opts, nipus, training, .. } = *c;
    let Costs { ref update_cost, ref reduce_bytes, last_ipu, ref update_stream, out_bytes, .. } = c.costs;
    let mut t = t;
    // Outputs to the host, then (training) the all-reduce across replicas and the updates.
    // outputMode: All returns every micro-batch's outputs, EveryN every N-th, Final and Sum one.
    let returned = match opts.resolved_output_mode(training) {
        OutputMode::All => mbs,
        OutputMode::EveryN => mbs.div_ceil(opts.output_return_period.unwrap_or(1).max(1)),
        _ => 1,
    };
    let outs = out_bytes * returned as f64;
    if outs > 0.0 {
        let d = c.host(outs);
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
        // Weights shared by no other replica (replica grouping `NoGrouping`) reduce nothing.
        let reduce = match reduce_bytes.iter().copied().fold(0.0, f64::max) {
            0.0 => 0.0,
            bytes => c.link(bytes) + c.ipu_sync(),
        };
        let mut end = t;
        for (ipu, &cost) in update_cost.iter().enumerate() {
            let mut e = t;
            if reduce > 0.0 {
                b.push(ipu, e, e + reduce, Kind::Copy, "gradient all-reduce across replicas");
                e += reduce;
            }
            if update_stream[ipu] > 0.0 {
                let d = c.stream(update_stream[ipu]);
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
    for ipu in 0..nipus {
        b.push(ipu, b.lane_end(ipu), t, Kind::Idle, "idle");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{DType, Tensor};
    use crate::trace::{Tracer, Var};
    use std::rc::Rc;

    /// A linear [8,16]·[4,16]ᵀ (2·8·16·4 FLOPs), then inside an invertible region a
    /// matrix product [8,4]·[4,4] (2·8·4·4) and a relu (not dense): the region's product
    /// counts once per node that runs its body.
    #[test]
    fn dense_flops_counts_the_products_and_their_sub_graphs() {
        let tr = Tracer::new();
        let x = tr.input("x", &[8, 16], DType::Float32).unwrap();
        let w = tr.param("w", Rc::new(Tensor::zeros(&[4, 16], DType::Float32))).unwrap();
        let m = tr.param("m", Rc::new(Tensor::zeros(&[4, 4], DType::Float32))).unwrap();
        let z = tr.input("z", &[8, 4], DType::Float32).unwrap();
        let h = x.linear(&w, None).unwrap();
        // y = h + relu(z·m), inverted by h = y − relu(z·m).
        let f = |o: &[Var]| o[0].matmul(&o[1])?.relu();
        let y = tr.invertible("rev", &h, &[&z, &m], |x, o| x.add(&f(o)?), |y, o| y.sub(&f(o)?)).unwrap();
        let t = tr.finish(&[&y]).unwrap();
        let by_op = dense_flops(&t.graph);
        assert_eq!(by_op.len(), 2, "{by_op:?}");
        assert_eq!(by_op["linear"], 2.0 * (8 * 16 * 4) as f64);
        assert_eq!(by_op["matmul"], 2.0 * (8 * 4 * 4) as f64);
    }
}
