// Datasets page: upload with progress (XMLHttpRequest, multipart `file` + `name`) and delete.
import { $, api, csrfToken, errorMessage, fmtBytes, fmtInt, show, timeElement } from "./common.js";

const form = $("upload-form");
const fileInput = $("upload-file");
const nameInput = $("upload-name");
const submit = $("upload-submit");
const progressRow = $("upload-progress-row");
const bar = $("upload-progress");
const barLabel = $("upload-progress-label");
const statusLine = $("upload-status");
const errorLine = $("upload-error");
const body = $("datasets-body");
const template = $("dataset-row-template");
const message = $("datasets-message");

function classCounts(counts) {
  return Object.keys(counts)
    .sort((a, b) => Number(a) - Number(b))
    .map((label) => `${label}: ${fmtInt(counts[label])}`)
    .join(", ");
}

function datasetRow(dataset) {
  const row = template.content.firstElementChild.cloneNode(true);
  const field = (name) => row.querySelector(`[data-field="${name}"]`);
  row.dataset.datasetId = dataset.id;
  const link = field("name");
  link.href = `/datasets/${encodeURIComponent(dataset.id)}`;
  link.textContent = dataset.name;
  field("rows").textContent = fmtInt(dataset.rows);
  field("features").textContent = fmtInt(dataset.features);
  field("nnz").textContent = fmtInt(dataset.nnz);
  const stats = dataset.label_stats;
  field("classes").textContent = dataset.task === "regression" && stats
    ? `regression: ${stats.min} … ${stats.max}` : classCounts(dataset.class_counts);
  field("size").textContent = fmtBytes(dataset.size_bytes);
  field("created").replaceChildren(timeElement(dataset.created_at));
  field("train").href = `/datasets/${encodeURIComponent(dataset.id)}#new-job`;
  return row;
}

function setProgress(fraction) {
  if (fraction === null) {
    bar.removeAttribute("value");
    barLabel.textContent = "…";
  } else {
    bar.value = fraction;
    barLabel.textContent = `${Math.round(fraction * 100)}%`;
  }
}

function trainLink(dataset) {
  const train = document.createElement("a");
  train.href = `/datasets/${encodeURIComponent(dataset.id)}#new-job`;
  train.textContent = "Train a model on it";
  return train;
}

function uploaded(dataset) {
  body.prepend(datasetRow(dataset));
  $("datasets-empty").hidden = true;
  statusLine.replaceChildren(
    `Uploaded “${dataset.name}”: ${fmtInt(dataset.rows)} rows, ${fmtInt(dataset.features)} features. `,
  );
  statusLine.append(trainLink(dataset));
  form.reset();
  if (dataset.duplicate_of && dataset.duplicate_of.length) showDuplicate(dataset);
}

function reused(dataset) {
  statusLine.replaceChildren(
    `The same content was uploaded before as “${dataset.name}”: using that dataset, nothing new was stored. `,
  );
  statusLine.append(trainLink(dataset));
  const row = body.querySelector(`tr[data-dataset-id="${CSS.escape(dataset.id)}"]`);
  if (row) row.dataset.reused = "true";
  form.reset();
}

// ---- duplicate uploads (same sha256 as an earlier dataset of this tenant) ------------
const duplicateBox = $("upload-duplicate");
let duplicate = null; // {copy, existing}

async function showDuplicate(copy) {
  const existingId = copy.duplicate_of[0];
  const result = await api("GET", `/v1/datasets/${encodeURIComponent(existingId)}`);
  const existing = result.ok ? result.data : { id: existingId, name: existingId.slice(0, 8) };
  duplicate = { copy, existing };
  const more = copy.duplicate_of.length > 1 ? ` (and ${copy.duplicate_of.length - 1} more copies)` : "";
  $("upload-duplicate-text").textContent =
    `This file has the same content (sha256) as “${existing.name}”, uploaded before${more}. `
    + "Use the existing dataset, or keep both.";
  duplicateBox.dataset.existingId = existing.id;
  duplicateBox.hidden = false;
}

