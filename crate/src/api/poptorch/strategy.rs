//! The execution strategies of `poptorch.Options.setExecutionStrategy`, with `Stage` and
//! `Phase`: thin holders of the core's `compile::strategy` types, whose rules (blocks in
//! one stage, one IPU per stage of a phase, no AutoStage for phased execution, …) are
//! checked by the planner when the model is compiled or planned.
//!
//! ```js
//! new poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement)
//! new poptorch.PipelinedExecution("embed", ["enc0", "enc1"], new poptorch.Stage("head").ipu(1))
//! new poptorch.SerialPhasedExecution(new poptorch.Phase("a"), new poptorch.Phase("b")).setTensorsLiveness(poptorch.Liveness.OffChipAfterFwd)
//! ```
//!
//! The constructors take their arguments as PopTorch's do (`*args`): the namespace's
//! classes pass them on as one array (`scripts/fix-pkg.mjs`).

use super::super::args::{self, JsResult};
use super::enums;
use super::handles::{self, lookup};
use crate::compile::strategy::{
    AutoStage, ExecutionStrategy, PhaseLiveness, PhaseSpec, PhasedExecution, PipelinedExecution, StageSpec,
};
use crate::trace::check;
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;

fn to_json<T: serde::Serialize>(v: &T) -> JsResult<JsValue> {
    super::super::to_js(v)
}

/// Block ids: each a name (a string, or a `TypeError` as PopTorch asserts strings).
fn block_ids(items: &[JsValue], what: &str) -> JsResult<Vec<String>> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            if !v.is_string() {
                return Err(args::type_error(&format!(
                    "{what}: block ids must be strings, got {} (argument {i})",
                    args::describe(v)
                )));
            }
            args::name(v, &format!("{what}: block id {i}"))
        })
        .collect()
}

/// The arguments the namespace class passed on (an array; left out = none).
fn arg_list(v: &JsValue, what: &str) -> JsResult<Vec<JsValue>> {
    if args::is_absent(v) {
        return Ok(Vec::new());
    }
    args::list(v, what, check::MAX_LIST)
}

/// `poptorch.Stage(*block_ids)`: blocks that run on one IPU; `.ipu(n)` places it.
#[wasm_bindgen(js_name = PoptorchStage)]
pub struct Stage {
    state: Rc<RefCell<StageSpec>>,
    id: u32,
}

impl Stage {
    fn with(state: Rc<RefCell<StageSpec>>) -> Stage {
        let id = handles::register(&state);
        Stage { state, id }
    }
}

#[wasm_bindgen(js_class = PoptorchStage)]
impl Stage {
    /// `ids`: the block ids, as an array (`new poptorch.Stage("a", "b")` passes them so).
    #[wasm_bindgen(constructor)]
    pub fn new(#[wasm_bindgen(unchecked_param_type = "string[]")] ids: JsValue) -> JsResult<Stage> {
        let ids = block_ids(&arg_list(&ids, "Stage")?, "Stage")?;
        Ok(Stage::with(Rc::new(RefCell::new(StageSpec { blocks: ids, ipu: None }))))
    }
    /// Places the stage on IPU `ipu` (wins over its blocks' own IPU); returns the stage.
    pub fn ipu(&self, #[wasm_bindgen(unchecked_param_type = "number")] ipu: JsValue) -> JsResult<Stage> {
        let n = args::count(&ipu, "Stage.ipu: ipu", check::MAX_IPU as usize)?;
        self.state.borrow_mut().ipu = Some(n);
        Ok(Stage { state: self.state.clone(), id: self.id })
    }
    /// `{ blocks, ipu }`, the stage in the Options JSON.
    #[wasm_bindgen(js_name = toJSON)]
    pub fn to_json(&self) -> JsResult<JsValue> {
        to_json(&*self.state.borrow())
    }
    #[wasm_bindgen(js_name = _handle)]
    pub fn handle(&self) -> u32 {
        self.id
    }
}

/// `poptorch.Phase(*stages)` or `Phase(*block_ids)` (one stage of those blocks); `.ipus(…)`
/// gives each stage its IPU.
#[wasm_bindgen(js_name = PoptorchPhase)]
pub struct Phase {
    state: Rc<RefCell<PhaseSpec>>,
    id: u32,
}

/// A phase from `Phase`'s arguments: all block ids, or all Stages.
fn phase_spec(items: &[JsValue], what: &str) -> JsResult<PhaseSpec> {
    if items.iter().all(JsValue::is_string) {
        return Ok(PhaseSpec::blocks(&block_ids(items, what)?.iter().map(String::as_str).collect::<Vec<_>>()));
    }
    let mut stages = Vec::new();
    for (i, v) in items.iter().enumerate() {
        match lookup::<StageSpec>(v)? {
            Some(s) => stages.push(s.borrow().clone()),
            None => {
                return Err(args::type_error(&format!(
                    "{what}: argument {i} must be a poptorch.Stage (or every argument a block id), got {}",
                    args::describe(v)
                )))
            }
        }
    }
    Ok(PhaseSpec::stages(stages))
}

