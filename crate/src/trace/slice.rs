//! Slicing with the IPU's rules (PopTorch `SliceOps.cpp`): a slice is allowed only when
//! its start and end are constants, or differ by a constant (`t[x:x+5]` with `x` a tensor).
//!
//! * Constant bounds follow PyTorch: negative bounds count from the end, both are clamped
//!   to the dim, and an end before the start gives an empty slice.
//! * A tensor bound makes a `DynamicSlice` of fixed size `end − start`, found by walking
//!   back from both bounds to their common ancestor through additions and subtractions of
//!   integer constants (casts are looked through). Past the end of the dim the slice
//!   **wraps round** to the start, where PyTorch would return a shorter tensor.
//! * PopTorch's errors, word for word: "The start and end of a slice must be different.",
//!   "Taking a slice of a tensor with the end less than the start is not supported.",
//!   "The size of the slice (7) must be a factor of the slicing dimension (8).", and
//!   "The size of the sliced tensor must be a constant for each execution of the model when
//!   running on the IPU." (with " In this case, there is a float added to the slice indices
//!   meaning it may change between runs." when a float constant is added).

use super::{resolve_dim, Var};
use crate::ir::{BinaryKind, Graph, Op, ValueId};
use crate::{Error, Result};
use std::panic::Location;

const NOT_CONSTANT: &str =
    "The size of the sliced tensor must be a constant for each execution of the model when running on the IPU.";

/// A slice bound: a constant index, or a traced int32 scalar (a tensor index).
#[derive(Clone, Copy, Debug)]
pub enum Bound<'a> {
    Const(i64),
    Var(&'a Var),
}

/// The value of a constant node with one element (`Full` or a one-element `Constant`), and
/// whether it is a float.
fn constant_value(g: &Graph, v: ValueId) -> Option<(f64, bool)> {
    let n = g.producer(v);
    match &n.op {
        Op::Full { value, dtype, shape } if shape.iter().product::<usize>() == 1 => Some((*value, dtype.is_float())),
        Op::Constant { value, .. } if value.numel() == 1 => Some((value.to_f64_vec()[0], value.dtype().is_float())),
        _ => None,
    }
}

/// The chain of values from `v` back through single non-constant inputs: `[v, parent, …]`.
/// A node with several non-constant inputs cannot have a constant offset from anything.
fn ancestry(g: &Graph, v: ValueId) -> Result<Vec<ValueId>> {
    let mut chain = vec![v];
    let mut cur = v;
    loop {
        let n = g.producer(cur);
        let non_const: Vec<ValueId> = n.inputs.iter().copied().filter(|&i| constant_value(g, i).is_none()).collect();
        match non_const.as_slice() {
            [] => return Ok(chain),
            [one] => {
                chain.push(*one);
                cur = *one;
            }
            _ => return Err(Error::trace(NOT_CONSTANT)),
        }
    }
}

/// True when two nodes always give the same output: same op, same attributes, and inputs
/// that are the same values or themselves always the same.
fn same_output(g: &Graph, a: ValueId, b: ValueId) -> bool {
    if a == b {
        return true;
    }
    let (na, nb) = (g.producer(a), g.producer(b));
    if na.op != nb.op
        || na.inputs.len() != nb.inputs.len()
        || matches!(na.op, Op::Placeholder { .. } | Op::RandomMask { .. })
    {
        return false;
    }
    na.inputs.iter().zip(&nb.inputs).all(|(&x, &y)| same_output(g, x, y))
}

