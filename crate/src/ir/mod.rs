//! The graph IR: a closed op set ([`op`]), typed SSA graphs ([`graph`]), shape inference
//! ([`shape`]), a printed form a person can read ([`print`]), a verifier ([`verify`]) and
//! liveness ([`liveness`]: when values are born and die, the one memory definition the
//! executor measures and the planner predicts with).

pub mod graph;
pub mod liveness;
pub mod op;
pub mod print;
pub mod shape;
pub mod simplify;
pub mod verify;

pub use graph::{describe_site, BlockKind, Graph, Node, NodeMeta, Pass, Proportion, Value, ValueId, WithoutRegions};
pub use op::{
    BinaryKind, Conv2dGeom, InputKind, Op, OptimizerStep, Pool2dGeom, ReduceKind, Reduction, Region, UnaryKind,
};
pub use shape::{broadcast_shapes, TensorType};
