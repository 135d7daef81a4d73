//! What PopTorch adds around the model, as Python: the `poptorch.Options` set (every option
//! that differs from PopTorch's default, with PopTorch's own spelling: reference.md §A.1),
//! the execution strategy with its stages and phases, the optimizer with its parameter
//! groups and attributes (`poptorch.optim`, or `torch.optim` for the PyTorch form), and the
//! replica groupings of weights.

use super::python::{f32_lit, f64_lit, str_lit};
use crate::compile::options::{
    CommGroupType, MeanReductionStrategy, OutputMode, PartialsType, ReductionType, TensorLocationSettings,
};
use crate::compile::strategy::{AutoStage, ExecutionStrategy, PhaseLiveness, PhaseSpec, PipelinedExecution, StageSpec};
use crate::compile::Options;
use crate::poptorch::grouping::{ReplicaGrouping, VariableRetrievalMode};
use crate::poptorch::{Optimizer, OptimizerArgs, OptimizerType};
use crate::tensor::DType;
use crate::{Error, Result};

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

fn comm_group(t: CommGroupType) -> &'static str {
    match t {
        CommGroupType::All => "poptorch.CommGroupType.All",
        CommGroupType::Consecutive => "poptorch.CommGroupType.Consecutive",
        CommGroupType::Orthogonal => "poptorch.CommGroupType.Orthogonal",
        CommGroupType::NoGrouping => "poptorch.CommGroupType.NoGrouping",
    }
}

/// `opts = poptorch.Options()` and one statement per option that differs from the default.
pub fn options(o: &Options) -> Vec<String> {
    let d = Options::default();
    let mut out = vec!["opts = poptorch.Options()".to_string()];
    if o.device_iterations != d.device_iterations {
        out.push(format!("opts.deviceIterations({})", o.device_iterations));
    }
    if o.replication_factor != d.replication_factor {
        out.push(format!("opts.replicationFactor({})", o.replication_factor));
    }
    if o.input_replica_grouping != d.input_replica_grouping {
        let g = o.input_replica_grouping;
        out.push(format!("opts.inputReplicaGrouping({}, {})", g.size, comm_group(g.kind)));
    }
    if o.broadcast_buffers != d.broadcast_buffers {
        out.push(format!("opts.broadcastBuffers({})", py_bool(o.broadcast_buffers)));
    }
    if o.auto_round_num_ipus != d.auto_round_num_ipus {
        out.push(format!("opts.autoRoundNumIPUs({})", py_bool(o.auto_round_num_ipus)));
    }
    if o.execution_strategy != d.execution_strategy {
        out.push(format!("opts.setExecutionStrategy({})", strategy(&o.execution_strategy)));
    }
    if !o.available_memory_proportion.is_empty() {
        let items: Vec<String> =
            o.available_memory_proportion.iter().map(|(k, v)| format!("{}: {}", str_lit(k), f64_lit(*v))).collect();
        out.push(format!("opts.setAvailableMemoryProportion({{{}}})", items.join(", ")));
    }
    if o.output_mode != d.output_mode || o.output_return_period.is_some() {
        let mode = match o.output_mode {
            OutputMode::Final => "Final",
            OutputMode::EveryN => "EveryN",
            OutputMode::All => "All",
            OutputMode::Sum => "Sum",
            OutputMode::Default => "Default",
        };
        match o.output_return_period {
            Some(p) => out.push(format!("opts.outputMode(poptorch.OutputMode.{mode}, {p})")),
            None => out.push(format!("opts.outputMode(poptorch.OutputMode.{mode})")),
        }
    }
    if let Some(seed) = o.random_seed {
        out.push(format!("opts.randomSeed({seed})"));
    }
    let (t, dt) = (&o.training, &d.training);
    if t.gradient_accumulation != dt.gradient_accumulation {
        out.push(format!("opts.Training.gradientAccumulation({})", t.gradient_accumulation));
    }
    if t.accumulation_and_replication_reduction_type != dt.accumulation_and_replication_reduction_type {
        let r = match t.accumulation_and_replication_reduction_type {
            ReductionType::Sum => "Sum",
            ReductionType::Mean => "Mean",
            ReductionType::NoReduction => "NoReduction",
        };
        out.push(format!("opts.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.{r})"));
    }
    if t.mean_accumulation_and_replication_reduction_strategy != dt.mean_accumulation_and_replication_reduction_strategy
    {
        let s = match t.mean_accumulation_and_replication_reduction_strategy {
            MeanReductionStrategy::Running => "Running",
            MeanReductionStrategy::Post => "Post",
            MeanReductionStrategy::PostAndLoss => "PostAndLoss",
        };
        out.push(format!(
            "opts.Training.setMeanAccumulationAndReplicationReductionStrategy(poptorch.MeanReductionStrategy.{s})"
        ));
    }
    if t.automatic_loss_scaling != dt.automatic_loss_scaling {
        out.push(format!("opts.Training.setAutomaticLossScaling({})", py_bool(t.automatic_loss_scaling)));
    }
    let (p, dp) = (&o.precision, &d.precision);
    if p.partials_type != dp.partials_type {
        let ty = match p.partials_type {
            PartialsType::Float => "torch.float",
            PartialsType::Half => "torch.half",
        };
        out.push(format!("opts.Precision.setPartialsType({ty})"));
    }
    if p.enable_stochastic_rounding != dp.enable_stochastic_rounding {
        out.push(format!("opts.Precision.enableStochasticRounding({})", py_bool(p.enable_stochastic_rounding)));
    }
    if p.enable_floating_point_exceptions != dp.enable_floating_point_exceptions {
        out.push(format!(
            "opts.Precision.enableFloatingPointExceptions({})",
            py_bool(p.enable_floating_point_exceptions)
        ));
    }
    let tl = &o.tensor_locations;
    if let Some(n) = tl.num_io_tiles {
        out.push(format!("opts.TensorLocations.numIOTiles({n})"));
    }
    for (setter, loc) in [
        ("setActivationLocation", &tl.activation),
        ("setWeightLocation", &tl.weight),
        ("setOptimizerLocation", &tl.optimizer),
        ("setAccumulatorLocation", &tl.accumulator),
    ] {
        if let Some(s) = loc {
            out.push(format!("opts.TensorLocations.{setter}({})", location(s)));
        }
    }
    if o.ipu_generation != d.ipu_generation {
        out.push(format!(
            "# Planned for IPU generation {:?} (the system the script runs on decides).",
            o.ipu_generation
        ));
    }
    if o.auto_recomputation != d.auto_recomputation {
        let (n, name) = o.auto_recomputation.popart();
        out.push(format!("opts._Popart.set(\"autoRecomputation\", {n})  # popart.RecomputationType.{name}"));
    }
    out
}

