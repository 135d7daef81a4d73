//! Reverse-mode autograd as a graph-to-graph transform.
//!
//! [`training_graph`] takes a traced (inference) graph and a scalar loss and returns one
//! graph with the forward nodes, the backward nodes (each tagged [`Pass::Backward`] and
//! keeping its forward node's scope, Block and IPU, so the emulator can place it) and one
//! `OptimizerUpdate` per parameter. Backward ops are ordinary IR ops, so the executor
//! frees and counts their memory like any other.
//!
//! Invertible regions (`Call` of a region with an inverse) store nothing: their backward
//! is one `InvertibleBackward` node that rebuilds the region's input from its output and
//! re-runs the region's forward locally ([`vjp_graph`]). The rebuilt input is then used in
//! place of the forward value by every earlier backward rule, so a chain of regions keeps
//! only its last output alive — activation memory does not grow with depth.

use crate::ir::simplify::{inline, simplify};
use crate::ir::{
    BinaryKind, Graph, InputKind, NodeMeta, Op, OptimizerStep, Pass, ReduceKind, Reduction, Region, TensorType, ValueId,
};
use crate::tensor::DType;
use crate::{Error, Result};
use std::collections::HashMap;
use std::rc::Rc;

/// A training graph and where its optional gradient outputs are.
#[derive(Debug)]
pub struct TrainingGraph {
    pub graph: Graph,
    /// Parameters that received a gradient, in placeholder order.
    pub trained: Vec<String>,
    /// When requested, `(parameter, index into graph.outputs)` of each parameter gradient.
    pub grad_outputs: Vec<(String, usize)>,
    /// `(model input, index into graph.outputs)` of each gradient asked for in
    /// [`TrainOptions::input_grads`].
    pub input_grad_outputs: Vec<(String, usize)>,
    /// The differentiated loss.
    pub loss: ValueId,
}

/// The name of the extra graph input holding the loss scaling factor (a float32 scalar)
/// when [`TrainOptions::loss_scale_input`] is set.
pub const LOSS_SCALING_INPUT: &str = "loss_scaling";

/// What [`training_graph`] adds after the backward pass.
#[derive(Clone, Debug, Default)]
pub struct TrainOptions {
    /// One update node per trained parameter.
    pub optimizer: Option<OptimizerStep>,
    /// Also return each parameter's gradient as a graph output.
    pub return_grads: bool,
    /// Parameters to leave frozen (no gradient, no update).
    pub frozen: Vec<String>,
    /// Model inputs (float) whose gradients are returned as extra graph outputs.
    pub input_grads: Vec<String>,
    /// Seed the backward pass with the loss scaling factor, read from an extra float32
    /// scalar input named [`LOSS_SCALING_INPUT`] (appended after the model's inputs),
    /// instead of 1: every gradient comes out multiplied by it (PopART's loss scaling).
    pub loss_scale_input: bool,
}

/// The graph's loss by PopTorch's rules (`RemoveSurplusIdentityLosses`): loss ops are
/// `identity_loss` and `cross_entropy`; a loss whose value flows into another loss is part
/// of it, and exactly one independent loss must remain.
pub fn find_loss(fwd: &Graph) -> Result<ValueId> {
    let is_loss = |op: &Op| matches!(op, Op::IdentityLoss { .. } | Op::CrossEntropy { .. });
    // For every value: does it flow into a loss op (later in the graph)?
    let mut feeds_loss = vec![false; fwd.values.len()];
    for node in fwd.nodes.iter().rev() {
        let into = is_loss(&node.op) || node.outputs.iter().any(|o| feeds_loss[o.0 as usize]);
        if into {
            for v in &node.inputs {
                feeds_loss[v.0 as usize] = true;
            }
        }
    }
    let losses: Vec<&crate::ir::Node> = fwd.nodes.iter().filter(|n| is_loss(&n.op)).collect();
    if losses.is_empty() {
        return Err(Error::ir("Couldn't find a loss in graph!"));
    }
    let independent: Vec<ValueId> = losses.iter().map(|n| n.outputs[0]).filter(|o| !feeds_loss[o.0 as usize]).collect();
    match independent.as_slice() {
        [one] => Ok(*one),
        _ => Err(Error::ir(
            "Multiple independent losses found in graph. Graph must have one final loss. Wrap final graph loss in \
             poptorch.identity_loss.",
        )),
    }
}

/// Builds the training graph of `fwd` for the loss `fwd.outputs[loss_output]`.
pub fn training_graph(fwd: &Graph, loss_output: usize, opts: &TrainOptions) -> Result<TrainingGraph> {
    let loss = *fwd.outputs.get(loss_output).ok_or_else(|| {
        Error::ir(format!("the graph has {} outputs, no output {loss_output} to use as loss", fwd.outputs.len()))
    })?;
    training_graph_at(fwd, loss, opts)
}

