//! Golden tests: every case in `tests/golden/ops/*.json` (PyTorch reference results made by
//! `tests/golden/make_golden.py`) is mapped to an IR op and run through
//! `ipu_playground::kernels::eval`; the forward outputs must match.
//!
//! Tolerances: float32 `|got − want| ≤ 1e-6 + 1e-5·|want|` (the goldens are float64 results
//! rounded to float32); float16 bit-exact (±inf and NaN included); int32 and bool exact.
//!
//! A second test checks the backward kernels that have a direct PyTorch counterpart
//! (UnaryGrad, PowGrad, SoftmaxGrad, LogSoftmaxGrad, LayerNormGrad, CrossEntropyGrad,
//! MaxGrad, SliceGrad, IndexAdd, GatherGrad, ScatterMeanGrad, SpMMTransposed,
//! SpMMValuesGrad, Conv2dGradInput/Weight, the pooling gradients and BatchNormGrad) against
//! the fixtures' gradients.

use half::f16;
use ipu_playground::ir::{BinaryKind, Conv2dGeom, Op, Pool2dGeom, ReduceKind, Reduction, UnaryKind};
use ipu_playground::kernels::eval;
use ipu_playground::tensor::{DType, Tensor};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/ops")
}

struct Case {
    file: String,
    name: String,
    op: String,
    attrs: Value,
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
    grad_outputs: Vec<Tensor>,
    grads: Vec<Option<Tensor>>,
}

fn load_cases() -> Vec<Case> {
    let dir = golden_dir();
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => {
            rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect()
        }
        Err(_) => vec![],
    };
    files.sort();
    let mut cases = vec![];
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
        let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", f.display()));
        let file = f.file_name().unwrap().to_string_lossy().into_owned();
        for c in doc["cases"].as_array().unwrap_or_else(|| panic!("{file}: no \"cases\" array")) {
            let name = c["name"].as_str().unwrap_or("?").to_string();
            let ctx = format!("{file}:{name}");
            let tensors = |key: &str| -> Vec<Tensor> {
                c[key].as_array().map(|a| a.iter().map(|t| tensor(t, &ctx)).collect()).unwrap_or_default()
            };
            let grads = c["grads"]
                .as_array()
                .map(|a| a.iter().map(|t| if t.is_null() { None } else { Some(tensor(t, &ctx)) }).collect())
                .unwrap_or_default();
            cases.push(Case {
                file: file.clone(),
                name,
                op: c["op"].as_str().unwrap_or("").to_string(),
                attrs: c["attrs"].clone(),
                inputs: tensors("inputs"),
                outputs: tensors("outputs"),
                grad_outputs: tensors("grad_outputs"),
                grads,
            });
        }
    }
    cases
}

fn num(v: &Value, ctx: &str) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap(),
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        Value::String(s) if s == "nan" => f64::NAN,
        Value::Bool(b) => *b as u8 as f64,
        other => panic!("{ctx}: bad number {other}"),
    }
}

fn tensor(t: &Value, ctx: &str) -> Tensor {
    let shape: Vec<usize> = t["shape"]
        .as_array()
        .unwrap_or_else(|| panic!("{ctx}: tensor without shape"))
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let dtype = DType::parse(t["dtype"].as_str().unwrap_or("?")).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let data = t["data"].as_array().unwrap_or_else(|| panic!("{ctx}: tensor without data"));
    let r = match dtype {
        DType::Float32 => Tensor::from_f32(&shape, data.iter().map(|v| num(v, ctx) as f32).collect()),
        DType::Float16 => {
            // A float16 tensor holds its halves as float32 values (exact).
            let v: Vec<f32> = data.iter().map(|v| f16::from_f64(num(v, ctx)).to_f32()).collect();
            ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), v)
                .map(Tensor::F16)
                .map_err(|e| ipu_playground::Error::tensor(e.to_string()))
        }
        DType::Int32 => Tensor::from_i32(&shape, data.iter().map(|v| num(v, ctx) as i32).collect()),
        DType::Bool => Tensor::from_bool(&shape, data.iter().map(|v| num(v, ctx) != 0.0).collect()),
    };
    r.unwrap_or_else(|e| panic!("{ctx}: {e}"))
}

// ---------------------------------------------------------------------------------------
// case → Op
// ---------------------------------------------------------------------------------------

