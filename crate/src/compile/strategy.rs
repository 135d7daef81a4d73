//! The four execution strategies of `poptorch.Options.setExecutionStrategy`, with their
//! Stages, AutoStage and Phases, as JSON-friendly data.
//!
//! JSON (camelCase; `type` picks the strategy):
//! ```json
//! {"type": "pipelined", "autoStage": "sameAsIpu"}
//! {"type": "pipelined", "stages": [["a", "b"], {"blocks": ["c"], "ipu": 1}]}
//! {"type": "sharded", "autoStage": "autoIncrement"}
//! {"type": "serialPhased", "phases": [["a"], {"stages": [{"blocks": ["b"]}, {"blocks": ["c"]}], "ipus": [0, 1]}],
//!  "tensorsLiveness": "offChipAfterFwd", "separateBackwardPhase": false}
//! {"type": "parallelPhased", "phases": [...], "sendTensorsOffChipAfterFwd": true}
//! ```
//! A stage is a block id, a list of block ids (`Stage("a", "b")`) or `{blocks, ipu}`
//! (`Stage(...).ipu(n)`); a phase is a list of block ids (`Phase("a", "b")`: one stage) or
//! `{stages, ipus}` (`Phase(Stage(..), ..).ipus(..)`).

use crate::Error;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

/// How blocks get their stage when no stage list is given (`poptorch.AutoStage`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AutoStage {
    /// `stage_id = ipu_id` (PopTorch's default).
    #[default]
    SameAsIpu,
    /// Each new block gets the next stage id, 0, 1, 2, ….
    AutoIncrement,
}

/// One stage: blocks running on one IPU (`poptorch.Stage(*blocks).ipu(n)`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StageSpec {
    pub blocks: Vec<String>,
    /// `Stage.ipu(n)`: wins over the blocks' own IPU.
    pub ipu: Option<usize>,
}

impl StageSpec {
    pub fn new(blocks: &[&str]) -> StageSpec {
        StageSpec { blocks: blocks.iter().map(|b| b.to_string()).collect(), ipu: None }
    }
    /// `Stage(..).ipu(n)`.
    pub fn ipu(mut self, ipu: usize) -> StageSpec {
        self.ipu = Some(ipu);
        self
    }
}

fn blocks_from(v: &serde_json::Value, what: &str) -> crate::Result<Vec<String>> {
    match v {
        serde_json::Value::String(s) => Ok(vec![s.clone()]),
        serde_json::Value::Array(items) => items
            .iter()
            .map(|b| {
                b.as_str().map(str::to_string).ok_or_else(|| {
                    Error::plan(format!("{what}: block ids must be strings (poptorch.Stage takes strings), got {b}"))
                })
            })
            .collect(),
        other => Err(Error::plan(format!(
            "{what}: expected a block id, a list of block ids or an object, got {}",
            crate::error::brief(other, 80)
        ))),
    }
}

fn usize_from(v: &serde_json::Value, what: &str) -> crate::Result<usize> {
    // Exact: an index past usize (wasm32: 2^32 - 1) is an error, not cut to 32 bits.
    v.as_u64().and_then(|n| usize::try_from(n).ok()).ok_or_else(|| {
        Error::plan(format!(
            "{what} must be a whole number from 0 to {}, got {}",
            usize::MAX,
            crate::error::brief(v, 80)
        ))
    })
}

