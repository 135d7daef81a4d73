//! The tracer from JavaScript: `trace(model, inputs, options)`, `block`, `beginBlock` and
//! `constant`. The modules a model is built from are in `modules.rs`, the tracing `Tensor`
//! in `tensor.rs`.
//!
//! ```js
//! import { Module, Linear, trace } from "ipu-playground";
//! class Net extends Module {
//!   constructor() { super(); this.fc1 = new Linear(4, 8); this.fc2 = new Linear(8, 2); }
//!   forward(x) { return this.fc2.forward(this.fc1.forward(x).relu()); }
//! }
//! const { text, graph } = trace(new Net(), [{ name: "x", shape: [2, 4] }]);
//! ```
//!
//! Submodules are found by attribute name (like PyTorch's `named_modules`): any property
//! holding an object with a `forward` method, recursively, and the items of `Sequential`
//! and `ModuleList`. During the trace each submodule's `forward` is wrapped (a `Proxy`
//! whose `apply` trap sets the module path: no code is generated from strings, so the
//! engine runs under a Content-Security-Policy without `unsafe-eval`) so its ops are
//! recorded under its path (`fc1`, `blocks.0.conv`); a leaf Rust module's `forward` enters
//! its path itself ([`session::enter_rust_module`]), unwrapped. Each op records the `file:line` of the
//! JavaScript call that made it.
//!
//! One trace runs at a time (a session, `session.rs`: the tracer, its number, its handles). A
//! guard ends it on every exit path, whatever throws (module discovery and the wrappers
//! included): the wrappers are removed, and the handles die with the session.

use super::args::{self, js_err, JsResult};
use super::modules::host_tensor;
use super::session::{self, at_js_caller, current, enter_module, exit_module, is_tracing};
use super::tensor::{tensor_arg, wrap};
use super::to_js;
use super::tree::{is_module, walk};
use crate::tensor::alloc::check_shape;
use crate::tensor::DType;
use crate::trace::check::{self, MAX_INPUTS, MAX_LIST};
use crate::trace::nn::Arg;
use crate::trace::{Tracer, Var};
use js_sys::{Array, Function, Object, Proxy, Reflect};
use serde::Serialize;
use wasm_bindgen::prelude::*;

/// A tensor of `values` (row-major numbers or a Float32Array) and `shape` captured by the
/// model: frozen into the graph as a constant `_tensor_constant<i>` (listed in the trace's
/// `constants`). Within the tensor limits (`limits()`). `dtype` (default "float32"):
/// "float32", "float16", "int32" (whole numbers, e.g. a slice offset) or "bool".
#[wasm_bindgen(unchecked_return_type = "Tensor")]
pub fn constant(
    #[wasm_bindgen(unchecked_param_type = "number[] | Float32Array | Int32Array")] values: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "string")] dtype: JsValue,
) -> JsResult<JsValue> {
    let tr = current()?;
    let t = if args::is_absent(&dtype) {
        host_tensor(&values, &shape, "constant")?
    } else {
        let spec = Object::new();
        for (k, v) in [("shape", &shape), ("data", &values), ("dtype", &dtype)] {
            Reflect::set(&spec, &JsValue::from_str(k), v)?;
        }
        super::host_tensor::from_js(&spec, "constant")?
    };
    at_js_caller(&tr, || tr.constant(t)).map_err(js_err).and_then(wrap)
}

/// `torch.full(shape, value, dtype)` made in the running trace: one `full` op (no values
/// stored; a scalar's `shape` is `[]`). `dtype` (default "float32"): "float32", "float16",
/// "int32" or "bool".
#[wasm_bindgen(unchecked_return_type = "Tensor")]
pub fn full(
    #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number")] value: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "string")] dtype: JsValue,
) -> JsResult<JsValue> {
    let tr = current()?;
    let dims = args::shape(&shape, "full: shape")?;
    let dims: Vec<usize> = dims.into_iter().map(|d| d as usize).collect();
    let v = args::number(&value, "full: value")?;
    let dt = if args::is_absent(&dtype) {
        DType::Float32
    } else {
        DType::parse(&args::string(&dtype, "full: dtype", 16)?).map_err(|e| args::error(e.message()))?
    };
    at_js_caller(&tr, || tr.full(&dims, dt, v)).map_err(js_err).and_then(wrap)
}

