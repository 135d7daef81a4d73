//! `poptorch.trainingModel(model, options, optimizer)` and `poptorch.inferenceModel(model,
//! options)` over a JavaScript `nn.Module`: the core's `PoplarExecutor` does the work
//! (PopTorch's checks, batching, replicas, accumulation, reduction, output modes, replica
//! grouping, buffers, loss scaling, the optimizer); this file converts arguments, traces
//! the module and keeps the module's parameters and the host copy in step.
//!
//! ```js
//! const model = poptorch.trainingModel(net, opts, new poptorch.optim.Adam(net.parameters(), { lr: 0.003 }));
//! const [out, loss] = model.call(x, y);      // host tensors in, host tensors out
//! ```
//!
//! * Tracing: on the first `call` (or `compile`, or `plan` before compiling) the module is
//!   traced with the micro-batch shapes of the inputs (each dim 0 divided by
//!   `deviceIterations × replicas / inputGroupSize × gradientAccumulation`, or PopTorch's
//!   batch-dimension error), in training mode for `trainingModel` (Dropout draws masks).
//!   Shapes and dtypes are then static: a later call with others is PopTorch's error.
//! * Weights: one host copy per module object, shared by its wrappers (the core's
//!   `HostModel`): wrapping it again for training before `destroy()` is PopTorch's error,
//!   and an inference wrapper of the same module uploads what a training wrapper trained.
//!   The host copy is read from the module's parameters and buffers when the model compiles
//!   and on `copyWeightsToDevice()`. Trained values (and, for an inference model, buffers
//!   after `copyWeightsToHost()`) are written back into the module lazily, as PopTorch
//!   copies them to the host when the model's parameters are next accessed: before
//!   `namedParameters()`, `parameters()`' values, `stateDict()`, a trace, … read them. A
//!   replica-grouped weight's host value (one slice per group) is read and set with
//!   `model.getParameter(name)` / `model.setParameter(name, value)`; its module keeps the
//!   traced (one-replica) shape and is not written back.
//! * Parts: any input may be an array of parts instead of one combined tensor, one per
//!   micro-batch slice in the combined batch's order (the core's `BatchInput::Parts`); a
//!   sparse input of a model with a combined batch factor above 1 must be (a graph part
//!   per replica and accumulation step: `model.call(xs, adjs, ys)`, each an array).
//! * Outputs: host tensors (`host_tensor.rs`) per `Options.outputMode`; an array when
//!   `forward` returned one (and with input gradients, which follow the outputs).

use super::super::args::{self, js_err, JsResult};
use super::super::host_tensor;
use super::super::nn::{trace_module, TracedModule};
use super::super::sparse;
use super::super::state::{self, Entry, Kind};
use super::enums;
use super::optim::optimizer_arg;
use super::options::options_arg;
use crate::compile::options::CommGroupType;
use crate::compile::Options;
use crate::ir::TensorType;
use crate::poptorch::grouping::{ReplicaGrouping, VariableRetrievalMode};
use crate::poptorch::model::WeakHostModel;
use crate::poptorch::replicas::LocalOutputs;
use crate::poptorch::{BatchInput, HostModel, Optimizer, PoplarExecutor};
use crate::tensor::Tensor;
use crate::trace::check::{self, MAX_INPUTS};
use crate::trace::nn::Arg;
use crate::trace::SparseVar;
use js_sys::{Array, Object, WeakMap, JSON};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

thread_local! {
    /// A number for each module object a wrapper was made of …
    static MODEL_IDS: WeakMap = WeakMap::new();
    static NEXT_MODEL: Cell<u32> = const { Cell::new(0) };
    /// … and the host copy its wrappers share, while one holds it.
    static HOSTS: RefCell<HashMap<u32, WeakHostModel>> = RefCell::new(HashMap::new());
}

/// The host copy of module `module`: the one its live wrappers share, or a new one read
/// from the module's parameters and buffers.
fn host_model(module: &JsValue) -> JsResult<HostModel> {
    let obj: &Object = module.unchecked_ref();
    let id = MODEL_IDS.with(|ids| match ids.get(obj).as_f64() {
        Some(id) => id as u32,
        None => {
            let id = NEXT_MODEL.with(|n| {
                n.set(n.get().wrapping_add(1));
                n.get()
            });
            ids.set(obj, &JsValue::from(id));
            id
        }
    });
    if let Some(h) = HOSTS.with(|h| h.borrow().get(&id).and_then(WeakHostModel::upgrade)) {
        return Ok(h);
    }
    let [params, buffers] = state::entries_all(module)?;
    let host =
        HostModel::untraced(state::params_of(&params, Kind::Parameter)?, state::params_of(&buffers, Kind::Buffer)?);
    HOSTS.with(|h| {
        let mut h = h.borrow_mut();
        h.retain(|_, w| w.upgrade().is_some());
        h.insert(id, host.downgrade());
    });
    Ok(host)
}

/// The traced name of each parameter key (`state::key`) of `module`.
fn parameter_names(module: &JsValue) -> JsResult<HashMap<String, String>> {
    Ok(state::entries(module, Kind::Parameter)?
        .into_iter()
        .map(|e| (state::key(&e.module, &e.local), e.full))
        .collect())
}

/// `opt` with its groups' parameter keys resolved to `module`'s traced names.
fn resolve(opt: &Optimizer, module: &JsValue) -> JsResult<Optimizer> {
    if opt.param_groups().is_empty() {
        return Ok(opt.clone());
    }
    let names = parameter_names(module)?;
    opt.map_params(|k| {
        names.get(k).cloned().ok_or_else(|| {
            crate::Error::poptorch(
                "a parameter group of the optimizer lists a Parameter that is not one of this model's parameters \
                 (pass model.parameters() of the model you wrap)",
            )
        })
    })
    .map_err(js_err)
}

struct Wrapped {
    module: JsValue,
    exec: PoplarExecutor,
    training: bool,
    /// Set at compilation: the module's parameters and buffers, and what `forward` returns.
    params: Vec<Entry>,
    buffers: Vec<Entry>,
    returned_list: bool,
    /// Inputs (indices or names) whose gradients the model returns.
    input_grads: Vec<InputRef>,
}

