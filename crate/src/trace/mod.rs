//! The dispatch tracer: user model code runs once on tracing tensors ([`Var`]) and every op
//! it calls is recorded as a node of a [`Graph`], the way PopTorch records a model.
//!
//! Each node carries its module scope (`convs.3.convs.1.conv.lin_l`), the active Block and
//! IPU with the annotation that made it active ([`BlockKind`]: a `Block` scope, a
//! `BeginBlock`, or none after a scope ended), and the `file:line` of the call (Rust: `#[track_caller]`; JS: the caller's stack).
//! Parameters, buffers and model inputs become named placeholders; any other tensor the
//! model captures is frozen as a constant named `_tensor_constant<i>` and listed in
//! [`Trace::constants`]. Buffers may be updated in place ([`Tracer::buffer_update`]);
//! registering a different tensor under an existing parameter or buffer name is an error,
//! as PopTorch rejects reassigning them.
//!
//! Invertible regions ([`Tracer::invertible`]) trace a forward and its inverse as
//! sub-graphs; values captured from outside a region become extra region inputs.

pub mod check;
pub mod nn;
pub mod slice;

use crate::ir::{
    verify::verify, BinaryKind, BlockKind, Conv2dGeom, Graph, InputKind, NodeMeta, Op, Pool2dGeom, ReduceKind,
    Reduction, Region, TensorType, UnaryKind, ValueId,
};
use crate::tensor::{DType, Param, Tensor};
use crate::{Error, Result};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::panic::Location;
use std::rc::Rc;

/// A graph under construction (the model, or the body of a region).
struct Frame {
    graph: Graph,
    /// Values of the enclosing frame lifted into this one as inputs: (outer value, inner value).
    captures: Vec<(ValueId, ValueId)>,
    /// `captures` by outer value (a lift per op looks it up).
    captured: HashMap<ValueId, ValueId>,
}

impl Frame {
    fn new(graph: Graph) -> Frame {
        Frame { graph, captures: Vec::new(), captured: HashMap::new() }
    }

    fn capture(&mut self, outer: ValueId, inner: ValueId) {
        self.captures.push((outer, inner));
        self.captured.insert(outer, inner);
    }
}

impl State {
    /// The module at `scope` has just been entered: the Block of a BeginBlock on it starts.
    fn entered(&mut self) {
        if let Some((id, ipu)) = self.block_hooks.get(&self.scope).cloned() {
            self.block = Some((id, ipu));
            self.block_kind = Some(BlockKind::Begin);
            self.block_module = Some(self.scope.clone());
        }
    }
}

#[derive(Default)]
struct State {
    frames: Vec<Frame>,
    /// The module scope path, dotted (`convs.3.convs.1`; empty at the top level): kept
    /// joined, as every node records it.
    scope: String,
    /// The active Block (id, IPU) and the annotation that made it so (`Ended`: a Block
    /// scope ended and none started since).
    block: Option<(String, Option<usize>)>,
    block_kind: Option<BlockKind>,
    /// The path of the module whose call began the active Block (a BeginBlock on a module,
    /// [`Tracer::begin_block_at`]); none when another annotation made it active.
    block_module: Option<String>,
    /// BeginBlocks on modules: (module path, block id, IPU), applied when the module's
    /// scope is entered ([`Tracer::begin_block_at`]).
    block_hooks: HashMap<String, (String, Option<usize>)>,
    /// Placeholders of the model graph (frame 0) by full name, with their initial tensors.
    params: Vec<(String, Param)>,
    buffers: Vec<(String, Param)>,
    named: HashMap<String, (InputKind, ValueId, *const ())>,
    /// Full name of each parameter by the identity of its tensor (tied weights).
    by_identity: HashMap<*const (), (InputKind, String)>,
    /// (second name, first name) of tied state; see [`Trace::tied`].
    tied: Vec<(String, String)>,
    constants: Vec<(String, Rc<Tensor>)>,
    region_names: HashMap<String, usize>,
    /// Source location override (the JS API sets the caller's `file:line`).
    source_override: Option<String>,
    /// The last Rust caller's `file:line`, by the address of its [`Location`] (the same
    /// call site records many ops: formatted once).
    last_caller: Option<(usize, String)>,
    /// Training trace: Dropout records a random mask (inference traces make it identity).
    training: bool,
    /// Nodes recorded so far, in every frame, and their limit ([`check::MAX_NODES`]).
    nodes: usize,
    max_nodes: usize,
    /// The first error of a call that cannot return one ([`Tracer::begin_block`]), reported
    /// by [`Tracer::finish`].
    deferred: Option<Error>,
}

/// `poptorch.MatMulSerializationMode`: which dimension of `a[m, n] @ b[n, p]` a serialised
/// product ([`Var::serialized_matmul`]) splits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MatMulSerializationMode {
    /// The rows of `a` (`m`).
    InputChannels,
    /// The reduced dimension (`n`): the pieces' products are added.
    ReducingDim,
    /// The columns of `b` (`p`).
    OutputChannels,
    /// An ordinary product.
    Disabled,
}

/// Records ops into a graph. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Tracer {
    st: Rc<RefCell<State>>,
}

/// A tracing tensor: a value of the graph being recorded, with its static type.
#[derive(Clone)]
pub struct Var {
    tr: Tracer,
    frame: usize,
    id: ValueId,
    ty: TensorType,
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Var({} : {})", self.id, self.ty)
    }
}

/// The result of tracing a model: its graph and the initial values of its state.
#[derive(Debug)]
pub struct Trace {
    pub graph: Graph,
    /// Parameters read by the graph, by full name, with their initial values (made when
    /// first needed: a trace reads only their shapes and dtypes).
    pub params: Vec<(String, Param)>,
    /// Buffers read or updated by the graph, by full name, with their initial values.
    pub buffers: Vec<(String, Param)>,
    /// Captured tensors frozen into the graph as constants (PopTorch warns about these).
    pub constants: Vec<(String, Rc<Tensor>)>,
    /// Tied parameters: (name, the name it is tied to). A parameter read under a second
    /// name (`decoder.weight` set to `embed.weight`, or another module's parameter
    /// used directly) is the same tensor: one placeholder, under the name it was first read
    /// by, so one gradient, one optimizer state and one home in the plan (PyTorch's
    /// `named_parameters` lists a shared parameter once, too).
    pub tied: Vec<(String, String)>,
}

impl Trace {
    /// Model inputs in order, as (name, type).
    pub fn inputs(&self) -> Vec<(String, TensorType)> {
        self.graph
            .placeholders(InputKind::Input)
            .into_iter()
            .map(|(n, v)| (n.to_string(), self.graph.ty(v).clone()))
            .collect()
    }

    /// Checks that `shapes` match the traced inputs: the trace is static, like a compiled
    /// PopTorch model. The error names the input and both types.
    pub fn check_inputs(&self, given: &[TensorType]) -> Result<()> {
        let want = self.inputs();
        if want.len() != given.len() {
            return Err(Error::trace(format!(
                "the traced model takes {} inputs but {} were given",
                want.len(),
                given.len()
            )));
        }
        for ((name, w), g) in want.iter().zip(given) {
            if w != g {
                return Err(Error::trace(format!(
                    "input '{name}' was traced as {w} but got {g}: shapes are static, trace the model again for new shapes"
                )));
            }
        }
        Ok(())
    }
}

impl Default for Tracer {
    fn default() -> Self {
        Tracer::new()
    }
}

impl Tracer {
    /// A tracer with an empty model graph.
    pub fn new() -> Tracer {
        let st = State { frames: vec![Frame::new(Graph::new())], max_nodes: check::MAX_NODES, ..State::default() };
        Tracer { st: Rc::new(RefCell::new(st)) }
    }

    fn depth(&self) -> usize {
        self.st.borrow().frames.len() - 1
    }

    fn meta(&self, caller: &Location<'_>) -> NodeMeta {
        let mut st = self.st.borrow_mut();
        let source = match &st.source_override {
            Some(s) => s.clone(),
            None => {
                let key = caller as *const Location<'_> as usize;
                match &st.last_caller {
                    Some((k, s)) if *k == key => s.clone(),
                    _ => {
                        let file = caller.file().rsplit('/').next().unwrap_or(caller.file());
                        let s = format!("{file}:{}", caller.line());
                        st.last_caller = Some((key, s.clone()));
                        s
                    }
                }
            }
        };
        NodeMeta {
            scope: st.scope.clone(),
            block: st.block.as_ref().map(|b| b.0.clone()),
            ipu: st.block.as_ref().and_then(|b| b.1),
            block_kind: st.block_kind,
            block_module: st.block_module.clone(),
            source: Some(source),
            ..NodeMeta::default()
        }
    }

    /// Whether modules trace their training behaviour (dropout).
    pub fn training(&self) -> bool {
        self.st.borrow().training
    }

    /// Switches between a training and an inference trace (PyTorch `model.train()`).
    pub fn set_training(&self, on: bool) {
        self.st.borrow_mut().training = on;
    }

    /// Sets the source location recorded for the following ops (the JS API passes the
    /// caller's `file:line`); `None` goes back to Rust's caller locations.
    pub fn set_source(&self, source: Option<String>) {
        self.st.borrow_mut().source_override = source;
    }