/// The Block id and IPU of `block`/`beginBlock`: a name, and a whole number from 0 to 65535.
fn block_args(id: &JsValue, ipu: &JsValue, what: &str) -> JsResult<(String, Option<usize>)> {
    let id = args::name(id, &format!("{what}: id"))?;
    let ipu = args::opt_count(ipu, &format!("{what}: ipu"), check::MAX_IPU as usize)?;
    Ok((id, ipu))
}

/// Runs `fn()` with ops recorded in Block `id` on `ipu` (PopTorch `with poptorch.Block`)
/// and returns its result. `ipu`: a whole number from 0 to 65535, or omitted. As in
/// PopTorch, when `fn` returns no block is active — not an enclosing `block`, not an
/// earlier `beginBlock` — so ops after it need a block of their own (the planner reports
/// PopTorch's "No active Block" otherwise). Each op's `meta.block_kind` records the kind.
#[wasm_bindgen]
pub fn block(
    #[wasm_bindgen(unchecked_param_type = "string")] id: JsValue,
    #[wasm_bindgen(unchecked_param_type = "number | undefined")] ipu: JsValue,
    #[wasm_bindgen(unchecked_param_type = "() => any", js_name = "fn")] f: JsValue,
) -> JsResult<JsValue> {
    let tr = current()?;
    let (id, ipu) = block_args(&id, &ipu, "block")?;
    let f = args::function(&f, "block: fn")?;
    let mut out = Ok(JsValue::UNDEFINED);
    tr.block(&id, ipu, || {
        out = f.call0(&JsValue::UNDEFINED);
        Ok(())
    })
    .map_err(js_err)?;
    out
}

/// The start of a `block(id, ipu, fn)` scope for a caller that cannot pass its body as a
/// function (the page's Python: `with poptorch.Block(...)` enters here and leaves with
/// [`exit_block`]); the same checks and the same Block as `block`.
#[wasm_bindgen(js_name = _enterBlock)]
pub fn enter_block(
    #[wasm_bindgen(unchecked_param_type = "string")] id: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "number")] ipu: JsValue,
) -> JsResult<()> {
    let tr = current()?;
    let (id, ipu) = block_args(&id, &ipu, "block")?;
    tr.enter_block(&id, ipu).map_err(js_err)
}

/// The end of the scope [`enter_block`] started: as when `block`'s `fn` returns, no block
/// is active.
#[wasm_bindgen(js_name = _exitBlock)]
pub fn exit_block() -> JsResult<()> {
    current()?.exit_block();
    Ok(())
}

/// Starts Block `id` on `ipu` for every op recorded from now on, until the next block
/// starts (PopTorch `BeginBlock` / `Block.start`). Ops before the first block of either
/// kind go on IPU 0.
#[wasm_bindgen(js_name = beginBlock)]
pub fn begin_block(
    #[wasm_bindgen(unchecked_param_type = "string")] id: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "number")] ipu: JsValue,
) -> JsResult<()> {
    let tr = current()?;
    let (id, ipu) = block_args(&id, &ipu, "beginBlock")?;
    tr.try_begin_block(&id, ipu).map_err(js_err)
}

/// `poptorch.BeginBlock(module, id, ipu)`: Block `id` on `ipu` starts each time `module` is
/// called in a trace (PopTorch's forward pre-hook) and stays in effect after it, until the
/// next block starts; returns `module`. The mark is the module's `_beginBlock` (`[id,
/// ipu]`), which a trace registers at the module's path ([`Tracer::begin_block_at`]): each
/// op records that path (`meta.block_module`), and the export writes the `BeginBlock` again.
/// PopTorch's errors for a module marked twice and for a value that is no module.
///
/// [`Tracer::begin_block_at`]: crate::trace::Tracer::begin_block_at
#[wasm_bindgen(js_name = _beginBlockOf)]
pub fn begin_block_of(
    #[wasm_bindgen(unchecked_param_type = "Module")] module: JsValue,
    #[wasm_bindgen(unchecked_param_type = "string")] id: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "number")] ipu: JsValue,
) -> JsResult<JsValue> {
    if !is_module(&module)? {
        return Err(args::type_error(&format!(
            "BeginBlock: module is not an instance of torch.nn.Module or function. (got {})",
            args::describe(&module)
        )));
    }
    let (id, ipu) = block_args(&id, &ipu, "BeginBlock")?;
    if !args::get(&module, "_beginBlock")?.is_undefined() {
        return Err(args::error("BeginBlock: module has already been assigned to a block."));
    }
    let mark = Array::of2(&JsValue::from_str(&id), &ipu.map_or(JsValue::UNDEFINED, |n| JsValue::from_f64(n as f64)));
    Reflect::set(&module, args::key("_beginBlock"), &mark)?;
    Ok(module)
}

