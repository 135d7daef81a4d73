//! Element types.

use crate::Error;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The element types a tensor can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE binary32.
    Float32,
    /// IEEE binary16 (rounding, overflow to inf, subnormals and underflow as the standard says).
    Float16,
    /// 32-bit signed integers (indices, labels).
    Int32,
    /// Booleans (masks).
    Bool,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Float32 | DType::Int32 => 4,
            DType::Float16 => 2,
            DType::Bool => 1,
        }
    }

    /// True for floating-point types (the ones gradients flow through).
    pub fn is_float(self) -> bool {
        matches!(self, DType::Float32 | DType::Float16)
    }

    /// The short name used in printed graphs ("f32", "f16", "i32", "bool").
    pub fn short(self) -> &'static str {
        match self {
            DType::Float32 => "f32",
            DType::Float16 => "f16",
            DType::Int32 => "i32",
            DType::Bool => "bool",
        }
    }

    /// Parses "float32"/"f32", "float16"/"f16"/"half", "int32"/"i32", "bool".
    pub fn parse(s: &str) -> crate::Result<DType> {
        match s.to_ascii_lowercase().as_str() {
            "float32" | "f32" | "float" => Ok(DType::Float32),
            "float16" | "f16" | "half" => Ok(DType::Float16),
            "int32" | "i32" | "int" => Ok(DType::Int32),
            "bool" => Ok(DType::Bool),
            other => Err(Error::tensor(format!("unknown dtype '{other}' (expected float32, float16, int32 or bool)"))),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short())
    }
}
