//! The assembled `.py` file: imports, the helpers the generated code calls, the model class
//! (its parameters and buffers under their state-dict names, its `forward` from
//! [`super::python`]), the weights loaded from the safetensors file beside it, a data stub,
//! and either PopTorch's wrapping (options, strategy, optimizer, `trainingModel` /
//! `inferenceModel`) or a PyTorch training loop.

use super::leaves::{self, Leaf};
use super::poptorch as popt;
use super::python::{self, str_lit, tuple, Arg, ArgKind, Forward};
use super::rev::{self, Rev};
use super::Target;
use crate::autograd::find_loss;
use crate::ir::{Graph, InputKind, Op, ValueId};
use crate::poptorch::PoplarExecutor;
use crate::tensor::DType;
use crate::Result;
use std::collections::BTreeMap;

/// Helpers every script defines (plain torch, so the PyTorch form runs anywhere torch does).
const HELPERS: &str = r#"try:  # the page's Python (ipu-playground): the engine's own ops for the forms below
    from playground import ENGINE as _PLAYGROUND
except ImportError:  # PyTorch
    _PLAYGROUND = None


def _state(root, name):
    """The submodule that holds state `name` (made as torch.nn.Module() containers, as
    torch.fx's GraphModule makes them) and the state's own name in it."""
    *path, leaf = name.split(".")
    module = root
    for part in path:
        if not hasattr(module, part):
            module.add_module(part, torch.nn.Module())
        module = getattr(module, part)
    return module, leaf


def _parameter(root, name, shape, dtype):
    module, leaf = _state(root, name)
    value = torch.empty(shape, dtype=torch.float32)
    bound = 1.0 / math.sqrt(shape[-1]) if len(shape) > 1 else 0.0
    torch.nn.init.uniform_(value, -bound, bound)
    module.register_parameter(leaf, torch.nn.Parameter(value.to(dtype)))


def _buffer(root, name, shape, dtype):
    module, leaf = _state(root, name)
    module.register_buffer(leaf, torch.zeros(shape, dtype=dtype))


def _module(root, name, module):
    """A built-in module (torch.nn.Linear, ...) at path `name`."""
    parent, leaf = _state(root, name)
    parent.add_module(leaf, module)


def _tie(root, name, source):
    """`name` is the same parameter as `source` (PyTorch's `decoder.weight = embed.weight`)."""
    module, leaf = _state(root, name)
    setattr(module, leaf, root.get_parameter(source))


def _spmm(indptr, indices, values, dense, n_rows):
    """CSR(n_rows x m) @ dense, differentiable in `values` and `dense`."""
    counts = indptr[1:].long() - indptr[:-1].long()
    rows = torch.repeat_interleave(torch.arange(n_rows, device=dense.device), counts)
    out = torch.zeros((n_rows,) + tuple(dense.shape[1:]), dtype=dense.dtype, device=dense.device)
    src = values.to(dense.dtype).reshape((-1,) + (1,) * (dense.dim() - 1)) * dense[indices.long()]
    return out.index_add(0, rows, src)


def _scatter_mean(src, index, dim_size):
    """out[i] = the mean of the src rows whose index is i (0 where none is)."""
    out = torch.zeros((dim_size,) + tuple(src.shape[1:]), dtype=src.dtype, device=src.device)
    out = out.index_add(0, index.long(), src)
    count = torch.zeros(dim_size, dtype=src.dtype, device=src.device)
    count = count.index_add(0, index.long(), torch.ones_like(index, dtype=src.dtype))
    return out / count.clamp(min=1).reshape((-1,) + (1,) * (src.dim() - 1))


def _dynamic_slice(x, start, dim, size):
    """`size` entries of `dim` from `start`, wrapping round past the end (the IPU's
    DynamicSlice: the start read as an unsigned 32-bit integer)."""
    n = x.shape[dim]
    first = (start.reshape(-1)[0].long() & 0xFFFFFFFF) % n
    return torch.index_select(x, dim, (first + torch.arange(size, device=x.device)) % n)


