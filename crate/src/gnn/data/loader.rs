//! Mini-batches of a large graph: PyG's `RandomNodeLoader`, induced subgraphs, fixed-size
//! padding for statically shaped (IPU-style) compiled graphs, and the mean-aggregation
//! adjacency used by `SAGEConv(aggr="mean")`.
//!
//! What matches PyG:
//!
//! * [`RandomNodeLoader`] (`torch_geometric/loader/random_node_loader.py`) is a
//!   `DataLoader(range(N), batch_size=ceil(N / num_parts))`: with `shuffle` the node ids are
//!   permuted every epoch (we use [`Rng`], so the parts differ from PyG's but are seeded),
//!   without it the parts are contiguous id ranges. As in PyG the last part may be smaller,
//!   and there can be fewer than `num_parts` parts (e.g. N = 10, num_parts = 4 gives
//!   3 + 3 + 3 + 1; N = 10, num_parts = 6 gives five parts of 2).
//! * [`induced_subgraph`] = `Data.subgraph(index)`: keeps the edges with both ends in
//!   `nodes`, in their original order, relabels node ids by position in `nodes`, and
//!   gathers `x`, `y` and the masks.
//!
//! Fixed sizes: a compiled graph needs the same tensor shapes for every batch, so each part
//! is padded by [`pad_fixed`] to `max_nodes` nodes and `max_edges` edges. At least one
//! padding node is always added: padding nodes have empty feature rows, label 0 and all
//! masks false, and every padding edge is a self loop on the **last** padding node (as
//! PopTorch Geometric pads), so padding never sends messages to or from a real node.
//! Three ways to choose the sizes, all with `max_nodes = ceil(N / num_parts) + 1`:
//! [`fixed_sizes`] bounds the edge count of **any** part (safe for any shuffle and any
//! number of epochs, but loose: about 9x the largest real part on Cora with 10 parts);
//! [`fixed_sizes_for_epochs`] replays the loader's seeded shuffles for a given number of
//! epochs and is exact for them (the recommended choice for training);
//! [`fixed_sizes_from_parts`] is exact for parts already drawn.

use super::graph::GraphData;
use crate::rng::Rng;
use crate::tensor::{CsrMatrix, Tensor};
use crate::{Error, Result};

/// `node_ids` entry of a padding node.
pub const PADDING_NODE_ID: usize = usize::MAX;

/// Random (or contiguous) node partitions, one set per epoch, like PyG's `RandomNodeLoader`.
#[derive(Clone, Debug)]
pub struct RandomNodeLoader {
    num_parts: usize,
    shuffle: bool,
    rng: Rng,
}

impl RandomNodeLoader {
    /// A loader making `num_parts` parts per epoch; `shuffle` draws new random parts every
    /// epoch from a generator seeded with `seed`. Errors when `num_parts` is 0.
    pub fn new(num_parts: usize, shuffle: bool, seed: u64) -> Result<Self> {
        if num_parts == 0 {
            return Err(Error::data("RandomNodeLoader: num_parts must be at least 1 (got 0)"));
        }
        Ok(RandomNodeLoader { num_parts, shuffle, rng: Rng::new(seed) })
    }

    /// The requested number of parts.
    pub fn num_parts(&self) -> usize {
        self.num_parts
    }

    /// Whether parts are random.
    pub fn shuffle(&self) -> bool {
        self.shuffle
    }

    /// Nodes per part, `ceil(num_nodes / num_parts)` (the last part may be smaller).
    pub fn batch_size(&self, num_nodes: usize) -> usize {
        num_nodes.div_ceil(self.num_parts)
    }

    /// The node ids of each part for one epoch. Errors when `num_parts` exceeds the number
    /// of nodes (naming both).
    pub fn parts(&mut self, data: &GraphData) -> Result<Vec<Vec<usize>>> {
        self.parts_for(data.num_nodes)
    }

    /// [`parts`](Self::parts) for a graph of `num_nodes` nodes.
    pub fn parts_for(&mut self, num_nodes: usize) -> Result<Vec<Vec<usize>>> {
        if self.num_parts > num_nodes {
            return Err(Error::data(format!(
                "RandomNodeLoader: num_parts = {} exceeds the number of nodes ({num_nodes})",
                self.num_parts
            )));
        }
        let order: Vec<usize> = if self.shuffle { self.rng.permutation(num_nodes) } else { (0..num_nodes).collect() };
        let bs = self.batch_size(num_nodes);
        Ok(order.chunks(bs).map(|c| c.to_vec()).collect())
    }

    /// One epoch of induced subgraphs (the batches PyG's loader yields).
    pub fn subgraphs(&mut self, data: &GraphData) -> Result<Vec<Subgraph>> {
        let parts = self.parts(data)?;
        Ok(induced_subgraphs(data, &parts))
    }
}

/// An induced subgraph (PyG `Data.subgraph`): a graph of its own, in local node ids, and the
/// original id of each of its nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Subgraph {
    /// The subgraph; its edges are in local ids (positions in `node_ids`).
    pub data: GraphData,
    /// Original node id of each local node ([`PADDING_NODE_ID`] for padding).
    pub node_ids: Vec<usize>,
}

