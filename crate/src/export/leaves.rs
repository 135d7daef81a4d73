//! Built-in leaf modules recovered from the trace, so that the export calls real
//! `torch.nn.Linear` / `torch.nn.LayerNorm` modules (`self.fc1(x)`) instead of their
//! functional form over the parameters. A module path `S` is one when the model's state under
//! `S.` is exactly `S.weight` (and `S.bias`), and every read of those parameters is the
//! weight (and bias) of a `linear` (or an affine `layer_norm`) with one configuration;
//! anything else (a weight also read elsewhere, tied, or other state under `S.`) stays
//! functional, which is always correct.

use super::syntax::{self, str_lit, tuple};
use crate::ir::{Graph, InputKind, Op, ValueId};
use crate::tensor::DType;
use std::collections::BTreeMap;

/// A recovered leaf module: its class and constructor arguments.
#[derive(Clone, Debug, PartialEq)]
pub enum Leaf {
    Linear { in_features: usize, out_features: usize, bias: bool, dtype: DType },
    LayerNorm { shape: Vec<usize>, eps: f32, dtype: DType },
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
        }
    }

    /// The parameter names (relative to the module) the module holds.
    pub fn state(&self) -> &'static [&'static str] {
        match self {
            Leaf::Linear { bias: false, .. } => &["weight"],
            Leaf::Linear { bias: true, .. } | Leaf::LayerNorm { .. } => &["weight", "bias"],
        }
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
    let mut out = BTreeMap::new();
    let is_tied = |n: &str| tied.iter().any(|(a, b)| a == n || b == n);
    for (name, wshape, dtype) in state {
        let Some(path) = name.strip_suffix(".weight") else { continue };
        if is_tied(name) {
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
