// What a player may do from a sheet, from the room's state.
import assert from "node:assert/strict";
import { test } from "node:test";

import { availableActions, stabilizeCost } from "../scripts/actions.mjs";

function char(extra = {}) {
  return {
    name: "X",
    condition: "conscious",
    pv: 10,
    pp: 6,
    pp_max: 6,
    activity: null,
    healer: null,
    regained_this_turn: false,
    ...extra,
  };
}

const ops = (list) =>
  list.map(
    (a) => `${a.op}${a.args.patient ? `:${a.args.patient}` : ""}${a.args.kind ? `:${a.args.kind}` : ""}`,
  );

test("a conscious character: first aid on the dying, tending the untended stable, rests", () => {
  const state = {
    combat: null,
    characters: {
      me: char(),
      dy: char({ condition: "dying", pv: 0 }),
      st: char({ condition: "stable", pv: 0 }),
      tended: char({ condition: "stable", pv: 0, healer: "other" }),
    },
  };
  assert.deepEqual(ops(availableActions(state, "me")), [
    "first_aid:dy",
    "tend:st",
    "rest:short",
    "rest:night",
    "rest:bed",
  ]);
});

test("in combat, resting, tending, out of PP: the rests that the rules allow", () => {
  const base = { me: char(), st: char({ condition: "stable", pv: 0, healer: "me" }) };
  assert.deepEqual(ops(availableActions({ combat: null, characters: base }, "me")), ["untend:st"]); // L4: no rest while tending
  const resting = { me: char({ activity: { kind: "night", ends: 100 } }) };
  assert.deepEqual(ops(availableActions({ combat: null, characters: resting }, "me")), ["stop_rest"]);
  const fighting = { combat: { order: ["me"], turn: 0, round: 1 }, characters: { me: char() } };
  assert.deepEqual(ops(availableActions(fighting, "me")), []); // R4
  const broke = { combat: null, characters: { me: char({ pp: 0 }) } };
  assert.deepEqual(ops(availableActions(broke, "me")), ["rest:night", "rest:bed"]); // R1 ruling: no short rest at 0 PP
});

test("dying: stabilise when the PP cover S3's cost and the allowance is free; stable: continue the fight", () => {
  assert.equal(stabilizeCost({ pp_max: 6 }), 1);
  assert.equal(stabilizeCost({ pp_max: 9 }), 2);
  assert.equal(stabilizeCost({ pp_max: 20 }), 3);
  const dying = (extra) => ({
    combat: null,
    characters: { me: char({ condition: "dying", pv: 0, pp_max: 9, ...extra }) },
  });
  assert.deepEqual(ops(availableActions(dying({ pp: 2 }), "me")), ["stabilize"]);
  assert.deepEqual(ops(availableActions(dying({ pp: 1 }), "me")), []);
  assert.deepEqual(ops(availableActions(dying({ pp: 5, regained_this_turn: true }), "me")), []);
  const stable = {
    combat: null,
    characters: { me: char({ condition: "stable", pv: 0, healer: "h" }), h: char() },
  };
  assert.deepEqual(ops(availableActions(stable, "me")), ["stay_in_fight", "untend:me"]);
  assert.deepEqual(availableActions({ characters: { me: char({ condition: "dead" }) } }, "me"), []);
  assert.deepEqual(availableActions({ characters: {} }, "me"), []);
});
