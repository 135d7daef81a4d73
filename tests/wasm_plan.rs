//! The planner's JavaScript API (`plan`, `demoModel`, the `traced` member of trace results)
//! in headless Chromium (scripts/test.sh runs it with wasm-bindgen-test-runner).
#![cfg(target_arch = "wasm32")]

use ipu_playground::api;
use js_sys::{Array, Reflect, JSON};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn get(v: &JsValue, path: &str) -> JsValue {
    path.split('.').fold(v.clone(), |o, k| Reflect::get(&o, &k.into()).unwrap_or_else(|_| panic!("no {k} in {path}")))
}

fn json(s: &str) -> JsValue {
    JSON::parse(s).expect("valid JSON")
}

fn codes(plan: &JsValue, list: &str) -> Vec<String> {
    get(plan, list).dyn_into::<Array>().unwrap().iter().map(|e| get(&e, "code").as_string().unwrap()).collect()
}

fn message(err: JsValue) -> String {
    err.dyn_into::<js_sys::Error>().expect("an Error").message().into()
}

#[wasm_bindgen_test]
fn options_a_traced_mlp_plans_on_one_ipu_with_defaults() {
    let model = api::trace_mlp(json("[4, 16, 3]"), 8.into()).unwrap();
    let plan = api::plan::plan(model.clone(), JsValue::UNDEFINED, JsValue::UNDEFINED).unwrap();
    assert_eq!(get(&plan, "valid"), JsValue::TRUE);
    assert_eq!(get(&plan, "fits"), JsValue::TRUE);
    assert_eq!(get(&plan, "strategy").as_string().unwrap(), "pipelined");
    assert_eq!(get(&plan, "ipusUsed").as_f64(), Some(1.0));
    let nodes = get(&model, "graph.nodes").dyn_into::<Array>().unwrap().length();
    assert_eq!(get(&plan, "placement.ipu").dyn_into::<Array>().unwrap().length(), nodes);
    assert_eq!(get(&plan, "memory.capacityBytes").as_f64(), Some(1472.0 * 638_976.0));
    assert!(get(&plan, "time.throughput").as_f64().unwrap() > 0.0);
    // The traced member plans the same.
    let again = api::plan::plan(get(&model, "traced"), JsValue::UNDEFINED, JsValue::UNDEFINED).unwrap();
    assert_eq!(get(&again, "numNodes"), get(&plan, "numNodes"));
}

