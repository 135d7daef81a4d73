//! Graph simplification: inlining, common-subexpression elimination, `split(concat(…))`
//! folding and dead-code elimination.
//!
//! [`simplify`] also takes *equivalences*: pairs of values known to be equal (up to
//! rounding) although computed differently. The backward of an invertible region uses this:
//! its recomputed forward output equals the stored output, so the recompute's parts are
//! replaced by pieces of the stored output, after which CSE merges the recompute with the
//! inverse's own evaluations of the same functions and DCE drops what is left.

use super::graph::{Graph, Node};
use super::op::{InputKind, Op};
use super::ValueId;
use crate::{Error, Result};
use std::borrow::Cow;
use std::collections::HashMap;

/// Copies `src`'s nodes into `dst`, with `src`'s input placeholders bound to `args`;
/// returns the values of `src`'s outputs in `dst` and the full value map.
pub fn inline(dst: &mut Graph, src: &Graph, args: &[ValueId]) -> Result<(Vec<ValueId>, Vec<ValueId>)> {
    let mut map: Vec<ValueId> = vec![ValueId(u32::MAX); src.values.len()];
    let mut next_arg = 0;
    for n in &src.nodes {
        if let Op::Placeholder { kind: InputKind::Input, name } = &n.op {
            let a = *args
                .get(next_arg)
                .ok_or_else(|| Error::ir(format!("inline: no argument for input '{name}' ({next_arg})")))?;
            next_arg += 1;
            map[n.outputs[0].0 as usize] = a;
            continue;
        }
        let inputs = n.inputs.iter().map(|v| map[v.0 as usize]).collect();
        let outs = copy_node(dst, src, n, inputs)?;
        for (o, v) in n.outputs.iter().zip(outs) {
            map[o.0 as usize] = v;
        }
    }
    if next_arg != args.len() {
        return Err(Error::ir(format!("inline: {} arguments for {next_arg} inputs", args.len())));
    }
    Ok((src.outputs.iter().map(|v| map[v.0 as usize]).collect(), map))
}

/// Appends a copy of `n` (a node of `src`) to `dst` on `inputs` (values of `dst`).
pub(crate) fn copy_node(dst: &mut Graph, src: &Graph, n: &Node, inputs: Vec<ValueId>) -> Result<Vec<ValueId>> {
    match &n.op {
        Op::Placeholder { .. } | Op::Constant { .. } => {
            Ok(vec![dst.add_source(n.op.clone(), src.ty(n.outputs[0]).clone(), n.meta.clone())?])
        }
        _ => dst.add(n.op.clone(), inputs, n.meta.clone()),
    }
}

/// Ops that must never be merged or dropped when unused.
fn keep_always(op: &Op) -> bool {
    op.has_side_effect() || matches!(op, Op::Placeholder { .. })
}

