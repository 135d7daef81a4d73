//! GNN layers on top of the tracer: SAGEConv, GCNConv, GroupAddRev, and the RevGNN model of
//! PyG's `examples/rev_gnn.py`.
//!
//! A conv takes its graph in either of PyG's two forms ([`Adjacency`]):
//! - `edge_index`, an int32 `[2, E]` tensor (PyG's standard input): messages flow from
//!   `edge_index[0]` (sources) to `edge_index[1]` (targets) as gathers and scatters, which is
//!   how PyG (and PopTorch Geometric on an IPU) runs them: SAGEConv's mean over incoming
//!   edges, GCNConv's `gcn_norm` with `add_remaining_self_loops`; a duplicate edge is one more
//!   message, as in PyG;
//! - a traced CSR matrix ([`SparseVar`], PyG's `SparseTensor adj_t`) whose rows are targets:
//!   for SAGEConv the mean-aggregation matrix ([`crate::gnn::data::mean_adjacency`]), for
//!   GCNConv the symmetric-normalised one ([`crate::gnn::data::gcn_adjacency`]). Message
//!   passing is then one sparse × dense matmul, one node in the graph the planner places.

use crate::rng::Rng;
use crate::tensor::{DType, Init, Param};
use crate::trace::nn::{call, check_arity, dense_arg, sparse_arg, Arg, LayerNorm, Linear, Module};
use crate::trace::{concat, resolve_dim, SparseVar, Tracer, Var};
use crate::{Error, Result};

/// How a [`SAGEConv`] aggregates the messages arriving at a node: PyG's `aggr`, of the ones
/// this engine has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregation {
    /// The mean (PyG's default). With `edge_index`, the mean of the messages; with a sparse
    /// adjacency, the product with it: the package's sparse argument is the mean-aggregation
    /// adjacency (rows normalised, [`crate::gnn::data::mean_adjacency`]), where PyG's `"mean"`
    /// on a weighted `adj_t` would divide the weighted sum by the count again.
    Mean,
    /// The sum (PyG's `"sum"`, or `"add"`): with `edge_index`, the sum of the messages; with a
    /// sparse adjacency, the weighted sum `adj @ x` (PyG's `spmm(adj_t, x, reduce="sum")`).
    Sum,
}

impl Aggregation {
    /// PyG's name of an aggregation: `"mean"`, `"sum"` or `"add"`; any other is an error
    /// naming it.
    pub fn parse(name: &str) -> Result<Aggregation> {
        match name {
            "mean" => Ok(Aggregation::Mean),
            "sum" | "add" => Ok(Aggregation::Sum),
            other => Err(Error::trace(format!(
                "SAGEConv: aggregation {other:?} is not in this engine: it has \"mean\" and \"sum\" (or \"add\")"
            ))),
        }
    }

    /// PyG's name: `"mean"` or `"sum"`.
    pub fn name(self) -> &'static str {
        match self {
            Aggregation::Mean => "mean",
            Aggregation::Sum => "sum",
        }
    }
}

/// GraphSAGE (PyG defaults): `lin_l(aggr_j x_j) + lin_r(x_i)`, `lin_l` with bias, `lin_r`
/// without; the mean aggregation unless [`SAGEConv::with_aggr`] says otherwise.
pub struct SAGEConv {
    pub lin_l: Linear,
    pub lin_r: Linear,
    pub aggr: Aggregation,
}

impl SAGEConv {
    pub fn new(cin: usize, cout: usize, rng: &mut Rng) -> Result<SAGEConv> {
        if cin == 0 || cout == 0 {
            return Err(Error::trace(format!("SAGEConv({cin}, {cout}): sizes must be positive")));
        }
        Ok(SAGEConv {
            lin_l: Linear::new(cin, cout, true, rng)?,
            lin_r: Linear::new(cin, cout, false, rng)?,
            aggr: Aggregation::Mean,
        })
    }

    /// The same conv aggregating by `aggr`.
    pub fn with_aggr(self, aggr: Aggregation) -> SAGEConv {
        SAGEConv { aggr, ..self }
    }

    /// `adj`: the adjacency, rows = targets (for the mean, the mean-aggregation adjacency).
    pub fn forward(&self, tr: &Tracer, x: &Var, adj: &SparseVar) -> Result<Var> {
        self.forward_on(tr, x, Adjacency::Sparse(adj))
    }

    /// PyG's `conv(x, edge_index)`: the mean (or sum) of the messages `x[edge_index[0]]`
    /// arriving at each target `edge_index[1]` (zero for a node with none).
    pub fn forward_edges(&self, tr: &Tracer, x: &Var, edge_index: &Var) -> Result<Var> {
        self.forward_on(tr, x, Adjacency::EdgeIndex(edge_index))
    }