def _batch_norm_train(x, weight, bias, eps):
    """Training-mode batch norm over dim 1: (y, batch mean, unbiased batch variance)."""
    dims = [d for d in range(x.dim()) if d != 1]
    shape = [1, -1] + [1] * (x.dim() - 2)
    mean = x.mean(dim=dims)
    var = x.var(dim=dims, unbiased=False)
    y = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + eps)
    if weight is not None:
        y = y * weight.reshape(shape) + bias.reshape(shape)
    n = x.numel() // x.shape[1]
    return y, mean, var * n / max(n - 1, 1)


def _dropout_with_mask(x, keep, p):
    """Dropout with a keep mask drawn before (RevGNN draws one for every layer): the kept
    values scaled by 1 / (1 - p), the others 0."""
    if _PLAYGROUND:
        return x.dropout_with_mask(keep, p)
    return torch.where(keep, x / (1 - p), torch.zeros_like(x))


def _masked_cross_entropy(logits, target, mask, weight=None, ignore_index=-100, reduction="mean",
                          label_smoothing=0.0):
    """Cross entropy over the rows where `mask` is True (the training nodes of a graph)."""
    if _PLAYGROUND:
        opts = {}
        if ignore_index != -100:
            opts["ignoreIndex"] = ignore_index
        if label_smoothing:
            opts["labelSmoothing"] = label_smoothing
        if weight is not None or reduction != "mean":
            raise ValueError("_masked_cross_entropy: the engine's masked loss is the mean without class weights")
        return logits.cross_entropy(target, mask, opts) if opts else logits.cross_entropy(target, mask)
    target = torch.where(mask, target.long(), ignore_index)
    return F.cross_entropy(logits, target, weight=weight, ignore_index=ignore_index, reduction=reduction,
                           label_smoothing=label_smoothing)


