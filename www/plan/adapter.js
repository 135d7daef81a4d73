// The one place that reads the planner's Plan JSON (its contract is documented in
// crate/src/compile/plan.rs) and turns it into the inputs of the chart modules and views.
// Should a field be renamed, only this file changes.
//
// Plan (the parts read here):
//   { valid, fits, training, strategy, options, generation: {name, chip, tiles, bytesPerTile, …},
//     ipusUsed, ipusReserved, ipusPerReplica, replicas, numNodes,
//     program: {op: [..], ops: [names], scope: [..], scopes: [names], pass: [0 fwd|1 bwd|2 opt], names: {node: name}},
//     blocks: [{id, ipu, stage, phase, firstNode, lastNode, nodes}],
//     stages: [{id, ipu, blocks, pass: forward|forward_backward|backward, phase}], phases: [{id, ipus, stages, pass}],
//     placement: {ipu: [..], stage: [..], phase: [..], pipelineStage: [..], block: [..]}   (by program node),
//     copies: [{value, fromIpu, toIpu, bytes, node}],
//     pipeline: null | {stages, microBatches, rampUp, steady, rampDown, truncated, schedule: [{step, stage, ipu, microBatch, pass}]},
//     memory: {capacityBytes, ipus: [{ipu, alwaysLive: {code, exchange, weights, optimizer, accumulators, buffers},
//              steps: {node, activations, stash, gradients, temporaries, loaded, streaming: [..]}, programSteps,
//              peak, peakBytes, peakStep, livePeakBytes, fits, largest: [{name, bytes, class}], tiles, maxTileBytes}],
//              values: {value, node, ipu, class, bytes, birth, death: [..]}},
//     time: {stepTimeS, iterationTimeS, iterationsPerStep, microBatchesPerIteration, microBatchSize, samplesPerStep,
//            throughput, ipus: [{ipu, busy: {kind: s}, intervals: [{start, end, kind, label,
//                                                            repeat?: {count, unit, periodS, busy: {kind: s}}}]}]},
//            (kind "elided": `repeat.count` units like the one before, left out of the drawing)
//     warnings: [{code, message, fix, node}], errors: [{code, message, fix, node}] }
// Node indices are the planned program's: the traced forward graph's nodes keep their indices
// in it; backward and optimizer nodes follow (named through `program`).

/** Memory every step needs (the plan's `alwaysLive`), bottom of the stack first. */
export const ALWAYS_LIVE = ["code", "exchange", "weights", "optimizer", "accumulators", "buffers"];
/** Memory that varies over the program (the plan's `steps`), on chip. */
export const PER_STEP = ["activations", "stash", "gradients", "temporaries", "loaded"];
/** How the views name each class. */
export const CLASS_LABELS = {
  code: "code",
  exchange: "exchange buffers",
  weights: "weights",
  optimizer: "optimizer state",
  accumulators: "gradient accumulators",
  buffers: "buffers",
  activations: "activations",
  stash: "pipeline stash",
  gradients: "gradients",
  temporaries: "temporaries",
  loaded: "loaded from Streaming Memory",
};

/** The plan's strategy names. */
const STRATEGY_NAMES = { pipelined: "Pipelined", sharded: "Sharded", serial_phased: "Serial phased", parallel_phased: "Parallel phased" };

const DTYPE_SHORT = { float32: "f32", float16: "f16", int32: "i32", bool: "bool" };
const PASS_SUFFIX = ["", " (backward)", " (optimizer)"];

/** The IPUs of one replica the plan uses, ascending. */
export function planIpus(plan) {
  const set = new Set();
  for (const s of plan?.stages ?? []) if (Number.isInteger(s.ipu)) set.add(s.ipu);
  for (const b of plan?.blocks ?? []) if (Number.isInteger(b.ipu)) set.add(b.ipu);
  if (!set.size) set.add(0);
  return [...set].sort((a, b) => a - b);
}

/** A program node as the planner names it: op and scope (or the placeholder's name), and its pass. */
export function nodeLabel(plan, node) {
  const p = plan.program;
  if (!p || !(node >= 0 && node < p.op.length)) return `node ${node}`;
  const op = p.ops[p.op[node]];
  const name = p.names?.[node];
  const scope = p.scopes[p.scope[node]];
  const head = name !== undefined ? `${op} ${name}` : scope ? `${op} ${scope}` : op;
  return head + (PASS_SUFFIX[p.pass[node]] ?? "");
}

