//! PopTorch's enums in JavaScript: `poptorch.OutputMode.All` and the like are strings, the
//! core enums' own JSON names (`"all"`, `"everyN"`, `"sameAsIpu"`), so that an option set
//! through a method and the same option in the Options JSON are one value. The tables are
//! made from the core types' serde names (their one home); `_poptorchEnums()` hands them to
//! the namespace `scripts/fix-pkg.mjs` builds, and [`parse`] reads an argument back.

use super::super::args::{self, JsResult};
use crate::compile::options::{CommGroupType, MeanReductionStrategy, OutputMode, ReductionType};
use crate::compile::strategy::{AutoStage, PhaseLiveness};
use crate::poptorch::grouping::VariableRetrievalMode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use wasm_bindgen::prelude::*;

/// One enum: its PopTorch name and `(member, value)` pairs (`("EveryN", "everyN")`).
pub(crate) struct Table {
    pub name: &'static str,
    pub entries: Vec<(String, String)>,
}

fn table<T: Serialize>(name: &'static str, variants: &[T]) -> Table {
    let entries = variants
        .iter()
        .map(|v| {
            let value = serde_json::to_value(v).ok().and_then(|j| j.as_str().map(str::to_string)).unwrap_or_default();
            let mut key = value.clone();
            if let Some(first) = key.get(0..1) {
                key.replace_range(0..1, &first.to_ascii_uppercase());
            }
            (key, value)
        })
        .collect();
    Table { name, entries }
}

pub(crate) fn output_mode() -> Table {
    use OutputMode::*;
    table("OutputMode", &[Final, EveryN, All, Sum, Default])
}
pub(crate) fn reduction_type() -> Table {
    use ReductionType::*;
    table("ReductionType", &[Sum, Mean, NoReduction])
}
pub(crate) fn mean_reduction_strategy() -> Table {
    use MeanReductionStrategy::*;
    table("MeanReductionStrategy", &[Running, Post, PostAndLoss])
}
pub(crate) fn comm_group_type() -> Table {
    use CommGroupType::*;
    table("CommGroupType", &[All, Consecutive, Orthogonal, NoGrouping])
}
pub(crate) fn variable_retrieval_mode() -> Table {
    use VariableRetrievalMode::*;
    table("VariableRetrievalMode", &[OnePerGroup, AllReplicas])
}
pub(crate) fn liveness() -> Table {
    use PhaseLiveness::*;
    table("Liveness", &[AlwaysLive, OffChipAfterFwd, OffChipAfterFwdNoOverlap, OffChipAfterEachPhase])
}
pub(crate) fn auto_stage() -> Table {
    use AutoStage::*;
    table("AutoStage", &[SameAsIpu, AutoIncrement])
}

pub(crate) fn matmul_serialization_mode() -> Table {
    use crate::trace::MatMulSerializationMode::*;
    table("MatMulSerializationMode", &[InputChannels, ReducingDim, OutputChannels, Disabled])
}

fn all() -> Vec<Table> {
    vec![
        matmul_serialization_mode(),
        output_mode(),
        reduction_type(),
        mean_reduction_strategy(),
        comm_group_type(),
        variable_retrieval_mode(),
        liveness(),
        auto_stage(),
    ]
}

impl Table {
    /// The value `s` names (a value, or a member name), if any.
    pub fn value_of(&self, s: &str) -> Option<&str> {
        self.entries.iter().find(|(k, v)| k == s || v == s).map(|(_, v)| v.as_str())
    }
}

/// The enum argument `v` (a string of `t`) as the core type; a non-string is a `TypeError`,
/// an unknown string an `Error` listing the values.
pub(crate) fn parse<T: DeserializeOwned>(v: &JsValue, what: &str, t: &Table) -> JsResult<T> {
    let values: Vec<String> = t.entries.iter().map(|(k, v)| format!("{k} ({v:?})")).collect();
    let listing = format!("poptorch.{}.{{{}}}", t.name, values.join(", "));
    if !v.is_string() {
        return Err(args::type_error(&format!("{what} must be one of {listing}, got {}", args::describe(v))));
    }
    let s = args::string(v, what, 64)?;
    let value = t.value_of(&s).ok_or_else(|| args::error(&format!("{what} must be one of {listing}, got {s:?}")))?;
    serde_json::from_value(serde_json::Value::String(value.to_string())).map_err(args::js_err)
}

/// The enums as `{ OutputMode: { Final: "final", … }, … }`, for the `poptorch` namespace.
#[wasm_bindgen(js_name = _poptorchEnums)]
pub fn poptorch_enums() -> JsResult<JsValue> {
    let out = js_sys::Object::new();
    for t in all() {
        let o = js_sys::Object::new();
        for (k, v) in &t.entries {
            js_sys::Reflect::set(&o, &JsValue::from_str(k), &JsValue::from_str(v))?;
        }
        js_sys::Reflect::set(&out, &JsValue::from_str(t.name), &o)?;
    }
    Ok(out.into())
}
