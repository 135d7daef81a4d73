//! Replicas on several executors: what one executor holding some of a model's replicas
//! hands the others in a training step, as flat buffers a coordinator only moves.
//!
//! PopTorch runs `replicationFactor` replicas of a model side by side. Here an executor may
//! run only a range of them ([`super::PoplarExecutor::set_local_replicas`]); the executors
//! of the other ranges (other wasm instances, on other workers) run the rest. Each device
//! iteration, an executor packs its replicas' **contributions** — each replica's gradients,
//! accumulated over its micro-batches as [`super::reduce::Accumulator`] does, and the
//! automatic-loss-scaling count — into one `f32` buffer laid out by [`Contributions`]:
//! replica-major, a fixed length per replica, so replica `r`'s part starts at `r ×
//! per_replica` whoever computed it. The coordinator gathers the parts into one buffer of
//! every replica (the same bytes for everyone), and every executor applies it: it reduces
//! per weight group, unscales, clips and updates every replica's weights with the same
//! operations in the same order, so the weights stay bit-identical across executors and
//! equal to a single executor holding every replica (the one-executor call is this same
//! split with one range).
//!
//! A call's outputs (each micro-batch's outputs and anchored gradients) are packed by
//! [`LocalOutputs::to_bytes`] (dtype and shape kept exactly) and assembled per output mode
//! from every executor's part ([`LocalOutputs::merge`]).

use super::reduce::Accumulator;
use crate::ir::TensorType;
use crate::tensor::{numel, DType, Tensor};
use crate::{Error, Result};

/// 2²⁴: integers below it are exact in `f32`; a count is packed as two such digits.
const DIGIT: f64 = 16_777_216.0;

/// The layout of one step's contributions: per replica, every gradient (the accumulator's
/// float32 values, row-major, in the step's gradient order) and, with automatic loss
/// scaling, the lower-bin count as two exact `f32` digits (`high × 2²⁴ + low`).
#[derive(Clone, Debug, PartialEq)]
pub struct Contributions {
    /// Each gradient's shape, in the step's order.
    pub shapes: Vec<Vec<usize>>,
    /// Whether the automatic-loss-scaling count follows the gradients.
    pub count: bool,
    /// How many replicas the model has.
    pub replicas: usize,
}

impl Contributions {
    /// `f32`s per replica.
    pub fn per_replica(&self) -> usize {
        self.shapes.iter().map(|s| numel(s)).sum::<usize>() + if self.count { 2 } else { 0 }
    }

    /// `f32`s of every replica (the gathered buffer).
    pub fn total(&self) -> usize {
        self.per_replica() * self.replicas
    }

    /// Appends replica `r`'s contribution: its accumulated gradients (`accs`, one per
    /// gradient, each taken out of its accumulator and freed once copied) and its lower-bin
    /// count.
    pub fn pack(&self, r: usize, accs: &mut [Accumulator], lower: f64, out: &mut Vec<f32>) -> Result<()> {
        if accs.len() != self.shapes.len() {
            return Err(Error::poptorch(format!(
                "replica {r}: {} gradients packed, the step computes {}",
                accs.len(),
                self.shapes.len()
            )));
        }
        for (k, (acc, shape)) in accs.iter_mut().zip(&self.shapes).enumerate() {
            let slot = acc
                .take_slot(r)
                .ok_or_else(|| Error::poptorch(format!("replica {r} computed no gradient {k} to pack")))?;
            if slot.shape() != shape.as_slice() {
                return Err(Error::poptorch(format!(
                    "replica {r}: gradient {k} has shape {:?}, the layout {shape:?}",
                    slot.shape()
                )));
            }
            out.extend(slot.iter().copied());
        }
        if self.count {
            let high = (lower / DIGIT).floor();
            out.push(high as f32);
            out.push((lower - high * DIGIT) as f32);
        }
        Ok(())
    }

    /// Reads a gathered buffer of every replica back: the accumulators (every replica's
    /// slot filled) and the lower-bin count summed over replicas in replica order.
    pub fn unpack(&self, all: &[f32]) -> Result<(Vec<Accumulator>, f64)> {
        self.unpack_from(all.len(), |at, n| all[at..at + n].to_vec())
    }

