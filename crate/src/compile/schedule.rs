//! Passes and tables that decide order: when optimizer updates run in the program
//! ([`updates_early`]), and how micro-batches flow through a pipeline ([`pipeline`]).

use crate::ir::simplify::rebuild;
use crate::ir::{Graph, InputKind, Op, Pass, ValueId};
use crate::Result;
use serde::Serialize;

/// Moves each `optimizer_update` to just after the last node that reads its gradient or
/// its parameter, as PopART schedules weight updates: a gradient is freed as soon as it is
/// applied instead of living until the end of the backward pass.
pub fn updates_early(g: &Graph) -> Result<Graph> {
    let is_update = |i: usize| matches!(g.nodes[i].op, Op::OptimizerUpdate { .. });
    // Last non-update reader of each value.
    let mut last_reader = vec![None; g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        if !is_update(i) {
            for &v in &n.inputs {
                last_reader[v.0 as usize] = Some(i);
            }
        }
    }
    let params: std::collections::HashMap<&str, ValueId> = g.placeholders(InputKind::Parameter).into_iter().collect();
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); g.nodes.len()];
    let mut order = Vec::with_capacity(g.nodes.len());
    for (i, n) in g.nodes.iter().enumerate() {
        let Op::OptimizerUpdate { param, .. } = &n.op else { continue };
        let gv = n.inputs[0];
        let mut at = g.values[gv.0 as usize].node;
        for v in [Some(gv), params.get(param.as_str()).copied()].into_iter().flatten() {
            if let Some(r) = last_reader[v.0 as usize] {
                at = at.max(r);
            }
        }
        // A gradient that is also a graph output (returned to the host) stays live until
        // the end either way: the update, which only reads it, still runs as soon as it is
        // final, in the backward stage that made it.
        after[at].push(i);
    }
    for (i, moved) in after.iter().enumerate() {
        if !is_update(i) {
            order.push(i);
        }
        order.extend(moved.iter().copied());
    }
    rebuild(g, &order)
}

/// Which pass a pipeline stage runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StagePass {
    Forward,
    /// The last forward stage of a training pipeline, which also runs the first backward step.
    ForwardBackward,
    Backward,
}

impl StagePass {
    /// The stage pass of a node of pass `p` in a stage of kind `self` (for labels).
    pub fn covers(self, p: Pass) -> bool {
        match self {
            StagePass::Forward => p == Pass::Forward,
            StagePass::ForwardBackward => true,
            StagePass::Backward => p != Pass::Forward,
        }
    }
}

/// One cell of the pipeline diagram: at `step`, `stage` (on `ipu`) works on `micro_batch`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PipelineSlot {
    pub step: usize,
    pub stage: usize,
    pub ipu: usize,
    pub micro_batch: usize,
    pub pass: StagePass,
}

/// The ramp-up / steady / ramp-down schedule of `micro_batches` through `stages` stages
/// (PopTorch's pipeline diagram): at step `t` stage `s` works on micro-batch `t - s`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pipeline {
    pub stages: usize,
    pub micro_batches: usize,
    /// Steps while the pipeline fills (not every stage busy yet): `stages - 1`.
    pub ramp_up: usize,
    /// Steps with every stage busy: `micro_batches - stages + 1` (0 when too few micro-batches).
    pub steady: usize,
    /// Steps while it drains.
    pub ramp_down: usize,
    /// Every busy cell, step by step; steady-state steps beyond the first and last
    /// [`STEADY_STEPS_LISTED`] are left out when the table would be large (`truncated`).
    pub schedule: Vec<PipelineSlot>,
    pub truncated: bool,
}

/// Cells listed before the steady state is elided.
pub const MAX_PIPELINE_CELLS: usize = 20_000;
/// Steady steps kept at each end of an elided steady state.
pub const STEADY_STEPS_LISTED: usize = 2;

impl Pipeline {
    /// The schedule of `micro_batches` through stages on `ipus[s]`, each running `passes[s]`.
    pub fn new(micro_batches: usize, ipus: &[usize], passes: &[StagePass]) -> Pipeline {
        let s = ipus.len();
        let m = micro_batches;
        let total = if s == 0 || m == 0 { 0 } else { m + s - 1 };
        let ramp_up = s.saturating_sub(1).min(total);
        let steady = (m + 1).saturating_sub(s);
        let ramp_down = total - ramp_up - steady.min(total - ramp_up);
        let truncated = total * s > MAX_PIPELINE_CELLS && steady > 2 * STEADY_STEPS_LISTED;
        let mut schedule = Vec::new();
        for t in 0..total {
            if truncated && t >= ramp_up + STEADY_STEPS_LISTED && t < ramp_up + steady - STEADY_STEPS_LISTED {
                continue;
            }
            for st in 0..s {
                if t >= st && t - st < m {
                    schedule.push(PipelineSlot {
                        step: t,
                        stage: st,
                        ipu: ipus[st],
                        micro_batch: t - st,
                        pass: passes[st],
                    });
                }
            }
        }
        Pipeline { stages: s, micro_batches: m, ramp_up, steady, ramp_down, schedule, truncated }
    }

    /// Steps from the first micro-batch entering to the last leaving.
    pub fn steps(&self) -> usize {
        self.ramp_up + self.steady + self.ramp_down
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipelined_four_micro_batches_through_three_stages() {
        let p = Pipeline::new(4, &[0, 1, 0], &[StagePass::Forward, StagePass::ForwardBackward, StagePass::Backward]);
        assert_eq!((p.ramp_up, p.steady, p.ramp_down, p.steps()), (2, 2, 2, 6));
        // Step 2: every stage busy, stage s on micro-batch 2 - s.
        let at2: Vec<(usize, usize)> =
            p.schedule.iter().filter(|c| c.step == 2).map(|c| (c.stage, c.micro_batch)).collect();
        assert_eq!(at2, [(0, 2), (1, 1), (2, 0)]);
        assert_eq!(p.schedule.len(), 12, "each of 4 micro-batches visits 3 stages");
        assert!(!p.truncated);
    }

    #[test]
    fn pipelined_long_steady_states_are_elided_but_counted() {
        let p = Pipeline::new(100_000, &[0, 1], &[StagePass::Forward, StagePass::Forward]);
        assert_eq!((p.ramp_up, p.steady, p.ramp_down), (1, 99_999, 1));
        assert!(p.truncated && p.schedule.len() < 20);
        assert_eq!(p.schedule.last().unwrap().step, 100_000);
    }
}
