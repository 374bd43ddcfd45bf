// Foundry's combat tracker against the server's combat, as pure functions.
//
// Foundry's turn order (`combat.turns`) may hold combatants that are not in
// the room (monsters nobody linked); the server's order holds the linked
// ones, in Foundry's order. A Foundry position (round, index) whose
// combatant is linked is one server turn; the others are not the server's
// business. So moving Foundry's tracker from one position to another ends
// (or, going back, un-ends) exactly the linked turns walked over.

/** A walk longer than this is a jump (a GM typing a round number), not
 * turns being played: the module refuses to replay it turn by turn. */
export const MAX_WALK = 400;

/** A place in Foundry's tracker: a round and an index in its turns.
 * @typedef {{round: number, index: number}} Position */
/** A server turn: whose, in which server round.
 * @typedef {{char: string, round: number}} ServerTurn */
/** The server character of each of Foundry's turns (null: not linked).
 * @typedef {Array<string | null>} Chars */

/** Ids the module gives its commands, derived from the Foundry event so
 * that two GM tabs, or a hook fired twice, send the same id (the server
 * applies an id once per user). The `@v` suffix is the room version the
 * command is based on, so the same turn ended again after an undo is a new
 * command and not a duplicate of the undone one. */
/** @param {string} combatId @param {number} round @param {number} index @param {string} char @param {number | null} v */
export function turnId(combatId, round, index, char, v) {
  return `turn:${combatId}:${round}.${index}:${char}@${v}`;
}

/** @param {number} from @param {number} to @param {number | null} v */
export function clockId(from, to, v) {
  return `clock:${from}->${to}@${v}`;
}

/** A short stable hash (FNV-1a, 32 bits) for ids naming a whole order.
 * @param {string} text */
export function hash(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}

/** @param {string} combatId @param {string[]} order @param {number | null} v */
export function orderId(combatId, order, v) {
  return `order:${combatId}:${hash(order.join(","))}@${v}`;
}

/**
 * The server order Foundry's tracker implies: the characters of the linked
 * combatants, in Foundry's turn order, each once (several tokens of one
 * linked actor are one character), among those the server accepts in an
 * order now. The server says which (`state.affordances.room`: `set_order`'s
 * `choices.order` while a combat runs, `combat_start`'s before; its rules
 * decide, e.g. that the dead cannot join a combat, D6); no rule is worked
 * out here. A server that sends no affordances gets every linked character
 * (and refuses what its rules refuse).
 * @param {Chars} chars the server character of each Foundry turn (null: not linked)
 * @param {VttSync.RoomState | null | undefined} state the server's room state (as the GM sees it)
 * @returns {string[]}
 */
export function linkedOrder(chars, state) {
  const room = state?.affordances?.room;
  const offer = room ? (state.combat ? room.set_order : room.combat_start) : undefined;
  const accepted = room ? new Set(offer?.choices?.order ?? []) : null;
  /** @type {string[]} */
  const out = [];
  for (const char of chars) {
    if (!char || out.includes(char) || !state?.characters?.[char]) continue;
    if (accepted && !accepted.has(char)) continue;
    out.push(char);
  }
  return out;
}

/** -1, 0 or 1: Foundry position a before, at, or after b.
 * @param {Position} a @param {Position} b */
export function comparePositions(a, b) {
  if (a.round !== b.round) return a.round < b.round ? -1 : 1;
  if (a.index !== b.index) return a.index < b.index ? -1 : 1;
  return 0;
}

/**
 * The positions walked over going forward from `from` (included) to `to`
 * (excluded) in a tracker of `length` turns; null if the walk is longer
 * than MAX_WALK.
 * @param {number} length @param {Position} from @param {Position} to @returns {Position[] | null}
 */
export function walk(length, from, to) {
  if (length <= 0 || comparePositions(from, to) >= 0) return [];
  const steps = (to.round - from.round) * length + (to.index - from.index);
  if (steps > MAX_WALK) return null;
  const out = [];
  let { round, index } = from;
  for (let i = 0; i < steps; i++) {
    out.push({ round, index });
    index += 1;
    if (index >= length) {
      index = 0;
      round += 1;
    }
  }
  return out;
}

/**
 * Where the server's turn should be for Foundry's position `at`: the first
 * linked combatant at or after it in this round, else the first linked one
 * of the next round (the server's round ends with its last linked
 * combatant). `offset` is Foundry's round minus the server's (0 unless the
 * server's combat started after Foundry's, see turns.mjs).
 * @param {Chars} chars @param {string[]} order @param {Position} at @param {number} [offset]
 * @returns {ServerTurn | null}
 */
export function expectedTurn(chars, order, at, offset = 0) {
  const keep = new Set(order);
  for (let i = Math.max(0, at.index); i < chars.length; i++) {
    const char = chars[i];
    if (char !== null && keep.has(char)) return { char, round: at.round - offset };
  }
  if (!order.length) return null;
  return { char: order[0], round: at.round - offset + 1 };
}

/** The server turns (char, server round) that the Foundry positions hold, in order.
 * @param {Chars} chars @param {string[]} order @param {Position[]} positions @param {number} [offset]
 * @returns {Array<ServerTurn & {index: number}>} */
export function linkedTurns(chars, order, positions, offset = 0) {
  const keep = new Set(order);
  /** @type {Array<ServerTurn & {index: number}>} */
  const out = [];
  for (const p of positions) {
    const char = chars[p.index];
    if (char != null && keep.has(char)) out.push({ char, round: p.round - offset, index: p.index });
  }
  return out;
}

/**
 * Is the server's turn `server` ({char, round}) behind Foundry's expected
 * one, in Foundry's order? A server turn whose character Foundry no longer
 * shows is not comparable (null).
 * @param {Chars} chars @param {ServerTurn} server @param {ServerTurn} expected @returns {boolean | null}
 */
export function serverBehind(chars, server, expected) {
  const si = chars.indexOf(server.char);
  const ei = chars.indexOf(expected.char);
  if (si < 0 || ei < 0) return null;
  return comparePositions({ round: server.round, index: si }, { round: expected.round, index: ei }) < 0;
}

/**
 * One step back in the tracker: an undo, if what the server says this
 * viewer's undo reverts now (`state.affordances.undo`: {v, op, by} or
 * {why}) is the end of a turn; else why not ("not_last": undo would revert
 * something else; "undo": the server refuses undo, with its reason). The
 * module asks again after each step, from the fresh affordances: the
 * server alone knows what undo reverts.
 * @param {VttSync.Affordances | undefined} affordances
 * @returns {{ok: true, v: number} | {ok: false, reason: "undo" | "not_last", why?: VttSync.Why, v?: number}}
 */
export function undoStep(affordances) {
  const undo = affordances?.undo;
  if (!undo || undo.why) return { ok: false, reason: "undo", why: undo?.why };
  if (undo.op !== "end_turn" || undo.v === undefined) return { ok: false, reason: "not_last", v: undo.v };
  return { ok: true, v: undo.v };
}
