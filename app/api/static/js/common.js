// Shared helpers of the dashboard pages. Data is only ever written with textContent or
// attributes, never parsed as HTML.

const NUMBER = new Intl.NumberFormat("en-US");

/** Create an element: el("a", {href: "/x", class: "y"}, "text", child, ...). */
/** The element with this id. */
export const $ = (id) => document.getElementById(id);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** The CSRF token of this page's session: sent with every request that changes something. */
export function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.getAttribute("content") : "";
}

/** JSON API call: {ok, status, data}; data is the parsed body (or null). Never throws on HTTP errors. */
export async function api(method, url, body, headers = {}) {
  const init = { method, headers: { Accept: "application/json", ...headers } };
  if (method !== "GET" && method !== "HEAD") init.headers["X-CSRF-Token"] = csrfToken();
  if (body !== undefined) {
    if (typeof body === "string") {
      init.body = body;
    } else {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (error) {
    return { ok: false, status: 0, data: { error: { message: `network error: ${error.message}` } } };
  }
  let data = null;
  const text = await response.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { error: { message: text.slice(0, 500) } };
    }
  }
  return { ok: response.ok, status: response.status, data };
}

/** The message of the API's error shape {"error": {"code", "message", "detail"}}. */
export function errorMessage(result) {
  const error = result && result.data && result.data.error;
  if (error && error.message) return error.message;
  return `request failed (HTTP ${result ? result.status : "?"})`;
}

export function fmtInt(value) {
  return value === null || value === undefined ? "—" : NUMBER.format(Math.round(value));
}

/** Same rules as the server's `num` filter. */
export function fmtNum(value, digits = 6) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value !== "number") return String(value);
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (value !== 0 && (abs < 1e-3 || abs >= 1e7)) {
    return value.toExponential(Math.max(1, digits - 3)).replace(/e([+-])(\d)$/, "e$10$2");
  }
  return String(Number(value.toPrecision(digits)));
}

/** Same rules as the server's `seconds` filter. */
export function fmtSeconds(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "—";
  const s = Math.max(0, seconds);
  if (s < 0.001) return s === 0 ? "0 s" : "< 1 ms";
  if (s < 0.1) return `${Math.round(s * 1000)} ms`; // a 45 ms fit is not "0.0 s"
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.round(s)} s`;
  const whole = Math.floor(s);
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${String(whole % 60).padStart(2, "0")} s`;
  return `${Math.floor(whole / 3600)} h ${String(Math.floor((whole % 3600) / 60)).padStart(2, "0")} min`;
}

export function fmtBytes(size) {
  if (size === null || size === undefined) return "—";
  let value = size;
  for (const unit of ["B", "KB", "MB", "GB"]) {
    if (value < 1000 || unit === "GB") return unit === "B" ? `${Math.round(value)} B` : `${value.toFixed(1)} ${unit}`;
    value /= 1000;
  }
  return `${value.toFixed(1)} GB`;
}

export function shortId(id) {
  return id ? id.slice(0, 8) : "—";
}

/** Show a <time datetime> element in the reader's local time zone. */
export function localizeTime(node) {
  const when = new Date(node.getAttribute("datetime"));
  if (Number.isNaN(when.getTime())) return;
  // data-format="short" (a table's date column): "Nov 26, 05:57 PM", the full time in the title
  const options = node.dataset.format === "short"
    ? { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" }
    : { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" };
  node.textContent = when.toLocaleString(undefined, options);
  node.title = when.toISOString();
}

export function localizeTimes(root = document) {
  for (const node of root.querySelectorAll("time[datetime]")) localizeTime(node);
}

export function timeElement(iso) {
  const node = el("time", { datetime: iso || "" }, iso || "");
  if (iso) localizeTime(node);
  return node;
}

/** Set a status badge (the same markup as the server's status_badge macro). */
export function setStatusBadge(node, status) {
  node.className = `status status-${status || "unknown"}`;
  node.dataset.status = status || "";
  node.textContent = status || "";
}

export function statusBadge(status) {
  const node = el("span");
  setStatusBadge(node, status);
  return node;
}

export function show(node, text) {
  if (!node) return;
  node.textContent = text;
  node.hidden = !text;
}

localizeTimes();
