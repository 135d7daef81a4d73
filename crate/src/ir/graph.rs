//! The graph: nodes in execution order, each producing typed values.

use super::op::{InputKind, Op};
use super::shape::{infer, TensorType};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Identifies a value (a tensor produced by one node output) inside one graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ValueId(pub u32);

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// Which part of a training step a node belongs to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pass {
    #[default]
    Forward,
    Backward,
    Optimizer,
}

/// Which Block annotation decided a node's block. PopTorch's two kinds differ in how they
/// end: a `Block` scope ends with its `with` statement, after which no block is active (the
/// enclosing block is not restored: `end_ipu_block` clears the active IPU), while a
/// `BeginBlock` stays in effect until the next block starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    /// `poptorch.Block` / `BlockFunction` (the tracer's `block`, JS `block(id, ipu, fn)`).
    Scoped,
    /// `poptorch.BeginBlock` / `Block.start` (the tracer's `begin_block`, JS `beginBlock`).
    Begin,
    /// No block: a `Block` scope ended before this op and no block started since (PopTorch
    /// rejects such an op: "No active Block, all the ops must belong to a Block").
    Ended,
}

/// Where a node came from: module scope, Block/IPU annotation, user source location.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMeta {
    /// Module scope path, e.g. `convs.3.convs.1.conv.lin_l` (empty at the top level).
    pub scope: String,
    /// The active Block's id, if any.
    pub block: Option<String>,
    /// The IPU the active Block asked for, if any.
    pub ipu: Option<usize>,
    /// Which annotation made `block` active (`Ended` with no block: a Block scope ended
    /// before the op); `None` before any block annotation, when ops go to IPU 0.
    #[serde(default)]
    pub block_kind: Option<BlockKind>,
    /// `poptorch.BeginBlock(module, …)`: the path of the module whose call began `block`
    /// (kind `Begin`); none where `Block.start` / `beginBlock` or a `Block` scope did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_module: Option<String>,
    /// Where in the user's code the op was called (`file:line`), when known.
    pub source: Option<String>,
    /// Forward, backward or optimizer.
    pub pass: Pass,
    /// `poptorch.recomputationCheckpoint` on this node's output: when recomputation is on,
    /// the value is stashed for the backward pass instead of recomputed, and recomputation
    /// restarts from it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checkpoint: bool,
    /// `poptorch.set_available_memory` on this op (matmul, convolution, gather, scatter): the
    /// share of tile memory its temporaries may use, in (0, 1]; none: the IPU's proportion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_memory: Option<Proportion>,
}

/// A proportion in (0, 1], compared by its bits (so node metadata stays `Eq`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Proportion(pub f64);

impl Eq for Proportion {}

/// One operation applied to values, producing values.
///
/// In JSON: `{ "opname": "relu", "op": "unary", "kind": "relu", …attributes, "inputs",
/// "outputs", "meta" }`: `opname` is the printed name, `op` the variant.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub op: Op,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    pub meta: NodeMeta,
}

impl Serialize for Node {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.serialize_as(s, true)
    }
}

impl Node {
    /// The node's JSON; without `regions`, a `call` or `invertible_backward` node leaves out
    /// its `region` (the called sub-graphs), keeping its other fields.
    fn serialize_as<S: serde::Serializer>(&self, s: S, regions: bool) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct NodeJson<'a, O> {
            opname: &'static str,
            #[serde(flatten)]
            op: O,
            inputs: &'a [ValueId],
            outputs: &'a [ValueId],
            meta: &'a NodeMeta,
        }
        /// A region op's fields but its region (`op` is the tag `Op`'s JSON has).
        #[derive(Serialize)]
        struct RegionOp<'a> {
            op: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            needs_grad: Option<&'a [bool]>,
        }
        let region_op = match &self.op {
            Op::Call { .. } if !regions => Some(RegionOp { op: "call", needs_grad: None }),
            Op::InvertibleBackward { needs_grad, .. } if !regions => {
                Some(RegionOp { op: "invertible_backward", needs_grad: Some(needs_grad) })
            }
            _ => None,
        };
        let (opname, inputs, outputs, meta) = (self.op.name(), &self.inputs[..], &self.outputs[..], &self.meta);
        match region_op {
            Some(op) => NodeJson { opname, op, inputs, outputs, meta }.serialize(s),
            None => NodeJson { opname, op: &self.op, inputs, outputs, meta }.serialize(s),
        }
    }
}

