//! Compressed sparse row matrices: sparse node features (PubMed is 99% zeros) and
//! adjacency for neighbour aggregation.

use crate::Error;
use serde::{Deserialize, Serialize};

/// A `nrows × ncols` f32 matrix in CSR form: row `r` holds the entries
/// `indices[indptr[r]..indptr[r+1]]` with values at the same positions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CsrMatrix {
    pub nrows: usize,
    pub ncols: usize,
    pub indptr: Vec<usize>,
    pub indices: Vec<u32>,
    pub values: Vec<f32>,
}

impl CsrMatrix {
    /// The matrix as the three tensors the IR's sparse ops take (`indptr` and `indices` as
    /// int32, `values` as float32), padded to `nnz` stored entries with explicit zeros in
    /// the last row (a padding node's, in a padded batch), so one compiled shape fits.
    pub fn to_tensors(&self, nnz: usize) -> crate::Result<[super::Tensor; 3]> {
        let have = self.nnz();
        if have > nnz {
            return Err(Error::tensor(format!(
                "a sparse batch has {have} entries, more than the {nnz} it was compiled for"
            )));
        }
        let mut indptr: Vec<i32> = self.indptr.iter().map(|&v| v as i32).collect();
        *indptr.last_mut().expect("indptr has n+1 entries") = nnz as i32;
        let mut indices: Vec<i32> = self.indices.iter().map(|&v| v as i32).collect();
        let mut values = self.values.clone();
        indices.resize(nnz, 0);
        values.resize(nnz, 0.0);
        Ok([
            super::Tensor::from_i32(&[self.nrows + 1], indptr)?,
            super::Tensor::from_i32(&[nnz], indices)?,
            super::Tensor::from_f32(&[nnz], values)?,
        ])
    }

    /// Checks the invariants and builds the matrix; the error names what is wrong.
    pub fn new(
        nrows: usize,
        ncols: usize,
        indptr: Vec<usize>,
        indices: Vec<u32>,
        values: Vec<f32>,
    ) -> crate::Result<Self> {
        if indptr.len() != nrows + 1 {
            return Err(Error::tensor(format!(
                "CSR indptr has {} entries, expected nrows+1 = {}",
                indptr.len(),
                nrows + 1
            )));
        }
        if indptr[0] != 0 || *indptr.last().unwrap() != indices.len() {
            return Err(Error::tensor(format!(
                "CSR indptr must start at 0 and end at nnz = {} (got {}..{})",
                indices.len(),
                indptr[0],
                indptr.last().unwrap()
            )));
        }
        if indices.len() != values.len() {
            return Err(Error::tensor(format!("CSR has {} indices but {} values", indices.len(), values.len())));
        }
        if let Some(w) = indptr.windows(2).position(|w| w[1] < w[0]) {
            return Err(Error::tensor(format!("CSR indptr decreases at row {w}")));
        }
        if let Some(&c) = indices.iter().find(|&&c| c as usize >= ncols) {
            return Err(Error::tensor(format!("CSR column index {c} out of range for {ncols} columns")));
        }
        Ok(CsrMatrix { nrows, ncols, indptr, indices, values })
    }

    /// Builds from (row, col, value) triplets; duplicates are summed, columns sorted per row.
    pub fn from_triplets(nrows: usize, ncols: usize, rows: &[u32], cols: &[u32], vals: &[f32]) -> Self {
        assert_eq!(rows.len(), cols.len());
        assert_eq!(rows.len(), vals.len());
        let mut counts = vec![0usize; nrows + 1];
        for &r in rows {
            counts[r as usize + 1] += 1;
        }
        for i in 0..nrows {
            counts[i + 1] += counts[i];
        }
        let mut next = counts.clone();
        let mut idx = vec![0u32; rows.len()];
        let mut val = vec![0f32; rows.len()];
        for k in 0..rows.len() {
            let r = rows[k] as usize;
            idx[next[r]] = cols[k];
            val[next[r]] = vals[k];
            next[r] += 1;
        }
        merge_rows(nrows, ncols, rows.len(), false, |r, pairs| {
            pairs.extend((counts[r]..counts[r + 1]).map(|k| (idx[k], val[k])))
        })
    }

    /// The same matrix in canonical form: columns sorted within each row, duplicate entries
    /// summed and zeros (stored, or left by cancellation) dropped.
    pub fn canonical(self) -> CsrMatrix {
        let sorted = (0..self.nrows).all(|r| self.row(r).0.windows(2).all(|w| w[0] < w[1]));
        if sorted && self.values.iter().all(|&v| v != 0.0) {
            return self;
        }
        merge_rows(self.nrows, self.ncols, self.nnz(), true, |r, pairs| {
            let (c, v) = self.row(r);
            pairs.extend(c.iter().copied().zip(v.iter().copied()))
        })
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    /// Row `r` as (column indices, values).
    pub fn row(&self, r: usize) -> (&[u32], &[f32]) {
        let (a, b) = (self.indptr[r], self.indptr[r + 1]);
        (&self.indices[a..b], &self.values[a..b])
    }

    /// Dense row-major copy (for tests and small matrices only).
    pub fn to_dense(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.nrows * self.ncols];
        for r in 0..self.nrows {
            let (cols, vals) = self.row(r);
            for (&c, &v) in cols.iter().zip(vals) {
                out[r * self.ncols + c as usize] += v;
            }
        }
        out
    }