/// `poptorch.TensorLocationSettings()` with its builder calls.
fn location(s: &TensorLocationSettings) -> String {
    let d = TensorLocationSettings::default();
    let mut e = "poptorch.TensorLocationSettings()".to_string();
    if let Some(on) = s.use_on_chip_storage {
        e.push_str(&format!(".useOnChipStorage({})", py_bool(on)));
    }
    if s.use_replicated_tensor_sharding != d.use_replicated_tensor_sharding {
        e.push_str(&format!(".useReplicatedTensorSharding({})", py_bool(s.use_replicated_tensor_sharding)));
    }
    if s.min_elements_for_off_chip != d.min_elements_for_off_chip {
        e.push_str(&format!(".minElementsForOffChip({})", s.min_elements_for_off_chip));
    }
    if s.min_elements_for_replicated_tensor_sharding != d.min_elements_for_replicated_tensor_sharding {
        e.push_str(&format!(
            ".minElementsForReplicatedTensorSharding({})",
            s.min_elements_for_replicated_tensor_sharding
        ));
    }
    if s.use_io_tiles_to_load {
        e.push_str(".useIOTilesToLoad(True)");
    }
    if s.use_io_tiles_to_store {
        e.push_str(".useIOTilesToStore(True)");
    }
    e
}

fn stage(s: &StageSpec) -> String {
    let ids: Vec<String> = s.blocks.iter().map(|b| str_lit(b)).collect();
    match s.ipu {
        Some(i) => format!("poptorch.Stage({}).ipu({i})", ids.join(", ")),
        None => format!("poptorch.Stage({})", ids.join(", ")),
    }
}

fn phase(p: &PhaseSpec) -> String {
    let stages: Vec<String> = p.stages.iter().map(stage).collect();
    let e = format!("poptorch.Phase({})", stages.join(", "));
    match &p.ipus {
        Some(ipus) => format!("{e}.ipus({})", ipus.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ")),
        None => e,
    }
}

fn auto_stage(a: AutoStage) -> &'static str {
    match a {
        AutoStage::SameAsIpu => "poptorch.AutoStage.SameAsIpu",
        AutoStage::AutoIncrement => "poptorch.AutoStage.AutoIncrement",
    }
}

fn pipelined(class: &str, p: &PipelinedExecution) -> String {
    match (&p.stages, p.auto_stage) {
        (Some(stages), _) => format!("{class}({})", stages.iter().map(stage).collect::<Vec<_>>().join(", ")),
        (None, Some(a)) => format!("{class}({})", auto_stage(a)),
        (None, None) => format!("{class}()"),
    }
}

