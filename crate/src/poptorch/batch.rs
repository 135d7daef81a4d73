//! Batching: how one host call's inputs are cut into micro-batches, and how the
//! micro-batches' outputs come back (PopTorch's `_narrow_tensor`, PopART's anchors).
//!
//! A call processes `deviceIterations × gradientAccumulation × replicationFactor`
//! micro-batches, in PopART's order `[device iteration, accumulation step, replica]`.
//! Every input's dim 0 is the **combined batch**: `micro-batch × deviceIterations ×
//! (replicationFactor / inputReplicaGrouping size) × gradientAccumulation`, laid out as
//! `[deviceIterations, gradientAccumulation, input groups, micro-batch, …]`; replicas of one
//! input group read the same slice. Outputs (`Options.outputMode`):
//!
//! | mode | which micro-batches | leading dim multiplied by |
//! |---|---|---|
//! | `All` | every one, in order | `D·A·R` |
//! | `EveryN(n)` | every step of every n-th device iteration | `D·A·R/n` |
//! | `Final` | the last one of each replica | `R` |
//! | `Sum` | per replica, the sum over device iterations and steps | `R` |
//!
//! When the multiplier is above 1 a scalar output becomes `[multiplier]` and any other
//! output's dim 0 is multiplied (PopTorch `PoplarExecutable`: `dims[0] *= b_dim`).

use crate::compile::options::{CommGroupType, OutputMode};
use crate::compile::Options;
use crate::ir::{BinaryKind, Op, TensorType};
use crate::kernels::{self, shape_ops};
use crate::tensor::{DType, Tensor};
use crate::{Error, Result};

/// PopTorch's printed dtype (`torch.float32`).
pub fn torch_dtype(d: DType) -> &'static str {
    match d {
        DType::Float32 => "torch.float32",
        DType::Float16 => "torch.float16",
        DType::Int32 => "torch.int32",
        DType::Bool => "torch.bool",
    }
}

/// PopTorch's printed shape (`torch.Size([6, 4])`).
pub fn torch_size(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("torch.Size([{}])", dims.join(", "))
}

/// One input of a host call.
///
/// `Combined` is PopTorch's combined batch: one tensor whose dim 0 is cut into the
/// `factor()` slices. `Parts` gives those slices one by one, in the combined batch's order
/// (slice `k = (d × gradientAccumulation + a) × inputGroups + g`, [`Batching::chunk`]; with
/// one device iteration and no accumulation, part `r` is replica `r`'s): what an input that
/// cannot be cut along dim 0 needs — a sparse graph part's CSR arrays (a `RandomNodeLoader`
/// part each) — and what any input may use. Every part has the micro-batch's type (graph
/// parts padded to one size: the loader's `fixedSize`).
#[derive(Clone, Debug)]
pub enum BatchInput {
    Combined(std::rc::Rc<Tensor>),
    Parts(Vec<std::rc::Rc<Tensor>>),
}

impl BatchInput {
    /// The micro-batch type of a part (`factor` of them expected), or an error naming the
    /// input `name` and the part that differs.
    pub fn part_type(&self, name: &str, factor: usize) -> Result<Option<TensorType>> {
        let BatchInput::Parts(parts) = self else { return Ok(None) };
        if parts.len() != factor {
            return Err(Error::poptorch(format!(
                "input '{name}': {} parts given, but a call takes the combined batch factor deviceIterations × \
                 (replicationFactor / inputReplicaGrouping size) × gradientAccumulation = {factor} of them \
                 (one per micro-batch slice)",
                parts.len()
            ))
            .with_code("batch_dimension"));
        }
        let ty = |t: &Tensor| TensorType { shape: t.shape().to_vec(), dtype: t.dtype() };
        let first = ty(&parts[0]);
        if first.shape.is_empty() {
            return Err(Error::poptorch(format!(
                "input '{name}': a part is a scalar; parts are slices of the combined batch, each with a batch dimension"
            )));
        }
        if let Some((k, t)) = parts.iter().enumerate().skip(1).find(|(_, t)| ty(t) != first) {
            return Err(Error::poptorch(format!(
                "input '{name}': part {k} is {}, part 0 {first}: every part of a call must have the same type \
                 (pad graph parts to one size, as RandomNodeLoader's fixedSize does)",
                ty(t)
            ))
            .with_code("input_mismatch"));
        }
        Ok(Some(first))
    }