def _random_csr(rows, cols, nnz, generator=None):
    """A random CSR matrix (int32 indices) with `nnz` entries, for the data stub."""
    nnz = min(nnz, rows * cols)
    flat = torch.randperm(rows * cols, generator=generator)[:nnz].sort().values
    crow = torch.zeros(rows + 1, dtype=torch.int64)
    crow[1:] = torch.bincount(flat // cols, minlength=rows).cumsum(0)
    values = torch.rand(nnz, generator=generator)
    return torch.sparse_csr_tensor(crow.int(), (flat % cols).int(), values, size=(rows, cols))
"#;

/// LAMB (PopTorch's `optim.LAMB`), which torch.optim lacks: the engine's formula.
const LAMB: &str = r#"class _Lamb(torch.optim.Optimizer):
    """LAMB as PopTorch has it (its optim.LAMB): Adam's moments, the update
    u = m_hat / (sqrt(v_hat) + eps) + weight_decay * p, scaled by the trust ratio
    min(|p|, max_weight_norm) / |u| (1 when either norm is 0)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 max_weight_norm=65500.0, bias_correction=True):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        max_weight_norm=max_weight_norm, bias_correction=bias_correction)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(p, dtype=torch.float32)
                    state["v"] = torch.zeros_like(p, dtype=torch.float32)
                state["step"] += 1
                g = p.grad.float()
                state["m"].mul_(b1).add_(g, alpha=1 - b1)
                state["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
                m, v = state["m"], state["v"]
                if group["bias_correction"]:
                    m = m / (1 - b1 ** state["step"])
                    v = v / (1 - b2 ** state["step"])
                u = m / (v.sqrt() + group["eps"]) + group["weight_decay"] * p.float()
                w_norm = p.float().norm().clamp(max=group["max_weight_norm"])
                u_norm = u.norm()
                trust = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
                p.sub_((group["lr"] * trust * u).to(p.dtype))
"#;

const WITH: &str = r#"def _with(strategy, configure):
    """A strategy after its builder call (`useSeparateBackwardPhase`, liveness)."""
    configure(strategy)
    return strategy
"#;

/// The highest value + 1 an int32 input may take in the data stub: the classes of the
/// cross-entropy it is the target of, the rows of the table it indexes, else 2.
fn int_bound(g: &Graph, v: ValueId) -> usize {
    for n in &g.nodes {
        let at = |i: usize| n.inputs.get(i) == Some(&v);
        let dim_of = |i: usize, d: usize| g.ty(n.inputs[i]).shape.get(d).copied();
        let bound = match &n.op {
            Op::CrossEntropy { .. } if at(1) => dim_of(0, 1),
            Op::IndexSelect { dim } | Op::Gather { dim } if at(1) => dim_of(0, *dim),
            Op::OneHot { num_classes } if at(0) => Some(*num_classes),
            _ => None,
        };
        if let Some(b) = bound {
            return b.max(1);
        }
    }
    2
}

/// The data stub's expression for argument `a`, dim 0 times `factor` (the combined batch).
fn stub(g: &Graph, a: &Arg) -> String {
    match &a.kind {
        ArgKind::Sparse { rows, cols, nnz } => format!("_random_csr({rows}, {cols}, {nnz}, generator)"),
        ArgKind::Dense(t) => {
            let shape = if t.shape.is_empty() {
                "()".to_string()
            } else {
                let rest: Vec<String> = t.shape[1..].iter().map(|d| d.to_string()).collect();
                let mut dims = vec![format!("{} * factor", t.shape[0])];
                dims.extend(rest);
                format!("({}{})", dims.join(", "), if dims.len() == 1 { "," } else { "" })
            };
            match t.dtype {
                DType::Float32 | DType::Float16 => {
                    format!("torch.randn({shape}, generator=generator).to({})", python::dtype(t.dtype))
                }
                DType::Int32 => {
                    let v = g.placeholders(InputKind::Input).into_iter().find(|(n, _)| *n == a.name).map(|(_, v)| v);
                    let high = v.map(|v| int_bound(g, v)).unwrap_or(2);
                    format!("torch.randint(0, {high}, {shape}, generator=generator, dtype=torch.int32)")
                }
                DType::Bool => format!("torch.rand({shape}, generator=generator) < 0.5"),
            }
        }
    }
}

/// Every parameter, then every buffer, of the wrapped model: name, traced shape (a
/// replica-grouped weight's host value has one slice per group), dtype.
fn state(exec: &PoplarExecutor) -> Vec<(String, Vec<usize>, DType)> {
    let model = exec.model();
    let g = model.graph();
    let mut out = Vec::new();
    for (kind, list) in [(InputKind::Parameter, model.parameters()), (InputKind::Buffer, model.buffers())] {
        let traced = g.placeholders(kind);
        for (name, p) in list {
            let shape = traced.iter().find(|(n, _)| *n == name).map(|(_, v)| g.ty(*v).shape.clone());
            out.push((name, shape.unwrap_or_else(|| p.shape().to_vec()), p.dtype()));
        }
    }
    out
}

/// The model class: `__init__` registers every parameter and buffer the wrapped model holds
/// (and ties), `forward` is the traced graph.
fn model_class(
    exec: &PoplarExecutor,
    fwd: &Forward,
    leaves: &BTreeMap<String, Leaf>,
    revs: &[(&Rev, String)],
) -> Vec<String> {
    let model = exec.model();
    let mut out = vec![
        "class Model(torch.nn.Module):".to_string(),
        "    \"\"\"The traced model. Its parameters and buffers keep their state-dict names, so".to_string(),
        "    `load_state_dict(safetensors.torch.load_file(WEIGHTS))` loads the exported weights strictly.\"\"\""
            .to_string(),
        String::new(),
        "    def __init__(self):".to_string(),
        "        super().__init__()".to_string(),
    ];
    // A leaf module is made whole (`torch.nn.Linear`), where its first parameter was.
    let mut made = std::collections::BTreeSet::new();
    for (name, shape, dtype) in state(exec) {
        // A GroupAddRev is made whole, its block's class copied for the other groups.
        if let Some((r, class)) = revs.iter().find(|(r, _)| name.starts_with(&format!("{}.", r.path))) {
            if made.insert(r.path.clone()) {
                let split = if r.split_dim == -1 { String::new() } else { format!(", split_dim={}", r.split_dim) };
                out.push(format!(
                    "        _module(self, {}, torch_geometric.nn.GroupAddRev({class}(), num_groups={}{split}))",
                    str_lit(&r.path),
                    r.groups
                ));
            }
            continue;
        }
        let leaf = leaves.iter().find(|(path, l)| l.state().iter().any(|s| name == format!("{path}.{s}")));
        match leaf {
            Some((path, l)) => {
                if made.insert(path.clone()) {
                    out.push(format!("        _module(self, {}, {})", str_lit(path), l.constructor()));
                }
            }
            None if model.buffers().iter().any(|(n, _)| *n == name) => {
                out.push(format!(
                    "        _buffer(self, {}, {}, {})",
                    str_lit(&name),
                    tuple(&shape),
                    python::dtype(dtype)
                ));
            }
            None => {
                out.push(format!(
                    "        _parameter(self, {}, {}, {})",
                    str_lit(&name),
                    tuple(&shape),
                    python::dtype(dtype)
                ));
            }
        }
    }
    for (name, source) in model.tied() {
        out.push(format!("        _tie(self, {}, {})", str_lit(&name), str_lit(&source)));
    }
    for (path, id, ipu) in &fwd.begin_blocks {
        let ipu = ipu.map(|i| format!(", ipu_id={i}")).unwrap_or_default();
        out.push(format!("        poptorch.BeginBlock({}, {}{ipu})", leaves::module_expr(path), str_lit(id)));
    }
    out.push(String::new());
    out.push("    def _random_mask(self, shape, p, device):".into());
    out.push("        \"\"\"Dropout's keep mask: True with probability 1 - p.\"\"\"".into());
    out.push("        if _PLAYGROUND:".into());
    out.push("            from playground import random_mask".into());
    out.push(String::new());
    out.push("            return random_mask(shape, p)".into());
    out.push("        return torch.rand(shape, device=device) >= p".into());
    out.push(String::new());
    let args: Vec<String> = fwd.args.iter().map(|a| a.ident.clone()).collect();
    out.push(format!("    def forward(self{}):", args.iter().map(|a| format!(", {a}")).collect::<String>()));
    out.extend(fwd.body.iter().cloned());
    out
}

/// The block classes of the recovered `GroupAddRev`s: the class name of each region's block
/// (one class for every block written the same), and each class's lines.
#[allow(clippy::type_complexity)]
fn block_classes(
    g: &Graph,
    revs: &BTreeMap<String, Rev>,
    leaves: &BTreeMap<String, Leaf>,
) -> Result<(BTreeMap<String, String>, Vec<(String, Vec<String>)>)> {
    let mut names = BTreeMap::new();
    let mut classes: Vec<(String, Vec<String>)> = Vec::new();
    for n in &g.nodes {
        let Op::Call { region } = &n.op else { continue };
        let Some(r) = revs.get(&region.name) else { continue };
        let own = r.leaves(leaves);
        let (args, body) = python::block_forward(&region.forward, r, &own)?;
        let mut text = vec![
            String::new(), // the class line, once named
            format!(
                "    \"\"\"A GroupAddRev block ({} and every GroupAddRev written the same): the first group; PyG copies it for the others.\"\"\"",
                str_lit(&r.path)
            ),
            String::new(),
            "    def __init__(self):".into(),
            "        super().__init__()".into(),
        ];
        let mut made = std::collections::BTreeSet::new();
        for (name, shape, dtype) in &r.state {
            match own.iter().find(|(path, l)| l.state().iter().any(|s| *name == format!("{path}.{s}"))) {
                Some((path, l)) => {
                    if made.insert(path.clone()) {
                        text.push(format!("        _module(self, {}, {})", str_lit(path), l.constructor()));
                    }
                }
                None => text.push(format!(
                    "        _parameter(self, {}, {}, {})",
                    str_lit(name),
                    tuple(shape),
                    python::dtype(*dtype)
                )),
            }
        }
        text.push(String::new());
        text.push(format!("    def forward(self, {}):", args.join(", ")));
        text.extend(body);
        // The same block as one written before (its docstring aside): that class.
        let same = classes.iter().find(|(_, t)| t[3..] == text[3..]).map(|(c, _)| c.clone());
        let class = match same {
            Some(c) => c,
            None => {
                let c = format!("Block{}", classes.len());
                text[0] = format!("class {c}(torch.nn.Module):");
                classes.push((c.clone(), text));
                c
            }
        };
        names.insert(region.name.clone(), class);
    }
    Ok((names, classes))
}

/// The whole script for `exec` (a wrapped model, traced), `stem` naming the weights file
/// beside it (`<stem>.safetensors`).
pub fn script(exec: &PoplarExecutor, target: Target, stem: &str) -> Result<String> {
    let g = exec.model().graph();
    let loss = if exec.is_training() { Some(find_loss(g)?) } else { None };
    let poptorch = target == Target::Poptorch;
    let st = state(exec);
    let tied = exec.model().tied();
    let leaves = leaves::find(g, &st, &tied);
    let params: Vec<String> = exec.model().parameters().into_iter().map(|(n, _)| n).collect();
    let revs = rev::find(g, &st, &params, &tied);
    let fwd = python::forward(g, loss, poptorch, &leaves, &revs)?;
    let blocks = block_classes(g, &revs, &leaves)?;
    let uses_pyg = !revs.is_empty() || leaves.values().any(|l| matches!(l, Leaf::SageConv { .. }));
    let training = exec.is_training();
    if training && fwd.loss_output.is_none() {
        return Err(crate::Error::export(
            "the loss is not among the outputs of forward: return it (PopTorch returns the loss from the model)",
        ));
    }
    let what = if poptorch { "PopTorch, for an IPU-POD" } else { "PyTorch, for CPUs and GPUs" };
    let mut s = vec![
        format!("\"\"\"The model traced by ipu-playground {}, exported as {what}.", env!("CARGO_PKG_VERSION")),
        String::new(),
        format!("The weights are read from {stem}.safetensors beside this file (the export writes it; without it the"),
        "parameters keep a random initialisation). `example_batch` is a data stub: replace it with real data."
            .to_string(),
        "\"\"\"".to_string(),
        "import math".to_string(),
        "import os".to_string(),
        String::new(),
        "import torch".to_string(),
        "import torch.nn.functional as F".to_string(),
    ];
    if uses_pyg {
        s.push("import torch_geometric.nn".into());
    }
    if poptorch {
        s.push(String::new());
        s.push("import poptorch".into());
    }
    s.push(String::new());
    s.push(format!(
        "WEIGHTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), {})",
        str_lit(&format!("{stem}.safetensors"))
    ));
    s.push(String::new());
    s.push(String::new());
    s.push(HELPERS.trim_end().to_string());
    let lamb =
        training && matches!(exec.optimizer().map(|o| o.optimizer_type()), Some(crate::poptorch::OptimizerType::Lamb));
    if lamb && !poptorch {
        s.push(String::new());
        s.push(String::new());
        s.push(LAMB.trim_end().to_string());
    }
    if poptorch {
        s.push(String::new());
        s.push(String::new());
        s.push(WITH.trim_end().to_string());
    }
    s.push(String::new());
    s.push(String::new());
    for (_, text) in &blocks.1 {
        s.extend(text.iter().cloned());
        s.push(String::new());
        s.push(String::new());
    }
    let rev_classes: Vec<(&Rev, String)> = revs.values().map(|r| (r, blocks.0[&r.region].clone())).collect();
    s.extend(model_class(exec, &fwd, &leaves, &rev_classes));
    s.push(String::new());
    s.push(String::new());
    s.push("def load_model():".into());
    s.push("    \"\"\"The model with the exported weights, when the file is there.\"\"\"".into());
    s.push("    model = Model()".into());
    s.push("    if os.path.exists(WEIGHTS):".into());
    s.push("        import safetensors.torch".into());
    s.push("".into());
    s.push("        model.load_state_dict(safetensors.torch.load_file(WEIGHTS), strict=True)".into());
    s.push("    return model".into());
    s.push(String::new());
    s.push(String::new());
    let factor = exec.combined_batch_factor();
    s.push("def example_batch(factor=1, generator=None):".into());
    s.push("    \"\"\"Random inputs of the traced types: one micro-batch, or with `factor` the combined".into());
    s.push(
        "    batch PopTorch takes per call (device iterations x replicas / input group x accumulation).\"\"\"".into(),
    );
    let stubs: Vec<String> = fwd.args.iter().map(|a| stub(g, a)).collect();
    s.push(format!("    return ({}{})", stubs.join(", "), if stubs.len() == 1 { "," } else { "" }));
    s.push(String::new());
    s.push(String::new());
    let out_of = |outs: &str| match (fwd.loss_output, fwd.n_outputs) {
        (Some(_), 1) => outs.to_string(),
        (Some(i), _) => format!("{outs}[{i}]"),
        (None, _) => outs.to_string(),
    };
    if poptorch {
        s.push(format!("COMBINED_BATCH_FACTOR = {factor}"));
        s.push(String::new());
        s.push(String::new());
        s.push("def wrap(model):".into());
        s.push("    \"\"\"The model wrapped as planned: options, strategy, optimizer.\"\"\"".into());
        for l in popt::options(exec.options()) {
            s.push(format!("    {l}"));
        }
        if training {
            let opt = exec.optimizer().ok_or_else(|| crate::Error::export("a training model without an optimizer"))?;
            for l in popt::optimizer_poptorch(opt, "model") {
                s.push(format!("    {l}"));
            }
            s.push("    wrapped = poptorch.trainingModel(model, opts, optimizer)".into());
        } else {
            s.push("    wrapped = poptorch.inferenceModel(model, opts)".into());
        }
        for (name, _) in exec.model().parameters() {
            if let Some(rg) = exec.grouping(&name) {
                s.push(format!("    {}", popt::replica_grouping("wrapped", &name, rg)));
            }
        }
        s.push("    return wrapped".into());
        s.push(String::new());
        s.push(String::new());
        s.push("if __name__ == \"__main__\":".into());
        s.push("    ipu_model = wrap(load_model())".into());
        s.push("    generator = torch.Generator().manual_seed(0)".into());
        s.push("    for step in range(int(os.environ.get(\"STEPS\", \"1\"))):".into());
        s.push("        outputs = ipu_model(*example_batch(COMBINED_BATCH_FACTOR, generator))".into());
        if training {
            s.push(format!("        print(f\"step {{step}}: loss {{{}}}\")", out_of("outputs")));
        } else {
            s.push("        print(f\"step {step}: {outputs}\")".into());
        }
        if training {
            s.push("    ipu_model.copyWeightsToHost()".into());
        }
    } else {
        s.push("def loss_of(outputs):".into());
        s.push("    \"\"\"The loss among forward's outputs (None for an inference model).\"\"\"".into());
        match fwd.loss_output {
            Some(_) => s.push(format!("    return {}", out_of("outputs"))),
            None => s.push("    return None".into()),
        }
        s.push(String::new());
        s.push(String::new());
        if training {
            let opt = exec.optimizer().ok_or_else(|| crate::Error::export("a training model without an optimizer"))?;
            s.push("def make_optimizer(model):".into());
            s.push("    \"\"\"The wrapped model's optimizer, as torch.optim has it.\"\"\"".into());
            s.push(format!("    return {}", popt::optimizer_torch(opt, "model")?));
            s.push(String::new());
            s.push(String::new());
            let clip = opt.max_grad_norm();
            s.push("def train(model, steps, factor=1, generator=None):".into());
            s.push("    \"\"\"The Training view's loop: a step per batch, the optimizer after each.\"\"\"".into());
            s.push("    optimizer = make_optimizer(model)".into());
            s.push("    model.train()".into());
            s.push("    for step in range(steps):".into());
            s.push("        optimizer.zero_grad()".into());
            s.push("        loss = loss_of(model(*example_batch(factor, generator)))".into());
            s.push("        loss.backward()".into());
            if clip.is_finite() {
                s.push(format!(
                    "        torch.nn.utils.clip_grad_norm_(model.parameters(), {})",
                    python::f32_lit(clip)
                ));
            }
            s.push("        optimizer.step()".into());
            s.push("        print(f\"step {step}: loss {loss.item():.6f}\")".into());
            s.push(String::new());
            s.push(String::new());
            s.push("if __name__ == \"__main__\":".into());
            s.push("    train(load_model(), int(os.environ.get(\"STEPS\", \"10\")), generator=torch.Generator().manual_seed(0))".into());
        } else {
            s.push("if __name__ == \"__main__\":".into());
            s.push("    model = load_model().eval()".into());
            s.push("    with torch.no_grad():".into());
            s.push("        print(model(*example_batch(generator=torch.Generator().manual_seed(0))))".into());
        }
    }
    let mut text = s.join("\n");
    text.push('\n');
    Ok(text)
}