/** A value as the planner names it (a placeholder's or constant's own name, else `%v = op scope`). */
export function valueName(plan, value, node) {
  const name = plan.program?.names?.[node];
  return name !== undefined ? name : `%${value} = ${nodeLabel(plan, node)}`;
}

/** The headline numbers. */
export function summary(plan) {
  const mem = plan.memory?.ipus ?? [];
  return {
    strategy: STRATEGY_NAMES[plan.strategy] ?? plan.strategy,
    valid: plan.valid,
    fits: plan.fits,
    training: plan.training,
    ipusUsed: plan.ipusUsed,
    ipusReserved: plan.ipusReserved,
    ipusPerReplica: plan.ipusPerReplica,
    replicas: plan.replicas,
    blocks: plan.blocks?.length ?? 0,
    stages: plan.stages?.length ?? 0,
    phases: plan.phases?.length ?? 0,
    copies: plan.copies?.length ?? 0,
    copyBytes: (plan.copies ?? []).reduce((a, c) => a + (c.bytes ?? 0), 0),
    generation: plan.generation?.chip ?? plan.generation?.name ?? "",
    peakBytes: Math.max(0, ...mem.map((m) => m.peakBytes)),
    livePeakBytes: Math.max(0, ...mem.map((m) => m.livePeakBytes)),
    capacityBytes: plan.memory?.capacityBytes ?? 0,
    programSteps: plan.numNodes,
  };
}

const PASS_SHORT = { forward: "forward", forward_backward: "fwd + bwd", backward: "backward" };

/** Input of charts/stages.js: one row per IPU, a column per stage (or per phase when phased). */
export function stagesData(plan) {
  const stages = plan.stages ?? [];
  const phased = (plan.phases ?? []).length > 0;
  const cells = [];
  let columns;
  const cellLabel = (s) => `stage ${s.id}`;
  if (phased) {
    const order = [...plan.phases].sort((a, b) => a.id - b.id);
    columns = order.map((p) => ({ id: p.id, label: `Phase ${p.id}`, sub: PASS_SHORT[p.pass] ?? p.pass, pass: p.pass }));
    order.forEach((p, col) => {
      for (const sid of p.stages) {
        const st = stages.find((s) => s.id === sid);
        if (st) cells.push({ ipu: st.ipu, column: col, blocks: st.blocks, label: cellLabel(st), pass: st.pass });
      }
    });
  } else {
    columns = stages.map((s) => ({ id: s.id, label: `Stage ${s.id}`, sub: PASS_SHORT[s.pass] ?? s.pass, pass: s.pass }));
    stages.forEach((s, col) => cells.push({ ipu: s.ipu, column: col, blocks: s.blocks, label: cellLabel(s), pass: s.pass }));
  }
  return { ipus: planIpus(plan), columns, cells, kind: phased ? "phase" : "stage" };
}

/** Steady steps kept at each end when the page shortens a long pipeline for drawing. */
const STEADY_SHOWN = 2;
/** Pipelines longer than this many steps are drawn with their steady state shortened. */
const STEPS_DRAWN = 40;

/**
 * Input of charts/pipeline.js, or null when the plan is not pipelined. A long steady state
 * (left out by the planner, `truncated`, or too wide to draw) is shown as its first and
 * last steps with a gap between: `columns` are the steps drawn, in order.
 */
export function pipelineData(plan) {
  const p = plan.pipeline;
  if (!p) return null;
  const stages = (plan.stages ?? []).map((s) => ({ id: s.id, ipu: s.ipu, pass: s.pass }));
  const steps = p.rampUp + p.steady + p.rampDown;
  const listed = new Set((p.schedule ?? []).map((c) => c.step));
  let keep = (s) => listed.has(s);
  if (steps > STEPS_DRAWN) {
    const a = p.rampUp + STEADY_SHOWN;
    const b = p.rampUp + p.steady - STEADY_SHOWN;
    keep = (s) => listed.has(s) && (s < a || s >= b);
  }
  const columns = [...listed].filter(keep).sort((x, y) => x - y);
  const col = new Map(columns.map((s, i) => [s, i]));
  const gaps = [];
  for (let i = 1; i < columns.length; i++) if (columns[i] !== columns[i - 1] + 1) gaps.push({ after: i - 1, steps: columns[i] - columns[i - 1] - 1 });
  return {
    stages,
    steps,
    columns,
    gaps,
    cells: (p.schedule ?? []).filter((c) => col.has(c.step)).map((c) => ({ ...c, column: col.get(c.step) })),
    rampUp: p.rampUp,
    steady: p.steady,
    rampDown: p.rampDown,
    microBatches: p.microBatches,
  };
}

