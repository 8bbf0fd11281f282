// Writes from the stream view (read-write mode only): append, close, delete, fork, fence and
// trim; and the snapshot (preview, download, bootstrap then go live), which reads.

import { call, Producer, refused } from "../api.js";
import { append, ask, download, h, note, status } from "../dom.js";
import { message } from "../render.js";

const MODES = {
  json: [["one", "One message"], ["lines", "One per line"], ["array", "A JSON array of messages"]],
  text: [["one", "One message"], ["lines", "One per line"]],
  binary: [["one", "One message (text as UTF-8, or a file)"]],
};

/** The JSON body to post for the text typed in `mode`, or a SyntaxError naming the problem. */
export function jsonBody(text, mode) {
  if (mode === "array") {
    const parsed = JSON.parse(text);
    if (!Array.isArray(parsed) || parsed.length === 0) throw new SyntaxError("expected a non-empty JSON array");
    return text;
  }
  const items = mode === "lines" ? text.split(/\r?\n/).filter((line) => line.trim()) : [text];
  items.forEach((item, i) => {
    try {
      JSON.parse(item);
    } catch (error) {
      throw new SyntaxError(mode === "lines" ? `line ${i + 1}: ${error.message}` : error.message);
    }
  });
  return `[${items.join(",")}]`; // the text itself, so numbers keep every digit
}

export function actions(state, view, live) {
  const section = h("section", { "aria-labelledby": "actions-title" }, h("h2", { id: "actions-title" }, "Actions"));
  // A mounted topic's stream has no snapshot, fork, close or delete; appends only if allowed.
  const { mount } = state;
  append(section, !mount && snapshotPanel(state, live));
  if (state.context.mode !== "rw") return section;
  return append(
    section,
    (!mount || mount.appends) && appendForm(state, view),
    !mount && fenceForm(state),
    !mount && trimForm(state),
    !mount && dangerZone(state, view, live),
  );
}

/** `POST {stream}/fence`: later appends must carry the token; this tab's appends then do. */
function fenceForm(state) {
  const token = h("input", { id: "fence-token", required: true, autocomplete: "off", spellcheck: "false", "aria-describedby": "fence-note" });
  const result = h("p", { id: "fence-note", class: "note" }, "Appends without this token (or with another) are then refused with 412.");
  const button = h("button", { id: "fence-send" }, "Fence");
  const form = h(
    "form",
    { id: "fence" },
    h("fieldset", {}, h("legend", {}, "Fence writers"), h("label", { for: "fence-token" }, "Fencing token"), token, button, result),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await call("POST", `${state.path}/fence`, { headers: { "Stream-Fencing-Token": token.value } });
      state.fencingToken = token.value; // the append form sends it from now on
      note(result, "Fenced: appends must now carry this token (this tab's do).", "ok");
    } catch (error) {
      refused(error, button);
      note(result, `Not fenced: ${error.message}`);
    }
  });
  return form;
}

