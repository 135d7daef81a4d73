//! `poptorch.Options` as one Rust type: every value PopTorch validates is validated the same
//! way (the same cause and fix, in our words), by the setters and by [`Options::from_json`].
//! [`Options::freeze`] makes later setters fail, as PopTorch freezes options passed to a
//! model wrapper.
//!
//! JSON (serde, camelCase keys; every key optional, unknown keys are rejected by name):
//! ```json
//! { "deviceIterations": 1, "replicationFactor": 1,
//!   "inputReplicaGrouping": {"size": 1, "type": "consecutive"},
//!   "broadcastBuffers": true, "autoRoundNumIPUs": false,
//!   "executionStrategy": {"type": "pipelined", "autoStage": "sameAsIpu"},
//!   "availableMemoryProportion": {"IPU0": 0.6},
//!   "outputMode": "default", "outputReturnPeriod": null, "randomSeed": null,
//!   "ipuGeneration": "mk2", "autoRecomputation": "pipeline",
//!   "Training": {"gradientAccumulation": 1, "accumulationAndReplicationReductionType": "mean",
//!                "meanAccumulationAndReplicationReductionStrategy": "post", "automaticLossScaling": false},
//!   "TensorLocations": {"numIOTiles": null,
//!                       "activation": {"useOnChipStorage": true, "useReplicatedTensorSharding": false,
//!                                      "minElementsForOffChip": 0, "minElementsForReplicatedTensorSharding": 0,
//!                                      "useIOTilesToLoad": false, "useIOTilesToStore": false},
//!                       "weight": null, "optimizer": null, "accumulator": null},
//!   "Precision": {"partialsType": "float", "enableStochasticRounding": false,
//!                 "enableFloatingPointExceptions": false},
//!   "anchoredTensors": {"grad_bias": {"longName": "Gradient___model.fc2.bias",
//!                                     "outputMode": null, "outputReturnPeriod": 1}} }
//! ```
//! `Training` and `TensorLocations` are nested as in PopTorch (`opts.Training.…`). A tensor
//! location left `null` takes the strategy's default: on chip, except for phased execution,
//! where all four classes default to Streaming Memory.

use super::error::Diagnostic;
use super::hardware::IpuGeneration;
use super::strategy::ExecutionStrategy;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `poptorch.CommGroupType`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CommGroupType {
    /// One group of every replica (not valid for inputs).
    All,
    /// Groups of consecutive replicas: {0..k-1}, {k..2k-1}, ….
    #[default]
    Consecutive,
    /// Strided groups: {0, m, 2m, …}, {1, m+1, …}.
    Orthogonal,
    /// Every replica on its own (for inputs: the same as size 1, Consecutive).
    NoGrouping,
}

/// `inputReplicaGrouping(size, type)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputReplicaGrouping {
    pub size: usize,
    #[serde(rename = "type")]
    pub kind: CommGroupType,
}

impl Default for InputReplicaGrouping {
    fn default() -> Self {
        InputReplicaGrouping { size: 1, kind: CommGroupType::Consecutive }
    }
}

/// `poptorch.OutputMode`: which outputs come back to the host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OutputMode {
    /// The last iteration's outputs.
    Final,
    /// Every N-th iteration's outputs (`outputReturnPeriod`).
    EveryN,
    /// Every iteration's outputs.
    All,
    /// The sum over iterations.
    Sum,
    /// `All` for inference, `Final` for training.
    #[default]
    Default,
}

/// `poptorch.ReductionType` for gradients across accumulation steps and replicas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ReductionType {
    Sum,
    #[default]
    Mean,
    /// Not accepted for accumulation and replication (PopTorch's error).
    NoReduction,
}

/// `poptorch.MeanReductionStrategy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MeanReductionStrategy {
    /// A running mean, updated each step.
    Running,
    /// Divide by accumulation × replicas after the reduction (the default).
    #[default]
    Post,
    /// As Post, also scaling the loss.
    PostAndLoss,
}

/// Which activations are recomputed in the backward pass (PopART `autoRecomputation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Recomputation {
    /// Keep every activation the backward pass reads.
    None,
    /// Pipelined training stashes only each stage's inputs and recomputes the rest in the
    /// backward stage: PopTorch's setting whenever it pipelines.
    #[default]
    Pipeline,
    /// PopART's `RecomputeAll` (with `explicitRecomputation`): every forward activation but
    /// the model's inputs and its `recomputationCheckpoint`s is dropped after the forward
    /// pass and recomputed for the backward pass, also in a single-stage (one-IPU) model,
    /// one segment between checkpoints at a time (Graphcore's CNNs on one IPU,
    /// `recompute_mode: manual`). Pipelined, it is `Pipeline`.
    RecomputeAll,
}

