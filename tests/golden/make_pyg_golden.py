#!/usr/bin/env python3
"""Generate PyTorch Geometric golden fixtures for the GNN modules called as PyG calls them.

Run by hand from the repository root (the venv of tests/golden/README.md, plus PyG):

    .venv-peers/bin/pip install torch-geometric
    .venv-peers/bin/python tests/golden/make_pyg_golden.py

Writes tests/golden/pyg/convs.json: `{"cases": [case, ...]}`, one case per line. A case is a
module of PyG (`SAGEConv`, `GCNConv`, `GroupAddRev` of SAGEConvs) with its constructor
arguments (`module`, `args`), its parameters under PyG's `state_dict` names (`params`), the
inputs `x` (float32) and `edge_index` (int32 `[2, E]`, PyG's `conv(x, edge_index)`), the
output `out`, a random `grad_output` and the gradients of `sum(out * grad_output)` with
respect to `x` and to every parameter (`grads`, by name). The graphs have duplicate edges,
self-loops and nodes that receive no message, so PyG's treatment of each is pinned down.

Precision and determinism as make_golden.py: data drawn in float32 from a generator seeded by
a CRC32 of the case's name, computed by PyG in float64 from those exact values, stored rounded
to float32 (as the repr of the float32 value widened to f64).
"""

import json
import os
import zlib

import numpy as np
import torch
from torch_geometric.nn import GCNConv, GroupAddRev, SAGEConv

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyg", "convs.json")

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)


def f32(t):
    return {"shape": list(t.shape), "dtype": "float32",
            "data": [float(v) for v in t.detach().to(torch.float32).to(torch.float64).reshape(-1).tolist()]}


def i32(t):
    return {"shape": list(t.shape), "dtype": "int32", "data": [int(v) for v in t.reshape(-1).tolist()]}


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def draw(rng, *shape):
    """float32 values in [-1, 1), as a float64 tensor holding them exactly."""
    return torch.from_numpy(rng.uniform(-1, 1, size=shape).astype(np.float32)).to(torch.float64)


def graph(rng, nodes, edges, loops, duplicates, isolated, loop_copies=0):
    """A random edge_index with `loops` self-loops (the first repeated `loop_copies` more
    times), `duplicates` repeated edges and the node `isolated` (if not None) receiving no
    message."""
    targets = [n for n in range(nodes) if n != isolated]
    src = list(rng.integers(0, nodes, size=edges))
    dst = list(rng.choice(targets, size=edges))
    for k in range(loops):
        n = targets[k % len(targets)]
        src.append(n)
        dst.append(n)
    for k in range(duplicates):
        src.append(src[k])
        dst.append(dst[k])
    for _ in range(loop_copies):
        src.append(targets[0])
        dst.append(targets[0])
    order = rng.permutation(len(src))
    return torch.tensor([[src[i] for i in order], [dst[i] for i in order]], dtype=torch.int64)


def case(name, module, args, make, nodes, channels, edges, loops, duplicates, isolated, loop_copies=0):
    rng = rng_for(name)
    torch.manual_seed(zlib.crc32(name.encode()))
    m = make().double()
    params = {}
    with torch.no_grad():
        for key, p in m.named_parameters():
            p.copy_(draw(rng, *p.shape))
            params[key] = p.detach().clone()
    x = draw(rng, nodes, channels).requires_grad_(True)
    x_value = x.detach().clone()  # GroupAddRev frees its input's storage in the forward
    edge_index = graph(rng, nodes, edges, loops, duplicates, isolated, loop_copies)
    out = m(x, edge_index)
    out_value = out.detach().clone()  # and its output's, in the backward
    g = draw(rng, *out.shape)
    (out * g).sum().backward()
    grads = {"x": f32(x.grad)}
    grads.update({k: f32(p.grad) for k, p in m.named_parameters()})
    return {
        "name": name,
        "module": module,
        "args": args,
        "params": {k: f32(v) for k, v in params.items()},
        "x": f32(x_value),
        "edge_index": i32(edge_index),
        "out": f32(out_value),
        "grad_output": f32(g),
        "grads": grads,
    }


def main():
    cases = [
        case("sage_small", "SAGEConv", {"in": 4, "out": 3}, lambda: SAGEConv(4, 3),
             nodes=6, channels=4, edges=9, loops=1, duplicates=2, isolated=5),
        case("sage_random", "SAGEConv", {"in": 5, "out": 7}, lambda: SAGEConv(5, 7),
             nodes=20, channels=5, edges=60, loops=3, duplicates=5, isolated=0),
        case("sage_sum", "SAGEConv", {"in": 4, "out": 3, "aggr": "sum"}, lambda: SAGEConv(4, 3, aggr="sum"),
             nodes=6, channels=4, edges=9, loops=1, duplicates=2, isolated=5),
        case("gcn_small", "GCNConv", {"in": 4, "out": 3}, lambda: GCNConv(4, 3),
             nodes=6, channels=4, edges=9, loops=1, duplicates=2, isolated=5),
        case("gcn_loops", "GCNConv", {"in": 3, "out": 2}, lambda: GCNConv(3, 2),
             nodes=7, channels=3, edges=10, loops=4, duplicates=3, isolated=None, loop_copies=2),
        case("gcn_random", "GCNConv", {"in": 5, "out": 7}, lambda: GCNConv(5, 7),
             nodes=20, channels=5, edges=60, loops=3, duplicates=5, isolated=0),
        case("group_add_rev_sage", "GroupAddRev", {"conv": "SAGEConv", "in": 2, "out": 2, "num_groups": 2},
             lambda: GroupAddRev(SAGEConv(2, 2), num_groups=2),
             nodes=8, channels=4, edges=16, loops=1, duplicates=2, isolated=3),
        case("group_add_rev_sage_3", "GroupAddRev", {"conv": "SAGEConv", "in": 2, "out": 2, "num_groups": 3},
             lambda: GroupAddRev(SAGEConv(2, 2), num_groups=3),
             nodes=8, channels=6, edges=16, loops=2, duplicates=2, isolated=None),
    ]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write('{"cases": [\n')
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n]}\n")
    for c in cases:
        print(f"{c['name']}: {c['module']} {c['args']}, {len(c['edge_index']['data']) // 2} edges, "
              f"{len(c['params'])} parameters")


if __name__ == "__main__":
    main()
