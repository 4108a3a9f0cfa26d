// Job detail: live status, progress and convergence plot from the SSE stream
// GET /v1/jobs/{id}/events, the result when the job ends, and the cancel button.
import { $, api, el, errorMessage, fmtInt, fmtNum, fmtSeconds, setStatusBadge, show, statusBadge, timeElement } from "./common.js";
import { addPoint, addResult, pointCount, problemName, resetPlot } from "./job-plot.js";

// The status lists come from the server (app/domain/job_status.py), on the <body> element.
const TERMINAL = new Set(document.body.dataset.terminalStatuses.split(" "));
const root = document.getElementById("job");
const jobId = root.dataset.jobId;

const chartEmpty = $("chart-empty");
const progressBar = $("job-progress");
const progressLabel = $("job-progress-label");
const progressDetail = $("job-progress-detail");
const cancelButton = $("cancel-job");
const actionMessage = $("job-action-message");
const history = $("job-history");

let status = root.dataset.status;
let source = null;

// ---- status, progress, result --------------------------------------------------------
function setProgress(fraction) {
  if (typeof fraction === "number") {
    progressBar.value = fraction;
    progressLabel.textContent = `${Math.round(fraction * 100)}%`;
  }
}

function onProgress(event) {
  addPoint(event);
  if (event.phase === "calibration") {
    // the job's one fraction (the fit's share, then the calibration's fits), and how far
    // the calibration itself is
    const total = typeof event.n_classes === "number" ? event.n_classes : 0;
    const done = typeof event.class_index === "number" ? event.class_index : 0;
    setProgress(event.fraction);
    if (total && typeof event.fraction === "number") {
      progressLabel.textContent = `${Math.round(event.fraction * 100)}% · calibration `
        + `${Math.round((100 * done) / total)}%`;
    }
    progressDetail.textContent = `probability calibration: fit ${fmtInt(done + 1)} of ${fmtInt(total)}`
      + ` (5-fold cross-validation) · ${fmtSeconds(event.elapsed_s)}`;
    return;
  }
  setProgress(event.fraction);
  const parts = [];
  if (typeof event.iteration === "number") parts.push(`iteration ${fmtInt(event.iteration)}`);
  if (typeof event.elapsed_s === "number") parts.push(fmtSeconds(event.elapsed_s));
  if (typeof event.gap === "number") parts.push(`gap ${fmtNum(event.gap, 3)}`);
  if (typeof event.violation === "number") parts.push(`violation ${fmtNum(event.violation, 3)}`);
  if (typeof event.active_size === "number") parts.push(`active ${fmtInt(event.active_size)}`);
  if (typeof event.n_classes === "number" && event.n_classes > 1) {
    const k = event.class_index || 0;
    parts.push(`problem ${k + 1} of ${event.n_classes} (${problemName(k, event)})`);
  }
  progressDetail.textContent = parts.join(" · ");
}

/** The status box once the job has ended: the result's figures, not the last event's. */
function showFinalFigures(job) {
  const result = job.result;
  if (!result) return;
  const parts = [`finished: ${fmtInt(result.iterations)} iterations`, fmtSeconds(result.train_seconds)];
  if (typeof result.duality_gap === "number") parts.push(`gap ${fmtNum(result.duality_gap, 3)}`);
  if (typeof result.relative_gap === "number") parts.push(`relative gap ${fmtNum(result.relative_gap, 3)}`);
  if (typeof result.dual_objective === "number" && typeof result.primal_objective !== "number") {
    parts.push(`dual ${fmtNum(result.dual_objective, 6)}`);
  }
  progressDetail.textContent = parts.join(" · ");
}

