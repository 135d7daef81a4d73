//! GNN layers on top of the tracer: SAGEConv, GCNConv, GroupAddRev, and the RevGNN model of
//! PyG's `examples/rev_gnn.py`.
//!
//! Adjacency is a traced CSR matrix ([`SparseVar`]) whose rows are targets: for SAGEConv
//! the mean-aggregation matrix ([`crate::gnn::data::mean_adjacency`]), for GCNConv the
//! symmetric-normalised one ([`crate::gnn::data::gcn_adjacency`]). Message passing is one
//! sparse × dense matmul, so it is one node in the graph the emulator places.

use crate::rng::Rng;
use crate::tensor::{DType, Tensor};
use crate::trace::nn::{call, LayerNorm, Linear, Module};
use crate::trace::{concat, SparseVar, Tracer, Var};
use crate::{Error, Result};
use std::rc::Rc;

/// GraphSAGE with mean aggregation (PyG defaults): `lin_l(mean_j x_j) + lin_r(x_i)`,
/// `lin_l` with bias, `lin_r` without.
pub struct SAGEConv {
    pub lin_l: Linear,
    pub lin_r: Linear,
}

impl SAGEConv {
    pub fn new(cin: usize, cout: usize, rng: &mut Rng) -> Result<SAGEConv> {
        Ok(SAGEConv { lin_l: Linear::new(cin, cout, true, rng)?, lin_r: Linear::new(cin, cout, false, rng)? })
    }

    /// `adj`: mean-aggregation adjacency, rows = targets.
    pub fn forward(&self, tr: &Tracer, x: &Var, adj: &SparseVar) -> Result<Var> {
        let agg = adj.matmul(x)?;
        let l = call(tr, "lin_l", &self.lin_l, &agg)?;
        let r = call(tr, "lin_r", &self.lin_r, x)?;
        l.add(&r)
    }
}

impl Module for SAGEConv {
    fn forward(&self, tr: &Tracer, _x: &Var) -> Result<Var> {
        Err(Error::trace(format!("SAGEConv '{}' needs an adjacency: call SAGEConv::forward", tr.current_scope())))
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("lin_l".into(), &self.lin_l as &dyn Module), ("lin_r".into(), &self.lin_r)]
    }
}

/// GCN (Kipf & Welling, PyG defaults): `Â (x W^T) + b` with `Â = D^-1/2 (A + I) D^-1/2`.
pub struct GCNConv {
    pub lin: Linear,
    pub bias: Rc<Tensor>,
}

impl GCNConv {
    pub fn new(cin: usize, cout: usize, rng: &mut Rng) -> Result<GCNConv> {
        // PyG: glorot weight, zero bias.
        let mut lin = Linear::new(cin, cout, false, rng)?;
        let a = (6.0 / (cin + cout) as f32).sqrt();
        let w: Vec<f32> = (0..cin * cout).map(|_| rng.uniform_range(-a, a)).collect();
        lin.weight = Rc::new(Tensor::from_f32(&[cout, cin], w).expect("shape"));
        Ok(GCNConv { lin, bias: Rc::new(Tensor::zeros(&[cout], DType::Float32)) })
    }

    /// `adj`: the normalised adjacency, rows = targets.
    pub fn forward(&self, tr: &Tracer, x: &Var, adj: &SparseVar) -> Result<Var> {
        let h = call(tr, "lin", &self.lin, x)?;
        adj.matmul(&h)?.add(&tr.param("bias", &self.bias)?)
    }
}

impl Module for GCNConv {
    fn forward(&self, tr: &Tracer, _x: &Var) -> Result<Var> {
        Err(Error::trace(format!("GCNConv '{}' needs an adjacency: call GCNConv::forward", tr.current_scope())))
    }
    fn local_parameters(&self) -> Vec<(&str, &Rc<Tensor>)> {
        vec![("bias", &self.bias)]
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("lin".into(), &self.lin as &dyn Module)]
    }
}

/// One group function of a [`GroupAddRev`]: `f(x, adj, extra…)` with `x`'s width.
pub trait GroupFn {
    fn forward(&self, tr: &Tracer, x: &Var, adj: &SparseVar, extra: &[Var]) -> Result<Var>;
    fn module(&self) -> &dyn Module;
}

/// The block of `examples/rev_gnn.py`: LayerNorm → ReLU → dropout (shared mask) → SAGEConv.
pub struct GnnBlock {
    pub norm: LayerNorm,
    pub conv: SAGEConv,
    pub p: f32,
}

