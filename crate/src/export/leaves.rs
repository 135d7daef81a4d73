//! Built-in leaf modules recovered from the trace, so that the export calls real
//! `torch.nn.Linear` / `torch.nn.LayerNorm` / `torch.nn.BatchNorm2d` modules (`self.fc1(x)`)
//! instead of their functional form over the parameters. A module path `S` is a linear or
//! layer norm when the model's state under `S.` is exactly `S.weight` (and `S.bias`), and
//! every read of those parameters is the weight (and bias) of a `linear` (or an affine
//! `layer_norm`) with one configuration. It is a training-mode batch norm when its state is a
//! batch norm's (the affine weight and bias, the running statistics) and every node traced in
//! scope `S` belongs to calls of it: runs of nodes, each one `batch_norm` with the running
//! statistics' updates after it, that read nothing from outside but the normalised input and
//! give nothing out but the normalised output (see [`batch_norms`]). Anything else (a weight
//! also read elsewhere, tied, other state under `S.`) stays functional, which is always
//! correct.

use super::syntax::{self, str_lit, tuple};
use crate::ir::{BinaryKind, Graph, InputKind, Node, Op, ValueId};
use crate::tensor::DType;
use std::collections::BTreeMap;

/// A recovered leaf module: its class and constructor arguments.
#[derive(Clone, Debug, PartialEq)]
pub enum Leaf {
    Linear {
        in_features: usize,
        out_features: usize,
        bias: bool,
        dtype: DType,
        /// Called on a CSR matrix (`self.lin1(x)` with Planetoid's sparse features): traced as
        /// the weight's transpose, the sparse product and the bias added, every node in its
        /// scope, so its call is a scoped one (see [`sparse_linears`]).
        sparse: bool,
    },
    LayerNorm {
        shape: Vec<usize>,
        eps: f32,
        dtype: DType,
    },
    /// PyG's `SAGEConv(in, out, aggr="sum")` called on a CSR adjacency (`adj_t`, rows the
    /// targets): the engine's product with the adjacency, `lin_l` of it plus `lin_r` of the
    /// input (see [`sage_convs`]). PyG's `"sum"` on the adjacency is the engine's product
    /// whichever aggregation the conv was made with: the package's sparse argument is
    /// already the mean-aggregation matrix, which PyG's `"mean"` would average again.
    SageConv {
        in_channels: usize,
        out_channels: usize,
    },
    /// `torch.nn.BatchNorm2d` in training mode, called on a 4-d input: the nodes it traced
    /// (the `batch_norm` and the running statistics' updates) are one call of the module.
    BatchNorm2d {
        num_features: usize,
        eps: f32,
        momentum: Option<f32>,
        affine: bool,
        tracked: bool,
        dtype: DType,
    },
}

impl Leaf {
    /// The constructor call (`torch.nn.Linear(784, 512, bias=True, dtype=torch.float32)`).
    pub fn constructor(&self) -> String {
        match self {
            Leaf::Linear { in_features, out_features, bias, dtype, .. } => format!(
                "torch.nn.Linear({in_features}, {out_features}, bias={}, dtype={})",
                if *bias { "True" } else { "False" },
                syntax::dtype(*dtype)
            ),
            Leaf::LayerNorm { shape, eps, dtype } => format!(
                "torch.nn.LayerNorm({}, eps={}, dtype={})",
                tuple(shape),
                syntax::f32_lit(*eps),
                syntax::dtype(*dtype)
            ),
            Leaf::SageConv { in_channels, out_channels } => {
                format!("torch_geometric.nn.SAGEConv({in_channels}, {out_channels}, aggr=\"sum\")")
            }
            Leaf::BatchNorm2d { num_features, eps, momentum, affine, tracked, dtype } => format!(
                "torch.nn.BatchNorm2d({num_features}, eps={}, momentum={}, affine={}, track_running_stats={}, dtype={})",
                syntax::f32_lit(*eps),
                momentum.map(syntax::f32_lit).unwrap_or_else(|| "None".into()),
                py_bool(*affine),
                py_bool(*tracked),
                syntax::dtype(*dtype)
            ),
        }
    }