#[derive(Serialize)]
struct Traced<'a> {
    text: String,
    graph: &'a crate::ir::Graph,
    modules: Vec<String>,
    parameters: Vec<(String, Vec<usize>)>,
    constants: Vec<String>,
}

/// A submodule whose `forward` is wrapped for the trace.
struct Wrapped {
    obj: JsValue,
    /// Its own `forward` before the trace (`None`: it was inherited, so the wrapper is deleted).
    own: Option<JsValue>,
    /// The Proxy's handler: its `apply` trap is deleted after the trace, so a wrapper the
    /// model kept calls the original `forward` (and never the dropped closure).
    handler: Object,
    _trap: Option<Trap>,
}

/// A Proxy `apply` trap in Rust (where the glue has none: [`glue_module_handler`]).
type Trap = Closure<dyn Fn(JsValue, JsValue, JsValue) -> JsResult<JsValue>>;

impl Drop for Wrapped {
    fn drop(&mut self) {
        let _ = Reflect::delete_property(&self.handler, &"apply".into());
    }
}

/// Ends the running trace when dropped, on every exit path of `trace`: puts every wrapped
/// `forward` back (errors ignored: the object may have been frozen since) and forgets the
/// session, and with it every handle of the trace.
struct TraceGuard {
    wrapped: Vec<Wrapped>,
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        for w in self.wrapped.drain(..) {
            let key = args::key("forward");
            let _ = match &w.own {
                Some(f) => Reflect::set(&w.obj, key, f),
                None => Reflect::delete_property(w.obj.unchecked_ref::<Object>(), key),
            };
        }
        session::end();
    }
}

#[wasm_bindgen]
extern "C" {
    /// The glue's Proxy handler for submodule `index` of trace `trace` (`scripts/fix-pkg.mjs`):
    /// its `apply` trap, in JS, calls [`enter_module`], the module's `forward`, then
    /// [`exit_module`], so no wasm frame lies between a module's caller and the ops it
    /// records (the glue's capture of the caller then needs only a few frames). Without
    /// fix-pkg's glue (the wasm tests) an `Err`: the trap is a Rust closure.
    #[wasm_bindgen(catch, js_name = __ipuModuleHandler)]
    fn glue_module_handler(trace: u32, index: u32) -> Result<Object, JsValue>;
}

/// Wraps `obj.forward` in a Proxy that records its ops under `path` (submodule `index` of
/// trace `trace`).
fn wrap_forward(trace: u32, index: u32, path: &str, obj: &JsValue) -> JsResult<Wrapped> {
    let key = args::key("forward");
    let orig = Reflect::get(obj, key)?;
    if !orig.is_function() {
        // A getter may answer differently from the discovery's read.
        return Err(args::type_error(&format!(
            "module '{path}': forward must be a function, got {}",
            args::describe(&orig)
        )));
    }
    let own_desc = Reflect::get_own_property_descriptor(obj.unchecked_ref::<Object>(), key)?;
    let own = if own_desc.is_undefined() { None } else { Some(orig.clone()) };
    let label = path.to_string();
    let (handler, trap) = match glue_module_handler(trace, index) {
        Ok(handler) => (handler, None),
        Err(_) => {
            // The glue's trap, in Rust: the same entry and exit of the module's scope.
            let trap = Trap::new(move |target: JsValue, this: JsValue, arguments: JsValue| {
                enter_module(trace, index);
                let r = Reflect::apply(target.unchecked_ref::<Function>(), &this, arguments.unchecked_ref::<Array>());
                exit_module(trace);
                r
            });
            let handler = Object::new();
            Reflect::set(&handler, &"apply".into(), trap.as_ref())?;
            (handler, Some(trap))
        }
    };
    let proxy = Proxy::new(&orig, &handler);
    let wrapped = Wrapped { obj: obj.clone(), own, handler, _trap: trap };
    // On failure `wrapped` is dropped, which disarms the Proxy even if a setter kept it.
    if !Reflect::set(obj, key, &proxy)? {
        return Err(args::error(&format!(
            "cannot trace module '{label}': its forward cannot be replaced for the trace (is the object frozen?)"
        )));
    }
    Ok(wrapped)
}

