// The one place that reads the Plan JSON (the planner's contract, issue #9) and turns it into
// the inputs of the chart modules. Should a field be renamed when the planner lands, only
// this file changes.
//
// Plan: { valid, fits, training, strategy, options, generation: {name, tiles, bytesPerTile},
//   ipusUsed, ipusReserved, ipusPerReplica, replicas,
//   blocks: [{id, ipu, stage, phase, firstNode, lastNode, nodes}], stages: [{id, ipu, blocks, pass}],
//   phases: [{id, ipus, stages, pass}], placement: [{ipu, stage, phase, pipelineStage}] (per node),
//   copies: [{value, fromIpu, toIpu, bytes, node}],
//   pipeline: null | {stages, microBatches, rampUp, steady, rampDown, schedule: [{step, stage, ipu, microBatch, pass}]},
//   memory: null | {capacityBytes, ipus: [{ipu, alwaysLive: {code, exchange, weights, optimizer, accumulators, buffers},
//            steps: [{node, label, activations, stash, gradients, temporaries, streaming}], peakBytes, peakStep, fits,
//            largest: [{name, bytes, class}], tiles: [..]}], values: [{value, name, ipu, class, bytes, birth, death}]},
//   time: null | {stepTimeS, samplesPerStep, throughput, ipus: [{ipu, intervals: [{start, end, kind, label}]}]},
//   warnings: [{code, message, fix}], errors: [{code, message, fix, node}] }

export const ALWAYS_LIVE = ["code", "exchange", "weights", "optimizer", "accumulators", "buffers"];
export const PER_STEP = ["activations", "stash", "gradients", "temporaries", "streaming"];

const DTYPE_SHORT = { float32: "f32", float16: "f16", int32: "i32", bool: "bool" };

/** The IPUs of one replica the plan uses, ascending. */
export function planIpus(plan) {
  const set = new Set();
  for (const b of plan?.blocks ?? []) if (Number.isInteger(b.ipu)) set.add(b.ipu);
  for (const s of plan?.stages ?? []) if (Number.isInteger(s.ipu)) set.add(s.ipu);
  if (!set.size) set.add(0);
  return [...set].sort((a, b) => a - b);
}

/** The headline numbers. */
export function summary(plan) {
  return {
    strategy: plan.strategy,
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
    generation: plan.generation?.name ?? "",
    placeholder: Boolean(plan.placeholder),
  };
}

/** Input of charts/stages.js. */
export function stagesData(plan) {
  const phased = (plan.phases ?? []).length > 0;
  const cells = [];
  let columns;
  if (phased) {
    const order = [...plan.phases].sort((a, b) => a.id - b.id);
    columns = order.map((p) => ({ id: p.id, label: `Phase ${p.id}${p.pass === "backward" ? " (bwd)" : ""}`, pass: p.pass }));
    order.forEach((p, col) => {
      for (const sid of p.stages) {
        const st = plan.stages.find((s) => s.id === sid);
        if (st) cells.push({ ipu: st.ipu, column: col, blocks: st.blocks, label: `stage ${st.id}`, pass: p.pass });
      }
    });
  } else {
    columns = (plan.stages ?? []).map((s) => ({ id: s.id, label: `Stage ${s.id}${s.pass === "backward" ? " (bwd)" : ""}`, pass: s.pass }));
    (plan.stages ?? []).forEach((s, col) => cells.push({ ipu: s.ipu, column: col, blocks: s.blocks, label: s.pass === "backward" ? "backward" : `${s.blocks.length} block${s.blocks.length > 1 ? "s" : ""}`, pass: s.pass }));
  }
  return { ipus: planIpus(plan), columns, cells, kind: phased ? "phase" : "stage" };
}

/** Input of charts/pipeline.js, or null when the plan is not pipelined. */
export function pipelineData(plan) {
  const p = plan.pipeline;
  if (!p) return null;
  const stages = (plan.stages ?? []).map((s) => ({ id: s.id, ipu: s.ipu, pass: s.pass }));
  return {
    stages,
    steps: p.rampUp + p.steady + p.rampDown,
    cells: p.schedule ?? [],
    rampUp: p.rampUp,
    steady: p.steady,
    rampDown: p.rampDown,
    microBatches: p.microBatches,
  };
}

/** Input of charts/memory.js for one IPU (null without a memory model). */
export function memoryData(plan, ipu) {
  const m = plan.memory;
  const entry = m?.ipus?.find((e) => e.ipu === ipu);
  if (!entry) return null;
  const always = entry.alwaysLive ?? {};
  const steps = (entry.steps ?? []).map((s) => {
    const values = {};
    for (const c of ALWAYS_LIVE) values[c] = always[c] ?? 0;
    for (const c of PER_STEP) values[c] = s[c] ?? 0;
    return { label: s.label ?? `%${s.node}`, node: s.node, values };
  });
  return {
    ipu,
    classes: [...ALWAYS_LIVE, ...PER_STEP],
    steps,
    capacity: m.capacityBytes,
    peakStep: entry.peakStep,
    peakBytes: entry.peakBytes,
    fits: entry.fits,
    largest: entry.largest ?? [],
  };
}