/// Builds the training graph of `fwd` for the loss value `loss` (any value of the graph,
/// e.g. [`find_loss`]'s). The loss must be a float scalar, or the unreduced output of a
/// loss op with `reduction: none` (then every element is seeded with 1, as PopART seeds a
/// `none` loss).
pub fn training_graph_at(fwd: &Graph, loss: ValueId, opts: &TrainOptions) -> Result<TrainingGraph> {
    if loss.0 as usize >= fwd.values.len() {
        return Err(Error::ir(format!("the loss {loss} is not a value of the graph")));
    }
    let lt = fwd.ty(loss).clone();
    let unreduced = matches!(
        fwd.producer(loss).op,
        Op::IdentityLoss { reduction: Reduction::None } | Op::CrossEntropy { reduction: Reduction::None, .. }
    );
    if !lt.dtype.is_float() || (!lt.shape.is_empty() && !unreduced) {
        return Err(Error::ir(format!(
            "the loss must be a float scalar to differentiate, got {lt}: reduce it first (sum, mean or identity_loss)"
        )));
    }
    let params: Vec<(String, ValueId)> = fwd
        .placeholders(InputKind::Parameter)
        .into_iter()
        .filter(|(n, v)| !opts.frozen.iter().any(|f| f == n) && fwd.ty(*v).dtype.is_float())
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    let model_inputs = fwd.placeholders(InputKind::Input);
    let mut inputs: Vec<(String, ValueId)> = Vec::new();
    for name in &opts.input_grads {
        let Some(&(_, v)) = model_inputs.iter().find(|(n, _)| n == name) else {
            let known: Vec<&str> = model_inputs.iter().map(|(n, _)| *n).collect();
            return Err(Error::ir(format!(
                "input_grads names '{name}', which is not a model input (inputs: {known:?})"
            )));
        };
        if !fwd.ty(v).dtype.is_float() {
            return Err(Error::ir(format!("input '{name}' is {}: only float inputs have gradients", fwd.ty(v))));
        }
        inputs.push((name.clone(), v));
    }
    let mut g = fwd.clone();
    let meta = NodeMeta { pass: Pass::Backward, ..g.producer(loss).meta.clone() };
    let seed = if opts.loss_scale_input {
        if model_inputs.iter().any(|(n, _)| *n == LOSS_SCALING_INPUT) {
            return Err(Error::ir(format!(
                "a model input is named '{LOSS_SCALING_INPUT}', the name of the loss scaling input: rename it"
            )));
        }
        let op = Op::Placeholder { kind: InputKind::Input, name: LOSS_SCALING_INPUT.into() };
        let mut ls = g.add_source(op, TensorType { shape: vec![], dtype: DType::Float32 }, meta.clone())?;
        if lt.dtype != DType::Float32 {
            ls = g.add1(Op::Cast { dtype: lt.dtype }, vec![ls], meta.clone())?;
        }
        if lt.shape.is_empty() {
            ls
        } else {
            g.add1(Op::BroadcastTo { shape: lt.shape.clone() }, vec![ls], meta.clone())?
        }
    } else {
        g.add1(Op::Full { shape: lt.shape.clone(), dtype: lt.dtype, value: 1.0 }, vec![], meta.clone())?
    };
    let targets: Vec<ValueId> = params.iter().chain(&inputs).map(|p| p.1).collect();
    let grads = backprop(&mut g, fwd.nodes.len(), &[(loss, seed)], &targets)?;
    let mut trained = Vec::new();
    let mut grad_outputs = Vec::new();
    for (name, v) in &params {
        let Some(&gv) = grads.get(v) else { continue };
        trained.push(name.clone());
        if opts.return_grads {
            grad_outputs.push((name.clone(), g.outputs.len()));
            g.outputs.push(gv);
        }
        if let Some(step) = &opts.optimizer {
            let meta = NodeMeta { pass: Pass::Optimizer, ..g.producer(*v).meta.clone() };
            g.add(Op::OptimizerUpdate { param: name.clone(), step: step.clone() }, vec![gv], meta)?;
        }
    }
    let mut input_grad_outputs = Vec::new();
    for (name, v) in &inputs {
        let gv = match grads.get(v) {
            Some(&gv) => gv,
            None => {
                let t = fwd.ty(*v).clone();
                g.add1(Op::Full { shape: t.shape, dtype: t.dtype, value: 0.0 }, vec![], meta.clone())?
            }
        };
        input_grad_outputs.push((name.clone(), g.outputs.len()));
        g.outputs.push(gv);
    }
    if trained.is_empty() && inputs.is_empty() {
        return Err(Error::ir("the loss does not depend on any trainable parameter"));
    }
    Ok(TrainingGraph { graph: g, trained, grad_outputs, input_grad_outputs, loss })
}

/// The vector-Jacobian product of a region body `f(inputs…) -> y`: a graph taking
/// `(inputs…, g_y)` and returning the gradient of each input flagged in `needs_grad`
/// (zeros where the output does not depend on it).
pub fn vjp_graph(f: &Graph, needs_grad: &[bool]) -> Result<Graph> {
    let ins = f.placeholders(InputKind::Input);
    if ins.len() != needs_grad.len() || f.outputs.len() != 1 {
        return Err(Error::ir(format!(
            "vjp: the region takes {} inputs and returns {} outputs; expected {} grad flags and one output",
            ins.len(),
            f.outputs.len(),
            needs_grad.len()
        )));
    }
    let targets: Vec<ValueId> = ins.iter().zip(needs_grad).filter(|(_, &n)| n).map(|((_, v), _)| *v).collect();
    let mut g = f.clone();
    let y = f.outputs[0];
    let gy = g.add_source(
        Op::Placeholder { kind: InputKind::Input, name: "g_y".into() },
        f.ty(y).clone(),
        NodeMeta { pass: Pass::Backward, ..NodeMeta::default() },
    )?;
    let grads = backprop(&mut g, f.nodes.len(), &[(y, gy)], &targets)?;
    let mut outs = Vec::new();
    for &t in &targets {
        let gv = match grads.get(&t) {
            Some(&gv) => gv,
            None => {
                let ty = g.ty(t).clone();
                g.add1(
                    Op::Full { shape: ty.shape, dtype: ty.dtype, value: 0.0 },
                    vec![],
                    NodeMeta { pass: Pass::Backward, ..NodeMeta::default() },
                )?
            }
        };
        outs.push(gv);
    }
    g.outputs = outs;
    Ok(g)
}

/// The backward of an invertible region as one graph `(y, others…, g_y)` → `(x, g_i…)`:
/// the inverse rebuilds `x`, then the VJP of the forward runs on it. The recomputed
/// forward output is declared equal to `y`, so [`simplify`] lets the recompute reuse the
/// inverse's evaluations of the same functions (for additive coupling such as GroupAddRev
/// every group function is then evaluated once, not twice).
pub fn invertible_backward_graph(forward: &Graph, inverse: &Graph, needs_grad: &[bool]) -> Result<Graph> {
    let vjp = vjp_graph(forward, needs_grad)?;
    let ins = forward.placeholders(InputKind::Input);
    let meta = NodeMeta { pass: Pass::Backward, ..NodeMeta::default() };
    let mut g = Graph::new();
    g.nodes.reserve(inverse.nodes.len() + vjp.nodes.len() + 1);
    g.values.reserve(inverse.values.len() + vjp.values.len() + 1);
    let mut args = Vec::new();
    let names: Vec<String> =
        std::iter::once("y".to_string()).chain(ins[1..].iter().map(|(n, _)| n.to_string())).collect();
    for (name, (_, v)) in names.iter().zip(&ins) {
        let op = Op::Placeholder { kind: InputKind::Input, name: name.clone() };
        args.push(g.add_source(op, forward.ty(*v).clone(), meta.clone())?);
    }
    let gy_ty = forward.ty(forward.outputs[0]).clone();
    let gy = g.add_source(Op::Placeholder { kind: InputKind::Input, name: "g_y".into() }, gy_ty, meta.clone())?;
    let (x, _) = inline(&mut g, inverse, &args)?;
    let mut vargs = vec![x[0]];
    vargs.extend_from_slice(&args[1..]);
    vargs.push(gy);
    let (grads, map) = inline(&mut g, &vjp, &vargs)?;
    // In `vjp`, the forward's values keep their ids (it starts as a copy of `forward`).
    let y_recomputed = map[forward.outputs[0].0 as usize];
    g.outputs = std::iter::once(x[0]).chain(grads).collect();
    simplify(&g, &[(y_recomputed, args[0])])
}

