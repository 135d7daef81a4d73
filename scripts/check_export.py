"""`make check-export`, PyTorch's half (scripts/check-export.mjs is the engine's).

For every case folder the engine wrote, the exported PyTorch script (model.py) is imported
and its model built with the exported weights (model.safetensors, loaded strictly), then run
on the engine's inputs with the engine's dropout masks fed to its `_random_mask`; its outputs,
its loss and, after `loss.backward()`, every parameter's gradient must equal the engine's
within float32 tolerance (float16 values: float16's). The PopTorch script (model_poptorch.py)
is parsed (PopTorch itself cannot be installed here). A full-size case (code only) is parsed
and its model class built on the meta device, without weights.

Usage: python scripts/check_export.py DIR [DIR/case ...]
"""
import ast
import contextlib
import importlib.util
import io
import json
import math
import os
import sys
import traceback

import torch
from safetensors.torch import load_file

# |torch - engine| <= ATOL * scale + RTOL * |engine|, scale the largest |engine| value of the
# tensor (at least 1): sums over many terms may cancel to values much smaller than their terms.
TOL = {torch.float32: (1e-4, 1e-5), torch.float16: (2e-2, 2e-3)}


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compare(what, got, want, problems, truth=None):
    """Records in `problems` how `got` (torch) differs from `want` (the engine); returns the
    engine's largest error relative to the tensor's scale.

    With `truth` (the same model run in float64) a sum that cancels is judged fairly: the
    engine may be off the float64 value by as much as PyTorch's own float32 run is (times 4),
    on top of the fixed tolerance; float32 rounding in a few-sample batch norm's gradient, say,
    is not an error of the export."""
    if got is None:
        problems.append(f"{what}: torch gave no value (engine {tuple(want.shape)})")
        return math.inf
    got = got.detach()
    if tuple(got.shape) != tuple(want.shape):
        problems.append(f"{what}: shape {tuple(got.shape)} != engine's {tuple(want.shape)}")
        return math.inf
    if want.dtype in (torch.int32, torch.int64, torch.bool):
        if not torch.equal(got.to(want.dtype), want):
            problems.append(f"{what}: {int((got.to(want.dtype) != want).sum())} of {want.numel()} values differ")
            return math.inf
        return 0.0
    rtol, atol = TOL.get(want.dtype, TOL[torch.float32])
    g, w = got.double(), want.double()
    if want.numel() == 0:
        return 0.0
    nan_ok = torch.isnan(g) == torch.isnan(w)
    inf_ok = torch.where(torch.isinf(w), g == w, torch.ones_like(nan_ok))
    finite = torch.isfinite(w) & torch.isfinite(g)
    scale = max(1.0, float(w[finite].abs().max())) if bool(finite.any()) else 1.0
    allowed = atol * scale + rtol * w.abs()
    ref = g
    if truth is not None and tuple(truth.shape) == tuple(want.shape):
        t = truth.detach().double()
        t_ok = finite & torch.isfinite(t)
        if bool(t_ok.any()):
            own = float((g - t)[t_ok].abs().max())
            allowed = torch.maximum(allowed, atol * scale + rtol * t.abs() + 4 * own)
            ref = torch.where(t_ok, t, g)
    err = (ref - w).abs()
    bad = finite & (err > allowed)
    bad |= ~nan_ok | ~inf_ok | (torch.isfinite(w) & ~torch.isfinite(g))
    if bool(bad.any()):
        i = int(bad.reshape(-1).nonzero()[0])
        problems.append(
            f"{what}: {int(bad.sum())} of {want.numel()} values differ, e.g. [{i}] torch {float(g.reshape(-1)[i])!r} "
            f"engine {float(w.reshape(-1)[i])!r}"
        )
    worst = (g - w).abs()[finite]
    return float(worst.max() / scale) if worst.numel() else 0.0


