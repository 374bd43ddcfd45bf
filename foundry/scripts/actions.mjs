// What a player may do for one character: the buttons of the sheet's
// vtt-sync panel, read from what the server says this user may do now
// (`state.affordances`, kept current by the patches: docs/protocol.md).
// No rule is worked out here: the server's rules decide, and every button
// shown is a command the server accepts now.

/** Button labels (lang/en.json, VTTSYNC.Action.<key>) of each op.
 * @type {Record<string, string>} */
const KEYS = {
  first_aid: "FirstAid",
  tend: "Tend",
  untend: "Untend",
  stop_rest: "StopRest",
  stabilize: "Stabilize",
  stay_in_fight: "StayInFight",
};
/** @type {Record<string, string>} */
const REST_KEYS = { short: "RestShort", night: "RestNight", bed: "RestBed" };

/** The order of the panel's buttons. */
const ORDER = ["first_aid", "tend", "untend", "stop_rest", "rest", "stabilize", "stay_in_fight"];

/** A button of the panel: the op and its arguments, the label's key, the
 * other character's name when there is one.
 * @typedef {{op: string, args: Record<string, unknown>, key: string, name?: string}} Action */

/**
 * The actions available to the character `id` now: [{op, args, key, name?}],
 * `key` naming the button's label, `name` the other character concerned.
 * Stopping a tending is offered on the patient's sheet and on its healer's.
 * @param {VttSync.RoomState | null | undefined} state @param {string} id @returns {Action[]}
 */
export function availableActions(state, id) {
  const c = state?.characters?.[id];
  const chars = state?.affordances?.chars;
  if (!c || !chars) return [];
  const mine = chars[id] ?? {};
  /** @param {unknown} cid */
  const nameOf = (cid) => state.characters[String(cid)]?.name ?? String(cid);
  /** @type {Action[]} */
  const out = [];
  for (const op of ORDER) {
    if (op === "untend") {
      for (const [pid, ops] of Object.entries(chars)) {
        const entry = ops?.untend;
        const patient = state.characters[pid];
        if (!entry || entry.why || !patient || (pid !== id && patient.healer !== id)) continue;
        out.push({ op, args: { ...entry.args }, key: KEYS.untend, name: patient.name });
      }
      continue;
    }
    const entry = mine[op];
    if (!entry || entry.why) continue;
    if (op === "rest") {
      for (const kind of entry.choices?.kind ?? []) {
        out.push({ op, args: { ...entry.args, kind }, key: REST_KEYS[String(kind)] ?? "Rest" });
      }
    } else if (entry.choices?.patient) {
      for (const pid of entry.choices.patient) {
        out.push({ op, args: { ...entry.args, patient: pid }, key: KEYS[op], name: nameOf(pid) });
      }
    } else {
      out.push({ op, args: { ...entry.args }, key: KEYS[op] });
    }
  }
  return out;
}
