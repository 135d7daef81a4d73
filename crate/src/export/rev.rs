//! PyG's `GroupAddRev` recovered from the trace, so that the export writes
//! `torch_geometric.nn.GroupAddRev(Block(), num_groups=G)` over a block module of its own
//! (the class written from the first group's nodes) where the engine traced an invertible
//! region, instead of inlining the region: PyG then runs it as reversible as the engine does,
//! and the page's Python traces the same region back.
//!
//! A region of the top-level graph is one when
//! - its name is `P.rev` (the name the core's `GroupAddRev` gives its region at path `P`);
//! - the model's state under `P.` is parameters only, `convs.0.…` to `convs.{G-1}.…`, `G ≥ 2`,
//!   each group with the same names, shapes and dtypes;
//! - its forward begins by cutting `x` into `G` equal parts along one dim, and the nodes
//!   traced in scope `P.convs.g` are, group by group, the same ops;
//! - the first group reads, besides its parameters, one value as its `x`, and each of the
//!   region's other arguments whole or as its first part (PyG's `_chunk`), and gives out one
//!   value;
//! - every node is placed as the call is, with no checkpoint or available-memory mark.
//!
//! Anything else stays inlined, which is always correct.

use super::leaves::Leaf;
use super::syntax::is_ident;
use crate::ir::{Graph, InputKind, Node, Op, Region, ValueId};
use crate::tensor::DType;
use std::collections::{BTreeMap, HashMap, HashSet};

/// One argument of the block's `forward` after `x`.
#[derive(Clone, Debug, PartialEq)]
pub enum BlockArg {
    /// A dense argument: region input `input` (its position among the call's arguments after
    /// `x`), read by the first group whole or, with `chunk`, as the first of its parts (that
    /// split's output).
    Dense { input: usize, chunk: Option<ValueId>, ident: String },
    /// A CSR argument: region inputs `input`, `input + 1`, `input + 2` (its three arrays).
    Sparse { input: usize, ident: String },
}

/// A recovered `GroupAddRev` at module path `path`.
#[derive(Clone, Debug)]
pub struct Rev {
    pub path: String,
    /// The region's name (`convs.0.rev`).
    pub region: String,
    pub groups: usize,
    /// PyG's `split_dim`, counted from the end (-1: the last dim).
    pub split_dim: isize,
    /// The first group's nodes in the region's forward (indices, in order), with the capture
    /// placeholders they read.
    pub nodes: Vec<usize>,
    /// The value the first group takes as its `x`.
    pub x: ValueId,
    pub args: Vec<BlockArg>,
    /// The first group's result.
    pub out: ValueId,
    /// Each capture the first group reads: its value, and the parameter's name in the block
    /// (`norm.weight`).
    pub captures: Vec<(ValueId, String)>,
    /// The block's state: (name in the block, shape, dtype), in the model's order.
    pub state: Vec<(String, Vec<usize>, DType)>,
}

impl Rev {
    /// The block's leaf modules: the model's leaves under the first group, by path in the block.
    pub fn leaves(&self, leaves: &BTreeMap<String, Leaf>) -> BTreeMap<String, Leaf> {
        let prefix = format!("{}.convs.0.", self.path);
        leaves.iter().filter_map(|(p, l)| Some((p.strip_prefix(&prefix)?.to_string(), l.clone()))).collect()
    }
}

fn within(scope: &str, path: &str) -> bool {
    scope == path || scope.strip_prefix(path).is_some_and(|r| r.starts_with('.'))
}

/// The `GroupAddRev`s of `g`'s top level, by region name. `state`: every parameter and buffer
/// (name, traced shape, dtype); `params`: the parameters' names; `tied`: the tied names.
pub fn find(
    g: &Graph,
    state: &[(String, Vec<usize>, DType)],
    params: &[String],
    tied: &[(String, String)],
) -> BTreeMap<String, Rev> {
    let mut out = BTreeMap::new();
    for call in &g.nodes {
        let Op::Call { region } = &call.op else { continue };
        if let Some(rev) = one(g, call, region, state, params, tied) {
            out.insert(region.name.clone(), rev);
        }
    }
    out
}

