// Job detail: live status, progress and convergence plot from the SSE stream
// GET /v1/jobs/{id}/events, the result when the job ends, and the cancel button.
import { api, el, errorMessage, fmtInt, fmtNum, fmtSeconds, setStatusBadge, show, statusBadge, timeElement } from "./common.js";

// The status lists come from the server (app/job_status.py), on the <body> element.
const TERMINAL = new Set(document.body.dataset.terminalStatuses.split(" "));
const root = document.getElementById("job");
const jobId = root.dataset.jobId;
const $ = (id) => document.getElementById(id);

const chart = $("chart");
const chartEmpty = $("chart-empty");
const chartSummary = $("chart-summary");
const progressBar = $("job-progress");
const progressLabel = $("job-progress-label");
const progressDetail = $("job-progress-detail");
const cancelButton = $("cancel-job");
const actionMessage = $("job-action-message");
const history = $("job-history");

let status = root.dataset.status;
let source = null;

// ---- convergence plot (uPlot, vendored) ----------------------------------------------
const xs = [];
const primal = [];
const dual = [];
const gap = [];
let plot = null;
let drawPending = false;

const positive = (v) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : null);
const SERIES = [xs, primal, dual, gap];

/** Legend value: the point under the cursor, else the latest point. */
function legendValue(format) {
  return (_u, v, seriesIndex, index) => {
    let value = v;
    if (index === null || index === undefined) {
      const data = SERIES[seriesIndex];
      value = data.length ? data[data.length - 1] : null;
    }
    return value === null || value === undefined ? "—" : format(value);
  };
}

/** Tick label of the log axis: 1e6, 1000, 0.5, 1e-4. */
function axisLabel(v) {
  if (v === null || v === undefined) return "";
  const abs = Math.abs(v);
  if (abs !== 0 && (abs >= 1e4 || abs < 1e-2)) {
    const [mantissa, exponent] = v.toExponential().split("e");
    return `${Number(Number(mantissa).toPrecision(2))}e${Number(exponent)}`;
  }
  return String(Number(v.toPrecision(3)));
}

/** Log-axis ticks: powers of ten (thinned on a tall range), 1-2-5 on a short one. */
function logSplits(_u, _axis, min, max) {
  if (!(min > 0 && max > min)) return [];
  const lo = Math.floor(Math.log10(min));
  const hi = Math.ceil(Math.log10(max));
  const out = [];
  if (hi - lo >= 2) {
    const step = Math.max(1, Math.ceil((hi - lo) / 6));
    for (let k = lo; k <= hi; k += step) out.push(10 ** k);
  } else {
    for (let k = lo; k <= hi; k++) for (const m of [1, 2, 5]) out.push(m * 10 ** k);
  }
  return out.filter((v) => v >= min * (1 - 1e-9) && v <= max * (1 + 1e-9));
}

function narrow() {
  return window.matchMedia("(max-width: 720px)").matches;
}

function chartHeight() {
  return narrow() ? 260 : 320;
}

function makePlot() {
  const options = {
    width: Math.max(280, chart.clientWidth),
    height: chartHeight(),
    scales: { x: { time: false }, y: { distr: 3 } },
    axes: [
      { label: "seconds since the solver started", stroke: "#393f46", grid: { stroke: "#eaeef2" }, ticks: { stroke: "#d0d7de" } },
      {
        label: narrow() ? "" : "objective, gap (log scale)", labelSize: narrow() ? 0 : 24, stroke: "#393f46", size: 52,
        grid: { stroke: "#e3e8ee" }, ticks: { stroke: "#d0d7de" },
        splits: logSplits, values: (_u, splits) => splits.map(axisLabel),
      },
    ],
    series: [
      { label: "time", value: legendValue(fmtSeconds) },
      { label: "primal", stroke: "#0b5cad", width: 2, value: legendValue((v) => fmtNum(v, 5)), spanGaps: true },
      { label: "dual", stroke: "#c26a00", width: 2, dash: [8, 4], value: legendValue((v) => fmtNum(v, 5)), spanGaps: true },
      { label: "gap", stroke: "#1a7f37", width: 2, dash: [2, 3], value: legendValue((v) => fmtNum(v, 3)), spanGaps: true },
    ],
    legend: { live: true },
    cursor: { drag: { x: true, y: false } },
  };
  // eslint-disable-next-line no-undef
  plot = new uPlot(options, [xs, primal, dual, gap], chart);
  new ResizeObserver(() => {
    if (plot) plot.setSize({ width: Math.max(280, chart.clientWidth), height: chartHeight() });
  }).observe(chart);
}

