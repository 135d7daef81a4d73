//! The user's model on the host: a traced forward graph (traced with one micro-batch, as
//! PopTorch traces with the narrowed input) and the host copy of its parameters and
//! buffers. Clones share the weights, as the PyTorch module object a PopTorch wrapper
//! keeps a reference to: a training wrapper writes the weights it trained back here, an
//! inference wrapper of the same model picks them up.
//!
//! A model may be wrapped before it is traced ([`HostModel::untraced`]: PopTorch traces on
//! the first call, with that call's micro-batch shapes); the wrapper then takes the trace
//! ([`super::PoplarExecutor::attach_trace`]) before it compiles.

use crate::ir::{Graph, InputKind};
use crate::tensor::{Param, Tensor};
use crate::trace::Trace;
use crate::{Error, Result};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

/// Named state in order, with an index by name: a 1,000-layer model has some 10,000
/// parameters, each looked up by name as a wrapper attaches its trace (a scan of the list
/// per name made that quadratic).
#[derive(Debug, Default)]
struct Named {
    list: Vec<(String, Param)>,
    /// Each name's position in `list` (its first, should a name come twice).
    index: HashMap<String, usize>,
}

impl Named {
    fn new(list: Vec<(String, Param)>) -> Named {
        let mut index = HashMap::with_capacity(list.len());
        for (i, (n, _)) in list.iter().enumerate() {
            index.entry(n.clone()).or_insert(i);
        }
        Named { list, index }
    }
    fn get(&self, name: &str) -> Option<&Param> {
        self.index.get(name).map(|&i| &self.list[i].1)
    }
    fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }
    /// Adds `name` at the end (a caller checked it is new).
    fn push(&mut self, name: &str, value: Param) {
        self.index.insert(name.to_string(), self.list.len());
        self.list.push((name.to_string(), value));
    }
    /// Replaces `name`'s value, or adds it at the end.
    fn upsert(&mut self, name: &str, value: Param) {
        match self.index.get(name) {
            Some(&i) => self.list[i].1 = value,
            None => self.push(name, value),
        }
    }
}

#[derive(Debug, Default)]
struct Weights {
    params: Named,
    buffers: Named,
    /// A training wrapper holds this model (until `destroy`).
    wrapped: bool,
    /// Bumped each time a training wrapper copies trained weights to the host.
    trained_version: u64,
    /// Tied state from the traces: (second name, first name); see `Trace::tied`. A read or
    /// write under the second name is one of the first.
    tied: Vec<(String, String)>,
}

impl Weights {
    fn add_tied(&mut self, trace: &Trace) {
        for t in &trace.tied {
            if !self.tied.contains(t) {
                self.tied.push(t.clone());
            }
        }
    }
    /// The name state `name` is held under (itself unless it is tied to another).
    fn canonical<'a>(&'a self, name: &'a str) -> &'a str {
        self.tied.iter().find(|(a, _)| a == name).map(|(_, c)| c.as_str()).unwrap_or(name)
    }
}

/// A model's parameters and buffers must stay the ones it had while `forward` runs: PopTorch
/// compares them after tracing (`_impl.py: errorOnBufferOrParameterAddressChanges`). This is
/// its error for the parameter (or `buffer`) `name` (`local` in its module) replaced during
/// `forward` (a submodule assigned anew, `this.fc1 = new nn.Linear(3, 3)`, or a parameter or
/// buffer registered again), with PopTorch's cause and this API's fix: PopTorch's
/// `self.y.copy_(src)` for a buffer is `updateBuffer`; a parameter has no such write in
/// `forward`, so it is given new values outside.
pub fn state_reassigned(buffer: bool, name: &str, local: &str) -> Error {
    let (what, fix) = if buffer {
        (
            "Buffer",
            format!(
                "Consider using this.updateBuffer({local:?}, src) to copy data from a source tensor, where src is the \
                 name of the source tensor."
            ),
        )
    } else {
        (
            "Parameter",
            "Create submodules and parameters in the constructor and only use them in forward; to give a parameter \
             new values, load them outside forward (module.loadStateDict(...), then model.copyWeightsToDevice() for \
             a wrapped model)."
                .to_string(),
        )
    };
    Error::poptorch(format!(
        "{what} {name} is reassigned within the model when calling the forward method. This is not supported."
    ))
    .with_fix(fix)
}

