"""`torch_geometric` for the page's Python: the GNN stack of the package ("ipu-playground")
under PyG's names. Graphs are the package's: a SAGEConv/GCNConv takes the sparse adjacency
(`data.mean_adjacency()`, `data.gcn_adjacency()`) where PyG takes `edge_index`."""
from . import nn, datasets, loader, transforms  # noqa: F401