    /// The parameter names (relative to the module) the module holds.
    pub fn state(&self) -> &'static [&'static str] {
        match self {
            Leaf::Linear { bias: false, .. } => &["weight"],
            Leaf::Linear { bias: true, .. } | Leaf::LayerNorm { .. } => &["weight", "bias"],
            Leaf::SageConv { .. } => &["lin_l.weight", "lin_l.bias", "lin_r.weight"],
            Leaf::BatchNorm2d { affine: true, tracked: true, .. } => {
                &["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
            }
            Leaf::BatchNorm2d { affine: false, tracked: true, .. } => {
                &["running_mean", "running_var", "num_batches_tracked"]
            }
            Leaf::BatchNorm2d { affine: true, tracked: false, .. } => &["weight", "bias"],
            Leaf::BatchNorm2d { affine: false, tracked: false, .. } => &[],
        }
    }

    /// Whether the module's call is every node traced in its scope (a batch norm's, a
    /// SAGEConv's, a linear's on a sparse input), not one op reading its parameters (a
    /// linear's, a layer norm's).
    pub fn is_scoped(&self) -> bool {
        matches!(self, Leaf::BatchNorm2d { .. } | Leaf::SageConv { .. } | Leaf::Linear { sparse: true, .. })
    }

    /// Whether node `n`, traced in this scoped module's scope `path` (or below it), is the
    /// one that gives the call's result: a batch norm's `batch_norm`, a SAGEConv's final add,
    /// a sparse linear's bias add (or its product, without a bias).
    pub fn is_call(&self, path: &str, n: &crate::ir::Node) -> bool {
        match self {
            Leaf::BatchNorm2d { .. } => matches!(n.op, Op::BatchNorm { .. }),
            Leaf::SageConv { .. } => n.meta.scope == path && matches!(n.op, Op::Binary { kind: BinaryKind::Add }),
            Leaf::Linear { bias: true, .. } => matches!(n.op, Op::Binary { kind: BinaryKind::Add }),
            Leaf::Linear { bias: false, .. } => matches!(n.op, Op::SpMM { .. }),
            Leaf::LayerNorm { .. } => false,
        }
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// The expression of the module at `path` under `self` (`self.fc1`, or
/// `self.get_submodule("layers.0")` where a part is not an identifier).
pub fn module_expr(path: &str) -> String {
    if path.split('.').all(syntax::is_ident) {
        format!("self.{path}")
    } else {
        format!("self.get_submodule({})", str_lit(path))
    }
}

/// Every read of parameter `name` in `g`: (the reading op, the input position). A region
/// reads a parameter as the input its call passes it to (captures are lifted into region
/// inputs): the reads inside the region's forward and inverse count, not the call.
fn uses<'a>(g: &'a Graph, name: &str, out: &mut Vec<(&'a Op, usize)>) {
    let own: Vec<ValueId> = g
        .nodes
        .iter()
        .filter(|n| matches!(&n.op, Op::Placeholder { kind: InputKind::Parameter, name: m } if m == name))
        .map(|n| n.outputs[0])
        .collect();
    uses_of(g, &own, out);
}

fn uses_of<'a>(g: &'a Graph, values: &[ValueId], out: &mut Vec<(&'a Op, usize)>) {
    for n in &g.nodes {
        for (i, v) in n.inputs.iter().enumerate() {
            if !values.contains(v) {
                continue;
            }
            match &n.op {
                Op::Call { region } => {
                    // The forward takes (x, others…), the inverse (y, others…): the same positions.
                    for r in std::iter::once(&region.forward).chain(region.inverse.as_ref()) {
                        match r.placeholders(InputKind::Input).get(i) {
                            Some((_, inner)) => uses_of(r, &[*inner], out),
                            None => out.push((&n.op, i)),
                        }
                    }
                }
                op => out.push((op, i)),
            }
        }
    }
}

/// The leaf modules of the traced graph `g`, by module path; `state` is every parameter and
/// buffer name the model holds with its shape and dtype, `tied` the tied names.
pub fn find(g: &Graph, state: &[(String, Vec<usize>, DType)], tied: &[(String, String)]) -> BTreeMap<String, Leaf> {
    let mut out = batch_norms(g, state, tied);
    out.extend(sparse_linears(g, state, tied));
    let convs = sage_convs(g, state, tied);
    out.extend(convs);
    let is_tied = |n: &str| tied.iter().any(|(a, b)| a == n || b == n);
    for (name, wshape, dtype) in state {
        let Some(path) = name.strip_suffix(".weight") else { continue };
        // (A linear of a scoped module, a SAGEConv's lin_l, is the module's.)
        if is_tied(name) || out.contains_key(path) || out.keys().any(|p| path.starts_with(&format!("{p}."))) {
            continue;
        }
        let under: Vec<&str> = state.iter().filter_map(|(n, _, _)| n.strip_prefix(path)?.strip_prefix('.')).collect();
        let bias_name = format!("{path}.bias");
        let has_bias = under.contains(&"bias");
        if under.iter().any(|n| *n != "weight" && *n != "bias") || (has_bias && is_tied(&bias_name)) {
            continue;
        }
        let mut w_uses = Vec::new();
        uses(g, name, &mut w_uses);
        let mut b_uses = Vec::new();
        if has_bias {
            uses(g, &bias_name, &mut b_uses);
        }
        if w_uses.is_empty() {
            continue;
        }
        let leaf = match w_uses[0].0 {
            Op::Linear { .. } if wshape.len() == 2 => Leaf::Linear {
                in_features: wshape[1],
                out_features: wshape[0],
                bias: has_bias,
                dtype: *dtype,
                sparse: false,
            },
            Op::LayerNorm { eps, affine: true, normalized_ndim } if *normalized_ndim == wshape.len() && has_bias => {
                Leaf::LayerNorm { shape: wshape.clone(), eps: *eps, dtype: *dtype }
            }
            _ => continue,
        };
        let fits = |op: &Op| match (&leaf, op) {
            (Leaf::Linear { bias, .. }, Op::Linear { has_bias }) => bias == has_bias,
            (Leaf::LayerNorm { eps, .. }, Op::LayerNorm { eps: e, affine: true, normalized_ndim }) => {
                e == eps && *normalized_ndim == wshape.len()
            }
            _ => false,
        };
        let weights_ok = w_uses.iter().all(|(op, i)| *i == 1 && fits(op));
        let biases_ok = b_uses.iter().all(|(op, i)| *i == 2 && fits(op)) && b_uses.len() == w_uses.len();
        if weights_ok && (!has_bias || biases_ok) {
            out.insert(path.to_string(), leaf);
        }
    }
    out
}

/// `g` and the forward and inverse graphs of every region in it, at any depth (a
/// parameter's reads, [`uses`], count in both).
fn all_graphs(g: &Graph) -> Vec<&Graph> {
    let mut out = vec![g];
    for n in &g.nodes {
        if let Op::Call { region } = &n.op {
            out.extend(all_graphs(&region.forward));
            if let Some(inv) = &region.inverse {
                out.extend(all_graphs(inv));
            }
        }
    }
    out
}

/// Whether `scope` is `path` or below it.
fn within(scope: &str, path: &str) -> bool {
    scope == path || scope.strip_prefix(path).is_some_and(|r| r.starts_with('.'))
}

/// The state under `path.` (names relative to it, shapes, dtypes), when none of it is tied.
fn state_under<'a>(
    path: &str,
    state: &'a [(String, Vec<usize>, DType)],
    tied: &[(String, String)],
) -> Option<Vec<(&'a str, &'a Vec<usize>, DType)>> {
    let under: Vec<_> =
        state.iter().filter_map(|(n, shape, d)| Some((n.strip_prefix(path)?.strip_prefix('.')?, shape, *d))).collect();
    let tied_here = tied.iter().any(|(a, b)| within(a, path) || within(b, path));
    (!tied_here).then_some(under)
}

/// The users of value `v` in `g`: (node index, input position); a graph output counts as a
/// user that is no node (`None`).
fn users(g: &Graph, v: ValueId) -> Vec<Option<(usize, usize)>> {
    let mut out: Vec<Option<(usize, usize)>> = g
        .nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.inputs.iter().enumerate().filter(|(_, x)| **x == v).map(move |(k, _)| Some((i, k))))
        .collect();
    out.extend(g.outputs.iter().filter(|o| **o == v).map(|_| None));
    out
}

