//! The graph IR: a closed op set ([`op`]), typed SSA graphs ([`graph`]), shape inference
//! ([`shape`]), a printed form a person can read ([`print`]) and a verifier ([`verify`]).

pub mod graph;
pub mod op;
pub mod print;
pub mod shape;
pub mod simplify;
pub mod verify;

pub use graph::{describe_site, Graph, IrError, Node, NodeMeta, Pass, Value, ValueId};
pub use op::{BinaryKind, InputKind, Op, OptimizerStep, ReduceKind, Reduction, Region, UnaryKind};
pub use shape::{broadcast_shapes, TensorType};