    fn forward_on(&self, tr: &Tracer, x: &Var, adj: Adjacency) -> Result<Var> {
        let agg = match adj.checked(tr, "SAGEConv", x)? {
            // Either aggregation: see [`Aggregation`].
            Adjacency::Sparse(a) => a.matmul(x)?,
            Adjacency::EdgeIndex(e) => {
                let (src, dst) = endpoints(e)?;
                let messages = x.index_select(0, &src)?;
                match self.aggr {
                    Aggregation::Mean => messages.scatter_mean(&dst, x.shape()[0])?,
                    Aggregation::Sum => messages.scatter_add(&dst, x.shape()[0])?,
                }
            }
        };
        let l = call(tr, "lin_l", &self.lin_l, &agg)?;
        let r = call(tr, "lin_r", &self.lin_r, x)?;
        l.add(&r)
    }
}

/// A conv's graph argument: PyG's `edge_index` or a CSR adjacency (see the module docs).
#[derive(Clone, Copy)]
pub enum Adjacency<'a> {
    EdgeIndex(&'a Var),
    Sparse(&'a SparseVar),
}

impl<'a> Adjacency<'a> {
    /// Argument `i` of `module`'s forward as an adjacency, or an error naming what it got.
    pub fn arg(tr: &Tracer, module: &str, args: &'a [Arg], i: usize) -> Result<Adjacency<'a>> {
        match args.get(i) {
            Some(Arg::Sparse(s)) => Ok(Adjacency::Sparse(s)),
            Some(Arg::Dense(v)) => Ok(Adjacency::EdgeIndex(v)),
            None => Err(Error::trace(format!(
                "{module}.forward{}: argument {i} (edge_index) is missing: pass an int32 [2, E] edge_index or a sparse \
                 adjacency",
                at_scope(tr)
            ))),
        }
    }

    /// The adjacency, when it fits the node features `x` (`[nodes, channels]`): an int32
    /// `[2, E]` edge_index, or a square nodes × nodes matrix.
    fn checked(self, tr: &Tracer, module: &str, x: &Var) -> Result<Adjacency<'a>> {
        let nodes = x.shape().first().copied().unwrap_or(0);
        let bad = |what: String| {
            Error::trace(format!("{module}.forward{}: x must be [nodes, channels] and {what}", at_scope(tr)))
        };
        if x.shape().len() != 2 {
            return Err(bad(format!("the graph fit it, got x {}", x.ty())));
        }
        match self {
            Adjacency::Sparse(a) if a.n_rows != a.n_cols || a.n_rows != nodes => Err(bad(format!(
                "adj a square nodes x nodes matrix, got x {} and adj {}x{}",
                x.ty(),
                a.n_rows,
                a.n_cols
            ))),
            Adjacency::EdgeIndex(e) if e.dtype() != DType::Int32 || e.shape().len() != 2 || e.shape()[0] != 2 => {
                Err(bad(format!(
                    "edge_index an int32 [2, num_edges] tensor (sources, then targets), got edge_index {}",
                    e.ty()
                )))
            }
            ok => Ok(ok),
        }
    }
}

/// ` (module 'a.b')`, or nothing at the top level.
fn at_scope(tr: &Tracer) -> String {
    match tr.current_scope() {
        s if s.is_empty() => String::new(),
        s => format!(" (module '{s}')"),
    }
}

/// `edge_index[0]` and `edge_index[1]`: the sources and the targets, `[E]` each.
fn endpoints(edge_index: &Var) -> Result<(Var, Var)> {
    let row = |r: usize| edge_index.slice(0, r, r + 1, 1)?.reshape(&[-1]);
    Ok((row(0)?, row(1)?))
}

impl Module for SAGEConv {
    /// `(x, edge_index)`: node features and PyG's `edge_index`, or the mean-aggregation
    /// adjacency.
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        check_arity(tr, "SAGEConv", args, 2, "x, edge_index")?;
        let x = dense_arg(tr, "SAGEConv", args, 0, "x")?;
        self.forward_on(tr, x, Adjacency::arg(tr, "SAGEConv", args, 1)?)
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("lin_l".into(), &self.lin_l as &dyn Module), ("lin_r".into(), &self.lin_r)]
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        vec![("lin_l".into(), &mut self.lin_l as &mut dyn Module), ("lin_r".into(), &mut self.lin_r)]
    }
}

/// GCN (Kipf & Welling, PyG defaults): `Â (x W^T) + b` with `Â = D^-1/2 (A + I) D^-1/2`.
pub struct GCNConv {
    pub lin: Linear,
    pub bias: Param,
}

