//! `poptorch.Options` in JavaScript: a holder of the core's `compile::Options` (the one
//! parse and validation home: every setter here calls the core's, whose errors carry the
//! cause and the fix). Method names are PopTorch's; each returns the options (chaining),
//! and `opts.Training` / `opts.TensorLocations` change the same options.
//!
//! ```js
//! const opts = new poptorch.Options().deviceIterations(2).replicationFactor(2);
//! opts.Training.gradientAccumulation(4);
//! opts.setExecutionStrategy(new poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement));
//! opts.toJSON();                       // the page's Options JSON (camelCase)
//! poptorch.Options.fromJSON(json);     // and back, validated
//! ```
//!
//! Options given to `trainingModel`/`inferenceModel` are frozen (the wrapper keeps a copy,
//! as PopTorch does); a setter then fails with the core's explanation.

use super::super::args::{self, js_err, JsResult};
use super::enums;
use super::handles::{self, lookup, type_name};
use super::strategy::StrategyState;
use crate::compile::hardware::IpuGeneration;
use crate::compile::options::{
    CommGroupType, MeanReductionStrategy, OutputMode, ReductionType, TensorClass, TensorLocationSettings,
};
use crate::compile::Options;
use crate::trace::check;
use js_sys::JSON;
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;

/// The most a count option (device iterations, replicas, accumulation, …) may be.
const MAX_COUNT: usize = u32::MAX as usize;

type Shared = Rc<RefCell<Options>>;

/// `poptorch.Options()`.
#[wasm_bindgen(js_name = PoptorchOptions)]
pub struct PoptorchOptions {
    state: Shared,
    id: u32,
}

impl PoptorchOptions {
    fn with(state: Shared) -> PoptorchOptions {
        let id = handles::register(&state);
        PoptorchOptions { state, id }
    }
    fn same(&self) -> PoptorchOptions {
        PoptorchOptions { state: self.state.clone(), id: self.id }
    }
    /// Applies a core setter; its error (frozen options, a value PopTorch rejects) is thrown.
    fn set(
        &self,
        f: impl FnOnce(&mut Options) -> Result<&mut Options, crate::compile::Diagnostic>,
    ) -> JsResult<PoptorchOptions> {
        f(&mut self.state.borrow_mut()).map_err(js_err)?;
        Ok(self.same())
    }
}

/// The core options behind `v`, which must be a `poptorch.Options` (PopTorch's type error
/// otherwise); `None` when left out.
pub(crate) fn options_arg(v: &JsValue) -> JsResult<Option<Shared>> {
    if args::is_absent(v) {
        return Ok(None);
    }
    match lookup::<Options>(v)? {
        Some(s) => Ok(Some(s)),
        None => Err(args::type_error(&format!(
            "Invalid type: 'options' is of type {} (Expected poptorch.Options)",
            type_name(v)
        ))),
    }
}

fn count(v: &JsValue, what: &str) -> JsResult<usize> {
    args::count(v, what, MAX_COUNT)
}

fn flag(v: &JsValue, what: &str) -> JsResult<bool> {
    args::opt_bool(v, what, true)
}