/** A model that did not converge: a warning with the reason, not a green success. */
function showUnconverged(job) {
  const result = job.result;
  const box = $("job-unconverged");
  const unconverged = job.status === "succeeded" && result && result.converged === false;
  if (!unconverged) {
    box.hidden = true;
    return;
  }
  const badge = $("job-status");
  badge.className = "status status-unconverged";
  badge.textContent = `stopped: ${result.exit_reason || "not converged"}`;
  badge.dataset.converged = "false";
  progressBar.classList.add("unconverged");
  const reasons = (result.warnings || []).length ? result.warnings : [`the solver stopped at ${result.exit_reason}`];
  box.replaceChildren(
    el("span", { class: "badge badge-warning", "data-field": "unconverged" }, `⚠ Not converged (${result.exit_reason})`),
    " ",
    ...reasons.map((reason) => el("span", { class: "note" }, reason)),
  );
  box.hidden = false;
  // the history's last entry says the same (not a green "succeeded")
  const last = history.lastElementChild;
  const lastBadge = last && last.dataset.key.startsWith("succeeded@") ? last.querySelector(".status") : null;
  if (lastBadge) {
    lastBadge.className = "status status-unconverged";
    lastBadge.textContent = `stopped: ${result.exit_reason || "not converged"}`;
  }
  if (typeof job.progress_fraction === "number") {
    progressLabel.textContent = `${Math.round(job.progress_fraction * 100)}% · stopped`;
  } else {
    progressLabel.textContent = "stopped";
  }
}

// ---- a queued job: what it waits for -----------------------------------------------
let waitTimer = null;

async function showWaiting() {
  waitTimer = null;
  if (status !== "queued") {
    $("job-waiting").hidden = true;
    return;
  }
  const result = await api("GET", `/v1/jobs/${encodeURIComponent(jobId)}`);
  if (result.ok && result.data.status === "queued" && result.data.waiting_for) {
    show($("job-waiting"), `Waiting for ${result.data.waiting_for}.`);
  } else if (result.ok && result.data.status !== "queued") {
    $("job-waiting").hidden = true;
    return;
  }
  waitTimer = window.setTimeout(showWaiting, 2000);
}

function addHistory(event) {
  const key = `${event.status}@${event.at}`;
  for (const item of history.children) if (item.dataset.key === key) return;
  const badge = statusBadge(event.status);
  const current = $("job-status");
  if (event.status === "succeeded" && current.dataset.converged === "false") {
    // an unconverged success reads as the status badge does: "stopped: max_iter"
    badge.className = current.className;
    badge.textContent = current.textContent;
  }
  const item = el("li", { "data-key": key }, badge, " ", timeElement(event.at));
  if (event.attempt) item.append(" ", el("span", { class: "note" }, `attempt ${event.attempt}`));
  if (event.error) item.append(" ", el("span", { class: "note" }, event.error));
  history.append(item);
}

/** The solver path with repeats counted, as the server's `path` filter writes it. */
function pathText(path) {
  const outputs = new Map();
  for (const step of path) {
    if (!outputs.has(step.output)) outputs.set(step.output, []);
    outputs.get(step.output).push(`${step.solver} (${step.exit})`);
  }
  const ways = new Set([...outputs.values()].map((steps) => steps.join(" → ")));
  if (outputs.size > 1 && ways.size === 1) return `${[...ways][0]}, each of the ${outputs.size} outputs`;
  const runs = [];
  for (const step of path) {
    const text = `${step.solver} (${step.exit})`;
    if (runs.length && runs[runs.length - 1][0] === text) runs[runs.length - 1][1] += 1;
    else runs.push([text, 1]);
  }
  return runs.map(([text, count]) => (count === 1 ? text : `${text} × ${count}`)).join(" → ");
}

function resultItem(term, value) {
  return el("div", {}, el("dt", {}, term), el("dd", {}, value));
}

function convergedCell(result) {
  // a warning badge with the reason for every output that is not certified
  const cell = el("span", {}, fmtNum(result.converged));
  (result.warnings || []).forEach((warning) => cell.append(" ", el("span", { class: "badge badge-warning", role: "status", "data-field": "warning" }, `⚠ ${warning}`)));
  return cell;
}

function renderResult(result) {
  const list = $("job-result");
  if (!result) {
    list.replaceChildren();
    return;
  }
  const accuracy = typeof result.train_accuracy === "number" ? `${(result.train_accuracy * 100).toFixed(2)}%` : "—";
  list.replaceChildren(
    resultItem("Exit reason", result.exit_reason || "—"),
    resultItem("Converged", convergedCell(result)),
    ...(typeof result.relative_gap === "number" ? [resultItem("Relative gap", fmtNum(result.relative_gap))] : []),
    ...(result.path && result.path.length ? [resultItem("Path", pathText(result.path))] : []),
    ...(result.auto ? [resultItem("Auto", `${result.auto.chosen}: ${result.auto.reason}`)] : []),
    ...(result.nonzero_weights ? [resultItem("Non-zero weights", result.nonzero_weights.join(" / "))] : []),
    resultItem("Iterations", fmtInt(result.iterations)),
    resultItem("Train time", fmtSeconds(result.train_seconds)),
    resultItem("Primal objective", fmtNum(result.primal_objective)),
    resultItem("Dual objective", fmtNum(result.dual_objective)),
    resultItem("Duality gap", fmtNum(result.duality_gap)),
    resultItem("Train accuracy", accuracy),
  );
  $("result-empty").hidden = true;
}

