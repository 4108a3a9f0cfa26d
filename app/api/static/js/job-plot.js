// The job page's convergence plot (uPlot, vendored), fed by the job's progress events and
// ended by its result; job.js owns the rest of the page.
import { $, el, fmtInt, fmtNum, fmtSeconds } from "./common.js";

const root = $("job");
const chart = $("chart");
const chartEmpty = $("chart-empty");
const chartSummary = $("chart-summary");

// One binary problem: every quantity its solver reports (linear solvers: primal, dual and
// gap; SMO: −dual, positive since SMO's dual f(a) = ½a'Qa − e'a is negative, and the KKT
// violation m − M). Several binary problems (one-vs-rest classes, one-vs-one pairs): the
// quantity that decides convergence (linear: the relative gap (P − D) / P; SMO: the
// violation), as one line per problem up to LINES_UP_TO problems (the current one thick),
// and beyond that as an envelope: a band from the smallest to the largest of the problems'
// latest values, their median, and the few problems that ended last drawn as lines. When
// the job ends, the result's values are the last points: every problem's final value where
// it ended (a dot), so a fit shorter than the progress interval still shows its end.
//
// Phases: the fit, then (probability: true) the calibration's cross-validation, whose
// events carry `phase: "calibration"` and count its fits (class_index of n_classes); they
// have no convergence quantity, so the calibration is a shaded span after the fit.
const LABELS = JSON.parse(root.dataset.labels || "[]");
const SOLVER = root.dataset.solver;
// the stop rule's threshold on the plotted quantity: SMO's violation below eps, a linear
// output's relative gap below tol (drawn as a dashed line)
const EPS = Number(root.dataset.eps) || null;
const TOL = Number(root.dataset.tol) || null;
const LINES_UP_TO = 12;
const SLOWEST = 3; // problems drawn as lines in the envelope view
const PALETTE = ["#0b5cad", "#c26a00", "#1a7f37", "#8250df", "#cf222e", "#0a7b83", "#9a6700",
  "#bf3989", "#57606a", "#3a5ccc"];
const points = []; // {x, values: [[column, value], ...], final}, in x order
let layout = null; // {name, multi, envelope, kernel, ovo, axis, columns: [{label, stroke, dash, value}]}
let current = -1; // the binary problem being trained (several problems)
let plot = null;
let drawnShape = "";
let drawPending = false;
let finalValues = null;
let finished = false;
// the calibration phase: where it started on the fit's clock, its latest point, its fits
let calibration = null; // {start, end, done, total}
let iterations = null; // each problem's iterations, from the result (several problems)
let fitEnd = null; // seconds: where the fit ended (the result's train time, or the last fit point)