/// Ops through which no gradient flows.
fn non_differentiable(op: &Op) -> bool {
    matches!(
        op,
        Op::Placeholder { .. }
            | Op::Constant { .. }
            | Op::Full { .. }
            | Op::RandomMask { .. }
            | Op::Positive
            | Op::ArgMax { .. }
            | Op::OneHot { .. }
            | Op::BufferUpdate { .. }
            | Op::OptimizerUpdate { .. }
    )
}

struct Builder<'a> {
    g: &'a mut Graph,
    meta: NodeMeta,
    /// Forward values rebuilt by invertible backward nodes, used in their place.
    recomputed: HashMap<ValueId, ValueId>,
    /// The backward graphs of the invertible regions differentiated so far, by the sizes of
    /// their graphs and which inputs need a gradient: a region equal to one of the last few
    /// of its bucket (a deep RevGNN's layers are one region each, all alike) shares its graph
    /// instead of differentiating and simplifying it again.
    vjps: HashMap<VjpKey, VjpBucket>,
}

/// A one-to-one renaming of scopes and of sources between two graphs alike but for them.
#[derive(Default)]
struct Renaming<'a> {
    scope: HashMap<&'a str, &'a str>,
    scope_back: HashMap<&'a str, &'a str>,
    source: HashMap<Option<&'a str>, Option<&'a str>>,
    source_back: HashMap<Option<&'a str>, Option<&'a str>>,
}

/// Records `x` ↦ `y` in a one-to-one map (`to`, and `back` its inverse); false if either
/// already has another partner.
fn pair<K: Copy + Eq + std::hash::Hash>(to: &mut HashMap<K, K>, back: &mut HashMap<K, K>, x: K, y: K) -> bool {
    match (to.get(&x), back.get(&y)) {
        (Some(&v), Some(&w)) => v == y && w == x,
        (None, None) => {
            to.insert(x, y);
            back.insert(y, x);
            true
        }
        _ => false,
    }
}

/// Whether two nodes' metadata agree but for scope and source (and the module path of a
/// BeginBlock, a scope too: only whether there is one is compared).
fn same_but_names(a: &NodeMeta, b: &NodeMeta) -> bool {
    // Every field is named, so that a new one is a compile error here until it is compared.
    let NodeMeta { scope: _, source: _, block, ipu, block_kind, block_module, pass, checkpoint, available_memory } = a;
    *block == b.block
        && *ipu == b.ipu
        && *block_kind == b.block_kind
        && block_module.is_some() == b.block_module.is_some()
        && *pass == b.pass
        && *checkpoint == b.checkpoint
        && *available_memory == b.available_memory
}

impl<'a> Renaming<'a> {
    /// Whether `b` is `a` with its nodes' scopes and sources renamed (one-to-one, together
    /// with what was compared before); records the renaming.
    fn alike(&mut self, a: &'a Graph, b: &'a Graph) -> bool {
        a.values == b.values
            && a.outputs == b.outputs
            && a.nodes.len() == b.nodes.len()
            && a.nodes.iter().zip(&b.nodes).all(|(m, n)| {
                m.op == n.op
                    && m.inputs == n.inputs
                    && m.outputs == n.outputs
                    && same_but_names(&m.meta, &n.meta)
                    && pair(&mut self.scope, &mut self.scope_back, m.meta.scope.as_str(), n.meta.scope.as_str())
                    && pair(&mut self.source, &mut self.source_back, m.meta.source.as_deref(), n.meta.source.as_deref())
            })
    }

    /// Whether every name keeps its own.
    fn is_identity(&self) -> bool {
        self.scope.iter().all(|(a, b)| a == b) && self.source.iter().all(|(a, b)| a == b)
    }

    /// `g` with its nodes' scopes and sources renamed, or None if one has no new name.
    fn apply(&self, g: &Graph) -> Option<Graph> {
        let mut out = g.clone();
        for n in &mut out.nodes {
            let scope = *self.scope.get(n.meta.scope.as_str())?;
            if scope != n.meta.scope {
                n.meta.scope = scope.to_string();
            }
            let source = *self.source.get(&n.meta.source.as_deref())?;
            if source != n.meta.source.as_deref() {
                n.meta.source = source.map(str::to_string);
            }
        }
        Some(out)
    }
}

/// [`Builder::vjps`]' bucket: the region's forward and inverse sizes and `needs_grad`.
type VjpKey = (usize, usize, usize, Vec<bool>);

/// The regions of a [`VjpKey`] differentiated so far, each with its backward graph.
type VjpBucket = Vec<(Rc<Region>, Rc<Graph>)>;

/// How many of a bucket's latest regions a region is compared with (bounds the comparisons
/// when many regions of the same sizes differ).
const VJP_CANDIDATES: usize = 4;

