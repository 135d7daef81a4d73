//! The traced forward graph as Python statements, as torch.fx's code generation writes a
//! `GraphModule`'s `forward`: one statement per node, over `torch`, `torch.nn.functional`
//! and the model's own parameters and buffers (`self.fc1.weight`).
//!
//! Every forward op has one arm in [`Emitter::node`], with no catch-all: an op added to
//! `ir::Op` without a Python form is a compile error here. Backward-only ops (autograd's)
//! and optimizer updates are export errors: only a forward graph is exported.
//!
//! With `poptorch` set the statements also carry the PopTorch annotations the trace
//! recorded: `with poptorch.Block(...)` for a scoped Block, `poptorch.Block.start(...)` for a
//! `BeginBlock`, `poptorch.recomputationCheckpoint` and `poptorch.set_available_memory` on
//! the values marked so, and `poptorch.identity_loss` for the loss.

use super::leaves::{module_expr, Leaf};
use super::rev::{BlockArg, Rev};
pub use super::syntax::{dtype, f32_lit, f64_lit, fresh_ident, is_ident, state_expr, str_lit, tuple};
use crate::ir::{
    BinaryKind, BlockKind, Graph, InputKind, Node, Op, Pass, ReduceKind, Reduction, TensorType, UnaryKind, ValueId,
};
use crate::tensor::{DType, Tensor};
use crate::{Error, Result};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The most elements a constant may have to be written inline into the code.
pub const MAX_INLINE_CONSTANT: usize = 1 << 20;

/// One argument of the exported `forward`.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    /// The input's name in the trace (a sparse input's name without `.indptr`).
    pub name: String,
    /// Its Python identifier.
    pub ident: String,
    pub kind: ArgKind,
}

/// What an argument of `forward` is.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgKind {
    /// A dense tensor of this type (one micro-batch).
    Dense(TensorType),
    /// A CSR matrix (`torch.sparse_csr_tensor`), traced as three inputs.
    Sparse { rows: usize, cols: usize, nnz: usize },
}

/// The generated `forward`: its arguments, its body (indented for a method) and what it
/// returns.
#[derive(Clone, Debug)]
pub struct Forward {
    pub args: Vec<Arg>,
    pub body: Vec<String>,
    /// The index of the loss among the outputs, when the graph has one (PopTorch's rules).
    pub loss_output: Option<usize>,
    /// How many outputs `forward` returns (one is returned bare, several as a tuple).
    pub n_outputs: usize,
    /// `poptorch.BeginBlock(module, id, ipu_id)` for `__init__`: (module path, Block id,
    /// IPU), for each Block that a call of a leaf module began (`meta.block_module`) where
    /// `forward` calls that module.
    pub begin_blocks: Vec<(String, String, Option<usize>)>,
}

/// The inputs of the traced graph as `forward` arguments: a sparse input's three tensors
/// (`<name>.indptr`, `<name>.indices`, `<name>.values`, in a row) are one CSR argument.
fn arguments(g: &Graph, used: &mut HashSet<String>) -> Result<(Vec<Arg>, HashMap<ValueId, String>)> {
    let inputs = g.placeholders(InputKind::Input);
    let mut args = Vec::new();
    let mut names = HashMap::new();
    let mut i = 0;
    while i < inputs.len() {
        let (name, v) = inputs[i];
        if let Some(base) = name.strip_suffix(".indptr") {
            let parts = inputs.get(i + 1).zip(inputs.get(i + 2));
            let Some(((n1, v1), (n2, v2))) =
                parts.filter(|((n1, _), (n2, _))| *n1 == format!("{base}.indices") && *n2 == format!("{base}.values"))
            else {
                return Err(Error::export(format!(
                    "input '{name}' is a sparse matrix's row pointers, but '{base}.indices' and '{base}.values' do not \
                     follow it"
                )));
            };
            let _ = (n1, n2);
            let ident = fresh_ident(base, used);
            let rows = g.ty(v).shape[0].saturating_sub(1);
            let nnz = g.ty(*v1).shape.first().copied().unwrap_or(0);
            // The columns: from the product that reads the matrix (a sparse input no product
            // reads is taken as square).
            let cols = g
                .nodes
                .iter()
                .find_map(|n| match n.op {
                    Op::SpMM { n_cols, .. } if n.inputs.first() == Some(&v) => Some(n_cols),
                    _ => None,
                })
                .unwrap_or(rows);
            names.insert(v, format!("{ident}.crow_indices()"));
            names.insert(*v1, format!("{ident}.col_indices()"));
            names.insert(*v2, format!("{ident}.values()"));
            args.push(Arg { name: base.to_string(), ident, kind: ArgKind::Sparse { rows, cols, nnz } });
            i += 3;
        } else {
            let ident = fresh_ident(name, used);
            names.insert(v, ident.clone());
            args.push(Arg { name: name.to_string(), ident, kind: ArgKind::Dense(g.ty(v).clone()) });
            i += 1;
        }
    }
    Ok((args, names))
}

