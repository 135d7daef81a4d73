//! Checked sizes and fallible allocation for tensors whose size a caller chose (a JavaScript
//! model, a traced input): the size is checked against [`MAX_TENSOR_BYTES`] with checked
//! products before anything is allocated, and the allocation itself reports a failure as an
//! error instead of aborting, so that a request too large leaves the engine working.
//!
//! These are the limits the JS API documents (README, the package's `.d.ts`): one tensor
//! holds at most [`MAX_TENSOR_BYTES`] bytes and has at most [`MAX_RANK`] dimensions.

use super::DType;
use crate::{Error, Result};

/// The most bytes one tensor may hold (256 MiB): well under wasm32's 4 GiB address space,
/// so that a model of several such tensors can still fit.
pub const MAX_TENSOR_BYTES: usize = 256 << 20;

/// The most dimensions a tensor may have.
pub const MAX_RANK: usize = 16;

/// `f32[2,3]`, for messages (any dims, even ones too big for `usize`).
pub fn describe_shape(shape: &[u64], dtype: DType) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("{dtype}[{}]", dims.join(","))
}

/// Bytes of a tensor of `shape` and `dtype`, or `None` when the product overflows `u128`.
pub fn checked_bytes(shape: &[u64], dtype: DType) -> Option<u128> {
    shape.iter().try_fold(dtype.size() as u128, |acc, &d| acc.checked_mul(d as u128))
}

/// Checks that a tensor `what` of `shape` and `dtype` is within [`MAX_RANK`] and
/// [`MAX_TENSOR_BYTES`]; returns the shape in `usize` (every dim then fits).
pub fn check_shape(what: &str, shape: &[u64], dtype: DType) -> Result<Vec<usize>> {
    check_dims(what, shape, dtype)?;
    Ok(shape.iter().map(|&d| d as usize).collect())
}

/// Checks the shape of a tensor `what` that is described but never allocated (a shape-only
/// input of a plan: the combined batch of every micro-batch of a step, which only the
/// micro-batch's shape, checked by [`check_shape`] when traced, ever takes memory for):
/// within [`MAX_RANK`], and its byte count a `u64`.
pub fn check_type_shape(what: &str, shape: &[u64], dtype: DType) -> Result<Vec<usize>> {
    if shape.len() > MAX_RANK {
        return Err(Error::alloc(format!(
            "{what}: a tensor has at most {MAX_RANK} dimensions, got {} dimensions",
            shape.len()
        )));
    }
    match checked_bytes(shape, dtype) {
        Some(b) if b <= u64::MAX as u128 && shape.iter().all(|&d| usize::try_from(d).is_ok()) => {
            Ok(shape.iter().map(|&d| d as usize).collect())
        }
        _ => Err(Error::alloc(format!("{what}: a tensor of shape {shape:?} has more than 2^64 bytes"))),
    }
}

/// The rule of [`check_shape`], allocating nothing unless it fails.
fn check_dims(what: &str, shape: &[u64], dtype: DType) -> Result<()> {
    if shape.len() > MAX_RANK {
        return Err(Error::alloc(format!(
            "{what}: a tensor has at most {MAX_RANK} dimensions, got {} dimensions",
            shape.len()
        )));
    }
    let bytes = checked_bytes(shape, dtype);
    if bytes.is_none_or(|b| b > MAX_TENSOR_BYTES as u128) {
        let size = match bytes {
            Some(b) => format!("{b} bytes"),
            None => "more than 2^128 bytes".to_string(),
        };
        return Err(Error::alloc(format!(
            "{what}: {} needs {size}, more than the limit of {MAX_TENSOR_BYTES} bytes (256 MiB) for one tensor",
            describe_shape(shape, dtype)
        )));
    }
    // An empty tensor may still name a dim too big for usize.
    if let Some((i, d)) = shape.iter().enumerate().find(|(_, &d)| d > MAX_TENSOR_BYTES as u64) {
        return Err(Error::alloc(format!(
            "{what}: dimension {i} of {} is {d}, more than the limit of {MAX_TENSOR_BYTES} for one tensor",
            describe_shape(shape, dtype)
        )));
    }
    Ok(())
}

/// Like [`check_shape`] for a shape already in `usize`.
pub fn check_usize_shape(what: &str, shape: &[usize], dtype: DType) -> Result<()> {
    // The tracer checks every op's result: shapes within the rank limit go on the stack.
    if shape.len() <= MAX_RANK {
        let mut wide = [0u64; MAX_RANK];
        for (w, &d) in wide.iter_mut().zip(shape) {
            *w = d as u64;
        }
        return check_dims(what, &wide[..shape.len()], dtype);
    }
    let wide: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    check_dims(what, &wide, dtype)
}

/// A vector of `n` copies of `value`, or an error naming `what` and the bytes asked for if
/// the allocator cannot provide them.
pub fn try_vec<T: Clone>(what: &str, n: usize, value: T) -> Result<Vec<T>> {
    let mut v = try_with_capacity(what, n)?;
    v.resize(n, value);
    Ok(v)
}

/// An empty vector with room for `n` elements, allocated fallibly.
pub fn try_with_capacity<T>(what: &str, n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        let bytes = (n as u128) * std::mem::size_of::<T>() as u128;
        Error::alloc(format!("{what}: could not allocate {bytes} bytes (out of memory)"))
    })?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_checked_before_allocating() {
        assert_eq!(check_shape("x", &[2, 3], DType::Float32).unwrap(), vec![2, 3]);
        assert_eq!(check_shape("x", &[], DType::Float32).unwrap(), Vec::<usize>::new());
        assert_eq!(check_shape("x", &[0, 1 << 20], DType::Float32).unwrap(), vec![0, 1 << 20]);
        let e = check_shape("x", &[0, 1 << 40], DType::Float32).unwrap_err().to_string();
        assert!(e.contains("dimension 1 of f32[0,1099511627776] is 1099511627776"), "{e}");
        // Exactly at the limit passes, one element more does not.
        let n = (MAX_TENSOR_BYTES / 4) as u64;
        assert!(check_shape("x", &[n], DType::Float32).is_ok());
        let e = check_shape("weight", &[n + 1], DType::Float32).unwrap_err().to_string();
        assert!(e.contains("weight") && e.contains(&format!("{}", (n + 1) * 4)), "{e}");
        // The size asked for is named, even when it overflows 64 bits.
        let e = check_shape("x", &[100_000, 100_000], DType::Float32).unwrap_err().to_string();
        assert!(e.contains("f32[100000,100000] needs 40000000000 bytes"), "{e}");
        let big = (MAX_TENSOR_BYTES / 2) as u64;
        let e = check_shape("x", &[big; 16], DType::Bool).unwrap_err().to_string();
        assert!(e.contains("more than 2^128 bytes"), "{e}");
        let e = check_shape("x", &[1; 17], DType::Bool).unwrap_err().to_string();
        assert!(e.contains("at most 16 dimensions"), "{e}");
    }

    #[test]
    fn a_refused_allocation_is_an_error() {
        assert_eq!(try_vec("v", 3, 1.5f32).unwrap(), vec![1.5; 3]);
        let e = try_vec("huge", usize::MAX / 4, 0u64).unwrap_err().to_string();
        assert!(e.starts_with("huge: could not allocate") && e.contains("out of memory"), "{e}");
    }
}
