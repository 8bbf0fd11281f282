// HTTP to the adapter: the protocol's routes and the console's own /ui/api/.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
  }
}

export async function errorOf(response) {
  let code = `http_${response.status}`;
  let message = response.statusText;
  try {
    const body = await response.json();
    ({ code, message } = body.error);
  } catch {
    // not our JSON error body: keep the status line
  }
  return new ApiError(response.status, code, message);
}

// The bearer token: in sessionStorage (this tab only), sent as a header, never in a URL.
const TOKEN = "console.token";
export const token = () => sessionStorage.getItem(TOKEN) ?? "";
export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN, value);
  else sessionStorage.removeItem(TOKEN);
}

/** fetch() with the token; a 401 asks the page for one (the "unauthorized" event). */
export async function send(path, { headers = {}, ...init } = {}) {
  const auth = token() ? { Authorization: `Bearer ${token()}` } : {};
  const response = await fetch(path, { ...init, headers: { ...headers, ...auth }, cache: "no-store" });
  if (response.status === 401) window.dispatchEvent(new Event("unauthorized"));
  return response;
}

export async function call(method, path, { headers = {}, body, signal } = {}) {
  const response = await send(path, { method, headers, body, signal });
  if (!response.ok) throw await errorOf(response);
  return response;
}

/** After a 403: the control is disabled and says which scope the token lacks. */
export function refused(error, control) {
  if (error.status !== 403) return false;
  control.disabled = true;
  control.title = error.message;
  return true;
}

export async function getJSON(path) {
  return (await call("GET", path)).json();
}

export function bucketPath(bucket) {
  return `/${encodeURIComponent(bucket)}`;
}

export function streamPath(bucket, stream) {
  return `${bucketPath(bucket)}/${encodeURIComponent(stream)}`;
}

export function consoleApi(...segments) {
  return `/ui/api/${segments.map(encodeURIComponent).join("/")}`;
}

/** A producer per tab and stream: every append is idempotent (retries deduplicated). */
export class Producer {
  constructor() {
    this.id = `console-${crypto.randomUUID()}`;
    this.seq = 0;
  }

  async append(path, contentType, body, extra = {}) {
    const headers = {
      "Content-Type": contentType,
      "Producer-Id": this.id,
      "Producer-Epoch": "0",
      "Producer-Seq": String(this.seq),
      ...extra,
    };
    const response = await call("POST", path, { headers, body });
    this.seq += 1; // only once accepted: a refused append leaves no gap
    return response;
  }
}