fn attr_i(a: &Value, k: &str) -> Result<i64, String> {
    a[k].as_i64().ok_or_else(|| format!("attribute '{k}' missing or not an integer"))
}

fn attr_list(a: &Value, k: &str) -> Result<Vec<i64>, String> {
    a[k].as_array()
        .ok_or_else(|| format!("attribute '{k}' missing or not a list"))?
        .iter()
        .map(|v| v.as_i64().ok_or_else(|| format!("attribute '{k}' has a non-integer")))
        .collect()
}

/// A possibly negative dim, normalised against `rank`.
fn dim(d: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let n = if d < 0 { d + r } else { d };
    if n < 0 || n >= r.max(1) {
        return Err(format!("dim {d} out of range for rank {rank}"));
    }
    Ok(n as usize)
}

fn reduction(a: &Value) -> Result<Reduction, String> {
    match a["reduction"].as_str() {
        Some("mean") => Ok(Reduction::Mean),
        Some("sum") => Ok(Reduction::Sum),
        Some("none") => Ok(Reduction::None),
        other => Err(format!("bad reduction {other:?}")),
    }
}

/// torch.chunk's sizes: chunks of ceil(n / chunks), the last one smaller (so possibly
/// fewer than `chunks` pieces).
fn chunk_sizes(n: usize, chunks: usize) -> Vec<usize> {
    let c = n.div_ceil(chunks.max(1)).max(1);
    let mut sizes = vec![];
    let mut left = n;
    while left > 0 {
        sizes.push(c.min(left));
        left -= c.min(left);
    }
    sizes
}

/// A two-element attribute (`[h, w]`).
fn attr_pair(a: &Value, k: &str) -> Result<[usize; 2], String> {
    match attr_list(a, k)?.as_slice() {
        &[h, w] if h >= 0 && w >= 0 => Ok([h as usize, w as usize]),
        other => Err(format!("attribute '{k}' must be two sizes, got {other:?}")),
    }
}

fn pool_geom(a: &Value, dilation: bool) -> Result<Pool2dGeom, String> {
    Ok(Pool2dGeom {
        kernel: attr_pair(a, "kernel_size")?,
        stride: attr_pair(a, "stride")?,
        padding: attr_pair(a, "padding")?,
        dilation: if dilation { attr_pair(a, "dilation")? } else { [1, 1] },
        ceil_mode: a["ceil_mode"].as_bool().ok_or("ceil_mode missing")?,
    })
}

