//! `poptorch.optim` in JavaScript: SGD, Adam, AdamW, RMSprop and LAMB over the core's
//! `poptorch::optim::Optimizer` (defaults, ranges, PopTorch's extra attributes,
//! constant/variable attributes and PopART's replacement rules all live there).
//!
//! ```js
//! new poptorch.optim.Adam(net.parameters(), { lr: 0.003, weightDecay: 0.01 })
//! new poptorch.optim.SGD([{ params: net.fc1.parameters(), lr: 0.1 }, { params: net.fc2.parameters() }], { lr: 0.01, momentum: 0.9 })
//! opt.variableAttrs.markAsConstant("momentum");
//! ```
//!
//! `params` is a list of `Parameter`s (`module.parameters()`) or of parameter groups
//! `{ params, ...attributes }`. As in PopTorch (PopART gives every weight without a
//! group of its own the constructor's values), a plain list does not restrict training to
//! those parameters: every parameter of the wrapped model is trained with the constructor's
//! values, and a group's parameters with the group's. Attribute names may be PopTorch's
//! snake_case or camelCase (`weight_decay`, `weightDecay`); an unknown one is PopTorch's
//! error. Changes (`update`, `variableAttrs`) reach a compiled model only through
//! `model.setOptimizer(opt)`.

use super::super::args::{self, js_err, JsResult};
use super::super::state::parameter_key;
use super::handles::{self, lookup};
use crate::poptorch::optim::{ArgValue, Optimizer, OptimizerArgs, OptimizerType, ParamGroup};
use crate::trace::check::{self, MAX_LIST};
use js_sys::Array;
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

type Shared = Rc<RefCell<Optimizer>>;

/// A JS value as an optimizer argument value (converted, not judged: the core checks it).
fn arg_value(v: &JsValue) -> JsResult<ArgValue> {
    Ok(if let Some(x) = v.as_f64() {
        ArgValue::Number(x)
    } else if let Some(b) = v.as_bool() {
        ArgValue::Bool(b)
    } else if v.is_string() {
        match args::string(v, "", 64) {
            Ok(s) => ArgValue::Text(s),
            Err(_) => ArgValue::Other(args::describe(v)),
        }
    } else if v.is_instance_of::<Array>() {
        let items = args::list(v, "a list argument", 16)?;
        match items.iter().map(JsValue::as_f64).collect::<Option<Vec<f64>>>() {
            Some(xs) => ArgValue::Numbers(xs),
            None => ArgValue::Other("a list holding something other than numbers".into()),
        }
    } else {
        ArgValue::Other(args::describe(v))
    })
}

/// The `(name, value)` pairs of an options object, skipping `skip` (a group's `params`).
fn pairs(obj: &JsValue, what: &str, skip: Option<&str>) -> JsResult<Vec<(String, ArgValue)>> {
    if args::is_absent(obj) {
        return Ok(Vec::new());
    }
    args::object(obj, what)?;
    let mut out = Vec::new();
    for (k, v) in args::entries(obj, what, 64)? {
        let k = args::string(&k, &format!("{what}: an attribute name"), check::MAX_NAME_BYTES)?;
        if Some(k.as_str()) == skip || args::is_absent(&v) {
            continue;
        }
        out.push((k, arg_value(&v)?));
    }
    Ok(out)
}