impl Builder<'_> {
    /// The backward graph of the invertible `region` ([`invertible_backward_graph`]). A region
    /// alike one differentiated before but for its ops' scopes and sources (the next layer of a
    /// RevGNN) gets that one's graph with them renamed, which is what differentiating it
    /// would give: the rule and `simplify` only copy a node's scope and source, and the
    /// renaming is one-to-one. An equal region shares the graph itself.
    fn invertible_vjp(&mut self, region: &Rc<Region>, inverse: &Graph, need: &[bool]) -> Result<Rc<Graph>> {
        let key = (region.forward.nodes.len(), region.forward.values.len(), inverse.nodes.len(), need.to_vec());
        let bucket = self.vjps.entry(key).or_default();
        for (r, vjp) in bucket.iter().rev().take(VJP_CANDIDATES) {
            if Rc::ptr_eq(r, region) {
                return Ok(vjp.clone());
            }
            let mut names = Renaming::default();
            let alike = names.alike(&r.forward, &region.forward)
                && matches!((&r.inverse, &region.inverse), (Some(a), Some(b)) if names.alike(a, b));
            if alike && names.is_identity() {
                return Ok(vjp.clone());
            }
            if let Some(g) = alike.then(|| names.apply(vjp)).flatten() {
                return Ok(Rc::new(g));
            }
        }
        let vjp = Rc::new(invertible_backward_graph(&region.forward, inverse, need)?);
        bucket.push((region.clone(), vjp.clone()));
        Ok(vjp)
    }
    fn add(&mut self, op: Op, inputs: Vec<ValueId>) -> Result<ValueId> {
        self.g.add1(op, inputs, self.meta.clone())
    }
    fn fwd(&self, v: ValueId) -> ValueId {
        *self.recomputed.get(&v).unwrap_or(&v)
    }
    fn ty(&self, v: ValueId) -> TensorType {
        self.g.ty(v).clone()
    }
    fn bin(&mut self, kind: BinaryKind, a: ValueId, b: ValueId) -> Result<ValueId> {
        self.add(Op::Binary { kind }, vec![a, b])
    }
    fn neg(&mut self, a: ValueId) -> Result<ValueId> {
        self.add(Op::Unary { kind: crate::ir::UnaryKind::Neg }, vec![a])
    }
    fn scalar(&mut self, v: f64, dtype: DType) -> Result<ValueId> {
        self.add(Op::Full { shape: vec![], dtype, value: v }, vec![])
    }
    /// Sums a broadcast gradient back to `shape`.
    fn sum_to(&mut self, g: ValueId, shape: &[usize]) -> Result<ValueId> {
        if self.g.ty(g).shape == shape {
            return Ok(g);
        }
        self.add(Op::SumTo { shape: shape.to_vec() }, vec![g])
    }
    fn reshape(&mut self, g: ValueId, shape: &[usize]) -> Result<ValueId> {
        if self.g.ty(g).shape == shape {
            return Ok(g);
        }
        self.add(Op::Reshape { shape: shape.to_vec() }, vec![g])
    }
    fn transpose_last2(&mut self, v: ValueId) -> Result<ValueId> {
        let r = self.g.ty(v).shape.len();
        let mut dims: Vec<usize> = (0..r).collect();
        dims.swap(r - 2, r - 1);
        self.add(Op::Permute { dims }, vec![v])
    }
}

/// Appends backward nodes to `g` (whose first `n_fwd` nodes are the forward) for the
/// given seeds `(value, its gradient)`, and returns the gradient of each reached target.
fn backprop(
    g: &mut Graph,
    n_fwd: usize,
    seeds: &[(ValueId, ValueId)],
    targets: &[ValueId],
) -> Result<HashMap<ValueId, ValueId>> {
    let nvals = g.values.len();
    // Forward: which values depend on a target (and are float).
    let mut depends = vec![false; nvals];
    for &t in targets {
        depends[t.0 as usize] = true;
    }
    for node in &g.nodes[..n_fwd] {
        if node.meta.pass != Pass::Forward {
            return Err(Error::ir(format!(
                "'{}' is already a backward or optimizer node: second-order gradients are not supported",
                node.op.name()
            )));
        }
        if non_differentiable(&node.op) {
            continue;
        }
        if node.inputs.iter().any(|v| depends[v.0 as usize]) {
            for &o in &node.outputs {
                depends[o.0 as usize] = g.values[o.0 as usize].ty.dtype.is_float();
            }
        }
    }
    let mut grads: HashMap<ValueId, ValueId> = HashMap::new();
    let mut b = Builder { g, meta: NodeMeta::default(), recomputed: HashMap::new(), vjps: HashMap::new() };
    for &(v, s) in seeds {
        if depends[v.0 as usize] {
            grads.insert(v, s);
        }
    }
    for i in (0..n_fwd).rev() {
        crate::progress::tick();
        let node = b.g.nodes[i].clone();
        if non_differentiable(&node.op) || !node.inputs.iter().any(|v| depends[v.0 as usize]) {
            continue;
        }
        let gouts: Vec<Option<ValueId>> = node.outputs.iter().map(|o| grads.get(o).copied()).collect();
        if gouts.iter().all(|g| g.is_none()) {
            continue;
        }
        b.meta = NodeMeta { pass: Pass::Backward, checkpoint: false, ..node.meta.clone() };
        let need: Vec<bool> = node.inputs.iter().map(|v| depends[v.0 as usize]).collect();
        let in_grads = vjp_rule(&mut b, &node.op, &node.inputs, &node.outputs, &gouts, &need).map_err(|e| {
            e.context(format_args!("backward of {}", crate::ir::describe_site(&node.op, &node.meta)))
                .with_source(node.meta.source.as_deref())
        })?;
        for ((&x, gx), &n) in node.inputs.iter().zip(in_grads).zip(&need) {
            let (Some(gx), true) = (gx, n) else { continue };
            let acc = match grads.get(&x) {
                Some(&prev) => b.bin(BinaryKind::Add, prev, gx)?,
                None => gx,
            };
            grads.insert(x, acc);
        }
    }
    Ok(targets.iter().filter_map(|t| grads.get(t).map(|&g| (*t, g))).collect())
}

