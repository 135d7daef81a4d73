//! `poptorch.PoplarExecutor`: a wrapped model run with IPU semantics on the CPU executor.
//!
//! Compilation (on the first call, or [`PoplarExecutor::compile`]) builds one **step
//! graph** for a micro-batch — the traced forward, and for training the backward seeded
//! with the loss scaling factor, returning every parameter's gradient (and the automatic
//! loss scaling statistics) — checks the model and options the way PopTorch and PopART do
//! (the planner's plan must be valid), and uploads the host weights to one store per
//! replica.
//!
//! A call then runs every micro-batch of `deviceIterations × gradientAccumulation ×
//! replicationFactor` in PopART's order ([`super::batch`]). In training, after each
//! device iteration the gradients are reduced ([`super::reduce`]) per weight over the
//! replicas sharing it ([`super::grouping`]), divided by the loss scaling factor, clipped to
//! `max_grad_norm`, and applied by the optimizer ([`crate::kernels::optim`]) once per
//! weight group; automatic loss scaling then updates the factor
//! ([`super::loss_scaling`]). Outputs come back per `Options.outputMode`.
//!
//! A call is split in steps a coordinator can drive when the replicas run on several
//! executors ([`super::replicas`], one wasm instance per worker): `begin_call`, then per
//! device iteration `contribute` (this executor's replicas, [`PoplarExecutor::set_local_replicas`])
//! and `apply` (every replica's contributions), `end_call` and `assemble`. [`PoplarExecutor::call`]
//! is the same split with one executor holding every replica.
//!
//! Weights: a training wrapper writes its weights (and buffers) back to the host model
//! after every call, which is what PopTorch's lazy copy shows; an inference wrapper copies
//! back only on [`PoplarExecutor::copy_weights_to_host`], and re-uploads the host weights
//! when a training wrapper of the same model has trained them since.

use super::batch::{torch_dtype, torch_size, BatchInput, Batching};
use super::grouping::{comm_groups, group_of_replica, stack, unstack, ReplicaGrouping, VariableRetrievalMode};
use super::loss_scaling::{add_gradient_statistics, update_loss_scale, F16_MAX};
use super::model::HostModel;
use super::optim::{Optimizer, OptimizerArgs};
use super::reduce::{Accumulator, GradReduction};
use super::replicas::{contributions, Contributions, LocalOutputs};
use crate::autograd::{find_loss, training_graph_at, TrainOptions};
use crate::compile::options::{MeanReductionStrategy, OutputMode};
use crate::compile::ExecutionStrategy;
use crate::compile::{plan_with, Diagnostic, Options, Plan, PlanSettings};
use crate::exec::{optimizer_update, run, RunStats, Store};
use crate::ir::{Graph, InputKind, Op, TensorType};
use crate::tensor::{DType, Tensor};
use crate::trace::Trace;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Named tensors: `(name, value)`.
type Named = Vec<(String, Rc<Tensor>)>;

/// Combined-batch inputs, as [`BatchInput`]s.
fn combined(inputs: &[Rc<Tensor>]) -> Vec<BatchInput> {
    inputs.iter().cloned().map(BatchInput::Combined).collect()
}

/// The types of `inputs` (what a plan reads of them).
pub fn input_types(inputs: &[Rc<Tensor>]) -> Vec<TensorType> {
    inputs.iter().map(|t| TensorType { shape: t.shape().to_vec(), dtype: t.dtype() }).collect()
}

const NO_EXECUTABLE: &str = "Model has not been compiled or has been destroyed.";

/// A compiled model: the step graph and the device state of every replica.
struct Executable {
    step: Graph,
    n_user_outputs: usize,
    /// `(parameter, output index)` of each gradient (training).
    grads: Vec<(String, usize)>,
    /// `(model input, output index)` of each requested input gradient.
    input_grads: Vec<(String, usize)>,
    /// Automatic loss scaling: `(output index of the lower-bin count, tracked elements)`.
    stats: Option<(usize, usize)>,
    /// The full (combined-batch) inputs of the compiling call, for PopTorch's static check.
    inputs: Vec<(String, TensorType)>,
    batching: Batching,
    replicas: Vec<Store>,
    /// Replica groups of each parameter (one group of every replica when ungrouped).
    groups: BTreeMap<String, Vec<Vec<usize>>>,
    /// The loss scaling factor the next step uses.
    loss_scaling: f32,
    /// The largest factor the loss's dtype holds (automatic loss scaling stays below it).
    max_loss_scaling: f32,
    /// The host model's trained version these device weights correspond to.
    uploaded_version: u64,
    plan: Plan,
    /// The options' anchored tensors, resolved against the step graph.
    anchors: Vec<Anchor>,
    /// How a step's contributions of each replica are laid out.
    layout: Contributions,
}

/// What an anchored tensor (`Options.anchorTensor`) holds.
#[derive(Clone, Debug)]
enum AnchorSource {
    /// A parameter's gradient as the step computed it: index into `Executable::grads`.
    Gradient(usize),
    /// A parameter after the optimizer's update.
    Updated(String),
}

#[derive(Clone, Debug)]
struct Anchor {
    short: String,
    source: AnchorSource,
    mode: OutputMode,
    period: usize,
}

/// The step graph of a micro-batch and what the executable needs to run it.
struct Step {
    graph: Graph,
    n_user_outputs: usize,
    grads: Vec<(String, usize)>,
    input_grads: Vec<(String, usize)>,
    stats: Option<(usize, usize)>,
    loss_scaling: f32,
    max_loss_scaling: f32,
    batching: Batching,
    plan: Plan,
}

/// A model wrapped by [`super::training_model`] or [`super::inference_model`].
pub struct PoplarExecutor {
    model: HostModel,
    options: Options,
    training: bool,
    optimizer: Option<Optimizer>,
    groupings: BTreeMap<String, ReplicaGrouping>,
    input_grads: Vec<String>,
    /// What PopTorch logged besides the compiled plan's own warnings (a second `compile`).
    logged: Vec<Diagnostic>,
    exe: Option<Executable>,
    /// What the executor measured over the last call's micro-batches.
    last_stats: Option<RunStats>,
    /// The anchored tensors of the last call, by short name.
    anchored: BTreeMap<String, Tensor>,
    /// The replicas this executor runs (`lo..hi`; all when `None`).
    local: Option<(usize, usize)>,
    /// The call in progress.
    pending: Option<Pending>,
}

