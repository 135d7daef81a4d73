//! Engine micro-benchmarks (`make bench` runs this in release mode):
//!
//! 1. tracing a 112-layer RevGNN-shaped model (target: under 50 ms);
//! 2. executor overhead per node, on a long chain of tiny ops (target: under 2 µs);
//! 3. the matmul kernel on 2,000×80 · 80×80 against a bare ndarray `dot` on the same
//!    shapes, measured in the same run (target: at least 80% of its speed);
//! 4. tracing speed: a chain of 1,000,000 nodes (`h = h + c`, the node limit; target:
//!    under 10 s) and one `Linear` applied 100,000 times, as ops recorded per second
//!    (target: at least 200,000 ops/s).
//!
//! Prints one line per figure, with the target and the ratio; `--json FILE` also writes them.

use ipu_playground::exec::{run, Store};
use ipu_playground::gnn::nn::{RevGnn, RevGnnConfig};
use ipu_playground::ir::Op;
use ipu_playground::kernels;
use ipu_playground::rng::Rng;
use ipu_playground::tensor::{DType, Tensor};
use ipu_playground::trace::check::MAX_NODES;
use ipu_playground::trace::nn::{Linear, Module};
use ipu_playground::trace::{SparseVar, Tracer};
use ndarray::Array2;
use std::rc::Rc;
use std::time::Instant;

/// Median seconds of `f` over `reps` runs (after one warm-up).
fn median(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    t[t.len() / 2]
}

/// Seconds this thread has run on a CPU (Linux's `/proc/thread-self/schedstat`), or `None`
/// where it is not available: on a shared machine the wall time also counts the time spent
/// waiting for a CPU, which this leaves out.
fn cpu_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = s.split_whitespace().next()?.parse().ok()?;
    (ns > 0.0).then_some(ns * 1e-9)
}

/// `" (… s on the CPU: … ops/s)"` for `ops` recorded between two [`cpu_s`] readings.
fn on_cpu(before: Option<f64>, after: Option<f64>, ops: f64) -> String {
    match (before, after) {
        (Some(b), Some(a)) if a > b => format!(" ({:.2} s on the CPU: {:.0} ops/s)", a - b, ops / (a - b)),
        _ => String::new(),
    }
}