    /// [`Self::unpack`] of a gathered buffer of `len` values read piece by piece:
    /// `read(at, n)` gives values `at..at + n`. A caller whose buffer lives elsewhere (the
    /// workers' shared memory, outside wasm) copies in one gradient at a time instead of
    /// the whole buffer first.
    pub fn unpack_from(
        &self,
        len: usize,
        mut read: impl FnMut(usize, usize) -> Vec<f32>,
    ) -> Result<(Vec<Accumulator>, f64)> {
        let per = self.per_replica();
        if len != self.total() {
            return Err(Error::poptorch(format!(
                "the gathered gradients hold {len} values; {} replicas of {per} each are {}",
                self.replicas,
                self.total()
            )));
        }
        let mut accs: Vec<Accumulator> = self.shapes.iter().map(|_| Accumulator::new(self.replicas)).collect();
        let mut lower = 0.0f64;
        for r in 0..self.replicas {
            let mut at = r * per;
            for (acc, shape) in accs.iter_mut().zip(&self.shapes) {
                let n = numel(shape);
                acc.set_slot(r, shape, read(at, n))?;
                at += n;
            }
            if self.count {
                let c = read(at, 2);
                let (high, low) = (c[0] as f64, c[1] as f64);
                if !(high >= 0.0 && low >= 0.0 && high.fract() == 0.0 && low.fract() == 0.0 && low < DIGIT) {
                    return Err(Error::poptorch(format!(
                        "replica {r}: the loss-scaling count ({high}, {low}) is not a packed count"
                    )));
                }
                lower += high * DIGIT + low;
            }
        }
        Ok((accs, lower))
    }
}

/// A call's outputs computed by one executor: for each micro-batch it ran (its index in
/// PopART's order, `Batching::index`), the user outputs then input gradients, and each
/// anchored gradient.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LocalOutputs {
    /// `(micro-batch, outputs)`.
    pub outputs: Vec<(usize, Vec<Tensor>)>,
    /// `(micro-batch, one value per anchored gradient)`.
    pub anchors: Vec<(usize, Vec<Tensor>)>,
}

const MAGIC: &[u8; 4] = b"IPRO";

/// Per micro-batch, a list of tensors.
pub type PerMicro = Vec<Vec<Tensor>>;

fn dtype_code(d: DType) -> u8 {
    match d {
        DType::Float32 => 0,
        DType::Float16 => 1,
        DType::Int32 => 2,
        DType::Bool => 3,
    }
}

/// A cursor over packed bytes whose errors say what was cut short.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or_else(|| {
            Error::poptorch(format!(
                "replica outputs: cut short reading {what} at byte {} ({} bytes in all)",
                self.at,
                self.bytes.len()
            ))
        })?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self, what: &str) -> Result<usize> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
}

fn write_tensor(t: &Tensor, out: &mut Vec<u8>) {
    out.push(dtype_code(t.dtype()));
    out.extend((t.shape().len() as u32).to_le_bytes());
    for &d in t.shape() {
        out.extend((d as u32).to_le_bytes());
    }
    match t {
        Tensor::F32(a) | Tensor::F16(a) => a.iter().for_each(|v| out.extend(v.to_le_bytes())),
        Tensor::I32(a) => a.iter().for_each(|v| out.extend(v.to_le_bytes())),
        Tensor::Bool(a) => a.iter().for_each(|&v| out.push(v as u8)),
    }
}

fn read_tensor(r: &mut Reader) -> Result<Tensor> {
    let code = r.take(1, "a dtype")?[0];
    let rank = r.u32("a rank")?;
    if rank > 16 {
        return Err(Error::poptorch(format!("replica outputs: a tensor of rank {rank} (at most 16)")));
    }
    let shape = (0..rank).map(|_| r.u32("a dimension")).collect::<Result<Vec<_>>>()?;
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Error::poptorch(format!("replica outputs: shape {shape:?} overflows")))?;
    let words = |r: &mut Reader, what| -> Result<Vec<[u8; 4]>> {
        let b = r.take(n.saturating_mul(4), what)?;
        Ok(b.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]).collect())
    };
    match code {
        0 => Tensor::from_f32(&shape, words(r, "float32 values")?.into_iter().map(f32::from_le_bytes).collect()),
        1 => {
            let v: Vec<f32> = words(r, "float16 values")?.into_iter().map(f32::from_le_bytes).collect();
            Tensor::from_f32_as_f16(&shape, &v)
        }
        2 => Tensor::from_i32(&shape, words(r, "int32 values")?.into_iter().map(i32::from_le_bytes).collect()),
        3 => Tensor::from_bool(&shape, r.take(n, "bool values")?.iter().map(|&b| b != 0).collect()),
        c => Err(Error::poptorch(format!("replica outputs: unknown dtype code {c}"))),
    }
}