/// The most replicas a JS count names (`setLocalReplicas`, `assemble`'s parts); the core
/// checks them against `replicationFactor`.
const MAX_REPLICAS: usize = 1 << 20;

#[derive(Clone, Debug)]
enum InputRef {
    Index(usize),
    Name(String),
}

/// `poptorch.PoplarExecutor`: a module wrapped by `trainingModel` or `inferenceModel`.
#[wasm_bindgen(js_name = PoplarExecutor)]
pub struct PoplarExecutorJs {
    state: RefCell<Wrapped>,
}

/// One argument of `forward` in a call: a host tensor, or a host CSR matrix (`sparse.rs`:
/// graph features and adjacencies), which `forward` receives as a `SparseTensor` and the
/// executor as three inputs in a row (`<name>.indptr`, `<name>.indices`, `<name>.values`);
/// either may come as an array of parts, one per micro-batch slice of the combined batch.
struct ArgSpec {
    name: String,
    /// Its first tensor in [`CallInputs::flat`].
    first: usize,
    /// `[rows, cols]` of a sparse argument (of each part).
    sparse: Option<[usize; 2]>,
    /// How many parts it was given as (`None`: one combined tensor).
    parts: Option<usize>,
}

/// A call's inputs: the executor's tensors with their names (`input<i>` unless given), and
/// what each argument of `forward` is.
pub(super) struct CallInputs {
    /// Each tensor's name, combined-batch type and value (none for a shape-only input of a plan).
    flat: Vec<(String, TensorType, Option<BatchInput>)>,
    args: Vec<ArgSpec>,
}

impl CallInputs {
    /// The values of combined inputs (every input has one: [`inputs_arg`] takes shape-only
    /// inputs for plans only, and no parts).
    pub(super) fn tensors(&self) -> Vec<Rc<Tensor>> {
        (self.flat.iter())
            .filter_map(|(_, _, t)| match t {
                Some(BatchInput::Combined(t)) => Some(t.clone()),
                _ => None,
            })
            .collect()
    }
    /// The values, combined or as parts.
    fn batch(&self) -> Vec<BatchInput> {
        self.flat.iter().filter_map(|(_, _, t)| t.clone()).collect()
    }
    fn types(&self) -> Vec<TensorType> {
        self.flat.iter().map(|(_, ty, _)| ty.clone()).collect()
    }
}

/// A call's inputs, each one tensor (no parts); with `type_only`, a dense input may be
/// `{ shape, dtype }` with no data (a plan reads only types).
pub(super) fn inputs_arg(v: &JsValue, what: &str, type_only: bool) -> JsResult<CallInputs> {
    parse_inputs(v, what, type_only, false)
}

/// One tensor (or CSR matrix) of a call input: `(name, tensors, [rows, cols] if sparse)`.
type OneInput = (Option<String>, Vec<(TensorType, Option<Tensor>)>, Option<[usize; 2]>);

fn one_input(x: &JsValue, w: &str, type_only: bool) -> JsResult<OneInput> {
    if sparse::is_host_sparse(x)? {
        let name = args::get(x, "name")?;
        let name = if args::is_absent(&name) { None } else { Some(args::name(&name, &format!("{w}.name"))?) };
        let (tensors, dims) = sparse::host_sparse_from_js(x, w)?;
        let ts = tensors.into_iter().map(|t| (TensorType { shape: t.shape().to_vec(), dtype: t.dtype() }, Some(t)));
        Ok((name, ts.collect(), Some(dims)))
    } else if type_only {
        let (name, ty, t) = host_tensor::from_js_named_or_type(x, w)?;
        Ok((name, vec![(ty, t)], None))
    } else {
        let (name, t) = host_tensor::from_js_named(x, w)?;
        Ok((name, vec![(TensorType { shape: t.shape().to_vec(), dtype: t.dtype() }, Some(t))], None))
    }
}