/// One input of the trace: `{ name = "input<i>", shape, dtype = "float32" }`, or a sparse
/// matrix `{ name, shape: [rows, cols], layout: "csr", nnz }` (a `SparseTensor` in forward:
/// three inputs `<name>.indptr`, `<name>.indices`, `<name>.values`).
fn input(tr: &Tracer, spec: &JsValue, i: usize) -> JsResult<Arg> {
    let what = format!("trace: inputs[{i}]");
    args::object(spec, &what)?;
    let name = args::get(spec, "name")?;
    let name = if args::is_absent(&name) { format!("input{i}") } else { args::name(&name, &format!("{what}.name"))? };
    let shape = args::get(spec, "shape")?;
    if args::is_absent(&shape) {
        return Err(args::type_error(&format!(
            "trace: input '{name}' needs a shape, an array of sizes ({what}.shape)"
        )));
    }
    let shape = args::shape(&shape, &format!("trace: input '{name}': shape"))?;
    let layout = args::get(spec, "layout")?;
    if !args::is_absent(&layout) {
        let l = args::string(&layout, &format!("trace: input '{name}': layout"), 16)?;
        if l != "csr" {
            return Err(args::error(&format!(
                "trace: input '{name}': layout is \"csr\" (a sparse matrix) or absent, got {l:?}"
            )));
        }
        return sparse_input(tr, spec, &name, &shape);
    }
    let dtype = args::get(spec, "dtype")?;
    let dtype = if args::is_absent(&dtype) {
        DType::Float32
    } else {
        let dt = args::string(&dtype, &format!("trace: input '{name}': dtype"), 16)?;
        DType::parse(&dt).map_err(|e| args::error(&format!("trace: input '{name}': {e}")))?
    };
    let shape = check_shape(&format!("model input '{name}'"), &shape, dtype).map_err(js_err)?;
    tr.input(&name, &shape, dtype).map(Arg::Dense).map_err(js_err)
}

/// A sparse (CSR) input of the trace: `shape` `[rows, cols]` and `nnz` stored entries, each
/// array within the tensor limits.
fn sparse_input(tr: &Tracer, spec: &JsValue, name: &str, shape: &[u64]) -> JsResult<Arg> {
    let [rows, cols] = shape else {
        return Err(args::type_error(&format!(
            "trace: input '{name}': a csr matrix has shape [rows, cols], got {} sizes",
            shape.len()
        )));
    };
    let nnz = args::count(&args::get(spec, "nnz")?, &format!("trace: input '{name}': nnz"), check::MAX_TENSOR_BYTES)?;
    check_shape(&format!("model input '{name}.indptr'"), &[rows + 1], DType::Int32).map_err(js_err)?;
    check_shape(&format!("model input '{name}.indices'"), &[nnz as u64], DType::Int32).map_err(js_err)?;
    if *cols > i32::MAX as u64 {
        return Err(args::range_error(&format!("trace: input '{name}': {cols} columns cannot be indexed by int32")));
    }
    crate::trace::SparseVar::input(tr, name, *rows as usize, *cols as usize, nnz).map(Arg::Sparse).map_err(js_err)
}

/// `options`: `{ training = false }`, a boolean; unknown options are errors.
fn training_option(options: &JsValue) -> JsResult<bool> {
    args::one_flag(options, "trace: options", "training", false, "option", "options")
}

/// What one trace of a JS model gives: the core trace, the module paths, and whether
/// `forward` returned an array (a list of outputs) rather than one Tensor.
pub(crate) struct TracedModule {
    pub trace: crate::trace::Trace,
    pub modules: Vec<String>,
    pub returned_list: bool,
}