/// The constant a node of an ancestry path adds: `x + c`, `c + x`, `x − c` (casts add 0).
fn offset_of(g: &Graph, v: ValueId) -> Result<i64> {
    let n = g.producer(v);
    match &n.op {
        Op::Cast { .. } => Ok(0),
        Op::Binary { kind: kind @ (BinaryKind::Add | BinaryKind::Sub) } => {
            let (c_pos, c) = match (constant_value(g, n.inputs[0]), constant_value(g, n.inputs[1])) {
                (None, Some(c)) => (1, c),
                (Some(c), None) if *kind == BinaryKind::Add => (0, c),
                _ => return Err(Error::trace(NOT_CONSTANT)),
            };
            if c.1 {
                return Err(Error::trace(format!(
                    "{NOT_CONSTANT} In this case, there is a float added to the slice indices meaning it may change \
                     between runs."
                )));
            }
            let c = c.0 as i64;
            Ok(if *kind == BinaryKind::Sub && c_pos == 1 { -c } else { c })
        }
        _ => Err(Error::trace(NOT_CONSTANT)),
    }
}

/// `end − start` when both are values of `g` related by constant offsets.
fn dynamic_size(g: &Graph, start: ValueId, end: ValueId) -> Result<i64> {
    let a = ancestry(g, start)?;
    let b = ancestry(g, end)?;
    // The first value of the end's chain that is also on the start's chain.
    let (ib, ia) = b
        .iter()
        .enumerate()
        .find_map(|(i, v)| a.iter().position(|w| w == v).map(|j| (i, j)))
        .ok_or_else(|| Error::trace(NOT_CONSTANT))?;
    let (mut pa, mut pb) = (a[..ia].to_vec(), b[..ib].to_vec());
    // Steps next to the common ancestor that compute the same thing on both sides cancel.
    while let (Some(&x), Some(&y)) = (pa.last(), pb.last()) {
        if !same_output(g, x, y) {
            break;
        }
        pa.pop();
        pb.pop();
    }
    if pa.is_empty() && pb.is_empty() {
        return Err(Error::trace("The start and end of a slice must be different."));
    }
    let mut size = 0i64;
    for &v in &pb {
        size += offset_of(g, v)?;
    }
    for &v in &pa {
        size -= offset_of(g, v)?;
    }
    Ok(size)
}

impl Var {
    /// `self[start:end:step]` along `dim` with the IPU's slicing rules (module docs).
    #[track_caller]
    pub fn slice_bounds(&self, dim: isize, start: Bound<'_>, end: Bound<'_>, step: i64) -> Result<Var> {
        let at = Location::caller();
        let d = resolve_dim(dim, self.shape().len(), "slice")?;
        if step < 1 {
            return Err(Error::trace("Slicing step must be at least 1"));
        }
        let len = self.shape()[d] as i64;
        match (start, end) {
            (Bound::Const(s), Bound::Const(e)) => {
                // aten/src/ATen/native/TensorShape.cpp slice(), as PopTorch copies it.
                let s = if s < 0 { s + len } else { s }.clamp(0, len);
                let e = if e < 0 { e + len } else { e };
                let e = if e < s { s } else { e.min(len) };
                let op = Op::Slice { dim: d, start: s as usize, end: e as usize, step: step as usize };
                Ok(self.tr.record(op, &[self], at)?.remove(0))
            }
            (Bound::Var(sv), Bound::Var(ev)) => {
                let (s_id, e_id) = (self.tr.lift(sv)?, self.tr.lift(ev)?);
                let size = {
                    let st = self.tr.st.borrow();
                    let frame = st.frames.len() - 1;
                    dynamic_size(&st.frames[frame].graph, s_id, e_id)?
                };
                self.dynamic_slice_checked(d, sv, size, step, at)
            }
            _ => Err(Error::trace(NOT_CONSTANT)),
        }
    }

    /// `poptorch.dynamic_slice(self, dim, start, size, step)`: `size` entries from the traced
    /// int32 scalar `start`, wrapping round past the end, then every `step`-th.
    #[track_caller]
    pub fn dynamic_slice(&self, dim: isize, start: &Var, size: i64, step: i64) -> Result<Var> {
        let d = resolve_dim(dim, self.shape().len(), "dynamic_slice")?;
        if step < 1 {
            return Err(Error::trace("Slicing step must be at least 1"));
        }
        self.dynamic_slice_checked(d, start, size, step, Location::caller())
    }