/// The strategy as the expression `setExecutionStrategy` takes (liveness and the separate
/// backward phase as the builder calls PopTorch has for them).
pub fn strategy(s: &ExecutionStrategy) -> String {
    match s {
        ExecutionStrategy::Pipelined(p) => pipelined("poptorch.PipelinedExecution", p),
        ExecutionStrategy::Sharded(p) => pipelined("poptorch.ShardedExecution", p),
        ExecutionStrategy::SerialPhased(p) | ExecutionStrategy::ParallelPhased(p) => {
            let serial = matches!(s, ExecutionStrategy::SerialPhased(_));
            let class = if serial { "poptorch.SerialPhasedExecution" } else { "poptorch.ParallelPhasedExecution" };
            let mut e = format!("{class}({})", p.phases.iter().map(phase).collect::<Vec<_>>().join(", "));
            if p.separate_backward_phase {
                e = format!("_with({e}, lambda s: s.useSeparateBackwardPhase(True))");
            }
            match p.liveness() {
                PhaseLiveness::AlwaysLive => {}
                PhaseLiveness::OffChipAfterFwd if !serial => {
                    e = format!("_with({e}, lambda s: s.sendTensorsOffChipAfterFwd(True))");
                }
                l => {
                    let name = match l {
                        PhaseLiveness::AlwaysLive => "AlwaysLive",
                        PhaseLiveness::OffChipAfterFwd => "OffChipAfterFwd",
                        PhaseLiveness::OffChipAfterFwdNoOverlap => "OffChipAfterFwdNoOverlap",
                        PhaseLiveness::OffChipAfterEachPhase => "OffChipAfterEachPhase",
                    };
                    e = format!("_with({e}, lambda s: s.setTensorsLiveness(poptorch.Liveness.{name}))");
                }
            }
            e
        }
    }
}

/// `model.<weight>.replicaGrouping(...)` for a replica-grouped weight.
pub fn replica_grouping(wrapped: &str, name: &str, g: &ReplicaGrouping) -> String {
    let mode = match g.retrieval {
        VariableRetrievalMode::OnePerGroup => "poptorch.VariableRetrievalMode.OnePerGroup",
        VariableRetrievalMode::AllReplicas => "poptorch.VariableRetrievalMode.AllReplicas",
    };
    format!(
        "{}.replicaGrouping({}, {}, {mode})",
        super::python::state_expr(wrapped, name, crate::ir::InputKind::Parameter),
        comm_group(g.kind),
        g.group_size
    )
}

fn dtype_lit(d: DType) -> &'static str {
    super::python::dtype(d)
}

/// The keyword arguments of `args` that differ from `base`, in PopTorch's spelling, limited
/// to the names in `allowed`.
fn kwargs(args: &OptimizerArgs, base: &OptimizerArgs, allowed: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut put = |name: &str, differs: bool, value: String| {
        if differs && allowed.contains(&name) {
            out.push(format!("{name}={value}"));
        }
    };
    macro_rules! f32_arg {
        ($f:ident) => {
            if let Some(v) = args.$f {
                put(stringify!($f), Some(v) != base.$f, f32_lit(v));
            }
        };
    }
    macro_rules! bool_arg {
        ($f:ident) => {
            if let Some(v) = args.$f {
                put(stringify!($f), Some(v) != base.$f, py_bool(v).to_string());
            }
        };
    }
    macro_rules! dtype_arg {
        ($f:ident) => {
            if let Some(v) = args.$f {
                put(stringify!($f), Some(v) != base.$f, dtype_lit(v).to_string());
            }
        };
    }
    f32_arg!(lr);
    f32_arg!(momentum);
    f32_arg!(dampening);
    f32_arg!(weight_decay);
    bool_arg!(nesterov);
    if let Some((b1, b2)) = args.betas {
        put("betas", Some((b1, b2)) != base.betas, format!("({}, {})", f32_lit(b1), f32_lit(b2)));
    }
    f32_arg!(eps);
    f32_arg!(alpha);
    bool_arg!(centered);
    bool_arg!(amsgrad);
    f32_arg!(max_weight_norm);
    f32_arg!(velocity_scaling);
    f32_arg!(loss_scaling);
    bool_arg!(use_combined_accum);
    dtype_arg!(accum_type);
    dtype_arg!(velocity_accum_type);
    dtype_arg!(first_order_momentum_accum_type);
    dtype_arg!(second_order_momentum_accum_type);
    f32_arg!(max_grad_norm);
    bool_arg!(bias_correction);
    out
}