impl GCNConv {
    pub fn new(cin: usize, cout: usize, rng: &mut Rng) -> Result<GCNConv> {
        if cin == 0 || cout == 0 {
            return Err(Error::trace(format!("GCNConv({cin}, {cout}): sizes must be positive")));
        }
        // PyG: glorot weight, zero bias.
        let mut lin = Linear::new(cin, cout, false, rng)?;
        let a = (6.0 / (cin + cout) as f32).sqrt();
        let what = format!("GCNConv({cin}, {cout})");
        lin.weight = Param::new(&format!("{what}: the weight"), &[cout, cin], DType::Float32, Init::uniform(a, rng))?;
        let bias = Param::new(&format!("{what}: the bias"), &[cout], DType::Float32, Init::Fill(0.0))?;
        Ok(GCNConv { lin, bias })
    }

    /// `adj`: the normalised adjacency, rows = targets.
    pub fn forward(&self, tr: &Tracer, x: &Var, adj: &SparseVar) -> Result<Var> {
        self.forward_on(tr, x, Adjacency::Sparse(adj))
    }

    /// PyG's `conv(x, edge_index)`: `gcn_norm` on the edges as PyG computes it
    /// (`add_remaining_self_loops`: the edges that are not self-loops, each with weight 1,
    /// plus one self-loop of weight 1 per node; degrees counted at the targets), then
    /// `Σ_e d(src)^-1/2 d(dst)^-1/2 h[src]` at each target, plus the bias.
    pub fn forward_edges(&self, tr: &Tracer, x: &Var, edge_index: &Var) -> Result<Var> {
        self.forward_on(tr, x, Adjacency::EdgeIndex(edge_index))
    }

    fn forward_on(&self, tr: &Tracer, x: &Var, adj: Adjacency) -> Result<Var> {
        let adj = adj.checked(tr, "GCNConv", x)?;
        let h = call(tr, "lin", &self.lin, x)?;
        let agg = match adj {
            Adjacency::Sparse(a) => a.matmul(&h)?,
            Adjacency::EdgeIndex(e) => gcn_propagate(tr, &h, e)?,
        };
        agg.add(&tr.param("bias", &self.bias)?)
    }
}

/// Float32 holds every node index exactly up to 2^24: the largest graph whose self-loops
/// [`gcn_propagate`] can find by arithmetic on the indices.
const GCN_MAX_NODES: usize = 1 << 24;

/// GCNConv's propagation over `edge_index` (see [`GCNConv::forward_edges`]), on `h = x W^T`.
fn gcn_propagate(tr: &Tracer, h: &Var, edge_index: &Var) -> Result<Var> {
    let (n, f32) = (h.shape()[0], DType::Float32);
    if n > GCN_MAX_NODES {
        return Err(Error::trace(format!(
            "GCNConv.forward{}: {n} nodes are more than the {GCN_MAX_NODES} an edge_index can address here; pass \
             a sparse adjacency (gcnAdjacency()) instead",
            at_scope(tr)
        )));
    }
    let (src, dst) = endpoints(edge_index)?;
    // The weights are computed in float32 (exact on indices below 2^24) and cast to h's
    // dtype at the end. An edge's weight is 1 unless it is a self-loop (removed: each node
    // gets one below): with d = src - dst a whole number, 1 - relu(1 - d²) is 0 for d = 0
    // and 1 otherwise.
    let d = src.cast(f32)?.sub(&dst.cast(f32)?)?;
    let one = tr.full(&[], f32, 1.0)?;
    let w = one.sub(&one.sub(&d.mul(&d)?)?.relu()?)?;
    // Degrees at the targets, the self-loop's 1 included; never 0, so d^-1/2 is finite.
    let deg = w.scatter_add(&dst, n)?.add(&one)?;
    let dinv = one.div(&deg.sqrt()?)?;
    let norm = dinv.index_select(0, &src)?.mul(&w)?.mul(&dinv.index_select(0, &dst)?)?;
    let as_h = |v: Var| if h.dtype() == f32 { Ok(v) } else { v.cast(h.dtype()) };
    let messages = h.index_select(0, &src)?.mul(&as_h(norm.reshape(&[-1, 1])?)?)?;
    let self_loops = h.mul(&as_h(dinv.mul(&dinv)?.reshape(&[-1, 1])?)?)?;
    messages.scatter_add(&dst, n)?.add(&self_loops)
}