impl Recomputation {
    /// PopART's `RecomputationType` numbers (`popart.RecomputationType`: None 0, Standard 1,
    /// NormOnly 2, Pipeline 3, RecomputeAll 4), as PopTorch's
    /// `opts._Popart.set("autoRecomputation", int(popart.RecomputationType.RecomputeAll))`
    /// takes them: the ones the planner models. Source: PopART's
    /// `willow/include/popart/sessionoptions.hpp`, `enum class RecomputationType` (None = 0,
    /// then Standard, NormOnly, Pipeline, RecomputeAll in that order).
    pub const POPART: [(u32, &'static str, Recomputation); 3] = [
        (0, "None", Recomputation::None),
        (3, "Pipeline", Recomputation::Pipeline),
        (4, "RecomputeAll", Recomputation::RecomputeAll),
    ];

    /// The setting of PopART number `n`, or an error naming the numbers that are modelled.
    pub fn from_popart(n: u64) -> Result<Recomputation, Diagnostic> {
        Recomputation::POPART.iter().find(|(k, _, _)| u64::from(*k) == n).map(|(_, _, r)| *r).ok_or_else(|| {
            let known: Vec<String> = Recomputation::POPART.iter().map(|(k, name, _)| format!("{k} ({name})")).collect();
            Diagnostic::new(
                "options_recomputation",
                format!(
                    "autoRecomputation {n} is not one the planner models (popart.RecomputationType {}).",
                    if n == 1 {
                        "Standard"
                    } else if n == 2 {
                        "NormOnly"
                    } else {
                        "has no such number"
                    }
                ),
                format!("Use {}.", known.join(", ")),
            )
            .on("autoRecomputation")
        })
    }

    /// Its PopART number and name (`popart.RecomputationType.<name>`).
    pub fn popart(self) -> (u32, &'static str) {
        Recomputation::POPART.iter().find(|(_, _, r)| *r == self).map(|(k, n, _)| (*k, *n)).unwrap_or((3, "Pipeline"))
    }
}

/// `opts.Training`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TrainingOptions {
    pub gradient_accumulation: usize,
    pub accumulation_and_replication_reduction_type: ReductionType,
    pub mean_accumulation_and_replication_reduction_strategy: MeanReductionStrategy,
    pub automatic_loss_scaling: bool,
}

impl Default for TrainingOptions {
    fn default() -> Self {
        TrainingOptions {
            gradient_accumulation: 1,
            accumulation_and_replication_reduction_type: ReductionType::Mean,
            mean_accumulation_and_replication_reduction_strategy: MeanReductionStrategy::Post,
            automatic_loss_scaling: false,
        }
    }
}

/// `opts.Precision.setPartialsType(dtype)`: the type of dense products' partial results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PartialsType {
    /// `torch.float` (PopTorch's default).
    #[default]
    Float,
    /// `torch.half`: half the partials' memory, at the cost of precision.
    Half,
}

impl PartialsType {
    /// Bytes per partial result.
    pub fn bytes(self) -> u64 {
        match self {
            PartialsType::Float => 4,
            PartialsType::Half => 2,
        }
    }
}

/// `opts.Precision`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PrecisionOptions {
    /// `setPartialsType(torch.float | torch.half)` (PopART `partialsTypeMatMuls` and the
    /// convolutions' `partialsType`).
    pub partials_type: PartialsType,
    /// `enableStochasticRounding(bool)`: float16 results are rounded up or down at random
    /// (unbiased on average; training converges better, results are not deterministic).
    pub enable_stochastic_rounding: bool,
    /// `enableFloatingPointExceptions(bool)`.
    pub enable_floating_point_exceptions: bool,
}

/// `poptorch.TensorLocationSettings`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TensorLocationSettings {
    /// `useOnChipStorage(False)` puts the class in Streaming Memory; unset, the strategy's
    /// default (Streaming Memory for phased execution, on chip otherwise).
    pub use_on_chip_storage: Option<bool>,
    pub use_replicated_tensor_sharding: bool,
    /// Tensors with fewer elements stay on chip.
    pub min_elements_for_off_chip: usize,
    /// Tensors with fewer elements are not sharded across replicas.
    pub min_elements_for_replicated_tensor_sharding: usize,
    #[serde(rename = "useIOTilesToLoad")]
    pub use_io_tiles_to_load: bool,
    #[serde(rename = "useIOTilesToStore")]
    pub use_io_tiles_to_store: bool,
}

impl TensorLocationSettings {
    /// On-chip storage (PopTorch's default outside phased execution).
    pub fn on_chip() -> TensorLocationSettings {
        TensorLocationSettings { use_on_chip_storage: Some(true), ..Default::default() }
    }
    /// Streaming Memory.
    pub fn off_chip() -> TensorLocationSettings {
        TensorLocationSettings { use_on_chip_storage: Some(false), ..Default::default() }
    }
}

/// `opts.TensorLocations`: where each tensor class lives; `None` = the strategy's default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TensorLocations {
    #[serde(rename = "numIOTiles")]
    pub num_io_tiles: Option<usize>,
    pub activation: Option<TensorLocationSettings>,
    pub weight: Option<TensorLocationSettings>,
    pub optimizer: Option<TensorLocationSettings>,
    pub accumulator: Option<TensorLocationSettings>,
}

/// The four tensor classes of `TensorLocations`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorClass {
    Activation,
    Weight,
    Optimizer,
    Accumulator,
}

/// `poptorch.Options`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Options {
    pub device_iterations: usize,
    pub replication_factor: usize,
    pub input_replica_grouping: InputReplicaGrouping,
    pub broadcast_buffers: bool,
    #[serde(rename = "autoRoundNumIPUs")]
    pub auto_round_num_ipus: bool,
    pub execution_strategy: ExecutionStrategy,
    /// `setAvailableMemoryProportion({"IPU0": 0.5})`; IPUs not named use 0.6.
    pub available_memory_proportion: BTreeMap<String, f64>,
    pub output_mode: OutputMode,
    pub output_return_period: Option<usize>,
    pub random_seed: Option<u64>,
    pub ipu_generation: IpuGeneration,
    pub auto_recomputation: Recomputation,
    #[serde(rename = "Training")]
    pub training: TrainingOptions,
    #[serde(rename = "TensorLocations")]
    pub tensor_locations: TensorLocations,
    #[serde(rename = "Precision")]
    pub precision: PrecisionOptions,
    /// `anchorTensor(short_name, long_name, …)`: tensors kept after each run for
    /// `getAnchoredTensor(short_name)`, by short name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub anchored_tensors: BTreeMap<String, AnchoredTensor>,
    #[serde(skip)]
    frozen: bool,
}

