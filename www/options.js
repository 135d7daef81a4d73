// The options the page holds, in the planner's own Options JSON (poptorch.Options in camelCase,
// `Training`, `TensorLocations` and `Precision` nested: crate/src/compile/options.rs is its one definition and
// the planner its one validator). The IPUs in the system are the page's own setting, never sent
// in it.
//
// The page checks only what it needs to build the JSON (a count field holds a whole number);
// every rule (ranges, PopTorch's combinations) is the planner's, whose diagnostics
// fieldOfDiagnostic() ties back to the panel's fields.

export const STRATEGIES = Object.freeze({
  pipelined: "Pipelined",
  sharded: "Sharded",
  serialPhased: "Serial phased",
  parallelPhased: "Parallel phased",
});

export const AUTO_STAGES = Object.freeze({
  sameAsIpu: "SameAsIpu (stage = IPU)",
  autoIncrement: "AutoIncrement (a stage per Block)",
});

/** The generations the planner knows (their numbers come back in each plan's `generation`). */
export const GENERATIONS = Object.freeze({ mk1: "Mk1 (GC2)", mk2: "Mk2 (GC200)", bow: "Bow" });

/** A tensor class's location: the strategy's default (key left out), on chip, or Streaming Memory. */
export const LOCATIONS = Object.freeze({ default: "Strategy's default", onChip: "On chip", offChip: "Streaming Memory" });

/** TensorLocations' classes (the planner's keys) and their labels. */
export const TENSOR_CLASSES = Object.freeze({
  activation: "Activations",
  weight: "Weights",
  optimizer: "Optimizer state",
  accumulator: "Accumulators",
});

/** PopTorch's defaults for what the panel shows. */
export function defaultOptions() {
  return {
    deviceIterations: 1,
    replicationFactor: 1,
    autoRoundNumIPUs: false,
    executionStrategy: { type: "pipelined", autoStage: "sameAsIpu" },
    ipuGeneration: "mk2",
    Training: { gradientAccumulation: 1, automaticLossScaling: false },
    TensorLocations: {},
  };
}

const GROUPS = new Set(["Training", "TensorLocations", "Precision"]);

/** `base` with `patch` merged in, the nested groups key by key (a preset's or a link's options). */
export function mergeOptions(base, patch = {}) {
  const out = structuredClone(base);
  for (const [k, v] of Object.entries(patch ?? {})) {
    if (GROUPS.has(k) && v && typeof v === "object" && !Array.isArray(v)) out[k] = { ...(out[k] ?? {}), ...structuredClone(v) };
    else out[k] = structuredClone(v);
  }
  return out;
}

/** The location select's value for a TensorLocations entry. */
export function locationOf(settings) {
  if (!settings || typeof settings !== "object" || typeof settings.useOnChipStorage !== "boolean") return "default";
  return settings.useOnChipStorage ? "onChip" : "offChip";
}

/** A TensorLocations entry for the select's value (undefined: leave the key out). */
export function locationSettings(value) {
  if (value === "onChip") return { useOnChipStorage: true };
  if (value === "offChip") return { useOnChipStorage: false };
  return undefined;
}

const COUNTS = {
  deviceIterations: (o) => o.deviceIterations,
  replicationFactor: (o) => o.replicationFactor,
  gradientAccumulation: (o) => o.Training?.gradientAccumulation,
};

/**
 * What keeps `o` from being Options JSON the planner can read, each { field, message }
 * (`field`: the panel's input, its id without "opt-"). Ranges are the planner's to judge.
 */
export function typeErrors(o) {
  const errors = [];
  for (const [field, get] of Object.entries(COUNTS)) {
    const v = get(o);
    if (!Number.isInteger(v) || v < 0) errors.push({ field, message: `Must be a whole number (0, 1, 2, …), got ${v === undefined ? "nothing" : JSON.stringify(v)}` });
  }
  return errors;
}

/** The Options JSON to send to the planner: `o` without keys left unset. */
export function toPlannerOptions(o) {
  const out = structuredClone(o);
  for (const [k, v] of Object.entries(out.TensorLocations ?? {})) if (v === undefined || v === null) delete out.TensorLocations[k];
  return out;
}

// The panel's field of each option, by the option's key in the Options JSON (`Diagnostic.option`,
// `err.option`: the key the planner names in a diagnostic or a thrown error). A key below one of
// these (`executionStrategy.autoStage` below `executionStrategy`) belongs to the longest listed.
const FIELD_OF_OPTION = {
  deviceIterations: "deviceIterations",
  replicationFactor: "replicationFactor",
  broadcastBuffers: "replicationFactor",
  autoRoundNumIPUs: "autoRound",
  ipuGeneration: "ipuGeneration",
  executionStrategy: "phases",
  "executionStrategy.autoStage": "autoStage",
  "Training.gradientAccumulation": "gradientAccumulation",
  "Training.automaticLossScaling": "automaticLossScaling",
  "TensorLocations.activation": "loc-activation",
  "TensorLocations.weight": "loc-weight",
  "TensorLocations.optimizer": "loc-optimizer",
  "TensorLocations.accumulator": "loc-accumulator",
};

/** The panel field of option `key` (an Options JSON key, dotted), "options" for one the panel has no field of, or null for none. */
export function fieldOfOption(key) {
  if (typeof key !== "string" || key === "") return null;
  for (let k = key; k; k = k.includes(".") ? k.slice(0, k.lastIndexOf(".")) : "") {
    if (Object.hasOwn(FIELD_OF_OPTION, k)) return FIELD_OF_OPTION[k];
  }
  return "options";
}

/**
 * The panel field `d` (a plan error or warning, or a thrown error) belongs to, or null: the
 * page's own `field` (its settings: IPUs, float16), else the field of the option it names.
 */
export function fieldOfDiagnostic(d) {
  return d?.field ?? fieldOfOption(d?.option);
}
