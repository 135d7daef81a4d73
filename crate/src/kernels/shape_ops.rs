//! Shape and indexing ops: `Reshape`, `Permute`, `Concat`, `Split`, `Slice`, `SliceGrad`,
//! `IndexSelect`, `IndexAdd`, `Gather` and `GatherGrad`.
//!
//! The data-movement ops work for every dtype and copy whole contiguous runs (a tensor is
//! seen as `[outer, dim, inner]` around the dim in question). `IndexAdd` and `GatherGrad`
//! accumulate, so they are float32 (float16 is widened by [`super::eval`]).

use super::common::{
    array, check_dim, check_indices, f32_data, for_each_row, i32_data, slice, split_at_dim, with_dtype, Elem,
};
use crate::tensor::{numel, Tensor};
use crate::Error;
use std::borrow::Cow;

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![0; shape.len()];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        st[i] = acc;
        acc *= shape[i];
    }
    st
}

fn reshape_t<T: Elem>(t: &Tensor, shape: &[usize]) -> crate::Result<Tensor> {
    let a = T::array(t)?;
    if numel(shape) != a.len() {
        return Err(Error::exec(format!("cannot reshape {:?} ({} elements) to {shape:?}", a.shape(), a.len())));
    }
    Ok(T::wrap(array(shape, slice(a).into_owned())?))
}

/// `Reshape { shape }`: same elements in row-major order, new shape (no -1).
pub fn reshape(t: &Tensor, shape: &[usize]) -> crate::Result<Tensor> {
    with_dtype!(t.dtype(), T => reshape_t::<T>(t, shape))
}

fn permute_t<T: Elem>(t: &Tensor, dims: &[usize]) -> crate::Result<Tensor> {
    let a = T::array(t)?;
    let s = a.shape();
    let r = s.len();
    let mut seen = vec![false; r];
    if dims.len() != r || dims.iter().any(|&d| d >= r || std::mem::replace(&mut seen[d], true)) {
        return Err(Error::exec(format!("{dims:?} is not a permutation of the {r} dims of a tensor of shape {s:?}")));
    }
    let x = slice(a);
    if r == 0 {
        return Ok(T::wrap(array(&[], x.into_owned())?));
    }
    let out_shape: Vec<usize> = dims.iter().map(|&d| s[d]).collect();
    if r >= 2 && dims[..r - 2].iter().enumerate().all(|(i, &d)| i == d) && dims[r - 2] == r - 1 && dims[r - 1] == r - 2
    {
        // a (batched) transpose of the last two dims: copy in cache-sized tiles
        return Ok(T::wrap(array(&out_shape, transpose_last2(&x, s[r - 2], s[r - 1]))?));
    }
    let st = strides(s);
    let ps: Vec<usize> = dims.iter().map(|&d| st[d]).collect();
    let inner = ps[r - 1];
    let mut v = Vec::with_capacity(x.len());
    for_each_row(&out_shape, [&ps], |_, [o], len| {
        if inner == 1 {
            v.extend_from_slice(&x[o..o + len]);
        } else {
            v.extend((0..len).map(|i| x[o + i * inner]));
        }
    });
    Ok(T::wrap(array(&out_shape, v)?))
}

/// Transposes each `rows × cols` matrix of `x` (row-major, batched), 32×32 tiles at a time.
pub(super) fn transpose_last2<T: Elem>(x: &[T], rows: usize, cols: usize) -> Vec<T> {
    const B: usize = 32;
    let mut out = vec![T::default(); x.len()];
    let m = rows * cols;
    if m == 0 {
        return out;
    }
    for (src, dst) in x.chunks_exact(m).zip(out.chunks_exact_mut(m)) {
        for i0 in (0..rows).step_by(B) {
            for j0 in (0..cols).step_by(B) {
                for i in i0..(i0 + B).min(rows) {
                    for j in j0..(j0 + B).min(cols) {
                        dst[j * rows + i] = src[i * cols + j];
                    }
                }
            }
        }
    }
    out
}

