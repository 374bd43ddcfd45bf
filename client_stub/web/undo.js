// The GM's undo: offered from what the server says an undo would revert now
// (the `undo` affordance), asked first with the events it reverts, and said
// once done.

import { run } from "./commands.js";
import { $ } from "./dom.js";
import { sentence } from "./log.js";
import { confirmDialog, toast } from "./notices.js";
import { affordances, page, userName } from "./page.js";

/** The undo button, from what the server says an undo would revert now. */
export function renderUndo() {
  const btn = $("#undo");
  if (!btn) return;
  const undo = affordances().undo;
  btn.hidden = !undo;
  btn.disabled = !undo || "why" in undo;
  btn.title = !undo ? "" : undo.why ? page.eventText.reason(undo.why) : `Reverts v${undo.v}: ${undoPhrase(undo)}`;
  btn.dataset.undo = undo && !undo.why ? String(undo.v) : "";
}

/** What the undo would revert, in words ("Bastien's first aid on Chloe"). */
export function undoPhrase(undo) {
  return page.eventText.command(undo.op, page.patchEvents.get(undo.v)) ?? `version ${undo.v} by ${userName(undo.by)}`;
}

/** Undo the latest command, once the GM confirms. */
export async function onUndo(btn) {
  const undo = affordances().undo;
  if (!undo || undo.why) return;
  const events = page.patchEvents.get(undo.v) || [];
  const title = `Undo ${undoPhrase(undo)}?`;
  const lines = events.length
    ? events.map(sentence)
    : ["It is reverted as a new version; undo again to walk further back."];
  if (!(await confirmDialog(title, lines, "Undo"))) return;
  const ack = await run("undo", {}, btn);
  if (!ack) return;
  const ev = (page.patchEvents.get(ack.v) || []).find((e) => e.kind === "undo");
  toast("ok", ev ? sentence(ev) : `Undid version ${ack.result?.undone}`, "");
}