/// A graph's JSON without the bodies of the regions its nodes call (see [`Node`]'s
/// `serialize_as`): what a view of the graph reads. In a deep reversible model the regions
/// are most of the JSON (17 of 20 MB at 1,000 layers).
pub struct WithoutRegions<'a>(pub &'a Graph);

impl Serialize for WithoutRegions<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{SerializeSeq, SerializeStruct};
        struct Nodes<'a>(&'a [Node]);
        impl Serialize for Nodes<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                struct One<'a>(&'a Node);
                impl Serialize for One<'_> {
                    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                        self.0.serialize_as(s, false)
                    }
                }
                let mut seq = s.serialize_seq(Some(self.0.len()))?;
                for n in self.0 {
                    seq.serialize_element(&One(n))?;
                }
                seq.end()
            }
        }
        let g = self.0;
        let mut st = s.serialize_struct("Graph", 3)?;
        st.serialize_field("nodes", &Nodes(&g.nodes))?;
        st.serialize_field("values", &g.values)?;
        st.serialize_field("outputs", &g.outputs)?;
        st.end()
    }
}

/// A value's static type and the node output that defines it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Value {
    #[serde(flatten)]
    pub ty: TensorType,
    /// Index into `Graph::nodes` of the producer.
    pub node: usize,
}

/// A graph in SSA form: `nodes` are in a valid execution order.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub values: Vec<Value>,
    pub outputs: Vec<ValueId>,
}

