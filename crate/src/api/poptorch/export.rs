//! A wrapped model out as Python (`crate::export`): `model.toPython({ target, name })`,
//! `exportPoptorch(model, { name })` and `exportPytorch(model, { name })` give the `.py`
//! file's text; `model.safetensors()` the weights it loads (`<name>.safetensors`, trained
//! ones copied to the host first); `model.referenceStep(...inputs)` one step of the engine
//! on one micro-batch — outputs, loss, every parameter gradient and the dropout masks
//! drawn —, what `make check-export` compares the exported PyTorch model with.
//!
//! ```js
//! model.plan(...inputs);                                  // traces it (or a call, compile)
//! const py = model.toPython({ target: "pytorch", name: "mlp" });
//! fs.writeFileSync("mlp.py", py);
//! fs.writeFileSync("mlp.safetensors", model.safetensors());
//! ```

use super::super::args::{self, js_err, JsResult};
use super::super::host_tensor;
use super::model::{inputs_arg, PoplarExecutorJs};
use crate::export::{reference::reference, to_python, weights, Target};
use js_sys::{Array, Object, Reflect};
use wasm_bindgen::prelude::*;

/// The settings `{ target?, name? }` (another key is an error naming it).
fn settings(v: &JsValue, what: &str, target: Option<Target>) -> JsResult<(Target, String)> {
    let mut out = (target.unwrap_or(Target::Poptorch), "model".to_string());
    if args::is_absent(v) {
        return Ok(out);
    }
    let allowed: &[&str] = if target.is_some() { &["name"] } else { &["target", "name"] };
    for (k, _) in args::entries(v, what, 8)? {
        let key = k.as_string().unwrap_or_default();
        if !allowed.contains(&key.as_str()) {
            return Err(args::error(&format!(
                "{what}: unknown setting '{key}' (the settings are {})",
                allowed.iter().map(|a| format!("'{a}'")).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    if target.is_none() {
        let t = args::get(v, "target")?;
        if !args::is_absent(&t) {
            out.0 = Target::parse(&args::string(&t, &format!("{what}.target"), 16)?).map_err(js_err)?;
        }
    }
    let n = args::get(v, "name")?;
    if !args::is_absent(&n) {
        let name = args::name(&n, &format!("{what}.name"))?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
            return Err(args::error(&format!(
                "{what}.name: '{name}' is not a file name stem (letters, digits, '_', '-', '.')"
            )));
        }
        out.1 = name;
    }
    Ok(out)
}

fn python(model: &PoplarExecutorJs, target: Target, name: &str) -> JsResult<String> {
    model.with_exec(|exec| to_python(exec, target, name).map_err(js_err))
}

#[wasm_bindgen(js_class = PoplarExecutor)]
impl PoplarExecutorJs {
    /// `toPython({ target: "poptorch" | "pytorch", name })`: the model as a self-contained
    /// `.py` file (PopTorch's by default), loading `<name>.safetensors` beside it (`name`
    /// defaults to `"model"`). The model must have been traced (called, compiled or
    /// planned). Needs no weights.
    #[wasm_bindgen(js_name = toPython)]
    pub fn to_python(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "{ target?: \"poptorch\" | \"pytorch\", name?: string }")]
        settings: JsValue,
    ) -> JsResult<String> {
        let (target, name) = self::settings(&settings, "toPython: settings", None)?;
        python(self, target, &name)
    }

    /// The model's parameters and buffers as a safetensors file (a `Uint8Array`) under their
    /// state-dict names, which the exported code loads strictly; a trained model's weights are
    /// copied to the host first. This materialises the weights.
    pub fn safetensors(&self) -> JsResult<Vec<u8>> {
        self.with_exec(|exec| {
            if exec.is_compiled() && exec.is_training() {
                exec.copy_weights_to_host().map_err(js_err)?;
            }
            weights(exec.model()).map_err(js_err)
        })
    }

    /// One step of the engine on one micro-batch (host tensors, as `call` takes them):
    /// `{ outputs, lossOutput, gradients: [name, HostTensor][], masks }` — the forward's
    /// outputs, the loss's index among them and each parameter's gradient (training models),
    /// and the dropout masks drawn, in order. The model must have been traced; the weights
    /// are the host copy's. Trains nothing. The namespace method is
    /// `referenceStep(...inputs)`.
    #[wasm_bindgen(js_name = _referenceStep)]
    pub fn reference_step(
        &self,
        #[wasm_bindgen(unchecked_param_type = "(HostTensorInput | HostSparse)[]")] inputs: JsValue,
    ) -> JsResult<JsValue> {
        let inputs = inputs_arg(&inputs, "referenceStep: inputs", false)?;
        let r = self.with_exec(|exec| {
            let seed = exec.options().random_seed.unwrap_or(0);
            reference(exec.model(), exec.is_training(), &inputs.tensors(), seed).map_err(js_err)
        })?;
        let o = Object::new();
        let list = |ts: &[crate::tensor::Tensor]| -> JsResult<JsValue> {
            let a = Array::new();
            for t in ts {
                a.push(&host_tensor::to_js(t)?);
            }
            Ok(a.into())
        };
        Reflect::set(&o, &"outputs".into(), &list(&r.outputs)?)?;
        Reflect::set(&o, &"lossOutput".into(), &r.loss_output.map_or(JsValue::NULL, |i| (i as f64).into()))?;
        let grads = Array::new();
        for (name, g) in &r.gradients {
            grads.push(&Array::of2(&name.into(), &host_tensor::to_js(g)?));
        }
        Reflect::set(&o, &"gradients".into(), &grads)?;
        Reflect::set(&o, &"masks".into(), &list(&r.masks)?)?;
        Ok(o.into())
    }
}

/// `exportPoptorch(model, { name })`: `model.toPython({ target: "poptorch", name })`.
#[wasm_bindgen(js_name = exportPoptorch)]
pub fn export_poptorch(
    model: &PoplarExecutorJs,
    #[wasm_bindgen(unchecked_optional_param_type = "{ name?: string }")] settings: JsValue,
) -> JsResult<String> {
    let (target, name) = self::settings(&settings, "exportPoptorch: settings", Some(Target::Poptorch))?;
    python(model, target, &name)
}

/// `exportPytorch(model, { name })`: `model.toPython({ target: "pytorch", name })`.
#[wasm_bindgen(js_name = exportPytorch)]
pub fn export_pytorch(
    model: &PoplarExecutorJs,
    #[wasm_bindgen(unchecked_optional_param_type = "{ name?: string }")] settings: JsValue,
) -> JsResult<String> {
    let (target, name) = self::settings(&settings, "exportPytorch: settings", Some(Target::Pytorch))?;
    python(model, target, &name)
}
