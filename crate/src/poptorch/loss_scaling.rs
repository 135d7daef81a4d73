//! Loss scaling as PopART does it.
//!
//! * **Manual**: the backward pass is seeded with the loss scaling factor instead of 1
//!   (`autograd::TrainOptions::loss_scale_input`), so every gradient comes out multiplied by
//!   it; the executor divides the reduced gradients by it before the optimizer update.
//! * **Automatic** (`opts.Training.setAutomaticLossScaling(True)`, PopART's
//!   `automaticLossScalingSettings`, `willow/src/transforms/automaticlossscaling.cpp` and
//!   `popx/op/lossscaleupdatex.cpp`): a 2-bin histogram of the absolute values of the
//!   tracked float16 gradient tensors, with the bin edge at `binEdgeLocation` (0.125) of the
//!   float16 range (65504); after each optimizer step the scale is halved when the
//!   proportion of elements in the upper bin exceeds `thresholdUpperCountProportion` (1e-7)
//!   and doubled otherwise. Tracked tensors are PopART's default
//!   (`AllNonViewChangingGradientTensors`): the float16 values the backward pass computes,
//!   except by ops that only move or view data (reshape, permute, slice, split, concat,
//!   broadcast, cast, fills). Values computed inside regions (invertible backward graphs)
//!   are not seen. With no float16 gradient at all the transform fails with PopART's
//!   message.
//!
//! PopART keeps the scale in the loss's dtype and lets it overflow; we keep it finite
//! (at most the loss dtype's largest value), so a float16 seed never becomes infinity.

use crate::ir::simplify::rebuild;
use crate::ir::{BinaryKind, Graph, NodeMeta, Op, Pass, ReduceKind, ValueId};
use crate::tensor::DType;
use crate::{Error, Result};

/// The largest finite float16 value.
pub const F16_MAX: f32 = 65504.0;

/// PopART's default `binEdgeLocation`.
pub const BIN_EDGE_LOCATION: f32 = 0.125;

/// PopART's default `thresholdUpperCountProportion`.
pub const THRESHOLD_UPPER_COUNT_PROPORTION: f32 = 1e-7;

/// The histogram's bin edge for float16 gradients: `binEdgeLocation × 65504`.
pub fn bin_edge() -> f32 {
    F16_MAX * BIN_EDGE_LOCATION
}

/// PopART's update rule (`LossScaleUpdateOpx`): halve when `upper / (upper + lower)`
/// exceeds the threshold, else double — computed as `upper > f·lower` with
/// `f = t / (1 − t)`. The result stays within `[2^-24, max]` (see the module docs).
pub fn update_loss_scale(loss_scale: f32, upper: f64, lower: f64, max: f32) -> f32 {
    let t = THRESHOLD_UPPER_COUNT_PROPORTION as f64;
    let f = t / (1.0 - t);
    let next = if upper > f * lower { loss_scale / 2.0 } else { loss_scale * 2.0 };
    next.clamp(f32::EPSILON * f32::EPSILON, max)
}

/// Ops whose outputs are views or copies of their inputs (or fills), not computed
/// gradient values: PopART does not track them.
fn view_changing(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape { .. }
            | Op::Permute { .. }
            | Op::Slice { .. }
            | Op::Split { .. }
            | Op::Concat { .. }
            | Op::BroadcastTo { .. }
            | Op::Cast { .. }
            | Op::Full { .. }
            | Op::Placeholder { .. }
            | Op::Constant { .. }
            | Op::DynamicSlice { .. }
    )
}

/// The backward values automatic loss scaling tracks: `(node index, value)`.
pub fn tracked_gradients(g: &Graph) -> Vec<(usize, ValueId)> {
    let mut out = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if n.meta.pass != Pass::Backward || view_changing(&n.op) {
            continue;
        }
        // An invertible backward's first output is the rebuilt forward input, not a gradient.
        let skip = usize::from(matches!(n.op, Op::InvertibleBackward { .. }));
        for &v in &n.outputs[skip.min(n.outputs.len())..] {
            if g.ty(v).dtype == DType::Float16 {
                out.push((i, v));
            }
        }
    }
    out
}

