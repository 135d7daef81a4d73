//! The GNN stack: datasets, transforms, loaders, layers and models, built on the same ops
//! as every other model.

pub mod data;

pub mod config;
pub mod nn;
pub mod preview;
pub mod pyg;
pub mod train;