#[wasm_bindgen(js_class = PoptorchPhase)]
impl Phase {
    /// `items`: Stages, or block ids, as an array (`new poptorch.Phase(…)` passes them so).
    #[wasm_bindgen(constructor)]
    pub fn new(#[wasm_bindgen(unchecked_param_type = "(string | PoptorchStage)[]")] items: JsValue) -> JsResult<Phase> {
        let spec = phase_spec(&arg_list(&items, "Phase")?, "Phase")?;
        let state = Rc::new(RefCell::new(spec));
        let id = handles::register(&state);
        Ok(Phase { state, id })
    }
    /// One IPU per stage (`phase.ipus(0, 2)` passes them as an array); returns the phase.
    pub fn ipus(&self, #[wasm_bindgen(unchecked_param_type = "number[]")] ipus: JsValue) -> JsResult<Phase> {
        let list = arg_list(&ipus, "Phase.ipus")?;
        let ipus = list
            .iter()
            .enumerate()
            .map(|(i, v)| args::count(v, &format!("Phase.ipus: ipu {i}"), check::MAX_IPU as usize))
            .collect::<JsResult<Vec<_>>>()?;
        self.state.borrow_mut().ipus = Some(ipus);
        Ok(Phase { state: self.state.clone(), id: self.id })
    }
    #[wasm_bindgen(js_name = toJSON)]
    pub fn to_json(&self) -> JsResult<JsValue> {
        to_json(&*self.state.borrow())
    }
    #[wasm_bindgen(js_name = _handle)]
    pub fn handle(&self) -> u32 {
        self.id
    }
}

/// A strategy's state (the core type).
pub(crate) type StrategyState = ExecutionStrategy;

/// `PipelinedExecution`/`ShardedExecution`'s arguments: nothing, one AutoStage, or stages
/// (block ids, lists of block ids, Stages; list index = stage id).
fn pipelined_args(items: &[JsValue], what: &str) -> JsResult<PipelinedExecution> {
    let auto = enums::auto_stage();
    if let [one] = items {
        if one.is_string() && auto.value_of(&one.as_string().unwrap_or_default()).is_some() {
            let a: AutoStage = enums::parse(one, what, &auto)?;
            return Ok(PipelinedExecution { auto_stage: Some(a), stages: None });
        }
    }
    if items.is_empty() {
        return Ok(PipelinedExecution::default());
    }
    let mut stages = Vec::new();
    for (i, v) in items.iter().enumerate() {
        let at = format!("{what}: stage {i}");
        let spec = if v.is_string() {
            StageSpec { blocks: block_ids(std::slice::from_ref(v), &at)?, ipu: None }
        } else if v.is_instance_of::<js_sys::Array>() {
            StageSpec { blocks: block_ids(&args::list(v, &at, check::MAX_LIST)?, &at)?, ipu: None }
        } else if let Some(s) = lookup::<StageSpec>(v)? {
            s.borrow().clone()
        } else {
            return Err(args::type_error(&format!(
                "{at} must be a block id, a list of block ids or a poptorch.Stage, got {}",
                args::describe(v)
            )));
        };
        stages.push(spec);
    }
    Ok(PipelinedExecution { auto_stage: None, stages: Some(stages) })
}

/// Phased strategies' arguments: Phases, or lists of block ids (one phase of one stage each).
fn phased_args(items: &[JsValue], what: &str) -> JsResult<PhasedExecution> {
    let auto = enums::auto_stage();
    let mut p = PhasedExecution::default();
    for (i, v) in items.iter().enumerate() {
        let at = format!("{what}: phase {i}");
        if v.is_string() && auto.value_of(&v.as_string().unwrap_or_default()).is_some() {
            // Kept for the planner, which reports PopTorch's error: phases must be explicit.
            p.auto_stage = Some(enums::parse(v, &at, &auto)?);
        } else if let Some(ph) = lookup::<PhaseSpec>(v)? {
            p.phases.push(ph.borrow().clone());
        } else if v.is_string() {
            p.phases.push(phase_spec(std::slice::from_ref(v), &at)?);
        } else if v.is_instance_of::<js_sys::Array>() {
            p.phases.push(phase_spec(&args::list(v, &at, check::MAX_LIST)?, &at)?);
        } else {
            return Err(args::type_error(&format!(
                "{at} must be a poptorch.Phase or a list of block ids, got {}",
                args::describe(v)
            )));
        }
    }
    Ok(p)
}

