// Models pages: paste svmlight rows, POST them as text/plain to /v1/models/{id}/predict and
// show the predicted labels, decision values and probabilities; on a model's page, start an
// evaluation on a stored dataset and draw each evaluation's ROC curve (uPlot, vendored).
import { $, api, el, errorMessage, fmtInt, fmtNum, show } from "./common.js";

const form = $("predict-form");

/** The label of each data line, when it has one (first token without a colon). */
function givenLabels(text) {
  const out = [];
  for (const line of text.split("\n")) {
    const stripped = line.split("#")[0].trim();
    if (!stripped) continue;
    const first = stripped.split(/\s+/)[0];
    out.push(first.includes(":") ? null : Number(first));
  }
  return out;
}

function render(result, given) {
  const output = $("predict-output");
  const { labels, decision_values: values, classes } = result;
  const multi = Array.isArray(values[0]);
  const hasGiven = given.length === labels.length && given.some((v) => v !== null && !Number.isNaN(v));
  const head = [el("th", { scope: "col", class: "num" }, "Row"), el("th", { scope: "col" }, "Predicted label")];
  if (hasGiven) head.push(el("th", { scope: "col" }, "Given label"));
  if (multi) {
    for (const c of classes) head.push(el("th", { scope: "col", class: "num" }, `score ${fmtNum(c)}`));
  } else {
    head.push(el("th", { scope: "col", class: "num" }, "Decision value"));
  }
  const rows = labels.map((label, i) => {
    const cells = [el("td", { class: "num" }, String(i + 1)), el("td", { class: "mono" }, fmtNum(label))];
    if (hasGiven) {
      const g = given[i];
      const match = g !== null && g === label;
      cells.push(el("td", { class: "mono" }, g === null ? "—" : `${fmtNum(g)} ${match ? "✓ match" : "✗ differs"}`));
    }
    for (const v of multi ? values[i] : [values[i]]) cells.push(el("td", { class: "num" }, fmtNum(v, 5)));
    return el("tr", {}, ...cells);
  });
  const summary = [`${fmtInt(labels.length)} row${labels.length === 1 ? "" : "s"} predicted`];
  if (hasGiven) {
    const labelled = labels.filter((_, i) => given[i] !== null);
    const correct = labels.filter((l, i) => given[i] !== null && given[i] === l).length;
    summary.push(`${correct} of ${labelled.length} match the given labels (${(100 * correct / labelled.length).toFixed(1)}%)`);
  }
  const probabilities = result.probabilities;
  if (probabilities) {
    for (const c of classes) head.push(el("th", { scope: "col", class: "num" }, `P(${fmtNum(c)})`));
    rows.forEach((row, i) => {
      for (const p of probabilities[i]) row.append(el("td", { class: "num" }, fmtNum(p, 4)));
    });
  }
  const pairs = multi && values[0].length !== classes.length;
  const note = pairs
    ? "One value per class pair (one-vs-one, LIBSVM's order (0,1), (0,2), …): positive votes for the pair's first class; most votes wins."
    : multi
    ? "One score per class (one-vs-rest); the largest wins."
    : `A decision value above 0 means class ${fmtNum(classes[1])}, otherwise ${fmtNum(classes[0])}.`;
  output.replaceChildren(
    el("p", { class: "predict-output-summary", id: "predict-summary" }, summary.join("; ") + "."),
    el("p", { class: "note" }, note),
    el("div", { class: "table-wrap" },
      el("table", { class: "data compact", id: "predict-table" },
        el("caption", { class: "visually-hidden" }, "Predictions, one row per input line"),
        el("thead", {}, el("tr", {}, ...head)),
        el("tbody", {}, ...rows))),
  );
}

if (form) {
  const input = $("predict-input");
  const error = $("predict-error");
  const button = form.querySelector('button[type="submit"]');
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    show(error, "");
    const text = input.value;
    if (!text.trim()) {
      show(error, "Paste at least one svmlight row.");
      input.setAttribute("aria-invalid", "true");
      input.focus();
      return;
    }
    input.removeAttribute("aria-invalid");
    const modelId = $("predict-model").value;
    button.disabled = true;
    const result = await api("POST", `/v1/models/${encodeURIComponent(modelId)}/predict`, text,
      { "Content-Type": "text/plain" });
    button.disabled = false;
    if (!result.ok) {
      $("predict-output").replaceChildren();
      show(error, errorMessage(result));
      input.setAttribute("aria-invalid", "true");
      return;
    }
    render(result.data, givenLabels(text));
  });
}

// ---- evaluations (model page) ----------------------------------------------------------
const evaluations = $("evaluations");

function rocPlot(figure, curve) {
  const fpr = curve.fpr;
  const tpr = curve.tpr;
  const options = {
    width: Math.max(260, Math.min(figure.clientWidth, 520)),
    height: 280,
    scales: { x: { time: false, range: [0, 1] }, y: { range: [0, 1] } },
    axes: [
      { label: "false positive rate", stroke: "#393f46", grid: { stroke: "#eaeef2" } },
      { label: "true positive rate", stroke: "#393f46", grid: { stroke: "#eaeef2" }, size: 44 },
    ],
    series: [
      { label: "FPR", value: (_u, v) => (v === null || v === undefined ? "—" : fmtNum(v, 3)) },
      { label: "TPR", stroke: "#0b5cad", width: 2, value: (_u, v) => (v === null || v === undefined ? "—" : fmtNum(v, 3)) },
      { label: "chance", stroke: "#8c959f", width: 1, dash: [4, 4] },
    ],
  };
  // uPlot wants one x array: the curve's points, the chance line evaluated on them
  new uPlot(options, [fpr, tpr, fpr.slice()], figure);
  figure.dataset.points = String(fpr.length);
}

async function drawRocCurves() {
  const figures = evaluations.querySelectorAll("figure.roc-chart");
  if (!figures.length) return;
  const modelId = evaluations.dataset.modelId;
  const result = await api("GET", `/v1/models/${encodeURIComponent(modelId)}/evaluations?limit=20`);
  if (!result.ok) return;
  const byId = new Map(result.data.data.map((e) => [e.id, e]));
  for (const figure of figures) {
    const evaluation = byId.get(figure.dataset.evaluationId);
    if (evaluation && evaluation.report && evaluation.report.roc_curve) rocPlot(figure, evaluation.report.roc_curve);
  }
}

if (evaluations) {
  drawRocCurves();
  const evaluateForm = $("evaluate-form");
  const evaluateError = $("evaluate-error");
  evaluateForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    show(evaluateError, "");
    const button = evaluateForm.querySelector('button[type="submit"]');
    button.disabled = true;
    const modelId = evaluations.dataset.modelId;
    const result = await api("POST", `/v1/models/${encodeURIComponent(modelId)}/evaluations`,
      JSON.stringify({ dataset_id: $("evaluate-dataset").value }), { "Content-Type": "application/json" });
    button.disabled = false;
    if (!result.ok) {
      show(evaluateError, errorMessage(result));
      return;
    }
    window.location.reload();  // the page renders the new record (queued ones: reload later)
  });
}