#[wasm_bindgen(js_class = PoptorchOptions)]
impl PoptorchOptions {
    /// PopTorch's defaults.
    #[wasm_bindgen(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> PoptorchOptions {
        PoptorchOptions::with(Rc::new(RefCell::new(Options::new())))
    }

    /// Options from their JSON (the page's Options JSON, or `toJSON()`'s), validated by the
    /// core: an unknown key or a bad value is an error naming it.
    #[wasm_bindgen(js_name = fromJSON)]
    pub fn from_json(json: JsValue) -> JsResult<PoptorchOptions> {
        let text = if json.is_string() {
            args::string(&json, "Options.fromJSON: json", 1 << 20)?
        } else {
            args::object(&json, "Options.fromJSON: json")?;
            JSON::stringify(&json)?.as_string().unwrap_or_default()
        };
        let o = Options::from_json(&text).map_err(js_err)?;
        Ok(PoptorchOptions::with(Rc::new(RefCell::new(o))))
    }

    /// The options as JSON (every key, camelCase, `Training` and `TensorLocations` nested).
    #[wasm_bindgen(js_name = toJSON)]
    pub fn to_json(&self) -> JsResult<JsValue> {
        JSON::parse(&self.state.borrow().to_json())
    }

    /// An unfrozen copy.
    #[wasm_bindgen(js_name = clone)]
    pub fn clone_options(&self) -> JsResult<PoptorchOptions> {
        let o = Options::from_json(&self.state.borrow().to_json()).map_err(js_err)?;
        Ok(PoptorchOptions::with(Rc::new(RefCell::new(o))))
    }

    /// Whether a model wrapper has frozen these options.
    #[wasm_bindgen(getter)]
    pub fn frozen(&self) -> bool {
        self.state.borrow().is_frozen()
    }

    #[wasm_bindgen(js_name = _handle)]
    pub fn handle(&self) -> u32 {
        self.id
    }

    /// `deviceIterations(n)`: iterations on the device per host call (a whole number ≥ 1).
    #[wasm_bindgen(js_name = deviceIterations)]
    pub fn device_iterations(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] n: JsValue,
    ) -> JsResult<PoptorchOptions> {
        let n = count(&n, "Options.deviceIterations: n")?;
        self.set(|o| o.device_iterations(n))
    }

    /// `replicationFactor(n)`: data-parallel replicas.
    #[wasm_bindgen(js_name = replicationFactor)]
    pub fn replication_factor(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] n: JsValue,
    ) -> JsResult<PoptorchOptions> {
        let n = count(&n, "Options.replicationFactor: n")?;
        self.set(|o| o.replication_factor(n))
    }

    /// `inputReplicaGrouping(size, poptorch.CommGroupType.…)`: replicas of a group read the
    /// same input (checked against the replication factor set so far).
    #[wasm_bindgen(js_name = inputReplicaGrouping)]
    pub fn input_replica_grouping(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] size: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "CommGroupType")] kind: JsValue,
    ) -> JsResult<PoptorchOptions> {
        let size = count(&size, "Options.inputReplicaGrouping: input_group_size")?;
        let kind: CommGroupType = if args::is_absent(&kind) {
            CommGroupType::Consecutive
        } else {
            enums::parse(&kind, "Options.inputReplicaGrouping: input_group_type", &enums::comm_group_type())?
        };
        self.set(|o| o.input_replica_grouping(size, kind))
    }

    /// `broadcastBuffers(bool)` (default true).
    #[wasm_bindgen(js_name = broadcastBuffers)]
    pub fn broadcast_buffers(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] on: JsValue,
    ) -> JsResult<PoptorchOptions> {
        let on = flag(&on, "Options.broadcastBuffers: broadcast_buffers")?;
        self.set(|o| o.broadcast_buffers(on))
    }

    /// `autoRoundNumIPUs(bool)`: round the IPU count up to a power of two.
    #[wasm_bindgen(js_name = autoRoundNumIPUs)]
    pub fn auto_round_num_ipus(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] on: JsValue,
    ) -> JsResult<PoptorchOptions> {
        let on = flag(&on, "Options.autoRoundNumIPUs: auto_round")?;
        self.set(|o| o.auto_round_num_ipus(on))
    }

    /// `setExecutionStrategy(strategy)`: a `poptorch.PipelinedExecution`,
    /// `ShardedExecution`, `SerialPhasedExecution` or `ParallelPhasedExecution`.
    #[wasm_bindgen(js_name = setExecutionStrategy)]
    pub fn set_execution_strategy(
        &self,
        #[wasm_bindgen(
            unchecked_param_type = "PoptorchPipelinedExecution | PoptorchShardedExecution | PoptorchSerialPhasedExecution | PoptorchParallelPhasedExecution"
        )]
        strategy: JsValue,
    ) -> JsResult<PoptorchOptions> {
        let s = lookup::<StrategyState>(&strategy)?.ok_or_else(|| {
            args::type_error(&format!(
                "Options.setExecutionStrategy: strategy must be a poptorch execution strategy (PipelinedExecution, \
                 ShardedExecution, SerialPhasedExecution or ParallelPhasedExecution), got {}",
                args::describe(&strategy)
            ))
        })?;
        let s = s.borrow().clone();
        self.set(|o| o.set_execution_strategy(s))
    }

    /// `setAvailableMemoryProportion({ IPU0: 0.5, … })`.
    #[wasm_bindgen(js_name = setAvailableMemoryProportion)]
    pub fn set_available_memory_proportion(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Record<string, number>")] map: JsValue,
    ) -> JsResult<PoptorchOptions> {
        let what = "Options.setAvailableMemoryProportion: proportions";
        args::object(&map, what)?;
        let mut pairs = Vec::new();
        for (k, v) in args::entries(&map, what, check::MAX_LIST)? {
            let k = args::string(&k, &format!("{what}: a key"), check::MAX_NAME_BYTES)?;
            let x = args::number(&v, &format!("{what}[{k:?}]"))?;
            pairs.push((k, x));
        }
        let refs: Vec<(&str, f64)> = pairs.iter().map(|(k, x)| (k.as_str(), *x)).collect();
        self.set(|o| o.set_available_memory_proportion(&refs))
    }

    /// `outputMode(poptorch.OutputMode.…, outputReturnPeriod)` (the period for EveryN).
    #[wasm_bindgen(js_name = outputMode)]
    pub fn output_mode(
        &self,
        #[wasm_bindgen(unchecked_param_type = "OutputMode")] mode: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] period: JsValue,
    ) -> JsResult<PoptorchOptions> {
        let mode: OutputMode = enums::parse(&mode, "Options.outputMode: output_mode", &enums::output_mode())?;
        let period = args::opt_count(&period, "Options.outputMode: output_return_period", MAX_COUNT)?;
        self.set(|o| o.output_mode(mode, period))
    }

    /// `anchorTensor(shortName, longName, outputMode?, outputReturnPeriod?)`: keep PopART's
    /// tensor `longName` after each run (`Gradient___model.<parameter>`, the gradient a step
    /// computed; `UpdatedVar___model.<parameter>`, the parameter after the update), read with
    /// `model.getAnchoredTensor(shortName)`. The output mode defaults to the model's.
    #[wasm_bindgen(js_name = anchorTensor)]
    pub fn anchor_tensor(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] short_name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] long_name: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "OutputMode")] mode: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] period: JsValue,
    ) -> JsResult<PoptorchOptions> {
        let short = args::string(&short_name, "Options.anchorTensor: short_name", check::MAX_NAME_BYTES)?;
        let long = args::string(&long_name, "Options.anchorTensor: long_name", check::MAX_NAME_BYTES)?;
        let mode: Option<OutputMode> = if args::is_absent(&mode) {
            None
        } else {
            Some(enums::parse(&mode, "Options.anchorTensor: output_mode", &enums::output_mode())?)
        };
        let period = args::opt_count(&period, "Options.anchorTensor: output_return_period", MAX_COUNT)?;
        self.set(|o| o.anchor_tensor(&short, &long, mode, period))
    }

    /// `randomSeed(seed)`: a whole number from 0 to 2^53 − 1.
    #[wasm_bindgen(js_name = randomSeed)]
    pub fn random_seed(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] seed: JsValue,
    ) -> JsResult<PoptorchOptions> {
        let seed = args::whole(&seed, "Options.randomSeed: random_seed", check::MAX_SEED)?;
        self.set(|o| o.random_seed(seed))
    }

    /// The IPU generation to plan for: `"mk1"`, `"mk2"` (the default) or `"bow"` (also
    /// `"ipu1"`, `"ipu2"`, PopTorch's IPU Model names).
    #[wasm_bindgen(js_name = ipuGeneration)]
    pub fn ipu_generation(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] generation: JsValue,
    ) -> JsResult<PoptorchOptions> {
        let s = args::string(&generation, "Options.ipuGeneration: generation", 16)?;
        let g: IpuGeneration = serde_json::from_value(serde_json::Value::String(s.clone())).map_err(|_| {
            args::error(&format!(
                "Options.ipuGeneration: generation must be \"mk1\", \"mk2\" or \"bow\" (or \"ipu1\", \"ipu2\"), got {s:?}"
            ))
        })?;
        self.set(|o| o.ipu_generation(g))
    }

    /// `opts.Training`: the training options of these options.
    #[wasm_bindgen(getter, js_name = Training)]
    pub fn training(&self) -> PoptorchTrainingOptions {
        PoptorchTrainingOptions { state: self.state.clone() }
    }

    /// `opts.TensorLocations`: where each tensor class lives.
    #[wasm_bindgen(getter, js_name = TensorLocations)]
    pub fn tensor_locations(&self) -> PoptorchTensorLocations {
        PoptorchTensorLocations { state: self.state.clone() }
    }

    /// `opts.Precision`: partials type, stochastic rounding, floating point exceptions.
    #[wasm_bindgen(getter, js_name = Precision)]
    pub fn precision(&self) -> PoptorchPrecisionOptions {
        PoptorchPrecisionOptions { state: self.state.clone() }
    }

    /// `opts._Popart`: PopART's session options PopTorch passes through (`set(key, value)`).
    #[wasm_bindgen(getter, js_name = _Popart)]
    pub fn popart(&self) -> PoptorchPopartOptions {
        PoptorchPopartOptions { state: self.state.clone() }
    }
}

