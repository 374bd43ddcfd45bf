// Recorded traces (foundry/tools/recorder): what a real Foundry's hooks
// looked like, as shapes, per client and in order. A trace is replayed by
// running the same steps in the stand-in with the recorder's own entry()
// attached and comparing. Real traces come from a licensed Foundry
// (README, check-list step 11); this one is hand-written from the
// documented behaviour (foundry-vtt-types v13.345.1 client/hooks.d.mts and
// client/documents/combat.d.mts), so it checks the format and the replay,
// and the stand-in against what the documentation says.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { HOOKS, entry, shapeOf } from "../tools/recorder/shape.mjs";
import { serverForFile, sfrpgSheet } from "./harness.mjs";

const table = serverForFile("t");
const TRACE = JSON.parse(readFileSync(new URL("./traces/hand-v13-core-start-next.json", import.meta.url), "utf8"));

function record(client) {
  const seen = [];
  for (const hook of HOOKS) client.Hooks.on(hook, (...args) => void seen.push(entry(hook, args)));
  return seen;
}

/** The differences between a trace's entries and the replay's, as text. */
export function compare(expected, actual) {
  const out = [];
  const n = Math.max(expected.length, actual.length);
  for (let i = 0; i < n; i++) {
    const e = JSON.stringify(expected[i] ?? null);
    const a = JSON.stringify(actual[i] ?? null);
    if (e !== a) out.push(`#${i}: trace ${e}\n     replay ${a}`);
  }
  return out;
}

test("the shapes: documents by name, objects by their key paths, no values", () => {
  assert.deepEqual(shapeOf({ documentName: "Combat", name: "secret" }), { doc: "Combat" });
  assert.deepEqual(shapeOf({ worldTime: { delta: 6 }, direction: 1 }), { keys: ["direction", "worldTime.delta"] });
  assert.deepEqual(shapeOf({ "flags.sfrpg.phase": 0, round: 1 }), { keys: ["flags.sfrpg.phase", "round"] });
  assert.equal(shapeOf("a token value"), "string");
  assert.doesNotMatch(JSON.stringify(entry("combatTurn", [{ documentName: "Combat" }, { round: 2 }, { advanceTime: 6 }])), /\b6\b|\b2\b/);
});

test("replay: a hand-written v13 trace of a GM starting a combat and passing a round matches the stand-in, client by client", async () => {
  assert.equal(TRACE.format, "vtt-sync-hook-trace/1");
  const t = await table({ generation: 13 });
  const aline = await t.actor({ name: "Aline", system: sfrpgSheet() });
  await t.gm.mod.sheets.link(t.gm.client.actor(aline));
  const cid = t.world.addCombat({});
  const combat = t.gm.client.combat(cid);
  await combat.createEmbeddedDocuments("Combatant", [{ actorId: aline, initiative: 10 }]);
  await t.settle();
  const seen = { gm: record(t.gm.client), player: record(t.player.client) };
  // The steps of the trace: start the combat, next turn (a new round).
  await combat.startCombat();
  await t.settle();
  await combat.nextTurn();
  await t.settle();
  // Only the combat's hooks are compared (the module's own sheet and clock writes follow).
  const combatOnly = (list) => list.filter((e) => /ombat/.test(e.hook));
  for (const [who, expected] of Object.entries(TRACE.clients)) {
    assert.deepEqual(compare(expected, combatOnly(seen[who.split(":")[0]])), [], who);
  }
  // The comparison does see a difference (a trace whose round hook had no worldTime).
  const wrong = structuredClone(TRACE.clients["gm:U1"]);
  wrong.find((e) => e.hook === "combatRound").options = ["advanceTime", "direction"];
  assert.notDeepEqual(compare(wrong, combatOnly(seen.gm)), []);
  t.close();
});
