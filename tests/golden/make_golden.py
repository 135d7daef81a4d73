#!/usr/bin/env python3
"""Generate PyTorch golden fixtures (forward + backward) for every IR op.

Run by hand from the repository root:

    .venv-peers/bin/python tests/golden/make_golden.py

Writes tests/golden/ops/<family>.json, each `{"cases": [case, ...]}`; see
tests/golden/README.md for the case format. Output is deterministic: every
case draws its random data from a generator seeded by a CRC32 of its name, so
adding or reordering cases never changes the data of the others.

Precision: float32 inputs are drawn in float32, then the forward and the
backward are computed by torch in float64 from those exact float32 values, and
every float result is stored rounded to float32. Float16 cases are computed
natively in float16 (that is what they test) and are forward-only. As a sanity
check each float32 case is also run in plain float32 torch and compared.
"""

import json
import math
import os
import sys
import warnings
import zlib

import numpy as np
import torch
import torch.nn.functional as F

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops")

torch.use_deterministic_algorithms(True)
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
torch.set_num_threads(1)


# --------------------------------------------------------------------------
# Encoding helpers
# --------------------------------------------------------------------------

def _float_json(v):
    """A float as a JSON value: exact number, or "inf"/"-inf"/"nan"."""
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v  # json uses repr(): shortest string that round-trips the f64


def encode(arr, dtype):
    """Encode a numpy array as {"shape", "dtype", "data"} (row-major)."""
    arr = np.asarray(arr)
    shape = list(arr.shape)
    flat = arr.reshape(-1)
    if dtype == "float32":
        f = flat.astype(np.float32)
        if not np.all(np.isfinite(f)):
            raise ValueError("non-finite float32 value in a fixture")
        # float(np.float32) is the exact f32 value as an f64; repr of it parses
        # back to exactly that f32 (also via f64-then-round).
        data = [_float_json(x) for x in f]
    elif dtype == "float16":
        data = [_float_json(x) for x in flat.astype(np.float16)]
    elif dtype == "int32":
        i = flat.astype(np.int64)
        assert np.all(i >= -(2 ** 31)) and np.all(i < 2 ** 31)
        data = [int(x) for x in i]
    elif dtype == "bool":
        data = [bool(x) for x in flat]
    else:
        raise ValueError(dtype)
    return {"shape": shape, "dtype": dtype, "data": data}


def dtype_of_np(arr):
    k = np.asarray(arr).dtype
    if k == np.float32:
        return "float32"
    if k == np.float16:
        return "float16"
    if k == np.int32:
        return "int32"
    if k == np.bool_:
        return "bool"
    raise ValueError(f"unsupported input dtype {k}")


def torch_out_dtype(t):
    if t.dtype in (torch.float64, torch.float32):
        return "float32"
    if t.dtype == torch.float16:
        return "float16"
    if t.dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        return "int32"
    if t.dtype == torch.bool:
        return "bool"
    raise ValueError(t.dtype)


def to_np(t):
    t = t.detach().cpu()
    if t.dtype == torch.float64:
        return t.numpy().astype(np.float32)  # round-to-nearest
    return t.numpy()


# --------------------------------------------------------------------------
# Case construction
# --------------------------------------------------------------------------

class Inp:
    """One case input: a numpy array plus whether it requires grad."""

    def __init__(self, arr, requires_grad=None):
        self.arr = np.asarray(arr)
        kind = dtype_of_np(self.arr)
        if requires_grad is None:
            requires_grad = kind == "float32"
        if requires_grad and kind != "float32":
            raise ValueError("only float32 inputs take grads in these fixtures")
        self.requires_grad = requires_grad
        self.dtype = kind


def _to_torch(inp, compute):
    a = inp.arr
    if inp.dtype == "float32":
        t = torch.from_numpy(a.astype(np.float64 if compute == "f64" else np.float32).copy())
        if inp.requires_grad:
            t.requires_grad_(True)
        return t
    if inp.dtype == "float16":
        return torch.from_numpy(a.copy())
    if inp.dtype == "int32":
        return torch.from_numpy(a.astype(np.int64))  # torch index ops want int64
    if inp.dtype == "bool":
        return torch.from_numpy(a.copy())
    raise ValueError(inp.dtype)