    /// Brings `v` into the current frame, lifting it through enclosing region frames.
    fn lift(&self, v: &Var) -> Result<ValueId> {
        if !Rc::ptr_eq(&v.tr.st, &self.st) {
            return Err(Error::trace("a tensor from another trace was used"));
        }
        let top = self.depth();
        if v.frame > top {
            return Err(Error::trace(format!(
                "{} was defined inside a region that has ended and cannot be used outside it",
                v.id
            )));
        }
        let mut id = v.id;
        let mut st = self.st.borrow_mut();
        for f in v.frame + 1..=top {
            let frame = &mut st.frames[f];
            if let Some(&inner) = frame.captured.get(&id) {
                id = inner;
                continue;
            }
            let name = format!("capture{}", frame.captures.len());
            let ty = v.ty.clone();
            let inner = add_placeholder(&mut frame.graph, &name, &ty)?;
            frame.capture(id, inner);
            id = inner;
        }
        Ok(id)
    }

    /// Counts one more node, or fails at [`check::MAX_NODES`] (a model looping forever, or
    /// one far too big to plan, stops with an error instead of exhausting memory).
    fn count_node(&self) -> Result<()> {
        let mut st = self.st.borrow_mut();
        if st.nodes >= st.max_nodes {
            return Err(Error::trace(format!(
                "the trace has reached {} nodes, the limit: does forward loop without end?",
                st.max_nodes
            )));
        }
        st.nodes += 1;
        drop(st);
        crate::progress::tick();
        Ok(())
    }

    /// Records `op` on `inputs` in the current frame. Every result must fit the limits of
    /// one tensor ([`check::MAX_TENSOR_BYTES`]), so that later stages (planner, executor)
    /// can size it without overflow.
    pub fn record(&self, op: Op, inputs: &[&Var], caller: &Location<'_>) -> Result<Vec<Var>> {
        let ids = inputs.iter().map(|v| self.lift(v)).collect::<Result<Vec<_>>>()?;
        let meta = self.meta(caller);
        let frame = self.depth();
        self.count_node()?;
        let mut st = self.st.borrow_mut();
        let g = &mut st.frames[frame].graph;
        // Shape inference runs once, in Graph::add; the size check sees its result before
        // the node is appended.
        let outs = g.add_checked(op, ids, meta, |op, meta, out_types| {
            for t in out_types {
                if crate::tensor::alloc::check_usize_shape("", &t.shape, t.dtype).is_err() {
                    let what = format!("{}: its result", crate::ir::describe_site(op, meta));
                    crate::tensor::alloc::check_usize_shape(&what, &t.shape, t.dtype)?;
                }
            }
            Ok(())
        })?;
        Ok(outs.into_iter().map(|id| Var { tr: self.clone(), frame, id, ty: g.ty(id).clone() }).collect())
    }

    fn record1(&self, op: Op, inputs: &[&Var], caller: &Location<'_>) -> Result<Var> {
        Ok(self.record(op, inputs, caller)?.remove(0))
    }

    /// Runs `f` on the graph holding `v` and the index of the node that made it.
    fn with_producer(&self, v: &Var, f: impl FnOnce(&mut Graph, usize) -> Result<()>) -> Result<()> {
        if !Rc::ptr_eq(&v.tr.st, &self.st) {
            return Err(Error::trace("a tensor from another trace was used"));
        }
        let mut st = self.st.borrow_mut();
        if v.frame >= st.frames.len() {
            return Err(Error::trace(format!(
                "{} was defined inside a region that has ended and cannot be used outside it",
                v.id
            )));
        }
        let g = &mut st.frames[v.frame].graph;
        let node = g.values[v.id.0 as usize].node;
        f(g, node)
    }

    /// A model input of the given type.
    pub fn input(&self, name: &str, shape: &[usize], dtype: DType) -> Result<Var> {
        check::name("a model input's name", name)?;
        crate::tensor::alloc::check_usize_shape(&format!("model input '{name}'"), shape, dtype)?;
        if self.depth() != 0 {
            return Err(Error::trace(format!("model input '{name}' declared inside a region")));
        }
        let ty = TensorType { shape: shape.to_vec(), dtype };
        if self.st.borrow().frames[0].graph.placeholders(InputKind::Input).iter().any(|(n, _)| *n == name) {
            return Err(Error::trace(format!("model input '{name}' is declared twice")));
        }
        self.count_node()?;
        let mut st = self.st.borrow_mut();
        let id = add_placeholder(&mut st.frames[0].graph, name, &ty)?;
        Ok(Var { tr: self.clone(), frame: 0, id, ty })
    }

    fn state_var(&self, kind: InputKind, local: &str, value: Param) -> Result<Var> {
        let what = if kind == InputKind::Parameter { "parameter" } else { "buffer" };
        check::name(&format!("a {what}'s name"), local)?;
        let full = self.full_name(local);
        let existing = self.st.borrow().named.get(&full).copied();
        let id = match existing {
            Some((k, id, ptr)) => {
                if k != kind || ptr != value.id() {
                    return Err(Error::trace(format!(
                        "{what} '{full}' was reassigned during the trace: PopTorch does not allow replacing a \
                         parameter or buffer; update a buffer in place instead"
                    )));
                }
                id
            }
            None if kind == InputKind::Parameter
                && self.st.borrow().by_identity.get(&value.id()).is_some_and(|(k, _)| *k == kind) =>
            {
                // The same parameter under a second name: tied to the first. (Buffers are
                // not: two buffers may start from one shared initial tensor.)
                let mut st = self.st.borrow_mut();
                let first = st.by_identity[&value.id()].1.clone();
                let id = st.named[&first].1;
                st.named.insert(full.clone(), (kind, id, value.id()));
                st.tied.push((full, first));
                id
            }
            None => {
                self.count_node()?;
                let mut st = self.st.borrow_mut();
                if kind == InputKind::Parameter {
                    st.by_identity.insert(value.id(), (kind, full.clone()));
                }
                let meta = NodeMeta { scope: st.scope.clone(), ..NodeMeta::default() };
                let op = Op::Placeholder { kind, name: full.clone() };
                let ty = TensorType { shape: value.shape().to_vec(), dtype: value.dtype() };
                let id = st.frames[0].graph.add_source(op, ty, meta)?;
                st.named.insert(full.clone(), (kind, id, value.id()));
                let list = if kind == InputKind::Parameter { &mut st.params } else { &mut st.buffers };
                list.push((full, value.clone()));
                id
            }
        };
        let ty = TensorType { shape: value.shape().to_vec(), dtype: value.dtype() };
        let v = Var { tr: self.clone(), frame: 0, id, ty };
        // Use inside a region lifts it in as a capture.
        if self.depth() > 0 {
            let id = self.lift(&v)?;
            return Ok(Var { frame: self.depth(), id, ..v });
        }
        Ok(v)
    }

    /// The parameter `local` of the current module scope. Using the same tensor under the
    /// same name again (shared weights) reads the same placeholder.
    pub fn param(&self, local: &str, value: impl Into<Param>) -> Result<Var> {
        self.state_var(InputKind::Parameter, local, value.into())
    }

    /// The buffer `local` of the current module scope (persists across calls).
    pub fn buffer(&self, local: &str, value: impl Into<Param>) -> Result<Var> {
        self.state_var(InputKind::Buffer, local, value.into())
    }

    /// Records an in-place update of buffer `local` (PyTorch `buf.copy_(value)`).
    #[track_caller]
    pub fn buffer_update(&self, local: &str, value: &Var) -> Result<()> {
        let full = self.full_name(local);
        let known = self.st.borrow().named.get(&full).map(|e| e.0);
        match known {
            Some(InputKind::Buffer) => {}
            Some(_) => {
                return Err(Error::trace(format!("'{full}' is a parameter, not a buffer: it cannot be updated")))
            }
            None => return Err(Error::trace(format!("buffer '{full}' is updated before it is read or registered"))),
        }
        if self.depth() != 0 {
            return Err(Error::trace(format!("buffer '{full}' is updated inside a region")));
        }
        self.record(Op::BufferUpdate { name: full }, &[value], Location::caller())?;
        Ok(())
    }

    /// Freezes a captured tensor into the graph as a constant (not trainable).
    #[track_caller]
    pub fn constant(&self, value: Tensor) -> Result<Var> {
        self.count_node()?;
        let value = Rc::new(value);
        let name = {
            let mut st = self.st.borrow_mut();
            let name = format!("_tensor_constant{}", st.constants.len());
            st.constants.push((name.clone(), value.clone()));
            name
        };
        let ty = TensorType { shape: value.shape().to_vec(), dtype: value.dtype() };
        let meta = self.meta(Location::caller());
        let frame = self.depth();
        let id = self.st.borrow_mut().frames[frame].graph.add_source(Op::Constant { value, name }, ty.clone(), meta)?;
        Ok(Var { tr: self.clone(), frame, id, ty })
    }

