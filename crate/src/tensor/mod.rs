//! Tensors: dtypes, ndarray-backed dense storage and sparse matrices.

pub mod alloc;
mod dtype;
pub mod float16;
pub mod param;
pub mod safetensors;
pub mod sparse;
#[allow(clippy::module_inception)]
mod tensor;

pub use dtype::DType;
pub use param::{Init, Param};
pub use sparse::CsrMatrix;
pub use tensor::{numel, Shape, Tensor};
