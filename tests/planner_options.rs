//! `poptorch.Options` in the planner: every setter validates as PopTorch does (§A.1, §A.13),
//! options freeze, JSON in and out rejects unknown keys by name, and the plan-level checks
//! that depend on the mode.

mod planner_support;

use ipu_playground::compile::options::{MeanReductionStrategy, OutputMode, ReductionType};
use ipu_playground::compile::{plan, ExecutionStrategy, Options, TensorClass, TensorLocationSettings};
use planner_support::*;

#[test]
fn options_setters_validate_every_value() {
    let mut o = Options::new();
    for (r, what) in [
        (o.clone().device_iterations(0).map(|_| ()), "deviceIterations"),
        (o.clone().replication_factor(0).map(|_| ()), "replicationFactor"),
        (o.clone().gradient_accumulation(0).map(|_| ()), "gradientAccumulation"),
    ] {
        let e = r.unwrap_err();
        assert!(e.message.contains(what) && e.message.contains("positive"), "{e}");
    }
    let e = o.accumulation_and_replication_reduction_type(ReductionType::NoReduction).unwrap_err();
    assert!(e.message.contains("must be Mean or Sum"), "{e}");
    let e = o.output_mode(OutputMode::EveryN, None).unwrap_err();
    assert!(e.message.contains("EveryN") && e.message.contains("period"), "{e}");
    o.output_mode(OutputMode::EveryN, Some(4)).unwrap();
    let e = o.set_available_memory_proportion(&[("GPU0", 0.5)]).unwrap_err();
    assert!(e.message.contains("{\"IPU0\": 0.5}") && e.message.contains("'GPU0'"), "{e}");
    let e = o.set_available_memory_proportion(&[("IPU1", 1.5)]).unwrap_err();
    assert!(e.message.contains("(0, 1]"), "{e}");
    o.set_available_memory_proportion(&[("IPU0", 0.3), ("IPU1", 0.9)]).unwrap();
    assert_eq!((o.available_memory_proportion_for(1), o.available_memory_proportion_for(2)), (0.9, 0.6));
    let e = o.num_io_tiles(33).unwrap_err();
    assert!(e.message.contains("even number from 32 to 192"), "{e}");
    o.num_io_tiles(64).unwrap();
    o.set_mean_accumulation_and_replication_reduction_strategy(MeanReductionStrategy::Running).unwrap();
    // A failed setter changes nothing.
    assert_eq!(o.device_iterations, 1);
}

#[test]
fn options_freeze_makes_every_setter_fail() {
    let mut o = Options::new();
    o.device_iterations(4).unwrap();
    o.freeze();
    assert!(o.is_frozen());
    let e = o.device_iterations(8).unwrap_err();
    assert_eq!(e.code, "options_frozen");
    assert!(e.message.contains("frozen") && e.fix.contains("Clone"), "{e}");
    assert!(o.set_execution_strategy(ExecutionStrategy::parse("sharded").unwrap()).is_err());
    assert!(o.set_tensor_location(TensorClass::Weight, TensorLocationSettings::off_chip()).is_err());
    assert!(o.gradient_accumulation(2).is_err());
    assert_eq!(o.device_iterations, 4);
    // A clone of frozen options is frozen too; JSON gives fresh, open options.
    let mut fresh = Options::from_json(&o.to_json()).unwrap();
    fresh.device_iterations(8).unwrap();
}