    /// A tensor filled with `value`. An int32 fill that is not a finite number (NaN, ±inf)
    /// is recorded as the int32 the fill makes of it (the tensor's own conversion), so the
    /// graph holds the number the op computes, one any Python form writes back.
    #[track_caller]
    pub fn full(&self, shape: &[usize], dtype: DType, value: f64) -> Result<Var> {
        let value = match Tensor::full(&[], dtype, value) {
            Tensor::I32(a) if !value.is_finite() => f64::from(a.iter().next().copied().unwrap_or(0)),
            _ => value,
        };
        self.record1(Op::Full { shape: shape.to_vec(), dtype, value }, &[], Location::caller())
    }

    /// A fresh dropout keep-mask (true with probability 1-p), drawn on every run.
    #[track_caller]
    pub fn random_mask(&self, shape: &[usize], p: f32) -> Result<Var> {
        if !(0.0..1.0).contains(&p) {
            return Err(Error::trace(format!("dropout probability must be in [0, 1), got {p}")));
        }
        self.record1(Op::RandomMask { shape: shape.to_vec(), p }, &[], Location::caller())
    }

    fn full_name(&self, local: &str) -> String {
        let st = self.st.borrow();
        if st.scope.is_empty() {
            local.to_string()
        } else {
            format!("{}.{local}", st.scope)
        }
    }

    /// Runs `f` inside the module scope `name` (nested scopes join with dots).
    pub fn scope<T>(&self, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        check::name("a module's name", name)?;
        let outer = {
            let mut st = self.st.borrow_mut();
            let outer = st.scope.len();
            if outer > 0 {
                st.scope.push('.');
            }
            st.scope.push_str(name);
            st.entered();
            outer
        };
        let r = f();
        self.st.borrow_mut().scope.truncate(outer);
        r
    }

    /// Replaces the scope path (e.g. `"encoder.layers.0"`), returning the previous one, for
    /// callers that track module paths themselves (the JS API); restore it with
    /// [`Tracer::restore_scope`].
    pub fn set_scope(&self, path: &str) -> String {
        std::mem::replace(&mut self.st.borrow_mut().scope, path.to_string())
    }

    /// [`Tracer::set_scope`] for a call of the module at `path` (the JS API's module traps):
    /// as [`Tracer::scope`], a BeginBlock on that module ([`Tracer::begin_block_at`]) starts
    /// its Block.
    pub fn enter_module(&self, path: &str) -> String {
        let mut st = self.st.borrow_mut();
        let saved = std::mem::replace(&mut st.scope, path.to_string());
        st.entered();
        saved
    }

    /// Restores a scope path saved by [`Tracer::set_scope`].
    pub fn restore_scope(&self, saved: String) {
        self.st.borrow_mut().scope = saved;
    }

    /// The current scope path.
    pub fn current_scope(&self) -> String {
        self.st.borrow().scope.clone()
    }

    /// Runs `f` inside Block `id` placed on `ipu` (PopTorch `with poptorch.Block(id, ipu)`).
    /// As in PopTorch, when the scope ends no block is active: not the block that was
    /// active before it (PopTorch's `Block.__exit__` calls `end_ipu_block`, which clears the
    /// active IPU rather than restoring it), so an op recorded afterwards without a new
    /// block is marked [`BlockKind::Ended`] and the planner rejects it.
    pub fn block<T>(&self, id: &str, ipu: Option<usize>, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.enter_block(id, ipu)?;
        let r = f();
        self.exit_block();
        r
    }

    /// The start of [`Tracer::block`]'s scope, for a host whose scopes are not closures
    /// (Python's `with poptorch.Block(...)`: `__enter__`); [`Tracer::exit_block`] ends it.
    pub fn enter_block(&self, id: &str, ipu: Option<usize>) -> Result<()> {
        check_block(id, ipu)?;
        self.set_block(Some((id.to_string(), ipu)), BlockKind::Scoped);
        Ok(())
    }

    /// The end of [`Tracer::block`]'s scope: no block is active afterwards.
    pub fn exit_block(&self) {
        self.set_block(None, BlockKind::Ended);
    }

    fn set_block(&self, block: Option<(String, Option<usize>)>, kind: BlockKind) {
        let mut st = self.st.borrow_mut();
        st.block = block;
        st.block_kind = Some(kind);
        st.block_module = None;
    }

    /// Starts Block `id` for every op recorded from now on, until the next block starts
    /// (PopTorch `BeginBlock` and `Block.start`). An id or IPU the checks reject makes
    /// [`Tracer::finish`] fail (as PopTorch reports Block errors when it compiles);
    /// [`Tracer::try_begin_block`] reports it at once.
    pub fn begin_block(&self, id: &str, ipu: Option<usize>) {
        if let Err(e) = self.try_begin_block(id, ipu) {
            self.st.borrow_mut().deferred.get_or_insert(e);
        }
    }

    /// [`Tracer::begin_block`], failing at once for an id or IPU the checks reject.
    pub fn try_begin_block(&self, id: &str, ipu: Option<usize>) -> Result<()> {
        check_block(id, ipu)?;
        self.set_block(Some((id.to_string(), ipu)), BlockKind::Begin);
        Ok(())
    }

    /// `poptorch.BeginBlock(module, id, ipu)`: Block `id` starts each time the module at
    /// `module_path` (a scope path such as `convs.3`) is entered, and stays in effect after
    /// it, until the next block starts. The model's own `forward` needs no change.
    ///
    /// Each node records the path (`meta.block_module`) while the Block it began is active.
    pub fn begin_block_at(&self, module_path: &str, id: &str, ipu: Option<usize>) -> Result<()> {
        check::name("a module's path", module_path)?;
        check_block(id, ipu)?;
        let mut st = self.st.borrow_mut();
        if st.block_hooks.contains_key(module_path) {
            // PopTorch: "module has already been assigned to a block."
            return Err(Error::trace(format!("module '{module_path}' has already been assigned to a block")));
        }
        st.block_hooks.insert(module_path.to_string(), (id.to_string(), ipu));
        Ok(())
    }

    /// [`Tracer::begin_block_at`], an error reported by [`Tracer::finish`] (as
    /// [`Tracer::begin_block`] reports one), for a host that registers marks as it walks
    /// the model.
    pub fn begin_block_at_deferred(&self, module_path: &str, id: &str, ipu: Option<usize>) {
        if let Err(e) = self.begin_block_at(module_path, id, ipu) {
            self.st.borrow_mut().deferred.get_or_insert(e);
        }
    }

    fn push_frame(&self, inputs: &[(&str, &TensorType)]) -> Result<Vec<Var>> {
        let mut g = Graph::new();
        let mut ids = Vec::new();
        for (name, ty) in inputs {
            ids.push(add_placeholder(&mut g, name, ty)?);
        }
        let mut st = self.st.borrow_mut();
        st.frames.push(Frame::new(g));
        let frame = st.frames.len() - 1;
        drop(st);
        Ok(ids
            .into_iter()
            .zip(inputs)
            .map(|(id, (_, ty))| Var { tr: self.clone(), frame, id, ty: (*ty).clone() })
            .collect())
    }

    fn pop_frame(&self) -> Frame {
        self.st.borrow_mut().frames.pop().expect("a region frame")
    }

    /// Records an invertible region (GroupAddRev): `forward(x, others) -> y` with
    /// `inverse(y, others) -> x`. Autograd stores no inputs for it; its backward rebuilds
    /// `x` from `y` with the inverse and re-runs the forward locally.
    #[track_caller]
    pub fn invertible(
        &self,
        name: &str,
        x: &Var,
        others: &[&Var],
        forward: impl FnOnce(&Var, &[Var]) -> Result<Var>,
        inverse: impl FnOnce(&Var, &[Var]) -> Result<Var>,
    ) -> Result<Var> {
        let caller = Location::caller();
        check::name("a region's name", name)?;
        let region_name = self.unique_region_name(name);
        let mut in_tys: Vec<(String, TensorType)> = vec![("x".into(), x.ty.clone())];
        for (i, o) in others.iter().enumerate() {
            in_tys.push((format!("arg{i}"), o.ty.clone()));
        }
        let named: Vec<(&str, &TensorType)> = in_tys.iter().map(|(n, t)| (n.as_str(), t)).collect();

        // Forward body.
        let vars = self.push_frame(&named)?;
        let y = forward(&vars[0], &vars[1..]).and_then(|y| self.end_value(&y));
        let fwd = self.pop_frame();
        let y = y?;
        if y.1 != x.ty {
            return Err(Error::trace(format!(
                "invertible region '{region_name}' maps {} to {}: its output must have its input's type",
                x.ty, y.1
            )));
        }
        let mut fwd_graph = fwd.graph;
        fwd_graph.outputs = vec![y.0];

        // Inverse body, with the forward's captures pre-lifted in the same order.
        let mut inv_named = named.clone();
        inv_named[0].0 = "y";
        let vars = self.push_frame(&inv_named)?;
        {
            let mut st = self.st.borrow_mut();
            let frame = st.frames.last_mut().unwrap();
            for (i, (outer, _)) in fwd.captures.iter().enumerate() {
                let ty = fwd_graph.ty(fwd.captures[i].1).clone();
                let inner = add_placeholder(&mut frame.graph, &format!("capture{i}"), &ty)?;
                frame.capture(*outer, inner);
            }
        }
        let xr = inverse(&vars[0], &vars[1..]).and_then(|x| self.end_value(&x));
        let inv = self.pop_frame();
        let xr = xr?;
        if xr.1 != x.ty {
            return Err(Error::trace(format!(
                "the inverse of region '{region_name}' returns {} instead of {}",
                xr.1, x.ty
            )));
        }
        let mut inv_graph = inv.graph;
        inv_graph.outputs = vec![xr.0];
        // Captures first seen by the inverse become (unused) forward inputs too.
        for (i, (_, inner)) in inv.captures.iter().enumerate().skip(fwd.captures.len()) {
            let ty = inv_graph.ty(*inner).clone();
            add_placeholder(&mut fwd_graph, &format!("capture{i}"), &ty)?;
        }
        verify(&fwd_graph)?;
        verify(&inv_graph)?;

        let region = Rc::new(Region { name: region_name, forward: fwd_graph, inverse: Some(inv_graph) });
        // The call: (x, others…, captures…) in the enclosing frame.
        let depth = self.depth();
        let mut args: Vec<Var> = vec![x.clone()];
        args.extend(others.iter().map(|v| (*v).clone()));
        for (outer, _) in &inv.captures {
            let ty = self.st.borrow().frames[depth].graph.ty(*outer).clone();
            args.push(Var { tr: self.clone(), frame: depth, id: *outer, ty });
        }
        let refs: Vec<&Var> = args.iter().collect();
        self.record1(Op::Call { region }, &refs, caller)
    }