/// One `anchorTensor(short_name, long_name, output_mode, output_return_period)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnchoredTensor {
    /// PopART's name of the tensor: `Gradient___model.<parameter>` (the gradient a training
    /// step computed) or `UpdatedVar___model.<parameter>` (the parameter after the update).
    pub long_name: String,
    /// When values come back; `None`: the model's output mode.
    #[serde(default)]
    pub output_mode: Option<OutputMode>,
    /// The period of `EveryN` (1 for the other modes, as PopTorch sets it).
    #[serde(default = "one")]
    pub output_return_period: usize,
}

fn one() -> usize {
    1
}

/// The most anchored tensors one Options holds.
pub const MAX_ANCHORS: usize = 4096;

impl Default for Options {
    fn default() -> Self {
        Options {
            device_iterations: 1,
            replication_factor: 1,
            input_replica_grouping: InputReplicaGrouping::default(),
            broadcast_buffers: true,
            auto_round_num_ipus: false,
            execution_strategy: ExecutionStrategy::default(),
            available_memory_proportion: BTreeMap::new(),
            output_mode: OutputMode::Default,
            output_return_period: None,
            random_seed: None,
            ipu_generation: IpuGeneration::Mk2,
            auto_recomputation: Recomputation::Pipeline,
            training: TrainingOptions::default(),
            tensor_locations: TensorLocations::default(),
            precision: PrecisionOptions::default(),
            anchored_tensors: BTreeMap::new(),
            frozen: false,
        }
    }
}

/// PopTorch's default share of tile memory for temporaries (`set_available_memory`).
pub const DEFAULT_AVAILABLE_MEMORY_PROPORTION: f64 = 0.6;

type Set<'a> = Result<&'a mut Options, Diagnostic>;

// ---- the checks, shared by the setters and `validate` ----

/// `name` (option `key`, or a part of it) must not be 0.
fn check_positive(key: &str, name: &str, n: usize) -> Result<(), Diagnostic> {
    if n == 0 {
        return Err(Diagnostic::new(
            "options_not_positive",
            format!("{name} must be a positive whole number, got 0."),
            format!("Set {name} to 1 or more."),
        )
        .on(key));
    }
    Ok(())
}

fn check_grouping(g: InputReplicaGrouping, replicas: usize) -> Result<(), Diagnostic> {
    if g.kind == CommGroupType::All {
        return Err(Diagnostic::new(
            "input_replica_grouping_all",
            "inputReplicaGrouping: the input group type cannot be All (every replica would read the same input).",
            "Use Consecutive or Orthogonal groups, or NoGrouping.",
        )
        .on("inputReplicaGrouping"));
    }
    check_positive("inputReplicaGrouping", "inputReplicaGrouping's group size", g.size)?;
    if g.size > replicas {
        return Err(Diagnostic::new(
            "input_replica_grouping_too_large",
            format!(
                "inputReplicaGrouping: the input group size ({}) cannot be larger than replicationFactor ({replicas}).",
                g.size
            ),
            "Use a group size no larger than the number of replicas, or raise replicationFactor first.",
        )
        .on("inputReplicaGrouping"));
    }
    if !replicas.is_multiple_of(g.size) {
        return Err(Diagnostic::new(
            "input_replica_grouping_not_factor",
            format!(
                "inputReplicaGrouping: the input group size ({}) must divide replicationFactor ({replicas}).",
                g.size
            ),
            "Pick a group size that is a factor of the number of replicas.",
        )
        .on("inputReplicaGrouping"));
    }
    Ok(())
}

fn check_reduction(r: ReductionType) -> Result<(), Diagnostic> {
    if r == ReductionType::NoReduction {
        return Err(Diagnostic::new(
            "reduction_type_no_reduction",
            "Training.accumulationAndReplicationReductionType must be Mean or Sum: gradients over \
             accumulation steps and replicas have to be reduced.",
            "Use poptorch.ReductionType.Mean (the default) or poptorch.ReductionType.Sum.",
        )
        .on("Training.accumulationAndReplicationReductionType"));
    }
    Ok(())
}

fn check_output_mode(mode: OutputMode, period: Option<usize>) -> Result<(), Diagnostic> {
    if mode == OutputMode::EveryN && period.unwrap_or(0) == 0 {
        return Err(Diagnostic::new(
            "output_mode_every_n_period",
            "OutputMode.EveryN needs an output return period, a positive whole number.",
            "Call outputMode(OutputMode.EveryN, period) with period >= 1 (JSON: \"outputReturnPeriod\").",
        )
        .on("outputMode"));
    }
    Ok(())
}

fn check_anchor(short: &str, a: &AnchoredTensor, held: usize) -> Result<(), Diagnostic> {
    let bad = |msg: String, fix: &str| Err(Diagnostic::new("anchor_tensor", msg, fix).on("anchoredTensors"));
    if short.is_empty() || a.long_name.is_empty() {
        return bad(
            "anchorTensor: the short and the long name must not be empty.".into(),
            "Call anchorTensor(\"grad_bias\", \"Gradient___model.fc2.bias\").",
        );
    }
    if held >= MAX_ANCHORS {
        return bad(format!("anchorTensor: more than {MAX_ANCHORS} anchored tensors."), "Anchor fewer tensors.");
    }
    if a.output_mode == Some(OutputMode::EveryN) && a.output_return_period == 0 {
        return bad(
            format!(
                "anchorTensor(\"{short}\"): OutputMode.EveryN needs an output return period, a positive whole number."
            ),
            "Pass output_return_period >= 1.",
        );
    }
    Ok(())
}