/// A call between [`PoplarExecutor::begin_call`] and [`PoplarExecutor::end_call`].
struct Pending {
    /// Each input cut into its micro-batch slices.
    slices: Vec<Vec<Tensor>>,
    /// The device iteration to contribute or apply next.
    iteration: usize,
    /// Whether `iteration` is contributed and awaits its gathered contributions.
    contributed: bool,
    /// The loss scaling factor `iteration`'s micro-batches ran with.
    loss_scaling: f32,
    out: LocalOutputs,
    stats: RunStats,
}

/// A gradient computed with loss scaling `ls`, divided by it (in float32, back to its dtype).
fn unscale(t: &Tensor, ls: f32) -> Result<Tensor> {
    if ls == 1.0 {
        return Ok(t.clone());
    }
    let mut wide = t.cast(DType::Float32);
    if let Tensor::F32(a) = &mut wide {
        a.mapv_inplace(|x| x / ls);
    }
    Ok(wide.cast(t.dtype()))
}

impl PoplarExecutor {
    /// Wraps `model` (PopTorch's `PoplarExecutor.__init__`): `options` are validated, frozen
    /// and copied; a training model without an optimizer gets SGD with lr 0.01.
    pub fn new(
        model: &HostModel,
        options: &mut Options,
        training: bool,
        optimizer: Option<Optimizer>,
    ) -> Result<PoplarExecutor> {
        if training && model.is_wrapped() {
            return Err(Error::poptorch(
                "Model has already been wrapped in 'poptorch.trainingModel'. Call model.destroy() on the model to \
                 unwrap before wrapping again.",
            ));
        }
        if let Some(d) = options.validate().into_iter().next() {
            return Err(Error::from(d));
        }
        if !training {
            if options.training.gradient_accumulation != 1 {
                let mut msg = "You must set poptorch.Options().Training.gradientAccumulation to 1 or leave it as its \
                               default value (1) when running a poptorch.inferenceModel()."
                    .to_string();
                if matches!(options.execution_strategy, ExecutionStrategy::Pipelined(_)) {
                    msg.push_str(
                        " Use poptorch.Options().deviceIterations to process a sufficient number of batches each run \
                         for pipelined execution instead.",
                    );
                }
                return Err(Error::poptorch(msg)
                    .with_code("inference_gradient_accumulation")
                    .with_option("Training.gradientAccumulation"));
            }
            if optimizer.is_some() {
                return Err(Error::poptorch("Optimizer should be None for inference"));
            }
        }
        options.freeze();
        let mut options = options.clone();
        let optimizer = if training {
            let opt = match optimizer {
                Some(o) => o,
                None => Optimizer::sgd(OptimizerArgs { lr: Some(0.01), ..OptimizerArgs::default() })?,
            };
            let names: Vec<String> = model.parameters().into_iter().map(|(n, _)| n).collect();
            opt.check_params(&names)?;
            if opt.needs_running_mean() {
                // PopTorch switches the strategy itself before compilation.
                options.training.mean_accumulation_and_replication_reduction_strategy = MeanReductionStrategy::Running;
            }
            Some(opt)
        } else {
            None
        };
        if training {
            model.set_wrapped(true);
        }
        Ok(PoplarExecutor {
            model: model.clone(),
            options,
            training,
            optimizer,
            groupings: BTreeMap::new(),
            input_grads: Vec::new(),
            logged: Vec::new(),
            exe: None,
            last_stats: None,
            anchored: BTreeMap::new(),
            local: None,
            pending: None,
        })
    }

    /// `getAnchoredTensor(short_name)`: the value the last call left in the tensor anchored
    /// under `short_name` (`Options.anchorTensor`), per the anchor's output mode.
    pub fn anchored_tensor(&self, short_name: &str) -> Result<&Tensor> {
        self.anchored.get(short_name).ok_or_else(|| Error::poptorch(format!("No tensor with name {short_name} found.")))
    }

    /// The options' anchors resolved against the gradients a step returns: PopART's names
    /// `Gradient___model.<parameter>` and `UpdatedVar___model.<parameter>` (the parameter's
    /// name as `namedParameters` gives it, after PopTorch's `model.`; the bare name is
    /// accepted too).
    fn resolve_anchors(&self, grads: &[(String, usize)]) -> Result<Vec<Anchor>> {
        let mut out = Vec::new();
        for (short, a) in &self.options.anchored_tensors {
            let err = |why: String| {
                Error::poptorch(format!("anchorTensor(\"{short}\", \"{}\"): {why}", a.long_name))
                    .with_option("anchoredTensors")
            };
            let (kind, rest) = if let Some(r) = a.long_name.strip_prefix("Gradient___") {
                ("Gradient", r)
            } else if let Some(r) = a.long_name.strip_prefix("UpdatedVar___") {
                ("UpdatedVar", r)
            } else {
                return Err(err(
                    "this model has no tensor of that name: a parameter's gradient is \"Gradient___model.<name>\" and \
                     its updated value \"UpdatedVar___model.<name>\""
                        .into(),
                ));
            };
            if !self.training {
                return Err(err(format!(
                    "an inferenceModel computes no {kind} tensors: anchor them on a trainingModel"
                )));
            }
            let find = |n: &str| grads.iter().position(|(p, _)| p == n);
            let Some(k) = rest.strip_prefix("model.").and_then(find).or_else(|| find(rest)) else {
                let names: Vec<&str> = grads.iter().take(8).map(|(p, _)| p.as_str()).collect();
                return Err(err(format!(
                    "no trained parameter is named \"{}\" (the parameters: {}{})",
                    rest.strip_prefix("model.").unwrap_or(rest),
                    names.join(", "),
                    if grads.len() > names.len() { ", …" } else { "" }
                )));
            };
            let source =
                if kind == "Gradient" { AnchorSource::Gradient(k) } else { AnchorSource::Updated(grads[k].0.clone()) };
            let mode = a.output_mode.map_or(self.options.resolved_output_mode(true), |m| match m {
                OutputMode::Default => self.options.resolved_output_mode(true),
                m => m,
            });
            out.push(Anchor { short: short.clone(), source, mode, period: a.output_return_period });
        }
        Ok(out)
    }

    /// Whether this is a training model.
    pub fn is_training(&self) -> bool {
        self.training
    }

    /// The wrapper's options (frozen).
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The host model.
    pub fn model(&self) -> &HostModel {
        &self.model
    }

    /// The optimizer (training models).
    pub fn optimizer(&self) -> Option<&Optimizer> {
        self.optimizer.as_ref()
    }