def run_step(mod, meta, ref, double):
    """The exported model on the engine's inputs and masks: (outputs, {name: gradient}), in
    float32 as exported, or with `double` in float64 (its parameters, buffers and float inputs)."""
    model = mod.load_model()
    if double:
        model = model.double()
    masks = [ref[f"mask.{i}"] for i in range(meta["masks"])]

    def feed_mask(shape, p, device):
        if not masks:
            raise RuntimeError("the model drew more dropout masks than the engine did")
        m = masks.pop(0)
        assert tuple(m.shape) == tuple(shape), (m.shape, shape)
        return m.to(device)

    model._random_mask = feed_mask
    wide = (lambda t: t.double() if t.is_floating_point() else t) if double else (lambda t: t)
    args = []
    for i, a in enumerate(meta["args"]):
        if a["kind"] == "sparse":
            rows, cols = a["shape"]
            values = wide(ref[f"input.{i}.values"])
            args.append(torch.sparse_csr_tensor(ref[f"input.{i}.indptr"], ref[f"input.{i}.indices"], values, size=(rows, cols)))
        else:
            args.append(wide(ref[f"input.{i}"]))
    model.train(meta["training"])
    returned = model(*args)
    outputs = returned if isinstance(returned, tuple) else (returned,)
    grads = {}
    if meta["training"]:
        loss = mod.loss_of(returned)
        if loss is not None:
            loss.backward()
            grads = {name: model.get_parameter(name).grad for name in meta["gradients"]}
    return model, outputs, grads, masks, loss if meta["training"] else None


def parse_poptorch(path, problems):
    """The PopTorch export parses, imports poptorch and wraps the model as planned."""
    try:
        tree = ast.parse(open(path).read())
    except SyntaxError as e:
        problems.append(f"model_poptorch.py: {e}")
        return
    calls = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    if not ({"trainingModel", "inferenceModel"} & calls):
        problems.append("model_poptorch.py: no poptorch.trainingModel / inferenceModel call")


def check_case(case_dir):
    meta = json.load(open(os.path.join(case_dir, "case.json")))
    problems = []
    parse_poptorch(os.path.join(case_dir, "model_poptorch.py"), problems)
    mod = load_module(os.path.join(case_dir, "model.py"), "exported_" + meta["id"].replace("-", "_"))
    if meta.get("codeOnly"):
        with torch.device("meta"):
            mod.Model()
        return meta, problems, 0.0
    ref = load_file(os.path.join(case_dir, "reference.safetensors"))
    model, outputs, grads, masks_left, loss = run_step(mod, meta, ref, double=False)
    if not os.path.exists(mod.WEIGHTS):
        problems.append("the weights file was not found beside the script")
    try:
        _, outputs64, grads64, _, _ = run_step(mod, meta, ref, double=True)
    except Exception:  # a float32-only op (class weights, a cast): the fixed tolerance alone
        outputs64, grads64 = [None] * len(outputs), {}
    worst = 0.0
    if len(outputs) != meta["outputs"]:
        problems.append(f"{len(outputs)} outputs, the engine has {meta['outputs']}")
    for i, got in enumerate(outputs[: meta["outputs"]]):
        truth = outputs64[i] if i < len(outputs64) else None
        worst = max(worst, compare(f"output {i}", got, ref[f"output.{i}"], problems, truth))
    if masks_left:
        problems.append(f"{len(masks_left)} of the engine's dropout masks were not drawn")
    # The script's own entry points run: the data stub and, for training, two steps of its
    # training loop with its optimizer (values not compared: the stub's data is random).
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            generator = torch.Generator().manual_seed(0)
            if meta["training"]:
                mod.train(mod.load_model(), 2, generator=generator)
            else:
                with torch.no_grad():
                    mod.load_model().eval()(*mod.example_batch(generator=generator))
    except Exception as e:
        problems.append(f"the script's {'train' if meta['training'] else 'model(*example_batch())'}: {e!r}")
    if meta["training"]:
        if loss is None:
            problems.append("no loss among the outputs")
        for name in meta["gradients"]:
            worst = max(worst, compare(f"gradient of {name}", grads.get(name), ref[f"grad.{name}"], problems, grads64.get(name)))
    return meta, problems, worst


def main(argv):
    root = argv[1] if len(argv) > 1 else "target/check-export"
    cases = argv[2:] or sorted(
        os.path.join(root, d) for d in os.listdir(root) if os.path.exists(os.path.join(root, d, "case.json"))
    )
    torch.manual_seed(0)
    failed = 0
    for case_dir in cases:
        name = os.path.basename(case_dir)
        try:
            meta, problems, worst = check_case(case_dir)
        except Exception:
            meta, problems, worst = {}, [traceback.format_exc()], math.inf
        if problems:
            failed += 1
            print(f"FAIL {name}")
            for p in problems[:8]:
                print(f"     {p}")
        else:
            what = "code only: parsed, built without weights" if meta.get("codeOnly") else f"max error {worst:.2e} of scale"
            grads = len(meta.get("gradients", []))
            extra = "" if meta.get("codeOnly") else f", {meta['outputs']} outputs, loss and {grads} gradients" if meta["training"] else f", {meta['outputs']} outputs"
            print(f"ok   {name}: {what}{extra}{' (' + meta['note'] + ')' if meta.get('note') else ''}")
    print(f"check-export: {len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
