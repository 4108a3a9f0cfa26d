// Search detail: live progress, a heatmap of the CV metric over (log2 C, log2 gamma) (or a
// line over a one-dimensional space) fed by the SSE stream GET /v1/searches/{id}/events,
// the best point ringed, and the cancel button. L1-regularised models (l1_cd) also report
// their non-zero weights per point: a second line (right axis) of the plot over C, and the
// regularisation path's table (C, non-zeros, metric).
import { $, api, el, errorMessage, fmtNum, setStatusBadge } from "./common.js";

const TERMINAL = new Set(document.body.dataset.terminalStatuses.split(" "));
const root = document.getElementById("search");
const searchId = root.dataset.searchId;
const lowerIsBetter = root.dataset.metric === "log_loss";

const figure = $("search-chart");
const canvas = $("heatmap");
const empty = $("chart-empty");
const cancelButton = $("cancel-search");
const message = $("search-action-message");

let status = root.dataset.status;
let points = []; // [{index, values}] of the whole space
let means = new Map(); // index -> mean of a finished point
let nonzeros = new Map(); // index -> mean non-zero weights of an L1 model's point
let converged = new Map(); // index -> every fold's fit converged
let best = null; // index of the best point once the search has ended
let dims = []; // the numeric dimensions of the space (names)
let linePlot = null;
let source = null;

const log2 = (v) => Math.log2(v);

function numericDims(spaceNames) {
  return spaceNames.filter((name) => points.every((p) => typeof p.values[name] === "number" && p.values[name] > 0));
}

function colour(t) {
  // light (worst) to dark blue (best)
  const from = [237, 244, 252];
  const to = [12, 58, 120];
  const mix = from.map((f, i) => Math.round(f + (to[i] - f) * t));
  return `rgb(${mix[0]}, ${mix[1]}, ${mix[2]})`;
}

