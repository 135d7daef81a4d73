//! ipu-playground: learn and plan how a model runs on Graphcore IPUs, and train a GNN,
//! in a browser tab.
//!
//! The pipeline a model travels, one folder a step (see ARCHITECTURE.md):
//! `trace` → `ir` → `autograd` → `compile` (the IPU planner) → `exec`, with `kernels`
//! apart from the graph code, `gnn` on top of the same ops and `api` as the thin
//! wasm-bindgen edge.
//!
//! Trace a model with PopTorch-style Blocks, then ask the planner how PopTorch would run it:
//!
//! ```
//! use ipu_playground::compile::{plan, Options};
//! use ipu_playground::rng::Rng;
//! use ipu_playground::tensor::DType;
//! use ipu_playground::trace::nn::{Linear, Module};
//! use ipu_playground::trace::Tracer;
//!
//! let mut rng = Rng::new(0);
//! let tr = Tracer::new();
//! let x = tr.input("x", &[4, 8], DType::Float32)?;
//! let (fc1, fc2, fc3) =
//!     (Linear::new(8, 8, true, &mut rng)?, Linear::new(8, 8, true, &mut rng)?, Linear::new(8, 2, true, &mut rng)?);
//! // poptorch.Block("first", ipu_id=0), ("second", 1), ("third", 2); each Linear under its
//! // module scope, which names its parameters (fc1.weight, …)
//! let h = tr.block("first", Some(0), || tr.scope("fc1", || fc1.forward(&tr, &x))?.relu())?;
//! let h = tr.block("second", Some(1), || tr.scope("fc2", || fc2.forward(&tr, &h))?.relu())?;
//! let y = tr.block("third", Some(2), || tr.scope("fc3", || fc3.forward(&tr, &h)))?;
//! let graph = tr.finish(&[&y])?.graph;
//!
//! // Three IPUs: PopTorch reserves a power of two, so four, and refuses without
//! // autoRoundNumIPUs.
//! let p = plan(&graph, &Options::default());
//! assert_eq!((p.ipus_used, p.ipus_reserved, p.valid), (3, 4, false));
//! assert_eq!(p.errors[0].code, "ipu_count_not_power_of_two");
//!
//! let mut opts = Options::new(); // poptorch.Options(), with its builder and its checks
//! opts.auto_round_num_ipus(true)?.device_iterations(3)?;
//! let p = plan(&graph, &opts);
//! assert!(p.valid && p.fits);
//! assert_eq!(p.stages.len(), 3); // one pipeline stage per IPU switch + 1
//! # Ok::<(), ipu_playground::Error>(())
//! ```

pub mod autograd;
pub mod compile;
pub mod error;
pub mod exec;
pub mod export;
pub mod gnn;
pub mod ir;
pub mod kernels;
pub mod models;
pub mod poptorch;
pub mod progress;
pub mod rng;
pub mod tensor;
pub mod trace;

#[cfg(target_arch = "wasm32")]
pub mod api;
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
mod wasm_heap;

/// std's allocator with a wasm memory that grows geometrically (see `wasm_heap`).
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
#[global_allocator]
static HEAP: wasm_heap::Heap = wasm_heap::Heap::new();

pub use error::{Error, ErrorKind, Result};
