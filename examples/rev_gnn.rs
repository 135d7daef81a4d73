//! Trains RevGNN on a Planetoid graph with the protocol of PyG's `examples/rev_gnn.py`.
//!
//! ```text
//! cargo run --release --example rev_gnn -- --dataset PubMed --epochs 200
//! ```
//!
//! Options: --dataset NAME, --data-dir DIR (default: data/, then ../shared/data/planetoid/raw),
//! --epochs N, --layers N, --hidden N, --groups N, --parts N, --dropout P, --lr X,
//! --weight-decay X, --optimizer adam|adamw|sgd, --seed N, --no-rev, --half (float16 weights
//! and activations), --eval-every N, --json FILE (also write the summary as JSON).

use ipu_playground::gnn::data::{planetoid, PlanetoidOptions, Source};
use ipu_playground::gnn::train::{OptimizerKind, TrainConfig, Trainer};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

struct Args {
    dataset: String,
    data_dir: Option<PathBuf>,
    eval_every: usize,
    json: Option<PathBuf>,
    cfg: TrainConfig,
}

fn parse() -> Result<Args, String> {
    let mut a =
        Args { dataset: "PubMed".into(), data_dir: None, eval_every: 1, json: None, cfg: TrainConfig::default() };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        fn num<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String> {
            v.parse().map_err(|_| format!("{flag}: '{v}' is not a valid number"))
        }
        match flag.as_str() {
            "--dataset" => a.dataset = val(&flag)?,
            "--data-dir" => a.data_dir = Some(val(&flag)?.into()),
            "--epochs" => a.cfg.epochs = num(&flag, val(&flag)?)?,
            "--layers" => a.cfg.layers = num(&flag, val(&flag)?)?,
            "--hidden" => a.cfg.hidden = num(&flag, val(&flag)?)?,
            "--groups" => a.cfg.groups = num(&flag, val(&flag)?)?,
            "--parts" => a.cfg.parts = num(&flag, val(&flag)?)?,
            "--dropout" => a.cfg.dropout = num(&flag, val(&flag)?)?,
            "--lr" => a.cfg.lr = num(&flag, val(&flag)?)?,
            "--weight-decay" => a.cfg.weight_decay = num(&flag, val(&flag)?)?,
            "--optimizer" => a.cfg.optimizer = OptimizerKind::parse(&val(&flag)?).map_err(|e| e.to_string())?,
            "--seed" => a.cfg.seed = num(&flag, val(&flag)?)?,
            "--eval-every" => a.eval_every = num(&flag, val(&flag)?)?,
            "--json" => a.json = Some(val(&flag)?.into()),
            "--no-rev" => a.cfg.no_rev = true,
            "--half" => a.cfg.half = true,
            "--profile" => ipu_playground::exec::set_profiling(true),
            "-h" | "--help" => {
                println!("{}", include_str!("rev_gnn.rs").lines().take(13).collect::<Vec<_>>().join("\n"));
                std::process::exit(0);
            }
            other => return Err(format!("unknown option '{other}' (see --help)")),
        }
    }
    Ok(a)
}

fn data_dir(given: &Option<PathBuf>) -> PathBuf {
    if let Some(d) = given {
        return d.clone();
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let staged = root.join("data");
    if staged.is_dir() {
        return staged;
    }
    root.join("../shared/data/planetoid/raw")
}

/// Peak resident set size of this process, in MiB (Linux).
fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() -> ExitCode {
    match real_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rev_gnn: {e}");
            ExitCode::FAILURE
        }
    }
}