/// `opts._Popart` (`_PopartOptions`): PopART's session options by name. Only the ones the
/// planner models are taken: `autoRecomputation` (a `popart.RecomputationType` number).
#[wasm_bindgen(js_name = PoptorchPopartOptions)]
pub struct PoptorchPopartOptions {
    state: Shared,
}

#[wasm_bindgen(js_class = PoptorchPopartOptions)]
impl PoptorchPopartOptions {
    /// `set("autoRecomputation", int(popart.RecomputationType.RecomputeAll))`.
    pub fn set(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] key: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] value: JsValue,
    ) -> JsResult<PoptorchPopartOptions> {
        let key = args::string(&key, "Options._Popart.set: key", 64)?;
        match key.as_str() {
            "autoRecomputation" => {
                let n = args::whole(&value, "Options._Popart.set(\"autoRecomputation\"): value", 16)?;
                let r = crate::compile::options::Recomputation::from_popart(n).map_err(js_err)?;
                self.state.borrow_mut().auto_recomputation(r).map_err(js_err)?;
            }
            other => {
                return Err(args::error(&format!(
                    "Options._Popart.set: {other:?} is not a PopART option the planner models (it takes \
                     \"autoRecomputation\")"
                )))
            }
        }
        Ok(PoptorchPopartOptions { state: self.state.clone() })
    }
}

