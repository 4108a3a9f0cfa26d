// Dataset page: the training form, built from GET /v1/solvers (any solver, any parameter
// list), and deleting the dataset.
import { $, api, el, errorMessage, show } from "./common.js";

const form = $("job-form");
const solverSelect = $("job-solver");
const solverDescription = $("job-solver-description");
const fieldset = $("job-params");
const submit = $("job-submit");
const reset = $("job-reset");
const formError = $("job-form-error");
const formStatus = $("job-form-status");
const datasetId = form.dataset.datasetId;
const labels = (form.dataset.labels || "").split(" ").filter(Boolean);

let solvers = [];
let current = null; // the selected solver's description
const inputs = new Map(); // param name -> input element

/** Compact number for ranges: 1e12, 0.0001 -> 1e-4, 604800. */
function compact(value) {
  const abs = Math.abs(value);
  if (abs !== 0 && (abs >= 1e6 || abs < 1e-3)) {
    const [mantissa, exponent] = value.toExponential().split("e");
    return `${Number(Number(mantissa).toPrecision(3))}e${Number(exponent)}`;
  }
  return String(value);
}

function rangeText(param) {
  const parts = [];
  if (param.exclusive_minimum !== null && param.exclusive_minimum !== undefined) parts.push(`> ${compact(param.exclusive_minimum)}`);
  if (param.minimum !== null && param.minimum !== undefined) parts.push(`≥ ${compact(param.minimum)}`);
  if (param.maximum !== null && param.maximum !== undefined) parts.push(`≤ ${compact(param.maximum)}`);
  return parts.join(", ");
}

function defaultText(param) {
  if (param.default === null || param.default === undefined) return "none";
  if (typeof param.default === "number") return compact(param.default);
  if (typeof param.default === "object") return JSON.stringify(param.default);
  return String(param.default);
}

function setDefault(param, input) {
  const value = param.default;
  if (param.type === "choice") {
    const index = param.choices.findIndex((c) => c === value);
    input.value = index >= 0 ? String(index) : "";
  } else if (value === null || value === undefined) {
    input.value = "";
  } else if (typeof value === "object") {
    input.value = JSON.stringify(value);
  } else {
    input.value = String(value);
  }
  setInvalid(param, input, "");
}

function buildControl(param) {
  const id = `param-${param.name}`;
  const hintId = `${id}-hint`;
  const errorId = `${id}-error`;
  let input;
  if (param.type === "choice" && Array.isArray(param.choices)) {
    input = el("select", { id, name: param.name });
    if (param.nullable) input.append(el("option", { value: "" }, "(null)"));
    param.choices.forEach((choice, index) => input.append(el("option", { value: String(index) }, String(choice))));
  } else if (param.type === "float" || param.type === "int") {
    const isInt = param.type === "int";
    input = el("input", {
      id, name: param.name, type: "number", step: isInt ? "1" : "any",
      inputmode: isInt ? "numeric" : "decimal", autocomplete: "off",
    });
    const low = param.minimum ?? param.exclusive_minimum;
    if (low !== null && low !== undefined) input.min = String(low);
    if (param.maximum !== null && param.maximum !== undefined) input.max = String(param.maximum);
  } else if (param.type === "class_weight") {
    input = el("input", {
      id, name: param.name, type: "text", spellcheck: "false", autocomplete: "off",
      placeholder: labels.length ? JSON.stringify({ [labels[labels.length - 1]]: 2 }) : '{"1": 2.0}',
    });
  } else {
    input = el("input", { id, name: param.name, type: "text", autocomplete: "off" });
  }
  if (!param.nullable && param.type !== "class_weight") input.required = true;
  input.setAttribute("aria-describedby", `${hintId} ${errorId}`);

  const label = el("label", { for: id }, param.name);
  if (param.nullable) label.append(" ", el("span", { class: "optional" }, "(optional)"));
  const hint = [param.description];
  const range = rangeText(param);
  if (range) hint.push(`Range ${range}.`);
  if (param.nullable && (param.default === null || param.default === undefined)) {
    hint.push("Empty means null (the default).");
  } else {
    hint.push(`Default ${defaultText(param)}.`);
    if (param.nullable) hint.push("Empty means null.");
  }
  if (param.type === "class_weight") {
    hint.push(`JSON object: class label → weight${labels.length ? ` (labels: ${labels.join(", ")})` : ""}.`);
  }
  const field = el("div", { class: "field", "data-param": param.name },
    label, input,
    foldedHint(el("small", { class: "hint", id: hintId }), hint.join(" ")),
    el("small", { class: "alert field-error", id: errorId, hidden: true }));
  setDefault(param, input);
  input.addEventListener("input", () => setInvalid(param, input, ""));
  return field;
}

const FOLD_AFTER = 220; // characters: longer help shows its first sentence and folds the rest

/** Fill a hint with `text`; long help keeps its first sentence (or first line) in view and
 *  the rest in a <details> the reader opens ("more"). */
function foldedHint(node, text) {
  node.replaceChildren();
  const lines = text.split("\n");
  if (text.length <= FOLD_AFTER && lines.length <= 3) {
    node.textContent = text;
    return node;
  }
  const sentence = /^[\s\S]*?[.:;](\s|$)/.exec(lines[0]);
  let head = sentence && sentence[0].length <= FOLD_AFTER ? sentence[0].trim() : lines[0].slice(0, FOLD_AFTER).trim();
  if (!head) head = text.slice(0, FOLD_AFTER).trim();
  const rest = text.slice(text.indexOf(head) + head.length).trim();
  node.append(head, " ");
  if (rest) {
    node.append(el("details", { class: "more-help" }, el("summary", {}, "more"),
      el("span", { class: "more-help-text" }, rest)));
  }
  return node;
}