/// `Permute { dims }`: output dim i is input dim `dims[i]`.
pub fn permute(t: &Tensor, dims: &[usize]) -> crate::Result<Tensor> {
    with_dtype!(t.dtype(), T => permute_t::<T>(t, dims))
}

fn concat_t<T: Elem>(inputs: &[&Tensor], dim: usize) -> crate::Result<Tensor> {
    let first = inputs[0].shape();
    check_dim(dim, first.len())?;
    let mut datas = Vec::with_capacity(inputs.len());
    let mut total = 0;
    for t in inputs {
        let differ = || Error::exec(format!("cannot concat {} with {} (dtypes differ)", inputs[0].dtype(), t.dtype()));
        // (float32 and float16 share their element type: the dtypes are compared too)
        if t.dtype() != inputs[0].dtype() {
            return Err(differ());
        }
        let a = T::array(t).map_err(|_| differ())?;
        let s = a.shape();
        if s.len() != first.len() || s.iter().zip(first).enumerate().any(|(i, (&p, &q))| i != dim && p != q) {
            return Err(Error::exec(format!("cannot concat shapes {first:?} and {s:?} along dim {dim}")));
        }
        total += s[dim];
        datas.push((slice(a), s[dim]));
    }
    let (outer, _, inner) = split_at_dim(first, dim);
    let mut out_shape = first.to_vec();
    out_shape[dim] = total;
    let mut v = Vec::with_capacity(numel(&out_shape));
    for o in 0..outer {
        for (d, len) in &datas {
            let chunk = len * inner;
            v.extend_from_slice(&d[o * chunk..(o + 1) * chunk]);
        }
    }
    Ok(T::wrap(array(&out_shape, v)?))
}

/// `Concat { dim }`: the inputs joined along `dim`.
pub fn concat(inputs: &[&Tensor], dim: usize) -> crate::Result<Tensor> {
    let Some(first) = inputs.first() else {
        return Err(Error::exec("concat needs at least one input"));
    };
    with_dtype!(first.dtype(), T => concat_t::<T>(inputs, dim))
}

fn split_t<T: Elem>(t: &Tensor, sizes: &[usize], dim: usize) -> crate::Result<Vec<Tensor>> {
    let a = T::array(t)?;
    let s = a.shape();
    check_dim(dim, s.len())?;
    if sizes.iter().sum::<usize>() != s[dim] {
        return Err(Error::exec(format!("split sizes {sizes:?} do not add up to dim {dim} of shape {s:?}")));
    }
    let x = slice(a);
    let (outer, len, inner) = split_at_dim(s, dim);
    let mut outs = Vec::with_capacity(sizes.len());
    let mut off = 0;
    for &sz in sizes {
        let mut v = Vec::with_capacity(outer * sz * inner);
        for o in 0..outer {
            let st = (o * len + off) * inner;
            v.extend_from_slice(&x[st..st + sz * inner]);
        }
        let mut shape = s.to_vec();
        shape[dim] = sz;
        outs.push(T::wrap(array(&shape, v)?));
        off += sz;
    }
    Ok(outs)
}

/// `Split { sizes, dim }`: one output per size, in order along `dim`.
pub fn split(t: &Tensor, sizes: &[usize], dim: usize) -> crate::Result<Vec<Tensor>> {
    with_dtype!(t.dtype(), T => split_t::<T>(t, sizes, dim))
}

/// Checks a slice spec against `shape` and returns the number of selected entries.
fn slice_len(shape: &[usize], dim: usize, start: usize, end: usize, step: usize) -> crate::Result<usize> {
    check_dim(dim, shape.len())?;
    if step == 0 || start > end || end > shape[dim] {
        return Err(Error::exec(format!("slice {start}:{end}:{step} is invalid for dim {dim} of shape {shape:?}")));
    }
    Ok((end - start).div_ceil(step))
}