/// `opts.Precision` (`_PrecisionOptions`).
#[wasm_bindgen(js_name = PoptorchPrecisionOptions)]
pub struct PoptorchPrecisionOptions {
    state: Shared,
}

impl PoptorchPrecisionOptions {
    fn set(
        &self,
        f: impl FnOnce(&mut Options) -> Result<&mut Options, crate::compile::Diagnostic>,
    ) -> JsResult<PoptorchPrecisionOptions> {
        f(&mut self.state.borrow_mut()).map_err(js_err)?;
        Ok(PoptorchPrecisionOptions { state: self.state.clone() })
    }
}

#[wasm_bindgen(js_class = PoptorchPrecisionOptions)]
impl PoptorchPrecisionOptions {
    /// `setPartialsType(dtype)`: `"float32"` (`"float"`, PopTorch's default) or `"float16"`
    /// (`"half"`) partial results for matrix products and convolutions.
    #[wasm_bindgen(js_name = setPartialsType)]
    pub fn set_partials_type(
        &self,
        #[wasm_bindgen(unchecked_param_type = "\"float32\" | \"float16\" | \"float\" | \"half\"")] dtype: JsValue,
    ) -> JsResult<PoptorchPrecisionOptions> {
        let what = "Options.Precision.setPartialsType: dtype";
        let d = match args::string(&dtype, what, 16)?.as_str() {
            "float32" | "float" => crate::tensor::DType::Float32,
            "float16" | "half" => crate::tensor::DType::Float16,
            "int32" => crate::tensor::DType::Int32,
            "bool" => crate::tensor::DType::Bool,
            other => {
                return Err(args::error(&format!(
                    "{what} must be \"float32\" or \"float16\" (\"float\" or \"half\"), got {other:?}"
                )))
            }
        };
        self.set(|o| o.set_partials_type(d))
    }

