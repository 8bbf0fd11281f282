// The console's entry: the mode, the hash router (#/, #/b/{bucket}, #/s/{bucket}/{stream}).

import { getJSON, setToken, token } from "./api.js";
import { append, ask, clear, h, status } from "./dom.js";
import { bucketsView } from "./views/buckets.js";
import { streamView } from "./views/stream.js";
import { streamsView } from "./views/streams.js";

const context = { mode: "ro", cleanup: null, shortcuts: new Map(), generation: 0 };

export function route() {
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(query) };
}

export function link(parts, params = null) {
  const path = parts.map(encodeURIComponent).join("/");
  const query = params && params.toString() ? `?${params}` : "";
  return `#/${path}${query}`;
}

function crumbs(parts) {
  const list = clear(document.getElementById("crumbs"));
  list.append(h("li", {}, h("a", { href: "#/" }, "Buckets")));
  if (parts[0] === "b" || parts[0] === "s") {
    list.append(h("li", {}, h("a", { href: link(["b", parts[1]]) }, parts[1])));
  }
  if (parts[0] === "s") list.append(h("li", { "aria-current": "page" }, parts[2]));
}

async function render() {
  context.cleanup?.();
  context.cleanup = null;
  context.shortcuts.clear();
  context.generation += 1; // a view still loading for an older route must not start reading
  const { parts, params } = route();
  crumbs(parts);
  const view = clear(document.getElementById("view"));
  try {
    if (parts[0] === "b" && parts.length === 2) {
      await streamsView(view, parts[1], params, context);
    } else if (parts[0] === "s" && parts.length === 3) {
      await streamView(view, parts[1], parts[2], params, context);
    } else {
      await bucketsView(view, context);
    }
  } catch (error) {
    append(view, h("p", { class: "note error", role: "alert" }, error.message));
  }
  if (!view.contains(document.activeElement)) view.focus({ preventScroll: true });
}

// Under auth: a 401 anywhere asks for a bearer token, then the view is drawn again with it.
let asking = null;
function signIn() {
  const button = document.getElementById("sign-in");
  button.hidden = false;
  if (asking) return;
  const field = h("input", { id: "token", type: "password", autocomplete: "off", value: token() });
  const body = h(
    "div",
    {},
    h("p", {}, "Sent as Authorization: Bearer with every request; kept in this tab only. Empty: sign out."),
    h("label", { for: "token" }, "Bearer token"),
    field,
  );
  asking = ask("Sign in", body, "Sign in").then((answer) => {
    asking = null;
    if (answer !== "ok") return;
    setToken(field.value.trim());
    button.textContent = token() ? "Change token" : "Sign in";
    render();
  });
}

function onKey(event) {
  if (!document.getElementById("shortcuts").checked) return;
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target.closest("input, textarea, select, dialog, [contenteditable]")) return;
  const action = context.shortcuts.get(event.key);
  if (action) {
    event.preventDefault();
    action();
  }
}

async function start() {
  const shortcuts = document.getElementById("shortcuts");
  shortcuts.checked = localStorage.getItem("console.shortcuts") !== "off";
  shortcuts.addEventListener("change", () => {
    localStorage.setItem("console.shortcuts", shortcuts.checked ? "on" : "off");
  });
  try {
    context.mode = (await getJSON("/ui/api/config")).mode;
  } catch (error) {
    status(`cannot read the console's mode: ${error.message}`);
  }
  document.getElementById("mode").textContent = context.mode === "rw" ? "read-write" : "read-only";
  document.body.dataset.mode = context.mode;
  const signInButton = document.getElementById("sign-in");
  signInButton.addEventListener("click", signIn);
  signInButton.hidden = !token();
  if (token()) signInButton.textContent = "Change token";
  window.addEventListener("unauthorized", signIn);
  document.addEventListener("keydown", onKey);
  window.addEventListener("hashchange", render);
  await render();
}

start();
