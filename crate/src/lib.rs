//! ipu-playground: learn and plan how a model runs on Graphcore IPUs, and train a GNN,
//! in a browser tab.
//!
//! The pipeline a model travels, one folder a step (see ARCHITECTURE.md):
//! `trace` → `ir` → `autograd` → `compile` (the IPU planner) → `exec`, with `kernels`
//! apart from the graph code, `gnn` on top of the same ops and `api` as the thin
//! wasm-bindgen edge.

pub mod autograd;
pub mod compile;
pub mod error;
pub mod exec;
pub mod gnn;
pub mod ir;
pub mod kernels;
pub mod models;
pub mod poptorch;
pub mod rng;
pub mod tensor;
pub mod trace;

#[cfg(target_arch = "wasm32")]
pub mod api;

pub use error::{Error, ErrorKind, Result};
