// The planner's Options JSON as the page holds it (camelCase, the shape of poptorch.Options:
// `Training`, `TensorLocations`, `Precision` groups), its defaults, and the checks the page
// can make before the planner sees it. Shared by the page (options panel, state.js) and the
// worker (the placeholder plan reads it). When the planner lands, toPlannerOptions() is the
// one place to adapt a renamed key.

export const STRATEGIES = Object.freeze({
  pipelined: "Pipelined",
  sharded: "Sharded",
  serial_phased: "Serial phased",
  parallel_phased: "Parallel phased",
});

export const GENERATIONS = Object.freeze({
  // §B of the project's reference notes: tiles and SRAM per tile.
  mk1: { name: "Mk1 GC2", tiles: 1216, bytesPerTile: 256 * 1024 },
  mk2: { name: "Mk2 GC200", tiles: 1472, bytesPerTile: 638976 },
  bow: { name: "Bow", tiles: 1472, bytesPerTile: 638976 },
});

export const LOCATIONS = Object.freeze({ onChip: "On chip", offChip: "Streaming memory" });
export const TENSOR_CLASSES = Object.freeze(["activations", "weights", "optimizer", "accumulators"]);

export function defaultOptions() {
  return {
    deviceIterations: 1,
    replicationFactor: 1,
    autoRoundNumIpus: false,
    executionStrategy: { type: "pipelined", autoStage: "SameAsIpu" },
    Training: { gradientAccumulation: 1, lossScaling: 1, autoLossScaling: false },
    TensorLocations: { activations: "onChip", weights: "onChip", optimizer: "onChip", accumulators: "onChip" },
    Precision: { float16: false },
    ipuGeneration: "mk2",
  };
}

/** `base` with `patch` merged in, group by group (a preset's or a link's partial options). */
export function mergeOptions(base, patch = {}) {
  const out = structuredClone(base);
  for (const [k, v] of Object.entries(patch ?? {})) {
    if (v && typeof v === "object" && !Array.isArray(v) && out[k] && typeof out[k] === "object" && k !== "executionStrategy") {
      out[k] = { ...out[k], ...v };
    } else {
      out[k] = structuredClone(v);
    }
  }
  return out;
}

const whole = (v, min, max) => Number.isInteger(v) && v >= min && v <= max;

/**
 * Problems with `o`, each { field, message }: `field` is the options panel's input it
 * belongs to (its id without the "opt-" prefix).
 */
export function validateOptions(o) {
  const errors = [];
  const bad = (field, message) => errors.push({ field, message });
  if (!o || typeof o !== "object") return [{ field: "strategy", message: "The options must be an object" }];
  if (!whole(o.deviceIterations, 1, 1 << 20)) bad("deviceIterations", `Device iterations must be a whole number from 1 to ${1 << 20}, got ${show(o.deviceIterations)}`);
  if (!whole(o.replicationFactor, 1, 64)) bad("replicationFactor", `Replication factor must be a whole number from 1 to 64, got ${show(o.replicationFactor)}`);
  const acc = o.Training?.gradientAccumulation;
  if (!whole(acc, 1, 1 << 20)) bad("gradientAccumulation", `Gradient accumulation must be a whole number from 1 to ${1 << 20}, got ${show(acc)}`);
  const ls = o.Training?.lossScaling;
  if (typeof ls !== "number" || !Number.isFinite(ls) || ls <= 0) bad("lossScaling", `Loss scaling must be a positive number, got ${show(ls)}`);
  const s = o.executionStrategy;
  if (!s || !Object.hasOwn(STRATEGIES, s.type)) {
    bad("strategy", `Unknown execution strategy ${show(s?.type)}: use ${Object.keys(STRATEGIES).join(", ")}`);
  } else if (s.type.endsWith("_phased")) {
    if (!Array.isArray(s.phases) || s.phases.length === 0) {
      bad("phases", "There is currently no AutoStage for PhasedExecution, please explicitly specify the phases");
    } else {
      s.phases.forEach((phase, p) => {
        if (!Array.isArray(phase) || phase.length === 0) return bad("phases", `Phase ${p} must be a list of stages, e.g. [{ "blocks": ["b0"], "ipu": 0 }]`);
        phase.forEach((st, i) => {
          if (!st || !Array.isArray(st.blocks) || st.blocks.length === 0 || st.blocks.some((b) => typeof b !== "string")) {
            bad("phases", `Phase ${p}, stage ${i}: "blocks" must be a list of Block ids`);
          } else if (!whole(st.ipu, 0, 63)) {
            bad("phases", `Phase ${p}, stage ${i}: "ipu" must be a whole number from 0 to 63, got ${show(st.ipu)}`);
          }
        });
      });
    }
  } else if (!["SameAsIpu", "AutoIncrement"].includes(s.autoStage ?? "SameAsIpu")) {
    bad("autoStage", `Unknown AutoStage ${show(s.autoStage)}: use SameAsIpu or AutoIncrement`);
  }
  if (!Object.hasOwn(GENERATIONS, o.ipuGeneration)) bad("ipuGeneration", `Unknown IPU generation ${show(o.ipuGeneration)}: use ${Object.keys(GENERATIONS).join(", ")}`);
  for (const c of TENSOR_CLASSES) {
    if (!Object.hasOwn(LOCATIONS, o.TensorLocations?.[c])) bad(`loc-${c}`, `Tensor location of ${c} must be onChip or offChip, got ${show(o.TensorLocations?.[c])}`);
  }
  return errors;
}

function show(v) {
  return v === undefined ? "nothing" : JSON.stringify(v);
}

/** The Options JSON as the planner reads it (today the same object; the one place to adapt). */
export function toPlannerOptions(o) {
  return structuredClone(o);
}
