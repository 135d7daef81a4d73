//! Gradient accumulation and reduction across accumulation steps and replicas
//! (`Options.Training.accumulationAndReplicationReductionType` and
//! `…MeanReductionStrategy`), as PopART's optimizer decomposition does it:
//!
//! * `Sum`: the gradients of every micro-batch of the step are added.
//! * `Mean` with the `Post` strategy (the default): added, then divided by
//!   `gradientAccumulation × replicationFactor` (PopART divides by the global replication
//!   factor even for a weight shared by a smaller group of replicas, which makes a weight
//!   sharded over replica groups get the gradient of the whole model).
//! * `Mean` with `Running`: each replica keeps a running mean over its accumulation steps
//!   (`acc ← acc·k/(k+1) + g/(k+1)`), then the replicas sharing the weight take the mean
//!   (PopART's `CollectiveOperator::Mean` over the weight's replica group).
//!
//! Accumulators are kept in the optimizer's `accum_type`: float32, or float16 (rounded to
//! half after each addition, which is why PopTorch switches to `Running` then: a running
//! mean cannot overflow where a sum can).

use crate::compile::options::{MeanReductionStrategy, ReductionType};
use crate::kernels::optim::round_to;
use crate::tensor::{DType, Tensor};
use crate::Error;
use ndarray::ArrayD;

/// How gradients are reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GradReduction {
    pub kind: ReductionType,
    pub strategy: MeanReductionStrategy,
    pub accumulation: usize,
    pub replicas: usize,
    pub accum_dtype: DType,
}

impl GradReduction {
    fn running(&self) -> bool {
        self.kind == ReductionType::Mean && self.strategy == MeanReductionStrategy::Running
    }
}

/// The accumulated gradient of one parameter on every replica during one step.
#[derive(Clone, Debug)]
pub struct Accumulator {
    slots: Vec<Option<ArrayD<f32>>>,
    counts: Vec<usize>,
}

impl Accumulator {
    /// Empty accumulators for `replicas` replicas.
    pub fn new(replicas: usize) -> Accumulator {
        Accumulator { slots: vec![None; replicas], counts: vec![0; replicas] }
    }

    /// Adds the gradient of one micro-batch run on replica `r`.
    pub fn add(&mut self, r: usize, grad: &Tensor, how: &GradReduction) -> crate::Result<()> {
        let g32 = if grad.dtype() == DType::Float32 { None } else { Some(grad.cast(DType::Float32)) };
        let g = g32.as_ref().unwrap_or(grad).as_f32()?;
        let k = self.counts[r] as f32;
        let slot = &mut self.slots[r];
        match slot {
            None => {
                let mut a = g.clone();
                round_to(&mut a, how.accum_dtype);
                *slot = Some(a);
            }
            Some(acc) => {
                if acc.shape() != g.shape() {
                    return Err(Error::poptorch(format!(
                        "gradient shape {:?} differs from the accumulator's {:?}",
                        g.shape(),
                        acc.shape()
                    )));
                }
                if how.running() {
                    let (keep, new) = (k / (k + 1.0), 1.0 / (k + 1.0));
                    ndarray::Zip::from(&mut *acc).and(g).for_each(|a, &x| *a = *a * keep + x * new);
                } else {
                    *acc += g;
                }
                round_to(acc, how.accum_dtype);
            }
        }
        self.counts[r] += 1;
        Ok(())
    }

    /// [`Self::add`] of a gradient the caller gives up: replica `r`'s first float32 gradient
    /// that nothing else holds becomes its slot without a copy (a model's gradients are as
    /// large as its weights).
    pub fn add_owned(&mut self, r: usize, grad: std::rc::Rc<Tensor>, how: &GradReduction) -> crate::Result<()> {
        if self.slots.get(r).is_some_and(Option::is_none) {
            match std::rc::Rc::try_unwrap(grad) {
                Ok(Tensor::F32(mut a)) => {
                    round_to(&mut a, how.accum_dtype);
                    self.slots[r] = Some(a);
                    self.counts[r] += 1;
                    return Ok(());
                }
                Ok(t) => return self.add(r, &t, how),
                Err(shared) => return self.add(r, &shared, how),
            }
        }
        self.add(r, &grad, how)
    }

    /// Takes replica `r`'s accumulated gradient out (for packing it, [`super::replicas`]).
    pub fn take_slot(&mut self, r: usize) -> Option<ArrayD<f32>> {
        self.slots.get_mut(r)?.take()
    }

    /// Replica `r`'s accumulated gradient, if it has one.
    pub fn slot(&self, r: usize) -> Option<&ArrayD<f32>> {
        self.slots.get(r)?.as_ref()
    }

    /// Sets replica `r`'s accumulated gradient to `values` of `shape` (computed by another
    /// executor holding that replica, [`super::replicas`]).
    pub fn set_slot(&mut self, r: usize, shape: &[usize], values: Vec<f32>) -> crate::Result<()> {
        let n = self.slots.len();
        let slot = self
            .slots
            .get_mut(r)
            .ok_or_else(|| Error::poptorch(format!("replica {r} of an accumulator of {n} replicas")))?;
        let a = ArrayD::from_shape_vec(ndarray::IxDyn(shape), values)
            .map_err(|e| Error::poptorch(format!("replica {r}: a gradient of shape {shape:?}: {e}")))?;
        *slot = Some(a);
        Ok(())
    }

