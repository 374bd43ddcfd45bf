// Rule events as chat messages (the world's "chat messages" setting): the
// few events a table follows (a change of condition, a roll with its DC, PP
// spent or lost), as one line each, every server value escaped. The texts
// are lang/*.json's VTTSYNC.Chat.*; the event fields are the server's
// (docs/operations.md, "Events").

import { escapeHtml, num } from "./html.mjs";
import { CONDITIONS as CONDITION_LIST, MODULE_ID } from "./names.mjs";

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */

const CONDITIONS = new Set(CONDITION_LIST);
const CHECKS = new Set(["medicine", "constitution"]);
const OUTCOMES = new Set(["success", "failure", "wake", "stay", "die"]);

/** @param {VttSync.RoomState | null | undefined} state @param {unknown} id */
function nameOf(state, id) {
  return state?.characters?.[String(id)]?.name ?? String(id ?? "?");
}

/**
 * One event as the HTML of a chat message, or null for the events not
 * shown. `t(key, data)` formats a text (its result is escaped: data values
 * may come from the server).
 * @param {VttSync.Event | null | undefined} event @param {VttSync.RoomState | null | undefined} state
 * @param {(key: string, data?: Record<string, unknown>) => string} t @returns {string | null}
 */
export function eventHtml(event, state, t) {
  if (!event || typeof event !== "object") return null;
  const name = nameOf(state, event.char);
  let text = null;
  if (event.kind === "condition" && CONDITIONS.has(String(event.to))) {
    text = t(`Chat.Condition.${String(event.to)}`, { name });
  } else if (event.kind === "roll" && CHECKS.has(String(event.check))) {
    const mod = (Number(event.mod) || 0) + (Number(event.bonus) || 0);
    const data = {
      name,
      check: t(`Chat.Check.${String(event.check)}`),
      patient: event.patient ? nameOf(state, event.patient) : "",
      d20: num(event.d20),
      mod: mod >= 0 ? `+${num(mod)}` : num(mod),
      total: num(event.total),
      dc: event.dc === null || event.dc === undefined ? "" : num(event.dc),
      outcome: t(`Chat.Outcome.${OUTCOMES.has(String(event.outcome)) ? String(event.outcome) : "failure"}`),
    };
    const key = data.dc ? (data.patient ? "RollForDc" : "RollDc") : "Roll";
    text = t(`Chat.${key}`, data);
  } else if (event.kind === "pp" && Number(event.delta) < 0) {
    text = t("Chat.Pp", { name, amount: num(-Number(event.delta)) });
  }
  return text === null ? null : `<p class="vtt-sync-chat">${escapeHtml(text)}</p>`;
}

/** Rule events as chat messages (opt-in, per world): the story where the
 * table already reads it. Posted by the automation client only. */
export class Chat {
  /** @param {VttSyncModule} mod */
  constructor(mod) {
    this.mod = mod;
  }

  /** @param {VttSync.Patch} patch */
  post(patch) {
    const mod = this.mod;
    const state = mod.client?.state;
    const ChatMessage = mod.env.ChatMessage;
    if (!state || !ChatMessage?.create) return;
    for (const event of patch.events || []) {
      const content = eventHtml(event, state, (key, data) => mod.t(key, data));
      if (!content) continue;
      Promise.resolve(
        ChatMessage.create({
          content,
          speaker: { alias: "vtt-sync" },
          flags: { [MODULE_ID]: { room: mod.room, v: patch.v, kind: event.kind } },
        }),
      ).catch((err) => mod.report(err));
    }
  }
}