FILES = {}  # family -> list of cases
NAMES = set()
SEEN_OPS = {}


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def add_case(family, name, op, attrs, inputs, fn, backward=True, check_f32=True,
             rng=None, diff_outputs=None):
    """Run `fn` on the inputs with torch and record a case.

    fn receives torch tensors (float32 inputs as float64 in the f64 pipeline;
    int32 inputs as int64) and returns a tensor or a tuple/list of tensors.
    `diff_outputs=k` differentiates the first k outputs only (batch norm's batch
    statistics feed the running-statistics update, which has no gradient).
    """
    if name in NAMES:
        raise ValueError(f"duplicate case name {name}")
    NAMES.add(name)
    inputs = [i if isinstance(i, Inp) else Inp(i) for i in inputs]
    rng = rng or rng_for(name + "/grad_output")

    has_f16 = any(i.dtype == "float16" for i in inputs)
    compute = "native" if has_f16 else "f64"
    ts = [_to_torch(i, compute) for i in inputs]
    outs = fn(*ts)
    multi = isinstance(outs, (tuple, list))
    outs = list(outs) if multi else [outs]

    out_enc = [encode(to_np(o), torch_out_dtype(o)) for o in outs]

    diff_idx = [k for k, i in enumerate(inputs) if i.requires_grad]
    float_outs = all(o.dtype == torch.float64 for o in outs)
    do_bwd = backward and diff_idx and float_outs and compute == "f64"

    grad_outputs, grads = [], [None] * len(inputs)
    if do_bwd:
        douts = outs[:diff_outputs] if diff_outputs else outs
        gos32 = [rng.uniform(-1.0, 1.0, size=tuple(o.shape)).astype(np.float32) for o in douts]
        gos = [torch.from_numpy(g.astype(np.float64)) for g in gos32]
        gs = torch.autograd.grad(douts, [ts[k] for k in diff_idx], gos, allow_unused=True)
        for k, g in zip(diff_idx, gs):
            if g is None:
                g = torch.zeros_like(ts[k])
            grads[k] = encode(to_np(g), "float32")
        grad_outputs = [encode(g, "float32") for g in gos32]
        # Finite-difference check in float64: catches cases sitting on a kink.
        gfn = (lambda *a: tuple(fn(*a))[:diff_outputs]) if diff_outputs else (lambda *a: fn(*a))
        if not torch.autograd.gradcheck(gfn, tuple(ts), eps=1e-6, atol=1e-6, rtol=1e-4):
            raise AssertionError(f"{name}: gradcheck failed")
    elif backward and diff_idx and not float_outs:
        # int/bool outputs: nothing to differentiate
        for i in inputs:
            i.requires_grad = False

    # Sanity check: the same function in plain float32 torch agrees.
    if compute == "f64" and check_f32:
        ts32 = [_to_torch(i, "f32") for i in inputs]
        outs32 = fn(*ts32)
        outs32 = list(outs32) if isinstance(outs32, (tuple, list)) else [outs32]
        for o64, o32 in zip(outs, outs32):
            a, b = o64.detach().double(), o32.detach().double()
            if not torch.allclose(a, b, rtol=1e-4, atol=1e-5):
                raise AssertionError(f"{name}: f32 vs f64 forward mismatch\n{a}\n{b}")

    case = {
        "name": name,
        "op": op,
        "attrs": attrs,
        "inputs": [
            dict(encode(i.arr, i.dtype), requires_grad=bool(i.requires_grad and do_bwd))
            for i in inputs
        ],
        "outputs": out_enc,
        "grad_outputs": grad_outputs,
        "grads": grads,
    }
    FILES.setdefault(family, []).append(case)
    SEEN_OPS[op] = SEEN_OPS.get(op, 0) + 1


# Random data helpers (all float32) -----------------------------------------

