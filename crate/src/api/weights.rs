//! Trained weights out of the browser: `trainer.safetensors()` gives the RevGNN's current
//! parameters as a safetensors file with the names PyG's `RevGNN` has in its `state_dict`
//! (`crate::gnn::pyg`), for `model.load_state_dict(safetensors.torch.load_file(path))`.

use super::args::{js_err, JsResult};
use super::train::RevGnnTrainer;
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
impl RevGnnTrainer {
    /// The current weights as safetensors bytes (a `Uint8Array`): PyG's parameter names,
    /// float32, `[out, in]` weights; `__metadata__` holds the configuration, the dataset
    /// and the epochs trained.
    pub fn safetensors(&self) -> JsResult<Vec<u8>> {
        crate::gnn::pyg::rev_gnn_safetensors(&self.inner).map_err(js_err)
    }

    /// PyG's `state_dict()` keys of this model, in PyG's order.
    #[wasm_bindgen(js_name = pygParameterNames)]
    pub fn pyg_parameter_names(&self) -> Vec<String> {
        crate::gnn::pyg::rev_gnn_keys(&self.inner.model.cfg)
    }
}

/// The tensors of a safetensors file (`bytes`, a `Uint8Array`) as `{ name: { shape, dtype,
/// data } }`, the host tensors `loadStateDict` takes: what `safetensors.torch.load_file`
/// returns in Python (the page's Python reads the exported weights so). I64 values are read
/// as the engine's int32 when they fit.
#[wasm_bindgen(
    js_name = loadSafetensors,
    unchecked_return_type = "Record<string, { shape: number[]; dtype: string; data: Float32Array | Int32Array | Uint8Array }>"
)]
pub fn load_safetensors(bytes: &[u8]) -> JsResult<JsValue> {
    let tensors = crate::tensor::safetensors::read(bytes).map_err(js_err)?;
    let out = js_sys::Object::new();
    for (name, t) in &tensors {
        js_sys::Reflect::set(&out, &JsValue::from_str(name), &super::host_tensor::to_js(t)?)?;
    }
    Ok(out.into())
}