fn slice_t<T: Elem>(t: &Tensor, dim: usize, start: usize, end: usize, step: usize) -> crate::Result<Tensor> {
    let a = T::array(t)?;
    let s = a.shape();
    let n = slice_len(s, dim, start, end, step)?;
    let x = slice(a);
    let (outer, len, inner) = split_at_dim(s, dim);
    let mut v = Vec::with_capacity(outer * n * inner);
    for o in 0..outer {
        for j in 0..n {
            let st = (o * len + start + j * step) * inner;
            v.extend_from_slice(&x[st..st + inner]);
        }
    }
    let mut shape = s.to_vec();
    shape[dim] = n;
    Ok(T::wrap(array(&shape, v)?))
}

/// `Slice { dim, start, end, step }`: entries `start, start+step, …` below `end`.
pub fn slice_op(t: &Tensor, dim: usize, start: usize, end: usize, step: usize) -> crate::Result<Tensor> {
    with_dtype!(t.dtype(), T => slice_t::<T>(t, dim, start, end, step))
}

fn slice_grad_t<T: Elem>(
    g: &Tensor,
    in_shape: &[usize],
    dim: usize,
    start: usize,
    end: usize,
    step: usize,
) -> crate::Result<Tensor> {
    let a = T::array(g)?;
    let n = slice_len(in_shape, dim, start, end, step)?;
    let mut want = in_shape.to_vec();
    want[dim] = n;
    if a.shape() != want.as_slice() {
        return Err(Error::exec(format!("gradient {:?} does not match the slice shape {want:?}", a.shape())));
    }
    let gd = slice(a);
    let (outer, len, inner) = split_at_dim(in_shape, dim);
    let mut out = vec![T::default(); numel(in_shape)];
    for o in 0..outer {
        for j in 0..n {
            let dst = (o * len + start + j * step) * inner;
            let src = (o * n + j) * inner;
            out[dst..dst + inner].copy_from_slice(&gd[src..src + inner]);
        }
    }
    Ok(T::wrap(array(in_shape, out)?))
}

/// `SliceGrad`: zeros of `in_shape` with `g` written at the slice (any dtype).
pub fn slice_grad(
    g: &Tensor,
    in_shape: &[usize],
    dim: usize,
    start: usize,
    end: usize,
    step: usize,
) -> crate::Result<Tensor> {
    with_dtype!(g.dtype(), T => slice_grad_t::<T>(g, in_shape, dim, start, end, step))
}

/// The wrapped start of a dynamic slice: the int32 start read as unsigned 32-bit (as
/// PopART casts it), modulo `len`.
fn dynamic_start(start: &Tensor, len: usize) -> crate::Result<usize> {
    let s = i32_data(start, "start")?;
    if s.len() != 1 {
        return Err(Error::exec(format!(
            "the start of a dynamic slice must hold one value, got shape {:?}",
            start.shape()
        )));
    }
    Ok((s[0] as u32 as u64 % len.max(1) as u64) as usize)
}

fn dynamic_slice_t<T: Elem>(t: &Tensor, start: &Tensor, dim: usize, size: usize) -> crate::Result<Tensor> {
    let a = T::array(t)?;
    let s = a.shape();
    check_dim(dim, s.len())?;
    let (outer, len, inner) = split_at_dim(s, dim);
    if size == 0 || size > len {
        return Err(Error::exec(format!("a dynamic slice of size {size} does not fit dim {dim} of {s:?}")));
    }
    let off = dynamic_start(start, len)?;
    let x = slice(a);
    let mut v = Vec::with_capacity(outer * size * inner);
    for o in 0..outer {
        for j in 0..size {
            let st = (o * len + (off + j) % len) * inner;
            v.extend_from_slice(&x[st..st + inner]);
        }
    }
    let mut shape = s.to_vec();
    shape[dim] = size;
    Ok(T::wrap(array(&shape, v)?))
}

/// `DynamicSlice { dim, size }`: `size` entries of `dim` from `start`, wrapping round past
/// the end (any dtype).
pub fn dynamic_slice(t: &Tensor, start: &Tensor, dim: usize, size: usize) -> crate::Result<Tensor> {
    with_dtype!(t.dtype(), T => dynamic_slice_t::<T>(t, start, dim, size))
}

