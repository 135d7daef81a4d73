#!/usr/bin/env python3
"""Generate optimizer golden fixtures: parameters after each of several steps.

Run by hand from the repository root (see tests/golden/README.md):

    .venv-golden/bin/python tests/golden/make_optim_golden.py

Writes tests/golden/optim/optim.json, `{"cases": [case, ...]}`. A case is
`{name, optimizer, args, param, grads, after}`: `optimizer` is the PopTorch class
name (SGD, Adam, AdamW, RMSprop, LAMB), `args` the keyword arguments given to it
(PopTorch's names), `param` the initial float32 parameter, `grads` one float32
gradient per step and `after[k]` the parameter after step k+1.

SGD, Adam, AdamW and RMSprop run through torch.optim (in float64 from the exact
float32 inputs, results rounded to float32; each case is also run in float32
torch as a sanity check). torch has no LAMB and no AdamW without bias
correction: those cases use the numpy reference below, written from the
formula of the LAMB paper (You et al., "Large Batch Optimization for Deep
Learning: Training BERT in 76 minutes", arXiv:1904.00962, Algorithm 2) as
PopTorch's `poptorch.optim.LAMB.step` states it, with phi(z) = min(z,
max_weight_norm):

    m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2
    u = (m/bc1) / (sqrt(v)/sqrt(bc2) + eps) + wd*p     bc_i = 1 - b_i^t (1 if no bias correction)
    r1 = min(||p||, max_weight_norm);  r2 = ||u||
    trust = 1 if r1 == 0 or r2 == 0 else r1/r2
    p -= lr * trust * u

Deterministic: each case draws from a generator seeded with a CRC32 of its name.
"""

import json
import os
import sys
import zlib

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim", "optim.json")
STEPS = 4


def enc(a):
    a = np.asarray(a, dtype=np.float32)
    return {"shape": list(a.shape), "data": [float(x) for x in a.reshape(-1)]}


def lamb_reference(p0, grads, lr, betas, eps, wd, bias_correction, max_weight_norm):
    p = p0.astype(np.float64).copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    b1, b2 = betas
    out = []
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        bc1 = 1 - b1 ** t if bias_correction else 1.0
        bc2 = 1 - b2 ** t if bias_correction else 1.0
        u = (m / bc1) / (np.sqrt(v) / np.sqrt(bc2) + eps) + wd * p
        r1 = min(np.sqrt((p * p).sum()), max_weight_norm)
        r2 = np.sqrt((u * u).sum())
        trust = 1.0 if r1 == 0 or r2 == 0 else r1 / r2
        p = p - lr * trust * u
        out.append(p.astype(np.float32))
    return out


def adamw_no_bias_reference(p0, grads, lr, betas, eps, wd):
    """AdamW (decoupled decay) with the bias corrections fixed at 1."""
    p = p0.astype(np.float64).copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    b1, b2 = betas
    out = []
    for g in grads:
        g = g.astype(np.float64)
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * m / (np.sqrt(v) + eps)
        out.append(p.astype(np.float32))
    return out


TORCH = {
    "SGD": torch.optim.SGD,
    "Adam": torch.optim.Adam,
    "AdamW": torch.optim.AdamW,
    "RMSprop": torch.optim.RMSprop,
}


def run_torch(name, kwargs, p0, grads, dtype):
    p = torch.nn.Parameter(torch.from_numpy(p0.astype(np.float64 if dtype == "f64" else np.float32)))
    opt = TORCH[name]([p], **kwargs)
    out = []
    for g in grads:
        p.grad = torch.from_numpy(g.astype(np.float64 if dtype == "f64" else np.float32))
        opt.step()
        out.append(p.detach().numpy().astype(np.float32))
    return out


CASES = []


def case(name, optimizer, args, shape=(2, 3)):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    p0 = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    grads = [rng.uniform(-1.0, 1.0, size=shape).astype(np.float32) for _ in range(STEPS)]
    if optimizer in TORCH and not (optimizer == "AdamW" and args.get("bias_correction") is False):
        kwargs = {k: (tuple(v) if k == "betas" else v) for k, v in args.items()}
        after = run_torch(optimizer, kwargs, p0, grads, "f64")
        check = run_torch(optimizer, kwargs, p0, grads, "f32")
        for a, b in zip(after, check):
            assert np.allclose(a, b, atol=1e-5, rtol=1e-4), (name, a, b)
    elif optimizer == "AdamW":
        after = adamw_no_bias_reference(p0, grads, args["lr"], tuple(args.get("betas", (0.9, 0.999))),
                                        args.get("eps", 1e-8), args.get("weight_decay", 1e-2))
    else:
        assert optimizer == "LAMB"
        after = lamb_reference(p0, grads, args.get("lr", 1e-3), tuple(args.get("betas", (0.9, 0.999))),
                               args.get("eps", 1e-8), args.get("weight_decay", 1e-2),
                               args.get("bias_correction", True), args.get("max_weight_norm", 65500.0))
    CASES.append({"name": name, "optimizer": optimizer, "args": args, "param": enc(p0),
                  "grads": [enc(g) for g in grads], "after": [enc(a) for a in after]})


def main():
    print(f"torch {torch.__version__}, numpy {np.__version__}, python {sys.version.split()[0]}")
    case("sgd_plain", "SGD", {"lr": 0.1})
    case("sgd_weight_decay", "SGD", {"lr": 0.1, "weight_decay": 0.05})
    case("sgd_momentum", "SGD", {"lr": 0.05, "momentum": 0.9})
    case("sgd_momentum_dampening", "SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.01})
    case("sgd_nesterov", "SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.01})
    case("adam_default", "Adam", {"lr": 0.01})
    case("adam_l2", "Adam", {"lr": 0.01, "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.05})
    case("adamw_default", "AdamW", {"lr": 0.01})
    case("adamw_decay", "AdamW", {"lr": 0.02, "weight_decay": 0.1, "betas": [0.85, 0.95]}, shape=(7,))
    case("adamw_no_bias_correction", "AdamW", {"lr": 0.01, "weight_decay": 0.1, "bias_correction": False})
    case("rmsprop_plain", "RMSprop", {"lr": 0.01})
    case("rmsprop_momentum_l2", "RMSprop", {"lr": 0.01, "momentum": 0.5, "weight_decay": 0.01, "alpha": 0.9})
    case("rmsprop_centered", "RMSprop", {"lr": 0.01, "centered": True})
    case("rmsprop_centered_momentum", "RMSprop", {"lr": 0.005, "centered": True, "momentum": 0.9, "eps": 1e-4})
    case("lamb_default", "LAMB", {"lr": 0.01})
    case("lamb_no_bias_correction", "LAMB", {"lr": 0.01, "bias_correction": False, "weight_decay": 0.0})
    case("lamb_max_weight_norm", "LAMB", {"lr": 0.05, "max_weight_norm": 0.5, "betas": [0.8, 0.9]}, shape=(3, 4))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write('{"cases": [\n')
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in CASES))
        f.write("\n]}\n")
    print(f"{len(CASES)} cases -> {OUT}")


if __name__ == "__main__":
    main()
