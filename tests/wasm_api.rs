//! The JavaScript API (`ipu_playground::api`) in a real browser page: headless Chromium,
//! run by `wasm-pack test --headless --chrome` (see scripts/test.sh).
#![cfg(target_arch = "wasm32")]

use ipu_playground::api;
use js_sys::{Array, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn get(value: &JsValue, key: &str) -> JsValue {
    Reflect::get(value, &JsValue::from_str(key)).unwrap_or_else(|_| panic!("no {key} in {value:?}"))
}

fn text_of(model: &JsValue) -> String {
    get(model, "text").as_string().expect("`text` is a string")
}

fn nodes_of(model: &JsValue) -> Array {
    get(&get(model, "graph"), "nodes").dyn_into::<Array>().expect("`graph.nodes` is an array")
}

fn lines_with(text: &str, word: &str) -> usize {
    text.lines().filter(|l| l.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| w == word)).count()
}

fn error_message(err: impl Into<JsValue>) -> String {
    let err: JsValue = err.into();
    err.dyn_into::<js_sys::Error>().expect("an Error object").message().into()
}

#[wasm_bindgen_test]
fn runs_on_a_page() {
    assert!(Reflect::has(&js_sys::global(), &"document".into()).unwrap());
}

#[wasm_bindgen_test]
fn version_is_the_crate_version() {
    assert_eq!(api::version(), env!("CARGO_PKG_VERSION"));
}

#[wasm_bindgen_test]
fn trace_mlp_prints_one_line_per_node() {
    let model = api::trace_mlp(vec![4, 8, 2], 3).expect("a valid MLP traces");
    let text = text_of(&model);
    assert_eq!(lines_with(&text, "linear"), 2, "{text}");
    assert_eq!(lines_with(&text, "relu"), 1, "{text}");
    for name in ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"] {
        assert!(text.contains(&format!("\"{name}\"")), "{name} in\n{text}");
    }
    assert!(nodes_of(&model).length() >= 3);
}

#[wasm_bindgen_test]
fn deeper_mlp_has_a_bigger_graph() {
    let small = api::trace_mlp(vec![4, 2], 1).unwrap();
    let deep = api::trace_mlp(vec![4, 8, 8, 8, 2], 1).unwrap();
    assert_eq!(lines_with(&text_of(&small), "linear"), 1);
    assert_eq!(lines_with(&text_of(&deep), "linear"), 4);
    assert_eq!(lines_with(&text_of(&deep), "relu"), 3);
    assert!(nodes_of(&deep).length() > nodes_of(&small).length());
}

#[wasm_bindgen_test]
fn default_model_is_a_traced_mlp() {
    let model = api::default_model().expect("the default model traces");
    assert!(lines_with(&text_of(&model), "linear") >= 1);
    assert!(nodes_of(&model).length() > 0);
}

#[wasm_bindgen_test]
fn bad_input_is_an_error_naming_the_cause() {
    let few = error_message(api::trace_mlp(vec![4], 3).unwrap_err());
    assert!(few.to_lowercase().contains("size"), "{few}");
    let zero = error_message(api::trace_mlp(vec![4, 0, 2], 3).unwrap_err());
    assert!(zero.to_lowercase().contains("size") || zero.contains('0'), "{zero}");
    let batch = error_message(api::trace_mlp(vec![4, 2], 0).unwrap_err());
    assert!(batch.to_lowercase().contains("batch"), "{batch}");
    // The module is still usable after errors.
    assert!(api::trace_mlp(vec![2, 2], 1).is_ok());
}