impl Module for GCNConv {
    /// `(x, edge_index)`: node features and PyG's `edge_index`, or the GCN-normalised
    /// adjacency.
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        check_arity(tr, "GCNConv", args, 2, "x, edge_index")?;
        let x = dense_arg(tr, "GCNConv", args, 0, "x")?;
        self.forward_on(tr, x, Adjacency::arg(tr, "GCNConv", args, 1)?)
    }
    fn local_parameters(&self) -> Vec<(&str, &Param)> {
        vec![("bias", &self.bias)]
    }
    fn local_parameters_mut(&mut self) -> Vec<(&str, &mut Param)> {
        vec![("bias", &mut self.bias)]
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("lin".into(), &self.lin as &dyn Module)]
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        vec![("lin".into(), &mut self.lin as &mut dyn Module)]
    }
}

/// The block of `examples/rev_gnn.py`: LayerNorm → ReLU → dropout (shared mask) → SAGEConv.
pub struct GnnBlock {
    pub norm: LayerNorm,
    pub conv: SAGEConv,
    pub p: f32,
}

impl GnnBlock {
    pub fn new(cin: usize, cout: usize, p: f32, rng: &mut Rng) -> Result<GnnBlock> {
        Ok(GnnBlock { norm: LayerNorm::try_new(cin)?, conv: SAGEConv::new(cin, cout, rng)?, p })
    }
}

impl Module for GnnBlock {
    /// `(x, edge_index, mask?)` (or a sparse adjacency for `edge_index`): `mask`, when
    /// given, is this group's dropout keep-mask.
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        check_arity(tr, "GnnBlock", args, 3, "x, edge_index, mask?")?;
        let x = dense_arg(tr, "GnnBlock", args, 0, "x")?;
        let adj = Adjacency::arg(tr, "GnnBlock", args, 1)?;
        let mut h = call(tr, "norm", &self.norm, x)?.relu()?;
        if args.len() > 2 {
            let mask = dense_arg(tr, "GnnBlock", args, 2, "mask")?;
            h = h.dropout_with_mask(mask, self.p)?;
        }
        tr.scope("conv", || self.conv.forward_on(tr, &h, adj))
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("norm".into(), &self.norm as &dyn Module), ("conv".into(), &self.conv)]
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        vec![("norm".into(), &mut self.norm as &mut dyn Module), ("conv".into(), &mut self.conv)]
    }
}

/// PyG's `GroupAddRev(conv, split_dim, num_groups, disable)`: the input is cut into `C ≥ 2`
/// groups along `split_dim`, `y_0 = x_0 + f_0(Σ_{i≥1} x_i)`, `y_i = x_i + f_i(y_{i-1})`,
/// output `cat(y)`. Each group `f_i` is a module called as `f_i(x_i, args…)`; as in PyG the
/// first extra argument (the adjacency) is passed whole, and a later dense one whose size
/// along `split_dim` equals the input's (the dropout mask) is cut per group too. Traced as
/// an invertible region: its backward rebuilds `x` from `y` instead of storing it.
/// `disable` records the plain computation (ordinary autograd, memory grows with depth).
pub struct GroupAddRev<F: Module> {
    pub groups: Vec<F>,
    pub split_dim: isize,
    pub disable: bool,
}

/// Which flattened region inputs make up one argument.
enum Slot {
    Dense,
    Sparse { n_rows: usize, n_cols: usize },
}

impl<F: Module> GroupAddRev<F> {
    /// Groups along the last dim (PyG's default `split_dim=-1`).
    pub fn new(groups: Vec<F>, disable: bool) -> Result<GroupAddRev<F>> {
        GroupAddRev::with_split_dim(groups, -1, disable)
    }

    /// Groups along `split_dim` (negative counts from the end).
    pub fn with_split_dim(groups: Vec<F>, split_dim: isize, disable: bool) -> Result<GroupAddRev<F>> {
        if groups.len() < 2 {
            return Err(Error::trace(format!(
                "The number of groups should not be smaller than '2' (got {})",
                groups.len()
            )));
        }
        Ok(GroupAddRev { groups, split_dim, disable })
    }

    fn group(&self, tr: &Tracer, i: usize, x: &Var, args: &[Arg]) -> Result<Var> {
        let mut all = Vec::with_capacity(args.len() + 1);
        all.push(Arg::Dense(x.clone()));
        all.extend_from_slice(args);
        let y = tr.scope("convs", || tr.scope(&i.to_string(), || self.groups[i].forward_args(tr, &all)))?;
        if y.ty() != x.ty() {
            return Err(Error::trace(format!(
                "GroupAddRev '{}': group {i} maps {} to {}: each group must keep its input's shape",
                tr.current_scope(),
                x.ty(),
                y.ty()
            )));
        }
        Ok(y)
    }

