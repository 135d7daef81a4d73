//! The engine inside a dedicated Web Worker, where the page runs it (www/worker.js):
//! `wasm-pack test --headless --chrome` with `run_in_dedicated_worker`.
#![cfg(target_arch = "wasm32")]

use ipu_playground::api;
use js_sys::Reflect;
use wasm_bindgen::JsValue;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_dedicated_worker);

fn sizes(v: &[u32]) -> JsValue {
    v.iter().map(|&x| JsValue::from(x)).collect::<js_sys::Array>().into()
}

fn global_has(name: &str) -> bool {
    Reflect::has(&js_sys::global(), &JsValue::from_str(name)).unwrap()
}

#[wasm_bindgen_test]
fn runs_in_a_dedicated_worker() {
    let global = js_sys::global();
    let constructor = Reflect::get(&global, &"constructor".into()).unwrap();
    let name = Reflect::get(&constructor, &"name".into()).unwrap().as_string();
    assert_eq!(name.as_deref(), Some("DedicatedWorkerGlobalScope"));
    assert!(global_has("WorkerGlobalScope") && global_has("importScripts") && global_has("postMessage"));
    assert!(!global_has("document") && !global_has("window"));
}

#[wasm_bindgen_test]
fn traces_a_model_in_the_worker() {
    let model = api::trace_mlp(sizes(&[4, 16, 16, 3]), 8.into()).expect("a valid MLP traces");
    let text = Reflect::get(&model, &"text".into()).unwrap().as_string().unwrap();
    assert_eq!(text.lines().filter(|l| l.contains("linear")).count(), 3, "{text}");
    assert_eq!(text.lines().filter(|l| l.contains("relu")).count(), 2, "{text}");
    assert!(api::trace_mlp(sizes(&[4]), 8.into()).is_err());
    assert!(api::default_model().is_ok());
}