    /// The input's combined-batch type: a combined tensor's own, or a part's with dim 0
    /// multiplied by the parts' count (what PopTorch's static input check compares).
    pub fn combined_type(&self, name: &str, factor: usize) -> Result<TensorType> {
        match self {
            BatchInput::Combined(t) => Ok(TensorType { shape: t.shape().to_vec(), dtype: t.dtype() }),
            BatchInput::Parts(_) => {
                let mut t = self.part_type(name, factor)?.expect("parts");
                t.shape[0] *= factor;
                Ok(t)
            }
        }
    }
}

/// The batching factors of a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batching {
    pub device_iterations: usize,
    pub accumulation: usize,
    pub replicas: usize,
    pub input_group_size: usize,
    pub input_group_kind: CommGroupType,
}

impl Batching {
    /// The factors `options` set.
    pub fn from_options(o: &Options) -> Batching {
        Batching {
            device_iterations: o.device_iterations,
            accumulation: o.training.gradient_accumulation,
            replicas: o.replication_factor,
            input_group_size: o.input_replica_grouping.size.max(1),
            input_group_kind: o.input_replica_grouping.kind,
        }
    }

    /// Distinct inputs per step across replicas: `replicationFactor / input group size`.
    pub fn input_groups(&self) -> usize {
        self.replicas / self.input_group_size
    }

    /// The combined batch factor: `D × (R / g) × A`.
    pub fn factor(&self) -> usize {
        self.device_iterations * self.input_groups() * self.accumulation
    }

    /// Micro-batches per call: `D × A × R`.
    pub fn micro_batches(&self) -> usize {
        self.device_iterations * self.accumulation * self.replicas
    }

    /// The input group replica `r` reads.
    pub fn input_group_of(&self, r: usize) -> usize {
        match self.input_group_kind {
            CommGroupType::Orthogonal => r % self.input_groups(),
            _ => r / self.input_group_size,
        }
    }

    /// The slice of the combined batch micro-batch `(d, a, r)` reads.
    pub fn chunk(&self, d: usize, a: usize, r: usize) -> usize {
        (d * self.accumulation + a) * self.input_groups() + self.input_group_of(r)
    }

    /// PopTorch's batch-dimension error for an input of `shape` (code `batch_dimension`).
    pub fn batch_error(&self, shape: &[usize]) -> Error {
        let b = shape.first().copied().unwrap_or(1);
        Error::poptorch(format!(
            "Invalid batch dimension: In the input {}, the batch dimension ({b}) must be a multiple of \
             Options.deviceIterations({}) * (Options.replicationFactor({}) / \
             Options.inputReplicaGrouping.input_group_size({})) * Options.Training.gradientAccumulation({}) = {} \
             because it is used to calculate the batch size which will be executed on the device in any given \
             iteration. For a full explanation see the batching semantics page of the documentation.",
            torch_size(shape),
            self.device_iterations,
            self.replicas,
            self.input_group_size,
            self.accumulation,
            self.factor()
        ))
        .with_code("batch_dimension")
    }

    /// The micro-batch shape of an input of `shape` (combined batch): dim 0 divided by
    /// `factor()`, or PopTorch's batch-dimension error.
    pub fn micro_shape(&self, shape: &[usize]) -> Result<Vec<usize>> {
        let f = self.factor();
        if f == 1 {
            return Ok(shape.to_vec());
        }
        match shape.first() {
            Some(&b) if b.is_multiple_of(f) => {
                let mut s = shape.to_vec();
                s[0] = b / f;
                Ok(s)
            }
            _ => Err(self.batch_error(shape)),
        }
    }

    /// Cuts an input into its `factor()` slices along dim 0 (checking the batch dim).
    pub fn split(&self, t: &Tensor) -> Result<Vec<Tensor>> {
        let f = self.factor();
        let shape = t.shape();
        let b = shape.first().copied().unwrap_or(1);
        if !b.is_multiple_of(f) {
            return Err(self.batch_error(shape));
        }
        if f == 1 {
            return Ok(vec![t.clone()]);
        }
        shape_ops::split(t, &vec![b / f; f], 0)
    }

