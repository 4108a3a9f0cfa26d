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
// One binary problem: every quantity its solver reports (linear solvers: primal, dual and
// gap; SMO: −dual, positive since SMO's dual f(a) = ½a'Qa − e'a is negative, and the KKT
// violation m − M). Several binary problems (one-vs-rest classes, one-vs-one pairs): one
// series per problem of the quantity that decides convergence (linear: the relative gap
// (P − D) / P; SMO: the violation), the current problem drawn thick. When the job ends, the
// result's values are the last points plotted.
const LABELS = JSON.parse(root.dataset.labels || "[]");
const SOLVER = root.dataset.solver;
const PALETTE = ["#0b5cad", "#c26a00", "#1a7f37", "#8250df", "#cf222e", "#0a7b83", "#9a6700",
  "#bf3989", "#57606a", "#3a5ccc"];
const points = []; // {x, values: [[column, value], ...]}, in arrival order
let layout = null; // {name, multi, kernel, axis, columns: [{label, stroke, dash}]}
let current = -1; // the binary problem being trained (several problems)
let plot = null;
let drawPending = false;
let finalValues = null;

const positive = (v) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : null);

function gapOf(event) {
  if (typeof event.gap === "number") return event.gap;
  if (typeof event.primal === "number" && typeof event.dual === "number") return event.primal - event.dual;
  return null;
}

/** The two classes of one-vs-one pair k over the sorted classes, in LIBSVM's order. */
function pairClasses(k) {
  let index = 0;
  for (let i = 0; i < LABELS.length; i++) {
    for (let j = i + 1; j < LABELS.length; j++) {
      if (index === k) return [LABELS[i], LABELS[j]];
      index++;
    }
  }
  return null;
}

/** What binary problem k trains: "3 vs 7" (one-vs-one), "3 vs rest" (one-vs-rest). */
function problemName(k, event) {
  if (event && Array.isArray(event.pair) && event.class_index === k) {
    return event.pair[1] === null ? `${fmtNum(event.pair[0])} vs rest` : `${fmtNum(event.pair[0])} vs ${fmtNum(event.pair[1])}`;
  }
  const ovo = layout && layout.ovo;
  if (ovo) {
    const pair = pairClasses(k);
    if (pair) return `${fmtNum(pair[0])} vs ${fmtNum(pair[1])}`;
  } else if (LABELS.length > k) {
    return `${fmtNum(LABELS[k])} vs rest`;
  }
  return `problem ${k + 1}`;
}

function makeLayout(event) {
  const kernel = SOLVER === "smo" || Array.isArray(event.pair);
  const n = typeof event.n_classes === "number" ? event.n_classes : 1;
  if (n <= 1) {
    if (kernel) {
      return {
        name: "binary-kernel", multi: false, kernel, axis: "−dual, violation (log scale)",
        columns: [
          { label: "−dual", stroke: "#c26a00", value: (e) => positive(typeof e.dual === "number" ? -e.dual : null) },
          { label: "violation m − M", stroke: "#8250df", dash: [2, 3], value: (e) => positive(e.violation) },
        ],
      };
    }
    return {
      name: "binary-linear", multi: false, kernel, axis: "objective, gap (log scale)",
      columns: [
        { label: "primal", stroke: "#0b5cad", value: (e) => positive(e.primal) },
        { label: "dual", stroke: "#c26a00", dash: [8, 4], value: (e) => positive(e.dual) },
        { label: "gap", stroke: "#1a7f37", dash: [2, 3], value: (e) => positive(gapOf(e)) },
      ],
    };
  }
  const ovo = kernel && Array.isArray(event.pair) && event.pair[1] !== null;
  let quantity = "violation";
  let value = (e) => positive(e.violation);
  if (!kernel && typeof event.primal === "number" && gapOf(event) !== null) {
    quantity = "relative gap";
    value = (e) => (typeof e.primal === "number" && e.primal > 0 ? positive(gapOf(e) / e.primal) : null);
  } else if (!kernel && typeof event.violation !== "number") {
    quantity = "primal";
    value = (e) => positive(e.primal);
  }
  const made = { name: kernel ? "multi-kernel" : "multi-linear", multi: true, kernel, ovo, quantity, axis: `${quantity} (log scale)`, columns: [] };
  layout = made; // problemName reads layout.ovo
  for (let k = 0; k < n; k++) {
    made.columns.push({ label: problemName(k), stroke: PALETTE[k % PALETTE.length], value });
  }
  return made;
}