/// The `forward` of graph `g` (a forward graph as traced). `loss` is the loss value
/// PopTorch's rules find, if any.
pub fn forward(
    g: &Graph,
    loss: Option<ValueId>,
    poptorch: bool,
    leaves: &BTreeMap<String, Leaf>,
    revs: &BTreeMap<String, Rev>,
) -> Result<Forward> {
    let mut used: HashSet<String> = HashSet::new();
    let (args, names) = arguments(g, &mut used)?;
    let mut e = Emitter::new(poptorch, used, leaves, "");
    e.revs = revs.clone();
    let dev = args
        .iter()
        .find(|a| matches!(a.kind, ArgKind::Dense(_)))
        .map(|a| format!("{}.device", a.ident))
        .unwrap_or_else(|| "torch.device('cpu')".into());
    e.line(format!("dev = {dev}"));
    let mut names = names;
    e.graph(g, &mut names, "")?;
    e.close_block();
    let outs: Vec<String> = g.outputs.iter().map(|o| names[o].clone()).collect();
    match outs.len() {
        1 => e.line(format!("return {}", outs[0])),
        _ => e.line(format!("return ({}{})", outs.join(", "), if outs.len() == 1 { "," } else { "" })),
    }
    let loss_output = loss.and_then(|l| g.outputs.iter().position(|o| *o == l));
    Ok(Forward { args, body: e.lines, loss_output, n_outputs: outs.len(), begin_blocks: e.begin_blocks })
}

/// The `forward` of a recovered `GroupAddRev`'s block module (see [`super::rev`]): its
/// arguments after `self` (`x, adj, mask`) and its body, the first group's nodes of the
/// region `f` over the block's own parameters (`self.norm.weight`) and leaf modules
/// (`leaves`, by path in the block).
pub fn block_forward(f: &Graph, rev: &Rev, leaves: &BTreeMap<String, Leaf>) -> Result<(Vec<String>, Vec<String>)> {
    let inputs = f.placeholders(InputKind::Input);
    let mut names: HashMap<ValueId, String> = HashMap::new();
    let mut args = vec!["x".to_string()];
    names.insert(rev.x, "x".into());
    for a in &rev.args {
        match a {
            BlockArg::Dense { input, chunk, ident } => {
                names.insert(chunk.unwrap_or(inputs[1 + input].1), ident.clone());
                args.push(ident.clone());
            }
            BlockArg::Sparse { input, ident } => {
                for (k, part) in ["crow_indices", "col_indices", "values"].iter().enumerate() {
                    names.insert(inputs[1 + input + k].1, format!("{ident}.{part}()"));
                }
                args.push(ident.clone());
            }
        }
    }
    for (v, rel) in &rev.captures {
        names.insert(*v, state_expr("self", rel, InputKind::Parameter));
    }
    let used: HashSet<String> = args.iter().cloned().chain(["dev".to_string(), "self".to_string()]).collect();
    let mut e = Emitter::new(false, used, leaves, &format!("{}.convs.0.", rev.path));
    e.line("dev = x.device".into());
    let sub = Graph {
        nodes: rev.nodes.iter().map(|&k| f.nodes[k].clone()).collect(),
        values: f.values.clone(),
        outputs: vec![rev.out],
    };
    e.graph(&sub, &mut names, "")?;
    let out = names.get(&rev.out).cloned().ok_or_else(|| Error::export("the block's result is not made"))?;
    e.line(format!("return {out}"));
    Ok((args, e.lines))
}

impl Emitter {
    /// An emitter writing a method's body (indented twice) over leaf modules `leaves` (by
    /// path under `self`; `scope_prefix` is what the trace's scopes have before those paths:
    /// a block's own path in the model).
    fn new(poptorch: bool, used: HashSet<String>, leaves: &BTreeMap<String, Leaf>, scope_prefix: &str) -> Emitter {
        let leaf_of = leaves
            .iter()
            .filter(|(_, l)| !l.is_scoped())
            .map(|(path, _)| (state_expr("self", &format!("{path}.weight"), InputKind::Parameter), path.clone()))
            .collect();
        let scoped = leaves
            .iter()
            .filter(|(_, l)| l.is_scoped())
            .map(|(path, l)| (format!("{scope_prefix}{path}"), (module_expr(path), l.clone())))
            .collect();
        Emitter {
            poptorch,
            lines: Vec::new(),
            indent: 2,
            used,
            regions: 0,
            open_block: None,
            begun: None,
            begin_blocks: Vec::new(),
            leaf_of,
            scoped,
            revs: BTreeMap::new(),
        }
    }
}

