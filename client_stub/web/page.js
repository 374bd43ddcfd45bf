// The table page's one mutable state, which its modules (cards, combat,
// setup, log...) share: nothing else in them changes between renders. And
// the reads of it every module needs: who the viewer is, what the server
// offers them now (its affordances), names, the table's order.

import { Names } from "./event-text.js";

/** What the page holds between renders. */
export const page = {
  /** The connection and its mirror of the room (null before the link is read).
   * @type {import("./vtt-sync-client.js").VttSyncClient} */
  client: null,
  /** Events as sentences (events.json), once it is loaded.
   * @type {import("./event-text.js").EventText} */
  eventText: null,
  names: new Names(), // names by id, kept after people leave
  /** @type {Map<number, object[]>} version -> its events (history and live) */
  patchEvents: new Map(),
  /** @type {Set<number>} versions undone since */
  undone: new Set(),
  /** @type {Map<string, HTMLElement>} char id -> its card */
  cards: new Map(),
  /** The GM's combat setup: the order being made ([{id, on}]) and the
   * initiative bonus given to each character (T4), kept for re-rolls. */
  combatSetup: { order: null, bonus: {} },
  /** The GM's edits of a running combat: the panel in edit mode, the
   * natural d20s typed for an initiative, the combatant being dragged. */
  combatEdit: { on: false, d20: {}, dragging: null },
  /** Table setup: opened once on arrival, folded once play starts, and the
   * character the form edits (null: a new one). */
  tableSetup: { opened: false, folded: false, editing: null },
  /** Where invitation links point (links.json, the server's --public-url). */
  links: { publicPage: null, read: Promise.resolve() },
  commandsSent: 0, // numbers the commands' ids
  fieldMarks: 0, // numbers the messages beside refused fields (fields.js)
  /** Draws the page again from the mirror (set by app.js). */
  render: () => {},
};

// --- the viewer and what the server offers them -------------------------------

export function isGM() {
  return page.client?.role === "gm";
}

/** Is this character the user's to play (their own; the GM's own NPCs for the GM)? */
export function isMine(c) {
  return (!!c.owner && c.owner === page.client.user) || (isGM() && !c.owner);
}

/** This viewer's affordances: {chars, room, undo}, empty from a server that predates them. */
export function affordances() {
  return page.client?.state?.affordances ?? { chars: {}, room: {}, undo: null };
}

/** The actions offered for one character: {op: entry}. */
export function affordancesOf(id) {
  return affordances().chars?.[id] ?? {};
}

/** The room's action `op` when it can be sent now, else null. */
export function roomAction(op) {
  const entry = affordances().room?.[op];
  return entry && !entry.why ? entry : null;
}

/** Can this viewer end `id`'s turn now (the server's affordance)? */
export function mayEndTurn(id) {
  const entry = id ? affordancesOf(id).end_turn : null;
  return !!entry && !entry.why;
}

// --- views -------------------------------------------------------------------
// Each character has `shown` (full | status | hidden). A viewer who may see
// only the status of a character gets name, owner, shown, level and condition,
// nothing else; a hidden one is absent from their state, and `combat.turn` is
// null while it acts (docs/views.md).

/** Does this viewer see the character at the status level only (no numbers)?
 * Read from what the state holds: the GM and the owner see a `status` one in full. */
export function numbersHidden(c) {
  return !("pv_max" in c);
}

/** The id whose turn it is; null without combat or while someone unseen acts. */
export function currentOf(combat) {
  if (!combat) return null;
  const t = combat.turn;
  return Number.isInteger(t) && t >= 0 && t < combat.order.length ? combat.order[t] : null;
}

/** The table's order: by seq, which a status character lacks; then by the
 * number of its id (c<n>, handed out in that order), then by name and id. */
function seqOf(id, c) {
  if (Number.isInteger(c.seq)) return c.seq;
  const m = /(\d+)$/.exec(id);
  return m ? Number(m[1]) : Number.POSITIVE_INFINITY;
}

export function byTableOrder([ida, a], [idb, b]) {
  const sa = seqOf(ida, a);
  const sb = seqOf(idb, b);
  if (sa !== sb) return sa < sb ? -1 : 1;
  return String(a.name).localeCompare(String(b.name)) || (ida < idb ? -1 : ida > idb ? 1 : 0);
}

export function charName(id) {
  return page.names.char(id);
}

export function userName(id) {
  return id ? page.names.user(id) : "—";
}