/// PopTorch's error for the parameter (or `buffer`) `name` that `forward` removed from the
/// model (`delete this.fc2`), with the fix.
pub fn state_removed(buffer: bool, name: &str) -> Error {
    let what = if buffer { "Buffer" } else { "Parameter" };
    Error::poptorch(format!("{what} {name} is removed from the model when calling the forward method.")).with_fix(
        "Keep every submodule, parameter and buffer the model has while forward runs: don't delete them there.",
    )
}

/// A traced model and its host weights (see the module docs). Cheap to clone; clones share
/// the weights.
#[derive(Clone, Debug)]
pub struct HostModel {
    graph: Rc<Graph>,
    /// False for a model known only by its weights so far ([`HostModel::untraced`]).
    traced: bool,
    weights: Rc<RefCell<Weights>>,
}

/// A [`HostModel`]'s weights, held without keeping them alive (a registry of the models a
/// caller has wrapped uses it to find the shared weights of a model wrapped again).
#[derive(Clone, Debug)]
pub struct WeakHostModel(Weak<RefCell<Weights>>);

impl WeakHostModel {
    /// The model (untraced, sharing the weights) if some wrapper still holds its weights.
    pub fn upgrade(&self) -> Option<HostModel> {
        self.0.upgrade().map(|weights| HostModel { graph: Rc::new(Graph::new()), traced: false, weights })
    }
}

impl HostModel {
    /// A model from a trace: its graph and the initial values of its parameters and buffers.
    pub fn new(trace: &Trace) -> HostModel {
        HostModel {
            graph: Rc::new(trace.graph.clone()),
            traced: true,
            weights: Rc::new(RefCell::new(Weights {
                params: Named::new(trace.params.clone()),
                buffers: Named::new(trace.buffers.clone()),
                tied: trace.tied.clone(),
                ..Weights::default()
            })),
        }
    }

    /// A model known by its parameters and buffers (full names, host values) before it is
    /// traced: wrappers can be made, and check what needs only the weights (wrapping twice,
    /// the optimizer's parameter groups); a wrapper attaches the trace before it compiles.
    pub fn untraced(params: Vec<(String, Param)>, buffers: Vec<(String, Param)>) -> HostModel {
        HostModel {
            graph: Rc::new(Graph::new()),
            traced: false,
            weights: Rc::new(RefCell::new(Weights {
                params: Named::new(params),
                buffers: Named::new(buffers),
                ..Weights::default()
            })),
        }
    }

    /// Whether the model has a traced graph.
    pub fn is_traced(&self) -> bool {
        self.traced
    }

    /// A handle on the weights that does not keep them alive.
    pub fn downgrade(&self) -> WeakHostModel {
        WeakHostModel(Rc::downgrade(&self.weights))
    }

    /// Whether `other` shares these weights (a wrapper or trace of the same model).
    pub fn same_weights(&self, other: &HostModel) -> bool {
        Rc::ptr_eq(&self.weights, &other.weights)
    }

    /// This model traced: `trace`'s graph over these weights, for a caller whose trace read
    /// the model's current host values (a JS module traced as it is). Parameters and buffers
    /// the weights do not have yet are added with their traced values; the others keep the
    /// host values.
    pub fn adopt_trace(&self, trace: &Trace) -> HostModel {
        {
            let mut w = self.weights.borrow_mut();
            w.add_tied(trace);
            for (name, t) in &trace.params {
                if !w.params.contains(name) {
                    w.params.push(name, t.clone());
                }
            }
            for (name, t) in &trace.buffers {
                if !w.buffers.contains(name) {
                    w.buffers.push(name, t.clone());
                }
            }
        }
        HostModel { graph: Rc::new(trace.graph.clone()), traced: true, weights: self.weights.clone() }
    }

    /// Another trace of the same model (e.g. an inference-mode trace next to the training
    /// one) sharing these weights. Parameters and buffers it reads must already exist.
    pub fn with_trace(&self, trace: &Trace) -> Result<HostModel> {
        self.weights.borrow_mut().add_tied(trace);
        let w = self.weights.borrow();
        for (kind, list, have) in [("parameter", &trace.params, &w.params), ("buffer", &trace.buffers, &w.buffers)] {
            for (name, _) in list {
                if !have.contains(name) {
                    return Err(Error::poptorch(format!(
                        "the trace reads {kind} '{name}', which this model does not have"
                    )));
                }
            }
        }
        Ok(HostModel { graph: Rc::new(trace.graph.clone()), traced: true, weights: self.weights.clone() })
    }

