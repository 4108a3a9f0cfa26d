// The job page's convergence plot (uPlot, vendored), fed by the job's progress events and
// ended by its result; job.js owns the rest of the page.
import { fmtNum, fmtSeconds } from "./common.js";

const $ = (id) => document.getElementById(id);
const root = $("job");
const chart = $("chart");
const chartEmpty = $("chart-empty");
const chartSummary = $("chart-summary");

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
  if (!kernel) {
    // every linear output ends certified by its relative gap (the result's path); events
    // of a solver that reports no dual bound (tron, between certificates) plot nothing
    quantity = "relative gap";
    value = (e) => (typeof e.primal === "number" && e.primal > 0 && gapOf(e) !== null ? positive(gapOf(e) / e.primal) : null);
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

function countValues(column, i0, i1) {
  let count = 0;
  for (let i = i0; i <= i1 && count < 40; i++) if (column[i] !== null && column[i] !== undefined) count++;
  return count;
}

function makePlot(data) {
  const series = [{ label: "time", value: legendValue(fmtSeconds) }];
  layout.columns.forEach((column, c) => {
    const focused = !layout.multi || c === current;
    series.push({
      label: column.label, stroke: column.stroke, dash: column.dash,
      width: layout.multi ? (focused ? 3 : 1.25) : 2,
      alpha: layout.multi && !focused ? 0.55 : 1,
      // several problems: a problem's points are joined across the other problems' times
      // (pairs trained at once interleave), and marked while they are few (a pair solved
      // between two progress events has one point: its end, from the result)
      value: legendValue((v) => fmtNum(v, 5)), spanGaps: layout.multi,
      points: { show: (u, s, i0, i1) => countValues(u.data[s], i0, i1) < 40, size: layout.multi ? 6 : 5 },
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

export function resetPlot() {
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

export function addPoint(event) {
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
export function addResult(job) {
  const result = job.result;
  if (result && !layout && Array.isArray(result.problems) && result.problems.length > 1) {
    // a job whose problems all ended before its first progress report: plot their ends
    layout = makeLayout({ n_classes: result.problems.length, class_index: 0, pair: result.problems[0].pair });
    describeChart();
  }
  if (!result || !layout || (!points.length && layout.name !== "multi-kernel")) return;
  const lastX = points.length ? points[points.length - 1].x : 0;
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
    // each problem's certified relative gap (the last step of its path), where it ended:
    // the outputs train one after another, so output k ends after the seconds of the
    // steps of outputs 0..k (never before its own last point)
    let ended = 0;
    layout.columns.forEach((column, k) => {
      const steps = (result.path || []).filter((step) => step.output === k);
      steps.forEach((step) => { ended += typeof step.seconds === "number" ? step.seconds : 0; });
      if (!steps.length) return;
      const own = points.filter((p) => p.values[0][0] === k);
      const x = own.length ? Math.max(ended, after(own[own.length - 1].x)) : ended;
      const value = steps[steps.length - 1].relative_gap;
      points.push({ x, values: [[k, positive(value)]] });
      finalValues[column.label] = value;
    });
    points.sort((a, b) => a.x - b.x);
  } else if (layout.name === "multi-kernel" && Array.isArray(result.problems)) {
    // each problem's final KKT violation where it ended (problems solved between two
    // progress events have no point of their own until now)
    result.problems.forEach((problem, k) => {
      if (k >= layout.columns.length || typeof problem.end_s !== "number") return;
      const value = positive(problem.violation);
      if (value === null) return;
      const own = points.filter((p) => p.values[0][0] === k);
      const lastOwn = own.length ? own[own.length - 1].x : -Infinity;
      points.push({ x: problem.end_s > lastOwn ? problem.end_s : after(lastOwn), values: [[k, value]] });
      finalValues[layout.columns[k].label] = problem.violation;
    });
    points.sort((a, b) => a.x - b.x);
  }
  if (!Object.keys(finalValues).length) finalValues = null;
  if (layout.multi) {
    $("chart-current").hidden = false;
    $("chart-current").textContent = `${layout.columns.length} binary problems (${layout.ovo ? "one-vs-one" : "one-vs-rest"}), `
      + "one line each; the thick line is the last one trained.";
  }
  scheduleDraw();
}

/** How many progress points are plotted. */
export function pointCount() {
  return points.length;
}
