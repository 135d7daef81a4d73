//! The planner's command line (`examples/plan.rs`), as issue #9 describes it: the flags, the
//! last line starting with `PLAN`, the exit status (1 for a configuration PopTorch rejects,
//! with its cause), `--auto-round`, `--json` and `--check-executor`. `cargo test
//! --all-targets` builds the example; run alone, this test builds it first.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The example's binary, next to this test's (`target/<profile>/examples/plan`).
fn binary() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test's path");
        let profile_dir = exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>/deps/…");
        let bin = profile_dir.join("examples").join(format!("plan{}", std::env::consts::EXE_SUFFIX));
        if !bin.exists() {
            let release = profile_dir.ends_with("release");
            let mut cargo = Command::new(env!("CARGO"));
            cargo.args(["build", "--example", "plan"]).current_dir(env!("CARGO_MANIFEST_DIR"));
            if release {
                cargo.arg("--release");
            }
            let status = cargo.status().expect("running cargo build --example plan");
            assert!(status.success(), "cargo build --example plan failed");
        }
        bin
    })
}

/// Runs the example: (exit status, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(binary()).args(args).output().expect("running the plan example");
    (
        out.status.code().expect("an exit status"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The last line, which must be the PLAN line, as `key=value` pairs.
fn plan_line(stdout: &str) -> Vec<(String, String)> {
    let last = stdout.lines().last().expect("some output");
    let rest = last.strip_prefix("PLAN ").unwrap_or_else(|| panic!("the last line is not the PLAN line: {last}"));
    rest.split(' ')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("not key=value: {kv}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn field<'a>(line: &'a [(String, String)], key: &str) -> &'a str {
    &line.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("no {key} in {line:?}")).1
}

#[test]
fn pipelined_example_prints_the_plan_line_with_2f_minus_1_stages_when_training() {
    let (code, out, err) = run(&[
        "--model",
        "mlp",
        "--layers",
        "4",
        "--ipus",
        "2",
        "--strategy",
        "pipelined",
        "--train",
        "--accumulation",
        "4",
        "--small",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let line = plan_line(&out);
    let keys: Vec<&str> = line.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys[..7],
        ["ipus_used", "ipus_reserved", "stages", "fits", "peak_bytes_max_ipu", "step_time_s", "throughput"]
    );
    assert_eq!((field(&line, "ipus_used"), field(&line, "ipus_reserved")), ("2", "2"));
    assert_eq!(field(&line, "stages"), "3", "2F - 1 with F = 2");
    assert_eq!(field(&line, "fits"), "true");
    assert!(field(&line, "peak_bytes_max_ipu").parse::<u64>().unwrap() > 0);
    assert!(field(&line, "step_time_s").parse::<f64>().unwrap() > 0.0);
    assert!(field(&line, "throughput").parse::<f64>().unwrap() > 0.0);
    // Inference: F stages.
    let (code, out, _) =
        run(&["--model", "mlp", "--layers", "4", "--ipus", "2", "--device-iterations", "2", "--small"]);
    assert_eq!(code, 0);
    assert_eq!(field(&plan_line(&out), "stages"), "2");
}

#[test]
fn pipelined_example_accumulation_below_the_stages_exits_1_with_poptorchs_cause() {
    let (code, out, _) =
        run(&["--model", "transformer", "--layers", "2", "--ipus", "2", "--train", "--accumulation", "2", "--small"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "Training.gradientAccumulation (2) must be greater than or equal to the number of pipeline stages (3)"
        ),
        "{out}"
    );
    assert_eq!(field(&plan_line(&out), "fits"), "false");
}

#[test]
fn ipu_count_example_three_ipus_reserve_four_an_error_unless_auto_round() {
    let args = ["--model", "revgnn", "--layers", "3", "--ipus", "3", "--device-iterations", "3", "--small"];
    let (code, out, _) = run(&args);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("error [ipu_count_not_power_of_two]"), "{out}");
    let line = plan_line(&out);
    assert_eq!((field(&line, "ipus_used"), field(&line, "ipus_reserved")), ("3", "4"));
    let (code, out, _) = run(&[&args[..], &["--auto-round"]].concat());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("warning [ipu_count_rounded]"), "{out}");
    assert_eq!(field(&plan_line(&out), "ipus_reserved"), "4");
}

#[test]
fn memory_example_check_executor_prints_predicted_and_measured_peaks() {
    let (code, out, err) =
        run(&["--model", "revgnn", "--layers", "7", "--ipus", "1", "--train", "--small", "--check-executor"]);
    assert_eq!(code, 0, "{out}{err}");
    let check = out.lines().find(|l| l.starts_with("executor check: predicted")).expect("the executor check line");
    let num = |key: &str| -> u64 {
        let at = check.find(key).unwrap_or_else(|| panic!("{key} in {check}")) + key.len();
        check[at..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    };
    let (predicted, measured) = (num("bytes "), num("measured "));
    assert!(measured > 0);
    assert_eq!(predicted, measured, "{check}");
    assert!(check.ends_with("ratio 1.0000"), "{check}");
    // More than one IPU cannot be checked on the CPU executor.
    let (code, _, err) = run(&["--model", "mlp", "--layers", "2", "--ipus", "2", "--small", "--check-executor"]);
    assert_eq!(code, 2);
    assert!(err.contains("--check-executor runs the CPU executor on one IPU"), "{err}");
}

#[test]
fn options_example_writes_the_plan_json_and_names_bad_flags() {
    let path = std::env::temp_dir().join(format!("planner_example_{}.json", std::process::id()));
    let file = path.to_str().unwrap();
    let (code, out, _) = run(&[
        "--model",
        "mlp",
        "--layers",
        "2",
        "--ipus",
        "2",
        "--replicas",
        "2",
        "--strategy",
        "sharded",
        "--small",
        "--json",
        file,
    ]);
    assert_eq!(code, 0, "{out}");
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).ok();
    let line = plan_line(&out);
    assert_eq!(j["strategy"], "sharded");
    assert_eq!(j["ipusUsed"].as_u64().unwrap().to_string(), field(&line, "ipus_used"));
    assert_eq!(j["ipusUsed"], 4, "2 IPUs × 2 replicas");
    let peak = j["memory"]["ipus"].as_array().unwrap().iter().map(|m| m["peakBytes"].as_u64().unwrap()).max();
    assert_eq!(peak.unwrap().to_string(), field(&line, "peak_bytes_max_ipu"));
    let (code, _, err) = run(&["--strategy", "diagonal"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown execution strategy 'diagonal'"), "{err}");
    let (code, _, err) = run(&["--layers", "four"]);
    assert_eq!(code, 2);
    assert!(err.contains("--layers: 'four' is not a whole number"), "{err}");
    let (code, _, err) = run(&["--options", r#"{"Training": [4]}"#]);
    assert_eq!(code, 2);
    assert!(err.contains("`Training` must be an object"), "{err}");
}