    /// `x` cut into the groups (equal parts along `split_dim`), or an error naming the sizes.
    fn chunk_input(&self, tr: &Tracer, x: &Var) -> Result<Vec<Var>> {
        let c = self.groups.len();
        let dim = self.split_dim_of(x)?;
        let width = x.shape().get(dim).copied().unwrap_or(0);
        if width % c != 0 || width == 0 {
            return Err(Error::trace(format!(
                "GroupAddRev '{}': the input {} has size {width} along dim {}, which {c} groups cannot share \
                 equally",
                tr.current_scope(),
                x.ty(),
                self.split_dim
            )));
        }
        x.chunk(c, dim as isize)
    }

    /// Each group's arguments: the first passed whole (the adjacency), a later dense one cut
    /// per group when its size along `split_dim` is the input's (PyG's `_chunk`).
    fn chunk_args(&self, width: usize, args: &[Arg]) -> Result<Vec<Vec<Arg>>> {
        let c = self.groups.len();
        let mut per = vec![Vec::with_capacity(args.len()); c];
        for (k, a) in args.iter().enumerate() {
            let cut = match a {
                Arg::Dense(v) if k > 0 => match resolve_dim(self.split_dim, v.shape().len(), "GroupAddRev") {
                    Ok(d) if v.shape().get(d) == Some(&width) => Some(v.chunk(c, d as isize)?),
                    _ => None,
                },
                _ => None,
            };
            for (i, p) in per.iter_mut().enumerate() {
                p.push(match &cut {
                    Some(parts) => Arg::Dense(parts[i].clone()),
                    None => a.clone(),
                });
            }
        }
        Ok(per)
    }

    fn split_dim_of(&self, x: &Var) -> Result<usize> {
        match x.shape().len() {
            0 => Err(Error::trace("GroupAddRev: the input must have at least one dimension, got a scalar")),
            rank => resolve_dim(self.split_dim, rank, "GroupAddRev: split_dim"),
        }
    }

    fn fwd(&self, tr: &Tracer, x: &Var, args: &[Arg]) -> Result<Var> {
        let c = self.groups.len();
        let xs = self.chunk_input(tr, x)?;
        let dim = self.split_dim_of(x)?;
        let per = self.chunk_args(x.shape()[dim], args)?;
        let mut y_in = xs[1].clone();
        for xi in &xs[2..] {
            y_in = y_in.add(xi)?;
        }
        let mut ys = Vec::with_capacity(c);
        for i in 0..c {
            y_in = xs[i].add(&self.group(tr, i, &y_in, &per[i])?)?;
            ys.push(y_in.clone());
        }
        concat(&ys.iter().collect::<Vec<_>>(), dim as isize)
    }

    fn inv(&self, tr: &Tracer, y: &Var, args: &[Arg]) -> Result<Var> {
        let c = self.groups.len();
        let ys = self.chunk_input(tr, y)?;
        let dim = self.split_dim_of(y)?;
        let per = self.chunk_args(y.shape()[dim], args)?;
        let mut xs: Vec<Option<Var>> = vec![None; c];
        for i in (0..c).rev() {
            let y_in = if i > 0 {
                ys[i - 1].clone()
            } else {
                let recovered = |k: usize| xs[k].clone().ok_or_else(|| Error::trace("GroupAddRev: inverse order"));
                let mut s = recovered(1)?;
                for k in 2..c {
                    s = s.add(&recovered(k)?)?;
                }
                s
            };
            xs[i] = Some(ys[i].sub(&self.group(tr, i, &y_in, &per[i])?)?);
        }
        let xs: Vec<Var> = xs.into_iter().flatten().collect();
        concat(&xs.iter().collect::<Vec<_>>(), dim as isize)
    }

    /// Records the layer on `x` with the groups' other arguments `args` (the adjacency, then
    /// per-node extras such as the dropout mask).
    pub fn forward(&self, tr: &Tracer, x: &Var, args: &[Arg]) -> Result<Var> {
        if self.disable {
            return self.fwd(tr, x, args);
        }
        // The region takes tensors: a sparse argument travels as its three arrays.
        let mut slots = Vec::with_capacity(args.len());
        let mut others: Vec<&Var> = Vec::new();
        for a in args {
            match a {
                Arg::Dense(v) => {
                    slots.push(Slot::Dense);
                    others.push(v);
                }
                Arg::Sparse(s) => {
                    slots.push(Slot::Sparse { n_rows: s.n_rows, n_cols: s.n_cols });
                    others.extend([&s.indptr, &s.indices, &s.values]);
                }
            }
        }
        let unpack = |o: &[Var]| -> Vec<Arg> {
            let mut at = 0;
            slots
                .iter()
                .map(|slot| match *slot {
                    Slot::Dense => {
                        at += 1;
                        Arg::Dense(o[at - 1].clone())
                    }
                    Slot::Sparse { n_rows, n_cols } => {
                        at += 3;
                        Arg::Sparse(SparseVar {
                            indptr: o[at - 3].clone(),
                            indices: o[at - 2].clone(),
                            values: o[at - 1].clone(),
                            n_rows,
                            n_cols,
                        })
                    }
                })
                .collect()
        };
        tr.invertible("rev", x, &others, |x, o| self.fwd(tr, x, &unpack(o)), |y, o| self.inv(tr, y, &unpack(o)))
    }
}