/// The one user of `v` in `g`, when it has exactly one and it is a node.
fn only_user(g: &Graph, v: ValueId) -> Option<(usize, usize)> {
    match users(g, v).as_slice() {
        [Some(u)] => Some(*u),
        _ => None,
    }
}

/// Whether the nodes `nodes` of `g`, one call of a scoped module, are placed as its node
/// `call` is (one Block and IPU) with no checkpoint or available-memory mark but on `call`.
fn placed_as(g: &Graph, nodes: &[usize], call: usize) -> bool {
    let c = &g.nodes[call].meta;
    nodes.iter().all(|&i| {
        let m = &g.nodes[i].meta;
        m.block == c.block
            && m.ipu == c.ipu
            && m.block_kind == c.block_kind
            && (i == call || (!m.checkpoint && m.available_memory.is_none()))
    })
}

/// Whether input `k` of node `n` of `g` is the first of a CSR matrix's three arrays, as a
/// sparse product reads them: a sparse input's row pointers, or a region input (a region
/// takes a sparse argument as its three arrays).
fn csr_at(g: &Graph, n: &Node) -> bool {
    let Some(v) = n.inputs.first() else { return false };
    g.nodes.iter().any(|m| {
        m.outputs.first() == Some(v)
            && matches!(&m.op, Op::Placeholder { kind: InputKind::Input, name } if name.ends_with(".indptr") || name.starts_with("arg"))
    })
}