    /// Checks a region's result is a value of the region's own frame (lifting otherwise).
    fn end_value(&self, v: &Var) -> Result<(ValueId, TensorType)> {
        let id = self.lift(v)?;
        Ok((id, v.ty.clone()))
    }

    fn unique_region_name(&self, name: &str) -> String {
        let scope = self.current_scope();
        let base = if scope.is_empty() { name.to_string() } else { format!("{scope}.{name}") };
        let mut st = self.st.borrow_mut();
        let n = st.region_names.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 {
            base
        } else {
            format!("{base}#{n}")
        }
    }

    /// Ends the trace with `outputs` as the graph's results; the graph is verified.
    pub fn finish(self, outputs: &[&Var]) -> Result<Trace> {
        if let Some(e) = self.st.borrow_mut().deferred.take() {
            return Err(e);
        }
        if self.depth() != 0 {
            return Err(Error::trace("the trace ended inside a region"));
        }
        let ids = outputs.iter().map(|v| self.lift(v)).collect::<Result<Vec<_>>>()?;
        let mut st = self.st.borrow_mut();
        let mut graph = std::mem::take(&mut st.frames[0].graph);
        graph.outputs = ids;
        verify(&graph)?;
        Ok(Trace {
            graph,
            params: std::mem::take(&mut st.params),
            buffers: std::mem::take(&mut st.buffers),
            constants: std::mem::take(&mut st.constants),
            tied: std::mem::take(&mut st.tied),
        })
    }
}

/// A Block id prints on one line; an IPU index is at most [`check::MAX_IPU`].
fn check_block(id: &str, ipu: Option<usize>) -> Result<()> {
    check::name("a Block's id", id)?;
    if let Some(i) = ipu.filter(|&i| i as u64 > check::MAX_IPU) {
        return Err(Error::trace(format!("Block '{id}': ipu must be at most {}, got {i}", check::MAX_IPU)));
    }
    Ok(())
}

fn add_placeholder(g: &mut Graph, name: &str, ty: &TensorType) -> Result<ValueId> {
    let op = Op::Placeholder { kind: InputKind::Input, name: name.to_string() };
    g.add_source(op, ty.clone(), NodeMeta::default())
}

macro_rules! unary {
    ($($name:ident => $kind:ident),* $(,)?) => {
        $(
            #[doc = concat!("Elementwise `", stringify!($name), "`.")]
            #[track_caller]
            pub fn $name(&self) -> Result<Var> {
                self.tr.record1(Op::Unary { kind: UnaryKind::$kind }, &[self], Location::caller())
            }
        )*
    };
}

macro_rules! binary {
    ($($name:ident => $kind:ident),* $(,)?) => {
        $(
            #[doc = concat!("Elementwise `", stringify!($name), "` with broadcasting.")]
            #[track_caller]
            pub fn $name(&self, other: &Var) -> Result<Var> {
                self.tr.record1(Op::Binary { kind: BinaryKind::$kind }, &[self, other], Location::caller())
            }
        )*
    };
}

/// `dim` of a tensor of rank `rank` (negative counts from the end), or an error naming `what`.
pub(crate) fn resolve_dim(dim: isize, rank: usize, what: &str) -> Result<usize> {
    let d = if dim < 0 { dim + rank as isize } else { dim };
    if d < 0 || d as usize >= rank.max(1) {
        return Err(Error::trace(format!("{what}: dim {dim} is out of range for a tensor of rank {rank}")));
    }
    Ok(d as usize)
}

impl Var {
    /// The value in its graph.
    pub fn id(&self) -> ValueId {
        self.id
    }
    /// Static shape.
    pub fn shape(&self) -> &[usize] {
        &self.ty.shape
    }
    /// Static dtype.
    pub fn dtype(&self) -> DType {
        self.ty.dtype
    }
    /// Static type.
    pub fn ty(&self) -> &TensorType {
        &self.ty
    }
    /// The tracer recording this value.
    pub fn tracer(&self) -> &Tracer {
        &self.tr
    }

    unary! { neg => Neg, exp => Exp, log => Log, sqrt => Sqrt, relu => Relu, gelu => Gelu, tanh => Tanh, sigmoid => Sigmoid }
    binary! { add => Add, sub => Sub, mul => Mul, div => Div, pow => Pow }

    /// `x * s` for a scalar `s` (recorded as a broadcast constant of x's dtype).
    #[track_caller]
    pub fn scale(&self, s: f64) -> Result<Var> {
        let c = self.tr.full(&[], self.dtype(), s)?;
        self.tr.record1(Op::Binary { kind: BinaryKind::Mul }, &[self, &c], Location::caller())
    }

    /// `cond ? self : other` (cond is bool).
    #[track_caller]
    pub fn where_(&self, cond: &Var, other: &Var) -> Result<Var> {
        self.tr.record1(Op::Where, &[cond, self, other], Location::caller())
    }

    /// `poptorch.serializedMatMul(self, other, mode, factor, keep_precision)`: the product
    /// `self @ other` (`a[…, m, n] @ b[…, n, p]`) computed as `factor` smaller products one
    /// after another, split on the dimension `mode` names (rows `m`, the reduced `n`, or the
    /// columns `p`), which `factor` must divide: the same result, with smaller partials and
    /// more steps. Split on `n`, the pieces are added up; with `keep_precision` and float16
    /// operands the additions are made in float32 (PopTorch's float partials), else in the
    /// operands' dtype. `Disabled` (or a factor of 1) is the plain product.
    #[track_caller]
    pub fn serialized_matmul(
        &self,
        other: &Var,
        mode: MatMulSerializationMode,
        factor: usize,
        keep_precision: bool,
    ) -> Result<Var> {
        if mode == MatMulSerializationMode::Disabled {
            return self.matmul(other);
        }
        let (ra, rb) = (self.shape().len(), other.shape().len());
        if ra < 2 || rb < 2 {
            return Err(Error::trace(format!(
                "serializedMatMul: both operands must be matrices (2 or more dimensions), got {} and {}",
                self.ty(),
                other.ty()
            )));
        }
        let (dim, what) = match mode {
            MatMulSerializationMode::InputChannels => {
                (self.shape()[ra - 2], "the input channels (rows of the left operand)")
            }
            MatMulSerializationMode::ReducingDim => (self.shape()[ra - 1], "the reducing dimension"),
            MatMulSerializationMode::OutputChannels => {
                (other.shape()[rb - 1], "the output channels (columns of the right operand)")
            }
            MatMulSerializationMode::Disabled => unreachable!("handled above"),
        };
        if factor == 0 || !dim.is_multiple_of(factor) {
            return Err(Error::trace(format!(
                "serializedMatMul: the factor ({factor}) must be a factor of the dimension serialised on, {what}, of size {dim}"
            )));
        }
        if factor == 1 {
            return self.matmul(other);
        }
        let sizes = vec![dim / factor; factor];
        match mode {
            MatMulSerializationMode::InputChannels => {
                let outs = self.split(&sizes, -2)?.iter().map(|a| a.matmul(other)).collect::<Result<Vec<_>>>()?;
                concat(&outs.iter().collect::<Vec<_>>(), -2)
            }
            MatMulSerializationMode::OutputChannels => {
                let outs = other.split(&sizes, -1)?.iter().map(|b| self.matmul(b)).collect::<Result<Vec<_>>>()?;
                concat(&outs.iter().collect::<Vec<_>>(), -1)
            }
            _ => {
                let (pa, pb) = (self.split(&sizes, -1)?, other.split(&sizes, -2)?);
                let widen = keep_precision && self.dtype() == DType::Float16;
                let mut sum: Option<Var> = None;
                for (a, b) in pa.iter().zip(&pb) {
                    let mut y = a.matmul(b)?;
                    if widen {
                        y = y.cast(DType::Float32)?;
                    }
                    sum = Some(match sum {
                        Some(s) => s.add(&y)?,
                        None => y,
                    });
                }
                let sum = sum.expect("factor >= 2");
                if widen {
                    sum.cast(DType::Float16)
                } else {
                    Ok(sum)
                }
            }
        }
    }