const positive = (v) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : null);
const after = (x) => x + Math.max(1e-6, Math.abs(x) * 1e-6);

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
export function problemName(k, event) {
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

function makeLayout(event, kernelResult = false) {
  const kernel = SOLVER === "smo" || Array.isArray(event.pair) || kernelResult;
  const n = typeof event.n_classes === "number" ? event.n_classes : 1;
  if (n <= 1) {
    if (kernel) {
      return {
        name: "binary-kernel", multi: false, envelope: false, kernel, axis: "−dual, violation (log scale)",
        columns: [
          { label: "−dual", stroke: "#c26a00", value: (e) => positive(typeof e.dual === "number" ? -e.dual : null) },
          { label: "violation m − M", stroke: "#8250df", dash: [2, 3], value: (e) => positive(e.violation) },
        ],
      };
    }
    return {
      name: "binary-linear", multi: false, envelope: false, kernel, axis: "objective, gap (log scale)",
      columns: [
        { label: "primal", stroke: "#0b5cad", value: (e) => positive(e.primal) },
        { label: "dual", stroke: "#c26a00", dash: [8, 4], value: (e) => positive(e.dual) },
        { label: "gap", stroke: "#1a7f37", dash: [2, 3], value: (e) => positive(gapOf(e)) },
      ],
    };
  }
  const ovo = kernel && (Array.isArray(event.pair) ? event.pair[1] !== null : n === LABELS.length * (LABELS.length - 1) / 2);
  let quantity = "violation";
  let value = (e) => positive(e.violation);
  if (!kernel) {
    // every linear output ends certified by its relative gap (the result's path); events
    // of a solver that reports no dual bound (tron, between certificates) plot nothing
    quantity = "relative gap";
    value = (e) => (typeof e.primal === "number" && e.primal > 0 && gapOf(e) !== null ? positive(gapOf(e) / e.primal) : null);
  }
  const made = {
    name: kernel ? "multi-kernel" : "multi-linear", multi: true, envelope: n > LINES_UP_TO, kernel, ovo, quantity,
    axis: `${quantity} (log scale)`, columns: [],
  };
  layout = made; // problemName reads layout.ovo
  for (let k = 0; k < n; k++) {
    made.columns.push({ label: problemName(k), stroke: PALETTE[k % PALETTE.length], value });
  }
  return made;
}

// ---- the data uPlot draws -------------------------------------------------------------

/** Lines view: x, then one column per series. */
function alignedLines() {
  const xs = [...new Set(points.map((p) => p.x))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const columns = layout.columns.map(() => new Array(xs.length).fill(null));
  for (const p of points) for (const [c, v] of p.values) columns[c][at.get(p.x)] = v;
  return { data: [xs, ...columns], series: layout.columns };
}

/** Each problem's points in x order: [[x, value, final], ...]. */
function perProblem() {
  const own = layout.columns.map(() => []);
  for (const p of points) {
    const [c, v] = p.values[0];
    if (v !== null && c < own.length) own[c].push([p.x, v, Boolean(p.final)]);
  }
  return own;
}

/** The slowest problems: the most iterations (from the result), else the longest span of
 *  points (while the job runs). */
function slowest(own) {
  const effort = (list, c) => (iterations && typeof iterations[c] === "number" ? iterations[c]
    : (list.length ? list[list.length - 1][0] - list[0][0] : -Infinity));
  return own.map((list, c) => [c, list.length ? effort(list, c) : -Infinity])
    .filter(([, e]) => e > -Infinity)
    .sort((a, b) => b[1] - a[1]).slice(0, SLOWEST).map(([c]) => c);
}

/** Envelope view: min, median, max of the problems' latest values at each time, the slowest
 *  problems as lines, and a dot where each problem ended. */
function alignedEnvelope() {
  const xs = [...new Set(points.map((p) => p.x))].sort((a, b) => a - b);
  const own = perProblem();
  const low = [];
  const mid = [];
  const high = [];
  const next = own.map(() => 0);
  const latest = own.map(() => null);
  for (const x of xs) {
    own.forEach((list, c) => {
      while (next[c] < list.length && list[next[c]][0] <= x) latest[c] = list[next[c]++][1];
    });
    const seen = latest.filter((v) => v !== null).sort((a, b) => a - b);
    if (!seen.length) {
      low.push(null); mid.push(null); high.push(null);
      continue;
    }
    low.push(seen[0]);
    high.push(seen[seen.length - 1]);
    const m = seen.length >> 1;
    mid.push(seen.length % 2 ? seen[m] : Math.sqrt(seen[m - 1] * seen[m])); // log-scale median
  }
  const at = new Map(xs.map((x, i) => [x, i]));
  const slow = slowest(own);
  const slowColumns = slow.map((c) => {
    const column = new Array(xs.length).fill(null);
    for (const [x, v] of own[c]) column[at.get(x)] = v;
    return column;
  });
  const ends = new Array(xs.length).fill(null);
  for (const list of own) for (const [x, v, final] of list) if (final) ends[at.get(x)] = v;
  const quantity = layout.quantity;
  const series = [
    { label: `smallest ${quantity}`, stroke: "#6e7781", width: 1, band: true },
    { label: `median ${quantity}`, stroke: "#0b5cad", width: 2.5 },
    { label: `largest ${quantity}`, stroke: "#6e7781", width: 1, band: true },
    ...slow.map((c, i) => ({ label: `slowest: ${layout.columns[c].label}`, stroke: PALETTE[(i + 3) % PALETTE.length], width: 1.25, dash: [5, 3], slow: true })),
    { label: "end of a problem", stroke: "#1a7f37", ends: true },
  ];
  return { data: [xs, low, mid, high, ...slowColumns, ends], series, slow };
}

function aligned() {
  return layout.envelope ? alignedEnvelope() : alignedLines();
}

// ---- axes, legend, phases ---------------------------------------------------------------

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
  if (Math.log10(max / min) >= 2) {
    const step = Math.max(1, Math.ceil((hi - lo) / 6));
    for (let k = lo; k <= hi; k += step) out.push(10 ** k);
  } else {
    const steps = Math.log10(max / min) < 1 ? [1, 1.5, 2, 3, 4, 5, 7] : [1, 2, 5];
    for (let k = lo; k <= hi; k++) for (const m of steps) out.push(m * 10 ** k);
  }
  return out.filter((v) => v >= min * (1 - 1e-9) && v <= max * (1 + 1e-9));
}

/** The threshold line of this plot: [value, label] or null. */
function threshold() {
  if (!layout) return null;
  if (layout.kernel && EPS) return [EPS, `eps ${fmtNum(EPS)}: converged below`];
  if (layout.name === "multi-linear" && TOL) return [TOL, `tol ${fmtNum(TOL)}: certified below`];
  return null;
}

function drawThreshold(u) {
  const line = threshold();
  if (!line) return;
  const y = u.valToPos(line[0], "y", true);
  const { left, top, width, height } = u.bbox;
  if (!(y >= top && y <= top + height)) return;
  const ctx = u.ctx;
  ctx.save();
  ctx.strokeStyle = "#cf222e";
  ctx.lineWidth = 1.5 * devicePixelRatio;
  ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
  ctx.beginPath();
  ctx.moveTo(left, y);
  ctx.lineTo(left + width, y);
  ctx.stroke();
  ctx.setLineDash([]);
  ctx.fillStyle = "#cf222e";
  ctx.font = `${Math.round(11 * devicePixelRatio)}px system-ui, sans-serif`;
  ctx.textAlign = "right";
  ctx.textBaseline = "bottom";
  ctx.fillText(line[1], left + width - 4, y - 2);
  ctx.restore();
}

/** y range on the log scale: a decade around a single value, else the data padded; it
 *  includes the threshold line when that is within a few decades of the data. */
function logRange(u, dataMin, dataMax) {
  let min = dataMin;
  let max = dataMax;
  const line = threshold();
  if (line && min > 0 && max > 0 && line[0] > min / 1e4 && line[0] < max * 1e4) {
    min = Math.min(min, line[0]);
    max = Math.max(max, line[0]);
  }
  return paddedRange(u, min, max);
}

function paddedRange(_u, min, max) {
  if (!(min > 0) || !(max > 0)) return [1e-3, 1];
  if (max <= min * (1 + 1e-9)) return [min / 3.2, max * 3.2];
  return [min / 1.25, max * 1.25];
}

/** x range: from 0 (the solver's start) to the fit's last point; the calibration after it
 *  is drawn as its own phase under the plot (it has no convergence figures). */
function xRange(_u, _min, max) {
  const hi = Number.isFinite(max) && max > 0 ? max : 1e-3;
  return [0, hi * 1.03];
}

/** x tick: "15 ms" on a fit shorter than 0.1 s (never "0.001, 0.001"), else seconds. */
function timeTick(v, max) {
  if (v === null || v === undefined) return "";
  if (max < 0.1) return `${Number((v * 1000).toPrecision(3))} ms`;
  return String(Number(v.toPrecision(4)));
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

function countValues(column, i0, i1) {
  let count = 0;
  for (let i = i0; i <= i1 && count < 40; i++) if (column[i] !== null && column[i] !== undefined) count++;
  return count;
}

function makePlot(shaped) {
  const series = [{ label: "time", value: legendValue(fmtSeconds) }];
  const { data } = shaped;
  shaped.series.forEach((column, c) => {
    const focused = !layout.multi || layout.envelope || c === current;
    const entry = {
      label: column.label, stroke: column.stroke, dash: column.dash,
      width: column.width || (layout.multi ? (focused ? 3 : 1.25) : 2),
      alpha: layout.multi && !focused ? 0.55 : 1,
      // several problems: a problem's points are joined across the other problems' times
      // (pairs trained at once interleave), and marked while they are few (a pair solved
      // between two progress events has one point: its end, from the result)
      value: legendValue((v) => fmtNum(v, 5)), spanGaps: layout.multi,
      points: { show: (u, s, i0, i1) => countValues(u.data[s], i0, i1) < 40, size: layout.multi ? 7 : 6, fill: column.stroke },
    };
    if (column.ends) { // dots only
      entry.paths = () => null;
      entry.points = { show: true, size: 5, fill: "#1a7f37", stroke: "#1a7f37" };
      entry.spanGaps = false;
    }
    if (column.band) entry.points = { show: false };
    series.push(entry);
  });
  const options = {
    width: Math.max(280, chart.clientWidth),
    height: chartHeight(),
    scales: { x: { time: false, range: xRange }, y: { distr: 3, range: logRange } },
    axes: [
      {
        label: "seconds since the solver started", stroke: "#393f46", grid: { stroke: "#eaeef2" }, ticks: { stroke: "#d0d7de" },
        values: (u, splits) => splits.map((v) => timeTick(v, u.scales.x.max)),
      },
      {
        label: narrow() ? "" : layout.axis, labelSize: narrow() ? 0 : 24, stroke: "#393f46", size: 52,
        grid: { stroke: "#e3e8ee" }, ticks: { stroke: "#d0d7de" },
        splits: logSplits, values: (_u, splits) => splits.map(axisLabel),
      },
    ],
    series,
    legend: { show: shaped.series.length <= LINES_UP_TO, live: true },
    cursor: { drag: { x: true, y: false } },
    hooks: { draw: [drawThreshold] },
  };
  if (layout.envelope) options.bands = [{ series: [3, 1], fill: "rgba(11, 92, 173, 0.12)" }];
  if (plot) plot.destroy();
  // eslint-disable-next-line no-undef
  plot = new uPlot(options, data, chart);
}

let observed = false;

/** The job's phases as a time line under the plot: the fit (what the plot shows), then the
 *  probability calibration's cross-validation fits, each as wide as the time it took. */
function renderPhases() {
  const strip = $("chart-phases");
  if (!strip) return;
  strip.hidden = !calibration;
  if (!calibration) return;
  const fit = fitEnd !== null ? fitEnd : calibration.start;
  const spent = Math.max(0, calibration.end - calibration.start);
  const fits = finished && calibration.completed
    ? `${fmtInt(calibration.total)} fits`
    : `fit ${fmtInt(Math.min(calibration.done + 1, calibration.total))} of ${fmtInt(calibration.total)}`;
  const segment = (name, seconds, title, detail) => {
    const node = el("div", { class: `phase phase-${name}`, "data-phase": name },
      el("strong", {}, title), " ", el("span", {}, detail));
    node.style.flexGrow = String(Math.max(seconds, 1e-6));
    return node;
  };
  strip.replaceChildren(
    el("span", { class: "phases-label" }, "Phases"),
    el("div", { class: "phase-bar" },
      segment("fit", fit, "fit", `${fmtSeconds(fit)} · the plot above`),
      segment("calibration", spent, "probability calibration",
        `${fmtSeconds(spent)} · ${fits} of the 5-fold cross-validation (no convergence figures)`)),
  );
}

function draw() {
  drawPending = false;
  renderPhases();
  chart.dataset.phases = JSON.stringify(calibration ? ["fit", "calibration"] : ["fit"]);
  if (!layout || !points.length) {
    if (finished) chart.dataset.finished = "true";
    return;
  }
  const shaped = aligned();
  // the lines view thickens the current problem's line: a new plot when it changes
  const shape = `${layout.name}/${shaped.series.map((s) => s.label).join("|")}/${layout.envelope ? "" : current}`;
  if (!plot || shape !== drawnShape) {
    chartEmpty.hidden = true;
    makePlot(shaped);
    drawnShape = shape;
    if (!observed) {
      observed = true;
      new ResizeObserver(() => {
        if (plot) plot.setSize({ width: Math.max(280, chart.clientWidth), height: chartHeight() });
      }).observe(chart);
    }
  } else {
    plot.setData(shaped.data);
  }
  const { data } = shaped;
  chart.dataset.points = String(points.length);
  chart.dataset.layout = layout.name;
  chart.dataset.view = layout.envelope ? "envelope" : "lines";
  chart.dataset.series = String(layout.columns.length);
  chart.dataset.finals = String(points.filter((p) => p.final && p.values.some(([, v]) => v !== null)).length);
  chart.dataset.drawn = String(data.slice(1).filter((column) => column.some((v) => v !== null)).length);
  chart.dataset.current = String(current);
  if (finalValues) chart.dataset.final = JSON.stringify(finalValues);
  const xs = data[0];
  const last = xs.length - 1;
  let shown;
  if (layout.envelope) {
    const ended = points.filter((p) => p.final).length;
    shown = [`median ${fmtNum(data[2][last], 5)}`, `largest ${fmtNum(data[3][last], 5)}`];
    if (ended) shown.push(`${ended} of ${layout.columns.length} problems ended`);
  } else {
    shown = shaped.series
      .map((column, c) => [column.label, data[c + 1][last]])
      .filter(([, v]) => v !== null && v !== undefined)
      .map(([label, v]) => `${label} ${fmtNum(v, 5)}`);
  }
  chartSummary.textContent = `${points.length} point${points.length === 1 ? "" : "s"} · at ${fmtSeconds(xs[last])}: ${shown.join(", ")}`
    + (finalValues ? " (the job's result)" : "");
  if (finished) chart.dataset.finished = "true";
}

function scheduleDraw() {
  if (!drawPending) {
    drawPending = true;
    window.requestAnimationFrame(draw);
  }
}

export function resetPlot() {
  points.length = 0;
  finalValues = null;
  calibration = null;
  iterations = null;
  fitEnd = null;
  finished = false;
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
  if (layout && k < layout.columns.length && event.class_index === k) layout.columns[k].label = problemName(k, event);
  $("chart-current").hidden = false;
  const which = layout && layout.envelope ? "" : "; the thick line";
  $("chart-current").textContent = `Training binary problem ${k + 1} of ${n}: ${problemName(k, event)}`
    + ` (${layout && layout.ovo ? "one-vs-one" : "one-vs-rest"}${which}).`;
  if (k !== current) {
    current = k;
    scheduleDraw();
  }
}

/** A calibration event: the phase's span on the fit's clock and its count of fits. */
function addCalibration(event) {
  const start = typeof event.phase_start_s === "number" ? event.phase_start_s
    : (calibration ? calibration.start : (points.length ? points[points.length - 1].x : 0));
  const x = start + (typeof event.elapsed_s === "number" ? event.elapsed_s : 0);
  const total = typeof event.n_classes === "number" ? event.n_classes : 0;
  const done = typeof event.class_index === "number" ? event.class_index : 0;
  if (!calibration) calibration = { start, end: x, done, total, completed: false };
  calibration.end = Math.max(calibration.end, x);
  calibration.done = Math.max(calibration.done, done);
  calibration.total = total || calibration.total;
  if (fitEnd === null) fitEnd = start;
  $("chart-current").hidden = false;
  $("chart-current").textContent = `Calibrating probabilities: fit ${fmtInt(done + 1)} of ${fmtInt(total)} of the 5-fold cross-validation (see the phases below).`;
  scheduleDraw();
}

export function addPoint(event) {
  if (event.phase === "calibration") {
    addCalibration(event);
    return;
  }
  const x = event.elapsed_s;
  if (typeof x !== "number") return;
  if (points.length && x <= points[points.length - 1].x) return; // a live point seen again
  if (!layout) {
    layout = makeLayout(event);
    describeChart();
  }
  showCurrent(event);
  const columns = layout.multi ? [event.class_index || 0] : layout.columns.map((_, c) => c);
  if (columns.some((c) => c >= layout.columns.length)) return; // not a problem of this fit
  const values = columns.map((c) => [c, layout.columns[c].value(event)]);
  points.push({ x, values });
  scheduleDraw();
}

function describeChart() {
  if (!layout) return;
  const n = layout.columns.length;
  const kind = layout.ovo ? "one-vs-one" : "one-vs-rest";
  const text = {
    "binary-linear": "Primal and dual objective and the duality gap",
    "binary-kernel": "SMO's −dual (its dual objective f(a) is negative) and the KKT violation m − M (converged below eps)",
    "multi-linear": `The ${layout.quantity} of each of the ${n} binary problems (${kind}), one line per problem`,
    "multi-kernel": `The KKT violation m − M of each of the ${n} binary problems (${kind}; converged below eps), one line per problem`,
  }[layout.name];
  const envelope = layout.envelope
    ? `The ${layout.quantity} of the ${n} binary problems (${kind}): the band spans the smallest to the largest of their latest values, the thick line is their median, the ${SLOWEST} slowest problems are dashed lines and a green dot marks where each problem ended`
    : null;
  const end = finished
    ? "; the last point of each line is the job's result"
    : ", live from the job's progress events";
  $("chart-description").textContent = `${envelope || text}, against seconds since the solver started, on a log scale${end}.`;
}

/** Where each problem of a linear one-vs-rest fit ended, from the result's path. */
function linearEnds(result) {
  // the outputs train one after another, so output k ends after the seconds of the steps
  // of outputs 0..k (never before its own last point)
  let ended = 0;
  const out = [];
  layout.columns.forEach((_column, k) => {
    const steps = (result.path || []).filter((step) => step.output === k);
    steps.forEach((step) => { ended += typeof step.seconds === "number" ? step.seconds : 0; });
    if (!steps.length) return;
    out.push([k, ended, steps[steps.length - 1].relative_gap]);
  });
  return out;
}

/** The result's values as the last points: equal to what the result box shows. */
export function addResult(job) {
  finished = true;
  const result = job.result;
  if (result && !layout) {
    // a job whose problems all ended before its first progress report: plot their ends
    const kernel = typeof result.n_support === "number";
    if (Array.isArray(result.problems) && result.problems.length > 1) {
      layout = makeLayout({ n_classes: result.problems.length, class_index: 0, pair: result.problems[0].pair }, kernel);
    } else if (!kernel && Array.isArray(result.path) && new Set(result.path.map((s) => s.output)).size > 1) {
      layout = makeLayout({ n_classes: new Set(result.path.map((s) => s.output)).size, class_index: 0 });
    } else if (job.status === "succeeded") {
      layout = makeLayout({ n_classes: 1 }, kernel);
    }
  }
  describeChart();
  if (!result || !layout) {
    scheduleDraw();
    return;
  }
  const lastX = points.length ? points[points.length - 1].x : 0;
  const trained = typeof result.train_seconds === "number" ? result.train_seconds : null;
  if (trained !== null) fitEnd = trained; // the fit's own time (the phases start a bit later)
  else if (fitEnd === null) fitEnd = lastX;
  if (calibration) calibration.completed = job.status === "succeeded" && result.exit_reason !== "cancelled";
  // the fit's end on the progress clock: before the calibration when there was one
  const fitStop = calibration ? Math.max(after(lastX), Math.min(calibration.start, trained === null ? Infinity : trained))
    : (trained !== null && trained > lastX ? trained : after(lastX));
  finalValues = {};
  if (layout.name === "binary-linear") {
    const values = [result.primal_objective, result.dual_objective, result.duality_gap];
    points.push({ x: fitStop, values: values.map((v, c) => [c, positive(v)]), final: true });
    layout.columns.forEach((column, c) => { finalValues[column.label] = values[c]; });
  } else if (layout.name === "binary-kernel") {
    const value = typeof result.dual_objective === "number" ? -result.dual_objective : null;
    const values = [[0, positive(value)]];
    finalValues["−dual"] = value;
    if (typeof result.violation === "number") { // the final KKT violation (results since issue 31)
      values.push([1, positive(result.violation)]);
      finalValues["violation m − M"] = result.violation;
    }
    points.push({ x: fitStop, values, final: true });
  } else if (layout.name === "multi-linear" && layout.quantity === "relative gap") {
    for (const [k, ended, value] of linearEnds(result)) {
      const own = points.filter((p) => p.values[0][0] === k);
      const x = own.length ? Math.max(ended, after(own[own.length - 1].x)) : ended;
      points.push({ x, values: [[k, positive(value)]], final: true });
      finalValues[layout.columns[k].label] = value;
    }
  } else if (layout.name === "multi-kernel" && Array.isArray(result.problems)) {
    // each problem's final KKT violation where it ended (problems solved between two
    // progress events have no point of their own until now)
    iterations = result.problems.map((problem) => problem.iterations);
    result.problems.forEach((problem, k) => {
      if (k >= layout.columns.length || typeof problem.end_s !== "number") return;
      const value = positive(problem.violation);
      if (value === null) return;
      const own = points.filter((p) => p.values[0][0] === k);
      const lastOwn = own.length ? own[own.length - 1].x : -Infinity;
      points.push({ x: problem.end_s > lastOwn ? problem.end_s : after(lastOwn), values: [[k, value]], final: true });
      finalValues[layout.columns[k].label] = problem.violation;
    });
  }
  // two ends at the same time stay two points
  points.sort((a, b) => a.x - b.x);
  for (let i = 1; i < points.length; i++) if (points[i].x <= points[i - 1].x) points[i].x = after(points[i - 1].x);
  if (!Object.keys(finalValues).length) finalValues = null;
  if (layout.multi) {
    $("chart-current").hidden = false;
    $("chart-current").textContent = layout.envelope
      ? `${layout.columns.length} binary problems (${layout.ovo ? "one-vs-one" : "one-vs-rest"}): their envelope, the ${SLOWEST} slowest and every problem's end.`
      : `${layout.columns.length} binary problems (${layout.ovo ? "one-vs-one" : "one-vs-rest"}), one line each; the thick line is the last one trained.`;
  } else {
    $("chart-current").hidden = true;
  }
  if (!points.some((p) => !p.final && p.values.some(([, v]) => v !== null))) {
    // every point is an end: the fit was shorter than the progress interval
    $("chart-current").hidden = false;
    $("chart-current").textContent = `The fit ended in ${fmtSeconds(fitEnd)}, before its first progress report: `
      + (layout.multi ? "each dot is where a binary problem ended, with its final value." : "the dots are its result.");
  }
  scheduleDraw();
}

/** How many progress points are plotted. */
export function pointCount() {
  return points.length;
}

/** Whether a calibration phase was seen. */
export function phaseCount() {
  return calibration ? 2 : 1;
}
