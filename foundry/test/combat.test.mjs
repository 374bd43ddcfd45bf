// Foundry's tracker against the server's combat: the pure planning functions.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  MAX_WALK,
  expectedTurn,
  linkedOrder,
  linkedTurns,
  parseTurnId,
  planUndo,
  serverBehind,
  turnId,
  undoCandidates,
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
};

test("linkedOrder: linked combatants in Foundry's order, once each, no dead newcomer (D6)", () => {
  assert.deepEqual(linkedOrder(["a", null, "b", "c", "a", "d", "zz"], state), ["a", "c", "d"]);
  // d is dead but already in the server's order: it stays; b is dead and new: left out; zz is not in the room.
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

test("ids: derived from the event, parsed back", () => {
  const id = turnId("C1", 3, 2, "fvtt-A1", 57);
  assert.equal(id, "turn:C1:3.2:fvtt-A1@57");
  assert.deepEqual(parseTurnId(id), { combatId: "C1", round: 3, index: 2, char: "fvtt-A1", v: 57 });
  assert.equal(parseTurnId("clock:0->60@3"), null);
});

const patch = (v, id, events = [{ kind: "turn" }]) => ({ v, id, events });

test("undoCandidates: what undo would revert, newest first, skipping undos, what they undid and user commands", () => {
  const history = [
    patch(10, "turn:C1:1.0:a@9"),
    patch(11, "turn:C1:1.2:c@10"),
    patch(12, "x-1", [{ kind: "user", change: "added" }]),
    patch(13, "y-2", [{ kind: "damage" }]),
    patch(14, "undo:13@13", [{ kind: "undo", undone: 13, op: "damage" }]),
  ];
  assert.deepEqual(
    undoCandidates(history, 2).map((p) => p.v),
    [11, 10],
  );
});

test("planUndo: a step back is the undo of the module's own last end_turns, else refused with the reason", () => {
  const history = [patch(10, "turn:C1:1.0:a@9"), patch(11, "turn:C1:1.2:c@10")];
  assert.deepEqual(
    planUndo(history, [{ char: "c", round: 1 }], "C1").undo.map((p) => p.v),
    [11],
  );
  assert.deepEqual(
    planUndo(
      history,
      [
        { char: "a", round: 1 },
        { char: "c", round: 1 },
      ],
      "C1",
    ).undo.map((p) => p.v),
    [11, 10],
  );
  assert.deepEqual(planUndo(history, [], "C1"), { ok: true, undo: [] });
  assert.equal(planUndo(history, [{ char: "a", round: 1 }], "C1").reason, "not_last");
  assert.equal(planUndo(history, [{ char: "c", round: 1 }], "C2").reason, "not_last"); // another combat's
  assert.equal(
    planUndo([...history, patch(12, "z", [{ kind: "damage" }])], [{ char: "c", round: 1 }], "C1").reason,
    "not_last",
  );
  assert.equal(
    planUndo(
      history.slice(1),
      [
        { char: "a", round: 1 },
        { char: "c", round: 1 },
      ],
      "C1",
    ).reason,
    "history",
  );
});