function draw() {
  drawPending = false;
  if (!xs.length) return;
  if (!plot) {
    chartEmpty.hidden = true;
    makePlot();
  } else {
    plot.setData([xs, primal, dual, gap]);
  }
  chart.dataset.points = String(xs.length);
  const last = xs.length - 1;
  chartSummary.textContent = `${xs.length} point${xs.length === 1 ? "" : "s"} · at ${fmtSeconds(xs[last])}: `
    + `primal ${fmtNum(primal[last], 5)}, dual ${fmtNum(dual[last], 5)}, gap ${fmtNum(gap[last], 3)}`;
}

function scheduleDraw() {
  if (!drawPending) {
    drawPending = true;
    window.requestAnimationFrame(draw);
  }
}

function resetPlot() {
  for (const series of [xs, primal, dual, gap]) series.length = 0;
  if (plot) plot.setData([xs, primal, dual, gap]);
  chart.dataset.points = "0";
}

function addPoint(event) {
  const x = event.elapsed_s;
  if (typeof x !== "number") return;
  if (xs.length && x <= xs[xs.length - 1]) return; // a live point seen again from the history
  let g = event.gap;
  if (typeof g !== "number" && typeof event.primal === "number" && typeof event.dual === "number") {
    g = event.primal - event.dual;
  }
  xs.push(x);
  primal.push(positive(event.primal));
  dual.push(positive(event.dual));
  gap.push(positive(g));
  scheduleDraw();
}

// ---- status, progress, result --------------------------------------------------------
function setProgress(fraction) {
  if (typeof fraction === "number") {
    progressBar.value = fraction;
    progressLabel.textContent = `${Math.round(fraction * 100)}%`;
  }
}

function onProgress(event) {
  addPoint(event);
  setProgress(event.fraction);
  const parts = [];
  if (typeof event.iteration === "number") parts.push(`iteration ${fmtInt(event.iteration)}`);
  if (typeof event.elapsed_s === "number") parts.push(fmtSeconds(event.elapsed_s));
  if (typeof event.gap === "number") parts.push(`gap ${fmtNum(event.gap, 3)}`);
  if (typeof event.violation === "number") parts.push(`violation ${fmtNum(event.violation, 3)}`);
  if (typeof event.active_size === "number") parts.push(`active ${fmtInt(event.active_size)}`);
  if (typeof event.n_classes === "number" && event.n_classes > 1) {
    parts.push(`class ${(event.class_index || 0) + 1} of ${event.n_classes}`);
  }
  progressDetail.textContent = parts.join(" · ");
}

function addHistory(event) {
  const key = `${event.status}@${event.at}`;
  for (const item of history.children) if (item.dataset.key === key) return;
  const item = el("li", { "data-key": key }, statusBadge(event.status), " ", timeElement(event.at));
  if (event.attempt) item.append(" ", el("span", { class: "note" }, `attempt ${event.attempt}`));
  if (event.error) item.append(" ", el("span", { class: "note" }, event.error));
  history.append(item);
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
    ...(result.path && result.path.length ? [resultItem("Path", result.path.map((step) => `${step.solver} (${step.exit})`).join(" → "))] : []),
    ...(result.auto ? [resultItem("Auto", `${result.auto.chosen}: ${result.auto.reason}`)] : []),
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
  $("job-attempt").textContent = String(job.attempt);
  $("job-worker").textContent = job.worker || "—";
  if (!xs.length) {
    const started = job.status_history.some((entry) => entry.status === "running");
    if (job.status === "succeeded") {
      chartEmpty.textContent = "The job finished before its first progress report (reports come every 0.2 s), so there is nothing to plot.";
    } else if (!started) {
      chartEmpty.textContent = `The job was ${job.status} before it started.`;
    } else {
      chartEmpty.textContent = `The job was ${job.status} before its first progress report.`;
    }
  }
}

function onStatus(event) {
  addHistory(event);
  if (event.status === "running") {
    if (xs.length) resetPlot(); // a new attempt starts over
    if (event.attempt) $("job-attempt").textContent = String(event.attempt);
    if (event.worker) $("job-worker").textContent = event.worker;
  }
  if (event.status !== status) {
    status = event.status;
    root.dataset.status = status;
    setStatusBadge($("job-status"), status);
    $("job-status-note").textContent = "";
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
