// Live reads over fetch(): a streaming parser of the SSE framing, and a reader that resumes
// from the last streamNextOffset whenever the server ends a connection.
// (EventSource cannot send an Authorization header nor see Stream-SSE-Data-Encoding.)

import { errorOf, send } from "./api.js";

const LINE_END = /\r\n|\r|\n/g;

/** Feeds text in any slicing; calls onEvent(type, data) per complete event. */
export class SseParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.rest = "";
    this.type = "";
    this.data = [];
  }

  push(text) {
    const buffer = this.rest + text;
    let position = 0;
    LINE_END.lastIndex = 0;
    for (let match = LINE_END.exec(buffer); match; match = LINE_END.exec(buffer)) {
      // A lone CR at the very end may be the first half of a CRLF still in flight.
      if (match[0] === "\r" && match.index === buffer.length - 1) break;
      this.line(buffer.slice(position, match.index));
      position = match.index + match[0].length;
    }
    this.rest = buffer.slice(position);
  }

  line(line) {
    if (line === "") {
      if (this.data.length) this.onEvent(this.type || "message", this.data.join("\n"));
      this.type = "";
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return; // a heartbeat comment
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.type = value;
    else if (field === "data") this.data.push(value);
  }
}

export function base64Bytes(text) {
  const binary = atob(text.replace(/\s/g, ""));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

const RETRY_MS = [250, 500, 1000, 2000, 5000];

/**
 * Tails one stream: on("batch", {data, base64, nextOffset}) per data event (delivered only
 * with its control event, so a cut connection never delivers a batch twice), on("control"),
 * on("closed"), on("error", ApiError) for a refusal that retrying cannot mend.
 */
export class LiveReader {
  constructor(path, offset, handlers) {
    this.path = path;
    this.offset = offset;
    this.handlers = handlers;
    this.connections = 0;
    this.upToDate = false;
    this.stopped = false;
    this.abort = null;
  }

  stop() {
    this.stopped = true;
    if (this.abort) this.abort.abort();
  }

  async run() {
    let failures = 0;
    while (!this.stopped) {
      const outcome = await this.connect().catch((error) => {
        if (this.stopped) return "stopped";
        this.handlers.status?.(`live connection lost (${error.message}); retrying`);
        return "retry";
      });
      if (outcome === "closed" || outcome === "fatal" || outcome === "stopped") return;
      failures = outcome === "retry" ? failures + 1 : 0;
      if (failures) await new Promise((r) => setTimeout(r, RETRY_MS[Math.min(failures, 5) - 1]));
    }
  }

  async connect() {
    this.abort = new AbortController();
    const url = `${this.path}?offset=${encodeURIComponent(this.offset)}&live=sse`;
    this.connections += 1;
    const response = await send(url, { signal: this.abort.signal });
    if (!response.ok) {
      const error = await errorOf(response);
      if (response.status === 503) return "retry";
      this.handlers.error?.(error);
      return "fatal";
    }
    const base64 = response.headers.get("Stream-SSE-Data-Encoding") === "base64";
    let pending = null;
    let closed = false;
    let controls = 0;
    const parser = new SseParser((type, data) => {
      if (type === "data") {
        pending = data;
      } else if (type === "control") {
        const control = JSON.parse(data);
        controls += 1;
        if (pending !== null) this.handlers.batch({ data: pending, base64, control, start: this.offset });
        pending = null;
        this.offset = control.streamNextOffset;
        this.upToDate = control.upToDate === true;
        this.handlers.control?.(control);
        closed ||= control.streamClosed === true;
      }
    });
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(value);
      if (closed) {
        this.abort.abort(); // the closing event is the last: nothing more to read
        this.handlers.closed?.();
        return "closed";
      }
    }
    if (this.stopped) return "stopped";
    return controls > 0 ? "ended" : "retry"; // ended with nothing said: back off before again
  }
}