fn to_op(c: &Case) -> Result<Op, String> {
    let a = &c.attrs;
    let rank = c.inputs.first().map_or(0, |t| t.shape().len());
    let unary = |kind| Ok(Op::Unary { kind });
    let binary = |kind| Ok(Op::Binary { kind });
    match c.op.as_str() {
        "add" => binary(BinaryKind::Add),
        "sub" => binary(BinaryKind::Sub),
        "mul" => binary(BinaryKind::Mul),
        "div" => binary(BinaryKind::Div),
        "pow" => binary(BinaryKind::Pow),
        "neg" => unary(UnaryKind::Neg),
        "exp" => unary(UnaryKind::Exp),
        "log" => unary(UnaryKind::Log),
        "sqrt" => unary(UnaryKind::Sqrt),
        "relu" => unary(UnaryKind::Relu),
        "tanh" => unary(UnaryKind::Tanh),
        "sigmoid" => unary(UnaryKind::Sigmoid),
        "gelu" => match a["approximate"].as_str().unwrap_or("none") {
            "none" => unary(UnaryKind::Gelu),
            "tanh" => unary(UnaryKind::GeluTanh),
            other => Err(format!("unknown gelu approximation {other}")),
        },
        "where" => Ok(Op::Where),
        "matmul" => Ok(Op::MatMul),
        "linear" => Ok(Op::Linear { has_bias: c.inputs.len() == 3 }),
        "sum" | "mean" => {
            let kind = if c.op == "sum" { ReduceKind::Sum } else { ReduceKind::Mean };
            let mut dims = attr_list(a, "dims")?.into_iter().map(|d| dim(d, rank)).collect::<Result<Vec<_>, _>>()?;
            dims.sort_unstable();
            Ok(Op::Reduce { kind, dims, keepdim: a["keepdim"].as_bool().unwrap_or(false) })
        }
        "max" | "argmax" => {
            let d = dim(attr_i(a, "dim")?, rank)?;
            let keepdim = a["keepdim"].as_bool().unwrap_or(false);
            Ok(if c.op == "max" { Op::Max { dim: d, keepdim } } else { Op::ArgMax { dim: d, keepdim } })
        }
        "softmax" => Ok(Op::Softmax { dim: dim(attr_i(a, "dim")?, rank)? }),
        "log_softmax" => Ok(Op::LogSoftmax { dim: dim(attr_i(a, "dim")?, rank)? }),
        "layer_norm" => Ok(Op::LayerNorm {
            normalized_ndim: attr_list(a, "normalized_shape")?.len(),
            eps: a["eps"].as_f64().ok_or("eps missing")? as f32,
            affine: c.inputs.len() == 3,
        }),
        "conv2d" => Ok(Op::Conv2d {
            geom: Conv2dGeom {
                stride: attr_pair(a, "stride")?,
                padding: attr_pair(a, "padding")?,
                dilation: attr_pair(a, "dilation")?,
                groups: attr_i(a, "groups")? as usize,
            },
            has_bias: c.inputs.len() == 3,
        }),
        "max_pool2d" => Ok(Op::MaxPool2d { geom: pool_geom(a, true)? }),
        "avg_pool2d" => Ok(Op::AvgPool2d {
            geom: pool_geom(a, false)?,
            count_include_pad: a["count_include_pad"].as_bool().ok_or("count_include_pad missing")?,
        }),
        "adaptive_avg_pool2d" => Ok(Op::AdaptiveAvgPool2d { output: attr_pair(a, "output_size")? }),
        "batch_norm" => {
            Ok(Op::BatchNorm { eps: a["eps"].as_f64().ok_or("eps missing")? as f32, affine: c.inputs.len() == 3 })
        }
        "dropout" => Ok(Op::Dropout { p: a["p"].as_f64().ok_or("p missing")? as f32 }),
        "cross_entropy" => Ok(Op::CrossEntropy {
            reduction: reduction(a)?,
            class_weight: a["class_weight"]
                .as_array()
                .map(|w| w.iter().map(|v| v.as_f64().unwrap_or(f64::NAN) as f32).collect()),
            has_mask: c.inputs.len() == 3,
            ignore_index: a["ignore_index"].as_i64().map(|i| i as i32),
            label_smoothing: a["label_smoothing"].as_f64().unwrap_or(0.0) as f32,
        }),
        "one_hot" => Ok(Op::OneHot { num_classes: attr_i(a, "num_classes")? as usize }),
        "identity_loss" => Ok(Op::IdentityLoss { reduction: reduction(a)? }),
        "reshape" => {
            let spec = attr_list(a, "shape")?;
            let numel = c.inputs[0].numel();
            let known: usize = spec.iter().filter(|&&d| d >= 0).map(|&d| d as usize).product();
            let shape =
                spec.iter().map(|&d| if d < 0 { numel.checked_div(known).unwrap_or(0) } else { d as usize }).collect();
            Ok(Op::Reshape { shape })
        }
        "permute" => {
            Ok(Op::Permute { dims: attr_list(a, "dims")?.into_iter().map(|d| dim(d, rank)).collect::<Result<_, _>>()? })
        }
        "transpose" => {
            let (d0, d1) = (dim(attr_i(a, "dim0")?, rank)?, dim(attr_i(a, "dim1")?, rank)?);
            let mut dims: Vec<usize> = (0..rank).collect();
            dims.swap(d0, d1);
            Ok(Op::Permute { dims })
        }
        "concat" => Ok(Op::Concat { dim: dim(attr_i(a, "dim")?, rank)? }),
        "chunk" => {
            let d = dim(attr_i(a, "dim")?, rank)?;
            Ok(Op::Split { sizes: chunk_sizes(c.inputs[0].shape()[d], attr_i(a, "chunks")? as usize), dim: d })
        }
        "split" => Ok(Op::Split {
            sizes: attr_list(a, "sizes")?.into_iter().map(|s| s as usize).collect(),
            dim: dim(attr_i(a, "dim")?, rank)?,
        }),
        "slice" => {
            let d = dim(attr_i(a, "dim")?, rank)?;
            let len = c.inputs[0].shape()[d] as i64;
            let clamp = |v: i64| (if v < 0 { v + len } else { v }).clamp(0, len) as usize;
            let start = clamp(attr_i(a, "start")?);
            let end = clamp(attr_i(a, "end")?).max(start);
            Ok(Op::Slice { dim: d, start, end, step: attr_i(a, "step")? as usize })
        }
        "index_select" => Ok(Op::IndexSelect { dim: dim(attr_i(a, "dim")?, rank)? }),
        "gather" => Ok(Op::Gather { dim: dim(attr_i(a, "dim")?, rank)? }),
        "cast" => Ok(Op::Cast {
            dtype: DType::parse(a["dtype"].as_str().ok_or("dtype missing")?).map_err(|e| e.to_string())?,
        }),
        "scatter_add" => Ok(Op::ScatterAdd { dim_size: attr_i(a, "dim_size")? as usize }),
        "scatter_mean" => Ok(Op::ScatterMean { dim_size: attr_i(a, "dim_size")? as usize }),
        "spmm" => Ok(Op::SpMM { n_rows: attr_i(a, "n_rows")? as usize, n_cols: attr_i(a, "n_cols")? as usize }),
        other => Err(format!("no mapping for golden op '{other}'")),
    }
}

