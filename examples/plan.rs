//! Plans a demo model on IPUs and prints the plan; the last line starts with `PLAN`.
//!
//! ```sh
//! cargo run --release --example plan -- --model mlp|transformer|revgnn --layers N --ipus N \
//!     --strategy pipelined|sharded|serial-phased|parallel-phased [--train] [--replicas N] \
//!     [--accumulation N] [--device-iterations N] [--auto-round] [--generation mk1|mk2|bow] \
//!     [--options JSON] [--small] [--json FILE] [--check-executor] [--repeat N] [--timings FILE] \
//!     [--batch N] [--width N] [--seq N] [--heads N] [--ff N] [--vocab N]
//! ```
//!
//! The model's layers are split evenly over `--ipus` IPUs, one Block per IPU (`ipu0`,
//! `ipu1`, …). Pipelined and sharded plans take the blocks' IPUs (AutoStage.SameAsIpu);
//! `serial-phased` runs one phase per block, all on IPU 0 (one IPU group, weights streamed
//! in per phase); `parallel-phased` runs phase k on IPU k (even phases on even IPUs).
//! `--options` takes poptorch.Options as JSON (applied first; the flags override).
//! An invalid plan (PopTorch would reject it) exits with status 1 after printing the
//! cause; a valid plan that does not fit exits 0 with `fits=false`.
//! `--check-executor` (one IPU) also runs the planned program on the CPU executor and
//! prints the predicted and measured peaks of live activation bytes and their ratio.
//! `--small` uses the small sizes of the tests. `--repeat N` traces, differentiates and
//! plans N times and prints the median times; `--timings FILE` writes them as JSON (the
//! benchmark, `scripts/bench.sh`). `--batch`, `--width`, `--seq`, `--heads`, `--ff` and
//! `--vocab` override the model's sizes (`DemoSizes`), e.g. a BERT-Large-like transformer:
//! `--model transformer --layers 24 --width 1024 --heads 16 --seq 128`.

use ipu_playground::autograd::{training_graph, TrainOptions};
use ipu_playground::compile::{
    plan_with, ExecutionStrategy, IpuGeneration, Options, PhaseSpec, PhasedExecution, PlanSettings, StageSpec,
};
use ipu_playground::exec::{run, Store};
use ipu_playground::ir::OptimizerStep;
use ipu_playground::models::{demo_inputs, DemoKind, DemoNet, DemoSizes};
use std::process::ExitCode;

struct Args {
    model: DemoKind,
    layers: usize,
    ipus: usize,
    strategy: String,
    train: bool,
    replicas: Option<usize>,
    accumulation: Option<usize>,
    device_iterations: Option<usize>,
    auto_round: bool,
    generation: Option<IpuGeneration>,
    options: Option<String>,
    small: bool,
    json: Option<String>,
    check_executor: bool,
    repeat: usize,
    timings: Option<String>,
    /// Size overrides: (name, value).
    sizes: Vec<(String, usize)>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        model: DemoKind::Mlp,
        layers: 4,
        ipus: 1,
        strategy: "pipelined".into(),
        train: false,
        replicas: None,
        accumulation: None,
        device_iterations: None,
        auto_round: false,
        generation: None,
        options: None,
        small: false,
        json: None,
        check_executor: false,
        repeat: 1,
        timings: None,
        sizes: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    let num = |v: Option<String>, flag: &str| -> Result<usize, String> {
        let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
        v.parse().map_err(|_| format!("{flag}: '{v}' is not a whole number"))
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--model" => {
                a.model = DemoKind::parse(&it.next().ok_or("--model needs a value")?).map_err(|e| e.to_string())?
            }
            "--layers" => a.layers = num(it.next(), "--layers")?,
            "--ipus" => a.ipus = num(it.next(), "--ipus")?,
            "--strategy" => a.strategy = it.next().ok_or("--strategy needs a value")?,
            "--train" => a.train = true,
            "--replicas" => a.replicas = Some(num(it.next(), "--replicas")?),
            "--accumulation" => a.accumulation = Some(num(it.next(), "--accumulation")?),
            "--device-iterations" => a.device_iterations = Some(num(it.next(), "--device-iterations")?),
            "--auto-round" => a.auto_round = true,
            "--generation" => {
                let g = it.next().ok_or("--generation needs a value")?;
                a.generation = Some(
                    serde_json::from_value(serde_json::Value::String(g.to_lowercase()))
                        .map_err(|_| format!("unknown generation '{g}': use mk1, mk2 or bow"))?,
                );
            }
            "--options" => a.options = Some(it.next().ok_or("--options needs a JSON object")?),
            "--small" => a.small = true,
            "--json" => a.json = Some(it.next().ok_or("--json needs a file name")?),
            "--check-executor" => a.check_executor = true,
            "--repeat" => a.repeat = num(it.next(), "--repeat")?,
            "--timings" => a.timings = Some(it.next().ok_or("--timings needs a file name")?),
            "--batch" | "--width" | "--seq" | "--heads" | "--ff" | "--vocab" => {
                let v = num(it.next(), &flag)?;
                a.sizes.push((flag[2..].to_string(), v));
            }
            "-h" | "--help" => {
                return Err("usage: plan --model mlp|transformer|revgnn --layers N --ipus N --strategy \
                            pipelined|sharded|serial-phased|parallel-phased [--train] [--replicas N] \
                            [--accumulation N] [--device-iterations N] [--auto-round] [--generation mk1|mk2|bow] \
                            [--options JSON] [--small] [--json FILE] [--check-executor] [--repeat N] \
                            [--timings FILE] [--batch N] [--width N] [--seq N] [--heads N] [--ff N] [--vocab N]"
                    .into())
            }
            other => return Err(format!("unknown flag '{other}' (--help lists them)")),
        }
    }
    Ok(a)
}

