//! RevGNN trains in wasm, in headless Chromium, through the same code as natively: Cora's
//! raw files (staged into data/ by scripts/stage-data.sh before the build) are handed to
//! the JS-facing trainer as bytes, and a few epochs must lower the loss.
#![cfg(target_arch = "wasm32")]

use ipu_playground::api::train::RevGnnTrainer;
use js_sys::{Object, Reflect, Uint8Array};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

macro_rules! cora {
    ($($suffix:literal),*) => {{
        let files = Object::new();
        $(
            let bytes: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/data/ind.cora.", $suffix));
            Reflect::set(&files, &$suffix.into(), &Uint8Array::from(bytes)).unwrap();
        )*
        files
    }};
}

fn num(v: &JsValue, key: &str) -> f64 {
    Reflect::get(v, &key.into()).unwrap().as_f64().unwrap_or_else(|| panic!("{key} in {v:?}"))
}

fn config(pairs: &[(&str, f64)]) -> JsValue {
    let o = Object::new();
    for (k, v) in pairs {
        Reflect::set(&o, &(*k).into(), &(*v).into()).unwrap();
    }
    o.into()
}

#[wasm_bindgen_test]
fn revgnn_trains_on_cora_and_the_loss_falls() {
    let files = cora!("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index");
    let cfg = config(&[("epochs", 6.0), ("layers", 3.0), ("hidden", 64.0), ("parts", 4.0), ("lr", 0.01)]);
    let mut t = RevGnnTrainer::new("Cora", &files, cfg).expect("the trainer builds");
    assert!(t.num_params() > 10_000);
    let mut losses = Vec::new();
    for _ in 0..6 {
        let e = t.train_epoch().expect("an epoch runs");
        losses.push(num(&e, "loss"));
        assert!(num(&e, "savedForBackward") > 0.0);
    }
    assert!(losses[5] < losses[0] * 0.8, "loss {losses:?}");
    let acc = t.evaluate().unwrap();
    assert!(num(&acc, "test") > 0.4, "{acc:?}");
    // Compiled for 6 epochs: a seventh is a clear error, and the trainer stays usable.
    let err = t.train_epoch().err().map(JsValue::from).unwrap();
    let msg = js_sys::Error::from(err).message().as_string().unwrap();
    assert!(msg.contains("6 epochs"), "{msg}");
    assert!(t.evaluate().is_ok());
}

#[wasm_bindgen_test]
fn bad_data_and_configs_are_clear_errors() {
    let files = cora!("x", "tx", "allx", "y", "ty", "ally", "graph");
    let e = RevGnnTrainer::new("Cora", &files, JsValue::UNDEFINED).err().map(JsValue::from).unwrap();
    assert!(js_sys::Error::from(e).message().as_string().unwrap().contains("test.index"));
    let files = cora!("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index");
    let e = RevGnnTrainer::new("Cora", &files, config(&[("hidden", 7.0)])).err().map(JsValue::from).unwrap();
    assert!(js_sys::Error::from(e).message().as_string().unwrap().contains("divisible"));
    let e = RevGnnTrainer::new("Nope", &files, JsValue::UNDEFINED).err().map(JsValue::from).unwrap();
    assert!(js_sys::Error::from(e).message().as_string().unwrap().to_lowercase().contains("nope"));
}