impl Subgraph {
    /// Number of edges.
    pub fn num_edges(&self) -> usize {
        self.data.num_edges()
    }

    /// The mean-aggregation adjacency of this subgraph (see [`mean_adjacency`]).
    pub fn mean_adjacency(&self) -> CsrMatrix {
        mean_adjacency(self.data.num_nodes, &self.data.edge_src, &self.data.edge_dst)
    }
}

/// Node attributes of `nodes` gathered, edges left empty.
fn gather_nodes(data: &GraphData, nodes: &[usize]) -> Subgraph {
    let x = data.x.select_rows(nodes);
    Subgraph {
        data: GraphData {
            name: data.name.clone(),
            num_nodes: nodes.len(),
            num_features: x.ncols,
            num_classes: data.num_classes,
            x,
            y: nodes.iter().map(|&n| data.y[n]).collect(),
            edge_src: Vec::new(),
            edge_dst: Vec::new(),
            train_mask: nodes.iter().map(|&n| data.train_mask[n]).collect(),
            val_mask: nodes.iter().map(|&n| data.val_mask[n]).collect(),
            test_mask: nodes.iter().map(|&n| data.test_mask[n]).collect(),
        },
        node_ids: nodes.to_vec(),
    }
}

/// PyG `Data.subgraph(nodes)`: the edges with both ends in `nodes` (original order),
/// relabelled to positions in `nodes`, and the node attributes gathered in `nodes` order.
///
/// Panics if a node id is out of range or listed twice.
pub fn induced_subgraph(data: &GraphData, nodes: &[usize]) -> Subgraph {
    let mut pos = vec![u32::MAX; data.num_nodes];
    for (i, &n) in nodes.iter().enumerate() {
        assert!(n < data.num_nodes, "induced_subgraph: node {n} out of range for {} nodes", data.num_nodes);
        assert!(pos[n] == u32::MAX, "induced_subgraph: node {n} listed twice");
        pos[n] = i as u32;
    }
    let mut sub = gather_nodes(data, nodes);
    for (&s, &d) in data.edge_src.iter().zip(&data.edge_dst) {
        let (ls, ld) = (pos[s as usize], pos[d as usize]);
        if ls != u32::MAX && ld != u32::MAX {
            sub.data.edge_src.push(ls);
            sub.data.edge_dst.push(ld);
        }
    }
    sub
}

/// [`induced_subgraph`] of each of several disjoint parts, with one pass over the edges.
///
/// Panics if a node id is out of range or appears in two parts.
pub fn induced_subgraphs(data: &GraphData, parts: &[Vec<usize>]) -> Vec<Subgraph> {
    let mut part_of = vec![u32::MAX; data.num_nodes];
    let mut pos = vec![0u32; data.num_nodes];
    for (p, nodes) in parts.iter().enumerate() {
        for (i, &n) in nodes.iter().enumerate() {
            assert!(n < data.num_nodes, "induced_subgraphs: node {n} out of range for {} nodes", data.num_nodes);
            assert!(part_of[n] == u32::MAX, "induced_subgraphs: node {n} listed twice");
            part_of[n] = p as u32;
            pos[n] = i as u32;
        }
    }
    let mut subs: Vec<Subgraph> = parts.iter().map(|nodes| gather_nodes(data, nodes)).collect();
    for (&s, &d) in data.edge_src.iter().zip(&data.edge_dst) {
        let p = part_of[s as usize];
        if p != u32::MAX && p == part_of[d as usize] {
            let sub = &mut subs[p as usize];
            sub.data.edge_src.push(pos[s as usize]);
            sub.data.edge_dst.push(pos[d as usize]);
        }
    }
    subs
}

/// The whole graph as one batch (all nodes in id order, all edges), for evaluation.
pub fn whole_graph(data: &GraphData) -> Subgraph {
    Subgraph { data: data.clone(), node_ids: (0..data.num_nodes).collect() }
}

/// A subgraph padded to fixed sizes; `sub.data.num_nodes == node_mask.len()` is the fixed node
/// count and `sub.num_edges() == edge_mask.len()` the fixed edge count.
#[derive(Clone, Debug, PartialEq)]
pub struct FixedSizeBatch {
    /// The padded subgraph: real nodes and edges first, then padding.
    pub sub: Subgraph,
    pub num_real_nodes: usize,
    pub num_real_edges: usize,
    /// True for real nodes, false for padding.
    pub node_mask: Vec<bool>,
    /// True for real edges, false for padding.
    pub edge_mask: Vec<bool>,
}

