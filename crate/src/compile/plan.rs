//! The `Plan`: everything the planner decides, as one serializable value, and [`plan`],
//! the entry point.
//!
//! JSON (camelCase), the contract the page draws from:
//! ```text
//! { valid, fits, training, strategy: "pipelined"|"sharded"|"serial_phased"|"parallel_phased",
//!   options: {...Options, outputMode and TensorLocations resolved...},
//!   generation: {name, chip, tiles, bytesPerTile, clockHz, …, sources: [[field, source]]},
//!   ipusUsed, ipusReserved, ipusPerReplica, replicas, numNodes,
//!   program: {op: [..], ops: [names], scope: [..], scopes: [names], pass: [0|1|2 ..],
//!             names: {"<node>": placeholder or constant name}},
//!   blocks: [{id, kind: "scoped"|"begin"|null, ipu, stage, phase|null, firstNode, lastNode, nodes}],
//!   stages: [{id, ipu, blocks, pass: "forward"|"forward_backward"|"backward", phase|null}],
//!   phases: [{id, ipus, stages, pass}],
//!   placement: {ipu: [..], stage: [..], phase: [..|null], pipelineStage: [..], block: [..]},
//!   copies: [{value, fromIpu, toIpu, bytes, node}],
//!   pipeline: null | {stages, microBatches, rampUp, steady, rampDown, truncated,
//!                     schedule: [{step, stage, ipu, microBatch, pass}]},
//!   memory: {capacityBytes, ipus: [{ipu, alwaysLive: {code, exchange, weights, optimizer,
//!            accumulators, buffers}, steps: {node: [..], activations: [..], stash: [..],
//!            gradients: [..], temporaries: [..], loaded: [..], streaming: [..]},
//!            programSteps, peak: {node, activations, …}, peakBytes, peakStep,
//!            livePeakBytes, fits, largest: [{name, bytes, class}], tiles: [..], maxTileBytes}],
//!            values: {value: [..], node: [..], ipu: [..], class: [..], bytes: [..],
//!                     birth: [..], death: [..]}},   // class: activation | gradient | loaded
//!   time: {stepTimeS, iterationTimeS, iterationsPerStep, microBatchesPerIteration,
//!          microBatchSize, samplesPerStep, throughput,
//!          ipus: [{ipu, busy: {kind: seconds}, intervals: [{start, end, kind, label,
//!                  repeat?: {count, unit, periodS, busy: {kind: seconds}}}]}]},
//!   warnings: [{code, message, fix, node}], errors: [{code, message, fix, node|null}] }
//! ```
//! Changes from the first draft of the contract, to keep a 1,000-layer RevGNN training plan
//! (22,000 nodes on 8 IPUs) near 1 MB of JSON:
//! * `placement`, `memory.ipus[].steps` and `memory.values` are one array per field
//!   (flat numeric arrays) instead of one object per entry;
//! * steps carry no label and values no name: `program` names every node once (op, scope,
//!   pass, placeholder name), by node index;
//! * `memory.ipus[].steps` lists at most [`super::memory::MAX_STEPS`] steps per IPU (the
//!   largest of each stretch of the program, so the peak is always there; `programSteps`
//!   says how many there were, `peak` is the peak step in full);
//! * timeline intervals of the same kind and label that touch are merged, and a long run
//!   of identical units (micro-batches, steady pipeline steps) is listed as its first and
//!   last few units with one `kind: "elided"` interval per IPU between them, whose `repeat`
//!   says how many units of how long it stands for ([`super::time`]); nothing is cut.
//!
//! Additions: `steps.loaded` (tensors brought back from Streaming Memory), `livePeakBytes`
//! (the executor's quantity), `maxTileBytes`, `time.busy`, `stages[].phase`,
//! `blocks[].kind` (the annotation that started the block; `null` for the implicit block of
//! the ops before the first one). Byte counts are 64-bit integers (exact in JSON and in a
//! JavaScript number up to 2^53).
//! Node indices refer to the planned program: the given graph with its optimizer updates
//! moved early (a training graph from `autograd::training_graph`); the forward graph's
//! nodes keep their indices in it.
//!
//! `valid` is false when PopTorch would reject the configuration (the `errors` say why);
//! `fits` is true when the plan is valid and every IPU fits. A plan that does not fit is
//! still a plan: its `out_of_memory` errors name the IPU, the need, the capacity and the
//! largest tensors.