struct Emitter {
    poptorch: bool,
    lines: Vec<String>,
    /// Indentation in levels of four spaces (2: a method's body).
    indent: usize,
    used: HashSet<String>,
    /// Regions inlined so far (each one's values get their own prefix).
    regions: usize,
    /// The `with poptorch.Block(...)` open now: (id, ipu).
    open_block: Option<(String, Option<usize>)>,
    /// The block a `poptorch.Block.start` (or a module's `BeginBlock`) began last.
    begun: Option<(String, Option<usize>)>,
    /// See [`Forward::begin_blocks`].
    begin_blocks: Vec<(String, String, Option<usize>)>,
    /// The module path of each leaf module by its weight's expression (`self.fc1.weight` →
    /// `fc1`): its `linear` or `layer_norm` is a call of the module.
    leaf_of: HashMap<String, String>,
    /// Each leaf module whose call is every node traced in its scope (a batch norm's, a
    /// SAGEConv's, a sparse linear's), by scope: its expression and the module. The node that
    /// [`Leaf::is_call`] names is written as the module's call; its other nodes are not.
    scoped: BTreeMap<String, (String, Leaf)>,
    /// The recovered `GroupAddRev`s by region name: their calls are module calls.
    revs: BTreeMap<String, Rev>,
}

fn block_args(id: &str, ipu: Option<usize>) -> String {
    match ipu {
        Some(i) => format!("{}, ipu_id={i}", str_lit(id)),
        None => str_lit(id),
    }
}

impl Emitter {
    /// The leaf module whose weight is `weight` (the expression of input 1 of a `linear` or
    /// `layer_norm`: `self.fc1.weight`, also inside an inlined region), if any.
    /// With a bias, `bias` must be that module's own.
    fn leaf(&self, weight: &str, bias: Option<&str>) -> Option<String> {
        let path = self.leaf_of.get(weight)?;
        match bias {
            Some(b) if b != state_expr("self", &format!("{path}.bias"), InputKind::Parameter) => None,
            _ => Some(module_expr(path)),
        }
    }

    /// The path of the leaf module whose call writes node `n` (inputs `a`), if one does: a
    /// `linear` or affine `layer_norm` of a leaf's weights, a scoped leaf's `batch_norm`.
    fn module_call(&self, n: &Node, a: &[String]) -> Option<String> {
        let own = |bias: Option<&str>| {
            let path = self.leaf_of.get(a.get(1)?)?;
            self.leaf(&a[1], bias).map(|_| path.clone())
        };
        match &n.op {
            Op::Linear { has_bias } => own(has_bias.then(|| a.get(2).map(String::as_str)).flatten()),
            Op::LayerNorm { affine: true, .. } => own(Some(a.get(2)?)),
            _ if self.scoped_call_of(n).is_some() => self.scoped_call_of(n).map(|(p, ..)| p.to_string()),
            _ => None,
        }
    }

    /// The scoped leaf module node `n` was traced in (its scope or one above), if any.
    fn scoped_of(&self, n: &Node) -> Option<(&str, &str, &Leaf)> {
        let s = &n.meta.scope;
        // The innermost: the longest path the scope is in.
        self.scoped
            .iter()
            .filter(|(p, _)| *s == **p || s.strip_prefix(p.as_str()).is_some_and(|r| r.starts_with('.')))
            .max_by_key(|(p, _)| p.len())
            .map(|(p, (e, l))| (p.as_str(), e.as_str(), l))
    }

    /// The scoped leaf module whose call node `n` is, if it is one.
    fn scoped_call_of(&self, n: &Node) -> Option<(&str, &str, &Leaf)> {
        self.scoped_of(n).filter(|(p, _, l)| l.is_call(p, n))
    }

    /// The call of scoped leaf module `expr` (a [`Leaf`] `leaf`) that node `n` of `g` ends
    /// (`self.bn1(x)`, `self.lin1(x)` on a CSR argument, `self.conv(h, adj)`), from the names
    /// of the values the module reads.
    fn scoped_call(g: &Graph, n: &Node, expr: &str, leaf: &Leaf, names: &HashMap<ValueId, String>) -> Result<String> {
        let made_by = |v: ValueId| {
            g.nodes
                .iter()
                .find(|m| m.outputs.contains(&v))
                .ok_or_else(|| Error::export(format!("value {v} of the call of {expr} is made by no node")))
        };
        let name = |v: ValueId| {
            names.get(&v).cloned().ok_or_else(|| Error::export(format!("value {v} is used before it is made")))
        };
        // A CSR argument: its row pointers are `<arg>.crow_indices()`.
        let csr = |mm: &Node| -> Result<String> {
            let rows = name(mm.inputs[0])?;
            rows.strip_suffix(".crow_indices()").map(str::to_string).ok_or_else(|| {
                Error::export(format!("the sparse matrix {expr} is called on ({rows}) is not a CSR argument"))
            })
        };
        Ok(match leaf {
            Leaf::BatchNorm2d { .. } => format!("{expr}({})", name(n.inputs[0])?),
            Leaf::Linear { bias: true, .. } => format!("{expr}({})", csr(made_by(n.inputs[0])?)?),
            Leaf::Linear { .. } => format!("{expr}({})", csr(n)?),
            Leaf::SageConv { .. } => {
                let mm = made_by(made_by(n.inputs[0])?.inputs[0])?;
                format!("{expr}({}, {})", name(mm.inputs[3])?, csr(mm)?)
            }
            Leaf::LayerNorm { .. } => return Err(Error::export(format!("{expr} is not a scoped module"))),
        })
    }