fn options(a: &Args) -> Result<Options, String> {
    let mut o = match &a.options {
        Some(j) => Options::from_json(j).map_err(|e| e.to_string())?,
        None => Options::new(),
    };
    let strategy = match ExecutionStrategy::parse(&a.strategy).map_err(|e| e.to_string())? {
        ExecutionStrategy::SerialPhased(_) => ExecutionStrategy::SerialPhased(PhasedExecution::new(
            (0..a.ipus).map(|k| PhaseSpec::stages(vec![StageSpec::new(&[&format!("ipu{k}")]).ipu(0)])).collect(),
        )),
        ExecutionStrategy::ParallelPhased(_) => ExecutionStrategy::ParallelPhased(PhasedExecution::new(
            (0..a.ipus).map(|k| PhaseSpec::stages(vec![StageSpec::new(&[&format!("ipu{k}")]).ipu(k)])).collect(),
        )),
        s => s,
    };
    let e = |d: ipu_playground::compile::Diagnostic| d.to_string();
    o.set_execution_strategy(strategy).map_err(e)?;
    if let Some(r) = a.replicas {
        o.replication_factor(r).map_err(e)?;
    }
    if let Some(n) = a.accumulation {
        o.gradient_accumulation(n).map_err(e)?;
    }
    if let Some(n) = a.device_iterations {
        o.device_iterations(n).map_err(e)?;
    }
    if a.auto_round {
        o.auto_round_num_ipus(true).map_err(e)?;
    }
    if let Some(g) = a.generation {
        o.ipu_generation(g).map_err(e)?;
    }
    o.freeze();
    Ok(o)
}

fn main() -> ExitCode {
    match main_inner() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("plan: {e}");
            ExitCode::from(2)
        }
    }
}

/// Median of a list of milliseconds.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    v[v.len() / 2]
}