#[test]
fn options_json_rejects_unknown_keys_naming_them() {
    let e = Options::from_json(r#"{"deviceIteration": 4}"#).unwrap_err();
    assert!(e.message.contains("unknown field `deviceIteration`"), "{e}");
    let e = Options::from_json(r#"{"Training": {"gradientAcumulation": 4}}"#).unwrap_err();
    assert!(e.message.contains("`gradientAcumulation`"), "{e}");
    let e = Options::from_json(r#"{"TensorLocations": {"weight": {"onChip": true}}}"#).unwrap_err();
    assert!(e.message.contains("`onChip`"), "{e}");
    let e = Options::from_json(r#"{"executionStrategy": {"type": "pipelined", "stagez": []}}"#).unwrap_err();
    assert!(e.message.contains("stagez"), "{e}");
    let e = Options::from_json(r#"{"ipuGeneration": "mk3"}"#).unwrap_err();
    assert!(e.message.contains("mk3"), "{e}");
    let e = Options::from_json("[1, 2]").unwrap_err();
    assert_eq!(e.code, "options_json");
}

#[test]
fn options_errors_carry_the_key_of_the_option_they_are_about() {
    // A key that does not parse is found by reading each key alone over the defaults; a
    // group's key is narrowed to the key inside it.
    for (json, key) in [
        (r#"{"deviceIteration": 4}"#, "deviceIteration"),
        (r#"{"replicationFactor": 2, "Training": {"gradientAcumulation": 4}}"#, "Training.gradientAcumulation"),
        (r#"{"Training": {"gradientAccumulation": "4"}}"#, "Training.gradientAccumulation"),
        (r#"{"deviceIterations": 2, "ipuGeneration": "mk3"}"#, "ipuGeneration"),
        (r#"{"executionStrategy": {"type": "pipelined", "autoStage": "sometimes"}}"#, "executionStrategy.autoStage"),
        (r#"{"TensorLocations": {"weight": [false]}}"#, "TensorLocations.weight"),
        (r#"{"deviceIterations": 0}"#, "deviceIterations"),
        (r#"{"Training": {"gradientAccumulation": 0}}"#, "Training.gradientAccumulation"),
        (
            r#"{"replicationFactor": 4, "inputReplicaGrouping": {"size": 3, "type": "consecutive"}}"#,
            "inputReplicaGrouping",
        ),
    ] {
        let e = Options::from_json(json).unwrap_err();
        assert_eq!(e.option.as_deref(), Some(key), "{json}: {e}");
    }
    // Not about one option: a document that is not an object.
    assert_eq!(Options::from_json("[1, 2]").unwrap_err().option, None);
    // Setters name their option too, and the thrown error keeps it with the code and the fix.
    let e = Options::new().gradient_accumulation(0).unwrap_err();
    assert_eq!(e.option.as_deref(), Some("Training.gradientAccumulation"));
    let e = ipu_playground::Error::from(e);
    assert_eq!(
        (e.kind(), e.code(), e.option(), e.fix()),
        (
            ipu_playground::ErrorKind::Plan,
            Some("options_not_positive"),
            Some("Training.gradientAccumulation"),
            Some("Set Training.gradientAccumulation to 1 or more.")
        )
    );
    assert!(e.message().starts_with("Training.gradientAccumulation must be a positive whole number, got 0. Set"));
}

#[test]
fn options_json_groups_given_as_lists_by_position_are_rejected_naming_the_key() {
    // Serde reads a struct from an array item by item: `"Training": [4]` would silently be
    // a gradient accumulation of 4. Every nested group must be an object, like the top level.
    for (json, key) in [
        (r#"{"Training": [4]}"#, "`Training`"),
        (r#"{"Training": [4, "mean", "post", false]}"#, "`Training`"),
        (r#"{"TensorLocations": [null, {"useOnChipStorage": false}]}"#, "`TensorLocations`"),
        (r#"{"TensorLocations": {"weight": [false]}}"#, "`TensorLocations.weight`"),
        (r#"{"TensorLocations": {"accumulator": [true, true]}}"#, "`TensorLocations.accumulator`"),
        (r#"{"inputReplicaGrouping": [1, "consecutive"]}"#, "`inputReplicaGrouping`"),
        (r#"{"executionStrategy": ["pipelined"]}"#, "`executionStrategy`"),
        (r#"{"availableMemoryProportion": [0.5]}"#, "`availableMemoryProportion`"),
    ] {
        let e = Options::from_json(json).unwrap_err();
        assert_eq!(e.code, "options_json", "{json}");
        assert!(e.message.contains(key) && e.message.contains("must be an object"), "{json}: {e}");
    }
    // The same options as objects parse; a null tensor location is the strategy's default.
    let o = Options::from_json(r#"{"Training": {"gradientAccumulation": 4}, "TensorLocations": {"weight": null}}"#)
        .unwrap();
    assert_eq!(o.training.gradient_accumulation, 4);
    // Through the planner's lenient entry, the plan carries the error.
    let (o, problems) = Options::from_json_lenient(r#"{"Training": [4]}"#);
    assert_eq!((o.training.gradient_accumulation, problems[0].code), (1, "options_json"));
}

#[test]
fn options_json_values_are_validated_like_the_setters() {
    for (json, code) in [
        (r#"{"deviceIterations": 0}"#, "options_not_positive"),
        (r#"{"Training": {"accumulationAndReplicationReductionType": "noReduction"}}"#, "reduction_type_no_reduction"),
        (r#"{"outputMode": "everyN"}"#, "output_mode_every_n_period"),
        (r#"{"availableMemoryProportion": {"IPU": 0.5}}"#, "available_memory_proportion_key"),
        (r#"{"TensorLocations": {"numIOTiles": 200}}"#, "num_io_tiles"),
        (r#"{"inputReplicaGrouping": {"size": 1, "type": "all"}}"#, "input_replica_grouping_all"),
    ] {
        assert_eq!(Options::from_json(json).unwrap_err().code, code, "{json}");
    }
    let e = Options::from_json(r#"{"deviceIterations": -1}"#).unwrap_err();
    assert!(e.message.contains("-1"), "{e}");
    let e = Options::from_json(r#"{"deviceIterations": 2.5}"#).unwrap_err();
    assert!(e.message.contains("2.5"), "{e}");
}

#[test]
fn options_json_round_trips_with_poptorchs_names() {
    let json = r#"{
        "deviceIterations": 4, "replicationFactor": 2, "autoRoundNumIPUs": true,
        "inputReplicaGrouping": {"size": 2, "type": "orthogonal"},
        "executionStrategy": {"type": "serialPhased", "phases": [["a"], {"stages": [{"blocks": ["b"], "ipu": 0}]}],
                              "tensorsLiveness": "offChipAfterEachPhase", "separateBackwardPhase": true},
        "availableMemoryProportion": {"IPU0": 0.5},
        "outputMode": "everyN", "outputReturnPeriod": 2, "randomSeed": 42, "ipuGeneration": "bow",
        "autoRecomputation": "none",
        "Training": {"gradientAccumulation": 8, "accumulationAndReplicationReductionType": "sum",
                     "meanAccumulationAndReplicationReductionStrategy": "running", "automaticLossScaling": true},
        "TensorLocations": {"numIOTiles": 32, "weight": {"useOnChipStorage": false, "minElementsForOffChip": 1024}}
    }"#;
    let o = Options::from_json(json).unwrap();
    assert_eq!(o.training.gradient_accumulation, 8);
    assert_eq!(o.execution_strategy.name(), "serial_phased");
    assert!(o.off_chip(TensorClass::Weight, 4096) && !o.off_chip(TensorClass::Weight, 100));
    let back: serde_json::Value = serde_json::from_str(&o.to_json()).unwrap();
    let want: serde_json::Value = serde_json::from_str(json).unwrap();
    for key in
        ["deviceIterations", "autoRoundNumIPUs", "inputReplicaGrouping", "outputMode", "ipuGeneration", "Training"]
    {
        assert_eq!(back[key], want[key], "{key}");
    }
    assert_eq!(Options::from_json(&o.to_json()).unwrap(), o);
}

#[test]
fn options_phased_strategies_default_every_tensor_class_to_streaming_memory() {
    let mut o = Options::new();
    for class in [TensorClass::Activation, TensorClass::Weight, TensorClass::Optimizer, TensorClass::Accumulator] {
        assert_eq!(o.location(class).use_on_chip_storage, Some(true));
    }
    o.set_execution_strategy(ExecutionStrategy::parse("parallel-phased").unwrap()).unwrap();
    for class in [TensorClass::Activation, TensorClass::Weight, TensorClass::Optimizer, TensorClass::Accumulator] {
        assert_eq!(o.location(class).use_on_chip_storage, Some(false));
    }
    o.set_tensor_location(TensorClass::Weight, TensorLocationSettings::on_chip()).unwrap();
    assert_eq!(o.location(TensorClass::Weight).use_on_chip_storage, Some(true));
}

#[test]
fn options_gradient_accumulation_on_an_inference_model_is_rejected() {
    let g = on_ipus(&[0], false);
    let p = plan_opts(&g, |o| {
        o.gradient_accumulation(4).unwrap();
    });
    let e = error(&p, "inference_gradient_accumulation");
    assert!(e.message.contains("gradientAccumulation is 4") && e.message.contains("inference"), "{e}");
    assert!(e.message.contains("deviceIterations"), "pipelined adds the deviceIterations hint: {e}");
    assert!(e.fix.contains("gradientAccumulation to 1"));
    // Training options on an inference model: a warning.
    let p = plan_opts(&g, |o| {
        o.set_automatic_loss_scaling(true).unwrap();
    });
    assert!(p.valid && warning_codes(&p).contains(&"inference_training_options"));
    // Invalid options reach the plan's errors too.
    let mut bad = Options::new();
    bad.device_iterations = 0;
    let p = plan(&g, &bad);
    assert!(!p.valid && error_codes(&p).contains(&"options_not_positive"));
}

#[test]
fn options_every_combination_plans_without_panicking() {
    use ipu_playground::compile::{PhaseSpec, PhasedExecution, StageSpec};
    let layouts: [&[usize]; 5] = [&[0], &[0, 1], &[0, 1, 0], &[0, 2], &[1, 1]];
    let mut plans = 0;
    for ipus in layouts {
        for training in [false, true] {
            let g = on_ipus(ipus, training);
            let phases: Vec<PhaseSpec> = (0..ipus.len())
                .map(|k| PhaseSpec::stages(vec![StageSpec::new(&[&format!("b{k}")]).ipu(ipus[k])]))
                .collect();
            let strategies = [
                ExecutionStrategy::parse("pipelined").unwrap(),
                ExecutionStrategy::parse("sharded").unwrap(),
                ExecutionStrategy::SerialPhased(PhasedExecution::new(phases.clone())),
                ExecutionStrategy::ParallelPhased(PhasedExecution::new(phases)),
            ];
            for strategy in strategies {
                for (replicas, accumulation, iterations) in [(1, 1, 1), (2, 3, 4), (3, 8, 2)] {
                    let mut o = Options::new();
                    o.set_execution_strategy(strategy.clone()).unwrap();
                    o.replication_factor(replicas).unwrap().device_iterations(iterations).unwrap();
                    o.gradient_accumulation(accumulation).unwrap();
                    let p = plan(&g, &o);
                    assert_eq!(p.placement.ipu.len(), p.num_nodes);
                    assert_eq!(p.valid, p.errors.iter().all(|e| e.code == "out_of_memory"));
                    assert!(!p.fits || p.valid);
                    assert!(p.time.step_time_s > 0.0 && p.time.step_time_s.is_finite());
                    assert!(p.summary().lines().last().unwrap().starts_with("PLAN "));
                    serde_json::from_str::<serde_json::Value>(&p.to_json()).unwrap();
                    plans += 1;
                }
            }
        }
    }
    assert_eq!(plans, 5 * 2 * 4 * 3);
}