    /// torch.matmul.
    #[track_caller]
    pub fn matmul(&self, other: &Var) -> Result<Var> {
        self.tr.record1(Op::MatMul, &[self, other], Location::caller())
    }

    /// `x @ weight^T + bias`.
    #[track_caller]
    pub fn linear(&self, weight: &Var, bias: Option<&Var>) -> Result<Var> {
        let op = Op::Linear { has_bias: bias.is_some() };
        match bias {
            Some(b) => self.tr.record1(op, &[self, weight, b], Location::caller()),
            None => self.tr.record1(op, &[self, weight], Location::caller()),
        }
    }

    /// Sum over `dims` (empty = all).
    #[track_caller]
    pub fn sum(&self, dims: &[isize], keepdim: bool) -> Result<Var> {
        self.reduce(ReduceKind::Sum, dims, keepdim, Location::caller())
    }

    /// Mean over `dims` (empty = all).
    #[track_caller]
    pub fn mean(&self, dims: &[isize], keepdim: bool) -> Result<Var> {
        self.reduce(ReduceKind::Mean, dims, keepdim, Location::caller())
    }

    fn reduce(&self, kind: ReduceKind, dims: &[isize], keepdim: bool, at: &Location<'_>) -> Result<Var> {
        let rank = self.shape().len();
        let dims = dims.iter().map(|&d| resolve_dim(d, rank, "reduce")).collect::<Result<Vec<_>>>()?;
        if let Some((i, d)) = dims.iter().enumerate().find(|(i, d)| dims[..*i].contains(d)) {
            return Err(Error::trace(format!("reduce: dim {} is given twice (as the dims at {i} and before)", d)));
        }
        self.tr.record1(Op::Reduce { kind, dims, keepdim }, &[self], at)
    }

    /// Max values over `dim`.
    #[track_caller]
    pub fn max(&self, dim: isize, keepdim: bool) -> Result<Var> {
        let dim = resolve_dim(dim, self.shape().len(), "max")?;
        self.tr.record1(Op::Max { dim, keepdim }, &[self], Location::caller())
    }

    /// Index of the max over `dim` (int32).
    #[track_caller]
    pub fn argmax(&self, dim: isize, keepdim: bool) -> Result<Var> {
        let dim = resolve_dim(dim, self.shape().len(), "argmax")?;
        self.tr.record1(Op::ArgMax { dim, keepdim }, &[self], Location::caller())
    }

    /// Softmax over `dim`.
    #[track_caller]
    pub fn softmax(&self, dim: isize) -> Result<Var> {
        let dim = resolve_dim(dim, self.shape().len(), "softmax")?;
        self.tr.record1(Op::Softmax { dim }, &[self], Location::caller())
    }

    /// Log-softmax over `dim`.
    #[track_caller]
    pub fn log_softmax(&self, dim: isize) -> Result<Var> {
        let dim = resolve_dim(dim, self.shape().len(), "log_softmax")?;
        self.tr.record1(Op::LogSoftmax { dim }, &[self], Location::caller())
    }

    /// torch.nn.functional.conv2d on NCHW: `weight[O, C/groups, kh, kw]`, `bias[O]`.
    #[track_caller]
    pub fn conv2d(&self, weight: &Var, bias: Option<&Var>, geom: Conv2dGeom) -> Result<Var> {
        let op = Op::Conv2d { geom, has_bias: bias.is_some() };
        match bias {
            Some(b) => self.tr.record1(op, &[self, weight, b], Location::caller()),
            None => self.tr.record1(op, &[self, weight], Location::caller()),
        }
    }

    /// torch.nn.functional.max_pool2d on NCHW.
    #[track_caller]
    pub fn max_pool2d(&self, geom: Pool2dGeom) -> Result<Var> {
        self.tr.record1(Op::MaxPool2d { geom }, &[self], Location::caller())
    }

    /// torch.nn.functional.avg_pool2d on NCHW (no dilation).
    #[track_caller]
    pub fn avg_pool2d(&self, geom: Pool2dGeom, count_include_pad: bool) -> Result<Var> {
        self.tr.record1(Op::AvgPool2d { geom, count_include_pad }, &[self], Location::caller())
    }

    /// torch.nn.functional.adaptive_avg_pool2d on NCHW to `[oh, ow]`.
    #[track_caller]
    pub fn adaptive_avg_pool2d(&self, output: [usize; 2]) -> Result<Var> {
        self.tr.record1(Op::AdaptiveAvgPool2d { output }, &[self], Location::caller())
    }

    /// `after[i]` rows (i = 0) and columns (i = 1) of zeros appended to an NCHW tensor's
    /// spatial dims (`F.pad(x, (0, after[1], 0, after[0]))`): the uneven part of PyTorch's
    /// `padding='same'`, padded before the convolution as PyTorch pads it.
    #[track_caller]
    pub fn pad_after(&self, after: [usize; 2]) -> Result<Var> {
        let rank = self.shape().len();
        if rank < 2 {
            return Err(Error::trace(format!("pad_after: a tensor of rank {rank} has no spatial dims")));
        }
        let mut x = self.clone();
        for (i, &n) in after.iter().enumerate() {
            if n > 0 {
                let dim = rank - 2 + i;
                let mut shape = x.shape().to_vec();
                shape[dim] = n;
                let zeros =
                    self.tr.record1(Op::Full { shape, dtype: x.dtype(), value: 0.0 }, &[], Location::caller())?;
                x = concat(&[&x, &zeros], dim as isize)?;
            }
        }
        Ok(x)
    }

    /// torch.flatten: dims `start_dim..=end_dim` (negative from the end) merged into one, as
    /// a reshape; a scalar becomes `[1]`.
    #[track_caller]
    pub fn flatten(&self, start_dim: isize, end_dim: isize) -> Result<Var> {
        let rank = self.shape().len();
        if rank == 0 {
            return self.reshape(&[1]);
        }
        let (s, e) = (resolve_dim(start_dim, rank, "flatten")?, resolve_dim(end_dim, rank, "flatten")?);
        if s > e {
            return Err(Error::trace(format!(
                "flatten() has invalid args: start_dim ({start_dim}) cannot come after end_dim ({end_dim}) for {}",
                self.ty
            )));
        }
        let sh = self.shape();
        let mut shape: Vec<isize> = sh[..s].iter().map(|&d| d as isize).collect();
        shape.push(sh[s..=e].iter().product::<usize>() as isize);
        shape.extend(sh[e + 1..].iter().map(|&d| d as isize));
        self.reshape(&shape)
    }

    /// Training-mode batch norm over dim 1 with the batch's statistics: `(y, batch mean,
    /// unbiased batch variance)`; only `y` is differentiable.
    #[track_caller]
    pub fn batch_norm(&self, affine: Option<(&Var, &Var)>, eps: f32) -> Result<(Var, Var, Var)> {
        let op = Op::BatchNorm { eps, affine: affine.is_some() };
        let mut outs = match affine {
            Some((w, b)) => self.tr.record(op, &[self, w, b], Location::caller())?,
            None => self.tr.record(op, &[self], Location::caller())?,
        };
        let (var, mean, y) = (outs.pop().unwrap(), outs.pop().unwrap(), outs.pop().unwrap());
        Ok((y, mean, var))
    }

    /// Layer norm over the last `normalized_ndim` dims, with optional affine weight/bias.
    #[track_caller]
    pub fn layer_norm(&self, normalized_ndim: usize, affine: Option<(&Var, &Var)>, eps: f32) -> Result<Var> {
        let op = Op::LayerNorm { normalized_ndim, eps, affine: affine.is_some() };
        match affine {
            Some((w, b)) => self.tr.record1(op, &[self, w, b], Location::caller()),
            None => self.tr.record1(op, &[self], Location::caller()),
        }
    }

    /// Dropout with an explicit keep mask (bool, broadcast to x).
    #[track_caller]
    pub fn dropout_with_mask(&self, mask: &Var, p: f32) -> Result<Var> {
        self.tr.record1(Op::Dropout { p }, &[self, mask], Location::caller())
    }

    /// Cross-entropy of logits `[N, C]` against int32 targets `[N]`, over rows kept by `mask`.
    #[track_caller]
    pub fn cross_entropy(
        &self,
        target: &Var,
        mask: Option<&Var>,
        reduction: Reduction,
        class_weight: Option<Vec<f32>>,
    ) -> Result<Var> {
        let op = Op::CrossEntropy {
            reduction,
            class_weight,
            has_mask: mask.is_some(),
            ignore_index: None,
            label_smoothing: 0.0,
        };
        match mask {
            Some(m) => self.tr.record1(op, &[self, target, m], Location::caller()),
            None => self.tr.record1(op, &[self, target], Location::caller()),
        }
    }