/// A call's inputs; with `parts`, an input may be an array of parts (host tensors, or host
/// CSR matrices of one shape), one per micro-batch slice of the combined batch, in its order.
fn parse_inputs(v: &JsValue, what: &str, type_only: bool, parts: bool) -> JsResult<CallInputs> {
    let items = if args::is_absent(v) { Vec::new() } else { args::list(v, what, MAX_INPUTS)? };
    let mut out = CallInputs { flat: Vec::new(), args: Vec::new() };
    for (i, x) in items.iter().enumerate() {
        let w = format!("{what}[{i}]");
        let first = out.flat.len();
        if parts && x.is_instance_of::<Array>() {
            let list = args::list(x, &w, MAX_REPLICAS)?;
            // An array of numbers or nested lists is a tensor written as a JS array (a common
            // slip), not parts: named as the input, not as its first element.
            if let Some(p) = list.iter().find(|p| !p.is_object() || p.is_instance_of::<Array>()) {
                return Err(args::type_error(&format!(
                    "{w} must be a host tensor {{ shape, data, dtype? }} (or an array of parts, one host tensor or \
                     sparse matrix per micro-batch slice), got an array holding {}",
                    args::describe(p)
                )));
            }
            if list.is_empty() {
                return Err(args::type_error(&format!(
                    "{w}: an empty array of parts (give one part per micro-batch slice: combinedBatchFactor of them)"
                )));
            }
            let all = (list.iter().enumerate())
                .map(|(k, p)| one_input(p, &format!("{w}[{k}]"), type_only))
                .collect::<JsResult<Vec<_>>>()?;
            let (name, first_ts, dims) = &all[0];
            for (k, (_, ts, d)) in all.iter().enumerate().skip(1) {
                if d.is_some() != dims.is_some() || ts.len() != first_ts.len() {
                    return Err(args::type_error(&format!(
                        "{w}[{k}]: the parts of an input must all be sparse matrices or all host tensors"
                    )));
                }
                if d != dims {
                    let [r, c] = d.unwrap_or_default();
                    let [r0, c0] = dims.unwrap_or_default();
                    return Err(args::error(&format!(
                        "{w}[{k}]: a {r}x{c} sparse matrix, part 0 {r0}x{c0}: every part must have one shape \
                         (pad graph parts to one size, as RandomNodeLoader's fixedSize does)"
                    )));
                }
            }
            let name = name.clone().unwrap_or_else(|| format!("input{i}"));
            let n = all.len();
            let suffixes: Vec<String> = if dims.is_some() {
                ["indptr", "indices", "values"].iter().map(|p| format!("{name}.{p}")).collect()
            } else {
                vec![name.clone()]
            };
            for (j, flat_name) in suffixes.into_iter().enumerate() {
                let ty0 = all[0].1[j].0.clone();
                let values: Option<Vec<Rc<Tensor>>> =
                    all.iter().map(|(_, ts, _)| ts[j].1.clone().map(Rc::new)).collect();
                let mut combined = ty0.clone();
                if let Some(d) = combined.shape.first_mut() {
                    *d *= n;
                }
                if let Some((k, (_, ts, _))) = all.iter().enumerate().find(|(_, (_, ts, _))| ts[j].0 != ty0) {
                    return Err(args::error(&format!(
                        "{w}[{k}]: '{flat_name}' is {}, part 0's {ty0}: every part of an input must have one type \
                         (pad graph parts to one size, as RandomNodeLoader's fixedSize does)",
                        ts[j].0
                    )));
                }
                out.flat.push((flat_name, combined, values.map(BatchInput::Parts)));
            }
            out.args.push(ArgSpec { name, first, sparse: *dims, parts: Some(n) });
            continue;
        }
        let (name, ts, dims) = one_input(x, &w, type_only)?;
        let name = name.unwrap_or_else(|| format!("input{i}"));
        if dims.is_some() {
            for (part, (ty, t)) in ["indptr", "indices", "values"].iter().zip(ts) {
                out.flat.push((format!("{name}.{part}"), ty, t.map(|t| BatchInput::Combined(Rc::new(t)))));
            }
        } else {
            let (ty, t) = ts.into_iter().next().expect("one tensor");
            out.flat.push((name.clone(), ty, t.map(|t| BatchInput::Combined(Rc::new(t)))));
        }
        out.args.push(ArgSpec { name, first, sparse: dims, parts: None });
    }
    if out.flat.len() > MAX_INPUTS {
        return Err(args::range_error(&format!(
            "{what}: {} input tensors (a sparse matrix is three), more than the limit of {MAX_INPUTS}",
            out.flat.len()
        )));
    }
    Ok(out)
}

/// `plan`'s settings: `{ throwOnInvalid = true }`; another key is an error naming it.
fn plan_settings(v: &JsValue) -> JsResult<bool> {
    args::one_flag(v, "plan: settings", "throwOnInvalid", true, "key", "settings")
}

/// The wrapper's trace as `trace()` gives one (without `modules` and `constants`); `graph`
/// the graph's JSON, with or without its regions' bodies.
#[derive(serde::Serialize)]
struct TracedJs<G> {
    text: String,
    graph: G,
    parameters: Vec<(String, Vec<usize>)>,
}

/// `getTracedModel`'s settings: `{ regions = true }`; another key is an error naming it.
fn traced_settings(v: &JsValue) -> JsResult<bool> {
    args::one_flag(v, "getTracedModel: settings", "regions", true, "key", "settings")
}

fn wrap(module: JsValue, options: &JsValue, optimizer: &JsValue, training: bool) -> JsResult<PoplarExecutorJs> {
    let what = if training { "trainingModel" } else { "inferenceModel" };
    if !super::super::tree::is_module(&module)? {
        return Err(args::type_error(&format!(
            "{what}: the model must be a module (an object with a forward method; extend nn.Module), got {}",
            args::describe(&module)
        )));
    }
    let shared = options_arg(options)?;
    // The wrapper's own copy of the options the caller built (parsed once, when they were made).
    let mut opts = match &shared {
        Some(s) => s.borrow().clone(),
        None => Options::new(),
    };
    // A copy: resolving reads the module (its getters may change this optimizer).
    let opt = match optimizer_arg(optimizer)? {
        Some(o) => {
            let copy = o.borrow().clone();
            Some(resolve(&copy, &module)?)
        }
        None => None,
    };
    let host = host_model(&module)?;
    let exec = PoplarExecutor::new(&host, &mut opts, training, opt).map_err(js_err)?;
    if let Some(s) = shared {
        s.borrow_mut().freeze();
    }
    Ok(PoplarExecutorJs {
        state: RefCell::new(Wrapped {
            module,
            exec,
            training,
            params: Vec::new(),
            buffers: Vec::new(),
            returned_list: false,
            input_grads: Vec::new(),
        }),
    })
}

/// `poptorch.trainingModel(model, options, optimizer)`: `model` a JS module whose forward
/// returns a loss (PopTorch's loss rules: one independent `identity_loss` or cross-entropy);
/// `options` a `poptorch.Options` (frozen from then on; the model keeps a copy); no
/// optimizer means SGD with lr 0.01.
#[wasm_bindgen(js_name = trainingModel)]
pub fn training_model(
    #[wasm_bindgen(unchecked_param_type = "Module | { forward: (...inputs: Tensor[]) => Tensor | Tensor[] }")]
    model: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "PoptorchOptions")] options: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "PoptorchOptimizer")] optimizer: JsValue,
) -> JsResult<PoplarExecutorJs> {
    wrap(model, &options, &optimizer, true)
}

/// `poptorch.inferenceModel(model, options)`: gradient accumulation must be 1; an optimizer
/// is PopTorch's error.
#[wasm_bindgen(js_name = inferenceModel)]
pub fn inference_model(
    #[wasm_bindgen(unchecked_param_type = "Module | { forward: (...inputs: Tensor[]) => Tensor | Tensor[] }")]
    model: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "PoptorchOptions")] options: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "undefined")] optimizer: JsValue,
) -> JsResult<PoplarExecutorJs> {
    wrap(model, &options, &optimizer, false)
}