function ipuMemory(plan, ipu) {
  return plan.memory?.ipus?.find((e) => e.ipu === ipu) ?? null;
}

/**
 * Input of charts/memory.js for one IPU (null when the plan has no memory for it): the listed
 * program steps (`x`: their node indices; at most 2,000 of `programSteps`), one series of
 * bytes per class, always-live classes constant.
 */
export function memoryData(plan, ipu) {
  const m = ipuMemory(plan, ipu);
  if (!m) return null;
  const x = m.steps.node;
  const n = x.length;
  const alwaysLive = Object.fromEntries(ALWAYS_LIVE.map((c) => [c, m.alwaysLive?.[c] ?? 0]));
  const series = {};
  for (const c of ALWAYS_LIVE) series[c] = new Array(n).fill(alwaysLive[c]);
  for (const c of PER_STEP) series[c] = m.steps[c] ?? new Array(n).fill(0);
  const streaming = m.steps.streaming ?? [];
  return {
    ipu,
    classes: [...ALWAYS_LIVE, ...PER_STEP],
    labels: CLASS_LABELS,
    x,
    series,
    programSteps: m.programSteps,
    capacity: plan.memory.capacityBytes,
    peakIndex: Math.max(0, x.indexOf(m.peakStep)),
    peakStep: m.peakStep,
    peakBytes: m.peakBytes,
    livePeakBytes: m.livePeakBytes,
    alwaysLive,
    alwaysLiveBytes: ALWAYS_LIVE.reduce((a, c) => a + alwaysLive[c], 0),
    streamingMax: streaming.reduce((a, b) => Math.max(a, b), 0),
    fits: m.fits,
    largest: m.largest ?? [],
  };
}

/** The label of listed step `index` of `memoryData`'s steps. */
export function stepLabel(plan, data, index) {
  const node = data.x[index];
  return `step ${node} of ${data.programSteps}: ${nodeLabel(plan, node)}`;
}

/**
 * What is in `ipu`'s memory while program step `node` runs: the tensors that come and go
 * (birth ≤ node ≤ death), largest first, named through the program table, and the
 * always-live classes.
 */
export function liveTensors(plan, ipu, node) {
  const v = plan.memory?.values;
  const out = [];
  if (v) {
    for (let k = 0; k < v.value.length; k++) {
      if (v.ipu[k] === ipu && v.birth[k] <= node && node <= v.death[k]) {
        out.push({ value: v.value[k], name: valueName(plan, v.value[k], v.node[k]), class: v.class[k], bytes: v.bytes[k] });
      }
    }
  }
  out.sort((a, b) => b.bytes - a.bytes);
  const m = ipuMemory(plan, ipu);
  const k = m ? m.steps.node.indexOf(node) : -1;
  const step = {};
  if (k >= 0) for (const c of [...PER_STEP, "streaming"]) step[c] = m.steps[c]?.[k] ?? 0;
  const always = ALWAYS_LIVE.filter((c) => (m?.alwaysLive?.[c] ?? 0) > 0).map((c) => ({ class: c, label: CLASS_LABELS[c], bytes: m.alwaysLive[c] }));
  return { tensors: out, always, step };
}

/** Input of charts/tiles.js for one IPU: bytes per tile at its peak. */
export function tilesData(plan, ipu) {
  const m = ipuMemory(plan, ipu);
  if (!m?.tiles?.length) return null;
  return { tiles: m.tiles, bytesPerTile: plan.generation?.bytesPerTile ?? 638976, maxTileBytes: m.maxTileBytes };
}

/**
 * Input of charts/gantt.js: one iteration's timeline per IPU. `gap` is the steady state the
 * planner elided (one `elided` interval per IPU, the same span on each): drawn shortened.
 */
