//! The CPU executor: runs a graph node by node on [`crate::kernels`], with IPU-style state.
//!
//! * Parameters and buffers live in a [`Store`] and persist across runs; `BufferUpdate`
//!   writes a buffer in place, `OptimizerUpdate` updates a parameter (optimizer state is
//!   kept in the store under the parameter's name).
//! * `RandomMask` draws from the store's seeded generator, so runs are reproducible.
//! * Every value is freed right after its last use, and the bytes of live activations are
//!   counted after each node: [`RunStats::peak_bytes`] is measured, not estimated. When a
//!   value dies, what counts as an activation and how a node's bytes add up (nested regions,
//!   `Call` and `InvertibleBackward`, add their own peak on top of the caller's) are
//!   [`crate::ir::liveness`]'s rules, the ones the planner predicts with.

pub mod fuse;

use crate::ir::liveness::{Lifetimes, Meter};
use crate::ir::{Graph, InputKind, Op, OptimizerStep, Pass, TensorType};
use crate::kernels::{self, optim};
use crate::rng::Rng;
use crate::tensor::{float16, DType, Param, Tensor};
use crate::{Error, Result};
use std::collections::HashMap;
use std::rc::Rc;

pub use crate::kernels::optim::OptState;

/// Parameters, buffers, optimizer state and the random generator, across runs.
#[derive(Clone, Debug)]
pub struct Store {
    pub params: HashMap<String, Rc<Tensor>>,
    pub buffers: HashMap<String, Rc<Tensor>>,
    pub opt_state: HashMap<String, OptState>,
    pub rng: Rng,
    /// Multiplies every optimizer learning rate (for schedules; 1 by default).
    pub lr_scale: f32,
}

impl Store {
    /// A store holding the given initial parameters and buffers.
    pub fn new(params: &[(String, Rc<Tensor>)], buffers: &[(String, Rc<Tensor>)], seed: u64) -> Store {
        Store {
            params: params.iter().cloned().collect(),
            buffers: buffers.iter().cloned().collect(),
            opt_state: HashMap::new(),
            rng: Rng::new(seed),
            lr_scale: 1.0,
        }
    }

    /// A store holding `params` and `buffers`, each materialised now (see
    /// [`crate::tensor::Param`]).
    pub fn from_params(params: &[(String, Param)], buffers: &[(String, Param)], seed: u64) -> Result<Store> {
        let values = |list: &[(String, Param)]| -> Result<Vec<(String, Rc<Tensor>)>> {
            list.iter().map(|(n, p)| Ok((n.clone(), p.value()?))).collect()
        };
        Ok(Store::new(&values(params)?, &values(buffers)?, seed))
    }

    /// Total bytes of parameters.
    pub fn param_bytes(&self) -> usize {
        self.params.values().map(|t| t.nbytes()).sum()
    }

    /// Total bytes of optimizer state (in each state tensor's storage dtype).
    pub fn opt_state_bytes(&self) -> usize {
        self.opt_state.values().map(OptState::bytes).sum()
    }
}

/// Memory measured during a run (bytes of activations: inputs and computed values;
/// parameters, buffers and constants are counted apart, in the store).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    /// The most bytes live at once, including inside nested regions (64-bit, as every
    /// byte count of `ir::liveness` and the planner).
    pub peak_bytes: u64,
    /// Bytes live after each node of the top-level graph.
    pub live_after: Vec<u64>,
    /// Bytes live when the first backward node starts: what the forward pass keeps for
    /// the backward pass (0 for a graph with no backward).
    pub saved_for_backward: u64,
    /// Nodes run, including those inside regions.
    pub nodes_run: usize,
    /// With [`set_profiling`] on: seconds and calls per op name.
    pub op_time: HashMap<&'static str, (usize, f64)>,
}