use super::error::Diagnostic;
use super::hardware::Generation;
use super::memory::{human, memory, node_label, Memory};
use super::options::{Options, TensorClass};
use super::placement::{place, BlockInfo, IpuCopy, PhaseInfo, Placement, StageInfo};
use super::schedule::{updates_early, Pipeline};
use super::strategy::ExecutionStrategy;
use super::time::{time, Shape, Time};
use crate::autograd::{training_graph, TrainOptions};
use crate::ir::liveness::liveness;
use crate::ir::OptimizerStep;
use crate::ir::{Graph, InputKind, Op};
use crate::Error;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The placement side table, one array per field, indexed by node.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementTable {
    pub ipu: Vec<usize>,
    pub stage: Vec<usize>,
    pub phase: Vec<Option<usize>>,
    pub pipeline_stage: Vec<usize>,
    /// Index into `blocks`.
    pub block: Vec<usize>,
}

/// The planned program, one array per field (index = node), so that the page can name
/// nodes the forward graph it traced does not have (backward and optimizer nodes).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgramInfo {
    /// Index into `ops` (op names: `linear`, `invertible_backward`, …).
    pub op: Vec<u16>,
    pub ops: Vec<&'static str>,
    /// Index into `scopes`.
    pub scope: Vec<u32>,
    pub scopes: Vec<String>,
    /// 0 forward, 1 backward, 2 optimizer.
    pub pass: Vec<u8>,
    /// Names of the placeholders and constants, by node index (as a string key).
    pub names: std::collections::BTreeMap<usize, String>,
}

impl ProgramInfo {
    fn of(g: &Graph) -> ProgramInfo {
        let mut p = ProgramInfo::default();
        let mut scopes: std::collections::HashMap<&str, u32> = Default::default();
        let mut ops: std::collections::HashMap<&'static str, u16> = Default::default();
        for (i, n) in g.nodes.iter().enumerate() {
            let next = ops.len() as u16;
            p.op.push(*ops.entry(n.op.name()).or_insert_with(|| {
                p.ops.push(n.op.name());
                next
            }));
            let next = scopes.len() as u32;
            p.scope.push(*scopes.entry(n.meta.scope.as_str()).or_insert_with(|| {
                p.scopes.push(n.meta.scope.clone());
                next
            }));
            p.pass.push(match n.meta.pass {
                crate::ir::Pass::Forward => 0,
                crate::ir::Pass::Backward => 1,
                crate::ir::Pass::Optimizer => 2,
            });
            if let Op::Placeholder { name, .. } | Op::Constant { name, .. } = &n.op {
                p.names.insert(i, name.clone());
            }
        }
        p
    }
}

/// How long planning took, when timed (`plan_json_timed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanTimings {
    /// Building the training graph (0 for inference).
    pub training_graph_ms: f64,
    /// Placement, schedule, memory and time.
    pub plan_ms: f64,
}

/// Everything the planner decided.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub valid: bool,
    pub fits: bool,
    pub training: bool,
    pub strategy: &'static str,
    pub options: Options,
    pub generation: Generation,
    pub ipus_used: usize,
    pub ipus_reserved: usize,
    pub ipus_per_replica: usize,
    pub replicas: usize,
    pub num_nodes: usize,
    pub program: ProgramInfo,
    pub blocks: Vec<BlockInfo>,
    pub stages: Vec<StageInfo>,
    pub phases: Vec<PhaseInfo>,
    pub placement: PlacementTable,
    pub copies: Vec<IpuCopy>,
    pub pipeline: Option<Pipeline>,
    pub memory: Memory,
    pub time: Time,
    pub warnings: Vec<Diagnostic>,
    pub errors: Vec<Diagnostic>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<PlanTimings>,
    /// The planned program (node indices of the plan refer to it).
    #[serde(skip)]
    pub graph: Graph,
}