/// Pads `sub` to exactly `max_nodes` nodes and `max_edges` edges. At least one padding
/// node is required (so `sub.data.num_nodes < max_nodes`); padding edges are self loops on the
/// last padding node. Errors, naming the sizes, when the subgraph does not fit.
pub fn pad_fixed(sub: Subgraph, max_nodes: usize, max_edges: usize) -> Result<FixedSizeBatch> {
    let (n, e) = (sub.data.num_nodes, sub.num_edges());
    if n >= max_nodes {
        return Err(Error::data(format!(
            "pad_fixed: subgraph of {n} nodes does not fit max_nodes = {max_nodes} \
             (one padding node is always added, so max_nodes must be at least {})",
            n + 1
        )));
    }
    if e > max_edges {
        return Err(Error::data(format!("pad_fixed: subgraph of {e} edges does not fit max_edges = {max_edges}")));
    }
    if max_nodes > u32::MAX as usize {
        return Err(Error::data(format!("pad_fixed: max_nodes = {max_nodes} does not fit u32 node ids")));
    }
    let mut sub = sub;
    let pad_n = max_nodes - n;
    let last = (max_nodes - 1) as u32;
    let nnz = sub.data.x.nnz();
    sub.data.x.indptr.extend(std::iter::repeat_n(nnz, pad_n));
    sub.data.x.nrows = max_nodes;
    sub.data.y.resize(max_nodes, 0);
    sub.data.train_mask.resize(max_nodes, false);
    sub.data.val_mask.resize(max_nodes, false);
    sub.data.test_mask.resize(max_nodes, false);
    sub.node_ids.resize(max_nodes, PADDING_NODE_ID);
    sub.data.edge_src.resize(max_edges, last);
    sub.data.edge_dst.resize(max_edges, last);
    sub.data.num_nodes = max_nodes;
    let node_mask = (0..max_nodes).map(|i| i < n).collect();
    let edge_mask = (0..max_edges).map(|i| i < e).collect();
    Ok(FixedSizeBatch { sub, num_real_nodes: n, num_real_edges: e, node_mask, edge_mask })
}

/// Fixed batch sizes for a loader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedSizes {
    pub max_nodes: usize,
    pub max_edges: usize,
}

/// Sizes that fit **every** part a `RandomNodeLoader` with `num_parts` can produce over
/// `data`, whatever the shuffle: `max_nodes = ceil(N / num_parts) + 1` (one padding node)
/// and `max_edges` = the largest number of edges an induced subgraph of `B = ceil(N /
/// num_parts)` nodes can have, bounded by the sum of the `B` largest in-degrees, the sum of
/// the `B` largest out-degrees and the total edge count (every kept edge has its target
/// and its source among the `B` nodes). With `num_parts = 1` this is the whole graph.
/// The bound is safe but loose for random parts (an edge survives a random split with
/// probability about 1/num_parts); use [`fixed_sizes_from_parts`] for tight sizes when the
/// parts are known in advance.
pub fn fixed_sizes(data: &GraphData, num_parts: usize) -> Result<FixedSizes> {
    if num_parts == 0 || num_parts > data.num_nodes {
        return Err(Error::data(format!(
            "fixed_sizes: num_parts = {num_parts} must be between 1 and the number of nodes ({})",
            data.num_nodes
        )));
    }
    let b = data.num_nodes.div_ceil(num_parts);
    let top_sum = |ends: &[u32]| {
        let mut deg = vec![0usize; data.num_nodes];
        for &v in ends {
            deg[v as usize] += 1;
        }
        deg.sort_unstable_by(|a, b| b.cmp(a));
        deg[..b].iter().sum::<usize>()
    };
    let max_edges = top_sum(&data.edge_dst).min(top_sum(&data.edge_src)).min(data.num_edges());
    Ok(FixedSizes { max_nodes: b + 1, max_edges })
}

/// The tight sizes for the given parts: the largest part plus one padding node, and the
/// largest induced edge count.
pub fn fixed_sizes_from_parts(data: &GraphData, parts: &[Vec<usize>]) -> FixedSizes {
    let subs = induced_subgraphs(data, parts);
    FixedSizes {
        max_nodes: subs.iter().map(|s| s.data.num_nodes).max().unwrap_or(0) + 1,
        max_edges: subs.iter().map(|s| s.num_edges()).max().unwrap_or(0),
    }
}

/// The exact sizes for the next `epochs` epochs of `loader`: the parts are drawn on a
/// clone of the loader (whose random sequence is fixed by its seed), so `loader` itself
/// is not advanced and will produce exactly those parts. Tight and safe as long as
/// training runs at most `epochs` epochs; costs one pass over the edges per epoch.
pub fn fixed_sizes_for_epochs(data: &GraphData, loader: &RandomNodeLoader, epochs: usize) -> Result<FixedSizes> {
    let mut sim = loader.clone();
    let mut sizes = FixedSizes { max_nodes: 0, max_edges: 0 };
    let mut part_of = vec![0u32; data.num_nodes];
    for epoch in 0..epochs.max(1) {
        if epoch > 0 && !sim.shuffle {
            break; // contiguous parts are the same every epoch
        }
        let parts = sim.parts(data)?;
        for (p, nodes) in parts.iter().enumerate() {
            sizes.max_nodes = sizes.max_nodes.max(nodes.len() + 1);
            for &n in nodes {
                part_of[n] = p as u32;
            }
        }
        let mut edges = vec![0usize; parts.len()];
        for (&s, &d) in data.edge_src.iter().zip(&data.edge_dst) {
            let p = part_of[s as usize];
            if p == part_of[d as usize] {
                edges[p as usize] += 1;
            }
        }
        sizes.max_edges = sizes.max_edges.max(edges.into_iter().max().unwrap_or(0));
    }
    Ok(sizes)
}