    fn line(&mut self, s: String) {
        self.lines.push(format!("{}{s}", "    ".repeat(self.indent)));
    }

    fn close_block(&mut self) {
        if self.open_block.take().is_some() {
            self.indent -= 1;
        }
    }

    /// The Block statements before node `n` (inputs `a`; PopTorch form only). A Block that
    /// the call of a leaf module began (`poptorch.BeginBlock(module)`), at that call, is the
    /// module's `BeginBlock` in `__init__` when `forward` calls the module there; else, as
    /// every other begun Block, a `poptorch.Block.start` here.
    fn placement(&mut self, n: &Node, a: &[String]) {
        if !self.poptorch || matches!(n.op, Op::Placeholder { .. }) {
            return;
        }
        let m = &n.meta;
        if let (Some(BlockKind::Begin), Some(id), Some(path)) = (m.block_kind, &m.block, &m.block_module) {
            if self.module_call(n, a).as_ref() == Some(path) {
                self.close_block();
                let want = (id.clone(), m.ipu);
                if self.begun.as_ref() != Some(&want) {
                    if !self.begin_blocks.iter().any(|(p, ..)| p == path) {
                        self.begin_blocks.push((path.clone(), id.clone(), m.ipu));
                    }
                    self.begun = Some(want);
                }
                return;
            }
        }
        match (m.block_kind, &m.block) {
            (Some(BlockKind::Scoped), Some(id)) => {
                let want = (id.clone(), m.ipu);
                if self.open_block.as_ref() != Some(&want) {
                    self.close_block();
                    self.line(format!("with poptorch.Block({}):", block_args(id, m.ipu)));
                    self.indent += 1;
                    self.open_block = Some(want);
                }
            }
            (Some(BlockKind::Begin), Some(id)) => {
                self.close_block();
                let want = (id.clone(), m.ipu);
                if self.begun.as_ref() != Some(&want) {
                    self.line(format!("poptorch.Block.start({})", block_args(id, m.ipu)));
                    self.begun = Some(want);
                }
            }
            _ => self.close_block(),
        }
    }

    /// The statements of graph `g`; `names` holds the Python names of values defined so far
    /// (the arguments, or a region's inputs), `prefix` the region's prefix for new names.
    fn graph(&mut self, g: &Graph, names: &mut HashMap<ValueId, String>, prefix: &str) -> Result<()> {
        for (i, n) in g.nodes.iter().enumerate() {
            if n.meta.pass != Pass::Forward {
                return Err(Error::export(format!(
                    "'{}' is a {:?} node: only a forward graph is exported",
                    n.op.name(),
                    n.meta.pass
                )));
            }
            // A node of a scoped leaf module's call other than the one that ends it: the module
            // call does it (its state is read by the module; its other values stay inside).
            if self.scoped_of(n).is_some() && self.scoped_call_of(n).is_none() {
                for o in &n.outputs {
                    let name = match &n.op {
                        Op::Placeholder { kind, name } => state_expr("self", name, *kind),
                        _ => "None".to_string(),
                    };
                    names.insert(*o, name);
                }
                continue;
            }
            if let Op::Placeholder { kind: InputKind::Input, name } = &n.op {
                if !names.contains_key(&n.outputs[0]) {
                    return Err(Error::export(format!("input '{name}' has no argument")));
                }
                continue;
            }
            // A parameter is read where it is used (`self.fc1.weight`), unless the trace read
            // it earlier than that use would (ops between, or with other parameters in
            // another order): then where the trace read it, so that tracing the file again
            // reads it at the same point. A buffer is read where the trace read it, since an
            // update later in forward rebinds it.
            if let Op::Placeholder { kind: InputKind::Parameter, name } = &n.op {
                let expr = state_expr("self", name, InputKind::Parameter);
                if read_at_use(g, i) {
                    names.insert(n.outputs[0], expr);
                } else {
                    let local = fresh_ident(&format!("{prefix}{}", name.replace('.', "_")), &mut self.used);
                    self.line(format!("{local} = {expr}"));
                    names.insert(n.outputs[0], local);
                }
                continue;
            }
            let outs: Vec<String> = n
                .outputs
                .iter()
                .map(|o| match &n.op {
                    Op::Placeholder { name, .. } => fresh_ident(&format!("{prefix}{name}"), &mut self.used),
                    _ => fresh_ident(&format!("{prefix}v{}", o.0), &mut self.used),
                })
                .collect();
            let ins: Vec<String> = n
                .inputs
                .iter()
                .map(|v| {
                    names.get(v).cloned().ok_or_else(|| Error::export(format!("value {v} is used before it is made")))
                })
                .collect::<Result<_>>()?;
            self.placement(n, &ins);
            match self.scoped_call_of(n) {
                Some((_, expr, leaf)) => {
                    let call = Emitter::scoped_call(g, n, expr, leaf, names)?;
                    self.line(format!("{} = {call}", outs[0]));
                }
                None => self.node(g, n, &ins, &outs)?,
            }
            for (o, name) in n.outputs.iter().zip(&outs) {
                names.insert(*o, name.clone());
            }
            if self.poptorch {
                // (A scoped module's call returns its node's first output alone.)
                let outs = if self.scoped_call_of(n).is_some() { &outs[..1] } else { &outs[..] };
                if let Some([o]) = Some(outs).filter(|_| n.meta.checkpoint) {
                    self.line(format!("{o} = poptorch.recomputationCheckpoint({o})"));
                }
                if let (Some(p), [o, ..]) = (n.meta.available_memory, outs) {
                    self.line(format!("{o} = poptorch.set_available_memory({o}, {})", f64_lit(p.0)));
                }
            }
        }
        Ok(())
    }