/// What the graph does not say.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlanSettings {
    /// Samples in one micro-batch (the traced batch); by default dim 0 of the first model
    /// input (1 for a scalar input or none).
    pub micro_batch_size: Option<usize>,
    /// The replicas a weight's gradient is reduced across, by parameter name: the size of
    /// its replica group (PopTorch's `replicaGrouping`: 1 for `NoGrouping`, the group size
    /// for `Consecutive`/`Orthogonal`). A weight not named is shared by every replica.
    pub weight_replicas: BTreeMap<String, usize>,
}

/// The optimizer a training plan assumes (its state is always-live memory).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OptimizerChoice {
    /// `torch.optim.SGD` without momentum: PopTorch's default (`SGD(lr=0.01)`), no state.
    #[default]
    Sgd,
    /// SGD with momentum: one state tensor per parameter.
    SgdMomentum,
    /// Adam: two state tensors per parameter.
    Adam,
    /// AdamW: two state tensors per parameter.
    AdamW,
}

impl OptimizerChoice {
    pub fn step(self) -> OptimizerStep {
        match self {
            OptimizerChoice::Sgd => OptimizerStep::sgd(0.01, 0.0, 0.0),
            OptimizerChoice::SgdMomentum => OptimizerStep::sgd(0.01, 0.9, 0.0),
            OptimizerChoice::Adam => OptimizerStep::adam(1e-3, 0.9, 0.999, 1e-8, 0.0, false),
            OptimizerChoice::AdamW => OptimizerStep::adam(1e-3, 0.9, 0.999, 1e-8, 0.01, true),
        }
    }
}

/// What to plan, besides the graph and the options (the JavaScript `plan`'s third
/// argument): `{training, loss, optimizer, microBatchSize}`, every key optional.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PlanRequest {
    /// Plan the training step (`trainingModel`): differentiate the forward graph for the
    /// loss output and add the optimizer's updates. Otherwise plan inference.
    pub training: bool,
    /// Which graph output is the loss (a float scalar).
    pub loss: usize,
    pub optimizer: OptimizerChoice,
    /// Samples per micro-batch (default: dim 0 of the first model input).
    pub micro_batch_size: Option<usize>,
}

impl PlanRequest {
    /// Parses the request's JSON (an object; unknown keys are rejected by name).
    pub fn from_json(json: &str) -> crate::Result<PlanRequest> {
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| Error::plan(format!("plan settings: {e}")))?;
        if !v.is_object() {
            return Err(Error::plan(format!(
                "plan settings must be an object like {{training: true, loss: 0}}, got {}",
                crate::error::brief(&v, 80)
            )));
        }
        serde_json::from_value(v).map_err(|e| Error::plan(format!("plan settings: {e}")))
    }
}

/// Plans a traced forward graph as `req` asks: for training, its training graph first
/// (`autograd::training_graph` with the optimizer's updates). An error means there is
/// nothing to plan (no scalar loss, no trainable parameter); everything PopTorch would
/// reject is in the plan's `errors`.
pub fn plan_request(forward: &Graph, options: &Options, req: &PlanRequest) -> crate::Result<Plan> {
    let training = training_graph_for(forward, req)?;
    let settings = PlanSettings { micro_batch_size: req.micro_batch_size, ..PlanSettings::default() };
    Ok(plan_with(training.as_ref().unwrap_or(forward), options, &settings))
}

/// The training graph `req` asks for (`None`: plan the forward graph).
fn training_graph_for(forward: &Graph, req: &PlanRequest) -> crate::Result<Option<Graph>> {
    if !req.training {
        return Ok(None);
    }
    let opts = TrainOptions { optimizer: Some(req.optimizer.step()), ..TrainOptions::default() };
    let tg = training_graph(forward, req.loss, &opts).map_err(|e| e.context("cannot plan training"))?;
    Ok(Some(tg.graph))
}

/// [`plan_request`] from JSON (what the JavaScript `plan` receives): options that do not
/// parse become an `options_json` error in the plan (planned with the defaults), so the
/// page can show it in place; settings that do not parse are an error.
pub fn plan_json(forward: &Graph, options_json: Option<&str>, request_json: Option<&str>) -> crate::Result<Plan> {
    plan_json_timed(forward, options_json, request_json, &|| 0.0)
}