/// A CSR matrix stored in a fixed number of entries (`capacity` ≥ its own): what a compiled
/// graph's sparse input takes. Its tensors ([`PaddedCsr::tensors`]) pad the entries with
/// zeros in the last row, which change no product.
#[derive(Clone, Debug, PartialEq)]
pub struct PaddedCsr {
    pub matrix: CsrMatrix,
    pub capacity: usize,
}

impl PaddedCsr {
    /// `matrix` in exactly its own entries.
    pub fn exact(matrix: CsrMatrix) -> PaddedCsr {
        let capacity = matrix.nnz();
        PaddedCsr { matrix, capacity }
    }

    /// indptr (int32, rows + 1), indices (int32, capacity), values (f32, capacity).
    pub fn tensors(&self) -> Result<[Tensor; 3]> {
        self.matrix.to_tensors(self.capacity)
    }
}

/// Checks the three arrays of a CSR matrix given from outside before any kernel reads them:
/// `indptr` has `rows + 1` entries, starts at 0, never decreases and ends at the number of
/// `indices`; every column index is in `0..cols`; there are as many values as indices. The
/// error names `what`, the array and the position.
pub fn check_csr(what: &str, rows: usize, cols: usize, indptr: &[i32], indices: &[i32], n_values: usize) -> Result<()> {
    let err = |m: String| Err(Error::data(format!("{what}: {m}")));
    if indptr.len() != rows + 1 {
        return err(format!("indptr has {} entries, a {rows}-row matrix needs {}", indptr.len(), rows + 1));
    }
    if indptr[0] != 0 {
        return err(format!("indptr[0] is {}, not 0", indptr[0]));
    }
    if let Some(i) = indptr.windows(2).position(|w| w[1] < w[0]) {
        return err(format!("indptr decreases at {}: {} then {}", i + 1, indptr[i], indptr[i + 1]));
    }
    if indptr[rows] as i64 != indices.len() as i64 {
        return err(format!("indptr ends at {}, but there are {} indices", indptr[rows], indices.len()));
    }
    if n_values != indices.len() {
        return err(format!("{n_values} values for {} indices", indices.len()));
    }
    if let Some(k) = indices.iter().position(|&c| c < 0 || c as i64 >= cols as i64) {
        return err(format!("indices[{k}] = {} is not a column of a matrix of {cols} columns", indices[k]));
    }
    Ok(())
}

/// One batch of a loader: a part's induced subgraph, padded to the loader's fixed sizes or
/// as it is, with the number of stored feature and adjacency entries its tensors have.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    /// The subgraph (real nodes and edges first, then any padding).
    pub sub: Subgraph,
    pub num_real_nodes: usize,
    pub num_real_edges: usize,
    /// Stored feature entries of `x`'s tensors.
    pub x_capacity: usize,
    /// Stored entries of the mean adjacency's tensors (the fixed edge count).
    pub edge_capacity: usize,
}

impl Part {
    /// An unpadded part: its tensors hold exactly its entries.
    pub fn exact(sub: Subgraph) -> Part {
        let (n, e, x) = (sub.data.num_nodes, sub.num_edges(), sub.data.x.nnz());
        Part { sub, num_real_nodes: n, num_real_edges: e, x_capacity: x, edge_capacity: e }
    }

    /// The node features.
    pub fn x(&self) -> PaddedCsr {
        PaddedCsr { matrix: self.sub.data.x.clone(), capacity: self.x_capacity }
    }

    /// SAGEConv's mean-aggregation adjacency ([`mean_adjacency`]).
    pub fn mean_adjacency(&self) -> PaddedCsr {
        PaddedCsr { matrix: self.sub.mean_adjacency(), capacity: self.edge_capacity }
    }

    /// GCNConv's normalised adjacency ([`gcn_adjacency`]): room for a self loop on every node.
    pub fn gcn_adjacency(&self) -> PaddedCsr {
        let m = gcn_adjacency(self.sub.data.num_nodes, &self.sub.data.edge_src, &self.sub.data.edge_dst);
        PaddedCsr { matrix: m, capacity: self.edge_capacity + self.sub.data.num_nodes }
    }

    /// Training nodes in the part.
    pub fn num_train(&self) -> usize {
        self.sub.data.train_mask.iter().filter(|&&m| m).count()
    }
}

/// The largest number of feature entries `rows` nodes of `x` can hold (the sum of its
/// `rows` fullest rows; at least 1).
pub fn max_row_nnz_sum(x: &CsrMatrix, rows: usize) -> usize {
    let mut per: Vec<usize> = (0..x.nrows).map(|r| x.indptr[r + 1] - x.indptr[r]).collect();
    per.sort_unstable_by(|a, b| b.cmp(a));
    per[..rows.min(per.len())].iter().sum::<usize>().max(1)
}