/// PopTorch's check after the trace: every parameter and buffer (`[parameters, buffers]`)
/// the model had before `forward` is still there, owned by the same module under the same
/// name (a submodule assigned anew in `forward` replaces its parameters; one deleted
/// removes them).
fn check_state_kept(before: &[Vec<state::Entry>; 2], after: &[Vec<state::Entry>; 2]) -> JsResult<()> {
    for (buffer, (before, after)) in [(false, (&before[0], &after[0])), (true, (&before[1], &after[1]))] {
        // By name (the first entry of a name, as a scan finds it): a 1,000-layer model has
        // some 10,000 parameters, and a scan of `after` for each was quadratic.
        let mut by_name: HashMap<&str, &state::Entry> = HashMap::with_capacity(after.len());
        for a in after {
            by_name.entry(a.full.as_str()).or_insert(a);
        }
        for b in before {
            match by_name.get(b.full.as_str()) {
                None => return Err(js_err(crate::poptorch::model::state_removed(buffer, &b.full))),
                Some(a) if !Object::is(&a.module, &b.module) || a.local != b.local => {
                    return Err(js_err(crate::poptorch::model::state_reassigned(buffer, &b.full, &b.local)))
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

impl Wrapped {
    /// Reads the module's parameters and buffers into the host copy. Before compilation they
    /// replace the host values as they are (the module may have been cast or changed since it
    /// was wrapped); once compiled they keep the compiled dtypes (a float value is cast, as
    /// PyTorch's `copy_` does). A replica-grouped weight whose host value holds one slice per
    /// group keeps it.
    fn refresh_host(&mut self) -> JsResult<[Vec<Entry>; 2]> {
        let entries = state::entries_all(&self.module)?;
        let host = self.exec.model().clone();
        let compiled = self.exec.is_compiled();
        for (name, t) in state::params_of(&entries[0], Kind::Parameter)? {
            let old = host.parameter(&name);
            let per_group = self.exec.grouping(&name).is_some() && old.as_ref().is_some_and(|h| h.shape() != t.shape());
            if per_group || old.as_ref().is_some_and(|h| h.same(&t)) {
                continue;
            }
            match old {
                Some(h) if compiled => {
                    let v =
                        state::replacement(Kind::Parameter, &name, &h, (*t.value().map_err(js_err)?).clone(), false)?;
                    host.set_parameter(&name, v).map_err(js_err)?;
                }
                _ => host.reload_parameter(&name, t),
            }
        }
        for (name, t) in state::params_of(&entries[1], Kind::Buffer)? {
            match host.buffer(&name) {
                Some(h) if h.same(&t) => {}
                Some(h) if compiled => {
                    let v = state::replacement(Kind::Buffer, &name, &h, (*t.value().map_err(js_err)?).clone(), false)?;
                    host.set_buffer(&name, v).map_err(js_err)?;
                }
                _ => host.reload_buffer(&name, t),
            }
        }
        Ok(entries)
    }

    /// Traces the module for a call with `inputs` (combined batch) and gives the executor
    /// the trace (before compilation).
    fn attach(&mut self, inputs: &CallInputs) -> JsResult<()> {
        // The module tree's state as the host now has it, and as the trace must leave it.
        let before = self.refresh_host()?;
        let types = inputs.types();
        let factor = self.exec.combined_batch_factor();
        for (i, a) in inputs.args.iter().enumerate() {
            match a.parts {
                Some(n) if n != factor => {
                    return Err(args::error(&format!(
                        "input {i} ('{}'): {n} parts given, but a call takes combinedBatchFactor = deviceIterations × \
                         (replicationFactor / inputReplicaGrouping size) × gradientAccumulation = {factor} of them \
                         (one per micro-batch slice, in the combined batch's order)",
                        a.name
                    )))
                }
                None if a.sparse.is_some() && factor != 1 => {
                    return Err(args::error(&format!(
                        "input {i} ('{}') is a sparse matrix, which cannot be cut into micro-batches: give it as an \
                         array of combinedBatchFactor ({factor}) sparse parts, one per micro-batch slice (a graph part \
                         each, e.g. RandomNodeLoader's parts with fixedSize), its dense companions likewise or combined",
                        a.name
                    )))
                }
                _ => {}
            }
        }
        let micro = self.exec.micro_batch_types(&types).map_err(js_err)?;
        let TracedModule { trace, returned_list, .. } = trace_module(&self.module, self.training, |tr| {
            inputs
                .args
                .iter()
                .map(|a| match a.sparse {
                    None => {
                        let t = &micro[a.first];
                        tr.input(&a.name, &t.shape, t.dtype).map(Arg::Dense).map_err(js_err)
                    }
                    Some([rows, cols]) => {
                        let nnz = micro[a.first + 1].shape[0];
                        SparseVar::input(tr, &a.name, rows, cols, nnz).map(Arg::Sparse).map_err(js_err)
                    }
                })
                .collect()
        })?;
        let after = state::entries_all(&self.module)?;
        check_state_kept(&before, &after)?;
        self.exec.attach_trace(&trace).map_err(js_err)?;
        self.returned_list = returned_list;
        let [params, buffers] = after;
        self.params = params;
        self.buffers = buffers;
        if !self.input_grads.is_empty() {
            let names = self
                .input_grads
                .iter()
                .map(|r| match r {
                    InputRef::Index(i) => match inputs.args.get(*i) {
                        Some(a) if a.sparse.is_some() => Err(args::error(&format!(
                            "returnInputGradients: input {i} is a sparse matrix, whose gradient is not returned"
                        ))),
                        Some(a) => Ok(a.name.clone()),
                        None => Err(args::range_error(&format!(
                            "returnInputGradients: input {i} does not exist: the call has {} inputs",
                            inputs.args.len()
                        ))),
                    },
                    InputRef::Name(n) => Ok(n.clone()),
                })
                .collect::<JsResult<Vec<_>>>()?;
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            self.exec.return_input_gradients(&refs).map_err(js_err)?;
        }
        Ok(())
    }

    fn compile(&mut self, inputs: &CallInputs) -> JsResult<()> {
        if !self.exec.is_compiled() {
            self.attach(inputs)?;
        }
        self.exec.compile_inputs(&inputs.batch()).map_err(js_err)
    }

    /// Compiles on the first call (`call`, `beginCall`); later calls run what was compiled.
    fn compile_once(&mut self, inputs: &CallInputs) -> JsResult<()> {
        if self.exec.is_compiled() {
            return Ok(());
        }
        self.compile(inputs)
    }

    /// Queues the host values for the module (see the module docs): every buffer and every
    /// parameter whose host value has the module's shape.
    fn write_back_later(&self) {
        let host = self.exec.model();
        let params = self
            .params
            .iter()
            .filter(|e| match self.exec.grouping(&e.full) {
                None => true,
                Some(g) => g.kind == CommGroupType::All && g.retrieval == VariableRetrievalMode::OnePerGroup,
            })
            .cloned()
            .collect();
        state::mark_dirty(host, params, self.buffers.clone());
    }

    fn outputs(&self, outs: Vec<Tensor>) -> JsResult<JsValue> {
        if outs.len() == 1 && !self.returned_list {
            return host_tensor::to_js(&outs[0]);
        }
        let a = Array::new();
        for t in &outs {
            a.push(&host_tensor::to_js(t)?);
        }
        Ok(a.into())
    }
}

impl PoplarExecutorJs {
    /// [`PoplarExecutorJs::traced_model`], with or without the regions' bodies in `graph`.
    fn traced(&self, regions: bool) -> JsResult<JsValue> {
        self.with(|w| {
            let model = w.exec.model();
            if !model.is_traced() {
                return Ok(JsValue::NULL);
            }
            let g = model.graph();
            let parameters = g
                .placeholders(crate::ir::InputKind::Parameter)
                .into_iter()
                .map(|(n, v)| (n.to_string(), g.ty(v).shape.clone()))
                .collect();
            let text = crate::ir::print::print_graph(g);
            let out = if regions {
                super::super::to_js(&TracedJs { text, graph: g, parameters })?
            } else {
                super::super::to_js(&TracedJs { text, graph: crate::ir::WithoutRegions(g), parameters })?
            };
            super::super::plan::TracedGraph::attach_shared(&out, model.shared_graph())?;
            Ok(out)
        })
    }

    /// Runs `f` on the core's executor (the export's edge reads it).
    pub(super) fn with_exec<T>(&self, f: impl FnOnce(&mut PoplarExecutor) -> JsResult<T>) -> JsResult<T> {
        self.with(|w| f(&mut w.exec))
    }

    /// Replica `replica`'s device value `name`, read by `get` (a parameter or a buffer); `what`
    /// names the method in errors, `kind` the value.
    fn replica_value(
        &self,
        replica: &JsValue,
        name: &JsValue,
        what: &str,
        kind: &str,
        get: fn(&PoplarExecutor, usize, &str) -> Option<Rc<Tensor>>,
    ) -> JsResult<JsValue> {
        let r = args::count(replica, &format!("{what}: replica"), MAX_REPLICAS)?;
        let name = args::string(name, &format!("{what}: name"), check::MAX_NAME_BYTES * 8)?;
        self.with(|w| {
            let t = get(&w.exec, r, &name).ok_or_else(|| {
                args::error(&format!(
                    "{what}: no replica {r} holds {kind} '{name}' (compiled, {} replicas)",
                    w.exec.options().replication_factor
                ))
            })?;
            host_tensor::to_js(&t)
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Wrapped) -> JsResult<T>) -> JsResult<T> {
        let mut w = self.state.try_borrow_mut().map_err(|_| {
            args::error(
                "this model is busy: it was used from inside its own forward (or from code its call runs); \
                 a model runs one call at a time",
            )
        })?;
        f(&mut w)
    }
}

#[wasm_bindgen(js_class = PoplarExecutor)]
impl PoplarExecutorJs {
    /// `model(...inputs)`: compiles on the first call, then runs every micro-batch of one
    /// host call; returns the outputs per `outputMode` (see the module docs). The namespace
    /// method `call(...inputs)` (alias `run`) passes the inputs as one array.
    #[wasm_bindgen(js_name = _call)]
    pub fn call(&self, #[wasm_bindgen(unchecked_param_type = "CallInput[]")] inputs: JsValue) -> JsResult<JsValue> {
        let inputs = parse_inputs(&inputs, "call: inputs", false, true)?;
        self.with(|w| {
            w.compile_once(&inputs)?;
            let outs = w.exec.call_inputs(&inputs.batch()).map_err(js_err)?;
            if w.training {
                w.write_back_later();
            }
            w.outputs(outs)
        })
    }

    /// What the CPU executor measured over the last call's micro-batches: `{ peakBytes,
    /// savedForBackward, nodesRun }` (the most bytes live at once, the bytes the forward
    /// kept for the backward, nodes run), or `null` before the first call.
    #[wasm_bindgen(
        getter,
        unchecked_return_type = "{ peakBytes: number, savedForBackward: number, nodesRun: number } | null"
    )]
    pub fn stats(&self) -> JsResult<JsValue> {
        self.with(|w| {
            let Some(s) = w.exec.last_stats() else {
                return Ok(JsValue::NULL);
            };
            let o = Object::new();
            js_sys::Reflect::set(&o, &"peakBytes".into(), &(s.peak_bytes as f64).into())?;
            js_sys::Reflect::set(&o, &"savedForBackward".into(), &(s.saved_for_backward as f64).into())?;
            js_sys::Reflect::set(&o, &"nodesRun".into(), &(s.nodes_run as f64).into())?;
            Ok(o.into())
        })
    }

    /// `compile(...inputs)`: traces and compiles for these inputs without running; again
    /// once compiled, PopTorch's warning ("Call to compile() ignored") joins `warnings`.
    #[wasm_bindgen(js_name = _compile)]
    pub fn compile(&self, #[wasm_bindgen(unchecked_param_type = "CallInput[]")] inputs: JsValue) -> JsResult<()> {
        let inputs = parse_inputs(&inputs, "compile: inputs", false, true)?;
        self.with(|w| w.compile(&inputs))
    }

    /// `plan(...inputs)` / `plan(...inputs, { throwOnInvalid: false })`: the planner's Plan of
    /// this model and options for a call with these inputs (the compiled plan once
    /// compiled), as `plan()` returns it. A dense input may be shape-only, `{ shape, dtype }`
    /// with no data; no parameter is materialised. By default a configuration PopTorch would
    /// refuse throws PopTorch's error (as compiling would); with `throwOnInvalid: false` it is
    /// the plan anyway, `valid: false` with PopTorch's reasons in `errors` (each with `code`
    /// and `option`), and what the wrapper logged follows the plan's `warnings`. Either way the
    /// plan counts what the wrapper runs: its trace, the loss PopTorch finds, each
    /// parameter's optimizer state (its group's) and the options in effect.
    #[wasm_bindgen(js_name = _plan)]
    pub fn plan(
        &self,
        #[wasm_bindgen(unchecked_param_type = "(CallInput | { shape: number[], dtype?: string, name?: string })[]")]
        inputs: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ throwOnInvalid?: boolean }")] settings: JsValue,
    ) -> JsResult<JsValue> {
        let throw_on_invalid = plan_settings(&settings)?;
        let inputs = parse_inputs(&inputs, "plan: inputs", true, true)?;
        self.with(|w| {
            if !w.exec.is_compiled() {
                w.attach(&inputs)?;
            }
            let p =
                if throw_on_invalid { w.exec.plan_for(&inputs.types()) } else { w.exec.plan_report(&inputs.types()) }
                    .map_err(js_err)?;
            JSON::parse(&p.to_json())
        })
    }

    /// The module as the wrapper traced it (one micro-batch; on the first `call`, `compile`
    /// or `plan`): `{ text, graph, parameters, traced }` as `trace()` returns them (`traced`
    /// for `plan()`), or `null` before.
    #[wasm_bindgen(
        getter,
        js_name = tracedModel,
        unchecked_return_type = "{ text: string, graph: any, parameters: [string, number[]][], traced: TracedGraph } | null"
    )]
    pub fn traced_model(&self) -> JsResult<JsValue> {
        self.traced(true)
    }

    /// `getTracedModel({ regions })`: `tracedModel`; with `regions: false` a `call` node of
    /// `graph` has no `region` (the bodies of the sub-graphs it calls, which `text` still
    /// prints): what a view of the graph reads, a fraction of the JSON when the model calls
    /// many regions (a deep reversible model's layers).
    #[wasm_bindgen(
        js_name = getTracedModel,
        unchecked_return_type = "{ text: string, graph: any, parameters: [string, number[]][], traced: TracedGraph } | null"
    )]
    pub fn get_traced_model(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "{ regions?: boolean }")] settings: JsValue,
    ) -> JsResult<JsValue> {
        self.traced(traced_settings(&settings)?)
    }
    /// The optimizer's PopTorch class name (`"SGD"`, `"Adam"`, `"AdamW"`, `"RMSprop"`,
    /// `"LAMB"`; SGD when none was given), `null` for an inference model.
    #[wasm_bindgen(getter, js_name = optimizerType)]
    pub fn optimizer_type(&self) -> JsResult<Option<String>> {
        self.with(|w| Ok(w.exec.optimizer().map(|o| o.optimizer_type().name().to_string())))
    }

    /// How many micro-batches one call's inputs hold along dim 0: `deviceIterations ×
    /// (replicationFactor / inputReplicaGrouping size) × gradientAccumulation` (what
    /// PopTorch's `DataLoader` multiplies its batch size by).
    #[wasm_bindgen(getter, js_name = combinedBatchFactor)]
    pub fn combined_batch_factor(&self) -> JsResult<usize> {
        self.with(|w| Ok(w.exec.combined_batch_factor()))
    }

    /// `copyWeightsToHost()`: the device weights (and buffers) into the host copy, and from
    /// there into the module (lazily, see the module docs).
    #[wasm_bindgen(js_name = copyWeightsToHost)]
    pub fn copy_weights_to_host(&self) -> JsResult<()> {
        self.with(|w| {
            w.exec.copy_weights_to_host().map_err(js_err)?;
            w.write_back_later();
            Ok(())
        })
    }

    /// `copyWeightsToDevice()`: the module's parameters and buffers (a grouped weight: its
    /// host value) to every replica.
    #[wasm_bindgen(js_name = copyWeightsToDevice)]
    pub fn copy_weights_to_device(&self) -> JsResult<()> {
        self.with(|w| {
            w.refresh_host()?;
            w.exec.copy_weights_to_device().map_err(js_err)
        })
    }

    /// `setOptimizer(optimizer)`: before compilation any optimizer; after, one that changes
    /// only variable attributes (PopART's replacement rules). On error nothing changes.
    #[wasm_bindgen(js_name = setOptimizer)]
    pub fn set_optimizer(
        &self,
        #[wasm_bindgen(unchecked_param_type = "PoptorchOptimizer")] optimizer: JsValue,
    ) -> JsResult<()> {
        let opt = optimizer_arg(&optimizer)?.ok_or_else(|| {
            args::type_error("setOptimizer: optimizer must be a poptorch.optim optimizer, got nothing")
        })?;
        self.with(|w| {
            let copy = opt.borrow().clone();
            let o = resolve(&copy, &w.module)?;
            w.exec.set_optimizer(o).map_err(js_err)
        })
    }

    /// `destroy()`: a training model copies its weights to the host and unwraps the module
    /// (it may be wrapped for training again); the executable is released.
    pub fn destroy(&self) -> JsResult<()> {
        self.with(|w| {
            let was = w.exec.is_compiled();
            w.exec.destroy().map_err(js_err)?;
            if was && w.training {
                w.write_back_later();
            }
            Ok(())
        })
    }

    /// `isCompiled()`.
    #[wasm_bindgen(js_name = isCompiled)]
    pub fn is_compiled(&self) -> JsResult<bool> {
        self.with(|w| Ok(w.exec.is_compiled()))
    }

    /// True for a `trainingModel`.
    #[wasm_bindgen(getter)]
    pub fn training(&self) -> JsResult<bool> {
        self.with(|w| Ok(w.training))
    }

    /// The wrapped module.
    #[wasm_bindgen(getter)]
    pub fn model(&self) -> JsResult<JsValue> {
        self.with(|w| Ok(w.module.clone()))
    }

    /// The options the model runs with (its frozen copy), as JSON.
    #[wasm_bindgen(getter)]
    pub fn options(&self) -> JsResult<JsValue> {
        self.with(|w| JSON::parse(&w.exec.options().to_json()))
    }

    /// Warnings PopTorch would have logged (compile called twice, a plan that does not fit, …).
    #[wasm_bindgen(getter)]
    pub fn warnings(&self) -> JsResult<Vec<String>> {
        self.with(|w| Ok(w.exec.warnings()))
    }

    /// `getAnchoredTensor(shortName)`: the host tensor the last call left in the tensor
    /// anchored under `shortName` (`Options.anchorTensor`): a parameter's gradient as the
    /// step computed it, or its value after the update.
    #[wasm_bindgen(js_name = getAnchoredTensor)]
    pub fn get_anchored_tensor(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] short_name: JsValue,
    ) -> JsResult<JsValue> {
        let short = args::string(&short_name, "getAnchoredTensor: short_name", crate::trace::check::MAX_NAME_BYTES)?;
        self.with(|w| host_tensor::to_js(w.exec.anchored_tensor(&short).map_err(js_err)?))
    }

    /// The loss scaling factor the next step uses (it changes with automatic loss scaling);
    /// `undefined` before compilation.
    #[wasm_bindgen(getter, js_name = lossScaling)]
    pub fn loss_scaling(&self) -> JsResult<Option<f64>> {
        self.with(|w| Ok(w.exec.loss_scaling().map(f64::from)))
    }

    /// `poptorch_model.W.replicaGrouping(commGroupType, groupSize, variableRetrievalMode)`:
    /// parameter `name` (its traced name) gets one value per replica group. Before
    /// compilation.
    #[wasm_bindgen(js_name = replicaGrouping)]
    pub fn replica_grouping(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "CommGroupType")] comm_group_type: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] group_size: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "VariableRetrievalMode")] retrieval: JsValue,
    ) -> JsResult<()> {
        let name = args::string(&name, "replicaGrouping: name", check::MAX_NAME_BYTES * 8)?;
        let kind: CommGroupType =
            enums::parse(&comm_group_type, "replicaGrouping: comm_group_type", &enums::comm_group_type())?;
        let size = args::opt_count(&group_size, "replicaGrouping: shards", u32::MAX as usize)?.unwrap_or(0);
        let retrieval: VariableRetrievalMode = if args::is_absent(&retrieval) {
            VariableRetrievalMode::OnePerGroup
        } else {
            enums::parse(&retrieval, "replicaGrouping: variable_retrieval_mode", &enums::variable_retrieval_mode())?
        };
        self.with(|w| {
            w.exec.replica_grouping(&name, ReplicaGrouping { kind, group_size: size, retrieval }).map_err(js_err)
        })
    }

    /// Asks for the gradients of model inputs (indices or input names, float inputs): they
    /// follow the outputs on every call. Training models, before compilation.
    #[wasm_bindgen(js_name = _returnInputGradients)]
    pub fn return_input_gradients(
        &self,
        #[wasm_bindgen(unchecked_param_type = "(number | string)[]")] which: JsValue,
    ) -> JsResult<()> {
        let items = args::list(&which, "returnInputGradients: inputs", MAX_INPUTS)?;
        let refs = items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                if v.is_string() {
                    args::name(v, &format!("returnInputGradients: inputs[{i}]")).map(InputRef::Name)
                } else {
                    args::count(v, &format!("returnInputGradients: inputs[{i}]"), MAX_INPUTS).map(InputRef::Index)
                }
            })
            .collect::<JsResult<Vec<_>>>()?;
        self.with(|w| {
            // The core checks training and compilation state now; names are checked at compile.
            w.exec.return_input_gradients(&[]).map_err(js_err)?;
            w.input_grads = refs;
            Ok(())
        })
    }

    /// Runs only replicas `first..end` of `replicationFactor` (the others run on other
    /// workers, each with its own wasm instance; `ipu-playground/replicas.mjs` drives
    /// them). Before compilation. A call then goes `beginCall`, per device iteration
    /// `contribute` / `apply` with every replica's contributions, `endCall`, `assemble`.
    #[wasm_bindgen(js_name = setLocalReplicas)]
    pub fn set_local_replicas(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] first: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] end: JsValue,
    ) -> JsResult<()> {
        let lo = args::count(&first, "setLocalReplicas: first", MAX_REPLICAS)?;
        let hi = args::count(&end, "setLocalReplicas: end", MAX_REPLICAS)?;
        self.with(|w| w.exec.set_local_replicas(lo, hi).map_err(js_err))
    }

    /// The replicas this model runs, `[first, end]` (all of them unless `setLocalReplicas`).
    #[wasm_bindgen(getter, js_name = localReplicas)]
    pub fn local_replicas(&self) -> JsResult<Vec<u32>> {
        self.with(|w| {
            let (lo, hi) = w.exec.local_replicas();
            Ok(vec![lo as u32, hi as u32])
        })
    }

    /// The `float32` values of one replica's contribution to a step (0 for an inference
    /// model); `undefined` before compilation.
    #[wasm_bindgen(getter, js_name = contributionLength)]
    pub fn contribution_length(&self) -> JsResult<Option<u32>> {
        self.with(|w| Ok(w.exec.contribution_len().map(|n| n as u32)))
    }

    /// Begins a call with `inputs` (the whole combined batch; compiles on the first call)
    /// and returns its device iterations.
    #[wasm_bindgen(js_name = beginCall)]
    pub fn begin_call(&self, #[wasm_bindgen(unchecked_param_type = "CallInput[]")] inputs: JsValue) -> JsResult<u32> {
        let inputs = parse_inputs(&inputs, "beginCall: inputs", false, true)?;
        self.with(|w| {
            w.compile_once(&inputs)?;
            Ok(w.exec.begin_call_inputs(&inputs.batch()).map_err(js_err)? as u32)
        })
    }

    /// Runs this model's replicas' micro-batches of the next device iteration; returns their
    /// contributions (`contributionLength` values per replica, replicas in order).
    pub fn contribute(&self) -> JsResult<Vec<f32>> {
        self.with(|w| w.exec.contribute().map_err(js_err))
    }

    /// Applies the device iteration's contributions of every replica (`replicationFactor ×
    /// contributionLength` values, replica-major): the reduced gradients and the optimizer
    /// step, the same on every worker.
    /// A typed array is read one gradient at a time into wasm memory (every replica's
    /// contributions at once would be replicas × the weights more of it).
    pub fn apply(&self, #[wasm_bindgen(unchecked_param_type = "Float32Array")] contributions: JsValue) -> JsResult<()> {
        self.with(|w| {
            let n = w.exec.contribution_len().unwrap_or(0) * w.exec.options().replication_factor;
            let what = "apply: contributions";
            if !js_sys::ArrayBuffer::is_view(&contributions) {
                let all = args::f32_values(&contributions, what, n)?;
                return w.exec.apply(&all).map_err(js_err);
            }
            let copy = args::f32_copy(&contributions, what, n)?;
            w.exec.apply_from(n, |at, len| copy.subarray(at as u32, (at + len) as u32).to_vec()).map_err(js_err)
        })
    }

    /// Ends the call: the outputs this model's replicas computed, packed for `assemble`; a
    /// training model's weights go back to the host (and the module).
    #[wasm_bindgen(js_name = endCall)]
    pub fn end_call(&self) -> JsResult<Vec<u8>> {
        self.with(|w| {
            let out = w.exec.end_call().map_err(js_err)?;
            if w.training {
                w.write_back_later();
            }
            Ok(out.to_bytes())
        })
    }

    /// The call's outputs per `outputMode` from every worker's `endCall` bytes (each
    /// micro-batch from exactly one), as `call` returns them; the anchored tensors too.
    pub fn assemble(&self, #[wasm_bindgen(unchecked_param_type = "Uint8Array[]")] parts: JsValue) -> JsResult<JsValue> {
        let items = args::list(&parts, "assemble: parts", MAX_REPLICAS)?;
        let parts = (items.iter().enumerate())
            .map(|(i, v)| {
                let b = args::bytes(v, &format!("assemble: parts[{i}]"), u32::MAX as usize)?;
                LocalOutputs::from_bytes(&b).map_err(|e| js_err(e.context(format!("assemble: parts[{i}]"))))
            })
            .collect::<JsResult<Vec<_>>>()?;
        self.with(|w| {
            let outs = w.exec.assemble(parts).map_err(js_err)?;
            w.outputs(outs)
        })
    }

    /// Replica `replica`'s device value of parameter `name` (each replica holds its own copy;
    /// they stay identical within a weight's replica group).
    #[wasm_bindgen(js_name = getReplicaParameter, unchecked_return_type = "HostTensor")]
    pub fn get_replica_parameter(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] replica: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
    ) -> JsResult<JsValue> {
        self.replica_value(&replica, &name, "getReplicaParameter", "a parameter", PoplarExecutor::replica_parameter)
    }

    /// Replica `replica`'s device value of buffer `name`: with `broadcastBuffers(false)` each
    /// replica keeps its own (the host copy is replica 0's).
    #[wasm_bindgen(js_name = getReplicaBuffer, unchecked_return_type = "HostTensor")]
    pub fn get_replica_buffer(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] replica: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
    ) -> JsResult<JsValue> {
        self.replica_value(&replica, &name, "getReplicaBuffer", "a buffer", PoplarExecutor::replica_buffer)
    }

    /// The host value of parameter `name` (a replica-grouped weight: one slice per group, or
    /// per replica with `AllReplicas`), as a host tensor.
    #[wasm_bindgen(js_name = getParameter, unchecked_return_type = "HostTensor")]
    pub fn get_parameter(&self, #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue) -> JsResult<JsValue> {
        let name = args::string(&name, "getParameter: name", check::MAX_NAME_BYTES * 8)?;
        self.with(|w| {
            let t = w
                .exec
                .model()
                .parameter(&name)
                .ok_or_else(|| args::error(&format!("getParameter: the model has no parameter '{name}'")))?;
            host_tensor::to_js(t.value().map_err(js_err)?.as_ref())
        })
    }

    /// Sets the host value of parameter `name`: a value of the module's shape is written into
    /// the module too; another (a replica-grouped weight's one slice per group, `[groups, …]`)
    /// only into the host copy. The device sees it at compilation or after
    /// `copyWeightsToDevice()`.
    #[wasm_bindgen(js_name = setParameter)]
    pub fn set_parameter(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "HostTensorInput")] value: JsValue,
    ) -> JsResult<()> {
        let name = args::string(&name, "setParameter: name", check::MAX_NAME_BYTES * 8)?;
        let t = host_tensor::from_js(&value, "setParameter: value")?;
        self.with(|w| {
            let entry = state::entries(&w.module, Kind::Parameter)?.into_iter().find(|e| e.full == name);
            if let Some(e) = entry {
                if state::own_param(&e.module, Kind::Parameter, &e.local)?.shape() == t.shape() {
                    state::set_own(&e.module, Kind::Parameter, &e.local, &t)?;
                }
            }
            w.exec.model().set_parameter(&name, t).map_err(js_err)
        })
    }
}