/// [`plan_json`], timing its parts with `clock` (milliseconds; the JavaScript API passes
/// `performance.now`): the plan's `timings`.
pub fn plan_json_timed(
    forward: &Graph,
    options_json: Option<&str>,
    request_json: Option<&str>,
    clock: &dyn Fn() -> f64,
) -> crate::Result<Plan> {
    let (options, problems) = match options_json {
        Some(j) => Options::from_json_lenient(j),
        None => (Options::new(), Vec::new()),
    };
    plan_options_timed(forward, &options, problems, request_json, clock)
}

/// [`plan_json_timed`] for options already parsed (a `poptorch.Options` the caller built:
/// nothing is parsed again), with `problems` found while parsing them as the plan's first
/// errors.
pub fn plan_options_timed(
    forward: &Graph,
    options: &Options,
    problems: Vec<Diagnostic>,
    request_json: Option<&str>,
    clock: &dyn Fn() -> f64,
) -> crate::Result<Plan> {
    let req = match request_json {
        Some(j) => PlanRequest::from_json(j)?,
        None => PlanRequest::default(),
    };
    let t0 = clock();
    let settings = PlanSettings { micro_batch_size: req.micro_batch_size, ..PlanSettings::default() };
    let graph = training_graph_for(forward, &req)?;
    let t1 = clock();
    let mut p = plan_with(graph.as_ref().unwrap_or(forward), options, &settings);
    p.timings = Some(PlanTimings { training_graph_ms: t1 - t0, plan_ms: clock() - t1 });
    if !problems.is_empty() {
        p.errors.splice(0..0, problems);
        p.valid = false;
        p.fits = false;
    }
    Ok(p)
}

/// Error codes that say the plan does not fit, rather than that it is invalid.
const FIT_CODES: &[&str] = &["out_of_memory"];

/// Plans `graph` (a traced forward graph, or a training graph from
/// `autograd::training_graph`) under `options`.
pub fn plan(graph: &Graph, options: &Options) -> Plan {
    plan_with(graph, options, &PlanSettings::default())
}

/// [`plan`] with settings.
pub fn plan_with(graph: &Graph, options: &Options, settings: &PlanSettings) -> Plan {
    let mut errors: Vec<Diagnostic> = options.validate();
    let mut warnings: Vec<Diagnostic> = Vec::new();
    let gen = options.ipu_generation.spec();
    // The program: optimizer updates right after their gradient's last use (PopART's order).
    let program = if graph.nodes.iter().any(|n| matches!(n.op, Op::OptimizerUpdate { .. })) {
        match updates_early(graph) {
            Ok(g) => g,
            Err(e) => {
                errors.push(Diagnostic::new(
                    "schedule",
                    e.to_string(),
                    "Report this graph: scheduling should not fail.",
                ));
                graph.clone()
            }
        }
    } else {
        graph.clone()
    };
    crate::progress::step();
    let placement = place(&program, options);
    crate::progress::step();
    errors.extend(placement.errors.iter().cloned());
    warnings.extend(placement.warnings.iter().cloned());
    let training = placement.training;
    // A fatal IPU count stops planning here, before any table per IPU (memory, tiles,
    // timeline) is built: the count may be anything up to 2^64, and no such plan can run.
    if placement.errors.iter().any(|e| FATAL_CODES.contains(&e.code)) {
        let memory = Memory { capacity_bytes: gen.capacity_bytes(), ..Memory::default() };
        return assemble(program, options, gen, placement, None, memory, Time::default(), errors, warnings);
    }
    let life = liveness(&program);
    check_modes(&program, options, &placement, &mut errors, &mut warnings);
    let pipeline = match options.execution_strategy {
        ExecutionStrategy::Pipelined(_) if placement.ipus_per_replica > 1 => {
            let m = if training { options.training.gradient_accumulation } else { options.device_iterations };
            let ipus: Vec<usize> = placement.stages.iter().map(|s| s.ipu).collect();
            let passes: Vec<_> = placement.stages.iter().map(|s| s.pass).collect();
            Some(Pipeline::new(m.max(1), &ipus, &passes))
        }
        _ => None,
    };
    crate::progress::step();
    let (mem, mem_errors, mem_warnings) = memory(&program, &placement, options, &gen, &life);
    crate::progress::step();
    errors.extend(mem_errors);
    warnings.extend(mem_warnings);
    let micro_batch = settings.micro_batch_size.unwrap_or_else(|| {
        program
            .placeholders(InputKind::Input)
            .first()
            .and_then(|(_, v)| program.ty(*v).shape.first().copied())
            .unwrap_or(1)
    });
    let shape = Shape { micro_batch_size: micro_batch, weight_replicas: &settings.weight_replicas };
    let time = time(&program, &placement, options, &gen, pipeline.as_ref(), &mem.transfers, &shape);
    crate::progress::step();
    assemble(program, options, gen, placement, pipeline, mem, time, errors, warnings)
}