/// What two mergeable nodes must share: the op's name and the (resolved) inputs.
type MergeKey = (&'static str, Vec<ValueId>);

fn mergeable(op: &Op) -> bool {
    !keep_always(op)
        && !matches!(op, Op::RandomMask { .. } | Op::Constant { .. } | Op::Call { .. } | Op::InvertibleBackward { .. })
}

/// Simplifies `g`: uses of `a` are replaced by `b` for each `(a, b)` in `equiv` (where
/// `a` is the output of a `Concat`, each part is also replaced by the matching piece of
/// `b`); identical nodes on identical inputs are merged; `split(concat(parts))` with the
/// same pieces folds to `parts`; unused side-effect-free nodes are dropped.
pub fn simplify(g: &Graph, equiv: &[(ValueId, ValueId)]) -> Result<Graph> {
    // Expand equivalences through concats into (part → piece of b) via added splits (on a
    // copy of `g`, made only when there is a split to add).
    let mut pre = Cow::Borrowed(g);
    let mut subst: HashMap<ValueId, ValueId> = HashMap::new();
    for &(a, b) in equiv {
        subst.insert(a, b);
        if let Op::Concat { dim } = &pre.producer(a).op {
            let dim = *dim;
            let parts = pre.producer(a).inputs.clone();
            let sizes: Vec<usize> = parts.iter().map(|p| pre.ty(*p).shape[dim]).collect();
            let meta = pre.producer(b).meta.clone();
            let pieces = pre.to_mut().add(Op::Split { sizes, dim }, vec![b], meta)?;
            for (p, q) in parts.into_iter().zip(pieces) {
                subst.insert(p, q);
            }
        }
    }
    let pre: &Graph = &pre;
    // The added splits must come before their uses: move them right after b's producer by
    // processing nodes in an order where each node follows its (substituted) inputs.
    let order = topo_order(pre, &subst);

    let mut out = Graph::new();
    out.nodes.reserve(pre.nodes.len());
    out.values.reserve(pre.values.len());
    let mut map: Vec<Option<ValueId>> = vec![None; pre.values.len()];
    // Merge candidates by op name and inputs: the nodes of `pre` kept, with their outputs.
    let mut seen: HashMap<MergeKey, Vec<(usize, Vec<ValueId>)>> = HashMap::new();
    let resolve = |map: &Vec<Option<ValueId>>, v: ValueId| -> Result<ValueId> {
        let v = *subst.get(&v).unwrap_or(&v);
        map[v.0 as usize].ok_or_else(|| Error::ir(format!("simplify: {v} used before it is defined")))
    };
    for &i in &order {
        let n: &Node = &pre.nodes[i];
        let inputs = n.inputs.iter().map(|&v| resolve(&map, v)).collect::<std::result::Result<Vec<_>, _>>()?;
        // split(concat(parts)) with the same sizes → parts.
        if let Op::Split { sizes, dim } = &n.op {
            let p = out.producer(inputs[0]);
            if let Op::Concat { dim: cd } = &p.op {
                let psizes: Vec<usize> = p.inputs.iter().map(|v| out.ty(*v).shape[*cd]).collect();
                if cd == dim && &psizes == sizes {
                    let parts = p.inputs.clone();
                    for (o, v) in n.outputs.iter().zip(parts) {
                        map[o.0 as usize] = Some(v);
                    }
                    continue;
                }
            }
        }
        let key = mergeable(&n.op).then(|| (n.op.name(), inputs.clone()));
        let prev =
            key.as_ref().and_then(|k| seen.get(k)).and_then(|c| c.iter().find(|(j, _)| pre.nodes[*j].op == n.op));
        if let Some((_, prev)) = prev {
            for (o, v) in n.outputs.iter().zip(prev) {
                map[o.0 as usize] = Some(*v);
            }
            continue;
        }
        // Equivalent values have the same types: the copy keeps its types.
        let outs = out.push_copy(pre, n, inputs);
        for (o, v) in n.outputs.iter().zip(&outs) {
            map[o.0 as usize] = Some(*v);
        }
        if let Some(k) = key {
            seen.entry(k).or_default().push((i, outs));
        }
    }
    out.outputs = g.outputs.iter().map(|&v| resolve(&map, v)).collect::<std::result::Result<_, _>>()?;
    let live = live_nodes(&out);
    if live.iter().all(|&l| l) {
        return Ok(out);
    }
    let order: Vec<usize> = (0..out.nodes.len()).filter(|&i| live[i]).collect();
    rebuild(&out, &order)
}

/// Node order in which every node follows the producers of its substituted inputs
/// (original order otherwise).
fn topo_order(g: &Graph, subst: &HashMap<ValueId, ValueId>) -> Vec<usize> {
    let n = g.nodes.len();
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    fn visit(i: usize, g: &Graph, subst: &HashMap<ValueId, ValueId>, done: &mut Vec<bool>, order: &mut Vec<usize>) {
        if done[i] {
            return;
        }
        done[i] = true;
        for &v in &g.nodes[i].inputs {
            let v = *subst.get(&v).unwrap_or(&v);
            visit(g.values[v.0 as usize].node, g, subst, done, order);
        }
        order.push(i);
    }
    for i in 0..n {
        visit(i, g, subst, &mut done, &mut order);
    }
    order
}

/// Drops nodes whose outputs are never used (side effects and placeholders stay).
pub fn dce(g: &Graph) -> Result<Graph> {
    let live = live_nodes(g);
    let order: Vec<usize> = (0..g.nodes.len()).filter(|&i| live[i]).collect();
    rebuild(g, &order)
}

/// Which nodes of `g` are live: side effects, placeholders, and what the outputs use.
fn live_nodes(g: &Graph) -> Vec<bool> {
    let mut used = vec![false; g.values.len()];
    for &v in &g.outputs {
        used[v.0 as usize] = true;
    }
    let mut live = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate().rev() {
        if keep_always(&n.op) || n.outputs.iter().any(|o| used[o.0 as usize]) {
            live[i] = true;
            for &v in &n.inputs {
                used[v.0 as usize] = true;
            }
        }
    }
    live
}

/// A copy of `g` with its nodes in `order` (each node after the producers of its inputs;
/// nodes left out must be unused). Value ids are renumbered.
pub fn rebuild(g: &Graph, order: &[usize]) -> Result<Graph> {
    let mut out = Graph::new();
    out.nodes.reserve(order.len());
    out.values.reserve(order.iter().map(|&i| g.nodes[i].outputs.len()).sum());
    let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
    for &i in order {
        let n = &g.nodes[i];
        let inputs = n
            .inputs
            .iter()
            .map(|v| map[v.0 as usize].ok_or_else(|| Error::ir(format!("rebuild: {v} is used before it is defined"))))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let outs = out.push_copy(g, n, inputs);
        for (o, v) in n.outputs.iter().zip(outs) {
            map[o.0 as usize] = Some(v);
        }
    }
    out.outputs = g
        .outputs
        .iter()
        .map(|v| map[v.0 as usize].ok_or_else(|| Error::ir(format!("rebuild: output {v} is not computed"))))
        .collect::<std::result::Result<_, _>>()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{BinaryKind, NodeMeta, TensorType, UnaryKind};
    use crate::tensor::DType;

    fn input(g: &mut Graph, name: &str, shape: &[usize]) -> ValueId {
        let op = Op::Placeholder { kind: InputKind::Input, name: name.into() };
        g.add_source(op, TensorType { shape: shape.to_vec(), dtype: DType::Float32 }, NodeMeta::default()).unwrap()
    }

    #[test]
    fn merges_duplicates_folds_split_of_concat_and_drops_dead_code() {
        let mut g = Graph::new();
        let m = NodeMeta::default();
        let a = input(&mut g, "a", &[2, 3]);
        let b = input(&mut g, "b", &[2, 3]);
        let e1 = g.add1(Op::Unary { kind: UnaryKind::Exp }, vec![a], m.clone()).unwrap();
        let e2 = g.add1(Op::Unary { kind: UnaryKind::Exp }, vec![a], m.clone()).unwrap();
        let c = g.add1(Op::Concat { dim: 1 }, vec![e1, b], m.clone()).unwrap();
        let parts = g.add(Op::Split { sizes: vec![3, 3], dim: 1 }, vec![c], m.clone()).unwrap();
        let _dead = g.add1(Op::Unary { kind: UnaryKind::Tanh }, vec![b], m.clone()).unwrap();
        let s = g.add1(Op::Binary { kind: BinaryKind::Add }, vec![parts[0], e2], m.clone()).unwrap();
        let s2 = g.add1(Op::Binary { kind: BinaryKind::Add }, vec![s, parts[1]], m).unwrap();
        g.outputs = vec![s2];
        let out = simplify(&g, &[]).unwrap();
        let ops: Vec<&str> = out.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["input", "input", "exp", "add", "add"]);
        crate::ir::verify::verify(&out).unwrap();
    }

    #[test]
    fn equivalences_replace_concat_parts_by_pieces() {
        let mut g = Graph::new();
        let m = NodeMeta::default();
        let y = input(&mut g, "y", &[2, 4]);
        let x = input(&mut g, "x", &[2, 2]);
        let f = g.add1(Op::Unary { kind: UnaryKind::Exp }, vec![x], m.clone()).unwrap();
        let y2 = g.add1(Op::Concat { dim: 1 }, vec![x, f], m.clone()).unwrap();
        let pieces = g.add(Op::Split { sizes: vec![2, 2], dim: 1 }, vec![y2], m.clone()).unwrap();
        let t = g.add1(Op::Unary { kind: UnaryKind::Tanh }, vec![pieces[1]], m).unwrap();
        g.outputs = vec![t];
        // y2 ≡ y: tanh now reads the second piece of y, and exp(x) is dead.
        let out = simplify(&g, &[(y2, y)]).unwrap();
        let ops: Vec<&str> = out.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["input", "input", "split", "tanh"]);
    }
}