fn reject_unknown(obj: &serde_json::Map<String, serde_json::Value>, known: &[&str], what: &str) -> crate::Result<()> {
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(Error::plan(format!(
            "unknown key `{}` in {what} (expected one of: {})",
            crate::error::brief(k, 80),
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

impl StageSpec {
    fn from_json(v: &serde_json::Value) -> crate::Result<StageSpec> {
        match v {
            serde_json::Value::Object(o) => {
                reject_unknown(o, &["blocks", "ipu"], "a stage")?;
                let blocks =
                    blocks_from(o.get("blocks").ok_or_else(|| Error::plan("a stage object needs `blocks`"))?, "stage")?;
                let ipu = match o.get("ipu") {
                    None | Some(serde_json::Value::Null) => None,
                    Some(i) => Some(usize_from(i, "a stage's ipu")?),
                };
                Ok(StageSpec { blocks, ipu })
            }
            other => Ok(StageSpec { blocks: blocks_from(other, "stage")?, ipu: None }),
        }
    }
}

impl<'de> Deserialize<'de> for StageSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        StageSpec::from_json(&serde_json::Value::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// One phase: stages running in parallel, each on its own IPU (`poptorch.Phase`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PhaseSpec {
    pub stages: Vec<StageSpec>,
    /// `Phase(..).ipus(*ipus)`: one IPU per stage.
    pub ipus: Option<Vec<usize>>,
}

impl PhaseSpec {
    /// `Phase("a", "b")`: one stage of these blocks.
    pub fn blocks(blocks: &[&str]) -> PhaseSpec {
        PhaseSpec { stages: vec![StageSpec::new(blocks)], ipus: None }
    }
    /// `Phase(Stage(..), Stage(..))`.
    pub fn stages(stages: Vec<StageSpec>) -> PhaseSpec {
        PhaseSpec { stages, ipus: None }
    }
    /// `phase.ipus(*ipus)`.
    pub fn ipus(mut self, ipus: &[usize]) -> PhaseSpec {
        self.ipus = Some(ipus.to_vec());
        self
    }
}

impl<'de> Deserialize<'de> for PhaseSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        let r = match &v {
            serde_json::Value::Object(o) => (|| {
                reject_unknown(o, &["stages", "ipus"], "a phase")?;
                let stages = match o.get("stages") {
                    Some(serde_json::Value::Array(s)) => {
                        s.iter().map(StageSpec::from_json).collect::<Result<_, _>>()?
                    }
                    _ => return Err(Error::plan("a phase object needs `stages`, a list of stages")),
                };
                let ipus = match o.get("ipus") {
                    None | Some(serde_json::Value::Null) => None,
                    Some(serde_json::Value::Array(i)) => {
                        Some(i.iter().map(|x| usize_from(x, "a phase's ipus")).collect::<Result<_, _>>()?)
                    }
                    Some(other) => {
                        return Err(Error::plan(format!("a phase's ipus must be a list of IPU indices, got {other}")))
                    }
                };
                Ok(PhaseSpec { stages, ipus })
            })(),
            other => blocks_from(other, "phase")
                .map(|b| PhaseSpec { stages: vec![StageSpec { blocks: b, ipu: None }], ipus: None }),
        };
        r.map_err(D::Error::custom)
    }
}

/// Arguments of `PipelinedExecution` / `ShardedExecution`: an AutoStage or a stage list
/// (list index = stage id). Neither: `AutoStage.SameAsIpu`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PipelinedExecution {
    pub auto_stage: Option<AutoStage>,
    pub stages: Option<Vec<StageSpec>>,
}

/// When tensors of a phased execution go to Streaming Memory (`poptorch.Liveness`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PhaseLiveness {
    /// Tensors stay where they are between phases (the default).
    #[default]
    AlwaysLive,
    /// Activations go to Streaming Memory after the forward pass and come back for the backward.
    OffChipAfterFwd,
    /// As `OffChipAfterFwd`, without overlapping the transfers with compute (serial only).
    OffChipAfterFwdNoOverlap,
    /// Every tensor goes to Streaming Memory after each phase (serial only).
    OffChipAfterEachPhase,
}

/// Arguments of `SerialPhasedExecution` / `ParallelPhasedExecution`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PhasedExecution {
    pub phases: Vec<PhaseSpec>,
    /// Not supported by PopTorch for phased execution; kept so that asking for it gets
    /// PopTorch's error rather than a parse error.
    pub auto_stage: Option<AutoStage>,
    /// `setTensorsLiveness` (serial) — parallel phases accept only `alwaysLive` or
    /// `offChipAfterFwd` (`sendTensorsOffChipAfterFwd`).
    pub tensors_liveness: PhaseLiveness,
    /// `sendTensorsOffChipAfterFwd(True)` (parallel): the same as `offChipAfterFwd`.
    pub send_tensors_off_chip_after_fwd: bool,
    /// `useSeparateBackwardPhase(True)`: forward 0, 1, 2 → backward 6, 5, 4 (not 4, 3, 2).
    pub separate_backward_phase: bool,
}

impl PhasedExecution {
    pub fn new(phases: Vec<PhaseSpec>) -> PhasedExecution {
        PhasedExecution { phases, ..PhasedExecution::default() }
    }

    /// The liveness in effect (`sendTensorsOffChipAfterFwd` folded in).
    pub fn liveness(&self) -> PhaseLiveness {
        if self.send_tensors_off_chip_after_fwd && self.tensors_liveness == PhaseLiveness::AlwaysLive {
            PhaseLiveness::OffChipAfterFwd
        } else {
            self.tensors_liveness
        }
    }
}