/** `POST {stream}/trim`: remove the messages before an offset, or before a moment. */
function trimForm(state) {
  const offset = h("input", { id: "trim-before", autocomplete: "off", spellcheck: "false", placeholder: "an offset token, or now" });
  const moment = h("input", { id: "trim-at", type: "datetime-local", step: "1" });
  const result = h("p", { id: "trim-note", class: "note" }, "Give an offset or a time. Trimmed messages are gone for every reader; a trim never moves back.");
  const button = h("button", { id: "trim-send", class: "danger" }, "Trim…");
  const form = h(
    "form",
    { id: "trim" },
    h(
      "fieldset",
      {},
      h("legend", {}, "Trim"),
      h("label", { for: "trim-before" }, "Remove messages before offset"),
      offset,
      h("label", { for: "trim-at" }, "or appended before (local time)"),
      moment,
      button,
      result,
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const before = offset.value.trim();
    if (Boolean(before) === Boolean(moment.value)) {
      note(result, "Give either an offset or a time, not both.");
      return;
    }
    const body = before ? { before } : { at: new Date(moment.value).toISOString() };
    const what = before ? `before ${before}` : `appended before ${moment.value.replace("T", " ")}`;
    const answer = await ask(`Trim ${state.stream}?`, h("p", {}, `Messages ${what} are removed for every reader. This cannot be undone.`), "Trim", { danger: true });
    if (answer !== "ok") return;
    try {
      const response = await call("POST", `${state.path}/trim`, { headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      note(result, `Trimmed: the stream now begins at ${response.headers.get("Stream-Earliest-Offset")}.`, "ok");
    } catch (error) {
      refused(error, button);
      note(result, `Not trimmed: ${error.message}`);
    }
  });
  return form;
}

function appendForm(state, view) {
  const producer = new Producer();
  // A mount produces plain records: it refuses producer headers (a retry may write twice).
  const post = state.mount
    ? (body) => call("POST", state.path, { headers: { "Content-Type": state.contentType }, body })
    : (body) => producer.append(state.path, state.contentType, body, fencing(state));
  const text = h("textarea", { id: "append-text", rows: "5", spellcheck: "false", "aria-keyshortcuts": "Control+Enter", "aria-describedby": "append-note" });
  const modes = MODES[state.kind].map(([value, label], i) =>
    h("label", {}, h("input", { type: "radio", name: "append-mode", value, checked: i === 0 }), ` ${label}`),
  );
  const file = state.kind === "binary" ? h("input", { type: "file", id: "append-file" }) : null;
  const result = h("p", { id: "append-note", class: "note" }, "Ctrl+Enter sends.");
  const fieldset = h(
    "fieldset",
    { disabled: state.closed },
    h("legend", {}, `Append (${state.contentType})`),
    h("label", { for: "append-text" }, "Message"),
    text,
    h("div", { role: "radiogroup", "aria-label": "How to split" }, modes),
    file ? h("label", { for: "append-file" }, "Or a file") : null,
    file,
    h("button", { id: "append-send" }, "Send"),
    result,
  );
  const form = h("form", { id: "append" }, fieldset);
  view.addEventListener("stream-closed", () => {
    fieldset.disabled = true;
    note(result, "The stream is closed: nothing more can be appended.", "");
  });

  async function send() {
    const mode = form.querySelector("input[name=append-mode]:checked").value;
    let bodies;
    try {
      if (file?.files.length) bodies = [file.files[0]];
      else if (state.kind === "json") bodies = [jsonBody(text.value, mode)];
      else if (mode === "lines") bodies = text.value.split(/\r?\n/).filter((line) => line !== "");
      else bodies = [text.value];
    } catch (error) {
      note(result, `Not sent: invalid JSON (${error.message})`);
      return;
    }
    let sent = 0;
    try {
      for (const body of bodies) {
        await post(body);
        sent += 1;
      }
      note(result, `Appended (${sent} request${sent === 1 ? "" : "s"}).`, "ok");
      text.value = "";
      if (file) file.value = "";
    } catch (error) {
      const done = sent ? `${sent} of ${bodies.length} lines were appended; ` : "";
      const denied = refused(error, fieldset) ? "this token may not append — " : "";
      note(result, `${done}not appended: ${denied}${error.message}`);
    }
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      send();
    }
  });
  state.context.shortcuts.set("a", () => text.focus());
  return form;
}

/** The fencing token this tab set, for its appends. */
function fencing(state) {
  return state.fencingToken ? { "Stream-Fencing-Token": state.fencingToken } : {};
}

