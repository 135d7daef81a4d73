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
use crate::ir::{Graph, InputKind, Op, ValueId};
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
    },
    LayerNorm {
        shape: Vec<usize>,
        eps: f32,
        dtype: DType,
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
            Leaf::Linear { in_features, out_features, bias, dtype } => format!(
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

    /// Whether the module's call is every node traced in its scope (a batch norm's), not one
    /// op reading its parameters (a linear's, a layer norm's).
    pub fn is_scoped(&self) -> bool {
        matches!(self, Leaf::BatchNorm2d { .. })
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
    let is_tied = |n: &str| tied.iter().any(|(a, b)| a == n || b == n);
    for (name, wshape, dtype) in state {
        let Some(path) = name.strip_suffix(".weight") else { continue };
        if is_tied(name) || out.contains_key(path) {
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
            Op::Linear { .. } if wshape.len() == 2 => {
                Leaf::Linear { in_features: wshape[1], out_features: wshape[0], bias: has_bias, dtype: *dtype }
            }
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