    /// The slices of one call input (`name` in errors): a combined tensor cut along dim 0,
    /// or the `factor()` parts given as they are ([`BatchInput::Parts`]).
    pub fn slices(&self, name: &str, input: &BatchInput) -> Result<Vec<Tensor>> {
        match input {
            BatchInput::Combined(t) => self.split(t),
            BatchInput::Parts(parts) => {
                input.combined_type(name, self.factor())?;
                Ok(parts.iter().map(|t| t.as_ref().clone()).collect())
            }
        }
    }

    /// Index of micro-batch `(d, a, r)` in PopART's order.
    pub fn index(&self, d: usize, a: usize, r: usize) -> usize {
        (d * self.accumulation + a) * self.replicas + r
    }

    /// The host outputs from the outputs of every micro-batch (`per_micro[index(d, a, r)]`,
    /// each a list of output tensors) under `mode` (resolved, not `Default`).
    #[allow(clippy::needless_range_loop)] // `o` indexes the inner lists of `per_micro`
    pub fn assemble(&self, mode: OutputMode, period: Option<usize>, per_micro: &[Vec<Tensor>]) -> Result<Vec<Tensor>> {
        let (d_n, a_n, r_n) = (self.device_iterations, self.accumulation, self.replicas);
        let n_out = per_micro.first().map_or(0, Vec::len);
        let mut result = Vec::with_capacity(n_out);
        for o in 0..n_out {
            let pick = |d: usize, a: usize, r: usize| &per_micro[self.index(d, a, r)][o];
            let items: Vec<Tensor> = match mode {
                OutputMode::All | OutputMode::Default => (0..d_n)
                    .flat_map(|d| (0..a_n).flat_map(move |a| (0..r_n).map(move |r| (d, a, r))))
                    .map(|(d, a, r)| pick(d, a, r).clone())
                    .collect(),
                OutputMode::EveryN => {
                    let n = period.unwrap_or(0);
                    if n == 0 || !d_n.is_multiple_of(n) {
                        return Err(Error::poptorch(format!(
                            "OutputMode.EveryN with an output return period of {n} needs deviceIterations ({d_n}) to \
                             be a multiple of it"
                        )));
                    }
                    (0..d_n)
                        .filter(|d| (d + 1) % n == 0)
                        .flat_map(|d| (0..a_n).flat_map(move |a| (0..r_n).map(move |r| (d, a, r))))
                        .map(|(d, a, r)| pick(d, a, r).clone())
                        .collect()
                }
                OutputMode::Final => (0..r_n).map(|r| pick(d_n - 1, a_n - 1, r).clone()).collect(),
                OutputMode::Sum => (0..r_n)
                    .map(|r| {
                        let mut acc = pick(0, 0, r).clone();
                        for d in 0..d_n {
                            for a in 0..a_n {
                                if (d, a) != (0, 0) {
                                    acc = add(&acc, pick(d, a, r))?;
                                }
                            }
                        }
                        Ok(acc)
                    })
                    .collect::<Result<_>>()?,
            };
            result.push(join(items)?);
        }
        Ok(result)
    }
}

fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.dtype() == DType::Bool {
        return Err(Error::poptorch("OutputMode.Sum cannot sum a bool output: cast it to a number in the model"));
    }
    let mut out = kernels::eval(&Op::Binary { kind: BinaryKind::Add }, &[a, b])?;
    Ok(out.remove(0))
}

