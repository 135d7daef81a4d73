//! Shared by the planner's integration tests (tests/planner_*.rs): small traced models
//! with PopTorch-style Block annotations.
#![allow(dead_code)]

use ipu_playground::autograd::{training_graph, TrainOptions};
use ipu_playground::compile::{plan, Options, Plan};
use ipu_playground::ir::{Graph, OptimizerStep};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::DType;
use ipu_playground::trace::nn::{Linear, Module};
use ipu_playground::trace::Tracer;

/// SGD with momentum: one state tensor per parameter.
pub fn sgd() -> OptimizerStep {
    OptimizerStep::sgd(0.01, 0.9, 0.0)
}

/// A chain of `Linear(width, width) + ReLU` layers on a `[batch, width]` input, layer `i`
/// inside `Block(blocks[i].0, ipu_id=blocks[i].1)`; the loss (a mean) in the last block.
pub fn chain_sized(blocks: &[(&str, Option<usize>)], training: bool, batch: usize, width: usize) -> Graph {
    let mut rng = Rng::new(0);
    let tr = Tracer::new();
    let x = tr.input("x", &[batch, width], DType::Float32).unwrap();
    let mut h = x;
    for (i, (id, ipu)) in blocks.iter().enumerate() {
        let lin = Linear::new(width, width, true, &mut rng).unwrap();
        let last = i + 1 == blocks.len();
        h = tr
            .block(id, *ipu, || {
                let y = tr.scope(&format!("layer{i}"), || lin.forward(&tr, &h))?.relu()?;
                if last {
                    y.mean(&[], false)
                } else {
                    Ok(y)
                }
            })
            .unwrap();
    }
    let t = tr.finish(&[&h]).unwrap();
    if training {
        training_graph(&t.graph, 0, &TrainOptions { optimizer: Some(sgd()), ..Default::default() }).unwrap().graph
    } else {
        t.graph
    }
}

/// [`chain_sized`] with a batch of 4 and width 8.
pub fn chain(blocks: &[(&str, Option<usize>)], training: bool) -> Graph {
    chain_sized(blocks, training, 4, 8)
}

/// Blocks named `b0`, `b1`, … on the given IPUs.
pub fn on_ipus(ipus: &[usize], training: bool) -> Graph {
    let names: Vec<String> = (0..ipus.len()).map(|i| format!("b{i}")).collect();
    let blocks: Vec<(&str, Option<usize>)> =
        names.iter().map(|n| n.as_str()).zip(ipus.iter().map(|&i| Some(i))).collect();
    chain(&blocks, training)
}

/// The codes of a plan's errors.
pub fn error_codes(p: &Plan) -> Vec<&'static str> {
    p.errors.iter().map(|e| e.code).collect()
}

/// The codes of a plan's warnings.
pub fn warning_codes(p: &Plan) -> Vec<&'static str> {
    p.warnings.iter().map(|e| e.code).collect()
}

/// The error with `code`, or a panic listing the plan's errors.
pub fn error<'a>(p: &'a Plan, code: &str) -> &'a ipu_playground::compile::Diagnostic {
    p.errors.iter().find(|e| e.code == code).unwrap_or_else(|| panic!("no {code} error in {:#?}", p.errors))
}

/// Plans with options built by `f` from the defaults.
pub fn plan_opts(g: &Graph, f: impl FnOnce(&mut Options)) -> Plan {
    let mut o = Options::new();
    f(&mut o);
    plan(g, &o)
}