fn dynamic_slice_grad_t<T: Elem>(
    g: &Tensor,
    start: &Tensor,
    in_shape: &[usize],
    dim: usize,
    size: usize,
) -> crate::Result<Tensor> {
    let a = T::array(g)?;
    check_dim(dim, in_shape.len())?;
    let (outer, len, inner) = split_at_dim(in_shape, dim);
    let mut want = in_shape.to_vec();
    want[dim] = size;
    if a.shape() != want.as_slice() || size > len {
        return Err(Error::exec(format!("gradient {:?} does not match a slice {want:?} of {in_shape:?}", a.shape())));
    }
    let off = dynamic_start(start, len)?;
    let gd = slice(a);
    let mut out = vec![T::default(); numel(in_shape)];
    for o in 0..outer {
        for j in 0..size {
            let dst = (o * len + (off + j) % len) * inner;
            let src = (o * size + j) * inner;
            out[dst..dst + inner].copy_from_slice(&gd[src..src + inner]);
        }
    }
    Ok(T::wrap(array(in_shape, out)?))
}

/// `DynamicSliceGrad`: zeros of `in_shape` with `g` written where `DynamicSlice` read.
pub fn dynamic_slice_grad(
    g: &Tensor,
    start: &Tensor,
    in_shape: &[usize],
    dim: usize,
    size: usize,
) -> crate::Result<Tensor> {
    with_dtype!(g.dtype(), T => dynamic_slice_grad_t::<T>(g, start, in_shape, dim, size))
}

fn index_1d<'a>(index: &'a Tensor) -> crate::Result<Cow<'a, [i32]>> {
    let idx = i32_data(index, "index")?;
    if index.shape().len() != 1 {
        return Err(Error::exec(format!("index must be 1-D, got shape {:?}", index.shape())));
    }
    Ok(idx)
}

fn index_select_t<T: Elem>(t: &Tensor, index: &Tensor, dim: usize) -> crate::Result<Tensor> {
    let a = T::array(t)?;
    let s = a.shape();
    check_dim(dim, s.len())?;
    let idx = index_1d(index)?;
    let (outer, len, inner) = split_at_dim(s, dim);
    check_indices(&idx, len, &format!("index (dim {dim})"))?;
    let x = slice(a);
    let mut v = Vec::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        for &i in idx.iter() {
            let st = (o * len + i as usize) * inner;
            v.extend_from_slice(&x[st..st + inner]);
        }
    }
    let mut shape = s.to_vec();
    shape[dim] = idx.len();
    Ok(T::wrap(array(&shape, v)?))
}

/// `IndexSelect { dim }`: `(x, index[k])` → x with dim `dim` replaced by the `k` selected
/// entries (any dtype; an index outside `0..size` is an error naming it and the size).
pub fn index_select(t: &Tensor, index: &Tensor, dim: usize) -> crate::Result<Tensor> {
    with_dtype!(t.dtype(), T => index_select_t::<T>(t, index, dim))
}

/// `IndexAdd { dim, dim_size }`: `(g, index[k])` → zeros with `dim_size` entries along `dim`,
/// `out[.., index[j], ..] += g[.., j, ..]` (index_select's adjoint).
pub fn index_add(g: &Tensor, index: &Tensor, dim: usize, dim_size: usize) -> crate::Result<Tensor> {
    let gd = f32_data(g, "gradient")?;
    let s = g.shape();
    check_dim(dim, s.len())?;
    let idx = index_1d(index)?;
    if idx.len() != s[dim] {
        return Err(Error::exec(format!(
            "index has {} entries but the gradient {s:?} has {} along dim {dim}",
            idx.len(),
            s[dim]
        )));
    }
    check_indices(&idx, dim_size, &format!("index (dim {dim})"))?;
    let (outer, k, inner) = split_at_dim(s, dim);
    let mut shape = s.to_vec();
    shape[dim] = dim_size;
    let mut out = vec![0f32; numel(&shape)];
    for o in 0..outer {
        for (j, &i) in idx.iter().enumerate() {
            let src = (o * k + j) * inner;
            let dst = (o * dim_size + i as usize) * inner;
            for (d, &v) in out[dst..dst + inner].iter_mut().zip(&gd[src..src + inner]) {
                *d += v;
            }
        }
    }
    Ok(Tensor::F32(array(&shape, out)?))
}

