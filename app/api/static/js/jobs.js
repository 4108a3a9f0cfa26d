// Jobs tables (the jobs page and a dataset's page): live status, elapsed time and progress
// by polling GET /v1/jobs; new jobs appear at the top.
import { api, fmtNum, fmtSeconds, setStatusBadge, shortId, timeElement } from "./common.js";

// The status lists come from the server (app/domain/job_status.py), on the <body> element.
const ACTIVE = new Set(document.body.dataset.activeStatuses.split(" "));
const section = document.getElementById("jobs");
const body = section && section.querySelector("[data-jobs-body]");
const template = document.getElementById("job-row-template");
const empty = section && section.querySelector("[data-jobs-empty]");
const live = document.getElementById("jobs-live");
const names = new Map();
const counts = document.querySelectorAll("[data-count]");

function rowFor(id) {
  return body.querySelector(`tr[data-job-id="${CSS.escape(id)}"]`);
}

function elapsedSeconds(started, finished) {
  if (!started) return null;
  const end = finished ? Date.parse(finished) : Date.now();
  return (end - Date.parse(started)) / 1000;
}

function field(row, name) {
  return row.querySelector(`[data-field="${name}"]`);
}

function fillProgress(row, job) {
  const bar = field(row, "progress").querySelector("progress");
  const text = field(row, "progress-text");
  const fraction = job.progress_fraction;
  bar.setAttribute("aria-label", `Progress of job ${shortId(job.id)}`);
  if (typeof fraction === "number") {
    bar.value = fraction;
    text.textContent = `${Math.round(fraction * 100)}%`;
    if (job.status === "succeeded" && job.result && job.result.converged === false) text.textContent += " · stopped";
  } else if (ACTIVE.has(job.status)) {
    bar.removeAttribute("value"); // indeterminate while there is no estimate yet
    text.textContent = job.status === "queued" ? "waiting" : "starting";
  } else {
    bar.value = 0;
    text.textContent = "—";
  }
}

function fillDataset(cell, job) {
  if (!job.dataset_id) {
    cell.textContent = "(deleted)";
    return;
  }
  const link = document.createElement("a");
  link.href = `/datasets/${encodeURIComponent(job.dataset_id)}`;
  link.textContent = names.get(job.dataset_id) || shortId(job.dataset_id);
  cell.replaceChildren(link);
}

function fillRow(row, job) {
  row.dataset.jobId = job.id;
  row.dataset.status = job.status;
  row.dataset.started = job.started_at || "";
  row.dataset.finished = job.finished_at || "";
  const link = field(row, "link");
  link.href = `/jobs/${encodeURIComponent(job.id)}`;
  link.textContent = shortId(job.id);
  const badge = field(row, "status").querySelector(".status");
  setStatusBadge(badge, job.status);
  if (job.status === "succeeded" && job.result && job.result.converged === false) {
    // a model that did not converge: a warning, not a green success
    badge.className = "status status-unconverged";
    badge.textContent = `stopped: ${job.result.exit_reason}`;
  }
  if (job.status === "queued" && job.waiting_for) {
    field(row, "progress-text").title = `waiting for ${job.waiting_for}`;
  }
  field(row, "solver").textContent = job.solver;
  fillDataset(field(row, "dataset"), job);
  field(row, "C").textContent = fmtNum(job.params && job.params.C);
  field(row, "elapsed").textContent = fmtSeconds(elapsedSeconds(job.started_at, job.finished_at));
  fillProgress(row, job);
  const created = field(row, "created");
  if (!created.querySelector("time")) created.replaceChildren(timeElement(job.created_at));
}

function newRow(job) {
  const row = template.content.firstElementChild.cloneNode(true);
  fillRow(row, job);
  return row;
}

async function learnNames(jobs) {
  const unknown = [...new Set(jobs.map((j) => j.dataset_id).filter((id) => id && !names.has(id)))];
  await Promise.all(unknown.map(async (id) => {
    const result = await api("GET", `/v1/datasets/${encodeURIComponent(id)}`);
    names.set(id, result.ok ? result.data.name : shortId(id));
  }));
}

function listUrl() {
  const query = new URLSearchParams({ limit: section.dataset.limit || "100" });
  if (section.dataset.statusFilter) query.set("status", section.dataset.statusFilter);
  if (section.dataset.datasetId) query.set("dataset_id", section.dataset.datasetId);
  return `/v1/jobs?${query}`;
}

async function refreshCounts() {
  await Promise.all([...counts].map(async (node) => {
    const result = await api("GET", `/v1/jobs?limit=1&status=${encodeURIComponent(node.dataset.count)}`);
    if (result.ok) node.textContent = String(result.data.count);
  }));
  const all = document.querySelector(".filters li:first-child .count");
  if (all) {
    const result = await api("GET", "/v1/jobs?limit=1");
    if (result.ok) all.textContent = String(result.data.count);
  }
}

async function refresh() {
  const result = await api("GET", listUrl());
  if (!result.ok) return false;
  const jobs = result.data.data;
  await learnNames(jobs);
  let changed = false;
  const seen = new Set();
  const fresh = [];
  for (const job of jobs) {
    seen.add(job.id);
    const row = rowFor(job.id);
    if (row) {
      if (row.dataset.status !== job.status) {
        changed = true;
        if (live) live.textContent = `Job ${shortId(job.id)} is ${job.status}.`;
      }
      fillRow(row, job);
    } else {
      fresh.push(newRow(job));
    }
  }
  if (fresh.length) {
    changed = true;
    body.prepend(...fresh);
  }
  // Rows no longer in the (filtered) list: bring active ones up to date one by one.
  for (const row of body.querySelectorAll("tr[data-job-id]")) {
    if (seen.has(row.dataset.jobId) || !ACTIVE.has(row.dataset.status)) continue;
    const one = await api("GET", `/v1/jobs/${encodeURIComponent(row.dataset.jobId)}`);
    if (one.ok) {
      changed = changed || one.data.status !== row.dataset.status;
      fillRow(row, one.data);
    }
  }
  if (empty) empty.hidden = body.children.length > 0;
  if (changed && counts.length) await refreshCounts();
  return true;
}

function anyActive() {
  return [...body.querySelectorAll("tr[data-status]")].some((row) => ACTIVE.has(row.dataset.status));
}

async function loop() {
  if (document.visibilityState === "visible") {
    try {
      await refresh();
    } catch (error) {
      console.warn("jobs refresh failed", error);
    }
  }
  window.setTimeout(loop, anyActive() ? 1000 : 3000);
}

if (section && body && template) {
  for (const link of body.querySelectorAll('td[data-field="dataset"] a')) {
    const id = decodeURIComponent(link.getAttribute("href").split("/").pop());
    names.set(id, link.textContent);
  }
  window.setTimeout(loop, anyActive() ? 1000 : 3000);
}