    /// The rows `rows` (in that order) as a new matrix.
    pub fn select_rows(&self, rows: &[usize]) -> CsrMatrix {
        let mut indptr = Vec::with_capacity(rows.len() + 1);
        indptr.push(0);
        let mut indices = Vec::new();
        let mut values = Vec::new();
        for &r in rows {
            let (c, v) = self.row(r);
            indices.extend_from_slice(c);
            values.extend_from_slice(v);
            indptr.push(indices.len());
        }
        CsrMatrix { nrows: rows.len(), ncols: self.ncols, indptr, indices, values }
    }

    /// Transpose (CSR of the transposed matrix).
    pub fn transpose(&self) -> CsrMatrix {
        let mut counts = vec![0usize; self.ncols + 1];
        for &c in &self.indices {
            counts[c as usize + 1] += 1;
        }
        for i in 0..self.ncols {
            counts[i + 1] += counts[i];
        }
        let mut next = counts.clone();
        let mut indices = vec![0u32; self.nnz()];
        let mut values = vec![0f32; self.nnz()];
        for r in 0..self.nrows {
            let (cols, vals) = self.row(r);
            for (&c, &v) in cols.iter().zip(vals) {
                let k = &mut next[c as usize];
                indices[*k] = r as u32;
                values[*k] = v;
                *k += 1;
            }
        }
        CsrMatrix { nrows: self.ncols, ncols: self.nrows, indptr: counts, indices, values }
    }

    /// Bytes held by the three arrays.
    pub fn nbytes(&self) -> usize {
        self.indptr.len() * std::mem::size_of::<usize>() + self.indices.len() * 4 + self.values.len() * 4
    }
}

/// A CSR matrix from each row's (column, value) pairs (`row(r, pairs)` fills `pairs`):
/// columns sorted (stably), duplicates summed, and with `drop_zeros` zero sums dropped.
fn merge_rows(
    nrows: usize,
    ncols: usize,
    nnz: usize,
    drop_zeros: bool,
    mut row: impl FnMut(usize, &mut Vec<(u32, f32)>),
) -> CsrMatrix {
    let mut indptr = Vec::with_capacity(nrows + 1);
    let mut indices = Vec::with_capacity(nnz);
    let mut values = Vec::with_capacity(nnz);
    indptr.push(0);
    let mut pairs: Vec<(u32, f32)> = Vec::new();
    for r in 0..nrows {
        pairs.clear();
        row(r, &mut pairs);
        pairs.sort_by_key(|p| p.0);
        let start = indices.len();
        for &(c, v) in &pairs {
            if indices.len() > start && *indices.last().unwrap() == c {
                *values.last_mut().unwrap() += v;
            } else {
                indices.push(c);
                values.push(v);
            }
        }
        if drop_zeros {
            let mut w = start;
            for k in start..indices.len() {
                if values[k] != 0.0 {
                    indices[w] = indices[k];
                    values[w] = values[k];
                    w += 1;
                }
            }
            indices.truncate(w);
            values.truncate(w);
        }
        indptr.push(indices.len());
    }
    CsrMatrix { nrows, ncols, indptr, indices, values }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_sorts_sums_and_drops_zeros() {
        // Row 0: columns out of order with a duplicate; row 1: a stored zero and a pair that
        // cancels. Triplets keep a zero sum; the canonical form drops it.
        let m =
            CsrMatrix::new(2, 3, vec![0, 3, 6], vec![2, 0, 2, 1, 0, 0], vec![1.0, 2.0, 3.0, 0.0, 5.0, -5.0]).unwrap();
        let c = m.canonical();
        assert_eq!(
            (c.indptr.clone(), c.indices.clone(), c.values.clone()),
            (vec![0, 2, 2], vec![0, 2], vec![2.0, 4.0])
        );
        assert_eq!(c.clone().canonical(), c, "a canonical matrix is returned as it is");
        let t = CsrMatrix::from_triplets(1, 2, &[0, 0], &[1, 1], &[1.0, -1.0]);
        assert_eq!((t.indices, t.values), (vec![1], vec![0.0]));
    }

    #[test]
    fn triplets_merge_and_sort() {
        let m = CsrMatrix::from_triplets(2, 3, &[1, 0, 1, 1], &[2, 1, 0, 2], &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(m.indptr, vec![0, 1, 3]);
        assert_eq!(m.indices, vec![1, 0, 2]);
        assert_eq!(m.values, vec![2.0, 3.0, 5.0]);
        assert_eq!(m.to_dense(), vec![0.0, 2.0, 0.0, 3.0, 0.0, 5.0]);
        let t = m.transpose();
        assert_eq!(t.to_dense(), vec![0.0, 3.0, 2.0, 0.0, 0.0, 5.0]);
        assert_eq!(m.select_rows(&[1]).to_dense(), vec![3.0, 0.0, 5.0]);
    }

    #[test]
    fn invalid_csr_is_rejected() {
        assert!(CsrMatrix::new(2, 2, vec![0, 1], vec![0], vec![1.0]).unwrap_err().to_string().contains("nrows+1"));
        assert!(CsrMatrix::new(1, 2, vec![0, 1], vec![5], vec![1.0]).unwrap_err().to_string().contains("out of range"));
    }
}