function drawHeatmap() {
  const [xName, yName] = dims;
  const xs = [...new Set(points.map((p) => log2(p.values[xName])))].sort((a, b) => a - b);
  const ys = [...new Set(points.map((p) => log2(p.values[yName])))].sort((a, b) => a - b);
  const ctx = canvas.getContext("2d");
  const left = 60;
  const bottom = 40;
  const width = canvas.width - left - 10;
  const height = canvas.height - bottom - 10;
  const cw = width / xs.length;
  const ch = height / ys.length;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const finished = [...means.values()];
  const lo = Math.min(...finished);
  const hi = Math.max(...finished);
  ctx.font = "11px sans-serif";
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  for (const p of shownPoints()) {
    const i = xs.indexOf(log2(p.values[xName]));
    const j = ys.indexOf(log2(p.values[yName]));
    const x = left + i * cw;
    const y = 10 + (ys.length - 1 - j) * ch;
    const mean = means.get(p.index);
    if (mean === undefined) {
      ctx.fillStyle = "#f4f4f4";
    } else {
      let t = hi > lo ? (mean - lo) / (hi - lo) : 1;
      if (lowerIsBetter) t = 1 - t;
      ctx.fillStyle = colour(t);
    }
    ctx.fillRect(x + 1, y + 1, cw - 2, ch - 2);
    if (mean !== undefined && cw > 34) {
      ctx.fillStyle = "#333";
      ctx.fillText(mean.toFixed(3).replace(/^0/, ""), x + cw / 2, y + ch / 2);
    }
    if (best === p.index) {
      ctx.strokeStyle = "#d00";
      ctx.lineWidth = 3;
      ctx.strokeRect(x + 2, y + 2, cw - 4, ch - 4);
    }
  }
  ctx.fillStyle = "#333";
  xs.forEach((v, i) => ctx.fillText(String(v), left + (i + 0.5) * cw, canvas.height - bottom + 12));
  ctx.textAlign = "right";
  ys.forEach((v, j) => ctx.fillText(String(v), left - 6, 10 + (ys.length - 1 - j + 0.5) * ch));
  ctx.textAlign = "center";
  ctx.fillText(`log2 ${xName}`, left + width / 2, canvas.height - 8);
  ctx.save();
  ctx.translate(14, 10 + height / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.fillText(`log2 ${yName}`, 0, 0);
  ctx.restore();
}

/** One point per cell: a halving search evaluates a candidate again in later rounds, on
 * more rows; the latest round with a finished mean is shown (else the first round). */
function shownPoints() {
  const shown = new Map();
  for (const p of points) {
    const key = JSON.stringify(p.values);
    const held = shown.get(key);
    if (!held || (means.has(p.index) && p.round > held.round) || (!means.has(held.index) && means.has(p.index))) {
      shown.set(key, p);
    }
  }
  return [...shown.values()];
}

function drawLine() {
  const name = dims[0];
  const order = shownPoints().sort((a, b) => a.values[name] - b.values[name]);
  const xs = order.map((p) => log2(p.values[name]));
  const ys = order.map((p) => (means.has(p.index) ? means.get(p.index) : null));
  const marks = order.map((p) => (p.index === best ? means.get(p.index) : null));
  const sparse = nonzeros.size > 0;
  const data = [xs, ys, marks];
  if (sparse) data.push(order.map((p) => (nonzeros.has(p.index) ? nonzeros.get(p.index) : null)));
  if (linePlot && linePlot.series.length === data.length) {
    linePlot.setData(data);
    return;
  }
  if (linePlot) linePlot.destroy();
  const axes = [{ label: `log2 ${name}` }, { label: root.dataset.metric }];
  const series = [{ label: `log2 ${name}` }, { label: "mean", stroke: "#0c3a78", spanGaps: true, points: { show: true } },
    { label: "best", stroke: "#d00", points: { show: true, size: 12 }, width: 0 }];
  if (sparse) {
    axes.push({ scale: "nz", side: 1, label: "non-zero weights", grid: { show: false } });
    series.push({ label: "non-zero weights", scale: "nz", stroke: "#b35c00", dash: [6, 4], spanGaps: true, points: { show: true } });
  }
  linePlot = new uPlot({
    width: Math.min(720, figure.clientWidth || 640), height: 320,
    scales: { x: { time: false }, ...(sparse ? { nz: { auto: true } } : {}) },
    axes, series,
  }, data, figure);
}

/** The regularisation path of an L1 search: C, non-zero weights, metric, by C. */
function drawPath() {
  const card = $("path-card");
  if (!nonzeros.size) return;
  card.hidden = false;
  const rows = shownPoints().filter((p) => nonzeros.has(p.index))
    .sort((a, b) => (a.values.C ?? 0) - (b.values.C ?? 0));
  const body = $("path-table").tBodies[0];
  body.replaceChildren(...rows.map((p) => el("tr", { "data-index": String(p.index) },
    el("td", { class: "num" }, p.values.C === undefined ? "—" : fmtNum(p.values.C)),
    el("td", { class: "num", "data-field": "nonzero_weights" }, fmtNum(nonzeros.get(p.index))),
    el("td", { class: "num" }, means.has(p.index) ? fmtNum(means.get(p.index)) : "—"),
    el("td", {}, converged.has(p.index) ? (converged.get(p.index) ? "yes" : "NO") : "—"))));
  figure.dataset.nonzeros = String(nonzeros.size);
}

function draw() {
  figure.dataset.points = String(means.size);
  figure.dataset.best = best === null ? "" : String(best);
  drawPath();
  if (!means.size) return;
  empty.hidden = true;
  if (dims.length === 2) {
    canvas.hidden = false;
    figure.dataset.kind = "heatmap";
    drawHeatmap();
  } else if (dims.length === 1) {
    figure.dataset.kind = "line";
    drawLine();
  } else {
    empty.hidden = false;
    empty.textContent = `${means.size} points finished (the plot needs one or two numeric dimensions)`;
  }
}

function showBest(search) {
  const line = $("search-best");
  if (!search.best) return;
  best = search.best.index;
  const values = Object.entries(search.best.values).map(([k, v]) => `${k}=${fmtNum(v)}`).join(" ");
  line.textContent = `best: ${values} (${fmtNum(search.best.mean)} ± ${fmtNum(search.best.std)})`;
  line.dataset.bestIndex = String(best);
}

function showProgress(done, total) {
  $("search-progress").value = done;
  $("search-progress-label").textContent = `${done} / ${total} fits`;
}

async function refresh() {
  const result = await api("GET", `/v1/searches/${encodeURIComponent(searchId)}`);
  if (!result.ok) {
    message.textContent = errorMessage(result);
    return null;
  }
  const search = result.data;
  points = search.points.map((p) => ({ index: p.index, values: p.values, round: p.round }));
  for (const p of search.points) remember(p);
  dims = numericDims(Object.keys(search.spec.space)).slice(0, 2);
  status = search.status;
  setStatusBadge($("search-status"), status);
  showProgress(search.done, search.total);
  showBest(search);
  if (search.error) {
    $("search-error").textContent = search.error;
    $("search-error").hidden = false;
  }
  if (search.model_id) {
    $("model-link").href = `/models/${search.model_id}`;
    $("model-link").hidden = false;
  }
  cancelButton.hidden = TERMINAL.has(status);
  draw();
  return search;
}

function remember(point) {
  if (point.mean !== null) means.set(point.index, point.mean);
  if (point.nonzero_weights !== null && point.nonzero_weights !== undefined) nonzeros.set(point.index, point.nonzero_weights);
  if (point.converged !== null && point.converged !== undefined) converged.set(point.index, point.converged);
}

function listen() {
  source = new EventSource(`/v1/searches/${encodeURIComponent(searchId)}/events`);
  source.addEventListener("point", (event) => {
    const point = JSON.parse(event.data);
    remember(point);
    if (!points.some((p) => p.index === point.index)) refresh(); // a new halving round
    else draw();
  });
  source.addEventListener("progress", (event) => {
    const progress = JSON.parse(event.data);
    showProgress(progress.done, progress.total);
  });
  source.addEventListener("status", async () => {
    source.close();
    watchRefit(await refresh());
  });
}

cancelButton.addEventListener("click", async () => {
  cancelButton.disabled = true;
  const result = await api("POST", `/v1/searches/${encodeURIComponent(searchId)}/cancel`);
  if (result.ok) {
    message.textContent = "cancelled";
    await refresh();
  } else {
    message.textContent = errorMessage(result);
    cancelButton.disabled = false;
  }
});

/** The refit model appears when its job succeeds, after the search: look every 2 s (for
 * at most 10 minutes). */
function watchRefit(search, tries = 300) {
  if (!search || !search.refit_job_id || search.model_id || tries <= 0) return;
  setTimeout(async () => watchRefit(await refresh(), tries - 1), 2000);
}

(async () => {
  const search = await refresh();
  if (search && !TERMINAL.has(search.status)) listen();
  else watchRefit(search);
})();