    fn assign(&mut self, outs: &[String], rhs: String) {
        match outs.len() {
            0 => self.line(rhs),
            1 => self.line(format!("{} = {rhs}", outs[0])),
            _ => self.line(format!("{} = {rhs}", outs.join(", "))),
        }
    }

    /// One node's statement.
    fn node(&mut self, g: &Graph, n: &Node, a: &[String], outs: &[String]) -> Result<()> {
        let ty = |i: usize| g.ty(n.inputs[i]);
        let out_ty = |i: usize| g.ty(n.outputs[i]);
        let backward = || {
            Err(Error::export(format!(
                "'{}' is made by autograd or the executor, never traced: only a forward graph is exported",
                n.op.name()
            )))
        };
        let rhs = match &n.op {
            Op::Placeholder { kind: InputKind::Input, name } => {
                return Err(Error::export(format!("input '{name}' has no argument")))
            }
            Op::Placeholder { kind, name } => state_expr("self", name, *kind),
            Op::Constant { value, .. } => constant(value)?,
            Op::Full { shape, dtype: d, value } => {
                let v = match d {
                    // torch.full makes any number a bool as the engine does (not 0: True); the
                    // number itself is kept, so the traced `full` is the same op again.
                    DType::Bool if *value == 1.0 => "True".to_string(),
                    DType::Bool if *value == 0.0 => "False".to_string(),
                    // (A fraction is kept: torch.full truncates it as the engine does; a value
                    // that is not finite is the engine's int32 of it, torch refusing it.)
                    DType::Int32 if value.fract() == 0.0 || !value.is_finite() => format!("{}", *value as i32),
                    _ => f64_lit(*value),
                };
                format!("torch.full({}, {v}, dtype={}, device=dev)", tuple(shape), dtype(*d))
            }
            Op::RandomMask { shape, p } => format!("self._random_mask({}, {}, dev)", tuple(shape), f32_lit(*p)),
            Op::Unary { kind } => {
                let x = &a[0];
                match kind {
                    UnaryKind::Neg => format!("torch.neg({x})"),
                    UnaryKind::Exp => format!("torch.exp({x})"),
                    UnaryKind::Log => format!("torch.log({x})"),
                    UnaryKind::Sqrt => format!("torch.sqrt({x})"),
                    UnaryKind::Relu => format!("F.relu({x})"),
                    UnaryKind::Gelu => format!("F.gelu({x})"),
                    UnaryKind::GeluTanh => format!("F.gelu({x}, approximate='tanh')"),
                    UnaryKind::Tanh => format!("torch.tanh({x})"),
                    UnaryKind::Sigmoid => format!("torch.sigmoid({x})"),
                }
            }
            Op::Binary { kind } => {
                let f = match kind {
                    BinaryKind::Add => "torch.add",
                    BinaryKind::Sub => "torch.sub",
                    BinaryKind::Mul => "torch.mul",
                    BinaryKind::Div => "torch.div",
                    BinaryKind::Pow => "torch.pow",
                };
                format!("{f}({}, {})", a[0], a[1])
            }
            Op::Where => format!("torch.where({}, {}, {})", a[0], a[1], a[2]),
            Op::Positive => format!("{} > 0", a[0]),
            Op::MatMul => format!("torch.matmul({}, {})", a[0], a[1]),
            Op::MatMulTN => format!("torch.matmul({}.transpose(-2, -1), {})", a[0], a[1]),
            Op::Linear { has_bias } => match self.leaf(&a[1], has_bias.then(|| a[2].as_str())) {
                Some(module) => format!("{module}({})", a[0]),
                None => format!("F.linear({}, {}, {})", a[0], a[1], if *has_bias { a[2].as_str() } else { "None" }),
            },
            Op::LinearAdd { has_bias } => {
                let (b, addend) = if *has_bias { (a[2].as_str(), &a[3]) } else { ("None", &a[2]) };
                format!("F.linear({}, {}, {b}) + {addend}", a[0], a[1])
            }
            Op::SpMM { n_rows, .. } => format!("_spmm({}, {}, {}, {}, {n_rows})", a[0], a[1], a[2], a[3]),
            Op::Conv2d { geom, has_bias } => format!(
                "F.conv2d({}, {}, {}, stride={}, padding={}, dilation={}, groups={})",
                a[0],
                a[1],
                if *has_bias { a[2].as_str() } else { "None" },
                tuple(&geom.stride),
                tuple(&geom.padding),
                tuple(&geom.dilation),
                geom.groups
            ),
            Op::MaxPool2d { geom } => format!(
                "F.max_pool2d({}, {}, stride={}, padding={}, dilation={}, ceil_mode={})",
                a[0],
                tuple(&geom.kernel),
                tuple(&geom.stride),
                tuple(&geom.padding),
                tuple(&geom.dilation),
                py_bool(geom.ceil_mode)
            ),
            Op::AvgPool2d { geom, count_include_pad } => format!(
                "F.avg_pool2d({}, {}, stride={}, padding={}, ceil_mode={}, count_include_pad={})",
                a[0],
                tuple(&geom.kernel),
                tuple(&geom.stride),
                tuple(&geom.padding),
                py_bool(geom.ceil_mode),
                py_bool(*count_include_pad)
            ),
            Op::AdaptiveAvgPool2d { output } => format!("F.adaptive_avg_pool2d({}, {})", a[0], tuple(output)),
            Op::Reduce { kind, dims, keepdim } => {
                let f = match kind {
                    ReduceKind::Sum => "torch.sum",
                    ReduceKind::Mean => "torch.mean",
                };
                // No dims is every dim (the IR's reading), written as torch's `dim=None`, so
                // that the trace of the file records no dims again.
                let dim = if dims.is_empty() { "None".to_string() } else { tuple(dims) };
                let e = format!("{f}({}, dim={dim}, keepdim={})", a[0], py_bool(*keepdim));
                // torch sums integers into int64.
                if out_ty(0).dtype == DType::Int32 {
                    format!("{e}.to(torch.int32)")
                } else {
                    e
                }
            }
            Op::Max { dim, keepdim } => format!("torch.max({}, dim={dim}, keepdim={}).values", a[0], py_bool(*keepdim)),
            Op::ArgMax { dim, keepdim } => {
                // torch's argmax takes no bool tensor: the PyTorch form reads it as bytes (the
                // PopTorch form keeps the call the engine traced).
                let x = if !self.poptorch && ty(0).dtype == DType::Bool {
                    format!("{}.to(torch.uint8)", a[0])
                } else {
                    a[0].clone()
                };
                format!("torch.argmax({x}, dim={dim}, keepdim={}).to(torch.int32)", py_bool(*keepdim))
            }
            Op::Softmax { dim } => format!("F.softmax({}, dim={dim})", a[0]),
            Op::LogSoftmax { dim } => format!("F.log_softmax({}, dim={dim})", a[0]),
            Op::LayerNorm { affine: true, .. } if self.leaf(&a[1], Some(&a[2])).is_some() => {
                format!("{}({})", self.leaf(&a[1], Some(&a[2])).unwrap_or_default(), a[0])
            }
            Op::LayerNorm { normalized_ndim, eps, affine } => {
                let s = &ty(0).shape;
                let shape = &s[s.len() - normalized_ndim..];
                let (w, b) = if *affine { (a[1].as_str(), a[2].as_str()) } else { ("None", "None") };
                format!("F.layer_norm({}, {}, {w}, {b}, eps={})", a[0], tuple(shape), f32_lit(*eps))
            }
            Op::BatchNorm { eps, affine } => {
                let (w, b) = if *affine { (a[1].as_str(), a[2].as_str()) } else { ("None", "None") };
                format!("_batch_norm_train({}, {w}, {b}, {})", a[0], f32_lit(*eps))
            }
            Op::Dropout { p } => format!("_dropout_with_mask({}, {}, {})", a[0], a[1], f32_lit(*p)),
            Op::CrossEntropy { reduction, class_weight, has_mask, ignore_index, label_smoothing } => {
                let ignore = ignore_index.unwrap_or(-100);
                let (f, target) = if *has_mask {
                    ("_masked_cross_entropy", format!("{}, {}", a[1], a[2]))
                } else {
                    ("F.cross_entropy", format!("{}.long()", a[1]))
                };
                let weight = match class_weight {
                    Some(w) => format!(
                        "torch.tensor([{}], dtype={}, device=dev)",
                        w.iter().map(|x| f32_lit(*x)).collect::<Vec<_>>().join(", "),
                        dtype(ty(0).dtype)
                    ),
                    None => "None".into(),
                };
                format!(
                    "{f}({}, {target}, weight={weight}, ignore_index={ignore}, reduction={}, label_smoothing={})",
                    a[0],
                    str_lit(reduction_name(*reduction)),
                    f32_lit(*label_smoothing)
                )
            }
            Op::IdentityLoss { reduction } => {
                if self.poptorch {
                    format!("poptorch.identity_loss({}, reduction={})", a[0], str_lit(reduction_name(*reduction)))
                } else {
                    match reduction {
                        Reduction::Sum => format!("torch.sum({})", a[0]),
                        Reduction::Mean => format!("torch.mean({})", a[0]),
                        Reduction::None => a[0].clone(),
                    }
                }
            }
            Op::Reshape { shape } => format!("{}.reshape({})", a[0], tuple(shape)),
            Op::Permute { dims } => format!("{}.permute({})", a[0], tuple(dims)),
            Op::Concat { dim } => format!("torch.cat([{}], dim={dim})", a.join(", ")),
            Op::Split { sizes, dim } => {
                let e = format!("torch.split({}, [{}], dim={dim})", a[0], join(sizes));
                if outs.len() == 1 {
                    self.line(format!("({},) = {e}", outs[0]));
                    return Ok(());
                }
                e
            }
            Op::Slice { dim, start, end, step } => {
                let step = if *step == 1 { String::new() } else { format!(":{step}") };
                format!("{}[{}{start}:{end}{step}]", a[0], ":, ".repeat(*dim))
            }
            Op::DynamicSlice { dim, size } => format!("_dynamic_slice({}, {}, {dim}, {size})", a[0], a[1]),
            Op::IndexSelect { dim } => format!("torch.index_select({}, {dim}, {}.long())", a[0], a[1]),
            Op::Gather { dim } => format!("torch.gather({}, {dim}, {}.long())", a[0], a[1]),
            // A cast to the dtype it has is a copy (`to` alone would return the tensor itself).
            Op::Cast { dtype: d } if ty(0).dtype == *d => format!("{}.to({}, copy=True)", a[0], dtype(*d)),
            Op::Cast { dtype: d } => format!("{}.to({})", a[0], dtype(*d)),
            Op::BroadcastTo { shape } => format!("torch.broadcast_to({}, {})", a[0], tuple(shape)),
            Op::ScatterAdd { dim_size } => {
                let rest = &ty(0).shape[1..];
                let mut shape = vec![*dim_size];
                shape.extend_from_slice(rest);
                format!(
                    "torch.zeros({}, dtype={}, device=dev).index_add(0, {}.long(), {})",
                    tuple(&shape),
                    dtype(ty(0).dtype),
                    a[1],
                    a[0]
                )
            }
            Op::ScatterMean { dim_size } => format!("_scatter_mean({}, {}, {dim_size})", a[0], a[1]),
            Op::BufferUpdate { name } => {
                // PopTorch wants buffers written in place; the PyTorch form rebinds the
                // buffer, as the engine's update replaces the value (earlier reads keep theirs).
                if self.poptorch {
                    format!("{}.copy_({})", state_expr("self", name, InputKind::Buffer), a[0])
                } else {
                    let (module, leaf) = match name.rsplit_once('.') {
                        Some((m, l)) => (format!("self.get_submodule({})", str_lit(m)), l),
                        None => ("self".to_string(), name.as_str()),
                    };
                    format!("setattr({module}, {}, {}.detach())", str_lit(leaf), a[0])
                }
            }
            Op::OneHot { num_classes } => format!("F.one_hot({}.long(), {num_classes}).to(torch.int32)", a[0]),
            Op::Call { region } if self.revs.contains_key(&region.name) => {
                // A GroupAddRev: the module's call, `self.convs[0](x, adj, mask)`.
                let rev = &self.revs[&region.name];
                let mut args = vec![a[0].clone()];
                for arg in &rev.args {
                    args.push(match arg {
                        BlockArg::Dense { input, .. } => a[1 + input].clone(),
                        BlockArg::Sparse { input, .. } => match a[1 + input].strip_suffix(".crow_indices()") {
                            Some(csr) => csr.to_string(),
                            None => {
                                return Err(Error::export(format!(
                                    "GroupAddRev '{}': argument {} is not a CSR argument",
                                    rev.path,
                                    a[1 + input]
                                )))
                            }
                        },
                    });
                }
                format!("{}({})", module_expr(&rev.path), args.join(", "))
            }
            Op::Call { region } => {
                // Inlined (torch.fx inlines calls too): the region's inputs are the call's
                // arguments, in order; the PyTorch form keeps the forward's activations where
                // the engine's invertible region rebuilds them, with the same values.
                self.regions += 1;
                let prefix = format!("{}_", fresh_ident(&format!("{}{}", region.name, self.regions), &mut self.used));
                let f = &region.forward;
                let mut inner = HashMap::new();
                let ins = f.placeholders(InputKind::Input);
                if ins.len() != a.len() {
                    return Err(Error::export(format!(
                        "region '{}' takes {} inputs but is called with {}",
                        region.name,
                        ins.len(),
                        a.len()
                    )));
                }
                for ((_, v), arg) in ins.iter().zip(a) {
                    inner.insert(*v, arg.clone());
                }
                self.line(format!(
                    "# region {:?}{}",
                    region.name,
                    if region.inverse.is_some() { " (invertible)" } else { "" }
                ));
                self.graph(f, &mut inner, &prefix)?;
                let results: Vec<String> = f.outputs.iter().map(|o| inner[o].clone()).collect();
                self.assign(outs, results.join(", "));
                return Ok(());
            }
            Op::SumTo { .. }
            | Op::UnaryGrad { .. }
            | Op::PowGrad
            | Op::MaxGrad { .. }
            | Op::SoftmaxGrad { .. }
            | Op::LogSoftmaxGrad { .. }
            | Op::LayerNormGrad { .. }
            | Op::BatchNormGrad { .. }
            | Op::CrossEntropyGrad { .. }
            | Op::Conv2dGradInput { .. }
            | Op::Conv2dGradWeight { .. }
            | Op::MaxPool2dGrad { .. }
            | Op::AvgPool2dGrad { .. }
            | Op::AdaptiveAvgPool2dGrad { .. }
            | Op::SliceGrad { .. }
            | Op::DynamicSliceGrad { .. }
            | Op::IndexAdd { .. }
            | Op::GatherGrad { .. }
            | Op::ScatterMeanGrad { .. }
            | Op::SpMMTransposed { .. }
            | Op::SpMMValuesGrad { .. }
            | Op::InvertibleBackward { .. }
            | Op::OptimizerUpdate { .. } => return backward(),
        };
        self.assign(outs, rhs);
        Ok(())
    }
}