/// The linears called on a CSR matrix, by module path (see [`Leaf::Linear`]'s `sparse`).
/// Scope `S` is one when its state is `S.weight` (2-d) and maybe `S.bias`, float32, not tied,
/// every read of the weight is a `permute([1, 0])` and every read of the bias the addend of
/// an `add`, and in every graph (regions too) the nodes in scope `S` are calls of it: the
/// weight's transpose read only by one sparse product (as its dense operand, the matrix a
/// CSR argument), whose result is read only by the bias's add, all placed alike.
pub fn sparse_linears(
    g: &Graph,
    state: &[(String, Vec<usize>, DType)],
    tied: &[(String, String)],
) -> BTreeMap<String, Leaf> {
    let mut out = BTreeMap::new();
    'path: for (name, wshape, dtype) in state {
        let Some(path) = name.strip_suffix(".weight") else { continue };
        let Some(under) = state_under(path, state, tied) else { continue };
        let bias = under.iter().any(|(n, _, _)| *n == "bias");
        if wshape.len() != 2
            || *dtype != DType::Float32
            || under.iter().any(|(n, _, d)| (*n != "weight" && *n != "bias") || *d != DType::Float32)
        {
            continue;
        }
        let mut w_uses = Vec::new();
        uses(g, name, &mut w_uses);
        if w_uses.is_empty()
            || !w_uses.iter().all(|(op, i)| *i == 0 && matches!(op, Op::Permute { dims } if dims[..] == [1, 0]))
        {
            continue;
        }
        let mut b_uses = Vec::new();
        if bias {
            uses(g, &format!("{path}.bias"), &mut b_uses);
            if b_uses.len() != w_uses.len()
                || !b_uses.iter().all(|(op, i)| *i == 1 && matches!(op, Op::Binary { kind: BinaryKind::Add }))
            {
                continue;
            }
        }
        let mut calls = 0;
        for h in all_graphs(g) {
            let scoped: Vec<usize> = (0..h.nodes.len())
                .filter(|&i| h.nodes[i].meta.scope == path && !matches!(h.nodes[i].op, Op::Placeholder { .. }))
                .collect();
            let mut seen = Vec::new();
            for &i in &scoped {
                if !matches!(h.nodes[i].op, Op::Permute { .. }) {
                    continue;
                }
                let Some((j, 3)) = only_user(h, h.nodes[i].outputs[0]) else { continue 'path };
                let mm = &h.nodes[j];
                let Op::SpMM { n_cols, .. } = mm.op else { continue 'path };
                if mm.meta.scope != path
                    || n_cols != wshape[1]
                    || !csr_at(h, mm)
                    || h.ty(mm.inputs[2]).dtype != DType::Float32
                {
                    continue 'path;
                }
                let mut call = vec![i, j];
                if bias {
                    let Some((k, 0)) = only_user(h, mm.outputs[0]) else { continue 'path };
                    if h.nodes[k].meta.scope != path || !matches!(h.nodes[k].op, Op::Binary { kind: BinaryKind::Add }) {
                        continue 'path;
                    }
                    call.push(k);
                }
                if !placed_as(h, &call, *call.last().unwrap_or(&j)) {
                    continue 'path;
                }
                seen.extend(call);
                calls += 1;
            }
            seen.sort_unstable();
            if seen != scoped {
                continue 'path;
            }
        }
        if calls == w_uses.len() {
            out.insert(
                path.to_string(),
                Leaf::Linear { in_features: wshape[1], out_features: wshape[0], bias, dtype: *dtype, sparse: true },
            );
        }
    }
    out
}

/// PyG's SAGEConvs called on a CSR adjacency, by module path (see [`Leaf::SageConv`]). Scope
/// `S` is one when its state is exactly `S.lin_l.weight`, `S.lin_l.bias` and `S.lin_r.weight`
/// (float32, not tied), read only as the weight and bias of `linear`s with a bias (`lin_l`)
/// and the weight of `linear`s without (`lin_r`), and in every graph (regions too) the nodes
/// in scope `S` and below are calls of it: a sparse product of a CSR argument (a square one)
/// with `h`, `lin_l` of the product, `lin_r` of `h`, and their sum, nothing in between read
/// from elsewhere, all placed alike.
pub fn sage_convs(
    g: &Graph,
    state: &[(String, Vec<usize>, DType)],
    tied: &[(String, String)],
) -> BTreeMap<String, Leaf> {
    let mut out = BTreeMap::new();
    'path: for (name, wshape, _) in state {
        let Some(path) = name.strip_suffix(".lin_l.weight") else { continue };
        let Some(under) = state_under(path, state, tied) else { continue };
        let mut names: Vec<&str> = under.iter().map(|(n, _, _)| *n).collect();
        names.sort_unstable();
        if names != ["lin_l.bias", "lin_l.weight", "lin_r.weight"] || under.iter().any(|(_, _, d)| *d != DType::Float32)
        {
            continue;
        }
        let shape_of = |k: &str| under.iter().find(|(n, _, _)| *n == k).map(|(_, s, _)| s.to_vec());
        let (o, i) = match wshape[..] {
            [o, i] => (o, i),
            _ => continue,
        };
        if shape_of("lin_r.weight") != Some(vec![o, i]) || shape_of("lin_l.bias") != Some(vec![o]) {
            continue;
        }
        let read = |k: &str, bias: bool, at: usize| {
            let mut u = Vec::new();
            uses(g, &format!("{path}.{k}"), &mut u);
            let ok = u.iter().all(|(op, p)| *p == at && matches!(op, Op::Linear { has_bias } if *has_bias == bias));
            ok.then_some(u.len())
        };
        let (Some(lw), Some(lb), Some(rw)) =
            (read("lin_l.weight", true, 1), read("lin_l.bias", true, 2), read("lin_r.weight", false, 1))
        else {
            continue;
        };
        if lw == 0 || lw != lb || lw != rw {
            continue;
        }
        let (l_scope, r_scope) = (format!("{path}.lin_l"), format!("{path}.lin_r"));
        let mut calls = 0;
        for h in all_graphs(g) {
            let scoped: Vec<usize> = (0..h.nodes.len())
                .filter(|&k| within(&h.nodes[k].meta.scope, path) && !matches!(h.nodes[k].op, Op::Placeholder { .. }))
                .collect();
            let mut seen = Vec::new();
            for &a in &scoped {
                let add = &h.nodes[a];
                if add.meta.scope != path || !matches!(add.op, Op::Binary { kind: BinaryKind::Add }) {
                    continue;
                }
                let made_by = |v: ValueId| h.nodes.iter().position(|m| m.outputs.first() == Some(&v));
                let (Some(l), Some(r)) = (made_by(add.inputs[0]), made_by(add.inputs[1])) else { continue 'path };
                let (ln, rn) = (&h.nodes[l], &h.nodes[r]);
                if ln.meta.scope != l_scope
                    || rn.meta.scope != r_scope
                    || !matches!(ln.op, Op::Linear { has_bias: true })
                    || !matches!(rn.op, Op::Linear { has_bias: false })
                {
                    continue 'path;
                }
                let Some(s) = made_by(ln.inputs[0]) else { continue 'path };
                let mm = &h.nodes[s];
                let Op::SpMM { n_rows, n_cols } = mm.op else { continue 'path };
                if mm.meta.scope != path
                    || n_rows != n_cols
                    || !csr_at(h, mm)
                    || mm.inputs[3] != rn.inputs[0]
                    || h.ty(mm.inputs[3]).dtype != DType::Float32
                    || h.ty(mm.inputs[2]).dtype != DType::Float32
                {
                    continue 'path;
                }
                if only_user(h, mm.outputs[0]) != Some((l, 0))
                    || only_user(h, ln.outputs[0]) != Some((a, 0))
                    || only_user(h, rn.outputs[0]) != Some((a, 1))
                {
                    continue 'path;
                }
                let call = [s, l, r, a];
                if !placed_as(h, &call, a) {
                    continue 'path;
                }
                seen.extend(call);
                calls += 1;
            }
            seen.sort_unstable();
            if seen != scoped {
                continue 'path;
            }
        }
        if calls == lw {
            out.insert(path.to_string(), Leaf::SageConv { in_channels: i, out_channels: o });
        }
    }
    out
}

/// Whether any node of `g`'s regions (at any depth) was traced in `scope`.
fn in_regions(g: &Graph, scope: &str) -> bool {
    g.nodes.iter().any(|n| match &n.op {
        Op::Call { region } => std::iter::once(&region.forward)
            .chain(region.inverse.as_ref())
            .any(|r| r.nodes.iter().any(|m| m.meta.scope == scope) || in_regions(r, scope)),
        _ => false,
    })
}

/// The training-mode batch norms of `g` (top level only), by module path. Scope `S` is one
/// when the model's state under `S.` is a batch norm's (`weight` and `bias` together or
/// neither; `running_mean`, `running_var` and `num_batches_tracked` together or none), none of
/// it tied, and the nodes traced in scope `S` are runs of consecutive nodes, each of which
/// - holds one `batch_norm` of a 4-d input with `S.weight` and `S.bias` as its affine
///   parameters (when it has them), one `eps` for all runs;
/// - is otherwise reads of `S.`'s own state, `full`s, elementwise `binary` ops, `cast`s and
///   updates of `S.`'s buffers (the running statistics' update), one momentum for all runs;
/// - reads from outside the run only the `batch_norm`'s input, and gives out only its
///   normalised output;
/// - is in one Block and IPU, with no checkpoint or available-memory mark but on the
///   `batch_norm` itself.
///
/// Such a run is what `torch.nn.BatchNorm2d` (the engine's own module) traces when called in
/// training, so the export writes it as one call of the module.
pub fn batch_norms(
    g: &Graph,
    state: &[(String, Vec<usize>, DType)],
    tied: &[(String, String)],
) -> BTreeMap<String, Leaf> {
    let mut out = BTreeMap::new();
    let mut paths: Vec<&str> = g
        .nodes
        .iter()
        .filter(|n| matches!(n.op, Op::BatchNorm { .. }))
        .map(|n| n.meta.scope.as_str())
        .filter(|s| !s.is_empty())
        .collect();
    paths.sort();
    paths.dedup();
    'path: for path in paths {
        let under: Vec<(&str, &Vec<usize>, DType)> = state
            .iter()
            .filter_map(|(n, shape, d)| Some((n.strip_prefix(path)?.strip_prefix('.')?, shape, *d)))
            .collect();
        let has = |k: &str| under.iter().any(|(n, _, _)| *n == k);
        let affine = has("weight");
        let tracked = has("running_mean");
        let expected =
            Leaf::BatchNorm2d { num_features: 0, eps: 0.0, momentum: None, affine, tracked, dtype: DType::Float32 };
        let names = expected.state();
        if under.len() != names.len() || !names.iter().all(|k| has(k)) {
            continue;
        }
        if names.iter().any(|k| {
            let full = format!("{path}.{k}");
            tied.iter().any(|(a, b)| *a == full || *b == full)
        }) || in_regions(g, path)
        {
            continue;
        }
        let own =
            |name: &str| name.strip_prefix(path).and_then(|r| r.strip_prefix('.')).is_some_and(|k| names.contains(&k));
        let in_scope: Vec<usize> = (0..g.nodes.len()).filter(|&i| g.nodes[i].meta.scope == path).collect();
        // The runs of consecutive nodes in scope.
        let mut runs: Vec<Vec<usize>> = Vec::new();
        for i in in_scope {
            match runs.last_mut() {
                Some(r) if r.last() == Some(&(i - 1)) => r.push(i),
                _ => runs.push(vec![i]),
            }
        }
        let mut config: Option<(usize, f32, Option<f32>, DType)> = None;
        for run in &runs {
            let nodes: Vec<&crate::ir::Node> = run.iter().map(|&i| &g.nodes[i]).collect();
            let bns: Vec<&crate::ir::Node> =
                nodes.iter().copied().filter(|n| matches!(n.op, Op::BatchNorm { .. })).collect();
            let [bn] = bns.as_slice() else { continue 'path };
            let Op::BatchNorm { eps, affine: a } = bn.op else { continue 'path };
            let x_ty = g.ty(bn.inputs[0]);
            if a != affine || x_ty.shape.len() != 4 {
                continue 'path;
            }
            // Made in the run: the values; read from outside: only the input x.
            let made: std::collections::HashSet<ValueId> =
                nodes.iter().flat_map(|n| n.outputs.iter().copied()).collect();
            for n in &nodes {
                let ok = match &n.op {
                    Op::Placeholder { kind: InputKind::Parameter | InputKind::Buffer, name } => own(name),
                    Op::BatchNorm { .. } | Op::Full { .. } | Op::Binary { .. } | Op::Cast { .. } => true,
                    Op::BufferUpdate { name } => own(name),
                    _ => false,
                };
                let marks_ok = std::ptr::eq(*n, *bn) || (!n.meta.checkpoint && n.meta.available_memory.is_none());
                let placed_same = n.meta.block == bn.meta.block
                    && n.meta.ipu == bn.meta.ipu
                    && n.meta.block_kind == bn.meta.block_kind;
                let inputs_ok =
                    n.inputs.iter().enumerate().all(|(k, v)| made.contains(v) || (std::ptr::eq(*n, *bn) && k == 0));
                if !ok || !marks_ok || !placed_same || !inputs_ok {
                    continue 'path;
                }
            }
            if affine {
                let is = |v: ValueId, k: &str| {
                    nodes.iter().any(|n| {
                        n.outputs.first() == Some(&v)
                            && matches!(&n.op, Op::Placeholder { kind: InputKind::Parameter, name } if *name == format!("{path}.{k}"))
                    })
                };
                if bn.inputs.len() != 3 || !is(bn.inputs[1], "weight") || !is(bn.inputs[2], "bias") {
                    continue 'path;
                }
            }
            // Out of the run: only the normalised output, and not a graph output of the others.
            let leaves_run = |v: &ValueId| {
                g.outputs.contains(v)
                    || g.nodes.iter().enumerate().any(|(j, m)| !run.contains(&j) && m.inputs.contains(v))
            };
            if made.iter().filter(|v| **v != bn.outputs[0]).any(leaves_run) {
                continue 'path;
            }
            // The momentum: m in the update's `1 - m`, a `full` (a number) or a quotient (None:
            // the cumulative average).
            let momentum = if tracked {
                let sub = nodes.iter().find(|n| matches!(n.op, Op::Binary { kind: crate::ir::BinaryKind::Sub }));
                let Some(sub) = sub else { continue 'path };
                match nodes.iter().find(|n| n.outputs.first() == sub.inputs.get(1)).map(|n| &n.op) {
                    Some(Op::Full { value, .. }) => Some(*value as f32),
                    Some(Op::Binary { kind: crate::ir::BinaryKind::Div }) => None,
                    _ => continue 'path,
                }
            } else {
                if nodes.len() != 1 + 2 * usize::from(affine) {
                    continue 'path;
                }
                None
            };
            let dtype = under.iter().find(|(n, _, _)| *n == "weight" || *n == "running_mean").map(|(_, _, d)| *d);
            let this = (x_ty.shape[1], eps, momentum, dtype.unwrap_or(x_ty.dtype));
            match config {
                None => config = Some(this),
                Some(c) if c == this => {}
                Some(_) => continue 'path,
            }
        }
        if let Some((num_features, eps, momentum, dtype)) = config {
            out.insert(path.to_string(), Leaf::BatchNorm2d { num_features, eps, momentum, affine, tracked, dtype });
        }
    }
    out
}
