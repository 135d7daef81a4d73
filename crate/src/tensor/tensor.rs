//! The dense tensor: an ndarray of one of the [`DType`]s.

use super::{float16, DType};
use crate::Error;
use half::f16;
use ndarray::{ArrayD, IxDyn};
use std::fmt;

/// A dense, row-major n-dimensional array of a single dtype.
///
/// A float16 tensor keeps its values in float32 storage, each value exactly a float16
/// (rounded with [`float16::round`] by whoever makes it): the kernels read it as they read
/// a float32 tensor, with no conversion per op, and round their results in place. Its
/// dtype, its size ([`Tensor::nbytes`], two bytes a value) and its files (safetensors
/// `F16`) stay float16's.
#[derive(Clone, PartialEq)]
pub enum Tensor {
    F32(ArrayD<f32>),
    /// Float16 values, each exactly representable in binary16, held as float32.
    F16(ArrayD<f32>),
    I32(ArrayD<i32>),
    Bool(ArrayD<bool>),
}

/// Shape of a tensor: one length per dimension.
pub type Shape = Vec<usize>;

/// Number of elements of a shape.
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

impl Tensor {
    /// A float32 tensor from row-major data; the error names both sizes.
    pub fn from_f32(shape: &[usize], data: Vec<f32>) -> crate::Result<Tensor> {
        check_len(shape, data.len())?;
        Ok(Tensor::F32(ArrayD::from_shape_vec(IxDyn(shape), data).expect("checked length")))
    }

    /// A float16 tensor from row-major f32 data, each value rounded to the nearest half.
    pub fn from_f32_as_f16(shape: &[usize], data: &[f32]) -> crate::Result<Tensor> {
        check_len(shape, data.len())?;
        let v: Vec<f32> = data.iter().map(|&x| float16::round(x)).collect();
        Ok(Tensor::F16(ArrayD::from_shape_vec(IxDyn(shape), v).expect("checked length")))
    }

    /// An int32 tensor from row-major data.
    pub fn from_i32(shape: &[usize], data: Vec<i32>) -> crate::Result<Tensor> {
        check_len(shape, data.len())?;
        Ok(Tensor::I32(ArrayD::from_shape_vec(IxDyn(shape), data).expect("checked length")))
    }

    /// A bool tensor from row-major data.
    pub fn from_bool(shape: &[usize], data: Vec<bool>) -> crate::Result<Tensor> {
        check_len(shape, data.len())?;
        Ok(Tensor::Bool(ArrayD::from_shape_vec(IxDyn(shape), data).expect("checked length")))
    }

    /// A scalar (0-dimensional) float32 tensor.
    pub fn scalar(v: f32) -> Tensor {
        Tensor::F32(ArrayD::from_elem(IxDyn(&[]), v))
    }

    /// A tensor of the given shape and dtype filled with `value` (cast to the dtype).
    pub fn full(shape: &[usize], dtype: DType, value: f64) -> Tensor {
        let d = IxDyn(shape);
        match dtype {
            DType::Float32 => Tensor::F32(ArrayD::from_elem(d, value as f32)),
            DType::Float16 => Tensor::F16(ArrayD::from_elem(d, float16::to_f32(f16::from_f64(value)))),
            DType::Int32 => Tensor::I32(ArrayD::from_elem(d, value as i32)),
            DType::Bool => Tensor::Bool(ArrayD::from_elem(d, value != 0.0)),
        }
    }

