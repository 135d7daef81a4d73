#!/usr/bin/env python3
"""PyG's side of #18's op-by-op comparison: one training epoch of the PubMed RevGNN
peer (../shared/bench/pyg_revgnn.py, its model, data and loader as they are) under
torch.profiler, on one thread by default, after warm-up epochs, and one more epoch recorded
with shapes for the dense products' floating-point work. Prints the epoch's time, the ops by
self CPU time, and the products' GFLOP and rate, to set beside
`node scripts/bench-wasm.mjs --profile` (the engine's ops, one epoch in Chromium) and
`cargo run --release --example rev_gnn -- --profile` (natively).

Usage (from the repository root, with the peers' venv):
  .venv-peers/bin/python -W ignore scripts/pyg_profile.py [--threads 1] [--warmup 2] [--top 25] [--json FILE]
"""
import argparse
import importlib.util
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.join(ROOT, "..", "shared", "bench", "pyg_revgnn.py")

# The ATen ops that are dense matrix products (their self time is the GEMM itself).
DENSE = {"aten::addmm", "aten::mm", "aten::bmm", "aten::matmul"}


def load_peer():
    spec = importlib.util.spec_from_file_location("pyg_revgnn", PEER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=2, help="epochs before the profiled one")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--dataset", default="PubMed")
    p.add_argument("--json", default=None)
    a = p.parse_args()

    peer = load_peer()
    args = peer.parse_args(["--dataset", a.dataset, "--threads", str(a.threads),
                            "--raw-dir", os.path.join(ROOT, "data")])
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile
    from torch_geometric.loader import RandomNodeLoader

    threads = peer.set_threads(args.threads)
    torch.manual_seed(args.seed)
    dataset, data, _ = peer.load_data(args)
    model = peer.build_model(args, dataset.num_features, dataset.num_classes, args.layers, args.mode)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loader = RandomNodeLoader(data, num_parts=args.num_parts, shuffle=True)

    def epoch():
        model.train()
        for batch in loader:
            opt.zero_grad()
            m = batch.train_mask
            loss = F.cross_entropy(model(batch.x, batch.edge_index)[m], batch.y[m])
            loss.backward()
            opt.step()

    for _ in range(a.warmup):
        epoch()
    plain = time.perf_counter()
    epoch()
    plain = time.perf_counter() - plain
    # The times from a profile that records no shapes (recording them costs more than some
    # ops); the products' floating-point work from a second epoch that does (same shapes).
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        epoch()
        profiled = time.perf_counter() - t0
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as counted:
        epoch()

    ops = {}
    for e in prof.key_averages():
        s = ops.setdefault(e.key, {"calls": 0, "self_s": 0.0, "flops": 0})
        s["calls"] += e.count
        s["self_s"] += e.self_cpu_time_total / 1e6
    for e in counted.key_averages():
        if e.key in ops:
            ops[e.key]["flops"] += e.flops or 0
    total_self = sum(s["self_s"] for s in ops.values())
    dense_s = sum(ops[k]["self_s"] for k in ops if k in DENSE)
    dense_flops = sum(ops[k]["flops"] for k in ops if k in DENSE)
    print(f"[pyg profile] {dataset.name} RevGNN {args.layers} x {args.hidden}, {args.num_parts} parts, "
          f"threads={threads}, torch {torch.__version__}: epoch {plain:.3f} s unprofiled, {profiled:.3f} s profiled "
          f"(self time of all ops {total_self:.3f} s)")
    for name, s in sorted(ops.items(), key=lambda kv: -kv[1]["self_s"])[: a.top]:
        print(f"[pyg profile]   {name:34s} {s['calls']:7d} calls {s['self_s']:8.3f}s "
              f"{s['self_s'] / max(s['calls'], 1) * 1e6:8.1f} us/call")
    if dense_s > 0:
        print(f"[pyg profile] dense products ({', '.join(sorted(DENSE))}): {dense_s:.3f} s, "
              f"{dense_flops / 1e9:.1f} GFLOP, {dense_flops / dense_s / 1e9:.1f} GFLOP/s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"epoch_s": plain, "profiled_epoch_s": profiled, "threads": threads, "ops": ops,
                       "dense_s": dense_s, "dense_flops": dense_flops}, f)


if __name__ == "__main__":
    sys.exit(main())