fn one(
    g: &Graph,
    call: &Node,
    region: &Region,
    state: &[(String, Vec<usize>, DType)],
    params: &[String],
    tied: &[(String, String)],
) -> Option<Rev> {
    let path = region.name.strip_suffix(".rev")?;
    region.inverse.as_ref()?;
    if path.is_empty() || tied.iter().any(|(a, b)| within(a, path) || within(b, path)) {
        return None;
    }
    // The state: parameters, convs.{g}.… alike for every group.
    let mut per: BTreeMap<usize, Vec<(String, Vec<usize>, DType)>> = BTreeMap::new();
    for (name, shape, dtype) in state {
        let Some(rest) = name.strip_prefix(path).and_then(|r| r.strip_prefix('.')) else { continue };
        let (i, rel) = rest.strip_prefix("convs.")?.split_once('.')?;
        let i: usize = i.parse().ok()?;
        if !params.contains(name) {
            return None;
        }
        per.entry(i).or_default().push((rel.to_string(), shape.clone(), *dtype));
    }
    let groups = per.len();
    if groups < 2 || per.keys().copied().ne(0..groups) || per.values().any(|s| s != &per[&0]) {
        return None;
    }
    let f = &region.forward;
    // The region's inputs: x, arg0…, capture0…, as the call passes them.
    let inputs: Vec<(&str, ValueId)> = f.placeholders(InputKind::Input);
    let (xname, x_in) = *inputs.first()?;
    if xname != "x" || inputs.len() != call.inputs.len() {
        return None;
    }
    let n_args = inputs.iter().filter(|(n, _)| n.starts_with("arg")).count();
    if inputs[1..=n_args].iter().enumerate().any(|(k, (n, _))| *n != format!("arg{k}")) {
        return None;
    }
    let input_at = |v: ValueId| inputs.iter().position(|(_, w)| *w == v);
    // Cut into the groups along one dim.
    let first = f.nodes.iter().find(|n| !matches!(n.op, Op::Placeholder { .. }))?;
    let Op::Split { sizes, dim } = &first.op else { return None };
    let rank = f.ty(x_in).shape.len();
    if first.inputs != [x_in] || sizes.len() != groups || sizes.iter().any(|s| *s != sizes[0]) || *dim >= rank {
        return None;
    }
    // Every node placed as the call, unmarked.
    let placed = |n: &Node| {
        matches!(n.op, Op::Placeholder { .. })
            || (n.meta.block == call.meta.block
                && n.meta.ipu == call.meta.ipu
                && n.meta.block_kind == call.meta.block_kind
                && !n.meta.checkpoint
                && n.meta.available_memory.is_none())
    };
    if !f.nodes.iter().all(placed) {
        return None;
    }
    let group_nodes = |i: usize| -> Vec<usize> {
        let scope = format!("{path}.convs.{i}");
        (0..f.nodes.len())
            .filter(|&k| !matches!(f.nodes[k].op, Op::Placeholder { .. }) && within(&f.nodes[k].meta.scope, &scope))
            .collect()
    };
    let g0 = group_nodes(0);
    if g0.is_empty() {
        return None;
    }
    let ops = |ns: &[usize]| ns.iter().map(|&k| &f.nodes[k].op).collect::<Vec<_>>();
    if (1..groups).any(|i| ops(&group_nodes(i)) != ops(&g0)) {
        return None;
    }
    // What the first group reads from outside it.
    let made: HashSet<ValueId> = g0.iter().flat_map(|&k| f.nodes[k].outputs.iter().copied()).collect();
    let producer = |v: ValueId| f.nodes.iter().position(|n| n.outputs.contains(&v));
    let mut x = None;
    let mut captures: Vec<(ValueId, String)> = Vec::new();
    let mut capture_nodes = Vec::new();
    // Per argument: read whole (None) or as its first part (Some(value)).
    let mut arg_use: HashMap<usize, Option<ValueId>> = HashMap::new();
    for &k in &g0 {
        for &v in &f.nodes[k].inputs {
            if made.contains(&v) {
                continue;
            }
            if let Some(pos) = input_at(v) {
                if pos == 0 {
                    return None; // x itself is read only by the cut
                } else if pos <= n_args {
                    if arg_use.insert(pos - 1, None) == Some(Some(v)) {
                        return None;
                    }
                } else {
                    // A capture: the first group's own parameter.
                    let outer = g.nodes.iter().find(|n| n.outputs.first() == Some(&call.inputs[pos]))?;
                    let Op::Placeholder { kind: InputKind::Parameter, name } = &outer.op else { return None };
                    let rel = name.strip_prefix(&format!("{path}.convs.0."))?;
                    if !captures.iter().any(|(w, _)| *w == v) {
                        captures.push((v, rel.to_string()));
                        capture_nodes.push(producer(v)?);
                    }
                }
                continue;
            }
            let p = &f.nodes[producer(v)?];
            match (&p.op, p.inputs.first().and_then(|i| input_at(*i))) {
                (Op::Split { sizes: s, dim: d }, Some(pos)) if pos >= 1 && pos <= n_args => {
                    // The first part of argument pos - 1, cut as x is.
                    if p.outputs[0] != v || s.len() != groups || d != dim || p.meta.scope != path {
                        return None;
                    }
                    if arg_use.insert(pos - 1, Some(v)).is_some_and(|u| u != Some(v)) {
                        return None;
                    }
                }
                _ => match x {
                    None => x = Some(v),
                    Some(w) if w == v => {}
                    Some(_) => return None,
                },
            }
        }
    }
    let x = x?;
    // What it gives out: one value.
    let leaving: Vec<ValueId> = {
        let mut l: Vec<ValueId> = made
            .iter()
            .copied()
            .filter(|v| {
                f.outputs.contains(v)
                    || f.nodes.iter().enumerate().any(|(k, n)| !g0.contains(&k) && n.inputs.contains(v))
            })
            .collect();
        l.sort();
        l
    };
    let [out] = leaving[..] else { return None };
    // The block's arguments: a CSR argument's three arrays (the export names them
    // `<arg>.crow_indices()`, …) read whole are one.
    let outer_input = |k: usize| g.nodes.iter().find(|n| n.outputs.first() == Some(&call.inputs[1 + k]));
    let csr_base = |k: usize| match outer_input(k).map(|n| &n.op) {
        Some(Op::Placeholder { kind: InputKind::Input, name }) => name.strip_suffix(".indptr").map(str::to_string),
        _ => None,
    };
    let mut args = Vec::new();
    let mut used_idents: HashSet<String> = ["x".to_string(), "self".to_string()].into();
    let mut ident = |want: String, k: usize| {
        let base = if is_ident(&want) && !used_idents.contains(&want) { want } else { format!("arg{k}") };
        used_idents.insert(base.clone());
        base
    };
    let mut k = 0;
    while k < n_args {
        let sparse = csr_base(k).filter(|base| {
            k + 2 < n_args
                && [(k + 1, "indices"), (k + 2, "values")].iter().all(|(j, part)| {
                    matches!(outer_input(*j).map(|n| &n.op),
                        Some(Op::Placeholder { kind: InputKind::Input, name }) if *name == format!("{base}.{part}"))
                })
                && (k..k + 3).all(|j| arg_use.get(&j).is_none_or(|u| u.is_none()))
        });
        match sparse {
            Some(base) => {
                args.push(BlockArg::Sparse { input: k, ident: ident(base, k) });
                k += 3;
            }
            None => {
                let v = inputs[1 + k].1;
                let want = if f.ty(v).dtype == DType::Bool { "mask".to_string() } else { format!("arg{k}") };
                args.push(BlockArg::Dense {
                    input: k,
                    chunk: arg_use.get(&k).copied().flatten(),
                    ident: ident(want, k),
                });
                k += 1;
            }
        }
    }
    let mut nodes: Vec<usize> = g0.iter().copied().chain(capture_nodes).collect();
    nodes.sort_unstable();
    nodes.dedup();
    Some(Rev {
        path: path.to_string(),
        region: region.name.clone(),
        groups,
        split_dim: *dim as isize - rank as isize,
        nodes,
        x,
        args,
        out,
        captures,
        state: per.remove(&0).unwrap_or_default(),
    })
}
