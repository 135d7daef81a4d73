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

fn node_line(g: &Graph, n: &Node, out: &mut String) {
    let lhs: Vec<String> = n.outputs.iter().map(|v| v.to_string()).collect();
    let ins: Vec<String> = n.inputs.iter().map(|v| v.to_string()).collect();
    let a = attrs(&n.op);
    let mut line = String::from("  ");
    if !lhs.is_empty() {
        write!(line, "{} = ", lhs.join(", ")).unwrap();
    }
    line.push_str(n.op.name());
    match &n.op {
        Op::Placeholder { .. } | Op::Constant { .. } => write!(line, " {a}").unwrap(),
        _ => {
            write!(line, "({})", ins.join(", ")).unwrap();
            if !a.is_empty() {
                write!(line, " [{a}]").unwrap();
            }
        }
    }
    if !n.outputs.is_empty() {
        let tys: Vec<String> = n.outputs.iter().map(|&v| g.ty(v).to_string()).collect();
        write!(line, " : {}", tys.join(", ")).unwrap();
    }
    let mut notes = Vec::new();
    if !n.meta.scope.is_empty() {
        notes.push(n.meta.scope.clone());
    }
    match (&n.meta.block, n.meta.ipu) {
        (Some(b), Some(i)) => notes.push(format!("block \"{b}\" ipu {i}")),
        (Some(b), None) => notes.push(format!("block \"{b}\"")),
        (None, Some(i)) => notes.push(format!("ipu {i}")),
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
        notes.push(format!("available memory {}", p.0));
    }
    if let Some(src) = &n.meta.source {
        notes.push(src.clone());
    }
    if !notes.is_empty() {
        let pad = 44usize.saturating_sub(line.chars().count()).max(2);
        write!(line, "{}# {}", " ".repeat(pad), notes.join(" | ")).unwrap();
    }
    out.push_str(&line);
    out.push('\n');
}

/// Prints a graph, with its invertible regions' bodies after it.
pub fn print_graph(g: &Graph) -> String {
    let mut out = String::new();
    print_named(g, "graph", &mut out);
    let mut seen = Vec::new();
    for n in &g.nodes {
        if let Op::Call { region } | Op::InvertibleBackward { region, .. } = &n.op {
            if !seen.contains(&region.name) {
                seen.push(region.name.clone());
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