/** Tensors live on `ipu` at program step `step` of memoryData's steps (birth ≤ node ≤ death). */
export function liveTensors(plan, ipu, node) {
  return (plan.memory?.values ?? [])
    .filter((v) => v.ipu === ipu && v.birth <= node && node <= v.death)
    .sort((a, b) => b.bytes - a.bytes);
}

/** Input of charts/tiles.js for one IPU. */
export function tilesData(plan, ipu) {
  const entry = plan.memory?.ipus?.find((e) => e.ipu === ipu);
  if (!entry?.tiles?.length) return null;
  return { tiles: entry.tiles, bytesPerTile: plan.generation?.bytesPerTile ?? 638976 };
}

/** Input of charts/gantt.js (null without a cost model). */
export function ganttData(plan) {
  const t = plan.time;
  if (!t?.ipus?.length) return null;
  return {
    rows: [...t.ipus].sort((a, b) => a.ipu - b.ipu).map((r) => ({ ipu: r.ipu, intervals: r.intervals ?? [] })),
    end: t.stepTimeS,
    stepTimeS: t.stepTimeS,
    throughput: t.throughput,
    samplesPerStep: t.samplesPerStep,
    ipusReserved: plan.ipusReserved,
  };
}

/** Errors and warnings, errors first. */
export function fitItems(plan) {
  return [
    ...(plan.errors ?? []).map((e) => ({ level: "error", ...e })),
    ...(plan.warnings ?? []).map((w) => ({ level: "warning", ...w })),
  ];
}

/** The module scope a node is grouped under: `layers.0` for ModuleList items, else the first name. */
export function groupOf(scope) {
  if (!scope) return "";
  const parts = scope.split(".");
  if (parts.length >= 2 && /^\d+$/.test(parts[1])) return `${parts[0]}.${parts[1]}`;
  return parts[0];
}

/** Input of charts/graph.js: the traced graph's ops grouped by scope, keyed by IPU/stage/phase. */
export function graphData(graph, plan, colorBy = "ipu", userFile = "model.js") {
  const groups = [];
  let current = null;
  const keys = new Map();
  graph.nodes.forEach((n, i) => {
    if (n.op === "placeholder" && n.kind === "parameter") return; // shown in the printed graph
    if (n.op === "constant") return;
    const scope = groupOf(n.meta?.scope ?? "");
    if (!current || current.scope !== scope) {
      current = { scope, nodes: [] };
      groups.push(current);
    }
    const pl = plan?.placement?.[i] ?? {};
    const key = colorBy === "stage" ? pl.stage : colorBy === "phase" ? pl.phase : pl.ipu;
    const keyLabel = key === null || key === undefined ? "" : `${colorBy} ${key}`;
    if (keyLabel) keys.set(key, keyLabel);
    const out = n.outputs?.[0];
    const v = out === undefined ? null : graph.values[out];
    const shape = v ? `${DTYPE_SHORT[v.dtype] ?? v.dtype}[${v.shape.join(",")}]` : "";
    const name = n.op === "placeholder" ? `${n.kind} ${n.name}` : n.opname ?? n.op;
    const source = n.meta?.source ?? "";
    // A line of the editor's code (model.js:12), not of the engine's own sources.
    const line = source.startsWith(`${userFile}:`) ? Number(source.slice(userFile.length + 1)) : null;
    current.nodes.push({ index: i, op: name, shape, source, line, key, keyLabel });
  });
  const legend = [...keys.entries()].sort((a, b) => a[0] - b[0]).map(([key, label]) => ({ key, label: label.replace(/^ipu/, "IPU").replace(/^\w/, (c) => c.toUpperCase()) }));
  const ops = graph.nodes.filter((n) => n.op !== "placeholder" && n.op !== "constant").length;
  return { groups, legend, ops };
}

/** What the trace alone says about memory: parameter bytes per IPU (each parameter counted
 *  on every IPU whose ops read it). */
export function parametersPerIpu(graph, plan) {
  const bytesOf = (v) => v.shape.reduce((a, d) => a * d, 1) * ({ float32: 4, float16: 2, int32: 4, bool: 1 }[v.dtype] ?? 4);
  const perIpu = new Map();
  graph.nodes.forEach((n, i) => {
    const ipu = plan?.placement?.[i]?.ipu;
    if (ipu === null || ipu === undefined) return;
    for (const v of n.inputs ?? []) {
      const producer = graph.nodes[graph.values[v]?.node];
      if (producer?.op !== "placeholder" || producer.kind !== "parameter") continue;
      const e = perIpu.get(ipu) ?? { ipu, names: new Set(), bytes: 0 };
      if (!e.names.has(producer.name)) {
        e.names.add(producer.name);
        e.bytes += bytesOf(graph.values[v]);
      }
      perIpu.set(ipu, e);
    }
  });
  return [...perIpu.values()].sort((a, b) => a.ipu - b.ipu).map((e) => ({ ipu: e.ipu, parameters: e.names.size, bytes: e.bytes }));
}
