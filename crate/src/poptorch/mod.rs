//! PopTorch on the CPU: the `poptorch` API (optimizers, and — once the planner's `Options`
//! land — `training_model`/`inference_model` executed with IPU semantics).

pub mod loss_scaling;
pub mod optim;

use std::fmt;

/// An error of the PopTorch layer, carrying PopTorch's (or PopART's) message where one
/// exists.
#[derive(Clone, Debug, PartialEq)]
pub struct PoptorchError(pub String);

impl fmt::Display for PoptorchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PoptorchError {}

impl From<crate::trace::TraceError> for PoptorchError {
    fn from(e: crate::trace::TraceError) -> Self {
        PoptorchError(e.0)
    }
}

impl From<crate::ir::IrError> for PoptorchError {
    fn from(e: crate::ir::IrError) -> Self {
        PoptorchError(e.0)
    }
}

impl From<crate::exec::ExecError> for PoptorchError {
    fn from(e: crate::exec::ExecError) -> Self {
        PoptorchError(e.0)
    }
}
