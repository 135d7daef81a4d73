//! Graph transforms with PyG's semantics, and the edge utilities they rest on.
//!
//! * [`add_self_loops`] = `T.AddSelfLoops()`: appends `(i, i)` for every node **at the end**
//!   of the edge list, without removing existing self loops and without re-sorting
//!   (`torch_geometric.utils.add_self_loops` is a plain `torch.cat([edge_index, loop_index])`).
//!   Planetoid graphs have no self loops after loading, so PubMed goes from 88,648 to
//!   88,648 + 19,717 = 108,365 edges.
//! * [`normalize_features`] = `T.NormalizeFeatures()`: `x = x - x.min()`, then each row is
//!   divided by `max(row_sum, 1)` (PyG clamps the sum at 1, so rows summing to less than 1,
//!   including all-zero rows, are left unscaled). On Cora, CiteSeer and PubMed every
//!   non-empty row sums to at least 1 and `x.min()` is 0, so non-empty rows end up summing
//!   to exactly 1.
//! * [`to_undirected`] = `T.ToUndirected()`: appends every edge reversed and coalesces
//!   **sorted by source** (`coalesce`'s default `sort_by_row=True`), dropping duplicates.
//! * [`coalesce`] and [`remove_self_loops`] = the `torch_geometric.utils` functions.

use super::graph::GraphData;
use crate::tensor::CsrMatrix;

/// Removes edges `i -> i`, keeping the order of the others (`utils.remove_self_loops`).
pub fn remove_self_loops(src: &[u32], dst: &[u32]) -> (Vec<u32>, Vec<u32>) {
    src.iter().zip(dst).filter(|(s, d)| s != d).map(|(&s, &d)| (s, d)).unzip()
}

