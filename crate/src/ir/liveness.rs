//! Liveness: when each value of a graph is born and dies, its bytes, and the bytes live
//! while each node runs.
//!
//! This is the one definition of activation memory. The executor (`exec`) frees values and
//! counts bytes with it, so what it reports is measured on this definition; the planner
//! (`compile::memory`) builds its per-IPU memory timeline on the same [`Meter`], so a
//! prediction for a graph the executor runs on one IPU equals the measurement.
//!
//! The rules:
//! * Activations are model inputs and computed values. Parameters, buffers and constants are
//!   state held apart (the executor's store; the planner's always-live memory).
//! * A value is born when its producer runs and dies after the last node that reads it; a
//!   graph output lives to the end; a value nothing reads is dropped at once (never live).
//! * While node `i` runs, live bytes are what was live before it plus the larger of its
//!   outputs and, for a node that runs a sub-graph (`Call` bodies, `InvertibleBackward` VJP
//!   graphs), that sub-graph's own peak (its inputs count again inside it, as the executor
//!   hands them over as the sub-graph's inputs).
//!
//! Bytes are `u64` everywhere, here and in the planner built on it: in wasm32 `usize` is
//! 32 bits, and the activations of a deep model (or its stash over micro-batches) pass
//! 4 GiB. A value's bytes are computed with saturating arithmetic ([`value_bytes`]), and
//! sums saturate rather than wrap.

use super::{Graph, InputKind, Op, TensorType};

/// Elements of a value of type `ty` in 64 bits, saturating at `u64::MAX` rather than
/// wrapping for a shape no tensor could have.
pub fn value_elements(ty: &TensorType) -> u64 {
    ty.shape.iter().fold(1u64, |acc, &d| acc.saturating_mul(d as u64))
}

/// Bytes of a value of type `ty` (shape × dtype size) in 64 bits, saturating.
pub fn value_bytes(ty: &TensorType) -> u64 {
    value_elements(ty).saturating_mul(ty.dtype.size() as u64)
}

/// Whether a node's outputs count as activation memory: model inputs and computed values
/// do; parameters, buffers and constants do not.
pub fn counts_as_activation(op: &Op) -> bool {
    match op {
        Op::Placeholder { kind, .. } => *kind == InputKind::Input,
        Op::Constant { .. } => false,
        _ => true,
    }
}

/// The sub-graph a node runs while it executes, if any: a `Call`'s region body or an
/// `InvertibleBackward`'s VJP graph.
pub fn sub_graph(op: &Op) -> Option<&Graph> {
    match op {
        Op::Call { region } => Some(&region.forward),
        Op::InvertibleBackward { vjp, .. } => Some(vjp),
        _ => None,
    }
}

/// Birth, death and size of every value of one graph (indexed by `ValueId`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lifetimes {
    /// The node that produces the value.
    pub birth: Vec<usize>,
    /// The last node that reads it; `nodes.len()` for a graph output; `None` when nothing
    /// reads it (then it is never live).
    pub death: Vec<Option<usize>>,
    /// Bytes of the value (static shape × dtype size, [`value_bytes`]).
    pub bytes: Vec<u64>,
    /// Whether it counts as activation memory ([`counts_as_activation`] of its producer).
    pub counted: Vec<bool>,
}

impl Lifetimes {
    /// The lifetimes of `g`'s values.
    pub fn of(g: &Graph) -> Lifetimes {
        let n = g.values.len();
        let mut death = vec![None; n];
        for (i, node) in g.nodes.iter().enumerate() {
            for &v in &node.inputs {
                death[v.0 as usize] = Some(i);
            }
        }
        for &v in &g.outputs {
            death[v.0 as usize] = Some(g.nodes.len());
        }
        let birth: Vec<usize> = g.values.iter().map(|v| v.node).collect();
        let bytes = g.values.iter().map(|v| value_bytes(&v.ty)).collect();
        let counted = birth.iter().map(|&b| counts_as_activation(&g.nodes[b].op)).collect();
        Lifetimes { birth, death, bytes, counted }
    }