    /// The traced forward graph (one micro-batch).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// [`Self::graph`], shared: for a holder that outlives this borrow (the JS API's
    /// `traced`), without copying the graph.
    pub fn shared_graph(&self) -> Rc<Graph> {
        self.graph.clone()
    }

    /// Parameters, by full name, in trace order (not materialised: see [`Param::value`]).
    pub fn parameters(&self) -> Vec<(String, Param)> {
        self.weights.borrow().params.list.clone()
    }

    /// Buffers, by full name, in trace order.
    pub fn buffers(&self) -> Vec<(String, Param)> {
        self.weights.borrow().buffers.list.clone()
    }

    /// One parameter's host value (a tied parameter's by either name).
    pub fn parameter(&self, name: &str) -> Option<Param> {
        let w = self.weights.borrow();
        let name = w.canonical(name);
        w.params.get(name).cloned()
    }

    /// One buffer's host value (a tied buffer's by either name).
    pub fn buffer(&self, name: &str) -> Option<Param> {
        let w = self.weights.borrow();
        let name = w.canonical(name);
        w.buffers.get(name).cloned()
    }

    /// Tied state: (second name, the first name it is tied to), from the traces.
    pub fn tied(&self) -> Vec<(String, String)> {
        self.weights.borrow().tied.clone()
    }

    /// Sets a parameter's host value (same dtype; a replica-grouped weight takes one slice
    /// per group). The device sees it after `copy_weights_to_device`.
    pub fn set_parameter(&self, name: &str, value: Tensor) -> Result<()> {
        self.set(true, name, value)
    }

    /// Sets a buffer's host value (same dtype and shape).
    pub fn set_buffer(&self, name: &str, value: Tensor) -> Result<()> {
        self.set(false, name, value)
    }

    fn set(&self, param: bool, name: &str, value: Tensor) -> Result<()> {
        let mut w = self.weights.borrow_mut();
        let name = w.canonical(name).to_string();
        let name = name.as_str();
        let list = if param { &mut w.params } else { &mut w.buffers };
        let what = if param { "parameter" } else { "buffer" };
        let old = list.get(name).ok_or_else(|| Error::poptorch(format!("the model has no {what} '{name}'")))?;
        if old.dtype() != value.dtype() || (!param && old.shape() != value.shape()) {
            return Err(Error::poptorch(format!(
                "{what} '{name}' is {}{:?}; a {}{:?} cannot replace it",
                old.dtype(),
                old.shape(),
                value.dtype(),
                value.shape()
            )));
        }
        list.upsert(name, Param::from_tensor(value));
        Ok(())
    }

    /// Replaces (or adds) parameter `name`'s host value whatever its dtype and shape: for a
    /// caller whose module is the source of the values (the JS API) before a wrapper
    /// compiles, when the module may have been cast (`half()`) or changed since it was wrapped.
    pub fn reload_parameter(&self, name: &str, value: Param) {
        let mut w = self.weights.borrow_mut();
        let name = w.canonical(name).to_string();
        w.params.upsert(&name, value);
    }

    /// [`HostModel::reload_parameter`] for a buffer.
    pub fn reload_buffer(&self, name: &str, value: Param) {
        let mut w = self.weights.borrow_mut();
        let name = w.canonical(name).to_string();
        w.buffers.upsert(&name, value);
    }

    /// Whether a training wrapper currently holds this model.
    pub fn is_wrapped(&self) -> bool {
        self.weights.borrow().wrapped
    }

    pub(crate) fn set_wrapped(&self, on: bool) {
        self.weights.borrow_mut().wrapped = on;
    }

    pub(crate) fn trained_version(&self) -> u64 {
        self.weights.borrow().trained_version
    }

    /// Writes device weights back (`copyWeightsToHost`); `trained` bumps the version an
    /// inference wrapper of the same model watches.
    pub(crate) fn write_back(
        &self,
        params: Vec<(String, Rc<Tensor>)>,
        buffers: Vec<(String, Rc<Tensor>)>,
        trained: bool,
    ) {
        let mut w = self.weights.borrow_mut();
        for (n, t) in params {
            w.params.upsert(&n, Param::from_tensor(t));
        }
        for (n, t) in buffers {
            w.buffers.upsert(&n, Param::from_tensor(t));
        }
        if trained {
            w.trained_version += 1;
        }
    }

    /// Names of the model inputs the graph takes, in order.
    pub fn input_names(&self) -> Vec<String> {
        self.graph.placeholders(InputKind::Input).into_iter().map(|(n, _)| n.to_string()).collect()
    }
}