    fn dynamic_slice_checked(&self, d: usize, start: &Var, size: i64, step: i64, at: &Location<'_>) -> Result<Var> {
        if size == 0 {
            return Err(Error::trace("The start and end of a slice must be different."));
        }
        if size < 0 {
            return Err(Error::trace("Taking a slice of a tensor with the end less than the start is not supported."));
        }
        let len = self.shape()[d] as i64;
        if len % size != 0 {
            return Err(Error::trace(format!(
                "The size of the slice ({size}) must be a factor of the slicing dimension ({len})."
            )));
        }
        let sliced = self.tr.record(Op::DynamicSlice { dim: d, size: size as usize }, &[self, start], at)?.remove(0);
        if step == 1 {
            return Ok(sliced);
        }
        let op = Op::Slice { dim: d, start: 0, end: size as usize, step: step as usize };
        Ok(self.tr.record(op, &[&sliced], at)?.remove(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{run, Store};
    use crate::tensor::{DType, Tensor};
    use crate::trace::Tracer;
    use std::rc::Rc;

    fn arange(n: usize) -> Rc<Tensor> {
        Rc::new(Tensor::from_f32(&[n], (0..n).map(|i| i as f32).collect()).unwrap())
    }

    /// Traces `t[x + a : x + b]` on an 8-vector and runs it with `x = start`.
    fn run_window(a: i64, b: i64, start: i32) -> Result<Vec<f32>> {
        let tr = Tracer::new();
        let t = tr.input("t", &[8], DType::Float32)?;
        let x = tr.input("x", &[], DType::Int32)?;
        let lo = if a == 0 { x.clone() } else { x.add(&tr.full(&[], DType::Int32, a as f64)?)? };
        let hi = x.add(&tr.full(&[], DType::Int32, b as f64)?)?;
        let y = t.slice_bounds(0, Bound::Var(&lo), Bound::Var(&hi), 1)?;
        let trace = tr.finish(&[&y])?;
        let mut store = Store::new(&[], &[], 0);
        let xs = Rc::new(Tensor::from_i32(&[], vec![start]).unwrap());
        Ok(run(&trace.graph, &mut store, &[arange(8), xs]).unwrap().outputs[0].to_f32_vec())
    }

    #[test]
    fn constant_width_slices_wrap_round_past_the_end() {
        assert_eq!(run_window(0, 4, 2).unwrap(), vec![2.0, 3.0, 4.0, 5.0]);
        // x = 6: PyTorch would give [6, 7]; the IPU wraps round.
        assert_eq!(run_window(0, 4, 6).unwrap(), vec![6.0, 7.0, 0.0, 1.0]);
        assert_eq!(run_window(1, 3, 7).unwrap(), vec![0.0, 1.0]);
        // A negative start is read as unsigned 32-bit: 2^32 − 1 ≡ 7 (mod 8).
        assert_eq!(run_window(0, 4, -1).unwrap(), vec![7.0, 0.0, 1.0, 2.0]);
    }

    #[test]
    fn poptorchs_slice_errors() {
        assert_eq!(
            run_window(0, 7, 0).unwrap_err().to_string(),
            "The size of the slice (7) must be a factor of the slicing dimension (8)."
        );
        assert_eq!(
            run_window(3, 1, 0).unwrap_err().to_string(),
            "Taking a slice of a tensor with the end less than the start is not supported."
        );
        // t[x:x]
        let tr = Tracer::new();
        let t = tr.input("t", &[8], DType::Float32).unwrap();
        let x = tr.input("x", &[], DType::Int32).unwrap();
        let e = t.slice_bounds(0, Bound::Var(&x), Bound::Var(&x), 1).unwrap_err().to_string();
        assert_eq!(e, "The start and end of a slice must be different.");
        // t[x:y] with two unrelated tensors, and t[0:y]
        let y = tr.input("y", &[], DType::Int32).unwrap();
        let e = t.slice_bounds(0, Bound::Var(&x), Bound::Var(&y), 1).unwrap_err().to_string();
        assert_eq!(e, NOT_CONSTANT);
        assert_eq!(t.slice_bounds(0, Bound::Const(0), Bound::Var(&y), 1).unwrap_err().to_string(), NOT_CONSTANT);
        // t[x : x + 2.0]: a float added to the index
        let xf = x.cast(DType::Float32).unwrap();
        let end = xf.add(&tr.full(&[], DType::Float32, 2.0).unwrap()).unwrap().cast(DType::Int32).unwrap();
        let e = t.slice_bounds(0, Bound::Var(&x), Bound::Var(&end), 1).unwrap_err().to_string();
        assert!(
            e.starts_with(NOT_CONSTANT)
                && e.ends_with("there is a float added to the slice indices meaning it may change between runs."),
            "{e}"
        );
        // x*2 : x*2+4 is fine (shared ancestor x*2); x : x*2 is not.
        let x2 = x.mul(&tr.full(&[], DType::Int32, 2.0).unwrap()).unwrap();
        let x2p4 = x2.add(&tr.full(&[], DType::Int32, 4.0).unwrap()).unwrap();
        assert_eq!(t.slice_bounds(0, Bound::Var(&x2), Bound::Var(&x2p4), 1).unwrap().shape(), &[4]);
        assert_eq!(t.slice_bounds(0, Bound::Var(&x), Bound::Var(&x2), 1).unwrap_err().to_string(), NOT_CONSTANT);
        assert_eq!(
            t.slice_bounds(0, Bound::Const(0), Bound::Const(2), 0).unwrap_err().to_string(),
            "Slicing step must be at least 1"
        );
    }

    #[test]
    fn constant_slices_follow_pytorch() {
        let tr = Tracer::new();
        let t = tr.input("t", &[8], DType::Float32).unwrap();
        assert_eq!(t.slice_bounds(0, Bound::Const(6), Bound::Const(10), 1).unwrap().shape(), &[2], "clamped, no wrap");
        assert_eq!(t.slice_bounds(0, Bound::Const(-3), Bound::Const(-1), 1).unwrap().shape(), &[2]);
        assert_eq!(t.slice_bounds(0, Bound::Const(5), Bound::Const(2), 1).unwrap().shape(), &[0]);
        assert_eq!(t.slice_bounds(0, Bound::Const(0), Bound::Const(8), 3).unwrap().shape(), &[3]);
    }

    #[test]
    fn dynamic_slice_gradient_lands_at_the_wrapped_positions() {
        let tr = Tracer::new();
        let t = tr.input("t", &[8], DType::Float32).unwrap();
        let x = tr.input("x", &[], DType::Int32).unwrap();
        let y = t.dynamic_slice(0, &x, 4, 1).unwrap();
        let w = tr.constant(Tensor::from_f32(&[4], vec![1.0, 2.0, 3.0, 4.0]).unwrap()).unwrap();
        let l = y.mul(&w).unwrap().identity_loss(crate::ir::Reduction::Sum).unwrap();
        let trace = tr.finish(&[&l]).unwrap();
        let opts = crate::autograd::TrainOptions { input_grads: vec!["t".into()], ..Default::default() };
        let tg = crate::autograd::training_graph_at(&trace.graph, l.id(), &opts).unwrap();
        let mut store = Store::new(&[], &[], 0);
        let xs = Rc::new(Tensor::from_i32(&[], vec![6]).unwrap());
        let r = run(&tg.graph, &mut store, &[arange(8), xs]).unwrap();
        // t[6], t[7], t[0], t[1] weighted 1, 2, 3, 4
        assert_eq!(r.outputs[0].to_f32_vec(), vec![6.0 + 14.0 + 0.0 + 4.0]);
        let g = r.outputs[tg.input_grad_outputs[0].1].to_f32_vec();
        // positions 6, 7, 0, 1 receive weights 1, 2, 3, 4
        assert_eq!(g, vec![3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0]);
    }
}