impl<F: Module> Module for GroupAddRev<F> {
    /// `(x, args…)`: see [`GroupAddRev::forward`].
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        let x = dense_arg(tr, "GroupAddRev", args, 0, "x")?;
        GroupAddRev::forward(self, tr, x, &args[1..])
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        self.groups.iter().enumerate().map(|(i, g)| (format!("convs.{i}"), g as &dyn Module)).collect()
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        self.groups.iter_mut().enumerate().map(|(i, g)| (format!("convs.{i}"), g as &mut dyn Module)).collect()
    }
}

/// Hyper-parameters of [`RevGnn`].
#[derive(Clone, Debug)]
pub struct RevGnnConfig {
    pub in_channels: usize,
    pub hidden: usize,
    pub out_channels: usize,
    pub num_layers: usize,
    pub num_groups: usize,
    pub dropout: f32,
    /// `--no-rev`: GroupAddRev with `disable`, memory grows with depth.
    pub disable_rev: bool,
}

/// RevGNN of `examples/rev_gnn.py`: lin1 → shared dropout mask → `num_layers` ×
/// GroupAddRev(GnnBlock) → LayerNorm → ReLU → Dropout → lin2.
pub struct RevGnn {
    pub cfg: RevGnnConfig,
    pub lin1: Linear,
    pub convs: Vec<GroupAddRev<GnnBlock>>,
    pub norm: LayerNorm,
    pub lin2: Linear,
}

impl RevGnn {
    pub fn new(cfg: RevGnnConfig, rng: &mut Rng) -> Result<RevGnn> {
        if cfg.num_groups < 2 {
            return Err(Error::trace(format!(
                "The number of groups should not be smaller than '2' (got {})",
                cfg.num_groups
            ))
            .with_option("groups"));
        }
        if cfg.hidden == 0 || !cfg.hidden.is_multiple_of(cfg.num_groups) {
            return Err(Error::trace(format!(
                "hidden size {} is not divisible by the number of groups {}",
                cfg.hidden, cfg.num_groups
            ))
            .with_option("hidden"));
        }
        if !(0.0..1.0).contains(&cfg.dropout) {
            return Err(Error::trace(format!("dropout must be in [0, 1), got {}", cfg.dropout)).with_option("dropout"));
        }
        let lin1 = Linear::new(cfg.in_channels, cfg.hidden, true, rng)?;
        let w = cfg.hidden / cfg.num_groups;
        let mut convs = Vec::new();
        for _ in 0..cfg.num_layers {
            let groups = (0..cfg.num_groups).map(|_| GnnBlock::new(w, w, cfg.dropout, rng)).collect::<Result<_>>()?;
            convs.push(GroupAddRev::new(groups, cfg.disable_rev)?);
        }
        let norm = LayerNorm::try_new(cfg.hidden)?;
        let lin2 = Linear::new(cfg.hidden, cfg.out_channels, true, rng)?;
        Ok(RevGnn { cfg, lin1, convs, norm, lin2 })
    }

    /// Records the model: sparse features `x`, mean adjacency `adj`; returns logits.
    /// In a training trace (`tr.training()`), one dropout mask is drawn and shared by all
    /// layers, and ordinary dropout follows the final norm.
    pub fn forward(&self, tr: &Tracer, x: &SparseVar, adj: &SparseVar) -> Result<Var> {
        let h = tr.scope("lin1", || self.lin1.forward_sparse(tr, x))?;
        let p = self.cfg.dropout;
        let mut args = vec![Arg::Sparse(adj.clone())];
        if tr.training() && p > 0.0 {
            args.push(Arg::Dense(tr.random_mask(h.shape(), p)?));
        }
        let mut h = h;
        for (i, conv) in self.convs.iter().enumerate() {
            h = tr.scope("convs", || tr.scope(&i.to_string(), || conv.forward(tr, &h, &args)))?;
        }
        let h = call(tr, "norm", &self.norm, &h)?.relu()?;
        let h = crate::trace::nn::Dropout { p }.forward(tr, &h)?;
        call(tr, "lin2", &self.lin2, &h)
    }
}

