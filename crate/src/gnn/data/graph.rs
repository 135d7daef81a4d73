//! The graph every dataset, transform and loader shares: PyG's `Data` for node
//! classification.

use crate::tensor::CsrMatrix;

/// A node-classification graph (PyG `Data` with `x`, `edge_index`, `y` and masks).
#[derive(Clone, Debug, PartialEq)]
pub struct GraphData {
    pub name: String,
    pub num_nodes: usize,
    pub num_features: usize,
    pub num_classes: usize,
    /// Sparse node features, `num_nodes × num_features`; never densified.
    pub x: CsrMatrix,
    pub y: Vec<i32>,
    /// Directed edges `edge_src[k] -> edge_dst[k]` (PyG `edge_index[0]` / `[1]`).
    pub edge_src: Vec<u32>,
    pub edge_dst: Vec<u32>,
    pub train_mask: Vec<bool>,
    pub val_mask: Vec<bool>,
    pub test_mask: Vec<bool>,
}

impl GraphData {
    /// Number of directed edges.
    pub fn num_edges(&self) -> usize {
        self.edge_src.len()
    }

    /// The edges as PyG's `edge_index`: int32 `[2, num_edges]`, sources then targets.
    pub fn edge_index(&self) -> crate::Result<crate::tensor::Tensor> {
        let v: Vec<i32> = self.edge_src.iter().chain(&self.edge_dst).map(|&n| n as i32).collect();
        crate::tensor::Tensor::from_i32(&[2, self.num_edges()], v)
    }

    /// Number of nodes of each class.
    pub fn class_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.num_classes];
        for &c in &self.y {
            counts[c as usize] += 1;
        }
        counts
    }

    /// Sizes of the (train, val, test) masks.
    pub fn split_sizes(&self) -> (usize, usize, usize) {
        let count = |m: &[bool]| m.iter().filter(|&&b| b).count();
        (count(&self.train_mask), count(&self.val_mask), count(&self.test_mask))
    }
}