/// A [`RandomNodeLoader`] whose parts are all padded to one fixed size, so one compiled
/// graph serves every part (as a PopTorch model is compiled once for static shapes).
/// Node and edge counts: exact for the first `epochs` epochs of the loader's seeded shuffle
/// ([`fixed_sizes_for_epochs`]; a later epoch is an error), or, without `epochs`, the bound
/// that fits any part ([`fixed_sizes`], looser). Feature entries: the bound of the fullest
/// rows ([`max_row_nnz_sum`]).
#[derive(Clone, Debug)]
pub struct PaddedLoader {
    loader: RandomNodeLoader,
    pub sizes: FixedSizes,
    pub x_capacity: usize,
    epochs: Option<usize>,
    epoch: usize,
}

impl PaddedLoader {
    pub fn new(data: &GraphData, loader: RandomNodeLoader, epochs: Option<usize>) -> Result<PaddedLoader> {
        let sizes = match epochs {
            Some(e) => fixed_sizes_for_epochs(data, &loader, e)?,
            None => fixed_sizes(data, loader.num_parts())?,
        };
        let x_capacity = max_row_nnz_sum(&data.x, sizes.max_nodes - 1);
        Ok(PaddedLoader { loader, sizes, x_capacity, epochs, epoch: 0 })
    }

    /// The epochs the sizes were computed for (`None`: any number).
    pub fn epochs(&self) -> Option<usize> {
        self.epochs
    }

    /// Epochs drawn so far.
    pub fn epoch(&self) -> usize {
        self.epoch
    }

    /// The loader inside.
    pub fn loader(&self) -> &RandomNodeLoader {
        &self.loader
    }

    /// The next epoch's parts, padded. Past the epochs the sizes were computed for, an error.
    pub fn next_epoch(&mut self, data: &GraphData) -> Result<Vec<Part>> {
        if let Some(e) = self.epochs.filter(|&e| self.epoch >= e) {
            return Err(Error::data(format!(
                "the fixed sizes were computed for {e} epochs, all of which have been drawn: make the loader for more \
                 epochs"
            )));
        }
        let subs = self.loader.subgraphs(data)?;
        self.epoch += 1;
        let FixedSizes { max_nodes, max_edges } = self.sizes;
        subs.into_iter()
            .map(|sub| {
                let b = pad_fixed(sub, max_nodes, max_edges)?;
                Ok(Part {
                    sub: b.sub,
                    num_real_nodes: b.num_real_nodes,
                    num_real_edges: b.num_real_edges,
                    x_capacity: self.x_capacity,
                    edge_capacity: max_edges,
                })
            })
            .collect()
    }
}

