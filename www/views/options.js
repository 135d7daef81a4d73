// The options panel: what users change most, as the planner's Options JSON (options.js), plus
// the page's own settings passed to the code beside it: the IPUs in the system (`ipus`) and
// the float16 switch (`half`: PopTorch has no such option, a model is made float16 with
// model.half(), so the code applies it). onChange({ options, ipus, half }) after every edit. A
// field shows the page's own complaint (a count that is not a whole number, phases that are
// not JSON) at once, and the planner's diagnostics about it after each plan
// (showPlanDiagnostics).
import { STRATEGIES, AUTO_STAGES, GENERATIONS, LOCATIONS, TENSOR_CLASSES, typeErrors, locationOf, locationSettings, fieldOfDiagnostic } from "../options.js";
import { h } from "./dom.js";

function field(id, label, input, help) {
  input.id = `opt-${id}`;
  const err = h("p", { class: "field-error", id: `err-${id}`, role: "status", "aria-live": "polite" });
  const note = h("p", { class: "field-note", id: `note-${id}`, role: "status", "aria-live": "polite" });
  input.setAttribute("aria-describedby", `err-${id} note-${id}${help ? ` help-${id}` : ""}`);
  const wrap = h("div", { class: `field field-${id}` }, [h("label", { for: input.id, text: label }), input, err, note]);
  if (help) wrap.append(h("p", { class: "help", id: `help-${id}`, text: help }));
  return wrap;
}

const select = (entries) => h("select", {}, Object.entries(entries).map(([v, t]) => h("option", { value: v, text: t })));
const number = (min) => h("input", { type: "number", min, step: 1, inputmode: "numeric" });
const checkbox = () => h("input", { type: "checkbox" });

/** The phases as the textarea shows them: the planner's JSON, one phase per line. */
function phasesText(phases) {
  return Array.isArray(phases) ? `[\n  ${phases.map((p) => JSON.stringify(p)).join(",\n  ")}\n]` : "";
}

/** An execution strategy of the Options JSON, in words. */
function strategyText(s) {
  if (!s || typeof s !== "object") return String(s);
  const name = STRATEGIES[s.type] ?? s.type;
  if (Array.isArray(s.phases)) {
    const phases = s.phases.map((p) => (p.stages ?? []).map((st) => `${st.blocks.join("+")}${Number.isInteger(st.ipu) ? `@${st.ipu}` : ""}`).join(" | ") + (p.ipus ? ` on IPUs ${p.ipus.join(", ")}` : ""));
    return `${name}, ${phases.length} phase${phases.length === 1 ? "" : "s"}: ${phases.map((p) => `[${p}]`).join(", ")}`;
  }
  return s.autoStage ? `${name}, AutoStage ${s.autoStage}` : `${name}${s.stages ? `, ${s.stages.length} explicit stages` : ""}`;
}