async function finish() {
  if (source) source.close();
  cancelButton.hidden = true;
  const result = await api("GET", `/v1/jobs/${encodeURIComponent(jobId)}`);
  if (!result.ok) return;
  const job = result.data;
  renderResult(job.result);
  if (!job.result) $("result-empty").textContent = "No result.";
  if (job.model_id) {
    const link = $("model-link");
    link.href = `/models/${encodeURIComponent(job.model_id)}`;
    link.hidden = false;
  }
  show($("job-error"), job.error || "");
  setProgress(job.progress_fraction);
  if (job.status === "succeeded" && typeof job.progress_fraction !== "number") {
    progressBar.value = 0;
    progressLabel.textContent = "—";
  }
  showFinalFigures(job);
  addResult(job);
  showUnconverged(job);
  $("job-attempt").textContent = String(job.attempt);
  $("job-worker").textContent = job.worker || "—";
  if (!pointCount()) {
    const started = job.status_history.some((entry) => entry.status === "running");
    if (job.status === "succeeded") {
      chartEmpty.textContent = "The job finished before its first progress report (reports come every 0.2 s), so there is nothing to plot.";
    } else {
      const what = job.status === "failed" ? "The job failed" : `The job was ${job.status}`;
      chartEmpty.textContent = started ? `${what} before its first progress report.` : `${what} before it started.`;
    }
  }
}

function onStatus(event) {
  addHistory(event);
  if (event.status === "running") {
    if (pointCount()) resetPlot(); // a new attempt starts over
    if (event.attempt) $("job-attempt").textContent = String(event.attempt);
    if (event.worker) $("job-worker").textContent = event.worker;
  }
  // a page opened on a finished job hears the stream replay its history: the badge (which
  // may say "stopped: max_iter", rendered by the server) stays as it is
  if (event.status !== status && !TERMINAL.has(status)) {
    status = event.status;
    root.dataset.status = status;
    setStatusBadge($("job-status"), status);
    $("job-status-note").textContent = "";
    if (status !== "queued") $("job-waiting").hidden = true;
  }
  if (TERMINAL.has(event.status)) {
    if (!progressBar.hasAttribute("value")) progressBar.value = 0; // no longer indeterminate
    finish();
  }
}

function connect() {
  source = new EventSource(`/v1/jobs/${encodeURIComponent(jobId)}/events`);
  source.addEventListener("progress", (message) => onProgress(JSON.parse(message.data)));
  source.addEventListener("status", (message) => onStatus(JSON.parse(message.data)));
  source.addEventListener("open", () => {
    if (actionMessage.dataset.kind === "connection") {
      actionMessage.textContent = "";
      delete actionMessage.dataset.kind;
    }
  });
  source.onerror = () => {
    if (TERMINAL.has(status)) {
      source.close();
      return;
    }
    // EventSource reconnects by itself and resumes after the last event id.
    actionMessage.dataset.kind = "connection";
    actionMessage.textContent = source.readyState === EventSource.CLOSED
      ? "The live stream closed; reload the page to see the latest state."
      : "Connection lost; reconnecting…";
  };
}

cancelButton.addEventListener("click", async () => {
  cancelButton.disabled = true;
  const label = cancelButton.textContent;
  cancelButton.textContent = "Cancelling…";
  const result = await api("POST", `/v1/jobs/${encodeURIComponent(jobId)}/cancel`);
  if (result.ok) {
    if (!TERMINAL.has(result.data.status)) {
      $("job-status-note").textContent = "cancel requested";
      actionMessage.textContent = "Cancel requested: the job stops at its next progress check.";
    }
  } else {
    cancelButton.disabled = false;
    cancelButton.textContent = label;
    actionMessage.textContent = errorMessage(result);
  }
});

connect();
if (status === "queued") waitTimer = window.setTimeout(showWaiting, 500);