    /// [`Var::cross_entropy`] with PyTorch's `ignore_index` (rows whose target equals it
    /// count for nothing, also in the mean's denominator) and `label_smoothing` in [0, 1].
    #[track_caller]
    pub fn cross_entropy_with(
        &self,
        target: &Var,
        mask: Option<&Var>,
        reduction: Reduction,
        class_weight: Option<Vec<f32>>,
        ignore_index: Option<i32>,
        label_smoothing: f32,
    ) -> Result<Var> {
        let has_mask = mask.is_some();
        let op = Op::CrossEntropy { reduction, class_weight, has_mask, ignore_index, label_smoothing };
        match mask {
            Some(m) => self.tr.record1(op, &[self, target, m], Location::caller()),
            None => self.tr.record1(op, &[self, target], Location::caller()),
        }
    }

    /// torch.nn.functional.one_hot of int32 class indices (int32 result, one more dim).
    #[track_caller]
    pub fn one_hot(&self, num_classes: usize) -> Result<Var> {
        self.tr.record1(Op::OneHot { num_classes }, &[self], Location::caller())
    }

    /// `poptorch.recomputationCheckpoint(x)`: with recomputation on (pipelined training),
    /// `x` is stashed for the backward pass instead of recomputed, and the recomputation of
    /// the ops after it starts from it. Returns `x` (the value is unchanged).
    pub fn recomputation_checkpoint(&self) -> Result<Var> {
        self.tr.with_producer(self, |g, node| {
            g.nodes[node].meta.checkpoint = true;
            Ok(())
        })?;
        Ok(self.clone())
    }

    /// `poptorch.set_available_memory(x, proportion)`: the share of tile memory, in (0, 1],
    /// the op that made `x` may use for temporaries (the planner trades its temporaries
    /// against its time). As PopTorch, the op is the producer of `x` if it is a matmul,
    /// convolution, gather or scatter, else the first such op one or two producers up (a
    /// reshape or an add after it); with none, nothing is set. Returns `x`.
    pub fn set_available_memory(&self, proportion: f64) -> Result<Var> {
        if !(proportion > 0.0 && proportion <= 1.0) {
            return Err(Error::trace(format!(
                "set_available_memory: the available memory proportion must be in (0, 1], got {proportion}"
            )));
        }
        self.tr.with_producer(self, |g, node| {
            let takes = |op: &Op| {
                matches!(
                    op,
                    Op::MatMul
                        | Op::MatMulTN
                        | Op::Linear { .. }
                        | Op::LinearAdd { .. }
                        | Op::Conv2d { .. }
                        | Op::IndexSelect { .. }
                        | Op::Gather { .. }
                        | Op::ScatterAdd { .. }
                        | Op::ScatterMean { .. }
                        | Op::IndexAdd { .. }
                )
            };
            // The producer, then its producers, then theirs (PopTorch looks two levels up).
            let mut level = vec![node];
            for _ in 0..3 {
                if let Some(&n) = level.iter().find(|&&n| takes(&g.nodes[n].op)) {
                    g.nodes[n].meta.available_memory = Some(crate::ir::Proportion(proportion));
                    return Ok(());
                }
                level =
                    level.iter().flat_map(|&n| g.nodes[n].inputs.iter().map(|v| g.values[v.0 as usize].node)).collect();
            }
            Ok(())
        })?;
        Ok(self.clone())
    }

    /// Marks a loss (PopTorch `identity_loss`).
    #[track_caller]
    pub fn identity_loss(&self, reduction: Reduction) -> Result<Var> {
        self.tr.record1(Op::IdentityLoss { reduction }, &[self], Location::caller())
    }

    /// Reshape; one `-1` is inferred.
    #[track_caller]
    pub fn reshape(&self, shape: &[isize]) -> Result<Var> {
        let bad = || Error::trace(format!("cannot reshape {} to {shape:?}", self.ty));
        if shape.iter().any(|&d| d < -1) {
            return Err(Error::trace(format!(
                "cannot reshape {} to {shape:?}: a size must be whole and not negative, or -1 (inferred)",
                self.ty
            )));
        }
        // Products in u128: a caller's sizes may overflow usize.
        let numel: u128 = self.shape().iter().map(|&d| d as u128).product();
        let known =
            shape.iter().filter(|&&d| d >= 0).try_fold(1u128, |acc, &d| acc.checked_mul(d as u128)).ok_or_else(bad)?;
        let holes = shape.iter().filter(|&&d| d < 0).count();
        let resolved: Vec<usize> = match holes {
            0 if known == numel => shape.iter().map(|&d| d as usize).collect(),
            1 if known > 0 && numel.is_multiple_of(known) => {
                shape.iter().map(|&d| if d < 0 { (numel / known) as usize } else { d as usize }).collect()
            }
            _ => return Err(bad()),
        };
        self.tr.record1(Op::Reshape { shape: resolved }, &[self], Location::caller())
    }

    /// Permute dims.
    #[track_caller]
    pub fn permute(&self, dims: &[usize]) -> Result<Var> {
        self.tr.record1(Op::Permute { dims: dims.to_vec() }, &[self], Location::caller())
    }

    /// Swap two dims.
    #[track_caller]
    pub fn transpose(&self, a: isize, b: isize) -> Result<Var> {
        let rank = self.shape().len();
        let (a, b) = (resolve_dim(a, rank, "transpose")?, resolve_dim(b, rank, "transpose")?);
        let mut dims: Vec<usize> = (0..rank).collect();
        if rank > 0 {
            dims.swap(a, b); // a scalar's dim 0 (or -1) is itself, as in PyTorch
        }
        self.tr.record1(Op::Permute { dims }, &[self], Location::caller())
    }

    /// Split into pieces of `sizes` along `dim`.
    #[track_caller]
    pub fn split(&self, sizes: &[usize], dim: isize) -> Result<Vec<Var>> {
        let dim = resolve_dim(dim, self.shape().len(), "split")?;
        self.tr.record(Op::Split { sizes: sizes.to_vec(), dim }, &[self], Location::caller())
    }

    /// torch.chunk: pieces of size ceil(n / chunks) (maybe fewer than `chunks`).
    #[track_caller]
    pub fn chunk(&self, chunks: usize, dim: isize) -> Result<Vec<Var>> {
        let d = resolve_dim(dim, self.shape().len(), "chunk")?;
        let n = self.shape()[d];
        if chunks == 0 {
            return Err(Error::trace("chunk: the number of chunks must be positive"));
        }
        let size = n.div_ceil(chunks).max(1);
        let mut sizes = Vec::new();
        let mut left = n;
        while left > 0 {
            sizes.push(size.min(left));
            left -= size.min(left);
        }
        self.tr.record(Op::Split { sizes, dim: d }, &[self], Location::caller())
    }

    /// Slice `start..end` by `step` along `dim`.
    #[track_caller]
    pub fn slice(&self, dim: isize, start: usize, end: usize, step: usize) -> Result<Var> {
        let dim = resolve_dim(dim, self.shape().len(), "slice")?;
        self.tr.record1(Op::Slice { dim, start, end, step }, &[self], Location::caller())
    }

    /// Rows (entries along `dim`) picked by an int32 index.
    #[track_caller]
    pub fn index_select(&self, dim: isize, index: &Var) -> Result<Var> {
        let dim = resolve_dim(dim, self.shape().len(), "index_select")?;
        self.tr.record1(Op::IndexSelect { dim }, &[self, index], Location::caller())
    }

    /// torch.gather.
    #[track_caller]
    pub fn gather(&self, dim: isize, index: &Var) -> Result<Var> {
        let dim = resolve_dim(dim, self.shape().len(), "gather")?;
        self.tr.record1(Op::Gather { dim }, &[self, index], Location::caller())
    }

    /// Converts the dtype.
    #[track_caller]
    pub fn cast(&self, dtype: DType) -> Result<Var> {
        self.tr.record1(Op::Cast { dtype }, &[self], Location::caller())
    }

    /// `out[index[e]] += self[e]`, `dim_size` rows.
    #[track_caller]
    pub fn scatter_add(&self, index: &Var, dim_size: usize) -> Result<Var> {
        self.tr.record1(Op::ScatterAdd { dim_size }, &[self, index], Location::caller())
    }

    /// Mean of `self[e]` per target row `index[e]`.
    #[track_caller]
    pub fn scatter_mean(&self, index: &Var, dim_size: usize) -> Result<Var> {
        self.tr.record1(Op::ScatterMean { dim_size }, &[self, index], Location::caller())
    }
}

/// Concatenates along `dim`.
#[track_caller]
pub fn concat(parts: &[&Var], dim: isize) -> Result<Var> {
    let first = parts.first().ok_or_else(|| Error::trace("concat of no tensors"))?;
    let dim = resolve_dim(dim, first.shape().len(), "concat")?;
    // The joined size, checked before shape inference adds it up in usize.
    let total = parts.iter().map(|p| p.shape().get(dim).copied().unwrap_or(0) as u64).sum::<u64>();
    let mut shape: Vec<u64> = first.shape().iter().map(|&d| d as u64).collect();
    if let Some(d) = shape.get_mut(dim) {
        *d = total;
    }
    crate::tensor::alloc::check_shape("concat: its result", &shape, first.dtype())?;
    first.tr.record1(Op::Concat { dim }, parts, Location::caller())
}