fn main() {
    let json = std::env::args().skip_while(|a| a != "--json").nth(1);
    let mut figures = Vec::new();

    // 1. Tracing a 112-layer RevGNN (PubMed shapes, one padded part).
    let model = RevGnn::new(
        RevGnnConfig {
            in_channels: 500,
            hidden: 160,
            out_channels: 3,
            num_layers: 112,
            num_groups: 2,
            dropout: 0.5,
            disable_rev: false,
        },
        &mut Rng::new(0),
    )
    .unwrap();
    let mut nodes = 0;
    let trace_s = median(7, || {
        let tr = Tracer::new();
        tr.set_training(true);
        let x = SparseVar::input(&tr, "x", 1973, 500, 120_000).unwrap();
        let adj = SparseVar::input(&tr, "adj", 1973, 1973, 14_000).unwrap();
        let y = model.forward(&tr, &x, &adj).unwrap();
        let t = tr.finish(&[&y]).unwrap();
        nodes = t.graph.nodes.len();
    });
    println!(
        "trace RevGNN 112 layers: {:.2} ms ({nodes} top-level nodes, 112 invertible regions); target < 50 ms: {}",
        trace_s * 1e3,
        if trace_s < 0.05 { "met" } else { "NOT met" }
    );
    figures.push(("trace_112_layers_ms", trace_s * 1e3));

    // 2. Executor overhead: a chain of 20,000 negations of a scalar.
    let tr = Tracer::new();
    let x = tr.input("x", &[1], DType::Float32).unwrap();
    let mut h = x.clone();
    for _ in 0..20_000 {
        h = h.neg().unwrap();
    }
    let t = tr.finish(&[&h]).unwrap();
    let n = t.graph.nodes.len();
    let mut store = Store::new(&[], &[], 0);
    let input = vec![Rc::new(Tensor::from_f32(&[1], vec![1.0]).unwrap())];
    let exec_s = median(9, || {
        run(&t.graph, &mut store, &input).unwrap();
    });
    // The kernel alone, called directly, for the same number of ops.
    let one = Tensor::from_f32(&[1], vec![1.0]).unwrap();
    let neg = Op::Unary { kind: ipu_playground::ir::UnaryKind::Neg };
    let kernel_s = median(9, || {
        let mut v = one.clone();
        for _ in 0..20_000 {
            v = kernels::eval(&neg, &[&v]).unwrap().pop().unwrap();
        }
    });
    let per_node = (exec_s - kernel_s).max(0.0) / n as f64;
    println!(
        "executor overhead: {:.3} us/node ({n} nodes: {:.2} ms run vs {:.2} ms of bare kernel calls); target < 2 us: {}",
        per_node * 1e6,
        exec_s * 1e3,
        kernel_s * 1e3,
        if per_node < 2e-6 { "met" } else { "NOT met" }
    );
    figures.push(("executor_overhead_us_per_node", per_node * 1e6));

    // 3. Matmul 2000x80 @ 80x80: our kernel vs ndarray's dot.
    let mut rng = Rng::new(1);
    let a: Vec<f32> = (0..2000 * 80).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
    let b: Vec<f32> = (0..80 * 80).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
    let ta = Tensor::from_f32(&[2000, 80], a.clone()).unwrap();
    let tb = Tensor::from_f32(&[80, 80], b.clone()).unwrap();
    let na = Array2::from_shape_vec((2000, 80), a).unwrap();
    let nb = Array2::from_shape_vec((80, 80), b).unwrap();
    let ours = median(101, || {
        std::hint::black_box(kernels::eval(&Op::MatMul, &[&ta, &tb]).unwrap());
    });
    let bare = median(101, || {
        std::hint::black_box(na.dot(&nb));
    });
    let ratio = bare / ours;
    println!(
        "matmul 2000x80 @ 80x80: {:.1} us ours vs {:.1} us ndarray dot = {:.0}% of its speed ({:.1} GFLOP/s); target >= 80%: {}",
        ours * 1e6,
        bare * 1e6,
        ratio * 100.0,
        2.0 * 2000.0 * 80.0 * 80.0 / ours / 1e9,
        if ratio >= 0.8 { "met" } else { "NOT met" }
    );
    figures.push(("matmul_us", ours * 1e6));
    figures.push(("matmul_ndarray_us", bare * 1e6));
    figures.push(("matmul_ratio", ratio));

    // 4. Tracing speed. A chain that reaches the node limit: the input, one constant and
    // `h = h + c` for every other node.
    let (s, cpu0) = (Instant::now(), cpu_s());
    let tr = Tracer::new();
    let mut h = tr.input("x", &[16], DType::Float32).unwrap();
    let c = tr.full(&[], DType::Float32, 1.0).unwrap();
    for _ in 0..MAX_NODES - 2 {
        h = h.add(&c).unwrap();
    }
    let t = tr.finish(&[&h]).unwrap();
    let chain_s = s.elapsed().as_secs_f64();
    let chain_cpu = on_cpu(cpu0, cpu_s(), t.graph.nodes.len() as f64);
    let chain_nodes = t.graph.nodes.len();
    drop(t);
    println!(
        "trace a {chain_nodes}-node chain (the node limit): {chain_s:.2} s = {:.0} ops/s{chain_cpu}; target < 10 s: {}",
        chain_nodes as f64 / chain_s,
        if chain_s < 10.0 { "met" } else { "NOT met" }
    );
    figures.push(("trace_1m_nodes_s", chain_s));
    // One Linear(16, 16) applied 100,000 times in its module scope (each call reads its
    // weight and bias and records one `linear`).
    let lin = Linear::new(16, 16, true, &mut Rng::new(2)).unwrap();
    let calls = 100_000;
    let mut lin_nodes = 0;
    let mut lin_cpu = String::new();
    let lin_s = median(3, || {
        let cpu0 = cpu_s();
        let tr = Tracer::new();
        let mut h = tr.input("x", &[4, 16], DType::Float32).unwrap();
        for _ in 0..calls {
            h = tr.scope("fc", || lin.forward(&tr, &h)).unwrap();
        }
        let t = tr.finish(&[&h]).unwrap();
        lin_cpu = on_cpu(cpu0, cpu_s(), calls as f64);
        lin_nodes = t.graph.nodes.len();
    });
    let ops_per_s = calls as f64 / lin_s;
    println!(
        "trace Linear x {calls}: {:.0} ms ({lin_nodes} nodes) = {ops_per_s:.0} ops/s{lin_cpu}; tracing ops/s (native): {:.0} \
         (chain) and {ops_per_s:.0} (Linear); target >= 200000: {}",
        lin_s * 1e3,
        chain_nodes as f64 / chain_s,
        if ops_per_s.min(chain_nodes as f64 / chain_s) >= 200_000.0 { "met" } else { "NOT met" }
    );
    figures.push(("trace_chain_ops_per_s", chain_nodes as f64 / chain_s));
    figures.push(("trace_linear_ops_per_s", ops_per_s));

    if let Some(path) = json {
        let body: Vec<String> = figures.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        std::fs::write(&path, format!("{{{}}}", body.join(","))).expect("write the json");
    }
}