/// The optimizer `new poptorch.optim.<ty>(params, options)` describes; the groups name
/// parameters by their keys (`state::key`), resolved to traced names when a model is
/// wrapped.
fn build(ty: OptimizerType, params: &JsValue, options: &JsValue) -> JsResult<Optimizer> {
    let init = format!("{}.__init__()", ty.name());
    let args =
        OptimizerArgs::parse(ty, &init, &pairs(options, &format!("{}: options", ty.name()), None)?).map_err(js_err)?;
    let items = if params.is_instance_of::<Array>() {
        args::list(params, &format!("{}: params", ty.name()), MAX_LIST)?
    } else {
        return Err(args::type_error(&format!(
            "{}: params must be a list of Parameters (module.parameters()) or of parameter groups {{ params, ... }}, \
             got {}",
            ty.name(),
            args::describe(params)
        )));
    };
    if items.is_empty() {
        return Err(args::error("optimizer got an empty parameter list"));
    }
    // Parameter groups are objects with `params` (a Parameter has none).
    let group_form = items[0].is_object() && !args::get(&items[0], "params")?.is_undefined();
    let mut groups = Vec::new();
    if group_form {
        for (i, g) in items.iter().enumerate() {
            let what = format!("{}: parameter group {i}", ty.name());
            args::object(g, &what)?;
            let plist = args::get(g, "params")?;
            let ps = args::list(&plist, &format!("{what}: params"), MAX_LIST)?;
            let keys = ps
                .iter()
                .enumerate()
                .map(|(j, p)| parameter_key(p, &format!("{what}: params[{j}]")))
                .collect::<JsResult<Vec<_>>>()?;
            let gargs = OptimizerArgs::parse(ty, &format!("parameter group {i}"), &pairs(g, &what, Some("params"))?)
                .map_err(js_err)?;
            groups.push(ParamGroup { params: keys, args: gargs });
        }
    } else {
        for (j, p) in items.iter().enumerate() {
            parameter_key(p, &format!("{}: params[{j}]", ty.name()))?;
        }
    }
    Optimizer::with_groups(ty, groups, args).map_err(js_err)
}

/// The core optimizer behind `v`, a `poptorch.optim` optimizer; `None` when left out.
pub(crate) fn optimizer_arg(v: &JsValue) -> JsResult<Option<Shared>> {
    if args::is_absent(v) {
        return Ok(None);
    }
    lookup::<Optimizer>(v)?.map(Some).ok_or_else(|| {
        args::type_error(&format!(
            "optimizer must be a poptorch.optim optimizer (SGD, Adam, AdamW, RMSprop or LAMB), got {}",
            args::describe(v)
        ))
    })
}

/// `opt.variableAttrs` (PopTorch's `variable_attrs`): which attributes are variable
/// (streamed to the device, may change through `setOptimizer`) or constant (compiled in).
#[wasm_bindgen(js_name = PoptorchVariableAttrs)]
pub struct VariableAttrs {
    state: Shared,
}

#[wasm_bindgen(js_class = PoptorchVariableAttrs)]
impl VariableAttrs {
    /// `markAsConstant(attr)`: an unknown attribute is PopTorch's error listing the allowed ones.
    #[wasm_bindgen(js_name = markAsConstant)]
    pub fn mark_as_constant(&self, #[wasm_bindgen(unchecked_param_type = "string")] attr: JsValue) -> JsResult<()> {
        let a = args::string(&attr, "variableAttrs.markAsConstant: attr", check::MAX_NAME_BYTES)?;
        self.state.borrow_mut().mark_as_constant(&a).map_err(js_err)
    }
    /// `markAsVariable(attr)`.
    #[wasm_bindgen(js_name = markAsVariable)]
    pub fn mark_as_variable(&self, #[wasm_bindgen(unchecked_param_type = "string")] attr: JsValue) -> JsResult<()> {
        let a = args::string(&attr, "variableAttrs.markAsVariable: attr", check::MAX_NAME_BYTES)?;
        self.state.borrow_mut().mark_as_variable(&a).map_err(js_err)
    }
    /// `isConstant(attr)`.
    #[wasm_bindgen(js_name = isConstant)]
    pub fn is_constant(&self, #[wasm_bindgen(unchecked_param_type = "string")] attr: JsValue) -> JsResult<bool> {
        let a = args::string(&attr, "variableAttrs.isConstant: attr", check::MAX_NAME_BYTES)?;
        Ok(self.state.borrow().is_constant(&a))
    }
    /// The variable attributes, in the order they became variable.
    #[wasm_bindgen(getter)]
    pub fn variable(&self) -> Vec<String> {
        self.state.borrow().variable_attributes().to_vec()
    }
}