/// Whether parameter placeholder `i` of `g` is read, when written inline at its first use,
/// in the trace's order: only placeholders come between it and that use, and the use's
/// arguments name those parameters in the order they were read.
fn read_at_use(g: &Graph, i: usize) -> bool {
    let v = g.nodes[i].outputs[0];
    // (A parameter no op reads is read where the trace read it too.)
    let Some(j) = (i + 1..g.nodes.len()).find(|&j| g.nodes[j].inputs.contains(&v)) else { return false };
    let between = &g.nodes[i + 1..j];
    // (An input is an argument, read before all; a buffer read is a statement of its own.)
    if !between.iter().all(|n| matches!(n.op, Op::Placeholder { kind: InputKind::Parameter | InputKind::Input, .. })) {
        return false;
    }
    // The parameters read from i up to the use, in trace order, against the order of the
    // use's arguments.
    let read: Vec<ValueId> = std::iter::once(&g.nodes[i])
        .chain(between)
        .filter(|n| matches!(n.op, Op::Placeholder { kind: InputKind::Parameter, .. }))
        .map(|n| n.outputs[0])
        .filter(|o| g.nodes[j].inputs.contains(o))
        .collect();
    let mut used: Vec<ValueId> = Vec::new();
    for x in &g.nodes[j].inputs {
        if read.contains(x) && !used.contains(x) {
            used.push(*x);
        }
    }
    used == read
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

fn join(xs: &[usize]) -> String {
    xs.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

fn reduction_name(r: Reduction) -> &'static str {
    match r {
        Reduction::Mean => "mean",
        Reduction::Sum => "sum",
        Reduction::None => "none",
    }
}

/// A constant written inline: `torch.tensor(<nested lists of its shape>, dtype=...,
/// device=dev)` (a scalar as a bare number), one op when traced again.
fn constant(t: &Tensor) -> Result<String> {
    if t.numel() > MAX_INLINE_CONSTANT {
        return Err(Error::export(format!(
            "a constant of {} elements is too large to write into the code (at most {MAX_INLINE_CONSTANT}): \
             register it as a buffer instead",
            t.numel()
        )));
    }
    let values: Vec<String> = match t {
        Tensor::F32(a) | Tensor::F16(a) => a.iter().map(|x| f32_lit(*x)).collect(),
        Tensor::I32(a) => a.iter().map(|x| x.to_string()).collect(),
        Tensor::Bool(a) => a.iter().map(|x| py_bool(*x).to_string()).collect(),
    };
    let shape = t.shape();
    if shape.contains(&0) {
        return Ok(format!("torch.zeros({}, dtype={}, device=dev)", tuple(shape), dtype(t.dtype())));
    }
    Ok(format!("torch.tensor({}, dtype={}, device=dev)", nested(&values, shape), dtype(t.dtype())))
}

/// Row-major `values` as Python's nested lists of `shape` (a scalar: the value itself).
fn nested(values: &[String], shape: &[usize]) -> String {
    match shape {
        [] => values[0].clone(),
        [_] => format!("[{}]", values.join(", ")),
        [n, rest @ ..] => {
            let step = values.len() / n;
            let rows: Vec<String> = values.chunks(step).map(|c| nested(c, rest)).collect();
            format!("[{}]", rows.join(", "))
        }
    }
}