function setInvalid(param, input, message) {
  const error = document.getElementById(`param-${param.name}-error`);
  if (message) {
    input.setAttribute("aria-invalid", "true");
  } else {
    input.removeAttribute("aria-invalid");
  }
  if (error) show(error, message);
}

/** {value} or {error}; the value sent to the API for one parameter. */
function readValue(param, input) {
  const raw = input.value.trim();
  if (raw === "") {
    if (param.nullable || param.type === "class_weight") return { value: null };
    return { error: `${param.name} is required` };
  }
  if (param.type === "choice") return { value: param.choices[Number(raw)] };
  if (param.type === "float" || param.type === "int") {
    const number = Number(raw);
    if (!Number.isFinite(number)) return { error: `${param.name} must be a number` };
    if (param.type === "int" && !Number.isInteger(number)) return { error: `${param.name} must be a whole number` };
    if (param.exclusive_minimum !== null && param.exclusive_minimum !== undefined && !(number > param.exclusive_minimum)) {
      return { error: `${param.name} must be greater than ${compact(param.exclusive_minimum)}` };
    }
    if (param.minimum !== null && param.minimum !== undefined && number < param.minimum) {
      return { error: `${param.name} must be at least ${compact(param.minimum)}` };
    }
    if (param.maximum !== null && param.maximum !== undefined && number > param.maximum) {
      return { error: `${param.name} must be at most ${compact(param.maximum)}` };
    }
    return { value: number };
  }
  if (param.type === "class_weight") {
    let parsed;
    try {
      parsed = JSON.parse(raw);
    } catch {
      return { error: `${param.name} must be a JSON object such as {"1": 2.0}` };
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      return { error: `${param.name} must be a JSON object such as {"1": 2.0}` };
    }
    return { value: parsed };
  }
  return { value: raw };
}

function renderParams() {
  inputs.clear();
  const legend = fieldset.querySelector("legend");
  fieldset.replaceChildren(legend);
  for (const param of current.params) {
    const field = buildControl(param);
    fieldset.append(field);
    inputs.set(param.name, field.querySelector("input, select"));
  }
  foldedHint(solverDescription, current.description || "");
}

function selectSolver(name) {
  current = solvers.find((s) => s.name === name) || solvers[0];
  renderParams();
}

async function load() {
  const result = await api("GET", "/v1/solvers");
  if (!result.ok) {
    $("job-params-loading").textContent = `Could not load the solvers: ${errorMessage(result)}`;
    return;
  }
  solvers = result.data.data;
  if (!solvers.length) {
    $("job-params-loading").textContent = "No solver is available.";
    return;
  }
  solverSelect.replaceChildren(...solvers.map((s) => el("option", { value: s.name }, s.name)));
  solverSelect.disabled = false;
  submit.disabled = false;
  reset.disabled = false;
  // "auto" is the service's default for linear jobs (it picks the solver from the data)
  selectSolver(solvers.some((s) => s.name === "auto") ? "auto" : solvers[0].name);
  solverSelect.value = current.name;
  form.dataset.ready = "true";
}

solverSelect.addEventListener("change", () => selectSolver(solverSelect.value));
reset.addEventListener("click", () => {
  for (const param of current.params) setDefault(param, inputs.get(param.name));
  show(formError, "");
  formStatus.textContent = "Parameters reset to the solver's defaults.";
});

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!current) return;
  show(formError, "");
  const params = {};
  let firstInvalid = null;
  for (const param of current.params) {
    const input = inputs.get(param.name);
    const read = readValue(param, input);
    setInvalid(param, input, read.error || "");
    if (read.error) {
      firstInvalid = firstInvalid || input;
    } else {
      params[param.name] = read.value;
    }
  }
  if (firstInvalid) {
    show(formError, "Some parameters are not valid; see the messages next to them.");
    firstInvalid.focus();
    return;
  }
  submit.disabled = true;
  formStatus.textContent = "Submitting the job…";
  const result = await api("POST", "/v1/jobs", { dataset_id: datasetId, solver: current.name, params });
  if (result.ok) {
    formStatus.textContent = `Job ${result.data.id.slice(0, 8)} queued; opening it…`;
    window.location.assign(`/jobs/${encodeURIComponent(result.data.id)}`);
    return;
  }
  submit.disabled = false;
  formStatus.textContent = "";
  show(formError, errorMessage(result));
  const fieldName = result.data && result.data.error && result.data.error.detail && result.data.error.detail.field;
  if (typeof fieldName === "string" && fieldName.startsWith("params.")) {
    const param = current.params.find((p) => p.name === fieldName.slice(7));
    if (param) {
      setInvalid(param, inputs.get(param.name), errorMessage(result));
      inputs.get(param.name).focus();
    }
  }
});

// Delete the dataset: first press arms, second press deletes.
const deleteButton = $("delete-dataset");
deleteButton.addEventListener("click", async () => {
  const note = $("dataset-message");
  if (!deleteButton.dataset.armed) {
    deleteButton.dataset.armed = "1";
    deleteButton.textContent = "Press again to delete";
    window.setTimeout(() => {
      delete deleteButton.dataset.armed;
      deleteButton.textContent = "Delete dataset";
    }, 5000);
    return;
  }
  deleteButton.disabled = true;
  const result = await api("DELETE", `/v1/datasets/${encodeURIComponent(datasetId)}`);
  if (result.ok) {
    window.location.assign("/datasets");
  } else {
    deleteButton.disabled = false;
    show(note, errorMessage(result));
  }
});

load();
