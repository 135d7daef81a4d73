//! The JavaScript API (`ipu_playground::api`) in a real browser page: headless Chromium,
//! run by `wasm-pack test --headless --chrome` (see scripts/test.sh).
#![cfg(target_arch = "wasm32")]

use ipu_playground::api;
use js_sys::{Array, Object, Reflect};
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

/// The class (`TypeError`, `RangeError`, `Error`) and message of a thrown error.
fn thrown(err: JsValue) -> (String, String) {
    let e = err.dyn_into::<js_sys::Error>().expect("an Error object");
    (e.name().into(), e.message().into())
}

fn sizes(v: &[f64]) -> JsValue {
    v.iter().map(|&x| JsValue::from(x)).collect::<Array>().into()
}

fn mlp(v: &[f64], batch: f64) -> Result<JsValue, JsValue> {
    api::trace_mlp(sizes(v), batch.into())
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
    let model = mlp(&[4.0, 8.0, 2.0], 3.0).expect("a valid MLP traces");
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
    let small = mlp(&[4.0, 2.0], 1.0).unwrap();
    let deep = mlp(&[4.0, 8.0, 8.0, 8.0, 2.0], 1.0).unwrap();
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
    let few = error_message(mlp(&[4.0], 3.0).unwrap_err());
    assert!(few.to_lowercase().contains("size"), "{few}");
    let zero = error_message(mlp(&[4.0, 0.0, 2.0], 3.0).unwrap_err());
    assert!(zero.to_lowercase().contains("size") || zero.contains('0'), "{zero}");
    let batch = error_message(mlp(&[4.0, 2.0], 0.0).unwrap_err());
    assert!(batch.to_lowercase().contains("batch"), "{batch}");
    // The module is still usable after errors.
    assert!(mlp(&[2.0, 2.0], 1.0).is_ok());
}

#[wasm_bindgen_test]
fn wrong_types_are_type_errors_and_sizes_out_of_range_range_errors() {
    let cases: Vec<(JsValue, JsValue, &str, &str)> = vec![
        (sizes(&[4.7, 2.0]), 1.into(), "TypeError", "traceMlp: sizes[0] must be a whole number, got 4.7"),
        (sizes(&[4.0, 2.0]), "4".into(), "TypeError", "traceMlp: batch must be a number, got the string \"4\""),
        (sizes(&[4.0, 2.0]), (-1.0).into(), "RangeError", "traceMlp: batch must not be negative, got -1"),
        (sizes(&[4.0, 2.0]), f64::NAN.into(), "TypeError", "traceMlp: batch must be a whole number, got NaN"),
        ("4,2".into(), 1.into(), "TypeError", "traceMlp: sizes must be an array, got the string \"4,2\""),
        (Object::new().into(), 1.into(), "TypeError", "traceMlp: sizes must be an array, got an object"),
        (sizes(&[4.0, 2.0]), 1e9.into(), "RangeError", "traceMlp: batch must be at most 268435456, got 1000000000"),
    ];
    for (s, b, class, msg) in cases {
        assert_eq!(thrown(api::trace_mlp(s, b).unwrap_err()), (class.to_string(), msg.to_string()));
    }
    // Too big for the tensor limit: the size asked for is named.
    let (class, msg) = thrown(mlp(&[30000.0, 30000.0], 2.0).unwrap_err());
    assert_eq!(class, "Error");
    assert!(msg.contains("f32[30000,30000] needs 3600000000 bytes"), "{msg}");
    assert!(mlp(&[2.0, 2.0], 1.0).is_ok());
}

#[wasm_bindgen_test]
fn the_module_keeps_working_after_thousands_of_rejected_calls() {
    let good = text_of(&mlp(&[3.0, 5.0, 2.0], 4.0).unwrap());
    for i in 0..3000 {
        let bad: JsValue = match i % 4 {
            0 => (-1.0).into(),
            1 => 4.5.into(),
            2 => "x".into(),
            _ => 1e12.into(),
        };
        assert!(api::trace_mlp(sizes(&[3.0, 5.0]), bad.clone()).is_err());
        assert!(api::modules::Linear::new(bad.clone(), 2.into(), JsValue::UNDEFINED).is_err());
        assert!(api::modules::Embedding::new(2.into(), bad.clone()).is_err());
        assert!(api::modules::manual_seed(if i % 4 == 3 { 2f64.powi(60).into() } else { bad }).is_err());
    }
    // The generators and the tracer are as before: the same graph, printed the same.
    assert_eq!(text_of(&mlp(&[3.0, 5.0, 2.0], 4.0).unwrap()), good);
}

#[wasm_bindgen_test]
fn limits_name_the_numbers_the_checks_use() {
    let l = api::limits().unwrap();
    let num = |v: &JsValue, k: &str| get(v, k).as_f64().unwrap_or_else(|| panic!("{k}"));
    assert_eq!(num(&l, "maxTensorBytes"), 268435456.0);
    assert_eq!(num(&l, "maxRank"), 16.0);
    assert_eq!(num(&l, "maxIpu"), 65535.0);
    assert_eq!(num(&get(&l, "trainer"), "maxEpochs"), 5000.0);
}