/// Errors after which planning stops: the tables per IPU would be sized by a count that
/// no process can have (more than the generation's `max_ipus`).
const FATAL_CODES: &[&str] = &["too_many_ipus"];

/// The plan from its parts.
#[allow(clippy::too_many_arguments)]
fn assemble(
    program: Graph,
    options: &Options,
    gen: Generation,
    placement: Placement,
    pipeline: Option<Pipeline>,
    mem: Memory,
    time: Time,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
) -> Plan {
    let training = placement.training;
    let valid = errors.iter().all(|e| FIT_CODES.contains(&e.code));
    let fits = valid && mem.ipus.iter().all(|m| m.fits);
    let Placement { blocks, stages, phases, nodes, copies, ipus_used, ipus_reserved, ipus_per_replica, .. } = placement;
    Plan {
        valid,
        fits,
        training,
        strategy: options.execution_strategy.name(),
        options: resolved(options, training),
        generation: gen,
        ipus_used,
        ipus_reserved,
        ipus_per_replica,
        replicas: options.replication_factor,
        num_nodes: program.nodes.len(),
        program: ProgramInfo::of(&program),
        blocks,
        stages,
        phases,
        placement: PlacementTable {
            ipu: nodes.iter().map(|n| n.ipu).collect(),
            stage: nodes.iter().map(|n| n.stage).collect(),
            phase: nodes.iter().map(|n| n.phase).collect(),
            pipeline_stage: nodes.iter().map(|n| n.pipeline_stage).collect(),
            block: nodes.iter().map(|n| n.block).collect(),
        },
        copies,
        pipeline,
        memory: mem,
        time,
        warnings,
        errors,
        timings: None,
        graph: program,
    }
}

/// The options as the plan applies them: the output mode and every tensor location
/// resolved from the defaults (phased execution puts all four classes in Streaming Memory).
fn resolved(o: &Options, training: bool) -> Options {
    let mut r = o.clone();
    r.output_mode = o.resolved_output_mode(training);
    let t = &mut r.tensor_locations;
    t.activation = Some(o.location(TensorClass::Activation));
    t.weight = Some(o.location(TensorClass::Weight));
    t.optimizer = Some(o.location(TensorClass::Optimizer));
    t.accumulator = Some(o.location(TensorClass::Accumulator));
    r
}

