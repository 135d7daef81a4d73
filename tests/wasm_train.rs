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
    let mut t = RevGnnTrainer::new("Cora".into(), files.into(), cfg).expect("the trainer builds");
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
    let err = t.train_epoch().err().unwrap();
    let msg = js_sys::Error::from(err).message().as_string().unwrap();
    assert!(msg.contains("6 epochs"), "{msg}");
    assert!(t.evaluate().is_ok());
}

#[wasm_bindgen_test]
fn bad_data_and_configs_are_clear_errors() {
    let files = cora!("x", "tx", "allx", "y", "ty", "ally", "graph");
    let e = RevGnnTrainer::new("Cora".into(), files.into(), JsValue::UNDEFINED).err().unwrap();
    assert!(js_sys::Error::from(e).message().as_string().unwrap().contains("test.index"));
    let files = cora!("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index");
    let e = RevGnnTrainer::new("Cora".into(), files.clone().into(), config(&[("hidden", 7.0)])).err().unwrap();
    assert!(js_sys::Error::from(e).message().as_string().unwrap().contains("divisible"));
    let e = RevGnnTrainer::new("Nope".into(), files.into(), JsValue::UNDEFINED).err().unwrap();
    assert!(js_sys::Error::from(e).message().as_string().unwrap().to_lowercase().contains("nope"));
}

/// The error class and message a rejected constructor threw.
fn rejected(r: Result<RevGnnTrainer, JsValue>) -> (String, String) {
    let e = js_sys::Error::from(r.err().expect("rejected"));
    (e.name().as_string().unwrap(), e.message().as_string().unwrap())
}

#[wasm_bindgen_test]
fn configs_that_would_hang_or_lie_are_rejected_with_their_class_and_limit() {
    let files = cora!("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index");
    let with = |key: &str, v: JsValue| {
        let o = Object::new();
        Reflect::set(&o, &key.into(), &v).unwrap();
        rejected(RevGnnTrainer::new("Cora".into(), files.clone().into(), o.into()))
    };
    let (class, msg) = with("epochs", 1e6.into());
    assert_eq!((class.as_str(), msg.as_str()), ("RangeError", "config.epochs must be at most 5000, got 1000000"));
    let (class, msg) = with("layers", 1e5.into());
    assert_eq!((class.as_str(), msg.as_str()), ("RangeError", "config.layers must be at most 1001, got 100000"));
    for bad in [f64::NAN, f64::INFINITY, -0.1] {
        let (class, msg) = with("lr", bad.into());
        assert_eq!(class, "RangeError", "{msg}");
        assert!(msg.starts_with("config.lr must be"), "{msg}");
    }
    let (class, msg) = with("weightDecay", f64::NAN.into());
    assert_eq!((class.as_str(), msg.as_str()), ("RangeError", "config.weightDecay must be finite, got NaN"));
    let (class, msg) = with("optimizer", 42.into());
    assert_eq!(class, "TypeError", "{msg}");
    let (class, msg) = with("noRev", "yes".into());
    assert_eq!((class.as_str(), msg.as_str()), ("TypeError", "config.noRev must be a boolean, got the string \"yes\""));
    let (class, msg) = with("epochs", "4".into());
    assert_eq!((class.as_str(), msg.as_str()), ("TypeError", "config.epochs must be a number, got the string \"4\""));
    let (class, msg) = with("epoch", 3.into());
    assert_eq!(class, "Error");
    assert!(msg.starts_with("config has no option \"epoch\""), "{msg}");
    // A wrong name or file type is a TypeError too, and the trainer still builds afterwards.
    let (class, _) = rejected(RevGnnTrainer::new(42.into(), files.clone().into(), JsValue::UNDEFINED));
    assert_eq!(class, "TypeError");
    let bad_files = Object::new();
    Reflect::set(&bad_files, &"x".into(), &"not bytes".into()).unwrap();
    let (class, msg) = rejected(RevGnnTrainer::new("Cora".into(), bad_files.into(), JsValue::UNDEFINED));
    assert_eq!(
        (class.as_str(), msg.as_str()),
        ("TypeError", "RevGnnTrainer: files[\"x\"] must be a Uint8Array, got the string \"not bytes\"")
    );
    // Within every option's range, but too big as a whole: 1001 layers without reversibility
    // on all of Cora at once would keep about 7 GB for the backward pass.
    let cfg = config(&[("epochs", 1.0), ("layers", 1001.0), ("parts", 1.0)]);
    Reflect::set(&cfg, &"noRev".into(), &true.into()).unwrap();
    let (class, msg) = rejected(RevGnnTrainer::new("Cora".into(), files.clone().into(), cfg));
    assert_eq!(class, "Error");
    assert!(msg.contains("bytes of activations at once, more than the limit of 1073741824"), "{msg}");
    assert!(msg.contains("use reversible layers (noRev: false)"), "{msg}");
    let cfg = config(&[("epochs", 1.0), ("layers", 1.0), ("hidden", 8.0), ("parts", 2.0)]);
    assert!(RevGnnTrainer::new("Cora".into(), files.into(), cfg).is_ok());
}

#[wasm_bindgen_test]
fn a_loss_that_turns_nan_stops_training_instead_of_reporting_accuracies() {
    let files = cora!("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index");
    // The largest learning rate and weight decay allowed, with plain SGD: each step scales the
    // weights by 1 - lr * weightDecay = -9, so they overflow within a few dozen steps.
    let cfg = config(&[
        ("epochs", 20.0),
        ("layers", 4.0),
        ("hidden", 64.0),
        ("parts", 2.0),
        ("lr", 10.0),
        ("weightDecay", 1.0),
    ]);
    Reflect::set(&cfg, &"optimizer".into(), &"sgd".into()).unwrap();
    let mut t = RevGnnTrainer::new("Cora".into(), files.into(), cfg).expect("the trainer builds");
    let mut stop = None;
    for epoch in 1..=20 {
        match t.train_epoch() {
            Ok(_) => {}
            Err(e) => {
                stop = Some((epoch, js_sys::Error::from(e).message().as_string().unwrap()));
                break;
            }
        }
    }
    let (epoch, msg) = stop.expect("lr 10 with SGD diverges within 20 epochs");
    assert!(msg.contains(&format!("at epoch {epoch}")), "{msg}");
    assert!(msg.contains("learning rate is too high (lr = 10"), "{msg}");
    let after = js_sys::Error::from(t.evaluate().expect_err("no accuracies of NaN weights"));
    assert_eq!(after.message().as_string().unwrap(), msg);
}