$("upload-use-existing").addEventListener("click", async () => {
  if (!duplicate) return;
  const { copy, existing } = duplicate;
  const result = await api("DELETE", `/v1/datasets/${encodeURIComponent(copy.id)}`);
  if (!result.ok) {
    show(errorLine, errorMessage(result));
    return;
  }
  const row = body.querySelector(`tr[data-dataset-id="${CSS.escape(copy.id)}"]`);
  if (row) row.remove();
  duplicateBox.hidden = true;
  duplicate = null;
  statusLine.replaceChildren(`Using “${existing.name}”; the new copy was deleted. `);
  statusLine.append(trainLink(existing));
});

$("upload-keep-both").addEventListener("click", () => {
  duplicateBox.hidden = true;
  duplicate = null;
});

form.addEventListener("submit", (event) => {
  event.preventDefault();
  show(errorLine, "");
  const file = fileInput.files[0];
  if (!file) {
    show(errorLine, "Choose a file to upload.");
    fileInput.setAttribute("aria-invalid", "true");
    fileInput.focus();
    return;
  }
  fileInput.removeAttribute("aria-invalid");
  const data = new FormData();
  const name = nameInput.value.trim();
  if (name) data.append("name", name);
  data.append("file", file);

  duplicateBox.hidden = true;
  duplicate = null;
  const xhr = new XMLHttpRequest();
  xhr.open("POST", $("upload-reuse").checked ? "/v1/datasets?reuse=true" : "/v1/datasets");
  xhr.setRequestHeader("Accept", "application/json");
  xhr.setRequestHeader("X-CSRF-Token", csrfToken());
  xhr.upload.addEventListener("progress", (e) => {
    if (e.lengthComputable) setProgress(e.loaded / e.total);
  });
  xhr.upload.addEventListener("load", () => {
    setProgress(null);
    statusLine.textContent = "Sent; the server is parsing the file…";
  });
  xhr.addEventListener("load", () => {
    submit.disabled = false;
    let payload = null;
    try {
      payload = JSON.parse(xhr.responseText);
    } catch {
      payload = { error: { message: xhr.responseText.slice(0, 300) } };
    }
    if (xhr.status === 201) {
      setProgress(1);
      uploaded(payload);
    } else if (xhr.status === 200) {
      setProgress(1);
      reused(payload);
    } else {
      progressRow.hidden = true;
      statusLine.textContent = "";
      show(errorLine, errorMessage({ status: xhr.status, data: payload }));
    }
  });
  xhr.addEventListener("error", () => {
    submit.disabled = false;
    progressRow.hidden = true;
    statusLine.textContent = "";
    show(errorLine, "The upload failed: network error.");
  });
  submit.disabled = true;
  progressRow.hidden = false;
  setProgress(0);
  statusLine.textContent = `Uploading ${file.name} (${fmtBytes(file.size)})…`;
  xhr.send(data);
});

// Delete: the first press arms the button, the second (within 5 s) deletes.
body.addEventListener("click", async (event) => {
  const button = event.target.closest('button[data-action="delete"]');
  if (!button) return;
  const row = button.closest("tr");
  const name = row.querySelector('[data-field="name"]').textContent;
  if (!button.dataset.armed) {
    button.dataset.armed = "1";
    button.textContent = "Confirm delete";
    message.textContent = `Press “Confirm delete” again to delete “${name}”.`;
    window.setTimeout(() => {
      if (button.isConnected && button.dataset.armed) {
        delete button.dataset.armed;
        button.textContent = "Delete";
      }
    }, 5000);
    return;
  }
  button.disabled = true;
  const result = await api("DELETE", `/v1/datasets/${encodeURIComponent(row.dataset.datasetId)}`);
  if (result.ok) {
    const next = row.nextElementSibling || row.previousElementSibling;
    row.remove();
    message.textContent = `Deleted “${name}”.`;
    $("datasets-empty").hidden = body.children.length > 0;
    const focusTarget = next ? next.querySelector("a") : fileInput;
    if (focusTarget) focusTarget.focus();
  } else {
    button.disabled = false;
    delete button.dataset.armed;
    button.textContent = "Delete";
    message.textContent = errorMessage(result);
  }
});