/// The checks that depend on the mode (training or inference) and the strategy.
fn check_modes(g: &Graph, o: &Options, p: &Placement, errors: &mut Vec<Diagnostic>, warnings: &mut Vec<Diagnostic>) {
    let pipelined = matches!(o.execution_strategy, ExecutionStrategy::Pipelined(_)) && p.ipus_per_replica > 1;
    let stages = p.stages.len();
    if !p.training {
        if o.training.gradient_accumulation > 1 {
            let mut message = format!(
                "Training.gradientAccumulation is {} but an inference model needs it to be 1 (its default): \
                 there are no gradients to accumulate.",
                o.training.gradient_accumulation
            );
            if matches!(o.execution_strategy, ExecutionStrategy::Pipelined(_)) {
                message.push_str(" Pipelined inference fills the pipeline with deviceIterations instead.");
            }
            errors.push(Diagnostic::new(
                "inference_gradient_accumulation",
                message,
                "Set poptorch.Options().Training.gradientAccumulation to 1 (or leave it), and raise deviceIterations \
                 to process enough batches per run.",
            ).on("Training.gradientAccumulation"));
        }
        if o.training.automatic_loss_scaling {
            warnings.push(
                Diagnostic::new(
                    "inference_training_options",
                    "Training.setAutomaticLossScaling is set on an inference model, where it has no effect: Training \
                 options must not be set for inference models.",
                    "Unset it, or plan a training model.",
                )
                .on("Training.automaticLossScaling"),
            );
        }
        if pipelined && o.device_iterations < stages {
            errors.push(
                Diagnostic::new(
                    "pipeline_device_iterations",
                    format!(
                    "deviceIterations ({}) must be greater than or equal to the number of pipeline stages ({stages}) \
                     when using PipelinedExecution.",
                    o.device_iterations
                ),
                    format!("Set poptorch.Options().deviceIterations({stages}) or more, or use fewer IPUs."),
                )
                .on("deviceIterations"),
            );
        }
    } else if pipelined && o.training.gradient_accumulation < stages {
        errors.push(
            Diagnostic::new(
                "pipeline_gradient_accumulation",
                format!(
                "Training.gradientAccumulation ({}) must be greater than or equal to the number of pipeline stages \
                 ({stages}) when using PipelinedExecution. Note that a model with {} pipeline stages has {} more \
                 stages when training.",
                o.training.gradient_accumulation,
                stages.div_ceil(2),
                stages / 2
            ),
                format!("Set poptorch.Options().Training.gradientAccumulation({stages}) or more."),
            )
            .on("Training.gradientAccumulation"),
        );
    }
    if o.replication_factor > 1
        && o.broadcast_buffers
        && g.nodes.iter().any(|n| matches!(n.op, Op::BufferUpdate { .. }))
    {
        errors.push(Diagnostic::new(
            "broadcast_buffers",
            "The model updates a buffer in place with several replicas, but buffers are broadcast from one \
             replica by default, which PopTorch does not support for buffers that change.",
            "If the model tolerates buffers drifting apart between replicas, set poptorch.Options().broadcastBuffers(False).",
        ).on("broadcastBuffers"));
    }
    if o.replication_factor == 1 {
        for (class, name) in [
            (TensorClass::Activation, "activation"),
            (TensorClass::Weight, "weight"),
            (TensorClass::Optimizer, "optimizer"),
            (TensorClass::Accumulator, "accumulator"),
        ] {
            if o.location(class).use_replicated_tensor_sharding {
                warnings.push(Diagnostic::new(
                    "replicated_tensor_sharding_without_replicas",
                    format!("Replicated tensor sharding is set for {name} tensors but there is one replica: it has no effect."),
                    "Raise replicationFactor, or unset useReplicatedTensorSharding.",
                )
                .on(format!("TensorLocations.{name}.useReplicatedTensorSharding")));
            }
        }
    }
    if o.precision.enable_stochastic_rounding {
        // PopTorch records the option as it is; its documentation says what it does: float16
        // results are rounded up or down at random, recommended for training, not for
        // inference, where the results would not be deterministic.
        if !g.values.iter().any(|v| v.ty.dtype == crate::tensor::DType::Float16) {
            warnings.push(
                Diagnostic::new(
                    "stochastic_rounding_without_float16",
                    "Precision.enableStochasticRounding is set but the model has no float16 tensors: stochastic \
                     rounding applies to values rounded to float16, so it has no effect here.",
                    "Cast the model to float16 (model.half()), or unset enableStochasticRounding.",
                )
                .on("Precision.enableStochasticRounding"),
            );
        }
        if !p.training {
            warnings.push(
                Diagnostic::new(
                    "stochastic_rounding_inference",
                    "Precision.enableStochasticRounding is set on an inference model: its results are not \
                     deterministic (PopTorch recommends stochastic rounding for training, not inference).",
                    "Unset enableStochasticRounding for inference.",
                )
                .on("Precision.enableStochasticRounding"),
            );
        }
    }
    if pipelined && p.training && !g.nodes.iter().any(|n| matches!(n.op, Op::OptimizerUpdate { .. })) {
        warnings.push(Diagnostic::new(
            "no_optimizer",
            "The training graph has no optimizer updates: the plan counts no optimizer state.",
            "Build the training graph with an optimizer (TrainOptions.optimizer; PopTorch defaults to SGD lr 0.01).",
        ));
    }
}