export function ganttData(plan) {
  const t = plan.time;
  if (!t?.ipus?.length) return null;
  const rows = [...t.ipus].sort((a, b) => a.ipu - b.ipu).map((r) => ({ ipu: r.ipu, intervals: r.intervals ?? [], busy: r.busy ?? {} }));
  const el = rows.flatMap((r) => r.intervals).find((i) => i.kind === "elided" && i.end > i.start);
  return {
    rows,
    end: t.iterationTimeS,
    gap: el ? { start: el.start, end: el.end, count: el.repeat?.count ?? 0, unit: el.repeat?.unit ?? "unit", periodS: el.repeat?.periodS ?? 0, label: el.label ?? "" } : null,
    iterationTimeS: t.iterationTimeS,
    stepTimeS: t.stepTimeS,
    iterationsPerStep: t.iterationsPerStep,
    microBatchesPerIteration: t.microBatchesPerIteration,
    microBatchSize: t.microBatchSize,
    throughput: t.throughput,
    samplesPerStep: t.samplesPerStep,
    ipusReserved: plan.ipusReserved,
    ipusUsed: plan.ipusUsed,
    replicas: plan.replicas,
  };
}

/** Errors and warnings, errors first, with the page's own checks (`checks`) among them. */
export function fitItems(plan, checks = []) {
  return [
    ...(plan.errors ?? []).map((e) => ({ level: "error", ...e })),
    ...checks.filter((c) => c.level === "error"),
    ...(plan.warnings ?? []).map((w) => ({ level: "warning", ...w })),
    ...checks.filter((c) => c.level !== "error"),
  ];
}

/**
 * The `file:line` of program node `node` in the traced graph: its own source; for a node the
 * traced graph does not have (backward, optimizer) or one without a source, the source of
 * the first forward node of its scope, else of its Block.
 */
export function sourceOf(plan, graph, node) {
  if (!Number.isInteger(node)) return null;
  const own = graph.nodes[node]?.meta?.source;
  if (own) return own;
  const p = plan.program;
  const scope = p && node < p.scope.length ? p.scopes[p.scope[node]] : "";
  if (scope) {
    const n = graph.nodes.find((g) => g.meta?.scope === scope && g.meta?.source);
    if (n) return n.meta.source;
  }
  const block = plan.blocks?.[plan.placement?.block?.[node]];
  if (block) {
    for (let i = block.firstNode; i <= Math.min(block.lastNode, graph.nodes.length - 1); i++) {
      const src = graph.nodes[i]?.meta?.source;
      if (src) return src;
    }
  }
  return null;
}

/** The editor line of `source` (`model.js:12` → 12), when it is in the editor's code. */
export function editorLine(source, userFile = "model.js") {
  if (!source || !source.startsWith(`${userFile}:`)) return null;
  const n = Number(source.slice(userFile.length + 1));
  return Number.isInteger(n) && n > 0 ? n : null;
}

/** The placement columns the Graph view colours by (the plan's `placement`, by node). */
export const PLACEMENT_KEYS = ["ipu", "stage", "phase"];

/**
 * Input of the Graph view (views/graph/): the traced graph's ops as a dataflow graph. Each op
 * has its module scope, output shape, source line, placement (IPU, stage, phase) and the ops
 * whose outputs it reads (`inputs`, node indices). Parameters and constants are left out
 * (the printed graph lists them), and so are the edges from them.
 */
export function graphNodes(graph, plan, userFile = "model.js") {
  const table = plan?.placement ?? {};
  const shown = graph.nodes.map((n) => !(n.op === "placeholder" && n.kind === "parameter") && n.op !== "constant");
  const nodes = [];
  graph.nodes.forEach((n, i) => {
    if (!shown[i]) return;
    const out = n.outputs?.[0];
    const v = out === undefined ? null : graph.values[out];
    const inputs = [];
    for (const value of n.inputs ?? []) {
      const from = graph.values[value]?.node;
      if (Number.isInteger(from) && shown[from] && !inputs.includes(from)) inputs.push(from);
    }
    const source = n.meta?.source ?? "";
    const place = {};
    for (const k of PLACEMENT_KEYS) place[k] = Number.isInteger(table[k]?.[i]) ? table[k][i] : null;
    nodes.push({
      index: i,
      op: n.op === "placeholder" ? `${n.kind} ${n.name}` : (n.opname ?? n.op),
      shape: v ? `${DTYPE_SHORT[v.dtype] ?? v.dtype}[${v.shape.join(",")}]` : "",
      scope: n.meta?.scope ?? "",
      source,
      line: editorLine(source, userFile),
      inputs,
      place,
    });
  });
  const ipus = new Set(nodes.map((n) => n.place.ipu).filter((x) => x !== null));
  return { nodes, ipus: ipus.size };
}