/// Describes where an op was called, for error messages: `'linear' in scope fc1 (model.js:12)`.
pub fn describe_site(op: &Op, meta: &NodeMeta) -> String {
    let mut s = format!("'{}'", op.name());
    if !meta.scope.is_empty() {
        s.push_str(&format!(" in scope {}", meta.scope));
    }
    if let Some(src) = &meta.source {
        s.push_str(&format!(" ({src})"));
    }
    s
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// Appends a node after inferring and checking its output types. The error names the
    /// op, its scope, its source line and the offending shapes.
    pub fn add(&mut self, op: Op, inputs: Vec<ValueId>, meta: NodeMeta) -> Result<Vec<ValueId>> {
        self.add_checked(op, inputs, meta, |_, _, _| Ok(()))
    }

    /// [`Graph::add`], with `check` run on the inferred output types before anything is
    /// appended (the tracer's size limits): its error leaves the graph as it was.
    pub fn add_checked(
        &mut self,
        op: Op,
        inputs: Vec<ValueId>,
        meta: NodeMeta,
        check: impl FnOnce(&Op, &NodeMeta, &[TensorType]) -> Result<()>,
    ) -> Result<Vec<ValueId>> {
        for &v in &inputs {
            if v.0 as usize >= self.values.len() {
                return Err(Error::ir(format!("{}: input {v} is not defined", describe_site(&op, &meta)))
                    .with_source(meta.source.as_deref()));
            }
        }
        let in_types: Vec<&TensorType> = inputs.iter().map(|&v| &self.values[v.0 as usize].ty).collect();
        let out_types = infer(&op, &in_types)
            .map_err(|e| e.context(describe_site(&op, &meta)).with_source(meta.source.as_deref()))?;
        check(&op, &meta, &out_types).map_err(|e| e.with_source(meta.source.as_deref()))?;
        let node = self.nodes.len();
        let outputs: Vec<ValueId> = out_types
            .into_iter()
            .map(|ty| {
                self.values.push(Value { ty, node });
                ValueId(self.values.len() as u32 - 1)
            })
            .collect();
        self.nodes.push(Node { op, inputs, outputs: outputs.clone(), meta });
        Ok(outputs)
    }

    /// Appends a copy of `n`, a node of `src`, on `inputs` whose types are those of `n`'s
    /// own inputs in `src`: its outputs keep their types, so nothing is inferred again (a
    /// graph pass copying nodes as they are: [`crate::ir::simplify`]).
    pub(crate) fn push_copy(&mut self, src: &Graph, n: &Node, inputs: Vec<ValueId>) -> Vec<ValueId> {
        debug_assert!(
            n.inputs.iter().zip(&inputs).all(|(a, b)| src.ty(*a) == self.ty(*b)),
            "push_copy of {}: input types differ",
            n.op.name()
        );
        let node = self.nodes.len();
        let outputs: Vec<ValueId> = n
            .outputs
            .iter()
            .map(|o| {
                self.values.push(Value { ty: src.ty(*o).clone(), node });
                ValueId(self.values.len() as u32 - 1)
            })
            .collect();
        self.nodes.push(Node { op: n.op.clone(), inputs, outputs: outputs.clone(), meta: n.meta.clone() });
        outputs
    }

    /// Appends a node with no inputs whose type is given rather than inferred: placeholders
    /// and constants (a constant's type must match its value).
    pub fn add_source(&mut self, op: Op, ty: TensorType, meta: NodeMeta) -> Result<ValueId> {
        match &op {
            Op::Placeholder { .. } => {}
            Op::Constant { value, .. } if value.shape() == ty.shape.as_slice() && value.dtype() == ty.dtype => {}
            _ => {
                return Err(Error::ir(format!(
                    "{}: only placeholders and constants take a given type",
                    describe_site(&op, &meta)
                )))
            }
        }
        let node = self.nodes.len();
        self.values.push(Value { ty, node });
        let v = ValueId(self.values.len() as u32 - 1);
        self.nodes.push(Node { op, inputs: vec![], outputs: vec![v], meta });
        Ok(v)
    }

    /// Like [`Graph::add`] for single-output ops.
    pub fn add1(&mut self, op: Op, inputs: Vec<ValueId>, meta: NodeMeta) -> Result<ValueId> {
        let outs = self.add(op, inputs, meta)?;
        match outs.as_slice() {
            [v] => Ok(*v),
            _ => Err(Error::ir(format!("op produced {} outputs where one was expected", outs.len()))),
        }
    }

    /// The static type of a value.
    pub fn ty(&self, v: ValueId) -> &TensorType {
        &self.values[v.0 as usize].ty
    }

    /// The node that defines a value.
    pub fn producer(&self, v: ValueId) -> &Node {
        &self.nodes[self.values[v.0 as usize].node]
    }

    /// Placeholders of the given kind, in order, as (name, value).
    pub fn placeholders(&self, kind: InputKind) -> Vec<(&str, ValueId)> {
        self.nodes
            .iter()
            .filter_map(|n| match &n.op {
                Op::Placeholder { kind: k, name } if *k == kind => Some((name.as_str(), n.outputs[0])),
                _ => None,
            })
            .collect()
    }

    /// Constants frozen into the graph, as (name, value).
    pub fn constants(&self) -> Vec<(&str, ValueId)> {
        self.nodes
            .iter()
            .filter_map(|n| match &n.op {
                Op::Constant { name, .. } => Some((name.as_str(), n.outputs[0])),
                _ => None,
            })
            .collect()
    }

    /// For every value, the index of the last node that reads it (or `None`); graph outputs
    /// count as read at the end.
    pub fn last_uses(&self) -> Vec<Option<usize>> {
        let mut last = vec![None; self.values.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for &v in &n.inputs {
                last[v.0 as usize] = Some(i);
            }
        }
        for &v in &self.outputs {
            last[v.0 as usize] = Some(self.nodes.len());
        }
        last
    }

    /// The graph as pretty JSON (for the page).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("graph serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Region;
    use std::rc::Rc;

    /// A node of each region op, calling a one-node region.
    fn region_graph() -> Graph {
        let mut body = Graph::new();
        let x = body
            .add(
                Op::Full { shape: vec![2], dtype: crate::tensor::DType::Float32, value: 1.0 },
                vec![],
                NodeMeta::default(),
            )
            .unwrap();
        body.outputs = x;
        let region = Rc::new(Region { name: "convs.0".into(), forward: body.clone(), inverse: Some(body.clone()) });
        let node = |op| Node { op, inputs: vec![], outputs: vec![], meta: NodeMeta::default() };
        Graph {
            nodes: vec![
                node(Op::Call { region: region.clone() }),
                node(Op::InvertibleBackward { region, vjp: Rc::new(body), needs_grad: vec![true, false] }),
            ],
            values: vec![],
            outputs: vec![],
        }
    }

    #[test]
    fn without_regions_is_the_json_less_each_region() {
        let g = region_graph();
        let mut full = serde_json::to_value(&g).unwrap();
        let lean = serde_json::to_value(WithoutRegions(&g)).unwrap();
        for n in full["nodes"].as_array_mut().unwrap() {
            assert!(n["region"]["forward"]["nodes"].is_array(), "{n}");
            n.as_object_mut().unwrap().remove("region");
        }
        assert_eq!(lean, full);
        assert_eq!(lean["nodes"][0]["op"], "call");
        assert_eq!(lean["nodes"][1]["op"], "invertible_backward");
        assert_eq!(lean["nodes"][1]["needs_grad"], serde_json::json!([true, false]));
    }
}