/// The parameter list an optimizer takes: `model.parameters()`, or its groups (each a dict
/// of its parameters, fetched by name, and its own attributes) followed by a group of the
/// other parameters with the defaults.
fn params_arg(opt: &Optimizer, model: &str, allowed: &[&str]) -> String {
    if opt.param_groups().is_empty() {
        return format!("{model}.parameters()");
    }
    let mut groups = Vec::new();
    let mut named = Vec::new();
    for g in opt.param_groups() {
        let params: Vec<String> = g.params.iter().map(|p| format!("{model}.get_parameter({})", str_lit(p))).collect();
        named.extend(g.params.iter().map(|p| str_lit(p)));
        let mut items = vec![format!("\"params\": [{}]", params.join(", "))];
        for kv in kwargs(&g.args, opt.defaults(), allowed) {
            let (k, v) = kv.split_once('=').unwrap_or((&kv, ""));
            items.push(format!("{}: {v}", str_lit(k)));
        }
        groups.push(format!("{{{}}}", items.join(", ")));
    }
    groups.push(format!(
        "{{\"params\": [p for n, p in {model}.named_parameters() if n not in ({}{})]}}",
        named.join(", "),
        if named.len() == 1 { "," } else { "" }
    ));
    format!("[{}]", groups.join(", "))
}

/// `poptorch.optim.Adam(model.parameters(), lr=..., ...)`, with the groups and every
/// attribute that differs from PopTorch's default, then one line per attribute marked
/// constant or variable against PopTorch's default for it.
pub fn optimizer_poptorch(opt: &Optimizer, model: &str) -> Vec<String> {
    let ty = opt.optimizer_type();
    let base = ty.default_args();
    let mut allowed: Vec<&str> = ty.group_attributes().to_vec();
    allowed.extend_from_slice(ty.global_attributes());
    let mut args = vec![params_arg(opt, model, ty.group_attributes())];
    // SGD's lr has no default: always given.
    let mut kw = kwargs(opt.defaults(), &base, &allowed);
    if ty == OptimizerType::Sgd && !kw.iter().any(|k| k.starts_with("lr=")) {
        kw.insert(0, format!("lr={}", f32_lit(opt.defaults().lr.unwrap_or(0.01))));
    }
    // PopTorch makes `lr` and every attribute passed variable, the rest constant: mark
    // what differs from that.
    // (Only the attributes PopTorch tracks: `bias_correction` and the like are settings.)
    let allowed = opt.allowed_attributes();
    let implied: Vec<String> = std::iter::once("lr".to_string())
        .chain(kw.iter().filter_map(|k| Some(k.split_once('=')?.0.to_string())))
        .filter(|a| allowed.contains(&a.as_str()))
        .collect();
    args.extend(kw);
    let mut out = vec![format!("optimizer = poptorch.optim.{}({})", ty.name(), args.join(", "))];
    let variable = opt.variable_attributes();
    for a in variable.iter().filter(|a| !implied.contains(a)) {
        out.push(format!("optimizer.variable_attrs.markAsVariable({})", str_lit(a)));
    }
    for a in implied.iter().filter(|a| !variable.contains(a)) {
        out.push(format!("optimizer.variable_attrs.markAsConstant({})", str_lit(a)));
    }
    out
}

/// The PyTorch optimizer equal to `opt` (torch.optim's classes; LAMB, which torch lacks,
/// is the script's `_Lamb`, the engine's formula). PopTorch-only attributes (loss scaling,
/// accumulation types, velocity scaling) have no PyTorch form and are left out: they do not
/// change the float32 arithmetic.
pub fn optimizer_torch(opt: &Optimizer, model: &str) -> Result<String> {
    let ty = opt.optimizer_type();
    let (class, allowed): (&str, &[&str]) = match ty {
        OptimizerType::Sgd => ("torch.optim.SGD", &["lr", "momentum", "dampening", "weight_decay", "nesterov"]),
        OptimizerType::Adam => ("torch.optim.Adam", &["lr", "betas", "eps", "weight_decay", "amsgrad"]),
        OptimizerType::AdamW => ("torch.optim.AdamW", &["lr", "betas", "eps", "weight_decay", "amsgrad"]),
        OptimizerType::RmsProp => {
            ("torch.optim.RMSprop", &["lr", "alpha", "eps", "weight_decay", "momentum", "centered"])
        }
        OptimizerType::Lamb => ("_Lamb", &["lr", "betas", "eps", "weight_decay", "max_weight_norm", "bias_correction"]),
    };
    if opt.defaults().amsgrad == Some(true) {
        return Err(Error::export("amsgrad has no form in the engine's optimizers"));
    }
    // Every value spelled out against an empty base: torch's defaults differ from PopTorch's
    // (AdamW's weight decay, LAMB's).
    let mut args = vec![params_arg(opt, model, allowed)];
    args.extend(kwargs(opt.defaults(), &OptimizerArgs::default(), allowed));
    Ok(format!("{class}({})", args.join(", ")))
}