thread_local! {
    static PROFILE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Turns per-op timing on or off for this thread (`std::time` natively,
/// `performance.now()` in wasm).
pub fn set_profiling(on: bool) {
    PROFILE.with(|p| p.set(on));
}

/// Seconds from some fixed point, when profiling is on.
#[cfg(not(target_arch = "wasm32"))]
fn now() -> Option<f64> {
    thread_local! {
        static START: std::time::Instant = std::time::Instant::now();
    }
    PROFILE.with(|p| p.get()).then(|| START.with(|s| s.elapsed().as_secs_f64()))
}

/// Seconds from some fixed point, when profiling is on.
#[cfg(target_arch = "wasm32")]
fn now() -> Option<f64> {
    use wasm_bindgen::JsCast;
    if !PROFILE.with(|p| p.get()) {
        return None;
    }
    let perf = js_sys::Reflect::get(&js_sys::global(), &"performance".into()).ok()?;
    let f: js_sys::Function = js_sys::Reflect::get(&perf, &"now".into()).ok()?.dyn_into().ok()?;
    Some(f.call0(&perf).ok()?.as_f64()? / 1e3)
}

fn record_time(stats: &mut RunStats, op: &Op, t0: Option<f64>) {
    if let (Some(t0), Some(t1)) = (t0, now()) {
        let e = stats.op_time.entry(op.name()).or_insert((0, 0.0));
        e.0 += 1;
        e.1 += t1 - t0;
    }
}

/// Outputs of a run and its memory statistics.
#[derive(Debug)]
pub struct RunResult {
    pub outputs: Vec<Rc<Tensor>>,
    pub stats: RunStats,
}

/// Runs `g` with `inputs` (one per `Input` placeholder, in order) against `store`.
pub fn run(g: &Graph, store: &mut Store, inputs: &[Rc<Tensor>]) -> Result<RunResult> {
    let mut stats = RunStats::default();
    let outputs = run_graph(g, store, inputs, &mut stats, true)?;
    Ok(RunResult { outputs, stats })
}

/// Checks that `inputs` fit the graph's input placeholders.
pub fn check_inputs(g: &Graph, inputs: &[Rc<Tensor>]) -> Result<()> {
    let ph = g.placeholders(InputKind::Input);
    if ph.len() != inputs.len() {
        return Err(Error::exec(format!("the graph takes {} inputs but {} were given", ph.len(), inputs.len())));
    }
    for ((name, v), t) in ph.iter().zip(inputs) {
        let want = g.ty(*v);
        let got = TensorType { shape: t.shape().to_vec(), dtype: t.dtype() };
        if *want != got {
            return Err(Error::exec(format!(
                "input '{name}' was traced as {want} but got {got}: shapes are static, trace again for new shapes"
            )));
        }
    }
    Ok(())
}

fn site(g: &Graph, i: usize) -> String {
    let n = &g.nodes[i];
    format!("node {i} ({})", crate::ir::describe_site(&n.op, &n.meta))
}

fn run_graph(
    g: &Graph,
    store: &mut Store,
    inputs: &[Rc<Tensor>],
    stats: &mut RunStats,
    top: bool,
) -> Result<Vec<Rc<Tensor>>> {
    check_inputs(g, inputs)?;
    // When each value dies and whether it counts: the one definition the planner predicts with.
    let life = Lifetimes::of(g);
    let mut vals: Vec<Option<Rc<Tensor>>> = vec![None; g.values.len()];
    let mut meter = Meter::default();
    let mut next_input = 0;
    let mut seen_backward = false;
    for (i, node) in g.nodes.iter().enumerate() {
        if top && !seen_backward && node.meta.pass != Pass::Forward {
            seen_backward = true;
            stats.saved_for_backward = meter.live;
        }
        let mut inner_peak = 0u64;
        let t0 = now();
        let outs: Vec<Rc<Tensor>> = match &node.op {
            Op::Placeholder { kind, name } => {
                vec![match kind {
                    InputKind::Input => {
                        next_input += 1;
                        inputs[next_input - 1].clone()
                    }
                    InputKind::Parameter => store.params.get(name).cloned().ok_or_else(|| {
                        Error::exec(format!("{}: parameter '{name}' is not in the store", site(g, i)))
                    })?,
                    InputKind::Buffer => {
                        store.buffers.get(name).cloned().ok_or_else(|| {
                            Error::exec(format!("{}: buffer '{name}' is not in the store", site(g, i)))
                        })?
                    }
                }]
            }
            Op::Constant { value, .. } => vec![value.clone()],
            Op::RandomMask { shape, p } => {
                let n: usize = shape.iter().product();
                let data = store.rng.bernoulli_mask(n, 1.0 - *p);
                vec![Rc::new(Tensor::from_bool(shape, data)?)]
            }
            Op::BufferUpdate { name } => {
                let v = arg(&vals, node.inputs[0]);
                let old = store
                    .buffers
                    .get(name)
                    .ok_or_else(|| Error::exec(format!("{}: buffer '{name}' is not in the store", site(g, i))))?;
                if old.shape() != v.shape() || old.dtype() != v.dtype() {
                    return Err(Error::exec(format!("{}: buffer '{name}' cannot change type", site(g, i))));
                }
                store.buffers.insert(name.clone(), v.clone());
                vec![]
            }
            Op::OptimizerUpdate { param, step } => {
                let grad = arg(&vals, node.inputs[0]);
                optimizer_update(store, param, step, grad).map_err(|e| e.context(site(g, i)))?;
                vec![]
            }
            Op::Call { region } => {
                let args: Vec<Rc<Tensor>> = node.inputs.iter().map(|&v| arg(&vals, v).clone()).collect();
                let (r, peak) = run_sub(&region.forward, store, &args, stats, || format!("region '{}'", region.name))?;
                inner_peak = peak;
                r
            }
            Op::InvertibleBackward { region, vjp, .. } => {
                // (y, g_y, others…) → the backward graph's (y, others…, g_y).
                let mut args: Vec<Rc<Tensor>> = vec![arg(&vals, node.inputs[0]).clone()];
                args.extend(node.inputs[2..].iter().map(|&v| arg(&vals, v).clone()));
                args.push(arg(&vals, node.inputs[1]).clone());
                let (r, peak) =
                    run_sub(vjp, store, &args, stats, || format!("the backward of region '{}'", region.name))?;
                inner_peak = peak;
                r
            }
            op => {
                let args: Vec<&Tensor> = node.inputs.iter().map(|&v| arg(&vals, v).as_ref()).collect();
                kernels::eval(op, &args).map_err(|e| e.context(site(g, i)))?.into_iter().map(Rc::new).collect()
            }
        };
        stats.nodes_run += 1;
        if !matches!(node.op, Op::Call { .. } | Op::InvertibleBackward { .. }) {
            record_time(stats, &node.op, t0);
        }
        // Outputs nothing reads are dropped at once; the others are kept, and counted
        // when they are activations, as measured here (the tensors' own bytes).
        let mut born = 0u64;
        for (&v, t) in node.outputs.iter().zip(outs) {
            let vi = v.0 as usize;
            if life.death[vi].is_some() {
                if life.counted[vi] {
                    born += t.nbytes() as u64;
                }
                vals[vi] = Some(t);
            }
        }
        meter.run(i, inner_peak, born);
        for &v in &node.inputs {
            let vi = v.0 as usize;
            if life.death[vi] == Some(i) {
                if let Some(t) = vals[vi].take() {
                    if life.counted[vi] {
                        meter.free(t.nbytes() as u64);
                    }
                }
            }
        }
        if top {
            stats.live_after.push(meter.live);
        }
    }
    stats.peak_bytes = stats.peak_bytes.max(meter.peak);
    g.outputs
        .iter()
        .map(|&v| vals[v.0 as usize].clone().ok_or_else(|| Error::exec(format!("graph output {v} was not computed"))))
        .collect()
}

/// Adds the per-op calls and seconds of `from` into `into`.
pub fn merge_op_times(into: &mut HashMap<&'static str, (usize, f64)>, from: &HashMap<&'static str, (usize, f64)>) {
    for (k, (n, t)) in from {
        let e = into.entry(k).or_insert((0, 0.0));
        e.0 += n;
        e.1 += t;
    }
}

/// Runs a region body (or an invertible backward graph) for a node of the caller, adding
/// its node count and op times to `stats`; returns its outputs and its own peak.
fn run_sub(
    sub_graph: &Graph,
    store: &mut Store,
    args: &[Rc<Tensor>],
    stats: &mut RunStats,
    what: impl FnOnce() -> String,
) -> Result<(Vec<Rc<Tensor>>, u64)> {
    let mut sub = RunStats::default();
    let out = run_graph(sub_graph, store, args, &mut sub, false).map_err(|e| e.context(format!("in {}", what())))?;
    stats.nodes_run += sub.nodes_run;
    merge_op_times(&mut stats.op_time, &sub.op_time);
    Ok((out, sub.peak_bytes))
}

fn arg(vals: &[Option<Rc<Tensor>>], v: crate::ir::ValueId) -> &Rc<Tensor> {
    vals[v.0 as usize].as_ref().expect("verified graphs define values before use")
}

/// Applies one optimizer `step` to parameter `name` of `store` with gradient `grad` (what an
/// `OptimizerUpdate` node does; the PopTorch-style executor calls it with the reduced
/// gradient). The state is kept in `store.opt_state` under the parameter's name. Float16
/// parameters are updated in float32 and rounded back to half once; the gradient may be
/// float16 or float32.
pub fn optimizer_update(store: &mut Store, name: &str, step: &OptimizerStep, grad: &Tensor) -> crate::Result<()> {
    let p = store.params.get_mut(name).ok_or_else(|| Error::exec(format!("parameter '{name}' is not in the store")))?;
    let dtype = p.dtype();
    if !dtype.is_float() {
        return Err(Error::exec(format!(
            "parameter '{name}' is {}: the optimizers update float parameters",
            dtype.short()
        )));
    }
    // A float16 gradient's values are float32s already (Tensor::F16).
    let g32 = if grad.dtype().is_float() { None } else { Some(grad.cast(DType::Float32)) };
    let g = g32.as_ref().unwrap_or(grad).as_float()?;
    let mut state = store.opt_state.remove(name);
    let result = match Rc::make_mut(p) {
        Tensor::F16(param) => {
            let r = optim::apply(step, param, g, &mut state, store.lr_scale);
            float16::round_array(param);
            r
        }
        Tensor::F32(param) => optim::apply(step, param, g, &mut state, store.lr_scale),
        _ => unreachable!("a float parameter (checked above)"),
    };
    if let Some(s) = state {
        store.opt_state.insert(name.to_string(), s);
    }
    result.map_err(|e| e.context(format!("parameter '{name}'")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Tracer;

    fn t(shape: &[usize], v: &[f32]) -> Rc<Tensor> {
        Rc::new(Tensor::from_f32(shape, v.to_vec()).unwrap())
    }

    #[test]
    fn buffers_updated_in_place_persist_across_runs() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2], DType::Float32).unwrap();
        let count = Rc::new(Tensor::zeros(&[2], DType::Float32));
        let c = tr.buffer("count", &count).unwrap();
        let c2 = c.add(&x).unwrap();
        tr.buffer_update("count", &c2).unwrap();
        let trace = tr.finish(&[&c2]).unwrap();
        let mut store = Store::from_params(&trace.params, &trace.buffers, 0).unwrap();
        for _ in 0..3 {
            run(&trace.graph, &mut store, &[t(&[2], &[1.0, 2.0])]).unwrap();
        }
        assert_eq!(store.buffers["count"].to_f32_vec(), vec![3.0, 6.0]);
    }

    #[test]
    fn wrong_input_shape_is_a_clear_error() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2, 4], DType::Float32).unwrap();
        let trace = tr.finish(&[&x.relu().unwrap()]).unwrap();
        let mut store = Store::new(&[], &[], 0);
        let err = run(&trace.graph, &mut store, &[t(&[3, 4], &[0.0; 12])]).unwrap_err().to_string();
        assert!(err.contains("'x'") && err.contains("f32[2,4]") && err.contains("f32[3,4]"), "{err}");
    }

    #[test]
    fn errors_keep_the_kind_of_the_layer_that_raised_them() {
        use crate::ErrorKind;
        // A kernel's error is the executor's; the node is added as context.
        let tr = Tracer::new();
        let x = tr.input("x", &[4], DType::Float32).unwrap();
        let i = tr.input("i", &[2], DType::Int32).unwrap();
        let trace = tr.finish(&[&x.index_select(0, &i).unwrap()]).unwrap();
        let mut store = Store::new(&[], &[], 0);
        let idx = Rc::new(Tensor::from_i32(&[2], vec![0, 9]).unwrap());
        let e = run(&trace.graph, &mut store, &[t(&[4], &[0.0; 4]), idx]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Exec);
        assert!(e.message().starts_with("node 2 (") && e.message().contains("9 at position 1 is out of range"), "{e}");
        // A tensor's error stays the tensor layer's when a kernel passes it on with context.
        let n = Tensor::from_i32(&[1], vec![1]).unwrap();
        let e = kernels::eval(&Op::Unary { kind: crate::ir::UnaryKind::Exp }, &[&n]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Tensor, "{e}");
        assert_eq!(Tensor::from_f32(&[3], vec![]).unwrap_err().kind(), ErrorKind::Tensor);
        // Shape inference is the IR's.
        assert_eq!(crate::ir::shape::matmul_shape(&[2, 3], &[4, 4]).unwrap_err().kind(), ErrorKind::Ir);
    }

    #[test]
    fn memory_is_counted_and_freed_at_last_use() {
        let tr = Tracer::new();
        let x = tr.input("x", &[1000], DType::Float32).unwrap();
        let mut h = x.clone();
        for _ in 0..10 {
            h = h.relu().unwrap();
        }
        let trace = tr.finish(&[&h]).unwrap();
        let mut store = Store::new(&[], &[], 0);
        let r = run(&trace.graph, &mut store, &[t(&[1000], &[1.0; 1000])]).unwrap();
        // A chain never holds more than its input and one or two intermediates.
        assert_eq!(r.stats.peak_bytes, 8000);
        assert_eq!(r.stats.live_after.len(), 11);
        assert_eq!(*r.stats.live_after.last().unwrap(), 4000);
    }
}