    /// The reduced gradient of the weight shared by replicas `members`.
    pub fn reduce(&self, members: &[usize], how: &GradReduction) -> crate::Result<ArrayD<f32>> {
        let mut total: Option<ArrayD<f32>> = None;
        for &r in members {
            let a =
                self.slots[r].as_ref().ok_or_else(|| Error::poptorch(format!("replica {r} produced no gradient")))?;
            match &mut total {
                None => total = Some(a.clone()),
                Some(t) => *t += a,
            }
        }
        let mut t = total.ok_or_else(|| Error::poptorch("a weight with no replica"))?;
        let divide = match (how.kind, how.running()) {
            (ReductionType::Sum, _) => 1.0,
            (_, true) => members.len() as f32,
            _ => (how.accumulation * how.replicas) as f32,
        };
        if divide != 1.0 {
            t.mapv_inplace(|x| x / divide);
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn how(kind: ReductionType, strategy: MeanReductionStrategy, dtype: DType) -> GradReduction {
        GradReduction { kind, strategy, accumulation: 2, replicas: 2, accum_dtype: dtype }
    }

    fn g(v: f32) -> Tensor {
        Tensor::from_f32(&[1], vec![v]).unwrap()
    }

    #[test]
    fn add_owned_takes_a_lone_gradient_and_copies_a_shared_one() {
        use std::rc::Rc;
        let h = how(ReductionType::Sum, MeanReductionStrategy::Post, DType::Float32);
        let mut acc = Accumulator::new(2);
        let lone = Rc::new(g(1.5));
        acc.add_owned(0, lone, &h).unwrap();
        let shared = Rc::new(g(2.0));
        acc.add_owned(1, shared.clone(), &h).unwrap();
        acc.add_owned(1, Rc::new(g(0.25)), &h).unwrap();
        assert_eq!(acc.slot(0).unwrap().as_slice().unwrap(), &[1.5]);
        assert_eq!(acc.slot(1).unwrap().as_slice().unwrap(), &[2.25], "the second adds to the first");
        assert_eq!(shared.as_f32().unwrap().as_slice().unwrap(), &[2.0], "the lent gradient is untouched");
        assert_eq!(acc.counts, vec![1, 2]);
        // float16 accumulators round the taken gradient as `add` rounds a copy.
        let h16 = how(ReductionType::Sum, MeanReductionStrategy::Post, DType::Float16);
        let (mut a, mut b) = (Accumulator::new(1), Accumulator::new(1));
        a.add_owned(0, Rc::new(g(0.1)), &h16).unwrap();
        b.add(0, &g(0.1), &h16).unwrap();
        assert_eq!(a.slot(0), b.slot(0));
        assert_ne!(a.slot(0).unwrap()[[0]], 0.1f32, "rounded to float16");
        assert_eq!(a.take_slot(0), b.take_slot(0));
        assert!(a.slot(0).is_none(), "taken out");
    }

    fn run(h: &GradReduction, grads: [[f32; 2]; 2]) -> f32 {
        let mut acc = Accumulator::new(2);
        for step in grads {
            for (r, v) in step.iter().enumerate() {
                acc.add(r, &g(*v), h).unwrap();
            }
        }
        acc.reduce(&[0, 1], h).unwrap()[0]
    }

    #[test]
    fn mean_post_and_running_agree_and_sum_adds() {
        let grads = [[1.0, 2.0], [3.0, 6.0]];
        assert_eq!(run(&how(ReductionType::Mean, MeanReductionStrategy::Post, DType::Float32), grads), 3.0);
        assert_eq!(run(&how(ReductionType::Mean, MeanReductionStrategy::Running, DType::Float32), grads), 3.0);
        assert_eq!(run(&how(ReductionType::Sum, MeanReductionStrategy::Post, DType::Float32), grads), 12.0);
    }

    #[test]
    fn float16_accumulators_round_and_running_means_do_not_overflow() {
        let big = [[40000.0, 40000.0], [40000.0, 40000.0]];
        let post = run(&how(ReductionType::Mean, MeanReductionStrategy::Post, DType::Float16), big);
        assert!(post.is_infinite(), "a float16 sum of 80000 overflows: {post}");
        let running = run(&how(ReductionType::Mean, MeanReductionStrategy::Running, DType::Float16), big);
        assert_eq!(running, 40000.0);
        // 1 + 2^-11 is not a half: the accumulator rounds it away.
        let mut acc = Accumulator::new(1);
        let h = GradReduction { replicas: 1, ..how(ReductionType::Sum, MeanReductionStrategy::Post, DType::Float16) };
        acc.add(0, &g(1.0), &h).unwrap();
        acc.add(0, &g(1.0 / 2048.0), &h).unwrap();
        assert_eq!(acc.reduce(&[0], &h).unwrap()[0], 1.0);
    }

    #[test]
    fn a_weight_shared_by_a_group_divides_by_the_global_replica_count_post_and_the_group_running() {
        let mut h = how(ReductionType::Mean, MeanReductionStrategy::Post, DType::Float32);
        h.replicas = 4;
        h.accumulation = 1;
        let mut acc = Accumulator::new(4);
        for (r, v) in [1.0, 2.0, 3.0, 4.0].into_iter().enumerate() {
            acc.add(r, &g(v), &h).unwrap();
        }
        assert_eq!(acc.reduce(&[0, 2], &h).unwrap()[0], 1.0, "(1 + 3) / 4");
        h.strategy = MeanReductionStrategy::Running;
        assert_eq!(acc.reduce(&[0, 2], &h).unwrap()[0], 2.0, "(1 + 3) / 2");
    }
}