/// Validates gather's index against the gathered-from shape; returns the strides used to
/// address it: the row-major strides with 0 at `dim`, and the stride of `dim`.
fn gather_layout(
    x_shape: &[usize],
    idx_shape: &[usize],
    idx: &[i32],
    dim: usize,
) -> crate::Result<(Vec<usize>, usize)> {
    check_dim(dim, x_shape.len())?;
    if idx_shape.len() != x_shape.len() {
        return Err(Error::exec(format!("index {idx_shape:?} must have the rank of the input {x_shape:?}")));
    }
    for (i, (&a, &b)) in idx_shape.iter().zip(x_shape).enumerate() {
        if i != dim && a > b {
            return Err(Error::exec(format!("index {idx_shape:?} is larger than the input {x_shape:?} in dim {i}")));
        }
    }
    check_indices(idx, x_shape[dim], &format!("index (dim {dim})"))?;
    let mut st = strides(x_shape);
    let ds = st[dim];
    st[dim] = 0;
    Ok((st, ds))
}

fn gather_t<T: Elem>(t: &Tensor, index: &Tensor, dim: usize) -> crate::Result<Tensor> {
    let a = T::array(t)?;
    let idx = i32_data(index, "index")?;
    let ishape = index.shape();
    let (st, ds) = gather_layout(a.shape(), ishape, &idx, dim)?;
    let x = slice(a);
    let inner = st[st.len() - 1];
    let mut v = Vec::with_capacity(idx.len());
    for_each_row(ishape, [&st], |o, [b], len| {
        v.extend((0..len).map(|i| x[b + i * inner + idx[o + i] as usize * ds]));
    });
    Ok(T::wrap(array(ishape, v)?))
}

/// `Gather { dim }`: `(x, index)` → torch.gather: `out[i][j][k] = x[i][index[i][j][k]][k]`
/// for dim 1 (any dtype).
pub fn gather(t: &Tensor, index: &Tensor, dim: usize) -> crate::Result<Tensor> {
    with_dtype!(t.dtype(), T => gather_t::<T>(t, index, dim))
}

/// `GatherGrad { dim, in_shape }`: `(g, index)` → zeros of `in_shape` with
/// `out[..index..] += g` (gather's adjoint).
pub fn gather_grad(g: &Tensor, index: &Tensor, dim: usize, in_shape: &[usize]) -> crate::Result<Tensor> {
    let gd = f32_data(g, "gradient")?;
    let idx = i32_data(index, "index")?;
    let ishape = index.shape();
    if g.shape() != ishape {
        return Err(Error::exec(format!("gradient {:?} must have the index's shape {ishape:?}", g.shape())));
    }
    let (st, ds) = gather_layout(in_shape, ishape, &idx, dim)?;
    let inner = st[st.len() - 1];
    let mut out = vec![0f32; numel(in_shape)];
    for_each_row(ishape, [&st], |o, [b], len| {
        for i in 0..len {
            out[b + i * inner + idx[o + i] as usize * ds] += gd[o + i];
        }
    });
    Ok(Tensor::F32(array(in_shape, out)?))
}