def U(rng, shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def away_from_zero(rng, shape, lo=0.1, hi=2.0):
    mag = rng.uniform(lo, hi, size=shape)
    sign = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    return (mag * sign).astype(np.float32)


def distinct(rng, shape, lo=-3.0, hi=3.0):
    """Values with pairwise gaps of at least (hi-lo)/n (no ties)."""
    n = int(np.prod(shape)) if len(shape) else 1
    base = np.linspace(lo, hi, n)
    jitter = rng.uniform(-0.2, 0.2, size=n) * (hi - lo) / max(n, 1)
    vals = (base + jitter)[rng.permutation(n)]
    return vals.reshape(shape).astype(np.float32)


def i32(x):
    return np.asarray(x, dtype=np.int32)


def b(x):
    return np.asarray(x, dtype=np.bool_)


# --------------------------------------------------------------------------
# Op families
# --------------------------------------------------------------------------

def gen_elementwise():
    fam = "elementwise"
    binops = {
        "add": torch.add,
        "sub": torch.sub,
        "mul": torch.mul,
        "div": torch.div,
        "pow": torch.pow,
    }
    shapes = [
        ("same", [2, 3], [2, 3]),
        ("broadcast_row", [2, 3], [3]),
        ("broadcast_row_lhs", [3], [2, 3]),
        ("outer", [4, 1], [1, 5]),
        ("rank3", [2, 1, 3], [4, 3]),
        ("scalar_rhs", [2, 3], []),
        ("scalar_lhs", [], [2, 3]),
        ("scalar_both", [], []),
    ]
    for op, f in binops.items():
        for tag, sa, sb in shapes:
            name = f"{op}_{tag}"
            r = rng_for(name)
            if op == "div":
                a, bb = U(r, sa), away_from_zero(r, sb, 0.5, 2.0)
            elif op == "pow":
                a, bb = U(r, sa, 0.5, 2.0), U(r, sb, -2.0, 2.0)
            else:
                a, bb = U(r, sa), U(r, sb)
            add_case(fam, name, op, {}, [a, bb], f)

    unary = {
        "neg": (torch.neg, lambda r, s: U(r, s)),
        "exp": (torch.exp, lambda r, s: U(r, s, -3.0, 3.0)),
        "log": (torch.log, lambda r, s: U(r, s, 0.1, 5.0)),
        "sqrt": (torch.sqrt, lambda r, s: U(r, s, 0.1, 5.0)),
        "relu": (torch.relu, lambda r, s: away_from_zero(r, s, 0.1, 2.0)),
        "tanh": (torch.tanh, lambda r, s: U(r, s, -3.0, 3.0)),
        "sigmoid": (torch.sigmoid, lambda r, s: U(r, s, -5.0, 5.0)),
    }
    for op, (f, gen) in unary.items():
        for tag, s in [("2d", [2, 3]), ("3d", [2, 3, 4]), ("scalar", [])]:
            name = f"{op}_{tag}"
            add_case(fam, name, op, {}, [gen(rng_for(name), s)], f)
    for tag, s in [("2d", [2, 3]), ("3d", [2, 3, 4])]:
        name = f"gelu_erf_{tag}"
        add_case(fam, name, "gelu", {"approximate": "none"},
                 [U(rng_for(name), s, -4.0, 4.0)], lambda x: F.gelu(x, approximate="none"))
    for tag, s in [("2d", [2, 3]), ("3d", [2, 3, 4])]:
        name = f"gelu_tanh_{tag}"
        add_case(fam, name, "gelu", {"approximate": "tanh"},
                 [U(rng_for(name), s, -4.0, 4.0)], lambda x: F.gelu(x, approximate="tanh"))

    # where(cond, a, b)
    for tag, sc, sa, sb in [
        ("same", [2, 3], [2, 3], [2, 3]),
        ("broadcast_cond_col", [2, 1], [2, 3], [3]),
        ("broadcast_scalar_a", [3], [], [2, 3]),
        ("broadcast_rank3", [2, 1, 3], [4, 1], [1, 3]),
    ]:
        name = f"where_{tag}"
        r = rng_for(name)
        cond = r.random(size=sc) < 0.5
        add_case(fam, name, "where", {}, [b(cond), U(r, sa), U(r, sb)], torch.where)


def gen_matmul():
    fam = "matmul"
    for tag, sa, sb in [
        ("2d_2d", [3, 4], [4, 5]),
        ("3d_3d_batched", [2, 3, 4], [2, 4, 5]),
        ("3d_2d_broadcast", [2, 3, 4], [4, 5]),
        ("2d_3d_broadcast", [3, 4], [2, 4, 5]),
        ("4d_3d_batch_broadcast", [2, 1, 3, 4], [3, 4, 2]),
        ("1d_2d", [4], [4, 5]),
        ("2d_1d", [3, 4], [4]),
        ("3d_1d", [2, 3, 4], [4]),
        ("1d_1d_dot", [4], [4]),
    ]:
        name = f"matmul_{tag}"
        r = rng_for(name)
        add_case(fam, name, "matmul", {}, [U(r, sa, -1, 1), U(r, sb, -1, 1)], torch.matmul)

    for tag, sx, out in [("2d", [4, 3], 5), ("3d", [2, 3, 4], 5), ("1d", [3], 2)]:
        name = f"linear_{tag}"
        r = rng_for(name)
        inn = sx[-1]
        add_case(fam, name, "linear", {},
                 [U(r, sx, -1, 1), U(r, [out, inn], -1, 1), U(r, [out], -1, 1)], F.linear)
    for tag, sx, out in [("2d", [4, 3], 2), ("3d", [2, 3, 4], 3)]:
        name = f"linear_no_bias_{tag}"
        r = rng_for(name)
        add_case(fam, name, "linear", {},
                 [U(r, sx, -1, 1), U(r, [out, sx[-1]], -1, 1)], lambda x, w: F.linear(x, w))


def gen_reduction():
    fam = "reduction"
    for op, f in [("sum", torch.sum), ("mean", torch.mean)]:
        for tag, s, dims, keep in [
            ("all", [2, 3, 4], [], False),
            ("all_keepdim", [2, 3], [], True),
            ("dim1_keepdim", [2, 3, 4], [1], True),
            ("dim1", [2, 3, 4], [1], False),
            ("dims_0_2", [2, 3, 4], [0, 2], False),
            ("dims_0_2_keepdim", [2, 3, 4], [0, 2], True),
            ("neg_dim", [3, 5], [-1], False),
            ("1d_all", [5], [], False),
        ]:
            name = f"{op}_{tag}"

            def fn(x, dims=dims, keep=keep, f=f):
                d = list(range(x.dim())) if not dims else dims
                return f(x, dim=d, keepdim=keep)

            add_case(fam, name, op, {"dims": dims, "keepdim": keep},
                     [U(rng_for(name), s)], fn)

    for op in ["max", "argmax"]:
        for tag, s, dim, keep in [
            ("2d_dim1", [3, 4], 1, False),
            ("2d_dim0_keepdim", [3, 4], 0, True),
            ("3d_dim1", [2, 3, 4], 1, False),
            ("3d_neg_dim_keepdim", [2, 3, 4], -1, True),
            ("1d", [6], 0, False),
        ]:
            name = f"{op}_{tag}"
            if op == "max":
                fn = lambda x, dim=dim, keep=keep: torch.max(x, dim=dim, keepdim=keep).values
            else:
                fn = lambda x, dim=dim, keep=keep: torch.argmax(x, dim=dim, keepdim=keep).to(torch.int32)
            add_case(fam, name, op, {"dim": dim, "keepdim": keep},
                     [distinct(rng_for(name), s)], fn)


def gen_softmax():
    fam = "softmax"
    for op, f in [("softmax", torch.softmax), ("log_softmax", torch.log_softmax)]:
        for tag, s, dim in [
            ("2d_dim1", [3, 5], 1),
            ("2d_dim0", [3, 5], 0),
            ("2d_neg1", [3, 5], -1),
            ("3d_dim1", [2, 3, 4], 1),
            ("3d_neg2", [2, 3, 4], -2),
            ("1d", [6], 0),
        ]:
            name = f"{op}_{tag}"
            add_case(fam, name, op, {"dim": dim}, [U(rng_for(name), s, -3, 3)],
                     lambda x, dim=dim, f=f: f(x, dim=dim))


def gen_layer_norm():
    fam = "layer_norm"
    eps = 1e-5
    for tag, sx, ns, affine in [
        ("2d", [4, 6], [6], True),
        ("3d_last", [2, 3, 4], [4], True),
        ("3d_last2", [2, 3, 4], [3, 4], True),
        ("no_affine_2d", [4, 6], [6], False),
        ("no_affine_3d_last2", [2, 3, 4], [3, 4], False),
    ]:
        name = f"layer_norm_{tag}"
        r = rng_for(name)
        x = U(r, sx, -2, 2)
        attrs = {"normalized_shape": ns, "eps": eps}
        if affine:
            w, bb = U(r, ns, 0.5, 1.5), U(r, ns, -0.5, 0.5)
            add_case(fam, name, "layer_norm", attrs, [x, w, bb],
                     lambda x, w, bb, ns=ns: F.layer_norm(x, ns, w, bb, eps))
        else:
            add_case(fam, name, "layer_norm", attrs, [x],
                     lambda x, ns=ns: F.layer_norm(x, ns, None, None, eps))


def gen_conv():
    fam = "conv"
    for tag, sx, sw, bias, stride, padding, dilation, groups in [
        ("3x3_pad1", [2, 3, 5, 5], [4, 3, 3, 3], True, [1, 1], [1, 1], [1, 1], 1),
        ("stride2_nobias", [1, 2, 7, 6], [3, 2, 3, 3], False, [2, 2], [1, 1], [1, 1], 1),
        ("1x1", [2, 4, 3, 3], [5, 4, 1, 1], True, [1, 1], [0, 0], [1, 1], 1),
        ("7x7_stride2_pad3", [1, 3, 9, 9], [2, 3, 7, 7], False, [2, 2], [3, 3], [1, 1], 1),
        ("rect_dilated", [1, 2, 8, 7], [2, 2, 2, 3], True, [2, 1], [0, 2], [2, 1], 1),
        ("groups2", [2, 4, 5, 4], [6, 2, 3, 3], True, [1, 1], [1, 1], [1, 1], 2),
        ("depthwise", [1, 3, 5, 5], [3, 1, 3, 3], False, [1, 1], [1, 1], [1, 1], 3),
    ]:
        name = f"conv2d_{tag}"
        r = rng_for(name)
        x, w = U(r, sx, -1, 1), U(r, sw, -0.5, 0.5)
        attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
        kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
        if bias:
            add_case(fam, name, "conv2d", attrs, [x, w, U(r, [sw[0]], -0.5, 0.5)],
                     lambda x, w, b, kw=kw: F.conv2d(x, w, b, **kw))
        else:
            add_case(fam, name, "conv2d", attrs, [x, w], lambda x, w, kw=kw: F.conv2d(x, w, None, **kw))


def gen_pool():
    fam = "pool"
    for tag, sx, k, stride, padding, dilation, ceil in [
        ("2x2", [1, 2, 4, 6], [2, 2], [2, 2], [0, 0], [1, 1], False),
        ("3x3_s2_p1", [2, 2, 7, 7], [3, 3], [2, 2], [1, 1], [1, 1], False),
        ("ceil", [1, 1, 5, 8], [2, 3], [2, 2], [0, 1], [1, 1], True),
        ("dilated", [1, 2, 7, 6], [2, 2], [1, 2], [1, 0], [2, 2], False),
    ]:
        name = f"max_pool2d_{tag}"
        # Distinct values: no ties, so the gradient is well defined.
        x = distinct(rng_for(name), sx)
        attrs = {"kernel_size": k, "stride": stride, "padding": padding, "dilation": dilation, "ceil_mode": ceil}
        add_case(fam, name, "max_pool2d", attrs, [x],
                 lambda x, k=k, s=stride, p=padding, d=dilation, c=ceil: F.max_pool2d(x, k, s, p, d, c))
    for tag, sx, k, stride, padding, ceil, cip in [
        ("2x2", [1, 2, 4, 6], [2, 2], [2, 2], [0, 0], False, True),
        ("3x3_s2_p1", [2, 2, 7, 7], [3, 3], [2, 2], [1, 1], False, True),
        ("3x3_s2_p1_exclude_pad", [2, 2, 7, 7], [3, 3], [2, 2], [1, 1], False, False),
        ("ceil", [1, 1, 5, 8], [2, 3], [2, 2], [0, 1], True, True),
        ("ceil_exclude_pad", [1, 1, 5, 8], [3, 3], [2, 2], [1, 1], True, False),
    ]:
        name = f"avg_pool2d_{tag}"
        x = U(rng_for(name), sx)
        attrs = {"kernel_size": k, "stride": stride, "padding": padding, "ceil_mode": ceil,
                 "count_include_pad": cip}
        add_case(fam, name, "avg_pool2d", attrs, [x],
                 lambda x, k=k, s=stride, p=padding, c=ceil, i=cip: F.avg_pool2d(x, k, s, p, c, i))
    for tag, sx, out in [
        ("global", [2, 3, 5, 4], [1, 1]),
        ("uneven", [1, 2, 7, 5], [3, 2]),
        ("upsample", [1, 1, 2, 3], [3, 4]),
    ]:
        name = f"adaptive_avg_pool2d_{tag}"
        add_case(fam, name, "adaptive_avg_pool2d", {"output_size": out}, [U(rng_for(name), sx)],
                 lambda x, out=out: F.adaptive_avg_pool2d(x, out))


def gen_batch_norm():
    """Training-mode batch norm over dim 1: outputs y, the batch mean and the unbiased
    batch variance (what the running statistics are updated with); only y is
    differentiated."""
    fam = "batch_norm"
    eps = 1e-5
    for tag, sx, affine in [("4d", [3, 2, 3, 4], True), ("4d_no_affine", [2, 3, 2, 2], False), ("2d", [5, 3], True)]:
        name = f"batch_norm_{tag}"
        r = rng_for(name)
        x = U(r, sx, -2, 2)
        dims = [0] + list(range(2, len(sx)))
        stats = lambda x: (x.mean(dims), x.var(dims, unbiased=True))  # noqa: E731
        attrs = {"eps": eps}
        if affine:
            w, bb = U(r, [sx[1]], 0.5, 1.5), U(r, [sx[1]], -0.5, 0.5)
            add_case(fam, name, "batch_norm", attrs, [x, w, bb],
                     lambda x, w, bb: (F.batch_norm(x, None, None, w, bb, True, 0.1, eps),) + stats(x),
                     diff_outputs=1)
        else:
            add_case(fam, name, "batch_norm", attrs, [x],
                     lambda x: (F.batch_norm(x, None, None, None, None, True, 0.1, eps),) + stats(x),
                     diff_outputs=1)


def gen_dropout():
    fam = "dropout"
    for tag, s, p in [("p05_2d", [3, 4], 0.5), ("p05_3d", [2, 3, 4], 0.5), ("p025_2d", [4, 5], 0.25)]:
        name = f"dropout_{tag}"
        r = rng_for(name)
        x = U(r, s)
        mask = r.random(size=s) >= p

        def fn(x, m, p=p):
            return torch.where(m, x / (1.0 - p), torch.zeros((), dtype=x.dtype))

        add_case(fam, name, "dropout", {"p": p}, [x, b(mask)], fn)


def _ce(reduction, weight=None, masked=False):
    def fn(logits, target, *rest):
        w = None if weight is None else torch.tensor(weight, dtype=logits.dtype)
        if masked:
            m = rest[0]
            if reduction == "none":
                per = F.cross_entropy(logits, target, weight=w, reduction="none")
                return torch.where(m, per, torch.zeros((), dtype=per.dtype))
            return F.cross_entropy(logits[m], target[m], weight=w, reduction=reduction)
        return F.cross_entropy(logits, target, weight=w, reduction=reduction)
    return fn


def gen_loss():
    fam = "loss"
    N, C = 6, 4
    for tag, red, masked, weighted in [
        ("mean_mask", "mean", True, False),
        ("mean_nomask", "mean", False, False),
        ("sum_nomask", "sum", False, False),
        ("sum_mask", "sum", True, False),
        ("none_mask", "none", True, False),
        ("none_nomask", "none", False, False),
        ("mean_class_weight_mask", "mean", True, True),
        ("sum_class_weight_nomask", "sum", False, True),
    ]:
        name = f"cross_entropy_{tag}"
        r = rng_for(name)
        logits = U(r, [N, C], -3, 3)
        target = i32(r.integers(0, C, size=N))
        attrs = {"reduction": red}
        weight = None
        if weighted:
            weight = [float(v) for v in U(r, [C], 0.5, 2.0)]
            attrs["class_weight"] = weight
        inputs = [logits, target]
        if masked:
            mask = np.array([True, False, True, True, False, True])
            inputs.append(b(mask))
        add_case(fam, name, "cross_entropy", attrs, inputs, _ce(red, weight, masked))

    # ignore_index and label_smoothing (F.cross_entropy's own arguments).
    for tag, red, weighted, ignore, smooth in [
        ("ignore_mean", "mean", False, -100, 0.0),
        ("ignore_class_mean", "mean", True, 2, 0.0),
        ("ignore_none", "none", False, 1, 0.0),
        ("smooth_mean", "mean", False, None, 0.1),
        ("smooth_weight_sum", "sum", True, None, 0.25),
        ("smooth_ignore_weight_mean", "mean", True, -100, 0.2),
        ("smooth_ignore_none", "none", False, 3, 0.3),
    ]:
        name = f"cross_entropy_{tag}"
        r = rng_for(name)
        logits = U(r, [N, C], -3, 3)
        target = r.integers(0, C, size=N)
        if ignore is not None:
            # Two rows hold the ignored index (-100 is out of range, as PyTorch allows).
            target[[1, 4]] = ignore
        attrs = {"reduction": red}
        w = None
        if weighted:
            w = [float(v) for v in U(r, [C], 0.5, 2.0)]
            attrs["class_weight"] = w
        if ignore is not None:
            attrs["ignore_index"] = int(ignore)
        if smooth:
            attrs["label_smoothing"] = smooth

        def fn(logits, target, red=red, w=w, ignore=ignore, smooth=smooth):
            wt = None if w is None else torch.tensor(w, dtype=logits.dtype)
            kw = {} if ignore is None else {"ignore_index": ignore}
            return F.cross_entropy(logits, target, weight=wt, reduction=red, label_smoothing=smooth, **kw)

        add_case(fam, name, "cross_entropy", attrs, [logits, i32(target)], fn)

    for tag, idx, n in [("1d", [0, 3, 1, 3], 4), ("2d", [[2, 0], [1, 4]], 5)]:
        name = f"one_hot_{tag}"
        add_case(fam, name, "one_hot", {"num_classes": n}, [i32(idx)],
                 lambda x, n=n: F.one_hot(x, n))

    for red, f in [("sum", torch.sum), ("mean", torch.mean), ("none", lambda x: x)]:
        for tag, s in [("2d", [3, 4]), ("scalar", [])]:
            name = f"identity_loss_{red}_{tag}"
            add_case(fam, name, "identity_loss", {"reduction": red},
                     [U(rng_for(name), s)], f)


def gen_shape():
    fam = "shape"
    for tag, s, shp in [
        ("2d_to_3d", [4, 6], [2, 2, 6]),
        ("infer", [2, 3, 4], [-1, 4]),
        ("infer_middle", [2, 3, 4], [2, -1, 2]),
        ("to_1d", [2, 3], [6]),
        ("to_scalar", [1, 1], []),
        ("from_scalar", [], [1, 1]),
    ]:
        name = f"reshape_{tag}"
        add_case(fam, name, "reshape", {"shape": shp}, [U(rng_for(name), s)],
                 lambda x, shp=shp: x.reshape(shp))

    for tag, s, dims in [
        ("2d", [3, 4], [1, 0]),
        ("3d_201", [2, 3, 4], [2, 0, 1]),
        ("3d_021", [2, 3, 4], [0, 2, 1]),
        ("4d", [2, 1, 3, 2], [3, 1, 0, 2]),
    ]:
        name = f"permute_{tag}"
        add_case(fam, name, "permute", {"dims": dims}, [U(rng_for(name), s)],
                 lambda x, dims=dims: x.permute(dims))

    for tag, s, d0, d1 in [
        ("2d", [3, 4], 0, 1),
        ("3d_last2", [2, 3, 4], 1, 2),
        ("3d_neg", [2, 3, 4], 0, -1),
        ("same_dim", [2, 3], 1, 1),
    ]:
        name = f"transpose_{tag}"
        add_case(fam, name, "transpose", {"dim0": d0, "dim1": d1}, [U(rng_for(name), s)],
                 lambda x, d0=d0, d1=d1: x.transpose(d0, d1))

    for tag, shapes, dim in [
        ("2_dim0", [[2, 3], [1, 3]], 0),
        ("2_dim1", [[2, 3], [2, 2]], 1),
        ("3_dim1_3d", [[2, 1, 3], [2, 2, 3], [2, 3, 3]], 1),
        ("3_neg_dim", [[2, 2], [2, 1], [2, 3]], -1),
    ]:
        name = f"concat_{tag}"
        r = rng_for(name)
        add_case(fam, name, "concat", {"dim": dim}, [U(r, s) for s in shapes],
                 lambda *xs, dim=dim: torch.cat(xs, dim=dim))

    for tag, s, n, dim in [
        ("even_dim0", [4, 3], 2, 0),
        ("uneven_5_in_2", [5, 3], 2, 0),
        ("dim1_3", [2, 6], 3, 1),
        ("uneven_dim1_7_in_3", [2, 7], 3, 1),
        # torch quirk: chunk size is ceil(5/4)=2, so only 3 chunks (2, 2, 1) come back
        ("fewer_than_requested_5_in_4", [5, 2], 4, 0),
    ]:
        name = f"chunk_{tag}"
        add_case(fam, name, "chunk", {"chunks": n, "dim": dim}, [U(rng_for(name), s)],
                 lambda x, n=n, dim=dim: torch.chunk(x, n, dim=dim))

    for tag, s, sizes, dim in [
        ("dim0", [5, 2], [2, 3], 0),
        ("dim1_3way", [2, 6], [1, 2, 3], 1),
        ("neg_dim", [2, 3, 4], [3, 1], -1),
    ]:
        name = f"split_{tag}"
        add_case(fam, name, "split", {"sizes": sizes, "dim": dim}, [U(rng_for(name), s)],
                 lambda x, sizes=sizes, dim=dim: torch.split(x, sizes, dim=dim))

    for tag, s, dim, st, en, step in [
        ("dim0_1_3", [4, 3], 0, 1, 3, 1),
        ("dim1_step2", [3, 6], 1, 0, 6, 2),
        ("dim1_start1_step2", [3, 7], 1, 1, 6, 2),
        ("3d_dim2_step3", [2, 2, 7], 2, 1, 7, 3),
        ("full", [2, 3], 1, 0, 3, 1),
        ("neg_dim", [2, 5], -1, 2, 4, 1),
    ]:
        name = f"slice_{tag}"
        add_case(fam, name, "slice", {"dim": dim, "start": st, "end": en, "step": step},
                 [U(rng_for(name), s)],
                 lambda x, dim=dim, st=st, en=en, step=step:
                 x[(slice(None),) * (dim % x.dim()) + (slice(st, en, step),)])

    for tag, s, dim, idx in [
        ("dim0_repeat", [4, 3], 0, [2, 0, 2, 3]),
        ("dim1", [2, 5], 1, [4, 1]),
        ("3d_dim1_repeat", [2, 3, 2], 1, [1, 1, 0, 2, 1]),
    ]:
        name = f"index_select_{tag}"
        add_case(fam, name, "index_select", {"dim": dim}, [U(rng_for(name), s), i32(idx)],
                 lambda x, i, dim=dim: torch.index_select(x, dim, i))

    for tag, s, dim, idx in [
        ("dim1", [3, 4], 1, [[0, 3], [1, 1], [2, 0]]),
        ("dim0_repeat", [3, 2], 0, [[2, 0], [2, 2], [0, 1], [1, 1]]),
        ("3d_dim2", [2, 2, 3], 2, [[[0, 2], [1, 1]], [[2, 2], [0, 1]]]),
        ("neg_dim_smaller", [3, 4], -1, [[3], [0]]),
    ]:
        name = f"gather_{tag}"
        add_case(fam, name, "gather", {"dim": dim}, [U(rng_for(name), s), i32(idx)],
                 lambda x, i, dim=dim: torch.gather(x, dim, i))


def gen_cast():
    fam = "cast"
    name = "cast_f32_to_f32"
    add_case(fam, name, "cast", {"dtype": "float32"}, [U(rng_for(name), [2, 3])],
             lambda x: x * 1)  # identity; grad passes through
    # float -> int truncates toward zero (C semantics)
    x = np.array([-2.75, -1.5, -0.5, 0.0, 0.49, 1.5, 2.99, 100.25, -100.75], dtype=np.float32)
    add_case(fam, "cast_f32_to_i32_truncate", "cast", {"dtype": "int32"}, [x],
             lambda x: x.to(torch.int32))
    add_case(fam, "cast_i32_to_f32", "cast", {"dtype": "float32"},
             [i32([[-3, 0, 7], [16777217, -16777217, 2]])],
             lambda x: x.to(torch.float64))  # 2^24+1 rounds to 2^24 in f32
    add_case(fam, "cast_i32_to_i32", "cast", {"dtype": "int32"}, [i32([1, -2, 3])],
             lambda x: x.to(torch.int32))


def gen_float16():
    fam = "float16"

    def f32_to_f16(x):
        return x.to(torch.float16)

    def cast(name, vals):
        x = np.asarray(vals, dtype=np.float32)
        add_case(fam, name, "cast", {"dtype": "float16"}, [Inp(x, requires_grad=False)],
                 f32_to_f16, backward=False, check_f32=False)

    cast("cast_f16_round", [1.0001, 0.1, 2049.0, 2051.0, 1.0 / 3.0, -0.1, 3.14159265])
    cast("cast_f16_overflow", [65520.0, 70000.0, -1e5, -65520.0, 1e30])
    cast("cast_f16_max_finite", [65504.0, -65504.0, 65519.0, -65519.0])
    cast("cast_f16_subnormal", [1e-5, 6e-8, -6e-8, 6.103515625e-05, 3e-8, 2.98023224e-08])
    cast("cast_f16_underflow", [1e-8, -1e-8, 2.9e-8, 1e-30])
    cast("cast_f16_exact_small_ints", [0.0, -0.0, 1.0, -2.0, 2048.0, 1024.5])
    x16 = np.array([1.0, 0.1, 65504.0, 6e-8, -2.5], dtype=np.float16)
    add_case(fam, "cast_f16_to_f32", "cast", {"dtype": "float32"}, [x16],
             lambda x: x.to(torch.float32), backward=False, check_f32=False)

    def binop(name, op, a, bb):
        a = np.asarray(a, dtype=np.float16)
        bb = np.asarray(bb, dtype=np.float16)
        f = torch.add if op == "add" else torch.mul
        add_case(fam, name, op, {}, [a, bb], f, backward=False, check_f32=False)

    binop("add_f16_overflow", "add",
          [60000.0, 65504.0, 65504.0, -65504.0, 1.0],
          [10000.0, 16.0, 15.0, -16.0, 65504.0])
    binop("add_f16_rounding", "add",
          [2048.0, 2048.0, 1.0, 0.1, 1000.0],
          [1.0, 3.0, 0.0004883, 0.2, 0.25])
    binop("add_f16_subnormal_underflow", "add",
          [6.1035e-05, 5.96e-08, 1e-4],
          [-6.0e-05, -5.96e-08, -9.99e-5])
    binop("mul_f16_overflow", "mul",
          [300.0, 256.0, -1000.0, 255.9],
          [300.0, 256.0, 100.0, 256.0])
    binop("mul_f16_underflow", "mul",
          [1e-4, 5.96e-08, 5.96e-08, 6.1035e-05, 1e-3],
          [1e-4, 0.5, 0.75, 0.5, 1e-3])
    binop("mul_f16_broadcast_scalar", "mul", [[1000.0, 0.001], [65504.0, 2.0]], 100.0)

    # The vision ops of a float16 ResNet-50 (and a linear layer) on float16 tensors. The
    # reference is the correctly rounded result: computed by torch in float64 from the exact
    # float16 inputs, each output rounded once to float16 (attrs "reference"). torch's own CPU
    # half kernels round intermediates in places (its half batch norm differs from the
    # correctly rounded result in 77 of this case's 300 elements, its half conv in 1 of 288);
    # the engine computes in float32 and rounds once, so tests/golden_kernels.rs holds it to
    # within one unit in the last place of this reference.
    def h(r, shape, lo=-1.0, hi=1.0):
        return U(r, shape, lo, hi).astype(np.float16)

    def native(name, op, attrs, inputs, fn):
        def rounded(*xs):
            out = fn(*(x.double() for x in xs))
            return tuple(o.to(torch.float16) for o in out) if isinstance(out, tuple) else out.to(torch.float16)
        add_case(fam, name, op, {**attrs, "reference": "float64_rounded_once"}, inputs, rounded,
                 backward=False, check_f32=False)

    r = rng_for("conv2d_f16_3x3_pad1")
    kw = dict(stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1)
    native("conv2d_f16_3x3_pad1", "conv2d", kw, [h(r, [2, 3, 6, 6]), h(r, [4, 3, 3, 3], -0.5, 0.5), h(r, [4], -0.5, 0.5)],
           lambda x, w, b: F.conv2d(x, w, b, **kw))
    r = rng_for("conv2d_f16_7x7_stride2_pad3")
    kw7 = dict(stride=[2, 2], padding=[3, 3], dilation=[1, 1], groups=1)
    native("conv2d_f16_7x7_stride2_pad3", "conv2d", kw7, [h(r, [1, 3, 11, 11]), h(r, [5, 3, 7, 7], -0.2, 0.2)],
           lambda x, w: F.conv2d(x, w, None, **kw7))
    r = rng_for("conv2d_f16_1x1_stride2")
    kw1 = dict(stride=[2, 2], padding=[0, 0], dilation=[1, 1], groups=1)
    native("conv2d_f16_1x1_stride2", "conv2d", kw1, [h(r, [2, 8, 5, 5]), h(r, [6, 8, 1, 1], -0.5, 0.5)],
           lambda x, w: F.conv2d(x, w, None, **kw1))
    r = rng_for("batch_norm_f16_4d")
    x = h(r, [4, 3, 5, 5], -2, 2)
    dims = [0, 2, 3]
    native("batch_norm_f16_4d", "batch_norm", {"eps": 1e-5}, [x, h(r, [3], 0.5, 1.5), h(r, [3], -0.5, 0.5)],
           lambda x, w, bb: (F.batch_norm(x, None, None, w, bb, True, 0.1, 1e-5), x.mean(dims),
                             x.var(dims, unbiased=True)))
    r = rng_for("max_pool2d_f16_3x3_s2_p1")
    pk = {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1], "dilation": [1, 1], "ceil_mode": False}
    native("max_pool2d_f16_3x3_s2_p1", "max_pool2d", pk, [h(r, [2, 2, 7, 7])],
           lambda x: F.max_pool2d(x, [3, 3], [2, 2], [1, 1], [1, 1], False))
    r = rng_for("avg_pool2d_f16_3x3_s2_p1")
    ak = {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1], "ceil_mode": False, "count_include_pad": True}
    native("avg_pool2d_f16_3x3_s2_p1", "avg_pool2d", ak, [h(r, [2, 2, 7, 7])],
           lambda x: F.avg_pool2d(x, [3, 3], [2, 2], [1, 1], False, True))
    r = rng_for("adaptive_avg_pool2d_f16_1x1")
    native("adaptive_avg_pool2d_f16_1x1", "adaptive_avg_pool2d", {"output_size": [1, 1]}, [h(r, [2, 4, 7, 7])],
           lambda x: F.adaptive_avg_pool2d(x, [1, 1]))
    r = rng_for("linear_f16")
    native("linear_f16", "linear", {}, [h(r, [5, 16]), h(r, [7, 16], -0.5, 0.5), h(r, [7], -0.5, 0.5)],
           lambda x, w, b: F.linear(x, w, b))


