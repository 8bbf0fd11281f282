// JSON text handled as text: every number keeps its exact digits (JSON.parse would round).

function endOfString(text, start) {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === '"') return i;
  }
  throw new SyntaxError("unterminated string");
}

const SPACE = /\s/;

/** The top-level elements of a JSON array, each as its own exact text. */
export function splitArray(text) {
  let i = 0;
  while (SPACE.test(text[i])) i++;
  if (text[i] !== "[") throw new SyntaxError("not a JSON array");
  const out = [];
  let depth = 0;
  let start = -1;
  for (i += 1; i < text.length; i++) {
    const c = text[i];
    if (SPACE.test(c)) continue;
    if (depth === 0 && (c === "," || c === "]")) {
      if (start >= 0) out.push(text.slice(start, i).trim());
      start = -1;
      if (c === "]") return out;
      continue;
    }
    if (start < 0) start = i;
    if (c === '"') i = endOfString(text, i);
    else if (c === "[" || c === "{") depth++;
    else if (c === "]" || c === "}") depth--;
  }
  throw new SyntaxError("unterminated array");
}

/** Re-spaced JSON (indent 0 gives it minified); tokens are copied verbatim. */
export function reformat(text, indent = 2) {
  let out = "";
  let level = 0;
  const newline = () => (indent ? `\n${" ".repeat(indent * level)}` : "");
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      const end = endOfString(text, i);
      out += text.slice(i, end + 1);
      i = end;
    } else if (SPACE.test(c)) {
      continue;
    } else if (c === "{" || c === "[") {
      let j = i + 1;
      while (SPACE.test(text[j])) j++;
      if (text[j] === (c === "{" ? "}" : "]")) {
        out += c + text[j];
        i = j;
      } else {
        level++;
        out += c + newline();
      }
    } else if (c === "}" || c === "]") {
      level--;
      out += newline() + c;
    } else if (c === ",") {
      out += `,${newline()}`;
    } else if (c === ":") {
      out += indent ? ": " : ":";
    } else {
      out += c;
    }
  }
  return out;
}