/// Adds to `g` one float32 scalar output counting the tracked gradient elements in the
/// **lower** bin (`|x| < edge`; NaN counts as upper), computed right after each tracked
/// value so that no value lives longer. Returns the new graph, the index of that output
/// and the number of tracked elements (the upper count is the difference).
pub fn add_gradient_statistics(g: &Graph) -> Result<(Graph, usize, usize)> {
    let tracked = tracked_gradients(g);
    if tracked.is_empty() {
        return Err(Error::poptorch(
            "[AutomaticLossScale transform] No tracked gradient tensors of type fp16 were found.",
        )
        .with_code("automatic_loss_scaling_without_fp16")
        .with_option("Training.automaticLossScaling"));
    }
    let mut out = g.clone();
    let n0 = out.nodes.len();
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); n0];
    let mut total = 0usize;
    let mut acc: Option<ValueId> = None;
    for &(i, v) in &tracked {
        let meta = NodeMeta { pass: Pass::Backward, ..g.nodes[i].meta.clone() };
        let first = out.nodes.len();
        let add = |out: &mut Graph, op: Op, ins: Vec<ValueId>| out.add1(op, ins, meta.clone());
        let x = add(&mut out, Op::Cast { dtype: DType::Float32 }, vec![v])?;
        let edge = add(&mut out, Op::Full { shape: vec![], dtype: DType::Float32, value: bin_edge() as f64 }, vec![])?;
        let below = add(&mut out, Op::Binary { kind: BinaryKind::Sub }, vec![edge, x])?; // edge − x > 0
        let above = add(&mut out, Op::Binary { kind: BinaryKind::Add }, vec![edge, x])?; // edge + x > 0
        let a = add(&mut out, Op::Positive, vec![below])?;
        let b = add(&mut out, Op::Positive, vec![above])?;
        let a = add(&mut out, Op::Cast { dtype: DType::Float32 }, vec![a])?;
        let b = add(&mut out, Op::Cast { dtype: DType::Float32 }, vec![b])?;
        let inside = add(&mut out, Op::Binary { kind: BinaryKind::Mul }, vec![a, b])?;
        let count = add(&mut out, Op::Reduce { kind: ReduceKind::Sum, dims: vec![], keepdim: false }, vec![inside])?;
        acc = Some(match acc {
            None => count,
            Some(prev) => add(&mut out, Op::Binary { kind: BinaryKind::Add }, vec![prev, count])?,
        });
        after[i].extend(first..out.nodes.len());
        total += g.ty(v).shape.iter().product::<usize>();
    }
    let index = out.outputs.len();
    out.outputs.push(acc.expect("at least one tracked value"));
    let mut order = Vec::with_capacity(out.nodes.len());
    for (i, extra) in after.iter().enumerate() {
        order.push(i);
        order.extend(extra.iter().copied());
    }
    let out = rebuild(&out, &order)?;
    Ok((out, index, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autograd::{find_loss, training_graph_at, TrainOptions};
    use crate::exec::{run, Store};
    use crate::ir::Reduction;
    use crate::tensor::Tensor;
    use crate::trace::Tracer;
    use std::rc::Rc;

    #[test]
    fn the_update_rule_halves_above_the_threshold_and_doubles_below() {
        // One element of 10 million in the upper bin is exactly the threshold: not above it.
        assert_eq!(update_loss_scale(128.0, 1.0, 1e7 - 1.0, F16_MAX), 256.0);
        assert_eq!(update_loss_scale(128.0, 2.0, 1e7 - 2.0, F16_MAX), 64.0);
        assert_eq!(update_loss_scale(128.0, 0.0, 10.0, F16_MAX), 256.0);
        assert_eq!(update_loss_scale(40000.0, 0.0, 10.0, F16_MAX), F16_MAX, "kept finite in float16");
        assert_eq!(bin_edge(), 8188.0);
    }

    fn half_model(dtype: DType) -> (crate::trace::Trace, crate::autograd::TrainingGraph) {
        let tr = Tracer::new();
        let x = tr.input("x", &[4, 3], dtype).unwrap();
        let w = Rc::new(Tensor::full(&[2, 3], dtype, 0.5));
        let y = x.linear(&tr.param("w", &w).unwrap(), None).unwrap();
        let l = y.identity_loss(Reduction::Sum).unwrap();
        let t = tr.finish(&[&l]).unwrap();
        let opts = TrainOptions { return_grads: true, loss_scale_input: true, ..Default::default() };
        let tg = training_graph_at(&t.graph, find_loss(&t.graph).unwrap(), &opts).unwrap();
        (t, tg)
    }

    #[test]
    fn statistics_count_the_float16_gradient_elements_below_the_edge() {
        let (t, tg) = half_model(DType::Float16);
        let (g, idx, total) = add_gradient_statistics(&tg.graph).unwrap();
        crate::ir::verify::verify(&g).unwrap();
        // Tracked: the weight gradient (2×3 from matmul_tn); the seed's cast/broadcast are not.
        assert_eq!(total, 6);
        let x = Rc::new(
            Tensor::from_f32_as_f16(&[4, 3], &[1.0, -2.0, 3.0, 0.5, 0.25, 1.0, 2.0, 2.0, 2.0, -1.0, 0.0, 1.0]).unwrap(),
        );
        let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
        // Loss scale 1: every |grad| is small, all 6 in the lower bin.
        let r = run(&g, &mut store, &[x.clone(), Rc::new(Tensor::scalar(1.0))]).unwrap();
        assert_eq!(r.outputs[idx].to_f32_vec(), vec![6.0]);
        // Loss scale 4096: the weight gradient is 4096 × column sums of x = [4096·2.5, 4096·0.25, 4096·7]
        // per row: 10240 and 28672 are above 8188, 1024 is below.
        let r = run(&g, &mut store, &[x, Rc::new(Tensor::scalar(4096.0))]).unwrap();
        assert_eq!(r.outputs[idx].to_f32_vec(), vec![2.0]);
    }

    #[test]
    fn no_float16_gradient_is_poparts_error() {
        let (_, tg) = half_model(DType::Float32);
        let e = add_gradient_statistics(&tg.graph).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[AutomaticLossScale transform] No tracked gradient tensors of type fp16 were found."
        );
        // The page tells this error by its code and option, not its text.
        assert_eq!(
            (e.code(), e.option()),
            (Some("automatic_loss_scaling_without_fp16"), Some("Training.automaticLossScaling"))
        );
    }
}
