//! The printed form of a graph: one line per node, like a torch.fx graph or a jaxpr.
//!
//! ```text
//! graph(x: f32[2,4]) {
//!   %0 = input "x" : f32[2,4]
//!   %1 = parameter "fc0.weight" : f32[8,4]
//!   %3 = linear(%0, %1, %2) : f32[2,8]    # fc0 | block "0" ipu 0 | model.js:7
//!   return (%6)
//! }
//! ```

use super::graph::{Graph, Node, Pass};
use super::op::{Conv2dGeom, InputKind, Op, Pool2dGeom};
use std::fmt::{self, Write};

fn pool_attrs(g: &Pool2dGeom) -> String {
    let Pool2dGeom { kernel, stride, padding, dilation, ceil_mode } = g;
    let mut s = format!("kernel={kernel:?} stride={stride:?} padding={padding:?}");
    if *dilation != [1, 1] {
        write!(s, " dilation={dilation:?}").unwrap();
    }
    if *ceil_mode {
        s.push_str(" ceil_mode=true");
    }
    s
}

fn attrs(op: &Op) -> String {
    match op {
        Op::Placeholder { name, .. } => format!("\"{name}\""),
        Op::Constant { name, value } => format!("\"{name}\" {:?}", value.shape()),
        Op::Full { value, .. } => format!("value={value}"),
        Op::Unary { kind: crate::ir::UnaryKind::GeluTanh } => "approximate=tanh".into(),
        Op::Linear { has_bias } | Op::LinearAdd { has_bias } => {
            if *has_bias {
                String::new()
            } else {
                "bias=false".into()
            }
        }
        Op::SpMM { n_rows, n_cols } | Op::SpMMTransposed { n_rows, n_cols } | Op::SpMMValuesGrad { n_rows, n_cols } => {
            format!("sparse={n_rows}x{n_cols}")
        }
        Op::Conv2d { geom, has_bias } => {
            let Conv2dGeom { stride, padding, dilation, groups } = geom;
            let mut s = format!("stride={stride:?} padding={padding:?} dilation={dilation:?} groups={groups}");
            if !has_bias {
                s.push_str(" bias=false");
            }
            s
        }
        Op::Conv2dGradInput { geom, .. } | Op::Conv2dGradWeight { geom, .. } => {
            let Conv2dGeom { stride, padding, dilation, groups } = geom;
            format!("stride={stride:?} padding={padding:?} dilation={dilation:?} groups={groups}")
        }
        Op::MaxPool2d { geom } | Op::MaxPool2dGrad { geom } => pool_attrs(geom),
        Op::AvgPool2d { geom, count_include_pad } | Op::AvgPool2dGrad { geom, count_include_pad, .. } => {
            format!("{} count_include_pad={count_include_pad}", pool_attrs(geom))
        }
        Op::AdaptiveAvgPool2d { output } => format!("output={output:?}"),
        Op::Reduce { dims, keepdim, .. } => format!("dims={dims:?} keepdim={keepdim}"),
        Op::Max { dim, keepdim } | Op::ArgMax { dim, keepdim } | Op::MaxGrad { dim, keepdim } => {
            format!("dim={dim} keepdim={keepdim}")
        }
        Op::Softmax { dim } | Op::LogSoftmax { dim } | Op::SoftmaxGrad { dim } | Op::LogSoftmaxGrad { dim } => {
            format!("dim={dim}")
        }
        Op::LayerNorm { eps, .. }
        | Op::LayerNormGrad { eps, .. }
        | Op::BatchNorm { eps, .. }
        | Op::BatchNormGrad { eps, .. } => format!("eps={eps}"),
        Op::Dropout { p } | Op::RandomMask { p, .. } => format!("p={p}"),
        Op::CrossEntropy { reduction, class_weight, ignore_index, label_smoothing, .. }
        | Op::CrossEntropyGrad { reduction, class_weight, ignore_index, label_smoothing, .. } => {
            let mut s = format!("reduction={reduction:?}").to_lowercase();
            if let Some(w) = class_weight {
                write!(s, " class_weight={w:?}").unwrap();
            }
            if let Some(i) = ignore_index {
                write!(s, " ignore_index={i}").unwrap();
            }
            if *label_smoothing != 0.0 {
                write!(s, " label_smoothing={label_smoothing}").unwrap();
            }
            s
        }
        Op::OneHot { num_classes } => format!("num_classes={num_classes}"),
        Op::IdentityLoss { reduction } => format!("reduction={reduction:?}").to_lowercase(),
        Op::Reshape { shape } | Op::BroadcastTo { shape } | Op::SumTo { shape } => format!("shape={shape:?}"),
        Op::Permute { dims } => format!("dims={dims:?}"),
        Op::Concat { dim } | Op::IndexSelect { dim } | Op::Gather { dim } => format!("dim={dim}"),
        Op::Split { sizes, dim } => format!("sizes={sizes:?} dim={dim}"),
        Op::Slice { dim, start, end, step } | Op::SliceGrad { dim, start, end, step, .. } => {
            format!("dim={dim} {start}:{end}:{step}")
        }
        Op::DynamicSlice { dim, size } | Op::DynamicSliceGrad { dim, size, .. } => format!("dim={dim} size={size}"),
        Op::Cast { dtype } => format!("dtype={dtype}"),
        Op::ScatterAdd { dim_size } | Op::ScatterMean { dim_size } | Op::ScatterMeanGrad { dim_size } => {
            format!("dim_size={dim_size}")
        }
        Op::IndexAdd { dim, dim_size } => format!("dim={dim} dim_size={dim_size}"),
        Op::BufferUpdate { name } => format!("\"{name}\""),
        Op::Call { region } | Op::InvertibleBackward { region, .. } => {
            format!("\"{}\"{}", region.name, if region.inverse.is_some() { " invertible" } else { "" })
        }
        Op::OptimizerUpdate { param, step } => format!("\"{param}\" {step:?}"),
        _ => String::new(),
    }
}