impl Plan {
    /// The largest peak over IPUs.
    pub fn peak_bytes_max_ipu(&self) -> u64 {
        self.memory.ipus.iter().map(|m| m.peak_bytes).max().unwrap_or(0)
    }

    /// The plan's one-line result: `PLAN ipus_used=… ipus_reserved=… stages=… fits=…
    /// peak_bytes_max_ipu=… step_time_s=… throughput=…`.
    pub fn plan_line(&self) -> String {
        format!(
            "PLAN ipus_used={} ipus_reserved={} stages={} fits={} peak_bytes_max_ipu={} step_time_s={:.6e} throughput={:.3} valid={} strategy={}",
            self.ipus_used,
            self.ipus_reserved,
            self.stages.len(),
            self.fits,
            self.peak_bytes_max_ipu(),
            self.time.step_time_s,
            self.time.throughput,
            self.valid,
            self.strategy
        )
    }

    /// A text summary for people, ending with [`Plan::plan_line`].
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let g = &self.generation;
        s.push_str(&format!(
            "{} plan on {} ({} tiles x {} = {} per IPU), {} nodes\n",
            if self.training { "training" } else { "inference" },
            g.chip,
            g.tiles,
            human(g.bytes_per_tile as u64),
            human(g.capacity_bytes()),
            self.num_nodes
        ));
        s.push_str(&format!(
            "strategy {}: {} IPU(s) per replica x {} replica(s) = {} used, {} reserved\n",
            self.strategy, self.ipus_per_replica, self.replicas, self.ipus_used, self.ipus_reserved
        ));
        s.push_str("blocks:\n");
        for b in &self.blocks {
            let phase = b.phase.map(|p| format!(" phase {p}")).unwrap_or_default();
            s.push_str(&format!(
                "  {:<16} ipu {} stage {}{phase}  nodes {}..{} ({})\n",
                b.id, b.ipu, b.stage, b.first_node, b.last_node, b.nodes
            ));
        }
        s.push_str("stages:\n");
        for st in &self.stages {
            let phase = st.phase.map(|p| format!(" phase {p}")).unwrap_or_default();
            s.push_str(&format!("  {:>3} ipu {} {:?}{phase}: {}\n", st.id, st.ipu, st.pass, st.blocks.join(", ")));
        }
        if let Some(p) = &self.pipeline {
            s.push_str(&format!(
                "pipeline: {} stages, {} micro-batches: ramp-up {} steps, steady {}, ramp-down {}\n",
                p.stages, p.micro_batches, p.ramp_up, p.steady, p.ramp_down
            ));
        }
        if !self.copies.is_empty() {
            let bytes = self.copies.iter().map(|c| c.bytes).fold(0, u64::saturating_add);
            s.push_str(&format!("inter-IPU copies: {} ({} per micro-batch)\n", self.copies.len(), human(bytes)));
        }
        s.push_str("memory:\n");
        for m in &self.memory.ipus {
            let a = &m.always_live;
            s.push_str(&format!(
                "  IPU {}: peak {} of {} at step {} ({}); always live {} (code {}, weights {}, optimizer {}, accumulators {}); activations peak {}{}\n",
                m.ipu,
                human(m.peak_bytes),
                human(self.memory.capacity_bytes),
                m.peak_step,
                node_label(&self.graph, m.peak_step),
                human(a.total()),
                human(a.code),
                human(a.weights),
                human(a.optimizer),
                human(a.accumulators),
                human(m.live_peak_bytes),
                if m.fits { "" } else { "  DOES NOT FIT" }
            ));
        }
        let t = &self.time;
        s.push_str(&format!(
            "time: step {:.3} ms = {} iteration(s) of {:.3} ms ({} micro-batch(es) of {}), {} samples/step, {:.1} samples/s\n",
            t.step_time_s * 1e3,
            t.iterations_per_step,
            t.iteration_time_s * 1e3,
            t.micro_batches_per_iteration,
            t.micro_batch_size,
            t.samples_per_step,
            t.throughput
        ));
        for w in &self.warnings {
            s.push_str(&format!("warning [{}]: {}\n", w.code, w));
        }
        for e in &self.errors {
            s.push_str(&format!("error [{}]: {}\n", e.code, e));
        }
        s.push_str(&self.plan_line());
        s
    }

    /// The plan as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plans serialise")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;
    use crate::trace::Tracer;

    fn tiny() -> Graph {
        let tr = Tracer::new();
        let x = tr.input("x", &[4, 8], DType::Float32).unwrap();
        let w = tr.param("w", std::rc::Rc::new(crate::tensor::Tensor::zeros(&[8, 8], DType::Float32))).unwrap();
        let y = x.matmul(&w).unwrap().relu().unwrap().mean(&[], false).unwrap();
        tr.finish(&[&y]).unwrap().graph
    }

    #[test]
    fn options_json_entry_puts_bad_options_in_the_plan_and_rejects_bad_settings() {
        let g = tiny();
        let p = plan_json(&g, Some(r#"{"deviceIteration": 2}"#), None).unwrap();
        assert!(!p.valid && !p.fits);
        assert_eq!(p.errors[0].code, "options_json");
        assert!(p.errors[0].message.contains("deviceIteration"));
        let p = plan_json(&g, Some(r#"{"deviceIterations": 0}"#), None).unwrap();
        assert_eq!(p.errors.iter().map(|e| e.code).collect::<Vec<_>>(), ["options_not_positive"]);
        assert!(plan_json(&g, None, Some(r#"{"trainng": true}"#)).unwrap_err().to_string().contains("trainng"));
        assert!(plan_json(&g, None, Some("[]")).unwrap_err().to_string().contains("object"));
    }

    #[test]
    fn memory_training_requests_plan_the_training_graph_with_the_optimizers_state() {
        let g = tiny();
        let p = plan_json(&g, None, Some(r#"{"training": true, "optimizer": "adam"}"#)).unwrap();
        assert!(p.valid && p.training, "{:?}", p.errors);
        assert_eq!(p.memory.ipus[0].always_live.optimizer, 2 * 64 * 4);
        assert!(p.program.pass.contains(&2));
        let p = plan_json(&g, None, Some(r#"{"training": true}"#)).unwrap();
        assert_eq!(p.memory.ipus[0].always_live.optimizer, 0, "PopTorch's default SGD has no state");
        let p = plan_json(&g, None, None).unwrap();
        assert!(!p.training && p.valid);
        assert!(plan_json(&g, None, Some(r#"{"training": true, "loss": 3}"#))
            .unwrap_err()
            .to_string()
            .contains("no output 3"));
    }

    #[test]
    fn options_every_strategy_plans_degenerate_graphs_without_panicking() {
        let empty = Graph::new();
        let p = plan(&empty, &Options::new());
        assert!(p.valid && p.fits && p.num_nodes == 0);
        let tr = Tracer::new();
        let x = tr.input("x", &[3], DType::Float32).unwrap();
        let only_input = tr.finish(&[&x]).unwrap().graph;
        for strategy in ["pipelined", "sharded", "serial-phased", "parallel-phased"] {
            let mut o = Options::new();
            o.set_execution_strategy(crate::compile::ExecutionStrategy::parse(strategy).unwrap()).unwrap();
            let p = plan(&only_input, &o);
            assert_eq!(p.ipus_used, 1, "{strategy}");
            let _ = p.summary();
            let _ = p.to_json();
        }
    }

    #[test]
    fn timeline_the_plan_line_comes_last_in_the_summary() {
        let p = plan(&tiny(), &Options::new());
        let text = p.summary();
        let last = text.lines().last().unwrap();
        assert!(last.starts_with("PLAN ipus_used=1 ipus_reserved=1 stages=1 fits=true peak_bytes_max_ipu="), "{last}");
        for key in ["step_time_s=", "throughput="] {
            assert!(last.contains(key), "{last}");
        }
        let j: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        for key in ["valid", "fits", "placement", "memory", "time", "pipeline", "copies", "errors", "warnings"] {
            assert!(j.get(key).is_some(), "{key}");
        }
    }
}