impl LocalOutputs {
    /// The outputs as bytes (`IPRO`, then per list — outputs, anchors — the entry count and
    /// each entry's micro-batch, tensor count and tensors: dtype, rank, dims, values).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for list in [&self.outputs, &self.anchors] {
            out.extend((list.len() as u32).to_le_bytes());
            for (m, ts) in list {
                out.extend((*m as u32).to_le_bytes());
                out.extend((ts.len() as u32).to_le_bytes());
                ts.iter().for_each(|t| write_tensor(t, &mut out));
            }
        }
        out
    }

    /// Reads [`Self::to_bytes`]'s bytes; an error names what is missing or malformed.
    pub fn from_bytes(bytes: &[u8]) -> Result<LocalOutputs> {
        let mut r = Reader { bytes, at: 0 };
        if r.take(4, "the header")? != MAGIC {
            return Err(Error::poptorch("replica outputs: these bytes are not a replica's packed outputs"));
        }
        let mut lists = [Vec::new(), Vec::new()];
        for list in &mut lists {
            let n = r.u32("an entry count")?;
            for _ in 0..n {
                let m = r.u32("a micro-batch index")?;
                let k = r.u32("a tensor count")?;
                let ts = (0..k).map(|_| read_tensor(&mut r)).collect::<Result<Vec<_>>>()?;
                list.push((m, ts));
            }
        }
        if r.at != bytes.len() {
            return Err(Error::poptorch(format!(
                "replica outputs: {} bytes left over after the last entry",
                bytes.len() - r.at
            )));
        }
        let [outputs, anchors] = lists;
        Ok(LocalOutputs { outputs, anchors })
    }

    /// Every executor's part merged into one list per micro-batch (`micro_batches` of
    /// them): each micro-batch must come from exactly one part.
    pub fn merge(parts: Vec<LocalOutputs>, micro_batches: usize) -> Result<(PerMicro, PerMicro)> {
        let mut outs: Vec<Option<Vec<Tensor>>> = vec![None; micro_batches];
        let mut anchors: Vec<Option<Vec<Tensor>>> = vec![None; micro_batches];
        for (p, part) in parts.into_iter().enumerate() {
            for (into, list, what) in [(&mut outs, part.outputs, "outputs"), (&mut anchors, part.anchors, "anchors")] {
                for (m, ts) in list {
                    let slot = into.get_mut(m).ok_or_else(|| {
                        Error::poptorch(format!(
                            "replica outputs: part {p} has {what} of micro-batch {m}, but a call has {micro_batches}"
                        ))
                    })?;
                    if slot.replace(ts).is_some() {
                        return Err(Error::poptorch(format!(
                            "replica outputs: micro-batch {m}'s {what} come from two parts (part {p} again)"
                        )));
                    }
                }
            }
        }
        let done = |v: Vec<Option<Vec<Tensor>>>, what: &str| {
            v.into_iter()
                .enumerate()
                .map(|(m, t)| {
                    t.ok_or_else(|| {
                        Error::poptorch(format!(
                            "replica outputs: no part has micro-batch {m}'s {what}: every replica must report"
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()
        };
        Ok((done(outs, "outputs")?, done(anchors, "anchors")?))
    }
}

/// The layout of a step whose gradients have types `grads` (one per parameter, in order).
pub fn contributions(grads: &[&TensorType], count: bool, replicas: usize) -> Contributions {
    Contributions { shapes: grads.iter().map(|t| t.shape.clone()).collect(), count, replicas }
}

#[cfg(test)]
mod tests {
    use super::super::reduce::GradReduction;
    use super::*;
    use crate::compile::options::{MeanReductionStrategy, ReductionType};

    fn how(kind: ReductionType) -> GradReduction {
        GradReduction {
            kind,
            strategy: MeanReductionStrategy::Post,
            accumulation: 2,
            replicas: 3,
            accum_dtype: DType::Float32,
        }
    }

    /// Replica `r`'s two micro-batches of two gradients (shapes [2] and [1]).
    fn grads(r: usize) -> [[Tensor; 2]; 2] {
        let f = |v: f32| v + r as f32 * 10.0;
        [
            [Tensor::from_f32(&[2], vec![f(1.0), f(0.5)]).unwrap(), Tensor::from_f32(&[1], vec![f(-2.0)]).unwrap()],
            [Tensor::from_f32(&[2], vec![f(3.0), f(0.25)]).unwrap(), Tensor::from_f32(&[1], vec![f(4.0)]).unwrap()],
        ]
    }

    fn accumulate(rs: std::ops::Range<usize>, h: &GradReduction) -> Vec<Accumulator> {
        let mut accs = vec![Accumulator::new(3), Accumulator::new(3)];
        for r in rs {
            for step in grads(r) {
                for (acc, g) in accs.iter_mut().zip(&step) {
                    acc.add(r, g, h).unwrap();
                }
            }
        }
        accs
    }

    #[test]
    fn split_contributions_gathered_reduce_as_one_executor_holding_every_replica() {
        for kind in [ReductionType::Mean, ReductionType::Sum] {
            let h = how(kind);
            let layout = Contributions { shapes: vec![vec![2], vec![1]], count: true, replicas: 3 };
            assert_eq!(layout.per_replica(), 5);
            // One executor with replicas 0..3 is the reference.
            let whole = accumulate(0..3, &h);
            // Two executors: replicas 0..2 and 2..3, each packing its own.
            let mut gathered = Vec::new();
            let mut a = accumulate(0..2, &h);
            for r in 0..2 {
                layout.pack(r, &mut a, (r as f64) * DIGIT + 7.0, &mut gathered).unwrap();
            }
            let mut b = accumulate(2..3, &h);
            layout.pack(2, &mut b, 3.0, &mut gathered).unwrap();
            assert_eq!(gathered.len(), layout.total());
            let (accs, lower) = layout.unpack(&gathered).unwrap();
            assert_eq!(lower, 7.0 + DIGIT + 7.0 + 3.0, "a count above 2^24 survives exactly");
            for members in [vec![0, 1, 2], vec![0, 2], vec![1]] {
                for (got, want) in accs.iter().zip(&whole) {
                    assert_eq!(got.reduce(&members, &h).unwrap(), want.reduce(&members, &h).unwrap());
                }
            }
            // Sum of replica 0's gradient 0, element 0: 1 + 3; Mean divides by 2 × 3.
            let g = accs[0].reduce(&[0], &h).unwrap()[0];
            assert_eq!(g, if kind == ReductionType::Sum { 4.0 } else { 4.0 / 6.0 });
        }
    }

    #[test]
    fn a_malformed_gathered_buffer_is_an_error_naming_it() {
        let layout = Contributions { shapes: vec![vec![2]], count: true, replicas: 2 };
        let e = layout.unpack(&[0.0; 7]).unwrap_err().to_string();
        assert!(e.contains("hold 7 values") && e.contains("are 8"), "{e}");
        let e = layout.unpack(&[0.0, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0, 0.0]).unwrap_err().to_string();
        assert!(e.contains("replica 0") && e.contains("not a packed count"), "{e}");
        let mut accs = vec![Accumulator::new(2)];
        let e = layout.pack(1, &mut accs, 0.0, &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("replica 1 computed no gradient 0"), "{e}");
    }

    #[test]
    fn outputs_round_trip_every_dtype_and_merge_checks_coverage() {
        let t = |d: DType| match d {
            DType::Float32 => Tensor::from_f32(&[2, 1], vec![1.5, f32::from_bits(0x7fc0_0001)]).unwrap(),
            DType::Float16 => Tensor::from_f32_as_f16(&[2], &[0.5, -65504.0]).unwrap(),
            DType::Int32 => Tensor::from_i32(&[3], vec![i32::MAX, -1, 16_777_217]).unwrap(),
            DType::Bool => Tensor::from_bool(&[], vec![true]).unwrap(),
        };
        let part = LocalOutputs {
            outputs: vec![(1, vec![t(DType::Float32), t(DType::Int32)]), (0, vec![t(DType::Float16), t(DType::Bool)])],
            anchors: vec![(1, vec![]), (0, vec![])],
        };
        let bytes = part.to_bytes();
        let back = LocalOutputs::from_bytes(&bytes).unwrap();
        // Micro-batch 0 (listed second): float16 and bool, equal as tensors.
        assert_eq!(back.outputs[1], part.outputs[1]);
        assert_eq!(back.outputs[1].1[0].dtype(), DType::Float16);
        assert_eq!(back.outputs[1].1[0].shape(), &[2]);
        // Micro-batch 1: int32 past 2^24 exactly, and float32 bits, a NaN's payload included.
        assert_eq!(back.outputs[0].0, 1);
        assert_eq!(back.outputs[0].1[1].as_i32().unwrap().as_slice().unwrap(), &[i32::MAX, -1, 16_777_217]);
        let nan = back.outputs[0].1[0].as_f32().unwrap()[[1, 0]];
        assert_eq!(nan.to_bits(), 0x7fc0_0001);
        assert_eq!(back.anchors, part.anchors);
        let e = LocalOutputs::from_bytes(&bytes[..bytes.len() - 1]).unwrap_err().to_string();
        assert!(e.contains("cut short"), "{e}");
        assert!(LocalOutputs::from_bytes(b"nope").unwrap_err().to_string().contains("not a replica's"));

        let (outs, _) = LocalOutputs::merge(vec![back.clone()], 2).unwrap();
        assert_eq!(outs[0][1], t(DType::Bool));
        let e = LocalOutputs::merge(vec![back.clone(), back.clone()], 2).unwrap_err().to_string();
        assert!(e.contains("two parts"), "{e}");
        let e = LocalOutputs::merge(vec![back], 3).unwrap_err().to_string();
        assert!(e.contains("no part has micro-batch 2"), "{e}");
    }
}