/// `setExecutionStrategy`'s argument.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ExecutionStrategy {
    /// `PipelinedExecution` (the default): stages on different IPUs overlap over micro-batches.
    Pipelined(PipelinedExecution),
    /// `ShardedExecution`: stages run one after another, one IPU busy at a time.
    Sharded(PipelinedExecution),
    /// `SerialPhasedExecution`: phases one after another on the same IPUs.
    SerialPhased(PhasedExecution),
    /// `ParallelPhasedExecution`: phases alternate between two IPU groups.
    ParallelPhased(PhasedExecution),
}

impl Default for ExecutionStrategy {
    fn default() -> Self {
        ExecutionStrategy::Pipelined(PipelinedExecution::default())
    }
}

impl ExecutionStrategy {
    /// The name in the plan (`pipelined`, `sharded`, `serial_phased`, `parallel_phased`).
    pub fn name(&self) -> &'static str {
        match self {
            ExecutionStrategy::Pipelined(_) => "pipelined",
            ExecutionStrategy::Sharded(_) => "sharded",
            ExecutionStrategy::SerialPhased(_) => "serial_phased",
            ExecutionStrategy::ParallelPhased(_) => "parallel_phased",
        }
    }

    /// Parses a command-line name: `pipelined`, `sharded`, `serial-phased`, `parallel-phased`
    /// (underscores also accepted), with default arguments.
    pub fn parse(s: &str) -> crate::Result<ExecutionStrategy> {
        match s.replace('_', "-").to_ascii_lowercase().as_str() {
            "pipelined" => Ok(ExecutionStrategy::Pipelined(PipelinedExecution::default())),
            "sharded" => Ok(ExecutionStrategy::Sharded(PipelinedExecution::default())),
            "serial-phased" => Ok(ExecutionStrategy::SerialPhased(PhasedExecution::default())),
            "parallel-phased" => Ok(ExecutionStrategy::ParallelPhased(PhasedExecution::default())),
            _ => Err(Error::plan(format!(
                "unknown execution strategy '{s}': use pipelined, sharded, serial-phased or parallel-phased"
            ))),
        }
    }

    /// Whether this is one of the phased strategies.
    pub fn is_phased(&self) -> bool {
        matches!(self, ExecutionStrategy::SerialPhased(_) | ExecutionStrategy::ParallelPhased(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_stages_and_phases_parse_in_every_documented_form() {
        let s: ExecutionStrategy =
            serde_json::from_str(r#"{"type":"pipelined","stages":["a",["b","c"],{"blocks":["d"],"ipu":1}]}"#).unwrap();
        let ExecutionStrategy::Pipelined(p) = s else { panic!() };
        let st = p.stages.unwrap();
        assert_eq!(st[0], StageSpec::new(&["a"]));
        assert_eq!(st[1], StageSpec::new(&["b", "c"]));
        assert_eq!(st[2], StageSpec::new(&["d"]).ipu(1));
        let s: ExecutionStrategy = serde_json::from_str(
            r#"{"type":"parallelPhased","phases":[["a"],{"stages":[{"blocks":["b"]},"c"],"ipus":[1,3]}]}"#,
        )
        .unwrap();
        let ExecutionStrategy::ParallelPhased(p) = s else { panic!() };
        assert_eq!(p.phases[0], PhaseSpec::blocks(&["a"]));
        assert_eq!(p.phases[1], PhaseSpec::stages(vec![StageSpec::new(&["b"]), StageSpec::new(&["c"])]).ipus(&[1, 3]));
    }

    #[test]
    fn options_bad_stage_json_names_the_problem() {
        let e = serde_json::from_str::<ExecutionStrategy>(r#"{"type":"pipelined","stages":[[1]]}"#).unwrap_err();
        assert!(e.to_string().contains("must be strings"), "{e}");
        let e = serde_json::from_str::<ExecutionStrategy>(r#"{"type":"pipelined","stagez":[]}"#).unwrap_err();
        assert!(e.to_string().contains("stagez"), "{e}");
        let e = serde_json::from_str::<ExecutionStrategy>(r#"{"type":"serialPhased","phases":[{"stage":[]}]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("`stage`"), "{e}");
        let e = serde_json::from_str::<ExecutionStrategy>(r#"{"type":"diagonal"}"#).unwrap_err();
        assert!(e.to_string().contains("diagonal"), "{e}");
    }
}