fn main_inner() -> Result<ExitCode, String> {
    let a = parse()?;
    let opts = options(&a)?;
    let mut sizes = if a.small { DemoSizes::small(a.model) } else { DemoSizes::full(a.model) };
    for (name, v) in &a.sizes {
        let field = match name.as_str() {
            "batch" => &mut sizes.batch,
            "width" => &mut sizes.width,
            "seq" => &mut sizes.seq,
            "heads" => &mut sizes.heads,
            "ff" => &mut sizes.ff,
            _ => &mut sizes.vocab,
        };
        *field = *v;
    }
    let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = std::time::Instant::now();
    let net = DemoNet::new(a.model, a.layers, &sizes).map_err(|e| e.to_string())?;
    let parameters_ms = ms(t);
    // Trace, training graph, plan (and the plan's JSON), `--repeat` times.
    let mut times: [Vec<f64>; 4] = Default::default();
    let mut last = None;
    for _ in 0..a.repeat.max(1) {
        let t = std::time::Instant::now();
        let demo = net.trace(a.ipus, a.train).map_err(|e| e.to_string())?;
        times[0].push(ms(t));
        let t = std::time::Instant::now();
        let graph = if a.train {
            let adam = OptimizerStep::adam(1e-3, 0.9, 0.999, 1e-8, 0.0, false);
            training_graph(&demo.trace.graph, 0, &TrainOptions { optimizer: Some(adam), ..Default::default() })
                .map_err(|e| e.to_string())?
                .graph
        } else {
            demo.trace.graph.clone()
        };
        times[1].push(ms(t));
        let t = std::time::Instant::now();
        let plan = plan_with(
            &graph,
            &opts,
            &PlanSettings { micro_batch_size: Some(demo.micro_batch_size), ..PlanSettings::default() },
        );
        times[2].push(ms(t));
        let t = std::time::Instant::now();
        let json = plan.to_json();
        times[3].push(ms(t));
        last = Some((demo, plan, json));
    }
    let (demo, plan, json) = last.expect("at least one run");
    let [trace_ms, graph_ms, plan_ms, json_ms] = times.map(median);
    println!(
        "{:?}, {} layers over {} IPU(s), {} nodes: parameters made in {parameters_ms:.1} ms; {}traced in {trace_ms:.1} ms, \
         {} in {graph_ms:.1} ms, planned in {plan_ms:.1} ms (total {:.1} ms), plan JSON {:.2} MB in {json_ms:.1} ms",
        a.model,
        a.layers,
        a.ipus,
        plan.num_nodes,
        if a.repeat > 1 { format!("median of {}: ", a.repeat) } else { String::new() },
        if a.train { "differentiated (Adam)" } else { "no training graph" },
        trace_ms + graph_ms + plan_ms,
        json.len() as f64 / 1e6,
    );
    if let Some(path) = &a.timings {
        let t = serde_json::json!({
            "model": format!("{:?}", a.model), "layers": a.layers, "ipus": a.ipus, "training": a.train,
            "accumulation": opts.training.gradient_accumulation,
            "nodes": plan.num_nodes, "parameters_ms": parameters_ms, "trace_ms": trace_ms,
            "training_graph_ms": graph_ms, "plan_ms": plan_ms, "json_ms": json_ms,
            "total_ms": trace_ms + graph_ms + plan_ms, "json_bytes": json.len(), "runs": a.repeat.max(1),
        });
        std::fs::write(path, t.to_string()).map_err(|e| format!("writing {path}: {e}"))?;
    }
    if let Some(path) = &a.json {
        std::fs::write(path, &json).map_err(|e| format!("writing {path}: {e}"))?;
        println!("plan JSON written to {path}");
    }
    if a.check_executor {
        if plan.ipus_per_replica != 1 {
            return Err(format!(
                "--check-executor runs the CPU executor on one IPU; this plan uses {}",
                plan.ipus_per_replica
            ));
        }
        let inputs = demo_inputs(&demo, 1).map_err(|e| e.to_string())?;
        let mut store = Store::from_params(&demo.trace.params, &demo.trace.buffers, 0).unwrap();
        let measured = run(&plan.graph, &mut store, &inputs).map_err(|e| e.to_string())?.stats.peak_bytes;
        let predicted = plan.memory.ipus[0].live_peak_bytes;
        println!(
            "executor check: predicted peak of live activation bytes {predicted}, measured {measured}, ratio {:.4}",
            predicted as f64 / measured.max(1) as f64
        );
        let fused = ipu_playground::exec::fuse::fuse(&plan.graph).map_err(|e| e.to_string())?;
        let mut store = Store::from_params(&demo.trace.params, &demo.trace.buffers, 0).unwrap();
        let measured_fused = run(&fused, &mut store, &inputs).map_err(|e| e.to_string())?.stats.peak_bytes;
        println!(
            "executor check (the trainer's fused program, Linear+Add merged): measured {measured_fused}, ratio {:.4}",
            predicted as f64 / measured_fused.max(1) as f64
        );
    }
    println!("{}", plan.summary());
    Ok(if plan.valid { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