    /// Zeros of the given shape and dtype.
    pub fn zeros(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::full(shape, dtype, 0.0)
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::F32(_) => DType::Float32,
            Tensor::F16(_) => DType::Float16,
            Tensor::I32(_) => DType::Int32,
            Tensor::Bool(_) => DType::Bool,
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            Tensor::F32(a) => a.shape(),
            Tensor::F16(a) => a.shape(),
            Tensor::I32(a) => a.shape(),
            Tensor::Bool(a) => a.shape(),
        }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        numel(self.shape())
    }

    /// Bytes held by the elements.
    pub fn nbytes(&self) -> usize {
        self.numel() * self.dtype().size()
    }

    /// The f32 array, or an error naming the actual dtype.
    pub fn as_f32(&self) -> crate::Result<&ArrayD<f32>> {
        match self {
            Tensor::F32(a) => Ok(a),
            t => Err(Error::tensor(format!("expected a float32 tensor, got {}", t.dtype()))),
        }
    }

    /// The float32 storage of a float tensor: a float32 tensor's values, or a float16 one's
    /// (each exactly a float16, see [`Tensor::F16`]); an error naming any other dtype.
    pub fn as_float(&self) -> crate::Result<&ArrayD<f32>> {
        match self {
            Tensor::F32(a) | Tensor::F16(a) => Ok(a),
            t => Err(Error::tensor(format!("expected a float tensor, got {}", t.dtype()))),
        }
    }

    /// The i32 array, or an error naming the actual dtype.
    pub fn as_i32(&self) -> crate::Result<&ArrayD<i32>> {
        match self {
            Tensor::I32(a) => Ok(a),
            t => Err(Error::tensor(format!("expected an int32 tensor, got {}", t.dtype()))),
        }
    }

    /// The bool array, or an error naming the actual dtype.
    pub fn as_bool(&self) -> crate::Result<&ArrayD<bool>> {
        match self {
            Tensor::Bool(a) => Ok(a),
            t => Err(Error::tensor(format!("expected a bool tensor, got {}", t.dtype()))),
        }
    }

    /// Values as f64, row-major (any dtype; bool as 0/1).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            Tensor::F32(a) => a.iter().map(|&x| x as f64).collect(),
            Tensor::F16(a) => a.iter().map(|&x| x as f64).collect(),
            Tensor::I32(a) => a.iter().map(|&x| x as f64).collect(),
            Tensor::Bool(a) => a.iter().map(|&x| x as u8 as f64).collect(),
        }
    }

    /// Values as f32, row-major (any dtype; bool as 0/1).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        match self {
            Tensor::F32(a) => a.iter().copied().collect(),
            Tensor::F16(a) => a.iter().copied().collect(),
            Tensor::I32(a) => a.iter().map(|&x| x as f32).collect(),
            Tensor::Bool(a) => a.iter().map(|&x| x as u8 as f32).collect(),
        }
    }

    /// Converts to another dtype (floats round to nearest; float → int truncates toward zero
    /// like PyTorch; anything → bool is `!= 0`).
    pub fn cast(&self, to: DType) -> Tensor {
        if self.dtype() == to {
            return self.clone();
        }
        // Between the float types directly (the common case: float16 training); through f64 otherwise.
        match (self, to) {
            (Tensor::F16(a), DType::Float32) => return Tensor::F32(a.clone()),
            (Tensor::F32(a), DType::Float16) => return Tensor::F16(a.mapv(float16::round)),
            _ => {}
        }
        let shape = self.shape().to_vec();
        let v = self.to_f64_vec();
        let d = IxDyn(&shape);
        match to {
            DType::Float32 => Tensor::F32(ArrayD::from_shape_vec(d, v.iter().map(|&x| x as f32).collect()).unwrap()),
            DType::Float16 => {
                let v = v.iter().map(|&x| float16::to_f32(f16::from_f64(x))).collect();
                Tensor::F16(ArrayD::from_shape_vec(d, v).unwrap())
            }
            DType::Int32 => Tensor::I32(ArrayD::from_shape_vec(d, v.iter().map(|&x| x as i32).collect()).unwrap()),
            DType::Bool => Tensor::Bool(ArrayD::from_shape_vec(d, v.iter().map(|&x| x != 0.0).collect()).unwrap()),
        }
    }
}

fn check_len(shape: &[usize], len: usize) -> crate::Result<()> {
    if numel(shape) != len {
        return Err(Error::tensor(format!(
            "shape {shape:?} holds {} elements but {len} values were given",
            numel(shape)
        )));
    }
    Ok(())
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor<{}{:?}>", self.dtype(), self.shape())?;
        if self.numel() <= 16 {
            write!(f, "{:?}", self.to_f64_vec())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_follows_ieee_half() {
        let t = Tensor::from_f32_as_f16(&[7], &[1.0001, 65504.0, 65520.0, -1e5, 1e-5, 6e-8, 1e-8]).unwrap();
        let v = t.to_f64_vec();
        assert_eq!(v[0], 1.0); // rounds to nearest
        assert_eq!(v[1], 65504.0); // largest finite
        assert_eq!(v[2], f64::INFINITY); // overflow
        assert_eq!(v[3], f64::NEG_INFINITY);
        assert_eq!(v[4], 1.0013580322265625e-05); // subnormal: 168 × 2^-24, as torch.tensor(1e-5).half()
        assert_eq!(v[5], 5.960464477539063e-08); // smallest subnormal
        assert_eq!(v[6], 0.0); // underflow
    }

    #[test]
    fn cast_and_sizes() {
        let t = Tensor::from_f32(&[2, 2], vec![1.5, -2.7, 0.0, 3.0]).unwrap();
        assert_eq!(t.nbytes(), 16);
        assert_eq!(t.cast(DType::Int32).to_f64_vec(), vec![1.0, -2.0, 0.0, 3.0]);
        assert_eq!(t.cast(DType::Bool).to_f64_vec(), vec![1.0, 1.0, 0.0, 1.0]);
        assert_eq!(t.cast(DType::Float16).nbytes(), 8);
        assert!(Tensor::from_f32(&[3], vec![1.0]).unwrap_err().to_string().contains("3 elements"));
    }
}
