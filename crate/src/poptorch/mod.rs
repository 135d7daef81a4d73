//! PopTorch on the CPU: `training_model` / `inference_model` wrap a traced model
//! ([`HostModel`]) with the planner's [`Options`] and run it with IPU semantics on the CPU
//! executor ([`PoplarExecutor`]): device iterations, replicas, gradient accumulation and
//! reduction, output modes, replica-grouped weights, buffers, loss scaling, and the
//! optimizers of `poptorch.optim` ([`optim`]). Errors carry PopTorch's (or PopART's)
//! messages where PopTorch raises one.
//!
//! * [`model`]: the host model (traced graph + host weights, shared by its wrappers).
//! * [`executor`]: `PoplarExecutor` (compile, call, copy weights, setOptimizer, destroy).
//! * [`batch`]: the combined batch, micro-batch order and output modes.
//! * [`reduce`]: gradient accumulation and Mean/Sum reduction (Post, Running).
//! * [`replicas`]: a step's contributions and outputs, packed for replicas on several
//!   executors (workers) and gathered back.
//! * [`grouping`]: replica groups of weights and inputs.
//! * [`loss_scaling`]: manual and automatic loss scaling.
//! * [`optim`]: the optimizers, constant/variable attributes, replacement rules.

pub mod batch;
pub mod executor;
pub mod grouping;
pub mod loss_scaling;
pub mod model;
pub mod optim;
pub mod reduce;
pub mod replicas;

pub use crate::compile::Options;
pub use batch::BatchInput;
pub use executor::{input_types, PoplarExecutor};
pub use model::HostModel;
pub use optim::{Optimizer, OptimizerArgs, OptimizerType, ParamGroup};

/// `poptorch.trainingModel(model, options, optimizer)`: a loss must come out of the
/// forward (PopTorch's loss rules); without an optimizer, SGD with lr 0.01. `options` are
/// frozen. Wrapping a model a training wrapper already holds is PopTorch's error.
pub fn training_model(
    model: &HostModel,
    options: &mut Options,
    optimizer: Option<Optimizer>,
) -> Result<PoplarExecutor> {
    PoplarExecutor::new(model, options, true, optimizer)
}

/// `poptorch.inferenceModel(model, options)`: gradient accumulation must be 1.
pub fn inference_model(model: &HostModel, options: &mut Options) -> Result<PoplarExecutor> {
    PoplarExecutor::new(model, options, false, None)
}

use crate::Result;