// ---------------------------------------------------------------------------------------
// comparison
// ---------------------------------------------------------------------------------------

/// The distance in units in the last place between two finite halves of one sign (or any
/// two zeros); `u32::MAX` otherwise.
fn f16_ulps(a: f32, b: f32) -> u32 {
    let (x, y) = (f16::from_f32(a), f16::from_f32(b));
    if x.is_nan() || y.is_nan() || x.is_infinite() != y.is_infinite() {
        return u32::MAX;
    }
    if (x.to_bits() & 0x7fff) == 0 && (y.to_bits() & 0x7fff) == 0 {
        return 0;
    }
    if x.is_sign_negative() != y.is_sign_negative() {
        return u32::MAX;
    }
    ((x.to_bits() & 0x7fff) as i32 - (y.to_bits() & 0x7fff) as i32).unsigned_abs()
}

/// Compares one tensor; returns a description of the first mismatch. Float16 must be
/// within `ulps` units in the last place (0: bit-exact).
fn compare(got: &Tensor, want: &Tensor, rtol: f64, atol: f64, ulps: u32) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!("got {}{:?}, want {}{:?}", got.dtype(), got.shape(), want.dtype(), want.shape()));
    }
    match (got, want) {
        (Tensor::F16(g), Tensor::F16(w)) => {
            for (i, (a, b)) in g.iter().zip(w.iter()).enumerate() {
                let same = a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()) || f16_ulps(*a, *b) <= ulps;
                if !same {
                    return Err(format!(
                        "element {i}: got {a} ({:#06x}), want {b} ({:#06x})",
                        f16::from_f32(*a).to_bits(),
                        f16::from_f32(*b).to_bits()
                    ));
                }
            }
            Ok(())
        }
        (Tensor::F32(g), Tensor::F32(w)) => {
            for (i, (&a, &b)) in g.iter().zip(w.iter()).enumerate() {
                let (a, b) = (a as f64, b as f64);
                let ok = (a - b).abs() <= atol + rtol * b.abs() || (a.is_nan() && b.is_nan());
                if !ok {
                    return Err(format!("element {i}: got {a}, want {b} (diff {:.3e})", (a - b).abs()));
                }
            }
            Ok(())
        }
        _ => {
            if got != want {
                return Err(format!("got {:?}, want {:?}", got.to_f64_vec(), want.to_f64_vec()));
            }
            Ok(())
        }
    }
}

fn run_forward(c: &Case) -> Result<(), String> {
    let op = to_op(c)?;
    let ins: Vec<&Tensor> = c.inputs.iter().collect();
    let outs = eval(&op, &ins).map_err(|e| format!("{op:?}: {e}"))?;
    if outs.len() != c.outputs.len() {
        return Err(format!("{op:?}: {} outputs, want {}", outs.len(), c.outputs.len()));
    }
    // A float16 case whose reference is the correctly rounded result (float64, rounded once:
    // the vision ops and linear) may be one unit in the last place away, as float32 sums
    // are; every other float16 case is bit-exact.
    let ulps = if c.attrs.get("reference").and_then(Value::as_str) == Some("float64_rounded_once") { 1 } else { 0 };
    for (k, (g, w)) in outs.iter().zip(&c.outputs).enumerate() {
        compare(g, w, 1e-5, 1e-6, ulps).map_err(|e| format!("{op:?} output {k}: {e}"))?;
    }
    Ok(())
}

