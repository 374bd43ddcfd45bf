// Foundry's tracker against the server's combat: the pure planning functions.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  MAX_WALK,
  expectedTurn,
  linkedOrder,
  linkedTurns,
  serverBehind,
  turnId,
  undoStep,
  walk,
} from "../scripts/combat.mjs";

const state = {
  combat: { order: ["a", "d"], turn: 0, round: 1 },
  characters: {
    a: { condition: "conscious" },
    b: { condition: "dead" },
    c: { condition: "dying" },
    d: { condition: "dead" },
  },
  // What the server accepts in set_order now (rules/affordances.py): d is
  // dead but in the order, it may stay; b is dead and new, it may not (D6).
  affordances: { room: { set_order: { args: {}, choices: { order: ["a", "c", "d"] } } } },
};

test("linkedOrder: linked combatants in Foundry's order, once each, among those the server's set_order accepts", () => {
  assert.deepEqual(linkedOrder(["a", null, "b", "c", "a", "d", "zz"], state), ["a", "c", "d"]); // zz is not in the room
  // Before a combat: combat_start's choices; nobody may join: nobody.
  const before = { ...state, combat: null, affordances: { room: { combat_start: { args: {}, choices: { order: ["c"] } } } } };
  assert.deepEqual(linkedOrder(["a", "c"], before), ["c"]);
  const none = { ...before, affordances: { room: { combat_start: { args: {}, why: { key: "combat_start_nobody" } } } } };
  assert.deepEqual(linkedOrder(["a", "c"], none), []);
  // A server without affordances: every linked character (its rules refuse the rest).
  assert.deepEqual(linkedOrder(["a", "b"], { characters: state.characters }), ["a", "b"]);
});

test("walk: the positions passed over, wrapping rounds; a jump over MAX_WALK is refused", () => {
  assert.deepEqual(walk(3, { round: 1, index: 1 }, { round: 2, index: 1 }), [
    { round: 1, index: 1 },
    { round: 1, index: 2 },
    { round: 2, index: 0 },
  ]);
  assert.deepEqual(walk(3, { round: 2, index: 1 }, { round: 2, index: 1 }), []);
  assert.deepEqual(walk(3, { round: 2, index: 1 }, { round: 1, index: 0 }), []);
  assert.equal(walk(2, { round: 1, index: 0 }, { round: 1 + MAX_WALK, index: 0 }), null);
});

test("expectedTurn: the next linked combatant at or after Foundry's turn, else the first of the next round", () => {
  const chars = ["a", null, "c", null];
  const order = ["a", "c"];
  assert.deepEqual(expectedTurn(chars, order, { round: 2, index: 0 }), { char: "a", round: 2 });
  assert.deepEqual(expectedTurn(chars, order, { round: 2, index: 1 }), { char: "c", round: 2 });
  assert.deepEqual(expectedTurn(chars, order, { round: 2, index: 3 }), { char: "a", round: 3 });
  assert.deepEqual(expectedTurn(chars, order, { round: 4, index: 1 }, 2), { char: "c", round: 2 }); // round offset
  assert.equal(expectedTurn([null], [], { round: 1, index: 0 }), null);
});

test("linkedTurns and serverBehind compare in Foundry's order", () => {
  const chars = ["a", null, "c"];
  const positions = walk(3, { round: 1, index: 0 }, { round: 2, index: 1 });
  assert.deepEqual(linkedTurns(chars, ["a", "c"], positions), [
    { char: "a", round: 1, index: 0 },
    { char: "c", round: 1, index: 2 },
    { char: "a", round: 2, index: 0 },
  ]);
  assert.equal(serverBehind(chars, { char: "a", round: 1 }, { char: "c", round: 1 }), true);
  assert.equal(serverBehind(chars, { char: "a", round: 2 }, { char: "c", round: 1 }), false);
  assert.equal(serverBehind(chars, { char: "x", round: 1 }, { char: "c", round: 1 }), null);
});

test("ids: derived from the event", () => {
  assert.equal(turnId("C1", 3, 2, "fvtt-A1", 57), "turn:C1:3.2:fvtt-A1@57");
});

test("undoStep: a step back is an undo only when the server says undo reverts an end_turn now", () => {
  // What the server says the GM's undo reverts (state.affordances.undo): the module works nothing out.
  assert.deepEqual(undoStep({ undo: { v: 11, op: "end_turn", by: "u1" } }), { ok: true, v: 11 });
  assert.deepEqual(undoStep({ undo: { v: 12, op: "damage", by: "u1" } }), { ok: false, reason: "not_last", v: 12 });
  const nothing = { key: "undo_nothing" };
  assert.deepEqual(undoStep({ undo: { why: nothing } }), { ok: false, reason: "undo", why: nothing });
  assert.equal(undoStep({ undo: { why: { key: "undo_gm_only" } } }).ok, false);
  assert.equal(undoStep(undefined).ok, false); // a server without affordances: no step back
});