    /// Warnings PopTorch would have logged (compile called twice, the plan does not fit, …):
    /// the compiled plan's warnings, that it does not fit, then what the wrapper logged since.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(exe) = &self.exe {
            out.extend(exe.plan.warnings.iter().map(|w| w.message.clone()));
            if !exe.plan.fits {
                out.push(format!(
                    "the model does not fit in IPU memory ({} bytes at the peak of the fullest IPU); it runs here anyway",
                    exe.plan.peak_bytes_max_ipu()
                ));
            }
        }
        out.extend(self.logged.iter().map(|d| d.message.clone()));
        out
    }

    /// `isCompiled()`.
    pub fn is_compiled(&self) -> bool {
        self.exe.is_some()
    }

    /// The memory the CPU executor measured over the last call's micro-batches: the largest
    /// peak and bytes kept for the backward pass of any micro-batch, the nodes run and (with
    /// `exec::set_profiling`) the time per op, summed.
    pub fn last_stats(&self) -> Option<&RunStats> {
        self.last_stats.as_ref()
    }

    /// The compiled step graph of one micro-batch, as the executor runs it (fused).
    pub fn step_graph(&self) -> Option<&Graph> {
        self.exe.as_ref().map(|e| &e.step)
    }

    /// The planner's plan of the compiled step (with the options in effect).
    pub fn plan(&self) -> Option<&Plan> {
        self.exe.as_ref().map(|e| &e.plan)
    }

    /// The loss scaling factor the next optimizer step uses (changes with automatic loss
    /// scaling).
    pub fn loss_scaling(&self) -> Option<f32> {
        self.exe.as_ref().map(|e| e.loss_scaling)
    }

    /// `poptorch_model.W.replicaGrouping(comm_group_type, group_size, retrieval)`: a weight
    /// with one value per replica group. Before compilation only.
    pub fn replica_grouping(&mut self, param: &str, grouping: ReplicaGrouping) -> Result<()> {
        if self.exe.is_some() {
            return Err(Error::poptorch(format!(
                "replicaGrouping of '{param}' must be set before the model is compiled"
            )));
        }
        if self.model.parameter(param).is_none() {
            return Err(Error::poptorch(format!("the model has no parameter '{param}'")));
        }
        comm_groups(grouping.kind, grouping.group_size, self.options.replication_factor)?;
        self.groupings.insert(param.to_string(), grouping);
        Ok(())
    }

    /// The replica grouping of parameter `param`, if one was set.
    pub fn grouping(&self, param: &str) -> Option<&ReplicaGrouping> {
        self.groupings.get(param)
    }

    /// Asks for the gradients of model inputs `names` (float inputs), returned after the
    /// model's outputs on every call. Training models, before compilation.
    pub fn return_input_gradients(&mut self, names: &[&str]) -> Result<()> {
        if !self.training {
            return Err(Error::poptorch(
                "input gradients need a trainingModel: an inferenceModel has no backward pass",
            ));
        }
        if self.exe.is_some() {
            return Err(Error::poptorch("input gradients must be requested before the model is compiled"));
        }
        self.input_grads = names.iter().map(|s| s.to_string()).collect();
        Ok(())
    }

    /// `compile(*inputs)`: builds the executable for these (combined-batch) inputs without
    /// running it. A second call is ignored with PopTorch's warning.
    pub fn compile(&mut self, inputs: &[Rc<Tensor>]) -> Result<()> {
        self.compile_inputs(&combined(inputs))
    }

    /// [`Self::compile`] for inputs each given combined or as parts ([`BatchInput`]).
    pub fn compile_inputs(&mut self, inputs: &[BatchInput]) -> Result<()> {
        if self.exe.is_some() {
            self.logged.push(Diagnostic::new(
                "compile_ignored",
                "Call to compile() ignored: the executable is already compiled",
                "Call compile() once; call destroy() first to compile again.",
            ));
            return Ok(());
        }
        let types = self.combined_types(inputs)?;
        let exe = self.build(&types)?;
        self.exe = Some(exe);
        self.copy_weights_to_device()?;
        Ok(())
    }

    /// Checks a compiling call's inputs against the trace (micro-batch shapes) and builds
    /// the step graph: the forward, and for training the backward seeded with the loss
    /// scaling factor, returning the gradients (and the automatic loss scaling statistics).
    ///
    /// With `judge`, a configuration the plan says PopTorch refuses is an error (PopTorch's
    /// message, the plan's first error but `out_of_memory`); without, the step comes back with
    /// that plan (for a report). Errors that leave nothing to plan (inputs that do not fit the
    /// trace, no loss, broadcast buffers) are errors either way.
    fn step(&mut self, inputs: &[TensorType], judge: bool) -> Result<Step> {
        if !self.model.is_traced() {
            return Err(Error::poptorch(
                "the model has not been traced yet: attach its trace (traced with one micro-batch) before compiling",
            ));
        }
        let o = &self.options;
        let batching = Batching::from_options(o);
        let fwd = self.model.graph();
        let traced: Vec<(String, TensorType)> =
            fwd.placeholders(InputKind::Input).into_iter().map(|(n, v)| (n.to_string(), fwd.ty(v).clone())).collect();
        if inputs.len() != traced.len() {
            return Err(Error::poptorch(format!(
                "the model takes {} inputs ({}) but {} were given",
                traced.len(),
                traced.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
                inputs.len()
            )));
        }
        for ((name, want), t) in traced.iter().zip(inputs) {
            let got = TensorType { shape: batching.micro_shape(&t.shape)?, dtype: t.dtype };
            if &got != want {
                return Err(Error::poptorch(format!(
                    "input '{name}': the model was traced for micro-batches of {want}, but {} cut into {} \
                     micro-batch slices gives {got}",
                    t,
                    batching.factor()
                )));
            }
        }
        let replicas = o.replication_factor;
        let updates_buffers = fwd.nodes.iter().any(|n| matches!(n.op, Op::BufferUpdate { .. }));
        if updates_buffers && replicas > 1 && o.broadcast_buffers {
            return Err(Error::poptorch(
                "PopTorch does not support broadcasting buffers. If your model is able to tolerate buffers becoming \
                 out of sync between replicas, you can disable buffer broadcasting using \
                 poptorch.Options.broadcastBuffers(False).",
            ));
        }
        let n_user_outputs = fwd.outputs.len();
        let mut max_loss_scaling = f32::MAX;
        let (graph, grads, input_grads, stats, loss_scaling) = if self.training {
            let opt = self.optimizer.as_mut().expect("training models have an optimizer");
            if o.training.automatic_loss_scaling {
                opt.mark_as_variable("loss_scaling")?;
            }
            let loss = find_loss(fwd)?;
            if fwd.ty(loss).dtype == DType::Float16 {
                max_loss_scaling = F16_MAX;
            }
            let topts = TrainOptions {
                return_grads: true,
                loss_scale_input: true,
                input_grads: self.input_grads.clone(),
                ..TrainOptions::default()
            };
            let tg = training_graph_at(fwd, loss, &topts)?;
            let (graph, stats) = if o.training.automatic_loss_scaling {
                let (g, idx, total) = add_gradient_statistics(&tg.graph)?;
                (g, Some((idx, total)))
            } else {
                (tg.graph, None)
            };
            (graph, tg.grad_outputs, tg.input_grad_outputs, stats, opt.loss_scaling())
        } else {
            (fwd.clone(), Vec::new(), Vec::new(), None, 1.0)
        };
        // The micro-batch size is the first input's batch dimension; a sparse (CSR) input is
        // traced as `<name>.indptr` first, whose length is its rows + 1.
        let micro = traced
            .first()
            .and_then(|(name, t)| {
                let n = t.shape.first().copied()?;
                Some(if name.ends_with(".indptr") { n.saturating_sub(1).max(1) } else { n })
            })
            .unwrap_or(1);
        // A replica-grouped weight's gradient is reduced within its group only.
        let weight_replicas = self
            .groupings
            .iter()
            .filter_map(|(name, rg)| Some((name.clone(), rg.groups(o.replication_factor.max(1)).ok()?.first()?.len())))
            .collect();
        let settings = PlanSettings { micro_batch_size: Some(micro), weight_replicas };
        let plan = plan_with(&self.plan_graph(&graph)?, o, &settings);
        if let Some(e) = plan.errors.iter().find(|e| judge && e.code != "out_of_memory") {
            // PopTorch's message followed by the fix, with the diagnostic's code and option.
            return Err(Error::from(e.clone()));
        }
        Ok(Step { graph, n_user_outputs, grads, input_grads, stats, loss_scaling, max_loss_scaling, batching, plan })
    }

    /// The graph the planner sees for the step `graph` runs. The executor applies the
    /// optimizer outside its step graph (after reducing gradients over micro-batches and
    /// replicas), so a training step's plan adds an update node per parameter, each with
    /// that parameter's own step (its group's values): the optimizer state they keep is
    /// always-live memory on the device. The gradients stay outputs, as in the step the
    /// executor runs, so the planned liveness is the one the executor measures.
    fn plan_graph(&self, graph: &Graph) -> Result<Graph> {
        let Some(opt) = self.optimizer.as_ref().filter(|_| self.training) else {
            return Ok(graph.clone());
        };
        let fwd = self.model.graph();
        let first = fwd.placeholders(InputKind::Parameter).into_iter().next().map(|(n, _)| n.to_string());
        let Some(first) = first else {
            return Ok(graph.clone());
        };
        let topts = TrainOptions {
            optimizer: Some(opt.step_for(&first)),
            return_grads: true,
            loss_scale_input: true,
            input_grads: self.input_grads.clone(),
            ..TrainOptions::default()
        };
        let mut g = training_graph_at(fwd, find_loss(fwd)?, &topts)?.graph;
        for node in &mut g.nodes {
            if let Op::OptimizerUpdate { param, step } = &mut node.op {
                *step = opt.step_for(param);
            }
        }
        Ok(g)
    }

    /// Each input's name as traced (`input<i>` past the traced ones).
    fn input_name(&self, i: usize) -> String {
        let fwd = self.model.graph();
        fwd.placeholders(InputKind::Input).get(i).map_or_else(|| format!("input{i}"), |(n, _)| n.to_string())
    }

    /// The combined-batch types of a call's inputs (parts checked: their count is the
    /// combined batch factor, and they have one type).
    fn combined_types(&self, inputs: &[BatchInput]) -> Result<Vec<TensorType>> {
        let f = Batching::from_options(&self.options).factor();
        (inputs.iter().enumerate()).map(|(i, x)| x.combined_type(&self.input_name(i), f)).collect()
    }

    fn build(&mut self, types: &[TensorType]) -> Result<Executable> {
        let s = self.step(types, true)?;
        let replicas = self.options.replication_factor;
        let grad_types: Vec<&TensorType> = s.grads.iter().map(|(_, i)| s.graph.ty(s.graph.outputs[*i])).collect();
        let layout = contributions(&grad_types, s.stats.is_some(), replicas);
        let step = crate::exec::fuse::fuse(&s.graph)?;
        let anchors = self.resolve_anchors(&s.grads)?;
        let mut groups = BTreeMap::new();
        for (name, _) in self.model.parameters() {
            let g = match self.groupings.get(&name) {
                Some(rg) => rg.groups(replicas)?,
                None => vec![(0..replicas).collect()],
            };
            groups.insert(name, g);
        }
        let seed = self.options.random_seed.unwrap_or(0);
        let stores = (0..replicas).map(|r| Store::new(&[], &[], seed.wrapping_add(r as u64))).collect();
        let fwd = self.model.graph();
        let inputs = fwd
            .placeholders(InputKind::Input)
            .into_iter()
            .zip(types)
            .map(|((n, _), t)| (n.to_string(), t.clone()))
            .collect();
        Ok(Executable {
            step,
            n_user_outputs: s.n_user_outputs,
            grads: s.grads,
            input_grads: s.input_grads,
            stats: s.stats,
            inputs,
            batching: s.batching,
            replicas: stores,
            groups,
            loss_scaling: s.loss_scaling,
            max_loss_scaling: s.max_loss_scaling,
            uploaded_version: self.model.trained_version(),
            plan: s.plan,
            anchors,
            layout,
        })
    }

    /// The planner's plan of this model for a call with `inputs` (combined batch), without
    /// compiling: the compiled plan once compiled (the inputs must then match the compiled
    /// ones), otherwise the plan of the step graph these inputs would compile. Only the
    /// inputs' types are read (a plan needs no values), and no weight is materialised.
    pub fn plan_for(&mut self, inputs: &[TensorType]) -> Result<Plan> {
        if let Some(exe) = &self.exe {
            Self::validate_inputs(exe, inputs)?;
            return Ok(exe.plan.clone());
        }
        Ok(self.step(inputs, true)?.plan)
    }

    /// [`Self::plan_for`] that judges without throwing: the plan of the step graph these
    /// inputs would compile even when PopTorch would refuse the configuration (`valid:
    /// false`, PopTorch's reasons in `errors`, each with its `code` and `option`), followed in
    /// `warnings` by what the wrapper logged (`compile_ignored`). It counts what the wrapper
    /// runs: its trace, the loss PopTorch finds, every parameter's optimizer step (its
    /// group's state) and the options in effect. Still an error: inputs that do not fit the
    /// trace or the combined batch, a model without a loss, nothing to plan.
    pub fn plan_report(&mut self, inputs: &[TensorType]) -> Result<Plan> {
        let mut plan = match &self.exe {
            Some(exe) => {
                Self::validate_inputs(exe, inputs)?;
                exe.plan.clone()
            }
            None => self.step(inputs, false)?.plan,
        };
        plan.warnings.extend(self.logged.iter().cloned());
        Ok(plan)
    }

    /// How many micro-batches one call's inputs combine along dim 0: `deviceIterations ×
    /// (replicationFactor / inputReplicaGrouping size) × gradientAccumulation` (PopTorch's
    /// `DataLoader` combined batch over its batch size).
    pub fn combined_batch_factor(&self) -> usize {
        Batching::from_options(&self.options).factor()
    }

    /// The model inputs' micro-batch types for a call with inputs of `types` (combined
    /// batch): each dim 0 divided by the combined batch factor, or PopTorch's batch-dimension
    /// error. A caller that traces on the first call traces with these.
    pub fn micro_batch_types(&self, types: &[TensorType]) -> Result<Vec<TensorType>> {
        let b = Batching::from_options(&self.options);
        types.iter().map(|t| Ok(TensorType { shape: b.micro_shape(&t.shape)?, dtype: t.dtype })).collect()
    }

    /// Gives an untraced (or not yet compiled) model its trace: `trace`'s graph over the
    /// model's shared weights ([`HostModel::adopt_trace`]). Before compilation only.
    pub fn attach_trace(&mut self, trace: &Trace) -> Result<()> {
        if self.exe.is_some() {
            return Err(Error::poptorch(
                "the model is already compiled: its trace cannot change (shapes are static after compilation)",
            ));
        }
        let model = self.model.adopt_trace(trace);
        if let Some(opt) = &self.optimizer {
            let names: Vec<String> = model.parameters().into_iter().map(|(n, _)| n).collect();
            opt.check_params(&names)?;
        }
        self.model = model;
        Ok(())
    }

    /// `copyWeightsToDevice()`: uploads the host parameters and buffers to every replica
    /// (a grouped weight's host value holds one slice per group, or one value for all).
    /// Optimizer state is kept.
    pub fn copy_weights_to_device(&mut self) -> Result<()> {
        let exe = self.exe.as_mut().ok_or_else(|| Error::poptorch(NO_EXECUTABLE))?;
        let fwd = self.model.graph();
        let replicas = exe.replicas.len();
        for (name, v) in fwd.placeholders(InputKind::Parameter) {
            let host = self
                .model
                .parameter(name)
                .ok_or_else(|| Error::poptorch(format!("parameter '{name}' is not on the host")))?
                .value()?;
            let groups = &exe.groups[name];
            let slice_shape = &fwd.ty(v).shape;
            let n = groups.len();
            let grouping = self.groupings.get(name);
            let values = if host.shape() == slice_shape.as_slice() {
                vec![host.as_ref().clone(); n]
            } else if grouping.is_some_and(|g| g.retrieval == VariableRetrievalMode::AllReplicas)
                && host.shape().first() == Some(&replicas)
                && host.shape()[1..] == slice_shape[..]
            {
                let all = unstack(name, &host, replicas, slice_shape)?;
                groups.iter().map(|m| all[m[0]].clone()).collect()
            } else if n > 1 {
                unstack(name, &host, n, slice_shape)?
            } else {
                return Err(Error::poptorch(format!(
                    "parameter '{name}' is {:?} on the host but the model was traced with {slice_shape:?}",
                    host.shape()
                )));
            };
            let of = group_of_replica(groups, replicas);
            let values: Vec<Rc<Tensor>> = values.into_iter().map(Rc::new).collect();
            for (r, store) in exe.replicas.iter_mut().enumerate() {
                store.params.insert(name.to_string(), values[of[r]].clone());
            }
        }
        for (name, _) in fwd.placeholders(InputKind::Buffer) {
            let host = self
                .model
                .buffer(name)
                .ok_or_else(|| Error::poptorch(format!("buffer '{name}' is not on the host")))?
                .value()?;
            for store in &mut exe.replicas {
                store.buffers.insert(name.to_string(), host.clone());
            }
        }
        exe.uploaded_version = self.model.trained_version();
        Ok(())
    }

    /// `copyWeightsToHost()`: writes the device parameters and buffers to the host model. A
    /// grouped weight comes back with one slice per group (`OnePerGroup`: each group's first
    /// replica) or per replica (`AllReplicas`); buffers come from replica 0.
    pub fn copy_weights_to_host(&mut self) -> Result<()> {
        let exe = self.exe.as_ref().ok_or_else(|| Error::poptorch(NO_EXECUTABLE))?;
        let (params, buffers) = Self::device_weights(exe, &self.groupings, self.model.graph())?;
        self.model.write_back(params, buffers, self.training);
        Ok(())
    }

    fn device_weights(
        exe: &Executable,
        groupings: &BTreeMap<String, ReplicaGrouping>,
        fwd: &Graph,
    ) -> Result<(Named, Named)> {
        let mut params = Vec::new();
        for (name, _) in fwd.placeholders(InputKind::Parameter) {
            let groups = &exe.groups[name];
            let value = |r: usize| exe.replicas[r].params[name].clone();
            let host = match groupings.get(name) {
                None => value(0),
                Some(g) => {
                    let reps: Vec<usize> = match g.retrieval {
                        VariableRetrievalMode::OnePerGroup => groups.iter().map(|m| m[0]).collect(),
                        VariableRetrievalMode::AllReplicas => (0..exe.replicas.len()).collect(),
                    };
                    let vals: Vec<Rc<Tensor>> = reps.into_iter().map(value).collect();
                    let refs: Vec<&Tensor> = vals.iter().map(|t| t.as_ref()).collect();
                    Rc::new(stack(&refs)?)
                }
            };
            params.push((name.to_string(), host));
        }
        let buffers = fwd
            .placeholders(InputKind::Buffer)
            .into_iter()
            .map(|(name, _)| (name.to_string(), exe.replicas[0].buffers[name].clone()))
            .collect();
        Ok((params, buffers))
    }

    /// A device weight of replica `replica` (for inspection).
    pub fn replica_parameter(&self, replica: usize, name: &str) -> Option<Rc<Tensor>> {
        self.exe.as_ref()?.replicas.get(replica)?.params.get(name).cloned()
    }

    /// A device buffer of replica `replica` (for inspection).
    pub fn replica_buffer(&self, replica: usize, name: &str) -> Option<Rc<Tensor>> {
        self.exe.as_ref()?.replicas.get(replica)?.buffers.get(name).cloned()
    }

    /// `setOptimizer(optimizer)`: before compilation any optimizer; after, only one that
    /// changes variable attributes (PopART's replacement rules). On error nothing changes.
    pub fn set_optimizer(&mut self, optimizer: Optimizer) -> Result<()> {
        if !self.training {
            return Err(Error::poptorch("Optimizer should be None for inference"));
        }
        let mut new = optimizer;
        let names: Vec<String> = self.model.parameters().into_iter().map(|(n, _)| n).collect();
        new.check_params(&names)?;
        if self.options.training.automatic_loss_scaling {
            new.mark_as_variable("loss_scaling")?;
        }
        let strategy = &mut self.options.training.mean_accumulation_and_replication_reduction_strategy;
        match &mut self.exe {
            None => {
                if new.needs_running_mean() {
                    *strategy = MeanReductionStrategy::Running;
                }
            }
            Some(exe) => {
                if new.needs_running_mean() && *strategy != MeanReductionStrategy::Running {
                    return Err(Error::poptorch(
                        "Invalid optimizer: the new optimizer would require changing options.Training.\
                         meanAccumulationAndReplicationReductionStrategy to poptorch.MeanReductionStrategy.Running \
                         but the executable is already compiled.",
                    ));
                }
                let old = self.optimizer.as_ref().expect("training models have an optimizer");
                old.check_replacement(&new)?;
                if new.loss_scaling() != old.loss_scaling() {
                    exe.loss_scaling = new.loss_scaling();
                }
            }
        }
        self.optimizer = Some(new);
        Ok(())
    }

    /// `destroy()`: a training model copies its weights to the host and unwraps the model;
    /// the executable is released.
    pub fn destroy(&mut self) -> Result<()> {
        if self.exe.is_some() && self.training {
            self.copy_weights_to_host()?;
        }
        if self.training {
            self.model.set_wrapped(false);
        }
        self.exe = None;
        Ok(())
    }

    /// Checks a call's inputs against the compiled ones (PopTorch's `validateInputs`).
    fn validate_inputs(exe: &Executable, inputs: &[TensorType]) -> Result<()> {
        let end = "\nThis error occurred because the inputs passed at runtime don't match the inputs used to compile \
                   the model.\nTo recompile the model for the new inputs create a new inferenceModel / trainingModel \
                   wrapper or call destroy() on the curent one and try again.";
        if inputs.len() != exe.inputs.len() {
            return Err(Error::poptorch(format!(
                "Number of positional arguments mismatch: expected {} arguments but got {}.{end}",
                exe.inputs.len(),
                inputs.len()
            ))
            .with_code("input_mismatch"));
        }
        for ((name, want), t) in exe.inputs.iter().zip(inputs) {
            if want.dtype != t.dtype {
                return Err(Error::poptorch(format!(
                    "Data type mismatch for {name}: expected {} but got {}.{end}",
                    torch_dtype(want.dtype),
                    torch_dtype(t.dtype)
                ))
                .with_code("input_mismatch"));
            }
            if want.shape != t.shape {
                return Err(Error::poptorch(format!(
                    "Shape mismatch for {name}: expected {} but got {}.{end}",
                    torch_size(&want.shape),
                    torch_size(&t.shape)
                ))
                .with_code("input_mismatch"));
            }
        }
        Ok(())
    }

    /// `model(*inputs)`: compiles on the first call, then runs one host call (every
    /// micro-batch of every device iteration) and returns the outputs per output mode,
    /// followed by any requested input gradients. This is the split call of
    /// [`super::replicas`] with this executor holding every replica: begin, then per device
    /// iteration contribute and apply its own contributions, end and assemble.
    pub fn call(&mut self, inputs: &[Rc<Tensor>]) -> Result<Vec<Tensor>> {
        self.call_inputs(&combined(inputs))
    }

    /// [`Self::call`] for inputs each given combined or as parts ([`BatchInput`]: a sparse
    /// graph part per micro-batch slice).
    pub fn call_inputs(&mut self, inputs: &[BatchInput]) -> Result<Vec<Tensor>> {
        let r = self.options.replication_factor;
        if let Some((lo, hi)) = self.local.filter(|&(lo, hi)| (lo, hi) != (0, r)) {
            return Err(Error::poptorch(format!(
                "this executor runs replicas {lo}..{hi} of {r}: a call needs every replica's gradients, so run it \
                 with the executors of the other replicas (begin_call, contribute, apply, end_call, assemble)"
            )));
        }
        let iterations = self.begin_call_inputs(inputs)?;
        for _ in 0..iterations {
            let mine = self.contribute()?;
            self.apply(&mine)?;
        }
        let out = self.end_call()?;
        self.assemble(vec![out])
    }

    /// Runs only replicas `lo..hi` of `replicationFactor` (the others run on other
    /// executors, [`super::replicas`]). Before compilation.
    pub fn set_local_replicas(&mut self, lo: usize, hi: usize) -> Result<()> {
        let r = self.options.replication_factor;
        if self.exe.is_some() {
            return Err(Error::poptorch("the replicas an executor runs must be set before the model is compiled"));
        }
        if lo >= hi || hi > r {
            return Err(Error::poptorch(format!(
                "replicas {lo}..{hi}: an executor runs a non-empty range of the model's {r} replicas (0..{r})"
            ))
            .with_option("replicationFactor"));
        }
        self.local = Some((lo, hi));
        Ok(())
    }

    /// The replicas this executor runs: `(first, end)`.
    pub fn local_replicas(&self) -> (usize, usize) {
        self.local.unwrap_or((0, self.options.replication_factor))
    }

    /// `f32`s of one replica's contribution to a step (0 for an inference model), once
    /// compiled: the gathered buffer holds `replicationFactor` of them, replica-major.
    pub fn contribution_len(&self) -> Option<usize> {
        self.exe.as_ref().map(|e| if self.training { e.layout.per_replica() } else { 0 })
    }

    /// Starts a call with `inputs` (the combined batch, all of it: each executor picks its
    /// replicas' micro-batches): compiles on the first call and checks the inputs. Returns
    /// the device iterations, each one [`Self::contribute`] then [`Self::apply`].
    pub fn begin_call(&mut self, inputs: &[Rc<Tensor>]) -> Result<usize> {
        self.begin_call_inputs(&combined(inputs))
    }

    /// [`Self::begin_call`] for inputs each given combined or as parts ([`BatchInput`]).
    /// Every executor of the model's replicas is given the same inputs.
    pub fn begin_call_inputs(&mut self, inputs: &[BatchInput]) -> Result<usize> {
        self.pending = None;
        if self.exe.is_none() {
            self.compile_inputs(inputs)?;
        }
        let types = self.combined_types(inputs)?;
        let exe = self.exe.as_ref().expect("compiled above");
        Self::validate_inputs(exe, &types)?;
        if !self.training && self.model.trained_version() != exe.uploaded_version {
            // A training wrapper of the same model has trained the weights since.
            self.copy_weights_to_device()?;
        }
        let exe = self.exe.as_ref().expect("compiled above");
        let b = exe.batching;
        let slices: Vec<Vec<Tensor>> = (inputs.iter().zip(&exe.inputs))
            .map(|(t, (name, _))| b.slices(name, t))
            .collect::<std::result::Result<_, _>>()?;
        self.pending = Some(Pending {
            slices,
            iteration: 0,
            contributed: false,
            loss_scaling: exe.loss_scaling,
            out: LocalOutputs::default(),
            stats: RunStats::default(),
        });
        Ok(b.device_iterations)
    }

    /// Runs this executor's replicas' micro-batches of the next device iteration and
    /// returns their contributions ([`super::replicas::Contributions`]: replicas `lo..hi`,
    /// in order; empty for an inference model). Their outputs are kept for
    /// [`Self::end_call`].
    pub fn contribute(&mut self) -> Result<Vec<f32>> {
        let (lo, hi) = self.local_replicas();
        let how = self.reduction();
        let training = self.training;
        let exe = self.exe.as_mut().ok_or_else(|| Error::poptorch(NO_EXECUTABLE))?;
        let p = self.pending.as_mut().ok_or_else(|| Error::poptorch("no call has begun: begin_call first"))?;
        let b = exe.batching;
        if p.contributed {
            return Err(Error::poptorch(format!(
                "device iteration {} is contributed already: apply the gathered contributions first",
                p.iteration
            )));
        }
        if p.iteration >= b.device_iterations {
            return Err(Error::poptorch(format!(
                "all {} device iterations have run: end the call",
                b.device_iterations
            )));
        }
        let d = p.iteration;
        // The anchored gradients, as PopART's Gradient___ tensors hold them: output indices.
        let grad_anchors: Vec<usize> = (exe.anchors.iter())
            .filter_map(|a| match a.source {
                AnchorSource::Gradient(k) => Some(exe.grads[k].1),
                AnchorSource::Updated(_) => None,
            })
            .collect();
        let mut accs: Vec<Accumulator> = exe.grads.iter().map(|_| Accumulator::new(b.replicas)).collect();
        let mut lower = vec![0.0f64; b.replicas];
        let ls = exe.loss_scaling;
        for a in 0..b.accumulation {
            for r in lo..hi {
                let mut args: Vec<Rc<Tensor>> = p.slices.iter().map(|s| Rc::new(s[b.chunk(d, a, r)].clone())).collect();
                if training {
                    args.push(Rc::new(Tensor::scalar(ls)));
                }
                let res = run(&exe.step, &mut exe.replicas[r], &args)?;
                let stats = &mut p.stats;
                stats.peak_bytes = stats.peak_bytes.max(res.stats.peak_bytes);
                stats.saved_for_backward = stats.saved_for_backward.max(res.stats.saved_for_backward);
                stats.nodes_run += res.stats.nodes_run;
                crate::exec::merge_op_times(&mut stats.op_time, &res.stats.op_time);
                let mut outs = res.outputs;
                let mut keep: Vec<Tensor> = outs[..exe.n_user_outputs].iter().map(|t| t.as_ref().clone()).collect();
                for (_, i) in &exe.input_grads {
                    keep.push(unscale(&outs[*i], ls)?);
                }
                let m = b.index(d, a, r);
                p.out.outputs.push((m, keep));
                p.out.anchors.push((m, grad_anchors.iter().map(|&i| outs[i].as_ref().clone()).collect()));
                if let Some((i, _)) = exe.stats {
                    lower[r] += outs[i].to_f64_vec()[0];
                }
                // The gradients are given up to their accumulators (no copy of the first):
                // each is an output of its own (autograd's `grad_outputs`), and one the run
                // still shares elsewhere is copied by `add_owned`.
                let spent = Rc::new(Tensor::scalar(0.0));
                for (acc, (name, i)) in accs.iter_mut().zip(&exe.grads) {
                    let g = std::mem::replace(&mut outs[*i], spent.clone());
                    acc.add_owned(r, g, &how).map_err(|e| e.context(format!("gradient of '{name}'")))?;
                }
            }
        }
        let mut packed = Vec::new();
        if training {
            packed.reserve(exe.layout.per_replica() * (hi - lo));
            for (r, &count) in lower.iter().enumerate().take(hi).skip(lo) {
                exe.layout.pack(r, &mut accs, count, &mut packed)?;
            }
        }
        p.loss_scaling = ls;
        p.contributed = true;
        Ok(packed)
    }

    /// Applies one device iteration's gathered contributions of every replica (`all`,
    /// replica-major, [`super::replicas::Contributions`]): the gradients reduced per weight
    /// group, unscaled, clipped and applied by the optimizer to every replica's weights (the
    /// same on every executor), and automatic loss scaling updated.
    pub fn apply(&mut self, all: &[f32]) -> Result<()> {
        self.apply_from(all.len(), |at, n| all[at..at + n].to_vec())
    }

    /// [`Self::apply`] of a gathered buffer of `len` values read piece by piece (`read(at,
    /// n)`: values `at..at + n`; [`super::replicas::Contributions::unpack_from`]).
    pub fn apply_from(&mut self, len: usize, read: impl FnMut(usize, usize) -> Vec<f32>) -> Result<()> {
        let how = self.reduction();
        let exe = self.exe.as_mut().ok_or_else(|| Error::poptorch(NO_EXECUTABLE))?;
        let p = self.pending.as_mut().ok_or_else(|| Error::poptorch("no call has begun: begin_call first"))?;
        if !p.contributed {
            return Err(Error::poptorch(format!(
                "device iteration {} has not been contributed: contribute before applying",
                p.iteration
            )));
        }
        match &self.optimizer {
            Some(opt) if self.training => {
                let (accs, lower) = exe.layout.unpack_from(len, read)?;
                Self::optimizer_step(exe, opt, &how, &accs, p.loss_scaling)?;
                if let Some((_, tracked)) = exe.stats {
                    let b = exe.batching;
                    let total = (tracked * b.accumulation * b.replicas) as f64;
                    exe.loss_scaling = update_loss_scale(p.loss_scaling, total - lower, lower, exe.max_loss_scaling);
                }
            }
            _ if len != 0 => {
                return Err(Error::poptorch(format!(
                    "an inference step has no gradients to apply, but {len} values were given"
                )))
            }
            _ => {}
        }
        p.iteration += 1;
        p.contributed = false;
        Ok(())
    }

    /// Ends a call whose device iterations have all been applied: the outputs this
    /// executor computed (for [`Self::assemble`]); a training model's weights are written
    /// back to the host model.
    pub fn end_call(&mut self) -> Result<LocalOutputs> {
        let exe = self.exe.as_ref().ok_or_else(|| Error::poptorch(NO_EXECUTABLE))?;
        let d = exe.batching.device_iterations;
        match &self.pending {
            None => return Err(Error::poptorch("no call has begun: begin_call first")),
            Some(p) if p.iteration < d || p.contributed => {
                return Err(Error::poptorch(format!(
                    "the call has applied {} of its {d} device iterations: contribute and apply the rest first",
                    p.iteration
                )))
            }
            Some(_) => {}
        }
        let p = self.pending.take().expect("checked above");
        self.last_stats = Some(p.stats);
        if self.training {
            self.copy_weights_to_host()?;
        }
        Ok(p.out)
    }

    /// A call's host outputs per output mode (and its anchored tensors, for
    /// `getAnchoredTensor`) from the outputs of every executor running the model's replicas
    /// (each micro-batch from exactly one part).
    pub fn assemble(&mut self, parts: Vec<LocalOutputs>) -> Result<Vec<Tensor>> {
        let exe = self.exe.as_ref().ok_or_else(|| Error::poptorch(NO_EXECUTABLE))?;
        let b = exe.batching;
        let (per_micro, anchor_micro) = LocalOutputs::merge(parts, b.micro_batches())?;
        let mode = self.options.resolved_output_mode(self.training);
        let out = b.assemble(mode, self.options.output_return_period, &per_micro)?;
        let grad_anchors: Vec<&Anchor> =
            exe.anchors.iter().filter(|a| matches!(a.source, AnchorSource::Gradient(_))).collect();
        // Per anchored gradient, per micro-batch: the one-output lists `Batching::assemble` takes.
        let mut per_anchor: Vec<Vec<Vec<Tensor>>> = vec![Vec::with_capacity(per_micro.len()); grad_anchors.len()];
        for (m, values) in anchor_micro.into_iter().enumerate() {
            if values.len() != grad_anchors.len() {
                return Err(Error::poptorch(format!(
                    "replica outputs: micro-batch {m} has {} anchored gradients, the model anchors {}",
                    values.len(),
                    grad_anchors.len()
                )));
            }
            for (per, v) in per_anchor.iter_mut().zip(values) {
                per.push(vec![v]);
            }
        }
        let mut anchored = BTreeMap::new();
        for (per, a) in per_anchor.iter().zip(&grad_anchors) {
            let v = b.assemble(a.mode, Some(a.period), per)?.remove(0);
            anchored.insert(a.short.clone(), v);
        }
        for a in &exe.anchors {
            if let AnchorSource::Updated(name) = &a.source {
                anchored.insert(a.short.clone(), exe.replicas[0].params[name].as_ref().clone());
            }
        }
        self.anchored = anchored;
        Ok(out)
    }

    fn reduction(&self) -> GradReduction {
        let t = &self.options.training;
        GradReduction {
            kind: t.accumulation_and_replication_reduction_type,
            strategy: t.mean_accumulation_and_replication_reduction_strategy,
            accumulation: t.gradient_accumulation,
            replicas: self.options.replication_factor,
            accum_dtype: self.optimizer.as_ref().map_or(DType::Float32, |o| o.accum_type()),
        }
    }

    /// One optimizer step from the accumulated gradients: reduce per weight group, divide
    /// by the loss scaling, clip to `max_grad_norm` (global norm, seen from each group's
    /// first replica), update on the group's first replica and share the new value.
    fn optimizer_step(
        exe: &mut Executable,
        opt: &Optimizer,
        how: &GradReduction,
        accs: &[Accumulator],
        loss_scaling: f32,
    ) -> Result<()> {
        // (param, group members, reduced gradient)
        let mut reduced: Vec<(String, Vec<usize>, ndarray::ArrayD<f32>)> = Vec::new();
        for (acc, (name, _)) in accs.iter().zip(&exe.grads) {
            for members in &exe.groups[name] {
                let mut g = acc.reduce(members, how).map_err(|e| e.context(format!("gradient of '{name}'")))?;
                if loss_scaling != 1.0 {
                    g.mapv_inplace(|x| x / loss_scaling);
                }
                reduced.push((name.clone(), members.clone(), g));
            }
        }
        let max_norm = opt.max_grad_norm();
        if max_norm.is_finite() {
            // Squared norm of every replica's view of the gradients.
            let mut sq = vec![0.0f64; exe.replicas.len()];
            for (_, members, g) in &reduced {
                let s: f64 = g.iter().map(|&x| (x as f64) * (x as f64)).sum();
                for &r in members {
                    sq[r] += s;
                }
            }
            for (_, members, g) in &mut reduced {
                let norm = sq[members[0]].sqrt() as f32;
                let factor = max_norm / norm.max(max_norm);
                if factor != 1.0 {
                    g.mapv_inplace(|x| x * factor);
                }
            }
        }
        for (name, members, g) in reduced {
            let step = opt.step_for(&name);
            let lead = members[0];
            optimizer_update(&mut exe.replicas[lead], &name, &step, &Tensor::F32(g))?;
            let value = exe.replicas[lead].params[&name].clone();
            for &r in &members[1..] {
                exe.replicas[r].params.insert(name.clone(), value.clone());
            }
        }
        Ok(())
    }
}
