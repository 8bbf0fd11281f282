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

export async function call(method, path, { headers = {}, body, signal } = {}) {
  const response = await fetch(path, { method, headers, body, signal, cache: "no-store" });
  if (!response.ok) throw await errorOf(response);
  return response;
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
