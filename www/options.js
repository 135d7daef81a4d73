// The options the page holds, in the planner's own Options JSON (poptorch.Options in camelCase,
// `Training` and `TensorLocations` nested: crate/src/compile/options.rs is its one definition and
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

const GROUPS = new Set(["Training", "TensorLocations"]);

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

// Which panel field a planner diagnostic is about: by its code, or (for the codes that name
// any option) by the option its message names first.
const FIELD_OF_CODE = {
  pipeline_gradient_accumulation: "gradientAccumulation",
  inference_gradient_accumulation: "gradientAccumulation",
  pipeline_device_iterations: "deviceIterations",
  ipu_count_not_power_of_two: "autoRound",
  ipu_count_rounded: "autoRound",
  too_many_ipus: "replicationFactor",
  broadcast_buffers: "replicationFactor",
  replicated_tensor_sharding_without_replicas: "replicationFactor",
  inference_training_options: "automaticLossScaling",
  same_as_ipu_without_ipu: "autoStage",
  stage_order_conflict: "autoStage",
  auto_stage_ignored: "autoStage",
  phased_auto_stage: "phases",
  unknown_block: "phases",
  block_in_several_stages: "phases",
  phase_ipus_mismatch: "phases",
  parallel_phase_parity: "phases",
  serial_phase_ipus: "phases",
  stage_missing: "phases",
  liveness_serial_only: "phases",
  dead_block: "phases",
  not_enough_ipus: "ipus",
  half_unread: "half",
};

const FIELD_OF_KEY = [
  ["gradientAccumulation", "gradientAccumulation"],
  ["deviceIterations", "deviceIterations"],
  ["replicationFactor", "replicationFactor"],
  ["autoRoundNumIPUs", "autoRound"],
  ["automaticLossScaling", "automaticLossScaling"],
  ["ipuGeneration", "ipuGeneration"],
  ["variant `mk", "ipuGeneration"],
  ["phase", "phases"],
  ["stage", "phases"],
  ["block", "phases"],
];

/** The panel field `d` (a plan error or warning) belongs to, or null. */
export function fieldOfDiagnostic(d) {
  if (Object.hasOwn(FIELD_OF_CODE, d.code)) return FIELD_OF_CODE[d.code];
  if (d.code === "options_not_positive" || d.code === "options_json") {
    // Only what the message says is wrong, not the list of what was expected.
    const text = (d.message ?? "").split(/,? expected (one of|a|an) /)[0];
    if (/unknown field `/.test(text)) return "options";
    let best = null;
    for (const [key, field] of FIELD_OF_KEY) {
      const at = text.indexOf(key);
      if (at >= 0 && (best === null || at < best.at)) best = { at, field };
    }
    return best ? best.field : "options";
  }
  return null;
}