/// `opt.update(attributes, group)`: changes attribute values, of the constructor's values
/// (`group` left out: every group inherits them unless it set the attribute itself) or of
/// explicit group `group`. Nothing changes when a value is invalid.
fn update(state: &Shared, ty: OptimizerType, attrs: &JsValue, group: &JsValue) -> JsResult<()> {
    let group = args::opt_count(group, "update: group", MAX_LIST)?;
    let what = match group {
        Some(g) => format!("parameter group {g}"),
        None => format!("{}.update()", ty.name()),
    };
    let a = OptimizerArgs::parse(ty, &what, &pairs(attrs, "update: attributes", None)?).map_err(js_err)?;
    state.borrow_mut().update(group, a).map_err(js_err)
}

macro_rules! optimizer {
    ($rust:ident, $js:literal, $ty:expr, $doc:literal) => {
        #[doc = $doc]
        #[wasm_bindgen(js_name = $js)]
        pub struct $rust {
            state: Shared,
            id: u32,
        }

        #[wasm_bindgen(js_class = $js)]
        impl $rust {
            /// `params`: Parameters or parameter groups; `options`: the attributes.
            #[wasm_bindgen(constructor)]
            pub fn new(
                #[wasm_bindgen(
                    unchecked_param_type = "Parameter[] | ({ params: Parameter[] } & Record<string, unknown>)[]"
                )]
                params: JsValue,
                #[wasm_bindgen(unchecked_optional_param_type = "Record<string, unknown>")] options: JsValue,
            ) -> JsResult<$rust> {
                let state = Rc::new(RefCell::new(build($ty, &params, &options)?));
                let id = handles::register(&state);
                Ok($rust { state, id })
            }
            /// Which attributes are variable or constant (`markAsConstant`, `markAsVariable`).
            #[wasm_bindgen(getter, js_name = variableAttrs)]
            pub fn variable_attrs(&self) -> VariableAttrs {
                VariableAttrs { state: self.state.clone() }
            }
            /// Changes attribute values (see `update` in the module docs); pass the optimizer
            /// to `model.setOptimizer` for a compiled model to use them.
            pub fn update(
                &self,
                #[wasm_bindgen(unchecked_param_type = "Record<string, unknown>")] attributes: JsValue,
                #[wasm_bindgen(unchecked_optional_param_type = "number")] group: JsValue,
            ) -> JsResult<()> {
                update(&self.state, $ty, &attributes, &group)
            }
            /// The learning rate of the constructor's values (an LR scheduler's view).
            #[wasm_bindgen(getter)]
            pub fn lr(&self) -> f64 {
                self.state.borrow().defaults().lr.unwrap_or(0.0) as f64
            }
            /// The loss scaling factor (global).
            #[wasm_bindgen(getter, js_name = lossScaling)]
            pub fn loss_scaling(&self) -> f64 {
                self.state.borrow().loss_scaling() as f64
            }
            #[wasm_bindgen(js_name = _handle)]
            pub fn handle(&self) -> u32 {
                self.id
            }
        }
    };
}

optimizer!(Sgd, "PoptorchSGD", OptimizerType::Sgd, "`poptorch.optim.SGD(params, { lr, momentum, dampening, weightDecay, nesterov, lossScaling, velocityScaling, useCombinedAccum, accumType, velocityAccumType, maxGradNorm })`.");
optimizer!(Adam, "PoptorchAdam", OptimizerType::Adam, "`poptorch.optim.Adam(params, { lr, betas, eps, weightDecay, amsgrad, lossScaling, accumType, firstOrderMomentumAccumType, secondOrderMomentumAccumType, maxGradNorm })`.");
optimizer!(AdamW, "PoptorchAdamW", OptimizerType::AdamW, "`poptorch.optim.AdamW(params, { lr, betas, eps, weightDecay, amsgrad, biasCorrection, lossScaling, accumType, …, maxGradNorm })`.");
optimizer!(
    RmsProp,
    "PoptorchRMSprop",
    OptimizerType::RmsProp,
    "`poptorch.optim.RMSprop(params, { lr, alpha, eps, weightDecay, momentum, centered, lossScaling, accumType, … })`."
);
optimizer!(Lamb, "PoptorchLAMB", OptimizerType::Lamb, "`poptorch.optim.LAMB(params, { lr, betas, eps, weightDecay, biasCorrection, maxWeightNorm, lossScaling, accumType, … })` (`biasCorrection: false` is LAMB without bias correction).");