/// `items` written to `out` with `sep` between them.
fn write_joined<T: fmt::Display>(out: &mut String, items: impl IntoIterator<Item = T>, sep: &str) {
    for (i, x) in items.into_iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        write!(out, "{x}").unwrap();
    }
}

/// A tensor type as `Display` prints it (`f32[2,4]`), without its temporary strings.
fn write_type(out: &mut String, g: &Graph, v: crate::ir::ValueId) {
    let t = g.ty(v);
    write!(out, "{}[", t.dtype).unwrap();
    write_joined(out, &t.shape, ",");
    out.push(']');
}

/// One node's line, written straight into `out` (a deep model prints some 50,000 lines).
fn node_line(g: &Graph, n: &Node, out: &mut String) {
    let start = out.len();
    out.push_str("  ");
    if !n.outputs.is_empty() {
        write_joined(out, &n.outputs, ", ");
        out.push_str(" = ");
    }
    out.push_str(n.op.name());
    let a = attrs(&n.op);
    match &n.op {
        Op::Placeholder { .. } | Op::Constant { .. } => {
            out.push(' ');
            out.push_str(&a);
        }
        _ => {
            out.push('(');
            write_joined(out, &n.inputs, ", ");
            out.push(')');
            if !a.is_empty() {
                write!(out, " [{a}]").unwrap();
            }
        }
    }
    if !n.outputs.is_empty() {
        out.push_str(" : ");
        for (i, &v) in n.outputs.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write_type(out, g, v);
        }
    }
    let mut notes: Vec<std::borrow::Cow<'_, str>> = Vec::new();
    if !n.meta.scope.is_empty() {
        notes.push(n.meta.scope.as_str().into());
    }
    match (&n.meta.block, n.meta.ipu) {
        (Some(b), Some(i)) => notes.push(format!("block \"{b}\" ipu {i}").into()),
        (Some(b), None) => notes.push(format!("block \"{b}\"").into()),
        (None, Some(i)) => notes.push(format!("ipu {i}").into()),
        (None, None) => {}
    }
    match n.meta.pass {
        Pass::Forward => {}
        Pass::Backward => notes.push("backward".into()),
        Pass::Optimizer => notes.push("optimizer".into()),
    }
    if n.meta.checkpoint {
        notes.push("checkpoint".into());
    }
    if let Some(p) = n.meta.available_memory {
        notes.push(format!("available memory {}", p.0).into());
    }
    if let Some(src) = &n.meta.source {
        notes.push(src.as_str().into());
    }
    if !notes.is_empty() {
        let pad = 44usize.saturating_sub(out[start..].chars().count()).max(2);
        for _ in 0..pad {
            out.push(' ');
        }
        out.push_str("# ");
        write_joined(out, &notes, " | ");
    }
    out.push('\n');
}

/// Prints a graph, with its invertible regions' bodies after it.
pub fn print_graph(g: &Graph) -> String {
    let mut out = String::new();
    print_named(g, "graph", &mut out);
    let mut seen = std::collections::HashSet::new();
    for n in &g.nodes {
        if let Op::Call { region } | Op::InvertibleBackward { region, .. } = &n.op {
            if seen.insert(region.name.as_str()) {
                out.push('\n');
                print_named(&region.forward, &format!("region \"{}\"", region.name), &mut out);
                if let Some(inv) = &region.inverse {
                    out.push('\n');
                    print_named(inv, &format!("inverse \"{}\"", region.name), &mut out);
                }
            }
        }
    }
    out
}

fn print_named(g: &Graph, title: &str, out: &mut String) {
    let ins: Vec<String> =
        g.placeholders(InputKind::Input).iter().map(|(name, v)| format!("{name}: {}", g.ty(*v))).collect();
    writeln!(out, "{title}({}) {{", ins.join(", ")).unwrap();
    for n in &g.nodes {
        node_line(g, n, out);
    }
    let outs: Vec<String> = g.outputs.iter().map(|v| v.to_string()).collect();
    writeln!(out, "  return ({})", outs.join(", ")).unwrap();
    out.push_str("}\n");
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print_graph(self))
    }
}