#[test]
fn golden_forward_kernels() {
    let cases = load_cases();
    assert!(
        !cases.is_empty(),
        "no golden cases found in {} — generate them with tests/golden/make_golden.py (see tests/golden/README.md)",
        golden_dir().display()
    );
    let mut failures = vec![];
    let mut per_file: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for c in &cases {
        let r = run_forward(c);
        let e = per_file.entry(&c.file).or_default();
        e.1 += 1;
        match r {
            Ok(()) => e.0 += 1,
            Err(msg) => failures.push(format!("{}:{} ({}): {msg}", c.file, c.name, c.op)),
        }
    }
    for (f, (ok, n)) in &per_file {
        println!("{f:20} {ok:4}/{n} forward cases pass");
    }
    println!("total: {}/{} forward cases pass", cases.len() - failures.len(), cases.len());
    assert!(failures.is_empty(), "{} golden forward failures:\n{}", failures.len(), failures.join("\n"));
}

// ---------------------------------------------------------------------------------------
// backward kernels against the fixtures' gradients
// ---------------------------------------------------------------------------------------

/// Runs the backward kernel(s) for a case and returns (input position, gradient) pairs, or
/// `None` when the op's gradient is left to the autograd tests.
fn backward(c: &Case, op: &Op) -> Result<Option<Vec<(usize, Tensor)>>, String> {
    let x = &c.inputs;
    let Some(g) = c.grad_outputs.first() else { return Ok(None) };
    let run = |op: Op, ins: &[&Tensor]| eval(&op, ins).map_err(|e| format!("{op:?}: {e}"));
    let one = |op: Op, ins: &[&Tensor]| run(op, ins).map(|mut v| v.remove(0));
    let y = &c.outputs[0];
    Ok(Some(match op {
        Op::Unary { kind } => vec![(0, one(Op::UnaryGrad { kind: *kind }, &[&x[0], g])?)],
        Op::Binary { kind: BinaryKind::Pow } => {
            let gs = run(Op::PowGrad, &[&x[0], &x[1], g])?;
            vec![
                (0, one(Op::SumTo { shape: x[0].shape().to_vec() }, &[&gs[0]])?),
                (1, one(Op::SumTo { shape: x[1].shape().to_vec() }, &[&gs[1]])?),
            ]
        }
        Op::Softmax { dim } => vec![(0, one(Op::SoftmaxGrad { dim: *dim }, &[y, g])?)],
        Op::LogSoftmax { dim } => vec![(0, one(Op::LogSoftmaxGrad { dim: *dim }, &[y, g])?)],
        Op::Max { dim, keepdim } => vec![(0, one(Op::MaxGrad { dim: *dim, keepdim: *keepdim }, &[&x[0], g])?)],
        Op::LayerNorm { normalized_ndim, eps, affine } => {
            let op = Op::LayerNormGrad { normalized_ndim: *normalized_ndim, eps: *eps, affine: *affine };
            if *affine {
                run(op, &[&x[0], &x[1], g])?.into_iter().enumerate().collect()
            } else {
                vec![(0, one(op, &[&x[0], g])?)]
            }
        }
        Op::CrossEntropy { reduction, class_weight, has_mask, ignore_index, label_smoothing } => {
            let op = Op::CrossEntropyGrad {
                reduction: *reduction,
                class_weight: class_weight.clone(),
                has_mask: *has_mask,
                ignore_index: *ignore_index,
                label_smoothing: *label_smoothing,
            };
            let mut ins: Vec<&Tensor> = x.iter().collect();
            ins.push(g);
            vec![(0, one(op, &ins)?)]
        }
        Op::Dropout { p } => vec![(0, one(Op::Dropout { p: *p }, &[g, &x[1]])?)],
        Op::Conv2d { geom, has_bias } => {
            let (geom, in_shape, weight_shape) = (*geom, x[0].shape().to_vec(), x[1].shape().to_vec());
            let mut v = vec![
                (0, one(Op::Conv2dGradInput { geom, in_shape }, &[&x[1], g])?),
                (1, one(Op::Conv2dGradWeight { geom, weight_shape }, &[&x[0], g])?),
            ];
            if *has_bias {
                v.push((2, one(Op::Reduce { kind: ReduceKind::Sum, dims: vec![0, 2, 3], keepdim: false }, &[g])?));
            }
            v
        }
        Op::MaxPool2d { geom } => vec![(0, one(Op::MaxPool2dGrad { geom: *geom }, &[&x[0], g])?)],
        Op::AvgPool2d { geom, count_include_pad } => {
            let op = Op::AvgPool2dGrad {
                geom: *geom,
                count_include_pad: *count_include_pad,
                in_shape: x[0].shape().to_vec(),
            };
            vec![(0, one(op, &[g])?)]
        }
        Op::AdaptiveAvgPool2d { .. } => {
            vec![(0, one(Op::AdaptiveAvgPool2dGrad { in_shape: x[0].shape().to_vec() }, &[g])?)]
        }
        Op::BatchNorm { eps, affine } => {
            let op = Op::BatchNormGrad { eps: *eps, affine: *affine };
            if *affine {
                run(op, &[&x[0], &x[1], g])?.into_iter().enumerate().collect()
            } else {
                vec![(0, one(op, &[&x[0], g])?)]
            }
        }
        Op::Slice { dim, start, end, step } => vec![(
            0,
            one(
                Op::SliceGrad { in_shape: x[0].shape().to_vec(), dim: *dim, start: *start, end: *end, step: *step },
                &[g],
            )?,
        )],
        Op::IndexSelect { dim } => {
            vec![(0, one(Op::IndexAdd { dim: *dim, dim_size: x[0].shape()[*dim] }, &[g, &x[1]])?)]
        }
        Op::Gather { dim } => {
            vec![(0, one(Op::GatherGrad { dim: *dim, in_shape: x[0].shape().to_vec() }, &[g, &x[1]])?)]
        }
        Op::ScatterAdd { .. } => vec![(0, one(Op::IndexSelect { dim: 0 }, &[g, &x[1]])?)],
        Op::ScatterMean { dim_size } => vec![(0, one(Op::ScatterMeanGrad { dim_size: *dim_size }, &[&x[1], g])?)],
        Op::SpMM { n_rows, n_cols } => {
            let (n_rows, n_cols) = (*n_rows, *n_cols);
            vec![
                (2, one(Op::SpMMValuesGrad { n_rows, n_cols }, &[&x[0], &x[1], &x[3], g])?),
                (3, one(Op::SpMMTransposed { n_rows, n_cols }, &[&x[0], &x[1], &x[2], g])?),
            ]
        }
        _ => return Ok(None),
    }))
}