#[wasm_bindgen_test]
fn ipu_count_invalid_configurations_are_plans_with_errors() {
    let m = api::plan::demo_model("mlp".into(), json(r#"{"layers": 3, "ipus": 3, "small": true}"#)).unwrap();
    let plan = api::plan::plan(m.clone(), json(r#"{"deviceIterations": 3}"#), JsValue::UNDEFINED).unwrap();
    assert_eq!(get(&plan, "valid"), JsValue::FALSE);
    assert_eq!(get(&plan, "fits"), JsValue::FALSE);
    assert_eq!((get(&plan, "ipusUsed").as_f64(), get(&plan, "ipusReserved").as_f64()), (Some(3.0), Some(4.0)));
    assert_eq!(codes(&plan, "errors"), ["ipu_count_not_power_of_two"]);
    let plan =
        api::plan::plan(m.clone(), json(r#"{"deviceIterations": 3, "autoRoundNumIPUs": true}"#), JsValue::UNDEFINED)
            .unwrap();
    assert_eq!(get(&plan, "valid"), JsValue::TRUE);
    assert_eq!(codes(&plan, "warnings"), ["ipu_count_rounded"]);
    // An unknown option key: planned with the defaults, the key named in the errors.
    let plan = api::plan::plan(m, json(r#"{"deviceIteration": 3}"#), JsValue::UNDEFINED).unwrap();
    assert_eq!(get(&plan, "valid"), JsValue::FALSE);
    let first = get(&plan, "errors").dyn_into::<Array>().unwrap().get(0);
    assert_eq!(get(&first, "code").as_string().unwrap(), "options_json");
    assert!(get(&first, "message").as_string().unwrap().contains("deviceIteration"));
}

#[wasm_bindgen_test]
fn pipelined_training_plans_build_the_training_graph() {
    let m = api::plan::demo_model(
        "transformer".into(),
        json(r#"{"layers": 2, "ipus": 2, "small": true, "training": true}"#),
    )
    .unwrap();
    let settings = json(r#"{"training": true, "optimizer": "adam"}"#);
    let plan =
        api::plan::plan(m.clone(), json(r#"{"Training": {"gradientAccumulation": 2}}"#), settings.clone()).unwrap();
    assert_eq!(get(&plan, "training"), JsValue::TRUE);
    assert_eq!(get(&plan, "stages").dyn_into::<Array>().unwrap().length(), 3, "2F - 1");
    let e = get(&plan, "errors").dyn_into::<Array>().unwrap().get(0);
    assert_eq!(get(&e, "code").as_string().unwrap(), "pipeline_gradient_accumulation");
    assert!(get(&e, "message").as_string().unwrap().contains("pipeline stages (3)"));
    let plan = api::plan::plan(m, json(r#"{"Training": {"gradientAccumulation": 3}}"#), settings).unwrap();
    assert_eq!(get(&plan, "valid"), JsValue::TRUE);
    assert_eq!(get(&plan, "pipeline.rampUp").as_f64(), Some(2.0));
    assert!(get(&plan, "memory.ipus").dyn_into::<Array>().unwrap().length() == 2);
}

#[wasm_bindgen_test]
fn options_nothing_to_plan_throws_an_error_naming_the_cause() {
    let e = message(api::plan::plan(JsValue::from(42), JsValue::UNDEFINED, JsValue::UNDEFINED).unwrap_err());
    assert!(e.contains("trace()"), "{e}");
    let e = message(api::plan::plan(json(r#"{"traced": 1}"#), JsValue::UNDEFINED, JsValue::UNDEFINED).unwrap_err());
    assert!(e.contains("trace()"), "{e}");
    let mlp = api::trace_mlp(json("[4, 3]"), 2.into()).unwrap();
    let e = message(api::plan::plan(mlp.clone(), JsValue::UNDEFINED, json(r#"{"training": true}"#)).unwrap_err());
    assert!(e.contains("loss must be a float scalar"), "{e}");
    let e = message(api::plan::plan(mlp.clone(), JsValue::UNDEFINED, json(r#"{"trianing": true}"#)).unwrap_err());
    assert!(e.contains("trianing"), "{e}");
    let e = message(api::plan::plan(mlp.clone(), JsValue::from("fast"), JsValue::UNDEFINED).unwrap_err());
    assert!(e.contains("options must be an object"), "{e}");
    let e = message(api::plan::demo_model("cnn".into(), JsValue::UNDEFINED).unwrap_err());
    assert!(e.contains("mlp, transformer or revgnn"), "{e}");
    let e = message(api::plan::demo_model("mlp".into(), json(r#"{"layers": 0}"#)).unwrap_err());
    assert!(e.contains("layers must be from 1"), "{e}");
    // Still usable afterwards.
    assert!(api::plan::plan(mlp, JsValue::UNDEFINED, JsValue::UNDEFINED).is_ok());
}

/// The planner's byte counts are 64-bit in wasm32, where `usize` is 32 bits: a deep MLP's
/// training plan keeps 10 GiB of activations, the same exact number as natively
/// (tests/planner_memory.rs `BIG_MLP_PEAK`), in the core's Plan and in the JSON the JS
/// API returns.
#[wasm_bindgen_test]
fn memory_bytes_past_4_gib_are_exact_in_wasm32() {
    use ipu_playground::autograd::{training_graph, TrainOptions};
    use ipu_playground::compile::{plan, Options};
    use ipu_playground::ir::OptimizerStep;
    use ipu_playground::models::{demo_model, DemoKind, DemoSizes};
    // 80 tensors of 128 MiB, the logits' gradient, the last weight gradient and the loss.
    const PEAK: u64 = 80 * (128 << 20) + 131_072 * 16 * 4 + 16 * 256 * 4 + 4;
    assert!(PEAK > u32::MAX as u64);
    let sizes = DemoSizes { batch: 131_072, input: 256, width: 256, classes: 16, ..DemoSizes::small(DemoKind::Mlp) };
    let demo = demo_model(DemoKind::Mlp, 40, 1, true, &sizes).unwrap();
    let sgd = OptimizerStep::sgd(0.01, 0.9, 0.0);
    let tg =
        training_graph(&demo.trace.graph, 0, &TrainOptions { optimizer: Some(sgd), ..Default::default() }).unwrap();
    let p = plan(&tg.graph, &Options::new());
    let m = &p.memory.ipus[0];
    assert_eq!(m.live_peak_bytes, PEAK);
    assert_eq!(m.peak_bytes, m.always_live.total() + m.peak.on_chip());
    assert!(!m.fits);
    let j = JSON::parse(&p.to_json()).unwrap();
    let ipu0 = get(&j, "memory.ipus").dyn_into::<Array>().unwrap().get(0);
    assert_eq!(get(&ipu0, "livePeakBytes").as_f64(), Some(PEAK as f64));
    assert_eq!(get(&ipu0, "peakBytes").as_f64(), Some(m.peak_bytes as f64));
}
