//! The IPU planner: reads a graph (a traced forward graph or a training graph from
//! `autograd::training_graph`) and [`Options`] (`poptorch.Options`), and returns a [`Plan`]:
//! where every op runs (Blocks → Stages → Phases → IPUs), how many IPUs are used and
//! reserved, the pipeline schedule, a per-IPU memory timeline with a tile map and a fit
//! check, an execution timeline with throughput, and PopTorch's errors and warnings.
//! It never runs kernels: it depends on `ir` (and reads what autograd produced).
//!
//! * [`options`]: `poptorch.Options` with PopTorch's checks, serde JSON, freeze.
//! * [`strategy`]: the four execution strategies, Stage/AutoStage/Phase.
//! * [`placement`]: blocks → stages → phases → IPUs as a side table by node, IPU count
//!   rounding, inter-IPU copies.
//! * [`schedule`]: order-deciding passes (optimizer updates early) and the pipeline's
//!   ramp-up / steady / ramp-down table.
//! * [`hardware`]: Mk1 GC2, Mk2 GC200 and Bow numbers, each with its source or "estimate".
//! * [`memory`]: always-live and per-step memory per IPU (on `ir::liveness`), tile map,
//!   fit errors.
//! * [`time`]: per-op cost → per-IPU intervals, step time and throughput.
//! * [`plan`](mod@plan): the [`Plan`] type, [`plan()`] and the text summary.

pub mod error;
pub mod hardware;
pub mod memory;
pub mod options;
pub mod placement;
pub mod plan;
pub mod schedule;
pub mod strategy;
pub mod time;

pub use error::Diagnostic;
pub use hardware::{Generation, IpuGeneration};
pub use options::{AnchoredTensor, Options, PartialsType, PrecisionOptions, TensorClass, TensorLocationSettings};
pub use plan::{plan, plan_json, plan_request, plan_with, OptimizerChoice, Plan, PlanRequest, PlanSettings};
pub use strategy::{AutoStage, ExecutionStrategy, PhaseSpec, PhasedExecution, PipelinedExecution, StageSpec};