/// Mean aggregation as a sparse matrix: row `i` (a target) has `1 / in_degree(i)` at
/// column `j` for every edge `j -> i`, so `A · X` averages the features of each node's
/// in-neighbours (messages flow `edge_src -> edge_dst`, like PyG's `SAGEConv`; repeated
/// edges count repeatedly; nodes without in-edges get an empty row, i.e. zeros). Padding
/// edges only touch the padding row they point at.
pub fn mean_adjacency(num_nodes: usize, edge_src: &[u32], edge_dst: &[u32]) -> CsrMatrix {
    assert_eq!(edge_src.len(), edge_dst.len(), "mean_adjacency: src and dst lengths differ");
    let mut deg = vec![0u32; num_nodes];
    for &d in edge_dst {
        deg[d as usize] += 1;
    }
    let vals: Vec<f32> = edge_dst.iter().map(|&d| 1.0 / deg[d as usize] as f32).collect();
    CsrMatrix::from_triplets(num_nodes, num_nodes, edge_dst, edge_src, &vals)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 6 nodes, feature = [id + 1] in column id % 2, label id % 3, edges a ring both ways
    /// plus one self loop on node 2.
    fn toy() -> GraphData {
        let n = 6;
        let rows: Vec<u32> = (0..n as u32).collect();
        let cols: Vec<u32> = rows.iter().map(|r| r % 2).collect();
        let vals: Vec<f32> = rows.iter().map(|&r| r as f32 + 1.0).collect();
        let mut src = Vec::new();
        let mut dst = Vec::new();
        for i in 0..n as u32 {
            let j = (i + 1) % n as u32;
            src.extend([i, j]);
            dst.extend([j, i]);
        }
        src.push(2);
        dst.push(2);
        GraphData {
            name: "toy".into(),
            num_nodes: n,
            num_features: 2,
            num_classes: 3,
            x: CsrMatrix::from_triplets(n, 2, &rows, &cols, &vals),
            y: (0..n as i32).map(|i| i % 3).collect(),
            edge_src: src,
            edge_dst: dst,
            train_mask: (0..n).map(|i| i < 2).collect(),
            val_mask: (0..n).map(|i| i == 2).collect(),
            test_mask: (0..n).map(|i| i >= 3).collect(),
        }
    }

    #[test]
    fn induced_subgraph_relabels_in_given_order() {
        let g = toy();
        let sub = induced_subgraph(&g, &[3, 2, 1]);
        assert_eq!(sub.data.num_nodes, 3);
        assert_eq!(sub.node_ids, vec![3, 2, 1]);
        assert_eq!(sub.data.y, vec![0, 2, 1]);
        assert_eq!(sub.data.train_mask, vec![false, false, true]);
        assert_eq!(sub.data.val_mask, vec![false, true, false]);
        assert_eq!(sub.data.test_mask, vec![true, false, false]);
        assert_eq!(sub.data.x.to_dense(), vec![0.0, 4.0, 3.0, 0.0, 0.0, 2.0]);
        // Original edge order: 1->2, 2->1, 2->3, 3->2, then the self loop 2->2.
        assert_eq!(sub.data.edge_src, vec![2, 1, 1, 0, 1]);
        assert_eq!(sub.data.edge_dst, vec![1, 2, 0, 1, 1]);
        let parts = vec![vec![3, 2, 1], vec![0, 5, 4]];
        let many = induced_subgraphs(&g, &parts);
        assert_eq!(many[0], sub);
        assert_eq!(many[1], induced_subgraph(&g, &parts[1]));
        let all = induced_subgraph(&g, &(0..6).collect::<Vec<_>>());
        assert_eq!(all, whole_graph(&g));
    }

    #[test]
    #[should_panic(expected = "listed twice")]
    fn induced_subgraph_rejects_duplicates() {
        induced_subgraph(&toy(), &[1, 1]);
    }

    #[test]
    fn partition_sizes_follow_pyg() {
        let g = toy();
        let mut l = RandomNodeLoader::new(4, false, 0).unwrap();
        assert_eq!(l.parts(&g).unwrap(), vec![vec![0, 1], vec![2, 3], vec![4, 5]]);
        let mut l = RandomNodeLoader::new(1, false, 0).unwrap();
        assert_eq!(l.parts(&g).unwrap(), vec![vec![0, 1, 2, 3, 4, 5]]);
        let mut l = RandomNodeLoader::new(4, false, 0).unwrap();
        assert_eq!(l.parts_for(10).unwrap().iter().map(|p| p.len()).collect::<Vec<_>>(), vec![3, 3, 3, 1]);
        let mut l = RandomNodeLoader::new(6, false, 0).unwrap();
        assert_eq!(l.parts_for(10).unwrap().len(), 5);
        let mut l = RandomNodeLoader::new(3, true, 9).unwrap();
        let parts = l.parts_for(100).unwrap();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), vec![34, 34, 32]);
        let mut all: Vec<usize> = parts.concat();
        all.sort_unstable();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn shuffle_is_deterministic_by_seed_and_changes_per_epoch() {
        let mut a = RandomNodeLoader::new(3, true, 42).unwrap();
        let mut b = RandomNodeLoader::new(3, true, 42).unwrap();
        let mut c = RandomNodeLoader::new(3, true, 43).unwrap();
        let a1 = a.parts_for(50).unwrap();
        assert_eq!(a1, b.parts_for(50).unwrap());
        assert_ne!(a1, c.parts_for(50).unwrap());
        let a2 = a.parts_for(50).unwrap();
        assert_ne!(a1, a2);
        assert_eq!(a2, b.parts_for(50).unwrap());
    }

    #[test]
    fn loader_errors_name_the_numbers() {
        let e = RandomNodeLoader::new(0, true, 0).unwrap_err();
        assert!(e.message().contains("got 0"), "{e}");
        let mut l = RandomNodeLoader::new(7, true, 0).unwrap();
        let e = l.parts(&toy()).unwrap_err();
        assert!(e.message().contains("num_parts = 7") && e.message().contains("(6)"), "{e}");
        assert!(fixed_sizes(&toy(), 7).is_err());
        assert!(fixed_sizes(&toy(), 0).is_err());
    }

    #[test]
    fn padding_adds_isolated_nodes_and_self_loop_edges() {
        let g = toy();
        let sub = induced_subgraph(&g, &[3, 2, 1]);
        let b = pad_fixed(sub.clone(), 5, 8).unwrap();
        assert_eq!((b.num_real_nodes, b.num_real_edges), (3, 5));
        assert_eq!(b.sub.data.num_nodes, 5);
        assert_eq!(b.sub.data.x.nrows, 5);
        assert_eq!(b.sub.data.x.to_dense()[6..], [0.0; 4]);
        assert_eq!(b.sub.data.y, vec![0, 2, 1, 0, 0]);
        assert_eq!(b.sub.data.train_mask, vec![false, false, true, false, false]);
        assert_eq!(b.sub.data.val_mask[3..], [false, false]);
        assert_eq!(b.sub.data.test_mask[3..], [false, false]);
        assert_eq!(b.sub.node_ids, vec![3, 2, 1, PADDING_NODE_ID, PADDING_NODE_ID]);
        assert_eq!(b.sub.data.edge_src, vec![2, 1, 1, 0, 1, 4, 4, 4]);
        assert_eq!(b.sub.data.edge_dst, vec![1, 2, 0, 1, 1, 4, 4, 4]);
        assert_eq!(b.node_mask, vec![true, true, true, false, false]);
        assert_eq!(b.edge_mask, vec![true, true, true, true, true, false, false, false]);
        // Padding does not change what real rows aggregate.
        let a_real = sub.mean_adjacency().to_dense();
        let a_pad = b.sub.mean_adjacency().to_dense();
        for r in 0..3 {
            assert_eq!(a_pad[r * 5..r * 5 + 3], a_real[r * 3..r * 3 + 3]);
            assert_eq!(a_pad[r * 5 + 3..r * 5 + 5], [0.0, 0.0]);
        }
        assert_eq!(a_pad[20..25], [0.0, 0.0, 0.0, 0.0, 1.0]);
        // Exact fit of edges is fine; nodes always need one padding node.
        assert!(pad_fixed(sub.clone(), 4, 5).is_ok());
        let e = pad_fixed(sub.clone(), 3, 8).unwrap_err();
        assert!(
            e.message().contains("3 nodes")
                && e.message().contains("max_nodes = 3")
                && e.message().contains("at least 4"),
            "{e}"
        );
        let e = pad_fixed(sub, 5, 4).unwrap_err();
        assert!(e.message().contains("5 edges") && e.message().contains("max_edges = 4"), "{e}");
    }

    #[test]
    fn fixed_sizes_fit_every_part() {
        let g = toy();
        let s = fixed_sizes(&g, 2).unwrap();
        assert_eq!(s.max_nodes, 4);
        // B = 3; in-degrees are 2,2,3,2,2,2 -> top three sum to 7.
        assert_eq!(s.max_edges, 7);
        let mut l = RandomNodeLoader::new(2, true, 1).unwrap();
        for _ in 0..20 {
            for sub in l.subgraphs(&g).unwrap() {
                pad_fixed(sub, s.max_nodes, s.max_edges).unwrap();
            }
        }
        let whole = fixed_sizes(&g, 1).unwrap();
        assert_eq!(whole, FixedSizes { max_nodes: 7, max_edges: 13 });
        let parts = vec![vec![0, 1, 2], vec![3, 4, 5]];
        assert_eq!(fixed_sizes_from_parts(&g, &parts), FixedSizes { max_nodes: 4, max_edges: 5 });
        let l = RandomNodeLoader::new(2, false, 0).unwrap();
        assert_eq!(fixed_sizes_for_epochs(&g, &l, 10).unwrap(), FixedSizes { max_nodes: 4, max_edges: 5 });
    }

    #[test]
    fn fixed_sizes_for_epochs_is_exact_for_those_epochs() {
        let g = toy();
        let loader = RandomNodeLoader::new(3, true, 11).unwrap();
        let s = fixed_sizes_for_epochs(&g, &loader, 25).unwrap();
        let mut l = loader.clone();
        let mut tight = FixedSizes { max_nodes: 0, max_edges: 0 };
        for _ in 0..25 {
            let parts = l.parts(&g).unwrap();
            let f = fixed_sizes_from_parts(&g, &parts);
            tight.max_nodes = tight.max_nodes.max(f.max_nodes);
            tight.max_edges = tight.max_edges.max(f.max_edges);
            for sub in induced_subgraphs(&g, &parts) {
                pad_fixed(sub, s.max_nodes, s.max_edges).unwrap();
            }
        }
        assert_eq!(s, tight);
        assert!(s.max_edges <= fixed_sizes(&g, 3).unwrap().max_edges);
    }

    #[test]
    fn csr_arrays_from_outside_are_checked() {
        assert!(check_csr("x", 2, 3, &[0, 1, 3], &[0, 2, 1], 3).is_ok());
        let e = |r: Result<()>| r.unwrap_err().to_string();
        assert_eq!(e(check_csr("x", 2, 3, &[0, 1], &[0], 1)), "x: indptr has 2 entries, a 2-row matrix needs 3");
        assert_eq!(e(check_csr("x", 2, 3, &[1, 1, 1], &[0], 1)), "x: indptr[0] is 1, not 0");
        assert_eq!(e(check_csr("x", 2, 3, &[0, 2, 1], &[0], 1)), "x: indptr decreases at 2: 2 then 1");
        assert_eq!(e(check_csr("x", 2, 3, &[0, 1, 2], &[0], 1)), "x: indptr ends at 2, but there are 1 indices");
        assert_eq!(e(check_csr("x", 2, 3, &[0, 1, 1], &[0], 2)), "x: 2 values for 1 indices");
        assert_eq!(
            e(check_csr("x", 2, 3, &[0, 1, 2], &[0, 3], 2)),
            "x: indices[1] = 3 is not a column of a matrix of 3 columns"
        );
        assert!(e(check_csr("x", 1, 3, &[0, 1], &[-1], 1)).contains("indices[0] = -1"));
    }

    #[test]
    fn padded_loader_gives_one_size_for_every_part_and_stops_after_its_epochs() {
        let g = toy();
        let mut l = PaddedLoader::new(&g, RandomNodeLoader::new(2, true, 3).unwrap(), Some(4)).unwrap();
        let s = l.sizes;
        for _ in 0..4 {
            let parts = l.next_epoch(&g).unwrap();
            assert_eq!(parts.len(), 2);
            for p in &parts {
                assert_eq!((p.sub.data.num_nodes, p.sub.num_edges()), (s.max_nodes, s.max_edges));
                let [ip, ix, v] = p.x().tensors().unwrap();
                assert_eq!(
                    (ip.shape(), ix.shape(), v.shape()),
                    (&[s.max_nodes + 1][..], &[l.x_capacity][..], &[l.x_capacity][..])
                );
                let [ip, ix, _] = p.mean_adjacency().tensors().unwrap();
                assert_eq!((ip.shape(), ix.shape()), (&[s.max_nodes + 1][..], &[s.max_edges][..]));
                assert_eq!(p.gcn_adjacency().capacity, s.max_edges + s.max_nodes);
                p.gcn_adjacency().tensors().unwrap();
                assert_eq!(p.num_train(), p.sub.data.train_mask.iter().filter(|&&m| m).count());
            }
        }
        // Three features at most per part of three nodes (one per node in the toy graph).
        assert_eq!(l.x_capacity, 3);
        let e = l.next_epoch(&g).unwrap_err().to_string();
        assert!(e.contains("computed for 4 epochs"), "{e}");
        let mut any = PaddedLoader::new(&g, RandomNodeLoader::new(2, true, 3).unwrap(), None).unwrap();
        assert_eq!(any.sizes, fixed_sizes(&g, 2).unwrap());
        for _ in 0..10 {
            any.next_epoch(&g).unwrap();
        }
        let p = Part::exact(induced_subgraph(&g, &[0, 1, 2]));
        assert_eq!((p.x_capacity, p.edge_capacity, p.num_real_nodes), (3, 5, 3));
        assert_eq!(max_row_nnz_sum(&g.x, 100), 6);
    }

    #[test]
    fn mean_adjacency_averages_in_neighbours() {
        // 0->2, 1->2, 1->2 (duplicate), 2->0; node 1 has no in-edges.
        let a = mean_adjacency(3, &[0, 1, 1, 2], &[2, 2, 2, 0]);
        let d = a.to_dense();
        assert_eq!(d[0..3], [0.0, 0.0, 1.0]);
        assert_eq!(d[3..6], [0.0, 0.0, 0.0]);
        assert!((d[6] - 1.0 / 3.0).abs() < 1e-7 && (d[7] - 2.0 / 3.0).abs() < 1e-7 && d[8] == 0.0);
    }
}