function dangerZone(state, view, live) {
  const result = h("p", { class: "note", id: "danger-note" });
  const closeButton = h("button", { type: "button", id: "close-stream", disabled: state.closed }, "Close stream…");
  view.addEventListener("stream-closed", () => { closeButton.disabled = true; });
  closeButton.addEventListener("click", async () => {
    const answer = await ask(`Close ${state.stream}?`, h("p", {}, "A closed stream accepts no more appends; readers see its end. This cannot be undone."), "Close stream", { danger: true });
    if (!answer) return;
    try {
      await call("POST", state.path, { headers: { "Content-Type": state.contentType, "Stream-Closed": "true" } });
      status("close requested");
    } catch (error) {
      refused(error, closeButton);
      note(result, error.message);
    }
  });

  const deleteButton = h("button", { type: "button", id: "delete-stream", class: "danger" }, "Delete stream…");
  deleteButton.addEventListener("click", async () => {
    const typed = h("input", { id: "confirm-id", autocomplete: "off", spellcheck: "false" });
    const body = h(
      "div",
      {},
      h("p", {}, "Deleting cannot be undone. A stream that forks read from is soft-deleted: it disappears and refuses reads and writes, while its forks keep the history they inherited."),
      h("label", { for: "confirm-id" }, `Type ${state.stream} to confirm`),
      typed,
    );
    const answer = await ask(`Delete ${state.stream}?`, body, "Delete", { danger: true, confirmWhen: () => typed.value === state.stream });
    if (answer !== "ok" || typed.value !== state.stream) return;
    live.stopLive(); // the tail of a deleted stream would answer 404
    try {
      await call("DELETE", state.path);
      location.hash = `#/b/${encodeURIComponent(state.bucket)}`;
    } catch (error) {
      refused(error, deleteButton);
      note(result, error.message);
      if (!state.closed) live.startLive(state.offset);
    }
  });

  const forkButton = h("button", { type: "button", id: "fork-stream" }, "Fork from here…");
  forkButton.addEventListener("click", async () => {
    const id = h("input", { id: "fork-id", required: true, autocomplete: "off", value: `${state.stream}-fork` });
    const offset = h("input", { id: "fork-offset", value: state.offset === "-1" ? "" : state.offset, spellcheck: "false" });
    const body = h(
      "div",
      { class: "grid" },
      h("label", { for: "fork-id" }, "New stream id"),
      id,
      h("label", { for: "fork-offset" }, "Fork at offset (empty: the tail)"),
      offset,
    );
    if ((await ask(`Fork ${state.stream}`, body, "Fork")) !== "ok") return;
    const headers = { "Stream-Forked-From": state.path };
    if (offset.value.trim()) headers["Stream-Fork-Offset"] = offset.value.trim();
    try {
      await call("PUT", `/${encodeURIComponent(state.bucket)}/${encodeURIComponent(id.value)}`, { headers });
      location.hash = `#/s/${encodeURIComponent(state.bucket)}/${encodeURIComponent(id.value)}`;
    } catch (error) {
      refused(error, forkButton);
      note(result, error.message);
    }
  });
  return h("div", { class: "danger-zone" }, h("h3", {}, "Stream"), forkButton, " ", closeButton, " ", deleteButton, result);
}

function snapshotPanel(state, live) {
  const result = h("p", { class: "note", id: "snapshot-note" });
  const button = h("button", { type: "button", id: "snapshot" }, "Latest snapshot");
  const panel = h("div", { class: "snapshot" }, h("h3", {}, "Snapshot"), button, result);
  button.addEventListener("click", async () => {
    let response;
    try {
      response = await call("GET", `${state.path}/snapshot`);
    } catch (error) {
      note(result, error.status === 404 ? "This stream has no snapshot." : error.message, error.status === 404 ? "" : "error");
      return;
    }
    const at = response.headers.get("Stream-Snapshot-Offset");
    const bytes = new Uint8Array(await response.arrayBuffer());
    note(result, `Snapshot at ${at}: ${bytes.length} bytes (${response.headers.get("Content-Type")}).`, "");
    const save = h("button", { type: "button", onclick: () => download(`${state.stream}-snapshot-${at}`, [bytes], "application/octet-stream") }, "Download");
    const bootstrap = h("button", { type: "button", id: "bootstrap" }, "Bootstrap, then go live");
    bootstrap.addEventListener("click", () => {
      live.stopLive();
      live.clearView();
      const text = new TextDecoder().decode(bytes);
      const kind = state.kind === "binary" ? "binary" : state.kind;
      live.add(message(kind, kind === "binary" ? bytes : text, 0, at));
      live.flush();
      state.offset = at;
      live.startLive(at);
      status(`bootstrapped from the snapshot at ${at}; live from there`);
    });
    panel.querySelectorAll(".snapshot-actions").forEach((el) => el.remove());
    panel.append(h("p", { class: "snapshot-actions" }, save, " ", bootstrap));
  });
  return panel;
}