macro_rules! strategy {
    ($rust:ident, $js:literal, $doc:literal, $make:expr) => {
        #[doc = $doc]
        #[wasm_bindgen(js_name = $js)]
        pub struct $rust {
            state: Rc<RefCell<StrategyState>>,
            id: u32,
        }

        #[wasm_bindgen(js_class = $js)]
        impl $rust {
            /// The strategy's arguments, as an array (the namespace class passes them so).
            #[wasm_bindgen(constructor)]
            pub fn new(#[wasm_bindgen(unchecked_param_type = "unknown[]")] items: JsValue) -> JsResult<$rust> {
                let what = $js.trim_start_matches("Poptorch");
                let items = arg_list(&items, what)?;
                let make: fn(&[JsValue], &str) -> JsResult<StrategyState> = $make;
                let state = Rc::new(RefCell::new(make(&items, what)?));
                let id = handles::register(&state);
                Ok($rust { state, id })
            }
            /// The strategy in the Options JSON (`{ type, … }`).
            #[wasm_bindgen(js_name = toJSON)]
            pub fn to_json(&self) -> JsResult<JsValue> {
                to_json(&*self.state.borrow())
            }
            #[wasm_bindgen(js_name = _handle)]
            pub fn handle(&self) -> u32 {
                self.id
            }
        }
    };
}

strategy!(
    PipelinedExecutionJs,
    "PoptorchPipelinedExecution",
    "`poptorch.PipelinedExecution(*args)`: stages on different IPUs overlap over micro-batches.",
    |items, what| Ok(ExecutionStrategy::Pipelined(pipelined_args(items, what)?))
);
strategy!(
    ShardedExecutionJs,
    "PoptorchShardedExecution",
    "`poptorch.ShardedExecution(*args)`: stages run one after another, one IPU busy at a time.",
    |items, what| Ok(ExecutionStrategy::Sharded(pipelined_args(items, what)?))
);
strategy!(
    SerialPhasedExecutionJs,
    "PoptorchSerialPhasedExecution",
    "`poptorch.SerialPhasedExecution(*phases)`: phases one after another on the same IPUs.",
    |items, what| Ok(ExecutionStrategy::SerialPhased(phased_args(items, what)?))
);
strategy!(
    ParallelPhasedExecutionJs,
    "PoptorchParallelPhasedExecution",
    "`poptorch.ParallelPhasedExecution(*phases)`: phases alternate between two IPU groups.",
    |items, what| Ok(ExecutionStrategy::ParallelPhased(phased_args(items, what)?))
);

fn phased_mut(state: &Rc<RefCell<StrategyState>>, f: impl FnOnce(&mut PhasedExecution)) -> JsResult<()> {
    match &mut *state.borrow_mut() {
        ExecutionStrategy::SerialPhased(p) | ExecutionStrategy::ParallelPhased(p) => {
            f(p);
            Ok(())
        }
        _ => Err(args::error("this method belongs to the phased execution strategies")),
    }
}

#[wasm_bindgen(js_class = PoptorchSerialPhasedExecution)]
impl SerialPhasedExecutionJs {
    /// `setTensorsLiveness(poptorch.Liveness.…)`: when tensors go to Streaming Memory.
    #[wasm_bindgen(js_name = setTensorsLiveness)]
    pub fn set_tensors_liveness(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] liveness: JsValue,
    ) -> JsResult<SerialPhasedExecutionJs> {
        let l: PhaseLiveness =
            enums::parse(&liveness, "SerialPhasedExecution.setTensorsLiveness: liveness", &enums::liveness())?;
        phased_mut(&self.state, |p| p.tensors_liveness = l)?;
        Ok(SerialPhasedExecutionJs { state: self.state.clone(), id: self.id })
    }
    /// `useSeparateBackwardPhase(bool)`: forward phases 0, 1, 2 → backward 6, 5, 4.
    #[wasm_bindgen(js_name = useSeparateBackwardPhase)]
    pub fn use_separate_backward_phase(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] on: JsValue,
    ) -> JsResult<SerialPhasedExecutionJs> {
        let on = args::opt_bool(&on, "SerialPhasedExecution.useSeparateBackwardPhase: use", true)?;
        phased_mut(&self.state, |p| p.separate_backward_phase = on)?;
        Ok(SerialPhasedExecutionJs { state: self.state.clone(), id: self.id })
    }
}

#[wasm_bindgen(js_class = PoptorchParallelPhasedExecution)]
impl ParallelPhasedExecutionJs {
    /// `sendTensorsOffChipAfterFwd(bool)`: activations to Streaming Memory after the forward.
    #[wasm_bindgen(js_name = sendTensorsOffChipAfterFwd)]
    pub fn send_tensors_off_chip_after_fwd(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] on: JsValue,
    ) -> JsResult<ParallelPhasedExecutionJs> {
        let on = args::opt_bool(&on, "ParallelPhasedExecution.sendTensorsOffChipAfterFwd: send", true)?;
        phased_mut(&self.state, |p| p.send_tensors_off_chip_after_fwd = on)?;
        Ok(ParallelPhasedExecutionJs { state: self.state.clone(), id: self.id })
    }
    /// `useSeparateBackwardPhase(bool)`.
    #[wasm_bindgen(js_name = useSeparateBackwardPhase)]
    pub fn use_separate_backward_phase(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] on: JsValue,
    ) -> JsResult<ParallelPhasedExecutionJs> {
        let on = args::opt_bool(&on, "ParallelPhasedExecution.useSeparateBackwardPhase: use", true)?;
        phased_mut(&self.state, |p| p.separate_backward_phase = on)?;
        Ok(ParallelPhasedExecutionJs { state: self.state.clone(), id: self.id })
    }
}