impl GnnBlock {
    pub fn new(cin: usize, cout: usize, p: f32, rng: &mut Rng) -> Result<GnnBlock> {
        Ok(GnnBlock { norm: LayerNorm::new(cin), conv: SAGEConv::new(cin, cout, rng)?, p })
    }
}

impl GroupFn for GnnBlock {
    /// `extra[0]`, when given, is this group's dropout keep-mask.
    fn forward(&self, tr: &Tracer, x: &Var, adj: &SparseVar, extra: &[Var]) -> Result<Var> {
        let mut h = call(tr, "norm", &self.norm, x)?.relu()?;
        if let Some(mask) = extra.first() {
            h = h.dropout_with_mask(mask, self.p)?;
        }
        tr.scope("conv", || self.conv.forward(tr, &h, adj))
    }
    fn module(&self) -> &dyn Module {
        self
    }
}

impl Module for GnnBlock {
    fn forward(&self, tr: &Tracer, _x: &Var) -> Result<Var> {
        Err(Error::trace(format!("GnnBlock '{}' needs an adjacency", tr.current_scope())))
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("norm".into(), &self.norm as &dyn Module), ("conv".into(), &self.conv)]
    }
}

/// PyG's `GroupAddRev`: the input is cut into `C ≥ 2` groups along the last dim,
/// `y_0 = x_0 + f_0(Σ_{i≥1} x_i)`, `y_i = x_i + f_i(y_{i-1})`, output `cat(y)`. Per-node
/// extras (the dropout mask) are cut per group too. Traced as an invertible region: its
/// backward rebuilds `x` from `y` instead of storing it. `disable` records the plain
/// computation (ordinary autograd, memory grows with depth).
pub struct GroupAddRev<F: GroupFn> {
    pub groups: Vec<F>,
    pub disable: bool,
}

impl<F: GroupFn> GroupAddRev<F> {
    pub fn new(groups: Vec<F>, disable: bool) -> Result<GroupAddRev<F>> {
        if groups.len() < 2 {
            return Err(Error::trace(format!(
                "The number of groups should not be smaller than '2' (got {})",
                groups.len()
            )));
        }
        Ok(GroupAddRev { groups, disable })
    }

    fn group(&self, tr: &Tracer, i: usize, x: &Var, adj: &SparseVar, extra: &[Var]) -> Result<Var> {
        tr.scope("blocks", || tr.scope(&i.to_string(), || self.groups[i].forward(tr, x, adj, extra)))
    }

    fn chunk_extras(&self, extras: &[Var]) -> Result<Vec<Vec<Var>>> {
        let c = self.groups.len();
        let mut per = vec![Vec::new(); c];
        for e in extras {
            let parts = e.chunk(c, -1)?;
            if parts.len() != c {
                return Err(Error::trace(format!(
                    "an extra argument of width {} cannot be cut into {c} groups",
                    e.shape()[1]
                )));
            }
            for (i, p) in parts.into_iter().enumerate() {
                per[i].push(p);
            }
        }
        Ok(per)
    }

    fn fwd(&self, tr: &Tracer, x: &Var, adj: &SparseVar, extras: &[Var]) -> Result<Var> {
        let c = self.groups.len();
        let xs = x.chunk(c, -1)?;
        if xs.len() != c || xs.iter().any(|p| p.shape() != xs[0].shape()) {
            return Err(Error::trace(format!("GroupAddRev: width {} is not divisible by {c} groups", x.shape()[1])));
        }
        let per = self.chunk_extras(extras)?;
        let mut y_in = xs[1].clone();
        for xi in &xs[2..] {
            y_in = y_in.add(xi)?;
        }
        let mut ys = Vec::new();
        for i in 0..c {
            y_in = xs[i].add(&self.group(tr, i, &y_in, adj, &per[i])?)?;
            ys.push(y_in.clone());
        }
        concat(&ys.iter().collect::<Vec<_>>(), -1)
    }