/// One tensor from the chosen micro-batches' outputs: unchanged when there is one, else
/// concatenated along dim 0 (scalars as `[1]`).
fn join(items: Vec<Tensor>) -> Result<Tensor> {
    if items.len() == 1 {
        return Ok(items.into_iter().next().expect("one item"));
    }
    let lifted: Vec<Tensor> = items
        .into_iter()
        .map(|t| if t.shape().is_empty() { shape_ops::reshape(&t, &[1]) } else { Ok(t) })
        .collect::<std::result::Result<_, _>>()?;
    let refs: Vec<&Tensor> = lifted.iter().collect();
    shape_ops::concat(&refs, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batching(d: usize, a: usize, r: usize, g: usize) -> Batching {
        Batching {
            device_iterations: d,
            accumulation: a,
            replicas: r,
            input_group_size: g,
            input_group_kind: CommGroupType::Consecutive,
        }
    }

    #[test]
    fn the_combined_batch_follows_the_batching_docs() {
        // batching.rst: deviceIterations(100) with a micro-batch of 2 loads 200 samples; with
        // replicationFactor(4) 800; with gradientAccumulation(8) and 400 iterations 6400.
        assert_eq!(batching(100, 1, 1, 1).factor() * 2, 200);
        assert_eq!(batching(100, 1, 4, 1).factor() * 2, 800);
        assert_eq!(batching(400, 8, 1, 1).factor() * 2, 6400);
        // Replicas of one input group read the same data.
        assert_eq!(batching(1, 1, 8, 4).factor(), 2);
        let b = Batching { input_group_kind: CommGroupType::Orthogonal, ..batching(1, 1, 8, 2) };
        let groups: Vec<usize> = (0..8).map(|r| b.input_group_of(r)).collect();
        assert_eq!(groups, vec![0, 1, 2, 3, 0, 1, 2, 3]);
        let c = batching(1, 1, 8, 4);
        let groups: Vec<usize> = (0..8).map(|r| c.input_group_of(r)).collect();
        assert_eq!(groups, vec![0, 0, 0, 0, 1, 1, 1, 1]);
    }

    #[test]
    fn a_batch_dim_not_a_multiple_is_poptorchs_error() {
        let e = batching(2, 2, 2, 1).split(&Tensor::zeros(&[6, 4], DType::Float32)).unwrap_err().to_string();
        assert_eq!(
            e,
            "Invalid batch dimension: In the input torch.Size([6, 4]), the batch dimension (6) must be a multiple of \
             Options.deviceIterations(2) * (Options.replicationFactor(2) / \
             Options.inputReplicaGrouping.input_group_size(1)) * Options.Training.gradientAccumulation(2) = 8 \
             because it is used to calculate the batch size which will be executed on the device in any given \
             iteration. For a full explanation see the batching semantics page of the documentation."
        );
        let parts = batching(2, 2, 2, 1).split(&Tensor::zeros(&[16, 4], DType::Float32)).unwrap();
        assert_eq!(parts.len(), 8);
        assert_eq!(parts[0].shape(), &[2, 4]);
    }

    #[test]
    fn output_modes_pick_and_shape_as_poptorch() {
        // D=2, A=2, R=2: micro-batch (d, a, r) outputs [100d + 10a + r] of shape [1], and a scalar.
        let b = batching(2, 2, 2, 1);
        let mut per = vec![Vec::new(); 8];
        for d in 0..2 {
            for a in 0..2 {
                for r in 0..2 {
                    let v = (100 * d + 10 * a + r) as f32;
                    per[b.index(d, a, r)] = vec![Tensor::from_f32(&[1], vec![v]).unwrap(), Tensor::scalar(v)];
                }
            }
        }
        let all = b.assemble(OutputMode::All, None, &per).unwrap();
        assert_eq!(all[0].to_f32_vec(), vec![0.0, 1.0, 10.0, 11.0, 100.0, 101.0, 110.0, 111.0]);
        assert_eq!(all[1].shape(), &[8], "scalars stack to [D·A·R]");
        let fin = b.assemble(OutputMode::Final, None, &per).unwrap();
        assert_eq!(fin[0].to_f32_vec(), vec![110.0, 111.0], "the last micro-batch of each replica");
        let sum = b.assemble(OutputMode::Sum, None, &per).unwrap();
        assert_eq!(sum[1].to_f32_vec(), vec![220.0, 224.0]);
        let every = b.assemble(OutputMode::EveryN, Some(2), &per).unwrap();
        assert_eq!(every[0].to_f32_vec(), vec![100.0, 101.0, 110.0, 111.0]);
        assert!(b.assemble(OutputMode::EveryN, Some(3), &per).is_err());
        // One micro-batch: shapes unchanged.
        let one = batching(1, 1, 1, 1);
        let out = one.assemble(OutputMode::All, None, &[vec![Tensor::scalar(3.0)]]).unwrap();
        assert_eq!(out[0].shape(), &[] as &[usize]);
    }
}
