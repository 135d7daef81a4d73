//! Graph datasets, transforms and loaders.
//!
//! Everything here mirrors PyTorch Geometric (PyG) closely enough that counts, splits and
//! batches agree with what PyG produces from the same files:
//!
//! * [`pickle`]: a small, strict reader for the Python 2 pickles the Planetoid raw files
//!   are stored in (numpy arrays, scipy CSR matrices, a `defaultdict` adjacency list). No
//!   Python code is ever run: only a fixed set of opcodes and globals is understood, and
//!   anything else is an error naming the file, byte offset and opcode.
//! * [`graph`]: [`GraphData`], the graph (PyG `Data`) that datasets, transforms and
//!   loaders share; a loader's [`Subgraph`] is one plus the original node ids.
//! * [`numpy`]: the numpy arrays, scipy CSR matrices and adjacency dicts of those pickles,
//!   read from the pickle machine's generic tree.
//! * [`planetoid`]: Cora, CiteSeer and PubMed assembled exactly as PyG's
//!   `read_planetoid_data` + `Planetoid(split=…)` do, from a directory (native) or from
//!   fetched bytes (wasm), through the same code.
//! * [`transforms`]: `AddSelfLoops`, `NormalizeFeatures`, `ToUndirected`, and the
//!   `coalesce` / `remove_self_loops` utilities they are built on.
//! * [`dataset`]: the one entry point, [`planetoid`]: a dataset from a directory or bytes,
//!   its split and transforms, configured by [`PlanetoidOptions`] (serde, camelCase JSON).
//! * [`loader`]: `RandomNodeLoader` partitions, induced subgraphs (PyG `Data.subgraph`),
//!   fixed-size padding for a compiled (IPU-style) static shape ([`PaddedLoader`]: every
//!   part in one size), and the mean-aggregation adjacency that `SAGEConv(aggr="mean")`
//!   uses.

pub mod dataset;
pub mod graph;
pub mod loader;
pub mod numpy;
pub mod pickle;
pub mod planetoid;
pub mod transforms;

pub use dataset::{planetoid, PlanetoidOptions, Source, SplitName, Transform};
pub use graph::GraphData;
pub use loader::{
    check_csr, fixed_sizes, fixed_sizes_for_epochs, fixed_sizes_from_parts, gcn_adjacency, induced_subgraph,
    induced_subgraphs, max_row_nnz_sum, mean_adjacency, pad_fixed, whole_graph, FixedSizeBatch, FixedSizes, PaddedCsr,
    PaddedLoader, Part, RandomNodeLoader, Subgraph, PADDING_NODE_ID,
};
pub use planetoid::{
    load_planetoid_bytes, load_planetoid_dir, load_planetoid_raw, PlanetoidRaw, Split, PLANETOID_FILES, PLANETOID_NAMES,
};
pub use transforms::{add_self_loops, normalize_features, to_undirected};