/// `OneHot { num_classes }`: int32 indices → int32 `[…, num_classes]`, with PyTorch's
/// errors for an index out of range.
pub fn one_hot(x: &Tensor, num_classes: usize) -> crate::Result<Tensor> {
    let idx = i32_data(x, "input")?;
    let mut out = vec![0i32; idx.len() * num_classes];
    for (k, &v) in idx.iter().enumerate() {
        if v < 0 {
            return Err(Error::exec(format!("Class values must be non-negative, got {v} at element {k}")));
        }
        if v as usize >= num_classes {
            return Err(Error::exec(format!(
                "Class values must be smaller than num_classes ({num_classes}), got {v} at element {k}"
            )));
        }
        out[k * num_classes + v as usize] = 1;
    }
    let mut shape = x.shape().to_vec();
    shape.push(num_classes);
    Ok(Tensor::I32(array(&shape, out)?))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use crate::ir::Op;
    use crate::tensor::{DType, Tensor};

    fn iota(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        f32t(shape, &(0..n).map(|i| i as f32).collect::<Vec<_>>())
    }

    #[test]
    fn reshape_permute_all_dtypes() {
        let x = iota(&[2, 3]);
        let r = run1(&Op::Reshape { shape: vec![3, 1, 2] }, &[&x]);
        assert_eq!(r.shape(), &[3, 1, 2]);
        assert_eq!(r.to_f32_vec(), x.to_f32_vec());
        assert!(eval(&Op::Reshape { shape: vec![4] }, &[&x]).is_err());
        let p = run1(&Op::Permute { dims: vec![1, 0] }, &[&x]);
        assert_eq!(p.shape(), &[3, 2]);
        assert_eq!(p.to_f32_vec(), vec![0., 3., 1., 4., 2., 5.]);
        let y = iota(&[2, 3, 4]);
        let p = run1(&Op::Permute { dims: vec![2, 0, 1] }, &[&y]);
        assert_eq!(p.shape(), &[4, 2, 3]);
        let pv = p.to_f32_vec();
        for a in 0..4 {
            for b in 0..2 {
                for c in 0..3 {
                    assert_eq!(pv[a * 6 + b * 3 + c], (b * 12 + c * 4 + a) as f32);
                }
            }
        }
        let p = run1(&Op::Permute { dims: vec![0, 2, 1] }, &[&y]);
        assert_eq!(&p.to_f32_vec()[..4], &[0., 4., 8., 1.]);
        let pv = p.to_f32_vec();
        for a in 0..2 {
            for b in 0..4 {
                for c in 0..3 {
                    assert_eq!(pv[a * 12 + b * 3 + c], (a * 12 + c * 4 + b) as f32);
                }
            }
        }
        // a transpose larger than one tile
        let z = iota(&[37, 70]);
        let zt = run1(&Op::Permute { dims: vec![1, 0] }, &[&z]).to_f32_vec();
        assert!((0..37).all(|i| (0..70).all(|j| zt[j * 37 + i] == (i * 70 + j) as f32)));
        assert!(eval(&Op::Permute { dims: vec![0, 0] }, &[&x]).unwrap_err().to_string().contains("not a permutation"));
        for dt in [DType::Float16, DType::Int32, DType::Bool] {
            let xc = x.cast(dt);
            let p = run1(&Op::Permute { dims: vec![1, 0] }, &[&xc]);
            assert_eq!(p.dtype(), dt);
            assert_eq!(p.to_f64_vec(), run1(&Op::Permute { dims: vec![1, 0] }, &[&x]).cast(dt).to_f64_vec());
            assert_eq!(run1(&Op::Reshape { shape: vec![6] }, &[&xc]).dtype(), dt);
        }
        let s = f32t(&[], &[3.0]);
        assert_eq!(run1(&Op::Permute { dims: vec![] }, &[&s]).to_f32_vec(), vec![3.0]);
        assert_eq!(run1(&Op::Reshape { shape: vec![1, 1] }, &[&s]).shape(), &[1, 1]);
    }

    #[test]
    fn concat_split_slice() {
        let a = iota(&[2, 2]);
        let b = f32t(&[2, 1], &[10., 11.]);
        let c = run1(&Op::Concat { dim: 1 }, &[&a, &b]);
        assert_eq!(c.to_f32_vec(), vec![0., 1., 10., 2., 3., 11.]);
        let c0 = run1(&Op::Concat { dim: 0 }, &[&a, &f32t(&[1, 2], &[7., 8.])]);
        assert_eq!(c0.to_f32_vec(), vec![0., 1., 2., 3., 7., 8.]);
        assert!(eval(&Op::Concat { dim: 0 }, &[&a, &b]).unwrap_err().to_string().contains("cannot concat"));
        let bi = Tensor::from_i32(&[2, 1], vec![1, 2]).unwrap();
        assert!(eval(&Op::Concat { dim: 1 }, &[&a, &bi]).unwrap_err().to_string().contains("dtypes differ"));
        let m = Tensor::from_bool(&[1], vec![true]).unwrap();
        let mm = run1(&Op::Concat { dim: 0 }, &[&m, &Tensor::from_bool(&[2], vec![false, true]).unwrap()]);
        assert_eq!(mm.to_f64_vec(), vec![1., 0., 1.]);
        let x = iota(&[2, 5]);
        let parts = run(&Op::Split { sizes: vec![2, 0, 3], dim: 1 }, &[&x]);
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].to_f32_vec(), vec![0., 1., 5., 6.]);
        assert_eq!(parts[1].shape(), &[2, 0]);
        assert_eq!(parts[2].to_f32_vec(), vec![2., 3., 4., 7., 8., 9.]);
        assert!(eval(&Op::Split { sizes: vec![2, 2], dim: 1 }, &[&x]).is_err());
        let s = run1(&Op::Slice { dim: 1, start: 1, end: 5, step: 2 }, &[&x]);
        assert_eq!(s.to_f32_vec(), vec![1., 3., 6., 8.]);
        let s = run1(&Op::Slice { dim: 1, start: 1, end: 4, step: 2 }, &[&x]);
        assert_eq!(s.to_f32_vec(), vec![1., 3., 6., 8.]);
        let s = run1(&Op::Slice { dim: 0, start: 1, end: 2, step: 1 }, &[&x]);
        assert_eq!(s.to_f32_vec(), vec![5., 6., 7., 8., 9.]);
        assert!(eval(&Op::Slice { dim: 1, start: 0, end: 6, step: 1 }, &[&x]).is_err());
        assert!(eval(&Op::Slice { dim: 1, start: 0, end: 2, step: 0 }, &[&x]).is_err());
    }

    #[test]
    fn slice_grad_matches_finite_differences() {
        let shape = [3, 7];
        let xv: Vec<f32> = (0..21).map(|i| i as f32 * 0.1).collect();
        for (dim, start, end, step) in [(1, 1, 7, 3), (0, 0, 3, 2), (1, 2, 2, 1)] {
            let fwd = Op::Slice { dim, start, end, step };
            let y = run1(&fwd, &[&f32t(&shape, &xv)]);
            let gv: Vec<f32> = (0..y.numel()).map(|i| 1.0 + i as f32).collect();
            let g = f32t(y.shape(), &gv);
            let got = run1(&Op::SliceGrad { in_shape: shape.to_vec(), dim, start, end, step }, &[&g]).to_f32_vec();
            let fd = numeric_grad(|v| dotv(&run1(&fwd, &[&f32t(&shape, v)]), &gv), &xv, 1e-2);
            close(&got, &fd, 1e-3);
        }
        let g = f32t(&[3, 2], &[0.; 6]);
        assert!(eval(&Op::SliceGrad { in_shape: vec![3, 7], dim: 1, start: 0, end: 7, step: 2 }, &[&g]).is_err());
    }

    #[test]
    fn index_select_and_index_add() {
        let x = iota(&[3, 2]);
        let i = Tensor::from_i32(&[4], vec![2, 0, 2, 1]).unwrap();
        let y = run1(&Op::IndexSelect { dim: 0 }, &[&x, &i]);
        assert_eq!(y.to_f32_vec(), vec![4., 5., 0., 1., 4., 5., 2., 3.]);
        let j = Tensor::from_i32(&[3], vec![1, 1, 0]).unwrap();
        let y = run1(&Op::IndexSelect { dim: 1 }, &[&x, &j]);
        assert_eq!(y.to_f32_vec(), vec![1., 1., 0., 3., 3., 2., 5., 5., 4.]);
        let bad = Tensor::from_i32(&[2], vec![0, 3]).unwrap();
        let e = eval(&Op::IndexSelect { dim: 0 }, &[&x, &bad]).unwrap_err().to_string();
        assert!(e.contains("index") && e.contains('3') && e.contains("size 3"), "{e}");
        let neg = Tensor::from_i32(&[1], vec![-1]).unwrap();
        assert!(eval(&Op::IndexSelect { dim: 0 }, &[&x, &neg]).unwrap_err().to_string().contains("-1"));
        let xi = x.cast(DType::Int32);
        assert_eq!(run1(&Op::IndexSelect { dim: 0 }, &[&xi, &i]).dtype(), DType::Int32);
        // IndexAdd is the adjoint: check by finite differences
        for (dim, idx) in [(0, &i), (1, &j)] {
            let fwd = Op::IndexSelect { dim };
            let y = run1(&fwd, &[&x, idx]);
            let gv: Vec<f32> = (0..y.numel()).map(|k| 0.5 - k as f32 * 0.3).collect();
            let got = run1(&Op::IndexAdd { dim, dim_size: x.shape()[dim] }, &[&f32t(y.shape(), &gv), idx]).to_f32_vec();
            let fd = numeric_grad(|v| dotv(&run1(&fwd, &[&f32t(&[3, 2], v), idx]), &gv), &x.to_f32_vec(), 1e-2);
            close(&got, &fd, 1e-3);
        }
        assert!(eval(&Op::IndexAdd { dim: 0, dim_size: 2 }, &[&f32t(&[4, 2], &[0.; 8]), &i]).is_err());
    }

    #[test]
    fn gather_and_gather_grad() {
        let x = iota(&[3, 4]);
        let idx = Tensor::from_i32(&[3, 2], vec![0, 3, 1, 1, 2, 0]).unwrap();
        let y = run1(&Op::Gather { dim: 1 }, &[&x, &idx]);
        assert_eq!(y.to_f32_vec(), vec![0., 3., 5., 5., 10., 8.]);
        let idx0 = Tensor::from_i32(&[2, 2], vec![2, 0, 1, 2]).unwrap();
        let y = run1(&Op::Gather { dim: 0 }, &[&x, &idx0]);
        assert_eq!(y.to_f32_vec(), vec![8., 1., 4., 9.]);
        let bad = Tensor::from_i32(&[1, 1], vec![4]).unwrap();
        let e = eval(&Op::Gather { dim: 1 }, &[&x, &bad]).unwrap_err().to_string();
        assert!(e.contains("index") && e.contains('4') && e.contains("size 4"), "{e}");
        let big = Tensor::from_i32(&[4, 1], vec![0; 4]).unwrap();
        assert!(eval(&Op::Gather { dim: 1 }, &[&x, &big]).is_err());
        let x3 = iota(&[2, 2, 3]);
        let i3 = Tensor::from_i32(&[2, 2, 2], vec![0, 2, 1, 1, 2, 2, 0, 1]).unwrap();
        let y3 = run1(&Op::Gather { dim: 2 }, &[&x3, &i3]);
        assert_eq!(y3.to_f32_vec(), vec![0., 2., 4., 4., 8., 8., 9., 10.]);
        for (xx, ii, dim) in [(&x, &idx, 1), (&x, &idx0, 0), (&x3, &i3, 2)] {
            let fwd = Op::Gather { dim };
            let gv: Vec<f32> = (0..ii.numel()).map(|k| 0.5 - k as f32 * 0.3).collect();
            let got = run1(&Op::GatherGrad { dim, in_shape: xx.shape().to_vec() }, &[&f32t(ii.shape(), &gv), ii])
                .to_f32_vec();
            let fd = numeric_grad(|v| dotv(&run1(&fwd, &[&f32t(xx.shape(), v), ii]), &gv), &xx.to_f32_vec(), 1e-2);
            close(&got, &fd, 1e-3);
        }
    }
}