/// The longest options JSON read: options are a few dozen keys, so a longer text is
/// refused before it is parsed (naming its largest option).
pub const MAX_OPTIONS_JSON_BYTES: usize = 1 << 20;

/// The most `availableMemoryProportion` entries: one per IPU, and no process has more than
/// 64 IPUs (the largest `max_ipus`).
pub const MAX_AMP_ENTRIES: usize = 64;

fn check_amp(map: &BTreeMap<String, f64>) -> Result<(), Diagnostic> {
    if map.len() > MAX_AMP_ENTRIES {
        return Err(Diagnostic::new(
            "available_memory_proportion_key",
            format!(
                "availableMemoryProportion has {} entries, more than the {MAX_AMP_ENTRIES} IPUs a process can have.",
                map.len()
            ),
            "Give one proportion per IPU the model uses, e.g. {\"IPU0\": 0.5, \"IPU1\": 0.6}.",
        ));
    }
    for (k, &v) in map {
        let ok = k.strip_prefix("IPU").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !ok {
            return Err(Diagnostic::new(
                "available_memory_proportion_key",
                format!(
                    "Available memory proportions are given as a map like {{\"IPU0\": 0.5}}, where the number after \
                     IPU is the IPU's index; '{}' is not such a key.",
                    crate::error::brief(k, 80)
                ),
                "Name each IPU as IPU<index>, e.g. \"IPU1\".",
            )
            .on("availableMemoryProportion"));
        }
        if !(v > 0.0 && v <= 1.0) {
            return Err(Diagnostic::new(
                "available_memory_proportion_value",
                format!(
                    "The available memory proportion of {} must be in (0, 1], got {v}.",
                    crate::error::brief(k, 80)
                ),
                "Give the share of each tile's memory temporaries may use, e.g. 0.6 (PopTorch's default).",
            )
            .on("availableMemoryProportion"));
        }
    }
    Ok(())
}

fn check_io_tiles(n: Option<usize>) -> Result<(), Diagnostic> {
    if let Some(n) = n {
        if !(32..=192).contains(&n) || n % 2 != 0 {
            return Err(Diagnostic::new(
                "num_io_tiles",
                format!("numIOTiles must be an even number from 32 to 192, got {n}."),
                "Pick an even count of IO tiles between 32 and 192, or leave it unset.",
            )
            .on("TensorLocations.numIOTiles"));
        }
    }
    Ok(())
}