/// Traces `model.forward(...inputs)` once, with the inputs `make_inputs` declares on the
/// tracer (in the running session, so it may make handles). One trace runs at a time.
pub(crate) fn trace_module(
    model: &JsValue,
    training: bool,
    make_inputs: impl FnOnce(&Tracer) -> JsResult<Vec<Arg>>,
) -> JsResult<TracedModule> {
    if is_tracing() {
        return Err(args::error(
            "trace: a trace is already running (trace was called from inside a model's forward): traces do not nest",
        ));
    }
    if !is_module(model)? {
        return Err(args::type_error(&format!(
            "trace: the model must be an object with a forward method (extend Module), got {}",
            args::describe(model)
        )));
    }
    let tr = Tracer::new();
    tr.set_training(training);
    let id = session::start(&tr);
    // From here on the guard ends the trace on every path out of this function.
    let mut guard = TraceGuard { wrapped: Vec::new() };

    let call_args = Array::new();
    for a in make_inputs(&tr)? {
        call_args.push(&super::sparse::arg_to_js(&a)?);
    }
    // Record each submodule's ops under its path: a leaf Rust module enters it itself (by its
    // `_moduleKey`), any other forward is wrapped in a Proxy.
    let mut mods = Vec::new();
    walk(model, "", 0, &js_sys::Set::new(&JsValue::UNDEFINED), &mut mods)?;
    for (index, (path, obj)) in mods.iter().enumerate() {
        let leaf = session::add_module(path, obj);
        // A forward of the object's own (a JS module, or a Rust module whose forward was
        // replaced) is wrapped in a Proxy that enters its scope.
        let own_forward =
            !Reflect::get_own_property_descriptor(obj.unchecked_ref::<Object>(), &"forward".into())?.is_undefined();
        if !leaf || own_forward {
            guard.wrapped.push(wrap_forward(id, index as u32, path, obj)?);
        }
    }
    let forward = args::function(&args::get(model, "forward")?, "trace: model.forward")?;
    let result = Reflect::apply(&forward, model, &call_args)?;
    let returned_list = result.is_instance_of::<Array>();
    let list = if returned_list { args::list(&result, "forward's result", MAX_LIST)? } else { vec![result] };
    let outputs = list
        .iter()
        .enumerate()
        .map(|(i, v)| {
            tensor_arg(
                v,
                &if list.len() == 1 { "forward's result".to_string() } else { format!("forward's result[{i}]") },
            )
        })
        .collect::<JsResult<Vec<_>>>()?;
    drop(guard);

    let refs: Vec<&Var> = outputs.iter().collect();
    let trace = tr.finish(&refs).map_err(js_err)?;
    Ok(TracedModule { trace, modules: mods.into_iter().map(|m| m.0).collect(), returned_list })
}

/// Traces `model.forward(...inputs)` once. `inputs`: at most 1024 of
/// `{ name, shape, dtype = "float32" }`; `options`: `{ training: false }`. Returns
/// `{ text, graph, modules, parameters, constants }`. One trace runs at a time: calling
/// `trace` from inside a model's forward is an error.
#[wasm_bindgen]
pub fn trace(
    #[wasm_bindgen(unchecked_param_type = "Module | { forward: (...inputs: Tensor[]) => Tensor | Tensor[] }")]
    model: JsValue,
    #[wasm_bindgen(unchecked_param_type = "{ name?: string, shape: number[], dtype?: string }[]")] inputs: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "{ training?: boolean }")] options: JsValue,
) -> JsResult<JsValue> {
    if is_tracing() {
        return Err(args::error(
            "trace: a trace is already running (trace was called from inside a model's forward): traces do not nest",
        ));
    }
    if !is_module(&model)? {
        return Err(args::type_error(&format!(
            "trace: the model must be an object with a forward method (extend Module), got {}",
            args::describe(&model)
        )));
    }
    let specs = args::list(&inputs, "trace: inputs", MAX_INPUTS)?;
    let training = training_option(&options)?;
    // Weights a poptorch model trained since reach the modules before they are read.
    super::state::flush()?;
    let TracedModule { trace: t, modules, .. } =
        trace_module(&model, training, |tr| specs.iter().enumerate().map(|(i, spec)| input(tr, spec, i)).collect())?;
    let parameters = t.params.iter().map(|(n, p)| (n.clone(), p.shape().to_vec())).collect();
    let result = to_js(&Traced {
        text: crate::ir::print::print_graph(&t.graph),
        graph: &t.graph,
        modules,
        parameters,
        constants: t.constants.iter().map(|c| c.0.clone()).collect(),
    })?;
    super::plan::TracedGraph::attach(&result, &t.graph)?; // `traced`, for plan()
    Ok(result)
}
