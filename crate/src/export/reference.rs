//! What an exported model must reproduce: one step of the engine's own executor on given
//! inputs (one micro-batch) — the forward's outputs and, for a training model, the loss and
//! every parameter's gradient (autograd's training graph, as the PopTorch executor
//! compiles it, without loss scaling) — plus the dropout keep masks the step drew, in the
//! order the forward draws them, so the check can feed them to the exported model's
//! `_random_mask` instead of torch's generator.

use crate::autograd::{find_loss, training_graph_at, TrainOptions};
use crate::exec::{run, Store};
use crate::ir::{Graph, Op};
use crate::poptorch::HostModel;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::rc::Rc;

/// One step's values (see the module docs).
#[derive(Clone, Debug)]
pub struct Reference {
    /// The forward's outputs.
    pub outputs: Vec<Tensor>,
    /// The index of the loss among `outputs` (training models).
    pub loss_output: Option<usize>,
    /// Each parameter's gradient, by name, in placeholder order (training models).
    pub gradients: Vec<(String, Tensor)>,
    /// Every `random_mask` the forward drew, in order.
    pub masks: Vec<Tensor>,
}

fn masks_inside_regions(g: &Graph) -> bool {
    g.nodes.iter().any(|n| match &n.op {
        Op::Call { region } => {
            let inner =
                |r: &Graph| r.nodes.iter().any(|m| matches!(m.op, Op::RandomMask { .. })) || masks_inside_regions(r);
            inner(&region.forward) || region.inverse.as_ref().is_some_and(inner)
        }
        _ => false,
    })
}

/// Runs one step of `model`'s traced graph on `inputs` (the executor's inputs: a sparse
/// argument's three tensors in a row) with the host weights (a replica-grouped weight: its first group's), drawing masks from a generator
/// seeded with `seed`.
pub fn reference(model: &HostModel, training: bool, inputs: &[Rc<Tensor>], seed: u64) -> Result<Reference> {
    if !model.is_traced() {
        return Err(Error::export("the model has not been traced yet: call, compile or plan it first"));
    }
    let mut g = model.graph().clone();
    if masks_inside_regions(&g) {
        return Err(Error::export(
            "a dropout mask drawn inside a region cannot be fed to the export: draw it outside and pass it in",
        ));
    }
    let n_outputs = g.outputs.len();
    let masks: Vec<_> =
        g.nodes.iter().filter(|n| matches!(n.op, Op::RandomMask { .. })).map(|n| n.outputs[0]).collect();
    let n_masks = masks.len();
    g.outputs.extend(masks);
    let (graph, grads, loss_output) = if training {
        let loss = find_loss(&g)?;
        let loss_output = g.outputs[..n_outputs].iter().position(|o| *o == loss);
        let tg = training_graph_at(&g, loss, &TrainOptions { return_grads: true, ..TrainOptions::default() })?;
        (tg.graph, tg.grad_outputs, loss_output)
    } else {
        (g, Vec::new(), None)
    };
    let (params, buffers) = super::host_values(model)?;
    let mut store = Store::new(&params, &buffers, seed);
    let outs = run(&graph, &mut store, inputs)?.outputs;
    let take = |i: usize| (*outs[i]).clone();
    Ok(Reference {
        outputs: (0..n_outputs).map(take).collect(),
        loss_output,
        gradients: grads.iter().map(|(n, i)| (n.clone(), take(*i))).collect(),
        masks: (n_outputs..n_outputs + n_masks).map(take).collect(),
    })
}