    /// `enableStochasticRounding(bool)`: float16 results rounded up or down at random.
    #[wasm_bindgen(js_name = enableStochasticRounding)]
    pub fn enable_stochastic_rounding(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] on: JsValue,
    ) -> JsResult<PoptorchPrecisionOptions> {
        let on = flag(&on, "Options.Precision.enableStochasticRounding: enabled")?;
        self.set(|o| o.enable_stochastic_rounding(on))
    }

    /// `enableFloatingPointExceptions(bool)`.
    #[wasm_bindgen(js_name = enableFloatingPointExceptions)]
    pub fn enable_floating_point_exceptions(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] on: JsValue,
    ) -> JsResult<PoptorchPrecisionOptions> {
        let on = flag(&on, "Options.Precision.enableFloatingPointExceptions: enabled")?;
        self.set(|o| o.enable_floating_point_exceptions(on))
    }
}

/// `opts.Training` (`_TrainingOptions`). "You must not set these options for inference
/// models" (gradient accumulation above 1 is then an error).
#[wasm_bindgen(js_name = PoptorchTrainingOptions)]
pub struct PoptorchTrainingOptions {
    state: Shared,
}

impl PoptorchTrainingOptions {
    fn set(
        &self,
        f: impl FnOnce(&mut Options) -> Result<&mut Options, crate::compile::Diagnostic>,
    ) -> JsResult<PoptorchTrainingOptions> {
        f(&mut self.state.borrow_mut()).map_err(js_err)?;
        Ok(PoptorchTrainingOptions { state: self.state.clone() })
    }
}

#[wasm_bindgen(js_class = PoptorchTrainingOptions)]
impl PoptorchTrainingOptions {
    /// `gradientAccumulation(n)`: micro-batches per optimizer step (a whole number ≥ 1).
    #[wasm_bindgen(js_name = gradientAccumulation)]
    pub fn gradient_accumulation(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] n: JsValue,
    ) -> JsResult<PoptorchTrainingOptions> {
        let n = count(&n, "Options.Training.gradientAccumulation: gradient_accumulation")?;
        self.set(|o| o.gradient_accumulation(n))
    }

    /// `accumulationAndReplicationReductionType(poptorch.ReductionType.Mean|Sum)`.
    #[wasm_bindgen(js_name = accumulationAndReplicationReductionType)]
    pub fn accumulation_and_replication_reduction_type(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ReductionType")] t: JsValue,
    ) -> JsResult<PoptorchTrainingOptions> {
        let t: ReductionType = enums::parse(
            &t,
            "Options.Training.accumulationAndReplicationReductionType: reduction_type",
            &enums::reduction_type(),
        )?;
        self.set(|o| o.accumulation_and_replication_reduction_type(t))
    }

    /// `setMeanAccumulationAndReplicationReductionStrategy(poptorch.MeanReductionStrategy.…)`.
    #[wasm_bindgen(js_name = setMeanAccumulationAndReplicationReductionStrategy)]
    pub fn set_mean_strategy(
        &self,
        #[wasm_bindgen(unchecked_param_type = "MeanReductionStrategy")] s: JsValue,
    ) -> JsResult<PoptorchTrainingOptions> {
        let s: MeanReductionStrategy = enums::parse(
            &s,
            "Options.Training.setMeanAccumulationAndReplicationReductionStrategy: mean_reduction_strategy",
            &enums::mean_reduction_strategy(),
        )?;
        self.set(|o| o.set_mean_accumulation_and_replication_reduction_strategy(s))
    }

    /// `setAutomaticLossScaling(bool)`: PopART's automatic loss scaling (float16 gradients).
    #[wasm_bindgen(js_name = setAutomaticLossScaling)]
    pub fn set_automatic_loss_scaling(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] on: JsValue,
    ) -> JsResult<PoptorchTrainingOptions> {
        let on = flag(&on, "Options.Training.setAutomaticLossScaling: enabled")?;
        self.set(|o| o.set_automatic_loss_scaling(on))
    }
}