export function createOptionsPanel(root, { onChange }) {
  const inputs = {
    strategy: select(STRATEGIES),
    autoStage: select(AUTO_STAGES),
    phases: h("textarea", { rows: 6, spellcheck: "false" }),
    ipus: number(1),
    ipuGeneration: select(GENERATIONS),
    replicationFactor: number(1),
    autoRound: checkbox(),
    gradientAccumulation: number(1),
    deviceIterations: number(1),
    automaticLossScaling: checkbox(),
    half: checkbox(),
  };
  for (const c of Object.keys(TENSOR_CLASSES)) inputs[`loc-${c}`] = select(LOCATIONS);

  const check = (id, label, help) => {
    const f = field(id, label, inputs[id], help);
    f.classList.add("check");
    f.prepend(inputs[id]);
    return f;
  };
  const general = h("p", { class: "field-error", id: "err-options", role: "status", "aria-live": "polite" });
  const codeNote = h("p", { class: "field-note", id: "note-options", role: "status", "aria-live": "polite" });
  const form = h("form", { class: "options", novalidate: true, "aria-label": "Options" }, [
    general,
    codeNote,
    h("fieldset", {}, [
      h("legend", { text: "Execution" }),
      field("strategy", "Execution strategy", inputs.strategy),
      field("autoStage", "AutoStage", inputs.autoStage),
      field("phases", "Phases (JSON, as SerialPhasedExecution / ParallelPhasedExecution take them)", inputs.phases,
        'A phase: ["blockA", "blockB"] (one stage), or { "stages": [{ "blocks": ["a"], "ipu": 0 }, …] }.'),
      field("ipus", "IPUs in the system", inputs.ipus, "Passed to your code as `ipus`; the plan must fit in it."),
      field("ipuGeneration", "IPU generation", inputs.ipuGeneration),
    ]),
    h("fieldset", {}, [
      h("legend", { text: "Batching" }),
      field("replicationFactor", "Replication factor", inputs.replicationFactor),
      check("autoRound", "Round the IPU count up to a power of two (autoRoundNumIPUs)"),
      field("gradientAccumulation", "Gradient accumulation", inputs.gradientAccumulation),
      field("deviceIterations", "Device iterations", inputs.deviceIterations),
    ]),
    h("fieldset", {}, [
      h("legend", { text: "Precision" }),
      check("half", "float16 (model.half())",
        "Passed to your code as `half`: the presets call model.half() and give float16 inputs (in PopTorch half precision is the model's dtype, not an option). Optimizer state stays float32."),
      check("automaticLossScaling", "Automatic loss scaling (Training.setAutomaticLossScaling)", "Needs float16 gradients: a float32 model is refused, as PopTorch refuses it."),
    ]),
    h("fieldset", {}, [
      h("legend", { text: "Tensor locations" }),
      ...Object.entries(TENSOR_CLASSES).map(([c, label]) => field(`loc-${c}`, label, inputs[`loc-${c}`])),
    ]),
  ]);
  form.addEventListener("submit", (e) => e.preventDefault());
  root.append(form);

  let current = null;
  let currentIpus = 1;
  /** The page's own complaints, by field (shown until the field is fixed). */
  let mine = {};
  /** The planner's diagnostics, by field (replaced after every plan). */
  let planners = {};

  const count = (input) => {
    const t = input.value.trim();
    if (t === "") return undefined;
    const n = Number(t);
    return Number.isFinite(n) ? n : t;
  };

  function read() {
    const o = structuredClone(current);
    const type = inputs.strategy.value;
    const errors = {};
    if (type.endsWith("Phased")) {
      let phases;
      try {
        phases = JSON.parse(inputs.phases.value.trim() || "[]");
      } catch (e) {
        errors.phases = `Not valid JSON: ${e.message}`;
        phases = current.executionStrategy.phases ?? [];
      }
      o.executionStrategy = { type, phases };
    } else {
      o.executionStrategy = { type, autoStage: inputs.autoStage.value };
    }
    o.replicationFactor = count(inputs.replicationFactor);
    o.autoRoundNumIPUs = inputs.autoRound.checked;
    o.Training = { ...o.Training, gradientAccumulation: count(inputs.gradientAccumulation), automaticLossScaling: inputs.automaticLossScaling.checked };
    o.deviceIterations = count(inputs.deviceIterations);
    o.ipuGeneration = inputs.ipuGeneration.value;
    o.TensorLocations = {};
    for (const c of Object.keys(TENSOR_CLASSES)) {
      const s = locationSettings(inputs[`loc-${c}`].value);
      if (s) o.TensorLocations[c] = s;
    }
    for (const e of typeErrors(o)) errors[e.field] ??= e.message;
    const ipus = count(inputs.ipus);
    const ipusOk = Number.isInteger(ipus) && ipus >= 1 && ipus <= 1024;
    if (!ipusOk) errors.ipus = `IPUs in the system must be a whole number from 1 to 1024, got ${inputs.ipus.value || "nothing"}`;
    return { options: o, ipus: ipusOk ? ipus : currentIpus, half: inputs.half.checked, errors };
  }

  function paint() {
    for (const id of [...Object.keys(inputs), "options"]) {
      const p = form.querySelector(`#err-${id}`);
      const msg = [mine[id], planners[id]].filter(Boolean).join(" ");
      if (p.textContent !== msg) p.textContent = msg;
      if (inputs[id]) inputs[id].setAttribute("aria-invalid", msg ? "true" : "false");
    }
  }

  function sync() {
    const phased = inputs.strategy.value.endsWith("Phased");
    form.querySelector(".field-phases").hidden = !phased;
    form.querySelector(".field-autoStage").hidden = phased;
  }

  form.addEventListener("input", (e) => {
    if (e.target === inputs.strategy && inputs.strategy.value.endsWith("Phased") && !inputs.phases.value.trim()) {
      inputs.phases.value = "[]";
    }
    sync();
    const { options, ipus, half, errors } = read();
    mine = errors;
    paint();
    current = options;
    currentIpus = ipus;
    onChange({ options, ipus, half });
  });

  return {
    /** Shows `options`, `ipus` and `half` (a preset or a link was loaded). */
    set({ options, ipus, half }) {
      current = structuredClone(options);
      currentIpus = ipus;
      const s = options.executionStrategy ?? {};
      inputs.strategy.value = Object.hasOwn(STRATEGIES, s.type) ? s.type : "pipelined";
      inputs.autoStage.value = Object.hasOwn(AUTO_STAGES, s.autoStage) ? s.autoStage : "sameAsIpu";
      inputs.phases.value = phasesText(s.phases);
      inputs.ipus.value = String(ipus);
      inputs.replicationFactor.value = String(options.replicationFactor ?? "");
      inputs.autoRound.checked = Boolean(options.autoRoundNumIPUs);
      inputs.gradientAccumulation.value = String(options.Training?.gradientAccumulation ?? "");
      inputs.deviceIterations.value = String(options.deviceIterations ?? "");
      inputs.automaticLossScaling.checked = Boolean(options.Training?.automaticLossScaling);
      inputs.half.checked = Boolean(half);
      inputs.ipuGeneration.value = Object.hasOwn(GENERATIONS, options.ipuGeneration) ? options.ipuGeneration : "mk2";
      for (const c of Object.keys(TENSOR_CLASSES)) inputs[`loc-${c}`].value = locationOf(options.TensorLocations?.[c]);
      sync();
      mine = Object.fromEntries(typeErrors(options).map((e) => [e.field, e.message]));
      planners = {};
      paint();
    },
    /**
     * Marks the fields whose value the code set itself ([{ field, value, line }]): the code
     * runs after the page builds `options` from this panel, so the code's value is planned.
     */
    showCodeOptions(list) {
      for (const p of form.querySelectorAll(".field-note")) p.textContent = "";
      for (const { field, value, line } of list) {
        const p = form.querySelector(`#note-${field}`);
        if (!p) continue;
        const shown = field === "strategy" ? strategyText(value) : typeof value === "object" && value ? JSON.stringify(value) : String(value);
        p.textContent = `Set by your code${line ? ` (line ${line})` : ""}: ${shown}. The code's value is planned, not this field's.`;
      }
      codeNote.textContent = list.length
        ? `Your code sets ${list.length === 1 ? "one of these options" : `${list.length} of these options`} itself; the code runs after the page builds \`options\` from this panel, so its values win (marked below).`
        : "";
    },
    /**
     * Shows the planner's errors and warnings about options at their fields (replacing the
     * last plan's); those about no field of the panel stay in the Fit view only.
     */
    showPlanDiagnostics(diagnostics) {
      planners = {};
      for (const d of diagnostics) {
        let f = d.field ?? fieldOfDiagnostic(d);
        if (f === "autoStage" && inputs.strategy.value.endsWith("Phased")) f = "phases";
        if (!f || (f === "options" && Object.keys(mine).length)) continue;
        const text = d.level === "warning" ? `Warning: ${d.message}` : d.message;
        planners[f] = planners[f] ? `${planners[f]} ${text}` : text;
      }
      paint();
    },
  };
}
