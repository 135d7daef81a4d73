"""Triage for a check-export gradient failure: is it a ReLU kink that float32 rounding decides?

A ReLU's gradient jumps at 0. Where the float64 run has a ReLU input within float32 rounding of
0, the engine's float32 run may land on the other side than PyTorch's float32 run does (each
sums in its own order), and every gradient upstream of that ReLU then differs from PyTorch's by
that element's whole gradient: a difference of conditioning, not an error of either. This
script runs a case's exported model in float64 (as scripts/check_export.py does), lists the ReLU
inputs (F.relu) within `--near` of 0, and for each reruns the float64 step with that one
element's mask flipped, printing the engine's largest gradient error against float64 both ways
beside PyTorch float32's own. A flip that brings the engine down to PyTorch float32's level is
the kink the engine decided the other way.

Usage: python scripts/relu_kinks.py CASE_DIR [--near 1e-6]
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_export import load_module, run_step  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--near", type=float, default=1e-6)
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.case, "case.json")))
    ref = load_file(os.path.join(a.case, "reference.safetensors"))
    mod = load_module(os.path.join(a.case, "model.py"), "case_model")
    relu = F.relu
    state = {"call": 0, "flip": None, "near": []}

    def kinked_relu(x, *args, **kwargs):
        call, state["call"] = state["call"], state["call"] + 1
        if not x.requires_grad or x.dtype != torch.float64:
            return relu(x, *args, **kwargs)
        for idx in (x.detach().abs() < a.near).nonzero().tolist():
            state["near"].append((call, tuple(idx), float(x.detach()[tuple(idx)])))
        mask = (x.detach() > 0).to(x.dtype)
        if state["flip"] is not None and state["flip"][0] == call:
            mask[state["flip"][1]] = 1 - mask[state["flip"][1]]
        return x * mask  # value within `near` of relu(x); gradient the (flipped) mask

    mod.F.relu = kinked_relu

    def grads(double, flip=None):
        state.update(call=0, flip=flip, near=[])
        return {n: g.detach().double() for n, g in run_step(mod, meta, ref, double)[2].items()}

    g32 = grads(False)
    g64 = grads(True)
    near = list(state["near"])
    engine = {n: ref[f"grad.{n}"].double() for n in g64}

    def worst(g):
        """The parameter whose gradient the engine is furthest from `g` in, relative to
        PyTorch float32's own distance from `g`, with the engine's and PyTorch's errors."""
        rows = []
        for n in g:
            own = float((g32[n] - g64[n]).abs().max())
            rows.append((float((engine[n] - g[n]).abs().max()) / max(own, 1e-30), n, float((engine[n] - g[n]).abs().max()), own))
        return max(rows)

    r, n, e, own = worst(g64)
    print(f"float64 as is: worst {n}: engine off by {e:.2e}, PyTorch float32 by {own:.2e} ({r:.0f}x)")
    if not near:
        print(f"no ReLU input within {a.near:g} of 0")
    for call, idx, v in near:
        r, n, e, own = worst(grads(True, (call, idx)))
        print(f"ReLU call {call} input {idx} = {v:.3e} flipped: worst {n}: engine off by {e:.2e}, PyTorch float32 by {own:.2e} ({r:.0f}x)")


if __name__ == "__main__":
    main()