/// `poptorch.TensorLocationSettings()`: where one tensor class lives.
#[wasm_bindgen(js_name = PoptorchTensorLocationSettings)]
pub struct PoptorchTensorLocationSettings {
    state: Rc<RefCell<TensorLocationSettings>>,
    id: u32,
}

impl PoptorchTensorLocationSettings {
    fn update(&self, f: impl FnOnce(&mut TensorLocationSettings)) -> PoptorchTensorLocationSettings {
        f(&mut self.state.borrow_mut());
        PoptorchTensorLocationSettings { state: self.state.clone(), id: self.id }
    }
}

#[wasm_bindgen(js_class = PoptorchTensorLocationSettings)]
impl PoptorchTensorLocationSettings {
    /// Nothing set: the strategy's default location.
    #[wasm_bindgen(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> PoptorchTensorLocationSettings {
        let state = Rc::new(RefCell::new(TensorLocationSettings::default()));
        let id = handles::register(&state);
        PoptorchTensorLocationSettings { state, id }
    }
    /// `useOnChipStorage(bool)`: false puts the class in Streaming Memory.
    #[wasm_bindgen(js_name = useOnChipStorage)]
    pub fn use_on_chip_storage(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] on: JsValue,
    ) -> JsResult<PoptorchTensorLocationSettings> {
        let on = flag(&on, "TensorLocationSettings.useOnChipStorage: use")?;
        Ok(self.update(|s| s.use_on_chip_storage = Some(on)))
    }
    /// `useReplicatedTensorSharding(bool)`.
    #[wasm_bindgen(js_name = useReplicatedTensorSharding)]
    pub fn use_replicated_tensor_sharding(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] on: JsValue,
    ) -> JsResult<PoptorchTensorLocationSettings> {
        let on = flag(&on, "TensorLocationSettings.useReplicatedTensorSharding: use")?;
        Ok(self.update(|s| s.use_replicated_tensor_sharding = on))
    }
    /// `minElementsForOffChip(n)`: smaller tensors stay on chip.
    #[wasm_bindgen(js_name = minElementsForOffChip)]
    pub fn min_elements_for_off_chip(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] n: JsValue,
    ) -> JsResult<PoptorchTensorLocationSettings> {
        let n = count(&n, "TensorLocationSettings.minElementsForOffChip: min")?;
        Ok(self.update(|s| s.min_elements_for_off_chip = n))
    }
    /// `minElementsForReplicatedTensorSharding(n)`.
    #[wasm_bindgen(js_name = minElementsForReplicatedTensorSharding)]
    pub fn min_elements_for_replicated_tensor_sharding(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] n: JsValue,
    ) -> JsResult<PoptorchTensorLocationSettings> {
        let n = count(&n, "TensorLocationSettings.minElementsForReplicatedTensorSharding: min")?;
        Ok(self.update(|s| s.min_elements_for_replicated_tensor_sharding = n))
    }
    /// `useIOTilesToLoad(bool)`.
    #[wasm_bindgen(js_name = useIOTilesToLoad)]
    pub fn use_io_tiles_to_load(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] on: JsValue,
    ) -> JsResult<PoptorchTensorLocationSettings> {
        let on = flag(&on, "TensorLocationSettings.useIOTilesToLoad: use")?;
        Ok(self.update(|s| s.use_io_tiles_to_load = on))
    }
    /// `useIOTilesToStore(bool)`.
    #[wasm_bindgen(js_name = useIOTilesToStore)]
    pub fn use_io_tiles_to_store(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] on: JsValue,
    ) -> JsResult<PoptorchTensorLocationSettings> {
        let on = flag(&on, "TensorLocationSettings.useIOTilesToStore: use")?;
        Ok(self.update(|s| s.use_io_tiles_to_store = on))
    }
    #[wasm_bindgen(js_name = toJSON)]
    pub fn to_json(&self) -> JsResult<JsValue> {
        super::super::to_js(&*self.state.borrow())
    }
    #[wasm_bindgen(js_name = _handle)]
    pub fn handle(&self) -> u32 {
        self.id
    }
}

