// The browser client's applyOps refuses a path that names `__proto__`,
// `constructor` or `prototype` (issue 19: a crafted op below a room file's
// snapshot, served to a GM's sync, polluted Object.prototype), and a path
// through an inherited key; honest ops still apply.
import { test } from "node:test";
import assert from "node:assert/strict";

import { FORBIDDEN_KEYS, applyOps } from "../../client_stub/web/vtt-sync-client.js";

test("a patch naming __proto__, constructor or prototype is refused, nothing polluted", () => {
  const crafted = [
    ["set", ["__proto__", "polluted"], "yes"],
    ["set", ["characters", "__proto__", "polluted"], "yes"],
    ["set", ["constructor", "prototype", "polluted"], "yes"],
    ["set", ["characters", "constructor", "prototype", "polluted"], "yes"],
    ["del", ["__proto__", "toString"]],
    ["set", ["prototype"], 1],
  ];
  for (const op of crafted) {
    const state = { characters: { c1: { name: "Ayla" } } };
    assert.throws(() => applyOps(state, [op]), /may not hold/);
    assert.equal({}.polluted, undefined);
    assert.equal(Object.prototype.polluted, undefined);
    assert.deepEqual(state, { characters: { c1: { name: "Ayla" } } });
  }
  assert.deepEqual([...FORBIDDEN_KEYS].sort(), ["__proto__", "constructor", "prototype"]);
});

test("a path through an inherited key or a missing map is refused", () => {
  const state = { characters: {} };
  assert.throws(() => applyOps(state, [["set", ["toString", "x"], 1]]), /no place/);
  assert.throws(() => applyOps(state, [["set", ["characters", "c9", "pv"], 1]]), /no place/);
  assert.throws(() => applyOps(state, [["set", [1, "x"], 1]]), /may not hold/);
  assert.equal(Function.prototype.x, undefined);
});

test("honest ops apply as before", () => {
  const state = { characters: { c1: { pv: 10 } }, clock: 0 };
  applyOps(state, [
    ["set", ["characters", "c1", "pv"], 7],
    ["set", ["characters", "c2"], { pv: 3 }],
    ["del", ["clock"]],
  ]);
  assert.deepEqual(state, { characters: { c1: { pv: 7 }, c2: { pv: 3 } } });
});