def gen_graph():
    fam = "graph"
    for tag, E, Fd, N, idx in [
        ("basic", 6, 3, 4, [0, 2, 0, 3, 2, 0]),   # row 1 gets nothing
        ("single_feature", 5, 1, 3, [2, 2, 2, 0, 0]),
        ("more_rows_than_edges", 3, 2, 6, [5, 0, 5]),
    ]:
        for op in ["scatter_add", "scatter_mean"]:
            name = f"{op}_{tag}"
            r = rng_for(name)
            src = U(r, [E, Fd])

            def fn(src, index, N=N, op=op):
                out = torch.zeros(N, src.shape[1], dtype=src.dtype).index_add(0, index, src)
                if op == "scatter_mean":
                    cnt = torch.zeros(N, dtype=src.dtype).index_add(
                        0, index, torch.ones(index.shape[0], dtype=src.dtype))
                    out = out / cnt.clamp(min=1).unsqueeze(1)
                return out

            add_case(fam, name, op, {"dim_size": N}, [src, i32(idx)], fn)

    for tag, N, M, Fd, rows in [
        ("basic", 3, 4, 2, [[0, 2], [], [1, 2, 3]]),   # middle row empty
        ("square", 4, 4, 3, [[0], [0, 1], [3], [1, 2, 3]]),
        ("single_col_dense", 2, 3, 1, [[2], [0, 1, 2]]),
    ]:
        name = f"spmm_{tag}"
        r = rng_for(name)
        indptr = [0]
        indices = []
        for cols in rows:
            indices += cols
            indptr.append(len(indices))
        nnz = len(indices)
        values = U(r, [nnz])
        dense = U(r, [M, Fd])
        row_of = np.repeat(np.arange(N), np.diff(indptr))

        def fn(indptr_t, indices_t, values_t, dense_t, N=N, M=M, row_of=row_of):
            a = torch.zeros(N, M, dtype=values_t.dtype).index_put(
                (torch.from_numpy(row_of), indices_t), values_t, accumulate=True)
            return a @ dense_t

        add_case(fam, name, "spmm", {"n_rows": N, "n_cols": M},
                 [i32(indptr), i32(indices), values, dense], fn)
        # cross-check against torch's CSR kernel
        csr = torch.sparse_csr_tensor(torch.tensor(indptr), torch.tensor(indices),
                                      torch.from_numpy(values.astype(np.float64)), size=(N, M),
                                      check_invariants=True)
        ref = (csr @ torch.from_numpy(dense.astype(np.float64))).numpy().astype(np.float32)
        got = np.asarray(FILES[fam][-1]["outputs"][0]["data"], dtype=np.float32).reshape(N, Fd)
        assert np.allclose(ref, got, rtol=1e-6, atol=1e-7), name


