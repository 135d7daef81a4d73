// The options panel: what users change most, as the planner's Options JSON (options.js),
// plus the IPUs in the system. Each field shows its own error; onChange(options, ipus)
// after every edit that parses.
import { STRATEGIES, GENERATIONS, LOCATIONS, TENSOR_CLASSES, validateOptions } from "../options.js";
import { h } from "./dom.js";

function field(id, label, input, help) {
  input.id = `opt-${id}`;
  const err = h("p", { class: "field-error", id: `err-${id}`, role: "status", "aria-live": "polite" });
  input.setAttribute("aria-describedby", `err-${id}${help ? ` help-${id}` : ""}`);
  const wrap = h("div", { class: `field field-${id}` }, [h("label", { for: input.id, text: label }), input, err]);
  if (help) wrap.append(h("p", { class: "help", id: `help-${id}`, text: help }));
  return wrap;
}

const select = (entries) => h("select", {}, Object.entries(entries).map(([v, t]) => h("option", { value: v, text: t })));
const number = (min) => h("input", { type: "number", min, step: 1, inputmode: "numeric" });
const checkbox = () => h("input", { type: "checkbox" });

export function createOptionsPanel(root, { onChange }) {
  const inputs = {
    strategy: select(STRATEGIES),
    autoStage: select({ SameAsIpu: "SameAsIpu (stage = IPU)", AutoIncrement: "AutoIncrement (a stage per Block)" }),
    phases: h("textarea", { rows: 5, spellcheck: "false" }),
    ipus: number(1),
    replicationFactor: number(1),
    autoRound: checkbox(),
    gradientAccumulation: number(1),
    deviceIterations: number(1),
    float16: checkbox(),
    lossScaling: h("input", { type: "number", min: 0, step: "any" }),
    autoLossScaling: checkbox(),
    ipuGeneration: select(Object.fromEntries(Object.entries(GENERATIONS).map(([k, g]) => [k, g.name]))),
  };
  for (const c of TENSOR_CLASSES) inputs[`loc-${c}`] = select(LOCATIONS);

  const check = (id, label) => {
    const f = field(id, label, inputs[id]);
    f.classList.add("check");
    f.prepend(inputs[id]);
    return f;
  };
  const form = h("form", { class: "options", novalidate: true, "aria-label": "Options" }, [
    h("fieldset", {}, [
      h("legend", { text: "Execution" }),
      field("strategy", "Execution strategy", inputs.strategy),
      field("autoStage", "AutoStage", inputs.autoStage),
      field("phases", "Phases (JSON: per phase, its stages { blocks, ipu })", inputs.phases),
      field("ipus", "IPUs in the system", inputs.ipus, "Passed to your code as `ipus`; the plan must fit in it."),
      field("ipuGeneration", "IPU generation", inputs.ipuGeneration),
    ]),
    h("fieldset", {}, [
      h("legend", { text: "Batching" }),
      field("replicationFactor", "Replication factor", inputs.replicationFactor),
      check("autoRound", "Round the IPU count up to a power of two"),
      field("gradientAccumulation", "Gradient accumulation", inputs.gradientAccumulation),
      field("deviceIterations", "Device iterations", inputs.deviceIterations),
    ]),
    h("fieldset", {}, [
      h("legend", { text: "Precision" }),
      check("float16", "Half precision (float16)"),
      field("lossScaling", "Loss scaling", inputs.lossScaling),
      check("autoLossScaling", "Automatic loss scaling"),
    ]),
    h("fieldset", {}, [
      h("legend", { text: "Tensor locations" }),
      ...TENSOR_CLASSES.map((c) => field(`loc-${c}`, c[0].toUpperCase() + c.slice(1), inputs[`loc-${c}`])),
    ]),
  ]);
  form.addEventListener("submit", (e) => e.preventDefault());
  root.append(form);

  let current = null;
  let currentIpus = 1;

  const whole = (input) => {
    const t = input.value.trim();
    return /^-?\d+$/.test(t) ? Number(t) : t === "" ? undefined : Number.isFinite(Number(t)) ? Number(t) : t;
  };

  function read() {
    const o = structuredClone(current);
    const type = inputs.strategy.value;
    const errors = {};
    if (type.endsWith("_phased")) {
      let phases;
      try {
        phases = JSON.parse(inputs.phases.value || "[]");
      } catch (e) {
        errors.phases = `Not valid JSON: ${e.message}`;
        phases = current.executionStrategy.phases ?? [];
      }
      o.executionStrategy = { type, phases };
    } else {
      o.executionStrategy = { type, autoStage: inputs.autoStage.value };
    }
    o.replicationFactor = whole(inputs.replicationFactor);
    o.autoRoundNumIpus = inputs.autoRound.checked;
    o.Training = { ...o.Training, gradientAccumulation: whole(inputs.gradientAccumulation), autoLossScaling: inputs.autoLossScaling.checked };
    const ls = inputs.lossScaling.value.trim();
    o.Training.lossScaling = ls === "" ? undefined : Number(ls);
    o.deviceIterations = whole(inputs.deviceIterations);
    o.Precision = { ...o.Precision, float16: inputs.float16.checked };
    o.ipuGeneration = inputs.ipuGeneration.value;
    o.TensorLocations = Object.fromEntries(TENSOR_CLASSES.map((c) => [c, inputs[`loc-${c}`].value]));
    const ipus = whole(inputs.ipus);
    if (!(Number.isInteger(ipus) && ipus >= 1 && ipus <= 1024)) errors.ipus = `IPUs in the system must be a whole number from 1 to 1024, got ${inputs.ipus.value || "nothing"}`;
    return { options: o, ipus: Number.isInteger(ipus) && ipus >= 1 && ipus <= 1024 ? ipus : currentIpus, errors };
  }

  function showErrors(options, extra = {}) {
    const errs = { ...extra };
    for (const e of validateOptions(options)) errs[e.field] ??= e.message;
    for (const id of Object.keys(inputs)) {
      const p = form.querySelector(`#err-${id}`);
      const msg = errs[id] ?? "";
      p.textContent = msg;
      inputs[id].setAttribute("aria-invalid", msg ? "true" : "false");
    }
    return Object.keys(errs).length;
  }

  function sync() {
    const phased = inputs.strategy.value.endsWith("_phased");
    form.querySelector(".field-phases").hidden = !phased;
    form.querySelector(".field-autoStage").hidden = phased;
  }

  form.addEventListener("input", (e) => {
    if (e.target === inputs.strategy && inputs.strategy.value.endsWith("_phased") && !inputs.phases.value.trim()) {
      inputs.phases.value = "[]";
    }
    sync();
    const { options, ipus, errors } = read();
    showErrors(options, errors);
    current = options;
    currentIpus = ipus;
    onChange(options, ipus);
  });

  return {
    /** Shows `options` and `ipus` (a preset or a link was loaded). */
    set(options, ipus) {
      current = structuredClone(options);
      currentIpus = ipus;
      const s = options.executionStrategy ?? {};
      inputs.strategy.value = s.type ?? "pipelined";
      inputs.autoStage.value = s.autoStage ?? "SameAsIpu";
      inputs.phases.value = s.phases ? `[\n  ${s.phases.map((p) => JSON.stringify(p)).join(",\n  ")}\n]` : "";
      inputs.ipus.value = String(ipus);
      inputs.replicationFactor.value = String(options.replicationFactor ?? "");
      inputs.autoRound.checked = Boolean(options.autoRoundNumIpus);
      inputs.gradientAccumulation.value = String(options.Training?.gradientAccumulation ?? "");
      inputs.deviceIterations.value = String(options.deviceIterations ?? "");
      inputs.float16.checked = Boolean(options.Precision?.float16);
      inputs.lossScaling.value = String(options.Training?.lossScaling ?? "");
      inputs.autoLossScaling.checked = Boolean(options.Training?.autoLossScaling);
      inputs.ipuGeneration.value = options.ipuGeneration ?? "mk2";
      for (const c of TENSOR_CLASSES) inputs[`loc-${c}`].value = options.TensorLocations?.[c] ?? "onChip";
      sync();
      showErrors(options);
    },
    /** Shows an error the engine reported for an option field. */
    showFieldError(fieldId, message) {
      const p = form.querySelector(`#err-${fieldId}`);
      if (p) p.textContent = message;
    },
  };
}