    /// Whether value `v` is ever live as an activation.
    pub fn is_live(&self, v: usize) -> bool {
        self.counted[v] && self.death[v].is_some()
    }
}

/// Live-byte accounting over a program, node by node: the executor feeds it the bytes of
/// the tensors it makes and frees; the planner feeds it predicted intervals.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meter {
    /// Bytes live now.
    pub live: u64,
    /// The most bytes live at once so far.
    pub peak: u64,
    /// The node at which `peak` was reached.
    pub peak_node: Option<usize>,
}

impl Meter {
    /// Node `i` runs: a sub-graph peak of `inner` bytes on top of what is live, then its
    /// outputs (`born` bytes) join the live set. Returns the most bytes live while it ran.
    pub fn run(&mut self, i: usize, inner: u64, born: u64) -> u64 {
        let during = self.live.saturating_add(inner.max(born));
        self.live = self.live.saturating_add(born);
        if during > self.peak || self.peak_node.is_none() {
            self.peak = self.peak.max(during);
            self.peak_node = Some(i);
        }
        during
    }

    /// A value of `bytes` dies.
    pub fn free(&mut self, bytes: u64) {
        self.live = self.live.saturating_sub(bytes);
    }
}

/// A value's stay in memory: born at node `start`, freed after node `end` (`end` equal to
/// the number of nodes: never freed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub start: usize,
    pub end: usize,
    pub bytes: u64,
}

/// Live bytes over a program of `n` nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// Bytes live after each node (its dead inputs freed).
    pub live_after: Vec<u64>,
    /// The most bytes live while each node runs.
    pub during: Vec<u64>,
    /// The most bytes live at once, and the node where that happens (`None` for no nodes).
    pub peak: u64,
    pub peak_node: Option<usize>,
}

/// Sweeps a program of `n` nodes with values held over `intervals` and a sub-graph peak
/// `inner[i]` while node `i` runs (an empty slice: none).
pub fn timeline(n: usize, intervals: &[Interval], inner: &[u64]) -> Timeline {
    let mut born = vec![0u64; n];
    let mut freed = vec![0u64; n];
    for iv in intervals {
        if iv.start < n {
            born[iv.start] = born[iv.start].saturating_add(iv.bytes);
        }
        if iv.end < n {
            freed[iv.end] = freed[iv.end].saturating_add(iv.bytes);
        }
    }
    let mut m = Meter::default();
    let mut live_after = Vec::with_capacity(n);
    let mut during = Vec::with_capacity(n);
    for i in 0..n {
        during.push(m.run(i, inner.get(i).copied().unwrap_or(0), born[i]));
        m.free(freed[i]);
        live_after.push(m.live);
    }
    Timeline { live_after, during, peak: m.peak, peak_node: m.peak_node }
}

/// A graph's liveness: its values' lifetimes, the sub-graph peak of each node, and its
/// timeline.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Liveness {
    pub lifetimes: Lifetimes,
    /// The peak of the sub-graph each node runs (0 for ordinary nodes).
    pub inner_peak: Vec<u64>,
    pub timeline: Timeline,
}

impl Liveness {
    /// The intervals of the values that count as activations.
    pub fn intervals(lt: &Lifetimes) -> Vec<Interval> {
        (0..lt.birth.len())
            .filter(|&v| lt.is_live(v))
            .map(|v| Interval { start: lt.birth[v], end: lt.death[v].expect("live"), bytes: lt.bytes[v] })
            .collect()
    }

    /// The peak bytes of activations while `g` runs, nested sub-graphs included.
    pub fn peak(&self) -> u64 {
        self.timeline.peak
    }
}

/// The liveness of `g`, nested sub-graphs included (each one's peak is computed once per
/// distinct sub-graph).
pub fn liveness(g: &Graph) -> Liveness {
    let mut memo = std::collections::HashMap::new();
    liveness_memo(g, &mut memo)
}