/// Gradients of one node's inputs (None where not needed or not defined).
fn vjp_rule(
    b: &mut Builder<'_>,
    op: &Op,
    ins: &[ValueId],
    outs: &[ValueId],
    gouts: &[Option<ValueId>],
    need: &[bool],
) -> Result<Vec<Option<ValueId>>> {
    let ty = |b: &Builder<'_>, v: ValueId| b.ty(v);
    // Single-output ops take their one gradient here.
    let g = gouts.first().copied().flatten();
    let x = |b: &Builder<'_>, k: usize| b.fwd(ins[k]);
    Ok(match op {
        Op::Unary { kind } => {
            let g = g.unwrap();
            vec![Some(b.add(Op::UnaryGrad { kind: *kind }, vec![x(b, 0), g])?)]
        }
        Op::Binary { kind } => {
            let g = g.unwrap();
            let (a, c) = (x(b, 0), x(b, 1));
            let (sa, sc) = (ty(b, a).shape, ty(b, c).shape);
            let (ga, gc) = match kind {
                BinaryKind::Add => (g, g),
                BinaryKind::Sub => (g, if need[1] { b.neg(g)? } else { g }),
                BinaryKind::Mul => (
                    if need[0] { b.bin(BinaryKind::Mul, g, c)? } else { g },
                    if need[1] { b.bin(BinaryKind::Mul, g, a)? } else { g },
                ),
                BinaryKind::Div => {
                    let ga = if need[0] { b.bin(BinaryKind::Div, g, c)? } else { g };
                    let gc = if need[1] {
                        let y = b.fwd(outs[0]);
                        let gy = b.bin(BinaryKind::Mul, g, y)?;
                        let q = b.bin(BinaryKind::Div, gy, c)?;
                        b.neg(q)?
                    } else {
                        g
                    };
                    (ga, gc)
                }
                BinaryKind::Pow => {
                    let both = b.g.add(Op::PowGrad, vec![a, c, g], b.meta.clone())?;
                    (both[0], both[1])
                }
            };
            vec![
                if need[0] { Some(b.sum_to(ga, &sa)?) } else { None },
                if need[1] { Some(b.sum_to(gc, &sc)?) } else { None },
            ]
        }
        Op::Where => {
            let g = g.unwrap();
            let cond = x(b, 0);
            let zero = b.scalar(0.0, ty(b, g).dtype)?;
            let mut out = vec![None];
            for k in 1..3 {
                if need[k] {
                    let sel = if k == 1 { vec![cond, g, zero] } else { vec![cond, zero, g] };
                    let gk = b.add(Op::Where, sel)?;
                    let shape = ty(b, ins[k]).shape;
                    out.push(Some(b.sum_to(gk, &shape)?));
                } else {
                    out.push(None);
                }
            }
            out
        }
        Op::MatMul => {
            let g = g.unwrap();
            let (a, c) = (x(b, 0), x(b, 1));
            let (sa, sc) = (ty(b, a).shape, ty(b, c).shape);
            // Promote 1-D operands to matrices, as torch.matmul does.
            let a2s = if sa.len() == 1 { vec![1, sa[0]] } else { sa.clone() };
            let c2s = if sc.len() == 1 { vec![sc[0], 1] } else { sc.clone() };
            let a2 = b.reshape(a, &a2s)?;
            let c2 = b.reshape(c, &c2s)?;
            let y2 = crate::ir::shape::matmul_shape(&a2s, &c2s)?;
            let g2 = b.reshape(g, &y2)?;
            let ga = if need[0] {
                let ct = b.transpose_last2(c2)?;
                let m = b.add(Op::MatMul, vec![g2, ct])?;
                let s = b.sum_to(m, &a2s)?;
                Some(b.reshape(s, &sa)?)
            } else {
                None
            };
            let gc = if need[1] {
                let m = if a2s.len() == 2 && y2.len() == 2 {
                    b.add(Op::MatMulTN, vec![a2, g2])?
                } else if c2s.len() == 2 {
                    // A batch times one matrix (`x[b, s, h] @ w[h, v]`): the batch's products,
                    // summed, are one product of the rows, with no `[b, h, v]` in between.
                    let rows: usize = a2s[..a2s.len() - 1].iter().product();
                    let af = b.reshape(a2, &[rows, a2s[a2s.len() - 1]])?;
                    let gf = b.reshape(g2, &[rows, y2[y2.len() - 1]])?;
                    b.add(Op::MatMulTN, vec![af, gf])?
                } else {
                    let at = b.transpose_last2(a2)?;
                    b.add(Op::MatMul, vec![at, g2])?
                };
                let s = b.sum_to(m, &c2s)?;
                Some(b.reshape(s, &sc)?)
            } else {
                None
            };
            vec![ga, gc]
        }
        Op::Linear { has_bias } => {
            let g = g.unwrap();
            let (xv, w) = (x(b, 0), x(b, 1));
            let (sx, sw) = (ty(b, xv).shape, ty(b, w).shape);
            let (out_f, in_f) = (sw[0], sw[1]);
            let rows: usize = sx[..sx.len() - 1].iter().product();
            let gx = if need[0] { Some(b.add(Op::MatMul, vec![g, w])?) } else { None };
            let g2 = b.reshape(g, &[rows, out_f])?;
            let gw = if need[1] {
                let x2 = b.reshape(xv, &[rows, in_f])?;
                Some(b.add(Op::MatMulTN, vec![g2, x2])?)
            } else {
                None
            };
            let mut out = vec![gx, gw];
            if *has_bias {
                out.push(if need[2] {
                    Some(b.add(Op::Reduce { kind: ReduceKind::Sum, dims: vec![0], keepdim: false }, vec![g2])?)
                } else {
                    None
                });
            }
            out
        }
        Op::Conv2d { geom, has_bias } => {
            let g = g.unwrap();
            let (xv, w) = (x(b, 0), x(b, 1));
            let (sx, sw) = (ty(b, xv).shape, ty(b, w).shape);
            let gx = if need[0] {
                Some(b.add(Op::Conv2dGradInput { geom: *geom, in_shape: sx }, vec![w, g])?)
            } else {
                None
            };
            let gw = if need[1] {
                Some(b.add(Op::Conv2dGradWeight { geom: *geom, weight_shape: sw }, vec![xv, g])?)
            } else {
                None
            };
            let mut out = vec![gx, gw];
            if *has_bias {
                out.push(if need[2] {
                    Some(b.add(Op::Reduce { kind: ReduceKind::Sum, dims: vec![0, 2, 3], keepdim: false }, vec![g])?)
                } else {
                    None
                });
            }
            out
        }
        Op::MaxPool2d { geom } => vec![Some(b.add(Op::MaxPool2dGrad { geom: *geom }, vec![x(b, 0), g.unwrap()])?)],
        Op::AvgPool2d { geom, count_include_pad } => {
            let in_shape = ty(b, ins[0]).shape;
            let op = Op::AvgPool2dGrad { geom: *geom, count_include_pad: *count_include_pad, in_shape };
            vec![Some(b.add(op, vec![g.unwrap()])?)]
        }
        Op::AdaptiveAvgPool2d { .. } => {
            let in_shape = ty(b, ins[0]).shape;
            vec![Some(b.add(Op::AdaptiveAvgPool2dGrad { in_shape }, vec![g.unwrap()])?)]
        }
        Op::SpMM { n_rows, n_cols } => {
            let g = g.unwrap();
            let (ip, ix, vals, dense) = (x(b, 0), x(b, 1), x(b, 2), x(b, 3));
            let gv = if need[2] {
                Some(b.add(Op::SpMMValuesGrad { n_rows: *n_rows, n_cols: *n_cols }, vec![ip, ix, dense, g])?)
            } else {
                None
            };
            let gd = if need[3] {
                Some(b.add(Op::SpMMTransposed { n_rows: *n_rows, n_cols: *n_cols }, vec![ip, ix, vals, g])?)
            } else {
                None
            };
            vec![None, None, gv, gd]
        }
        Op::Reduce { kind, dims, keepdim } => {
            let g = g.unwrap();
            let sx = ty(b, ins[0]).shape;
            let all: Vec<usize> = if dims.is_empty() { (0..sx.len()).collect() } else { dims.clone() };
            let kept: Vec<usize> = sx.iter().enumerate().map(|(d, &n)| if all.contains(&d) { 1 } else { n }).collect();
            let gk = if *keepdim { g } else { b.reshape(g, &kept)? };
            let mut gx = b.add(Op::BroadcastTo { shape: sx.clone() }, vec![gk])?;
            if *kind == ReduceKind::Mean {
                let count: usize = all.iter().map(|&d| sx[d]).product();
                let s = b.scalar(1.0 / count.max(1) as f64, ty(b, g).dtype)?;
                gx = b.bin(BinaryKind::Mul, gx, s)?;
            }
            vec![Some(gx)]
        }
        Op::Max { dim, keepdim } => {
            vec![Some(b.add(Op::MaxGrad { dim: *dim, keepdim: *keepdim }, vec![x(b, 0), g.unwrap()])?)]
        }
        Op::Softmax { dim } => vec![Some(b.add(Op::SoftmaxGrad { dim: *dim }, vec![b.fwd(outs[0]), g.unwrap()])?)],
        Op::LogSoftmax { dim } => {
            vec![Some(b.add(Op::LogSoftmaxGrad { dim: *dim }, vec![b.fwd(outs[0]), g.unwrap()])?)]
        }
        Op::LayerNorm { normalized_ndim, eps, affine } => {
            let g = g.unwrap();
            let op = Op::LayerNormGrad { normalized_ndim: *normalized_ndim, eps: *eps, affine: *affine };
            let inputs = if *affine { vec![x(b, 0), x(b, 1), g] } else { vec![x(b, 0), g] };
            let outs = b.g.add(op, inputs, b.meta.clone())?;
            if *affine {
                vec![Some(outs[0]), Some(outs[1]), Some(outs[2])]
            } else {
                vec![Some(outs[0])]
            }
        }
        Op::BatchNorm { eps, affine } => {
            if gouts[1..].iter().any(|g| g.is_some()) {
                return Err(Error::ir(
                    "a gradient reaches batch norm's batch statistics: only its normalised output is differentiable",
                ));
            }
            let g = g.unwrap();
            let op = Op::BatchNormGrad { eps: *eps, affine: *affine };
            let inputs = if *affine { vec![x(b, 0), x(b, 1), g] } else { vec![x(b, 0), g] };
            let outs = b.g.add(op, inputs, b.meta.clone())?;
            outs.into_iter().map(Some).collect()
        }
        Op::Dropout { p } => vec![Some(b.add(Op::Dropout { p: *p }, vec![g.unwrap(), x(b, 1)])?), None],
        Op::CrossEntropy { reduction, class_weight, has_mask, ignore_index, label_smoothing } => {
            let mut inputs: Vec<ValueId> = (0..ins.len()).map(|k| x(b, k)).collect();
            inputs.push(g.unwrap());
            let op = Op::CrossEntropyGrad {
                reduction: *reduction,
                class_weight: class_weight.clone(),
                has_mask: *has_mask,
                ignore_index: *ignore_index,
                label_smoothing: *label_smoothing,
            };
            let mut out = vec![Some(b.add(op, inputs)?)];
            out.resize(ins.len(), None);
            out
        }
        Op::IdentityLoss { reduction } => {
            let g = g.unwrap();
            let sx = ty(b, ins[0]).shape;
            match reduction {
                Reduction::None => vec![Some(g)],
                _ => {
                    let mut gx = b.add(Op::BroadcastTo { shape: sx.clone() }, vec![g])?;
                    if *reduction == Reduction::Mean {
                        let n: usize = sx.iter().product();
                        let s = b.scalar(1.0 / n.max(1) as f64, ty(b, g).dtype)?;
                        gx = b.bin(BinaryKind::Mul, gx, s)?;
                    }
                    vec![Some(gx)]
                }
            }
        }
        Op::Reshape { .. } => {
            let sx = ty(b, ins[0]).shape;
            vec![Some(b.reshape(g.unwrap(), &sx)?)]
        }
        Op::Permute { dims } => {
            let mut inv = vec![0; dims.len()];
            for (i, &d) in dims.iter().enumerate() {
                inv[d] = i;
            }
            vec![Some(b.add(Op::Permute { dims: inv }, vec![g.unwrap()])?)]
        }
        Op::Concat { dim } => {
            let sizes: Vec<usize> = ins.iter().map(|&v| ty(b, v).shape[*dim]).collect();
            let parts = b.g.add(Op::Split { sizes, dim: *dim }, vec![g.unwrap()], b.meta.clone())?;
            parts.into_iter().map(Some).collect()
        }
        Op::Split { dim, .. } => {
            let mut parts = Vec::new();
            for (k, go) in gouts.iter().enumerate() {
                parts.push(match go {
                    Some(v) => *v,
                    None => {
                        let t = ty(b, outs[k]);
                        b.add(Op::Full { shape: t.shape, dtype: t.dtype, value: 0.0 }, vec![])?
                    }
                });
            }
            vec![Some(b.add(Op::Concat { dim: *dim }, parts)?)]
        }
        Op::Slice { dim, start, end, step } => {
            let in_shape = ty(b, ins[0]).shape;
            let op = Op::SliceGrad { in_shape, dim: *dim, start: *start, end: *end, step: *step };
            vec![Some(b.add(op, vec![g.unwrap()])?)]
        }
        Op::DynamicSlice { dim, size } => {
            let in_shape = ty(b, ins[0]).shape;
            let op = Op::DynamicSliceGrad { in_shape, dim: *dim, size: *size };
            vec![Some(b.add(op, vec![g.unwrap(), x(b, 1)])?), None]
        }
        Op::IndexSelect { dim } => {
            let dim_size = ty(b, ins[0]).shape[*dim];
            vec![Some(b.add(Op::IndexAdd { dim: *dim, dim_size }, vec![g.unwrap(), x(b, 1)])?), None]
        }
        Op::Gather { dim } => {
            let in_shape = ty(b, ins[0]).shape;
            vec![Some(b.add(Op::GatherGrad { dim: *dim, in_shape }, vec![g.unwrap(), x(b, 1)])?), None]
        }
        Op::Cast { .. } => {
            let dt = ty(b, ins[0]).dtype;
            vec![Some(b.add(Op::Cast { dtype: dt }, vec![g.unwrap()])?)]
        }
        Op::BroadcastTo { .. } => {
            let sx = ty(b, ins[0]).shape;
            vec![Some(b.sum_to(g.unwrap(), &sx)?)]
        }
        Op::ScatterAdd { .. } => vec![Some(b.add(Op::IndexSelect { dim: 0 }, vec![g.unwrap(), x(b, 1)])?), None],
        Op::ScatterMean { dim_size } => {
            vec![Some(b.add(Op::ScatterMeanGrad { dim_size: *dim_size }, vec![x(b, 1), g.unwrap()])?), None]
        }
        Op::Call { region } => {
            if region.inverse.is_none() {
                return Err(Error::ir(format!(
                    "region '{}' has no inverse: only invertible regions can be differentiated",
                    region.name
                )));
            }
            let g = g.unwrap();
            let vjp = b.invertible_vjp(region, region.inverse.as_ref().unwrap(), need)?;
            let y = b.fwd(outs[0]);
            let mut inputs = vec![y, g];
            inputs.extend(ins[1..].iter().map(|&v| b.fwd(v)));
            let op = Op::InvertibleBackward { region: region.clone(), vjp, needs_grad: need.to_vec() };
            let res = b.g.add(op, inputs, b.meta.clone())?;
            // The rebuilt input replaces the forward value in every earlier rule.
            b.recomputed.insert(ins[0], res[0]);
            let mut it = res[1..].iter();
            need.iter().map(|&n| if n { it.next().copied() } else { None }).collect()
        }
        // Every other op is listed, so that a new op is a compile error here until it has a
        // rule. Inputs, constants, random masks and index results carry no gradient; the
        // backward's and the optimizer's own ops, and the executor's fused forms, are never
        // differentiated (a training graph is built once, from a forward graph).
        Op::Placeholder { .. }
        | Op::Constant { .. }
        | Op::Full { .. }
        | Op::RandomMask { .. }
        | Op::Positive
        | Op::ArgMax { .. }
        | Op::BufferUpdate { .. }
        | Op::MatMulTN
        | Op::LinearAdd { .. }
        | Op::SumTo { .. }
        | Op::UnaryGrad { .. }
        | Op::PowGrad
        | Op::MaxGrad { .. }
        | Op::SoftmaxGrad { .. }
        | Op::LogSoftmaxGrad { .. }
        | Op::OneHot { .. }
        | Op::LayerNormGrad { .. }
        | Op::BatchNormGrad { .. }
        | Op::Conv2dGradInput { .. }
        | Op::Conv2dGradWeight { .. }
        | Op::MaxPool2dGrad { .. }
        | Op::AvgPool2dGrad { .. }
        | Op::AdaptiveAvgPool2dGrad { .. }
        | Op::CrossEntropyGrad { .. }
        | Op::SliceGrad { .. }
        | Op::DynamicSliceGrad { .. }
        | Op::IndexAdd { .. }
        | Op::GatherGrad { .. }
        | Op::ScatterMeanGrad { .. }
        | Op::SpMMTransposed { .. }
        | Op::SpMMValuesGrad { .. }
        | Op::InvertibleBackward { .. }
        | Op::OptimizerUpdate { .. } => {
            return Err(Error::ir(format!("no gradient rule for '{}'", op.name())));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{run, Store};
    use crate::rng::Rng;
    use crate::tensor::Tensor;
    use crate::trace::{nn, nn::Module, Tracer};

    #[test]
    fn mlp_gradients_match_finite_differences() {
        let mut rng = Rng::new(3);
        let model = nn::Mlp::new(&[3, 5, 2], &mut rng).unwrap();
        let tr = Tracer::new();
        let x = tr.input("x", &[4, 3], DType::Float32).unwrap();
        let y = model.forward(&tr, &x).unwrap().tanh().unwrap().mean(&[], false).unwrap();
        let t = tr.finish(&[&y]).unwrap();
        let tg = training_graph(&t.graph, 0, &TrainOptions { return_grads: true, ..Default::default() }).unwrap();
        crate::ir::verify::verify(&tg.graph).unwrap();
        let xv: Vec<f32> = (0..12).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
        let input = Rc::new(Tensor::from_f32(&[4, 3], xv).unwrap());
        let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
        let r = run(&tg.graph, &mut store, std::slice::from_ref(&input)).unwrap();
        for (name, idx) in &tg.grad_outputs {
            let got = r.outputs[*idx].to_f32_vec();
            let p0 = store.params[name].to_f32_vec();
            for k in 0..p0.len() {
                let f = |d: f32| {
                    let mut p = p0.clone();
                    p[k] += d;
                    let mut s = store.clone();
                    s.params.insert(name.clone(), Rc::new(Tensor::from_f32(store.params[name].shape(), p).unwrap()));
                    run(&t.graph, &mut s, std::slice::from_ref(&input)).unwrap().outputs[0].to_f32_vec()[0] as f64
                };
                // A small step: the MLP has ReLU kinks, which a step of 1e-2 can cross for some
                // initial values (the loss is O(1), so float32 rounding stays near 1e-4 here).
                let num = (f(1e-3) - f(-1e-3)) / 2e-3;
                assert!((num - got[k] as f64).abs() < 2e-3, "{name}[{k}]: {num} vs {}", got[k]);
            }
        }
    }

    /// A smooth two-layer model (tanh, no kinks for finite differences) and a loss of it.
    fn mlp_trace(rng: &mut Rng, loss: impl FnOnce(&crate::trace::Var) -> crate::trace::Var) -> crate::trace::Trace {
        let (l1, l2) = (nn::Linear::new(3, 4, true, rng).unwrap(), nn::Linear::new(4, 2, true, rng).unwrap());
        let tr = Tracer::new();
        let x = tr.input("x", &[5, 3], DType::Float32).unwrap();
        let h = nn::call(&tr, "0", &l1, &x).unwrap().tanh().unwrap();
        let y = nn::call(&tr, "1", &l2, &h).unwrap();
        let l = loss(&y);
        tr.finish(&[&y, &l]).unwrap()
    }

    #[test]
    fn find_loss_follows_poptorchs_rules() {
        let mut rng = Rng::new(1);
        // No loss op at all: a plain mean is not a loss.
        let t = mlp_trace(&mut rng, |y| y.mean(&[], false).unwrap());
        assert_eq!(find_loss(&t.graph).unwrap_err().to_string(), "Couldn't find a loss in graph!");
        // Two independent losses.
        let tr = Tracer::new();
        let x = tr.input("x", &[4], DType::Float32).unwrap();
        let a = x.identity_loss(Reduction::Sum).unwrap();
        let b = x.relu().unwrap().identity_loss(Reduction::Mean).unwrap();
        let t = tr.finish(&[&a, &b]).unwrap();
        let e = find_loss(&t.graph).unwrap_err().to_string();
        assert_eq!(
            e,
            "Multiple independent losses found in graph. Graph must have one final loss. Wrap final graph loss in \
             poptorch.identity_loss."
        );
        // Wrapped in one final identity_loss: the final one is the loss.
        let tr = Tracer::new();
        let x = tr.input("x", &[4], DType::Float32).unwrap();
        let a = x.identity_loss(Reduction::Sum).unwrap();
        let b = x.relu().unwrap().identity_loss(Reduction::Mean).unwrap();
        let total = a.add(&b).unwrap().identity_loss(Reduction::Sum).unwrap();
        let t = tr.finish(&[&a, &total]).unwrap();
        assert_eq!(find_loss(&t.graph).unwrap(), total.id());
    }

    /// Runs `g` on a copy of `store` and returns its outputs.
    fn run_outputs(g: &Graph, store: &Store, inputs: &[Rc<Tensor>]) -> Vec<Vec<f32>> {
        let mut s = store.clone();
        run(g, &mut s, inputs).unwrap().outputs.iter().map(|t| t.to_f32_vec()).collect()
    }

    #[test]
    fn input_gradients_match_finite_differences() {
        let mut rng = Rng::new(5);
        let t = mlp_trace(&mut rng, |y| y.tanh().unwrap().identity_loss(Reduction::Mean).unwrap());
        let loss = find_loss(&t.graph).unwrap();
        let opts = TrainOptions { input_grads: vec!["x".into()], ..Default::default() };
        let tg = training_graph_at(&t.graph, loss, &opts).unwrap();
        crate::ir::verify::verify(&tg.graph).unwrap();
        assert_eq!(tg.input_grad_outputs.len(), 1);
        let xv: Vec<f32> = (0..15).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
        let input = |v: &[f32]| Rc::new(Tensor::from_f32(&[5, 3], v.to_vec()).unwrap());
        let store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
        let got = run_outputs(&tg.graph, &store, &[input(&xv)])[tg.input_grad_outputs[0].1].clone();
        for k in 0..xv.len() {
            let f = |d: f32| {
                let mut x = xv.clone();
                x[k] += d;
                run_outputs(&t.graph, &store, &[input(&x)])[1][0] as f64
            };
            let num = (f(1e-2) - f(-1e-2)) / 2e-2;
            assert!((num - got[k] as f64).abs() < 1e-3, "x[{k}]: {num} vs {}", got[k]);
        }
        let e = training_graph_at(&t.graph, loss, &TrainOptions { input_grads: vec!["nope".into()], ..opts.clone() })
            .unwrap_err()
            .to_string();
        assert!(e.contains("'nope'") && e.contains("not a model input"), "{e}");
    }

    #[test]
    fn loss_scaling_input_scales_every_gradient_and_none_losses_seed_ones() {
        let mut rng = Rng::new(7);
        let t = mlp_trace(&mut rng, |y| y.identity_loss(Reduction::None).unwrap());
        let loss = find_loss(&t.graph).unwrap();
        let plain =
            training_graph_at(&t.graph, loss, &TrainOptions { return_grads: true, ..Default::default() }).unwrap();
        let opts = TrainOptions { return_grads: true, loss_scale_input: true, ..Default::default() };
        let scaled = training_graph_at(&t.graph, loss, &opts).unwrap();
        let xv: Vec<f32> = (0..15).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
        let x = Rc::new(Tensor::from_f32(&[5, 3], xv).unwrap());
        let store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
        let a = run_outputs(&plain.graph, &store, std::slice::from_ref(&x));
        let b = run_outputs(&scaled.graph, &store, &[x.clone(), Rc::new(Tensor::scalar(128.0))]);
        for (name, i) in &plain.grad_outputs {
            let j = scaled.grad_outputs.iter().find(|(n, _)| n == name).unwrap().1;
            for (p, q) in a[*i].iter().zip(&b[j]) {
                assert!((p * 128.0 - q).abs() <= 1e-4 * q.abs().max(1.0), "{name}: {p} × 128 vs {q}");
            }
        }
        // Seeding ones equals differentiating the sum of the unreduced loss.
        let ts = mlp_trace(&mut Rng::new(7), |y| y.identity_loss(Reduction::Sum).unwrap());
        let sum = training_graph_at(
            &ts.graph,
            find_loss(&ts.graph).unwrap(),
            &TrainOptions { return_grads: true, ..Default::default() },
        )
        .unwrap();
        let c =
            run_outputs(&sum.graph, &Store::from_params(&ts.params, &ts.buffers, 0).unwrap(), std::slice::from_ref(&x));
        for (name, i) in &plain.grad_outputs {
            let j = sum.grad_outputs.iter().find(|(n, _)| n == name).unwrap().1;
            assert_eq!(a[*i], c[j], "{name}");
        }
    }

    #[test]
    fn a_batch_times_a_matrix_has_a_matrix_sized_weight_gradient() {
        // x[8, 4, 16] @ w[16, 30]: w's gradient is one [16, 4·8] @ [4·8, 30] product, never a
        // [8, 16, 30] batch of them summed afterwards (its values: the golden matmul cases).
        let tr = Tracer::new();
        let x = tr.input("x", &[8, 4, 16], DType::Float32).unwrap();
        let w = tr.param("w", Tensor::zeros(&[16, 30], DType::Float32)).unwrap();
        let y = x.matmul(&w).unwrap().mean(&[], false).unwrap();
        let t = tr.finish(&[&y]).unwrap();
        let tg = training_graph(&t.graph, 0, &TrainOptions { return_grads: true, ..Default::default() }).unwrap();
        let biggest = tg.graph.values.iter().map(|v| v.ty.shape.iter().product::<usize>()).max().unwrap();
        assert_eq!(biggest, 8 * 4 * 30, "the largest value is the output (or its gradient)");
    }

    #[test]
    fn non_scalar_loss_is_rejected() {
        let tr = Tracer::new();
        let x = tr.input("x", &[2], DType::Float32).unwrap();
        let t = tr.finish(&[&x.relu().unwrap()]).unwrap();
        let e = training_graph(&t.graph, 0, &TrainOptions::default()).unwrap_err().to_string();
        assert!(e.contains("scalar"), "{e}");
    }
}
