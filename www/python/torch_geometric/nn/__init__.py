"""`torch_geometric.nn`: SAGEConv, GCNConv and GroupAddRev, the package's own."""
import _ipu
from torch.nn import _Builtin, _builtin


@_builtin("SAGEConv")
class SAGEConv(_Builtin):
    """`SAGEConv(in_channels, out_channels, aggr="mean")`: PyG's, with the aggregations the
    package has (its SAGEConv says which: "mean", "sum" or its alias "add"; on a sparse
    adjacency "mean" takes it as the mean-aggregation adjacency, "sum" multiplies by it, as
    PyG's "sum" on `adj_t`)."""

    def __init__(self, in_channels, out_channels, aggr="mean", normalize=False, root_weight=True, project=False,
                 bias=True, **_):
        for name, value, default in (("normalize", normalize, False), ("root_weight", root_weight, True),
                                     ("project", project, False), ("bias", bias, True)):
            if value != default:
                raise ValueError(f"SAGEConv: {name}={value!r} is not in this engine: it has PyG's default {name}={default!r}")
        super().__init__(in_channels, out_channels, _ipu.options(aggr=aggr))


@_builtin("GCNConv")
class GCNConv(_Builtin):
    def __init__(self, in_channels, out_channels, **_):
        super().__init__(in_channels, out_channels)


@_builtin("GroupAddRev")
class GroupAddRev(_Builtin):
    """`GroupAddRev(conv, num_groups=2, split_dim=-1, disable=False)`: the package copies
    `conv` for the other groups, with fresh parameters (PyG's deepcopy + reset_parameters)."""

    def __init__(self, conv, split_dim=-1, num_groups=None, disable=False, num_bwd_passes=1):
        super().__init__(conv, _ipu.options(num_groups=num_groups, split_dim=split_dim, disable=disable))