#[test]
fn golden_backward_kernels() {
    let cases = load_cases();
    assert!(!cases.is_empty(), "no golden cases found in {} — see tests/golden/make_golden.py", golden_dir().display());
    let (mut checked, mut failures) = (0, vec![]);
    for c in &cases {
        let Ok(op) = to_op(c) else { continue };
        let r = backward(c, &op).and_then(|grads| {
            let Some(grads) = grads else { return Ok(false) };
            for (k, g) in grads {
                let want =
                    c.grads.get(k).and_then(|g| g.as_ref()).ok_or(format!("fixture has no gradient for input {k}"))?;
                compare(&g, want, 1e-5, 1e-6, 0).map_err(|e| format!("gradient of input {k}: {e}"))?;
            }
            Ok(true)
        });
        match r {
            Ok(true) => checked += 1,
            Ok(false) => {}
            Err(e) => failures.push(format!("{}:{} ({}): {e}", c.file, c.name, c.op)),
        }
    }
    println!("backward kernels: {}/{} cases pass", checked, checked + failures.len());
    assert!(checked > 0, "no golden case exercised a backward kernel");
    assert!(failures.is_empty(), "{} golden backward failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn chunk_sizes_follow_torch() {
    assert_eq!(chunk_sizes(5, 4), vec![2, 2, 1]);
    assert_eq!(chunk_sizes(7, 3), vec![3, 3, 1]);
    assert_eq!(chunk_sizes(6, 3), vec![2, 2, 2]);
    assert_eq!(chunk_sizes(4, 2), vec![2, 2]);
}