fn real_main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse()?;
    let dir = data_dir(&args.data_dir);
    let t0 = Instant::now();
    // The protocol of PyG's example: split "full", AddSelfLoops.
    let data = planetoid(&args.dataset, Source::Dir(&dir), &PlanetoidOptions::rev_gnn())?;
    let (tr, va, te) = data.split_sizes();
    println!(
        "{}: nodes={} edges(with self-loops)={} features={} classes={} train/val/test={tr}/{va}/{te} ({:.2}s to load)",
        data.name,
        data.num_nodes,
        data.num_edges(),
        data.num_features,
        data.num_classes,
        t0.elapsed().as_secs_f64()
    );
    let cfg = args.cfg.clone();
    let t1 = Instant::now();
    let mut trainer = Trainer::new(data, cfg.clone())?;
    println!(
        "RevGNN layers={} hidden={} groups={} parts={} rev={} half={} optimizer={:?} lr={} params={} \
         ({} training nodes/graph, {:.2}s to trace and differentiate)",
        cfg.layers,
        cfg.hidden,
        cfg.groups,
        cfg.parts,
        !cfg.no_rev,
        cfg.half,
        cfg.optimizer,
        cfg.lr,
        trainer.num_params(),
        trainer.train_graph().nodes.len(),
        t1.elapsed().as_secs_f64()
    );
    // The dense products' work by op (the planner's count, per step), for --profile's rate.
    let dense = ipu_playground::compile::time::dense_flops(trainer.train_graph());
    let mut times = Vec::new();
    let mut best = (f64::NEG_INFINITY, 0.0, 0usize);
    let mut last = Default::default();
    let mut saved = 0u64;
    let mut peak = 0u64;
    for epoch in 1..=cfg.epochs {
        let t = Instant::now();
        let s = trainer.train_epoch()?;
        let secs = t.elapsed().as_secs_f64();
        if !s.op_time.is_empty() {
            let mut ops: Vec<_> = s.op_time.iter().collect();
            ops.sort_by(|a, b| b.1 .1.partial_cmp(&a.1 .1).unwrap());
            for (name, (n, t)) in ops.iter().take(14) {
                println!("  {name:20} {n:7} calls {t:8.3}s  {:6.1} us/call", t / *n as f64 * 1e6);
            }
            let secs: f64 = dense.keys().filter_map(|k| s.op_time.get(k)).map(|(_, t)| t).sum();
            let total: f64 = dense.values().sum::<f64>() * s.steps as f64;
            println!(
                "  dense products ({}): {:.2} GFLOP in {secs:.3}s, {:.1} GFLOP/s",
                dense.keys().copied().collect::<Vec<_>>().join(", "),
                total / 1e9,
                total / secs / 1e9
            );
        }
        times.push(secs);
        saved = saved.max(s.saved_for_backward);
        peak = peak.max(s.peak_bytes);
        if epoch == cfg.epochs || (args.eval_every > 0 && epoch % args.eval_every == 0) {
            let acc = trainer.evaluate()?;
            if acc.val > best.0 {
                best = (acc.val, acc.test, epoch);
            }
            last = acc;
            println!(
                "epoch {epoch:4} loss {:.4} train {:.4} val {:.4} test {:.4} time {secs:.3}s",
                s.loss, acc.train, acc.val, acc.test
            );
        } else {
            println!("epoch {epoch:4} loss {:.4} time {secs:.3}s", s.loss);
        }
    }
    let mut sorted = times.clone();
    if sorted.len() > 1 {
        sorted.remove(0); // the first epoch warms caches, as the PyG script skips it
    }
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = sorted[sorted.len() / 2];
    let rss = peak_rss_mib().map(|m| format!("{m:.0} MiB")).unwrap_or_else(|| "n/a".into());
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "SUMMARY {} layers={} rev={}: final test {:.4} (val {:.4}), best val {:.4} @ epoch {} test {:.4}, \
         median epoch {median:.3}s, saved for backward {:.1} MiB, peak activations {:.1} MiB, peak RSS {rss}",
        args.dataset,
        cfg.layers,
        !cfg.no_rev,
        last.test,
        last.val,
        best.0,
        best.2,
        best.1,
        mib(saved),
        mib(peak)
    );
    if let Some(path) = args.json {
        let j = format!(
            "{{\"framework\":\"ipu-playground\",\"dataset\":\"{}\",\"layers\":{},\"rev\":{},\"epochs\":{},\
             \"final_test_acc\":{},\"final_val_acc\":{},\"best_val\":{},\"best_val_test\":{},\"epoch_median_s\":{},\
             \"saved_for_backward_bytes\":{},\"peak_activation_bytes\":{},\"peak_rss_mb\":{}}}",
            args.dataset,
            cfg.layers,
            !cfg.no_rev,
            cfg.epochs,
            last.test,
            last.val,
            best.0,
            best.1,
            median,
            saved,
            peak,
            peak_rss_mib().unwrap_or(f64::NAN)
        );
        std::fs::write(&path, j).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
