//! The GNN stack: datasets, transforms, loaders, layers and models, built on the same ops
//! as every other model.

pub mod data;

pub mod nn;
pub mod pyg;
pub mod train;
