// Element building with text only: content is set with textContent, never parsed as HTML.

/** h("button", {type: "button", onclick}, "Label", child) */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "text") el.textContent = String(value);
    else if (key === "value" || key === "checked" || key === "disabled") el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  return append(el, ...children);
}

/**
 * Add children to `el` as h() does: null, undefined and false are nothing (so `cond && node`
 * and `cond ? node : null` can be passed), arrays are spread, strings become text. Views use
 * this, never Element.append, which would show a null as the text "null".
 */
export function append(el, ...children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

/** A throttled polite status line: the latest message, at most once a second. */
let pendingStatus = null;
let statusTimer = 0;
export function status(message) {
  pendingStatus = message;
  if (statusTimer) return;
  flushStatus();
  statusTimer = setTimeout(() => {
    statusTimer = 0;
    if (pendingStatus !== null) flushStatus();
  }, 1000);
}
function flushStatus() {
  document.getElementById("status").textContent = pendingStatus;
  pendingStatus = null;
}

/** An inline error (or success) line for a form. */
export function note(el, message, kind = "error") {
  el.textContent = message;
  el.className = `note ${kind}`;
}

export function download(name, parts, type) {
  const url = URL.createObjectURL(new Blob(parts, { type }));
  const link = h("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A modal <dialog>; resolves with the submit button's value, or "" when cancelled. */
export function ask(title, body, confirmLabel, { danger = false, confirmWhen = null } = {}) {
  const confirm = h("button", { value: "ok", class: danger ? "danger" : "" }, confirmLabel);
  // Cancel is no submit button: Enter in a field submits with the confirm button.
  const cancel = h("button", { type: "button", onclick: () => dialog.close("") }, "Cancel");
  const dialog = h(
    "dialog",
    { "aria-labelledby": "dialog-title" },
    h(
      "form",
      { method: "dialog" },
      h("h2", { id: "dialog-title" }, title),
      body,
      h("menu", {}, cancel, confirm),
    ),
  );
  if (confirmWhen) {
    const update = () => { confirm.disabled = !confirmWhen(); };
    dialog.addEventListener("input", update);
    update();
  }
  document.body.append(dialog);
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(dialog.returnValue);
    });
  });
}