/// `opts.TensorLocations`.
#[wasm_bindgen(js_name = PoptorchTensorLocations)]
pub struct PoptorchTensorLocations {
    state: Shared,
}

impl PoptorchTensorLocations {
    fn set_class(&self, class: TensorClass, v: &JsValue, what: &str) -> JsResult<PoptorchTensorLocations> {
        let s = lookup::<TensorLocationSettings>(v)?.ok_or_else(|| {
            args::type_error(&format!(
                "Options.TensorLocations.{what}: location must be a poptorch.TensorLocationSettings, got {}",
                args::describe(v)
            ))
        })?;
        let s = *s.borrow();
        self.state.borrow_mut().set_tensor_location(class, s).map_err(js_err)?;
        Ok(PoptorchTensorLocations { state: self.state.clone() })
    }
}

#[wasm_bindgen(js_class = PoptorchTensorLocations)]
impl PoptorchTensorLocations {
    #[wasm_bindgen(js_name = setActivationLocation)]
    pub fn set_activation_location(
        &self,
        #[wasm_bindgen(unchecked_param_type = "PoptorchTensorLocationSettings")] location: JsValue,
    ) -> JsResult<PoptorchTensorLocations> {
        self.set_class(TensorClass::Activation, &location, "setActivationLocation")
    }
    #[wasm_bindgen(js_name = setWeightLocation)]
    pub fn set_weight_location(
        &self,
        #[wasm_bindgen(unchecked_param_type = "PoptorchTensorLocationSettings")] location: JsValue,
    ) -> JsResult<PoptorchTensorLocations> {
        self.set_class(TensorClass::Weight, &location, "setWeightLocation")
    }
    #[wasm_bindgen(js_name = setOptimizerLocation)]
    pub fn set_optimizer_location(
        &self,
        #[wasm_bindgen(unchecked_param_type = "PoptorchTensorLocationSettings")] location: JsValue,
    ) -> JsResult<PoptorchTensorLocations> {
        self.set_class(TensorClass::Optimizer, &location, "setOptimizerLocation")
    }
    #[wasm_bindgen(js_name = setAccumulatorLocation)]
    pub fn set_accumulator_location(
        &self,
        #[wasm_bindgen(unchecked_param_type = "PoptorchTensorLocationSettings")] location: JsValue,
    ) -> JsResult<PoptorchTensorLocations> {
        self.set_class(TensorClass::Accumulator, &location, "setAccumulatorLocation")
    }
    /// `numIOTiles(n)`: an even number from 32 to 192.
    #[wasm_bindgen(js_name = numIOTiles)]
    pub fn num_io_tiles(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] n: JsValue,
    ) -> JsResult<PoptorchTensorLocations> {
        let n = count(&n, "Options.TensorLocations.numIOTiles: num_tiles")?;
        self.state.borrow_mut().num_io_tiles(n).map_err(js_err)?;
        Ok(PoptorchTensorLocations { state: self.state.clone() })
    }
}