# --------------------------------------------------------------------------
# Modules (tests/golden/modules/*.json): whole nn modules whose forward is more than one op.

MODULE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "modules")


def gen_conv2d_same():
    """`nn.Conv2d(..., padding='same')`, the uneven cases included (an even dilated kernel
    span: PyTorch pads one more row/column after than before). Each case: the module's
    arguments and parameters, x, the output, a random grad_output and the gradients of
    sum(out * grad_output) for x, weight and bias, in float64 rounded to float32."""
    cases = []
    for tag, cin, cout, k, d, sx in [
        ("k2", 2, 3, [2, 2], [1, 1], [2, 2, 5, 6]),
        ("k4x3", 3, 2, [4, 3], [1, 1], [1, 3, 6, 5]),
        ("k2_dilated3", 2, 2, [2, 3], [3, 1], [1, 2, 7, 6]),
        ("k3x2_dilated_1x3", 1, 2, [3, 2], [1, 3], [2, 1, 5, 7]),
    ]:
        name = f"conv2d_same_{tag}"
        r = rng_for(name)
        x = torch.from_numpy(U(r, sx, -1, 1).astype(np.float64)).requires_grad_(True)
        m = torch.nn.Conv2d(cin, cout, k, padding="same", dilation=d).double()
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(U(r, list(m.weight.shape), -0.5, 0.5).astype(np.float64)))
            m.bias.copy_(torch.from_numpy(U(r, [cout], -0.5, 0.5).astype(np.float64)))
        out = m(x)
        assert list(out.shape[2:]) == sx[2:], name
        g = torch.from_numpy(U(r, list(out.shape), -1, 1).astype(np.float64))
        (out * g).sum().backward()
        enc = lambda t: encode(t.detach().numpy(), "float32")  # noqa: E731
        cases.append({"name": name, "module": "Conv2d",
                      "args": {"in": cin, "out": cout, "kernel_size": k, "dilation": d, "padding": "same"},
                      "params": {"weight": enc(m.weight), "bias": enc(m.bias)},
                      "x": enc(x), "out": enc(out), "grad_output": enc(g),
                      "grads": {"x": enc(x.grad), "weight": enc(m.weight.grad), "bias": enc(m.bias.grad)}})
    os.makedirs(MODULE_DIR, exist_ok=True)
    with open(os.path.join(MODULE_DIR, "conv2d_same.json"), "w") as fh:
        fh.write('{"cases": [\n' + ",\n".join(json.dumps(c, separators=(",", ":")) for c in cases) + "\n]}\n")
    print(f"modules/conv2d_same.json {len(cases):4d} cases")