/// GCN's normalised adjacency `D^-1/2 (A + I) D^-1/2` (PyG `gcn_norm` with
/// `add_remaining_self_loops`): the self-loops of the edge list are dropped and every node
/// gets exactly one (so a node with two loops has one, as in PyG); row `i` (a target) holds
/// `1 / sqrt(deg(i) deg(j))` for every edge `j -> i`, where `deg` counts in-edges including
/// the self loop. A repeated edge that is not a loop counts each time.
pub fn gcn_adjacency(num_nodes: usize, edge_src: &[u32], edge_dst: &[u32]) -> CsrMatrix {
    assert_eq!(edge_src.len(), edge_dst.len(), "gcn_adjacency: src and dst lengths differ");
    let (mut src, mut dst): (Vec<u32>, Vec<u32>) =
        edge_src.iter().zip(edge_dst).filter(|(s, d)| s != d).map(|(&s, &d)| (s, d)).unzip();
    src.extend(0..num_nodes as u32);
    dst.extend(0..num_nodes as u32);
    let mut deg = vec![0f32; num_nodes];
    for &d in &dst {
        deg[d as usize] += 1.0;
    }
    let vals: Vec<f32> =
        src.iter().zip(&dst).map(|(&s, &d)| 1.0 / (deg[s as usize] * deg[d as usize]).sqrt()).collect();
    CsrMatrix::from_triplets(num_nodes, num_nodes, &dst, &src, &vals)
}

#[cfg(test)]
mod gcn_tests {
    use super::*;

    #[test]
    fn gcn_adjacency_matches_hand_computation() {
        // 0 -> 1, 1 -> 0, 2 -> 1; self loops added on all three.
        let a = gcn_adjacency(3, &[0, 1, 2], &[1, 0, 1]).to_dense();
        // deg: node0 = 2 (1->0, loop), node1 = 3 (0->1, 2->1, loop), node2 = 1 (loop)
        let want = [0.5, 1.0 / 6f32.sqrt(), 0.0, 1.0 / 6f32.sqrt(), 1.0 / 3.0, 1.0 / 3f32.sqrt(), 0.0, 0.0, 1.0];
        for (g, w) in a.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{a:?}");
        }
    }
}