function aligned() {
  const xs = [...new Set(points.map((p) => p.x))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const columns = layout.columns.map(() => new Array(xs.length).fill(null));
  for (const p of points) for (const [c, v] of p.values) columns[c][at.get(p.x)] = v;
  return [xs, ...columns];
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

/** Legend value: the point under the cursor, else the latest non-empty point. */
function legendValue(format) {
  return (u, v, seriesIndex, index) => {
    let value = v;
    if (index === null || index === undefined) {
      const data = u.data[seriesIndex];
      value = null;
      for (let i = data.length - 1; i >= 0 && value === null; i--) value = data[i];
    }
    return value === null || value === undefined ? "—" : format(value);
  };
}

function makePlot(data) {
  const series = [{ label: "time", value: legendValue(fmtSeconds) }];
  layout.columns.forEach((column, c) => {
    const focused = !layout.multi || c === current;
    series.push({
      label: column.label, stroke: column.stroke, dash: column.dash,
      width: layout.multi ? (focused ? 3 : 1.25) : 2,
      alpha: layout.multi && !focused ? 0.55 : 1,
      value: legendValue((v) => fmtNum(v, 5)), spanGaps: false,
      points: { show: (_u, _s, i0, i1) => i1 - i0 < 40 },
    });
  });
  const options = {
    width: Math.max(280, chart.clientWidth),
    height: chartHeight(),
    scales: { x: { time: false }, y: { distr: 3 } },
    axes: [
      { label: "seconds since the solver started", stroke: "#393f46", grid: { stroke: "#eaeef2" }, ticks: { stroke: "#d0d7de" } },
      {
        label: narrow() ? "" : layout.axis, labelSize: narrow() ? 0 : 24, stroke: "#393f46", size: 52,
        grid: { stroke: "#e3e8ee" }, ticks: { stroke: "#d0d7de" },
        splits: logSplits, values: (_u, splits) => splits.map(axisLabel),
      },
    ],
    series,
    legend: { show: layout.columns.length <= 12, live: true },
    cursor: { drag: { x: true, y: false } },
  };
  if (plot) plot.destroy();
  // eslint-disable-next-line no-undef
  plot = new uPlot(options, data, chart);
  plot.drawnFocus = current;
}

let observed = false;

function draw() {
  drawPending = false;
  if (!points.length || !layout) return;
  const data = aligned();
  if (!plot || (layout.multi && plot.drawnFocus !== current)) {
    chartEmpty.hidden = true;
    makePlot(data);
    if (!observed) {
      observed = true;
      new ResizeObserver(() => {
        if (plot) plot.setSize({ width: Math.max(280, chart.clientWidth), height: chartHeight() });
      }).observe(chart);
    }
  } else {
    plot.setData(data);
  }
  chart.dataset.points = String(points.length);
  chart.dataset.layout = layout.name;
  chart.dataset.series = String(layout.columns.length);
  chart.dataset.drawn = String(data.slice(1).filter((column) => column.some((v) => v !== null)).length);
  chart.dataset.current = String(current);
  if (finalValues) chart.dataset.final = JSON.stringify(finalValues);
  const xs = data[0];
  const last = xs.length - 1;
  const shown = layout.columns
    .map((column, c) => [column.label, data[c + 1][last]])
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([label, v]) => `${label} ${fmtNum(v, 5)}`);
  chartSummary.textContent = `${points.length} point${points.length === 1 ? "" : "s"} · at ${fmtSeconds(xs[last])}: ${shown.join(", ")}`
    + (finalValues ? " (the job's result)" : "");
}

function scheduleDraw() {
  if (!drawPending) {
    drawPending = true;
    window.requestAnimationFrame(draw);
  }
}

function resetPlot() {
  points.length = 0;
  finalValues = null;
  if (plot) {
    plot.destroy();
    plot = null;
  }
  chart.dataset.points = "0";
}

function showCurrent(event) {
  const n = typeof event.n_classes === "number" ? event.n_classes : 1;
  if (n <= 1) return;
  const k = event.class_index || 0;
  $("chart-current").hidden = false;
  $("chart-current").textContent = `Training binary problem ${k + 1} of ${n}: ${problemName(k, event)}`
    + ` (${layout && layout.ovo ? "one-vs-one" : "one-vs-rest"}; the thick line).`;
  if (layout && event.class_index === k) layout.columns[k].label = problemName(k, event);
  if (k !== current) {
    current = k;
    scheduleDraw();
  }
}

function addPoint(event) {
  const x = event.elapsed_s;
  if (typeof x !== "number") return;
  if (points.length && x <= points[points.length - 1].x) return; // a live point seen again
  if (!layout) {
    layout = makeLayout(event);
    describeChart();
  }
  showCurrent(event);
  const columns = layout.multi ? [event.class_index || 0] : layout.columns.map((_, c) => c);
  const values = columns.map((c) => [c, layout.columns[c].value(event)]);
  points.push({ x, values });
  scheduleDraw();
}

function describeChart() {
  const text = {
    "binary-linear": "Primal and dual objective and the duality gap",
    "binary-kernel": "SMO's −dual (its dual objective f(a) is negative) and the KKT violation m − M (converged below eps)",
    "multi-linear": `The ${layout.quantity} of each binary problem, one line per problem`,
    "multi-kernel": "The KKT violation m − M of each binary problem (converged below eps), one line per problem",
  }[layout.name];
  $("chart-description").textContent = `${text}, against seconds since the solver started, on a log scale; the last point is the job's result.`;
}

/** The result's values as the last points: equal to what the result box shows. */
function addResult(job) {
  const result = job.result;
  if (!result || !layout || !points.length) return;
  const lastX = points[points.length - 1].x;
  const after = (x) => x + Math.max(1e-6, x * 1e-6);
  const endX = typeof result.train_seconds === "number" && result.train_seconds > lastX ? result.train_seconds : after(lastX);
  finalValues = {};
  if (layout.name === "binary-linear") {
    const values = [result.primal_objective, result.dual_objective, result.duality_gap];
    points.push({ x: endX, values: values.map((v, c) => [c, positive(v)]) });
    layout.columns.forEach((column, c) => { finalValues[column.label] = values[c]; });
  } else if (layout.name === "binary-kernel") {
    const value = typeof result.dual_objective === "number" ? -result.dual_objective : null;
    points.push({ x: endX, values: [[0, positive(value)]] });
    finalValues["−dual"] = value;
  } else if (layout.name === "multi-linear" && layout.quantity === "relative gap") {
    // each problem's certified relative gap: the last step of its path
    layout.columns.forEach((column, k) => {
      const steps = (result.path || []).filter((step) => step.output === k);
      const own = points.filter((p) => p.values[0][0] === k);
      if (!steps.length || !own.length) return;
      const value = steps[steps.length - 1].relative_gap;
      const x = after(own[own.length - 1].x);
      points.push({ x, values: [[k, positive(value)]] });
      finalValues[column.label] = value;
    });
  }
  if (!Object.keys(finalValues).length) finalValues = null;
  if (layout.multi) {
    $("chart-current").hidden = false;
    $("chart-current").textContent = `${layout.columns.length} binary problems (${layout.ovo ? "one-vs-one" : "one-vs-rest"}), `
      + "one line each; the thick line is the last one trained.";
  }
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
  if (job.status === "succeeded" && typeof job.progress_fraction !== "number") {
    progressBar.value = 0;
    progressLabel.textContent = "—";
  }
  showFinalFigures(job);
  addResult(job);
  showUnconverged(job);
  $("job-attempt").textContent = String(job.attempt);
  $("job-worker").textContent = job.worker || "—";
  if (!points.length) {
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
    if (points.length) resetPlot(); // a new attempt starts over
    if (event.attempt) $("job-attempt").textContent = String(event.attempt);
    if (event.worker) $("job-worker").textContent = event.worker;
  }
  if (event.status !== status) {
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
