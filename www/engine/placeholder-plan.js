// PLACEHOLDER PLANNER — stands in for the crate's planner (`plan(model, options)`, issue #9)
// until it is built into the package. It derives only what the traced graph and PopTorch's
// documented rules determine: Blocks (from each node's meta.block / meta.ipu), stages and
// phases, the IPU of every node, inter-IPU copies (bytes from the values' shapes), the IPU
// count and its rounding, and the pipeline's ramp-up / steady / ramp-down step counts.
// It has no memory or cost model: `memory` and `time` are null, and the page says
// "planner not available in this build" where they would be drawn. The result has the
// Plan JSON's shape (plan/adapter.js documents it) and `placeholder: true`.
import { GENERATIONS, validateOptions } from "../options.js";

const DTYPE_BYTES = { float32: 4, float16: 2, int32: 4, bool: 1 };

const isOp = (n) => n.op !== "placeholder" && n.op !== "constant";

/** The plan of forward graph `graph` under `options` (validated here too). */
export function placeholderPlan(graph, options, { training = false, available = null } = {}) {
  const errors = [];
  const warnings = [];
  const err = (code, message, fix, node = null) => errors.push({ code, message, fix, node });
  const warn = (code, message, fix) => warnings.push({ code, message, fix });
  for (const e of validateOptions(options)) err("invalid_option", e.message, `Correct the option "${e.field}" in the options panel.`);
  const strategy = options?.executionStrategy?.type ?? "pipelined";
  const phased = strategy.endsWith("_phased");
  const generation = { key: options?.ipuGeneration, ...(GENERATIONS[options?.ipuGeneration] ?? GENERATIONS.mk2) };
  const nodes = graph.nodes;

  // Blocks, in order of first appearance; an op outside any Block joins the previous one.
  const blocks = [];
  const byId = new Map();
  const nodeBlock = new Array(nodes.length).fill(null);
  let current = null;
  let outside = 0;
  nodes.forEach((n, i) => {
    if (!isOp(n)) return;
    const id = n.meta?.block ?? null;
    if (id === null) {
      if (byId.size) outside++;
    } else {
      if (!byId.has(id)) {
        const b = { id, ipu: n.meta.ipu ?? null, stage: null, phase: null, firstNode: i, lastNode: i, nodes: 0 };
        byId.set(id, b);
        blocks.push(b);
      }
      current = byId.get(id);
    }
    if (current) {
      nodeBlock[i] = current;
      current.lastNode = i;
      current.nodes++;
    }
  });
  if (!blocks.length) {
    const b = { id: "(whole model)", ipu: 0, stage: 0, phase: null, firstNode: 0, lastNode: nodes.length - 1, nodes: 0, implicit: true };
    blocks.push(b);
    nodes.forEach((n, i) => {
      if (isOp(n)) {
        nodeBlock[i] = b;
        b.nodes++;
      }
    });
  }
  // Ops before the first Block go to the first one (PopTorch: "the first layers go on IPU 0").
  const first = nodeBlock.findIndex((b) => b);
  nodes.forEach((n, i) => {
    if (isOp(n) && !nodeBlock[i] && i < first) {
      nodeBlock[i] = blocks[0];
      blocks[0].nodes++;
      blocks[0].firstNode = Math.min(blocks[0].firstNode, i);
    }
  });
  if (outside) {
    warn("ops_outside_blocks", `${outside} op(s) come after a Block ends and before the next begins; they are placed with the previous Block.`,
      "With poptorch.Block every op must be inside a Block (\"No active Block, all the ops must belong to a Block\"): wrap them, or use beginBlock.");
  }

  // Stages and phases.
  const stages = [];
  const phases = [];
  if (phased) {
    const list = Array.isArray(options.executionStrategy.phases) ? options.executionStrategy.phases : [];
    const known = blocks.map((b) => b.id);
    list.forEach((phase, p) => {
      if (!Array.isArray(phase)) return;
      const ph = { id: p, ipus: [], stages: [], pass: "forward" };
      phase.forEach((st) => {
        if (!st || !Array.isArray(st.blocks)) return;
        const stage = { id: stages.length, ipu: st.ipu, blocks: [], pass: "forward" };
        for (const id of st.blocks) {
          const b = byId.get(id);
          if (!b) {
            err("unknown_block", `Unknown Block '${id}' list of expected Blocks: [${known.map((k) => `'${k}'`).join(", ")}]`, "Name a Block your code defines.");
            continue;
          }
          if (b.stage !== null) {
            err("block_in_two_stages", `${id} associated with more than one stage`, "List each Block in one phase only.");
            continue;
          }
          Object.assign(b, { stage: stage.id, phase: p, ipu: st.ipu });
          stage.blocks.push(id);
        }
        stages.push(stage);
        ph.stages.push(stage.id);
        if (!ph.ipus.includes(st.ipu)) ph.ipus.push(st.ipu);
      });
      if (strategy === "parallel_phased" && ph.ipus.some((ipu) => ipu % 2 !== p % 2)) {
        err("phase_parity", "When phases are executed in parallel: even phases must run on even IPUs and odd phases on odd IPUs",
          `Phase ${p} runs on IPU ${ph.ipus.join(", ")}: move it to ${p % 2 ? "odd" : "even"} IPUs.`);
      }
      phases.push(ph);
    });
    for (const b of blocks) {
      if (b.stage === null && !b.implicit && list.length) {
        err("block_without_phase", `Block '${b.id}' is in no phase`, "Add it to a stage of one of the phases in the options.");
      }
      if (b.stage === null) Object.assign(b, { stage: 0, phase: 0, ipu: b.ipu ?? 0 });
    }
    if (training && phases.length) {
      // Backward phases mirror the forward ones; the last forward phase also runs the first backward step.
      const P = phases.length;
      for (let p = P - 2; p >= 0; p--) {
        phases.push({ id: 2 * (P - 1) - p, ipus: [...phases[p].ipus], stages: [...phases[p].stages], pass: "backward" });
      }
    }
  } else {
    const autoStage = options?.executionStrategy?.autoStage ?? "SameAsIpu";
    let next = 0;
    for (const b of blocks) {
      if (autoStage === "SameAsIpu") {
        if (b.ipu === null) {
          if (b.implicit) b.ipu = 0;
          else err("same_as_ipu_without_ipu", `poptorch.AutoStage.SameAsIpu was selected but no IPU was specified for block ${b.id}`, "Give the Block an IPU, e.g. block(\"" + b.id + "\", 0, …), or choose AutoStage AutoIncrement.");
        }
        b.ipu ??= 0;
        b.stage = b.ipu;
      } else {
        b.stage = next++;
        b.ipu ??= b.stage; // "ipu = stage id" when no IPU is given
      }
    }
    // Each IPU switch starts a new stage; consecutive Blocks on one IPU merge.
    let prev = null;
    for (const b of blocks) {
      if (prev && prev.ipu === b.ipu && (autoStage === "SameAsIpu" || prev.stage === b.stage)) {
        stages[stages.length - 1].blocks.push(b.id);
      } else {
        stages.push({ id: stages.length, ipu: b.ipu, blocks: [b.id], pass: "forward" });
      }
      b.pipelineStage = stages.length - 1;
      prev = b;
    }
    if (autoStage === "SameAsIpu") {
      const seen = new Set();
      let last = null;
      for (const b of blocks) {
        if (b.ipu !== last && seen.has(b.ipu)) {
          err("stage_order", `Blocks come back to IPU ${b.ipu} after leaving it: with AutoStage.SameAsIpu their stages are not in ascending order, and PopTorch fails to schedule the pipeline`,
            "Choose AutoStage AutoIncrement in the options, or keep each IPU's Blocks together.", b.firstNode);
          break;
        }
        seen.add(b.ipu);
        last = b.ipu;
      }
    }
    for (const b of blocks) b.stage = b.pipelineStage;
  }
  const forwardStages = stages.length;
  const pipelined = strategy === "pipelined" && forwardStages > 1;
  if (pipelined && training) {
    // Backward stages run on the forward stages' IPUs in reverse; the last forward stage does the first backward step.
    for (let s = forwardStages - 2; s >= 0; s--) {
      stages.push({ id: stages.length, ipu: stages[s].ipu, blocks: [...stages[s].blocks], pass: "backward" });
    }
  }

  // IPUs.
  const ipuSet = [...new Set(blocks.map((b) => b.ipu))].sort((a, b) => a - b);
  const ipusPerReplica = Math.max(ipuSet.length, (ipuSet[ipuSet.length - 1] ?? 0) + 1);
  const replicas = Number.isInteger(options?.replicationFactor) && options.replicationFactor > 0 ? options.replicationFactor : 1;
  const ipusUsed = ipusPerReplica * replicas;
  let ipusReserved = 1;
  while (ipusReserved < ipusUsed) ipusReserved *= 2;
  if (ipusUsed > 64) {
    err("too_many_ipus", `Too many IPUs requested (${ipusUsed}). Experiments that need more than 64 IPUs require distributed execution.`, "Use fewer IPUs per replica or fewer replicas.");
  } else if (ipusReserved !== ipusUsed) {
    if (options?.autoRoundNumIpus) {
      warn("ipus_rounded", `Reserving ${ipusReserved} IPUs when the model specifies the use of only ${ipusUsed}. ${ipusReserved - ipusUsed} will be reserved but not used.`, "Use a power of two IPUs to waste none.");
    } else {
      err("ipus_not_power_of_two", `The model specifies the use of ${ipusUsed} IPUs, however PopTorch must reserve a minimum of ${ipusReserved} in order to allow the model to run, because PopTorch must reserve a power of 2 or maximum of 64 IPUs per process. Please reconfigure your model to use a different number of IPUs or set poptorch.Options().autoRoundNumIPUs(True).`,
        "Tick \"Round the IPU count up\" in the options, or use a power of two IPUs.");
    }
  }

  if (Number.isInteger(available) && ipusReserved > available && ipusUsed <= 64) {
    err("not_enough_ipus", `The model needs ${ipusReserved} IPUs (${ipusPerReplica} per replica × ${replicas} replica${replicas > 1 ? "s" : ""}${ipusReserved > ipusUsed ? ", rounded up to a power of two" : ""}), but the system has ${available}.`,
      `Choose a system with ${ipusReserved} IPUs or more, or use fewer IPUs or replicas.`);
  }

  // Pipeline depth rules (§A.13).
  const acc = options?.Training?.gradientAccumulation ?? 1;
  const iters = options?.deviceIterations ?? 1;
  let pipeline = null;
  if (!training && acc !== 1) {
    err("accumulation_in_inference", "You must set poptorch.Options().Training.gradientAccumulation to 1 or leave it as its default value (1) when running a poptorch.inferenceModel()." +
      (pipelined ? " Use poptorch.Options().deviceIterations to process a sufficient number of batches each run for pipelined execution instead." : ""), "Set gradient accumulation to 1, or train the model (training: true).");
  }
  if (pipelined) {
    const S = stages.length;
    if (training && acc < S) {
      err("accumulation_below_stages", `poptorch.Options().Training.gradientAccumulation must be greater than or equal to the number of pipeline stages (${S}) when using poptorch.PipelinedExecution. Please note that a model with ${(S + 1) / 2} pipeline stages in PopTorch will have an additional ${(S - 1) / 2} stages when training.`,
        `Set gradient accumulation to ${S} or more.`);
    }
    if (!training && iters < S) {
      err("iterations_below_stages", `poptorch.Options().deviceIterations must be greater than or equal to the number of pipeline stages (${S}) when using PopTorch.PipelinedExecution.`, `Set device iterations to ${S} or more.`);
    }
    const M = Math.max(1, Math.min(training ? acc : iters, 4096));
    const schedule = [];
    for (let m = 0; m < M; m++) {
      for (const st of stages) schedule.push({ step: m + st.id, stage: st.id, ipu: st.ipu, microBatch: m, pass: st.pass });
    }
    const steps = M + S - 1;
    const rampUp = Math.min(S - 1, steps);
    const rampDown = Math.min(S - 1, steps - rampUp);
    pipeline = { stages: S, microBatches: M, rampUp, steady: steps - rampUp - rampDown, rampDown, schedule };
  }

  // Placement of every node, and copies where a value crosses IPUs.
  const placement = nodes.map((n, i) => {
    const b = nodeBlock[i];
    return b ? { ipu: b.ipu, stage: b.stage, phase: b.phase, pipelineStage: pipelined ? b.stage : null } : { ipu: null, stage: null, phase: null, pipelineStage: null };
  });
  const copies = [];
  const seen = new Set();
  nodes.forEach((n, i) => {
    const to = placement[i].ipu;
    if (to === null || !isOp(n)) return;
    for (const v of n.inputs) {
      const value = graph.values[v];
      if (!value) continue;
      const from = placement[value.node]?.ipu;
      if (from === null || from === undefined || from === to || !isOp(nodes[value.node])) continue;
      const key = `${v}>${to}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const bytes = value.shape.reduce((a, d) => a * d, 1) * (DTYPE_BYTES[value.dtype] ?? 4);
      copies.push({ value: v, fromIpu: from, toIpu: to, bytes, node: i });
    }
  });

  for (const b of blocks) delete b.pipelineStage;
  return {
    placeholder: true,
    valid: errors.length === 0,
    fits: null,
    training,
    strategy,
    options,
    generation,
    ipusUsed,
    ipusReserved,
    ipusPerReplica,
    replicas,
    blocks,
    stages,
    phases: phased ? phases : [],
    placement,
    copies,
    pipeline,
    memory: null,
    time: null,
    warnings,
    errors,
  };
}