impl Module for RevGnn {
    /// `(x, adj)`: sparse node features and the mean-aggregation adjacency.
    fn forward_args(&self, tr: &Tracer, args: &[Arg]) -> Result<Var> {
        check_arity(tr, "RevGnn", args, 2, "x, adj")?;
        let x = sparse_arg(tr, "RevGnn", args, 0, "x")?;
        let adj = sparse_arg(tr, "RevGnn", args, 1, "adj")?;
        RevGnn::forward(self, tr, x, adj)
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        let mut v: Vec<(String, &dyn Module)> = vec![("lin1".into(), &self.lin1 as &dyn Module)];
        for (i, c) in self.convs.iter().enumerate() {
            v.push((format!("convs.{i}"), c));
        }
        v.push(("norm".into(), &self.norm));
        v.push(("lin2".into(), &self.lin2));
        v
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        let mut v: Vec<(String, &mut dyn Module)> = vec![("lin1".into(), &mut self.lin1 as &mut dyn Module)];
        for (i, c) in self.convs.iter_mut().enumerate() {
            v.push((format!("convs.{i}"), c));
        }
        v.push(("norm".into(), &mut self.norm));
        v.push(("lin2".into(), &mut self.lin2));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autograd::{training_graph, TrainOptions};
    use crate::exec::{run, Store};
    use crate::tensor::Tensor;
    use crate::trace::nn::{Sequential, GELU};
    use std::rc::Rc;

    /// Parameter gradients by name.
    type Grads = Vec<(String, Vec<f32>)>;

    /// Loss and parameter gradients of three GroupAddRev layers of `groups` groups split along
    /// dim 0 (rows), each group `Linear → GELU`, with an extra per-row argument.
    /// Also: how many invertible backward nodes the training graph has, and how many distinct
    /// backward graphs they run.
    fn rows_stack(disable: bool) -> (f32, Grads, (usize, usize)) {
        let mut rng = Rng::new(11);
        let make = |rng: &mut Rng| -> Sequential {
            Sequential::new(vec![Box::new(Linear::new(5, 5, true, rng).unwrap()), Box::new(GELU)])
        };
        let layers: Vec<GroupAddRev<Sequential>> = (0..3)
            .map(|_| GroupAddRev::with_split_dim((0..3).map(|_| make(&mut rng)).collect(), 0, disable).unwrap())
            .collect();
        let tr = Tracer::new();
        let x = tr.input("x", &[6, 5], DType::Float32).unwrap();
        let mut h = x.clone();
        for (i, l) in layers.iter().enumerate() {
            h = tr.scope("convs", || tr.scope(&i.to_string(), || l.forward(&tr, &h, &[]))).unwrap();
        }
        let loss = h.tanh().unwrap().mean(&[], false).unwrap();
        let t = tr.finish(&[&loss]).unwrap();
        let tg = training_graph(&t.graph, 0, &TrainOptions { return_grads: true, ..Default::default() }).unwrap();
        let xv: Vec<f32> = (0..30).map(|i| ((i * 7 % 11) as f32 - 5.0) / 5.0).collect();
        let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
        let r = run(&tg.graph, &mut store, &[Rc::new(Tensor::from_f32(&[6, 5], xv).unwrap())]).unwrap();
        let grads = tg.grad_outputs.iter().map(|(n, i)| (n.clone(), r.outputs[*i].to_f32_vec())).collect();
        let vjps: Vec<_> = tg
            .graph
            .nodes
            .iter()
            .filter_map(|n| match &n.op {
                crate::ir::Op::InvertibleBackward { region, vjp, needs_grad } => {
                    // A backward graph reused from an earlier alike region (renamed) is the
                    // one differentiating this region gives.
                    let own = crate::autograd::invertible_backward_graph(
                        &region.forward,
                        region.inverse.as_ref().unwrap(),
                        needs_grad,
                    )
                    .unwrap();
                    assert!(**vjp == own, "the backward graph of region '{}' differs", region.name);
                    Some(Rc::as_ptr(vjp))
                }
                _ => None,
            })
            .collect();
        let distinct = vjps.iter().collect::<std::collections::HashSet<_>>().len();
        (r.outputs[0].to_f32_vec()[0], grads, (vjps.len(), distinct))
    }

    #[test]
    fn group_add_rev_splits_along_any_dim_and_matches_the_plain_computation() {
        let (l_rev, g_rev, vjps) = rows_stack(false);
        let (l_plain, g_plain, plain_vjps) = rows_stack(true);
        // The three layers' regions are alike but for their scopes; the first one's input needs
        // no gradient: the third layer's backward graph is the second one's with the scopes
        // renamed, and equal to its own (checked in `rows_stack`).
        assert_eq!(vjps, (3, 3));
        assert_eq!(plain_vjps, (0, 0));
        assert!((l_rev - l_plain).abs() < 1e-6, "{l_rev} vs {l_plain}");
        assert_eq!(g_rev.len(), 3 * 3 * 2);
        assert!(g_rev[0].0.starts_with("convs.0.convs.0.0."), "{}", g_rev[0].0);
        for ((n, a), (_, b)) in g_rev.iter().zip(&g_plain) {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() < 1e-5, "{n}: {x} vs {y}");
            }
        }
    }

    #[test]
    fn every_gnn_module_lists_the_same_parameters_mutably() {
        let cfg = RevGnnConfig {
            in_channels: 5,
            hidden: 4,
            out_channels: 3,
            num_layers: 2,
            num_groups: 2,
            dropout: 0.5,
            disable_rev: false,
        };
        let mut m = RevGnn::new(cfg, &mut Rng::new(1)).unwrap();
        crate::trace::nn::tests::check_mut_views(&mut m);
        assert_eq!(m.named_parameters().len(), 4 + 2 * 2 * 5 + 2);
        crate::trace::nn::tests::check_mut_views(&mut GCNConv::new(3, 2, &mut Rng::new(0)).unwrap());
        m.set_parameter("convs.1.convs.0.conv.lin_r.weight", Tensor::zeros(&[2, 2], DType::Float32)).unwrap();
        assert_eq!(m.convs[1].groups[0].conv.lin_r.weight.value().unwrap().to_f32_vec(), vec![0.0; 4]);
    }

    #[test]
    fn arguments_are_checked_by_each_module() {
        let mut rng = Rng::new(0);
        let tr = Tracer::new();
        let x = tr.input("x", &[4, 6], DType::Float32).unwrap();
        let adj = SparseVar::input(&tr, "adj", 4, 4, 8).unwrap();
        let conv = SAGEConv::new(6, 3, &mut rng).unwrap();
        let e = tr.scope("conv", || Module::forward(&conv, &tr, &x)).unwrap_err().to_string();
        assert_eq!(
            e,
            "SAGEConv.forward (module 'conv'): argument 1 (edge_index) is missing: pass an int32 [2, E] edge_index or \
             a sparse adjacency"
        );
        let e = conv.forward_args(&tr, &[Arg::Dense(x.clone()), Arg::Dense(x.clone())]).unwrap_err().to_string();
        assert!(
            e.contains("edge_index an int32 [2, num_edges] tensor (sources, then targets), got edge_index f32[4,6]"),
            "{e}"
        );
        let e =
            conv.forward_args(&tr, &[x.clone().into(), adj.clone().into(), x.clone().into()]).unwrap_err().to_string();
        assert_eq!(e, "SAGEConv.forward takes (x, edge_index), 2 arguments, but got 3");
        let wide = SparseVar::input(&tr, "wide", 4, 5, 8).unwrap();
        let e = GCNConv::new(6, 3, &mut rng).unwrap().forward_args(&tr, &[x.clone().into(), wide.into()]);
        assert!(e.unwrap_err().to_string().contains("adj a square nodes x nodes matrix, got x f32[4,6] and adj 4x5"));
        let y = conv.forward_args(&tr, &[x.clone().into(), adj.clone().into()]).unwrap();
        assert_eq!(y.shape(), &[4, 3]);
        // Groups must share the input equally and keep its shape.
        let groups = (0..4).map(|_| GnnBlock::new(1, 1, 0.5, &mut rng).unwrap()).collect();
        let e =
            GroupAddRev::new(groups, false).unwrap().forward(&tr, &x, &[adj.clone().into()]).unwrap_err().to_string();
        assert!(e.contains("has size 6 along dim -1, which 4 groups cannot share equally"), "{e}");
        let groups = (0..2).map(|_| SAGEConv::new(3, 2, &mut rng).unwrap()).collect();
        let e = GroupAddRev::new(groups, true).unwrap().forward(&tr, &x, &[adj.into()]).unwrap_err().to_string();
        assert!(e.contains("group 0 maps f32[4,3] to f32[4,2]"), "{e}");
        let e = GroupAddRev::<SAGEConv>::new(vec![], false).err().unwrap().to_string();
        assert_eq!(e, "The number of groups should not be smaller than '2' (got 0)");
    }
}