/// A CSR sparse matrix as three traced values (indptr, indices: int32; values: f32).
#[derive(Clone, Debug)]
pub struct SparseVar {
    pub indptr: Var,
    pub indices: Var,
    pub values: Var,
    pub n_rows: usize,
    pub n_cols: usize,
}

impl SparseVar {
    /// Declares a sparse model input named `name` (three inputs `name.indptr` …) of fixed
    /// size `n_rows × n_cols` with `nnz` stored entries.
    pub fn input(tr: &Tracer, name: &str, n_rows: usize, n_cols: usize, nnz: usize) -> Result<SparseVar> {
        Ok(SparseVar {
            indptr: tr.input(&format!("{name}.indptr"), &[n_rows + 1], DType::Int32)?,
            indices: tr.input(&format!("{name}.indices"), &[nnz], DType::Int32)?,
            values: tr.input(&format!("{name}.values"), &[nnz], DType::Float32)?,
            n_rows,
            n_cols,
        })
    }

    /// `self @ dense`.
    #[track_caller]
    pub fn matmul(&self, dense: &Var) -> Result<Var> {
        let op = Op::SpMM { n_rows: self.n_rows, n_cols: self.n_cols };
        self.indptr.tr.record1(op, &[&self.indptr, &self.indices, &self.values, dense], Location::caller())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::print::print_graph;

    #[test]
    fn records_scope_block_and_source() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2, 3], DType::Float32).unwrap();
        let w = Rc::new(Tensor::zeros(&[4, 3], DType::Float32));
        let y = tr
            .scope("fc", || tr.block("b0", Some(1), || x.linear(&tr.param("weight", &w)?, None)))
            .unwrap()
            .relu()
            .unwrap();
        let t = tr.finish(&[&y]).unwrap();
        let n = &t.graph.nodes[2];
        assert_eq!(n.op.name(), "linear");
        assert_eq!(n.meta.scope, "fc");
        assert_eq!(n.meta.block.as_deref(), Some("b0"));
        assert_eq!(n.meta.ipu, Some(1));
        assert!(n.meta.source.as_deref().unwrap().starts_with("mod.rs:"), "{:?}", n.meta.source);
        assert_eq!(t.params[0].0, "fc.weight");
        assert!(print_graph(&t.graph).contains("parameter \"fc.weight\""));
    }

    #[test]
    fn shape_mismatch_names_op_scope_source_and_shapes() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2, 3], DType::Float32).unwrap();
        let w = Rc::new(Tensor::zeros(&[4, 5], DType::Float32));
        let line = line!() + 1;
        let err = tr.scope("enc", || x.linear(&tr.param("weight", &w)?, None)).unwrap_err().to_string();
        assert!(err.contains("'linear'"), "{err}");
        assert!(err.contains("enc"), "{err}");
        assert!(err.contains(&format!("mod.rs:{line}")), "{err}");
        assert!(err.contains("[2,3]") && err.contains("[4,5]"), "{err}");
    }

    #[test]
    fn reassigned_parameter_is_rejected_and_shared_weights_are_one_input() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2, 3], DType::Float32).unwrap();
        let w = Rc::new(Tensor::zeros(&[3, 3], DType::Float32));
        let a = x.linear(&tr.param("w", &w).unwrap(), None).unwrap();
        let b = a.linear(&tr.param("w", &w).unwrap(), None).unwrap();
        let other = Rc::new(Tensor::zeros(&[3, 3], DType::Float32));
        let err = tr.param("w", &other).unwrap_err().to_string();
        assert!(err.contains("reassigned") && err.contains("'w'"), "{err}");
        let t = tr.finish(&[&b]).unwrap();
        assert_eq!(t.graph.placeholders(InputKind::Parameter).len(), 1);
    }

    #[test]
    fn captured_tensors_become_named_constants() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2], DType::Float32).unwrap();
        let c = tr.constant(Tensor::from_f32(&[2], vec![1.0, 2.0]).unwrap()).unwrap();
        let y = x.add(&c).unwrap();
        let t = tr.finish(&[&y]).unwrap();
        assert_eq!(t.constants.len(), 1);
        assert_eq!(t.graph.constants()[0].0, "_tensor_constant0");
    }

    #[test]
    fn invertible_region_lifts_captures_into_both_bodies() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2, 3], DType::Float32).unwrap();
        let w = Rc::new(Tensor::zeros(&[3, 3], DType::Float32));
        let y = tr
            .invertible(
                "rev",
                &x,
                &[],
                |x, _| x.add(&x.linear(&tr.param("w", &w)?, None)?.tanh()?),
                |y, _| y.sub(&y.scale(0.0)?),
            )
            .unwrap();
        let t = tr.finish(&[&y]).unwrap();
        let call = t.graph.nodes.iter().find(|n| n.op.name() == "call").unwrap();
        assert_eq!(call.inputs.len(), 2, "x and the captured weight");
        if let Op::Call { region } = &call.op {
            assert_eq!(region.forward.placeholders(InputKind::Input).len(), 2);
            assert_eq!(region.inverse.as_ref().unwrap().placeholders(InputKind::Input).len(), 2);
        }
    }

    #[test]
    fn names_sizes_and_ipus_from_callers_are_checked() {
        let tr = Tracer::new();
        let e = tr.input("x\n  %9 = forged()", &[2], DType::Float32).unwrap_err().to_string();
        assert!(e.contains("U+000A") && !e.contains('\n'), "{e}");
        let e = tr.input("x", &[1_000_000_000, 1_000_000_000], DType::Float32).unwrap_err().to_string();
        assert!(e.contains("model input 'x'") && e.contains("4000000000000000000 bytes"), "{e}");
        let x = tr.input("x", &[2, 3], DType::Float32).unwrap();
        let e = tr.block("b\r", Some(0), || x.relu()).unwrap_err().to_string();
        assert!(e.contains("Block's id"), "{e}");
        let e = tr.block("b", Some(4_294_967_295), || x.relu()).unwrap_err().to_string();
        assert!(e.contains("ipu must be at most 65535, got 4294967295"), "{e}");
        assert!(tr.try_begin_block("b", Some(70_000)).is_err());
        assert!(tr.block("b", Some(65_535), || x.relu()).is_ok());
        let w = Rc::new(Tensor::zeros(&[3], DType::Float32));
        assert!(tr.param("w\u{2028}", &w).unwrap_err().to_string().contains("U+2028"));
        assert!(tr.scope("fc\t", || x.relu()).is_err());
    }

    #[test]
    fn a_bad_begin_block_fails_the_trace_when_it_finishes() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2], DType::Float32).unwrap();
        tr.begin_block("ipu\n9", Some(0));
        let y = x.relu().unwrap();
        assert!(tr.finish(&[&y]).unwrap_err().to_string().contains("Block's id"));
    }

    /// The kind of block of each op, by op name (each name used once).
    fn kinds(g: &Graph) -> Vec<(&'static str, Option<&str>, Option<BlockKind>)> {
        g.nodes
            .iter()
            .filter(|n| !matches!(n.op, Op::Placeholder { .. }))
            .map(|n| (n.op.name(), n.meta.block.as_deref(), n.meta.block_kind))
            .collect()
    }

    #[test]
    fn blocks_record_which_annotation_placed_each_op_and_a_scope_restores_nothing() {
        // PopTorch: ops before any block have none (IPU 0); `with Block` ends with no active
        // block, even inside an enclosing Block or after a BeginBlock (end_ipu_block clears
        // the active IPU); a BeginBlock lasts until the next block starts.
        let tr = Tracer::new();
        let x = tr.input("x", &[2], DType::Float32).unwrap();
        let a = x.relu().unwrap();
        tr.begin_block("begin", Some(1));
        let b = a.exp().unwrap();
        let c = tr.block("outer", Some(2), || tr.block("inner", Some(3), || b.tanh())?.sigmoid()).unwrap();
        let d = c.neg().unwrap();
        tr.begin_block("again", Some(0));
        let e = d.gelu().unwrap();
        let g = tr.finish(&[&e]).unwrap().graph;
        use BlockKind::*;
        assert_eq!(
            kinds(&g),
            [
                ("relu", None, None),
                ("exp", Some("begin"), Some(Begin)),
                ("tanh", Some("inner"), Some(Scoped)),
                ("sigmoid", None, Some(Ended)),
                ("neg", None, Some(Ended)),
                ("gelu", Some("again"), Some(Begin)),
            ]
        );
    }

    #[test]
    fn enter_and_exit_block_place_ops_as_a_block_scope_does() {
        // Python's `with poptorch.Block(...)` (enter_block, exit_block) against the closure
        // form: the same blocks and kinds, op by op; a bad id is refused on entry.
        let record = |scoped: bool| {
            let tr = Tracer::new();
            let x = tr.input("x", &[2], DType::Float32).unwrap();
            let a = x.relu().unwrap();
            let b = if scoped {
                tr.block("b", Some(1), || a.exp()).unwrap()
            } else {
                tr.enter_block("b", Some(1)).unwrap();
                let b = a.exp().unwrap();
                tr.exit_block();
                b
            };
            let c = b.tanh().unwrap();
            let g = tr.finish(&[&c]).unwrap().graph;
            kinds(&g).into_iter().map(|(op, block, kind)| (op, block.map(str::to_string), kind)).collect::<Vec<_>>()
        };
        assert_eq!(record(false), record(true));
        use BlockKind::*;
        assert_eq!(record(false)[1..], [("exp", Some("b".to_string()), Some(Scoped)), ("tanh", None, Some(Ended))]);
        assert!(Tracer::new().enter_block("", None).is_err());
    }

    #[test]
    fn begin_block_on_a_module_starts_when_its_scope_is_entered_and_stays() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2], DType::Float32).unwrap();
        tr.begin_block_at("layers.1", "second", Some(1)).unwrap();
        let e = tr.begin_block_at("layers.1", "again", None).unwrap_err().to_string();
        assert!(e.contains("already been assigned to a block"), "{e}");
        let mut h = x;
        for (i, op) in ["relu", "exp", "tanh"].iter().enumerate() {
            h = tr
                .scope("layers", || {
                    tr.scope(&i.to_string(), || match *op {
                        "relu" => h.relu(),
                        "exp" => h.exp(),
                        _ => h.tanh(),
                    })
                })
                .unwrap();
        }
        let g = tr.finish(&[&h]).unwrap().graph;
        use BlockKind::*;
        assert_eq!(
            kinds(&g),
            [("relu", None, None), ("exp", Some("second"), Some(Begin)), ("tanh", Some("second"), Some(Begin))]
        );
        assert_eq!(g.nodes.iter().find(|n| n.op.name() == "exp").unwrap().meta.ipu, Some(1));
        // Each op records the module whose call began its Block, while that Block is active.
        let modules: Vec<_> = g.nodes.iter().skip(1).map(|n| n.meta.block_module.as_deref()).collect();
        assert_eq!(modules, [None, Some("layers.1"), Some("layers.1")]);
    }

    #[test]
    fn a_module_entered_by_path_starts_its_begin_block_and_another_annotation_clears_the_module() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2], DType::Float32).unwrap();
        tr.begin_block_at("l2", "second", None).unwrap();
        // A host's module trap (the JS API's) enters the path directly.
        let saved = tr.enter_module("l2");
        let a = x.relu().unwrap();
        tr.restore_scope(saved);
        // State reads by path (set_scope) start nothing.
        let saved = tr.set_scope("l2");
        tr.restore_scope(saved);
        let b = a.exp().unwrap();
        tr.begin_block("third", Some(2));
        let c = b.tanh().unwrap();
        let g = tr.finish(&[&c]).unwrap().graph;
        let got: Vec<_> =
            g.nodes.iter().skip(1).map(|n| (n.meta.block.as_deref(), n.meta.block_module.as_deref())).collect();
        assert_eq!(got, [(Some("second"), Some("l2")), (Some("second"), Some("l2")), (Some("third"), None)]);
    }

    #[test]
    fn results_over_the_tensor_limit_are_errors_not_overflows() {
        let tr = Tracer::new();
        let a = tr.input("a", &[65_536, 1], DType::Float32).unwrap();
        let b = tr.input("b", &[1, 65_536], DType::Float32).unwrap();
        let e = a.add(&b).unwrap_err().to_string();
        assert!(e.contains("'add'") && e.contains("f32[65536,65536] needs 17179869184 bytes"), "{e}");
        let e = tr.full(&[1 << 20, 1 << 20], DType::Float32, 0.0).unwrap_err().to_string();
        assert!(e.contains("needs 4398046511104 bytes"), "{e}");
        let parts: Vec<&Var> = std::iter::repeat_n(&a, 1100).collect();
        let e = concat(&parts, 0).unwrap_err().to_string();
        assert!(e.contains("concat") && e.contains("f32[72089600,1]"), "{e}");
        // Nothing over the limit was recorded: the graph still finishes.
        let y = a.relu().unwrap();
        assert_eq!(tr.finish(&[&y]).unwrap().graph.nodes.len(), 3);
    }

    #[test]
    fn reshape_sizes_are_whole_or_one_inferred() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2, 6], DType::Float32).unwrap();
        assert_eq!(x.reshape(&[3, -1]).unwrap().shape(), &[3, 4]);
        assert_eq!(x.reshape(&[12]).unwrap().shape(), &[12]);
        for bad in [&[-2, 6][..], &[-1, -1], &[5], &[0, -1], &[isize::MAX, isize::MAX, 4]] {
            assert!(x.reshape(bad).unwrap_err().to_string().contains("cannot reshape f32[2,6]"), "{bad:?}");
        }
        let e = x.sum(&[1, -1], false).unwrap_err().to_string();
        assert!(e.contains("dim 1 is given twice"), "{e}");
    }

    #[test]
    fn a_trace_stops_at_its_node_limit() {
        let tr = Tracer::new();
        tr.st.borrow_mut().max_nodes = 10;
        let mut h = tr.input("x", &[2], DType::Float32).unwrap();
        for _ in 0..9 {
            h = h.relu().unwrap();
        }
        let e = h.relu().unwrap_err().to_string();
        assert!(e.contains("reached 10 nodes"), "{e}");
        assert!(tr.constant(Tensor::scalar(1.0)).is_err());
    }

    /// The ops the JS API reaches, on random shapes and dtypes with random (often wrong)
    /// arguments: each either records a node or returns an error; none panics.
    #[test]
    fn random_ops_on_random_shapes_are_errors_never_panics() {
        use crate::rng::Rng;
        let shapes: [&[usize]; 12] =
            [&[], &[], &[1], &[3], &[2, 3], &[3, 2], &[2, 1, 3], &[1, 1], &[0], &[0, 3], &[2, 0, 1], &[4, 3, 2, 1]];
        let dtypes = [DType::Float32, DType::Float16, DType::Int32, DType::Bool];
        let dims = [-3isize, -2, -1, -1, 0, 0, 1, 2, 3];
        let reshapes: [&[isize]; 6] = [&[-1], &[3, -1], &[0, -1], &[-1, 0], &[1, 1, -1], &[]];
        let orders: [&[usize]; 5] = [&[], &[0], &[1, 0], &[2, 0, 1], &[0, 0]];
        let mut r = Rng::new(12);
        let (mut ok, mut failed) = (0, 0);
        for _ in 0..3000 {
            let tr = Tracer::new();
            tr.set_training(r.below(2) == 0);
            let mut pool: Vec<Var> = (0..1 + r.below(3))
                .map(|i| tr.input(&format!("x{i}"), shapes[r.below(12)], dtypes[r.below(4)]).unwrap())
                .collect();
            let w = Rc::new(Tensor::zeros(&[2, 3], DType::Float32));
            for _ in 0..20 {
                let (x, y) = (pool[r.below(pool.len())].clone(), pool[r.below(pool.len())].clone());
                let d = dims[r.below(dims.len())];
                let e = dims[r.below(dims.len())];
                let out = match r.below(22) {
                    0 => x.add(&y),
                    1 => x.matmul(&y),
                    2 => x.pow(&y),
                    3 => x.relu(),
                    4 => x.sum(&[d], r.below(2) == 0),
                    5 => x.sum(&[d, e], false),
                    6 => x.mean(&[], true),
                    7 => x.max(d, true),
                    8 => x.argmax(d, false),
                    9 => x.softmax(d),
                    10 => x.log_softmax(d),
                    11 => x.reshape(reshapes[r.below(6)]),
                    12 => x.transpose(d, e),
                    13 => x.permute(orders[r.below(5)]),
                    14 => x.cross_entropy(&y, None, Reduction::Mean, None),
                    15 => x.cross_entropy(&y, Some(&x), Reduction::Mean, None),
                    16 => x.cast(dtypes[r.below(4)]),
                    17 => concat(&[&x, &y], d),
                    18 => tr.param("w", &w).and_then(|w| x.linear(&w, None)),
                    19 => x.layer_norm(1, None, 1e-5),
                    20 => tr.random_mask(x.shape(), 0.5).and_then(|m| x.dropout_with_mask(&m, 0.5)),
                    _ => x.scale(2.0).and_then(|v| v.neg()).and_then(|v| v.sqrt()),
                };
                match out {
                    Ok(v) => {
                        ok += 1;
                        pool.push(v);
                    }
                    Err(_) => failed += 1,
                }
            }
            let last = pool.last().unwrap().clone();
            let _ = tr.finish(&[&last]);
        }
        assert!(ok > 5000 && failed > 5000, "{ok} recorded, {failed} rejected");
    }

    #[test]
    fn static_inputs_are_checked() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2, 4], DType::Float32).unwrap();
        let t = tr.finish(&[&x.relu().unwrap()]).unwrap();
        let err = t.check_inputs(&[TensorType { shape: vec![3, 4], dtype: DType::Float32 }]).unwrap_err().to_string();
        assert!(err.contains("'x'") && err.contains("f32[2,4]") && err.contains("f32[3,4]"), "{err}");
    }
}