    fn inv(&self, tr: &Tracer, y: &Var, adj: &SparseVar, extras: &[Var]) -> Result<Var> {
        let c = self.groups.len();
        let ys = y.chunk(c, -1)?;
        let per = self.chunk_extras(extras)?;
        let mut xs: Vec<Option<Var>> = vec![None; c];
        for i in (0..c).rev() {
            let y_in = if i > 0 {
                ys[i - 1].clone()
            } else {
                let mut s = xs[1].clone().expect("recovered");
                for x in &xs[2..] {
                    s = s.add(x.as_ref().expect("recovered"))?;
                }
                s
            };
            xs[i] = Some(ys[i].sub(&self.group(tr, i, &y_in, adj, &per[i])?)?);
        }
        let xs: Vec<Var> = xs.into_iter().map(|x| x.expect("recovered")).collect();
        concat(&xs.iter().collect::<Vec<_>>(), -1)
    }

    /// Records the layer on `x` with adjacency `adj` and per-node `extras`.
    pub fn forward(&self, tr: &Tracer, x: &Var, adj: &SparseVar, extras: &[Var]) -> Result<Var> {
        if self.disable {
            return self.fwd(tr, x, adj, extras);
        }
        let mut others: Vec<&Var> = vec![&adj.indptr, &adj.indices, &adj.values];
        others.extend(extras.iter());
        let (n_rows, n_cols) = (adj.n_rows, adj.n_cols);
        let unpack = |o: &[Var]| -> (SparseVar, Vec<Var>) {
            let a = SparseVar { indptr: o[0].clone(), indices: o[1].clone(), values: o[2].clone(), n_rows, n_cols };
            (a, o[3..].to_vec())
        };
        tr.invertible(
            "rev",
            x,
            &others,
            |x, o| {
                let (a, e) = unpack(o);
                self.fwd(tr, x, &a, &e)
            },
            |y, o| {
                let (a, e) = unpack(o);
                self.inv(tr, y, &a, &e)
            },
        )
    }
}

impl<F: GroupFn> Module for GroupAddRev<F> {
    fn forward(&self, tr: &Tracer, _x: &Var) -> Result<Var> {
        Err(Error::trace(format!("GroupAddRev '{}' needs an adjacency", tr.current_scope())))
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        let list: Vec<(String, &dyn Module)> =
            self.groups.iter().enumerate().map(|(i, g)| (format!("blocks.{i}"), g.module())).collect();
        list
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
            )));
        }
        if cfg.hidden == 0 || !cfg.hidden.is_multiple_of(cfg.num_groups) {
            return Err(Error::trace(format!(
                "hidden size {} is not divisible by the number of groups {}",
                cfg.hidden, cfg.num_groups
            )));
        }
        if !(0.0..1.0).contains(&cfg.dropout) {
            return Err(Error::trace(format!("dropout must be in [0, 1), got {}", cfg.dropout)));
        }
        let lin1 = Linear::new(cfg.in_channels, cfg.hidden, true, rng)?;
        let w = cfg.hidden / cfg.num_groups;
        let mut convs = Vec::new();
        for _ in 0..cfg.num_layers {
            let groups = (0..cfg.num_groups).map(|_| GnnBlock::new(w, w, cfg.dropout, rng)).collect::<Result<_>>()?;
            convs.push(GroupAddRev::new(groups, cfg.disable_rev)?);
        }
        let norm = LayerNorm::new(cfg.hidden);
        let lin2 = Linear::new(cfg.hidden, cfg.out_channels, true, rng)?;
        Ok(RevGnn { cfg, lin1, convs, norm, lin2 })
    }

    /// Records the model: sparse features `x`, mean adjacency `adj`; returns logits.
    /// In a training trace (`tr.training()`), one dropout mask is drawn and shared by all
    /// layers, and ordinary dropout follows the final norm.
    pub fn forward(&self, tr: &Tracer, x: &SparseVar, adj: &SparseVar) -> Result<Var> {
        let h = tr.scope("lin1", || self.lin1.forward_sparse(tr, x))?;
        let p = self.cfg.dropout;
        let extras = if tr.training() && p > 0.0 { vec![tr.random_mask(h.shape(), p)?] } else { vec![] };
        let mut h = h;
        for (i, conv) in self.convs.iter().enumerate() {
            h = tr.scope("convs", || tr.scope(&i.to_string(), || conv.forward(tr, &h, adj, &extras)))?;
        }
        let h = call(tr, "norm", &self.norm, &h)?.relu()?;
        let h = crate::trace::nn::Dropout { p }.forward(tr, &h)?;
        call(tr, "lin2", &self.lin2, &h)
    }
}

impl Module for RevGnn {
    fn forward(&self, tr: &Tracer, _x: &Var) -> Result<Var> {
        Err(Error::trace(format!("RevGnn '{}' needs sparse features and an adjacency", tr.current_scope())))
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
}