def write_all():
    os.makedirs(OUT_DIR, exist_ok=True)
    total = 0
    for fam, cases in FILES.items():
        path = os.path.join(OUT_DIR, f"{fam}.json")
        # One case per line: diff-friendly and still plain JSON.
        body = ",\n".join(json.dumps(c, separators=(",", ":"), allow_nan=False) for c in cases)
        text = '{"cases": [\n' + body + "\n]}\n"
        json.loads(text)  # must parse
        with open(path, "w") as fh:
            fh.write(text)
        size = len(text.encode())
        total += size
        print(f"{fam + '.json':20s} {len(cases):4d} cases {size / 1024:8.1f} KiB")
    print(f"{'total':20s} {sum(len(c) for c in FILES.values()):4d} cases {total / 1024:8.1f} KiB")
    print("cases per op:")
    for op in sorted(SEEN_OPS):
        print(f"  {op:15s} {SEEN_OPS[op]}")


def main():
    print(f"torch {torch.__version__}, numpy {np.__version__}, python {sys.version.split()[0]}")
    gen_elementwise()
    gen_matmul()
    gen_reduction()
    gen_softmax()
    gen_layer_norm()
    gen_conv()
    gen_pool()
    gen_batch_norm()
    gen_dropout()
    gen_loss()
    gen_shape()
    gen_cast()
    gen_float16()
    gen_conv2d_same()
    gen_graph()
    write_all()


if __name__ == "__main__":
    main()
