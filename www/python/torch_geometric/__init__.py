"""`torch_geometric` for the page's Python: the GNN stack of the package ("ipu-playground")
under PyG's names. A SAGEConv/GCNConv takes PyG's `edge_index` (`data.edge_index`, an int32
[2, E] tensor) or the sparse adjacency PyG's `adj_t` stands for (`data.mean_adjacency()`,
`data.gcn_adjacency()`)."""
from . import nn, datasets, loader, transforms  # noqa: F401