fn liveness_memo(g: &Graph, memo: &mut std::collections::HashMap<*const Graph, u64>) -> Liveness {
    let lifetimes = Lifetimes::of(g);
    let inner_peak: Vec<u64> = g
        .nodes
        .iter()
        .map(|n| match sub_graph(&n.op) {
            Some(sub) => {
                let key = sub as *const Graph;
                if let Some(&p) = memo.get(&key) {
                    p
                } else {
                    let p = liveness_memo(sub, memo).peak();
                    memo.insert(key, p);
                    p
                }
            }
            None => 0,
        })
        .collect();
    let timeline = timeline(g.nodes.len(), &Liveness::intervals(&lifetimes), &inner_peak);
    Liveness { lifetimes, inner_peak, timeline }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;
    use crate::trace::Tracer;

    #[test]
    fn a_chain_holds_its_input_and_one_intermediate() {
        let tr = Tracer::new();
        let x = tr.input("x", &[1000], DType::Float32).unwrap();
        let mut h = x.clone();
        for _ in 0..10 {
            h = h.relu().unwrap();
        }
        let t = tr.finish(&[&h]).unwrap();
        let l = liveness(&t.graph);
        // x (4000 B) lives until the first relu; each relu holds its input and output.
        assert_eq!(l.timeline.peak, 8000);
        assert_eq!(l.timeline.peak_node, Some(1));
        assert_eq!(l.timeline.live_after, [4000; 11]);
        assert_eq!(l.lifetimes.death[0], Some(1));
        assert_eq!(l.lifetimes.death[10], Some(11), "the output lives to the end");
    }

    #[test]
    fn parameters_and_constants_are_not_activations_and_unread_values_never_live() {
        let tr = Tracer::new();
        let x = tr.input("x", &[4], DType::Float32).unwrap();
        let w = tr.param("w", std::rc::Rc::new(crate::tensor::Tensor::zeros(&[4], DType::Float32))).unwrap();
        let _unused = x.exp().unwrap();
        let y = x.mul(&w).unwrap();
        let t = tr.finish(&[&y]).unwrap();
        let l = liveness(&t.graph);
        let lt = &l.lifetimes;
        assert!(lt.counted[0] && !lt.counted[1]);
        assert!(!lt.is_live(2), "exp's result is never read");
        // x (16) + y (16) while mul runs; exp's output never counts.
        assert_eq!(l.peak(), 32);
    }

    #[test]
    fn bytes_are_64_bit_and_saturate_instead_of_wrapping() {
        use crate::tensor::DType;
        // 2^31 floats: 8 GiB, past what a 32-bit usize holds.
        assert_eq!(value_bytes(&TensorType::new(&[1 << 16, 1 << 15], DType::Float32)), 8 << 30);
        assert_eq!(value_bytes(&TensorType::new(&[usize::MAX, 4], DType::Float32)), u64::MAX);
        assert_eq!(value_bytes(&TensorType::new(&[], DType::Float16)), 2);
        // Five values of 3 GiB live at once: 15 GiB, counted exactly.
        let gib3 = 3u64 << 30;
        let ivs: Vec<Interval> = (0..5).map(|i| Interval { start: i, end: 5, bytes: gib3 }).collect();
        let t = timeline(6, &ivs, &[]);
        assert_eq!(t.peak, 5 * gib3);
        assert_eq!(t.live_after[4], 5 * gib3);
        let mut m = Meter::default();
        m.run(0, u64::MAX, 1);
        assert_eq!(m.peak, u64::MAX, "saturates");
    }

    #[test]
    fn meter_takes_the_larger_of_outputs_and_sub_graph_peak() {
        let mut m = Meter::default();
        assert_eq!(m.run(0, 0, 10), 10);
        assert_eq!(m.run(1, 50, 5), 60);
        m.free(10);
        assert_eq!(m.live, 5);
        assert_eq!((m.peak, m.peak_node), (60, Some(1)));
        let t =
            timeline(2, &[Interval { start: 0, end: 1, bytes: 10 }, Interval { start: 1, end: 2, bytes: 5 }], &[0, 50]);
        assert_eq!(t.during, [10, 60]);
        assert_eq!(t.live_after, [10, 5]);
    }
}