/// Sorts edges and removes duplicates (`utils.coalesce`). With `sort_by_row` the order is by
/// (source, target); otherwise by (target, source), which is what Planetoid loading uses.
pub fn coalesce(num_nodes: usize, src: &[u32], dst: &[u32], sort_by_row: bool) -> (Vec<u32>, Vec<u32>) {
    assert_eq!(src.len(), dst.len(), "coalesce: src and dst lengths differ");
    let n = num_nodes as u64;
    let mut keys: Vec<u64> = src
        .iter()
        .zip(dst)
        .map(|(&s, &d)| {
            let (major, minor) = if sort_by_row { (s, d) } else { (d, s) };
            major as u64 * n + minor as u64
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.iter()
        .map(|&k| {
            let (major, minor) = ((k / n) as u32, (k % n) as u32);
            if sort_by_row {
                (major, minor)
            } else {
                (minor, major)
            }
        })
        .unzip()
}

/// `T.AddSelfLoops()`: appends `(i, i)` for every node at the end of the edge list.
pub fn add_self_loops(data: &mut GraphData) {
    let n = data.num_nodes as u32;
    data.edge_src.extend(0..n);
    data.edge_dst.extend(0..n);
}

/// `T.NormalizeFeatures()`: subtract the global minimum of `x` (a no-op for the
/// non-negative Planetoid features), then divide each row by `max(row_sum, 1)`.
pub fn normalize_features(data: &mut GraphData) {
    data.x = normalize_rows(&data.x);
}

fn normalize_rows(x: &CsrMatrix) -> CsrMatrix {
    if x.nrows == 0 || x.ncols == 0 {
        return x.clone();
    }
    let has_implicit_zeros = x.nnz() < x.nrows * x.ncols;
    let mut min = x.values.iter().copied().fold(f32::INFINITY, f32::min);
    if has_implicit_zeros {
        min = min.min(0.0);
    }
    let shifted = if min == 0.0 { x.clone() } else { shift_dense(x, min) };
    let mut out = shifted;
    for r in 0..out.nrows {
        let (a, b) = (out.indptr[r], out.indptr[r + 1]);
        let sum = out.values[a..b].iter().map(|&v| v as f64).sum::<f64>() as f32;
        let denom = sum.max(1.0);
        for v in &mut out.values[a..b] {
            *v /= denom;
        }
    }
    out
}

/// `x - min` over the dense matrix (every entry, stored or not), kept sparse where the
/// result is zero. Only reached for features with negative values or no zeros at all.
fn shift_dense(x: &CsrMatrix, min: f32) -> CsrMatrix {
    let mut indptr = vec![0];
    let mut indices = Vec::new();
    let mut values = Vec::new();
    let mut row = vec![0f32; x.ncols];
    for r in 0..x.nrows {
        row.iter_mut().for_each(|v| *v = 0.0);
        let (c, v) = x.row(r);
        for (&c, &v) in c.iter().zip(v) {
            row[c as usize] += v;
        }
        for (c, &v) in row.iter().enumerate() {
            let s = v - min;
            if s != 0.0 {
                indices.push(c as u32);
                values.push(s);
            }
        }
        indptr.push(indices.len());
    }
    CsrMatrix { nrows: x.nrows, ncols: x.ncols, indptr, indices, values }
}

/// `T.ToUndirected()`: adds the reverse of every edge, then coalesces sorted by source.
pub fn to_undirected(data: &mut GraphData) {
    let mut src = data.edge_src.clone();
    let mut dst = data.edge_dst.clone();
    src.extend_from_slice(&data.edge_dst);
    dst.extend_from_slice(&data.edge_src);
    let (s, d) = coalesce(data.num_nodes, &src, &dst, true);
    data.edge_src = s;
    data.edge_dst = d;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(x: CsrMatrix, src: Vec<u32>, dst: Vec<u32>) -> GraphData {
        let n = x.nrows;
        GraphData {
            name: "tiny".into(),
            num_nodes: n,
            num_features: x.ncols,
            num_classes: 1,
            x,
            y: vec![0; n],
            edge_src: src,
            edge_dst: dst,
            train_mask: vec![false; n],
            val_mask: vec![false; n],
            test_mask: vec![false; n],
        }
    }

    fn ones(n: usize) -> CsrMatrix {
        CsrMatrix::from_triplets(n, 1, &(0..n as u32).collect::<Vec<_>>(), &vec![0; n], &vec![1.0; n])
    }

    #[test]
    fn coalesce_sorts_and_dedups() {
        let src = [2, 0, 1, 0, 2];
        let dst = [0, 1, 2, 1, 1];
        assert_eq!(coalesce(3, &src, &dst, true), (vec![0, 1, 2, 2], vec![1, 2, 0, 1]));
        assert_eq!(coalesce(3, &src, &dst, false), (vec![2, 0, 2, 1], vec![0, 1, 1, 2]));
        assert_eq!(remove_self_loops(&[0, 1, 2], &[0, 2, 2]), (vec![1], vec![2]));
    }

    #[test]
    fn self_loops_are_appended() {
        let mut g = tiny(ones(3), vec![1, 0], vec![0, 1]);
        add_self_loops(&mut g);
        assert_eq!(g.edge_src, vec![1, 0, 0, 1, 2]);
        assert_eq!(g.edge_dst, vec![0, 1, 0, 1, 2]);
    }

    #[test]
    fn undirected_adds_reverse_edges() {
        let mut g = tiny(ones(3), vec![0, 1, 2], vec![1, 0, 1]);
        to_undirected(&mut g);
        assert_eq!(g.edge_src, vec![0, 1, 1, 2]);
        assert_eq!(g.edge_dst, vec![1, 0, 2, 1]);
    }

    #[test]
    fn normalize_rows_like_pyg() {
        // rows: [1, 3] -> [0.25, 0.75]; [] stays empty; [0.5] (sum < 1) stays 0.5.
        let x = CsrMatrix::from_triplets(3, 2, &[0, 0, 2], &[0, 1, 1], &[1.0, 3.0, 0.5]);
        let mut g = tiny(x, vec![], vec![]);
        normalize_features(&mut g);
        assert_eq!(g.x.to_dense(), vec![0.25, 0.75, 0.0, 0.0, 0.0, 0.5]);
        assert_eq!(g.x.nnz(), 3);
    }

    #[test]
    fn normalize_shifts_negative_features() {
        // [[-1, 1]] -> shift by -1 -> [[0, 2]] -> [[0, 1]]
        let x = CsrMatrix::from_triplets(1, 2, &[0, 0], &[0, 1], &[-1.0, 1.0]);
        let mut g = tiny(x, vec![], vec![]);
        normalize_features(&mut g);
        assert_eq!(g.x.to_dense(), vec![0.0, 1.0]);
        assert_eq!(g.x.nnz(), 1);
    }
}