/// Option groups that are JSON objects, by path, with an example. Serde would also read an
/// array into them, item by item in field order (`"Training": [4]` as a gradient
/// accumulation of 4), so arrays are rejected here by name, as at the top level.
const OPTION_GROUPS: &[(&[&str], &str)] = &[
    (&["inputReplicaGrouping"], r#"{"size": 2, "type": "consecutive"}"#),
    (&["executionStrategy"], r#"{"type": "pipelined", "autoStage": "autoIncrement"}"#),
    (&["availableMemoryProportion"], r#"{"IPU0": 0.5}"#),
    (&["Training"], r#"{"gradientAccumulation": 4}"#),
    (&["TensorLocations"], r#"{"weight": {"useOnChipStorage": false}}"#),
    (&["Precision"], r#"{"partialsType": "half"}"#),
    (&["TensorLocations", "activation"], r#"{"useOnChipStorage": false}"#),
    (&["TensorLocations", "weight"], r#"{"useOnChipStorage": false}"#),
    (&["TensorLocations", "optimizer"], r#"{"useOnChipStorage": false}"#),
    (&["TensorLocations", "accumulator"], r#"{"useOnChipStorage": false}"#),
];

/// The first option group of `value` given as an array (see [`OPTION_GROUPS`]): its key and
/// the error.
fn reject_positional_groups(value: &serde_json::Value) -> Result<(), (String, String)> {
    for (path, example) in OPTION_GROUPS {
        let found = path.iter().try_fold(value, |v, key| v.get(key));
        if let Some(serde_json::Value::Array(items)) = found {
            let key = path.join(".");
            let e = format!(
                "`{key}` must be an object like {example}, not a list of values by position: got a list of {} values",
                items.len()
            );
            return Err((key, e));
        }
    }
    Ok(())
}

/// The first top-level option that does not parse on its own, and serde's error, as
/// "`key`: error" (serde's own message does not name the field of a wrong type).
fn field_error(fields: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    fields.iter().find_map(|(k, v)| {
        let one = serde_json::Value::Object([(k.clone(), v.clone())].into_iter().collect());
        serde_json::from_value::<Options>(one).err().map(|e| format!("`{}`: {e}", crate::error::brief(k, 80)))
    })
}

/// The key and byte length of the longest top-level value of a JSON object, found by one
/// pass over the text without parsing it (for the message on a text too long to parse);
/// `None` when the text is not an object.
fn largest_option(json: &str) -> Option<(&str, usize)> {
    let b = json.as_bytes();
    let mut i = 0;
    let ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    // The end of the string starting at `i` (a quote), past its closing quote.
    let string_end = |mut i: usize| -> Option<usize> {
        i += 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
        None
    };
    ws(&mut i);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut best: Option<(&str, usize)> = None;
    loop {
        ws(&mut i);
        match b.get(i) {
            Some(b'"') => {}
            _ => return best,
        }
        let key_end = string_end(i)?;
        let key = &json[i + 1..key_end - 1];
        i = key_end;
        ws(&mut i);
        if b.get(i) != Some(&b':') {
            return best;
        }
        i += 1;
        ws(&mut i);
        let start = i;
        let mut depth = 0usize;
        while i < b.len() {
            match b[i] {
                b'"' => {
                    i = string_end(i)?;
                    continue;
                }
                b'[' | b'{' => depth += 1,
                b']' | b'}' if depth > 0 => depth -= 1,
                b',' | b'}' if depth == 0 => break,
                _ => {}
            }
            i += 1;
        }
        let len = i - start;
        if best.is_none_or(|(_, n)| len > n) {
            best = Some((key, len));
        }
        if b.get(i) == Some(&b',') {
            i += 1;
        } else {
            return best;
        }
    }
}

/// The key of the option of `value` (a JSON object) that `Options` cannot read (unknown,
/// or a value of the wrong type), by trying each key alone over the defaults; a group's
/// key (`Training`, `executionStrategy`) is narrowed to the key inside it
/// (`Training.gradientAccumulation`). `None` if each reads alone.
fn unreadable_key(value: &serde_json::Value) -> Option<String> {
    let defaults = serde_json::to_value(Options::default()).ok()?;
    let reads = |v: &serde_json::Value| serde_json::from_value::<Options>(v.clone()).is_ok();
    for (key, v) in value.as_object()? {
        let mut one = defaults.clone();
        one[key.as_str()] = v.clone();
        if reads(&one) {
            continue;
        }
        if let (Some(inner), Some(base)) = (v.as_object(), defaults.get(key).filter(|d| d.is_object())) {
            for (k, w) in inner {
                let mut one = defaults.clone();
                let mut group = base.clone();
                group[k.as_str()] = w.clone();
                one[key.as_str()] = group;
                if !reads(&one) {
                    return Some(format!("{key}.{k}"));
                }
            }
        }
        return Some(key.clone());
    }
    None
}

fn frozen_error() -> Diagnostic {
    Diagnostic::new(
        "options_frozen",
        "These Options are frozen: they were given to a model wrapper (trainingModel/inferenceModel), \
         which keeps its own copy, so changing them here would have no effect.",
        "Clone the options and change the clone, then wrap the model again.",
    )
}

impl Options {
    /// PopTorch's defaults.
    pub fn new() -> Options {
        Options::default()
    }

    fn open(&mut self) -> Result<&mut Options, Diagnostic> {
        if self.frozen {
            return Err(frozen_error());
        }
        Ok(self)
    }

    /// Freezes the options: every later setter fails (PopTorch `options._freeze()`).
    pub fn freeze(&mut self) {
        self.frozen = true;
    }

    /// Whether [`Options::freeze`] was called.
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// `deviceIterations(n)`: iterations run on the device per host call.
    pub fn device_iterations(&mut self, n: usize) -> Set<'_> {
        check_positive("deviceIterations", "deviceIterations", n)?;
        let o = self.open()?;
        o.device_iterations = n;
        Ok(o)
    }

    /// `replicationFactor(n)`: data-parallel replicas.
    pub fn replication_factor(&mut self, n: usize) -> Set<'_> {
        check_positive("replicationFactor", "replicationFactor", n)?;
        let o = self.open()?;
        o.replication_factor = n;
        Ok(o)
    }

    /// `inputReplicaGrouping(size, type)`, checked against the current replicationFactor
    /// (`NoGrouping` is size 1, Consecutive).
    pub fn input_replica_grouping(&mut self, size: usize, kind: CommGroupType) -> Set<'_> {
        let g = if kind == CommGroupType::NoGrouping {
            InputReplicaGrouping { size: 1, kind: CommGroupType::Consecutive }
        } else {
            InputReplicaGrouping { size, kind }
        };
        check_grouping(g, self.replication_factor)?;
        let o = self.open()?;
        o.input_replica_grouping = g;
        Ok(o)
    }

    /// `broadcastBuffers(bool)`.
    pub fn broadcast_buffers(&mut self, on: bool) -> Set<'_> {
        let o = self.open()?;
        o.broadcast_buffers = on;
        Ok(o)
    }

    /// `autoRoundNumIPUs(bool)`: round the IPU count up to a power of two with a warning
    /// instead of an error.
    pub fn auto_round_num_ipus(&mut self, on: bool) -> Set<'_> {
        let o = self.open()?;
        o.auto_round_num_ipus = on;
        Ok(o)
    }

    /// `setExecutionStrategy(strategy)`.
    pub fn set_execution_strategy(&mut self, s: ExecutionStrategy) -> Set<'_> {
        let o = self.open()?;
        o.execution_strategy = s;
        Ok(o)
    }

    /// `setAvailableMemoryProportion({"IPU0": 0.5, …})`.
    pub fn set_available_memory_proportion(&mut self, map: &[(&str, f64)]) -> Set<'_> {
        let m: BTreeMap<String, f64> = map.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        check_amp(&m)?;
        let o = self.open()?;
        o.available_memory_proportion = m;
        Ok(o)
    }

    /// `outputMode(mode, output_return_period)`.
    pub fn output_mode(&mut self, mode: OutputMode, period: Option<usize>) -> Set<'_> {
        check_output_mode(mode, period)?;
        let o = self.open()?;
        o.output_mode = mode;
        o.output_return_period = period;
        Ok(o)
    }

    /// `anchorTensor(short_name, long_name, output_mode = None, output_return_period = 1)`:
    /// keep the tensor `long_name` after each run, for `getAnchoredTensor(short_name)`
    /// (the period counts only for `EveryN`, as in PopTorch). Which names exist is the
    /// model's to say, when it is compiled.
    pub fn anchor_tensor(
        &mut self,
        short_name: &str,
        long_name: &str,
        output_mode: Option<OutputMode>,
        output_return_period: Option<usize>,
    ) -> Set<'_> {
        let a = AnchoredTensor {
            long_name: long_name.to_string(),
            output_mode,
            output_return_period: if output_mode == Some(OutputMode::EveryN) {
                output_return_period.unwrap_or(0)
            } else {
                1
            },
        };
        check_anchor(short_name, &a, self.anchored_tensors.len())?;
        let o = self.open()?;
        o.anchored_tensors.insert(short_name.to_string(), a);
        Ok(o)
    }

    /// `randomSeed(n)`.
    pub fn random_seed(&mut self, seed: u64) -> Set<'_> {
        let o = self.open()?;
        o.random_seed = Some(seed);
        Ok(o)
    }

    /// The IPU generation to plan for (PopTorch picks it from the attached device or
    /// `useOfflineIpuTarget(version)`).
    pub fn ipu_generation(&mut self, g: IpuGeneration) -> Set<'_> {
        let o = self.open()?;
        o.ipu_generation = g;
        Ok(o)
    }

    /// `Precision.setPartialsType(dtype)`: float32 or float16 partials; any other dtype is
    /// PopTorch's error.
    pub fn set_partials_type(&mut self, dtype: crate::tensor::DType) -> Set<'_> {
        let t = match dtype {
            crate::tensor::DType::Float32 => PartialsType::Float,
            crate::tensor::DType::Float16 => PartialsType::Half,
            other => {
                return Err(Diagnostic::new(
                    "partials_type",
                    format!("Precision.setPartialsType takes float32 or float16, got {other}."),
                    "Pass torch.float (\"float32\") or torch.half (\"float16\").",
                )
                .on("Precision.partialsType"))
            }
        };
        let o = self.open()?;
        o.precision.partials_type = t;
        Ok(o)
    }

    /// `Precision.enableStochasticRounding(bool)`.
    pub fn enable_stochastic_rounding(&mut self, on: bool) -> Set<'_> {
        let o = self.open()?;
        o.precision.enable_stochastic_rounding = on;
        Ok(o)
    }

    /// `Precision.enableFloatingPointExceptions(bool)`.
    pub fn enable_floating_point_exceptions(&mut self, on: bool) -> Set<'_> {
        let o = self.open()?;
        o.precision.enable_floating_point_exceptions = on;
        Ok(o)
    }

    /// PopART's `autoRecomputation` (PopTorch sets `Pipeline` whenever it pipelines).
    pub fn auto_recomputation(&mut self, r: Recomputation) -> Set<'_> {
        let o = self.open()?;
        o.auto_recomputation = r;
        Ok(o)
    }

    /// `opts.Training.gradientAccumulation(n)`.
    pub fn gradient_accumulation(&mut self, n: usize) -> Set<'_> {
        check_positive("Training.gradientAccumulation", "Training.gradientAccumulation", n)?;
        let o = self.open()?;
        o.training.gradient_accumulation = n;
        Ok(o)
    }

    /// `opts.Training.accumulationAndReplicationReductionType(t)`.
    pub fn accumulation_and_replication_reduction_type(&mut self, t: ReductionType) -> Set<'_> {
        check_reduction(t)?;
        let o = self.open()?;
        o.training.accumulation_and_replication_reduction_type = t;
        Ok(o)
    }

    /// `opts.Training.setMeanAccumulationAndReplicationReductionStrategy(s)`.
    pub fn set_mean_accumulation_and_replication_reduction_strategy(&mut self, s: MeanReductionStrategy) -> Set<'_> {
        let o = self.open()?;
        o.training.mean_accumulation_and_replication_reduction_strategy = s;
        Ok(o)
    }

    /// `opts.Training.setAutomaticLossScaling(bool)`.
    pub fn set_automatic_loss_scaling(&mut self, on: bool) -> Set<'_> {
        let o = self.open()?;
        o.training.automatic_loss_scaling = on;
        Ok(o)
    }

    /// `opts.TensorLocations.set{Activation,Weight,Optimizer,Accumulator}Location(settings)`.
    pub fn set_tensor_location(&mut self, class: TensorClass, s: TensorLocationSettings) -> Set<'_> {
        let o = self.open()?;
        let slot = match class {
            TensorClass::Activation => &mut o.tensor_locations.activation,
            TensorClass::Weight => &mut o.tensor_locations.weight,
            TensorClass::Optimizer => &mut o.tensor_locations.optimizer,
            TensorClass::Accumulator => &mut o.tensor_locations.accumulator,
        };
        *slot = Some(s);
        Ok(o)
    }

    /// `opts.TensorLocations.numIOTiles(n)`.
    pub fn num_io_tiles(&mut self, n: usize) -> Set<'_> {
        check_io_tiles(Some(n))?;
        let o = self.open()?;
        o.tensor_locations.num_io_tiles = Some(n);
        Ok(o)
    }

    /// Every check, as the setters make them (the first failure of each kind).
    pub fn validate(&self) -> Vec<Diagnostic> {
        let checks = [
            check_positive("deviceIterations", "deviceIterations", self.device_iterations),
            check_positive("replicationFactor", "replicationFactor", self.replication_factor),
            check_positive(
                "Training.gradientAccumulation",
                "Training.gradientAccumulation",
                self.training.gradient_accumulation,
            ),
            if self.input_replica_grouping.kind == CommGroupType::NoGrouping {
                Ok(())
            } else {
                check_grouping(self.input_replica_grouping, self.replication_factor.max(1))
            },
            check_reduction(self.training.accumulation_and_replication_reduction_type),
            check_output_mode(self.output_mode, self.output_return_period),
            check_amp(&self.available_memory_proportion),
            check_io_tiles(self.tensor_locations.num_io_tiles),
        ]
        .into_iter()
        .chain(self.anchored_tensors.iter().map(|(short, a)| check_anchor(short, a, 0)));
        checks.into_iter().filter_map(Result::err).collect()
    }

    /// Parses and validates JSON options (see the module docs); the error names the first
    /// unknown key or invalid value.
    pub fn from_json(json: &str) -> Result<Options, Diagnostic> {
        let bad = |e: String| {
            Diagnostic::new(
                "options_json",
                format!("Invalid options: {e}."),
                "Use the keys and values of poptorch.Options in camelCase (see the planner's documentation).",
            )
        };
        if json.len() > MAX_OPTIONS_JSON_BYTES {
            let largest = largest_option(json)
                .map(|(k, n)| format!(": its largest option is `{}` ({n} bytes)", crate::error::brief(k, 80)))
                .unwrap_or_default();
            return Err(bad(format!(
                "the JSON is {} bytes, more than the limit of {MAX_OPTIONS_JSON_BYTES} bytes{largest}",
                json.len()
            )));
        }
        let value: serde_json::Value = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
        let serde_json::Value::Object(fields) = &value else {
            return Err(bad(format!("expected a JSON object of options, got {}", crate::error::brief(&value, 80))));
        };
        reject_positional_groups(&value).map_err(|(key, e)| bad(e).on(key))?;
        if let Some(serde_json::Value::Object(amp)) = fields.get("availableMemoryProportion") {
            // Bounded before its entries are read one by one.
            if amp.len() > MAX_AMP_ENTRIES {
                return Err(bad(format!(
                    "`availableMemoryProportion` has {} entries, more than the {MAX_AMP_ENTRIES} IPUs a process can have",
                    amp.len()
                ))
                .on("availableMemoryProportion"));
            }
        }
        let mut o: Options = match serde_json::from_value(value.clone()) {
            Ok(o) => o,
            Err(e) => {
                // Named by the key that does not read (inside its group where it is in one),
                // else by the first top-level option that fails alone.
                return Err(match unreadable_key(&value) {
                    Some(key) => {
                        bad(format!("`{}`: {e}", crate::error::brief(&key, 80))).on(crate::error::brief(&key, 200))
                    }
                    None => bad(field_error(fields).unwrap_or_else(|| e.to_string())),
                });
            }
        };
        if let Some(e) = o.validate().into_iter().next() {
            return Err(e);
        }
        if o.input_replica_grouping.kind == CommGroupType::NoGrouping {
            o.input_replica_grouping = InputReplicaGrouping { size: 1, kind: CommGroupType::Consecutive };
        }
        Ok(o)
    }

    /// Parses JSON options for a plan that shows what is wrong in place: options that do
    /// not parse (unknown key, wrong type) give the defaults and an `options_json` error;
    /// values that parse but fail a check stay as given, for `plan` to report.
    pub fn from_json_lenient(json: &str) -> (Options, Vec<Diagnostic>) {
        match Options::from_json(json) {
            Ok(o) => (o, Vec::new()),
            Err(e) if e.code == "options_json" => (Options::new(), vec![e]),
            Err(_) => {
                let o: Options = serde_json::from_str(json).unwrap_or_default();
                (o, Vec::new())
            }
        }
    }

    /// The options as JSON (every key, defaults included).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("options serialise")
    }

    /// The available memory proportion of `ipu` (0.6 unless set).
    pub fn available_memory_proportion_for(&self, ipu: usize) -> f64 {
        self.available_memory_proportion
            .get(&format!("IPU{ipu}"))
            .copied()
            .unwrap_or(DEFAULT_AVAILABLE_MEMORY_PROPORTION)
    }

    /// Where tensors of `class` live, `use_on_chip_storage` resolved: the user's setting, or
    /// the strategy's default (phased execution: Streaming Memory; otherwise on chip).
    pub fn location(&self, class: TensorClass) -> TensorLocationSettings {
        let set = match class {
            TensorClass::Activation => self.tensor_locations.activation,
            TensorClass::Weight => self.tensor_locations.weight,
            TensorClass::Optimizer => self.tensor_locations.optimizer,
            TensorClass::Accumulator => self.tensor_locations.accumulator,
        };
        let mut s = set.unwrap_or_default();
        s.use_on_chip_storage = Some(s.use_on_chip_storage.unwrap_or(!self.execution_strategy.is_phased()));
        s
    }

    /// Whether tensors of `class` with `elements` elements live in Streaming Memory
    /// (`minElementsForOffChip` keeps smaller ones on chip).
    pub fn off_chip(&self, class: TensorClass, elements: u64) -> bool {
        let s = self.location(class);
        s.use_on_chip_storage == Some(false) && elements >= s.min_elements_for_off_chip as u64
    }

    /// Whether a tensor of `class` with `elements` elements is sharded across replicas
    /// (replicated tensor sharding: each replica holds 1/replicationFactor of it).
    pub fn sharded_across_replicas(&self, class: TensorClass, elements: u64) -> bool {
        let s = self.location(class);
        self.replication_factor > 1
            && s.use_replicated_tensor_sharding
            && elements >= s.min_elements_for_replicated_tensor_sharding as u64
    }

    /// The output mode in effect (`Default` resolved: All for inference, Final for training).
    pub fn resolved_output_mode(&self, training: bool) -> OutputMode {
        match self.output_mode {
            OutputMode::Default if training => OutputMode::Final,
            OutputMode::Default => OutputMode::All,
            m => m,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_defaults_are_poptorchs() {
        let o = Options::new();
        assert_eq!((o.device_iterations, o.replication_factor, o.training.gradient_accumulation), (1, 1, 1));
        assert!(o.broadcast_buffers && !o.auto_round_num_ipus);
        assert_eq!(o.execution_strategy.name(), "pipelined");
        assert_eq!(o.available_memory_proportion_for(3), 0.6);
        assert_eq!(o.resolved_output_mode(true), OutputMode::Final);
        assert_eq!(o.resolved_output_mode(false), OutputMode::All);
    }

    #[test]
    fn options_json_round_trips_and_empty_json_is_the_defaults() {
        let mut o = Options::new();
        o.replication_factor(4).unwrap().input_replica_grouping(2, CommGroupType::Orthogonal).unwrap();
        o.gradient_accumulation(8).unwrap();
        let back = Options::from_json(&o.to_json()).unwrap();
        assert_eq!(back, o);
        assert_eq!(Options::from_json("{}").unwrap(), Options::new());
        let j: serde_json::Value = serde_json::from_str(&o.to_json()).unwrap();
        assert_eq!(j["Training"]["gradientAccumulation"], 8);
        assert_eq!(j["autoRoundNumIPUs"], false);
    }

    /// The message of `json`'s error, checked to be within the cap.
    fn short_error(json: &str) -> String {
        let e = Options::from_json(json).unwrap_err();
        assert!(e.message.len() <= crate::error::MAX_MESSAGE_BYTES, "{} bytes", e.message.len());
        assert!(e.fix.len() <= crate::error::MAX_MESSAGE_BYTES);
        e.message
    }

    #[test]
    fn huge_values_give_short_errors_naming_the_field() {
        // Options.fromJSON({availableMemoryProportion: new Array(2e7).fill(.5)}): an 80 MB
        // message once; now refused by its length before it is parsed, naming the option.
        let json =
            format!("{{\"deviceIterations\": 2, \"availableMemoryProportion\": [{}0.5]}}", "0.5,".repeat(2_000_000));
        let m = short_error(&json);
        assert!(
            m.contains("more than the limit of 1048576 bytes: its largest option is `availableMemoryProportion`"),
            "{m}"
        );
        // Within the length limit, a list is refused by its count, not echoed.
        let json = format!("{{\"availableMemoryProportion\": [{}0.5]}}", "0.5,".repeat(100_000));
        let m = short_error(&json);
        assert!(
            m.contains("`availableMemoryProportion` must be an object") && m.ends_with("got a list of 100001 values."),
            "{m}"
        );
        // A map of one entry per IPU, at most 64.
        let entries: Vec<String> = (0..1000).map(|i| format!("\"IPU{i}\": 0.5")).collect();
        let m = short_error(&format!("{{\"availableMemoryProportion\": {{{}}}}}", entries.join(",")));
        assert!(m.contains("`availableMemoryProportion` has 1000 entries, more than the 64 IPUs"), "{m}");
        let entries: Vec<String> = (0..64).map(|i| format!("\"IPU{i}\": 0.5")).collect();
        assert!(Options::from_json(&format!("{{\"availableMemoryProportion\": {{{}}}}}", entries.join(","))).is_ok());
        // A wrong type: serde's message, which echoes the value, prefixed by the field.
        let m =
            short_error(&format!("{{\"replicationFactor\": 1, \"deviceIterations\": \"{}\"}}", "x".repeat(500_000)));
        assert!(m.starts_with("Invalid options: `deviceIterations`: invalid type: string"), "{m}");
        // A long unknown key, a long bad key of the map, a long non-object.
        let m = short_error(&format!("{{\"{}\": 1}}", "k".repeat(500_000)));
        assert!(m.starts_with("Invalid options: `kkkk") && m.contains("… (more)`"), "{m}");
        let m = short_error(&format!("{{\"availableMemoryProportion\": {{\"{}\": 0.5}}}}", "K".repeat(500_000)));
        assert!(
            m.starts_with("Available memory proportions are given as a map")
                && m.contains("… (more)' is not such a key"),
            "{m}"
        );
        let m = short_error(&format!("[{}1]", "1,".repeat(100_000)));
        assert!(m.starts_with("Invalid options: expected a JSON object of options, got [1,1,1"), "{m}");
    }

    #[test]
    fn the_largest_option_is_found_without_parsing() {
        assert_eq!(largest_option(r#" {"a": 1, "b": [1, {"x": "}"}], "c": "\"q"} "#), Some(("b", 15)));
        assert_eq!(largest_option("[1, 2]"), None);
        assert_eq!(largest_option(r#"{"a": [1, 2"#), Some(("a", 5)));
    }
}
