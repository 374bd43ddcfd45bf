// Commands sent from the page: one `run` for every button, which disables
// the button while it waits, counts the clicks waiting for the server, and
// says what went wrong in plain words (a toast: its title the error code in
// words, its text the server's message).

import { $ } from "./dom.js";
import { markField, refusedArg } from "./fields.js";
import { describeEvent } from "./log.js";
import { toast } from "./notices.js";
import { page } from "./page.js";

const idPrefix = `page-${crypto.getRandomValues(new Uint32Array(1))[0].toString(16)}`;

// Error codes in plain words (the toast's title; its text is the server's message).
const ERROR_TITLES = {
  invalid_args: "Check the values",
  not_found: "Not found",
  forbidden: "Not allowed",
  conflict: "Someone was quicker",
  rule: "The rules say no",
  rate_limited: "Too many clicks",
  unknown_op: "Unknown command",
  bad_frame: "Bad message",
  internal: "Server trouble: try again",
  timeout: "No answer from the server",
  expired: "Not sent",
};

export function errorToast(code, message) {
  toast("error", ERROR_TITLES[code] ?? "Refused", message, code);
}

// A click while the server is unreachable waits (the top bar counts them)
// this long at most; then, if it never left the page, it is dropped and
// says so. One sent before the connection dropped waits for its answer:
// the server may have applied it, and the retry's ack tells.
// (a test shortens it through window.vttWaitExpiresMs)
const WAIT_EXPIRES_MS = () => /** @type {any} */ (window).vttWaitExpiresMs ?? 30000;

export function showWaiting() {
  const client = page.client;
  const n = client ? client.pendingCommands.length : 0;
  const pill = $("#waiting");
  pill.hidden = n === 0 || client.connected;
  pill.textContent = `${n} action${n === 1 ? "" : "s"} waiting`;
  pill.title = "Sent when the server answers again; dropped if it does not come back soon";
}

/** Send `op`; its ack, or null when refused (said in a toast). `button` is
 * disabled while it waits; `result` (a card's box) shows what it did;
 * `fieldOf(path)` gives the field holding an argument, marked if refused. */
export async function run(op, args, button, { result = null, fieldOf = null } = {}) {
  const client = page.client;
  if (!client) return null;
  if (button) button.disabled = true;
  const id = `${idPrefix}-${++page.commandsSent}`;
  const waited = !client.connected;
  const expiry = setTimeout(() => client.withdraw(id), WAIT_EXPIRES_MS());
  try {
    const promise = client.command(op, args, { id });
    showWaiting();
    const ack = await promise;
    if (result) showResult(result, ack);
    if (waited) toast("ok", "Done", `${opWords(op)}: applied once the server answered`);
    return ack;
  } catch (err) {
    if (err.code === "expired") {
      errorToast("expired", `${opWords(op)}: the server did not answer in time; nothing changed`);
    } else {
      errorToast(err.code || "error", err.serverMessage || err.message);
      const arg = fieldOf ? refusedArg(err.serverMessage) : null;
      const field = arg ? fieldOf(arg.path) : null;
      if (field) markField(field, arg.words);
    }
    return null;
  } finally {
    clearTimeout(expiry);
    showWaiting();
    if (button) {
      button.disabled = false;
      if (client.state) page.render(); // what may be done now (the button's own state too)
    }
  }
}

function opWords(op) {
  return String(op).replaceAll("_", " ").replace(/^./, (c) => c.toUpperCase());
}

/** What a command did, right where it was asked (a card): its events' sentences. */
function showResult(box, ack) {
  const events = page.patchEvents.get(ack.v) || [];
  box.replaceChildren(...events.map((ev) => describeEvent(ev)));
  box.hidden = events.length === 0;
}
